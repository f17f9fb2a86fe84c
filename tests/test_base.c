/* test_base.c — lib/base helpers every layer uses: the one list rule of all flags
 * (split, integer, number and index lists), and the atomic writer (nothing left
 * behind on failure, refusal to overwrite). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/cli.h"
#include "base/strbuf.h"

#define TMPDIR_PREFIX "dfl_base"
#include "tmpdir.h"

/* Inputs every list parser refuses, whatever its items: the empty-item rule. */
static const char *const empty_items[] = {"", ",", ",1", "1,", "1,,2", ",,"};

static void test_split(void **state)
{
    (void)state;
    dfl_error err;
    char **it;
    size_t n;
    assert_int_equal(dfl_cli_split("--labels", "a b,c,,x", 0, &it, &n, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "--labels"));
    assert_int_equal(dfl_cli_split("--labels", "Diff model,b,c", 0, &it, &n, &err), DFL_OK);
    assert_int_equal(n, 3);
    assert_string_equal(it[0], "Diff model"); /* verbatim: spaces in names are kept */
    assert_string_equal(it[1], "b");
    assert_string_equal(it[2], "c");
    free(it);
    assert_int_equal(dfl_cli_split("--labels", "one", 0, &it, &n, &err), DFL_OK);
    assert_int_equal(n, 1);
    assert_string_equal(it[0], "one");
    free(it);
    assert_int_equal(dfl_cli_split("--labels", "a,b,c", 2, &it, &n, &err), DFL_ERR_USAGE);
    assert_null(it);
    for (size_t i = 0; i < sizeof empty_items / sizeof *empty_items; i++) {
        assert_int_equal(dfl_cli_split("--x", empty_items[i], 0, &it, &n, &err), DFL_ERR_USAGE);
        assert_non_null(strstr(err.msg, "empty item"));
    }
}

static void test_int_list(void **state)
{
    (void)state;
    dfl_error err;
    int64_t *v;
    size_t n;
    assert_int_equal(dfl_cli_int_list("--top", "100,1,10,1", 1, 4096, 0, &v, &n, &err), DFL_OK);
    assert_int_equal(n, 4); /* order and repeats kept */
    assert_int_equal(v[0], 100);
    assert_int_equal(v[1], 1);
    assert_int_equal(v[2], 10);
    assert_int_equal(v[3], 1);
    free(v);
    static const char *const bad[] = {"0", "4097", "1,x", "1.5", " 1", "1 ,2", "1,2,3,4,5", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(dfl_cli_int_list("--top", bad[i], 1, 4096, 4, &v, &n, &err), DFL_ERR_USAGE);
        assert_null(v);
        assert_non_null(strstr(err.msg, "--top"));
    }
    for (size_t i = 0; i < sizeof empty_items / sizeof *empty_items; i++)
        assert_int_equal(dfl_cli_int_list("--top", empty_items[i], 1, 4096, 0, &v, &n, &err), DFL_ERR_USAGE);
}

static void test_double_list(void **state)
{
    (void)state;
    dfl_error err;
    double *v;
    size_t n;
    assert_int_equal(dfl_cli_double_list("--depths", "0.5,0,1,0.25", 0, 1, 0, &v, &n, &err), DFL_OK);
    assert_int_equal(n, 4);
    assert_true(v[0] == 0.5 && v[1] == 0 && v[2] == 1 && v[3] == 0.25);
    free(v);
    static const char *const bad[] = {"1.5", "-0.1", "nan", "inf", "0.5x", " 0.5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(dfl_cli_double_list("--depths", bad[i], 0, 1, 0, &v, &n, &err), DFL_ERR_USAGE);
    for (size_t i = 0; i < sizeof empty_items / sizeof *empty_items; i++)
        assert_int_equal(dfl_cli_double_list("--depths", empty_items[i], 0, 1, 0, &v, &n, &err), DFL_ERR_USAGE);
}

static void test_index_list(void **state)
{
    (void)state;
    dfl_error err;
    int64_t *v;
    size_t n;
    assert_int_equal(dfl_cli_index_list("--layers", "7,0-2,1", &v, &n, &err), DFL_OK);
    int64_t want[] = {0, 1, 2, 7}; /* sorted, distinct */
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) assert_int_equal(v[i], want[i]);
    free(v);
    static const char *const bad[] = {"-1", "3-1", "1-", "a", "1-2-3", "0 ,1", "0-2000000"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(dfl_cli_index_list("--layers", bad[i], &v, &n, &err), DFL_ERR_USAGE);
    for (size_t i = 0; i < sizeof empty_items / sizeof *empty_items; i++)
        assert_int_equal(dfl_cli_index_list("--layers", empty_items[i], &v, &n, &err), DFL_ERR_USAGE);
}

/* Files in g_dir other than "." and "..". */
static int count_files(void)
{
    DIR *d = opendir(g_dir);
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) k++;
    closedir(d);
    return k;
}

