/* outliers.c — pooling of the probe's outlier statistics (top lists, histograms,
 * moments, channel counts) into Table 5, per-layer, per-head and quantization views;
 * the report and the plot of the outliers tool. See outliers.h for the statistics and
 * the SQNR estimator. */
#include "analysis/outliers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_read.h"
#include "render/plot.h"

#define B DFL_HIST_BINS

static const char *const kind_names[2] = {"logits", "hidden"};
static const char *const kind_titles[2] = {"attention logits", "hidden states"};

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

/* ∫_0^u e(t)^p dt for p = 2 or 4, e(t) = t − Δ·round(t/Δ), u >= 0: with v = t + Δ/2,
 * e = (v mod Δ) − Δ/2, a sawtooth whose whole periods contribute Δ^(p+1)/(p+1)/2^p. */
static double saw_integral(double u, double delta, int p)
{
    double h = delta / 2, v = u + h;
    double n = floor(v / delta), rho = v - n * delta;
    double r = rho - h;
    double per, part, base;
    if (p == 2) {
        per = delta * delta * delta / 12;
        part = (r * r * r + h * h * h) / 3;
        base = (h * h * h) / 3 + 0; /* H(Δ/2): ρ = Δ/2, r = 0 */
    } else {
        per = pow(delta, 5) / 80;
        part = (pow(r, 5) + pow(h, 5)) / 5;
        base = pow(h, 5) / 5;
    }
    return n * per + part - base;
}

void dfl_outliers_sqnr_add(dfl_sqnr_acc *acc, const uint64_t *hist, const float *top, int64_t k, const double *m,
                           int bits)
{
    double M = m[5];
    acc->signal += m[2];
    if (!(M > 0) || bits < 2 || bits > 30) return;
    double delta = M / (ldexp(1.0, bits - 1) - 1);
    /* counts left after taking the stored top values out of their bins */
    uint64_t *cnt = malloc(sizeof(uint64_t) * B);
    double *edges = malloc(sizeof(double) * (B + 1));
    if (!cnt || !edges) {
        /* no memory: the uniform Δ²/12 per value is the best cheap estimate */
        acc->noise += m[0] * delta * delta / 12;
        acc->noise_hi += m[0] * delta * delta / 4;
        free(cnt);
        free(edges);
        return;
    }
    memcpy(cnt, hist, sizeof(uint64_t) * B);
    dfl_hist_edges(edges);
    for (int64_t i = 0; i < k; i++) {
        float v = top[i];
        if (!(v == v)) continue;
        int b = dfl_hist_bin(v);
        if (!cnt[b]) continue; /* inconsistent with the histogram: leave it to the bin model */
        cnt[b]--;
        double e2 = dfl_outliers_qerr2(v, delta);
        acc->noise += e2;
        acc->noise_lo += e2;
        acc->noise_hi += e2;
    }
    for (int b = 0; b < B; b++) {
        if (!cnt[b]) continue;
        double c = (double)cnt[b];
        double a = edges[b], z = edges[b + 1];
        if (a > M) a = M;
        if (!(z <= M)) z = M; /* caps the open last bin too */
        double mean2, mean4;
        if (z - a <= 1e-12 * (a > 0 ? a : 1)) {
            mean2 = dfl_outliers_qerr2(a, delta);
            mean4 = mean2 * mean2;
        } else {
            mean2 = (saw_integral(z, delta, 2) - saw_integral(a, delta, 2)) / (z - a);
            mean4 = (saw_integral(z, delta, 4) - saw_integral(a, delta, 4)) / (z - a);
        }
        if (mean2 < 0) mean2 = 0;
        double ea = dfl_outliers_qerr2(a, delta), ez = dfl_outliers_qerr2(z, delta);
        int has_zero = ceil(a / delta) * delta <= z;                 /* a grid point: e = 0 */
        int has_edge = (ceil(a / delta - 0.5) + 0.5) * delta <= z;   /* a rounding boundary: e² = Δ²/4 */
        double lo = has_zero ? 0 : (ea < ez ? ea : ez);
        double hi = has_edge ? delta * delta / 4 : (ea > ez ? ea : ez);
        acc->noise += c * mean2;
        acc->noise_lo += c * lo;
        acc->noise_hi += c * hi;
        double var = mean4 - mean2 * mean2;
        if (var > 0) acc->noise_var += c * var;
    }
    free(cnt);
    free(edges);
}

static double db(double s, double n) { return n > 0 ? 10 * log10(s / n) : INFINITY; }

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
static dfl_status check_shape(const dfl_dump_reader *r, const char *path, int nd, const int64_t *want,
                              const char *why, dfl_error *err)
{
    dfl_dump_dset_info info;
    if (!dfl_dump_exists(r, path))
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "%s: %s: no such dataset: the dump has no outlier statistics (written by an older probe?)",
                         dfl_dump_path(r), path);
    dfl_status s = dfl_dump_dataset_info(r, path, &info, err);
    if (s) return s;
    int ok = info.ndim == nd && !info.is_string;
    for (int i = 0; ok && i < nd; i++) ok = info.dims[i] == want[i];
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

