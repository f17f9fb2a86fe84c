/* outliers.c — the compute part of the outliers tool: loading and pooling the probe's
 * outlier statistics (top lists, histograms, moments, channel counts) and the SQNR
 * estimator (see outliers.h). The tables, the plot and dfl_outliers_run are in
 * outliers_report.c. */
#include "analysis/outliers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "analysis/outliers_read.h"
#include "dump/dump_read.h"

#define B DFL_HIST_BINS

static const char *const kind_names[2] = {"logits", "hidden"};

/* ------------------------------------------------------------ statistics */

double dfl_outliers_kurtosis(const double *m)
{
    double n = m[0];
    if (!(n >= 2)) return NAN;
    double mu = m[1] / n, s2 = m[2] / n, s3 = m[3] / n, s4 = m[4] / n;
    double c2 = s2 - mu * mu;
    double c4 = s4 - 4 * mu * s3 + 6 * mu * mu * s2 - 3 * mu * mu * mu * mu;
    /* cancellation can leave tiny negative values when the mean dominates */
    if (!(c2 > 0)) return NAN;
    if (c4 < 0) c4 = 0;
    return c4 / (c2 * c2);
}

double dfl_outliers_qerr2(double a, double delta)
{
    if (!(delta > 0)) return 0;
    double q = floor(fabs(a) / delta + 0.5) * delta;
    double e = fabs(a) - q;
    return e * e;
}

/* What ∫_0^u e(t)^p dt needs of Δ alone (computed once per tensor, not once per bin). */
typedef struct saw_consts {
    double delta, h; /* Δ, Δ/2 */
    double per2, h3; /* p = 2: a whole period Δ³/12, (Δ/2)³ */
    double per4, h5; /* p = 4: Δ⁵/80, (Δ/2)⁵ */
} saw_consts;

static saw_consts saw_prepare(double delta)
{
    saw_consts s;
    s.delta = delta;
    s.h = delta / 2;
    s.per2 = delta * delta * delta / 12;
    s.h3 = s.h * s.h * s.h;
    s.per4 = pow(delta, 5) / 80;
    s.h5 = pow(s.h, 5);
    return s;
}

/* ∫_0^u e(t)^p dt for p = 2 (*i2) and 4 (*i4), e(t) = t − Δ·round(t/Δ), u >= 0: with
 * v = t + Δ/2, e = (v mod Δ) − Δ/2, a sawtooth whose whole periods contribute
 * Δ^(p+1)/(p+1)/2^p; the rest is ∫ r^p from −Δ/2 to r = (v mod Δ) − Δ/2, less H(Δ/2)
 * (ρ = Δ/2, r = 0). */
static void saw_integrals(const saw_consts *s, double u, double *i2, double *i4)
{
    double v = u + s->h;
    double n = floor(v / s->delta), rho = v - n * s->delta;
    double r = rho - s->h;
    *i2 = n * s->per2 + (r * r * r + s->h3) / 3 - (s->h3 / 3 + 0);
    *i4 = n * s->per4 + (pow(r, 5) + s->h5) / 5 - s->h5 / 5;
}

/* One tensor's histogram with its stored top values taken out of their bins: what
 * dfl_outliers_sqnr_add needs that does not depend on the bit width, so a tensor
 * quantized at several widths is prepared once. */
typedef struct sqnr_bins {
    int n;                /* non-empty bins of the histogram */
    int *bin;             /* [B] their indices, ascending */
    uint64_t *cnt;        /* [B] their counts less the top values taken out */
    unsigned char *taken; /* [k] 1 for a top value taken out of its bin */
} sqnr_bins;

static int sqnr_bins_alloc(sqnr_bins *sb, int64_t k)
{
    sb->n = 0;
    sb->bin = dfl__alloc_array(B, sizeof *sb->bin);
    sb->cnt = dfl__alloc_array(B, sizeof *sb->cnt);
    sb->taken = dfl__alloc_array(k > 0 ? (size_t)k : 1, 1);
    return sb->bin && sb->cnt && sb->taken;
}

static void sqnr_bins_free(sqnr_bins *sb)
{
    free(sb->bin);
    free(sb->cnt);
    free(sb->taken);
}