static void read_back(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void test_atomic(void **state)
{
    (void)state;
    dfl_error err;
    char buf[64];
    const char *path = path_of("out.txt");
    assert_int_equal(dfl__atomic_write(path, "first", 5, 0, &err), DFL_OK);
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "first");
    assert_int_equal(count_files(), 1); /* no temporary file left */

    /* refused without overwrite, file unchanged */
    assert_int_equal(dfl__atomic_write(path, "second", 6, 0, &err), DFL_ERR_EXISTS);
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "first");

    /* a writer that fails part-way leaves the old file and nothing else */
    dfl_atomic a;
    assert_int_equal(dfl__atomic_open(&a, path, 1, &err), DFL_OK);
    fputs("half-writ", a.f);
    assert_int_equal(count_files(), 2); /* the temporary file, beside the destination */
    dfl_status s = dfl__atomic_close(&a, DFL_ERR_IO, &err);
    assert_int_equal(s, DFL_ERR_IO);
    assert_int_equal(count_files(), 1);
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "first");

    /* with overwrite the new content replaces it */
    assert_int_equal(dfl__atomic_open(&a, path, 1, &err), DFL_OK);
    fputs("third", a.f);
    assert_int_equal(dfl__atomic_close(&a, DFL_OK, &err), DFL_OK);
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "third");
    assert_int_equal(count_files(), 1);

    /* a folder that does not exist: refused before anything is written */
    path = path_of("missing/out.txt");
    assert_int_equal(dfl__atomic_write(path, "x", 1, 1, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "missing/out.txt"));
}

static void test_strbuf(void **state)
{
    (void)state;
    dfl_strbuf b = {0};
    dfl_strbuf_puts(&b, "");
    assert_non_null(b.p); /* an empty buffer is still a string */
    assert_string_equal(b.p, "");
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int i = 0; i < 100; i++) dfl_strbuf_printf(&b, "%d,", i); /* many growths */
    dfl_strbuf_printf(&b, "[%s]", big);                            /* longer than the stack piece */
    dfl_strbuf_add(&b, "abcdef", 3);
    assert_false(b.oom);
    /* the same text built independently */
    char want[2000];
    size_t k = 0;
    for (int i = 0; i < 100; i++) k += (size_t)sprintf(want + k, "%d,", i);
    k += (size_t)sprintf(want + k, "[%s]abc", big);
    assert_int_equal(b.len, k);
    assert_string_equal(b.p, want);
    /* a size that would wrap latches oom and leaves the contents alone */
    dfl_strbuf_add(&b, "y", SIZE_MAX - 2);
    assert_true(b.oom);
    assert_int_equal(b.len, k);
    dfl_strbuf_puts(&b, "more");
    assert_int_equal(b.len, k);
    dfl_strbuf_free(&b);
    assert_null(b.p);
    assert_false(b.oom);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),        cmocka_unit_test(test_int_list), cmocka_unit_test(test_double_list),
        cmocka_unit_test(test_index_list),   cmocka_unit_test(test_atomic),       cmocka_unit_test(test_strbuf),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
