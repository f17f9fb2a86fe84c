/* attnmap_image.c — attnmap on a dump of image prompts (DiffCLIP, CLIP): one head's
 * attention from the class token (or another stored row) to the patches, the grid
 * upsampled bilinearly over the model's input image (samples/N/image/input) with the
 * object box; map1 | map2 | diff side by side (--map all), a second dump beside it
 * (--vs: CLIP vs DiffCLIP), every panel on one colour scale. Called by dfl_attnmap_run
 * when the dump's model_type is "diffclip" or "clip". */
#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_read.h"
#include "dump/dump_schema.h"
#include "render/attnmap.h"
#include "render/attnmap_image.h"
#include "render/render_internal.h"

#define MAX_PANELS 8
#define ALPHA      0.6 /* the map's weight over the image */

/* One dump's sample. */
typedef struct image_side {
    dfl_dump_reader *r;
    const dfl_dump_sample *s;
    char *model_type;
    int diff;
    int64_t L, H, R, T, S, G;
    uint8_t *rgb; /* [S, S, 3] */
    int32_t geo[7], size[2], box[4];
    int has_box;
    int64_t *rows; /* [R] */
} image_side;

typedef struct panel {
    const image_side *sd;
    const char *map; /* "map1", "map2", "diff" */
    float *grid;     /* [G, G] the chosen row's attention to the patches */
    float share[2];  /* object, background (vision/noise/shares; NaN when absent) */
    char title[128];
} panel;

static void side_free(image_side *s)
{
    dfl_dump_close(s->r);
    free(s->model_type), free(s->rgb), free(s->rows);
}

int dfl__attnmap_is_image(const char *dump_path)
{
    dfl_dump_reader *r = NULL;
    dfl_error err;
    char *mt = NULL;
    int yes = 0;
    if (!dfl_dump_open(dump_path, &r, &err) && !dfl_dump_get_attr_str(r, "/", DFL_ATTR_MODEL_TYPE, &mt, &err))
        yes = !strcmp(mt, "diffclip") || !strcmp(mt, "clip");
    free(mt);
    dfl_dump_close(r);
    return yes;
}

static dfl_status open_side(const char *path, const char *sample, image_side *sd, dfl_error *err)
{
    memset(sd, 0, sizeof *sd);
    char p[256];
    dfl_status s = dfl_dump_open(path, &sd->r, err);
    if (!s) s = dfl_dump_get_attr_str(sd->r, "/", DFL_ATTR_MODEL_TYPE, &sd->model_type, err);
    if (!s) {
        sd->diff = !strcmp(sd->model_type, "diffclip");
        if (sample)
            s = dfl_dump_sample_find(sd->r, sample, &sd->s, err);
        else if (!(sd->s = dfl_dump_sample_at(sd->r, 0)))
            s = dfl__fail(err, DFL_ERR_RANGE, "%s: no samples", path);
    }
    dfl_dump_dset_info info;
    if (!s) snprintf(p, sizeof p, "%s/%s", sd->s->group, DFL_DS_VISION_MAP1);
    if (!s) s = dfl_dump_dataset_info(sd->r, p, &info, err);
    if (!s && info.ndim != 4) s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s is not [L, H, R, T]", path, p);
    if (!s) {
        sd->L = info.dims[0], sd->H = info.dims[1], sd->R = info.dims[2], sd->T = info.dims[3];
        snprintf(p, sizeof p, "%s/%s", sd->s->group, DFL_DS_IMAGE_GEOMETRY);
        s = dfl_dump_read(sd->r, p, DFL_H5_I32, sd->geo, 7, err);
    }
    if (!s) {
        sd->S = sd->geo[4], sd->G = sd->geo[6];
        if (sd->G < 1 || sd->S < 1 || sd->T != 1 + sd->G * sd->G)
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: image geometry does not match the maps", path);
    }
    if (!s) {
        snprintf(p, sizeof p, "%s/%s", sd->s->group, DFL_DS_IMAGE_SIZE);
        s = dfl_dump_read(sd->r, p, DFL_H5_I32, sd->size, 2, err);
    }
    if (!s && !(sd->rgb = dfl__alloc_array((size_t)(sd->S * sd->S), 3)))
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!s) {
        snprintf(p, sizeof p, "%s/%s", sd->s->group, DFL_DS_IMAGE_INPUT);
        s = dfl_dump_read(sd->r, p, DFL_H5_U8, sd->rgb, (size_t)(sd->S * sd->S * 3), err);
    }
    if (!s) {
        snprintf(p, sizeof p, "%s/%s", sd->s->group, DFL_DS_IMAGE_BOX);
        sd->has_box = dfl_dump_exists(sd->r, p);
        if (sd->has_box) s = dfl_dump_read(sd->r, p, DFL_H5_I32, sd->box, 4, err);
    }
    if (!s) {
        void *rows = NULL;
        snprintf(p, sizeof p, "%s/%s", sd->s->group, DFL_DS_VISION_ROWS);
        int32_t *r32 = NULL;
        size_t n = 0;
        s = dfl_dump_read_alloc(sd->r, p, DFL_H5_I32, &rows, &n, err);
        r32 = rows;
        if (!s && (int64_t)n != sd->R) s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s has %zu rows", path, p, n);
        if (!s && !(sd->rows = dfl__alloc_array(n, sizeof *sd->rows)))
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (size_t i = 0; !s && i < n; i++)
            sd->rows[i] = r32[i];
        free(rows);
    }
    if (s) side_free(sd);
    return s;
}

