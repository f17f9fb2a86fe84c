/* prompts.c — the prompt JSON Lines reader and writer (see prompts.h). */
#include "text/prompts.h"

#include <cJSON.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/cli.h"
#include "base/jsondoc.h"

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */
/* ------------------------------------------------------------------------ */

static const char *const span_names[DFL_SPAN_KINDS] = {"answer", "query", "distractor", "target"};

const char *dfl_span_kind_name(dfl_span_kind k)
{
    return (unsigned)k < DFL_SPAN_KINDS ? span_names[k] : "unknown";
}

/* Where a message points: "label:line" for a file line, "label" when line is 0
 * (a prompt that did not come from a file). */
typedef struct where {
    const char *label;
    size_t line;
} where;

/* "label:line: " prefix + message; returns s. One place so every message looks alike. */
__attribute__((format(printf, 4, 5))) static dfl_status fail_at(dfl_error *err, dfl_status s, const where *w,
                                                                const char *fmt, ...)
{
    if (!err) return s;
    char body[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    if (w->line > 0) return dfl__fail(err, s, "%s:%zu: %s", w->label, w->line, body);
    return dfl__fail(err, s, "%s: %s", w->label, body);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1); /* n < SIZE_MAX: s exists in memory with its NUL */
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* A JSON number that is an exact integer. Values come in as doubles, so 1.0 and
 * 1e2 count as integers but 1.5 and NaN do not. */
static int is_integral(const cJSON *v)
{
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    return isfinite(d) && floor(d) == d;
}

static void fmt_exact(char *buf, size_t n, double d);

/* Text for a number in a message: integers without a fraction, others with the
 * fewest digits that identify them. */
static void fmt_num(char *buf, size_t n, double d)
{
    if (!isfinite(d))
        snprintf(buf, n, "%s", isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity"); /* as JSON writes them */
    else if (isfinite(d) && floor(d) == d && fabs(d) < 1e15)
        snprintf(buf, n, "%.0f", d);
    else
        fmt_exact(buf, n, d);
}

/* The shortest of 15, 16 or 17 significant digits that reads back as exactly d
 * (17 always does), with '.' as the decimal point whatever the locale. Used for the
 * writer's depth and numeric ids: cJSON's own printer accepts 15 digits when they are
 * within an epsilon of d, which loses the last bit, and turns DBL_MAX into inf. */
static void fmt_exact(char *buf, size_t n, double d)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break; /* strtod reads the locale's point, like snprintf wrote */
    }
    const char *dp = localeconv()->decimal_point;
    if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
        char *c = strchr(buf, dp[0]);
        if (c) *c = '.';
    }
}

/* Optional keys: absent and JSON null both mean "use the default", so that tools
 * which write null for missing values (pandas, Python's None) are accepted. */
static const cJSON *get_opt(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

/* cJSON decodes the escape \u0000 into a NUL byte inside the C string, silently
 * cutting the string short (and breaking the write/read round trip). Find it in the
 * raw text first; returns the 0-based offset of the backslash or -1. The scan tracks
 * string state so that an escaped backslash followed by "u0000" is not a match. */
static long find_nul_escape(const char *s, size_t n)
{
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!in_str) {
            if (c == '"') in_str = 1;
            continue;
        }
        if (c == '"') {
            in_str = 0;
        } else if (c == '\\') {
            if (i + 1 < n && s[i + 1] == 'u' && i + 5 < n && memcmp(s + i + 2, "0000", 4) == 0) return (long)i;
            i++; /* skip the escaped character, whatever it is */
        }
    }
    return -1;
}

/* 1 when every string under node that holds U+0000 is the top-level "input". */
static int nul_only_in_input(const cJSON *node, int top)
{
    for (const cJSON *c = node->child; c; c = c->next) {
        if (cJSON_IsString(c) && dfl__json_string_len(c) != strlen(c->valuestring) &&
            !(top && c->string && !strcmp(c->string, "input")))
            return 0;
        if (c->child && !nul_only_in_input(c, 0)) return 0;
    }
    return 1;
}

