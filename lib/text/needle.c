/* needle.c — the needle-task generator (see needle.h). */
#include "text/needle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

/* ------------------------------------------------------------- parameters */

dfl_needle_params dfl_needle_params_default(void)
{
    dfl_needle_params p = {128, 256, 4, 1, 4, -1.0};
    return p;
}

int64_t dfl_needle_context_len(const dfl_needle_params *p)
{
    return p->seq_len - 1 - (int64_t)p->queries * (p->digits + 3);
}

dfl_status dfl_needle_check(const dfl_needle_params *p, dfl_error *err)
{
    if (p->vocab_size < DFL_NEEDLE_MIN_VOCAB || p->vocab_size > (1 << 24))
        return dfl__fail(err, DFL_ERR_USAGE, "needle task: vocab size %lld is not in [%d, %d]",
                         (long long)p->vocab_size, DFL_NEEDLE_MIN_VOCAB, 1 << 24);
    if (p->needles < 1 || p->needles > DFL_NEEDLE_MAX)
        return dfl__fail(err, DFL_ERR_USAGE, "needle task: needles %d is not in [1, %d]", p->needles, DFL_NEEDLE_MAX);
    if (p->queries < 1 || p->queries > DFL_NEEDLE_MAX)
        return dfl__fail(err, DFL_ERR_USAGE, "needle task: queries %d is not in [1, %d]", p->queries, DFL_NEEDLE_MAX);
    if (p->digits < 1 || p->digits > 16)
        return dfl__fail(err, DFL_ERR_USAGE, "needle task: digits %d is not in [1, 16]", p->digits);
    if (!(p->depth <= 1.0)) /* also NaN */
        return dfl__fail(err, DFL_ERR_USAGE, "needle task: depth %g is not in [0, 1] (or < 0 for random)", p->depth);
    int64_t nl = p->digits + 2;
    int64_t need = 1 + (int64_t)p->queries * (p->digits + 3) + 2 * (int64_t)p->needles * nl;
    if (p->seq_len < need || p->seq_len > (1 << 24))
        return dfl__fail(err, DFL_ERR_USAGE,
                         "needle task: sequence length %lld is too short for %d needles of %d digits and %d "
                         "queries (at least %lld tokens)",
                         (long long)p->seq_len, p->needles, p->digits, p->queries, (long long)need);
    return DFL_OK;
}

/* -------------------------------------------------------------- sampling */

/* First start in [0, C − nl] at or after `from` (wrapping) where a needle of nl
 * tokens overlaps none of used[n] starts; −1 if there is none. */
static int64_t free_slot(const int32_t *used, int n, int64_t nl, int64_t C, int64_t from)
{
    int64_t span = C - nl + 1;
    for (int64_t k = 0; k < span; k++) {
        int64_t s = (from + k) % span, ok = 1;
        for (int i = 0; i < n && ok; i++)
            if (s < used[i] + nl && used[i] < s + nl) ok = 0;
        if (ok) return s;
    }
    return -1;
}

