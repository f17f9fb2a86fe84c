/* model.c — config.json parsing (cJSON) and weight binding with shape checks. */
#include "model/model.h"

#include <cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsondoc.h"
#include "model/family.h"
#include "model/gguf.h"
#include "model/safetensors.h"

/* Upper bound on any single dimension: keeps every product below 2^62. */
#define DIM_MAX ((int64_t)1 << 24)

/* ------------------------------------------------------------ config keys */

/* JSON numbers beyond the doubles (1e309) parse as ±Inf, as in Python: named as out of
 * range rather than as not being numbers. */
static dfl_status out_of_range(const char *label, const char *key, dfl_error *err)
{
    return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"%s\" is out of range (beyond the largest double, about 1.8e308)",
                     label, key);
}

/* Read an integer key; absent or null gives def (or an error when def < 0 means
 * "required"). Non-integral, negative or huge values are refused. */
static dfl_status get_int(const cJSON *root, const char *key, int64_t def, int64_t max, const char *label, int64_t *out,
                          dfl_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) return dfl__fail(err, DFL_ERR_CONFIG, "%s: missing key \"%s\"", label, key);
        *out = def;
        return DFL_OK;
    }
    if (!cJSON_IsNumber(v)) return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"%s\" must be an integer", label, key);
    if (isinf(v->valuedouble)) return out_of_range(label, key, err);
    double d = v->valuedouble;
    if (d != floor(d) || d < 0 || d > (double)max)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"%s\" = %g is not an integer in [0, %lld]", label, key, d,
                         (long long)max);
    *out = (int64_t)d;
    return DFL_OK;
}

static dfl_status get_num(const cJSON *obj, const char *key, double def, const char *label, double *out, dfl_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return DFL_OK;
    }
    if (cJSON_IsNumber(v) && isinf(v->valuedouble)) return out_of_range(label, key, err);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"%s\" must be a number", label, key);
    *out = v->valuedouble;
    return DFL_OK;
}

static dfl_status get_bool(const cJSON *root, const char *key, int def, const char *label, int *out, dfl_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return DFL_OK;
    }
    if (!cJSON_IsBool(v)) return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"%s\" must be true or false", label, key);
    *out = cJSON_IsTrue(v);
    return DFL_OK;
}

/* One longrope factor list: head_dim/2 positive numbers. */
static dfl_status longrope_list(const cJSON *rs, const char *key, int64_t n, const char *label, double *out,
                                dfl_error *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(rs, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: longrope rope_scaling needs \"%s\" with head_dim/2 = %lld numbers",
                         label, key, (long long)n);
    int64_t i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0) || isinf(e->valuedouble))
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: rope_scaling \"%s\"[%lld] must be a number > 0", label, key,
                             (long long)i);
        out[i] = e->valuedouble;
    }
    return DFL_OK;
}

/* Phi-3's longrope (Hugging Face _compute_longrope_parameters and the longrope
 * frequency update): frequencies θ^(−2j/d) / factor[j], with short_factor for sequences
 * up to original_max_position_embeddings and long_factor past it; cos and sin × the
 * attention factor [√(1 + ln s / ln original) with s = max_position_embeddings /
 * original when s > 1, else 1]. original_max_position_embeddings is the top-level key
 * (Phi3Config); without it, max_position_embeddings and rope_scaling's factor. */
static dfl_status parse_longrope(const cJSON *root, const cJSON *rs, const char *label, dfl_config *c, dfl_error *err)
{
    int64_t n = c->head_dim / 2;
    dfl_status s;
    if (n > DFL_LONGROPE_MAX)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: longrope with head_dim %lld is not supported (at most %d)", label,
                         (long long)c->head_dim, 2 * DFL_LONGROPE_MAX);
    if ((s = longrope_list(rs, "short_factor", n, label, c->rope_short, err)) ||
        (s = longrope_list(rs, "long_factor", n, label, c->rope_long, err)))
        return s;
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(root, "original_max_position_embeddings");
    double factor;
    if (top && !cJSON_IsNull(top)) {
        if ((s = get_int(root, "original_max_position_embeddings", 0, DIM_MAX, label, &c->rope_original_max_pos, err)))
            return s;
        if (c->rope_original_max_pos < 1 || c->max_position_embeddings < 1)
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: longrope needs original_max_position_embeddings and "
                             "max_position_embeddings >= 1",
                             label);
        factor = (double)c->max_position_embeddings / (double)c->rope_original_max_pos;
    } else {
        c->rope_original_max_pos = c->max_position_embeddings;
        if (c->rope_original_max_pos < 1)
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: longrope needs max_position_embeddings", label);
        if (!cJSON_GetObjectItemCaseSensitive(rs, "factor"))
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: longrope rope_scaling needs \"factor\" (or a top-level "
                             "original_max_position_embeddings)",
                             label);
        if ((s = get_num(rs, "factor", 1.0, label, &factor, err))) return s;
    }
    double af = factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log((double)c->rope_original_max_pos));
    if ((s = get_num(rs, "attention_factor", af, label, &c->rope_attn_factor, err))) return s;
    if (!(c->rope_attn_factor > 0))
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: rope_scaling attention_factor must be > 0", label);
    c->rope_factor = factor;
    c->rope_kind = DFL_ROPE_LONGROPE;
    return DFL_OK;
}

/* rope_scaling (or the newer rope_parameters): none/default, linear, llama3. */
static dfl_status parse_rope_scaling(const cJSON *root, const char *label, dfl_config *c, dfl_error *err)
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if ((!rs || cJSON_IsNull(rs)) && rp && cJSON_IsObject(rp)) {
        rs = rp;
        dfl_status s = get_num(rp, "rope_theta", c->rope_theta, label, &c->rope_theta, err);
        if (s) return s;
    }
    c->rope_kind = DFL_ROPE_NONE;
    if (!rs || cJSON_IsNull(rs)) return DFL_OK;
    if (!cJSON_IsObject(rs))
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"rope_scaling\" must be an object or null", label);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!kind) kind = cJSON_GetObjectItemCaseSensitive(rs, "type");
    const char *k = cJSON_IsString(kind) ? kind->valuestring : "default";
    dfl_status s;
    if (!strcmp(k, "default")) return DFL_OK;
    if (!strcmp(k, "longrope")) return parse_longrope(root, rs, label, c, err);
    /* as Hugging Face's rope validation: factor is required for every scaling */
    if (!cJSON_GetObjectItemCaseSensitive(rs, "factor"))
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: rope_scaling \"%s\" needs \"factor\"", label, k);
    if ((s = get_num(rs, "factor", 1.0, label, &c->rope_factor, err))) return s;
    if (!(c->rope_factor > 0)) return dfl__fail(err, DFL_ERR_CONFIG, "%s: rope_scaling factor must be > 0", label);
    if (!strcmp(k, "linear")) {
        c->rope_kind = DFL_ROPE_LINEAR;
        return DFL_OK;
    }
    if (!strcmp(k, "dynamic")) {
        /* Unchanged frequencies up to the original context (Hugging Face recomputes them
         * only past it); the forward pass refuses longer sequences. */
        c->rope_kind = DFL_ROPE_DYNAMIC;
        if ((s = get_int(rs, "original_max_position_embeddings", c->max_position_embeddings, DIM_MAX, label,
                         &c->rope_original_max_pos, err)))
            return s;
        if (c->rope_original_max_pos <= 0)
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: dynamic rope_scaling needs max_position_embeddings", label);
        return DFL_OK;
    }
    if (!strcmp(k, "llama3")) {
        /* as Hugging Face's _validate_llama3_parameters: no defaults for these */
        static const char *const need[] = {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
        for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(rs, need[i]);
            if (!v || cJSON_IsNull(v))
                return dfl__fail(err, DFL_ERR_CONFIG,
                                 "%s: llama3 rope_scaling needs \"%s\" (factor, low_freq_factor, "
                                 "high_freq_factor and original_max_position_embeddings are all required)",
                                 label, need[i]);
        }
        c->rope_kind = DFL_ROPE_LLAMA3;
        if ((s = get_num(rs, "low_freq_factor", 1.0, label, &c->rope_low_freq_factor, err))) return s;
        if ((s = get_num(rs, "high_freq_factor", 4.0, label, &c->rope_high_freq_factor, err))) return s;
        if ((s = get_int(rs, "original_max_position_embeddings", 8192, DIM_MAX, label, &c->rope_original_max_pos, err)))
            return s;
        if (!(c->rope_high_freq_factor > c->rope_low_freq_factor) || !(c->rope_low_freq_factor > 0) ||
            c->rope_original_max_pos <= 0)
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor", label);
        return DFL_OK;
    }
    return dfl__fail(err, DFL_ERR_CONFIG,
                     "%s: rope_scaling type \"%s\" is not supported (none, linear, llama3, dynamic, "
                     "longrope)",
                     label, k);
}

