/* train_pass.c — the trainer's forward pass (keeping activations) and its backward
 * pass, for a batch of B sequences of T tokens, in the llm.c manner: every layer's
 * inputs and intermediates are stored, and the backward pass walks them in reverse.
 *
 * Notation: BT = B·T rows; D hidden, F ffn, V vocab; q_ld/k_ld/v_ld/att_ld the widths
 * of the q, k, v and head-output buffers (train_internal.h). All [rows, cols]
 * row-major. Weight gradients accumulate into m->grads, which backward zeroes first.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels.h"
#include "train/train.h"
#include "train/train_internal.h"

/* Row chunks for reductions over rows (norm gains): a fixed count, so sums are
 * added in the same order whatever the thread count. */
#define NCHUNK 32
/* Below this many elements an elementwise loop runs serially: a parallel region's
 * start and barrier cost more than the work (and much more on a busy machine). */
#define PAR_MIN 32768
/* Attention blocks of 64 rows: a causal T x T product costs (1 + T/64)/2 of a full one
 * at 64-row sgemm efficiency. */
#define ATTN_BLOCK 64

/* ------------------------------------------------------------ workspace */

typedef struct layer_acts {
    float *x_in;      /* [BT, D] residual stream entering the layer */
    float *xn1;       /* [BT, D] rmsnorm(x_in)·attn_norm */
    float *rstd1;     /* [BT] 1/rms of x_in */
    float *q, *k, *v; /* [BT, q_ld], [BT, k_ld], [BT, v_ld]; q, k after RoPE */
    float *P;         /* [B, heads, nmaps, T, T] softmax maps (0 above the diagonal) */
    float *opre;      /* [BT, att_ld] Diff: A·v before the sub-layer norm */
    float *rstdh;     /* [BT, heads] Diff: 1/rms of each head's A·v row */
    float *att;       /* [BT, att_ld] heads' outputs (input of o_proj) */
    float *x_mid;     /* [BT, D] after the attention residual */
    float *xn2;       /* [BT, D] */
    float *rstd2;     /* [BT] */
    float *gate, *up; /* [BT, F] before the activation */
    float *hsw;       /* [BT, F] silu(gate)·up */
    float *lam;       /* [BT, heads] DIFF V2: σ(lambda_proj(xn1)), the factor on map 2 of each row */
} layer_acts;

struct dfl_train_ws {
    int64_t Bmax, T, B, nth;
    int64_t block; /* attention row/key block (causal: blocks above the diagonal are skipped) */
    dfl__train_geom g;
    dfl__head_plan *plan;      /* [heads] */
    layer_acts *acts;          /* [L] */
    float *x_out;              /* [BT, D] residual after the last layer */
    float *xnf, *rstdf;        /* [BT, D], [BT] final norm */
    float *logits;             /* [BT, V] */
    float *lambda;             /* [L] λ of the last forward */
    double *row_loss;          /* [BT] */
    int32_t *tokens, *targets; /* [BT] copies of the last forward's inputs */
    int64_t count;             /* rows with a target */
    /* backward */
    float *dx, *dxn, *dtmp;  /* [BT, D] */
    float *datt;             /* [BT, att_ld] */
    float *dq, *dk, *dv;     /* [BT, q_ld], [BT, k_ld], [BT, v_ld] */
    float *dgate, *dup, *dh; /* [BT, F] */
    float *dlogits;          /* [BT, V] */
    float *scratch;          /* [nth, 3·T·T + T·width] per-thread attention scratch; the
                              * attention regions run at most nth threads */
    size_t scratch_per;
    double *dlam_part;             /* [Bmax·heads] */
    float *dlamt;                  /* [BT, heads] DIFF V2: dloss/dσ(λ) of each row, then dloss/d(lambda_proj·xn1) */
    float *dsub_part;              /* [Bmax·heads, width] */
    float *gpart;                  /* [NCHUNK, D] norm-gain partial sums */
    float *cos_t, *sin_t, *nsin_t; /* [T, dq/2]; nsin = −sin rotates back */
    void **owned;
    size_t n_owned, cap_owned;
    int failed;
    int dry;     /* only count: ws_take adds to `need` and allocates nothing */
    size_t need; /* bytes ws_take was asked for */
};

/* Allocate a × b elements of `size` bytes, overflow-checked, registered for freeing. */
static void *ws_take(dfl_train_ws *w, size_t a, size_t b, size_t size)
{
    size_t n, bytes;
    if (w->failed || !dfl__mul_ok(a, b, &n) || !dfl__mul_ok(n, size, &bytes) || w->n_owned == w->cap_owned) {
        w->failed = 1;
        return NULL;
    }
    if (bytes > SIZE_MAX - w->need)
        w->failed = 1;
    else
        w->need += bytes;
    if (w->dry) return NULL;
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p)
        w->failed = 1;
    else
        w->owned[w->n_owned++] = p;
    return p;
}

void dfl_train_ws_free(dfl_train_ws *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_owned; i++)
        free(w->owned[i]);
    free(w->owned);
    free(w);
}

/* The workspace for config c, or with dry only its size: *need gets the bytes it
 * allocates (the plan and the per-layer table, then every array) and nothing else is
 * allocated or filled. */
