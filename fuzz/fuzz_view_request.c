/* fuzz_view_request.c — libFuzzer target for bin/view's request parser and its checks
 * against a catalog: any method and target must give a request or a clean 4xx status
 * with a message, and an accepted request must name only things the catalog holds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "view/view_request.h"

static const int32_t L02[] = {0, 2}, H1[] = {1, 3}, ROWS[] = {3, 5, 9, 700};
static const dfl_view_sample_info S0[] = {{1000, 4, 2, 2, L02, H1, ROWS, 1u, 42, 0},
                                          {10, 0, 0, 0, NULL, NULL, NULL, 0, 42, 0}};
static const dfl_view_sample_info S1[] = {{1000, 4, 2, 2, L02, H1, ROWS, 7u, 42, 1}}; /* an image sample */
static const dfl_view_dump_info DUMPS[] = {{2, S0}, {1, S1}};
static const dfl_view_catalog CAT = {2, DUMPS};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const methods[] = {"GET", "HEAD", "POST", "PUT"};
    if (size < 1 || size > 4 * DFL_VIEW_MAX_TARGET) return 0;
    char *target = malloc(size);
    if (!target) return 0;
    memcpy(target, data + 1, size - 1);
    target[size - 1] = 0; /* the target as microhttpd hands it over: NUL-terminated */
    dfl_view_request r;
    dfl_error err = {0};
    int code = dfl_view_request_parse(methods[data[0] & 3], target, &r, &err);
    if (code && (code < 400 || code > 414 || !err.msg[0])) abort();
    if (!code) {
        if (r.dump >= DFL_VIEW_MAX_DUMPS || r.minus >= DFL_VIEW_MAX_DUMPS || r.z > 62 || r.topk < 1 ||
            r.topk > DFL_VIEW_MAX_TOPK || r.width < 1 || r.width > DFL_VIEW_MAX_WIDTH || r.px < 16 ||
            r.px > DFL_VIEW_TILE || (unsigned)r.map >= DFL_VIEW_NMAPS || (r.has_limits && !(r.vmin < r.vmax)))
            abort();
        code = dfl_view_request_check(&CAT, &r, &err);
        if (code && code != 400 && code != 404) abort();
        if (!code && r.kind != DFL_VIEW_ASSET && r.kind != DFL_VIEW_DUMPS && r.kind != DFL_VIEW_COLORMAP &&
            r.kind != DFL_VIEW_TICKS) {
            if (r.dump < 0 || (size_t)r.dump >= CAT.ndumps || r.sample < 0 ||
                (size_t)r.sample >= CAT.dumps[r.dump].nsamples)
                abort();
            const dfl_view_sample_info *s = &CAT.dumps[r.dump].samples[r.sample];
            if (r.kind != DFL_VIEW_SAMPLE) {
                if (r.li < 0 || r.li >= s->Ls || r.hi < 0 || r.hi >= s->Hs || s->layers[r.li] != r.layer ||
                    s->heads[r.hi] != r.head)
                    abort();
                if ((r.kind == DFL_VIEW_CELL || r.kind == DFL_VIEW_ROW) &&
                    (r.ri < 0 || r.ri >= s->R || s->rows[r.ri] != r.q))
                    abort();
                if (r.kind == DFL_VIEW_CELL && (r.k < 0 || r.k >= s->T)) abort();
                if (r.kind == DFL_VIEW_TILE_REQ) {
                    int64_t nx, ny;
                    if (r.z > dfl_view_zmax(s->R, s->T)) abort();
                    dfl_view_tiles(s->R, s->T, r.z, &nx, &ny);
                    if (r.x >= nx || r.y >= ny) abort();
                }
            }
        }
    }
    free(target);
    return 0;
}
