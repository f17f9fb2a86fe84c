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
static dfl_status get_int(const cJSON *root, const char *key, int64_t def, int64_t max,
                          const char *label, int64_t *out, dfl_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) return dfl__fail(err, DFL_ERR_CONFIG, "%s: missing key \"%s\"", label, key);
        *out = def;
        return DFL_OK;
    }
    if (!cJSON_IsNumber(v))
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"%s\" must be an integer", label, key);
    if (isinf(v->valuedouble)) return out_of_range(label, key, err);
    double d = v->valuedouble;
    if (d != floor(d) || d < 0 || d > (double)max)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"%s\" = %g is not an integer in [0, %lld]",
                         label, key, d, (long long)max);
    *out = (int64_t)d;
    return DFL_OK;
}

static dfl_status get_num(const cJSON *obj, const char *key, double def, const char *label,
                          double *out, dfl_error *err)
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

static dfl_status get_bool(const cJSON *root, const char *key, int def, const char *label,
                           int *out, dfl_error *err)
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
    if (!cJSON_IsObject(rs)) return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"rope_scaling\" must be an object or null", label);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!kind) kind = cJSON_GetObjectItemCaseSensitive(rs, "type");
    const char *k = cJSON_IsString(kind) ? kind->valuestring : "default";
    dfl_status s;
    if (!strcmp(k, "default")) return DFL_OK;
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
                         &c->rope_original_max_pos, err))) return s;
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
                return dfl__fail(err, DFL_ERR_CONFIG, "%s: llama3 rope_scaling needs \"%s\" (factor, low_freq_factor, "
                                 "high_freq_factor and original_max_position_embeddings are all required)", label,
                                 need[i]);
        }
        c->rope_kind = DFL_ROPE_LLAMA3;
        if ((s = get_num(rs, "low_freq_factor", 1.0, label, &c->rope_low_freq_factor, err))) return s;
        if ((s = get_num(rs, "high_freq_factor", 4.0, label, &c->rope_high_freq_factor, err))) return s;
        if ((s = get_int(rs, "original_max_position_embeddings", 8192, DIM_MAX, label,
                         &c->rope_original_max_pos, err))) return s;
        if (!(c->rope_high_freq_factor > c->rope_low_freq_factor) || !(c->rope_low_freq_factor > 0) ||
            c->rope_original_max_pos <= 0)
            return dfl__fail(err, DFL_ERR_CONFIG,
                             "%s: llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor", label);
        return DFL_OK;
    }
    return dfl__fail(err, DFL_ERR_CONFIG, "%s: rope_scaling type \"%s\" is not supported (none, linear, llama3, dynamic)",
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
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: key \"%s\" is not supported for model_type %s (it may change "
                         "the computation; docs/format.md lists the keys difflens reads and ignores)", label, k,
                         f->model_type);
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
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: layer_types[%lld] must be \"full_attention\" or "
                             "\"sliding_attention\"", label, (long long)l);
        if (sl && !sliding)
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: layer_types[%lld] is \"sliding_attention\" but sliding is off "
                             "(use_sliding_window false or sliding_window null): the two disagree", label,
                             (long long)l);
        if (sl && *first == c->num_layers) *first = l;
        if (!sl && *first < l)
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: layer_types with a full layer after a sliding one are not "
                             "supported", label);
    }
    const cJSON *mw = cJSON_GetObjectItemCaseSensitive(root, "max_window_layers");
    if (sliding && mw && !cJSON_IsNull(mw)) {
        int64_t from = c->window_from < c->num_layers ? c->window_from : c->num_layers;
        if (from != *first)
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: layer_types starts sliding at layer %lld but max_window_layers "
                             "is %lld: the two disagree", label, (long long)*first, (long long)c->window_from);
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
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"sliding_window\" = 0 is not a window (null means full "
                             "attention)", label);
        if ((s = get_int(root, "sliding_window", 0, (int64_t)1 << 40, label, &c->sliding_window, err))) return s;
    }
    if (f->window == DFL__WINDOW_EVERY_LAYER) return DFL_OK;
    if (c->sliding_window && (s = get_int(root, "max_window_layers", 28, 4096, label, &c->window_from, err)))
        return s;
    int64_t first;
    if ((s = check_layer_types(root, label, c, c->sliding_window > 0, &first, err))) return s;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (c->sliding_window && lt && !cJSON_IsNull(lt)) c->window_from = first;
    if (!c->sliding_window) c->window_from = 0;
    return DFL_OK;
}

