/* test_kernels.c — every fast kernel against its naive twin, and the RoPE frequency
 * rules against their formulas. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels.h"
#include "model/kernels_norm.h"
#include "model/kernels_polynorm.h"
#include "model/model.h"
#include "model/safetensors.h"

/* xorshift, fixed seed: reproducible inputs in [-1, 1) */
static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float *rand_array(size_t n, float scale)
{
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = frand() * scale;
    return a;
}
static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void test_matmul_matches_naive(void **state)
{
    (void)state;
    const int64_t n = 37, in = 70, out = 53;
    float *x = rand_array(n * in, 1), *w = rand_array(out * in, 1);
    float *y = calloc(n * out, 4), *yr = calloc(n * out, 4);
    dfl_matmul_xwt(y, x, w, n, in, out);
    dfl_matmul_xwt_naive(yr, x, w, n, in, out);
    assert_true(max_abs_diff(y, yr, n * out) < 1e-5);
    free(x), free(w), free(y), free(yr);
    /* known values (worked by hand): x[2, 3] · w[2, 3]ᵀ with small integers, exact in
     * f32, so both kernels must give them exactly */
    float xs[6] = {1, 2, 3, 4, 5, 6}, ws[6] = {1, 0, -1, 2, 1, 0}, want[4] = {-2, 4, -2, 13}, ys[4], yn[4];
    dfl_matmul_xwt(ys, xs, ws, 2, 3, 2);
    dfl_matmul_xwt_naive(yn, xs, ws, 2, 3, 2);
    for (int i = 0; i < 4; i++) {
        assert_true(ys[i] == want[i]);
        assert_true(yn[i] == want[i]);
    }
}

/* W in bf16, f16 and unaligned f32, against the naive twin (which converts each element
 * with the scalar routines of safetensors.c), over more rows than one panel holds. */
static void test_matmul_wmat_dtypes(void **state)
{
    (void)state;
    const int64_t n = 5, in = (int64_t)(DFL_PANEL_BYTES / 4 / 40) + 3, out = 97; /* 40-row panels: 3 panels */
    float *x = rand_array((size_t)(n * in), 1), *w = rand_array((size_t)(out * in), 1);
    float *y = calloc((size_t)(n * out), 4), *yr = calloc((size_t)(n * out), 4);
    float *scratch = malloc(dfl_matmul_scratch(in) * sizeof(float));
    unsigned char *raw = malloc((size_t)(out * in) * 4 + 1);
    assert_true(dfl_matmul_scratch(in) / (size_t)in < (size_t)out); /* more than one panel */
    /* cases: bf16, f16 (vector paths), bf16 and f16 at an odd address (the byte-wise
     * path), f32 at an odd address (copied panel by panel) */
    for (int c = 0; c < 5; c++) {
        int dt = c < 4 ? c % 2 : 2, odd = c >= 2;
        dfl_wmat m = {raw + odd, dt == 0 ? DFL_DTYPE_BF16 : dt == 1 ? DFL_DTYPE_F16 : DFL_DTYPE_F32, out, in, 0};
        unsigned char *dst = raw + odd;
        for (int64_t i = 0; i < out * in; i++) {
            if (dt == 2) {
                memcpy(dst + i * 4, &w[i], 4);
                continue;
            }
            uint16_t h = dt == 0 ? dfl_f32_to_bf16(w[i]) : dfl_f32_to_f16(w[i]);
            dst[2 * i] = (unsigned char)(h & 0xff), dst[2 * i + 1] = (unsigned char)(h >> 8);
        }
        dfl_matmul_wmat(y, x, &m, n, scratch);
        dfl_matmul_wmat_naive(yr, x, &m, n);
        /* sums of ~2e5 products of size ~1: f32 accumulation error well below 1e-3 */
        assert_true(max_abs_diff(y, yr, (size_t)(n * out)) < 1e-3);
        /* the twin by hand for one element: bf16 values are the top halves of f32 */
        double acc = 0;
        for (int64_t k = 0; k < in; k++) {
            float v = dt == 0   ? dfl_bf16_to_f32(dfl_f32_to_bf16(w[60 * in + k]))
                      : dt == 1 ? dfl_f16_to_f32(dfl_f32_to_f16(w[60 * in + k]))
                                : w[60 * in + k];
            acc += (double)x[2 * in + k] * v;
        }
        assert_true(fabs(acc - yr[2 * out + 60]) <= 1e-6 * fmax(1.0, fabs(acc)));
    }
    free(x), free(w), free(y), free(yr), free(scratch), free(raw);
}

