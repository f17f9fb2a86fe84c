/* render_pool.c — downsampling a grid by area-weighted mean or by the entry farthest
 * from 0, streamed in blocks of rows, and its naive twin. Hand-written because cairo
 * only resamples a whole image in memory (a 4096² f32 map is 64 MB) and has no max pool:
 * this one pools each block of rows as it is read, in parallel.
 *
 * Geometry, in integer "scaled units" so that weights are exact: source row i covers
 * [i·out_rows, (i+1)·out_rows) and output row y covers [y·rows, (y+1)·rows). Since
 * out_rows <= rows, a source row overlaps one output row, or two at a boundary; the
 * weight is the length of the overlap. Columns alike.
 *
 * A block's rows are cut into groups: up to GROUP consecutive rows that reach the same
 * output row (a row across a boundary belongs to two groups, one per output row, with
 * its two weights). Each group is pooled along x into a scratch row (independent
 * groups: OpenMP), then the scratch rows are added to the grid in block order (OpenMP
 * over output rows or over column strips; either way every cell sees the same
 * additions in the same order, so the result does not depend on the thread count).
 *
 * Along x: when out_cols divides cols, every source column lies in exactly one output
 * column with the same weight, and a row is pooled by plain sums (or maxima) over runs
 * of f = cols/out_cols columns (the fast path). Otherwise a group's rows are first
 * added up column by column, and the column totals scattered into their one or two
 * output columns with their weights. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "render/render_internal.h"

/* Blocks smaller than this many source entries stay on one thread. */
#define PAR_MIN (1 << 16)
/* Scratch for at most this many bytes of pooled groups; bigger blocks are done in
 * chunks, which keeps the scratch in the caches between the two passes. */
#define SCRATCH_BYTES (1 << 20)
/* At most this many source rows in a group. */
#define GROUP 8
/* Output columns per strip when the grid is shared out by columns. */
#define STRIP 128

#define DFL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

/* Block rows r0 .. r1-1, all reaching output row y. */
typedef struct group {
    int64_t y, r0, r1;
    int64_t xend; /* output columns >= xend got nothing from the group */
} group;

struct dfl_pool {
    int64_t rows, cols, orows, ocols;
    dfl_pool_mode mode;
    int64_t f;      /* cols / ocols when that is exact (fast path), else 0 */
    int32_t *x0;    /* [cols]  first output column of source column j */
    double *wx0;    /* [cols]  its overlap with x0[j] */
    double *wx1;    /* [cols]  overlap with x0[j] + 1 (0 when none) */
    double *sum;    /* [orows][ocols]  MEAN: Σ w·v */
    double *wsum;   /* [orows][ocols]  MEAN: Σ w over data */
    uint32_t *best; /* [orows][ocols]  MAX: far_key of the entry farthest from 0 so far (0 = none) */
    uint8_t *ready; /* [orows]  row y of the grid zeroed yet (else never reached: no data) */
    /* Scratch for one chunk of a block, grown on demand and kept; never allocated in a
     * parallel region. The fast path leaves out the x weight every column shares
     * (out_cols): all cells share it, so the means are unchanged. */
    int64_t cap;   /* groups */
    group *grp;    /* [cap] */
    int64_t *slot; /* [cap + 1]  the groups of output row y0 + s are slot[s] .. slot[s+1]-1 */
    double *rs;    /* MEAN [cap][2][ocols]  group g pooled: Σ wy·v, then Σ wy over data */
    uint32_t *rk;  /* MAX  [cap][ocols]     group g pooled: max far_key */
    /* Any ratio only: a column buffer per thread, [ncolbuf][2][cols] doubles (MEAN) or
     * [ncolbuf][cols] keys (MAX), for the column totals of a group. */
    int64_t ncolbuf;
    unsigned char *colbuf;
};

static const char *const pool_names[] = {"mean", "max"};

