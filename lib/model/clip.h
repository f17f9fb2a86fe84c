/* clip.h — DiffCLIP and its CLIP baseline: a vision-language pair of towers (an image ViT
 * and CLIP's causal text transformer) projected into one embedding space
 * (docs/format.md "DiffCLIP and its CLIP baseline").
 *
 * A model is a directory that scripts/convert_diffclip.py writes from the published
 * training checkpoint: config.json (model_type "diffclip" or "clip", embed_dim,
 * vision_config, text_config, preprocess) and model.safetensors under the published
 * state_dict names. These models are not decoder language models and so not entries of
 * model/family.h's table (which describes one token stream with an LM head, RoPE or learned
 * positions and a causal mask): they have two towers, a patch embedding, a class token, no
 * LM head and a joint projection, so they get this module of their own, reusing the
 * kernels (LayerNorm, GELU, QuickGELU, RMSNorm, softmax, the matmuls).
 *
 *   image [3, S, S] → patches · W + b → [cls; patches] + pos → L pre-norm blocks →
 *                     norm → row 0 → · image_projection
 *   tokens [T]     → embedding + pos → L causal pre-norm blocks → ln_final →
 *                     row argmax(tokens) (the end-of-text token) → · text_projection
 *
 * diffclip's blocks have differential attention (unilm's adjacent sub-head pairs, λ from
 * lambda_q1·k1 − q2·k2 + λ_init, RMSNorm sub-norm × (1 − λ_init)); clip's have softmax
 * heads with fused q|k|v projections.
 */
#ifndef DFL_CLIP_H
#define DFL_CLIP_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "model/kernels.h"

typedef enum dfl_clip_tower_kind { DFL_CLIP_VISION = 0, DFL_CLIP_TEXT = 1 } dfl_clip_tower_kind;
typedef enum dfl_clip_act { DFL_CLIP_GELU = 0, DFL_CLIP_QUICK_GELU } dfl_clip_act;
typedef enum dfl_clip_interp { DFL_CLIP_BILINEAR = 0, DFL_CLIP_BICUBIC } dfl_clip_interp;

/* One tower's config.json object (vision_config / text_config). */
typedef struct dfl_clip_tower_config {
    int64_t width, layers, heads, mlp_width; /* heads: softmax maps (sub-heads for diffclip) */
    double layer_norm_eps;
    dfl_clip_act act;
    double lambda_init;                 /* diffclip */
    int64_t image_size, patch_size;     /* vision */
    int64_t context_length, vocab_size; /* text */
} dfl_clip_tower_config;

/* The image preprocessing of config.json "preprocess" (model/image.h applies it). */
typedef struct dfl_clip_preprocess {
    int64_t resize, crop;
    dfl_clip_interp interp;
    double mean[3], std[3];
} dfl_clip_preprocess;

typedef struct dfl_clip_config {
    char model_type[16]; /* "diffclip" or "clip" */
    int diff;            /* differential attention in both towers */
    int64_t embed_dim;   /* E */
    dfl_clip_tower_config tower[2];
    dfl_clip_preprocess pre;
} dfl_clip_config;

/* Parse and validate config.json text. DFL_ERR_FORMAT (not JSON, wrong types),
 * DFL_ERR_CONFIG (a missing or unknown key, a size out of range, width not a multiple
 * of heads, odd heads for diffclip, image_size not a multiple of patch_size). */
dfl_status dfl_clip_config_parse(const char *json, size_t len, const char *label, dfl_clip_config *cfg, dfl_error *err);

/* 1 when config.json text names model_type "diffclip" or "clip" (tools choose the loader). */
int dfl_clip_config_is_clip(const char *json, size_t len);

/* One block's weights. Matrices are views into the mapped file; vectors are f32 copies
 * the model owns. */
typedef struct dfl_clip_layer {
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b;                 /* [D] */
    dfl_wmat wq, wk, wv;                                  /* [D, D] diffclip */
    float *bq, *bk, *bv;                                  /* [D] */
    dfl_wmat wqkv;                                        /* [3D, D] clip: q | k | v rows */
    float *bqkv;                                          /* [3D] */
    dfl_wmat wo;                                          /* [D, D] */
    float *bo;                                            /* [D] */
    float *lambda_q1, *lambda_k1, *lambda_q2, *lambda_k2; /* [d] diffclip */
    float *subln;                                         /* [2d] diffclip diff_norm.weight */
    float *ls1, *ls2;                                     /* [D] LayerScale gammas, NULL when absent */
    dfl_wmat fc1, fc2;                                    /* [F, D], [D, F] */
    float *b1, *b2;                                       /* [F], [D] */
    float lambda;                                         /* diffclip: λ of the layer */
} dfl_clip_layer;

