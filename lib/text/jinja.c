/* jinja.c — the chat-template subset of Jinja (jinja.h): a lexer that applies jinja2's
 * whitespace rules (trim_blocks, lstrip_blocks, - and + modifiers, newlines normalized,
 * one trailing newline dropped), a recursive-descent parser to a small tree, and an
 * evaluator with Python's value semantics. Hand-written: Debian packages no C or C++
 * Jinja engine (minja and jinja2cpp are not in Debian 12), and the subset is small.
 * Every value and node lives in an arena freed at once (one per template, one per
 * rendering). */
#include "text/jinja.h"

#include <cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/jsondoc.h"

/* ------------------------------------------------------------------ arena */

typedef struct ablock {
    struct ablock *next;
    size_t used, cap;
    max_align_t data[];
} ablock;

typedef struct arena {
    ablock *head;
    size_t total; /* bytes allocated: a template that loops without end stops at ARENA_MAX */
    int oom;
} arena;

enum { ARENA_MAX = 1 << 30, STEPS_MAX = 20000000 };

static void *aalloc(arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n == 0) n = sizeof(max_align_t);
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        ablock *b = a->total + cap <= ARENA_MAX ? malloc(sizeof *b + cap) : NULL;
        if (!b) {
            a->oom = a->total + cap <= ARENA_MAX ? 1 : 2; /* 2: the bound, not the system */
            return NULL;
        }
        b->next = a->head, b->used = 0, b->cap = cap;
        a->total += cap;
        a->head = b;
    }
    void *p = (char *)a->head->data + a->head->used;
    a->head->used += n;
    memset(p, 0, n);
    return p;
}

static void arena_free(arena *a)
{
    for (ablock *b = a->head, *next; b; b = next)
        next = b->next, free(b);
    a->head = NULL;
}

static char *astrndup(arena *a, const char *s, size_t n)
{
    char *p = aalloc(a, n + 1);
    if (p) memcpy(p, s, n), p[n] = '\0';
    return p;
}

/* ------------------------------------------------------------------ values */

typedef enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_FUNC } vtype;

typedef struct jv jv;
typedef struct jlist {
    jv *items;
    size_t n, cap;
    int tuple; /* printed (a, b) */
} jlist;
typedef struct jdict {
    const char **keys;
    size_t *klen;
    jv *vals;
    size_t n, cap;
    int ns; /* a namespace(): attributes assignable with set ns.x */
} jdict;

enum {
    F_NAMESPACE,
    F_RANGE,
    F_RAISE,
    F_STRFTIME,
    M_STRIP,
    M_LSTRIP,
    M_RSTRIP,
    M_SPLIT,
    M_STARTSWITH,
    M_ENDSWITH,
    M_UPPER,
    M_LOWER,
    M_REPLACE,
    M_TITLE,
    M_CAPITALIZE,
    M_GET,
    M_ITEMS,
    M_KEYS,
    M_VALUES
};

struct jv {
    vtype t;
    union {
        int b;
        long long i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        jlist *l;
        jdict *d;
        struct {
            int id;
            jv *self;
        } fn;
    } u;
};

static jv v_undef(void)
{
    jv v = {V_UNDEF, {0}};
    return v;
}
static jv v_none(void)
{
    jv v = {V_NONE, {0}};
    return v;
}
static jv v_bool(int b)
{
    jv v = {V_BOOL, {0}};
    v.u.b = !!b;
    return v;
}
static jv v_int(long long i)
{
    jv v = {V_INT, {0}};
    v.u.i = i;
    return v;
}
static jv v_float(double f)
{
    jv v = {V_FLOAT, {0}};
    v.u.f = f;
    return v;
}
static jv v_str(const char *p, size_t n)
{
    jv v = {V_STR, {0}};
    v.u.s.p = p, v.u.s.n = n;
    return v;
}

static int list_push(arena *a, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        jv *items = aalloc(a, cap * sizeof *items);
        if (!items) return 0;
        if (l->n) memcpy(items, l->items, l->n * sizeof *items);
        l->items = items, l->cap = cap;
    }
    l->items[l->n++] = v;
    return 1;
}

static jv *dict_find(const jdict *d, const char *k, size_t kn)
{
    for (size_t i = d->n; i-- > 0;)
        if (d->klen[i] == kn && !memcmp(d->keys[i], k, kn)) return &d->vals[i];
    return NULL;
}

static int dict_set(arena *a, jdict *d, const char *k, size_t kn, jv v)
{
    jv *slot = dict_find(d, k, kn);
    if (slot) {
        *slot = v;
        return 1;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        const char **keys = aalloc(a, cap * sizeof *keys);
        size_t *klen = aalloc(a, cap * sizeof *klen);
        jv *vals = aalloc(a, cap * sizeof *vals);
        if (!keys || !klen || !vals) return 0;
        if (d->n) {
            memcpy(keys, d->keys, d->n * sizeof *keys);
            memcpy(klen, d->klen, d->n * sizeof *klen);
            memcpy(vals, d->vals, d->n * sizeof *vals);
        }
        d->keys = keys, d->klen = klen, d->vals = vals, d->cap = cap;
    }
    d->keys[d->n] = k, d->klen[d->n] = kn, d->vals[d->n] = v;
    d->n++;
    return 1;
}

/* ------------------------------------------------------------------ UTF-8 helpers */

/* Decode the code point at s[*i] (valid UTF-8 assumed; a stray byte is taken as is). */
static uint32_t utf8_next(const char *s, size_t n, size_t *i)
{
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[*i];
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (*i + (size_t)len > n || len == 1) {
        (*i)++;
        return c;
    }
    c &= len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07;
    for (int k = 1; k < len; k++)
        c = (c << 6) | (u[*i + (size_t)k] & 0x3F);
    *i += (size_t)len;
    return c;
}

static size_t utf8_put(char *out, uint32_t c)
{
    if (c < 0x80) return out[0] = (char)c, 1;
    if (c < 0x800) return out[0] = (char)(0xC0 | (c >> 6)), out[1] = (char)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12)), out[1] = (char)(0x80 | ((c >> 6) & 0x3F)),
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18)), out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F)), out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Python's str.isspace. */
static int py_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Byte offsets of the code points of s: offs[k] = start of code point k, offs[n] = len. */
static size_t *cp_offsets(arena *a, const char *s, size_t n, size_t *count)
{
    size_t *offs = aalloc(a, (n + 1) * sizeof *offs), k = 0;
    if (!offs) return NULL;
    for (size_t i = 0; i < n;)
        offs[k++] = i, utf8_next(s, n, &i);
    offs[k] = n;
    *count = k;
    return offs;
}

static size_t cp_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; k++)
        utf8_next(s, n, &i);
    return k;
}

/* ------------------------------------------------------------------ tokens */

typedef enum { K_TEXT, K_VBEGIN, K_VEND, K_BBEGIN, K_BEND, K_NAME, K_STR, K_INT, K_FLOAT, K_OP, K_EOF } tkind;

typedef struct tok {
    tkind k;
    const char *p; /* text, name or operator; a string literal's decoded value */
    size_t n;
    int line;
    long long i;
    double f;
} tok;

typedef struct lexer {
    arena *a;
    const char *src;
    size_t len, pos;
    int line;
    tok *toks;
    size_t n, cap;
    dfl_error *err;
} lexer;

static dfl_status lex_fail(lexer *L, const char *fmt, const char *what)
{
    return dfl__fail(L->err, DFL_ERR_FORMAT, "chat template line %d: %s%s", L->line, fmt, what ? what : "");
}

static dfl_status emit(lexer *L, tkind k, const char *p, size_t n)
{
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        tok *t = realloc(L->toks, cap * sizeof *t);
        if (!t) return dfl__fail(L->err, DFL_ERR_NOMEM, "out of memory");
        L->toks = t, L->cap = cap;
    }
    tok *t = &L->toks[L->n++];
    memset(t, 0, sizeof *t);
    t->k = k, t->p = p, t->n = n, t->line = L->line;
    return DFL_OK;
}

static void count_lines(lexer *L, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        L->line += L->src[i] == '\n';
}

/* A string literal at L->pos (quote q), decoded with Python's escapes. */
static dfl_status lex_string(lexer *L)
{
    char q = L->src[L->pos];
    size_t i = L->pos + 1;
    char *out = aalloc(L->a, L->len - L->pos + 1);
    size_t o = 0;
    if (!out) return dfl__fail(L->err, DFL_ERR_NOMEM, "out of memory");
    while (i < L->len && L->src[i] != q) {
        char c = L->src[i];
        if (c != '\\' || i + 1 >= L->len) {
            out[o++] = c, i++;
            continue;
        }
        char e = L->src[i + 1];
        static const char names[] = "nrtabfv\\'\"0", map[] = "\n\r\t\a\b\f\v\\'\"\0";
        const char *simple = e ? strchr(names, e) : NULL;
        if (simple) {
            out[o++] = map[simple - names];
            i += 2;
        } else if (e == 'x' || e == 'u' || e == 'U') {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            if (i + 2 + (size_t)digits > L->len) return lex_fail(L, "truncated \\", "escape in a string");
            for (int k = 0; k < digits; k++) {
                char h = L->src[i + 2 + (size_t)k];
                if (!isxdigit((unsigned char)h)) return lex_fail(L, "bad \\", "escape in a string");
                cp = cp * 16 + (uint32_t)(isdigit((unsigned char)h) ? h - '0' : (tolower((unsigned char)h) - 'a' + 10));
            }
            o += utf8_put(out + o, cp);
            i += 2 + (size_t)digits;
        } else if (e == '\n') {
            i += 2; /* a backslash-newline continues the literal */
        } else {
            out[o++] = '\\', i++; /* unknown escapes stay as they are */
        }
    }
    if (i >= L->len) return lex_fail(L, "unterminated string literal", NULL);
    count_lines(L, L->pos, i);
    dfl_status s = emit(L, K_STR, out, o);
    L->pos = i + 1;
    return s;
}

/* The expression tokens of a {{ }} or {% %} tag, up to its end marker (end = "}}" or
 * "%}"); *strip_after: the end was "-}}" / "-%}"; *keep_nl: "+%}". */
static dfl_status lex_tag(lexer *L, const char *end, int *strip_after, int *keep_nl)
{
    static const char *const ops[] = {"==", "!=", ">=", "<=", "//", "**", "+", "-", "*", "/", "%", "~", "<",
                                      ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ".", ",", ":", "|"};
    int depth = 0;
    *strip_after = *keep_nl = 0;
    for (;;) {
        while (L->pos < L->len && isspace((unsigned char)L->src[L->pos]))
            L->line += L->src[L->pos++] == '\n';
        if (L->pos >= L->len) return lex_fail(L, "unterminated tag: missing ", end);
        const char *s = L->src + L->pos;
        size_t left = L->len - L->pos;
        if (depth == 0) {
            if (left >= 3 && (s[0] == '-' || s[0] == '+') && !strncmp(s + 1, end, 2)) {
                *strip_after = s[0] == '-', *keep_nl = s[0] == '+';
                L->pos += 3;
                return DFL_OK;
            }
            if (left >= 2 && !strncmp(s, end, 2)) {
                L->pos += 2;
                return DFL_OK;
            }
        }
        dfl_status st = DFL_OK;
        if (*s == '\'' || *s == '"') {
            st = lex_string(L);
        } else if (isalpha((unsigned char)*s) || *s == '_') {
            size_t n = 1;
            while (n < left && (isalnum((unsigned char)s[n]) || s[n] == '_'))
                n++;
            st = emit(L, K_NAME, s, n);
            L->pos += n;
        } else if (isdigit((unsigned char)*s)) {
            char *e1, *e2;
            long long iv = strtoll(s, &e1, 10);
            double fv = strtod(s, &e2);
            int is_float = e2 > e1 && (*e1 == '.' || *e1 == 'e' || *e1 == 'E') && e1 + 1 < s + left &&
                           isdigit((unsigned char)e1[1]);
            st = emit(L, is_float ? K_FLOAT : K_INT, s, (size_t)((is_float ? e2 : e1) - s));
            if (!st) L->toks[L->n - 1].i = iv, L->toks[L->n - 1].f = fv;
            L->pos += (size_t)((is_float ? e2 : e1) - s);
        } else {
            size_t k = 0, nops = sizeof ops / sizeof *ops;
            while (k < nops && strncmp(s, ops[k], strlen(ops[k])))
                k++;
            if (k == nops) {
                char what[8];
                snprintf(what, sizeof what, "'%c'", *s);
                return lex_fail(L, "unexpected character ", what);
            }
            if (strchr("([{", *s)) depth++;
            if (strchr(")]}", *s) && depth > 0) depth--;
            st = emit(L, K_OP, ops[k], strlen(ops[k]));
            L->pos += strlen(ops[k]);
        }
        if (st) return st;
    }
}

