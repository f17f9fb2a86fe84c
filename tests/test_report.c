/* test_report.c — the report module: building, every format's text, exact numbers in
 * csv/json (read back with strtod), escaping, the sticky error and every error path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/report.h"

/* A report with two tables: numbers of every kind, text that needs quoting, missing cells. */
static dfl_report *sample_report(void)
{
    dfl_report *r;
    dfl_error err;
    dfl_report_table *a, *b;
    assert_int_equal(dfl_report_create("Demo", &r, &err), DFL_OK);
    assert_int_equal(dfl_report_add_meta(r, "dump 1", "x.h5", &err), DFL_OK);
    assert_int_equal(dfl_report_add_note(r, &err, "note %d", 7), DFL_OK);
    assert_int_equal(dfl_report_add_table(r, "t1", "First table", &a, &err), DFL_OK);
    assert_int_equal(dfl_report_add_column(a, "name", DFL_NUM_GENERAL, 4, &err), DFL_OK);
    assert_int_equal(dfl_report_add_column(a, "value", DFL_NUM_AUTO, 4, &err), DFL_OK);
    assert_int_equal(dfl_report_add_column(a, "n", DFL_NUM_GENERAL, 4, &err), DFL_OK);
    assert_int_equal(dfl_report_add_row(a, &err), DFL_OK);
    dfl_report_set_text(a, 0, "plain", &err);
    dfl_report_set_num(a, 1, 0.1, &err);
    dfl_report_set_int(a, 2, -12345678901234LL, &err);
    dfl_report_add_row(a, &err);
    dfl_report_set_text(a, 0, "comma, \"quote\" | pipe", &err);
    dfl_report_set_num(a, 1, NAN, &err);
    dfl_report_set_missing(a, 2, "n/a (K=30)", &err);
    dfl_report_add_row(a, &err);
    dfl_report_set_text(a, 0, "inf", &err);
    dfl_report_set_num(a, 1, INFINITY, &err);
    dfl_report_set_num_fmt(a, 2, 318.04, DFL_NUM_FIXED, 1, &err);
    assert_int_equal(dfl_report_add_table(r, "t2", NULL, &b, &err), DFL_OK);
    dfl_report_add_column(b, "value", DFL_NUM_FIXED, 2, &err);
    dfl_report_add_column(b, "other", DFL_NUM_EXP, 2, &err);
    dfl_report_add_row(b, &err);
    dfl_report_set_num(b, 0, 1.0 / 3.0, &err);
    dfl_report_set_num(b, 1, 6.02214076e23, &err);
    assert_int_equal(dfl_report_status(r, &err), DFL_OK);
    return r;
}

/* Column in its line just past the first occurrence of needle. */
static long col_end(const char *text, const char *needle)
{
    const char *p = strstr(text, needle);
    assert_non_null(p);
    const char *line = p;
    while (line > text && line[-1] != '\n')
        line--;
    return (long)(p - line) + (long)strlen(needle);
}

static char *render(dfl_report *r, dfl_report_format f)
{
    char *s;
    size_t n;
    dfl_error err;
    assert_int_equal(dfl_report_render(r, f, &s, &n, &err), DFL_OK);
    assert_int_equal(strlen(s), n);
    return s;
}

static void test_format_names(void **state)
{
    (void)state;
    dfl_report_format f;
    dfl_error err;
    const char *names[] = {"table", "csv", "json", "markdown"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(dfl_report_format_parse(names[i], &f, &err), DFL_OK);
        assert_int_equal(f, i);
        assert_string_equal(dfl_report_format_name(f), names[i]);
    }
    assert_int_equal(dfl_report_format_parse("md", &f, &err), DFL_OK);
    assert_int_equal(f, DFL_REPORT_MARKDOWN);
    assert_int_equal(dfl_report_format_parse("xml", &f, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "'xml'"));
    assert_non_null(strstr(err.msg, "markdown"));
    assert_string_equal(dfl_report_format_name((dfl_report_format)9), "?");
}