/* Code points in s[n] (valid UTF-8). */
static size_t count_cp(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* ------------------------------------------------------------------------ */
/* Validation shared by the reader and the writer                           */
/* ------------------------------------------------------------------------ */

/* Checks an in-memory prompt obeys the format's rules, so that whatever the writer
 * emits the reader accepts and gives back equal. */
static dfl_status validate(const dfl_prompt *p, const where *w, dfl_error *err)
{
    if (!p->tokens || p->n_tokens == 0) return fail_at(err, DFL_ERR_RANGE, w, "empty prompt");
    if (p->n_tokens > INT32_MAX)
        return fail_at(err, DFL_ERR_RANGE, w, "%zu tokens (at most %d)", p->n_tokens, INT32_MAX);
    for (size_t i = 0; i < p->n_tokens; i++)
        if (p->tokens[i] < 0)
            return fail_at(err, DFL_ERR_RANGE, w, "tokens[%zu] = %d is negative", i, (int)p->tokens[i]);
    if (p->text)
        for (size_t i = 0; i < p->n_tokens; i++)
            if (!p->text[i]) return fail_at(err, DFL_ERR_USAGE, w, "text[%zu] is NULL", i);
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        if (p->n_spans[k] && !p->spans[k])
            return fail_at(err, DFL_ERR_USAGE, w, "%s: %zu spans but no array", span_names[k], p->n_spans[k]);
        for (size_t j = 0; j < p->n_spans[k]; j++) {
            int32_t a = p->spans[k][j].start, b = p->spans[k][j].end;
            /* Same order of checks and words as the reader's parse_spans. */
            if (a >= b)
                return fail_at(err, DFL_ERR_RANGE, w, "span %s[%zu] = [%d, %d] is %s", span_names[k], j, (int)a, (int)b,
                               a == b ? "empty" : "reversed");
            if (a < 0 || (size_t)b > p->n_tokens)
                return fail_at(err, DFL_ERR_RANGE, w, "span %s[%zu] = [%d, %d] is out of range for %zu tokens",
                               span_names[k], j, (int)a, (int)b, p->n_tokens);
        }
    }
    if (p->has_depth && !isfinite(p->depth)) return fail_at(err, DFL_ERR_RANGE, w, "depth is not finite");
    return DFL_OK;
}

/* ------------------------------------------------------------------------ */
/* One line                                                                 */
/* ------------------------------------------------------------------------ */

static dfl_status parse_tokens(const cJSON *root, const where *w, dfl_prompt *p, dfl_error *err)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!arr) return fail_at(err, DFL_ERR_FORMAT, w, "missing \"tokens\"");
    if (!cJSON_IsArray(arr)) return fail_at(err, DFL_ERR_FORMAT, w, "\"tokens\" is not an array");
    /* Count through the list: cJSON_GetArraySize returns an int. */
    size_t n = 0;
    for (const cJSON *v = arr->child; v; v = v->next)
        n++;
    if (n == 0) return fail_at(err, DFL_ERR_RANGE, w, "empty prompt (\"tokens\" is [])");
    if (n > INT32_MAX) return fail_at(err, DFL_ERR_RANGE, w, "%zu tokens (at most %d)", n, INT32_MAX);
    p->tokens = dfl__alloc_array(n, sizeof *p->tokens); /* [n] */
    if (!p->tokens) return fail_at(err, DFL_ERR_NOMEM, w, "out of memory for %zu tokens", n);
    p->n_tokens = n;
    size_t i = 0;
    for (const cJSON *v = arr->child; v; v = v->next, i++) {
        char num[48];
        if (!cJSON_IsNumber(v)) return fail_at(err, DFL_ERR_FORMAT, w, "tokens[%zu] is not a number", i);
        fmt_num(num, sizeof num, v->valuedouble);
        if (!is_integral(v)) return fail_at(err, DFL_ERR_FORMAT, w, "tokens[%zu] = %s is not an integer", i, num);
        /* Compare as doubles before converting: out-of-range conversion is undefined. */
        if (v->valuedouble < 0) return fail_at(err, DFL_ERR_RANGE, w, "tokens[%zu] = %s is negative", i, num);
        if (v->valuedouble >= 2147483648.0)
            return fail_at(err, DFL_ERR_RANGE, w, "tokens[%zu] = %s is too large (at most %d)", i, num, INT32_MAX);
        p->tokens[i] = (int32_t)v->valuedouble;
    }
    return DFL_OK;
}

