/* probe.c — one pass over a prompt set: forward with capture, statistics, dump. */
#include "base/clock.h"
#include "analysis/probe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/atomic.h"
#include "dump/dump.h"
#include "model/forward.h"
#include "model/kernels.h"
#include "model/model.h"
#include "text/prompts.h"
#include "text/tokenizer.h"
#include "analysis/stats.h"

/* Attention maps are stored in tiles of 32 query rows x 512 keys (32 KB as f16). */
#define MAP_TILE_ROWS 32
#define MAP_TILE_KEYS 512

dfl_probe_params dfl_probe_params_default(void)
{
    dfl_probe_params p;
    memset(&p, 0, sizeof p);
    p.map_f16 = 1;
    p.map_gzip = 1;
    p.rows = DFL_ROWS_LAST;
    p.topk = 100;
    p.alpha = 6.0;
    p.forward = dfl_forward_opts_default();
    return p;
}

/* ------------------------------------------------------------ one sample */

/* Accumulators of one layer's attention logits (one per thread) or hidden states. */
typedef struct logit_acc {
    dfl_topk top;
    dfl_hist sub[4];             /* sub-histograms, merged at the layer's end */
    dfl_moments mom;
} logit_acc;

/* Outlier statistics of one kind (logits or hidden) for all layers. */
typedef struct outlier_out {
    float *top;          /* [L, K] descending, NaN-padded */
    int32_t *top_index;  /* [L, K, nidx], -1-padded */
    uint64_t *hist;      /* [L, B] */
    double *mom;         /* [L, 6] */
    int nidx;
} outlier_out;

/* Everything captured for one sample while its forward pass runs. */
typedef struct sample_run {
    const dfl_probe_params *p;
    const dfl_model *m;
    const dfl_prompt *pr;
    int64_t T, L, Hs, D, K;
    int M;                       /* maps in the noise stats: 1 (softmax) or 3 (map1, map2, diff) */
    int nthreads;
    uint8_t *seg, *share_seg;    /* [T] */
    int64_t *arows;              /* [T] analysis rows, n_arows used */
    size_t n_arows;
    /* map selection, resolved: positions in the dump's layer/head/row axes, -1 = not stored */
    int64_t *layer_pos, *head_pos; /* [L], [Hs] */
    const int64_t *rows;         /* [R] stored rows, ascending */
    int64_t *all_rows;           /* [T] 0..T-1 when every row is stored */
    int64_t R;
    dfl_dump_stream *maps[3];    /* map1, map2, diff: [Ls, Hs', R, T] */
    /* noise sums over analysis rows */
    double *shares, *raw, *shares_abs;  /* [M, L, Hs, 7] */
    double *entropy;             /* [M', L, Hs] */
    double *negative;            /* [L, Hs] */
    /* outliers */
    logit_acc *tacc;             /* [threads] attention logits, per thread */
    logit_acc *hacc;             /* hidden states (serial) */
    dfl_topk_item *tstore;       /* [threads + 1, K] heaps of tacc and hacc */
    dfl_topk_item *sorted;       /* [threads + 1, K]: sorted output in [0, K), merge heap at [threads·K, …) */
    outlier_out logits, hidden;
    float *ch_absmax;            /* [L, D] */
    uint32_t *ch_count;          /* [L, D] */
    /* next-token predictions */
    dfl_dump_stream *logit_stream; /* [T, V] or NULL */
    float *nll;                  /* [T] */
    int32_t *argmax;             /* [T] */
    /* non-finite values: the first one's layer (L = the LM head) and site, -1 / NULL if none */
    uint8_t *bad_scores;         /* [threads] a non-finite attention logit in this layer */
    int64_t bad_layer;
    const char *bad_site;
    /* progress */
    size_t index;                /* file-order index: the dump's sample name */
    size_t ordinal, count;       /* position in this run, samples in this run */
    int64_t tokens_done, tokens_total;
    double start;
} sample_run;

/* ------------------------------------------------------- accumulators */

/* One chunk (at most CHUNK values) of a row of logits, vectorized: float sums for
 * the moments (added in double here), the max magnitude, and each value's histogram
 * bin. */
#define CHUNK 256
#define LANES 16
__attribute__((target_clones("avx512f", "avx2", "default")))
static float chunk_stats(const float *x, int64_t n, double *m, uint16_t *bin)
{
    /* LANES independent partial sums over fixed-length inner loops: what the
     * vectorizer takes (an omp simd reduction of five values plus the bin store did not
     * vectorize). */
    float s1[LANES] = {0}, s2[LANES] = {0}, s3[LANES] = {0}, s4[LANES] = {0}, mx[LANES] = {0};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
#pragma omp simd
        for (int l = 0; l < LANES; l++) {
            float v = x[j + l], v2 = v * v, a = fabsf(v);
            s1[l] += v, s2[l] += v2, s3[l] += v2 * v, s4[l] += v2 * v2;
            mx[l] = a > mx[l] ? a : mx[l];
            bin[j + l] = (uint16_t)dfl_hist_bin(v);
        }
    for (; j < n; j++) {
        float v = x[j], v2 = v * v, a = fabsf(v);
        s1[0] += v, s2[0] += v2, s3[0] += v2 * v, s4[0] += v2 * v2;
        mx[0] = a > mx[0] ? a : mx[0];
        bin[j] = (uint16_t)dfl_hist_bin(v);
    }
    float top = 0;
    for (int l = 0; l < LANES; l++) {
        m[1] += s1[l], m[2] += s2[l], m[3] += s3[l], m[4] += s4[l];
        top = mx[l] > top ? mx[l] : top;
    }
    if (top > m[5]) m[5] = top;
    return top;
}

/* Values x[0..n) into accumulator a: moments, histogram (four sub-histograms break
 * the store-to-load chains of runs of values in the same bin) and top-K, where value j
 * gets position idx with idx[slot] += j. */
