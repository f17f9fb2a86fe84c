/* outliers_report.c — the outliers tool's output (see outliers.h): Table 5, the
 * per-layer, per-head and quantization tables, and the plot (through render/plot.h),
 * from dumps loaded by outliers.c; dfl_outliers_run ties them together. */
#include "analysis/outliers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/plot.h"

static const char *const kind_titles[2] = {"attention logits", "hidden states"};

/* ---------------------------------------------------------------- report */

#define COL(t, name, num, prec)                                                                                        \
    do {                                                                                                               \
        if ((st = dfl_report_add_column(t, name, num, prec, err))) return st;                                          \
    } while (0)

static void num_or_na(dfl_report_table *t, size_t col, double v, const char *why)
{
    if (v == v)
        dfl_report_set_num(t, col, v, NULL);
    else
        dfl_report_set_missing(t, col, why, NULL);
}

static dfl_status table5(dfl_report *rep, const dfl_outliers_params *p, dfl_outlier_dump **d, const char **lab,
                         dfl_error *err)
{
    dfl_report_table *t;
    dfl_status st;
    if ((st = dfl_report_add_table(rep, "table5",
                                   "Largest activation magnitudes (Table 5): abs(x) pooled over all "
                                   "layers and samples",
                                   &t, err)))
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
                if (dfl_outliers_layer_nonfinite(d[i], k, -1))
                    dfl_report_set_num(t, 2 + (size_t)j, v, NULL);
                else
                    num_or_na(t, 2 + (size_t)j, v, "n/a");
            }
            dfl_report_set_num(t, 2 + (size_t)p->n_ranks, dfl_outliers_median(d[i], k, -1), NULL);
        }
    return dfl_report_status(rep, err);
}

static void position_text(const dfl_outlier_dump *d, int k, int64_t l, char *buf, size_t cap)
{
    const dfl_outlier_kind *o = &d->kind[k];
    const int32_t *ix = o->layer_top1[l].idx;
    if (o->layer_top1_sample[l] < 0)
        snprintf(buf, cap, "-");
    else if (k == DFL_OUT_LOGITS)
        snprintf(buf, cap, "s%d h%d m%d q%d k%d", o->layer_top1_sample[l], ix[0], ix[1] + 1, ix[2], ix[3]);
    else
        snprintf(buf, cap, "s%d t%d c%d", o->layer_top1_sample[l], ix[0], ix[1]);
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
                for (int j = 0; j < 3; j++)
                    num_or_na(t, 3 + (size_t)j, dfl_outliers_top(d[i], k, l, j + 1), "n/a");
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
    if ((st = dfl_report_add_table(rep, "per_head", "Attention logits per head, among the stored top-K lists only", &t,
                                   err)))
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
            for (int64_t h = 0; h < x->H; h++)
                tot += x->head_stored[l * x->H + h];
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
                    if (v == v && v >= cut)
                        dfl_report_set_num(t, 5 + (size_t)j, v, NULL);
                    else if (v == v) {
                        snprintf(buf, sizeof buf, "\xe2\x89\xa5%.4g", v); /* ≥: a lower bound */
                        dfl_report_set_missing(t, 5 + (size_t)j, buf, NULL);
                    } else if (cut > 0) {
                        snprintf(buf, sizeof buf, "<%.4g", cut);
                        dfl_report_set_missing(t, 5 + (size_t)j, buf, NULL);
                    } else
                        dfl_report_set_missing(t, 5 + (size_t)j, "n/a", NULL);
                }
                if (cut > 0)
                    dfl_report_set_num(t, 8, cut, NULL);
                else
                    dfl_report_set_missing(t, 8, "none", NULL);
            }
        }
    }
    dfl_report_add_note(
        rep, NULL,
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

/* LLM.int8() outlier features: channels over alpha in enough tokens of enough layers. */
static dfl_status table_int8(dfl_report *rep, const dfl_outliers_params *p, dfl_outlier_dump **d, const char **lab,
                             dfl_error *err)
{
    dfl_report_table *t;
    dfl_status st;
    char title[256];
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
        dfl_report_add_note(rep, NULL,
                            "int8_features (%s): %lld of %lld channels at alpha = %g (probe --alpha), "
                            "%lld tokens",
                            lab[i], (long long)nf, (long long)x->D, x->alpha, (long long)x->tokens);
        free(f);
    }

    return DFL_OK;
}