/* Whitespace-only from `from` to the end of text (Python's \s+ fullmatch). */
static int all_space(const char *t, size_t from, size_t to)
{
    if (from >= to) return 0;
    for (size_t i = from; i < to; i++)
        if (!isspace((unsigned char)t[i])) return 0;
    return 1;
}

/* Cut the template into text and tag tokens, with jinja2's whitespace rules. */
static dfl_status lex(lexer *L)
{
    int line_starting = 1; /* the last match ended with a newline (or this is the start) */
    while (L->pos <= L->len) {
        size_t start = L->pos, at = start;
        const char *open = NULL;
        while (at + 1 < L->len) {
            if (L->src[at] == '{' && strchr("{%#", L->src[at + 1])) {
                open = L->src + at;
                break;
            }
            at++;
        }
        if (!open) at = L->len;
        size_t text_end = at;
        char kind = open ? open[1] : 0;
        char mod = open && at + 2 < L->len ? L->src[at + 2] : 0;
        if (open && mod == '-') {
            while (text_end > start && isspace((unsigned char)L->src[text_end - 1]))
                text_end--;
        } else if (open && mod != '+' && kind != '{') {
            /* lstrip_blocks: only white space between the line's start and a block tag */
            size_t l_pos = text_end;
            while (l_pos > start && L->src[l_pos - 1] != '\n')
                l_pos--;
            if ((l_pos > start || line_starting) && all_space(L->src, l_pos, text_end)) text_end = l_pos;
        }
        if (text_end > start) {
            dfl_status s = emit(L, K_TEXT, L->src + start, text_end - start);
            if (s) return s;
        }
        count_lines(L, start, at);
        if (!open) break;
        L->pos = at + 2 + (mod == '-' || mod == '+');
        int strip_after = 0, keep_nl = 0;
        if (kind == '#') {
            const char *e = NULL;
            for (size_t i = L->pos; i + 1 < L->len; i++)
                if (L->src[i] == '#' && L->src[i + 1] == '}') {
                    e = L->src + i;
                    break;
                }
            if (!e) return lex_fail(L, "unterminated comment", NULL);
            size_t epos = (size_t)(e - L->src);
            strip_after = epos > L->pos && L->src[epos - 1] == '-';
            keep_nl = epos > L->pos && L->src[epos - 1] == '+';
            count_lines(L, L->pos, epos);
            L->pos = epos + 2;
        } else {
            dfl_status s = emit(L, kind == '{' ? K_VBEGIN : K_BBEGIN, open, 2);
            if (!s) s = lex_tag(L, kind == '{' ? "}}" : "%}", &strip_after, &keep_nl);
            if (!s) s = emit(L, kind == '{' ? K_VEND : K_BEND, NULL, 0);
            if (s) return s;
        }
        size_t match_end = L->pos;
        if (strip_after) {
            while (L->pos < L->len && isspace((unsigned char)L->src[L->pos]))
                L->line += L->src[L->pos++] == '\n';
        } else if (kind != '{' && !keep_nl && L->pos < L->len && L->src[L->pos] == '\n') {
            L->pos++, L->line++; /* trim_blocks */
        }
        line_starting = L->pos > match_end ? L->src[L->pos - 1] == '\n' : 0;
        if (L->pos >= L->len) break;
    }
    return emit(L, K_EOF, NULL, 0);
}

/* ------------------------------------------------------------------ tree */

typedef enum {
    E_CONST,
    E_NAME,
    E_ATTR,
    E_ITEM,
    E_SLICE,
    E_CALL,
    E_FILTER,
    E_TEST,
    E_BIN,
    E_NEG,
    E_NOT,
    E_AND,
    E_OR,
    E_COND,
    E_LIST,
    E_DICT
} ekind;

typedef struct expr expr;
struct expr {
    ekind k;
    int line;
    const char *op; /* E_BIN operator; E_ATTR / E_FILTER / E_TEST / E_NAME name */
    size_t op_n;
    int neg; /* E_TEST: is not */
    jv val;  /* E_CONST */
    expr *a, *b, *c;
    expr **args;     /* call / filter / test arguments, list and dict items */
    const char **kw; /* keyword names (NULL for positional) */
    size_t nargs;
};

typedef enum { N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_BREAK, N_CONTINUE, N_BODY } nkind;

typedef struct node node;
typedef struct body {
    node **items;
    size_t n, cap;
} body;

struct node {
    nkind k;
    int line;
    const char *text; /* N_TEXT */
    size_t text_n;
    expr *e;          /* N_OUT, N_SET value, N_FOR iterable */
    const char *name; /* N_SET / N_FOR target */
    const char *attr; /* N_SET ns.attr */
    expr **conds;     /* N_IF: conds[i] guards bodies[i]; bodies[nconds] is the else */
    body *bodies;
    size_t nconds;
    body main, other; /* N_FOR body and else; N_BODY body */
};

struct dfl_jinja {
    arena a;
    body root;
};

typedef struct parser {
    arena *a;
    tok *t;
    size_t i;
    dfl_error *err;
} parser;

static tok *peek(parser *P)
{
    return &P->t[P->i];
}

static int is_op(const tok *t, const char *op)
{
    return t->k == K_OP && t->n == strlen(op) && !memcmp(t->p, op, t->n);
}

static int is_name(const tok *t, const char *name)
{
    return t->k == K_NAME && t->n == strlen(name) && !memcmp(t->p, name, t->n);
}

static dfl_status perr(parser *P, const char *what, const tok *t)
{
    char got[48] = "end of template";
    if (t->k == K_BEND || t->k == K_VEND)
        snprintf(got, sizeof got, "end of tag");
    else if (t->k != K_EOF && t->p)
        snprintf(got, sizeof got, "'%.*s'", (int)(t->n > 30 ? 30 : t->n), t->p);
    return dfl__fail(P->err, DFL_ERR_FORMAT, "chat template line %d: %s (at %s)", t->line, what, got);
}

static dfl_status refuse(parser *P, const char *construct, const char *name, size_t n, int line)
{
    return dfl__fail(P->err, DFL_ERR_FORMAT, "chat template line %d: %s%.*s is outside the supported Jinja subset",
                     line, construct, (int)n, name ? name : "");
}

static expr *new_expr(parser *P, ekind k, int line)
{
    expr *e = aalloc(P->a, sizeof *e);
    if (e) e->k = k, e->line = line;
    return e;
}

static int body_push(arena *a, body *b, node *n)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 8;
        node **items = aalloc(a, cap * sizeof *items);
        if (!items) return 0;
        if (b->n) memcpy(items, b->items, b->n * sizeof *items);
        b->items = items, b->cap = cap;
    }
    b->items[b->n++] = n;
    return 1;
}

#define NOMEM(P) dfl__fail((P)->err, DFL_ERR_NOMEM, "out of memory")

static dfl_status parse_expr(parser *P, expr **out);
static dfl_status parse_or(parser *P, expr **out);

/* Arguments of a call, filter or test after "(": positional, then name=value. */
static dfl_status parse_args(parser *P, expr *e)
{
    size_t cap = 0;
    P->i++; /* ( */
    while (!is_op(peek(P), ")")) {
        if (e->nargs) {
            if (!is_op(peek(P), ",")) return perr(P, "expected ',' or ')' in arguments", peek(P));
            P->i++;
            if (is_op(peek(P), ")")) break;
        }
        const char *kw = NULL;
        if (peek(P)->k == K_NAME && is_op(&P->t[P->i + 1], "=")) {
            kw = astrndup(P->a, peek(P)->p, peek(P)->n);
            P->i += 2;
        }
        expr *arg;
        dfl_status s = parse_expr(P, &arg);
        if (s) return s;
        if (e->nargs == cap) {
            cap = cap ? 2 * cap : 4;
            expr **args = aalloc(P->a, cap * sizeof *args);
            const char **kws = aalloc(P->a, cap * sizeof *kws);
            if (!args || !kws) return NOMEM(P);
            if (e->nargs) memcpy(args, e->args, e->nargs * sizeof *args), memcpy(kws, e->kw, e->nargs * sizeof *kws);
            e->args = args, e->kw = kws;
        }
        e->args[e->nargs] = arg, e->kw[e->nargs] = kw;
        e->nargs++;
    }
    P->i++; /* ) */
    return DFL_OK;
}

/* Literal list [a, b], tuple (a, b) or dict {k: v}: items into e->args (dict: k, v pairs). */
static dfl_status parse_items(parser *P, expr *e, const char *close, int dict)
{
    size_t cap = 0;
    while (!is_op(peek(P), close)) {
        if (e->nargs) {
            if (!is_op(peek(P), ",")) return perr(P, "expected ',' in a literal", peek(P));
            P->i++;
            if (is_op(peek(P), close)) break;
        }
        for (int part = 0; part < (dict ? 2 : 1); part++) {
            expr *item;
            dfl_status s = parse_expr(P, &item);
            if (s) return s;
            if (dict && part == 0) {
                if (!is_op(peek(P), ":")) return perr(P, "expected ':' in a dict literal", peek(P));
                P->i++;
            }
            if (e->nargs == cap) {
                cap = cap ? 2 * cap : 8;
                expr **args = aalloc(P->a, cap * sizeof *args);
                if (!args) return NOMEM(P);
                if (e->nargs) memcpy(args, e->args, e->nargs * sizeof *args);
                e->args = args;
            }
            e->args[e->nargs++] = item;
        }
    }
    P->i++;
    return DFL_OK;
}

static const char *const FILTERS[] = {
    "trim",    "length", "count",  "tojson", "upper", "lower", "capitalize", "title",   "first", "last", "join",
    "default", "d",      "string", "int",    "float", "list",  "reverse",    "replace", "items", "abs",  NULL};
static const char *const TESTS[] = {"defined", "undefined", "none",    "string",  "number",   "integer",  "float",
                                    "boolean", "true",      "false",   "mapping", "iterable", "sequence", "even",
                                    "odd",     "eq",        "equalto", "ne",      "==",       "!=",       NULL};

static int in_list(const char *const *names, const char *p, size_t n)
{
    for (; *names; names++)
        if (strlen(*names) == n && !memcmp(*names, p, n)) return 1;
    return 0;
}

