/* train_vit.h — the trainer's image side: a tiny ViT (model_type "clip") or Diff-ViT
 * ("diffclip") vision tower, exactly the layout model/clip.h loads, trained on the
 * synthetic shapes task (a bright shape at a random place on a textured, speckled
 * background; classify the shape), and saved as a DiffCLIP/CLIP model directory that
 * probe reads (docs/train.md "Images: ViT vs Diff-ViT").
 *
 * The classifier is the CLIP zero-shot head: image embedding e = norm(x_out[cls]) ·
 * image_projection, class k's vector c_k, logit_k = exp(logit_scale) · cos(e, LN(c_k))
 * with LN the affine-free LayerNorm (eps 1e-5) and a fixed logit_scale ln 10. It is
 * written as the text tower: class k is token id k (vocab = classes, context 1), one
 * block whose weights are zero (so the block adds nothing), ln_final 1 / 0,
 * text_projection the identity; probe's zero-shot scores on caption_tokens [[k]] are
 * then the classifier's probabilities.
 *
 * The pair (dfl_vit_pair): ViT with H softmax heads of d = D/H (fused qkv), Diff-ViT
 * with H/2 differential heads (sub-heads 2i and 2i + 1, values 2d wide, λ reparam,
 * RMSNorm sub-norm × (1 − λ_init), λ_init 0.8 as DiffCLIP): parameter counts differ
 * only by 6·d per layer (λq1, λk1, λq2, λk2, sub-norm gain).
 *
 * Files: train_shapes.c (the images), train_vit.c (model, passes, loop, saving).
 */
#ifndef DFL_TRAIN_VIT_H
#define DFL_TRAIN_VIT_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* ------------------------------------------------------------ the task */

#define DFL_SHAPES_CLASSES 4
/* "square", "circle", "triangle", "cross" */
extern const char *const DFL_SHAPES_NAMES[DFL_SHAPES_CLASSES];

/* One image of the task: rgb[S, S, 3] 8-bit, the class, the object's box in pixels
 * (half-open [x0, y0, x1, y1]). Sample `index` of stream `stream` (0 training, 1
 * held-out) of `seed`: the same arguments give the same image on every machine.
 * S in [16, 1024]. */
void dfl_shapes_sample(uint64_t seed, uint64_t stream, uint64_t index, int64_t S, uint8_t *rgb, int *label, int box[4]);

/* CLIP's normalisation of rgb[S, S, 3] into px[3, S, S] with the mean and std that
 * dfl_vit_save writes into config.json "preprocess". */
void dfl_shapes_normalize(const uint8_t *rgb, int64_t S, float *px);

/* Write n held-out samples of seed (stream 1, index first..first+n-1) into dir (made
 * if missing): sample-I.png and prompts.jsonl, one image prompt per sample (probe's
 * format: id, image, box, caption_tokens [[0], ..., [C − 1]], a comment naming the
 * class). Files are written atomically; DFL_ERR_EXISTS when present and !overwrite,
 * DFL_ERR_IO, DFL_ERR_NOMEM. */
dfl_status dfl_shapes_write_samples(const char *dir, uint64_t seed, uint64_t first, int n, int64_t S, int overwrite,
                                    dfl_error *err);

/* ------------------------------------------------------------ the model */

typedef struct dfl_vit_params {
    int diff;                                           /* 0 ViT ("clip"), 1 Diff-ViT ("diffclip") */
    int64_t image_size, patch_size;                     /* 32, 4 */
    int64_t width, layers, heads, mlp_width, embed_dim; /* 64, 2, 4, 128, 32; heads: softmax maps */
    double lambda_init;                                 /* 0.8 */
    int64_t batch, steps, warmup;                       /* 32, 600, 60 */
    double lr, min_lr, weight_decay, beta1, beta2, eps, clip, init_std;
    /* 2e-3, 1e-4, 0.05, 0.9, 0.95, 1e-8, 1.0, 0.02 */
    uint64_t seed;                    /* weights and the training images; 1 */
    int64_t eval_every, eval_samples; /* 100, 512 */
    const char *out;                  /* output directory (made if missing) */
    int overwrite;
} dfl_vit_params;

dfl_vit_params dfl_vit_params_default(void);

/* Check sizes: image a multiple of patch, width of heads, even heads for Diff, each
 * size in range. DFL_ERR_USAGE naming the problem. */
dfl_status dfl_vit_params_check(const dfl_vit_params *p, dfl_error *err);

typedef struct dfl_vit_model dfl_vit_model;

/* A model for p with weights from p->seed (matrices N(0, init_std²), image_projection
 * N(0, 1/D), class vectors N(0, 1), norms 1 / 0, λ vectors N(0, 0.1²), sub-norm 1).
 * Caller owns *out (dfl_vit_free, NULL ok). DFL_ERR_USAGE, DFL_ERR_NOMEM. */
dfl_status dfl_vit_create(const dfl_vit_params *p, dfl_vit_model **out, dfl_error *err);
void dfl_vit_free(dfl_vit_model *m);

/* Parameters of the model (vision tower, projection, class vectors). */
size_t dfl_vit_param_count(const dfl_vit_model *m);

/* Forward and backward over px[B, 3, S, S] with labels[B] (B <= p->batch): *loss the
 * mean cross-entropy, probs[B, C] (may be NULL) the class probabilities; with grads
 * the gradients of the mean loss are left in the model's gradient array. DFL_ERR_USAGE
 * (B out of range, a label outside [0, C)). */
dfl_status dfl_vit_step(dfl_vit_model *m, const float *px, const int *labels, int64_t B, int grads, double *loss,
                        float *probs, dfl_error *err);

/* The named views of the parameters and gradients (names as docs/format.md's DiffCLIP
 * table where the tensor is stored; "class_vectors" for the class vectors, written as
 * token_embedding.weight; ViT's qkv as "…attn.qkv.weight" [3D, D]). Returns the number
 * of tensors; fills at most cap entries. */
typedef struct dfl_vit_view {
    const char *name;
    int ndim;
    int64_t shape[4];
    float *param, *grad;
    size_t numel;
} dfl_vit_view;
size_t dfl_vit_views(dfl_vit_model *m, dfl_vit_view *views, size_t cap);

/* Write dir/config.json and dir/model.safetensors (a "clip" or "diffclip" directory
 * that dfl_clip_load reads), atomically. DFL_ERR_EXISTS, DFL_ERR_IO, DFL_ERR_NOMEM. */
dfl_status dfl_vit_save(const dfl_vit_model *m, const char *dir, int overwrite, dfl_error *err);

/* --------------------------------------------------------------- the run */

typedef struct dfl_vit_report {
    int64_t step, steps;
    double lr, loss;
    int is_eval;
    double eval_loss, eval_acc;
} dfl_vit_report;

typedef struct dfl_vit_result {
    size_t n_params;
    double loss, eval_loss, eval_acc; /* last values */
    double seconds;
} dfl_vit_result;

/* Train into p->out: fresh images every step (seed, stream 0), held-out accuracy on
 * eval_samples images of stream 1 every eval_every steps and at the end, AdamW with
 * warm-up + cosine decay and global-norm clipping (train_optim.c), then config.json,
 * model.safetensors and train.csv (step, lr, loss, eval_loss, eval_acc). report may be
 * NULL. A non-finite loss stops with DFL_ERR_RANGE naming the step (nothing written). */
dfl_status dfl_vit_train(const dfl_vit_params *p, void (*report)(void *user, const dfl_vit_report *r), void *user,
                         dfl_vit_result *res, dfl_error *err);

#endif
