/* noise_report.c — the noise tool's output (see noise.h): the report tables and the
 * two charts (through render/plot.h) of a dfl_noise_result computed by noise.c. */
#include "analysis/noise.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_schema.h"
#include "render/plot.h"

/* ------------------------------------------------------------------ report */

static const char *const share_rows[DFL_SHARE_SEGMENTS] = {"bos",   "context_before", "answer", "context_after",
                                                           "query", "distractor",     "target"};

/* Column name: "answer" for one dump, "LABEL answer" for several. */
static const char *colname(const dfl_noise_result *r, size_t i, const char *what, char *buf, size_t cap)
{
    if (r->n_dumps == 1)
        snprintf(buf, cap, "%s", what);
    else
        snprintf(buf, cap, "%s %s", r->dumps[i].label, what);
    return buf;
}

static void set_num_or_missing(dfl_report_table *t, size_t col, double v, dfl_error *err)
{
    if (isnan(v))
        dfl_report_set_missing(t, col, NULL, err);
    else
        dfl_report_set_num(t, col, v, err);
}

/* answer/noise above this is shown as "> 1000": with noise near 0 the quotient says
 * nothing but "no noise" and its digits are rounding (9.751e+07 from a noise of 1e-9). */
#define RATIO_SHOWN_MAX 1000.0

/* The text an answer/noise cell shows instead of its number, or NULL to show it:
 * "\u2014" when both shares are 0 or missing, "> 1000" when the quotient exceeds it. */
static const char *ratio_shown(double answer, double noise)
{
    if (isnan(answer) || isnan(noise) || (answer == 0 && noise == 0)) return "\u2014";
    if (!(answer <= RATIO_SHOWN_MAX * noise)) return "> 1000";
    return NULL;
}

/* An answer/noise cell; *capped is set when the cell is not a plain number. */
static void set_ratio(dfl_report_table *t, size_t col, const dfl_noise_cell *c, int *capped, dfl_error *err)
{
    const char *shown = ratio_shown(c->share[DFL_SHARE_ANSWER], c->noise);
    if (shown) {
        dfl_report_set_missing(t, col, shown, err);
        *capped = 1;
    } else {
        dfl_report_set_num_fmt(t, col, c->ratio, DFL_NUM_GENERAL, 4, err);
    }
}

static void ratio_note(dfl_report *rep, int capped, dfl_error *err)
{
    if (capped)
        dfl_report_add_note(
            rep, err,
            "answer/noise: \"> 1000\" where the noise share is below 1/1000 of the answer share (the "
            "quotient of a near-zero noise is not a measurement), \"\u2014\" where both are 0; csv/json "
            "leave these cells empty (null): answer and noise are in their own columns");
}

/* Meta lines and notes shared by every grouping. */
static void report_meta(dfl_report *rep, const dfl_noise_result *r, dfl_error *err)
{
    char buf[512];
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_dump *d = &r->dumps[i];
        snprintf(buf, sizeof buf, "%s (%s, map %s, %zu samples, %lld layers x %lld heads)", d->path, d->model_type,
                 d->map, d->n_samples, (long long)d->layers, (long long)d->heads);
        dfl_report_add_meta(rep, d->label, buf, err);
    }
    dfl_report_add_meta(rep, "normalisation",
                        r->norm == DFL_NOISE_NORM_ABS
                            ? "abs (" DFL_DS_NOISE_SHARES_ABS ": sum of |A| over the segment / sum of |A| over the "
                              "row)"
                            : "total (" DFL_DS_NOISE_SHARES ": sum of A over the segment / the row's total; 1, or 1 - "
                              "lambda for diff)",
                        err);
    snprintf(buf, sizeof buf, "layers %s, heads %s, analysis rows, samples (each layer and head weighs the same)",
             r->layers_text, r->heads_text);
    dfl_report_add_meta(rep, "averaged over", buf, err);
    dfl_report_add_meta(rep, "noise",
                        "context_before + context_after (the paper's definition); answer/noise = mean answer / "
                        "mean noise",
                        err);
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_dump *d = &r->dumps[i];
        if (d->n_nonfinite)
            dfl_report_add_note(rep, err,
                                "warning: %s: %zu of %zu entries are NaN or Inf (non-finite values in the forward "
                                "pass); the averages over them are NaN under every --norm",
                                d->label, d->n_nonfinite, d->n_entries);
        if (d->n_low && r->norm == DFL_NOISE_NORM_TOTAL)
            dfl_report_add_note(rep, err,
                                "warning: %s: %zu of %zu entries have a row total below %g in magnitude (e.g. %s); "
                                "their shares are unstable, see --norm abs",
                                d->label, d->n_low, d->n_entries, r->warn_total, d->low_example);
        else if (d->n_low)
            dfl_report_add_note(rep, err,
                                "%s: %zu of %zu entries have a row total below %g in magnitude; shares_abs is "
                                "unaffected",
                                d->label, d->n_low, d->n_entries, r->warn_total);
    }
}

