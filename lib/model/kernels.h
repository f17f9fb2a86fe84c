/* kernels.h — the numeric building blocks of the forward pass, each with a plain
 * serial twin (`_naive`) that the tests compare it against.
 *
 * All arrays are row-major f32; shapes are given as [rows, cols]. Inputs are const,
 * outputs caller-owned and never aliased with inputs unless stated. Fast kernels
 * use CBLAS (OpenBLAS) or OpenMP over rows; the naive twins use neither.
 */
#ifndef DFL_KERNELS_H
#define DFL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Use n threads for the OpenMP kernels and OpenBLAS (n <= 0: leave the defaults, which
 * follow OMP_NUM_THREADS). Called by tools that run the model, once, before any work;
 * kept here so that tools which never touch BLAS do not load OpenBLAS. */
void dfl_set_threads(int n);

/* y[n, out] = x[n, in] · w[out, in]ᵀ  (a PyTorch Linear without bias). */
void dfl_matmul_xwt(float *y, const float *x, const float *w, int64_t n, int64_t in, int64_t out);
void dfl_matmul_xwt_naive(float *y, const float *x, const float *w, int64_t n, int64_t in, int64_t out);

/* A weight matrix [rows, cols] in the dtype the checkpoint stores it in (a dfl_dtype:
 * F32, F16 or BF16; or DFL_WMAT_GGML + a ggml block type of model/gguf_quant.h, each
 * row cols/QK blocks), little-endian, possibly unaligned: usually a view into the
 * memory-mapped file, which stays the only copy of the weights.
 * pair_hd > 0: the rows are stored in llama.cpp's Q/K order (convert_hf_to_gguf.py's
 * permute): within each head of pair_hd rows, stored row 2i holds row i and stored row
 * 2i + 1 holds row i + pair_hd/2; every reader gives the rows in Hugging Face order. */
#define DFL_WMAT_GGML 0x100
typedef struct dfl_wmat {
    const void *data;
    int dtype;
    int64_t rows, cols;
    int64_t pair_hd; /* 0: rows in order */
} dfl_wmat;

/* Floats of scratch that dfl_matmul_wmat needs for any weight of at most `in` columns
 * (a bounded panel: DFL_PANEL_BYTES (32 MB) of f32, or 16 rows when wider). */
#define DFL_PANEL_BYTES ((size_t)32 << 20)
size_t dfl_matmul_scratch(int64_t in);

/* y[n, w->rows] = x[n, w->cols] · Wᵀ with f32 maths. Aligned F32 weights in row order go
 * straight to sgemm; the others (F16, BF16, ggml blocks, unaligned or pair-ordered F32)
 * are converted panel by panel (rows of W)
 * into scratch (dfl_matmul_scratch(w->cols) floats) and each panel multiplied in turn.
 * The naive twin converts element by element and accumulates in double. */
void dfl_matmul_wmat(float *y, const float *x, const dfl_wmat *w, int64_t n, float *scratch);
void dfl_matmul_wmat_naive(float *y, const float *x, const dfl_wmat *w, int64_t n);

/* Rows [r0, r0 + n) of w as f32 into dst[n, w->cols] (exact: every f16/bf16 value is
 * an f32; ggml blocks as ggml's dequantize_row_*). Runs in parallel when called outside
 * a parallel region. */
void dfl_wmat_rows(const dfl_wmat *w, int64_t r0, int64_t n, float *dst);

/* y[n, d] += b[d] on every row. */
void dfl_add_bias(float *y, const float *b, int64_t n, int64_t d);

/* y[n, d] = x / sqrt(mean(x²) + eps) · gain (gain may be NULL = ones) · scale, per row.
 * y may equal x. */
void dfl_rmsnorm(float *y, const float *x, const float *gain, int64_t n, int64_t d, float eps, float scale);
void dfl_rmsnorm_naive(float *y, const float *x, const float *gain, int64_t n, int64_t d, float eps, float scale);
/* dfl_rmsnorm with scale 1 that also stores rstd[n] = 1/sqrt(mean(x²) + eps) per row
 * (the trainer keeps it for the backward pass). Same arithmetic as dfl_rmsnorm. */
void dfl_rmsnorm_rstd(float *y, float *rstd, const float *x, const float *gain, int64_t n, int64_t d, float eps);

