/* gguf_tok.c — tokenizer.json rebuilt from GGUF tokenizer metadata, the inverse of
 * llama.cpp's convert_hf_to_gguf.py for byte-level BPE vocabularies: tokens that are
 * CONTROL (3) or USER_DEFINED (4) become added tokens (special / not special), the
 * others the BPE vocabulary; merges as stored; the pre-tokenizer of the family that
 * tokenizer.ggml.pre names (the regexes of the families' own tokenizer.json). */
#include "model/gguf_tok.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_CONTROL      3
#define TOKEN_USER_DEFINED 4

/* tokenizer.ggml.pre → Split regex (NULL: GPT-2's ByteLevel regex), NFC, ignore_merges. */
static const struct {
    const char *pre, *regex;
    int nfc, ignore_merges;
} PRES[] = {
    {"llama-bpe",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+",
     0, 1},
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+",
     1, 0},
    {"gpt-2", NULL, 0, 0},
    {"default", NULL, 0, 0},
};

/* Element i of a string array (walked from *at, which the caller advances in order). */
static int next_str(const dfl_gguf_kv *kv, size_t *at, const char **s, size_t *len)
{
    const unsigned char *p = (const unsigned char *)kv->data + *at;
    if (*at + 8 > kv->nbytes) return 0;
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--)
        n = n << 8 | p[k];
    if (n > kv->nbytes - *at - 8) return 0; /* validated by the reader; checked again */
    *s = (const char *)p + 8;
    *len = (size_t)n;
    *at += 8 + (size_t)n;
    return 1;
}

static const dfl_gguf_kv *array_of(const dfl_gguf *g, const char *key, dfl_gguf_vtype et, int required,
                                   const char *label, dfl_status *s, dfl_error *err)
{
    const dfl_gguf_kv *kv = dfl_gguf_find_kv(g, key);
    *s = DFL_OK;
    if (!kv) {
        if (required) *s = dfl__fail(err, DFL_ERR_CONFIG, "%s: GGUF tokenizer key '%s' is missing", label, key);
        return NULL;
    }
    if (kv->type != DFL_GGUF_ARRAY ||
        (et == DFL_GGUF_STRING ? kv->elem_type != et : kv->elem_type == DFL_GGUF_STRING)) {
        *s = dfl__fail(err, DFL_ERR_FORMAT, "%s: GGUF key '%s' must be an array of %s", label, key,
                       dfl__gguf_vtype_name(et));
        return NULL;
    }
    return kv;
}

/* A cJSON string from (s, len), which need not be NUL-terminated. */
static cJSON *str_n(const char *s, size_t len)
{
    char *c = malloc(len + 1);
    if (!c) return NULL;
    memcpy(c, s, len);
    c[len] = 0;
    cJSON *j = cJSON_CreateString(c);
    free(c);
    return j;
}

static cJSON *byte_level(int prefix, int trim, int regex)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", prefix);
    cJSON_AddBoolToObject(o, "trim_offsets", trim);
    cJSON_AddBoolToObject(o, "use_regex", regex);
    return o;
}

/* {"SpecialToken": {"id": name, "type_id": 0}} and its special_tokens entry. */
static void template_token(cJSON *single, cJSON *specials, const char *name, size_t nlen, int64_t id)
{
    cJSON *it = cJSON_CreateObject(), *sp = cJSON_AddObjectToObject(it, "SpecialToken");
    cJSON *nm = str_n(name, nlen);
    cJSON_AddItemToObject(sp, "id", nm);
    cJSON_AddNumberToObject(sp, "type_id", 0);
    cJSON_AddItemToArray(single, it);
    cJSON *def = cJSON_CreateObject(), *ids = cJSON_AddArrayToObject(def, "ids"),
          *toks = cJSON_AddArrayToObject(def, "tokens");
    cJSON_AddItemToObject(def, "id", str_n(name, nlen));
    cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)id));
    cJSON_AddItemToArray(toks, str_n(name, nlen));
    char *key = malloc(nlen + 1);
    if (key) {
        memcpy(key, name, nlen);
        key[nlen] = 0;
        cJSON_AddItemToObject(specials, key, def);
        free(key);
    } else {
        cJSON_Delete(def);
    }
}

