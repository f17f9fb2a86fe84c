/* probe_lens.c — the logit lens and direct logit attribution of one sample, filled by
 * the forward pass's captures (probe_lens.h) and written into the sample's group.
 *
 * DLA convention (docs/probe.md "direct logit attribution"). The final residual at row r
 * is a sum of parts: x = e + pos + Σ_l (Σ_h a_lh + b_o,l) + Σ_l m_l (e the token
 * embedding, scaled for Gemma; pos GPT-2's learned position; a_lh head h's columns of the
 * attention output through its columns of o_proj; b_o,l o_proj's bias; m_l the MLP's
 * output without its bias b_down,l). The logit of token y is u·N(x) with u = W_U[y]
 * (or W_U[A] − W_U[B]). With the norm's scale s frozen at its clean value, N is linear:
 * RMSNorm N(x) = g ⊙ x / s, s = √(mean(x²) + ε); LayerNorm N(x) = g ⊙ (x − mean(x)) / s
 * + β, s = √(var(x) + ε), the centring applied to each part (c − mean(c)). A part c
 * contributes (u ⊙ g)·c / s (centred for LayerNorm); the embedding, the heads and the
 * MLPs get their own terms, the biases (b_o, b_down, pos, and u·β) one term; the terms
 * sum to the logit before the final soft-cap. Post-norms of the attention output
 * (Gemma, OLMo 2: x += n(Σ_h a_lh)) are not linear either: their scale is frozen at its
 * clean value too, so head h contributes g_n ⊙ a_lh / s_n. */
#include "analysis/probe_lens.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_schema.h"
#include "model/family.h"
#include "model/kernels.h"
#include "model/kernels_norm.h"

#define LENS_ROWS 64 /* rows decoded at once: [LENS_ROWS, V] logits */

struct dfl__lens {
    const dfl_model *m;
    const int32_t *tokens;
    int64_t T, L, H, D, V, width, K;
    int layernorm; /* the final norm is a LayerNorm (GPT-2, GPT-NeoX) */
    int conv1d;    /* o_proj stored [in, out] (GPT-2) */
    int biases;    /* the blocks add o_proj and MLP output biases (GPT-2, GPT-NeoX) */
    float *scratch;
    size_t scratch_n;
    /* logit lens: index 0 the embedding, 1 + l layer l */
    int32_t *top_ids; /* [L+1, T, K] */
    float *top_prob;  /* [L+1, T, K] */
    int32_t *rank;    /* [L+1, T] */
    float *tprob;     /* [L+1, T] */
    float *xn;        /* [LENS_ROWS, D] */
    float *logits;    /* [LENS_ROWS, V] */
    /* direct logit attribution at rows[R] */
    int dla;
    int diff; /* direction W_U[A] − W_U[B] */
    int32_t ab[2];
    size_t R;
    const int64_t *rows;
    int32_t *target;  /* [R] the token whose logit is attributed, −1 none (no next token) */
    float *dir;       /* [R, D] u ⊙ g */
    double *dir_sum;  /* [R] Σ_i (u ⊙ g)_i, for the LayerNorm centring */
    double *heads;    /* [R, L, H, 2] per part: (u ⊙ g)·c and Σ c */
    double *mlp;      /* [R, L, 2] */
    double *embed;    /* [R, 2] */
    double *bias;     /* [R, 2] */
    double *bias_out; /* [R] u·β, after the norm (not scaled) */
    double *scale;    /* [R] the final norm's clean scale s */
    float *logit;     /* [R] the model's logit (difference) before the final soft-cap */
    float *abuf;      /* [H+1, width] row r's attention output: whole, then each head alone */
    float *ybuf;      /* [H+1, D] those through o_proj */
    float *vec;       /* [D] */
};

/* ------------------------------------------------------------ set-up */

void dfl__lens_free(dfl__lens *ln)
{
    if (!ln) return;
    void *all[] = {ln->scratch,  ln->top_ids, ln->top_prob, ln->rank,  ln->tprob, ln->xn,    ln->logits,
                   ln->target,   ln->dir,     ln->dir_sum,  ln->heads, ln->mlp,   ln->embed, ln->bias,
                   ln->bias_out, ln->scale,   ln->logit,    ln->abuf,  ln->ybuf,  ln->vec};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
    free(ln);
}

