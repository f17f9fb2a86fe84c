/* kv_cache_harness.c — the KV cache against full forward passes (tests/test_kv_cache.py).
 *
 *   kv_cache_harness MODEL_DIR PROMPT_LEN STEPS SEED
 *
 * Random prompt tokens (from SEED), appended to a KV cache at once; then STEPS greedy
 * steps, one token each, and a last append of 3 tokens at once. After every append the
 * new rows' logits and attention rows (every layer, head and map, over all keys) are
 * compared with a full dfl_forward over the whole sequence so far. Prints one JSON line:
 * the largest relative logit error (max |Δ| / max |logit| of the row), the largest map
 * error, the rows compared and the greedy tokens. Exit 0, or 1 on any error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"

/* What one pass captured for rows [row0, row0 + n): logits [n, V] and every map row
 * [L, heads, nstore, n, keys]. */
typedef struct rows_cap {
    int64_t row0, n, keys, V, L, heads, nstore;
    float *logits, *maps;
} rows_cap;

static int want(void *u, int64_t l)
{
    (void)u;
    (void)l;
    return 1;
}

static dfl_status on_attn(void *u, const dfl_attn_block *b, dfl_error *err)
{
    (void)err;
    rows_cap *c = u;
    const float *src[3] = {b->map1, b->map2, b->diff};
    for (int64_t i = 0; i < b->n; i++) {
        int64_t r = b->row0 + i - c->row0;
        if (r < 0 || r >= c->n) continue;
        for (int64_t t = 0; t < c->nstore; t++) {
            float *dst = c->maps + ((((size_t)b->layer * c->heads + b->head) * c->nstore + t) * c->n + r) * c->keys;
            for (int64_t j = 0; j < c->keys; j++)
                dst[j] = j < b->ncols ? src[t][i * b->ld + j] : 0.0f;
        }
    }
    return DFL_OK;
}

static dfl_status on_logits(void *u, int64_t row0, int64_t n, int64_t V, const float *lg, dfl_error *err)
{
    (void)err;
    rows_cap *c = u;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = row0 + i - c->row0;
        if (r >= 0 && r < c->n) memcpy(c->logits + r * V, lg + i * V, (size_t)V * sizeof(float));
    }
    return DFL_OK;
}

static void cap_init(rows_cap *c, const dfl_model *m, int64_t row0, int64_t n, int64_t keys)
{
    const dfl_config *cf = &m->config;
    c->row0 = row0;
    c->n = n;
    c->keys = keys;
    c->V = cf->vocab_size;
    c->L = cf->num_layers;
    c->heads = dfl_config_analysis_heads(cf);
    c->nstore = dfl_config_maps_per_head(cf) == 2 ? 3 : 1;
    c->logits = calloc((size_t)(n * c->V), sizeof(float));
    c->maps = calloc((size_t)(c->L * c->heads * c->nstore * n * keys), sizeof(float));
}

static dfl_capture capture_of(rows_cap *c)
{
    dfl_capture cap;
    memset(&cap, 0, sizeof cap);
    cap.user = c;
    cap.want_maps = want;
    cap.attn_rows = on_attn;
    cap.logits_rows = on_logits;
    return cap;
}

/* Compare the cached pass's rows with the full pass's; update the largest errors. */
static void compare(const rows_cap *a, const rows_cap *b, double *e_logits, double *e_maps)
{
    for (int64_t r = 0; r < a->n; r++) {
        double mx = 0, d = 0;
        for (int64_t v = 0; v < a->V; v++) {
            mx = fmax(mx, fabs(b->logits[r * a->V + v]));
            d = fmax(d, fabs(a->logits[r * a->V + v] - b->logits[r * a->V + v]));
        }
        double rel = d / (mx > 0 ? mx : 1);
        if (!(rel <= *e_logits)) *e_logits = rel; /* NaN propagates */
    }
    size_t n = (size_t)(a->L * a->heads * a->nstore * a->n * a->keys);
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a->maps[i] - (double)b->maps[i]);
        if (!(d <= *e_maps)) *e_maps = d;
    }
}

