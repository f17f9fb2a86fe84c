/* render.h — figures for papers: a canvas that records drawing through cairo (text laid
 * out by Pango through fontconfig), colormaps, value scales, pooled heatmaps drawn as
 * images, colour bars, ticks, legends, and one writer that turns a canvas into PNG, SVG
 * or PDF by the output's extension, atomically.
 *
 * Files: render_canvas.c (canvas, shapes, text, output), render_color.c (colormaps,
 * scales, ticks), render_pool.c (heatmap pooling), render_chart.c (heatmaps, colour
 * bar, legend), render_png.c (the parallel PNG encoder, the only file that includes
 * png.h), render_tables.c (published colormap tables, as data).
 *
 * Coordinates are canvas units, x to the right and y down from the top-left corner;
 * DFL_UNITS_PER_INCH of them make an inch of a vector figure unless a width is asked
 * for, and a PNG has one pixel per unit unless scaled. Drawing outside the canvas is
 * clipped. Lines and text are vectors; heatmaps are images at one pixel per cell,
 * always drawn with nearest-neighbour filtering.
 */
#ifndef DFL_RENDER_H
#define DFL_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* ------------------------------------------------------------------ canvas */

typedef struct dfl_rgb {
    uint8_t r, g, b;
} dfl_rgb;

typedef struct dfl__canvas_impl dfl__canvas_impl;

/* A w x h figure. Drawing is recorded (cairo recording surface) and rendered when it is
 * written or read back, so one canvas gives PNG, SVG and PDF with the same layout. */
typedef struct dfl_canvas {
    int w, h;
    dfl__canvas_impl *impl;
} dfl_canvas;

#define DFL_CANVAS_MAX     32768 /* largest width or height accepted */
#define DFL_UNITS_PER_INCH 150   /* canvas units per inch of a vector figure by default */
#define DFL_DEFAULT_FONT   "DejaVu Sans"

/* A w x h canvas filled with bg, text in DFL_DEFAULT_FONT. DFL_ERR_USAGE for sizes
 * outside [1, DFL_CANVAS_MAX], DFL_ERR_NOMEM. The caller owns *out: dfl_canvas_destroy
 * (NULL ok). */
dfl_status dfl_canvas_create(int w, int h, dfl_rgb bg, dfl_canvas **out, dfl_error *err);
void dfl_canvas_destroy(dfl_canvas *c);

/* The font family (fontconfig name, e.g. "DejaVu Serif") for text drawn from now on;
 * NULL restores the default. Glyphs the family lacks fall back to another installed
 * font, and to a box showing the code point when none has them. The string is copied. */
void dfl_canvas_set_font(dfl_canvas *c, const char *family);

/* The pixel at (x, y) of the canvas rendered at one pixel per unit (rendered again
 * after each drawing call); black outside the canvas or when out of memory. For tests. */
dfl_rgb dfl_canvas_get(const dfl_canvas *c, int x, int y);

/* Filled rectangle, a 1-unit outline just inside it, and a 1-unit line through the
 * centres of the two end pixels. */
void dfl_canvas_fill(dfl_canvas *c, int x, int y, int w, int h, dfl_rgb col);
void dfl_canvas_frame(dfl_canvas *c, int x, int y, int w, int h, dfl_rgb col);
void dfl_canvas_line(dfl_canvas *c, int x0, int y0, int x1, int y1, dfl_rgb col);

/* Dash patterns of strokes. */
typedef enum dfl_dash { DFL_STROKE_SOLID = 0, DFL_STROKE_DASHED, DFL_STROKE_DOTTED } dfl_dash;

/* A polyline through n points (x[i], y[i]) (units, fractional) of width lw, clipped to
 * the rectangle (cx, cy, cw, ch); a non-finite point breaks the line (a gap). */
void dfl_canvas_polyline(dfl_canvas *c, const double *x, const double *y, int n, double lw, dfl_dash dash, dfl_rgb col,
                         int cx, int cy, int cw, int ch);

/* -------------------------------------------------------------------- text */

/* Text is UTF-8, laid out by Pango; scale is the size step: a line is DFL_FONT_H x scale
 * units high (about 8 pt at the default 150 units per inch and scale 2), and DFL_FONT_W x
 * scale is a typical character's width, for rough budgets only. */
#define DFL_FONT_W 5
#define DFL_FONT_H 10

typedef enum dfl_align { DFL_ALIGN_LEFT = 0, DFL_ALIGN_CENTER, DFL_ALIGN_RIGHT } dfl_align;

