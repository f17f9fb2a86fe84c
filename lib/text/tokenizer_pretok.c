/* tokenizer_pretok.c — pre-tokenizers: Sequence, Split (PCRE2), ByteLevel, Metaspace,
 * Digits, Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer.
 *
 * Each turns one piece into a list of (range, is_match) events, as Hugging Face's
 * Pattern::find_matches does, then a split behaviour decides which ranges become
 * pieces (NormalizedString::split). Empty pieces are dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

typedef struct ev {
    size_t s, e;
    int m; /* is a match (or, after the behaviour, "remove") */
} ev;

typedef struct evs {
    ev *v;
    size_t n, cap;
} evs;

static int ev_push(evs *l, size_t s, size_t e, int m)
{
    if (l->n == l->cap) {
        ev *nv = dfl__grow_array(l->v, &l->cap, sizeof *l->v, 64);
        if (!nv) return -1;
        l->v = nv;
    }
    l->v[l->n++] = (ev){s, e, m};
    return 0;
}

/* The gap [prev, ms) before a match (when not empty), then the match [ms, me). */
static int push_match(evs *l, size_t prev, size_t ms, size_t me)
{
    if (prev != ms && ev_push(l, prev, ms, 0)) return -1;
    return ev_push(l, ms, me, 1);
}

static dfl_status nomem(dfl_error *err)
{
    return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
}

/* Matches of a regex over p[n] (HF's Pattern for Regex). */
static dfl_status find_regex(const pcre2_code *re, const char *p, size_t n, evs *out, dfl_error *err)
{
    out->n = 0;
    if (!n) return ev_push(out, 0, 0, 0) ? nomem(err) : DFL_OK;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) return nomem(err);
    size_t prev = 0, pos = 0;
    long last_end = -1;
    dfl_status st = DFL_OK;
    while (pos <= n) {
        size_t ms, me;
        int rc = dfl__re_find(re, md, p, n, pos, &ms, &me);
        if (rc < 0) {
            st = dfl__fail(err, DFL_ERR_RANGE, "tokenizer: regex match failed (Split)");
            break;
        }
        if (rc == 0) break;
        if (ms == me) {
            /* an empty match: kept unless it touches the previous match, then step one char */
            if ((long)me != last_end) {
                if (push_match(out, prev, ms, me)) {
                    st = nomem(err);
                    break;
                }
                prev = me;
            }
            last_end = (long)me;
            if (ms >= n) break;
            uint32_t cp;
            pos = ms + dfl__utf8_next(p, n, ms, &cp);
            continue;
        }
        if (push_match(out, prev, ms, me)) {
            st = nomem(err);
            break;
        }
        prev = pos = me;
        last_end = (long)me;
    }
    pcre2_match_data_free(md);
    if (st) return st;
    if (prev != n && ev_push(out, prev, n, 0)) return nomem(err);
    return DFL_OK;
}

/* Matches of a character predicate: every matching character is its own match. */
static dfl_status find_pred(int (*pred)(uint32_t, uint32_t), uint32_t arg, const char *p, size_t n, evs *out,
                            dfl_error *err)
{
    out->n = 0;
    if (!n) return ev_push(out, 0, 0, 0) ? nomem(err) : DFL_OK;
    size_t last = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = dfl__utf8_next(p, n, i, &cp);
        if (pred(cp, arg)) {
            if (push_match(out, last, i, i + k)) return nomem(err);
            last = i + k;
        }
        i += k;
    }
    if (n > last && ev_push(out, last, n, 0)) return nomem(err);
    return DFL_OK;
}

/* Matches of the Whitespace pre-tokenizer's \w+|[^\w\s]+ as the regex crate finds them
 * (leftmost-first: a run of word characters, or a run of characters neither word nor
 * White_Space), with its Unicode 16.0.0 \w and \s; by hand, since PCRE2 is given
 * Oniguruma's classes and those differ (Join_Control is \w only here). */
