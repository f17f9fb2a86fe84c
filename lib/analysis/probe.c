/* probe.c — one pass over a prompt set: forward with capture, statistics, dump. */
#include "base/clock.h"
#include "analysis/probe.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/atomic.h"
#include "dump/dump.h"
#include "dump/dump_schema.h"
#include "model/forward.h"
#include "model/gguf_tok.h"
#include "model/model.h"
#include "text/prompts.h"
#include "text/tokenizer.h"
#include "analysis/probe_capture.h"
#include "analysis/probe_lens.h"
#include "analysis/probe_clip.h"
#include "analysis/probe_quant.h"
#include "analysis/probe_generate.h"
#include "analysis/probe_quantize.h"
#include "analysis/probe_effects.h"
#include "analysis/stats.h"

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
    p.generate.temperature = 1.0;
    p.generate.top_p = 1.0;
    p.generate.alternatives = 5;
    return p;
}

/* ----------------------------------------------------- sample set-up/out */

/* One buffer of a sample: where its pointer lives, its elements and their size, and
 * whether it starts zeroed (sums). */
typedef struct run_buffer {
    void **at;
    size_t n, size;
    int zeroed;
} run_buffer;

/* Every buffer run_alloc allocates and run_free frees, in one list; returns how many
 * (at most RUN_BUFFERS). all_rows, allocated only when every row is stored, is not
 * in it. */
#define RUN_BUFFERS 32
static size_t run_buffers(sample_run *r, run_buffer *b)
{
    size_t T = (size_t)r->T, L = (size_t)r->L, Hs = (size_t)r->Hs, K = (size_t)r->K, M = (size_t)r->M;
    size_t nth = (size_t)r->nthreads, D = (size_t)r->D, n4 = M * L * Hs * DFL_SHARE_SEGMENTS;
    const run_buffer list[] = {
        {(void **)&r->seg, T, 1, 0},
        {(void **)&r->share_seg, T, 1, 0},
        {(void **)&r->arows, T, sizeof(int64_t), 0},
        {(void **)&r->layer_pos, L, sizeof(int64_t), 0},
        {(void **)&r->head_pos, Hs, sizeof(int64_t), 0},
        {(void **)&r->noise_pos, Hs, sizeof(int64_t), 0},
        {(void **)&r->shares, n4, sizeof(double), 1},
        {(void **)&r->raw, n4, sizeof(double), 1},
        {(void **)&r->shares_abs, n4, sizeof(double), 1},
        {(void **)&r->entropy, 2 * L * Hs, sizeof(double), 1},
        {(void **)&r->negative, L * Hs, sizeof(double), 1},
        {(void **)&r->tacc, nth, sizeof(logit_acc), 1},
        {(void **)&r->hacc, 1, sizeof(logit_acc), 1},
        {(void **)&r->tstore, (nth + 1) * K, sizeof(dfl_topk_item), 0},
        {(void **)&r->sorted, (nth + 1) * K, sizeof(dfl_topk_item), 0},
        {(void **)&r->logits.top, L * K, sizeof(float), 0},
        {(void **)&r->logits.top_index, L * K * 4, sizeof(int32_t), 0},
        {(void **)&r->logits.hist, L * DFL_HIST_BINS, sizeof(uint64_t), 1},
        {(void **)&r->logits.mom, L * 6, sizeof(double), 1},
        {(void **)&r->hidden.top, L * K, sizeof(float), 0},
        {(void **)&r->hidden.top_index, L * K * 2, sizeof(int32_t), 0},
        {(void **)&r->hidden.hist, L * DFL_HIST_BINS, sizeof(uint64_t), 1},
        {(void **)&r->hidden.mom, L * 6, sizeof(double), 1},
        {(void **)&r->ch_absmax, L * D, sizeof(float), 1},
        {(void **)&r->ch_count, L * D, sizeof(uint32_t), 1},
        /* r->m is unset when run_free runs on a sample never started */
        {(void **)&r->lambda, r->m && r->m->config.type == DFL_MODEL_DIFF_V2 ? L * T * Hs : 0, sizeof(float), 0},
        {(void **)&r->nll, T, sizeof(float), 0},
        {(void **)&r->argmax, T, sizeof(int32_t), 0},
        {(void **)&r->bad_scores, nth, 1, 1},
    };
    _Static_assert(sizeof list / sizeof list[0] <= RUN_BUFFERS, "RUN_BUFFERS too small");
    memcpy(b, list, sizeof list);
    return sizeof list / sizeof list[0];
}