static dfl_status load_kind(dfl_outlier_dump *d, dfl_dump_reader *r, const char *grp, int kind, int64_t s,
                            float *top, int32_t *idx, uint64_t *hist, double *mom, dfl_topk *heaps, dfl_error *err)
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
        (st = dfl_dump_read(r, path, DFL_H5_F32, top, (size_t)(L * K), err)))
        return st;
    snprintf(path, sizeof path, "%s/outliers/%s/top_index", grp, kind_names[kind]);
    if ((st = check_shape(r, path, 3, d_idx, why, err)) ||
        (st = dfl_dump_read(r, path, DFL_H5_I32, idx, (size_t)(L * K * ni), err)))
        return st;
    snprintf(path, sizeof path, "%s/outliers/%s/hist", grp, kind_names[kind]);
    if ((st = check_shape(r, path, 2, d_hist, " (a histogram of another bin rule or layer count)", err)) ||
        (st = dfl_dump_read(r, path, DFL_H5_U64, hist, (size_t)(L * B), err)))
        return st;
    snprintf(path, sizeof path, "%s/outliers/%s/moments", grp, kind_names[kind]);
    if ((st = check_shape(r, path, 2, d_mom, NULL, err)) ||
        (st = dfl_dump_read(r, path, DFL_H5_F64, mom, (size_t)(L * 6), err)))
        return st;

    dfl_outlier_kind *o = &d->kind[kind];
    for (int64_t l = 0; l < L; l++) {
        uint64_t *h = o->hist + l * B;
        for (int b = 0; b < B; b++) h[b] += hist[l * B + b];
        double *m = o->moments + l * 6;
        for (int j = 0; j < 5; j++) m[j] += mom[l * 6 + j];
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
        if (kind == DFL_OUT_LOGITS)
            for (int bi = 0; bi < d->nbits; bi++)
                dfl_outliers_sqnr_add(&d->sqnr[l * d->nbits + bi], hist + l * B, t, K, mom + l * 6, d->bits[bi]);
    }
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
    dfl_outlier_dump *d = calloc(1, sizeof *d);
    float *top = NULL;
    int32_t *idx = NULL;
    uint64_t *hist = NULL;
    double *mom = NULL;
    float *cabs = NULL;
    uint32_t *ccnt = NULL;
    dfl_topk *heaps[2] = {NULL, NULL};
    dfl_topk_item *store[2] = {NULL, NULL};
    if (!d || !(d->path = strdup(path))) {
        st = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    d->nbits = nbits;
    for (int i = 0; i < nbits; i++) d->bits[i] = bits[i];
    if ((st = dfl_dump_get_attr_str(r, "", "model_type", &d->model_type, err)) ||
        (st = dfl_dump_get_attr_i64(r, "", "num_layers", &d->L, err)) ||
        (st = dfl_dump_get_attr_i64(r, "", "num_heads", &d->H, err)))
        goto done;
    if (dfl_dump_get_attr_i64(r, "", "topk", &d->K, NULL)) {
        st = dfl__fail(err, DFL_ERR_FORMAT, "%s: no outlier statistics (no root attribute 'topk'; written by an older "
                                            "probe?)", path);
        goto done;
    }
    d->S = (int64_t)dfl_dump_sample_count(r);
    if (d->L < 1 || d->L > 100000 || d->H < 1 || d->H > 100000 || d->K < 1 || d->K > DFL_TOPK_MAX) {
        st = dfl__fail(err, DFL_ERR_FORMAT, "%s: num_layers %lld, num_heads %lld or topk %lld out of range", path,
                       (long long)d->L, (long long)d->H, (long long)d->K);
        goto done;
    }
    if (d->S < 1) {
        st = dfl__fail(err, DFL_ERR_FORMAT, "%s: the dump has no samples", path);
        goto done;
    }
    size_t L = (size_t)d->L, K = (size_t)d->K, S = (size_t)d->S, H = (size_t)d->H, LK, LB, SLK;
    if (!dfl__mul_ok(L, K, &LK) || !dfl__mul_ok(L, B, &LB) || !dfl__mul_ok(S, LK, &SLK)) {
        st = dfl__fail(err, DFL_ERR_NOMEM, "%s: sizes overflow", path);
        goto done;
    }
    int ok = alloc_n(&top, LK, sizeof *top) && alloc_n(&idx, LK * 4, sizeof *idx) && alloc_n(&hist, LB, sizeof *hist) &&
             alloc_n(&mom, L * 6, sizeof *mom) && alloc_n(&d->head_stored, L * H, sizeof *d->head_stored) &&
             alloc_n(&d->head_top, L * H * 3, sizeof *d->head_top) &&
             alloc_n(&d->layer_cutoff, L, sizeof *d->layer_cutoff) &&
             alloc_n(&d->sqnr, L * (size_t)(nbits ? nbits : 1), sizeof *d->sqnr);
    for (int k = 0; ok && k < 2; k++) {
        dfl_outlier_kind *o = &d->kind[k];
        ok = alloc_n(&o->hist, LB, sizeof *o->hist) && alloc_n(&o->moments, L * 6, sizeof *o->moments) &&
             alloc_n(&o->layer_top, LK, sizeof *o->layer_top) && alloc_n(&o->layer_top1, L, sizeof *o->layer_top1) &&
             alloc_n(&o->layer_top1_sample, L, sizeof *o->layer_top1_sample) &&
             alloc_n(&o->sample_top, SLK, sizeof *o->sample_top) && alloc_n(&o->massive, L, sizeof *o->massive) &&
             alloc_n(&o->massive_saturated, L, sizeof *o->massive_saturated) &&
             alloc_n(&heaps[k], L, sizeof *heaps[k]) && alloc_n(&store[k], LK, sizeof *store[k]);
        for (size_t l = 0; ok && l < L; l++) {
            dfl_topk_init(&heaps[k][l], store[k] + l * K, (int32_t)K);
            o->layer_top1_sample[l] = -1;
        }
    }
    if (!ok) {
        st = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory for %zu layers x K = %zu", path, L, K);
        goto done;
    }
    for (size_t i = 0; i < L * H * 3; i++) d->head_top[i] = NAN;

    for (size_t si = 0; si < S; si++) {
        const dfl_dump_sample *smp = dfl_dump_sample_at(r, si);
        char p2[256];
        dfl_dump_dset_info info;
        snprintf(p2, sizeof p2, "%s/tokens", smp->group);
        if ((st = dfl_dump_dataset_info(r, p2, &info, err))) goto done;
        d->tokens += info.ndim == 1 ? info.dims[0] : 0;
        if ((st = load_kind(d, r, smp->group, DFL_OUT_LOGITS, (int64_t)si, top, idx, hist, mom, heaps[0], err)) ||
            (st = load_kind(d, r, smp->group, DFL_OUT_HIDDEN, (int64_t)si, top, idx, hist, mom, heaps[1], err)))
            goto done;
        /* hidden channels: D from the first sample, the same in every other */
        snprintf(p2, sizeof p2, "%s/outliers/hidden/channel_absmax", smp->group);
        if (!dfl_dump_exists(r, p2)) {
            st = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: no such dataset: the dump has no outlier statistics", path, p2);
            goto done;
        }
        if ((st = dfl_dump_dataset_info(r, p2, &info, err))) goto done;
        if (si == 0) {
            if (info.ndim != 2 || info.dims[1] < 1 || info.dims[1] > (1 << 24)) {
                st = dfl__fail(err, DFL_ERR_TENSOR, "%s: %s is not [num_layers, hidden]", path, p2);
                goto done;
            }
            d->D = info.dims[1];
            size_t LD = L * (size_t)d->D;
            if (!alloc_n(&cabs, LD, sizeof *cabs) || !alloc_n(&ccnt, LD, sizeof *ccnt) ||
                !alloc_n(&d->channel_absmax, LD, sizeof *d->channel_absmax) ||
                !alloc_n(&d->channel_count, LD, sizeof *d->channel_count)) {
                st = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
                goto done;
            }
            char p3[256];
            snprintf(p3, sizeof p3, "%s/outliers/hidden/channel_count", smp->group);
            if ((st = dfl_dump_get_attr_f64(r, p3, "alpha", &d->alpha, err))) goto done;
        }
        int64_t dch[2] = {d->L, d->D};
        if ((st = check_shape(r, p2, 2, dch, " (hidden size differs between samples)", err)) ||
            (st = dfl_dump_read(r, p2, DFL_H5_F32, cabs, L * (size_t)d->D, err)))
            goto done;
        snprintf(p2, sizeof p2, "%s/outliers/hidden/channel_count", smp->group);
        if ((st = check_shape(r, p2, 2, dch, NULL, err)) ||
            (st = dfl_dump_read(r, p2, DFL_H5_U32, ccnt, L * (size_t)d->D, err)))
            goto done;
        for (size_t i = 0; i < L * (size_t)d->D; i++) {
            d->channel_count[i] += ccnt[i];
            if (cabs[i] > d->channel_absmax[i]) d->channel_absmax[i] = cabs[i];
        }
    }
    /* sorted per-layer lists */
    dfl_topk_item *sorted = dfl__alloc_array(K, sizeof *sorted);
    if (!sorted) {
        st = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int k = 0; k < 2; k++) {
        for (size_t l = 0; l < L; l++) {
            int32_t n = dfl_topk_sorted(&heaps[k][l], sorted);
            float *lt = d->kind[k].layer_top + l * K;
            for (size_t i = 0; i < K; i++) lt[i] = (int32_t)i < n ? sorted[i].value : NAN;
        }
    }
    free(sorted);
    dfl_outliers_count_massive(d, 100, 1000);
done:
    for (int k = 0; k < 2; k++) {
        free(heaps[k]);
        free(store[k]);
    }
    free(top);
    free(idx);
    free(hist);
    free(mom);
    free(cabs);
    free(ccnt);
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
    if (dfl_outliers_layer_nonfinite(d, kind, l)) return NAN;   /* not a number made of NaNs */
    if (l >= 0) return l < d->L ? dfl_hist_quantile(o->hist + l * B, 0.5) : NAN;
    uint64_t *sum = calloc(B, sizeof *sum);
    if (!sum) return NAN;
    for (int64_t j = 0; j < d->L; j++)
        for (int b = 0; b < B; b++) sum[b] += o->hist[j * B + b];
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
    const char *s = text;
    for (;;) {
        char *end;
        if (*s < '0' || *s > '9') break;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < lo || v > hi || *n >= cap) break;
        out[(*n)++] = v;
        if (*end == '\0') return DFL_OK;
        if (*end != ',') break;
        s = end + 1;
    }
    *n = 0;
    return dfl__fail(err, DFL_ERR_USAGE, "%s: '%s' is not a list of at most %d numbers in %lld..%lld, like 1,2,3", flag,
                     text, cap, (long long)lo, (long long)hi);
}

