/* tokenizer_internal.h — what the tokenizer's files share (not a public header).
 *
 * The tokenizer is split by job: tokenizer_json.c (a JSON reader), tokenizer_load.c
 * (tokenizer.json → the structs below), tokenizer_norm.c (the working string with
 * its alignments, and the normalizers), tokenizer_pretok.c (pre-tokenizers),
 * tokenizer_bpe.c (vocabulary, merges, BPE), tokenizer_added.c (added tokens),
 * tokenizer.c (the encode pipeline and post-processors) and tokenizer_decode.c.
 *
 * Offsets follow Hugging Face tokenizers: every byte of the working (normalized)
 * string carries the [start, end) byte range of the original character it came
 * from; a token's offsets are the first byte's start and the last byte's end.
 */
#ifndef DFL_TOKENIZER_INTERNAL_H
#define DFL_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/utf8.h" /* re-export: dfl__utf8_next, _put, _check for every tokenizer file */
#include "text/tokenizer.h"

/* ---- JSON (tokenizer_json.c) ---- */

enum { DFL__J_NULL, DFL__J_FALSE, DFL__J_TRUE, DFL__J_NUM, DFL__J_STR, DFL__J_ARR, DFL__J_OBJ };

typedef struct dfl__jv {
    uint8_t type;
    uint32_t n;      /* string length in bytes, or number of children */
    const char *key; /* member name when inside an object (NUL-terminated) */
    uint32_t key_len;
    union {
        double num;
        const char *str;      /* NUL-terminated, may contain NULs (\u0000) */
        struct dfl__jv *kids; /* [n] */
    } u;
} dfl__jv;

typedef struct dfl__jdoc dfl__jdoc;

/* Parse buf[len] (modified in place: strings are unescaped where they stand; buf
 * must stay alive while the document is used and have buf[len] == '\0'). Caller
 * frees with dfl__jdoc_free. DFL_ERR_FORMAT with the byte offset on bad JSON. An
 * object that repeats a key keeps only its last member (base/jsondoc.h's rule). */
dfl_status dfl__jdoc_parse(char *buf, size_t len, dfl__jdoc **out, const dfl__jv **root, dfl_error *err);
void dfl__jdoc_free(dfl__jdoc *d);

/* Member `key` of object o, or NULL (also when o is not an object). Keys are unique:
 * the parser keeps only the last member of a repeated key. */
const dfl__jv *dfl__jget(const dfl__jv *o, const char *key);

/* ---- the working string (tokenizer_norm.c) ---- */

typedef struct dfl__tk_align {
    uint32_t s, e; /* original byte range of the character this byte came from */
} dfl__tk_align;

/* A run of appended store bytes with one rule for their alignments: from appended
 * byte `at` to the next run's, either a copy of the original text from byte x on
 * (e == UINT32_MAX: each byte aligns as the original byte it copies), or all aligned
 * to [x, e). A normalizer that changes a few characters of a long text adds a few
 * runs, not 8 bytes of alignment a byte. */
typedef struct dfl__tk_run {
    uint32_t at, x, e;
} dfl__tk_run;

/* All working text of one encode call: pieces are appended, never moved out. Offsets
 * [0, orig_len) are the caller's text itself (not copied; each byte aligns to its own
 * character, computed when asked); offsets from orig_len on are appended bytes in b[]
 * with their alignments as runs. A piece lies wholly in one of the two. */
typedef struct dfl__tk_store {
    const char *orig; /* [orig_len] the original text, owned by the caller */
    size_t orig_len;
    char *b;           /* [cap] appended bytes: offset orig_len + i is b[i] */
    size_t len, cap;   /* len: offsets in use (orig_len + appended) */
    dfl__tk_run *runs; /* [runs_cap] ascending at, runs[0].at == 0 when any */
    size_t n_runs, runs_cap;
    size_t hint; /* the run the last lookup found: lookups come nearly in order */
} dfl__tk_store;