static dfl_status parse_primary(parser *P, expr **out)
{
    tok *t = peek(P);
    expr *e = NULL;
    dfl_status s = DFL_OK;
    if (t->k == K_STR) {
        if (!(e = new_expr(P, E_CONST, t->line))) return NOMEM(P);
        e->val = v_str(t->p, t->n);
        P->i++;
        /* adjacent literals concatenate, as in Python */
        while (peek(P)->k == K_STR) {
            tok *u = peek(P);
            char *p = aalloc(P->a, e->val.u.s.n + u->n + 1);
            if (!p) return NOMEM(P);
            memcpy(p, e->val.u.s.p, e->val.u.s.n), memcpy(p + e->val.u.s.n, u->p, u->n);
            e->val = v_str(p, e->val.u.s.n + u->n);
            P->i++;
        }
    } else if (t->k == K_INT || t->k == K_FLOAT) {
        if (!(e = new_expr(P, E_CONST, t->line))) return NOMEM(P);
        e->val = t->k == K_INT ? v_int(t->i) : v_float(t->f);
        P->i++;
    } else if (t->k == K_NAME) {
        if (!(e = new_expr(P, E_CONST, t->line))) return NOMEM(P);
        if (is_name(t, "true") || is_name(t, "True"))
            e->val = v_bool(1);
        else if (is_name(t, "false") || is_name(t, "False"))
            e->val = v_bool(0);
        else if (is_name(t, "none") || is_name(t, "None"))
            e->val = v_none();
        else
            e->k = E_NAME, e->op = astrndup(P->a, t->p, t->n), e->op_n = t->n;
        P->i++;
    } else if (is_op(t, "(")) {
        P->i++;
        if ((s = parse_expr(P, &e))) return s;
        if (is_op(peek(P), ",")) { /* a tuple: a list here */
            expr *l = new_expr(P, E_LIST, t->line);
            if (!l) return NOMEM(P);
            l->args = aalloc(P->a, sizeof *l->args);
            if (!l->args) return NOMEM(P);
            l->args[0] = e, l->nargs = 1;
            expr tail = {0};
            P->i++;
            if ((s = parse_items(P, &tail, ")", 0))) return s;
            expr **all = aalloc(P->a, (1 + tail.nargs) * sizeof *all);
            if (!all) return NOMEM(P);
            all[0] = e;
            if (tail.nargs) memcpy(all + 1, tail.args, tail.nargs * sizeof *all);
            l->args = all, l->nargs = 1 + tail.nargs, l->neg = 1; /* neg: a tuple */
            e = l;
        } else {
            if (!is_op(peek(P), ")")) return perr(P, "expected ')'", peek(P));
            P->i++;
        }
    } else if (is_op(t, "[") || is_op(t, "{")) {
        int dict = is_op(t, "{");
        if (!(e = new_expr(P, dict ? E_DICT : E_LIST, t->line))) return NOMEM(P);
        P->i++;
        if ((s = parse_items(P, e, dict ? "}" : "]", dict))) return s;
    } else {
        return perr(P, "expected a value", t);
    }
    /* postfix: .name, [index or slice], (call) */
    for (;;) {
        t = peek(P);
        if (is_op(t, ".")) {
            tok *n = &P->t[P->i + 1];
            if (n->k != K_NAME) return perr(P, "expected a name after '.'", n);
            expr *g = new_expr(P, E_ATTR, t->line);
            if (!g) return NOMEM(P);
            g->a = e, g->op = astrndup(P->a, n->p, n->n), g->op_n = n->n;
            e = g;
            P->i += 2;
        } else if (is_op(t, "[")) {
            P->i++;
            expr *parts[3] = {NULL, NULL, NULL};
            int colons = 0;
            for (;;) {
                if (is_op(peek(P), ":")) {
                    if (++colons > 2) return perr(P, "too many ':' in a slice", peek(P));
                    P->i++;
                    continue;
                }
                if (is_op(peek(P), "]")) break;
                if (parts[colons]) return perr(P, "expected ']'", peek(P));
                if ((s = parse_expr(P, &parts[colons]))) return s;
            }
            P->i++;
            expr *g = new_expr(P, colons ? E_SLICE : E_ITEM, t->line);
            if (!g) return NOMEM(P);
            if (!colons && !parts[0]) return perr(P, "empty subscript", t);
            g->a = e, g->b = parts[0], g->c = parts[1];
            if (colons) {
                g->args = aalloc(P->a, sizeof *g->args);
                if (!g->args) return NOMEM(P);
                g->args[0] = parts[2], g->nargs = 1;
            }
            e = g;
        } else if (is_op(t, "(")) {
            expr *g = new_expr(P, E_CALL, t->line);
            if (!g) return NOMEM(P);
            g->a = e;
            if ((s = parse_args(P, g))) return s;
            e = g;
        } else {
            break;
        }
    }
    *out = e;
    return DFL_OK;
}

/* |filter(args) and `is [not] test args` after a unary expression, as jinja2's
 * parse_unary applies them: -x|abs is (-x)|abs. */
static dfl_status parse_filters(parser *P, expr *e, expr **out)
{
    dfl_status s;
    tok *t;
    for (;;) {
        t = peek(P);
        if (is_op(t, "|")) {
            tok *n = &P->t[P->i + 1];
            if (n->k != K_NAME) return perr(P, "expected a filter name after '|'", n);
            if (!in_list(FILTERS, n->p, n->n)) return refuse(P, "the filter ", n->p, n->n, n->line);
            expr *g = new_expr(P, E_FILTER, t->line);
            if (!g) return NOMEM(P);
            g->a = e, g->op = astrndup(P->a, n->p, n->n), g->op_n = n->n;
            P->i += 2;
            if (is_op(peek(P), "(") && (s = parse_args(P, g))) return s;
            e = g;
        } else if (is_name(t, "is")) {
            P->i++;
            int neg = 0;
            if (is_name(peek(P), "not")) neg = 1, P->i++;
            tok *n = peek(P);
            if (n->k != K_NAME && !(n->k == K_OP && (is_op(n, "==") || is_op(n, "!="))))
                return perr(P, "expected a test name after 'is'", n);
            if (!in_list(TESTS, n->p, n->n)) return refuse(P, "the test ", n->p, n->n, n->line);
            expr *g = new_expr(P, E_TEST, t->line);
            if (!g) return NOMEM(P);
            g->a = e, g->neg = neg, g->op = astrndup(P->a, n->p, n->n), g->op_n = n->n;
            P->i++;
            if (is_op(peek(P), "(")) {
                if ((s = parse_args(P, g))) return s;
            } else if (peek(P)->k == K_STR || peek(P)->k == K_INT || peek(P)->k == K_FLOAT ||
                       (peek(P)->k == K_NAME && !is_name(peek(P), "and") && !is_name(peek(P), "or") &&
                        !is_name(peek(P), "else") && !is_name(peek(P), "if") && !is_name(peek(P), "is"))) {
                /* one argument without parentheses: x is divisibleby 3, x is eq 'a' */
                expr *arg;
                if ((s = parse_primary(P, &arg))) return s;
                g->args = aalloc(P->a, sizeof *g->args);
                g->kw = aalloc(P->a, sizeof *g->kw);
                if (!g->args || !g->kw) return NOMEM(P);
                g->args[0] = arg, g->nargs = 1;
            }
            e = g;
        } else {
            break;
        }
    }
    *out = e;
    return DFL_OK;
}

static dfl_status parse_unary_bare(parser *P, expr **out)
{
    tok *t = peek(P);
    if (is_op(t, "-") || is_op(t, "+")) {
        P->i++;
        expr *a;
        dfl_status s = parse_unary_bare(P, &a);
        if (s) return s;
        if (is_op(t, "+")) return *out = a, DFL_OK;
        expr *e = new_expr(P, E_NEG, t->line);
        if (!e) return NOMEM(P);
        e->a = a;
        *out = e;
        return DFL_OK;
    }
    return parse_primary(P, out);
}

static dfl_status parse_unary(parser *P, expr **out)
{
    expr *e;
    dfl_status s = parse_unary_bare(P, &e);
    return s ? s : parse_filters(P, e, out);
}

static dfl_status binary(parser *P, expr **out, dfl_status (*next)(parser *, expr **), const char *const *ops)
{
    expr *a;
    dfl_status s = next(P, &a);
    if (s) return s;
    for (;;) {
        tok *t = peek(P);
        const char *const *op = ops;
        while (*op && !is_op(t, *op))
            op++;
        if (!*op) break;
        if (!strcmp(*op, "**")) return refuse(P, "the operator ", "**", 2, t->line);
        P->i++;
        expr *b, *e = new_expr(P, E_BIN, t->line);
        if (!e) return NOMEM(P);
        if ((s = next(P, &b))) return s;
        e->op = *op, e->op_n = strlen(*op), e->a = a, e->b = b;
        a = e;
    }
    *out = a;
    return DFL_OK;
}

static const char *const OPS_MUL[] = {"*", "/", "//", "%", "**", NULL};
static const char *const OPS_CONCAT[] = {"~", NULL};
static const char *const OPS_ADD[] = {"+", "-", NULL};
static dfl_status parse_mul(parser *P, expr **out)
{
    return binary(P, out, parse_unary, OPS_MUL);
}
static dfl_status parse_concat(parser *P, expr **out)
{
    return binary(P, out, parse_mul, OPS_CONCAT);
}
static dfl_status parse_add(parser *P, expr **out)
{
    return binary(P, out, parse_concat, OPS_ADD);
}

static dfl_status parse_compare(parser *P, expr **out)
{
    static const char *const cmp[] = {"==", "!=", "<=", ">=", "<", ">", NULL};
    expr *a;
    dfl_status s = parse_add(P, &a);
    if (s) return s;
    for (;;) {
        tok *t = peek(P);
        const char *op = NULL;
        for (const char *const *c = cmp; *c; c++)
            if (is_op(t, *c)) op = *c;
        int skip = 1;
        if (!op && is_name(t, "in")) op = "in";
        if (!op && is_name(t, "not") && is_name(&P->t[P->i + 1], "in")) op = "not in", skip = 2;
        if (!op) break;
        P->i += (size_t)skip;
        expr *b, *e = new_expr(P, E_BIN, t->line);
        if (!e) return NOMEM(P);
        if ((s = parse_add(P, &b))) return s;
        e->op = op, e->op_n = strlen(op), e->a = a, e->b = b;
        a = e;
    }
    *out = a;
    return DFL_OK;
}

static dfl_status parse_not(parser *P, expr **out)
{
    tok *t = peek(P);
    if (is_name(t, "not")) {
        P->i++;
        expr *a, *e = new_expr(P, E_NOT, t->line);
        if (!e) return NOMEM(P);
        dfl_status s = parse_not(P, &a);
        if (s) return s;
        e->a = a;
        *out = e;
        return DFL_OK;
    }
    return parse_compare(P, out);
}

static dfl_status parse_logic(parser *P, expr **out, int is_or)
{
    expr *a;
    dfl_status s = is_or ? parse_logic(P, &a, 0) : parse_not(P, &a);
    if (s) return s;
    while (is_name(peek(P), is_or ? "or" : "and")) {
        int line = peek(P)->line;
        P->i++;
        expr *b, *e = new_expr(P, is_or ? E_OR : E_AND, line);
        if (!e) return NOMEM(P);
        if ((s = is_or ? parse_logic(P, &b, 0) : parse_not(P, &b))) return s;
        e->a = a, e->b = b;
        a = e;
    }
    *out = a;
    return DFL_OK;
}

static dfl_status parse_or(parser *P, expr **out)
{
    return parse_logic(P, out, 1);
}

/* a if cond else b (else optional: undefined) */
static dfl_status parse_expr(parser *P, expr **out)
{
    expr *a;
    dfl_status s = parse_or(P, &a);
    if (s) return s;
    while (is_name(peek(P), "if")) {
        int line = peek(P)->line;
        P->i++;
        expr *e = new_expr(P, E_COND, line);
        if (!e) return NOMEM(P);
        e->a = a;
        if ((s = parse_or(P, &e->b))) return s;
        if (is_name(peek(P), "else")) {
            P->i++;
            if ((s = parse_or(P, &e->c))) return s;
        }
        a = e;
    }
    *out = a;
    return DFL_OK;
}

static dfl_status expect_bend(parser *P)
{
    if (peek(P)->k != K_BEND) return perr(P, "expected the end of the tag", peek(P));
    P->i++;
    return DFL_OK;
}

/* Statements until a {% name %} in `stops` (left unconsumed: *stop says which) or EOF. */
static dfl_status parse_body(parser *P, body *b, const char *const *stops, const char **stop, int in_for);

