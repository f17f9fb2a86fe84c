/* render_canvas.c — the RGB canvas: creation, pixels, rectangles, lines and text in
 * the built-in 6x10 bitmap font. Every drawing call clips to the canvas. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "render/render_internal.h"

/* ------------------------------------------------------------------ canvas */

dfl_status dfl_canvas_create(int w, int h, dfl_rgb bg, dfl_canvas **out, dfl_error *err)
{
    *out = NULL;
    if (w < 1 || h < 1 || w > DFL_CANVAS_MAX || h > DFL_CANVAS_MAX)
        return dfl__fail(err, DFL_ERR_USAGE, "image size %d x %d is outside 1 to %d pixels", w, h, DFL_CANVAS_MAX);
    size_t n;
    dfl_canvas *c = calloc(1, sizeof *c);
    /* px [h][w][3] */
    if (!c || !dfl__mul_ok((size_t)w, (size_t)h, &n) || !(c->px = dfl__alloc_array(n, 3))) {
        free(c);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a %d x %d image", w, h);
    }
    c->w = w;
    c->h = h;
    if (bg.r == bg.g && bg.g == bg.b) {
        memset(c->px, bg.r, 3 * n); /* grey or white: one byte value */
    } else {
        for (size_t i = 0; i < n; i++) {
            c->px[3 * i] = bg.r;
            c->px[3 * i + 1] = bg.g;
            c->px[3 * i + 2] = bg.b;
        }
    }
    *out = c;
    return DFL_OK;
}

void dfl_canvas_destroy(dfl_canvas *c)
{
    if (!c) return;
    free(c->px);
    free(c);
}

dfl_rgb dfl_canvas_get(const dfl_canvas *c, int x, int y)
{
    dfl_rgb k = {0, 0, 0};
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return k;
    const uint8_t *p = c->px + 3 * ((size_t)y * (size_t)c->w + (size_t)x);
    k.r = p[0];
    k.g = p[1];
    k.b = p[2];
    return k;
}

void dfl_canvas_set(dfl_canvas *c, int x, int y, dfl_rgb col)
{
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
    uint8_t *p = c->px + 3 * ((size_t)y * (size_t)c->w + (size_t)x);
    p[0] = col.r;
    p[1] = col.g;
    p[2] = col.b;
}

void dfl_canvas_fill(dfl_canvas *c, int x, int y, int w, int h, dfl_rgb col)
{
    int x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
    int x1 = x + w > c->w ? c->w : x + w, y1 = y + h > c->h ? c->h : y + h;
    for (int yy = y0; yy < y1; yy++) {
        uint8_t *p = c->px + 3 * ((size_t)yy * (size_t)c->w + (size_t)x0);
        for (int xx = x0; xx < x1; xx++, p += 3) {
            p[0] = col.r;
            p[1] = col.g;
            p[2] = col.b;
        }
    }
}

void dfl_canvas_frame(dfl_canvas *c, int x, int y, int w, int h, dfl_rgb col)
{
    if (w <= 0 || h <= 0) return;
    dfl_canvas_fill(c, x, y, w, 1, col);
    dfl_canvas_fill(c, x, y + h - 1, w, 1, col);
    dfl_canvas_fill(c, x, y, 1, h, col);
    dfl_canvas_fill(c, x + w - 1, y, 1, h, col);
}

void dfl_canvas_line(dfl_canvas *c, int x0, int y0, int x1, int y1, dfl_rgb col)
{
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int e = dx + dy;
    for (;;) {
        dfl_canvas_set(c, x0, y0, col);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * e;
        if (e2 >= dy) {
            e += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            e += dx;
            y0 += sy;
        }
    }
}

/* -------------------------------------------------------------------- text */

/* Decode one UTF-8 code point at *s and advance; malformed bytes give U+FFFD. */
static uint32_t next_cp(const char **s)
{
    const unsigned char *p = (const unsigned char *)*s;
    uint32_t cp;
    int extra;
    if (p[0] < 0x80) {
        cp = p[0];
        extra = 0;
    } else if ((p[0] & 0xe0) == 0xc0) {
        cp = p[0] & 0x1f;
        extra = 1;
    } else if ((p[0] & 0xf0) == 0xe0) {
        cp = p[0] & 0x0f;
        extra = 2;
    } else if ((p[0] & 0xf8) == 0xf0) {
        cp = p[0] & 0x07;
        extra = 3;
    } else {
        *s += 1;
        return 0xfffd;
    }
    for (int i = 1; i <= extra; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            *s += i;
            return 0xfffd;
        }
        cp = cp << 6 | (p[i] & 0x3f);
    }
    *s += 1 + extra;
    return cp;
}

