/* stats.h — streaming statistics for the probe: top-K with positions, a log-spaced
 * histogram of magnitudes, float64 moments, attention segment shares, entropy, and
 * symmetric absmax fake quantization. Every accumulator is a plain struct that can be
 * filled per thread and merged; nothing here allocates inside its add functions.
 *
 * Histogram bins (DFL_HIST_*): bin 0 holds x < 2^MIN_EXP (zeros included); bins
 * 1..B-2 split every octave [2^e, 2^(e+1)), MIN_EXP <= e < MAX_EXP, into SUB equal
 * parts, so bin 1 + (e − MIN_EXP)·SUB + k covers [2^e·(1 + k/SUB), 2^e·(1 + (k+1)/SUB));
 * bin B-1 holds x >= 2^MAX_EXP (and NaN). A bin is at most 1/SUB = 1.6% wide relative
 * to its lower edge, so the bin midpoint is within 0.8% of any value in it.
 */
#ifndef DFL_STATS_H
#define DFL_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- top-K */

#define DFL_TOPK_MAX 4096
#define DFL_TOPK_IDX 4

typedef struct dfl_topk_item {
    float value;
    int32_t idx[DFL_TOPK_IDX]; /* caller-defined position (e.g. head, map, query, key) */
} dfl_topk_item;

/* A min-heap of the k largest values seen. items has room for k (caller-owned). */
typedef struct dfl_topk {
    dfl_topk_item *items;
    int32_t k, n;
} dfl_topk;

/* Bind a heap to storage for k items (k >= 1) and empty it. */
void dfl_topk_init(dfl_topk *t, dfl_topk_item *storage, int32_t k);
/* Offer one value; kept if among the k largest so far. NaN is ignored. */
static inline int dfl_topk_wants(const dfl_topk *t, float v)
{
    return t->n < t->k || v > t->items[0].value;
}
void dfl_topk_push(dfl_topk *t, float v, const int32_t *idx);
/* Offer every item of src. */
void dfl_topk_merge(dfl_topk *t, const dfl_topk *src);
/* Copy the kept items into out[n] sorted descending (ties: smaller idx first);
 * returns n. The heap is unchanged. */
int32_t dfl_topk_sorted(const dfl_topk *t, dfl_topk_item *out);

/* ------------------------------------------------------------ histogram */

#define DFL_HIST_MIN_EXP (-24)
#define DFL_HIST_MAX_EXP 24
#define DFL_HIST_SUB     64
#define DFL_HIST_BINS    ((DFL_HIST_MAX_EXP - DFL_HIST_MIN_EXP) * DFL_HIST_SUB + 2)

typedef struct dfl_hist {
    uint64_t count[DFL_HIST_BINS];
} dfl_hist;

/* Bin of abs(x) (x may be negative). Branch-free on the float's bits, so that loops
 * around it vectorize: for a normal float, bits >> 17 is 64·(biased exponent) + the top
 * 6 mantissa bits, which numbers the regular bins once offset. */
static inline int dfl_hist_bin(float x)
{
    union {
        float f;
        uint32_t u;
    } v = {x};
    uint32_t bits = v.u & 0x7fffffffu; /* abs(x) */
    int32_t b = (int32_t)(bits >> (23 - 6)) - ((127 + DFL_HIST_MIN_EXP) * DFL_HIST_SUB - 1);
    b = bits < ((uint32_t)(127 + DFL_HIST_MIN_EXP) << 23) ? 0 : b;                  /* < 2^MIN_EXP */
    b = bits >= ((uint32_t)(127 + DFL_HIST_MAX_EXP) << 23) ? DFL_HIST_BINS - 1 : b; /* >= 2^MAX_EXP, inf, NaN */
    return b;
}
static inline void dfl_hist_add(dfl_hist *h, float x)
{
    h->count[dfl_hist_bin(x)]++;
}
void dfl_hist_merge(dfl_hist *h, const dfl_hist *src);
/* The lower edge of bin b (0 <= b <= B; b = B gives the last bin's upper edge, +inf):
 * 0 for b = 0, 2^e·(1 + k/SUB) for the regular bins, 2^MAX_EXP for b = B-1. */
double dfl_hist_edge(int b);
/* All edges: edges[B+1] = dfl_hist_edge(0..B). */
void dfl_hist_edges(double *edges);
/* Estimate the q-quantile (0..1) of the counted magnitudes as the midpoint of the
 * bin holding it (0 for the underflow bin); NaN when empty. Same rule as
 * docs/format.md gives for readers of the dump. */
double dfl_hist_quantile(const uint64_t *count, double q);

/* -------------------------------------------------------------- moments */

/* count, Σx, Σx², Σx³, Σx⁴ (of x as given), max abs(x) — in double. */
typedef struct dfl_moments {
    double m[6];
} dfl_moments;

static inline void dfl_moments_add(dfl_moments *s, double x)
{
    double x2 = x * x;
    s->m[0] += 1.0;
    s->m[1] += x;
    s->m[2] += x2;
    s->m[3] += x2 * x;
    s->m[4] += x2 * x2;
    double a = x < 0 ? -x : x;
    if (a > s->m[5]) s->m[5] = a;
}
void dfl_moments_merge(dfl_moments *s, const dfl_moments *src);

/* ------------------------------------------------------- segment shares */

/* Share segments of keys (docs/format.md "Dump", noise/shares). */
enum {
    DFL_SHARE_BOS = 0,
    DFL_SHARE_CONTEXT_BEFORE,
    DFL_SHARE_ANSWER,
    DFL_SHARE_CONTEXT_AFTER,
    DFL_SHARE_QUERY,
    DFL_SHARE_DISTRACTOR,
    DFL_SHARE_TARGET,
    DFL_SHARE_SEGMENTS
};

/* Names, in the order above: "bos", "context_before", ... */
const char *dfl_share_name(int s);

/* Per-key share segment from the per-token segment codes (u8 DFL_SEG_*): context
 * tokens before the first answer token are context_before, after the last one
 * context_after (all context is context_before when there is no answer). */
void dfl_share_segments(const uint8_t *seg, int64_t T, uint8_t *share_seg);

/* For one attention row a[0..ncols): raw[s] += Σ a[j], absm[s] += Σ abs(a[j]) over
 * keys j of share segment s; returns Σ a[j] (the row total). */
double dfl_row_segment_sums(const float *a, const uint8_t *share_seg, int64_t ncols, double *raw, double *absm);

/* Entropy (nats) of a probability row p[0..n). */
double dfl_row_entropy(const float *p, int64_t n);

#endif
