/* gguf_model.c — a dfl_model from a GGUF file (llama.cpp's layout): the metadata
 * written out as the config.json a Hugging Face checkpoint of the same model would
 * carry (then parsed by the family rules like any other), the tensors bound by their
 * GGUF names and checked against it. Quantized matrices stay in the mapping as ggml
 * blocks (dfl_wmat dtype DFL_WMAT_GGML + type); Llama's Q/K rows, which
 * convert_hf_to_gguf.py permutes for ggml's interleaved RoPE, are read back in
 * Hugging Face order (dfl_wmat.pair_hd), so the model is the safetensors one. The
 * families beyond Llama's layout (Gemma, Phi-3, OLMo 2, GPT-2, GPT-NeoX) follow
 * convert_hf_to_gguf.py and llama.cpp's hyperparameter rules (docs/format.md). */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/family.h"
#include "model/gguf.h"
#include "model/gguf_quant.h"
#include "model/model.h"
#include "model/safetensors.h"

/* The rules beyond the common keys and Llama's tensors. */
enum { RULES_LLAMA = 0, RULES_GEMMA2 = 2, RULES_GEMMA3 = 3, RULES_PHI3, RULES_OLMO2, RULES_GPT2, RULES_NEOX };

/* general.architecture → model_type; permuted: the converter permutes Q/K rows. */
static const struct {
    const char *arch, *model_type;
    int permuted, rules;
} ARCHS[] = {{"llama", "llama", 1, RULES_LLAMA},    {"mistral", "mistral", 1, RULES_LLAMA},
             {"qwen2", "qwen2", 0, RULES_LLAMA},    {"qwen3", "qwen3", 0, RULES_LLAMA},
             {"gemma2", "gemma2", 0, RULES_GEMMA2}, {"gemma3", "gemma3_text", 0, RULES_GEMMA3},
             {"phi3", "phi3", 0, RULES_PHI3},       {"olmo2", "olmo2", 0, RULES_OLMO2},
             {"gpt2", "gpt2", 0, RULES_GPT2},       {"gptneox", "gpt_neox", 0, RULES_NEOX}};

#define DIM_MAX ((int64_t)1 << 24)

typedef struct gbinder {
    dfl_model *m;
    const dfl_gguf *g;
    const char *path;
    unsigned char *used; /* [tensor count] */
    size_t cap;
    int permuted;
} gbinder;

/* ---------------------------------------------------------------- config */

/* An integer key {arch}.name; def < 0: required. */
static dfl_status meta_int(const dfl_gguf *g, const char *path, const char *arch, const char *name, int64_t def,
                           int64_t *out, dfl_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    int r = dfl_gguf_get_int(g, key, out);
    if (r == 0 && def >= 0) {
        *out = def;
        return DFL_OK;
    }
    if (r == 0) return dfl__fail(err, DFL_ERR_CONFIG, "%s: GGUF metadata key '%s' is missing", path, key);
    if (r < 0)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: GGUF metadata key '%s' must be one integer (per-layer arrays are "
                         "not supported)",
                         path, key);
    if (*out < 0 || *out > DIM_MAX)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: GGUF metadata key '%s' = %lld is out of range", path, key,
                         (long long)*out);
    return DFL_OK;
}

static dfl_status meta_num(const dfl_gguf *g, const char *path, const char *arch, const char *name, double def,
                           int required, double *out, dfl_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    int r = dfl_gguf_get_num(g, key, out);
    if (r == 0 && !required) {
        *out = def;
        return DFL_OK;
    }
    if (r == 0) return dfl__fail(err, DFL_ERR_CONFIG, "%s: GGUF metadata key '%s' is missing", path, key);
    if (r < 0 || !isfinite(*out))
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: GGUF metadata key '%s' must be a number", path, key);
    return DFL_OK;
}

/* Gemma 2 and 3 as llama.cpp reads them (llama-model.cpp's load_hparams): the layer
 * pattern and the local RoPE base are fixed by the architecture (Gemma 2: every other
 * layer slides, window 4096 unless given; Gemma 3: five of six, local base 10000), the
 * query scale is 1/√head_dim except for the 27B shapes (46 / 62 layers: 1/√(D/H)),
 * Gemma 2's soft-caps default to 50 and 30; GELU (tanh) MLPs. The norm gains arrive as
 * 1 + w (the converter adds the 1), which is what the forward pass holds. */