/* n·size bytes, overflow-checked; sets *ok to 0 on failure. */
static void *grab(size_t n, size_t size, int zeroed, int *ok)
{
    void *p = zeroed ? dfl__calloc_array(n ? n : 1, size) : dfl__alloc_array(n ? n : 1, size);
    if (!p) *ok = 0;
    return p;
}

/* u[D] = W_U[y], or W_U[A] − W_U[B]; then dir = u ⊙ g. */
static void direction(dfl__lens *ln, size_t k, int32_t y)
{
    const dfl_model *m = ln->m;
    float *d = ln->dir + k * (size_t)ln->D;
    if (ln->diff) {
        dfl_wmat_rows(&m->lm_head, ln->ab[0], 1, d);
        dfl_wmat_rows(&m->lm_head, ln->ab[1], 1, ln->vec);
        for (int64_t i = 0; i < ln->D; i++)
            d[i] -= ln->vec[i];
    } else {
        dfl_wmat_rows(&m->lm_head, y, 1, d);
    }
    double sum = 0, out = 0;
    for (int64_t i = 0; i < ln->D; i++) {
        if (m->final_norm_b) out += (double)d[i] * (double)m->final_norm_b[i];
        if (m->final_norm) d[i] *= m->final_norm[i];
        sum += d[i];
    }
    ln->dir_sum[k] = sum;
    ln->bias_out[k] = out;
}

dfl_status dfl__lens_begin(const dfl_probe_params *p, const dfl_model *m, const dfl_prompt *pr, const int64_t *arows,
                           size_t n_arows, dfl__lens **out, dfl_error *err)
{
    *out = NULL;
    if (!p->lens_topk && !p->dla) return DFL_OK;
    const dfl_config *c = &m->config;
    if (p->lens_topk < 0 || p->lens_topk > c->vocab_size)
        return dfl__fail(err, DFL_ERR_USAGE, "--logit-lens %d: K must be in [1, %lld] (the vocabulary)",
                         (int)p->lens_topk, (long long)c->vocab_size);
    for (int i = 0; p->logit_diff_set && i < 2; i++)
        if (p->logit_diff[i] < 0 || p->logit_diff[i] >= c->vocab_size)
            return dfl__fail(err, DFL_ERR_USAGE, "--logit-diff: token %d is outside the vocabulary [0, %lld)",
                             (int)p->logit_diff[i], (long long)c->vocab_size);
    dfl__lens *ln = calloc(1, sizeof *ln);
    if (!ln) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    const dfl__family *fam = dfl__family_of(c);
    dfl__attn_shape sh = dfl__attn_shape_of(c);
    ln->m = m;
    ln->tokens = pr->tokens;
    ln->T = (int64_t)pr->n_tokens;
    ln->L = c->num_layers;
    ln->H = sh.heads;
    ln->D = c->hidden_size;
    ln->V = c->vocab_size;
    ln->width = sh.att_ld;
    ln->K = p->lens_topk;
    ln->layernorm = fam->norm == DFL__NORM_LAYER;
    ln->conv1d = fam->layout == DFL__LAYOUT_GPT2;
    ln->biases = fam->layout != DFL__LAYOUT_LLAMA;
    ln->dla = p->dla;
    ln->diff = p->logit_diff_set;
    ln->ab[0] = p->logit_diff[0];
    ln->ab[1] = p->logit_diff[1];
    ln->R = n_arows;
    ln->rows = arows;
    size_t T = (size_t)ln->T, L1 = (size_t)ln->L + 1, K = (size_t)ln->K, D = (size_t)ln->D, R = ln->R;
    size_t LH = (size_t)ln->L * (size_t)ln->H, H1 = (size_t)ln->H + 1, n = 0;
    int ok = 1;
    ln->scratch_n = dfl_matmul_scratch(ln->width > ln->D ? ln->width : ln->D);
    ln->scratch = grab(ln->scratch_n, sizeof(float), 0, &ok);
    ln->vec = grab(D, sizeof(float), 0, &ok);
    if (ln->K) {
        ok = ok && dfl__mul_ok(L1 * T, K, &n);
        ln->top_ids = grab(n, sizeof(int32_t), 0, &ok);
        ln->top_prob = grab(n, sizeof(float), 0, &ok);
        ln->rank = grab(L1 * T, sizeof(int32_t), 0, &ok);
        ln->tprob = grab(L1 * T, sizeof(float), 0, &ok);
        ln->xn = grab(LENS_ROWS * D, sizeof(float), 0, &ok);
        ok = ok && dfl__mul_ok(LENS_ROWS, (size_t)ln->V, &n);
        ln->logits = grab(n, sizeof(float), 0, &ok);
    }
    if (ln->dla) {
        ln->target = grab(R, sizeof(int32_t), 0, &ok);
        ln->dir = grab(R * D, sizeof(float), 0, &ok);
        ln->dir_sum = grab(R, sizeof(double), 1, &ok);
        ln->heads = grab(R * LH * 2, sizeof(double), 1, &ok);
        ln->mlp = grab(R * (size_t)ln->L * 2, sizeof(double), 1, &ok);
        ln->embed = grab(R * 2, sizeof(double), 1, &ok);
        ln->bias = grab(R * 2, sizeof(double), 1, &ok);
        ln->bias_out = grab(R, sizeof(double), 1, &ok);
        ln->scale = grab(R, sizeof(double), 1, &ok);
        ln->logit = grab(R, sizeof(float), 0, &ok);
        ok = ok && dfl__mul_ok(H1, (size_t)ln->width, &n);
        ln->abuf = grab(n, sizeof(float), 0, &ok);
        ln->ybuf = grab(H1 * D, sizeof(float), 0, &ok);
    }
    if (!ok) {
        dfl__lens_free(ln);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for the readouts of a sample of %zu tokens", T);
    }
    for (size_t k = 0; ln->dla && k < R; k++) {
        int64_t r = arows[k];
        ln->target[k] = ln->diff ? -1 : r + 1 < ln->T ? pr->tokens[r + 1] : -1;
        ln->logit[k] = NAN;
        if (ln->diff || ln->target[k] >= 0) direction(ln, k, ln->target[k]);
    }
    *out = ln;
    return DFL_OK;
}

