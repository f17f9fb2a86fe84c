/* prompts_text.c — text prompts ("input") and chat prompts ("messages"): parsing their
 * character or substring spans, rendering a chat with the tokenizer's chat template,
 * tokenizing them (ids, decoded labels, code point offsets, spans → token spans), and
 * the extra keys a tokenized prompt keeps ("input", "offsets"). */
#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsondoc.h"
#include "base/strbuf.h"
#include "text/jinja.h"
#include "text/prompts.h"
#include "text/tokenizer.h"

static const char *const kind_names[DFL_SPAN_KINDS] = {"answer", "query", "distractor", "target"};

__attribute__((format(printf, 5, 6))) static dfl_status fail_at(dfl_error *err, dfl_status s, const char *label,
                                                                size_t line, const char *fmt, ...)
{
    char body[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    if (line) return dfl__fail(err, s, "%s:%zu: %s", label, line, body);
    return dfl__fail(err, s, "%s: %s", label, body);
}

/* Code points in s[n] (valid UTF-8). */
static size_t count_cp(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* Bytes of p->input (which may hold U+0000). */
static size_t input_len(const dfl_prompt *p)
{
    return p->input_len ? p->input_len : strlen(p->input);
}

/* p->input = a copy of the string item in, U+0000 included; 1 when out of memory. */
static int copy_input(const cJSON *in, dfl_prompt *p)
{
    size_t n = dfl__json_string_len(in);
    if (!(p->input = malloc(n + 1))) return 1;
    memcpy(p->input, in->valuestring, n + 1);
    p->input_len = n != strlen(in->valuestring) ? n : 0;
    return 0;
}

/* o["input"] = p->input; U+0000 written as the escape \u0000 (cJSON's strings end at
 * it: each piece between them is printed by cJSON and the pieces joined raw). 0 when
 * out of memory. */
static int add_input(cJSON *o, const dfl_prompt *p)
{
    if (!p->input_len) return cJSON_AddStringToObject(o, "input", p->input) != NULL;
    dfl_strbuf b = {0};
    dfl_strbuf_add(&b, "\"", 1);
    int ok = 1;
    for (size_t i = 0; ok && i <= p->input_len;) {
        size_t m = strlen(p->input + i);
        cJSON *piece = cJSON_CreateString(p->input + i);
        char *q = piece ? cJSON_PrintUnformatted(piece) : NULL;
        ok = q != NULL;
        if (ok) dfl_strbuf_add(&b, q + 1, strlen(q) - 2);
        i += m + 1;
        if (ok && i <= p->input_len) dfl_strbuf_add(&b, "\\u0000", 6);
        free(q);
        cJSON_Delete(piece);
    }
    dfl_strbuf_add(&b, "\"", 1);
    ok = ok && !b.oom && cJSON_AddRawToObject(o, "input", b.p) != NULL;
    dfl_strbuf_free(&b);
    return ok;
}

static int is_int(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && floor(v->valuedouble) == v->valuedouble;
}

/* One span of a text prompt → a code point range. */
static dfl_status char_span(const cJSON *v, const char *input, size_t in_len, size_t ncp, const char *name, size_t j,
                            const char *label, size_t line, dfl_span *out, dfl_error *err)
{
    if (cJSON_IsArray(v)) {
        const cJSON *a = v->child, *b = a ? a->next : NULL;
        if (!a || !b || b->next || !is_int(a) || !is_int(b))
            return fail_at(err, DFL_ERR_FORMAT, label, line, "span %s[%zu] is not a [start, end] pair of integers",
                           name, j);
        double s = a->valuedouble, e = b->valuedouble;
        if (s >= e)
            return fail_at(err, DFL_ERR_RANGE, label, line, "span %s[%zu] = [%.0f, %.0f] is %s", name, j, s, e,
                           s == e ? "empty" : "reversed");
        if (s < 0 || e > (double)ncp)
            return fail_at(err, DFL_ERR_RANGE, label, line,
                           "span %s[%zu] = [%.0f, %.0f] is outside the input (%zu characters)", name, j, s, e, ncp);
        out->start = (int32_t)s;
        out->end = (int32_t)e;
        return DFL_OK;
    }
    const char *text = NULL;
    double occ = 1;
    if (cJSON_IsString(v)) {
        text = v->valuestring;
    } else if (cJSON_IsObject(v)) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "text"),
                    *o = cJSON_GetObjectItemCaseSensitive(v, "occurrence");
        if (!cJSON_IsString(t))
            return fail_at(err, DFL_ERR_FORMAT, label, line, "span %s[%zu] needs a string \"text\"", name, j);
        text = t->valuestring;
        if (o && !cJSON_IsNull(o)) {
            if (!is_int(o) || o->valuedouble < 1 || o->valuedouble > 1e9)
                return fail_at(err, DFL_ERR_FORMAT, label, line, "span %s[%zu]: \"occurrence\" must be an integer >= 1",
                               name, j);
            occ = o->valuedouble;
        }
    } else {
        return fail_at(err, DFL_ERR_FORMAT, label, line,
                       "span %s[%zu] is not [start, end], a string or {\"text\", \"occurrence\"}", name, j);
    }
    size_t tl = strlen(text);
    if (!tl) return fail_at(err, DFL_ERR_RANGE, label, line, "span %s[%zu] is an empty string", name, j);
    /* the k-th occurrence, counting non-overlapping matches from the left */
    const char *at = input, *hit = NULL;
    for (double k = 0; k < occ; k++) {
        hit = memmem(at, in_len - (size_t)(at - input), text, tl);
        if (!hit) break;
        at = hit + tl;
    }
    if (!hit)
        return fail_at(err, DFL_ERR_RANGE, label, line, "span %s[%zu] \"%.60s\" does not occur%s in the input", name, j,
                       text, occ > 1 ? " that many times" : "");
    size_t s = count_cp(input, (size_t)(hit - input));
    out->start = (int32_t)s;
    out->end = (int32_t)(s + count_cp(hit, tl));
    return DFL_OK;
}

