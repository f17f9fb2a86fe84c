/* tokenizer_bpe.c — the vocabulary, the merge table, a word cache and the BPE model
 * (Hugging Face's BPE::tokenize and Word::merge_all: byte-level or SentencePiece-style
 * with byte_fallback and fuse_unk).
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0xff51afd7ed558ccdULL);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x94d049bb133111ebULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* ------------------------------------------------------------- vocab ---- */

dfl_status dfl__vocab_init(dfl__tk_vocab *v, size_t n_ids, size_t pool_bytes, dfl_error *err)
{
    memset(v, 0, sizeof *v);
    size_t slots = 64;
    while (slots < n_ids + n_ids / 2) { /* load at most 2/3 */
        if (slots > SIZE_MAX / 64) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: vocabulary too large");
        slots *= 2;
    }
    if (pool_bytes >= UINT32_MAX) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: vocabulary too large");
    v->pool = malloc(pool_bytes ? pool_bytes : 1);
    v->ref = dfl__calloc_array(n_ids ? n_ids : 1, sizeof *v->ref);
    v->used = dfl__calloc_array(n_ids ? n_ids : 1, 1);
    v->slots = dfl__alloc_array(slots, sizeof *v->slots);
    if (!v->pool || !v->ref || !v->used || !v->slots) {
        dfl__vocab_free(v);
        return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory for the vocabulary");
    }
    for (size_t i = 0; i < slots; i++)
        v->slots[i] = (dfl__tk_slot){0, UINT32_MAX, 0, 0};
    v->n = n_ids;
    v->mask = slots - 1;
    return DFL_OK;
}

