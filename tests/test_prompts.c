/* test_prompts.c — the prompt JSONL reader, segments, vocabulary check and writer.
 * Every file the suite reads is written by it into a fresh mkdtemp folder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text/prompts.h"

/* ------------------------------------------------------------------------ */
/* Fixture: a temporary folder                                              */
/* ------------------------------------------------------------------------ */

#define TMPDIR_PREFIX "dfl_prompts"
#include "tmpdir.h"

static const char *write_bytes(const char *name, const char *data, size_t n)
{
    const char *p = path_of(name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return p;
}

static const char *write_text(const char *name, const char *text)
{
    return write_bytes(name, text, strlen(text));
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 16);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Number of entries in the folder whose name contains ".tmp." (leftover temporaries). */
static int count_tmp_files(void)
{
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static dfl_status parse_str(const char *json, dfl_prompt *p, dfl_error *err)
{
    return dfl_prompt_parse(json, strlen(json), "prompts.jsonl", 12, p, err);
}

static int is_zeroed(const dfl_prompt *p)
{
    static const dfl_prompt zero;
    return memcmp(p, &zero, sizeof zero) == 0;
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */
/* ------------------------------------------------------------------------ */

/* A full-featured prompt line (every key, in the order of docs/format.md), with 260
 * tokens so that its spans (up to 257) are in range. */
static char *design_example_line(void)
{
    size_t cap = 16384, n = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    n += (size_t)snprintf(s + n, cap - n, "{\"id\": \"d50-s3\", \"tokens\": [0, 17, 93");
    for (int i = 3; i < 260; i++)
        n += (size_t)snprintf(s + n, cap - n, ", %d", 100 + i);
    n += (size_t)snprintf(s + n, cap - n, "], \"text\": [\"<bos>\", \"The\", \" city\"");
    for (int i = 3; i < 260; i++)
        n += (size_t)snprintf(s + n, cap - n, ", \"w%d\"", i);
    n += (size_t)snprintf(s + n, cap - n,
                          "],\n \"answer\": [[120, 124]], \"query\": [[250, 253]], \"distractor\": [[40, 44]],"
                          " \"target\": [[253, 257]],\n \"bos\": true, \"depth\": 0.5}");
    assert_true(n < cap);
    return s;
}

static void test_design_example(void **state)
{
    (void)state;
    char *line = design_example_line();
    dfl_prompt p;
    dfl_error err = {0};
    assert_int_equal(parse_str(line, &p, &err), DFL_OK);
    assert_string_equal(p.id, "d50-s3");
    assert_int_equal(p.n_tokens, 260);
    assert_int_equal(p.tokens[0], 0);
    assert_int_equal(p.tokens[1], 17);
    assert_int_equal(p.tokens[2], 93);
    assert_int_equal(p.tokens[259], 359);
    assert_non_null(p.text);
    assert_string_equal(p.text[0], "<bos>");
    assert_string_equal(p.text[1], "The");
    assert_string_equal(p.text[2], " city");
    assert_string_equal(p.text[259], "w259");
    static const int32_t want[DFL_SPAN_KINDS][2] = {{120, 124}, {250, 253}, {40, 44}, {253, 257}};
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        assert_int_equal(p.n_spans[k], 1);
        assert_int_equal(p.spans[k][0].start, want[k][0]);
        assert_int_equal(p.spans[k][0].end, want[k][1]);
    }
    assert_int_equal(p.bos, 1);
    assert_int_equal(p.has_depth, 1);
    assert_true(p.depth == 0.5);
    assert_int_equal(p.line, 12);
    dfl_prompt_free(&p);
    assert_true(is_zeroed(&p));
    free(line);
}

/* The same line abbreviated to 3 tokens, spans still up to 257: the reader must
 * refuse it rather than trust the spans. */
static void test_design_example_literal_is_rejected(void **state)
{
    (void)state;
    const char *line =
        "{\"id\": \"d50-s3\", \"tokens\": [0, 17, 93], \"text\": [\"<bos>\", \"The\", \" city\"],"
        " \"answer\": [[120, 124]], \"query\": [[250, 253]], \"distractor\": [[40, 44]], \"target\": [[253, 257]],"
        " \"bos\": true, \"depth\": 0.5}";
    dfl_prompt p;
    dfl_error err = {0};
    assert_int_equal(parse_str(line, &p, &err), DFL_ERR_RANGE);
    assert_non_null(strstr(err.msg, "prompts.jsonl:12: span answer[0] = [120, 124] is out of range for 3 tokens"));
    assert_true(is_zeroed(&p));
}

static void test_only_tokens(void **state)
{
    (void)state;
    dfl_prompt p;
    dfl_error err = {0};
    assert_int_equal(parse_str("{\"tokens\":[5, 2147483647, 0]}", &p, &err), DFL_OK);
    assert_null(p.id);
    assert_null(p.text);
    assert_int_equal(p.n_tokens, 3);
    assert_int_equal(p.tokens[0], 5);
    assert_int_equal(p.tokens[1], INT32_MAX);
    assert_int_equal(p.tokens[2], 0);
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        assert_null(p.spans[k]);
        assert_int_equal(p.n_spans[k], 0);
    }
    assert_int_equal(p.bos, 1);
    assert_int_equal(p.has_depth, 0);
    dfl_prompt_free(&p);
    dfl_prompt_free(NULL); /* accepted */
}

static void test_optional_forms(void **state)
{
    (void)state;
    dfl_prompt p;
    dfl_error err = {0};
    /* numeric id as decimal text; 1e2 counts as an integer token; notes ("_" keys and
     * the harmless list) and null values of unknown keys ignored */
    assert_int_equal(parse_str("{\"id\": 42, \"tokens\": [1e2, 3.0], \"_extra\": {\"x\": [1]}, \"answer\": [], "
                               "\"comment\": \"c\", \"note\": 1, \"notes\": [], \"meta\": {}, \"metadata\": {}, "
                               "\"source\": \"s\", \"anwser\": null}",
                               &p, &err),
                     DFL_OK);
    assert_string_equal(p.id, "42");
    assert_int_equal(p.tokens[0], 100);
    assert_int_equal(p.tokens[1], 3);
    assert_int_equal(p.n_spans[DFL_SPAN_ANSWER], 0);
    dfl_prompt_free(&p);

    assert_int_equal(parse_str("{\"id\": 1.5, \"tokens\": [1], \"bos\": false, \"depth\": -0.25}", &p, &err), DFL_OK);
    assert_string_equal(p.id, "1.5");
    assert_int_equal(p.bos, 0);
    assert_int_equal(p.has_depth, 1);
    assert_true(p.depth == -0.25);
    dfl_prompt_free(&p);

    /* null means "absent" for every optional key */
    assert_int_equal(parse_str("{\"id\": null, \"tokens\": [1, 2], \"text\": null, \"answer\": null,"
                               " \"bos\": null, \"depth\": null}",
                               &p, &err),
                     DFL_OK);
    assert_null(p.id);
    assert_null(p.text);
    assert_null(p.spans[DFL_SPAN_ANSWER]);
    assert_int_equal(p.bos, 1);
    assert_int_equal(p.has_depth, 0);
    dfl_prompt_free(&p);

    /* not NUL-terminated: only len bytes are read */
    const char *buf = "{\"tokens\":[7]}GARBAGE";
    assert_int_equal(dfl_prompt_parse(buf, 14, NULL, 0, &p, &err), DFL_OK);
    assert_int_equal(p.tokens[0], 7);
    assert_int_equal(p.line, 0);
    dfl_prompt_free(&p);

    /* several spans of one kind keep their order */
    assert_int_equal(parse_str("{\"tokens\":[1,2,3,4,5,6], \"distractor\": [[0,1],[4,6],[2,3]]}", &p, &err), DFL_OK);
    assert_int_equal(p.n_spans[DFL_SPAN_DISTRACTOR], 3);
    assert_int_equal(p.spans[DFL_SPAN_DISTRACTOR][1].start, 4);
    assert_int_equal(p.spans[DFL_SPAN_DISTRACTOR][1].end, 6);
    assert_int_equal(p.spans[DFL_SPAN_DISTRACTOR][2].start, 2);
    dfl_prompt_free(&p);
}

static void test_span_kind_names(void **state)
{
    (void)state;
    assert_string_equal(dfl_span_kind_name(DFL_SPAN_ANSWER), "answer");
    assert_string_equal(dfl_span_kind_name(DFL_SPAN_QUERY), "query");
    assert_string_equal(dfl_span_kind_name(DFL_SPAN_DISTRACTOR), "distractor");
    assert_string_equal(dfl_span_kind_name(DFL_SPAN_TARGET), "target");
    assert_string_equal(dfl_span_kind_name(DFL_SPAN_KINDS), "unknown");
}

/* ------------------------------------------------------------------------ */
/* Parse errors, table-driven                                               */
/* ------------------------------------------------------------------------ */

typedef struct bad_case {
    const char *json;
    dfl_status status;
    const char *msg; /* expected substring of the message */
} bad_case;

static const bad_case bad_cases[] = {
    /* JSON itself */
    {"{\"tokens\": [1, 2,}", DFL_ERR_FORMAT, "prompts.jsonl:12: invalid JSON near byte 1"},
    {"{\"tokens\": [1]", DFL_ERR_FORMAT, "prompts.jsonl:12: invalid JSON"},
    {"{\"tokens\": [1]} {\"tokens\": [2]}", DFL_ERR_FORMAT, "invalid JSON near byte 17 (text after the object)"},
    {"", DFL_ERR_FORMAT, "prompts.jsonl:12: invalid JSON"},
    {"[1, 2]", DFL_ERR_FORMAT, "must be a JSON object"},
    {"\"tokens\"", DFL_ERR_FORMAT, "must be a JSON object"},
    {"{\"tokens\": [1], \"text\": [\"a\\u0000b\"]}", DFL_ERR_FORMAT, "\\u0000 at byte 28 is only allowed in \"input\""},
    {"{\"input\": \"a\\udc00\"}", DFL_ERR_FORMAT, "column 13: the escape \\udc00 is a lone surrogate"},
    /* tokens */
    {"{\"id\": \"x\"}", DFL_ERR_FORMAT, "prompts.jsonl:12: missing \"tokens\""},
    {"{\"tokens\": 5}", DFL_ERR_FORMAT, "\"tokens\" is not an array"},
    {"{\"tokens\": \"1 2\"}", DFL_ERR_FORMAT, "\"tokens\" is not an array"},
    {"{\"tokens\": []}", DFL_ERR_RANGE, "prompts.jsonl:12: empty prompt"},
    {"{\"tokens\": [3, -1]}", DFL_ERR_RANGE, "tokens[1] = -1 is negative"},
    {"{\"tokens\": [1.5]}", DFL_ERR_FORMAT, "tokens[0] = 1.5 is not an integer"},
    {"{\"tokens\": [1, 1e999]}", DFL_ERR_RANGE, "prompts.jsonl:12: number 1e999 at byte 16 is out of range"},
    {"{\"tokens\": [1, -1.5e309]}", DFL_ERR_RANGE, "number -1.5e309 at byte 16 is out of range"},
    {"{\"tokens\": [1, NaN]}", DFL_ERR_FORMAT, "tokens[1] = NaN is not an integer"},
    {"{\"tokens\": [1, -Infinity]}", DFL_ERR_FORMAT, "tokens[1] = -Infinity is not an integer"},
    {"{\"tokens\": [1NaN]}", DFL_ERR_FORMAT, "invalid JSON near byte"},
    {"{\"tokens\": [1, nan]}", DFL_ERR_FORMAT, "invalid JSON near byte"},
    {"{\"tokens\": [1, -NaN]}", DFL_ERR_FORMAT, "invalid JSON near byte"},
    {"{\"tokens\": [1, Infinityx]}", DFL_ERR_FORMAT, "invalid JSON near byte"},
    {"{\"tokens\": [1], NaN: 1}", DFL_ERR_FORMAT, "invalid JSON near byte"},
    {"{\"tokens\": [1], \"answer\": [[0, NaN]]}", DFL_ERR_FORMAT, "span answer[0] has a bound that is not an integer"},
    {"{\"tokens\": [1, \"2\"]}", DFL_ERR_FORMAT, "tokens[1] is not a number"},
    {"{\"tokens\": [null]}", DFL_ERR_FORMAT, "tokens[0] is not a number"},
    {"{\"tokens\": [2147483648]}", DFL_ERR_RANGE, "tokens[0] = 2147483648 is too large"},
    {"{\"tokens\": [1e300]}", DFL_ERR_RANGE, "is too large"},
    /* id */
    {"{\"id\": [1], \"tokens\": [1]}", DFL_ERR_FORMAT, "\"id\" is neither a string nor a number"},
    {"{\"id\": true, \"tokens\": [1]}", DFL_ERR_FORMAT, "\"id\" is neither"},
    /* text */
    {"{\"tokens\": [1, 2], \"text\": [\"a\"]}", DFL_ERR_RANGE, "\"text\" has 1 entries for 2 tokens"},
    {"{\"tokens\": [1], \"text\": [\"a\", \"b\"]}", DFL_ERR_RANGE, "\"text\" has 2 entries for 1 tokens"},
    {"{\"tokens\": [1, 2], \"text\": [\"a\", 3]}", DFL_ERR_FORMAT, "text[1] is not a string"},
    {"{\"tokens\": [1], \"text\": \"a\"}", DFL_ERR_FORMAT, "\"text\" is not an array"},
    /* spans */
    {"{\"tokens\": [0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,"
     "0,1,2,3,4,5,6,7,8,9], \"answer\": [[1, 2], [40, 30]]}",
     DFL_ERR_RANGE, "prompts.jsonl:12: span answer[1] = [40, 30] is reversed"},
    {"{\"tokens\": [1,2,3,4], \"query\": [[3, 3]]}", DFL_ERR_RANGE, "span query[0] = [3, 3] is empty"},
    {"{\"tokens\": [1,2,3,4], \"target\": [[2, 5]]}", DFL_ERR_RANGE,
     "span target[0] = [2, 5] is out of range for 4 tokens"},
    {"{\"tokens\": [1,2,3,4], \"distractor\": [[-1, 2]]}", DFL_ERR_RANGE,
     "span distractor[0] = [-1, 2] is out of range"},
    {"{\"tokens\": [1,2,3,4], \"answer\": [[0, 1e300]]}", DFL_ERR_RANGE, "is out of range for 4 tokens"},
    {"{\"tokens\": [1,2,3,4], \"answer\": [[0, 1, 2]]}", DFL_ERR_FORMAT, "span answer[0] is not a [start, end] pair"},
    {"{\"tokens\": [1,2,3,4], \"answer\": [[0]]}", DFL_ERR_FORMAT, "span answer[0] is not a [start, end] pair"},
    {"{\"tokens\": [1,2,3,4], \"answer\": [[]]}", DFL_ERR_FORMAT, "span answer[0] is not a [start, end] pair"},
    {"{\"tokens\": [1,2,3,4], \"answer\": [0, 1]}", DFL_ERR_FORMAT, "span answer[0] is not a [start, end] pair"},
    {"{\"tokens\": [1,2,3,4], \"answer\": [{\"0\": 1, \"1\": 2}]}", DFL_ERR_FORMAT, "is not a [start, end] pair"},
    {"{\"tokens\": [1,2,3,4], \"query\": [[0, 1], [0.5, 2]]}", DFL_ERR_FORMAT,
     "span query[1] has a bound that is not an integer"},
    {"{\"tokens\": [1,2,3,4], \"query\": [[0, \"2\"]]}", DFL_ERR_FORMAT,
     "span query[0] has a bound that is not an integer"},
    {"{\"tokens\": [1,2,3,4], \"target\": 3}", DFL_ERR_FORMAT, "\"target\" is not an array"},
    /* bos, depth */
    {"{\"tokens\": [1], \"bos\": 1}", DFL_ERR_FORMAT, "prompts.jsonl:12: \"bos\" is not true or false"},
    {"{\"tokens\": [1], \"bos\": \"false\"}", DFL_ERR_FORMAT, "\"bos\" is not true or false"},
    {"{\"tokens\": [1], \"depth\": \"0.5\"}", DFL_ERR_FORMAT, "prompts.jsonl:12: \"depth\" is not a number"},
    {"{\"tokens\": [1], \"depth\": [0.5]}", DFL_ERR_FORMAT, "\"depth\" is not a number"},
    {"{\"tokens\": [1], \"depth\": 1e999}", DFL_ERR_RANGE, "number 1e999 at byte 26 is out of range"},
    {"{\"tokens\": [1], \"depth\": Infinity}", DFL_ERR_RANGE,
     "\"depth\" is Infinity (a depth is finite; NaN means none)"},
    {"{\"tokens\": [1], \"depth\": -Infinity}", DFL_ERR_RANGE, "\"depth\" is -Infinity"},
    /* keys: read, harmless, or an error naming them (with the nearest known key) */
    {"{\"tokens\": [1, 2], \"anwser\": [[0, 1]]}", DFL_ERR_FORMAT,
     "prompts.jsonl:12: unknown key \"anwser\" (did you mean \"answer\"?)"},
    {"{\"tokens\": [1, 2], \"querry\": [[0, 1]]}", DFL_ERR_FORMAT, "unknown key \"querry\" (did you mean \"query\"?)"},
    {"{\"tokens\": [1, 2], \"distractors\": [[0, 1]]}", DFL_ERR_FORMAT, "(did you mean \"distractor\"?)"},
    {"{\"tokens\": [1, 2], \"targte\": [[0, 1]]}", DFL_ERR_FORMAT, "(did you mean \"target\"?)"},
    {"{\"tokens\": [1, 2], \"dpeth\": 0.5}", DFL_ERR_FORMAT, "(did you mean \"depth\"?)"},
    {"{\"tokens\": [1, 2], \"BOS\": false}", DFL_ERR_FORMAT, "unknown key \"BOS\" (docs/format.md lists"},
    {"{\"tokens\": [1, 2], \"extra\": 1}", DFL_ERR_FORMAT, "unknown key \"extra\" (docs/format.md lists"},
    {"{\"tokens\": [1, 2], \"x\": 1}", DFL_ERR_FORMAT, "unknown key \"x\" (docs/format.md lists"},
    {"{\"tokns\": [1, 2]}", DFL_ERR_FORMAT, "unknown key \"tokns\" (did you mean \"tokens\"?)"},
    {"{\"input\": \"ab\", \"anwser\": [\"a\"]}", DFL_ERR_FORMAT, "unknown key \"anwser\" (did you mean \"answer\"?)"},
    {"{\"input\": \"ab\", \"bos\": false}", DFL_ERR_FORMAT, "key \"bos\" belongs to a token prompt"},
    {"{\"input\": \"ab\", \"text\": [\"a\"]}", DFL_ERR_FORMAT, "key \"text\" belongs to a token prompt"},
};

static void test_parse_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        dfl_prompt p;
        dfl_error err = {0};
        dfl_status s = parse_str(c->json, &p, &err);
        if (s != c->status || err.status != c->status || !strstr(err.msg, c->msg) || !is_zeroed(&p))
            fail_msg("case %zu %s: got status %d (%s) message \"%s\"; want %d with \"%s\"", i, c->json, (int)s,
                     dfl_status_str(s), err.msg, (int)c->status, c->msg);
        dfl_prompt_free(&p);
    }
}

