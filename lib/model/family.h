/* family.h — the model families as data (internal to libdifflens, dfl__ prefix).
 *
 * One entry per config.json `model_type` says everything that differs between
 * families: which config keys it reads, ignores as harmless or refuses by name; the
 * defaults that differ (head_dim, rope_interleaved); biases, q/k norms, the sliding-
 * window rule; its norm, MLP and RoPE style; and its attention variant.
 *
 * The attention variant (dfl_model_type) is the block structure shared by several
 * families — softmax heads (llama, qwen2, qwen3, mistral), unilm's differential heads
 * (diff_transformer), Hugging Face DiffLlama's (diffllama), Motif's stripe pairs and
 * grouped noise heads (motif), DIFF V2's per-token λ (diff_transformer_v2) — and says how a head reads
 * q, k and v (the head plan), the projections' shapes and names, λ and the sub-layer
 * norm. The Llama-family entries have RMS norms, a SwiGLU MLP and RoPE (interleaved or
 * rotate-half); one that differs names its norm, MLP and layout in the entry (GPT-2:
 * LayerNorm, a GELU MLP, Conv1D weights and learned positions; Motif: a PolyNorm MLP,
 * kernels_polynorm.c) and gets its kernels in kernels_norm.c or its own file and its
 * block in forward.c.
 *
 * Adding a family: one entry in family.c's table (and, for a new attention variant,
 * one entry in its variant table plus the forward and backward code of the variant).
 */
#ifndef DFL_MODEL_FAMILY_H
#define DFL_MODEL_FAMILY_H

#include <stdint.h>

#include "model/model.h"

/* How a family decides which layers use a sliding window (dfl_config.sliding_window,
 * window_from). */
typedef enum dfl__window_rule {
    DFL__WINDOW_NONE = 0,    /* full causal attention; sliding_window is refused */
    DFL__WINDOW_EVERY_LAYER, /* Mistral: sliding_window W on every layer */
    DFL__WINDOW_QWEN,        /* Qwen2/Qwen3: only with use_sliding_window, from layer
                              * max_window_layers on (or as layer_types says) */
    DFL__WINDOW_PATTERN      /* Gemma: layer l slides unless (l + 1) % pattern == 0, pattern =
                              * sliding_window_pattern [the entry's]; layer_types must agree */
} dfl__window_rule;

/* The norm and MLP of a family's blocks. Zero is what every family here has; a family
 * with another (GPT-2's LayerNorm and GELU MLP, Gemma's GeGLU...) names it here, and
 * model.c refuses a kind its forward pass does not implement. */
typedef enum dfl__norm_kind {
    DFL__NORM_RMS = 0,
    DFL__NORM_LAYER, /* torch LayerNorm with gain and bias (GPT-2, GPT-NeoX) */
    DFL__NORM_RMS_1P /* RMSNorm with gain 1 + w (Gemma; the gains are stored as w) */
} dfl__norm_kind;
typedef enum dfl__mlp_kind {
    DFL__MLP_SWIGLU = 0,
    DFL__MLP_GELU,    /* up (+bias) → GELU (hidden_act) → down (+bias) */
    DFL__MLP_GEGLU,   /* down(gelu(gate) · up), Gemma's hidden_activation */
    DFL__MLP_POLYNORM /* Motif: down(PolyNorm(gate(x)) ⊙ up(x)), mlp.act_fn.weight [3] and .bias [1] */
} dfl__mlp_kind;

/* Where a block's norms sit. PRE (Llama): x += attn(n1(x)); x += mlp(n2(x)).
 * SANDWICH (Gemma 2 and 3): x += n2(attn(n1(x))); x += n4(mlp(n3(x))).
 * POST (OLMo 2): x += n1(attn(x)); x += n2(mlp(x)). */
typedef enum dfl__block_kind { DFL__BLOCK_PRE = 0, DFL__BLOCK_SANDWICH, DFL__BLOCK_POST } dfl__block_kind;

