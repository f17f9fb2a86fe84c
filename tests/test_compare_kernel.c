/* test_compare_kernel.c — compare's per-token kernel against its naive twin and against
 * a float64 reference computed here from the definitions: the vectorized exp within 2 ulp
 * of expf on [−87, 0] and 0 below; KLD, both NLLs, Δp and same-top of random rows (and of
 * rows with NaN, ±Inf, ties, a row length that is not a multiple of the blocks) within
 * 1e-6 of float64; the percentile at fraction·(n − 1); the JS divergence's bounds. The
 * statistics over dumps are checked end to end in tests/test_compare.py. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/compare.h"
#include "analysis/compare_internal.h"
#include "base/rng.h"

static int ulp_distance(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return abs(ia - ib);
}

static void test_exp_against_expf(void **state)
{
    (void)state;
    int worst = 0;
    for (int i = 0; i <= 870000; i++) {
        float x = -87.0f * (float)i / 870000.0f;
        int d = ulp_distance(dfl__compare_exp(x), expf(x));
        worst = d > worst ? d : worst;
    }
    assert_true(worst <= 2);
    assert_true(dfl__compare_exp(0.0f) == 1.0f);
    assert_true(dfl__compare_exp(-88.0f) == 0.0f);
    assert_true(dfl__compare_exp(-1e30f) == 0.0f);
    assert_true(dfl__compare_exp(-INFINITY) == 0.0f);
}

/* float64 from the definitions: log-softmax, KLD = Σ p_b (ln p_b − ln p_q). */
static void reference(const float *xb, const float *xq, int64_t V, int32_t tok, dfl__compare_tok *o)
{
    double mb = -INFINITY, mq = -INFINITY, sb = 0, sq = 0, kld = 0;
    int64_t ib = 0, iq = 0;
    for (int64_t i = 0; i < V; i++) {
        if (xb[i] > mb) mb = xb[i], ib = i;
        if (xq[i] > mq) mq = xq[i], iq = i;
    }
    for (int64_t i = 0; i < V; i++)
        sb += exp(xb[i] - mb), sq += exp(xq[i] - mq);
    double lb = mb + log(sb), lq = mq + log(sq);
    for (int64_t i = 0; i < V; i++)
        kld += exp(xb[i] - lb) * ((xb[i] - lb) - (xq[i] - lq));
    o->kld = kld;
    o->nll_base = lb - xb[tok];
    o->nll_q = lq - xq[tok];
    o->dp = exp(xq[tok] - lq) - exp(xb[tok] - lb);
    o->same_top = ib == iq;
}

static void check_row(const float *xb, const float *xq, int64_t V, int32_t tok)
{
    dfl__compare_tok a, b, r;
    dfl__compare_row(xb, xq, V, tok, &a);
    dfl__compare_row_naive(xb, xq, V, tok, &b);
    reference(xb, xq, V, tok, &r);
    const dfl__compare_tok *t[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        assert_true(fabs(t[k]->kld - r.kld) <= 1e-6 * (1 + r.kld));
        assert_true(fabs(t[k]->nll_base - r.nll_base) <= 1e-6 * (1 + fabs(r.nll_base)));
        assert_true(fabs(t[k]->nll_q - r.nll_q) <= 1e-6 * (1 + fabs(r.nll_q)));
        assert_true(fabs(t[k]->dp - r.dp) <= 1e-6);
        assert_int_equal(t[k]->same_top, r.same_top);
    }
}

