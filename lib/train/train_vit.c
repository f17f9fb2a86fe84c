/* train_vit.c — the ViT / Diff-ViT trainer of train_vit.h: parameters as one flat f32
 * array with a view per tensor (so AdamW and clipping are train_optim.c's), a forward
 * pass that keeps its activations and a hand-written backward pass, in the manner of
 * train_pass.c; the loop; saving as a "clip" / "diffclip" model directory.
 *
 * Notation: B images, N = (S/P)² patches, T = 1 + N tokens (row 0 the class token),
 * BT = B·T rows; D width, F mlp width, E embed_dim, C classes, K = 3·P·P; Hs softmax
 * maps per layer (= heads), Hd analysis heads (Hs for ViT, Hs/2 for Diff), nm maps
 * per analysis head (1 or 2), d = D/Hs, W = nm·d the value width of a head. Map t of
 * analysis head h reads q/k columns (nm·h + t)·d; its value columns are h·W.
 *
 * What differs from train_pass.c (text models): LayerNorm with bias (not RMSNorm),
 * exact GELU MLP with biases (not SwiGLU), biases on q/k/v/out, full (non-causal)
 * attention without RoPE, the patch embedding, class token and learned positions, the
 * class-token pooling and the cosine head. The matmul backward (dfl__train_mm_bwd) and
 * the optimiser are shared; the forward uses the inference kernels (dfl_layernorm,
 * dfl_gelu_erf, dfl_softmax_causal with every key allowed, dfl_rmsnorm's maths) so
 * that the trained model's forward in probe is the same computation.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/rng.h"
#include "base/strbuf.h"
#include "model/kernels.h"
#include "model/kernels_norm.h"
#include "model/safetensors.h"
#include "train/train.h"
#include "train/train_internal.h"
#include "train/train_vit.h"

#define C_CLS       DFL_SHAPES_CLASSES
#define SUBNORM_EPS 1e-5f /* DiffCLIP's diff_norm (RMSNorm, eps 1e-5) */
#define TEXT_LN_EPS 1e-5  /* the text tower's ln_final, which normalises the class vectors */
#define MAX_TENSORS 160

/* ------------------------------------------------------------ params */

dfl_vit_params dfl_vit_params_default(void)
{
    dfl_vit_params p = {0};
    p.image_size = 32, p.patch_size = 4, p.width = 64, p.layers = 2, p.heads = 4, p.mlp_width = 128;
    p.embed_dim = 32, p.lambda_init = 0.8;
    p.batch = 32, p.steps = 600, p.warmup = 60;
    p.lr = 2e-3, p.min_lr = 1e-4, p.weight_decay = 0.05, p.beta1 = 0.9, p.beta2 = 0.95, p.eps = 1e-8;
    p.clip = 1.0, p.init_std = 0.02, p.seed = 1, p.eval_every = 100, p.eval_samples = 512;
    return p;
}

dfl_status dfl_vit_params_check(const dfl_vit_params *p, dfl_error *err)
{
    if (p->image_size < 16 || p->image_size > 1024)
        return dfl__fail(err, DFL_ERR_USAGE, "--image-size %lld is outside [16, 1024]", (long long)p->image_size);
    if (p->patch_size < 1 || p->image_size % p->patch_size)
        return dfl__fail(err, DFL_ERR_USAGE, "--patch-size %lld does not divide --image-size %lld",
                         (long long)p->patch_size, (long long)p->image_size);
    int64_t N = (p->image_size / p->patch_size) * (p->image_size / p->patch_size);
    if (N > 4096) return dfl__fail(err, DFL_ERR_USAGE, "%lld patches: at most 4096", (long long)N);
    if (p->width < 2 || p->width > 4096 || p->layers < 1 || p->layers > 64 || p->heads < 1 || p->mlp_width < 1 ||
        p->mlp_width > 16384 || p->embed_dim < 1 || p->embed_dim > 4096)
        return dfl__fail(err, DFL_ERR_USAGE,
                         "ViT sizes out of range (width 2..4096, layers 1..64, mlp 1..16384, "
                         "embed 1..4096)");
    if (p->width % p->heads)
        return dfl__fail(err, DFL_ERR_USAGE, "--hidden %lld is not a multiple of --heads %lld", (long long)p->width,
                         (long long)p->heads);
    if (p->diff && p->heads % 2)
        return dfl__fail(err, DFL_ERR_USAGE, "Diff-ViT needs an even --heads (pairs of maps), not %lld",
                         (long long)p->heads);
    if (p->batch < 1 || p->batch > 4096 || p->steps < 1 || p->eval_samples < 1 || p->eval_samples > 1 << 20)
        return dfl__fail(err, DFL_ERR_USAGE, "batch 1..4096, steps >= 1, eval samples 1..2^20");
    if (!(p->lambda_init >= 0 && p->lambda_init < 1))
        return dfl__fail(err, DFL_ERR_USAGE, "lambda_init %g is outside [0, 1)", p->lambda_init);
    return DFL_OK;
}

/* ------------------------------------------------------------ model */

typedef struct vlayer {
    float *ln1w, *ln1b;           /* [D] */
    float *wq, *wk, *wv;          /* [D, D]; ViT: rows of one qkv [3D, D] */
    float *bq, *bk, *bv;          /* [D] */
    float *wo, *bo;               /* [D, D], [D] */
    float *lq1, *lk1, *lq2, *lk2; /* [d] Diff */
    float *subln;                 /* [2d] Diff */
    float *ln2w, *ln2b;           /* [D] */
    float *fc1, *b1, *fc2, *b2;   /* [F, D], [F], [D, F], [D] */
} vlayer;

typedef struct vviews {
    float *patch_w, *patch_b, *cls, *pos; /* [D, K], [D], [D], [T, D] */
    vlayer *L;                            /* [layers] */
    float *normw, *normb, *proj, *cvec;   /* [D], [D], [D, E] (in, out), [C, E] */
} vviews;

typedef struct vtensor {
    char name[96];
    int ndim;
    int64_t shape[4];
    size_t offset, numel;
    int decay;
    float **wslot, **gslot; /* where the views point */
} vtensor;

typedef struct vacts {
    float *x_in, *h1, *q, *k, *v, *P, *opre, *rstdh, *att, *x_mid, *h2, *f1, *g1;
} vacts;