/* One scratch for all the weights of a model: sized for the widest, used by narrower
 * ones whose panel rows do not divide it evenly (the 8B shape: 14336 and 4096 columns).
 * A guard after the scratch must survive. */
static void test_matmul_scratch_serves_narrower(void **state)
{
    (void)state;
    const int64_t wide = 14336, in = 4096, n = 2;
    const int64_t out = (int64_t)(DFL_PANEL_BYTES / 4 / (size_t)in) + 5; /* two panels */
    size_t sn = dfl_matmul_scratch(wide), guard = 4096;
    assert_true(sn >= dfl_matmul_scratch(in));
    float *scratch = malloc((sn + guard) * sizeof(float));
    for (size_t i = 0; i < guard; i++)
        scratch[sn + i] = 12345.0f;
    uint16_t *raw = malloc((size_t)(out * in) * 2);
    for (int64_t i = 0; i < out * in; i++)
        raw[i] = dfl_f32_to_bf16(0.001f * (float)(i % 7));
    float *x = rand_array((size_t)(n * in), 1), *y = malloc((size_t)(n * out) * 4);
    dfl_wmat m = {raw, DFL_DTYPE_BF16, out, in, 0};
    dfl_matmul_wmat(y, x, &m, n, scratch);
    for (size_t i = 0; i < guard; i++)
        assert_true(scratch[sn + i] == 12345.0f);
    free(scratch), free(raw), free(x), free(y);
}

static void test_rmsnorm_matches_naive(void **state)
{
    (void)state;
    const int64_t n = 40, d = 33;
    float *x = rand_array(n * d, 3), *g = rand_array(d, 1);
    float *y = calloc(n * d, 4), *yr = calloc(n * d, 4);
    dfl_rmsnorm(y, x, g, n, d, 1e-5f, 0.7f);
    dfl_rmsnorm_naive(yr, x, g, n, d, 1e-5f, 0.7f);
    assert_true(max_abs_diff(y, yr, n * d) < 1e-5);
    /* no gain, in place: each row has unit RMS */
    dfl_rmsnorm(x, x, NULL, n, d, 0.0f, 1.0f);
    double ss = 0;
    for (int j = 0; j < d; j++)
        ss += (double)x[j] * x[j];
    assert_true(fabs(ss / d - 1.0) < 1e-5);
    free(x), free(g), free(y), free(yr);
}

static void check_rope(int interleaved)
{
    const int64_t T = 50, nh = 3, d = 8, ld = 30;
    double inv[4];
    dfl_rope_params p = {10000.0, DFL_ROPE_NONE, 1, 1, 4, 8192};
    dfl_rope_inv_freq(inv, d, &p);
    float *c = malloc(T * d / 2 * 4), *s = malloc(T * d / 2 * 4);
    dfl_rope_tables(c, s, inv, d, T);
    float *x = rand_array(T * ld, 1), *xr = malloc(T * ld * 4);
    memcpy(xr, x, T * ld * 4);
    dfl_rope_apply(x, T, ld, nh, d, c, s, interleaved);
    dfl_rope_apply_naive(xr, T, ld, nh, d, c, s, interleaved);
    assert_true(max_abs_diff(x, xr, T * ld) < 1e-6);
    free(c), free(s), free(x), free(xr);
}

static void test_rope_interleaved_matches_naive(void **state)
{
    (void)state;
    check_rope(1);
}
static void test_rope_half_matches_naive(void **state)
{
    (void)state;
    check_rope(0);
}

