/* forward.c — embedding, pre-norm blocks, final norm, LM head; attention per head in
 * row blocks with the three attention variants expressed as one head plan. */
#include "forward.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* Rows of the attention block: sized so that all heads' maps of a block take about
 * ATTN_ROWS_TOTAL rows of T floats each, at least 8 rows per head. */
#define ATTN_ROWS_TOTAL 256
#define ATTN_TASK_ROWS 16
#define LM_HEAD_ROWS 64

/* ------------------------------------------------------------- head plan */

/* Where one analysis head reads its queries, keys and values and writes its output.
 * Columns index the q [T, q_ld], k [T, k_ld], v [T, v_ld] and att [T, att_ld] buffers. */
typedef struct head_plan {
    int64_t q_col[2], k_col[2];      /* per map (map 2 only for Diff models) */
    int64_t v_col[2], v_width[2];    /* value parts, concatenated in order */
    int n_vparts;
    int64_t out_col, out_width;
} head_plan;

typedef struct attn_geom {
    int nmaps;              /* 1 llama, 2 Diff */
    int64_t dq;             /* query/key width of one map */
    int64_t q_ld, k_ld, v_ld, att_ld;
    int64_t n_qheads, n_kheads;  /* heads of width dq in q and k (for RoPE) */
    int64_t heads;          /* analysis heads */
    float scale;            /* 1/sqrt(dq) */
} attn_geom;

static attn_geom make_geom(const dfl_config *c)
{
    attn_geom g;
    int64_t H = c->num_heads, Hkv = c->num_kv_heads, hd = c->head_dim;
    g.dq = hd;
    g.scale = (float)(1.0 / sqrt((double)hd));
    g.heads = dfl_config_analysis_heads(c);
    g.nmaps = dfl_config_maps_per_head(c);
    if (c->type == DFL_MODEL_DIFF_TRANSFORMER) {
        g.n_qheads = 2 * H;
        g.n_kheads = 2 * Hkv;
        g.v_ld = Hkv * 2 * hd;
        g.att_ld = H * 2 * hd;
    } else {
        g.n_qheads = H;
        g.n_kheads = Hkv;
        g.v_ld = Hkv * hd;
        g.att_ld = H * hd;
    }
    g.q_ld = g.n_qheads * hd;
    g.k_ld = g.n_kheads * hd;
    return g;
}

static head_plan make_plan(const dfl_config *c, int64_t h)
{
    head_plan p;
    memset(&p, 0, sizeof p);
    int64_t H = c->num_heads, hd = c->head_dim, n_rep = c->num_heads / c->num_kv_heads;
    switch (c->type) {
    case DFL_MODEL_LLAMA:
        p.q_col[0] = h * hd;
        p.k_col[0] = (h / n_rep) * hd;
        p.v_col[0] = (h / n_rep) * hd;
        p.v_width[0] = hd;
        p.n_vparts = 1;
        p.out_col = h * hd;
        p.out_width = hd;
        break;
    case DFL_MODEL_DIFF_TRANSFORMER:
        /* Map t of head h is q sub-head 2h+t; its key sub-head depends on how the
         * implementation repeats kv heads under GQA (DESIGN.md "diff_kv_pairing"). */
        for (int t = 0; t < 2; t++) {
            int64_t ks = c->kv_pairing == DFL_KV_FLASH ? 2 * (h / n_rep) + t : (2 * h + t) / n_rep;
            p.q_col[t] = (2 * h + t) * hd;
            p.k_col[t] = ks * hd;
        }
        p.v_col[0] = (h / n_rep) * 2 * hd;
        p.v_width[0] = 2 * hd;
        p.n_vparts = 1;
        p.out_col = h * 2 * hd;
        p.out_width = 2 * hd;
        break;
    case DFL_MODEL_DIFFLLAMA:
        /* Head h pairs maps h and h + H/2; its value concatenates their values. */
        for (int t = 0; t < 2; t++) {
            int64_t qh = h + t * (H / 2);
            p.q_col[t] = qh * hd;
            p.k_col[t] = (qh / n_rep) * hd;
            p.v_col[t] = (qh / n_rep) * hd;
            p.v_width[t] = hd;
        }
        p.n_vparts = 2;
        p.out_col = h * 2 * hd;
        p.out_width = 2 * hd;
        break;
    }
    return p;
}

