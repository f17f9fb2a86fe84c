/* tokenizer.c — the encode pipeline (Hugging Face's Tokenizer::encode_char_offsets):
 * added tokens on the original text, the normalizer, added tokens on normalized text,
 * the pre-tokenizer, the model, the post-processor, then byte offsets → code points.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

/* ---------------------------------------------------------- ByteLevel ---- */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 * others are shifted to 256 + k in byte order. */
uint32_t dfl__bytelevel_char(uint8_t b)
{
    /* the shifted bytes are 0-32 (33 of them), 127-160 (34) and 173, in that order */
    if (b <= 32) return 256u + b;
    if (b >= 127 && b <= 160) return 256u + 33u + (uint32_t)(b - 127);
    if (b == 173) return 256u + 67u;
    return b;
}

int dfl__bytelevel_byte(uint32_t cp)
{
    if (cp < 256) {
        int keep = (cp >= '!' && cp <= '~') || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE);
        return keep ? (int)cp : -1;
    }
    uint32_t k = cp - 256;
    if (k <= 32) return (int)k;
    if (k <= 66) return (int)(127 + k - 33);
    if (k == 67) return 173;
    return -1;
}

/* ------------------------------------------------------------- output ---- */

typedef struct outtok {
    uint32_t id, s, e; /* byte offsets in the original */
    uint8_t special;
} outtok;

typedef struct outv {
    outtok *v;
    size_t n, cap;
} outv;

static int out_push(outv *o, outtok t)
{
    if (o->n == o->cap) {
        outtok *nv = dfl__grow_array(o->v, &o->cap, sizeof *o->v, 256);
        if (!nv) return -1;
        o->v = nv;
    }
    o->v[o->n++] = t;
    return 0;
}

/* ByteLevel post-processor with trim_offsets on one token: leading/trailing spaces (Ġ
 * or white space) leave its offsets, except a first token's single prefix space. first:
 * the token is the sequence's first. */
static void post_bytelevel_one(const dfl_tokenizer *t, const dfl__tk_step *st, int first, outtok *o)
{
    if (!st->trim_offsets) return;
    size_t n;
    const char *p = dfl__vocab_str(&t->vocab, o->id, &n);
    if (!p) return;
    size_t lead = 0, trail = 0, j = 0, chars = 0;
    int in_lead = 1;
    while (j < n) {
        uint32_t cp;
        j += dfl__utf8_next(p, n, j, &cp);
        chars++;
        int sp = cp == 0x120 || dfl__is_whitespace(cp);
        if (in_lead && sp)
            lead++;
        else
            in_lead = 0;
        trail = sp ? trail + 1 : 0;
    }
    if (lead == chars) trail = chars; /* all spaces: both counts are the whole token */
    uint32_t s = o->s, e = o->e;
    if (lead > 0) {
        if ((first || s == 0) && st->prefix_space && lead == 1) lead = 0;
        s = s + lead < e ? s + (uint32_t)lead : e;
    }
    if (trail > 0 && e >= trail) e = e - trail > s ? e - (uint32_t)trail : s;
    o->s = s;
    o->e = e;
}

static void post_bytelevel(const dfl_tokenizer *t, const dfl__tk_step *st, outv *o)
{
    for (size_t i = 0; i < o->n; i++)
        post_bytelevel_one(t, st, i == 0, &o->v[i]);
}

static dfl_status post_process(const dfl_tokenizer *t, const dfl__tk_step *st, int add_special, outv *o, dfl_error *err)
{
    switch (st->kind) {
    case DFL__PP_SEQUENCE:
        for (size_t i = 0; i < st->n_kids; i++) {
            dfl_status r = post_process(t, &st->kids[i], add_special, o, err);
            if (r) return r;
        }
        return DFL_OK;
    case DFL__PP_BYTELEVEL: post_bytelevel(t, st, o); return DFL_OK;
    case DFL__PP_TEMPLATE: {
        if (!add_special) return DFL_OK;
        outv r = {0};
        for (size_t i = 0; i < st->n_tmpl; i++) {
            if (st->tmpl[i].is_seq) {
                for (size_t k = 0; k < o->n; k++)
                    if (out_push(&r, o->v[k])) goto oom;
            } else {
                for (size_t k = 0; k < st->tmpl[i].n_ids; k++)
                    if (out_push(&r, (outtok){st->tmpl[i].ids[k], 0, 0, 1})) goto oom;
            }
        }
        free(o->v);
        *o = r;
        return DFL_OK;
    oom:
        free(r.v);
        return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    }
    default: return dfl__fail(err, DFL_ERR_CONFIG, "tokenizer: unknown post-processor %d", st->kind);
    }
}