static dfl_status ws_build(const dfl_config *c, int64_t max_batch, int64_t T, int dry, dfl_train_ws **out, size_t *need,
                           dfl_error *err)
{
    *out = NULL;
    if (max_batch < 1 || T < 1 || max_batch > (1 << 20) || T > (1 << 20))
        return dfl__fail(err, DFL_ERR_USAGE, "training batch %lld x %lld tokens is out of range", (long long)max_batch,
                         (long long)T);
    dfl_train_ws *w = calloc(1, sizeof *w);
    if (!w) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    const size_t L = (size_t)c->num_layers;
    w->cap_owned = 64 + 17 * L;
    w->owned = calloc(w->cap_owned, sizeof *w->owned);
    if (!w->owned) {
        free(w);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    w->Bmax = max_batch, w->T = T;
    w->block = ATTN_BLOCK;
    w->nth = omp_get_max_threads();
    w->g = dfl__train_geom_make(c);
    const dfl__train_geom *g = &w->g;
    size_t BT = (size_t)max_batch * (size_t)T, t = (size_t)T, D = (size_t)c->hidden_size;
    size_t F = (size_t)c->intermediate_size, V = (size_t)c->vocab_size, H = (size_t)g->heads;
    size_t TT = t * t, maps_n;
    if (!dfl__mul_ok((size_t)max_batch * H * (size_t)g->nmaps, TT, &maps_n)) w->failed = 1;
    w->plan = ws_take(w, H, 1, sizeof(dfl__head_plan));
    w->acts = ws_take(w, L, 1, sizeof(layer_acts));
    w->dry = dry; /* the two tables above are needed to lay out the rest */
    for (size_t l = 0; l < L && !w->failed; l++) {
        layer_acts *a = &w->acts[l];
        a->x_in = ws_take(w, BT, D, 4);
        a->xn1 = ws_take(w, BT, D, 4);
        a->rstd1 = ws_take(w, BT, 1, 4);
        a->q = ws_take(w, BT, (size_t)g->q_ld, 4);
        a->k = ws_take(w, BT, (size_t)g->k_ld, 4);
        a->v = ws_take(w, BT, (size_t)g->v_ld, 4);
        a->P = ws_take(w, maps_n, 1, 4);
        if (g->subnorm) {
            a->opre = ws_take(w, BT, (size_t)g->att_ld, 4);
            a->rstdh = ws_take(w, BT, H, 4);
        }
        if (g->token_lambda) a->lam = ws_take(w, BT, H, 4);
        a->att = ws_take(w, BT, (size_t)g->att_ld, 4);
        a->x_mid = ws_take(w, BT, D, 4);
        a->xn2 = ws_take(w, BT, D, 4);
        a->rstd2 = ws_take(w, BT, 1, 4);
        a->gate = ws_take(w, BT, F, 4);
        a->up = ws_take(w, BT, F, 4);
        a->hsw = ws_take(w, BT, F, 4);
    }
    w->x_out = ws_take(w, BT, D, 4);
    w->xnf = ws_take(w, BT, D, 4);
    w->rstdf = ws_take(w, BT, 1, 4);
    w->logits = ws_take(w, BT, V, 4);
    w->lambda = ws_take(w, L, 1, 4);
    w->row_loss = ws_take(w, BT, 1, sizeof(double));
    w->tokens = ws_take(w, BT, 1, sizeof(int32_t));
    w->targets = ws_take(w, BT, 1, sizeof(int32_t));
    w->dx = ws_take(w, BT, D, 4);
    w->dxn = ws_take(w, BT, D, 4);
    w->dtmp = ws_take(w, BT, D, 4);
    w->datt = ws_take(w, BT, (size_t)g->att_ld, 4);
    w->dq = ws_take(w, BT, (size_t)g->q_ld, 4);
    w->dk = ws_take(w, BT, (size_t)g->k_ld, 4);
    w->dv = ws_take(w, BT, (size_t)g->v_ld, 4);
    w->dgate = ws_take(w, BT, F, 4);
    w->dup = ws_take(w, BT, F, 4);
    w->dh = ws_take(w, BT, F, 4);
    w->dlogits = ws_take(w, BT, V, 4);
    w->scratch_per = 3 * TT + t * (size_t)g->width; /* T ≤ 2^20 keeps this in range */
    w->scratch = ws_take(w, (size_t)w->nth, w->scratch_per, 4);
    w->dlam_part = ws_take(w, (size_t)max_batch, H, sizeof(double));
    if (g->token_lambda) w->dlamt = ws_take(w, BT, H, 4);
    w->dsub_part = ws_take(w, (size_t)max_batch * H, (size_t)g->width, 4);
    w->gpart = ws_take(w, NCHUNK, D > (size_t)g->width ? D : (size_t)g->width, 4);
    w->cos_t = ws_take(w, t, (size_t)g->dq / 2, 4);
    w->sin_t = ws_take(w, t, (size_t)g->dq / 2, 4);
    w->nsin_t = ws_take(w, t, (size_t)g->dq / 2, 4);
    double *inv_freq = ws_take(w, (size_t)g->dq / 2, 1, sizeof(double));
    if (need) *need = w->need;
    if (dry && !w->failed) {
        dfl_train_ws_free(w);
        return DFL_OK;
    }
    if (w->failed) {
        dfl_train_ws_free(w);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for training on %lld x %lld tokens", (long long)max_batch,
                         (long long)T);
    }
    for (size_t h = 0; h < H; h++)
        w->plan[h] = dfl__head_plan_make(c, (int64_t)h);
    dfl_rope_params rp = {c->rope_theta, DFL_ROPE_NONE, 1.0, 1.0, 4.0, 8192};
    dfl_rope_inv_freq(inv_freq, g->dq, &rp);
    dfl_rope_tables(w->cos_t, w->sin_t, inv_freq, g->dq, T);
    for (size_t i = 0; i < t * (size_t)g->dq / 2; i++)
        w->nsin_t[i] = -w->sin_t[i];
    *out = w;
    return DFL_OK;
}

