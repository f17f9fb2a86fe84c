/* forward.c — embedding, pre-norm blocks, final norm, LM head; attention per head in
 * row blocks with the three attention variants expressed as one head plan. */
#include "model/forward.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/family.h"
#include "model/intervene.h"
#include "model/kernels.h"
#include "model/kernels_gemm.h"
#include "model/kernels_gemv.h"
#include "model/kernels_norm.h"
#include "model/kernels_polynorm.h"
#include "model/kv_cache.h"
#include "model/quantize.h"
#include "model/safetensors.h"

/* Rows of the attention block: all heads' maps of a block take about
 * ATTN_ROWS_TOTAL rows of T floats each, between ATTN_MIN_ROWS and ATTN_TASK_ROWS rows
 * per head. A task is one head's rows of a block: ATTN_TASK_ROWS rows amortize the
 * packing of K and V inside each sgemm. */
#define ATTN_ROWS_TOTAL 1024
#define ATTN_MIN_ROWS   16
#define ATTN_TASK_ROWS  128
#define LM_HEAD_ROWS    512
#define MLP_ROWS        512 /* the MLP runs in row blocks: [T, F] is never held */
/* Weights converted panel by panel (bf16, f16) are converted once per block: larger
 * blocks convert them fewer times, for 2·MLP_ROWS_CONVERTED·F more floats. */
#define MLP_ROWS_CONVERTED 2048

/* ------------------------------------------------------------- geometry */

/* The head plan (where each analysis head reads q, k, v and writes its output) is
 * family.c's dfl__head_plan_make, shared with the trainer. */
typedef dfl__head_plan head_plan;

typedef struct attn_geom {
    int nmaps;  /* 1 llama, 2 Diff */
    int nstore; /* block buffers per head: map1 (llama), or map1, map2, diff */
    int64_t dq; /* query/key width of one map */
    int64_t q_ld, k_ld, v_ld, att_ld;
    int64_t n_qheads, n_kheads; /* heads of width dq in q and k (for RoPE) */
    int64_t heads;              /* analysis heads */
    float scale;                /* 1/sqrt(dq) */
} attn_geom;

static attn_geom make_geom(const dfl_config *c)
{
    attn_geom g;
    dfl__attn_shape sh = dfl__attn_shape_of(c);
    g.dq = c->head_dim;
    g.scale = (float)(1.0 / sqrt((double)c->head_dim));
    g.heads = sh.heads;
    g.nmaps = dfl_config_maps_per_head(c);
    g.nstore = g.nmaps == 2 ? 3 : 1;
    g.n_qheads = sh.n_qheads;
    g.n_kheads = sh.n_kheads;
    g.q_ld = sh.q_ld;
    g.k_ld = sh.k_ld;
    g.v_ld = sh.v_ld;
    g.att_ld = sh.att_ld;
    return g;
}

double dfl_forward_flops(const dfl_config *c, int64_t T)
{
    attn_geom g = make_geom(c);
    double D = (double)c->hidden_size, F = (double)c->intermediate_size, t = (double)T;
    double proj = D * (double)(g.q_ld + g.k_ld + g.v_ld + g.att_ld);
    if (c->type == DFL_MODEL_DIFF_V2) proj += D * (double)g.heads; /* lambda_proj */
    double mlp = (dfl__family_of(c)->mlp == DFL__MLP_GELU ? 2.0 : 3.0) * D * F;
    /* causal attention: on average (T+1)/2 keys per row, scores and value products */
    double keys_full = (t + 1.0) / 2.0, att_layers = 0.0;
    for (int64_t l = 0; l < c->num_layers; l++) {
        /* a window of W keys: rows past W see W keys each */
        double W = (double)dfl_config_window(c, l), keys = keys_full;
        if (W > 0 && W < t) keys = (W * (W + 1.0) / 2.0 + (t - W) * W) / t;
        att_layers += keys;
    }
    double att = (double)g.heads * ((double)g.nmaps * (double)g.dq + (double)(g.att_ld / g.heads));
    double per_token = 2.0 * ((double)c->num_layers * (proj + mlp) + att * att_layers + D * (double)c->vocab_size);
    return per_token * t;
}

/* ------------------------------------------------------------ workspace */

/* One workspace buffer: where its pointer lives, and n elements of `size` bytes. */
typedef struct ws_buf {
    void **ptr;
    size_t n, size;
} ws_buf;

#define WS_MAX_BUFS 24

typedef struct fwd_ws {
    float *x, *xn;            /* [T, D] residual stream, normed copy */
    float *q, *k, *v;         /* [T, q_ld], [T, k_ld], [T, v_ld] */
    float *att;               /* [T, att_ld] heads' outputs before o_proj */
    float *tmp;               /* [T, D]; while the attention runs, its packed keys (pack_keys) */
    float *gate, *up;         /* [mlp_rows, F] */
    float *maps;              /* [heads, nstore, rows, T] one attention block (map1[, map2, diff]) */
    float *cos_t, *sin_t;     /* [T, dq/2] */
    float *cos_l, *sin_l;     /* [T, dq/2] the sliding layers' own RoPE (Gemma 3 rope_local_base_freq) */
    double *inv_freq;         /* [dq/2] */
    int64_t *lim;             /* [rows] last visible key of each block row */
    int64_t *lo;              /* [rows] first visible key of each block row (sliding window) */
    float *scratch;           /* [dfl_matmul_scratch(max(D, F, att_ld))] weight panel in f32 */
    head_plan *plan;          /* [heads] */
    float *qmax;              /* [heads, 2] absmax per map (quantization by tensor/head) */
    float *tmax;              /* [threads, heads, 2] per-thread partial absmax */
    float *logits;            /* [LM_HEAD_ROWS, V] */
    float *fused;             /* [T, q_ld + k_ld + v_ld] a fused q|k|v projection (gpt2 c_attn) */
    size_t scratch_n;         /* floats of scratch */
    float *lam;               /* [T, heads] DIFF V2: σ(lambda_proj(xn)) of each token and head */
    ws_buf bufs[WS_MAX_BUFS]; /* the buffers above: where each pointer lives, its size */
    size_t nbufs;

    /* KV-cached passes (dfl__forward_rows): the T rows held above are positions
     * [t0, t0 + T); keys and values of all t0 + T positions live in kc[l], vc[l]
     * ([L] of [capacity, k_ld], [capacity, v_ld]; NULL = none). */
    int64_t t0;
    float *const *kc, *const *vc;
    /* This layer's keys [t0 + T, k_ld] and values [t0 + T, v_ld]: k and v, or the cache's.
     * The attention's T then counts keys (t0 + the rows held), the maps' row stride. */
    const float *kb, *vb;
} fwd_ws;

/* The buffers of w for one pass, in one table (w->bufs): allocated and freed by one
 * loop each. A count of 0 marks a buffer this pass does not need (logits without a
 * logits callback). Returns 0 when a count overflows. */
