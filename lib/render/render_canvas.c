/* render_canvas.c — the canvas: a cairo recording surface in canvas units, shapes,
 * text laid out by Pango (fontconfig finds the fonts and the fallbacks), and the
 * writer that renders the recording to PNG, SVG or PDF by the output's extension. */
#include <math.h>
#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <fontconfig/fontconfig.h>
#include <pango/pangocairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/atomic.h"
#include "render/render_internal.h"

/* Font size of scale 1 in canvas units: DejaVu Sans at 8 units has a 9.3-unit line,
 * which fits the DFL_FONT_H line box. */
#define FONT_UNITS 8.0

/* ------------------------------------------------------------------ canvas */

dfl_status dfl_canvas_create(int w, int h, dfl_rgb bg, dfl_canvas **out, dfl_error *err)
{
    *out = NULL;
    if (w < 1 || h < 1 || w > DFL_CANVAS_MAX || h > DFL_CANVAS_MAX)
        return dfl__fail(err, DFL_ERR_USAGE, "image size %d x %d is outside 1 to %d pixels", w, h, DFL_CANVAS_MAX);
    dfl_canvas *c = calloc(1, sizeof *c);
    dfl__canvas_impl *k = calloc(1, sizeof *k);
    if (!c || !k) {
        free(c);
        free(k);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a %d x %d image", w, h);
    }
    cairo_rectangle_t ext = {0, 0, w, h};
    k->rec = cairo_recording_surface_create(CAIRO_CONTENT_COLOR, &ext);
    k->cr = cairo_create(k->rec);
    k->font = strdup(DFL_DEFAULT_FONT);
    if (cairo_status(k->cr) != CAIRO_STATUS_SUCCESS || !k->font) {
        c->impl = k;
        dfl_canvas_destroy(c);
        return dfl__fail(err, DFL_ERR_NOMEM, "cairo cannot start a %d x %d image", w, h);
    }
    c->w = w;
    c->h = h;
    c->impl = k;
    k->dirty = 1;
    dfl_canvas_fill(c, 0, 0, w, h, bg);
    *out = c;
    return DFL_OK;
}

void dfl_canvas_destroy(dfl_canvas *c)
{
    if (!c) return;
    if (c->impl) {
        if (c->impl->cr) cairo_destroy(c->impl->cr);
        if (c->impl->rec) cairo_surface_destroy(c->impl->rec);
        for (size_t i = 0; i < c->impl->n_kept; i++)
            cairo_surface_destroy(c->impl->kept[i]);
        free(c->impl->kept);
        free(c->impl->font);
        free(c->impl->px);
        free(c->impl);
    }
    free(c);
}

void dfl_canvas_set_font(dfl_canvas *c, const char *family)
{
    char *f = strdup(family && *family ? family : DFL_DEFAULT_FONT);
    if (!f) return; /* out of memory: keep the current font */
    free(c->impl->font);
    c->impl->font = f;
}

cairo_t *dfl__canvas_cr(dfl_canvas *c)
{
    c->impl->dirty = 1;
    return c->impl->cr;
}

void dfl__canvas_touch(dfl_canvas *c)
{
    c->impl->dirty = 1;
}

void dfl__canvas_keep(dfl_canvas *c, cairo_surface_t *img)
{
    dfl__canvas_impl *k = c->impl;
    if (k->n_kept == k->cap_kept) {
        size_t cap = k->cap_kept ? 2 * k->cap_kept : 8;
        cairo_surface_t **p = cap <= SIZE_MAX / sizeof *p ? realloc(k->kept, cap * sizeof *p) : NULL;
        if (!p) {
            cairo_surface_destroy(img);
            return;
        }
        k->kept = p;
        k->cap_kept = cap;
    }
    k->kept[k->n_kept++] = img;
}

void dfl__set_rgb(cairo_t *cr, dfl_rgb col)
{
    cairo_set_source_rgb(cr, col.r / 255.0, col.g / 255.0, col.b / 255.0);
}

