/* view_tile.c — the pictures: tiles of any zoom level (pooled from the base grid, or
 * read from the dump for levels finer than it) and thumbnails, coloured and encoded as
 * PNG. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view/view_internal.h"
#include "dump/dump_schema.h"

/* Masked pixels: attnmap's no-data grey, without its hatch, which would scale with
 * the zoom into a checkerboard. */
static const dfl_rgb NODATA = {200, 200, 200};

/* Pool src [rows][cols] (row stride ld; row k's columns >= valid[k] are no data,
 * valid NULL = all cols) by f x f, NaN = no data, into out [ceil(rows/f)][ceil(cols/f)]:
 * the grid is padded to whole pixels so pixel edges fall on multiples of f. */
static dfl_status pool_by(const float *src, int64_t rows, int64_t cols, int64_t ld, const int64_t *valid, int64_t f,
                          dfl_pool_mode mode, float *out, int64_t *orows, int64_t *ocols, dfl_error *err)
{
    *orows = (rows + f - 1) / f;
    *ocols = (cols + f - 1) / f;
    if (f == 1 && !valid) {
        for (int64_t r = 0; r < rows; r++)
            memcpy(out + r * cols, src + r * ld, (size_t)cols * sizeof *out);
        return DFL_OK;
    }
    int64_t *own = NULL;
    if (!valid) {
        if (!(own = dfl__alloc_array((size_t)rows, sizeof *own))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (int64_t r = 0; r < rows; r++)
            own[r] = cols;
        valid = own;
    }
    dfl_pool *p = NULL;
    dfl_status st = dfl_pool_create(*orows * f, *ocols * f, *orows, *ocols, mode, &p, err);
    if (!st) {
        dfl_pool_rows_valid(p, 0, rows, src, ld, valid);
        dfl_pool_result(p, out);
    }
    dfl_pool_destroy(p);
    free(own);
    return st;
}

/* Colour v [h][w] into rgb [h][w][3]; NaN cells are no-data grey. */
static void colour(uint8_t *rgb, int w, int h, const float *v, const dfl_norm *nm, dfl_cmap cm)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float a = v[(size_t)y * (size_t)w + (size_t)x];
            dfl_rgb col = isnan(a) ? NODATA : dfl_cmap_color(cm, dfl_norm_apply(nm, a));
            uint8_t *px = rgb + ((size_t)y * (size_t)w + (size_t)x) * 3;
            px[0] = col.r;
            px[1] = col.g;
            px[2] = col.b;
        }
}

static dfl_status encode(const float *v, int64_t h, int64_t w, const dfl_norm *nm, dfl_cmap cm, unsigned char **png,
                         size_t *len, dfl_error *err)
{
    uint8_t *rgb = dfl__alloc_array((size_t)w * (size_t)h, 3);
    if (!rgb) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    colour(rgb, (int)w, (int)h, v, nm, cm);
    dfl_status st = dfl_png_encode((int)w, (int)h, rgb, png, len, err);
    free(rgb);
    return st;
}

dfl_norm dfl__view_tile_norm(const dfl_view_request *q, int diverging)
{
    dfl_norm nm;
    memset(&nm, 0, sizeof nm);
    nm.scale = q->scale;
    nm.diverging = diverging;
    if (diverging) {
        nm.vmax = fmax(fabs(q->vmin), fabs(q->vmax));
        nm.vmin = -nm.vmax;
        nm.linthresh = nm.vmax / 1000;
    } else {
        nm.vmin = q->vmin;
        nm.vmax = q->vmax;
    }
    return nm;
}

