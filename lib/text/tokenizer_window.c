/* tokenizer_window.c — where a long text may be cut, so that it goes through the
 * normalizer, the pre-tokenizer and the model a window at a time and the working string
 * stays a window's size, not the text's. (Llama 2 and Gemma 3 replace every space: the
 * whole text would be copied, with two alignment runs a space.)
 *
 * A cut between two characters is allowed when encoding the two sides apart gives the
 * tokens of the whole. Only tokenizers whose steps change a text character by
 * character are cut:
 *  - the normalizer: Prepend (on the first window it finds non-empty, as it acts once
 *    on the whole text), Replace of one literal character, Lowercase;
 *  - the pre-tokenizer: none, or Splits on a literal string, not inverted;
 *  - the model: BPE without a subword prefix, a word suffix or ignore_merges (each ties
 *    a token to its place in the word);
 * and only between two ASCII characters a, b whose normalized forms f(a), f(b) (the
 * normalizer on the character alone) are not empty, with x the last byte of f(a) and y
 * the first of f(b):
 *  - BPE may cut f(a) f(b) between them (no vocabulary string holds x, y in a row and
 *    both characters are tokens: dfl__bpe_can_cut);
 *  - no added token matched on normalized text holds x, y in a row, and none strips
 *    white space or wants a whole word (those look past the match);
 *  - neither x nor y is a byte of a Split pattern (a match across the cut, or
 *    Contiguous joining matches on both sides, needs one).
 * Outside the cut both sides are normalized, matched and split as in the whole text:
 * each step above changes, matches or splits nothing that spans it.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

/* 1 when a UTF-8 string is one character. */
static int one_char(const char *p, size_t n)
{
    uint32_t cp;
    return n && dfl__utf8_next(p, n, 0, &cp) == n;
}

/* 1 when the normalizer changes a text character by character (Sequence flattened). */
static int norm_local(const dfl__tk_step *st)
{
    switch (st->kind) {
    case DFL__N_SEQUENCE:
        for (size_t i = 0; i < st->n_kids; i++)
            if (!norm_local(&st->kids[i])) return 0;
        return 1;
    case DFL__N_PREPEND:
    case DFL__N_LOWERCASE: return 1;
    case DFL__N_REPLACE: return st->pat && one_char(st->pat, st->pat_len);
    default: return 0;
    }
}

/* 1 when the pre-tokenizer only splits on literal strings; bytes[] gets their bytes. */
static int pretok_literal(const dfl__tk_step *st, uint8_t bytes[256])
{
    if (st->kind == DFL__P_SEQUENCE) {
        for (size_t i = 0; i < st->n_kids; i++)
            if (!pretok_literal(&st->kids[i], bytes)) return 0;
        return 1;
    }
    if (st->kind != DFL__P_SPLIT || !st->pat || st->invert) return 0;
    for (size_t i = 0; i < st->pat_len; i++)
        bytes[(uint8_t)st->pat[i]] = 1;
    return 1;
}

/* The normalizer's output for the one ASCII character c (Prepend left out): out[*n]. */
static dfl_status norm_char(const dfl_tokenizer *t, char c, char *out, size_t cap, size_t *n, dfl_error *err)
{
    dfl__tk_store s = {.orig = &c, .orig_len = 1, .len = 1};
    dfl__tk_split sp = {.off = 0, .len = 1, .token = -1};
    int prepend = 0;
    dfl_status st = dfl__normalize(t->normalizer, &s, &sp, &prepend, err);
    if (!st) {
        *n = sp.len < cap ? sp.len : 0; /* longer than out[cap]: taken as empty, no cut beside c */
        memcpy(out, dfl__store_at(&s, sp.off), *n);
    }
    dfl__store_free(&s);
    return st;
}

dfl_status dfl__window_build(dfl_tokenizer *t, dfl_error *err)
{
    uint8_t split_bytes[256] = {0};
    const dfl__tk_bpe *m = &t->bpe;
    if (!t->normalizer || !norm_local(t->normalizer)) return DFL_OK; /* nothing is copied: no need */
    if (t->pretok && !pretok_literal(t->pretok, split_bytes)) return DFL_OK;
    if (m->prefix || m->suffix || m->ignore_merges || t->norm_strips) return DFL_OK;

    enum { F_MAX = 16 };
    char f[128][F_MAX];
    size_t fn[128];
    for (int c = 0; c < 128; c++) {
        dfl_status st = norm_char(t, (char)c, f[c], F_MAX, &fn[c], err);
        if (st) return st;
    }
    t->cut = calloc(128 * 128 / 8, 1);
    if (!t->cut) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    for (int a = 0; a < 128; a++)
        for (int b = 0; b < 128; b++) {
            if (!fn[a] || !fn[b]) continue;
            uint8_t x = (uint8_t)f[a][fn[a] - 1], y = (uint8_t)f[b][0];
            unsigned k = (unsigned)x << 8 | y;
            if (split_bytes[x] || split_bytes[y]) continue;
            if (t->norm_pairs && (t->norm_pairs[k >> 3] & (1u << (k & 7)))) continue;
            char w[2 * F_MAX];
            memcpy(w, f[a], fn[a]);
            memcpy(w + fn[a], f[b], fn[b]);
            int ok = dfl__bpe_can_cut(t, w, fn[a] + fn[b], fn[a]);
            if (ok < 0) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
            if (ok) t->cut[(a << 7 | b) >> 3] |= (uint8_t)(1u << ((a << 7 | b) & 7));
        }
    return DFL_OK;
}

size_t dfl__window_end(const dfl_tokenizer *t, const char *p, size_t from, size_t end)
{
    if (!t->cut || end - from <= 2 * (size_t)DFL__WINDOW) return end;
    const unsigned char *u = (const unsigned char *)p;
    for (size_t c = from + DFL__WINDOW; c < end; c++) {
        if (u[c] >= 0x80 || u[c - 1] >= 0x80) continue;
        unsigned k = (unsigned)u[c - 1] << 7 | u[c];
        if (t->cut[k >> 3] & (1u << (k & 7))) return c;
    }
    return end;
}
