/* probe_quant.h — internal to probe: with --quant-stats, the sums behind outliers'
 * statistics for quantization (docs/outliers.md "Quantization statistics"): per layer and
 * linear-layer input (attention input, heads' output before o_proj, MLP input, down_proj's
 * input) the moments of every element and each channel's Σx², and the mean |q| and |k| of
 * every head and dimension after RoPE. One per sample; not thread-safe (the forward pass
 * calls it between its parallel regions). */
#ifndef DFL_PROBE_QUANT_H
#define DFL_PROBE_QUANT_H

#include <stdint.h>

#include "base/status.h"
#include "dump/dump.h"

typedef struct dfl__qstats dfl__qstats;

/* Sums for L layers, empty; sites and heads take their widths from the first call.
 * NULL when out of memory. Free with dfl__qstats_free (NULL ok). */
dfl__qstats *dfl__qstats_create(int64_t L);
void dfl__qstats_free(dfl__qstats *q);

/* The capture callbacks (dfl_capture's linear_rows and qk_rows; user = the dfl__qstats).
 * DFL_ERR_NOMEM, DFL_ERR_RANGE (a site of another width than before). */
dfl_status dfl__qstats_linear(void *user, int64_t layer, int site, int64_t row0, int64_t n, int64_t width,
                              const float *x, int64_t ld, dfl_error *err);
dfl_status dfl__qstats_qk(void *user, int64_t layer, int64_t T, const float *q, int64_t nq, int64_t q_ld,
                          const float *k, int64_t nk, int64_t k_ld, int64_t hd, dfl_error *err);

/* Write the sample's datasets (outliers/linear/..., outliers/qk/...) into the open sample
 * of d. The dump writer's statuses. */
dfl_status dfl__qstats_write(const dfl__qstats *q, dfl_dump *d, dfl_error *err);

#endif
