/* tokenizer_load.c — tokenizer.json → dfl_tokenizer: the model (BPE), added tokens,
 * normalizer, pre-tokenizer, post-processor and decoder, each checked, with a one-line
 * error naming what is wrong (an unsupported type is named, never skipped).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "text/tokenizer_internal.h"

/* GPT-2's pattern, used by ByteLevel with use_regex (Hugging Face's ByteLevel RE). */
static const char BYTELEVEL_RE[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ------------------------------------------------------------ helpers ---- */

static int jstr_is(const dfl__jv *v, const char *s)
{
    return v && v->type == DFL__J_STR && v->n == strlen(s) && !memcmp(v->u.str, s, v->n);
}

/* Optional boolean member: def when absent or null; -1 when of another type. */
static int jbool(const dfl__jv *o, const char *key, int def)
{
    const dfl__jv *v = dfl__jget(o, key);
    if (!v || v->type == DFL__J_NULL) return def;
    if (v->type == DFL__J_TRUE) return 1;
    if (v->type == DFL__J_FALSE) return 0;
    return -1;
}

static dfl_status bad(dfl_error *err, const char *where, const char *what)
{
    return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: %s: %s", where, what);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *r = malloc(n + 1);
    if (!r) return NULL;
    memcpy(r, s, n);
    r[n] = '\0';
    return r;
}

static dfl_status compile_re(const char *pat, size_t n, int literal, pcre2_code **out, const char *where,
                             dfl_error *err)
{
    int ec;
    PCRE2_SIZE eo;
    uint32_t opts = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    /* the classes as Hugging Face's Oniguruma has them, not PCRE2's tables (tokenizer_regex.c) */
    char *rw = NULL;
    size_t rn = 0;
    if (!literal && dfl__regex_rewrite(pat, n, &rw, &rn)) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(rw ? rw : pat), rw ? rn : n, opts, &ec, &eo, NULL);
    free(rw);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return dfl__fail(err, DFL_ERR_CONFIG, "tokenizer.json: %s: regex /%.60s/ at %zu: %s", where, pat, (size_t)eo,
                         (const char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter if JIT is unavailable */
    *out = re;
    return DFL_OK;
}

/* A {"String": s} or {"Regex": r} pattern; *literal_out gets the string form's text. */
static dfl_status parse_pattern(const dfl__jv *o, dfl__tk_step *st, const char *where, dfl_error *err)
{
    const dfl__jv *p = dfl__jget(o, "pattern");
    if (!p || p->type != DFL__J_OBJ)
        return bad(err, where, "\"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
    const dfl__jv *s = dfl__jget(p, "String"), *r = dfl__jget(p, "Regex");
    if (s && s->type == DFL__J_STR) {
        st->pat = dup_bytes(s->u.str, s->n);
        st->pat_len = s->n;
        if (!st->pat) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        if (!s->n) return bad(err, where, "empty String pattern");
        return compile_re(s->u.str, s->n, 1, &st->re, where, err);
    }
    if (r && r->type == DFL__J_STR) return compile_re(r->u.str, r->n, 0, &st->re, where, err);
    return bad(err, where, "\"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
}

static dfl_status parse_behavior(const dfl__jv *o, const char *key, int def, int *out, const char *where,
                                 dfl_error *err)
{
    const dfl__jv *b = dfl__jget(o, key);
    if (!b || b->type == DFL__J_NULL) {
        *out = def;
        return DFL_OK;
    }
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 5; i++)
        if (jstr_is(b, names[i])) {
            *out = i;
            return DFL_OK;
        }
    return bad(err, where, "unknown split behavior");
}

static const dfl__jv *jtype(const dfl__jv *o)
{
    const dfl__jv *t = dfl__jget(o, "type");
    return t && t->type == DFL__J_STR ? t : NULL;
}

static dfl_status unsupported(dfl_error *err, const char *what, const dfl__jv *type)
{
    if (!type) return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: %s without a \"type\"", what);
    return dfl__fail(err, DFL_ERR_CONFIG, "tokenizer.json: %s type \"%.60s\" is not supported", what, type->u.str);
}

/* Children of a Sequence. */
typedef dfl_status (*parse_fn)(const dfl__jv *, dfl__tk_step *, dfl_error *);

static dfl_status parse_kids(const dfl__jv *o, const char *key, dfl__tk_step *st, parse_fn fn, const char *where,
                             dfl_error *err)
{
    const dfl__jv *a = dfl__jget(o, key);
    if (!a || a->type != DFL__J_ARR) return bad(err, where, "Sequence needs an array");
    st->kids = dfl__calloc_array(a->n ? a->n : 1, sizeof *st->kids);
    if (!st->kids) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    st->n_kids = a->n;
    for (uint32_t i = 0; i < a->n; i++) {
        dfl_status r = fn(&a->u.kids[i], &st->kids[i], err);
        if (r) return r;
    }
    return DFL_OK;
}

/* --------------------------------------------------------- components ---- */

static dfl_status parse_normalizer(const dfl__jv *o, dfl__tk_step *st, dfl_error *err)
{
    const dfl__jv *t = jtype(o);
    if (!t) return unsupported(err, "normalizer", NULL);
    if (jstr_is(t, "Sequence")) {
        st->kind = DFL__N_SEQUENCE;
        return parse_kids(o, "normalizers", st, parse_normalizer, "normalizer", err);
    }
    if (jstr_is(t, "Prepend")) {
        const dfl__jv *p = dfl__jget(o, "prepend");
        if (!p || p->type != DFL__J_STR) return bad(err, "Prepend", "\"prepend\" must be a string");
        st->kind = DFL__N_PREPEND;
        st->pat = dup_bytes(p->u.str, p->n);
        st->pat_len = p->n;
        return st->pat ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    }
    if (jstr_is(t, "Replace")) {
        st->kind = DFL__N_REPLACE;
        const dfl__jv *c = dfl__jget(o, "content");
        if (!c || c->type != DFL__J_STR) return bad(err, "Replace", "\"content\" must be a string");
        st->content = dup_bytes(c->u.str, c->n);
        st->content_len = c->n;
        if (!st->content) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        return parse_pattern(o, st, "Replace normalizer", err);
    }
    if (jstr_is(t, "NFC")) {
        st->kind = DFL__N_NFC;
        return DFL_OK;
    }
    if (jstr_is(t, "NFD")) {
        st->kind = DFL__N_NFD;
        return DFL_OK;
    }
    if (jstr_is(t, "NFKC")) {
        st->kind = DFL__N_NFKC;
        return DFL_OK;
    }
    if (jstr_is(t, "NFKD")) {
        st->kind = DFL__N_NFKD;
        return DFL_OK;
    }
    if (jstr_is(t, "Lowercase")) {
        st->kind = DFL__N_LOWERCASE;
        return DFL_OK;
    }
    if (jstr_is(t, "Strip")) {
        st->kind = DFL__N_STRIP;
        st->left = jbool(o, "strip_left", 1);
        st->right = jbool(o, "strip_right", 1);
        if (st->left < 0 || st->right < 0) return bad(err, "Strip", "strip_left/strip_right must be booleans");
        return DFL_OK;
    }
    if (jstr_is(t, "StripAccents")) {
        st->kind = DFL__N_STRIP_ACCENTS;
        return DFL_OK;
    }
    if (jstr_is(t, "BertNormalizer")) {
        st->kind = DFL__N_BERT;
        st->clean_text = jbool(o, "clean_text", 1);
        st->chinese = jbool(o, "handle_chinese_chars", 1);
        st->lowercase = jbool(o, "lowercase", 1);
        st->strip_accents = jbool(o, "strip_accents", st->lowercase); /* null: as lowercase */
        if (st->clean_text < 0 || st->chinese < 0 || st->lowercase < 0 || st->strip_accents < 0)
            return bad(
                err, "BertNormalizer",
                "clean_text, handle_chinese_chars and lowercase must be booleans, strip_accents a boolean or null");
        return DFL_OK;
    }
    return unsupported(err, "normalizer", t);
}

static dfl_status parse_pretok(const dfl__jv *o, dfl__tk_step *st, dfl_error *err)
{
    const dfl__jv *t = jtype(o);
    if (!t) return unsupported(err, "pre_tokenizer", NULL);
    if (jstr_is(t, "Sequence")) {
        st->kind = DFL__P_SEQUENCE;
        dfl_status r = parse_kids(o, "pretokenizers", st, parse_pretok, "pre_tokenizer", err);
        if (r) return r;
        for (size_t i = 0; i + 1 < st->n_kids; i++)
            if (st->kids[i].kind == DFL__P_BYTELEVEL)
                return dfl__fail(err, DFL_ERR_CONFIG,
                                 "tokenizer.json: pre_tokenizer: ByteLevel must come last in a Sequence");
        return DFL_OK;
    }
    if (jstr_is(t, "Split")) {
        st->kind = DFL__P_SPLIT;
        st->invert = jbool(o, "invert", 0);
        if (st->invert < 0) return bad(err, "Split", "\"invert\" must be a boolean");
        dfl_status r = parse_behavior(o, "behavior", -1, &st->behavior, "Split", err);
        if (r) return r;
        if (st->behavior < 0) return bad(err, "Split", "\"behavior\" is missing");
        return parse_pattern(o, st, "Split pre_tokenizer", err);
    }
    if (jstr_is(t, "ByteLevel")) {
        st->kind = DFL__P_BYTELEVEL;
        st->prefix_space = jbool(o, "add_prefix_space", 1);
        st->use_regex = jbool(o, "use_regex", 1);
        if (st->prefix_space < 0 || st->use_regex < 0) return bad(err, "ByteLevel", "flags must be booleans");
        if (st->use_regex) return compile_re(BYTELEVEL_RE, sizeof BYTELEVEL_RE - 1, 0, &st->re, "ByteLevel", err);
        return DFL_OK;
    }
    if (jstr_is(t, "Metaspace")) {
        st->kind = DFL__P_METASPACE;
        const dfl__jv *r = dfl__jget(o, "replacement");
        if (!r || r->type != DFL__J_STR || !r->n)
            return bad(err, "Metaspace", "\"replacement\" must be a one-character string");
        uint32_t cp;
        if (dfl__utf8_next(r->u.str, r->n, 0, &cp) != r->n)
            return bad(err, "Metaspace", "\"replacement\" must be one character");
        st->pat = dup_bytes(r->u.str, r->n);
        st->pat_len = r->n;
        if (!st->pat) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        const dfl__jv *ps = dfl__jget(o, "prepend_scheme");
        if (ps && ps->type == DFL__J_STR) {
            if (jstr_is(ps, "always"))
                st->prepend_scheme = DFL__PS_ALWAYS;
            else if (jstr_is(ps, "never"))
                st->prepend_scheme = DFL__PS_NEVER;
            else if (jstr_is(ps, "first"))
                st->prepend_scheme = DFL__PS_FIRST;
            else
                return bad(err, "Metaspace", "unknown prepend_scheme");
        } else {
            int aps = jbool(o, "add_prefix_space", 1);
            if (aps < 0) return bad(err, "Metaspace", "\"add_prefix_space\" must be a boolean");
            st->prepend_scheme = aps ? DFL__PS_ALWAYS : DFL__PS_NEVER;
        }
        st->split = jbool(o, "split", 1);
        if (st->split < 0) return bad(err, "Metaspace", "\"split\" must be a boolean");
        return compile_re(" ", 1, 1, &st->re, "Metaspace", err);
    }
    if (jstr_is(t, "Digits")) {
        st->kind = DFL__P_DIGITS;
        st->individual = jbool(o, "individual_digits", 0);
        if (st->individual < 0) return bad(err, "Digits", "\"individual_digits\" must be a boolean");
        return DFL_OK;
    }
    if (jstr_is(t, "Punctuation")) {
        st->kind = DFL__P_PUNCTUATION;
        return parse_behavior(o, "behavior", DFL__B_ISOLATED, &st->behavior, "Punctuation", err);
    }
    if (jstr_is(t, "Whitespace")) {
        /* \w+|[^\w\s]+ of the regex crate, matched by hand (tokenizer_pretok.c) */
        st->kind = DFL__P_WHITESPACE;
        return DFL_OK;
    }
    if (jstr_is(t, "WhitespaceSplit")) {
        st->kind = DFL__P_WHITESPACE_SPLIT;
        return DFL_OK;
    }
    if (jstr_is(t, "BertPreTokenizer")) {
        st->kind = DFL__P_BERT;
        return DFL_OK;
    }
    return unsupported(err, "pre_tokenizer", t);
}

static dfl_status parse_u32(const dfl__jv *v, uint32_t *out)
{
    if (!v || v->type != DFL__J_NUM || v->u.num < 0 || v->u.num > 2147483647.0 || v->u.num != (double)(int64_t)v->u.num)
        return DFL_ERR_FORMAT;
    *out = (uint32_t)v->u.num;
    return DFL_OK;
}

static dfl_status parse_template(const dfl__jv *o, dfl__tk_step *st, dfl_error *err)
{
    const dfl__jv *single = dfl__jget(o, "single"), *specials = dfl__jget(o, "special_tokens");
    if (!single || single->type != DFL__J_ARR) return bad(err, "TemplateProcessing", "\"single\" must be an array");
    st->tmpl = dfl__calloc_array(single->n ? single->n : 1, sizeof *st->tmpl);
    if (!st->tmpl) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    st->n_tmpl = single->n;
    for (uint32_t i = 0; i < single->n; i++) {
        const dfl__jv *it = &single->u.kids[i];
        const dfl__jv *sq = dfl__jget(it, "Sequence"), *sp = dfl__jget(it, "SpecialToken");
        if (sq) {
            st->tmpl[i].is_seq = 1;
            continue;
        }
        const dfl__jv *name = dfl__jget(sp, "id");
        if (!name || name->type != DFL__J_STR)
            return bad(err, "TemplateProcessing", "items must be Sequence or SpecialToken {\"id\": name}");
        const dfl__jv *def = NULL;
        if (specials && specials->type == DFL__J_OBJ)
            for (uint32_t k = 0; k < specials->n; k++)
                if (specials->u.kids[k].key_len == name->n && !memcmp(specials->u.kids[k].key, name->u.str, name->n))
                    def = &specials->u.kids[k];
        const dfl__jv *ids = dfl__jget(def, "ids");
        if (!ids || ids->type != DFL__J_ARR)
            return dfl__fail(err, DFL_ERR_FORMAT,
                             "tokenizer.json: TemplateProcessing: special token \"%.40s\" has no ids", name->u.str);
        st->tmpl[i].ids = dfl__calloc_array(ids->n ? ids->n : 1, sizeof(uint32_t));
        if (!st->tmpl[i].ids) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        st->tmpl[i].n_ids = ids->n;
        for (uint32_t k = 0; k < ids->n; k++)
            if (parse_u32(&ids->u.kids[k], &st->tmpl[i].ids[k]))
                return dfl__fail(err, DFL_ERR_FORMAT,
                                 "tokenizer.json: TemplateProcessing: special token \"%.40s\" has a bad id",
                                 name->u.str);
    }
    return DFL_OK;
}

static dfl_status parse_post(const dfl__jv *o, dfl__tk_step *st, dfl_error *err)
{
    const dfl__jv *t = jtype(o);
    if (!t) return unsupported(err, "post_processor", NULL);
    if (jstr_is(t, "Sequence")) {
        st->kind = DFL__PP_SEQUENCE;
        return parse_kids(o, "processors", st, parse_post, "post_processor", err);
    }
    if (jstr_is(t, "ByteLevel")) {
        st->kind = DFL__PP_BYTELEVEL;
        st->trim_offsets = jbool(o, "trim_offsets", 1);
        st->prefix_space = jbool(o, "add_prefix_space", 1);
        if (st->trim_offsets < 0 || st->prefix_space < 0)
            return bad(err, "ByteLevel post_processor", "flags must be booleans");
        return DFL_OK;
    }
    if (jstr_is(t, "TemplateProcessing")) {
        st->kind = DFL__PP_TEMPLATE;
        return parse_template(o, st, err);
    }
    return unsupported(err, "post_processor", t);
}

static dfl_status parse_decoder(const dfl__jv *o, dfl__tk_step *st, dfl_error *err)
{
    const dfl__jv *t = jtype(o);
    if (!t) return unsupported(err, "decoder", NULL);
    if (jstr_is(t, "Sequence")) {
        st->kind = DFL__D_SEQUENCE;
        return parse_kids(o, "decoders", st, parse_decoder, "decoder", err);
    }
    if (jstr_is(t, "ByteLevel")) {
        st->kind = DFL__D_BYTELEVEL;
        return DFL_OK;
    }
    if (jstr_is(t, "ByteFallback")) {
        st->kind = DFL__D_BYTEFALLBACK;
        return DFL_OK;
    }
    if (jstr_is(t, "Fuse")) {
        st->kind = DFL__D_FUSE;
        return DFL_OK;
    }
    if (jstr_is(t, "Metaspace")) {
        st->kind = DFL__D_METASPACE;
        const dfl__jv *r = dfl__jget(o, "replacement");
        if (!r || r->type != DFL__J_STR || !r->n)
            return bad(err, "Metaspace decoder", "\"replacement\" must be a string");
        st->pat = dup_bytes(r->u.str, r->n);
        st->pat_len = r->n;
        if (!st->pat) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        const dfl__jv *ps = dfl__jget(o, "prepend_scheme");
        if (ps && ps->type == DFL__J_STR)
            st->prepend_scheme = jstr_is(ps, "never") ? DFL__PS_NEVER : DFL__PS_ALWAYS;
        else
            st->prepend_scheme = jbool(o, "add_prefix_space", 1) == 0 ? DFL__PS_NEVER : DFL__PS_ALWAYS;
        return DFL_OK;
    }
    if (jstr_is(t, "Strip")) {
        st->kind = DFL__D_STRIP;
        const dfl__jv *c = dfl__jget(o, "content");
        uint32_t a = 0, b = 0;
        if (!c || c->type != DFL__J_STR || !c->n) return bad(err, "Strip decoder", "\"content\" must be a character");
        if (parse_u32(dfl__jget(o, "start"), &a) || parse_u32(dfl__jget(o, "stop"), &b))
            return bad(err, "Strip decoder", "\"start\" and \"stop\" must be counts");
        st->pat = dup_bytes(c->u.str, c->n);
        st->pat_len = c->n;
        st->start = a;
        st->stop = b;
        return st->pat ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    }
    if (jstr_is(t, "Replace")) {
        st->kind = DFL__D_REPLACE;
        const dfl__jv *c = dfl__jget(o, "content");
        if (!c || c->type != DFL__J_STR) return bad(err, "Replace decoder", "\"content\" must be a string");
        st->content = dup_bytes(c->u.str, c->n);
        st->content_len = c->n;
        if (!st->content) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        return parse_pattern(o, st, "Replace decoder", err);
    }
    return unsupported(err, "decoder", t);
}

void dfl__step_free(dfl__tk_step *st)
{
    if (!st) return;
    for (size_t i = 0; i < st->n_kids; i++)
        dfl__step_free(&st->kids[i]);
    free(st->kids);
    free(st->pat);
    free(st->content);
    if (st->re) pcre2_code_free(st->re);
    for (size_t i = 0; i < st->n_tmpl; i++)
        free(st->tmpl[i].ids);
    free(st->tmpl);
}

/* Template ids must name tokens of this vocabulary. */
static dfl_status check_template(const dfl__tk_step *st, const dfl_tokenizer *t, dfl_error *err)
{
    if (!st) return DFL_OK;
    for (size_t i = 0; i < st->n_kids; i++) {
        dfl_status r = check_template(&st->kids[i], t, err);
        if (r) return r;
    }
    for (size_t i = 0; i < st->n_tmpl; i++)
        for (size_t k = 0; k < st->tmpl[i].n_ids; k++)
            if (!dfl__vocab_str(&t->vocab, st->tmpl[i].ids[k], NULL))
                return dfl__fail(err, DFL_ERR_FORMAT,
                                 "tokenizer.json: TemplateProcessing: id %u is not in the vocabulary",
                                 st->tmpl[i].ids[k]);
    return DFL_OK;
}

/* A top-level component: NULL when absent or null. */
static dfl_status load_step(const dfl__jv *root, const char *key, parse_fn fn, dfl__tk_step **out, dfl_error *err)
{
    const dfl__jv *o = dfl__jget(root, key);
    *out = NULL;
    if (!o || o->type == DFL__J_NULL) return DFL_OK;
    if (o->type != DFL__J_OBJ)
        return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: \"%s\" must be an object or null", key);
    dfl__tk_step *st = calloc(1, sizeof *st);
    if (!st) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    *out = st;
    return fn(o, st, err);
}

/* The two tokens of a merge: 0 ok, 1 malformed. */
static int merge_parts(const dfl__jv *mg, const char **a, size_t *an, const char **c, size_t *cn)
{
    if (mg->type == DFL__J_STR) {
        const char *sp = memchr(mg->u.str, ' ', mg->n);
        if (!sp) return 1;
        *a = mg->u.str;
        *an = (size_t)(sp - *a);
        *c = sp + 1;
        *cn = mg->n - *an - 1;
        return 0;
    }
    if (mg->type == DFL__J_ARR && mg->n == 2 && mg->u.kids[0].type == DFL__J_STR && mg->u.kids[1].type == DFL__J_STR) {
        *a = mg->u.kids[0].u.str;
        *an = mg->u.kids[0].n;
        *c = mg->u.kids[1].u.str;
        *cn = mg->u.kids[1].n;
        return 0;
    }
    return 1;
}

/* Ids of a merge's left, right and merged tokens: 0 ok, 1 malformed, 2 unknown part,
 * 3 unknown merged token, 4 longer than buf. */
static int resolve_merge(const dfl_tokenizer *t, const dfl__jv *mg, char *buf, size_t cap, int64_t ids[3])
{
    const char *a, *c;
    size_t an, cn;
    ids[0] = ids[1] = ids[2] = 0;
    if (merge_parts(mg, &a, &an, &c, &cn)) return 1;
    ids[0] = dfl__vocab_find(&t->vocab, a, an);
    ids[1] = dfl__vocab_find(&t->vocab, c, cn);
    if (ids[0] < 0 || ids[1] < 0) return 2;
    /* the merged token: a + b without b's continuing prefix */
    const char *pf = t->bpe.prefix;
    size_t plen = pf ? strlen(pf) : 0;
    if (plen && cn >= plen && !memcmp(c, pf, plen)) {
        c += plen;
        cn -= plen;
    }
    if (an + cn > cap) return 4;
    memcpy(buf, a, an);
    memcpy(buf + an, c, cn);
    ids[2] = dfl__vocab_find(&t->vocab, buf, an + cn);
    return ids[2] < 0 ? 3 : 0;
}

/* Resolve merges [from, from + n) (n <= 16) into mid[3 * i ...]: parts and hashes
 * first, then prefetches of every slot and string, then the lookups. A merge that is
 * malformed, unknown or longer than the scratch gets UINT32_MAX (resolved or reported
 * again serially). */
static void resolve_block(const dfl_tokenizer *t, const dfl__jv *merges, size_t from, size_t n, uint32_t *mid)
{
    struct {
        const char *a, *c;
        size_t an, cn;
        uint64_t h[3];
        int ok;
        char cat[192];
    } w[16];
    const char *pf = t->bpe.prefix;
    size_t plen = pf ? strlen(pf) : 0;
    for (size_t k = 0; k < n; k++) {
        w[k].ok = !merge_parts(&merges->u.kids[from + k], &w[k].a, &w[k].an, &w[k].c, &w[k].cn);
        if (!w[k].ok) continue;
        const char *c = w[k].c;
        size_t cn = w[k].cn;
        if (plen && cn >= plen && !memcmp(c, pf, plen)) {
            c += plen;
            cn -= plen;
        }
        if (w[k].an + cn > sizeof w[k].cat) {
            w[k].ok = 0;
            continue;
        }
        memcpy(w[k].cat, w[k].a, w[k].an);
        memcpy(w[k].cat + w[k].an, c, cn);
        w[k].h[0] = dfl__vocab_hash(w[k].a, w[k].an);
        w[k].h[1] = dfl__vocab_hash(w[k].c, w[k].cn);
        w[k].h[2] = dfl__vocab_hash(w[k].cat, w[k].an + cn);
        for (int j = 0; j < 3; j++)
            dfl__vocab_prefetch(&t->vocab, w[k].h[j], 0);
        w[k].cn = cn; /* from here on: the merged token's tail length */
    }
    for (size_t k = 0; k < n; k++)
        if (w[k].ok)
            for (int j = 0; j < 3; j++)
                dfl__vocab_prefetch(&t->vocab, w[k].h[j], 1);
    for (size_t k = 0; k < n; k++) {
        uint32_t *o = mid + 3 * (from + k);
        o[0] = UINT32_MAX;
        if (!w[k].ok) continue;
        /* the right part is looked up as written (with its prefix) */
        const dfl__jv *mg = &merges->u.kids[from + k];
        const char *c;
        size_t cn;
        const char *a;
        size_t an;
        merge_parts(mg, &a, &an, &c, &cn);
        int64_t ia = dfl__vocab_find_h(&t->vocab, a, an, w[k].h[0]);
        int64_t ic = dfl__vocab_find_h(&t->vocab, c, cn, w[k].h[1]);
        int64_t im = dfl__vocab_find_h(&t->vocab, w[k].cat, w[k].an + w[k].cn, w[k].h[2]);
        if (ia < 0 || ic < 0 || im < 0) continue;
        o[0] = (uint32_t)ia;
        o[1] = (uint32_t)ic;
        o[2] = (uint32_t)im;
    }
}

/* A merge the parallel pass could not resolve: resolve it with a large buffer, or
 * report what is wrong with it. */
static dfl_status merge_error(const dfl_tokenizer *t, const dfl__jv *mg, uint32_t i, uint32_t out[3], dfl_error *err)
{
    const char *a, *c;
    size_t an, cn;
    if (merge_parts(mg, &a, &an, &c, &cn))
        return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: merge %u is neither \"a b\" nor [a, b]", i);
    char *buf = malloc(an + cn + 1);
    if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    int64_t ids[3];
    int r = resolve_merge(t, mg, buf, an + cn + 1, ids);
    dfl_status st = DFL_OK;
    if (r == 2)
        st = dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: merge %u names unknown token \"%.*s\"", i,
                       (int)(ids[0] < 0 ? (an > 40 ? 40 : an) : (cn > 40 ? 40 : cn)), ids[0] < 0 ? a : c);
    else if (r == 3)
        st = dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: merge %u makes unknown token \"%.*s%.*s\"", i,
                       (int)(an > 40 ? 40 : an), a, (int)(cn > 40 ? 40 : cn), c);
    else if (r)
        st = dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: merge %u is malformed", i);
    free(buf);
    if (!st) {
        out[0] = (uint32_t)ids[0];
        out[1] = (uint32_t)ids[1];
        out[2] = (uint32_t)ids[2];
    }
    return st;
}