static int present(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return v && !cJSON_IsNull(v);
}

/* A chat prompt: its template variables and its spans kept as JSON until rendering. */
static dfl_status parse_chat(const cJSON *root, const char *label, size_t line, dfl_prompt *p, dfl_error *err)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (present(root, "input"))
        return fail_at(err, DFL_ERR_FORMAT, label, line, "a prompt holds \"input\" or \"messages\", not both");
    if (!cJSON_IsArray(m) || !m->child)
        return fail_at(err, DFL_ERR_FORMAT, label, line, "\"messages\" is not a non-empty array of messages");
    size_t i = 0;
    for (const cJSON *e = m->child; e; e = e->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role"),
                    *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsObject(e) || !cJSON_IsString(role))
            return fail_at(err, DFL_ERR_FORMAT, label, line, "messages[%zu] is not an object with a string \"role\"",
                           i);
        if (c && !cJSON_IsString(c) && !cJSON_IsArray(c) && !cJSON_IsNull(c))
            return fail_at(err, DFL_ERR_FORMAT, label, line, "messages[%zu]: \"content\" is not a string or a list", i);
    }
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt"),
                *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    if (gen && !cJSON_IsBool(gen) && !cJSON_IsNull(gen))
        return fail_at(err, DFL_ERR_FORMAT, label, line, "\"add_generation_prompt\" is not true or false");
    if (kw && !cJSON_IsObject(kw) && !cJSON_IsNull(kw))
        return fail_at(err, DFL_ERR_FORMAT, label, line, "\"chat_template_kwargs\" is not an object");
    static const char *const reserved[] = {"messages", "add_generation_prompt", "tools", "documents"};
    cJSON *vars = cJSON_IsObject(kw) ? cJSON_Duplicate(kw, 1) : cJSON_CreateObject();
    for (size_t r = 0; vars && r < 4; r++)
        if (cJSON_GetObjectItemCaseSensitive(vars, reserved[r])) {
            cJSON_Delete(vars);
            return fail_at(err, DFL_ERR_FORMAT, label, line, "\"chat_template_kwargs\" may not set \"%s\"",
                           reserved[r]);
        }
    int ok = vars && cJSON_AddItemToObject(vars, "messages", cJSON_Duplicate(m, 1)) &&
             cJSON_AddBoolToObject(vars, "add_generation_prompt", cJSON_IsTrue(gen)) &&
             cJSON_AddNullToObject(vars, "tools") && cJSON_AddNullToObject(vars, "documents");
    p->chat = ok ? cJSON_PrintUnformatted(vars) : NULL;
    cJSON_Delete(vars);
    if (!p->chat) return fail_at(err, DFL_ERR_NOMEM, label, line, "out of memory");
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, kind_names[k]);
        if (!arr || cJSON_IsNull(arr) || (cJSON_IsArray(arr) && !arr->child)) continue;
        if (!(p->chat_spans[k] = cJSON_PrintUnformatted(arr)))
            return fail_at(err, DFL_ERR_NOMEM, label, line, "out of memory");
    }
    p->bos = 0; /* decided by the tokenizer */
    return dfl__prompt_parse_depth(root, label, line, p, err);
}

