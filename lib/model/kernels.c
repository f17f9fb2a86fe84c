/* kernels.c — fast kernels (CBLAS, OpenMP over rows) and their naive twins. */
#include "model/kernels.h"

#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "base/half.h"
#include "model/gguf_quant.h"
#include "model/kernels_gemm.h"
#include "model/model.h"
#include "model/safetensors.h"

/* ------------------------------------------------------------------ matmul */

void dfl_set_threads(int n)
{
    if (n <= 0) return;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

void dfl_matmul_xwt(float *y, const float *x, const float *w, int64_t n, int64_t in, int64_t out)
{
    dfl_gemm(y, out, x, in, w, in, 1, n, out, in, 1.0f);
}

void dfl_matmul_xwt_naive(float *y, const float *x, const float *w, int64_t n, int64_t in, int64_t out)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
            double acc = 0.0; /* double: the twin is the accurate side of the comparison */
            for (int64_t k = 0; k < in; k++)
                acc += (double)x[i * in + k] * w[o * in + k];
            y[i * out + o] = (float)acc;
        }
}

/* The row loops are cloned for AVX-512, AVX2 and the baseline, picked at run time. */
#define DFL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

/* The row kernels (kernels_rows.h) on each instruction-set path, and the path this
 * process uses, chosen once (dfl_cpu_vector: DFL_CPU forces each one). Without trapping
 * math (FP exception flags, which nothing reads) their clamps and selects vectorize on
 * AVX2 and SSE2 too, not only under AVX-512's masks; the values are the same. */
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#define DFL_ROW(name) name##_avx512
#include "model/kernels_rows.h"
#undef DFL_ROW
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#pragma GCC target("avx2,fma")
#define DFL_ROW(name) name##_avx2
#include "model/kernels_rows.h"
#undef DFL_ROW
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#define DFL_ROW(name) name##_scalar
#include "model/kernels_rows.h"
#undef DFL_ROW
#pragma GCC pop_options
#define ROW_PATHS(f)                                                                                                   \
    (dfl_cpu_vector() == DFL_CPU_AVX512 ? f##_avx512 : dfl_cpu_vector() == DFL_CPU_AVX2 ? f##_avx2 : f##_scalar)

/* bf16 is the top half of an f32: a widening shift, which the clones vectorize. src
 * is 2-byte aligned (the caller checks). */
DFL_CLONES static void bf16_span(float *dst, const uint16_t *src, size_t n)
{
    uint32_t *d = (uint32_t *)(void *)dst;
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        d[i] = (uint32_t)src[i] << 16;
}

/* bf16 with AVX2: 16 values widened and shifted per step. */
__attribute__((target("avx2"))) static void bf16_span_avx2(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        __m256i lo = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16);
        __m256i hi = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), lo);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i + 8), hi);
    }
    bf16_span(dst + i, src + i, n - i);
}

/* bf16 with AVX-512: 16 values widened and shifted per step. */
__attribute__((target("avx512f"))) static void bf16_span_avx512(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        _mm512_storeu_si512((void *)(dst + i), _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    for (; i < n; i++)
        dst[i] = dfl_bf16_to_f32(src[i]);
}

/* f16 with the F16C instruction (vcvtph2ps), 8 at a time; the caller checks the CPU. */
__attribute__((target("avx,f16c"))) static void f16_span_f16c(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h;
        memcpy(&h, src + i, sizeof h);
        __m256 f = _mm256_cvtph_ps(h);
        memcpy(dst + i, &f, sizeof f);
    }
    for (; i < n; i++)
        dst[i] = dfl_f16_to_f32(src[i]);
}

