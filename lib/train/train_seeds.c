/* train_seeds.c — seeds as an axis: the runs of one protocol under
 * dir/seed-S/<model>/train.csv summarised as held-out curves (mean and min–max over
 * seeds) and the steps each run took to reach 25, 50 and 90% retrieval; and the runs
 * behind them: a matched pair, or one pair per seed then that summary. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic.h"

#include "render/plot.h"
#include "train/train.h"
#include "train/train_internal.h"

const double DFL_SEEDS_LEVELS[DFL_SEEDS_N_LEVELS] = {0.25, 0.5, 0.9};

/* The first evaluated step whose held-out accuracy reaches level, or -1. */
int64_t dfl_train_steps_to(const double *step, const double *acc, int n, double level)
{
    for (int i = 0; i < n; i++)
        if (acc[i] >= level) return (int64_t)step[i];
    return -1;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Per model: one curve per seed (n == 0: that seed has no run). */
typedef struct model_runs {
    dfl__train_curve *c; /* [n_seeds] */
    int present;         /* seeds with a run */
} model_runs;

/* The curves table: for each model, each step of its first run, the seeds' values
 * at that step (a seed without the step is left out of that row). */
static void add_curves(dfl_report_table *t, const model_runs *mr, const char *label, int n_seeds, double *mean_acc,
                       double *min_acc, double *max_acc, double *mean_loss, double *xs, int *n_x, dfl_error *err)
{
    const dfl__train_curve *ref = NULL;
    for (int i = 0; i < n_seeds && !ref; i++)
        if (mr->c[i].n > 0) ref = &mr->c[i];
    *n_x = 0;
    if (!ref) return;
    for (int r = 0; r < ref->n; r++) {
        double step = ref->step[r], sa = 0, sl = 0, st = 0, lo = INFINITY, hi = -INFINITY;
        double llo = INFINITY, lhi = -INFINITY, sq = 0;
        int k = 0;
        for (int i = 0; i < n_seeds; i++) {
            const dfl__train_curve *c = &mr->c[i];
            for (int j = 0; j < c->n; j++) {
                if (c->step[j] != step) continue;
                double a = c->eval_acc[j], l = c->eval_loss[j];
                sa += a, sq += a * a, sl += l, st += c->loss[j], k++;
                lo = fmin(lo, a), hi = fmax(hi, a), llo = fmin(llo, l), lhi = fmax(lhi, l);
                break;
            }
        }
        if (k == 0) continue;
        double ma = sa / k, sd = k > 1 ? sqrt(fmax(0.0, (sq - k * ma * ma) / (k - 1))) : 0.0;
        dfl_report_add_row(t, err);
        dfl_report_set_text(t, 0, label, err);
        dfl_report_set_int(t, 1, (int64_t)step, err);
        dfl_report_set_int(t, 2, k, err);
        dfl_report_set_num(t, 3, ma, err);
        dfl_report_set_num(t, 4, sd, err);
        dfl_report_set_num(t, 5, lo, err);
        dfl_report_set_num(t, 6, hi, err);
        dfl_report_set_num(t, 7, sl / k, err);
        dfl_report_set_num(t, 8, llo, err);
        dfl_report_set_num(t, 9, lhi, err);
        dfl_report_set_num(t, 10, st / k, err);
        xs[*n_x] = step, mean_acc[*n_x] = ma, min_acc[*n_x] = lo, max_acc[*n_x] = hi, mean_loss[*n_x] = sl / k;
        (*n_x)++;
    }
}

/* The steps-to table: one row per (model, seed), then one per model over its seeds. */
static void add_steps_to(dfl_report_table *t, const model_runs *mr, const char *label, const uint64_t *seeds,
                         int n_seeds, dfl_error *err)
{
    int reached[DFL_SEEDS_N_LEVELS] = {0};
    double sum[DFL_SEEDS_N_LEVELS] = {0}, facc = 0, floss = 0;
    int n = 0;
    for (int i = 0; i < n_seeds; i++) {
        const dfl__train_curve *c = &mr->c[i];
        if (c->n == 0) continue;
        char seed[32];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)seeds[i]);
        dfl_report_add_row(t, err);
        dfl_report_set_text(t, 0, label, err);
        dfl_report_set_text(t, 1, seed, err);
        for (int l = 0; l < DFL_SEEDS_N_LEVELS; l++) {
            int64_t st = dfl_train_steps_to(c->step, c->eval_acc, c->n, DFL_SEEDS_LEVELS[l]);
            if (st < 0) {
                char shown[48];
                snprintf(shown, sizeof shown, "> %lld", (long long)c->step[c->n - 1]);
                dfl_report_set_missing(t, 2 + (size_t)l, shown, err);
            } else {
                dfl_report_set_int(t, 2 + (size_t)l, st, err);
                reached[l]++, sum[l] += (double)st;
            }
        }
        dfl_report_set_int(t, 5, (int64_t)c->step[c->n - 1], err);
        dfl_report_set_num(t, 6, c->eval_acc[c->n - 1], err);
        dfl_report_set_num(t, 7, c->eval_loss[c->n - 1], err);
        facc += c->eval_acc[c->n - 1], floss += c->eval_loss[c->n - 1], n++;
    }
    if (n == 0) return;
    char all[48];
    snprintf(all, sizeof all, "mean of %d", n);
    dfl_report_add_row(t, err);
    dfl_report_set_text(t, 0, label, err);
    dfl_report_set_text(t, 1, all, err);
    for (int l = 0; l < DFL_SEEDS_N_LEVELS; l++) {
        char shown[48];
        if (reached[l] == n) {
            dfl_report_set_num_fmt(t, 2 + (size_t)l, sum[l] / n, DFL_NUM_FIXED, 0, err);
        } else {
            /* a mean over the seeds that got there would flatter the model: say how many did */
            snprintf(shown, sizeof shown, "%d of %d reached", reached[l], n);
            dfl_report_set_missing(t, 2 + (size_t)l, shown, err);
        }
    }
    dfl_report_set_num(t, 6, facc / n, err);
    dfl_report_set_num(t, 7, floss / n, err);
}