static int ws_table(fwd_ws *w, const dfl_config *c, const attn_geom *g, int64_t T, int64_t keys, int64_t rows,
                    int64_t mlp_rows, int need_logits)
{
    size_t t = (size_t)T, D = (size_t)c->hidden_size, F = (size_t)c->intermediate_size, hq = (size_t)g->dq / 2;
    size_t mr = t < (size_t)mlp_rows ? t : (size_t)mlp_rows, H = (size_t)g->heads;
    int64_t wide = c->intermediate_size > c->hidden_size ? c->intermediate_size : c->hidden_size;
    if (g->att_ld > wide) wide = g->att_ld;
    int fused = dfl__family_of(c)->layout != DFL__LAYOUT_LLAMA;
    size_t qkv = (size_t)(g->q_ld + g->k_ld + g->v_ld);
    if ((int64_t)qkv > wide) wide = (int64_t)qkv;
    w->scratch_n = dfl_matmul_scratch(wide);
    size_t n = 0;
    int ok = 1;
    /* field: a·b elements of type */
#define BUF(field, a, b, type)                                                                                         \
    do {                                                                                                               \
        if (n == WS_MAX_BUFS) return 0; /* a buffer added without growing the table */                                 \
        ws_buf *e = &w->bufs[n++];                                                                                     \
        e->ptr = (void **)&w->field;                                                                                   \
        e->size = sizeof(type);                                                                                        \
        ok = ok && dfl__mul_ok(a, b, &e->n);                                                                           \
    } while (0)
    BUF(x, t, D, float);
    BUF(xn, t, D, float);
    BUF(tmp, (t + 31) / 32 * 32, D, float); /* whole strips of 32 packed keys (pack_keys) */
    BUF(q, t, (size_t)g->q_ld, float);
    BUF(k, t, (size_t)g->k_ld, float);
    BUF(v, t, (size_t)g->v_ld, float);
    BUF(att, t, (size_t)g->att_ld, float);
    BUF(gate, mr, F, float);
    BUF(up, mr, F, float);
    BUF(maps, H * (size_t)g->nstore * (size_t)rows, (size_t)keys, float);
    BUF(cos_t, t, hq, float);
    BUF(sin_t, t, hq, float);
    BUF(inv_freq, hq, 1, double);
    BUF(lim, (size_t)rows, 1, int64_t);
    BUF(lo, (size_t)rows, 1, int64_t);
    BUF(scratch, dfl_matmul_scratch(wide), 1, float);
    BUF(plan, H, 1, head_plan);
    BUF(qmax, H, 2, float);
    BUF(tmax, (size_t)dfl_forward_max_threads(), H * 2, float);
    BUF(logits, need_logits ? (size_t)LM_HEAD_ROWS : 0, (size_t)c->vocab_size, float);
    BUF(fused, fused ? t : 0, qkv, float);
    BUF(cos_l, c->rope_local_theta > 0 ? t : 0, hq, float);
    BUF(sin_l, c->rope_local_theta > 0 ? t : 0, hq, float);
    BUF(lam, c->type == DFL_MODEL_DIFF_V2 ? t : 0, H, float);
#undef BUF
    w->nbufs = n;
    return ok;
}

static void ws_free(fwd_ws *w)
{
    for (size_t i = 0; i < w->nbufs; i++)
        free(*w->bufs[i].ptr);
    memset(w, 0, sizeof *w);
}

/* n·size bytes (overflow-checked) at a 64-byte boundary, in whole 64-byte lines: the
 * products' packing writes whole vectors there (pack_keys). */
