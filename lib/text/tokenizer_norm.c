/* tokenizer_norm.c — the working string with per-byte alignments, the character tests
 * (tables of tokenizer_unicode.c; UTF-8 itself is base/utf8.c), and the normalizers
 * (Sequence, Prepend, Replace, NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents,
 * BertNormalizer).
 *
 * Alignment rules follow Hugging Face's NormalizedString::transform: a character that
 * replaces another takes the replaced one's alignment; an inserted character takes
 * the alignment of the byte before it; removed characters vanish.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

/* ---------------------------------------------------------- Unicode ---- */

int dfl__is_whitespace(uint32_t cp)
{
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    return (dfl__uc_rs(cp) & DFL__RS_WHITE) != 0;
}

int dfl__is_numeric(uint32_t cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return (dfl__uc_rs(cp) & DFL__RS_NUMERIC) != 0;
}

int dfl__is_punct(uint32_t cp)
{
    /* char::is_ascii_punctuation (symbols too) || unicode_categories' is_punctuation */
    if (cp < 0x80)
        return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
               (cp >= 0x7B && cp <= 0x7E);
    return (dfl__uc_rs(cp) & DFL__RS_PUNCT) != 0;
}

int dfl__is_word(uint32_t cp)
{
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') || cp == '_';
    return (dfl__uc_rs(cp) & DFL__RS_WORD) != 0;
}

/* ------------------------------------------------------------ store ---- */

dfl_status dfl__store_reserve(dfl__tk_store *s, size_t extra)
{
    if (s->cap - s->len >= extra) return DFL_OK;
    if (extra > SIZE_MAX / 4 - s->len) return DFL_ERR_NOMEM;
    size_t nc = s->cap ? s->cap : 4096;
    while (nc < s->len + extra)
        nc *= 2;
    size_t abytes;
    if (!dfl__mul_ok(nc, sizeof(dfl__tk_align), &abytes)) return DFL_ERR_NOMEM;
    char *nb = realloc(s->b, nc);
    if (!nb) return DFL_ERR_NOMEM;
    s->b = nb;
    dfl__tk_align *na = realloc(s->a, abytes);
    if (!na) return DFL_ERR_NOMEM;
    s->a = na;
    s->cap = nc;
    return DFL_OK;
}

dfl_status dfl__store_put(dfl__tk_store *s, const char *b, size_t n, dfl__tk_align al)
{
    if (dfl__store_reserve(s, n)) return DFL_ERR_NOMEM;
    memcpy(s->b + s->len, b, n);
    for (size_t i = 0; i < n; i++)
        s->a[s->len + i] = al;
    s->len += n;
    return DFL_OK;
}

/* Append a copy of store bytes [from, from+n) with their alignments. */
static dfl_status store_copy(dfl__tk_store *s, size_t from, size_t n)
{
    if (dfl__store_reserve(s, n)) return DFL_ERR_NOMEM;
    memmove(s->b + s->len, s->b + from, n);
    memmove(s->a + s->len, s->a + from, n * sizeof *s->a);
    s->len += n;
    return DFL_OK;
}

dfl_status dfl__splits_push(dfl__tk_splits *l, dfl__tk_split sp)
{
    if (l->n == l->cap) {
        dfl__tk_split *nv = dfl__grow_array(l->v, &l->cap, sizeof *l->v, 64);
        if (!nv) return DFL_ERR_NOMEM;
        l->v = nv;
    }
    l->v[l->n++] = sp;
    return DFL_OK;
}

static dfl_status nomem(dfl_error *err)
{
    return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
}

/* The alignment a character inserted before store byte `at` of split sp takes. */
static dfl__tk_align inserted_align(const dfl__tk_store *s, const dfl__tk_split *sp, size_t at)
{
    if (at > sp->off) return s->a[at - 1];
    return (dfl__tk_align){sp->orig_s, sp->orig_s};
}

/* ------------------------------------------------------- normalizers ---- */

int dfl__re_find(const pcre2_code *re, pcre2_match_data *md, const char *s, size_t n, size_t from, size_t *ms,
                 size_t *me)
{
    int rc = pcre2_jit_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc == PCRE2_ERROR_JIT_BADOPTION) rc = pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) return -1;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