struct dfl_vit_model {
    dfl_vit_params p;
    int64_t S, P, G, N, T, D, F, E, K, Hs, Hd, nm, d, W, Bmax;
    dfl_train_model tm; /* n_params, params, grads, m, v, tensors: train_optim.c works on it */
    vtensor *vt;        /* [n] */
    size_t n_vt;
    vviews w, g;
    float *lambda; /* [layers] of the last forward */
    /* workspace for Bmax images */
    vacts *a;                                  /* [layers] */
    float *patches, *x_out;                    /* [B·N, K], [BT, D] */
    float *xc, *fcls, *e, *tk, *z, *pr;        /* [B, D], [B, D], [B, E], [C, E], [B, C], [B, C] */
    float *dx, *dh, *datt, *dq, *dk, *dv, *df; /* [BT, D] ×6, [BT, F] */
    float *dpatch, *de, *dfc, *dtk;            /* [B·N, D], [B, E], [B, D], [C, E] */
    float *scratch;                            /* [nth, 3·T·T + T·W] */
    size_t scratch_per;
    int nth;
    double *dlam_part; /* [B·Hd] */
    float *dsub_part;  /* [B·Hd, W] */
    int64_t *lim;      /* [T] all T − 1: every key */
    int *labels;       /* [B] */
    int64_t B;         /* of the last forward */
    void **owned;
    size_t n_owned, cap_owned;
};

static void *take(dfl_vit_model *m, size_t a, size_t b)
{
    if (!m->owned || m->n_owned == m->cap_owned) return NULL;
    void *p = dfl__alloc_array(a ? a : 1, (b ? b : 1));
    if (p) memset(p, 0, (a ? a : 1) * (b ? b : 1)), m->owned[m->n_owned++] = p;
    return p;
}

/* Add a tensor of the layout; w/g slots get their pointers once the arrays exist. */
static void add_t(dfl_vit_model *m, const char *name, int ndim, int64_t s0, int64_t s1, int64_t s2, int64_t s3,
                  int decay, float **wslot, float **gslot)
{
    if (m->n_vt >= MAX_TENSORS) return;
    vtensor *t = &m->vt[m->n_vt++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    int64_t sh[4] = {s0, s1, s2, s3};
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = sh[i], n *= (size_t)sh[i];
    t->offset = m->tm.n_params, t->numel = n, t->decay = decay, t->wslot = wslot, t->gslot = gslot;
    m->tm.n_params += n;
}

static void layout(dfl_vit_model *m)
{
    int64_t D = m->D, F = m->F, d = m->d;
    char nm[96];
    /* the published tensor order; ViT's wk/wv/bk/bv slots are set from its fused qkv in dfl_vit_create */
    add_t(m, "visual.patch_embed.proj.weight", 4, D, 3, m->P, m->P, 1, &m->w.patch_w, &m->g.patch_w);
    add_t(m, "visual.patch_embed.proj.bias", 1, D, 0, 0, 0, 0, &m->w.patch_b, &m->g.patch_b);
    add_t(m, "visual.cls_token", 3, 1, 1, D, 0, 0, &m->w.cls, &m->g.cls);
    add_t(m, "visual.pos_embed", 3, 1, m->T, D, 0, 0, &m->w.pos, &m->g.pos);
    for (int64_t l = 0; l < m->p.layers; l++) {
        vlayer *w = &m->w.L[l], *g = &m->g.L[l];
#define T1(suffix, n, ws, gs)                                                                                          \
    (snprintf(nm, sizeof nm, "visual.blocks.%lld." suffix, (long long)l), add_t(m, nm, 1, n, 0, 0, 0, 0, ws, gs))
#define T2(suffix, r, c, ws, gs)                                                                                       \
    (snprintf(nm, sizeof nm, "visual.blocks.%lld." suffix, (long long)l), add_t(m, nm, 2, r, c, 0, 0, 1, ws, gs))
        T1("norm1.weight", D, &w->ln1w, &g->ln1w);
        T1("norm1.bias", D, &w->ln1b, &g->ln1b);
        if (m->p.diff) {
            T2("attn.q_proj.weight", D, D, &w->wq, &g->wq);
            T1("attn.q_proj.bias", D, &w->bq, &g->bq);
            T2("attn.k_proj.weight", D, D, &w->wk, &g->wk);
            T1("attn.k_proj.bias", D, &w->bk, &g->bk);
            T2("attn.v_proj.weight", D, D, &w->wv, &g->wv);
            T1("attn.v_proj.bias", D, &w->bv, &g->bv);
            T2("attn.out_proj.weight", D, D, &w->wo, &g->wo);
            T1("attn.out_proj.bias", D, &w->bo, &g->bo);
            T1("attn.lambda_q1", d, &w->lq1, &g->lq1);
            T1("attn.lambda_k1", d, &w->lk1, &g->lk1);
            T1("attn.lambda_q2", d, &w->lq2, &g->lq2);
            T1("attn.lambda_k2", d, &w->lk2, &g->lk2);
            T1("attn.diff_norm.weight", 2 * d, &w->subln, &g->subln);
        } else {
            T2("attn.qkv.weight", 3 * D, D, &w->wq, &g->wq); /* wk, wv: rows D and 2D of it */
            T1("attn.qkv.bias", 3 * D, &w->bq, &g->bq);
            T2("attn.proj.weight", D, D, &w->wo, &g->wo);
            T1("attn.proj.bias", D, &w->bo, &g->bo);
        }
        T1("norm2.weight", D, &w->ln2w, &g->ln2w);
        T1("norm2.bias", D, &w->ln2b, &g->ln2b);
        T2("mlp.fc1.weight", F, D, &w->fc1, &g->fc1);
        T1("mlp.fc1.bias", F, &w->b1, &g->b1);
        T2("mlp.fc2.weight", D, F, &w->fc2, &g->fc2);
        T1("mlp.fc2.bias", D, &w->b2, &g->b2);
#undef T1
#undef T2
    }
    add_t(m, "visual.norm.weight", 1, D, 0, 0, 0, 0, &m->w.normw, &m->g.normw);
    add_t(m, "visual.norm.bias", 1, D, 0, 0, 0, 0, &m->w.normb, &m->g.normb);
    add_t(m, "image_projection", 2, D, m->E, 0, 0, 1, &m->w.proj, &m->g.proj);
    add_t(m, "class_vectors", 2, C_CLS, m->E, 0, 0, 0, &m->w.cvec, &m->g.cvec);
}

void dfl_vit_free(dfl_vit_model *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m);
}

size_t dfl_vit_param_count(const dfl_vit_model *m)
{
    return m->tm.n_params;
}

