/* needle.h — the synthetic multi-needle retrieval task of docs/format.md "Needle task",
 * deterministic from a seed (drawn from base/rng.h).
 *
 * Vocabulary (vocab_size >= 128):
 *   0 <bos>  1 <needle>  2 <query>  3 <sep>  4 <eos>  5..14 digits 0..9
 *   15..78 sixty-four keys ("cities")  79..vocab_size-1 filler words
 * A needle is `<needle> key d1 … dm` (m + 2 tokens). A sample of T tokens is
 *   <bos> | context of C = T − 1 − R·(m + 3) tokens: filler with N needles (distinct
 *   keys) inserted | R queries `<query> key <sep> d1 … dm`
 * The last query asks for the answer needle, which starts at context offset
 * floor(depth·(C − (m + 2))) (absolute position 1 + that); the other needles are
 * placed at random without overlap. Earlier queries ask for other needles (distinct
 * while there are enough, else any needle). Spans (docs/format.md "Prompt file"):
 * answer = the answer needle, distractor = the other needles, query = each
 * `<query> key <sep>`, target = the digits after each <sep> (the last one is what
 * retrieval accuracy scores).
 *
 * Sample i of stream s under seed k is a pure function of (k, s, i): training draws
 * stream 0 sample step·B + b, held-out evaluation stream 1, so no generator state
 * has to be saved for a resume.
 */
#ifndef DFL_NEEDLE_H
#define DFL_NEEDLE_H

#include <stddef.h>
#include <stdint.h>

#include "text/prompts.h"
#include "base/status.h"

/* ------------------------------------------------------------------ task */

enum {
    DFL_TOK_BOS = 0,
    DFL_TOK_NEEDLE = 1,
    DFL_TOK_QUERY = 2,
    DFL_TOK_SEP = 3,
    DFL_TOK_EOS = 4,
    DFL_TOK_DIGIT0 = 5,   /* 5..14 */
    DFL_TOK_KEY0 = 15,    /* 15..78 */
    DFL_TOK_FILLER0 = 79, /* 79..vocab_size-1 */
    DFL_NEEDLE_KEYS = 64,
    DFL_NEEDLE_MIN_VOCAB = 128
};

#define DFL_NEEDLE_MAX 64 /* needles and queries per sample (there are 64 keys) */

typedef struct dfl_needle_params {
    int64_t vocab_size; /* >= 128; default 128 */
    int64_t seq_len;    /* T, tokens per sample; default 256 */
    int needles;        /* N in [1, 64]; default 4 */
    int queries;        /* R in [1, 64]; default 1 */
    int digits;         /* m in [1, 16]; default 4 */
    double depth;       /* answer depth in [0, 1], or < 0: uniform per sample; default -1 */
} dfl_needle_params;

dfl_needle_params dfl_needle_params_default(void);

/* Validate p: ranges above, and a context long enough that N needles always fit
 * (C >= 2·N·(m + 2)). DFL_ERR_USAGE naming the parameter and the minimum T. */
dfl_status dfl_needle_check(const dfl_needle_params *p, dfl_error *err);

/* Context length C and needle length m + 2 for p. */
int64_t dfl_needle_context_len(const dfl_needle_params *p);

/* Where everything is in one sample (positions are absolute token indices). */
typedef struct dfl_needle_layout {
    double depth;                         /* the answer's depth actually used */
    int answer;                           /* index into needle_pos of the answer */
    int32_t needle_pos[DFL_NEEDLE_MAX];   /* start of each <needle>, [needles] */
    int32_t needle_key[DFL_NEEDLE_MAX];   /* key index 0..63 of each needle */
    int32_t query_pos[DFL_NEEDLE_MAX];    /* start of each <query>, [queries] */
    int32_t query_needle[DFL_NEEDLE_MAX]; /* needle each query asks for; the last = answer */
} dfl_needle_layout;

/* Sample `index` of `stream` under `seed` into tokens[seq_len] (caller-owned) and
 * *lay (may be NULL). p must have passed dfl_needle_check. */
void dfl_needle_sample(const dfl_needle_params *p, uint64_t seed, uint64_t stream, uint64_t index, int32_t *tokens,
                       dfl_needle_layout *lay);

/* Mark the positions the model should predict: targets[i] = tokens[i + 1] when
 * token i + 1 is a target digit (all queries, or only the last when last_only), else
 * -1; with all_tokens every next token is a target (targets[T-1] = -1). */
void dfl_needle_targets(const dfl_needle_params *p, const int32_t *tokens, const dfl_needle_layout *lay, int all_tokens,
                        int last_only, int32_t *targets);

/* The sample as a dfl_prompt (tokens, text, spans, bos, depth, id "needle-<stream>-<index>").
 * The caller owns *out (dfl_prompt_free). DFL_ERR_USAGE (bad params), DFL_ERR_NOMEM. */
dfl_status dfl_needle_prompt(const dfl_needle_params *p, uint64_t seed, uint64_t stream, uint64_t index,
                             dfl_prompt *out, dfl_error *err);

/* Text of a token id: "<bos>", "7", "K12", "w80", ... into buf[cap]; returns buf. */
const char *dfl_needle_token_text(int32_t tok, char *buf, size_t cap);

#endif