static void test_rope_rotation_by_hand(void **state)
{
    (void)state;
    /* d = 4, position 1: pair j rotates by theta^(-2j/4) radians */
    double inv[2];
    dfl_rope_params p = {100.0, DFL_ROPE_NONE, 1, 1, 4, 8192};
    dfl_rope_inv_freq(inv, 4, &p);
    assert_true(fabs(inv[0] - 1.0) < 1e-12 && fabs(inv[1] - 0.1) < 1e-12);
    float c[4], s[4];
    dfl_rope_tables(c, s, inv, 4, 2);
    float half[8] = {0, 0, 0, 0, 1, 2, 3, 4}, il[8] = {0, 0, 0, 0, 1, 3, 2, 4};
    dfl_rope_apply(half, 2, 4, 1, 4, c, s, 0);
    dfl_rope_apply(il, 2, 4, 1, 4, c, s, 1);
    /* position 0 is the identity */
    for (int i = 0; i < 4; i++)
        assert_true(half[i] == 0 && il[i] == 0);
    /* The reference is complex multiplication, not the kernel's real formula: pair
     * (a, b) is a + ib, and a rotation by θ is a product with e^(iθ). Rotate-half
     * pairs are (x0, x2), (x1, x3); interleaved pairs (x0, x1), (x2, x3). */
    double complex z0 = (1.0 + 3.0 * I) * cexp(I * 1.0), z1 = (2.0 + 4.0 * I) * cexp(I * 0.1);
    assert_float_equal(half[4], creal(z0), 1e-6);
    assert_float_equal(half[6], cimag(z0), 1e-6);
    assert_float_equal(half[5], creal(z1), 1e-6);
    assert_float_equal(half[7], cimag(z1), 1e-6);
    assert_float_equal(il[4], creal(z0), 1e-6);
    assert_float_equal(il[5], cimag(z0), 1e-6);
    assert_float_equal(il[6], creal(z1), 1e-6);
    assert_float_equal(il[7], cimag(z1), 1e-6);
}

/* What RoPE is for: q rotated to position m dotted with k rotated to position n depends
 * only on m − n. Checked for both pairings on random vectors. */
static void test_rope_relative_position(void **state)
{
    (void)state;
    enum { D = 16, T = 12 };
    double inv[D / 2];
    dfl_rope_params p = {10000.0, DFL_ROPE_NONE, 1, 1, 4, 8192};
    dfl_rope_inv_freq(inv, D, &p);
    float c[T * D / 2], sn[T * D / 2];
    dfl_rope_tables(c, sn, inv, D, T);
    float *q0 = rand_array(D, 1), *k0 = rand_array(D, 1);
    for (int il = 0; il < 2; il++) {
        float q[T * D], k[T * D]; /* [T, D]: the same vector at every position */
        for (int t = 0; t < T; t++)
            memcpy(q + t * D, q0, sizeof(float) * D), memcpy(k + t * D, k0, sizeof(float) * D);
        dfl_rope_apply(q, T, D, 1, D, c, sn, il);
        dfl_rope_apply(k, T, D, 1, D, c, sn, il);
        for (int delta = 0; delta < 4; delta++) {
            double ref = 0;
            for (int j = 0; j < D; j++)
                ref += (double)q[delta * D + j] * k[j]; /* m = delta, n = 0 */
            for (int n = 1; n + delta < T; n++) {
                double dot = 0;
                for (int j = 0; j < D; j++)
                    dot += (double)q[(n + delta) * D + j] * k[n * D + j];
                assert_true(fabs(dot - ref) < 1e-4);
            }
        }
    }
    free(q0), free(k0);
}

