/* tokenizer_regex.c — a tokenizer.json regex rewritten so that PCRE2 matches it as
 * Hugging Face's engine (Oniguruma 6.9.10, Unicode 16.0.0) does.
 *
 * PCRE2's own Unicode tables are those of its build (Unicode 14 in Debian 12's 10.42)
 * and its \s is not Oniguruma's (PCRE2 adds U+180E; Oniguruma's \s is White_Space).
 * PCRE2 cannot be given other tables, so every class escape whose meaning depends on
 * them — \s \S \d \D \w \W and \p{..} \P{..} of a general category — is replaced,
 * before compiling, by Oniguruma's definition over this library's Unicode 16.0.0
 * tables (tokenizer_unicode.c): \s = White_Space, \d = Nd, \w = Alphabetic | M | Nd |
 * Pc (Oniguruma's make_unicode_property_data.py). A general-category class is written
 * as PCRE2's own \p{Xx} items (a table lookup: explicit range lists of a few hundred
 * items made CJK and Arabic text 1.7x slower to match) plus the ranges of what Unicode
 * assigned after PCRE2's tables; the rest as explicit ranges. Escapes of scripts
 * (\p{Han}) and the like stay PCRE2's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "text/tokenizer_internal.h"

/* A class as a predicate: general categories (bit DFL__GC_*) or the two properties. */
#define CLS_WHITE_SPACE (1ull << 30)
#define CLS_ALPHABETIC  (1ull << 31)
/* Oniguruma's \w and \W outside a class take Latin-1's other numbers ² ³ ¹ ¼ ½ ¾
 * (U+00B2, B3, B9, BC-BE; No, not Nd) for word characters, inside a class not (its
 * single-byte path reads the Latin-1 ctype table) — seen on the reference, kept so. */
#define CLS_LATIN1_NUMBERS (1ull << 32)
#define GC(x)              (1ull << DFL__GC_##x)
#define GC_L               (GC(LU) | GC(LL) | GC(LT) | GC(LM) | GC(LO))
#define GC_M               (GC(MN) | GC(MC) | GC(ME))
#define GC_N               (GC(ND) | GC(NL) | GC(NO))
#define GC_P               (GC(PC) | GC(PD) | GC(PS) | GC(PE) | GC(PI) | GC(PF) | GC(PO))
#define GC_S               (GC(SM) | GC(SC) | GC(SK) | GC(SO))
#define GC_Z               (GC(ZS) | GC(ZL) | GC(ZP))
#define GC_C               (GC(CC) | GC(CF) | GC(CS) | GC(CO) | GC(CN))

static const struct {
    const char *name;
    uint64_t mask;
} props[] = {
    {"L", GC_L},
    {"Letter", GC_L},
    {"LC", GC(LU) | GC(LL) | GC(LT)},
    {"L&", GC(LU) | GC(LL) | GC(LT)},
    {"Lu", GC(LU)},
    {"Ll", GC(LL)},
    {"Lt", GC(LT)},
    {"Lm", GC(LM)},
    {"Lo", GC(LO)},
    {"M", GC_M},
    {"Mark", GC_M},
    {"Mn", GC(MN)},
    {"Mc", GC(MC)},
    {"Me", GC(ME)},
    {"N", GC_N},
    {"Number", GC_N},
    {"Nd", GC(ND)},
    {"Nl", GC(NL)},
    {"No", GC(NO)},
    {"P", GC_P},
    {"Punctuation", GC_P},
    {"Pc", GC(PC)},
    {"Pd", GC(PD)},
    {"Ps", GC(PS)},
    {"Pe", GC(PE)},
    {"Pi", GC(PI)},
    {"Pf", GC(PF)},
    {"Po", GC(PO)},
    {"S", GC_S},
    {"Symbol", GC_S},
    {"Sm", GC(SM)},
    {"Sc", GC(SC)},
    {"Sk", GC(SK)},
    {"So", GC(SO)},
    {"Z", GC_Z},
    {"Separator", GC_Z},
    {"Zs", GC(ZS)},
    {"Zl", GC(ZL)},
    {"Zp", GC(ZP)},
    {"C", GC_C},
    {"Other", GC_C},
    {"Cc", GC(CC)},
    {"Cf", GC(CF)},
    {"Co", GC(CO)},
    {"Cn", GC(CN)},
    {"White_Space", CLS_WHITE_SPACE},
    {"Alphabetic", CLS_ALPHABETIC},
};

/* Membership by the property byte (tokenizer_unicode.c's), then the few single code points. */
static int props_in(unsigned props, uint64_t mask)
{
    if (mask & (1ull << (props & 0x1F))) return 1;
    if ((mask & CLS_WHITE_SPACE) && (props & 0x20)) return 1;
    return (mask & CLS_ALPHABETIC) && (props & 0x40);
}

static int in_class(uint32_t cp, uint64_t mask)
{
    if ((mask & CLS_LATIN1_NUMBERS) && (cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0xBC && cp <= 0xBE))) return 1;
    return props_in(dfl__uc_props(cp), mask);
}