static void *alloc_lines(size_t n, size_t size)
{
    size_t bytes;
    if (!dfl__mul_ok(n, size, &bytes) || bytes > SIZE_MAX - 63) return NULL;
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* All buffers with overflow-checked sizes; DFL_ERR_NOMEM names the sequence length. */
static dfl_status ws_alloc(fwd_ws *w, const dfl_config *c, const attn_geom *g, int64_t T, int64_t keys, int64_t rows,
                           int64_t mlp_rows, int need_logits, dfl_error *err)
{
    memset(w, 0, sizeof *w);
    int ok = ws_table(w, c, g, T, keys, rows, mlp_rows, need_logits);
    for (size_t i = 0; ok && i < w->nbufs; i++) {
        ws_buf *e = &w->bufs[i];
        if (e->n && !(*e->ptr = alloc_lines(e->n, e->size))) ok = 0;
    }
    if (!ok) {
        ws_free(w);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a forward pass over %lld tokens", (long long)T);
    }
    return DFL_OK;
}

/* The row buffers of w moved by `by` rows (a pass from a later row, intervene.h row0):
 * the residual stream, its normed copy, q, k, v, the heads' outputs, the fused
 * projection, DIFF V2's λ and the RoPE tables. */
static void shift_rows(fwd_ws *w, const attn_geom *g, const dfl_config *c, int64_t by)
{
    const int64_t D = c->hidden_size, hq = (c->rotary_dim ? c->rotary_dim : g->dq) / 2;
    w->x += by * D;
    w->xn += by * D;
    w->tmp += by * D;
    w->q += by * g->q_ld;
    w->k += by * g->k_ld;
    w->v += by * g->v_ld;
    w->att += by * g->att_ld;
    if (w->fused) w->fused += by * (g->q_ld + g->k_ld + g->v_ld);
    if (w->lam) w->lam += by * g->heads;
    w->cos_t += by * hq;
    w->sin_t += by * hq;
    if (w->cos_l) w->cos_l += by * hq, w->sin_l += by * hq;
}

/* ------------------------------------------------------------- attention */

/* What one layer's attention tasks share. */
typedef struct attn_ctx {
    const fwd_ws *w;
    const attn_geom *g;
    const head_plan *plan; /* [heads] */
    const dfl_layer_weights *lw;
    const dfl_config *c;
    const dfl_capture *cap;
    int quant_bits;
    dfl_quant_granularity quant_gran;
    const float *qmax; /* [heads, 2] absmax for tensor/head quantization */
    int64_t layer, T, rows;
    int64_t window;        /* sliding window W of this layer, 0 = none */
    int64_t r0, bend;      /* current block: rows [r0, bend) */
    float softcap;         /* > 0: scores → softcap·tanh(scores/softcap) after their capture (Gemma 2) */
    const dfl_iv_list *iv; /* interventions (intervene.h), NULL = none */
    const float *kpack;    /* NULL, or [k_ld / dq, kpack_n] each head's keys packed (pack_keys) */
    size_t kpack_n;        /* floats of one head's packed keys */
    float *share;          /* the threads' shares of the scratch, share_n floats each */
    size_t share_n;
} attn_ctx;

/* This thread's share of the weight-panel scratch, free while the attention runs: the
 * packed blocks of its products, so that no task allocates (a freed block of that size
 * at the heap's top is trimmed, and faulted in again by the next task). */
static float *thread_scratch(const attn_ctx *x, size_t *n)
{
    *n = x->share_n;
    return x->share + (size_t)omp_get_thread_num() * x->share_n;
}

/* 64-byte aligned start of p[n] floats, *n reduced by what the alignment skips. */
static float *align64(float *p, size_t *n)
{
    float *a = (float *)(((uintptr_t)p + 63) / 64 * 64);
    size_t skip = (size_t)(a - p);
    *n = *n > skip ? *n - skip : 0;
    return a;
}

/* Floats of one thread's share of the scratch in the attention: what a task's products
 * pack (102 K floats for 128 rows, kernels_gemm.h), with room to spare. */
#define ATTN_SHARE_FLOATS ((size_t)128 * 1024)

/* On the AVX-512 path, the keys of every head packed once per layer for the products of
 * all its query blocks (which otherwise pack keys [0, a + n) again for every block of
 * rows: 4.5 times the keys at T = 1024 in blocks of 128). They go into tmp[tmp_n], which
 * no step of the layer uses between the q, k, v projections and the o projection, when
 * they fit there, else at the start of the scratch when they fit beside the threads'
 * shares; x->kpack stays NULL otherwise. Each block is one dq-wide column range of k, as
 * the head plans index them. The shares lie side by side where the keys end, or at the
 * scratch's start: pages the projections' packing has touched already. */
static void pack_keys(attn_ctx *x, const fwd_ws *w, float *tmp, size_t tmp_n)
{
    const attn_geom *g = x->g;
    const size_t nth = (size_t)dfl_forward_max_threads();
    size_t avail = w->scratch_n;
    float *base = align64(w->scratch, &avail), *in_tmp = align64(tmp, &tmp_n);
    x->kpack = NULL;
    x->share = base;
    x->share_n = avail / nth < ATTN_SHARE_FLOATS ? avail / nth : ATTN_SHARE_FLOATS;
    size_t per = dfl_cpu() == DFL_CPU_AVX512 ? dfl_gemm_packed_floats(x->T, g->dq) : 0;
    int aligned = per > 0 && g->k_ld % g->dq == 0;
    for (int64_t h = 0; aligned && h < g->heads; h++)
        for (int t = 0; t < g->nmaps; t++)
            aligned = aligned && x->plan[h].k_col[t] % g->dq == 0;
    size_t blocks = aligned ? (size_t)(g->k_ld / g->dq) : 0, total = blocks * per;
    float *dst = !aligned                                                     ? NULL
                 : total <= tmp_n                                             ? in_tmp
                 : total <= avail && avail - total >= nth * ATTN_SHARE_FLOATS ? base
                                                                              : NULL;
    if (!dst) return;
    for (size_t b = 0; b < blocks; b++)
        dfl_gemm_pack(dst + b * per, w->kb + (int64_t)b * g->dq, g->k_ld, x->T, g->dq);
    x->kpack = dst;
    x->kpack_n = per;
    if (dst == base) {
        x->share = base + total;
        x->share_n = ATTN_SHARE_FLOATS;
    }
}

/* Rows [a, a+n) of the block in map buffer m[t]: raw scores q·kᵀ/√d of map t. */
static float *task_scores(const attn_ctx *x, int64_t h, int t, int64_t a, int64_t n)
{
    const fwd_ws *w = x->w;
    const attn_geom *g = x->g;
    const head_plan *p = &x->plan[h];
    float *m =
        w->maps + (((size_t)h * (size_t)g->nstore + (size_t)t) * (size_t)x->rows + (size_t)(a - x->r0)) * (size_t)x->T;
    size_t sn;
    float *sc = thread_scratch(x, &sn);
    const float *q = w->q + (a - w->t0) * g->q_ld + p->q_col[t];
    if (x->kpack)
        dfl_gemm_avx512_packed(m, x->T, q, g->q_ld, x->kpack + (size_t)(p->k_col[t] / g->dq) * x->kpack_n, n, a + n,
                               g->dq, g->scale, sc, sn);
    else
        dfl_gemm_scratch(m, x->T, q, g->q_ld, w->kb + p->k_col[t], g->k_ld, 1, n, a + n, g->dq, g->scale, sc, sn);
    return m;
}

static float row_absmax(const float *r, int64_t n)
{
    float mx = 0.0f;
    for (int64_t j = 0; j < n; j++)
        mx = fabsf(r[j]) > mx ? fabsf(r[j]) : mx;
    return mx;
}

/* Rows [a, a+n) of head h: scores, capture of the raw logits, quantization, causal
 * softmax, the differential combination, values and, for Diff heads, the sub-layer
 * norm. Runs inside the parallel region: BLAS calls here are serial (OpenBLAS's
 * OpenMP build), and the scores callback only touches this thread's state. */
static void attn_task(const attn_ctx *x, int64_t h, int64_t a, int64_t n)
{
    const fwd_ws *w = x->w;
    const attn_geom *g = x->g;
    const head_plan *p = &x->plan[h];
    const int64_t T = x->T, ncols = a + n; /* keys 0..a+n-1 are visible to some row */
    const int64_t *lim = w->lim + (a - x->r0), *lo = w->lo + (a - x->r0);
    float *m[3] = {NULL, NULL, NULL}; /* [n, T] rows of map1, map2, diff in the block */
    for (int t = 0; t < g->nmaps; t++) {
        m[t] = task_scores(x, h, t, a, n);
        if (x->cap && x->cap->scores_rows && !p->repeat[t]) {
            dfl_score_block sb = {x->layer, h, t, a, n, T, m[t], x->window};
            x->cap->scores_rows(x->cap->user, omp_get_thread_num(), &sb);
        }
        /* soft-capping after the capture: the outlier statistics are of the raw scores */
        for (int64_t i = 0; x->softcap > 0 && i < n; i++)
            dfl_softcap(m[t] + i * T + lo[i], (size_t)(lim[i] + 1 - lo[i]), x->softcap);
        for (int64_t i = 0; x->quant_bits && i < n; i++) {
            float *r = m[t] + i * T;
            float mx = x->quant_gran == DFL_QUANT_ROW ? row_absmax(r + lo[i], lim[i] + 1 - lo[i]) : x->qmax[h * 2 + t];
            /* capping is monotone in |s|: the capped absmax is the cap of the raw one */
            if (x->softcap > 0 && x->quant_gran != DFL_QUANT_ROW) dfl_softcap(&mx, 1, x->softcap);
            dfl_fake_quant(r + lo[i], lim[i] + 1 - lo[i], mx, x->quant_bits);
        }
        dfl__iv_knockout(x->iv, x->layer, m[t], a, n, T, lo, lim);
        /* Rows are handed out over the block's keys [0, bend): zeroing up to bend
         * leaves no stale values from an earlier block in what the task cannot see. */
        dfl_softmax_window(m[t], n, x->bend, T, lo, lim);
    }
    const float *A = m[0];
    if (g->nmaps == 2) {
        m[2] = w->maps + (((size_t)h * (size_t)g->nstore + 2) * (size_t)x->rows + (size_t)(a - x->r0)) * (size_t)T;
        /* DIFF V2: λ of each row (token) and head; the others: one λ per layer */
        const float *sig = x->c->type == DFL_MODEL_DIFF_V2 ? w->lam + (a - w->t0) * g->heads + h : NULL;
        const int use = dfl__iv_map(x->iv, x->layer, h); /* 0 the difference, 1 map1, 2 map2 alone */
        for (int64_t i = 0; i < n; i++) {
            float lam = use == 1 ? 0.0f : dfl__iv_lambda(x->iv, x->layer, h, sig ? sig[i * g->heads] : x->lw->lambda);
            for (int64_t j = 0; j < x->bend; j++)
                m[2][i * T + j] = use == 2 ? m[1][i * T + j] : m[0][i * T + j] - lam * m[1][i * T + j];
        }
        A = m[2];
    }
    float *out = w->att + (a - w->t0) * g->att_ld + p->out_col; /* [n, out_width], stride att_ld */
    int64_t off = 0;
    for (int part = 0; part < p->n_vparts; part++) {
        size_t sn;
        float *sc = thread_scratch(x, &sn);
        dfl_gemm_scratch(out + off, g->att_ld, A, T, w->vb + p->v_col[part], g->v_ld, 0, n, p->v_width[part], ncols,
                         1.0f, sc, sn);
        off += p->v_width[part];
    }
    if (dfl__attn_of(x->c)->subnorm_eps < 0) return; /* softmax heads: no sub-layer norm */
    /* unilm: RMSNorm(2d, eps 1e-5, gain subln); DiffLlama: RMSNorm(2hd, eps, no gain). */
    float eps = dfl__subnorm_eps(x->c);
    const float *gain = x->lw->subln;
    for (int64_t i = 0; i < n; i++) {
        float *row = out + i * g->att_ld;
        float ss = 0.0f;
        for (int64_t j = 0; j < p->out_width; j++)
            ss += row[j] * row[j];
        float inv = (1.0f - x->lw->lambda_init) / sqrtf(ss / (float)p->out_width + eps);
        for (int64_t j = 0; j < p->out_width; j++)
            row[j] *= inv * (gain ? gain[j] : 1.0f);
    }
}

/* Set the block [r0, r0 + rows) ∩ [0, T) in x and w->lim; returns its row count. */
static int64_t begin_block(attn_ctx *x, int64_t r0)
{
    int64_t nb = x->T - r0 < x->rows ? x->T - r0 : x->rows;
    x->r0 = r0;
    x->bend = r0 + nb;
    for (int64_t i = 0; i < nb; i++) {
        x->w->lim[i] = r0 + i;
        x->w->lo[i] = x->window && r0 + i - x->window + 1 > 0 ? r0 + i - x->window + 1 : 0;
    }
    return nb;
}

/* Quantization by tensor or head needs each map's absmax before any softmax: a first
 * pass over the layer's scores (the price of that intervention). qmax[heads, 2]. */
static void scores_absmax(attn_ctx *x, float *qmax)
{
    const attn_geom *g = x->g;
    int nth = dfl_forward_max_threads();
    float *tmax = x->w->tmax; /* [threads, heads, 2] */
    memset(tmax, 0, (size_t)nth * (size_t)g->heads * 2 * sizeof *tmax);
    for (int64_t r0 = x->w->t0; r0 < x->T; r0 += x->rows) {
        int64_t nb = begin_block(x, r0);
        int64_t chunks = (nb + ATTN_TASK_ROWS - 1) / ATTN_TASK_ROWS, tasks = g->heads * chunks;
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t task = 0; task < tasks; task++) {
            int64_t h = task / chunks, a = r0 + (task % chunks) * ATTN_TASK_ROWS;
            int64_t n = x->bend - a < ATTN_TASK_ROWS ? x->bend - a : ATTN_TASK_ROWS;
            float *mine = tmax + ((size_t)omp_get_thread_num() * (size_t)g->heads + (size_t)h) * 2;
            for (int t = 0; t < g->nmaps; t++) {
                const float *s = task_scores(x, h, t, a, n);
                for (int64_t i = 0; i < n; i++) {
                    int64_t k0 = x->w->lo[a - r0 + i];
                    float mx = row_absmax(s + i * x->T + k0, a + i + 1 - k0);
                    if (mx > mine[t]) mine[t] = mx;
                }
            }
        }
    }
    float all = 0.0f;
    for (int64_t i = 0; i < g->heads * 2; i++) {
        qmax[i] = 0.0f;
        for (int th = 0; th < nth; th++)
            qmax[i] = fmaxf(qmax[i], tmax[(size_t)th * (size_t)g->heads * 2 + (size_t)i]);
        all = fmaxf(all, qmax[i]);
    }
    if (x->quant_gran == DFL_QUANT_TENSOR)
        for (int64_t i = 0; i < g->heads * 2; i++)
            qmax[i] = all;
}

