/* view_request.c — parsing and checking the viewer's requests (pure functions). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view/view_request.h"

static const char *const map_names[] = {"map1", "map2", "diff"};

const char *dfl_view_map_name(dfl_view_map m)
{
    return (unsigned)m < DFL_VIEW_NMAPS ? map_names[m] : "?";
}

/* ------------------------------------------------------------- parameters */

enum {
    P_D,
    P_S,
    P_L,
    P_H,
    P_M,
    P_MINUS,
    P_Z,
    P_X,
    P_Y,
    P_Q,
    P_K,
    P_TOPK,
    P_WIDTH,
    P_PX,
    P_VMIN,
    P_VMAX,
    P_SCALE,
    P_CMAP,
    P_POOL,
    P_REV,
    P_DIV,
    P_COUNT
};
static const char *const param_names[P_COUNT] = {"d",    "s",    "l",     "h",    "m",    "minus", "z",
                                                 "x",    "y",    "q",     "k",    "topk", "width", "px",
                                                 "vmin", "vmax", "scale", "cmap", "pool", "rev",   "div"};

#define B(p)   (1u << (p))
#define MAPSEL (B(P_D) | B(P_S) | B(P_L) | B(P_H))

/* The fixed table of paths: what each takes and needs. */
static const struct endpoint {
    const char *path;
    dfl_view_kind kind;
    int asset;
    unsigned allowed, required;
} endpoints[] = {
    {"/", DFL_VIEW_ASSET, 0, 0, 0},
    {"/index.html", DFL_VIEW_ASSET, 0, 0, 0},
    {"/app.js", DFL_VIEW_ASSET, 1, 0, 0},
    {"/app.css", DFL_VIEW_ASSET, 2, 0, 0},
    {"/api/dumps", DFL_VIEW_DUMPS, 0, 0, 0},
    {"/api/sample", DFL_VIEW_SAMPLE, 0, B(P_D) | B(P_S), B(P_D) | B(P_S)},
    {"/api/limits", DFL_VIEW_LIMITS, 0, MAPSEL | B(P_M) | B(P_MINUS) | B(P_POOL), MAPSEL | B(P_M)},
    {"/api/tile", DFL_VIEW_TILE_REQ, 0,
     MAPSEL | B(P_M) | B(P_MINUS) | B(P_Z) | B(P_X) | B(P_Y) | B(P_VMIN) | B(P_VMAX) | B(P_SCALE) | B(P_CMAP) |
         B(P_POOL) | B(P_REV),
     MAPSEL | B(P_M) | B(P_Z) | B(P_X) | B(P_Y) | B(P_VMIN) | B(P_VMAX)},
    {"/api/thumb", DFL_VIEW_THUMB, 0, MAPSEL | B(P_M) | B(P_MINUS) | B(P_PX) | B(P_CMAP) | B(P_REV), MAPSEL | B(P_M)},
    {"/api/cell", DFL_VIEW_CELL, 0, MAPSEL | B(P_Q) | B(P_K), MAPSEL | B(P_Q) | B(P_K)},
    {"/api/row", DFL_VIEW_ROW, 0, MAPSEL | B(P_M) | B(P_Q) | B(P_MINUS) | B(P_TOPK) | B(P_WIDTH),
     MAPSEL | B(P_M) | B(P_Q)},
    {"/api/colormap", DFL_VIEW_COLORMAP, 0, B(P_CMAP), 0},
    {"/api/ticks", DFL_VIEW_TICKS, 0, B(P_VMIN) | B(P_VMAX) | B(P_SCALE) | B(P_DIV), B(P_VMIN) | B(P_VMAX)},
    {"/api/image", DFL_VIEW_IMAGE, 0, B(P_D) | B(P_S), B(P_D) | B(P_S)},
};

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decode src[0..n) into dst[cap] (NUL-terminated); '+' is a space. 0 when it
 * does not fit or an escape is malformed or decodes to NUL. */
static int unescape(const char *src, size_t n, char *dst, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)src[i];
        if (c == '%') {
            if (i + 2 >= n) return 0;
            int a = hexval((unsigned char)src[i + 1]), b = hexval((unsigned char)src[i + 2]);
            if (a < 0 || b < 0 || (a | b) == 0) return 0;
            c = a * 16 + b;
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (o + 1 >= cap) return 0;
        dst[o++] = (char)c;
    }
    dst[o] = 0;
    return 1;
}