/* The bytes at store offset off (valid until the next append). */
static inline const char *dfl__store_at(const dfl__tk_store *s, size_t off)
{
    return off < s->orig_len ? s->orig + off : s->b + (off - s->orig_len);
}

/* The alignment of the byte at store offset off. */
dfl__tk_align dfl__store_al(const dfl__tk_store *s, size_t off);

/* Drop the store's bytes from offset len on (not below orig_len). */
void dfl__store_truncate(dfl__tk_store *s, size_t len);
void dfl__store_free(dfl__tk_store *s);

/* A piece of the input on its way through the pipeline. */
typedef struct dfl__tk_split {
    size_t off, len; /* bytes in the store */
    int64_t token;   /* an added token's id, or -1 */
    int byte_level;  /* 1 once the ByteLevel pre-tokenizer has taken it */
    uint32_t orig_s; /* original byte where the piece starts (for empty pieces) */
} dfl__tk_split;

typedef struct dfl__tk_splits {
    dfl__tk_split *v;
    size_t n, cap;
} dfl__tk_splits;

/* Room for extra more appended bytes. */
dfl_status dfl__store_reserve(dfl__tk_store *s, size_t extra);
/* Append n bytes that all align to `al`. */
dfl_status dfl__store_put(dfl__tk_store *s, const char *b, size_t n, dfl__tk_align al);
dfl_status dfl__splits_push(dfl__tk_splits *l, dfl__tk_split sp);

/* ---- components ---- */

enum {
    /* normalizers */
    DFL__N_SEQUENCE = 1,
    DFL__N_PREPEND,
    DFL__N_REPLACE,
    DFL__N_NFC,
    DFL__N_NFD,
    DFL__N_NFKC,
    DFL__N_NFKD,
    DFL__N_LOWERCASE,
    DFL__N_STRIP,
    DFL__N_STRIP_ACCENTS,
    DFL__N_BERT,
    /* pre-tokenizers */
    DFL__P_SEQUENCE,
    DFL__P_SPLIT,
    DFL__P_BYTELEVEL,
    DFL__P_METASPACE,
    DFL__P_DIGITS,
    DFL__P_PUNCTUATION,
    DFL__P_WHITESPACE,
    DFL__P_WHITESPACE_SPLIT,
    DFL__P_BERT,
    /* post-processors */
    DFL__PP_SEQUENCE,
    DFL__PP_TEMPLATE,
    DFL__PP_BYTELEVEL,
    /* decoders */
    DFL__D_SEQUENCE,
    DFL__D_BYTELEVEL,
    DFL__D_METASPACE,
    DFL__D_BYTEFALLBACK,
    DFL__D_FUSE,
    DFL__D_STRIP,
    DFL__D_REPLACE
};

/* Split behaviours, as Hugging Face names them. */
enum { DFL__B_REMOVED, DFL__B_ISOLATED, DFL__B_MERGED_PREV, DFL__B_MERGED_NEXT, DFL__B_CONTIGUOUS };
/* Metaspace prepend schemes. */
enum { DFL__PS_ALWAYS, DFL__PS_NEVER, DFL__PS_FIRST };

typedef struct dfl__tk_piece { /* one TemplateProcessing item */
    int is_seq;                /* 1: the sequence A; 0: a special token */
    uint32_t *ids;             /* [n_ids] when special */
    size_t n_ids;
} dfl__tk_piece;

typedef struct dfl__tk_step {
    int kind;
    struct dfl__tk_step *kids; /* [n_kids] for Sequence */
    size_t n_kids;
    char *pat; /* literal pattern (Split/Replace String, Prepend text, Strip/Metaspace char) */
    size_t pat_len;
    char *content; /* Replace content */
    size_t content_len;
    pcre2_code *re; /* compiled Regex/String pattern (Split, Replace) */
    int behavior, invert, prefix_space, use_regex, trim_offsets, prepend_scheme, split;
    int individual;                                    /* Digits individual_digits */
    int left, right;                                   /* Strip normalizer */
    int clean_text, chinese, strip_accents, lowercase; /* BertNormalizer */
    size_t start, stop;                                /* Strip decoder */
    dfl__tk_piece *tmpl;                               /* [n_tmpl] TemplateProcessing single */
    size_t n_tmpl;
} dfl__tk_step;

