/* intervene.h — causal interventions inside the forward pass (docs/probe.md
 * "Interventions"): head ablation, λ override, map choice of Diff heads, attention
 * knockout and activation patching, plus the recording of activations they need (a
 * source run for patching, a mean over a prompt set for mean ablation).
 *
 * The forward pass (forward.c) calls the dfl__iv_* hooks below at fixed sites; each
 * hook takes a NULL list and then does nothing, so the unmodified pass is unchanged bit
 * for bit. Sites, in TransformerLens's terms:
 *   resid_pre  layer l's input x[T, D] (hook_resid_pre);
 *   head       the heads' outputs before the output projection att[T, att_ld], head h in
 *              its plan's columns [out_col, out_col + out_width) (hook_z: after the
 *              weighted sum of values and, for Diff heads, the sub-layer norm);
 *   attn_out   what the attention adds to the residual stream [T, D] (after o_proj, its
 *              bias and a post-attention norm where the family has one);
 *   mlp_out    what the MLP adds [T, D] (likewise).
 * Layers and heads are analysis heads (dfl_config_analysis_heads) as in the dump.
 */
#ifndef DFL_INTERVENE_H
#define DFL_INTERVENE_H

#include <stddef.h>
#include <stdint.h>

#include "model/family.h"

typedef enum dfl_iv_kind {
    DFL_IV_ABLATE = 0, /* replace heads' outputs: zero, a mean, or another run's */
    DFL_IV_LAMBDA,     /* λ of Diff heads (σ(λ) per token for DIFF V2): a value or a scale */
    DFL_IV_MAP,        /* which map a Diff head uses: 1 (map1 alone) or 2 (map2 alone) */
    DFL_IV_KNOCKOUT,   /* query rows in `rows` may not attend keys in `keys` */
    DFL_IV_PATCH       /* values at a site and positions from a source run */
} dfl_iv_kind;

typedef enum dfl_iv_site {
    DFL_SITE_RESID_PRE = 0,
    DFL_SITE_ATTN_OUT,
    DFL_SITE_MLP_OUT,
    DFL_SITE_HEAD,
    DFL_SITES
} dfl_iv_site;

typedef enum dfl_iv_ablation { DFL_ABLATE_ZERO = 0, DFL_ABLATE_MEAN, DFL_ABLATE_RESAMPLE } dfl_iv_ablation;

/* "resid_pre", "attn_out", "mlp_out", "head". */
const char *dfl_iv_site_name(dfl_iv_site s);

/* One intervention. Fields unused by a kind are ignored. */
typedef struct dfl_intervention {
    dfl_iv_kind kind;
    int64_t layer0, layer1; /* the layers [layer0, layer1] it applies in */
    int64_t head;           /* analysis head, -1 = every head (ablate, lambda, map, patch at head) */
    dfl_iv_site site;       /* patch */
    dfl_iv_ablation ablation;
    int lambda_scale; /* lambda: 1 = λ·value, 0 = λ := value */
    double value;
    int map;                    /* map: 1 or 2 */
    const uint8_t *rows, *keys; /* knockout: [T] non-zero = in the span (the diagonal is never cut) */
    const uint8_t *pos;         /* patch, ablate: [T] positions replaced, NULL = every position */
    /* patch and resample: the source run's values [L, src_T, width] (width D, or att_ld at
     * site head); mean ablation: [L, att_ld]. Positions ≥ src_T are left alone. */
    const float *src;
    int64_t src_T;
} dfl_intervention;

/* What a pass applies and records (dfl_forward_opts.iv). */
typedef struct dfl_iv_list {
    const dfl_intervention *items;
    size_t n;
    /* Non-NULL: this pass's values at the site, after its interventions, into
     * record[site][L, T, width] (caller-owned; width D, or att_ld at site head). */
    float *record[DFL_SITES];
    /* > 0: skip layers before start_layer, whose output start_x[T, D] (the resid_pre of
     * layer start_layer) an earlier pass recorded; valid when the interventions act only
     * from that layer on. */
    int64_t start_layer;
    const float *start_x;
    /* The LM head (and logits_rows) runs only for rows ≥ logits_row0. */
    int64_t logits_row0;
    /* > 0: compute only rows [row0, T): the keys and values of rows < row0 in every layer
     * run come from kcache[L, T, k_ld] and vcache[L, T, v_ld] (an earlier pass's
     * record_k / record_v over the same tokens), start_x is then needed (rows ≥ row0) and
     * the interventions must act only on rows ≥ row0. The capture callbacks see rows
     * [row0, T) only. Not with logit quantization by tensor or head. */
    int64_t row0;
    const float *kcache, *vcache;
    /* Non-NULL: this pass's keys and values as attention reads them (after RoPE and
     * q/k norms) into record_k[L, T, k_ld], record_v[L, T, v_ld]. */
    float *record_k, *record_v;
} dfl_iv_list;

/* A list with nothing in it. */
dfl_iv_list dfl_iv_list_default(void);

/* ------------------------------------------------ hooks of forward.c */

/* The layer the pass starts at (0 without a list), x[T, D] set from start_x. */
int64_t dfl__iv_begin(const dfl_iv_list *iv, float *x, int64_t T, int64_t D);
/* Patch and record site values v[T, width] of layer l (site resid_pre, attn_out, mlp_out);
 * in a pass from row0, v's row 0 is row row0 and T counts the rows from there. */
void dfl__iv_site(const dfl_iv_list *iv, dfl_iv_site site, int64_t l, int64_t L, float *v, int64_t T, int64_t width);
/* Ablate, patch and record the heads' outputs att[T, ld] of layer l (plan[heads]). */
void dfl__iv_heads(const dfl_iv_list *iv, int64_t l, int64_t L, float *att, int64_t T, int64_t ld,
                   const dfl__head_plan *plan, int64_t heads);
/* λ (or σ(λ)) of head h in layer l after the overrides. Thread-safe (reads only). */
float dfl__iv_lambda(const dfl_iv_list *iv, int64_t l, int64_t h, float lam);
/* The map head h of layer l uses: 0 = the difference (default), 1 or 2. */
int dfl__iv_map(const dfl_iv_list *iv, int64_t l, int64_t h);
/* Knock out keys of score rows s[n, ld] (queries row0.., visible keys [lo[i], lim[i]]):
 * −∞ before the softmax. Thread-safe. */
void dfl__iv_knockout(const dfl_iv_list *iv, int64_t l, float *s, int64_t row0, int64_t n, int64_t ld,
                      const int64_t *lo, const int64_t *lim);
/* First row the LM head runs for. */
int64_t dfl__iv_logits_row0(const dfl_iv_list *iv);
/* The first row computed (0 without a list). */
int64_t dfl__iv_row0(const dfl_iv_list *iv);
/* At the start of layer l's attention over k[T, k_ld], v[T, v_ld] (all rows): rows below
 * row0 from the caches, then the record. */
void dfl__iv_kv(const dfl_iv_list *iv, int64_t l, float *k, float *v, int64_t T, int64_t k_ld, int64_t v_ld);

#endif
