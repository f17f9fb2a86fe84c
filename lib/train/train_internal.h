/* train_internal.h — what the trainer's files share (dfl__ prefix): the attention
 * geometry of the three model types under multi-head attention. */
#ifndef DFL_TRAIN_INTERNAL_H
#define DFL_TRAIN_INTERNAL_H

#include <stdint.h>

#include "model/family.h"
#include "model/model.h"
#include "render/plot.h"

/* The head plan (dfl__head_plan, model/family.h) is the forward pass's, here always
 * with num_kv_heads == num_heads:
 *   llama             H heads; map of head h = q/k columns h·hd; value h·hd (hd wide)
 *   diff_transformer  H heads; map t of head h = q/k sub-head 2h+t (d wide);
 *                     value = v columns h·2d (2d wide); RMSNorm(2d, eps 1e-5, subln)
 *   diffllama         H/2 heads; map t of head h = q/k head h + t·H/2; value =
 *                     concat(v head h, v head h + H/2); RMSNorm(2hd, eps, no gain)
 *   diff_transformer_v2  H heads from 2H q heads; map t of head h = q head 2h+t, k and v
 *                     head h (hd wide); λ per token and head: σ(lambda_proj(xn1))
 * Diff heads: A = softmax1 − λ·softmax2, out = RMSNorm(A·v)·(1 − λ_init), the norm's
 * eps dfl__subnorm_eps; DIFF V2: out = A·v (no sub-layer norm, λ of each row). */
typedef struct dfl__train_geom {
    int nmaps;     /* 1 llama, 2 Diff */
    int64_t heads; /* analysis heads */
    int64_t dq;    /* q/k width of one map */
    int64_t q_ld, k_ld, v_ld, att_ld;
    int64_t n_qheads; /* q heads of width dq, for RoPE */
    int64_t n_kheads; /* k heads of width dq (n_qheads but for DIFF V2: H) */
    int subnorm;      /* Diff heads with the sub-layer norm (not DIFF V2) */
    int token_lambda; /* DIFF V2: λ per token and head */
    int64_t width;    /* output width of one head (hd, or 2·dq for Diff) */
    float scale;      /* 1/sqrt(dq) */
} dfl__train_geom;

dfl__train_geom dfl__train_geom_make(const dfl_config *c);

/* The columns of a train.csv that plots and summaries use (train_plot.c): one entry
 * per row, rows that do not parse skipped. */
typedef struct dfl__train_curve {
    double *step, *loss, *eval_loss, *eval_acc; /* [n] each; owned */
    int n;
} dfl__train_curve;
/* Read path into *c (caller frees with dfl__train_curve_free, also after a failure).
 * DFL_ERR_IO, DFL_ERR_NOMEM. */
dfl_status dfl__train_curve_read(const char *path, dfl__train_curve *c, dfl_error *err);
void dfl__train_curve_free(dfl__train_curve *c);

/* Every training figure (train_plot.c): loss on the left, retrieval accuracy (0 to 1)
 * on the right, side by side, written to path (format by extension). The caller sets
 * titles, series and legends; the shared axes, sizes and font are set here. */
dfl_status dfl__train_panels_write(const char *path, dfl_line_chart loss, dfl_line_chart acc, const dfl_plot_paper *pp,
                                   dfl_error *err);

/* The bytes dfl_train_ws_create would allocate for config c (nothing is allocated), so
 * that a run can refuse sizes the machine cannot hold before it allocates. DFL_ERR_NOMEM
 * when the sizes overflow, DFL_ERR_USAGE as dfl_train_ws_create. */
dfl_status dfl__train_ws_bytes(const dfl_config *c, int64_t max_batch, int64_t T, size_t *bytes, dfl_error *err);

/* Attention block size of a workspace (default 64; tests use small ones so that tiny
 * sequences cross blocks). <= 0 restores the default. */
struct dfl_train_ws;
void dfl__train_ws_set_block(struct dfl_train_ws *w, int64_t block);

/* Σ a[i]·b[i] in double (train_pass.c; train_vit.c uses it too). */
double dfl__train_dotd(const float *a, const float *b, int64_t n);

/* A Diff layer's reparameterised λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init, dots in double
 * as model.c does; and its backward, dλ into the four vectors' gradients (train_pass.c;
 * train_vit.c uses both). */
float dfl__train_lambda(const float *lq1, const float *lk1, const float *lq2, const float *lk2, int64_t n,
                        double lambda_init);
void dfl__train_lambda_bwd(double dlam, const float *lq1, const float *lk1, const float *lq2, const float *lk2,
                           float *gq1, float *gk1, float *gq2, float *gk2, int64_t n);

/* For y = x·Wᵀ: dx[n, in] (= when beta 0, += when 1) dy[n, out]·W (dx NULL: skipped)
 * and dW[out, in] += dyᵀ·x, through sgemm (train_pass.c; train_vit.c uses it too). */
void dfl__train_mm_bwd(float *dx, float beta, float *dW, const float *dy, const float *x, const float *W, int64_t n,
                       int64_t in, int64_t out);

/* mkdir -p dir; DFL_ERR_IO naming the part that failed or is not a directory (train_run.c). */
dfl_status dfl__train_make_dirs(const char *dir, dfl_error *err);

/* config.json's "preprocess" object for the shapes task's images of side S (train_shapes.c):
 * resize = crop = S and the mean and std of dfl_shapes_normalize. Returns snprintf's count. */
int dfl__shapes_preprocess_json(char *buf, size_t cap, int64_t S);

#endif
