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

/* The character of the original text holding byte off. */
static dfl__tk_align orig_al(const dfl__tk_store *s, size_t off)
{
    const unsigned char *p = (const unsigned char *)s->orig;
    size_t i = off;
    while (i > 0 && (p[i] & 0xC0) == 0x80)
        i--;
    size_t k = p[i] < 0x80 ? 1 : p[i] < 0xE0 ? 2 : p[i] < 0xF0 ? 3 : 4;
    return (dfl__tk_align){(uint32_t)i, (uint32_t)(i + k)};
}

/* The run holding appended byte i (there is one: runs[0].at == 0). The last run
 * found and the one after it are tried first; the hint is a cache, not content, so a
 * const store may update it. */
static size_t run_of(const dfl__tk_store *s, size_t i)
{
    size_t *hint = (size_t *)&s->hint, h = *hint;
    for (size_t r = h; r < h + 2 && r < s->n_runs; r++)
        if (s->runs[r].at <= i && (r + 1 == s->n_runs || s->runs[r + 1].at > i)) return *hint = r;
    size_t lo = 0, hi = s->n_runs;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->runs[mid].at <= i)
            lo = mid;
        else
            hi = mid;
    }
    return *hint = lo;
}

dfl__tk_align dfl__store_al(const dfl__tk_store *s, size_t off)
{
    if (off < s->orig_len) return orig_al(s, off);
    size_t i = off - s->orig_len;
    const dfl__tk_run *r = &s->runs[run_of(s, i)];
    if (r->e == UINT32_MAX) return orig_al(s, r->x + (i - r->at));
    return (dfl__tk_align){r->x, r->e};
}

void dfl__store_truncate(dfl__tk_store *s, size_t len)
{
    if (len < s->orig_len) len = s->orig_len;
    if (len >= s->len) return;
    s->len = len;
    size_t used = len - s->orig_len;
    while (s->n_runs && s->runs[s->n_runs - 1].at >= used)
        s->n_runs--;
}

void dfl__store_free(dfl__tk_store *s)
{
    free(s->b);
    free(s->runs);
    memset(s, 0, sizeof *s);
}

dfl_status dfl__store_reserve(dfl__tk_store *s, size_t extra)
{
    size_t used = s->len - s->orig_len;
    if (s->cap - used >= extra) return DFL_OK;
    if (extra > UINT32_MAX - used) return DFL_ERR_NOMEM; /* runs count bytes in 32 bits */
    size_t nc = s->cap ? s->cap : 4096;
    while (nc < used + extra)
        nc *= 2;
    char *nb = realloc(s->b, nc);
    if (!nb) return DFL_ERR_NOMEM;
    s->b = nb;
    s->cap = nc;
    return DFL_OK;
}

/* A run starting at the current end of the appended bytes (joined to the last one
 * when it goes on with the same rule). */
static dfl_status run_add(dfl__tk_store *s, uint32_t x, uint32_t e)
{
    uint32_t at = (uint32_t)(s->len - s->orig_len);
    if (s->n_runs) {
        dfl__tk_run *l = &s->runs[s->n_runs - 1];
        if (l->at == at) { /* the last run is empty: replace it */
            l->x = x, l->e = e;
            return DFL_OK;
        }
        if (e == UINT32_MAX ? l->e == UINT32_MAX && l->x + (at - l->at) == x : l->e == e && l->x == x) return DFL_OK;
    }
    if (s->n_runs == s->runs_cap) {
        dfl__tk_run *nr = dfl__grow_array(s->runs, &s->runs_cap, sizeof *s->runs, 16);
        if (!nr) return DFL_ERR_NOMEM;
        s->runs = nr;
    }
    s->runs[s->n_runs++] = (dfl__tk_run){at, x, e};
    return DFL_OK;
}

dfl_status dfl__store_put(dfl__tk_store *s, const char *b, size_t n, dfl__tk_align al)
{
    if (!n) return DFL_OK;
    if (dfl__store_reserve(s, n) || run_add(s, al.s, al.e)) return DFL_ERR_NOMEM;
    memcpy(s->b + (s->len - s->orig_len), b, n);
    s->len += n;
    return DFL_OK;
}