/* Every key is read, ignored as harmless or refused (family.c lists them per family):
 * an unknown key may change the maths (softcapping, multipliers, quantization,
 * experts...), and a model computed without it would be silently wrong. A null or
 * false value of a key another family uses is its default: nothing to do. */
static dfl_status check_keys(const cJSON *root, const dfl__family *f, const char *label, dfl_error *err)
{
    for (const cJSON *it = root->child; it; it = it->next) {
        const char *k = it->string, *why;
        dfl__key_kind kind = dfl__family_key(f, k, &why);
        if (kind == DFL__KEY_READ || kind == DFL__KEY_HARMLESS) continue;
        if (cJSON_IsNull(it) || cJSON_IsFalse(it)) continue;
        if (kind == DFL__KEY_REFUSED) {
            char msg[400];
            snprintf(msg, sizeof msg, why, f->model_type);
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: %s", label, msg);
        }
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: key \"%s\" is not supported for model_type %s (it may change "
                         "the computation; docs/format.md lists the keys difflens reads and ignores)",
                         label, k, f->model_type);
    }
    return DFL_OK;
}

/* Qwen2/Qwen3 layer_types: full layers, then sliding ones (what Hugging Face derives
 * from use_sliding_window and max_window_layers). Given, it must agree with them: a
 * sliding layer when sliding is off, or a first sliding layer other than an explicit
 * max_window_layers, is refused rather than one of the two silently ignored.
 * *first gets the first sliding layer (num_layers: none). */
static dfl_status check_layer_types(const cJSON *root, const char *label, const dfl_config *c, int sliding,
                                    int64_t *first, dfl_error *err)
{
    *first = c->num_layers;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (!lt || cJSON_IsNull(lt)) return DFL_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->num_layers)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"layer_types\" must list one type per layer", label);
    int64_t l = 0;
    for (const cJSON *e = lt->child; e; e = e->next, l++) {
        int sl = cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention");
        if (!sl && !(cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention")))
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: layer_types[%lld] must be \"full_attention\" or "
                             "\"sliding_attention\"",
                             label, (long long)l);
        if (sl && !sliding)
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: layer_types[%lld] is \"sliding_attention\" but sliding is off "
                             "(use_sliding_window false or sliding_window null): the two disagree",
                             label, (long long)l);
        if (sl && *first == c->num_layers) *first = l;
        if (!sl && *first < l)
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: layer_types with a full layer after a sliding one are not "
                             "supported",
                             label);
    }
    const cJSON *mw = cJSON_GetObjectItemCaseSensitive(root, "max_window_layers");
    if (sliding && mw && !cJSON_IsNull(mw)) {
        int64_t from = c->window_from < c->num_layers ? c->window_from : c->num_layers;
        if (from != *first)
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: layer_types starts sliding at layer %lld but max_window_layers "
                             "is %lld: the two disagree",
                             label, (long long)*first, (long long)c->window_from);
    }
    return DFL_OK;
}

/* Gemma's alternation (modeling_gemma2.py: even layers slide; Gemma3TextConfig: layer l
 * slides when (l + 1) % sliding_window_pattern != 0). layer_types, when given, must say
 * the same. */
static dfl_status parse_window_pattern(const cJSON *root, const char *label, const dfl__family *f, dfl_config *c,
                                       dfl_error *err)
{
    dfl_status s;
    if ((s = get_int(root, "sliding_window_pattern", f->window_pattern, 4096, label, &c->window_pattern, err)))
        return s;
    if (c->window_pattern < 1)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"sliding_window_pattern\" must be >= 1", label);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (!lt || cJSON_IsNull(lt)) return DFL_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->num_layers)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"layer_types\" must list one type per layer", label);
    int64_t l = 0;
    for (const cJSON *e = lt->child; e; e = e->next, l++) {
        int want = c->sliding_window > 0 && (l + 1) % c->window_pattern != 0;
        const char *name = want ? "sliding_attention" : "full_attention";
        if (!cJSON_IsString(e) || strcmp(e->valuestring, name))
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: layer_types[%lld] is not \"%s\" (what sliding_window and the "
                             "sliding pattern of %lld give): the two disagree",
                             label, (long long)l, name, (long long)c->window_pattern);
    }
    return DFL_OK;
}

/* Sliding window, by the family's rule: Mistral windows every layer; Qwen2/Qwen3 only
 * when use_sliding_window, from layer max_window_layers on (or as layer_types says). A
 * window of 0 is refused: null is how a config says "full attention". */
static dfl_status parse_window(const cJSON *root, const char *label, const dfl__family *f, dfl_config *c,
                               dfl_error *err)
{
    dfl_status s;
    c->sliding_window = 0;
    c->window_from = 0;
    if (f->window == DFL__WINDOW_NONE) return DFL_OK;
    int use = 1;
    if (f->window == DFL__WINDOW_QWEN && (s = get_bool(root, "use_sliding_window", 0, label, &use, err))) return s;
    if (use) {
        const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
        if (cJSON_IsNumber(sw) && sw->valuedouble == 0)
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: \"sliding_window\" = 0 is not a window (null means full "
                             "attention)",
                             label);
        if ((s = get_int(root, "sliding_window", f->window_default, (int64_t)1 << 40, label, &c->sliding_window, err)))
            return s;
    }
    if (f->window == DFL__WINDOW_EVERY_LAYER) return DFL_OK;
    if (f->window == DFL__WINDOW_PATTERN) return parse_window_pattern(root, label, f, c, err);
    if (c->sliding_window && (s = get_int(root, "max_window_layers", 28, 4096, label, &c->window_from, err))) return s;
    int64_t first;
    if ((s = check_layer_types(root, label, c, c->sliding_window > 0, &first, err))) return s;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (c->sliding_window && lt && !cJSON_IsNull(lt)) c->window_from = first;
    if (!c->sliding_window) c->window_from = 0;
    return DFL_OK;
}

/* A family's own names of common keys (GPT-2's n_embd...): added to root under the
 * common name, so the rest of parsing reads one set of names. Both given is refused
 * (which one would be meant?). */
static dfl_status apply_aliases(cJSON *root, const dfl__family *f, const char *label, dfl_error *err)
{
    for (const dfl__key_alias *a = f->aliases; a && a->key; a++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, a->key);
        if (!v) continue;
        if (cJSON_GetObjectItemCaseSensitive(root, a->as))
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: both \"%s\" and \"%s\" are given (for model_type %s they "
                             "are one key)",
                             label, a->key, a->as, f->model_type);
        cJSON *dup = cJSON_Duplicate(v, 1);
        if (!dup || !cJSON_AddItemToObject(root, a->as, dup)) {
            cJSON_Delete(dup);
            return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        }
    }
    return DFL_OK;
}

