/* render_pool.c — downsampling a grid by area-weighted mean or by the entry farthest
 * from 0, streamed row by row, and its naive twin.
 *
 * Geometry, in integer "scaled units" so that weights are exact: source row i covers
 * [i·out_rows, (i+1)·out_rows) and output row y covers [y·rows, (y+1)·rows). Since
 * out_rows <= rows, a source row overlaps one output row, or two at a boundary; the
 * weight is the length of the overlap. Columns alike. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "render_internal.h"

struct dfl_pool {
    int64_t rows, cols, orows, ocols;
    dfl_pool_mode mode;
    int32_t *x0;     /* [cols]  first output column of source column j */
    double *wx0;     /* [cols]  its overlap with x0[j] */
    double *wx1;     /* [cols]  overlap with x0[j] + 1 (0 when none) */
    double *sum;     /* [orows][ocols]  MEAN: Σ w·v */
    double *wsum;    /* [orows][ocols]  MEAN: Σ w over data */
    float *best;     /* [orows][ocols]  MAX: entry farthest from 0 so far (NaN = none) */
    double *rsum;    /* [ocols]  one source row pooled along x (MEAN) */
    double *rw;      /* [ocols] */
    float *rbest;    /* [ocols]  (MAX) */
};

static const char *const pool_names[] = {"mean", "max"};

const char *dfl_pool_name(dfl_pool_mode m) { return (unsigned)m < 2 ? pool_names[m] : "?"; }

dfl_status dfl_pool_parse(const char *name, dfl_pool_mode *out, dfl_error *err)
{
    for (int i = 0; i < 2; i++)
        if (!strcmp(name, pool_names[i])) {
            *out = (dfl_pool_mode)i;
            return DFL_OK;
        }
    return dfl__fail(err, DFL_ERR_USAGE, "pooling '%s' is not mean or max", name);
}

/* Overlap of source index i with output index o along an axis of n source and m
 * output cells (scaled units). */
static double overlap(int64_t i, int64_t o, int64_t n, int64_t m)
{
    int64_t a0 = i * m, a1 = (i + 1) * m, b0 = o * n, b1 = (o + 1) * n;
    int64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? (double)(hi - lo) : 0.0;
}

/* The entry farthest from 0 of a and b; on a tie the positive one (order-free). */
static float farther(float a, float b)
{
    if (isnan(a)) return b;
    if (isnan(b)) return a;
    float fa = fabsf(a), fb = fabsf(b);
    if (fa != fb) return fa > fb ? a : b;
    return a > b ? a : b;
}

void dfl_pool_destroy(dfl_pool *p)
{
    if (!p) return;
    free(p->x0);
    free(p->wx0);
    free(p->wx1);
    free(p->sum);
    free(p->wsum);
    free(p->best);
    free(p->rsum);
    free(p->rw);
    free(p->rbest);
    free(p);
}

dfl_status dfl_pool_create(int64_t rows, int64_t cols, int64_t out_rows, int64_t out_cols, dfl_pool_mode mode,
                           dfl_pool **out, dfl_error *err)
{
    *out = NULL;
    if (rows < 1 || cols < 1 || out_rows < 1 || out_cols < 1 || out_rows > rows || out_cols > cols ||
        rows > INT32_MAX || cols > INT32_MAX)
        return dfl__fail(err, DFL_ERR_USAGE, "pooling %lld x %lld to %lld x %lld: sizes must be >= 1 and shrink",
                         (long long)rows, (long long)cols, (long long)out_rows, (long long)out_cols);
    size_t n;
    if (!dfl__mul_ok((size_t)out_rows, (size_t)out_cols, &n))
        return dfl__fail(err, DFL_ERR_NOMEM, "pooled grid too large");
    dfl_pool *p = calloc(1, sizeof *p);
    if (!p) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    p->rows = rows;
    p->cols = cols;
    p->orows = out_rows;
    p->ocols = out_cols;
    p->mode = mode;
    int ok = (p->x0 = dfl__alloc_array((size_t)cols, sizeof *p->x0)) &&
             (p->wx0 = dfl__alloc_array((size_t)cols, sizeof *p->wx0)) &&
             (p->wx1 = dfl__alloc_array((size_t)cols, sizeof *p->wx1));
    if (mode == DFL_POOL_MEAN)
        ok = ok && (p->sum = dfl__calloc_array(n, sizeof *p->sum)) && (p->wsum = dfl__calloc_array(n, sizeof *p->wsum)) &&
             (p->rsum = dfl__alloc_array((size_t)out_cols, sizeof *p->rsum)) &&
             (p->rw = dfl__alloc_array((size_t)out_cols, sizeof *p->rw));
    else
        ok = ok && (p->best = dfl__alloc_array(n, sizeof *p->best)) &&
             (p->rbest = dfl__alloc_array((size_t)out_cols, sizeof *p->rbest));
    if (!ok) {
        dfl_pool_destroy(p);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a %lld x %lld pooled grid", (long long)out_rows,
                         (long long)out_cols);
    }
    if (p->best)
        for (size_t i = 0; i < n; i++) p->best[i] = NAN;
    for (int64_t j = 0; j < cols; j++) {
        int64_t x = j * out_cols / cols;
        p->x0[j] = (int32_t)x;
        p->wx0[j] = overlap(j, x, cols, out_cols);
        p->wx1[j] = x + 1 < out_cols ? overlap(j, x + 1, cols, out_cols) : 0.0;
    }
    *out = p;
    return DFL_OK;
}

