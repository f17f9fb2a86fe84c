/* tokenizer_pretok.c — pre-tokenizers: Sequence, Split (PCRE2), ByteLevel, Metaspace,
 * Digits, Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer.
 *
 * Each turns one piece into (range, is_match) events, as Hugging Face's
 * Pattern::find_matches does, and a split behaviour decides which ranges become
 * pieces (NormalizedString::split) as the events come. Empty pieces are dropped.
 * Pieces go on depth first, one at a time, through the rest of a Sequence to the
 * caller's function: a 4 MB text never becomes a list of a million pieces.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

/* Where the events of one piece go: a split behaviour applied as they come (Hugging
 * Face's NormalizedString::split), the pieces it keeps handed to fn at once, so no
 * list of events or pieces is ever built. */
typedef struct bsink {
    int behavior, invert;
    int has;       /* a piece [ps, pe) is held back (it may still grow) */
    size_t ps, pe; /* bytes in the piece being split */
    int prev;      /* the previous event was a match */
    dfl__tk_store *s;
    dfl__tk_split base; /* the piece being split */
    dfl__tk_piece_fn fn;
    void *ctx;
    dfl_error *err;
} bsink;

/* Bytes [a, e) of the piece being split as a piece of its own (dropped when empty). */
static dfl_status out_piece(bsink *k, size_t a, size_t e)
{
    if (e <= a) return DFL_OK;
    dfl__tk_split n = k->base;
    n.off = k->base.off + a;
    n.len = e - a;
    n.orig_s = dfl__store_al(k->s, n.off).s;
    return k->fn(k->ctx, k->s, n, k->err);
}

/* One event [a, e), m: a match. */
static dfl_status feed(bsink *k, size_t a, size_t e, int m)
{
    if (k->invert) m = !m;
    dfl_status r = DFL_OK;
    switch (k->behavior) {
    case DFL__B_REMOVED: return m ? DFL_OK : out_piece(k, a, e); /* matches are removed */
    case DFL__B_ISOLATED: return out_piece(k, a, e);
    case DFL__B_CONTIGUOUS:
    case DFL__B_MERGED_PREV: {
        /* contiguous: a piece joins the one before when both match or both do not;
         * merged with previous: a match joins the non-match before it */
        int join = k->behavior == DFL__B_CONTIGUOUS ? m == k->prev : m && !k->prev;
        k->prev = m;
        if (join && k->has) {
            k->pe = e;
            return DFL_OK;
        }
        if (k->has) r = out_piece(k, k->ps, k->pe);
        k->has = 1, k->ps = a, k->pe = e;
        return r;
    }
    case DFL__B_MERGED_NEXT:
        /* a match joins the non-match after it (the piece held back is a match) */
        if (k->has) {
            if (!m) {
                k->has = 0;
                return out_piece(k, k->ps, e);
            }
            r = out_piece(k, k->ps, k->pe);
            k->ps = a, k->pe = e;
            return r;
        }
        if (!m) return out_piece(k, a, e);
        k->has = 1, k->ps = a, k->pe = e;
        return DFL_OK;
    }
    return DFL_OK;
}

/* The end of the events: the piece held back goes out. */
static dfl_status feed_end(bsink *k)
{
    if (!k->has) return DFL_OK;
    k->has = 0;
    return out_piece(k, k->ps, k->pe);
}

/* The gap [prev, ms) before a match (when not empty), then the match [ms, me). */
static dfl_status feed_match(bsink *k, size_t prev, size_t ms, size_t me)
{
    dfl_status r = prev != ms ? feed(k, prev, ms, 0) : DFL_OK;
    return r ? r : feed(k, ms, me, 1);
}

static dfl_status nomem(dfl_error *err)
{
    return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
}

/* Matches of a regex over the piece (HF's Pattern for Regex). The piece's bytes are
 * looked up again after every event: what fn appends may move the store. */
static dfl_status find_regex(const pcre2_code *re, bsink *k)
{
    size_t n = k->base.len;
    if (!n) return feed(k, 0, 0, 0);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) return nomem(k->err);
    size_t prev = 0, pos = 0;
    long last_end = -1;
    dfl_status st = DFL_OK;
    while (pos <= n && !st) {
        size_t ms, me;
        int rc = dfl__re_find(re, md, dfl__store_at(k->s, k->base.off), n, pos, &ms, &me);
        if (rc < 0) {
            st = dfl__fail(k->err, DFL_ERR_RANGE, "tokenizer: regex match failed (Split)");
            break;
        }
        if (rc == 0) break;
        if (ms == me) {
            /* an empty match: kept unless it touches the previous match, then step one char */
            if ((long)me != last_end) {
                st = feed_match(k, prev, ms, me);
                prev = me;
            }
            last_end = (long)me;
            if (ms >= n) break;
            uint32_t cp;
            pos = ms + dfl__utf8_next(dfl__store_at(k->s, k->base.off), n, ms, &cp);
            continue;
        }
        st = feed_match(k, prev, ms, me);
        prev = pos = me;
        last_end = (long)me;
    }
    pcre2_match_data_free(md);
    if (st) return st;
    return prev != n ? feed(k, prev, n, 0) : DFL_OK;
}