static void test_rope_scaling_rules(void **state)
{
    (void)state;
    const int64_t d = 128;
    double base[64], lin[64], l3[64];
    dfl_rope_params p = {500000.0, DFL_ROPE_NONE, 8, 1, 4, 8192};
    dfl_rope_inv_freq(base, d, &p);
    p.kind = DFL_ROPE_LINEAR;
    dfl_rope_inv_freq(lin, d, &p);
    p.kind = DFL_ROPE_LLAMA3;
    dfl_rope_inv_freq(l3, d, &p);
    const double pi = 3.14159265358979323846;
    int seen_low = 0, seen_mid = 0, seen_high = 0;
    for (int j = 0; j < d / 2; j++) {
        assert_true(fabs(lin[j] - base[j] / 8) < 1e-15);
        double wl = 2 * pi / base[j];
        if (wl < 8192.0 / 4) {
            assert_true(l3[j] == base[j]);
            seen_high++;
        } else if (wl > 8192.0 / 1) {
            assert_true(fabs(l3[j] - base[j] / 8) < 1e-18);
            seen_low++;
        } else {
            double sm = (8192.0 / wl - 1) / (4 - 1);
            assert_true(fabs(l3[j] - ((1 - sm) * base[j] / 8 + sm * base[j])) < 1e-15);
            seen_mid++;
        }
    }
    assert_true(seen_low && seen_mid && seen_high);
}

static void test_softmax_causal_matches_naive(void **state)
{
    (void)state;
    const int64_t n = 9, ncols = 20, ld = 24;
    int64_t lim[9];
    for (int i = 0; i < n; i++)
        lim[i] = 11 + i;
    float *s = rand_array(n * ld, 20), *sr = malloc(n * ld * 4);
    memcpy(sr, s, n * ld * 4);
    dfl_softmax_causal(s, n, ncols, ld, lim);
    dfl_softmax_causal_naive(sr, n, ncols, ld, lim);
    assert_true(max_abs_diff(s, sr, n * ld) < 1e-6);
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int j = 0; j < ncols; j++) {
            if (j > lim[i]) assert_true(s[i * ld + j] == 0.0f);
            sum += s[i * ld + j];
        }
        assert_true(fabs(sum - 1) < 1e-5);
    }
    free(s), free(sr);
}

static void test_softmax_window_matches_naive(void **state)
{
    (void)state;
    const int64_t n = 9, ncols = 20, ld = 24;
    int64_t lim[9], lo[9];
    for (int i = 0; i < n; i++)
        lim[i] = 11 + i, lo[i] = i < 3 ? 0 : lim[i] - 4; /* window 5 */
    float *s = rand_array(n * ld, 20), *sr = malloc(n * ld * 4);
    memcpy(sr, s, n * ld * 4);
    dfl_softmax_window(s, n, ncols, ld, lo, lim);
    dfl_softmax_window_naive(sr, n, ncols, ld, lo, lim);
    assert_true(max_abs_diff(s, sr, n * ld) < 1e-6);
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int j = 0; j < ncols; j++) {
            if (j > lim[i] || j < lo[i]) assert_true(s[i * ld + j] == 0.0f);
            sum += s[i * ld + j];
        }
        assert_true(fabs(sum - 1) < 1e-5);
    }
    free(s), free(sr);
}

static void test_softmax_large_logits_stay_finite(void **state)
{
    (void)state;
    float s[4] = {1000.0f, 999.0f, -1000.0f, 5.0f};
    int64_t lim[1] = {2};
    dfl_softmax_causal(s, 1, 4, 4, lim);
    assert_true(isfinite(s[0]) && fabs(s[0] - 1 / (1 + exp(-1.0))) < 1e-6);
    assert_true(s[3] == 0.0f);
}

static void test_swiglu_matches_naive(void **state)
{
    (void)state;
    const int64_t n = 30, f = 41;
    float *g = rand_array(n * f, 6), *u = rand_array(n * f, 2), *gr = malloc(n * f * 4);
    memcpy(gr, g, n * f * 4);
    dfl_swiglu(g, u, n, f);
    dfl_swiglu_naive(gr, u, n, f);
    assert_true(max_abs_diff(g, gr, n * f) < 1e-5);
    free(g), free(u), free(gr);
}

/* LayerNorm against its twin (with and without gain and bias, in place), and by hand:
 * [1, 2, 3, 6] has mean 3 and biased variance 3.5. */