dfl_status dfl_train_seeds_summary(const char *dir, const uint64_t *seeds, int n_seeds, const char *const *models,
                                   const char *const *labels, int n_models, const char *png, dfl_report **curves,
                                   dfl_report **steps_to, dfl_error *err)
{
    return dfl_train_seeds_summary_paper(dir, seeds, n_seeds, models, labels, n_models, png, NULL, curves, steps_to,
                                         err);
}

dfl_status dfl_train_seeds_summary_paper(const char *dir, const uint64_t *seeds, int n_seeds, const char *const *models,
                                         const char *const *labels, int n_models, const char *png,
                                         const dfl_plot_paper *pp, dfl_report **curves, dfl_report **steps_to,
                                         dfl_error *err)
{
    *curves = *steps_to = NULL;
    if (n_seeds < 1 || n_models < 1 || n_models > 8)
        return dfl__fail(err, DFL_ERR_USAGE, "seeds summary: 1+ seeds and 1 to 8 models, got %d and %d", n_seeds,
                         n_models);
    model_runs mr[8];
    memset(mr, 0, sizeof mr);
    dfl_report *rc = NULL, *rs = NULL;
    double *buf = NULL;
    dfl_status s = DFL_OK;
    int max_rows = 0, any = 0;
    char path[4200];
    for (int j = 0; j < n_models && !s; j++) {
        if (!(mr[j].c = dfl__calloc_array((size_t)n_seeds, sizeof *mr[j].c))) {
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            break;
        }
        for (int i = 0; i < n_seeds && !s; i++) {
            snprintf(path, sizeof path, "%s/seed-%llu/%s/train.csv", dir, (unsigned long long)seeds[i], models[j]);
            if (!file_exists(path)) continue;
            if ((s = dfl__train_curve_read(path, &mr[j].c[i], err))) break;
            if (mr[j].c[i].n > 0) mr[j].present++;
            if (mr[j].c[i].n > max_rows) max_rows = mr[j].c[i].n;
        }
        any += mr[j].present > 0;
    }
    if (!s && !any) s = dfl__fail(err, DFL_ERR_IO, "%s: no runs (seed-S/<model>/train.csv) for the seeds given", dir);
    /* [n_models][5][max_rows]: step, mean, min, max accuracy, mean held-out loss */
    if (!s && !(buf = dfl__calloc_array((size_t)n_models * 5 * (size_t)max_rows, sizeof *buf)))
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!s) s = dfl_report_create("Held-out curves over seeds", &rc, err);
    if (!s) s = dfl_report_create("Steps to a held-out retrieval level", &rs, err);
    dfl_report_table *tc = NULL, *ts = NULL;
    if (!s) s = dfl_report_add_table(rc, "curves", "held-out accuracy and loss over seeds", &tc, err);
    if (!s) s = dfl_report_add_table(rs, "steps_to", "steps to 25 / 50 / 90% held-out retrieval", &ts, err);
    if (!s) {
        static const char *const cc[] = {"model",         "step",          "seeds",    "acc_mean",
                                         "acc_sd",        "acc_min",       "acc_max",  "eval_loss_mean",
                                         "eval_loss_min", "eval_loss_max", "loss_mean"};
        for (size_t k = 0; k < sizeof cc / sizeof cc[0]; k++)
            dfl_report_add_column(tc, cc[k], DFL_NUM_FIXED, 3, err);
        static const char *const sc[] = {"model",       "seed",       "steps_to_25", "steps_to_50",
                                         "steps_to_90", "final_step", "final_acc",   "final_eval_loss"};
        for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++)
            dfl_report_add_column(ts, sc[k], DFL_NUM_FIXED, 3, err);
        dfl_report_add_note(rs, err,
                            "steps to X%%: the first evaluation at or above X%% held-out retrieval; "
                            "\"> N\": not reached by the last step N");
    }
    int nx[8] = {0};
    for (int j = 0; j < n_models && !s; j++) {
        if (!mr[j].present) continue;
        double *b = buf + (size_t)j * 5 * (size_t)max_rows;
        add_curves(tc, &mr[j], labels[j], n_seeds, b + max_rows, b + 2 * max_rows, b + 3 * max_rows, b + 4 * max_rows,
                   b, &nx[j], err);
        add_steps_to(ts, &mr[j], labels[j], seeds, n_seeds, err);
    }
    if (!s) s = dfl_report_status(rc, err);
    if (!s) s = dfl_report_status(rs, err);

    /* the figure: mean over seeds solid, min and max dotted, one colour per model */
    if (!s && png) {
        dfl_plot_series ls[8], as[24];
        char names[8][96];
        int nl = 0, na = 0;
        for (int j = 0; j < n_models; j++) {
            if (!nx[j]) continue;
            double *b = buf + (size_t)j * 5 * (size_t)max_rows;
            dfl_plot_series base;
            memset(&base, 0, sizeof base);
            base.x = b, base.n = nx[j], base.has_color = 1, base.color = dfl_plot_color(j);
            base.marker = DFL_MARKER_NONE;
            snprintf(names[j], sizeof names[j], "%s (%d seeds)", labels[j], mr[j].present);
            ls[nl] = base, ls[nl].y = b + 4 * max_rows, ls[nl++].label = names[j];
            as[na] = base, as[na].y = b + max_rows, as[na++].label = names[j];
            for (int e = 2; e <= 3; e++) {
                as[na] = base, as[na].y = b + (size_t)e * max_rows, as[na].dash = DFL_DASH_DOTTED;
                as[na++].line_width = 1;
            }
        }
        dfl_line_chart loss = dfl_line_chart_default(), acc = dfl_line_chart_default();
        loss.title = "held-out loss, mean over seeds";
        loss.subtitle = "cross-entropy of the answer digits (ln 10 = 2.30 is chance)";
        loss.y.has_min = 1, loss.y.min = 0.0; /* cross-entropy: the axis need not go below 0 */
        loss.series = ls, loss.n_series = nl;
        acc.title = "held-out retrieval accuracy over seeds";
        acc.subtitle = "solid: mean; dotted: lowest and highest seed";
        acc.series = as, acc.n_series = na;
        acc.legend = DFL_LEGEND_INSIDE_BR;
        s = dfl__train_panels_write(png, loss, acc, pp, err);
    }
    free(buf);
    for (int j = 0; j < n_models; j++) {
        for (int i = 0; mr[j].c && i < n_seeds; i++)
            dfl__train_curve_free(&mr[j].c[i]);
        free(mr[j].c);
    }
    if (s) {
        dfl_report_destroy(rc);
        dfl_report_destroy(rs);
        return s;
    }
    *curves = rc, *steps_to = rs;
    return DFL_OK;
}

