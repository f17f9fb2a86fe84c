/* test_needle.c — the needle-task generator: vocabulary ranges, answer depth, distinct
 * keys, non-overlapping needles, queries and spans consistent with the tokens,
 * determinism, targets, the prompt round trip through the JSONL writer and reader,
 * the PRNG, and parameter errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/rng.h"
#include "text/needle.h"
#include "text/prompts.h"

static int in(int32_t t, int32_t lo, int32_t hi)
{
    return t >= lo && t < hi;
}

/* Every invariant of one sample. */
static void check_sample(const dfl_needle_params *p, const int32_t *tok, const dfl_needle_layout *lay)
{
    const int64_t T = p->seq_len, C = dfl_needle_context_len(p), m = p->digits, nl = m + 2;
    assert_int_equal(tok[0], DFL_TOK_BOS);
    /* answer depth: start within one needle length of depth·(C − nl) */
    double want = 1.0 + lay->depth * (double)(C - nl);
    assert_true(fabs((double)lay->needle_pos[lay->answer] - want) <= (double)nl);
    if (p->depth >= 0) assert_true(lay->depth == p->depth);
    assert_true(lay->depth >= 0 && lay->depth <= 1);
    /* needles: inside the context, ascending, non-overlapping, distinct keys, right tokens */
    uint8_t *mark = calloc((size_t)T, 1);
    for (int i = 0; i < p->needles; i++) {
        int32_t s = lay->needle_pos[i];
        assert_true(s >= 1 && s + nl <= 1 + C);
        if (i) assert_true(s >= lay->needle_pos[i - 1] + nl);
        for (int j = 0; j < i; j++)
            assert_int_not_equal(lay->needle_key[i], lay->needle_key[j]);
        assert_int_equal(tok[s], DFL_TOK_NEEDLE);
        assert_int_equal(tok[s + 1], DFL_TOK_KEY0 + lay->needle_key[i]);
        for (int64_t d = 0; d < m; d++)
            assert_true(in(tok[s + 2 + d], DFL_TOK_DIGIT0, DFL_TOK_KEY0));
        for (int64_t k = 0; k < nl; k++)
            mark[s + k] = 1;
    }
    /* everything else in the context is filler */
    for (int64_t i = 1; i <= C; i++)
        if (!mark[i]) assert_true(in(tok[i], DFL_TOK_FILLER0, (int32_t)p->vocab_size));
    free(mark);
    /* queries: after the context, asking for needles; the last for the answer, with its digits */
    assert_int_equal(lay->query_needle[p->queries - 1], lay->answer);
    for (int q = 0; q < p->queries; q++) {
        int32_t s = lay->query_pos[q], n = lay->query_needle[q];
        assert_int_equal(s, 1 + C + q * (m + 3));
        assert_int_equal(tok[s], DFL_TOK_QUERY);
        assert_int_equal(tok[s + 1], DFL_TOK_KEY0 + lay->needle_key[n]);
        assert_int_equal(tok[s + 2], DFL_TOK_SEP);
        for (int64_t d = 0; d < m; d++)
            assert_int_equal(tok[s + 3 + d], tok[lay->needle_pos[n] + 2 + d]);
        /* earlier queries ask for distractors while there are enough of them */
        if (q < p->queries - 1 && p->queries - 1 <= p->needles - 1) {
            assert_int_not_equal(n, lay->answer);
            for (int r = 0; r < q; r++)
                assert_int_not_equal(n, lay->query_needle[r]);
        }
    }
    assert_int_equal(lay->query_pos[p->queries - 1] + 3 + m, T); /* the last digit ends the sample */
}