/* Exact byte column of a syntax error: the stray '}' after "1, 2," is byte 18. */
static void test_parse_error_column(void **state)
{
    (void)state;
    dfl_prompt p;
    dfl_error err = {0};
    assert_int_equal(parse_str("{\"tokens\": [1, 2,}", &p, &err), DFL_ERR_FORMAT);
    assert_string_equal(err.msg, "prompts.jsonl:12: invalid JSON near byte 18");
    /* line 0: no line number in the message */
    assert_int_equal(dfl_prompt_parse("{", 1, "mem", 0, &p, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "mem: invalid JSON"));
}

static void test_parse_nul_byte(void **state)
{
    (void)state;
    static const char line[] = "{\"tokens\": [1]\0}";
    dfl_prompt p;
    dfl_error err = {0};
    assert_int_equal(dfl_prompt_parse(line, sizeof line - 1, "x.jsonl", 3, &p, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "x.jsonl:3: NUL byte at byte 15"));
    /* an escaped backslash followed by "u0000" is ordinary text, not a NUL */
    const char *ok = "{\"tokens\": [1], \"id\": \"a\\\\u0000\"}";
    assert_int_equal(parse_str(ok, &p, &err), DFL_OK);
    assert_string_equal(p.id, "a\\u0000");
    dfl_prompt_free(&p);
}

