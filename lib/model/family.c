/* family.c — the table of model families and attention variants (family.h), the head
 * plan of each variant and the key rules config.json parsing applies. */
#include "model/family.h"

#include <string.h>

/* ------------------------------------------------------------ head plans */

/* Softmax heads: head h reads q head h, and k and v head h / n_rep (GQA repeats kv heads). */
static dfl__head_plan plan_softmax(const dfl_config *c, int64_t h)
{
    dfl__head_plan p;
    memset(&p, 0, sizeof p);
    int64_t hd = c->head_dim, n_rep = c->num_heads / c->num_kv_heads;
    p.q_col[0] = h * hd;
    p.k_col[0] = (h / n_rep) * hd;
    p.v_col[0] = (h / n_rep) * hd;
    p.v_width[0] = hd;
    p.n_vparts = 1;
    p.out_col = h * hd;
    p.out_width = hd;
    return p;
}

/* unilm MultiheadDiffAttn: map t of head h is q sub-head 2h+t; its key sub-head depends
 * on how the implementation repeats kv heads under GQA (docs/format.md, config key
 * diff_kv_pairing); the value is kv head h / n_rep, 2d wide. */
static dfl__head_plan plan_diff_unilm(const dfl_config *c, int64_t h)
{
    dfl__head_plan p;
    memset(&p, 0, sizeof p);
    int64_t hd = c->head_dim, n_rep = c->num_heads / c->num_kv_heads;
    for (int t = 0; t < 2; t++) {
        int64_t ks = c->kv_pairing == DFL_KV_FLASH ? 2 * (h / n_rep) + t : (2 * h + t) / n_rep;
        p.q_col[t] = (2 * h + t) * hd;
        p.k_col[t] = ks * hd;
    }
    p.v_col[0] = (h / n_rep) * 2 * hd;
    p.v_width[0] = 2 * hd;
    p.n_vparts = 1;
    p.out_col = h * 2 * hd;
    p.out_width = 2 * hd;
    return p;
}

/* Hugging Face DiffLlama: head h pairs maps h and h + H/2; its value concatenates theirs. */
static dfl__head_plan plan_diffllama(const dfl_config *c, int64_t h)
{
    dfl__head_plan p;
    memset(&p, 0, sizeof p);
    int64_t H = c->num_heads, hd = c->head_dim, n_rep = c->num_heads / c->num_kv_heads;
    for (int t = 0; t < 2; t++) {
        int64_t qh = h + t * (H / 2);
        p.q_col[t] = qh * hd;
        p.k_col[t] = (qh / n_rep) * hd;
        p.v_col[t] = (qh / n_rep) * hd;
        p.v_width[t] = hd;
    }
    p.n_vparts = 2;
    p.out_col = h * 2 * hd;
    p.out_width = 2 * hd;
    return p;
}

/* Motif (vLLM motif.py and its DIFFERENTIAL_FLASH_ATTN backend; the MLX port): q heads
 * in stripes, k and v heads in adjacent pairs. V1 (no num_noise_heads): head i pairs q
 * heads 2i and 2i+1 against k heads 2m and 2m+1, m = i / (H/Hkv). GDA: groups of gr
 * signal heads and one noise head, q heads [g·(gr+1) .. g·(gr+1)+gr−1 | g·(gr+1)+gr];
 * signal head s (group g = s / gr) pairs its q head with its group's noise q head,
 * against k heads 2m, 2m+1, m = g / (Gn / (Hkv/2)). The value is v heads 2m and 2m+1
 * (2d wide), the output 2d wide at column 2d·s. With gr = 1 the two coincide. */
static dfl__head_plan plan_motif(const dfl_config *c, int64_t h)
{
    dfl__head_plan p;
    memset(&p, 0, sizeof p);
    int64_t hd = c->head_dim, Gn = c->num_noise_heads, m, qs, qn;
    if (Gn) {
        int64_t gr = (c->num_heads - Gn) / Gn, g = h / gr;
        m = g / (Gn / (c->num_kv_heads / 2));
        qs = g * (gr + 1) + h % gr;
        qn = g * (gr + 1) + gr;
        p.repeat[1] = h % gr != 0;
    } else {
        m = h / (c->num_heads / c->num_kv_heads);
        qs = 2 * h;
        qn = 2 * h + 1;
    }
    p.q_col[0] = qs * hd;
    p.q_col[1] = qn * hd;
    for (int t = 0; t < 2; t++)
        p.k_col[t] = (2 * m + t) * hd;
    p.v_col[0] = 2 * m * hd;
    p.v_width[0] = 2 * hd;
    p.n_vparts = 1;
    p.out_col = h * 2 * hd;
    p.out_width = 2 * hd;
    return p;
}