/* GPT-NeoX (GPTNeoXConfig, GPTNeoXAttention): rotary_pct [0.25] of each head rotated
 * (rotary_ndims = int(head_size · rotary_pct), rotate-half), rotary_emb_base (read as
 * rope_theta) [10000], use_parallel_residual [true], attention_bias [true]: biases of
 * query_key_value and dense. */
static dfl_status parse_neox(const cJSON *root, const char *label, dfl_config *c, dfl_error *err)
{
    double pct;
    dfl_status s;
    if ((s = get_num(root, "rotary_pct", 0.25, label, &pct, err))) return s;
    if (!(pct > 0 && pct <= 1))
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"rotary_pct\" must be in (0, 1] (got %g)", label, pct);
    c->rotary_dim = (int64_t)((double)c->head_dim * pct);
    if (c->rotary_dim < 2 || c->rotary_dim % 2)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: rotary_pct %g of head_dim %lld gives %lld rotary dimensions (an "
                         "even number >= 2 is needed)",
                         label, pct, (long long)c->head_dim, (long long)c->rotary_dim);
    if (c->rotary_dim == c->head_dim) c->rotary_dim = 0;
    if ((s = get_bool(root, "use_parallel_residual", 1, label, &c->parallel_residual, err))) return s;
    return get_bool(root, "attention_bias", 1, label, &c->qkv_bias, err);
}

/* The GELU of a GELU or GeGLU MLP from config key `key` (dflt when absent or null): the
 * tanh form (gelu_new, gelu_pytorch_tanh, gelu_fast: one formula) or erf's (gelu). */
static dfl_status parse_gelu(const cJSON *root, const char *key, const char *dflt, const dfl__family *f,
                             const char *label, dfl_config *c, dfl_error *err)
{
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, key);
    const char *a = act && !cJSON_IsNull(act) ? (cJSON_IsString(act) ? act->valuestring : "?") : dflt;
    if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh") || !strcmp(a, "gelu_fast"))
        c->act = DFL_ACT_GELU_TANH;
    else if (!strcmp(a, "gelu"))
        c->act = DFL_ACT_GELU;
    else
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: %s \"%s\" is not supported for model_type %s (gelu, gelu_new, gelu_pytorch_tanh, "
                         "gelu_fast)",
                         label, key, a, f->model_type);
    return DFL_OK;
}

/* Gemma 2 and 3 (Gemma2Config, Gemma3TextConfig): the MLP's hidden_activation
 * [gelu_pytorch_tanh] (hidden_act, which the modelling code never reads, is ignored),
 * scores × query_pre_attn_scalar^−½ [256], the soft-caps (Gemma2Config: 50 and 30 when
 * absent; Gemma 3: none), embeddings × √D, and Gemma 3's local RoPE base. */
static dfl_status parse_gemma(const cJSON *root, const dfl__family *f, const char *label, dfl_config *c, dfl_error *err)
{
    dfl_status s = parse_gelu(root, "hidden_activation", "gelu_pytorch_tanh", f, label, c, err);
    if (s) return s;
    double qpas, cap_default = strcmp(f->model_type, "gemma2") ? 0.0 : 50.0;
    if ((s = get_num(root, "query_pre_attn_scalar", 256.0, label, &qpas, err))) return s;
    if (!(qpas > 0)) return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"query_pre_attn_scalar\" must be > 0", label);
    c->attn_scale = 1.0 / sqrt(qpas);
    if ((s = get_num(root, "attn_logit_softcapping", cap_default, label, &c->attn_softcap, err))) return s;
    if ((s = get_num(root, "final_logit_softcapping", cap_default ? 30.0 : 0.0, label, &c->final_softcap, err)))
        return s;
    /* an explicit null is no soft-capping (get_num gives the default for null) */
    const cJSON *ac = cJSON_GetObjectItemCaseSensitive(root, "attn_logit_softcapping");
    const cJSON *fc = cJSON_GetObjectItemCaseSensitive(root, "final_logit_softcapping");
    if (cJSON_IsNull(ac)) c->attn_softcap = 0;
    if (cJSON_IsNull(fc)) c->final_softcap = 0;
    if (c->attn_softcap < 0 || c->final_softcap < 0)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: soft-capping values must be > 0 (or null)", label);
    if (f->embed_scale) c->embed_scale = (float)sqrt((double)c->hidden_size);
    if (f->rope_local_default > 0 &&
        (s = get_num(root, "rope_local_base_freq", f->rope_local_default, label, &c->rope_local_theta, err)))
        return s;
    if (f->rope_local_default > 0 && !(c->rope_local_theta > 0))
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"rope_local_base_freq\" must be > 0", label);
    return DFL_OK;
}

/* Phi-3 (Phi3Config): partial_rotary_factor (Phi-4-mini's) other than 1 is refused. */
static dfl_status parse_phi3(const cJSON *root, const char *label, dfl_error *err)
{
    double prf;
    dfl_status s = get_num(root, "partial_rotary_factor", 1.0, label, &prf, err);
    if (s) return s;
    if (prf != 1.0)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: \"partial_rotary_factor\" %g: partial RoPE is not implemented for "
                         "model_type phi3 (only 1)",
                         label, prf);
    return DFL_OK;
}

/* The keys of a family with a GELU MLP: its activation (the family's default when
 * absent), and GPT-2's attention scaling (modeling_gpt2.py eager_attention_forward:
 * scale_attn_weights divides by √d, scale_attn_by_inverse_layer_idx by layer + 1;
 * reorder_and_upcast_attn only computes the same scores in f32, as difflens always does). */
static dfl_status parse_gelu_family(const cJSON *root, const dfl__family *f, const char *label, dfl_config *c,
                                    dfl_error *err)
{
    if (f->mlp == DFL__MLP_GEGLU) return parse_gemma(root, f, label, c, err);
    dfl_status s = parse_gelu(root, "hidden_act", f->act_default, f, label, c, err);
    if (s) return s;
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "rms_norm_eps");
    if (!eps || cJSON_IsNull(eps)) c->rms_norm_eps = 1e-5; /* GPT2Config's, GPTNeoXConfig's */
    /* neither has grouped kv heads or a head_dim key: their fused q|k|v is 3·D wide */
    if (c->num_kv_heads != c->num_heads || c->head_dim * c->num_heads != c->hidden_size)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: model_type %s has H heads of hidden_size / H for q, k and v "
                         "(num_key_value_heads and head_dim, when given, must say the same)",
                         label, f->model_type);
    if (f->layout == DFL__LAYOUT_NEOX) return parse_neox(root, label, c, err);
    if (f->layout != DFL__LAYOUT_GPT2) return DFL_OK;
    int scaled, by_layer, upcast;
    if ((s = get_bool(root, "scale_attn_weights", 1, label, &scaled, err))) return s;
    if ((s = get_bool(root, "scale_attn_by_inverse_layer_idx", 0, label, &by_layer, err))) return s;
    if ((s = get_bool(root, "reorder_and_upcast_attn", 0, label, &upcast, err))) return s;
    /* GPT2Config's default n_positions 1024 */
    (void)upcast; /* read for its type; the same maths either way */
    c->attn_unscaled = !scaled;
    c->attn_scale_by_layer = by_layer;
    if (!cJSON_GetObjectItemCaseSensitive(root, "max_position_embeddings")) c->max_position_embeddings = 1024;
    if (c->max_position_embeddings < 1)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: model_type %s needs \"n_positions\" >= 1 (the rows of wpe)", label,
                         f->model_type);
    return DFL_OK;
}