/* --------------------------------------------------------------- model ---- */

/* Added tokens take the ids Hugging Face gives them (tokenizers' AddedVocabulary::
 * add_tokens), not the "id" the file writes (it only warns when they differ): in file
 * order, a content already in the vocabulary (or added before) has that id; a new one
 * the vocabulary's size (its entry count), or the largest added id + 1 once that is at
 * or past it. A content listed twice is one token: the last entry's flags count (the
 * earlier one is emptied and left out of the tries). The vocabulary's size becomes the
 * largest id + 1. n_vocab: the vocabulary's entries; max_id: its largest id + 1; room:
 * the ids t->vocab and t->is_special hold. */
static dfl_status assign_added_ids(dfl_tokenizer *t, size_t n_vocab, size_t max_id, size_t room, dfl_error *err)
{
    /* owner[id]: 1 + the added entry holding id (one id, one content: a later entry that
     * finds the same id has the same content) */
    uint32_t *owner = dfl__calloc_array(room ? room : 1, sizeof *owner);
    if (!owner) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    int64_t max_added = -1;
    dfl_status st = DFL_OK;
    for (size_t i = 0; i < t->n_added && !st; i++) {
        dfl__tk_added *a = &t->added[i];
        int64_t id = dfl__vocab_find(&t->vocab, a->content, a->len);
        if (id < 0) {
            id = max_added >= (int64_t)n_vocab || !n_vocab ? max_added + 1 : (int64_t)n_vocab;
            if ((st = dfl__vocab_add(&t->vocab, (uint32_t)id, a->content, a->len, err))) {
                st = dfl__context(err, "tokenizer.json: added_tokens");
                break;
            }
        }
        if (owner[id]) { /* listed before: that entry gives way */
            dfl__tk_added *k = &t->added[owner[id] - 1];
            t->is_special[id] = 0;
            k->content[0] = '\0';
            k->len = 0;
        }
        owner[id] = (uint32_t)i + 1;
        a->id = (uint32_t)id;
        if (a->special) t->is_special[id] = 1;
        if (id > max_added) max_added = id;
        if ((size_t)id + 1 > max_id) max_id = (size_t)id + 1;
    }
    free(owner);
    if (!st) t->vocab.n = max_id;
    return st;
}