/* ------------------------------------------------------------------------ */
/* Segments and vocabulary                                                  */
/* ------------------------------------------------------------------------ */

static void test_segments_each_kind(void **state)
{
    (void)state;
    dfl_prompt p;
    dfl_error err = {0};
    assert_int_equal(parse_str("{\"tokens\": [0,1,2,3,4,5,6,7,8,9], \"answer\": [[2,4]], \"query\": [[5,6]],"
                               " \"distractor\": [[6,8]], \"target\": [[9,10]]}",
                               &p, &err),
                     DFL_OK);
    uint8_t seg[10];
    memset(seg, 0xAA, sizeof seg);
    dfl_prompt_segments(&p, seg);
    static const uint8_t want[10] = {DFL_SEG_BOS,     DFL_SEG_CONTEXT, DFL_SEG_ANSWER,     DFL_SEG_ANSWER,
                                     DFL_SEG_CONTEXT, DFL_SEG_QUERY,   DFL_SEG_DISTRACTOR, DFL_SEG_DISTRACTOR,
                                     DFL_SEG_CONTEXT, DFL_SEG_TARGET};
    assert_memory_equal(seg, want, sizeof want);
    dfl_prompt_free(&p);
}

static void test_segments_overlap_and_bos(void **state)
{
    (void)state;
    dfl_prompt p;
    dfl_error err = {0};
    /* answer covers everything including token 0; query, distractor and target are
     * painted later and win where they overlap; bos loses to spans over token 0. */
    assert_int_equal(parse_str("{\"tokens\": [0,1,2,3,4,5], \"target\": [[4,6]], \"distractor\": [[3,5]],"
                               " \"query\": [[2,4]], \"answer\": [[0,6]]}",
                               &p, &err),
                     DFL_OK);
    uint8_t seg[6];
    dfl_prompt_segments(&p, seg);
    static const uint8_t want[6] = {DFL_SEG_ANSWER,     DFL_SEG_ANSWER, DFL_SEG_QUERY,
                                    DFL_SEG_DISTRACTOR, DFL_SEG_TARGET, DFL_SEG_TARGET};
    assert_memory_equal(seg, want, sizeof want);
    dfl_prompt_free(&p);

    /* bos false: token 0 is context */
    assert_int_equal(parse_str("{\"tokens\": [7,8,9], \"bos\": false, \"query\": [[2,3]]}", &p, &err), DFL_OK);
    uint8_t s3[3];
    dfl_prompt_segments(&p, s3);
    static const uint8_t want3[3] = {DFL_SEG_CONTEXT, DFL_SEG_CONTEXT, DFL_SEG_QUERY};
    assert_memory_equal(s3, want3, sizeof want3);
    dfl_prompt_free(&p);

    /* bos true with no spans: only token 0 marked */
    assert_int_equal(parse_str("{\"tokens\": [7,8]}", &p, &err), DFL_OK);
    uint8_t s2[2];
    dfl_prompt_segments(&p, s2);
    assert_int_equal(s2[0], DFL_SEG_BOS);
    assert_int_equal(s2[1], DFL_SEG_CONTEXT);
    dfl_prompt_free(&p);
}