/* DIFF Transformer V2 (unilm multihead_flashdiffv2.py): 2H q heads; output head h
 * pairs q heads 2h (map 1) and 2h + 1 (map 2), which flash attention's GQA puts in the
 * same group: both read kv head h / (H/Hkv); the value is that head (hd wide). */
static dfl__head_plan plan_diff_v2(const dfl_config *c, int64_t h)
{
    dfl__head_plan p;
    memset(&p, 0, sizeof p);
    int64_t hd = c->head_dim, kv = h / (c->num_heads / c->num_kv_heads);
    for (int t = 0; t < 2; t++) {
        p.q_col[t] = (2 * h + t) * hd;
        p.k_col[t] = kv * hd;
    }
    p.v_col[0] = kv * hd;
    p.v_width[0] = hd;
    p.n_vparts = 1;
    p.out_col = h * hd;
    p.out_width = hd;
    return p;
}

/* ------------------------------------------------------ attention variants */

/* Indexed by dfl_model_type. */
static const dfl__attn_variant variants[] = {
    [DFL_MODEL_LLAMA] = {.type = DFL_MODEL_LLAMA,
                         .name = "llama",
                         .maps = 1,
                         .heads_per_analysis = 1,
                         .sub_heads = 1,
                         .v_per_kv = 1,
                         .o_proj = "o_proj",
                         .subnorm_eps = -1.0f,
                         .plan = plan_softmax},
    /* unilm: RMSNorm(2d, eps 1e-5, gain subln) */
    [DFL_MODEL_DIFF_TRANSFORMER] = {.type = DFL_MODEL_DIFF_TRANSFORMER,
                                    .name = "diff_transformer",
                                    .maps = 2,
                                    .heads_per_analysis = 1,
                                    .sub_heads = 2,
                                    .v_per_kv = 2,
                                    .o_proj = "out_proj",
                                    .lambda = 1,
                                    .subln = 1,
                                    .subnorm_eps = 1e-5f,
                                    .plan = plan_diff_unilm},
    /* DiffLlama: RMSNorm(2hd, eps rms_norm_eps, no gain) */
    [DFL_MODEL_DIFFLLAMA] = {.type = DFL_MODEL_DIFFLLAMA,
                             .name = "diffllama",
                             .maps = 2,
                             .heads_per_analysis = 2,
                             .sub_heads = 1,
                             .v_per_kv = 1,
                             .o_proj = "o_proj",
                             .lambda = 1,
                             .subnorm_eps = 0.0f,
                             .plan = plan_diffllama},
    /* Motif: RMSNorm(2d, eps attn_rms_norm_eps, gain subln); the analysis heads and
     * the o_proj width are motif_shape's (GDA has H − Gn heads) */
    [DFL_MODEL_MOTIF] = {.type = DFL_MODEL_MOTIF,
                         .name = "motif",
                         .maps = 2,
                         .heads_per_analysis = 1,
                         .sub_heads = 1,
                         .v_per_kv = 1,
                         .o_proj = "o_proj",
                         .lambda = 1,
                         .subln = 1,
                         .subnorm_eps = 1e-5f,
                         .plan = plan_motif},
    /* DIFF V2: no sub-layer norm, no λ vectors (λ is per token: lambda_proj), 2H q heads
     * (dfl__attn_shape_of) */
    [DFL_MODEL_DIFF_V2] = {.type = DFL_MODEL_DIFF_V2,
                           .name = "diff_transformer_v2",
                           .maps = 2,
                           .heads_per_analysis = 1,
                           .sub_heads = 1,
                           .v_per_kv = 1,
                           .o_proj = "o_proj",
                           .subnorm_eps = -1.0f,
                           .plan = plan_diff_v2},
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

/* ---------------------------------------------------------------- families */

/* Keys every family reads (model.c). */
static const char *const common_keys[] = {"model_type",          "vocab_size",
                                          "hidden_size",         "intermediate_size",
                                          "num_hidden_layers",   "num_attention_heads",
                                          "num_key_value_heads", "head_dim",
                                          "rms_norm_eps",        "rope_theta",
                                          "rope_interleaved",    "rope_scaling",
                                          "rope_parameters",     "tie_word_embeddings",
                                          "attention_bias",      "mlp_bias",
                                          "hidden_act",          "max_position_embeddings",
                                          "bos_token_id",        NULL};

/* Keys that do not change the computation of a forward pass: ignored (docs/format.md). */
static const char *const common_harmless[] = {"architectures",
                                              "attention_dropout",
                                              "initializer_range",
                                              "use_cache",
                                              "transformers_version",
                                              "torch_dtype",
                                              "dtype",
                                              "eos_token_id",
                                              "pad_token_id",
                                              "sep_token_id",
                                              "decoder_start_token_id",
                                              "pretraining_tp",
                                              "_name_or_path",
                                              "lambda_std_dev",
                                              "auto_map",
                                              "tokenizer_class",
                                              "return_dict",
                                              "output_attentions",
                                              "output_hidden_states",
                                              "torchscript",
                                              "id2label",
                                              "label2id",
                                              "problem_type",
                                              "is_llama_config",
                                              "max_length",
                                              "min_length",
                                              "do_sample",
                                              "temperature",
                                              "top_k",
                                              "top_p",
                                              "num_beams",
                                              "repetition_penalty",
                                              "length_penalty",
                                              "is_decoder",
                                              "is_encoder_decoder",
                                              NULL};

/* Keys of other architectures that change the maths: refused with what they mean. */
static const dfl__refused_key common_refused[] = {
    {"attn_logit_softcapping", "\"attn_logit_softcapping\" (Gemma 2's attention-logit soft-capping) is not "
                               "implemented for model_type %s"},
    {"final_logit_softcapping", "\"final_logit_softcapping\" (Gemma 2's output-logit soft-capping) is not "
                                "implemented for model_type %s"},
    {"num_local_experts", "\"num_local_experts\": mixture-of-experts layers are not implemented (model_type %s)"},
    {"num_experts", "\"num_experts\": mixture-of-experts layers are not implemented (model_type %s)"},
    {"quantization_config", "\"quantization_config\": quantized checkpoints are not supported for model_type %s "
                            "(dequantize to F32, F16 or BF16 first)"},
    {NULL, NULL}};

/* difflens's own Diff keys: read by the Diff families, meaningless for the rest. */
static const char *const diff_keys[] = {"diff_lambda_init", "diff_kv_pairing", NULL};
static const char *const qwen_keys[] = {"sliding_window", "use_sliding_window", "max_window_layers", "layer_types",
                                        NULL};
static const char *const mistral_keys[] = {"sliding_window", NULL};

/* A window key on a family without windows would otherwise run as full attention. */
static const dfl__refused_key no_window[] = {
    {"sliding_window", "\"sliding_window\" is not a %s key (a Mistral or Qwen checkpoint renamed? set model_type "
                       "to mistral or qwen2)"},
    {NULL, NULL}};

/* GPT-2 (Hugging Face configuration_gpt2.py, modeling_gpt2.py): GPT2Config's own names
 * of the common keys (its attribute_map), the attention-scaling switches it reads, and
 * the keys of its heads for other tasks (summary_*: GPT2DoubleHeadsModel), dropouts and
 * n_ctx (an old duplicate of n_positions that the modelling code never reads). */
static const char *const gpt2_keys[] = {"n_embd",
                                        "n_layer",
                                        "n_head",
                                        "n_inner",
                                        "n_positions",
                                        "layer_norm_epsilon",
                                        "activation_function",
                                        "scale_attn_weights",
                                        "scale_attn_by_inverse_layer_idx",
                                        "reorder_and_upcast_attn",
                                        NULL};
static const char *const gpt2_harmless[] = {"n_ctx",
                                            "attn_pdrop",
                                            "embd_pdrop",
                                            "resid_pdrop",
                                            "summary_activation",
                                            "summary_first_dropout",
                                            "summary_proj_to_labels",
                                            "summary_type",
                                            "summary_use_proj",
                                            "task_specific_params",
                                            "gradient_checkpointing",
                                            NULL};
static const dfl__key_alias gpt2_aliases[] = {{"n_embd", "hidden_size"},
                                              {"n_layer", "num_hidden_layers"},
                                              {"n_head", "num_attention_heads"},
                                              {"n_inner", "intermediate_size"},
                                              {"n_positions", "max_position_embeddings"},
                                              {"layer_norm_epsilon", "rms_norm_eps"},
                                              {"activation_function", "hidden_act"},
                                              {NULL, NULL}};
static const dfl__refused_key gpt2_refused[] = {
    {"add_cross_attention", "\"add_cross_attention\": GPT-2 blocks with cross-attention over an encoder are not "
                            "implemented (model_type %s)"},
    {"sliding_window", "\"sliding_window\" is not a %s key"},
    {NULL, NULL}};

/* GPT-NeoX (configuration_gpt_neox.py, modeling_gpt_neox.py; EleutherAI's Pythia). */
static const char *const neox_keys[] = {
    "layer_norm_eps", "rotary_pct", "partial_rotary_factor", "rotary_emb_base", "use_parallel_residual", NULL};
static const char *const neox_harmless[] = {"classifier_dropout", "hidden_dropout", "attention_probs_dropout_prob",
                                            "hidden_dropout_prob", NULL};
static const dfl__key_alias neox_aliases[] = {{"layer_norm_eps", "rms_norm_eps"},
                                              {"rotary_emb_base", "rope_theta"},
                                              {"partial_rotary_factor", "rotary_pct"},
                                              {NULL, NULL}};

/* Gemma 2 (configuration_gemma2.py, modeling_gemma2.py). hidden_act is a leftover the
 * modelling code never reads (it uses hidden_activation); cache_implementation is a
 * generation setting. */
static const char *const gemma2_keys[] = {
    "sliding_window",    "layer_types", "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping",
    "hidden_activation", NULL};
/* Gemma 3's text model (configuration_gemma3.py Gemma3TextConfig, modeling_gemma3.py). */
static const char *const gemma3_keys[] = {"sliding_window",        "sliding_window_pattern", "layer_types",
                                          "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping",
                                          "hidden_activation",     "rope_local_base_freq",   NULL};
static const dfl__refused_key gemma3_refused[] = {
    {"use_bidirectional_attention", "\"use_bidirectional_attention\": attention without the causal mask is not "
                                    "implemented (model_type %s)"},
    {NULL, NULL}};
/* Phi-3 (configuration_phi3.py, modeling_phi3.py): the top-level
 * original_max_position_embeddings belongs to longrope; the dropouts change nothing. */
static const char *const phi3_keys[] = {"sliding_window", "original_max_position_embeddings", "partial_rotary_factor",
                                        NULL};
static const char *const phi3_harmless[] = {"resid_pdrop", "embd_pdrop", "diff_lambda_init", "diff_kv_pairing", NULL};
static const char *const gemma_harmless[] = {"cache_implementation", "diff_lambda_init", "diff_kv_pairing", NULL};

/* Motif's configuration keys (the ports' ModelArgs: MLX motif.py, Swift MotifModelConfiguration,
 * vLLM motif.py; docs/format.md "Motif"). num_noise_heads turns on GDA. */
static const char *const motif_keys[] = {"num_noise_heads", "k_ratio", "attn_rms_norm_eps", NULL};
/* Kernel choices, or keys every port ignores (vLLM sets no sliding window). */
static const char *const motif_harmless[] = {"fused_rope",         "expanded",          "sliding_window",
                                             "use_sliding_window", "max_window_layers", NULL};
static const dfl__refused_key motif_refused[] = {
    {"use_bias", "\"use_bias\" = true (biases on every projection of %s) is not implemented"},
    {"qkv_bias", "\"qkv_bias\" = true (q/k/v biases) is not implemented for model_type %s"},
    {"quantization", "\"quantization\": an MLX-quantized %s checkpoint (dequantize to F32, F16 or BF16 first)"},
    {NULL, NULL}};

static const dfl__family families[] = {
    {.model_type = "llama", .attn = DFL_MODEL_LLAMA, .harmless = diff_keys, .refused = no_window},
    {.model_type = "qwen2",
     .attn = DFL_MODEL_LLAMA,
     .keys = qwen_keys,
     .harmless = diff_keys,
     .qkv_bias = 1,
     .window = DFL__WINDOW_QWEN},
    /* Qwen3Config's head_dim default is 128, whatever D / H */
    {.model_type = "qwen3",
     .attn = DFL_MODEL_LLAMA,
     .keys = qwen_keys,
     .harmless = diff_keys,
     .head_dim = 128,
     .qk_norm = 1,
     .window = DFL__WINDOW_QWEN},
    {.model_type = "mistral",
     .attn = DFL_MODEL_LLAMA,
     .keys = mistral_keys,
     .harmless = diff_keys,
     .window = DFL__WINDOW_EVERY_LAYER},
    {.model_type = "diff_transformer",
     .attn = DFL_MODEL_DIFF_TRANSFORMER,
     .keys = diff_keys,
     .refused = no_window,
     .rope_interleaved = 1},
    {.model_type = "diffllama", .attn = DFL_MODEL_DIFFLLAMA, .keys = diff_keys, .refused = no_window},
    /* GPT2Config: tie_word_embeddings true, n_inner null = 4·n_embd, gelu_new */
    {.model_type = "gpt2",
     .attn = DFL_MODEL_LLAMA,
     .keys = gpt2_keys,
     .harmless = gpt2_harmless,
     .refused = gpt2_refused,
     .norm = DFL__NORM_LAYER,
     .mlp = DFL__MLP_GELU,
     .layout = DFL__LAYOUT_GPT2,
     .aliases = gpt2_aliases,
     .tied_default = 1,
     .ffn_mult = 4,
     .act_default = "gelu_new",
     .no_bos = 1},
    /* GPTNeoXConfig: untied embed_out, gelu, biases unless attention_bias false */
    {.model_type = "gpt_neox",
     .attn = DFL_MODEL_LLAMA,
     .keys = neox_keys,
     .harmless = neox_harmless,
     .refused = no_window,
     .norm = DFL__NORM_LAYER,
     .mlp = DFL__MLP_GELU,
     .layout = DFL__LAYOUT_NEOX,
     .aliases = neox_aliases,
     .act_default = "gelu",
     .no_bos = 1},
    /* Gemma2Config: head_dim 256, tied, even layers slide over sliding_window [4096] */
    {.model_type = "gemma2",
     .attn = DFL_MODEL_LLAMA,
     .keys = gemma2_keys,
     .harmless = gemma_harmless,
     .head_dim = 256,
     .norm = DFL__NORM_RMS_1P,
     .mlp = DFL__MLP_GEGLU,
     .window = DFL__WINDOW_PATTERN,
     .tied_default = 1,
     .block = DFL__BLOCK_SANDWICH,
     .window_pattern = 2,
     .window_default = 4096,
     .embed_scale = 1},
    /* Gemma3TextConfig: as Gemma 2 plus per-head q/k norms, five sliding layers in six,
     * rope_theta 1e6 for the full layers and rope_local_base_freq 10000 for the sliding
     * ones, no soft-capping */
    {.model_type = "gemma3_text",
     .attn = DFL_MODEL_LLAMA,
     .keys = gemma3_keys,
     .harmless = gemma_harmless,
     .refused = gemma3_refused,
     .head_dim = 256,
     .norm = DFL__NORM_RMS_1P,
     .mlp = DFL__MLP_GEGLU,
     .qk_norm = 1,
     .window = DFL__WINDOW_PATTERN,
     .tied_default = 1,
     .block = DFL__BLOCK_SANDWICH,
     .window_pattern = 6,
     .window_default = 4096,
     .embed_scale = 1,
     .rope_theta_default = 1e6,
     .rope_local_default = 10000.0},
    /* Olmo2Config (configuration_olmo2.py, modeling_olmo2.py): norms after attention and
     * MLP only, q/k RMSNorm over the whole projection */
    {.model_type = "olmo2",
     .attn = DFL_MODEL_LLAMA,
     .harmless = diff_keys,
     .refused = no_window,
     .qk_norm = 2,
     .block = DFL__BLOCK_POST},
    /* Phi3Config: fused projections, Mistral's window rule (sliding_window on every layer) */
    {.model_type = "phi3",
     .attn = DFL_MODEL_LLAMA,
     .keys = phi3_keys,
     .harmless = phi3_harmless,
     .window = DFL__WINDOW_EVERY_LAYER,
     .fused_proj = 1},
    /* "Motif" as vLLM's config class and the hub's configuration_motif.py write it,
     * "motif" as MLX conversions do */
    /* difflens's convention for DIFF V2 (docs/format.md): Llama keys, interleaved RoPE */
    {.model_type = "diff_transformer_v2", .attn = DFL_MODEL_DIFF_V2, .refused = no_window, .rope_interleaved = 1},
    {.model_type = "Motif",
     .attn = DFL_MODEL_MOTIF,
     .keys = motif_keys,
     .harmless = motif_harmless,
     .refused = motif_refused,
     .mlp = DFL__MLP_POLYNORM,
     .hidden_act = "poly_norm",
     .lambda_layer_shift = 1,
     .subnorm_eps = 1e-5},
    {.model_type = "motif",
     .attn = DFL_MODEL_MOTIF,
     .keys = motif_keys,
     .harmless = motif_harmless,
     .refused = motif_refused,
     .mlp = DFL__MLP_POLYNORM,
     .hidden_act = "poly_norm",
     .lambda_layer_shift = 1,
     .subnorm_eps = 1e-5},
};
#define N_FAMILIES (sizeof families / sizeof families[0])

const dfl__family *dfl__family_find(const char *model_type)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (!strcmp(families[i].model_type, model_type)) return &families[i];
    return NULL;
}

