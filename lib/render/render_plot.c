/* render_plot.c — line and grouped bar charts (plot.h) drawn with render.h's canvas
 * (cairo paths, Pango text). Both charts share one frame: title, axes with ticks and labels, a
 * legend, a note; only the marks differ. Layout is computed in pixels from the font
 * scale so that text stays legible when a figure is shrunk to a paper column. */
#include "render/plot.h"
#include "render/render_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dfl_rgb WHITE = {255, 255, 255};
static const dfl_rgb INK = {30, 30, 30};
static const dfl_rgb AXIS = {70, 70, 70};
static const dfl_rgb GRID = {226, 226, 226};
static const dfl_rgb FRAME = {190, 190, 190};

#define MAX_TICKS 64
#define MAX_MINOR 256

/* Okabe & Ito's colour-blind-safe palette (Color Universal Design, 2008), yellow last
 * since it reads poorly on white. */
static const dfl_rgb okabe_ito[8] = {{0, 114, 178},   {230, 159, 0},  {0, 158, 115}, {213, 94, 0},
                                     {204, 121, 167}, {86, 180, 233}, {0, 0, 0},     {240, 228, 66}};

dfl_rgb dfl_plot_color(int i)
{
    if (i < 0) i = -i;
    return okabe_ito[i % 8];
}

dfl_line_chart dfl_line_chart_default(void)
{
    dfl_line_chart p;
    memset(&p, 0, sizeof p);
    p.grid = 1;
    return p;
}

dfl_bar_chart dfl_bar_chart_default(void)
{
    dfl_bar_chart p;
    memset(&p, 0, sizeof p);
    p.grid = 1;
    p.value_precision = 3;
    return p;
}

/* ------------------------------------------------------------------- axes */

/* A resolved axis: limits, major ticks with labels, minor ticks. */
typedef struct axis {
    int log;
    double lo, hi;
    double ticks[MAX_TICKS];
    char labels[MAX_TICKS][32];
    int nt;
    double minor[MAX_MINOR];
    int nminor;
} axis;

/* Replace a leading '-' by U+2212 so negative labels read as such. */
static void minus_sign(char *buf, size_t cap)
{
    if (buf[0] == '-' && strlen(buf) + 3 < cap) {
        memmove(buf + 3, buf + 1, strlen(buf));
        memcpy(buf, "\xe2\x88\x92", 3);
    }
}

/* A decade label: plain numbers from 0.001 to 10000, "1e5" style beyond. */
static void decade_label(int e, char *buf, size_t cap)
{
    if (e >= 0 && e <= 4)
        snprintf(buf, cap, "%.0f", pow(10, e));
    else if (e < 0 && e >= -3)
        snprintf(buf, cap, "%.*f", -e, pow(10, e));
    else
        snprintf(buf, cap, "1e%d", e);
}

/* A linear tick label with as many decimals as the step needs (0.25 -> 2). */
static void linear_label(double v, double step, char *buf, size_t cap)
{
    double a = fabs(v);
    if (v != 0 && (a >= 1e6 || a < 1e-4 || step < 1e-4)) {
        dfl_tick_label(v, buf, cap);
        return;
    }
    int dec = 0;
    while (dec < 8 && fabs(step * pow(10, dec) - round(step * pow(10, dec))) > 1e-6 * pow(10, dec))
        dec++;
    snprintf(buf, cap, "%.*f", dec, fabs(v) < step * 1e-9 ? 0.0 : v);
    minus_sign(buf, cap);
}

/* Resolve an axis from its spec and the data range [dlo, dhi] (NaN when no data).
 * pad: linear only, fraction of the range added on both sides before rounding out
 * (line charts' x axis), and whether the rounded limits may grow to whole ticks.
 * Returns 0 with msg filled for bad user limits. */
static int axis_resolve(const dfl_plot_axis *spec, double dlo, double dhi, int max_ticks, double pad, int round_out,
                        int include_zero, axis *a, char *msg, size_t cap)
{
    memset(a, 0, sizeof *a);
    a->log = spec->scale == DFL_SCALE_LOG;
    if (spec->has_min && !isfinite(spec->min)) return snprintf(msg, cap, "axis minimum is not finite"), 0;
    if (spec->has_max && !isfinite(spec->max)) return snprintf(msg, cap, "axis maximum is not finite"), 0;
    if (a->log && spec->has_min && spec->min <= 0)
        return snprintf(msg, cap, "log axis minimum %g is not positive", spec->min), 0;
    if (a->log && spec->has_max && spec->max <= 0)
        return snprintf(msg, cap, "log axis maximum %g is not positive", spec->max), 0;
    if (spec->has_min && spec->has_max && !(spec->min < spec->max))
        return snprintf(msg, cap, "axis minimum %g is not below maximum %g", spec->min, spec->max), 0;
    if (!(dlo <= dhi)) {
        /* no data: a unit range */
        dlo = a->log ? 1 : 0;
        dhi = a->log ? 10 : 1;
    }
    if (spec->has_min) dlo = spec->min;
    if (spec->has_max) dhi = spec->max;
    if (dlo > dhi) {
        double t = dlo;
        dlo = dhi;
        dhi = t;
    }
    if (a->log) {
        double l0 = log10(dlo), l1 = log10(dhi);
        /* whole decades unless fixed; a flat series gets one decade either side */
        a->lo = spec->has_min ? dlo : pow(10, floor(l0 + 1e-9));
        a->hi = spec->has_max ? dhi : pow(10, ceil(l1 - 1e-9));
        if (!(a->hi > a->lo)) {
            if (!spec->has_min) a->lo /= 10;
            if (!spec->has_max || !(a->hi > a->lo)) a->hi = a->lo * 100;
        }
        int e0 = (int)ceil(log10(a->lo) - 1e-9), e1 = (int)floor(log10(a->hi) + 1e-9);
        int every = 1;
        while ((e1 - e0) / every + 1 > max_ticks)
            every++;
        for (int e = e0; e <= e1 && a->nt < MAX_TICKS; e += every) {
            a->ticks[a->nt] = pow(10, e);
            decade_label(e, a->labels[a->nt], sizeof a->labels[0]);
            a->nt++;
        }
        /* minor ticks at 2..9 x decade when they stay distinguishable */
        if (every == 1 && e1 - e0 <= 8)
            for (int e = e0 - 1; e <= e1; e++)
                for (int m = 2; m <= 9 && a->nminor < MAX_MINOR; m++) {
                    double v = m * pow(10, e);
                    if (v > a->lo * (1 + 1e-9) && v < a->hi * (1 - 1e-9)) a->minor[a->nminor++] = v;
                }
        if (a->nt < 2) {
            /* less than two decades inside: label the range's ends as well */
            a->nt = 0;
            double vals[2] = {a->lo, a->hi};
            for (int i = 0; i < 2; i++) {
                a->ticks[a->nt] = vals[i];
                dfl_tick_label(vals[i], a->labels[a->nt], sizeof a->labels[0]);
                a->nt++;
            }
        }
        return 1;
    }
    if (include_zero && !spec->has_min && dlo > 0) dlo = 0;
    if (include_zero && !spec->has_max && dhi < 0) dhi = 0;
    if (dhi == dlo) {
        double d = dlo == 0 ? 1 : fabs(dlo) * 0.1;
        if (!spec->has_min) dlo -= d;
        if (!spec->has_max) dhi += d;
        if (dhi == dlo) dhi = dlo + 1;
    }
    double span = dhi - dlo;
    if (!spec->has_min && !(include_zero && dlo == 0)) dlo -= pad * span;
    if (!spec->has_max && !(include_zero && dhi == 0)) dhi += pad * span;
    double step;
    double tmp[MAX_TICKS];
    dfl_ticks_linear(dlo, dhi, max_ticks, tmp, MAX_TICKS, &step);
    if (spec->integer_ticks && step != floor(step)) step = step < 1 ? 1 : (step < 3 ? 2 : ceil(step));
    if (!(step > 0)) step = span > 0 ? span : 1;
    a->lo = dlo;
    a->hi = dhi;
    if (round_out) {
        if (!spec->has_min) a->lo = floor(dlo / step + 1e-9) * step;
        if (!spec->has_max) a->hi = ceil(dhi / step - 1e-9) * step;
    }
    for (double k = ceil(a->lo / step - 1e-9); a->nt < MAX_TICKS; k++) {
        double v = k * step;
        if (v > a->hi + step * 1e-9) break;
        a->ticks[a->nt] = fabs(v) < step * 1e-9 ? 0.0 : v;
        linear_label(a->ticks[a->nt], step, a->labels[a->nt], sizeof a->labels[0]);
        a->nt++;
    }
    return 1;
}