static dfl_status gemma_config(const dfl_gguf *g, const char *path, const char *arch, int gemma, int64_t L, int64_t D,
                               int64_t H, int64_t key_len, cJSON *c, dfl_error *err)
{
    int64_t window;
    double attn_cap = 0, final_cap = 0;
    char key[128];
    dfl_status s;
    if ((s = meta_int(g, path, arch, "attention.sliding_window", gemma == 2 ? 4096 : -1, &window, err)) ||
        (s = meta_num(g, path, arch, "attn_logit_softcapping", 50.0, 0, &attn_cap, err)) ||
        (s = meta_num(g, path, arch, "final_logit_softcapping", gemma == 2 ? 30.0 : 0.0, 0, &final_cap, err)))
        return s;
    snprintf(key, sizeof key, "%s.attn_logit_softcapping", arch);
    if (gemma == 3 && dfl_gguf_find_kv(g, key))
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: %s: Gemma 3 has no attention soft-capping", path, key);
    int big = (gemma == 2 && L == 46) || (gemma == 3 && L == 62); /* llama.cpp's LLM_TYPE_27B */
    cJSON_AddNumberToObject(c, "query_pre_attn_scalar", (double)(big ? D / H : key_len));
    cJSON_AddNumberToObject(c, "sliding_window", (double)window);
    cJSON_AddStringToObject(c, "hidden_activation", "gelu_pytorch_tanh");
    if (gemma == 2)
        cJSON_AddNumberToObject(c, "attn_logit_softcapping", attn_cap);
    else
        cJSON_AddNullToObject(c, "attn_logit_softcapping");
    if (final_cap > 0)
        cJSON_AddNumberToObject(c, "final_logit_softcapping", final_cap);
    else
        cJSON_AddNullToObject(c, "final_logit_softcapping");
    if (gemma == 3) {
        cJSON_AddNumberToObject(c, "sliding_window_pattern", 6);
        cJSON_AddNumberToObject(c, "rope_local_base_freq", 10000.0);
    }
    return DFL_OK;
}

/* The n values of an F32 tensor (checked by the caller) as a JSON array. */
static cJSON *f32_array(const dfl_gguf_tensor *t, int64_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (int64_t j = 0; a && j < n; j++) {
        float v;
        memcpy(&v, (const char *)t->data + 4 * j, 4);
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v));
    }
    return a;
}

/* Phi-3 as convert_hf_to_gguf.py's Phi3MiniModel writes it: rope.dimension_count (a
 * partial rotary factor below 1, Phi-4-mini), attention.sliding_window (0: none), and for
 * the long-context models the longrope factors as tensors rope_factors_short/long with
 * rope.scaling.original_context_length and rope.scaling.attn_factor. */
static dfl_status phi3_config(const dfl_gguf *g, const char *path, const char *arch, int64_t key_len, int64_t rope_dim,
                              cJSON *c, dfl_error *err)
{
    int64_t window, orig = 0;
    double attn_factor = 0;
    dfl_status s;
    if ((s = meta_int(g, path, arch, "attention.sliding_window", 0, &window, err))) return s;
    if (window > 0)
        cJSON_AddNumberToObject(c, "sliding_window", (double)window);
    else
        cJSON_AddNullToObject(c, "sliding_window");
    if (rope_dim != key_len) cJSON_AddNumberToObject(c, "partial_rotary_factor", (double)rope_dim / (double)key_len);
    const dfl_gguf_tensor *f[2] = {dfl_gguf_find_tensor(g, "rope_factors_short.weight"),
                                   dfl_gguf_find_tensor(g, "rope_factors_long.weight")};
    if (!f[0] && !f[1]) return DFL_OK;
    for (int i = 0; i < 2; i++)
        if (!f[i] || f[i]->type != DFL_GGML_F32 || f[i]->ndim != 1 || f[i]->ne[0] != rope_dim / 2)
            return dfl__fail(err, DFL_ERR_TENSOR,
                             "%s: longrope needs tensors 'rope_factors_short.weight' and "
                             "'rope_factors_long.weight', F32 [%lld] each",
                             path, (long long)(rope_dim / 2));
    if ((s = meta_int(g, path, arch, "rope.scaling.original_context_length", -1, &orig, err)) ||
        (s = meta_num(g, path, arch, "rope.scaling.attn_factor", 0, 0, &attn_factor, err)))
        return s;
    cJSON_AddNumberToObject(c, "original_max_position_embeddings", (double)orig);
    cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
    cJSON_AddStringToObject(rs, "rope_type", "longrope");
    cJSON_AddItemToObject(rs, "short_factor", f32_array(f[0], rope_dim / 2));
    cJSON_AddItemToObject(rs, "long_factor", f32_array(f[1], rope_dim / 2));
    if (attn_factor > 0) cJSON_AddNumberToObject(rs, "attention_factor", attn_factor);
    return DFL_OK;
}