static dfl_status attention(fwd_ws *w, const dfl_model *m, const attn_geom *g, int64_t l, int64_t T, int64_t rows,
                            const dfl_forward_opts *opts, const dfl_capture *cap, dfl_error *err)
{
    const dfl_config *c = &m->config;
    /* A pass from row k0 (intervene.h row0) hands its row buffers in from row k0: the
     * attention indexes them from row 0, the keys and values below k0 from the cache. */
    const int64_t k0 = dfl__iv_row0(opts->iv);
    fwd_ws whole = *w;
    shift_rows(&whole, g, c, -k0);
    w = &whole;
    T += k0;
    dfl__iv_kv(opts->iv, l, w->k, w->v, T, g->k_ld, g->v_ld);
    int want = cap && cap->attn_rows && cap->want_maps && cap->want_maps(cap->user, l);
    /* probe --quantize k/v (model/quantize.h): after RoPE, before any score; V per KV head */
    int64_t vd = g->v_ld % c->num_kv_heads ? g->dq : g->v_ld / c->num_kv_heads;
    dfl_quant_kv(opts->quant, w->q, g->q_ld, g->n_qheads, w->k, g->k_ld, g->n_kheads, g->dq, w->v, g->v_ld, vd, T);
    for (int64_t h = 0; h < g->heads; h++)
        w->plan[h] = dfl__head_plan_make(c, h);
    /* A cached pass holds rows [t0, t0 + T): its keys and values join the cache's. */
    const int64_t n_new = T, t0 = w->t0;
    T = t0 + n_new;
    w->kb = w->k;
    w->vb = w->v;
    if (w->kc) {
        memcpy(w->kc[l] + t0 * g->k_ld, w->k, (size_t)n_new * (size_t)g->k_ld * sizeof(float));
        memcpy(w->vc[l] + t0 * g->v_ld, w->v, (size_t)n_new * (size_t)g->v_ld * sizeof(float));
        w->kb = w->kc[l];
        w->vb = w->vc[l];
    }
    attn_ctx x = {w,
                  g,
                  w->plan,
                  &m->layers[l],
                  c,
                  cap,
                  opts->quant_bits,
                  opts->quant_granularity,
                  w->qmax,
                  l,
                  T,
                  rows,
                  dfl_config_window(c, l),
                  0,
                  0,
                  (float)c->attn_softcap,
                  opts->iv,
                  NULL,
                  0,
                  NULL,
                  0};
    pack_keys(&x, w, w->tmp, (size_t)(n_new + 31) / 32 * 32 * (size_t)c->hidden_size);
    if (x.quant_bits && x.quant_gran != DFL_QUANT_ROW) scores_absmax(&x, w->qmax);

    dfl_status s = DFL_OK;
    /* one of t0 (a cached pass) and k0 (a pass from row k0) is 0 */
    for (int64_t r0 = t0 + k0; r0 < T && s == DFL_OK; r0 += rows) {
        int64_t nb = begin_block(&x, r0);
        int64_t chunks = (nb + ATTN_TASK_ROWS - 1) / ATTN_TASK_ROWS, tasks = g->heads * chunks;
        /* the capture's own work (probe: deflating the tiles of the maps handed over so
         * far) after the block's tasks, filling the threads' tails */
        int64_t jobs = cap && cap->attn_jobs && cap->attn_job ? cap->attn_jobs(cap->user) : 0;
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t task = 0; task < tasks + jobs; task++) {
            if (task >= tasks) {
                cap->attn_job(cap->user, omp_get_thread_num(), task - tasks);
                continue;
            }
            int64_t h = task / chunks, a = r0 + (task % chunks) * ATTN_TASK_ROWS;
            int64_t n = x.bend - a < ATTN_TASK_ROWS ? x.bend - a : ATTN_TASK_ROWS;
            attn_task(&x, h, a, n);
        }
        for (int64_t h = 0; want && h < g->heads && s == DFL_OK; h++) {
            const float *base = w->maps + (size_t)h * (size_t)g->nstore * (size_t)rows * (size_t)T;
            dfl_attn_block b = {l,
                                h,
                                r0,
                                nb,
                                r0 + nb,
                                T,
                                T,
                                base,
                                g->nmaps == 2 ? base + (size_t)rows * (size_t)T : NULL,
                                g->nmaps == 2 ? base + 2 * (size_t)rows * (size_t)T : NULL};
            s = cap->attn_rows(cap->user, &b, err);
        }
    }
    if (s == DFL_OK) dfl__iv_heads(opts->iv, l, c->num_layers, w->att, T, g->att_ld, w->plan, g->heads);
    return s;
}

/* ------------------------------------------- GPT-2 and GPT-NeoX blocks */

/* A projection of either storage: [in, out] (GPT-2's Conv1D) or [out, in] (Linear). */
static void project(const fwd_ws *w, int io, float *y, const float *x, const dfl_wmat *wm, int64_t n)
{
    if (io)
        dfl_matmul_wmat_io(y, x, wm, n, w->scratch, w->scratch_n);
    else
        dfl_matmul_wmat(y, x, wm, n, w->scratch);
}