/* n values of dtype at src (any alignment) into f32 (exact). */
static void convert_span(float *dst, const unsigned char *src, int dtype, size_t n)
{
    if (dtype == DFL_DTYPE_F32) {
        memcpy(dst, src, n * sizeof(float));
    } else if ((uintptr_t)src % 2) { /* odd address: byte by byte */
        for (size_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
            dst[i] = dtype == DFL_DTYPE_BF16 ? dfl_bf16_to_f32(h) : dfl_f16_to_f32(h);
        }
    } else if (dtype == DFL_DTYPE_BF16) {
        const uint16_t *h = (const uint16_t *)(const void *)src;
        dfl_cpu_path path = dfl_cpu();
        if (path == DFL_CPU_AVX512)
            bf16_span_avx512(dst, h, n);
        else if (path == DFL_CPU_AVX2)
            bf16_span_avx2(dst, h, n);
        else
            for (size_t i = 0; i < n; i++)
                dst[i] = dfl_bf16_to_f32(h[i]);
    } else if (dfl_cpu_has_f16c()) {
        f16_span_f16c(dst, (const uint16_t *)(const void *)src, n);
    } else {
        const uint16_t *h = (const uint16_t *)(const void *)src;
        for (size_t i = 0; i < n; i++)
            dst[i] = dfl_f16_to_f32(h[i]);
    }
}

#define CONVERT_GRAIN ((size_t)1 << 16) /* values per parallel piece of a conversion */

/* The stored row of Hugging Face row r (pair_hd: llama.cpp's Q/K order, kernels.h). */
static int64_t stored_row(const dfl_wmat *w, int64_t r)
{
    if (w->pair_hd <= 0) return r;
    int64_t hd = w->pair_hd, base = r - r % hd, i = r % hd;
    return base + (i < hd / 2 ? 2 * i : 2 * (i - hd / 2) + 1);
}

/* Bytes of one stored row. */
static size_t row_bytes(const dfl_wmat *w)
{
    if (w->dtype >= DFL_WMAT_GGML) return dfl_ggml_row_bytes((uint32_t)(w->dtype - DFL_WMAT_GGML), w->cols);
    return (size_t)w->cols * dfl_dtype_size((dfl_dtype)w->dtype);
}

/* Row by row: ggml blocks (dequantized a row at a time) and pair-ordered rows. */
static void wmat_rows_each(const dfl_wmat *w, int64_t r0, int64_t n, float *dst)
{
    size_t rb = row_bytes(w), cols = (size_t)w->cols;
    const unsigned char *base = w->data;
#pragma omp parallel for schedule(static) if ((size_t)n * cols > CONVERT_GRAIN && !omp_in_parallel())
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *src = base + (size_t)stored_row(w, r0 + i) * rb;
        if (w->dtype >= DFL_WMAT_GGML)
            dfl_ggml_dequant_row((uint32_t)(w->dtype - DFL_WMAT_GGML), src, dst + (size_t)i * cols, w->cols);
        else
            convert_span(dst + (size_t)i * cols, src, w->dtype, cols);
    }
}

void dfl_wmat_rows(const dfl_wmat *w, int64_t r0, int64_t n, float *dst)
{
    if (w->dtype >= DFL_WMAT_GGML || w->pair_hd > 0) {
        wmat_rows_each(w, r0, n, dst);
        return;
    }
    size_t esz = dfl_dtype_size((dfl_dtype)w->dtype), total = (size_t)n * (size_t)w->cols;
    const unsigned char *src = (const unsigned char *)w->data + (size_t)r0 * (size_t)w->cols * esz;
    int64_t pieces = (int64_t)((total + CONVERT_GRAIN - 1) / CONVERT_GRAIN);
#pragma omp parallel for schedule(static) if (pieces > 1 && !omp_in_parallel())
    for (int64_t p = 0; p < pieces; p++) {
        size_t a = (size_t)p * CONVERT_GRAIN, len = total - a < CONVERT_GRAIN ? total - a : CONVERT_GRAIN;
        convert_span(dst + a, src + a * esz, w->dtype, len);
    }
}

