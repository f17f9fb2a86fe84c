/* compare.c — the compute part of bin/compare: read two dumps sample by sample and reduce
 * logits (llama.cpp's KL-divergence block), hidden states and attention rows layer by
 * layer. The report, llama.cpp's text and the figure are in compare_report.c. */
#include "analysis/compare.h"
#include "analysis/compare_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_read.h"
#include "dump/dump_schema.h"
#include "text/prompts.h"

/* Rows of logits read and reduced at once: 2 x ROWS x V floats of buffers. */
#define ROWS 64

dfl_compare_params dfl_compare_params_default(void)
{
    dfl_compare_params p = {NULL, 0, NULL, 0, 0.01, 0};
    return p;
}

/* ---------------------------------------------------------------- one logit row */

/* exp(x) for x <= 0 in float, written so that the compiler vectorizes the row loop
 * (glibc's expf is a call per element): x = n ln 2 + r with |r| <= ln 2 / 2, e^r by its
 * Taylor polynomial to r^7 (truncation below 1.2e-8 relative), times 2^n from the
 * exponent bits; 0 below −87 (e^−87 < 2^−125: such a term cannot move a sum of terms
 * whose largest is 1). Within 2 ulp of expf (tests/test_compare_kernel.c). */
static inline float exp_nonpos(float x)
{
    /* branch-free (bit masks, no ?:) so that gcc -O2 vectorizes the loops that call it */
    int32_t keep = -(int32_t)(x >= -87.0f), xi, lo;
    float m87 = -87.0f, xc, scale;
    memcpy(&xi, &x, sizeof xi);
    memcpy(&lo, &m87, sizeof lo);
    xi = (xi & keep) | (lo & ~keep); /* max(x, −87) */
    memcpy(&xc, &xi, sizeof xc);
    float t = xc * 1.44269504f;
    float n = (t + 12582912.0f) - 12582912.0f;              /* round to nearest: 1.5 * 2^23 */
    float r = (xc - n * 0.693145752f) - n * 1.42860677e-6f; /* ln 2 in two parts */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = (((int32_t)n + 127) << 23) & keep; /* 2^n, or 0 below −87 */
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

float dfl__compare_exp(float x)
{
    return exp_nonpos(x);
}

/* The per-token quantities of llama.cpp's block for one position: xb[V], xq[V] are the
 * base's and the other's logits, tok the next token. Log-softmax around each row's
 * maximum, sums in double; KLD(base || other) = Σ p_b (ln p_b − ln p_q) over the whole
 * vocabulary (llama.cpp drops the terms with ln p_b <= −16, a limit of its 16-bit file).
 * fast: the vectorized loops and exp_nonpos; 0 (the naive twin, and rows holding NaN or
 * ±Inf): scalar loops and glibc's expf. */
static void row_stats(const float *xb, const float *xq, int64_t V, int32_t tok, dfl__compare_tok *o, int fast)
{
    float mb = xb[0], mq = xq[0], chk = 0.0f;
    int64_t ib = 0, iq = 0;
#pragma omp simd reduction(+ : chk)
    for (int64_t i = 0; i < V; i++)
        chk += 0.0f * (xb[i] + xq[i]); /* NaN when any logit is NaN or infinite */
    if (chk != 0.0f) fast = 0;
    if (fast) { /* all finite: the maxima vectorized, then the first index holding each */
#pragma omp simd reduction(max : mb, mq)
        for (int64_t i = 0; i < V; i++) {
            mb = mb > xb[i] ? mb : xb[i];
            mq = mq > xq[i] ? mq : xq[i];
        }
        while (xb[ib] != mb)
            ib++;
        while (xq[iq] != mq)
            iq++;
    } else {
        for (int64_t i = 1; i < V; i++) {
            if (xb[i] > mb) mb = xb[i], ib = i;
            if (xq[i] > mq) mq = xq[i], iq = i;
        }
    }
    double sb = 0.0, sq = 0.0, sd = 0.0;
    if (fast) {
        /* float sums over blocks of 64 (16 terms a vector lane), the blocks summed in double */
        for (int64_t i0 = 0; i0 < V; i0 += 64) {
            int64_t i1 = V - i0 < 64 ? V : i0 + 64;
            float fb = 0.0f, fq = 0.0f, fd = 0.0f;
#pragma omp simd reduction(+ : fb, fq, fd)
            for (int64_t i = i0; i < i1; i++) {
                float db = xb[i] - mb, dq = xq[i] - mq;
                float eb = exp_nonpos(db);
                fb += eb;
                fq += exp_nonpos(dq);
                fd += eb * (db - dq);
            }
            sb += fb, sq += fq, sd += fd;
        }
    } else {
        for (int64_t i = 0; i < V; i++) {
            float db = xb[i] - mb, dq = xq[i] - mq;
            float eb = expf(db);
            sb += eb;
            sq += expf(dq);
            sd += (double)eb * ((double)db - (double)dq);
        }
    }
    double lb = log(sb), lq = log(sq); /* ln Σ exp(x − max) */
    o->kld = sd / sb - lb + lq;
    o->nll_base = lb - ((double)xb[tok] - mb);
    o->nll_q = lq - ((double)xq[tok] - mq);
    o->dp = exp(-o->nll_q) - exp(-o->nll_base);
    o->same_top = ib == iq;
}

void dfl__compare_row(const float *xb, const float *xq, int64_t V, int32_t tok, dfl__compare_tok *o)
{
    row_stats(xb, xq, V, tok, o, 1);
}

void dfl__compare_row_naive(const float *xb, const float *xq, int64_t V, int32_t tok, dfl__compare_tok *o)
{
    row_stats(xb, xq, V, tok, o, 0);
}

/* ------------------------------------------------------------ pair accumulation */

static dfl_status push_values(dfl__compare_pair *p, const dfl__compare_tok *t, size_t n)
{
    if (p->n_values + n > p->cap_values) {
        size_t cap = p->cap_values ? p->cap_values : 4096;
        while (cap < p->n_values + n)
            cap *= 2;
        float *k = realloc(p->kld_values, cap * sizeof *k);
        if (!k) return DFL_ERR_NOMEM;
        p->kld_values = k;
        float *d = realloc(p->dp_values, cap * sizeof *d);
        if (!d) return DFL_ERR_NOMEM;
        p->dp_values = d;
        p->cap_values = cap;
    }
    for (size_t i = 0; i < n; i++) {
        const dfl__compare_tok *x = &t[i];
        dfl__compare_sums *s = &p->sums;
        s->nll += x->nll_q, s->nll2 += x->nll_q * x->nll_q;
        s->nll_base += x->nll_base, s->nll_base2 += x->nll_base * x->nll_base;
        s->nll_nll_base += x->nll_q * x->nll_base;
        s->kld += x->kld, s->kld2 += x->kld * x->kld;
        s->dp += x->dp;
        double d2 = x->dp * x->dp;
        s->dp2 += d2, s->dp4 += d2 * d2;
        s->same_top += (size_t)x->same_top;
        s->count++;
        p->kld_values[p->n_values] = (float)x->kld;
        p->dp_values[p->n_values] = (float)x->dp;
        p->n_values++;
    }
    return DFL_OK;
}

/* The logits of one sample: positions from..T-2 of both dumps, ROWS at a time. */
static dfl_status sample_logits(dfl__compare_pair *p, const dfl_dump_reader *b, const dfl_dump_reader *q,
                                const char *group, const int32_t *tokens, const uint8_t *keep, int64_t T, int64_t from,
                                float *buf, dfl__compare_tok *tok, dfl_error *err)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", group, DFL_DS_LOGITS);
    dfl_dump_slab *sb = NULL, *sq = NULL;
    dfl_status s = dfl_dump_slab_open(b, path, &sb, err);
    if (!s) s = dfl_dump_slab_open(q, path, &sq, err);
    const int64_t V = p->vocab;
    for (int i = 0; i < 2 && !s; i++) {
        const dfl_dump_dset_info *in = dfl_dump_slab_info(i ? sq : sb);
        if (in->ndim != 2 || in->dims[0] != T || in->dims[1] != V)
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: logits of shape [%lld, %lld], expected [%lld, %lld]",
                          dfl_dump_path(i ? q : b), path, (long long)in->dims[0],
                          (long long)(in->ndim > 1 ? in->dims[1] : 0), (long long)T, (long long)V);
    }
    float *xb = buf, *xq = buf + (size_t)ROWS * (size_t)V;
    for (int64_t t0 = from; !s && t0 < T - 1; t0 += ROWS) {
        int64_t n = T - 1 - t0 < ROWS ? T - 1 - t0 : ROWS;
        int64_t start[2] = {t0, 0}, count[2] = {n, V};
        if ((s = dfl_dump_slab_read_f32(sb, start, count, xb, err))) break;
        if ((s = dfl_dump_slab_read_f32(sq, start, count, xq, err))) break;
        for (int64_t i = 0; i < n && !s; i++)
            if (tokens[t0 + i + 1] < 0 || tokens[t0 + i + 1] >= V)
                s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: token %d outside the vocabulary of %lld", dfl_dump_path(b),
                              group, (int)tokens[t0 + i + 1], (long long)V);
        if (s) break;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++)
            dfl__compare_row(xb + i * V, xq + i * V, V, tokens[t0 + i + 1], &tok[i]);
        int64_t m = 0; /* the scored rows to the front */
        for (int64_t i = 0; i < n; i++)
            if (!keep || keep[t0 + i + 1] == DFL_SEG_TARGET) tok[m++] = tok[i];
        if (push_values(p, tok, (size_t)m)) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    dfl_dump_slab_close(sb);
    dfl_dump_slab_close(sq);
    return s;
}

