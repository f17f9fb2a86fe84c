/* outliers.h — activation-outlier statistics for quantization work, from the outlier
 * statistics probe stores in a dump (docs/format.md, samples/NNNNNN/outliers/...):
 *
 *   pooled     the paper's Table 5: Top-1 ... Top-100 and the median of abs(x) over all
 *              layers and samples, for attention logits and hidden states. Top-n merges
 *              the per-(sample, layer) top-K lists and is exact for n <= K (each of the n
 *              largest values overall is among its own list's K largest); the median sums
 *              the histograms and is within 1% (the histogram's bin rule).
 *   per layer  top-1/2/3, median, max/median, Pearson kurtosis (from the moments) and a
 *              count of massive activations (abs(x) > massive_abs and >= massive_ratio x
 *              the layer median) among the stored top lists.
 *   per head   (logits only) what the stored top lists say per head: how many of the
 *              layer's K largest logits each head holds, and its top values *among
 *              those*. A head's j-th stored value is exact when it is >= every sample's
 *              list cut-off (its K-th value); otherwise it is only a lower bound.
 *   quantize   hidden states: LLM.int8() systematic outlier features (channels with
 *              abs(x) >= alpha, the probe's --alpha, in >= tokens_frac of the tokens of
 *              >= layers_frac of the layers) and the SmoothQuant per-channel max
 *              profile; attention logits: SQNR of symmetric absmax fake quantization at
 *              the given bit widths per tensor (one layer of one sample, as probe's
 *              --quantize-logits B:tensor), estimated from the histogram (below).
 *
 * The SQNR estimate. For a tensor with max abs M and b bits, Δ = M / (2^(b−1) − 1) and
 * each value x has error e = x − Δ·round(x/Δ) (round half away from zero), so e depends
 * on abs(x) only. The K stored largest values contribute their exact e². Every other
 * value is assumed uniformly spread inside its histogram bin [a, a') (a' capped at M),
 * and contributes the mean of e(u)² over the bin, integrated in closed form (for bins
 * wider than Δ this is Δ²/12; for narrow bins it follows the sawtooth). The rigorous
 * bounds use the smallest and largest e² each bin allows instead (0 when the bin holds
 * a multiple of Δ, Δ²/4 when it holds a rounding boundary), so they always contain the
 * truth; the typical error is one standard deviation of the estimate when the values'
 * positions inside their bins are independent and uniform (sqrt(Σ_bins c·Var_bin(e²))).
 * SQNR = 10·log10(Σx² / Σe²) over the tensor; over several tensors (samples, layers)
 * both sums are added.
 *
 * Callable in-process: dfl_outliers_run builds a report (report.h) and, when asked,
 * a PNG; tools/outliers/main.c only parses flags and prints the report.
 */
#ifndef DFL_OUTLIERS_H
#define DFL_OUTLIERS_H

#include <stddef.h>
#include <stdint.h>

#include "base/report.h"
#include "analysis/stats.h"
#include "base/status.h"
#include "render/plot.h"

#define DFL_OUTLIERS_MAX_DUMPS 16
#define DFL_OUTLIERS_MAX_RANKS 16
#define DFL_OUTLIERS_MAX_BITS  8

/* ------------------------------------------------------------- statistics */

/* Pearson kurtosis m4 / m2² (3 for a normal distribution) of the signed values from
 * raw moments m = {count, Σx, Σx², Σx³, Σx⁴, ...}; NaN when count < 2 or the variance
 * is 0. Central moments from raw ones: m2 = S2/n − μ², m4 = S4/n − 4μS3/n + 6μ²S2/n − 3μ⁴. */
double dfl_outliers_kurtosis(const double *m);

/* The quantization error of one value for step delta: (a − Δ·round(a/Δ))², round half
 * away from zero. */
double dfl_outliers_qerr2(double a, double delta);