const dfl__family *dfl__family_of(const dfl_config *c)
{
    const dfl__family *f = dfl__family_find(c->model_type);
    if (f && f->attn == c->type) return f;
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (families[i].attn == c->type) return &families[i];
    return NULL;
}

const char *dfl__family_names(void)
{
    return "llama, qwen2, qwen3, mistral, diff_transformer, diffllama, gpt2, gpt_neox, gemma2, gemma3_text, olmo2, "
           "phi3, diff_transformer_v2, Motif, motif";
}

const dfl__attn_variant *dfl__attn_variant_of_type(dfl_model_type t)
{
    return (unsigned)t < N_VARIANTS ? &variants[t] : NULL;
}

const dfl__attn_variant *dfl__attn_of(const dfl_config *c)
{
    return dfl__attn_variant_of_type(c->type);
}

/* Motif V1: H/2 heads; GDA: H − Gn signal heads, each writing 2d columns. */
static void motif_shape(const dfl_config *c, dfl__attn_shape *s)
{
    int64_t signal = c->num_noise_heads ? c->num_heads - c->num_noise_heads : c->num_heads / 2;
    s->heads = signal;
    s->att_ld = signal * 2 * c->head_dim;
}

dfl__attn_shape dfl__attn_shape_of(const dfl_config *c)
{
    const dfl__attn_variant *a = dfl__attn_of(c);
    int64_t hd = c->head_dim;
    dfl__attn_shape s;
    s.n_qheads = a->sub_heads * c->num_heads;
    s.n_kheads = a->sub_heads * c->num_kv_heads;
    s.q_ld = s.n_qheads * hd;
    s.k_ld = s.n_kheads * hd;
    s.v_ld = c->num_kv_heads * a->v_per_kv * hd;
    s.att_ld = c->num_heads * a->v_per_kv * hd;
    s.heads = c->num_heads / a->heads_per_analysis;
    if (c->type == DFL_MODEL_MOTIF) motif_shape(c, &s);
    if (c->type == DFL_MODEL_DIFF_V2) { /* 2H q heads of hd (RoPE runs on each) */
        s.n_qheads = 2 * c->num_heads;
        s.q_ld = s.n_qheads * hd;
    }
    return s;
}