dfl_status dfl_vit_create(const dfl_vit_params *p, dfl_vit_model **out, dfl_error *err)
{
    *out = NULL;
    dfl_status s = dfl_vit_params_check(p, err);
    if (s) return s;
    dfl_vit_model *m = calloc(1, sizeof *m);
    if (!m) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    m->cap_owned = 64 + 16 * (size_t)p->layers;
    m->owned = calloc(m->cap_owned, sizeof *m->owned);
    m->p = *p;
    m->S = p->image_size, m->P = p->patch_size, m->G = m->S / m->P, m->N = m->G * m->G, m->T = 1 + m->N;
    m->D = p->width, m->F = p->mlp_width, m->E = p->embed_dim, m->K = 3 * m->P * m->P, m->Hs = p->heads;
    m->nm = p->diff ? 2 : 1, m->Hd = m->Hs / m->nm, m->d = m->D / m->Hs, m->W = m->nm * m->d, m->Bmax = p->batch;
    const size_t L = (size_t)p->layers, B = (size_t)p->batch, T = (size_t)m->T, D = (size_t)m->D;
    const size_t F = (size_t)m->F, E = (size_t)m->E, BT = B * T, TT = T * T, Hd = (size_t)m->Hd;
    m->vt = take(m, MAX_TENSORS, sizeof *m->vt);
    m->w.L = take(m, L, sizeof(vlayer));
    m->g.L = take(m, L, sizeof(vlayer));
    if (!m->owned || !m->vt || !m->w.L || !m->g.L) {
        dfl_vit_free(m);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    layout(m);
    size_t n = m->tm.n_params;
    m->tm.params = take(m, n, 4), m->tm.grads = take(m, n, 4), m->tm.m = take(m, n, 4), m->tm.v = take(m, n, 4);
    m->tm.tensors = take(m, m->n_vt, sizeof(dfl_train_tensor));
    m->tm.n_tensors = m->n_vt;
    m->lambda = take(m, L, 4);
    m->a = take(m, L, sizeof(vacts));
    int ok = m->tm.params && m->tm.grads && m->tm.m && m->tm.v && m->tm.tensors && m->lambda && m->a;
    for (size_t l = 0; ok && l < L; l++) {
        vacts *a = &m->a[l];
        float **bt[] = {&a->x_in, &a->h1, &a->q, &a->k, &a->v, &a->att, &a->x_mid, &a->h2};
        for (size_t i = 0; i < sizeof bt / sizeof *bt; i++)
            ok = ok && (*bt[i] = take(m, BT, D * 4));
        ok = ok && (a->P = take(m, B * (size_t)m->Hs, TT * 4));
        ok = ok && (a->f1 = take(m, BT, F * 4)) && (a->g1 = take(m, BT, F * 4));
        if (p->diff) ok = ok && (a->opre = take(m, BT, D * 4)) && (a->rstdh = take(m, BT, Hd * 4));
    }
    m->nth = omp_get_max_threads();
    m->scratch_per = 3 * TT + T * (size_t)m->W;
    if (ok) {
        float **bufs[] = {&m->x_out, &m->dx, &m->dh, &m->datt, &m->dq, &m->dk, &m->dv};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
            ok = ok && (*bufs[i] = take(m, BT, D * 4));
        ok = ok && (m->patches = take(m, B * (size_t)m->N, (size_t)m->K * 4)) &&
             (m->dpatch = take(m, B * (size_t)m->N, D * 4)) && (m->df = take(m, BT, F * 4)) &&
             (m->xc = take(m, B, D * 4)) && (m->fcls = take(m, B, D * 4)) && (m->dfc = take(m, B, D * 4)) &&
             (m->e = take(m, B, E * 4)) && (m->de = take(m, B, E * 4)) && (m->tk = take(m, C_CLS, E * 4)) &&
             (m->dtk = take(m, C_CLS, E * 4)) && (m->z = take(m, B, C_CLS * 4)) && (m->pr = take(m, B, C_CLS * 4)) &&
             (m->scratch = take(m, (size_t)m->nth, m->scratch_per * 4)) && (m->dlam_part = take(m, B * Hd, 8)) &&
             (m->dsub_part = take(m, B * Hd, (size_t)m->W * 4)) && (m->lim = take(m, T, 8)) &&
             (m->labels = take(m, B, sizeof(int)));
    }
    if (!ok) {
        dfl_vit_free(m);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a ViT of %zu parameters, batch %zu", n, B);
    }
    for (size_t i = 0; i < m->n_vt; i++) {
        vtensor *t = &m->vt[i];
        *t->wslot = m->tm.params + t->offset, *t->gslot = m->tm.grads + t->offset;
        dfl_train_tensor *tt = &m->tm.tensors[i];
        snprintf(tt->name, sizeof tt->name, "%s", t->name);
        tt->ndim = t->ndim > 2 ? 2 : t->ndim, tt->offset = t->offset, tt->numel = t->numel, tt->decay = t->decay;
    }
    for (size_t l = 0; l < L && !p->diff; l++) { /* the fused qkv: q | k | v rows and biases */
        vlayer *vs[2] = {&m->w.L[l], &m->g.L[l]};
        for (int j = 0; j < 2; j++)
            vs[j]->wk = vs[j]->wq + D * D, vs[j]->wv = vs[j]->wq + 2 * D * D, vs[j]->bk = vs[j]->bq + D,
            vs[j]->bv = vs[j]->bq + 2 * D;
    }
    for (size_t i = 0; i < T; i++)
        m->lim[i] = (int64_t)T - 1;
    /* initialisation, serial in tensor order: the result depends on the seed only */
    dfl_rng r = dfl_rng_make(p->seed, 2, 0);
    for (size_t i = 0; i < m->n_vt; i++) {
        vtensor *t = &m->vt[i];
        float *x = m->tm.params + t->offset;
        const char *nm = t->name;
        size_t len = strlen(nm);
        double sd = p->init_std;
        int ones = len > 7 && (!strcmp(nm + len - 7, ".weight") && t->ndim == 1);
        int zeros = len > 5 && !strcmp(nm + len - 5, ".bias");
        if (strstr(nm, "lambda_")) sd = 0.1;
        if (!strcmp(nm, "image_projection")) sd = 1.0 / sqrt((double)m->D);
        if (!strcmp(nm, "class_vectors")) sd = 1.0;
        for (size_t j = 0; j < t->numel; j++)
            x[j] = ones ? 1.0f : zeros ? 0.0f : (float)(sd * dfl_rng_normal(&r));
    }
    *out = m;
    return DFL_OK;
}

size_t dfl_vit_views(dfl_vit_model *m, dfl_vit_view *views, size_t cap)
{
    for (size_t i = 0; i < m->n_vt && i < cap; i++) {
        const vtensor *t = &m->vt[i];
        views[i].name = t->name, views[i].ndim = t->ndim, views[i].numel = t->numel;
        memcpy(views[i].shape, t->shape, sizeof t->shape);
        views[i].param = m->tm.params + t->offset, views[i].grad = m->tm.grads + t->offset;
    }
    return m->n_vt;
}

/* ------------------------------------------------------------ pieces */

/* Backward of y = LayerNorm(x)·gain + bias over x[n, d] (mean and 1/std recomputed in
 * double): dx (+=) and, when gain is not NULL, dgain / dbias (+=). gain NULL: no affine. */
static void ln_bwd(float *dx, float *dgain, float *dbias, const float *dy, const float *x, const float *gain, int64_t n,
                   int64_t d, double eps)
{
    for (int64_t i = 0; i < n; i++) {
        const float *xr = x + i * d, *dyr = dy + i * d;
        double mu = 0, var = 0, s1 = 0, s2 = 0;
        for (int64_t j = 0; j < d; j++)
            mu += xr[j];
        mu /= (double)d;
        for (int64_t j = 0; j < d; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        double rs = 1.0 / sqrt(var / (double)d + eps);
        for (int64_t j = 0; j < d; j++) {
            double xh = (xr[j] - mu) * rs, g = (gain ? gain[j] : 1.0f) * (double)dyr[j];
            s1 += g, s2 += g * xh;
            if (gain) dgain[j] += (float)(dyr[j] * xh), dbias[j] += dyr[j];
        }
        s1 /= (double)d, s2 /= (double)d;
        for (int64_t j = 0; j < d; j++) {
            double xh = (xr[j] - mu) * rs, g = (gain ? gain[j] : 1.0f) * (double)dyr[j];
            dx[i * d + j] += (float)(rs * (g - s1 - xh * s2));
        }
    }
}

/* db[d] += Σ_rows dy[n, d] (serial: a fixed order) */
static void colsum(float *db, const float *dy, int64_t n, int64_t d)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++)
            db[j] += dy[i * d + j];
}