/* ---------------------------------------------------------------- report */

#define COL(t, name, num, prec)                                                                                       \
    do {                                                                                                              \
        if ((st = dfl_report_add_column(t, name, num, prec, err))) return st;                                         \
    } while (0)

static void num_or_na(dfl_report_table *t, size_t col, double v, const char *why)
{
    if (v == v) dfl_report_set_num(t, col, v, NULL);
    else dfl_report_set_missing(t, col, why, NULL);
}

static dfl_status table5(dfl_report *rep, const dfl_outliers_params *p, dfl_outlier_dump **d, const char **lab,
                         dfl_error *err)
{
    dfl_report_table *t;
    dfl_status st;
    if ((st = dfl_report_add_table(rep, "table5", "Largest activation magnitudes (Table 5): abs(x) pooled over all "
                                                  "layers and samples", &t, err)))
        return st;
    COL(t, "activation", DFL_NUM_AUTO, 4);
    COL(t, "model", DFL_NUM_AUTO, 4);
    char name[32];
    for (int i = 0; i < p->n_ranks; i++) {
        snprintf(name, sizeof name, "top%lld", (long long)p->ranks[i]);
        COL(t, name, DFL_NUM_AUTO, 4);
    }
    COL(t, "median", DFL_NUM_AUTO, 4);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < p->n_dumps; i++) {
            dfl_report_add_row(t, NULL);
            dfl_report_set_text(t, 0, kind_titles[k], NULL);
            dfl_report_set_text(t, 1, lab[i], NULL);
            for (int j = 0; j < p->n_ranks; j++) {
                double v = dfl_outliers_top(d[i], k, -1, p->ranks[j]);
                if (dfl_outliers_layer_nonfinite(d[i], k, -1)) dfl_report_set_num(t, 2 + (size_t)j, v, NULL);
                else num_or_na(t, 2 + (size_t)j, v, "n/a");
            }
            dfl_report_set_num(t, 2 + (size_t)p->n_ranks, dfl_outliers_median(d[i], k, -1), NULL);
        }
    return dfl_report_status(rep, err);
}