/* Fill sb from hist[B] and top[k]: each non-NaN top value leaves its bin while the bin
 * still has counts; one that finds its bin empty is inconsistent with the histogram and
 * left to the bin model. */
static void sqnr_prepare(sqnr_bins *sb, const uint64_t *hist, const float *top, int64_t k)
{
    sb->n = 0;
    for (int b = 0; b < B; b++)
        if (hist[b]) {
            sb->bin[sb->n] = b;
            sb->cnt[sb->n++] = hist[b];
        }
    for (int64_t i = 0; i < k; i++) {
        sb->taken[i] = 0;
        float v = top[i];
        if (!(v == v)) continue;
        int b = dfl_hist_bin(v), lo = 0, hi = sb->n; /* binary search for b in bin[lo, hi) */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (sb->bin[mid] < b)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < sb->n && sb->bin[lo] == b && sb->cnt[lo]) {
            sb->cnt[lo]--;
            sb->taken[i] = 1;
        }
    }
}

/* dfl_outliers_sqnr_add on a prepared tensor (sb from the same top[k]). */
static void sqnr_add_prepared(dfl_sqnr_acc *acc, const sqnr_bins *sb, const float *top, int64_t k, const double *m,
                              int bits)
{
    double M = m[5];
    acc->signal += m[2];
    if (!(M > 0) || bits < 2 || bits > 30) return;
    double delta = M / (ldexp(1.0, bits - 1) - 1);
    for (int64_t i = 0; i < k; i++) {
        if (!sb->taken[i]) continue;
        double e2 = dfl_outliers_qerr2(top[i], delta);
        acc->noise += e2;
        acc->noise_lo += e2;
        acc->noise_hi += e2;
    }
    saw_consts sc = saw_prepare(delta);
    double last_u = NAN, last_i2 = 0, last_i4 = 0; /* a bin's upper integral is the next one's lower */
    for (int j = 0; j < sb->n; j++) {
        if (!sb->cnt[j]) continue;
        int b = sb->bin[j];
        double c = (double)sb->cnt[j];
        double a = dfl_hist_edge(b), z = dfl_hist_edge(b + 1);
        if (a > M) a = M;
        if (!(z <= M)) z = M; /* caps the open last bin too */
        double mean2, mean4;
        if (z - a <= 1e-12 * (a > 0 ? a : 1)) {
            mean2 = dfl_outliers_qerr2(a, delta);
            mean4 = mean2 * mean2;
        } else {
            double a2, a4, z2, z4;
            if (a == last_u)
                a2 = last_i2, a4 = last_i4;
            else
                saw_integrals(&sc, a, &a2, &a4);
            saw_integrals(&sc, z, &z2, &z4);
            last_u = z, last_i2 = z2, last_i4 = z4;
            mean2 = (z2 - a2) / (z - a);
            mean4 = (z4 - a4) / (z - a);
        }
        if (mean2 < 0) mean2 = 0;
        double ea = dfl_outliers_qerr2(a, delta), ez = dfl_outliers_qerr2(z, delta);
        int has_zero = ceil(a / delta) * delta <= z;               /* a grid point: e = 0 */
        int has_edge = (ceil(a / delta - 0.5) + 0.5) * delta <= z; /* a rounding boundary: e² = Δ²/4 */
        double lo = has_zero ? 0 : (ea < ez ? ea : ez);
        double hi = has_edge ? delta * delta / 4 : (ea > ez ? ea : ez);
        acc->noise += c * mean2;
        acc->noise_lo += c * lo;
        acc->noise_hi += c * hi;
        double var = mean4 - mean2 * mean2;
        if (var > 0) acc->noise_var += c * var;
    }
}

void dfl_outliers_sqnr_add(dfl_sqnr_acc *acc, const uint64_t *hist, const float *top, int64_t k, const double *m,
                           int bits)
{
    double M = m[5];
    if (!(M > 0) || bits < 2 || bits > 30) {
        acc->signal += m[2];
        return;
    }
    sqnr_bins sb;
    if (!sqnr_bins_alloc(&sb, k)) {
        /* no memory: the uniform Δ²/12 per value is the best cheap estimate */
        double delta = M / (ldexp(1.0, bits - 1) - 1);
        acc->signal += m[2];
        acc->noise += m[0] * delta * delta / 12;
        acc->noise_hi += m[0] * delta * delta / 4;
        sqnr_bins_free(&sb);
        return;
    }
    sqnr_prepare(&sb, hist, top, k);
    sqnr_add_prepared(acc, &sb, top, k, m, bits);
    sqnr_bins_free(&sb);
}

