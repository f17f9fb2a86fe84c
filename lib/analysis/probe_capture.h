/* probe_capture.h — internal to probe (probe.c, probe_capture.c): the state of one
 * sample's run, filled by the forward pass's capture callbacks (probe_capture.c) and
 * written to the dump by probe.c. */
#ifndef DFL_PROBE_CAPTURE_H
#define DFL_PROBE_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/probe.h"
#include "analysis/stats.h"
#include "dump/dump.h"
#include "model/forward.h"

/* Attention maps are stored in tiles of 32 query rows x 512 keys (32 KB as f16). */
#define MAP_TILE_ROWS 32
#define MAP_TILE_KEYS 512

/* Accumulators of one layer's attention logits (one per thread) or hidden states. */
typedef struct dfl__logit_acc {
    dfl_topk top;
    dfl_hist sub[4]; /* sub-histograms, merged at the layer's end */
    dfl_moments mom;
} logit_acc;

/* Outlier statistics of one kind (logits or hidden) for all layers. */
typedef struct dfl__outlier_out {
    float *top;         /* [L, K] descending, NaN-padded */
    int32_t *top_index; /* [L, K, nidx], -1-padded */
    uint64_t *hist;     /* [L, B] */
    double *mom;        /* [L, 6] */
    int nidx;
} outlier_out;

/* Everything captured for one sample while its forward pass runs. */
typedef struct dfl__probe_sample {
    const dfl_probe_params *p;
    const dfl_model *m;
    const dfl_prompt *pr;
    int64_t T, L, Hs, D, K;
    int M; /* maps in the noise stats: 1 (softmax) or 3 (map1, map2, diff) */
    int nthreads;
    uint8_t *seg, *share_seg; /* [T] */
    int64_t *arows;           /* [T] analysis rows, n_arows used */
    size_t n_arows;
    /* map selection, resolved: positions in the dump's layer/head/row axes, -1 = not stored */
    int64_t *layer_pos, *head_pos; /* [L], [Hs] */
    const int64_t *rows;           /* [R] stored rows, ascending */
    int64_t *all_rows;             /* [T] 0..T-1 when every row is stored */
    int64_t R;
    dfl_dump_stream *maps[3]; /* map1, map2, diff: [Ls, Hs', R, T] (map2 of Motif GDA: [Ls, Gs, R, T]) */
    int64_t job_base[4];      /* the attention's deflate jobs: maps[i]'s are [job_base[i], job_base[i+1]) */
    int64_t *noise_pos;       /* [Hs] position on map2's head axis that head h writes: head_pos[h], or
                               * (Motif GDA) its noise group's, −1 when an earlier head writes it */
    /* noise sums over analysis rows */
    double *shares, *raw, *shares_abs; /* [M, L, Hs, 7] */
    double *entropy;                   /* [M', L, Hs] */
    double *negative;                  /* [L, Hs] */
    /* outliers */
    logit_acc *tacc;       /* [threads] attention logits, per thread */
    logit_acc *hacc;       /* hidden states (serial) */
    dfl_topk_item *tstore; /* [threads + 1, K] heaps of tacc and hacc */
    dfl_topk_item *sorted; /* [threads + 1, K]: sorted output in [0, K), merge heap at [threads·K, …) */
    outlier_out logits, hidden;
    float *ch_absmax;   /* [L, D] */
    uint32_t *ch_count; /* [L, D] */
    /* next-token predictions */
    dfl_dump_stream *logit_stream; /* [T, V] or NULL */
    dfl_dump_stream *hid_stream;   /* [L, T, D] or NULL (--save-hidden) */
    struct dfl__qstats *qstats;    /* --quant-stats sums, or NULL */
    float *lambda;                 /* [L, T, Hs] DIFF V2's σ(λ) (an unused byte for the other types) */
    float *nll;                    /* [T] */
    int32_t *argmax;               /* [T] */
    /* non-finite values: the first one's layer (L = the LM head) and site, -1 / NULL if none */
    uint8_t *bad_scores; /* [threads] a non-finite attention logit in this layer */
    int64_t bad_layer;
    const char *bad_site;
    struct dfl__lens *lens; /* the readouts (probe_lens.h), NULL when none is asked */
    /* progress */
    size_t index;          /* file-order index: the dump's sample name */
    size_t ordinal, count; /* position in this run, samples in this run */
    int64_t tokens_done, tokens_total;
    double start;
    /* generation (probe_generate.c): the run's context and this sample's state, NULL
     * when not generating; the maps' key axis (T, or T plus the generated rows) */
    const struct dfl__gen_ctx *gen_ctx;
    struct dfl__gen_sample *gen;
    int64_t keys;
} sample_run;

/* The callbacks that fill r while dfl_forward runs (r->p, m, pr, sizes and buffers set). */
dfl_capture dfl__probe_capture(sample_run *r);

#endif