/* Marks for what the font lacks: an empty box (a character it has no glyph for) and
 * U+21B5 (a line break in a token label). */
static const uint8_t glyph_box[DFL_FONT_H] = {0x00, 0x1E, 0x12, 0x12, 0x12, 0x12, 0x12, 0x1E, 0x00, 0x00};
static const uint8_t glyph_return[DFL_FONT_H] = {0x00, 0x02, 0x02, 0x02, 0x12, 0x3E, 0x10, 0x00, 0x00, 0x00};

static const uint8_t *font_glyph(uint32_t cp)
{
    if (cp >= 32 && cp < 127) return dfl__font_glyphs[cp - 32];
    for (size_t i = 95; i < dfl__font_count; i++)
        if (dfl__font_codepoints[i] == cp) return dfl__font_glyphs[i];
    return NULL;
}

/* Glyph rows of code point cp: the font's, else its base letter (é → e, ﬁ → f), else
 * a box, so that non-ASCII labels stay readable instead of turning into '?'. */
static const uint8_t *glyph(uint32_t cp)
{
    const uint8_t *g = font_glyph(cp);
    if (g) return g;
    if (cp == 0x21B5) return glyph_return;
    utf8proc_int32_t dec[32];
    int bc = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, dec, 32, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, &bc);
    if (n >= 1 && n <= 32 && (uint32_t)dec[0] != cp && (g = font_glyph((uint32_t)dec[0]))) return g;
    return glyph_box;
}

size_t dfl_text_length(const char *s)
{
    size_t n = 0;
    while (*s) {
        next_cp(&s);
        n++;
    }
    return n;
}

int dfl_text_width(const char *s, int scale) { return (int)dfl_text_length(s) * DFL_FONT_W * scale; }

/* One glyph with its top-left at (x, y); up = rotated 90° anticlockwise, its cell's
 * bottom-left at (x, y) and its top along x. */
static void draw_glyph(dfl_canvas *c, int x, int y, const uint8_t *g, int scale, dfl_rgb col, int up)
{
    for (int row = 0; row < DFL_FONT_H; row++)
        for (int bit = 0; bit < DFL_FONT_W; bit++) {
            if (!(g[row] >> (DFL_FONT_W - 1 - bit) & 1)) continue;
            if (up) dfl_canvas_fill(c, x + row * scale, y - (bit + 1) * scale, scale, scale, col);
            else dfl_canvas_fill(c, x + bit * scale, y + row * scale, scale, scale, col);
        }
}

void dfl_canvas_text(dfl_canvas *c, int x, int y, const char *s, int scale, dfl_rgb col, dfl_align align)
{
    if (scale < 1) scale = 1;
    int w = dfl_text_width(s, scale);
    if (align == DFL_ALIGN_CENTER) x -= w / 2;
    else if (align == DFL_ALIGN_RIGHT) x -= w;
    while (*s) {
        uint32_t cp = next_cp(&s);
        if (cp != ' ') draw_glyph(c, x, y, glyph(cp), scale, col, 0);
        x += DFL_FONT_W * scale;
    }
}

void dfl_canvas_text_up(dfl_canvas *c, int x, int y, const char *s, int scale, dfl_rgb col, dfl_align align)
{
    if (scale < 1) scale = 1;
    int w = dfl_text_width(s, scale);
    if (align == DFL_ALIGN_CENTER) y += w / 2;
    else if (align == DFL_ALIGN_RIGHT) y += w;
    while (*s) {
        uint32_t cp = next_cp(&s);
        if (cp != ' ') draw_glyph(c, x, y, glyph(cp), scale, col, 1);
        y -= DFL_FONT_W * scale;
    }
}

char *dfl_text_clip(char *dst, size_t cap, const char *src, size_t max_chars)
{
    if (cap == 0) return dst;
    size_t used = 0, chars = 0, total = dfl_text_length(src);
    const char *ell = "\xe2\x80\xa6"; /* … */
    int cut = total > max_chars;
    size_t keep = cut ? (max_chars > 0 ? max_chars - 1 : 0) : total;
    while (*src && chars < keep) {
        const char *start = src;
        uint32_t cp = next_cp(&src);
        size_t len = (size_t)(src - start);
        if (cp == '\n' || cp == '\r') {
            start = "\xe2\x86\xb5"; /* U+21B5: a visible line break */
            len = 3;
        } else if (cp < 32 || cp == 127) {
            start = " ";
            len = 1;
        }
        if (used + len + 1 > cap) break;
        memcpy(dst + used, start, len);
        used += len;
        chars++;
    }
    if (cut && max_chars > 0 && used + 4 <= cap) {
        memcpy(dst + used, ell, 3);
        used += 3;
    }
    dst[used] = '\0';
    return dst;
}
