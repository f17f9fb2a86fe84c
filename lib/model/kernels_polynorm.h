/* kernels_polynorm.h — Motif's PolyNorm gated MLP activation (arXiv 2411.03884, as
 * vLLM's PolyNorm and the MLX Motif port compute it), with its plain serial twin.
 *
 * Per row of the gate g[n, f]:
 *   PolyNorm(g) = w0·N(g³) + w1·N(g²) + w2·N(g) + b,   N(z) = z / sqrt(mean(z²) + eps)
 * with the means over the row's f values; the MLP is down(PolyNorm(gate(x)) ⊙ up(x)).
 */
#ifndef DFL_KERNELS_POLYNORM_H
#define DFL_KERNELS_POLYNORM_H

#include <stdint.h>

/* PolyNorm's eps: fixed in vLLM's PolyNorm and the MLX port (not rms_norm_eps). */
#define DFL_POLYNORM_EPS 1e-6

/* g[n, f] = PolyNorm(g) · u, in place in g; w[3], b[1]. Rows run in parallel when
 * called outside a parallel region; the means accumulate in double. */
void dfl_polynorm_glu(float *g, const float *u, int64_t n, int64_t f, const float *w, const float *b, double eps);
void dfl_polynorm_glu_naive(float *g, const float *u, int64_t n, int64_t f, const float *w, const float *b, double eps);

#endif