double dfl_forward_flops(const dfl_config *c, int64_t T)
{
    attn_geom g = make_geom(c);
    double D = (double)c->hidden_size, F = (double)c->intermediate_size, t = (double)T;
    double proj = D * (double)(g.q_ld + g.k_ld + g.v_ld + g.att_ld);
    double mlp = 3.0 * D * F;
    /* causal attention: on average (T+1)/2 keys per row, scores and value products */
    double keys = (t + 1.0) / 2.0;
    double att = (double)g.heads * keys * ((double)g.nmaps * (double)g.dq + (double)(g.att_ld / g.heads));
    double per_token = 2.0 * ((double)c->num_layers * (proj + mlp + att) + D * (double)c->vocab_size);
    return per_token * t;
}

/* ------------------------------------------------------------ workspace */

typedef struct fwd_ws {
    float *x, *xn;          /* [T, D] residual stream, normed copy */
    float *q, *k, *v;       /* [T, q_ld], [T, k_ld], [T, v_ld] */
    float *att;             /* [T, att_ld] heads' outputs before o_proj */
    float *tmp;             /* [T, D] */
    float *gate, *up;       /* [T, F] */
    float *maps;            /* [heads, 3, rows, T] one attention block (map1, map2, diff) */
    float *cos_t, *sin_t;   /* [T, dq/2] */
    double *inv_freq;       /* [dq/2] */
    int64_t *lim;           /* [rows] last visible key of each block row */
    float *logits;          /* [LM_HEAD_ROWS, V] */
} fwd_ws;

static void ws_free(fwd_ws *w)
{
    void **p = (void **)w;
    for (size_t i = 0; i < sizeof *w / sizeof(void *); i++) free(p[i]);
    memset(w, 0, sizeof *w);
}

/* All buffers with overflow-checked sizes; DFL_ERR_NOMEM names the sequence length. */
static dfl_status ws_alloc(fwd_ws *w, const dfl_config *c, const attn_geom *g, int64_t T, int64_t rows,
                           dfl_error *err)
{
    size_t t = (size_t)T, D = (size_t)c->hidden_size, F = (size_t)c->intermediate_size;
    size_t maps_n;
    memset(w, 0, sizeof *w);
    int ok = dfl__mul_ok((size_t)g->heads * 3 * (size_t)rows, t, &maps_n);
    if (ok) {
        w->x = dfl__alloc_array(t, D * sizeof(float));
        w->xn = dfl__alloc_array(t, D * sizeof(float));
        w->tmp = dfl__alloc_array(t, D * sizeof(float));
        w->q = dfl__alloc_array(t, (size_t)g->q_ld * sizeof(float));
        w->k = dfl__alloc_array(t, (size_t)g->k_ld * sizeof(float));
        w->v = dfl__alloc_array(t, (size_t)g->v_ld * sizeof(float));
        w->att = dfl__alloc_array(t, (size_t)g->att_ld * sizeof(float));
        w->gate = dfl__alloc_array(t, F * sizeof(float));
        w->up = dfl__alloc_array(t, F * sizeof(float));
        w->maps = dfl__alloc_array(maps_n, sizeof(float));
        w->cos_t = dfl__alloc_array(t, (size_t)g->dq / 2 * sizeof(float));
        w->sin_t = dfl__alloc_array(t, (size_t)g->dq / 2 * sizeof(float));
        w->inv_freq = dfl__alloc_array((size_t)g->dq / 2, sizeof(double));
        w->lim = dfl__alloc_array((size_t)rows, sizeof(int64_t));
        w->logits = dfl__alloc_array(LM_HEAD_ROWS, (size_t)c->vocab_size * sizeof(float));
    }
    if (!ok || !w->x || !w->xn || !w->tmp || !w->q || !w->k || !w->v || !w->att || !w->gate || !w->up ||
        !w->maps || !w->cos_t || !w->sin_t || !w->inv_freq || !w->lim || !w->logits) {
        ws_free(w);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for a forward pass over %lld tokens", (long long)T);
    }
    return DFL_OK;
}

/* ------------------------------------------------------------- attention */

/* Rows [a, a+n) of head h (block starts at r0): scores, causal softmax, the
 * differential combination, values and, for Diff heads, the sub-layer norm. Runs
 * inside the parallel region: BLAS calls here are serial (OpenBLAS OpenMP build). */
