/* test_noise.c — the noise module's pieces that need no dump: option names and lists,
 * the prompt generator's invariants (synthetic task and templates), template parsing
 * and every error they return. Shares on constructed dumps are checked end to end in
 * tests/test_noise.py (the dumps are written there with h5py). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/needle.h"
#include "base/cli.h"
#include "analysis/noise.h"
#include "text/noise_prompts.h"

/* ------------------------------------------------------------------------ */
/* Names and lists                                                          */
/* ------------------------------------------------------------------------ */

static void test_names_round_trip(void **state)
{
    (void)state;
    dfl_error err;
    for (int i = 0; i < 4; i++) {
        dfl_noise_map m;
        dfl_noise_by b;
        assert_int_equal(dfl_noise_map_parse(dfl_noise_map_name((dfl_noise_map)i), &m, &err), DFL_OK);
        assert_int_equal(m, i);
        assert_int_equal(dfl_noise_by_parse(dfl_noise_by_name((dfl_noise_by)i), &b, &err), DFL_OK);
        assert_int_equal(b, i);
    }
    dfl_noise_norm n;
    assert_int_equal(dfl_noise_norm_parse("abs", &n, &err), DFL_OK);
    assert_int_equal(n, DFL_NOISE_NORM_ABS);
    assert_int_equal(dfl_noise_norm_parse("total", &n, &err), DFL_OK);
    assert_int_equal(n, DFL_NOISE_NORM_TOTAL);

    dfl_noise_map m;
    assert_int_equal(dfl_noise_map_parse("all", &m, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "--map: 'all' is not auto, map1, map2 or diff"));
    assert_int_equal(dfl_noise_norm_parse("sum", &n, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "--norm"));
    dfl_noise_by b;
    assert_int_equal(dfl_noise_by_parse("sample", &b, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "--by: 'sample'"));
}

static void test_parse_list(void **state)
{
    (void)state;
    dfl_error err;
    int64_t *v = NULL;
    size_t n = 0;
    assert_int_equal(dfl_cli_index_list("--layers", "5,0,2-3,3", &v, &n, &err), DFL_OK);
    assert_int_equal(n, 4);
    assert_int_equal(v[0], 0);
    assert_int_equal(v[1], 2);
    assert_int_equal(v[2], 3);
    assert_int_equal(v[3], 5);
    free(v);
    /* more than the initial capacity */
    assert_int_equal(dfl_cli_index_list("--heads", "0-99", &v, &n, &err), DFL_OK);
    assert_int_equal(n, 100);
    assert_int_equal(v[99], 99);
    free(v);

    static const char *const bad[] = {"", "1,,2", ",1", "1,", "x", "-1", "3-1", "1-2-3", "0-2000000"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        v = (int64_t *)1;
        assert_int_equal(dfl_cli_index_list("--layers", bad[i], &v, &n, &err), DFL_ERR_USAGE);
        assert_null(v);
        assert_non_null(strstr(err.msg, "--layers"));
    }
}

static void test_parse_depths(void **state)
{
    (void)state;
    dfl_error err;
    double *v = NULL;
    size_t n = 0;
    assert_int_equal(dfl_noise_parse_depths("--depths", "1,0.5,0", &v, &n, &err), DFL_OK);
    assert_int_equal(n, 3);
    assert_true(v[0] == 1.0 && v[1] == 0.5 && v[2] == 0.0);
    free(v);
    static const char *const bad[] = {"", "0.5,", "1.5", "-0.1", "nan", "0.5x", ",,"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(dfl_noise_parse_depths("--depths", bad[i], &v, &n, &err), DFL_ERR_USAGE);
        assert_null(v);
        assert_non_null(strstr(err.msg, "--depths"));
    }
}