static void test_check_vocab(void **state)
{
    (void)state;
    dfl_prompt p;
    dfl_error err = {0};
    assert_int_equal(parse_str("{\"tokens\": [0, 99, 100, 5]}", &p, &err), DFL_OK);
    assert_int_equal(dfl_prompt_check_vocab(&p, 101, "prompts.jsonl", &err), DFL_OK);
    assert_int_equal(dfl_prompt_check_vocab(&p, 100, "prompts.jsonl", &err), DFL_ERR_RANGE);
    assert_int_equal(err.status, DFL_ERR_RANGE);
    assert_string_equal(err.msg, "prompts.jsonl:12: token 2 = 100 is out of range for vocab_size 100");
    assert_int_equal(dfl_prompt_check_vocab(&p, 0, "prompts.jsonl", &err), DFL_ERR_USAGE);
    dfl_prompt_free(&p);
}

/* ------------------------------------------------------------------------ */
/* Whole files                                                              */
/* ------------------------------------------------------------------------ */

static void test_set_crlf_blank_lines(void **state)
{
    (void)state;
    /* BOM, CRLF, blank and whitespace-only lines, no final newline */
    const char *path = write_text("crlf.jsonl", "\xEF\xBB\xBF{\"id\":\"a\",\"tokens\":[1,2]}\r\n"
                                                "\r\n"
                                                "   \t \n"
                                                "\n"
                                                "{\"id\":\"b\",\"tokens\":[3],\"text\":[\"x\"]}\r\n"
                                                "{\"id\":\"c\",\"tokens\":[4,5,6],\"answer\":[[1,3]]}");
    dfl_prompt_set set;
    dfl_error err = {0};
    assert_int_equal(dfl_prompt_set_read(path, &set, &err), DFL_OK);
    assert_int_equal(set.count, 3);
    assert_string_equal(set.items[0].id, "a");
    assert_int_equal(set.items[0].line, 1);
    assert_string_equal(set.items[1].id, "b");
    assert_int_equal(set.items[1].line, 5);
    assert_string_equal(set.items[1].text[0], "x"); /* no stray '\r' */
    assert_string_equal(set.items[2].id, "c");
    assert_int_equal(set.items[2].line, 6);
    assert_int_equal(set.items[2].spans[DFL_SPAN_ANSWER][0].end, 3);
    dfl_prompt_set_free(&set);
    assert_null(set.items);
    assert_int_equal(set.count, 0);
    dfl_prompt_set_free(NULL);
}

