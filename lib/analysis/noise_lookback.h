/* noise_lookback.h — the lookback ratio of generated tokens (`noise --lookback`), from
 * the generated/lookback datasets `probe --generate` writes.
 *
 * The lookback ratio (Lookback Lens, Chuang et al. 2024) of a head on the row that
 * chose a generated token: mean attention magnitude on the prompt over that plus the
 * mean on the tokens generated so far (docs/probe.md "Generation"). Per dump, one map
 * (diff for Diff dumps by default, map1 otherwise) is averaged over samples and steps
 * 1 … n − 1 (step 0 has no generated keys): per layer and head, per step and layer, and
 * per sample for the samples whose generation was right or wrong (generated/correct, the
 * exact match of a prompt's "expect"). Tables as a report, and two figures: the ratio
 * per step for each layer, and a layers x heads heatmap per dump side by side.
 */
#ifndef DFL_NOISE_LOOKBACK_H
#define DFL_NOISE_LOOKBACK_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/noise.h"
#include "base/report.h"
#include "base/status.h"
#include "render/plot.h"

/* The longest generation the per-step averages keep (longer steps are averaged into
 * the layer and head tables only). */
#define DFL_LOOKBACK_MAX_STEPS 4096

typedef struct dfl_lookback_dump {
    char *label;                  /* owned */
    const char *map;              /* "map1", "map2" or "diff" (static) */
    int64_t layers, heads, steps; /* steps: the longest generation (capped) */
    size_t n_samples;             /* samples that generated (with a lookback dataset) */
    double mean;                  /* over samples, steps >= 1, layers and heads */
    double *by_lh;                /* [layers, heads] */
    double *by_step;              /* [steps, layers]: mean over heads and samples; NaN at step 0 */
    double *step_mean;            /* [steps]: over layers, heads and samples */
    size_t n_right, n_wrong;      /* samples with generated/correct 1 and 0 */
    double right, wrong;          /* mean of those samples' ratios (each sample's mean first) */
} dfl_lookback_dump;

typedef struct dfl_lookback_result {
    dfl_lookback_dump *dumps; /* [n_dumps] */
    size_t n_dumps;
} dfl_lookback_result;

/* Read the dumps (labels as dfl_noise_params: NULL = file names). DFL_ERR_FORMAT for a
 * dump without any generated/lookback (not written by probe --generate) or of the wrong
 * shape; DFL_ERR_USAGE for a map the dump does not have; dfl_dump_open's statuses,
 * DFL_ERR_NOMEM. Caller frees with dfl_lookback_result_free. */
dfl_status dfl_lookback_analyze(const char *const *dumps, const char *const *labels, size_t n_dumps, dfl_noise_map map,
                                dfl_lookback_result **out, dfl_error *err);
void dfl_lookback_result_free(dfl_lookback_result *r);

/* Tables "lookback" (a row per dump: samples, mean ratio, right and wrong answers'
 * ratios and counts), "lookback_by_layer", "lookback_by_head" (a row per layer and head)
 * and "lookback_by_step" (a row per step), a column per dump. Caller owns *out. */
dfl_status dfl_lookback_report(const dfl_lookback_result *r, dfl_report **out, dfl_error *err);

/* The ratio per step, a line per layer and dump (dumps dashed differently), as a PNG,
 * SVG or PDF by path's extension; DFL_ERR_EXISTS unless overwrite. */
dfl_status dfl_lookback_plot_steps(const dfl_lookback_result *r, const char *path, int overwrite,
                                   const dfl_plot_paper *pp, dfl_error *err);

/* Layers x heads heatmaps of the mean ratio, one panel per dump side by side, one
 * colour scale [0, 1]. */
dfl_status dfl_lookback_plot_heads(const dfl_lookback_result *r, const char *path, int overwrite,
                                   const dfl_plot_paper *pp, dfl_error *err);

#endif