/* ------------------------------------------------------------- encode ---- */

/* One encode call from the model on: tokens pass one at a time through the
 * post-processor (when it can take them so: ByteLevel and TemplateProcessing with one
 * $A, in Sequences) and the byte → code point conversion to the caller; no array of
 * the text's tokens is built. Other post-processors get the tokens gathered first. */
#define CHAIN_MAX 32

typedef struct run {
    const dfl_tokenizer *t;
    const char *text;
    size_t len;
    uint32_t nchars;
    int add_special;
    const dfl__tk_step *chain[CHAIN_MAX]; /* [n_chain] the post-processor's steps, flattened */
    size_t seen[CHAIN_MAX];               /* tokens each step has passed so far */
    size_t n_chain;
    int gather; /* 1: the post-processor needs the whole sequence (o below) */
    outv o;
    size_t cur_b, cur_lead; /* the conversion's cursor: lead bytes in text[0, cur_b) */
    dfl__tk_toks toks;      /* one word's tokens */
    dfl_token_fn fn;
    void *ctx;
} run;

/* Flatten the post-processor into r->chain; 0 when it cannot run token by token. */
static int chain_build(run *r, const dfl__tk_step *st)
{
    if (st->kind == DFL__PP_SEQUENCE) {
        for (size_t i = 0; i < st->n_kids; i++)
            if (!chain_build(r, &st->kids[i])) return 0;
        return 1;
    }
    if (st->kind == DFL__PP_TEMPLATE && r->add_special) {
        size_t seqs = 0;
        for (size_t i = 0; i < st->n_tmpl; i++)
            seqs += st->tmpl[i].is_seq != 0;
        if (seqs != 1) return 0;
    } else if (st->kind != DFL__PP_BYTELEVEL && st->kind != DFL__PP_TEMPLATE) {
        return 0;
    }
    if (r->n_chain == CHAIN_MAX) return 0;
    r->chain[r->n_chain++] = st;
    return 1;
}

/* Hugging Face's BytesToCharOffsetConverter for one byte offset: the index of the
 * character holding byte b (the character count at or past the end). Offsets come
 * nearly in order, so a cursor walks from the last one. */
static uint32_t char_at(run *r, size_t b)
{
    if (b >= r->len) return r->nchars;
    if (b == 0) return 0;
    const unsigned char *p = (const unsigned char *)r->text;
    size_t lead = r->cur_lead;
    for (size_t i = r->cur_b; i < b; i++)
        lead += (p[i] & 0xC0) != 0x80;
    for (size_t i = b; i < r->cur_b; i++)
        lead -= (p[i] & 0xC0) != 0x80;
    r->cur_b = b;
    r->cur_lead = lead;
    return (uint32_t)((p[b] & 0xC0) == 0x80 ? lead - 1 : lead);
}

static dfl_status deliver(run *r, outtok o, dfl_error *err)
{
    uint32_t s, e;
    if (o.s == o.e) { /* empty: kept as is, as the reference does for (0, 0) */
        s = e = char_at(r, o.s);
    } else {
        s = char_at(r, o.s);
        e = char_at(r, o.e);
    }
    return r->fn(r->ctx, o.id, s, e, o.special, err);
}

/* A token entering the post-processor's chain at step k. */
static dfl_status post_from(run *r, size_t k, outtok o, dfl_error *err)
{
    for (; k < r->n_chain; k++)
        if (r->chain[k]->kind == DFL__PP_BYTELEVEL) post_bytelevel_one(r->t, r->chain[k], r->seen[k]++ == 0, &o);
    return deliver(r, o, err);
}