/* The grid [G, G] of map `name`, layer l, head h (−1 the mean over heads), stored row ri. */
static dfl_status read_grid(const image_side *sd, const char *name, int64_t l, int64_t h, int64_t ri, float *grid,
                            dfl_error *err)
{
    char p[256];
    snprintf(p, sizeof p, "%s/vision/attn/%s", sd->s->group, name);
    int64_t h0 = h < 0 ? 0 : h, nh = h < 0 ? sd->H : 1;
    int64_t start[4] = {l, h0, ri, 0}, count[4] = {1, nh, 1, sd->T};
    float *buf = dfl__alloc_array((size_t)(nh * sd->T), sizeof *buf);
    if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    dfl_status s = dfl_dump_read_slab_f32(sd->r, p, start, count, buf, err);
    for (int64_t j = 1; !s && j < sd->T; j++) {
        double acc = 0;
        for (int64_t k = 0; k < nh; k++)
            acc += buf[k * sd->T + j];
        grid[j - 1] = (float)(acc / (double)nh); /* column 0 is the class token itself: not a patch */
    }
    free(buf);
    return s;
}

/* The map's shares on the object and the background (vision/noise/shares [M, L, H, 3]). */
static void read_shares(const image_side *sd, int m, int64_t l, int64_t h, float out[2])
{
    out[0] = out[1] = NAN;
    char p[256];
    snprintf(p, sizeof p, "%s/%s", sd->s->group, DFL_DS_VISION_SHARES);
    size_t n = 0;
    void *v = NULL;
    dfl_error err;
    if (h < 0 || !sd->has_box || dfl_dump_read_alloc(sd->r, p, DFL_H5_F32, &v, &n, &err)) return;
    const float *f = v;
    size_t at = (((size_t)m * (size_t)sd->L + (size_t)l) * (size_t)sd->H + (size_t)h) * 3;
    if (at + 2 < n) out[0] = f[at + 1], out[1] = f[at + 2];
    free(v);
}

/* ---------------------------------------------------------------- drawing */

/* The overlay of one panel as an RGB24 surface of px × px: the input image resampled to
 * px (nearest), the grid upsampled bilinearly (patch centres at cell centres), blended. */
