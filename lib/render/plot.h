/* plot.h — charts for papers on top of render.h: a line chart (several series, linear
 * or log y with decade ticks, markers, legend, axis labels, title) and a grouped bar
 * chart (groups × series, legend, value axis, optional error bars and value labels).
 * Implemented in render_plot.c on render.h's cairo canvas: lines, markers and text are
 * vectors (Pango text in DejaVu Sans unless `font` says otherwise), colours from the
 * colour-blind-safe Okabe-Ito palette.
 *
 * Sizes: width/height 0 take the defaults (1200 x 750 units: pixels of a PNG, 8 x 5 in
 * of an SVG or PDF at 150 units per inch); font_scale 0 picks 2 for figures at least
 * 900 units wide (readable when a figure is shrunk to a paper column) and 1 below
 * that. Each chart can be drawn onto a region of an existing canvas (so a tool can
 * compose panels) or into a canvas of its own, or straight to a PNG, SVG or PDF file.
 *
 * Values: NaN is "no data" (a gap in a line, no bar); on a log axis non-positive
 * values are gaps too. Axis limits default to the data's range (log: whole decades
 * around it; linear: nice ticks, including 0 for bar charts).
 *
 * Ownership: every pointer in the parameter structs is borrowed for the call only.
 */
#ifndef DFL_PLOT_H
#define DFL_PLOT_H

#include "render/render.h"
#include "base/status.h"

#define DFL_PLOT_MAX_SERIES 64
#define DFL_PLOT_DEFAULT_W  1200
#define DFL_PLOT_DEFAULT_H  750

/* The i-th colour of the default palette (Okabe-Ito's 8 colour-blind-safe colours,
 * cycling). */
dfl_rgb dfl_plot_color(int i);

typedef enum dfl_plot_marker {
    DFL_MARKER_AUTO = 0, /* series i gets marker 1 + i % 6 (circle, square, ...) */
    DFL_MARKER_NONE,
    DFL_MARKER_CIRCLE,
    DFL_MARKER_SQUARE,
    DFL_MARKER_TRIANGLE,
    DFL_MARKER_DIAMOND,
    DFL_MARKER_CROSS,
    DFL_MARKER_PLUS
} dfl_plot_marker;

typedef enum dfl_plot_dash {
    DFL_DASH_SOLID = 0,
    DFL_DASH_DASHED,
    DFL_DASH_DOTTED,
    DFL_DASH_NONE /* markers only */
} dfl_plot_dash;

typedef enum dfl_legend_pos {
    DFL_LEGEND_AUTO = 0, /* right of the plot for > 6 series, else inside, top right */
    DFL_LEGEND_INSIDE_TR,
    DFL_LEGEND_INSIDE_TL,
    DFL_LEGEND_INSIDE_BR,
    DFL_LEGEND_INSIDE_BL,
    DFL_LEGEND_RIGHT, /* outside, right of the plot area */
    DFL_LEGEND_BELOW, /* outside, under the x axis label, wrapped */
    DFL_LEGEND_OFF
} dfl_legend_pos;

/* One axis. scale: DFL_SCALE_LINEAR or DFL_SCALE_LOG (sqrt is treated as linear).
 * Log axes get ticks at each decade (labelled "0.01", "1", "100", "1e5") and unlabelled
 * minor ticks at 2..9 x decade when few decades are shown. */
typedef struct dfl_plot_axis {
    const char *label;    /* NULL = none */
    dfl_scale scale;      /* default linear */
    int has_min, has_max; /* fixed limits; otherwise from the data */
    double min, max;
    int integer_ticks;              /* linear: only integer ticks (layers, steps) */
    const char *const *tick_labels; /* x of a line chart: labels for x = 0, 1, ..., n-1 */
    int n_tick_labels;              /* (categorical axis; thinned when crowded) */
} dfl_plot_axis;

/* One line of a line chart: n points (x[i], y[i]); x NULL means x = 0, 1, ..., n-1. */
typedef struct dfl_plot_series {
    const char *label; /* legend text; NULL = not in the legend */
    const double *x;
    const double *y;
    int n;
    int has_color; /* 0: dfl_plot_color(series index) */
    dfl_rgb color;
    dfl_plot_marker marker; /* default AUTO */
    dfl_plot_dash dash;     /* default solid */
    int line_width;         /* pixels, 0 = default (2 at font scale 2, else 1) */
} dfl_plot_series;