/* y[n, out] = x[n, in]·Wᵀ + b */
static void linear(float *y, const float *x, const float *W, const float *b, int64_t n, int64_t in, int64_t out)
{
    dfl_matmul_xwt(y, x, W, n, in, out);
    dfl_add_bias(y, b, n, out);
}

/* λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init, as train_pass.c and model/clip.c */
static float layer_lambda(const dfl_vit_model *m, int64_t l)
{
    const vlayer *y = &m->w.L[l];
    return dfl__train_lambda(y->lq1, y->lk1, y->lq2, y->lk2, m->d, m->p.lambda_init);
}

static float *map_at(const dfl_vit_model *m, const vacts *a, int64_t b, int64_t s)
{
    return a->P + ((size_t)b * (size_t)m->Hs + (size_t)s) * (size_t)m->T * (size_t)m->T;
}

/* ------------------------------------------------------------ attention */

/* Head h's attention map of image b: its softmax map, or for a Diff layer map1 − λ·map2
 * written into scr (T × T). */
static const float *head_map(const dfl_vit_model *m, const vacts *a, int64_t l, int64_t b, int64_t h, float *scr)
{
    const float *A = map_at(m, a, b, m->nm * h);
    if (m->nm != 2) return A;
    const float *P2 = map_at(m, a, b, m->nm * h + 1), lam = m->lambda[l];
    for (int64_t i = 0; i < m->T * m->T; i++)
        scr[i] = A[i] - lam * P2[i];
    return scr;
}

/* Analysis head h of image b: maps P[b, nm·h + t] = softmax(scale·Q_t·K_tᵀ) over every
 * key; A = P1 (ViT) or P1 − λ·P2; O = A·V_h; Diff: att = RMSNorm(O)·subln·(1 − λ_init). */
static void attn_fwd(const dfl_vit_model *m, int64_t l, int64_t b, int64_t h, float *scr)
{
    const vacts *a = &m->a[l];
    const int64_t T = m->T, D = m->D, d = m->d, W = m->W;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t off = (size_t)b * (size_t)T * (size_t)D;
    float *sA = scr;
    for (int t = 0; t < m->nm; t++) {
        int64_t col = (m->nm * h + t) * d;
        float *P = map_at(m, a, b, m->nm * h + t);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)d, scale, a->q + off + col, (int)D,
                    a->k + off + col, (int)D, 0.0f, P, (int)T);
        dfl_softmax_causal(P, T, T, T, m->lim);
    }
    const float *A = head_map(m, a, l, b, h, sA);
    float *O = (m->nm == 2 ? a->opre : a->att) + off + h * W;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)W, (int)T, 1.0f, A, (int)T, a->v + off + h * W,
                (int)D, 0.0f, O, (int)D);
    if (m->nm == 2) {
        const float *g = m->w.L[l].subln, cs = (float)(1.0 - m->p.lambda_init);
        for (int64_t i = 0; i < T; i++) {
            const float *o = O + i * D;
            float *y = a->att + off + i * D + h * W, ss = 0.0f;
            for (int64_t j = 0; j < W; j++)
                ss += o[j] * o[j];
            float r = 1.0f / sqrtf(ss / (float)W + SUBNORM_EPS);
            a->rstdh[((size_t)b * (size_t)T + (size_t)i) * (size_t)m->Hd + (size_t)h] = r;
            for (int64_t j = 0; j < W; j++)
                y[j] = o[j] * r * g[j] * cs;
        }
    }
}

/* The backward of attn_fwd: dq, dk, dv of head h's columns (disjoint per task), the
 * λ and sub-norm partials of task b·Hd + h. */