static void test_analyze_usage_errors(void **state)
{
    (void)state;
    dfl_error err;
    dfl_noise_result *res = (dfl_noise_result *)1;
    dfl_noise_params p = dfl_noise_params_default();
    assert_true(p.warn_total == 0.05);
    assert_int_equal(dfl_noise_analyze(&p, &res, &err), DFL_ERR_USAGE);
    assert_null(res);
    assert_non_null(strstr(err.msg, "no dumps"));

    const char *dumps[2] = {"/nonexistent/a.h5", "/nonexistent/b.h5"};
    const char *labels[2] = {"x", "x"};
    p.dumps = dumps;
    p.n_dumps = 2;
    p.labels = labels;
    assert_int_equal(dfl_noise_analyze(&p, &res, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "'x' is given twice"));
    p.labels = NULL;
    p.warn_total = NAN;
    assert_int_equal(dfl_noise_analyze(&p, &res, &err), DFL_ERR_USAGE);
    p.warn_total = 0.05;
    assert_int_equal(dfl_noise_analyze(&p, &res, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/a.h5"));
    assert_null(res);
    dfl_noise_result_free(NULL);
}

/* ------------------------------------------------------------------------ */
/* Synthetic prompts                                                        */
/* ------------------------------------------------------------------------ */

static int span_count(const dfl_prompt *p, dfl_span_kind k)
{
    return (int)p->n_spans[k];
}

/* Every invariant of one synthetic prompt (docs/format.md "Needle task"). */
static void check_synthetic(const dfl_prompt *p, int64_t T, int N, int R, int m, double depth)
{
    assert_int_equal(p->n_tokens, (size_t)T);
    assert_int_equal(p->tokens[0], DFL_TOK_BOS);
    assert_true(p->bos);
    assert_true(p->has_depth);
    assert_true(p->depth == depth);
    assert_int_equal(span_count(p, DFL_SPAN_ANSWER), 1);
    assert_int_equal(span_count(p, DFL_SPAN_DISTRACTOR), N - 1);
    assert_int_equal(span_count(p, DFL_SPAN_QUERY), R);
    assert_int_equal(span_count(p, DFL_SPAN_TARGET), R);

    const int64_t nl = m + 2, C = T - 1 - (int64_t)R * (m + 3);
    dfl_span a = p->spans[DFL_SPAN_ANSWER][0];
    assert_int_equal(a.end - a.start, nl);
    /* at the requested depth within one needle length */
    double want = 1.0 + depth * (double)(C - nl);
    assert_true(fabs((double)a.start - want) <= (double)nl);
    assert_true(a.start >= 1 && a.end <= 1 + C);

    /* needles: <needle> key digits, distinct keys, no overlap */
    int keys_seen[DFL_NEEDLE_KEYS] = {0};
    int32_t answer_key = p->tokens[a.start + 1];
    for (int i = 0; i < N; i++) {
        dfl_span s = i == 0 ? a : p->spans[DFL_SPAN_DISTRACTOR][i - 1];
        assert_int_equal(s.end - s.start, nl);
        assert_int_equal(p->tokens[s.start], DFL_TOK_NEEDLE);
        int32_t key = p->tokens[s.start + 1];
        assert_true(key >= DFL_TOK_KEY0 && key < DFL_TOK_FILLER0);
        assert_int_equal(keys_seen[key - DFL_TOK_KEY0], 0);
        keys_seen[key - DFL_TOK_KEY0] = 1;
        for (int d = 0; d < m; d++)
            assert_true(p->tokens[s.start + 2 + d] >= DFL_TOK_DIGIT0 && p->tokens[s.start + 2 + d] < DFL_TOK_KEY0);
        for (int j = 0; j < N; j++) {
            dfl_span o = j == 0 ? a : p->spans[DFL_SPAN_DISTRACTOR][j - 1];
            if (j != i) assert_true(s.end <= o.start || o.end <= s.start);
        }
    }
    /* filler elsewhere in the context */
    int needle_tokens = 0;
    for (int64_t t = 1; t <= C; t++)
        needle_tokens += p->tokens[t] < DFL_TOK_FILLER0;
    assert_int_equal(needle_tokens, N * nl);

    /* queries: <query> key <sep>, then the digits of that key's needle; the last asks
     * for the answer */
    for (int q = 0; q < R; q++) {
        dfl_span qs = p->spans[DFL_SPAN_QUERY][q], ts = p->spans[DFL_SPAN_TARGET][q];
        assert_int_equal(qs.end - qs.start, 3);
        assert_int_equal(ts.start, qs.end);
        assert_int_equal(ts.end - ts.start, m);
        assert_int_equal(p->tokens[qs.start], DFL_TOK_QUERY);
        assert_int_equal(p->tokens[qs.start + 2], DFL_TOK_SEP);
        int32_t key = p->tokens[qs.start + 1];
        if (q == R - 1) {
            assert_int_equal(key, answer_key);
            assert_int_equal(ts.end, T);
        }
        int found = 0;
        for (int i = 0; i < N && !found; i++) {
            dfl_span s = i == 0 ? a : p->spans[DFL_SPAN_DISTRACTOR][i - 1];
            if (p->tokens[s.start + 1] != key) continue;
            found = 1;
            for (int d = 0; d < m; d++)
                assert_int_equal(p->tokens[ts.start + d], p->tokens[s.start + 2 + d]);
        }
        assert_true(found);
    }
    for (size_t t = 0; t < p->n_tokens; t++)
        assert_non_null(p->text[t]);
}

static void test_synthetic_defaults(void **state)
{
    (void)state;
    dfl_error err;
    dfl_prompt_set set;
    dfl_noise_prompts_params p = dfl_noise_prompts_default();
    assert_int_equal(p.samples, 20);
    assert_int_equal(dfl_noise_prompts_make(&p, &set, &err), DFL_OK);
    assert_int_equal(set.count, 100); /* 5 depths x 20 */
    static const double depths[5] = {0, 0.25, 0.5, 0.75, 1};
    for (size_t i = 0; i < set.count; i++)
        check_synthetic(&set.items[i], 256, 4, 1, 4, depths[i / 20]);
    assert_string_equal(set.items[0].id, "d0-s0");
    assert_string_equal(set.items[27].id, "d25-s7");
    assert_string_equal(set.items[99].id, "d100-s19");
    /* all ids distinct, and samples at one depth differ */
    for (size_t i = 0; i < set.count; i++)
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(set.items[i].id, set.items[j].id);
    assert_memory_not_equal(set.items[0].tokens, set.items[1].tokens, 256 * sizeof(int32_t));
    dfl_prompt_set_free(&set);
}

static void test_synthetic_options_and_seed(void **state)
{
    (void)state;
    dfl_error err;
    dfl_prompt_set a, b, c;
    int64_t lengths[2] = {64, 97};
    double depths[3] = {1.0, 0.1, 0.6};
    dfl_noise_prompts_params p = dfl_noise_prompts_default();
    p.lengths = lengths, p.n_lengths = 2;
    p.depths = depths, p.n_depths = 3;
    p.samples = 4;
    p.needles = 3, p.queries = 2, p.digits = 2;
    p.vocab_size = 200;
    p.seed = 42;
    assert_int_equal(dfl_noise_prompts_make(&p, &a, &err), DFL_OK);
    assert_int_equal(a.count, 24);
    for (size_t i = 0; i < a.count; i++) {
        check_synthetic(&a.items[i], lengths[i / 12], 3, 2, 2, depths[(i / 4) % 3]);
        for (size_t t = 0; t < a.items[i].n_tokens; t++)
            assert_true(a.items[i].tokens[t] < 200);
    }
    assert_string_equal(a.items[0].id, "L64-d100-s0");
    assert_string_equal(a.items[13].id, "L97-d100-s1");
    /* reproducible from the seed; another seed gives other prompts */
    assert_int_equal(dfl_noise_prompts_make(&p, &b, &err), DFL_OK);
    p.seed = 43;
    assert_int_equal(dfl_noise_prompts_make(&p, &c, &err), DFL_OK);
    int differ = 0;
    for (size_t i = 0; i < a.count; i++) {
        assert_int_equal(a.items[i].n_tokens, b.items[i].n_tokens);
        assert_memory_equal(a.items[i].tokens, b.items[i].tokens, a.items[i].n_tokens * sizeof(int32_t));
        differ |= memcmp(a.items[i].tokens, c.items[i].tokens, a.items[i].n_tokens * sizeof(int32_t)) != 0;
    }
    assert_true(differ);
    dfl_prompt_set_free(&a);
    dfl_prompt_set_free(&b);
    dfl_prompt_set_free(&c);
}

static void test_synthetic_errors(void **state)
{
    (void)state;
    dfl_error err;
    dfl_prompt_set set = {(dfl_prompt *)1, 7};
    dfl_noise_prompts_params p = dfl_noise_prompts_default();
    int64_t short_len = 20;
    p.lengths = &short_len, p.n_lengths = 1;
    assert_int_equal(dfl_noise_prompts_make(&p, &set, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "too short"));
    assert_null(set.items);
    assert_int_equal(set.count, 0);

    p = dfl_noise_prompts_default();
    double bad_depth = 1.5;
    p.depths = &bad_depth, p.n_depths = 1;
    assert_int_equal(dfl_noise_prompts_make(&p, &set, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "1.5 is not in [0, 1]"));

    p = dfl_noise_prompts_default();
    p.samples = 0;
    assert_int_equal(dfl_noise_prompts_make(&p, &set, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "--samples"));
    p = dfl_noise_prompts_default();
    p.vocab_size = 100;
    assert_int_equal(dfl_noise_prompts_make(&p, &set, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "vocab size"));
    p = dfl_noise_prompts_default();
    p.needles = 65;
    assert_int_equal(dfl_noise_prompts_make(&p, &set, &err), DFL_ERR_USAGE);
    p = dfl_noise_prompts_default();
    p.samples = 1000000;
    int64_t lens[20];
    for (int i = 0; i < 20; i++)
        lens[i] = 256;
    p.lengths = lens, p.n_lengths = 20;
    assert_int_equal(dfl_noise_prompts_make(&p, &set, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "too many prompts"));
    p.lengths = lens, p.n_lengths = 0;
    p.samples = 1;
    assert_int_equal(dfl_noise_prompts_make(&p, &set, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "no lengths"));
}

/* ------------------------------------------------------------------------ */
/* Templates                                                                */
/* ------------------------------------------------------------------------ */

static dfl_status parse(const char *json, dfl_noise_template *t, dfl_error *err)
{
    return dfl_noise_template_parse(json, strlen(json), "t.json", t, err);
}

static const char *const TEMPLATE =
    "{\"haystack\": [100, 101, 102, 103, 104, 105, 106],"
    " \"needle\": [200, 201, 202, 203, 204], \"answer\": [2, 4],"
    " \"distractors\": [[300, 301, 302], [310, 311]],"
    " \"query\": [400, 401, 402], \"target\": [202, 203], \"bos\": 1, \"vocab_size\": 500}";

static void test_template_parse(void **state)
{
    (void)state;
    dfl_error err;
    dfl_noise_template t;
    assert_int_equal(parse(TEMPLATE, &t, &err), DFL_OK);
    assert_int_equal(t.n_haystack, 7);
    assert_int_equal(t.n_needle, 5);
    assert_int_equal(t.answer.start, 2);
    assert_int_equal(t.answer.end, 4);
    assert_int_equal(t.n_distractors, 2);
    assert_int_equal(t.n_distractor[0], 3);
    assert_int_equal(t.distractor[1][1], 311);
    assert_int_equal(t.n_query, 3);
    assert_int_equal(t.n_target, 2);
    assert_true(t.has_bos);
    assert_int_equal(t.bos, 1);
    assert_int_equal(t.vocab_size, 500);
    /* bos 1 + query 3 + target 2 + 2 x 3 needles x 5 */
    assert_int_equal(dfl_noise_template_min_length(&t), 36);
    dfl_noise_template_free(&t);
    dfl_noise_template_free(NULL);

    /* the minimal form: answer = the whole needle, no bos, no distractors */
    assert_int_equal(parse("{\"haystack\": [7], \"needle\": [8, 9], \"query\": [10], \"target\": [9],"
                           " \"bos\": null}",
                           &t, &err),
                     DFL_OK);
    assert_int_equal(t.answer.start, 0);
    assert_int_equal(t.answer.end, 2);
    assert_false(t.has_bos);
    assert_int_equal(t.n_distractors, 0);
    assert_int_equal(dfl_noise_template_min_length(&t), 4);
    dfl_noise_template_free(&t);
}

static void test_template_errors(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        dfl_status status;
        const char *msg;
    } cases[] = {
        {"[1, 2]", DFL_ERR_FORMAT, "a template is a JSON object"},
        {"{\"haystack\": [1]", DFL_ERR_FORMAT, "invalid JSON"},
        {"{\"needle\": [1], \"query\": [2], \"target\": [3]}", DFL_ERR_FORMAT, "missing key 'haystack'"},
        {"{\"haystack\": [1], \"needle\": [1], \"query\": [2], \"target\": [3], \"anwser\": [0, 1]}", DFL_ERR_FORMAT,
         "unknown key 'anwser'"},
        {"{\"haystack\": [], \"needle\": [1], \"query\": [2], \"target\": [3]}", DFL_ERR_FORMAT, "haystack is empty"},
        {"{\"haystack\": 5, \"needle\": [1], \"query\": [2], \"target\": [3]}", DFL_ERR_FORMAT,
         "haystack is not an array"},
        {"{\"haystack\": [1], \"needle\": [1, 2.5], \"query\": [2], \"target\": [3]}", DFL_ERR_FORMAT,
         "needle[1] is not an integer"},
        {"{\"haystack\": [1], \"needle\": [1, \"a\"], \"query\": [2], \"target\": [3]}", DFL_ERR_FORMAT,
         "needle[1] is not an integer"},
        {"{\"haystack\": [1], \"needle\": [1], \"query\": [-2], \"target\": [3]}", DFL_ERR_RANGE,
         "query[0]: -2 is not a token id"},
        {"{\"haystack\": [1], \"needle\": [1], \"query\": [2], \"target\": [3e10]}", DFL_ERR_RANGE, "target[0]"},
        {"{\"haystack\": [1], \"needle\": [1, 2], \"answer\": [1, 3], \"query\": [2], \"target\": [3]}", DFL_ERR_RANGE,
         "answer [1, 3] is not a non-empty half-open span inside the needle"},
        {"{\"haystack\": [1], \"needle\": [1, 2], \"answer\": [1, 1], \"query\": [2], \"target\": [3]}", DFL_ERR_RANGE,
         "inside the needle"},
        {"{\"haystack\": [1], \"needle\": [1, 2], \"answer\": [1], \"query\": [2], \"target\": [3]}", DFL_ERR_FORMAT,
         "answer is not a pair"},
        {"{\"haystack\": [1], \"needle\": [1], \"distractors\": [1, 2], \"query\": [2], \"target\": [3]}",
         DFL_ERR_FORMAT, "distractors[0] is not an array"},
        {"{\"haystack\": [1], \"needle\": [1], \"distractors\": {}, \"query\": [2], \"target\": [3]}", DFL_ERR_FORMAT,
         "distractors is not an array"},
        {"{\"haystack\": [1], \"needle\": [1], \"query\": [2], \"target\": [3], \"bos\": \"x\"}", DFL_ERR_FORMAT,
         "bos is not a token id"},
        {"{\"haystack\": [1], \"needle\": [1], \"query\": [2], \"target\": [3], \"bos\": -1}", DFL_ERR_RANGE,
         "bos: -1 is not a token id"},
        {"{\"haystack\": [1], \"needle\": [1], \"query\": [2], \"target\": [3], \"vocab_size\": 0}", DFL_ERR_FORMAT,
         "vocab_size is not a positive integer"},
        {"{\"haystack\": [1], \"needle\": [1, 9], \"query\": [2], \"target\": [3], \"vocab_size\": 9}", DFL_ERR_RANGE,
         "needle[1] = 9 is not below the vocabulary size 9"},
        {"{\"haystack\": [1], \"needle\": [1], \"query\": [2], \"target\": [3], \"bos\": 12, \"vocab_size\": 9}",
         DFL_ERR_RANGE, "bos[0] = 12 is not below"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        dfl_error err = {DFL_OK, ""};
        dfl_noise_template t;
        dfl_status s = parse(cases[i].json, &t, &err);
        if (s != cases[i].status || !strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: status %d, message '%s' (wanted %d, '%s')", i, (int)s, err.msg, (int)cases[i].status,
                     cases[i].msg);
        assert_non_null(strstr(err.msg, "t.json"));
        static const dfl_noise_template zero;
        assert_memory_equal(&t, &zero, sizeof zero);
    }
    dfl_error err;
    dfl_noise_template t;
    assert_int_equal(dfl_noise_template_parse("{\"a\":\0}", 7, "t.json", &t, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "NUL byte"));
    assert_int_equal(dfl_noise_template_read("/nonexistent/t.json", &t, &err), DFL_ERR_IO);
}

/* Every template prompt: layout, pieces where they belong, haystack continuous. */
static void check_template_prompt(const dfl_noise_template *t, const dfl_prompt *p, int64_t T, double depth)
{
    const int64_t nb = t->has_bos, nq = (int64_t)t->n_query, nt = (int64_t)t->n_target;
    const int64_t C = T - nb - nq - nt, nn = (int64_t)t->n_needle;
    assert_int_equal(p->n_tokens, (size_t)T);
    assert_int_equal(p->bos, t->has_bos);
    if (nb) assert_int_equal(p->tokens[0], t->bos);
    assert_true(p->has_depth && p->depth == depth);
    /* the needle at floor(depth·(C − n)) of the context; the answer inside it */
    int64_t ns = nb + (int64_t)floor(depth * (double)(C - nn));
    assert_memory_equal(p->tokens + ns, t->needle, (size_t)nn * sizeof(int32_t));
    assert_int_equal(p->n_spans[DFL_SPAN_ANSWER], 1);
    assert_int_equal(p->spans[DFL_SPAN_ANSWER][0].start, ns + t->answer.start);
    assert_int_equal(p->spans[DFL_SPAN_ANSWER][0].end, ns + t->answer.end);
    /* query and target at the end */
    assert_int_equal(p->spans[DFL_SPAN_QUERY][0].start, nb + C);
    assert_int_equal(p->spans[DFL_SPAN_QUERY][0].end, nb + C + nq);
    assert_int_equal(p->spans[DFL_SPAN_TARGET][0].start, nb + C + nq);
    assert_int_equal(p->spans[DFL_SPAN_TARGET][0].end, T);
    assert_memory_equal(p->tokens + nb + C, t->query, (size_t)nq * sizeof(int32_t));
    assert_memory_equal(p->tokens + nb + C + nq, t->target, (size_t)nt * sizeof(int32_t));
    /* distractors: each piece once, in position order, not overlapping the needle */
    assert_int_equal(p->n_spans[DFL_SPAN_DISTRACTOR], t->n_distractors);
    uint8_t *mark = calloc((size_t)T, 1);
    assert_non_null(mark);
    for (int64_t j = ns; j < ns + nn; j++)
        mark[j] = 1;
    int used[DFL_NOISE_MAX_DISTRACTORS] = {0};
    for (size_t i = 0; i < t->n_distractors; i++) {
        dfl_span s = p->spans[DFL_SPAN_DISTRACTOR][i];
        if (i) assert_true(s.start > p->spans[DFL_SPAN_DISTRACTOR][i - 1].start);
        int found = -1;
        for (size_t k = 0; k < t->n_distractors && found < 0; k++)
            if (!used[k] && (size_t)(s.end - s.start) == t->n_distractor[k] &&
                !memcmp(p->tokens + s.start, t->distractor[k], t->n_distractor[k] * sizeof(int32_t)))
                found = (int)k;
        assert_true(found >= 0);
        used[found] = 1;
        for (int32_t j = s.start; j < s.end; j++) {
            assert_int_equal(mark[j], 0);
            mark[j] = 1;
        }
    }
    /* the rest of the context is the haystack read cyclically without a jump */
    int64_t prev = -1;
    for (int64_t j = nb; j < nb + C; j++) {
        if (mark[j]) continue;
        int64_t h = -1;
        for (size_t k = 0; k < t->n_haystack; k++)
            if (t->haystack[k] == p->tokens[j]) h = (int64_t)k;
        assert_true(h >= 0);
        if (prev >= 0) assert_int_equal(h, (prev + 1) % (int64_t)t->n_haystack);
        prev = h;
    }
    free(mark);
}

static void test_template_prompts(void **state)
{
    (void)state;
    dfl_error err;
    dfl_noise_template t;
    assert_int_equal(parse(TEMPLATE, &t, &err), DFL_OK);
    int64_t lengths[2] = {36, 120};
    dfl_noise_prompts_params p = dfl_noise_prompts_default();
    p.tmpl = &t;
    p.vocab_size = 0;
    p.lengths = lengths, p.n_lengths = 2;
    p.samples = 6;
    dfl_prompt_set a, b;
    assert_int_equal(dfl_noise_prompts_make(&p, &a, &err), DFL_OK);
    assert_int_equal(a.count, 60);
    static const double depths[5] = {0, 0.25, 0.5, 0.75, 1};
    for (size_t i = 0; i < a.count; i++)
        check_template_prompt(&t, &a.items[i], lengths[i / 30], depths[(i / 6) % 5]);
    assert_string_equal(a.items[31].id, "L120-d0-s1");
    /* reproducible */
    assert_int_equal(dfl_noise_prompts_make(&p, &b, &err), DFL_OK);
    for (size_t i = 0; i < a.count; i++)
        assert_memory_equal(a.items[i].tokens, b.items[i].tokens, a.items[i].n_tokens * sizeof(int32_t));
    dfl_prompt_set_free(&b);
    dfl_prompt_set_free(&a);

    /* too short: names the minimum */
    int64_t short_len = 35;
    p.lengths = &short_len, p.n_lengths = 1;
    assert_int_equal(dfl_noise_prompts_make(&p, &a, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "at least 36 tokens"));
    /* a vocabulary given on the command line below the template's ids */
    p.lengths = lengths, p.n_lengths = 1;
    p.vocab_size = 400;
    assert_int_equal(dfl_noise_prompts_make(&p, &a, &err), DFL_ERR_RANGE);
    assert_non_null(strstr(err.msg, "query[0] = 400 is not below the vocabulary size 400"));
    dfl_noise_template_free(&t);

    /* no bos, no distractors, the whole needle as answer, haystack shorter than
     * the context (repeated) */
    assert_int_equal(parse("{\"haystack\": [50, 51, 52], \"needle\": [60, 61, 62, 63], \"query\": [70],"
                           " \"target\": [62]}",
                           &t, &err),
                     DFL_OK);
    int64_t len = 40;
    double d[3] = {0.0, 0.3, 1.0};
    p = dfl_noise_prompts_default();
    p.tmpl = &t;
    p.vocab_size = 0;
    p.lengths = &len, p.n_lengths = 1;
    p.depths = d, p.n_depths = 3;
    p.samples = 3;
    assert_int_equal(dfl_noise_prompts_make(&p, &a, &err), DFL_OK);
    for (size_t i = 0; i < a.count; i++)
        check_template_prompt(&t, &a.items[i], 40, d[i / 3]);
    assert_null(a.items[0].spans[DFL_SPAN_DISTRACTOR]);
    /* depth 1: the needle ends where the context ends */
    assert_int_equal(a.items[8].spans[DFL_SPAN_ANSWER][0].end, 40 - 2);
    dfl_prompt_set_free(&a);
    dfl_noise_template_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_round_trip),   cmocka_unit_test(test_parse_list),
        cmocka_unit_test(test_parse_depths),       cmocka_unit_test(test_analyze_usage_errors),
        cmocka_unit_test(test_synthetic_defaults), cmocka_unit_test(test_synthetic_options_and_seed),
        cmocka_unit_test(test_synthetic_errors),   cmocka_unit_test(test_template_parse),
        cmocka_unit_test(test_template_errors),    cmocka_unit_test(test_template_prompts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
