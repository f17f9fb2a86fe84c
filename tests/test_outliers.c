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

#include <hdf5.h>

#include "analysis/outliers.h"

/* xorshift64, one state per test (seeded in the test): a test run alone sees the same
 * data as in the whole suite. */
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

static void test_kurtosis(void **state)
{
    (void)state;
    enum { N = 200000 };
    rng64 r = {0x2545F4914F6CDD1Dull};
    double *x = malloc(sizeof(double) * N);
    for (int dist = 0; dist < 3; dist++) {
        double m[6] = {0};
        for (int i = 0; i < N; i++) {
            /* normal with an offset, uniform, heavy-tailed (normal cubed) */
            x[i] = dist == 0 ? 3 + 2 * nrand(&r) : dist == 1 ? urand(&r) : pow(nrand(&r), 3);
            m[0] += 1, m[1] += x[i], m[2] += x[i] * x[i], m[3] += x[i] * x[i] * x[i], m[4] += pow(x[i], 4);
        }
        double mu = m[1] / N, c2 = 0, c4 = 0;
        for (int i = 0; i < N; i++)
            c2 += pow(x[i] - mu, 2), c4 += pow(x[i] - mu, 4);
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
static void check_sqnr(rng64 *r, int dist, int n, int k, int bits, double *worst_sigma)
{
    float *x = malloc(sizeof(float) * (size_t)n);
    dfl_hist *h = calloc(1, sizeof *h);
    dfl_topk_item *store = malloc(sizeof(dfl_topk_item) * (size_t)k),
                  *sorted = malloc(sizeof(dfl_topk_item) * (size_t)k);
    dfl_topk t;
    dfl_topk_init(&t, store, k);
    dfl_moments m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < n; i++) {
        double v = dist == 0 ? nrand(r) : dist == 1 ? 4 * nrand(r) * exp(nrand(r)) : (urand(r) < 0.001 ? 80 : nrand(r));
        x[i] = (float)v;
        dfl_hist_add(h, x[i]);
        dfl_moments_add(&m, x[i]);
        int32_t idx[4] = {i, 0, 0, 0};
        dfl_topk_push(&t, fabsf(x[i]), idx);
    }
    int32_t kept = dfl_topk_sorted(&t, sorted);
    float *top = malloc(sizeof(float) * (size_t)k);
    for (int i = 0; i < k; i++)
        top[i] = i < kept ? sorted[i].value : NAN;
    double delta = m.m[5] / (ldexp(1, bits - 1) - 1), sig = 0, noise = 0;
    for (int i = 0; i < n; i++)
        sig += (double)x[i] * x[i], noise += dfl_outliers_qerr2(x[i], delta);
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
    rng64 r = {0x9E3779B97F4A7C15ull};
    int bits[4] = {8, 6, 4, 3};
    for (int dist = 0; dist < 3; dist++)
        for (int b = 0; b < 4; b++)
            check_sqnr(&r, dist, 20000, 100, bits[b], &worst);
    /* a few values only; a single stored top */
    check_sqnr(&r, 0, 50, 1, 8, &worst);
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
    dfl_outliers_sqnr_add(&acc, hist, top, 1, zero, 8); /* all zeros: no signal, no error */
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

static void test_parse_list(void **state)
{
    (void)state;
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

/* ------------------------------------------------- a dump against brute force */

/* A synthetic dump written here with HDF5 itself (not the library's writer): S samples
 * of L layers, N raw values per (sample, layer, kind), and what probe would store for
 * them — the K largest abs(x) with positions, the log histogram, the raw moments, the
 * per-channel max and counts — computed by loops written for this test (the bin from
 * frexp, not from dfl_hist_bin's bit trick). The raw values stay in memory for the
 * brute-force answers. */
enum { SS = 5, SL = 3, SK = 20, SH = 2, SD = 8, ST = 375, SN = ST * SD };
typedef struct synth {
    float x[2][SS][SL][SN]; /* [kind][sample][layer][value]; hidden values are [token][channel] */
} synth;

static int ref_bin(double a)
{
    if (!(a < 0x1p24)) return DFL_HIST_BINS - 1; /* >= 2^24, inf, NaN */
    if (a < 0x1p-24) return 0;
    int e2;
    double m = frexp(a, &e2); /* a = m 2^e2, m in [0.5, 1): octave e2 - 1, mantissa 2m in [1, 2) */
    return 1 + (e2 - 1 + 24) * DFL_HIST_SUB + (int)floor((2 * m - 1) * DFL_HIST_SUB);
}

static int cmp_desc_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static int cmp_abs_desc(const void *a, const void *b)
{
    double x = fabs((double)*(const float *)a), y = fabs((double)*(const float *)b);
    return (x < y) - (x > y);
}

/* Group `name` under o, with any missing groups on the way. */
static hid_t make_group(hid_t o, const char *name)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t g = H5Gcreate2(o, name, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose(lcpl);
    assert_true(g >= 0);
    return g;
}

static void put(hid_t g, const char *name, hid_t type, int nd, const hsize_t *dims, const void *data)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = H5Screate_simple(nd, dims, NULL), ds = H5Dcreate2(g, name, type, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);
    assert_true(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(ds), H5Sclose(sp), H5Pclose(lcpl);
}

static void attr_i64(hid_t o, const char *name, int64_t v)
{
    hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(o, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a), H5Sclose(sp);
}

static void attr_str(hid_t o, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v));
    hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(o, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, v);
    H5Aclose(a), H5Sclose(sp), H5Tclose(t);
}

/* Draw the values with r and write the dump; five spikes of 900..1900 in layer 0 of the
 * odd samples' hidden states are massive under the default thresholds (abs > 100 and
 * >= 1000 x a layer median near 0.67). */
static void write_synthetic_dump(const char *path, synth *z, rng64 *r)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    attr_str(f, "format", "difflens-dump");
    attr_i64(f, "format_version", 1);
    attr_str(f, "model_type", "llama");
    attr_i64(f, "num_layers", SL);
    attr_i64(f, "num_heads", SH);
    attr_i64(f, "topk", SK);
    static float top[SL][SK], vals[SN], cabs[SL][SD];
    static int32_t idx[SL][SK][4], idx2[SL][SK][2], tokens[ST];
    static uint64_t hist[SL][DFL_HIST_BINS];
    static uint32_t ccnt[SL][SD];
    double mom[SL][6];
    for (int s = 0; s < SS; s++) {
        char name[64];
        snprintf(name, sizeof name, "samples/%06d", s);
        hid_t g = make_group(f, name);
        hsize_t dt[1] = {ST};
        put(g, "tokens", H5T_STD_I32LE, 1, dt, tokens);
        for (int k = 0; k < 2; k++) {
            memset(hist, 0, sizeof hist);
            memset(cabs, 0, sizeof cabs), memset(ccnt, 0, sizeof ccnt);
            for (int l = 0; l < SL; l++) {
                float *x = z->x[k][s][l];
                for (int i = 0; i < SN; i++) {
                    double v = k == 0 ? 2 * nrand(r) + 0.3 : nrand(r) * (1 + 0.5 * l);
                    if (k == 1 && l == 0 && s % 2 == 1 && i % 700 == 3)
                        v = (i % 1400 ? -1 : 1) * (900 + urand(r) * 1000);
                    x[i] = (float)v;
                }
                double *m = mom[l];
                memset(m, 0, sizeof mom[l]);
                for (int i = 0; i < SN; i++) {
                    double v = x[i], a = fabs(v);
                    m[0] += 1, m[1] += v, m[2] += v * v, m[3] += v * v * v, m[4] += v * v * v * v;
                    if (a > m[5]) m[5] = a;
                    hist[l][ref_bin(a)]++;
                    if (k == 1) {
                        int c = i % SD;
                        if ((float)a > cabs[l][c]) cabs[l][c] = (float)a;
                        if (a >= 2.0) ccnt[l][c]++;
                    }
                }
                memcpy(vals, x, sizeof vals);
                qsort(vals, SN, sizeof *vals, cmp_abs_desc);
                for (int j = 0; j < SK; j++) {
                    top[l][j] = fabsf(vals[j]);
                    int32_t at[4] = {j % SH, j % 2, 50 + j, j};
                    memcpy(idx[l][j], at, sizeof at);
                    idx2[l][j][0] = j, idx2[l][j][1] = j % SD;
                }
            }
            hid_t o = make_group(g, k ? "outliers/hidden" : "outliers/logits");
            hsize_t d_top[2] = {SL, SK}, d_idx[3] = {SL, SK, k ? 2 : 4}, d_hist[2] = {SL, DFL_HIST_BINS},
                    d_mom[2] = {SL, 6}, d_ch[2] = {SL, SD};
            put(o, "top", H5T_IEEE_F32LE, 2, d_top, top);
            put(o, "top_index", H5T_STD_I32LE, 3, d_idx, k ? (void *)idx2 : (void *)idx);
            put(o, "hist", H5T_STD_U64LE, 2, d_hist, hist);
            put(o, "moments", H5T_IEEE_F64LE, 2, d_mom, mom);
            if (k == 1) {
                put(o, "channel_absmax", H5T_IEEE_F32LE, 2, d_ch, cabs);
                put(o, "channel_count", H5T_STD_U32LE, 2, d_ch, ccnt);
                hid_t ds = H5Dopen2(o, "channel_count", H5P_DEFAULT);
                hid_t sp = H5Screate(H5S_SCALAR),
                      a = H5Acreate2(ds, "alpha", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
                double alpha = 2.0;
                H5Awrite(a, H5T_NATIVE_DOUBLE, &alpha);
                H5Aclose(a), H5Sclose(sp), H5Dclose(ds);
            }
            H5Gclose(o);
        }
        H5Gclose(g);
    }
    H5Fclose(f);
}

/* abs of every value of kind k (layer l, or all layers when l < 0) over all samples,
 * descending, into out; returns the count. */
static size_t gather_abs(const synth *z, int k, int l, double *out)
{
    size_t n = 0;
    for (int s = 0; s < SS; s++)
        for (int j = 0; j < SL; j++)
            if (l < 0 || j == l)
                for (int i = 0; i < SN; i++)
                    out[n++] = fabs((double)z->x[k][s][j][i]);
    qsort(out, n, sizeof *out, cmp_desc_d);
    return n;
}

static void test_load_against_brute_force(void **state)
{
    (void)state;
    char path[] = "/tmp/dfl_out_synth_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    synth *z = malloc(sizeof *z);
    double *all = malloc(sizeof(double) * SS * SL * SN);
    assert_non_null(z);
    assert_non_null(all);
    rng64 r = {0x5DEECE66Dull};
    write_synthetic_dump(path, z, &r);

    dfl_error err;
    dfl_outlier_dump *d = NULL;
    assert_int_equal(dfl_outliers_load(path, NULL, 0, &d, &err), DFL_OK);
    assert_int_equal(d->S, SS);
    assert_int_equal(d->tokens, SS * ST);
    assert_int_equal(d->D, SD);
    for (int k = 0; k < 2; k++) {
        for (int l = -1; l < SL; l++) {
            size_t n = gather_abs(z, k, l, all);
            /* top-n: exact for n <= K, NaN beyond */
            for (int j = 1; j <= SK; j++)
                if (dfl_outliers_top(d, k, l, j) != all[j - 1])
                    fail_msg("kind %d layer %d top%d: %.9g, brute force %.9g", k, l, j, dfl_outliers_top(d, k, l, j),
                             all[j - 1]);
            assert_true(isnan(dfl_outliers_top(d, k, l, SK + 1)));
            /* the median within 1% of the exact one */
            double exact = 0.5 * (all[n / 2 - 1] + all[n / 2]), med = dfl_outliers_median(d, k, l);
            if (!(fabs(med / exact - 1) < 0.01)) fail_msg("kind %d layer %d median %g, exact %g", k, l, med, exact);
            if (l < 0) continue;
            /* kurtosis from the pooled raw moments against two-pass central moments */
            long double mu = 0, c2 = 0, c4 = 0;
            for (int s = 0; s < SS; s++)
                for (int i = 0; i < SN; i++)
                    mu += z->x[k][s][l][i];
            mu /= SS * SN;
            for (int s = 0; s < SS; s++)
                for (int i = 0; i < SN; i++) {
                    long double e = z->x[k][s][l][i] - mu;
                    c2 += e * e, c4 += e * e * e * e;
                }
            double want = (double)((c4 / (SS * SN)) / ((c2 / (SS * SN)) * (c2 / (SS * SN))));
            double got = dfl_outliers_kurtosis(d->kind[k].moments + l * 6);
            if (!(fabs(got / want - 1) < 1e-9))
                fail_msg("kind %d layer %d kurtosis %.12g, two-pass %.12g", k, l, got, want);
        }
    }
    dfl_outliers_free(d);

    /* massive activations under the default thresholds, through the tool's report: the
     * stored top-K entries above massive_abs and massive_ratio x the exact layer median */
    dfl_outliers_params p = dfl_outliers_params_default();
    p.dumps[0] = path;
    p.n_dumps = 1;
    p.per_layer = 1;
    dfl_report *rep = NULL;
    assert_int_equal(dfl_outliers_run(&p, &rep, &err), DFL_OK);
    const dfl_report_table *t = dfl_report_table_find(rep, "per_layer");
    assert_non_null(t);
    long c_layer = dfl_report_column_find(t, "layer"), c_massive = dfl_report_column_find(t, "massive");
    assert_true(c_layer >= 0 && c_massive >= 0);
    assert_int_equal(dfl_report_rows(t), 2 * SL);
    uint64_t total = 0;
    for (size_t row = 0; row < dfl_report_rows(t); row++) {
        int k = row >= SL, l = (int)dfl_report_cell_num(t, row, (size_t)c_layer);
        size_t n = gather_abs(z, k, l, all);
        double median = 0.5 * (all[n / 2 - 1] + all[n / 2]);
        uint64_t want = 0;
        for (int s = 0; s < SS; s++) {
            static float v[SN];
            memcpy(v, z->x[k][s][l], sizeof v);
            qsort(v, SN, sizeof *v, cmp_abs_desc);
            for (int j = 0; j < SK; j++)
                if (fabsf(v[j]) > p.massive_abs && fabsf(v[j]) >= p.massive_ratio * median) want++;
        }
        assert_true(dfl_report_cell_num(t, row, (size_t)c_massive) == (double)want);
        total += want;
    }
    assert_true(total > 0); /* the spikes were seen */
    dfl_report_destroy(rep);
    unlink(path);
    free(z);
    free(all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kurtosis),
        cmocka_unit_test(test_qerr2),
        cmocka_unit_test(test_sqnr_estimate_against_exact),
        cmocka_unit_test(test_sqnr_edge_cases),
        cmocka_unit_test(test_parse_list),
        cmocka_unit_test(test_run_and_load_errors),
        cmocka_unit_test(test_load_against_brute_force),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
