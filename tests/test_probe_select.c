/* test_probe_select.c — lib/analysis/probe_select.c: the `--rows` rule names, the analysis
 * rows of each rule against a brute-force reading of their definitions (docs/format.md)
 * over random prompts, and the `--maps` selection parser: every form it accepts and
 * every error it returns (with the selection left empty and safe to free). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "analysis/probe.h"

/* ------------------------------------------------------------- rows rule */

static void test_rows_rule_names(void **state)
{
    (void)state;
    static const char *const names[4] = {"last", "query", "target", "all"};
    for (int r = 0; r < 4; r++) {
        dfl_rows_rule got = DFL_ROWS_ALL;
        dfl_error err = {DFL_OK, ""};
        assert_string_equal(dfl_rows_rule_name((dfl_rows_rule)r), names[r]);
        assert_int_equal(dfl_rows_rule_parse(names[r], &got, &err), DFL_OK);
        assert_int_equal(got, r);
    }
    assert_string_equal(dfl_rows_rule_name((dfl_rows_rule)9), "?");
    static const char *const bad[] = {"", "Last", "first", "last ", "all,query"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dfl_rows_rule got = DFL_ROWS_QUERY;
        dfl_error err = {DFL_OK, ""};
        assert_int_equal(dfl_rows_rule_parse(bad[i], &got, &err), DFL_ERR_USAGE);
        assert_int_equal(got, DFL_ROWS_QUERY); /* untouched */
        assert_non_null(strstr(err.msg, "is not last, query, target or all"));
    }
}

/* ------------------------------------------------------- analysis rows */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static int64_t urand(int64_t n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (int64_t)(rng % (uint64_t)n);
}

/* The rows of rule r by the definitions, one row at a time: last = the last token of
 * the last-ending query span, else T − 1; query = every row inside a query span; target
 * = every row p − 1 >= 0 whose next token p is a target token; all = every row; an
 * empty set is {T − 1}. */
static size_t reference_rows(const dfl_prompt *p, dfl_rows_rule r, int64_t *rows)
{
    int64_t T = (int64_t)p->n_tokens;
    size_t n = 0;
    if (r == DFL_ROWS_LAST) {
        int64_t best = -1;
        for (size_t i = 0; i < p->n_spans[DFL_SPAN_QUERY]; i++)
            if (p->spans[DFL_SPAN_QUERY][i].end > best + 1) best = p->spans[DFL_SPAN_QUERY][i].end - 1;
        rows[0] = best >= 0 ? best : T - 1;
        return 1;
    }
    for (int64_t t = 0; t < T; t++) {
        int in = r == DFL_ROWS_ALL;
        dfl_span_kind k = r == DFL_ROWS_QUERY ? DFL_SPAN_QUERY : DFL_SPAN_TARGET;
        int64_t pos = r == DFL_ROWS_TARGET ? t + 1 : t; /* the token this row is about */
        for (size_t i = 0; !in && r != DFL_ROWS_ALL && i < p->n_spans[k]; i++)
            in = pos >= p->spans[k][i].start && pos < p->spans[k][i].end;
        if (in) rows[n++] = t;
    }
    if (n == 0) rows[n++] = T - 1;
    return n;
}

static void add_spans(dfl_prompt *p, dfl_span_kind k, size_t n)
{
    p->spans[k] = calloc(n ? n : 1, sizeof *p->spans[k]);
    assert_non_null(p->spans[k]);
    p->n_spans[k] = n;
    for (size_t i = 0; i < n; i++) {
        int64_t a = urand((int64_t)p->n_tokens), b = a + 1 + urand((int64_t)p->n_tokens - a); /* [a, b) inside */
        p->spans[k][i].start = a;
        p->spans[k][i].end = b;
    }
}

static void test_analysis_rows_against_definitions(void **state)
{
    (void)state;
    for (int trial = 0; trial < 400; trial++) {
        dfl_prompt p;
        memset(&p, 0, sizeof p);
        p.n_tokens = (size_t)(1 + urand(40));
        add_spans(&p, DFL_SPAN_QUERY, (size_t)urand(4)); /* spans may overlap; some prompts have none */
        add_spans(&p, DFL_SPAN_TARGET, (size_t)urand(4));
        int64_t got[64], want[64];
        for (int r = DFL_ROWS_LAST; r <= DFL_ROWS_ALL; r++) {
            memset(got, 0xff, sizeof got);
            size_t n = dfl_analysis_rows(&p, (dfl_rows_rule)r, got), m = reference_rows(&p, (dfl_rows_rule)r, want);
            assert_int_equal(n, m);
            for (size_t i = 0; i < n; i++)
                assert_int_equal(got[i], want[i]);
        }
        free(p.spans[DFL_SPAN_QUERY]);
        free(p.spans[DFL_SPAN_TARGET]);
    }
}