const char *dfl_pool_name(dfl_pool_mode m)
{
    return (unsigned)m < 2 ? pool_names[m] : "?";
}

dfl_status dfl_pool_parse(const char *name, dfl_pool_mode *out, dfl_error *err)
{
    int i = dfl__name_index(name, pool_names, 2);
    if (i < 0) return dfl__fail(err, DFL_ERR_USAGE, "pooling '%s' is not mean or max", name);
    *out = (dfl_pool_mode)i;
    return DFL_OK;
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

/* An unsigned key whose maximum is the entry farthest from 0, ties to the positive
 * one: |v|'s bits (ordered like |v|) above a "positive" bit, plus 1 so that NaN (no
 * data) is 0, below everything. +Inf gives 0xff000002: no overflow. */
static inline uint32_t far_key(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    uint32_t k = ((b << 1) | (~b >> 31)) + 1u;
    return v == v ? k : 0u;
}

static float far_value(uint32_t k)
{
    if (!k) return NAN;
    k -= 1u;
    uint32_t b = (k >> 1) | ((~k & 1u) << 31);
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* v with NaN (no data) replaced by 0, by masking its bits: a select between a
 * converted v and 0 counts as a possible trap (-ftrapping-math) and keeps a loop
 * scalar, this does not. */
static inline float nan_to_zero(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    b &= -(uint32_t)(v == v);
    memcpy(&v, &b, sizeof v);
    return v;
}

/* ------------------------------------------------------------ create, free */

void dfl_pool_destroy(dfl_pool *p)
{
    if (!p) return;
    free(p->x0);
    free(p->wx0);
    free(p->wx1);
    free(p->sum);
    free(p->wsum);
    free(p->best);
    free(p->ready);
    free(p->grp);
    free(p->slot);
    free(p->rs);
    free(p->rk);
    free(p->colbuf);
    free(p);
}

/* Bytes of one scratch row. */
static size_t scratch_row_bytes(const dfl_pool *p)
{
    return (size_t)p->ocols * (p->mode == DFL_POOL_MEAN ? 2 * sizeof *p->rs : sizeof *p->rk);
}

/* Room for `want` groups. Short of memory, the old room stays (at least two, from
 * create) and blocks are done in smaller chunks. */
static void scratch_grow(dfl_pool *p, int64_t want)
{
    size_t bytes;
    if (want <= p->cap || !dfl__mul_ok((size_t)want, scratch_row_bytes(p), &bytes)) return;
    if (p->mode == DFL_POOL_MEAN) {
        double *r = realloc(p->rs, bytes);
        if (!r) return;
        p->rs = r;
    } else {
        uint32_t *r = realloc(p->rk, bytes);
        if (!r) return;
        p->rk = r;
    }
    group *g = realloc(p->grp, (size_t)want * sizeof *g);
    if (!g) return;
    p->grp = g;
    int64_t *s = realloc(p->slot, ((size_t)want + 1) * sizeof *s);
    if (!s) return;
    p->slot = s;
    p->cap = want;
}

/* Bytes of one thread's column buffer. */
static size_t colbuf_bytes(const dfl_pool *p)
{
    return (size_t)p->cols * (p->mode == DFL_POOL_MEAN ? 2 * sizeof(double) : sizeof(uint32_t));
}

/* Column buffers for `want` threads. Short of memory, the old ones stay (at least one,
 * from create) and fewer threads are used. */
static void colbuf_grow(dfl_pool *p, int64_t want)
{
    size_t bytes;
    if (want <= p->ncolbuf || !dfl__mul_ok((size_t)want, colbuf_bytes(p), &bytes)) return;
    unsigned char *b = realloc(p->colbuf, bytes);
    if (!b) return;
    p->colbuf = b;
    p->ncolbuf = want;
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
    p->f = cols % out_cols ? 0 : cols / out_cols;
    int ok = (p->x0 = dfl__alloc_array((size_t)cols, sizeof *p->x0)) &&
             (p->wx0 = dfl__alloc_array((size_t)cols, sizeof *p->wx0)) &&
             (p->wx1 = dfl__alloc_array((size_t)cols, sizeof *p->wx1)) &&
             (p->ready = calloc((size_t)out_rows, sizeof *p->ready));
    /* not zeroed here: see ready_row */
    if (mode == DFL_POOL_MEAN)
        ok = ok && (p->sum = dfl__alloc_array(n, sizeof *p->sum)) && (p->wsum = dfl__alloc_array(n, sizeof *p->wsum));
    else
        ok = ok && (p->best = dfl__alloc_array(n, sizeof *p->best));
    if (ok) scratch_grow(p, 2); /* a row across two output rows makes two groups */
    if (ok && !p->f) colbuf_grow(p, 1);
    if (!ok || p->cap < 2 || (!p->f && p->ncolbuf < 1)) {
        dfl_pool_destroy(p);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a %lld x %lld pooled grid", (long long)out_rows,
                         (long long)out_cols);
    }
    for (int64_t j = 0; j < cols; j++) {
        int64_t x = j * out_cols / cols;
        p->x0[j] = (int32_t)x;
        p->wx0[j] = overlap(j, x, cols, out_cols);
        p->wx1[j] = x + 1 < out_cols ? overlap(j, x + 1, cols, out_cols) : 0.0;
    }
    *out = p;
    return DFL_OK;
}

/* ------------------------------------------------------------ the x pass */

/* Fast path, MEAN: s[x] += wy·(Σ of the non-NaN entries of row[x·f .. x·f+f)), w[x] +=
 * wy·(their count), for x < ng. Inlined with a constant f for the common factors, so
 * that the inner loop unrolls and the vectorizer sees a fixed interleave. */
static inline __attribute__((always_inline)) void mean_runs(const float *restrict row, int64_t ng, int64_t f, double wy,
                                                            double *restrict s, double *restrict w)
{
#pragma omp simd
    for (int64_t x = 0; x < ng; x++) {
        double a = 0.0;
        int32_t c = 0;
#pragma GCC unroll 8
        for (int64_t t = 0; t < f; t++) {
            float v = row[x * f + t];
            a += (double)nan_to_zero(v);
            c += v == v;
        }
        s[x] += wy * a;
        w[x] += wy * c;
    }
}

/* The same for long runs: vectorized along the run. */
static inline __attribute__((always_inline)) void mean_runs_long(const float *restrict row, int64_t ng, int64_t f,
                                                                 double wy, double *restrict s, double *restrict w)
{
    for (int64_t x = 0; x < ng; x++) {
        const float *g = row + x * f;
        double a = 0.0, c = 0.0;
#pragma omp simd reduction(+ : a, c)
        for (int64_t t = 0; t < f; t++) {
            float v = g[t];
            a += (double)nan_to_zero(v);
            c += v == v ? 1.0 : 0.0;
        }
        s[x] += wy * a;
        w[x] += wy * c;
    }
}

/* Fast path, MAX: k[x] = max(k[x], far_key over row[x·f .. x·f+f)), x < ng. */
static inline __attribute__((always_inline)) void max_runs(const float *restrict row, int64_t ng, int64_t f,
                                                           uint32_t *restrict k)
{
#pragma omp simd
    for (int64_t x = 0; x < ng; x++) {
        uint32_t m = k[x];
#pragma GCC unroll 16
        for (int64_t t = 0; t < f; t++) {
            uint32_t q = far_key(row[x * f + t]);
            m = q > m ? q : m;
        }
        k[x] = m;
    }
}

static inline __attribute__((always_inline)) void max_runs_long(const float *restrict row, int64_t ng, int64_t f,
                                                                uint32_t *restrict k)
{
    for (int64_t x = 0; x < ng; x++) {
        const float *g = row + x * f;
        uint32_t m = k[x];
#pragma omp simd reduction(max : m)
        for (int64_t t = 0; t < f; t++) {
            uint32_t q = far_key(g[t]);
            m = q > m ? q : m;
        }
        k[x] = m;
    }
}

/* Output columns that the first len entries of a source row reach: [0, xend). */
static int64_t xend_of(const dfl_pool *p, int64_t len)
{
    if (len <= 0) return 0;
    if (p->f) return (len + p->f - 1) / p->f;
    return p->x0[len - 1] + 1 + (p->wx1[len - 1] > 0);
}

/* Fast path: add the first len entries of a source row row[cols], pooled along x and
 * weighted by wy, into s, w [ocols] (MEAN) or k [ocols] (MAX). */
DFL_CLONES static void xpool_exact(const dfl_pool *p, const float *row, int64_t len, double wy, double *s, double *w,
                                   uint32_t *k)
{
    const int64_t f = p->f, ng = len / f;
    if (p->mode == DFL_POOL_MEAN) {
        switch (f) {
        case 1: mean_runs(row, ng, 1, wy, s, w); break;
        case 2: mean_runs(row, ng, 2, wy, s, w); break;
        case 3: mean_runs(row, ng, 3, wy, s, w); break;
        case 4: mean_runs(row, ng, 4, wy, s, w); break;
        case 8: mean_runs(row, ng, 8, wy, s, w); break;
        default:
            if (f >= 16)
                mean_runs_long(row, ng, f, wy, s, w);
            else
                mean_runs(row, ng, f, wy, s, w);
        }
        /* the run cut short by len */
        double a = 0.0, c = 0.0;
        for (int64_t t = ng * f; t < len; t++)
            if (row[t] == row[t]) a += row[t], c += 1.0;
        if (c > 0) s[ng] += wy * a, w[ng] += wy * c;
    } else {
        switch (f) {
        case 1: max_runs(row, ng, 1, k); break;
        case 2: max_runs(row, ng, 2, k); break;
        case 3: max_runs(row, ng, 3, k); break;
        case 4: max_runs(row, ng, 4, k); break;
        case 8: max_runs(row, ng, 8, k); break;
        case 16: max_runs(row, ng, 16, k); break;
        default:
            if (f >= 16)
                max_runs_long(row, ng, f, k);
            else
                max_runs(row, ng, f, k);
        }
        for (int64_t t = ng * f; t < len; t++) {
            uint32_t q = far_key(row[t]);
            k[ng] = q > k[ng] ? q : k[ng];
        }
    }
}

/* Any ratio, first step: add a source row's first len entries, weighted by wy, to
 * per-column totals: cs += wy·v and cc += wy where v is data (MEAN), ck = max far_key
 * (MAX). */
DFL_CLONES static void col_add(const dfl_pool *p, const float *restrict row, int64_t len, double wy,
                               double *restrict cs, double *restrict cc, uint32_t *restrict ck)
{
    if (p->mode == DFL_POOL_MEAN) {
#pragma omp simd
        for (int64_t j = 0; j < len; j++) {
            float v = row[j];
            cs[j] += wy * (double)nan_to_zero(v);
            cc[j] += v == v ? wy : 0.0;
        }
    } else {
#pragma omp simd
        for (int64_t j = 0; j < len; j++) {
            uint32_t q = far_key(row[j]);
            ck[j] = q > ck[j] ? q : ck[j];
        }
    }
}

/* Any ratio, second step: scatter the first len column totals into their one or two
 * output columns with their x weights. */
static void col_scatter(const dfl_pool *p, int64_t len, const double *cs, const double *cc, const uint32_t *ck,
                        double *s, double *w, uint32_t *k)
{
    if (p->mode == DFL_POOL_MEAN) {
        for (int64_t j = 0; j < len; j++) {
            if (cc[j] == 0) continue; /* no data in this column */
            int32_t x = p->x0[j];
            s[x] += p->wx0[j] * cs[j];
            w[x] += p->wx0[j] * cc[j];
            if (p->wx1[j] > 0) {
                s[x + 1] += p->wx1[j] * cs[j];
                w[x + 1] += p->wx1[j] * cc[j];
            }
        }
    } else {
        for (int64_t j = 0; j < len; j++) {
            int32_t x = p->x0[j];
            k[x] = ck[j] > k[x] ? ck[j] : k[x];
            if (p->wx1[j] > 0) k[x + 1] = ck[j] > k[x + 1] ? ck[j] : k[x + 1];
        }
    }
}

/* Pool group g of the block starting at source row row0 (block row r at data + r·ld,
 * lengths valid or all) into its scratch row: each row weighted by its overlap with
 * the group's output row. colbuf: the calling thread's column buffer (any ratio). */
static void xpool_group(dfl_pool *p, int64_t g, int64_t row0, const float *data, int64_t ld, const int64_t *valid,
                        void *colbuf)
{
    group *gr = &p->grp[g];
    const int64_t C = p->cols, OC = p->ocols;
    double *s = p->rs ? p->rs + g * 2 * OC : NULL, *w = s ? s + OC : NULL;
    uint32_t *k = p->rk ? p->rk + g * OC : NULL;
    int64_t lmax = 0;
    for (int64_t r = gr->r0; r < gr->r1; r++) {
        int64_t len = !valid ? C : valid[r] > C ? C : valid[r];
        lmax = len > lmax ? len : lmax;
    }
    gr->xend = xend_of(p, lmax);
    if (s) {
        memset(s, 0, (size_t)gr->xend * sizeof *s);
        memset(w, 0, (size_t)gr->xend * sizeof *w);
    } else {
        memset(k, 0, (size_t)gr->xend * sizeof *k);
    }
    if (p->f) {
        for (int64_t r = gr->r0; r < gr->r1; r++) {
            int64_t len = !valid ? C : valid[r] > C ? C : valid[r];
            double wy = overlap(row0 + r, gr->y, p->rows, p->orows);
            if (len > 0) xpool_exact(p, data + r * ld, len, wy, s, w, k);
        }
        return;
    }
    /* any ratio: the scatter is scalar, so add the group's rows up column by column
     * first (contiguous, vectorized) and scatter once per group, not once per row */
    double *cs = s ? colbuf : NULL, *cc = s ? cs + C : NULL;
    uint32_t *ck = s ? NULL : colbuf;
    if (s) {
        memset(cs, 0, (size_t)lmax * sizeof *cs);
        memset(cc, 0, (size_t)lmax * sizeof *cc);
    } else {
        memset(ck, 0, (size_t)lmax * sizeof *ck);
    }
    for (int64_t r = gr->r0; r < gr->r1; r++) {
        int64_t len = !valid ? C : valid[r] > C ? C : valid[r];
        double wy = overlap(row0 + r, gr->y, p->rows, p->orows);
        if (len > 0) col_add(p, data + r * ld, len, wy, cs, cc, ck);
    }
    col_scatter(p, lmax, cs, cc, ck, s, w, k);
}

/* ------------------------------------------------------------ the y pass */

/* Zero output row y of the grid the first time a block reaches it, in the thread that
 * then adds into it: the row's fresh pages are faulted in by a write, there and then,
 * and rows never reached cost nothing. (A calloc'ed grid is mapped to the shared zero
 * page on its first read, in the y pass, and copied on the write: each copy a TLB
 * shootdown to the other threads, which made the y pass several times slower than
 * all of its arithmetic.) */
static void ready_row(dfl_pool *p, int64_t y)
{
    if (p->ready[y]) return;
    const size_t OC = (size_t)p->ocols;
    if (p->mode == DFL_POOL_MEAN) {
        memset(p->sum + y * p->ocols, 0, OC * sizeof *p->sum);
        memset(p->wsum + y * p->ocols, 0, OC * sizeof *p->wsum);
    } else {
        memset(p->best + y * p->ocols, 0, OC * sizeof *p->best);
    }
    p->ready[y] = 1;
}

/* Add group g's scratch row into columns [xa, xb) of its output row. */
DFL_CLONES static void add_group(dfl_pool *p, int64_t g, int64_t xa, int64_t xb)
{
    const group *gr = &p->grp[g];
    const int64_t OC = p->ocols;
    if (gr->xend < xb) xb = gr->xend;
    if (p->mode == DFL_POOL_MEAN) {
        const double *restrict rs = p->rs + g * 2 * OC, *restrict rw = rs + OC;
        double *restrict s = p->sum + gr->y * OC, *restrict w = p->wsum + gr->y * OC;
#pragma omp simd
        for (int64_t x = xa; x < xb; x++) {
            s[x] += rs[x];
            w[x] += rw[x];
        }
    } else {
        const uint32_t *restrict rk = p->rk + g * OC;
        uint32_t *restrict b = p->best + gr->y * OC;
#pragma omp simd
        for (int64_t x = xa; x < xb; x++)
            b[x] = rk[x] > b[x] ? rk[x] : b[x];
    }
}

/* ------------------------------------------------------------ streaming */

/* Whether source row i lies wholly inside one output row. */
static int row_inside(const dfl_pool *p, int64_t i)
{
    int64_t y = i * p->orows / p->rows;
    return (i + 1) * p->orows <= (y + 1) * p->rows;
}

/* Cut block rows k .. k1-1 (source rows row0 + k ..) into at most cap groups, stopping
 * early when they are full; returns how many, with *end the first row left over. The
 * groups reach output rows y0 .. y0 + *ns - 1, in order, and slot[] lists them by
 * output row. The cut depends on the geometry only, never on the thread count. */
static int64_t cut_groups(dfl_pool *p, int64_t row0, int64_t k, int64_t k1, int64_t *end, int64_t *ns)
{
    int64_t ng = 0, r = k;
    for (; r < k1 && ng + 2 <= p->cap; r++) {
        int64_t i = row0 + r, y = i * p->orows / p->rows;
        group *last = ng ? &p->grp[ng - 1] : NULL;
        if (last && last->y == y && last->r1 - last->r0 < GROUP)
            last->r1 = r + 1;
        else
            p->grp[ng++] = (group){y, r, r + 1, 0};
        /* across the boundary: the row also opens the next output row's group */
        if (!row_inside(p, i)) p->grp[ng++] = (group){y + 1, r, r + 1, 0};
    }
    *end = r;
    int64_t y0 = p->grp[0].y, s = 0;
    for (int64_t g = 0; g < ng; g++)
        while (y0 + s <= p->grp[g].y)
            p->slot[s++] = g;
    p->slot[s] = ng;
    *ns = s;
    return ng;
}

void dfl_pool_rows_valid(dfl_pool *p, int64_t row0, int64_t n, const float *data, int64_t ld, const int64_t *valid)
{
    if (n <= 0) return;
    /* rows outside the grid are ignored: clip the block to [k0, k1) */
    int64_t k0 = row0 < 0 ? -row0 : 0, k1 = row0 > p->rows - n ? p->rows - row0 : n;
    if (k1 <= k0) return;
    int64_t want = (int64_t)(SCRATCH_BYTES / scratch_row_bytes(p));
    want = want > 2 * (k1 - k0) ? 2 * (k1 - k0) : want;
    scratch_grow(p, want);
    int nth = omp_get_max_threads();
    if (!p->f) {
        colbuf_grow(p, nth);
        nth = p->ncolbuf < nth ? (int)p->ncolbuf : nth;
    }
    const size_t cb = colbuf_bytes(p);
    const int64_t C = p->cols, OC = p->ocols, nstrip = (OC + STRIP - 1) / STRIP;
    for (int64_t k = k0; k < k1;) {
        int64_t end, ns;
        const int64_t ng = cut_groups(p, row0, k, k1, &end, &ns), y0 = p->grp[0].y;
        const int par = ng > 1 && (end - k) * C >= PAR_MIN;
#pragma omp parallel if (par) num_threads(nth)
        {
            void *mine = p->colbuf ? p->colbuf + (size_t)omp_get_thread_num() * cb : NULL;
            /* Two ways to share the work, with the same additions in the same order:
             * by output row when there are enough (a thread then adds only groups it
             * pooled itself, from its own cache, with no barrier between), else by
             * column strip. Rows, groups and strips are dealt round-robin: with a
             * causal mask the later rows are longer and the left strips fuller. */
            if (ns >= 2 * omp_get_num_threads()) {
#pragma omp for schedule(static, 1)
                for (int64_t s = 0; s < ns; s++) {
                    ready_row(p, y0 + s);
                    const int64_t ga = p->slot[s], gb = p->slot[s + 1];
                    for (int64_t g = ga; g < gb; g++)
                        xpool_group(p, g, row0, data, ld, valid, mine);
                    for (int64_t g = ga; g < gb; g++)
                        add_group(p, g, 0, OC);
                }
            } else {
#pragma omp for schedule(static, 1) nowait
                for (int64_t s = 0; s < ns; s++)
                    ready_row(p, y0 + s);
#pragma omp for schedule(static, 1)
                for (int64_t g = 0; g < ng; g++)
                    xpool_group(p, g, row0, data, ld, valid, mine);
#pragma omp for schedule(static, 1)
                for (int64_t b = 0; b < nstrip; b++) {
                    const int64_t xa = b * STRIP, xb = xa + STRIP < OC ? xa + STRIP : OC;
                    for (int64_t g = 0; g < ng; g++)
                        add_group(p, g, xa, xb);
                }
            }
        }
        k = end;
    }
}

void dfl_pool_rows(dfl_pool *p, int64_t row0, int64_t n, const float *data)
{
    dfl_pool_rows_valid(p, row0, n, data, p->cols, NULL);
}

void dfl_pool_result(const dfl_pool *p, float *out)
{
    const int64_t OC = p->ocols;
#pragma omp parallel for schedule(static) if (p->orows * OC >= 65536)
    for (int64_t y = 0; y < p->orows; y++) {
        float *o = out + y * OC;
        if (!p->ready[y])
            for (int64_t x = 0; x < OC; x++)
                o[x] = NAN;
        else if (p->mode == DFL_POOL_MAX)
            for (int64_t x = 0; x < OC; x++)
                o[x] = far_value(p->best[y * OC + x]);
        else
            for (int64_t x = 0; x < OC; x++) {
                size_t i = (size_t)(y * OC + x);
                o[x] = p->wsum[i] > 0 ? (float)(p->sum[i] / p->wsum[i]) : NAN;
            }
    }
}

/* ------------------------------------------------------------ naive twin */

void dfl_pool_naive(const float *in, int64_t rows, int64_t cols, int64_t out_rows, int64_t out_cols, dfl_pool_mode mode,
                    float *out)
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

/* ------------------------------------------------------------- quantiles */

/* Quickselect with a median-of-three pivot and Hoare partition: a sort of the 4M values
 * of a large map took most of a viewer preview's time. */
float dfl_quantile_select(float *v, size_t n, double q)
{
    size_t k = (size_t)floor(q * (double)(n - 1) + 0.5), lo = 0, hi = n - 1;
    if (k >= n) k = n - 1;
    while (lo < hi) {
        /* median of three as the pivot, Hoare partition */
        size_t mid = lo + (hi - lo) / 2;
        float a = v[lo], b = v[mid], c = v[hi];
        float pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                float t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0) break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return v[k];
}
