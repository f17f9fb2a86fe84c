/* test_stats.c — each streaming statistic against brute force. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/prompts.h"
#include "analysis/stats.h"
#include "model/kernels.h"

/* xorshift64, one state per test, seeded in the test: a test run alone (test_stats NAME)
 * draws the same data as in the whole suite. */
typedef struct rng64 {
    uint64_t s;
} rng64;
static double urand(rng64 *r)
{
    r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
    return (double)(r->s >> 11) / 9007199254740992.0;
}
static double nrand(rng64 *r)
{
    return sqrt(-2 * log(urand(r) + 1e-300)) * cos(6.283185307179586 * urand(r));
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y ? 1 : 0;
}
static int cmp_asc_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static void test_topk_against_sort(void **st)
{
    (void)st;
    enum { N = 5000 };
    rng64 r = {0x9E3779B97F4A7C15ull};
    static float v[N], sorted[N];
    for (int i = 0; i < N; i++)
        v[i] = (float)(nrand(&r) * 10);
    int32_t ks[3] = {1, 100, 6000};
    for (int c = 0; c < 3; c++) {
        int32_t k = ks[c];
        dfl_topk_item *store = calloc((size_t)k, sizeof *store), *out = calloc((size_t)k, sizeof *out);
        dfl_topk t;
        dfl_topk_init(&t, store, k);
        for (int i = 0; i < N; i++) {
            int32_t idx[4] = {i, -i, 0, 1};
            dfl_topk_push(&t, v[i], idx);
        }
        int32_t n = dfl_topk_sorted(&t, out);
        memcpy(sorted, v, sizeof v);
        qsort(sorted, N, sizeof *sorted, cmp_desc);
        assert_int_equal(n, k < N ? k : N);
        for (int32_t i = 0; i < n; i++) {
            assert_true(out[i].value == sorted[i]);
            assert_true(v[out[i].idx[0]] == out[i].value && out[i].idx[1] == -out[i].idx[0]);
        }
        free(store), free(out);
    }
}

static void test_topk_merge_equals_single_heap(void **st)
{
    (void)st;
    dfl_topk_item sa[50], sb[50], sc[50], oa[50], oc[50];
    dfl_topk a, b, c;
    dfl_topk_init(&a, sa, 50), dfl_topk_init(&b, sb, 50), dfl_topk_init(&c, sc, 50);
    rng64 r = {0xD1B54A32D192ED03ull};
    for (int i = 0; i < 3000; i++) {
        int32_t idx[4] = {i, 0, 0, 0};
        float x = (float)nrand(&r);
        dfl_topk_push(i % 2 ? &a : &b, x, idx);
        dfl_topk_push(&c, x, idx);
    }
    float nan = NAN;
    int32_t idx[4] = {0};
    dfl_topk_push(&c, nan, idx); /* ignored */
    dfl_topk_merge(&a, &b);
    assert_int_equal(dfl_topk_sorted(&a, oa), 50);
    assert_int_equal(dfl_topk_sorted(&c, oc), 50);
    for (int i = 0; i < 50; i++) {
        assert_true(oa[i].value == oc[i].value);
        assert_int_equal(oa[i].idx[0], oc[i].idx[0]);
    }
}

static void test_hist_bins_match_edges(void **st)
{
    (void)st;
    static double edges[DFL_HIST_BINS + 1];
    dfl_hist_edges(edges);
    rng64 r = {0x8CB92BA72F3D8DD7ull};
    for (int i = 0; i < 200000; i++) {
        float x = (float)(exp(nrand(&r) * 12) * (urand(&r) < 0.5 ? -1 : 1));
        int b = dfl_hist_bin(x);
        double a = fabs((double)x);
        assert_true(b >= 0 && b < DFL_HIST_BINS);
        assert_true(a >= edges[b] && a < edges[b + 1]);
    }
    assert_int_equal(dfl_hist_bin(0.0f), 0);
    assert_int_equal(dfl_hist_bin(NAN), DFL_HIST_BINS - 1);
    assert_int_equal(dfl_hist_bin(INFINITY), DFL_HIST_BINS - 1);
    assert_int_equal(dfl_hist_bin(1.0f), 1 + 24 * 64);
    /* relative width of every regular bin is at most 1/64 */
    for (int b = 1; b < DFL_HIST_BINS - 1; b++)
        assert_true(edges[b + 1] / edges[b] - 1 <= 1.0 / 64 + 1e-12);
}