static void test_set_many_lines(void **state)
{
    (void)state;
    /* more samples than the first allocation, so the array has to grow */
    size_t cap = 1 << 15, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(buf + n, cap - n, "{\"id\": %d, \"tokens\": [%d]}\n\n", i, i);
    const char *path = write_bytes("many.jsonl", buf, n);
    free(buf);
    dfl_prompt_set set;
    dfl_error err = {0};
    assert_int_equal(dfl_prompt_set_read(path, &set, &err), DFL_OK);
    assert_int_equal(set.count, 100);
    assert_string_equal(set.items[99].id, "99");
    assert_int_equal(set.items[99].tokens[0], 99);
    assert_int_equal(set.items[99].line, 199);
    dfl_prompt_set_free(&set);
}

static void test_set_errors(void **state)
{
    (void)state;
    dfl_prompt_set set;
    dfl_error err = {0};

    const char *blank = write_text("blank.jsonl", "\n  \n\t\r\n\n");
    assert_int_equal(dfl_prompt_set_read(blank, &set, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "blank.jsonl: no samples"));
    assert_null(set.items);
    assert_int_equal(set.count, 0);

    const char *empty = write_text("empty.jsonl", "");
    assert_int_equal(dfl_prompt_set_read(empty, &set, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "no samples"));

    assert_int_equal(dfl_prompt_set_read(path_of("missing.jsonl"), &set, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "missing.jsonl"));
    assert_int_equal(set.count, 0);

    /* first bad line wins; its file line number (blank lines counted) in the message */
    const char *bad = write_text("bad.jsonl", "{\"tokens\":[1]}\n\n{\"tokens\":[2], \"answer\":[[1,0]]}\n{oops\n");
    assert_int_equal(dfl_prompt_set_read(bad, &set, &err), DFL_ERR_RANGE);
    assert_non_null(strstr(err.msg, "bad.jsonl:3: span answer[0] = [1, 0] is reversed"));
    assert_null(set.items);

    const char *badjson = write_text("badjson.jsonl", "{\"tokens\":[1]}\r\n{\"tokens\":[1,]}\r\n");
    assert_int_equal(dfl_prompt_set_read(badjson, &set, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "badjson.jsonl:2: invalid JSON near byte"));

    static const char withnul[] = "{\"tokens\":[1]}\n{\"tokens\":[2]}\n{\"tok\0ens\":[3]}\n";
    const char *nul = write_bytes("nul.jsonl", withnul, sizeof withnul - 1);
    assert_int_equal(dfl_prompt_set_read(nul, &set, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "nul.jsonl:3: NUL byte"));
    assert_int_equal(set.count, 0);
}