static void attn_task(const fwd_ws *w, const attn_geom *g, const head_plan *p, const dfl_layer_weights *lw,
                      const dfl_config *c, int64_t T, int64_t rows, int64_t r0, int64_t bend, int64_t a, int64_t n,
                      int64_t h)
{
    int64_t ncols = a + n;                       /* keys 0..a+n-1 are visible to some row */
    /* Rows are handed out over the block's keys [0, bend): zero what this task's rows
     * cannot see so no stale values from an earlier block remain. */
    float *m[3];                                 /* [n, T] rows of map1, map2, diff in the block */
    for (int i = 0; i < 3; i++) m[i] = w->maps + (((size_t)h * 3 + (size_t)i) * (size_t)rows + (size_t)(a - r0)) * (size_t)T;
    const int64_t *lim = w->lim + (a - r0);
    for (int t = 0; t < g->nmaps; t++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)ncols, (int)g->dq, g->scale,
                    w->q + a * g->q_ld + p->q_col[t], (int)g->q_ld, w->k + p->k_col[t], (int)g->k_ld, 0.0f,
                    m[t], (int)T);
        dfl_softmax_causal(m[t], n, bend, T, lim);
    }
    const float *A = m[0];
    if (g->nmaps == 2) {
        float lam = lw->lambda;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < bend; j++) m[2][i * T + j] = m[0][i * T + j] - lam * m[1][i * T + j];
        A = m[2];
    }
    float *out = w->att + a * g->att_ld + p->out_col;   /* [n, out_width], stride att_ld */
    int64_t off = 0;
    for (int part = 0; part < p->n_vparts; part++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)p->v_width[part], (int)ncols, 1.0f,
                    A, (int)T, w->v + p->v_col[part], (int)g->v_ld, 0.0f, out + off, (int)g->att_ld);
        off += p->v_width[part];
    }
    if (c->type == DFL_MODEL_LLAMA) return;
    /* unilm: RMSNorm(2d, eps 1e-5, gain subln); DiffLlama: RMSNorm(2hd, eps, no gain). */
    float eps = c->type == DFL_MODEL_DIFF_TRANSFORMER ? 1e-5f : (float)c->rms_norm_eps;
    for (int64_t i = 0; i < n; i++) {
        float *row = out + i * g->att_ld;
        float ss = 0.0f;
        for (int64_t j = 0; j < p->out_width; j++) ss += row[j] * row[j];
        float inv = (1.0f - lw->lambda_init) / sqrtf(ss / (float)p->out_width + eps);
        for (int64_t j = 0; j < p->out_width; j++) row[j] *= inv * (lw->subln ? lw->subln[j] : 1.0f);
    }
}

static dfl_status attention(fwd_ws *w, const dfl_model *m, const attn_geom *g, int64_t l, int64_t T,
                            int64_t rows, const dfl_capture *cap, dfl_error *err)
{
    const dfl_config *c = &m->config;
    const dfl_layer_weights *lw = &m->layers[l];
    int want = cap && cap->attn_rows && cap->want_maps && cap->want_maps(cap->user, l);
    head_plan plans[64], *plan = plans;
    if (g->heads > 64 && !(plan = dfl__alloc_array((size_t)g->heads, sizeof *plan)))
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t h = 0; h < g->heads; h++) plan[h] = make_plan(c, h);

    dfl_status s = DFL_OK;
    for (int64_t r0 = 0; r0 < T && s == DFL_OK; r0 += rows) {
        int64_t nb = T - r0 < rows ? T - r0 : rows;
        for (int64_t i = 0; i < nb; i++) w->lim[i] = r0 + i;
        int64_t chunks = (nb + ATTN_TASK_ROWS - 1) / ATTN_TASK_ROWS;
        int64_t tasks = g->heads * chunks;
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t task = 0; task < tasks; task++) {
            int64_t h = task / chunks, a = r0 + (task % chunks) * ATTN_TASK_ROWS;
            int64_t n = r0 + nb - a < ATTN_TASK_ROWS ? r0 + nb - a : ATTN_TASK_ROWS;
            attn_task(w, g, &plan[h], lw, c, T, rows, r0, r0 + nb, a, n, h);
        }
        for (int64_t h = 0; want && h < g->heads && s == DFL_OK; h++) {
            const float *base = w->maps + (size_t)h * 3 * (size_t)rows * (size_t)T;
            dfl_attn_block b = {l, h, r0, nb, r0 + nb, T, T, base,
                                g->nmaps == 2 ? base + (size_t)rows * (size_t)T : NULL,
                                g->nmaps == 2 ? base + 2 * (size_t)rows * (size_t)T : NULL};
            s = cap->attn_rows(cap->user, &b, err);
        }
    }
    if (plan != plans) free(plan);
    return s;
}

