/* effects_report.c — the report part of `bin/effects`: grids drawn as heatmap panels on
 * one colour scale (render.h's cairo canvas: PNG, SVG, PDF), and as long tables
 * (base/report.h: table, csv, json, markdown). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/effects.h"
#include "render/plot.h"
#include "render/render.h"

#define S       2 /* font scale of labels */
#define MARGIN  24
#define PGAP    40 /* between panels */
#define MAX_ROW 400
#define MAX_COL 400

static const dfl_rgb INK = {20, 20, 20}, GREY = {90, 90, 90}, WHITE = {255, 255, 255};
static const dfl_rgb NODATA = {235, 235, 235}, HATCH = {200, 200, 200};

/* The largest abs(v) (diverging) or v (sequential) over every panel; 0 when none. */
static double data_max(const dfl_effects_grid *g, int n, int diverging)
{
    double mx = 0;
    for (int k = 0; k < n; k++)
        for (int64_t i = 0; i < g[k].rows * g[k].cols; i++) {
            double v = diverging ? fabs(g[k].v[i]) : g[k].v[i];
            if (isfinite(v) && v > mx) mx = v;
        }
    return mx;
}

static int max_label_w(const char *font, char *const *labels, int64_t n)
{
    int w = 0;
    for (int64_t i = 0; i < n; i++) {
        int t = dfl_font_text_width(font, labels[i], S);
        w = t > w ? t : w;
    }
    return w;
}

/* How one panel is laid out: label columns, cells, the bottom label band. */
typedef struct panel_layout {
    int left_w, cell_w, cell_h, map_w, map_h, bottom_h, rotate, w;
} panel_layout;

static void layout_panel(const dfl_effects_grid *g, const char *font, panel_layout *p)
{
    p->left_w = max_label_w(font, g->row_labels, g->rows) + 8;
    p->cell_w = (int)(900 / g->cols);
    p->cell_w = p->cell_w < 22 ? 22 : p->cell_w > 64 ? 64 : p->cell_w;
    p->cell_h = (int)(640 / g->rows);
    p->cell_h = p->cell_h < 22 ? 22 : p->cell_h > 48 ? 48 : p->cell_h;
    if (g->text) { /* the lens: each cell holds its token and probability */
        int tw = max_label_w(font, g->text, g->rows * g->cols) / S + 10;
        p->cell_w = tw > p->cell_w ? (tw > 110 ? 110 : tw) : p->cell_w;
        if (p->cell_w < 44) p->cell_w = 44;
        p->cell_h = 2 * DFL_FONT_H + 10;
    }
    p->map_w = p->cell_w * (int)g->cols;
    p->map_h = p->cell_h * (int)g->rows;
    int colw = max_label_w(font, g->col_labels, g->cols);
    p->rotate = colw > p->cell_w - 4;
    p->bottom_h = (p->rotate ? colw : DFL_FONT_H * S) + 8 + DFL_FONT_H * S + 6; /* labels + the axis title */
    p->w = p->left_w + p->map_w;
}

/* Black or white, whichever reads better on background col. */
static dfl_rgb ink_on(dfl_rgb col)
{
    double lum = 0.2126 * col.r + 0.7152 * col.g + 0.0722 * col.b;
    return lum > 140 ? INK : WHITE;
}

