/* render_chart.c — chart pieces built on the canvas (cairo): heatmaps as images, a vertical colour
 * bar with ticks, and legends. Reused by every tool that draws figures. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "render/render_internal.h"

static const dfl_rgb INK = {0x22, 0x22, 0x22};

/* ---------------------------------------------------------------- heatmap */

/* Diagonal hatch lines (period 8 units, 45°) in col over the current clip of the box
 * (x, y, w, h). */
static void hatch_lines(cairo_t *cr, double x, double y, double w, double h, dfl_rgb col)
{
    dfl__set_rgb(cr, col);
    cairo_set_line_width(cr, 1.5);
    for (double d = -h; d < w; d += 8) {
        cairo_move_to(cr, x + d, y + h);
        cairo_line_to(cr, x + d + h, y);
    }
    cairo_stroke(cr);
}

/* The grid as an image of one pixel per cell, scaled up with nearest-neighbour
 * filtering: exact cell colours in a PNG, one embedded image in SVG and PDF. */
void dfl_canvas_heatmap(dfl_canvas *c, int x, int y, const float *v, int rows, int cols, int cell_w, int cell_h,
                        const dfl_norm *norm, dfl_cmap cmap, dfl_rgb nodata, dfl_rgb hatch)
{
    dfl_canvas_heatmap_box(c, x, y, cols * cell_w, rows * cell_h, v, rows, cols, norm, cmap, nodata, hatch);
}

void dfl_canvas_heatmap_box(dfl_canvas *c, int x, int y, int w, int h, const float *v, int rows, int cols,
                            const dfl_norm *norm, dfl_cmap cmap, dfl_rgb nodata, dfl_rgb hatch)
{
    if (rows < 1 || cols < 1 || w < 1 || h < 1) return;
    double cell_w = (double)w / cols, cell_h = (double)h / rows;
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, cols, rows);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        return;
    }
    uint32_t lut[256];
    for (int i = 0; i < 256; i++) {
        dfl_rgb k = dfl_cmap_entry(cmap, i);
        lut[i] = (uint32_t)k.r << 16 | (uint32_t)k.g << 8 | k.b;
    }
    uint32_t nd = (uint32_t)nodata.r << 16 | (uint32_t)nodata.g << 8 | nodata.b;
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    int any_nan = 0;
    /* img [rows][stride / 4] 0x00RRGGBB; rows are disjoint: shared among the threads */
#pragma omp parallel for schedule(static) reduction(| : any_nan) if ((int64_t)rows * cols >= 65536)
    for (int r = 0; r < rows; r++) {
        uint32_t *row = (uint32_t *)(void *)(data + (size_t)r * (size_t)stride);
        const float *src = v + (size_t)r * (size_t)cols;
        for (int k = 0; k < cols; k++) {
            if (isnan(src[k])) {
                row[k] = nd;
                any_nan = 1;
                continue;
            }
            double t = dfl_norm_apply(norm, src[k]);
            int i = t >= 1 ? 255 : (int)(t * 256.0);
            row[k] = lut[i < 0 ? 0 : i];
        }
    }
    cairo_surface_mark_dirty(img);
    cairo_t *cr = dfl__canvas_cr(c);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, cell_w, cell_h);
    cairo_set_source_surface(cr, img, 0, 0);
    /* paint, not fill: SVG gets a plain <image> under a transform, which viewers scale
     * with image-rendering honoured (a filled rectangle would become a <pattern>) */
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_paint(cr);
    cairo_restore(cr);
    if (any_nan) {
        /* no-data cells: one path of their runs */
        cairo_save(cr);
        for (int r = 0; r < rows; r++) {
            const float *src = v + (size_t)r * (size_t)cols;
            for (int k = 0; k < cols;) {
                if (!isnan(src[k])) {
                    k++;
                    continue;
                }
                int k0 = k;
                while (k < cols && isnan(src[k]))
                    k++;
                cairo_rectangle(cr, x + k0 * cell_w, y + r * cell_h, (k - k0) * cell_w, cell_h);
            }
        }
        /* filled with a repeating 8 x 8 tile of one diagonal stroke (a vector pattern
         * in SVG and PDF): an order of magnitude cheaper to render than stroking the
         * lines through a clip of a thousand runs */
        cairo_rectangle_t ext = {0, 0, 8, 8};
        cairo_surface_t *tile = cairo_recording_surface_create(CAIRO_CONTENT_COLOR_ALPHA, &ext);
        cairo_t *t = cairo_create(tile);
        dfl__set_rgb(t, hatch);
        cairo_set_line_width(t, 1.5);
        /* x + y = 8 and the corners of x + y = 0 and 16, so tiles join into stripes */
        cairo_move_to(t, -1, 9);
        cairo_line_to(t, 9, -1);
        cairo_move_to(t, -1, 1);
        cairo_line_to(t, 1, -1);
        cairo_move_to(t, 7, 9);
        cairo_line_to(t, 9, 7);
        cairo_stroke(t);
        cairo_destroy(t);
        cairo_pattern_t *pat = cairo_pattern_create_for_surface(tile);
        cairo_pattern_set_extend(pat, CAIRO_EXTEND_REPEAT);
        cairo_matrix_t m;
        cairo_matrix_init_translate(&m, -x, -y); /* stripes start at the map's corner */
        cairo_pattern_set_matrix(pat, &m);
        cairo_set_source(cr, pat);
        cairo_fill(cr);
        cairo_pattern_destroy(pat);
        cairo_surface_destroy(tile);
        cairo_restore(cr);
    }
    dfl__canvas_keep(c, img);
}