/* ------------------------------------------------------------------------ */
/* Writer                                                                   */
/* ------------------------------------------------------------------------ */

static void assert_prompts_equal(const dfl_prompt *a, const dfl_prompt *b)
{
    if (a->id || b->id) {
        assert_non_null(a->id);
        assert_non_null(b->id);
        assert_string_equal(a->id, b->id);
    }
    assert_int_equal(a->n_tokens, b->n_tokens);
    assert_memory_equal(a->tokens, b->tokens, a->n_tokens * sizeof *a->tokens);
    assert_int_equal(a->text != NULL, b->text != NULL);
    if (a->text)
        for (size_t i = 0; i < a->n_tokens; i++)
            assert_string_equal(a->text[i], b->text[i]);
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        assert_int_equal(a->n_spans[k], b->n_spans[k]);
        if (a->n_spans[k]) assert_memory_equal(a->spans[k], b->spans[k], a->n_spans[k] * sizeof(dfl_span));
    }
    assert_int_equal(a->bos, b->bos);
    assert_int_equal(a->has_depth, b->has_depth);
    if (a->has_depth) assert_true(a->depth == b->depth); /* exact, not approximate */
}

static void test_write_round_trip(void **state)
{
    (void)state;
    int32_t t0[] = {0, 17, 93, 2147483647, 5};
    char *text0[] = {"<bos>", "say \"hi\"", "back\\slash", "tab\tnew\nline\x01",
                     "\xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80"};
    dfl_span ans[] = {{1, 3}, {3, 5}};
    dfl_span tgt[] = {{4, 5}};
    int32_t t1[] = {9};
    dfl_prompt in[5];
    memset(in, 0, sizeof in);
    in[0].id = "d50-s3 \"quoted\" \xe2\x9c\x93";
    in[0].tokens = t0;
    in[0].n_tokens = 5;
    in[0].text = text0;
    in[0].spans[DFL_SPAN_ANSWER] = ans;
    in[0].n_spans[DFL_SPAN_ANSWER] = 2;
    in[0].spans[DFL_SPAN_TARGET] = tgt;
    in[0].n_spans[DFL_SPAN_TARGET] = 1;
    in[0].bos = 0;
    in[0].has_depth = 1;
    in[0].depth = 1.0 / 3.0;
    in[1].tokens = t1;
    in[1].n_tokens = 1;
    in[1].bos = 1;
    in[2].tokens = t1;
    in[2].n_tokens = 1;
    in[2].bos = 1;
    in[2].has_depth = 1;
    in[2].depth = 1e-300;
    /* one ulp above 0.1: 15 digits print "0.1", which cJSON's printer accepts as
     * equal; and DBL_MAX, which it rounds up to inf */
    in[3] = in[2];
    in[3].depth = nextafter(0.1, 1.0);
    in[4] = in[2];
    in[4].depth = -DBL_MAX;

    const char *path = path_of("round.jsonl");
    dfl_error err = {0};
    assert_int_equal(dfl_prompt_set_write(path, in, 5, 0, &err), DFL_OK);
    assert_int_equal(count_tmp_files(), 0);

    dfl_prompt_set set;
    assert_int_equal(dfl_prompt_set_read(path, &set, &err), DFL_OK);
    assert_int_equal(set.count, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_prompts_equal(&in[i], &set.items[i]);
        assert_int_equal(set.items[i].line, i + 1); /* one line per prompt, no blank lines */
    }
    dfl_prompt_set_free(&set);

    /* only present fields, compact, bos only when false */
    char *body = slurp(path);
    const char *second = strchr(body, '\n');
    assert_non_null(second);
    assert_non_null(strstr(body, "\"bos\":false"));
    assert_null(strstr(body, "\"bos\":true"));
    assert_null(strstr(body, "\"query\""));
    assert_null(strstr(body, "\"distractor\""));
    assert_non_null(strstr(body, "\"answer\":[[1,3],[3,5]]"));
    assert_string_equal(second + 1, "{\"tokens\":[9]}\n{\"tokens\":[9],\"depth\":1e-300}\n"
                                    "{\"tokens\":[9],\"depth\":0.10000000000000002}\n"
                                    "{\"tokens\":[9],\"depth\":-1.7976931348623157e+308}\n");
    free(body);
}

