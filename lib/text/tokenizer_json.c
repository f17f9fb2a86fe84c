/* tokenizer_json.c — an in-place JSON reader for tokenizer.json.
 *
 * Hand-written because it measurably wins: Gemma 3's 33 MB tokenizer.json holds about
 * two million values; strings are unescaped where they stand and values live in a few
 * large blocks instead of one malloc each (see docs/tokenize.md for the load times).
 *
 * Read by the rules of every JSON reader in difflens (base/jsondoc.h): UTF-8 only,
 * nothing after the document, and when an object repeats a key the last one wins. The
 * last is also what Hugging Face tokenizers (which reads tokenizer.json with serde_json)
 * ends up with wherever it accepts the file: serde_json hands every member to the type
 * being built, and the top level (TokenizerVisitor::visit_map in
 * tokenizers/src/tokenizer/serialization.rs), the BPE model (BPEVisitor::visit_map in
 * tokenizers/src/models/bpe/serialization.rs) and maps such as the vocabulary
 * (AHashMap: serde's map impl inserts each entry) overwrite earlier values; structs
 * that derive Deserialize refuse a repeated field ("duplicate field"), where we take
 * the last instead of failing.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

#define JMAX_DEPTH 256

/* ---------------------------------------------------------------- arena ---- */

typedef struct jblock {
    struct jblock *next;
    size_t used, cap;
    dfl__jv v[]; /* [cap] */
} jblock;

struct dfl__jdoc {
    jblock *blocks;
    dfl__jv root;
};

static dfl__jv *arena_take(dfl__jdoc *d, size_t n)
{
    jblock *b = d->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        size_t bytes;
        if (!dfl__mul_ok(cap, sizeof(dfl__jv), &bytes) || bytes > SIZE_MAX - sizeof(jblock)) return NULL;
        jblock *nb = malloc(sizeof(jblock) + bytes);
        if (!nb) return NULL;
        nb->used = 0;
        nb->cap = cap;
        nb->next = d->blocks;
        d->blocks = nb;
        b = nb;
    }
    dfl__jv *r = b->v + b->used;
    b->used += n;
    return r;
}

void dfl__jdoc_free(dfl__jdoc *d)
{
    if (!d) return;
    for (jblock *b = d->blocks; b;) {
        jblock *n = b->next;
        free(b);
        b = n;
    }
    free(d);
}

/* --------------------------------------------------------------- parser ---- */

typedef struct jparser {
    char *p, *end, *start;
    dfl__jdoc *doc;
    dfl__jv *stack; /* [cap] children of the open containers */
    size_t top, cap;
    uint32_t *seen; /* [seen_cap] hash table of member indices + 1 (repeated keys) */
    size_t seen_cap;
    dfl_error *err;
    int depth;
} jparser;

static dfl_status jfail(jparser *ps, const char *what)
{
    return dfl__fail(ps->err, DFL_ERR_FORMAT, "invalid JSON at byte %zu: %s", (size_t)(ps->p - ps->start), what);
}

static void skip_ws(jparser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r'))
        ps->p++;
}