/* ---- vocabulary and BPE (tokenizer_bpe.c) ---- */

/* One lookup slot: everything a probe needs, so a hit costs the slot and the string. */
typedef struct dfl__tk_slot {
    uint32_t tag; /* high half of the hash */
    uint32_t id;
    uint32_t off, len; /* the string in the pool */
} dfl__tk_slot;

typedef struct dfl__tk_vocab {
    char *pool; /* every token's bytes, each NUL-terminated */
    size_t pool_len;
    uint64_t *ref;              /* [n] offset << 24 | length (tokens < 16 MB) */
    uint8_t *used;              /* [n] 1 when the id exists */
    size_t n;                   /* ids 0..n-1 */
    struct dfl__tk_slot *slots; /* [mask + 1] open addressing (len 0 and id UINT32_MAX = empty) */
    size_t mask;
} dfl__tk_vocab;

typedef struct dfl__tk_cache dfl__tk_cache;

typedef struct dfl__tk_bpe {
    uint64_t *merges; /* [2 * (mmask + 1)]: key (left id << 32 | right id) + 1 (0 = empty),
                       * then rank << 32 | merged id, side by side */
    size_t mmask;
    int byte_fallback, fuse_unk, ignore_merges;
    int64_t unk;           /* unk id or -1 */
    char *prefix;          /* continuing_subword_prefix or NULL */
    char *suffix;          /* end_of_word_suffix or NULL */
    uint32_t byte_id[256]; /* vocab id of <0xXX> + 1, 0 when absent (byte_fallback) */
    uint32_t bl_id[256];   /* vocab id of ByteLevel's char for each byte + 1, 0 when absent */
    dfl__tk_cache *cache;
} dfl__tk_bpe;

/* Look a string up: id or -1. */
int64_t dfl__vocab_find(const dfl__tk_vocab *v, const char *s, size_t n);
/* The same with its hash precomputed (dfl__vocab_hash), and a prefetch of the slot
 * (string_too = 0) or, once the slot is cached, of the string it points to (1): a batch
 * of lookups then waits for memory once instead of once per lookup. */
uint64_t dfl__vocab_hash(const char *s, size_t n);
int64_t dfl__vocab_find_h(const dfl__tk_vocab *v, const char *s, size_t n, uint64_t h);
void dfl__vocab_prefetch(const dfl__tk_vocab *v, uint64_t h, int string_too);
/* Token text of an id (NULL when the id is unused). */
const char *dfl__vocab_str(const dfl__tk_vocab *v, uint32_t id, size_t *n);
dfl_status dfl__vocab_init(dfl__tk_vocab *v, size_t n_ids, size_t pool_bytes, dfl_error *err);
/* Add id → s; DFL_ERR_FORMAT on a duplicate id (a string under two ids keeps the
 * first for lookups). */
dfl_status dfl__vocab_add(dfl__tk_vocab *v, uint32_t id, const char *s, size_t n, dfl_error *err);
void dfl__vocab_free(dfl__tk_vocab *v);

dfl_status dfl__bpe_merges_init(dfl__tk_bpe *m, size_t n_merges, dfl_error *err);
/* Register merge (a, b) → ab with its rank; a later duplicate pair replaces the earlier. */
void dfl__bpe_merge_add(dfl__tk_bpe *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id);
void dfl__bpe_free(dfl__tk_bpe *m);

/* A token the model produced: id and byte range in the word. */
typedef struct dfl__tk_tok {
    uint32_t id;
    uint32_t s, e;
} dfl__tk_tok;

typedef struct dfl__tk_toks {
    dfl__tk_tok *v;
    size_t n, cap;
} dfl__tk_toks;

/* Tokenize one word (w[n] bytes of valid UTF-8; byte_level: the ByteLevel mapping
 * applies) and append its tokens to out with ranges shifted by `base`. */
