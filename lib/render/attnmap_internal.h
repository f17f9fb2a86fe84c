/* attnmap_internal.h — what attnmap.c (reading: sides, tiles, pooling, limits) and
 * attnmap_draw.c (the figure: layout, tiles, bands, axes, colour bar, legend) share.
 * Included by those two files only; the short type names stay inside them. */
#ifndef DFL_ATTNMAP_INTERNAL_H
#define DFL_ATTNMAP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dump/dump_sample.h"
#include "render/attnmap.h"

#define MAX_TILES 256

/* What one dump holds for the chosen sample. */
typedef struct side {
    dfl_dump_reader *r;
    const dfl_dump_sample *s;
    char *model_type;
    int is_diff;        /* has map2 and diff */
    const char *label;  /* model type or --labels */
    dfl_dump_tokens tk; /* tokens, segments, token text [T] */
    int64_t gen_start;  /* probe --generate: position of the first generated token in tk, -1 = none */
    dfl_dump_attn at;   /* the maps [Ls, Hs, R, T] and their scales */
    float *lambda;      /* [L] or NULL */
    size_t nlambda;
    dfl_dump_sample cap; /* --caption: the caption's text/NNN/ as a sample (s points here) */
    char cap_group[64], cap_id[160];
} side;

/* A tile is a sum of up to two terms, coef · map(side, layer, head or head mean). */
typedef struct term {
    int side;
    dfl_attn_map map;
    int64_t li; /* index into the side's layers */
    int64_t hi; /* index into its heads, or -1 = mean over all */
    double coef;
} term;

typedef struct tile {
    term t[2];
    int nt;
    int diverging; /* may hold negative values: drawn on the diverging map */
    char title[128];
    float *v; /* pooled [ph][pw], NaN = masked */
} tile;

/* The drawing plan shared by every tile. */
typedef struct plan {
    side sd[2];
    int nsides;
    int64_t nr, nc;     /* rows and key columns shown */
    int64_t *ridx[2];   /* [nr] row index into each side's R axis */
    int32_t *rpos;      /* [nr] query position of each shown row */
    int64_t c0;         /* first key position shown */
    int strips;         /* rows-only dump: rows drawn as strips */
    int64_t ph, pw;     /* pooled grid */
    int cell_w, cell_h; /* pixels per pooled cell */
    int fit_mw;         /* > 0: maps drawn this many units wide, cells stretched
                         * (--width); 0: pw x cell_w */
    tile tiles[MAX_TILES];
    int ntiles, grid_cols, grid_rows;
    dfl_norm norm;
    dfl_cmap cmap;
    int extend_low, extend_high;
    double data_min, data_max;
    int robust;
} plan;

/* The map width (units) that makes the figure fit_w units wide, from the layout at the
 * pooled size pl has now. */
int dfl__attnmap_fit_map_width(const plan *pl, const dfl_attnmap_params *p, int fit_w);

/* Lay out and draw the figure of a plan whose tiles are read and whose limits are
 * chosen, and write it to p->out_path. title [title_cap] is the figure's title (cut to
 * the width in place); fit_w > 0: the figure is that many units wide (--width). Sets
 * rep's width, height and width_in when rep is not NULL. Statuses of
 * dfl_canvas_create and dfl_canvas_write. */
dfl_status dfl__attnmap_draw(const plan *pl, const dfl_attnmap_params *p, char *title, size_t title_cap, int fit_w,
                             dfl_attnmap_report *rep, dfl_error *err);

#endif