static double db(double s, double n)
{
    return n > 0 ? 10 * log10(s / n) : INFINITY;
}

dfl_sqnr dfl_outliers_sqnr(const dfl_sqnr_acc *a)
{
    dfl_sqnr r;
    r.db = db(a->signal, a->noise);
    r.lo_db = db(a->signal, a->noise_hi);
    r.hi_db = db(a->signal, a->noise_lo);
    r.typ_err_db = a->noise > 0 ? 10 * log10(1 + sqrt(a->noise_var) / a->noise) : 0;
    return r;
}

/* ------------------------------------------------------------- one dump */

void dfl_outliers_free(dfl_outlier_dump *d)
{
    if (!d) return;
    for (int k = 0; k < 2; k++) {
        dfl_outlier_kind *o = &d->kind[k];
        free(o->hist);
        free(o->moments);
        free(o->layer_top);
        free(o->layer_top1);
        free(o->layer_top1_sample);
        free(o->sample_top);
        free(o->massive);
        free(o->massive_saturated);
    }
    free(d->head_stored);
    free(d->head_top);
    free(d->layer_cutoff);
    free(d->channel_count);
    free(d->channel_absmax);
    free(d->sqnr);
    free(d->path);
    free(d->model_type);
    free(d);
}

/* Check that the dataset at path has exactly the dims want[nd]; DFL_ERR_TENSOR
 * naming both shapes, DFL_ERR_FORMAT when it is missing (no outlier statistics). */
static dfl_status check_shape(const dfl_dump_reader *r, const char *path, int nd, const int64_t *want, const char *why,
                              dfl_error *err)
{
    dfl_dump_dset_info info;
    if (!dfl_dump_exists(r, path))
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "%s: %s: no such dataset: the dump has no outlier statistics (written by an older probe?)",
                         dfl_dump_path(r), path);
    dfl_status s = dfl_dump_dataset_info(r, path, &info, err);
    if (s) return s;
    int ok = info.ndim == nd && !info.is_string;
    for (int i = 0; ok && i < nd; i++)
        ok = info.dims[i] == want[i];
    if (ok) return DFL_OK;
    char got[128] = "", exp[128] = "";
    for (int i = 0; i < info.ndim && i < DFL_DUMP_MAX_RANK; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)info.dims[i]);
    for (int i = 0; i < nd; i++)
        snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%lld", i ? ", " : "", (long long)want[i]);
    return dfl__fail(err, DFL_ERR_TENSOR, "%s: %s is [%s], expected [%s]%s", dfl_dump_path(r), path, got, exp,
                     why ? why : "");
}

/* Allocate n elements of size sz (zeroed); 0 on overflow or failure. */
static int alloc_n(void *pp, size_t n, size_t sz)
{
    void **p = pp;
    *p = dfl__calloc_array(n ? n : 1, sz);
    return *p != NULL;
}

/* Read kind's top, top_index, hist and moments of sample group grp into x through the
 * dump reader: every shape checked and named in the error. */