static dfl_status parse_stmt(parser *P, body *b, int in_for)
{
    tok *kw = peek(P);
    dfl_status s;
    node *n = aalloc(P->a, sizeof *n);
    if (!n) return NOMEM(P);
    n->line = kw->line;
    if (kw->k != K_NAME) return perr(P, "expected a statement name", kw);
    const char *stop = NULL;
    if (is_name(kw, "if")) {
        static const char *const stops[] = {"elif", "else", "endif", NULL};
        size_t cap = 4;
        n->k = N_IF;
        n->conds = aalloc(P->a, cap * sizeof *n->conds);
        n->bodies = aalloc(P->a, (cap + 1) * sizeof *n->bodies);
        if (!n->conds || !n->bodies) return NOMEM(P);
        P->i++;
        for (;;) {
            if (n->nconds == cap) {
                expr **c = aalloc(P->a, 2 * cap * sizeof *c);
                body *bs = aalloc(P->a, (2 * cap + 1) * sizeof *bs);
                if (!c || !bs) return NOMEM(P);
                memcpy(c, n->conds, cap * sizeof *c), memcpy(bs, n->bodies, cap * sizeof *bs);
                n->conds = c, n->bodies = bs, cap *= 2;
            }
            if ((s = parse_expr(P, &n->conds[n->nconds])) || (s = expect_bend(P))) return s;
            if ((s = parse_body(P, &n->bodies[n->nconds], stops, &stop, in_for))) return s;
            n->nconds++;
            P->i++; /* the stop name */
            if (!strcmp(stop, "elif")) continue;
            if (!strcmp(stop, "else")) {
                static const char *const end[] = {"endif", NULL};
                if ((s = expect_bend(P)) || (s = parse_body(P, &n->bodies[n->nconds], end, &stop, in_for))) return s;
                P->i++;
            }
            break;
        }
    } else if (is_name(kw, "for")) {
        static const char *const stops[] = {"else", "endfor", NULL};
        n->k = N_FOR;
        P->i++;
        tok *v = peek(P);
        if (v->k != K_NAME) return perr(P, "expected a loop variable", v);
        n->name = astrndup(P->a, v->p, v->n);
        P->i++;
        if (is_op(peek(P), ",")) return refuse(P, "a for loop with several targets", NULL, 0, v->line);
        if (!is_name(peek(P), "in")) return perr(P, "expected 'in'", peek(P));
        P->i++;
        if ((s = parse_or(P, &n->e))) return s;
        if (is_name(peek(P), "if")) return refuse(P, "a for loop with an if filter", NULL, 0, v->line);
        if (is_name(peek(P), "recursive")) return refuse(P, "a recursive for loop", NULL, 0, v->line);
        if ((s = expect_bend(P)) || (s = parse_body(P, &n->main, stops, &stop, 1))) return s;
        P->i++;
        if (!strcmp(stop, "else")) {
            static const char *const end[] = {"endfor", NULL};
            if ((s = expect_bend(P)) || (s = parse_body(P, &n->other, end, &stop, in_for))) return s;
            P->i++;
        }
    } else if (is_name(kw, "set")) {
        n->k = N_SET;
        P->i++;
        tok *v = peek(P);
        if (v->k != K_NAME) return perr(P, "expected a name after set", v);
        n->name = astrndup(P->a, v->p, v->n);
        P->i++;
        if (is_op(peek(P), ".")) {
            tok *at = &P->t[P->i + 1];
            if (at->k != K_NAME) return perr(P, "expected an attribute name", at);
            n->attr = astrndup(P->a, at->p, at->n);
            P->i += 2;
        }
        if (is_op(peek(P), ",")) return refuse(P, "a set with several targets", NULL, 0, v->line);
        if (peek(P)->k == K_BEND) return refuse(P, "a block set ({% set x %}...{% endset %})", NULL, 0, v->line);
        if (!is_op(peek(P), "=")) return perr(P, "expected '=' in set", peek(P));
        P->i++;
        if ((s = parse_expr(P, &n->e))) return s;
    } else if (is_name(kw, "break") || is_name(kw, "continue")) {
        if (!in_for) return perr(P, "break or continue outside a for loop", kw);
        n->k = is_name(kw, "break") ? N_BREAK : N_CONTINUE;
        P->i++;
    } else if (is_name(kw, "generation")) {
        static const char *const end[] = {"endgeneration", NULL};
        n->k = N_BODY;
        P->i++;
        if ((s = expect_bend(P)) || (s = parse_body(P, &n->main, end, &stop, in_for))) return s;
        P->i++;
    } else {
        return refuse(P, "the statement ", kw->p, kw->n, kw->line);
    }
    if ((s = expect_bend(P))) return s;
    return body_push(P->a, b, n) ? DFL_OK : NOMEM(P);
}

static dfl_status parse_body(parser *P, body *b, const char *const *stops, const char **stop, int in_for)
{
    for (;;) {
        tok *t = peek(P);
        dfl_status s = DFL_OK;
        if (t->k == K_EOF) {
            if (!stops) return DFL_OK;
            const char *const *last = stops;
            while (last[1])
                last++;
            return dfl__fail(P->err, DFL_ERR_FORMAT, "chat template: missing {%% %s %%} at the end", *last);
        }
        if (t->k == K_TEXT) {
            node *n = aalloc(P->a, sizeof *n);
            if (!n) return NOMEM(P);
            n->k = N_TEXT, n->line = t->line, n->text = t->p, n->text_n = t->n;
            if (!body_push(P->a, b, n)) return NOMEM(P);
            P->i++;
        } else if (t->k == K_VBEGIN) {
            node *n = aalloc(P->a, sizeof *n);
            if (!n) return NOMEM(P);
            n->k = N_OUT, n->line = t->line;
            P->i++;
            if ((s = parse_expr(P, &n->e))) return s;
            if (peek(P)->k != K_VEND) return perr(P, "expected '}}'", peek(P));
            P->i++;
            if (!body_push(P->a, b, n)) return NOMEM(P);
        } else if (t->k == K_BBEGIN) {
            tok *kw = &P->t[P->i + 1];
            for (const char *const *st = stops; st && *st; st++)
                if (is_name(kw, *st)) {
                    *stop = *st;
                    P->i++; /* leave the stop name for the caller */
                    return DFL_OK;
                }
            if (kw->k == K_NAME && (kw->n > 3 && !strncmp(kw->p, "end", 3))) return perr(P, "unexpected end tag", kw);
            if (kw->k == K_NAME && (is_name(kw, "elif") || is_name(kw, "else"))) return perr(P, "unexpected tag", kw);
            P->i++;
            if ((s = parse_stmt(P, b, in_for))) return s;
        } else {
            return perr(P, "unexpected token", t);
        }
    }
}

dfl_status dfl_jinja_parse(const char *src, size_t len, dfl_jinja **out, dfl_error *err)
{
    *out = NULL;
    dfl_jinja *t = calloc(1, sizeof *t);
    if (!t) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    /* newlines normalized to \n and one trailing newline dropped, as jinja2's lexer does */
    char *norm = aalloc(&t->a, len + 1);
    size_t n = 0;
    if (!norm) {
        free(t);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            norm[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            norm[n++] = src[i];
        }
    }
    if (n > 0 && norm[n - 1] == '\n') n--;
    lexer L = {&t->a, norm, n, 0, 1, NULL, 0, 0, err};
    dfl_status s = lex(&L);
    if (!s) {
        parser P = {&t->a, L.toks, 0, err};
        s = parse_body(&P, &t->root, NULL, NULL, 0);
    }
    free(L.toks);
    if (!s && t->a.oom) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (s) {
        dfl_jinja_free(t);
        return s;
    }
    *out = t;
    return DFL_OK;
}

void dfl_jinja_free(dfl_jinja *t)
{
    if (!t) return;
    arena_free(&t->a);
    free(t);
}

/* ------------------------------------------------------------------ evaluation */

typedef struct ctx {
    arena a;
    dfl_strbuf *out;
    jdict *scopes[64];
    int depth;
    int brk, cont;
    long steps; /* statements run: a runaway template stops at STEPS_MAX */
    dfl_error *err;
} ctx;

static dfl_status rfail(ctx *c, int line, const char *fmt, const char *a, size_t an)
{
    char what[160];
    snprintf(what, sizeof what, fmt, (int)(an > 80 ? 80 : an), a ? a : "");
    return dfl__fail(c->err, DFL_ERR_FORMAT, "chat template line %d: %s", line, what);
}

#define CNOMEM(c)                                                                                                      \
    ((c)->a.oom == 2 ? dfl__fail((c)->err, DFL_ERR_FORMAT, "chat template: rendering needs more than 1 GiB")           \
                     : dfl__fail((c)->err, DFL_ERR_NOMEM, "out of memory"))

static const char *type_name(const jv *v)
{
    static const char *const names[] = {"undefined", "none", "bool", "int", "float", "str", "list", "dict", "function"};
    if (v->t == V_DICT && v->u.d->ns) return "namespace";
    return names[v->t];
}

static int truthy(const jv *v)
{
    switch (v->t) {
    case V_UNDEF:
    case V_NONE: return 0;
    case V_BOOL: return v->u.b;
    case V_INT: return v->u.i != 0;
    case V_FLOAT: return v->u.f != 0;
    case V_STR: return v->u.s.n != 0;
    case V_LIST: return v->u.l->n != 0;
    case V_DICT: return v->u.d->ns || v->u.d->n != 0;
    default: return 1;
    }
}

static void put_float(dfl_strbuf *b, double f)
{
    if (isnan(f)) return dfl_strbuf_puts(b, "nan");
    if (isinf(f)) return dfl_strbuf_puts(b, f > 0 ? "inf" : "-inf");
    /* Python's repr: the shortest digits that round-trip, fixed notation for exponents
     * in [-4, 16), else d.ddde+XX */
    char buf[48], digits[24];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    char *ep = strchr(buf, 'e');
    int exp10 = atoi(ep + 1), nd = 0, neg = buf[0] == '-';
    for (char *q = buf + neg; q < ep; q++)
        if (isdigit((unsigned char)*q)) digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    if (neg) dfl_strbuf_puts(b, "-");
    if (exp10 < -4 || exp10 >= 16) {
        dfl_strbuf_printf(b, "%c%s%s", digits[0], nd > 1 ? "." : "", digits + 1);
        dfl_strbuf_printf(b, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (exp10 < 0) {
        dfl_strbuf_puts(b, "0.");
        for (int k = 0; k < -exp10 - 1; k++)
            dfl_strbuf_puts(b, "0");
        dfl_strbuf_puts(b, digits);
    } else {
        for (int k = 0; k <= exp10; k++)
            dfl_strbuf_add(b, k < nd ? &digits[k] : "0", 1);
        dfl_strbuf_puts(b, ".");
        dfl_strbuf_puts(b, nd > exp10 + 1 ? digits + exp10 + 1 : "0");
    }
}

static void put_repr(dfl_strbuf *b, const jv *v);

/* Python's str(): strings as they are, containers as their repr. */
static void put_str(dfl_strbuf *b, const jv *v)
{
    switch (v->t) {
    case V_UNDEF: break;
    case V_NONE: dfl_strbuf_puts(b, "None"); break;
    case V_BOOL: dfl_strbuf_puts(b, v->u.b ? "True" : "False"); break;
    case V_INT: dfl_strbuf_printf(b, "%lld", v->u.i); break;
    case V_FLOAT: put_float(b, v->u.f); break;
    case V_STR: dfl_strbuf_add(b, v->u.s.p, v->u.s.n); break;
    default: put_repr(b, v); break;
    }
}

static void put_quoted(dfl_strbuf *b, const char *p, size_t n)
{
    int dq = memchr(p, '\'', n) && !memchr(p, '"', n);
    char q = dq ? '"' : '\'';
    dfl_strbuf_add(b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\\' || ch == (unsigned char)q)
            dfl_strbuf_printf(b, "\\%c", ch);
        else if (ch == '\n')
            dfl_strbuf_puts(b, "\\n");
        else if (ch == '\r')
            dfl_strbuf_puts(b, "\\r");
        else if (ch == '\t')
            dfl_strbuf_puts(b, "\\t");
        else if (ch < 0x20 || ch == 0x7F)
            dfl_strbuf_printf(b, "\\x%02x", ch);
        else
            dfl_strbuf_add(b, (const char *)&ch, 1);
    }
    dfl_strbuf_add(b, &q, 1);
}

static void put_repr(dfl_strbuf *b, const jv *v)
{
    if (v->t == V_STR) return put_quoted(b, v->u.s.p, v->u.s.n);
    if (v->t == V_LIST) {
        dfl_strbuf_puts(b, v->u.l->tuple ? "(" : "[");
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i) dfl_strbuf_puts(b, ", ");
            put_repr(b, &v->u.l->items[i]);
        }
        dfl_strbuf_puts(b, v->u.l->tuple ? (v->u.l->n == 1 ? ",)" : ")") : "]");
        return;
    }
    if (v->t == V_DICT) {
        if (v->u.d->ns) return dfl_strbuf_puts(b, "<Namespace>");
        dfl_strbuf_puts(b, "{");
        for (size_t i = 0; i < v->u.d->n; i++) {
            if (i) dfl_strbuf_puts(b, ", ");
            put_quoted(b, v->u.d->keys[i], v->u.d->klen[i]);
            dfl_strbuf_puts(b, ": ");
            put_repr(b, &v->u.d->vals[i]);
        }
        dfl_strbuf_puts(b, "}");
        return;
    }
    if (v->t == V_FUNC) return dfl_strbuf_puts(b, "<function>");
    put_str(b, v);
}