/* Rows of W per panel for `in` columns: DFL_PANEL_BYTES of f32, at least 16 rows. */
static int64_t panel_rows(int64_t in)
{
    int64_t rows = (int64_t)(DFL_PANEL_BYTES / sizeof(float)) / (in > 0 ? in : 1);
    return rows < 16 ? 16 : rows;
}

/* A panel of in' <= in columns holds panel_rows(in')·in' <= max(PANEL/4, 16·in')
 * floats: this bound serves every narrower weight too. */
size_t dfl_matmul_scratch(int64_t in)
{
    size_t panel = DFL_PANEL_BYTES / sizeof(float), narrow = 16 * (size_t)(in > 0 ? in : 1);
    return panel > narrow ? panel : narrow;
}

void dfl_matmul_wmat(float *y, const float *x, const dfl_wmat *w, int64_t n, float *scratch)
{
    int64_t in = w->cols, out = w->rows;
    if (n <= 0 || out <= 0) return;
    if (w->dtype == DFL_DTYPE_F32 && (uintptr_t)w->data % sizeof(float) == 0 && w->pair_hd <= 0) {
        dfl_gemm_scratch(y, out, x, in, w->data, in, 1, n, out, in, 1.0f, scratch, dfl_matmul_scratch(in));
        return;
    }
    /* bf16 on the AVX-512 path: widened inside the product's own packing, no panels */
    if (w->dtype == DFL_DTYPE_BF16 && w->pair_hd <= 0 && (uintptr_t)w->data % 2 == 0 && dfl_cpu() == DFL_CPU_AVX512 &&
        dfl_gemm_avx512_bf16(y, out, x, in, w->data, in, n, out, in, scratch, dfl_matmul_scratch(in)))
        return;
    /* Panels of rows of W: converted once per call, multiplied by all n rows of x. */
    int64_t prow = panel_rows(in);
    for (int64_t o0 = 0; o0 < out; o0 += prow) {
        int64_t p = out - o0 < prow ? out - o0 : prow;
        dfl_wmat_rows(w, o0, p, scratch);
        /* ggml blocks: OpenBLAS on every path, whose sums keep the reference tests' Q8_0
         * NLL within their 1e-4 (difflens' AVX-512 sums reach 1.2e-4 there) */
        if (w->dtype >= DFL_WMAT_GGML)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)p, (int)in, 1.0f, x, (int)in, scratch,
                        (int)in, 0.0f, y + o0, (int)out);
        else
            dfl_gemm(y + o0, out, x, in, scratch, in, 1, n, p, in, 1.0f);
    }
}

void dfl_matmul_wmat_naive(float *y, const float *x, const dfl_wmat *w, int64_t n)
{
    size_t esz = w->dtype >= DFL_WMAT_GGML ? 0 : dfl_dtype_size((dfl_dtype)w->dtype), rb = row_bytes(w);
    const unsigned char *src = w->data;
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < w->rows; o++) {
            double acc = 0.0;
            const unsigned char *row = src + (size_t)stored_row(w, o) * rb;
            for (int64_t k = 0; k < w->cols; k++) {
                const unsigned char *e = row + (size_t)k * esz;
                float v;
                if (w->dtype >= DFL_WMAT_GGML)
                    v = dfl_ggml_dequant_at((uint32_t)(w->dtype - DFL_WMAT_GGML), row, k);
                else if (w->dtype == DFL_DTYPE_BF16)
                    v = dfl_bf16_to_f32((uint16_t)(e[0] | e[1] << 8));
                else if (w->dtype == DFL_DTYPE_F16)
                    v = dfl_f16_to_f32((uint16_t)(e[0] | e[1] << 8));
                else
                    memcpy(&v, e, sizeof v);
                acc += (double)x[i * w->cols + k] * v;
            }
            y[i * w->rows + o] = (float)acc;
        }
}

void dfl_add_bias(float *y, const float *b, int64_t n, int64_t d)
{
#pragma omp parallel for schedule(static) if (n * d > 65536)
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++)
            y[i * d + j] += b[j];
}