/* Position of v on an axis drawn from pixel p0 (at lo) to p1 (at hi); NaN when v
 * cannot be shown (NaN, or <= 0 on a log axis). */
static double axis_map(const axis *a, double v, double p0, double p1)
{
    double t;
    if (a->log) {
        if (!(v > 0)) return NAN;
        t = (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    } else {
        if (isnan(v)) return NAN;
        t = (v - a->lo) / (a->hi - a->lo);
    }
    return p0 + t * (p1 - p0);
}

static int max_label_width(const axis *a, const char *font, int fs)
{
    int w = 0;
    for (int i = 0; i < a->nt; i++) {
        int tw = dfl_font_text_width(font, a->labels[i], fs);
        if (tw > w) w = tw;
    }
    return w;
}

/* ------------------------------------------------------------------ marks */

/* A clip rectangle for marks (the plot area). */
typedef struct clip {
    int x0, y0, x1, y1; /* inclusive-exclusive */
} clip;

static dfl_dash stroke_dash(dfl_plot_dash d)
{
    return d == DFL_DASH_DASHED ? DFL_STROKE_DASHED : d == DFL_DASH_DOTTED ? DFL_STROKE_DOTTED : DFL_STROKE_SOLID;
}

/* A straight line of width w from (x0, y0) to (x1, y1), clipped to k. */
static void seg(dfl_canvas *c, const clip *k, double x0, double y0, double x1, double y1, double w, dfl_plot_dash dash,
                dfl_rgb col)
{
    double xs[2] = {x0, x1}, ys[2] = {y0, y1};
    dfl_canvas_polyline(c, xs, ys, 2, w, stroke_dash(dash), col, k->x0, k->y0, k->x1 - k->x0, k->y1 - k->y0);
}

/* A filled marker of radius r centred on (x, y), clipped to k (outline marks stroked). */
static void marker(dfl_canvas *c, const clip *k, double x, double y, double r, dfl_plot_marker m, dfl_rgb col)
{
    if (m == DFL_MARKER_NONE || m == DFL_MARKER_AUTO) return;
    cairo_t *cr = dfl__canvas_cr(c);
    cairo_save(cr);
    cairo_rectangle(cr, k->x0, k->y0, k->x1 - k->x0, k->y1 - k->y0);
    cairo_clip(cr);
    dfl__set_rgb(cr, col);
    double s = r * 0.85; /* a square reads larger than a circle of the same radius */
    switch (m) {
    case DFL_MARKER_CIRCLE: cairo_arc(cr, x, y, r, 0, 2 * M_PI); break;
    case DFL_MARKER_SQUARE: cairo_rectangle(cr, x - s, y - s, 2 * s, 2 * s); break;
    case DFL_MARKER_TRIANGLE:
        cairo_move_to(cr, x, y - r);
        cairo_line_to(cr, x + r, y + r * 0.8);
        cairo_line_to(cr, x - r, y + r * 0.8);
        cairo_close_path(cr);
        break;
    case DFL_MARKER_DIAMOND:
        cairo_move_to(cr, x, y - r * 1.1);
        cairo_line_to(cr, x + r * 0.8, y);
        cairo_line_to(cr, x, y + r * 1.1);
        cairo_line_to(cr, x - r * 0.8, y);
        cairo_close_path(cr);
        break;
    case DFL_MARKER_CROSS:
        cairo_move_to(cr, x - s, y - s);
        cairo_line_to(cr, x + s, y + s);
        cairo_move_to(cr, x - s, y + s);
        cairo_line_to(cr, x + s, y - s);
        break;
    case DFL_MARKER_PLUS:
        cairo_move_to(cr, x - r, y);
        cairo_line_to(cr, x + r, y);
        cairo_move_to(cr, x, y - r);
        cairo_line_to(cr, x, y + r);
        break;
    default: break;
    }
    if (m == DFL_MARKER_CROSS || m == DFL_MARKER_PLUS) {
        cairo_set_line_width(cr, r * 0.55);
        cairo_stroke(cr);
    } else {
        cairo_fill(cr);
    }
    cairo_restore(cr);
}

static dfl_plot_marker series_marker(const dfl_plot_series *s, int i)
{
    if (s->marker != DFL_MARKER_AUTO) return s->marker;
    static const dfl_plot_marker cycle[6] = {DFL_MARKER_CIRCLE,  DFL_MARKER_SQUARE, DFL_MARKER_TRIANGLE,
                                             DFL_MARKER_DIAMOND, DFL_MARKER_CROSS,  DFL_MARKER_PLUS};
    return cycle[i % 6];
}

/* ----------------------------------------------------------------- legend */

/* One legend entry: a line sample with a marker (line charts) or a swatch (bars). */
typedef struct entry {
    const char *label;
    dfl_rgb color;
    int bar;
    dfl_plot_marker marker;
    dfl_plot_dash dash;
    double line_width;
    const char *font; /* the chart's font family, for measuring */
} entry;

typedef struct legend_box {
    int w, h;
    int rows;
} legend_box;

static int sample_width(int fs)
{
    return 22 * fs;
}

/* Size of a vertical legend (one entry per line) with padding. */
static legend_box legend_vertical_size(const entry *e, int n, int fs)
{
    legend_box b = {0, 0, 0};
    int fh = DFL_FONT_H * fs, padd = 5 * fs;
    for (int i = 0; i < n; i++) {
        int w = sample_width(fs) + 4 * fs + dfl_font_text_width(e[i].font, e[i].label, fs);
        if (w > b.w) b.w = w;
    }
    b.rows = n;
    b.w += 2 * padd;
    b.h = n * (fh + 4 * fs) - 4 * fs + 2 * padd;
    return b;
}

static void legend_sample(dfl_canvas *c, int x, int y, int fs, const entry *e)
{
    int fh = DFL_FONT_H * fs, sw = sample_width(fs);
    clip all = {0, 0, c->w, c->h};
    double mr = 2.0 * fs + 1;
    if (e->bar) {
        int s = fh;
        dfl_canvas_fill(c, x + (sw - s) / 2, y, s, s, e->color);
        dfl_canvas_frame(c, x + (sw - s) / 2, y, s, s, AXIS);
        return;
    }
    if (e->dash != DFL_DASH_NONE) seg(c, &all, x, y + fh / 2.0, x + sw, y + fh / 2.0, e->line_width, e->dash, e->color);
    marker(c, &all, x + sw / 2.0, y + fh / 2.0, mr, e->marker, e->color);
}

/* A framed vertical legend with its top-left at (x, y). */
static void legend_draw_vertical(dfl_canvas *c, int x, int y, const entry *e, int n, int fs, int framed)
{
    legend_box b = legend_vertical_size(e, n, fs);
    int fh = DFL_FONT_H * fs, padd = 5 * fs;
    if (framed) {
        dfl_canvas_fill(c, x, y, b.w, b.h, WHITE);
        dfl_canvas_frame(c, x, y, b.w, b.h, FRAME);
    }
    for (int i = 0; i < n; i++) {
        int yy = y + padd + i * (fh + 4 * fs);
        legend_sample(c, x + padd, yy, fs, &e[i]);
        dfl_canvas_text(c, x + padd + sample_width(fs) + 4 * fs, yy, e[i].label, fs, INK, DFL_ALIGN_LEFT);
    }
}

/* A horizontal legend wrapped at max_w; draws when c is non-NULL; returns height. */
static int legend_horizontal(dfl_canvas *c, int x, int y, int max_w, const entry *e, int n, int fs)
{
    int fh = DFL_FONT_H * fs, cx = 0, cy = 0, sep = 12 * fs;
    for (int i = 0; i < n; i++) {
        int iw = sample_width(fs) + 4 * fs + dfl_font_text_width(e[i].font, e[i].label, fs);
        if (cx > 0 && cx + iw > max_w) {
            cx = 0;
            cy += fh + 4 * fs;
        }
        if (c) {
            legend_sample(c, x + cx, y + cy, fs, &e[i]);
            dfl_canvas_text(c, x + cx + sample_width(fs) + 4 * fs, y + cy, e[i].label, fs, INK, DFL_ALIGN_LEFT);
        }
        cx += iw + sep;
    }
    return n ? cy + fh : 0;
}

/* ------------------------------------------------------------------ frame */

/* What both charts share: text around the plot area, axes, legend placement. */
typedef struct frame {
    int fs;                 /* font scale */
    int x, y, w, h;         /* the region */
    int px0, py0, px1, py1; /* plot area, exclusive right/bottom */
    const char *title, *subtitle, *note, *x_label, *y_label;
    dfl_legend_pos legend;
    legend_box lb; /* vertical legend size */
    int below_h;   /* height of a legend below */
    int x_rotated; /* bar charts: group labels drawn vertically */
    int x_label_h; /* height of the x tick label band */
} frame;

static int count_lines(const char *s)
{
    int n = 1;
    for (; *s; s++)
        if (*s == '\n') n++;
    return n;
}

/* A frame over the region (x, y, w, h) with the chart's texts; font_scale 0 picks 2 for
 * regions 900 px wide or more, else 1. */
static frame frame_start(int x, int y, int w, int h, int font_scale, const char *title, const char *subtitle,
                         const char *note, const char *x_label, const char *y_label)
{
    frame f;
    memset(&f, 0, sizeof f);
    f.fs = font_scale > 0 ? font_scale : (w >= 900 ? 2 : 1);
    f.x = x, f.y = y, f.w = w, f.h = h;
    f.title = title, f.subtitle = subtitle, f.note = note;
    f.x_label = x_label, f.y_label = y_label;
    return f;
}

/* Place the plot area inside the region given the y tick label width and x band. */
static void frame_layout(frame *f, int ylab_w, int xband_h, int right_overhang, const entry *e, int n)
{
    int fs = f->fs, fh = DFL_FONT_H * fs, pad = 8 * fs, tick = 5 * fs;
    int tfs = fs >= 2 ? fs + 1 : fs;
    int top = f->y + pad, bottom = f->y + f->h - pad, left = f->x + pad, right = f->x + f->w - pad;
    if (f->title) top += DFL_FONT_H * tfs + 3 * fs;
    if (f->subtitle) top += fh + 3 * fs;
    if (f->title || f->subtitle) top += 4 * fs;
    if (f->note) bottom -= count_lines(f->note) * (fh + 2 * fs) + 3 * fs;
    if (f->legend == DFL_LEGEND_BELOW) {
        f->below_h = legend_horizontal(NULL, 0, 0, f->w - 2 * pad, e, n, fs);
        bottom -= f->below_h + 4 * fs;
    }
    if (f->x_label) bottom -= fh + 4 * fs;
    bottom -= xband_h + tick + 3 * fs;
    if (f->y_label) left += fh + 5 * fs;
    left += ylab_w + tick + 3 * fs;
    right -= right_overhang;
    if (f->legend == DFL_LEGEND_RIGHT) right -= f->lb.w + 2 * pad;
    top += fh / 2; /* room for the top tick label's upper half */
    f->px0 = left;
    f->py0 = top;
    f->px1 = right;
    f->py1 = bottom;
    f->x_label_h = xband_h;
}

/* Title, subtitle, axis labels, note; the plot area's frame. */
static void frame_text(dfl_canvas *c, const frame *f)
{
    int fs = f->fs, fh = DFL_FONT_H * fs, pad = 8 * fs, tick = 5 * fs;
    int tfs = fs >= 2 ? fs + 1 : fs;
    int cx = (f->px0 + f->px1) / 2, y = f->y + pad;
    char line[512];
    if (f->title) {
        dfl_text_clip(line, sizeof line, f->title, (size_t)(f->w / (DFL_FONT_W * tfs)));
        dfl_canvas_text(c, f->x + f->w / 2, y, line, tfs, INK, DFL_ALIGN_CENTER);
        y += DFL_FONT_H * tfs + 3 * fs;
    }
    if (f->subtitle) {
        dfl_text_clip(line, sizeof line, f->subtitle, (size_t)(f->w / (DFL_FONT_W * fs)));
        dfl_canvas_text(c, f->x + f->w / 2, y, line, fs, AXIS, DFL_ALIGN_CENTER);
    }
    int yb = f->py1 + tick + 3 * fs + f->x_label_h + 4 * fs;
    if (f->x_label) {
        dfl_canvas_text(c, cx, yb, f->x_label, fs, INK, DFL_ALIGN_CENTER);
        yb += fh + 4 * fs;
    }
    if (f->y_label) dfl_canvas_text_up(c, f->x + pad, (f->py0 + f->py1) / 2, f->y_label, fs, INK, DFL_ALIGN_CENTER);
    if (f->note)
        dfl__canvas_text_lines(c, f->x + pad, f->y + f->h - pad - count_lines(f->note) * (fh + 2 * fs), f->note, fs,
                               AXIS, fh + 2 * fs);
}

/* y axis: grid, ticks (major and minor) and labels on the left of the plot area. */
static void draw_y_axis(dfl_canvas *c, const frame *f, const axis *ya, int grid)
{
    int fs = f->fs, fh = DFL_FONT_H * fs, tick = 5 * fs;
    for (int i = 0; i < ya->nt; i++) {
        double p = axis_map(ya, ya->ticks[i], f->py1 - 1, f->py0);
        if (isnan(p)) continue;
        int yy = (int)lround(p);
        if (grid) dfl_canvas_fill(c, f->px0 + 1, yy, f->px1 - f->px0 - 2, fs > 1 ? 2 : 1, GRID);
        dfl_canvas_fill(c, f->px0 - tick, yy, tick, fs > 1 ? 2 : 1, AXIS);
        dfl_canvas_text(c, f->px0 - tick - 3 * fs, yy - fh / 2, ya->labels[i], fs, INK, DFL_ALIGN_RIGHT);
    }
    for (int i = 0; i < ya->nminor; i++) {
        int yy = (int)lround(axis_map(ya, ya->minor[i], f->py1 - 1, f->py0));
        dfl_canvas_fill(c, f->px0 - tick / 2 - 1, yy, tick / 2 + 1, 1, AXIS);
    }
}

static void draw_plot_frame(dfl_canvas *c, const frame *f)
{
    int t = f->fs > 1 ? 2 : 1;
    dfl_canvas_fill(c, f->px0 - t, f->py0, t, f->py1 - f->py0 + t, AXIS);     /* left */
    dfl_canvas_fill(c, f->px0 - t, f->py1, f->px1 - f->px0 + 2 * t, t, AXIS); /* bottom */
    dfl_canvas_fill(c, f->px0, f->py0 - 1, f->px1 - f->px0, 1, FRAME);        /* top */
    dfl_canvas_fill(c, f->px1, f->py0 - 1, 1, f->py1 - f->py0 + 1, FRAME);    /* right */
}

/* Rectangle of an inside legend in corner pos. */
static void inside_rect(const frame *f, dfl_legend_pos pos, int *x, int *y)
{
    int m = 6 * f->fs;
    int left = pos == DFL_LEGEND_INSIDE_TL || pos == DFL_LEGEND_INSIDE_BL;
    int top = pos == DFL_LEGEND_INSIDE_TL || pos == DFL_LEGEND_INSIDE_TR;
    *x = left ? f->px0 + m : f->px1 - m - f->lb.w;
    *y = top ? f->py0 + m : f->py1 - m - f->lb.h;
}

static void draw_legend(dfl_canvas *c, const frame *f, const entry *e, int n)
{
    if (!n || f->legend == DFL_LEGEND_OFF) return;
    int fs = f->fs, pad = 8 * fs;
    if (f->legend == DFL_LEGEND_RIGHT) {
        legend_draw_vertical(c, f->px1 + pad + 2 * fs, f->py0, e, n, fs, 0);
    } else if (f->legend == DFL_LEGEND_BELOW) {
        int y = f->y + f->h - pad - f->below_h;
        if (f->note) y -= count_lines(f->note) * (DFL_FONT_H * fs + 2 * fs) + 3 * fs;
        legend_horizontal(c, f->x + pad, y, f->w - 2 * pad, e, n, fs);
    } else {
        int x, y;
        inside_rect(f, f->legend, &x, &y);
        legend_draw_vertical(c, x, y, e, n, fs, 1);
    }
}

/* ------------------------------------------------------------- line chart */

/* The data range of the series on each axis (positive values only on log axes). */
static void line_ranges(const dfl_line_chart *p, double *xlo, double *xhi, double *ylo, double *yhi)
{
    *xlo = *ylo = INFINITY;
    *xhi = *yhi = -INFINITY;
    int xlog = p->x.scale == DFL_SCALE_LOG, ylog = p->y.scale == DFL_SCALE_LOG;
    for (int s = 0; s < p->n_series; s++) {
        const dfl_plot_series *se = &p->series[s];
        for (int i = 0; i < se->n; i++) {
            double x = se->x ? se->x[i] : i, y = se->y[i];
            if (!isfinite(x) || !isfinite(y) || (xlog && x <= 0) || (ylog && y <= 0)) continue;
            if (x < *xlo) *xlo = x;
            if (x > *xhi) *xhi = x;
            if (y < *ylo) *ylo = y;
            if (y > *yhi) *yhi = y;
        }
    }
    if (!(*xlo <= *xhi)) *xlo = *xhi = NAN;
    if (!(*ylo <= *yhi)) *ylo = *yhi = NAN;
}

static dfl_status line_check(const dfl_line_chart *p, dfl_error *err)
{
    if (!p->series || p->n_series < 1 || p->n_series > DFL_PLOT_MAX_SERIES)
        return dfl__fail(err, DFL_ERR_USAGE, "line chart: %d series (1 to %d allowed)", p->n_series,
                         DFL_PLOT_MAX_SERIES);
    for (int s = 0; s < p->n_series; s++) {
        const dfl_plot_series *se = &p->series[s];
        if (se->n < 0 || (se->n > 0 && !se->y))
            return dfl__fail(err, DFL_ERR_USAGE, "line chart: series %d has %d points and %s y", s, se->n,
                             se->y ? "some" : "no");
        if (se->x)
            for (int i = 0; i < se->n; i++)
                if (!isfinite(se->x[i]))
                    return dfl__fail(err, DFL_ERR_USAGE, "line chart: series %d: x[%d] is not finite", s, i);
    }
    if (p->x.n_tick_labels < 0 || (p->x.n_tick_labels > 0 && !p->x.tick_labels))
        return dfl__fail(err, DFL_ERR_USAGE, "line chart: x tick labels missing");
    return DFL_OK;
}

/* Count data points inside rectangle (x, y, w, h) (pixels) for legend placement. */
static int points_inside(const dfl_line_chart *p, const frame *f, const axis *xa, const axis *ya, int x, int y, int w,
                         int h)
{
    int n = 0;
    for (int s = 0; s < p->n_series; s++) {
        const dfl_plot_series *se = &p->series[s];
        double lx = NAN, ly = NAN;
        for (int i = 0; i < se->n; i++) {
            double px = axis_map(xa, se->x ? se->x[i] : i, f->px0, f->px1 - 1);
            double py = axis_map(ya, se->y[i], f->py1 - 1, f->py0);
            if (isnan(px) || isnan(py)) {
                lx = ly = NAN;
                continue;
            }
            /* sample the segment from the previous point too: lines crossing the box count */
            int steps = isnan(lx) ? 1 : 8;
            for (int k = 1; k <= steps; k++) {
                double t = (double)k / steps;
                double qx = isnan(lx) ? px : lx + t * (px - lx), qy = isnan(ly) ? py : ly + t * (py - ly);
                if (qx >= x - 4 && qx < x + w + 4 && qy >= y - 4 && qy < y + h + 4) n++;
            }
            lx = px;
            ly = py;
        }
    }
    return n;
}

/* Legend entries of the labelled series into ents; returns how many. */
static int line_entries(const dfl_line_chart *p, const char *font, int fs, entry *ents)
{
    int ne = 0;
    for (int s = 0; s < p->n_series; s++) {
        const dfl_plot_series *se = &p->series[s];
        if (!se->label) continue;
        entry *e = &ents[ne++];
        e->font = font;
        e->label = se->label;
        e->color = se->has_color ? se->color : dfl_plot_color(s);
        e->bar = 0;
        e->marker = series_marker(se, s);
        e->dash = se->dash;
        e->line_width = se->line_width > 0 ? se->line_width : 1.5 * fs;
    }
    return ne;
}

/* Both axes of a w x h line chart, ticks spaced for the region; categorical x axes
 * label integer positions with the given strings. */
static dfl_status line_axes(const dfl_line_chart *p, int w, int h, int fs, axis *xa, axis *ya, dfl_error *err)
{
    int fh = DFL_FONT_H * fs;
    double xlo, xhi, ylo, yhi;
    line_ranges(p, &xlo, &xhi, &ylo, &yhi);
    char msg[200];
    int est_h = h - 12 * fh, est_w = w - 20 * 6 * fs;
    int ymax_t = est_h / (3 * fh), xmax_t = est_w / (6 * DFL_FONT_W * fs);
    if (ymax_t < 3) ymax_t = 3;
    if (ymax_t > 10) ymax_t = 10;
    if (xmax_t < 3) xmax_t = 3;
    if (xmax_t > 12) xmax_t = 12;
    if (!axis_resolve(&p->y, ylo, yhi, ymax_t, 0.04, 1, 0, ya, msg, sizeof msg))
        return dfl__fail(err, DFL_ERR_USAGE, "line chart: y %s", msg);
    int categorical = p->x.n_tick_labels > 0;
    dfl_plot_axis xs = p->x;
    if (categorical) xs.integer_ticks = 1;
    /* x: a little room on both sides so end markers do not sit on the frame */
    if (!axis_resolve(&xs, xlo, xhi, xmax_t, 0.04, 0, 0, xa, msg, sizeof msg))
        return dfl__fail(err, DFL_ERR_USAGE, "line chart: x %s", msg);
    if (categorical) {
        for (int i = 0; i < xa->nt; i++) {
            double v = xa->ticks[i];
            long k = lround(v);
            if (fabs(v - k) < 1e-9 && k >= 0 && k < p->x.n_tick_labels)
                dfl_text_clip(xa->labels[i], sizeof xa->labels[0], p->x.tick_labels[k], 12);
            else
                xa->labels[i][0] = '\0';
        }
    }
    return DFL_OK;
}

/* DFL_LEGEND_AUTO: the inside corner covering the fewest points; outside right if all
 * are busy, below when right leaves the plot too narrow. */
static void line_place_legend(const dfl_line_chart *p, frame *f, const axis *xa, const axis *ya, int ylab_w, int over,
                              const entry *ents, int ne)
{
    static const dfl_legend_pos corners[4] = {DFL_LEGEND_INSIDE_TR, DFL_LEGEND_INSIDE_TL, DFL_LEGEND_INSIDE_BR,
                                              DFL_LEGEND_INSIDE_BL};
    int fh = DFL_FONT_H * f->fs;
    int best = -1, best_n = 0;
    for (int i = 0; i < 4; i++) {
        int lx, ly;
        f->legend = corners[i];
        inside_rect(f, corners[i], &lx, &ly);
        int n = points_inside(p, f, xa, ya, lx, ly, f->lb.w, f->lb.h);
        if (best < 0 || n < best_n) best = i, best_n = n;
    }
    if (best_n == 0 && f->lb.w < (f->px1 - f->px0) / 2 && f->lb.h < (f->py1 - f->py0) / 2) {
        f->legend = corners[best];
        return;
    }
    f->legend = DFL_LEGEND_RIGHT;
    frame_layout(f, ylab_w, fh, over, ents, ne);
    if (f->px1 - f->px0 < 40) {
        f->legend = DFL_LEGEND_BELOW;
        frame_layout(f, ylab_w, fh, over, ents, ne);
    }
}

/* x axis of a line chart: grid lines, ticks and labels below the plot area. */
static void line_x_axis(dfl_canvas *c, const frame *f, const axis *xa, int grid)
{
    int fs = f->fs, tick = 5 * fs;
    for (int i = 0; i < xa->nt; i++) {
        double px = axis_map(xa, xa->ticks[i], f->px0, f->px1 - 1);
        int xx = (int)lround(px);
        if (grid) dfl_canvas_fill(c, xx, f->py0, fs > 1 ? 2 : 1, f->py1 - f->py0, GRID);
        dfl_canvas_fill(c, xx, f->py1, fs > 1 ? 2 : 1, tick, AXIS);
        dfl_canvas_text(c, xx, f->py1 + tick + 3 * fs, xa->labels[i], fs, INK, DFL_ALIGN_CENTER);
    }
    for (int i = 0; i < xa->nminor; i++) {
        int xx = (int)lround(axis_map(xa, xa->minor[i], f->px0, f->px1 - 1));
        dfl_canvas_fill(c, xx, f->py1, 1, tick / 2 + 1, AXIS);
    }
}

/* Series s: its line (when dashed or solid) and its markers, clipped to the plot area.
 * DFL_ERR_NOMEM. */
static dfl_status line_series(dfl_canvas *c, const dfl_line_chart *p, int s, const frame *f, const axis *xa,
                              const axis *ya, dfl_error *err)
{
    const dfl_plot_series *se = &p->series[s];
    clip k = {f->px0, f->py0, f->px1, f->py1};
    int mr = 2 * f->fs + 1;
    dfl_rgb col = se->has_color ? se->color : dfl_plot_color(s);
    double lw = se->line_width > 0 ? se->line_width : 1.5 * f->fs;
    if (se->dash != DFL_DASH_NONE && se->n > 0) {
        /* one path per series: dashes run on across points; NaN or log <= 0 is a gap */
        double *xy = dfl__alloc_array((size_t)se->n * 2, sizeof *xy); /* [2][n] x then y */
        if (!xy) return dfl__fail(err, DFL_ERR_NOMEM, "line chart: out of memory");
        for (int i = 0; i < se->n; i++) {
            xy[i] = axis_map(xa, se->x ? se->x[i] : i, f->px0, f->px1 - 1);
            xy[se->n + i] = axis_map(ya, se->y[i], f->py1 - 1, f->py0);
        }
        dfl_canvas_polyline(c, xy, xy + se->n, se->n, lw, stroke_dash(se->dash), col, k.x0, k.y0, k.x1 - k.x0,
                            k.y1 - k.y0);
        free(xy);
    }
    dfl_plot_marker m = series_marker(se, s);
    /* markers thin out on long series so that they do not merge into a band */
    int every = se->n > 0 ? 1 + se->n / ((f->px1 - f->px0) / (3 * mr + 2) + 1) : 1;
    for (int i = 0; i < se->n; i += every) {
        double px = axis_map(xa, se->x ? se->x[i] : i, f->px0, f->px1 - 1);
        double py = axis_map(ya, se->y[i], f->py1 - 1, f->py0);
        if (isfinite(px) && isfinite(py)) marker(c, &k, px, py, mr, m, col);
    }
    return DFL_OK;
}

dfl_status dfl_plot_line_draw(dfl_canvas *c, int x, int y, int w, int h, const dfl_line_chart *p, dfl_error *err)
{
    dfl_status st = line_check(p, err);
    if (st) return st;
    frame f = frame_start(x, y, w, h, p->font_scale, p->title, p->subtitle, p->note, p->x.label, p->y.label);
    const char *font = p->font ? p->font : c->impl->font;
    int fs = f.fs, fh = DFL_FONT_H * fs;

    entry ents[DFL_PLOT_MAX_SERIES];
    memset(ents, 0, sizeof ents);
    int ne = line_entries(p, font, fs, ents);
    f.lb = legend_vertical_size(ents, ne, fs);
    f.legend = ne ? p->legend : DFL_LEGEND_OFF;
    if (f.legend == DFL_LEGEND_AUTO && ne > 6) f.legend = DFL_LEGEND_RIGHT;

    axis xa, ya;
    if ((st = line_axes(p, w, h, fs, &xa, &ya, err))) return st;
    int ylab_w = max_label_width(&ya, font, fs);
    int over = max_label_width(&xa, font, fs) / 2;
    frame_layout(&f, ylab_w, fh, over, ents, ne);
    if (f.px1 - f.px0 < 40 || f.py1 - f.py0 < 40)
        return dfl__fail(err, DFL_ERR_USAGE, "line chart: a %d x %d region is too small for the plot (font scale %d)",
                         w, h, fs);
    if (f.legend == DFL_LEGEND_AUTO) line_place_legend(p, &f, &xa, &ya, ylab_w, over, ents, ne);
    if (f.px1 - f.px0 < 40 || f.py1 - f.py0 < 40)
        return dfl__fail(err, DFL_ERR_USAGE, "line chart: a %d x %d region is too small for the plot and legend", w, h);

    /* ---- draw (in the chart's font; the canvas's own is restored after) */
    char *saved_font = p->font ? strdup(c->impl->font) : NULL;
    if (p->font) dfl_canvas_set_font(c, p->font);
    dfl_canvas_fill(c, x, y, w, h, WHITE);
    frame_text(c, &f);
    draw_y_axis(c, &f, &ya, p->grid);
    line_x_axis(c, &f, &xa, p->grid);
    draw_plot_frame(c, &f);
    for (int s = 0; !st && s < p->n_series; s++)
        st = line_series(c, p, s, &f, &xa, &ya, err);
    if (!st) draw_legend(c, &f, ents, ne);
    if (saved_font) dfl_canvas_set_font(c, saved_font);
    free(saved_font);
    return st;
}

/* -------------------------------------------------------------- bar chart */

static dfl_status bar_check(const dfl_bar_chart *p, dfl_error *err)
{
    if (p->n_series < 1 || p->n_series > DFL_PLOT_MAX_SERIES)
        return dfl__fail(err, DFL_ERR_USAGE, "bar chart: %d series (1 to %d allowed)", p->n_series,
                         DFL_PLOT_MAX_SERIES);
    if (p->n_groups < 1 || !p->values)
        return dfl__fail(err, DFL_ERR_USAGE, "bar chart: %d groups%s", p->n_groups, p->values ? "" : ", no values");
    if (p->n_groups > 4096) return dfl__fail(err, DFL_ERR_USAGE, "bar chart: %d groups (at most 4096)", p->n_groups);
    if (p->value_precision < 0 || p->value_precision > 17)
        return dfl__fail(err, DFL_ERR_USAGE, "bar chart: value precision %d not in 0..17", p->value_precision);
    return DFL_OK;
}

/* Legend entries of the named series into ents; returns how many. */
static int bar_entries(const dfl_bar_chart *p, const char *font, entry *ents)
{
    int ne = 0;
    for (int s = 0; s < p->n_series; s++) {
        if (!p->series || !p->series[s]) continue;
        entry *e = &ents[ne++];
        e->font = font;
        e->label = p->series[s];
        e->color = p->colors ? p->colors[s] : dfl_plot_color(s);
        e->bar = 1;
    }
    return ne;
}

/* The value axis of an h units tall bar chart: the values' range, error bars included,
 * with headroom for value labels. */
static dfl_status bar_value_axis(const dfl_bar_chart *p, int h, int fs, axis *ya, dfl_error *err)
{
    int fh = DFL_FONT_H * fs, ylog = p->y.scale == DFL_SCALE_LOG;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < p->n_groups * p->n_series; i++) {
        double v = p->values[i], e = p->errors && isfinite(p->errors[i]) ? fabs(p->errors[i]) : 0;
        if (!isfinite(v) || (ylog && v <= 0)) continue;
        double a = v - e, b = v + e;
        if (ylog && a <= 0) a = v;
        if (a < lo) lo = a;
        if (b > hi) hi = b;
    }
    if (!(lo <= hi)) lo = hi = NAN;
    if (p->value_labels && isfinite(hi) && !ylog) hi += (hi - (lo < 0 ? lo : 0)) * 0.06;
    char msg[200];
    int ymax_t = (h - 14 * fh) / (3 * fh);
    if (ymax_t < 3) ymax_t = 3;
    if (ymax_t > 10) ymax_t = 10;
    if (!axis_resolve(&p->y, lo, hi, ymax_t, 0.0, 1, 1, ya, msg, sizeof msg))
        return dfl__fail(err, DFL_ERR_USAGE, "bar chart: value axis %s", msg);
    return DFL_OK;
}