static void position_text(const dfl_outlier_dump *d, int k, int64_t l, char *buf, size_t cap)
{
    const dfl_outlier_kind *o = &d->kind[k];
    const int32_t *ix = o->layer_top1[l].idx;
    if (o->layer_top1_sample[l] < 0) snprintf(buf, cap, "-");
    else if (k == DFL_OUT_LOGITS)
        snprintf(buf, cap, "s%d h%d m%d q%d k%d", o->layer_top1_sample[l], ix[0], ix[1] + 1, ix[2], ix[3]);
    else snprintf(buf, cap, "s%d t%d c%d", o->layer_top1_sample[l], ix[0], ix[1]);
}

static dfl_status per_layer(dfl_report *rep, const dfl_outliers_params *p, dfl_outlier_dump **d, const char **lab,
                            dfl_error *err)
{
    dfl_report_table *t;
    dfl_status st;
    if ((st = dfl_report_add_table(rep, "per_layer", "Per layer (pooled over samples): massive activations", &t, err)))
        return st;
    COL(t, "activation", DFL_NUM_AUTO, 4);
    COL(t, "model", DFL_NUM_AUTO, 4);
    COL(t, "layer", DFL_NUM_AUTO, 4);
    COL(t, "top1", DFL_NUM_AUTO, 4);
    COL(t, "top2", DFL_NUM_AUTO, 4);
    COL(t, "top3", DFL_NUM_AUTO, 4);
    COL(t, "median", DFL_NUM_AUTO, 4);
    COL(t, "max_median", DFL_NUM_AUTO, 4);
    COL(t, "kurtosis", DFL_NUM_AUTO, 4);
    COL(t, "massive", DFL_NUM_AUTO, 4);
    COL(t, "top1_at", DFL_NUM_AUTO, 4);
    int any_sat = 0;
    char buf[96];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < p->n_dumps; i++)
            for (int64_t l = 0; l < d[i]->L; l++) {
                const dfl_outlier_kind *o = &d[i]->kind[k];
                double med = dfl_outliers_median(d[i], k, l), t1 = dfl_outliers_top(d[i], k, l, 1);
                dfl_report_add_row(t, NULL);
                dfl_report_set_text(t, 0, kind_titles[k], NULL);
                dfl_report_set_text(t, 1, lab[i], NULL);
                dfl_report_set_int(t, 2, l, NULL);
                for (int j = 0; j < 3; j++) num_or_na(t, 3 + (size_t)j, dfl_outliers_top(d[i], k, l, j + 1), "n/a");
                dfl_report_set_num(t, 6, med, NULL);
                num_or_na(t, 7, med > 0 ? t1 / med : NAN, "n/a");
                num_or_na(t, 8, dfl_outliers_kurtosis(o->moments + l * 6), "n/a");
                dfl_report_set_int(t, 9, (int64_t)o->massive[l], NULL);
                any_sat |= o->massive_saturated[l];
                position_text(d[i], k, l, buf, sizeof buf);
                dfl_report_set_text(t, 10, buf, NULL);
            }
    dfl_report_add_note(rep, NULL,
                        "per_layer: median within 1%% (histogram); kurtosis is Pearson's (3 for a normal distribution) "
                        "of the signed values; massive = stored top-K entries with abs(x) > %g and >= %g x the layer "
                        "median, summed over samples%s; top1_at: s sample, h head, m map, q query, k key / t token, "
                        "c channel",
                        p->massive_abs, p->massive_ratio,
                        any_sat ? " (a lower bound where a sample's whole top list was massive: probe with a larger "
                                  "--topk)"
                                : "");
    return dfl_report_status(rep, err);
}