static dfl_status load_model(dfl_tokenizer *t, const dfl__jv *root, dfl_error *err)
{
    const dfl__jv *m = dfl__jget(root, "model");
    if (!m || m->type != DFL__J_OBJ) return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: no \"model\" object");
    const dfl__jv *type = jtype(m);
    if (type && !jstr_is(type, "BPE"))
        return dfl__fail(err, DFL_ERR_CONFIG, "tokenizer.json: model type \"%.40s\" is not supported (only BPE)",
                         type->u.str);
    const dfl__jv *vocab = dfl__jget(m, "vocab"), *merges = dfl__jget(m, "merges");
    if (!type && (!merges || merges->type != DFL__J_ARR))
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "tokenizer.json: model without a type or merges is not supported (only BPE)");
    if (!vocab || vocab->type != DFL__J_OBJ)
        return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: model.vocab must be an object");
    if (!merges || merges->type != DFL__J_ARR)
        return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: model.merges must be an array");
    const dfl__jv *added = dfl__jget(root, "added_tokens");
    if (added && added->type != DFL__J_ARR && added->type != DFL__J_NULL)
        return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: added_tokens must be an array");
    uint32_t n_added = added && added->type == DFL__J_ARR ? added->n : 0;

    /* sizes first: the largest id and the bytes of every string */
    size_t max_id = 0, pool = 0;
    for (uint32_t i = 0; i < vocab->n; i++) {
        uint32_t id;
        if (parse_u32(&vocab->u.kids[i], &id))
            return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: vocab \"%.40s\": id must be an integer in [0, 2^31)",
                             vocab->u.kids[i].key);
        if (id + 1 > max_id) max_id = (size_t)id + 1;
        pool += vocab->u.kids[i].key_len + 1;
    }
    t->added = dfl__calloc_array(n_added ? n_added : 1, sizeof *t->added);
    if (!t->added) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    for (uint32_t i = 0; i < n_added; i++) {
        const dfl__jv *a = &added->u.kids[i];
        const dfl__jv *c = dfl__jget(a, "content");
        uint32_t id;
        if (parse_u32(dfl__jget(a, "id"), &id) || !c || c->type != DFL__J_STR || !c->n)
            return dfl__fail(err, DFL_ERR_FORMAT,
                             "tokenizer.json: added_tokens[%u] needs an integer \"id\" and a non-empty \"content\"", i);
        dfl__tk_added *d = &t->added[i];
        d->id = id;
        d->content = dup_bytes(c->u.str, c->n);
        d->len = c->n;
        t->n_added = i + 1;
        if (!d->content) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        d->special = jbool(a, "special", 0);
        d->lstrip = jbool(a, "lstrip", 0);
        d->rstrip = jbool(a, "rstrip", 0);
        d->single_word = jbool(a, "single_word", 0);
        d->normalized = jbool(a, "normalized", !d->special);
        if (d->special < 0 || d->lstrip < 0 || d->rstrip < 0 || d->single_word < 0 || d->normalized < 0)
            return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: added_tokens[%u]: flags must be booleans", i);
        pool += c->n + 1;
    }
    /* ids index arrays: a stray large id (a typo, a corrupt file) would cost gigabytes */
    if (max_id > 2 * (size_t)vocab->n + 1024)
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "tokenizer.json: id %zu is far beyond the %u tokens of the vocabulary (ids must run from 0 "
                         "with few gaps)",
                         max_id - 1, vocab->n);
    /* room for every added token past the vocabulary's ids; the size is cut to the ids used */
    size_t room = (max_id > vocab->n ? max_id : vocab->n) + n_added;
    dfl_status st = dfl__vocab_init(&t->vocab, room, pool, err);
    if (st) return st;
    for (uint32_t i = 0; i < vocab->n; i++) {
        const dfl__jv *v = &vocab->u.kids[i];
        st = dfl__vocab_add(&t->vocab, (uint32_t)v->u.num, v->key, v->key_len, err);
        if (st) return dfl__context(err, "tokenizer.json: vocab");
    }
    t->is_special = calloc(room ? room : 1, 1);
    if (!t->is_special) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    st = assign_added_ids(t, vocab->n, max_id, room, err);
    if (st) return st;

    dfl__tk_bpe *b = &t->bpe;
    b->unk = -1;
    int fu = jbool(m, "fuse_unk", 0), bf = jbool(m, "byte_fallback", 0), im = jbool(m, "ignore_merges", 0);
    if (fu < 0 || bf < 0 || im < 0) return bad(err, "model", "fuse_unk, byte_fallback, ignore_merges must be booleans");
    const dfl__jv *dr = dfl__jget(m, "dropout");
    if (dr && dr->type == DFL__J_NUM && dr->u.num != 0.0)
        return dfl__fail(err, DFL_ERR_CONFIG, "tokenizer.json: BPE dropout is not supported (it is random)");
    b->fuse_unk = fu;
    b->byte_fallback = bf;
    b->ignore_merges = im;
    const dfl__jv *unk = dfl__jget(m, "unk_token");
    if (unk && unk->type == DFL__J_STR) {
        b->unk = dfl__vocab_find(&t->vocab, unk->u.str, unk->n);
        if (b->unk < 0)
            return dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: unk_token \"%.40s\" is not in the vocabulary",
                             unk->u.str);
    }
    const dfl__jv *pf = dfl__jget(m, "continuing_subword_prefix"), *sf = dfl__jget(m, "end_of_word_suffix");
    if (pf && pf->type == DFL__J_STR && pf->n && !(b->prefix = dup_bytes(pf->u.str, pf->n)))
        return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    if (sf && sf->type == DFL__J_STR && sf->n && !(b->suffix = dup_bytes(sf->u.str, sf->n)))
        return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    for (int i = 0; i < 256; i++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", i);
        int64_t id = dfl__vocab_find(&t->vocab, buf, 6);
        b->byte_id[i] = id >= 0 ? (uint32_t)id + 1 : 0;
        size_t k = dfl__utf8_put(dfl__bytelevel_char((uint8_t)i), buf);
        id = dfl__vocab_find(&t->vocab, buf, k);
        b->bl_id[i] = id >= 0 ? (uint32_t)id + 1 : 0;
    }

    /* merges: "a b" strings or [a, b] pairs; the merged token must exist too. The
     * lookups run on all cores (read-only, no allocation), the table fills in order. */
    st = dfl__bpe_merges_init(b, merges->n, err);
    if (st) return st;
    uint32_t *mid = dfl__alloc_array(merges->n ? (size_t)merges->n * 3 : 1, sizeof *mid);
    if (!mid) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    int64_t nblk = ((int64_t)merges->n + 15) / 16;
