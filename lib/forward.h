/* forward.h — the instrumented forward pass over one token sequence.
 *
 * The pass computes embedding → L pre-norm blocks → final norm → LM head in f32 and
 * reports what happens inside through named capture sites: callbacks that a probe
 * subscribes to. Attention runs per head in blocks of query rows, so peak memory is
 * O(weights + T·max(D, F) + block·T) whatever L, H and T² are; a map is only ever
 * handed out in row blocks. Callbacks run outside parallel regions, in order.
 */
#ifndef DFL_FORWARD_H
#define DFL_FORWARD_H

#include <stdint.h>

#include "model.h"
#include "status.h"

/* One block of attention rows of one analysis head: rows [row0, row0 + n) of the
 * T×T map, each row given over keys [0, ncols) with stride ld (keys ≥ ncols are
 * masked, hence 0). map1 is the softmax map (map 1 of a Diff head); map2 and diff
 * (= map1 − λ·map2) are NULL for llama. */
typedef struct dfl_attn_block {
    int64_t layer, head;
    int64_t row0, n, ncols, ld, T;
    const float *map1, *map2, *diff;
} dfl_attn_block;

typedef struct dfl_capture {
    void *user;
    /* Non-zero when the maps of this layer are wanted (attn_rows is then called for
     * every head and row block of the layer). NULL = never. */
    int (*want_maps)(void *user, int64_t layer);
    dfl_status (*attn_rows)(void *user, const dfl_attn_block *b, dfl_error *err);
    /* Logits of rows [row0, row0 + n): [n, V], V = vocab_size. */
    dfl_status (*logits_rows)(void *user, int64_t row0, int64_t n, int64_t V,
                              const float *logits, dfl_error *err);
} dfl_capture;

/* Run the model over tokens[T] (T >= 1). cap may be NULL. DFL_ERR_RANGE for a token
 * id outside [0, vocab_size), DFL_ERR_NOMEM, or whatever a callback returns (the
 * pass stops at the first failing callback). */
dfl_status dfl_forward(const dfl_model *m, const int32_t *tokens, int64_t T,
                       const dfl_capture *cap, dfl_error *err);

/* Convenience for tests and small runs: all logits into out[T, V] (caller-owned). */
dfl_status dfl_forward_logits(const dfl_model *m, const int32_t *tokens, int64_t T,
                              float *out, dfl_error *err);

/* FLOPs of one forward pass over T tokens (matrix products and attention, causal),
 * for throughput reports. */
double dfl_forward_flops(const dfl_config *c, int64_t T);

#endif