dfl_status dfl__norm_replace(const pcre2_code *re, const char *content, size_t content_len, dfl__tk_store *s,
                             dfl__tk_split *sp, dfl_error *err)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) return nomem(err);
    size_t pos = 0, n = sp->len, out0 = s->len;
    dfl_status st = DFL_OK;
    while (pos <= n) {
        size_t ms, me;
        int rc = dfl__re_find(re, md, s->b + sp->off, n, pos, &ms, &me);
        if (rc < 0) {
            st = dfl__fail(err, DFL_ERR_RANGE, "tokenizer: regex match failed (Replace)");
            break;
        }
        if (rc == 0) break;
        if (store_copy(s, sp->off + pos, ms - pos)) {
            st = nomem(err);
            break;
        }
        /* the replacement takes the alignment of the matched text's last byte */
        dfl__tk_align al = inserted_align(s, sp, sp->off + me);
        if (content_len && dfl__store_put(s, content, content_len, al)) {
            st = nomem(err);
            break;
        }
        if (me == ms) {
            /* empty match: keep the next character and move on */
            if (ms >= n) {
                pos = n + 1;
                break;
            }
            uint32_t cp;
            size_t k = dfl__utf8_next(s->b + sp->off, n, ms, &cp);
            if (store_copy(s, sp->off + ms, k)) {
                st = nomem(err);
                break;
            }
            pos = ms + k;
        } else {
            pos = me;
        }
    }
    if (!st && pos < n && store_copy(s, sp->off + pos, n - pos)) st = nomem(err);
    pcre2_match_data_free(md);
    if (st) return st;
    sp->off = out0;
    sp->len = s->len - out0;
    return DFL_OK;
}

dfl_status dfl__norm_prepend(const char *p, size_t n, dfl__tk_store *s, dfl__tk_split *sp)
{
    if (!sp->len) return DFL_OK;
    size_t out0 = s->len;
    if (dfl__store_reserve(s, n + sp->len)) return DFL_ERR_NOMEM;
    if (dfl__store_put(s, p, n, s->a[sp->off])) return DFL_ERR_NOMEM;
    if (store_copy(s, sp->off, sp->len)) return DFL_ERR_NOMEM;
    sp->off = out0;
    sp->len = s->len - out0;
    return DFL_OK;
}

/* Scratch of one normalizer run: reused from segment to segment. */
typedef struct norm_scratch {
    uint32_t *in;   /* [cap] the segment's code points */
    size_t *ostart; /* [cap + 1] their byte offsets in the segment */
    size_t cap;
    dfl__uc_buf tmp[2], out;
} norm_scratch;

static void scratch_free(norm_scratch *w)
{
    free(w->in);
    free(w->ostart);
    dfl__uc_buf_free(&w->tmp[0]);
    dfl__uc_buf_free(&w->tmp[1]);
    dfl__uc_buf_free(&w->out);
}

/* Unicode normalization of one segment s->b[from, from + n) (tokenizer_unicode.c does
 * the normal form; here its output is laid over the input for the alignments).
 *
 * Alignments follow Hugging Face's NormalizedString::transform over the crate's
 * (character, change) pairs: the output is laid over the original characters in
 * order: a character with change c <= 0 takes the next original character's alignment
 * and uses up 1 - c of them; c > 0 is an insertion (the alignment of the byte before). */
static dfl_status norm_segment(dfl__tk_store *s, size_t from, size_t n, int compat, int compose, norm_scratch *w)
{
    if (n + 1 > w->cap) {
        size_t nc = w->cap ? w->cap : 64;
        while (nc < n + 1)
            nc *= 2;
        uint32_t *in = dfl__alloc_array(nc, sizeof *in);
        size_t *os = dfl__alloc_array(nc + 1, sizeof *os);
        if (!in || !os) {
            free(in);
            free(os);
            return DFL_ERR_NOMEM;
        }
        free(w->in);
        free(w->ostart);
        w->in = in;
        w->ostart = os;
        w->cap = nc;
    }
    size_t n_in = 0;
    for (size_t i = 0; i < n;) {
        w->ostart[n_in] = i;
        i += dfl__utf8_next(s->b + from, n, i, &w->in[n_in]);
        n_in++;
    }
    w->ostart[n_in] = n;
    if (dfl__uc_normalize(w->in, n_in, compat, compose, w->tmp, &w->out)) return DFL_ERR_NOMEM;
    const dfl__uc_buf *o = &w->out;
    if (o->n == n_in && !memcmp(o->cp, w->in, n_in * sizeof *w->in)) return store_copy(s, from, n);
    if (dfl__store_reserve(s, o->n * 4)) return DFL_ERR_NOMEM;
    size_t p = 0;
    for (size_t k = 0; k < o->n; k++) {
        int change = o->change[k];
        dfl__tk_align al;
        if (change > 0 && p > 0) {
            al = s->a[from + w->ostart[p] - 1];
        } else if (p < n_in) {
            al = s->a[from + w->ostart[p]];
            p += (size_t)(1 - (change < 0 ? change : 0));
            if (p > n_in) p = n_in;
        } else {
            al = s->a[from + n - 1];
        }
        char buf[4];
        size_t m = dfl__utf8_put(o->cp[k], buf);
        if (dfl__store_put(s, buf, m, al)) return DFL_ERR_NOMEM;
    }
    return DFL_OK;
}