static void test_write_refuses_overwrite(void **state)
{
    (void)state;
    const char *path = write_text("keep.jsonl", "original\n");
    int32_t t[] = {1, 2};
    dfl_prompt p = {0};
    p.tokens = t;
    p.n_tokens = 2;
    p.bos = 1;
    dfl_error err = {0};
    assert_int_equal(dfl_prompt_set_write(path, &p, 1, 0, &err), DFL_ERR_EXISTS);
    assert_int_equal(err.status, DFL_ERR_EXISTS);
    assert_non_null(strstr(err.msg, "keep.jsonl"));
    char *body = slurp(path);
    assert_string_equal(body, "original\n");
    free(body);
    assert_int_equal(count_tmp_files(), 0);

    /* with overwrite allowed it is replaced */
    assert_int_equal(dfl_prompt_set_write(path, &p, 1, 1, &err), DFL_OK);
    body = slurp(path);
    assert_string_equal(body, "{\"tokens\":[1,2]}\n");
    free(body);
    assert_int_equal(count_tmp_files(), 0);
}

static void test_write_missing_folder(void **state)
{
    (void)state;
    int32_t t[] = {1};
    dfl_prompt p = {0};
    p.tokens = t;
    p.n_tokens = 1;
    p.bos = 1;
    dfl_error err = {0};
    const char *path = path_of("no_such_dir/out.jsonl");
    assert_int_equal(dfl_prompt_set_write(path, &p, 1, 0, &err), DFL_ERR_IO);
    assert_int_equal(err.status, DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "out.jsonl"));
    struct stat st;
    assert_int_not_equal(stat(path_of("no_such_dir"), &st), 0);
    assert_int_equal(count_tmp_files(), 0);
}

