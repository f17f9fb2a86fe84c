/* train_shapes.c — the synthetic image task of the ViT pair (train_vit.h): a bright
 * shape (square, circle, triangle, cross) of 1/4 to 2/5 of the image side at a random
 * place, on a background of two random gratings, pixel noise and a few bright speckles
 * (so brightness alone does not say where the object is). Everything is drawn from
 * base/rng.h addressed by (seed, stream, index): no dependency, same bits everywhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/rng.h"
#include "base/strbuf.h"
#include "render/render.h"
#include "train/train_internal.h"
#include "train/train_vit.h"

const char *const DFL_SHAPES_NAMES[DFL_SHAPES_CLASSES] = {"square", "circle", "triangle", "cross"};

/* CLIP's mean and std (OpenAI CLIP / SLIP), also written into config.json */
static const double MEAN[3] = {0.48145466, 0.4578275, 0.40821073};
static const double STD[3] = {0.26862954, 0.26130258, 0.27577711};

/* 1 when the point (u, v) of the unit box lies in shape k */
static int inside(int k, double u, double v)
{
    switch (k) {
    case 0: return 1;
    case 1: return (u - 0.5) * (u - 0.5) + (v - 0.5) * (v - 0.5) <= 0.25;
    case 2: return fabs(u - 0.5) <= 0.5 * v;
    default: return fabs(u - 0.5) <= 1.0 / 6.0 || fabs(v - 0.5) <= 1.0 / 6.0;
    }
}

static double clamp01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

void dfl_shapes_sample(uint64_t seed, uint64_t stream, uint64_t index, int64_t S, uint8_t *rgb, int *label, int box[4])
{
    dfl_rng r = dfl_rng_make(seed, stream, index);
    const double pi = 3.14159265358979323846;
    int k = (int)dfl_rng_below(&r, DFL_SHAPES_CLASSES);
    /* background: level, tint, two gratings */
    double base = 0.25 + 0.2 * dfl_rng_uniform(&r), tint[3], gf[2][3];
    for (int c = 0; c < 3; c++)
        tint[c] = 0.1 * (dfl_rng_uniform(&r) - 0.5);
    for (int g = 0; g < 2; g++) {
        double ang = 2 * pi * dfl_rng_uniform(&r), per = 4.0 + 8.0 * dfl_rng_uniform(&r);
        gf[g][0] = 2 * pi / per * cos(ang), gf[g][1] = 2 * pi / per * sin(ang), gf[g][2] = 2 * pi * dfl_rng_uniform(&r);
    }
    /* the object: side s, corner (x0, y0) inside the image by a pixel, colour */
    int64_t smin = S / 4, smax = (2 * S) / 5;
    int64_t s = smin + (int64_t)dfl_rng_below(&r, (uint64_t)(smax - smin + 1));
    int64_t x0 = 1 + (int64_t)dfl_rng_below(&r, (uint64_t)(S - s - 1)),
            y0 = 1 + (int64_t)dfl_rng_below(&r, (uint64_t)(S - s - 1));
    double col[3];
    for (int c = 0; c < 3; c++)
        col[c] = 0.75 + 0.25 * dfl_rng_uniform(&r);
    /* pixels [S, S, 3] */
    for (int64_t y = 0; y < S; y++)
        for (int64_t x = 0; x < S; x++) {
            double tex = 0.08 * sin(gf[0][0] * (double)x + gf[0][1] * (double)y + gf[0][2]) +
                         0.06 * sin(gf[1][0] * (double)x + gf[1][1] * (double)y + gf[1][2]);
            int obj = x >= x0 && x < x0 + s && y >= y0 && y < y0 + s &&
                      inside(k, ((double)(x - x0) + 0.5) / (double)s, ((double)(y - y0) + 0.5) / (double)s);
            for (int c = 0; c < 3; c++) {
                double v = obj ? col[c] : base + tint[c] + tex;
                v += (obj ? 0.04 : 0.07) * dfl_rng_normal(&r);
                rgb[(y * S + x) * 3 + c] = (uint8_t)lround(255.0 * clamp01(v));
            }
        }
    /* speckles: 1- or 2-pixel bright dots anywhere outside the object's box */
    int n_sp = 4 + (int)dfl_rng_below(&r, 5);
    for (int i = 0; i < n_sp; i++) {
        int64_t w = 1 + (int64_t)dfl_rng_below(&r, 2);
        int64_t sx = (int64_t)dfl_rng_below(&r, (uint64_t)(S - w)), sy = (int64_t)dfl_rng_below(&r, (uint64_t)(S - w));
        double lv = 0.75 + 0.25 * dfl_rng_uniform(&r);
        if (sx + w > x0 && sx < x0 + s && sy + w > y0 && sy < y0 + s) continue;
        for (int64_t y = sy; y < sy + w; y++)
            for (int64_t x = sx; x < sx + w; x++)
                for (int c = 0; c < 3; c++)
                    rgb[(y * S + x) * 3 + c] = (uint8_t)lround(255.0 * lv);
    }
    *label = k;
    box[0] = (int)x0, box[1] = (int)y0, box[2] = (int)(x0 + s), box[3] = (int)(y0 + s);
}