dfl_status dfl_train_ws_create(const dfl_train_model *m, int64_t max_batch, int64_t T, dfl_train_ws **out,
                               dfl_error *err)
{
    return ws_build(&m->config, max_batch, T, 0, out, NULL, err);
}

dfl_status dfl__train_ws_bytes(const dfl_config *c, int64_t max_batch, int64_t T, size_t *bytes, dfl_error *err)
{
    dfl_train_ws *w = NULL;
    return ws_build(c, max_batch, T, 1, &w, bytes, err);
}

const float *dfl_train_logits(const dfl_train_ws *w)
{
    return w->logits;
}

void dfl__train_ws_set_block(dfl_train_ws *w, int64_t block)
{
    w->block = block > 0 ? block : ATTN_BLOCK;
}

/* ------------------------------------------------------------- rmsnorm */

/* Forward: dfl_rmsnorm_rstd of model/kernels.h (the inference kernel, keeping rstd). */

/* dx += ∂/∂x of y = x·rstd·g given dy; dgain += Σ_rows dy·x·rstd.
 * dx_j = rstd·g_j·dy_j − x_j·rstd³·(Σ_k g_k·dy_k·x_k)/d. part[NCHUNK, d] scratch. */
static void rmsnorm_bwd(float *dx, float *dgain, float *part, const float *dy, const float *x, const float *gain,
                        const float *rstd, int64_t n, int64_t d)
{
#pragma omp parallel for schedule(static) if (n * d > PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        float *pg = part + (size_t)c * (size_t)d;
        memset(pg, 0, (size_t)d * sizeof *pg);
        for (int64_t i = n * c / NCHUNK; i < n * (c + 1) / NCHUNK; i++) {
            const float *xr = x + i * d, *dyr = dy + i * d;
            float *dxr = dx + i * d;
            float r = rstd[i], dot = 0.0f;
            for (int64_t j = 0; j < d; j++)
                dot += gain[j] * dyr[j] * xr[j];
            float k = r * r * r * dot / (float)d;
            for (int64_t j = 0; j < d; j++) {
                dxr[j] += r * gain[j] * dyr[j] - xr[j] * k;
                pg[j] += dyr[j] * xr[j] * r;
            }
        }
    }
    for (int c = 0; c < NCHUNK; c++)
        for (int64_t j = 0; j < d; j++)
            dgain[j] += part[(size_t)c * (size_t)d + j];
}

/* ----------------------------------------------------------- matmuls */

/* Forward products: dfl_matmul_xwt of model/kernels.h. */

/* For y = x·Wᵀ (train_internal.h): dx[n, in] (= or +=, by beta) dy[n, out]·W and dW[out, in] += dyᵀ·x. */
void dfl__train_mm_bwd(float *dx, float beta, float *dW, const float *dy, const float *x, const float *W, int64_t n,
                       int64_t in, int64_t out)
{
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)in, (int)out, 1.0f, dy, (int)out, W,
                    (int)in, beta, dx, (int)in);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in, (int)n, 1.0f, dy, (int)out, x, (int)in,
                1.0f, dW, (int)in);
}

/* ----------------------------------------------------------------- rope */

/* Rotate every head of x[B·T, ld] in place, row i at position i mod T (the library's
 * dfl_rope_row over all B sequences in one parallel region); sin_t = −sin rotates
 * back, which is the backward pass of a rotation. */
static void rope_rows(float *x, int64_t BT, int64_t T, int64_t ld, int64_t nh, int64_t d, const float *cos_t,
                      const float *sin_t, int interleaved)
{
    const int64_t half = d / 2;
#pragma omp parallel for schedule(static) if (BT * ld > PAR_MIN)
    for (int64_t i = 0; i < BT; i++)
        dfl_rope_row(x + i * ld, nh, d, cos_t + (i % T) * half, sin_t + (i % T) * half, interleaved);
}

/* ----------------------------------------------------------- attention */

/* Causal softmax of row i of s[T, T] in place: columns 0..i normalised, the rest 0.
 * Kept apart from the inference kernel on purpose: it uses libm's expf where
 * dfl_softmax_causal uses a vectorised polynomial exp (2 ulp), and switching would
 * change the bits of every model trained so far (demo/models are reproducible from
 * their seed). The Diff sub-layer norm below stays inline too: it is strided over the
 * head's columns and keeps its rstd for the backward pass. */