static uint64_t rng_state;
static int32_t rnd(int64_t V)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((rng_state >> 33) % (uint64_t)V);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: kv_cache_harness MODEL_DIR PROMPT_LEN STEPS SEED\n");
        return 1;
    }
    int64_t T0 = strtol(argv[2], NULL, 10), steps = strtol(argv[3], NULL, 10);
    rng_state = strtoull(argv[4], NULL, 10);
    dfl_error err = {0};
    dfl_model *m = NULL;
    dfl_kv_cache *kv = NULL;
    if (dfl_model_load(argv[1], &m, &err) || dfl_kv_cache_create(m, T0 + steps + 3, &kv, &err)) {
        fprintf(stderr, "kv_cache_harness: %s\n", err.msg);
        return 1;
    }
    const int64_t V = m->config.vocab_size, total = T0 + steps + 3;
    int32_t *tok = calloc((size_t)total, sizeof *tok);
    for (int64_t t = 0; t < T0; t++)
        tok[t] = rnd(V);
    double e_logits = 0, e_maps = 0;
    int64_t len = 0, compared = 0;
    printf("{\"generated\": [");
    for (int64_t k = 0; k <= steps + 1; k++) {
        /* append 0: the prompt; 1..steps: one greedy token; steps + 1: three random ones */
        int64_t n = k == 0 ? T0 : k <= steps ? 1 : 3;
        if (k == steps + 1)
            for (int64_t i = 0; i < 3; i++)
                tok[len + i] = rnd(V);
        rows_cap a, b;
        cap_init(&a, m, len, n, len + n);
        cap_init(&b, m, len, n, len + n);
        dfl_capture ca = capture_of(&a), cb = capture_of(&b);
        if (dfl_kv_cache_append(kv, tok + len, n, NULL, &ca, &err) || dfl_forward(m, tok, len + n, NULL, &cb, &err)) {
            fprintf(stderr, "kv_cache_harness: %s\n", err.msg);
            return 1;
        }
        compare(&a, &b, &e_logits, &e_maps);
        compared += n;
        len += n;
        if (k < steps) { /* greedy from the cached pass's last row */
            const float *lg = a.logits + (n - 1) * V;
            int32_t best = 0;
            for (int64_t v = 1; v < V; v++)
                if (lg[v] > lg[best]) best = (int32_t)v;
            tok[len] = best;
            printf("%s%d", k ? ", " : "", best);
        }
        free(a.logits);
        free(a.maps);
        free(b.logits);
        free(b.maps);
    }
    /* the error paths: past the capacity, a bad truncation, quantization by tensor */
    int errors_ok = dfl_kv_cache_append(kv, tok, 1, NULL, NULL, &err) == DFL_ERR_RANGE &&
                    dfl_kv_cache_truncate(kv, len + 1, &err) == DFL_ERR_RANGE &&
                    dfl_kv_cache_truncate(kv, T0, &err) == DFL_OK && dfl_kv_cache_length(kv) == T0;
    dfl_forward_opts q = dfl_forward_opts_default();
    q.quant_bits = 8;
    errors_ok = errors_ok && dfl_kv_cache_append(kv, tok + T0, 1, &q, NULL, &err) == DFL_ERR_USAGE &&
                dfl_kv_cache_length(kv) == T0;
    dfl_kv_cache *none = NULL;
    errors_ok = errors_ok && dfl_kv_cache_create(m, 0, &none, &err) == DFL_ERR_RANGE && !none;
    dfl_kv_cache_destroy(NULL);
    printf("], \"errors_ok\": %s, \"length\": %lld, \"cached\": %lld, \"rows\": %lld, \"logits_rel\": %.3g, \"maps\": "
           "%.3g, "
           "\"bytes_per_token\": %zu}\n",
           errors_ok ? "true" : "false", (long long)len, (long long)len, (long long)compared, e_logits, e_maps,
           dfl_kv_cache_bytes_per_token(&m->config));
    dfl_kv_cache_destroy(kv);
    dfl_model_free(m);
    free(tok);
    return 0;
}