/* Motif (docs/format.md "Motif"): λ_init's layer shift, the sub-layer eps
 * attn_rms_norm_eps, and the head layout: V1 pairs (no num_noise_heads) or GDA groups
 * of gr = (H − Gn)/Gn signal heads and one noise head, k and v heads in (signal, noise)
 * pairs (k_ratio 1). */
static dfl_status parse_motif(const cJSON *root, const char *label, const dfl__family *f, dfl_config *c, dfl_error *err)
{
    dfl_status s;
    int64_t H = c->num_heads, Hkv = c->num_kv_heads, kr;
    c->lambda_layer_shift = f->lambda_layer_shift;
    if ((s = get_num(root, "attn_rms_norm_eps", f->subnorm_eps, label, &c->subnorm_eps, err))) return s;
    if (!(c->subnorm_eps > 0)) return dfl__fail(err, DFL_ERR_CONFIG, "%s: attn_rms_norm_eps must be > 0", label);
    if ((s = get_int(root, "num_noise_heads", 0, 4096, label, &c->num_noise_heads, err))) return s;
    if ((s = get_int(root, "k_ratio", 1, 4096, label, &kr, err))) return s;
    if (Hkv % 2)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: Motif needs an even num_key_value_heads (k and v heads come in "
                         "pairs; got %lld)",
                         label, (long long)Hkv);
    const cJSON *gn = cJSON_GetObjectItemCaseSensitive(root, "num_noise_heads");
    if (!gn || cJSON_IsNull(gn)) { /* V1: q heads in adjacent pairs; k_ratio unused */
        if (H % 2 || (H / 2) % (Hkv / 2))
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: Motif needs an even num_attention_heads whose half is a "
                             "multiple of num_key_value_heads / 2 (got %lld and %lld)",
                             label, (long long)H, (long long)Hkv);
        return DFL_OK;
    }
    int64_t Gn = c->num_noise_heads, kgroups = Hkv / 2;
    if (Gn < 1 || Gn >= H || H % Gn)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: num_noise_heads (%lld) must divide num_attention_heads (%lld) "
                         "with signal heads left over",
                         label, (long long)Gn, (long long)H);
    if (kr != 1)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: \"k_ratio\" = %lld is not supported (only 1: every published "
                         "Motif GDA checkpoint; the ports disagree on the head mapping of other ratios)",
                         label, (long long)kr);
    if (Gn % kgroups)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: num_noise_heads (%lld) must be a multiple of "
                         "num_key_value_heads / 2 (%lld)",
                         label, (long long)Gn, (long long)kgroups);
    return DFL_OK;
}

dfl_status dfl_config_parse(const char *json, size_t len, const char *label, dfl_config *cfg, dfl_error *err)
{
    /* as Python's json (Hugging Face): the last of duplicate keys wins; nothing may
     * follow the object */
    const char *why;
    size_t at;
    cJSON *root = dfl__json_parse(json, len, &why, &at);
    if (!root) return dfl__fail(err, DFL_ERR_FORMAT, "%s: not valid JSON: %s at byte %zu", label, why, at + 1);
    dfl_config c;
    memset(&c, 0, sizeof c);
    dfl_status s = DFL_OK;
    if (!cJSON_IsObject(root)) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: not a JSON object", label);
        goto done;
    }

    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!cJSON_IsString(mt)) {
        s = mt && !cJSON_IsNull(mt) ? dfl__fail(err, DFL_ERR_CONFIG, "%s: \"model_type\" must be a string", label)
                                    : dfl__fail(err, DFL_ERR_CONFIG, "%s: missing key \"model_type\"", label);
        goto done;
    }
    const dfl__family *f = dfl__family_find(mt->valuestring);
    if (!f) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: model_type \"%s\" is not supported (%s)", label, mt->valuestring,
                      dfl__family_names());
        goto done;
    }
    if (f->norm > DFL__NORM_RMS_1P || f->mlp > DFL__MLP_POLYNORM) { /* an entry ahead of its kernels */
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: model_type %s: its norm or MLP is not implemented yet", label,
                      f->model_type);
        goto done;
    }
    c.type = f->attn;
    snprintf(c.model_type, sizeof c.model_type, "%s", f->model_type);
    const dfl__attn_variant *av = dfl__attn_of(&c);
    if ((s = check_keys(root, f, label, err))) goto done;
    if ((s = apply_aliases(root, f, label, err))) goto done;

    if ((s = get_int(root, "vocab_size", -1, DIM_MAX, label, &c.vocab_size, err))) goto done;
    if ((s = get_int(root, "hidden_size", -1, DIM_MAX, label, &c.hidden_size, err))) goto done;
    int64_t def_ffn = f->ffn_mult && c.hidden_size <= DIM_MAX / f->ffn_mult ? f->ffn_mult * c.hidden_size : -1;
    if ((s = get_int(root, "intermediate_size", def_ffn, DIM_MAX, label, &c.intermediate_size, err))) goto done;
    if ((s = get_int(root, "num_hidden_layers", -1, 4096, label, &c.num_layers, err))) goto done;
    if ((s = get_int(root, "num_attention_heads", -1, 4096, label, &c.num_heads, err))) goto done;
    if ((s = get_int(root, "num_key_value_heads", c.num_heads, 4096, label, &c.num_kv_heads, err))) goto done;
    if (c.vocab_size < 1 || c.hidden_size < 1 || c.intermediate_size < 1 || c.num_layers < 1 || c.num_heads < 1 ||
        c.num_kv_heads < 1) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: sizes, layer and head counts must be >= 1", label);
        goto done;
    }
    if (c.num_heads % c.num_kv_heads && c.type != DFL_MODEL_MOTIF) { /* Motif: parse_motif's rules */
        s = dfl__fail(err, DFL_ERR_CONFIG,
                      "%s: num_attention_heads (%lld) is not a multiple of num_key_value_heads (%lld)", label,
                      (long long)c.num_heads, (long long)c.num_kv_heads);
        goto done;
    }
    if (c.num_heads % av->heads_per_analysis) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: %s needs an even num_attention_heads (got %lld)", label, f->model_type,
                      (long long)c.num_heads);
        goto done;
    }

    /* head_dim: per softmax map, except diff_transformer where the unilm code
     * halves it (D / H / 2) so a differential head's value is 2d wide; some families
     * default to a fixed one. */
    int64_t div = av->sub_heads * c.num_heads;
    int64_t def_hd = c.hidden_size % div == 0 ? c.hidden_size / div : 0;
    if (f->head_dim) def_hd = f->head_dim;
    const cJSON *hdv = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
    if (!def_hd && (!hdv || cJSON_IsNull(hdv))) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: hidden_size %lld is not divisible by %lld and no head_dim is given",
                      label, (long long)c.hidden_size, (long long)div);
        goto done;
    }
    if ((s = get_int(root, "head_dim", def_hd, DIM_MAX, label, &c.head_dim, err))) goto done;
    if (c.head_dim < 2 || c.head_dim % 2) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: head_dim must be even and >= 2 (got %lld)", label,
                      (long long)c.head_dim);
        goto done;
    }

    if ((s = get_num(root, "rms_norm_eps", 1e-6, label, &c.rms_norm_eps, err))) goto done;
    if ((s = get_num(root, "rope_theta", f->rope_theta_default > 0 ? f->rope_theta_default : 10000.0, label,
                     &c.rope_theta, err)))
        goto done;
    if (!(c.rms_norm_eps >= 0)) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: rms_norm_eps must be >= 0", label);
        goto done;
    }
    if ((s = get_bool(root, "rope_interleaved", f->rope_interleaved, label, &c.rope_interleaved, err))) goto done;
    if ((s = get_bool(root, "tie_word_embeddings", f->tied_default, label, &c.tie_word_embeddings, err))) goto done;
    if ((s = get_int(root, "max_position_embeddings", 0, (int64_t)1 << 40, label, &c.max_position_embeddings, err)))
        goto done;
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(root, "bos_token_id");
    if (cJSON_IsNumber(bos) && isinf(bos->valuedouble)) {
        s = out_of_range(label, "bos_token_id", err);
        goto done;
    }
    /* only for a warning: anything but a token id in range is "none" (and never cast out of range) */
    c.bos_token_id =
        cJSON_IsNumber(bos) && fabs(bos->valuedouble) < (double)((int64_t)1 << 62) ? (int64_t)bos->valuedouble : -1;
    if (f->no_bos) c.bos_token_id = -1; /* GPT-2, Pythia: no BOS first, nothing to warn about */
    if ((s = parse_rope_scaling(root, label, &c, err))) goto done;
    if ((s = parse_window(root, label, f, &c, err))) goto done;
    c.qkv_bias = f->qkv_bias;
    c.qk_norm = f->qk_norm;
    if (!(c.rope_theta > 0)) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: rope_theta must be > 0", label);
        goto done;
    }

    /* Refuse what we would otherwise compute wrongly. */
    int flag;
    if ((s = get_bool(root, "attention_bias", 0, label, &flag, err))) goto done;
    if (flag && f->layout == DFL__LAYOUT_LLAMA) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: attention_bias = true is not supported", label);
        goto done;
    }
    if ((s = get_bool(root, "mlp_bias", 0, label, &flag, err))) goto done;
    if (flag) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: mlp_bias = true is not supported", label);
        goto done;
    }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (f->fused_proj && (s = parse_phi3(root, label, err))) goto done;
    const char *want_act = f->hidden_act ? f->hidden_act : "silu";
    if (f->mlp == DFL__MLP_GELU || f->mlp == DFL__MLP_GEGLU) {
        if ((s = parse_gelu_family(root, f, label, &c, err))) goto done;
    } else if (act && !cJSON_IsNull(act) && (!cJSON_IsString(act) || strcmp(act->valuestring, want_act))) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: hidden_act \"%s\" is not supported (only %s)", label,
                      cJSON_IsString(act) ? act->valuestring : "?", want_act);
        goto done;
    }

    if (av->lambda) {
        const cJSON *li = cJSON_GetObjectItemCaseSensitive(root, "diff_lambda_init");
        if (li && !cJSON_IsNull(li)) {
            if (cJSON_IsNumber(li) && isinf(li->valuedouble)) {
                s = out_of_range(label, "diff_lambda_init", err);
                goto done;
            }
            if (!cJSON_IsNumber(li) || !isfinite(li->valuedouble)) {
                s = dfl__fail(err, DFL_ERR_CONFIG, "%s: \"diff_lambda_init\" must be a number or null", label);
                goto done;
            }
            c.has_lambda_init = 1;
            c.lambda_init = li->valuedouble;
        }
        const cJSON *kp = cJSON_GetObjectItemCaseSensitive(root, "diff_kv_pairing");
        c.kv_pairing = DFL_KV_FLASH;
        if (kp && !cJSON_IsNull(kp)) {
            if (cJSON_IsString(kp) && !strcmp(kp->valuestring, "naive"))
                c.kv_pairing = DFL_KV_NAIVE;
            else if (!cJSON_IsString(kp) || strcmp(kp->valuestring, "flash")) {
                s = dfl__fail(err, DFL_ERR_CONFIG, "%s: \"diff_kv_pairing\" must be \"flash\" or \"naive\"", label);
                goto done;
            }
        }
    }
    if (c.type == DFL_MODEL_MOTIF && (s = parse_motif(root, label, f, &c, err))) goto done;
    *cfg = c;