static void add_bias(float *y, const float *b, int64_t n, int64_t d)
{
    if (b) dfl_add_bias(y, b, n, d);
}

/* The fused projection's row t into q, k, v: GPT-2's c_attn holds q | k | v in its
 * columns; GPT-NeoX's query_key_value holds, per head h, q, k, v of hd each at h·3hd
 * (modeling_gpt_neox.py: view(..., H, 3·hd), then chunk(3)). */
static void split_qkv(fwd_ws *w, const attn_geom *g, int neox, int64_t T)
{
    const int64_t qkv = g->q_ld + g->k_ld + g->v_ld, hd = g->dq;
    for (int64_t t = 0; t < T; t++) {
        const float *r = w->fused + t * qkv;
        if (!neox) {
            memcpy(w->q + t * g->q_ld, r, (size_t)g->q_ld * sizeof(float));
            memcpy(w->k + t * g->k_ld, r + g->q_ld, (size_t)g->k_ld * sizeof(float));
            memcpy(w->v + t * g->v_ld, r + g->q_ld + g->k_ld, (size_t)g->v_ld * sizeof(float));
            continue;
        }
        for (int64_t h = 0; h < g->n_qheads; h++) {
            memcpy(w->q + t * g->q_ld + h * hd, r + h * 3 * hd, (size_t)hd * sizeof(float));
            memcpy(w->k + t * g->k_ld + h * hd, r + h * 3 * hd + hd, (size_t)hd * sizeof(float));
            memcpy(w->v + t * g->v_ld + h * hd, r + h * 3 * hd + 2 * hd, (size_t)hd * sizeof(float));
        }
    }
}

/* Rotate-half RoPE on the first rd values of each head of x[T, ld] (GPT-NeoX's partial
 * rotary: the rest of the head passes through); tables of rd/2 angles per position. */
static void rope_partial(float *x, int64_t T, int64_t ld, int64_t nh, int64_t hd, int64_t rd, const float *cos_t,
                         const float *sin_t)
{
#pragma omp parallel for schedule(static) if (T > 16)
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < nh; h++)
            dfl_rope_row(x + t * ld + h * hd, 1, rd, cos_t + t * (rd / 2), sin_t + t * (rd / 2), 0);
}

/* One block of a LayerNorm / GELU-MLP family: GPT-2 (modeling_gpt2.py GPT2Block) or
 * GPT-NeoX (modeling_gpt_neox.py GPTNeoXLayer). a = o(attn(ln_1(x))) with a fused q|k|v
 * projection, m = down(act(up(ln_2(·)))), all with biases; x += a, then x += m(x), or
 * x += a + m(x) under GPT-NeoX's use_parallel_residual (both norms of the same x).
 * GPT-2's weights are Conv1D [in, out] and it has no RoPE; GPT-NeoX rotates the first
 * rotary_dim values of each head. Scores are q·k / √d, and for GPT-2 1 without
 * scale_attn_weights and / (l + 1) under scale_attn_by_inverse_layer_idx. */
static dfl_status block_ln(fwd_ws *w, const dfl_model *m, const attn_geom *g, int64_t l, int64_t T, int64_t rows,
                           int64_t mlp_rows, const dfl_forward_opts *opts, const dfl_capture *cap, dfl_error *err)
{
    const dfl_config *c = &m->config;
    const dfl_layer_weights *lw = &m->layers[l];
    /* GGUF files hold these projections as [out, in] and the fused qkv as q | k | v */
    const int neox = dfl__family_of(c)->layout == DFL__LAYOUT_NEOX, io = !neox && !m->ggml_layout;
    const int64_t D = c->hidden_size, F = c->intermediate_size, qkv = g->q_ld + g->k_ld + g->v_ld;
    const float eps = (float)c->rms_norm_eps;
    dfl_layernorm(w->xn, w->x, lw->attn_norm, lw->attn_norm_b, T, D, eps);
    dfl_quant_input(opts->quant, DFL_QSITE_ATTN_IN, w->xn, w->xn, T, D); /* probe --quantize acts */
    project(w, io, w->fused, w->xn, &lw->wqkv, T);
    add_bias(w->fused, lw->bqkv, T, qkv);
    split_qkv(w, g, neox && !m->ggml_layout, T);
    if (neox) {
        int64_t rd = c->rotary_dim ? c->rotary_dim : g->dq;
        rope_partial(w->q, T, g->q_ld, g->n_qheads, g->dq, rd, w->cos_t, w->sin_t);
        rope_partial(w->k, T, g->k_ld, g->n_kheads, g->dq, rd, w->cos_t, w->sin_t);
    }
    attn_geom gl = *g;
    if (c->attn_unscaled) gl.scale = 1.0f;
    if (c->attn_scale_by_layer) gl.scale = (float)((double)gl.scale / (double)(l + 1));
    dfl_status s = attention(w, m, &gl, l, T, rows, opts, cap, err);
    if (!s && cap && cap->attn_out) s = cap->attn_out(cap->user, l, w->att, T, g->att_ld, err);
    if (s) return s;
    dfl_quant_input(opts->quant, DFL_QSITE_O_IN, w->att, w->att, T, g->att_ld);
    project(w, io, w->tmp, w->att, &lw->wo, T);
    add_bias(w->tmp, lw->bo, T, D);
    dfl__iv_site(opts->iv, DFL_SITE_ATTN_OUT, l, c->num_layers, w->tmp, T, D);
    if (c->parallel_residual) dfl_layernorm(w->xn, w->x, lw->mlp_norm, lw->mlp_norm_b, T, D, eps);
    dfl_add_inplace(w->x, w->tmp, (size_t)T * (size_t)D);
    if (!c->parallel_residual) dfl_layernorm(w->xn, w->x, lw->mlp_norm, lw->mlp_norm_b, T, D, eps);
    dfl_quant_input(opts->quant, DFL_QSITE_MLP_IN, w->xn, w->xn, T, D);
    for (int64_t r0 = 0; r0 < T; r0 += mlp_rows) {
        int64_t n = T - r0 < mlp_rows ? T - r0 : mlp_rows;
        project(w, io, w->gate, w->xn + r0 * D, &lw->w_up, n);
        add_bias(w->gate, lw->b_up, n, F);
        if (c->act == DFL_ACT_GELU)
            dfl_gelu_erf(w->gate, (size_t)n * (size_t)F);
        else
            dfl_gelu_tanh(w->gate, (size_t)n * (size_t)F);
        dfl_quant_input(opts->quant, DFL_QSITE_DOWN_IN, w->gate, w->gate, n, F);
        project(w, io, w->tmp + r0 * D, w->gate, &lw->w_down, n);
    }
    add_bias(w->tmp, lw->b_down, T, D);
    dfl__iv_site(opts->iv, DFL_SITE_MLP_OUT, l, c->num_layers, w->tmp, T, D);
    if (cap && cap->mlp_out && (s = cap->mlp_out(cap->user, l, w->tmp, T, D, err))) return s;
    dfl_add_inplace(w->x, w->tmp, (size_t)T * (size_t)D);
    return DFL_OK;
}

/* --------------------------------------------- Gemma and OLMo 2 blocks */

/* One block with its norms around the sub-layers rather than (only) before them:
 * Gemma 2 and 3 (modeling_gemma2.py / modeling_gemma3.py Gemma2DecoderLayer:
 * x += post_attention_layernorm(attn(input_layernorm(x))), x +=
 * post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x))), GeGLU, gains 1 + w held
 * as such) or OLMo 2 (modeling_olmo2.py Olmo2DecoderLayer: x += post_attention_layernorm(
 * attn(x)), x += post_feedforward_layernorm(mlp(x)), SwiGLU). q/k norms per head (Gemma 3)
 * or over the whole projection (OLMo 2); the sliding layers' own RoPE base (Gemma 3);
 * the scores' scale and soft-cap from the config. */