/* ----------------------------------------------------------------- rmsnorm */

typedef float (*rmsnorm_fn)(float *, const float *, const float *, int64_t, float, float);

void dfl_rmsnorm(float *y, const float *x, const float *gain, int64_t n, int64_t d, float eps, float scale)
{
    rmsnorm_fn row = ROW_PATHS(rmsnorm_row);
#pragma omp parallel for schedule(static) if (n > 16)
    for (int64_t i = 0; i < n; i++)
        row(y + i * d, x + i * d, gain, d, eps, scale);
}

void dfl_rmsnorm_rstd(float *y, float *rstd, const float *x, const float *gain, int64_t n, int64_t d, float eps)
{
    rmsnorm_fn row = ROW_PATHS(rmsnorm_row);
#pragma omp parallel for schedule(static) if (n > 16)
    for (int64_t i = 0; i < n; i++)
        rstd[i] = row(y + i * d, x + i * d, gain, d, eps, 1.0f);
}

void dfl_rmsnorm_naive(float *y, const float *x, const float *gain, int64_t n, int64_t d, float eps, float scale)
{
    for (int64_t i = 0; i < n; i++) {
        double ss = 0.0;
        for (int64_t j = 0; j < d; j++)
            ss += (double)x[i * d + j] * x[i * d + j];
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
                double smooth = (old / wavelen - p->low_freq_factor) / (p->high_freq_factor - p->low_freq_factor);
                f = (1.0 - smooth) * f / p->factor + smooth * f;
            }
        }
        inv_freq[j] = f;
    }
}

void dfl_rope_tables(float *cos_t, float *sin_t, const double *inv_freq, int64_t d, int64_t T)
{
    dfl_rope_tables_at(cos_t, sin_t, inv_freq, d, 0, T);
}

void dfl_rope_tables_at(float *cos_t, float *sin_t, const double *inv_freq, int64_t d, int64_t t0, int64_t T)
{
    int64_t half = d / 2;
#pragma omp parallel for schedule(static) if (T > 64)
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < half; j++) {
            double a = (double)(t0 + t) * inv_freq[j];
            cos_t[t * half + j] = (float)cos(a);
            sin_t[t * half + j] = (float)sin(a);
        }
}

typedef void (*rope_fn)(float *, int64_t, int64_t, const float *, const float *, int);

void dfl_rope_row(float *x, int64_t nh, int64_t d, const float *c, const float *s, int interleaved)
{
    rope_fn row = ROW_PATHS(rope_row);
    row(x, nh, d, c, s, interleaved);
}

void dfl_rope_apply(float *x, int64_t T, int64_t ld, int64_t nh, int64_t d, const float *cos_t, const float *sin_t,
                    int interleaved)
{
    rope_fn row = ROW_PATHS(rope_row);
#pragma omp parallel for schedule(static) if (T > 16)
    for (int64_t t = 0; t < T; t++)
        row(x + t * ld, nh, d, cos_t + t * (d / 2), sin_t + t * (d / 2), interleaved);
}

void dfl_rope_apply_naive(float *x, int64_t T, int64_t ld, int64_t nh, int64_t d, const float *cos_t,
                          const float *sin_t, int interleaved)
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

void dfl_softmax_window(float *s, int64_t n, int64_t ncols, int64_t ld, const int64_t *lo, const int64_t *lim)
{
    void (*row)(float *, int64_t, int64_t, int64_t) = ROW_PATHS(softmax_row);
#pragma omp parallel for schedule(static) if (n * ncols > 65536)
    for (int64_t i = 0; i < n; i++)
        row(s + i * ld, ncols, lo ? lo[i] : 0, lim[i]);
}

void dfl_softmax_causal(float *s, int64_t n, int64_t ncols, int64_t ld, const int64_t *lim)
{
    dfl_softmax_window(s, n, ncols, ld, NULL, lim);
}

