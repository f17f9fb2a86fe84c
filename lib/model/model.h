/* model.h — config.json parsing and weight binding for the attention variants
 * (docs/format.md "Model directory"): `llama` (with the Llama-family checkpoints
 * `qwen2`, `qwen3` and `mistral`), `diff_transformer` (official unilm
 * MultiheadDiffAttn layout), `diffllama` (Hugging Face DiffLlama), `motif` (Motif
 * Technologies' checkpoints, model_type "Motif"/"motif": V1 pairs and grouped
 * differential attention) and `diff_transformer_v2` (unilm's DIFF V2 module). What differs by
 * model_type (keys, defaults, biases, windows) is one entry of model/family.h's table.
 *
 * A model is a directory: config.json plus model.safetensors or index-listed shards;
 * or a GGUF file (gguf_model.c), its matrices kept as ggml blocks where quantized.
 * Weight matrices stay in the mapped file in their own dtype (F32/F16/BF16); the
 * matmuls convert them panel by panel. Every tensor's presence, dtype and shape is
 * checked against the config before use, and every tensor of the checkpoint must be
 * used (or the load is refused, unless allow_unused).
 */
#ifndef DFL_MODEL_H
#define DFL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "model/kernels.h"

typedef enum dfl_model_type {
    DFL_MODEL_LLAMA = 0,
    DFL_MODEL_DIFF_TRANSFORMER,
    DFL_MODEL_DIFFLLAMA,
    DFL_MODEL_MOTIF,  /* Motif Technologies' differential heads (V1 and GDA) */
    DFL_MODEL_DIFF_V2 /* DIFF Transformer V2: per-token λ = sigmoid(lambda_proj(x)) */
} dfl_model_type;

/* DYNAMIC (NTK) leaves the frequencies unchanged up to rope_original_max_pos tokens;
 * longer sequences are refused by the forward pass. */
typedef enum dfl_rope_kind {
    DFL_ROPE_NONE = 0,
    DFL_ROPE_LINEAR,
    DFL_ROPE_LLAMA3,
    DFL_ROPE_DYNAMIC,
    DFL_ROPE_LONGROPE /* Phi-3: per-frequency factors, short up to rope_original_max_pos tokens, long past it */
} dfl_rope_kind;
#define DFL_LONGROPE_MAX 256 /* factors per list (head_dim / 2) */
typedef enum dfl_kv_pairing { DFL_KV_FLASH = 0, DFL_KV_NAIVE } dfl_kv_pairing;
/* SiLU (SwiGLU families); GELU's tanh form (gelu_new, gelu_pytorch_tanh, gelu_fast) or
 * exact erf form (gelu). */
typedef enum dfl_act { DFL_ACT_SILU = 0, DFL_ACT_GELU_TANH, DFL_ACT_GELU } dfl_act;

typedef struct dfl_config {
    dfl_model_type type; /* qwen2, qwen3 and mistral run as DFL_MODEL_LLAMA */
    char model_type[24]; /* as config.json names it */
    int64_t vocab_size;
    int64_t hidden_size;       /* D */
    int64_t intermediate_size; /* F */
    int64_t num_layers;        /* L */
    int64_t num_heads;         /* H: num_attention_heads as in config.json */
    int64_t num_kv_heads;      /* Hkv */
    int64_t head_dim;          /* llama/diffllama: per map; diff_transformer: d per sub-head */
    double rms_norm_eps;
    double rope_theta;
    int rope_interleaved;
    dfl_rope_kind rope_kind;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_original_max_pos;
    int tie_word_embeddings;
    int64_t max_position_embeddings; /* 0 when absent */
    int64_t bos_token_id;            /* -1 when absent, or for a family without a BOS convention
                                      * (gpt2, gpt_neox: their bos_token_id is the document separator) */
    int has_lambda_init;             /* diff_lambda_init given (else per-layer rule) */
    double lambda_init;
    dfl_kv_pairing kv_pairing;
    int qkv_bias;            /* qwen2: q/k/v projections carry biases */
    int qk_norm;             /* RMSNorm of q and k before RoPE: 1 over each head (qwen3, Gemma 3),
                              * 2 over the whole projection (OLMo 2) */
    int64_t sliding_window;  /* W > 0: layers >= window_from see keys i − W < j <= i */
    int64_t window_from;     /* first windowed layer (Qwen2's max_window_layers) */
    dfl_act act;             /* the MLP's activation (hidden_act, GPT-2's activation_function) */
    int attn_unscaled;       /* gpt2 scale_attn_weights false: scores q·k, no 1/√d */
    int attn_scale_by_layer; /* gpt2 scale_attn_by_inverse_layer_idx: layer l's scores / (l + 1) */
    int64_t rotary_dim;      /* RoPE on the first rotary_dim values of each head (gpt_neox
                              * rotary_pct); 0 = all head_dim */
    int parallel_residual;   /* gpt_neox use_parallel_residual: x += attn(ln1(x)) + mlp(ln2(x)) */
    double attn_scale;       /* scores' scale; 0 = 1/√head_dim (Gemma: query_pre_attn_scalar^−½) */
    double attn_softcap;     /* Gemma 2 attn_logit_softcapping: scores → c·tanh(scores/c); 0 = none */
    double final_softcap;    /* Gemma 2 final_logit_softcapping, on the logits; 0 = none */
    int64_t window_pattern;  /* > 0: layer l has sliding_window unless (l + 1) % pattern == 0 (Gemma) */
    double rope_local_theta; /* > 0: the sliding layers' RoPE base, unscaled (Gemma 3 rope_local_base_freq) */
    float embed_scale;       /* > 0: embeddings × this (Gemma: √D in f32) */
    double rope_short[DFL_LONGROPE_MAX], rope_long[DFL_LONGROPE_MAX]; /* longrope: [head_dim/2] factors */
    double rope_attn_factor;                                          /* longrope: cos and sin × this */
    int64_t num_noise_heads;    /* Motif GDA: noise heads (groups), 0 = V1 pairs */
    double subnorm_eps;         /* > 0: the heads' sub-layer RMSNorm eps from the
                                 * config (Motif's attn_rms_norm_eps) */
    int64_t lambda_layer_shift; /* λ_init uses layer − shift (Motif: 1) */
} dfl_config;