static dfl_status per_head(dfl_report *rep, const dfl_outliers_params *p, dfl_outlier_dump **d, const char **lab,
                           dfl_error *err)
{
    dfl_report_table *t;
    dfl_status st;
    if ((st = dfl_report_add_table(rep, "per_head",
                                   "Attention logits per head, among the stored top-K lists only", &t, err)))
        return st;
    COL(t, "model", DFL_NUM_AUTO, 4);
    COL(t, "layer", DFL_NUM_AUTO, 4);
    COL(t, "head", DFL_NUM_AUTO, 4);
    COL(t, "stored", DFL_NUM_AUTO, 4);
    COL(t, "share", DFL_NUM_FIXED, 3);
    COL(t, "top1", DFL_NUM_AUTO, 4);
    COL(t, "top2", DFL_NUM_AUTO, 4);
    COL(t, "top3", DFL_NUM_AUTO, 4);
    COL(t, "cutoff", DFL_NUM_AUTO, 4);
    char buf[64];
    for (int i = 0; i < p->n_dumps; i++) {
        const dfl_outlier_dump *x = d[i];
        for (int64_t l = 0; l < x->L; l++) {
            uint64_t tot = 0;
            for (int64_t h = 0; h < x->H; h++) tot += x->head_stored[l * x->H + h];
            double cut = x->layer_cutoff[l];
            for (int64_t h = 0; h < x->H; h++) {
                dfl_report_add_row(t, NULL);
                dfl_report_set_text(t, 0, lab[i], NULL);
                dfl_report_set_int(t, 1, l, NULL);
                dfl_report_set_int(t, 2, h, NULL);
                uint64_t n = x->head_stored[l * x->H + h];
                dfl_report_set_int(t, 3, (int64_t)n, NULL);
                num_or_na(t, 4, tot ? (double)n / (double)tot : NAN, "n/a");
                for (int j = 0; j < 3; j++) {
                    float v = x->head_top[(l * x->H + h) * 3 + j];
                    if (v == v && v >= cut) dfl_report_set_num(t, 5 + (size_t)j, v, NULL);
                    else if (v == v) {
                        snprintf(buf, sizeof buf, "\xe2\x89\xa5%.4g", v); /* ≥: a lower bound */
                        dfl_report_set_missing(t, 5 + (size_t)j, buf, NULL);
                    } else if (cut > 0) {
                        snprintf(buf, sizeof buf, "<%.4g", cut);
                        dfl_report_set_missing(t, 5 + (size_t)j, buf, NULL);
                    } else dfl_report_set_missing(t, 5 + (size_t)j, "n/a", NULL);
                }
                if (cut > 0) dfl_report_set_num(t, 8, cut, NULL);
                else dfl_report_set_missing(t, 8, "none", NULL);
            }
        }
    }
    dfl_report_add_note(rep, NULL,
                        "per_head: derived from the stored top-K logits only (K per sample and layer, all heads and "
                        "both maps together): stored = how many of them the head holds, share = stored / all. A head's "
                        "top-j is exact when it is >= cutoff (the largest K-th value of a full sample list); \"\xe2\x89\xa5v\" "
                        "is a lower bound, \"<c\" means the head has no j-th value above the cutoff; csv/json carry "
                        "only the exact values (others empty/null)");
    return dfl_report_status(rep, err);
}

typedef struct feature {
    int64_t channel, layers;
    double frac_max, frac_mean, absmax;
} feature;