/* Whether a legend at inside corner pos would cover a bar, its error bar or its label. */
static int bar_corner_busy(const dfl_bar_chart *p, const frame *f, const axis *ya, dfl_legend_pos pos)
{
    int G = p->n_groups, S = p->n_series, fh = DFL_FONT_H * f->fs;
    int lx, ly;
    inside_rect(f, pos, &lx, &ly);
    double gw = (double)(f->px1 - f->px0) / G;
    for (int g = 0; g < G; g++)
        for (int s = 0; s < S; s++) {
            double v = p->values[g * S + s];
            double e = p->errors && isfinite(p->errors[g * S + s]) ? fabs(p->errors[g * S + s]) : 0;
            double top = axis_map(ya, v + e, f->py1 - 1, f->py0);
            double bx0 = f->px0 + g * gw, bx1 = bx0 + gw;
            if (isfinite(top) && bx1 > lx && bx0 < lx + f->lb.w && top - (p->value_labels ? fh : 0) < ly + f->lb.h)
                return 1;
        }
    return 0;
}

/* Place the plot area: group labels horizontal if they fit their slot, else vertical;
 * DFL_LEGEND_AUTO becomes the inside corner no bar reaches, else outside right (below
 * when right leaves the plot too narrow). */
static void bar_layout(const dfl_bar_chart *p, const char *font, frame *f, const axis *ya, int ylab_w,
                       const entry *ents, int ne)
{
    int fs = f->fs, fh = DFL_FONT_H * fs, G = p->n_groups;
    int glab_w = 0;
    for (int g = 0; g < G; g++) {
        int tw = p->groups && p->groups[g] ? dfl_font_text_width(font, p->groups[g], fs) : 0;
        if (tw > glab_w) glab_w = tw;
    }
    frame_layout(f, ylab_w, fh, 0, ents, ne);
    int slot = (f->px1 - f->px0) / G;
    if (glab_w > slot - 4 * fs) {
        f->x_rotated = 1;
        int band = glab_w < 30 * DFL_FONT_W * fs ? glab_w : 30 * DFL_FONT_W * fs;
        frame_layout(f, ylab_w, band, 0, ents, ne);
    }
    if (f->legend != DFL_LEGEND_AUTO) return;
    static const dfl_legend_pos corners[2] = {DFL_LEGEND_INSIDE_TR, DFL_LEGEND_INSIDE_TL};
    for (int ci = 0; ci < 2; ci++)
        if (!bar_corner_busy(p, f, ya, corners[ci])) {
            f->legend = corners[ci];
            return;
        }
    f->legend = DFL_LEGEND_RIGHT;
    frame_layout(f, ylab_w, f->x_rotated ? f->x_label_h : fh, 0, ents, ne);
    if (f->px1 - f->px0 < 40 * fs) {
        f->legend = DFL_LEGEND_BELOW;
        frame_layout(f, ylab_w, f->x_rotated ? f->x_label_h : fh, 0, ents, ne);
    }
}

