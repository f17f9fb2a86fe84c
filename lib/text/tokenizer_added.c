/* tokenizer_added.c — added and special tokens, found in the text before the model
 * sees it (Hugging Face's AddedVocabulary): a byte trie searched leftmost-longest,
 * with single_word, lstrip and rstrip applied to each match. Tokens with
 * normalized=false are matched on the original text, the others on normalized text
 * (their own content normalized the same way).
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

typedef struct tnode {
    int32_t child;   /* first child or -1 */
    int32_t sibling; /* next sibling or -1 */
    int32_t token;   /* index into t->added of a token ending here, or -1 */
    uint8_t byte;
} tnode;

struct dfl__tk_trie {
    tnode *v; /* [n]; node 0 is the root */
    size_t n, cap;
    int32_t root[256]; /* root's child per first byte, -1 when none */
};

static int32_t trie_new(dfl__tk_trie *t, uint8_t b)
{
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256, bytes;
        if (nc > INT32_MAX || !dfl__mul_ok(nc, sizeof *t->v, &bytes)) return -1;
        tnode *nv = realloc(t->v, bytes);
        if (!nv) return -1;
        t->v = nv;
        t->cap = nc;
    }
    t->v[t->n] = (tnode){-1, -1, -1, b};
    return (int32_t)t->n++;
}

static int trie_add(dfl__tk_trie *t, const char *s, size_t n, int32_t token)
{
    if (!n) return 0;
    int32_t cur = t->root[(uint8_t)s[0]];
    if (cur < 0) {
        cur = trie_new(t, (uint8_t)s[0]);
        if (cur < 0) return -1;
        t->root[(uint8_t)s[0]] = cur;
    }
    for (size_t i = 1; i < n; i++) {
        int32_t c = t->v[cur].child;
        while (c >= 0 && t->v[c].byte != (uint8_t)s[i])
            c = t->v[c].sibling;
        if (c < 0) {
            c = trie_new(t, (uint8_t)s[i]);
            if (c < 0) return -1;
            t->v[c].sibling = t->v[cur].child;
            t->v[cur].child = c;
        }
        cur = c;
    }
    if (t->v[cur].token < 0) t->v[cur].token = token; /* the first of equal patterns wins */
    return 0;
}

/* Longest token starting at s[i]: its index (and *len), or -1. */
static int32_t trie_longest(const dfl__tk_trie *t, const char *s, size_t n, size_t i, size_t *len)
{
    int32_t cur = t->root[(uint8_t)s[i]], best = -1;
    size_t j = i + 1;
    while (cur >= 0) {
        if (t->v[cur].token >= 0) {
            best = t->v[cur].token;
            *len = j - i;
        }
        if (j >= n) break;
        int32_t c = t->v[cur].child;
        while (c >= 0 && t->v[c].byte != (uint8_t)s[j])
            c = t->v[c].sibling;
        cur = c;
        j++;
    }
    return best;
}

static void trie_free(dfl__tk_trie *t)
{
    if (!t) return;
    free(t->v);
    free(t);
}

static dfl__tk_trie *trie_create(void)
{
    dfl__tk_trie *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    for (int i = 0; i < 256; i++)
        t->root[i] = -1;
    return t;
}

/* A token matched on normalized text: into the trie, its byte pairs into
 * t->norm_pairs (where a long text may not be cut, tokenizer_window.c). */
static dfl_status add_norm(dfl_tokenizer *t, const dfl__tk_added *a, const char *s, size_t n, int32_t token)
{
    if (!t->norm_pairs && !(t->norm_pairs = calloc(65536 / 8, 1))) return DFL_ERR_NOMEM;
    for (size_t i = 0; i + 1 < n; i++) {
        unsigned k = (unsigned)(unsigned char)s[i] << 8 | (unsigned char)s[i + 1];
        t->norm_pairs[k >> 3] |= (uint8_t)(1u << (k & 7));
    }
    t->norm_strips |= a->lstrip || a->rstrip || a->single_word;
    return trie_add(t->trie_norm, s, n, token) ? DFL_ERR_NOMEM : DFL_OK;
}

