/* kv_cache.h — KV-cached incremental forward passes (generation).
 *
 * A cache holds, for every layer, the keys (after RoPE and q/k norms) and values of
 * the positions processed so far: k [capacity, k_ld] and v [capacity, v_ld] in f32,
 * k_ld and v_ld the widths of the layer's k and v projections. dfl_kv_cache_append
 * runs the model over new tokens at positions [len, len + n) with the keys and values
 * of [0, len) taken from the cache, then adds theirs: the logits and maps of those
 * rows equal a full dfl_forward over all len + n tokens (within float rounding).
 *
 * Sliding-window layers keep every key too (the window is applied by the mask), so
 * maps of generated rows span all previous keys. Phi-3 longrope picks its short or
 * long factors by the length reached in each append, as Hugging Face's cache does:
 * keys cached before the length crosses original_max_position_embeddings keep their
 * short-factor rotation.
 */
#ifndef DFL_KV_CACHE_H
#define DFL_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "model/forward.h"
#include "model/model.h"

typedef struct dfl_kv_cache dfl_kv_cache;

/* Bytes the cache holds per token of model config c: 4·L·(k_ld + v_ld). */
size_t dfl_kv_cache_bytes_per_token(const dfl_config *c);

/* A cache for up to capacity positions of model m (which must outlive it), empty.
 * *out is the caller's, freed with dfl_kv_cache_destroy. DFL_ERR_RANGE for capacity
 * < 1, DFL_ERR_NOMEM. */
dfl_status dfl_kv_cache_create(const dfl_model *m, int64_t capacity, dfl_kv_cache **out, dfl_error *err);

/* Frees the cache; NULL is allowed. */
void dfl_kv_cache_destroy(dfl_kv_cache *kv);

/* Positions cached so far, and the capacity given at creation. */
int64_t dfl_kv_cache_length(const dfl_kv_cache *kv);
int64_t dfl_kv_cache_capacity(const dfl_kv_cache *kv);

/* Forget positions from len on (0 <= len <= length): the next append starts there.
 * DFL_ERR_RANGE otherwise. */
dfl_status dfl_kv_cache_truncate(dfl_kv_cache *kv, int64_t len, dfl_error *err);

/* Run tokens[n] at positions [length, length + n) and cache their keys and values.
 * Callbacks as dfl_forward's, with positions absolute: attention blocks (rows, keys
 * [0, length + n)), score blocks and logits_rows' row0 count from position 0; hidden
 * and lambda_rows get the n new rows only (their T is n). The cache grows only when
 * the pass succeeds. DFL_ERR_RANGE past the capacity or for a token id outside the
 * vocabulary, DFL_ERR_USAGE for logit quantization by tensor or head after the first
 * append (it needs every row at once), and dfl_forward's other errors. */
dfl_status dfl_kv_cache_append(dfl_kv_cache *kv, const int32_t *tokens, int64_t n, const dfl_forward_opts *opts,
                               const dfl_capture *cap, dfl_error *err);

/* Internal (forward.c): the pass over tokens[T] at positions [t0, t0 + T), keys and
 * values of every layer l written to kc[l], vc[l] at rows [t0, t0 + T) and read from
 * rows [0, t0 + T); kc = vc = NULL (and t0 = 0) is dfl_forward. */
dfl_status dfl__forward_rows(const dfl_model *m, const int32_t *tokens, int64_t T, int64_t t0, float *const *kc,
                             float *const *vc, const dfl_forward_opts *opts, const dfl_capture *cap, dfl_error *err);

#endif