/* Motif (docs/format.md "Motif"): λ_init's layer shift, the sub-layer eps
 * attn_rms_norm_eps, and the head layout: V1 pairs (no num_noise_heads) or GDA groups
 * of gr = (H − Gn)/Gn signal heads and one noise head, k and v heads in (signal, noise)
 * pairs (k_ratio 1). */
static dfl_status parse_motif(const cJSON *root, const char *label, const dfl__family *f, dfl_config *c,
                              dfl_error *err)
{
    dfl_status s;
    int64_t H = c->num_heads, Hkv = c->num_kv_heads, kr;
    c->lambda_layer_shift = f->lambda_layer_shift;
    if ((s = get_num(root, "attn_rms_norm_eps", f->subnorm_eps, label, &c->subnorm_eps, err))) return s;
    if (!(c->subnorm_eps > 0)) return dfl__fail(err, DFL_ERR_CONFIG, "%s: attn_rms_norm_eps must be > 0", label);
    if ((s = get_int(root, "num_noise_heads", 0, 4096, label, &c->num_noise_heads, err))) return s;
    if ((s = get_int(root, "k_ratio", 1, 4096, label, &kr, err))) return s;
    if (Hkv % 2)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: Motif needs an even num_key_value_heads (k and v heads come in "
                         "pairs; got %lld)", label, (long long)Hkv);
    const cJSON *gn = cJSON_GetObjectItemCaseSensitive(root, "num_noise_heads");
    if (!gn || cJSON_IsNull(gn)) {   /* V1: q heads in adjacent pairs; k_ratio unused */
        if (H % 2 || (H / 2) % (Hkv / 2))
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: Motif needs an even num_attention_heads whose half is a "
                             "multiple of num_key_value_heads / 2 (got %lld and %lld)", label, (long long)H,
                             (long long)Hkv);
        return DFL_OK;
    }
    int64_t Gn = c->num_noise_heads, kgroups = Hkv / 2;
    if (Gn < 1 || Gn >= H || H % Gn)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: num_noise_heads (%lld) must divide num_attention_heads (%lld) "
                         "with signal heads left over", label, (long long)Gn, (long long)H);
    if (kr != 1)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"k_ratio\" = %lld is not supported (only 1: every published "
                         "Motif GDA checkpoint; the ports disagree on the head mapping of other ratios)", label,
                         (long long)kr);
    if (Gn % kgroups)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: num_noise_heads (%lld) must be a multiple of "
                         "num_key_value_heads / 2 (%lld)", label, (long long)Gn, (long long)kgroups);
    return DFL_OK;
}