/* ------------------------------------------------------ pairs and seeds */

dfl_train_pairs_params dfl_train_pairs_params_default(void)
{
    dfl_train_pairs_params pp;
    memset(&pp, 0, sizeof pp);
    dfl_train_params p = dfl_train_params_default();
    dfl_error err;
    dfl_train_pair_params(&p, &pp.llama, &pp.diff, &err); /* the defaults (4 heads) always pair */
    return pp;
}

static void note(const dfl_train_pairs_hooks *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const dfl_train_pairs_hooks *h, const char *fmt, ...)
{
    if (!h || !h->note) return;
    char msg[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    h->note(h->train.user, msg);
}

static int stop_raised(const dfl_train_pairs_hooks *h)
{
    return h && h->train.stop && *h->train.stop;
}

/* One model of a pair: begin, dfl_train_run, end. */
static dfl_status pair_model(const dfl_train_params *p, const char *name, const dfl_train_pairs_hooks *h,
                             dfl_train_pairs_result *res, dfl_error *err)
{
    dfl_train_result r;
    if (h && h->begin) h->begin(h->train.user, name, p);
    dfl_status s = dfl_train_run(p, h ? &h->train : NULL, &r, err);
    if (h && h->end) h->end(h->train.user, name, p, s ? NULL : &r);
    if (!s) res->models++;
    return s;
}

/* The pair llama (into dir/transformer) then diff (dir/diff), then both curves in
 * dir/train.png titled with the parameter counts. */
static dfl_status run_pair(const dfl_train_params *llama, const dfl_train_params *diff, const char *dir,
                           const dfl_plot_paper *paper, const dfl_train_pairs_hooks *h, dfl_train_pairs_result *res,
                           dfl_error *err)
{
    char out_l[4200], out_d[4200], ck[4300];
    snprintf(out_l, sizeof out_l, "%s/transformer", dir);
    snprintf(out_d, sizeof out_d, "%s/diff", dir);
    dfl_train_params pl = *llama, pd = *diff;
    pl.out = out_l, pd.out = out_d;
    dfl_config cl, cd;
    dfl_status s = dfl_train_params_config(&pl, &cl, err);
    if (!s) s = dfl_train_params_config(&pd, &cd, err);
    if (!s) s = pair_model(&pl, "transformer", h, res, err);
    if (s || stop_raised(h)) {
        res->stopped = !s;
        return s;
    }
    /* A pair stopped during its first model has no Diff checkpoint yet: --resume
     * starts that one afresh. */
    snprintf(ck, sizeof ck, "%s/checkpoint.safetensors", pd.out);
    if (pd.resume && access(ck, F_OK) != 0) pd.resume = 0;
    if ((s = pair_model(&pd, "diff", h, res, err))) return s;
    if (stop_raised(h)) {
        res->stopped = 1;
        return DFL_OK;
    }
    /* both curves in one figure; a failure is worth a warning, not the run */
    char png[4200], title[128], c0[4300], c1[4300];
    const char *csvs[2] = {c0, c1}, *labels[2] = {"Transformer", "Diff"};
    snprintf(c0, sizeof c0, "%s/train.csv", out_l);
    snprintf(c1, sizeof c1, "%s/train.csv", out_d);
    snprintf(png, sizeof png, "%s/train.png", dir);
    snprintf(title, sizeof title, "Transformer vs Diff, %zu / %zu params", dfl_train_param_count(&cl),
             dfl_train_param_count(&cd));
    dfl_error perr = {DFL_OK, ""};
    if (dfl_train_plot_paper(png, csvs, labels, 2, title, paper, &perr)) {
        if (h && h->train.warn) h->train.warn(h->train.user, perr.msg);
    } else
        note(h, "wrote %s", png);
    return DFL_OK;
}

/* dir/seeds_curves.csv, seeds_steps_to.csv and .md, seeds.png; *md gets the markdown. */
static dfl_status write_summary(const dfl_train_pairs_params *pp, const dfl_train_pairs_hooks *h, char **md,
                                dfl_error *err)
{
    static const char *const models[] = {"transformer", "diff", "diff_lambda0"};
    static const char *const labels[] = {"Transformer", "Diff", "Diff lambda=0"};
    char png[4200], path[4200];
    snprintf(png, sizeof png, "%s/seeds.png", pp->dir);
    dfl_report *rc = NULL, *rs = NULL;
    char *csv_c = NULL, *csv_s = NULL;
    dfl_status s = dfl_train_seeds_summary_paper(pp->dir, pp->seeds, pp->n_seeds, models, labels, 3, png, pp->paper,
                                                 &rc, &rs, err);
    if (!s) s = dfl_report_render(rc, DFL_REPORT_CSV, &csv_c, NULL, err);
    if (!s) s = dfl_report_render(rs, DFL_REPORT_CSV, &csv_s, NULL, err);
    if (!s) s = dfl_report_render(rs, DFL_REPORT_MARKDOWN, md, NULL, err);
    const char *files[3] = {"seeds_curves.csv", "seeds_steps_to.csv", "seeds_steps_to.md"};
    const char *texts[3] = {csv_c, csv_s, s ? NULL : *md};
    for (int i = 0; i < 3 && !s; i++) {
        snprintf(path, sizeof path, "%s/%s", pp->dir, files[i]);
        s = dfl__atomic_write(path, texts[i], strlen(texts[i]), 1, err);
    }
    if (!s) note(h, "wrote %s/seeds_curves.csv, seeds_steps_to.csv, seeds_steps_to.md, seeds.png", pp->dir);
    free(csv_c), free(csv_s);
    dfl_report_destroy(rc);
    dfl_report_destroy(rs);
    return s;
}

dfl_status dfl_train_pairs_run(const dfl_train_pairs_params *pp, const dfl_train_pairs_hooks *h,
                               dfl_train_pairs_result *res, dfl_error *err)
{
    memset(res, 0, sizeof *res);
    if (!pp->dir || !*pp->dir || strlen(pp->dir) > 3000)
        return dfl__fail(err, DFL_ERR_USAGE, "pairs: an output folder of 1 to 3000 bytes is needed");
    if (pp->n_seeds < 0 || pp->n_seeds > 64 || (pp->n_seeds > 0) != (pp->seeds != NULL))
        return dfl__fail(err, DFL_ERR_USAGE, "pairs: 0 to 64 seeds, got %d", pp->n_seeds);
    if (pp->summarize && !pp->seeds) return dfl__fail(err, DFL_ERR_USAGE, "pairs: the summary needs seeds");
    if (!pp->seeds) return run_pair(&pp->llama, &pp->diff, pp->dir, pp->paper, h, res, err);
    dfl_status s = DFL_OK;
    for (int i = 0; i < pp->n_seeds && !s && !res->stopped && !pp->summarize; i++) {
        char dir[3100], ck[3200]; /* dir is at most 3000 bytes (checked above) */
        snprintf(dir, sizeof dir, "%s/seed-%llu", pp->dir, (unsigned long long)pp->seeds[i]);
        dfl_train_params sl = pp->llama, sd = pp->diff;
        sl.seed = sd.seed = pp->seeds[i];
        /* --resume over seeds: a seed not begun yet starts */
        snprintf(ck, sizeof ck, "%s/transformer/checkpoint.safetensors", dir);
        if (sl.resume && access(ck, F_OK) != 0) sl.resume = sd.resume = 0;
        note(h, "seed %llu (%d of %d) into %s", (unsigned long long)pp->seeds[i], i + 1, pp->n_seeds, dir);
        s = run_pair(&sl, &sd, dir, pp->paper, h, res, err);
    }
    if (!s && !res->stopped) s = write_summary(pp, h, &res->summary_md, err);
    if (s) {
        free(res->summary_md);
        res->summary_md = NULL;
    }
    return s;
}