static void attn_bwd(dfl_vit_model *m, int64_t l, int64_t b, int64_t h, float *scr)
{
    const vacts *a = &m->a[l];
    const int64_t T = m->T, D = m->D, d = m->d, W = m->W;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t off = (size_t)b * (size_t)T * (size_t)D, task = (size_t)(b * m->Hd + h);
    float *sA = scr, *sdA = scr + T * T, *sdS = scr + 2 * T * T, *sdO = scr + 3 * T * T;
    const float *dy = m->datt + off + h * W, *dO = dy;
    int64_t ldo = D;
    if (m->nm == 2) {
        /* sub-norm: y = cs·g·O·r; dO = r·u − O·r³·(u·O)/W with u = cs·g·dy; dg += dy·cs·O·r */
        const float *O = a->opre + off + h * W, *g = m->w.L[l].subln, cs = (float)(1.0 - m->p.lambda_init);
        float *dsub = m->dsub_part + task * (size_t)W;
        memset(dsub, 0, (size_t)W * sizeof *dsub);
        for (int64_t i = 0; i < T; i++) {
            const float *o = O + i * D, *dr = dy + i * D;
            float r = a->rstdh[((size_t)b * (size_t)T + (size_t)i) * (size_t)m->Hd + (size_t)h], dot = 0.0f;
            for (int64_t j = 0; j < W; j++)
                dot += cs * g[j] * dr[j] * o[j];
            float k = r * r * r * dot / (float)W;
            for (int64_t j = 0; j < W; j++) {
                sdO[i * W + j] = r * cs * g[j] * dr[j] - o[j] * k;
                dsub[j] += dr[j] * cs * o[j] * r;
            }
        }
        dO = sdO, ldo = W;
    }
    const float *A = head_map(m, a, l, b, h, sA);
    /* dA = dO·Vᵀ, dV = Aᵀ·dO */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)W, 1.0f, dO, (int)ldo, a->v + off + h * W,
                (int)D, 0.0f, sdA, (int)T);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)W, (int)T, 1.0f, A, (int)T, dO, (int)ldo, 0.0f,
                m->dv + off + h * W, (int)D);
    if (m->nm == 2) { /* dλ = −Σ dA ⊙ P2 */
        const float *P2 = map_at(m, a, b, m->nm * h + 1);
        double s = 0.0;
        for (int64_t i = 0; i < T * T; i++)
            s -= (double)sdA[i] * P2[i];
        m->dlam_part[task] = s;
    }
    for (int t = 0; t < m->nm; t++) {
        /* softmax backward: dS = P ⊙ (dP − rowsum(dP ⊙ P)), dP = coef·dA */
        const float *P = map_at(m, a, b, m->nm * h + t), coef = t == 0 ? 1.0f : -m->lambda[l];
        for (int64_t i = 0; i < T; i++) {
            const float *pr = P + i * T, *dar = sdA + i * T;
            float dot = 0.0f;
            for (int64_t j = 0; j < T; j++)
                dot += pr[j] * dar[j];
            for (int64_t j = 0; j < T; j++)
                sdS[i * T + j] = coef * pr[j] * (dar[j] - dot);
        }
        int64_t col = (m->nm * h + t) * d;
        /* S = scale·Q·Kᵀ: dQ = scale·dS·K, dK = scale·dSᵀ·Q */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)d, (int)T, scale, sdS, (int)T,
                    a->k + off + col, (int)D, 0.0f, m->dq + off + col, (int)D);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)d, (int)T, scale, sdS, (int)T,
                    a->q + off + col, (int)D, 0.0f, m->dk + off + col, (int)D);
    }
}

/* ------------------------------------------------------------ the passes */

static void forward(dfl_vit_model *m, const float *px, int64_t B)
{
    const int64_t S = m->S, P = m->P, G = m->G, N = m->N, T = m->T, D = m->D, F = m->F, E = m->E, K = m->K;
    const int64_t BT = B * T;
    const float eps = (float)(m->p.diff ? 1e-5 : 1e-6);
    /* patches [B·N, K], values channel, row, column (the Conv2d kernel's order) */
    for (int64_t b = 0; b < B; b++)
        for (int64_t gy = 0; gy < G; gy++)
            for (int64_t gx = 0; gx < G; gx++) {
                float *row = m->patches + ((b * N) + gy * G + gx) * K;
                const float *im = px + b * 3 * S * S;
                for (int64_t ch = 0; ch < 3; ch++)
                    for (int64_t py = 0; py < P; py++)
                        memcpy(row + (ch * P + py) * P, im + (ch * S + gy * P + py) * S + gx * P,
                               (size_t)P * sizeof(float));
            }
    float *x = m->a[0].x_in;                                                /* [BT, D] */
    linear(m->dpatch, m->patches, m->w.patch_w, m->w.patch_b, B * N, K, D); /* dpatch as scratch */
    for (int64_t b = 0; b < B; b++) {
        memcpy(x + b * T * D, m->w.cls, (size_t)D * sizeof(float));
        memcpy(x + (b * T + 1) * D, m->dpatch + b * N * D, (size_t)(N * D) * sizeof(float));
        dfl_add_inplace(x + b * T * D, m->w.pos, (size_t)(T * D));
    }
    for (int64_t l = 0; l < m->p.layers; l++) {
        const vlayer *y = &m->w.L[l];
        vacts *a = &m->a[l];
        float *xn = l + 1 < m->p.layers ? m->a[l + 1].x_in : m->x_out;
        m->lambda[l] = m->nm == 2 ? layer_lambda(m, l) : 0.0f;
        dfl_layernorm(a->h1, a->x_in, y->ln1w, y->ln1b, BT, D, eps);
        linear(a->q, a->h1, y->wq, y->bq, BT, D, D);
        linear(a->k, a->h1, y->wk, y->bk, BT, D, D);
        linear(a->v, a->h1, y->wv, y->bv, BT, D, D);
        int64_t tasks = B * m->Hd;
#pragma omp parallel for schedule(dynamic, 1) num_threads(m->nth)
        for (int64_t t = 0; t < tasks; t++)
            attn_fwd(m, l, t / m->Hd, t % m->Hd, m->scratch + (size_t)omp_get_thread_num() * m->scratch_per);
        linear(a->x_mid, a->att, y->wo, y->bo, BT, D, D);
        dfl_add_inplace(a->x_mid, a->x_in, (size_t)(BT * D));
        dfl_layernorm(a->h2, a->x_mid, y->ln2w, y->ln2b, BT, D, eps);
        linear(a->f1, a->h2, y->fc1, y->b1, BT, D, F);
        memcpy(a->g1, a->f1, (size_t)(BT * F) * sizeof(float));
        dfl_gelu_erf(a->g1, (size_t)(BT * F));
        linear(xn, a->g1, y->fc2, y->b2, BT, F, D);
        dfl_add_inplace(xn, a->x_mid, (size_t)(BT * D));
    }
    /* head: f = norm(x_out[class row]); e = f·proj; t_k = LN(c_k); z = s·cos(e, t) */
    for (int64_t b = 0; b < B; b++)
        memcpy(m->xc + b * D, m->x_out + b * T * D, (size_t)D * sizeof(float));
    dfl_layernorm(m->fcls, m->xc, m->w.normw, m->w.normb, B, D, eps);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)E, (int)D, 1.0f, m->fcls, (int)D, m->w.proj,
                (int)E, 0.0f, m->e, (int)E);
    dfl_layernorm(m->tk, m->w.cvec, NULL, NULL, C_CLS, E, (float)TEXT_LN_EPS);
    const double sc = exp((double)(float)log(10.0));
    for (int64_t b = 0; b < B; b++) {
        double ne = sqrt(dfl__train_dotd(m->e + b * E, m->e + b * E, E)), mx = -INFINITY, zs = 0;
        for (int k = 0; k < C_CLS; k++) {
            double nt = sqrt(dfl__train_dotd(m->tk + k * E, m->tk + k * E, E));
            double z = sc * dfl__train_dotd(m->e + b * E, m->tk + k * E, E) / (ne * nt);
            m->z[b * C_CLS + k] = (float)z;
            mx = z > mx ? z : mx;
        }
        for (int k = 0; k < C_CLS; k++)
            zs += exp((double)m->z[b * C_CLS + k] - mx);
        for (int k = 0; k < C_CLS; k++)
            m->pr[b * C_CLS + k] = (float)(exp((double)m->z[b * C_CLS + k] - mx) / zs);
    }
}

