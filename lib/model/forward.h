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

#include "model/model.h"
#include "base/status.h"

/* One block of attention rows of one analysis head: rows [row0, row0 + n) of the
 * T×T map, each row given over keys [0, ncols) with stride ld (keys ≥ ncols are
 * masked, hence 0; so are keys before a sliding window, dfl_config_window). map1 is the softmax map (map 1 of a Diff
 * head); map2 and diff
 * (= map1 − λ·map2, λ per row for DIFF V2) are NULL for llama. */
typedef struct dfl_attn_block {
    int64_t layer, head;
    int64_t row0, n, ncols, ld, T;
    const float *map1, *map2, *diff;
} dfl_attn_block;

/* Raw attention logits of one map of one analysis head: q·k/√d after RoPE and
 * scaling (the config's scale where it has one), before soft-capping (Gemma 2),
 * quantization and the mask. Row i (query q = row0 + i) is meaningful
 * over keys [0, q], or [q − window + 1, q] under a sliding window (window > 0); stride
 * ld. map is 0 or 1 (map 2 of a Diff head). */
typedef struct dfl_score_block {
    int64_t layer, head, map;
    int64_t row0, n, ld;
    const float *scores;
    int64_t window;
} dfl_score_block;

typedef struct dfl_capture {
    void *user;
    /* Non-zero when the maps of this layer are wanted (attn_rows is then called for
     * every head and row block of the layer). NULL = never. */
    int (*want_maps)(void *user, int64_t layer);
    dfl_status (*attn_rows)(void *user, const dfl_attn_block *b, dfl_error *err);
    /* Raw logits, called from worker threads concurrently: `thread` is in
     * [0, dfl_forward_max_threads()); the callback may only touch that thread's
     * state and must not allocate, print or do I/O. NULL = not wanted. */
    void (*scores_rows)(void *user, int thread, const dfl_score_block *b);
    /* Work of the capture's that the attention's threads take on in their own parallel
     * region, after each block's tasks, so that it needs no region (and no barrier) of
     * its own (probe: deflating the map tiles attn_rows queued). Before each block's
     * region attn_jobs gives n; attn_job(user, thread, k) then runs once for each k in
     * [0, n), concurrently from worker threads (`thread` as for scores_rows); it may not
     * allocate, print or do I/O. Work left undone is the capture's to finish. NULL = none. */
    int64_t (*attn_jobs)(void *user);
    void (*attn_job)(void *user, int thread, int64_t k);
    /* Before layer l starts (progress reports). */
    void (*layer_begin)(void *user, int64_t layer);
    /* Each layer's output x[T, D] after both residual additions. */
    dfl_status (*hidden)(void *user, int64_t layer, const float *x, int64_t T, int64_t D, dfl_error *err);
    /* DIFF V2, before layer l's attention: lam[T, H] = σ(λ) of every token and head, the
     * factor on map 2 (dfl_attn_block's diff = map1 − lam[row, head]·map2). NULL = not
     * wanted; never called for the other types (their λ is one per layer). */
    dfl_status (*lambda_rows)(void *user, int64_t layer, const float *lam, int64_t T, int64_t H, dfl_error *err);
    /* The residual stream before layer 0: x[T, D] = the token embeddings (scaled: Gemma)
     * plus learned positions (GPT-2). NULL = not wanted. */
    dfl_status (*embed)(void *user, const float *x, int64_t T, int64_t D, dfl_error *err);
    /* Layer l's attention output before the output projection: att[T, width], each
     * analysis head in its columns (family.h dfl__head_plan out_col, out_width; a Diff
     * head after its sub-layer norm and (1 − λ_init)). NULL = not wanted. */
    dfl_status (*attn_out)(void *user, int64_t layer, const float *att, int64_t T, int64_t width, dfl_error *err);
    /* What layer l's MLP adds to the residual stream: y[T, D], with its output bias
     * (GPT-2, GPT-NeoX) and after its post-norm (Gemma, OLMo 2). NULL = not wanted. */
    dfl_status (*mlp_out)(void *user, int64_t layer, const float *y, int64_t T, int64_t D, dfl_error *err);
    /* Logits of rows [row0, row0 + n): [n, V], V = vocab_size. */
    dfl_status (*logits_rows)(void *user, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err);
    /* The inputs of layer l's linear layers (pre-norm llama-layout blocks: llama and the Diff
     * types): rows [row0, row0 + n) of x, each `width` values at stride ld, at one of the
     * dfl_capture_site sites. NULL = not wanted. */
    dfl_status (*linear_rows)(void *user, int64_t layer, int site, int64_t row0, int64_t n, int64_t width,
                              const float *x, int64_t ld, dfl_error *err);
    /* Layer l's q [T, nq heads of hd at stride q_ld] and k [T, nk heads at stride k_ld]
     * after RoPE (same blocks as linear_rows). NULL = not wanted. */
    dfl_status (*qk_rows)(void *user, int64_t layer, int64_t T, const float *q, int64_t nq, int64_t q_ld,
                          const float *k, int64_t nk, int64_t k_ld, int64_t hd, dfl_error *err);
} dfl_capture;

