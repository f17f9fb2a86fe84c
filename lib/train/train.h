/* train.h — a CPU trainer for the three model types (llama, diff_transformer,
 * diffllama) on the needle task (needle.h): parameters, gradients and AdamW state as
 * flat f32 arrays with one view per tensor (names and shapes exactly as model.h binds
 * them), a forward pass that keeps its activations and a hand-written backward pass
 * (llm.c style), AdamW with warm-up + cosine decay and global-norm clipping, and the
 * training loop with evaluation, CSV log, atomic checkpoints and resume.
 *
 * Files: train_model.c (layout, init, config.json, saving), train_pass.c (forward and
 * backward), train_optim.c (AdamW, schedule, clipping), train_run.c (the loop),
 * train_plot.c (curves as PNG through plot.h), train_seeds.c (the pair and the loop over
 * seeds, summaries over seeds).
 *
 * Restrictions: multi-head attention only (num_key_value_heads == num_attention_heads;
 * GQA is refused with DFL_ERR_CONFIG), no RoPE scaling. Matmuls run through CBLAS
 * (sgemm), elementwise work with OpenMP over rows, attention per (sequence, head) in
 * parallel. Results are deterministic for a given seed and thread count: every
 * reduction across rows or tasks is summed in a fixed order.
 *
 * A training directory holds config.json + model.safetensors (a model that
 * dfl_model_load / probe read), checkpoint.safetensors (model + AdamW moments +
 * "train.step" + "train.args" + ... + "train.checksum", a CRC-32 over the rest:
 * docs/train.md "Checkpoints"), train.csv, train.png (the curves) and nothing
 * half-written: each file is written to a temporary name and renamed. One run writes a
 * directory at a time (a lock of base/atomic.h); nothing non-finite is ever written.
 */
#ifndef DFL_TRAIN_H
#define DFL_TRAIN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "text/needle.h"
#include "base/report.h"
#include "base/status.h"
#include "render/plot.h"

/* ------------------------------------------------------------ the model */

/* Views of one copy of the parameters (weights, gradients, or an AdamW moment). */
typedef struct dfl_train_layer {
    float *attn_norm;              /* [D] */
    float *wq, *wk, *wv, *wo;      /* [q_ld, D], [k_ld, D], [v_ld, D], [D, att_ld] */
    float *lq1, *lk1, *lq2, *lk2;  /* [dq] Diff only, else NULL */
    float *subln;                  /* [2d] diff_transformer only, else NULL */
    float *wlam;                   /* [H, D] diff_transformer_v2's lambda_proj, else NULL */
    float *mlp_norm;               /* [D] */
    float *w_gate, *w_up, *w_down; /* [F, D], [F, D], [D, F] */
} dfl_train_layer;

typedef struct dfl_train_views {
    float *embed;            /* [V, D] */
    float *final_norm;       /* [D] */
    float *lm_head;          /* [V, D]; == embed when tied */
    dfl_train_layer *layers; /* [L] */
} dfl_train_views;

/* One named tensor of the flat parameter array. */
typedef struct dfl_train_tensor {
    char name[96]; /* as model.h binds it, e.g. "model.layers.0.self_attn.q_proj.weight" */
    int ndim;      /* 1 or 2 */
    int64_t shape[2];
    size_t offset, numel; /* in floats, into the flat arrays */
    int decay;            /* 1: weight decay applies (matrices) */
} dfl_train_tensor;

typedef struct dfl_train_model {
    dfl_config config;
    size_t n_params;               /* floats in each flat array */
    float *params, *grads, *m, *v; /* [n_params] each; owned */
    dfl_train_tensor *tensors;     /* [n_tensors]; owned */
    size_t n_tensors;
    dfl_train_views w, g, mv, vv; /* views into params, grads, m, v */
    float *lambda_init;           /* [L] */
} dfl_train_model;

/* Check that c can be trained here: MHA, no rope scaling, even heads for diffllama.
 * DFL_ERR_CONFIG naming the problem. */
dfl_status dfl_train_config_check(const dfl_config *c, dfl_error *err);

/* Allocate a model for config c (zeroed parameters; call dfl_train_init). Caller owns
 * *out (dfl_train_model_free, NULL ok). DFL_ERR_CONFIG, DFL_ERR_NOMEM. */
dfl_status dfl_train_model_create(const dfl_config *c, dfl_train_model **out, dfl_error *err);
void dfl_train_model_free(dfl_train_model *m);

/* Parameters a config has (the same count dfl_train_model_create lays out). */
size_t dfl_train_param_count(const dfl_config *c);

/* Initialise: matrices N(0, std²), norm gains 1, λ vectors N(0, 0.1²), subln 1;
 * AdamW moments 0. Serial, so the result depends on the seed only. */