void dfl_softmax_window_naive(float *s, int64_t n, int64_t ncols, int64_t ld, const int64_t *lo, const int64_t *lim)
{
    for (int64_t i = 0; i < n; i++) {
        float *r = s + i * ld;
        int64_t a = lo ? lo[i] : 0;
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = a; j <= lim[i]; j++)
            mx = r[j] > mx ? r[j] : mx;
        for (int64_t j = a; j <= lim[i]; j++)
            sum += exp((double)r[j] - mx);
        for (int64_t j = 0; j < ncols; j++)
            r[j] = j >= a && j <= lim[i] ? (float)(exp((double)r[j] - mx) / sum) : 0.0f;
    }
}

void dfl_softmax_causal_naive(float *s, int64_t n, int64_t ncols, int64_t ld, const int64_t *lim)
{
    dfl_softmax_window_naive(s, n, ncols, ld, NULL, lim);
}

/* ------------------------------------------------------------------ swiglu */

void dfl_swiglu(float *g, const float *u, int64_t n, int64_t f)
{
    void (*span)(float *, const float *, size_t) = ROW_PATHS(swiglu_span);
    size_t total = (size_t)n * (size_t)f, pieces = (total + CONVERT_GRAIN - 1) / CONVERT_GRAIN;
#pragma omp parallel for schedule(static) if (pieces > 1 && !omp_in_parallel())
    for (size_t p = 0; p < pieces; p++) {
        size_t a = p * CONVERT_GRAIN;
        span(g + a, u + a, total - a < CONVERT_GRAIN ? total - a : CONVERT_GRAIN);
    }
}

void dfl_swiglu_naive(float *g, const float *u, int64_t n, int64_t f)
{
    for (int64_t i = 0; i < n * f; i++)
        g[i] = (float)((double)g[i] / (1.0 + exp(-(double)g[i])) * u[i]);
}

/* ------------------------------------------------------------- LM head */

void dfl_logsumexp_argmax(const float *z, int64_t n, int64_t V, double *lse, int32_t *argmax, int *all_finite)
{
    int (*row)(const float *, int64_t, double *, int32_t *) = ROW_PATHS(lse_row);
    int finite = 1;
#pragma omp parallel for schedule(static) if (n * V > 65536) reduction(&& : finite)
    for (int64_t i = 0; i < n; i++)
        finite = row(z + i * V, V, &lse[i], &argmax[i]) && finite;
    if (all_finite) *all_finite = finite;
}

void dfl_logsumexp_argmax_naive(const float *z, int64_t n, int64_t V, double *lse, int32_t *argmax, int *all_finite)
{
    if (all_finite) *all_finite = 1;
    for (int64_t i = 0; i < n; i++) {
        const float *r = z + i * V;
        for (int64_t v = 0; all_finite && v < V; v++)
            if (!isfinite(r[v])) *all_finite = 0;
        int64_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (r[v] > r[best]) best = v;
        double sum = 0.0;
        for (int64_t v = 0; v < V; v++)
            sum += exp((double)r[v] - r[best]);
        lse[i] = r[best] + log(sum);
        argmax[i] = (int32_t)best;
    }
}

DFL_CLONES int dfl_all_finite(const float *x, size_t n)
{
    float z = 0.0f;
#pragma omp simd reduction(+ : z)
    for (size_t i = 0; i < n; i++)
        z += x[i] * 0.0f;
    return z == 0.0f;
}

void dfl_add_inplace(float *y, const float *x, size_t n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

/* --------------------------------------------------------- fake quantization */

void dfl_fake_quant(float *x, int64_t n, float maxabs, int bits)
{
    if (!(maxabs > 0.0f)) return;
    float levels = (float)((1 << (bits - 1)) - 1);
    float scale = maxabs / levels;
    for (int64_t i = 0; i < n; i++)
        x[i] = roundf(x[i] / scale) * scale;
}