/* Where linear_rows is called: the attention input (q/k/v projections' input, after the
 * norm), the heads' output before o_proj, the MLP input (gate/up's input, after the norm),
 * down_proj's input (the gated product). */
enum { DFL_LINEAR_ATTN_IN = 0, DFL_LINEAR_ATTN_OUT, DFL_LINEAR_MLP_IN, DFL_LINEAR_DOWN_IN, DFL_LINEAR_COUNT };

/* Interventions on the computation (docs/probe.md, probe --quantize-logits). */
typedef enum dfl_quant_granularity { DFL_QUANT_TENSOR = 0, DFL_QUANT_HEAD, DFL_QUANT_ROW } dfl_quant_granularity;

typedef struct dfl_forward_opts {
    /* Symmetric absmax fake quantization of the pre-softmax logits (both maps of a
     * Diff head) with this many bits; 0 = off. The absmax is taken over the causal
     * logits of the whole layer (tensor), of each softmax map (head) or of each query
     * row of each map (row). */
    int quant_bits;
    dfl_quant_granularity quant_granularity;
    /* Hand each layer's weight pages back to the kernel once the layer is done (the
     * mapping stays; the next pass reads them from the file again): 0 = when the layers'
     * weights exceed half the machine's memory, 1 = always, -1 = never. A checkpoint
     * larger than memory then streams through it. */
    int release_layers;
    /* probe --quantize: activations, KV cache and the online rotation (model/quantize.h),
     * the same spec dfl_quant_model applied to the model; NULL = none. */
    const struct dfl_qspec *quant;
    /* Ablation, λ override, map choice, knockout, patching and recording
     * (model/intervene.h); NULL = none. Not owned. */
    const struct dfl_iv_list *iv;
} dfl_forward_opts;

/* Defaults: no intervention. */
dfl_forward_opts dfl_forward_opts_default(void);

/* Upper bound on the thread indices passed to scores_rows. */
int dfl_forward_max_threads(void);

/* Run the model over tokens[T] (T >= 1). opts and cap may be NULL. DFL_ERR_RANGE for
 * a token id outside [0, vocab_size), DFL_ERR_USAGE for quant_bits outside 0 or
 * [2, 16], DFL_ERR_NOMEM, or whatever a callback returns (the pass stops at the
 * first failing callback). */
dfl_status dfl_forward(const dfl_model *m, const int32_t *tokens, int64_t T, const dfl_forward_opts *opts,
                       const dfl_capture *cap, dfl_error *err);

/* Convenience for tests and small runs: all logits into out[T, V] (caller-owned). */
dfl_status dfl_forward_logits(const dfl_model *m, const int32_t *tokens, int64_t T, float *out, dfl_error *err);

/* FLOPs of one forward pass over T tokens, for throughput reports and shard balancing:
 * 2 × the multiply-adds of the projections, the MLP and the LM head, and of attention
 * over the keys each query sees (causal, within the layer's sliding window): per key,
 * each softmax map's q·k and one product with the head's value. */
double dfl_forward_flops(const dfl_config *c, int64_t T);

#endif