/* Sums over one or more tensors (add them up with dfl_outliers_sqnr_add). */
typedef struct dfl_sqnr_acc {
    double signal;             /* Σx² */
    double noise;              /* estimated Σe² */
    double noise_lo, noise_hi; /* rigorous bounds on Σe² given the histogram */
    double noise_var;          /* variance of the estimate (uniform-in-bin model) */
} dfl_sqnr_acc;

/* Add one tensor: its histogram hist[DFL_HIST_BINS] of abs(x), its stored top values
 * top[k] (abs, descending; NaN entries are skipped), raw moments m[6] (Σx² = m[2],
 * max abs = m[5]) and bits (2..16). A tensor whose max is 0 has no error. */
void dfl_outliers_sqnr_add(dfl_sqnr_acc *acc, const uint64_t *hist, const float *top, int64_t k, const double *m,
                           int bits);

/* SQNR in dB of acc: estimate, bounds (lo from noise_hi, hi from noise_lo; +inf when
 * the noise bound is 0) and the typical (1σ) error of the estimate in dB. */
typedef struct dfl_sqnr {
    double db, lo_db, hi_db, typ_err_db;
} dfl_sqnr;
dfl_sqnr dfl_outliers_sqnr(const dfl_sqnr_acc *acc);

/* ------------------------------------------------------------- one dump */

enum { DFL_OUT_LOGITS = 0, DFL_OUT_HIDDEN = 1 };

/* What one dump's outlier statistics pool to. All arrays are owned by the struct. */
typedef struct dfl_outlier_kind {
    uint64_t *hist;             /* [L][DFL_HIST_BINS] summed over samples */
    double *moments;            /* [L][6] summed (max abs: max) over samples */
    float *layer_top;           /* [L][K] the K largest over samples, descending, NaN-padded */
    dfl_topk_item *layer_top1;  /* [L] position of the largest (idx as stored; idx[3] for hidden = sample) */
    int32_t *layer_top1_sample; /* [L] */
    float *sample_top;          /* [S][L][K] every stored list (for massive-activation counts) */
    uint64_t *massive;          /* [L] massive activations among the stored lists (after _finish) */
    int *massive_saturated;     /* [L] 1 when some sample's whole list was massive (count is a lower bound) */
} dfl_outlier_kind;

typedef struct dfl_outlier_dump {
    char *path;
    char *model_type;
    int64_t L, K, H, D, S;    /* layers, top-K, heads, hidden size, samples */
    int64_t tokens;           /* Σ tokens over samples */
    double alpha;             /* channel_count threshold of the probe */
    dfl_outlier_kind kind[2]; /* DFL_OUT_LOGITS, DFL_OUT_HIDDEN */
    /* per head (logits): [L][H] */
    uint64_t *head_stored; /* entries of the layers' top lists held by each head */
    float *head_top;       /* [L][H][3] the head's 3 largest stored values, NaN-padded */
    float *layer_cutoff;   /* [L] max over samples of a full list's K-th value (0: no list full) */
    /* hidden channels: [L][D] */
    uint64_t *channel_count; /* summed counts of abs(x) >= alpha */
    float *channel_absmax;   /* max over samples */
    /* SQNR of the logits per layer and bit width: [L][nbits] */
    int nbits;
    int bits[DFL_OUTLIERS_MAX_BITS];
    dfl_sqnr_acc *sqnr;
} dfl_outlier_dump;

/* Read every sample's outlier statistics from the dump at path and pool them, with
 * SQNR accumulators for bits[nbits] (each 2..16). Errors name the dump and path:
 * DFL_ERR_IO / DFL_ERR_FORMAT from dfl_dump_open ("not a difflens dump");
 * DFL_ERR_FORMAT "no outlier statistics" (no topk attribute or outliers/ datasets),
 * "has no samples", a histogram of another bin rule; DFL_ERR_TENSOR for shapes that
 * disagree with the root attributes (e.g. a top list of K' != topk: "mismatched K");
 * DFL_ERR_USAGE for bad bits; DFL_ERR_NOMEM. Caller owns *out: dfl_outliers_free.
 * Costs about what reading the datasets does: samples are read through their open
 * groups (outliers_read.h), each tensor's SQNR bins are prepared once for all widths. */