static dfl_status block_rms(fwd_ws *w, const dfl_model *m, const attn_geom *g, int64_t l, int64_t T, int64_t rows,
                            int64_t mlp_rows, const dfl_forward_opts *opts, const dfl_capture *cap, dfl_error *err)
{
    const dfl_config *c = &m->config;
    const dfl_layer_weights *lw = &m->layers[l];
    const int64_t D = c->hidden_size, F = c->intermediate_size;
    const float eps = (float)c->rms_norm_eps;
    const float *in = w->x;
    if (lw->attn_norm) {
        dfl_rmsnorm(w->xn, w->x, lw->attn_norm, T, D, eps, 1.0f);
        in = w->xn;
    }
    in = dfl_quant_input(opts->quant, DFL_QSITE_ATTN_IN, in, w->xn, T, D); /* probe --quantize acts */
    dfl_matmul_wmat(w->q, in, &lw->wq, T, w->scratch);
    dfl_matmul_wmat(w->k, in, &lw->wk, T, w->scratch);
    dfl_matmul_wmat(w->v, in, &lw->wv, T, w->scratch);
    if (lw->bq) dfl_add_bias(w->q, lw->bq, T, g->q_ld);
    if (lw->bk) dfl_add_bias(w->k, lw->bk, T, g->k_ld);
    if (lw->bv) dfl_add_bias(w->v, lw->bv, T, g->v_ld);
    /* per head (qk_norm 1: rows of hd) or over the whole projection (qk_norm 2) */
    int whole = c->qk_norm == 2;
    if (lw->q_norm)
        dfl_rmsnorm(w->q, w->q, lw->q_norm, whole ? T : T * g->n_qheads, whole ? g->q_ld : g->dq, eps, 1.0f);
    if (lw->k_norm)
        dfl_rmsnorm(w->k, w->k, lw->k_norm, whole ? T : T * g->n_kheads, whole ? g->k_ld : g->dq, eps, 1.0f);
    int local = c->rope_local_theta > 0 && dfl_config_window(c, l) > 0;
    const float *ct = local ? w->cos_l : w->cos_t, *st = local ? w->sin_l : w->sin_t;
    dfl_rope_apply(w->q, T, g->q_ld, g->n_qheads, g->dq, ct, st, c->rope_interleaved);
    dfl_rope_apply(w->k, T, g->k_ld, g->n_kheads, g->dq, ct, st, c->rope_interleaved);
    attn_geom gl = *g;
    if (c->attn_scale > 0) gl.scale = (float)c->attn_scale;
    dfl_status s = attention(w, m, &gl, l, T, rows, opts, cap, err);
    if (!s && cap && cap->attn_out) s = cap->attn_out(cap->user, l, w->att, T, g->att_ld, err);
    if (s) return s;
    dfl_quant_input(opts->quant, DFL_QSITE_O_IN, w->att, w->att, T, g->att_ld);
    dfl_matmul_wmat(w->tmp, w->att, &lw->wo, T, w->scratch);
    if (lw->post_attn_norm) dfl_rmsnorm(w->tmp, w->tmp, lw->post_attn_norm, T, D, eps, 1.0f);
    dfl__iv_site(opts->iv, DFL_SITE_ATTN_OUT, l, c->num_layers, w->tmp, T, D);
    dfl_add_inplace(w->x, w->tmp, (size_t)T * (size_t)D);
    in = w->x;
    if (lw->mlp_norm) {
        dfl_rmsnorm(w->xn, w->x, lw->mlp_norm, T, D, eps, 1.0f);
        in = w->xn;
    }
    in = dfl_quant_input(opts->quant, DFL_QSITE_MLP_IN, in, w->xn, T, D);
    int geglu = dfl__family_of(c)->mlp == DFL__MLP_GEGLU;
    for (int64_t r0 = 0; r0 < T; r0 += mlp_rows) {
        int64_t n = T - r0 < mlp_rows ? T - r0 : mlp_rows;
        dfl_matmul_wmat(w->gate, in + r0 * D, &lw->w_gate, n, w->scratch);
        dfl_matmul_wmat(w->up, in + r0 * D, &lw->w_up, n, w->scratch);
        if (geglu)
            dfl_geglu(w->gate, w->up, n, F, c->act == DFL_ACT_GELU);
        else
            dfl_swiglu(w->gate, w->up, n, F);
        dfl_quant_input(opts->quant, DFL_QSITE_DOWN_IN, w->gate, w->gate, n, F);
        dfl_matmul_wmat(w->tmp + r0 * D, w->gate, &lw->w_down, n, w->scratch);
    }
    if (lw->post_mlp_norm) dfl_rmsnorm(w->tmp, w->tmp, lw->post_mlp_norm, T, D, eps, 1.0f);
    dfl__iv_site(opts->iv, DFL_SITE_MLP_OUT, l, c->num_layers, w->tmp, T, D);
    if (cap && cap->mlp_out && (s = cap->mlp_out(cap->user, l, w->tmp, T, D, err))) return s;
    dfl_add_inplace(w->x, w->tmp, (size_t)T * (size_t)D);
    return DFL_OK;
}

/* A projection of the pre-norm blocks and the LM head: in KV-cached decoding steps (a
 * few rows) the weights are read in their dtype (kernels_gemv.h); otherwise, and always
 * in full passes, dfl_matmul_wmat. */
static void matmul_rows(const fwd_ws *w, float *y, const float *x, const dfl_wmat *m, int64_t n)
{
    if (w->kc && n <= DFL_GEMV_MAX_ROWS && dfl_gemv_wmat_supported(m))
        dfl_gemv_wmat(y, x, m, n);
    else
        dfl_matmul_wmat(y, x, m, n, w->scratch);
}

/* DIFF V2's per-token λ: lam[T, H] = sigmoid(xn[T, D] · lambda_projᵀ), the factor on
 * map 2 of each row and head. */
static void lambda_tokens(float *lam, const float *xn, const dfl_wmat *w, int64_t T, float *scratch)
{
    dfl_matmul_wmat(lam, xn, w, T, scratch);
    for (int64_t i = 0; i < T * w->rows; i++)
        lam[i] = (float)(1.0 / (1.0 + exp(-(double)lam[i])));
}

/* ---------------------------------------------------------------- forward */

dfl_forward_opts dfl_forward_opts_default(void)
{
    dfl_forward_opts o = {0, DFL_QUANT_TENSOR, 0, NULL, NULL};
    return o;
}

int dfl_forward_max_threads(void)
{
    return omp_get_max_threads();
}

/* ------------------------------------------------ weights larger than memory */

/* Bytes of a mapped weight matrix (0 for ggml blocks: never released, they are small). */
static size_t wmat_bytes(const dfl_wmat *w)
{
    if (!w->data || w->dtype >= DFL_WMAT_GGML) return 0;
    return (size_t)w->rows * (size_t)w->cols * dfl_dtype_size((dfl_dtype)w->dtype);
}

/* The matrices of one layer, for the release below. */
static int layer_mats(const dfl_layer_weights *lw, const dfl_wmat **out)
{
    const dfl_wmat *all[] = {&lw->wq,   &lw->wk,     &lw->wv,   &lw->wo,      &lw->w_gate,
                             &lw->w_up, &lw->w_down, &lw->wqkv, &lw->w_lambda};
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (wmat_bytes(all[i])) out[n++] = all[i];
    return n;
}

/* 1 when the layers' weights exceed half the machine's memory (dfl_forward_opts
 * release_layers 0): then each layer's pages are handed back once the layer is done, so
 * a checkpoint larger than memory streams through it instead of competing with the
 * activations for the page cache. */