/* A tile as PNG; *complete = 0 when drawn from a preview (not to be cached). */
dfl_status dfl__view_render_tile(dfl_view *v, const dfl_view_request *q, unsigned char **png, size_t *len,
                                 int *complete, dfl_error *err)
{
    *complete = 1;
    const dfl__view_sample *s = &v->d[q->dump].samples[q->sample];
    const int64_t R = s->info.R, T = s->info.T, T2 = DFL_VIEW_TILE;
    const int diverging = q->map == DFL_VIEW_DIFF || q->minus >= 0;
    dfl_norm nm = dfl__view_tile_norm(q, diverging);
    dfl_status st = dfl_norm_check(&nm, err);
    if (st) return st;
    dfl_cmap cm = diverging ? DFL_CMAP_RDBU : q->cmap;
    float *out = dfl__alloc_array((size_t)T2 * (size_t)T2, sizeof *out); /* [≤256][≤256] */
    if (!out) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    int64_t b = dfl__view_base_level(v, R, T), oh = 0, ow = 0;
    if (q->z >= b) {
        dfl__view_entry *e = NULL;
        if (!(st = dfl__view_grid_get(v, q, q->pool, &e, err))) {
            const dfl__view_grid *g = e->obj;
            *complete = g->complete;
            int64_t f = (int64_t)1 << (q->z - b), span = T2 * f;
            int64_t gy0 = q->y * span, gx0 = q->x * span;
            int64_t gh = g->gr - gy0 < span ? g->gr - gy0 : span, gw = g->gc - gx0 < span ? g->gc - gx0 : span;
            st = pool_by(g->v + gy0 * g->gc + gx0, gh, gw, g->gc, NULL, f, q->pool, out, &oh, &ow, err);
        }
        dfl__view_cache_release(&v->c, e);
    } else {
        int64_t f = (int64_t)1 << q->z, span = T2 * f;
        int64_t r0 = q->y * span, r1 = r0 + span < R ? r0 + span : R;
        int64_t c0 = q->x * span, c1 = c0 + span < T ? c0 + span : T;
        int64_t kend = dfl__view_seen(s, r1 - 1) < c1 ? dfl__view_seen(s, r1 - 1) : c1; /* keys the tile's rows see */
        oh = (r1 - r0 + f - 1) / f;
        ow = (c1 - c0 + f - 1) / f;
        if (kend <= c0) {
            for (size_t i = 0; i < (size_t)(oh * ow); i++)
                out[i] = NAN; /* wholly in the future */
        } else {
            /* read and pool in blocks of whole pixel rows, so memory stays at about
             * BLOCK_CELLS cells whatever the zoom level and map size */
            int64_t w = kend - c0, block = BLOCK_CELLS / w / f * f;
            if (block < f) block = f;
            if (block > r1 - r0) block = r1 - r0;
            size_t cells = (size_t)block * (size_t)w;
            float *buf = dfl__alloc_array(cells, sizeof *buf); /* [block][w] */
            float *tmp = q->minus >= 0 ? dfl__alloc_array(cells, sizeof *tmp) : NULL;
            int64_t *valid = dfl__alloc_array((size_t)block, sizeof *valid);
            dfl_pool *pool = NULL;
            if (!buf || !valid || (q->minus >= 0 && !tmp)) st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            /* padded to whole pixels; columns past kend are no data too */
            if (!st) st = dfl_pool_create(oh * f, ow * f, oh, ow, q->pool, &pool, err);
            for (int64_t a0 = r0; !st && a0 < r1; a0 += block) {
                int64_t n = r1 - a0 < block ? r1 - a0 : block;
                if ((st = dfl__view_read_box(v, q, a0, n, c0, kend, buf, tmp, err))) break;
                for (int64_t i = 0; i < n; i++)
                    valid[i] = (dfl__view_seen(s, a0 + i) < kend ? dfl__view_seen(s, a0 + i) : kend) - c0;
                dfl_pool_rows_valid(pool, a0 - r0, n, buf, w, valid);
            }
            if (!st) dfl_pool_result(pool, out);
            dfl_pool_destroy(pool);
            free(buf);
            free(tmp);
            free(valid);
        }
    }
    if (!st) st = encode(out, oh, ow, &nm, cm, png, len, err);
    free(out);
    return st;
}

/* A thumbnail: the base grid pooled to at most px a side, on its own robust limits. */
dfl_status dfl__view_render_thumb(dfl_view *v, const dfl_view_request *q, unsigned char **png, size_t *len,
                                  int *complete, dfl_error *err)
{
    dfl__view_entry *e = NULL;
    dfl_status st = dfl__view_grid_get(v, q, DFL_POOL_MEAN, &e, err);
    if (st) return st;
    const dfl__view_grid *g = e->obj;
    *complete = g->complete;
    int64_t f = 1;
    while ((g->gr + f - 1) / f > q->px || (g->gc + f - 1) / f > q->px)
        f *= 2;
    float *out = dfl__alloc_array((size_t)q->px * (size_t)q->px, sizeof *out);
    int64_t oh, ow;
    if (!out) st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!st) st = pool_by(g->v, g->gr, g->gc, g->gc, NULL, f, DFL_POOL_MEAN, out, &oh, &ow, err);
    if (!st) {
        dfl_norm nm;
        memset(&nm, 0, sizeof nm);
        nm.diverging = g->diverging;
        nm.vmax = g->q995;
        nm.vmin = g->diverging ? -g->q995 : (g->lo < 0 ? g->lo : 0);
        if (!(nm.vmin < nm.vmax)) nm.vmin = nm.vmax - 1;
        st = encode(out, oh, ow, &nm, g->diverging ? DFL_CMAP_RDBU : q->cmap, png, len, err);
    }
    free(out);
    dfl__view_cache_release(&v->c, e);
    return st;
}

/* ------------------------------------------------------------------ image */

dfl_status dfl__view_render_image(dfl_view *v, const dfl_view_request *q, unsigned char **png, size_t *len,
                                  dfl_error *err)
{
    const dfl__view_dump *d = &v->d[q->dump];
    const dfl__view_sample *s = &d->samples[q->sample];
    char p[96];
    snprintf(p, sizeof p, "%s/" DFL_DS_IMAGE_INPUT, s->sgroup);
    dfl_dump_dset_info info;
    uint8_t *rgb = NULL;
    size_t n = 0;
    pthread_mutex_lock(&v->dump_lock);
    dfl_status st = dfl_dump_dataset_info(d->r, p, &info, err);
    if (!st && (info.ndim != 3 || info.dims[2] != 3 || info.dims[0] < 1 || info.dims[1] < 1 || info.dims[0] > 16384 ||
                info.dims[1] > 16384))
        st = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s is not [S, S, 3]", d->name, p);
    if (!st) st = dfl_dump_read_alloc(d->r, p, DFL_H5_U8, (void **)&rgb, &n, err);
    pthread_mutex_unlock(&v->dump_lock);
    if (!st) st = dfl_png_encode((int)info.dims[1], (int)info.dims[0], rgb, png, len, err);
    free(rgb);
    return st;
}
