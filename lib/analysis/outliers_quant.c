/* outliers_quant.c — outliers --quant-stats: tensor statistics of the linear layers' inputs,
 * the residual stream layer to layer, Sink_k and the Q/K massive-values map, pooled over the
 * samples of each dump (outliers_quant.h). */
#include "analysis/outliers_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_read.h"
#include "dump/dump_schema.h"

#define SITES     4
#define SINK_KEYS 4
#define MAX_DUMPS 8

static const char *const SITE_NAME[SITES] = {"attn_in", "attn_out", "mlp_in", "down_in"};
static const char *const SITE_DS[SITES] = {DFL_DS_LINEAR_ATTN_IN, DFL_DS_LINEAR_ATTN_OUT, DFL_DS_LINEAR_MLP_IN,
                                           DFL_DS_LINEAR_DOWN_IN};
static const char *const MAP_NAME[3] = {"map1", "map2", "diff"};

typedef struct sink_acc {
    int64_t Ls;
    int32_t *layers; /* [Ls] */
    double *alpha;   /* [Ls, SINK_KEYS]: Σ over (sample, head) of α_k */
    double *exceed;  /* [Ls, SINK_KEYS]: (sample, head) with α_k > ε */
    double *n;       /* [Ls, SINK_KEYS]: (sample, head) with a row q >= k */
} sink_acc;

typedef struct qdump {
    char label[128];
    int64_t L;
    int interleaved; /* RoPE pairs (2i, 2i+1) instead of (i, i + d/2) */
    double *mom;     /* [L, SITES, 6] pooled; NULL without --quant-stats */
    int64_t width[SITES];
    double *chan[SITES]; /* [L, width] Σx² */
    double tokens;       /* Σ T over the samples with linear stats */
    int64_t hL;          /* layers of hidden states, 0 = none */
    double *res;         /* [hL, 3] Σ over tokens of gain, cosine, pearson (layer l vs l − 1) */
    double res_n;
    sink_acc sink[3];
    int64_t nq, nk, hd;
    double *qa, *ka; /* [L, nq, hd], [L, nk, hd]: Σ over samples of T · mean |q| */
    double qk_tokens;
} qdump;

static void qdump_free(qdump *q)
{
    free(q->mom), free(q->res), free(q->qa), free(q->ka);
    for (int s = 0; s < SITES; s++)
        free(q->chan[s]);
    for (int m = 0; m < 3; m++)
        free(q->sink[m].layers), free(q->sink[m].alpha), free(q->sink[m].exceed), free(q->sink[m].n);
}

/* ------------------------------------------------------------------ reading */

/* Add the f64 dataset at path (n values) into acc, allocating acc[n] zeroed on first use;
 * 0 when absent. */
static dfl_status add_f64(const dfl_dump_reader *r, const char *path, size_t n, double **acc, int *found,
                          dfl_error *err)
{
    *found = 0;
    if (!dfl_dump_exists(r, path)) return DFL_OK;
    double *v = NULL;
    size_t got = 0;
    dfl_status s = dfl_dump_read_alloc(r, path, DFL_H5_F64, (void **)&v, &got, err);
    if (s) return s;
    if (got != n) {
        free(v);
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: %zu values, expected %zu", dfl_dump_path(r), path, got, n);
    }
    if (!*acc && !(*acc = calloc(n, sizeof **acc))) {
        free(v);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        (*acc)[i] += v[i];
    free(v);
    *found = 1;
    return DFL_OK;
}

static dfl_status read_linear(qdump *q, const dfl_dump_reader *r, const char *g, int64_t T, dfl_error *err)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g, DFL_DS_LINEAR_MOMENTS);
    if (!dfl_dump_exists(r, path)) return DFL_OK;
    double *m = NULL;
    size_t n = 0;
    dfl_status s = dfl_dump_read_alloc(r, path, DFL_H5_F64, (void **)&m, &n, err);
    if (s) return s;
    if (n != (size_t)q->L * SITES * 6) {
        free(m);
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: %zu values, expected [%lld, 4, 6]", dfl_dump_path(r), path, n,
                         (long long)q->L);
    }
    if (!q->mom && !(q->mom = calloc(n, sizeof *q->mom))) {
        free(m);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        q->mom[i] = i % 6 == 5 ? fmax(q->mom[i], m[i]) : q->mom[i] + m[i];
    free(m);
    q->tokens += (double)T;
    for (int site = 0; site < SITES && !s; site++) {
        snprintf(path, sizeof path, "%s/%s", g, SITE_DS[site]);
        dfl_dump_dset_info in;
        if (!dfl_dump_exists(r, path)) continue;
        if ((s = dfl_dump_dataset_info(r, path, &in, err))) break;
        if (in.ndim != 2 || in.dims[0] != q->L || (q->width[site] && in.dims[1] != q->width[site])) {
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: unexpected shape", dfl_dump_path(r), path);
            break;
        }
        q->width[site] = in.dims[1];
        int found;
        s = add_f64(r, path, (size_t)(q->L * in.dims[1]), &q->chan[site], &found, err);
    }
    return s;
}

