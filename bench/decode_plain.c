/* decode_plain.c — part of `make bench` (bench/generate.sh): greedy KV-cached decoding
 * with nothing captured but the logits, the baseline of probe --generate's capture cost.
 *
 *   decode_plain MODEL_DIR PROMPT.jsonl NEW_TOKENS REPEATS
 *
 * Loads the model, runs the first prompt's tokens into a KV cache (the prefill, not
 * timed), then NEW_TOKENS greedy steps of one token each; prints one line
 *   "plain_decode new=<N> best_tok_s=<rate> prefill_s=<s> kv_bytes_per_token=<B>"
 * with the best of REPEATS decoding runs. Exit 1 on an error.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "model/kv_cache.h"
#include "model/model.h"

typedef struct last_row {
    int64_t V;
    float *z;
} last_row;

static dfl_status keep_last(void *user, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err)
{
    (void)err, (void)row0;
    last_row *l = user;
    memcpy(l->z, logits + (n - 1) * V, (size_t)V * sizeof(float));
    return DFL_OK;
}

static int32_t argmax(const float *z, int64_t V)
{
    int32_t b = 0;
    for (int64_t v = 1; v < V; v++)
        if (z[v] > z[b]) b = (int32_t)v;
    return b;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: decode_plain MODEL_DIR PROMPT.jsonl NEW_TOKENS REPEATS\n");
        return 1;
    }
    int64_t N = strtol(argv[3], NULL, 10), R = strtol(argv[4], NULL, 10);
    dfl_error err = {0};
    dfl_model *m = NULL;
    char *text = NULL;
    size_t len = 0;
    if (dfl_model_load(argv[1], &m, &err) || dfl__read_file(argv[2], &text, &len, &err)) {
        fprintf(stderr, "decode_plain: %s\n", err.msg);
        return 1;
    }
    cJSON *root = cJSON_ParseWithLength(text, len); /* the first line */
    const cJSON *toks = root ? cJSON_GetObjectItemCaseSensitive(root, "tokens") : NULL;
    int64_t T = toks ? cJSON_GetArraySize(toks) : 0;
    int32_t *seq = calloc((size_t)(T + N), sizeof *seq);
    last_row lr = {m->config.vocab_size, calloc((size_t)m->config.vocab_size, sizeof(float))};
    if (T < 1 || !seq || !lr.z) {
        fprintf(stderr, "decode_plain: %s: no tokens\n", argv[2]);
        return 1;
    }
    int64_t i = 0;
    for (const cJSON *t = toks->child; t; t = t->next)
        seq[i++] = (int32_t)t->valuedouble;
    dfl_capture cap;
    memset(&cap, 0, sizeof cap);
    cap.user = &lr;
    cap.logits_rows = keep_last;
    double best = 0, prefill = 0;
    for (int64_t r = 0; r < R; r++) {
        dfl_kv_cache *kv = NULL;
        double t0 = dfl_clock_seconds();
        if (dfl_kv_cache_create(m, T + N, &kv, &err) || dfl_kv_cache_append(kv, seq, T, NULL, &cap, &err)) {
            fprintf(stderr, "decode_plain: %s\n", err.msg);
            return 1;
        }
        double t1 = dfl_clock_seconds();
        seq[T] = argmax(lr.z, lr.V);
        for (int64_t k = 0; k + 1 < N; k++) {
            if (dfl_kv_cache_append(kv, &seq[T + k], 1, NULL, &cap, &err)) {
                fprintf(stderr, "decode_plain: %s\n", err.msg);
                return 1;
            }
            seq[T + k + 1] = argmax(lr.z, lr.V);
        }
        double rate = (double)N / (dfl_clock_seconds() - t1); /* as probe counts: N tokens, N - 1 steps */
        if (rate > best) best = rate, prefill = t1 - t0;
        dfl_kv_cache_destroy(kv);
    }
    printf("plain_decode new=%lld best_tok_s=%.3f prefill_s=%.3f kv_bytes_per_token=%zu first_ids=", (long long)N, best,
           prefill, dfl_kv_cache_bytes_per_token(&m->config));
    for (int64_t k = 0; k < N && k < 8; k++)
        printf("%s%d", k ? "," : "", seq[T + k]);
    printf("\n");
    cJSON_Delete(root);
    free(text);
    free(seq);
    free(lr.z);
    dfl_model_free(m);
    return 0;
}