void dfl_train_init(dfl_train_model *m, uint64_t seed, double std);
/* The λ ablation: set each layer's λ vectors so that λ = 0 (λq1 = λk1 = 0 and
 * λq2 = λk2 = c with head_dim·c² = ln(1 + λ_init)), leaving A = softmax1. A model
 * without λ vectors is left alone. */
void dfl_train_lambda_zero(dfl_train_model *m);
/* Zero the λ vectors' gradients, so AdamW (moments 0) never moves them. */
void dfl_train_lambda_freeze(dfl_train_model *m);

/* config.json text (caller frees) that dfl_config_parse reads back as m->config. */
char *dfl_train_config_json(const dfl_config *c);

/* Write dir/config.json and dir/model.safetensors (F32) atomically. DFL_ERR_IO,
 * DFL_ERR_EXISTS when present and !overwrite. */
dfl_status dfl_train_save_model(const dfl_train_model *m, const char *dir, int overwrite, dfl_error *err);

/* ----------------------------------------------------------- the passes */

typedef struct dfl_train_ws dfl_train_ws;

/* Workspace (saved activations, gradients of activations, per-thread scratch) for up to
 * max_batch sequences of T tokens with the current OpenMP thread count. Caller owns
 * *out (dfl_train_ws_free, NULL ok). DFL_ERR_NOMEM (sizes are overflow-checked). */
dfl_status dfl_train_ws_create(const dfl_train_model *m, int64_t max_batch, int64_t T, dfl_train_ws **out,
                               dfl_error *err);
void dfl_train_ws_free(dfl_train_ws *w);

/* Forward over tokens[B, T] (B <= max_batch) keeping what backward needs. targets[B, T]
 * gives the token row i should predict, or -1 (ignored). *loss = mean cross-entropy
 * over the non-ignored rows (0 when there are none); *count = their number. Token ids
 * and targets must lie in [0, V) (DFL_ERR_RANGE otherwise). */
dfl_status dfl_train_forward(const dfl_train_model *m, dfl_train_ws *w, const int32_t *tokens, const int32_t *targets,
                             int64_t B, double *loss, int64_t *count, dfl_error *err);

/* Logits of the last forward, [B, T, V] row-major (valid until the next call). */
const float *dfl_train_logits(const dfl_train_ws *w);

/* Gradients of the last forward's mean loss into m->grads (overwritten). */
void dfl_train_backward(dfl_train_model *m, dfl_train_ws *w);

/* ------------------------------------------------------------ optimizer */

typedef struct dfl_adamw {
    double lr; /* this step's learning rate */
    double beta1, beta2, eps, weight_decay;
} dfl_adamw;

/* One AdamW step (PyTorch's: p −= lr·wd·p on decayed tensors, then
 * p −= lr·m̂/(√v̂ + eps)); `step` is 1-based (bias correction). */
void dfl_train_adamw(dfl_train_model *m, const dfl_adamw *o, int64_t step);

/* Learning rate of 0-based step s: linear warm-up over `warmup` steps to lr_max
 * ((s+1)/warmup), then cosine decay to lr_min at step `steps`. */
double dfl_train_lr(int64_t s, int64_t steps, int64_t warmup, double lr_max, double lr_min);

/* Global L2 norm of the gradients (summed in a fixed order); when clip > 0 and the
 * norm exceeds it, gradients are scaled by clip / norm. Returns the norm before. */
double dfl_train_clip(dfl_train_model *m, double clip);

/* -------------------------------------------------------------- the run */

typedef enum dfl_train_loss { DFL_LOSS_TARGET = 0, DFL_LOSS_ALL } dfl_train_loss;

typedef struct dfl_train_params {
    dfl_model_type type;                       /* default llama */
    int64_t layers, hidden, heads, ffn, vocab; /* 2, 128, 4, 512, 128 */
    int tie;                                   /* tie_word_embeddings; default 0 */
    dfl_needle_params task;       /* vocab_size is overwritten by `vocab`; seq 256, 4 needles, 1 query, 4 digits */
    int64_t batch, steps, warmup; /* 16, 1000, 100 */
    double lr, min_lr, weight_decay, beta1, beta2, eps, clip, init_std;
    /* 1e-3, 1e-4, 0.1, 0.9, 0.95, 1e-8, 1.0, 0.02 */
    uint64_t seed;                    /* 1 */
    dfl_train_loss loss;              /* target */
    int64_t eval_every, eval_samples; /* 100, 256 (eval_every 0: only at the end) */
    int64_t ckpt_every;               /* 200 (0: only at the end and when stopped) */
    int64_t stop_at;                  /* stop (with a checkpoint) once this many steps are done; 0 = never */
    int64_t keep_every;               /* also keep the model of every N-th step in out/steps/step-NNNNNN; 0 = off */
    int ablate_lambda;                /* Diff models: λ held at 0 (one softmax map + subln), the paper's ablation */
    const char *out;                  /* output directory (created; its parent must exist) */
    int resume, overwrite;
    int force_schedule; /* resume even if steps, lr, min_lr or warmup differ from the checkpoint's */
} dfl_train_params;

