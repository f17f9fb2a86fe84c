/* probe_select.c — analysis-row rules and the `--maps` selection syntax. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "analysis/probe.h"

/* -------------------------------------------------------- analysis rows */

const char *dfl_rows_rule_name(dfl_rows_rule r)
{
    switch (r) {
    case DFL_ROWS_LAST: return "last";
    case DFL_ROWS_QUERY: return "query";
    case DFL_ROWS_TARGET: return "target";
    case DFL_ROWS_ALL: return "all";
    }
    return "?";
}

dfl_status dfl_rows_rule_parse(const char *text, dfl_rows_rule *out, dfl_error *err)
{
    for (int r = DFL_ROWS_LAST; r <= DFL_ROWS_ALL; r++)
        if (!strcmp(text, dfl_rows_rule_name((dfl_rows_rule)r))) {
            *out = (dfl_rows_rule)r;
            return DFL_OK;
        }
    return dfl__fail(err, DFL_ERR_USAGE, "--rows: '%s' is not last, query, target or all", text);
}

size_t dfl_analysis_rows(const dfl_prompt *p, dfl_rows_rule rule, int64_t *rows)
{
    int64_t T = (int64_t)p->n_tokens;
    size_t n = 0;
    if (rule == DFL_ROWS_ALL) {
        for (int64_t t = 0; t < T; t++)
            rows[n++] = t;
        return n;
    }
    if (rule == DFL_ROWS_LAST) {
        int64_t last = -1;
        for (size_t i = 0; i < p->n_spans[DFL_SPAN_QUERY]; i++)
            if (p->spans[DFL_SPAN_QUERY][i].end - 1 > last) last = p->spans[DFL_SPAN_QUERY][i].end - 1;
        rows[0] = last >= 0 ? last : T - 1;
        return 1;
    }
    /* query / target: mark rows, then collect in order (spans may overlap) */
    dfl_span_kind kind = rule == DFL_ROWS_QUERY ? DFL_SPAN_QUERY : DFL_SPAN_TARGET;
    int shift = rule == DFL_ROWS_TARGET ? 1 : 0; /* the row before a target token predicts it */
    for (int64_t t = 0; t < T; t++)
        rows[t] = 0;
    for (size_t i = 0; i < p->n_spans[kind]; i++)
        for (int64_t t = p->spans[kind][i].start; t < p->spans[kind][i].end; t++)
            if (t - shift >= 0) rows[t - shift] = 1;
    for (int64_t t = 0; t < T; t++)
        if (rows[t]) rows[n++] = t;
    if (n == 0) rows[n++] = T - 1;
    return n;
}

/* -------------------------------------------------------- map selection */

/* "0,3-5,9" → sorted distinct list, named "--maps KEY" in messages. */
static dfl_status parse_list(const char *key, const char *text, int64_t **out, size_t *n, dfl_error *err)
{
    char flag[48];
    snprintf(flag, sizeof flag, "--maps %s", key);
    return dfl_cli_index_list(flag, text, out, n, err);
}

void dfl_map_select_free(dfl_map_select *s)
{
    if (!s) return;
    free(s->layers), free(s->heads), free(s->row_list);
    memset(s, 0, sizeof *s);
}

dfl_status dfl_map_select_parse(const char *spec, dfl_map_select *out, dfl_error *err)
{
    memset(out, 0, sizeof *out);
    if (!strcmp(spec, "none")) return DFL_OK;
    out->enabled = 1;
    if (!strcmp(spec, "all")) return DFL_OK;
    char *copy = strdup(spec);
    if (!copy) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    dfl_status s = DFL_OK;
    int seen[3] = {0, 0, 0};
    for (char *item = copy, *next; item && !s; item = next) {
        /* items are separated by single ';': an empty one (";;", a leading or trailing ';',
         * an empty spec) is a mistake, as an empty item of a list is */
        if ((next = strchr(item, ';'))) *next++ = '\0';
        if (!*item) {
            s = dfl__fail(err, DFL_ERR_USAGE, "--maps: an empty item in '%s' (key=value items separated by single ';')",
                          spec);
            break;
        }
        char *eq = strchr(item, '=');
        if (!eq) {
            s = dfl__fail(err, DFL_ERR_USAGE, "--maps: '%s' is not key=value (keys: layers, heads, rows)", item);
            break;
        }
        *eq = '\0';
        const char *val = eq + 1;
        int k = !strcmp(item, "layers") ? 0 : !strcmp(item, "heads") ? 1 : !strcmp(item, "rows") ? 2 : -1;
        if (k < 0) {
            s = dfl__fail(err, DFL_ERR_USAGE, "--maps: unknown key '%s' (layers, heads, rows)", item);
            break;
        }
        if (seen[k]++) {
            s = dfl__fail(err, DFL_ERR_USAGE, "--maps: '%s' given twice", item);
            break;
        }
        if (!strcmp(val, "all")) continue;
        if (k == 2 && !strcmp(val, "analysis")) {
            out->rows = DFL_MAP_ROWS_ANALYSIS;
            continue;
        }
        if (k == 0)
            s = parse_list(item, val, &out->layers, &out->n_layers, err);
        else if (k == 1)
            s = parse_list(item, val, &out->heads, &out->n_heads, err);
        else {
            out->rows = DFL_MAP_ROWS_LIST;
            s = parse_list(item, val, &out->row_list, &out->n_rows, err);
        }
    }
    free(copy);
    if (s) dfl_map_select_free(out);
    return s;
}