static cairo_surface_t *overlay(const panel *pn, int px, const dfl_norm *norm, dfl_cmap cmap)
{
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, px, px);
    if (cairo_surface_status(img)) return img;
    cairo_surface_flush(img);
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    const image_side *sd = pn->sd;
    int64_t S = sd->S, G = sd->G;
    for (int y = 0; y < px; y++)
        for (int x = 0; x < px; x++) {
            double u = (x + 0.5) * (double)G / px - 0.5, v = (y + 0.5) * (double)G / px - 0.5;
            int64_t x0 = (int64_t)floor(u), y0 = (int64_t)floor(v);
            double fx = u - (double)x0, fy = v - (double)y0, val = 0;
            for (int dy = 0; dy < 2; dy++)
                for (int dx = 0; dx < 2; dx++) {
                    int64_t gx = x0 + dx < 0 ? 0 : x0 + dx >= G ? G - 1 : x0 + dx;
                    int64_t gy = y0 + dy < 0 ? 0 : y0 + dy >= G ? G - 1 : y0 + dy;
                    val += (dx ? fx : 1 - fx) * (dy ? fy : 1 - fy) * pn->grid[gy * G + gx];
                }
            double t = dfl_norm_apply(norm, val);
            dfl_rgb c = dfl_cmap_color(cmap, t < 0 ? 0 : t > 1 ? 1 : t);
            int64_t ix = (int64_t)x * S / px, iy = (int64_t)y * S / px;
            const uint8_t *p = sd->rgb + (iy * S + ix) * 3;
            uint32_t *o = (uint32_t *)(data + (size_t)y * (size_t)stride) + x;
            double r = (1 - ALPHA) * p[0] + ALPHA * c.r, g = (1 - ALPHA) * p[1] + ALPHA * c.g,
                   b = (1 - ALPHA) * p[2] + ALPHA * c.b;
            *o = (uint32_t)lround(r) << 16 | (uint32_t)lround(g) << 8 | (uint32_t)lround(b);
        }
    cairo_surface_mark_dirty(img);
    return img;
}

static void draw_box(dfl_canvas *cv, const image_side *sd, int x, int y, int px)
{
    if (!sd->has_box) return;
    /* original pixels → resized → cropped model input → panel */
    double sx = (double)sd->geo[0] / sd->size[0], sy = (double)sd->geo[1] / sd->size[1], k = (double)px / sd->S;
    double bx[4] = {(sd->box[0] * sx - sd->geo[2]) * k, (sd->box[1] * sy - sd->geo[3]) * k,
                    (sd->box[2] * sx - sd->geo[2]) * k, (sd->box[3] * sy - sd->geo[3]) * k};
    for (int i = 0; i < 4; i++)
        bx[i] = bx[i] < 0 ? 0 : bx[i] > px ? px : bx[i];
    double xs[5] = {x + bx[0], x + bx[2], x + bx[2], x + bx[0], x + bx[0]};
    double ys[5] = {y + bx[1], y + bx[1], y + bx[3], y + bx[3], y + bx[1]};
    dfl_canvas_polyline(cv, xs, ys, 5, 2.5, DFL_STROKE_SOLID, (dfl_rgb){255, 255, 255}, x, y, px, px);
    dfl_canvas_polyline(cv, xs, ys, 5, 1.0, DFL_STROKE_DASHED, (dfl_rgb){220, 20, 60}, x, y, px, px);
}

/* ---------------------------------------------------------------- the run */

