/* train_adamw_harness.c — the trainer's optimizer steps on data given from outside, for
 * tests/test_train_adamw.py (which builds this file against build/libdifflens.a and
 * compares the result with torch.optim.AdamW). Not a cmocka suite: a plain program.
 *
 *   train_adamw_harness TYPE TIE layout
 *       prints one line per parameter tensor of a tiny model of TYPE (llama,
 *       diff_transformer, diffllama; TIE 0/1): "name offset numel ndim rows cols"
 *   train_adamw_harness TYPE TIE run IN OUT
 *       IN  (little-endian): int64 steps, warmup; f64 lr_max, lr_min, beta1, beta2, eps,
 *           weight_decay, clip; f32 params[n]; f32 grads[steps][n]
 *       OUT: f64 lr[steps] (dfl_train_lr), f64 norm[steps] (dfl_train_clip, before
 *           clipping); f32 params[n], m[n], v[n] after the steps
 *   Each step s (0-based): grads ← grads[s]; dfl_train_clip(clip); dfl_train_adamw with
 *   the learning rate dfl_train_lr(s, steps, warmup, lr_max, lr_min) and step s + 1.
 *   Exit 0, or 1 with a message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"

static int fail(const char *msg)
{
    fprintf(stderr, "train_adamw_harness: %s\n", msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4) return fail("usage: TYPE TIE layout | TYPE TIE run IN OUT");
    dfl_train_params p = dfl_train_params_default();
    if (!strcmp(argv[1], "llama"))
        p.type = DFL_MODEL_LLAMA;
    else if (!strcmp(argv[1], "diff_transformer"))
        p.type = DFL_MODEL_DIFF_TRANSFORMER;
    else if (!strcmp(argv[1], "diffllama"))
        p.type = DFL_MODEL_DIFFLLAMA;
    else
        return fail("unknown type");
    p.tie = !strcmp(argv[2], "1");
    p.layers = 2, p.hidden = 16, p.heads = 2, p.ffn = 24;
    dfl_config c;
    dfl_error err;
    dfl_train_model *m = NULL;
    if (dfl_train_params_config(&p, &c, &err) || dfl_train_model_create(&c, &m, &err)) return fail(err.msg);
    const size_t n = m->n_params;
    if (!strcmp(argv[3], "layout")) {
        for (size_t i = 0; i < m->n_tensors; i++) {
            const dfl_train_tensor *t = &m->tensors[i];
            printf("%s %zu %zu %d %lld %lld\n", t->name, t->offset, t->numel, t->ndim, (long long)t->shape[0],
                   (long long)(t->ndim == 2 ? t->shape[1] : 1));
        }
        dfl_train_model_free(m);
        return 0;
    }
    if (strcmp(argv[3], "run") || argc != 6) return fail("usage: TYPE TIE run IN OUT");
    FILE *in = fopen(argv[4], "rb");
    if (!in) return fail("cannot open IN");
    int64_t steps, warmup;
    double h[7]; /* lr_max, lr_min, beta1, beta2, eps, weight_decay, clip */
    if (fread(&steps, 8, 1, in) != 1 || fread(&warmup, 8, 1, in) != 1 || fread(h, 8, 7, in) != 7 || steps < 1 ||
        steps > 1000 || fread(m->params, sizeof(float), n, in) != n)
        return fail("IN is short or malformed");
    double *lr = calloc((size_t)steps, sizeof *lr), *norm = calloc((size_t)steps, sizeof *norm);
    if (!lr || !norm) return fail("out of memory");
    for (int64_t s = 0; s < steps; s++) {
        if (fread(m->grads, sizeof(float), n, in) != n) return fail("IN has too few gradients");
        lr[s] = dfl_train_lr(s, steps, warmup, h[0], h[1]);
        norm[s] = dfl_train_clip(m, h[6]);
        dfl_adamw o = {lr[s], h[2], h[3], h[4], h[5]};
        dfl_train_adamw(m, &o, s + 1);
    }
    fclose(in);
    FILE *out = fopen(argv[5], "wb");
    if (!out) return fail("cannot open OUT");
    int ok = fwrite(lr, 8, (size_t)steps, out) == (size_t)steps &&
             fwrite(norm, 8, (size_t)steps, out) == (size_t)steps && fwrite(m->params, sizeof(float), n, out) == n &&
             fwrite(m->m, sizeof(float), n, out) == n && fwrite(m->v, sizeof(float), n, out) == n;
    if (fclose(out) != 0 || !ok) return fail("cannot write OUT");
    free(lr), free(norm);
    dfl_train_model_free(m);
    return 0;
}