static dfl_status parse_id(const cJSON *root, const where *w, dfl_prompt *p, dfl_error *err)
{
    const cJSON *v = get_opt(root, "id");
    if (!v) return DFL_OK;
    if (cJSON_IsString(v)) {
        p->id = dup_str(v->valuestring);
    } else if (cJSON_IsNumber(v)) {
        /* Numbers become their decimal text: integers plainly, others with the
         * fewest digits that still read back as the same double. */
        char buf[48];
        fmt_num(buf, sizeof buf, v->valuedouble);
        p->id = dup_str(buf);
    } else {
        return fail_at(err, DFL_ERR_FORMAT, w, "\"id\" is neither a string nor a number");
    }
    if (!p->id) return fail_at(err, DFL_ERR_NOMEM, w, "out of memory for the id");
    return DFL_OK;
}

static dfl_status parse_text(const cJSON *root, const where *w, dfl_prompt *p, dfl_error *err)
{
    const cJSON *arr = get_opt(root, "text");
    if (!arr) return DFL_OK;
    if (!cJSON_IsArray(arr)) return fail_at(err, DFL_ERR_FORMAT, w, "\"text\" is not an array");
    size_t n = 0;
    for (const cJSON *v = arr->child; v; v = v->next) {
        if (!cJSON_IsString(v)) return fail_at(err, DFL_ERR_FORMAT, w, "text[%zu] is not a string", n);
        n++;
    }
    if (n != p->n_tokens)
        return fail_at(err, DFL_ERR_RANGE, w, "\"text\" has %zu entries for %zu tokens", n, p->n_tokens);
    p->text = dfl__calloc_array(n, sizeof *p->text); /* [n], NULL-filled so a partial free is safe */
    if (!p->text) return fail_at(err, DFL_ERR_NOMEM, w, "out of memory for %zu token strings", n);
    size_t i = 0;
    for (const cJSON *v = arr->child; v; v = v->next, i++)
        if (!(p->text[i] = dup_str(v->valuestring)))
            return fail_at(err, DFL_ERR_NOMEM, w, "out of memory for text[%zu]", i);
    return DFL_OK;
}

