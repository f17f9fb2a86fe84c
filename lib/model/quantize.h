/* quantize.h — fake quantization of weights, linear-layer inputs and the KV cache, and
 * QuaRot-style Hadamard rotations (probe --quantize SPEC, docs/probe.md "Quantization").
 *
 * Fake quantization replaces each value by the nearest point of a uniform grid and keeps
 * the result in f32: the model then computes with exactly the values a low-bit kernel
 * would see. One quantizer serves every kind, over one group of n values at a time:
 *
 *   symmetric,  b bits:  qmax = 2^(b−1) − 1,  s = clip·max|x| / qmax,
 *                        x → s·clamp(round(x/s), −qmax, qmax)
 *   asymmetric, b bits:  lo = clip·min(min x, 0),  hi = clip·max(max x, 0),
 *                        s = (hi − lo) / (2^b − 1),  z = round(−lo/s),
 *                        x → s·(clamp(round(x/s) + z, 0, 2^b − 1) − z)
 *
 * round(x/s) is the integer nearest to x/s in exact arithmetic (not x/s rounded first),
 * a tie going to the even integer (torch.round, numpy.round); z = round(−lo/s) likewise in
 * double. s is a double from the formulas above, the result s·(q − z) rounded once to f32.
 * A group whose s is 0 (all zeros) is unchanged. Values are assumed finite.
 *
 * Weights are quantized once, at load (dfl_quant_model): each matrix is replaced by an
 * f32 copy the model owns (4 bytes per weight, whatever the checkpoint stored). The
 * rotation (QuaRot, computational invariance) is folded into those copies first: RMSNorm
 * gains into the following weights, the residual stream rotated by an orthogonal
 * Hadamard Q (embeddings E·Q, input weights W·Q, output weights Qᵀ·W, the LM head W·Q),
 * and down_proj's input rotated online by H_F (W_down·H_F offline). Hadamard sizes are
 * 2^k or m·2^k with m − 1 a prime ≡ 3 (mod 4) (Paley's construction of H_m, Kronecker
 * with Sylvester's H_{2^k}); other sizes are refused by name.
 */
#ifndef DFL_QUANTIZE_H
#define DFL_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "model/model.h"

/* One quantizer: bits 0 = off (else 2..8), asymmetric or symmetric, clip ratio in (0, 1]. */
typedef struct dfl_quantizer {
    int bits;
    int asym;
    double clip;
} dfl_quantizer;

/* What --quantize asks for (dfl_qspec_parse); every part off by default. */
typedef struct dfl_qspec {
    dfl_quantizer w;    /* weights of every linear layer of the blocks */
    int64_t w_group;    /* 0 = per output channel, else groups of this many input columns */
    int w_head;         /* also the LM head */
    int w_embed;        /* also the token (and position) embeddings */
    dfl_quantizer a;    /* inputs of every linear layer of the blocks */
    int a_tensor;       /* 1 = one scale per tensor, 0 = per token */
    dfl_quantizer k, v; /* the KV cache: K per token and key head, V per token and KV head */
    int k_hadamard;     /* rotate each head of q and k by H_head_dim after RoPE first */
    int rotate;         /* the residual stream and down_proj's input (QuaRot) */
    char text[256];     /* the canonical SPEC (dfl_qspec_canonical), "" when nothing is on */
} dfl_qspec;

/* Everything off. */
dfl_qspec dfl_qspec_default(void);

/* Add the items of one SPEC (ITEM[,ITEM...], grammar in docs/probe.md) to *q; called
 * once per --quantize. DFL_ERR_USAGE naming the item for a syntax error, a value out of
 * range or a kind given twice. Refreshes q->text. */
dfl_status dfl_qspec_parse(const char *spec, dfl_qspec *q, dfl_error *err);

/* 1 when some part of q is on. */
int dfl_qspec_any(const dfl_qspec *q);

/* Fake-quantize each of the n groups of x: group g holds the d values
 * x[g·gstride + i·stride], i < d. Serial; the caller parallelises. */
void dfl_quant_groups(float *x, int64_t n, int64_t d, int64_t gstride, int64_t stride, const dfl_quantizer *qz);
/* Serial reference twin: one group, by enumerating the grid (nearest point, ties to the
 * even integer). */
void dfl_quant_group_naive(float *x, int64_t d, int64_t stride, const dfl_quantizer *qz);

/* Hadamard sizes: 1 when n = m·2^k is supported (see above), with *m the odd-part factor
 * used (1 for a power of two). */
int dfl_hadamard_ok(int64_t n, int64_t *m);
/* x[rows, n] → x·H_n/√n per row, in place: H_n = H_m ⊗ H_{n/m}, Paley's H_m (m > 1)
 * and Sylvester's H_{n/m} in natural order (symmetric), H_n·H_nᵀ = n·I. Nothing happens
 * when n fails dfl_hadamard_ok. Runs in parallel over rows outside a parallel region. */
void dfl_hadamard_rows(float *x, int64_t rows, int64_t n);

/* Apply q's load-time part to m (rotation, then weight quantization), replacing the
 * matrices by f32 copies m owns, and check its run-time part against m. Model types whose
 * blocks break the rotation's invariance are refused by name (DFL_ERR_USAGE), as are
 * sizes without a Hadamard and group sizes that do not divide an input width;
 * DFL_ERR_NOMEM. q NULL or nothing to do: DFL_OK. The forward passes over m must then get
 * the same q (dfl_forward_opts.quant) and release_layers −1 (the copies are not file
 * pages to hand back). */
dfl_status dfl_quant_model(dfl_model *m, const dfl_qspec *q, dfl_error *err);

/* Where a linear layer's input is taken (forward.c's hooks). */
typedef enum dfl_quant_site {
    DFL_QSITE_ATTN_IN = 0, /* q, k, v (and λ) projections' input */
    DFL_QSITE_O_IN,        /* o_proj's input */
    DFL_QSITE_MLP_IN,      /* gate/up (up for GELU MLPs) input */
    DFL_QSITE_DOWN_IN      /* down_proj's input: online Hadamard first when rotating */
} dfl_quant_site;

/* The forward pass's hook on the input x[n, d] of the linear layers at `site`: returns x
 * itself when there is nothing to do, else buf (which may be x) holding the rotated and/or
 * fake-quantized copy. q NULL = nothing. */
const float *dfl_quant_input(const dfl_qspec *q, dfl_quant_site site, const float *x, float *buf, int64_t n, int64_t d);

/* The forward pass's hook after RoPE: rotate each of the nqh heads of q[T, q_ld] and nkh
 * heads of k[T, k_ld] (width hd) by H_hd when k_hadamard, then fake-quantize k per token
 * and head of hd values and v[T, v_ld] per token and group of vd values. q NULL = nothing. */
void dfl_quant_kv(const dfl_qspec *q, float *qm, int64_t q_ld, int64_t nqh, float *k, int64_t k_ld, int64_t nkh,
                  int64_t hd, float *v, int64_t v_ld, int64_t vd, int64_t T);

#endif