void dfl__vocab_free(dfl__tk_vocab *v)
{
    free(v->pool);
    free(v->ref);
    free(v->used);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

const char *dfl__vocab_str(const dfl__tk_vocab *v, uint32_t id, size_t *n)
{
    if (id >= v->n || !v->used[id]) return NULL;
    uint64_t r = v->ref[id];
    if (n) *n = (size_t)(r & 0xFFFFFF);
    return v->pool + (r >> 24);
}

uint64_t dfl__vocab_hash(const char *s, size_t n)
{
    return hash_bytes(s, n);
}

void dfl__vocab_prefetch(const dfl__tk_vocab *v, uint64_t h, int string_too)
{
    const dfl__tk_slot *e = &v->slots[(size_t)h & v->mask];
    if (!string_too) {
        __builtin_prefetch(e);
        return;
    }
    /* the slot is in cache by now: fetch the string a matching tag points to */
    if (e->id != UINT32_MAX && e->tag == (uint32_t)(h >> 32)) __builtin_prefetch(v->pool + e->off);
}

int64_t dfl__vocab_find(const dfl__tk_vocab *v, const char *s, size_t n)
{
    return dfl__vocab_find_h(v, s, n, hash_bytes(s, n));
}

int64_t dfl__vocab_find_h(const dfl__tk_vocab *v, const char *s, size_t n, uint64_t h)
{
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = (size_t)h & v->mask;
    for (;;) {
        const dfl__tk_slot *e = &v->slots[i];
        if (e->id == UINT32_MAX) return -1;
        if (e->tag == tag && e->len == n && !memcmp(v->pool + e->off, s, n)) return (int64_t)e->id;
        i = (i + 1) & v->mask;
    }
}

dfl_status dfl__vocab_add(dfl__tk_vocab *v, uint32_t id, const char *s, size_t n, dfl_error *err)
{
    if (id >= v->n) return dfl__fail(err, DFL_ERR_RANGE, "tokenizer: id %u out of range", id);
    if (n >= 0xFFFFFF) return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer: token %u is too long", id);
    if (v->used[id]) {
        size_t on;
        const char *o = dfl__vocab_str(v, id, &on);
        if (on == n && !memcmp(o, s, n)) return DFL_OK; /* an added token repeating the vocab */
        return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer: duplicate id %u (\"%.40s\" and \"%.40s\")", id, o, s);
    }
    int64_t have = dfl__vocab_find(v, s, n);
    memcpy(v->pool + v->pool_len, s, n);
    v->pool[v->pool_len + n] = '\0';
    v->ref[id] = ((uint64_t)v->pool_len << 24) | n;
    v->pool_len += n + 1;
    v->used[id] = 1;
    if (have >= 0) return DFL_OK; /* same text under two ids: lookups find the first */
    uint64_t h = hash_bytes(s, n);
    size_t i = (size_t)h & v->mask;
    while (v->slots[i].id != UINT32_MAX)
        i = (i + 1) & v->mask;
    v->slots[i] = (dfl__tk_slot){(uint32_t)(h >> 32), id, (uint32_t)(v->ref[id] >> 24), (uint32_t)n};
    return DFL_OK;
}

/* ------------------------------------------------------------ merges ---- */

dfl_status dfl__bpe_merges_init(dfl__tk_bpe *m, size_t n_merges, dfl_error *err)
{
    size_t slots = 64;
    while (slots < n_merges * 2) {
        if (slots > SIZE_MAX / 4) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: too many merges");
        slots *= 2;
    }
    m->merges = dfl__calloc_array(slots, 2 * sizeof *m->merges);
    if (!m->merges) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory for merges");
    m->mmask = slots - 1;
    return DFL_OK;
}

void dfl__bpe_merge_add(dfl__tk_bpe *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id)
{
    uint64_t key = (((uint64_t)a << 32) | b) + 1;
    size_t i = (size_t)hash_u64(key) & m->mmask;
    while (m->merges[2 * i] && m->merges[2 * i] != key)
        i = (i + 1) & m->mmask;
    m->merges[2 * i] = key;
    m->merges[2 * i + 1] = ((uint64_t)rank << 32) | id;
}

/* rank << 32 | id of the merge (a, b), or UINT64_MAX. */
static inline uint64_t merge_find(const dfl__tk_bpe *m, uint32_t a, uint32_t b)
{
    uint64_t key = (((uint64_t)a << 32) | b) + 1;
    size_t i = (size_t)hash_u64(key) & m->mmask;
    for (;;) {
        uint64_t k = m->merges[2 * i];
        if (k == key) return m->merges[2 * i + 1];
        if (!k) return UINT64_MAX;
        i = (i + 1) & m->mmask;
    }
}

typedef struct sym {
    uint32_t id;
    int32_t prev, next;
    uint32_t len; /* bytes of the word it covers; 0 once merged away */
} sym;

typedef struct cand {
    uint32_t rank, pos, new_id;
} cand;

typedef struct work {
    sym *syms;  /* [cap] */
    cand *heap; /* [cap] */
    size_t cap;
    char *buf; /* [bcap] scratch for symbol strings */
    size_t bcap;
} work;

/* ------------------------------------------------------------- cache ---- */

/* Words up to CACHE_WORD bytes are cached; the table is emptied when 3/4 full. */
#define CACHE_WORD  256
#define CACHE_SLOTS (1u << 18)

typedef struct centry {
    uint64_t hash; /* 0 = empty */
    uint32_t key_off, key_len;
    uint32_t tok_off, n_tok;
} centry;

struct dfl__tk_cache {
    work wk;                  /* scratch for merge_word */
    uint8_t pairs[65536 / 8]; /* bit a << 8 | b: some vocabulary string holds bytes a, b in a row */
    int pairs_ready;
    centry *slots; /* [CACHE_SLOTS] */
    size_t count;
    char *keys; /* key bytes */
    size_t keys_len, keys_cap;
    dfl__tk_tok *toks; /* token runs (ranges relative to the word) */
    size_t toks_len, toks_cap;
};

static void cache_clear(dfl__tk_cache *c)
{
    memset(c->slots, 0, CACHE_SLOTS * sizeof *c->slots);
    c->count = 0;
    c->keys_len = 0;
    c->toks_len = 0;
}

static dfl__tk_cache *cache_get(const dfl_tokenizer *t)
{
    /* created on first use: the cache is the one mutable part of a tokenizer */
    dfl__tk_bpe *m = (dfl__tk_bpe *)&t->bpe;
    if (!m->cache) {
        dfl__tk_cache *c = calloc(1, sizeof *c);
        if (!c) return NULL;
        c->slots = calloc(CACHE_SLOTS, sizeof *c->slots);
        if (!c->slots) {
            free(c);
            return NULL;
        }
        m->cache = c;
    }
    return m->cache;
}

static const centry *cache_find(const dfl__tk_cache *c, uint64_t h, const char *w, size_t n)
{
    size_t i = (size_t)h & (CACHE_SLOTS - 1);
    for (;;) {
        const centry *e = &c->slots[i];
        if (!e->hash) return NULL;
        if (e->hash == h && e->key_len == n && !memcmp(c->keys + e->key_off, w, n)) return e;
        i = (i + 1) & (CACHE_SLOTS - 1);
    }
}

static void cache_put(dfl__tk_cache *c, uint64_t h, const char *w, size_t n, const dfl__tk_tok *tk, size_t nt,
                      uint32_t base)
{
    if (c->count >= CACHE_SLOTS / 4 * 3) cache_clear(c);
    if (c->keys_len + n > c->keys_cap) {
        size_t nc = c->keys_cap ? c->keys_cap * 2 : 1 << 20;
        if (nc > UINT32_MAX) {
            cache_clear(c);
            return;
        }
        char *nk = realloc(c->keys, nc);
        if (!nk) return;
        c->keys = nk;
        c->keys_cap = nc;
    }
    if (c->toks_len + nt > c->toks_cap) {
        size_t nc = c->toks_cap ? c->toks_cap * 2 : 1 << 18, bytes;
        if (nc > UINT32_MAX || !dfl__mul_ok(nc, sizeof *c->toks, &bytes)) {
            cache_clear(c);
            return;
        }
        dfl__tk_tok *ntk = realloc(c->toks, bytes);
        if (!ntk) return;
        c->toks = ntk;
        c->toks_cap = nc;
    }
    size_t i = (size_t)h & (CACHE_SLOTS - 1);
    while (c->slots[i].hash)
        i = (i + 1) & (CACHE_SLOTS - 1);
    centry *e = &c->slots[i];
    e->hash = h;
    e->key_off = (uint32_t)c->keys_len;
    e->key_len = (uint32_t)n;
    memcpy(c->keys + c->keys_len, w, n);
    c->keys_len += n;
    e->tok_off = (uint32_t)c->toks_len;
    e->n_tok = (uint32_t)nt;
    for (size_t k = 0; k < nt; k++)
        c->toks[c->toks_len + k] = (dfl__tk_tok){tk[k].id, tk[k].s - base, tk[k].e - base};
    c->toks_len += nt;
    c->count++;
}

/* --------------------------------------------------------------- BPE ---- */

static inline int cand_less(const cand *a, const cand *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(cand *h, size_t *n, cand c)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n)
{
    cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const cand *best = &last;
        if (l < *n && cand_less(&h[l], best)) {
            m = l;
            best = &h[l];
        }
        if (r < *n && cand_less(&h[r], best)) {
            m = r;
        }
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n) h[i] = last;
    return top;
}