static int hex4(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

/* Parse a string at ps->p (the opening quote); unescape in place. */
static dfl_status parse_string(jparser *ps, const char **out, uint32_t *out_len)
{
    char *r = ++ps->p, *w = r;
    for (;;) {
        /* fast scan of the plain run */
        char *q = r;
        while (q < ps->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
            q++;
        if (w != r) memmove(w, r, (size_t)(q - r));
        w += q - r;
        r = q;
        if (r >= ps->end) {
            ps->p = r;
            return jfail(ps, "unterminated string");
        }
        if (*r == '"') break;
        if ((unsigned char)*r < 0x20) {
            ps->p = r;
            return jfail(ps, "control character in string");
        }
        /* escape */
        if (r + 1 >= ps->end) {
            ps->p = r;
            return jfail(ps, "unterminated escape");
        }
        char c = r[1];
        r += 2;
        switch (c) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '/': *w++ = '/'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (ps->end - r < 4 || !hex4(r, &cp)) {
                ps->p = r;
                return jfail(ps, "bad \\u escape");
            }
            r += 4;
            if (cp >= 0xD800 && cp < 0xDC00) {
                if (ps->end - r < 6 || r[0] != '\\' || r[1] != 'u' || !hex4(r + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    ps->p = r;
                    return jfail(ps, "lone surrogate in \\u escape");
                }
                r += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                ps->p = r;
                return jfail(ps, "lone surrogate in \\u escape");
            }
            w += dfl__utf8_put(cp, w); /* at most 4 bytes for 6+ read: stays behind r */
            break;
        }
        default: ps->p = r - 2; return jfail(ps, "bad escape");
        }
    }
    size_t n = (size_t)(w - (ps->p));
    char *s = ps->p;
    if (n > UINT32_MAX) return jfail(ps, "string too long");
    *w = '\0'; /* w <= r, and r is the closing quote */
    ps->p = r + 1;
    if (dfl__utf8_check(s, n) != n) {
        ps->p = s;
        return jfail(ps, "invalid UTF-8 in string");
    }
    *out = s;
    *out_len = (uint32_t)n;
    return DFL_OK;
}

static dfl_status push(jparser *ps, const dfl__jv *v)
{
    if (ps->top == ps->cap) {
        size_t nc = ps->cap ? ps->cap * 2 : 1024;
        size_t bytes;
        if (!dfl__mul_ok(nc, sizeof(dfl__jv), &bytes)) return dfl__fail(ps->err, DFL_ERR_NOMEM, "JSON too large");
        dfl__jv *ns = realloc(ps->stack, bytes);
        if (!ns) return dfl__fail(ps->err, DFL_ERR_NOMEM, "out of memory reading JSON");
        ps->stack = ns;
        ps->cap = nc;
    }
    ps->stack[ps->top++] = *v;
    return DFL_OK;
}

static dfl_status parse_value(jparser *ps, dfl__jv *v);

static uint64_t key_hash(const char *k, uint32_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 0x100000001b3ULL;
    return h;
}

static int same_key(const dfl__jv *a, const dfl__jv *b)
{
    return a->key_len == b->key_len && !memcmp(a->key, b->key, a->key_len);
}

/* An object's members sit on the stack in [base, top): drop every member whose key a
 * later member repeats, keeping the others in order (the last value wins). Small
 * objects compare pairwise; large ones (a vocabulary) through a hash table of indices,
 * scanned from the last member back. */
#define DROPPED 0xFF
static dfl_status drop_repeated_keys(jparser *ps, size_t base)
{
    size_t n = ps->top - base;
    dfl__jv *m = ps->stack + base; /* [n] */
    int any = 0;
    if (n < 2) return DFL_OK;
    if (n <= 16) {
        for (size_t i = 0; i + 1 < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (same_key(&m[i], &m[j])) {
                    m[i].type = DROPPED;
                    any = 1;
                    break;
                }
    } else {
        size_t cap = 64;
        while (cap < 2 * n)
            cap *= 2;
        if (cap > ps->seen_cap) {
            uint32_t *t = dfl__alloc_array(cap, sizeof *t);
            if (!t || n > UINT32_MAX - 1) {
                free(t);
                return dfl__fail(ps->err, DFL_ERR_NOMEM, "out of memory reading JSON");
            }
            free(ps->seen);
            ps->seen = t;
            ps->seen_cap = cap;
        }
        memset(ps->seen, 0, cap * sizeof *ps->seen);
        for (size_t i = n; i-- > 0;) {
            size_t h = (size_t)key_hash(m[i].key, m[i].key_len) & (cap - 1);
            while (ps->seen[h] && !same_key(&m[ps->seen[h] - 1], &m[i]))
                h = (h + 1) & (cap - 1);
            if (ps->seen[h]) {
                m[i].type = DROPPED;
                any = 1;
            } else {
                ps->seen[h] = (uint32_t)(i + 1);
            }
        }
    }
    if (!any) return DFL_OK;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (m[i].type != DROPPED) m[k++] = m[i];
    ps->top = base + k;
    return DFL_OK;
}

/* Close a container whose children sit on the stack from `base`. */
static dfl_status close_container(jparser *ps, dfl__jv *v, size_t base)
{
    if (v->type == DFL__J_OBJ) {
        dfl_status st = drop_repeated_keys(ps, base);
        if (st) return st;
    }
    size_t n = ps->top - base;
    if (n > UINT32_MAX) return jfail(ps, "container too large");
    v->n = (uint32_t)n;
    v->u.kids = NULL;
    if (n) {
        v->u.kids = arena_take(ps->doc, n);
        if (!v->u.kids) return dfl__fail(ps->err, DFL_ERR_NOMEM, "out of memory reading JSON");
        memcpy(v->u.kids, ps->stack + base, n * sizeof(dfl__jv));
    }
    ps->top = base;
    return DFL_OK;
}

static dfl_status parse_container(jparser *ps, dfl__jv *v, int is_obj)
{
    if (++ps->depth > JMAX_DEPTH) return jfail(ps, "nested too deeply");
    ps->p++;
    size_t base = ps->top;
    v->type = is_obj ? DFL__J_OBJ : DFL__J_ARR;
    skip_ws(ps);
    char close = is_obj ? '}' : ']';
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return close_container(ps, v, base);
    }
    for (;;) {
        dfl__jv kid = {0};
        skip_ws(ps);
        if (is_obj) {
            if (ps->p >= ps->end || *ps->p != '"') return jfail(ps, "expected a member name");
            const char *k;
            uint32_t kl;
            dfl_status st = parse_string(ps, &k, &kl);
            if (st) return st;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return jfail(ps, "expected ':'");
            ps->p++;
            skip_ws(ps);
            dfl_status s2 = parse_value(ps, &kid);
            if (s2) return s2;
            kid.key = k;
            kid.key_len = kl;
        } else {
            dfl_status st = parse_value(ps, &kid);
            if (st) return st;
        }
        dfl_status st = push(ps, &kid);
        if (st) return st;
        skip_ws(ps);
        if (ps->p >= ps->end) return jfail(ps, "unexpected end");
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            break;
        }
        return jfail(ps, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    ps->depth--;
    return close_container(ps, v, base);
}

static dfl_status parse_number(jparser *ps, dfl__jv *v)
{
    char *s = ps->p, *q = s;
    if (q < ps->end && *q == '-') q++;
    if (q >= ps->end || *q < '0' || *q > '9') return jfail(ps, "bad value");
    /* integers (ids, ranks) are the common case: no strtod */
    int64_t iv = 0;
    int small = 1;
    while (q < ps->end && *q >= '0' && *q <= '9') {
        if (iv > 100000000000000LL) small = 0;
        iv = iv * 10 + (*q - '0');
        q++;
    }
    if (q < ps->end && (*q == '.' || *q == 'e' || *q == 'E')) small = 0;
    if (small) {
        v->type = DFL__J_NUM;
        v->u.num = (double)(*s == '-' ? -iv : iv);
        ps->p = q;
        return DFL_OK;
    }
    char *e;
    double d = strtod(s, &e); /* buf[len] is NUL, so strtod stops in the buffer */
    if (e == s || e > ps->end) return jfail(ps, "bad number");
    v->type = DFL__J_NUM;
    v->u.num = d;
    ps->p = e;
    return DFL_OK;
}

/* One of the words true, false and null. */
static dfl_status parse_literal(jparser *ps, const char *word, int type, dfl__jv *v)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) return jfail(ps, "bad value");
    ps->p += n;
    v->type = type;
    return DFL_OK;
}