static dfl_status read_kind_checked(const dfl_outlier_dump *d, dfl_dump_reader *r, const char *grp, int kind,
                                    dfl__outliers_sample *x, dfl_error *err)
{
    int64_t L = d->L, K = d->K;
    int ni = kind == DFL_OUT_LOGITS ? 4 : 2;
    char path[256];
    char why[160];
    snprintf(why, sizeof why, " (mismatched K or layers: the dump says topk = %lld, num_layers = %lld)", (long long)K,
             (long long)L);
    int64_t d_top[2] = {L, K}, d_idx[3] = {L, K, ni}, d_hist[2] = {L, B}, d_mom[2] = {L, 6};
    dfl_status st;
    snprintf(path, sizeof path, "%s/outliers/%s/top", grp, kind_names[kind]);
    if ((st = check_shape(r, path, 2, d_top, why, err)) ||
        (st = dfl_dump_read(r, path, DFL_H5_F32, x->top[kind], (size_t)(L * K), err)))
        return st;
    snprintf(path, sizeof path, "%s/outliers/%s/top_index", grp, kind_names[kind]);
    if ((st = check_shape(r, path, 3, d_idx, why, err)) ||
        (st = dfl_dump_read(r, path, DFL_H5_I32, x->idx[kind], (size_t)(L * K * ni), err)))
        return st;
    snprintf(path, sizeof path, "%s/outliers/%s/hist", grp, kind_names[kind]);
    if ((st = check_shape(r, path, 2, d_hist, " (a histogram of another bin rule or layer count)", err)) ||
        (st = dfl_dump_read(r, path, DFL_H5_U64, x->hist[kind], (size_t)(L * B), err)))
        return st;
    snprintf(path, sizeof path, "%s/outliers/%s/moments", grp, kind_names[kind]);
    if ((st = check_shape(r, path, 2, d_mom, NULL, err)) ||
        (st = dfl_dump_read(r, path, DFL_H5_F64, x->mom[kind], (size_t)(L * 6), err)))
        return st;
    return DFL_OK;
}

/* Pool one sample's lists, histograms and moments of one kind into d (and its heaps;
 * sb: scratch for the SQNR of logits). */
static void pool_kind(dfl_outlier_dump *d, const dfl__outliers_sample *x, int kind, int64_t s, dfl_topk *heaps,
                      sqnr_bins *sb)
{
    const int64_t L = d->L, K = d->K;
    const int ni = kind == DFL_OUT_LOGITS ? 4 : 2;
    const float *top = x->top[kind];      /* [L, K] */
    const int32_t *idx = x->idx[kind];    /* [L, K, ni] */
    const uint64_t *hist = x->hist[kind]; /* [L, B] */
    const double *mom = x->mom[kind];     /* [L, 6] */
    dfl_outlier_kind *o = &d->kind[kind];
    for (int64_t l = 0; l < L; l++) {
        uint64_t *h = o->hist + l * B;
        for (int b = 0; b < B; b++)
            h[b] += hist[l * B + b];
        double *m = o->moments + l * 6;
        for (int j = 0; j < 5; j++)
            m[j] += mom[l * 6 + j];
        if (mom[l * 6 + 5] > m[5]) m[5] = mom[l * 6 + 5];
        const float *t = top + l * K;
        memcpy(o->sample_top + ((size_t)s * L + l) * K, t, sizeof(float) * (size_t)K);
        for (int64_t i = 0; i < K; i++) {
            if (!(t[i] == t[i])) continue;
            const int32_t *ix = idx + (l * K + i) * ni;
            int32_t at[4] = {ix[0], ix[1], ni > 2 ? ix[2] : (int32_t)s, ni > 3 ? ix[3] : 0};
            dfl_topk_push(&heaps[l], t[i], at);
            if (t[i] > o->layer_top1[l].value || o->layer_top1_sample[l] < 0) {
                o->layer_top1[l].value = t[i];
                memcpy(o->layer_top1[l].idx, at, sizeof at);
                o->layer_top1_sample[l] = (int32_t)s;
            }
            if (kind == DFL_OUT_LOGITS) {
                int32_t hd = ix[0];
                if (hd < 0 || hd >= d->H) continue;
                d->head_stored[l * d->H + hd]++;
                float *ht = d->head_top + (l * d->H + hd) * 3;
                /* insert into the head's three largest */
                float v = t[i];
                for (int j = 0; j < 3; j++)
                    if (!(ht[j] == ht[j]) || v > ht[j]) {
                        float tmp = ht[j];
                        ht[j] = v;
                        v = tmp;
                        if (!(v == v)) break;
                    }
            }
        }
        if (kind == DFL_OUT_LOGITS && t[K - 1] == t[K - 1] && t[K - 1] > d->layer_cutoff[l])
            d->layer_cutoff[l] = t[K - 1];
        if (kind == DFL_OUT_LOGITS && d->nbits > 0) {
            sqnr_prepare(sb, hist + l * B, t, K);
            for (int bi = 0; bi < d->nbits; bi++)
                sqnr_add_prepared(&d->sqnr[l * d->nbits + bi], sb, t, K, mom + l * 6, d->bits[bi]);
        }
    }
}