static dfl_status pick(const image_side *sd, const dfl_attnmap_params *p, int64_t *l, int64_t *h, int64_t *ri,
                       dfl_error *err)
{
    *l = p->layer >= 0 ? p->layer : p->layer == DFL_ATTNMAP_FIRST ? sd->L - 1 : -9;
    *h = p->head >= 0 ? p->head : p->head == DFL_ATTNMAP_MEAN ? -1 : p->head == DFL_ATTNMAP_FIRST ? 0 : -9;
    if (*l == -9 || *h == -9)
        return dfl__fail(err, DFL_ERR_USAGE, "an image overlay shows one layer and one head (or --head mean)");
    if (*l >= sd->L)
        return dfl__fail(err, DFL_ERR_RANGE, "layer %lld is not in the dump (0..%lld)", (long long)*l,
                         (long long)sd->L - 1);
    if (*h >= sd->H)
        return dfl__fail(err, DFL_ERR_RANGE, "head %lld is not in the dump (0..%lld)", (long long)*h,
                         (long long)sd->H - 1);
    int64_t want = p->has_rows ? p->rows[0] : sd->rows[0];
    *ri = -1;
    for (int64_t i = 0; i < sd->R; i++)
        if (sd->rows[i] == want) *ri = i;
    if (*ri < 0)
        return dfl__fail(err, DFL_ERR_RANGE, "row %lld (image token) is not among the dump's stored rows",
                         (long long)want);
    return DFL_OK;
}