/* A whole decimal integer in [lo, hi]. */
static int parse_int(const char *name, const char *v, int64_t lo, int64_t hi, int64_t *out, dfl_error *err)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi || !((*v >= '0' && *v <= '9') || *v == '-')) {
        dfl__fail(err, DFL_ERR_USAGE, "parameter %s: expected an integer in [%lld, %lld], got '%.40s'", name,
                  (long long)lo, (long long)hi, v);
        return 400;
    }
    *out = x;
    return 0;
}

static int parse_param(int p, const char *v, dfl_view_request *r, dfl_error *err)
{
    const char *name = param_names[p];
    const int64_t BIG = (int64_t)1 << 40;
    switch (p) {
    case P_D: return parse_int(name, v, 0, DFL_VIEW_MAX_DUMPS - 1, &r->dump, err);
    case P_MINUS: return parse_int(name, v, 0, DFL_VIEW_MAX_DUMPS - 1, &r->minus, err);
    case P_S: return parse_int(name, v, 0, BIG, &r->sample, err);
    case P_L: return parse_int(name, v, 0, BIG, &r->layer, err);
    case P_H: return parse_int(name, v, 0, BIG, &r->head, err);
    case P_Z: return parse_int(name, v, 0, 62, &r->z, err);
    case P_X: return parse_int(name, v, 0, BIG, &r->x, err);
    case P_Y: return parse_int(name, v, 0, BIG, &r->y, err);
    case P_Q: return parse_int(name, v, 0, BIG, &r->q, err);
    case P_K: return parse_int(name, v, 0, BIG, &r->k, err);
    case P_TOPK: return parse_int(name, v, 1, DFL_VIEW_MAX_TOPK, &r->topk, err);
    case P_WIDTH: return parse_int(name, v, 1, DFL_VIEW_MAX_WIDTH, &r->width, err);
    case P_PX: return parse_int(name, v, 16, DFL_VIEW_TILE, &r->px, err);
    case P_M:
        for (int i = 0; i < DFL_VIEW_NMAPS; i++)
            if (!strcmp(v, map_names[i])) {
                r->map = (dfl_view_map)i;
                r->has_map = 1;
                return 0;
            }
        dfl__fail(err, DFL_ERR_USAGE, "parameter m: expected map1, map2 or diff, got '%.40s'", v);
        return 400;
    case P_VMIN:
    case P_VMAX: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x) || fabs(x) > 1e30) {
            dfl__fail(err, DFL_ERR_USAGE, "parameter %s: expected a finite number, got '%.40s'", name, v);
            return 400;
        }
        *(p == P_VMIN ? &r->vmin : &r->vmax) = x;
        return 0;
    }
    case P_SCALE:
        if (dfl_scale_parse(v, &r->scale, err)) return 400;
        return 0;
    case P_CMAP:
        if (dfl_cmap_parse(v, &r->cmap, err)) return 400;
        return 0;
    case P_POOL:
        if (dfl_pool_parse(v, &r->pool, err)) return 400;
        return 0;
    case P_DIV: {
        int64_t d;
        int code = parse_int(name, v, 0, 1, &d, err);
        r->diverging = (int)d;
        return code;
    }
    case P_REV: {
        int64_t ignored;
        return parse_int(name, v, 0, 1000000000, &ignored, err);
    }
    }
    return 400;
}

/* --------------------------------------------------------------------- parse */