/* Rotary embedding tables: inv_freq[d/2] for head dimension d under the config's
 * theta and scaling; cos/sin [T, d/2] for positions 0..T-1 (angles in double). */
typedef struct dfl_rope_params {
    double theta;
    int kind; /* dfl_rope_kind */
    double factor, low_freq_factor, high_freq_factor;
    int64_t original_max_pos;
} dfl_rope_params;
void dfl_rope_inv_freq(double *inv_freq, int64_t d, const dfl_rope_params *p);
void dfl_rope_tables(float *cos_t, float *sin_t, const double *inv_freq, int64_t d, int64_t T);
/* The same for positions [t0, t0 + T): row t of the tables is position t0 + t. */
void dfl_rope_tables_at(float *cos_t, float *sin_t, const double *inv_freq, int64_t d, int64_t t0, int64_t T);

/* Rotate in place every head of x[T, ld] (heads of width d at columns h*d, h < nh):
 * interleaved pairs (2j, 2j+1) or rotate-half pairs (j, j + d/2). Row t uses
 * position t. */
void dfl_rope_apply(float *x, int64_t T, int64_t ld, int64_t nh, int64_t d, const float *cos_t, const float *sin_t,
                    int interleaved);
void dfl_rope_apply_naive(float *x, int64_t T, int64_t ld, int64_t nh, int64_t d, const float *cos_t,
                          const float *sin_t, int interleaved);
/* One row of dfl_rope_apply: rotate the nh heads of x[nh·d] by angles c[d/2], s[d/2]
 * (passing −sin rotates back: the backward pass of a rotation). Serial. */
void dfl_rope_row(float *x, int64_t nh, int64_t d, const float *c, const float *s, int interleaved);

/* In place causal softmax of s[n, ld]: row i keeps columns 0..lim[i] (inclusive),
 * normalised over them, and sets columns lim[i]+1..ncols-1 to 0. Rows run in parallel
 * only in the fast twin when called outside a parallel region. */
void dfl_softmax_causal(float *s, int64_t n, int64_t ncols, int64_t ld, const int64_t *lim);
void dfl_softmax_causal_naive(float *s, int64_t n, int64_t ncols, int64_t ld, const int64_t *lim);
/* The same with a sliding window: row i keeps columns lo[i]..lim[i] and sets the
 * others in [0, ncols) to 0 (lo NULL = all zeros, i.e. dfl_softmax_causal). */
void dfl_softmax_window(float *s, int64_t n, int64_t ncols, int64_t ld, const int64_t *lo, const int64_t *lim);
void dfl_softmax_window_naive(float *s, int64_t n, int64_t ncols, int64_t ld, const int64_t *lo, const int64_t *lim);

/* g[n, f] = silu(g) · u (SwiGLU gate), in place in g. */
void dfl_swiglu(float *g, const float *u, int64_t n, int64_t f);
void dfl_swiglu_naive(float *g, const float *u, int64_t n, int64_t f);

/* Per row i of z[n, V]: lse[i] = log Σ_v exp(z[i, v]) and argmax[i] = the first index
 * of the row's maximum (meaningful for finite rows). *all_finite (when not NULL): 1 when
 * every value of z is finite (no NaN, no ±Inf), else 0 — found in the same pass as the
 * maxima. Rows run in parallel. */
void dfl_logsumexp_argmax(const float *z, int64_t n, int64_t V, double *lse, int32_t *argmax, int *all_finite);
void dfl_logsumexp_argmax_naive(const float *z, int64_t n, int64_t V, double *lse, int32_t *argmax, int *all_finite);

/* 1 when every x[0..n) is finite (no NaN, no ±Inf), else 0. Vectorised: one pass,
 * no branch (x·0 is NaN exactly for NaN and ±Inf). */
int dfl_all_finite(const float *x, size_t n);

/* y += x, elementwise over n values. */
void dfl_add_inplace(float *y, const float *x, size_t n);

/* Attention-logit fake quantization (probe --quantize-logits; dumps record the bits in
 * the root attribute logit_quant_bits). Symmetric absmax with `bits` (2..16): scale =
 * maxabs / (2^(bits−1) − 1), x → round(x/scale)·scale (round half away from zero), in
 * place over x[n]. maxabs 0 leaves x unchanged. */
void dfl_fake_quant(float *x, int64_t n, float maxabs, int bits);

#endif
