/* clip_forward.c — the two towers of DiffCLIP / CLIP (clip.h), with a capture callback
 * after every layer. The maths is docs/format.md "DiffCLIP and its CLIP baseline". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/clip.h"
#include "model/kernels.h"
#include "model/kernels_norm.h"

/* ---------------------------------------------------------------- buffers */

typedef struct work {
    int64_t T, D, F, Hs, d;
    float *x, *h, *q, *k, *v, *qkv, *att, *mlp; /* [T, D] ×6, [T, 3D], [T, F] */
    float *m1, *m2, *dm, *logits;               /* [Hs, T, T] each (m2, dm: first Hs/2 heads) */
    float *qs, *ks, *vt, *oh;                   /* [T, d], [T, d], [2d, T], [T, 2d] */
    float *scratch;                             /* dfl_matmul_scratch(max(D, F)) */
    size_t scratch_n;
    int64_t *lim; /* [T] */
} work;

static void work_free(work *w)
{
    float *bufs[] = {w->x,  w->h,  w->q,      w->k,  w->v,  w->qkv, w->att, w->mlp,    w->m1,
                     w->m2, w->dm, w->logits, w->qs, w->ks, w->vt,  w->oh,  w->scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
    free(w->lim);
}

static dfl_status work_alloc(work *w, int64_t T, const dfl_clip_tower_config *c, dfl_error *err)
{
    memset(w, 0, sizeof *w);
    w->T = T, w->D = c->width, w->F = c->mlp_width, w->Hs = c->heads, w->d = c->width / c->heads;
    size_t t = (size_t)T, D = (size_t)w->D, tt, maps;
    if (!dfl__mul_ok(t, t, &tt) || !dfl__mul_ok(tt, (size_t)w->Hs, &maps))
        return dfl__fail(err, DFL_ERR_NOMEM, "attention maps of %lld tokens overflow", (long long)T);
    float **td[] = {&w->x, &w->h, &w->q, &w->k, &w->v, &w->att};
    for (size_t i = 0; i < sizeof td / sizeof *td; i++)
        *td[i] = dfl__alloc_array(t, D * sizeof(float));
    w->qkv = dfl__alloc_array(t, 3 * D * sizeof(float));
    w->mlp = dfl__alloc_array(t, (size_t)w->F * sizeof(float));
    w->m1 = dfl__alloc_array(maps, sizeof(float));
    w->m2 = dfl__alloc_array(maps, sizeof(float));
    w->dm = dfl__alloc_array(maps, sizeof(float));
    w->logits = dfl__alloc_array(maps, sizeof(float));
    w->qs = dfl__alloc_array(t, (size_t)w->d * sizeof(float));
    w->ks = dfl__alloc_array(t, (size_t)w->d * sizeof(float));
    w->vt = dfl__alloc_array(t, 2 * (size_t)w->d * sizeof(float));
    w->oh = dfl__alloc_array(t, 2 * (size_t)w->d * sizeof(float));
    w->scratch_n = dfl_matmul_scratch(w->F > w->D ? w->F : w->D);
    w->scratch = dfl__alloc_array(w->scratch_n, sizeof(float));
    w->lim = dfl__alloc_array(t, sizeof(int64_t));
    int ok = w->qkv && w->mlp && w->m1 && w->m2 && w->dm && w->logits && w->qs && w->ks && w->vt && w->oh &&
             w->scratch && w->lim;
    for (size_t i = 0; i < sizeof td / sizeof *td; i++)
        ok = ok && *td[i];
    if (!ok) {
        work_free(w);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a tower of %lld tokens", (long long)T);
    }
    return DFL_OK;
}

/* y[T, out] = x · Wᵀ + b. */
static void linear(float *y, const float *x, const dfl_wmat *w, const float *b, int64_t T, float *scratch)
{
    dfl_matmul_wmat(y, x, w, T, scratch);
    if (b) dfl_add_bias(y, b, T, w->rows);
}

/* ---------------------------------------------------------------- attention */

/* Softmax map of sub-head s: scores of q columns [qc, qc + d) against k columns
 * [kc, kc + d) (rows of q_ld / k_ld floats), scaled by d^−½, into logits[T, T] (masked
 * entries −inf) and the map p[T, T]. */
static void softmax_map(work *w, const float *q, int64_t q_ld, int64_t qc, const float *k, int64_t k_ld, int64_t kc,
                        float *logits, float *p)
{
    int64_t T = w->T, d = w->d;
    for (int64_t t = 0; t < T; t++) {
        memcpy(w->qs + t * d, q + t * q_ld + qc, (size_t)d * sizeof(float));
        memcpy(w->ks + t * d, k + t * k_ld + kc, (size_t)d * sizeof(float));
    }
    dfl_matmul_xwt(p, w->qs, w->ks, T, d, T); /* p[T, T] = qs · ksᵀ */
    float scale = (float)(1.0 / sqrt((double)d));
    for (int64_t i = 0; i < T * T; i++)
        p[i] *= scale;
    memcpy(logits, p, (size_t)(T * T) * sizeof(float));
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = w->lim[i] + 1; j < T; j++)
            logits[i * T + j] = -INFINITY;
    dfl_softmax_causal(p, T, T, T, w->lim);
}