/* ---------------------------------------------------------------- raster */

/* The recording rendered at `scale` pixels per unit into an RGB buffer [H][W][3]
 * (caller frees). NULL when out of memory or too large. */
static uint8_t *rasterize(const dfl_canvas *c, double scale, int *W, int *H)
{
    double fw = ceil(c->w * scale - 1e-9), fh = ceil(c->h * scale - 1e-9);
    if (!(fw >= 1 && fh >= 1 && fw <= DFL_CANVAS_MAX && fh <= DFL_CANVAS_MAX)) return NULL;
    int w = (int)fw, h = (int)fh;
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        return NULL;
    }
    cairo_t *cr = cairo_create(img);
    cairo_scale(cr, scale, scale);
    cairo_set_source_surface(cr, c->impl->rec, 0, 0);
    /* the recording is replayed (vectors redrawn at this resolution); images inside keep
     * their own nearest-neighbour filter */
    cairo_paint(cr);
    cairo_destroy(cr);
    cairo_surface_flush(img);
    size_t n;
    uint8_t *rgb = NULL;
    if (dfl__mul_ok((size_t)w, (size_t)h, &n)) rgb = dfl__alloc_array(n, 3);
    if (rgb) {
        const uint8_t *src = cairo_image_surface_get_data(img);
        int stride = cairo_image_surface_get_stride(img);
        /* RGB24 is one native-endian uint32 per pixel: 0x00RRGGBB */
#pragma omp parallel for schedule(static) if ((size_t)w * (size_t)h >= 262144)
        for (int y = 0; y < h; y++) {
            const uint32_t *row = (const uint32_t *)(const void *)(src + (size_t)y * (size_t)stride);
            uint8_t *o = rgb + (size_t)y * (size_t)w * 3;
            for (int x = 0; x < w; x++) {
                uint32_t p = row[x];
                o[3 * x] = (uint8_t)(p >> 16);
                o[3 * x + 1] = (uint8_t)(p >> 8);
                o[3 * x + 2] = (uint8_t)p;
            }
        }
    }
    cairo_surface_destroy(img);
    *W = w;
    *H = h;
    return rgb;
}

dfl_rgb dfl_canvas_get(const dfl_canvas *c, int x, int y)
{
    dfl_rgb k = {0, 0, 0};
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return k;
    dfl__canvas_impl *im = c->impl;
    if (im->dirty || !im->px) {
        free(im->px);
        int w, h;
        im->px = rasterize(c, 1.0, &w, &h);
        im->dirty = 0;
        if (!im->px) return k;
    }
    const uint8_t *p = im->px + 3 * ((size_t)y * (size_t)c->w + (size_t)x);
    k.r = p[0];
    k.g = p[1];
    k.b = p[2];
    return k;
}

/* ------------------------------------------------------------------ shapes */

void dfl_canvas_fill(dfl_canvas *c, int x, int y, int w, int h, dfl_rgb col)
{
    if (w <= 0 || h <= 0) return;
    cairo_t *cr = dfl__canvas_cr(c);
    dfl__set_rgb(cr, col);
    cairo_rectangle(cr, x, y, w, h);
    cairo_fill(cr);
}

void dfl_canvas_frame(dfl_canvas *c, int x, int y, int w, int h, dfl_rgb col)
{
    if (w <= 0 || h <= 0) return;
    cairo_t *cr = dfl__canvas_cr(c);
    dfl__set_rgb(cr, col);
    cairo_set_line_width(cr, 1.0);
    /* the stroke's centre on pixel centres: a crisp 1-unit line just inside */
    cairo_rectangle(cr, x + 0.5, y + 0.5, w - 1, h - 1);
    cairo_stroke(cr);
}

