/* test_outliers.c — the outlier statistics on synthetic data: kurtosis from raw moments,
 * the quantization error, the SQNR estimate against exact SQNR (inside its bounds,
 * within a few typical errors) for several distributions and bit widths, parameters
 * and list parsing, and the error paths of load and run. End-to-end checks on probe
 * dumps are in test_outliers.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/outliers.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double urand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

static void test_kurtosis(void **state)
{
    (void)state;
    enum { N = 200000 };
    double *x = malloc(sizeof(double) * N);
    for (int dist = 0; dist < 3; dist++) {
        double m[6] = {0};
        for (int i = 0; i < N; i++) {
            /* normal with an offset, uniform, heavy-tailed (normal cubed) */
            x[i] = dist == 0 ? 3 + 2 * nrand() : dist == 1 ? urand() : pow(nrand(), 3);
            m[0] += 1, m[1] += x[i], m[2] += x[i] * x[i], m[3] += x[i] * x[i] * x[i], m[4] += pow(x[i], 4);
        }
        double mu = m[1] / N, c2 = 0, c4 = 0;
        for (int i = 0; i < N; i++) c2 += pow(x[i] - mu, 2), c4 += pow(x[i] - mu, 4);
        double want = (c4 / N) / pow(c2 / N, 2), got = dfl_outliers_kurtosis(m);
        assert_true(fabs(got / want - 1) < 1e-6);
        if (dist == 0) assert_true(fabs(got - 3) < 0.1);
        if (dist == 1) assert_true(fabs(got - 1.8) < 0.05);
        if (dist == 2) assert_true(got > 20);
    }
    free(x);
    double one[6] = {1, 2, 4, 8, 16, 2}, flat[6] = {4, 8, 16, 32, 64, 2};
    assert_true(isnan(dfl_outliers_kurtosis(one)));  /* count < 2 */
    assert_true(isnan(dfl_outliers_kurtosis(flat))); /* zero variance */
}

static void test_qerr2(void **state)
{
    (void)state;
    assert_true(dfl_outliers_qerr2(0.3, 1.0) == 0.09);
    assert_true(fabs(dfl_outliers_qerr2(0.7, 1.0) - 0.09) < 1e-15);
    assert_true(dfl_outliers_qerr2(0.5, 1.0) == 0.25); /* half away from zero: 0.5 -> 1 */
    assert_true(dfl_outliers_qerr2(-2.0, 1.0) == 0);
    assert_true(dfl_outliers_qerr2(5.0, 0.0) == 0);
}

/* Exact SQNR against the estimate for n values drawn by `dist`, with k stored tops. */
static void check_sqnr(int dist, int n, int k, int bits, double *worst_sigma)
{
    float *x = malloc(sizeof(float) * (size_t)n);
    dfl_hist *h = calloc(1, sizeof *h);
    dfl_topk_item *store = malloc(sizeof(dfl_topk_item) * (size_t)k), *sorted = malloc(sizeof(dfl_topk_item) * (size_t)k);
    dfl_topk t;
    dfl_topk_init(&t, store, k);
    dfl_moments m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < n; i++) {
        double v = dist == 0 ? nrand() : dist == 1 ? 4 * nrand() * exp(nrand()) : (urand() < 0.001 ? 80 : nrand());
        x[i] = (float)v;
        dfl_hist_add(h, x[i]);
        dfl_moments_add(&m, x[i]);
        int32_t idx[4] = {i, 0, 0, 0};
        dfl_topk_push(&t, fabsf(x[i]), idx);
    }
    int32_t kept = dfl_topk_sorted(&t, sorted);
    float *top = malloc(sizeof(float) * (size_t)k);
    for (int i = 0; i < k; i++) top[i] = i < kept ? sorted[i].value : NAN;
    double delta = m.m[5] / (ldexp(1, bits - 1) - 1), sig = 0, noise = 0;
    for (int i = 0; i < n; i++) sig += (double)x[i] * x[i], noise += dfl_outliers_qerr2(x[i], delta);
    double exact = 10 * log10(sig / noise);
    dfl_sqnr_acc acc = {0, 0, 0, 0, 0};
    dfl_outliers_sqnr_add(&acc, h->count, top, k, m.m, bits);
    dfl_sqnr q = dfl_outliers_sqnr(&acc);
    assert_true(fabs(acc.signal / sig - 1) < 1e-12);
    assert_true(q.lo_db <= exact + 1e-9);
    assert_true(q.hi_db >= exact - 1e-9);
    assert_true(q.typ_err_db > 0);
    double s = fabs(q.db - exact) / q.typ_err_db;
    if (s > *worst_sigma) *worst_sigma = s;
    assert_true(fabs(q.db - exact) < 5 * q.typ_err_db + 1e-3);
    free(x);
    free(h);
    free(store);
    free(sorted);
    free(top);
}