static dfl_status report_shares(dfl_report *rep, const dfl_noise_result *r, dfl_error *err)
{
    dfl_report_table *t;
    dfl_status s = dfl_report_add_table(rep, "shares", "Attention shares (Figure 1)", &t, err);
    if (s) return s;
    dfl_report_add_column(t, "segment", DFL_NUM_GENERAL, 4, err);
    for (size_t i = 0; i < r->n_dumps; i++)
        dfl_report_add_column(t, r->dumps[i].label, DFL_NUM_FIXED, 4, err);
    int present[DFL_SHARE_SEGMENTS] = {0};
    for (size_t i = 0; i < r->n_dumps; i++)
        for (int k = 0; k < DFL_SHARE_SEGMENTS; k++)
            present[k] |= r->dumps[i].segment_present[k];
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++) {
        if (!present[k]) continue;
        dfl_report_add_row(t, err);
        dfl_report_set_text(t, 0, share_rows[k], err);
        for (size_t i = 0; i < r->n_dumps; i++)
            dfl_report_set_num(t, 1 + i, r->dumps[i].all.share[k], err);
    }
    static const char *const extra[] = {"noise", "answer/noise", "accuracy", "target_nll", "samples"};
    int capped = 0;
    for (int e = 0; e < 5; e++) {
        dfl_report_add_row(t, err);
        dfl_report_set_text(t, 0, extra[e], err);
        for (size_t i = 0; i < r->n_dumps; i++) {
            const dfl_noise_cell *c = &r->dumps[i].all;
            switch (e) {
            case 0: dfl_report_set_num(t, 1 + i, c->noise, err); break;
            case 1: set_ratio(t, 1 + i, c, &capped, err); break;
            case 2:
                if (c->n_scored)
                    dfl_report_set_num_fmt(t, 1 + i, c->accuracy, DFL_NUM_FIXED, 3, err);
                else
                    dfl_report_set_missing(t, 1 + i, "n/a", err);
                break;
            case 3:
                if (c->n_scored && !isnan(c->target_nll))
                    dfl_report_set_num_fmt(t, 1 + i, c->target_nll, DFL_NUM_GENERAL, 4, err);
                else
                    dfl_report_set_missing(t, 1 + i, "n/a", err);
                break;
            default: dfl_report_set_int(t, 1 + i, (int64_t)c->n_samples, err); break;
            }
        }
    }
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_cell *c = &r->dumps[i].all;
        if (c->n_scored && c->n_scored < c->n_samples)
            dfl_report_add_note(rep, err, "%s: accuracy over the %zu of %zu samples that have a target",
                                r->dumps[i].label, c->n_scored, c->n_samples);
    }
    ratio_note(rep, capped, err);
    return dfl_report_status(rep, err);
}

/* The row keys of a --by table: the union of every dump's depths (ascending, equal within
 * DFL_NOISE_DEPTH_EPS), or 0 .. the largest L / H - 1. *keys is the caller's to free. */