/* Where the bars of a chart go: group width gw, bar width bw, the baseline's y. */
typedef struct bar_geom {
    double gw, bw, base;
    int ylog;
} bar_geom;

/* Bar s of group g: the bar from the baseline, its error bar and its value label. */
static void bar_one(dfl_canvas *c, const dfl_bar_chart *p, const frame *f, const axis *ya, const bar_geom *bg,
                    const char *font, int g, int s)
{
    int fs = f->fs, S = p->n_series, vfs = fs;
    clip k = {f->px0, f->py0, f->px1, f->py1};
    double gx = f->px0 + g * bg->gw, bw = bg->bw, base = bg->base;
    double v = p->values[g * S + s];
    double top = axis_map(ya, v, f->py1 - 1, f->py0);
    if (!isfinite(top)) return;
    int bx0 = (int)lround(gx + bg->gw * 0.1 + s * bw), bx1 = (int)lround(gx + bg->gw * 0.1 + (s + 1) * bw);
    if (bx1 - bx0 > 2 && S > 1) bx1 -= 1; /* a hairline between neighbours */
    double y0 = top < base ? top : base, y1 = top < base ? base : top;
    int iy0 = (int)lround(y0), iy1 = (int)lround(y1);
    if (iy0 < k.y0) iy0 = k.y0;
    if (iy1 > k.y1) iy1 = k.y1;
    dfl_rgb col = p->colors ? p->colors[s] : dfl_plot_color(s);
    if (iy1 - iy0 < 1) iy1 = iy0 + 1;
    dfl_canvas_fill(c, bx0, iy0, bx1 - bx0, iy1 - iy0, col);
    int cx = (bx0 + bx1) / 2;
    double e = p->errors ? p->errors[g * S + s] : NAN;
    double etop = top;
    if (isfinite(e) && e != 0) {
        double a = axis_map(ya, v - fabs(e), f->py1 - 1, f->py0), b = axis_map(ya, v + fabs(e), f->py1 - 1, f->py0);
        if (!isfinite(a)) a = f->py1 - 1;
        if (isfinite(b)) {
            int cap = (bx1 - bx0) / 4 > 2 * fs ? (bx1 - bx0) / 4 : 2 * fs;
            double ew = fs > 1 ? 2 : 1;
            seg(c, &k, cx + 0.5, a, cx + 0.5, b, ew, DFL_DASH_SOLID, INK);
            seg(c, &k, cx - cap, b, cx + cap + 1, b, ew, DFL_DASH_SOLID, INK);
            seg(c, &k, cx - cap, a, cx + cap + 1, a, ew, DFL_DASH_SOLID, INK);
            etop = b < top ? b : top;
        }
    }
    if (!p->value_labels) return;
    char lab[64];
    snprintf(lab, sizeof lab, "%.*g", p->value_precision > 0 ? p->value_precision : 1, v);
    minus_sign(lab, sizeof lab);
    int lw = dfl_font_text_width(font, lab, vfs);
    int ly = (int)lround(v >= 0 || bg->ylog ? etop : y1 + 2) - DFL_FONT_H * vfs - 2;
    if (v < 0 && !bg->ylog) ly = (int)lround(y1) + 2;
    if (lw <= (int)(bw * 1.6) + 2 * fs)
        dfl_canvas_text(c, cx, ly, lab, vfs, INK, DFL_ALIGN_CENTER);
    else if (bw >= DFL_FONT_H * vfs + 2)
        dfl_canvas_text_up(c, cx - DFL_FONT_H * vfs / 2, ly + DFL_FONT_H * vfs, lab, vfs, INK, DFL_ALIGN_LEFT);
}

