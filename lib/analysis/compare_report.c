/* compare_report.c — the report part of bin/compare: tables (report.h), llama.cpp's text
 * of the KL-divergence block, and the per-layer figure (render/plot.h). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/compare.h"
#include "analysis/compare_internal.h"
#include "base/strbuf.h"

/* ------------------------------------------------------------- the block's rows */

/* One line of llama.cpp's block: its label (as llama.cpp prints it, without the padding),
 * the value and error fields (error -1: none) and the unit ("%" or ""). */
typedef struct block_row {
    const char *label;
    size_t value, error;
    const char *unit;
} block_row;

#define F(x) offsetof(dfl_compare_kld, x)
#define NONE ((size_t)-1)
static const block_row ROWS[] = {
    {"Mean PPL(Q)", F(ppl_q), F(ppl_q_err), ""},
    {"Mean PPL(base)", F(ppl_base), F(ppl_base_err), ""},
    {"Cor(ln(PPL(Q)), ln(PPL(base)))", F(cor), NONE, "%"},
    {"Mean ln(PPL(Q)/PPL(base))", F(ln_ratio), F(ln_ratio_err), ""},
    {"Mean PPL(Q)/PPL(base)", F(ratio), F(ratio_err), ""},
    {"Mean PPL(Q)-PPL(base)", F(dppl), F(dppl_err), ""},
    {"Mean KLD", F(kld_mean), F(kld_err), ""},
    {"Maximum KLD", F(kld_max), NONE, ""},
    {"99.9% KLD", F(kld_p999), NONE, ""},
    {"99.0% KLD", F(kld_p990), NONE, ""},
    {"95.0% KLD", F(kld_p950), NONE, ""},
    {"90.0% KLD", F(kld_p900), NONE, ""},
    {"Median KLD", F(kld_median), NONE, ""},
    {"10.0% KLD", F(kld_p100), NONE, ""},
    {"5.0% KLD", F(kld_p050), NONE, ""},
    {"1.0% KLD", F(kld_p010), NONE, ""},
    {"0.1% KLD", F(kld_p001), NONE, ""},
    {"Minimum KLD", F(kld_min), NONE, ""},
    {"Mean Δp", F(dp_mean), F(dp_err), "%"},
    {"Maximum Δp", F(dp_max), NONE, "%"},
    {"99.9% Δp", F(dp_p999), NONE, "%"},
    {"99.0% Δp", F(dp_p990), NONE, "%"},
    {"95.0% Δp", F(dp_p950), NONE, "%"},
    {"90.0% Δp", F(dp_p900), NONE, "%"},
    {"75.0% Δp", F(dp_p750), NONE, "%"},
    {"Median Δp", F(dp_median), NONE, "%"},
    {"25.0% Δp", F(dp_p250), NONE, "%"},
    {"10.0% Δp", F(dp_p100), NONE, "%"},
    {"5.0% Δp", F(dp_p050), NONE, "%"},
    {"1.0% Δp", F(dp_p010), NONE, "%"},
    {"0.1% Δp", F(dp_p001), NONE, "%"},
    {"Minimum Δp", F(dp_min), NONE, "%"},
    {"RMS Δp", F(rms_dp), F(rms_dp_err), "%"},
    {"Same top p", F(same_top), F(same_top_err), "%"},
};
#undef F
#define N_ROWS (sizeof ROWS / sizeof ROWS[0])

static double field(const dfl_compare_kld *k, size_t off)
{
    double v;
    memcpy(&v, (const char *)k + off, sizeof v);
    return v;
}

/* --------------------------------------------------------------------- tables */

