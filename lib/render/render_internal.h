/* render_internal.h — data shared between the render_*.c files (dfl__ prefix). */
#ifndef DFL_RENDER_INTERNAL_H
#define DFL_RENDER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "render/render.h"

/* Published colormap tables (render_tables.c): [256][rgb] in [0, 1]. */
extern const float dfl__cmap_viridis[256][3];
extern const float dfl__cmap_magma[256][3];
/* ColorBrewer RdBu's 11 anchors, red to blue, 8-bit. */
extern const uint8_t dfl__cmap_rdbu_anchors[11][3];

/* The font: dfl__font_count glyphs of DFL_FONT_H rows; row bits 5..0 = pixels left
 * to right. dfl__font_codepoints[i] is glyph i's code point (ASCII 32..126 first). */
extern const uint32_t dfl__font_codepoints[];
extern const uint8_t dfl__font_glyphs[][DFL_FONT_H];
extern const size_t dfl__font_count;

#endif