static int work_reserve(work *w, size_t n)
{
    if (n <= w->cap) return 0;
    size_t nc = w->cap ? w->cap : 64, b1, b2;
    while (nc < n)
        nc *= 2;
    /* at most 3 candidates per merge step are pushed: size the heap 2n plus slack */
    if (!dfl__mul_ok(nc, sizeof(sym), &b1) || !dfl__mul_ok(nc, 3 * sizeof(cand), &b2)) return -1;
    sym *ns = realloc(w->syms, b1);
    if (!ns) return -1;
    w->syms = ns;
    cand *nh = realloc(w->heap, b2);
    if (!nh) return -1;
    w->heap = nh;
    w->cap = nc;
    return 0;
}

static void merge_all(const dfl__tk_bpe *m, sym *s, size_t ns, cand *heap)
{
    size_t hn = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        uint64_t r = merge_find(m, s[i].id, s[i + 1].id);
        if (r != UINT64_MAX) heap_push(heap, &hn, (cand){(uint32_t)(r >> 32), (uint32_t)i, (uint32_t)r});
    }
    while (hn) {
        cand top = heap_pop(heap, &hn);
        sym *cur = &s[top.pos];
        if (!cur->len || cur->next < 0) continue;
        sym *right = &s[cur->next];
        uint64_t r = merge_find(m, cur->id, right->id);
        if (r == UINT64_MAX || (uint32_t)r != top.new_id) continue; /* stale entry */
        cur->id = top.new_id;
        cur->len += right->len;
        cur->next = right->next;
        right->len = 0;
        if (cur->next >= 0) s[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0) {
            sym *pv = &s[cur->prev];
            uint64_t q = merge_find(m, pv->id, cur->id);
            if (q != UINT64_MAX) heap_push(heap, &hn, (cand){(uint32_t)(q >> 32), (uint32_t)cur->prev, (uint32_t)q});
        }
        if (cur->next >= 0) {
            uint64_t q = merge_find(m, cur->id, s[cur->next].id);
            if (q != UINT64_MAX) heap_push(heap, &hn, (cand){(uint32_t)(q >> 32), top.pos, (uint32_t)q});
        }
    }
}