static dfl_status kld_table(const dfl_compare_result *r, dfl_report *rep, dfl_error *err)
{
    int any = 0;
    for (size_t i = 0; i < r->n_pairs; i++)
        any |= r->pairs[i].has_kld;
    if (!any) return DFL_OK;
    dfl_report_table *t = NULL;
    dfl_status s = dfl_report_add_table(rep, "kld", "llama.cpp --kl-divergence statistics", &t, err);
    if (!s) s = dfl_report_add_column(t, "statistic", DFL_NUM_GENERAL, 6, err);
    if (!s) s = dfl_report_add_column(t, "unit", DFL_NUM_GENERAL, 6, err);
    for (size_t i = 0; i < r->n_pairs && !s; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s", r->pairs[i].label);
        s = dfl_report_add_column(t, name, DFL_NUM_FIXED, 6, err);
        snprintf(name, sizeof name, "%s ±", r->pairs[i].label);
        if (!s) s = dfl_report_add_column(t, name, DFL_NUM_FIXED, 6, err);
    }
    for (size_t k = 0; k < N_ROWS && !s; k++) {
        s = dfl_report_add_row(t, err);
        if (!s) s = dfl_report_set_text(t, 0, ROWS[k].label, err);
        if (!s) s = dfl_report_set_text(t, 1, ROWS[k].unit, err);
        for (size_t i = 0; i < r->n_pairs && !s; i++) {
            const dfl__compare_pair *p = &r->pairs[i];
            if (!p->has_kld) continue;
            s = dfl_report_set_num(t, 2 + 2 * i, field(&p->kld, ROWS[k].value), err);
            if (!s && ROWS[k].error != NONE) s = dfl_report_set_num(t, 3 + 2 * i, field(&p->kld, ROWS[k].error), err);
            if (!s && ROWS[k].error == NONE) s = dfl_report_set_missing(t, 3 + 2 * i, "", err);
        }
    }
    return s;
}

static dfl_status hidden_table(const dfl_compare_result *r, dfl_report *rep, dfl_error *err)
{
    int any = 0;
    for (size_t i = 0; i < r->n_pairs; i++)
        any |= r->pairs[i].hidden_layers > 0;
    if (!any) return DFL_OK;
    dfl_report_table *t = NULL;
    dfl_status s = dfl_report_add_table(rep, "hidden", "Hidden states per layer (mean over tokens)", &t, err);
    static const char *const cols[] = {"pair", "layer", "cosine", "1 - cosine", "relative L2", "pearson", "diverged"};
    for (int c = 0; c < 7 && !s; c++)
        s = dfl_report_add_column(t, cols[c], c == 3 || c == 4 ? DFL_NUM_AUTO : DFL_NUM_FIXED, 6, err);
    for (size_t i = 0; i < r->n_pairs && !s; i++) {
        const dfl__compare_pair *p = &r->pairs[i];
        for (int64_t l = 0; l < p->hidden_layers && !s; l++) {
            const dfl__compare_layer *a = &p->hidden[l];
            double n = (double)a->n;
            s = dfl_report_add_row(t, err);
            if (!s) s = dfl_report_set_text(t, 0, p->label, err);
            if (!s) s = dfl_report_set_int(t, 1, l, err);
            if (!s) s = dfl_report_set_num(t, 2, a->cos / n, err);
            if (!s) s = dfl_report_set_num(t, 3, 1.0 - a->cos / n, err);
            if (!s) s = dfl_report_set_num(t, 4, a->rel / n, err);
            if (!s) s = dfl_report_set_num(t, 5, a->pearson / n, err);
            if (!s) s = dfl_report_set_text(t, 6, 1.0 - a->cos / n > r->threshold ? "yes" : "no", err);
        }
    }
    return s;
}

static dfl_status attn_tables(const dfl_compare_result *r, dfl_report *rep, dfl_error *err)
{
    int any = 0;
    for (size_t i = 0; i < r->n_pairs; i++)
        for (int m = 0; m < 3; m++)
            any |= r->pairs[i].maps[m].js != NULL;
    if (!any) return DFL_OK;
    dfl_report_table *t = NULL, *tl = NULL;
    dfl_status s =
        dfl_report_add_table(rep, "attention_layers",
                             "Attention rows per layer: Jensen-Shannon divergence (nats), mean over heads", &tl, err);
    static const char *const cols[] = {"pair", "map", "layer", "head", "js"};
    for (int c = 0; c < 5 && !s; c++)
        if (c != 3) s = dfl_report_add_column(tl, cols[c], DFL_NUM_AUTO, 5, err);
    if (!s)
        s = dfl_report_add_table(rep, "attention",
                                 "Attention rows per layer and head: Jensen-Shannon divergence (nats)", &t, err);
    for (int c = 0; c < 5 && !s; c++)
        s = dfl_report_add_column(t, cols[c], DFL_NUM_AUTO, 5, err);
    for (size_t i = 0; i < r->n_pairs && !s; i++)
        for (int m = 0; m < 3 && !s; m++) {
            const dfl__compare_maps *mp = &r->pairs[i].maps[m];
            for (int64_t l = 0; mp->js && l < mp->Ls && !s; l++) {
                double sum = 0;
                size_t cnt = 0;
                for (int64_t h = 0; h < mp->Hs && !s; h++) {
                    size_t n = mp->n[l * mp->Hs + h];
                    double js = n ? mp->js[l * mp->Hs + h] / (double)n : NAN;
                    if (n) sum += js, cnt++;
                    s = dfl_report_add_row(t, err);
                    if (!s) s = dfl_report_set_text(t, 0, r->pairs[i].label, err);
                    if (!s) s = dfl_report_set_text(t, 1, dfl__compare_map_name(m), err);
                    if (!s) s = dfl_report_set_int(t, 2, mp->layers[l], err);
                    if (!s) s = dfl_report_set_int(t, 3, h, err);
                    if (!s) s = dfl_report_set_num(t, 4, js, err);
                }
                if (!s) s = dfl_report_add_row(tl, err);
                if (!s) s = dfl_report_set_text(tl, 0, r->pairs[i].label, err);
                if (!s) s = dfl_report_set_text(tl, 1, dfl__compare_map_name(m), err);
                if (!s) s = dfl_report_set_int(tl, 2, mp->layers[l], err);
                if (!s) s = dfl_report_set_num(tl, 3, cnt ? sum / (double)cnt : NAN, err);
            }
        }
    return s;
}