dfl_status dfl__added_build(dfl_tokenizer *t, dfl_error *err)
{
    t->trie_raw = trie_create();
    t->trie_norm = trie_create();
    if (!t->trie_raw || !t->trie_norm) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < t->n_added; i++) {
        const dfl__tk_added *a = &t->added[i];
        if (!a->len) continue; /* a content listed again later (tokenizer_load.c) */
        if (!a->normalized) {
            if (trie_add(t->trie_raw, a->content, a->len, (int32_t)i))
                return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
            continue;
        }
        if (!t->normalizer) {
            if (add_norm(t, a, a->content, a->len, (int32_t)i))
                return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
            continue;
        }
        /* normalized tokens are matched by their normalized content */
        dfl__tk_store s = {0};
        dfl__tk_split sp = {.off = 0, .len = a->len, .token = -1};
        dfl_status st = dfl__store_put(&s, a->content, a->len, (dfl__tk_align){0, 0});
        if (st) st = dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        if (!st) st = dfl__normalize(t->normalizer, &s, &sp, NULL, err);
        if (!st && add_norm(t, a, dfl__store_at(&s, sp.off), sp.len, (int32_t)i))
            st = dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        dfl__store_free(&s);
        if (st) return st;
    }
    return DFL_OK;
}

void dfl__added_free(dfl_tokenizer *t)
{
    trie_free(t->trie_raw);
    trie_free(t->trie_norm);
    t->trie_raw = t->trie_norm = NULL;
    free(t->norm_pairs);
    free(t->cut);
    t->norm_pairs = t->cut = NULL;
}

/* \w as Rust's regex has it (single_word's ^\w / \w$): dfl__is_word. */
static int is_word(uint32_t cp)
{
    return dfl__is_word(cp);
}

/* The character ending just before byte i of p. */
static uint32_t char_before(const char *p, size_t i)
{
    size_t q = i - 1;
    while (q > 0 && ((unsigned char)p[q] & 0xC0) == 0x80)
        q--;
    uint32_t cp;
    dfl__utf8_next(p, i, q, &cp);
    return cp;
}

/* Bytes [from, to) of the piece sp as a piece of its own, carrying token. */
static dfl_status push_piece(const dfl__tk_store *s, const dfl__tk_split *sp, size_t from, size_t to, int64_t token,
                             dfl__tk_splits *out, dfl_error *err)
{
    dfl__tk_split x = *sp;
    x.off = sp->off + from;
    x.len = to - from;
    x.orig_s = dfl__store_al(s, x.off).s;
    x.token = token;
    if (dfl__splits_push(out, x)) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    return DFL_OK;
}

static dfl_status split_one(const dfl_tokenizer *t, const dfl__tk_trie *tr, const dfl__tk_store *s,
                            const dfl__tk_split *sp, dfl__tk_splits *out, dfl_error *err)
{
    const char *p = dfl__store_at(s, sp->off);
    size_t n = sp->len, start_off = 0, i = 0;
    while (i < n) {
        if (tr->root[(uint8_t)p[i]] < 0) {
            i++;
            continue;
        }
        size_t len;
        int32_t k = trie_longest(tr, p, n, i, &len);
        if (k < 0) {
            i++;
            continue;
        }
        const dfl__tk_added *a = &t->added[k];
        size_t ms = i, me = i + len;
        i = me; /* the search goes on after this match even when it is discarded */
        if (a->single_word) {
            uint32_t cp;
            int start_space = ms == 0 || !is_word(char_before(p, ms));
            int stop_space = me == n || (dfl__utf8_next(p, n, me, &cp), !is_word(cp));
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = ms;
            while (ns > 0) {
                uint32_t cp = char_before(p, ns);
                if (!dfl__is_whitespace(cp)) break;
                size_t q = ns - 1;
                while (q > 0 && ((unsigned char)p[q] & 0xC0) == 0x80)
                    q--;
                ns = q;
            }
            ms = ns > start_off ? ns : start_off;
        }
        if (a->rstrip) {
            while (me < n) {
                uint32_t cp;
                size_t kk = dfl__utf8_next(p, n, me, &cp);
                if (!dfl__is_whitespace(cp)) break;
                me += kk;
            }
            i = me;
        }
        dfl_status st;
        if (start_off < ms && (st = push_piece(s, sp, start_off, ms, sp->token, out, err))) return st;
        if ((st = push_piece(s, sp, ms, me, a->id, out, err))) return st;
        start_off = me;
    }
    return start_off < n ? push_piece(s, sp, start_off, n, sp->token, out, err) : DFL_OK;
}

dfl_status dfl__added_split(const dfl_tokenizer *t, int normalized, dfl__tk_store *s, dfl__tk_splits *in,
                            dfl__tk_splits *out, dfl_error *err)
{
    const dfl__tk_trie *tr = normalized ? t->trie_norm : t->trie_raw;
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        dfl__tk_split sp = in->v[i];
        if (sp.token >= 0 || tr->n == 0) {
            if (sp.token < 0 && sp.len == 0) continue;
            if (dfl__splits_push(out, sp)) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
            continue;
        }
        dfl_status st = split_one(t, tr, s, &sp, out, err);
        if (st) return st;
    }
    return DFL_OK;
}