static int push_tok(dfl__tk_toks *out, uint32_t id, uint32_t s, uint32_t e)
{
    if (out->n == out->cap) {
        dfl__tk_tok *nv = dfl__grow_array(out->v, &out->cap, sizeof *out->v, 256);
        if (!nv) return -1;
        out->v = nv;
    }
    out->v[out->n++] = (dfl__tk_tok){id, s, e};
    return 0;
}

static void add_sym(sym *s, size_t *ns, uint32_t id, uint32_t len)
{
    size_t i = (*ns)++;
    s[i] = (sym){id, (int32_t)i - 1, -1, len};
    if (i) s[i - 1].next = (int32_t)i;
}

/* The model-space string of one word unit u[ulen]: a character, or (byte_level) ByteLevel's
 * character for the one byte u[0], with the continuing prefix / end suffix where they apply. */
static size_t unit_string(const dfl__tk_bpe *m, const char *u, size_t ulen, int byte_level, int first, int last,
                          char *buf)
{
    char ub[8];
    if (byte_level) {
        ulen = dfl__utf8_put(dfl__bytelevel_char((uint8_t)u[0]), ub);
        u = ub;
    }
    size_t k = 0;
    if (!first && m->prefix) {
        size_t pl = strlen(m->prefix);
        memcpy(buf, m->prefix, pl);
        k += pl;
    }
    memcpy(buf + k, u, ulen);
    k += ulen;
    if (last && m->suffix) {
        size_t sl = strlen(m->suffix);
        memcpy(buf + k, m->suffix, sl);
        k += sl;
    }
    return k;
}

/* ----------------------------------------------------- long words ---- */

/* A word longer than this is cut where no merge can join its two sides (as when the
 * whole text is one word: Llama 2, Gemma 3 without a splitting pre-tokenizer), so the
 * merge work arrays stay this size, not the text's. */
#define LONG_WORD (64u << 10)

static void pairs_build(const dfl_tokenizer *t, dfl__tk_cache *c)
{
    memset(c->pairs, 0, sizeof c->pairs);
    for (size_t id = 0; id < t->vocab.n; id++) {
        size_t n;
        const unsigned char *p = (const unsigned char *)dfl__vocab_str(&t->vocab, (uint32_t)id, &n);
        for (size_t i = 0; p && i + 1 < n; i++) {
            unsigned k = (unsigned)p[i] << 8 | p[i + 1];
            c->pairs[k >> 3] |= (uint8_t)(1u << (k & 7));
        }
    }
    c->pairs_ready = 1;
}

/* 1 when the word may be cut before byte i (a character boundary): BPE gives the two
 * sides the tokens it gives the whole. A merge across i would make a vocabulary string
 * holding bytes w[i-1], w[i] in a row: when none does, no merge crosses. The characters
 * on both sides must be tokens themselves (an unknown one becomes byte-fallback tokens
 * or a fused unk, whose strings are not the text's). */