/* GPT-2 and GPT-NeoX (Pythia) as convert_hf_to_gguf.py's GPT2Model / GPTNeoXModel write
 * them, as the config.json of their own families (GPT2Config's key names for GPT-2):
 * LayerNorm eps from attention.layer_norm_epsilon, GPT-2's learned positions
 * (n_positions = context_length) and gelu_new, NeoX's rotary dims as rotary_pct,
 * use_parallel_residual, rope.freq_base (default 10000), exact GELU, biases on q/k/v
 * when attn_qkv.bias is there. */
static dfl_status ln_config(const dfl_gguf *g, const char *path, const char *arch, int neox, char **json,
                            dfl_error *err)
{
    int64_t L, D, F, H, ctx, rd = 0, bos;
    double eps, theta = 10000.0;
    int parallel = 1;
    char key[128];
    dfl_status s;
    if ((s = meta_int(g, path, arch, "block_count", -1, &L, err)) ||
        (s = meta_int(g, path, arch, "embedding_length", -1, &D, err)) ||
        (s = meta_int(g, path, arch, "feed_forward_length", -1, &F, err)) ||
        (s = meta_int(g, path, arch, "attention.head_count", -1, &H, err)) ||
        (s = meta_int(g, path, arch, "context_length", -1, &ctx, err)) ||
        (s = meta_num(g, path, arch, "attention.layer_norm_epsilon", 0, 1, &eps, err)))
        return s;
    if (H < 1 || D % H)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: %s.attention.head_count (%lld) must divide embedding_length (%lld)",
                         path, arch, (long long)H, (long long)D);
    if (neox && ((s = meta_int(g, path, arch, "rope.dimension_count", D / H, &rd, err)) ||
                 (s = meta_num(g, path, arch, "rope.freq_base", 10000.0, 0, &theta, err))))
        return s;
    snprintf(key, sizeof key, "%s.use_parallel_residual", arch);
    if (neox && dfl_gguf_get_bool(g, key, &parallel) < 0)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: GGUF metadata key '%s' must be a boolean", path, key);
    const dfl_gguf_tensor *emb = dfl_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->ndim != 2)
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor 'token_embd.weight' is missing or not 2-D", path);
    cJSON *c = cJSON_CreateObject();
    if (!c) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    int tied = dfl_gguf_find_tensor(g, "output.weight") == NULL;
    cJSON_AddStringToObject(c, "model_type", neox ? "gpt_neox" : "gpt2");
    cJSON_AddNumberToObject(c, "vocab_size", (double)emb->ne[1]);
    if (neox) {
        cJSON_AddNumberToObject(c, "hidden_size", (double)D);
        cJSON_AddNumberToObject(c, "num_hidden_layers", (double)L);
        cJSON_AddNumberToObject(c, "num_attention_heads", (double)H);
        cJSON_AddNumberToObject(c, "intermediate_size", (double)F);
        cJSON_AddNumberToObject(c, "max_position_embeddings", (double)ctx);
        cJSON_AddNumberToObject(c, "layer_norm_eps", eps);
        cJSON_AddNumberToObject(c, "rotary_pct", (double)rd / (double)(D / H));
        cJSON_AddNumberToObject(c, "rotary_emb_base", theta);
        cJSON_AddBoolToObject(c, "use_parallel_residual", parallel);
        cJSON_AddStringToObject(c, "hidden_act", "gelu");
        cJSON_AddBoolToObject(c, "attention_bias", dfl_gguf_find_tensor(g, "blk.0.attn_qkv.bias") != NULL);
    } else {
        cJSON_AddNumberToObject(c, "n_embd", (double)D);
        cJSON_AddNumberToObject(c, "n_layer", (double)L);
        cJSON_AddNumberToObject(c, "n_head", (double)H);
        cJSON_AddNumberToObject(c, "n_inner", (double)F);
        cJSON_AddNumberToObject(c, "n_positions", (double)ctx);
        cJSON_AddNumberToObject(c, "layer_norm_epsilon", eps);
        cJSON_AddStringToObject(c, "activation_function", "gelu_new");
    }
    cJSON_AddBoolToObject(c, "tie_word_embeddings", tied);
    if (dfl_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos) == 1)
        cJSON_AddNumberToObject(c, "bos_token_id", (double)bos);
    *json = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return *json ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
}