/* Buffers of one load: one sample's datasets, and the per-layer top-K heaps. */
typedef struct load_scratch {
    dfl__outliers_sample smp; /* one sample's datasets (its channel buffers sized by sample 0) */
    dfl_topk *heaps[2];       /* [L] per kind */
    dfl_topk_item *store[2];  /* [L, K] per kind: the heaps' storage */
    sqnr_bins sqnr;           /* one tensor's histogram for the SQNR estimate */
} load_scratch;

static void scratch_free(load_scratch *x)
{
    for (int k = 0; k < 2; k++) {
        free(x->heaps[k]);
        free(x->store[k]);
        free(x->smp.top[k]), free(x->smp.idx[k]), free(x->smp.hist[k]), free(x->smp.mom[k]);
    }
    free(x->smp.cabs), free(x->smp.ccnt);
    sqnr_bins_free(&x->sqnr);
}

/* Root attributes: model_type, L, H, K (its range checked) and the sample count. */
static dfl_status read_header(dfl_dump_reader *r, const char *path, dfl_outlier_dump *d, dfl_error *err)
{
    dfl_status st;
    if ((st = dfl_dump_get_attr_str(r, "", "model_type", &d->model_type, err)) ||
        (st = dfl_dump_get_attr_i64(r, "", "num_layers", &d->L, err)) ||
        (st = dfl_dump_get_attr_i64(r, "", "num_heads", &d->H, err)))
        return st;
    if (dfl_dump_get_attr_i64(r, "", "topk", &d->K, NULL))
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "%s: no outlier statistics (no root attribute 'topk'; written by an older "
                         "probe?)",
                         path);
    d->S = (int64_t)dfl_dump_sample_count(r);
    if (d->L < 1 || d->L > 100000 || d->H < 1 || d->H > 100000 || d->K < 1 || d->K > DFL_TOPK_MAX)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: num_layers %lld, num_heads %lld or topk %lld out of range", path,
                         (long long)d->L, (long long)d->H, (long long)d->K);
    if (d->S < 1) return dfl__fail(err, DFL_ERR_FORMAT, "%s: the dump has no samples", path);
    return DFL_OK;
}

/* The pooled arrays of d and the scratch buffers, for L layers, H heads, K, S samples. */
static dfl_status alloc_pooled(dfl_outlier_dump *d, load_scratch *x, const char *path, dfl_error *err)
{
    size_t L = (size_t)d->L, K = (size_t)d->K, S = (size_t)d->S, H = (size_t)d->H, LK, LB, SLK;
    if (!dfl__mul_ok(L, K, &LK) || !dfl__mul_ok(L, B, &LB) || !dfl__mul_ok(S, LK, &SLK))
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: sizes overflow", path);
    int ok = alloc_n(&d->head_stored, L * H, sizeof *d->head_stored) &&
             alloc_n(&d->head_top, L * H * 3, sizeof *d->head_top) &&
             alloc_n(&d->layer_cutoff, L, sizeof *d->layer_cutoff) &&
             alloc_n(&d->sqnr, L * (size_t)(d->nbits ? d->nbits : 1), sizeof *d->sqnr) &&
             sqnr_bins_alloc(&x->sqnr, d->K);
    for (int k = 0; ok && k < 2; k++) {
        dfl_outlier_kind *o = &d->kind[k];
        dfl__outliers_sample *s = &x->smp;
        ok = alloc_n(&s->top[k], LK, sizeof *s->top[k]) && alloc_n(&s->idx[k], LK * 4, sizeof *s->idx[k]) &&
             alloc_n(&s->hist[k], LB, sizeof *s->hist[k]) && alloc_n(&s->mom[k], L * 6, sizeof *s->mom[k]) &&
             alloc_n(&o->hist, LB, sizeof *o->hist) && alloc_n(&o->moments, L * 6, sizeof *o->moments) &&
             alloc_n(&o->layer_top, LK, sizeof *o->layer_top) && alloc_n(&o->layer_top1, L, sizeof *o->layer_top1) &&
             alloc_n(&o->layer_top1_sample, L, sizeof *o->layer_top1_sample) &&
             alloc_n(&o->sample_top, SLK, sizeof *o->sample_top) && alloc_n(&o->massive, L, sizeof *o->massive) &&
             alloc_n(&o->massive_saturated, L, sizeof *o->massive_saturated) &&
             alloc_n(&x->heaps[k], L, sizeof *x->heaps[k]) && alloc_n(&x->store[k], LK, sizeof *x->store[k]);
        for (size_t l = 0; ok && l < L; l++) {
            dfl_topk_init(&x->heaps[k][l], x->store[k] + l * K, (int32_t)K);
            o->layer_top1_sample[l] = -1;
        }
    }
    if (!ok) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory for %zu layers x K = %zu", path, L, K);
    for (size_t i = 0; i < L * H * 3; i++)
        d->head_top[i] = NAN;
    return DFL_OK;
}