static dfl_status find_words(const char *p, size_t n, evs *out, dfl_error *err)
{
    out->n = 0;
    if (!n) return ev_push(out, 0, 0, 0) ? nomem(err) : DFL_OK;
    size_t prev = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = dfl__utf8_next(p, n, i, &cp);
        int word = dfl__is_word(cp);
        if (!word && dfl__uc_white_space(cp)) {
            i += k;
            continue;
        }
        size_t e = i + k;
        while (e < n) {
            size_t k2 = dfl__utf8_next(p, n, e, &cp);
            int w2 = dfl__is_word(cp);
            if (w2 != word || (!w2 && dfl__uc_white_space(cp))) break;
            e += k2;
        }
        if (push_match(out, prev, i, e)) return nomem(err);
        prev = i = e;
    }
    if (prev != n && ev_push(out, prev, n, 0)) return nomem(err);
    return DFL_OK;
}

/* Apply a split behaviour (and invert) to events, in place; m becomes "remove". */
static void behave(evs *l, int behavior, int invert)
{
    if (invert)
        for (size_t i = 0; i < l->n; i++)
            l->v[i].m = !l->v[i].m;
    size_t w = 0;
    int prev = 0;
    switch (behavior) {
    case DFL__B_REMOVED: return; /* matches are removed */
    case DFL__B_ISOLATED:
        for (size_t i = 0; i < l->n; i++)
            l->v[i].m = 0;
        return;
    case DFL__B_CONTIGUOUS:
    case DFL__B_MERGED_PREV:
        /* contiguous: a piece joins the one before when both match or both do not;
         * merged with previous: a match joins the non-match before it */
        for (size_t i = 0; i < l->n; i++) {
            int m = l->v[i].m;
            int join = behavior == DFL__B_CONTIGUOUS ? m == prev : m && !prev;
            if (join && w > 0)
                l->v[w - 1].e = l->v[i].e;
            else
                l->v[w++] = (ev){l->v[i].s, l->v[i].e, 0};
            prev = m;
        }
        l->n = w;
        return;
    case DFL__B_MERGED_NEXT: {
        /* walk backwards, building the result from the end */
        size_t r = l->n;
        for (size_t i = l->n; i-- > 0;) {
            int m = l->v[i].m;
            if (m && !prev && r < l->n)
                l->v[r].s = l->v[i].s;
            else
                l->v[--r] = (ev){l->v[i].s, l->v[i].e, 0};
            prev = m;
        }
        memmove(l->v, l->v + r, (l->n - r) * sizeof *l->v);
        l->n -= r;
        return;
    }
    }
}

/* Turn kept events into pieces of sp. */
static dfl_status emit(const evs *l, const dfl__tk_store *s, const dfl__tk_split *sp, dfl__tk_splits *out,
                       dfl_error *err)
{
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].m || l->v[i].e <= l->v[i].s) continue;
        dfl__tk_split n = *sp;
        n.off = sp->off + l->v[i].s;
        n.len = l->v[i].e - l->v[i].s;
        n.orig_s = s->a[n.off].s;
        if (dfl__splits_push(out, n)) return nomem(err);
    }
    return DFL_OK;
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