static void test_invariants(void **state)
{
    (void)state;
    const int cfg[][5] = {/* T, N, R, m, vocab */
                          {256, 4, 1, 4, 128},  {128, 4, 1, 2, 128},  {64, 1, 1, 1, 128},
                          {512, 16, 8, 3, 300}, {200, 6, 10, 2, 128}, {2000, 64, 64, 4, 1000}};
    const double depths[] = {-1, 0, 0.25, 0.5, 1};
    int32_t *tok = malloc(2000 * sizeof *tok);
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
            dfl_needle_params p = {cfg[c][4], cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][3], depths[d]};
            dfl_error err;
            if (dfl_needle_check(&p, &err)) fail_msg("%s", err.msg);
            for (uint64_t i = 0; i < 40; i++) {
                dfl_needle_layout lay;
                dfl_needle_sample(&p, 11, i % 2, i, tok, &lay);
                check_sample(&p, tok, &lay);
            }
        }
    free(tok);
}

static void test_depth_exact(void **state)
{
    (void)state;
    dfl_needle_params p = dfl_needle_params_default();
    int32_t tok[256];
    dfl_needle_layout lay;
    const int64_t C = dfl_needle_context_len(&p), nl = p.digits + 2;
    for (int k = 0; k <= 10; k++) {
        p.depth = k / 10.0;
        dfl_needle_sample(&p, 1, 0, (uint64_t)k, tok, &lay);
        assert_int_equal(lay.needle_pos[lay.answer], 1 + (int32_t)floor(p.depth * (double)(C - nl)));
    }
    /* random depth covers [0, 1] */
    p.depth = -1;
    double lo = 1, hi = 0;
    for (uint64_t i = 0; i < 500; i++) {
        dfl_needle_sample(&p, 1, 0, i, tok, &lay);
        lo = fmin(lo, lay.depth), hi = fmax(hi, lay.depth);
    }
    assert_true(lo < 0.05 && hi > 0.95);
}

static void test_deterministic(void **state)
{
    (void)state;
    dfl_needle_params p = dfl_needle_params_default();
    int32_t a[256], b[256];
    dfl_needle_layout la, lb;
    dfl_needle_sample(&p, 5, 0, 17, a, &la);
    dfl_needle_sample(&p, 5, 0, 17, b, &lb);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(&la, &lb, sizeof la);
    dfl_needle_sample(&p, 5, 0, 18, b, NULL); /* another index */
    assert_memory_not_equal(a, b, sizeof a);
    dfl_needle_sample(&p, 5, 1, 17, b, NULL); /* another stream */
    assert_memory_not_equal(a, b, sizeof a);
    dfl_needle_sample(&p, 6, 0, 17, b, NULL); /* another seed */
    assert_memory_not_equal(a, b, sizeof a);
}

static void test_targets(void **state)
{
    (void)state;
    dfl_needle_params p = dfl_needle_params_default();
    p.queries = 3;
    int32_t tok[256], tgt[256];
    dfl_needle_layout lay;
    dfl_needle_sample(&p, 2, 0, 0, tok, &lay);
    dfl_needle_targets(&p, tok, &lay, 0, 0, tgt);
    int n = 0;
    for (int i = 0; i < 256; i++) {
        if (tgt[i] < 0) continue;
        n++;
        assert_int_equal(tgt[i], tok[i + 1]);
        assert_true(in(tok[i + 1], DFL_TOK_DIGIT0, DFL_TOK_KEY0));
    }
    assert_int_equal(n, p.queries * p.digits);
    dfl_needle_targets(&p, tok, &lay, 0, 1, tgt); /* only the last query's digits */
    n = 0;
    for (int i = 0; i < 256; i++)
        if (tgt[i] >= 0) {
            n++;
            assert_true(i + 1 >= lay.query_pos[p.queries - 1] + 3);
        }
    assert_int_equal(n, p.digits);
    assert_int_equal(tgt[255], -1);
    dfl_needle_targets(&p, tok, &lay, 1, 0, tgt); /* every next token */
    for (int i = 0; i < 255; i++)
        assert_int_equal(tgt[i], tok[i + 1]);
    assert_int_equal(tgt[255], -1);
}