void dfl_needle_sample(const dfl_needle_params *p, uint64_t seed, uint64_t stream, uint64_t index, int32_t *tokens,
                       dfl_needle_layout *lay_out)
{
    dfl_rng r = dfl_rng_make(seed, stream, index);
    dfl_needle_layout lay;
    memset(&lay, 0, sizeof lay);
    const int64_t C = dfl_needle_context_len(p), m = p->digits, nl = m + 2;
    const int N = p->needles, R = p->queries;
    uint64_t nfill = (uint64_t)(p->vocab_size - DFL_TOK_FILLER0);

    /* context [1, 1 + C): filler first, needles written over it */
    tokens[0] = DFL_TOK_BOS;
    for (int64_t i = 1; i <= C; i++)
        tokens[i] = DFL_TOK_FILLER0 + (int32_t)dfl_rng_below(&r, nfill);

    /* distinct keys: a partial Fisher–Yates shuffle of the 64 */
    int32_t keys[DFL_NEEDLE_KEYS];
    for (int i = 0; i < DFL_NEEDLE_KEYS; i++)
        keys[i] = i;
    for (int i = 0; i < N; i++) {
        int j = i + (int)dfl_rng_below(&r, (uint64_t)(DFL_NEEDLE_KEYS - i));
        int32_t t = keys[i];
        keys[i] = keys[j];
        keys[j] = t;
        lay.needle_key[i] = keys[i];
    }

    /* needle 0 is the answer at the requested depth; the rest go where they fit
     * (dfl_needle_check guarantees a gap: C >= 2·N·nl) */
    lay.depth = p->depth >= 0 ? p->depth : dfl_rng_uniform(&r);
    int32_t start[DFL_NEEDLE_MAX]; /* context offsets */
    start[0] = (int32_t)floor(lay.depth * (double)(C - nl));
    for (int i = 1; i < N; i++)
        start[i] = (int32_t)free_slot(start, i, nl, C, (int64_t)dfl_rng_below(&r, (uint64_t)(C - nl + 1)));
    /* list the needles by position (needle_pos ascending); keys are already random */
    int order[DFL_NEEDLE_MAX];
    for (int i = 0; i < N; i++)
        order[i] = i;
    for (int i = 1; i < N; i++) /* insertion sort by start */
        for (int j = i; j > 0 && start[order[j - 1]] > start[order[j]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int32_t key_sorted[DFL_NEEDLE_MAX];
    for (int i = 0; i < N; i++) {
        lay.needle_pos[i] = 1 + start[order[i]];
        key_sorted[i] = lay.needle_key[order[i]];
        if (order[i] == 0) lay.answer = i;
    }
    memcpy(lay.needle_key, key_sorted, (size_t)N * sizeof key_sorted[0]);

    int32_t digits[DFL_NEEDLE_MAX][16];
    for (int i = 0; i < N; i++) {
        int32_t *t = tokens + lay.needle_pos[i];
        t[0] = DFL_TOK_NEEDLE;
        t[1] = DFL_TOK_KEY0 + lay.needle_key[i];
        for (int64_t d = 0; d < m; d++) {
            digits[i][d] = (int32_t)dfl_rng_below(&r, 10);
            t[2 + d] = DFL_TOK_DIGIT0 + digits[i][d];
        }
    }

    /* queries: earlier ones ask for other needles (a shuffled pool, refilled when
     * exhausted), the last one for the answer */
    int pool[DFL_NEEDLE_MAX], npool = 0;
    for (int q = 0; q < R - 1; q++) {
        if (npool == 0) {
            for (int i = 0; i < N; i++)
                if (i != lay.answer || N == 1) pool[npool++] = i;
        }
        int j = (int)dfl_rng_below(&r, (uint64_t)npool);
        lay.query_needle[q] = pool[j];
        pool[j] = pool[--npool];
    }
    lay.query_needle[R - 1] = lay.answer;
    for (int q = 0; q < R; q++) {
        int64_t pos = 1 + C + (int64_t)q * (m + 3);
        int i = lay.query_needle[q];
        lay.query_pos[q] = (int32_t)pos;
        tokens[pos] = DFL_TOK_QUERY;
        tokens[pos + 1] = DFL_TOK_KEY0 + lay.needle_key[i];
        tokens[pos + 2] = DFL_TOK_SEP;
        for (int64_t d = 0; d < m; d++)
            tokens[pos + 3 + d] = DFL_TOK_DIGIT0 + digits[i][d];
    }
    if (lay_out) *lay_out = lay;
}

void dfl_needle_targets(const dfl_needle_params *p, const int32_t *tokens, const dfl_needle_layout *lay, int all_tokens,
                        int last_only, int32_t *targets)
{
    const int64_t T = p->seq_len;
    for (int64_t i = 0; i < T; i++)
        targets[i] = all_tokens && i + 1 < T ? tokens[i + 1] : -1;
    if (all_tokens) return;
    for (int q = last_only ? p->queries - 1 : 0; q < p->queries; q++)
        for (int d = 0; d < p->digits; d++) {
            int64_t pos = lay->query_pos[q] + 3 + d; /* a target digit, predicted from pos − 1 */
            targets[pos - 1] = tokens[pos];
        }
}

/* ---------------------------------------------------------------- prompts */

const char *dfl_needle_token_text(int32_t tok, char *buf, size_t cap)
{
    static const char *const special[] = {"<bos>", "<needle>", "<query>", "<sep>", "<eos>"};
    if (tok >= 0 && tok < DFL_TOK_DIGIT0)
        snprintf(buf, cap, "%s", special[tok]);
    else if (tok >= DFL_TOK_DIGIT0 && tok < DFL_TOK_KEY0)
        snprintf(buf, cap, "%d", (int)(tok - DFL_TOK_DIGIT0));
    else if (tok >= DFL_TOK_KEY0 && tok < DFL_TOK_FILLER0)
        snprintf(buf, cap, "K%02d", (int)(tok - DFL_TOK_KEY0));
    else
        snprintf(buf, cap, "w%d", (int)tok);
    return buf;
}

static dfl_span *spans_alloc(size_t n)
{
    return dfl__alloc_array(n ? n : 1, sizeof(dfl_span));
}

dfl_status dfl_needle_prompt(const dfl_needle_params *p, uint64_t seed, uint64_t stream, uint64_t index,
                             dfl_prompt *out, dfl_error *err)
{
    memset(out, 0, sizeof *out);
    dfl_status s = dfl_needle_check(p, err);
    if (s) return s;
    const size_t T = (size_t)p->seq_len, N = (size_t)p->needles, R = (size_t)p->queries;
    const int32_t m = p->digits;
    dfl_needle_layout lay;
    out->tokens = dfl__alloc_array(T, sizeof(int32_t));
    out->text = dfl__calloc_array(T, sizeof(char *));
    out->id = malloc(64);
    out->spans[DFL_SPAN_ANSWER] = spans_alloc(1);
    out->spans[DFL_SPAN_DISTRACTOR] = spans_alloc(N - 1);
    out->spans[DFL_SPAN_QUERY] = spans_alloc(R);
    out->spans[DFL_SPAN_TARGET] = spans_alloc(R);
    int ok = out->tokens && out->text && out->id;
    for (int k = 0; k < DFL_SPAN_KINDS; k++)
        ok = ok && out->spans[k];
    if (ok) {
        out->n_tokens = T;
        dfl_needle_sample(p, seed, stream, index, out->tokens, &lay);
        for (size_t i = 0; i < T && ok; i++) {
            char buf[32];
            out->text[i] = strdup(dfl_needle_token_text(out->tokens[i], buf, sizeof buf));
            ok = out->text[i] != NULL;
        }
    }
    if (!ok) {
        dfl_prompt_free(out);
        return dfl__fail(err, DFL_ERR_NOMEM, "needle task: out of memory for a prompt of %zu tokens", T);
    }
    snprintf(out->id, 64, "needle-%llu-%llu", (unsigned long long)stream, (unsigned long long)index);
    out->bos = 1;
    out->has_depth = 1;
    out->depth = lay.depth;
    size_t nd = 0;
    for (size_t i = 0; i < N; i++) {
        dfl_span sp = {lay.needle_pos[i], lay.needle_pos[i] + m + 2};
        if ((int)i == lay.answer)
            out->spans[DFL_SPAN_ANSWER][0] = sp;
        else
            out->spans[DFL_SPAN_DISTRACTOR][nd++] = sp;
    }
    out->n_spans[DFL_SPAN_ANSWER] = 1;
    out->n_spans[DFL_SPAN_DISTRACTOR] = nd;
    if (nd == 0) { /* a single needle has no distractors: no key rather than an empty list */
        free(out->spans[DFL_SPAN_DISTRACTOR]);
        out->spans[DFL_SPAN_DISTRACTOR] = NULL;
    }
    for (size_t q = 0; q < R; q++) {
        dfl_span qs = {lay.query_pos[q], lay.query_pos[q] + 3};
        dfl_span ts = {lay.query_pos[q] + 3, lay.query_pos[q] + 3 + m};
        out->spans[DFL_SPAN_QUERY][q] = qs;
        out->spans[DFL_SPAN_TARGET][q] = ts;
    }
    out->n_spans[DFL_SPAN_QUERY] = R;
    out->n_spans[DFL_SPAN_TARGET] = R;
    return DFL_OK;
}
