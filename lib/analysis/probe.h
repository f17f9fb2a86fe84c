/* probe.h — the instrumented run behind `probe`: load a model, read prompts, run the
 * forward pass on each and write the dump (docs/format.md "Dump"): maps of the
 * selected layers, heads and rows, attention-to-segment shares of the analysis rows,
 * attention-logit and hidden-state outlier statistics, NLL, argmax and target
 * accuracy. Optionally fake-quantizes the attention logits (an intervention).
 *
 * Callable in-process (tests drive it); the tool only parses flags and reports.
 */
#ifndef DFL_PROBE_H
#define DFL_PROBE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "model/forward.h"
#include "model/model.h"
#include "text/prompts.h"
#include "base/status.h"

/* ------------------------------------------------------- analysis rows */

/* Which query rows the noise shares average over (`--rows`). */
typedef enum dfl_rows_rule {
    DFL_ROWS_LAST = 0, /* the last token of the last query span (else the last token) */
    DFL_ROWS_QUERY,    /* every token of every query span (else the last token) */
    DFL_ROWS_TARGET,   /* rows that predict a target token: p − 1 for each target token p
                        * (else the last token) */
    DFL_ROWS_ALL       /* every row */
} dfl_rows_rule;

/* "last", "query", "target", "all". */
const char *dfl_rows_rule_name(dfl_rows_rule r);
/* Parse a rule name; DFL_ERR_USAGE otherwise. */
dfl_status dfl_rows_rule_parse(const char *text, dfl_rows_rule *out, dfl_error *err);

/* The analysis rows of p under rule r, ascending and distinct, into rows[p->n_tokens];
 * returns how many (>= 1). */
size_t dfl_analysis_rows(const dfl_prompt *p, dfl_rows_rule r, int64_t *rows);

/* ------------------------------------------------------- map selection */

typedef enum dfl_map_rows { DFL_MAP_ROWS_ALL = 0, DFL_MAP_ROWS_ANALYSIS, DFL_MAP_ROWS_LIST } dfl_map_rows;

/* `--maps`: none, all, or "layers=0,3-5;heads=all;rows=analysis" (keys optional,
 * each defaulting to all; lists of indices and inclusive ranges). */
typedef struct dfl_map_select {
    int enabled;
    int64_t *layers;
    size_t n_layers; /* NULL = all */
    int64_t *heads;
    size_t n_heads; /* NULL = all */
    dfl_map_rows rows;
    int64_t *row_list;
    size_t n_rows; /* rows == DFL_MAP_ROWS_LIST */
} dfl_map_select;

/* Parse a selection; lists come out sorted and distinct. Caller frees with
 * dfl_map_select_free. DFL_ERR_USAGE with what is wrong. */
dfl_status dfl_map_select_parse(const char *spec, dfl_map_select *out, dfl_error *err);
void dfl_map_select_free(dfl_map_select *s);

/* ------------------------------------------------------------------ run */

typedef struct dfl_probe_progress {
    size_t sample, samples; /* 0-based sample being run (in this run's order), total */
    int64_t layer, layers;  /* layer being run in that sample */
    int64_t tokens_done;    /* tokens finished so far over all samples */
    int64_t tokens_total;
    double elapsed; /* seconds since the first sample started */
} dfl_probe_progress;

/* `--generate N` and its sampling flags (docs/probe.md "Generation"). */
typedef struct dfl_generate_params {
    int64_t tokens;       /* N new tokens per prompt, stopping early at an EOS id; 0 = off
                           * (default); a prompt's "generate" overrides it */
    int sample;           /* 0 greedy (default), 1 sampling with the values below */
    double temperature;   /* > 0 (default 1) */
    int64_t top_k;        /* keep the K most probable tokens; 0 = all (default) */
    double top_p;         /* nucleus: the smallest set holding top_p of the mass; 1 = all (default) */
    uint64_t seed;        /* sampling seed (default 0): draws depend on it and the sample's index */
    int32_t alternatives; /* top alternatives stored per step (default 5) */
} dfl_generate_params;