static void check_median(rng64 *r, int n, double spread, double offset)
{
    double *v = malloc((size_t)n * sizeof *v);
    dfl_hist *h = calloc(1, sizeof *h);
    for (int i = 0; i < n; i++) {
        float x = (float)(exp(nrand(r) * spread + offset) * (urand(r) < 0.3 ? -1 : 1));
        dfl_hist_add(h, x);
        v[i] = fabs((double)x);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_asc_d);
    double exact = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    double est = dfl_hist_quantile(h->count, 0.5);
    if (!(fabs(est / exact - 1) < 0.01)) fail_msg("median %g vs exact %g (n %d)", est, exact, n);
    /* other quantiles, same rule: the element of rank floor(q (n-1)) */
    double q90 = dfl_hist_quantile(h->count, 0.9);
    assert_true(fabs(q90 / v[(int)floor(0.9 * (n - 1))] - 1) < 0.01);
    free(v), free(h);
}

static void test_hist_median_within_one_percent(void **st)
{
    (void)st;
    rng64 r = {0xA0761D6478BD642Full};
    check_median(&r, 10001, 3.0, 0.0);
    check_median(&r, 20000, 0.1, 2.0);
    check_median(&r, 777, 8.0, -3.0);
    check_median(&r, 5000, 1.0, 10.0);
    dfl_hist *h = calloc(1, sizeof *h);
    assert_true(isnan(dfl_hist_quantile(h->count, 0.5)));
    free(h);
}

static void test_moments_against_direct(void **st)
{
    (void)st;
    dfl_moments a = {{0}}, b = {{0}};
    double s[5] = {0}, mx = 0;
    rng64 r = {0xE7037ED1A0B428DBull};
    for (int i = 0; i < 1000; i++) {
        double x = nrand(&r) * 3 + 0.5;
        dfl_moments_add(i < 400 ? &a : &b, x);
        for (int p = 0; p < 5; p++)
            s[p] += pow(x, p);
        mx = fmax(mx, fabs(x));
    }
    dfl_moments_merge(&a, &b);
    for (int p = 0; p < 5; p++)
        assert_true(fabs(a.m[p] - s[p]) <= 1e-9 * fmax(1, fabs(s[p])));
    assert_true(a.m[5] == mx);
}

