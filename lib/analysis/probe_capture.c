/* probe_capture.c — what probe measures while a forward pass runs: the capture
 * callbacks (attention blocks, raw logits, layer outputs, output logits) and the
 * streaming accumulators behind them (noise sums, outlier top-K, histograms, moments,
 * channel statistics, NLL and argmax, non-finite values). */
#include "analysis/probe_capture.h"

#include <math.h>
#include <string.h>

#include "analysis/probe_lens.h"
#include "base/clock.h"
#include "model/kernels.h"
#include "analysis/probe_quant.h"

/* ------------------------------------------------------- accumulators */

/* One chunk (at most CHUNK values) of a row of logits, vectorized: float sums for
 * the moments (added in double here), the max magnitude, and each value's histogram
 * bin. */
#define CHUNK 256
#define LANES 16
__attribute__((target_clones("avx512f", "avx2", "default"))) static float chunk_stats(const float *x, int64_t n,
                                                                                      double *m, uint16_t *bin)
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
        for (; j < c; j++)
            a->sub[0].count[bin[j]]++;
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
        dfl_probe_progress pg = {
            r->ordinal, r->count, layer, r->L, r->tokens_done, r->tokens_total, dfl_clock_seconds() - r->start};
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

/* The selected map rows of this block into the map streams. */
static dfl_status write_map_rows(sample_run *r, const dfl_attn_block *b, const float *const *src, dfl_error *err)
{
    int64_t l = b->layer, h = b->head;
    if (!r->maps[0] || r->layer_pos[l] < 0 || r->head_pos[h] < 0) return DFL_OK;
    /* stored rows inside [row0, row0 + n), written as runs of consecutive rows that stay
     * in one row of tiles and reach only the keys their last row sees: no write touches
     * a tile wholly in its rows' future */
    int64_t k = 0;
    while (k < r->R && r->rows[k] < b->row0)
        k++;
    while (k < r->R && r->rows[k] < b->row0 + b->n) {
        int64_t run = 1;
        while (k + run < r->R && r->rows[k + run] == r->rows[k] + run && r->rows[k + run] < b->row0 + b->n &&
               (k + run) % MAP_TILE_ROWS != 0)
            run++;
        int64_t keys = r->rows[k + run - 1] + 1 < b->ncols ? r->rows[k + run - 1] + 1 : b->ncols;
        int64_t start[4] = {r->layer_pos[l], r->head_pos[h], k, 0}, count[4] = {1, 1, run, keys};
        for (int mi = 0; mi < 3; mi++) {
            if (!r->maps[mi] || (mi == 1 && r->noise_pos[h] < 0)) continue; /* GDA: the group's map, once */
            int64_t at[4] = {start[0], mi == 1 ? r->noise_pos[h] : start[1], start[2], start[3]};
            dfl_status s =
                dfl_dump_stream_write_f32(r->maps[mi], at, count, src[mi] + (r->rows[k] - b->row0) * b->ld, b->ld, err);
            if (s) return s;
        }
        k += run;
    }
    return DFL_OK;
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
            for (int s = 0; s < DFL_SHARE_SEGMENTS; s++)
                abs_total += absm[s];
            size_t base = (((size_t)mi * (size_t)L + (size_t)l) * (size_t)Hs + (size_t)h) * DFL_SHARE_SEGMENTS;
            for (int s = 0; s < DFL_SHARE_SEGMENTS; s++) {
                r->raw[base + s] += raw[s];
                r->shares[base + s] += raw[s] / total;
                /* a NaN or Inf row stays NaN here too (a 0 would pass for a share) */
                r->shares_abs[base + s] += !isfinite(abs_total) ? NAN : abs_total > 0 ? absm[s] / abs_total : 0.0;
            }
            if (mi < 2)
                r->entropy[((size_t)mi * (size_t)L + (size_t)l) * (size_t)Hs + (size_t)h] +=
                    dfl_row_entropy(row, q + 1);
            if (mi == 2) {
                double neg = 0;
                for (int64_t j = 0; j <= q; j++)
                    neg += row[j] < 0 ? row[j] : 0;
                r->negative[(size_t)l * (size_t)Hs + (size_t)h] += neg;
            }
        }
    }
    /* a block's first head: the tiles the previous blocks completed, deflated meanwhile
     * inside this block's attention region (on_jobs), go to the file, freeing their slots */
    dfl_status s = DFL_OK;
    for (int mi = 0; mi < 3 && !s && h == 0; mi++)
        if (r->maps[mi]) s = dfl_dump_stream_pump(r->maps[mi], err);
    return s ? s : write_map_rows(r, b, src, err);
}

/* The map tiles queued so far, deflated by the attention's threads (forward.h attn_jobs):
 * jobs of map1, then map2, then diff. */
static int64_t on_jobs(void *user)
{
    sample_run *r = user;
    int64_t n = 0;
    for (int mi = 0; mi < 3; mi++) {
        r->job_base[mi] = n;
        n += r->maps[mi] ? dfl_dump_stream_jobs(r->maps[mi]) : 0;
    }
    r->job_base[3] = n;
    return n;
}