dfl_status dfl_compare_report(const dfl_compare_result *r, dfl_report **out, dfl_error *err)
{
    *out = NULL;
    dfl_report *rep = NULL;
    dfl_status s = dfl_report_create("compare: base against other", &rep, err);
    for (size_t i = 0; i < r->n_pairs && !s; i++) {
        const dfl__compare_pair *p = &r->pairs[i];
        char key[160], val[1200];
        snprintf(key, sizeof key, "pair %s", p->label);
        snprintf(val, sizeof val, "base %s, other %s, %zu samples, %zu scored tokens (positions %lld..T-2%s)", p->base,
                 p->other, p->samples, p->sums.count, (long long)r->from,
                 r->target_only ? " predicting a target token" : "");
        s = dfl_report_add_meta(rep, key, val, err);
        if (!s && !p->has_kld)
            s = dfl_report_add_note(rep, err, "%s: no logits in the dumps (probe --save-logits): no KLD block",
                                    p->label);
        if (!s && p->has_kld && p->sums.count < 100)
            s = dfl_report_add_note(rep, err,
                                    "%s: only %zu scored tokens (llama.cpp prints its block from 100 on; errors need "
                                    "more than 10)",
                                    p->label, p->sums.count);
        if (!s && p->hidden_layers > 0) {
            if (p->first_diverged >= 0)
                s = dfl_report_add_note(rep, err, "%s: first layer with 1 - cosine > %g: %lld", p->label, r->threshold,
                                        (long long)p->first_diverged);
            else
                s = dfl_report_add_note(rep, err, "%s: no layer with 1 - cosine > %g", p->label, r->threshold);
        }
    }
    if (!s)
        s = dfl_report_add_note(rep, err,
                                "KLD = sum p_base ln(p_base/p_other) per token (nats); JS in nats of "
                                "the softmax maps, of |diff| / sum |diff| for the diff map");
    if (!s) s = kld_table(r, rep, err);
    if (!s) s = hidden_table(r, rep, err);
    if (!s) s = attn_tables(r, rep, err);
    if (s) {
        dfl_report_destroy(rep);
        return s;
    }
    *out = rep;
    return DFL_OK;
}

/* --------------------------------------------------------- llama.cpp's text */