#pragma omp parallel for schedule(static, 256)
    for (int64_t b = 0; b < nblk; b++) {
        size_t from = (size_t)b * 16, cnt = merges->n - from < 16 ? merges->n - from : 16;
        resolve_block(t, merges, from, cnt, mid);
    }
    for (uint32_t i = 0; i < merges->n; i++) {
        if (mid[3 * (size_t)i] == UINT32_MAX) {
            /* again, serially, with room for long tokens and the message */
            st = merge_error(t, &merges->u.kids[i], i, mid + 3 * (size_t)i, err);
            if (st) {
                free(mid);
                return st;
            }
        }
        dfl__bpe_merge_add(b, mid[3 * (size_t)i], mid[3 * (size_t)i + 1], i, mid[3 * (size_t)i + 2]);
    }
    free(mid);
    return DFL_OK;
}

/* --------------------------------------------------------------- entry ---- */

void dfl_tokenizer_close(dfl_tokenizer *t)
{
    if (!t) return;
    dfl__vocab_free(&t->vocab);
    dfl__bpe_free(&t->bpe);
    dfl__step_free(t->normalizer);
    dfl__step_free(t->pretok);
    dfl__step_free(t->post);
    dfl__step_free(t->decoder);
    free(t->chat_template);
    free(t->chat_specials);
    free(t->normalizer);
    free(t->pretok);
    free(t->post);
    free(t->decoder);
    for (size_t i = 0; i < t->n_added; i++)
        free(t->added[i].content);
    free(t->added);
    free(t->is_special);
    dfl__added_free(t);
    free(t);
}