static dfl_status parse_value(jparser *ps, dfl__jv *v)
{
    if (ps->p >= ps->end) return jfail(ps, "unexpected end");
    switch (*ps->p) {
    case '"': {
        v->type = DFL__J_STR;
        return parse_string(ps, &v->u.str, &v->n);
    }
    case '{': return parse_container(ps, v, 1);
    case '[': return parse_container(ps, v, 0);
    case 't': return parse_literal(ps, "true", DFL__J_TRUE, v);
    case 'f': return parse_literal(ps, "false", DFL__J_FALSE, v);
    case 'n': return parse_literal(ps, "null", DFL__J_NULL, v);
    default: return parse_number(ps, v);
    }
}

dfl_status dfl__jdoc_parse(char *buf, size_t len, dfl__jdoc **out, const dfl__jv **root, dfl_error *err)
{
    *out = NULL;
    dfl__jdoc *d = calloc(1, sizeof *d);
    if (!d) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory reading JSON");
    jparser ps = {.p = buf, .end = buf + len, .start = buf, .doc = d, .err = err};
    if (len >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3)) ps.p += 3;
    skip_ws(&ps);
    dfl_status st = parse_value(&ps, &d->root);
    if (!st) {
        skip_ws(&ps);
        if (ps.p != ps.end) st = jfail(&ps, "trailing characters");
    }
    free(ps.stack);
    free(ps.seen);
    if (st) {
        dfl__jdoc_free(d);
        return st;
    }
    *out = d;
    *root = &d->root;
    return DFL_OK;
}

const dfl__jv *dfl__jget(const dfl__jv *o, const char *key)
{
    if (!o || o->type != DFL__J_OBJ) return NULL;
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < o->n; i++)
        if (o->u.kids[i].key_len == kl && !memcmp(o->u.kids[i].key, key, kl)) return &o->u.kids[i];
    return NULL;
}