dfl_status dfl__bpe_word(const dfl_tokenizer *t, const char *w, size_t n, int byte_level, uint32_t base,
                         dfl__tk_toks *out, dfl_error *err);

/* ---- the tokenizer ---- */

typedef struct dfl__tk_added {
    uint32_t id;
    char *content;
    size_t len;
    int special, lstrip, rstrip, single_word, normalized;
} dfl__tk_added;

typedef struct dfl__tk_trie dfl__tk_trie;

struct dfl_tokenizer {
    dfl__tk_vocab vocab; /* model vocabulary plus added tokens */
    dfl__tk_bpe bpe;
    dfl__tk_step *normalizer, *pretok, *post, *decoder; /* NULL when absent */
    dfl__tk_added *added;                               /* [n_added] */
    size_t n_added;
    dfl__tk_trie *trie_raw;  /* added tokens matched on the original text */
    dfl__tk_trie *trie_norm; /* added tokens matched on normalized text */
    uint8_t *norm_pairs;     /* [65536 / 8] bit a << 8 | b: a trie_norm token holds bytes a, b in a row; or NULL */
    int norm_strips;         /* a trie_norm token has lstrip, rstrip or single_word */
    uint8_t *cut;            /* [128 * 128 / 8] bit a << 7 | b: a text may be cut between ASCII a, b; or NULL */
    uint8_t *is_special;     /* [vocab.n] 1 for special added tokens */
    char *chat_template;     /* the folder's chat template, or NULL (tokenizer_config.c) */
    char *chat_specials;     /* its special tokens as a JSON object, or NULL */
};

/* Read tokenizer_config.json and chat_template.jinja from dir, when there
 * (tokenizer_config.c): add_bos_token / add_eos_token as transformers applies them, the
 * chat template and the special tokens it is rendered with. */
dfl_status dfl__tokenizer_read_config(dfl_tokenizer *t, const char *dir, dfl_error *err);

/* ByteLevel's byte → code point table (GPT-2). */
uint32_t dfl__bytelevel_char(uint8_t b);
/* Inverse: code point → byte, or -1. */
int dfl__bytelevel_byte(uint32_t cp);

/* Normalize the split in place (new bytes appended to the store). prepend: NULL for a
 * whole text; for one window of a text (tokenizer_window.c), a flag that is 1 until a
 * Prepend step has acted on the first window it found non-empty, as it acts once on
 * the whole text. */
dfl_status dfl__normalize(const dfl__tk_step *st, dfl__tk_store *s, dfl__tk_split *sp, int *prepend, dfl_error *err);
/* Replace every match of st->re in the split with st->content (HF `replace`). */
dfl_status dfl__norm_replace(const pcre2_code *re, const char *content, size_t content_len, dfl__tk_store *s,
                             dfl__tk_split *sp, dfl_error *err);
/* Prepend text to a non-empty split, aligned to its first character. */
dfl_status dfl__norm_prepend(const char *p, size_t n, dfl__tk_store *s, dfl__tk_split *sp);

/* Where pre-tokenized pieces go, one call each in order; a status other than DFL_OK
 * stops the pre-tokenizer and is returned. The store may be appended to in the call. */
typedef dfl_status (*dfl__tk_piece_fn)(void *ctx, dfl__tk_store *s, dfl__tk_split sp, dfl_error *err);

/* Pre-tokenize the split sp (one with a token passes as it is), each piece to fn as it
 * is cut. What the steps append to the store is dropped again before the return. */
dfl_status dfl__pretokenize_each(const dfl__tk_step *st, dfl__tk_store *s, dfl__tk_split sp, dfl__tk_piece_fn fn,
                                 void *ctx, dfl_error *err);

/* Added tokens: build the two tries, and split pieces by them. */
dfl_status dfl__added_build(dfl_tokenizer *t, dfl_error *err);
void dfl__added_free(dfl_tokenizer *t);
dfl_status dfl__added_split(const dfl_tokenizer *t, int normalized, dfl__tk_store *s, dfl__tk_splits *in,
                            dfl__tk_splits *out, dfl_error *err);