done:
    cJSON_Delete(root);
    return s;
}

const char *dfl_model_type_name(dfl_model_type t)
{
    const dfl__attn_variant *a = dfl__attn_variant_of_type(t);
    return a ? a->name : "unknown";
}

int64_t dfl_config_analysis_heads(const dfl_config *c)
{
    return dfl__attn_shape_of(c).heads;
}

int dfl_config_maps_per_head(const dfl_config *c)
{
    return dfl__attn_of(c)->maps;
}

int64_t dfl_config_noise_group(const dfl_config *c, int64_t head)
{
    if (c->type != DFL_MODEL_MOTIF || !c->num_noise_heads) return -1;
    return head / ((c->num_heads - c->num_noise_heads) / c->num_noise_heads);
}

int64_t dfl_config_window(const dfl_config *c, int64_t layer)
{
    if (c->window_pattern > 0) return c->sliding_window > 0 && (layer + 1) % c->window_pattern ? c->sliding_window : 0;
    return c->sliding_window > 0 && layer >= c->window_from ? c->sliding_window : 0;
}

double dfl_config_lambda_init(const dfl_config *c, int64_t layer)
{
    return c->has_lambda_init ? c->lambda_init : 0.8 - 0.6 * exp(-0.3 * (double)(layer - c->lambda_layer_shift));
}

/* ---------------------------------------------------------------- weights */

typedef struct binder {
    dfl_model *m;
    dfl_st_set *set;
    size_t cap;
    const dfl_tensor **used; /* [n_used] tensors bound so far */
    size_t n_used, cap_used;
} binder;

static dfl_status mark_used(binder *b, const dfl_tensor *t, dfl_error *err)
{
    if (b->n_used == b->cap_used) {
        size_t nc = b->cap_used ? b->cap_used * 2 : 256;
        const dfl_tensor **nu = dfl__alloc_array(nc, sizeof *nu);
        if (!nu) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory binding '%s'", t->name);
        if (b->n_used) memcpy(nu, b->used, b->n_used * sizeof *nu);
        free(b->used);
        b->used = nu;
        b->cap_used = nc;
    }
    b->used[b->n_used++] = t;
    return DFL_OK;
}

/* Find `name`, check dtype and shape [d0] or [d0, d1] (d1 = 0 for 1-D) and mark it
 * used. optional: absent gives *out = NULL, DFL_OK. */
static dfl_status find(binder *b, const char *name, int64_t d0, int64_t d1, int optional, const dfl_tensor **out,
                       dfl_error *err)
{
    *out = NULL;
    const dfl_tensor *t = dfl_st_set_find(b->set, name);
    if (!t) {
        if (optional) return DFL_OK;
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '%s' is missing", b->m->path, name);
    }
    const char *file = dfl_st_set_file_of(b->set, name);
    if (t->dtype != DFL_DTYPE_F32 && t->dtype != DFL_DTYPE_F16 && t->dtype != DFL_DTYPE_BF16)
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '%s' has dtype %s (F32, F16 or BF16 expected)", file, name,
                         dfl_dtype_name(t->dtype) ? dfl_dtype_name(t->dtype) : "?");
    int ndim = d1 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
        char got[128] = "[", want[64];
        for (int i = 0; i < t->ndim && strlen(got) < 100; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        strcat(got, "]");
        if (d1)
            snprintf(want, sizeof want, "[%lld, %lld]", (long long)d0, (long long)d1);
        else
            snprintf(want, sizeof want, "[%lld]", (long long)d0);
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '%s' has shape %s, config needs %s", file, name, got, want);
    }
    *out = t;
    return mark_used(b, t, err);
}

float *dfl__model_owned_buffer(dfl_model *m, size_t *cap, size_t n)
{
    if (m->n_owned == *cap) {
        float **grown = dfl__grow_array(m->owned, cap, sizeof *grown, 64);
        if (!grown) return NULL;
        m->owned = grown;
    }
    float *buf = dfl__alloc_array(n, sizeof(float));
    if (buf) m->owned[m->n_owned++] = buf;
    return buf;
}