/* -------------------------------------------------------------- colour bar */

static int bar_ticks(const dfl_colorbar *cb, int bar_h, double *ticks, int cap)
{
    int scale = cb->scale > 0 ? cb->scale : 1;
    int max_ticks = bar_h / (2 * DFL_FONT_H * scale);
    if (max_ticks < 4) max_ticks = 4;
    if (max_ticks > 11) max_ticks = 11;
    /* a short bar may get a step so coarse that one tick is left (±0.45 with steps of
     * 0.5): allow finer steps until it has three */
    int n = dfl_ticks_for_norm(&cb->norm, max_ticks, ticks, cap);
    for (int m = max_ticks + 1; n < 3 && m <= 11; m++)
        n = dfl_ticks_for_norm(&cb->norm, m, ticks, cap);
    return n;
}

/* Widest line of a text that may contain '\n'; *lines gets the line count. */
static int multiline_width(const char *font, const char *s, int scale, int *lines)
{
    int w = 0, n = 0;
    char line[256];
    while (s && *s) {
        s = dfl__text_line(s, line, sizeof line);
        int lw = dfl_font_text_width(font, line, scale);
        if (lw > w) w = lw;
        n++;
    }
    if (lines) *lines = n;
    return w;
}

int dfl_colorbar_width(const dfl_colorbar *cb, int bar_w)
{
    int scale = cb->scale > 0 ? cb->scale : 1;
    double ticks[64];
    char buf[32];
    int lw = 0;
    /* the widest label of any bar height: the bar's height is not known yet */
    for (int h = 8 * DFL_FONT_H * scale; h <= 22 * DFL_FONT_H * scale; h += 2 * DFL_FONT_H * scale) {
        int n = bar_ticks(cb, h, ticks, 64);
        for (int i = 0; i < n; i++) {
            dfl_tick_label(ticks[i], buf, sizeof buf);
            int w = dfl_font_text_width(cb->font, buf, scale);
            if (w > lw) lw = w;
        }
    }
    int w = bar_w + 6 + lw;
    int tw = multiline_width(cb->font, cb->title, scale, NULL), nw = multiline_width(cb->font, cb->note, scale, NULL);
    if (tw > w) w = tw;
    if (nw > w) w = nw;
    return w;
}