dfl_status dfl_gguf_tokenizer_json(const dfl_gguf *g, const char *label, char **json, dfl_error *err)
{
    *json = NULL;
    const char *model, *pre = "default";
    size_t mlen, plen = 7;
    if (dfl_gguf_get_str(g, "tokenizer.ggml.model", &model, &mlen) != 1)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: GGUF metadata has no string 'tokenizer.ggml.model'", label);
    if (mlen != 4 || memcmp(model, "gpt2", 4))
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: tokenizer.ggml.model '%.*s' is not supported from GGUF (gpt2; for "
                         "others pass the model's tokenizer.json with --tokenizer)",
                         label, (int)(mlen < 32 ? mlen : 32), model);
    int r = dfl_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &plen);
    if (r < 0) return dfl__fail(err, DFL_ERR_FORMAT, "%s: tokenizer.ggml.pre must be a string", label);
    if (r == 0) pre = "default", plen = 7;
    size_t k = 0, n_pre = sizeof PRES / sizeof PRES[0];
    while (k < n_pre && (strlen(PRES[k].pre) != plen || memcmp(PRES[k].pre, pre, plen)))
        k++;
    if (k == n_pre)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: tokenizer.ggml.pre '%.*s' is not supported (llama-bpe, qwen2, gpt-2, "
                         "default)",
                         label, (int)(plen < 32 ? plen : 32), pre);
    dfl_status s;
    const dfl_gguf_kv *tokens = array_of(g, "tokenizer.ggml.tokens", DFL_GGUF_STRING, 1, label, &s, err);
    if (s) return s;
    const dfl_gguf_kv *merges = array_of(g, "tokenizer.ggml.merges", DFL_GGUF_STRING, 1, label, &s, err);
    if (s) return s;
    const dfl_gguf_kv *types = array_of(g, "tokenizer.ggml.token_type", DFL_GGUF_I32, 0, label, &s, err);
    if (s) return s;
    if (types && types->n != tokens->n)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %llu entries for %llu tokens", label,
                         (unsigned long long)types->n, (unsigned long long)tokens->n);
    int64_t bos = -1, eos = -1;
    int add_bos = 0, add_eos = 0;
    if (dfl_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos) < 0 ||
        dfl_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &eos) < 0 ||
        dfl_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos) < 0 ||
        dfl_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &add_eos) < 0)
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "%s: tokenizer.ggml bos/eos ids must be integers and add_bos_token/"
                         "add_eos_token booleans",
                         label);
    if ((add_bos && (bos < 0 || (uint64_t)bos >= tokens->n)) || (add_eos && (eos < 0 || (uint64_t)eos >= tokens->n)))
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: add_bos_token/add_eos_token need a bos/eos id below %llu", label,
                         (unsigned long long)tokens->n);

    cJSON *root = cJSON_CreateObject();
    if (!root) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    cJSON *m = cJSON_CreateObject(), *vocab = cJSON_CreateObject(), *mg = cJSON_CreateArray();
    const char *bos_s = NULL, *eos_s = NULL;
    size_t bos_n = 0, eos_n = 0, at = 0;
    for (uint64_t i = 0; i < tokens->n; i++) {
        const char *t;
        size_t len;
        int64_t ty = 1;
        if (!next_str(tokens, &at, &t, &len)) break;
        if (types) dfl_gguf_arr_int(types, i, &ty);
        if ((int64_t)i == bos) bos_s = t, bos_n = len;
        if ((int64_t)i == eos) eos_s = t, eos_n = len;
        if (ty == TOKEN_CONTROL || ty == TOKEN_USER_DEFINED) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", (double)i);
            cJSON_AddItemToObject(a, "content", str_n(t, len));
            cJSON_AddBoolToObject(a, "single_word", 0);
            cJSON_AddBoolToObject(a, "lstrip", 0);
            cJSON_AddBoolToObject(a, "rstrip", 0);
            cJSON_AddBoolToObject(a, "normalized", ty == TOKEN_USER_DEFINED);
            cJSON_AddBoolToObject(a, "special", ty == TOKEN_CONTROL);
            cJSON_AddItemToArray(added, a);
            continue;
        }
        char *key = malloc(len + 1);
        if (!key) break;
        memcpy(key, t, len);
        key[len] = 0;
        cJSON_AddItemToObject(vocab, key, cJSON_CreateNumber((double)i));
        free(key);
    }
    at = 0;
    for (uint64_t i = 0; i < merges->n; i++) {
        const char *t;
        size_t len;
        if (!next_str(merges, &at, &t, &len)) break;
        cJSON_AddItemToArray(mg, str_n(t, len));
    }
    cJSON_AddItemToObject(root, "normalizer", PRES[k].nfc ? cJSON_CreateObject() : cJSON_CreateNull());
    if (PRES[k].nfc) cJSON_AddStringToObject(cJSON_GetObjectItem(root, "normalizer"), "type", "NFC");
    if (PRES[k].regex) {
        cJSON *pt = cJSON_AddObjectToObject(root, "pre_tokenizer"), *seq = cJSON_CreateArray();
        cJSON_AddStringToObject(pt, "type", "Sequence");
        cJSON_AddItemToObject(pt, "pretokenizers", seq);
        cJSON *sp = cJSON_CreateObject(), *pat = cJSON_AddObjectToObject(sp, "pattern");
        cJSON_AddStringToObject(sp, "type", "Split");
        cJSON_AddStringToObject(pat, "Regex", PRES[k].regex);
        cJSON_AddStringToObject(sp, "behavior", "Isolated");
        cJSON_AddBoolToObject(sp, "invert", 0);
        cJSON_AddItemToArray(seq, sp);
        cJSON_AddItemToArray(seq, byte_level(0, 0, 0));
    } else {
        cJSON_AddItemToObject(root, "pre_tokenizer", byte_level(0, 0, 1));
    }
    if (add_bos || add_eos) {
        cJSON *pp = cJSON_AddObjectToObject(root, "post_processor"), *single = cJSON_AddArrayToObject(pp, "single");
        cJSON_AddStringToObject(pp, "type", "TemplateProcessing");
        cJSON *specials = cJSON_AddObjectToObject(pp, "special_tokens");
        if (add_bos) template_token(single, specials, bos_s, bos_n, bos);
        cJSON *sq = cJSON_CreateObject(), *a = cJSON_AddObjectToObject(sq, "Sequence");
        cJSON_AddStringToObject(a, "id", "A");
        cJSON_AddNumberToObject(a, "type_id", 0);
        cJSON_AddItemToArray(single, sq);
        if (add_eos) template_token(single, specials, eos_s, eos_n, eos);
    } else {
        cJSON_AddItemToObject(root, "post_processor", byte_level(0, 0, 0));
    }
    cJSON_AddItemToObject(root, "decoder", byte_level(1, 1, 1));
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddItemToObject(m, "dropout", cJSON_CreateNull());
    cJSON_AddItemToObject(m, "unk_token", cJSON_CreateNull());
    cJSON_AddBoolToObject(m, "fuse_unk", 0);
    cJSON_AddBoolToObject(m, "byte_fallback", 0);
    cJSON_AddBoolToObject(m, "ignore_merges", PRES[k].ignore_merges);
    cJSON_AddItemToObject(m, "vocab", vocab);
    cJSON_AddItemToObject(m, "merges", mg);
    cJSON_AddItemToObject(root, "model", m);
    *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return *json ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory building the tokenizer", label);
}

static int ends_gguf(const char *p)
{
    size_t n = strlen(p);
    return n > 5 && !strcmp(p + n - 5, ".gguf");
}

dfl_status dfl_model_tokenizer_open(const char *path, dfl_tokenizer **out, dfl_error *err)
{
    if (!ends_gguf(path)) return dfl_tokenizer_open_path(path, out, err);
    *out = NULL;
    dfl_gguf *g;
    dfl_status s = dfl_gguf_open(path, &g, err);
    if (s) return s;
    char *json = NULL;
    s = dfl_gguf_tokenizer_json(g, path, &json, err);
    dfl_gguf_close(g);
    if (s) return s;
    s = dfl_tokenizer_load(json, strlen(json), out, err);
    free(json);
    if (s) dfl__context(err, "%s (the tokenizer rebuilt from its metadata)", path);
    return s;
}