static void test_prompt(void **state)
{
    (void)state;
    dfl_needle_params p = dfl_needle_params_default();
    p.queries = 2;
    dfl_prompt pr[2];
    dfl_error err;
    for (int i = 0; i < 2; i++)
        assert_int_equal(dfl_needle_prompt(&p, 3, 1, (uint64_t)i, &pr[i], &err), DFL_OK);
    int32_t tok[256];
    dfl_needle_layout lay;
    dfl_needle_sample(&p, 3, 1, 0, tok, &lay);
    assert_memory_equal(pr[0].tokens, tok, sizeof tok);
    assert_string_equal(pr[0].id, "needle-1-0");
    assert_true(pr[0].has_depth && pr[0].depth == lay.depth);
    /* spans match the tokens */
    const dfl_span *a = pr[0].spans[DFL_SPAN_ANSWER];
    assert_int_equal(pr[0].n_spans[DFL_SPAN_ANSWER], 1);
    assert_int_equal(a[0].start, lay.needle_pos[lay.answer]);
    assert_int_equal(a[0].end - a[0].start, p.digits + 2);
    assert_int_equal(pr[0].n_spans[DFL_SPAN_DISTRACTOR], (size_t)p.needles - 1);
    for (size_t i = 0; i < pr[0].n_spans[DFL_SPAN_DISTRACTOR]; i++)
        assert_int_equal(tok[pr[0].spans[DFL_SPAN_DISTRACTOR][i].start], DFL_TOK_NEEDLE);
    const dfl_span *q = pr[0].spans[DFL_SPAN_QUERY], *t = pr[0].spans[DFL_SPAN_TARGET];
    assert_int_equal(pr[0].n_spans[DFL_SPAN_QUERY], 2);
    assert_int_equal(tok[q[1].start], DFL_TOK_QUERY);
    assert_int_equal(tok[q[1].end - 1], DFL_TOK_SEP); /* analysis row = the last <sep> */
    assert_int_equal(t[1].start, q[1].end);
    assert_int_equal(t[1].end, 256);
    /* the answer's digits are the last target */
    for (int d = 0; d < p.digits; d++)
        assert_int_equal(tok[t[1].start + d], tok[a[0].start + 2 + d]);
    /* text labels */
    assert_string_equal(pr[0].text[0], "<bos>");
    assert_string_equal(pr[0].text[q[1].start], "<query>");
    /* segments paint answer, query, target, distractor */
    uint8_t seg[256];
    dfl_prompt_segments(&pr[0], seg);
    assert_int_equal(seg[0], DFL_SEG_BOS);
    assert_int_equal(seg[a[0].start], DFL_SEG_ANSWER);
    assert_int_equal(seg[t[1].start], DFL_SEG_TARGET);
    /* round trip through the JSONL writer and reader */
    char dir[] = "/tmp/dfl_needle_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/p.jsonl", dir);
    assert_int_equal(dfl_prompt_set_write(path, pr, 2, 0, &err), DFL_OK);
    dfl_prompt_set back;
    assert_int_equal(dfl_prompt_set_read(path, &back, &err), DFL_OK);
    assert_int_equal(back.count, 2);
    assert_memory_equal(back.items[1].tokens, pr[1].tokens, 256 * sizeof(int32_t));
    assert_true(back.items[1].depth == pr[1].depth);
    for (int k = 0; k < DFL_SPAN_KINDS; k++) {
        assert_int_equal(back.items[1].n_spans[k], pr[1].n_spans[k]);
        if (pr[1].n_spans[k])
            assert_memory_equal(back.items[1].spans[k], pr[1].spans[k], pr[1].n_spans[k] * sizeof(dfl_span));
    }
    assert_int_equal(dfl_prompt_check_vocab(&back.items[0], 128, "p", &err), DFL_OK);
    dfl_prompt_set_free(&back);
    remove(path);
    rmdir(dir);
    for (int i = 0; i < 2; i++)
        dfl_prompt_free(&pr[i]);
    /* one needle: no distractor spans at all */
    p.needles = 1, p.queries = 1;
    assert_int_equal(dfl_needle_prompt(&p, 3, 0, 0, &pr[0], &err), DFL_OK);
    assert_int_equal(pr[0].n_spans[DFL_SPAN_DISTRACTOR], 0);
    assert_null(pr[0].spans[DFL_SPAN_DISTRACTOR]);
    dfl_prompt_free(&pr[0]);
    /* bad params: an error and an empty prompt */
    p.digits = 0;
    assert_int_equal(dfl_needle_prompt(&p, 3, 0, 0, &pr[0], &err), DFL_ERR_USAGE);
    assert_null(pr[0].tokens);
}