/* 1 when row k has a direction (a next token, or --logit-diff). */
static int has_dir(const dfl__lens *ln, size_t k)
{
    return ln->diff || ln->target[k] >= 0;
}

/* Part c[D] of row k into acc[2]: (u ⊙ g)·c and Σ c (double). */
static void project(const dfl__lens *ln, size_t k, const float *c, double *acc)
{
    const float *d = ln->dir + k * (size_t)ln->D;
    double a = 0, b = 0;
    for (int64_t i = 0; i < ln->D; i++) {
        a += (double)d[i] * (double)c[i];
        b += c[i];
    }
    acc[0] += a;
    acc[1] += b;
}

/* ------------------------------------------------------------ logit lens */

/* Rows x[n, D] (positions t0…) of lens layer index li: final norm, LM head, soft-cap,
 * then the top K and the next token's rank and probability of each row. */
static void lens_rows(dfl__lens *ln, int64_t li, int64_t t0, int64_t n, const float *x)
{
    const dfl_model *m = ln->m;
    const dfl_config *c = &m->config;
    const int64_t V = ln->V, K = ln->K;
    if (ln->layernorm)
        dfl_layernorm(ln->xn, x, m->final_norm, m->final_norm_b, n, ln->D, (float)c->rms_norm_eps);
    else
        dfl_rmsnorm(ln->xn, x, m->final_norm, n, ln->D, (float)c->rms_norm_eps, 1.0f);
    dfl_matmul_wmat(ln->logits, ln->xn, &m->lm_head, n, ln->scratch);
    if (c->final_softcap > 0) dfl_softcap(ln->logits, (size_t)n * (size_t)V, (float)c->final_softcap);
    for (int64_t i = 0; i < n; i++) {
        const float *z = ln->logits + i * V;
        int64_t t = t0 + i;
        size_t at = ((size_t)li * (size_t)ln->T + (size_t)t) * (size_t)K;
        int32_t *ids = ln->top_ids + at;
        float *top = ln->top_prob + at; /* logits first, probabilities at the end */
        int64_t have = 0;
        float mx = -INFINITY;
        for (int64_t j = 0; j < V; j++) {
            float v = z[j];
            if (v > mx) mx = v;
            /* insertion into the descending top K; ties keep the lower id first */
            if (have == K && !(v > top[K - 1])) continue;
            int64_t p = have < K ? have++ : K - 1;
            while (p > 0 && v > top[p - 1]) {
                top[p] = top[p - 1];
                ids[p] = ids[p - 1];
                p--;
            }
            top[p] = v;
            ids[p] = (int32_t)j;
        }
        double sum = 0;
        for (int64_t j = 0; j < V; j++)
            sum += exp((double)z[j] - (double)mx);
        double lse = (double)mx + log(sum);
        for (int64_t k = 0; k < K; k++)
            top[k] = (float)exp((double)top[k] - lse);
        size_t rt = (size_t)li * (size_t)ln->T + (size_t)t;
        if (t + 1 >= ln->T) {
            ln->rank[rt] = -1;
            ln->tprob[rt] = NAN;
            continue;
        }
        float zy = z[ln->tokens[t + 1]];
        int32_t above = 0;
        for (int64_t j = 0; j < V; j++)
            above += z[j] > zy;
        ln->rank[rt] = above;
        ln->tprob[rt] = (float)exp((double)zy - lse);
    }
}