static dfl_status group_keys(const dfl_noise_result *r, dfl_noise_by by, double **keys, size_t *nkeys, dfl_error *err)
{
    size_t cap = 0, n = 0;
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_dump *d = &r->dumps[i];
        size_t m = by == DFL_NOISE_BY_DEPTH ? d->n_depths : (size_t)(by == DFL_NOISE_BY_LAYER ? d->layers : d->heads);
        cap = by == DFL_NOISE_BY_DEPTH ? cap + m : (m > cap ? m : cap);
    }
    if (by == DFL_NOISE_BY_DEPTH && cap == 0)
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "--by depth: no sample in %s has a depth attribute (prompts need \"depth\", as `noise "
                         "prompts` writes them)",
                         r->n_dumps == 1 ? r->dumps[0].path : "the dumps");
    double *k = dfl__alloc_array(cap, sizeof *k);
    if (!k) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (by == DFL_NOISE_BY_DEPTH) {
        for (size_t i = 0; i < r->n_dumps; i++)
            for (size_t g = 0; g < r->dumps[i].n_depths; g++)
                k[n++] = r->dumps[i].depth[g];
        qsort(k, n, sizeof *k, dfl__noise_cmp_double);
        size_t u = 0;
        for (size_t i = 0; i < n; i++)
            if (u == 0 || k[i] - k[u - 1] > DFL_NOISE_DEPTH_EPS) k[u++] = k[i];
        n = u;
    } else {
        for (size_t i = 0; i < cap; i++)
            k[n++] = (double)i;
    }
    *keys = k;
    *nkeys = n;
    return DFL_OK;
}

/* A row per group key (depth value, layer or head). */
static dfl_status report_groups(dfl_report *rep, const dfl_noise_result *r, dfl_noise_by by, dfl_error *err)
{
    static const char *const names[] = {"", "by_depth", "by_layer", "by_head"};
    static const char *const titles[] = {"", "Answer and noise by answer depth (Table 3)", "Answer and noise by layer",
                                         "Answer and noise by head"};
    static const char *const keyname[] = {"", "depth", "layer", "head"};
    dfl_report_table *t;
    dfl_status s = dfl_report_add_table(rep, names[by], titles[by], &t, err);
    if (s) return s;
    int with_acc = by == DFL_NOISE_BY_DEPTH;
    int per = with_acc ? 5 : 4; /* n, answer, noise, answer/noise [, accuracy] */
    int capped = 0;
    char cb[160];
    dfl_report_add_column(t, keyname[by], DFL_NUM_GENERAL, 4, err);
    for (size_t i = 0; i < r->n_dumps; i++) {
        dfl_report_add_column(t, colname(r, i, "n", cb, sizeof cb), DFL_NUM_GENERAL, 4, err);
        dfl_report_add_column(t, colname(r, i, "answer", cb, sizeof cb), DFL_NUM_FIXED, 4, err);
        dfl_report_add_column(t, colname(r, i, "noise", cb, sizeof cb), DFL_NUM_FIXED, 4, err);
        dfl_report_add_column(t, colname(r, i, "answer/noise", cb, sizeof cb), DFL_NUM_GENERAL, 4, err);
        if (with_acc) dfl_report_add_column(t, colname(r, i, "accuracy", cb, sizeof cb), DFL_NUM_FIXED, 3, err);
    }

    size_t nkeys = 0;
    double *keys = NULL;
    dfl_status st = group_keys(r, by, &keys, &nkeys, err);
    if (st) return st;
    for (size_t k = 0; k < nkeys; k++) {
        /* a layer or head that no dump averaged (not selected) gets no row */
        const dfl_noise_cell *cells[DFL_NOISE_MAX_DUMPS];
        int any = 0;
        for (size_t i = 0; i < r->n_dumps; i++) {
            const dfl_noise_dump *d = &r->dumps[i];
            cells[i] = NULL;
            if (by == DFL_NOISE_BY_DEPTH) {
                for (size_t g = 0; g < d->n_depths; g++)
                    if (fabs(d->depth[g] - keys[k]) <= DFL_NOISE_DEPTH_EPS) cells[i] = &d->by_depth[g];
            } else {
                int64_t n = by == DFL_NOISE_BY_LAYER ? d->layers : d->heads;
                const dfl_noise_cell *c = by == DFL_NOISE_BY_LAYER ? d->by_layer : d->by_head;
                if ((int64_t)keys[k] < n && c[(int64_t)keys[k]].n_samples) cells[i] = &c[(int64_t)keys[k]];
            }
            any |= cells[i] != NULL;
        }
        if (!any) continue;
        dfl_report_add_row(t, err);
        if (by == DFL_NOISE_BY_DEPTH)
            dfl_report_set_num(t, 0, keys[k], err);
        else
            dfl_report_set_int(t, 0, (int64_t)keys[k], err);
        for (size_t i = 0; i < r->n_dumps; i++) {
            size_t c0 = 1 + i * (size_t)per;
            const dfl_noise_cell *c = cells[i];
            if (!c) {
                for (int j = 0; j < per; j++)
                    dfl_report_set_missing(t, c0 + (size_t)j, "-", err);
                continue;
            }
            dfl_report_set_int(t, c0, (int64_t)c->n_samples, err);
            set_num_or_missing(t, c0 + 1, c->share[DFL_SHARE_ANSWER], err);
            set_num_or_missing(t, c0 + 2, c->noise, err);
            set_ratio(t, c0 + 3, c, &capped, err);
            if (with_acc) {
                if (c->n_scored)
                    dfl_report_set_num(t, c0 + 4, c->accuracy, err);
                else
                    dfl_report_set_missing(t, c0 + 4, "n/a", err);
            }
        }
    }
    free(keys);
    ratio_note(rep, capped, err);
    if (by == DFL_NOISE_BY_LAYER || by == DFL_NOISE_BY_HEAD)
        dfl_report_add_note(rep, err, "n = samples; each row averages the selected %s and every sample",
                            by == DFL_NOISE_BY_LAYER ? "heads" : "layers");
    return dfl_report_status(rep, err);
}