/* Matches of a character predicate: every matching character is its own match. */
static dfl_status find_pred(int (*pred)(uint32_t, uint32_t), uint32_t arg, bsink *k)
{
    size_t n = k->base.len;
    if (!n) return feed(k, 0, 0, 0);
    size_t last = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = dfl__utf8_next(dfl__store_at(k->s, k->base.off), n, i, &cp);
        if (pred(cp, arg)) {
            dfl_status r = feed_match(k, last, i, i + len);
            if (r) return r;
            last = i + len;
        }
        i += len;
    }
    return n > last ? feed(k, last, n, 0) : DFL_OK;
}

/* Matches of the Whitespace pre-tokenizer's \w+|[^\w\s]+ as the regex crate finds them
 * (leftmost-first: a run of word characters, or a run of characters neither word nor
 * White_Space), with its Unicode 16.0.0 \w and \s; by hand, since PCRE2 is given
 * Oniguruma's classes and those differ (Join_Control is \w only here). */
static dfl_status find_words(bsink *k)
{
    size_t n = k->base.len;
    if (!n) return feed(k, 0, 0, 0);
    size_t prev = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = dfl__utf8_next(dfl__store_at(k->s, k->base.off), n, i, &cp);
        int word = dfl__is_word(cp);
        if (!word && dfl__uc_white_space(cp)) {
            i += len;
            continue;
        }
        size_t e = i + len;
        while (e < n) {
            size_t len2 = dfl__utf8_next(dfl__store_at(k->s, k->base.off), n, e, &cp);
            int w2 = dfl__is_word(cp);
            if (w2 != word || (!w2 && dfl__uc_white_space(cp))) break;
            e += len2;
        }
        dfl_status r = feed_match(k, prev, i, e);
        if (r) return r;
        prev = i = e;
    }
    return prev != n ? feed(k, prev, n, 0) : DFL_OK;
}

static int pred_numeric(uint32_t cp, uint32_t arg)
{
    (void)arg;
    return dfl__is_numeric(cp);
}
static int pred_punct(uint32_t cp, uint32_t arg)
{
    (void)arg;
    return dfl__is_punct(cp);
}
static int pred_space(uint32_t cp, uint32_t arg)
{
    (void)arg;
    return dfl__is_whitespace(cp);
}
static int pred_equal(uint32_t cp, uint32_t arg)
{
    return cp == arg;
}

/* Split sp by a predicate or regex under a behaviour, the kept pieces to fn. */
static dfl_status split_by(const pcre2_code *re, int (*pred)(uint32_t, uint32_t), uint32_t arg, int behavior,
                           int invert, dfl__tk_store *s, dfl__tk_split sp, dfl__tk_piece_fn fn, void *ctx,
                           dfl_error *err)
{
    bsink k = {.behavior = behavior, .invert = invert, .s = s, .base = sp, .fn = fn, .ctx = ctx, .err = err};
    dfl_status r = re ? find_regex(re, &k) : find_pred(pred, arg, &k);
    return r ? r : feed_end(&k);
}

/* BertPreTokenizer's second split: each piece left by the whitespace split is cut on
 * punctuation (isolated), the pieces on to the caller's function. */
typedef struct bert_rest {
    dfl__tk_piece_fn fn;
    void *ctx;
} bert_rest;

static dfl_status bert_punct(void *ctx, dfl__tk_store *s, dfl__tk_split sp, dfl_error *err)
{
    const bert_rest *q = ctx;
    return split_by(NULL, pred_punct, 0, DFL__B_ISOLATED, 0, s, sp, q->fn, q->ctx, err);
}