/* json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: None). */
static int put_json(dfl_strbuf *b, const jv *v, int indent, int level)
{
    switch (v->t) {
    case V_NONE: dfl_strbuf_puts(b, "null"); return 1;
    case V_BOOL: dfl_strbuf_puts(b, v->u.b ? "true" : "false"); return 1;
    case V_INT: dfl_strbuf_printf(b, "%lld", v->u.i); return 1;
    case V_FLOAT:
        if (isnan(v->u.f) || isinf(v->u.f))
            dfl_strbuf_puts(b, isnan(v->u.f) ? "NaN" : v->u.f > 0 ? "Infinity" : "-Infinity");
        else
            put_float(b, v->u.f);
        return 1;
    case V_STR:
        dfl_strbuf_puts(b, "\"");
        for (size_t i = 0; i < v->u.s.n; i++) {
            unsigned char ch = (unsigned char)v->u.s.p[i];
            static const char esc[] = "\"\\\b\f\n\r\t", rep[] = "\"\\bfnrt";
            const char *e = ch ? strchr(esc, ch) : NULL;
            if (e)
                dfl_strbuf_printf(b, "\\%c", rep[e - esc]);
            else if (ch < 0x20)
                dfl_strbuf_printf(b, "\\u%04x", ch);
            else
                dfl_strbuf_add(b, (const char *)&ch, 1);
        }
        dfl_strbuf_puts(b, "\"");
        return 1;
    case V_LIST:
    case V_DICT: {
        int dict = v->t == V_DICT;
        size_t n = dict ? v->u.d->n : v->u.l->n;
        dfl_strbuf_puts(b, dict ? "{" : "[");
        for (size_t i = 0; i < n; i++) {
            if (i) dfl_strbuf_puts(b, indent >= 0 ? "," : ", ");
            if (indent >= 0) dfl_strbuf_printf(b, "\n%*s", indent * (level + 1), "");
            if (dict) {
                jv k = v_str(v->u.d->keys[i], v->u.d->klen[i]);
                put_json(b, &k, indent, level + 1);
                dfl_strbuf_puts(b, ": ");
            }
            if (!put_json(b, dict ? &v->u.d->vals[i] : &v->u.l->items[i], indent, level + 1)) return 0;
        }
        if (indent >= 0 && n) dfl_strbuf_printf(b, "\n%*s", indent * level, "");
        dfl_strbuf_puts(b, dict ? "}" : "]");
        return 1;
    }
    default: return 0;
    }
}

static dfl_status to_str(ctx *c, const jv *v, jv *out)
{
    if (v->t == V_STR) return *out = *v, DFL_OK;
    dfl_strbuf b = {0};
    put_str(&b, v);
    if (b.oom) return dfl_strbuf_free(&b), CNOMEM(c);
    size_t n = b.len;
    char *p = astrndup(&c->a, b.p ? b.p : "", n);
    dfl_strbuf_free(&b);
    if (!p) return CNOMEM(c);
    *out = v_str(p, n);
    return DFL_OK;
}

static jv from_json(ctx *c, const cJSON *j)
{
    if (cJSON_IsNull(j)) return v_none();
    if (cJSON_IsBool(j)) return v_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        /* an integer literal stays an int (Python's json does the same) */
        if (j->valuestring == NULL && d == floor(d) && fabs(d) < 9.2e18) return v_int((long long)d);
        return v_float(d);
    }
    if (cJSON_IsString(j)) return v_str(j->valuestring, strlen(j->valuestring));
    if (cJSON_IsArray(j)) {
        jlist *l = aalloc(&c->a, sizeof *l);
        jv v = {V_LIST, {0}};
        if (!l) return v_undef();
        for (const cJSON *e = j->child; e; e = e->next)
            list_push(&c->a, l, from_json(c, e));
        v.u.l = l;
        return v;
    }
    jdict *d = aalloc(&c->a, sizeof *d);
    jv v = {V_DICT, {0}};
    if (!d) return v_undef();
    for (const cJSON *e = j->child; e; e = e->next)
        dict_set(&c->a, d, e->string, strlen(e->string), from_json(c, e));
    v.u.d = d;
    return v;
}

static int num(const jv *v)
{
    return v->t == V_INT || v->t == V_FLOAT || v->t == V_BOOL;
}
static double as_f(const jv *v)
{
    return v->t == V_FLOAT ? v->u.f : v->t == V_INT ? (double)v->u.i : v->u.b;
}
static long long as_i(const jv *v)
{
    return v->t == V_INT ? v->u.i : v->t == V_BOOL ? v->u.b : (long long)v->u.f;
}

static int equal(const jv *a, const jv *b)
{
    if (num(a) && num(b)) {
        if (a->t == V_FLOAT || b->t == V_FLOAT) return as_f(a) == as_f(b);
        return as_i(a) == as_i(b);
    }
    if (a->t != b->t) return 0;
    switch (a->t) {
    case V_UNDEF:
    case V_NONE: return 1;
    case V_STR: return a->u.s.n == b->u.s.n && !memcmp(a->u.s.p, b->u.s.p, a->u.s.n);
    case V_LIST:
        if (a->u.l->n != b->u.l->n || a->u.l->tuple != b->u.l->tuple) return 0;
        for (size_t i = 0; i < a->u.l->n; i++)
            if (!equal(&a->u.l->items[i], &b->u.l->items[i])) return 0;
        return 1;
    case V_DICT:
        if (a->u.d == b->u.d) return 1;
        if (a->u.d->ns || b->u.d->ns || a->u.d->n != b->u.d->n) return 0;
        for (size_t i = 0; i < a->u.d->n; i++) {
            jv *o = dict_find(b->u.d, a->u.d->keys[i], a->u.d->klen[i]);
            if (!o || !equal(&a->u.d->vals[i], o)) return 0;
        }
        return 1;
    default: return 0;
    }
}

static dfl_status eval(ctx *c, const expr *e, jv *out);

static jv lookup(ctx *c, const char *name, size_t n)
{
    for (int i = c->depth - 1; i >= 0; i--) {
        jv *v = dict_find(c->scopes[i], name, n);
        if (v) return *v;
    }
    static const char *const globals[] = {"namespace", "range", "raise_exception", "strftime_now"};
    for (int k = 0; k < 4; k++)
        if (strlen(globals[k]) == n && !memcmp(globals[k], name, n)) {
            jv f = {V_FUNC, {0}};
            f.u.fn.id = k; /* F_NAMESPACE .. F_STRFTIME */
            return f;
        }
    return v_undef();
}

static jv method(ctx *c, const jv *self, int id)
{
    jv f = {V_FUNC, {0}};
    jv *s = aalloc(&c->a, sizeof *s);
    if (!s) return v_undef();
    *s = *self;
    f.u.fn.id = id, f.u.fn.self = s;
    return f;
}

static dfl_status get_attr(ctx *c, int line, const jv *obj, const char *name, size_t n, jv *out)
{
    static const char *const str_methods[] = {"strip", "lstrip", "rstrip",  "split", "startswith", "endswith",
                                              "upper", "lower",  "replace", "title", "capitalize"};
    static const char *const dict_methods[] = {"get", "items", "keys", "values"};
    *out = v_undef();
    if (obj->t == V_UNDEF) return rfail(c, line, "an undefined value has no attribute '%.*s'", name, n);
    if (obj->t == V_STR) {
        for (int k = 0; k < 11; k++)
            if (strlen(str_methods[k]) == n && !memcmp(str_methods[k], name, n))
                return *out = method(c, obj, M_STRIP + k), DFL_OK;
        return DFL_OK;
    }
    if (obj->t == V_DICT) {
        if (!obj->u.d->ns) {
            for (int k = 0; k < 4; k++)
                if (strlen(dict_methods[k]) == n && !memcmp(dict_methods[k], name, n))
                    return *out = method(c, obj, M_GET + k), DFL_OK;
            static const char *const other[] = {"copy", "update", "pop", "popitem", "setdefault", "clear", "fromkeys"};
            for (int k = 0; k < 7; k++)
                if (strlen(other[k]) == n && !memcmp(other[k], name, n))
                    return rfail(c, line, "the dict method '%.*s' is outside the supported Jinja subset", name, n);
        }
        jv *v = dict_find(obj->u.d, name, n);
        if (v) *out = *v;
        return DFL_OK;
    }
    if (obj->t == V_LIST) {
        static const char *const lm[] = {"append", "extend", "insert",  "pop",  "remove", "index",
                                         "count",  "sort",   "reverse", "copy", "clear"};
        for (int k = 0; k < 11; k++)
            if (strlen(lm[k]) == n && !memcmp(lm[k], name, n))
                return rfail(c, line, "the list method '%.*s' is outside the supported Jinja subset", name, n);
    }
    return DFL_OK;
}

static dfl_status get_item(ctx *c, int line, const jv *obj, const jv *key, jv *out)
{
    *out = v_undef();
    if (obj->t == V_UNDEF) return rfail(c, line, "an undefined value cannot be indexed%.*s", "", 0);
    if ((obj->t == V_LIST || obj->t == V_STR) && (key->t == V_INT || key->t == V_BOOL)) {
        long long i = as_i(key);
        if (obj->t == V_LIST) {
            long long n = (long long)obj->u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) *out = obj->u.l->items[i];
            return DFL_OK;
        }
        size_t count, *offs = cp_offsets(&c->a, obj->u.s.p, obj->u.s.n, &count);
        if (!offs) return CNOMEM(c);
        if (i < 0) i += (long long)count;
        if (i >= 0 && i < (long long)count) *out = v_str(obj->u.s.p + offs[i], offs[i + 1] - offs[i]);
        return DFL_OK;
    }
    if (obj->t == V_DICT && key->t == V_STR) {
        jv *v = dict_find(obj->u.d, key->u.s.p, key->u.s.n);
        if (v) return *out = *v, DFL_OK;
    }
    if (key->t == V_STR) return get_attr(c, line, obj, key->u.s.p, key->u.s.n, out);
    return DFL_OK;
}

/* Python slice indices for a sequence of n items. */
static void slice_range(long long n, const jv *a, const jv *b, long long step, long long *start, long long *stop)
{
    long long lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
    long long s = a->t == V_UNDEF || a->t == V_NONE ? (step > 0 ? lo : hi) : as_i(a);
    long long e = b->t == V_UNDEF || b->t == V_NONE ? (step > 0 ? hi : lo) : as_i(b);
    if (a->t != V_UNDEF && a->t != V_NONE) {
        if (s < 0) s += n;
        s = s < lo ? lo : s > hi ? hi : s;
    }
    if (b->t != V_UNDEF && b->t != V_NONE) {
        if (e < 0) e += n;
        e = e < lo ? lo : e > hi ? hi : e;
    }
    *start = s, *stop = e;
}

static dfl_status do_slice(ctx *c, const expr *e, jv *out)
{
    jv obj, a = v_undef(), b = v_undef(), st = v_undef();
    dfl_status s = eval(c, e->a, &obj);
    if (!s && e->b) s = eval(c, e->b, &a);
    if (!s && e->c) s = eval(c, e->c, &b);
    if (!s && e->args[0]) s = eval(c, e->args[0], &st);
    if (s) return s;
    long long step = st.t == V_UNDEF || st.t == V_NONE ? 1 : as_i(&st);
    if (step == 0) return rfail(c, e->line, "slice step cannot be zero%.*s", "", 0);
    if (obj.t != V_LIST && obj.t != V_STR)
        return rfail(c, e->line, "cannot slice a %.*s", type_name(&obj), strlen(type_name(&obj)));
    size_t count = 0, *offs = NULL;
    if (obj.t == V_STR && !(offs = cp_offsets(&c->a, obj.u.s.p, obj.u.s.n, &count))) return CNOMEM(c);
    long long n = obj.t == V_LIST ? (long long)obj.u.l->n : (long long)count, i0, i1;
    slice_range(n, &a, &b, step, &i0, &i1);
    if (obj.t == V_LIST) {
        jlist *l = aalloc(&c->a, sizeof *l);
        if (!l) return CNOMEM(c);
        for (long long i = i0; step > 0 ? i < i1 : i > i1; i += step)
            if (!list_push(&c->a, l, obj.u.l->items[i])) return CNOMEM(c);
        out->t = V_LIST, out->u.l = l;
        return DFL_OK;
    }
    char *p = aalloc(&c->a, obj.u.s.n + 1);
    size_t o = 0;
    if (!p) return CNOMEM(c);
    for (long long i = i0; step > 0 ? i < i1 : i > i1; i += step) {
        memcpy(p + o, obj.u.s.p + offs[i], offs[i + 1] - offs[i]);
        o += offs[i + 1] - offs[i];
    }
    *out = v_str(p, o);
    return DFL_OK;
}