static int release_layers(const dfl_model *m)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 0;
    double total = 0;
    for (int64_t l = 0; l < m->config.num_layers; l++) {
        const dfl_wmat *mats[9];
        int n = layer_mats(&m->layers[l], mats);
        for (int i = 0; i < n; i++)
            total += (double)wmat_bytes(mats[i]);
    }
    return total > 0.5 * (double)pages * (double)page;
}

/* MADV_DONTNEED over the whole pages inside each matrix of layer l (read-only private
 * file mappings: the pages are dropped from this process and read again on next use). */
static void release_layer(const dfl_model *m, int64_t l)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const dfl_wmat *mats[9];
    int n = layer_mats(&m->layers[l], mats);
    for (int i = 0; i < n; i++) {
        uintptr_t a = (uintptr_t)mats[i]->data, e = a + wmat_bytes(mats[i]);
        a = (a + page - 1) / page * page;
        e = e / page * page;
        if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
    }
}

dfl_status dfl_forward(const dfl_model *m, const int32_t *tokens, int64_t T, const dfl_forward_opts *opts,
                       const dfl_capture *cap, dfl_error *err)
{
    return dfl__forward_rows(m, tokens, T, 0, NULL, NULL, opts, cap, err);
}

/* The pass over tokens[T] at positions [t0, t0 + T); t0 > 0 only with a cache kc, vc
 * holding the keys and values of positions [0, t0) (kv_cache.h). */