static void test_layernorm_matches_naive(void **state)
{
    (void)state;
    const int64_t n = 33, d = 70;
    float *x = rand_array(n * d, 20), *g = rand_array(d, 1), *b = rand_array(d, 1);
    float *y = malloc(n * d * 4), *yr = malloc(n * d * 4);
    for (int c = 0; c < 2; c++) {
        dfl_layernorm(y, x, c ? g : NULL, c ? b : NULL, n, d, 1e-5f);
        dfl_layernorm_naive(yr, x, c ? g : NULL, c ? b : NULL, n, d, 1e-5f);
        assert_true(max_abs_diff(y, yr, n * d) < 1e-5);
    }
    memcpy(y, x, n * d * 4);
    dfl_layernorm(y, y, g, b, n, d, 1e-5f);
    assert_true(max_abs_diff(y, yr, n * d) < 1e-5);
    float v[4] = {1, 2, 3, 6}, gain[4] = {1, 1, 2, 1}, bias[4] = {0, 0, 0, 10}, out[4];
    dfl_layernorm(out, v, gain, bias, 1, 4, 0.0f);
    double sd = sqrt(3.5), want[4] = {-2 / sd, -1 / sd, 0, 3 / sd + 10};
    for (int i = 0; i < 4; i++)
        assert_true(fabs(out[i] - want[i]) < 1e-6);
    free(x), free(g), free(b), free(y), free(yr);
}

/* Both GELUs against their twins and known values: gelu(1) = Φ(1) = 0.8413447460685429,
 * gelu_new(1) = 0.5·(1 + tanh(√(2/π)·1.044715)) = 0.8411919906082768. */
static void test_gelu_matches_naive(void **state)
{
    (void)state;
    const size_t n = 3001;
    float *x = rand_array(n, 8), *a = malloc(n * 4), *r = malloc(n * 4);
    for (int form = 0; form < 2; form++) {
        memcpy(a, x, n * 4), memcpy(r, x, n * 4);
        if (form)
            dfl_gelu_erf(a, n), dfl_gelu_erf_naive(r, n);
        else
            dfl_gelu_tanh(a, n), dfl_gelu_tanh_naive(r, n);
        assert_true(max_abs_diff(a, r, n) < 1e-5);
    }
    float one[2] = {1.0f, 1.0f};
    dfl_gelu_erf(one, 1), dfl_gelu_tanh(one + 1, 1);
    assert_true(fabs(one[0] - 0.8413447460685429) < 1e-6);
    assert_true(fabs(one[1] - 0.8411919906082768) < 1e-6);
    free(x), free(a), free(r);
}

/* QuickGELU against its twin and a known value: 1 · σ(1.702) = 0.8457957659328212. */
static void test_quick_gelu_matches_naive(void **state)
{
    (void)state;
    const size_t n = 3001;
    float *x = rand_array(n, 8), *a = malloc(n * 4), *r = malloc(n * 4);
    memcpy(a, x, n * 4), memcpy(r, x, n * 4);
    dfl_quick_gelu(a, n), dfl_quick_gelu_naive(r, n);
    assert_true(max_abs_diff(a, r, n) < 1e-5);
    float one = 1.0f;
    dfl_quick_gelu(&one, 1);
    assert_true(fabs(one - 0.8457957659328212) < 1e-6);
    free(x), free(a), free(r);
}

/* The [in, out] matmul (GPT-2's Conv1D) in f32, bf16 and f16 with small panels (the
 * accumulation over input panels), against its twin and by hand. */
static void test_matmul_io_matches_naive(void **state)
{
    (void)state;
    const int64_t n = 9, in = 75, out = 31;
    float *x = rand_array(n * in, 1), *w = rand_array(in * out, 1);
    float *y = malloc(n * out * 4), *yr = malloc(n * out * 4), *scratch = malloc(7 * out * 4);
    uint16_t *h = malloc(in * out * 2);
    for (int c = 0; c < 3; c++) {
        dfl_wmat m = {w, DFL_DTYPE_F32, in, out, 0};
        if (c) {
            for (int64_t i = 0; i < in * out; i++)
                h[i] = c == 1 ? dfl_f32_to_bf16(w[i]) : dfl_f32_to_f16(w[i]);
            m.data = h;
            m.dtype = c == 1 ? DFL_DTYPE_BF16 : DFL_DTYPE_F16;
        }
        dfl_matmul_wmat_io(y, x, &m, n, scratch, 7 * (size_t)out); /* 7-row panels: 11 of them */
        dfl_matmul_wmat_io_naive(yr, x, &m, n);
        assert_true(max_abs_diff(y, yr, n * out) < 1e-5);
    }
    /* x[1, 2] · W[2, 3] = [1·1 + 2·4, 1·2 + 2·5, 1·3 + 2·6] */
    float xs[2] = {1, 2}, ws[6] = {1, 2, 3, 4, 5, 6}, ys[3];
    dfl_wmat m = {ws, DFL_DTYPE_F32, 2, 3, 0};
    dfl_matmul_wmat_io(ys, xs, &m, 1, scratch, 3);
    assert_true(ys[0] == 9 && ys[1] == 12 && ys[2] == 15);
    free(x), free(w), free(y), free(yr), free(scratch), free(h);
}