/* Group g's label under the plot area and its tick. */
static void bar_group_label(dfl_canvas *c, const dfl_bar_chart *p, const frame *f, const bar_geom *bg, int g)
{
    int fs = f->fs, fh = DFL_FONT_H * fs, tick = 5 * fs;
    int gcx = (int)lround(f->px0 + g * bg->gw + bg->gw / 2);
    if (p->groups && p->groups[g]) {
        if (f->x_rotated) {
            char clipped[256];
            dfl_text_clip(clipped, sizeof clipped, p->groups[g], (size_t)(f->x_label_h / (DFL_FONT_W * fs)));
            dfl_canvas_text_up(c, gcx - fh / 2, f->py1 + tick + 3 * fs, clipped, fs, INK, DFL_ALIGN_RIGHT);
        } else
            dfl_canvas_text(c, gcx, f->py1 + tick + 3 * fs, p->groups[g], fs, INK, DFL_ALIGN_CENTER);
    }
    dfl_canvas_fill(c, gcx, f->py1, fs > 1 ? 2 : 1, tick, AXIS);
}

dfl_status dfl_plot_bar_draw(dfl_canvas *c, int x, int y, int w, int h, const dfl_bar_chart *p, dfl_error *err)
{
    dfl_status st = bar_check(p, err);
    if (st) return st;
    frame f = frame_start(x, y, w, h, p->font_scale, p->title, p->subtitle, p->note, p->x_label, p->y.label);
    const char *font = p->font ? p->font : c->impl->font;
    int fs = f.fs, G = p->n_groups, S = p->n_series;

    entry ents[DFL_PLOT_MAX_SERIES];
    memset(ents, 0, sizeof ents);
    int ne = bar_entries(p, font, ents);
    f.lb = legend_vertical_size(ents, ne, fs);
    f.legend = ne ? p->legend : DFL_LEGEND_OFF;
    if (f.legend == DFL_LEGEND_AUTO && ne > 6) f.legend = DFL_LEGEND_RIGHT;
    axis ya;
    if ((st = bar_value_axis(p, h, fs, &ya, err))) return st;
    bar_layout(p, font, &f, &ya, max_label_width(&ya, font, fs), ents, ne);
    if (f.px1 - f.px0 < 40 || f.py1 - f.py0 < 40 || (f.px1 - f.px0) / G < 2)
        return dfl__fail(err, DFL_ERR_USAGE, "bar chart: a %d x %d region is too small for %d groups (font scale %d)",
                         w, h, G, fs);

    /* ---- draw (in the chart's font; the canvas's own is restored after) */
    char *saved_font = p->font ? strdup(c->impl->font) : NULL;
    if (p->font) dfl_canvas_set_font(c, p->font);
    dfl_canvas_fill(c, x, y, w, h, WHITE);
    frame_text(c, &f);
    draw_y_axis(c, &f, &ya, p->grid);
    bar_geom bg;
    bg.ylog = p->y.scale == DFL_SCALE_LOG;
    bg.gw = (double)(f.px1 - f.px0) / G;
    bg.bw = bg.gw * 0.8 / S;
    /* bars start at 0 on linear axes (clamped to the limits), at the bottom on log */
    bg.base = bg.ylog ? f.py1 : axis_map(&ya, 0 < ya.lo ? ya.lo : (0 > ya.hi ? ya.hi : 0), f.py1 - 1, f.py0);
    for (int g = 0; g < G; g++) {
        for (int s = 0; s < S; s++)
            bar_one(c, p, &f, &ya, &bg, font, g, s);
        bar_group_label(c, p, &f, &bg, g);
    }
    /* a zero line when the axis spans both signs */
    if (!bg.ylog && ya.lo < 0 && ya.hi > 0) dfl_canvas_fill(c, f.px0, (int)lround(bg.base), f.px1 - f.px0, 1, AXIS);
    draw_plot_frame(c, &f);
    draw_legend(c, &f, ents, ne);
    if (saved_font) dfl_canvas_set_font(c, saved_font);
    free(saved_font);
    return DFL_OK;
}