static void test_exact_numbers(void **state)
{
    (void)state;
    char buf[64];
    double vals[] = {0.1, 1.0 / 3.0, 318.0, -2.5e-300, 6.02214076e23, 0, -0.0, 5e-324, 1.7976931348623157e308};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        dfl_report_fmt_exact(vals[i], buf, sizeof buf);
        assert_true(strtod(buf, NULL) == vals[i]);
    }
    assert_string_equal(dfl_report_fmt_exact(0.1, buf, sizeof buf), "0.1");
    assert_string_equal(dfl_report_fmt_exact(318, buf, sizeof buf), "318");
    assert_string_equal(dfl_report_fmt_exact(NAN, buf, sizeof buf), "nan");
    assert_string_equal(dfl_report_fmt_exact(-INFINITY, buf, sizeof buf), "-inf");
}

static void test_table_and_markdown(void **state)
{
    (void)state;
    dfl_report *r = sample_report();
    char *t = render(r, DFL_REPORT_TABLE);
    assert_non_null(strstr(t, "Demo\n  dump 1: x.h5\n"));
    assert_non_null(strstr(t, "First table\n"));
    assert_non_null(strstr(t, "0.1000")); /* AUTO, 4 significant digits */
    assert_non_null(strstr(t, "n/a (K=30)"));
    assert_non_null(strstr(t, "318.0"));
    assert_non_null(strstr(t, "-12345678901234"));
    assert_non_null(strstr(t, "0.33"));
    assert_non_null(strstr(t, "6.02e+23"));
    assert_non_null(strstr(t, "note 7"));
    /* numbers right-aligned: "nan" ends where "0.1000" ends */
    assert_int_equal(col_end(t, "0.1000"), col_end(t, " nan"));
    free(t);
    char *m = render(r, DFL_REPORT_MARKDOWN);
    assert_non_null(strstr(m, "## Demo"));
    assert_non_null(strstr(m, "### First table"));
    assert_non_null(strstr(m, "| name "));
    assert_non_null(strstr(m, "comma, \"quote\" \\| pipe")); /* pipes escaped */
    assert_non_null(strstr(m, "-:|"));                       /* numeric columns right-aligned */
    assert_non_null(strstr(m, "### t2"));                    /* no title: the name */
    /* every table line has the same number of unescaped pipes */
    free(m);
    dfl_report_destroy(r);
}

static void test_csv(void **state)
{
    (void)state;
    dfl_report *r = sample_report();
    char *c = render(r, DFL_REPORT_CSV);
    /* one header: table, then the union of the columns */
    assert_true(!strncmp(c, "table,name,value,n,other\r\n", 26));
    assert_non_null(strstr(c, "t1,plain,0.1,-12345678901234,\r\n"));
    assert_non_null(strstr(c, "t1,\"comma, \"\"quote\"\" | pipe\",,,\r\n")); /* NaN and missing: empty */
    assert_non_null(strstr(c, "t1,inf,inf,318.04,\r\n"));                    /* full value, not 318.0 */
    assert_non_null(strstr(c, "t2,,0.3333333333333333,,6.02214076e+23\r\n"));
    assert_null(strstr(c, "Demo"));
    assert_null(strstr(c, "note"));
    free(c);
    dfl_report_destroy(r);
    /* one table: no table column */
    dfl_report *s;
    dfl_report_table *t;
    dfl_error err;
    dfl_report_create(NULL, &s, &err);
    dfl_report_add_table(s, "only", NULL, &t, &err);
    dfl_report_add_column(t, "a", DFL_NUM_GENERAL, 3, &err);
    dfl_report_add_row(t, &err);
    dfl_report_set_num(t, 0, 2.5, &err);
    c = render(s, DFL_REPORT_CSV);
    assert_string_equal(c, "a\r\n2.5\r\n");
    free(c);
    dfl_report_destroy(s);
}