static void test_analysis_rows_cases(void **state)
{
    (void)state;
    dfl_span q[2] = {{2, 4}, {6, 9}}, tg[1] = {{0, 2}};
    dfl_prompt p;
    memset(&p, 0, sizeof p);
    p.n_tokens = 10;
    int64_t rows[10];
    /* no spans: every rule but all gives the last row */
    for (int r = DFL_ROWS_LAST; r < DFL_ROWS_ALL; r++) {
        assert_int_equal(dfl_analysis_rows(&p, (dfl_rows_rule)r, rows), 1);
        assert_int_equal(rows[0], 9);
    }
    assert_int_equal(dfl_analysis_rows(&p, DFL_ROWS_ALL, rows), 10);
    p.spans[DFL_SPAN_QUERY] = q, p.n_spans[DFL_SPAN_QUERY] = 2;
    p.spans[DFL_SPAN_TARGET] = tg, p.n_spans[DFL_SPAN_TARGET] = 1;
    assert_int_equal(dfl_analysis_rows(&p, DFL_ROWS_LAST, rows), 1);
    assert_int_equal(rows[0], 8);
    assert_int_equal(dfl_analysis_rows(&p, DFL_ROWS_QUERY, rows), 5);
    assert_int_equal(rows[0], 2), assert_int_equal(rows[2], 6), assert_int_equal(rows[4], 8);
    /* target token 0 has no row before it: only row 0 (predicting token 1) */
    assert_int_equal(dfl_analysis_rows(&p, DFL_ROWS_TARGET, rows), 1);
    assert_int_equal(rows[0], 0);
}

/* ---------------------------------------------------------------- --maps */

static void expect_list(const int64_t *v, size_t n, const int64_t *want, size_t m)
{
    assert_int_equal(n, m);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i], want[i]);
}

static void test_maps_accepted(void **state)
{
    (void)state;
    dfl_map_select s;
    dfl_error err = {DFL_OK, ""};
    assert_int_equal(dfl_map_select_parse("none", &s, &err), DFL_OK);
    assert_int_equal(s.enabled, 0);
    dfl_map_select_free(&s);

    assert_int_equal(dfl_map_select_parse("all", &s, &err), DFL_OK);
    assert_int_equal(s.enabled, 1);
    assert_null(s.layers), assert_null(s.heads), assert_int_equal(s.rows, DFL_MAP_ROWS_ALL);
    dfl_map_select_free(&s);

    /* lists come out sorted and distinct; keys in any order */
    assert_int_equal(dfl_map_select_parse("rows=9,1,1-2;layers=3,0-1,1;heads=2", &s, &err), DFL_OK);
    assert_int_equal(s.enabled, 1);
    expect_list(s.layers, s.n_layers, (const int64_t[]){0, 1, 3}, 3);
    expect_list(s.heads, s.n_heads, (const int64_t[]){2}, 1);
    assert_int_equal(s.rows, DFL_MAP_ROWS_LIST);
    expect_list(s.row_list, s.n_rows, (const int64_t[]){1, 2, 9}, 3);
    dfl_map_select_free(&s);
    assert_null(s.layers); /* freed and zeroed: a second free is harmless */
    dfl_map_select_free(&s);

    /* each key optional, "all" as a value */
    assert_int_equal(dfl_map_select_parse("heads=all;rows=analysis", &s, &err), DFL_OK);
    assert_int_equal(s.enabled, 1);
    assert_null(s.layers), assert_null(s.heads);
    assert_int_equal(s.rows, DFL_MAP_ROWS_ANALYSIS);
    dfl_map_select_free(&s);
    assert_int_equal(dfl_map_select_parse("layers=2", &s, &err), DFL_OK);
    expect_list(s.layers, s.n_layers, (const int64_t[]){2}, 1);
    assert_null(s.heads), assert_int_equal(s.rows, DFL_MAP_ROWS_ALL);
    dfl_map_select_free(&s);
    dfl_map_select_free(NULL);
}

static void test_maps_errors(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"layers", "is not key=value"},
        {"0,1", "is not key=value"},
        {"lay=1", "unknown key 'lay'"},
        {"LAYERS=1", "unknown key 'LAYERS'"},
        {"=1", "unknown key ''"},
        {"layers=1;layers=2", "'layers' given twice"},
        {"rows=analysis;rows=all", "'rows' given twice"},
        {"layers=a", "--maps layers"},
        {"heads=-1", "--maps heads"},
        {"rows=3-1", "--maps rows"},
        {"layers=", "--maps layers"},
        {"layers=1,,2", "--maps layers"},
        {"heads=1 ", "--maps heads"},
        {"", "an empty item"},
        {";", "an empty item"},
        {"layers=1;", "an empty item"},
        {";layers=1", "an empty item"},
        {"layers=1;;heads=0", "an empty item"},
        {"None", "is not key=value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dfl_map_select s;
        memset(&s, 0x5a, sizeof s);
        dfl_error err = {DFL_OK, ""};
        dfl_status st = dfl_map_select_parse(bad[i].spec, &s, &err);
        if (st != DFL_ERR_USAGE) fail_msg("'%s': status %d, not DFL_ERR_USAGE", bad[i].spec, (int)st);
        if (!strstr(err.msg, bad[i].msg)) fail_msg("'%s': message '%s' lacks '%s'", bad[i].spec, err.msg, bad[i].msg);
        /* nothing left allocated, nothing enabled */
        assert_int_equal(s.enabled, 0);
        assert_null(s.layers), assert_null(s.heads), assert_null(s.row_list);
        dfl_map_select_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_rule_names),     cmocka_unit_test(test_analysis_rows_against_definitions),
        cmocka_unit_test(test_analysis_rows_cases), cmocka_unit_test(test_maps_accepted),
        cmocka_unit_test(test_maps_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