int dfl_view_request_parse(const char *method, const char *target, dfl_view_request *out, dfl_error *err)
{
    dfl_view_request r;
    memset(&r, 0, sizeof r);
    r.dump = r.sample = r.layer = r.head = r.minus = r.z = r.x = r.y = r.q = r.k = -1;
    r.li = r.hi = r.ri = -1;
    r.topk = 10;
    r.width = 512;
    r.px = 96;
    r.map = DFL_VIEW_MAP1;
    r.scale = DFL_SCALE_LINEAR;
    r.cmap = DFL_CMAP_VIRIDIS;
    r.pool = DFL_POOL_MEAN;
    *out = r;
    if (!method || !target) {
        dfl__fail(err, DFL_ERR_USAGE, "no request");
        return 400;
    }
    if (!strcmp(method, "HEAD"))
        r.head_only = 1;
    else if (strcmp(method, "GET")) {
        dfl__fail(err, DFL_ERR_USAGE, "method %.16s not allowed (GET or HEAD)", method);
        return 405;
    }
    size_t len = strnlen(target, DFL_VIEW_MAX_TARGET + 1);
    if (len > DFL_VIEW_MAX_TARGET) {
        dfl__fail(err, DFL_ERR_USAGE, "request target longer than %d bytes", DFL_VIEW_MAX_TARGET);
        return 414;
    }
    const char *qm = memchr(target, '?', len);
    size_t plen = qm ? (size_t)(qm - target) : len;
    const struct endpoint *ep = NULL;
    for (size_t i = 0; i < sizeof endpoints / sizeof endpoints[0]; i++)
        if (strlen(endpoints[i].path) == plen && !memcmp(endpoints[i].path, target, plen)) ep = &endpoints[i];
    if (!ep) {
        dfl__fail(err, DFL_ERR_RANGE, "no such page: %.*s", (int)(plen < 80 ? plen : 80), target);
        return 404;
    }
    r.kind = ep->kind;
    r.asset = ep->asset;

    unsigned seen = 0;
    const char *at = qm ? qm + 1 : target + len, *end = target + len;
    while (at < end) {
        const char *amp = memchr(at, '&', (size_t)(end - at));
        const char *stop = amp ? amp : end;
        if (stop > at) {
            const char *eq = memchr(at, '=', (size_t)(stop - at));
            char key[16], val[64];
            size_t klen = eq ? (size_t)(eq - at) : (size_t)(stop - at);
            if (!unescape(at, klen, key, sizeof key)) {
                dfl__fail(err, DFL_ERR_USAGE, "malformed parameter name");
                return 400;
            }
            int p = -1;
            for (int i = 0; i < P_COUNT; i++)
                if (!strcmp(key, param_names[i])) p = i;
            if (p < 0 || !(ep->allowed & B(p))) {
                dfl__fail(err, DFL_ERR_USAGE, "%s takes no parameter '%s'", ep->path, key);
                return 400;
            }
            if (seen & B(p)) {
                dfl__fail(err, DFL_ERR_USAGE, "parameter %s given twice", key);
                return 400;
            }
            seen |= B(p);
            if (!eq) {
                dfl__fail(err, DFL_ERR_USAGE, "parameter %s has no value", key);
                return 400;
            }
            if (!unescape(eq + 1, (size_t)(stop - eq - 1), val, sizeof val)) {
                dfl__fail(err, DFL_ERR_USAGE, "parameter %s: malformed or longer than %d bytes", key,
                          (int)sizeof val - 1);
                return 400;
            }
            int code = parse_param(p, val, &r, err);
            if (code) return code;
        }
        at = stop + 1;
    }
    unsigned missing = ep->required & ~seen;
    if (missing) {
        int p = 0;
        while (!(missing & B(p)))
            p++;
        dfl__fail(err, DFL_ERR_USAGE, "%s needs parameter '%s'", ep->path, param_names[p]);
        return 400;
    }
    if ((seen & B(P_VMIN)) && (seen & B(P_VMAX))) {
        r.has_limits = 1;
        /* (a log scale's vmin > 0 is checked where it is known whether the map is signed) */
        if (!(r.vmin < r.vmax)) {
            dfl__fail(err, DFL_ERR_USAGE, "colour limits vmin %g, vmax %g: need vmin < vmax", r.vmin, r.vmax);
            return 400;
        }
    }
    *out = r;
    return 0;
}

/* --------------------------------------------------------------------- check */

int64_t dfl_view_zmax(int64_t R, int64_t T)
{
    int64_t n = R > T ? R : T, z = 0;
    while (z < 62 && (n + ((int64_t)1 << z) - 1) >> z > DFL_VIEW_TILE)
        z++;
    return z;
}

void dfl_view_tiles(int64_t R, int64_t T, int64_t z, int64_t *nx, int64_t *ny)
{
    int64_t span = (int64_t)DFL_VIEW_TILE << z; /* cells per tile side */
    if (nx) *nx = (T + span - 1) / span;
    if (ny) *ny = (R + span - 1) / span;
}

static int64_t find32(const int32_t *v, int64_t n, int64_t x)
{
    for (int64_t i = 0; i < n; i++)
        if (v[i] == x) return i;
    return -1;
}

