/* kernels_rows.h — the row kernels of kernels.c (RMSNorm, RoPE, softmax, SwiGLU,
 * log-sum-exp), compiled once per instruction-set path: kernels.c includes this file
 * three times, each under its own `#pragma GCC target` and with DFL_ROW(name) naming that
 * path's copy (name_avx512, name_avx2, name_scalar). No include guard on purpose.
 * The loops are written for the vectorizer (`omp simd`); the same arithmetic on every
 * path, only the order of the reductions' additions differs. Included without DFL_ROW
 * (as an installed header compiled alone) it defines nothing. */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef DFL_ROW

/* One row; returns the factor applied, scale / sqrt(mean(x²) + eps). */
static float DFL_ROW(rmsnorm_row)(float *y, const float *x, const float *gain, int64_t d, float eps, float scale)
{
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < d; j++)
        ss += x[j] * x[j];
    float inv = scale / sqrtf(ss / (float)d + eps);
    if (gain) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++)
            y[j] = x[j] * inv * gain[j];
    } else {
#pragma omp simd
        for (int64_t j = 0; j < d; j++)
            y[j] = x[j] * inv;
    }
    return inv;
}

/* Pair (a, b) of element j rotates by angle j: interleaved (2j, 2j+1), half (j, j+d/2). */
static void DFL_ROW(rope_row)(float *x, int64_t nh, int64_t d, const float *c, const float *s, int interleaved)
{
    int64_t half = d / 2;
    for (int64_t h = 0; h < nh; h++) {
        float *v = x + h * d;
        if (interleaved) {
            for (int64_t j = 0; j < half; j++) {
                float a = v[2 * j], b = v[2 * j + 1];
                v[2 * j] = a * c[j] - b * s[j];
                v[2 * j + 1] = a * s[j] + b * c[j];
            }
            continue;
        }
#pragma omp simd
        for (int64_t j = 0; j < half; j++) {
            float a = v[j], b = v[j + half];
            v[j] = a * c[j] - b * s[j];
            v[j + half] = a * s[j] + b * c[j];
        }
    }
}

/* exp(x) for x <= 88 in float, without a library call so that loops around it
 * vectorize: 2^n·p(r) with n = round(x·log2 e), r = x − n·ln 2 (two-part constant) and
 * Cephes' degree-7 polynomial; within 2 ulp of expf over [-87, 88]. Below −87 the
 * result flushes to exp(−87) ≈ 1.6e-38, which no softmax can tell from 0. */
static inline float DFL_ROW(fast_expf)(float x)
{
    /* Clamp into the range where 2^n is a float exponent (n <= 128 gives +Inf, as
     * exp(+Inf) should); NaN fails both tests and stays NaN. */
    x = x < -87.0f ? -87.0f : x > 88.5f ? 88.5f : x;
    float t = x * 1.44269504088896341f;
    float n = (t + 12582912.0f) - 12582912.0f;           /* round to nearest: 1.5·2^23 trick */
    float r = x - n * 0.693359375f + n * 2.12194440e-4f; /* ln 2 = 0.693359375 − 2.12194440e-4 */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* NaN: converting n to an integer is undefined (and its shift was); p carries it.
     * A select, then the conversion on every lane: the loops vectorize without masks. */
    float nz = n == n ? n : 0.0f;
    int32_t ni = (int32_t)nz;
    uint32_t bits = (uint32_t)(ni + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* Columns lo..lim of r normalised; the rest of [0, ncols) zero. */
static void DFL_ROW(softmax_row)(float *r, int64_t ncols, int64_t lo, int64_t lim)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = lo; j <= lim; j++)
        mx = r[j] > mx ? r[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = lo; j <= lim; j++) {
        r[j] = DFL_ROW(fast_expf)(r[j] - mx);
        sum += r[j];
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = lo; j <= lim; j++)
        r[j] *= inv;
    for (int64_t j = 0; j < lo; j++)
        r[j] = 0.0f;
    for (int64_t j = lim + 1; j < ncols; j++)
        r[j] = 0.0f;
}

/* silu(g)·u over one span, exp(−g) by fast_expf (+Inf from −g ≈ 88.4 on, as expf's
 * overflow, so that silu(−Inf) is −Inf / Inf = NaN, PyTorch's value). */
static void DFL_ROW(swiglu_span)(float *g, const float *u, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float e = DFL_ROW(fast_expf)(-g[i]);
        g[i] = g[i] / (1.0f + e) * u[i];
    }
}

/* Returns 1 when every r[v] is finite: the max pass sums r[v]·0 (NaN exactly for NaN
 * and ±Inf), so that the caller needs no pass of its own over the logits. */
static int DFL_ROW(lse_row)(const float *r, int64_t V, double *lse, int32_t *argmax)
{
    float mx = -INFINITY, z = 0.0f;
#pragma omp simd reduction(max : mx) reduction(+ : z)
    for (int64_t v = 0; v < V; v++) {
        mx = r[v] > mx ? r[v] : mx;
        z += r[v] * 0.0f;
    }
    int64_t best = 0;
    while (best < V - 1 && r[best] != mx)
        best++; /* the first maximum */
    /* float terms in blocks of 256, each block's sum added in double */
    double sum = 0.0;
    for (int64_t v0 = 0; v0 < V; v0 += 256) {
        int64_t v1 = v0 + 256 < V ? v0 + 256 : V;
        float part = 0.0f;
#pragma omp simd reduction(+ : part)
        for (int64_t v = v0; v < v1; v++)
            part += DFL_ROW(fast_expf)(r[v] - mx);
        sum += part;
    }
    *lse = (double)mx + log(sum);
    *argmax = (int32_t)best;
    return z == 0.0f;
}

#endif /* DFL_ROW */