/* The writer validates first: an invalid prompt creates no file at all. */
static void test_write_rejects_invalid(void **state)
{
    (void)state;
    int32_t t[] = {1, 2, 3};
    dfl_span rev[] = {{2, 1}};
    dfl_prompt p[2];
    memset(p, 0, sizeof p);
    p[0].tokens = t;
    p[0].n_tokens = 3;
    p[0].bos = 1;
    p[1] = p[0];
    p[1].spans[DFL_SPAN_QUERY] = rev;
    p[1].n_spans[DFL_SPAN_QUERY] = 1;
    const char *path = path_of("invalid.jsonl");
    dfl_error err = {0};
    struct stat st;

    assert_int_equal(dfl_prompt_set_write(path, p, 2, 0, &err), DFL_ERR_RANGE);
    assert_non_null(strstr(err.msg, "prompt 1: span query[0] = [2, 1] is reversed"));
    assert_int_not_equal(stat(path, &st), 0);

    dfl_span far[] = {{1, 4}};
    p[1].spans[DFL_SPAN_QUERY] = far;
    assert_int_equal(dfl_prompt_set_write(path, p, 2, 0, &err), DFL_ERR_RANGE);
    assert_non_null(strstr(err.msg, "prompt 1: span query[0] = [1, 4] is out of range for 3 tokens"));

    char *text[] = {"a", NULL, "c"};
    p[1].n_spans[DFL_SPAN_QUERY] = 0;
    p[1].text = text;
    assert_int_equal(dfl_prompt_set_write(path, p, 2, 0, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "text[1] is NULL"));

    p[1].text = NULL;
    p[1].has_depth = 1;
    p[1].depth = NAN;
    assert_int_equal(dfl_prompt_set_write(path, p, 2, 0, &err), DFL_ERR_RANGE);
    assert_non_null(strstr(err.msg, "depth is not finite"));

    p[1].has_depth = 0;
    p[1].n_tokens = 0;
    assert_int_equal(dfl_prompt_set_write(path, p, 2, 0, &err), DFL_ERR_RANGE);
    assert_non_null(strstr(err.msg, "empty prompt"));

    int32_t neg[] = {1, -4};
    p[1].tokens = neg;
    p[1].n_tokens = 2;
    assert_int_equal(dfl_prompt_set_write(path, p, 2, 0, &err), DFL_ERR_RANGE);
    assert_non_null(strstr(err.msg, "tokens[1] = -4 is negative"));

    assert_int_equal(dfl_prompt_set_write(path, p, 0, 0, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "no prompts to write"));
    assert_int_not_equal(stat(path, &st), 0);
    assert_int_equal(count_tmp_files(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_example),       cmocka_unit_test(test_design_example_literal_is_rejected),
        cmocka_unit_test(test_only_tokens),          cmocka_unit_test(test_optional_forms),
        cmocka_unit_test(test_span_kind_names),      cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_error_column),   cmocka_unit_test(test_parse_nul_byte),
        cmocka_unit_test(test_segments_each_kind),   cmocka_unit_test(test_segments_overlap_and_bos),
        cmocka_unit_test(test_check_vocab),          cmocka_unit_test(test_set_crlf_blank_lines),
        cmocka_unit_test(test_set_many_lines),       cmocka_unit_test(test_set_errors),
        cmocka_unit_test(test_write_round_trip),     cmocka_unit_test(test_write_refuses_overwrite),
        cmocka_unit_test(test_write_missing_folder), cmocka_unit_test(test_write_rejects_invalid),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