static void test_json(void **state)
{
    (void)state;
    dfl_report *r = sample_report();
    char *j = render(r, DFL_REPORT_JSON);
    assert_non_null(strstr(j, "\"title\": \"Demo\""));
    assert_non_null(strstr(j, "\"meta\": {\"dump 1\": \"x.h5\"}"));
    assert_non_null(strstr(j, "\"notes\": [\"note 7\"]"));
    assert_non_null(strstr(j, "\"columns\": [\"name\", \"value\", \"n\"]"));
    assert_non_null(strstr(j, "[\"plain\", 0.1, -12345678901234]"));
    assert_non_null(strstr(j, "[\"comma, \\\"quote\\\" | pipe\", null, null]"));
    assert_non_null(strstr(j, "[\"inf\", null, 318.04]"));
    assert_non_null(strstr(j, "[0.3333333333333333, 6.02214076e+23]"));
    assert_null(strstr(j, "nan"));
    free(j);
    dfl_report_destroy(r);
    /* an empty report is valid JSON too */
    dfl_report *e;
    dfl_error err;
    dfl_report_create(NULL, &e, &err);
    j = render(e, DFL_REPORT_JSON);
    assert_string_equal(j, "{\n  \"title\": null,\n  \"meta\": {},\n  \"notes\": [],\n  \"tables\": []\n}\n");
    free(j);
    char *s = render(e, DFL_REPORT_TABLE);
    assert_string_equal(s, "");
    free(s);
    dfl_report_destroy(e);
}

static void test_reading_back(void **state)
{
    (void)state;
    dfl_report *r = sample_report();
    assert_int_equal(dfl_report_table_count(r), 2);
    dfl_report_table *t = dfl_report_table_find(r, "t1");
    assert_ptr_equal(t, dfl_report_table_at(r, 0));
    assert_null(dfl_report_table_find(r, "zz"));
    assert_null(dfl_report_table_at(r, 2));
    assert_string_equal(dfl_report_table_name(t), "t1");
    assert_int_equal(dfl_report_rows(t), 3);
    assert_int_equal(dfl_report_columns(t), 3);
    assert_int_equal(dfl_report_column_find(t, "value"), 1);
    assert_int_equal(dfl_report_column_find(t, "nope"), -1);
    assert_string_equal(dfl_report_column_name(t, 2), "n");
    assert_null(dfl_report_column_name(t, 3));
    assert_int_equal(dfl_report_cell_kind_at(t, 0, 0), DFL_CELL_TEXT);
    assert_int_equal(dfl_report_cell_kind_at(t, 0, 1), DFL_CELL_NUM);
    assert_int_equal(dfl_report_cell_kind_at(t, 0, 2), DFL_CELL_INT);
    assert_int_equal(dfl_report_cell_kind_at(t, 1, 2), DFL_CELL_MISSING);
    assert_int_equal(dfl_report_cell_kind_at(t, 9, 9), DFL_CELL_MISSING);
    assert_true(dfl_report_cell_num(t, 0, 1) == 0.1);
    assert_true(dfl_report_cell_num(t, 0, 2) == -12345678901234.0);
    assert_true(isnan(dfl_report_cell_num(t, 0, 0)));
    assert_string_equal(dfl_report_cell_text(t, 0, 0), "plain");
    assert_null(dfl_report_cell_text(t, 0, 1));
    dfl_report_destroy(r);
}