static void acc_row(logit_acc *a, const float *x, int64_t n, const int32_t *idx, int slot)
{
    uint16_t bin[CHUNK];
    a->mom.m[0] += (double)n;
    for (int64_t j0 = 0; j0 < n; j0 += CHUNK) {
        int64_t c = n - j0 < CHUNK ? n - j0 : CHUNK, j = 0;
        float mx = chunk_stats(x + j0, c, a->mom.m, bin);
        for (; j + 4 <= c; j += 4) {
            a->sub[0].count[bin[j]]++;
            a->sub[1].count[bin[j + 1]]++;
            a->sub[2].count[bin[j + 2]]++;
            a->sub[3].count[bin[j + 3]]++;
        }
        for (; j < c; j++) a->sub[0].count[bin[j]]++;
        /* the top-K threshold only rises: most chunks are below it */
        if (a->top.n == a->top.k && mx <= a->top.items[0].value) continue;
        for (j = 0; j < c; j++) {
            float v = fabsf(x[j0 + j]);
            if (dfl_topk_wants(&a->top, v)) {
                int32_t at[4] = {idx[0], idx[1], idx[2], idx[3]};
                at[slot] += (int32_t)(j0 + j);
                dfl_topk_push(&a->top, v, at);
            }
        }
    }
}

static void acc_reset(logit_acc *a, dfl_topk_item *storage, int32_t k)
{
    dfl_topk_init(&a->top, storage, k);
    memset(a->sub, 0, sizeof a->sub);
    memset(&a->mom, 0, sizeof a->mom);
}

/* ------------------------------------------------------------- capture */

static int want_maps(void *user, int64_t layer)
{
    (void)user, (void)layer;
    return 1; /* the noise shares need every layer's analysis rows */
}

static void on_layer(void *user, int64_t layer)
{
    sample_run *r = user;
    for (int th = 0; th < r->nthreads; th++)
        acc_reset(&r->tacc[th], r->tstore + (size_t)th * (size_t)r->K, (int32_t)r->K);
    if (r->p->progress) {
        dfl_probe_progress pg = {r->ordinal, r->count, layer, r->L, r->tokens_done, r->tokens_total,
                                 dfl_clock_seconds() - r->start};
        r->p->progress(r->p->user, &pg);
    }
}

/* Raw attention logits of one block (worker thread), into this thread's accumulator. */
static void on_scores(void *user, int thread, const dfl_score_block *b)
{
    sample_run *r = user;
    for (int64_t i = 0; i < b->n; i++) {
        /* keys outside a sliding window are masked like the future: not counted */
        int64_t q = b->row0 + i, k0 = b->window && q - b->window + 1 > 0 ? q - b->window + 1 : 0;
        int32_t idx[4] = {(int32_t)b->head, (int32_t)b->map, (int32_t)q, (int32_t)k0};
        acc_row(&r->tacc[thread], b->scores + i * b->ld + k0, q + 1 - k0, idx, 3);
        if (!dfl_all_finite(b->scores + i * b->ld + k0, (size_t)(q + 1 - k0))) r->bad_scores[thread] = 1;
    }
}

/* Noise statistics of the analysis rows in this block, and the selected map rows. */
static dfl_status on_attn(void *user, const dfl_attn_block *b, dfl_error *err)
{
    sample_run *r = user;
    const float *src[3] = {b->map1, b->map2, b->diff};
    int64_t L = r->L, Hs = r->Hs, l = b->layer, h = b->head;
    for (size_t k = 0; k < r->n_arows; k++) {
        int64_t q = r->arows[k], i = q - b->row0;
        if (i < 0 || i >= b->n) continue;
        for (int mi = 0; mi < r->M; mi++) {
            const float *row = src[mi] + i * b->ld;
            double raw[DFL_SHARE_SEGMENTS] = {0}, absm[DFL_SHARE_SEGMENTS] = {0}, abs_total = 0;
            double total = dfl_row_segment_sums(row, r->share_seg, q + 1, raw, absm);
            for (int s = 0; s < DFL_SHARE_SEGMENTS; s++) abs_total += absm[s];
            size_t base = (((size_t)mi * (size_t)L + (size_t)l) * (size_t)Hs + (size_t)h) * DFL_SHARE_SEGMENTS;
            for (int s = 0; s < DFL_SHARE_SEGMENTS; s++) {
                r->raw[base + s] += raw[s];
                r->shares[base + s] += raw[s] / total;
                /* a NaN or Inf row stays NaN here too (a 0 would pass for a share) */
                r->shares_abs[base + s] += !isfinite(abs_total) ? NAN : abs_total > 0 ? absm[s] / abs_total : 0.0;
            }
            if (mi < 2) r->entropy[((size_t)mi * (size_t)L + (size_t)l) * (size_t)Hs + (size_t)h] +=
                dfl_row_entropy(row, q + 1);
            if (mi == 2) {
                double neg = 0;
                for (int64_t j = 0; j <= q; j++) neg += row[j] < 0 ? row[j] : 0;
                r->negative[(size_t)l * (size_t)Hs + (size_t)h] += neg;
            }
        }
    }
    if (!r->maps[0] || r->layer_pos[l] < 0 || r->head_pos[h] < 0) return DFL_OK;
    /* stored rows inside [row0, row0 + n), written as runs of consecutive rows that stay
     * in one row of tiles and reach only the keys their last row sees: no write touches
     * a tile wholly in its rows' future */
    int64_t k = 0;
    while (k < r->R && r->rows[k] < b->row0) k++;
    while (k < r->R && r->rows[k] < b->row0 + b->n) {
        int64_t run = 1;
        while (k + run < r->R && r->rows[k + run] == r->rows[k] + run && r->rows[k + run] < b->row0 + b->n &&
               (k + run) % MAP_TILE_ROWS != 0)
            run++;
        int64_t keys = r->rows[k + run - 1] + 1 < b->ncols ? r->rows[k + run - 1] + 1 : b->ncols;
        int64_t start[4] = {r->layer_pos[l], r->head_pos[h], k, 0}, count[4] = {1, 1, run, keys};
        for (int mi = 0; mi < 3; mi++) {
            if (!r->maps[mi]) continue;
            dfl_status s = dfl_dump_stream_write_f32(r->maps[mi], start, count, src[mi] + (r->rows[k] - b->row0) * b->ld,
                                                     b->ld, err);
            if (s) return s;
        }
        k += run;
    }
    return DFL_OK;
}

/* Merge accumulators acc[n] into layer l of o: sorted top-K (NaN / -1 padded),
 * histogram, moments. */