/* out[T, width] (rows of out_ld at column oc) = a[T, T] · v[:, vc : vc + width]. */
static void apply_map(work *w, const float *a, const float *v, int64_t v_ld, int64_t vc, int64_t width, float *out,
                      int64_t out_ld, int64_t oc)
{
    int64_t T = w->T;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < width; j++)
            w->vt[j * T + t] = v[t * v_ld + vc + j];
    dfl_matmul_xwt(w->oh, a, w->vt, T, T, width); /* oh[T, width] = a · v */
    for (int64_t t = 0; t < T; t++)
        memcpy(out + t * out_ld + oc, w->oh + t * width, (size_t)width * sizeof(float));
}

/* w->att[T, D] = the heads' outputs, concatenated, of h = norm1(x); maps in w->m1/m2/dm. */
static void attention(work *w, const dfl_clip_layer *L, int diff, double lambda_init)
{
    int64_t T = w->T, D = w->D, d = w->d, TT = T * T;
    if (diff) {
        linear(w->q, w->h, &L->wq, L->bq, T, w->scratch);
        linear(w->k, w->h, &L->wk, L->bk, T, w->scratch);
        linear(w->v, w->h, &L->wv, L->bv, T, w->scratch);
        /* differential head i: map 1 = sub-head 2i, map 2 = sub-head 2i + 1 (adjacent
         * pairs), value = columns [2i·d, (2i + 2)·d) */
        for (int64_t i = 0; i < w->Hs / 2; i++) {
            float *p1 = w->m1 + i * TT, *p2 = w->m2 + i * TT, *a = w->dm + i * TT;
            softmax_map(w, w->q, D, 2 * i * d, w->k, D, 2 * i * d, w->logits + 2 * i * TT, p1);
            softmax_map(w, w->q, D, (2 * i + 1) * d, w->k, D, (2 * i + 1) * d, w->logits + (2 * i + 1) * TT, p2);
            for (int64_t j = 0; j < TT; j++)
                a[j] = p1[j] - L->lambda * p2[j];
            apply_map(w, a, w->v, D, 2 * i * d, 2 * d, w->att, D, 2 * i * d);
        }
        /* per head: RMSNorm over its 2d values (eps 1e-5, gain diff_norm) × (1 − λ_init) */
        for (int64_t i = 0; i < w->Hs / 2; i++)
            for (int64_t t = 0; t < T; t++) {
                float *row = w->att + t * D + 2 * i * d;
                dfl_rmsnorm(row, row, L->subln, 1, 2 * d, 1e-5f, (float)(1.0 - lambda_init));
            }
    } else {
        linear(w->qkv, w->h, &L->wqkv, L->bqkv, T, w->scratch); /* [T, 3D]: q | k | v */
        for (int64_t i = 0; i < w->Hs; i++) {
            float *p = w->m1 + i * TT;
            softmax_map(w, w->qkv, 3 * D, i * d, w->qkv, 3 * D, D + i * d, w->logits + i * TT, p);
            apply_map(w, p, w->qkv, 3 * D, 2 * D + i * d, d, w->att, D, i * d);
        }
    }
}