static void run_free(sample_run *r)
{
    for (int i = 0; i < 3; i++)
        dfl_dump_stream_close(r->maps[i]);
    dfl_dump_stream_close(r->logit_stream);
    dfl_dump_stream_close(r->hid_stream);
    dfl__qstats_free(r->qstats);
    dfl__gen_free(r);
    run_buffer b[RUN_BUFFERS];
    size_t n = run_buffers(r, b);
    for (size_t i = 0; i < n; i++)
        free(*b[i].at);
    free(r->all_rows);
}

static dfl_status run_alloc(sample_run *r, dfl_error *err)
{
    run_buffer b[RUN_BUFFERS];
    size_t n = run_buffers(r, b);
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        *b[i].at = b[i].zeroed ? dfl__calloc_array(b[i].n, b[i].size) : dfl__alloc_array(b[i].n, b[i].size);
        ok &= *b[i].at != NULL;
    }
    r->bad_layer = -1;
    r->logits.nidx = 4;
    r->hidden.nidx = 2;
    if (!ok) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a sample of %lld tokens", (long long)r->T);
    return DFL_OK;
}

/* Resolve the map selection against this model and sample; DFL_ERR_USAGE when it
 * names a layer, head or row that is not there. */
static dfl_status resolve_selection(sample_run *r, dfl_error *err)
{
    const dfl_map_select *sel = &r->p->maps;
    for (int64_t l = 0; l < r->L; l++)
        r->layer_pos[l] = sel->layers ? -1 : l;
    for (int64_t h = 0; h < r->Hs; h++)
        r->head_pos[h] = sel->heads ? -1 : h;
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
        for (int64_t t = 0; t < r->T; t++)
            r->all_rows[t] = t;
        r->rows = r->all_rows;
        r->R = r->T;
    }
    return DFL_OK;
}

static dfl_status put_i64_as_i32(dfl_dump *d, const char *name, const int64_t *v, int64_t n, dfl_error *err)
{
    int32_t *b = dfl__alloc_array((size_t)n, sizeof *b);
    if (!b) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++)
        b[i] = v ? (int32_t)v[i] : (int32_t)i;
    dfl_status s = dfl_dump_put(d, name, DFL_H5_I32, 1, &n, b, err);
    free(b);
    return s;
}

/* Where each head writes map2 (r->noise_pos): its own position, or under Motif GDA the
 * position of its noise group among the stored heads' groups, written by the group's
 * first stored head only (the others compute the same map); the groups go to
 * attn/noise_groups, their count to *groups. */
static dfl_status noise_positions(sample_run *r, dfl_dump *d, int64_t *groups, dfl_error *err)
{
    const dfl_config *c = &r->m->config;
    for (int64_t h = 0; h < r->Hs; h++)
        r->noise_pos[h] = r->head_pos[h];
    if (dfl_config_noise_group(c, 0) < 0) return DFL_OK;
    int32_t *ids = dfl__alloc_array((size_t)r->Hs, sizeof *ids);
    if (!ids) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    int64_t n = 0;
    /* stored heads in dump order (head_pos ascending): groups ascend with them */
    for (int64_t pos = 0; pos < r->Hs; pos++)
        for (int64_t h = 0; h < r->Hs; h++) {
            if (r->head_pos[h] != pos) continue;
            int32_t g = (int32_t)dfl_config_noise_group(c, h);
            int fresh = n == 0 || ids[n - 1] != g;
            if (fresh) ids[n++] = g;
            r->noise_pos[h] = fresh ? n - 1 : -1;
        }
    *groups = n;
    dfl_status s = dfl_dump_put(d, DFL_DS_ATTN_NOISE_GROUPS, DFL_H5_I32, 1, &n, ids, err);
    free(ids);
    return s;
}