static void finish_layer(sample_run *r, const logit_acc *acc, int n, outlier_out *o, int64_t l)
{
    dfl_topk all;
    dfl_topk_init(&all, r->sorted + (size_t)r->K * (size_t)r->nthreads, (int32_t)r->K);
    dfl_hist *h = (dfl_hist *)(o->hist + (size_t)l * DFL_HIST_BINS);
    dfl_moments mom = {{0}};
    for (int th = 0; th < n; th++) {
        dfl_topk_merge(&all, &acc[th].top);
        for (int k = 0; k < 4; k++) dfl_hist_merge(h, &acc[th].sub[k]);
        dfl_moments_merge(&mom, &acc[th].mom);
    }
    int32_t kept = dfl_topk_sorted(&all, r->sorted);
    for (int64_t i = 0; i < r->K; i++) {
        o->top[l * r->K + i] = i < kept ? r->sorted[i].value : NAN;
        for (int c = 0; c < o->nidx; c++) o->top_index[(l * r->K + i) * o->nidx + c] = i < kept ? r->sorted[i].idx[c] : -1;
    }
    memcpy(o->mom + l * 6, mom.m, sizeof mom.m);
}

/* Per-channel max |x| and count of |x| >= alpha over one row. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void channel_row(const float *x, int64_t D, float alpha, float *cmax, uint32_t *ccount)
{
#pragma omp simd
    for (int64_t c = 0; c < D; c++) {
        float a = fabsf(x[c]);
        cmax[c] = a > cmax[c] ? a : cmax[c];
        ccount[c] += a >= alpha;
    }
}

/* Layer l's output x[T, D]: hidden-state outliers; also closes the layer's logits. */
/* The first non-finite value of the sample (later ones add nothing a reader can use). */
static void note_nonfinite(sample_run *r, int64_t layer, const char *site)
{
    if (r->bad_layer >= 0) return;
    r->bad_layer = layer;
    r->bad_site = site;
}

static dfl_status strict_fail(const sample_run *r, dfl_error *err)
{
    const char *id = r->pr->id && r->pr->id[0] ? r->pr->id : "(no id)";
    return dfl__fail(err, DFL_ERR_RANGE, "sample %s: non-finite value (NaN or Inf) in the %s of layer %lld (--strict)",
                     id, r->bad_site, (long long)r->bad_layer);
}

static dfl_status on_hidden(void *user, int64_t l, const float *x, int64_t T, int64_t D, dfl_error *err)
{
    sample_run *r = user;
    if (r->p->cancel && *r->p->cancel) return dfl__fail(err, DFL_ERR_CANCELLED, "cancelled");
    for (int th = 0; th < r->nthreads && r->bad_layer < 0; th++)
        if (r->bad_scores[th]) note_nonfinite(r, l, "attention logits");
    if (r->bad_layer < 0 && !dfl_all_finite(x, (size_t)T * (size_t)D)) note_nonfinite(r, l, "hidden states");
    if (r->bad_layer >= 0 && r->p->strict) return strict_fail(r, err);
    finish_layer(r, r->tacc, r->nthreads, &r->logits, l);
    acc_reset(r->hacc, r->tstore + (size_t)r->nthreads * (size_t)r->K, (int32_t)r->K);
    for (int64_t t = 0; t < T; t++) {
        int32_t idx[4] = {(int32_t)t, 0, 0, 0};
        acc_row(r->hacc, x + t * D, D, idx, 1);
        channel_row(x + t * D, D, (float)r->p->alpha, r->ch_absmax + l * D, r->ch_count + l * D);
    }
    finish_layer(r, r->hacc, 1, &r->hidden, l);
    return DFL_OK;
}

/* nll[t] = −log softmax(logits[t])[tokens[t+1]] (NaN at T−1), argmax[t] (first max). */
static dfl_status on_logits(void *user, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err)
{
    sample_run *r = user;
    if (r->bad_layer < 0 && !dfl_all_finite(logits, (size_t)n * (size_t)V)) note_nonfinite(r, r->L, "output logits");
    if (r->bad_layer >= 0 && r->p->strict) return strict_fail(r, err);
    double lse[64];
    for (int64_t i0 = 0; i0 < n; i0 += 64) {
        int64_t m = n - i0 < 64 ? n - i0 : 64;
        dfl_logsumexp_argmax(logits + i0 * V, m, V, lse, r->argmax + row0 + i0);
        for (int64_t i = 0; i < m; i++) {
            int64_t t = row0 + i0 + i;
            r->nll[t] = t + 1 < r->T ? (float)(lse[i] - (double)logits[(i0 + i) * V + r->pr->tokens[t + 1]]) : NAN;
        }
    }
    if (r->logit_stream) {
        int64_t start[2] = {row0, 0}, count[2] = {n, V};
        return dfl_dump_stream_write_f32(r->logit_stream, start, count, logits, V, err);
    }
    return DFL_OK;
}

/* ----------------------------------------------------- sample set-up/out */