static void test_errors_are_sticky(void **state)
{
    (void)state;
    dfl_report *r;
    dfl_report_table *t;
    dfl_error err;
    char *s;
    dfl_report_create("x", &r, &err);
    assert_int_equal(dfl_report_add_table(r, "bad name", NULL, &t, &err), DFL_ERR_USAGE);
    assert_null(t);
    assert_non_null(strstr(err.msg, "bad name"));
    /* the first failure is kept and refuses rendering */
    assert_int_equal(dfl_report_status(r, &err), DFL_ERR_USAGE);
    assert_int_equal(dfl_report_render(r, DFL_REPORT_CSV, &s, NULL, &err), DFL_ERR_USAGE);
    assert_null(s);
    dfl_report_destroy(r);

    dfl_report_create("x", &r, &err);
    assert_int_equal(dfl_report_add_table(r, "", NULL, NULL, &err), DFL_ERR_USAGE);
    dfl_report_destroy(r);

    dfl_report_create("x", &r, &err);
    dfl_report_add_table(r, "a", NULL, &t, &err);
    assert_int_equal(dfl_report_add_table(r, "a", NULL, NULL, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "exists"));
    dfl_report_destroy(r);

    dfl_report_create("x", &r, &err);
    dfl_report_add_table(r, "a", NULL, &t, &err);
    assert_int_equal(dfl_report_add_row(t, &err), DFL_ERR_USAGE); /* no columns */
    dfl_report_destroy(r);

    dfl_report_create("x", &r, &err);
    dfl_report_add_table(r, "a", NULL, &t, &err);
    assert_int_equal(dfl_report_add_column(t, "table", DFL_NUM_AUTO, 3, &err), DFL_ERR_USAGE); /* reserved */
    assert_int_equal(dfl_report_add_column(t, "", DFL_NUM_AUTO, 3, &err), DFL_ERR_USAGE);
    dfl_report_destroy(r);

    dfl_report_create("x", &r, &err);
    dfl_report_add_table(r, "a", NULL, &t, &err);
    assert_int_equal(dfl_report_add_column(t, "c", DFL_NUM_AUTO, 18, &err), DFL_ERR_USAGE); /* precision */
    dfl_report_destroy(r);

    dfl_report_create("x", &r, &err);
    dfl_report_add_table(r, "a", NULL, &t, &err);
    assert_int_equal(dfl_report_add_column(t, "c", DFL_NUM_AUTO, 3, &err), DFL_OK);
    assert_int_equal(dfl_report_add_column(t, "c", DFL_NUM_AUTO, 3, &err), DFL_ERR_USAGE); /* duplicate */
    dfl_report_destroy(r);

    dfl_report_create("x", &r, &err);
    dfl_report_add_table(r, "a", NULL, &t, &err);
    dfl_report_add_column(t, "c", DFL_NUM_AUTO, 3, &err);
    assert_int_equal(dfl_report_set_num(t, 0, 1, &err), DFL_ERR_USAGE); /* before a row */
    dfl_report_destroy(r);

    dfl_report_create("x", &r, &err);
    dfl_report_add_table(r, "a", NULL, &t, &err);
    dfl_report_add_column(t, "c", DFL_NUM_AUTO, 3, &err);
    dfl_report_add_row(t, &err);
    assert_int_equal(dfl_report_set_text(t, 1, "x", &err), DFL_ERR_USAGE); /* column out of range */
    assert_non_null(strstr(err.msg, "column 1"));
    assert_int_equal(dfl_report_add_column(t, "d", DFL_NUM_AUTO, 3, &err), DFL_ERR_USAGE); /* after a row */
    assert_int_equal(dfl_report_set_num_fmt(t, 0, 1, DFL_NUM_FIXED, -1, &err), DFL_ERR_USAGE);
    dfl_report_destroy(r);

    dfl_report_destroy(NULL);
}

static void test_write_to_file(void **state)
{
    (void)state;
    dfl_report *r = sample_report();
    dfl_error err;
    char *want = render(r, DFL_REPORT_MARKDOWN);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(dfl_report_write(r, DFL_REPORT_MARKDOWN, f, &err), DFL_OK);
    long n = ftell(f);
    assert_int_equal(n, (long)strlen(want));
    fclose(f);
    /* a stream that cannot be written: DFL_ERR_IO */
    f = fopen("/dev/null", "r");
    assert_non_null(f);
    assert_int_equal(dfl_report_write(r, DFL_REPORT_MARKDOWN, f, &err), DFL_ERR_IO);
    fclose(f);
    char *bad;
    assert_int_equal(dfl_report_render(r, (dfl_report_format)7, &bad, NULL, &err), DFL_ERR_USAGE);
    assert_null(bad);
    free(want);
    dfl_report_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_names),
        cmocka_unit_test(test_exact_numbers),
        cmocka_unit_test(test_table_and_markdown),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_reading_back),
        cmocka_unit_test(test_errors_are_sticky),
        cmocka_unit_test(test_write_to_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
