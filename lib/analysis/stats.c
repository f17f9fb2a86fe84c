/* stats.c — top-K heaps, log histograms, moments, segment shares, fake quantization. */
#include "analysis/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- top-K */

void dfl_topk_init(dfl_topk *t, dfl_topk_item *storage, int32_t k)
{
    t->items = storage;
    t->k = k;
    t->n = 0;
}

static void sift_down(dfl_topk_item *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l].value < h[m].value) m = l;
        if (r < n && h[r].value < h[m].value) m = r;
        if (m == i) return;
        dfl_topk_item tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
}

void dfl_topk_push(dfl_topk *t, float v, const int32_t *idx)
{
    if (v != v || !dfl_topk_wants(t, v)) return;
    dfl_topk_item it;
    it.value = v;
    memcpy(it.idx, idx, sizeof it.idx);
    if (t->n < t->k) {
        /* sift up */
        int32_t i = t->n++;
        while (i > 0 && t->items[(i - 1) / 2].value > v) {
            t->items[i] = t->items[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        t->items[i] = it;
    } else {
        t->items[0] = it;
        sift_down(t->items, t->n, 0);
    }
}

void dfl_topk_merge(dfl_topk *t, const dfl_topk *src)
{
    for (int32_t i = 0; i < src->n; i++)
        dfl_topk_push(t, src->items[i].value, src->items[i].idx);
}

static int item_desc(const void *a, const void *b)
{
    const dfl_topk_item *x = a, *y = b;
    if (x->value != y->value) return x->value > y->value ? -1 : 1;
    for (int i = 0; i < DFL_TOPK_IDX; i++)
        if (x->idx[i] != y->idx[i]) return x->idx[i] < y->idx[i] ? -1 : 1;
    return 0;
}

int32_t dfl_topk_sorted(const dfl_topk *t, dfl_topk_item *out)
{
    memcpy(out, t->items, (size_t)t->n * sizeof *out);
    qsort(out, (size_t)t->n, sizeof *out, item_desc);
    return t->n;
}

/* ------------------------------------------------------------ histogram */

void dfl_hist_merge(dfl_hist *h, const dfl_hist *src)
{
    for (int i = 0; i < DFL_HIST_BINS; i++)
        h->count[i] += src->count[i];
}

double dfl_hist_edge(int b)
{
    if (b <= 0) return 0.0;
    if (b >= DFL_HIST_BINS) return INFINITY;
    if (b == DFL_HIST_BINS - 1) return ldexp(1.0, DFL_HIST_MAX_EXP);
    int e = (b - 1) / DFL_HIST_SUB + DFL_HIST_MIN_EXP, k = (b - 1) % DFL_HIST_SUB;
    return ldexp(1.0 + (double)k / DFL_HIST_SUB, e);
}

void dfl_hist_edges(double *edges)
{
    for (int b = 0; b <= DFL_HIST_BINS; b++)
        edges[b] = dfl_hist_edge(b);
}

double dfl_hist_quantile(const uint64_t *count, double q)
{
    uint64_t n = 0;
    for (int i = 0; i < DFL_HIST_BINS; i++)
        n += count[i];
    if (n == 0) return NAN;
    /* the element of 0-based rank floor(q·(n−1)) */
    uint64_t rank = (uint64_t)floor(q * (double)(n - 1)), seen = 0;
    int b = 0;
    for (; b < DFL_HIST_BINS; b++) {
        seen += count[b];
        if (seen > rank) break;
    }
    if (b == 0) return 0.0;
    if (b == DFL_HIST_BINS - 1) return ldexp(1.0, DFL_HIST_MAX_EXP);
    int e = (b - 1) / DFL_HIST_SUB + DFL_HIST_MIN_EXP, k = (b - 1) % DFL_HIST_SUB;
    return ldexp(1.0 + (k + 0.5) / DFL_HIST_SUB, e);
}

/* -------------------------------------------------------------- moments */

void dfl_moments_merge(dfl_moments *s, const dfl_moments *src)
{
    for (int i = 0; i < 5; i++)
        s->m[i] += src->m[i];
    if (src->m[5] > s->m[5]) s->m[5] = src->m[5];
}

/* ------------------------------------------------------- segment shares */

const char *dfl_share_name(int s)
{
    static const char *names[DFL_SHARE_SEGMENTS] = {"bos",   "context_before", "answer", "context_after",
                                                    "query", "distractor",     "target"};
    return s >= 0 && s < DFL_SHARE_SEGMENTS ? names[s] : "?";
}

void dfl_share_segments(const uint8_t *seg, int64_t T, uint8_t *share_seg)
{
    /* segment codes of prompts.h: 0 context, 1 bos, 2 answer, 3 query, 4 distractor, 5 target */
    static const uint8_t map[6] = {DFL_SHARE_CONTEXT_BEFORE, DFL_SHARE_BOS,        DFL_SHARE_ANSWER,
                                   DFL_SHARE_QUERY,          DFL_SHARE_DISTRACTOR, DFL_SHARE_TARGET};
    int64_t last_answer = -1;
    for (int64_t t = 0; t < T; t++)
        if (seg[t] == 2) last_answer = t;
    for (int64_t t = 0; t < T; t++) {
        share_seg[t] = seg[t] < 6 ? map[seg[t]] : DFL_SHARE_CONTEXT_BEFORE;
        if (seg[t] == 0 && last_answer >= 0 && t > last_answer) share_seg[t] = DFL_SHARE_CONTEXT_AFTER;
    }
}

double dfl_row_segment_sums(const float *a, const uint8_t *share_seg, int64_t ncols, double *raw, double *absm)
{
    double total = 0.0;
    for (int64_t j = 0; j < ncols; j++) {
        double v = a[j];
        raw[share_seg[j]] += v;
        absm[share_seg[j]] += fabs(v);
        total += v;
    }
    return total;
}

double dfl_row_entropy(const float *p, int64_t n)
{
    double h = 0.0;
    for (int64_t j = 0; j < n; j++)
        if (p[j] > 0.0f) h -= (double)p[j] * log((double)p[j]);
    return h;
}