static dfl_status parse_spans(const cJSON *root, dfl_span_kind k, const where *w, dfl_prompt *p, dfl_error *err)
{
    const char *name = span_names[k];
    const cJSON *arr = get_opt(root, name);
    if (!arr) return DFL_OK;
    if (!cJSON_IsArray(arr))
        return fail_at(err, DFL_ERR_FORMAT, w, "\"%s\" is not an array of [start, end] pairs", name);
    size_t n = 0;
    for (const cJSON *v = arr->child; v; v = v->next)
        n++;
    if (n == 0) return DFL_OK;                              /* "answer": [] is the same as no answer */
    p->spans[k] = dfl__alloc_array(n, sizeof *p->spans[k]); /* [n] */
    if (!p->spans[k]) return fail_at(err, DFL_ERR_NOMEM, w, "out of memory for %zu %s spans", n, name);
    p->n_spans[k] = n;
    size_t j = 0;
    for (const cJSON *v = arr->child; v; v = v->next, j++) {
        const cJSON *a = cJSON_IsArray(v) ? v->child : NULL;
        const cJSON *b = a ? a->next : NULL;
        if (!a || !b || b->next)
            return fail_at(err, DFL_ERR_FORMAT, w, "span %s[%zu] is not a [start, end] pair", name, j);
        if (!is_integral(a) || !is_integral(b))
            return fail_at(err, DFL_ERR_FORMAT, w, "span %s[%zu] has a bound that is not an integer", name, j);
        double s = a->valuedouble, e = b->valuedouble;
        char ss[48], es[48];
        fmt_num(ss, sizeof ss, s);
        fmt_num(es, sizeof es, e);
        /* Order first: [40, 30] is "reversed" even when 40 is also out of range,
         * the more useful thing to say about a pair written backwards. */
        if (s > e) return fail_at(err, DFL_ERR_RANGE, w, "span %s[%zu] = [%s, %s] is reversed", name, j, ss, es);
        if (s == e) return fail_at(err, DFL_ERR_RANGE, w, "span %s[%zu] = [%s, %s] is empty", name, j, ss, es);
        if (s < 0 || e > (double)p->n_tokens)
            return fail_at(err, DFL_ERR_RANGE, w, "span %s[%zu] = [%s, %s] is out of range for %zu tokens", name, j, ss,
                           es, p->n_tokens);
        /* Now 0 <= s < e <= n_tokens <= INT32_MAX, so both convert exactly. */
        p->spans[k][j].start = (int32_t)s;
        p->spans[k][j].end = (int32_t)e;
    }
    return DFL_OK;
}

/* Every key of a prompt line is read, ignored as harmless, or an error naming it: a
 * misspelt "anwser" would otherwise leave the answer share silently 0. The lists are
 * docs/format.md's tables. */
static const char *const token_keys[] = {"tokens", "id",    "text",  "answer",  "query",    "distractor", "target",
                                         "bos",    "depth", "input", "offsets", "generate", "expect",     NULL};
static const char *const text_keys[] = {"input",
                                        "id",
                                        "answer",
                                        "query",
                                        "distractor",
                                        "target",
                                        "depth",
                                        "messages",
                                        "add_generation_prompt",
                                        "chat_template_kwargs",
                                        "generate",
                                        "expect",
                                        NULL};
/* Notes people keep beside a sample; nothing reads them. So is any key starting "_". */
static const char *const harmless_keys[] = {"comment", "note", "notes", "meta", "metadata", "source", NULL};

static int in_list(const char *const *list, const char *k)
{
    for (; *list; list++)
        if (!strcmp(*list, k)) return 1;
    return 0;
}

static dfl_status check_keys(const cJSON *root, int text_prompt, const where *w, dfl_error *err)
{
    const char *const *known = text_prompt ? text_keys : token_keys;
    for (const cJSON *it = root->child; it; it = it->next) {
        const char *k = it->string;
        /* null is "absent" for every key (pandas and Python's None write it) */
        if (in_list(known, k) || in_list(harmless_keys, k) || k[0] == '_' || cJSON_IsNull(it)) continue;
        if (text_prompt && in_list(token_keys, k))
            return fail_at(err, DFL_ERR_FORMAT, w,
                           "key \"%.60s\" belongs to a token prompt; a text prompt "
                           "(\"input\", no \"tokens\") gets it from the tokenizer",
                           k);
        const char *near = dfl__nearest_name(k, known);
        if (near) return fail_at(err, DFL_ERR_FORMAT, w, "unknown key \"%.60s\" (did you mean \"%s\"?)", k, near);
        return fail_at(err, DFL_ERR_FORMAT, w,
                       "unknown key \"%.60s\" (docs/format.md lists the keys a prompt "
                       "may hold)",
                       k);
    }
    return DFL_OK;
}