dfl_train_params dfl_train_params_default(void);

/* The dfl_config the params describe (head_dim D/H, D/H/2 for diff_transformer).
 * DFL_ERR_USAGE / DFL_ERR_CONFIG for sizes that do not divide or are out of range. */
dfl_status dfl_train_params_config(const dfl_train_params *p, dfl_config *c, dfl_error *err);

/* What the loop reports after each step and each evaluation. */
typedef struct dfl_train_report {
    int64_t step, steps; /* steps done, total */
    double lr, loss;     /* this step */
    double tokens_per_s; /* since this run started */
    double elapsed_s;    /* of this run */
    int is_eval;         /* 1: the fields below are set */
    double eval_loss, eval_acc, train_loss_avg;
} dfl_train_report;

typedef struct dfl_train_hooks {
    void *user;
    void (*report)(void *user, const dfl_train_report *r); /* may be NULL */
    volatile sig_atomic_t *stop;                           /* checked between steps; non-zero: checkpoint and return */
    /* A problem that does not stop training (the curves' PNG could not be drawn). May be NULL. */
    void (*warn)(void *user, const char *msg);
} dfl_train_hooks;

typedef struct dfl_train_result {
    int64_t steps_done, start_step;
    int interrupted; /* stopped by hooks->stop or stop_at before `steps` */
    size_t n_params;
    double loss, eval_loss, eval_acc; /* last values (NaN when none) */
    int64_t eval_step;                /* the step of eval_loss/eval_acc (0: none in this run) */
    double tokens_per_s;              /* over this run's steps */
    double steady_tokens_per_s;       /* training steps only (no evaluation or checkpoints), after the first */
    double seconds;
} dfl_train_result;

/* Train one model into p->out. A fresh run refuses a directory that already holds
 * training files unless p->overwrite (DFL_ERR_EXISTS); p->resume continues from
 * out/checkpoint.safetensors, which must have been made with the same flags (except
 * eval/checkpoint intervals and stop_at; the schedule — steps, lr, min_lr, warmup — may
 * differ only with force_schedule; DFL_ERR_USAGE otherwise), match its checksum
 * (DFL_ERR_FORMAT), hold finite weights and moments, second moments >= 0 and a step in
 * [0, steps] (DFL_ERR_RANGE); it gives bit-identical results to an uninterrupted run
 * with the same thread count. Refused before anything is touched: a directory another
 * run holds (DFL_ERR_EXISTS naming its pid) and sizes whose memory exceeds MemAvailable
 * (DFL_ERR_NOMEM). A non-finite loss, gradient norm, held-out loss or state stops the
 * run with DFL_ERR_RANGE naming the step, writing nothing of that step. hooks may be
 * NULL. DFL_ERR_USAGE, DFL_ERR_CONFIG, DFL_ERR_IO, DFL_ERR_NOMEM, ... */
dfl_status dfl_train_run(const dfl_train_params *p, const dfl_train_hooks *hooks, dfl_train_result *res,
                         dfl_error *err);

/* The matched pair for p (docs/train.md "Matching rule"): a llama model
 * with p->heads heads of head_dim D/H, and a diff_transformer with H/2 differential
 * heads of the same head_dim (values 2·head_dim wide), so that their parameter counts
 * differ only by the 6·head_dim λ/subln scalars per layer. H must be even. */
dfl_status dfl_train_pair_params(const dfl_train_params *p, dfl_train_params *llama, dfl_train_params *diff,
                                 dfl_error *err);

/* ------------------------------------------------------ pairs and seeds */

/* What `train --pair` runs (train_seeds.c): the matched pair into dir/transformer and
 * dir/diff, or with seeds one pair per seed into dir/seed-S/ and then the summary. */
typedef struct dfl_train_pairs_params {
    dfl_train_params llama, diff; /* from dfl_train_pair_params; `out` and (with seeds) `seed` are set per run */
    const char *dir;              /* OUTDIR, at most 3000 bytes */
    const uint64_t *seeds;        /* [n_seeds]; NULL: one pair into dir */
    int n_seeds;                  /* 0..64 */
    int summarize;                /* with seeds: train nothing, only (re)write the summary */
    const dfl_plot_paper *paper;  /* font and width of dir/train.png and seeds.png; NULL = defaults */
} dfl_train_pairs_params;

/* dfl_train_pairs_params with seeds NULL and every field zero but the pair's defaults. */
dfl_train_pairs_params dfl_train_pairs_params_default(void);