static void lens_layer(dfl__lens *ln, int64_t li, const float *x)
{
    for (int64_t t0 = 0; t0 < ln->T; t0 += LENS_ROWS) {
        int64_t n = ln->T - t0 < LENS_ROWS ? ln->T - t0 : LENS_ROWS;
        lens_rows(ln, li, t0, n, x + t0 * ln->D);
    }
}

/* ------------------------------------------------------------- captures */

dfl_status dfl__lens_embed(dfl__lens *ln, const float *x, int64_t T, int64_t D, dfl_error *err)
{
    (void)T, (void)D, (void)err;
    const dfl_model *m = ln->m;
    if (ln->K) lens_layer(ln, 0, x);
    for (size_t k = 0; ln->dla && k < ln->R; k++) {
        if (!has_dir(ln, k)) continue;
        int64_t r = ln->rows[k];
        /* the token embedding as the forward pass scales it */
        dfl_wmat_rows(&m->embed, ln->tokens[r], 1, ln->vec);
        if (m->config.embed_scale > 0)
            for (int64_t i = 0; i < ln->D; i++)
                ln->vec[i] *= m->config.embed_scale;
        project(ln, k, ln->vec, ln->embed + 2 * k);
        if (!m->pos_embed.data) continue;
        dfl_wmat_rows(&m->pos_embed, r, 1, ln->vec); /* learned positions: a bias */
        project(ln, k, ln->vec, ln->bias + 2 * k);
    }
    return DFL_OK;
}