/* s.strip(chars) family: mode 1 left, 2 right, 3 both; chars NULL = white space. */
static jv strip(const jv *s, const jv *chars, int mode)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, lo = 0, hi = n;
    int ws = !chars || chars->t == V_NONE || chars->t == V_UNDEF;
    for (;;) { /* left */
        if (!(mode & 1) || lo >= hi) break;
        size_t i = lo;
        uint32_t cp = utf8_next(p, n, &i);
        int hit = ws ? py_space(cp) : 0;
        for (size_t k = 0; !ws && k < chars->u.s.n && !hit;)
            hit = utf8_next(chars->u.s.p, chars->u.s.n, &k) == cp;
        if (!hit) break;
        lo = i;
    }
    while ((mode & 2) && hi > lo) {
        size_t start = hi - 1;
        while (start > lo && ((unsigned char)p[start] & 0xC0) == 0x80)
            start--;
        size_t i = start;
        uint32_t cp = utf8_next(p, n, &i);
        int hit = ws ? py_space(cp) : 0;
        for (size_t k = 0; !ws && k < chars->u.s.n && !hit;)
            hit = utf8_next(chars->u.s.p, chars->u.s.n, &k) == cp;
        if (!hit) break;
        hi = start;
    }
    return v_str(p + lo, hi - lo);
}

static dfl_status case_map(ctx *c, const jv *s, int mode, jv *out) /* 0 upper, 1 lower, 2 capitalize, 3 title */
{
    char *p = aalloc(&c->a, s->u.s.n + 1);
    if (!p) return CNOMEM(c);
    int prev_alpha = 0;
    for (size_t i = 0; i < s->u.s.n; i++) {
        char ch = s->u.s.p[i];
        int up = mode == 0 || (mode == 2 && i == 0) || (mode == 3 && !prev_alpha);
        p[i] = (char)((unsigned char)ch < 0x80 ? (up ? toupper((unsigned char)ch) : tolower((unsigned char)ch)) : ch);
        prev_alpha = isalpha((unsigned char)ch) || ((unsigned char)ch >= 0x80);
    }
    *out = v_str(p, s->u.s.n);
    return DFL_OK;
}

static dfl_status replace(ctx *c, const jv *s, const jv *old, const jv *new_, long long count, jv *out)
{
    dfl_strbuf b = {0};
    size_t i = 0;
    long long done = 0;
    if (old->u.s.n == 0) return *out = *s, DFL_OK;
    while (i < s->u.s.n) {
        if ((count < 0 || done < count) && i + old->u.s.n <= s->u.s.n &&
            !memcmp(s->u.s.p + i, old->u.s.p, old->u.s.n)) {
            dfl_strbuf_add(&b, new_->u.s.p, new_->u.s.n);
            i += old->u.s.n, done++;
        } else {
            dfl_strbuf_add(&b, s->u.s.p + i, 1), i++;
        }
    }
    char *p = astrndup(&c->a, b.p ? b.p : "", b.len);
    size_t n = b.len;
    dfl_strbuf_free(&b);
    if (!p) return CNOMEM(c);
    *out = v_str(p, n);
    return DFL_OK;
}

static dfl_status split(ctx *c, const jv *s, const jv *sep, long long maxsplit, jv *out)
{
    jlist *l = aalloc(&c->a, sizeof *l);
    if (!l) return CNOMEM(c);
    const char *p = s->u.s.p;
    size_t n = s->u.s.n;
    if (!sep || sep->t == V_NONE || sep->t == V_UNDEF) { /* runs of white space, no empty items */
        size_t i = 0;
        long long done = 0;
        for (;;) {
            while (i < n) {
                size_t k = i;
                if (!py_space(utf8_next(p, n, &k))) break;
                i = k;
            }
            if (i >= n) break;
            size_t start = i;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t end = n;
                jv tmp = v_str(p + start, end - start), r = strip(&tmp, NULL, 2);
                if (!list_push(&c->a, l, r)) return CNOMEM(c);
                break;
            }
            while (i < n) {
                size_t k = i;
                if (py_space(utf8_next(p, n, &k))) break;
                i = k;
            }
            if (!list_push(&c->a, l, v_str(p + start, i - start))) return CNOMEM(c);
            done++;
        }
    } else {
        if (sep->t != V_STR || sep->u.s.n == 0) return rfail(c, 0, "split: empty or non-string separator%.*s", "", 0);
        size_t start = 0, i = 0;
        long long done = 0;
        while (i + sep->u.s.n <= n && (maxsplit < 0 || done < maxsplit)) {
            if (!memcmp(p + i, sep->u.s.p, sep->u.s.n)) {
                if (!list_push(&c->a, l, v_str(p + start, i - start))) return CNOMEM(c);
                i += sep->u.s.n, start = i, done++;
            } else {
                i++;
            }
        }
        if (!list_push(&c->a, l, v_str(p + start, n - start))) return CNOMEM(c);
    }
    out->t = V_LIST, out->u.l = l;
    return DFL_OK;
}

typedef struct argv_ {
    jv pos[8];
    size_t npos;
    const char *kwn[8];
    jv kwv[8];
    size_t nkw;
} argv_;

static dfl_status eval_args(ctx *c, const expr *e, argv_ *a)
{
    memset(a, 0, sizeof *a);
    if (e->nargs > 8) return rfail(c, e->line, "more than 8 arguments%.*s", "", 0);
    for (size_t i = 0; i < e->nargs; i++) {
        jv v;
        dfl_status s = eval(c, e->args[i], &v);
        if (s) return s;
        if (e->kw && e->kw[i])
            a->kwn[a->nkw] = e->kw[i], a->kwv[a->nkw++] = v;
        else
            a->pos[a->npos++] = v;
    }
    return DFL_OK;
}

static jv *kwarg(argv_ *a, const char *name)
{
    for (size_t i = 0; i < a->nkw; i++)
        if (!strcmp(a->kwn[i], name)) return &a->kwv[i];
    return NULL;
}

static jv arg_or(argv_ *a, size_t i, const char *name)
{
    jv *k = kwarg(a, name);
    if (k) return *k;
    return i < a->npos ? a->pos[i] : v_undef();
}

static dfl_status need_str(ctx *c, int line, const jv *v, const char *what)
{
    if (v->t == V_STR) return DFL_OK;
    return rfail(c, line, "%.*s expects a string", what, strlen(what));
}

static dfl_status call(ctx *c, const expr *e, jv *out)
{
    jv f;
    argv_ a;
    dfl_status s = eval(c, e->a, &f);
    if (!s) s = eval_args(c, e, &a);
    if (s) return s;
    *out = v_none();
    if (f.t != V_FUNC) return rfail(c, e->line, "a %.*s value is not callable", type_name(&f), strlen(type_name(&f)));
    const jv *self = f.u.fn.self;
    switch (f.u.fn.id) {
    case F_NAMESPACE: {
        jdict *d = aalloc(&c->a, sizeof *d);
        if (!d) return CNOMEM(c);
        d->ns = 1;
        for (size_t i = 0; i < a.npos; i++) /* namespace(dict) copies it */
            if (a.pos[i].t == V_DICT)
                for (size_t k = 0; k < a.pos[i].u.d->n; k++)
                    dict_set(&c->a, d, a.pos[i].u.d->keys[k], a.pos[i].u.d->klen[k], a.pos[i].u.d->vals[k]);
        for (size_t i = 0; i < a.nkw; i++)
            if (!dict_set(&c->a, d, a.kwn[i], strlen(a.kwn[i]), a.kwv[i])) return CNOMEM(c);
        out->t = V_DICT, out->u.d = d;
        return DFL_OK;
    }
    case F_RANGE: {
        long long lo = 0, hi, step = 1;
        if (a.npos == 1)
            hi = as_i(&a.pos[0]);
        else if (a.npos >= 2)
            lo = as_i(&a.pos[0]), hi = as_i(&a.pos[1]), step = a.npos > 2 ? as_i(&a.pos[2]) : 1;
        else
            return rfail(c, e->line, "range() needs an argument%.*s", "", 0);
        if (step == 0 || (hi - lo) / step > 100000)
            return rfail(c, e->line, "range(): bad step or too long%.*s", "", 0);
        jlist *l = aalloc(&c->a, sizeof *l);
        if (!l) return CNOMEM(c);
        for (long long i = lo; step > 0 ? i < hi : i > hi; i += step)
            if (!list_push(&c->a, l, v_int(i))) return CNOMEM(c);
        out->t = V_LIST, out->u.l = l;
        return DFL_OK;
    }
    case F_RAISE: {
        jv m = a.npos ? a.pos[0] : v_str("", 0), ms;
        if ((s = to_str(c, &m, &ms))) return s;
        return dfl__fail(c->err, DFL_ERR_FORMAT, "chat template raised an exception: %.*s", (int)ms.u.s.n, ms.u.s.p);
    }
    case F_STRFTIME: {
        jv fmt = a.npos ? a.pos[0] : v_undef();
        if ((s = need_str(c, e->line, &fmt, "strftime_now"))) return s;
        char *z = astrndup(&c->a, fmt.u.s.p, fmt.u.s.n), *buf = aalloc(&c->a, 512);
        if (!z || !buf) return CNOMEM(c);
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        size_t n = strftime(buf, 512, z, &tm);
        *out = v_str(buf, n);
        return DFL_OK;
    }
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        jv ch = arg_or(&a, 0, "chars");
        if (ch.t != V_UNDEF && ch.t != V_NONE && (s = need_str(c, e->line, &ch, "strip"))) return s;
        *out = strip(self, &ch, f.u.fn.id == M_STRIP ? 3 : f.u.fn.id == M_LSTRIP ? 1 : 2);
        return DFL_OK;
    }
    case M_SPLIT: {
        jv sep = arg_or(&a, 0, "sep"), mx = arg_or(&a, 1, "maxsplit");
        return split(c, self, &sep, mx.t == V_UNDEF ? -1 : as_i(&mx), out);
    }
    case M_STARTSWITH:
    case M_ENDSWITH: {
        jv pre = arg_or(&a, 0, "prefix");
        size_t np = pre.t == V_LIST ? pre.u.l->n : 1;
        *out = v_bool(0);
        for (size_t i = 0; i < np; i++) {
            const jv *p = pre.t == V_LIST ? &pre.u.l->items[i] : &pre;
            if ((s = need_str(c, e->line, p, f.u.fn.id == M_STARTSWITH ? "startswith" : "endswith"))) return s;
            size_t n = p->u.s.n;
            if (n <= self->u.s.n &&
                !memcmp(f.u.fn.id == M_STARTSWITH ? self->u.s.p : self->u.s.p + self->u.s.n - n, p->u.s.p, n))
                *out = v_bool(1);
        }
        return DFL_OK;
    }
    case M_UPPER: return case_map(c, self, 0, out);
    case M_LOWER: return case_map(c, self, 1, out);
    case M_CAPITALIZE: return case_map(c, self, 2, out);
    case M_TITLE: return case_map(c, self, 3, out);
    case M_REPLACE: {
        jv o = arg_or(&a, 0, "old"), n = arg_or(&a, 1, "new"), k = arg_or(&a, 2, "count");
        if ((s = need_str(c, e->line, &o, "replace")) || (s = need_str(c, e->line, &n, "replace"))) return s;
        return replace(c, self, &o, &n, k.t == V_UNDEF ? -1 : as_i(&k), out);
    }
    case M_GET: {
        jv k = arg_or(&a, 0, "key"), d = a.npos > 1 ? a.pos[1] : v_none();
        jv *v = k.t == V_STR ? dict_find(self->u.d, k.u.s.p, k.u.s.n) : NULL;
        *out = v ? *v : d;
        return DFL_OK;
    }
    case M_ITEMS:
    case M_KEYS:
    case M_VALUES: {
        jlist *l = aalloc(&c->a, sizeof *l);
        if (!l) return CNOMEM(c);
        for (size_t i = 0; i < self->u.d->n; i++) {
            jv k = v_str(self->u.d->keys[i], self->u.d->klen[i]), item = k;
            if (f.u.fn.id == M_VALUES) item = self->u.d->vals[i];
            if (f.u.fn.id == M_ITEMS) {
                jlist *pair = aalloc(&c->a, sizeof *pair);
                if (!pair || !list_push(&c->a, pair, k) || !list_push(&c->a, pair, self->u.d->vals[i]))
                    return CNOMEM(c);
                pair->tuple = 1;
                item.t = V_LIST, item.u.l = pair;
            }
            if (!list_push(&c->a, l, item)) return CNOMEM(c);
        }
        out->t = V_LIST, out->u.l = l;
        return DFL_OK;
    }
    }
    return rfail(c, e->line, "unknown function%.*s", "", 0);
}

