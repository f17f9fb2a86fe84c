/* clip_harness.c — drives lib/model/clip.c and clip_forward.c for tests/test_diffclip.py
 * (built there against build/libdifflens.a).
 *
 *   clip_harness image MODEL PIXELS OUT   PIXELS raw f32 [3, S, S] (preprocessed)
 *   clip_harness text MODEL OUT ID...     the caption's token ids
 *
 * OUT (raw f32, in this order): feature [D], embed [E], then per layer: map1 [h, T, T],
 * for diffclip map2 and diff [h, T, T] and λ [1], then hidden [T, D]. Errors: the
 * library's message on stderr, exit 1 (2 for usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/clip.h"

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

int main(int argc, char **argv)
{
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
