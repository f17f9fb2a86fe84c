/* effects.h — the compute part of `bin/effects` (docs/effects.md): grids of causal and
 * attribution results read from dumps, ready to draw or tabulate.
 *
 *   trace  the causal-tracing heatmap (ROME, Meng et al. 2022, Figure 1) of a patching
 *          sweep: `…/patch/effect` [Lp, P] (positions × layers as drawn, token labels on
 *          the position axis), or [Lp, H] for site "head";
 *   heads  the head grid, layers × heads, of direct logit attribution (`…/dla/heads`,
 *          mean over the analysis rows and the samples), of a head-patching sweep's
 *          effect, or of head ablations (`…/effects/target_nll` of "ablate:L<l>H<h>:…"
 *          minus entry 0, "none"); one grid per dump, drawn on one colour scale;
 *   lens   the logit-lens table: layers × positions, the top token and its probability.
 *
 * A grid owns its strings and values; free with dfl_effects_grid_free.
 */
#ifndef DFL_EFFECTS_H
#define DFL_EFFECTS_H

#include <stdint.h>
#include <stdio.h>

#include "base/report.h"
#include "base/status.h"

/* What a head grid shows. */
typedef enum dfl_effects_source {
    DFL_EFFECTS_AUTO = 0, /* dla, else patch (site head), else ablation: the first the dump has */
    DFL_EFFECTS_DLA,
    DFL_EFFECTS_PATCH,
    DFL_EFFECTS_ABLATION
} dfl_effects_source;

/* "auto", "dla", "patch", "ablation"; parse gives DFL_ERR_USAGE otherwise. */
const char *dfl_effects_source_name(dfl_effects_source s);
dfl_status dfl_effects_source_parse(const char *text, dfl_effects_source *out, dfl_error *err);

/* A grid of values v[rows, cols] with labels; text[rows, cols] (the lens's top tokens)
 * is NULL for the other kinds. */
typedef struct dfl_effects_grid {
    char *label;    /* the panel's name (the dump's label) */
    char *what;     /* what the values are ("direct logit attribution (logit)", …) */
    char *unit;     /* the colour bar's short title ("logit", "effect", "p", "ΔNLL") */
    char *row_axis; /* "layer", "position" */
    char *col_axis; /* "head", "layer", "position" */
    int64_t rows, cols;
    float *v;          /* [rows, cols] NaN = no data */
    char **row_labels; /* [rows] */
    char **col_labels; /* [cols] */
    char **text;       /* [rows, cols] or NULL */
    char *note;        /* one line of provenance (metric, clean and corrupted values), or NULL */
} dfl_effects_grid;

void dfl_effects_grid_free(dfl_effects_grid *g);

/* The patching sweep of sample `sample` (an id or an index) of the dump at path: rows =
 * the patched positions (labelled "t: token") or, for site "head", the heads; cols = the
 * patched layers. DFL_ERR_TENSOR when the sample has no patch/ group, the dump's
 * statuses otherwise. */
dfl_status dfl_effects_trace(const char *path, const char *sample, const char *label, dfl_effects_grid *out,
                             dfl_error *err);

/* The head grid [L, H] of the dump at path from src, over sample `sample` or, when NULL,
 * the mean over every sample that has it. DFL_ERR_TENSOR when no sample has it. */
dfl_status dfl_effects_heads(const char *path, dfl_effects_source src, const char *sample, const char *label,
                             dfl_effects_grid *out, dfl_error *err);

/* The lens table of sample `sample`: rows = the lens layers (embed, 0 … L−1), cols = the
 * positions (all, or positions[n_pos]), v = the top token's probability, text = its
 * text: decoded by the tokenizer at `tokenizer` (tokenizer.json, its folder or a GGUF
 * file) when given, else the dump's token_text of that id where it occurs in the
 * prompt, else "#id". DFL_ERR_TENSOR without lens/, DFL_ERR_RANGE for a position
 * outside the prompt, the tokenizer's statuses. */
dfl_status dfl_effects_lens(const char *path, const char *sample, const int64_t *positions, size_t n_pos,
                            const char *tokenizer, const char *label, dfl_effects_grid *out, dfl_error *err);

/* Figure options. */
typedef struct dfl_effects_style {
    const char *title; /* NULL = from the grids */
    const char *font;  /* NULL = DejaVu Sans */
    double width_in;   /* 0 = natural size */
    int diverging;     /* 1: RdBu symmetric around 0 on one scale for every panel (default);
                        * 0: viridis from 0 to the largest value (the lens: 0 to 1) */
    double vmax;       /* > 0: the colour limit; 0 = the largest abs(value) */
} dfl_effects_style;

dfl_effects_style dfl_effects_style_default(void);

/* Panels g[n] side by side on one colour scale, as PNG, SVG or PDF by path's extension
 * (never over an existing file without overwrite). DFL_ERR_USAGE (extension, n < 1, a
 * grid with no values), DFL_ERR_EXISTS, DFL_ERR_IO, DFL_ERR_NOMEM. */
dfl_status dfl_effects_draw(const dfl_effects_grid *g, int n, const dfl_effects_style *st, const char *path,
                            int overwrite, dfl_error *err);

/* The grids as one long table (panel, row, column, value[, text]) in format f to out.
 * DFL_ERR_NOMEM, DFL_ERR_IO. */
dfl_status dfl_effects_table(const dfl_effects_grid *g, int n, dfl_report_format f, FILE *out, dfl_error *err);

#endif
