/* kernels.c — fast kernels (CBLAS, OpenMP over rows) and their naive twins. */
#include "model/kernels.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "model/model.h"

/* ------------------------------------------------------------------ matmul */

void dfl_set_threads(int n)
{
    if (n <= 0) return;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

void dfl_matmul_xwt(float *y, const float *x, const float *w, int64_t n, int64_t in, int64_t out)
{
    if (n <= 0 || out <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)out, (int)in,
                1.0f, x, (int)in, w, (int)in, 0.0f, y, (int)out);
}

void dfl_matmul_xwt_naive(float *y, const float *x, const float *w, int64_t n, int64_t in, int64_t out)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
            double acc = 0.0;  /* double: the twin is the accurate side of the comparison */
            for (int64_t k = 0; k < in; k++) acc += (double)x[i * in + k] * w[o * in + k];
            y[i * out + o] = (float)acc;
        }
}

/* ----------------------------------------------------------------- rmsnorm */

/* One row; returns the factor applied, scale / sqrt(mean(x²) + eps). */
static float rmsnorm_row(float *y, const float *x, const float *gain, int64_t d, float eps, float scale)
{
    float ss = 0.0f;
    for (int64_t j = 0; j < d; j++) ss += x[j] * x[j];
    float inv = scale / sqrtf(ss / (float)d + eps);
    for (int64_t j = 0; j < d; j++) y[j] = x[j] * inv * (gain ? gain[j] : 1.0f);
    return inv;
}

void dfl_rmsnorm(float *y, const float *x, const float *gain, int64_t n, int64_t d, float eps, float scale)
{
#pragma omp parallel for schedule(static) if (n > 16)
    for (int64_t i = 0; i < n; i++) rmsnorm_row(y + i * d, x + i * d, gain, d, eps, scale);
}

void dfl_rmsnorm_rstd(float *y, float *rstd, const float *x, const float *gain, int64_t n, int64_t d, float eps)
{
#pragma omp parallel for schedule(static) if (n > 16)
    for (int64_t i = 0; i < n; i++) rstd[i] = rmsnorm_row(y + i * d, x + i * d, gain, d, eps, 1.0f);
}

void dfl_rmsnorm_naive(float *y, const float *x, const float *gain, int64_t n, int64_t d, float eps, float scale)
{
    for (int64_t i = 0; i < n; i++) {
        double ss = 0.0;
        for (int64_t j = 0; j < d; j++) ss += (double)x[i * d + j] * x[i * d + j];
        double inv = 1.0 / sqrt(ss / (double)d + eps);
        for (int64_t j = 0; j < d; j++)
            y[i * d + j] = (float)(x[i * d + j] * inv * (gain ? gain[j] : 1.0) * scale);
    }
}

/* -------------------------------------------------------------------- rope */

void dfl_rope_inv_freq(double *inv_freq, int64_t d, const dfl_rope_params *p)
{
    const double pi = 3.14159265358979323846;
    for (int64_t j = 0; j < d / 2; j++) {
        double f = pow(p->theta, -2.0 * (double)j / (double)d);
        if (p->kind == DFL_ROPE_LINEAR) {
            f /= p->factor;
        } else if (p->kind == DFL_ROPE_LLAMA3) {
            /* Llama 3.x: long wavelengths are slowed by `factor`, short ones kept, and
             * the band between is interpolated smoothly (Hugging Face's rule). */
            double old = (double)p->original_max_pos;
            double low_wavelen = old / p->low_freq_factor;
            double high_wavelen = old / p->high_freq_factor;
            double wavelen = 2.0 * pi / f;
            if (wavelen > low_wavelen) {
                f /= p->factor;
            } else if (wavelen >= high_wavelen) {
                double smooth = (old / wavelen - p->low_freq_factor) /
                                (p->high_freq_factor - p->low_freq_factor);
                f = (1.0 - smooth) * f / p->factor + smooth * f;
            }
        }
        inv_freq[j] = f;
    }
}

void dfl_rope_tables(float *cos_t, float *sin_t, const double *inv_freq, int64_t d, int64_t T)
{
    int64_t half = d / 2;
#pragma omp parallel for schedule(static) if (T > 64)
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < half; j++) {
            double a = (double)t * inv_freq[j];
            cos_t[t * half + j] = (float)cos(a);
            sin_t[t * half + j] = (float)sin(a);
        }
}

/* Pair (a, b) of element j rotates by angle j: interleaved (2j, 2j+1), half (j, j+d/2). */
void dfl_rope_row(float *x, int64_t nh, int64_t d, const float *c, const float *s, int interleaved)
{
    int64_t half = d / 2;
    for (int64_t h = 0; h < nh; h++) {
        float *v = x + h * d;
        for (int64_t j = 0; j < half; j++) {
            int64_t ia = interleaved ? 2 * j : j, ib = interleaved ? 2 * j + 1 : j + half;
            float a = v[ia], b = v[ib];
            v[ia] = a * c[j] - b * s[j];
            v[ib] = a * s[j] + b * c[j];
        }
    }
}

void dfl_rope_apply(float *x, int64_t T, int64_t ld, int64_t nh, int64_t d,
                    const float *cos_t, const float *sin_t, int interleaved)
{
#pragma omp parallel for schedule(static) if (T > 16)
    for (int64_t t = 0; t < T; t++)
        dfl_rope_row(x + t * ld, nh, d, cos_t + t * (d / 2), sin_t + t * (d / 2), interleaved);
}

