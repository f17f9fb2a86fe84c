/* render_png.c — an 8-bit RGB raster as a PNG via libpng (the only file that includes
 * png.h), written to a temporary file beside the destination and renamed. Kept
 * hand-written because it wins: cairo's PNG writer is serial zlib level 6, this one
 * deflates level 1 in parallel pieces (attnmap's fast path, bench/attnmap.sh).
 *
 * libpng frames the file (signature, IHDR, tEXt, chunk CRCs); the image data's zlib
 * stream is made here, in IDAT_SEGMENTS pieces compressed in parallel as pigz does:
 * each piece is raw deflate primed with the 32 KB before it and ended on a byte
 * boundary (Z_SYNC_FLUSH), so the pieces concatenate into one valid stream whose
 * Adler-32 is combined from theirs. The fixed piece count makes the file the same
 * whatever the number of threads. */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/atomic.h"
#include "render/render_internal.h"

#define IDAT_SEGMENTS 4
#define IDAT_CHUNK    ((size_t)1 << 18) /* bytes of zlib stream per IDAT chunk */
#define WINDOW        32768

typedef struct png_ctx {
    jmp_buf jump;
    char msg[200];
} png_ctx;

static void on_error(png_structp png, png_const_charp msg)
{
    png_ctx *ctx = png_get_error_ptr(png);
    snprintf(ctx->msg, sizeof ctx->msg, "%s", msg);
    longjmp(ctx->jump, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* the library never prints */
}

/* Everything libpng touches after setjmp lives in this struct, so a longjmp back
 * cannot leave a clobbered local behind. */
typedef struct png_job {
    png_ctx ctx;
    FILE *f;
    png_structp png;
    png_infop info;
    png_text text[8];
    int ntext;
    unsigned char *stream; /* [stream_len] the image's zlib stream */
    size_t stream_len;
    unsigned char *mem; /* dfl_png_encode: [mem_len] of [mem_cap] bytes written so far */
    size_t mem_len, mem_cap;
} png_job;

/* ------------------------------------------------------------ image stream */

typedef struct segment {
    z_stream z;
    int ready;
    int y0, y1;          /* this piece: canvas rows [y0, y1) */
    unsigned char *dict; /* [WINDOW] the scanline bytes just before it */
    unsigned char *out;  /* [cap] */
    size_t cap, len, n;  /* n: scanline bytes in */
    uLong adler;
    int ok;
} segment;

/* Deflate the scanlines of rows [g->y0, g->y1): each is the filter byte 0 (None:
 * heatmaps compress no better filtered) and the row's RGB bytes, fed from the canvas. */
static void compress_segment(segment *g, const dfl__raster *c, int last)
{
    static const unsigned char filter_none = 0;
    const size_t w3 = (size_t)c->w * 3;
    g->z.next_out = g->out;
    g->z.avail_out = (uInt)g->cap;
    g->adler = adler32(0L, Z_NULL, 0);
    g->ok = 1;
    for (int y = g->y0; g->ok && y < g->y1; y++)
        for (int part = 0; part < 2; part++) {
            const unsigned char *in = part ? c->px + (size_t)y * w3 : &filter_none;
            size_t n = part ? w3 : 1;
            int flush = y == g->y1 - 1 && part ? (last ? Z_FINISH : Z_SYNC_FLUSH) : Z_NO_FLUSH;
            g->z.next_in = (Bytef *)(uintptr_t)in;
            g->z.avail_in = (uInt)n;
            int rc = deflate(&g->z, flush);
            g->ok = (flush == Z_FINISH ? rc == Z_STREAM_END : rc == Z_OK) && g->z.avail_in == 0;
            g->adler = adler32(g->adler, in, (uInt)n);
            g->n += n;
        }
    g->len = g->cap - g->z.avail_out;
}

/* The zlib stream of the canvas's scanlines, deflate level 1, in j->stream. 0 on
 * failure (out of memory, zlib error). */
static int compress_image(png_job *j, const dfl__raster *c)
{
    const size_t w3 = (size_t)c->w * 3, row = 1 + w3;
    segment seg[IDAT_SEGMENTS];
    memset(seg, 0, sizeof seg);
    int nseg = c->h < IDAT_SEGMENTS ? c->h : IDAT_SEGMENTS, ok = 1;
    /* streams, dictionaries and buffers made here: the parallel loop only compresses */
    for (int k = 0; ok && k < nseg; k++) {
        segment *g = &seg[k];
        g->y0 = (int)((int64_t)c->h * k / nseg);
        g->y1 = (int)((int64_t)c->h * (k + 1) / nseg);
        ok = deflateInit2(&g->z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK;
        g->ready = ok;
        if (ok && k > 0 && (ok = (g->dict = malloc(WINDOW)) != NULL)) {
            /* the last WINDOW scanline bytes before row y0, filter bytes included */
            size_t d = (size_t)g->y0 * row < WINDOW ? (size_t)g->y0 * row : WINDOW;
            for (size_t i = 0, pos = (size_t)g->y0 * row - d; i < d; i++, pos++) {
                size_t y = pos / row, x = pos % row;
                g->dict[i] = x == 0 ? 0 : c->px[y * w3 + x - 1];
            }
            ok = deflateSetDictionary(&g->z, g->dict, (uInt)d) == Z_OK;
        }
        g->cap = deflateBound(&g->z, (uLong)((size_t)(g->y1 - g->y0) * row)) + 64;
        ok = ok && (g->out = malloc(g->cap)) != NULL;
    }
    if (ok) {
#pragma omp parallel for schedule(dynamic, 1)
        for (int k = 0; k < nseg; k++)
            compress_segment(&seg[k], c, k == nseg - 1);
    }
    size_t len = 2 + 4;
    for (int k = 0; k < nseg; k++) {
        ok = ok && seg[k].ok;
        len += seg[k].len;
    }
    if (ok && (j->stream = malloc(len))) {
        /* zlib header: deflate, 32 KB window, "fastest" level; check bits make it % 31 == 0 */
        j->stream[0] = 0x78;
        j->stream[1] = 0x01;
        size_t at = 2;
        uLong adler = 1L;
        for (int k = 0; k < nseg; k++) {
            memcpy(j->stream + at, seg[k].out, seg[k].len);
            at += seg[k].len;
            adler = k == 0 ? seg[k].adler : adler32_combine(adler, seg[k].adler, (z_off_t)seg[k].n);
        }
        for (int b = 0; b < 4; b++)
            j->stream[at++] = (unsigned char)(adler >> (24 - 8 * b));
        j->stream_len = at;
    } else {
        ok = 0;
    }
    for (int k = 0; k < nseg; k++) {
        if (seg[k].ready) deflateEnd(&seg[k].z);
        free(seg[k].out);
        free(seg[k].dict);
    }
    return ok;
}

static int write_file(png_job *j, const dfl__raster *c, const char *const *keys, const char *const *values, int nt)
{
    if (nt > 8) nt = 8;
    if (nt < 0) nt = 0;
    for (int i = 0; i < nt; i++) {
        memset(&j->text[i], 0, sizeof j->text[i]);
        j->text[i].compression = PNG_TEXT_COMPRESSION_NONE;
        j->text[i].key = (png_charp)keys[i];
        j->text[i].text = (png_charp)values[i];
        j->text[i].text_length = strlen(values[i]);
    }
    j->ntext = nt;
    if (setjmp(j->ctx.jump)) return 0;
    if (j->f) png_init_io(j->png, j->f);
    png_set_IHDR(j->png, j->info, (png_uint_32)c->w, (png_uint_32)c->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (j->ntext > 0) png_set_text(j->png, j->info, j->text, j->ntext);
    png_write_info(j->png, j->info);
    for (size_t at = 0; at < j->stream_len; at += IDAT_CHUNK) {
        size_t n = j->stream_len - at < IDAT_CHUNK ? j->stream_len - at : IDAT_CHUNK;
        png_write_chunk(j->png, (png_const_bytep) "IDAT", j->stream + at, n);
    }
    png_write_chunk(j->png, (png_const_bytep) "IEND", NULL, 0);
    return 1;
}

dfl_status dfl__png_encode(const dfl__raster *c, const char *path, int overwrite, const char *const *text_keys,
                           const char *const *text_values, int n_text, dfl_error *err)
{
    png_job *j = calloc(1, sizeof *j);
    if (!j) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
    dfl_atomic a;
    dfl_status s = dfl__atomic_open(&a, path, overwrite, err);
    if (!s) {
        j->f = a.f;
        j->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &j->ctx, on_error, on_warning);
        j->info = j->png ? png_create_info_struct(j->png) : NULL;
        if (!j->png || !j->info)
            s = dfl__fail(err, DFL_ERR_NOMEM, "%s: libpng cannot start", path);
        else if (!compress_image(j, c))
            s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory compressing the image", path);
        else if (!write_file(j, c, text_keys, text_values, n_text))
            s = dfl__os_reason() ? dfl__fail(err, DFL_ERR_IO, "%s: cannot write: %s", path, dfl__os_reason())
                                 : dfl__fail(err, DFL_ERR_IO, "%s: libpng: %s", path, j->ctx.msg);
        if (j->png) png_destroy_write_struct(&j->png, j->info ? &j->info : NULL);
        s = dfl__atomic_close(&a, s, err); /* a full disk shows up at close time */
    }
    free(j->stream);
    free(j);
    return s;
}

/* libpng's write callback for dfl_png_encode: append to j->mem, doubling it. */
static void mem_write(png_structp png, png_bytep data, png_size_t n)
{
    png_job *j = png_get_io_ptr(png);
    if (n > j->mem_cap - j->mem_len) {
        size_t cap = j->mem_cap ? j->mem_cap : 4096;
        while (cap - j->mem_len < n)
            if (!dfl__mul_ok(cap, 2, &cap)) png_error(png, "image too large");
        unsigned char *m = realloc(j->mem, cap);
        if (!m) png_error(png, "out of memory");
        j->mem = m;
        j->mem_cap = cap;
    }
    memcpy(j->mem + j->mem_len, data, n);
    j->mem_len += n;
}

static void mem_flush(png_structp png)
{
    (void)png;
}

dfl_status dfl_png_encode(int w, int h, const uint8_t *rgb, unsigned char **out, size_t *len, dfl_error *err)
{
    const dfl__raster image = {w, h, rgb}, *c = &image;
    *out = NULL;
    *len = 0;
    png_job *j = calloc(1, sizeof *j);
    if (!j) return dfl__fail(err, DFL_ERR_NOMEM, "png: out of memory");
    dfl_status s = DFL_OK;
    j->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &j->ctx, on_error, on_warning);
    j->info = j->png ? png_create_info_struct(j->png) : NULL;
    if (!j->png || !j->info)
        s = dfl__fail(err, DFL_ERR_NOMEM, "png: libpng cannot start");
    else if (!compress_image(j, c))
        s = dfl__fail(err, DFL_ERR_NOMEM, "png: out of memory compressing the image");
    else {
        png_set_write_fn(j->png, j, mem_write, mem_flush);
        if (!write_file(j, c, NULL, NULL, 0)) s = dfl__fail(err, DFL_ERR_NOMEM, "png: libpng: %s", j->ctx.msg);
    }
    if (j->png) png_destroy_write_struct(&j->png, j->info ? &j->info : NULL);
    if (!s) {
        *out = j->mem;
        *len = j->mem_len;
    } else {
        free(j->mem);
    }
    free(j->stream);
    free(j);
    return s;
}