/* Sample si's hidden-state channel profile into x through the dump reader (D and α
 * from the first sample, which sizes the buffers; every other sample must have the
 * same D). */
static dfl_status read_channels_checked(dfl_outlier_dump *d, load_scratch *x, dfl_dump_reader *r, size_t si,
                                        const char *path, dfl_error *err)
{
    const dfl_dump_sample *smp = dfl_dump_sample_at(r, si);
    const size_t L = (size_t)d->L;
    char p2[256];
    dfl_dump_dset_info info;
    dfl_status st;
    snprintf(p2, sizeof p2, "%s/outliers/hidden/channel_absmax", smp->group);
    if (!dfl_dump_exists(r, p2))
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: no such dataset: the dump has no outlier statistics", path, p2);
    if ((st = dfl_dump_dataset_info(r, p2, &info, err))) return st;
    if (si == 0) {
        if (info.ndim != 2 || info.dims[1] < 1 || info.dims[1] > (1 << 24))
            return dfl__fail(err, DFL_ERR_TENSOR, "%s: %s is not [num_layers, hidden]", path, p2);
        d->D = info.dims[1];
        size_t LD = L * (size_t)d->D;
        if (!alloc_n(&x->smp.cabs, LD, sizeof *x->smp.cabs) || !alloc_n(&x->smp.ccnt, LD, sizeof *x->smp.ccnt) ||
            !alloc_n(&d->channel_absmax, LD, sizeof *d->channel_absmax) ||
            !alloc_n(&d->channel_count, LD, sizeof *d->channel_count))
            return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
        char p3[256];
        snprintf(p3, sizeof p3, "%s/outliers/hidden/channel_count", smp->group);
        if ((st = dfl_dump_get_attr_f64(r, p3, "alpha", &d->alpha, err))) return st;
    }
    int64_t dch[2] = {d->L, d->D};
    if ((st = check_shape(r, p2, 2, dch, " (hidden size differs between samples)", err)) ||
        (st = dfl_dump_read(r, p2, DFL_H5_F32, x->smp.cabs, L * (size_t)d->D, err)))
        return st;
    snprintf(p2, sizeof p2, "%s/outliers/hidden/channel_count", smp->group);
    if ((st = check_shape(r, p2, 2, dch, NULL, err)) ||
        (st = dfl_dump_read(r, p2, DFL_H5_U32, x->smp.ccnt, L * (size_t)d->D, err)))
        return st;
    return DFL_OK;
}

/* Sample si through the dump reader: the general path, which words every error. */
static dfl_status read_sample_checked(dfl_outlier_dump *d, load_scratch *x, dfl_dump_reader *r, size_t si,
                                      const char *path, dfl_error *err)
{
    const dfl_dump_sample *smp = dfl_dump_sample_at(r, si);
    char p2[256];
    dfl_dump_dset_info info;
    dfl_status st;
    snprintf(p2, sizeof p2, "%s/tokens", smp->group);
    if ((st = dfl_dump_dataset_info(r, p2, &info, err))) return st;
    x->smp.tokens = info.ndim == 1 ? info.dims[0] : 0;
    if ((st = read_kind_checked(d, r, smp->group, DFL_OUT_LOGITS, &x->smp, err)) ||
        (st = read_kind_checked(d, r, smp->group, DFL_OUT_HIDDEN, &x->smp, err)))
        return st;
    return read_channels_checked(d, x, r, si, path, err);
}