/* ------------------------------------------------------- --stat tables */

/* The maps of a --stat value: entropy of map1 (and map2), the negative mass of diff. */
static const char *stat_map(dfl_noise_stat stat, int e)
{
    return stat == DFL_NOISE_STAT_NEGATIVE_MASS ? "diff" : e == 0 ? "map1" : "map2";
}

/* Meta lines of a --stat report (the shares' normalisation and noise do not apply). */
static void stat_meta(dfl_report *rep, const dfl_noise_result *r, dfl_error *err)
{
    char buf[512];
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_dump *d = &r->dumps[i];
        snprintf(buf, sizeof buf, "%s (%s, %zu samples, %lld layers x %lld heads)", d->path, d->model_type,
                 d->n_samples, (long long)d->layers, (long long)d->heads);
        dfl_report_add_meta(rep, d->label, buf, err);
    }
    dfl_report_add_meta(rep, "statistic",
                        r->stat == DFL_NOISE_STAT_ENTROPY
                            ? "entropy (" DFL_DS_NOISE_ENTROPY ": mean row entropy in nats of each softmax map, map1 "
                              "and for Diff dumps map2)"
                            : "negative_mass (" DFL_DS_NOISE_NEGATIVE_MASS ": the summed negative entries of a row "
                              "of the diff map, map1 - lambda map2; Diff dumps only, <= 0)",
                        err);
    snprintf(buf, sizeof buf, "layers %s, heads %s, analysis rows, samples (each layer and head weighs the same)",
             r->layers_text, r->heads_text);
    dfl_report_add_meta(rep, "averaged over", buf, err);
    for (size_t i = 0; i < r->n_dumps; i++)
        if (!r->dumps[i].stat.n_maps)
            dfl_report_add_note(rep, err, "%s: a softmax dump has no negative mass (n/a)", r->dumps[i].label);
}