typedef struct dfl_train_pairs_hooks {
    dfl_train_hooks train; /* handed to every model's dfl_train_run; train.user is every hook's user */
    /* Before and after each model ("transformer" or "diff", its params with `out` set;
     * r as dfl_train_run returned it). May be NULL. */
    void (*begin)(void *user, const char *name, const dfl_train_params *p);
    void (*end)(void *user, const char *name, const dfl_train_params *p, const dfl_train_result *r);
    /* One line of progress ("seed 2 (1 of 3) into DIR", "wrote DIR/train.png"). May be NULL. */
    void (*note)(void *user, const char *msg);
} dfl_train_pairs_hooks;

typedef struct dfl_train_pairs_result {
    int stopped;      /* train.stop was raised: the run ended after a model's checkpoint, no summary */
    int models;       /* models trained (or found already trained) */
    char *summary_md; /* with seeds, when written: the steps-to table as markdown (caller frees), else NULL */
} dfl_train_pairs_result;

/* Train the pair (llama, then Diff; a --resume whose Diff model has no checkpoint yet
 * starts it), then both curves into dir/train.png (a failure there is a warning). With
 * seeds: that for each seed into dir/seed-S/ (a resume starts the seeds not begun),
 * stopping at the first error or stop, then dir/seeds_curves.csv, seeds_steps_to.csv,
 * seeds_steps_to.md and seeds.png (dfl_train_seeds_summary). h may be NULL; *res is
 * always set (free summary_md). DFL_ERR_USAGE (params), then dfl_train_run's and
 * dfl_train_seeds_summary's statuses. */
dfl_status dfl_train_pairs_run(const dfl_train_pairs_params *pp, const dfl_train_pairs_hooks *h,
                               dfl_train_pairs_result *res, dfl_error *err);

/* Curves of n (1..8) runs' train.csv files as one PNG at png (overwritten, atomic):
 * loss against step (train dashed, held-out solid) and held-out retrieval accuracy,
 * one colour per run, labelled labels[i]; title may be NULL. DFL_ERR_IO (a CSV or the
 * PNG), DFL_ERR_USAGE (no rows), and plot.h's statuses. */
dfl_status dfl_train_plot(const char *png, const char *const *csv_paths, const char *const *labels, int n,
                          const char *title, dfl_error *err);
/* The same in pp's font and at pp's width (--font, --width; NULL = as above). */
dfl_status dfl_train_plot_paper(const char *png, const char *const *csv_paths, const char *const *labels, int n,
                                const char *title, const dfl_plot_paper *pp, dfl_error *err);

/* ---------------------------------------------------------- over seeds */
/* Seeds as an axis (train_seeds.c): a protocol trained once per seed S keeps its
 * runs in dir/seed-S/<model>/ (train --pair dir --seeds LIST writes seed-S/transformer
 * and seed-S/diff). */
#define DFL_SEEDS_N_LEVELS 3
extern const double DFL_SEEDS_LEVELS[DFL_SEEDS_N_LEVELS]; /* 0.25, 0.5, 0.9 */

/* The first step[i] whose acc[i] >= level (rows in step order), or -1 if none. */
int64_t dfl_train_steps_to(const double *step, const double *acc, int n, double level);

/* Summarise the runs dir/seed-<seeds[i]>/<models[j]>/train.csv (a missing run is left
 * out; labels[j] names model j in tables and the figure). *curves gets the table
 * "curves" (per model and evaluated step: seeds, mean / sd / min / max held-out
 * accuracy, mean / min / max held-out loss, mean training loss); *steps_to the table
 * "steps_to" (per model and seed: the first step at 25, 50, 90% held-out accuracy,
 * "> N" when not reached; then per model the mean over seeds when all reached).
 * png (may be NULL): both panels, mean solid and min/max dotted. The caller owns both
 * reports (dfl_report_destroy). DFL_ERR_USAGE (1..8 models, 1+ seeds), DFL_ERR_IO
 * (no run at all, an unreadable CSV, the PNG), DFL_ERR_NOMEM. */
dfl_status dfl_train_seeds_summary(const char *dir, const uint64_t *seeds, int n_seeds, const char *const *models,
                                   const char *const *labels, int n_models, const char *png, dfl_report **curves,
                                   dfl_report **steps_to, dfl_error *err);
/* The same with the figure in pp's font and at pp's width (NULL = as above). */
dfl_status dfl_train_seeds_summary_paper(const char *dir, const uint64_t *seeds, int n_seeds, const char *const *models,
                                         const char *const *labels, int n_models, const char *png,
                                         const dfl_plot_paper *pp, dfl_report **curves, dfl_report **steps_to,
                                         dfl_error *err);
#endif