/* The config.json text of the model the metadata describes. Caller frees *json. */
static dfl_status build_config(const dfl_gguf *g, const char *path, char **json, int *permuted, dfl_error *err)
{
    const char *a;
    size_t alen;
    char arch[32];
    if (dfl_gguf_get_str(g, "general.architecture", &a, &alen) != 1)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: GGUF metadata has no string 'general.architecture'", path);
    snprintf(arch, sizeof arch, "%.*s", (int)(alen < 31 ? alen : 31), a);
    size_t k = 0, n_arch = sizeof ARCHS / sizeof ARCHS[0];
    while (k < n_arch && (strlen(ARCHS[k].arch) != alen || memcmp(ARCHS[k].arch, a, alen)))
        k++;
    if (k == n_arch)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: GGUF architecture '%.*s' is not supported (llama, mistral, qwen2, "
                         "qwen3, gemma2, gemma3, phi3, olmo2, gpt2, gptneox)",
                         path, (int)(alen < 64 ? alen : 64), a);
    *permuted = ARCHS[k].permuted;
    if (ARCHS[k].rules == RULES_GPT2 || ARCHS[k].rules == RULES_NEOX)
        return ln_config(g, path, arch, ARCHS[k].rules == RULES_NEOX, json, err);
    int64_t L, D, F, H, Hkv, ctx, key_len, val_len, rope_dim, bos;
    double theta, eps, factor = 0;
    dfl_status s;
    if ((s = meta_int(g, path, arch, "block_count", -1, &L, err)) ||
        (s = meta_int(g, path, arch, "embedding_length", -1, &D, err)) ||
        (s = meta_int(g, path, arch, "feed_forward_length", -1, &F, err)) ||
        (s = meta_int(g, path, arch, "attention.head_count", -1, &H, err)) ||
        (s = meta_int(g, path, arch, "attention.head_count_kv", H, &Hkv, err)) ||
        (s = meta_int(g, path, arch, "context_length", 0, &ctx, err)) ||
        (s = meta_num(g, path, arch, "rope.freq_base", 10000.0, 0, &theta, err)) ||
        (s = meta_num(g, path, arch, "attention.layer_norm_rms_epsilon", 0, 1, &eps, err)))
        return s;
    if (H < 1 || D % H)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: %s.attention.head_count (%lld) must divide embedding_length (%lld)",
                         path, arch, (long long)H, (long long)D);
    if ((s = meta_int(g, path, arch, "attention.key_length", D / H, &key_len, err)) ||
        (s = meta_int(g, path, arch, "attention.value_length", key_len, &val_len, err)) ||
        (s = meta_int(g, path, arch, "rope.dimension_count", key_len, &rope_dim, err)))
        return s;
    int partial_ok = ARCHS[k].rules == RULES_PHI3 && rope_dim > 0 && rope_dim < key_len && rope_dim % 2 == 0;
    if (val_len != key_len || (rope_dim != key_len && !partial_ok))
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: key_length %lld, value_length %lld and rope.dimension_count %lld "
                         "must agree (partial rotary embeddings: phi3 only)",
                         path, (long long)key_len, (long long)val_len, (long long)rope_dim);
    char key[128];
    const char *st;
    size_t stlen;
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    int has_scaling = dfl_gguf_get_str(g, key, &st, &stlen) == 1 && !(stlen == 4 && !memcmp(st, "none", 4));
    if (has_scaling && !(stlen == 6 && !memcmp(st, "linear", 6)))
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: %s = '%.*s' is not supported (none, linear)", path, key,
                         (int)(stlen < 32 ? stlen : 32), st);
    if (has_scaling && (s = meta_num(g, path, arch, "rope.scaling.factor", 0, 1, &factor, err))) return s;
    /* Llama 3.1/3.2's rope_scaling "llama3" arrives as per-frequency factors (the
     * converter's rope_freqs; llama.cpp divides frequency j by factor j): */
    const dfl_gguf_tensor *ff = dfl_gguf_find_tensor(g, "rope_freqs.weight");
    if (ff && (ff->type != DFL_GGML_F32 || ff->ndim != 1 || ff->ne[0] != rope_dim / 2))
        return dfl__fail(err, DFL_ERR_TENSOR,
                         "%s: tensor 'rope_freqs.weight' must be F32 [%lld] (rope.dimension_count / 2), "
                         "one factor per frequency",
                         dfl_gguf_file_of(g, ff), (long long)(rope_dim / 2));
    if (ff && has_scaling)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: both %s and tensor 'rope_freqs.weight' scale RoPE", path, key);
    const dfl_gguf_tensor *emb = dfl_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->ndim != 2)
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor 'token_embd.weight' is missing or not 2-D", path);
    cJSON *c = cJSON_CreateObject();
    if (!c) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(c, "model_type", ARCHS[k].model_type);
    cJSON_AddNumberToObject(c, "vocab_size", (double)emb->ne[1]);
    cJSON_AddNumberToObject(c, "hidden_size", (double)D);
    cJSON_AddNumberToObject(c, "intermediate_size", (double)F);
    cJSON_AddNumberToObject(c, "num_hidden_layers", (double)L);
    cJSON_AddNumberToObject(c, "num_attention_heads", (double)H);
    cJSON_AddNumberToObject(c, "num_key_value_heads", (double)Hkv);
    cJSON_AddNumberToObject(c, "head_dim", (double)key_len);
    cJSON_AddNumberToObject(c, "rms_norm_eps", eps);
    cJSON_AddNumberToObject(c, "rope_theta", theta);
    if (ctx > 0) cJSON_AddNumberToObject(c, "max_position_embeddings", (double)ctx);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", dfl_gguf_find_tensor(g, "output.weight") == NULL);
    if (dfl_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos) == 1)
        cJSON_AddNumberToObject(c, "bos_token_id", (double)bos);
    if (has_scaling) {
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        if (rs) {
            cJSON_AddStringToObject(rs, "rope_type", "linear");
            cJSON_AddNumberToObject(rs, "factor", factor);
        }
    }
    if (ff) { /* the same angles as longrope with both lists = the factors, no attention factor */
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "longrope");
        cJSON_AddItemToObject(rs, "short_factor", f32_array(ff, rope_dim / 2));
        cJSON_AddItemToObject(rs, "long_factor", f32_array(ff, rope_dim / 2));
        cJSON_AddNumberToObject(rs, "factor", 1.0);
        cJSON_AddNumberToObject(rs, "attention_factor", 1.0);
    }
    if ((ARCHS[k].rules == RULES_GEMMA2 || ARCHS[k].rules == RULES_GEMMA3) &&
        (s = gemma_config(g, path, arch, ARCHS[k].rules, L, D, H, key_len, c, err))) {
        cJSON_Delete(c);
        return s;
    }
    if (ARCHS[k].rules == RULES_PHI3 && (s = phi3_config(g, path, arch, key_len, rope_dim, c, err))) {
        cJSON_Delete(c);
        return s;
    }
    *json = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return *json ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
}

