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
#include "base/status.h"
#include "base/strbuf.h"
#include "base/utf8.h"

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
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i], want[i]);
    free(v);
    static const char *const bad[] = {"-1", "3-1", "1-", "a", "1-2-3", "0 ,1", "0-2000000"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(dfl_cli_index_list("--layers", bad[i], &v, &n, &err), DFL_ERR_USAGE);
    for (size_t i = 0; i < sizeof empty_items / sizeof *empty_items; i++)
        assert_int_equal(dfl_cli_index_list("--layers", empty_items[i], &v, &n, &err), DFL_ERR_USAGE);
}

/* Files of test_atomic's own in g_dir: "out.txt" and its temporaries ".out.txt.tmp.*".
 * Only those: other tests of this binary write beside them, in any order. */
static int count_files(void)
{
    DIR *d = opendir(g_dir);
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strcmp(e->d_name, "out.txt") || !strncmp(e->d_name, ".out.txt.tmp.", 13)) k++;
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
    for (int i = 0; i < 100; i++)
        dfl_strbuf_printf(&b, "%d,", i); /* many growths */
    dfl_strbuf_printf(&b, "[%s]", big);  /* longer than the stack piece */
    dfl_strbuf_add(&b, "abcdef", 3);
    assert_false(b.oom);
    /* the same text built independently */
    char want[2000];
    size_t k = 0;
    for (int i = 0; i < 100; i++)
        k += (size_t)sprintf(want + k, "%d,", i);
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

/* RFC 3629 section 4's table of well-formed sequences, byte by byte (the reference):
 * the length of the sequence s[0..n) starts with, 0 when it is ill-formed there. */
static size_t rfc3629_len(const unsigned char *s, size_t n)
{
    static const struct {
        unsigned char lo[4], hi[4];
        size_t len;
    } rows[] = {
        {{0x00}, {0x7F}, 1},
        {{0xC2, 0x80}, {0xDF, 0xBF}, 2},
        {{0xE0, 0xA0, 0x80}, {0xE0, 0xBF, 0xBF}, 3},
        {{0xE1, 0x80, 0x80}, {0xEC, 0xBF, 0xBF}, 3},
        {{0xED, 0x80, 0x80}, {0xED, 0x9F, 0xBF}, 3},
        {{0xEE, 0x80, 0x80}, {0xEF, 0xBF, 0xBF}, 3},
        {{0xF0, 0x90, 0x80, 0x80}, {0xF0, 0xBF, 0xBF, 0xBF}, 4},
        {{0xF1, 0x80, 0x80, 0x80}, {0xF3, 0xBF, 0xBF, 0xBF}, 4},
        {{0xF4, 0x80, 0x80, 0x80}, {0xF4, 0x8F, 0xBF, 0xBF}, 4},
    };
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        size_t k = 0;
        while (k < rows[r].len && k < n && s[k] >= rows[r].lo[k] && s[k] <= rows[r].hi[k])
            k++;
        if (k == rows[r].len) return k;
    }
    return 0;
}

static size_t ref_check(const unsigned char *s, size_t n)
{
    size_t i = 0, k;
    while (i < n && (k = rfc3629_len(s + i, n - i)))
        i += k;
    return i;
}

/* The validator against the table on every sequence of up to three bytes, every
 * four-byte one whose last two bytes are among the boundary values, each behind ASCII
 * runs of 0..9 bytes (the fast path reads eight at a time) and before a tail. */