/* attn/map1 (+ map2, diff) [Ls, Hs', R, T] with their dimension scales. */
static dfl_status create_map_streams(sample_run *r, dfl_dump *d, dfl_error *err)
{
    const dfl_map_select *sel = &r->p->maps;
    int64_t Ls = sel->layers ? (int64_t)sel->n_layers : r->L, Hsel = sel->heads ? (int64_t)sel->n_heads : r->Hs;
    dfl_status s;
    if ((s = put_i64_as_i32(d, DFL_DS_ATTN_LAYERS, sel->layers, Ls, err)) ||
        (s = put_i64_as_i32(d, DFL_DS_ATTN_HEADS, sel->heads, Hsel, err)) ||
        (s = put_i64_as_i32(d, DFL_DS_ATTN_ROWS, r->rows, r->R, err)) ||
        (s = put_i64_as_i32(d, DFL_DS_ATTN_KEYS, NULL, r->keys, err)))
        return s;
    static const char *names[3] = {DFL_DS_ATTN_MAP1, DFL_DS_ATTN_MAP2, DFL_DS_ATTN_DIFF};
    static const char *scales[4] = {DFL_DS_ATTN_LAYERS, DFL_DS_ATTN_HEADS, DFL_DS_ATTN_ROWS, DFL_DS_ATTN_KEYS};
    static const char *labels[4] = {"layer", "head", "query", "key"};
    /* Tiles of MAP_TILE_ROWS x MAP_TILE_KEYS: tiles wholly in the masked future are never
     * written, so they take no space and cost readers nothing to decompress. */
    int64_t dims[4] = {Ls, Hsel, r->R, r->keys}, groups = Hsel;
    if ((s = noise_positions(r, d, &groups, err))) return s;
    int64_t chunk[4] = {1, 1, r->R < MAP_TILE_ROWS ? r->R : MAP_TILE_ROWS,
                        r->keys < MAP_TILE_KEYS ? r->keys : MAP_TILE_KEYS};
    /* Tiles are assembled in memory and compressed by background threads while the
     * forward goes on. A block of rows reaches every head and may end inside a tile row:
     * two tile rows of every head are being filled, and as many again may wait for
     * their compression. */
    dfl_dump_direct opt = dfl_dump_direct_default();
    opt.gzip = r->p->map_gzip;
    opt.open_rows = 4 * Hsel;
    static const char *gscales[4] = {DFL_DS_ATTN_LAYERS, DFL_DS_ATTN_NOISE_GROUPS, DFL_DS_ATTN_ROWS, DFL_DS_ATTN_KEYS};
    static const char *glabels[4] = {"layer", "noise_group", "query", "key"};
    for (int i = 0; i < r->M; i++) {
        int grouped = i == 1 && dfl_config_noise_group(&r->m->config, 0) >= 0; /* map2 of Motif GDA */
        int64_t di[4] = {dims[0], grouped ? groups : dims[1], dims[2], dims[3]};
        if ((s = dfl_dump_stream_create_direct(d, names[i], r->p->map_f16 ? DFL_H5_F16 : DFL_H5_F32, 4, di, chunk, &opt,
                                               &r->maps[i], err)))
            return s;
        if ((s = dfl_dump_attach_scales(d, names[i], 4, grouped ? gscales : scales, grouped ? glabels : labels, err)))
            return s;
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
    static const char *names[3] = {DFL_DS_NOISE_SHARES, DFL_DS_NOISE_RAW, DFL_DS_NOISE_SHARES_ABS};
    dfl_status s = DFL_OK;
    for (int k = 0; k < 3 && !s; k++) {
        for (size_t i = 0; i < n4; i++)
            buf[i] = (float)(src[k][i] * inv);
        s = dfl_dump_put(d, names[k], DFL_H5_F32, 4, d4, buf, err);
    }
    for (size_t i = 0; i < ne && !s; i++)
        buf[i] = (float)(r->entropy[i] * inv);
    if (!s) s = dfl_dump_put(d, DFL_DS_NOISE_ENTROPY, DFL_H5_F32, 3, d3, buf, err);
    if (!s && r->M == 3) {
        for (size_t i = 0; i < nn; i++)
            buf[i] = (float)(r->negative[i] * inv);
        s = dfl_dump_put(d, DFL_DS_NOISE_NEGATIVE_MASS, DFL_H5_F32, 2, d2, buf, err);
    }
    free(buf);
    if (s) return s;
    int64_t n = (int64_t)r->n_arows;
    char segs[160] = "";
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++)
        snprintf(segs + strlen(segs), sizeof segs - strlen(segs), "%s%s", k ? "," : "", dfl_share_name(k));
    if ((s = put_i64_as_i32(d, DFL_DS_NOISE_ROWS, r->arows, n, err)) ||
        (s = dfl_dump_attr_str(d, DFL_DS_NOISE, DFL_ATTR_SEGMENTS, segs, err)) ||
        (s = dfl_dump_attr_str(d, DFL_DS_NOISE, DFL_ATTR_MAPS, r->M == 3 ? "map1,map2,diff" : "map1", err)) ||
        (s = dfl_dump_attr_str(d, DFL_DS_NOISE, DFL_ATTR_ROWS_RULE, dfl_rows_rule_name(r->p->rows), err)))
        return s;
    return DFL_OK;
}

