/* tokenizer_regex.c — a tokenizer.json regex rewritten so that PCRE2 matches it as
 * Hugging Face's engine (Oniguruma 6.9.10, Unicode 16.0.0) does.
 *
 * PCRE2's own Unicode tables are those of its build (Unicode 14 in Debian 12's 10.42)
 * and its \s is not Oniguruma's (PCRE2 adds U+180E; Oniguruma's \s is White_Space).
 * PCRE2 cannot be given other tables, so every class escape whose meaning depends on
 * them — \s \S \d \D \w \W and \p{..} \P{..} of a general category — is replaced,
 * before compiling, by the explicit code point ranges of Oniguruma's definition over
 * this library's Unicode 16.0.0 tables (tokenizer_unicode.c): \s = White_Space,
 * \d = Nd, \w = Alphabetic | M | Nd | Pc (Oniguruma's make_unicode_property_data.py).
 * PCRE2 matches code points below 256 by a bitmap and the rest by the range list.
 * Escapes of scripts (\p{Han}) and the like stay PCRE2's.
 */
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

/* Append the ranges of the class (or of its complement) as class items "\x{..}-\x{..}";
 * surrogates are never items (PCRE2 refuses them in UTF mode). Blocks of 256 code
 * points with one property byte (most of the code space) are decided at once. */
static void put_ranges(dfl_strbuf *b, uint64_t mask, int negate)
{
    int open = 0; /* a range is open, from lo */
    uint32_t lo = 0;
    for (uint32_t blk = 0; blk < 0x1100; blk++) {
        unsigned props;
        int same = blk > 0 && dfl__uc_block_same(blk, &props) && !(blk >= 0xD8 && blk < 0xE0);
        for (uint32_t cp = blk << 8, end = cp + 256; cp < end; cp++) {
            int in = cp >= 0xD800 && cp < 0xE000 ? 0 : (same ? props_in(props, mask) : in_class(cp, mask)) != negate;
            if (same) { /* the whole block alike */
                if (in && !open) open = 1, lo = cp;
                if (!in && open) {
                    open = 0;
                    if (lo == cp - 1)
                        dfl_strbuf_printf(b, "\\x{%X}", (unsigned)lo);
                    else
                        dfl_strbuf_printf(b, "\\x{%X}-\\x{%X}", (unsigned)lo, (unsigned)cp - 1);
                }
                break;
            }
            if (in && !open) open = 1, lo = cp;
            if (!in && open) {
                open = 0;
                if (lo == cp - 1)
                    dfl_strbuf_printf(b, "\\x{%X}", (unsigned)lo);
                else
                    dfl_strbuf_printf(b, "\\x{%X}-\\x{%X}", (unsigned)lo, (unsigned)cp - 1);
            }
        }
    }
    if (open) dfl_strbuf_printf(b, "\\x{%X}-\\x{10FFFF}", (unsigned)lo);
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
        if (in_cls) {
            put_ranges(&b, mask, negate);
        } else {
            dfl_strbuf_puts(&b, "[");
            put_ranges(&b, mask, negate);
            dfl_strbuf_puts(&b, "]");
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