static int feature_cmp(const void *a, const void *b)
{
    const feature *x = a, *y = b;
    if (x->layers != y->layers) return x->layers < y->layers ? 1 : -1;
    if (x->absmax != y->absmax) return x->absmax < y->absmax ? 1 : -1;
    return (x->channel > y->channel) - (x->channel < y->channel);
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static dfl_status quant_tables(dfl_report *rep, const dfl_outliers_params *p, dfl_outlier_dump **d,
                               const char **lab, dfl_error *err)
{
    dfl_report_table *t;
    dfl_status st;
    char title[256];
    if (!p->quant) goto channels;
    snprintf(title, sizeof title,
             "LLM.int8() systematic outlier features of the hidden states: abs(x) >= alpha in >= %g%% of the tokens "
             "of >= %g%% of the layers",
             100 * p->int8_tokens, 100 * p->int8_layers);
    if ((st = dfl_report_add_table(rep, "int8_features", title, &t, err))) return st;
    COL(t, "model", DFL_NUM_AUTO, 4);
    COL(t, "alpha", DFL_NUM_AUTO, 4);
    COL(t, "channel", DFL_NUM_AUTO, 4);
    COL(t, "layers", DFL_NUM_AUTO, 4);
    COL(t, "layer_share", DFL_NUM_FIXED, 3);
    COL(t, "token_share_max", DFL_NUM_FIXED, 3);
    COL(t, "token_share_mean", DFL_NUM_FIXED, 3);
    COL(t, "absmax", DFL_NUM_AUTO, 4);
    for (int i = 0; i < p->n_dumps; i++) {
        const dfl_outlier_dump *x = d[i];
        feature *f = dfl__calloc_array((size_t)x->D, sizeof *f);
        if (!f) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        int64_t nf = 0, need = (int64_t)ceil(p->int8_layers * (double)x->L - 1e-9);
        if (need < 1) need = 1;
        for (int64_t c = 0; c < x->D; c++) {
            feature g = {c, 0, 0, 0, 0};
            double sum = 0;
            for (int64_t l = 0; l < x->L; l++) {
                double fr = x->tokens ? (double)x->channel_count[l * x->D + c] / (double)x->tokens : 0;
                if (x->channel_absmax[l * x->D + c] > g.absmax) g.absmax = x->channel_absmax[l * x->D + c];
                if (fr >= p->int8_tokens && fr > 0) {
                    g.layers++;
                    sum += fr;
                    if (fr > g.frac_max) g.frac_max = fr;
                }
            }
            if (g.layers >= need) {
                g.frac_mean = sum / (double)g.layers;
                f[nf++] = g;
            }
        }
        qsort(f, (size_t)nf, sizeof *f, feature_cmp);
        for (int64_t j = 0; j < nf; j++) {
            dfl_report_add_row(t, NULL);
            dfl_report_set_text(t, 0, lab[i], NULL);
            dfl_report_set_num(t, 1, x->alpha, NULL);
            dfl_report_set_int(t, 2, f[j].channel, NULL);
            dfl_report_set_int(t, 3, f[j].layers, NULL);
            dfl_report_set_num(t, 4, (double)f[j].layers / (double)x->L, NULL);
            dfl_report_set_num(t, 5, f[j].frac_max, NULL);
            dfl_report_set_num(t, 6, f[j].frac_mean, NULL);
            dfl_report_set_num(t, 7, f[j].absmax, NULL);
        }
        dfl_report_add_note(rep, NULL, "int8_features (%s): %lld of %lld channels at alpha = %g (probe --alpha), "
                            "%lld tokens", lab[i], (long long)nf, (long long)x->D, x->alpha, (long long)x->tokens);
        free(f);
    }

    if ((st = dfl_report_add_table(rep, "smoothquant",
                                   "SmoothQuant-style per-channel max abs(x) of the hidden states, per layer", &t, err)))
        return st;
    COL(t, "model", DFL_NUM_AUTO, 4);
    COL(t, "layer", DFL_NUM_AUTO, 4);
    COL(t, "channel_max", DFL_NUM_AUTO, 4);
    COL(t, "channel_median", DFL_NUM_AUTO, 4);
    COL(t, "max_median", DFL_NUM_AUTO, 4);
    COL(t, "top_channels", DFL_NUM_AUTO, 4);
    for (int i = 0; i < p->n_dumps; i++) {
        const dfl_outlier_dump *x = d[i];
        double *v = dfl__alloc_array((size_t)x->D, sizeof *v);
        if (!v) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (int64_t l = 0; l < x->L; l++) {
            const float *row = x->channel_absmax + l * x->D;
            for (int64_t c = 0; c < x->D; c++) v[c] = row[c];
            qsort(v, (size_t)x->D, sizeof *v, dbl_cmp);
            double med = x->D % 2 ? v[x->D / 2] : 0.5 * (v[x->D / 2 - 1] + v[x->D / 2]);
            /* the three largest channels, by index */
            int64_t best[3] = {-1, -1, -1};
            for (int64_t c = 0; c < x->D; c++)
                for (int j = 0; j < 3; j++)
                    if (best[j] < 0 || row[c] > row[best[j]]) {
                        for (int q = 2; q > j; q--) best[q] = best[q - 1];
                        best[j] = c;
                        break;
                    }
            char buf[160] = "";
            for (int j = 0; j < 3 && best[j] >= 0; j++)
                snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%sc%lld=%.4g", j ? " " : "",
                         (long long)best[j], row[best[j]]);
            dfl_report_add_row(t, NULL);
            dfl_report_set_text(t, 0, lab[i], NULL);
            dfl_report_set_int(t, 1, l, NULL);
            dfl_report_set_num(t, 2, v[x->D - 1], NULL);
            dfl_report_set_num(t, 3, med, NULL);
            num_or_na(t, 4, med > 0 ? v[x->D - 1] / med : NAN, "n/a");
            dfl_report_set_text(t, 5, buf, NULL);
        }
        free(v);
    }

    if (p->nbits > 0) {
        if ((st = dfl_report_add_table(rep, "sqnr",
                                       "SQNR (dB) of symmetric absmax fake quantization of the attention logits per "
                                       "tensor (one layer of one sample), estimated from the stored statistics",
                                       &t, err)))
            return st;
        COL(t, "model", DFL_NUM_AUTO, 4);
        COL(t, "layer", DFL_NUM_AUTO, 4);
        COL(t, "bits", DFL_NUM_AUTO, 4);
        COL(t, "sqnr_db", DFL_NUM_FIXED, 2);
        COL(t, "lo_db", DFL_NUM_FIXED, 2);
        COL(t, "hi_db", DFL_NUM_FIXED, 2);
        COL(t, "typ_err_db", DFL_NUM_AUTO, 2);
        for (int i = 0; i < p->n_dumps; i++) {
            const dfl_outlier_dump *x = d[i];
            for (int bi = 0; bi < x->nbits; bi++)
                for (int64_t li = 0; li <= x->L; li++) {
                    int64_t l = li < x->L ? li : -1; /* the pooled row last */
                    dfl_sqnr_acc a = {0, 0, 0, 0, 0};
                    for (int64_t j = (l < 0 ? 0 : l); j < (l < 0 ? x->L : l + 1); j++) {
                        const dfl_sqnr_acc *s = &x->sqnr[j * x->nbits + bi];
                        a.signal += s->signal;
                        a.noise += s->noise;
                        a.noise_lo += s->noise_lo;
                        a.noise_hi += s->noise_hi;
                        a.noise_var += s->noise_var;
                    }
                    dfl_sqnr q = dfl_outliers_sqnr(&a);
                    dfl_report_add_row(t, NULL);
                    dfl_report_set_text(t, 0, lab[i], NULL);
                    if (l < 0) dfl_report_set_missing(t, 1, "all", NULL);
                    else dfl_report_set_int(t, 1, l, NULL);
                    dfl_report_set_int(t, 2, x->bits[bi], NULL);
                    dfl_report_set_num(t, 3, q.db, NULL);
                    dfl_report_set_num(t, 4, q.lo_db, NULL);
                    dfl_report_set_num(t, 5, q.hi_db, NULL);
                    dfl_report_set_num(t, 6, q.typ_err_db, NULL);
                }
        }
        dfl_report_add_note(rep, NULL,
                            "sqnr: 10 log10(sum x^2 / sum e^2), e the error of x -> round(x/D)*D with D = max abs(x) "
                            "/ (2^(bits-1) - 1) per layer and sample (probe --quantize-logits B:tensor); stored top-K "
                            "values exact, the rest uniform within their histogram bins; [lo, hi] always holds the "
                            "true value, typ_err_db is the estimate's 1-sigma error; layer 'all' (empty in csv, null "
                            "in json) pools every layer");
    }

channels:
    if (p->channels) {
        if ((st = dfl_report_add_table(rep, "channels", "Per-channel max abs(x) and share of tokens >= alpha", &t,
                                       err)))
            return st;
        COL(t, "model", DFL_NUM_AUTO, 4);
        COL(t, "layer", DFL_NUM_AUTO, 4);
        COL(t, "channel", DFL_NUM_AUTO, 4);
        COL(t, "absmax", DFL_NUM_AUTO, 4);
        COL(t, "token_share", DFL_NUM_FIXED, 4);
        for (int i = 0; i < p->n_dumps; i++) {
            const dfl_outlier_dump *x = d[i];
            for (int64_t l = 0; l < x->L; l++)
                for (int64_t c = 0; c < x->D; c++) {
                    dfl_report_add_row(t, NULL);
                    dfl_report_set_text(t, 0, lab[i], NULL);
                    dfl_report_set_int(t, 1, l, NULL);
                    dfl_report_set_int(t, 2, c, NULL);
                    dfl_report_set_num(t, 3, x->channel_absmax[l * x->D + c], NULL);
                    dfl_report_set_num(t, 4, x->tokens ? (double)x->channel_count[l * x->D + c] / (double)x->tokens
                                                       : NAN, NULL);
                }
        }
    }
    return dfl_report_status(rep, err);
}

