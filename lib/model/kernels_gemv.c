/* kernels_gemv.c — few-row products with weights converted in registers (decoding). */
#include "model/kernels_gemv.h"

#include <string.h>

#include "base/half.h"
#include "model/safetensors.h"

int dfl_gemv_wmat_supported(const dfl_wmat *w)
{
    return w->pair_hd <= 0 && (w->dtype == DFL_DTYPE_BF16 || w->dtype == DFL_DTYPE_F16 || w->dtype == DFL_DTYPE_F32);
}

#define LANES 16

/* acc[n] = x[i] · row for the n rows of x (stride cols), a BF16 row. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void dot_bf16(const uint16_t *row, const float *x,
                                                                                  int64_t cols, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * cols;
        float s[LANES] = {0};
        int64_t k = 0;
        for (; k + LANES <= cols; k += LANES)
#pragma omp simd
            for (int l = 0; l < LANES; l++) {
                uint32_t b = (uint32_t)row[k + l] << 16;
                float v;
                memcpy(&v, &b, sizeof v);
                s[l] += v * xi[k + l];
            }
        float acc = 0;
        for (; k < cols; k++) {
            uint32_t b = (uint32_t)row[k] << 16;
            float v;
            memcpy(&v, &b, sizeof v);
            acc += v * xi[k];
        }
        for (int l = 0; l < LANES; l++)
            acc += s[l];
        out[i] = acc;
    }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void dot_f32(const float *row, const float *x,
                                                                                 int64_t cols, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * cols;
        float s[LANES] = {0};
        int64_t k = 0;
        for (; k + LANES <= cols; k += LANES)
#pragma omp simd
            for (int l = 0; l < LANES; l++)
                s[l] += row[k + l] * xi[k + l];
        float acc = 0;
        for (; k < cols; k++)
            acc += row[k] * xi[k];
        for (int l = 0; l < LANES; l++)
            acc += s[l];
        out[i] = acc;
    }
}

void dfl_gemv_wmat(float *y, const float *x, const dfl_wmat *w, int64_t n)
{
    const int64_t rows = w->rows, cols = w->cols;
    const int dt = w->dtype;
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t o = 0; o < rows; o++) {
        float acc[DFL_GEMV_MAX_ROWS];
        if (dt == DFL_DTYPE_BF16) {
            dot_bf16((const uint16_t *)w->data + o * cols, x, cols, n, acc);
        } else if (dt == DFL_DTYPE_F32 && (uintptr_t)w->data % sizeof(float) == 0) {
            dot_f32((const float *)w->data + o * cols, x, cols, n, acc);
        } else { /* F16 and unaligned F32: converted one value at a time */
            const unsigned char *row =
                (const unsigned char *)w->data + (size_t)o * (size_t)cols * (dt == DFL_DTYPE_F32 ? 4 : 2);
            for (int64_t i = 0; i < n; i++) {
                float s = 0;
                for (int64_t k = 0; k < cols; k++) {
                    float v;
                    if (dt == DFL_DTYPE_F32)
                        memcpy(&v, row + k * 4, sizeof v);
                    else
                        v = dfl_f16_to_f32((uint16_t)(row[k * 2] | row[k * 2 + 1] << 8));
                    s += v * x[i * cols + k];
                }
                acc[i] = s;
            }
        }
        for (int64_t i = 0; i < n; i++)
            y[i * rows + o] = acc[i];
    }
}