static dfl_status norm_unicode(int kind, dfl__tk_store *s, dfl__tk_split *sp, dfl_error *err)
{
    int compat = kind == DFL__N_NFKC || kind == DFL__N_NFKD, compose = kind == DFL__N_NFC || kind == DFL__N_NFKC;
    if (dfl__store_reserve(s, sp->len + 16)) return nomem(err);
    size_t out0 = s->len, i = sp->off, end = sp->off + sp->len;
    norm_scratch w = {0};
    dfl_status st = DFL_OK;
    while (i < end && !st) {
        /* ASCII never changes and a following ASCII character starts a new segment */
        size_t j = i;
        while (j < end && (unsigned char)s->b[j] < 0x80 && (j + 1 >= end || (unsigned char)s->b[j + 1] < 0x80))
            j++;
        if (j > i) {
            st = store_copy(s, i, j - i);
            i = j;
            continue;
        }
        /* a segment: up to the next character normalization may start afresh before */
        uint32_t cp;
        j = i + dfl__utf8_next(s->b, end, i, &cp);
        while (j < end) {
            size_t k = dfl__utf8_next(s->b, end, j, &cp);
            if (dfl__uc_starts_segment(cp, compat)) break;
            j += k;
        }
        st = norm_segment(s, i, j - i, compat, compose, &w);
        i = j;
    }
    scratch_free(&w);
    if (st) return nomem(err);
    sp->off = out0;
    sp->len = s->len - out0;
    return DFL_OK;
}

/* What one character of the Bert/Lowercase/StripAccents family becomes: up to
 * CHAR_MAP_MAX characters into out (0: removed), their count. */
enum { CHAR_MAP_MAX = 3 };
typedef size_t (*char_map)(uint32_t cp, const dfl__tk_step *st, uint32_t out[CHAR_MAP_MAX]);

/* Every character of the split through f. Each output character takes the alignment of
 * the character it came from, as Hugging Face's filter, map and lowercase give it (a
 * kept or replacing character keeps its own, an inserted one that of the byte before). */
static dfl_status norm_chars(char_map f, const dfl__tk_step *st, dfl__tk_store *s, dfl__tk_split *sp, dfl_error *err)
{
    if (dfl__store_reserve(s, sp->len * 2 + 8)) return nomem(err);
    size_t out0 = s->len, i = sp->off, end = sp->off + sp->len;
    while (i < end) {
        uint32_t cp, o[CHAR_MAP_MAX];
        size_t k = dfl__utf8_next(s->b, end, i, &cp);
        size_t m = f(cp, st, o);
        dfl__tk_align al = s->a[i];
        for (size_t j = 0; j < m; j++) {
            char buf[4];
            size_t nb = dfl__utf8_put(o[j], buf);
            if (dfl__store_put(s, buf, nb, al)) return nomem(err);
        }
        i += k;
    }
    sp->off = out0;
    sp->len = s->len - out0;
    return DFL_OK;
}

/* Rust's char::to_lowercase, character by character (no final-sigma rule). */
static size_t map_lower(uint32_t cp, const dfl__tk_step *st, uint32_t out[CHAR_MAP_MAX])
{
    (void)st;
    return dfl__uc_lower(cp, out);
}

/* StripAccents: drop unicode-normalization-alignments' combining marks (M, 9.0.0). */
static size_t map_strip_marks(uint32_t cp, const dfl__tk_step *st, uint32_t out[CHAR_MAP_MAX])
{
    (void)st;
    if (dfl__uc_rs(cp) & DFL__RS_MARK) return 0;
    out[0] = cp;
    return 1;
}

