/* probe_lens.h — internal to probe: the readouts of one sample (docs/probe.md "logit
 * lens", "direct logit attribution"; layouts in docs/format.md "lens", "dla").
 *
 * Logit lens (`--logit-lens K`): the residual stream after the embedding and after each
 * layer, decoded through the final norm, the LM head and the final soft-cap (Gemma 2):
 * the top K tokens with their probabilities, the rank and probability of the next token.
 *
 * Direct logit attribution (`--dla`): at the analysis rows, what each head, each MLP, the
 * token embedding and the biases write into the final residual, projected on the
 * unembedding direction of the next token (or of A − B under `--logit-diff A,B`), with
 * the final norm's scale frozen at its clean value; the terms sum to the logit.
 *
 * probe_capture.c forwards the forward pass's embed, attn_out, mlp_out, hidden and
 * logits_rows captures here; probe.c writes the result into the sample's group.
 */
#ifndef DFL_PROBE_LENS_H
#define DFL_PROBE_LENS_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/probe.h"
#include "dump/dump.h"

typedef struct dfl__lens dfl__lens;

/* The readouts p asks for on prompt pr, over the analysis rows arows[n_arows]; *out is
 * NULL when p asks for none. DFL_ERR_USAGE for a top-K beyond the vocabulary or a
 * --logit-diff token outside it, DFL_ERR_NOMEM. Free with dfl__lens_free. */
dfl_status dfl__lens_begin(const dfl_probe_params *p, const dfl_model *m, const dfl_prompt *pr, const int64_t *arows,
                           size_t n_arows, dfl__lens **out, dfl_error *err);
void dfl__lens_free(dfl__lens *ln);

/* The captures (dfl_capture's embed, attn_out, mlp_out, hidden, logits_rows). */
dfl_status dfl__lens_embed(dfl__lens *ln, const float *x, int64_t T, int64_t D, dfl_error *err);
dfl_status dfl__lens_attn_out(dfl__lens *ln, int64_t l, const float *att, int64_t T, int64_t width, dfl_error *err);
dfl_status dfl__lens_mlp_out(dfl__lens *ln, int64_t l, const float *y, int64_t T, int64_t D, dfl_error *err);
dfl_status dfl__lens_hidden(dfl__lens *ln, int64_t l, const float *x, int64_t T, int64_t D, dfl_error *err);
dfl_status dfl__lens_logits(dfl__lens *ln, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err);

/* lens/… and dla/… into the open sample group of d. DFL_ERR_HDF5, DFL_ERR_NOMEM. */
dfl_status dfl__lens_write(const dfl__lens *ln, dfl_dump *d, dfl_error *err);

#endif