static dfl_status parse_object(const cJSON *root, const where *w, dfl_prompt *p, dfl_error *err)
{
    if (!cJSON_IsObject(root)) return fail_at(err, DFL_ERR_FORMAT, w, "a sample must be a JSON object");
    dfl_status s;
    /* a text prompt: "input" and no "tokens" (prompts_text.c) */
    int text_prompt = !get_opt(root, "tokens") && (get_opt(root, "input") || get_opt(root, "messages"));
    if ((s = check_keys(root, text_prompt, w, err)) != DFL_OK) return s;
    if (text_prompt) {
        s = dfl__prompt_parse_text(root, w->label, w->line, p, err);
        return s ? s : dfl__prompt_parse_generate(root, w->label, w->line, p, err);
    }
    /* tokens first: text and spans are checked against its length. */
    if ((s = parse_tokens(root, w, p, err)) != DFL_OK) return s;
    if ((s = parse_id(root, w, p, err)) != DFL_OK) return s;
    if ((s = parse_text(root, w, p, err)) != DFL_OK) return s;
    for (int k = 0; k < DFL_SPAN_KINDS; k++)
        if ((s = parse_spans(root, (dfl_span_kind)k, w, p, err)) != DFL_OK) return s;
    if ((s = dfl__prompt_parse_extra(root, w->label, w->line, p, err)) != DFL_OK) return s;

    const cJSON *v = get_opt(root, "bos");
    if (v && !cJSON_IsBool(v)) return fail_at(err, DFL_ERR_FORMAT, w, "\"bos\" is not true or false");
    p->bos = v ? cJSON_IsTrue(v) : 1;

    if ((s = dfl__prompt_parse_generate(root, w->label, w->line, p, err)) != DFL_OK) return s;
    return dfl__prompt_parse_depth(root, w->label, w->line, p, err);
}

dfl_status dfl__prompt_parse_depth(const cJSON *root, const char *label, size_t line, dfl_prompt *p, dfl_error *err)
{
    where w = {label, line};
    const cJSON *v = get_opt(root, "depth");
    if (!v) return DFL_OK;
    if (!cJSON_IsNumber(v)) return fail_at(err, DFL_ERR_FORMAT, &w, "\"depth\" is not a number");
    /* NaN is how pandas and json.dumps write a missing float, and what a dump stores for
     * a sample without depth: the same as absent. Infinity cannot be grouped with. */
    if (isnan(v->valuedouble)) return DFL_OK;
    if (!isfinite(v->valuedouble))
        return fail_at(err, DFL_ERR_RANGE, &w, "\"depth\" is %s (a depth is finite; NaN means none)",
                       v->valuedouble > 0 ? "Infinity" : "-Infinity");
    p->has_depth = 1;
    p->depth = v->valuedouble;
    return DFL_OK;
}