/* SmoothQuant view: per layer, the largest, median and top-3 channel max abs(x). */
static dfl_status table_smoothquant(dfl_report *rep, const dfl_outliers_params *p, dfl_outlier_dump **d,
                                    const char **lab, dfl_error *err)
{
    dfl_report_table *t;
    dfl_status st;
    if ((st = dfl_report_add_table(
             rep, "smoothquant", "SmoothQuant-style per-channel max abs(x) of the hidden states, per layer", &t, err)))
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
            for (int64_t c = 0; c < x->D; c++)
                v[c] = row[c];
            qsort(v, (size_t)x->D, sizeof *v, dbl_cmp);
            double med = x->D % 2 ? v[x->D / 2] : 0.5 * (v[x->D / 2 - 1] + v[x->D / 2]);
            /* the three largest channels, by index */
            int64_t best[3] = {-1, -1, -1};
            for (int64_t c = 0; c < x->D; c++)
                for (int j = 0; j < 3; j++)
                    if (best[j] < 0 || row[c] > row[best[j]]) {
                        for (int q = 2; q > j; q--)
                            best[q] = best[q - 1];
                        best[j] = c;
                        break;
                    }
            char buf[160] = "";
            for (int j = 0; j < 3 && best[j] >= 0; j++)
                snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%sc%lld=%.4g", j ? " " : "", (long long)best[j],
                         row[best[j]]);
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

    return DFL_OK;
}

/* SQNR of fake-quantized attention logits per layer and bit width, with its bounds. */
static dfl_status table_sqnr(dfl_report *rep, const dfl_outliers_params *p, dfl_outlier_dump **d, const char **lab,
                             dfl_error *err)
{
    dfl_report_table *t;
    dfl_status st;
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
                if (l < 0)
                    dfl_report_set_missing(t, 1, "all", NULL);
                else
                    dfl_report_set_int(t, 1, l, NULL);
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

    return DFL_OK;
}

/* Every channel of every layer: max abs(x) and the share of tokens >= alpha. */
static dfl_status table_channels(dfl_report *rep, const dfl_outliers_params *p, dfl_outlier_dump **d, const char **lab,
                                 dfl_error *err)
{
    dfl_report_table *t;
    dfl_status st;
    if ((st = dfl_report_add_table(rep, "channels", "Per-channel max abs(x) and share of tokens >= alpha", &t, err)))
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
                dfl_report_set_num(t, 4, x->tokens ? (double)x->channel_count[l * x->D + c] / (double)x->tokens : NAN,
                                   NULL);
            }
    }

    return DFL_OK;
}

/* The quantization views (--quant: int8 features, SmoothQuant, SQNR when bits are
 * given) and the raw channel table (--channels). */
static dfl_status quant_tables(dfl_report *rep, const dfl_outliers_params *p, dfl_outlier_dump **d, const char **lab,
                               dfl_error *err)
{
    dfl_status st = DFL_OK;
    if (p->quant && !(st = table_int8(rep, p, d, lab, err)) && !(st = table_smoothquant(rep, p, d, lab, err)) &&
        p->nbits > 0)
        st = table_sqnr(rep, p, d, lab, err);
    if (!st && p->channels) st = table_channels(rep, p, d, lab, err);
    return st ? st : dfl_report_status(rep, err);
}

/* ------------------------------------------------------------------ plot */