/* A vector as f32: aligned F32 data in place, anything else converted into a buffer
 * the model owns (vectors are small: D floats at most). */
static dfl_status bind(binder *b, const char *name, int64_t d0, int optional, float **out, dfl_error *err)
{
    const dfl_tensor *t;
    *out = NULL;
    dfl_status s = find(b, name, d0, 0, optional, &t, err);
    if (s || !t) return s;
    if (t->dtype == DFL_DTYPE_F32 && (uintptr_t)t->data % sizeof(float) == 0) {
        *out = (float *)(uintptr_t)t->data;
        return DFL_OK;
    }
    float *buf = dfl__model_owned_buffer(b->m, &b->cap, dfl_tensor_numel(t));
    if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for tensor '%s'", name);
    s = dfl_tensor_to_f32(t, buf, err);
    if (s) return dfl__context(err, "%s", dfl_st_set_file_of(b->set, name));
    *out = buf;
    return DFL_OK;
}

/* A matrix [d0, d1]: a view into the mapping, in the checkpoint's dtype. */
static dfl_status bind_mat(binder *b, const char *name, int64_t d0, int64_t d1, dfl_wmat *out, dfl_error *err)
{
    const dfl_tensor *t;
    dfl_status s = find(b, name, d0, d1, 0, &t, err);
    if (s) return s;
    *out = (dfl_wmat){.data = t->data, .dtype = (int)t->dtype, .rows = d0, .cols = d1, .pair_hd = 0};
    return DFL_OK;
}

static float dot(const float *a, const float *b, int64_t n)
{
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++)
        acc += (double)a[i] * b[i];
    return (float)acc;
}

/* The norms of a SANDWICH block (Gemma: input_layernorm, post_attention_layernorm around
 * attention, pre_ and post_feedforward_layernorm around the MLP) or a POST block (OLMo 2:
 * post_attention_layernorm, post_feedforward_layernorm; no norm before either). */
static dfl_status bind_block_norms(binder *b, const dfl__family *f, const char *p, dfl_layer_weights *w, dfl_error *err)
{
    int64_t D = b->m->config.hidden_size;
    char n[192];
    dfl_status s;
    snprintf(n, sizeof n, "%spost_attention_layernorm.weight", p);
    if ((s = bind(b, n, D, 0, &w->post_attn_norm, err))) return s;
    snprintf(n, sizeof n, "%spost_feedforward_layernorm.weight", p);
    if ((s = bind(b, n, D, 0, &w->post_mlp_norm, err))) return s;
    if (f->block != DFL__BLOCK_SANDWICH) return DFL_OK;
    snprintf(n, sizeof n, "%sinput_layernorm.weight", p);
    if ((s = bind(b, n, D, 0, &w->attn_norm, err))) return s;
    snprintf(n, sizeof n, "%spre_feedforward_layernorm.weight", p);
    return bind(b, n, D, 0, &w->mlp_norm, err);
}

/* Rows [r0, r0 + n) of a bound matrix as a matrix of its own (a view: same dtype,
 * same mapping). */
static dfl_wmat rows_of(const dfl_wmat *all, int64_t r0, int64_t n)
{
    dfl_wmat v = *all;
    v.data = (const unsigned char *)all->data + (size_t)r0 * (size_t)all->cols * dfl_dtype_size((dfl_dtype)all->dtype);
    v.rows = n;
    return v;
}

/* Phi-3 (modeling_phi3.py Phi3Attention, Phi3MLP): qkv_proj [q_rows + k_rows + v_rows, D]
 * holds q, k, v in its rows in that order (sliced at H·hd and H·hd + Hkv·hd);
 * gate_up_proj [2F, D] holds gate then up (chunk(2) of its output). */
static dfl_status bind_fused(binder *b, const char *p, dfl_layer_weights *w, int64_t q_rows, int64_t k_rows,
                             int64_t v_rows, dfl_error *err)
{
    const dfl_config *c = &b->m->config;
    int64_t D = c->hidden_size, F = c->intermediate_size;
    char n[192];
    dfl_wmat all;
    dfl_status s;
    snprintf(n, sizeof n, "%sself_attn.qkv_proj.weight", p);
    if ((s = bind_mat(b, n, q_rows + k_rows + v_rows, D, &all, err))) return s;
    w->wq = rows_of(&all, 0, q_rows);
    w->wk = rows_of(&all, q_rows, k_rows);
    w->wv = rows_of(&all, q_rows + k_rows, v_rows);
    snprintf(n, sizeof n, "%smlp.gate_up_proj.weight", p);
    if ((s = bind_mat(b, n, 2 * F, D, &all, err))) return s;
    w->w_gate = rows_of(&all, 0, F);
    w->w_up = rows_of(&all, F, F);
    return DFL_OK;
}

/* Gemma's RMSNorm multiplies by (1 + w) in f32 (Gemma2RMSNorm): the stored gain w becomes
 * 1 + w in a buffer the model owns, once, so the forward pass runs a plain RMSNorm. */
static dfl_status plus_one(binder *b, float **g, int64_t n, dfl_error *err)
{
    if (!*g) return DFL_OK;
    if (b->m->n_owned == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        float **no = realloc(b->m->owned, nc * sizeof *no);
        if (!no) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        b->m->owned = no;
        b->cap = nc;
    }
    float *buf = dfl__alloc_array((size_t)n, sizeof(float));
    if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    b->m->owned[b->m->n_owned++] = buf;
    for (int64_t i = 0; i < n; i++)
        buf[i] = 1.0f + (*g)[i];
    *g = buf;
    return DFL_OK;
}

static dfl_status gains_plus_one(binder *b, dfl_layer_weights *w, const dfl_config *c, dfl_error *err)
{
    int64_t D = c->hidden_size;
    dfl_status s;
    if ((s = plus_one(b, &w->attn_norm, D, err)) || (s = plus_one(b, &w->mlp_norm, D, err)) ||
        (s = plus_one(b, &w->post_attn_norm, D, err)) || (s = plus_one(b, &w->post_mlp_norm, D, err)) ||
        (s = plus_one(b, &w->q_norm, c->head_dim, err)) || (s = plus_one(b, &w->k_norm, c->head_dim, err)))
        return s;
    return DFL_OK;
}