static void test_utf8(void **state)
{
    (void)state;
    static const unsigned char edge[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xF4, 0xFF};
    unsigned char buf[32];
    size_t checked = 0;
    for (uint32_t v = 0; v < (1u << 24); v++) {
        size_t pre = v % 10, n = pre;
        memset(buf, 'a', pre);
        buf[n++] = (unsigned char)(v >> 16);
        if (v >> 16 >= 0x80) buf[n++] = (unsigned char)(v >> 8);
        if (v >> 16 >= 0xE0)
            buf[n++] = (unsigned char)v;
        else if ((v & 0xFF) != 0)
            continue; /* shorter sequences: once each */
        if (v >> 16 < 0x80 && ((v >> 8) & 0xFF) != 0) continue;
        size_t got = dfl__utf8_check((const char *)buf, n), want = ref_check(buf, n);
        if (got != want) fail_msg("bytes %06x after %zu ASCII: %zu, the table says %zu", (unsigned)v, pre, got, want);
        checked++;
        if (v >> 16 >= 0xF0) /* four bytes: every boundary value in the last place */
            for (size_t e = 0; e < sizeof edge; e++) {
                buf[n] = edge[e];
                buf[n + 1] = 'z';
                got = dfl__utf8_check((const char *)buf, n + 2);
                want = ref_check(buf, n + 2);
                if (got != want) fail_msg("bytes %06x%02x: %zu, the table says %zu", (unsigned)v, edge[e], got, want);
                checked++;
            }
    }
    assert_true(checked > 1000000);
    /* offsets as Python's bytes.decode("utf-8") reports them (UnicodeDecodeError.start) */
    assert_int_equal(dfl__utf8_check("ab\xed\xa0\x80", 5), 2);               /* surrogate U+D800 */
    assert_int_equal(dfl__utf8_check("\xc3\xa9 \xf0\x9f\x98\x80", 7), 7);    /* é 😀 */
    assert_int_equal(dfl__utf8_check("abcdefghij\xf4\x90\x80\x80", 14), 10); /* above U+10FFFF */
}

/* Whole-file reads: a bound, regular files only (in g_dir, beside test_atomic's files:
 * it runs first on purpose, and test_atomic counts only its own). */