static void softmax_row(float *r, int64_t i, int64_t T)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t j = 0; j <= i; j++)
        mx = r[j] > mx ? r[j] : mx;
    for (int64_t j = 0; j <= i; j++) {
        r[j] = expf(r[j] - mx);
        sum += r[j];
    }
    float inv = 1.0f / sum;
    for (int64_t j = 0; j <= i; j++)
        r[j] *= inv;
    for (int64_t j = i + 1; j < T; j++)
        r[j] = 0.0f;
}

typedef struct attn_args {
    const dfl_train_ws *w;
    const layer_acts *a;
    const dfl_config *c;
    const float *subln; /* diff_transformer gain, else NULL */
    float lambda, lambda_init, eps;
    int64_t T;
} attn_args;

static float *map_at(const attn_args *x, int64_t b, int64_t h, int t)
{
    const dfl__train_geom *g = &x->w->g;
    return x->a->P +
           (((size_t)b * (size_t)g->heads + (size_t)h) * (size_t)g->nmaps + (size_t)t) * (size_t)x->T * (size_t)x->T;
}

/* A = P1 − λ·P2 into A[T, T] (lower triangle and 0 above). */
static void diff_map(float *A, const float *P1, const float *P2, float lam, int64_t T)
{
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++)
            A[i * T + j] = P1[i * T + j] - lam * P2[i * T + j];
}

/* DIFF V2: row i uses its own λ, lam[i·ld]. */
static void diff_map_rows(float *A, const float *P1, const float *P2, const float *lam, int64_t ld, int64_t T)
{
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++)
            A[i * T + j] = P1[i * T + j] - lam[i * ld] * P2[i * T + j];
}

/* λ of row i of head h of sequence b: DIFF V2's per-token σ(λ), else the layer's. */
static const float *row_lambda(const attn_args *x, int64_t b, int64_t h)
{
    return x->a->lam ? x->a->lam + (size_t)b * (size_t)x->T * (size_t)x->w->g.heads + (size_t)h : NULL;
}

/* The map head h of sequence b applies to its values: the softmax map, or the Diff map
 * P1 − λ·P2 (DIFF V2: each row's own λ) written into scr[T, T]. The forward and the
 * backward pass both take it from here. */
static const float *applied_map(const attn_args *x, int64_t b, int64_t h, float *scr)
{
    const dfl__train_geom *g = &x->w->g;
    const float *lrow = row_lambda(x, b, h);
    if (lrow)
        diff_map_rows(scr, map_at(x, b, h, 0), map_at(x, b, h, 1), lrow, g->heads, x->T);
    else if (g->nmaps == 2)
        diff_map(scr, map_at(x, b, h, 0), map_at(x, b, h, 1), x->lambda, x->T);
    else
        return map_at(x, b, h, 0);
    return scr;
}

/* Head h of sequence b: maps, values, and the Diff sub-layer norm. Runs inside the
 * parallel region: serial BLAS, this thread's scratch only, disjoint output columns. */
static void attn_fwd_task(const attn_args *x, int64_t b, int64_t h, float *scr)
{
    const dfl_train_ws *w = x->w;
    const dfl__train_geom *g = &w->g;
    const dfl__head_plan *p = &w->plan[h];
    const int64_t T = x->T, RB = w->block;
    const layer_acts *a = x->a;
    const float *qb = a->q + (size_t)b * T * g->q_ld, *kb = a->k + (size_t)b * T * g->k_ld;
    const float *vb = a->v + (size_t)b * T * g->v_ld;
    for (int t = 0; t < g->nmaps; t++) {
        float *P = map_at(x, b, h, t); /* [T, T] */
        /* causal: row block [r0, r0 + n) only needs keys [0, r0 + n) */
        for (int64_t r0 = 0; r0 < T; r0 += RB) {
            int64_t n = T - r0 < RB ? T - r0 : RB;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)(r0 + n), (int)g->dq, g->scale,
                        qb + r0 * g->q_ld + p->q_col[t], (int)g->q_ld, kb + p->k_col[t], (int)g->k_ld, 0.0f, P + r0 * T,
                        (int)T);
        }
        for (int64_t i = 0; i < T; i++)
            softmax_row(P + i * T, i, T);
    }
    const float *A = applied_map(x, b, h, scr);
    float *o = (g->subnorm ? a->opre : a->att) + (size_t)b * T * g->att_ld + p->out_col; /* [T, width] ld att_ld */
    int64_t off = 0;
    for (int part = 0; part < p->n_vparts; part++) {
        for (int64_t r0 = 0; r0 < T; r0 += RB) {
            int64_t n = T - r0 < RB ? T - r0 : RB;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)p->v_width[part], (int)(r0 + n), 1.0f,
                        A + r0 * T, (int)T, vb + p->v_col[part], (int)g->v_ld, 0.0f, o + r0 * g->att_ld + off,
                        (int)g->att_ld);
        }
        off += p->v_width[part];
    }
    if (!g->subnorm) return;
    /* y = O·rstd·gain·(1 − λ_init), rstd = 1/sqrt(mean(O²) + eps) over the head's width */
    float *y = a->att + (size_t)b * T * g->att_ld + p->out_col;
    const int64_t W = g->width;
    const float cscale = 1.0f - x->lambda_init;
    for (int64_t i = 0; i < T; i++) {
        const float *orow = o + i * g->att_ld;
        float *yrow = y + i * g->att_ld;
        float ss = 0.0f;
        for (int64_t j = 0; j < W; j++)
            ss += orow[j] * orow[j];
        float r = 1.0f / sqrtf(ss / (float)W + x->eps);
        a->rstdh[((size_t)b * T + (size_t)i) * (size_t)g->heads + (size_t)h] = r;
        float k = cscale * r;
        for (int64_t j = 0; j < W; j++)
            yrow[j] = orow[j] * k * (x->subln ? x->subln[j] : 1.0f);
    }
}