static void draw_panel(dfl_canvas *c, const dfl_effects_grid *g, const panel_layout *p, int x, int y,
                       const dfl_norm *norm, dfl_cmap cmap, const char *font)
{
    dfl_canvas_text(c, x + p->left_w + p->map_w / 2, y, g->label, S, INK, DFL_ALIGN_CENTER);
    int my = y + DFL_FONT_H * S + 8, mx = x + p->left_w;
    /* cells as filled rectangles, not an image: crisp in every SVG and PDF viewer (a
     * few hundred cells at most) */
    for (int64_t r = 0; r < g->rows; r++)
        for (int64_t j = 0; j < g->cols; j++) {
            float v = g->v[r * g->cols + j];
            dfl_rgb col = isnan(v) ? NODATA : dfl_cmap_color(cmap, dfl_norm_apply(norm, v));
            dfl_canvas_fill(c, mx + (int)j * p->cell_w, my + (int)r * p->cell_h, p->cell_w, p->cell_h, col);
            if (isnan(v))
                dfl_canvas_line(c, mx + (int)j * p->cell_w, my + (int)(r + 1) * p->cell_h - 1,
                                mx + (int)(j + 1) * p->cell_w - 1, my + (int)r * p->cell_h, HATCH);
        }
    dfl_canvas_frame(c, mx - 1, my - 1, p->map_w + 2, p->map_h + 2, GREY);
    for (int64_t r = 0; r < g->rows; r++)
        dfl_canvas_text(c, mx - 6, my + (int)r * p->cell_h + (p->cell_h - DFL_FONT_H * S) / 2, g->row_labels[r], S, INK,
                        DFL_ALIGN_RIGHT);
    int ly = my + p->map_h + 6;
    for (int64_t j = 0; j < g->cols; j++) {
        int cx = mx + (int)j * p->cell_w + p->cell_w / 2;
        if (p->rotate)
            dfl_canvas_text_up(c, cx - DFL_FONT_H * S / 2, ly, g->col_labels[j], S, INK, DFL_ALIGN_RIGHT);
        else
            dfl_canvas_text(c, cx, ly, g->col_labels[j], S, INK, DFL_ALIGN_CENTER);
    }
    int axis_y = my + p->map_h + p->bottom_h - DFL_FONT_H * S - 2;
    dfl_canvas_text(c, mx + p->map_w / 2, axis_y, g->col_axis, S, GREY, DFL_ALIGN_CENTER);
    dfl_canvas_text_up(c, x - DFL_FONT_H * S - 4, my + p->map_h / 2, g->row_axis, S, GREY, DFL_ALIGN_CENTER);
    for (int64_t r = 0; g->text && r < g->rows; r++)
        for (int64_t j = 0; j < g->cols; j++) {
            float v = g->v[r * g->cols + j];
            dfl_rgb bg = isnan(v) ? NODATA : dfl_cmap_color(cmap, dfl_norm_apply(norm, v));
            char tok[64], prob[16];
            dfl_text_clip(tok, sizeof tok, g->text[r * g->cols + j], 12);
            snprintf(prob, sizeof prob, "%.2f", (double)v);
            int cx = mx + (int)j * p->cell_w + p->cell_w / 2, cy = my + (int)r * p->cell_h + 4;
            dfl_canvas_text(c, cx, cy, tok, 1, ink_on(bg), DFL_ALIGN_CENTER);
            dfl_canvas_text(c, cx, cy + DFL_FONT_H + 1, prob, 1, ink_on(bg), DFL_ALIGN_CENTER);
        }
    (void)font;
}

