/* train_seeds.c — seeds as an axis: the runs of one protocol under
 * dir/seed-S/<model>/train.csv summarised as held-out curves (mean and min–max over
 * seeds) and the steps each run took to reach 25, 50 and 90% retrieval. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

dfl_status dfl_train_seeds_summary_paper(const char *dir, const uint64_t *seeds, int n_seeds,
                                         const char *const *models, const char *const *labels, int n_models,
                                         const char *png, const dfl_plot_paper *pp, dfl_report **curves,
                                         dfl_report **steps_to, dfl_error *err)
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