static void run_free(sample_run *r)
{
    for (int i = 0; i < 3; i++) dfl_dump_stream_close(r->maps[i]);
    dfl_dump_stream_close(r->logit_stream);
    void *bufs[] = {r->seg, r->share_seg, r->arows, r->all_rows, r->layer_pos, r->head_pos, r->shares, r->raw, r->shares_abs,
                    r->entropy, r->negative, r->tacc, r->hacc, r->tstore, r->sorted, r->logits.top, r->logits.top_index,
                    r->logits.hist, r->logits.mom, r->hidden.top, r->hidden.top_index, r->hidden.hist,
                    r->hidden.mom, r->ch_absmax, r->ch_count, r->nll, r->argmax, r->bad_scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

static dfl_status run_alloc(sample_run *r, dfl_error *err)
{
    size_t T = (size_t)r->T, L = (size_t)r->L, Hs = (size_t)r->Hs, K = (size_t)r->K, M = (size_t)r->M;
    size_t nth = (size_t)r->nthreads;
    r->seg = dfl__alloc_array(T, 1);
    r->share_seg = dfl__alloc_array(T, 1);
    r->arows = dfl__alloc_array(T, sizeof(int64_t));
    r->layer_pos = dfl__alloc_array(L, sizeof(int64_t));
    r->head_pos = dfl__alloc_array(Hs, sizeof(int64_t));
    r->shares = dfl__calloc_array(M * L * Hs * DFL_SHARE_SEGMENTS, sizeof(double));
    r->raw = dfl__calloc_array(M * L * Hs * DFL_SHARE_SEGMENTS, sizeof(double));
    r->shares_abs = dfl__calloc_array(M * L * Hs * DFL_SHARE_SEGMENTS, sizeof(double));
    r->entropy = dfl__calloc_array(2 * L * Hs, sizeof(double));
    r->negative = dfl__calloc_array(L * Hs, sizeof(double));
    r->tacc = dfl__calloc_array(nth, sizeof(logit_acc));
    r->hacc = dfl__calloc_array(1, sizeof(logit_acc));
    r->tstore = dfl__alloc_array((nth + 1) * K, sizeof(dfl_topk_item));
    r->sorted = dfl__alloc_array((nth + 1) * K, sizeof(dfl_topk_item));
    r->logits.top = dfl__alloc_array(L * K, sizeof(float));
    r->logits.top_index = dfl__alloc_array(L * K * 4, sizeof(int32_t));
    r->logits.hist = dfl__calloc_array(L * DFL_HIST_BINS, sizeof(uint64_t));
    r->logits.mom = dfl__calloc_array(L * 6, sizeof(double));
    r->hidden.top = dfl__alloc_array(L * K, sizeof(float));
    r->hidden.top_index = dfl__alloc_array(L * K * 2, sizeof(int32_t));
    r->hidden.hist = dfl__calloc_array(L * DFL_HIST_BINS, sizeof(uint64_t));
    r->hidden.mom = dfl__calloc_array(L * 6, sizeof(double));
    r->ch_absmax = dfl__calloc_array(L * (size_t)r->D, sizeof(float));
    r->ch_count = dfl__calloc_array(L * (size_t)r->D, sizeof(uint32_t));
    r->nll = dfl__alloc_array(T, sizeof(float));
    r->argmax = dfl__alloc_array(T, sizeof(int32_t));
    r->bad_scores = dfl__calloc_array(nth, 1);
    r->bad_layer = -1;
    r->logits.nidx = 4;
    r->hidden.nidx = 2;
    if (!r->seg || !r->share_seg || !r->arows || !r->layer_pos || !r->head_pos || !r->shares || !r->raw ||
        !r->shares_abs || !r->entropy || !r->negative || !r->tacc || !r->hacc || !r->tstore || !r->sorted || !r->logits.top ||
        !r->logits.top_index || !r->logits.hist || !r->logits.mom || !r->hidden.top || !r->hidden.top_index ||
        !r->hidden.hist || !r->hidden.mom || !r->ch_absmax || !r->ch_count || !r->nll || !r->argmax || !r->bad_scores)
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a sample of %lld tokens", (long long)r->T);
    return DFL_OK;
}

/* Resolve the map selection against this model and sample; DFL_ERR_USAGE when it
 * names a layer, head or row that is not there. */
static dfl_status resolve_selection(sample_run *r, dfl_error *err)
{
    const dfl_map_select *sel = &r->p->maps;
    for (int64_t l = 0; l < r->L; l++) r->layer_pos[l] = sel->layers ? -1 : l;
    for (int64_t h = 0; h < r->Hs; h++) r->head_pos[h] = sel->heads ? -1 : h;
    for (size_t i = 0; sel->layers && i < sel->n_layers; i++) {
        if (sel->layers[i] >= r->L)
            return dfl__fail(err, DFL_ERR_USAGE, "--maps: layer %lld is out of range (the model has %lld layers)",
                             (long long)sel->layers[i], (long long)r->L);
        r->layer_pos[sel->layers[i]] = (int64_t)i;
    }
    for (size_t i = 0; sel->heads && i < sel->n_heads; i++) {
        if (sel->heads[i] >= r->Hs)
            return dfl__fail(err, DFL_ERR_USAGE, "--maps: head %lld is out of range (the model has %lld heads)",
                             (long long)sel->heads[i], (long long)r->Hs);
        r->head_pos[sel->heads[i]] = (int64_t)i;
    }
    if (sel->rows == DFL_MAP_ROWS_ANALYSIS) {
        r->rows = r->arows;
        r->R = (int64_t)r->n_arows;
    } else if (sel->rows == DFL_MAP_ROWS_LIST) {
        if (sel->row_list[sel->n_rows - 1] >= r->T)
            return dfl__fail(err, DFL_ERR_USAGE, "--maps: row %lld is out of range (the prompt has %lld tokens)",
                             (long long)sel->row_list[sel->n_rows - 1], (long long)r->T);
        r->rows = sel->row_list;
        r->R = (int64_t)sel->n_rows;
    } else if (sel->enabled) {
        if (!(r->all_rows = dfl__alloc_array((size_t)r->T, sizeof(int64_t))))
            return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (int64_t t = 0; t < r->T; t++) r->all_rows[t] = t;
        r->rows = r->all_rows;
        r->R = r->T;
    }
    return DFL_OK;
}

static dfl_status put_i64_as_i32(dfl_dump *d, const char *name, const int64_t *v, int64_t n, dfl_error *err)
{
    int32_t *b = dfl__alloc_array((size_t)n, sizeof *b);
    if (!b) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) b[i] = v ? (int32_t)v[i] : (int32_t)i;
    dfl_status s = dfl_dump_put(d, name, DFL_H5_I32, 1, &n, b, err);
    free(b);
    return s;
}

/* attn/map1 (+ map2, diff) [Ls, Hs', R, T] with their dimension scales. */
static dfl_status create_map_streams(sample_run *r, dfl_dump *d, dfl_error *err)
{
    const dfl_map_select *sel = &r->p->maps;
    int64_t Ls = sel->layers ? (int64_t)sel->n_layers : r->L, Hsel = sel->heads ? (int64_t)sel->n_heads : r->Hs;
    dfl_status s;
    if ((s = put_i64_as_i32(d, "attn/layers", sel->layers, Ls, err)) ||
        (s = put_i64_as_i32(d, "attn/heads", sel->heads, Hsel, err)) ||
        (s = put_i64_as_i32(d, "attn/rows", r->rows, r->R, err)) ||
        (s = put_i64_as_i32(d, "attn/keys", NULL, r->T, err)))
        return s;
    static const char *names[3] = {"attn/map1", "attn/map2", "attn/diff"};
    static const char *scales[4] = {"attn/layers", "attn/heads", "attn/rows", "attn/keys"};
    static const char *labels[4] = {"layer", "head", "query", "key"};
    /* Tiles of MAP_TILE_ROWS x MAP_TILE_KEYS: tiles wholly in the masked future are never
     * written, so they take no space and cost readers nothing to decompress. */
    int64_t dims[4] = {Ls, Hsel, r->R, r->T};
    int64_t chunk[4] = {1, 1, r->R < MAP_TILE_ROWS ? r->R : MAP_TILE_ROWS, r->T < MAP_TILE_KEYS ? r->T : MAP_TILE_KEYS};
    /* Tiles are assembled in memory and compressed by background threads while the
     * forward goes on. A block of rows reaches every head and may end inside a tile row:
     * two tile rows of every head are being filled, and as many again may wait for
     * their compression. */
    dfl_dump_direct opt = dfl_dump_direct_default();
    opt.gzip = r->p->map_gzip;
    opt.open_rows = 4 * Hsel;
    for (int i = 0; i < r->M; i++) {
        if ((s = dfl_dump_stream_create_direct(d, names[i], r->p->map_f16 ? DFL_H5_F16 : DFL_H5_F32, 4, dims, chunk,
                                               &opt, &r->maps[i], err)))
            return s;
        if ((s = dfl_dump_attach_scales(d, names[i], 4, scales, labels, err))) return s;
    }
    return DFL_OK;
}

/* The noise datasets: sums over analysis rows turned into means. */
static dfl_status write_noise(sample_run *r, dfl_dump *d, dfl_error *err)
{
    size_t n4 = (size_t)r->M * (size_t)r->L * (size_t)r->Hs * DFL_SHARE_SEGMENTS;
    size_t ne = (size_t)(r->M == 3 ? 2 : 1) * (size_t)r->L * (size_t)r->Hs, nn = (size_t)r->L * (size_t)r->Hs;
    float *buf = dfl__alloc_array(n4, sizeof(float));
    if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    double inv = 1.0 / (double)r->n_arows;
    int64_t d4[4] = {r->M, r->L, r->Hs, DFL_SHARE_SEGMENTS}, d3[3] = {r->M == 3 ? 2 : 1, r->L, r->Hs},
            d2[2] = {r->L, r->Hs};
    const double *src[3] = {r->shares, r->raw, r->shares_abs};
    static const char *names[3] = {"noise/shares", "noise/raw", "noise/shares_abs"};
    dfl_status s = DFL_OK;
    for (int k = 0; k < 3 && !s; k++) {
        for (size_t i = 0; i < n4; i++) buf[i] = (float)(src[k][i] * inv);
        s = dfl_dump_put(d, names[k], DFL_H5_F32, 4, d4, buf, err);
    }
    for (size_t i = 0; i < ne && !s; i++) buf[i] = (float)(r->entropy[i] * inv);
    if (!s) s = dfl_dump_put(d, "noise/entropy", DFL_H5_F32, 3, d3, buf, err);
    if (!s && r->M == 3) {
        for (size_t i = 0; i < nn; i++) buf[i] = (float)(r->negative[i] * inv);
        s = dfl_dump_put(d, "noise/negative_mass", DFL_H5_F32, 2, d2, buf, err);
    }
    free(buf);
    if (s) return s;
    int64_t n = (int64_t)r->n_arows;
    char segs[160] = "";
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++)
        snprintf(segs + strlen(segs), sizeof segs - strlen(segs), "%s%s", k ? "," : "", dfl_share_name(k));
    if ((s = put_i64_as_i32(d, "noise/rows", r->arows, n, err)) ||
        (s = dfl_dump_attr_str(d, "noise", "segments", segs, err)) ||
        (s = dfl_dump_attr_str(d, "noise", "maps", r->M == 3 ? "map1,map2,diff" : "map1", err)) ||
        (s = dfl_dump_attr_str(d, "noise", "rows_rule", dfl_rows_rule_name(r->p->rows), err)))
        return s;
    return DFL_OK;
}