void dfl_pool_rows(dfl_pool *p, int64_t row0, int64_t n, const float *data)
{
    const int64_t C = p->cols, OC = p->ocols;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = row0 + k;
        if (i < 0 || i >= p->rows) continue;
        const float *row = data + k * C;
        int64_t y = i * p->orows / p->rows;
        double wy[2] = {overlap(i, y, p->rows, p->orows),
                        y + 1 < p->orows ? overlap(i, y + 1, p->rows, p->orows) : 0.0};
        if (p->mode == DFL_POOL_MEAN) {
            /* pool the row along x, then add it to the (one or two) output rows it covers */
            memset(p->rsum, 0, (size_t)OC * sizeof *p->rsum);
            memset(p->rw, 0, (size_t)OC * sizeof *p->rw);
            for (int64_t j = 0; j < C; j++) {
                float v = row[j];
                if (v != v) continue; /* NaN: no data */
                int32_t x = p->x0[j];
                p->rsum[x] += p->wx0[j] * v;
                p->rw[x] += p->wx0[j];
                if (p->wx1[j] > 0) {
                    p->rsum[x + 1] += p->wx1[j] * v;
                    p->rw[x + 1] += p->wx1[j];
                }
            }
            for (int t = 0; t < 2; t++) {
                if (wy[t] <= 0) continue;
                double *s = p->sum + (y + t) * OC, *w = p->wsum + (y + t) * OC;
                for (int64_t x = 0; x < OC; x++) {
                    s[x] += wy[t] * p->rsum[x];
                    w[x] += wy[t] * p->rw[x];
                }
            }
        } else {
            for (int64_t x = 0; x < OC; x++) p->rbest[x] = NAN;
            for (int64_t j = 0; j < C; j++) {
                float v = row[j];
                if (v != v) continue;
                int32_t x = p->x0[j];
                p->rbest[x] = farther(p->rbest[x], v);
                if (p->wx1[j] > 0) p->rbest[x + 1] = farther(p->rbest[x + 1], v);
            }
            for (int t = 0; t < 2; t++) {
                if (wy[t] <= 0) continue;
                float *b = p->best + (y + t) * OC;
                for (int64_t x = 0; x < OC; x++) b[x] = farther(b[x], p->rbest[x]);
            }
        }
    }
}

void dfl_pool_result(const dfl_pool *p, float *out)
{
    size_t n = (size_t)p->orows * (size_t)p->ocols;
    if (p->mode == DFL_POOL_MAX) {
        memcpy(out, p->best, n * sizeof *out);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = p->wsum[i] > 0 ? (float)(p->sum[i] / p->wsum[i]) : NAN;
}

/* ------------------------------------------------------------ naive twin */

void dfl_pool_naive(const float *in, int64_t rows, int64_t cols, int64_t out_rows, int64_t out_cols,
                    dfl_pool_mode mode, float *out)
{
    for (int64_t y = 0; y < out_rows; y++)
        for (int64_t x = 0; x < out_cols; x++) {
            double s = 0, w = 0;
            float best = NAN;
            /* every source entry whose rectangle meets this cell */
            for (int64_t i = 0; i < rows; i++) {
                double oy = overlap(i, y, rows, out_rows);
                if (oy <= 0) continue;
                for (int64_t j = 0; j < cols; j++) {
                    double ox = overlap(j, x, cols, out_cols);
                    float v = in[i * cols + j];
                    if (ox <= 0 || isnan(v)) continue;
                    s += oy * ox * v;
                    w += oy * ox;
                    best = farther(best, v);
                }
            }
            out[y * out_cols + x] = mode == DFL_POOL_MAX ? best : (w > 0 ? (float)(s / w) : NAN);
        }
}