/* Width in units of text at scale in the default font, rounded up. */
int dfl_text_width(const char *utf8, int scale);
/* The same in the canvas's font, and in a named family (NULL = the default). */
int dfl_canvas_text_width(const dfl_canvas *c, const char *utf8, int scale);
int dfl_font_text_width(const char *family, const char *utf8, int scale);

/* Number of characters (code points) in text. */
size_t dfl_text_length(const char *utf8);

/* Draw one line of text in a line box DFL_FONT_H x scale high whose top is y; x is the
 * left edge, centre or right edge by align. */
void dfl_canvas_text(dfl_canvas *c, int x, int y, const char *utf8, int scale, dfl_rgb col, dfl_align align);

/* Draw text rotated 90° anticlockwise (reading bottom to top) with its line box's left
 * edge (the glyph tops) at x; y is the bottom end, centre or top end of the run by align
 * (LEFT = starts at y going up, CENTER = centred on y, RIGHT = ends at y). */
void dfl_canvas_text_up(dfl_canvas *c, int x, int y, const char *utf8, int scale, dfl_rgb col, dfl_align align);

/* Copy at most max_chars code points of src into dst[cap] (NUL-terminated), ending
 * with "…" when cut; line breaks become ↵ (U+21B5), other control characters spaces.
 * Returns dst. */
char *dfl_text_clip(char *dst, size_t cap, const char *src, size_t max_chars);

/* ------------------------------------------------------------------ output */

typedef enum dfl_format { DFL_FORMAT_PNG = 0, DFL_FORMAT_SVG, DFL_FORMAT_PDF } dfl_format;

/* The format named by path's extension (.png, .svg, .pdf, any case); DFL_ERR_USAGE
 * naming the path otherwise. */
dfl_status dfl_format_of_path(const char *path, dfl_format *out, dfl_error *err);

/* How a canvas becomes a file. */
typedef struct dfl_output {
    double width_in;      /* physical width in inches; 0 = canvas width / DFL_UNITS_PER_INCH */
    double dpi;           /* PNG pixels per inch; 0 = use scale */
    double scale;         /* PNG pixels per canvas unit when dpi is 0; 0 = 1 */
    const char *title;    /* PDF and SVG title, PNG "Title"; NULL = none */
    const char *software; /* PDF creator, PNG "Software"; NULL = "difflens" */
} dfl_output;

/* Defaults as documented on each field. */
dfl_output dfl_output_default(void);

/* Write c to path as PNG, SVG or PDF by its extension, through a temporary file renamed
 * into place (nothing is left on failure). PNG: 8-bit RGB by the parallel encoder; SVG:
 * text as glyph outlines (paths), heatmaps as embedded PNG images with
 * image-rendering: pixelated; PDF: fonts embedded (subsets), heatmaps as images with
 * /Interpolate false. o may be NULL (defaults). DFL_ERR_USAGE (extension, a PNG of
 * more than DFL_CANVAS_MAX pixels a side, bad o), DFL_ERR_EXISTS when path exists and
 * !overwrite, DFL_ERR_IO, DFL_ERR_NOMEM. */
dfl_status dfl_canvas_write(const dfl_canvas *c, const char *path, int overwrite, const dfl_output *o, dfl_error *err);

/* dfl_canvas_write with default output options, text_keys/values (n_text pairs) as PNG
 * tEXt chunks ("Software", "Title"); kept under its first format's name for callers —
 * it writes SVG and PDF too, by extension. */
dfl_status dfl_png_write(const dfl_canvas *c, const char *path, int overwrite, const char *const *text_keys,
                         const char *const *text_values, int n_text, dfl_error *err);

/* --------------------------------------------------------------- colormaps */

typedef enum dfl_cmap {
    DFL_CMAP_VIRIDIS = 0, /* sequential, perceptually uniform (CC0 table) */
    DFL_CMAP_MAGMA,       /* sequential, perceptually uniform (CC0 table) */
    DFL_CMAP_RDBU         /* diverging blue - white - red (ColorBrewer RdBu, reversed) */
} dfl_cmap;

/* "viridis", "magma", "rdbu". */
const char *dfl_cmap_name(dfl_cmap m);
/* Parse a colormap name; DFL_ERR_USAGE listing the names otherwise. */
dfl_status dfl_cmap_parse(const char *name, dfl_cmap *out, dfl_error *err);
/* 1 for diverging maps (centre = the middle entry). */
int dfl_cmap_is_diverging(dfl_cmap m);