/* Takes ownership of buf (buf[len] == '\0'). */
static dfl_status load_owned(char *buf, size_t len, dfl_tokenizer **out, dfl_error *err)
{
    *out = NULL;
    dfl__jdoc *doc = NULL;
    const dfl__jv *root = NULL;
    dfl_status st = dfl__jdoc_parse(buf, len, &doc, &root, err);
    if (st) {
        free(buf);
        return st;
    }
    dfl_tokenizer *t = calloc(1, sizeof *t);
    if (!t) st = dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    if (!st && root->type != DFL__J_OBJ) st = dfl__fail(err, DFL_ERR_FORMAT, "tokenizer.json: not a JSON object");
    if (!st) st = load_model(t, root, err);
    if (!st) st = load_step(root, "normalizer", parse_normalizer, &t->normalizer, err);
    if (!st) st = load_step(root, "pre_tokenizer", parse_pretok, &t->pretok, err);
    if (!st) st = load_step(root, "post_processor", parse_post, &t->post, err);
    if (!st) st = check_template(t->post, t, err);
    if (!st) st = load_step(root, "decoder", parse_decoder, &t->decoder, err);
    if (!st) st = dfl__added_build(t, err);
    if (!st) st = dfl__window_build(t, err);
    dfl__jdoc_free(doc);
    free(buf);
    if (st) {
        dfl_tokenizer_close(t);
        return st;
    }
    *out = t;
    return DFL_OK;
}