static void backward(dfl_vit_model *m)
{
    const int64_t B = m->B, N = m->N, T = m->T, D = m->D, F = m->F, E = m->E, K = m->K, BT = B * T;
    const double eps = m->p.diff ? 1e-5 : 1e-6, sc = exp((double)(float)log(10.0));
    memset(m->tm.grads, 0, m->tm.n_params * sizeof(float));
    /* head: dz = (p − onehot)/B; z_bk = s·ê_b·t̂_k */
    memset(m->de, 0, (size_t)(B * E) * sizeof(float));
    memset(m->dtk, 0, (size_t)(C_CLS * E) * sizeof(float));
    double nt[C_CLS];
    for (int k = 0; k < C_CLS; k++)
        nt[k] = sqrt(dfl__train_dotd(m->tk + k * E, m->tk + k * E, E));
    for (int64_t b = 0; b < B; b++) {
        const float *e = m->e + b * E;
        double ne = sqrt(dfl__train_dotd(e, e, E));
        for (int k = 0; k < C_CLS; k++) {
            const float *t = m->tk + k * E;
            double dz = ((double)m->pr[b * C_CLS + k] - (k == m->labels[b])) / (double)B;
            double cs = dfl__train_dotd(e, t, E) / (ne * nt[k]);
            for (int64_t j = 0; j < E; j++) {
                m->de[b * E + j] += (float)(dz * sc * (t[j] / nt[k] - cs * e[j] / ne) / ne);
                m->dtk[k * E + j] += (float)(dz * sc * (e[j] / ne - cs * t[j] / nt[k]) / nt[k]);
            }
        }
    }
    ln_bwd(m->g.cvec, NULL, NULL, m->dtk, m->w.cvec, NULL, C_CLS, E, TEXT_LN_EPS);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)D, (int)E, (int)B, 1.0f, m->fcls, (int)D, m->de, (int)E,
                1.0f, m->g.proj, (int)E);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)D, (int)E, 1.0f, m->de, (int)E, m->w.proj, (int)E,
                0.0f, m->dfc, (int)D);
    memset(m->dx, 0, (size_t)(BT * D) * sizeof(float));
    memset(m->dpatch, 0, (size_t)(B * D) * sizeof(float));
    ln_bwd(m->dpatch, m->g.normw, m->g.normb, m->dfc, m->xc, m->w.normw, B, D, eps); /* dpatch as [B, D] scratch */
    for (int64_t b = 0; b < B; b++)
        memcpy(m->dx + b * T * D, m->dpatch + b * D, (size_t)D * sizeof(float));

    for (int64_t l = m->p.layers - 1; l >= 0; l--) {
        const vlayer *y = &m->w.L[l];
        vlayer *gy = &m->g.L[l];
        const vacts *a = &m->a[l];
        /* MLP: dx = d(x_next), passing to x_mid through the residual */
        dfl__train_mm_bwd(m->df, 0.0f, gy->fc2, m->dx, a->g1, y->fc2, BT, F, D);
        colsum(gy->b2, m->dx, BT, D);
        for (int64_t i = 0; i < BT * F; i++) { /* GELU'(x) = Φ(x) + x·φ(x) */
            double u = a->f1[i];
            m->df[i] *=
                (float)(0.5 * (1.0 + erf(u * 0.70710678118654752)) + u * exp(-0.5 * u * u) * 0.3989422804014327);
        }
        dfl__train_mm_bwd(m->dh, 0.0f, gy->fc1, m->df, a->h2, y->fc1, BT, D, F);
        colsum(gy->b1, m->df, BT, F);
        ln_bwd(m->dx, gy->ln2w, gy->ln2b, m->dh, a->x_mid, y->ln2w, BT, D, eps);
        /* attention: dx = d(x_mid), passing to x_in through the residual */
        dfl__train_mm_bwd(m->datt, 0.0f, gy->wo, m->dx, a->att, y->wo, BT, D, D);
        colsum(gy->bo, m->dx, BT, D);
        int64_t tasks = B * m->Hd;
#pragma omp parallel for schedule(dynamic, 1) num_threads(m->nth)
        for (int64_t t = 0; t < tasks; t++)
            attn_bwd(m, l, t / m->Hd, t % m->Hd, m->scratch + (size_t)omp_get_thread_num() * m->scratch_per);
        if (m->nm == 2) {
            double dlam = 0.0;
            for (int64_t t = 0; t < tasks; t++)
                dlam += m->dlam_part[t];
            dfl__train_lambda_bwd(dlam, y->lq1, y->lk1, y->lq2, y->lk2, gy->lq1, gy->lk1, gy->lq2, gy->lk2, m->d);
            for (int64_t t = 0; t < tasks; t++)
                for (int64_t j = 0; j < m->W; j++)
                    gy->subln[j] += m->dsub_part[(size_t)t * (size_t)m->W + (size_t)j];
        }
        dfl__train_mm_bwd(m->dh, 0.0f, gy->wq, m->dq, a->h1, y->wq, BT, D, D);
        dfl__train_mm_bwd(m->dh, 1.0f, gy->wk, m->dk, a->h1, y->wk, BT, D, D);
        dfl__train_mm_bwd(m->dh, 1.0f, gy->wv, m->dv, a->h1, y->wv, BT, D, D);
        colsum(gy->bq, m->dq, BT, D);
        colsum(gy->bk, m->dk, BT, D);
        colsum(gy->bv, m->dv, BT, D);
        ln_bwd(m->dx, gy->ln1w, gy->ln1b, m->dh, a->x_in, y->ln1w, BT, D, eps);
    }
    /* embedding: class token, positions, the patch projection */
    for (int64_t b = 0; b < B; b++) {
        const float *dr = m->dx + b * T * D;
        for (int64_t j = 0; j < D; j++)
            m->g.cls[j] += dr[j];
        for (int64_t j = 0; j < T * D; j++)
            m->g.pos[j] += dr[j];
        memcpy(m->dpatch + b * N * D, dr + D, (size_t)(N * D) * sizeof(float));
    }
    dfl__train_mm_bwd(NULL, 0.0f, m->g.patch_w, m->dpatch, m->patches, m->w.patch_w, B * N, K, D);
    colsum(m->g.patch_b, m->dpatch, B * N, D);
}

