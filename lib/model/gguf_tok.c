/* gguf_tok.c — tokenizer.json rebuilt from GGUF tokenizer metadata, the inverse of
 * llama.cpp's convert_hf_to_gguf.py. Byte-level BPE ("gpt2"): tokens that are CONTROL (3)
 * or USER_DEFINED (4) become added tokens (special / not special), the others the BPE
 * vocabulary; merges as stored; the pre-tokenizer of the family that tokenizer.ggml.pre
 * names (the regexes of the families' own tokenizer.json). SentencePiece ("llama"):
 * the tokenizer.json Hugging Face's converter writes for a SentencePiece BPE model —
 * every piece in the vocabulary, merges = every split of a piece into two pieces ordered
 * by the piece's score (transformers' SentencePieceExtractor), byte fallback, "▁" for
 * spaces and, under add_space_prefix, one before the text. */
#include "model/gguf_tok.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_UNKNOWN      2
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

/* obj[key] = item for a key (s, len) that need not be NUL-terminated; 0 when out of
 * memory (item is then freed). */
static int add_item_n(cJSON *obj, const char *s, size_t len, cJSON *item)
{
    char *key = malloc(len + 1);
    if (!key) {
        cJSON_Delete(item);
        return 0;
    }
    memcpy(key, s, len);
    key[len] = 0;
    cJSON_AddItemToObject(obj, key, item);
    free(key);
    return 1;
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
    add_item_n(specials, name, nlen, def);
}

/* The bos/eos ids, their texts (filled in by the caller's walk over the tokens) and
 * whether the post-processor adds them. */
typedef struct bos_eos {
    int64_t bos, eos;
    int add_bos, add_eos;
    const char *bos_s, *eos_s;
    size_t bos_n, eos_n;
} bos_eos;

/* add_bos_token defaults to default_bos when the key is absent (llama.cpp: true for
 * SentencePiece vocabularies, false for byte-level BPE). */
static dfl_status read_bos_eos(const dfl_gguf *g, const char *label, uint64_t n_tokens, int default_bos, bos_eos *b,
                               dfl_error *err)
{
    memset(b, 0, sizeof *b);
    b->bos = b->eos = -1;
    b->add_bos = default_bos;
    if (dfl_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &b->bos) < 0 ||
        dfl_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &b->eos) < 0 ||
        dfl_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b->add_bos) < 0 ||
        dfl_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b->add_eos) < 0)
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "%s: tokenizer.ggml bos/eos ids must be integers and add_bos_token/"
                         "add_eos_token booleans",
                         label);
    if ((b->add_bos && (b->bos < 0 || (uint64_t)b->bos >= n_tokens)) ||
        (b->add_eos && (b->eos < 0 || (uint64_t)b->eos >= n_tokens)))
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: add_bos_token/add_eos_token need a bos/eos id below %llu", label,
                         (unsigned long long)n_tokens);
    return DFL_OK;
}

/* The TemplateProcessing post-processor adding bos before and/or eos after the text. */
static void add_template(cJSON *root, const bos_eos *b)
{
    cJSON *pp = cJSON_AddObjectToObject(root, "post_processor"), *single = cJSON_AddArrayToObject(pp, "single");
    cJSON_AddStringToObject(pp, "type", "TemplateProcessing");
    cJSON *specials = cJSON_AddObjectToObject(pp, "special_tokens");
    if (b->add_bos) template_token(single, specials, b->bos_s, b->bos_n, b->bos);
    cJSON *sq = cJSON_CreateObject(), *a = cJSON_AddObjectToObject(sq, "Sequence");
    cJSON_AddStringToObject(a, "id", "A");
    cJSON_AddNumberToObject(a, "type_id", 0);
    cJSON_AddItemToArray(single, sq);
    if (b->add_eos) template_token(single, specials, b->eos_s, b->eos_n, b->eos);
}

/* An added_tokens entry. */
static void added_token(cJSON *added, uint64_t id, const char *t, size_t len, int special, int normalized)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "id", (double)id);
    cJSON_AddItemToObject(a, "content", str_n(t, len));
    cJSON_AddBoolToObject(a, "single_word", 0);
    cJSON_AddBoolToObject(a, "lstrip", 0);
    cJSON_AddBoolToObject(a, "rstrip", 0);
    cJSON_AddBoolToObject(a, "normalized", normalized);
    cJSON_AddBoolToObject(a, "special", special);
    cJSON_AddItemToArray(added, a);
}