/* Cosine, relative L2 and Pearson of a[D] against the base b[D]. */
static void vec_stats(const float *b, const float *a, int64_t D, double *cos, double *rel, double *pear)
{
    double sb = 0, sa = 0;
    for (int64_t i = 0; i < D; i++)
        sb += b[i], sa += a[i];
    double mb = sb / (double)D, ma = sa / (double)D;
    double bb = 0, aa = 0, ab = 0, dd = 0, cb = 0, ca = 0, cab = 0;
    for (int64_t i = 0; i < D; i++) {
        double x = b[i], y = a[i];
        bb += x * x, aa += y * y, ab += x * y, dd += (y - x) * (y - x);
        cb += (x - mb) * (x - mb), ca += (y - ma) * (y - ma), cab += (x - mb) * (y - ma);
    }
    *cos = ab / sqrt(bb * aa);
    *rel = sqrt(dd) / sqrt(bb);
    *pear = cab / sqrt(cb * ca);
}

/* Hidden states [L, T, D] of one sample: per layer, the sums over positions t >= from. */
static dfl_status sample_hidden(dfl__compare_pair *p, const dfl_dump_reader *b, const dfl_dump_reader *q,
                                const char *group, int64_t T, int64_t from, dfl_error *err)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", group, DFL_DS_HIDDEN);
    dfl_dump_dset_info ib, iq;
    dfl_status s = dfl_dump_dataset_info(b, path, &ib, err);
    if (!s) s = dfl_dump_dataset_info(q, path, &iq, err);
    if (s) return s;
    if (ib.ndim != 3 || iq.ndim != 3 || ib.dims[1] != T || memcmp(ib.dims, iq.dims, 3 * sizeof ib.dims[0]))
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: hidden states of different shapes in %s and %s", path,
                         dfl_dump_path(b), dfl_dump_path(q));
    int64_t L = ib.dims[0], D = ib.dims[2];
    if (p->hidden_layers == 0) {
        p->hidden_layers = L;
        p->hidden = calloc((size_t)L, sizeof *p->hidden);
        if (!p->hidden) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    } else if (p->hidden_layers != L) {
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %lld layers of hidden states, earlier samples had %lld", path,
                         (long long)L, (long long)p->hidden_layers);
    }
    size_t n = (size_t)T * (size_t)D;
    float *hb = dfl__alloc_array(2 * n, sizeof *hb);
    if (!hb)
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for hidden states [%lld, %lld]", (long long)T,
                         (long long)D);
    float *hq = hb + n;
    dfl_dump_slab *zb = NULL, *zq = NULL;
    s = dfl_dump_slab_open(b, path, &zb, err);
    if (!s) s = dfl_dump_slab_open(q, path, &zq, err);
    for (int64_t l = 0; l < L && !s; l++) {
        int64_t start[3] = {l, 0, 0}, count[3] = {1, T, D};
        if ((s = dfl_dump_slab_read_f32(zb, start, count, hb, err))) break;
        if ((s = dfl_dump_slab_read_f32(zq, start, count, hq, err))) break;
        dfl__compare_layer *a = &p->hidden[l];
        for (int64_t t = from; t < T; t++) {
            double c, r, pe;
            vec_stats(hb + t * D, hq + t * D, D, &c, &r, &pe);
            a->cos += c, a->rel += r, a->pearson += pe;
            a->n++;
        }
    }
    dfl_dump_slab_close(zb);
    dfl_dump_slab_close(zq);
    free(hb);
    return s;
}