dfl_status dfl__lens_attn_out(dfl__lens *ln, int64_t l, const float *att, int64_t T, int64_t width, dfl_error *err)
{
    (void)T, (void)err;
    if (!ln->dla) return DFL_OK;
    const dfl_model *m = ln->m;
    const dfl_layer_weights *lw = &m->layers[l];
    const int64_t H = ln->H, D = ln->D;
    for (size_t k = 0; k < ln->R; k++) {
        if (!has_dir(ln, k)) continue;
        const float *row = att + ln->rows[k] * width;
        /* [H+1, width]: the whole row, then each head's columns alone */
        memcpy(ln->abuf, row, (size_t)width * sizeof(float));
        memset(ln->abuf + width, 0, (size_t)H * (size_t)width * sizeof(float));
        for (int64_t h = 0; h < H; h++) {
            dfl__head_plan p = dfl__head_plan_make(&m->config, h);
            memcpy(ln->abuf + (h + 1) * width + p.out_col, row + p.out_col, (size_t)p.out_width * sizeof(float));
        }
        if (ln->conv1d)
            dfl_matmul_wmat_io(ln->ybuf, ln->abuf, &lw->wo, H + 1, ln->scratch, ln->scratch_n);
        else
            dfl_matmul_wmat(ln->ybuf, ln->abuf, &lw->wo, H + 1, ln->scratch);
        /* a post-norm of the attention output: its scale frozen at the whole row's */
        double inv = 1.0;
        if (lw->post_attn_norm) {
            double ss = 0;
            for (int64_t i = 0; i < D; i++)
                ss += (double)ln->ybuf[i] * (double)ln->ybuf[i];
            inv = 1.0 / sqrt(ss / (double)D + m->config.rms_norm_eps);
        }
        for (int64_t h = 0; h < H; h++) {
            float *y = ln->ybuf + (h + 1) * D;
            for (int64_t i = 0; lw->post_attn_norm && i < D; i++)
                y[i] = (float)((double)y[i] * inv * (double)lw->post_attn_norm[i]);
            project(ln, k, y, ln->heads + ((k * (size_t)ln->L + (size_t)l) * (size_t)H + (size_t)h) * 2);
        }
        if (ln->biases && lw->bo) project(ln, k, lw->bo, ln->bias + 2 * k);
    }
    return DFL_OK;
}

dfl_status dfl__lens_mlp_out(dfl__lens *ln, int64_t l, const float *y, int64_t T, int64_t D, dfl_error *err)
{
    (void)T, (void)err;
    if (!ln->dla) return DFL_OK;
    const float *b = ln->biases ? ln->m->layers[l].b_down : NULL;
    for (size_t k = 0; k < ln->R; k++) {
        if (!has_dir(ln, k)) continue;
        const float *row = y + ln->rows[k] * D;
        for (int64_t i = 0; i < D; i++)
            ln->vec[i] = b ? row[i] - b[i] : row[i];
        project(ln, k, ln->vec, ln->mlp + (k * (size_t)ln->L + (size_t)l) * 2);
        if (b) project(ln, k, b, ln->bias + 2 * k);
    }
    return DFL_OK;
}

dfl_status dfl__lens_hidden(dfl__lens *ln, int64_t l, const float *x, int64_t T, int64_t D, dfl_error *err)
{
    (void)T, (void)err;
    if (ln->K) lens_layer(ln, l + 1, x);
    if (!ln->dla || l != ln->L - 1) return DFL_OK;
    /* the final norm's clean scale at each analysis row */
    for (size_t k = 0; k < ln->R; k++) {
        const float *row = x + ln->rows[k] * D;
        double mean = 0, ss = 0;
        for (int64_t i = 0; ln->layernorm && i < D; i++)
            mean += row[i];
        mean /= (double)D;
        for (int64_t i = 0; i < D; i++)
            ss += ((double)row[i] - mean) * ((double)row[i] - mean);
        ln->scale[k] = sqrt(ss / (double)D + ln->m->config.rms_norm_eps);
    }
    return DFL_OK;
}

dfl_status dfl__lens_logits(dfl__lens *ln, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err)
{
    (void)err;
    double cap = ln->m->config.final_softcap;
    for (size_t k = 0; ln->dla && k < ln->R; k++) {
        int64_t r = ln->rows[k];
        if (r < row0 || r >= row0 + n || !has_dir(ln, k)) continue;
        const float *z = logits + (r - row0) * V;
        int32_t a = ln->diff ? ln->ab[0] : ln->target[k];
        /* before the final soft-cap: c·atanh(z/c) undoes z = c·tanh(·/c) */
        double za = z[a], zb = ln->diff ? z[ln->ab[1]] : 0.0;
        if (cap > 0) za = cap * atanh(za / cap), zb = ln->diff ? cap * atanh(zb / cap) : 0.0;
        ln->logit[k] = (float)(za - zb);
    }
    return DFL_OK;
}

/* ----------------------------------------------------------------- write */

/* A part's term: (u ⊙ g)·c / s, with c centred for a LayerNorm. */
static float term(const dfl__lens *ln, size_t k, const double *acc)
{
    if (!has_dir(ln, k)) return NAN;
    double a = acc[0];
    if (ln->layernorm) a -= acc[1] / (double)ln->D * ln->dir_sum[k];
    return (float)(a / ln->scale[k]);
}

