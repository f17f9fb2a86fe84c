/* render_png.c — the canvas as an 8-bit RGB PNG via libpng (the only file that
 * includes png.h), written to a temporary file beside the destination and renamed. */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic.h"
#include "render_internal.h"

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
} png_job;

static int write_rows(png_job *j, const dfl_canvas *c, const char *const *keys, const char *const *values, int nt)
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
    png_init_io(j->png, j->f);
    /* Level 1 with the adaptive filters: heatmaps come out a little larger than at
     * zlib's default 6, in a fraction of the time. */
    png_set_compression_level(j->png, 1);
    png_set_IHDR(j->png, j->info, (png_uint_32)c->w, (png_uint_32)c->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (j->ntext > 0) png_set_text(j->png, j->info, j->text, j->ntext);
    png_write_info(j->png, j->info);
    for (int y = 0; y < c->h; y++) png_write_row(j->png, c->px + (size_t)y * (size_t)c->w * 3);
    png_write_end(j->png, j->info);
    return 1;
}

dfl_status dfl_png_write(const dfl_canvas *c, const char *path, int overwrite, const char *const *text_keys,
                         const char *const *text_values, int n_text, dfl_error *err)
{
    dfl_status s = dfl__check_overwrite(path, overwrite, err);
    if (s) return s;
    char *tmp = NULL;
    if ((s = dfl__make_tmp(path, &tmp, err))) return s;
    png_job *j = calloc(1, sizeof *j);
    if (!j) {
        remove(tmp);
        free(tmp);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
    }
    j->f = fopen(tmp, "wb");
    if (!j->f) {
        s = dfl__fail(err, DFL_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    } else {
        j->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &j->ctx, on_error, on_warning);
        j->info = j->png ? png_create_info_struct(j->png) : NULL;
        if (!j->png || !j->info) s = dfl__fail(err, DFL_ERR_NOMEM, "%s: libpng cannot start", path);
        else if (!write_rows(j, c, text_keys, text_values, n_text))
            s = dfl__fail(err, DFL_ERR_IO, "%s: libpng: %s", path, j->ctx.msg);
        if (j->png) png_destroy_write_struct(&j->png, j->info ? &j->info : NULL);
        /* a full disk shows up at close time */
        int bad = ferror(j->f);
        if ((fclose(j->f) != 0 || bad) && !s) s = dfl__fail(err, DFL_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    free(j);
    if (s) {
        remove(tmp);
        free(tmp);
        return s;
    }
    s = dfl__commit_tmp(tmp, path, overwrite, err);
    free(tmp);
    return s;
}