/* The residual stream: layer l against l − 1 of hidden [L, T, D], per token. */
static dfl_status read_hidden(qdump *q, const dfl_dump_reader *r, const char *g, dfl_error *err)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g, DFL_DS_HIDDEN);
    if (!dfl_dump_exists(r, path)) return DFL_OK;
    dfl_dump_dset_info in;
    dfl_status s = dfl_dump_dataset_info(r, path, &in, err);
    if (s) return s;
    if (in.ndim != 3) return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: rank %d", dfl_dump_path(r), path, in.ndim);
    int64_t L = in.dims[0], T = in.dims[1], D = in.dims[2];
    if (!q->res) {
        q->hL = L;
        if (!(q->res = calloc((size_t)(3 * L), sizeof *q->res))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    } else if (q->hL != L) {
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: %lld layers, earlier %lld", dfl_dump_path(r), path, (long long)L,
                         (long long)q->hL);
    }
    float *h = dfl__alloc_array((size_t)(L * T) * (size_t)D, sizeof *h);
    if (!h) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for hidden states");
    int64_t start[3] = {0, 0, 0}, count[3] = {L, T, D};
    s = dfl_dump_read_slab_f32(r, path, start, count, h, err);
    for (int64_t l = 1; l < L && !s; l++)
        for (int64_t t = 0; t < T; t++) {
            const float *a = h + ((l - 1) * T + t) * D, *b = h + (l * T + t) * D;
            double sa = 0, sb = 0;
            for (int64_t c = 0; c < D; c++)
                sa += a[c], sb += b[c];
            double ma = sa / (double)D, mb = sb / (double)D, aa = 0, bb = 0, ab = 0, ca = 0, cb = 0, cab = 0;
            for (int64_t c = 0; c < D; c++) {
                double x = a[c], y = b[c];
                aa += x * x, bb += y * y, ab += x * y;
                ca += (x - ma) * (x - ma), cb += (y - mb) * (y - mb), cab += (x - ma) * (y - mb);
            }
            q->res[3 * l] += sqrt(bb / aa);
            q->res[3 * l + 1] += ab / sqrt(aa * bb);
            q->res[3 * l + 2] += cab / sqrt(ca * cb);
        }
    q->res_n += (double)T;
    free(h);
    return s;
}