/* ------------------------------------------------------------ whole images */

typedef dfl_status (*chart_draw)(dfl_canvas *c, int w, int h, const void *chart, dfl_error *err);

static dfl_status draw_line(dfl_canvas *c, int w, int h, const void *chart, dfl_error *err)
{
    return dfl_plot_line_draw(c, 0, 0, w, h, chart, err);
}

static dfl_status draw_bar(dfl_canvas *c, int w, int h, const void *chart, dfl_error *err)
{
    return dfl_plot_bar_draw(c, 0, 0, w, h, chart, err);
}

/* A white canvas of w x h (0: the default size) with one chart drawn over all of it. */
static dfl_status chart_canvas(int w, int h, chart_draw draw, const void *chart, dfl_canvas **out, dfl_error *err)
{
    *out = NULL;
    int W = w > 0 ? w : DFL_PLOT_DEFAULT_W, H = h > 0 ? h : DFL_PLOT_DEFAULT_H;
    dfl_canvas *c;
    dfl_status s = dfl_canvas_create(W, H, WHITE, &c, err);
    if (s) return s;
    if ((s = draw(c, W, H, chart, err))) {
        dfl_canvas_destroy(c);
        return s;
    }
    *out = c;
    return DFL_OK;
}

dfl_status dfl_plot_line_canvas(const dfl_line_chart *p, dfl_canvas **out, dfl_error *err)
{
    return chart_canvas(p->width, p->height, draw_line, p, out, err);
}