/* ---- windows (tokenizer_window.c) ---- */

/* A split longer than 2 windows goes through the normalizer, the normalized added
 * tokens, the pre-tokenizer and the model a window at a time, cut where t->cut allows. */
#define DFL__WINDOW (64u << 10)

/* Set t->cut when the tokenizer's steps allow cuts (once, at load, after dfl__added_build);
 * NULL otherwise. */
dfl_status dfl__window_build(dfl_tokenizer *t, dfl_error *err);
/* Where the window of p[from, end) that starts at from ends: the first allowed cut at
 * or after from + DFL__WINDOW, or end (a short rest, no cut, or no t->cut). */
size_t dfl__window_end(const dfl_tokenizer *t, const char *p, size_t from, size_t end);

/* BPE's cut test of dfl__bpe_word: 1 when BPE gives w[0, i) and w[i, n) the tokens it
 * gives w (i a character boundary); -1 when out of memory. */
int dfl__bpe_can_cut(const dfl_tokenizer *t, const char *w, size_t n, size_t i);

/* Components: free recursively. */
void dfl__step_free(dfl__tk_step *st);

/* Character tests, each the one the reference's Rust code makes (tables of
 * tokenizer_unicode.c; which crate and Unicode version: DFL__RS_* below). */
int dfl__is_whitespace(uint32_t cp); /* char::is_whitespace */
int dfl__is_numeric(uint32_t cp);    /* char::is_numeric */
int dfl__is_punct(uint32_t cp);      /* tokenizers' is_punc: ASCII or unicode_categories punctuation */
int dfl__is_word(uint32_t cp);       /* the regex crate's \w */

/* ---- Unicode data (tokenizer_unicode.c, tables from scripts/gen_unicode_tables.py) ---- */

/* General categories, in the generator's order (Unicode 16.0.0, as Oniguruma 6.9.10). */
enum {
    DFL__GC_CN,
    DFL__GC_LU,
    DFL__GC_LL,
    DFL__GC_LT,
    DFL__GC_LM,
    DFL__GC_LO,
    DFL__GC_MN,
    DFL__GC_MC,
    DFL__GC_ME,
    DFL__GC_ND,
    DFL__GC_NL,
    DFL__GC_NO,
    DFL__GC_PC,
    DFL__GC_PD,
    DFL__GC_PS,
    DFL__GC_PE,
    DFL__GC_PI,
    DFL__GC_PF,
    DFL__GC_PO,
    DFL__GC_SM,
    DFL__GC_SC,
    DFL__GC_SK,
    DFL__GC_SO,
    DFL__GC_ZS,
    DFL__GC_ZL,
    DFL__GC_ZP,
    DFL__GC_CC,
    DFL__GC_CF,
    DFL__GC_CS,
    DFL__GC_CO,
    DFL__GC_COUNT
};
/* The longest full decomposition (U+FDFA under NFKD). */
#define DFL__UC_DECOMP_MAX 18

int dfl__uc_gc(uint32_t cp);          /* general category (DFL__GC_*) of Unicode 16.0.0 */
int dfl__uc_white_space(uint32_t cp); /* the White_Space property (16.0.0): Oniguruma's \s */
/* The property byte of cp: general category | 0x20 White_Space | 0x40 Alphabetic. */
unsigned dfl__uc_props(uint32_t cp);
/* 1 when the 256 code points of block (cp >> 8) all have one property byte, *props. */
int dfl__uc_block_same(uint32_t block, unsigned *props);
/* The Unicode version that assigned cp, major * 10 + minor (14.0 → 140); 0 unassigned. */
int dfl__uc_age(uint32_t cp);
int dfl__uc_alphabetic(uint32_t cp); /* the Alphabetic property (16.0.0) */
int dfl__uc_ccc(uint32_t cp);        /* canonical combining class (9.0.0) */