dfl_status dfl_config_parse(const char *json, size_t len, const char *label, dfl_config *cfg, dfl_error *err)
{
    /* as Python's json (Hugging Face): the last of duplicate keys wins; nothing may
     * follow the object */
    const char *why;
    size_t at;
    cJSON *root = dfl__json_parse(json, len, &why, &at);
    if (!root)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: not valid JSON: %s at byte %zu", label, why, at + 1);
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
    if (f->norm != DFL__NORM_RMS || (f->mlp != DFL__MLP_SWIGLU && f->mlp != DFL__MLP_POLYNORM)) {
        /* an entry ahead of its kernels */
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: model_type %s: its norm or MLP is not implemented yet", label,
                      f->model_type);
        goto done;
    }
    c.type = f->attn;
    snprintf(c.model_type, sizeof c.model_type, "%s", f->model_type);
    const dfl__attn_variant *av = dfl__attn_of(&c);
    if ((s = check_keys(root, f, label, err))) goto done;

    if ((s = get_int(root, "vocab_size", -1, DIM_MAX, label, &c.vocab_size, err))) goto done;
    if ((s = get_int(root, "hidden_size", -1, DIM_MAX, label, &c.hidden_size, err))) goto done;
    if ((s = get_int(root, "intermediate_size", -1, DIM_MAX, label, &c.intermediate_size, err))) goto done;
    if ((s = get_int(root, "num_hidden_layers", -1, 4096, label, &c.num_layers, err))) goto done;
    if ((s = get_int(root, "num_attention_heads", -1, 4096, label, &c.num_heads, err))) goto done;
    if ((s = get_int(root, "num_key_value_heads", c.num_heads, 4096, label, &c.num_kv_heads, err))) goto done;
    if (c.vocab_size < 1 || c.hidden_size < 1 || c.intermediate_size < 1 || c.num_layers < 1 ||
        c.num_heads < 1 || c.num_kv_heads < 1) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: sizes, layer and head counts must be >= 1", label);
        goto done;
    }
    if (c.num_heads % c.num_kv_heads && c.type != DFL_MODEL_MOTIF) {   /* Motif: parse_motif's rules */
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: num_attention_heads (%lld) is not a multiple of num_key_value_heads (%lld)",
                      label, (long long)c.num_heads, (long long)c.num_kv_heads);
        goto done;
    }
    if (c.num_heads % av->heads_per_analysis) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: %s needs an even num_attention_heads (got %lld)",
                      label, f->model_type, (long long)c.num_heads);
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
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: head_dim must be even and >= 2 (got %lld)", label, (long long)c.head_dim);
        goto done;
    }

    if ((s = get_num(root, "rms_norm_eps", 1e-6, label, &c.rms_norm_eps, err))) goto done;
    if ((s = get_num(root, "rope_theta", 10000.0, label, &c.rope_theta, err))) goto done;
    if (!(c.rms_norm_eps >= 0)) { s = dfl__fail(err, DFL_ERR_CONFIG, "%s: rms_norm_eps must be >= 0", label); goto done; }
    if ((s = get_bool(root, "rope_interleaved", f->rope_interleaved, label, &c.rope_interleaved, err))) goto done;
    if ((s = get_bool(root, "tie_word_embeddings", 0, label, &c.tie_word_embeddings, err))) goto done;
    if ((s = get_int(root, "max_position_embeddings", 0, (int64_t)1 << 40, label, &c.max_position_embeddings, err))) goto done;
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(root, "bos_token_id");
    if (cJSON_IsNumber(bos) && isinf(bos->valuedouble)) {
        s = out_of_range(label, "bos_token_id", err);
        goto done;
    }
    /* only for a warning: anything but a token id in range is "none" (and never cast out of range) */
    c.bos_token_id = cJSON_IsNumber(bos) && fabs(bos->valuedouble) < (double)((int64_t)1 << 62)
                         ? (int64_t)bos->valuedouble : -1;
    if ((s = parse_rope_scaling(root, label, &c, err))) goto done;
    if ((s = parse_window(root, label, f, &c, err))) goto done;
    c.qkv_bias = f->qkv_bias;
    c.qk_norm = f->qk_norm;
    if (!(c.rope_theta > 0)) { s = dfl__fail(err, DFL_ERR_CONFIG, "%s: rope_theta must be > 0", label); goto done; }

    /* Refuse what we would otherwise compute wrongly. */
    int flag;
    if ((s = get_bool(root, "attention_bias", 0, label, &flag, err))) goto done;
    if (flag) { s = dfl__fail(err, DFL_ERR_CONFIG, "%s: attention_bias = true is not supported", label); goto done; }
    if ((s = get_bool(root, "mlp_bias", 0, label, &flag, err))) goto done;
    if (flag) { s = dfl__fail(err, DFL_ERR_CONFIG, "%s: mlp_bias = true is not supported", label); goto done; }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    const char *want_act = f->hidden_act ? f->hidden_act : "silu";
    if (act && !cJSON_IsNull(act) && (!cJSON_IsString(act) || strcmp(act->valuestring, want_act))) {
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
            if (cJSON_IsString(kp) && !strcmp(kp->valuestring, "naive")) c.kv_pairing = DFL_KV_NAIVE;
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

int64_t dfl_config_analysis_heads(const dfl_config *c) { return dfl__attn_shape_of(c).heads; }

int dfl_config_maps_per_head(const dfl_config *c) { return dfl__attn_of(c)->maps; }

int64_t dfl_config_noise_group(const dfl_config *c, int64_t head)
{
    if (c->type != DFL_MODEL_MOTIF || !c->num_noise_heads) return -1;
    return head / ((c->num_heads - c->num_noise_heads) / c->num_noise_heads);
}

int64_t dfl_config_window(const dfl_config *c, int64_t layer)
{
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
    const dfl_tensor **used;   /* [n_used] tensors bound so far */
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
static dfl_status find(binder *b, const char *name, int64_t d0, int64_t d1, int optional,
                       const dfl_tensor **out, dfl_error *err)
{
    *out = NULL;
    const dfl_tensor *t = dfl_st_set_find(b->set, name);
    if (!t) {
        if (optional) return DFL_OK;
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '%s' is missing", b->m->path, name);
    }
    const char *file = dfl_st_set_file_of(b->set, name);
    if (t->dtype != DFL_DTYPE_F32 && t->dtype != DFL_DTYPE_F16 && t->dtype != DFL_DTYPE_BF16)
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '%s' has dtype %s (F32, F16 or BF16 expected)",
                         file, name, dfl_dtype_name(t->dtype) ? dfl_dtype_name(t->dtype) : "?");
    int ndim = d1 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
        char got[128] = "[", want[64];
        for (int i = 0; i < t->ndim && strlen(got) < 100; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        strcat(got, "]");
        if (d1) snprintf(want, sizeof want, "[%lld, %lld]", (long long)d0, (long long)d1);
        else snprintf(want, sizeof want, "[%lld]", (long long)d0);
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '%s' has shape %s, config needs %s", file, name, got, want);
    }
    *out = t;
    return mark_used(b, t, err);
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
    if (b->m->n_owned == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        float **no = realloc(b->m->owned, nc * sizeof *no);
        if (!no) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory binding '%s'", name);
        b->m->owned = no;
        b->cap = nc;
    }
    float *buf = dfl__alloc_array(dfl_tensor_numel(t), sizeof(float));
    if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for tensor '%s'", name);
    b->m->owned[b->m->n_owned++] = buf;
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
    out->data = t->data;
    out->dtype = (int)t->dtype;
    out->rows = d0;
    out->cols = d1;
    return DFL_OK;
}

static float dot(const float *a, const float *b, int64_t n)
{
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) acc += (double)a[i] * b[i];
    return (float)acc;
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
#define BIND(field, suffix, d0, opt)                                     \
    do {                                                                 \
        snprintf(n, sizeof n, "%s%s", p, suffix);                        \
        if ((s = bind(b, n, d0, opt, &w->field, err))) return s;         \
    } while (0)
#define BIND_MAT(field, suffix, d0, d1)                                  \
    do {                                                                 \
        snprintf(n, sizeof n, "%s%s", p, suffix);                        \
        if ((s = bind_mat(b, n, d0, d1, &w->field, err))) return s;      \
    } while (0)
    BIND(attn_norm, "input_layernorm.weight", D, 0);
    BIND(mlp_norm, "post_attention_layernorm.weight", D, 0);
    BIND_MAT(wq, "self_attn.q_proj.weight", q_rows, D);
    BIND_MAT(wk, "self_attn.k_proj.weight", k_rows, D);
    BIND_MAT(wv, "self_attn.v_proj.weight", v_rows, D);
    snprintf(o_proj, sizeof o_proj, "self_attn.%s.weight", av->o_proj);
    BIND_MAT(wo, o_proj, D, o_cols);
    BIND_MAT(w_gate, "mlp.gate_proj.weight", F, D);
    BIND_MAT(w_up, "mlp.up_proj.weight", F, D);
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
    if (c->qk_norm) {
        BIND(q_norm, "self_attn.q_norm.weight", hd, 0);
        BIND(k_norm, "self_attn.k_norm.weight", hd, 0);
    }
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

static char *join_path(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* Tensors a checkpoint may carry that are derived from the config, not weights:
 * RoPE frequencies that older exports saved as buffers. */
static int derived_buffer(const char *name)
{
    const char *suffix = "rotary_emb.inv_freq";
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && !strcmp(name + n - k, suffix);
}

/* Every tensor of the set that no binding used: refused (one line naming them), or,
 * with allow_unused, listed in m->unused for the caller's warning. */
static dfl_status check_unused(binder *b, int allow, dfl_error *err)
{
    size_t n = dfl_st_set_count(b->set), bad = 0;
    char names[400] = "";
    for (size_t i = 0; i < n; i++) {
        const dfl_tensor *t = dfl_st_set_at(b->set, i);
        int used = derived_buffer(t->name);
        for (size_t j = 0; j < b->n_used && !used; j++) used = b->used[j] == t;
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
    return dfl__fail(err, DFL_ERR_TENSOR, "%s: %zu checkpoint tensor%s not used by a %s model: %s "
                     "(--allow-unused runs without %s)", b->m->path, bad, bad == 1 ? " is" : "s are",
                     b->m->config.model_type, names, bad == 1 ? "it" : "them");
}

dfl_status dfl_model_load(const char *dir, dfl_model **out, dfl_error *err)
{
    return dfl_model_load_opts(dir, NULL, out, err);
}

dfl_status dfl_model_load_opts(const char *dir, const dfl_load_opts *opts, dfl_model **out, dfl_error *err)
{
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
    if ((s = bind_mat(&b, "model.embed_tokens.weight", c->vocab_size, c->hidden_size, &m->embed, err))) goto fail;
    if ((s = bind(&b, "model.norm.weight", c->hidden_size, 0, &m->final_norm, err))) goto fail;
    /* Tied models may still ship lm_head.weight: used only when it is a byte-for-byte
     * copy of the embedding (what tying means); anything else is reported unused. */
    if (c->tie_word_embeddings) {
        m->lm_head = m->embed;
        const dfl_tensor *e = dfl_st_set_find(b.set, "model.embed_tokens.weight");
        const dfl_tensor *h = dfl_st_set_find(b.set, "lm_head.weight");
        if (h && h->dtype == e->dtype && h->nbytes == e->nbytes && !memcmp(h->data, e->data, e->nbytes) &&
            (s = mark_used(&b, h, err)))
            goto fail;
    } else if ((s = bind_mat(&b, "lm_head.weight", c->vocab_size, c->hidden_size, &m->lm_head, err))) {
        goto fail;
    }
    m->layers = calloc((size_t)c->num_layers, sizeof *m->layers);
    if (!m->layers) { s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory"); goto fail; }
    for (int64_t l = 0; l < c->num_layers; l++)
        if ((s = bind_layer(&b, l, err))) goto fail;
    if ((s = check_unused(&b, opts && opts->allow_unused, err))) goto fail;
    m->tensors = b.set;   /* kept open: the weights point into the mapping */
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
    for (size_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    for (size_t i = 0; i < m->n_unused; i++) free(m->unused[i]);
    free(m->unused);
    dfl_st_set_close(m->tensors);
    free(m->layers);
    free(m->config_text);
    free(m->path);
    free(m);
}
