/* kernels_gemm.h — which instruction set the kernels use (chosen once per process), and
 * an AVX-512 matrix product for CPUs where OpenBLAS multiplies with narrower kernels.
 *
 * OpenBLAS picks its kernels by core type (OPENBLAS_CORETYPE, or its own detection). A
 * core type without AVX-512 (Haswell, Zen) on an AVX-512 CPU runs sgemm on 256-bit
 * vectors: half of what the CPU can do. There the forward's products go through
 * dfl_gemm_avx512 instead; everywhere else they stay with OpenBLAS.
 */
#ifndef DFL_KERNELS_GEMM_H
#define DFL_KERNELS_GEMM_H

#include <stddef.h>
#include <stdint.h>

/* The instruction-set paths of the kernels, best last. */
typedef enum dfl_cpu_path { DFL_CPU_SCALAR = 0, DFL_CPU_AVX2 = 1, DFL_CPU_AVX512 = 2 } dfl_cpu_path;

/* The path of this process, decided on the first call and fixed after it: the
 * environment variable DFL_CPU (scalar, avx2 or avx512; a path the CPU lacks falls back
 * to the best it has), else the best the CPU has — AVX-512 only while OpenBLAS's own
 * kernels lack it (dfl_gemm_openblas_is_avx512). */
dfl_cpu_path dfl_cpu(void);
/* The path of the row kernels (softmax, RMSNorm, RoPE, SwiGLU, log-sum-exp in
 * kernels.c), fixed with dfl_cpu(): DFL_CPU clamped to the CPU as above, else the best
 * the CPU has — also where OpenBLAS keeps the products. "scalar" is the x86-64 baseline
 * (SSE2 vectors), avx2 adds AVX2 and FMA, avx512 AVX-512F/BW/VL. */
dfl_cpu_path dfl_cpu_vector(void);
/* "scalar", "avx2", "avx512". */
const char *dfl_cpu_name(dfl_cpu_path p);
/* 1 when the core type OpenBLAS runs on (openblas_get_corename) has AVX-512 kernels. */
int dfl_gemm_openblas_is_avx512(void);

/* y[n, out] (row stride ldy) = alpha · x[n, k] (stride ldx) · op(w), op(w) = wᵀ of
 * w[out, k] (wt 1, a PyTorch Linear) or w[k, out] itself (wt 0), rows of w ldw apart,
 * with AVX-512: panels of x and w packed into cache-sized blocks, 14 × 32 blocks of y in
 * registers, y written (not accumulated into). Runs over threads when called outside a
 * parallel region and the product is large enough; serial inside one. The CPU must have
 * AVX-512F, BW and VL (dfl_cpu() == DFL_CPU_AVX512 says it has). The packed blocks
 * (256 floats for each row of x up to 1024 rows, shared by the threads when they split
 * the columns, plus 256 KB per thread) go into scratch (scratch_n floats) when it holds
 * them all, else into memory allocated for the call (scratch may be NULL). */
void dfl_gemm_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t ldw, int wt, int64_t n,
                     int64_t out, int64_t k, float alpha, float *scratch, size_t scratch_n);

/* y[n, out] = x[n, k] · wᵀ with bf16 w[out, k] (stride ldw, 2-byte aligned), widened to
 * f32 as it is packed: no f32 copy of w. Returns 0 when out of memory for the packed
 * blocks (y then incomplete). AVX-512 path only. */
int dfl_gemm_avx512_bf16(float *y, int64_t ldy, const float *x, int64_t ldx, const uint16_t *w, int64_t ldw, int64_t n,
                         int64_t out, int64_t k, float *scratch, size_t scratch_n);

/* A weight w[out, k] (row stride ldw) packed once for many products with it (the keys
 * of one head, for every query block): dfl_gemm_packed_floats floats at bp (64-byte
 * aligned), which dfl_gemm_avx512_packed then multiplies as w would be. k must be at
 * most 256 (one pass over the depth); dfl_gemm_packed_floats returns 0 otherwise.
 * Results are bit-identical to dfl_gemm_avx512 with wt 1 on the same w. AVX-512 path
 * only; dfl_gemm_pack runs over threads outside a parallel region. */
size_t dfl_gemm_packed_floats(int64_t out, int64_t k);
void dfl_gemm_pack(float *bp, const float *w, int64_t ldw, int64_t out, int64_t k);
/* y[n, out'] = alpha · x[n, k] · wᵀ for the first out' <= out rows of a packed w. */
void dfl_gemm_avx512_packed(float *y, int64_t ldy, const float *x, int64_t ldx, const float *bp, int64_t n, int64_t out,
                            int64_t k, float alpha, float *scratch, size_t scratch_n);

/* The same product by the path dfl_cpu() chose: dfl_gemm_avx512 on the AVX-512 path,
 * OpenBLAS sgemm (beta 0) on the others; dfl_gemm_scratch with the caller's scratch. */
void dfl_gemm_scratch(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t ldw, int wt,
                      int64_t n, int64_t out, int64_t k, float alpha, float *scratch, size_t scratch_n);
void dfl_gemm(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t ldw, int wt, int64_t n,
              int64_t out, int64_t k, float alpha);

#endif
