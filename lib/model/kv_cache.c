/* kv_cache.c — the per-layer key and value store behind incremental passes; the pass
 * itself is forward.c's (dfl__forward_rows), so cached and full passes share every
 * kernel and block. */
#include "model/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "model/family.h"

struct dfl_kv_cache {
    const dfl_model *m;
    int64_t cap, len;
    int64_t k_ld, v_ld;
    float **k, **v; /* [L] of [cap, k_ld], [cap, v_ld] */
};

size_t dfl_kv_cache_bytes_per_token(const dfl_config *c)
{
    dfl__attn_shape sh = dfl__attn_shape_of(c);
    return (size_t)c->num_layers * (size_t)(sh.k_ld + sh.v_ld) * sizeof(float);
}

void dfl_kv_cache_destroy(dfl_kv_cache *kv)
{
    if (!kv) return;
    for (int64_t l = 0; kv->k && l < kv->m->config.num_layers; l++)
        free(kv->k[l]);
    for (int64_t l = 0; kv->v && l < kv->m->config.num_layers; l++)
        free(kv->v[l]);
    free(kv->k);
    free(kv->v);
    free(kv);
}

dfl_status dfl_kv_cache_create(const dfl_model *m, int64_t capacity, dfl_kv_cache **out, dfl_error *err)
{
    *out = NULL;
    if (capacity < 1) return dfl__fail(err, DFL_ERR_RANGE, "a KV cache needs room for at least one position");
    const int64_t L = m->config.num_layers;
    dfl__attn_shape sh = dfl__attn_shape_of(&m->config);
    dfl_kv_cache *kv = calloc(1, sizeof *kv);
    size_t nk = 0, nv = 0;
    int ok = kv && dfl__mul_ok((size_t)capacity, (size_t)sh.k_ld, &nk) &&
             dfl__mul_ok((size_t)capacity, (size_t)sh.v_ld, &nv);
    if (ok) {
        kv->m = m;
        kv->cap = capacity;
        kv->k_ld = sh.k_ld;
        kv->v_ld = sh.v_ld;
        kv->k = calloc((size_t)L, sizeof *kv->k);
        kv->v = calloc((size_t)L, sizeof *kv->v);
        ok = kv->k && kv->v;
    }
    for (int64_t l = 0; ok && l < L; l++) {
        kv->k[l] = dfl__alloc_array(nk, sizeof(float));
        kv->v[l] = dfl__alloc_array(nv, sizeof(float));
        ok = kv->k[l] && kv->v[l];
    }
    if (!ok) {
        dfl_kv_cache_destroy(kv);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a KV cache of %lld positions", (long long)capacity);
    }
    *out = kv;
    return DFL_OK;
}

int64_t dfl_kv_cache_length(const dfl_kv_cache *kv)
{
    return kv->len;
}

int64_t dfl_kv_cache_capacity(const dfl_kv_cache *kv)
{
    return kv->cap;
}

dfl_status dfl_kv_cache_truncate(dfl_kv_cache *kv, int64_t len, dfl_error *err)
{
    if (len < 0 || len > kv->len)
        return dfl__fail(err, DFL_ERR_RANGE, "cannot truncate a KV cache of %lld positions to %lld", (long long)kv->len,
                         (long long)len);
    kv->len = len;
    return DFL_OK;
}

dfl_status dfl_kv_cache_append(dfl_kv_cache *kv, const int32_t *tokens, int64_t n, const dfl_forward_opts *opts,
                               const dfl_capture *cap, dfl_error *err)
{
    if (n < 1) return dfl__fail(err, DFL_ERR_RANGE, "nothing to append to the KV cache");
    if (n > kv->cap - kv->len)
        return dfl__fail(err, DFL_ERR_RANGE, "the KV cache holds %lld positions: %lld + %lld do not fit",
                         (long long)kv->cap, (long long)kv->len, (long long)n);
    dfl_status s = dfl__forward_rows(kv->m, tokens, n, kv->len, kv->k, kv->v, opts, cap, err);
    if (s == DFL_OK) kv->len += n;
    return s;
}