/* Pool sample si (read into x) into d. */
static void pool_sample(dfl_outlier_dump *d, load_scratch *x, size_t si)
{
    d->tokens += x->smp.tokens;
    pool_kind(d, &x->smp, DFL_OUT_LOGITS, (int64_t)si, x->heaps[0], &x->sqnr);
    pool_kind(d, &x->smp, DFL_OUT_HIDDEN, (int64_t)si, x->heaps[1], &x->sqnr);
    for (size_t i = 0; i < (size_t)d->L * (size_t)d->D; i++) {
        d->channel_count[i] += x->smp.ccnt[i];
        if (x->smp.cabs[i] > d->channel_absmax[i]) d->channel_absmax[i] = x->smp.cabs[i];
    }
}

/* The per-layer top lists, sorted, from the heaps (NaN-padded to K). */
static dfl_status sort_layer_tops(dfl_outlier_dump *d, load_scratch *x, const char *path, dfl_error *err)
{
    const size_t L = (size_t)d->L, K = (size_t)d->K;
    dfl_topk_item *sorted = dfl__alloc_array(K, sizeof *sorted); /* [K] */
    if (!sorted) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
    for (int k = 0; k < 2; k++) {
        for (size_t l = 0; l < L; l++) {
            int32_t n = dfl_topk_sorted(&x->heaps[k][l], sorted);
            float *lt = d->kind[k].layer_top + l * K;
            for (size_t i = 0; i < K; i++)
                lt[i] = (int32_t)i < n ? sorted[i].value : NAN;
        }
    }
    free(sorted);
    return DFL_OK;
}