typedef struct range {
    uint32_t lo, hi;
} range;

/* Wider ranges first: PCRE2 tries a class's items above U+00FF one by one, in order,
 * and the wide ranges are where the text of a script is (CJK, Hangul, Cyrillic, Latin
 * Extended); equal widths keep code point order. */
static int wider_first(const void *pa, const void *pb)
{
    const range *a = pa, *b = pb;
    uint32_t wa = a->hi - a->lo, wb = b->hi - b->lo;
    if (wa != wb) return wa > wb ? -1 : 1;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* The ranges of the class (or of its complement) into *v (malloc'ed [*n]); surrogates
 * are never in (PCRE2 refuses them in UTF mode). Blocks of 256 code points with one
 * property byte (most of the code space) are decided at once. 0 when out of memory. */
static int class_ranges(uint64_t mask, int negate, range **v, size_t *n)
{
    size_t cnt = 0, cap = 256;
    range *r = malloc(cap * sizeof *r);
    if (!r) return 0;
    int open = 0;
    uint32_t lo = 0;
    for (uint32_t blk = 0; blk <= 0x1100; blk++) {
        unsigned props = 0;
        int same = blk > 0 && blk < 0x1100 && dfl__uc_block_same(blk, &props) && !(blk >= 0xD8 && blk < 0xE0);
        for (uint32_t cp = blk << 8, end = blk < 0x1100 ? cp + 256 : cp + 1; cp < end; cp++) {
            int in = cp >= 0x110000 || (cp >= 0xD800 && cp < 0xE000)
                         ? 0
                         : (same ? props_in(props, mask) : in_class(cp, mask)) != negate;
            if (in && !open) open = 1, lo = cp;
            if (!in && open) {
                open = 0;
                if (cnt == cap) {
                    range *nr = realloc(r, 2 * cap * sizeof *r);
                    if (!nr) {
                        free(r);
                        return 0;
                    }
                    r = nr;
                    cap *= 2;
                }
                r[cnt].lo = lo;
                r[cnt++].hi = cp - 1;
            }
            if (same) break; /* the whole block alike */
        }
    }
    qsort(r, cnt, sizeof *r, wider_first);
    *v = r;
    *n = cnt;
    return 1;
}

/* PCRE2's Unicode version as major * 10 + minor ("14.0.0" → 140), 0 if unknown. */
static int pcre2_unicode(void)
{
    char v[32] = {0};
    if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, v) < 0) return 0;
    int major = 0, minor = 0;
    if (sscanf(v, "%d.%d", &major, &minor) != 2 || major < 1 || minor < 0 || minor > 9) return 0;
    return major * 10 + minor;
}

/* The fast exact form of a general-category class: PCRE2's own \p{Xx} of each category
 * (a table lookup) plus the ranges of the characters Unicode assigned after PCRE2's
 * tables (unassigned, Cn, in PCRE2: in none of these classes). Exact while no
 * character PCRE2's version had changed category by 16.0, which
 * tests/test_tokenizer_sweep.py checks against the reference on every code point.
 * 0 when the form does not apply (Cn or a property in the class, PCRE2 newer than 16.0
 * or of unknown version): then the class is written out as ranges. */
static int put_hybrid(dfl_strbuf *b, uint64_t mask, int v)
{
    static const char *const names[DFL__GC_COUNT] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
                                                     "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
                                                     "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
    if (!v || v > 160 || (mask & (GC(CN) | CLS_WHITE_SPACE | CLS_ALPHABETIC | CLS_LATIN1_NUMBERS))) return 0;
    for (int g = 1; g < DFL__GC_COUNT; g++)
        if (mask & (1ull << g)) dfl_strbuf_printf(b, "\\p{%s}", names[g]);
    range *r = NULL;
    size_t n = 0;
    if (!class_ranges(mask, 0, &r, &n)) {
        b->oom = 1;
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        for (uint32_t lo = r[i].lo; lo <= r[i].hi; lo++) { /* the part assigned after PCRE2's tables */
            if (dfl__uc_age(lo) <= v) continue;
            uint32_t hi = lo;
            while (hi < r[i].hi && dfl__uc_age(hi + 1) > v)
                hi++;
            if (lo == hi)
                dfl_strbuf_printf(b, "\\x{%X}", (unsigned)lo);
            else
                dfl_strbuf_printf(b, "\\x{%X}-\\x{%X}", (unsigned)lo, (unsigned)hi);
            lo = hi;
        }
    free(r);
    return 1;
}

/* Append the class as class items "\x{..}-\x{..}". */
static void put_ranges(dfl_strbuf *b, uint64_t mask, int negate)
{
    range *r = NULL;
    size_t n = 0;
    if (!class_ranges(mask, negate, &r, &n)) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (r[i].lo == r[i].hi)
            dfl_strbuf_printf(b, "\\x{%X}", (unsigned)r[i].lo);
        else
            dfl_strbuf_printf(b, "\\x{%X}-\\x{%X}", (unsigned)r[i].lo, (unsigned)r[i].hi);
    free(r);
}

/* The mask of a property name (Oniguruma's loose matching: case, spaces, '_' and '-'
 * ignored), or 0 when it is not one of ours. */
static uint64_t prop_mask(const char *s, size_t n)
{
    char key[40];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < sizeof key; i++)
        if (s[i] != ' ' && s[i] != '_' && s[i] != '-')
            key[k++] = (char)(s[i] | (s[i] >= 'A' && s[i] <= 'Z' ? 0x20 : 0));
    key[k] = '\0';
    for (size_t i = 0; i < sizeof props / sizeof *props; i++) {
        char want[40];
        size_t m = 0;
        for (const char *p = props[i].name; *p && m + 1 < sizeof want; p++)
            if (*p != '_') want[m++] = (char)(*p | (*p >= 'A' && *p <= 'Z' ? 0x20 : 0));
        want[m] = '\0';
        if (!strcmp(key, want)) return props[i].mask;
    }
    return 0;
}