/* ---------------------------------------------------------------- tensors */

/* Mark tensor t (NULL: nothing) as read, for gcheck_unused. */
static void mark_used(gbinder *b, const dfl_gguf_tensor *t)
{
    for (size_t i = 0; t && i < dfl_gguf_tensor_count(b->g); i++)
        if (dfl_gguf_tensor_at(b->g, i) == t) b->used[i] = 1;
}

/* Find name with shape [d0] or [d0, d1] (PyTorch order; the file's ne is reversed) and
 * a type difflens reads; mark it used. optional: absent gives *out = NULL. */
static dfl_status gfind(gbinder *b, const char *name, int64_t d0, int64_t d1, int optional, const dfl_gguf_tensor **out,
                        dfl_error *err)
{
    *out = NULL;
    const dfl_gguf_tensor *t = dfl_gguf_find_tensor(b->g, name);
    if (!t) return optional ? DFL_OK : dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '%s' is missing", b->path, name);
    const char *file = dfl_gguf_file_of(b->g, t);
    if (!dfl_ggml_type_supported(t->type))
        return dfl__fail(err, DFL_ERR_TENSOR,
                         "%s: tensor '%s' has type %s, which difflens does not dequantize "
                         "(F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)",
                         file, name, dfl_ggml_type_name(t->type));
    int ndim = d1 ? 2 : 1;
    if (t->ndim != ndim || (ndim == 2 ? t->ne[1] != d0 || t->ne[0] != d1 : t->ne[0] != d0)) {
        char got[96] = "[";
        for (int i = t->ndim - 1; i >= 0; i--)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%lld%s", (long long)t->ne[i], i ? ", " : "]");
        if (d1)
            return dfl__fail(err, DFL_ERR_TENSOR,
                             "%s: tensor '%s' has shape %s (rows, columns), the metadata needs "
                             "[%lld, %lld]",
                             file, name, got, (long long)d0, (long long)d1);
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '%s' has shape %s, the metadata needs [%lld]", file, name,
                         got, (long long)d0);
    }
    mark_used(b, t);
    *out = t;
    return DFL_OK;
}