/* How a family names and stores its tensors, and where positions come from. Zero is
 * Llama's: model.layers.{l}.self_attn.q_proj... as PyTorch Linear [out, in], RoPE. */
typedef enum dfl__layout {
    DFL__LAYOUT_LLAMA = 0,
    DFL__LAYOUT_GPT2, /* h.{l}.attn.c_attn... (optionally under "transformer."):
                       * Conv1D weights stored [in, out], q|k|v fused in c_attn,
                       * biases everywhere, learned positions wpe, no RoPE */
    DFL__LAYOUT_NEOX  /* gpt_neox.layers.{l}.attention.query_key_value... as
                       * Linear [out, in], q|k|v interleaved per head, biases,
                       * partial rotate-half RoPE, embed_in / embed_out */
} dfl__layout;

/* A config key of the family that names a common key (GPT-2's n_embd is hidden_size):
 * read as that key. Giving both is refused. */
typedef struct dfl__key_alias {
    const char *key, *as;
} dfl__key_alias;

/* A config key refused by name when its value is anything but null or false. `why`
 * is a format with one %s, the model_type. */
typedef struct dfl__refused_key {
    const char *key;
    const char *why;
} dfl__refused_key;

/* Where one analysis head reads its queries, keys and values and writes its output.
 * Columns index the q [T, q_ld], k [T, k_ld], v [T, v_ld] and att [T, att_ld] buffers
 * (dfl__attn_shape gives the widths). */
typedef struct dfl__head_plan {
    int64_t q_col[2], k_col[2];   /* per map (map 2 only for Diff models) */
    int64_t v_col[2], v_width[2]; /* value parts, concatenated in order */
    int n_vparts;
    int64_t out_col, out_width;
    int repeat[2]; /* map t is an earlier head's map computed again (Motif
                    * GDA: the group's noise map): its raw logits are
                    * reported once, by the group's first head */
} dfl__head_plan;

/* An attention variant: the geometry and tensors of one block structure. */
typedef struct dfl__attn_variant {
    dfl_model_type type;
    const char *name;       /* dfl_model_type_name */
    int maps;               /* softmax maps per analysis head: 1, or 2 for Diff */
    int heads_per_analysis; /* num_attention_heads per analysis head (diffllama: 2) */
    int sub_heads;          /* q/k sub-heads of head_dim per num_attention_heads head
                             * (diff_transformer: 2, so the default head_dim is D/H/2) */
    int v_per_kv;           /* value width per kv head, in head_dims (diff_transformer: 2) */
    const char *o_proj;     /* the output projection under self_attn. */
    int lambda;             /* lambda_q1/k1/q2/k2 vectors [head_dim] */
    int subln;              /* optional subln.weight gain [2·head_dim] */
    float subnorm_eps;      /* eps of the heads' sub-layer RMSNorm: > 0 fixed,
                             * 0 = rms_norm_eps, < 0 no sub-layer norm */
    dfl__head_plan (*plan)(const dfl_config *c, int64_t h);
} dfl__attn_variant;