/* The value of dump d for group k of `by` (k: the depth group, layer or head) and map e;
 * NaN when the group is empty for d. */
static double stat_value(const dfl_noise_dump *d, dfl_noise_by by, size_t k, int e)
{
    const dfl_noise_values *v = &d->stat;
    if (by == DFL_NOISE_BY_NONE) return v->all[e];
    if (by == DFL_NOISE_BY_DEPTH) return v->by_depth[k * 2 + e];
    return by == DFL_NOISE_BY_LAYER ? v->by_layer[k * 2 + e] : v->by_head[k * 2 + e];
}

static dfl_status report_stat(dfl_report *rep, const dfl_noise_result *r, dfl_noise_by by, dfl_error *err)
{
    const char *name = dfl_noise_stat_name(r->stat);
    int any = 0, maps = 0;
    for (size_t i = 0; i < r->n_dumps; i++) {
        any |= r->dumps[i].stat.n_maps > 0;
        if (r->dumps[i].stat.n_maps > maps) maps = r->dumps[i].stat.n_maps;
    }
    if (!any)
        return dfl__fail(err, DFL_ERR_USAGE,
                         "--stat negative_mass: %s softmax dump%s; the negative mass is written "
                         "for Diff dumps only",
                         r->n_dumps == 1 ? "a" : "only", r->n_dumps == 1 ? "" : "s");
    static const char *const keyname[] = {"map", "depth", "layer", "head"};
    char title[96], cb[160];
    snprintf(title, sizeof title, "%s by %s",
             r->stat == DFL_NOISE_STAT_ENTROPY ? "Mean row entropy (nats)" : "Negative mass of the diff map",
             by == DFL_NOISE_BY_NONE ? "map" : dfl_noise_by_name(by));
    dfl_report_table *t;
    dfl_status s = dfl_report_add_table(rep, name, title, &t, err);
    if (s) return s;
    dfl_report_add_column(t, keyname[by], DFL_NUM_GENERAL, 4, err);
    if (by == DFL_NOISE_BY_NONE) {
        /* a row per map, a column per dump */
        for (size_t i = 0; i < r->n_dumps; i++)
            dfl_report_add_column(t, r->dumps[i].label, DFL_NUM_FIXED, 4, err);
        for (int e = 0; e < maps; e++) {
            dfl_report_add_row(t, err);
            dfl_report_set_text(t, 0, stat_map(r->stat, e), err);
            for (size_t i = 0; i < r->n_dumps; i++) {
                if (e < r->dumps[i].stat.n_maps)
                    set_num_or_missing(t, 1 + i, r->dumps[i].stat.all[e], err);
                else
                    dfl_report_set_missing(t, 1 + i, "n/a", err);
            }
        }
        dfl_report_add_row(t, err);
        dfl_report_set_text(t, 0, "samples", err);
        for (size_t i = 0; i < r->n_dumps; i++)
            dfl_report_set_int(t, 1 + i, (int64_t)r->dumps[i].n_samples, err);
        return dfl_report_status(rep, err);
    }
    /* a row per group, per dump a column per map it has */
    for (size_t i = 0; i < r->n_dumps; i++)
        for (int e = 0; e < r->dumps[i].stat.n_maps; e++) {
            char what[32];
            snprintf(what, sizeof what, "%s", stat_map(r->stat, e));
            dfl_report_add_column(t, colname(r, i, what, cb, sizeof cb), DFL_NUM_FIXED, 4, err);
        }
    size_t nkeys = 0;
    double *keys = NULL;
    dfl_status st = group_keys(r, by, &keys, &nkeys, err);
    if (st) return st;
    for (size_t k = 0; k < nkeys; k++) {
        /* each dump's group for key k: its depth group, or the layer / head itself */
        size_t group[DFL_NOISE_MAX_DUMPS];
        int has[DFL_NOISE_MAX_DUMPS], shown = 0;
        for (size_t i = 0; i < r->n_dumps; i++) {
            const dfl_noise_dump *d = &r->dumps[i];
            has[i] = 0;
            if (by == DFL_NOISE_BY_DEPTH) {
                for (size_t g = 0; g < d->n_depths; g++)
                    if (fabs(d->depth[g] - keys[k]) <= DFL_NOISE_DEPTH_EPS) group[i] = g, has[i] = 1;
            } else {
                const dfl_noise_cell *c = by == DFL_NOISE_BY_LAYER ? d->by_layer : d->by_head;
                int64_t n = by == DFL_NOISE_BY_LAYER ? d->layers : d->heads;
                group[i] = k;
                has[i] = (int64_t)k < n && c[k].n_samples > 0; /* selected */
            }
            shown |= has[i] && d->stat.n_maps > 0;
        }
        if (!shown) continue; /* a layer or head no dump averaged */
        dfl_report_add_row(t, err);
        if (by == DFL_NOISE_BY_DEPTH)
            dfl_report_set_num(t, 0, keys[k], err);
        else
            dfl_report_set_int(t, 0, (int64_t)keys[k], err);
        size_t col = 1;
        for (size_t i = 0; i < r->n_dumps; i++)
            for (int e = 0; e < r->dumps[i].stat.n_maps; e++, col++) {
                if (has[i])
                    set_num_or_missing(t, col, stat_value(&r->dumps[i], by, group[i], e), err);
                else
                    dfl_report_set_missing(t, col, "-", err);
            }
    }
    free(keys);
    return dfl_report_status(rep, err);
}