dfl_status dfl__prompt_parse_text(const cJSON *root, const char *label, size_t line, dfl_prompt *p, dfl_error *err)
{
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "input");
    int chat = present(root, "messages");
    if (!chat && !cJSON_IsString(in)) return fail_at(err, DFL_ERR_FORMAT, label, line, "\"input\" is not a string");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    if (id && !cJSON_IsNull(id)) {
        char buf[48];
        if (cJSON_IsString(id))
            p->id = strdup(id->valuestring);
        else if (cJSON_IsNumber(id)) {
            snprintf(buf, sizeof buf, "%.17g", id->valuedouble);
            p->id = strdup(buf);
        } else
            return fail_at(err, DFL_ERR_FORMAT, label, line, "\"id\" is neither a string nor a number");
        if (!p->id) return fail_at(err, DFL_ERR_NOMEM, label, line, "out of memory");
    }
    if (chat) return parse_chat(root, label, line, p, err);
    if (copy_input(in, p)) return fail_at(err, DFL_ERR_NOMEM, label, line, "out of memory");
    size_t ncp = count_cp(p->input, input_len(p));
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, kind_names[k]);
        if (!arr || cJSON_IsNull(arr)) continue;
        if (!cJSON_IsArray(arr))
            return fail_at(err, DFL_ERR_FORMAT, label, line, "\"%s\" is not an array", kind_names[k]);
        size_t n = 0;
        for (const cJSON *v = arr->child; v; v = v->next)
            n++;
        if (!n) continue;
        p->char_spans[k] = dfl__alloc_array(n, sizeof(dfl_span));
        if (!p->char_spans[k]) return fail_at(err, DFL_ERR_NOMEM, label, line, "out of memory");
        p->n_char_spans[k] = n;
        size_t j = 0;
        for (const cJSON *v = arr->child; v; v = v->next, j++) {
            dfl_status s =
                char_span(v, p->input, input_len(p), ncp, kind_names[k], j, label, line, &p->char_spans[k][j], err);
            if (s) return s;
        }
    }
    p->bos = 0; /* decided by the tokenizer */
    return dfl__prompt_parse_depth(root, label, line, p, err);
}

dfl_status dfl__prompt_parse_extra(const cJSON *root, const char *label, size_t line, dfl_prompt *p, dfl_error *err)
{
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "input");
    if (in && !cJSON_IsNull(in)) {
        if (!cJSON_IsString(in)) return fail_at(err, DFL_ERR_FORMAT, label, line, "\"input\" is not a string");
        if (copy_input(in, p)) return fail_at(err, DFL_ERR_NOMEM, label, line, "out of memory");
    }
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(root, "offsets");
    if (!off || cJSON_IsNull(off)) return DFL_OK;
    size_t n = 0;
    if (cJSON_IsArray(off))
        for (const cJSON *v = off->child; v; v = v->next)
            n++;
    if (!cJSON_IsArray(off) || n != p->n_tokens)
        return fail_at(err, DFL_ERR_FORMAT, label, line, "\"offsets\" must hold one [start, end] pair per token");
    p->offsets = dfl__alloc_array(n, 2 * sizeof(int32_t));
    if (!p->offsets) return fail_at(err, DFL_ERR_NOMEM, label, line, "out of memory");
    size_t i = 0;
    for (const cJSON *v = off->child; v; v = v->next, i++) {
        const cJSON *a = cJSON_IsArray(v) ? v->child : NULL, *b = a ? a->next : NULL;
        if (!a || !b || b->next || !is_int(a) || !is_int(b) || a->valuedouble < 0 || b->valuedouble < a->valuedouble ||
            b->valuedouble > 2147483647.0)
            return fail_at(err, DFL_ERR_FORMAT, label, line,
                           "offsets[%zu] is not a [start, end] pair with 0 <= start <= end", i);
        p->offsets[2 * i] = (int32_t)a->valuedouble;
        p->offsets[2 * i + 1] = (int32_t)b->valuedouble;
    }
    return DFL_OK;
}