void dfl_canvas_line(dfl_canvas *c, int x0, int y0, int x1, int y1, dfl_rgb col)
{
    cairo_t *cr = dfl__canvas_cr(c);
    dfl__set_rgb(cr, col);
    cairo_set_line_width(cr, 1.0);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_SQUARE);
    cairo_move_to(cr, x0 + 0.5, y0 + 0.5);
    cairo_line_to(cr, x1 + 0.5, y1 + 0.5);
    cairo_stroke(cr);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
}

void dfl_canvas_polyline(dfl_canvas *c, const double *x, const double *y, int n, double lw, dfl_dash dash, dfl_rgb col,
                         int cx, int cy, int cw, int ch)
{
    cairo_t *cr = dfl__canvas_cr(c);
    cairo_save(cr);
    cairo_rectangle(cr, cx, cy, cw, ch);
    cairo_clip(cr);
    dfl__set_rgb(cr, col);
    cairo_set_line_width(cr, lw);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_cap(cr, dash == DFL_STROKE_DOTTED ? CAIRO_LINE_CAP_ROUND : CAIRO_LINE_CAP_BUTT);
    /* matplotlib's patterns in line widths: dashed 3.7 on 1.6 off, dotted 1 on 1.65 off */
    double dashed[2] = {3.7 * lw, 1.6 * lw}, dotted[2] = {0.0, 2.0 * lw};
    if (dash == DFL_STROKE_DASHED) cairo_set_dash(cr, dashed, 2, 0);
    if (dash == DFL_STROKE_DOTTED) cairo_set_dash(cr, dotted, 2, 0);
    int open = 0;
    for (int i = 0; i < n; i++) {
        /* values far outside the limits would overflow cairo's fixed point */
        if (!isfinite(x[i]) || !isfinite(y[i]) || fabs(x[i]) > 1e6 || fabs(y[i]) > 1e6) {
            open = 0;
            continue;
        }
        if (open)
            cairo_line_to(cr, x[i], y[i]);
        else
            cairo_move_to(cr, x[i], y[i]);
        open = 1;
    }
    cairo_stroke(cr);
    cairo_restore(cr);
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

size_t dfl_text_length(const char *s)
{
    size_t n = 0;
    while (*s) {
        next_cp(&s);
        n++;
    }
    return n;
}

/* One Pango context for every layout, without hinting: glyph positions then do not
 * depend on the output's resolution, so PNG, SVG and PDF share one layout. Created
 * on first use and kept for the process (Pango's font map is process-wide anyway);
 * not thread-safe: text is drawn from one thread. */
static PangoContext *g_text_ctx;

/* At exit in sanitizer builds: the context, Pango's font map and fontconfig's
 * configuration are released, so leak checkers see only what the program leaked
 * (elsewhere the process's end frees them faster). */
#ifdef __SANITIZE_ADDRESS__
static void text_context_release(void)
{
    if (g_text_ctx) g_object_unref(g_text_ctx);
    g_text_ctx = NULL;
    pango_cairo_font_map_set_default(NULL);
    FcFini();
}
#endif

static PangoContext *text_context(void)
{
    PangoContext *ctx = g_text_ctx;
    if (!ctx) {
        g_text_ctx = ctx = pango_font_map_create_context(pango_cairo_font_map_get_default());
#ifdef __SANITIZE_ADDRESS__
        atexit(text_context_release);
#endif
        cairo_font_options_t *fo = cairo_font_options_create();
        cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
        cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
        cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
        pango_cairo_context_set_font_options(ctx, fo);
        cairo_font_options_destroy(fo);
    }
    return ctx;
}

/* A one-line layout of text (invalid UTF-8 replaced) in family at scale; *w, *h its
 * logical size in units. Caller unrefs. */
static PangoLayout *make_layout(const char *family, const char *text, int scale, double *w, double *h)
{
    if (scale < 1) scale = 1;
    PangoLayout *l = pango_layout_new(text_context());
    PangoFontDescription *fd = pango_font_description_new();
    pango_font_description_set_family(fd, family);
    pango_font_description_set_absolute_size(fd, FONT_UNITS * scale * PANGO_SCALE);
    pango_layout_set_font_description(l, fd);
    pango_font_description_free(fd);
    pango_layout_set_single_paragraph_mode(l, TRUE);
    if (g_utf8_validate(text, -1, NULL)) {
        pango_layout_set_text(l, text, -1);
    } else {
        gchar *ok = g_utf8_make_valid(text, -1);
        pango_layout_set_text(l, ok, -1);
        g_free(ok);
    }
    PangoRectangle log;
    pango_layout_get_extents(l, NULL, &log);
    *w = (double)log.width / PANGO_SCALE;
    *h = (double)log.height / PANGO_SCALE;
    return l;
}

static int width_in(const char *family, const char *s, int scale)
{
    if (!s || !*s) return 0;
    double w, h;
    PangoLayout *l = make_layout(family, s, scale, &w, &h);
    g_object_unref(l);
    return (int)ceil(w - 1e-6);
}

int dfl_text_width(const char *s, int scale)
{
    return width_in(DFL_DEFAULT_FONT, s, scale);
}

int dfl_font_text_width(const char *family, const char *s, int scale)
{
    return width_in(family ? family : DFL_DEFAULT_FONT, s, scale);
}

int dfl_canvas_text_width(const dfl_canvas *c, const char *s, int scale)
{
    return width_in(c->impl->font, s, scale);
}

/* Draws text with its line box's top-left at the origin of the current transform
 * shifted by dx along the line (the alignment offset). */
static void show_text(dfl_canvas *c, const char *s, int scale, dfl_rgb col, dfl_align align)
{
    double w, h;
    PangoLayout *l = make_layout(c->impl->font, s, scale, &w, &h);
    cairo_t *cr = dfl__canvas_cr(c);
    double dx = align == DFL_ALIGN_CENTER ? -w / 2 : align == DFL_ALIGN_RIGHT ? -w : 0;
    dfl__set_rgb(cr, col);
    cairo_move_to(cr, dx, (DFL_FONT_H * (scale < 1 ? 1 : scale) - h) / 2);
    pango_cairo_show_layout(cr, l);
    cairo_new_path(cr);
    g_object_unref(l);
}

/* One line of text anchored at (x, y); up: turned a quarter left about the anchor, to run upwards. */
static void text_at(dfl_canvas *c, int x, int y, int up, const char *s, int scale, dfl_rgb col, dfl_align align)
{
    if (!s || !*s) return;
    cairo_t *cr = dfl__canvas_cr(c);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    if (up) cairo_rotate(cr, -M_PI / 2); /* the line runs up; its top faces left */
    show_text(c, s, scale, col, align);
    cairo_restore(cr);
}

void dfl_canvas_text(dfl_canvas *c, int x, int y, const char *s, int scale, dfl_rgb col, dfl_align align)
{
    text_at(c, x, y, 0, s, scale, col, align);
}

void dfl_canvas_text_up(dfl_canvas *c, int x, int y, const char *s, int scale, dfl_rgb col, dfl_align align)
{
    text_at(c, x, y, 1, s, scale, col, align);
}

const char *dfl__text_line(const char *s, char *line, size_t cap)
{
    const char *nl = strchr(s, '\n');
    size_t len = nl ? (size_t)(nl - s) : strlen(s);
    if (len >= cap) len = cap - 1;
    memcpy(line, s, len);
    line[len] = '\0';
    return nl ? nl + 1 : NULL;
}

int dfl__canvas_text_lines(dfl_canvas *c, int x, int y, const char *s, int scale, dfl_rgb col, int step)
{
    char line[512];
    while (s && *s) {
        s = dfl__text_line(s, line, sizeof line);
        dfl_canvas_text(c, x, y, line, scale, col, DFL_ALIGN_LEFT);
        y += step;
    }
    return y;
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

/* ------------------------------------------------------------------ output */

dfl_status dfl_format_of_path(const char *path, dfl_format *out, dfl_error *err)
{
    const char *dot = path ? strrchr(path, '.') : NULL;
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (dot && (!slash || dot > slash)) {
        if (!strcasecmp(dot, ".png")) return *out = DFL_FORMAT_PNG, DFL_OK;
        if (!strcasecmp(dot, ".svg")) return *out = DFL_FORMAT_SVG, DFL_OK;
        if (!strcasecmp(dot, ".pdf")) return *out = DFL_FORMAT_PDF, DFL_OK;
    }
    return dfl__fail(err, DFL_ERR_USAGE, "%s: the output's extension must be .png, .svg or .pdf",
                     path ? path : "(no path)");
}

dfl_output dfl_output_default(void)
{
    dfl_output o;
    memset(&o, 0, sizeof o);
    return o;
}

/* A growable byte buffer for cairo's stream writers. */
typedef struct membuf {
    unsigned char *p;
    size_t n, cap;
    int bad;
} membuf;

static cairo_status_t membuf_write(void *closure, const unsigned char *data, unsigned int len)
{
    membuf *b = closure;
    if (b->bad) return CAIRO_STATUS_NO_MEMORY;
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->n + len) {
            if (cap > SIZE_MAX / 2) return b->bad = 1, CAIRO_STATUS_NO_MEMORY;
            cap *= 2;
        }
        unsigned char *q = realloc(b->p, cap);
        if (!q) return b->bad = 1, CAIRO_STATUS_NO_MEMORY;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    return CAIRO_STATUS_SUCCESS;
}

/* XML-escape s into f. */
static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
}

