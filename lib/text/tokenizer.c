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

/* ByteLevel post-processor with trim_offsets: leading/trailing spaces (Ġ or white
 * space) of each token leave its offsets, except a first token's single prefix space. */
static void post_bytelevel(const dfl_tokenizer *t, const dfl__tk_step *st, outv *o)
{
    if (!st->trim_offsets) return;
    for (size_t i = 0; i < o->n; i++) {
        size_t n;
        const char *p = dfl__vocab_str(&t->vocab, o->v[i].id, &n);
        if (!p) continue;
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
        uint32_t s = o->v[i].s, e = o->v[i].e;
        if (lead > 0) {
            int first = i == 0 || s == 0;
            if (first && st->prefix_space && lead == 1) lead = 0;
            s = s + lead < e ? s + (uint32_t)lead : e;
        }
        if (trail > 0 && e >= trail) e = e - trail > s ? e - (uint32_t)trail : s;
        o->v[i].s = s;
        o->v[i].e = e;
    }
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

void dfl_encoding_free(dfl_encoding *enc)
{
    if (!enc) return;
    free(enc->ids);
    free(enc->start);
    free(enc->end);
    free(enc->special);
    memset(enc, 0, sizeof *enc);
}

dfl_status dfl_tokenizer_encode(dfl_tokenizer *t, const char *text, size_t len, int add_special, dfl_encoding *enc,
                                dfl_error *err)
{
    memset(enc, 0, sizeof *enc);
    size_t bad_at = dfl__utf8_check(text, len);
    if (bad_at != len) return dfl__fail(err, DFL_ERR_FORMAT, "invalid UTF-8 at byte %zu", bad_at);
    if (len >= UINT32_MAX) return dfl__fail(err, DFL_ERR_RANGE, "text of %zu bytes is too long (4 GB at most)", len);

    dfl__tk_store s = {0};
    dfl__tk_splits a = {0}, b = {0};
    dfl__tk_toks toks = {0};
    outv o = {0};
    uint32_t *cp_at = NULL;
    dfl_status st = DFL_OK;

    /* the original text, each byte aligned to its character's byte range */
    if (dfl__store_reserve(&s, len + 1)) goto oom;
    memcpy(s.b, text, len);
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = dfl__utf8_next(text, len, i, &cp);
        for (size_t j = 0; j < k; j++)
            s.a[i + j] = (dfl__tk_align){(uint32_t)i, (uint32_t)(i + k)};
        i += k;
    }
    s.len = len;
    if (dfl__splits_push(&a, (dfl__tk_split){0, len, -1, 0, 0})) goto oom;

    /* 1. added tokens that match the original text */
    st = dfl__added_split(t, 0, &s, &a, &b, err);
    if (st) goto done;
    /* 2. normalize the rest, then added tokens that match normalized text */
    if (t->normalizer)
        for (size_t i = 0; i < b.n; i++)
            if (b.v[i].token < 0) {
                st = dfl__normalize(t->normalizer, &s, &b.v[i], err);
                if (st) goto done;
            }
    st = dfl__added_split(t, 1, &s, &b, &a, err);
    if (st) goto done;
    /* 3. pre-tokenize */
    dfl__tk_splits *fin = &a;
    if (t->pretok) {
        st = dfl__pretokenize(t->pretok, &s, &a, &b, err);
        if (st) goto done;
        fin = &b;
    }
    /* 4. the model, word by word */
    for (size_t i = 0; i < fin->n; i++) {
        const dfl__tk_split *sp = &fin->v[i];
        if (!sp->len && sp->token < 0) continue;
        if (sp->token >= 0) {
            uint32_t os = sp->len ? s.a[sp->off].s : sp->orig_s,
                     oe = sp->len ? s.a[sp->off + sp->len - 1].e : sp->orig_s;
            if (out_push(&o, (outtok){(uint32_t)sp->token, os, oe, t->is_special[sp->token]})) goto oom;
            continue;
        }
        toks.n = 0;
        st = dfl__bpe_word(t, s.b + sp->off, sp->len, sp->byte_level, 0, &toks, err);
        if (st) goto done;
        const dfl__tk_align *al = s.a + sp->off;
        for (size_t k = 0; k < toks.n; k++) {
            const dfl__tk_tok *tk = &toks.v[k];
            if (out_push(&o, (outtok){tk->id, al[tk->s].s, al[tk->e - 1].e, 0})) goto oom;
        }
    }
    /* 5. post-process (template, trimmed offsets) */
    if (t->post) {
        st = post_process(t, t->post, add_special, &o, err);
        if (st) goto done;
    }
    /* 6. byte offsets → code point offsets (Hugging Face's BytesToCharOffsetConverter) */
    cp_at = dfl__alloc_array(len + 1, sizeof *cp_at);
    if (!cp_at) goto oom;
    uint32_t nchars = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = dfl__utf8_next(text, len, i, &cp);
        for (size_t j = 0; j < k; j++)
            cp_at[i + j] = nchars;
        nchars++;
        i += k;
    }
    cp_at[len] = nchars;
    size_t n = o.n ? o.n : 1;
    enc->ids = dfl__alloc_array(n, sizeof *enc->ids);
    enc->start = dfl__alloc_array(n, sizeof *enc->start);
    enc->end = dfl__alloc_array(n, sizeof *enc->end);
    enc->special = dfl__alloc_array(n, 1);
    if (!enc->ids || !enc->start || !enc->end || !enc->special) goto oom;
    for (size_t i = 0; i < o.n; i++) {
        enc->ids[i] = o.v[i].id;
        enc->special[i] = o.v[i].special;
        uint32_t bs = o.v[i].s, be = o.v[i].e;
        if (bs == be) { /* empty: kept as is, as the reference does for (0, 0) */
            enc->start[i] = enc->end[i] = bs <= len ? cp_at[bs] : nchars;
            continue;
        }
        enc->start[i] = cp_at[bs];
        enc->end[i] = be < len ? cp_at[be] : nchars;
    }
    enc->n = o.n;
    goto done;
oom:
    st = dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
done:
    free(s.b);
    free(s.a);
    free(a.v);
    free(b.v);
    free(toks.v);
    free(o.v);
    free(cp_at);
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