static void on_job(void *user, int thread, int64_t k)
{
    sample_run *r = user;
    int mi = 0;
    while (mi < 2 && k >= r->job_base[mi + 1])
        mi++;
    dfl_dump_stream_work(r->maps[mi], k - r->job_base[mi], thread);
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
        for (int k = 0; k < 4; k++)
            dfl_hist_merge(h, &acc[th].sub[k]);
        dfl_moments_merge(&mom, &acc[th].mom);
    }
    int32_t kept = dfl_topk_sorted(&all, r->sorted);
    for (int64_t i = 0; i < r->K; i++) {
        o->top[l * r->K + i] = i < kept ? r->sorted[i].value : NAN;
        for (int c = 0; c < o->nidx; c++)
            o->top_index[(l * r->K + i) * o->nidx + c] = i < kept ? r->sorted[i].idx[c] : -1;
    }
    memcpy(o->mom + l * 6, mom.m, sizeof mom.m);
}

/* Per-channel max |x| and count of |x| >= alpha over one row. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
channel_row(const float *x, int64_t D, float alpha, float *cmax, uint32_t *ccount)
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

/* DIFF V2: layer l's σ(λ) [T, H], kept for the sample's lambda dataset. */
static dfl_status on_lambda(void *user, int64_t l, const float *lam, int64_t T, int64_t H, dfl_error *err)
{
    (void)err;
    sample_run *r = user;
    memcpy(r->lambda + (size_t)l * (size_t)T * (size_t)H, lam, (size_t)T * (size_t)H * sizeof(float));
    return DFL_OK;
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
    if (r->hid_stream) {
        int64_t start[3] = {l, 0, 0}, count[3] = {1, T, D};
        dfl_status s = dfl_dump_stream_write_f32(r->hid_stream, start, count, x, D, err);
        if (s) return s;
    }
    return r->lens ? dfl__lens_hidden(r->lens, l, x, T, D, err) : DFL_OK;
}

/* nll[t] = −log softmax(logits[t])[tokens[t+1]] (NaN at T−1), argmax[t] (first max). */
static dfl_status on_logits(void *user, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err)
{
    sample_run *r = user;
    double lse[64];
    int finite = 1;
    for (int64_t i0 = 0; i0 < n; i0 += 64) {
        int64_t m = n - i0 < 64 ? n - i0 : 64;
        int ok;
        dfl_logsumexp_argmax(logits + i0 * V, m, V, lse, r->argmax + row0 + i0, &ok);
        finite = finite && ok;
        for (int64_t i = 0; i < m; i++) {
            int64_t t = row0 + i0 + i;
            r->nll[t] = t + 1 < r->T ? (float)(lse[i] - (double)logits[(i0 + i) * V + r->pr->tokens[t + 1]]) : NAN;
        }
    }
    if (r->bad_layer < 0 && !finite) note_nonfinite(r, r->L, "output logits");
    if (r->bad_layer >= 0 && r->p->strict) return strict_fail(r, err);
    dfl_status s = r->lens ? dfl__lens_logits(r->lens, row0, n, V, logits, err) : DFL_OK;
    if (!s && r->logit_stream) {
        int64_t start[2] = {row0, 0}, count[2] = {n, V};
        return dfl_dump_stream_write_f32(r->logit_stream, start, count, logits, V, err);
    }
    return s;
}

/* The readouts' own captures (probe_lens.c). */
static dfl_status on_embed(void *user, const float *x, int64_t T, int64_t D, dfl_error *err)
{
    return dfl__lens_embed(((sample_run *)user)->lens, x, T, D, err);
}

static dfl_status on_attn_out(void *user, int64_t l, const float *att, int64_t T, int64_t width, dfl_error *err)
{
    return dfl__lens_attn_out(((sample_run *)user)->lens, l, att, T, width, err);
}

static dfl_status on_mlp_out(void *user, int64_t l, const float *y, int64_t T, int64_t D, dfl_error *err)
{
    return dfl__lens_mlp_out(((sample_run *)user)->lens, l, y, T, D, err);
}

/* --quant-stats: the linear layers' inputs and q/k into the sample's dfl__qstats. */
static dfl_status on_linear(void *user, int64_t layer, int site, int64_t row0, int64_t n, int64_t width, const float *x,
                            int64_t ld, dfl_error *err)
{
    return dfl__qstats_linear(((sample_run *)user)->qstats, layer, site, row0, n, width, x, ld, err);
}

static dfl_status on_qk(void *user, int64_t layer, int64_t T, const float *q, int64_t nq, int64_t q_ld, const float *k,
                        int64_t nk, int64_t k_ld, int64_t hd, dfl_error *err)
{
    return dfl__qstats_qk(((sample_run *)user)->qstats, layer, T, q, nq, q_ld, k, nk, k_ld, hd, err);
}

dfl_capture dfl__probe_capture(sample_run *r)
{
    dfl_capture cap = {.user = r,
                       .want_maps = want_maps,
                       .attn_rows = on_attn,
                       .attn_jobs = on_jobs,
                       .attn_job = on_job,
                       .scores_rows = on_scores,
                       .layer_begin = on_layer,
                       .hidden = on_hidden,
                       .logits_rows = on_logits};
    if (r->m->config.type == DFL_MODEL_DIFF_V2) cap.lambda_rows = on_lambda;
    if (r->lens) {
        cap.embed = on_embed;
        cap.attn_out = on_attn_out;
        cap.mlp_out = on_mlp_out;
    }
    if (r->qstats) cap.linear_rows = on_linear, cap.qk_rows = on_qk;
    return cap;
}
