/* outliers_quant.h — `outliers --quant-stats`: the statistics quantization engineers read
 * (docs/outliers.md "Quantization statistics"), pooled over every sample of each dump:
 *
 *   tensors   per layer and linear-layer input (attn_in, attn_out, mlp_in, down_in; from
 *             probe --quant-stats): mean, std, skewness, kurtosis as EXCESS (llama.cpp's
 *             imatrix) and as PEARSON (= excess + 3, Bondarenko et al.), max |x|, the
 *             normalised entropy of the channel energies and ΣE[A²] ("energy")
 *   residual  layer l against l − 1 of the residual stream (probe --save-hidden): gain
 *             ‖h_l‖ / ‖h_{l−1}‖, cosine, Pearson, each the mean over tokens
 *   sink      Sink_k at ε (Gu et al., ICLR 2025): the share of (sample, layer, head) whose
 *             mean attention to key k over the stored query rows q >= k exceeds ε, and that
 *             mean itself (the per-key importance Σ_q A[q,k] / (T − k) when every row is
 *             stored), per map, for keys 0..3; and per layer
 *   qk        the Q/K massive-values map (Jin et al., ICML 2025): per layer and head the
 *             largest mean |q| and |k| and its dimension, and the share of the mass in the
 *             lower-frequency half of the RoPE pairs; qk_map holds every [layer, head, dim]
 */
#ifndef DFL_OUTLIERS_QUANT_H
#define DFL_OUTLIERS_QUANT_H

#include <stddef.h>

#include "base/report.h"
#include "base/status.h"
#include "render/plot.h"

typedef struct dfl_outliers_quant_params {
    const char *const *dumps;
    size_t n_dumps;            /* 1..8 */
    const char *const *labels; /* n_dumps names, or NULL (file names without .h5) */
    double sink_eps;           /* ε of Sink_k (default 0.3) */
    const char *plot_path;     /* the figure (PNG, SVG, PDF) or NULL */
    int overwrite;
    const dfl_plot_paper *paper; /* may be NULL */
} dfl_outliers_quant_params;

/* Read the dumps and build the report (tables above, those the dumps have data for);
 * write the figure when plot_path is set: a column per dump, rows Pearson kurtosis per
 * layer and site, Sink_0 per layer and map, mean |q| and |k| per RoPE pair. DFL_ERR_FORMAT
 * when a dump holds none of the datasets, the reader's and plot's statuses. *out is the
 * caller's (dfl_report_destroy). */
dfl_status dfl_outliers_quant_run(const dfl_outliers_quant_params *p, dfl_report **out, dfl_error *err);

#endif