/* The special tokens template step k puts before (before = 1) or after $A. */
static dfl_status template_ends(run *r, size_t k, int before, dfl_error *err)
{
    const dfl__tk_step *st = r->chain[k];
    size_t i = 0, n = st->n_tmpl;
    while (i < n && !st->tmpl[i].is_seq)
        i++;
    size_t from = before ? 0 : i + 1, to = before ? i : n;
    for (size_t j = from; j < to; j++)
        for (size_t q = 0; q < st->tmpl[j].n_ids; q++) {
            dfl_status x = post_from(r, k + 1, (outtok){st->tmpl[j].ids[q], 0, 0, 1}, err);
            if (x) return x;
        }
    return DFL_OK;
}

/* A token from the model (or an added token). */
static dfl_status model_out(run *r, outtok o, dfl_error *err)
{
    if (r->gather) return out_push(&r->o, o) ? dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory") : DFL_OK;
    return post_from(r, 0, o, err);
}

/* A pre-tokenized piece: an added token, or a word for the model. */
static dfl_status model_piece(void *ctx, dfl__tk_store *s, dfl__tk_split sp, dfl_error *err)
{
    run *r = ctx;
    if (!sp.len && sp.token < 0) return DFL_OK;
    if (sp.token >= 0) {
        uint32_t os = sp.len ? dfl__store_al(s, sp.off).s : sp.orig_s,
                 oe = sp.len ? dfl__store_al(s, sp.off + sp.len - 1).e : sp.orig_s;
        return model_out(r, (outtok){(uint32_t)sp.token, os, oe, r->t->is_special[sp.token]}, err);
    }
    r->toks.n = 0;
    dfl_status st = dfl__bpe_word(r->t, dfl__store_at(s, sp.off), sp.len, sp.byte_level, 0, &r->toks, err);
    for (size_t k = 0; k < r->toks.n && !st; k++) {
        const dfl__tk_tok *tk = &r->toks.v[k];
        st = model_out(
            r, (outtok){tk->id, dfl__store_al(s, sp.off + tk->s).s, dfl__store_al(s, sp.off + tk->e - 1).e, 0}, err);
    }
    return st;
}

/* A normalized piece: 2. added tokens that match normalized text, 3. the
 * pre-tokenizer and 4. the model (tmp: a list to reuse). */
static dfl_status after_norm(run *r, dfl__tk_store *s, dfl__tk_split sp, dfl__tk_splits *tmp, dfl_error *err)
{
    dfl__tk_splits one = {&sp, 1, 1};
    dfl_status st = dfl__added_split(r->t, 1, s, &one, tmp, err);
    for (size_t i = 0; i < tmp->n && !st; i++)
        st = r->t->pretok ? dfl__pretokenize_each(r->t->pretok, s, tmp->v[i], model_piece, r, err)
                          : model_piece(r, s, tmp->v[i], err);
    return st;
}

dfl_status dfl_tokenizer_encode_each(dfl_tokenizer *t, const char *text, size_t len, int add_special, dfl_token_fn fn,
                                     void *ctx, dfl_error *err)
{
    size_t bad_at = dfl__utf8_check(text, len);
    if (bad_at != len) return dfl__fail(err, DFL_ERR_FORMAT, "invalid UTF-8 at byte %zu", bad_at);
    if (len >= UINT32_MAX) return dfl__fail(err, DFL_ERR_RANGE, "text of %zu bytes is too long (4 GB at most)", len);

    /* the original text is the store's first part, not copied */
    dfl__tk_store s = {.orig = text, .orig_len = len, .len = len};
    dfl__tk_splits a = {0}, b = {0};
    run r = {.t = t, .text = text, .len = len, .add_special = add_special, .fn = fn, .ctx = ctx};
    for (size_t i = 0; i < len; i++)
        r.nchars += ((unsigned char)text[i] & 0xC0) != 0x80;
    r.gather = t->post && !chain_build(&r, t->post);
    dfl_status st = DFL_OK;
    if (dfl__splits_push(&a, (dfl__tk_split){0, len, -1, 0, 0})) goto oom;

    /* 1. added tokens that match the original text */
    st = dfl__added_split(t, 0, &s, &a, &b, err);
    if (st) goto done;
    /* the template's tokens before $A, in the order the steps put them in front */
    if (!r.gather)
        for (size_t k = r.n_chain; k-- > 0 && !st;)
            if (r.chain[k]->kind == DFL__PP_TEMPLATE && add_special) st = template_ends(&r, k, 1, err);
    /* 2.-4. each piece (a window at a time when it is long) through the rest */
    for (size_t i = 0; i < b.n && !st; i++) {
        dfl__tk_split sp = b.v[i];
        if (sp.token >= 0 || !t->normalizer) {
            st = after_norm(&r, &s, sp, &a, err);
            continue;
        }
        int prepend = 1;
        size_t from = sp.off, end = sp.off + sp.len;
        do { /* once for a short piece, an empty one too */
            size_t to = dfl__window_end(t, text, from, end);
            dfl__tk_split w = sp;
            if (to != end || from != sp.off) w = (dfl__tk_split){from, to - from, -1, 0, (uint32_t)from};
            st = dfl__normalize(t->normalizer, &s, &w, w.len == sp.len ? NULL : &prepend, err);
            if (!st) st = after_norm(&r, &s, w, &a, err);
            dfl__store_truncate(&s, len); /* the window's normalized bytes are done with */
            from = to;
        } while (from < end && !st);
    }
    if (st) goto done;
    /* 5. post-process what had to be gathered; the template's tokens after $A */
    if (r.gather) {
        st = post_process(t, t->post, add_special, &r.o, err);
        for (size_t i = 0; i < r.o.n && !st; i++)
            st = deliver(&r, r.o.v[i], err);
    } else {
        for (size_t k = 0; k < r.n_chain && !st; k++)
            if (r.chain[k]->kind == DFL__PP_TEMPLATE && add_special) st = template_ends(&r, k, 0, err);
    }
    goto done;
oom:
    st = dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
done:
    dfl__store_free(&s);
    free(a.v);
    free(b.v);
    free(r.toks.v);
    free(r.o.v);
    return st;
}