static void test_sqnr_estimate_against_exact(void **state)
{
    (void)state;
    double worst = 0;
    int bits[4] = {8, 6, 4, 3};
    for (int dist = 0; dist < 3; dist++)
        for (int b = 0; b < 4; b++) check_sqnr(dist, 20000, 100, bits[b], &worst);
    /* a few values only; a single stored top */
    check_sqnr(0, 50, 1, 8, &worst);
    print_message("  SQNR: worst |estimate - exact| = %.2f typical errors\n", worst);
}

static void test_sqnr_edge_cases(void **state)
{
    (void)state;
    uint64_t hist[DFL_HIST_BINS] = {0};
    float top[1] = {NAN};
    double zero[6] = {10, 0, 0, 0, 0, 0};
    hist[0] = 10;
    dfl_sqnr_acc acc = {0, 0, 0, 0, 0};
    dfl_outliers_sqnr_add(&acc, hist, top, 1, zero, 8);   /* all zeros: no signal, no error */
    assert_true(acc.noise == 0 && acc.signal == 0);
    dfl_sqnr q = dfl_outliers_sqnr(&acc);
    assert_true(isinf(q.db));
    /* one value equal to the max quantizes exactly */
    memset(hist, 0, sizeof hist);
    float v = 3.0f;
    hist[dfl_hist_bin(v)] = 1;
    double m[6] = {1, 3, 9, 27, 81, 3};
    float t1[1] = {v};
    dfl_outliers_sqnr_add(&acc, hist, t1, 1, m, 4);
    assert_true(acc.noise == 0 && acc.noise_hi == 0 && acc.signal == 9);
    assert_true(isinf(dfl_outliers_sqnr(&acc).db));
}

static void test_params_and_lists(void **state)
{
    (void)state;
    dfl_outliers_params p = dfl_outliers_params_default();
    assert_int_equal(p.n_ranks, 5);
    assert_int_equal(p.ranks[4], 100);
    assert_int_equal(p.nbits, 3);
    assert_int_equal(p.bits[2], 4);
    assert_true(p.int8_layers == 0.25 && p.int8_tokens == 0.06 && p.massive_abs == 100 && p.massive_ratio == 1000);
    int64_t out[4];
    int n;
    dfl_error err;
    assert_int_equal(dfl_outliers_parse_list("--top", "1,10,100", 1, 4096, out, 4, &n, &err), DFL_OK);
    assert_int_equal(n, 3);
    assert_int_equal(out[2], 100);
    const char *bad[] = {"", "1,", ",1", "1,,2", "x", "0", "5000", "1,2,3,4,5", "-1", "1 2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dfl_outliers_parse_list("--top", bad[i], 1, 4096, out, 4, &n, &err), DFL_ERR_USAGE);
        assert_int_equal(n, 0);
        assert_non_null(strstr(err.msg, "--top"));
    }
}

static void test_run_and_load_errors(void **state)
{
    (void)state;
    dfl_outliers_params p = dfl_outliers_params_default();
    dfl_report *r = (dfl_report *)1;
    dfl_error err;
    assert_int_equal(dfl_outliers_run(&p, &r, &err), DFL_ERR_USAGE); /* no dumps */
    assert_null(r);
    p.dumps[0] = "/nonexistent/dir/x.h5";
    p.n_dumps = 1;
    p.ranks[0] = 0;
    assert_int_equal(dfl_outliers_run(&p, &r, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "--top"));
    p.ranks[0] = 1;
    p.int8_tokens = 0;
    assert_int_equal(dfl_outliers_run(&p, &r, &err), DFL_ERR_USAGE);
    p.int8_tokens = 0.06;
    p.n_ranks = 0;
    assert_int_equal(dfl_outliers_run(&p, &r, &err), DFL_ERR_USAGE);
    p.n_ranks = 5;
    assert_int_equal(dfl_outliers_run(&p, &r, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "x.h5"));
    dfl_outlier_dump *d = (dfl_outlier_dump *)1;
    int bits[1] = {1};
    assert_int_equal(dfl_outliers_load("x.h5", bits, 1, &d, &err), DFL_ERR_USAGE);
    assert_null(d);
    assert_int_equal(dfl_outliers_load("x.h5", bits, 99, &d, &err), DFL_ERR_USAGE);
    /* a file that is not HDF5 at all */
    char path[] = "/tmp/dfl_out_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello\n", 6), 6);
    close(fd);
    assert_int_not_equal(dfl_outliers_load(path, NULL, 0, &d, &err), DFL_OK);
    assert_null(d);
    unlink(path);
    dfl_outliers_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kurtosis),           cmocka_unit_test(test_qerr2),
        cmocka_unit_test(test_sqnr_estimate_against_exact), cmocka_unit_test(test_sqnr_edge_cases),
        cmocka_unit_test(test_params_and_lists),   cmocka_unit_test(test_run_and_load_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