/* ------------------------------------------------------------------ plot */

static dfl_status plot(const dfl_outliers_params *p, dfl_outlier_dump **d, const char **lab, dfl_error *err)
{
    int W = 1800, H = 760;
    dfl_canvas *c = NULL;
    dfl_status st = dfl_canvas_create(W, H, (dfl_rgb){255, 255, 255}, &c, err);
    if (st) return st;
    int n = p->n_dumps;
    double *ys = NULL, *xs = NULL;
    char(*names)[96] = calloc((size_t)(2 * n), sizeof *names);
    dfl_plot_series *ser = calloc((size_t)(2 * n), sizeof *ser);
    int64_t Lmax = 0;
    for (int i = 0; i < n; i++)
        if (d[i]->L > Lmax) Lmax = d[i]->L;
    ys = dfl__calloc_array((size_t)(2 * n) * (size_t)Lmax, sizeof *ys);
    xs = dfl__calloc_array((size_t)Lmax, sizeof *xs);
    if (!names || !ser || !ys || !xs) {
        st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory for the plot");
        goto done;
    }
    for (int64_t l = 0; l < Lmax; l++) xs[l] = (double)l;
    for (int k = 0; k < 2 && !st; k++) {
        for (int i = 0; i < n; i++) {
            double *top = ys + (size_t)(2 * i) * (size_t)Lmax, *med = top + Lmax;
            for (int64_t l = 0; l < d[i]->L; l++) {
                top[l] = dfl_outliers_top(d[i], k, l, 1);
                med[l] = dfl_outliers_median(d[i], k, l);
            }
            snprintf(names[2 * i], sizeof names[0], "%s top-1", lab[i]);
            snprintf(names[2 * i + 1], sizeof names[0], "%s median", lab[i]);
            dfl_plot_series a = {names[2 * i], xs, top, (int)d[i]->L, 1, dfl_plot_color(i), DFL_MARKER_CIRCLE,
                                 DFL_DASH_SOLID, 0};
            dfl_plot_series b = {names[2 * i + 1], xs, med, (int)d[i]->L, 1, dfl_plot_color(i), DFL_MARKER_SQUARE,
                                 DFL_DASH_DASHED, 0};
            ser[2 * i] = a;
            ser[2 * i + 1] = b;
        }
        dfl_line_chart ch = dfl_line_chart_default();
        ch.title = k == DFL_OUT_LOGITS ? "Attention logits" : "Hidden states";
        ch.subtitle = "per layer: top-1 (solid) and median (dashed) of abs(x)";
        ch.x.label = "layer";
        ch.x.integer_ticks = 1;
        ch.y.label = "abs(x)";
        ch.y.scale = DFL_SCALE_LOG;
        ch.series = ser;
        ch.n_series = 2 * n;
        ch.font_scale = 2;
        ch.legend = n > 2 ? DFL_LEGEND_BELOW : DFL_LEGEND_AUTO;
        st = dfl_plot_line_draw(c, k * W / 2, 0, W / 2, H, &ch, err);
    }
    if (!st) {
        const char *keys[1] = {"Software"}, *vals[1] = {"difflens outliers"};
        st = dfl_png_write(c, p->plot_path, p->overwrite, keys, vals, 1, err);
    }
done:
    free(names);
    free(ser);
    free(ys);
    free(xs);
    dfl_canvas_destroy(c);
    return st;
}