/* The dataset paths of one kind of outlier statistics. */
typedef struct outlier_paths {
    const char *top, *top_index, *hist, *moments;
} outlier_paths;

static dfl_status write_outlier_set(sample_run *r, dfl_dump *d, const outlier_paths *name, const outlier_out *o,
                                    dfl_error *err)
{
    static double edges[DFL_HIST_BINS + 1];
    dfl_hist_edges(edges);
    int64_t dk[2] = {r->L, r->K}, di[3] = {r->L, r->K, o->nidx}, dh[2] = {r->L, DFL_HIST_BINS}, dm[2] = {r->L, 6};
    dfl_status s;
    /* NaN / -1 padded for short prompts: deflated (exact) */
    if ((s = dfl_dump_put_deflated(d, name->top, DFL_H5_F32, 2, dk, o->top, err))) return s;
    if ((s = dfl_dump_put_deflated(d, name->top_index, DFL_H5_I32, 3, di, o->top_index, err))) return s;
    /* mostly zeros: deflated, exact */
    if ((s = dfl_dump_put_deflated(d, name->hist, DFL_H5_U64, 2, dh, o->hist, err))) return s;
    if ((s = dfl_dump_attr_f64(d, name->hist, DFL_ATTR_EDGES, edges, DFL_HIST_BINS + 1, err)) ||
        (s = dfl_dump_attr_i64(d, name->hist, DFL_ATTR_MIN_EXPONENT, DFL_HIST_MIN_EXP, err)) ||
        (s = dfl_dump_attr_i64(d, name->hist, DFL_ATTR_MAX_EXPONENT, DFL_HIST_MAX_EXP, err)) ||
        (s = dfl_dump_attr_i64(d, name->hist, DFL_ATTR_SUB_BINS, DFL_HIST_SUB, err)) ||
        (s = dfl_dump_attr_str(d, name->hist, DFL_ATTR_BINS,
                               "bin 0: |x| < 2^min_exponent (zeros); bin 1 + (e - min_exponent)*sub_bins + k: "
                               "[2^e (1 + k/sub_bins), 2^e (1 + (k+1)/sub_bins)); last bin: |x| >= 2^max_exponent "
                               "or NaN; edges[i] is the lower edge of bin i",
                               err)))
        return s;
    if ((s = dfl_dump_put(d, name->moments, DFL_H5_F64, 2, dm, o->mom, err))) return s;
    return dfl_dump_attr_str(d, name->moments, DFL_ATTR_COLUMNS, "count,sum_x,sum_x2,sum_x3,sum_x4,max_abs", err);
}

static dfl_status write_outliers(sample_run *r, dfl_dump *d, dfl_error *err)
{
    static const outlier_paths logits = {DFL_DS_LOGITS_TOP, DFL_DS_LOGITS_TOP_INDEX, DFL_DS_LOGITS_HIST,
                                         DFL_DS_LOGITS_MOMENTS};
    static const outlier_paths hidden = {DFL_DS_HIDDEN_TOP, DFL_DS_HIDDEN_TOP_INDEX, DFL_DS_HIDDEN_HIST,
                                         DFL_DS_HIDDEN_MOMENTS};
    dfl_status s;
    if ((s = write_outlier_set(r, d, &logits, &r->logits, err)) ||
        (s = write_outlier_set(r, d, &hidden, &r->hidden, err)))
        return s;
    if ((s = dfl_dump_attr_str(d, DFL_DS_LOGITS_TOP_INDEX, DFL_ATTR_COLUMNS, "head,map,query,key", err)) ||
        (s = dfl_dump_attr_str(d, DFL_DS_HIDDEN_TOP_INDEX, DFL_ATTR_COLUMNS, "token,channel", err)))
        return s;
    int64_t dd[2] = {r->L, r->D};
    if ((s = dfl_dump_put(d, DFL_DS_HIDDEN_CHANNEL_ABSMAX, DFL_H5_F32, 2, dd, r->ch_absmax, err)) ||
        (s = dfl_dump_put(d, DFL_DS_HIDDEN_CHANNEL_COUNT, DFL_H5_U32, 2, dd, r->ch_count, err)))
        return s;
    return dfl_dump_attr_f64(d, DFL_DS_HIDDEN_CHANNEL_COUNT, DFL_ATTR_ALPHA, &r->p->alpha, 1, err);
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
    dfl_status s = dfl_dump_put(d, DFL_DS_TARGET_CORRECT, DFL_H5_U8, 0, NULL, &c, err);
    return s ? s : dfl_dump_put(d, DFL_DS_TARGET_NLL, DFL_H5_F32, 0, NULL, &mean, err);
}

