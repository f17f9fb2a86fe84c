/* kernels_norm.c — LayerNorm, GELU and the [in, out] matmul (kernels_norm.h). */
#include "model/kernels_norm.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "base/half.h"
#include "model/safetensors.h"

/* ---------------------------------------------------------------- layernorm */

/* Mean and variance accumulated in double: the row's values are O(1) to O(100) in
 * the residual stream, where an f32 sum of squares loses digits the reference keeps. */
static void layernorm_row(float *y, const float *x, const float *gain, const float *bias, int64_t d, float eps)
{
    double s = 0.0, ss = 0.0;
    for (int64_t j = 0; j < d; j++)
        s += x[j];
    double mean = s / (double)d;
    for (int64_t j = 0; j < d; j++)
        ss += ((double)x[j] - mean) * ((double)x[j] - mean);
    float inv = (float)(1.0 / sqrt(ss / (double)d + (double)eps)), mu = (float)mean;
    for (int64_t j = 0; j < d; j++) {
        float v = (x[j] - mu) * inv;
        if (gain) v *= gain[j];
        if (bias) v += bias[j];
        y[j] = v;
    }
}

void dfl_layernorm(float *y, const float *x, const float *gain, const float *bias, int64_t n, int64_t d, float eps)
{
#pragma omp parallel for schedule(static) if (n > 16)
    for (int64_t i = 0; i < n; i++)
        layernorm_row(y + i * d, x + i * d, gain, bias, d, eps);
}

void dfl_layernorm_naive(float *y, const float *x, const float *gain, const float *bias, int64_t n, int64_t d,
                         float eps)
{
    for (int64_t i = 0; i < n; i++) {
        const float *r = x + i * d;
        double s = 0.0, ss = 0.0;
        for (int64_t j = 0; j < d; j++)
            s += r[j];
        double mean = s / (double)d;
        for (int64_t j = 0; j < d; j++)
            ss += (r[j] - mean) * (r[j] - mean);
        double inv = 1.0 / sqrt(ss / (double)d + (double)eps);
        for (int64_t j = 0; j < d; j++)
            y[i * d + j] = (float)((r[j] - mean) * inv * (gain ? gain[j] : 1.0) + (bias ? bias[j] : 0.0));
    }
}

/* --------------------------------------------------------------------- gelu */

#define SQRT_2_OVER_PI 0.7978845608028654
#define INV_SQRT_2     0.7071067811865476

void dfl_gelu_tanh(float *x, size_t n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf((float)SQRT_2_OVER_PI * (v + 0.044715f * v * v * v)));
    }
}

void dfl_gelu_tanh_naive(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        x[i] = (float)(0.5 * v * (1.0 + tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v))));
    }
}

void dfl_gelu_erf(float *x, size_t n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++)
        x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)INV_SQRT_2));
}

void dfl_gelu_erf_naive(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(0.5 * x[i] * (1.0 + erf((double)x[i] * INV_SQRT_2)));
}

void dfl_quick_gelu(float *x, size_t n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] / (1.0f + expf(-1.702f * x[i]));
}

void dfl_quick_gelu_naive(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)x[i] / (1.0 + exp(-1.702 * (double)x[i])));
}

void dfl_geglu(float *g, const float *u, int64_t n, int64_t f, int erf)
{
    size_t total = (size_t)n * (size_t)f;
    if (erf)
        dfl_gelu_erf(g, total);
    else
        dfl_gelu_tanh(g, total);
#pragma omp parallel for schedule(static) if (total > 65536)
    for (size_t i = 0; i < total; i++)
        g[i] *= u[i];
}

void dfl_geglu_naive(float *g, const float *u, int64_t n, int64_t f, int erf)
{
    size_t total = (size_t)n * (size_t)f;
    if (erf)
        dfl_gelu_erf_naive(g, total);
    else
        dfl_gelu_tanh_naive(g, total);
    for (size_t i = 0; i < total; i++)
        g[i] = (float)((double)g[i] * u[i]);
}

/* ---------------------------------------------------------------- softcap */

void dfl_softcap(float *x, size_t n, float cap)
{
#pragma omp parallel for schedule(static) if (n > 65536 && !omp_in_parallel())
    for (size_t i = 0; i < n; i++)
        x[i] = tanhf(x[i] / cap) * cap;
}

void dfl_softcap_naive(float *x, size_t n, float cap)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(tanh((double)x[i] / cap) * cap);
}

/* ----------------------------------------------------------------- longrope */

void dfl_rope_inv_freq_longrope(double *inv_freq, int64_t d, double theta, const double *factors)
{
    for (int64_t j = 0; j < d / 2; j++)
        inv_freq[j] = 1.0 / (factors[j] * pow(theta, 2.0 * (double)j / (double)d));
}

/* ------------------------------------------------------- [in, out] matmul */

void dfl_matmul_wmat_io(float *y, const float *x, const dfl_wmat *w, int64_t n, float *scratch, size_t scratch_n)
{
    int64_t in = w->rows, out = w->cols;
    if (n <= 0 || out <= 0) return;
    if (w->dtype == DFL_DTYPE_F32 && (uintptr_t)w->data % sizeof(float) == 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)out, (int)in, 1.0f, x, (int)in, w->data,
                    (int)out, 0.0f, y, (int)out);
        return;
    }
    /* Panels of rows of W (input dimensions), each adding its part of x · W to y. */
    int64_t prow = (int64_t)(scratch_n / (size_t)out);
    if (prow < 1) prow = 1;
    for (int64_t i0 = 0; i0 < in; i0 += prow) {
        int64_t p = in - i0 < prow ? in - i0 : prow;
        dfl_wmat_rows(w, i0, p, scratch);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)out, (int)p, 1.0f, x + i0, (int)in, scratch,
                    (int)out, i0 ? 1.0f : 0.0f, y, (int)out);
    }
}

void dfl_matmul_wmat_io_naive(float *y, const float *x, const dfl_wmat *w, int64_t n)
{
    size_t esz = dfl_dtype_size((dfl_dtype)w->dtype);
    const unsigned char *src = w->data;
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < w->cols; o++) {
            double acc = 0.0;
            for (int64_t k = 0; k < w->rows; k++) {
                const unsigned char *e = src + ((size_t)k * (size_t)w->cols + (size_t)o) * esz;
                float v;
                if (w->dtype == DFL_DTYPE_BF16)
                    v = dfl_bf16_to_f32((uint16_t)(e[0] | e[1] << 8));
                else if (w->dtype == DFL_DTYPE_F16)
                    v = dfl_f16_to_f32((uint16_t)(e[0] | e[1] << 8));
                else
                    memcpy(&v, e, sizeof v);
                acc += (double)x[i * w->rows + k] * v;
            }
            y[i * w->cols + o] = (float)acc;
        }
}
