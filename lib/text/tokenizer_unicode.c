/* tokenizer_unicode.c — the Unicode data the tokenizer matches Hugging Face tokenizers on,
 * from tables generated out of the Unicode Character Database (tokenizer_unicode_data.h,
 * written by scripts/gen_unicode_tables.py):
 *  - general categories and White_Space of Unicode 16.0.0, the version of the Oniguruma
 *    tables its pre-tokenizer regexes use (for the regex classes, tokenizer_regex.c);
 *  - normalization (NFC, NFD, NFKC, NFKD) with Unicode 9.0.0's data, the version of the
 *    unicode-normalization-alignments crate its normalizers use, by that crate's
 *    algorithm step for step (decompose, canonical order, recompose), each output
 *    character with the crate's "change" (what the alignments are made from);
 *  - the properties read by Rust code instead of a regex (dfl__uc_rs): Rust 1.94's char
 *    methods (Unicode 17.0.0, to_lowercase too), the unicode_categories crate (8.0.0),
 *    unicode-normalization-alignments' is_combining_mark (9.0.0), the regex crate's \w (16.0.0).
 * Hand-written rather than utf8proc: utf8proc's tables are a third version (15.0 in
 * Debian 12), so neither class nor normal form would agree on every code point.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"
#include "text/tokenizer_unicode_data.h"

/* --------------------------------------------------------- properties ---- */

int dfl__uc_gc(uint32_t cp)
{
    if (cp >= 0x110000) return DFL__GC_CN;
    return dfl__uc_gc_stage2[dfl__uc_gc_stage1[cp >> 8]][cp & 0xFF] & 0x1F;
}

int dfl__uc_white_space(uint32_t cp)
{
    if (cp >= 0x110000) return 0;
    return (dfl__uc_gc_stage2[dfl__uc_gc_stage1[cp >> 8]][cp & 0xFF] & 0x20) != 0;
}

unsigned dfl__uc_props(uint32_t cp)
{
    if (cp >= 0x110000) return DFL__GC_CN;
    return dfl__uc_gc_stage2[dfl__uc_gc_stage1[cp >> 8]][cp & 0xFF];
}

int dfl__uc_block_same(uint32_t block, unsigned *props)
{
    const uint8_t *v = dfl__uc_gc_stage2[dfl__uc_gc_stage1[block]];
    for (int i = 1; i < 256; i++)
        if (v[i] != v[0]) return 0;
    *props = v[0];
    return 1;
}

int dfl__uc_age(uint32_t cp)
{
    if (cp >= 0x110000) return 0;
    return dfl__uc_age_stage2[dfl__uc_age_stage1[cp >> 8]][cp & 0xFF];
}

int dfl__uc_alphabetic(uint32_t cp)
{
    if (cp >= 0x110000) return 0;
    return (dfl__uc_gc_stage2[dfl__uc_gc_stage1[cp >> 8]][cp & 0xFF] & 0x40) != 0;
}

unsigned dfl__uc_rs(uint32_t cp)
{
    if (cp >= 0x110000) return 0;
    return dfl__uc_rs_stage2[dfl__uc_rs_stage1[cp >> 8]][cp & 0xFF];
}

int dfl__uc_ccc(uint32_t cp)
{
    if (cp >= 0x110000) return 0;
    return dfl__uc_ccc_stage2[dfl__uc_ccc_stage1[cp >> 8]][cp & 0xFF];
}

/* ------------------------------------------------------ decomposition ---- */

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7 };
enum { L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

/* The entry of cp in a sorted [cp, first, length] index, or NULL. */
static const uint32_t *find_seq(const uint32_t (*index)[3], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (index[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && index[lo][0] == cp ? index[lo] : NULL;
}

size_t dfl__uc_lower(uint32_t cp, uint32_t out[DFL__UC_LOWER_MAX])
{
    if (cp < 0x80) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    const uint32_t *e = find_seq(dfl__uc_lower_index, sizeof dfl__uc_lower_index / sizeof *dfl__uc_lower_index, cp);
    if (!e || e[2] > DFL__UC_LOWER_MAX) {
        out[0] = cp;
        return 1;
    }
    memcpy(out, dfl__uc_lower_data + e[1], e[2] * sizeof *out);
    return e[2];
}

size_t dfl__uc_decompose(uint32_t cp, int compat, uint32_t out[DFL__UC_DECOMP_MAX])
{
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t si = cp - S_BASE;
        out[0] = L_BASE + si / N_COUNT;
        out[1] = V_BASE + (si % N_COUNT) / T_COUNT;
        if (si % T_COUNT == 0) return 2;
        out[2] = T_BASE + si % T_COUNT;
        return 3;
    }
    if (cp < 0xA0) { /* nothing below U+00A0 decomposes */
        out[0] = cp;
        return 1;
    }
    const uint32_t *e = NULL;
    const uint32_t *data = NULL;
    if (compat) {
        e = find_seq(dfl__uc_dec_compat_index, sizeof dfl__uc_dec_compat_index / sizeof *dfl__uc_dec_compat_index, cp);
        data = dfl__uc_dec_compat_data;
    }
    if (!e) {
        e = find_seq(dfl__uc_dec_canon_index, sizeof dfl__uc_dec_canon_index / sizeof *dfl__uc_dec_canon_index, cp);
        data = dfl__uc_dec_canon_data;
    }
    if (!e) {
        out[0] = cp;
        return 1;
    }
    memcpy(out, data + e[1], e[2] * sizeof *out);
    return e[2];
}

uint32_t dfl__uc_compose(uint32_t a, uint32_t b)
{
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    size_t lo = 0, hi = sizeof dfl__uc_comp_pairs / sizeof *dfl__uc_comp_pairs;
    uint64_t key = (uint64_t)a << 21 | b;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k = (uint64_t)dfl__uc_comp_pairs[mid][0] << 21 | dfl__uc_comp_pairs[mid][1];
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < sizeof dfl__uc_comp_pairs / sizeof *dfl__uc_comp_pairs && dfl__uc_comp_pairs[lo][0] == a &&
        dfl__uc_comp_pairs[lo][1] == b)
        return dfl__uc_comp_pairs[lo][2];
    return 0;
}

int dfl__uc_is_second(uint32_t cp)
{
    if (cp >= V_BASE && cp < V_BASE + V_COUNT) return 1;
    if (cp > T_BASE && cp < T_BASE + T_COUNT) return 1;
    size_t lo = 0, hi = sizeof dfl__uc_comp_seconds / sizeof *dfl__uc_comp_seconds;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (dfl__uc_comp_seconds[mid] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sizeof dfl__uc_comp_seconds / sizeof *dfl__uc_comp_seconds && dfl__uc_comp_seconds[lo] == cp;
}

int dfl__uc_starts_segment(uint32_t cp, int compat)
{
    if (cp < 0x80) return 1;
    uint32_t d[DFL__UC_DECOMP_MAX];
    dfl__uc_decompose(cp, compat, d);
    return dfl__uc_ccc(d[0]) == 0 && !dfl__uc_is_second(d[0]);
}

/* ------------------------------------------------------ normalization ---- */

static int push(dfl__uc_buf *b, uint32_t cp, int change)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? 2 * b->cap : 64;
        uint32_t *ncp = realloc(b->cp, nc * sizeof *ncp);
        if (!ncp) return 1;
        b->cp = ncp;
        int8_t *nch = realloc(b->change, nc);
        if (!nch) return 1;
        b->change = nch;
        b->cap = nc;
    }
    b->cp[b->n] = cp;
    b->change[b->n++] = (int8_t)change;
    return 0;
}

