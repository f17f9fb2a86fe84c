/* vit_harness.c — drives lib/train/train_vit.c for tests/test_vit_train.py (built there
 * against build/libdifflens.a).
 *
 *   vit_harness grad DIFF S P D L H F E B SEED OUTDIR
 *       a model of those sizes (DIFF 0 ViT, 1 Diff-ViT) from SEED, one forward and
 *       backward on B images of the shapes task (seed SEED, stream 0); writes
 *       OUTDIR/step.safetensors (every parameter "p.NAME", its gradient "g.NAME", the
 *       pixels "px" [B, 3, S, S], "labels" [B], "loss" [1], "probs" [B, C]) and the
 *       model itself (dfl_vit_save) into OUTDIR/model.
 *   vit_harness sample SEED STREAM INDEX S OUT   one image's rgb [S, S, 3] bytes into OUT;
 *       stdout "label x0 y0 x1 y1"
 *
 * Errors: the library's message on stderr, exit 1 (2 for usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"
#include "train/train_vit.h"

static int usage(void)
{
    fprintf(stderr, "usage: vit_harness grad DIFF S P D L H F E B SEED OUTDIR | sample SEED STREAM INDEX S OUT\n");
    return 2;
}

int main(int argc, char **argv)
{
    dfl_error err = {DFL_OK, ""};
    if (argc == 7 && !strcmp(argv[1], "sample")) {
        int64_t S = atoll(argv[5]);
        if (S < 16 || S > 1024) return usage();
        uint8_t *rgb = malloc((size_t)(S * S * 3));
        int label, box[4];
        dfl_shapes_sample(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10), S, rgb,
                          &label, box);
        FILE *f = fopen(argv[6], "wb");
        int ok = f && fwrite(rgb, 1, (size_t)(S * S * 3), f) == (size_t)(S * S * 3);
        if (f) ok = fclose(f) == 0 && ok;
        free(rgb);
        if (!ok) return fprintf(stderr, "%s: cannot write\n", argv[6]), 1;
        printf("%d %d %d %d %d\n", label, box[0], box[1], box[2], box[3]);
        return 0;
    }
    if (argc != 13 || strcmp(argv[1], "grad")) return usage();
    dfl_vit_params p = dfl_vit_params_default();
    p.diff = atoi(argv[2]);
    p.image_size = atoll(argv[3]), p.patch_size = atoll(argv[4]), p.width = atoll(argv[5]);
    p.layers = atoll(argv[6]), p.heads = atoll(argv[7]), p.mlp_width = atoll(argv[8]), p.embed_dim = atoll(argv[9]);
    p.batch = atoll(argv[10]), p.seed = strtoull(argv[11], NULL, 10);
    const char *dir = argv[12];
    dfl_vit_model *m = NULL;
    if (dfl_vit_create(&p, &m, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    const int64_t S = p.image_size, B = p.batch;
    float *px = malloc((size_t)(B * 3 * S * S) * sizeof(float)), *probs = malloc((size_t)(B * 4) * sizeof(float));
    float *labf = malloc((size_t)B * sizeof(float));
    int *labels = malloc((size_t)B * sizeof(int));
    uint8_t *rgb = malloc((size_t)(S * S * 3));
    for (int64_t b = 0; b < B; b++) {
        int box[4];
        dfl_shapes_sample(p.seed, 0, (uint64_t)b, S, rgb, &labels[b], box);
        dfl_shapes_normalize(rgb, S, px + b * 3 * S * S);
        labf[b] = (float)labels[b];
    }
    double loss;
    int rc = 0;
    if (dfl_vit_step(m, px, labels, B, 1, &loss, probs, &err)) rc = 1;
    dfl_vit_view views[256];
    size_t n = rc ? 0 : dfl_vit_views(m, views, 256);
    dfl_tensor *ts = calloc(2 * n + 4, sizeof *ts);
    char(*names)[112] = calloc(2 * n, sizeof *names);
    float lossf = (float)loss;
    for (size_t i = 0; !rc && i < n; i++)
        for (int j = 0; j < 2; j++) {
            dfl_tensor *t = &ts[2 * i + (size_t)j];
            snprintf(names[2 * i + (size_t)j], 112, "%s.%s", j ? "g" : "p", views[i].name);
            t->name = names[2 * i + (size_t)j], t->dtype = DFL_DTYPE_F32, t->ndim = views[i].ndim;
            memcpy(t->shape, views[i].shape, sizeof views[i].shape);
            t->data = j ? views[i].grad : views[i].param, t->nbytes = views[i].numel * sizeof(float);
        }
    dfl_tensor extra[4] = {{"px", DFL_DTYPE_F32, 4, {B, 3, S, S}, px, (size_t)(B * 3 * S * S) * sizeof(float)},
                           {"labels", DFL_DTYPE_F32, 1, {B}, labf, (size_t)B * sizeof(float)},
                           {"loss", DFL_DTYPE_F32, 1, {1}, &lossf, sizeof(float)},
                           {"probs", DFL_DTYPE_F32, 2, {B, 4}, probs, (size_t)(B * 4) * sizeof(float)}};
    memcpy(ts + 2 * n, extra, sizeof extra);
    char path[4096];
    snprintf(path, sizeof path, "%s/step.safetensors", dir);
    if (!rc && dfl_st_write(path, ts, 2 * n + 4, 1, &err)) rc = 1;
    snprintf(path, sizeof path, "%s/model", dir);
    if (!rc && dfl_vit_save(m, path, 1, &err)) rc = 1;
    if (rc) fprintf(stderr, "%s\n", err.msg);
    free(ts), free(names), free(px), free(probs), free(labf), free(labels), free(rgb);
    dfl_vit_free(m);
    return rc;
}