/* Jensen-Shannon divergence (nats, in [0, ln 2]) of two rows normalised to sums of 1;
 * with use_abs the rows are |a| / Σ|a| (the diff map, whose entries may be negative). */
double dfl__compare_js(const float *a, const float *b, int64_t n, int use_abs)
{
    double sa = 0, sb = 0;
    for (int64_t i = 0; i < n; i++) {
        sa += use_abs ? fabs((double)a[i]) : (double)a[i];
        sb += use_abs ? fabs((double)b[i]) : (double)b[i];
    }
    if (!(sa > 0) || !(sb > 0)) return NAN;
    double js = 0;
    for (int64_t i = 0; i < n; i++) {
        double p = (use_abs ? fabs((double)a[i]) : (double)a[i]) / sa;
        double q = (use_abs ? fabs((double)b[i]) : (double)b[i]) / sb;
        if (p < 0) p = 0; /* a softmax entry rounded below 0 cannot happen; guard the logs */
        if (q < 0) q = 0;
        double m = 0.5 * (p + q);
        if (p > 0) js += 0.5 * p * log(p / m);
        if (q > 0) js += 0.5 * q * log(q / m);
    }
    return js;
}

static const char *const MAP_NAMES[3] = {"map1", "map2", "diff"};

/* The stored attention rows of one sample: each map both dumps hold, JS per row. */
static dfl_status sample_attn(dfl__compare_pair *p, const dfl_dump_reader *b, const dfl_dump_reader *q,
                              const char *group, int64_t T, int64_t from, dfl_error *err)
{
    char path[256];
    dfl_status s = DFL_OK;
    for (int m = 0; m < 3 && !s; m++) {
        snprintf(path, sizeof path, "%s/attn/%s", group, MAP_NAMES[m]);
        if (!dfl_dump_exists(b, path) || !dfl_dump_exists(q, path)) continue;
        dfl_dump_dset_info ib, iq;
        if ((s = dfl_dump_dataset_info(b, path, &ib, err)) || (s = dfl_dump_dataset_info(q, path, &iq, err))) break;
        if (ib.ndim != 4 || iq.ndim != 4 || memcmp(ib.dims, iq.dims, 4 * sizeof ib.dims[0]) || ib.dims[3] != T) {
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: maps of different shapes in %s and %s", path, dfl_dump_path(b),
                          dfl_dump_path(q));
            break;
        }
        int64_t Ls = ib.dims[0], Hs = ib.dims[1], R = ib.dims[2];
        int32_t *rows = NULL, *rows_q = NULL, *layers = NULL;
        char rp[256];
        snprintf(rp, sizeof rp, "%s/%s", group, DFL_DS_ATTN_ROWS);
        s = dfl_dump_read_alloc(b, rp, DFL_H5_I32, (void **)&rows, NULL, err);
        if (!s) s = dfl_dump_read_alloc(q, rp, DFL_H5_I32, (void **)&rows_q, NULL, err);
        if (!s && memcmp(rows, rows_q, (size_t)R * sizeof *rows))
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: different attention rows in %s and %s", rp, dfl_dump_path(b),
                          dfl_dump_path(q));
        snprintf(rp, sizeof rp, "%s/%s", group, DFL_DS_ATTN_LAYERS);
        if (!s) s = dfl_dump_read_alloc(b, rp, DFL_H5_I32, (void **)&layers, NULL, err);
        dfl__compare_maps *mp = &p->maps[m];
        if (!s && !mp->js) {
            mp->Ls = Ls, mp->Hs = Hs;
            mp->js = calloc((size_t)(Ls * Hs), sizeof *mp->js);
            mp->n = calloc((size_t)(Ls * Hs), sizeof *mp->n);
            mp->layers = malloc((size_t)Ls * sizeof *mp->layers);
            if (!mp->js || !mp->n || !mp->layers) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            if (!s) memcpy(mp->layers, layers, (size_t)Ls * sizeof *layers);
        } else if (!s && (mp->Ls != Ls || mp->Hs != Hs || memcmp(mp->layers, layers, (size_t)Ls * sizeof *layers))) {
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: other layers or heads than the earlier samples' maps", path);
        }
        size_t n = (size_t)Hs * (size_t)R * (size_t)T;
        float *ab = s ? NULL : dfl__alloc_array(2 * n, sizeof *ab);
        if (!s && !ab) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory for maps");
        dfl_dump_slab *zb = NULL, *zq = NULL;
        if (!s) s = dfl_dump_slab_open(b, path, &zb, err);
        if (!s) s = dfl_dump_slab_open(q, path, &zq, err);
        for (int64_t l = 0; l < Ls && !s; l++) {
            int64_t start[4] = {l, 0, 0, 0}, count[4] = {1, Hs, R, T};
            if ((s = dfl_dump_slab_read_f32(zb, start, count, ab, err))) break;
            if ((s = dfl_dump_slab_read_f32(zq, start, count, ab + n, err))) break;
            for (int64_t h = 0; h < Hs; h++)
                for (int64_t r = 0; r < R; r++) {
                    if (rows[r] < from || rows[r] >= T) continue;
                    size_t off = ((size_t)h * (size_t)R + (size_t)r) * (size_t)T;
                    double js = dfl__compare_js(ab + off, ab + n + off, (int64_t)rows[r] + 1, m == 2);
                    if (isnan(js)) continue;
                    mp->js[l * Hs + h] += js;
                    mp->n[l * Hs + h]++;
                }
        }
        dfl_dump_slab_close(zb);
        dfl_dump_slab_close(zq);
        free(ab);
        free(rows), free(rows_q), free(layers);
    }
    return s;
}