/* ------------------------------------------------------------------- run */

dfl_status dfl_outliers_run(const dfl_outliers_params *p, dfl_report **out, dfl_error *err)
{
    *out = NULL;
    if (p->n_dumps < 1 || p->n_dumps > DFL_OUTLIERS_MAX_DUMPS)
        return dfl__fail(err, DFL_ERR_USAGE, "%d dumps given (1 to %d)", p->n_dumps, DFL_OUTLIERS_MAX_DUMPS);
    if (p->n_ranks < 1 || p->n_ranks > DFL_OUTLIERS_MAX_RANKS)
        return dfl__fail(err, DFL_ERR_USAGE, "--top: %d ranks (1 to %d)", p->n_ranks, DFL_OUTLIERS_MAX_RANKS);
    for (int i = 0; i < p->n_ranks; i++)
        if (p->ranks[i] < 1 || p->ranks[i] > DFL_TOPK_MAX)
            return dfl__fail(err, DFL_ERR_USAGE, "--top: rank %lld not in 1..%d", (long long)p->ranks[i], DFL_TOPK_MAX);
    if (!(p->int8_layers > 0 && p->int8_layers <= 1) || !(p->int8_tokens > 0 && p->int8_tokens <= 1))
        return dfl__fail(err, DFL_ERR_USAGE, "--int8-layers and --int8-tokens must be in (0, 1]");
    dfl_outlier_dump *d[DFL_OUTLIERS_MAX_DUMPS] = {0};
    char labels[DFL_OUTLIERS_MAX_DUMPS][128];
    const char *lab[DFL_OUTLIERS_MAX_DUMPS];
    dfl_report *rep = NULL;
    dfl_status st = DFL_OK;
    for (int i = 0; i < p->n_dumps && !st; i++) {
        st = dfl_outliers_load(p->dumps[i], p->bits, p->quant ? p->nbits : 0, &d[i], err);
        if (!st) dfl_outliers_count_massive(d[i], p->massive_abs, p->massive_ratio);
    }
    if (st) goto done;
    /* labels: given, or the model type; repeated model types get the file name */
    for (int i = 0; i < p->n_dumps; i++) {
        int dup = 0;
        for (int j = 0; j < p->n_dumps; j++) dup |= j != i && !strcmp(d[i]->model_type, d[j]->model_type);
        const char *base = strrchr(d[i]->path, '/');
        base = base ? base + 1 : d[i]->path;
        if (p->labels[i]) snprintf(labels[i], sizeof labels[i], "%s", p->labels[i]);
        else if (dup) snprintf(labels[i], sizeof labels[i], "%s (%s)", d[i]->model_type, base);
        else snprintf(labels[i], sizeof labels[i], "%s", d[i]->model_type);
        lab[i] = labels[i];
    }
    if ((st = dfl_report_create("outliers: activation magnitudes", &rep, err))) goto done;
    char buf[512];
    for (int i = 0; i < p->n_dumps; i++) {
        snprintf(buf, sizeof buf, "%s: %s, %lld layers, %lld heads, hidden %lld, %lld samples, %lld tokens, K = %lld",
                 lab[i], d[i]->path, (long long)d[i]->L, (long long)d[i]->H, (long long)d[i]->D,
                 (long long)d[i]->S, (long long)d[i]->tokens, (long long)d[i]->K);
        char key[32];
        snprintf(key, sizeof key, "dump %d", i + 1);
        dfl_report_add_meta(rep, key, buf, NULL);
    }
    if ((st = table5(rep, p, d, lab, err))) goto done;
    for (int i = 0; i < p->n_dumps; i++)
        for (int j = 0; j < p->n_ranks; j++)
            if (p->ranks[j] > d[i]->K)
                dfl_report_add_note(rep, NULL, "table5: top%lld of %s is n/a: its dump keeps K = %lld values per "
                                    "layer and sample (probe --topk %lld or more)", (long long)p->ranks[j], lab[i],
                                    (long long)d[i]->K, (long long)p->ranks[j]);
    dfl_report_add_note(rep, NULL, "table5: top-n is exact (merged top-K lists); the median of abs(x) is within 1%% "
                                   "(log histogram, 64 bins per octave)");
    for (int i = 0; i < p->n_dumps; i++)
        for (int k = 0; k < 2; k++)
            if (dfl_outliers_layer_nonfinite(d[i], k, -1)) {
                int64_t first = 0;
                while (!dfl_outliers_layer_nonfinite(d[i], k, first)) first++;
                dfl_report_add_note(rep, NULL, "warning: %s: the %s hold NaN or Inf from layer %lld on (see the "
                                    "samples' nonfinite_layer attribute): their top-n and median are NaN", lab[i],
                                    kind_titles[k], (long long)first);
            }
    if (p->per_layer && (st = per_layer(rep, p, d, lab, err))) goto done;
    if (p->per_head && (st = per_head(rep, p, d, lab, err))) goto done;
    if ((p->quant || p->channels) && (st = quant_tables(rep, p, d, lab, err))) goto done;
    if ((st = dfl_report_status(rep, err))) goto done;
    if (p->plot_path && (st = plot(p, d, lab, err))) goto done;
done:
    for (int i = 0; i < p->n_dumps; i++) dfl_outliers_free(d[i]);
    if (st) {
        dfl_report_destroy(rep);
        return st;
    }
    *out = rep;
    return DFL_OK;
}
