/* compare.h — two dumps of the same prompts, a base and an other (e.g. a model and its
 * quantized self): llama.cpp's `llama-perplexity --kl-divergence` statistics from their
 * logits, and layer by layer how far the other's hidden states and attention rows are
 * from the base's (docs/compare.md gives every definition).
 *
 * Scored tokens: every position t with from <= t <= T-2 of every sample (the logits at
 * t predict tokens[t+1]), or with target_only those whose next token is a target; the two dumps must hold the same
 * samples with the same tokens. Logits may be stored f32 or f16 (probe --save-logits f16); hidden states f32 or f16
 * (probe --save-hidden); attention rows are those both dumps stored (attn/map1, map2,
 * diff with the same layers, heads and rows).
 *
 * Up to DFL_COMPARE_MAX_PAIRS pairs (e.g. a Transformer and its quantized self, a Diff
 * Transformer and its quantized self) are compared side by side.
 */
#ifndef DFL_COMPARE_H
#define DFL_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "base/report.h"
#include "base/status.h"
#include "render/plot.h"

#define DFL_COMPARE_MAX_PAIRS 2

typedef struct dfl_compare_params {
    const char *const *dumps;  /* 2 * n_pairs paths: base, other, base, other, ... */
    size_t n_pairs;            /* 1..DFL_COMPARE_MAX_PAIRS */
    const char *const *labels; /* n_pairs names, or NULL (the other dump's file name) */
    int64_t from;              /* first scored position (default 0) */
    double threshold;          /* a layer has diverged when 1 - cosine exceeds this (default 0.01) */
    int target_only;           /* score only the positions whose next token is a target token
                                * (segment 5: the needle task's answer digits); default 0 */
} dfl_compare_params;

/* {NULL, 0, NULL, 0, 0.01, 0}. */
dfl_compare_params dfl_compare_params_default(void);

/* The statistics of llama.cpp's KL-divergence block for one pair (values in the units
 * llama.cpp prints: Cor, Δp and Same top p in percent). */
typedef struct dfl_compare_kld {
    size_t count; /* scored tokens */
    double ppl_q, ppl_q_err, ppl_base, ppl_base_err, cor;
    double ln_ratio, ln_ratio_err, ratio, ratio_err, dppl, dppl_err;
    double kld_mean, kld_err, kld_max, kld_p999, kld_p990, kld_p950, kld_p900, kld_median;
    double kld_p100, kld_p050, kld_p010, kld_p001, kld_min;
    double dp_mean, dp_err, dp_max, dp_p999, dp_p990, dp_p950, dp_p900, dp_p750, dp_median;
    double dp_p250, dp_p100, dp_p050, dp_p010, dp_p001, dp_min;
    double rms_dp, rms_dp_err, same_top, same_top_err;
} dfl_compare_kld;

typedef struct dfl_compare_result dfl_compare_result;

/* Read both dumps of every pair and reduce them. DFL_ERR_USAGE (bad params),
 * DFL_ERR_FORMAT (samples or tokens differ, no logits in either dump, logits of
 * different vocabularies), the dump reader's statuses, DFL_ERR_NOMEM. The caller owns
 * *out: dfl_compare_result_free (NULL ok). */
dfl_status dfl_compare_run(const dfl_compare_params *p, dfl_compare_result **out, dfl_error *err);
void dfl_compare_result_free(dfl_compare_result *r);

/* The KLD block of pair i (NULL when i is out of range). Owned by r. */
const dfl_compare_kld *dfl_compare_kld_of(const dfl_compare_result *r, size_t pair);

/* The tables: kld (llama.cpp's labels, a value and an error column per pair), hidden
 * (per pair and layer: cosine, relative L2, Pearson), attention (per pair, map, layer,
 * head: mean JS divergence of the rows) and attention_layers (per pair, map, layer: mean
 * over heads). The caller owns *out (dfl_report_destroy). DFL_ERR_NOMEM. */
dfl_status dfl_compare_report(const dfl_compare_result *r, dfl_report **out, dfl_error *err);

/* llama.cpp's own text of the block ("====== Perplexity statistics ======" ... "Same top
 * p"), line for line with its printf formats, one block per pair headed by its label, into
 * a malloc'ed string the caller frees. DFL_ERR_NOMEM. */
dfl_status dfl_compare_llama_text(const dfl_compare_result *r, char **out, dfl_error *err);

/* The per-layer figure: a panel per pair (side by side), lines 1 - cosine of the hidden
 * states and the mean attention JS divergence of each map against the layer, log y.
 * PNG/SVG/PDF by the extension. DFL_ERR_FORMAT when no pair has per-layer data,
 * DFL_ERR_EXISTS, DFL_ERR_IO, the plot's statuses. */
dfl_status dfl_compare_plot(const dfl_compare_result *r, const char *path, int overwrite, const dfl_plot_paper *pp,
                            dfl_error *err);

/* llama.cpp's percentile of sorted v[n] (n >= 1): fraction <= 0 the first, >= 1 the last,
 * else linear interpolation at fraction * (n - 1). */
double dfl_compare_percentile(const float *v, size_t n, double fraction);

#endif