static long long length(const jv *v)
{
    if (v->t == V_STR) return (long long)cp_count(v->u.s.p, v->u.s.n);
    if (v->t == V_LIST) return (long long)v->u.l->n;
    if (v->t == V_DICT) return (long long)v->u.d->n;
    return v->t == V_UNDEF ? 0 : -1;
}

static dfl_status as_list(ctx *c, int line, const jv *v, jlist **out)
{
    jlist *l = aalloc(&c->a, sizeof *l);
    if (!l) return CNOMEM(c);
    if (v->t == V_LIST) {
        *out = v->u.l;
        return DFL_OK;
    }
    if (v->t == V_STR) {
        for (size_t i = 0; i < v->u.s.n;) {
            size_t start = i;
            utf8_next(v->u.s.p, v->u.s.n, &i);
            if (!list_push(&c->a, l, v_str(v->u.s.p + start, i - start))) return CNOMEM(c);
        }
    } else if (v->t == V_DICT && !v->u.d->ns) {
        for (size_t i = 0; i < v->u.d->n; i++)
            if (!list_push(&c->a, l, v_str(v->u.d->keys[i], v->u.d->klen[i]))) return CNOMEM(c);
    } else if (v->t != V_UNDEF) {
        return rfail(c, line, "a %.*s value is not iterable", type_name(v), strlen(type_name(v)));
    }
    *out = l;
    return DFL_OK;
}

static dfl_status filter(ctx *c, const expr *e, jv *out)
{
    jv v;
    argv_ a;
    dfl_status s = eval(c, e->a, &v);
    if (!s) s = eval_args(c, e, &a);
    if (s) return s;
    const char *f = e->op;
    if (!strcmp(f, "trim")) {
        jv sv, ch = arg_or(&a, 0, "chars");
        if ((s = to_str(c, &v, &sv))) return s;
        *out = strip(&sv, &ch, 3);
    } else if (!strcmp(f, "length") || !strcmp(f, "count")) {
        long long n = length(&v);
        if (n < 0) return rfail(c, e->line, "a %.*s value has no length", type_name(&v), strlen(type_name(&v)));
        *out = v_int(n);
    } else if (!strcmp(f, "tojson")) {
        jv ind = arg_or(&a, 0, "indent");
        dfl_strbuf b = {0};
        int ok = put_json(&b, &v, ind.t == V_INT ? (int)ind.u.i : -1, 0);
        char *p = ok && !b.oom ? astrndup(&c->a, b.p ? b.p : "", b.len) : NULL;
        size_t n = b.len;
        dfl_strbuf_free(&b);
        if (!ok) return rfail(c, e->line, "tojson: a %.*s value is not JSON", type_name(&v), strlen(type_name(&v)));
        if (!p) return CNOMEM(c);
        *out = v_str(p, n);
    } else if (!strcmp(f, "upper") || !strcmp(f, "lower") || !strcmp(f, "capitalize") || !strcmp(f, "title")) {
        jv sv;
        if ((s = to_str(c, &v, &sv))) return s;
        return case_map(c, &sv, f[0] == 'u' ? 0 : f[0] == 'l' ? 1 : f[0] == 'c' ? 2 : 3, out);
    } else if (!strcmp(f, "first") || !strcmp(f, "last")) {
        jlist *l;
        if ((s = as_list(c, e->line, &v, &l))) return s;
        *out = l->n ? l->items[f[0] == 'f' ? 0 : l->n - 1] : v_undef();
    } else if (!strcmp(f, "join")) {
        jv sep = arg_or(&a, 0, "d");
        jlist *l;
        if ((s = as_list(c, e->line, &v, &l))) return s;
        dfl_strbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (i && sep.t == V_STR) dfl_strbuf_add(&b, sep.u.s.p, sep.u.s.n);
            put_str(&b, &l->items[i]);
        }
        char *p = astrndup(&c->a, b.p ? b.p : "", b.len);
        size_t n = b.len;
        dfl_strbuf_free(&b);
        if (!p) return CNOMEM(c);
        *out = v_str(p, n);
    } else if (!strcmp(f, "default") || !strcmp(f, "d")) {
        jv dv = arg_or(&a, 0, "default_value"), bo = arg_or(&a, 1, "boolean");
        int use = v.t == V_UNDEF || (truthy(&bo) && !truthy(&v));
        *out = use ? (dv.t == V_UNDEF ? v_str("", 0) : dv) : v;
    } else if (!strcmp(f, "string")) {
        return to_str(c, &v, out);
    } else if (!strcmp(f, "int") || !strcmp(f, "float")) {
        double d = 0;
        if (num(&v))
            d = as_f(&v);
        else if (v.t == V_STR) {
            char *z = astrndup(&c->a, v.u.s.p, v.u.s.n), *end;
            if (!z) return CNOMEM(c);
            d = strtod(z, &end);
            if (end == z) d = 0;
        }
        *out = f[0] == 'i' ? (num(&v) && v.t != V_FLOAT ? v_int(as_i(&v)) : v_int((long long)d)) : v_float(d);
    } else if (!strcmp(f, "list")) {
        jlist *l;
        if ((s = as_list(c, e->line, &v, &l))) return s;
        out->t = V_LIST, out->u.l = l;
    } else if (!strcmp(f, "reverse")) {
        if (v.t == V_STR) {
            size_t count, *offs = cp_offsets(&c->a, v.u.s.p, v.u.s.n, &count);
            char *p = aalloc(&c->a, v.u.s.n + 1);
            size_t o = 0;
            if (!offs || !p) return CNOMEM(c);
            for (size_t k = count; k-- > 0;)
                memcpy(p + o, v.u.s.p + offs[k], offs[k + 1] - offs[k]), o += offs[k + 1] - offs[k];
            *out = v_str(p, o);
            return DFL_OK;
        }
        jlist *l, *r = aalloc(&c->a, sizeof *r);
        if (!r) return CNOMEM(c);
        if ((s = as_list(c, e->line, &v, &l))) return s;
        for (size_t k = l->n; k-- > 0;)
            if (!list_push(&c->a, r, l->items[k])) return CNOMEM(c);
        out->t = V_LIST, out->u.l = r;
    } else if (!strcmp(f, "replace")) {
        jv sv, o = arg_or(&a, 0, "old"), n = arg_or(&a, 1, "new"), k = arg_or(&a, 2, "count");
        if ((s = to_str(c, &v, &sv)) || (s = need_str(c, e->line, &o, "replace")) ||
            (s = need_str(c, e->line, &n, "replace")))
            return s;
        return replace(c, &sv, &o, &n, k.t == V_UNDEF || k.t == V_NONE ? -1 : as_i(&k), out);
    } else if (!strcmp(f, "items")) {
        if (v.t != V_DICT)
            return rfail(c, e->line, "items: a %.*s value is not a dict", type_name(&v), strlen(type_name(&v)));
        const jv *self = &v;
        jlist *l = aalloc(&c->a, sizeof *l);
        if (!l) return CNOMEM(c);
        for (size_t i = 0; i < self->u.d->n; i++) {
            jlist *pair = aalloc(&c->a, sizeof *pair);
            jv item = {V_LIST, {0}};
            if (!pair || !list_push(&c->a, pair, v_str(self->u.d->keys[i], self->u.d->klen[i])) ||
                !list_push(&c->a, pair, self->u.d->vals[i]))
                return CNOMEM(c);
            item.u.l = pair, pair->tuple = 1;
            if (!list_push(&c->a, l, item)) return CNOMEM(c);
        }
        out->t = V_LIST, out->u.l = l;
    } else if (!strcmp(f, "abs")) {
        if (!num(&v))
            return rfail(c, e->line, "abs: a %.*s value is not a number", type_name(&v), strlen(type_name(&v)));
        *out = v.t == V_FLOAT ? v_float(fabs(v.u.f)) : v_int(llabs(as_i(&v)));
    }
    return DFL_OK;
}

static dfl_status test(ctx *c, const expr *e, jv *out)
{
    jv v;
    argv_ a;
    dfl_status s = eval(c, e->a, &v);
    if (!s) s = eval_args(c, e, &a);
    if (s) return s;
    const char *t = e->op;
    int r = 0;
    if (!strcmp(t, "defined"))
        r = v.t != V_UNDEF;
    else if (!strcmp(t, "undefined"))
        r = v.t == V_UNDEF;
    else if (!strcmp(t, "none"))
        r = v.t == V_NONE;
    else if (!strcmp(t, "string"))
        r = v.t == V_STR;
    else if (!strcmp(t, "number"))
        r = num(&v);
    else if (!strcmp(t, "integer"))
        r = v.t == V_INT;
    else if (!strcmp(t, "float"))
        r = v.t == V_FLOAT;
    else if (!strcmp(t, "boolean"))
        r = v.t == V_BOOL;
    else if (!strcmp(t, "true"))
        r = v.t == V_BOOL && v.u.b;
    else if (!strcmp(t, "false"))
        r = v.t == V_BOOL && !v.u.b;
    else if (!strcmp(t, "mapping"))
        r = v.t == V_DICT && !v.u.d->ns;
    else if (!strcmp(t, "iterable") || !strcmp(t, "sequence"))
        r = v.t == V_STR || v.t == V_LIST || (v.t == V_DICT && !v.u.d->ns);
    else if (!strcmp(t, "even") || !strcmp(t, "odd")) {
        if (!num(&v)) return rfail(c, e->line, "'%.*s' test on a value that is not a number", t, strlen(t));
        long long i = as_i(&v);
        r = (i % 2 == 0) == (t[0] == 'e');
    } else { /* eq, equalto, ==, ne, != */
        jv o = a.npos ? a.pos[0] : v_undef();
        r = equal(&v, &o) == (t[0] == 'e' || t[0] == '=');
    }
    *out = v_bool(e->neg ? !r : r);
    return DFL_OK;
}

