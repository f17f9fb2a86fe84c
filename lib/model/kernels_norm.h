/* kernels_norm.h — the kernels of the families beyond Llama's RMSNorm and SwiGLU
 * (GPT-2, GPT-NeoX, CLIP): LayerNorm with bias, the two GELUs and QuickGELU, and the matmul of a weight
 * stored [in, out] (GPT-2's Conv1D). Each with a plain serial twin (`_naive`) that
 * the tests compare it against; the conventions of kernels.h.
 */
#ifndef DFL_KERNELS_NORM_H
#define DFL_KERNELS_NORM_H

#include <stddef.h>
#include <stdint.h>

#include "model/kernels.h"

/* y[n, d] = (x − mean) / sqrt(var + eps) · gain + bias per row (torch.nn.LayerNorm:
 * biased variance; gain and bias may be NULL = ones and zeros). y may equal x. */
void dfl_layernorm(float *y, const float *x, const float *gain, const float *bias, int64_t n, int64_t d, float eps);
void dfl_layernorm_naive(float *y, const float *x, const float *gain, const float *bias, int64_t n, int64_t d,
                         float eps);

/* In place over x[n]: GELU, the tanh form (Hugging Face gelu_new, gelu_pytorch_tanh):
 * 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))); or the exact one (gelu): 0.5·x·(1 + erf(x/√2)). */
void dfl_gelu_tanh(float *x, size_t n);
void dfl_gelu_tanh_naive(float *x, size_t n);
void dfl_gelu_erf(float *x, size_t n);
void dfl_gelu_erf_naive(float *x, size_t n);

/* In place over x[n]: QuickGELU, x · σ(1.702·x) (OpenAI CLIP's text tower and DiffCLIP's). */
void dfl_quick_gelu(float *x, size_t n);
void dfl_quick_gelu_naive(float *x, size_t n);

/* g[n, f] = act(g) · u in place (Gemma's GeGLU): act the tanh GELU, or the erf one when erf. */
void dfl_geglu(float *g, const float *u, int64_t n, int64_t f, int erf);
void dfl_geglu_naive(float *g, const float *u, int64_t n, int64_t f, int erf);

/* x → cap · tanh(x / cap) in place over x[n] (Gemma 2's soft-capping of attention scores
 * and of the output logits). */
void dfl_softcap(float *x, size_t n, float cap);
void dfl_softcap_naive(float *x, size_t n, float cap);

/* Phi-3's longrope frequencies (Hugging Face _compute_longrope_parameters):
 * inv_freq[j] = 1 / (factors[j] · theta^(2j/d)), j < d/2. */
void dfl_rope_inv_freq_longrope(double *inv_freq, int64_t d, double theta, const double *factors);

/* y[n, w->cols] = x[n, w->rows] · W for a weight stored [in, out] (GPT-2's Conv1D:
 * w->rows inputs, w->cols outputs; x · W, not x · Wᵀ). Aligned F32 goes straight to
 * sgemm; other dtypes are converted in panels of rows of W (inputs) into scratch
 * (scratch_n floats, at least w->cols) and accumulated. */
void dfl_matmul_wmat_io(float *y, const float *x, const dfl_wmat *w, int64_t n, float *scratch, size_t scratch_n);
void dfl_matmul_wmat_io_naive(float *y, const float *x, const dfl_wmat *w, int64_t n);

#endif