static int cut_ok(const dfl_tokenizer *t, const dfl__tk_cache *c, const char *w, size_t n, size_t i)
{
    unsigned k = (unsigned)(unsigned char)w[i - 1] << 8 | (unsigned char)w[i];
    if (c->pairs[k >> 3] & (1u << (k & 7))) return 0;
    size_t a = i - 1;
    while (a > 0 && ((unsigned char)w[a] & 0xC0) == 0x80)
        a--;
    uint32_t cp;
    size_t len = dfl__utf8_next(w, n, i, &cp);
    return dfl__vocab_find(&t->vocab, w + a, i - a) >= 0 && dfl__vocab_find(&t->vocab, w + i, len) >= 0;
}

int dfl__bpe_can_cut(const dfl_tokenizer *t, const char *w, size_t n, size_t i)
{
    dfl__tk_cache *c = cache_get(t);
    if (!c) return -1;
    if (!c->pairs_ready) pairs_build(t, c);
    return cut_ok(t, c, w, n, i);
}

static dfl_status bpe_word(const dfl_tokenizer *t, const char *w, size_t n, int byte_level, uint32_t base,
                           dfl__tk_toks *out, int whole, dfl_error *err);

dfl_status dfl__bpe_word(const dfl_tokenizer *t, const char *w, size_t n, int byte_level, uint32_t base,
                         dfl__tk_toks *out, dfl_error *err)
{
    const dfl__tk_bpe *m = &t->bpe;
    /* prefix and suffix tie a unit's string to its place in the word, ByteLevel words
     * come from pre-tokenizers that keep them short: those are never cut */
    if (n <= LONG_WORD || byte_level || m->prefix || m->suffix) return bpe_word(t, w, n, byte_level, base, out, 0, err);
    dfl__tk_cache *c = cache_get(t);
    if (!c) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    if (m->ignore_merges) { /* a word that is a whole token is that token, uncut */
        int64_t id = dfl__vocab_find(&t->vocab, w, n);
        if (id >= 0 && (size_t)id < t->vocab.n && !t->is_special[id])
            return bpe_word(t, w, n, byte_level, base, out, 0, err);
    }
    if (!c->pairs_ready) pairs_build(t, c);
    size_t a = 0;
    while (a < n) {
        size_t b = a + LONG_WORD;
        /* the first safe character boundary from b on */
        while (b < n && (((unsigned char)w[b] & 0xC0) == 0x80 || !cut_ok(t, c, w, n, b)))
            b++;
        if (b > n) b = n;
        dfl_status st = bpe_word(t, w + a, b - a, byte_level, base + (uint32_t)a, out, 1, err);
        if (st) return st;
        a = b;
    }
    return DFL_OK;
}

/* BPE on w[n]; whole: w is a piece of a longer word cut by dfl__bpe_word (no
 * ignore_merges lookup: the word as a whole was looked up). */
