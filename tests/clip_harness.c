/* clip_harness.c — drives lib/model/clip.c and clip_forward.c for tests/test_diffclip.py
 * (built there against build/libdifflens.a).
 *
 *   clip_harness image MODEL PIXELS OUT   PIXELS raw f32 [3, S, S] (preprocessed)
 *   clip_harness text MODEL OUT ID...     the caption's token ids
 *   clip_harness decode IMAGE OUT         the decoded RGB bytes [H, W, 3]; stdout "W H"
 *   clip_harness resize IMAGE W H bilinear|bicubic OUT   the resized RGB bytes
 *   clip_harness preprocess MODEL IMAGE OUT   f32 [3, C, C]; stdout the geometry
 *
 * OUT (raw f32, in this order): feature [D], embed [E], then per layer: map1 [h, T, T],
 * for diffclip map2 and diff [h, T, T] and λ [1], then hidden [T, D]. Errors: the
 * library's message on stderr, exit 1 (2 for usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/clip.h"
#include "model/image.h"

static dfl_status on_layer(void *user, dfl_clip_tower_kind tower, int64_t layer, const dfl_clip_layer_maps *m,
                           dfl_error *err)
{
    (void)tower, (void)layer, (void)err;
    FILE *f = user;
    size_t n = (size_t)(m->heads * m->T * m->T);
    fwrite(m->map1, sizeof(float), n, f);
    if (m->maps == 2) {
        fwrite(m->map2, sizeof(float), n, f);
        fwrite(m->diff, sizeof(float), n, f);
        fwrite(&m->lambda, sizeof(float), 1, f);
    }
    fwrite(m->hidden, sizeof(float), (size_t)(m->T * m->D), f);
    return DFL_OK;
}

static int write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f) ok = fclose(f) == 0 && ok;
    return ok ? 0 : 1;
}

static int images(int argc, char **argv)
{
    dfl_error err = {0};
    dfl_image im;
    int decode = !strcmp(argv[1], "decode"), resize = !strcmp(argv[1], "resize");
    const char *path = decode || resize ? argv[2] : argv[3];
    if (dfl_image_read(path, &im, &err)) {
        fprintf(stderr, "clip_harness: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    if (decode) {
        printf("%lld %lld\n", (long long)im.width, (long long)im.height);
        rc = write_bytes(argv[3], im.rgb, (size_t)(im.width * im.height * 3));
    } else if (resize && argc == 7) {
        dfl_image r;
        dfl_clip_interp in = strcmp(argv[5], "bicubic") ? DFL_CLIP_BILINEAR : DFL_CLIP_BICUBIC;
        if (dfl_image_resize(&im, strtol(argv[3], NULL, 10), strtol(argv[4], NULL, 10), in, &r, &err)) {
            fprintf(stderr, "clip_harness: %s\n", err.msg);
            rc = 1;
        } else {
            rc = write_bytes(argv[6], r.rgb, (size_t)(r.width * r.height * 3));
            dfl_image_free(&r);
        }
    } else if (!resize && argc == 5) {
        dfl_clip_model *m = NULL;
        if (dfl_clip_load(argv[2], &m, &err)) {
            fprintf(stderr, "clip_harness: %s\n", err.msg);
            rc = 1;
        } else {
            int64_t C = m->config.pre.crop;
            float *px = malloc((size_t)(3 * C * C) * sizeof(float));
            dfl_image_geometry g;
            if (!px || dfl_image_preprocess(&im, &m->config.pre, px, &g, NULL, &err)) {
                fprintf(stderr, "clip_harness: %s\n", err.msg);
                rc = 1;
            } else {
                printf("%lld %lld %lld %lld %lld %lld\n", (long long)g.resized_w, (long long)g.resized_h,
                       (long long)g.left, (long long)g.top, (long long)g.width, (long long)g.height);
                rc = write_bytes(argv[4], px, (size_t)(3 * C * C) * sizeof(float));
            }
            free(px);
            dfl_clip_free(m);
        }
    } else {
        rc = 2;
    }
    dfl_image_free(&im);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && (!strcmp(argv[1], "decode") || !strcmp(argv[1], "resize") || !strcmp(argv[1], "preprocess")))
        return images(argc, argv);
    if (argc < 4 || (strcmp(argv[1], "image") && strcmp(argv[1], "text"))) {
        fprintf(stderr, "usage: clip_harness image MODEL PIXELS OUT | text MODEL OUT ID...\n");
        return 2;
    }
    int image = strcmp(argv[1], "image") == 0;
    dfl_error err = {0};
    dfl_clip_model *m = NULL;
    dfl_status s = dfl_clip_load(argv[2], &m, &err);
    if (s) {
        fprintf(stderr, "clip_harness: %s\n", err.msg);
        return 1;
    }
    const dfl_clip_tower_config *c = &m->config.tower[image ? DFL_CLIP_VISION : DFL_CLIP_TEXT];
    int64_t D = c->width, E = m->config.embed_dim;
    float *feature = malloc((size_t)D * sizeof(float)), *embed = malloc((size_t)E * sizeof(float));
    FILE *out = fopen(argv[image ? 4 : 3], "wb");
    if (!out || !feature || !embed) return 1;
    fwrite(feature, sizeof(float), (size_t)D, out); /* placeholders, rewritten at the end */
    fwrite(embed, sizeof(float), (size_t)E, out);
    dfl_clip_capture cap = {on_layer, out};
    if (image) {
        int64_t S = c->image_size, n = 3 * S * S;
        float *px = malloc((size_t)n * sizeof(float));
        FILE *f = fopen(argv[3], "rb");
        if (!px || !f || fread(px, sizeof(float), (size_t)n, f) != (size_t)n) {
            fprintf(stderr, "clip_harness: cannot read %lld floats from %s\n", (long long)n, argv[3]);
            return 1;
        }
        fclose(f);
        s = dfl_clip_encode_image(m, px, &cap, feature, embed, &err);
        free(px);
    } else {
        int64_t T = argc - 4;
        int32_t *ids = malloc((size_t)(T ? T : 1) * sizeof(int32_t));
        for (int64_t t = 0; t < T; t++)
            ids[t] = (int32_t)strtol(argv[4 + t], NULL, 10);
        s = dfl_clip_encode_text(m, ids, T, &cap, feature, embed, &err);
        free(ids);
    }
    if (s) {
        fprintf(stderr, "clip_harness: %s\n", err.msg);
        return 1;
    }
    fseek(out, 0, SEEK_SET);
    fwrite(feature, sizeof(float), (size_t)D, out);
    fwrite(embed, sizeof(float), (size_t)E, out);
    fclose(out);
    free(feature), free(embed);
    dfl_clip_free(m);
    return 0;
}