static dfl_status plot(const dfl_outliers_params *p, dfl_outlier_dump **d, const char **lab, dfl_error *err)
{
    int W = 1800, H = 760;
    dfl_canvas *c = NULL;
    dfl_status st = dfl_canvas_create(W, H, (dfl_rgb){255, 255, 255}, &c, err);
    if (st) return st;
    dfl_canvas_set_font(c, p->paper.font);
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
    for (int64_t l = 0; l < Lmax; l++)
        xs[l] = (double)l;
    for (int k = 0; k < 2 && !st; k++) {
        for (int i = 0; i < n; i++) {
            double *top = ys + (size_t)(2 * i) * (size_t)Lmax, *med = top + Lmax;
            for (int64_t l = 0; l < d[i]->L; l++) {
                top[l] = dfl_outliers_top(d[i], k, l, 1);
                med[l] = dfl_outliers_median(d[i], k, l);
            }
            snprintf(names[2 * i], sizeof names[0], "%s top-1", lab[i]);
            snprintf(names[2 * i + 1], sizeof names[0], "%s median", lab[i]);
            dfl_plot_series a = {names[2 * i],   xs, top, (int)d[i]->L, 1, dfl_plot_color(i), DFL_MARKER_CIRCLE,
                                 DFL_DASH_SOLID, 0};
            dfl_plot_series b = {names[2 * i + 1], xs, med, (int)d[i]->L, 1, dfl_plot_color(i), DFL_MARKER_SQUARE,
                                 DFL_DASH_DASHED,  0};
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
        ch.font = p->paper.font;
        st = dfl_plot_line_draw(c, k * W / 2, 0, W / 2, H, &ch, err);
    }
    if (!st) st = dfl_plot_write(c, p->plot_path, p->overwrite, &p->paper, "difflens outliers", err);
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
        for (int j = 0; j < p->n_dumps; j++)
            dup |= j != i && !strcmp(d[i]->model_type, d[j]->model_type);
        const char *base = strrchr(d[i]->path, '/');
        base = base ? base + 1 : d[i]->path;
        if (p->labels[i])
            snprintf(labels[i], sizeof labels[i], "%s", p->labels[i]);
        else if (dup)
            snprintf(labels[i], sizeof labels[i], "%s (%s)", d[i]->model_type, base);
        else
            snprintf(labels[i], sizeof labels[i], "%s", d[i]->model_type);
        lab[i] = labels[i];
    }
    if ((st = dfl_report_create("outliers: activation magnitudes", &rep, err))) goto done;
    char buf[512];
    for (int i = 0; i < p->n_dumps; i++) {
        snprintf(buf, sizeof buf, "%s: %s, %lld layers, %lld heads, hidden %lld, %lld samples, %lld tokens, K = %lld",
                 lab[i], d[i]->path, (long long)d[i]->L, (long long)d[i]->H, (long long)d[i]->D, (long long)d[i]->S,
                 (long long)d[i]->tokens, (long long)d[i]->K);
        char key[32];
        snprintf(key, sizeof key, "dump %d", i + 1);
        dfl_report_add_meta(rep, key, buf, NULL);
    }
    if ((st = table5(rep, p, d, lab, err))) goto done;
    for (int i = 0; i < p->n_dumps; i++)
        for (int j = 0; j < p->n_ranks; j++)
            if (p->ranks[j] > d[i]->K)
                dfl_report_add_note(rep, NULL,
                                    "table5: top%lld of %s is n/a: its dump keeps K = %lld values per "
                                    "layer and sample (probe --topk %lld or more)",
                                    (long long)p->ranks[j], lab[i], (long long)d[i]->K, (long long)p->ranks[j]);
    dfl_report_add_note(rep, NULL,
                        "table5: top-n is exact (merged top-K lists); the median of abs(x) is within 1%% "
                        "(log histogram, 64 bins per octave)");
    for (int i = 0; i < p->n_dumps; i++)
        for (int k = 0; k < 2; k++)
            if (dfl_outliers_layer_nonfinite(d[i], k, -1)) {
                int64_t first = 0;
                while (!dfl_outliers_layer_nonfinite(d[i], k, first))
                    first++;
                dfl_report_add_note(rep, NULL,
                                    "warning: %s: the %s hold NaN or Inf from layer %lld on (see the "
                                    "samples' nonfinite_layer attribute): their top-n and median are NaN",
                                    lab[i], kind_titles[k], (long long)first);
            }
    if (p->per_layer && (st = per_layer(rep, p, d, lab, err))) goto done;
    if (p->per_head && (st = per_head(rep, p, d, lab, err))) goto done;
    if ((p->quant || p->channels) && (st = quant_tables(rep, p, d, lab, err))) goto done;
    if ((st = dfl_report_status(rep, err))) goto done;
    if (p->plot_path && (st = plot(p, d, lab, err))) goto done;
done:
    for (int i = 0; i < p->n_dumps; i++)
        dfl_outliers_free(d[i]);
    if (st) {
        dfl_report_destroy(rep);
        return st;
    }
    *out = rep;
    return DFL_OK;
}