/* ---------------------------------------------------------------- blocks */

static void scale_rows(float *x, const float *g, int64_t T, int64_t D)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < D; j++)
            x[t * D + j] *= g[j];
}

/* The L blocks over w->x[T, D], then the final norm into w->h. */
static dfl_status run_blocks(const dfl_clip_model *m, dfl_clip_tower_kind kind, work *w, const dfl_clip_capture *cap,
                             dfl_error *err)
{
    const dfl_clip_tower_config *c = &m->config.tower[kind];
    const dfl_clip_tower *tw = &m->tower[kind];
    int64_t T = w->T, D = w->D;
    int diff = m->config.diff;
    float eps = (float)c->layer_norm_eps;
    for (int64_t i = 0; i < T; i++)
        w->lim[i] = kind == DFL_CLIP_TEXT ? i : T - 1; /* causal text, full image attention */
    for (int64_t l = 0; l < c->layers; l++) {
        const dfl_clip_layer *L = &tw->layers[l];
        dfl_layernorm(w->h, w->x, L->ln1_w, L->ln1_b, T, D, eps);
        attention(w, L, diff, c->lambda_init);
        linear(w->q, w->att, &L->wo, L->bo, T, w->scratch); /* q reused as the projected output */
        if (L->ls1) scale_rows(w->q, L->ls1, T, D);
        dfl_add_inplace(w->x, w->q, (size_t)(T * D));
        dfl_layernorm(w->h, w->x, L->ln2_w, L->ln2_b, T, D, eps);
        linear(w->mlp, w->h, &L->fc1, L->b1, T, w->scratch);
        if (c->act == DFL_CLIP_QUICK_GELU)
            dfl_quick_gelu(w->mlp, (size_t)(T * w->F));
        else
            dfl_gelu_erf(w->mlp, (size_t)(T * w->F));
        linear(w->q, w->mlp, &L->fc2, L->b2, T, w->scratch);
        if (L->ls2) scale_rows(w->q, L->ls2, T, D);
        dfl_add_inplace(w->x, w->q, (size_t)(T * D));
        if (cap && cap->on_layer) {
            dfl_clip_layer_maps mp = {.T = T,
                                      .D = D,
                                      .heads = diff ? w->Hs / 2 : w->Hs,
                                      .maps = diff ? 2 : 1,
                                      .map1 = w->m1,
                                      .map2 = diff ? w->m2 : NULL,
                                      .diff = diff ? w->dm : NULL,
                                      .logits = w->logits,
                                      .lambda = diff ? L->lambda : 0.0f,
                                      .hidden = w->x};
            dfl_status s = cap->on_layer(cap->user, kind, l, &mp, err);
            if (s) return s;
        }
    }
    dfl_layernorm(w->h, w->x, tw->norm_w, tw->norm_b, T, D, eps);
    return DFL_OK;
}

/* feature[D] = row r of w->h; embed[E] = feature · proj. */
static void pool(const dfl_clip_tower *tw, const work *w, int64_t r, float *feature, float *embed)
{
    if (feature) memcpy(feature, w->h + r * w->D, (size_t)w->D * sizeof(float));
    if (embed) dfl_matmul_wmat_io(embed, w->h + r * w->D, &tw->proj, 1, w->scratch, w->scratch_n);
}

/* ---------------------------------------------------------------- towers */