/* Backward of head h of sequence b given datt: dq, dk, dv columns of this head
 * (disjoint from every other task's), and this task's λ and subln partials. */
static void attn_bwd_task(const attn_args *x, int64_t b, int64_t h, float *scr)
{
    const dfl_train_ws *w = x->w;
    const dfl__train_geom *g = &w->g;
    const dfl__head_plan *p = &w->plan[h];
    const int64_t T = x->T, W = g->width, RB = w->block;
    const layer_acts *a = x->a;
    const size_t task = (size_t)b * (size_t)g->heads + (size_t)h;
    float *sA = scr, *sdA = scr + T * T, *sdS = scr + 2 * T * T, *sdO = scr + 3 * T * T; /* [T,T]×3, [T, W] */
    const float *qb = a->q + (size_t)b * T * g->q_ld, *kb = a->k + (size_t)b * T * g->k_ld;
    const float *vb = a->v + (size_t)b * T * g->v_ld;
    float *dqb = w->dq + (size_t)b * T * g->q_ld, *dkb = w->dk + (size_t)b * T * g->k_ld;
    float *dvb = w->dv + (size_t)b * T * g->v_ld;
    const float *dy = w->datt + (size_t)b * T * g->att_ld + p->out_col; /* [T, W] ld att_ld */

    const float *dO = dy;
    int64_t ldo = g->att_ld;
    if (g->subnorm) {
        /* sub-layer norm backward: y = c·g·O·r; u = c·g·dy;
         * dO = r·u − O·r³·(u·O)/W; dgain += dy·c·O·r */
        const float *O = a->opre + (size_t)b * T * g->att_ld + p->out_col;
        float *dsub = w->dsub_part + task * (size_t)W;
        const float cs = 1.0f - x->lambda_init;
        memset(dsub, 0, (size_t)W * sizeof *dsub);
        for (int64_t i = 0; i < T; i++) {
            const float *orow = O + i * g->att_ld, *dyr = dy + i * g->att_ld;
            float r = a->rstdh[((size_t)b * T + (size_t)i) * (size_t)g->heads + (size_t)h], dot = 0.0f;
            for (int64_t j = 0; j < W; j++)
                dot += cs * (x->subln ? x->subln[j] : 1.0f) * dyr[j] * orow[j];
            float k = r * r * r * dot / (float)W;
            for (int64_t j = 0; j < W; j++) {
                float gj = x->subln ? x->subln[j] : 1.0f;
                sdO[i * W + j] = r * cs * gj * dyr[j] - orow[j] * k;
                dsub[j] += dyr[j] * cs * orow[j] * r;
            }
        }
        dO = sdO;
        ldo = W;
    }
    /* dA = dO·vᵀ over the value parts; dv_part = Aᵀ·dO_part */
    const float *A = applied_map(x, b, h, sA), *lrow = row_lambda(x, b, h);
    int64_t off = 0;
    for (int part = 0; part < p->n_vparts; part++) {
        int64_t vw = p->v_width[part];
        /* row block [r0, r0 + n) of dA over keys [0, r0 + n); key block [c0, c0 + n) of
         * dv from query rows [c0, T) (A is 0 above the diagonal) */
        for (int64_t r0 = 0; r0 < T; r0 += RB) {
            int64_t n = T - r0 < RB ? T - r0 : RB;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)(r0 + n), (int)vw, 1.0f,
                        dO + r0 * ldo + off, (int)ldo, vb + p->v_col[part], (int)g->v_ld, part ? 1.0f : 0.0f,
                        sdA + r0 * T, (int)T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)vw, (int)(T - r0), 1.0f, A + r0 * T + r0,
                        (int)T, dO + r0 * ldo + off, (int)ldo, 0.0f, dvb + r0 * g->v_ld + p->v_col[part], (int)g->v_ld);
        }
        off += vw;
    }
    if (lrow) { /* DIFF V2: dσ(λ) of row i = −Σ_j dA ⊙ P2 over its causal entries */
        const float *P2 = map_at(x, b, h, 1);
        for (int64_t i = 0; i < T; i++) {
            double s = 0.0;
            for (int64_t j = 0; j <= i; j++)
                s -= (double)sdA[i * T + j] * P2[i * T + j];
            w->dlamt[((size_t)b * (size_t)T + (size_t)i) * (size_t)g->heads + (size_t)h] = (float)s;
        }
    } else if (g->nmaps == 2) { /* dλ = −Σ dA ⊙ P2 over the causal entries */
        const float *P2 = map_at(x, b, h, 1);
        double s = 0.0;
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j <= i; j++)
                s -= (double)sdA[i * T + j] * P2[i * T + j];
        w->dlam_part[task] = s;
    }
    for (int t = 0; t < g->nmaps; t++) {
        /* softmax backward: dS = P ⊙ (dP − rowsum(dP ⊙ P)), dP = coef·dA */
        const float *P = map_at(x, b, h, t);
        for (int64_t i = 0; i < T; i++) {
            const float coef = t == 0 ? 1.0f : lrow ? -lrow[i * g->heads] : -x->lambda;
            const float *pr = P + i * T, *dar = sdA + i * T;
            float *dsr = sdS + i * T, dot = 0.0f;
            for (int64_t j = 0; j <= i; j++)
                dot += pr[j] * dar[j];
            for (int64_t j = 0; j <= i; j++)
                dsr[j] = coef * pr[j] * (dar[j] - dot);
            for (int64_t j = i + 1; j < T; j++)
                dsr[j] = 0.0f;
        }
        /* S = scale·Q·Kᵀ: dQ = scale·dS·K, dK = scale·dSᵀ·Q */
        for (int64_t r0 = 0; r0 < T; r0 += RB) {
            int64_t n = T - r0 < RB ? T - r0 : RB;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)g->dq, (int)(r0 + n), g->scale,
                        sdS + r0 * T, (int)T, kb + p->k_col[t], (int)g->k_ld, 0.0f, dqb + r0 * g->q_ld + p->q_col[t],
                        (int)g->q_ld);
            /* DIFF V2: both maps read one k head, whose gradient is their sum */
            float kbeta = t == 1 && p->k_col[1] == p->k_col[0] ? 1.0f : 0.0f;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)g->dq, (int)(T - r0), g->scale,
                        sdS + r0 * T + r0, (int)T, qb + r0 * g->q_ld + p->q_col[t], (int)g->q_ld, kbeta,
                        dkb + r0 * g->k_ld + p->k_col[t], (int)g->k_ld);
        }
    }
}