dfl_status dfl_noise_report(const dfl_noise_result *r, dfl_noise_by by, dfl_report **out, dfl_error *err)
{
    *out = NULL;
    dfl_report *rep = NULL;
    dfl_status s = dfl_report_create("noise: attention to the answer vs attention noise", &rep, err);
    if (s) return s;
    if (r->stat != DFL_NOISE_STAT_SHARES) {
        stat_meta(rep, r, err);
        s = report_stat(rep, r, by, err);
    } else {
        report_meta(rep, r, err);
        s = by == DFL_NOISE_BY_NONE ? report_shares(rep, r, err) : report_groups(rep, r, by, err);
    }
    if (!s) s = dfl_report_status(rep, err);
    if (s) {
        dfl_report_destroy(rep);
        return s;
    }
    *out = rep;
    return DFL_OK;
}

/* ------------------------------------------------------------------- plots */

static const char *const bar_labels[DFL_SHARE_SEGMENTS] = {"bos",   "context before", "answer", "context after",
                                                           "query", "distractor",     "target"};

/* "map diff, norm total; mean over layers all, heads all, analysis rows, samples" */
static void plot_subtitle(const dfl_noise_result *r, char *buf, size_t cap)
{
    char maps[400] = "";
    int same = 1;
    for (size_t i = 1; i < r->n_dumps; i++)
        same &= !strcmp(r->dumps[i].map, r->dumps[0].map);
    if (same)
        dfl__noise_put(maps, sizeof maps, "map %s", r->dumps[0].map);
    else
        for (size_t i = 0; i < r->n_dumps; i++) {
            size_t u = strlen(maps);
            dfl__noise_put(maps + u, sizeof maps - u, "%s%s %s", i ? ", " : "maps ", r->dumps[i].label,
                           r->dumps[i].map);
        }
    dfl__noise_put(buf, cap, "%s; normalisation %s; mean over layers %s, heads %s, analysis rows, samples", maps,
                   dfl_noise_norm_name(r->norm), r->layers_text, r->heads_text);
}

dfl_status dfl_noise_plot_shares(const dfl_noise_result *r, const char *path, int overwrite, dfl_error *err)
{
    return dfl_noise_plot_shares_paper(r, path, overwrite, NULL, err);
}