int dfl__prompt_json_extra(cJSON *o, const dfl_prompt *p)
{
    if (p->input && !add_input(o, p)) return 0;
    if (p->offsets) {
        cJSON *arr = cJSON_AddArrayToObject(o, "offsets");
        if (!arr) return 0;
        for (size_t i = 0; i < p->n_tokens; i++) {
            cJSON *v = cJSON_CreateIntArray((const int[]){p->offsets[2 * i], p->offsets[2 * i + 1]}, 2);
            if (!v) return 0;
            cJSON_AddItemToArray(arr, v);
        }
    }
    return 1;
}

/* --------------------------------------------------------------- chats ---- */

/* Python's str.isspace for the white space around a message's content. */
static size_t ws_len(const char *s, size_t n, int from_end)
{
    size_t k = 0;
    while (k < n) {
        unsigned char c = (unsigned char)(from_end ? s[n - 1 - k] : s[k]);
        if (c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x1F))
            k++;
        else
            break;
    }
    return k;
}

/* {"message": k}: where messages[k]'s content appears in the rendered text, searching
 * the messages in order, each after the previous one found. */
static dfl_status message_span(const cJSON *messages, double want, const char *input, const char *name, size_t j,
                               const char *label, size_t line, dfl_span *out, dfl_error *err)
{
    const char *from = input;
    size_t count = (size_t)cJSON_GetArraySize(messages);
    if (want < 0 || want >= (double)count || floor(want) != want)
        return fail_at(err, DFL_ERR_RANGE, label, line, "span %s[%zu]: message %.0f does not exist (%zu messages)",
                       name, j, want, count);
    size_t i = 0;
    for (const cJSON *m = messages->child; m; m = m->next, i++) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        const char *text = cJSON_IsString(c) ? c->valuestring : "";
        size_t n = strlen(text), lead = ws_len(text, n, 0);
        size_t tl = lead == n ? 0 : n - lead - ws_len(text, n, 1);
        const char *hit = tl ? memmem(from, strlen(from), text + lead, tl) : NULL;
        if (i == (size_t)want) {
            if (!tl)
                return fail_at(err, DFL_ERR_RANGE, label, line, "span %s[%zu]: message %zu has no text content", name,
                               j, i);
            if (!hit)
                return fail_at(err, DFL_ERR_RANGE, label, line,
                               "span %s[%zu]: the content of message %zu does not "
                               "appear in the rendered chat (its template rewrites it)",
                               name, j, i);
            size_t s = count_cp(input, (size_t)(hit - input));
            out->start = (int32_t)s;
            out->end = (int32_t)(s + count_cp(hit, tl));
            return DFL_OK;
        }
        if (hit) from = hit + tl;
    }
    return DFL_OK;
}

/* The id of the special tokens' bos_token, or -1. */
static int64_t chat_bos(const dfl_tokenizer *t)
{
    const char *why = NULL, *sp = dfl_tokenizer_chat_specials(t);
    size_t at = 0;
    cJSON *o = dfl__json_parse(sp, strlen(sp), &why, &at);
    const cJSON *b = o ? cJSON_GetObjectItemCaseSensitive(o, "bos_token") : NULL;
    int64_t id = cJSON_IsString(b) ? dfl_tokenizer_find(t, b->valuestring, strlen(b->valuestring)) : -1;
    cJSON_Delete(o);
    return id;
}

