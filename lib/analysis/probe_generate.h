/* probe_generate.h — internal to probe: `probe --generate N` (docs/probe.md
 * "Generation"). After the prompt's instrumented pass (which fills a KV cache), new
 * tokens are chosen one at a time — greedy, or sampled with temperature, top-k and
 * top-p from a seeded generator — until N or an EOS id, each fed back as one cached
 * step. Each step's attention rows go to the sample's maps (the prompt's and the
 * generated rows in one map, keys up to the last generated row) and into the lookback
 * ratio and the noise shares of generated rows; its layer outputs and attention logits
 * into outlier statistics of their own. probe.c calls these at four points of a sample.
 */
#ifndef DFL_PROBE_GENERATE_H
#define DFL_PROBE_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/probe.h"
#include "analysis/probe_capture.h"
#include "dump/dump.h"
#include "text/tokenizer.h"

/* What every sample of a run shares: the EOS ids and the tokenizer that decodes the
 * generated text. */
typedef struct dfl__gen_ctx {
    const dfl_probe_params *p;
    const dfl_model *m;
    dfl_tokenizer *tok; /* NULL: no tokenizer (no decoded text) */
    int32_t eos[16];    /* config.json's and generation_config.json's eos_token_id */
    size_t n_eos;
} dfl__gen_ctx;

/* The context of a run whose options or prompts ask for generation; *out stays NULL
 * when none does. The tokenizer is --tokenizer, else the model folder's tokenizer.json
 * when there is one. Caller frees with dfl__gen_ctx_close. DFL_ERR_USAGE for sampling
 * values out of range; the tokenizer's and config files' errors. */
dfl_status dfl__gen_ctx_open(const dfl_probe_params *p, const dfl_model *m, const dfl_prompt_set *ps,
                             dfl__gen_ctx **out, dfl_error *err);
void dfl__gen_ctx_close(dfl__gen_ctx *g);

/* Tokens prompt pr generates: its "generate", else --generate. */
int64_t dfl__gen_count(const dfl_probe_params *p, const dfl_prompt *pr);

/* After the sample's map selection is resolved: its generation state (r->gen, NULL
 * when it does not generate), the maps' key axis (r->keys) and their rows (the
 * prompt's selected rows, then every generated row). DFL_ERR_NOMEM. */
dfl_status dfl__gen_begin(sample_run *r, dfl_error *err);

/* The sample's forward pass with the options fo (probe's, with --apply's interventions)
 * and probe's capture cap: dfl_forward, or with r->gen the prompt into a KV cache and the
 * decoding steps (DFL_ERR_USAGE when fo carries interventions). Statuses of dfl_forward
 * and of the callbacks; DFL_ERR_CANCELLED. */
dfl_status dfl__gen_forward(sample_run *r, const dfl_forward_opts *fo, const dfl_capture *cap, dfl_probe_report *rep,
                            dfl_error *err);

/* The sample's generated/ datasets (nothing without r->gen). DFL_ERR_HDF5, DFL_ERR_NOMEM. */
dfl_status dfl__gen_write(sample_run *r, dfl_dump *d, dfl_probe_report *rep, dfl_error *err);

/* Frees r->gen; accepts a sample that never generated. */
void dfl__gen_free(sample_run *r);

/* One candidate of a sampling step. */
typedef struct dfl__gen_pair {
    float logit;
    int32_t id;
} dfl__gen_pair;

/* Choose the next token from logits[V]: greedy (the first maximum), or sampled as gp
 * says — logits / temperature, the top_k most probable, then the smallest most
 * probable set holding top_p of their mass (Hugging Face's order) — by the uniform
 * draw u in [0, 1). pairs[V] and prob[V] are scratch. Returns the id. */
int32_t dfl__gen_choose(const dfl_generate_params *gp, const float *logits, int64_t V, double u, dfl__gen_pair *pairs,
                        double *prob);

#endif