/* --------------------------------------------------------------- the block */

/* llama.cpp's mean and its standard error from Σx, Σx² over n: (0, 0) for n < 1; the
 * error is sqrt((Σx²/n − mean²) / (n − 1)), and 0 unless that variance is > 0 and n > 10. */
static void mean_err(double sum, double sum2, size_t n, double *mean, double *err)
{
    if (n < 1) {
        *mean = 0, *err = 0;
        return;
    }
    double f = sum / (double)n, df = sum2 / (double)n - f * f;
    *mean = f;
    *err = df > 0 && n > 10 ? sqrt(df / (double)(n - 1)) : 0.0;
}

/* llama.cpp's covariance of the two means: (Σab/n − (Σa/n)(Σb/n)) / (n − 1), 0 for n < 10. */
static double cov_means(double sa, double sb, double sab, size_t n)
{
    if (n < 10) return 0.0;
    double v = sab / (double)n - (sa / (double)n) * (sb / (double)n);
    return v / (double)(n - 1);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

double dfl_compare_percentile(const float *v, size_t n, double fraction)
{
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    double pos = fraction * (double)(n - 1);
    size_t i = (size_t)pos;
    double w = pos - (double)i;
    size_t j = i + 1 < n ? i + 1 : n - 1;
    return (1 - w) * v[i] + w * v[j];
}

/* llama.cpp's median: the middle value, or the mean of the two middle values. */
static double median(const float *v, size_t n)
{
    return n % 2 == 0 ? 0.5 * ((double)v[n / 2] + (double)v[n / 2 - 1]) : (double)v[n / 2];
}

static void finish_block(dfl__compare_pair *p)
{
    const dfl__compare_sums *s = &p->sums;
    dfl_compare_kld *k = &p->kld;
    size_t n = s->count;
    k->count = n;
    double lq, lq_e, lb, lb_e;
    mean_err(s->nll, s->nll2, n, &lq, &lq_e);
    mean_err(s->nll_base, s->nll_base2, n, &lb, &lb_e);
    k->ppl_q = exp(lq), k->ppl_q_err = k->ppl_q * lq_e;
    k->ppl_base = exp(lb), k->ppl_base_err = k->ppl_base * lb_e;
    double cov = cov_means(s->nll, s->nll_base, s->nll_nll_base, n);
    k->cor = 100.0 * cov / (lq_e * lb_e);
    k->ln_ratio = lq - lb;
    k->ln_ratio_err = sqrt(lq_e * lq_e + lb_e * lb_e - 2.0 * cov);
    k->ratio = exp(k->ln_ratio), k->ratio_err = k->ratio * k->ln_ratio_err;
    double ppl_cov = k->ppl_q * k->ppl_base * cov;
    k->dppl = k->ppl_q - k->ppl_base;
    k->dppl_err = sqrt(k->ppl_q_err * k->ppl_q_err + k->ppl_base_err * k->ppl_base_err - 2.0 * ppl_cov);
    mean_err(s->kld, s->kld2, n, &k->kld_mean, &k->kld_err);
    double dm, de, mse, mse_e;
    mean_err(s->dp, s->dp2, n, &dm, &de);
    k->dp_mean = 100.0 * dm, k->dp_err = 100.0 * de;
    mean_err(s->dp2, s->dp4, n, &mse, &mse_e);
    k->rms_dp = 100.0 * sqrt(mse), k->rms_dp_err = 100.0 * 0.5 / sqrt(mse) * mse_e;
    double same = (double)s->same_top / (double)n;
    k->same_top = 100.0 * same, k->same_top_err = 100.0 * sqrt(same * (1.0 - same) / (double)(n - 1));

    float *kv = p->kld_values, *dv = p->dp_values;
    qsort(kv, n, sizeof *kv, cmp_float);
    qsort(dv, n, sizeof *dv, cmp_float);
    k->kld_max = kv[n - 1], k->kld_min = kv[0], k->kld_median = median(kv, n);
    k->kld_p999 = dfl_compare_percentile(kv, n, 0.999), k->kld_p990 = dfl_compare_percentile(kv, n, 0.990);
    k->kld_p950 = dfl_compare_percentile(kv, n, 0.950), k->kld_p900 = dfl_compare_percentile(kv, n, 0.900);
    k->kld_p100 = dfl_compare_percentile(kv, n, 0.100), k->kld_p050 = dfl_compare_percentile(kv, n, 0.050);
    k->kld_p010 = dfl_compare_percentile(kv, n, 0.010), k->kld_p001 = dfl_compare_percentile(kv, n, 0.001);
    k->dp_max = 100.0 * dv[n - 1], k->dp_min = 100.0 * dv[0], k->dp_median = 100.0 * median(dv, n);
    static const double fr[10] = {0.999, 0.990, 0.950, 0.900, 0.750, 0.250, 0.100, 0.050, 0.010, 0.001};
    double *dst[10] = {&k->dp_p999, &k->dp_p990, &k->dp_p950, &k->dp_p900, &k->dp_p750,
                       &k->dp_p250, &k->dp_p100, &k->dp_p050, &k->dp_p010, &k->dp_p001};
    for (int i = 0; i < 10; i++)
        *dst[i] = 100.0 * dfl_compare_percentile(dv, n, fr[i]);
    p->has_kld = 1;
}

/* ----------------------------------------------------------------- one pair */

static const char *base_name(const char *path, char *buf, size_t cap)
{
    const char *s = strrchr(path, '/');
    s = s ? s + 1 : path;
    snprintf(buf, cap, "%s", s);
    size_t n = strlen(buf);
    if (n > 3 && !strcmp(buf + n - 3, ".h5")) buf[n - 3] = 0;
    return buf;
}

static dfl_status run_pair(dfl__compare_pair *p, const char *bpath, const char *qpath, int64_t from, int target_only,
                           dfl_error *err)
{
    uint8_t *seg = NULL;
    dfl_dump_reader *b = NULL, *q = NULL;
    float *buf = NULL;
    dfl__compare_tok *tok = NULL;
    int32_t *tb = NULL, *tq = NULL;
    dfl_status s = dfl_dump_open(bpath, &b, err);
    if (!s) s = dfl_dump_open(qpath, &q, err);
    size_t ns = s ? 0 : dfl_dump_sample_count(b);
    if (!s && ns != dfl_dump_sample_count(q))
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s holds %zu samples and %s %zu: compare needs dumps of the same prompts",
                      bpath, ns, qpath, dfl_dump_sample_count(q));
    if (!s && ns == 0) s = dfl__fail(err, DFL_ERR_FORMAT, "%s: no samples", bpath);
    for (size_t i = 0; i < ns && !s; i++) {
        const dfl_dump_sample *sb = dfl_dump_sample_at(b, i), *sq = dfl_dump_sample_at(q, i);
        char path[256];
        size_t nb = 0, nq = 0;
        free(tb), free(tq);
        tb = tq = NULL;
        snprintf(path, sizeof path, "%s/%s", sb->group, DFL_DS_TOKENS);
        if ((s = dfl_dump_read_alloc(b, path, DFL_H5_I32, (void **)&tb, &nb, err))) break;
        snprintf(path, sizeof path, "%s/%s", sq->group, DFL_DS_TOKENS);
        if ((s = dfl_dump_read_alloc(q, path, DFL_H5_I32, (void **)&tq, &nq, err))) break;
        if (strcmp(sb->group, sq->group) || nb != nq || memcmp(tb, tq, nb * sizeof *tb)) {
            s = dfl__fail(err, DFL_ERR_FORMAT,
                          "%s: the tokens differ between %s and %s: compare needs dumps of the "
                          "same prompts",
                          sb->group, bpath, qpath);
            break;
        }
        int64_t T = (int64_t)nb;
        char lp[256];
        snprintf(lp, sizeof lp, "%s/%s", sb->group, DFL_DS_LOGITS);
        int hb = dfl_dump_exists(b, lp), hq = dfl_dump_exists(q, lp);
        if (hb != hq) {
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: logits in %s only (probe both with --save-logits)", sb->group,
                          hb ? bpath : qpath);
            break;
        }
        if (hb) {
            dfl_dump_dset_info in;
            if ((s = dfl_dump_dataset_info(b, lp, &in, err))) break;
            if (in.ndim != 2) {
                s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: logits of rank %d", bpath, lp, in.ndim);
                break;
            }
            if (!p->vocab) {
                p->vocab = in.dims[1];
                buf = dfl__alloc_array((size_t)2 * ROWS * (size_t)p->vocab, sizeof *buf);
                tok = malloc(ROWS * sizeof *tok);
                if (!buf || !tok) {
                    s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory for logits of %lld tokens", (long long)p->vocab);
                    break;
                }
            } else if (p->vocab != in.dims[1]) {
                s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: vocabulary of %lld, earlier samples had %lld", bpath, lp,
                              (long long)in.dims[1], (long long)p->vocab);
                break;
            }
            free(seg);
            seg = NULL;
            snprintf(path, sizeof path, "%s/%s", sb->group, DFL_DS_SEGMENTS);
            if (target_only && (s = dfl_dump_read_alloc(b, path, DFL_H5_U8, (void **)&seg, NULL, err))) break;
            if ((s = sample_logits(p, b, q, sb->group, tb, seg, T, from, buf, tok, err))) break;
            p->logit_samples++;
        }
        snprintf(path, sizeof path, "%s/%s", sb->group, DFL_DS_HIDDEN);
        if (dfl_dump_exists(b, path) && dfl_dump_exists(q, path) &&
            (s = sample_hidden(p, b, q, sb->group, T, from, err)))
            break;
        if ((s = sample_attn(p, b, q, sb->group, T, from, err))) break;
        p->samples++;
    }
    if (!s && p->sums.count > 0) finish_block(p);
    free(tb), free(tq), free(buf), free(tok), free(seg);
    dfl_dump_close(b);
    dfl_dump_close(q);
    return s;
}