/* Sink_k from the stored maps: α_k = mean over stored rows q >= k of A[q, k]. */
static dfl_status read_sink(qdump *q, const dfl_dump_reader *r, const char *g, double eps, dfl_error *err)
{
    dfl_status s = DFL_OK;
    for (int m = 0; m < 3 && !s; m++) {
        char path[256], rp[256], lp[256];
        snprintf(path, sizeof path, "%s/attn/%s", g, MAP_NAME[m]);
        if (!dfl_dump_exists(r, path)) continue;
        dfl_dump_dset_info in;
        if ((s = dfl_dump_dataset_info(r, path, &in, err))) break;
        if (in.ndim != 4) {
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: rank %d", dfl_dump_path(r), path, in.ndim);
            break;
        }
        int64_t Ls = in.dims[0], Hs = in.dims[1], R = in.dims[2], T = in.dims[3];
        int32_t *rows = NULL, *layers = NULL;
        snprintf(rp, sizeof rp, "%s/%s", g, DFL_DS_ATTN_ROWS);
        snprintf(lp, sizeof lp, "%s/%s", g, DFL_DS_ATTN_LAYERS);
        s = dfl_dump_read_alloc(r, rp, DFL_H5_I32, (void **)&rows, NULL, err);
        if (!s) s = dfl_dump_read_alloc(r, lp, DFL_H5_I32, (void **)&layers, NULL, err);
        sink_acc *a = &q->sink[m];
        if (!s && !a->alpha) {
            a->Ls = Ls;
            a->layers = malloc((size_t)Ls * sizeof *a->layers);
            a->alpha = calloc((size_t)Ls * SINK_KEYS, sizeof *a->alpha);
            a->exceed = calloc((size_t)Ls * SINK_KEYS, sizeof *a->exceed);
            a->n = calloc((size_t)Ls * SINK_KEYS, sizeof *a->n);
            if (!a->layers || !a->alpha || !a->exceed || !a->n) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            if (!s) memcpy(a->layers, layers, (size_t)Ls * sizeof *layers);
        } else if (!s && (a->Ls != Ls || memcmp(a->layers, layers, (size_t)Ls * sizeof *layers))) {
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: other layers than the earlier samples", dfl_dump_path(r), path);
        }
        size_t per = (size_t)Hs * (size_t)R * (size_t)T;
        float *A = s ? NULL : dfl__alloc_array(per, sizeof *A);
        if (!s && !A) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory for maps");
        for (int64_t l = 0; l < Ls && !s; l++) {
            int64_t start[4] = {l, 0, 0, 0}, count[4] = {1, Hs, R, T};
            if ((s = dfl_dump_read_slab_f32(r, path, start, count, A, err))) break;
            for (int64_t h = 0; h < Hs; h++)
                for (int k = 0; k < SINK_KEYS && k < T; k++) {
                    double sum = 0;
                    int64_t nr = 0;
                    for (int64_t ri = 0; ri < R; ri++)
                        if (rows[ri] >= k) sum += A[((size_t)h * (size_t)R + (size_t)ri) * (size_t)T + (size_t)k], nr++;
                    if (!nr) continue;
                    double alpha = sum / (double)nr;
                    a->alpha[l * SINK_KEYS + k] += alpha;
                    a->exceed[l * SINK_KEYS + k] += alpha > eps;
                    a->n[l * SINK_KEYS + k] += 1;
                }
        }
        free(A), free(rows), free(layers);
    }
    return s;
}