dfl_status dfl_vit_step(dfl_vit_model *m, const float *px, const int *labels, int64_t B, int grads, double *loss,
                        float *probs, dfl_error *err)
{
    if (B < 1 || B > m->Bmax)
        return dfl__fail(err, DFL_ERR_USAGE, "batch %lld is outside [1, %lld]", (long long)B, (long long)m->Bmax);
    for (int64_t b = 0; b < B; b++)
        if (labels[b] < 0 || labels[b] >= C_CLS)
            return dfl__fail(err, DFL_ERR_USAGE, "label %d of image %lld is outside [0, %d)", labels[b], (long long)b,
                             C_CLS);
    m->B = B;
    memcpy(m->labels, labels, (size_t)B * sizeof *labels);
    forward(m, px, B);
    double s = 0;
    for (int64_t b = 0; b < B; b++) {
        const float *z = m->z + b * C_CLS;
        double mx = z[0], zs = 0;
        for (int k = 1; k < C_CLS; k++)
            mx = z[k] > mx ? z[k] : mx;
        for (int k = 0; k < C_CLS; k++)
            zs += exp((double)z[k] - mx);
        s += mx + log(zs) - (double)z[labels[b]];
    }
    *loss = s / (double)B;
    if (probs) memcpy(probs, m->pr, (size_t)(B * C_CLS) * sizeof(float));
    if (grads) backward(m);
    return DFL_OK;
}

/* ------------------------------------------------------------ saving */

typedef struct saver {
    dfl_tensor ts[MAX_TENSORS + 40];
    char names[MAX_TENSORS + 40][96];
    size_t n;
} saver;

static void put(saver *sv, const char *name, int ndim, const int64_t *shape, const float *data)
{
    dfl_tensor *t = &sv->ts[sv->n];
    snprintf(sv->names[sv->n], sizeof sv->names[sv->n], "%s", name);
    t->name = sv->names[sv->n], t->dtype = DFL_DTYPE_F32, t->ndim = ndim;
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i], n *= (size_t)shape[i];
    t->data = data, t->nbytes = n * sizeof(float);
    sv->n++;
}

dfl_status dfl_vit_save(const dfl_vit_model *m, const char *dir, int overwrite, dfl_error *err)
{
    const int64_t E = m->E, Fe = 4;
    saver *sv = calloc(1, sizeof *sv);
    /* the text tower's constant weights: zeros, ones, the identity projection */
    size_t nz = (size_t)(3 * E * E + Fe * E + 3 * E);
    float *zeros = calloc(nz, sizeof(float)), *ones = malloc((size_t)(2 * E) * sizeof(float));
    float *eye = calloc((size_t)(E * E), sizeof(float));
    dfl_strbuf cfg = {0};
    dfl_status s = DFL_OK;
    if (!sv || !zeros || !ones || !eye) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < 2 * E; i++)
        ones[i] = 1.0f;
    for (int64_t i = 0; i < E; i++)
        eye[i * E + i] = 1.0f;
    for (size_t i = 0; i < m->n_vt; i++) {
        const vtensor *t = &m->vt[i];
        put(sv, strcmp(t->name, "class_vectors") ? t->name : "token_embedding.weight", t->ndim, t->shape,
            m->tm.params + t->offset);
    }
    const float logit_scale = (float)log(10.0);
    int64_t shE[1] = {E}, sh3E[1] = {3 * E}, shEE[2] = {E, E};
    int64_t sh3EE[2] = {3 * E, E}, shFE[2] = {Fe, E}, shEF[2] = {E, Fe}, shF[1] = {Fe}, shpos[2] = {1, E};
    int64_t shd[1] = {E / 2}, sh0[1] = {0};
    put(sv, "positional_embedding", 2, shpos, zeros);
    const char *p0 = "transformer.resblocks.0.";
    char nm[64];
#define PUT(suffix, nd, sh, data) (snprintf(nm, sizeof nm, "%s%s", p0, suffix), put(sv, nm, nd, sh, data))
    PUT("ln_1.weight", 1, shE, ones);
    PUT("ln_1.bias", 1, shE, zeros);
    if (m->p.diff) { /* 2 sub-heads of E/2: one differential head */
        PUT("attn.q_proj.weight", 2, shEE, zeros);
        PUT("attn.q_proj.bias", 1, shE, zeros);
        PUT("attn.k_proj.weight", 2, shEE, zeros);
        PUT("attn.k_proj.bias", 1, shE, zeros);
        PUT("attn.v_proj.weight", 2, shEE, zeros);
        PUT("attn.v_proj.bias", 1, shE, zeros);
        PUT("attn.lambda_q1", 1, shd, zeros);
        PUT("attn.lambda_k1", 1, shd, zeros);
        PUT("attn.lambda_q2", 1, shd, zeros);
        PUT("attn.lambda_k2", 1, shd, zeros);
        PUT("attn.diff_norm.weight", 1, shE, ones);
    } else {
        PUT("attn.in_proj_weight", 2, sh3EE, zeros);
        PUT("attn.in_proj_bias", 1, sh3E, zeros);
    }
    PUT("attn.out_proj.weight", 2, shEE, zeros);
    PUT("attn.out_proj.bias", 1, shE, zeros);
    PUT("ln_2.weight", 1, shE, ones);
    PUT("ln_2.bias", 1, shE, zeros);
    PUT("mlp.c_fc.weight", 2, shFE, zeros);
    PUT("mlp.c_fc.bias", 1, shF, zeros);
    PUT("mlp.c_proj.weight", 2, shEF, zeros);
    PUT("mlp.c_proj.bias", 1, shE, zeros);
#undef PUT
    put(sv, "ln_final.weight", 1, shE, ones);
    put(sv, "ln_final.bias", 1, shE, zeros);
    put(sv, "text_projection", 2, shEE, eye);
    put(sv, "logit_scale", 0, sh0, &logit_scale);
    char pre[512];
    dfl__shapes_preprocess_json(pre, sizeof pre, m->S);
    dfl_strbuf_printf(&cfg,
                      "{\n  \"model_type\": \"%s\",\n  \"embed_dim\": %lld,\n  \"vision_config\": {\"image_size\": "
                      "%lld, \"patch_size\": %lld, \"width\": %lld, \"layers\": %lld, \"heads\": %lld, "
                      "\"mlp_width\": %lld, \"layer_norm_eps\": %s, \"hidden_act\": \"gelu\"",
                      m->p.diff ? "diffclip" : "clip", (long long)E, (long long)m->S, (long long)m->P, (long long)m->D,
                      (long long)m->p.layers, (long long)m->Hs, (long long)m->F, m->p.diff ? "1e-5" : "1e-6");
    if (m->p.diff) dfl_strbuf_printf(&cfg, ", \"lambda_init\": %.17g", m->p.lambda_init);
    dfl_strbuf_printf(&cfg,
                      "},\n  \"text_config\": {\"context_length\": 1, \"vocab_size\": %d, \"width\": %lld, "
                      "\"layers\": 1, \"heads\": 2, \"mlp_width\": %lld, \"layer_norm_eps\": 1e-5, "
                      "\"hidden_act\": \"quick_gelu\"",
                      C_CLS, (long long)E, (long long)Fe);
    if (m->p.diff) dfl_strbuf_printf(&cfg, ", \"lambda_init\": %.17g", m->p.lambda_init);
    dfl_strbuf_printf(&cfg, "},\n  \"preprocess\": %s\n}\n", pre);
    if (cfg.oom) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto done;
    }
    char path[4200];
    if ((s = dfl__train_make_dirs(dir, err))) goto done;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if ((s = dfl_st_write(path, sv->ts, sv->n, overwrite, err))) goto done;
    snprintf(path, sizeof path, "%s/config.json", dir);
    s = dfl__atomic_write(path, cfg.p, cfg.len, overwrite, err);