dfl_status dfl_plot_bar_canvas(const dfl_bar_chart *p, dfl_canvas **out, dfl_error *err)
{
    return chart_canvas(p->width, p->height, draw_bar, p, out, err);
}

static dfl_status write_and_destroy(dfl_canvas *c, const char *path, int overwrite, dfl_error *err)
{
    const char *keys[1] = {"Software"}, *vals[1] = {"difflens"};
    dfl_status s = dfl_png_write(c, path, overwrite, keys, vals, 1, err);
    dfl_canvas_destroy(c);
    return s;
}

dfl_status dfl_plot_line_write(const dfl_line_chart *p, const char *path, int overwrite, dfl_error *err)
{
    dfl_canvas *c;
    dfl_status s = dfl_plot_line_canvas(p, &c, err);
    return s ? s : write_and_destroy(c, path, overwrite, err);
}

dfl_status dfl_plot_bar_write(const dfl_bar_chart *p, const char *path, int overwrite, dfl_error *err)
{
    dfl_canvas *c;
    dfl_status s = dfl_plot_bar_canvas(p, &c, err);
    return s ? s : write_and_destroy(c, path, overwrite, err);
}

dfl_status dfl_plot_write(const dfl_canvas *c, const char *path, int overwrite, const dfl_plot_paper *pp,
                          const char *software, dfl_error *err)
{
    dfl_output o = dfl_output_default();
    o.software = software;
    if (pp && pp->width_in != 0) {
        if (!(pp->width_in > 0 && pp->width_in <= 100))
            return dfl__fail(err, DFL_ERR_USAGE, "%s: width %g in is outside (0, 100]", path, pp->width_in);
        o.width_in = pp->width_in;
        /* a paper-width PNG at print resolution, as attnmap --width */
        o.dpi = 300;
    }
    return dfl_canvas_write(c, path, overwrite, &o, err);
}

dfl_status dfl_plot_width_parse(const char *text, double *out, dfl_error *err)
{
    char *end = NULL;
    double v = text && *text ? strtod(text, &end) : NAN;
    if (!end || *end || !(v > 0 && v <= 100))
        return dfl__fail(err, DFL_ERR_USAGE,
                         "--width: expected inches in (0, 100] (3.3 = one column, 7 = two), got '%s'",
                         text ? text : "");
    *out = v;
    return DFL_OK;
}