double dfl__train_dotd(const float *a, const float *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

float dfl__train_lambda(const float *lq1, const float *lk1, const float *lq2, const float *lk2, int64_t n,
                        double lambda_init)
{
    return (float)(exp((double)(float)dfl__train_dotd(lq1, lk1, n)) - exp((double)(float)dfl__train_dotd(lq2, lk2, n)) +
                   lambda_init);
}

void dfl__train_lambda_bwd(double dlam, const float *lq1, const float *lk1, const float *lq2, const float *lk2,
                           float *gq1, float *gk1, float *gq2, float *gk2, int64_t n)
{
    double e1 = exp((double)(float)dfl__train_dotd(lq1, lk1, n)), e2 = exp((double)(float)dfl__train_dotd(lq2, lk2, n));
    for (int64_t j = 0; j < n; j++) {
        gq1[j] += (float)(dlam * e1 * lk1[j]);
        gk1[j] += (float)(dlam * e1 * lq1[j]);
        gq2[j] -= (float)(dlam * e2 * lk2[j]);
        gk2[j] -= (float)(dlam * e2 * lq2[j]);
    }
}

static float layer_lambda(const dfl_train_model *m, int64_t l)
{
    const dfl_train_layer *y = &m->w.layers[l];
    return dfl__train_lambda(y->lq1, y->lk1, y->lq2, y->lk2, m->config.head_dim, m->lambda_init[l]);
}

static attn_args make_attn_args(const dfl_train_model *m, const dfl_train_ws *w, int64_t l)
{
    const dfl_config *c = &m->config;
    attn_args x = {w, &w->acts[l], c, m->w.layers[l].subln, w->lambda[l], m->lambda_init[l], dfl__subnorm_eps(c), w->T};
    return x;
}

/* -------------------------------------------------------------- forward */

dfl_status dfl_train_forward(const dfl_train_model *m, dfl_train_ws *w, const int32_t *tokens, const int32_t *targets,
                             int64_t B, double *loss, int64_t *count, dfl_error *err)
{
    const dfl_config *c = &m->config;
    const dfl__train_geom *g = &w->g;
    const int64_t T = w->T, BT = B * T, D = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
    const float eps = (float)c->rms_norm_eps;
    if (B < 1 || B > w->Bmax)
        return dfl__fail(err, DFL_ERR_USAGE, "batch %lld is outside [1, %lld]", (long long)B, (long long)w->Bmax);
    for (int64_t i = 0; i < BT; i++) {
        if (tokens[i] < 0 || tokens[i] >= V || targets[i] < -1 || targets[i] >= V)
            return dfl__fail(err, DFL_ERR_RANGE, "token or target at row %lld is outside the vocabulary [0, %lld)",
                             (long long)i, (long long)V);
    }
    w->B = B;
    memcpy(w->tokens, tokens, (size_t)BT * sizeof *tokens);
    memcpy(w->targets, targets, (size_t)BT * sizeof *targets);

    float *x = w->acts[0].x_in; /* [BT, D] */
    for (int64_t i = 0; i < BT; i++)
        memcpy(x + i * D, m->w.embed + (size_t)tokens[i] * (size_t)D, (size_t)D * sizeof(float));

    for (int64_t l = 0; l < c->num_layers; l++) {
        const dfl_train_layer *y = &m->w.layers[l];
        layer_acts *a = &w->acts[l];
        float *x_next = l + 1 < c->num_layers ? w->acts[l + 1].x_in : w->x_out;
        w->lambda[l] = g->nmaps == 2 && !g->token_lambda ? layer_lambda(m, l) : 0.0f;
        /* attention: x_mid = x_in + o_proj(attn(rmsnorm(x_in))) */
        dfl_rmsnorm_rstd(a->xn1, a->rstd1, a->x_in, y->attn_norm, BT, D, eps);
        dfl_matmul_xwt(a->q, a->xn1, y->wq, BT, D, g->q_ld);
        dfl_matmul_xwt(a->k, a->xn1, y->wk, BT, D, g->k_ld);
        dfl_matmul_xwt(a->v, a->xn1, y->wv, BT, D, g->v_ld);
        if (g->token_lambda) { /* DIFF V2: σ(lambda_proj(xn1)) [BT, H] */
            dfl_matmul_xwt(a->lam, a->xn1, y->wlam, BT, D, g->heads);
            for (int64_t i = 0; i < BT * g->heads; i++)
                a->lam[i] = 1.0f / (1.0f + expf(-a->lam[i]));
        }
        rope_rows(a->q, BT, T, g->q_ld, g->n_qheads, g->dq, w->cos_t, w->sin_t, c->rope_interleaved);
        rope_rows(a->k, BT, T, g->k_ld, g->n_kheads, g->dq, w->cos_t, w->sin_t, c->rope_interleaved);
        attn_args ax = make_attn_args(m, w, l);
        int64_t tasks = B * g->heads;
#pragma omp parallel for schedule(dynamic, 1) if (tasks * T * T > PAR_MIN) num_threads(w->nth)
        for (int64_t task = 0; task < tasks; task++)
            attn_fwd_task(&ax, task / g->heads, task % g->heads,
                          w->scratch + (size_t)omp_get_thread_num() * w->scratch_per);
        dfl_matmul_xwt(a->x_mid, a->att, y->wo, BT, g->att_ld, D);
        dfl_add_inplace(a->x_mid, a->x_in, (size_t)BT * (size_t)D);
        /* MLP: x_next = x_mid + down(silu(gate(xn2))·up(xn2)) */
        dfl_rmsnorm_rstd(a->xn2, a->rstd2, a->x_mid, y->mlp_norm, BT, D, eps);
        dfl_matmul_xwt(a->gate, a->xn2, y->w_gate, BT, D, F);
        dfl_matmul_xwt(a->up, a->xn2, y->w_up, BT, D, F);
        size_t nf = (size_t)BT * (size_t)F;
#pragma omp parallel for schedule(static) if (nf > PAR_MIN)
        for (size_t i = 0; i < nf; i++)
            a->hsw[i] = a->gate[i] / (1.0f + expf(-a->gate[i])) * a->up[i];
        dfl_matmul_xwt(x_next, a->hsw, y->w_down, BT, F, D);
        dfl_add_inplace(x_next, a->x_mid, (size_t)BT * (size_t)D);
    }
    dfl_rmsnorm_rstd(w->xnf, w->rstdf, w->x_out, m->w.final_norm, BT, D, eps);
    dfl_matmul_xwt(w->logits, w->xnf, m->w.lm_head, BT, D, V);

    /* cross-entropy of the rows with a target: lse − z[target], in double */
#pragma omp parallel for schedule(static) if (BT * V > PAR_MIN)
    for (int64_t i = 0; i < BT; i++) {
        w->row_loss[i] = 0.0;
        if (w->targets[i] < 0) continue;
        const float *z = w->logits + i * V;
        float mx = z[0];
        for (int64_t v = 1; v < V; v++)
            mx = z[v] > mx ? z[v] : mx;
        double s = 0.0;
        for (int64_t v = 0; v < V; v++)
            s += exp((double)z[v] - mx);
        w->row_loss[i] = (double)mx + log(s) - (double)z[w->targets[i]];
    }
    double sum = 0.0;
    int64_t n = 0;
    for (int64_t i = 0; i < BT; i++)
        if (w->targets[i] >= 0) sum += w->row_loss[i], n++;
    w->count = n;
    *loss = n ? sum / (double)n : 0.0;
    if (count) *count = n;
    return DFL_OK;
}

/* ------------------------------------------------------------- backward */

void dfl_train_backward(dfl_train_model *m, dfl_train_ws *w)
{
    const dfl_config *c = &m->config;
    const dfl__train_geom *g = &w->g;
    const int64_t B = w->B, T = w->T, BT = B * T, D = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
    memset(m->grads, 0, m->n_params * sizeof(float));
    if (w->count == 0) return;
    const float inv_n = 1.0f / (float)w->count;

    /* dlogits = (softmax − onehot)/n on rows with a target, 0 elsewhere */
#pragma omp parallel for schedule(static) if (BT * V > PAR_MIN)
    for (int64_t i = 0; i < BT; i++) {
        float *dz = w->dlogits + i * V;
        const float *z = w->logits + i * V;
        if (w->targets[i] < 0) {
            memset(dz, 0, (size_t)V * sizeof *dz);
            continue;
        }
        float mx = z[0];
        for (int64_t v = 1; v < V; v++)
            mx = z[v] > mx ? z[v] : mx;
        double s = 0.0;
        for (int64_t v = 0; v < V; v++)
            s += exp((double)z[v] - mx);
        for (int64_t v = 0; v < V; v++)
            dz[v] = (float)(exp((double)z[v] - mx) / s) * inv_n;
        dz[w->targets[i]] -= inv_n;
    }
    /* logits = xnf·lm_headᵀ; final norm */
    dfl__train_mm_bwd(w->dxn, 0.0f, m->g.lm_head, w->dlogits, w->xnf, m->w.lm_head, BT, D, V);
    memset(w->dx, 0, (size_t)BT * (size_t)D * sizeof(float));
    rmsnorm_bwd(w->dx, m->g.final_norm, w->gpart, w->dxn, w->x_out, m->w.final_norm, w->rstdf, BT, D);

    for (int64_t l = c->num_layers - 1; l >= 0; l--) {
        const dfl_train_layer *y = &m->w.layers[l];
        dfl_train_layer *gy = &m->g.layers[l];
        const layer_acts *a = &w->acts[l];
        /* MLP: dx is d(x_next) = d(x_mid) through the residual */
        dfl__train_mm_bwd(w->dh, 0.0f, gy->w_down, w->dx, a->hsw, y->w_down, BT, F, D);
        size_t nf = (size_t)BT * (size_t)F;
#pragma omp parallel for schedule(static) if (nf > PAR_MIN)
        for (size_t i = 0; i < nf; i++) {
            float gt = a->gate[i], sg = 1.0f / (1.0f + expf(-gt)), silu = gt * sg;
            w->dup[i] = w->dh[i] * silu;
            w->dgate[i] = w->dh[i] * a->up[i] * sg * (1.0f + gt * (1.0f - sg));
        }
        dfl__train_mm_bwd(w->dxn, 0.0f, gy->w_gate, w->dgate, a->xn2, y->w_gate, BT, D, F);
        dfl__train_mm_bwd(w->dxn, 1.0f, gy->w_up, w->dup, a->xn2, y->w_up, BT, D, F);
        rmsnorm_bwd(w->dx, gy->mlp_norm, w->gpart, w->dxn, a->x_mid, y->mlp_norm, a->rstd2, BT, D);

        /* attention: dx is now d(x_mid) = d(x_in) through the residual */
        dfl__train_mm_bwd(w->datt, 0.0f, gy->wo, w->dx, a->att, y->wo, BT, g->att_ld, D);
        attn_args ax = make_attn_args(m, w, l);
        int64_t tasks = B * g->heads;
#pragma omp parallel for schedule(dynamic, 1) if (tasks * T * T > PAR_MIN) num_threads(w->nth)
        for (int64_t task = 0; task < tasks; task++)
            attn_bwd_task(&ax, task / g->heads, task % g->heads,
                          w->scratch + (size_t)omp_get_thread_num() * w->scratch_per);
        if (g->nmaps == 2 && !g->token_lambda) {
            double dlam = 0.0;
            for (int64_t t = 0; t < tasks; t++)
                dlam += w->dlam_part[t];
            dfl__train_lambda_bwd(dlam, y->lq1, y->lk1, y->lq2, y->lk2, gy->lq1, gy->lk1, gy->lq2, gy->lk2,
                                  c->head_dim);
            if (gy->subln)
                for (int64_t t = 0; t < tasks; t++)
                    for (int64_t j = 0; j < g->width; j++)
                        gy->subln[j] += w->dsub_part[(size_t)t * (size_t)g->width + (size_t)j];
        }
        /* RoPE is a rotation: its backward rotates by the negative angle */
        rope_rows(w->dq, BT, T, g->q_ld, g->n_qheads, g->dq, w->cos_t, w->nsin_t, c->rope_interleaved);
        rope_rows(w->dk, BT, T, g->k_ld, g->n_kheads, g->dq, w->cos_t, w->nsin_t, c->rope_interleaved);
        dfl__train_mm_bwd(w->dxn, 0.0f, gy->wq, w->dq, a->xn1, y->wq, BT, D, g->q_ld);
        dfl__train_mm_bwd(w->dxn, 1.0f, gy->wk, w->dk, a->xn1, y->wk, BT, D, g->k_ld);
        dfl__train_mm_bwd(w->dxn, 1.0f, gy->wv, w->dv, a->xn1, y->wv, BT, D, g->v_ld);
        if (g->token_lambda) { /* σ' = σ(1 − σ), then through lambda_proj */
            for (int64_t i = 0; i < BT * g->heads; i++)
                w->dlamt[i] *= a->lam[i] * (1.0f - a->lam[i]);
            dfl__train_mm_bwd(w->dxn, 1.0f, gy->wlam, w->dlamt, a->xn1, y->wlam, BT, D, g->heads);
        }
        rmsnorm_bwd(w->dx, gy->attn_norm, w->gpart, w->dxn, a->x_in, y->attn_norm, a->rstd1, BT, D);
    }
    /* embedding rows (serial: tokens repeat, and the order fixes the sum) */
    for (int64_t i = 0; i < BT; i++) {
        float *ge = m->g.embed + (size_t)w->tokens[i] * (size_t)D;
        const float *dxr = w->dx + i * D;
        for (int64_t j = 0; j < D; j++)
            ge[j] += dxr[j];
    }
}