/* Entry i (0..255, clamped) of the 256-entry table, rounded to 8 bits. */
dfl_rgb dfl_cmap_entry(dfl_cmap m, int i);
/* The colour of t in [0, 1] (clamped; NaN gives entry 0): entry floor(256 t), 255 at
 * t = 1 — matplotlib's lookup, so a figure's colours match its imshow. */
dfl_rgb dfl_cmap_color(dfl_cmap m, double t);

/* ------------------------------------------------------------ value scales */

typedef enum dfl_scale { DFL_SCALE_LINEAR = 0, DFL_SCALE_LOG, DFL_SCALE_SQRT } dfl_scale;

/* "linear", "log", "sqrt"; parse gives DFL_ERR_USAGE otherwise. */
const char *dfl_scale_name(dfl_scale s);
dfl_status dfl_scale_parse(const char *name, dfl_scale *out, dfl_error *err);

/* How values map to [0, 1] on a colormap. Sequential: vmin -> 0, vmax -> 1; log needs
 * 0 < vmin < vmax. Diverging (symmetric around 0): -vmax -> 0, 0 -> 0.5, vmax -> 1;
 * vmin is -vmax; log becomes a symmetric log, linear within |v| < linthresh. */
typedef struct dfl_norm {
    dfl_scale scale;
    int diverging;
    double vmin, vmax;
    double linthresh; /* diverging log only; default vmax / 1000 */
} dfl_norm;

/* Check a norm's limits (finite, ordered, positive for log). DFL_ERR_USAGE. */
dfl_status dfl_norm_check(const dfl_norm *n, dfl_error *err);
/* v -> t in [0, 1], clamped; NaN stays NaN. */
double dfl_norm_apply(const dfl_norm *n, double v);
/* t in [0, 1] -> v (the inverse of apply). */
double dfl_norm_invert(const dfl_norm *n, double t);

/* ------------------------------------------------------------------- ticks */

/* "Nice" ticks (1, 2, 2.5, 5 x 10^k steps) inside [lo, hi], at most max_ticks, into
 * out[cap]; returns the count. *step (may be NULL) gets the spacing. */
int dfl_ticks_linear(double lo, double hi, int max_ticks, double *out, int cap, double *step);
/* Ticks at powers of ten inside [lo, hi] (lo > 0), thinned to max_ticks. */
int dfl_ticks_log(double lo, double hi, int max_ticks, double *out, int cap);
/* Ticks suited to a norm: linear steps, decades for log (with 0 and +-decades when
 * diverging), and linear steps for sqrt. */
int dfl_ticks_for_norm(const dfl_norm *n, int max_ticks, double *out, int cap);
/* A short label for tick v ("0.05", "1e-04", "-0.2"). */
void dfl_tick_label(double v, char *buf, size_t cap);

/* ---------------------------------------------------------------- pooling */

/* Downsampling a [rows, cols] grid of values to [out_rows, out_cols] (each out <= in):
 * output cell (y, x) covers the source rectangle [y·rows/out_rows, (y+1)·rows/out_rows)
 * x [x·cols/out_cols, ...), fractional at the edges.
 *   MEAN: the area-weighted mean of the covered entries;
 *   MAX:  the covered entry farthest from 0 (the maximum for non-negative data), so a
 *         single sharp needle stays visible.
 * NaN entries are "no data" (masked); they are skipped, and a cell with no data is NaN. */
typedef enum dfl_pool_mode { DFL_POOL_MEAN = 0, DFL_POOL_MAX } dfl_pool_mode;

const char *dfl_pool_name(dfl_pool_mode m);
dfl_status dfl_pool_parse(const char *name, dfl_pool_mode *out, dfl_error *err);

typedef struct dfl_pool dfl_pool;

/* A streaming pooler: feed source rows in any order with dfl_pool_rows(_valid), then
 * take the result. DFL_ERR_USAGE if a size is < 1 or out > in; DFL_ERR_NOMEM. Caller
 * owns *out (dfl_pool_destroy, NULL ok). */
dfl_status dfl_pool_create(int64_t rows, int64_t cols, int64_t out_rows, int64_t out_cols, dfl_pool_mode mode,
                           dfl_pool **out, dfl_error *err);
