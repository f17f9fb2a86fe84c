/* model.h — config.json parsing and weight binding for the three model types
 * (docs/format.md "Model directory"): `llama`, `diff_transformer` (official unilm
 * MultiheadDiffAttn layout) and `diffllama` (Hugging Face DiffLlama).
 *
 * A model is a directory: config.json plus model.safetensors or index-listed shards.
 * All weights are converted to f32 at load (F32/F16/BF16 accepted); every tensor's
 * presence, dtype and shape is checked against the config before use.
 */
#ifndef DFL_MODEL_H
#define DFL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum dfl_model_type {
    DFL_MODEL_LLAMA = 0,
    DFL_MODEL_DIFF_TRANSFORMER,
    DFL_MODEL_DIFFLLAMA
} dfl_model_type;

typedef enum dfl_rope_kind { DFL_ROPE_NONE = 0, DFL_ROPE_LINEAR, DFL_ROPE_LLAMA3 } dfl_rope_kind;
typedef enum dfl_kv_pairing { DFL_KV_FLASH = 0, DFL_KV_NAIVE } dfl_kv_pairing;

typedef struct dfl_config {
    dfl_model_type type;
    int64_t vocab_size;
    int64_t hidden_size;        /* D */
    int64_t intermediate_size;  /* F */
    int64_t num_layers;         /* L */
    int64_t num_heads;          /* H: num_attention_heads as in config.json */
    int64_t num_kv_heads;       /* Hkv */
    int64_t head_dim;           /* llama/diffllama: per map; diff_transformer: d per sub-head */
    double rms_norm_eps;
    double rope_theta;
    int rope_interleaved;
    dfl_rope_kind rope_kind;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_original_max_pos;
    int tie_word_embeddings;
    int64_t max_position_embeddings;   /* 0 when absent */
    int64_t bos_token_id;              /* -1 when absent */
    int has_lambda_init;               /* diff_lambda_init given (else per-layer rule) */
    double lambda_init;
    dfl_kv_pairing kv_pairing;
} dfl_config;

/* Parse and validate config.json text (len bytes). `label` names the file in errors.
 * DFL_ERR_FORMAT (not JSON / wrong types), DFL_ERR_CONFIG (missing keys, inconsistent
 * head counts, unsupported rope_scaling / attention_bias / mlp_bias / hidden_act). */
dfl_status dfl_config_parse(const char *json, size_t len, const char *label,
                            dfl_config *cfg, dfl_error *err);

/* "llama", "diff_transformer", "diffllama". */
const char *dfl_model_type_name(dfl_model_type t);

/* Differential heads for Diff models (H, or H/2 for diffllama); H for llama. */
int64_t dfl_config_analysis_heads(const dfl_config *c);
/* 1 for llama, 2 for the Diff models (softmax maps per analysis head). */
int dfl_config_maps_per_head(const dfl_config *c);
/* λ_init of layer l: diff_lambda_init if given, else 0.8 − 0.6·exp(−0.3·l). */
double dfl_config_lambda_init(const dfl_config *c, int64_t layer);

/* ---- weights (f32, row-major, PyTorch Linear layout [out, in]) ----
 * Aligned F32 tensors are used straight from the memory-mapped file; F16, BF16 and
 * unaligned F32 tensors are converted into buffers the model owns. */

typedef struct dfl_layer_weights {
    float *attn_norm;    /* [D] input_layernorm */
    float *wq;           /* [Hq*dq, D]  (llama/diffllama: H*hd; diff: 2H*d) */
    float *wk;           /* [Hk*dq, D]  (llama/diffllama: Hkv*hd; diff: 2Hkv*d) */
    float *wv;           /* [Hkv*dv, D] (diff: Hkv*2d) */
    float *wo;           /* [D, H*hd] (diff: [D, H*2d]) */
    float *lambda_q1, *lambda_k1, *lambda_q2, *lambda_k2; /* [dq] Diff only */
    float *subln;        /* [2d] diff_transformer only (ones when absent) */
    float *mlp_norm;     /* [D] post_attention_layernorm */
    float *w_gate;       /* [F, D] */
    float *w_up;         /* [F, D] */
    float *w_down;       /* [D, F] */
    float lambda;        /* λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init (Diff) */
    float lambda_init;
} dfl_layer_weights;

typedef struct dfl_model {
    dfl_config config;
    char *config_text;          /* config.json as read; owned */
    char *path;                 /* directory as given; owned */
    float *embed;               /* [V, D] */
    float *final_norm;          /* [D] */
    float *lm_head;             /* [V, D]; == embed when tied */
    dfl_layer_weights *layers;  /* [L] */
    float **owned;              /* converted (F16/BF16/unaligned) buffers, for freeing */
    size_t n_owned;
    struct dfl_st_set *tensors; /* the mapped weight files; aligned F32 weights point into them
                                 * (read-only: never write through these pointers) */
} dfl_model;

/* Load DIR/config.json and its weights. Caller owns *out (dfl_model_free).
 * Errors name the file and tensor: DFL_ERR_IO, DFL_ERR_FORMAT, DFL_ERR_CONFIG,
 * DFL_ERR_TENSOR (missing, wrong dtype, wrong shape), DFL_ERR_NOMEM. */
dfl_status dfl_model_load(const char *dir, dfl_model **out, dfl_error *err);

/* Free a model; accepts NULL. */
void dfl_model_free(dfl_model *m);

#endif