dfl_status dfl__forward_rows(const dfl_model *m, const int32_t *tokens, int64_t T, int64_t t0, float *const *kc,
                             float *const *vc, const dfl_forward_opts *opts, const dfl_capture *cap, dfl_error *err)
{
    const dfl_config *c = &m->config;
    dfl_forward_opts defaults = dfl_forward_opts_default();
    if (!opts) opts = &defaults;
    if (opts->quant_bits != 0 && (opts->quant_bits < 2 || opts->quant_bits > 16))
        return dfl__fail(err, DFL_ERR_USAGE, "logit quantization needs 2 to 16 bits (got %d)", opts->quant_bits);
    if (T < 1) return dfl__fail(err, DFL_ERR_RANGE, "empty token sequence");
    if (t0 > 0 && opts->quant_bits && opts->quant_granularity != DFL_QUANT_ROW)
        return dfl__fail(err, DFL_ERR_USAGE,
                         "logit quantization by tensor or head needs the whole sequence at once; "
                         "with a KV cache use row granularity");
    for (int64_t t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return dfl__fail(err, DFL_ERR_RANGE, "token %lld at position %lld is outside the vocabulary [0, %lld)",
                             (long long)tokens[t], (long long)t, (long long)c->vocab_size);
    const int64_t keys = t0 + T; /* positions [0, keys) once this pass is done */
    if (c->rope_kind == DFL_ROPE_DYNAMIC && keys > c->rope_original_max_pos)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "rope_scaling dynamic: a sequence of %lld tokens is longer than the "
                         "original context (%lld); dynamic NTK scaling past it is not implemented",
                         (long long)keys, (long long)c->rope_original_max_pos);
    const dfl__family *fam = dfl__family_of(c);
    if (m->pos_embed.data && keys > m->pos_embed.rows)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "a sequence of %lld tokens is longer than the model's %lld learned "
                         "positions (n_positions)",
                         (long long)keys, (long long)m->pos_embed.rows);
    attn_geom g = make_geom(c);
    int64_t rows = ATTN_ROWS_TOTAL / g.heads;
    if (rows < ATTN_MIN_ROWS) rows = ATTN_MIN_ROWS;
    if (rows > ATTN_TASK_ROWS) rows = ATTN_TASK_ROWS;
    if (rows > T) rows = T;
    const dfl_wmat *wg = fam->mlp == DFL__MLP_SWIGLU ? &m->layers[0].w_gate : &m->layers[0].w_up;
    int64_t mlp_rows =
        wg->dtype == DFL_DTYPE_F32 && (uintptr_t)wg->data % sizeof(float) == 0 ? MLP_ROWS : MLP_ROWS_CONVERTED;
    fwd_ws w;
    dfl_status s = ws_alloc(&w, c, &g, T, keys, rows, mlp_rows, cap && cap->logits_rows, err);
    if (s) return s;
    w.t0 = t0;
    w.kc = kc;
    w.vc = vc;

    const int64_t D = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
    dfl_rope_params rp = {
        c->rope_theta,           c->rope_kind, c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor,
        c->rope_original_max_pos};
    int64_t rd = c->rotary_dim ? c->rotary_dim : g.dq; /* GPT-NeoX: the rotated part of a head */
    if (c->rope_kind == DFL_ROPE_LONGROPE)             /* Phi-3: the long factors past the original context */
        dfl_rope_inv_freq_longrope(w.inv_freq, rd, c->rope_theta,
                                   keys > c->rope_original_max_pos ? c->rope_long : c->rope_short);
    else
        dfl_rope_inv_freq(w.inv_freq, rd, &rp);
    dfl_rope_tables_at(w.cos_t, w.sin_t, w.inv_freq, rd, t0, T);
    if (c->rope_kind == DFL_ROPE_LONGROPE) /* cos, sin × the attention factor */
        for (size_t i = 0; i < (size_t)T * (size_t)(rd / 2); i++) {
            w.cos_t[i] = (float)(w.cos_t[i] * c->rope_attn_factor);
            w.sin_t[i] = (float)(w.sin_t[i] * c->rope_attn_factor);
        }
    if (c->rope_local_theta > 0) { /* Gemma 3's sliding layers: their own base, unscaled */
        dfl_rope_params lp = {c->rope_local_theta, DFL_ROPE_NONE, 1.0, 0.0, 0.0, 0};
        dfl_rope_inv_freq(w.inv_freq, rd, &lp);
        dfl_rope_tables_at(w.cos_l, w.sin_l, w.inv_freq, rd, t0, T);
    }

    for (int64_t t = 0; t < T; t++)
        dfl_wmat_rows(&m->embed, tokens[t], 1, w.x + t * D);
    if (c->embed_scale > 0) /* Gemma: × √D */
        for (size_t i = 0; i < (size_t)T * (size_t)D; i++)
            w.x[i] *= c->embed_scale;
    if (m->pos_embed.data) { /* learned positions (gpt2 wpe): x[t] += wpe[t] */
        dfl_wmat_rows(&m->pos_embed, t0, T, w.tmp);
        dfl_add_inplace(w.x, w.tmp, (size_t)T * (size_t)D);
    }

    if (cap && cap->embed) s = cap->embed(cap->user, w.x, T, D, err);
    const int stream = opts->release_layers ? opts->release_layers > 0 : release_layers(m);
    const int64_t l0 = dfl__iv_begin(opts->iv, w.x, T, D), k0 = dfl__iv_row0(opts->iv);
    if (k0 >= T || (k0 && opts->quant_bits && opts->quant_granularity != DFL_QUANT_ROW))
        s = dfl__fail(err, DFL_ERR_USAGE, "a pass from row %lld of %lld (not with quantization by tensor or head)",
                      (long long)k0, (long long)T);
    shift_rows(&w, &g, c, k0); /* from here on, rows [k0, T) as rows [0, T - k0) */
    T -= k0;
    for (int64_t l = l0; l < c->num_layers && s == DFL_OK; l++) {
        const dfl_layer_weights *lw = &m->layers[l];
        if (cap && cap->layer_begin) cap->layer_begin(cap->user, l);
        dfl__iv_site(opts->iv, DFL_SITE_RESID_PRE, l, c->num_layers, w.x, T, D);
        if (l > 0 && stream) release_layer(m, l - 1);
        if (fam->layout != DFL__LAYOUT_LLAMA || fam->block != DFL__BLOCK_PRE) {
            s = fam->layout != DFL__LAYOUT_LLAMA ? block_ln(&w, m, &g, l, T, rows, mlp_rows, opts, cap, err)
                                                 : block_rms(&w, m, &g, l, T, rows, mlp_rows, opts, cap, err);
            if (s) break;
            if (cap && cap->hidden) s = cap->hidden(cap->user, l, w.x, T, D, err);
            continue;
        }
        /* x += attn(rmsnorm(x)) */
        dfl_rmsnorm(w.xn, w.x, lw->attn_norm, T, D, (float)c->rms_norm_eps, 1.0f);
        if (cap && cap->linear_rows && (s = cap->linear_rows(cap->user, l, DFL_LINEAR_ATTN_IN, 0, T, D, w.xn, D, err)))
            break;
        dfl_quant_input(opts->quant, DFL_QSITE_ATTN_IN, w.xn, w.xn, T, D); /* probe --quantize acts */
        matmul_rows(&w, w.q, w.xn, &lw->wq, T);
        matmul_rows(&w, w.k, w.xn, &lw->wk, T);
        matmul_rows(&w, w.v, w.xn, &lw->wv, T);
        if (lw->bq) dfl_add_bias(w.q, lw->bq, T, g.q_ld);
        if (lw->bk) dfl_add_bias(w.k, lw->bk, T, g.k_ld);
        if (lw->bv) dfl_add_bias(w.v, lw->bv, T, g.v_ld);
        /* Qwen3: each head of q and k RMS-normalised over its hd values, before RoPE */
        if (lw->q_norm) dfl_rmsnorm(w.q, w.q, lw->q_norm, T * g.n_qheads, g.dq, (float)c->rms_norm_eps, 1.0f);
        if (lw->k_norm) dfl_rmsnorm(w.k, w.k, lw->k_norm, T * g.n_kheads, g.dq, (float)c->rms_norm_eps, 1.0f);
        if (lw->w_lambda.data) {
            lambda_tokens(w.lam, w.xn, &lw->w_lambda, T, w.scratch);
            if (cap && cap->lambda_rows && (s = cap->lambda_rows(cap->user, l, w.lam, T, g.heads, err))) break;
        }
        dfl_rope_apply(w.q, T, g.q_ld, g.n_qheads, g.dq, w.cos_t, w.sin_t, c->rope_interleaved);
        dfl_rope_apply(w.k, T, g.k_ld, g.n_kheads, g.dq, w.cos_t, w.sin_t, c->rope_interleaved);
        if (cap && cap->qk_rows &&
            (s = cap->qk_rows(cap->user, l, T, w.q, g.n_qheads, g.q_ld, w.k, g.n_kheads, g.k_ld, g.dq, err)))
            break;
        if ((s = attention(&w, m, &g, l, T, rows, opts, cap, err))) break;
        if (cap && cap->attn_out && (s = cap->attn_out(cap->user, l, w.att, T, g.att_ld, err))) break;
        if (cap && cap->linear_rows &&
            (s = cap->linear_rows(cap->user, l, DFL_LINEAR_ATTN_OUT, 0, T, g.att_ld, w.att, g.att_ld, err)))
            break;
        dfl_quant_input(opts->quant, DFL_QSITE_O_IN, w.att, w.att, T, g.att_ld);
        matmul_rows(&w, w.tmp, w.att, &lw->wo, T);
        dfl__iv_site(opts->iv, DFL_SITE_ATTN_OUT, l, c->num_layers, w.tmp, T, D);
        dfl_add_inplace(w.x, w.tmp, (size_t)T * (size_t)D);
        /* x += down(silu(gate(xn)) · up(xn)), Motif: down(PolyNorm(gate(xn)) · up(xn)) */
        dfl_rmsnorm(w.xn, w.x, lw->mlp_norm, T, D, (float)c->rms_norm_eps, 1.0f);
        if (cap && cap->linear_rows && (s = cap->linear_rows(cap->user, l, DFL_LINEAR_MLP_IN, 0, T, D, w.xn, D, err)))
            break;
        dfl_quant_input(opts->quant, DFL_QSITE_MLP_IN, w.xn, w.xn, T, D);
        for (int64_t r0 = 0; r0 < T && s == DFL_OK; r0 += mlp_rows) {
            int64_t n = T - r0 < mlp_rows ? T - r0 : mlp_rows;
            matmul_rows(&w, w.gate, w.xn + r0 * D, &lw->w_gate, n);
            matmul_rows(&w, w.up, w.xn + r0 * D, &lw->w_up, n);
            if (lw->poly_w)
                dfl_polynorm_glu(w.gate, w.up, n, F, lw->poly_w, lw->poly_b, DFL_POLYNORM_EPS);
            else
                dfl_swiglu(w.gate, w.up, n, F);
            if (cap && cap->linear_rows)
                s = cap->linear_rows(cap->user, l, DFL_LINEAR_DOWN_IN, r0, n, F, w.gate, F, err);
            dfl_quant_input(opts->quant, DFL_QSITE_DOWN_IN, w.gate, w.gate, n, F);
            matmul_rows(&w, w.tmp + r0 * D, w.gate, &lw->w_down, n);
        }
        if (s) break;
        dfl__iv_site(opts->iv, DFL_SITE_MLP_OUT, l, c->num_layers, w.tmp, T, D);
        if (cap && cap->mlp_out && (s = cap->mlp_out(cap->user, l, w.tmp, T, D, err))) break;
        dfl_add_inplace(w.x, w.tmp, (size_t)T * (size_t)D);
        if (cap && cap->hidden) s = cap->hidden(cap->user, l, w.x, T, D, err);
    }

    if (stream) release_layer(m, c->num_layers - 1);

    /* Final norm, then the LM head in row blocks: [T, V] is never held at once. */
    if (s == DFL_OK && fam->norm == DFL__NORM_LAYER)
        dfl_layernorm(w.xn, w.x, m->final_norm, m->final_norm_b, T, D, (float)c->rms_norm_eps);
    else if (s == DFL_OK)
        dfl_rmsnorm(w.xn, w.x, m->final_norm, T, D, (float)c->rms_norm_eps, 1.0f);
    int64_t lr0 = dfl__iv_logits_row0(opts->iv) - k0;
    for (int64_t r0 = lr0 > 0 ? lr0 : 0; s == DFL_OK && cap && cap->logits_rows && r0 < T; r0 += LM_HEAD_ROWS) {
        int64_t n = T - r0 < LM_HEAD_ROWS ? T - r0 : LM_HEAD_ROWS;
        matmul_rows(&w, w.logits, w.xn + r0 * D, &m->lm_head, n);
        if (c->final_softcap > 0) dfl_softcap(w.logits, (size_t)n * (size_t)V, (float)c->final_softcap);
        s = cap->logits_rows(cap->user, t0 + k0 + r0, n, V, w.logits, err);
    }
    shift_rows(&w, &g, c, -k0);
    ws_free(&w);
    return s;
}

/* ------------------------------------------------------------ convenience */

static dfl_status copy_logits(void *user, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err)
{
    (void)err;
    memcpy((float *)user + row0 * V, logits, (size_t)n * (size_t)V * sizeof(float));
    return DFL_OK;
}

dfl_status dfl_forward_logits(const dfl_model *m, const int32_t *tokens, int64_t T, float *out, dfl_error *err)
{
    dfl_capture cap;
    memset(&cap, 0, sizeof cap);
    cap.user = out;
    cap.logits_rows = copy_logits;
    return dfl_forward(m, tokens, T, NULL, &cap, err);
}