/* Append a copy of store bytes [from, from+n) with their alignments. */
static dfl_status store_copy(dfl__tk_store *s, size_t from, size_t n)
{
    if (!n) return DFL_OK;
    if (dfl__store_reserve(s, n)) return DFL_ERR_NOMEM;
    if (from < s->orig_len) {
        if (run_add(s, (uint32_t)from, UINT32_MAX)) return DFL_ERR_NOMEM;
        memcpy(s->b + (s->len - s->orig_len), s->orig + from, n);
        s->len += n;
        return DFL_OK;
    }
    /* from appended bytes: their runs, cut to the range, one after the other */
    size_t i = from - s->orig_len, end = i + n;
    while (i < end) {
        size_t r = run_of(s, i);
        dfl__tk_run run = s->runs[r];
        size_t run_end = r + 1 < s->n_runs ? s->runs[r + 1].at : s->len - s->orig_len;
        size_t k = (run_end < end ? run_end : end) - i;
        if (run.e == UINT32_MAX ? run_add(s, run.x + (uint32_t)(i - run.at), UINT32_MAX) : run_add(s, run.x, run.e))
            return DFL_ERR_NOMEM;
        memmove(s->b + (s->len - s->orig_len), s->b + i, k);
        s->len += k;
        i += k;
    }
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
    if (at > sp->off) return dfl__store_al(s, at - 1);
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
        int rc = dfl__re_find(re, md, dfl__store_at(s, sp->off), n, pos, &ms, &me);
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
            size_t k = dfl__utf8_next(dfl__store_at(s, sp->off), n, ms, &cp);
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
    if (dfl__store_put(s, p, n, dfl__store_al(s, sp->off))) return DFL_ERR_NOMEM;
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

/* Unicode normalization of one segment, store bytes [from, from + n) (tokenizer_unicode.c does
 * the normal form; here its output is laid over the input for the alignments).
 *
 * Alignments follow Hugging Face's NormalizedString::transform over the crate's
 * (character, change) pairs: the output is laid over the original characters in
 * order: a character with change c <= 0 takes the next original character's alignment
 * and uses up 1 - c of them; c > 0 is an insertion (the alignment of the byte before).
 * Unchanged segments are appended only once *copying is set; the first changed one
 * appends the unchanged bytes from lazy_from first and sets it. */
static dfl_status norm_segment(dfl__tk_store *s, size_t from, size_t n, int compat, int compose, norm_scratch *w,
                               size_t lazy_from, int *copying)
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
        i += dfl__utf8_next(dfl__store_at(s, from), n, i, &w->in[n_in]);
        n_in++;
    }
    w->ostart[n_in] = n;
    if (dfl__uc_normalize(w->in, n_in, compat, compose, w->tmp, &w->out)) return DFL_ERR_NOMEM;
    const dfl__uc_buf *o = &w->out;
    if (o->n == n_in && !memcmp(o->cp, w->in, n_in * sizeof *w->in)) return *copying ? store_copy(s, from, n) : DFL_OK;
    /* the first change: what came before it unchanged is copied now */
    if (!*copying && store_copy(s, lazy_from, from - lazy_from)) return DFL_ERR_NOMEM;
    *copying = 1;
    if (dfl__store_reserve(s, o->n * 4)) return DFL_ERR_NOMEM;
    size_t p = 0;
    for (size_t k = 0; k < o->n; k++) {
        int change = o->change[k];
        dfl__tk_align al;
        if (change > 0 && p > 0) {
            al = dfl__store_al(s, from + w->ostart[p] - 1);
        } else if (p < n_in) {
            al = dfl__store_al(s, from + w->ostart[p]);
            p += (size_t)(1 - (change < 0 ? change : 0));
            if (p > n_in) p = n_in;
        } else {
            al = dfl__store_al(s, from + n - 1);
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
    /* nothing is appended until a segment changes (text already in normal form, the
     * common case, stays where it is); from then on every byte is */
    size_t out0 = s->len, i = 0, n = sp->len;
    int copying = 0;
    norm_scratch w = {0};
    dfl_status st = DFL_OK;
    while (i < n && !st) {
        const char *p = dfl__store_at(s, sp->off); /* again each round: appends move b */
        /* ASCII never changes and a following ASCII character starts a new segment */
        size_t j = i;
        while (j < n && (unsigned char)p[j] < 0x80 && (j + 1 >= n || (unsigned char)p[j + 1] < 0x80))
            j++;
        if (j > i) {
            if (copying) st = store_copy(s, sp->off + i, j - i);
            i = j;
            continue;
        }
        /* a segment: up to the next character normalization may start afresh before */
        uint32_t cp;
        j = i + dfl__utf8_next(p, n, i, &cp);
        while (j < n) {
            size_t k = dfl__utf8_next(p, n, j, &cp);
            if (dfl__uc_starts_segment(cp, compat)) break;
            j += k;
        }
        st = norm_segment(s, sp->off + i, j - i, compat, compose, &w, sp->off, &copying);
        i = j;
    }
    scratch_free(&w);
    if (st) return nomem(err);
    if (!copying) return DFL_OK;
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
    size_t out0 = s->len, i = 0, n = sp->len;
    while (i < n) {
        uint32_t cp, o[CHAR_MAP_MAX];
        size_t k = dfl__utf8_next(dfl__store_at(s, sp->off), n, i, &cp);
        size_t m = f(cp, st, o);
        dfl__tk_align al = dfl__store_al(s, sp->off + i);
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
    const char *p = dfl__store_at(s, sp->off);
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
    if (a > 0 && a < sp->len) sp->orig_s = dfl__store_al(s, sp->off + a).s;
    sp->off += a;
    sp->len = b - a;
}

dfl_status dfl__normalize(const dfl__tk_step *st, dfl__tk_store *s, dfl__tk_split *sp, int *prepend, dfl_error *err)
{
    switch (st->kind) {
    case DFL__N_SEQUENCE:
        for (size_t i = 0; i < st->n_kids; i++) {
            dfl_status r = dfl__normalize(&st->kids[i], s, sp, prepend, err);
            if (r) return r;
        }
        return DFL_OK;
    case DFL__N_PREPEND:
        if (prepend && (!*prepend || !sp->len)) return DFL_OK;
        if (prepend) *prepend = 0;
        return dfl__norm_prepend(st->pat, st->pat_len, s, sp) ? nomem(err) : DFL_OK;
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