/* GeGLU (both GELUs), soft-capping and the longrope frequencies against their twins and
 * by hand: softcap(50) at cap 50 is 50·tanh(1); longrope divides θ^(−2j/d) by factor j. */
static void test_geglu_softcap_longrope(void **state)
{
    (void)state;
    const int64_t n = 17, f = 93;
    float *g = rand_array(n * f, 6), *u = rand_array(n * f, 2), *a = malloc(n * f * 4), *r = malloc(n * f * 4);
    for (int erf = 0; erf < 2; erf++) {
        memcpy(a, g, n * f * 4), memcpy(r, g, n * f * 4);
        dfl_geglu(a, u, n, f, erf);
        dfl_geglu_naive(r, u, n, f, erf);
        assert_true(max_abs_diff(a, r, n * f) < 1e-5);
    }
    memcpy(a, g, n * f * 4), memcpy(r, g, n * f * 4);
    dfl_softcap(a, (size_t)(n * f), 2.5f);
    dfl_softcap_naive(r, (size_t)(n * f), 2.5f);
    assert_true(max_abs_diff(a, r, n * f) < 1e-6);
    for (int64_t i = 0; i < n * f; i++)
        assert_true(fabsf(a[i]) < 2.5f);
    float x = 50.0f;
    dfl_softcap(&x, 1, 50.0f);
    assert_true(fabs(x - 50.0 * tanh(1.0)) < 1e-5);
    double inv[4], fac[4] = {1.0, 2.0, 4.0, 8.0};
    dfl_rope_inv_freq_longrope(inv, 8, 10000.0, fac);
    for (int j = 0; j < 4; j++)
        assert_true(fabs(inv[j] - pow(10000.0, -2.0 * j / 8.0) / fac[j]) < 1e-15);
    free(g), free(u), free(a), free(r);
}

/* PolyNorm against its twin, and one row by hand: g = (1, −2), u = 1, w = (0, 0, 1),
 * b = 0.5 gives N(g) + 0.5 = g / sqrt(2.5 + eps) + 0.5. */
static void test_polynorm_matches_naive(void **state)
{
    (void)state;
    const int64_t n = 30, f = 41;
    float *g = rand_array(n * f, 7), *u = rand_array(n * f, 3), *gr = malloc(n * f * 4);
    const float w[3] = {0.3f, -0.45f, 0.6f}, b[1] = {0.1f};
    memcpy(gr, g, n * f * 4);
    dfl_polynorm_glu(g, u, n, f, w, b, DFL_POLYNORM_EPS);
    dfl_polynorm_glu_naive(gr, u, n, f, w, b, DFL_POLYNORM_EPS);
    assert_true(max_abs_diff(g, gr, n * f) < 1e-5);
    float h[2] = {1.0f, -2.0f}, one[2] = {1.0f, 1.0f};
    const float w2[3] = {0.0f, 0.0f, 1.0f}, b2[1] = {0.5f};
    dfl_polynorm_glu(h, one, 1, 2, w2, b2, 1e-6);
    assert_true(fabs(h[0] - (1.0 / sqrt(2.5 + 1e-6) + 0.5)) < 1e-6);
    assert_true(fabs(h[1] - (-2.0 / sqrt(2.5 + 1e-6) + 0.5)) < 1e-6);
    free(g), free(u), free(gr);
}

