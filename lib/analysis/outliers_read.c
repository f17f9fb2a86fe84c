/* outliers_read.c — one sample's outlier datasets through its open groups (see
 * outliers_read.h). */
#include "analysis/outliers_read.h"

#include <stdio.h>

#include "dump/dump_schema.h"

/* One kind's top, top_index, hist and moments (and the hidden channel profile), read
 * relative to the group of that kind. */
static int read_kind(const dfl_dump_reader *r, const char *group, int k, int64_t L, int64_t K, int64_t B, int64_t D,
                     dfl__outliers_sample *out)
{
    static const char *const kinds[2] = {"outliers/logits", "outliers/hidden"};
    char path[512];
    if (snprintf(path, sizeof path, "%s/%s", group, kinds[k]) >= (int)sizeof path) return 0;
    dfl_dump_group *g = NULL;
    dfl_error quiet;
    if (dfl_dump_group_open(r, path, &g, &quiet)) return 0;
    int64_t d_top[2] = {L, K}, d_idx[3] = {L, K, k ? 2 : 4}, d_hist[2] = {L, B}, d_mom[2] = {L, 6};
    int ok = dfl_dump_group_read_exact(g, "top", DFL_H5_F32, 2, d_top, out->top[k]) &&
             dfl_dump_group_read_exact(g, "top_index", DFL_H5_I32, 3, d_idx, out->idx[k]) &&
             dfl_dump_group_read_exact(g, "hist", DFL_H5_U64, 2, d_hist, out->hist[k]) &&
             dfl_dump_group_read_exact(g, "moments", DFL_H5_F64, 2, d_mom, out->mom[k]);
    if (ok && k == 1) {
        int64_t d_abs[2] = {L, D}, d_cnt[2] = {L, D};
        ok = dfl_dump_group_read_exact(g, "channel_absmax", DFL_H5_F32, 2, d_abs, out->cabs) &&
             dfl_dump_group_read_exact(g, "channel_count", DFL_H5_U32, 2, d_cnt, out->ccnt);
    }
    dfl_dump_group_close(g);
    return ok;
}

int dfl__outliers_read_sample(const dfl_dump_reader *r, const char *group, int64_t L, int64_t K, int64_t B, int64_t D,
                              dfl__outliers_sample *out)
{
    dfl_dump_group *g = NULL;
    dfl_error quiet;
    if (dfl_dump_group_open(r, group, &g, &quiet)) return 0;
    int64_t t[1] = {-1};
    int ok = dfl_dump_group_read_exact(g, DFL_DS_TOKENS, DFL_H5_I32, 1, t, NULL);
    dfl_dump_group_close(g);
    if (!ok) return 0;
    out->tokens = t[0];
    return read_kind(r, group, 0, L, K, B, D, out) && read_kind(r, group, 1, L, K, B, D, out);
}