/* Render a chat prompt into p->input and resolve its spans into p->char_spans. */
static dfl_status render_chat(dfl_prompt *p, dfl_tokenizer *t, const char *label, dfl_error *err)
{
    const char *tmpl = dfl_tokenizer_chat_template(t);
    if (!tmpl)
        return fail_at(err, DFL_ERR_CONFIG, label, p->line,
                       "a chat prompt (\"messages\") needs the model's chat "
                       "template: the tokenizer folder has no chat_template.jinja, and no tokenizer_config.json with "
                       "a \"chat_template\"");
    const char *why = NULL;
    size_t at = 0;
    cJSON *vars = dfl__json_parse(p->chat, strlen(p->chat), &why, &at);
    cJSON *specials =
        dfl__json_parse(dfl_tokenizer_chat_specials(t), strlen(dfl_tokenizer_chat_specials(t)), &why, &at);
    dfl_jinja *j = NULL;
    dfl_strbuf out = {0};
    dfl_status s = vars && specials ? DFL_OK : fail_at(err, DFL_ERR_NOMEM, label, p->line, "out of memory");
    /* special_tokens_map first; the prompt's kwargs and messages override it, as in
     * transformers' render(messages=..., **{**special_tokens_map, **kwargs}) */
    for (cJSON *e = specials ? specials->child : NULL; !s && e; e = e->next)
        if (!cJSON_GetObjectItemCaseSensitive(vars, e->string) &&
            !cJSON_AddItemToObject(vars, e->string, cJSON_Duplicate(e, 1)))
            s = fail_at(err, DFL_ERR_NOMEM, label, p->line, "out of memory");
    char *text = !s ? cJSON_PrintUnformatted(vars) : NULL;
    if (!s && !text) s = fail_at(err, DFL_ERR_NOMEM, label, p->line, "out of memory");
    if (!s && (s = dfl_jinja_parse(tmpl, strlen(tmpl), &j, err))) dfl__context(err, "%s:%zu", label, p->line);
    if (!s && (s = dfl_jinja_render(j, text, &out, err))) dfl__context(err, "%s:%zu", label, p->line);
    if (!s && out.oom) s = fail_at(err, DFL_ERR_NOMEM, label, p->line, "out of memory");
    if (!s && !(p->input = strdup(out.p ? out.p : "")))
        s = fail_at(err, DFL_ERR_NOMEM, label, p->line, "out of memory");
    size_t ncp = p->input ? count_cp(p->input, strlen(p->input)) : 0;
    const cJSON *messages = vars ? cJSON_GetObjectItemCaseSensitive(vars, "messages") : NULL;
    for (int k = 0; k < DFL_SPAN_KINDS && !s; k++) {
        if (!p->chat_spans[k]) continue;
        cJSON *arr = dfl__json_parse(p->chat_spans[k], strlen(p->chat_spans[k]), &why, &at);
        if (!arr) {
            s = fail_at(err, DFL_ERR_NOMEM, label, p->line, "out of memory");
            break;
        }
        /* a single span may stand without its list */
        const cJSON *first = cJSON_IsArray(arr) && !(arr->child && cJSON_IsNumber(arr->child)) ? arr->child : arr;
        size_t n = 0;
        for (const cJSON *v = first; v; v = first == arr ? NULL : v->next)
            n++;
        free(p->char_spans[k]);
        p->char_spans[k] = dfl__alloc_array(n, sizeof(dfl_span));
        p->n_char_spans[k] = n;
        if (!p->char_spans[k]) s = fail_at(err, DFL_ERR_NOMEM, label, p->line, "out of memory");
        size_t idx = 0;
        for (const cJSON *v = first; v && !s; v = first == arr ? NULL : v->next, idx++) {
            const cJSON *msg = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "message") : NULL;
            if (msg && !is_int(msg))
                s = fail_at(err, DFL_ERR_FORMAT, label, p->line, "span %s[%zu]: \"message\" is not an integer",
                            kind_names[k], idx);
            else if (msg)
                s = message_span(messages, msg->valuedouble, p->input, kind_names[k], idx, label, p->line,
                                 &p->char_spans[k][idx], err);
            else
                s = char_span(v, p->input, input_len(p), ncp, kind_names[k], idx, label, p->line,
                              &p->char_spans[k][idx], err);
        }
        cJSON_Delete(arr);
    }
    dfl_strbuf_free(&out);
    dfl_jinja_free(j);
    free(text);
    cJSON_Delete(vars);
    cJSON_Delete(specials);
    return s;
}

/* ------------------------------------------------------------ tokenize ---- */