dfl_status dfl_noise_plot_shares_paper(const dfl_noise_result *r, const char *path, int overwrite,
                                       const dfl_plot_paper *pp, dfl_error *err)
{
    int present[DFL_SHARE_SEGMENTS] = {0}, seg[DFL_SHARE_SEGMENTS], ng = 0;
    for (size_t i = 0; i < r->n_dumps; i++)
        for (int k = 0; k < DFL_SHARE_SEGMENTS; k++)
            present[k] |= r->dumps[i].segment_present[k];
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++)
        if (present[k]) seg[ng++] = k;
    const char *groups[DFL_SHARE_SEGMENTS], *series[DFL_NOISE_MAX_DUMPS];
    double values[DFL_SHARE_SEGMENTS * DFL_NOISE_MAX_DUMPS]; /* [group][dump] */
    for (int g = 0; g < ng; g++) {
        groups[g] = bar_labels[seg[g]];
        for (size_t i = 0; i < r->n_dumps; i++)
            values[(size_t)g * r->n_dumps + i] = r->dumps[i].all.share[seg[g]];
    }
    for (size_t i = 0; i < r->n_dumps; i++)
        series[i] = r->dumps[i].label;

    char sub[600], note[2048] = "noise = context before + context after";
    plot_subtitle(r, sub, sizeof sub);
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_cell *c = &r->dumps[i].all;
        char acc_text[48] = "";
        if (c->n_scored) snprintf(acc_text, sizeof acc_text, ", accuracy %.1f%%", 100.0 * c->accuracy);
        size_t u = strlen(note);
        char rt[32];
        const char *shown = ratio_shown(c->share[DFL_SHARE_ANSWER], c->noise);
        if (shown)
            snprintf(rt, sizeof rt, "%s", shown[0] == '>' ? "> 1000" : "-");
        else
            snprintf(rt, sizeof rt, "%.3g", c->ratio);
        dfl__noise_put(note + u, sizeof note - u, "\n%s: noise %.3f, answer/noise %s%s", r->dumps[i].label, c->noise,
                       rt, acc_text);
    }
    dfl_bar_chart ch = dfl_bar_chart_default();
    ch.title = "Attention to each part of the prompt";
    ch.subtitle = sub;
    ch.groups = groups;
    ch.n_groups = ng;
    ch.series = series;
    ch.n_series = (int)r->n_dumps;
    ch.values = values;
    ch.x_label = "key segment";
    ch.y.label = r->norm == DFL_NOISE_NORM_ABS ? "share of |attention|" : "share of attention";
    ch.value_labels = 1;
    ch.value_precision = 2;
    /* room for "context before" under its bars, so no group label has to turn */
    ch.width = ng > 5 ? 1500 : 1200;
    ch.note = note;
    ch.font = pp ? pp->font : NULL;
    dfl_canvas *c = NULL;
    dfl_status s = dfl_plot_bar_canvas(&ch, &c, err);
    if (!s) s = dfl_plot_write(c, path, overwrite, pp, NULL, err);
    dfl_canvas_destroy(c);
    return s;
}

dfl_status dfl_noise_plot_depth(const dfl_noise_result *r, const char *path, int overwrite, dfl_error *err)
{
    return dfl_noise_plot_depth_paper(r, path, overwrite, NULL, err);
}