static dfl_status write_outlier_set(sample_run *r, dfl_dump *d, const char *kind, const outlier_out *o,
                                    dfl_error *err)
{
    static double edges[DFL_HIST_BINS + 1];
    dfl_hist_edges(edges);
    char name[64];
    int64_t dk[2] = {r->L, r->K}, di[3] = {r->L, r->K, o->nidx}, dh[2] = {r->L, DFL_HIST_BINS}, dm[2] = {r->L, 6};
    dfl_status s;
#define PUT(suffix, type, nd, dims, data)                                      \
    snprintf(name, sizeof name, "outliers/%s/%s", kind, suffix);               \
    if ((s = dfl_dump_put(d, name, type, nd, dims, data, err))) return s
    /* NaN / -1 padded for short prompts: deflated (exact) */
    snprintf(name, sizeof name, "outliers/%s/top", kind);
    if ((s = dfl_dump_put_deflated(d, name, DFL_H5_F32, 2, dk, o->top, err))) return s;
    snprintf(name, sizeof name, "outliers/%s/top_index", kind);
    if ((s = dfl_dump_put_deflated(d, name, DFL_H5_I32, 3, di, o->top_index, err))) return s;
    snprintf(name, sizeof name, "outliers/%s/hist", kind);   /* mostly zeros: deflated, exact */
    if ((s = dfl_dump_put_deflated(d, name, DFL_H5_U64, 2, dh, o->hist, err))) return s;
    if ((s = dfl_dump_attr_f64(d, name, "edges", edges, DFL_HIST_BINS + 1, err)) ||
        (s = dfl_dump_attr_i64(d, name, "min_exponent", DFL_HIST_MIN_EXP, err)) ||
        (s = dfl_dump_attr_i64(d, name, "max_exponent", DFL_HIST_MAX_EXP, err)) ||
        (s = dfl_dump_attr_i64(d, name, "sub_bins", DFL_HIST_SUB, err)) ||
        (s = dfl_dump_attr_str(d, name, "bins",
                               "bin 0: |x| < 2^min_exponent (zeros); bin 1 + (e - min_exponent)*sub_bins + k: "
                               "[2^e (1 + k/sub_bins), 2^e (1 + (k+1)/sub_bins)); last bin: |x| >= 2^max_exponent "
                               "or NaN; edges[i] is the lower edge of bin i",
                               err)))
        return s;
    PUT("moments", DFL_H5_F64, 2, dm, o->mom);
    if ((s = dfl_dump_attr_str(d, name, "columns", "count,sum_x,sum_x2,sum_x3,sum_x4,max_abs", err))) return s;
#undef PUT
    return DFL_OK;
}

static dfl_status write_outliers(sample_run *r, dfl_dump *d, dfl_error *err)
{
    dfl_status s;
    if ((s = write_outlier_set(r, d, "logits", &r->logits, err)) ||
        (s = write_outlier_set(r, d, "hidden", &r->hidden, err)))
        return s;
    if ((s = dfl_dump_attr_str(d, "outliers/logits/top_index", "columns", "head,map,query,key", err)) ||
        (s = dfl_dump_attr_str(d, "outliers/hidden/top_index", "columns", "token,channel", err)))
        return s;
    int64_t dd[2] = {r->L, r->D};
    if ((s = dfl_dump_put(d, "outliers/hidden/channel_absmax", DFL_H5_F32, 2, dd, r->ch_absmax, err)) ||
        (s = dfl_dump_put(d, "outliers/hidden/channel_count", DFL_H5_U32, 2, dd, r->ch_count, err)))
        return s;
    return dfl_dump_attr_f64(d, "outliers/hidden/channel_count", "alpha", &r->p->alpha, 1, err);
}