dfl_status dfl_prompt_parse(const char *json, size_t len, const char *label, size_t line, dfl_prompt *p, dfl_error *err)
{
    where w = {label ? label : "prompt", line};
    if (!p) return fail_at(err, DFL_ERR_USAGE, &w, "no output prompt");
    memset(p, 0, sizeof *p);
    if (!json && len) return fail_at(err, DFL_ERR_USAGE, &w, "no input");

    /* A NUL byte would end the text early for cJSON and anyone else; refuse it. */
    const char *nul = len ? memchr(json, '\0', len) : NULL;
    if (nul)
        return fail_at(err, DFL_ERR_FORMAT, &w, "NUL byte at byte %zu (not a text line)", (size_t)(nul - json) + 1);

    /* Python's json rules (base/jsondoc.h), plus what json.dumps writes for non-finite
     * floats (NaN, Infinity, -Infinity); a literal beyond the double range is named. */
    const char *why = NULL;
    size_t at = 0;
    cJSON *root = dfl__json_parse_opts(json, len, DFL_JSON_NONFINITE | DFL_JSON_RANGE | DFL_JSON_STRLEN, &why, &at);
    dfl_status s = DFL_OK;
    long esc = root ? find_nul_escape(json, len) : -1;
    if (!root) {
        if (!strcmp(why, "lone surrogate"))
            s = fail_at(err, DFL_ERR_FORMAT, &w,
                        "column %zu: the escape %.6s is a lone surrogate (no character; UTF-8 cannot hold it)",
                        count_cp(json, at) + 1, json + at);
        else if (!strcmp(why, "invalid UTF-8"))
            /* JSON text is UTF-8; a stray byte would be stored as-is and fail every reader */
            s = fail_at(err, DFL_ERR_FORMAT, &w, "invalid UTF-8 at byte %zu", at + 1);
        else if (!strcmp(why, "text after the JSON document"))
            /* one object per line: two samples glued onto one line are an error, not
             * something to drop silently */
            s = fail_at(err, DFL_ERR_FORMAT, &w, "invalid JSON near byte %zu (text after the object)", at + 1);
        else if (!strcmp(why, "number out of range")) {
            size_t n = 0;
            while (at + n < len && n < 40 && strchr("0123456789+-eE.", json[at + n]))
                n++;
            s = fail_at(err, DFL_ERR_RANGE, &w,
                        "number %.*s at byte %zu is out of range (beyond a double's "
                        "1.8e308)",
                        (int)n, json + at, at + 1);
        } else if (!strcmp(why, "syntax error"))
            s = fail_at(err, DFL_ERR_FORMAT, &w, "invalid JSON near byte %zu", at + 1);
        else
            s = fail_at(err, DFL_ERR_NOMEM, &w, "%s (a %zu-byte line)", why, len);
    } else if (esc >= 0 && !nul_only_in_input(root, 1)) {
        /* U+0000 is a character of a text ("input", as Hugging Face encodes it); in a
         * name, an id or a span's text it would be cut at by every C string */
        s = fail_at(err, DFL_ERR_FORMAT, &w, "\\u0000 at byte %ld is only allowed in \"input\"", esc + 1);
    } else {
        s = parse_object(root, &w, p, err);
    }
    cJSON_Delete(root);
    if (s != DFL_OK)
        dfl_prompt_free(p); /* leaves *p zeroed: a failed parse owns nothing */
    else
        p->line = line;
    return s;
}

void dfl_prompt_free(dfl_prompt *p)
{
    if (!p) return;
    free(p->id);
    free(p->tokens);
    free(p->expect);
    if (p->text)
        for (size_t i = 0; i < p->n_tokens; i++)
            free(p->text[i]);
    free(p->text);
    for (int k = 0; k < DFL_SPAN_KINDS; k++)
        free(p->spans[k]);
    free(p->input);
    free(p->offsets);
    for (int k = 0; k < DFL_SPAN_KINDS; k++)
        free(p->char_spans[k]), free(p->chat_spans[k]);
    free(p->chat);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------------ */
/* Segments and vocabulary                                                  */
/* ------------------------------------------------------------------------ */

void dfl_prompt_segments(const dfl_prompt *p, uint8_t *seg)
{
    size_t n = p->n_tokens;
    if (n == 0) return;
    memset(seg, DFL_SEG_CONTEXT, n); /* seg: u8 [n_tokens] */
    if (p->bos) seg[0] = DFL_SEG_BOS;
    /* Kinds in enum order, so a later kind wins on overlap (target over answer).
     * Bounds are clamped: a prompt built in memory may not have been validated. */
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        uint8_t code = (uint8_t)(DFL_SEG_ANSWER + k);
        for (size_t j = 0; j < p->n_spans[k]; j++) {
            int32_t a = p->spans[k][j].start, b = p->spans[k][j].end;
            size_t lo = a < 0 ? 0 : (size_t)a;
            size_t hi = b < 0 ? 0 : (size_t)b;
            if (hi > n) hi = n;
            for (size_t t = lo; t < hi; t++)
                seg[t] = code;
        }
    }
}