static dfl_status pretok_one(const dfl__tk_step *st, dfl__tk_store *s, dfl__tk_split sp, dfl__tk_piece_fn fn, void *ctx,
                             dfl_error *err)
{
    dfl_status r;
    switch (st->kind) {
    case DFL__P_SPLIT: return split_by(st->re, NULL, 0, st->behavior, st->invert, s, sp, fn, ctx, err);
    case DFL__P_WHITESPACE: { /* the matches are kept, what lies between them removed */
        bsink k = {.behavior = DFL__B_REMOVED, .invert = 1, .s = s, .base = sp, .fn = fn, .ctx = ctx, .err = err};
        r = find_words(&k);
        return r ? r : feed_end(&k);
    }
    case DFL__P_BERT: {
        /* split on whitespace (removed), then each piece on punctuation (isolated) */
        bert_rest q = {fn, ctx};
        return split_by(NULL, pred_space, 0, DFL__B_REMOVED, 0, s, sp, bert_punct, &q, err);
    }
    case DFL__P_DIGITS:
        return split_by(NULL, pred_numeric, 0, st->individual ? DFL__B_ISOLATED : DFL__B_CONTIGUOUS, 0, s, sp, fn, ctx,
                        err);
    case DFL__P_PUNCTUATION: return split_by(NULL, pred_punct, 0, st->behavior, 0, s, sp, fn, ctx, err);
    case DFL__P_WHITESPACE_SPLIT: return split_by(NULL, pred_space, 0, DFL__B_REMOVED, 0, s, sp, fn, ctx, err);
    case DFL__P_BYTELEVEL:
        if (st->prefix_space && sp.len && *dfl__store_at(s, sp.off) != ' ' && dfl__norm_prepend(" ", 1, s, &sp))
            return nomem(err);
        sp.byte_level = 1;
        if (st->use_regex) return split_by(st->re, NULL, 0, DFL__B_ISOLATED, 0, s, sp, fn, ctx, err);
        if (!sp.len) return DFL_OK;
        return fn(ctx, s, sp, err);
    case DFL__P_METASPACE: {
        r = dfl__norm_replace(st->re, st->pat, st->pat_len, s, &sp, err);
        if (r) return r;
        int starts = sp.len >= st->pat_len && !memcmp(dfl__store_at(s, sp.off), st->pat, st->pat_len);
        if (!starts &&
            (st->prepend_scheme == DFL__PS_ALWAYS || (st->prepend_scheme == DFL__PS_FIRST && sp.orig_s == 0)))
            if (dfl__norm_prepend(st->pat, st->pat_len, s, &sp)) return nomem(err);
        if (!st->split) {
            if (!sp.len) return DFL_OK;
            return fn(ctx, s, sp, err);
        }
        uint32_t cp;
        dfl__utf8_next(st->pat, st->pat_len, 0, &cp);
        return split_by(NULL, pred_equal, cp, DFL__B_MERGED_NEXT, 0, s, sp, fn, ctx, err);
    }
    default: return dfl__fail(err, DFL_ERR_CONFIG, "tokenizer: unknown pre-tokenizer %d", st->kind);
    }
}

/* The rest of a Sequence: kids[n] applied in turn to every piece, depth first. */
typedef struct seq_rest {
    const dfl__tk_step *kids;
    size_t n;
    dfl__tk_piece_fn fn;
    void *ctx;
} seq_rest;

static dfl_status seq_run(const dfl__tk_step *kids, size_t n, dfl__tk_store *s, dfl__tk_split sp, dfl__tk_piece_fn fn,
                          void *ctx, dfl_error *err);

static dfl_status seq_next(void *ctx, dfl__tk_store *s, dfl__tk_split sp, dfl_error *err)
{
    const seq_rest *q = ctx;
    return seq_run(q->kids, q->n, s, sp, q->fn, q->ctx, err);
}

static dfl_status seq_run(const dfl__tk_step *kids, size_t n, dfl__tk_store *s, dfl__tk_split sp, dfl__tk_piece_fn fn,
                          void *ctx, dfl_error *err)
{
    if (!n) return fn(ctx, s, sp, err);
    seq_rest q = {kids + 1, n - 1, fn, ctx};
    return dfl__pretokenize_each(&kids[0], s, sp, seq_next, &q, err);
}

dfl_status dfl__pretokenize_each(const dfl__tk_step *st, dfl__tk_store *s, dfl__tk_split sp, dfl__tk_piece_fn fn,
                                 void *ctx, dfl_error *err)
{
    if (st->kind == DFL__P_SEQUENCE) return seq_run(st->kids, st->n_kids, s, sp, fn, ctx, err);
    if (sp.token >= 0) return fn(ctx, s, sp, err);
    if (sp.byte_level)
        return dfl__fail(err, DFL_ERR_CONFIG, "tokenizer: pre-tokenizers after ByteLevel are not supported");
    /* what this step appends (ByteLevel's prefix space, Metaspace's copy) serves only
     * the pieces cut from sp, all handed on by now: the store shrinks back */
    size_t mark = s->len;
    dfl_status r = pretok_one(st, s, sp, fn, ctx, err);
    dfl__store_truncate(s, mark);
    return r;
}