/* ------------------------------------------------- SentencePiece ("llama") */

/* A piece: its bytes in the tokenizer.ggml.tokens array. */
typedef struct piece {
    const char *s;
    size_t len;
    int32_t id;
} piece;

/* A merge (left, right) → the piece id, ordered by the piece's score. */
typedef struct spm_merge {
    int32_t left, right, piece;
    float score;
} spm_merge;

static int piece_cmp(const void *a, const void *b)
{
    const piece *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* transformers' SentencePieceExtractor: by score, highest first; a piece's own splits
 * by (left id, right id); equal scores keep the pieces' id order (its stable sort). */
static int merge_cmp(const void *a, const void *b)
{
    const spm_merge *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    if (x->piece != y->piece) return x->piece < y->piece ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

static int32_t piece_find(const piece *sorted, size_t n, const char *s, size_t len)
{
    piece key = {s, len, 0};
    const piece *p = bsearch(&key, sorted, n, sizeof *sorted, piece_cmp);
    return p ? p->id : -1;
}

/* Every split of each piece (but CONTROL ones) at a UTF-8 boundary into two pieces of
 * the vocabulary, sorted as the extractor sorts them. *out[*n], caller frees. */
static dfl_status spm_merges(const piece *by_id, const int64_t *types, const float *scores, size_t n_tok,
                             spm_merge **out, size_t *n_out, dfl_error *err)
{
    *out = NULL;
    *n_out = 0;
    piece *sorted = malloc(n_tok * sizeof *sorted);
    size_t cap = 0, n = 0;
    spm_merge *m = NULL;
    if (!sorted) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    memcpy(sorted, by_id, n_tok * sizeof *sorted);
    qsort(sorted, n_tok, sizeof *sorted, piece_cmp);
    for (size_t i = 0; i < n_tok; i++) {
        if (types[i] == TOKEN_CONTROL) continue;
        const piece *p = &by_id[i];
        for (size_t k = 1; k < p->len; k++) {
            if (((unsigned char)p->s[k] & 0xC0) == 0x80) continue; /* inside a character */
            int32_t l = piece_find(sorted, n_tok, p->s, k),
                    r = l < 0 ? -1 : piece_find(sorted, n_tok, p->s + k, p->len - k);
            if (r < 0) continue;
            spm_merge *grown = n == cap ? dfl__grow_array(m, &cap, sizeof *m, 4096) : m;
            if (!grown) {
                free(sorted);
                free(m);
                return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            }
            m = grown;
            m[n++] = (spm_merge){l, r, (int32_t)i, scores[i]};
        }
    }
    free(sorted);
    qsort(m, n, sizeof *m, merge_cmp);
    *out = m;
    *n_out = n;
    return DFL_OK;
}

static cJSON *replace_space(const char *from, const char *to)
{
    cJSON *o = cJSON_CreateObject(), *pat = cJSON_AddObjectToObject(o, "pattern");
    cJSON_AddStringToObject(o, "type", "Replace");
    cJSON_AddStringToObject(pat, "String", from);
    cJSON_AddStringToObject(o, "content", to);
    return o;
}

#define METASPACE "\xe2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space */

/* The normalizer and decoder of a SentencePiece tokenizer.json (Llama 2's under
 * add_space_prefix, Gemma's without). */
static void spm_text_rules(cJSON *root, int prefix)
{
    cJSON *nz = replace_space(" ", METASPACE);
    if (prefix) {
        cJSON *seq = cJSON_CreateObject(), *list = cJSON_CreateArray(), *pre = cJSON_CreateObject();
        cJSON_AddStringToObject(seq, "type", "Sequence");
        cJSON_AddStringToObject(pre, "type", "Prepend");
        cJSON_AddStringToObject(pre, "prepend", METASPACE);
        cJSON_AddItemToArray(list, pre);
        cJSON_AddItemToArray(list, nz);
        cJSON_AddItemToObject(seq, "normalizers", list);
        nz = seq;
    }
    cJSON_AddItemToObject(root, "normalizer", nz);
    cJSON_AddItemToObject(root, "pre_tokenizer", cJSON_CreateNull());
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder"), *list = cJSON_AddArrayToObject(dec, "decoders");
    cJSON_AddStringToObject(dec, "type", "Sequence");
    cJSON_AddItemToArray(list, replace_space(METASPACE, " "));
    cJSON *bf = cJSON_CreateObject(), *fuse = cJSON_CreateObject();
    cJSON_AddStringToObject(bf, "type", "ByteFallback");
    cJSON_AddStringToObject(fuse, "type", "Fuse");
    cJSON_AddItemToArray(list, bf);
    cJSON_AddItemToArray(list, fuse);
    if (prefix) {
        cJSON *st = cJSON_CreateObject();
        cJSON_AddStringToObject(st, "type", "Strip");
        cJSON_AddStringToObject(st, "content", " ");
        cJSON_AddNumberToObject(st, "start", 1);
        cJSON_AddNumberToObject(st, "stop", 0);
        cJSON_AddItemToArray(list, st);
    }
}

/* tokenizer.json of a SentencePiece vocabulary: tokens, scores, token_type, bos/eos,
 * unknown_token_id, add_space_prefix (default true, as llama.cpp). */
static dfl_status spm_json(const dfl_gguf *g, const char *label, char **json, dfl_error *err)
{
    dfl_status s;
    const dfl_gguf_kv *tokens = array_of(g, "tokenizer.ggml.tokens", DFL_GGUF_STRING, 1, label, &s, err);
    if (s) return s;
    const dfl_gguf_kv *scores = array_of(g, "tokenizer.ggml.scores", DFL_GGUF_F32, 1, label, &s, err);
    if (s) return s;
    const dfl_gguf_kv *types = array_of(g, "tokenizer.ggml.token_type", DFL_GGUF_I32, 0, label, &s, err);
    if (s) return s;
    size_t n = (size_t)tokens->n;
    if (scores->n != tokens->n || (types && types->n != tokens->n))
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: tokenizer.ggml.scores/token_type need one entry per token (%llu)",
                         label, (unsigned long long)tokens->n);
    if (n == 0 || n > INT32_MAX) return dfl__fail(err, DFL_ERR_FORMAT, "%s: tokenizer.ggml.tokens is empty", label);
    int prefix = 1;
    int64_t unk = -1;
    if (dfl_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &prefix) < 0 ||
        dfl_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", &unk) < 0)
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "%s: tokenizer.ggml.add_space_prefix must be a boolean and unknown_token_id an integer",
                         label);
    bos_eos bb;
    if ((s = read_bos_eos(g, label, tokens->n, 1, &bb, err))) return s;
    piece *by_id = malloc(n * sizeof *by_id);
    int64_t *ty = malloc(n * sizeof *ty);
    float *sc = malloc(n * sizeof *sc);
    if (!by_id || !ty || !sc) {
        free(by_id), free(ty), free(sc);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double v = 0.0;
        ty[i] = 1;
        if (!next_str(tokens, &at, &by_id[i].s, &by_id[i].len)) {
            free(by_id), free(ty), free(sc);
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: tokenizer.ggml.tokens ends before token %zu", label, i);
        }
        by_id[i].id = (int32_t)i;
        if (types) dfl_gguf_arr_int(types, i, &ty[i]);
        dfl_gguf_arr_num(scores, i, &v);
        sc[i] = (float)v;
        if (unk < 0 && ty[i] == TOKEN_UNKNOWN) unk = (int64_t)i;
    }
    if (unk >= (int64_t)n) unk = -1;
    if (bb.bos >= 0 && bb.bos < (int64_t)n) bb.bos_s = by_id[bb.bos].s, bb.bos_n = by_id[bb.bos].len;
    if (bb.eos >= 0 && bb.eos < (int64_t)n) bb.eos_s = by_id[bb.eos].s, bb.eos_n = by_id[bb.eos].len;
    spm_merge *mg = NULL;
    size_t n_mg = 0;
    s = spm_merges(by_id, ty, sc, n, &mg, &n_mg, err);
    cJSON *root = s ? NULL : cJSON_CreateObject();
    if (!s && !root) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!s) {
        cJSON_AddStringToObject(root, "version", "1.0");
        cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
        cJSON *m = cJSON_CreateObject(), *vocab = cJSON_CreateObject(), *ml = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) {
            if (ty[i] == TOKEN_CONTROL || ty[i] == TOKEN_USER_DEFINED)
                added_token(added, i, by_id[i].s, by_id[i].len, ty[i] == TOKEN_CONTROL, 0);
            if (!add_item_n(vocab, by_id[i].s, by_id[i].len, cJSON_CreateNumber((double)i))) break;
        }
        for (size_t i = 0; i < n_mg; i++) {
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, str_n(by_id[mg[i].left].s, by_id[mg[i].left].len));
            cJSON_AddItemToArray(pair, str_n(by_id[mg[i].right].s, by_id[mg[i].right].len));
            cJSON_AddItemToArray(ml, pair);
        }
        spm_text_rules(root, prefix);
        if (bb.add_bos || bb.add_eos) add_template(root, &bb);
        cJSON_AddStringToObject(m, "type", "BPE");
        cJSON_AddItemToObject(m, "dropout", cJSON_CreateNull());
        cJSON_AddItemToObject(m, "unk_token", unk >= 0 ? str_n(by_id[unk].s, by_id[unk].len) : cJSON_CreateNull());
        cJSON_AddBoolToObject(m, "fuse_unk", 1);
        cJSON_AddBoolToObject(m, "byte_fallback", 1);
        cJSON_AddBoolToObject(m, "ignore_merges", 0);
        cJSON_AddItemToObject(m, "vocab", vocab);
        cJSON_AddItemToObject(m, "merges", ml);
        cJSON_AddItemToObject(root, "model", m);
        *json = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        if (!*json) s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory building the tokenizer", label);
    }
    free(mg);
    free(by_id);
    free(ty);
    free(sc);
    return s;
}