/* Parse and validate config.json text (len bytes). `label` names the file in errors.
 * DFL_ERR_FORMAT (not JSON / wrong types), DFL_ERR_CONFIG (missing keys, inconsistent
 * head counts or window keys, unsupported rope_scaling / attention_bias / mlp_bias /
 * hidden_act, a key the family neither reads nor ignores, a number out of range). */
dfl_status dfl_config_parse(const char *json, size_t len, const char *label, dfl_config *cfg, dfl_error *err);

/* "llama", "diff_transformer", "diffllama", "motif", "diff_transformer_v2". */
const char *dfl_model_type_name(dfl_model_type t);

/* Differential heads for Diff models (H, or H/2 for diffllama); H for llama. */
int64_t dfl_config_analysis_heads(const dfl_config *c);
/* 1 for llama, 2 for the Diff models (softmax maps per analysis head). */
int dfl_config_maps_per_head(const dfl_config *c);
/* λ_init of layer l: diff_lambda_init if given, else 0.8 − 0.6·exp(−0.3·(l − s)),
 * s = lambda_layer_shift (0; Motif 1). */
double dfl_config_lambda_init(const dfl_config *c, int64_t layer);
/* Motif GDA: the noise group whose map 2 analysis head h shares (h / gr, gr signal
 * heads per group); −1 for the other types (each head its own map 2). */
int64_t dfl_config_noise_group(const dfl_config *c, int64_t head);
/* Sliding window W of layer l (query i sees keys i − W < j <= i), 0 = full causal. */
int64_t dfl_config_window(const dfl_config *c, int64_t layer);

/* ---- weights (row-major, PyTorch Linear layout [out, in]) ----
 * Matrices are dfl_wmat views into the memory-mapped file, in the checkpoint's dtype.
 * Vectors (norm gains, biases, λ) are f32: aligned F32 ones point into the mapping,
 * the others are converted into small buffers the model owns. */