/* Add source rows [row0, row0 + n): row k is data + k·ld. valid [n] may be NULL (every
 * column is data, ld >= cols); else row k's columns j >= valid[k] are no data, like NaN,
 * and are never read (valid[k] <= 0: none, >= cols: all; ld >= every min(valid[k], cols)).
 * Rows outside the grid are ignored. Big blocks use the OpenMP threads; the result does
 * not depend on their number. */
void dfl_pool_rows_valid(dfl_pool *p, int64_t row0, int64_t n, const float *data, int64_t ld, const int64_t *valid);
/* dfl_pool_rows_valid with ld = cols and valid = NULL: data [n][cols]. */
void dfl_pool_rows(dfl_pool *p, int64_t row0, int64_t n, const float *data);
/* The pooled grid into caller-owned out [out_rows][out_cols]. */
void dfl_pool_result(const dfl_pool *p, float *out);
void dfl_pool_destroy(dfl_pool *p);

/* The naive twin: the same result computed cell by cell from the whole grid in[rows][cols]
 * (brute force, for tests). */
void dfl_pool_naive(const float *in, int64_t rows, int64_t cols, int64_t out_rows, int64_t out_cols, dfl_pool_mode mode,
                    float *out);

/* The q-quantile (0..1) of v[n] (n >= 1), the value of rank round(q·(n−1)), by
 * quickselect: reorders v, O(n) on average. Robust colour limits use it. */
float dfl_quantile_select(float *v, size_t n, double q);

/* ------------------------------------------------------------------ charts */

/* Paint a grid v[rows][cols] at (x, y), each value as a cell_w x cell_h block coloured
 * by cmap(norm(v)); NaN cells get `nodata` with a diagonal hatch in `hatch`. */
void dfl_canvas_heatmap(dfl_canvas *c, int x, int y, const float *v, int rows, int cols, int cell_w, int cell_h,
                        const dfl_norm *norm, dfl_cmap cmap, dfl_rgb nodata, dfl_rgb hatch);
/* The same grid stretched over the box (x, y, w, h): cells of w / cols x h / rows units.
 * Either way the grid is one image of one pixel per cell, scaled with nearest-neighbour
 * filtering (exact cell colours in a PNG; one image in SVG and PDF). */
void dfl_canvas_heatmap_box(dfl_canvas *c, int x, int y, int w, int h, const float *v, int rows, int cols,
                            const dfl_norm *norm, dfl_cmap cmap, dfl_rgb nodata, dfl_rgb hatch);

/* A vertical colour bar with ticks and labels on its right. extend_low/high draw a
 * triangle at that end (values beyond the limits were clipped). title (above the bar)
 * and note (below it, may contain '\n') may be NULL. */
typedef struct dfl_colorbar {
    dfl_cmap cmap;
    dfl_norm norm;
    const char *title;
    const char *note;
    int extend_low, extend_high;
    int scale;        /* font scale */
    const char *font; /* family used to measure labels (NULL = the default) */
} dfl_colorbar;

/* Width the colour bar needs, labels included, for a bar bar_w pixels wide. */
int dfl_colorbar_width(const dfl_colorbar *cb, int bar_w);
/* Draw the bar at (x, y) with its coloured part bar_w x bar_h; text goes above, right
 * and below. Returns the tick values' count. */
int dfl_canvas_colorbar(dfl_canvas *c, int x, int y, int bar_w, int bar_h, const dfl_colorbar *cb);

/* A legend: swatches with labels, laid out left to right and wrapped at max_w. */
typedef struct dfl_legend_item {
    const char *label;
    dfl_rgb color;
    int hatched; /* draw the swatch like no-data cells (colour + hatch in `hatch_color`) */
    dfl_rgb hatch_color;
} dfl_legend_item;

/* Size the legend takes: *w x *h. */
void dfl_legend_size(const dfl_legend_item *items, int n, int scale, int max_w, int *w, int *h);
/* Draw it with its top-left at (x, y). Returns the height used. */
int dfl_canvas_legend(dfl_canvas *c, int x, int y, const dfl_legend_item *items, int n, int scale, int max_w,
                      dfl_rgb text);

/* --------------------------------------------------------------- PNG bytes */

/* An 8-bit RGB image rgb[h][w][3] as a PNG in memory (no text chunks), through the same
 * parallel encoder as the files: *out malloc'ed, owned by the caller (free()), *len
 * bytes. DFL_ERR_NOMEM. */
dfl_status dfl_png_encode(int w, int h, const uint8_t *rgb, unsigned char **out, size_t *len, dfl_error *err);

#endif