done:
    dfl_strbuf_free(&cfg);
    free(sv), free(zeros), free(ones), free(eye);
    return s;
}

/* ------------------------------------------------------------ the run */

/* images [n] of stream at indices first.. into px[n, 3, S, S] and labels[n] */
static void batch_images(const dfl_vit_model *m, uint64_t stream, uint64_t first, int64_t n, float *px, int *labels,
                         uint8_t *rgb)
{
    const int64_t S = m->S;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        int box[4];
        uint8_t *im = rgb + (size_t)i * (size_t)(S * S * 3);
        dfl_shapes_sample(m->p.seed, stream, first + (uint64_t)i, S, im, &labels[i], box);
        dfl_shapes_normalize(im, S, px + (size_t)i * (size_t)(3 * S * S));
    }
}

static dfl_status evaluate(dfl_vit_model *m, float *px, int *labels, uint8_t *rgb, double *loss, double *acc,
                           dfl_error *err)
{
    int64_t n = m->p.eval_samples, B = m->Bmax, right = 0;
    double sum = 0;
    float *pr = malloc((size_t)(B * C_CLS) * sizeof(float));
    if (!pr) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    dfl_status s = DFL_OK;
    for (int64_t i = 0; !s && i < n; i += B) {
        int64_t k = n - i < B ? n - i : B;
        double l;
        batch_images(m, 1, (uint64_t)i, k, px, labels, rgb);
        if ((s = dfl_vit_step(m, px, labels, k, 0, &l, pr, err))) break;
        sum += l * (double)k;
        for (int64_t b = 0; b < k; b++) {
            int best = 0;
            for (int c = 1; c < C_CLS; c++)
                if (pr[b * C_CLS + c] > pr[b * C_CLS + best]) best = c;
            right += best == labels[b];
        }
    }
    free(pr);
    *loss = sum / (double)n, *acc = (double)right / (double)n;
    return s;
}

dfl_status dfl_vit_train(const dfl_vit_params *p, void (*report)(void *user, const dfl_vit_report *r), void *user,
                         dfl_vit_result *res, dfl_error *err)
{
    memset(res, 0, sizeof *res);
    res->loss = res->eval_loss = res->eval_acc = NAN;
    if (!p->out) return dfl__fail(err, DFL_ERR_USAGE, "no output directory");
    dfl_vit_model *m = NULL;
    dfl_status s = dfl_vit_create(p, &m, err);
    if (s) return s;
    res->n_params = m->tm.n_params;
    const int64_t S = m->S, B = m->Bmax;
    float *px = dfl__alloc_array((size_t)B, (size_t)(3 * S * S) * sizeof(float));
    uint8_t *rgb = dfl__alloc_array((size_t)B, (size_t)(3 * S * S));
    int *labels = calloc((size_t)B, sizeof *labels);
    dfl_strbuf csv = {0};
    dfl_strbuf_printf(&csv, "step,lr,loss,eval_loss,eval_acc\n");
    double t0 = dfl_clock_seconds();
    if (!px || !rgb || !labels) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!s) s = dfl__train_make_dirs(p->out, err);
    if (!s) {
        char path[4200];
        snprintf(path, sizeof path, "%s/model.safetensors", p->out);
        s = dfl__check_overwrite(path, p->overwrite, err);
    }
    for (int64_t step = 0; !s && step < p->steps; step++) {
        double loss, lr = dfl_train_lr(step, p->steps, p->warmup, p->lr, p->min_lr);
        batch_images(m, 0, (uint64_t)(step * B), B, px, labels, rgb);
        if ((s = dfl_vit_step(m, px, labels, B, 1, &loss, NULL, err))) break;
        double gn = dfl_train_clip(&m->tm, p->clip);
        if (!isfinite(loss) || !isfinite(gn)) {
            s = dfl__fail(err, DFL_ERR_RANGE, "step %lld: the loss or gradient norm is not finite",
                          (long long)step + 1);
            break;
        }
        dfl_adamw o = {lr, p->beta1, p->beta2, p->eps, p->weight_decay};
        dfl_train_adamw(&m->tm, &o, step + 1);
        res->loss = loss;
        dfl_vit_report r = {step + 1, p->steps, lr, loss, 0, NAN, NAN};
        int ev = (p->eval_every > 0 && (step + 1) % p->eval_every == 0) || step + 1 == p->steps;
        if (ev) {
            if ((s = evaluate(m, px, labels, rgb, &r.eval_loss, &r.eval_acc, err))) break;
            r.is_eval = 1, res->eval_loss = r.eval_loss, res->eval_acc = r.eval_acc;
            dfl_strbuf_printf(&csv, "%lld,%.6g,%.6f,%.6f,%.6f\n", (long long)step + 1, lr, loss, r.eval_loss,
                              r.eval_acc);
        } else {
            dfl_strbuf_printf(&csv, "%lld,%.6g,%.6f,,\n", (long long)step + 1, lr, loss);
        }
        if (report) report(user, &r);
    }
    if (!s && !dfl_all_finite(m->tm.params, m->tm.n_params))
        s = dfl__fail(err, DFL_ERR_RANGE, "the trained weights are not finite");
    if (!s && csv.oom) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!s) s = dfl_vit_save(m, p->out, p->overwrite, err);
    if (!s) {
        char path[4200];
        snprintf(path, sizeof path, "%s/train.csv", p->out);
        s = dfl__atomic_write(path, csv.p, csv.len, p->overwrite, err);
    }
    res->seconds = dfl_clock_seconds() - t0;
    dfl_strbuf_free(&csv);
    free(px), free(rgb), free(labels);
    dfl_vit_free(m);
    return s;
}