/* The SVG cairo wrote, with what viewers need to keep heatmap cells sharp: cairo 1.16
 * does not say that its images must not be smoothed, so every <image> gets
 * image-rendering (the attribute for SVG viewers, CSS pixelated for browsers), and a
 * <title> goes after the opening <svg> tag. */
static int write_svg_patched(FILE *f, const membuf *b, const char *title)
{
    const char *s = (const char *)b->p, *end = s + b->n;
    const char *svg = memmem(s, b->n, "<svg", 4);
    const char *gt = svg ? memchr(svg, '>', (size_t)(end - svg)) : NULL;
    if (!gt) return 0;
    fwrite(s, 1, (size_t)(gt + 1 - s), f);
    fputs("\n<style>image { image-rendering: optimizeSpeed; image-rendering: pixelated; }</style>\n", f);
    if (title) {
        fputs("<title>", f);
        xml_text(f, title);
        fputs("</title>\n", f);
    }
    const char *p = gt + 1;
    for (;;) {
        const char *img = memmem(p, (size_t)(end - p), "<image ", 7);
        if (!img) break;
        fwrite(p, 1, (size_t)(img - p), f);
        fputs("<image image-rendering=\"optimizeSpeed\" ", f);
        p = img + 7;
    }
    fwrite(p, 1, (size_t)(end - p), f);
    return !ferror(f);
}