/* A vector as f32: aligned F32 data in place, anything else dequantized into a buffer
 * the model owns. */
static dfl_status gbind(gbinder *b, const char *name, int64_t d0, int optional, float **out, dfl_error *err)
{
    const dfl_gguf_tensor *t;
    *out = NULL;
    dfl_status s = gfind(b, name, d0, 0, optional, &t, err);
    if (s || !t) return s;
    if (t->type == DFL_GGML_F32 && (uintptr_t)t->data % sizeof(float) == 0) {
        *out = (float *)(uintptr_t)t->data;
        return DFL_OK;
    }
    float *buf = dfl__model_owned_buffer(b->m, &b->cap, (size_t)d0);
    if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for tensor '%s'", name);
    dfl_ggml_dequant_row(t->type, t->data, buf, d0);
    *out = buf;
    return DFL_OK;
}

/* A matrix [d0, d1] as a view into the mapping; pair_hd > 0 for permuted Q/K rows. */
static dfl_status gbind_mat(gbinder *b, const char *name, int64_t d0, int64_t d1, int64_t pair_hd, dfl_wmat *out,
                            dfl_error *err)
{
    const dfl_gguf_tensor *t;
    dfl_status s = gfind(b, name, d0, d1, 0, &t, err);
    if (s) return s;
    out->data = t->data;
    out->dtype = t->type == DFL_GGML_F32    ? DFL_DTYPE_F32
                 : t->type == DFL_GGML_F16  ? DFL_DTYPE_F16
                 : t->type == DFL_GGML_BF16 ? DFL_DTYPE_BF16
                                            : DFL_WMAT_GGML + (int)t->type;
    out->rows = d0;
    out->cols = d1;
    out->pair_hd = pair_hd;
    return DFL_OK;
}

/* Rows [r0, r0 + n) of a matrix bound from the file (whole rows: ggml blocks never
 * straddle them). */
static dfl_wmat grows_of(const dfl_wmat *all, int64_t r0, int64_t n)
{
    dfl_wmat v = *all;
    size_t row = all->dtype >= DFL_WMAT_GGML ? dfl_ggml_row_bytes((uint32_t)(all->dtype - DFL_WMAT_GGML), all->cols)
                                             : (size_t)all->cols * dfl_dtype_size((dfl_dtype)all->dtype);
    v.data = (const unsigned char *)all->data + (size_t)r0 * row;
    v.rows = n;
    return v;
}

/* A GPT-2 / GPT-NeoX layer: LayerNorms with biases, the fused attn_qkv (q | k | v rows,
 * [out, in] like every projection here: m->ggml_layout), biases as the family has them. */
static dfl_status gbind_ln_layer(gbinder *b, int64_t l, dfl_error *err)
{
    const dfl_config *c = &b->m->config;
    dfl_layer_weights *w = &b->m->layers[l];
    int64_t D = c->hidden_size, F = c->intermediate_size;
    dfl__attn_shape sh = dfl__attn_shape_of(c);
    int64_t qkv = sh.q_ld + sh.k_ld + sh.v_ld;
    int bias = c->qkv_bias || dfl__family_of(c)->layout == DFL__LAYOUT_GPT2;
    char n[96];
    dfl_status s;
#define NAME(suffix) (snprintf(n, sizeof n, "blk.%lld.%s", (long long)l, suffix), n)
    if ((s = gbind(b, NAME("attn_norm.weight"), D, 0, &w->attn_norm, err)) ||
        (s = gbind(b, NAME("attn_norm.bias"), D, 0, &w->attn_norm_b, err)) ||
        (s = gbind(b, NAME("ffn_norm.weight"), D, 0, &w->mlp_norm, err)) ||
        (s = gbind(b, NAME("ffn_norm.bias"), D, 0, &w->mlp_norm_b, err)) ||
        (s = gbind_mat(b, NAME("attn_qkv.weight"), qkv, D, 0, &w->wqkv, err)) ||
        (s = gbind_mat(b, NAME("attn_output.weight"), D, sh.att_ld, 0, &w->wo, err)) ||
        (s = gbind_mat(b, NAME("ffn_up.weight"), F, D, 0, &w->w_up, err)) ||
        (s = gbind(b, NAME("ffn_up.bias"), F, 0, &w->b_up, err)) ||
        (s = gbind_mat(b, NAME("ffn_down.weight"), D, F, 0, &w->w_down, err)) ||
        (s = gbind(b, NAME("ffn_down.bias"), D, 0, &w->b_down, err)))
        return s;
    if (bias && ((s = gbind(b, NAME("attn_qkv.bias"), qkv, 0, &w->bqkv, err)) ||
                 (s = gbind(b, NAME("attn_output.bias"), D, 0, &w->bo, err))))
        return s;
#undef NAME
    return DFL_OK;
}

