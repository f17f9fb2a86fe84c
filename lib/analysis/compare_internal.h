/* compare_internal.h — shared by compare.c and compare_report.c (and the unit tests):
 * the per-pair accumulators behind dfl_compare_result. Not installed. */
#ifndef DFL_COMPARE_INTERNAL_H
#define DFL_COMPARE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/compare.h"

/* One scored position: what llama.cpp's block needs from it. */
typedef struct dfl__compare_tok {
    double kld;      /* Σ p_base (ln p_base − ln p_other) */
    double nll_q;    /* −ln p_other(next token) */
    double nll_base; /* −ln p_base(next token) */
    double dp;       /* p_other(next) − p_base(next) */
    int same_top;    /* argmax of both logits rows equal (first maximum) */
} dfl__compare_tok;

/* The sums llama.cpp keeps (kl_divergence_result), in double. */
typedef struct dfl__compare_sums {
    double nll, nll2, nll_base, nll_base2, nll_nll_base, kld, kld2, dp, dp2, dp4;
    size_t same_top, count;
} dfl__compare_sums;

/* Per layer: Σ over tokens of cosine, relative L2, Pearson; n tokens. */
typedef struct dfl__compare_layer {
    double cos, rel, pearson;
    size_t n;
} dfl__compare_layer;

/* One attention map (map1, map2, diff): Σ JS and count per [Ls, Hs]; the layer ids. */
typedef struct dfl__compare_maps {
    int64_t Ls, Hs;
    int32_t *layers; /* [Ls] */
    double *js;      /* [Ls, Hs] */
    size_t *n;       /* [Ls, Hs] */
} dfl__compare_maps;

typedef struct dfl__compare_pair {
    char label[128], base[512], other[512];
    size_t samples, logit_samples;
    int64_t vocab;
    dfl__compare_sums sums;
    float *kld_values, *dp_values; /* [n_values], sorted once the block is finished */
    size_t n_values, cap_values;
    int has_kld;
    dfl_compare_kld kld;
    int64_t hidden_layers;      /* 0: no hidden states in the dumps */
    dfl__compare_layer *hidden; /* [hidden_layers] */
    int64_t first_diverged;     /* first layer with 1 − cosine > threshold, or −1 */
    dfl__compare_maps maps[3];
} dfl__compare_pair;

struct dfl_compare_result {
    size_t n_pairs;
    int64_t from;
    int target_only;
    double threshold;
    dfl__compare_pair pairs[DFL_COMPARE_MAX_PAIRS];
};

/* The per-token quantities of one position (xb, xq: [V] logits; tok in [0, V)): the
 * vectorized kernel, and its naive twin (glibc's expf) that tests compare it against. A
 * row holding NaN or ±Inf takes the naive path. */
void dfl__compare_row(const float *xb, const float *xq, int64_t V, int32_t tok, dfl__compare_tok *o);
void dfl__compare_row_naive(const float *xb, const float *xq, int64_t V, int32_t tok, dfl__compare_tok *o);

/* The kernel's exp for x <= 0 (0 below −87), for tests. */
float dfl__compare_exp(float x);

/* Jensen-Shannon divergence (nats) of rows a[n], b[n], each normalised to sum 1 (of |x|
 * with use_abs); NaN when a row sums to 0. */
double dfl__compare_js(const float *a, const float *b, int64_t n, int use_abs);

/* "map1", "map2", "diff" for m = 0, 1, 2. */
const char *dfl__compare_map_name(int m);

#endif