static void test_logsumexp_argmax_matches_naive(void **state)
{
    (void)state;
    const int64_t n = 7, V = 1000;
    float *z = rand_array(n * V, 30);
    z[3 * V + 17] = 100.0f, z[3 * V + 18] = 100.0f; /* tie: the first wins */
    double lse[7], lr[7];
    int32_t am[7], ar[7];
    int fin = 0, fin_naive = 0;
    dfl_logsumexp_argmax(z, n, V, lse, am, &fin);
    dfl_logsumexp_argmax_naive(z, n, V, lr, ar, &fin_naive);
    assert_true(fin && fin_naive);
    /* the finiteness flag: each kind of non-finite value, in any row, alone */
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++)
        for (int64_t at = 0; at < n * V; at += 997) {
            float keep = z[at];
            z[at] = bad[b];
            dfl_logsumexp_argmax(z, n, V, lse, am, &fin);
            dfl_logsumexp_argmax_naive(z, n, V, lr, ar, &fin_naive);
            assert_false(fin);
            assert_false(fin_naive);
            z[at] = keep;
        }
    dfl_logsumexp_argmax(z, n, V, lse, am, NULL);
    dfl_logsumexp_argmax_naive(z, n, V, lr, ar, NULL);
    for (int i = 0; i < n; i++) {
        assert_true(fabs(lse[i] - lr[i]) < 1e-5 * fabs(lr[i]));
        assert_int_equal(am[i], ar[i]);
    }
    assert_int_equal(am[3], 17);
    assert_true(fabs(lr[3] - (100 + log(2.0))) < 1e-6);
    free(z);
}

/* ------------------------------------------------------- NaN and Inf inputs */

/* Same finiteness, element by element, as the float64 twin, and within tol where finite:
 * a kernel never turns a NaN or Inf into a finite number (nor the reverse). Run under
 * `make asan` (-fsanitize=undefined) this also checks the kernels for undefined
 * behaviour on non-finite inputs (fast_expf converted NaN to int and shifted it). */
static void assert_same_finiteness(const float *a, const float *b, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++) {
        if (isfinite(a[i]) != isfinite(b[i])) fail_msg("element %zu: %g vs the twin's %g", i, a[i], b[i]);
        if (isfinite(a[i]) && fabs((double)a[i] - b[i]) > tol) fail_msg("element %zu: %g vs %g", i, a[i], b[i]);
    }
}

static void poison(float *x, size_t row_len, int rows)
{
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int r = 0; r < rows && r < 3; r++)
        x[(size_t)r * row_len + (size_t)r + 1] = bad[r];
}