/* target_correct / target_nll when the sample has target tokens after position 0:
 * token p is predicted by row p − 1. */
static dfl_status write_targets(sample_run *r, dfl_dump *d, dfl_probe_report *rep, dfl_error *err)
{
    const dfl_prompt *pr = r->pr;
    size_t n = 0;
    int correct = 1;
    double nll = 0;
    for (size_t i = 0; i < pr->n_spans[DFL_SPAN_TARGET]; i++)
        for (int64_t p = pr->spans[DFL_SPAN_TARGET][i].start; p < pr->spans[DFL_SPAN_TARGET][i].end; p++) {
            if (p < 1) continue;
            correct &= r->argmax[p - 1] == pr->tokens[p];
            nll += r->nll[p - 1];
            n++;
        }
    if (n == 0) return DFL_OK;
    uint8_t c = (uint8_t)correct;
    float mean = (float)(nll / (double)n);
    rep->targets++;
    rep->targets_correct += c;
    dfl_status s = dfl_dump_put(d, "target_correct", DFL_H5_U8, 0, NULL, &c, err);
    return s ? s : dfl_dump_put(d, "target_nll", DFL_H5_F32, 0, NULL, &mean, err);
}

/* A text prompt's character offsets per token and its input text. */
static dfl_status put_text_extras(dfl_dump *d, const dfl_prompt *pr, dfl_error *err)
{
    dfl_status s = DFL_OK;
    if (pr->offsets) {
        int64_t dims[2] = {(int64_t)pr->n_tokens, 2};
        s = dfl_dump_put(d, "token_offsets", DFL_H5_I32, 2, dims, pr->offsets, err);
    }
    if (!s && pr->input) s = dfl_dump_put_strings(d, "input", (const char *const *)&pr->input, 1, err);
    return s;
}

static dfl_status run_sample(const dfl_probe_params *p, const dfl_model *m, dfl_dump *d, const dfl_prompt *pr,
                             sample_run *r, dfl_probe_report *rep, dfl_error *err)
{
    const dfl_config *c = &m->config;
    int64_t T = (int64_t)pr->n_tokens;
    r->p = p;
    r->m = m;
    r->pr = pr;
    r->T = T;
    r->L = c->num_layers;
    r->Hs = dfl_config_analysis_heads(c);
    r->D = c->hidden_size;
    r->K = p->topk;
    r->M = c->type == DFL_MODEL_LLAMA ? 1 : 3;
    r->nthreads = dfl_forward_max_threads();
    dfl_status s = run_alloc(r, err);
    if (s) return s;
    dfl_prompt_segments(pr, r->seg);
    dfl_share_segments(r->seg, T, r->share_seg);
    r->n_arows = dfl_analysis_rows(pr, p->rows, r->arows);
    if ((s = resolve_selection(r, err))) return s;

    if ((s = dfl_dump_sample_begin(d, r->index, pr->id, pr->has_depth ? pr->depth : NAN, err))) return s;
    if ((s = dfl_dump_put(d, "tokens", DFL_H5_I32, 1, &T, pr->tokens, err))) return s;
    if ((s = dfl_dump_put(d, "segments", DFL_H5_U8, 1, &T, r->seg, err))) return s;
    if (pr->text && (s = dfl_dump_put_strings(d, "token_text", (const char *const *)pr->text, pr->n_tokens, err)))
        return s;
    if ((s = put_text_extras(d, pr, err))) return s;
    if (p->maps.enabled && (s = create_map_streams(r, d, err))) return s;
    if (p->save_logits) {
        int64_t dims[2] = {T, c->vocab_size}, chunk[2] = {T < 16 ? T : 16, c->vocab_size};
        if ((s = dfl_dump_stream_create(d, "logits", DFL_H5_F32, 2, dims, chunk, 0, 0, &r->logit_stream, err)))
            return s;
    }

    dfl_capture cap = {.user = r, .want_maps = want_maps, .attn_rows = on_attn, .scores_rows = on_scores,
                       .layer_begin = on_layer, .hidden = on_hidden, .logits_rows = on_logits};
    double t0 = dfl_clock_seconds();
    s = dfl_forward(m, pr->tokens, T, &p->forward, &cap, err);
    for (int i = 0; i < 3 && !s; i++)
        if (r->maps[i]) s = dfl_dump_stream_flush(r->maps[i], err);
    rep->forward_seconds += dfl_clock_seconds() - t0;
    if (s) return s;
    if ((s = dfl_dump_put(d, "nll", DFL_H5_F32, 1, &T, r->nll, err)) ||
        (s = dfl_dump_put(d, "argmax", DFL_H5_I32, 1, &T, r->argmax, err)) ||
        (s = write_targets(r, d, rep, err)) || (s = write_noise(r, d, err)) || (s = write_outliers(r, d, err)))
        return s;
    if (r->bad_layer >= 0) {
        if ((s = dfl_dump_attr_i64(d, ".", "nonfinite_layer", r->bad_layer, err)) ||
            (s = dfl_dump_attr_str(d, ".", "nonfinite_site", r->bad_site, err)))
            return s;
        if (rep->nonfinite_samples++ == 0 && p->warn) {
            char msg[512];
            snprintf(msg, sizeof msg,
                     "%s:%zu: sample %s: first non-finite value (NaN or Inf) in the %s of layer %lld; what "
                     "depends on it is NaN (recorded in the dump; --strict makes this an error)",
                     p->prompts_path, pr->line, pr->id && pr->id[0] ? pr->id : "(no id)", r->bad_site,
                     (long long)r->bad_layer);
            p->warn(p->user, msg);
        }
    }
    return dfl_dump_sample_end(d, err);
}

/* ------------------------------------------------------------------ run */

/* A subset must name existing prompts in file order, each once. */
static dfl_status check_subset(const dfl_probe_params *p, size_t count, dfl_error *err)
{
    for (size_t k = 0; p->subset && k < p->n_subset; k++)
        if (p->subset[k] >= count || (k > 0 && p->subset[k] <= p->subset[k - 1]))
            return dfl__fail(err, DFL_ERR_USAGE, "prompt subset: index %zu (position %zu) is out of order or "
                             "beyond the %zu prompts", p->subset[k], k, count);
    return DFL_OK;
}