dfl_status dfl_prompt_tokenize(dfl_prompt *p, dfl_tokenizer *t, int special, const char *label, dfl_error *err)
{
    if (p->n_tokens) return DFL_OK;
    label = label ? label : "prompt";
    /* a chat: rendered, then tokenized without special tokens (the template writes them),
     * as apply_chat_template(tokenize=True) does */
    if (p->chat && !p->input) {
        dfl_status r = render_chat(p, t, label, err);
        if (r) return r;
        special = 0;
    } else if (p->chat) {
        special = 0;
    }
    if (!p->input) return fail_at(err, DFL_ERR_USAGE, label, p->line, "prompt has neither tokens nor input");
    dfl_encoding e;
    dfl_status s = dfl_tokenizer_encode(t, p->input, input_len(p), special, &e, err);
    if (s) return p->line ? dfl__context(err, "%s:%zu", label, p->line) : dfl__context(err, "%s", label);
    if (!e.n) {
        dfl_encoding_free(&e);
        return fail_at(err, DFL_ERR_RANGE, label, p->line, "the input gives no tokens");
    }
    if (e.n > INT32_MAX) {
        dfl_encoding_free(&e);
        return fail_at(err, DFL_ERR_RANGE, label, p->line, "too many tokens");
    }
    int32_t *tokens = dfl__alloc_array(e.n, sizeof *tokens);
    int32_t *offs = dfl__alloc_array(e.n, 2 * sizeof *offs);
    dfl_span *spans[DFL_SPAN_KINDS] = {0};
    char **labels = NULL;
    if (!tokens || !offs) {
        s = fail_at(err, DFL_ERR_NOMEM, label, p->line, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < e.n; i++) {
        tokens[i] = (int32_t)e.ids[i];
        offs[2 * i] = (int32_t)e.start[i];
        offs[2 * i + 1] = (int32_t)e.end[i];
    }
    /* a token belongs to a span when its characters overlap the span's */
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        if (!p->n_char_spans[k]) continue;
        spans[k] = dfl__alloc_array(p->n_char_spans[k], sizeof(dfl_span));
        if (!spans[k]) {
            s = fail_at(err, DFL_ERR_NOMEM, label, p->line, "out of memory");
            goto fail;
        }
        for (size_t j = 0; j < p->n_char_spans[k]; j++) {
            int32_t cs = p->char_spans[k][j].start, ce = p->char_spans[k][j].end;
            int64_t first = -1, last = -1;
            for (size_t i = 0; i < e.n; i++)
                if (e.start[i] < e.end[i] && (int64_t)e.start[i] < ce && (int64_t)e.end[i] > cs) {
                    if (first < 0) first = (int64_t)i;
                    last = (int64_t)i;
                }
            if (first < 0) {
                s = fail_at(err, DFL_ERR_RANGE, label, p->line, "span %s[%zu] = characters [%d, %d] covers no token",
                            kind_names[k], j, (int)cs, (int)ce);
                goto fail;
            }
            spans[k][j].start = (int32_t)first;
            spans[k][j].end = (int32_t)(last + 1);
        }
    }
    s = dfl_tokenizer_labels(t, e.ids, e.n, &labels, err);
    if (s) goto fail;
    p->tokens = tokens;
    p->n_tokens = e.n;
    p->offsets = offs;
    p->text = labels;
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        free(p->spans[k]);
        p->spans[k] = spans[k];
        p->n_spans[k] = p->n_char_spans[k];
    }
    p->bos = e.special[0] && e.start[0] == 0 && e.end[0] == 0;
    if (p->chat) p->bos = chat_bos(t) == (int64_t)e.ids[0]; /* the template wrote it */
    dfl_encoding_free(&e);
    return DFL_OK;
fail:
    free(tokens);
    free(offs);
    for (int k = 0; k < DFL_SPAN_KINDS; k++)
        free(spans[k]);
    dfl_encoding_free(&e);
    return s;
}

dfl_status dfl_prompt_set_read_text(const char *path, dfl_tokenizer *t, int special, dfl_prompt_set *out,
                                    dfl_error *err)
{
    dfl_status s = dfl__prompt_set_read(path, 1, out, err);
    if (s) return s;
    for (size_t i = 0; i < out->count && !s; i++)
        s = dfl_prompt_tokenize(&out->items[i], t, special, path, err);
    if (s) dfl_prompt_set_free(out);
    return s;
}

dfl_status dfl_prompt_file_tokenize(const char *in, const char *out, dfl_tokenizer *t, int special, int overwrite,
                                    dfl_error *err)
{
    dfl_prompt_set set;
    dfl_status s = dfl_prompt_set_read_text(in, t, special, &set, err);
    if (s) return s;
    s = dfl_prompt_set_write(out, set.items, set.count, overwrite, err);
    dfl_prompt_set_free(&set);
    return s;
}