void dfl_encoding_free(dfl_encoding *enc)
{
    if (!enc) return;
    free(enc->ids);
    free(enc->start);
    free(enc->end);
    free(enc->special);
    memset(enc, 0, sizeof *enc);
}

/* dfl_tokenizer_encode's collector: the arrays grow geometrically. */
typedef struct collect {
    dfl_encoding *e;
    size_t cap;
} collect;

static dfl_status collect_one(void *ctx, uint32_t id, uint32_t start, uint32_t end, int special, dfl_error *err)
{
    collect *c = ctx;
    dfl_encoding *e = c->e;
    if (e->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 256, b4, b1 = nc;
        if (!dfl__mul_ok(nc, sizeof(uint32_t), &b4)) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        uint32_t *ni = realloc(e->ids, b4);
        if (ni) e->ids = ni;
        uint32_t *ns = ni ? realloc(e->start, b4) : NULL;
        if (ns) e->start = ns;
        uint32_t *ne = ns ? realloc(e->end, b4) : NULL;
        if (ne) e->end = ne;
        uint8_t *nsp = ne ? realloc(e->special, b1) : NULL;
        if (!nsp) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        e->special = nsp;
        c->cap = nc;
    }
    e->ids[e->n] = id;
    e->start[e->n] = start;
    e->end[e->n] = end;
    e->special[e->n] = (uint8_t)special;
    e->n++;
    return DFL_OK;
}

dfl_status dfl_tokenizer_encode(dfl_tokenizer *t, const char *text, size_t len, int add_special, dfl_encoding *enc,
                                dfl_error *err)
{
    memset(enc, 0, sizeof *enc);
    collect c = {enc, 0};
    dfl_status st = dfl_tokenizer_encode_each(t, text, len, add_special, collect_one, &c, err);
    /* no tokens: still arrays (of one), as callers index them */
    if (!st && !c.cap) {
        enc->ids = malloc(sizeof *enc->ids);
        enc->start = malloc(sizeof *enc->start);
        enc->end = malloc(sizeof *enc->end);
        enc->special = malloc(1);
        if (!enc->ids || !enc->start || !enc->end || !enc->special)
            st = dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    }
    if (st) dfl_encoding_free(enc);
    return st;
}

size_t dfl_tokenizer_vocab_size(const dfl_tokenizer *t)
{
    return t->vocab.n;
}

const char *dfl_tokenizer_piece(const dfl_tokenizer *t, uint32_t id, size_t *len)
{
    return dfl__vocab_str(&t->vocab, id, len);
}

int64_t dfl_tokenizer_find(const dfl_tokenizer *t, const char *s, size_t len)
{
    return dfl__vocab_find(&t->vocab, s, len);
}