void dfl_shapes_normalize(const uint8_t *rgb, int64_t S, float *px)
{
    /* as torchvision: ToTensor (x / 255 in float) then Normalize ((x − mean) / std in float) */
    for (int c = 0; c < 3; c++)
        for (int64_t i = 0; i < S * S; i++) {
            float v = (float)rgb[i * 3 + c] / 255.0f;
            px[c * S * S + i] = (v - (float)MEAN[c]) / (float)STD[c];
        }
}

/* config.json's "preprocess" object for images of side S (no resizing: resize = crop = S) */
int dfl__shapes_preprocess_json(char *buf, size_t cap, int64_t S)
{
    return snprintf(buf, cap,
                    "{\"resize\": %lld, \"crop\": %lld, \"interpolation\": \"bicubic\", \"mean\": [%.17g, %.17g, "
                    "%.17g], \"std\": [%.17g, %.17g, %.17g]}",
                    (long long)S, (long long)S, MEAN[0], MEAN[1], MEAN[2], STD[0], STD[1], STD[2]);
}

dfl_status dfl_shapes_write_samples(const char *dir, uint64_t seed, uint64_t first, int n, int64_t S, int overwrite,
                                    dfl_error *err)
{
    if (n < 1 || n > 10000 || S < 16 || S > 1024)
        return dfl__fail(err, DFL_ERR_USAGE, "samples: %d images of side %lld is out of range", n, (long long)S);
    dfl_status s = dfl__train_make_dirs(dir, err);
    if (s) return s;
    uint8_t *rgb = dfl__alloc_array((size_t)(S * S), 3);
    dfl_strbuf jl = {0};
    if (!rgb) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    char path[4200];
    for (int i = 0; !s && i < n; i++) {
        int label, box[4];
        uint64_t index = first + (uint64_t)i;
        dfl_shapes_sample(seed, 1, index, S, rgb, &label, box);
        unsigned char *png = NULL;
        size_t len = 0;
        if ((s = dfl_png_encode((int)S, (int)S, rgb, &png, &len, err))) break;
        snprintf(path, sizeof path, "%s/sample-%d.png", dir, i);
        s = dfl__atomic_write(path, png, len, overwrite, err);
        free(png);
        dfl_strbuf_printf(&jl,
                          "{\"id\": \"%s-%d\", \"image\": \"sample-%d.png\", \"box\": [%d, %d, %d, %d], "
                          "\"caption_tokens\": [",
                          DFL_SHAPES_NAMES[label], i, i, box[0], box[1], box[2], box[3]);
        for (int k = 0; k < DFL_SHAPES_CLASSES; k++)
            dfl_strbuf_printf(&jl, "%s[%d]", k ? ", " : "", k);
        dfl_strbuf_printf(&jl, "], \"comment\": \"held-out sample %llu of seed %llu: a %s; caption k is class %s\"}\n",
                          (unsigned long long)index, (unsigned long long)seed, DFL_SHAPES_NAMES[label],
                          "0 square, 1 circle, 2 triangle, 3 cross");
    }
    if (!s && jl.oom) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!s) {
        snprintf(path, sizeof path, "%s/prompts.jsonl", dir);
        s = dfl__atomic_write(path, jl.p, jl.len, overwrite, err);
    }
    dfl_strbuf_free(&jl);
    free(rgb);
    return s;
}