dfl_status dfl_tokenizer_load(const char *json, size_t len, dfl_tokenizer **out, dfl_error *err)
{
    *out = NULL;
    if (len == SIZE_MAX) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: input too large");
    char *buf = malloc(len + 1);
    if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(buf, json, len);
    buf[len] = '\0';
    return load_owned(buf, len, out, err);
}

dfl_status dfl_tokenizer_open(const char *path, dfl_tokenizer **out, dfl_error *err)
{
    *out = NULL;
    char *buf;
    size_t len;
    /* the largest published tokenizer.json files hold some 35 MB (Gemma 3: 33 MB) */
    dfl_status st = dfl__read_file_max(path, (size_t)1 << 30, "a tokenizer.json", &buf, &len, err);
    if (st) return st;
    st = load_owned(buf, len, out, err);
    if (st) return dfl__context(err, "%s", path);
    return DFL_OK;
}

dfl_status dfl_tokenizer_open_path(const char *path, dfl_tokenizer **out, dfl_error *err)
{
    struct stat sb;
    *out = NULL;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        char *p = malloc(n + sizeof "/tokenizer.json");
        if (!p) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        memcpy(p, path, n);
        memcpy(p + n, "/tokenizer.json", sizeof "/tokenizer.json");
        dfl_status st = dfl_tokenizer_open(p, out, err);
        free(p);
        /* the folder's tokenizer_config.json and chat template, as AutoTokenizer reads them */
        if (!st && (st = dfl__tokenizer_read_config(*out, path, err))) {
            dfl_tokenizer_close(*out);
            *out = NULL;
        }
        return st;
    }
    return dfl_tokenizer_open(path, out, err);
}