static dfl_status bpe_word(const dfl_tokenizer *t, const char *w, size_t n, int byte_level, uint32_t base,
                           dfl__tk_toks *out, int whole, dfl_error *err)
{
    const dfl__tk_bpe *m = &t->bpe;
    if (!n) return DFL_OK;
    dfl__tk_cache *cc = cache_get(t);
    if (!cc) goto oom;
    dfl__tk_cache *c = n <= CACHE_WORD ? cc : NULL;
    uint64_t h = 0;
    if (c) {
        h = hash_bytes(w, n) ^ (uint64_t)byte_level;
        if (!h) h = 1;
        const centry *e = cache_find(c, h, w, n);
        if (e) {
            for (uint32_t k = 0; k < e->n_tok; k++) {
                const dfl__tk_tok *tk = &c->toks[e->tok_off + k];
                if (push_tok(out, tk->id, tk->s + base, tk->e + base)) goto oom;
            }
            return DFL_OK;
        }
    }
    size_t first_out = out->n;
    work *wk = &cc->wk;
    size_t plen = m->prefix ? strlen(m->prefix) : 0, slen = m->suffix ? strlen(m->suffix) : 0;
    size_t need = plen + slen + 8;
    if (wk->bcap < need || (m->ignore_merges && wk->bcap < 2 * n + 8)) {
        size_t nb = need > 2 * n + 8 ? need : 2 * n + 8;
        char *b = realloc(wk->buf, nb);
        if (!b) goto oom;
        wk->buf = b;
        wk->bcap = nb;
    }
    /* ignore_merges: a word that is a whole token is that token */
    if (m->ignore_merges && !whole) {
        size_t k = 0;
        if (byte_level) {
            for (size_t i = 0; i < n; i++)
                k += dfl__utf8_put(dfl__bytelevel_char((uint8_t)w[i]), wk->buf + k);
        } else {
            memcpy(wk->buf, w, n);
            k = n;
        }
        int64_t id = dfl__vocab_find(&t->vocab, wk->buf, k);
        if (id >= 0 && (size_t)id < t->vocab.n && !t->is_special[id]) {
            if (push_tok(out, (uint32_t)id, base, base + (uint32_t)n)) goto oom;
            goto done;
        }
    }
    if (work_reserve(wk, n + 1)) goto oom;
    size_t ns = 0;
    int64_t unk_id = -1;
    uint32_t unk_len = 0;
    int have_unk = 0;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t ulen = byte_level ? 1 : dfl__utf8_next(w, n, i, &cp);
        int first = i == 0, last = i + ulen >= n;
        int64_t id;
        if (byte_level && !m->prefix && !m->suffix) {
            id = m->bl_id[(uint8_t)w[i]] ? (int64_t)m->bl_id[(uint8_t)w[i]] - 1 : -1;
        } else {
            size_t k = unit_string(m, w + i, ulen, byte_level, first, last, wk->buf);
            id = dfl__vocab_find(&t->vocab, wk->buf, k);
        }
        if (id >= 0) {
            if (have_unk) {
                add_sym(wk->syms, &ns, (uint32_t)unk_id, unk_len);
                have_unk = 0;
            }
            add_sym(wk->syms, &ns, (uint32_t)id, (uint32_t)ulen);
        } else {
            int done_fb = 0;
            if (m->byte_fallback) {
                /* each byte as <0xNN>, all or nothing (the unit includes prefix/suffix) */
                size_t k = unit_string(m, w + i, ulen, byte_level, first, last, wk->buf);
                int all = 1;
                for (size_t b = 0; b < k; b++)
                    if (!m->byte_id[(uint8_t)wk->buf[b]]) all = 0;
                if (all) {
                    if (work_reserve(wk, ns + k + n - i + 1)) goto oom;
                    for (size_t b = 0; b < k; b++)
                        add_sym(wk->syms, &ns, m->byte_id[(uint8_t)wk->buf[b]] - 1, 1);
                    done_fb = 1;
                }
            }
            if (!done_fb && m->unk >= 0) {
                if (have_unk && m->fuse_unk) {
                    unk_len += (uint32_t)ulen;
                } else {
                    if (have_unk) add_sym(wk->syms, &ns, (uint32_t)unk_id, unk_len);
                    have_unk = 1;
                    unk_id = m->unk;
                    unk_len = (uint32_t)ulen;
                }
            }
        }
        i += ulen;
    }
    if (have_unk) add_sym(wk->syms, &ns, (uint32_t)unk_id, unk_len);
    merge_all(m, wk->syms, ns, wk->heap);
    uint32_t pos = base;
    for (size_t k = 0; k < ns; k++) {
        if (!wk->syms[k].len) continue;
        if (push_tok(out, wk->syms[k].id, pos, pos + wk->syms[k].len)) goto oom;
        pos += wk->syms[k].len;
    }
done:
    if (c) cache_put(c, h, w, n, out->v + first_out, out->n - first_out, base);
    return DFL_OK;
oom:
    return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
}

void dfl__bpe_free(dfl__tk_bpe *m)
{
    free(m->merges);
    free(m->prefix);
    free(m->suffix);
    if (m->cache) {
        free(m->cache->slots);
        free(m->cache->keys);
        free(m->cache->toks);
        free(m->cache->wk.syms);
        free(m->cache->wk.heap);
        free(m->cache->wk.buf);
        free(m->cache);
    }
    memset(m, 0, sizeof *m);
}