dfl__head_plan dfl__head_plan_make(const dfl_config *c, int64_t h)
{
    return dfl__attn_of(c)->plan(c, h);
}

float dfl__subnorm_eps(const dfl_config *c)
{
    float e = dfl__attn_of(c)->subnorm_eps;
    if (c->subnorm_eps > 0) return (float)c->subnorm_eps;
    return e > 0 ? e : e == 0 ? (float)c->rms_norm_eps : 0.0f;
}

static int in_list(const char *const *list, const char *k)
{
    for (; list && *list; list++)
        if (!strcmp(*list, k)) return 1;
    return 0;
}

static const char *refusal(const dfl__refused_key *list, const char *k)
{
    for (; list && list->key; list++)
        if (!strcmp(list->key, k)) return list->why;
    return NULL;
}

dfl__key_kind dfl__family_key(const dfl__family *f, const char *key, const char **why)
{
    *why = NULL;
    if (in_list(common_keys, key) || in_list(f->keys, key)) return DFL__KEY_READ;
    if (in_list(common_harmless, key) || in_list(f->harmless, key)) return DFL__KEY_HARMLESS;
    if ((*why = refusal(f->refused, key)) || (*why = refusal(common_refused, key))) return DFL__KEY_REFUSED;
    return DFL__KEY_UNKNOWN;
}