void dfl_rope_apply_naive(float *x, int64_t T, int64_t ld, int64_t nh, int64_t d,
                          const float *cos_t, const float *sin_t, int interleaved)
{
    int64_t half = d / 2;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t j = 0; j < half; j++) {
                float *v = x + t * ld + h * d;
                int64_t ia = interleaved ? 2 * j : j, ib = interleaved ? 2 * j + 1 : j + half;
                double c = cos_t[t * half + j], s = sin_t[t * half + j];
                double a = v[ia], b = v[ib];
                v[ia] = (float)(a * c - b * s);
                v[ib] = (float)(a * s + b * c);
            }
}

/* ----------------------------------------------------------------- softmax */

/* exp(x) for x <= 88 in float, without a library call so that loops around it
 * vectorize: 2^n·p(r) with n = round(x·log2 e), r = x − n·ln 2 (two-part constant) and
 * Cephes' degree-7 polynomial; within 2 ulp of expf over [-87, 88]. Below −87 the
 * result flushes to exp(−87) ≈ 1.6e-38, which no softmax can tell from 0. */
static inline float fast_expf(float x)
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
    /* NaN: converting n to an integer is undefined (and its shift was); p carries it */
    int32_t ni = n == n ? (int32_t)n : 0;
    uint32_t bits = (uint32_t)(ni + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* The row loops are cloned for AVX-512, AVX2 and the baseline, picked at run time. */
#define DFL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

DFL_CLONES static void softmax_row(float *r, int64_t ncols, int64_t lim)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j <= lim; j++) mx = r[j] > mx ? r[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j <= lim; j++) {
        r[j] = fast_expf(r[j] - mx);
        sum += r[j];
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = 0; j <= lim; j++) r[j] *= inv;
    for (int64_t j = lim + 1; j < ncols; j++) r[j] = 0.0f;
}

void dfl_softmax_causal(float *s, int64_t n, int64_t ncols, int64_t ld, const int64_t *lim)
{
#pragma omp parallel for schedule(static) if (n * ncols > 65536)
    for (int64_t i = 0; i < n; i++) softmax_row(s + i * ld, ncols, lim[i]);
}

void dfl_softmax_causal_naive(float *s, int64_t n, int64_t ncols, int64_t ld, const int64_t *lim)
{
    for (int64_t i = 0; i < n; i++) {
        float *r = s + i * ld;
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j <= lim[i]; j++) mx = r[j] > mx ? r[j] : mx;
        for (int64_t j = 0; j <= lim[i]; j++) sum += exp((double)r[j] - mx);
        for (int64_t j = 0; j < ncols; j++) r[j] = j <= lim[i] ? (float)(exp((double)r[j] - mx) / sum) : 0.0f;
    }
}

/* ------------------------------------------------------------------ swiglu */

void dfl_swiglu(float *g, const float *u, int64_t n, int64_t f)
{
    size_t total = (size_t)n * (size_t)f;
#pragma omp parallel for schedule(static) if (total > 65536)
    for (size_t i = 0; i < total; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void dfl_swiglu_naive(float *g, const float *u, int64_t n, int64_t f)
{
    for (int64_t i = 0; i < n * f; i++) g[i] = (float)((double)g[i] / (1.0 + exp(-(double)g[i])) * u[i]);
}

/* ------------------------------------------------------------- LM head */

DFL_CLONES static void lse_row(const float *r, int64_t V, double *lse, int32_t *argmax)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < V; v++) mx = r[v] > mx ? r[v] : mx;
    int64_t best = 0;
    while (best < V - 1 && r[best] != mx) best++;   /* the first maximum */
    /* float terms in blocks of 256, each block's sum added in double */
    double sum = 0.0;
    for (int64_t v0 = 0; v0 < V; v0 += 256) {
        int64_t v1 = v0 + 256 < V ? v0 + 256 : V;
        float part = 0.0f;
#pragma omp simd reduction(+ : part)
        for (int64_t v = v0; v < v1; v++) part += fast_expf(r[v] - mx);
        sum += part;
    }
    *lse = (double)mx + log(sum);
    *argmax = (int32_t)best;
}

void dfl_logsumexp_argmax(const float *z, int64_t n, int64_t V, double *lse, int32_t *argmax)
{
#pragma omp parallel for schedule(static) if (n * V > 65536)
    for (int64_t i = 0; i < n; i++) lse_row(z + i * V, V, &lse[i], &argmax[i]);
}

void dfl_logsumexp_argmax_naive(const float *z, int64_t n, int64_t V, double *lse, int32_t *argmax)
{
    for (int64_t i = 0; i < n; i++) {
        const float *r = z + i * V;
        int64_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (r[v] > r[best]) best = v;
        double sum = 0.0;
        for (int64_t v = 0; v < V; v++) sum += exp((double)r[v] - r[best]);
        lse[i] = r[best] + log(sum);
        argmax[i] = (int32_t)best;
    }
}

DFL_CLONES int dfl_all_finite(const float *x, size_t n)
{
    float z = 0.0f;
#pragma omp simd reduction(+ : z)
    for (size_t i = 0; i < n; i++) z += x[i] * 0.0f;
    return z == 0.0f;
}

void dfl_add_inplace(float *y, const float *x, size_t n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* --------------------------------------------------------- fake quantization */

void dfl_fake_quant(float *x, int64_t n, float maxabs, int bits)
{
    if (!(maxabs > 0.0f)) return;
    float levels = (float)((1 << (bits - 1)) - 1);
    float scale = maxabs / levels;
    for (int64_t i = 0; i < n; i++) x[i] = roundf(x[i] / scale) * scale;
}