int dfl_canvas_colorbar(dfl_canvas *c, int x, int y, int bar_w, int bar_h, const dfl_colorbar *cb)
{
    int scale = cb->scale > 0 ? cb->scale : 1;
    int fh = DFL_FONT_H * scale;
    /* the colours: the 256 table entries as a 1 x 256 image, top = entry 255, stretched
     * with nearest-neighbour filtering (row py shows entry floor(256 t), t its centre) */
    cairo_t *cr = dfl__canvas_cr(c);
    {
        cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 256);
        if (cairo_surface_status(img) == CAIRO_STATUS_SUCCESS) {
            unsigned char *data = cairo_image_surface_get_data(img);
            int stride = cairo_image_surface_get_stride(img);
            for (int i = 0; i < 256; i++) {
                dfl_rgb k = dfl_cmap_entry(cb->cmap, 255 - i);
                *(uint32_t *)(void *)(data + (size_t)i * (size_t)stride) =
                    (uint32_t)k.r << 16 | (uint32_t)k.g << 8 | k.b;
            }
            cairo_surface_mark_dirty(img);
            cairo_save(cr);
            cairo_translate(cr, x, y);
            cairo_scale(cr, bar_w, bar_h / 256.0);
            cairo_set_source_surface(cr, img, 0, 0);
            cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
            cairo_paint(cr);
            cairo_restore(cr);
        }
        cairo_surface_destroy(img);
    }
    dfl_canvas_frame(c, x - 1, y - 1, bar_w + 2, bar_h + 2, INK);
    /* extension triangles: values beyond this end were clipped to its colour */
    int th = bar_w * 3 / 4;
    for (int e = 0; e < 2; e++) {
        if (!(e ? cb->extend_low : cb->extend_high)) continue;
        double base = e ? y + bar_h + 1 : y - 1, tip = e ? base + th : base - th;
        cairo_move_to(cr, x - 0.5, base);
        cairo_line_to(cr, x + bar_w / 2.0, tip);
        cairo_line_to(cr, x + bar_w + 0.5, base);
        cairo_close_path(cr);
        dfl__set_rgb(cr, dfl_cmap_color(cb->cmap, e ? 0 : 1));
        cairo_fill_preserve(cr);
        dfl__set_rgb(cr, INK);
        cairo_set_line_width(cr, 1.0);
        cairo_stroke(cr);
    }
    /* ticks and labels */
    double ticks[64];
    int n = bar_ticks(cb, bar_h, ticks, 64);
    char buf[32];
    int last_label = -100000;
    for (int i = n - 1; i >= 0; i--) {
        double t = dfl_norm_apply(&cb->norm, ticks[i]);
        if (isnan(t)) continue;
        int py = y + (int)lround((1.0 - t) * (bar_h - 1));
        dfl_canvas_fill(c, x + bar_w, py, 4, 1, INK);
        if (py - last_label < fh + 2) continue; /* too close to the previous label */
        dfl_tick_label(ticks[i], buf, sizeof buf);
        dfl_canvas_text(c, x + bar_w + 6, py - fh / 2, buf, scale, INK, DFL_ALIGN_LEFT);
        last_label = py;
    }
    /* title above (clear of the triangle), note lines below */
    if (cb->title) dfl_canvas_text(c, x, y - th - 4 - fh, cb->title, scale, INK, DFL_ALIGN_LEFT);
    if (cb->note) dfl__canvas_text_lines(c, x, y + bar_h + th + 6, cb->note, scale, INK, fh + 2);
    return n;
}

/* ------------------------------------------------------------------ legend */

static void swatch(dfl_canvas *c, int x, int y, int s, const dfl_legend_item *it)
{
    dfl_canvas_fill(c, x, y, s, s, it->color);
    if (it->hatched) {
        cairo_t *cr = dfl__canvas_cr(c);
        cairo_save(cr);
        cairo_rectangle(cr, x, y, s, s);
        cairo_clip(cr);
        hatch_lines(cr, x, y, s, s, it->hatch_color);
        cairo_restore(cr);
    }
    dfl_canvas_frame(c, x, y, s, s, INK);
}

/* Walks the layout; draws when c is non-NULL. Returns the height; *w the width used. */
static int legend_walk(dfl_canvas *c, int x, int y, const dfl_legend_item *items, int n, int scale, int max_w,
                       dfl_rgb text, int *w_out)
{
    if (scale < 1) scale = 1;
    int fh = DFL_FONT_H * scale, s = fh, gap = 4 * scale, sep = 14 * scale;
    int cx = 0, cy = 0, wmax = 0;
    for (int i = 0; i < n; i++) {
        int iw =
            s + gap + (c ? dfl_canvas_text_width(c, items[i].label, scale) : dfl_text_width(items[i].label, scale));
        if (cx > 0 && cx + iw > max_w) {
            cx = 0;
            cy += fh + 6 * scale;
        }
        if (c) {
            swatch(c, x + cx, y + cy, s, &items[i]);
            dfl_canvas_text(c, x + cx + s + gap, y + cy, items[i].label, scale, text, DFL_ALIGN_LEFT);
        }
        if (cx + iw > wmax) wmax = cx + iw;
        cx += iw + sep;
    }
    if (w_out) *w_out = wmax;
    return n ? cy + fh : 0;
}

void dfl_legend_size(const dfl_legend_item *items, int n, int scale, int max_w, int *w, int *h)
{
    dfl_rgb k = {0, 0, 0};
    *h = legend_walk(NULL, 0, 0, items, n, scale, max_w, k, w);
}

int dfl_canvas_legend(dfl_canvas *c, int x, int y, const dfl_legend_item *items, int n, int scale, int max_w,
                      dfl_rgb text)
{
    return legend_walk(c, x, y, items, n, scale, max_w, text, NULL);
}