/* The prompts, text ones tokenized. The tokenizer is opened when a prompt has "input"
 * (default: the model folder's tokenizer.json) or when --tokenizer names one, which
 * then also labels token prompts that have no "text". */
dfl_status dfl_probe_read_prompts(const dfl_probe_params *p, dfl_prompt_set *ps, dfl_error *err)
{
    dfl_status s = dfl__prompt_set_read(p->prompts_path, 1, ps, err);
    if (s) return s;
    int need = p->tokenizer_path != NULL;
    for (size_t i = 0; i < ps->count && !need; i++) need = ps->items[i].n_tokens == 0;
    if (!need) return DFL_OK;
    dfl_tokenizer *t = NULL;
    const char *path = p->tokenizer_path ? p->tokenizer_path : p->model_dir;
    if ((s = dfl_tokenizer_open_path(path, &t, err))) {
        if (!p->tokenizer_path) dfl__context(err, "text prompts need a tokenizer (--tokenizer)");
        dfl_prompt_set_free(ps);
        return s;
    }
    for (size_t i = 0; i < ps->count && !s; i++) {
        dfl_prompt *pr = &ps->items[i];
        if (pr->n_tokens == 0) {
            s = dfl_prompt_tokenize(pr, t, 1, p->prompts_path, err);
        } else if (!pr->text) {
            /* token prompts get the decoder's labels */
            uint32_t *ids = dfl__alloc_array(pr->n_tokens, sizeof *ids);
            if (!ids) { s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory"); break; }
            for (size_t k = 0; k < pr->n_tokens; k++) ids[k] = (uint32_t)pr->tokens[k];
            s = dfl_tokenizer_labels(t, ids, pr->n_tokens, &pr->text, err);
            free(ids);
            if (s) dfl__context(err, "%s:%zu", p->prompts_path, pr->line);
        }
    }
    dfl_tokenizer_close(t);
    if (s) dfl_prompt_set_free(ps);
    return s;
}

static const char *granularity_name(const dfl_forward_opts *o)
{
    if (!o->quant_bits) return "none";
    return o->quant_granularity == DFL_QUANT_HEAD ? "head" : o->quant_granularity == DFL_QUANT_ROW ? "row" : "tensor";
}

/* The bytes of one head's map at most: every tile that holds a causal cell, uncompressed
 * (tiles wholly in the future are never written). rows: the R stored query rows,
 * ascending; NULL = rows 0..R-1. */
static double map_tile_bytes(const int64_t *rows, int64_t R, int64_t T, double elem)
{
    int64_t tr = R < MAP_TILE_ROWS ? R : MAP_TILE_ROWS, tk = T < MAP_TILE_KEYS ? T : MAP_TILE_KEYS;
    int64_t all = (T + tk - 1) / tk, tiles = 0;
    for (int64_t i = 0; i < R; i += tr) {
        int64_t end = i + tr < R ? i + tr : R, last = rows ? rows[end - 1] : end - 1;
        int64_t keys = last / tk + 1; /* key tiles holding keys 0..last */
        tiles += keys < all ? keys : all;
    }
    return (double)tiles * (double)(tr * tk) * elem;
}

/* Per sample a fixed ~10 KB (groups, headers, deflated histograms) plus the top lists,
 * channel statistics and per-token data uncompressed, the selected maps' tiles and the
 * logits uncompressed. */
double dfl_probe_projected_bytes(const dfl_probe_params *p, const dfl_config *c, const dfl_prompt_set *ps)
{
    double L = (double)c->num_layers, K = p->topk, D = (double)c->hidden_size, V = (double)c->vocab_size;
    double Hs = (double)dfl_config_analysis_heads(c), M = c->type == DFL_MODEL_LLAMA ? 1 : 3;
    const dfl_map_select *sel = &p->maps;
    double Ls = sel->layers ? (double)sel->n_layers : L, Hm = sel->heads ? (double)sel->n_heads : Hs;
    double total = 64.0 * 1024;
    for (size_t i = 0; i < ps->count; i++) {
        const dfl_prompt *pr = &ps->items[i];
        double T = (double)pr->n_tokens;
        double b = 10.0 * 1024 + L * (K * 32 + D * 8 + 96) + M * L * Hs * 7 * 4 * 3 + T * 13;
        if (pr->text)
            for (size_t t = 0; t < pr->n_tokens; t++) b += 16 + (pr->text[t] ? (double)strlen(pr->text[t]) : 0);
        if (sel->enabled) {
            int64_t n = (int64_t)pr->n_tokens, R = n, *rows = NULL;
            if (sel->rows == DFL_MAP_ROWS_LIST)
                for (R = 0; R < (int64_t)sel->n_rows && sel->row_list[R] < n;) R++; /* sorted: rows past T go */
            if (sel->rows == DFL_MAP_ROWS_ANALYSIS && (rows = dfl__alloc_array(pr->n_tokens, sizeof *rows)))
                R = dfl_analysis_rows(pr, p->rows, rows);
            const int64_t *which = sel->rows == DFL_MAP_ROWS_LIST ? sel->row_list : rows;
            if (sel->rows == DFL_MAP_ROWS_ANALYSIS && !rows) which = NULL, R = n; /* no memory: all rows bound it */
            b += M * Ls * Hm * map_tile_bytes(which, R, n, p->map_f16 ? 2 : 4);
            free(rows);
        }
        if (p->save_logits) b += T * V * 4;
        total += b;
    }
    return total;
}

/* Refuse (without --force) a run whose projected dump exceeds the free space of the
 * file system that will hold it: better now than after the whole run. */
static dfl_status check_room(const dfl_probe_params *p, const dfl_model *m, const dfl_prompt_set *ps, dfl_error *err)
{
    if (p->room_checked) return DFL_OK;
    double avail = dfl__free_bytes(p->out_path), need = dfl_probe_projected_bytes(p, &m->config, ps);
    if (avail < 0 || need <= avail) return DFL_OK; /* unknown: the create will say what is wrong */
    char a[32], n[32], msg[400];
    dfl__human_bytes(avail, a, sizeof a);
    dfl__human_bytes(need, n, sizeof n);
    if (!p->overwrite)
        return dfl__fail(err, DFL_ERR_IO,
                         "%s: the dump is projected to take up to %s, more than the %s free on its file system "
                         "(fewer prompts or maps, or --force to try anyway)",
                         p->out_path, n, a);
    if (p->warn) {
        snprintf(msg, sizeof msg, "%s: the dump is projected to take up to %s, more than the %s free (--force: trying)",
                 p->out_path, n, a);
        p->warn(p->user, msg);
    }
    return DFL_OK;
}

dfl_status dfl_probe_run(const dfl_probe_params *p, dfl_probe_report *report, dfl_error *err)
{
    dfl_model *m = NULL;
    dfl_prompt_set ps = {NULL, 0};
    dfl_dump *d = NULL;
    dfl_probe_report rep;
    memset(&rep, 0, sizeof rep);
    dfl_status s = DFL_OK;
    if (p->topk < 1 || p->topk > DFL_TOPK_MAX)
        s = dfl__fail(err, DFL_ERR_USAGE, "--topk must be in [1, %d]", DFL_TOPK_MAX);
    /* Cheap checks first: an existing output or bad prompts fail before the load. */
    const char *inputs[2] = {p->prompts_path, p->model_dir};
    if (!s) s = dfl__check_not_input(p->out_path, inputs, 2, err);
    if (!s) s = dfl__check_overwrite(p->out_path, p->overwrite, err);
    if (!s) s = dfl_probe_read_prompts(p, &ps, err);
    dfl_load_opts lo = {p->allow_unused};
    if (!s) s = dfl_model_load_opts(p->model_dir, &lo, &m, err);
    if (s) goto done;

    const dfl_config *c = &m->config;
    if (p->warn && m->n_unused) {
        char msg[480];
        int n = snprintf(msg, sizeof msg, "%s: %zu checkpoint tensor%s not used:", p->model_dir, m->n_unused,
                         m->n_unused == 1 ? " is" : "s are");
        for (size_t i = 0; i < m->n_unused && n > 0 && (size_t)n < sizeof msg - 80; i++)
            n += snprintf(msg + n, sizeof msg - (size_t)n, "%s '%s'", i ? "," : "", m->unused[i]);
        if (n > 0 && (size_t)n >= sizeof msg - 80) snprintf(msg + sizeof msg - 80, 80, ", ... (%zu in all)", m->n_unused);
        p->warn(p->user, msg);
    }
    size_t too_long = 0, first_long = 0, longest = 0, no_bos = 0, first_no_bos = 0;
    if ((s = check_subset(p, ps.count, err))) goto done;
    size_t n_run = p->subset ? p->n_subset : ps.count;
    /* every prompt is checked, not only this run's, so that MPI ranks fail and warn alike */
    for (size_t i = 0; i < ps.count; i++) {
        if ((s = dfl_prompt_check_vocab(&ps.items[i], c->vocab_size, p->prompts_path, err))) goto done;
        /* Models are trained with BOS first; probe never adds it (the prompt file is
         * the exact input), it says so once. */
        if (c->bos_token_id >= 0 && ps.items[i].tokens[0] != c->bos_token_id && no_bos++ == 0)
            first_no_bos = ps.items[i].line;
        if (c->max_position_embeddings > 0 && (int64_t)ps.items[i].n_tokens > c->max_position_embeddings) {
            if (too_long++ == 0) first_long = ps.items[i].line;
            if (ps.items[i].n_tokens > longest) longest = ps.items[i].n_tokens;
        }
    }
    for (size_t k = 0; k < n_run; k++) rep.tokens += (int64_t)ps.items[p->subset ? p->subset[k] : k].n_tokens;
    /* one line for the whole file, not one per prompt */
    if (p->warn && too_long) {
        char msg[320];
        snprintf(msg, sizeof msg,
                 "%s:%zu: %zu of %zu prompts exceed max_position_embeddings (%lld), the longest with %zu tokens",
                 p->prompts_path, first_long, too_long, ps.count, (long long)c->max_position_embeddings, longest);
        p->warn(p->user, msg);
    }
    if (p->warn && no_bos) {
        char msg[320];
        snprintf(msg, sizeof msg,
                 "%s:%zu: %zu of %zu prompts do not start with bos_token_id %lld; the model was trained with it "
                 "first (probe runs the tokens as given)",
                 p->prompts_path, first_no_bos, no_bos, ps.count, (long long)c->bos_token_id);
        p->warn(p->user, msg);
    }

    if ((s = check_room(p, m, &ps, err))) goto done;

    dfl_dump_info info = {m, p->model_dir, p->forward.quant_bits, granularity_name(&p->forward),
                          dfl_rows_rule_name(p->rows)};
    if ((s = dfl_dump_create(p->out_path, p->overwrite, &info, &d, err))) goto done;
    if ((s = dfl_dump_attr_i64(d, ".", "topk", p->topk, err))) goto done;
    double start = dfl_clock_seconds();
    int64_t done_tokens = 0;
    for (size_t k = 0; k < n_run; k++) {
        size_t i = p->subset ? p->subset[k] : k;
        sample_run r;
        memset(&r, 0, sizeof r);
        r.index = i;
        r.ordinal = k;
        r.count = n_run;
        r.tokens_done = done_tokens;
        r.tokens_total = rep.tokens;
        r.start = start;
        s = p->cancel && *p->cancel ? dfl__fail(err, DFL_ERR_CANCELLED, "cancelled")
                                    : run_sample(p, m, d, &ps.items[i], &r, &rep, err);
        run_free(&r);
        if (s == DFL_ERR_CANCELLED) goto done;
        if (s) {
            dfl__context(err, "%s:%zu", p->prompts_path, ps.items[i].line);
            goto done;
        }
        done_tokens += (int64_t)ps.items[i].n_tokens;
        rep.flops += dfl_forward_flops(c, (int64_t)ps.items[i].n_tokens);
    }
    if (p->progress) {
        dfl_probe_progress pg = {n_run, n_run, c->num_layers, c->num_layers, done_tokens, rep.tokens,
                                 dfl_clock_seconds() - start};
        p->progress(p->user, &pg);
    }
    rep.samples = n_run;
    if (p->warn && rep.nonfinite_samples > 1) {
        char msg[256];
        snprintf(msg, sizeof msg, "%zu of %zu samples have non-finite values (attributes nonfinite_layer, nonfinite_site)",
                 rep.nonfinite_samples, n_run);
        p->warn(p->user, msg);
    }
    if ((s = dfl_dump_attr_i64(d, ".", "nonfinite_samples", (int64_t)rep.nonfinite_samples, err))) goto done;
    s = dfl_dump_finish(d, err);
    d = NULL;
done:
    dfl_dump_abort(d);
    dfl_model_free(m);
    dfl_prompt_set_free(&ps);
    if (report) *report = rep;
    return s;
}