dfl_status dfl_outliers_load(const char *path, const int *bits, int nbits, dfl_outlier_dump **out, dfl_error *err)
{
    *out = NULL;
    if (nbits < 0 || nbits > DFL_OUTLIERS_MAX_BITS)
        return dfl__fail(err, DFL_ERR_USAGE, "--bits: %d widths (at most %d)", nbits, DFL_OUTLIERS_MAX_BITS);
    for (int i = 0; i < nbits; i++)
        if (bits[i] < 2 || bits[i] > 16) return dfl__fail(err, DFL_ERR_USAGE, "--bits: %d is not in 2..16", bits[i]);
    dfl_dump_reader *r = NULL;
    dfl_status st = dfl_dump_open(path, &r, err);
    if (st) return st;
    load_scratch x;
    memset(&x, 0, sizeof x);
    dfl_outlier_dump *d = calloc(1, sizeof *d);
    if (!d || !(d->path = strdup(path))) {
        st = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    d->nbits = nbits;
    for (int i = 0; i < nbits; i++)
        d->bits[i] = bits[i];
    if ((st = read_header(r, path, d, err)) || (st = alloc_pooled(d, &x, path, err))) goto done;

    /* Sample 0 through the dump reader (it sets D and α); the others through their open
     * groups, each falling back to the dump reader when it is not as probe writes it. */
    for (size_t si = 0; si < (size_t)d->S; si++) {
        const dfl_dump_sample *smp = dfl_dump_sample_at(r, si);
        if (!(si > 0 && dfl__outliers_read_sample(r, smp->group, d->L, d->K, B, d->D, &x.smp)) &&
            (st = read_sample_checked(d, &x, r, si, path, err)))
            goto done;
        pool_sample(d, &x, si);
    }
    if ((st = sort_layer_tops(d, &x, path, err))) goto done;
    dfl_outliers_count_massive(d, 100, 1000);
done:
    scratch_free(&x);
    dfl_dump_close(r);
    if (st) {
        dfl_outliers_free(d);
        return st;
    }
    *out = d;
    return DFL_OK;
}

int dfl_outliers_layer_nonfinite(const dfl_outlier_dump *d, int kind, int64_t l)
{
    /* Σx of the layer over all samples: NaN or ±Inf exactly when some value was (the
     * histogram puts NaN in its top bin and the top lists skip it) */
    if (l < 0) {
        for (int64_t j = 0; j < d->L; j++)
            if (dfl_outliers_layer_nonfinite(d, kind, j)) return 1;
        return 0;
    }
    return l < d->L && !isfinite(d->kind[kind].moments[l * 6 + 1]);
}

double dfl_outliers_median(const dfl_outlier_dump *d, int kind, int64_t l)
{
    const dfl_outlier_kind *o = &d->kind[kind];
    if (dfl_outliers_layer_nonfinite(d, kind, l)) return NAN; /* not a number made of NaNs */
    if (l >= 0) return l < d->L ? dfl_hist_quantile(o->hist + l * B, 0.5) : NAN;
    uint64_t *sum = calloc(B, sizeof *sum);
    if (!sum) return NAN;
    for (int64_t j = 0; j < d->L; j++)
        for (int b = 0; b < B; b++)
            sum[b] += o->hist[j * B + b];
    double m = dfl_hist_quantile(sum, 0.5);
    free(sum);
    return m;
}

static int desc_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

double dfl_outliers_top(const dfl_outlier_dump *d, int kind, int64_t l, int64_t n)
{
    if (n < 1 || n > d->K || dfl_outliers_layer_nonfinite(d, kind, l)) return NAN;
    const dfl_outlier_kind *o = &d->kind[kind];
    if (l >= 0) {
        if (l >= d->L) return NAN;
        float v = o->layer_top[l * d->K + n - 1];
        return v == v ? v : NAN;
    }
    /* the n largest over all layers are among the layers' K largest */
    size_t m = (size_t)(d->L * d->K), c = 0;
    float *all = malloc(sizeof(float) * m);
    if (!all) return NAN;
    for (size_t i = 0; i < m; i++)
        if (o->layer_top[i] == o->layer_top[i]) all[c++] = o->layer_top[i];
    qsort(all, c, sizeof *all, desc_float);
    double v = (size_t)n <= c ? all[n - 1] : NAN;
    free(all);
    return v;
}

void dfl_outliers_count_massive(dfl_outlier_dump *d, double massive_abs, double massive_ratio)
{
    for (int k = 0; k < 2; k++) {
        dfl_outlier_kind *o = &d->kind[k];
        for (int64_t l = 0; l < d->L; l++) {
            double med = dfl_outliers_median(d, k, l);
            uint64_t n = 0;
            int sat = 0;
            for (int64_t s = 0; s < d->S; s++) {
                const float *t = o->sample_top + (s * d->L + l) * d->K;
                int64_t c = 0;
                for (int64_t i = 0; i < d->K; i++)
                    if (t[i] > massive_abs && t[i] >= massive_ratio * med) c++;
                if (c == d->K) sat = 1;
                n += (uint64_t)c;
            }
            o->massive[l] = n;
            o->massive_saturated[l] = sat;
        }
    }
}

/* ------------------------------------------------------------- parameters */

dfl_outliers_params dfl_outliers_params_default(void)
{
    dfl_outliers_params p;
    memset(&p, 0, sizeof p);
    static const int64_t ranks[5] = {1, 2, 3, 10, 100};
    memcpy(p.ranks, ranks, sizeof ranks);
    p.n_ranks = 5;
    p.bits[0] = 8, p.bits[1] = 6, p.bits[2] = 4;
    p.nbits = 3;
    p.int8_layers = 0.25;
    p.int8_tokens = 0.06;
    p.massive_abs = 100;
    p.massive_ratio = 1000;
    return p;
}

dfl_status dfl_outliers_parse_list(const char *flag, const char *text, int64_t lo, int64_t hi, int64_t *out, int cap,
                                   int *n, dfl_error *err)
{
    *n = 0;
    int64_t *v;
    size_t k;
    dfl_status s = dfl_cli_int_list(flag, text, lo, hi, cap > 0 ? (size_t)cap : 1, &v, &k, err);
    if (s) return s;
    memcpy(out, v, k * sizeof *v);
    *n = (int)k;
    free(v);
    return DFL_OK;
}