dfl_status dfl_prompt_check_vocab(const dfl_prompt *p, int64_t vocab_size, const char *label, dfl_error *err)
{
    where w = {label ? label : "prompt", p->line};
    if (vocab_size <= 0)
        return fail_at(err, DFL_ERR_USAGE, &w, "vocab_size %lld is not positive", (long long)vocab_size);
    for (size_t i = 0; i < p->n_tokens; i++)
        if (p->tokens[i] < 0 || (int64_t)p->tokens[i] >= vocab_size)
            return fail_at(err, DFL_ERR_RANGE, &w, "token %zu = %d is out of range for vocab_size %lld", i,
                           (int)p->tokens[i], (long long)vocab_size);
    return DFL_OK;
}

/* ------------------------------------------------------------------------ */
/* A whole file                                                             */
/* ------------------------------------------------------------------------ */

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\v' && s[i] != '\f') return 0;
    return 1;
}

dfl_status dfl_prompt_set_read(const char *path, dfl_prompt_set *out, dfl_error *err)
{
    return dfl__prompt_set_read(path, 0, out, err);
}

dfl_status dfl__prompt_set_read(const char *path, int allow_text, dfl_prompt_set *out, dfl_error *err)
{
    if (!out) return dfl__fail(err, DFL_ERR_USAGE, "%s: no output set", path ? path : "(null)");
    memset(out, 0, sizeof *out);
    if (!path) return dfl__fail(err, DFL_ERR_USAGE, "no prompt file given");
    char *buf = NULL;
    size_t len = 0;
    /* a bound, so that /dev/zero or an endless stream fails at once instead of taking
     * all memory: 1 GiB is some 10^8 tokens of prompts */
    dfl_status s = dfl__read_file_max(path, (size_t)1 << 30, "a prompt file", &buf, &len, err);
    if (s != DFL_OK) return s;

    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        size_t line = 1;
        for (const char *c = buf; c < nul; c++)
            line += *c == '\n';
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s:%zu: NUL byte in the file (binary, or UTF-16 text?)", path, line);
        free(buf);
        return s;
    }

    /* Editors on Windows and Python's "utf-8-sig" write a byte-order mark; it is
     * not JSON, so step over it rather than fail on line 1. */
    size_t pos = (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) ? 3 : 0;
    size_t cap = 0;
    for (size_t line = 1; pos < len; line++) {
        const char *start = buf + pos;
        const char *nl = memchr(start, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - start) : len - pos; /* the last line may lack '\n' */
        pos += n + (nl ? 1 : 0);
        if (n && start[n - 1] == '\r') n--; /* CRLF */
        if (is_blank(start, n)) continue;
        if (out->count == cap) {
            /* Grow geometrically; counting lines up front would over-allocate a
             * whole prompt per blank line. */
            size_t ncap = cap ? cap * 2 : 16;
            size_t bytes;
            if (ncap < cap || !dfl__mul_ok(ncap, sizeof *out->items, &bytes)) {
                s = dfl__fail(err, DFL_ERR_NOMEM, "%s:%zu: too many samples", path, line);
                break;
            }
            dfl_prompt *ni = realloc(out->items, bytes);
            if (!ni) {
                s = dfl__fail(err, DFL_ERR_NOMEM, "%s:%zu: out of memory", path, line);
                break;
            }
            out->items = ni;
            cap = ncap;
        }
        s = dfl_prompt_parse(start, n, path, line, &out->items[out->count], err);
        if (s != DFL_OK) break;
        out->count++;
        if (!allow_text && out->items[out->count - 1].n_tokens == 0) {
            s = dfl__fail(err, DFL_ERR_FORMAT,
                          "%s:%zu: a text prompt (\"input\", no \"tokens\") needs a tokenizer: "
                          "probe --tokenizer, or bin/tokenize --prompts",
                          path, line);
            break;
        }
    }
    free(buf);
    if (s == DFL_OK && out->count == 0) s = dfl__fail(err, DFL_ERR_FORMAT, "%s: no samples", path);
    if (s != DFL_OK) dfl_prompt_set_free(out);
    return s;
}

