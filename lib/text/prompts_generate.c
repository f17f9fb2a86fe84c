/* prompts_generate.c — a prompt's generation keys: "generate" (how many tokens probe
 * --generate produces for it) and "expect" (the tokens its generation should begin
 * with: free-form retrieval, scored by exact match). */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>

#include "text/prompts.h"

/* The largest "generate" a line may ask for: far past any context, small enough that
 * buffers sized by it cannot overflow. */
#define GENERATE_MAX (1 << 20)

static dfl_status fail_line(dfl_error *err, dfl_status s, const char *label, size_t line, const char *what)
{
    if (line) return dfl__fail(err, s, "%s:%zu: %s", label, line, what);
    return dfl__fail(err, s, "%s: %s", label, what);
}

static int is_int(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble);
}

dfl_status dfl__prompt_parse_generate(const cJSON *root, const char *label, size_t line, dfl_prompt *p, dfl_error *err)
{
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "generate");
    if (g && !cJSON_IsNull(g)) {
        if (!is_int(g)) return fail_line(err, DFL_ERR_FORMAT, label, line, "\"generate\" is not an integer");
        if (g->valuedouble < 0 || g->valuedouble > GENERATE_MAX)
            return fail_line(err, DFL_ERR_RANGE, label, line, "\"generate\" is outside [0, 1048576]");
        p->has_generate = 1;
        p->generate = (int64_t)g->valuedouble;
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "expect");
    if (!e || cJSON_IsNull(e)) return DFL_OK;
    if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) < 1)
        return fail_line(err, DFL_ERR_FORMAT, label, line, "\"expect\" is not a non-empty list of token ids");
    size_t n = (size_t)cJSON_GetArraySize(e), i = 0;
    if (!(p->expect = dfl__alloc_array(n, sizeof *p->expect)))
        return fail_line(err, DFL_ERR_NOMEM, label, line, "out of memory");
    for (const cJSON *v = e->child; v; v = v->next, i++) {
        if (!is_int(v) || v->valuedouble < 0 || v->valuedouble > INT32_MAX) {
            free(p->expect);
            p->expect = NULL;
            return fail_line(err, is_int(v) ? DFL_ERR_RANGE : DFL_ERR_FORMAT, label, line,
                             "\"expect\" holds something other than a token id");
        }
        p->expect[i] = (int32_t)v->valuedouble;
    }
    p->n_expect = n;
    return DFL_OK;
}

int dfl__prompt_json_generate(cJSON *o, const dfl_prompt *p)
{
    if (p->has_generate && !cJSON_AddNumberToObject(o, "generate", (double)p->generate)) return 0;
    if (!p->expect) return 1;
    cJSON *arr = cJSON_AddArrayToObject(o, "expect");
    for (size_t i = 0; arr && i < p->n_expect; i++) {
        cJSON *v = cJSON_CreateNumber((double)p->expect[i]);
        if (!v) return 0;
        cJSON_AddItemToArray(arr, v);
    }
    return arr != NULL;
}
