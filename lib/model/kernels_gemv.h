/* kernels_gemv.h — the product of few rows with a weight matrix read in its stored
 * dtype (KV-cached decoding steps: one row per step). The panel path of dfl_matmul_wmat
 * converts every weight to f32 before an sgemm, which for one row costs more than the
 * product; here each BF16, F16 or F32 weight is converted in registers as it is used,
 * so a step reads each weight once. */
#ifndef DFL_KERNELS_GEMV_H
#define DFL_KERNELS_GEMV_H

#include <stdint.h>

#include "model/kernels.h"

/* Most rows of x dfl_gemv_wmat is meant for (beyond, the panel path wins). */
#define DFL_GEMV_MAX_ROWS 4

/* 1 when w can go through dfl_gemv_wmat: BF16, F16 or F32 (any alignment), rows in
 * order (no GGUF pairing, no ggml blocks). */
int dfl_gemv_wmat_supported(const dfl_wmat *w);

/* y[n, w->rows] = x[n, w->cols] · Wᵀ, f32 accumulation (16 partial sums per row),
 * OpenMP over output rows; n <= DFL_GEMV_MAX_ROWS. Its serial twin is
 * dfl_matmul_wmat_naive (double sums). */
void dfl_gemv_wmat(float *y, const float *x, const dfl_wmat *w, int64_t n);

#endif