static dfl_status gbind_layer(gbinder *b, int64_t l, dfl_error *err)
{
    const dfl_config *c = &b->m->config;
    dfl_layer_weights *w = &b->m->layers[l];
    int64_t D = c->hidden_size, F = c->intermediate_size, hd = c->head_dim;
    dfl__attn_shape sh = dfl__attn_shape_of(c);
    int64_t pair = b->permuted ? hd : 0;
    char n[96];
    dfl_status s;
#define NAME(suffix) (snprintf(n, sizeof n, "blk.%lld.%s", (long long)l, suffix), n)
    const dfl__family *fam = dfl__family_of(c);
    if (fam->block == DFL__BLOCK_POST && fam->norm != DFL__NORM_RMS_1P) { /* OLMo 2: norms after the sub-layers */
        if ((s = gbind(b, NAME("post_attention_norm.weight"), D, 0, &w->post_attn_norm, err)) ||
            (s = gbind(b, NAME("post_ffw_norm.weight"), D, 0, &w->post_mlp_norm, err)))
            return s;
    } else if ((s = gbind(b, NAME("attn_norm.weight"), D, 0, &w->attn_norm, err)) ||
               (s = gbind(b, NAME("ffn_norm.weight"), D, 0, &w->mlp_norm, err))) {
        return s;
    }
    if (fam->fused_proj) { /* Phi-3: attn_qkv holds q, k, v in its rows; ffn_up gate then up */
        dfl_wmat all;
        if ((s = gbind_mat(b, NAME("attn_qkv.weight"), sh.q_ld + sh.k_ld + sh.v_ld, D, 0, &all, err))) return s;
        w->wq = grows_of(&all, 0, sh.q_ld);
        w->wk = grows_of(&all, sh.q_ld, sh.k_ld);
        w->wv = grows_of(&all, sh.q_ld + sh.k_ld, sh.v_ld);
        if ((s = gbind_mat(b, NAME("ffn_up.weight"), 2 * F, D, 0, &all, err))) return s;
        w->w_gate = grows_of(&all, 0, F);
        w->w_up = grows_of(&all, F, F);
    } else if ((s = gbind_mat(b, NAME("attn_q.weight"), sh.q_ld, D, pair, &w->wq, err)) ||
               (s = gbind_mat(b, NAME("attn_k.weight"), sh.k_ld, D, pair, &w->wk, err)) ||
               (s = gbind_mat(b, NAME("attn_v.weight"), sh.v_ld, D, 0, &w->wv, err)) ||
               (s = gbind_mat(b, NAME("ffn_gate.weight"), F, D, 0, &w->w_gate, err)) ||
               (s = gbind_mat(b, NAME("ffn_up.weight"), F, D, 0, &w->w_up, err))) {
        return s;
    }
    if ((s = gbind_mat(b, NAME("attn_output.weight"), D, sh.att_ld, 0, &w->wo, err)) ||
        (s = gbind_mat(b, NAME("ffn_down.weight"), D, F, 0, &w->w_down, err)))
        return s;
    if (c->qkv_bias && ((s = gbind(b, NAME("attn_q.bias"), sh.q_ld, 0, &w->bq, err)) ||
                        (s = gbind(b, NAME("attn_k.bias"), sh.k_ld, 0, &w->bk, err)) ||
                        (s = gbind(b, NAME("attn_v.bias"), sh.v_ld, 0, &w->bv, err))))
        return s;
    int whole = c->qk_norm == 2; /* OLMo 2: over the whole projection */
    if (c->qk_norm && ((s = gbind(b, NAME("attn_q_norm.weight"), whole ? sh.q_ld : hd, 0, &w->q_norm, err)) ||
                       (s = gbind(b, NAME("attn_k_norm.weight"), whole ? sh.k_ld : hd, 0, &w->k_norm, err))))
        return s;
    /* Gemma's norms after the sub-layers (their gains already 1 + w in the file) */
    if (dfl__family_of(c)->norm == DFL__NORM_RMS_1P &&
        ((s = gbind(b, NAME("post_attention_norm.weight"), D, 0, &w->post_attn_norm, err)) ||
         (s = gbind(b, NAME("post_ffw_norm.weight"), D, 0, &w->post_mlp_norm, err))))
        return s;
#undef NAME
    return DFL_OK;
}

