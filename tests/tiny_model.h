/* tiny_model.h — writes small random-weight models for the C tests (no fixtures
 * are committed). Header-only: each test binary is one .c file. */
#ifndef DFL_TEST_TINY_MODEL_H
#define DFL_TEST_TINY_MODEL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

typedef struct tiny_spec {
    const char *type; /* llama, diff_transformer, diffllama */
    int L, D, H, Hkv, F, V;
    unsigned seed;
} tiny_spec;

static float tiny_rand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) / 16777216.0 * 2.0 - 1.0);
}

/* Append one random [d0, d1] (d1 = 0: 1-D) tensor; `base` + `scale`·U(-1, 1). */
static void tiny_add(dfl_tensor *ts, float **bufs, size_t *n, const char *name, int d0, int d1, float base, float scale,
                     unsigned *seed)
{
    size_t numel = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    float *b = malloc(numel * sizeof *b);
    for (size_t i = 0; i < numel; i++)
        b[i] = base + scale * tiny_rand(seed);
    dfl_tensor *t = &ts[*n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->dtype = DFL_DTYPE_F32;
    t->ndim = d1 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->data = b;
    t->nbytes = numel * 4;
    bufs[(*n)++] = b;
}

/* Write DIR/config.json and DIR/model.safetensors; returns 0 on success. */
static int tiny_model_write(const char *dir, tiny_spec s)
{
    int diff = !strcmp(s.type, "diff_transformer"), dl = !strcmp(s.type, "diffllama");
    int hd = diff ? s.D / s.H / 2 : s.D / s.H;
    int qr = diff ? 2 * s.H * hd : s.H * hd, kr = diff ? 2 * s.Hkv * hd : s.Hkv * hd;
    int vr = diff ? s.Hkv * 2 * hd : s.Hkv * hd, oc = diff ? s.H * 2 * hd : s.H * hd;
    char path[512], name[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f,
            "{\"model_type\": \"%s\", \"vocab_size\": %d, \"hidden_size\": %d, \"intermediate_size\": %d, "
            "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
            "\"rms_norm_eps\": 1e-5, \"max_position_embeddings\": 4096}\n",
            s.type, s.V, s.D, s.F, s.L, s.H, s.Hkv);
    fclose(f);
    size_t cap = 3 + (size_t)s.L * 16, n = 0;
    dfl_tensor *ts = calloc(cap, sizeof *ts);
    float **bufs = calloc(cap, sizeof *bufs);
    unsigned seed = s.seed;
    float wD = 1.0f / sqrtf((float)s.D) * 1.7f, wF = 1.0f / sqrtf((float)s.F) * 1.7f;
    tiny_add(ts, bufs, &n, "model.embed_tokens.weight", s.V, s.D, 0, 1, &seed);
    tiny_add(ts, bufs, &n, "model.norm.weight", s.D, 0, 1, 0.1f, &seed);
    tiny_add(ts, bufs, &n, "lm_head.weight", s.V, s.D, 0, wD, &seed);
    for (int l = 0; l < s.L; l++) {
#define ADD(suffix, d0, d1, base, scale)                                                                               \
    snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix);                                                      \
    tiny_add(ts, bufs, &n, name, d0, d1, base, scale, &seed)
        ADD("input_layernorm.weight", s.D, 0, 1, 0.1f);
        ADD("post_attention_layernorm.weight", s.D, 0, 1, 0.1f);
        ADD("self_attn.q_proj.weight", qr, s.D, 0, wD * 2);
        ADD("self_attn.k_proj.weight", kr, s.D, 0, wD * 2);
        ADD("self_attn.v_proj.weight", vr, s.D, 0, wD);
        ADD(diff ? "self_attn.out_proj.weight" : "self_attn.o_proj.weight", s.D, oc, 0, 1.0f / sqrtf((float)oc));
        ADD("mlp.gate_proj.weight", s.F, s.D, 0, wD);
        ADD("mlp.up_proj.weight", s.F, s.D, 0, wD);
        ADD("mlp.down_proj.weight", s.D, s.F, 0, wF);
        if (diff || dl) {
            ADD("self_attn.lambda_q1", hd, 0, 0, 0.3f);
            ADD("self_attn.lambda_k1", hd, 0, 0, 0.3f);
            ADD("self_attn.lambda_q2", hd, 0, 0, 0.3f);
            ADD("self_attn.lambda_k2", hd, 0, 0, 0.3f);
        }
        if (diff) {
            ADD("self_attn.subln.weight", 2 * hd, 0, 1, 0.1f);
        }
#undef ADD
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    dfl_error e;
    int rc = dfl_st_write(path, ts, n, 1, &e) == DFL_OK ? 0 : -1;
    for (size_t i = 0; i < n; i++) {
        free((char *)ts[i].name);
        free(bufs[i]);
    }
    free(ts);
    free(bufs);
    return rc;
}

#endif