static dfl_status bind_layer(binder *b, int64_t l, dfl_error *err)
{
    const dfl_config *c = &b->m->config;
    dfl_layer_weights *w = &b->m->layers[l];
    int64_t D = c->hidden_size, F = c->intermediate_size, hd = c->head_dim;
    const dfl__attn_variant *av = dfl__attn_of(c);
    /* diff_transformer: q/k carry 2 sub-heads of d per head; v and out are 2d wide. */
    dfl__attn_shape sh = dfl__attn_shape_of(c);
    int64_t q_rows = sh.q_ld, k_rows = sh.k_ld, v_rows = sh.v_ld, o_cols = sh.att_ld;
    char p[128], n[192], o_proj[64];
    snprintf(p, sizeof p, "model.layers.%lld.", (long long)l);
    dfl_status s;
#define BIND(field, suffix, d0, opt)                                                                                   \
    do {                                                                                                               \
        snprintf(n, sizeof n, "%s%s", p, suffix);                                                                      \
        if ((s = bind(b, n, d0, opt, &w->field, err))) return s;                                                       \
    } while (0)
#define BIND_MAT(field, suffix, d0, d1)                                                                                \
    do {                                                                                                               \
        snprintf(n, sizeof n, "%s%s", p, suffix);                                                                      \
        if ((s = bind_mat(b, n, d0, d1, &w->field, err))) return s;                                                    \
    } while (0)
    const dfl__family *fam = dfl__family_of(c);
    if (fam->block == DFL__BLOCK_PRE) {
        BIND(attn_norm, "input_layernorm.weight", D, 0);
        BIND(mlp_norm, "post_attention_layernorm.weight", D, 0);
    } else if ((s = bind_block_norms(b, fam, p, w, err))) {
        return s;
    }
    if (fam->fused_proj) {
        if ((s = bind_fused(b, p, w, q_rows, k_rows, v_rows, err))) return s;
    } else {
        BIND_MAT(wq, "self_attn.q_proj.weight", q_rows, D);
        BIND_MAT(wk, "self_attn.k_proj.weight", k_rows, D);
        BIND_MAT(wv, "self_attn.v_proj.weight", v_rows, D);
    }
    snprintf(o_proj, sizeof o_proj, "self_attn.%s.weight", av->o_proj);
    BIND_MAT(wo, o_proj, D, o_cols);
    if (!fam->fused_proj) {
        BIND_MAT(w_gate, "mlp.gate_proj.weight", F, D);
        BIND_MAT(w_up, "mlp.up_proj.weight", F, D);
    }
    BIND_MAT(w_down, "mlp.down_proj.weight", D, F);
    if (c->type == DFL_MODEL_DIFF_V2) BIND_MAT(w_lambda, "self_attn.lambda_proj.weight", c->num_heads, D);
    if (dfl__family_of(c)->mlp == DFL__MLP_POLYNORM) {
        BIND(poly_w, "mlp.act_fn.weight", 3, 0);
        BIND(poly_b, "mlp.act_fn.bias", 1, 0);
    }
    if (c->qkv_bias) {
        BIND(bq, "self_attn.q_proj.bias", q_rows, 0);
        BIND(bk, "self_attn.k_proj.bias", k_rows, 0);
        BIND(bv, "self_attn.v_proj.bias", v_rows, 0);
    }
    if (c->qk_norm) { /* per head [hd], or over the whole projection (qk_norm 2, OLMo 2) */
        BIND(q_norm, "self_attn.q_norm.weight", c->qk_norm == 2 ? q_rows : hd, 0);
        BIND(k_norm, "self_attn.k_norm.weight", c->qk_norm == 2 ? k_rows : hd, 0);
    }
    if (fam->norm == DFL__NORM_RMS_1P && (s = gains_plus_one(b, w, c, err))) return s;
    if (av->lambda) {
        BIND(lambda_q1, "self_attn.lambda_q1", hd, 0);
        BIND(lambda_k1, "self_attn.lambda_k1", hd, 0);
        BIND(lambda_q2, "self_attn.lambda_q2", hd, 0);
        BIND(lambda_k2, "self_attn.lambda_k2", hd, 0);
        if (av->subln) BIND(subln, "self_attn.subln.weight", 2 * hd, 1);
        w->lambda_init = (float)dfl_config_lambda_init(c, l);
        w->lambda = (float)(exp((double)dot(w->lambda_q1, w->lambda_k1, hd)) -
                            exp((double)dot(w->lambda_q2, w->lambda_k2, hd)) + w->lambda_init);
    }
#undef BIND
#undef BIND_MAT
    return DFL_OK;
}

/* GPT-2 (modeling_gpt2.py): the tensors as published — h.{l}.ln_1, attn.c_attn (q | k |
 * v fused), attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj; wte, wpe, ln_f — at the top level
 * (openai-community/gpt2) or under "transformer." (what save_pretrained writes for
 * GPT2LMHeadModel). Conv1D weights are [in, out]; every one has a bias. */
static dfl_status bind_gpt2(binder *b, const char *pre, dfl_error *err)
{
    dfl_model *m = b->m;
    const dfl_config *c = &m->config;
    int64_t D = c->hidden_size, F = c->intermediate_size, P = c->max_position_embeddings;
    dfl__attn_shape sh = dfl__attn_shape_of(c);
    int64_t qkv = sh.q_ld + sh.k_ld + sh.v_ld;
    char n[192];
    dfl_status s;
#define NAME(...) snprintf(n, sizeof n, __VA_ARGS__)
    NAME("%swte.weight", pre);
    if ((s = bind_mat(b, n, c->vocab_size, D, &m->embed, err))) return s;
    NAME("%swpe.weight", pre);
    if ((s = bind_mat(b, n, P, D, &m->pos_embed, err))) return s;
    NAME("%sln_f.weight", pre);
    if ((s = bind(b, n, D, 0, &m->final_norm, err))) return s;
    NAME("%sln_f.bias", pre);
    if ((s = bind(b, n, D, 0, &m->final_norm_b, err))) return s;
    for (int64_t l = 0; l < c->num_layers; l++) {
        dfl_layer_weights *w = &m->layers[l];
        char p[96];
        snprintf(p, sizeof p, "%sh.%lld.", pre, (long long)l);
#define VEC(field, suffix, d0)                                                                                         \
    do {                                                                                                               \
        NAME("%s%s", p, suffix);                                                                                       \
        if ((s = bind(b, n, d0, 0, &w->field, err))) return s;                                                         \
    } while (0)
#define MAT(field, suffix, d0, d1)                                                                                     \
    do {                                                                                                               \
        NAME("%s%s", p, suffix);                                                                                       \
        if ((s = bind_mat(b, n, d0, d1, &w->field, err))) return s;                                                    \
    } while (0)
        VEC(attn_norm, "ln_1.weight", D);
        VEC(attn_norm_b, "ln_1.bias", D);
        MAT(wqkv, "attn.c_attn.weight", D, qkv);
        VEC(bqkv, "attn.c_attn.bias", qkv);
        MAT(wo, "attn.c_proj.weight", sh.att_ld, D);
        VEC(bo, "attn.c_proj.bias", D);
        VEC(mlp_norm, "ln_2.weight", D);
        VEC(mlp_norm_b, "ln_2.bias", D);
        MAT(w_up, "mlp.c_fc.weight", D, F);
        VEC(b_up, "mlp.c_fc.bias", F);
        MAT(w_down, "mlp.c_proj.weight", F, D);
        VEC(b_down, "mlp.c_proj.bias", D);
#undef VEC
#undef MAT
    }
#undef NAME
    return DFL_OK;
}

/* GPT-NeoX (modeling_gpt_neox.py) as Pythia ships it: gpt_neox.embed_in,
 * gpt_neox.layers.{l}.{input_layernorm, post_attention_layernorm, attention.
 * query_key_value, attention.dense, mlp.dense_h_to_4h, mlp.dense_4h_to_h},
 * gpt_neox.final_layer_norm; Linear weights [out, in] with biases. */
static dfl_status bind_neox(binder *b, dfl_error *err)
{
    dfl_model *m = b->m;
    const dfl_config *c = &m->config;
    int64_t D = c->hidden_size, F = c->intermediate_size;
    dfl__attn_shape sh = dfl__attn_shape_of(c);
    int64_t qkv = sh.q_ld + sh.k_ld + sh.v_ld;
    char n[192];
    dfl_status s;
    if ((s = bind_mat(b, "gpt_neox.embed_in.weight", c->vocab_size, D, &m->embed, err))) return s;
    if ((s = bind(b, "gpt_neox.final_layer_norm.weight", D, 0, &m->final_norm, err))) return s;
    if ((s = bind(b, "gpt_neox.final_layer_norm.bias", D, 0, &m->final_norm_b, err))) return s;
    for (int64_t l = 0; l < c->num_layers; l++) {
        dfl_layer_weights *w = &m->layers[l];
#define VEC(field, suffix, d0)                                                                                         \
    do {                                                                                                               \
        snprintf(n, sizeof n, "gpt_neox.layers.%lld.%s", (long long)l, suffix);                                        \
        if ((s = bind(b, n, d0, 0, &w->field, err))) return s;                                                         \
    } while (0)
#define MAT(field, suffix, d0, d1)                                                                                     \
    do {                                                                                                               \
        snprintf(n, sizeof n, "gpt_neox.layers.%lld.%s", (long long)l, suffix);                                        \
        if ((s = bind_mat(b, n, d0, d1, &w->field, err))) return s;                                                    \
    } while (0)
        VEC(attn_norm, "input_layernorm.weight", D);
        VEC(attn_norm_b, "input_layernorm.bias", D);
        VEC(mlp_norm, "post_attention_layernorm.weight", D);
        VEC(mlp_norm_b, "post_attention_layernorm.bias", D);
        MAT(wqkv, "attention.query_key_value.weight", qkv, D);
        MAT(wo, "attention.dense.weight", D, sh.att_ld);
        if (c->qkv_bias) {
            VEC(bqkv, "attention.query_key_value.bias", qkv);
            VEC(bo, "attention.dense.bias", D);
        }
        MAT(w_up, "mlp.dense_h_to_4h.weight", F, D);
        VEC(b_up, "mlp.dense_h_to_4h.bias", F);
        MAT(w_down, "mlp.dense_4h_to_h.weight", D, F);
        VEC(b_down, "mlp.dense_4h_to_h.bias", D);
#undef VEC
#undef MAT
    }
    return DFL_OK;
}