/* Every tensor of the file that no binding used: refused, or listed with allow_unused. */
static dfl_status gcheck_unused(gbinder *b, int allow, dfl_error *err)
{
    size_t bad = 0;
    char names[400] = "";
    for (size_t i = 0; i < dfl_gguf_tensor_count(b->g); i++) {
        if (b->used[i]) continue;
        const char *nm = dfl_gguf_tensor_at(b->g, i)->name;
        if (allow) {
            char **nu = realloc(b->m->unused, (b->m->n_unused + 1) * sizeof *nu);
            if (!nu) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            b->m->unused = nu;
            if (!(nu[b->m->n_unused] = strdup(nm))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            b->m->n_unused++;
        }
        if (strlen(names) + strlen(nm) + 8 < 300)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", bad ? ", " : "", nm);
        else if (!strstr(names, "..."))
            strcat(names, ", ...");
        bad++;
    }
    if (!bad || allow) return DFL_OK;
    return dfl__fail(err, DFL_ERR_TENSOR,
                     "%s: %zu GGUF tensor%s not used by a %s model: %s (--allow-unused runs "
                     "without %s)",
                     b->path, bad, bad == 1 ? " is" : "s are", b->m->config.model_type, names,
                     bad == 1 ? "it" : "them");
}

dfl_status dfl__model_load_gguf(const char *path, const dfl_load_opts *opts, dfl_model **out, dfl_error *err)
{
    *out = NULL;
    dfl_model *m = calloc(1, sizeof *m);
    dfl_gguf *g = NULL;
    gbinder b = {m, NULL, path, NULL, 0, 0};
    dfl_status s;
    if (!m || !(m->path = strdup(path))) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((s = dfl_gguf_open(path, &g, err))) goto fail;
    m->gguf = g;
    b.g = g;
    if ((s = build_config(g, path, &m->config_text, &b.permuted, err))) goto fail;
    if ((s = dfl_config_parse(m->config_text, strlen(m->config_text), path, &m->config, err))) goto fail;
    size_t nt = dfl_gguf_tensor_count(g);
    if (!(b.used = calloc(nt ? nt : 1, 1))) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    const dfl_config *c = &m->config;
    const int ln = dfl__family_of(c)->layout != DFL__LAYOUT_LLAMA;
    m->ggml_layout = ln;
    if ((s = gbind_mat(&b, "token_embd.weight", c->vocab_size, c->hidden_size, 0, &m->embed, err)) ||
        (s = gbind(&b, "output_norm.weight", c->hidden_size, 0, &m->final_norm, err)))
        goto fail;
    if (ln && (s = gbind(&b, "output_norm.bias", c->hidden_size, 0, &m->final_norm_b, err))) goto fail;
    if (dfl__family_of(c)->layout == DFL__LAYOUT_GPT2 &&
        (s = gbind_mat(&b, "position_embd.weight", c->max_position_embeddings, c->hidden_size, 0, &m->pos_embed, err)))
        goto fail;
    if (c->tie_word_embeddings)
        m->lm_head = m->embed;
    else if ((s = gbind_mat(&b, "output.weight", c->vocab_size, c->hidden_size, 0, &m->lm_head, err)))
        goto fail;
    if (!(m->layers = calloc((size_t)c->num_layers, sizeof *m->layers))) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int64_t l = 0; l < c->num_layers; l++)
        if ((s = ln ? gbind_ln_layer(&b, l, err) : gbind_layer(&b, l, err))) goto fail;
    static const char *const read_by_config[] = {"rope_freqs.weight", "rope_factors_short.weight",
                                                 "rope_factors_long.weight"};
    for (size_t r = 0; r < sizeof read_by_config / sizeof *read_by_config; r++)
        mark_used(&b, dfl_gguf_find_tensor(g, read_by_config[r]));
    if ((s = gcheck_unused(&b, opts && opts->allow_unused, err))) goto fail;
    free(b.used);
    *out = m;
    return DFL_OK;
fail:
    free(b.used);
    dfl_model_free(m); /* closes g through m->gguf */
    return s;
}