static void test_rows_against_float64(void **state)
{
    (void)state;
    dfl_rng g = dfl_rng_make(17, 0, 0);
    static const int64_t sizes[] = {1, 7, 64, 100, 1000, 32000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t V = sizes[s];
        float *xb = malloc((size_t)V * sizeof *xb), *xq = malloc((size_t)V * sizeof *xq);
        assert_non_null(xb);
        assert_non_null(xq);
        for (int rep = 0; rep < 5; rep++) {
            double spread = rep == 4 ? 40.0 : 3.0; /* rep 4: many terms below e^−87 */
            for (int64_t i = 0; i < V; i++) {
                xb[i] = (float)(spread * dfl_rng_normal(&g));
                xq[i] = xb[i] + (float)(0.05 * dfl_rng_normal(&g)) + (rep == 2 ? 12.5f : 0.0f);
            }
            check_row(xb, xq, V, (int32_t)dfl_rng_below(&g, (uint64_t)V));
        }
        if (V >= 7) { /* ties: the first maximum counts in both */
            xb[2] = xb[5] = 100.0f, xq[5] = xq[2] = 100.0f;
            check_row(xb, xq, V, 0);
            xq[5] = 100.5f; /* other's top moves to 5 */
            check_row(xb, xq, V, 0);
        }
        free(xb), free(xq);
    }
}

static void test_nonfinite_rows(void **state)
{
    (void)state;
    float xb[100], xq[100];
    for (int i = 0; i < 100; i++)
        xb[i] = xq[i] = (float)(i % 13) * 0.25f;
    xq[40] = -INFINITY; /* a masked logit: exp = 0, KLD infinite as the definition says */
    dfl__compare_tok a, b;
    dfl__compare_row(xb, xq, 100, 3, &a);
    dfl__compare_row_naive(xb, xq, 100, 3, &b);
    assert_true(isinf(a.kld) && a.kld > 0);
    assert_true(a.kld == b.kld && a.nll_q == b.nll_q);
    xq[40] = NAN;
    dfl__compare_row(xb, xq, 100, 3, &a);
    assert_true(isnan(a.kld));
}

static void test_percentile(void **state)
{
    (void)state;
    float v[5] = {1, 2, 4, 8, 16};
    assert_true(dfl_compare_percentile(v, 5, 0.0) == 1.0);
    assert_true(dfl_compare_percentile(v, 5, -1.0) == 1.0);
    assert_true(dfl_compare_percentile(v, 5, 1.0) == 16.0);
    assert_true(dfl_compare_percentile(v, 5, 0.5) == 4.0);
    /* position 0.9 · 4 = 3.6: 8 + 0.6 · (16 − 8) */
    assert_true(fabs(dfl_compare_percentile(v, 5, 0.9) - 12.8) < 1e-12);
    assert_true(fabs(dfl_compare_percentile(v, 5, 0.1) - 1.4) < 1e-12);
    assert_true(dfl_compare_percentile(v, 1, 0.7) == 1.0);
}

static void test_js(void **state)
{
    (void)state;
    float a[4] = {1, 0, 0, 0}, b[4] = {0, 1, 0, 0}, c[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    assert_true(fabs(dfl__compare_js(a, b, 4, 0) - log(2.0)) < 1e-12); /* disjoint: ln 2 */
    assert_true(dfl__compare_js(c, c, 4, 0) == 0.0);
    float d[4] = {-1, 0, 0, 0}, z[4] = {0, 0, 0, 0};
    assert_true(dfl__compare_js(a, d, 4, 1) == 0.0); /* |diff| rows */
    assert_true(isnan(dfl__compare_js(a, z, 4, 0)));
    /* p = (1/2, 1/2, 0, 0) against uniform: ½·ln(4/3) + ½·(½·ln(2/3)·2 + ¼·ln(2)·2)... from the sums */
    float e[4] = {0.5f, 0.5f, 0, 0};
    double m1 = 0.375, m0 = 0.125,
           want = 0.5 * (2 * 0.5 * log(0.5 / m1)) + 0.5 * (2 * 0.25 * log(0.25 / m1) + 2 * 0.25 * log(0.25 / m0));
    assert_true(fabs(dfl__compare_js(e, c, 4, 0) - want) < 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_against_expf),
        cmocka_unit_test(test_rows_against_float64),
        cmocka_unit_test(test_nonfinite_rows),
        cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_js),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