typedef struct dfl_line_chart {
    const char *title;    /* NULL = none */
    const char *subtitle; /* smaller line under the title, NULL = none */
    dfl_plot_axis x, y;
    const dfl_plot_series *series;
    int n_series;          /* 1..DFL_PLOT_MAX_SERIES */
    int width, height;     /* 0 = defaults */
    int font_scale;        /* 0 = auto */
    dfl_legend_pos legend; /* default AUTO */
    int grid;              /* light grid lines at major ticks (default 1) */
    const char *note;      /* small text under the figure (may contain '\n'), NULL = none */
    const char *font;      /* font family, NULL = the canvas's (DejaVu Sans) */
} dfl_line_chart;

typedef struct dfl_bar_chart {
    const char *title;
    const char *subtitle;
    const char *const *groups; /* n_groups labels along the category axis */
    int n_groups;
    const char *const *series; /* n_series legend labels (NULL entries: not listed) */
    int n_series;              /* 1..DFL_PLOT_MAX_SERIES */
    const dfl_rgb *colors;     /* n_series colours, NULL = the palette */
    const double *values;      /* [n_groups][n_series]; NaN = no bar */
    const double *errors;      /* [n_groups][n_series] half-widths of error bars, or NULL */
    const char *x_label;       /* under the group labels, NULL = none */
    dfl_plot_axis y;           /* the value axis (limits default to include 0 on linear) */
    int value_labels;          /* print each bar's value above it (default 0) */
    int value_precision;       /* significant digits of those labels (default 3) */
    int width, height, font_scale;
    dfl_legend_pos legend;
    int grid; /* horizontal grid lines (default 1) */
    const char *note;
    const char *font; /* font family, NULL = the canvas's (DejaVu Sans) */
} dfl_bar_chart;

/* Defaults as documented on each field (every pointer NULL, counts 0). */
dfl_line_chart dfl_line_chart_default(void);
dfl_bar_chart dfl_bar_chart_default(void);

/* Draw the chart onto c inside the rectangle (x, y, w, h) (title, legend and labels
 * included). DFL_ERR_USAGE for no series, n < 0, bad limits (log with min <= 0,
 * min >= max), a series with non-finite x, or a region too small to draw in (the
 * message names which). Nothing is drawn when it fails. */
dfl_status dfl_plot_line_draw(dfl_canvas *c, int x, int y, int w, int h, const dfl_line_chart *p, dfl_error *err);
dfl_status dfl_plot_bar_draw(dfl_canvas *c, int x, int y, int w, int h, const dfl_bar_chart *p, dfl_error *err);

/* The chart on a white canvas of its own (width x height). The caller owns *out
 * (dfl_canvas_destroy). Statuses of the draw functions, DFL_ERR_NOMEM. */
dfl_status dfl_plot_line_canvas(const dfl_line_chart *p, dfl_canvas **out, dfl_error *err);
dfl_status dfl_plot_bar_canvas(const dfl_bar_chart *p, dfl_canvas **out, dfl_error *err);

/* The chart as a PNG, SVG or PDF at path by its extension (atomic, as dfl_canvas_write;
 * "Software" = "difflens"). DFL_ERR_USAGE for another extension, DFL_ERR_EXISTS when
 * path exists and !overwrite, DFL_ERR_IO, and the above. */
dfl_status dfl_plot_line_write(const dfl_line_chart *p, const char *path, int overwrite, dfl_error *err);
dfl_status dfl_plot_bar_write(const dfl_bar_chart *p, const char *path, int overwrite, dfl_error *err);

/* Paper options a chart tool takes from --font and --width. Zeroed = the chart as
 * before: DejaVu Sans, canvas units at DFL_UNITS_PER_INCH. */
typedef struct dfl_plot_paper {
    const char *font; /* font family (fontconfig name), NULL = DejaVu Sans */
    double width_in;  /* physical width of an SVG / PDF in inches, 0 = canvas width / 150; a
                       * PNG is then drawn at 300 dpi */
} dfl_plot_paper;

/* Parse a tool's --width IN: a number in (0, 100]; DFL_ERR_USAGE naming the flag
 * otherwise. */
dfl_status dfl_plot_width_parse(const char *text, double *out, dfl_error *err);

/* Write a chart canvas as dfl_canvas_write does, at pp's width (pp may be NULL),
 * "Software" = software (NULL = "difflens"). DFL_ERR_USAGE for a width outside
 * [0, 100], and dfl_canvas_write's statuses. */
dfl_status dfl_plot_write(const dfl_canvas *c, const char *path, int overwrite, const dfl_plot_paper *pp,
                          const char *software, dfl_error *err);

#endif