/* One config.json model_type. Key lists are NULL-terminated (NULL = none). */
typedef struct dfl__family {
    const char *model_type;
    dfl_model_type attn;             /* attention variant */
    const char *const *keys;         /* keys read beyond the common ones (model.c) */
    const char *const *harmless;     /* keys ignored beyond the common harmless ones */
    const dfl__refused_key *refused; /* keys refused by name (terminated by key NULL) */
    int64_t head_dim;                /* default head_dim; 0 = D / (H · sub_heads) */
    dfl__norm_kind norm;             /* every norm of the block and the final one */
    dfl__mlp_kind mlp;
    int rope_interleaved; /* RoPE style by default: 1 unilm's adjacent pairs,
                           * 0 rotate-half (config key rope_interleaved) */
    int qkv_bias;         /* q/k/v projections carry biases (qwen2) */
    int qk_norm;          /* RMSNorm of q and k before RoPE: 1 per head (qwen3, Gemma 3),
                           * 2 over the whole projection (OLMo 2) */
    dfl__window_rule window;
    dfl__layout layout;            /* tensor names and storage, positions */
    const dfl__key_alias *aliases; /* family key names of common keys (NULL-terminated) */
    int tied_default;              /* tie_word_embeddings when absent (GPT-2: true) */
    int64_t ffn_mult;              /* intermediate_size absent or null: ffn_mult · D (0 = required) */
    const char *act_default;       /* hidden_act when absent, for a GELU MLP */
    dfl__block_kind block;         /* where the norms sit */
    int64_t window_pattern;        /* DFL__WINDOW_PATTERN: sliding_window_pattern when absent */
    int64_t window_default;        /* sliding_window when absent (0 = none) */
    int embed_scale;               /* embeddings × √D (Gemma) */
    double rope_theta_default;     /* rope_theta when absent (0 = 10000) */
    double rope_local_default;     /* > 0: the family reads rope_local_base_freq, this when absent */
    int no_bos;                    /* no BOS convention (GPT-2, Pythia: their tokenizers add none, and
                                    * bos_token_id is <|endoftext|>, the document separator) */
    int fused_proj;                /* Phi-3: self_attn.qkv_proj (q | k | v rows) and mlp.gate_up_proj
                                    * (gate | up rows), bound as views of their rows */
    const char *hidden_act;        /* the one hidden_act accepted; NULL = "silu" */
    int64_t lambda_layer_shift;    /* λ_init of layer l uses l − shift (Motif: 1) */
    double subnorm_eps;            /* default of the config's sub-layer eps (Motif) */
} dfl__family;

/* The entry for a config.json model_type, or NULL when unsupported. */
const dfl__family *dfl__family_find(const char *model_type);
/* The entry of a parsed config: by its model_type, else (a config built in code) the
 * first entry of its attention variant. Never NULL for a valid c->type. */
const dfl__family *dfl__family_of(const dfl_config *c);
/* What config.json key `key` is to family f: read, ignored as harmless, refused by
 * name (*why: its message, a format with one %s for the model_type) or unknown (which
 * model.c refuses too). Keys whose value is null or false are their default: model.c
 * accepts them whatever their kind. */
typedef enum dfl__key_kind { DFL__KEY_UNKNOWN = 0, DFL__KEY_READ, DFL__KEY_HARMLESS, DFL__KEY_REFUSED } dfl__key_kind;
dfl__key_kind dfl__family_key(const dfl__family *f, const char *key, const char **why);

/* The supported model_types, comma-separated (for messages). */
const char *dfl__family_names(void);

/* The attention variant t, or NULL outside the enum. */
const dfl__attn_variant *dfl__attn_variant_of_type(dfl_model_type t);
/* The attention variant of c (by c->type). Never NULL for a valid c->type. */
const dfl__attn_variant *dfl__attn_of(const dfl_config *c);

/* Widths of the attention buffers of c, in floats per token. */
typedef struct dfl__attn_shape {
    int64_t n_qheads, n_kheads;       /* q and k heads of width head_dim (RoPE runs on each) */
    int64_t q_ld, k_ld, v_ld, att_ld; /* q_proj, k_proj, v_proj rows; o_proj columns */
    int64_t heads;                    /* analysis heads */
} dfl__attn_shape;
dfl__attn_shape dfl__attn_shape_of(const dfl_config *c);

/* The head plan of analysis head h of c: the one definition the forward pass and the
 * trainer share (docs/format.md gives the maths). */
dfl__head_plan dfl__head_plan_make(const dfl_config *c, int64_t h);

/* Eps of the Diff heads' sub-layer RMSNorm: unilm's fixed 1e-5, DiffLlama's
 * rms_norm_eps; 0 for softmax heads (which have none). */
float dfl__subnorm_eps(const dfl_config *c);

#endif