/* The properties Hugging Face tokenizers reads through Rust code rather than its regex
 * engine: the bits of dfl__uc_rs, each from the tables of its own crate and version. */
enum {
    DFL__RS_NUMERIC = 0x01, /* Rust 1.94 (Unicode 17.0.0) char::is_numeric: General_Category N */
    DFL__RS_WHITE = 0x02,   /* Rust 1.94 (17.0.0) char::is_whitespace: White_Space */
    DFL__RS_PUNCT = 0x04,   /* unicode_categories 0.1.1 (8.0.0) is_punctuation: P* */
    DFL__RS_OTHER = 0x08,   /* unicode_categories (8.0.0) is_other: Cc, Cf, Co */
    DFL__RS_MN = 0x10,      /* unicode_categories (8.0.0) is_mark_nonspacing: Mn */
    DFL__RS_MARK = 0x20,    /* unicode-normalization-alignments (9.0.0) is_combining_mark: M */
    DFL__RS_WORD = 0x40     /* regex-syntax 0.8.10 (16.0.0) \w: Alphabetic, M, Nd, Pc, Join_Control */
};
unsigned dfl__uc_rs(uint32_t cp);
/* Rust's char::to_lowercase (17.0.0: the simple mapping, or SpecialCasing's unconditional
 * one — U+0130 → i + U+0307; no final-sigma rule): the characters into out, their count. */
#define DFL__UC_LOWER_MAX 3
size_t dfl__uc_lower(uint32_t cp, uint32_t out[DFL__UC_LOWER_MAX]);
/* Full canonical (compat = 0) or compatibility decomposition of cp (9.0.0, Hangul
 * included) into out; returns its length (1: cp itself). */
size_t dfl__uc_decompose(uint32_t cp, int compat, uint32_t out[DFL__UC_DECOMP_MAX]);
/* The primary composite of a + b (9.0.0, Hangul included), or 0. */
uint32_t dfl__uc_compose(uint32_t a, uint32_t b);
/* 1 when cp is the second character of a primary composite. */
int dfl__uc_is_second(uint32_t cp);
/* 1 when normalization may start afresh before cp: its decomposition begins with a
 * starter that composes with nothing before it (every ASCII character). */
int dfl__uc_starts_segment(uint32_t cp, int compat);

/* Code points with the crate's change per character (0 replaces one, +1 inserts,
 * -k also removes k more), growable; zero-initialise, free with dfl__uc_buf_free. */
typedef struct dfl__uc_buf {
    uint32_t *cp;   /* [cap] */
    int8_t *change; /* [cap] */
    size_t n, cap;
} dfl__uc_buf;
void dfl__uc_buf_free(dfl__uc_buf *b);

/* Normalize in[n] as unicode-normalization-alignments does: compat selects NFK*,
 * compose NF*C; out (cleared first) gets each output code point with its change.
 * tmp: two scratch buffers the caller keeps across calls. DFL_ERR_NOMEM. */
dfl_status dfl__uc_normalize(const uint32_t *in, size_t n, int compat, int compose, dfl__uc_buf tmp[2],
                             dfl__uc_buf *out);

/* ---- regexes (tokenizer_regex.c) ---- */

/* pat[n] with every class escape of Unicode meaning (\s \S \d \D \w \W, \p{..} \P{..} of
 * a general category) replaced by the explicit ranges of Oniguruma's definition over
 * the Unicode 16.0.0 tables, for PCRE2 to match as Hugging Face's engine does. *out:
 * malloc'ed, NUL-terminated [*out_len]. DFL_ERR_NOMEM. */
dfl_status dfl__regex_rewrite(const char *pat, size_t n, char **out, size_t *out_len);

/* Find matches of re in s[n] from byte `from`; *ms, *me = match, returns 1, or 0 when
 * none, -1 on a matcher error. */
int dfl__re_find(const pcre2_code *re, pcre2_match_data *md, const char *s, size_t n, size_t from, size_t *ms,
                 size_t *me);

#endif