static void test_kernels_on_nan_and_inf(void **state)
{
    (void)state;
    const int64_t n = 6, d = 40, f = 40, V = 300;
    /* matmul */
    float *x = rand_array(n * d, 1), *w = rand_array(d * d, 1), *y = calloc(n * d, 4), *yr = calloc(n * d, 4);
    poison(x, d, 3);
    dfl_matmul_xwt(y, x, w, n, d, d);
    dfl_matmul_xwt_naive(yr, x, w, n, d, d);
    assert_same_finiteness(y, yr, n * d, 1e-4);
    assert_false(isfinite(y[0])); /* the NaN row */
    /* rmsnorm */
    float *g = rand_array(d, 1);
    dfl_rmsnorm(y, x, g, n, d, 1e-5f, 1.0f);
    dfl_rmsnorm_naive(yr, x, g, n, d, 1e-5f, 1.0f);
    assert_same_finiteness(y, yr, n * d, 1e-4);
    /* rope */
    double inv[20];
    float cs[6 * 20], sn[6 * 20];
    dfl_rope_params rp = {.theta = 10000.0};
    dfl_rope_inv_freq(inv, d, &rp);
    dfl_rope_tables(cs, sn, inv, d, n);
    memcpy(y, x, n * d * 4), memcpy(yr, x, n * d * 4);
    dfl_rope_apply(y, n, d, 1, d, cs, sn, 0);
    dfl_rope_apply_naive(yr, n, d, 1, d, cs, sn, 0);
    assert_same_finiteness(y, yr, n * d, 1e-5);
    /* softmax: rows with NaN or +Inf become NaN, -Inf is an ordinary (flushed) 0 */
    int64_t lim[6];
    for (int i = 0; i < n; i++)
        lim[i] = d - 1 - i;
    memcpy(y, x, n * d * 4), memcpy(yr, x, n * d * 4);
    dfl_softmax_causal(y, n, d, d, lim);
    dfl_softmax_causal_naive(yr, n, d, d, lim);
    assert_same_finiteness(y, yr, n * d, 1e-6);
    assert_false(isfinite(y[1]));
    assert_true(y[2 * d + 3] < 1e-30f && isfinite(y[2 * d]));
    /* exp of huge and tiny logits still finite where they should be */
    float big[4] = {80.0f, 88.0f, 200.0f, -300.0f};
    int64_t lim1[1] = {3};
    dfl_softmax_causal(big, 1, 4, 4, lim1);
    assert_true(fabs(big[2] - 1.0) < 1e-6 && big[3] < 1e-30f);
    /* swiglu */
    float *gg = rand_array(n * f, 6), *u = rand_array(n * f, 2), *ggr = malloc(n * f * 4);
    poison(gg, f, 3);
    memcpy(ggr, gg, n * f * 4);
    dfl_swiglu(gg, u, n, f);
    dfl_swiglu_naive(ggr, u, n, f);
    assert_same_finiteness(gg, ggr, n * f, 1e-4);
    /* LM head */
    float *z = rand_array(n * V, 10);
    poison(z, V, 3);
    double lse[6], lr[6];
    int32_t am[6], ar[6];
    int fin = 1;
    dfl_logsumexp_argmax(z, n, V, lse, am, &fin);
    assert_int_equal(fin, dfl_all_finite(z, (size_t)(n * V)));
    assert_false(fin);
    dfl_logsumexp_argmax_naive(z, n, V, lr, ar, NULL);
    for (int i = 0; i < n; i++)
        assert_int_equal(isfinite(lse[i]), isfinite(lr[i]));
    assert_false(isfinite(lse[0]) || isfinite(lse[1]));
    assert_true(isfinite(lse[2]));
    /* fake quantization: NaN stays NaN, a NaN range leaves the data alone */
    float q[3] = {NAN, 0.5f, -0.25f};
    dfl_fake_quant(q, 3, 1.0f, 4);
    assert_true(isnan(q[0]) && isfinite(q[1]));
    dfl_fake_quant(q, 3, NAN, 4);
    assert_true(isnan(q[0]) && isfinite(q[1]));
    free(x), free(w), free(y), free(yr), free(g), free(gg), free(u), free(ggr), free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_matches_naive),
        cmocka_unit_test(test_matmul_wmat_dtypes),
        cmocka_unit_test(test_matmul_scratch_serves_narrower),
        cmocka_unit_test(test_rmsnorm_matches_naive),
        cmocka_unit_test(test_rope_interleaved_matches_naive),
        cmocka_unit_test(test_rope_half_matches_naive),
        cmocka_unit_test(test_rope_rotation_by_hand),
        cmocka_unit_test(test_rope_relative_position),
        cmocka_unit_test(test_rope_scaling_rules),
        cmocka_unit_test(test_softmax_causal_matches_naive),
        cmocka_unit_test(test_softmax_window_matches_naive),
        cmocka_unit_test(test_softmax_large_logits_stay_finite),
        cmocka_unit_test(test_swiglu_matches_naive),
        cmocka_unit_test(test_layernorm_matches_naive),
        cmocka_unit_test(test_gelu_matches_naive),
        cmocka_unit_test(test_quick_gelu_matches_naive),
        cmocka_unit_test(test_matmul_io_matches_naive),
        cmocka_unit_test(test_geglu_softcap_longrope),
        cmocka_unit_test(test_polynorm_matches_naive),
        cmocka_unit_test(test_logsumexp_argmax_matches_naive),
        cmocka_unit_test(test_kernels_on_nan_and_inf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