/* A text prompt's character offsets per token and its input text. */
static dfl_status put_text_extras(dfl_dump *d, const dfl_prompt *pr, dfl_error *err)
{
    dfl_status s = DFL_OK;
    if (pr->offsets) {
        int64_t dims[2] = {(int64_t)pr->n_tokens, 2};
        s = dfl_dump_put(d, DFL_DS_TOKEN_OFFSETS, DFL_H5_I32, 2, dims, pr->offsets, err);
    }
    if (!s && pr->input)
        s = dfl_dump_put_text(d, DFL_DS_INPUT, pr->input, pr->input_len ? pr->input_len : strlen(pr->input), err);
    return s;
}

static dfl_status run_sample(const dfl_probe_params *p, const dfl_model *m, dfl_dump *d, const dfl_prompt *pr,
                             sample_run *r, dfl_probe_report *rep, dfl__effects *fx, dfl_error *err)
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
    if ((s = dfl__gen_begin(r, err))) return s; /* generated rows join the maps */

    if ((s = dfl_dump_sample_begin(d, r->index, pr->id, pr->has_depth ? pr->depth : NAN, err))) return s;
    if ((s = dfl_dump_put(d, DFL_DS_TOKENS, DFL_H5_I32, 1, &T, pr->tokens, err))) return s;
    if ((s = dfl_dump_put(d, DFL_DS_SEGMENTS, DFL_H5_U8, 1, &T, r->seg, err))) return s;
    if (pr->text && (s = dfl_dump_put_strings(d, DFL_DS_TOKEN_TEXT, (const char *const *)pr->text, pr->n_tokens, err)))
        return s;
    if ((s = put_text_extras(d, pr, err))) return s;
    if (p->maps.enabled && (s = create_map_streams(r, d, err))) return s;
    if (p->save_logits) {
        int64_t dims[2] = {T, c->vocab_size}, chunk[2] = {T < 16 ? T : 16, c->vocab_size};
        dfl_h5_type type = p->save_logits == 2 ? DFL_H5_F16 : DFL_H5_F32;
        if ((s = dfl_dump_stream_create(d, DFL_DS_LOGITS, type, 2, dims, chunk, 0, 0, &r->logit_stream, err))) return s;
    }
    if (p->save_hidden) {
        int64_t dims[3] = {r->L, T, c->hidden_size}, chunk[3] = {1, T < 64 ? T : 64, c->hidden_size};
        dfl_h5_type type = p->save_hidden == 2 ? DFL_H5_F16 : DFL_H5_F32;
        if ((s = dfl_dump_stream_create(d, DFL_DS_HIDDEN, type, 3, dims, chunk, 0, 0, &r->hid_stream, err))) return s;
    }

    if (p->quant_stats && !(r->qstats = dfl__qstats_create(r->L)))
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for --quant-stats");
    if ((s = dfl__lens_begin(p, m, pr, r->arows, r->n_arows, &r->lens, err))) return s;
    dfl_capture cap = dfl__probe_capture(r);
    dfl_forward_opts fo = p->forward;
    fo.iv = dfl__effects_applied(fx); /* --apply: the main pass of the modified model */
    double t0 = dfl_clock_seconds();
    s = dfl__gen_forward(r, &fo, &cap, rep, err); /* dfl_forward, or the prompt and the generation */
    for (int i = 0; i < 3 && !s; i++)
        if (r->maps[i]) s = dfl_dump_stream_flush(r->maps[i], err);
    rep->forward_seconds += dfl_clock_seconds() - t0;
    if (!s) s = dfl__lens_write(r->lens, d, err);
    dfl__lens_free(r->lens);
    r->lens = NULL;
    if (s) return s;
    if ((s = dfl_dump_put(d, DFL_DS_NLL, DFL_H5_F32, 1, &T, r->nll, err)) ||
        (s = dfl_dump_put(d, DFL_DS_ARGMAX, DFL_H5_I32, 1, &T, r->argmax, err)) ||
        (s = write_targets(r, d, rep, err)) || (s = write_noise(r, d, err)) || (s = write_outliers(r, d, err)) ||
        (r->qstats && (s = dfl__qstats_write(r->qstats, d, err))) || (s = dfl__gen_write(r, d, rep, err)))
        return s;
    if (fx && (s = dfl__effects_sample(fx, d, r->index, err))) return s;
    if (c->type == DFL_MODEL_DIFF_V2) {
        int64_t dims[3] = {r->L, T, r->Hs};
        if ((s = dfl_dump_put(d, DFL_DS_LAMBDA, DFL_H5_F32, 3, dims, r->lambda, err))) return s;
    }
    if (r->bad_layer >= 0) {
        if ((s = dfl_dump_attr_i64(d, ".", DFL_ATTR_NONFINITE_LAYER, r->bad_layer, err)) ||
            (s = dfl_dump_attr_str(d, ".", DFL_ATTR_NONFINITE_SITE, r->bad_site, err)))
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
            return dfl__fail(err, DFL_ERR_USAGE,
                             "prompt subset: index %zu (position %zu) is out of order or "
                             "beyond the %zu prompts",
                             p->subset[k], k, count);
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
    for (size_t i = 0; i < ps->count && !need; i++)
        need = ps->items[i].n_tokens == 0;
    if (!need) return DFL_OK;
    dfl_tokenizer *t = NULL;
    const char *path = p->tokenizer_path ? p->tokenizer_path : p->model_dir;
    if ((s = dfl_model_tokenizer_open(path, &t, err))) {
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
            if (!ids) {
                s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
                break;
            }
            for (size_t k = 0; k < pr->n_tokens; k++)
                ids[k] = (uint32_t)pr->tokens[k];
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
            for (size_t t = 0; t < pr->n_tokens; t++)
                b += 16 + (pr->text[t] ? (double)strlen(pr->text[t]) : 0);
        if (sel->enabled) {
            int64_t n = (int64_t)pr->n_tokens, R = n, *rows = NULL;
            if (sel->rows == DFL_MAP_ROWS_LIST)
                for (R = 0; R < (int64_t)sel->n_rows && sel->row_list[R] < n;)
                    R++; /* sorted: rows past T go */
            if (sel->rows == DFL_MAP_ROWS_ANALYSIS && (rows = dfl__alloc_array(pr->n_tokens, sizeof *rows)))
                R = dfl_analysis_rows(pr, p->rows, rows);
            const int64_t *which = sel->rows == DFL_MAP_ROWS_LIST ? sel->row_list : rows;
            if (sel->rows == DFL_MAP_ROWS_ANALYSIS && !rows) which = NULL, R = n; /* no memory: all rows bound it */
            b += M * Ls * Hm * map_tile_bytes(which, R, n, p->map_f16 ? 2 : 4);
            free(rows);
        }
        if (p->save_logits) b += T * V * (p->save_logits == 2 ? 2 : 4);
        if (p->save_hidden) b += L * T * D * (p->save_hidden == 2 ? 2 : 4);
        /* readouts: the lens of every layer and position; DLA at most every row */
        if (p->lens_topk) b += (L + 1) * T * (8.0 * p->lens_topk + 8);
        if (p->dla) b += T * (L * Hs + L + 8) * 4;
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

dfl_status dfl_probe_check_out(const dfl_probe_params *p, dfl_error *err)
{
    struct stat st;
    if (stat(p->out_path, &st) == 0 && S_ISDIR(st.st_mode))
        return dfl__fail(err, DFL_ERR_USAGE, "%s: %s; --out names the dump file to write", p->out_path,
                         strerror(EISDIR));
    const char *inputs[3] = {p->prompts_path, p->model_dir, p->tokenizer_path};
    dfl_status s = dfl__check_not_input(p->out_path, inputs, 3, err);
    if (!s) s = dfl__check_overwrite(p->out_path, p->overwrite, err);
    /* a file can be created beside it (the folder exists, is writable, is not on a
     * read-only file system, no other process is writing the same dump): the dump's
     * own temporary, made and removed at once */
    char *tmp = NULL;
    if (!s) s = dfl__make_tmp(p->out_path, &tmp, err);
    if (tmp) dfl__discard_tmp(tmp);
    free(tmp);
    return s;
}

dfl_status dfl_probe_run(const dfl_probe_params *p, dfl_probe_report *report, dfl_error *err)
{
    /* DiffCLIP / CLIP: image prompts and a dump of their own (probe_clip.c) */
    if (p->model_dir && dfl__probe_is_clip(p->model_dir)) return dfl__probe_clip_run(p, report, err);
    dfl_model *m = NULL;
    dfl_prompt_set ps = {NULL, 0};
    dfl_dump *d = NULL;
    dfl__gen_ctx *gen = NULL;
    dfl__effects *fx = NULL;
    dfl_probe_report rep;
    memset(&rep, 0, sizeof rep);
    dfl_status s = DFL_OK;
    if (p->topk < 1 || p->topk > DFL_TOPK_MAX)
        s = dfl__fail(err, DFL_ERR_USAGE, "--topk must be in [1, %d]", DFL_TOPK_MAX);
    /* Cheap checks first: a bad output or bad prompts fail before the load. */
    if (!s) s = dfl_probe_check_out(p, err);
    if (!s) s = dfl_probe_read_prompts(p, &ps, err);
    dfl_load_opts lo = {p->allow_unused};
    if (!s) s = dfl_model_load_opts(p->model_dir, &lo, &m, err);
    if (!s) s = dfl_quant_model(m, p->forward.quant, err); /* --quantize: weights once, at load */
    if (s) goto done;

    const dfl_config *c = &m->config;
    if (p->warn && m->n_unused) {
        char msg[480];
        int n = snprintf(msg, sizeof msg, "%s: %zu checkpoint tensor%s not used:", p->model_dir, m->n_unused,
                         m->n_unused == 1 ? " is" : "s are");
        for (size_t i = 0; i < m->n_unused && n > 0 && (size_t)n < sizeof msg - 80; i++)
            n += snprintf(msg + n, sizeof msg - (size_t)n, "%s '%s'", i ? "," : "", m->unused[i]);
        if (n > 0 && (size_t)n >= sizeof msg - 80)
            snprintf(msg + sizeof msg - 80, 80, ", ... (%zu in all)", m->n_unused);
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
    for (size_t k = 0; k < n_run; k++)
        rep.tokens += (int64_t)ps.items[p->subset ? p->subset[k] : k].n_tokens;
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
    if ((s = dfl_dump_attr_i64(d, ".", DFL_ATTR_TOPK, p->topk, err))) goto done;
    if ((s = dfl__gen_ctx_open(p, m, &ps, &gen, err))) goto done;
    if ((s = dfl__probe_quant_attrs(d, p->forward.quant, err))) goto done;
    if ((s = dfl__effects_open(p->effects, m, &ps, p->model_dir, p->tokenizer_path, &p->forward, p->save_logits,
                               p->cancel, &fx, err)))
        goto done;
    if (fx && (s = dfl_dump_attr_str(d, ".", DFL_ATTR_INTERVENTIONS, dfl__effects_json(fx), err))) goto done;
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
        r.gen_ctx = gen;
        s = p->cancel && *p->cancel ? dfl__fail(err, DFL_ERR_CANCELLED, "cancelled")
                                    : run_sample(p, m, d, &ps.items[i], &r, &rep, fx, err);
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
        dfl_probe_progress pg = {
            n_run, n_run, c->num_layers, c->num_layers, done_tokens, rep.tokens, dfl_clock_seconds() - start};
        p->progress(p->user, &pg);
    }
    rep.samples = n_run;
    if (p->warn && rep.nonfinite_samples > 1) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "%zu of %zu samples have non-finite values (attributes nonfinite_layer, nonfinite_site)",
                 rep.nonfinite_samples, n_run);
        p->warn(p->user, msg);
    }
    if ((s = dfl_dump_attr_i64(d, ".", DFL_ATTR_NONFINITE_SAMPLES, (int64_t)rep.nonfinite_samples, err))) goto done;
    s = dfl_dump_finish(d, err);
    d = NULL;
done:
    dfl_dump_abort(d);
    dfl__gen_ctx_close(gen);
    dfl__effects_free(fx);
    dfl_model_free(m);
    dfl_prompt_set_free(&ps);
    if (report) *report = rep;
    return s;
}