static char *join_path(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static int ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && !strcmp(name + n - k, suffix);
}

/* Tensors a checkpoint may carry that are derived from the config, not weights:
 * RoPE frequencies that older exports saved as buffers; GPT-2's causal mask buffers
 * (h.{l}.attn.bias, [1, 1, n_positions, n_positions], and attn.masked_bias, the fill
 * value), which openai-community/gpt2 ships. */
static int derived_buffer(const dfl__family *f, const char *name)
{
    if (f && f->layout == DFL__LAYOUT_GPT2 && (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias")))
        return 1;
    /* GPT-NeoX's older exports: the same buffers under attention. */
    if (f && f->layout == DFL__LAYOUT_NEOX &&
        (ends_with(name, ".attention.bias") || ends_with(name, ".attention.masked_bias")))
        return 1;
    return ends_with(name, "rotary_emb.inv_freq");
}

/* Every tensor of the set that no binding used: refused (one line naming them), or,
 * with allow_unused, listed in m->unused for the caller's warning. */
static dfl_status check_unused(binder *b, int allow, dfl_error *err)
{
    size_t n = dfl_st_set_count(b->set), bad = 0;
    char names[400] = "";
    for (size_t i = 0; i < n; i++) {
        const dfl_tensor *t = dfl_st_set_at(b->set, i);
        int used = derived_buffer(dfl__family_of(&b->m->config), t->name);
        for (size_t j = 0; j < b->n_used && !used; j++)
            used = b->used[j] == t;
        if (used) continue;
        if (allow) {
            char **nu = realloc(b->m->unused, (b->m->n_unused + 1) * sizeof *nu);
            if (!nu) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            b->m->unused = nu;
            if (!(nu[b->m->n_unused] = strdup(t->name))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            b->m->n_unused++;
        }
        if (strlen(names) + strlen(t->name) + 8 < 300)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", bad ? ", " : "", t->name);
        else if (!strstr(names, "..."))
            strcat(names, ", ...");
        bad++;
    }
    if (!bad || allow) return DFL_OK;
    return dfl__fail(err, DFL_ERR_TENSOR,
                     "%s: %zu checkpoint tensor%s not used by a %s model: %s "
                     "(--allow-unused runs without %s)",
                     b->m->path, bad, bad == 1 ? " is" : "s are", b->m->config.model_type, names,
                     bad == 1 ? "it" : "them");
}

dfl_status dfl_model_load(const char *dir, dfl_model **out, dfl_error *err)
{
    return dfl_model_load_opts(dir, NULL, out, err);
}

/* A GGUF file rather than a model directory: the name says so. */
static int is_gguf_path(const char *p)
{
    size_t n = strlen(p);
    return n > 5 && !strcmp(p + n - 5, ".gguf");
}

dfl_status dfl_model_load_opts(const char *dir, const dfl_load_opts *opts, dfl_model **out, dfl_error *err)
{
    if (is_gguf_path(dir)) return dfl__model_load_gguf(dir, opts, out, err);
    *out = NULL;
    dfl_model *m = calloc(1, sizeof *m);
    char *cfg_path = join_path(dir, "config.json");
    binder b = {m, NULL, 0, NULL, 0, 0};
    dfl_status s = DFL_OK;
    size_t len = 0;
    if (!m || !cfg_path || !(m->path = strdup(dir))) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((s = dfl__read_file(cfg_path, &m->config_text, &len, err))) goto fail;
    if ((s = dfl_config_parse(m->config_text, len, cfg_path, &m->config, err))) goto fail;
    if ((s = dfl_st_set_open(dir, &b.set, err))) goto fail;

    const dfl_config *c = &m->config;
    const dfl__family *fam = dfl__family_of(c);
    m->layers = calloc((size_t)c->num_layers, sizeof *m->layers);
    if (!m->layers) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    const char *embed_name = "model.embed_tokens.weight", *head_name = "lm_head.weight";
    if (fam->layout == DFL__LAYOUT_NEOX) {
        embed_name = "gpt_neox.embed_in.weight";
        head_name = "embed_out.weight";
        if ((s = bind_neox(&b, err))) goto fail;
    } else if (fam->layout == DFL__LAYOUT_GPT2) {
        embed_name = dfl_st_set_find(b.set, "transformer.wte.weight") ? "transformer.wte.weight" : "wte.weight";
        if ((s = bind_gpt2(&b, embed_name[0] == 't' ? "transformer." : "", err))) goto fail;
    } else {
        if ((s = bind_mat(&b, "model.embed_tokens.weight", c->vocab_size, c->hidden_size, &m->embed, err))) goto fail;
        if ((s = bind(&b, "model.norm.weight", c->hidden_size, 0, &m->final_norm, err))) goto fail;
        if (fam->norm == DFL__NORM_RMS_1P && (s = plus_one(&b, &m->final_norm, c->hidden_size, err))) goto fail;
    }
    /* Tied models may still ship lm_head.weight: used only when it is a byte-for-byte
     * copy of the embedding (what tying means); anything else is reported unused. */
    if (c->tie_word_embeddings) {
        m->lm_head = m->embed;
        const dfl_tensor *e = dfl_st_set_find(b.set, embed_name);
        const dfl_tensor *h = dfl_st_set_find(b.set, head_name);
        if (h && h->dtype == e->dtype && h->nbytes == e->nbytes && !memcmp(h->data, e->data, e->nbytes) &&
            (s = mark_used(&b, h, err)))
            goto fail;
    } else if ((s = bind_mat(&b, head_name, c->vocab_size, c->hidden_size, &m->lm_head, err))) {
        goto fail;
    }
    for (int64_t l = 0; fam->layout == DFL__LAYOUT_LLAMA && l < c->num_layers; l++)
        if ((s = bind_layer(&b, l, err))) goto fail;
    if ((s = check_unused(&b, opts && opts->allow_unused, err))) goto fail;
    m->tensors = b.set; /* kept open: the weights point into the mapping */
    free(b.used);
    free(cfg_path);
    *out = m;
    return DFL_OK;
fail:
    free(b.used);
    dfl_st_set_close(b.set);
    free(cfg_path);
    dfl_model_free(m);
    return s;
}

void dfl_model_free(dfl_model *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    for (size_t i = 0; i < m->n_unused; i++)
        free(m->unused[i]);
    free(m->unused);
    dfl_st_set_close(m->tensors);
    dfl_gguf_close(m->gguf);
    free(m->layers);
    free(m->config_text);
    free(m->path);
    free(m);
}