void dfl__uc_buf_free(dfl__uc_buf *b)
{
    free(b->cp);
    free(b->change);
    memset(b, 0, sizeof *b);
}

/* Append the held marks to out and empty them; 1 when out of memory. */
static int flush(dfl__uc_buf *held, dfl__uc_buf *out)
{
    for (size_t q = 0; q < held->n; q++)
        if (push(out, held->cp[q], held->change[q])) return 1;
    held->n = 0;
    return 0;
}

dfl_status dfl__uc_normalize(const uint32_t *in, size_t n, int compat, int compose, dfl__uc_buf tmp[2],
                             dfl__uc_buf *out)
{
    /* decompose: every unit with change 0 for a character's first, +1 for the others */
    dfl__uc_buf *u = compose ? &tmp[0] : out, *held = &tmp[1];
    u->n = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t d[DFL__UC_DECOMP_MAX];
        size_t m = dfl__uc_decompose(in[i], compat, d);
        for (size_t j = 0; j < m; j++)
            if (push(u, d[j], j ? 1 : 0)) return DFL_ERR_NOMEM;
    }
    /* canonical ordering: a stable sort by class of each run of non-starters (the
     * crate's sort_by_key of the pending block) — runs are short: insertion sort */
    for (size_t i = 1; i < u->n; i++) {
        int ci = dfl__uc_ccc(u->cp[i]);
        if (!ci) continue;
        for (size_t j = i; j > 0; j--) {
            int cj = dfl__uc_ccc(u->cp[j - 1]);
            if (!cj || cj <= ci) break;
            uint32_t tc = u->cp[j];
            u->cp[j] = u->cp[j - 1];
            u->cp[j - 1] = tc;
            int8_t th = u->change[j];
            u->change[j] = u->change[j - 1];
            u->change[j - 1] = th;
        }
    }
    if (!compose) return DFL_OK;

    /* recompose: the crate's Recompositions state machine step for step; its output
     * order (the composee, then the marks it could not take) is what the alignments
     * follow. k = the composee, held = the marks kept back behind it. */
    out->n = 0;
    held->n = 0;
    int have = 0, last_ccc = -1, kch = 0;
    uint32_t kc = 0;
    for (size_t i = 0; i < u->n; i++) {
        uint32_t ch = u->cp[i];
        int change = u->change[i], cls = dfl__uc_ccc(ch);
        if (!have) {
            if (cls == 0)
                kc = ch, kch = change, have = 1;
            else if (push(out, ch, change))
                return DFL_ERR_NOMEM;
            continue;
        }
        if (last_ccc >= cls) { /* blocked from the composee */
            if (cls == 0) {
                if (push(out, kc, kch) || flush(held, out)) return DFL_ERR_NOMEM;
                kc = ch, kch = change, last_ccc = -1;
                continue;
            }
        } else {
            uint32_t r = dfl__uc_compose(kc, ch);
            if (r) {
                kc = r, kch = kch + change - 1;
                continue;
            }
            if (last_ccc < 0 && cls == 0) {
                if (push(out, kc, kch)) return DFL_ERR_NOMEM;
                kc = ch, kch = change;
                continue;
            }
        }
        if (push(held, ch, change)) return DFL_ERR_NOMEM;
        last_ccc = cls;
    }
    if (have && push(out, kc, kch)) return DFL_ERR_NOMEM;
    return flush(held, out) ? DFL_ERR_NOMEM : DFL_OK;
}