typedef struct dfl_clip_tower {
    dfl_clip_layer *layers; /* [L] */
    dfl_wmat patch;         /* vision: [D, 3·P·P] (the conv kernel, channel, row, column) */
    float *patch_b;         /* [D] */
    float *cls;             /* [D] */
    dfl_wmat tok;           /* text: [V, D] */
    float *pos;             /* [T_max, D]: 1 + N (vision) or context_length (text) rows */
    float *norm_w, *norm_b; /* [D] visual.norm / ln_final */
    dfl_wmat proj;          /* [D, E] stored [in, out]: feature · proj */
} dfl_clip_tower;

typedef struct dfl_clip_model {
    dfl_clip_config config;
    char *config_text; /* owned */
    char *path;        /* owned */
    dfl_clip_tower tower[2];
    float logit_scale; /* as stored (log); similarities use exp() */
    float **owned;
    size_t n_owned, cap_owned;
    struct dfl_st_set *tensors;
} dfl_clip_model;

/* Load DIR/config.json and DIR/model.safetensors. Every tensor's presence, dtype (F32,
 * F16, BF16) and shape is checked and every tensor must be used. Caller owns *out
 * (dfl_clip_free). DFL_ERR_IO, DFL_ERR_FORMAT, DFL_ERR_CONFIG, DFL_ERR_TENSOR, DFL_ERR_NOMEM. */
dfl_status dfl_clip_load(const char *dir, dfl_clip_model **out, dfl_error *err);
/* Free; accepts NULL. */
void dfl_clip_free(dfl_clip_model *m);

/* What one layer did, handed to a capture callback while the tower runs (the pointers
 * are valid only during the call). T tokens (vision: 1 + N, row 0 the class token),
 * heads = analysis heads (heads/2 for diffclip), maps = 1 or 2. */
typedef struct dfl_clip_layer_maps {
    int64_t T, D, heads, maps;
    const float *map1;   /* [heads, T, T] softmax (map 1 of each differential head) */
    const float *map2;   /* [heads, T, T] diffclip, else NULL */
    const float *diff;   /* [heads, T, T] map1 − λ·map2, diffclip, else NULL */
    const float *logits; /* [heads · maps, T, T] scaled q·k of each softmax map (masked: −inf) */
    float lambda;        /* diffclip */
    const float *hidden; /* [T, D] the layer's output (after both residual additions) */
} dfl_clip_layer_maps;

typedef struct dfl_clip_capture {
    /* Called after each layer; returns DFL_OK to go on (any other status stops the tower). */
    dfl_status (*on_layer)(void *user, dfl_clip_tower_kind tower, int64_t layer, const dfl_clip_layer_maps *m,
                           dfl_error *err);
    void *user;
} dfl_clip_capture;

/* The image tower on pixels [3, S, S] (already preprocessed). feature[D] (after the
 * final norm, class row) and embed[E] (feature · image_projection) are caller-owned
 * (either may be NULL). cap may be NULL. DFL_ERR_NOMEM or the callback's status. */
dfl_status dfl_clip_encode_image(const dfl_clip_model *m, const float *pixels, const dfl_clip_capture *cap,
                                 float *feature, float *embed, dfl_error *err);

/* The text tower on tokens[T] (1 ≤ T ≤ context_length, ids < vocab_size), pooled at the
 * first largest id (the end-of-text token). DFL_ERR_RANGE for a bad length or id. */
dfl_status dfl_clip_encode_text(const dfl_clip_model *m, const int32_t *tokens, int64_t T, const dfl_clip_capture *cap,
                                float *feature, float *embed, dfl_error *err);

/* sims[n] = exp(logit_scale) · cos(image, text_i) and probs[n] their softmax over the n
 * captions (zero-shot scores); embeddings of E values, text row-major [n, E]. */
void dfl_clip_scores(const dfl_clip_model *m, const float *image, const float *text, int64_t n, float *sims,
                     float *probs);

#endif