static int not_found(dfl_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int not_found(dfl_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[sizeof err->msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dfl__fail(err, DFL_ERR_RANGE, "%s", msg);
    return 404;
}

int dfl_view_request_check(const dfl_view_catalog *cat, dfl_view_request *req, dfl_error *err)
{
    dfl_view_kind k = req->kind;
    if (k == DFL_VIEW_ASSET || k == DFL_VIEW_DUMPS || k == DFL_VIEW_COLORMAP || k == DFL_VIEW_TICKS) return 0;
    if (req->dump < 0 || req->sample < 0) {
        dfl__fail(err, DFL_ERR_USAGE, "needs parameters d and s");
        return 400;
    }
    if ((size_t)req->dump >= cat->ndumps)
        return not_found(err, "no dump %lld (there %s %zu: 0..%zu)", (long long)req->dump,
                         cat->ndumps == 1 ? "is" : "are", cat->ndumps, cat->ndumps ? cat->ndumps - 1 : 0);
    const dfl_view_dump_info *d = &cat->dumps[req->dump];
    if ((size_t)req->sample >= d->nsamples)
        return not_found(err, "dump %lld has no sample %lld (samples 0..%zu)", (long long)req->dump,
                         (long long)req->sample, d->nsamples ? d->nsamples - 1 : 0);
    const dfl_view_sample_info *si = &d->samples[req->sample];
    if (k == DFL_VIEW_SAMPLE) return 0;
    if (k == DFL_VIEW_IMAGE)
        return si->image ? 0
                         : not_found(err, "sample %lld of dump %lld is not an image sample", (long long)req->sample,
                                     (long long)req->dump);
    if (!si->maps)
        return not_found(err, "sample %lld of dump %lld has no attention maps (probe --maps)", (long long)req->sample,
                         (long long)req->dump);
    if ((req->li = find32(si->layers, si->Ls, req->layer)) < 0)
        return not_found(err, "layer %lld not captured (layers: %d..%d, %lld of them)", (long long)req->layer,
                         si->Ls ? si->layers[0] : 0, si->Ls ? si->layers[si->Ls - 1] : 0, (long long)si->Ls);
    if ((req->hi = find32(si->heads, si->Hs, req->head)) < 0)
        return not_found(err, "head %lld not captured (heads: %d..%d, %lld of them)", (long long)req->head,
                         si->Hs ? si->heads[0] : 0, si->Hs ? si->heads[si->Hs - 1] : 0, (long long)si->Hs);
    if (k != DFL_VIEW_CELL && !(si->maps & (1u << req->map)))
        return not_found(err, "this dump has no %s map", dfl_view_map_name(req->map));
    if (req->minus >= 0) {
        if ((size_t)req->minus >= cat->ndumps) return not_found(err, "no dump %lld to subtract", (long long)req->minus);
        const dfl_view_dump_info *o = &cat->dumps[req->minus];
        const dfl_view_sample_info *so = (size_t)req->sample < o->nsamples ? &o->samples[req->sample] : NULL;
        if (!so || so->sig != si->sig || so->T != si->T || so->R != si->R)
            return not_found(err, "dump %lld's sample %lld has other tokens or rows: no delta", (long long)req->minus,
                             (long long)req->sample);
        if (find32(so->layers, so->Ls, req->layer) < 0 || find32(so->heads, so->Hs, req->head) < 0 ||
            !(so->maps & (1u << req->map)))
            return not_found(err, "dump %lld has no %s of layer %lld, head %lld to subtract", (long long)req->minus,
                             dfl_view_map_name(req->map), (long long)req->layer, (long long)req->head);
    }
    if (k == DFL_VIEW_TILE_REQ) {
        int64_t zmax = dfl_view_zmax(si->R, si->T), nx, ny;
        if (req->z > zmax) return not_found(err, "zoom level %lld beyond %lld", (long long)req->z, (long long)zmax);
        dfl_view_tiles(si->R, si->T, req->z, &nx, &ny);
        if (req->x >= nx || req->y >= ny)
            return not_found(err, "no tile (%lld, %lld) at level %lld (%lld x %lld tiles)", (long long)req->x,
                             (long long)req->y, (long long)req->z, (long long)nx, (long long)ny);
    }
    if (k == DFL_VIEW_CELL || k == DFL_VIEW_ROW) {
        if ((req->ri = find32(si->rows, si->R, req->q)) < 0)
            return not_found(err, "query row %lld not captured (%lld rows, %d..%d)", (long long)req->q,
                             (long long)si->R, si->R ? si->rows[0] : 0, si->R ? si->rows[si->R - 1] : 0);
        if (k == DFL_VIEW_CELL && req->k >= si->T)
            return not_found(err, "key %lld beyond the %lld tokens", (long long)req->k, (long long)si->T);
    }
    return 0;
}
