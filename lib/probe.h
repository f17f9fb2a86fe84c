/* probe.h — the instrumented run behind `probe`: load a model, read prompts, run the
 * forward pass on each and write the dump (DESIGN.md "Dump schema").
 *
 * Callable in-process (tests drive it); the tool only parses flags and reports.
 */
#ifndef DFL_PROBE_H
#define DFL_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum dfl_maps_mode { DFL_MAPS_NONE = 0, DFL_MAPS_ALL } dfl_maps_mode;

typedef struct dfl_probe_progress {
    size_t sample, samples;      /* 0-based sample being run, total */
    int64_t tokens_done;         /* tokens finished so far over all samples */
    int64_t tokens_total;
    double elapsed;              /* seconds since the first sample started */
} dfl_probe_progress;

typedef struct dfl_probe_params {
    const char *model_dir;
    const char *prompts_path;
    const char *out_path;
    dfl_maps_mode maps;          /* default DFL_MAPS_NONE */
    int map_f16;                 /* maps stored as f16 (default 1) or f32 */
    int save_logits;             /* write logits [T, V] per sample */
    int overwrite;               /* replace an existing output */
    void *user;                  /* passed to the callbacks */
    /* Non-fatal notes (e.g. a prompt longer than max_position_embeddings). May be NULL. */
    void (*warn)(void *user, const char *msg);
    /* Called before each sample and once at the end (sample == samples). May be NULL. */
    void (*progress)(void *user, const dfl_probe_progress *p);
} dfl_probe_params;

typedef struct dfl_probe_report {
    size_t samples;
    int64_t tokens;
    double forward_seconds;      /* wall time inside the forward passes (incl. capture) */
    double flops;                /* matrix FLOPs of those passes (dfl_forward_flops) */
} dfl_probe_report;

/* Defaults: maps none, f16 maps, no logits, no overwrite, no callbacks. */
dfl_probe_params dfl_probe_params_default(void);

/* Run the probe. On any error nothing is left at out_path (and an existing file there
 * is untouched). report may be NULL. Statuses: those of model loading, prompt
 * reading (line numbers), DFL_ERR_RANGE for token ids outside the vocabulary,
 * DFL_ERR_EXISTS, DFL_ERR_HDF5, DFL_ERR_NOMEM. */
dfl_status dfl_probe_run(const dfl_probe_params *p, dfl_probe_report *report, dfl_error *err);

#endif