static dfl_status pretok_one(const dfl__tk_step *st, dfl__tk_store *s, dfl__tk_split sp, dfl__tk_splits *out, evs *ev,
                             dfl_error *err)
{
    dfl_status r;
    switch (st->kind) {
    case DFL__P_SPLIT:
        r = find_regex(st->re, s->b + sp.off, sp.len, ev, err);
        if (r) return r;
        behave(ev, st->behavior, st->invert);
        return emit(ev, s, &sp, out, err);
    case DFL__P_WHITESPACE: /* the matches are kept, what lies between them removed */
        r = find_words(s->b + sp.off, sp.len, ev, err);
        if (r) return r;
        behave(ev, DFL__B_REMOVED, 1);
        return emit(ev, s, &sp, out, err);
    case DFL__P_BERT: {
        /* split on whitespace (removed), then each piece on punctuation (isolated) */
        dfl__tk_splits words = {0};
        r = find_pred(pred_space, 0, s->b + sp.off, sp.len, ev, err);
        if (!r) {
            behave(ev, DFL__B_REMOVED, 0);
            r = emit(ev, s, &sp, &words, err);
        }
        for (size_t i = 0; i < words.n && !r; i++) {
            r = find_pred(pred_punct, 0, s->b + words.v[i].off, words.v[i].len, ev, err);
            if (r) break;
            behave(ev, DFL__B_ISOLATED, 0);
            r = emit(ev, s, &words.v[i], out, err);
        }
        free(words.v);
        return r;
    }
    case DFL__P_DIGITS:
        r = find_pred(pred_numeric, 0, s->b + sp.off, sp.len, ev, err);
        if (r) return r;
        behave(ev, st->individual ? DFL__B_ISOLATED : DFL__B_CONTIGUOUS, 0);
        return emit(ev, s, &sp, out, err);
    case DFL__P_PUNCTUATION:
        r = find_pred(pred_punct, 0, s->b + sp.off, sp.len, ev, err);
        if (r) return r;
        behave(ev, st->behavior, 0);
        return emit(ev, s, &sp, out, err);
    case DFL__P_WHITESPACE_SPLIT:
        r = find_pred(pred_space, 0, s->b + sp.off, sp.len, ev, err);
        if (r) return r;
        behave(ev, DFL__B_REMOVED, 0);
        return emit(ev, s, &sp, out, err);
    case DFL__P_BYTELEVEL:
        if (st->prefix_space && sp.len && s->b[sp.off] != ' ' && dfl__norm_prepend(" ", 1, s, &sp)) return nomem(err);
        if (st->use_regex) {
            r = find_regex(st->re, s->b + sp.off, sp.len, ev, err);
            if (r) return r;
            behave(ev, DFL__B_ISOLATED, 0);
            size_t first = out->n;
            r = emit(ev, s, &sp, out, err);
            for (size_t i = first; i < out->n; i++)
                out->v[i].byte_level = 1;
            return r;
        }
        sp.byte_level = 1;
        if (!sp.len) return DFL_OK;
        return dfl__splits_push(out, sp) ? nomem(err) : DFL_OK;
    case DFL__P_METASPACE: {
        r = dfl__norm_replace(st->re, st->pat, st->pat_len, s, &sp, err);
        if (r) return r;
        int starts = sp.len >= st->pat_len && !memcmp(s->b + sp.off, st->pat, st->pat_len);
        if (!starts &&
            (st->prepend_scheme == DFL__PS_ALWAYS || (st->prepend_scheme == DFL__PS_FIRST && sp.orig_s == 0)))
            if (dfl__norm_prepend(st->pat, st->pat_len, s, &sp)) return nomem(err);
        if (!st->split) {
            if (!sp.len) return DFL_OK;
            return dfl__splits_push(out, sp) ? nomem(err) : DFL_OK;
        }
        uint32_t cp;
        dfl__utf8_next(st->pat, st->pat_len, 0, &cp);
        r = find_pred(pred_equal, cp, s->b + sp.off, sp.len, ev, err);
        if (r) return r;
        behave(ev, DFL__B_MERGED_NEXT, 0);
        return emit(ev, s, &sp, out, err);
    }
    default: return dfl__fail(err, DFL_ERR_CONFIG, "tokenizer: unknown pre-tokenizer %d", st->kind);
    }
}

dfl_status dfl__pretokenize(const dfl__tk_step *st, dfl__tk_store *s, dfl__tk_splits *in, dfl__tk_splits *out,
                            dfl_error *err)
{
    out->n = 0;
    if (st->kind == DFL__P_SEQUENCE) {
        /* ping-pong between two lists */
        dfl__tk_splits a = {0}, b = {0};
        dfl__tk_splits *cur = in;
        dfl_status r = DFL_OK;
        for (size_t i = 0; i < st->n_kids && !r; i++) {
            dfl__tk_splits *dst = (i == st->n_kids - 1) ? out : (cur == &a ? &b : &a);
            r = dfl__pretokenize(&st->kids[i], s, cur, dst, err);
            cur = dst;
        }
        if (!r && st->n_kids == 0)
            for (size_t i = 0; i < in->n && !r; i++)
                if (dfl__splits_push(out, in->v[i])) r = nomem(err);
        free(a.v);
        free(b.v);
        return r;
    }
    evs ev = {0};
    dfl_status r = DFL_OK;
    for (size_t i = 0; i < in->n && !r; i++) {
        dfl__tk_split sp = in->v[i];
        if (sp.token >= 0) {
            if (dfl__splits_push(out, sp)) r = nomem(err);
            continue;
        }
        if (sp.byte_level)
            r = dfl__fail(err, DFL_ERR_CONFIG, "tokenizer: pre-tokenizers after ByteLevel are not supported");
        else
            r = pretok_one(st, s, sp, out, &ev, err);
    }
    free(ev.v);
    return r;
}
