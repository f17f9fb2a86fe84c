/* probe_quant.c — probe --quant-stats: moments and channel energies of the linear layers'
 * inputs, mean |q| and |k| per head and dimension (probe_quant.h). */
#include "analysis/probe_quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_schema.h"
#include "model/forward.h"

static const char *const SITE_DS[DFL_LINEAR_COUNT] = {DFL_DS_LINEAR_ATTN_IN, DFL_DS_LINEAR_ATTN_OUT,
                                                      DFL_DS_LINEAR_MLP_IN, DFL_DS_LINEAR_DOWN_IN};

struct dfl__qstats {
    int64_t L;
    double *moments;                 /* [L, SITES, 6]: count, Σx, Σx², Σx³, Σx⁴, max |x| */
    int64_t width[DFL_LINEAR_COUNT]; /* 0 until the site is first seen */
    double *chan[DFL_LINEAR_COUNT];  /* [L, width]: Σx² per channel */
    int64_t nq, nk, hd, T;           /* 0 until qk is first called */
    double *qabs, *kabs;             /* [L, nq, hd], [L, nk, hd]: Σ_t |q|, Σ_t |k| */
};

dfl__qstats *dfl__qstats_create(int64_t L)
{
    dfl__qstats *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->L = L;
    q->moments = dfl__alloc_array((size_t)L * DFL_LINEAR_COUNT * 6, sizeof *q->moments);
    if (!q->moments) {
        free(q);
        return NULL;
    }
    memset(q->moments, 0, (size_t)L * DFL_LINEAR_COUNT * 6 * sizeof *q->moments);
    return q;
}

void dfl__qstats_free(dfl__qstats *q)
{
    if (!q) return;
    for (int s = 0; s < DFL_LINEAR_COUNT; s++)
        free(q->chan[s]);
    free(q->moments), free(q->qabs), free(q->kabs), free(q);
}

dfl_status dfl__qstats_linear(void *user, int64_t layer, int site, int64_t row0, int64_t n, int64_t width,
                              const float *x, int64_t ld, dfl_error *err)
{
    (void)row0;
    dfl__qstats *q = user;
    if (site < 0 || site >= DFL_LINEAR_COUNT || layer < 0 || layer >= q->L)
        return dfl__fail(err, DFL_ERR_RANGE, "quant stats: site %d of layer %lld", site, (long long)layer);
    if (!q->width[site]) {
        q->chan[site] = calloc((size_t)q->L * (size_t)width, sizeof *q->chan[site]);
        if (!q->chan[site]) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for quant stats");
        q->width[site] = width;
    } else if (q->width[site] != width) {
        return dfl__fail(err, DFL_ERR_RANGE, "quant stats: site %d of width %lld, earlier %lld", site, (long long)width,
                         (long long)q->width[site]);
    }
    double *m = q->moments + ((size_t)layer * DFL_LINEAR_COUNT + (size_t)site) * 6;
    double *ch = q->chan[site] + (size_t)layer * (size_t)width;
    double s1 = 0, s2 = 0, s3 = 0, s4 = 0, mx = m[5];
    for (int64_t t = 0; t < n; t++) { /* x[n, width] at stride ld */
        const float *r = x + t * ld;
        for (int64_t c = 0; c < width; c++) {
            double v = r[c], v2 = v * v;
            s1 += v, s2 += v2, s3 += v2 * v, s4 += v2 * v2;
            ch[c] += v2;
            if (fabs(v) > mx) mx = fabs(v);
        }
    }
    m[0] += (double)n * (double)width, m[1] += s1, m[2] += s2, m[3] += s3, m[4] += s4, m[5] = mx;
    return DFL_OK;
}

dfl_status dfl__qstats_qk(void *user, int64_t layer, int64_t T, const float *qv, int64_t nq, int64_t q_ld,
                          const float *kv, int64_t nk, int64_t k_ld, int64_t hd, dfl_error *err)
{
    dfl__qstats *q = user;
    if (!q->qabs) {
        q->qabs = calloc((size_t)q->L * (size_t)(nq * hd), sizeof *q->qabs);
        q->kabs = calloc((size_t)q->L * (size_t)(nk * hd), sizeof *q->kabs);
        if (!q->qabs || !q->kabs) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for quant stats");
        q->nq = nq, q->nk = nk, q->hd = hd, q->T = T;
    }
    double *qa = q->qabs + (size_t)layer * (size_t)(nq * hd), *ka = q->kabs + (size_t)layer * (size_t)(nk * hd);
    for (int64_t t = 0; t < T; t++) { /* q [T, q_ld]: head h's dims at h * hd */
        for (int64_t i = 0; i < nq * hd; i++)
            qa[i] += fabs((double)qv[t * q_ld + i]);
        for (int64_t i = 0; i < nk * hd; i++)
            ka[i] += fabs((double)kv[t * k_ld + i]);
    }
    return DFL_OK;
}

dfl_status dfl__qstats_write(const dfl__qstats *q, dfl_dump *d, dfl_error *err)
{
    int64_t dims[3] = {q->L, DFL_LINEAR_COUNT, 6};
    dfl_status s = dfl_dump_put(d, DFL_DS_LINEAR_MOMENTS, DFL_H5_F64, 3, dims, q->moments, err);
    if (!s) s = dfl_dump_attr_str(d, DFL_DS_LINEAR_MOMENTS, DFL_ATTR_COLUMNS, "count,sum,sum2,sum3,sum4,max_abs", err);
    if (!s) s = dfl_dump_attr_str(d, DFL_DS_LINEAR_MOMENTS, DFL_ATTR_SITES, "attn_in,attn_out,mlp_in,down_in", err);
    for (int site = 0; site < DFL_LINEAR_COUNT && !s; site++) {
        if (!q->width[site]) continue;
        int64_t cd[2] = {q->L, q->width[site]};
        s = dfl_dump_put(d, SITE_DS[site], DFL_H5_F64, 2, cd, q->chan[site], err);
    }
    if (!s && q->qabs) {
        size_t nq = (size_t)q->L * (size_t)(q->nq * q->hd), nk = (size_t)q->L * (size_t)(q->nk * q->hd);
        float *buf = dfl__alloc_array(nq > nk ? nq : nk, sizeof *buf);
        if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for quant stats");
        for (size_t i = 0; i < nq; i++)
            buf[i] = (float)(q->qabs[i] / (double)q->T);
        int64_t qd[3] = {q->L, q->nq, q->hd}, kd[3] = {q->L, q->nk, q->hd};
        s = dfl_dump_put(d, DFL_DS_QK_Q_ABS, DFL_H5_F32, 3, qd, buf, err);
        for (size_t i = 0; i < nk && !s; i++)
            buf[i] = (float)(q->kabs[i] / (double)q->T);
        if (!s) s = dfl_dump_put(d, DFL_DS_QK_K_ABS, DFL_H5_F32, 3, kd, buf, err);
        free(buf);
    }
    return s;
}