dfl_status dfl_gguf_tokenizer_json(const dfl_gguf *g, const char *label, char **json, dfl_error *err)
{
    *json = NULL;
    const char *model, *pre = "default";
    size_t mlen, plen = 7;
    if (dfl_gguf_get_str(g, "tokenizer.ggml.model", &model, &mlen) != 1)
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: GGUF metadata has no string 'tokenizer.ggml.model'", label);
    if (mlen == 5 && !memcmp(model, "llama", 5)) return spm_json(g, label, json, err);
    if (mlen != 4 || memcmp(model, "gpt2", 4))
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "%s: tokenizer.ggml.model '%.*s' is not supported from GGUF (gpt2, llama; for "
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
    bos_eos bb;
    if ((s = read_bos_eos(g, label, tokens->n, 0, &bb, err))) return s;
    int64_t bos = bb.bos, eos = bb.eos;
    int add_bos = bb.add_bos, add_eos = bb.add_eos;

    cJSON *root = cJSON_CreateObject();
    if (!root) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    cJSON *m = cJSON_CreateObject(), *vocab = cJSON_CreateObject(), *mg = cJSON_CreateArray();
    size_t at = 0;
    for (uint64_t i = 0; i < tokens->n; i++) {
        const char *t;
        size_t len;
        int64_t ty = 1;
        if (!next_str(tokens, &at, &t, &len)) break;
        if (types) dfl_gguf_arr_int(types, i, &ty);
        if ((int64_t)i == bos) bb.bos_s = t, bb.bos_n = len;
        if ((int64_t)i == eos) bb.eos_s = t, bb.eos_n = len;
        if (ty == TOKEN_CONTROL || ty == TOKEN_USER_DEFINED) {
            added_token(added, i, t, len, ty == TOKEN_CONTROL, ty == TOKEN_USER_DEFINED);
            continue;
        }
        if (!add_item_n(vocab, t, len, cJSON_CreateNumber((double)i))) break;
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
    if (add_bos || add_eos)
        add_template(root, &bb);
    else
        cJSON_AddItemToObject(root, "post_processor", byte_level(0, 0, 0));
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