dfl_status dfl_clip_encode_image(const dfl_clip_model *m, const float *pixels, const dfl_clip_capture *cap,
                                 float *feature, float *embed, dfl_error *err)
{
    const dfl_clip_tower_config *c = &m->config.tower[DFL_CLIP_VISION];
    const dfl_clip_tower *tw = &m->tower[DFL_CLIP_VISION];
    int64_t S = c->image_size, P = c->patch_size, G = S / P, N = G * G, D = c->width, K = 3 * P * P;
    work w;
    dfl_status s = work_alloc(&w, 1 + N, c, err);
    if (s) return s;
    float *patches = dfl__alloc_array((size_t)N, (size_t)K * sizeof(float)); /* [N, 3·P·P] */
    if (!patches) {
        work_free(&w);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for %lld patches", (long long)N);
    }
    /* patch (gy, gx) in row-major grid order; its values channel, row, column: the
     * Conv2d kernel's order, so the convolution is one matmul */
    for (int64_t gy = 0; gy < G; gy++)
        for (int64_t gx = 0; gx < G; gx++) {
            float *row = patches + (gy * G + gx) * K;
            for (int64_t ch = 0; ch < 3; ch++)
                for (int64_t py = 0; py < P; py++)
                    memcpy(row + (ch * P + py) * P, pixels + (ch * S + gy * P + py) * S + gx * P,
                           (size_t)P * sizeof(float));
        }
    linear(w.x + D, patches, &tw->patch, tw->patch_b, N, w.scratch);
    free(patches);
    memcpy(w.x, tw->cls, (size_t)D * sizeof(float));
    dfl_add_inplace(w.x, tw->pos, (size_t)((1 + N) * D));
    s = run_blocks(m, DFL_CLIP_VISION, &w, cap, err);
    if (!s) pool(tw, &w, 0, feature, embed);
    work_free(&w);
    return s;
}

dfl_status dfl_clip_encode_text(const dfl_clip_model *m, const int32_t *tokens, int64_t T, const dfl_clip_capture *cap,
                                float *feature, float *embed, dfl_error *err)
{
    const dfl_clip_tower_config *c = &m->config.tower[DFL_CLIP_TEXT];
    const dfl_clip_tower *tw = &m->tower[DFL_CLIP_TEXT];
    if (T < 1 || T > c->context_length)
        return dfl__fail(err, DFL_ERR_RANGE, "a caption of %lld tokens (the text tower takes 1 to %lld)", (long long)T,
                         (long long)c->context_length);
    int64_t eot = 0;
    for (int64_t t = 0; t < T; t++) {
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return dfl__fail(err, DFL_ERR_RANGE, "token %lld of the caption is %d, outside the vocabulary [0, %lld)",
                             (long long)t, tokens[t], (long long)c->vocab_size);
        if (tokens[t] > tokens[eot]) eot = t; /* the first largest id: torch.argmax */
    }
    work w;
    dfl_status s = work_alloc(&w, T, c, err);
    if (s) return s;
    int64_t D = c->width;
    for (int64_t t = 0; t < T; t++)
        dfl_wmat_rows(&tw->tok, tokens[t], 1, w.x + t * D);
    dfl_add_inplace(w.x, tw->pos, (size_t)(T * D));
    s = run_blocks(m, DFL_CLIP_TEXT, &w, cap, err);
    if (!s) pool(tw, &w, eot, feature, embed);
    work_free(&w);
    return s;
}

void dfl_clip_scores(const dfl_clip_model *m, const float *image, const float *text, int64_t n, float *sims,
                     float *probs)
{
    int64_t E = m->config.embed_dim;
    double ni = 0, mx = -INFINITY, z = 0;
    for (int64_t j = 0; j < E; j++)
        ni += (double)image[j] * image[j];
    double scale = exp((double)m->logit_scale);
    for (int64_t i = 0; i < n; i++) {
        double dot = 0, nt = 0;
        for (int64_t j = 0; j < E; j++)
            dot += (double)image[j] * text[i * E + j], nt += (double)text[i * E + j] * text[i * E + j];
        double sim = ni > 0 && nt > 0 ? scale * dot / sqrt(ni * nt) : 0.0;
        sims[i] = (float)sim;
        if (sim > mx) mx = sim;
    }
    for (int64_t i = 0; i < n; i++)
        z += exp((double)sims[i] - mx);
    for (int64_t i = 0; i < n; i++)
        probs[i] = (float)(exp((double)sims[i] - mx) / z);
}
