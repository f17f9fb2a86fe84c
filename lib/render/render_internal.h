/* render_internal.h — what the render_*.c files share (dfl__ prefix): the canvas's
 * cairo state, the PNG encoder's input, the colormap tables. */
#ifndef DFL_RENDER_INTERNAL_H
#define DFL_RENDER_INTERNAL_H

#include <cairo.h>
#include <stddef.h>
#include <stdint.h>

#include "render/render.h"

/* Published colormap tables (render_tables.c): [256][rgb] in [0, 1]. */
extern const float dfl__cmap_viridis[256][3];
extern const float dfl__cmap_magma[256][3];
/* ColorBrewer RdBu's 11 anchors, red to blue, 8-bit. */
extern const uint8_t dfl__cmap_rdbu_anchors[11][3];

/* The recording behind a canvas; cr draws into it in canvas units. */
struct dfl__canvas_impl {
    cairo_surface_t *rec;
    cairo_t *cr;
    char *font;             /* family, owned */
    uint8_t *px;            /* [h][w][3] cached rendering at one pixel per unit, or NULL */
    int dirty;              /* px is out of date */
    cairo_surface_t **kept; /* [n_kept] images the recording uses, freed with the canvas */
    size_t n_kept, cap_kept;
};

/* The canvas's cairo context (for the render files that draw paths themselves). */
cairo_t *dfl__canvas_cr(dfl_canvas *c);
void dfl__canvas_touch(dfl_canvas *c);
/* Hands an image the recording has painted to the canvas, which destroys it with
 * itself: destroyed now, cairo would first copy it into the recording (a 1024² map is
 * 4 MB). Destroys it at once if the list cannot grow. */
void dfl__canvas_keep(dfl_canvas *c, cairo_surface_t *img);
void dfl__set_rgb(cairo_t *cr, dfl_rgb col);
/* The first line of s (up to '\n', cut to cap - 1 bytes) into line[cap]; returns the text
 * after its '\n', or NULL after the last line. The one line splitter of multi-line texts. */
const char *dfl__text_line(const char *s, char *line, size_t cap);
/* Draw text that may hold '\n' as left-aligned lines from (x, y), each `step` units
 * below the last (lines past 511 bytes are cut); returns the y below the last line.
 * The one multi-line drawer: colour-bar notes and chart notes. */
int dfl__canvas_text_lines(dfl_canvas *c, int x, int y, const char *s, int scale, dfl_rgb col, int step);

/* An 8-bit RGB image: px [h][w][3]. */
typedef struct dfl__raster {
    int w, h;
    const uint8_t *px;
} dfl__raster;

/* The PNG encoder (render_png.c): r to path via a temporary file renamed into place.
 * DFL_ERR_EXISTS, DFL_ERR_IO, DFL_ERR_NOMEM. */
dfl_status dfl__png_encode(const dfl__raster *r, const char *path, int overwrite, const char *const *text_keys,
                           const char *const *text_values, int n_text, dfl_error *err);

#endif