dfl_status dfl_outliers_load(const char *path, const int *bits, int nbits, dfl_outlier_dump **out, dfl_error *err);
void dfl_outliers_free(dfl_outlier_dump *d);

/* 1 when layer l (l < 0: any layer) of `kind` held a NaN or Inf in some sample; its
 * median and top-n are then NaN. */
int dfl_outliers_layer_nonfinite(const dfl_outlier_dump *d, int kind, int64_t l);

/* Median (histogram rule) of layer l of a kind, or over all layers when l < 0. */
double dfl_outliers_median(const dfl_outlier_dump *d, int kind, int64_t l);

/* The n-th largest abs(x) (1-based) of layer l, or over all layers and samples when
 * l < 0; NaN when n > K or fewer than n values exist. Exact. */
double dfl_outliers_top(const dfl_outlier_dump *d, int kind, int64_t l, int64_t n);

/* Count massive activations per layer (needs the medians; called by _load). */
void dfl_outliers_count_massive(dfl_outlier_dump *d, double massive_abs, double massive_ratio);

/* ------------------------------------------------------------------ the tool */

typedef struct dfl_outliers_params {
    const char *dumps[DFL_OUTLIERS_MAX_DUMPS]; /* required: at least one */
    int n_dumps;
    const char *labels[DFL_OUTLIERS_MAX_DUMPS]; /* NULL = model_type (numbered when repeated) */
    int64_t ranks[DFL_OUTLIERS_MAX_RANKS];      /* Table 5 columns (default 1, 2, 3, 10, 100) */
    int n_ranks;
    int per_layer;                   /* per-layer table (default 0) */
    int per_head;                    /* per-head table of logits (default 0) */
    int quant;                       /* LLM.int8 features, SmoothQuant profile, SQNR tables (default 0) */
    int channels;                    /* the full per-channel max profile as a long table (default 0) */
    int bits[DFL_OUTLIERS_MAX_BITS]; /* SQNR bit widths (default 8, 6, 4) */
    int nbits;
    double int8_layers;    /* LLM.int8 feature: share of layers (default 0.25) */
    double int8_tokens;    /* ... and share of tokens in each such layer (default 0.06) */
    double massive_abs;    /* massive activation: abs(x) > this (default 100) */
    double massive_ratio;  /* ... and >= this x the layer median (default 1000) */
    const char *plot_path; /* PNG of per-layer top-1 and median (log y), or NULL */
    int overwrite;         /* replace an existing plot */
    dfl_plot_paper paper;  /* the plot's font and width (--font, --width; default zeroed:
                            * DejaVu Sans, 12 in) */
} dfl_outliers_params;

dfl_outliers_params dfl_outliers_params_default(void);

/* Parse "1,2,3,10,100" (ranks, each 1..DFL_TOPK_MAX) or "8,6,4" (bits, 2..16) into
 * out[cap]; DFL_ERR_USAGE naming the flag. */
dfl_status dfl_outliers_parse_list(const char *flag, const char *text, int64_t lo, int64_t hi, int64_t *out, int cap,
                                   int *n, dfl_error *err);

/* Load every dump, build the report (tables "table5", and as asked "per_layer",
 * "per_head", "int8_features", "smoothquant", "sqnr", "channels"), write the plot.
 * The caller owns *out (dfl_report_destroy). Statuses of dfl_outliers_load,
 * dfl_plot_line_write (DFL_ERR_EXISTS, DFL_ERR_IO), DFL_ERR_USAGE for bad parameters. */
dfl_status dfl_outliers_run(const dfl_outliers_params *p, dfl_report **out, dfl_error *err);

#endif