static dfl_status write_lens(const dfl__lens *ln, dfl_dump *d, dfl_error *err)
{
    int64_t L1 = ln->L + 1, d3[3] = {L1, ln->T, ln->K}, d2[2] = {L1, ln->T};
    int32_t *layers = malloc((size_t)L1 * sizeof *layers);
    if (!layers) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < L1; i++)
        layers[i] = (int32_t)(i - 1);
    dfl_status s = dfl_dump_put(d, DFL_DS_LENS_LAYERS, DFL_H5_I32, 1, &L1, layers, err);
    free(layers);
    if (!s) s = dfl_dump_put(d, DFL_DS_LENS_TOP_IDS, DFL_H5_I32, 3, d3, ln->top_ids, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_LENS_TOP_PROB, DFL_H5_F32, 3, d3, ln->top_prob, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_LENS_TARGET_RANK, DFL_H5_I32, 2, d2, ln->rank, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_LENS_TARGET_PROB, DFL_H5_F32, 2, d2, ln->tprob, err);
    return s;
}

static dfl_status write_dla(const dfl__lens *ln, dfl_dump *d, dfl_error *err)
{
    size_t R = ln->R, L = (size_t)ln->L, H = (size_t)ln->H;
    float *heads = dfl__alloc_array(R * L * H + R * L + 3 * R, sizeof(float));
    int32_t *rows = dfl__alloc_array(R, sizeof(int32_t));
    if (!heads || !rows) {
        free(heads);
        free(rows);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    float *mlp = heads + R * L * H, *embed = mlp + R * L, *bias = embed + R;
    for (size_t k = 0; k < R; k++) {
        rows[k] = (int32_t)ln->rows[k];
        for (size_t i = 0; i < L * H; i++)
            heads[k * L * H + i] = term(ln, k, ln->heads + (k * L * H + i) * 2);
        for (size_t l = 0; l < L; l++)
            mlp[k * L + l] = term(ln, k, ln->mlp + (k * L + l) * 2);
        embed[k] = term(ln, k, ln->embed + 2 * k);
        bias[k] = has_dir(ln, k) ? (float)((double)term(ln, k, ln->bias + 2 * k) + ln->bias_out[k]) : NAN;
    }
    int64_t r1 = (int64_t)R, d2[2] = {r1, (int64_t)L}, d3[3] = {r1, (int64_t)L, (int64_t)H};
    char dir[64];
    if (ln->diff)
        snprintf(dir, sizeof dir, "logit_diff:%d,%d", (int)ln->ab[0], (int)ln->ab[1]);
    else
        snprintf(dir, sizeof dir, "target");
    dfl_status s = dfl_dump_put(d, DFL_DS_DLA_ROWS, DFL_H5_I32, 1, &r1, rows, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_DLA_TARGET, DFL_H5_I32, 1, &r1, ln->target, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_DLA_HEADS, DFL_H5_F32, 3, d3, heads, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_DLA_MLP, DFL_H5_F32, 2, d2, mlp, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_DLA_EMBED, DFL_H5_F32, 1, &r1, embed, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_DLA_BIAS, DFL_H5_F32, 1, &r1, bias, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_DLA_LOGIT, DFL_H5_F32, 1, &r1, ln->logit, err);
    if (!s) s = dfl_dump_attr_str(d, DFL_DS_DLA, DFL_ATTR_DIRECTION, dir, err);
    if (!s)
        s = dfl_dump_attr_str(d, DFL_DS_DLA, DFL_ATTR_NORM_SCALE,
                              ln->layernorm ? "frozen; LayerNorm centring applied to each part" : "frozen", err);
    free(heads);
    free(rows);
    return s;
}

dfl_status dfl__lens_write(const dfl__lens *ln, dfl_dump *d, dfl_error *err)
{
    if (!ln) return DFL_OK;
    dfl_status s = ln->K ? write_lens(ln, d, err) : DFL_OK;
    return s || !ln->dla ? s : write_dla(ln, d, err);
}