static void test_read_file(void **state)
{
    (void)state;
    dfl_error err;
    char *buf = NULL;
    size_t len = 0;
    const char *path = path_of("ten.txt");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("0123456789", f);
    fclose(f);
    assert_int_equal(dfl__read_file_max(path, 10, "a test file", &buf, &len, &err), DFL_OK); /* exactly the bound */
    assert_int_equal(len, 10);
    assert_string_equal(buf, "0123456789");
    free(buf);
    assert_int_equal(dfl__read_file_max(path, 9, "a test file", &buf, &len, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "ten.txt: more than 9 bytes, the bound for a test file"));
    assert_int_equal(dfl__read_file_max(path, 0, "a test file", &buf, &len, &err), DFL_ERR_IO);
    assert_int_equal(dfl__read_file(path, &buf, &len, &err), DFL_OK);
    assert_int_equal(len, 10);
    free(buf);
    /* a file that the size does not tell (/proc): read to its end all the same */
    assert_int_equal(dfl__read_file_max("/proc/self/status", 1 << 20, "a test file", &buf, &len, &err), DFL_OK);
    assert_true(len > 0 && strstr(buf, "Name:"));
    free(buf);
    assert_int_equal(dfl__read_file_max("/proc/self/status", 5, "a test file", &buf, &len, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "more than 5 bytes"));
    /* not regular files: at once, naming what they are (a FIFO without a writer too) */
    const char *fifo = path_of("fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(dfl__read_file(fifo, &buf, &len, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "fifo: not a regular file (a FIFO), cannot be read as an input file"));
    assert_int_equal(dfl__read_file("/dev/zero", &buf, &len, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "/dev/zero: not a regular file (a character device)"));
    assert_int_equal(dfl__read_file(g_dir, &buf, &len, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "not a regular file (a folder)"));
    assert_int_equal(dfl__read_file(path_of("missing.txt"), &buf, &len, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "missing.txt: No such file or directory"));
    assert_int_equal(dfl__read_file_max(path, (size_t)3 << 30, "a test file", &buf, &len, &err), DFL_OK);
    free(buf);
    /* streams: the bound, not the end, stops /dev/zero */
    f = fopen("/dev/zero", "rb");
    assert_non_null(f);
    assert_int_equal(dfl__read_stream(f, "zeros", 100000, "one text", &buf, &len, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "zeros: more than 100000 bytes, the bound for one text"));
    fclose(f);
    f = fopen(path, "rb");
    assert_int_equal(dfl__read_stream(f, "ten", 10, "one text", &buf, &len, &err), DFL_OK);
    assert_int_equal(len, 10);
    assert_string_equal(buf, "0123456789");
    free(buf);
    fclose(f);
}

/* Suggestions: distances worked out by hand (a swap of neighbours counts one). */
static void test_nearest_name(void **state)
{
    (void)state;
    static const char *const keys[] = {"tokens",     "id",     "text", "answer", "query",
                                       "distractor", "target", "bos",  "depth",  NULL};
    assert_string_equal(dfl__nearest_name("anwser", keys), "answer");  /* one swap */
    assert_string_equal(dfl__nearest_name("answers", keys), "answer"); /* one insertion */
    assert_string_equal(dfl__nearest_name("ansr", keys), "answer");    /* two deletions */
    assert_string_equal(dfl__nearest_name("tokns", keys), "tokens");
    assert_string_equal(dfl__nearest_name("distracter", keys), "distractor");
    assert_string_equal(dfl__nearest_name("tex", keys), "text");
    assert_string_equal(dfl__nearest_name("ix", keys), "id");         /* 1 < length 2 */
    assert_null(dfl__nearest_name("x", keys));                        /* 2 edits of a 1-letter word: no hint */
    assert_string_equal(dfl__nearest_name("awsner", keys), "answer"); /* two substitutions */
    assert_null(dfl__nearest_name("axyzer", keys));                   /* three */
    assert_null(dfl__nearest_name("extra", keys));
    assert_null(dfl__nearest_name("", keys));
    assert_null(dfl__nearest_name("ca", (const char *const[]){"abc", NULL})); /* 3 under this distance */
    assert_string_equal(dfl__nearest_name("bas", keys), "bos");               /* ties: the earlier name */
    char longw[100];
    memset(longw, 'a', 99);
    longw[99] = '\0';
    assert_null(dfl__nearest_name(longw, keys));
}

/* The name-table lookup behind every enum's _parse: exact matches only. */
static void test_name_index(void **state)
{
    (void)state;
    static const char *const names[] = {"mean", "max", "median"};
    assert_int_equal(dfl__name_index("mean", names, 3), 0);
    assert_int_equal(dfl__name_index("median", names, 3), 2);
    assert_int_equal(dfl__name_index("median", names, 2), -1); /* only the first n are names */
    assert_int_equal(dfl__name_index("me", names, 3), -1);     /* no prefixes */
    assert_int_equal(dfl__name_index("Mean", names, 3), -1);
    assert_int_equal(dfl__name_index("", names, 3), -1);
}

/* Append-growth: first, then doubling, every element kept; an overflowing size refused with
 * the array and its capacity as they were. */
static void test_grow_array(void **state)
{
    (void)state;
    int64_t *v = NULL;
    size_t cap = 0, n = 0;
    for (int64_t i = 0; i < 1000; i++) {
        if (n == cap) {
            size_t old = cap;
            int64_t *nv = dfl__grow_array(v, &cap, sizeof *v, 16);
            assert_non_null(nv);
            assert_int_equal(cap, old ? 2 * old : 16);
            v = nv;
        }
        v[n++] = i * i;
    }
    assert_int_equal(cap, 1024);
    for (int64_t i = 0; i < 1000; i++)
        assert_int_equal(v[i], i * i);
    size_t big = SIZE_MAX / 4 + 1;
    assert_null(dfl__grow_array(v, &big, sizeof *v, 16)); /* 2 * big elements of 8 bytes overflow */
    assert_int_equal(big, SIZE_MAX / 4 + 1);
    assert_int_equal(v[999], 999 * 999); /* still the caller's */
    size_t huge = SIZE_MAX / 2 + 1;
    assert_null(dfl__grow_array(v, &huge, 1, 16)); /* the doubling itself overflows */
    assert_int_equal(huge, SIZE_MAX / 2 + 1);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),      cmocka_unit_test(test_int_list),   cmocka_unit_test(test_double_list),
        cmocka_unit_test(test_index_list), cmocka_unit_test(test_read_file),  cmocka_unit_test(test_atomic),
        cmocka_unit_test(test_strbuf),     cmocka_unit_test(test_utf8),       cmocka_unit_test(test_nearest_name),
        cmocka_unit_test(test_name_index), cmocka_unit_test(test_grow_array),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
