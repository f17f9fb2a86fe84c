/* probe_effects.h — probe's interventions and their metrics (docs/probe.md
 * "Interventions", docs/format.md effects/ and patch/): parses the specs, runs the
 * first passes they need (means for mean ablation, the source prompts of patching and
 * resampling), then per sample runs the unmodified pass and each intervention and
 * writes target NLL, probability, logit, accuracy (and a logit difference) of each, and
 * for a patch sweep the patched metric of every (layer, position) or (layer, head) cell
 * with its normalised effect.
 *
 * Spec grammar: KIND:key=value,key=value… with KIND ablate, lambda, map, knockout,
 * patch or sweep (docs/probe.md has every key and examples).
 */
#ifndef DFL_PROBE_EFFECTS_H
#define DFL_PROBE_EFFECTS_H

#include <signal.h>
#include <stddef.h>

#include "base/status.h"
#include "dump/dump.h"
#include "model/forward.h"
#include "model/model.h"
#include "text/prompts.h"

typedef struct dfl_effects_params {
    const char *const *specs; /* --intervene SPEC (and --patch-sweep as "sweep:SPEC"), in order */
    size_t n_specs;
    const char *file;       /* --interventions FILE.json: a JSON array of spec strings; NULL = none */
    const char *logit_diff; /* --logit-diff A,B: token ids or single-token strings; NULL = none */
    /* --apply SPEC: lambda, map or ablate (zero or mean, every position) on every pass,
     * the main one included (its maps, shares and NLL then are of the modified model) */
    const char *const *apply;
    size_t n_apply;
} dfl_effects_params;

typedef struct dfl__effects dfl__effects;

/* Parse and check the specs against m and ps (layers, heads, named source prompts), read
 * token strings of logit_diff with the tokenizer at tokenizer_path (NULL: the model
 * folder's), and run the first passes (mean head outputs over all of ps, the source
 * prompts' activations). base: the forward options of every pass (quantization).
 * *out is NULL when ep names nothing. Caller frees with dfl__effects_free.
 * DFL_ERR_USAGE naming the spec, DFL_ERR_NOMEM, the statuses of the forward pass. */
dfl_status dfl__effects_open(const dfl_effects_params *ep, const dfl_model *m, const dfl_prompt_set *ps,
                             const char *model_dir, const char *tokenizer_path, const dfl_forward_opts *base,
                             int save_logits, const volatile sig_atomic_t *cancel, dfl__effects **out, dfl_error *err);

/* The interventions every pass applies (--apply), for the main pass; NULL = none. */
const struct dfl_iv_list *dfl__effects_applied(const dfl__effects *e);

/* The JSON text of what is applied (the dump's root attribute interventions); owned by e. */
const char *dfl__effects_json(const dfl__effects *e);

/* Run and write sample `index` of the prompt set into d's open sample group;
 * DFL_ERR_CANCELLED as soon as *cancel (polled per pass) is non-zero. */
dfl_status dfl__effects_sample(dfl__effects *e, dfl_dump *d, size_t index, dfl_error *err);

void dfl__effects_free(dfl__effects *e);

#endif