static void test_share_segments_and_sums(void **st)
{
    (void)st;
    /* bos, ctx, answer x2, ctx, query, distractor, ctx, target */
    uint8_t seg[9] = {DFL_SEG_BOS,   DFL_SEG_CONTEXT,    DFL_SEG_ANSWER,  DFL_SEG_ANSWER, DFL_SEG_CONTEXT,
                      DFL_SEG_QUERY, DFL_SEG_DISTRACTOR, DFL_SEG_CONTEXT, DFL_SEG_TARGET};
    uint8_t sh[9];
    dfl_share_segments(seg, 9, sh);
    uint8_t want[9] = {DFL_SHARE_BOS,        DFL_SHARE_CONTEXT_BEFORE, DFL_SHARE_ANSWER,
                       DFL_SHARE_ANSWER,     DFL_SHARE_CONTEXT_AFTER,  DFL_SHARE_QUERY,
                       DFL_SHARE_DISTRACTOR, DFL_SHARE_CONTEXT_AFTER,  DFL_SHARE_TARGET};
    assert_memory_equal(sh, want, 9);
    float a[9] = {0.5f, 0.1f, 0.2f, -0.1f, 0.05f, 0.1f, 0.0f, -0.05f, 0.2f};
    double raw[7] = {0}, absm[7] = {0};
    double total = dfl_row_segment_sums(a, sh, 9, raw, absm);
    assert_true(fabs(total - 1.0) < 1e-6);
    assert_true(fabs(raw[DFL_SHARE_ANSWER] - 0.1) < 1e-7 && fabs(absm[DFL_SHARE_ANSWER] - 0.3) < 1e-7);
    assert_true(fabs(raw[DFL_SHARE_CONTEXT_AFTER] - 0.0) < 1e-7 && fabs(absm[DFL_SHARE_CONTEXT_AFTER] - 0.1) < 1e-7);
    /* no answer: all context is context_before */
    uint8_t seg2[3] = {DFL_SEG_BOS, DFL_SEG_CONTEXT, DFL_SEG_CONTEXT}, sh2[3];
    dfl_share_segments(seg2, 3, sh2);
    assert_int_equal(sh2[2], DFL_SHARE_CONTEXT_BEFORE);
    assert_string_equal(dfl_share_name(DFL_SHARE_CONTEXT_AFTER), "context_after");
}

static void test_entropy(void **st)
{
    (void)st;
    float u[4] = {0.25f, 0.25f, 0.25f, 0.25f}, d[3] = {1, 0, 0};
    assert_true(fabs(dfl_row_entropy(u, 4) - log(4.0)) < 1e-7);
    assert_true(dfl_row_entropy(d, 3) == 0.0);
}

static void test_fake_quant_formula(void **st)
{
    (void)st;
    float x[6] = {3.0f, -1.3f, 0.49f, 0.0f, -3.0f, 1.0f};
    float y[6];
    memcpy(y, x, sizeof x);
    dfl_fake_quant(y, 6, 3.0f, 3); /* 3 levels each side: scale 1 */
    float want[6] = {3, -1, 0, 0, -3, 1};
    for (int i = 0; i < 6; i++)
        assert_true(y[i] == want[i]);
    rng64 r = {0x8EBC6AF09C88C6E3ull};
    for (int bits = 2; bits <= 8; bits++) {
        float v[200], q[200], mx = 0;
        for (int i = 0; i < 200; i++)
            v[i] = (float)nrand(&r), mx = fmaxf(mx, fabsf(v[i]));
        memcpy(q, v, sizeof v);
        dfl_fake_quant(q, 200, mx, bits);
        /* brute force in double: the nearest of the 2L + 1 grid points k·Δ, k in
         * [−L, L], Δ = max/L (ties, which random values do not hit, excluded) */
        const int L = (1 << (bits - 1)) - 1;
        const double delta = (double)mx / L;
        for (int i = 0; i < 200; i++) {
            int best = -L;
            for (int k = -L; k <= L; k++)
                if (fabs(v[i] - k * delta) < fabs(v[i] - best * delta)) best = k;
            assert_true(fabs(q[i] - best * delta) <= 1e-6 * mx);
        }
    }
    float z[2] = {0, 0};
    dfl_fake_quant(z, 2, 0.0f, 4);
    assert_true(z[0] == 0 && z[1] == 0);
}

/* test_stats [NAME]: the whole suite, or the tests whose names match NAME (cmocka's
 * filter, * and ? as wildcards). */
int main(int argc, char **argv)
{
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_against_sort),
        cmocka_unit_test(test_topk_merge_equals_single_heap),
        cmocka_unit_test(test_hist_bins_match_edges),
        cmocka_unit_test(test_hist_median_within_one_percent),
        cmocka_unit_test(test_moments_against_direct),
        cmocka_unit_test(test_share_segments_and_sums),
        cmocka_unit_test(test_entropy),
        cmocka_unit_test(test_fake_quant_formula),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
