/* attnmap.h — attention heatmaps from a dump as a PNG, SVG or PDF (by the output's
 * extension): one map, grids (every head of a
 * layer, every layer of a head or of the head mean, map1 | map2 | diff of a Diff
 * model), and two dumps side by side on one colour scale or as their difference.
 *
 * Reads samples/NNNNNN/attn/{map1,map2,diff} [Ls, Hs, R, T] by hyperslabs (one layer,
 * head and block of rows at a time) and pools them to the requested size while
 * reading. User-facing layer, head and row numbers are mapped through attn/layers,
 * attn/heads and attn/rows, so dumps that captured only some of them work. Callable
 * in-process; tools/attnmap/main.c only parses flags.
 */
#ifndef DFL_ATTNMAP_H
#define DFL_ATTNMAP_H

#include <stdint.h>

#include "render/render.h"
#include "base/status.h"

/* Special values of layer and head. */
#define DFL_ATTNMAP_FIRST (-1) /* the first captured one (default) */
#define DFL_ATTNMAP_ALL   (-2) /* a tile for each captured one */
#define DFL_ATTNMAP_MEAN  (-3) /* head only: the mean over the captured heads */

typedef enum dfl_attn_map {
    DFL_ATTN_AUTO = 0, /* diff for Diff dumps, map1 (the softmax map) otherwise */
    DFL_ATTN_MAP1,
    DFL_ATTN_MAP2,
    DFL_ATTN_DIFF,
    DFL_ATTN_ALL /* map1 | map2 | diff (Diff dumps) */
} dfl_attn_map;

typedef struct dfl_attnmap_params {
    const char *dump_path;  /* required */
    const char *out_path;   /* required: .png, .svg or .pdf */
    const char *vs_path;    /* a second dump to compare with, or NULL */
    int delta;              /* with vs_path: one map of dump − vs instead of both */
    const char *labels[2];  /* names of the two dumps (default: their model types) */
    const char *sample;     /* id, or else index; NULL = the first sample */
    int64_t caption;        /* DiffCLIP / CLIP dumps: this caption's text-tower map
                             * (text/NNN/) drawn as a text map; -1 = the image (default) */
    int64_t layer;          /* >= 0, DFL_ATTNMAP_FIRST (default) or DFL_ATTNMAP_ALL */
    int64_t head;           /* >= 0, DFL_ATTNMAP_FIRST (default), _ALL or _MEAN */
    dfl_attn_map map;       /* default DFL_ATTN_AUTO */
    dfl_cmap cmap;          /* sequential colormap (default viridis); diverging maps use rdbu */
    dfl_scale scale;        /* default linear */
    int has_vmin, has_vmax; /* user limits; default robust limits */
    double vmin, vmax;
    int size;               /* pixels of a tile's longer side; 0 = 1024 for one map, 512 in grids */
    dfl_pool_mode pool;     /* default mean */
    int has_rows, has_cols; /* crops, half-open positions [a, b); -1 = open end */
    int64_t rows[2], cols[2];
    int token_labels; /* print token text when cells are large enough (default 1) */
    int overwrite;    /* replace an existing out_path */
    const char *font; /* font family (fontconfig name); NULL = DejaVu Sans */
    double width_in;  /* lay the figure out for this width in inches, text at 8 pt
                       * (tiles sized to fit; --size ignored); 0 = tiles of --size
                       * units, 72 units per inch in SVG and PDF */
    double dpi;       /* PNG pixels per inch; 0 = px_scale, or 300 with width_in */
    double px_scale;  /* PNG pixels per unit when dpi is 0; 0 = 1 */
} dfl_attnmap_params;

typedef struct dfl_attnmap_report {
    int width, height; /* of the figure, in units (PNG pixels at scale 1) */
    double width_in;   /* its physical width in SVG and PDF */
    int tiles;
    double vmin, vmax;   /* the colour limits used */
    int robust;          /* 1 when the limits were the robust default */
    double read_seconds; /* reading + pooling */
    double total_seconds;
} dfl_attnmap_report;

/* Defaults as documented on each field. */
dfl_attnmap_params dfl_attnmap_params_default(void);

/* "auto", "map1", "map2", "diff", "all"; parse gives DFL_ERR_USAGE otherwise. */
const char *dfl_attn_map_name(dfl_attn_map m);
dfl_status dfl_attn_map_parse(const char *text, dfl_attn_map *out, dfl_error *err);

/* Parse a crop "A:B" (either side may be empty: open) into out[2] (-1 = open).
 * DFL_ERR_USAGE naming the flag. */
dfl_status dfl_attnmap_parse_range(const char *flag, const char *text, int64_t out[2], dfl_error *err);

/* Render the figure to p->out_path (atomically; nothing is left on failure). rep may
 * be NULL. Statuses: those of dfl_dump_open (DFL_ERR_IO, DFL_ERR_FORMAT "not a
 * difflens dump"), DFL_ERR_RANGE (sample, layer, head or rows not in the dump; the
 * message says what is there), DFL_ERR_TENSOR (no maps, a map missing),
 * DFL_ERR_USAGE (conflicting options, --vs dumps whose tokens differ),
 * DFL_ERR_EXISTS, DFL_ERR_HDF5, DFL_ERR_NOMEM. */
dfl_status dfl_attnmap_run(const dfl_attnmap_params *p, dfl_attnmap_report *rep, dfl_error *err);

#endif
