/* train_plot.c — training curves from train.csv files as a two-panel PNG (plot.h):
 * loss (train, dashed; held-out, solid) and held-out retrieval accuracy against step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/plot.h"
#include "train/train.h"
#include "train/train_internal.h"

#define PANEL_W 1000
#define PANEL_H 700

/* Columns of train.csv: step,lr,loss,eval_loss,eval_acc,tokens_per_s,elapsed_s. */
void dfl__train_curve_free(dfl__train_curve *c)
{
    free(c->step), free(c->loss), free(c->eval_loss), free(c->eval_acc);
    memset(c, 0, sizeof *c);
}

dfl_status dfl__train_curve_read(const char *path, dfl__train_curve *c, dfl_error *err)
{
    memset(c, 0, sizeof *c);
    char *text = NULL;
    size_t len;
    dfl_status s = dfl__read_file(path, &text, &len, err);
    if (s) return s;
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    c->step = dfl__calloc_array(lines + 1, sizeof(double));
    c->loss = dfl__calloc_array(lines + 1, sizeof(double));
    c->eval_loss = dfl__calloc_array(lines + 1, sizeof(double));
    c->eval_acc = dfl__calloc_array(lines + 1, sizeof(double));
    if (!c->step || !c->loss || !c->eval_loss || !c->eval_acc) {
        free(text);
        dfl__train_curve_free(c);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
    }
    char *line = strchr(text, '\n'); /* after the header */
    while (line && *++line) {
        double v[5];
        char *p = line, *end;
        int k = 0;
        for (; k < 5; k++) {
            v[k] = strtod(p, &end);
            if (end == p || (*end != ',' && k < 4)) break;
            p = end + 1;
        }
        if (k == 5) {
            c->step[c->n] = v[0], c->loss[c->n] = v[2], c->eval_loss[c->n] = v[3], c->eval_acc[c->n] = v[4];
            c->n++;
        }
        line = strchr(line, '\n');
    }
    free(text);
    return DFL_OK;
}

dfl_status dfl_train_plot(const char *png, const char *const *csv_paths, const char *const *labels, int n,
                          const char *title, dfl_error *err)
{
    return dfl_train_plot_paper(png, csv_paths, labels, n, title, NULL, err);
}

dfl_status dfl_train_plot_paper(const char *png, const char *const *csv_paths, const char *const *labels, int n,
                                const char *title, const dfl_plot_paper *pp, dfl_error *err)
{
    if (n < 1 || n > 8) return dfl__fail(err, DFL_ERR_USAGE, "plot: 1 to 8 runs, got %d", n);
    dfl__train_curve cv[8];
    memset(cv, 0, sizeof cv);
    dfl_plot_series loss_s[16], acc_s[8];
    char names[24][96];
    dfl_status s = DFL_OK;
    int ns = 0, na = 0;
    for (int i = 0; i < n && !s; i++)
        s = dfl__train_curve_read(csv_paths[i], &cv[i], err);
    for (int i = 0; i < n && !s; i++) {
        if (cv[i].n == 0) continue;
        dfl_plot_series base;
        memset(&base, 0, sizeof base);
        base.x = cv[i].step;
        base.n = cv[i].n;
        base.has_color = 1;
        base.color = dfl_plot_color(i);
        base.marker = cv[i].n > 40 ? DFL_MARKER_NONE : DFL_MARKER_CIRCLE;
        snprintf(names[3 * i], sizeof names[0], "%s train", labels[i]);
        snprintf(names[3 * i + 1], sizeof names[0], "%s held-out", labels[i]);
        snprintf(names[3 * i + 2], sizeof names[0], "%s", labels[i]);
        loss_s[ns] = base, loss_s[ns].y = cv[i].loss, loss_s[ns].label = names[3 * i];
        loss_s[ns++].dash = DFL_DASH_DASHED;
        loss_s[ns] = base, loss_s[ns].y = cv[i].eval_loss, loss_s[ns++].label = names[3 * i + 1];
        acc_s[na] = base, acc_s[na].y = cv[i].eval_acc, acc_s[na++].label = names[3 * i + 2];
    }
    if (!s && na == 0) s = dfl__fail(err, DFL_ERR_USAGE, "plot: no rows in %s", csv_paths[0]);
    if (!s) {
        dfl_line_chart loss = dfl_line_chart_default(), acc = dfl_line_chart_default();
        loss.title = title;
        loss.subtitle = "dashed: training loss, solid: held-out loss of the answer digits";
        loss.series = loss_s, loss.n_series = ns;
        acc.title = "retrieval accuracy";
        acc.subtitle = "held-out: all answer digits right under argmax (teacher-forced)";
        acc.series = acc_s, acc.n_series = na;
        s = dfl__train_panels_write(png, loss, acc, pp, err);
    }
    for (int i = 0; i < n; i++)
        dfl__train_curve_free(&cv[i]);
    return s;
}

dfl_status dfl__train_panels_write(const char *path, dfl_line_chart loss, dfl_line_chart acc, const dfl_plot_paper *pp,
                                   dfl_error *err)
{
    dfl_line_chart *panel[2] = {&loss, &acc};
    for (int i = 0; i < 2; i++) {
        panel[i]->x.label = "step";
        panel[i]->x.integer_ticks = 1;
        panel[i]->width = PANEL_W, panel[i]->height = PANEL_H, panel[i]->font_scale = 2;
        panel[i]->font = pp ? pp->font : NULL;
    }
    loss.y.label = "loss (nats)";
    acc.y.label = "accuracy";
    acc.y.has_min = acc.y.has_max = 1;
    acc.y.min = 0.0, acc.y.max = 1.0;
    dfl_canvas *canvas = NULL;
    dfl_status s = dfl_canvas_create(2 * PANEL_W, PANEL_H, (dfl_rgb){255, 255, 255}, &canvas, err);
    if (!s) s = dfl_plot_line_draw(canvas, 0, 0, PANEL_W, PANEL_H, &loss, err);
    if (!s) s = dfl_plot_line_draw(canvas, PANEL_W, 0, PANEL_W, PANEL_H, &acc, err);
    if (!s) s = dfl_plot_write(canvas, path, 1, pp, "difflens train", err);
    dfl_canvas_destroy(canvas);
    return s;
}