static void test_check_errors(void **state)
{
    (void)state;
    dfl_error err;
    dfl_needle_params d = dfl_needle_params_default(), p;
    assert_int_equal(dfl_needle_check(&d, &err), DFL_OK);
    p = d, p.vocab_size = 127;
    assert_int_equal(dfl_needle_check(&p, &err), DFL_ERR_USAGE);
    p = d, p.needles = 0;
    assert_int_equal(dfl_needle_check(&p, &err), DFL_ERR_USAGE);
    p = d, p.needles = 65;
    assert_int_equal(dfl_needle_check(&p, &err), DFL_ERR_USAGE);
    p = d, p.queries = 0;
    assert_int_equal(dfl_needle_check(&p, &err), DFL_ERR_USAGE);
    p = d, p.digits = 17;
    assert_int_equal(dfl_needle_check(&p, &err), DFL_ERR_USAGE);
    p = d, p.depth = 1.5;
    assert_int_equal(dfl_needle_check(&p, &err), DFL_ERR_USAGE);
    p = d, p.depth = NAN;
    assert_int_equal(dfl_needle_check(&p, &err), DFL_ERR_USAGE);
    p = d, p.seq_len = 1 + 7 + 2 * 4 * 6 - 1; /* one short of the minimum */
    assert_int_equal(dfl_needle_check(&p, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "at least 56"));
    p.seq_len++;
    assert_int_equal(dfl_needle_check(&p, &err), DFL_OK);
}

static void test_rng(void **state)
{
    (void)state;
    dfl_rng r = dfl_rng_make(1, 0, 0);
    double s = 0, s2 = 0;
    int counts[7] = {0};
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double z = dfl_rng_normal(&r);
        s += z, s2 += z * z;
        counts[dfl_rng_below(&r, 7)]++;
        double u = dfl_rng_uniform(&r);
        assert_true(u >= 0 && u < 1);
    }
    assert_true(fabs(s / n) < 0.01 && fabs(s2 / n - 1) < 0.02);
    for (int k = 0; k < 7; k++)
        assert_true(abs(counts[k] - n / 7) < n / 70);
    dfl_rng a = dfl_rng_make(1, 0, 0), b = dfl_rng_make(1, 0, 0), c = dfl_rng_make(1, 0, 1);
    assert_true(dfl_rng_next(&a) == dfl_rng_next(&b));
    assert_true(dfl_rng_next(&a) != dfl_rng_next(&c));
    char buf[16];
    assert_string_equal(dfl_needle_token_text(7, buf, sizeof buf), "2");
    assert_string_equal(dfl_needle_token_text(16, buf, sizeof buf), "K01");
    assert_string_equal(dfl_needle_token_text(100, buf, sizeof buf), "w100");
    assert_string_equal(dfl_needle_token_text(3, buf, sizeof buf), "<sep>");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariants), cmocka_unit_test(test_depth_exact), cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_targets),    cmocka_unit_test(test_prompt),      cmocka_unit_test(test_check_errors),
        cmocka_unit_test(test_rng),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