/* ---------------------------------------------------------------- forward */

dfl_status dfl_forward(const dfl_model *m, const int32_t *tokens, int64_t T, const dfl_capture *cap, dfl_error *err)
{
    const dfl_config *c = &m->config;
    if (T < 1) return dfl__fail(err, DFL_ERR_RANGE, "empty token sequence");
    for (int64_t t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return dfl__fail(err, DFL_ERR_RANGE, "token %lld at position %lld is outside the vocabulary [0, %lld)",
                             (long long)tokens[t], (long long)t, (long long)c->vocab_size);
    attn_geom g = make_geom(c);
    int64_t rows = ATTN_ROWS_TOTAL / g.heads;
    if (rows < 8) rows = 8;
    if (rows > T) rows = T;
    fwd_ws w;
    dfl_status s = ws_alloc(&w, c, &g, T, rows, err);
    if (s) return s;

    const int64_t D = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
    dfl_rope_params rp = {c->rope_theta, c->rope_kind, c->rope_factor, c->rope_low_freq_factor,
                          c->rope_high_freq_factor, c->rope_original_max_pos};
    dfl_rope_inv_freq(w.inv_freq, g.dq, &rp);
    dfl_rope_tables(w.cos_t, w.sin_t, w.inv_freq, g.dq, T);

    for (int64_t t = 0; t < T; t++) memcpy(w.x + t * D, m->embed + (size_t)tokens[t] * (size_t)D, (size_t)D * sizeof(float));

    for (int64_t l = 0; l < c->num_layers && s == DFL_OK; l++) {
        const dfl_layer_weights *lw = &m->layers[l];
        /* x += attn(rmsnorm(x)) */
        dfl_rmsnorm(w.xn, w.x, lw->attn_norm, T, D, (float)c->rms_norm_eps, 1.0f);
        dfl_matmul_xwt(w.q, w.xn, lw->wq, T, D, g.q_ld);
        dfl_matmul_xwt(w.k, w.xn, lw->wk, T, D, g.k_ld);
        dfl_matmul_xwt(w.v, w.xn, lw->wv, T, D, g.v_ld);
        dfl_rope_apply(w.q, T, g.q_ld, g.n_qheads, g.dq, w.cos_t, w.sin_t, c->rope_interleaved);
        dfl_rope_apply(w.k, T, g.k_ld, g.n_kheads, g.dq, w.cos_t, w.sin_t, c->rope_interleaved);
        if ((s = attention(&w, m, &g, l, T, rows, cap, err))) break;
        dfl_matmul_xwt(w.tmp, w.att, lw->wo, T, g.att_ld, D);
        dfl_add_inplace(w.x, w.tmp, (size_t)T * (size_t)D);
        /* x += down(silu(gate(xn)) · up(xn)) */
        dfl_rmsnorm(w.xn, w.x, lw->mlp_norm, T, D, (float)c->rms_norm_eps, 1.0f);
        dfl_matmul_xwt(w.gate, w.xn, lw->w_gate, T, D, F);
        dfl_matmul_xwt(w.up, w.xn, lw->w_up, T, D, F);
        dfl_swiglu(w.gate, w.up, T, F);
        dfl_matmul_xwt(w.tmp, w.gate, lw->w_down, T, F, D);
        dfl_add_inplace(w.x, w.tmp, (size_t)T * (size_t)D);
    }

    /* Final norm, then the LM head in row blocks: [T, V] is never held at once. */
    if (s == DFL_OK) dfl_rmsnorm(w.xn, w.x, m->final_norm, T, D, (float)c->rms_norm_eps, 1.0f);
    for (int64_t r0 = 0; s == DFL_OK && cap && cap->logits_rows && r0 < T; r0 += LM_HEAD_ROWS) {
        int64_t n = T - r0 < LM_HEAD_ROWS ? T - r0 : LM_HEAD_ROWS;
        dfl_matmul_xwt(w.logits, w.xn + r0 * D, m->lm_head, n, D, V);
        s = cap->logits_rows(cap->user, r0, n, V, w.logits, err);
    }
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
    dfl_capture cap = {out, NULL, NULL, copy_logits};
    return dfl_forward(m, tokens, T, &cap, err);
}