dfl_status dfl__attnmap_image_run(const dfl_attnmap_params *p, dfl_attnmap_report *rep, dfl_error *err)
{
    image_side sd[2];
    int nsides = p->vs_path ? 2 : 1;
    panel pn[MAX_PANELS];
    int np = 0;
    memset(pn, 0, sizeof pn);
    dfl_canvas *cv = NULL;
    dfl_status s = open_side(p->dump_path, p->sample, &sd[0], err);
    if (s) return s;
    if (nsides == 2 && (s = open_side(p->vs_path, p->sample, &sd[1], err))) {
        side_free(&sd[0]);
        return s;
    }
    if (p->delta) s = dfl__fail(err, DFL_ERR_USAGE, "--delta is for token maps; image overlays show both dumps");
    int64_t l = 0, h = 0, ri = 0;
    for (int k = 0; !s && k < nsides; k++) {
        int64_t lk = 0, hk = 0, rk = 0;
        s = pick(&sd[k], p, &lk, &hk, &rk, err);
        if (!s && k == 0) l = lk, h = hk, ri = rk;
        if (!s && k == 1 && sd[1].G != sd[0].G) s = dfl__fail(err, DFL_ERR_USAGE, "--vs: the two dumps' grids differ");
        const char *all[3] = {"map1", "map2", "diff"}, *one = NULL;
        int n = 1;
        dfl_attn_map m = p->map;
        if (!s && !sd[k].diff && m != DFL_ATTN_AUTO && m != DFL_ATTN_MAP1)
            s = dfl__fail(err, DFL_ERR_USAGE, "%s is a clip dump: it has map1 only", k ? p->vs_path : p->dump_path);
        if (m == DFL_ATTN_ALL && sd[k].diff) n = 3;
        one = m == DFL_ATTN_MAP1 || !sd[k].diff ? "map1" : m == DFL_ATTN_MAP2 ? "map2" : "diff";
        for (int i = 0; !s && i < n; i++) {
            panel *q = &pn[np++];
            q->sd = &sd[k];
            q->map = n == 3 ? all[i] : one;
            int mi = !strcmp(q->map, "map1") ? 0 : !strcmp(q->map, "map2") ? 1 : 2;
            if (!(q->grid = dfl__alloc_array((size_t)(sd[k].G * sd[k].G), sizeof(float))))
                s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            if (!s) s = read_grid(&sd[k], q->map, lk, hk, rk, q->grid, err);
            read_shares(&sd[k], mi, lk, hk, q->share);
            const char *label = p->labels[k] ? p->labels[k] : sd[k].model_type;
            char hs[16];
            snprintf(hs, sizeof hs, hk < 0 ? "mean" : "%lld", (long long)hk);
            snprintf(q->title, sizeof q->title, "%s  L%lld H%s  %s", label, (long long)lk, hs, q->map);
        }
    }
    /* one colour scale for every panel: [0, max] on viridis, or ±max|v| on RdBu when a
     * panel (a diff map) goes negative; --vmin/--vmax override */
    double lo = 0, hi = 0;
    for (int i = 0; !s && i < np; i++)
        for (int64_t j = 0; j < pn[i].sd->G * pn[i].sd->G; j++) {
            double v = pn[i].grid[j];
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    dfl_norm norm = {DFL_SCALE_LINEAR, lo < 0, lo < 0 ? -fmax(-lo, hi) : 0, lo < 0 ? fmax(-lo, hi) : hi, 0};
    if (!(norm.vmax > norm.vmin)) norm.vmax = norm.vmin + 1e-6;
    if (p->has_vmin) norm.vmin = p->vmin;
    if (p->has_vmax) norm.vmax = p->vmax;
    dfl_cmap cmap = norm.diverging ? DFL_CMAP_RDBU : p->cmap;
    if (!s) s = dfl_norm_check(&norm, err);

    int px = p->size > 0 ? p->size : 384, pad = 16, title_h = 2 * DFL_FONT_H + 8, foot_h = 2 * DFL_FONT_H + 8;
    dfl_colorbar cb = {cmap, norm, "attention", NULL, 0, 0, 2, p->font};
    char row_note[96];
    snprintf(row_note, sizeof row_note, "row %lld (%s) to the patches", (long long)sd[0].rows[ri],
             sd[0].rows[ri] == 0 ? "class token" : "patch");
    int cbw = dfl_colorbar_width(&cb, 18);
    int W = pad + np * (px + pad) + cbw + pad, Hh = pad + title_h + px + foot_h + DFL_FONT_H * 2 + pad;
    if (!s) s = dfl_canvas_create(W, Hh, (dfl_rgb){255, 255, 255}, &cv, err);
    if (!s) {
        if (p->font) dfl_canvas_set_font(cv, p->font);
        cairo_t *cr = dfl__canvas_cr(cv);
        for (int i = 0; i < np && !s; i++) {
            int x = pad + i * (px + pad), y = pad + title_h;
            dfl_canvas_text(cv, x + px / 2, pad, pn[i].title, 2, (dfl_rgb){20, 20, 20}, DFL_ALIGN_CENTER);
            cairo_surface_t *img = overlay(&pn[i], px, &norm, cmap);
            if (cairo_surface_status(img)) {
                cairo_surface_destroy(img);
                s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory drawing the overlay");
                break;
            }
            cairo_save(cr);
            cairo_set_source_surface(cr, img, x, y);
            cairo_paint(cr);
            cairo_restore(cr);
            dfl__canvas_keep(cv, img);
            dfl__canvas_touch(cv);
            draw_box(cv, pn[i].sd, x, y, px);
            if (!isnan(pn[i].share[0])) {
                char foot[96];
                snprintf(foot, sizeof foot, "object %.3f   background %.3f", pn[i].share[0], pn[i].share[1]);
                dfl_canvas_text(cv, x + px / 2, y + px + 6, foot, 2, (dfl_rgb){40, 40, 40}, DFL_ALIGN_CENTER);
            }
        }
        dfl_canvas_text(cv, pad, Hh - pad - DFL_FONT_H * 2, row_note, 2, (dfl_rgb){90, 90, 90}, DFL_ALIGN_LEFT);
        dfl_canvas_colorbar(cv, pad + np * (px + pad), pad + title_h, 18, px, &cb);
    }
    if (!s) {
        dfl_output o = dfl_output_default();
        o.width_in = p->width_in, o.dpi = p->dpi, o.scale = p->px_scale;
        s = dfl_canvas_write(cv, p->out_path, p->overwrite, &o, err);
    }
    if (!s && rep) {
        memset(rep, 0, sizeof *rep);
        rep->width = W, rep->height = Hh, rep->tiles = np, rep->vmin = norm.vmin, rep->vmax = norm.vmax;
    }
    (void)l, (void)h;
    dfl_canvas_destroy(cv);
    for (int i = 0; i < np; i++)
        free(pn[i].grid);
    for (int k = 0; k < nsides; k++)
        side_free(&sd[k]);
    return s;
}