/* Replays the recording onto a vector surface scaled by k (points per unit). */
static cairo_status_t replay(const dfl_canvas *c, cairo_surface_t *s, double k)
{
    cairo_t *cr = cairo_create(s);
    cairo_scale(cr, k, k);
    cairo_set_source_surface(cr, c->impl->rec, 0, 0);
    cairo_paint(cr);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    cairo_surface_finish(s);
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(s);
    return st;
}

static dfl_status write_vector(const dfl_canvas *c, const char *path, const char *tmp, dfl_format fmt, double k,
                               const dfl_output *o, dfl_error *err)
{
    double wpt = c->w * k, hpt = c->h * k;
    if (fmt == DFL_FORMAT_PDF) {
        cairo_surface_t *s = cairo_pdf_surface_create(tmp, wpt, hpt);
        if (o->title) cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_TITLE, o->title);
        cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATOR, o->software ? o->software : "difflens");
        cairo_status_t st = replay(c, s, k);
        cairo_surface_destroy(s);
        if (st != CAIRO_STATUS_SUCCESS)
            return dfl__fail(err, st == CAIRO_STATUS_NO_MEMORY ? DFL_ERR_NOMEM : DFL_ERR_IO, "%s: cairo: %s", path,
                             cairo_status_to_string(st));
        return DFL_OK;
    }
    membuf b = {NULL, 0, 0, 0};
    cairo_surface_t *s = cairo_svg_surface_create_for_stream(membuf_write, &b, wpt, hpt);
    cairo_svg_surface_restrict_to_version(s, CAIRO_SVG_VERSION_1_1);
    cairo_status_t st = replay(c, s, k);
    cairo_surface_destroy(s);
    if (st != CAIRO_STATUS_SUCCESS || b.bad) {
        free(b.p);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: cairo: %s", path, cairo_status_to_string(st));
    }
    FILE *f = fopen(tmp, "wb");
    int ok = f && write_svg_patched(f, &b, o->title);
    if (f && fclose(f) != 0) ok = 0;
    free(b.p);
    if (!ok) return dfl__fail(err, DFL_ERR_IO, "%s: cannot write", path);
    return DFL_OK;
}

