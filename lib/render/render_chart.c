/* render_chart.c — chart pieces built on the canvas: heatmap tiles, a vertical colour
 * bar with ticks, and legends. Reused by every tool that draws figures. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "render/render_internal.h"

static const dfl_rgb INK = {0x22, 0x22, 0x22};

/* ---------------------------------------------------------------- heatmap */

/* No-data cells: diagonal stripes in canvas coordinates, so they line up across cells. */
static int hatched(int x, int y) { return ((x + y) % 8 + 8) % 8 < 2; }

void dfl_canvas_heatmap(dfl_canvas *c, int x, int y, const float *v, int rows, int cols, int cell_w, int cell_h,
                        const dfl_norm *norm, dfl_cmap cmap, dfl_rgb nodata, dfl_rgb hatch)
{
    dfl_rgb lut[256];
    for (int i = 0; i < 256; i++) lut[i] = dfl_cmap_entry(cmap, i);
    /* rows of cells cover disjoint pixel rows: shared among the threads */
#pragma omp parallel for schedule(static) if ((int64_t)rows * cols >= 65536)
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++) {
            float val = v[(size_t)r * (size_t)cols + (size_t)k];
            int px = x + k * cell_w, py = y + r * cell_h;
            if (isnan(val)) {
                for (int yy = py; yy < py + cell_h; yy++)
                    for (int xx = px; xx < px + cell_w; xx++)
                        dfl_canvas_set(c, xx, yy, hatched(xx, yy) ? hatch : nodata);
                continue;
            }
            double t = dfl_norm_apply(norm, val);
            int i = t >= 1 ? 255 : (int)(t * 256.0);
            dfl_canvas_fill(c, px, py, cell_w, cell_h, lut[i < 0 ? 0 : i]);
        }
}

/* -------------------------------------------------------------- colour bar */

static int bar_ticks(const dfl_colorbar *cb, int bar_h, double *ticks, int cap)
{
    int scale = cb->scale > 0 ? cb->scale : 1;
    int max_ticks = bar_h / (3 * DFL_FONT_H * scale);
    if (max_ticks < 2) max_ticks = 2;
    if (max_ticks > 11) max_ticks = 11;
    return dfl_ticks_for_norm(&cb->norm, max_ticks, ticks, cap);
}

/* Widest line of a text that may contain '\n'; *lines gets the line count. */
static int multiline_width(const char *s, int scale, int *lines)
{
    int w = 0, n = 0;
    char line[256];
    while (s && *s) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, s, len);
        line[len] = '\0';
        int lw = dfl_text_width(line, scale);
        if (lw > w) w = lw;
        n++;
        s = nl ? nl + 1 : s + len;
        if (!nl) break;
    }
    if (lines) *lines = n;
    return w;
}

int dfl_colorbar_width(const dfl_colorbar *cb, int bar_w)
{
    int scale = cb->scale > 0 ? cb->scale : 1;
    double ticks[64];
    int n = bar_ticks(cb, 400, ticks, 64), lw = 0;
    char buf[32];
    for (int i = 0; i < n; i++) {
        dfl_tick_label(ticks[i], buf, sizeof buf);
        int w = dfl_text_width(buf, scale);
        if (w > lw) lw = w;
    }
    int w = bar_w + 6 + lw;
    int tw = multiline_width(cb->title, scale, NULL), nw = multiline_width(cb->note, scale, NULL);
    if (tw > w) w = tw;
    if (nw > w) w = nw;
    return w;
}

int dfl_canvas_colorbar(dfl_canvas *c, int x, int y, int bar_w, int bar_h, const dfl_colorbar *cb)
{
    int scale = cb->scale > 0 ? cb->scale : 1;
    int fh = DFL_FONT_H * scale;
    /* the colours, top = 1 */
    for (int py = 0; py < bar_h; py++) {
        double t = 1.0 - (py + 0.5) / bar_h;
        dfl_canvas_fill(c, x, y + py, bar_w, 1, dfl_cmap_color(cb->cmap, t));
    }
    dfl_canvas_frame(c, x - 1, y - 1, bar_w + 2, bar_h + 2, INK);
    /* extension triangles: values beyond this end were clipped to its colour */
    int th = bar_w * 3 / 4;
    for (int k = 0; k < th; k++) {
        int half = (bar_w / 2) * (th - k) / th;
        if (cb->extend_high) {
            dfl_canvas_fill(c, x + bar_w / 2 - half, y - 2 - k, 2 * half, 1, dfl_cmap_color(cb->cmap, 1));
            dfl_canvas_set(c, x + bar_w / 2 - half - 1, y - 2 - k, INK);
            dfl_canvas_set(c, x + bar_w / 2 + half, y - 2 - k, INK);
        }
        if (cb->extend_low) {
            dfl_canvas_fill(c, x + bar_w / 2 - half, y + bar_h + 1 + k, 2 * half, 1, dfl_cmap_color(cb->cmap, 0));
            dfl_canvas_set(c, x + bar_w / 2 - half - 1, y + bar_h + 1 + k, INK);
            dfl_canvas_set(c, x + bar_w / 2 + half, y + bar_h + 1 + k, INK);
        }
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
    if (cb->note) {
        const char *s = cb->note;
        int ly = y + bar_h + th + 6;
        char line[256];
        while (*s) {
            const char *nl = strchr(s, '\n');
            size_t len = nl ? (size_t)(nl - s) : strlen(s);
            if (len >= sizeof line) len = sizeof line - 1;
            memcpy(line, s, len);
            line[len] = '\0';
            dfl_canvas_text(c, x, ly, line, scale, INK, DFL_ALIGN_LEFT);
            ly += fh + 2;
            if (!nl) break;
            s = nl + 1;
        }
    }
    return n;
}

/* ------------------------------------------------------------------ legend */

static void swatch(dfl_canvas *c, int x, int y, int s, const dfl_legend_item *it)
{
    if (it->hatched) {
        for (int yy = y; yy < y + s; yy++)
            for (int xx = x; xx < x + s; xx++) dfl_canvas_set(c, xx, yy, hatched(xx, yy) ? it->hatch_color : it->color);
    } else {
        dfl_canvas_fill(c, x, y, s, s, it->color);
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
        int iw = s + gap + dfl_text_width(items[i].label, scale);
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