dfl_status dfl_effects_draw(const dfl_effects_grid *g, int n, const dfl_effects_style *st, const char *path,
                            int overwrite, dfl_error *err)
{
    dfl_effects_style def = dfl_effects_style_default();
    if (!st) st = &def;
    if (n < 1) return dfl__fail(err, DFL_ERR_USAGE, "no grid to draw");
    for (int k = 0; k < n; k++)
        if (g[k].rows < 1 || g[k].cols < 1 || g[k].rows > MAX_ROW || g[k].cols > MAX_COL)
            return dfl__fail(err, DFL_ERR_USAGE, "%s: a grid of %lld x %lld cannot be drawn (1 to %d a side)",
                             g[k].label, (long long)g[k].rows, (long long)g[k].cols, MAX_ROW);
    dfl_format fmt;
    dfl_status s = dfl_format_of_path(path, &fmt, err);
    if (s) return s;
    double vmax = st->vmax > 0 ? st->vmax : data_max(g, n, st->diverging);
    if (!(vmax > 0)) vmax = 1.0;
    dfl_norm norm = {DFL_SCALE_LINEAR, st->diverging, st->diverging ? -vmax : 0.0, vmax, 0.0};
    dfl_cmap cmap = st->diverging ? DFL_CMAP_RDBU : DFL_CMAP_VIRIDIS;
    panel_layout pl[16];
    if (n > 16) return dfl__fail(err, DFL_ERR_USAGE, "at most 16 panels (got %d)", n);
    int total_w = 0, map_h = 0, bottom = 0;
    for (int k = 0; k < n; k++) {
        layout_panel(&g[k], st->font, &pl[k]);
        total_w += pl[k].w + (k ? PGAP : 0);
        if (pl[k].map_h > map_h) map_h = pl[k].map_h;
        if (pl[k].bottom_h > bottom) bottom = pl[k].bottom_h;
    }
    dfl_colorbar cb = {cmap, norm, g[0].unit, NULL, 0, 0, S, st->font};
    int axis_w = DFL_FONT_H * S + 8, cb_w = dfl_colorbar_width(&cb, 24);
    char title[512];
    snprintf(title, sizeof title, "%s", st->title ? st->title : g[0].what);
    int W = MARGIN + axis_w + total_w + 40 + cb_w + MARGIN;
    int tw = dfl_font_text_width(st->font, title, 3) + 2 * MARGIN;
    if (tw > W) W = tw;
    int nw = g[0].note ? dfl_font_text_width(st->font, g[0].note, S) + 2 * MARGIN : 0;
    if (nw > W) W = nw;
    int note_h = g[0].note ? DFL_FONT_H * S + 8 : 0;
    int top = MARGIN + DFL_FONT_H * 3 + 10 + note_h;
    /* the colour bar beside the maps, its title above it, at least 120 units tall */
    int cb_y = top + 2 * (DFL_FONT_H * S) + 18, cb_h = map_h - DFL_FONT_H * S - 10;
    if (cb_h < 120) cb_h = 120;
    int maps_end = top + DFL_FONT_H * S + 8 + map_h + bottom, cb_end = cb_y + cb_h + DFL_FONT_H * S + 4;
    int Hh = (maps_end > cb_end ? maps_end : cb_end) + MARGIN;
    dfl_canvas *c = NULL;
    if ((s = dfl_canvas_create(W, Hh, WHITE, &c, err))) return s;
    if (st->font) dfl_canvas_set_font(c, st->font);
    dfl_canvas_text(c, W / 2, MARGIN, title, 3, INK, DFL_ALIGN_CENTER);
    if (g[0].note) dfl_canvas_text(c, W / 2, MARGIN + DFL_FONT_H * 3 + 8, g[0].note, S, GREY, DFL_ALIGN_CENTER);
    int content_w = axis_w + total_w + 40 + cb_w, x = (W - content_w) / 2 + axis_w; /* centred under the title */
    for (int k = 0; k < n; k++) {
        draw_panel(c, &g[k], &pl[k], x, top, &norm, cmap, st->font);
        x += pl[k].w + PGAP;
    }
    dfl_canvas_colorbar(c, x - PGAP + 40, cb_y, 24, cb_h, &cb);
    dfl_plot_paper paper = {st->font, st->width_in};
    s = dfl_plot_write(c, path, overwrite, &paper, "difflens effects", err);
    dfl_canvas_destroy(c);
    return s;
}

/* --------------------------------------------------------------- tables */

dfl_status dfl_effects_table(const dfl_effects_grid *g, int n, dfl_report_format f, FILE *out, dfl_error *err)
{
    dfl_report *rep = NULL;
    dfl_report_table *t = NULL;
    dfl_status s = dfl_report_create(g[0].what, &rep, err);
    for (int k = 0; !s && k < n; k++)
        if (g[k].note) s = dfl_report_add_meta(rep, g[k].label, g[k].note, err);
    if (!s) s = dfl_report_add_table(rep, "effects", g[0].what, &t, err);
    int text = g[0].text != NULL;
    if (!s) s = dfl_report_add_column(t, "panel", DFL_NUM_GENERAL, 4, err);
    if (!s) s = dfl_report_add_column(t, g[0].row_axis, DFL_NUM_GENERAL, 4, err);
    if (!s) s = dfl_report_add_column(t, g[0].col_axis, DFL_NUM_GENERAL, 4, err);
    if (!s && text) s = dfl_report_add_column(t, "top_token", DFL_NUM_GENERAL, 4, err);
    if (!s) s = dfl_report_add_column(t, text ? "probability" : "value", DFL_NUM_GENERAL, 4, err);
    for (int k = 0; !s && k < n; k++)
        for (int64_t r = 0; !s && r < g[k].rows; r++)
            for (int64_t j = 0; !s && j < g[k].cols; j++) {
                float v = g[k].v[r * g[k].cols + j];
                size_t col = 0;
                s = dfl_report_add_row(t, err);
                if (!s) s = dfl_report_set_text(t, col++, g[k].label, err);
                if (!s) s = dfl_report_set_text(t, col++, g[k].row_labels[r], err);
                if (!s) s = dfl_report_set_text(t, col++, g[k].col_labels[j], err);
                if (!s && text) s = dfl_report_set_text(t, col++, g[k].text[r * g[k].cols + j], err);
                if (!s) s = isnan(v) ? dfl_report_set_missing(t, col, "n/a", err) : dfl_report_set_num(t, col, v, err);
            }
    if (!s) s = dfl_report_status(rep, err);
    if (!s) s = dfl_report_write(rep, f, out, err);
    dfl_report_destroy(rep);
    return s;
}