void dfl_prompt_set_free(dfl_prompt_set *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->count; i++)
        dfl_prompt_free(&s->items[i]);
    free(s->items);
    s->items = NULL;
    s->count = 0;
}

/* One prompt as a compact JSON object (no newline); caller frees with cJSON_free.
 * NULL on allocation failure. Keys in the documented order, only those present. */
static char *prompt_to_json(const dfl_prompt *p)
{
    cJSON *o = cJSON_CreateObject();
    char *out = NULL;
    if (!o) return NULL;
    if (p->id && !cJSON_AddStringToObject(o, "id", p->id)) goto done;
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
    if (!toks) goto done;
    for (size_t i = 0; i < p->n_tokens; i++) {
        cJSON *v = cJSON_CreateNumber((double)p->tokens[i]);
        if (!v) goto done;
        cJSON_AddItemToArray(toks, v);
    }
    if (p->text) {
        cJSON *t = cJSON_AddArrayToObject(o, "text");
        if (!t) goto done;
        for (size_t i = 0; i < p->n_tokens; i++) {
            cJSON *v = cJSON_CreateString(p->text[i]);
            if (!v) goto done;
            cJSON_AddItemToArray(t, v);
        }
    }
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        if (p->n_spans[k] == 0) continue;
        cJSON *arr = cJSON_AddArrayToObject(o, span_names[k]);
        if (!arr) goto done;
        for (size_t j = 0; j < p->n_spans[k]; j++) {
            int pair[2] = {p->spans[k][j].start, p->spans[k][j].end};
            cJSON *v = cJSON_CreateIntArray(pair, 2);
            if (!v) goto done;
            cJSON_AddItemToArray(arr, v);
        }
    }
    if (!p->bos && !cJSON_AddFalseToObject(o, "bos")) goto done;
    if (!dfl__prompt_json_extra(o, p)) goto done;
    if (!dfl__prompt_json_generate(o, p)) goto done;
    /* Our own digits, inserted raw: depth must survive the round trip bit for bit
     * (see fmt_exact); validate() has already refused NaN and inf. */
    if (p->has_depth) {
        char num[40];
        fmt_exact(num, sizeof num, p->depth);
        if (!cJSON_AddRawToObject(o, "depth", num)) goto done;
    }
    out = cJSON_PrintUnformatted(o);
done:
    cJSON_Delete(o);
    return out;
}

dfl_status dfl_prompt_set_write(const char *path, const dfl_prompt *items, size_t count, int overwrite, dfl_error *err)
{
    if (!path) return dfl__fail(err, DFL_ERR_USAGE, "no output path given");
    /* An empty file is one the reader refuses ("no samples"), so do not write one. */
    if (count == 0 || !items)
        return dfl__fail(err, DFL_ERR_USAGE, "%s: no prompts to write (a prompt file needs at least one)", path);
    /* Validate everything before creating any file: a bad prompt leaves nothing behind,
     * and the file we write is one the reader accepts. */
    for (size_t i = 0; i < count; i++) {
        char lab[64];
        snprintf(lab, sizeof lab, "prompt %zu", i);
        where w = {lab, 0};
        dfl_status s = validate(&items[i], &w, err);
        if (s != DFL_OK) return dfl__context(err, "%s", path);
    }
    dfl_atomic a;
    dfl_status s = dfl__atomic_open(&a, path, overwrite, err);
    if (s != DFL_OK) return s;
    for (size_t i = 0; i < count && s == DFL_OK; i++) {
        char *line = prompt_to_json(&items[i]);
        if (!line) {
            s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory formatting prompt %zu", path, i);
            break;
        }
        size_t n = strlen(line);
        if (fwrite(line, 1, n, a.f) != n || fputc('\n', a.f) == EOF)
            s = dfl__fail(err, DFL_ERR_IO, "%s: write error: %s", path, strerror(errno));
        cJSON_free(line);
    }
    return dfl__atomic_close(&a, s, err);
}