dfl_status dfl_canvas_write(const dfl_canvas *c, const char *path, int overwrite, const dfl_output *o, dfl_error *err)
{
    dfl_output def = dfl_output_default();
    if (!o) o = &def;
    dfl_format fmt;
    dfl_status s = dfl_format_of_path(path, &fmt, err);
    if (s) return s;
    if (!(o->width_in >= 0 && o->width_in <= 1000) || !(o->dpi >= 0 && o->dpi <= 10000) ||
        !(o->scale >= 0 && o->scale <= 64))
        return dfl__fail(err, DFL_ERR_USAGE, "%s: width %g in, %g dpi or scale %g out of range", path, o->width_in,
                         o->dpi, o->scale);
    /* inches per unit: as asked, or the default resolution */
    double in_per_unit = o->width_in > 0 ? o->width_in / c->w : 1.0 / DFL_UNITS_PER_INCH;
    if (fmt == DFL_FORMAT_PNG) {
        double k = o->dpi > 0 ? o->dpi * in_per_unit : (o->scale > 0 ? o->scale : 1.0);
        int W, H;
        if (!(c->w * k <= DFL_CANVAS_MAX && c->h * k <= DFL_CANVAS_MAX))
            return dfl__fail(err, DFL_ERR_USAGE, "%s: %.0f x %.0f pixels is more than %d a side", path, c->w * k,
                             c->h * k, DFL_CANVAS_MAX);
        uint8_t *px = rasterize(c, k, &W, &H);
        if (!px) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory for a %d x %d image", path, W, H);
        const char *keys[2] = {"Software", "Title"};
        const char *vals[2] = {o->software ? o->software : "difflens", o->title};
        dfl__raster r = {W, H, px};
        s = dfl__png_encode(&r, path, overwrite, keys, vals, o->title ? 2 : 1, err);
        free(px);
        return s;
    }
    if ((s = dfl__check_overwrite(path, overwrite, err))) return s;
    char *tmp = NULL;
    if ((s = dfl__make_tmp(path, &tmp, err))) return s;
    s = write_vector(c, path, tmp, fmt, 72.0 * in_per_unit, o, err);
    if (s) {
        remove(tmp);
        free(tmp);
        return s;
    }
    s = dfl__commit_tmp(tmp, path, overwrite, err);
    free(tmp);
    return s;
}

dfl_status dfl_png_write(const dfl_canvas *c, const char *path, int overwrite, const char *const *text_keys,
                         const char *const *text_values, int n_text, dfl_error *err)
{
    dfl_output o = dfl_output_default();
    for (int i = 0; i < n_text; i++) {
        if (!strcmp(text_keys[i], "Software")) o.software = text_values[i];
        if (!strcmp(text_keys[i], "Title")) o.title = text_values[i];
    }
    return dfl_canvas_write(c, path, overwrite, &o, err);
}