static dfl_status read_qk(qdump *q, const dfl_dump_reader *r, const char *g, int64_t T, dfl_error *err)
{
    char pq[256], pk[256];
    snprintf(pq, sizeof pq, "%s/%s", g, DFL_DS_QK_Q_ABS);
    snprintf(pk, sizeof pk, "%s/%s", g, DFL_DS_QK_K_ABS);
    if (!dfl_dump_exists(r, pq) || !dfl_dump_exists(r, pk)) return DFL_OK;
    dfl_dump_dset_info iq, ik;
    dfl_status s = dfl_dump_dataset_info(r, pq, &iq, err);
    if (!s) s = dfl_dump_dataset_info(r, pk, &ik, err);
    if (s) return s;
    if (iq.ndim != 3 || ik.ndim != 3 || iq.dims[0] != q->L || ik.dims[0] != q->L || iq.dims[2] != ik.dims[2] ||
        (q->qa && (iq.dims[1] != q->nq || ik.dims[1] != q->nk || iq.dims[2] != q->hd)))
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: unexpected shape", dfl_dump_path(r), pq);
    q->nq = iq.dims[1], q->nk = ik.dims[1], q->hd = iq.dims[2];
    size_t nq = (size_t)(q->L * q->nq * q->hd), nk = (size_t)(q->L * q->nk * q->hd);
    if (!q->qa) {
        q->qa = calloc(nq, sizeof *q->qa), q->ka = calloc(nk, sizeof *q->ka);
        if (!q->qa || !q->ka) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    float *v = dfl__alloc_array(nq > nk ? nq : nk, sizeof *v);
    if (!v) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    s = dfl_dump_read(r, pq, DFL_H5_F32, v, nq, err);
    for (size_t i = 0; i < nq && !s; i++)
        q->qa[i] += (double)T * v[i];
    if (!s) s = dfl_dump_read(r, pk, DFL_H5_F32, v, nk, err);
    for (size_t i = 0; i < nk && !s; i++)
        q->ka[i] += (double)T * v[i];
    free(v);
    q->qk_tokens += (double)T;
    return s;
}

static dfl_status read_dump(qdump *q, const char *path, const char *label, double eps, dfl_error *err)
{
    dfl_dump_reader *r = NULL;
    dfl_status s = dfl_dump_open(path, &r, err);
    if (s) return s;
    if (label) {
        snprintf(q->label, sizeof q->label, "%s", label);
    } else {
        const char *b = strrchr(path, '/');
        snprintf(q->label, sizeof q->label, "%s", b ? b + 1 : path);
        size_t n = strlen(q->label);
        if (n > 3 && !strcmp(q->label + n - 3, ".h5")) q->label[n - 3] = 0;
    }
    char *mt = NULL;
    s = dfl_dump_get_attr_i64(r, "/", DFL_ATTR_NUM_LAYERS, &q->L, err);
    if (!s) s = dfl_dump_get_attr_str(r, "/", DFL_ATTR_MODEL_TYPE, &mt, err);
    if (!s) q->interleaved = !strncmp(mt, "diff_transformer", 16); /* the official Diff: interleaved RoPE */
    free(mt);
    for (size_t i = 0; !s && i < dfl_dump_sample_count(r); i++) {
        const dfl_dump_sample *sm = dfl_dump_sample_at(r, i);
        char tp[256];
        dfl_dump_dset_info ti;
        snprintf(tp, sizeof tp, "%s/%s", sm->group, DFL_DS_TOKENS);
        if ((s = dfl_dump_dataset_info(r, tp, &ti, err))) break;
        int64_t T = ti.dims[0];
        if (!(s = read_linear(q, r, sm->group, T, err)) && !(s = read_hidden(q, r, sm->group, err)) &&
            !(s = read_sink(q, r, sm->group, eps, err)))
            s = read_qk(q, r, sm->group, T, err);
    }
    int any = q->mom || q->res || q->qa;
    for (int m = 0; m < 3; m++)
        any |= q->sink[m].alpha != NULL;
    if (!s && !any)
        s = dfl__fail(err, DFL_ERR_FORMAT,
                      "%s: no quantization statistics (probe with --quant-stats, --save-hidden or --maps)", path);
    dfl_dump_close(r);
    return s;
}

/* ------------------------------------------------------------------- derived */

typedef struct tensor_stats {
    double mean, std, skew, kurt_pearson, max_abs, entropy, energy;
} tensor_stats;

/* From count n, Σx..Σx⁴: population moments; from Σx² per channel: energies e_c = Σx²/tokens,
 * ΣE[A²] = Σ e_c, normalised entropy −Σ p ln p / ln C of p_c = e_c / Σ e. */
static tensor_stats tensor_of(const double *m, const double *chan, int64_t C, double tokens)
{
    tensor_stats t;
    double n = m[0], mu = m[1] / n, e2 = m[2] / n, e3 = m[3] / n, e4 = m[4] / n;
    double var = e2 - mu * mu;
    t.mean = mu;
    t.std = sqrt(var);
    t.skew = (e3 - 3 * mu * e2 + 2 * mu * mu * mu) / (var * t.std);
    t.kurt_pearson = (e4 - 4 * mu * e3 + 6 * mu * mu * e2 - 3 * mu * mu * mu * mu) / (var * var);
    t.max_abs = m[5];
    double tot = 0, h = 0;
    for (int64_t c = 0; chan && c < C; c++)
        tot += chan[c];
    for (int64_t c = 0; chan && c < C; c++)
        if (chan[c] > 0) h -= chan[c] / tot * log(chan[c] / tot);
    t.entropy = chan && C > 1 ? h / log((double)C) : NAN;
    t.energy = tot / tokens;
    return t;
}

/* RoPE pair of dimension j of a head of hd dims: (2i, 2i+1) interleaved, else (i, i + hd/2). */
static int64_t rope_pair(int64_t j, int64_t hd, int interleaved)
{
    return interleaved ? j / 2 : j % (hd / 2);
}

/* -------------------------------------------------------------------- report */

static dfl_status cols(dfl_report_table *t, const char *const *names, int n, dfl_error *err)
{
    dfl_status s = DFL_OK;
    for (int i = 0; i < n && !s; i++)
        s = dfl_report_add_column(t, names[i], DFL_NUM_AUTO, 5, err);
    return s;
}

static dfl_status build_report(const qdump *q, size_t nd, double eps, dfl_report **out, dfl_error *err)
{
    dfl_report *rep = NULL;
    dfl_report_table *t = NULL;
    dfl_status s = dfl_report_create("outliers --quant-stats", &rep, err);
    if (!s)
        s = dfl_report_add_note(
            rep, err,
            "kurtosis: excess = Pearson - 3 (llama.cpp imatrix prints excess; Bondarenko et al. "
            "Pearson); energy = sum over channels of E[x^2]; entropy of the channel energies / ln C");
    static const char *const tc[] = {
        "dump",    "layer",          "site",  "mean", "std", "skewness", "kurtosis (excess)", "kurtosis (Pearson)",
        "max |x|", "entropy (norm)", "energy"};
    int any = 0;
    for (size_t i = 0; i < nd; i++)
        any |= q[i].mom != NULL;
    if (!s && any) s = dfl_report_add_table(rep, "tensors", "Linear-layer inputs per layer (pooled)", &t, err);
    if (!s && any) s = cols(t, tc, 11, err);
    for (size_t i = 0; i < nd && !s && any; i++)
        for (int64_t l = 0; q[i].mom && l < q[i].L && !s; l++)
            for (int site = 0; site < SITES && !s; site++) {
                const double *m = q[i].mom + ((size_t)l * SITES + (size_t)site) * 6;
                if (m[0] <= 0) continue;
                const double *ch = q[i].chan[site] ? q[i].chan[site] + (size_t)l * (size_t)q[i].width[site] : NULL;
                tensor_stats ts = tensor_of(m, ch, q[i].width[site], q[i].tokens);
                double v[8] = {ts.mean,         ts.std,     ts.skew,    ts.kurt_pearson - 3,
                               ts.kurt_pearson, ts.max_abs, ts.entropy, ts.energy};
                s = dfl_report_add_row(t, err);
                if (!s) s = dfl_report_set_text(t, 0, q[i].label, err);
                if (!s) s = dfl_report_set_int(t, 1, l, err);
                if (!s) s = dfl_report_set_text(t, 2, SITE_NAME[site], err);
                for (int c = 0; c < 8 && !s; c++)
                    s = dfl_report_set_num(t, 3 + c, v[c], err);
            }
    any = 0;
    for (size_t i = 0; i < nd; i++)
        any |= q[i].res != NULL;
    static const char *const rc[] = {"dump", "layer", "gain", "cosine", "pearson"};
    if (!s && any)
        s = dfl_report_add_table(rep, "residual", "Residual stream, layer l against layer l - 1 (mean over tokens)", &t,
                                 err);
    if (!s && any) s = cols(t, rc, 5, err);
    for (size_t i = 0; i < nd && !s && any; i++)
        for (int64_t l = 1; q[i].res && l < q[i].hL && !s; l++) {
            s = dfl_report_add_row(t, err);
            if (!s) s = dfl_report_set_text(t, 0, q[i].label, err);
            if (!s) s = dfl_report_set_int(t, 1, l, err);
            for (int c = 0; c < 3 && !s; c++)
                s = dfl_report_set_num(t, 2 + c, q[i].res[3 * l + c] / q[i].res_n, err);
        }
    any = 0;
    for (size_t i = 0; i < nd; i++)
        for (int m = 0; m < 3; m++)
            any |= q[i].sink[m].alpha != NULL;
    static const char *const sc[] = {"dump", "map", "key", "sink", "importance", "count"};
    static const char *const slc[] = {"dump", "map", "layer", "key", "sink", "importance"};
    dfl_report_table *tl = NULL;
    char title[160];
    snprintf(title, sizeof title, "Sink_k at eps = %g over (sample, layer, head); importance = mean attention to key k",
             eps);
    if (!s && any) s = dfl_report_add_table(rep, "sink", title, &t, err);
    if (!s && any) s = cols(t, sc, 6, err);
    if (!s && any) s = dfl_report_add_table(rep, "sink_layers", "Sink_k per layer over (sample, head)", &tl, err);
    if (!s && any) s = cols(tl, slc, 6, err);
    for (size_t i = 0; i < nd && !s && any; i++)
        for (int m = 0; m < 3 && !s; m++) {
            const sink_acc *a = &q[i].sink[m];
            for (int k = 0; a->alpha && k < SINK_KEYS && !s; k++) {
                double ex = 0, al = 0, n = 0;
                for (int64_t l = 0; l < a->Ls; l++) {
                    ex += a->exceed[l * SINK_KEYS + k], al += a->alpha[l * SINK_KEYS + k], n += a->n[l * SINK_KEYS + k];
                    if (!a->n[l * SINK_KEYS + k]) continue;
                    s = dfl_report_add_row(tl, err);
                    if (!s) s = dfl_report_set_text(tl, 0, q[i].label, err);
                    if (!s) s = dfl_report_set_text(tl, 1, MAP_NAME[m], err);
                    if (!s) s = dfl_report_set_int(tl, 2, a->layers[l], err);
                    if (!s) s = dfl_report_set_int(tl, 3, k, err);
                    if (!s) s = dfl_report_set_num(tl, 4, a->exceed[l * SINK_KEYS + k] / a->n[l * SINK_KEYS + k], err);
                    if (!s) s = dfl_report_set_num(tl, 5, a->alpha[l * SINK_KEYS + k] / a->n[l * SINK_KEYS + k], err);
                }
                if (!n || s) continue;
                s = dfl_report_add_row(t, err);
                if (!s) s = dfl_report_set_text(t, 0, q[i].label, err);
                if (!s) s = dfl_report_set_text(t, 1, MAP_NAME[m], err);
                if (!s) s = dfl_report_set_int(t, 2, k, err);
                if (!s) s = dfl_report_set_num(t, 3, ex / n, err);
                if (!s) s = dfl_report_set_num(t, 4, al / n, err);
                if (!s) s = dfl_report_set_int(t, 5, (int64_t)n, err);
            }
        }
    any = 0;
    for (size_t i = 0; i < nd; i++)
        any |= q[i].qa != NULL;
    static const char *const qc[] = {"dump",         "layer", "tensor",    "head",
                                     "max mean |x|", "dim",   "rope pair", "low-frequency share"};
    static const char *const mc[] = {"dump", "layer", "tensor", "head", "dim", "mean |x|"};
    if (!s && any)
        s = dfl_report_add_table(rep, "qk", "Q/K massive values per layer and head (mean |x| over tokens after RoPE)",
                                 &t, err);
    if (!s && any) s = cols(t, qc, 8, err);
    if (!s && any) s = dfl_report_add_table(rep, "qk_map", "Q/K map: mean |x| per layer, head and dimension", &tl, err);
    if (!s && any) s = cols(tl, mc, 6, err);
    for (size_t i = 0; i < nd && !s && any; i++) {
        const qdump *d = &q[i];
        for (int64_t l = 0; d->qa && l < d->L && !s; l++)
            for (int w = 0; w < 2 && !s; w++) {
                int64_t nh = w ? d->nk : d->nq;
                const double *base = (w ? d->ka : d->qa) + (size_t)(l * nh * d->hd);
                for (int64_t h = 0; h < nh && !s; h++) {
                    const double *v = base + h * d->hd;
                    double mx = -1, tot = 0, low = 0;
                    int64_t jm = 0;
                    for (int64_t j = 0; j < d->hd; j++) {
                        double x = v[j] / d->qk_tokens;
                        if (x > mx) mx = x, jm = j;
                        tot += x;
                        if (rope_pair(j, d->hd, d->interleaved) >= d->hd / 4) low += x;
                        s = dfl_report_add_row(tl, err);
                        if (!s) s = dfl_report_set_text(tl, 0, d->label, err);
                        if (!s) s = dfl_report_set_int(tl, 1, l, err);
                        if (!s) s = dfl_report_set_text(tl, 2, w ? "k" : "q", err);
                        if (!s) s = dfl_report_set_int(tl, 3, h, err);
                        if (!s) s = dfl_report_set_int(tl, 4, j, err);
                        if (!s) s = dfl_report_set_num(tl, 5, x, err);
                    }
                    if (s) break;
                    s = dfl_report_add_row(t, err);
                    if (!s) s = dfl_report_set_text(t, 0, d->label, err);
                    if (!s) s = dfl_report_set_int(t, 1, l, err);
                    if (!s) s = dfl_report_set_text(t, 2, w ? "k" : "q", err);
                    if (!s) s = dfl_report_set_int(t, 3, h, err);
                    if (!s) s = dfl_report_set_num(t, 4, mx, err);
                    if (!s) s = dfl_report_set_int(t, 5, jm, err);
                    if (!s) s = dfl_report_set_int(t, 6, rope_pair(jm, d->hd, d->interleaved), err);
                    if (!s) s = dfl_report_set_num(t, 7, tot > 0 ? low / tot : NAN, err);
                }
            }
    }
    if (s) {
        dfl_report_destroy(rep);
        return s;
    }
    *out = rep;
    return DFL_OK;
}

/* --------------------------------------------------------------------- figure */

static dfl_status plot(const qdump *q, size_t nd, const dfl_outliers_quant_params *p, dfl_error *err)
{
    const int PW = 800, PH = 560;
    int ncol = nd > 4 ? 4 : (int)nd;
    dfl_canvas *c = NULL;
    dfl_rgb white = {255, 255, 255};
    dfl_status s = dfl_canvas_create(PW * ncol, PH * 3, white, &c, err);
    if (!s) dfl_canvas_set_font(c, p->paper ? p->paper->font : NULL);
    for (int i = 0; i < ncol && !s; i++) {
        const qdump *d = &q[i];
        int64_t L = d->L > 0 ? d->L : 1, P = d->hd > 1 ? d->hd / 2 : 1;
        double *buf = calloc((size_t)(8 * (L + P) + 16), sizeof *buf);
        if (!buf) {
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            break;
        }
        double *x = buf, *y = buf + L + P; /* y: 4 series of L for the first two rows, then 2 of P */
        for (int64_t l = 0; l < L; l++)
            x[l] = (double)l;
        char title[3][200];
        dfl_plot_series ser[4];
        /* row 1: Pearson kurtosis per layer and site */
        int ns = 0;
        for (int site = 0; site < SITES && d->mom; site++) {
            double *ys = y + (size_t)ns * (size_t)L;
            for (int64_t l = 0; l < d->L; l++) {
                const double *m = d->mom + ((size_t)l * SITES + (size_t)site) * 6;
                ys[l] = m[0] > 0 ? tensor_of(m, NULL, 0, d->tokens).kurt_pearson : NAN;
            }
            ser[ns] = (dfl_plot_series){.label = SITE_NAME[site], .x = x, .y = ys, .n = (int)d->L};
            ns++;
        }
        snprintf(title[0], sizeof title[0], "%.120s: kurtosis (Pearson) of linear inputs", d->label);
        dfl_line_chart ch = dfl_line_chart_default();
        ch.x.label = "layer", ch.x.integer_ticks = 1, ch.font_scale = 2, ch.font = p->paper ? p->paper->font : NULL;
        if (ns) {
            ch.title = title[0], ch.y.label = "kurtosis (3 = Gaussian)", ch.y.scale = DFL_SCALE_LOG;
            ch.series = ser, ch.n_series = ns;
            s = dfl_plot_line_draw(c, i * PW, 0, PW, PH, &ch, err);
        }
        /* row 2: Sink_0 per layer and map */
        ns = 0;
        double *lx = buf + 5 * (L + P);
        for (int m = 0; m < 3 && !s; m++) {
            const sink_acc *a = &d->sink[m];
            if (!a->alpha || a->Ls > L) continue;
            double *ys = y + (size_t)ns * (size_t)L;
            for (int64_t l = 0; l < a->Ls; l++)
                ys[l] = a->n[l * SINK_KEYS] ? a->exceed[l * SINK_KEYS] / a->n[l * SINK_KEYS] : NAN,
                lx[l] = a->layers[l];
            ser[ns] = (dfl_plot_series){.label = MAP_NAME[m], .x = lx, .y = ys, .n = (int)a->Ls};
            ns++;
        }
        if (ns && !s) {
            snprintf(title[1], sizeof title[1], "%.120s: Sink_0 at eps = %g", d->label, p->sink_eps);
            dfl_line_chart c2 = ch;
            c2.title = title[1], c2.y.label = "share of (sample, head)", c2.y.scale = DFL_SCALE_LINEAR;
            c2.y.has_min = c2.y.has_max = 1, c2.y.min = 0, c2.y.max = 1;
            c2.series = ser, c2.n_series = ns;
            s = dfl_plot_line_draw(c, i * PW, PH, PW, PH, &c2, err);
        }
        /* row 3: mean |q|, |k| per RoPE pair (both dims of the pair, all layers and heads) */
        if (d->qa && !s) {
            double *px = buf + 6 * (L + P), *yq = y, *yk = y + P;
            for (int64_t i2 = 0; i2 < P; i2++)
                px[i2] = (double)i2, yq[i2] = yk[i2] = 0;
            for (int w = 0; w < 2; w++) {
                int64_t nh = w ? d->nk : d->nq;
                const double *v = w ? d->ka : d->qa;
                double *yy = w ? yk : yq;
                for (int64_t idx = 0; idx < d->L * nh * d->hd; idx++)
                    yy[rope_pair(idx % d->hd, d->hd, d->interleaved)] +=
                        v[idx] / d->qk_tokens / (double)(2 * d->L * nh);
            }
            ser[0] = (dfl_plot_series){.label = "mean |q|", .x = px, .y = yq, .n = (int)P};
            ser[1] = (dfl_plot_series){.label = "mean |k|", .x = px, .y = yk, .n = (int)P};
            snprintf(title[2], sizeof title[2], "%.120s: Q/K mass by RoPE pair", d->label);
            dfl_line_chart c3 = ch;
            c3.title = title[2], c3.subtitle = "pair 0 = highest frequency; mean over layers and heads";
            c3.x.label = "RoPE pair", c3.y.label = "mean |x|", c3.y.scale = DFL_SCALE_LINEAR;
            c3.series = ser, c3.n_series = 2;
            s = dfl_plot_line_draw(c, i * PW, 2 * PH, PW, PH, &c3, err);
        }
        free(buf);
    }
    if (!s) s = dfl_plot_write(c, p->plot_path, p->overwrite, p->paper, "difflens outliers", err);
    dfl_canvas_destroy(c);
    return s;
}

dfl_status dfl_outliers_quant_run(const dfl_outliers_quant_params *p, dfl_report **out, dfl_error *err)
{
    *out = NULL;
    if (!p || p->n_dumps < 1 || p->n_dumps > MAX_DUMPS)
        return dfl__fail(err, DFL_ERR_USAGE, "--quant-stats takes 1 to %d dumps", MAX_DUMPS);
    if (!(p->sink_eps >= 0 && p->sink_eps <= 1)) return dfl__fail(err, DFL_ERR_USAGE, "--sink-eps: in [0, 1]");
    qdump q[MAX_DUMPS];
    memset(q, 0, sizeof q);
    dfl_status s = DFL_OK;
    for (size_t i = 0; i < p->n_dumps && !s; i++)
        s = read_dump(&q[i], p->dumps[i], p->labels ? p->labels[i] : NULL, p->sink_eps, err);
    if (!s) s = build_report(q, p->n_dumps, p->sink_eps, out, err);
    if (!s && p->plot_path) s = plot(q, p->n_dumps, p, err);
    if (s) {
        dfl_report_destroy(*out);
        *out = NULL;
    }
    for (size_t i = 0; i < p->n_dumps; i++)
        qdump_free(&q[i]);
    return s;
}