dfl_status dfl_compare_run(const dfl_compare_params *p, dfl_compare_result **out, dfl_error *err)
{
    *out = NULL;
    if (!p || !p->dumps || p->n_pairs < 1 || p->n_pairs > DFL_COMPARE_MAX_PAIRS)
        return dfl__fail(err, DFL_ERR_USAGE, "compare takes 1 to %d pairs of dumps", DFL_COMPARE_MAX_PAIRS);
    if (p->from < 0) return dfl__fail(err, DFL_ERR_USAGE, "--from %lld: must be >= 0", (long long)p->from);
    if (!(p->threshold >= 0)) return dfl__fail(err, DFL_ERR_USAGE, "--threshold must be >= 0");
    dfl_compare_result *r = calloc(1, sizeof *r);
    if (!r) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    r->n_pairs = p->n_pairs;
    r->from = p->from;
    r->target_only = p->target_only;
    r->threshold = p->threshold;
    dfl_status s = DFL_OK;
    for (size_t i = 0; i < p->n_pairs && !s; i++) {
        dfl__compare_pair *pr = &r->pairs[i];
        char nb[128];
        snprintf(pr->label, sizeof pr->label, "%s",
                 p->labels ? p->labels[i] : base_name(p->dumps[2 * i + 1], nb, sizeof nb));
        snprintf(pr->base, sizeof pr->base, "%s", p->dumps[2 * i]);
        snprintf(pr->other, sizeof pr->other, "%s", p->dumps[2 * i + 1]);
        s = run_pair(pr, p->dumps[2 * i], p->dumps[2 * i + 1], p->from, p->target_only, err);
        pr->first_diverged = -1;
        for (int64_t l = 0; l < pr->hidden_layers; l++)
            if (pr->hidden[l].n && 1.0 - pr->hidden[l].cos / (double)pr->hidden[l].n > p->threshold) {
                pr->first_diverged = l;
                break;
            }
    }
    if (s) {
        dfl_compare_result_free(r);
        return s;
    }
    *out = r;
    return DFL_OK;
}

void dfl_compare_result_free(dfl_compare_result *r)
{
    if (!r) return;
    for (size_t i = 0; i < DFL_COMPARE_MAX_PAIRS; i++) {
        dfl__compare_pair *p = &r->pairs[i];
        free(p->kld_values), free(p->dp_values), free(p->hidden);
        for (int m = 0; m < 3; m++)
            free(p->maps[m].js), free(p->maps[m].n), free(p->maps[m].layers);
    }
    free(r);
}

const dfl_compare_kld *dfl_compare_kld_of(const dfl_compare_result *r, size_t pair)
{
    return r && pair < r->n_pairs && r->pairs[pair].has_kld ? &r->pairs[pair].kld : NULL;
}

const char *dfl__compare_map_name(int m)
{
    return MAP_NAMES[m];
}