typedef struct dfl_layer_weights {
    float *attn_norm;                      /* [D] input_layernorm */
    dfl_wmat wq;                           /* [Hq*dq, D]  (llama/diffllama: H*hd; diff: 2H*d) */
    dfl_wmat wk;                           /* [Hk*dq, D]  (llama/diffllama: Hkv*hd; diff: 2Hkv*d) */
    dfl_wmat wv;                           /* [Hkv*dv, D] (diff: Hkv*2d) */
    dfl_wmat wo;                           /* [D, H*hd] (diff: [D, H*2d]) */
    float *bq, *bk, *bv;                   /* [H*hd], [Hkv*hd], [Hkv*hd] qwen2 biases (NULL when absent) */
    float *q_norm, *k_norm;                /* [hd] qwen3 per-head RMSNorm gains (NULL when absent) */
    float *post_attn_norm, *post_mlp_norm; /* [D] norms of the attention and MLP outputs (Gemma, OLMo 2);
                                            * Gemma's gains here and everywhere already hold 1 + w */
    float *lambda_q1, *lambda_k1, *lambda_q2, *lambda_k2; /* [dq] Diff only */
    float *subln;                                         /* [2d] diff_transformer and motif (ones when absent) */
    float *mlp_norm;                                      /* [D] post_attention_layernorm */
    dfl_wmat w_gate;                                      /* [F, D] */
    dfl_wmat w_up;                                        /* [F, D] */
    dfl_wmat w_down;                                      /* [D, F] */
    /* GPT-2 (model/family.h DFL__LAYOUT_GPT2): Conv1D weights stored [in, out] — wqkv
     * [D, 3D] (c_attn: q | k | v columns), wo [D, D], w_up [D, F] (c_fc), w_down [F, D]
     * (mlp.c_proj); w_gate unused; every projection and norm has a bias. */
    dfl_wmat wqkv;
    float *bqkv, *bo, *b_up, *b_down; /* [3D], [D], [F], [D] */
    /* GPT-NeoX: wqkv [3D, D] Linear, rows per head h: q, k, v of hd each at h·3hd
     * (query_key_value), wo [D, D] (dense), w_up [F, D], w_down [D, F]; biases (NULL
     * under attention_bias false for bqkv and bo). */
    float *attn_norm_b, *mlp_norm_b; /* [D] LayerNorm biases */
    float *poly_w, *poly_b;          /* [3], [1] Motif's PolyNorm (mlp.act_fn), NULL for SwiGLU */
    dfl_wmat w_lambda;               /* [H, D] DIFF V2's lambda_proj (data NULL otherwise) */
    float lambda;                    /* λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init (Diff) */
    float lambda_init;
} dfl_layer_weights;

typedef struct dfl_model {
    dfl_config config;
    char *config_text;         /* config.json as read; owned */
    char *path;                /* directory as given; owned */
    dfl_wmat embed;            /* [V, D] */
    float *final_norm;         /* [D] */
    dfl_wmat lm_head;          /* [V, D]; the same view as embed when tied */
    dfl_wmat pos_embed;        /* [max_position_embeddings, D] learned positions (gpt2 wpe); data NULL otherwise */
    float *final_norm_b;       /* [D] final LayerNorm bias (gpt2 ln_f); NULL otherwise */
    dfl_layer_weights *layers; /* [L] */
    float **owned;             /* converted small vectors, for freeing */
    size_t n_owned;
    char **unused; /* [n_unused] checkpoint tensors the model does not use
                    * (only with allow_unused) */
    size_t n_unused;
    struct dfl_st_set *tensors; /* the mapped weight files; the weights point into them
                                 * (read-only: never write through these pointers) */
    struct dfl_gguf *gguf;      /* a GGUF model's mapped file(s) instead (tensors NULL) */
    int ggml_layout;            /* GPT-2 / GPT-NeoX from GGUF: projections [out, in] and the fused
                                 * qkv as q | k | v (convert_hf_to_gguf.py transposes GPT-2's Conv1D
                                 * weights and regroups NeoX's per-head qkv rows) */
} dfl_model;

typedef struct dfl_load_opts {
    int allow_unused; /* load even when the checkpoint holds tensors the model does not
                       * use (listed in m->unused); else DFL_ERR_TENSOR naming them */
} dfl_load_opts;

/* Load DIR/config.json and its weights, or a GGUF file (a path ending in .gguf; split
 * files by any of their names): the config from its metadata, tensors by GGUF names
 * (docs/format.md "GGUF"). Caller owns *out (dfl_model_free).
 * Errors name the file and tensor: DFL_ERR_IO, DFL_ERR_FORMAT, DFL_ERR_CONFIG,
 * DFL_ERR_TENSOR (missing, unused, wrong dtype, wrong shape), DFL_ERR_NOMEM.
 * dfl_model_load is dfl_model_load_opts with opts NULL (every tensor must be used). */
dfl_status dfl_model_load(const char *dir, dfl_model **out, dfl_error *err);
dfl_status dfl_model_load_opts(const char *dir, const dfl_load_opts *opts, dfl_model **out, dfl_error *err);

/* internal: the GGUF half of dfl_model_load_opts (gguf_model.c). */
dfl_status dfl__model_load_gguf(const char *path, const dfl_load_opts *opts, dfl_model **out, dfl_error *err);

/* Free a model; accepts NULL. */
void dfl_model_free(dfl_model *m);

/* Internal to lib/model (the safetensors and GGUF binders): a buffer of n floats that m
 * owns (freed with the model), appended to m->owned, whose capacity the binder keeps in
 * *cap. NULL when out of memory (nothing changed then but the list's capacity). */
float *dfl__model_owned_buffer(dfl_model *m, size_t *cap, size_t n);

#endif