/* BertNormalizer's accent stripping after NFD: drop unicode_categories' Mn (8.0.0). */
static size_t map_strip_mn(uint32_t cp, const dfl__tk_step *st, uint32_t out[CHAR_MAP_MAX])
{
    (void)st;
    if (dfl__uc_rs(cp) & DFL__RS_MN) return 0;
    out[0] = cp;
    return 1;
}

/* BertNormalizer clean_text: NUL, U+FFFD and controls (unicode_categories' is_other: Cc,
 * Cf, Co; tab, LF and CR excepted) go; whitespace (those three too) becomes a space. */
static size_t map_clean(uint32_t cp, const dfl__tk_step *st, uint32_t out[CHAR_MAP_MAX])
{
    (void)st;
    int keep_ctl = cp == '\t' || cp == '\n' || cp == '\r';
    if (cp == 0 || cp == 0xFFFD || (!keep_ctl && (dfl__uc_rs(cp) & DFL__RS_OTHER))) return 0;
    out[0] = keep_ctl || dfl__is_whitespace(cp) ? ' ' : cp;
    return 1;
}

/* BertNormalizer handle_chinese_chars: a space each side of a CJK ideograph (the fixed
 * ranges of tokenizers' is_chinese_char, not a Unicode property). */
static size_t map_chinese(uint32_t cp, const dfl__tk_step *st, uint32_t out[CHAR_MAP_MAX])
{
    (void)st;
    int cjk = (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
              (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) ||
              (cp >= 0x2B920 && cp <= 0x2CEAF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
    if (!cjk) {
        out[0] = cp;
        return 1;
    }
    out[0] = ' ';
    out[1] = cp;
    out[2] = ' ';
    return 3;
}

static dfl_status norm_bert(const dfl__tk_step *st, dfl__tk_store *s, dfl__tk_split *sp, dfl_error *err)
{
    dfl_status r = DFL_OK;
    if (st->clean_text) r = norm_chars(map_clean, st, s, sp, err);
    if (!r && st->chinese) r = norm_chars(map_chinese, st, s, sp, err);
    if (!r && st->strip_accents) {
        r = norm_unicode(DFL__N_NFD, s, sp, err);
        if (!r) r = norm_chars(map_strip_mn, st, s, sp, err);
    }
    if (!r && st->lowercase) r = norm_chars(map_lower, st, s, sp, err);
    return r;
}

static void norm_strip(int left, int right, const dfl__tk_store *s, dfl__tk_split *sp)
{
    size_t a = 0, b = sp->len;
    const char *p = s->b + sp->off;
    if (left)
        while (a < b) {
            uint32_t cp;
            size_t k = dfl__utf8_next(p, b, a, &cp);
            if (!dfl__is_whitespace(cp)) break;
            a += k;
        }
    if (right)
        while (b > a) {
            size_t q = b - 1;
            while (q > a && ((unsigned char)p[q] & 0xC0) == 0x80)
                q--;
            uint32_t cp;
            dfl__utf8_next(p, b, q, &cp);
            if (!dfl__is_whitespace(cp)) break;
            b = q;
        }
    if (a > 0 && a < sp->len) sp->orig_s = s->a[sp->off + a].s;
    sp->off += a;
    sp->len = b - a;
}

dfl_status dfl__normalize(const dfl__tk_step *st, dfl__tk_store *s, dfl__tk_split *sp, dfl_error *err)
{
    switch (st->kind) {
    case DFL__N_SEQUENCE:
        for (size_t i = 0; i < st->n_kids; i++) {
            dfl_status r = dfl__normalize(&st->kids[i], s, sp, err);
            if (r) return r;
        }
        return DFL_OK;
    case DFL__N_PREPEND: return dfl__norm_prepend(st->pat, st->pat_len, s, sp) ? nomem(err) : DFL_OK;
    case DFL__N_REPLACE: return dfl__norm_replace(st->re, st->content, st->content_len, s, sp, err);
    case DFL__N_NFC:
    case DFL__N_NFD:
    case DFL__N_NFKC:
    case DFL__N_NFKD: return norm_unicode(st->kind, s, sp, err);
    case DFL__N_LOWERCASE: return norm_chars(map_lower, st, s, sp, err);
    case DFL__N_STRIP: norm_strip(st->left, st->right, s, sp); return DFL_OK;
    case DFL__N_STRIP_ACCENTS: return norm_chars(map_strip_marks, st, s, sp, err);
    case DFL__N_BERT: return norm_bert(st, s, sp, err);
    default: return dfl__fail(err, DFL_ERR_CONFIG, "tokenizer: unknown normalizer %d", st->kind);
    }
}