typedef struct dfl_probe_params {
    const char *model_dir;
    const char *prompts_path;
    const char *out_path;
    const char *tokenizer_path; /* tokenizer.json (or its folder) for text prompts and labels;
                                 * NULL: model_dir/tokenizer.json, used only when a prompt
                                 * has "input" text (default NULL) */
    dfl_map_select maps;        /* default: none */
    int map_f16;                /* maps stored as f16 (default 1) or f32 */
    int map_gzip;               /* map chunks: -1 raw, 0-9 shuffle + deflate level (default 1) */
    int save_logits;            /* write logits [T, V] per sample: 0 no, 1 f32, 2 f16 */
    int save_hidden;            /* write each layer's output [L, T, D] per sample: 0 no, 1 f32, 2 f16 */
    int quant_stats;            /* write outliers/linear and outliers/qk (probe_quant.h) */
    dfl_rows_rule rows;         /* analysis rows (default last) */
    int32_t topk;               /* K of the outlier top lists (default 100) */
    double alpha;               /* hidden channel outlier threshold (default 6) */
    dfl_forward_opts forward;   /* interventions (default none) */
    /* --intervene, --interventions, --patch-sweep, --logit-diff: interventions run beside
     * the unmodified pass, their metrics in effects/ and patch/ (analysis/probe_effects.h);
     * NULL = none */
    const struct dfl_effects_params *effects;
    int overwrite; /* replace an existing output */
    /* Run only these prompts (0-based indices in file order, strictly ascending; NULL =
     * all). Samples keep their file-order index in the dump, so the dumps of disjoint
     * subsets join into the dump of the whole set (an MPI rank's share). */
    const size_t *subset;
    size_t n_subset;
    int32_t lens_topk;     /* --logit-lens K: the top K tokens of each layer's readout; 0 = off */
    int dla;               /* --dla: direct logit attribution at the analysis rows */
    int logit_diff_set;    /* --logit-diff A,B given: the metric (and DLA direction) is */
    int32_t logit_diff[2]; /* logit[A] − logit[B] instead of the next token's logit */

    int strict; /* a NaN or Inf in the forward pass is an error (DFL_ERR_RANGE);
                 * by default a warning, recorded in the dump */
    /* Polled once per layer and per sample: non-zero stops the run with
     * DFL_ERR_CANCELLED, nothing left at out_path (a tool's signal handler sets it).
     * NULL = never. */
    const volatile sig_atomic_t *cancel;
    int allow_unused; /* run a model whose checkpoint holds tensors it does not
                       * use (warned about); default: refused */
    int room_checked; /* the caller has checked the free space for the whole job
                       * (an MPI rank): no check of its own (default 0: a run
                       * projected to exceed the free space is refused unless
                       * overwrite, then warned about) */
    void *user;       /* passed to the callbacks */
    /* Non-fatal notes (e.g. a prompt longer than max_position_embeddings). May be NULL. */
    void (*warn)(void *user, const char *msg);
    /* Called at each layer of each sample and once at the end (sample == samples). */
    void (*progress)(void *user, const dfl_probe_progress *p);
    /* --generate and its sampling flags (default: off) */
    dfl_generate_params generate;
} dfl_probe_params;

typedef struct dfl_probe_report {
    size_t samples;
    int64_t tokens;
    double forward_seconds;          /* wall time inside the forward passes (incl. capture) */
    double flops;                    /* matrix FLOPs of those passes (dfl_forward_flops) */
    size_t targets, targets_correct; /* samples with a target span, and how many right */
    double join_seconds;             /* MPI runs: rank 0's time joining the ranks' parts (else 0) */
    size_t nonfinite_samples;        /* samples with a NaN or Inf in their forward pass */
    size_t generated_samples;        /* samples that generated (probe --generate) */
    int64_t generated_tokens;        /* tokens generated over all samples */
    double generate_seconds;         /* wall time of the decoding steps (incl. capture) */
    size_t expects, expects_correct; /* samples with "expect", and how many generations began with it */
} dfl_probe_report;

/* Defaults as documented on each field. */
dfl_probe_params dfl_probe_params_default(void);

/* The output path, checked before any work (dfl_probe_run does it first): not a
 * directory (DFL_ERR_USAGE, even with overwrite), not one of the inputs (the prompts,
 * the model folder with its config and weights, the tokenizer: DFL_ERR_USAGE), not
 * existing unless overwrite (DFL_ERR_EXISTS), in a folder where a file can be created
 * (DFL_ERR_IO; DFL_ERR_EXISTS while another process writes the same path). */
dfl_status dfl_probe_check_out(const dfl_probe_params *p, dfl_error *err);

/* Run the probe. On any error nothing is left at out_path (and an existing file there
 * is untouched). report may be NULL. Statuses: those of model loading, prompt
 * reading (line numbers), DFL_ERR_RANGE for token ids outside the vocabulary,
 * DFL_ERR_USAGE for a map selection outside the model, DFL_ERR_EXISTS,
 * DFL_ERR_HDF5, DFL_ERR_NOMEM, DFL_ERR_CANCELLED. */
dfl_status dfl_probe_run(const dfl_probe_params *p, dfl_probe_report *report, dfl_error *err);

/* An upper bound of the bytes the dump of prompts ps takes (maps counted uncompressed),
 * for the free-space check before a run. */
double dfl_probe_projected_bytes(const dfl_probe_params *p, const dfl_config *c, const dfl_prompt_set *ps);

/* The prompts of p->prompts_path as probe runs them: text prompts ("input") tokenized
 * with p->tokenizer_path (or the model folder's tokenizer.json), token prompts without
 * labels labelled when a tokenizer is named. Caller frees with dfl_prompt_set_free.
 * Statuses of prompt reading and of the tokenizer. */
dfl_status dfl_probe_read_prompts(const dfl_probe_params *p, dfl_prompt_set *ps, dfl_error *err);

/* ------------------------------------------------------------- shards */

/* Split n prompts of tokens[i] tokens over `ranks` ranks, balanced by the cost of
 * their forward passes (dfl_forward_flops: a·T for the projections and MLP plus b·T²
 * for attention): costliest first, each to the least-loaded rank. owner[n] receives
 * each prompt's rank; the split depends only on the inputs. DFL_ERR_USAGE, DFL_ERR_NOMEM. */
dfl_status dfl_probe_shard(const dfl_config *c, const size_t *tokens, size_t n, int ranks, int *owner, dfl_error *err);

#endif