dfl_status dfl_noise_plot_depth_paper(const dfl_noise_result *r, const char *path, int overwrite,
                                      const dfl_plot_paper *pp, dfl_error *err)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_dumps; i++)
        any += r->dumps[i].n_depths;
    if (!any)
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "--plot-depth: no sample in %s has a depth attribute (prompts need \"depth\", as `noise "
                         "prompts` writes them)",
                         r->n_dumps == 1 ? r->dumps[0].path : "the dumps");
    /* [2][dump][depth]: answer, noise */
    double *ys = dfl__alloc_array(2 * any, sizeof *ys);
    if (!ys) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    dfl_plot_series ser[2][DFL_NOISE_MAX_DUMPS];
    memset(ser, 0, sizeof ser);
    size_t off = 0;
    int nonneg = 1;
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_dump *d = &r->dumps[i];
        for (size_t g = 0; g < d->n_depths; g++) {
            ys[off + g] = d->by_depth[g].share[DFL_SHARE_ANSWER];
            ys[any + off + g] = d->by_depth[g].noise;
            nonneg &= ys[off + g] >= 0 && ys[any + off + g] >= 0;
        }
        for (int k = 0; k < 2; k++) {
            ser[k][i].label = d->label;
            ser[k][i].x = d->depth;
            ser[k][i].y = ys + (size_t)k * any + off;
            ser[k][i].n = (int)d->n_depths;
        }
        off += d->n_depths;
    }
    char sub[600];
    plot_subtitle(r, sub, sizeof sub);
    const int W = 1600, H = 800, top = 80;
    dfl_canvas *c = NULL;
    dfl_rgb white = {255, 255, 255}, black = {0, 0, 0}, grey = {80, 80, 80};
    dfl_status s = dfl_canvas_create(W, H, white, &c, err);
    if (!s) {
        dfl_canvas_set_font(c, pp ? pp->font : NULL);
        dfl_canvas_text(c, W / 2, 12, "Attention to the answer and attention noise by answer depth", 3, black,
                        DFL_ALIGN_CENTER);
        dfl_canvas_text(c, W / 2, 12 + 3 * DFL_FONT_H + 6, sub, dfl_canvas_text_width(c, sub, 2) < W - 20 ? 2 : 1, grey,
                        DFL_ALIGN_CENTER);
    }
    /* every dump at the same depths (one prompt file): label the ticks with exactly
     * those depths on a categorical axis; otherwise a numeric axis over [0, 1] */
    int same = 1;
    const dfl_noise_dump *d0 = &r->dumps[0];
    for (size_t i = 1; i < r->n_dumps && same; i++) {
        same = r->dumps[i].n_depths == d0->n_depths;
        for (size_t g = 0; g < d0->n_depths && same; g++)
            same = fabs(r->dumps[i].depth[g] - d0->depth[g]) <= DFL_NOISE_DEPTH_EPS;
    }
    same = same && d0->n_depths > 1 && d0->n_depths <= 64;
    char tick_text[64][24];
    const char *ticks[64];
    for (size_t g = 0; same && g < d0->n_depths; g++) {
        snprintf(tick_text[g], sizeof tick_text[g], "%g", d0->depth[g]);
        ticks[g] = tick_text[g];
    }
    for (size_t i = 0; same && i < r->n_dumps; i++)
        ser[0][i].x = ser[1][i].x = NULL;
    static const char *const titles[2] = {"attention to the answer", "attention noise (context before + after)"};
    for (int k = 0; k < 2 && !s; k++) {
        dfl_line_chart ch = dfl_line_chart_default();
        ch.title = titles[k];
        ch.x.label = "answer depth (0 = start of the context, 1 = end)";
        if (same) {
            ch.x.tick_labels = ticks;
            ch.x.n_tick_labels = (int)d0->n_depths;
        } else {
            ch.x.has_min = 1, ch.x.min = 0.0;
            ch.x.has_max = 1, ch.x.max = 1.0;
        }
        ch.y.label = r->norm == DFL_NOISE_NORM_ABS ? "share of |attention|" : "share of attention";
        if (nonneg) ch.y.has_min = 1, ch.y.min = 0.0;
        ch.series = ser[k];
        ch.n_series = (int)r->n_dumps;
        ch.font_scale = 2;
        ch.font = pp ? pp->font : NULL;
        s = dfl_plot_line_draw(c, k * (W / 2), top, W / 2, H - top, &ch, err);
    }
    if (!s) s = dfl_plot_write(c, path, overwrite, pp, "difflens noise", err);
    dfl_canvas_destroy(c);
    free(ys);
    return s;
}