dfl_status dfl_compare_llama_text(const dfl_compare_result *r, char **out, dfl_error *err)
{
    dfl_strbuf b = {0};
    for (size_t i = 0; i < r->n_pairs; i++) {
        const dfl__compare_pair *p = &r->pairs[i];
        if (r->n_pairs > 1)
            dfl_strbuf_printf(&b, "%s# %s: base %s, other %s\n", i ? "\n" : "", p->label, p->base, p->other);
        if (!p->has_kld) {
            dfl_strbuf_printf(&b, "no logits in the dumps (probe --save-logits)\n");
            continue;
        }
        const dfl_compare_kld *k = &p->kld;
        dfl_strbuf_puts(&b, "====== Perplexity statistics ======\n");
        dfl_strbuf_printf(&b, "Mean PPL(Q)                   : %10.6lf ± %10.6lf\n", k->ppl_q, k->ppl_q_err);
        dfl_strbuf_printf(&b, "Mean PPL(base)                : %10.6lf ± %10.6lf\n", k->ppl_base, k->ppl_base_err);
        dfl_strbuf_printf(&b, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", k->cor);
        dfl_strbuf_printf(&b, "Mean ln(PPL(Q)/PPL(base))     : %10.6lf ± %10.6lf\n", k->ln_ratio, k->ln_ratio_err);
        dfl_strbuf_printf(&b, "Mean PPL(Q)/PPL(base)         : %10.6lf ± %10.6lf\n", k->ratio, k->ratio_err);
        dfl_strbuf_printf(&b, "Mean PPL(Q)-PPL(base)         : %10.6lf ± %10.6lf\n", k->dppl, k->dppl_err);
        dfl_strbuf_puts(&b, "\n====== KL divergence statistics ======\n");
        dfl_strbuf_printf(&b, "Mean    KLD: %10.6lf ± %10.6lf\n", k->kld_mean, k->kld_err);
        dfl_strbuf_printf(&b, "Maximum KLD: %10.6f\n", k->kld_max);
        dfl_strbuf_printf(&b, "99.9%%   KLD: %10.6f\n", k->kld_p999);
        dfl_strbuf_printf(&b, "99.0%%   KLD: %10.6f\n", k->kld_p990);
        dfl_strbuf_printf(&b, "95.0%%   KLD: %10.6f\n", k->kld_p950);
        dfl_strbuf_printf(&b, "90.0%%   KLD: %10.6f\n", k->kld_p900);
        dfl_strbuf_printf(&b, "Median  KLD: %10.6f\n", k->kld_median);
        dfl_strbuf_printf(&b, "10.0%%   KLD: %10.6f\n", k->kld_p100);
        dfl_strbuf_printf(&b, " 5.0%%   KLD: %10.6f\n", k->kld_p050);
        dfl_strbuf_printf(&b, " 1.0%%   KLD: %10.6f\n", k->kld_p010);
        dfl_strbuf_printf(&b, " 0.1%%   KLD: %10.6f\n", k->kld_p001);
        dfl_strbuf_printf(&b, "Minimum KLD: %10.6f\n", k->kld_min);
        dfl_strbuf_puts(&b, "\n====== Token probability statistics ======\n");
        dfl_strbuf_printf(&b, "Mean    Δp: %6.3lf ± %5.3lf %%\n", k->dp_mean, k->dp_err);
        dfl_strbuf_printf(&b, "Maximum Δp: %6.3lf%%\n", k->dp_max);
        static const char *const pl[10] = {"99.9%", "99.0%", "95.0%", "90.0%", "75.0%",
                                           "25.0%", "10.0%", " 5.0%", " 1.0%", " 0.1%"};
        const double pv[10] = {k->dp_p999, k->dp_p990, k->dp_p950, k->dp_p900, k->dp_p750,
                               k->dp_p250, k->dp_p100, k->dp_p050, k->dp_p010, k->dp_p001};
        for (int j = 0; j < 10; j++) {
            if (j == 5) dfl_strbuf_printf(&b, "Median  Δp: %6.3lf%%\n", k->dp_median);
            dfl_strbuf_printf(&b, "%s   Δp: %6.3lf%%\n", pl[j], pv[j]);
        }
        dfl_strbuf_printf(&b, "Minimum Δp: %6.3lf%%\n", k->dp_min);
        dfl_strbuf_printf(&b, "RMS Δp    : %6.3lf ± %5.3lf %%\n", k->rms_dp, k->rms_dp_err);
        dfl_strbuf_printf(&b, "Same top p: %6.3lf ± %5.3lf %%\n", k->same_top, k->same_top_err);
    }
    if (b.oom || !b.p) {
        dfl_strbuf_free(&b);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    *out = b.p;
    return DFL_OK;
}

/* ------------------------------------------------------------------- figure */

dfl_status dfl_compare_plot(const dfl_compare_result *r, const char *path, int overwrite, const dfl_plot_paper *pp,
                            dfl_error *err)
{
    enum { MAXS = 4 };
    int panels = 0;
    for (size_t i = 0; i < r->n_pairs; i++) {
        const dfl__compare_pair *p = &r->pairs[i];
        int any = p->hidden_layers > 0;
        for (int m = 0; m < 3; m++)
            any |= p->maps[m].js != NULL;
        panels += any;
    }
    if (!panels)
        return dfl__fail(err, DFL_ERR_FORMAT, "--plot: no per-layer data (probe with --save-hidden or --maps)");
    const int W = 900 * (int)r->n_pairs, H = 700;
    dfl_canvas *c = NULL;
    dfl_rgb white = {255, 255, 255};
    dfl_status s = dfl_canvas_create(W, H, white, &c, err);
    if (!s) dfl_canvas_set_font(c, pp ? pp->font : NULL);
    /* one y range for every panel, whole decades, so that the pairs read side by side */
    double lo = INFINITY, hi = 0;
    for (size_t i = 0; i < r->n_pairs; i++) {
        const dfl__compare_pair *p = &r->pairs[i];
        for (int64_t l = 0; l < p->hidden_layers; l++) {
            double v = 1.0 - p->hidden[l].cos / (double)p->hidden[l].n;
            if (v > 0) lo = fmin(lo, v), hi = fmax(hi, v);
        }
        for (int m = 0; m < 3; m++)
            for (int64_t j = 0; p->maps[m].js && j < p->maps[m].Ls * p->maps[m].Hs; j++) {
                double v = p->maps[m].n[j] ? p->maps[m].js[j] / (double)p->maps[m].n[j] : 0;
                if (v > 0) lo = fmin(lo, v), hi = fmax(hi, v);
            }
    }
    int fixed = hi > 0 && isfinite(lo);
    double ymin = fixed ? pow(10, floor(log10(lo))) : 0, ymax = fixed ? pow(10, ceil(log10(hi))) : 0;
    if (fixed && ymax <= ymin) ymax = ymin * 10;
    double *buf = NULL;
    for (size_t i = 0; i < r->n_pairs && !s; i++) {
        const dfl__compare_pair *p = &r->pairs[i];
        int64_t nmax = p->hidden_layers;
        for (int m = 0; m < 3; m++)
            if (p->maps[m].Ls > nmax) nmax = p->maps[m].Ls;
        free(buf);
        buf = dfl__alloc_array((size_t)(2 * MAXS) * (size_t)(nmax + 1), sizeof *buf);
        if (!buf) {
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            break;
        }
        dfl_plot_series ser[MAXS];
        static const char *const lab[3] = {"attention JS, map1", "attention JS, map2", "attention JS, |diff|"};
        int ns = 0;
        if (p->hidden_layers > 0) {
            double *x = buf, *y = buf + nmax;
            for (int64_t l = 0; l < p->hidden_layers; l++)
                x[l] = (double)l, y[l] = 1.0 - p->hidden[l].cos / (double)p->hidden[l].n;
            ser[ns] = (dfl_plot_series){.label = "hidden 1 - cosine", .x = x, .y = y, .n = (int)p->hidden_layers};
            ns++;
        }
        for (int m = 0; m < 3; m++) {
            const dfl__compare_maps *mp = &p->maps[m];
            if (!mp->js) continue;
            double *x = buf + (size_t)(2 * ns) * (size_t)nmax, *y = x + nmax;
            for (int64_t l = 0; l < mp->Ls; l++) {
                double sum = 0;
                size_t cnt = 0;
                for (int64_t h = 0; h < mp->Hs; h++)
                    if (mp->n[l * mp->Hs + h]) sum += mp->js[l * mp->Hs + h] / (double)mp->n[l * mp->Hs + h], cnt++;
                x[l] = mp->layers[l], y[l] = cnt ? sum / (double)cnt : NAN;
            }
            ser[ns] = (dfl_plot_series){.label = lab[m], .x = x, .y = y, .n = (int)mp->Ls};
            ns++;
        }
        if (!ns) continue;
        char title[200];
        snprintf(title, sizeof title, "%s against its base", p->label);
        dfl_line_chart ch = dfl_line_chart_default();
        ch.title = title;
        ch.subtitle = "per-layer divergence (log scale)";
        ch.x.label = "layer";
        ch.x.integer_ticks = 1;
        ch.y.label = "divergence (JS in nats; 1 - cosine)";
        ch.y.scale = DFL_SCALE_LOG;
        if (fixed) ch.y.has_min = ch.y.has_max = 1, ch.y.min = ymin, ch.y.max = ymax;
        ch.series = ser;
        ch.n_series = ns;
        ch.font_scale = 2;
        ch.font = pp ? pp->font : NULL;
        s = dfl_plot_line_draw(c, (int)i * 900, 0, 900, H, &ch, err);
    }
    free(buf);
    if (!s) s = dfl_plot_write(c, path, overwrite, pp, "difflens compare", err);
    dfl_canvas_destroy(c);
    return s;
}