static dfl_status binop(ctx *c, const expr *e, jv *out)
{
    jv x, y;
    dfl_status s = eval(c, e->a, &x);
    if (!s) s = eval(c, e->b, &y);
    if (s) return s;
    const char *op = e->op;
    if (!strcmp(op, "==") || !strcmp(op, "!=")) {
        *out = v_bool(equal(&x, &y) == (op[0] == '='));
        return DFL_OK;
    }
    if (!strcmp(op, "in") || !strcmp(op, "not in")) {
        int r = 0;
        if (y.t == V_STR) {
            if (x.t != V_STR)
                return rfail(c, e->line, "'in <string>' needs a string on the left, not %.*s", type_name(&x),
                             strlen(type_name(&x)));
            for (size_t i = 0; !r && i + x.u.s.n <= y.u.s.n; i++)
                r = !memcmp(y.u.s.p + i, x.u.s.p, x.u.s.n);
        } else if (y.t == V_LIST) {
            for (size_t i = 0; !r && i < y.u.l->n; i++)
                r = equal(&x, &y.u.l->items[i]);
        } else if (y.t == V_DICT) {
            r = x.t == V_STR && dict_find(y.u.d, x.u.s.p, x.u.s.n) != NULL;
        } else {
            return rfail(c, e->line, "'in' on a %.*s value", type_name(&y), strlen(type_name(&y)));
        }
        *out = v_bool(op[0] == 'i' ? r : !r);
        return DFL_OK;
    }
    if (!strcmp(op, "~")) {
        jv a, b;
        if ((s = to_str(c, &x, &a)) || (s = to_str(c, &y, &b))) return s;
        char *p = aalloc(&c->a, a.u.s.n + b.u.s.n + 1);
        if (!p) return CNOMEM(c);
        memcpy(p, a.u.s.p, a.u.s.n), memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
        *out = v_str(p, a.u.s.n + b.u.s.n);
        return DFL_OK;
    }
    if (x.t == V_UNDEF || y.t == V_UNDEF) return rfail(c, e->line, "'%.*s' on an undefined value", op, strlen(op));
    if (op[0] == '<' || op[0] == '>') {
        int cmp;
        if (num(&x) && num(&y))
            cmp = as_f(&x) < as_f(&y) ? -1 : as_f(&x) > as_f(&y);
        else if (x.t == V_STR && y.t == V_STR) {
            size_t n = x.u.s.n < y.u.s.n ? x.u.s.n : y.u.s.n;
            cmp = memcmp(x.u.s.p, y.u.s.p, n);
            if (!cmp) cmp = x.u.s.n < y.u.s.n ? -1 : x.u.s.n > y.u.s.n;
        } else {
            return rfail(c, e->line, "cannot order these values with '%.*s'", op, strlen(op));
        }
        int r = !strcmp(op, "<") ? cmp < 0 : !strcmp(op, ">") ? cmp > 0 : !strcmp(op, "<=") ? cmp <= 0 : cmp >= 0;
        *out = v_bool(r);
        return DFL_OK;
    }
    if (!strcmp(op, "+") && x.t == V_STR && y.t == V_STR) {
        char *p = aalloc(&c->a, x.u.s.n + y.u.s.n + 1);
        if (!p) return CNOMEM(c);
        memcpy(p, x.u.s.p, x.u.s.n), memcpy(p + x.u.s.n, y.u.s.p, y.u.s.n);
        *out = v_str(p, x.u.s.n + y.u.s.n);
        return DFL_OK;
    }
    if (!strcmp(op, "+") && x.t == V_LIST && y.t == V_LIST) {
        jlist *l = aalloc(&c->a, sizeof *l);
        if (!l) return CNOMEM(c);
        for (size_t i = 0; i < x.u.l->n; i++)
            if (!list_push(&c->a, l, x.u.l->items[i])) return CNOMEM(c);
        for (size_t i = 0; i < y.u.l->n; i++)
            if (!list_push(&c->a, l, y.u.l->items[i])) return CNOMEM(c);
        out->t = V_LIST, out->u.l = l;
        return DFL_OK;
    }
    if (!strcmp(op, "*") &&
        ((x.t == V_STR && (y.t == V_INT || y.t == V_BOOL)) || (y.t == V_STR && (x.t == V_INT || x.t == V_BOOL)))) {
        const jv *str = x.t == V_STR ? &x : &y;
        long long k = as_i(x.t == V_STR ? &y : &x);
        if (k < 0) k = 0;
        if (k > 0 && str->u.s.n > (size_t)(1 << 24) / (size_t)k)
            return rfail(c, e->line, "string repetition too long%.*s", "", 0);
        char *p = aalloc(&c->a, str->u.s.n * (size_t)k + 1);
        if (!p) return CNOMEM(c);
        for (long long i = 0; i < k; i++)
            memcpy(p + (size_t)i * str->u.s.n, str->u.s.p, str->u.s.n);
        *out = v_str(p, str->u.s.n * (size_t)k);
        return DFL_OK;
    }
    if (!num(&x) || !num(&y)) return rfail(c, e->line, "unsupported operand types for '%.*s'", op, strlen(op));
    int fl = x.t == V_FLOAT || y.t == V_FLOAT || !strcmp(op, "/");
    if ((!strcmp(op, "/") || !strcmp(op, "//") || !strcmp(op, "%")) && as_f(&y) == 0)
        return rfail(c, e->line, "division by zero ('%.*s')", op, strlen(op));
    if (fl) {
        double a = as_f(&x), b = as_f(&y), r;
        if (!strcmp(op, "+"))
            r = a + b;
        else if (!strcmp(op, "-"))
            r = a - b;
        else if (!strcmp(op, "*"))
            r = a * b;
        else if (!strcmp(op, "/"))
            r = a / b;
        else if (!strcmp(op, "//"))
            r = floor(a / b);
        else
            r = a - floor(a / b) * b;
        *out = v_float(r);
    } else {
        long long a = as_i(&x), b = as_i(&y), r;
        if (!strcmp(op, "+"))
            r = a + b;
        else if (!strcmp(op, "-"))
            r = a - b;
        else if (!strcmp(op, "*"))
            r = a * b;
        else { /* Python floors */
            long long q = a / b, m = a % b;
            if (m != 0 && ((m < 0) != (b < 0))) q--, m += b;
            r = !strcmp(op, "//") ? q : m;
        }
        *out = v_int(r);
    }
    return DFL_OK;
}

static dfl_status eval(ctx *c, const expr *e, jv *out)
{
    dfl_status s;
    jv x;
    switch (e->k) {
    case E_CONST: *out = e->val; return DFL_OK;
    case E_NAME: *out = lookup(c, e->op, e->op_n); return DFL_OK;
    case E_ATTR:
        if ((s = eval(c, e->a, &x))) return s;
        return get_attr(c, e->line, &x, e->op, e->op_n, out);
    case E_ITEM: {
        jv k;
        if ((s = eval(c, e->a, &x)) || (s = eval(c, e->b, &k))) return s;
        return get_item(c, e->line, &x, &k, out);
    }
    case E_SLICE: return do_slice(c, e, out);
    case E_CALL: return call(c, e, out);
    case E_FILTER: return filter(c, e, out);
    case E_TEST: return test(c, e, out);
    case E_BIN: return binop(c, e, out);
    case E_NEG:
        if ((s = eval(c, e->a, &x))) return s;
        if (!num(&x)) return rfail(c, e->line, "unary '-' on a %.*s value", type_name(&x), strlen(type_name(&x)));
        *out = x.t == V_FLOAT ? v_float(-x.u.f) : v_int(-as_i(&x));
        return DFL_OK;
    case E_NOT:
        if ((s = eval(c, e->a, &x))) return s;
        *out = v_bool(!truthy(&x));
        return DFL_OK;
    case E_AND:
    case E_OR:
        if ((s = eval(c, e->a, &x))) return s;
        if (truthy(&x) == (e->k == E_OR)) return *out = x, DFL_OK;
        return eval(c, e->b, out);
    case E_COND:
        if ((s = eval(c, e->b, &x))) return s;
        if (truthy(&x)) return eval(c, e->a, out);
        if (!e->c) return *out = v_undef(), DFL_OK;
        return eval(c, e->c, out);
    case E_LIST: {
        jlist *l = aalloc(&c->a, sizeof *l);
        if (!l) return CNOMEM(c);
        l->tuple = e->neg;
        for (size_t i = 0; i < e->nargs; i++) {
            if ((s = eval(c, e->args[i], &x))) return s;
            if (!list_push(&c->a, l, x)) return CNOMEM(c);
        }
        out->t = V_LIST, out->u.l = l;
        return DFL_OK;
    }
    case E_DICT: {
        jdict *d = aalloc(&c->a, sizeof *d);
        if (!d) return CNOMEM(c);
        for (size_t i = 0; i + 1 < e->nargs; i += 2) {
            jv k, v;
            if ((s = eval(c, e->args[i], &k)) || (s = eval(c, e->args[i + 1], &v))) return s;
            if (k.t != V_STR) return rfail(c, e->line, "dict keys must be strings here%.*s", "", 0);
            if (!dict_set(&c->a, d, k.u.s.p, k.u.s.n, v)) return CNOMEM(c);
        }
        out->t = V_DICT, out->u.d = d;
        return DFL_OK;
    }
    }
    return rfail(c, e->line, "unknown expression%.*s", "", 0);
}

static dfl_status push_scope(ctx *c, int line)
{
    if (c->depth == 64) return rfail(c, line, "loops nested too deeply%.*s", "", 0);
    jdict *d = aalloc(&c->a, sizeof *d);
    if (!d) return CNOMEM(c);
    c->scopes[c->depth++] = d;
    return DFL_OK;
}

static dfl_status run_body(ctx *c, const body *b);

static dfl_status run_for(ctx *c, const node *n)
{
    jv it;
    jlist *l;
    dfl_status s = eval(c, n->e, &it);
    if (!s) s = as_list(c, n->line, &it, &l);
    if (s) return s;
    if (it.t == V_UNDEF) l->n = 0;
    if (l->n == 0) return run_body(c, &n->other);
    if ((s = push_scope(c, n->line))) return s;
    jdict *scope = c->scopes[c->depth - 1];
    jdict *loop = aalloc(&c->a, sizeof *loop); /* one per loop, its values set per iteration */
    if (!loop) return CNOMEM(c);
    for (size_t i = 0; i < l->n && !s; i++) {
        long long len = (long long)l->n, k = (long long)i;
        int ok = dict_set(&c->a, loop, "index0", 6, v_int(k)) && dict_set(&c->a, loop, "index", 5, v_int(k + 1)) &&
                 dict_set(&c->a, loop, "revindex", 8, v_int(len - k)) &&
                 dict_set(&c->a, loop, "revindex0", 9, v_int(len - k - 1)) &&
                 dict_set(&c->a, loop, "first", 5, v_bool(i == 0)) &&
                 dict_set(&c->a, loop, "last", 4, v_bool(i + 1 == l->n)) &&
                 dict_set(&c->a, loop, "length", 6, v_int(len)) &&
                 dict_set(&c->a, loop, "previtem", 8, i ? l->items[i - 1] : v_undef()) &&
                 dict_set(&c->a, loop, "nextitem", 8, i + 1 < l->n ? l->items[i + 1] : v_undef());
        jv lv = {V_DICT, {0}};
        lv.u.d = loop;
        if (!ok || !dict_set(&c->a, scope, "loop", 4, lv) ||
            !dict_set(&c->a, scope, n->name, strlen(n->name), l->items[i]))
            return CNOMEM(c);
        s = run_body(c, &n->main);
        c->cont = 0;
        if (c->brk) {
            c->brk = 0;
            break;
        }
    }
    c->depth--;
    return s;
}

static dfl_status run_body(ctx *c, const body *b)
{
    dfl_status s = DFL_OK;
    for (size_t i = 0; i < b->n && !s && !c->brk && !c->cont; i++) {
        const node *n = b->items[i];
        jv v;
        if (++c->steps > STEPS_MAX || c->out->len > (size_t)ARENA_MAX)
            return rfail(c, n->line, "the template runs too long (over %.*s statements or 1 GiB of text)", "20 million",
                         10);
        switch (n->k) {
        case N_TEXT: dfl_strbuf_add(c->out, n->text, n->text_n); break;
        case N_OUT:
            if (!(s = eval(c, n->e, &v))) put_str(c->out, &v);
            break;
        case N_IF: {
            size_t k = 0;
            for (; k < n->nconds; k++) {
                if ((s = eval(c, n->conds[k], &v))) return s;
                if (truthy(&v)) break;
            }
            s = run_body(c, &n->bodies[k]);
            break;
        }
        case N_FOR: s = run_for(c, n); break;
        case N_SET:
            if ((s = eval(c, n->e, &v))) return s;
            if (n->attr) {
                jv ns = lookup(c, n->name, strlen(n->name));
                if (ns.t != V_DICT || !ns.u.d->ns)
                    return rfail(c, n->line, "set %.*s.attr: not a namespace()", n->name, strlen(n->name));
                if (!dict_set(&c->a, ns.u.d, n->attr, strlen(n->attr), v)) return CNOMEM(c);
            } else if (!dict_set(&c->a, c->scopes[c->depth - 1], n->name, strlen(n->name), v)) {
                return CNOMEM(c);
            }
            break;
        case N_BREAK: c->brk = 1; break;
        case N_CONTINUE: c->cont = 1; break;
        case N_BODY: s = run_body(c, &n->main); break;
        }
    }
    if (!s && c->a.oom) s = CNOMEM(c);
    return s;
}

dfl_status dfl_jinja_render(const dfl_jinja *t, const char *vars_json, dfl_strbuf *out, dfl_error *err)
{
    const char *why = NULL;
    size_t at = 0;
    cJSON *vars = dfl__json_parse(vars_json, strlen(vars_json), &why, &at);
    if (!vars || !cJSON_IsObject(vars)) {
        cJSON_Delete(vars);
        return dfl__fail(err, DFL_ERR_USAGE, "chat template variables: not a JSON object (%s at byte %zu)",
                         why ? why : "not an object", at);
    }
    ctx c;
    memset(&c, 0, sizeof c);
    c.out = out, c.err = err;
    dfl_status s = push_scope(&c, 0);
    for (const cJSON *v = vars->child; v && !s; v = v->next)
        if (!dict_set(&c.a, c.scopes[0], v->string, strlen(v->string), from_json(&c, v))) s = CNOMEM(&c);
    if (!s) s = run_body(&c, &t->root);
    if (!s && out->oom) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    arena_free(&c.a);
    cJSON_Delete(vars);
    return s;
}