dfl_status dfl__regex_rewrite(const char *pat, size_t n, char **out, size_t *out_len)
{
    dfl_strbuf b = {0};
    int in_cls = 0; /* inside [...] */
    int pcre2_v = pcre2_unicode();
    for (size_t i = 0; i < n;) {
        char c = pat[i];
        if (c == '[' && !in_cls) {
            in_cls = 1;
            dfl_strbuf_add(&b, pat + i, 1);
            i++;
            /* a leading ^ and a leading ] are part of the class's opening */
            if (i < n && pat[i] == '^') dfl_strbuf_add(&b, pat + i++, 1);
            if (i < n && pat[i] == ']') dfl_strbuf_add(&b, pat + i++, 1);
            continue;
        }
        if (c == '[' && in_cls && i + 1 < n && pat[i + 1] == ':') { /* a POSIX class [:alpha:] */
            const char *e = memchr(pat + i + 2, ']', n - i - 2);
            size_t m = e ? (size_t)(e - pat) + 1 - i : 1;
            dfl_strbuf_add(&b, pat + i, m);
            i += m;
            continue;
        }
        if (c == ']' && in_cls) {
            in_cls = 0;
            dfl_strbuf_add(&b, pat + i++, 1);
            continue;
        }
        if (c != '\\' || i + 1 >= n) {
            dfl_strbuf_add(&b, pat + i++, 1);
            continue;
        }
        char e = pat[i + 1];
        uint64_t mask = 0;
        int negate = 0;
        size_t len = 2; /* bytes of the escape */
        switch (e) {
        case 's': mask = CLS_WHITE_SPACE; break;
        case 'S': mask = CLS_WHITE_SPACE, negate = 1; break;
        case 'd': mask = GC(ND); break;
        case 'D': mask = GC(ND), negate = 1; break;
        case 'w': mask = CLS_ALPHABETIC | GC_M | GC(ND) | GC(PC); break;
        case 'W': mask = CLS_ALPHABETIC | GC_M | GC(ND) | GC(PC), negate = 1; break;
        case 'p':
        case 'P':
            negate = e == 'P';
            if (i + 2 < n && pat[i + 2] == '{') {
                const char *close = memchr(pat + i + 3, '}', n - i - 3);
                if (close) {
                    const char *name = pat + i + 3;
                    size_t nl = (size_t)(close - name);
                    if (nl && name[0] == '^') negate = !negate, name++, nl--;
                    mask = prop_mask(name, nl);
                    len = (size_t)(close - pat) + 1 - i;
                }
            } else if (i + 2 < n) {
                mask = prop_mask(pat + i + 2, 1);
                len = 3;
            }
            break;
        default: break;
        }
        if (!mask) { /* not ours: the escape as written (and what it escapes) */
            dfl_strbuf_add(&b, pat + i, 2);
            i += 2;
            continue;
        }
        if ((e == 'w' || e == 'W') && !in_cls) mask |= CLS_LATIN1_NUMBERS;
        if (in_cls && negate) { /* a complement among other items: only as ranges */
            put_ranges(&b, mask, 1);
        } else {
            if (!in_cls) dfl_strbuf_puts(&b, negate ? "[^" : "[");
            if (!put_hybrid(&b, mask, pcre2_v)) put_ranges(&b, mask, 0);
            if (!in_cls) dfl_strbuf_puts(&b, "]");
        }
        i += len;
    }
    if (b.oom || !b.p) {
        if (!b.oom && !b.p) { /* an empty pattern */
            *out = calloc(1, 1);
            *out_len = 0;
            return *out ? DFL_OK : DFL_ERR_NOMEM;
        }
        dfl_strbuf_free(&b);
        return DFL_ERR_NOMEM;
    }
    *out = b.p;
    *out_len = b.len;
    return DFL_OK;
}
