/* noise.h — attention to the answer versus attention noise (the paper's Figure 1 and
 * Table 3) from the segment shares that probe stores in every dump.
 *
 * Reads, per sample, noise/shares or noise/shares_abs [M, L, H, 7] (segments bos,
 * context_before, answer, context_after, query, distractor, target), noise/raw for
 * the row totals, the `depth` attribute, target_correct and target_nll, and averages
 * the shares of one map over the selected layers and heads (every (layer, head) pair
 * weighs the same), the analysis rows (already averaged in the dump) and the samples.
 * "Noise" is context_before + context_after (the paper's definition: attention to the
 * context that is not the answer); signal-to-noise is mean answer / mean noise.
 *
 * With a --stat other than shares, the tables hold instead the other per-head statistics
 * probe writes (noise/entropy, noise/negative_mass: dump/dump_schema.h), averaged the
 * same way; the default output reads and shows neither.
 *
 * Groupings: all samples; per depth (samples with equal `depth`); per layer (averaged
 * over the selected heads and all samples); per head. Results come as a report
 * (report.h, printed as table, csv, json or markdown) and as two charts (plot.h): the
 * Figure-1 grouped bars and answer / noise against depth. Callable in-process;
 * tools/noise/main.c only parses flags and prints.
 */
#ifndef DFL_NOISE_H
#define DFL_NOISE_H

#include <stddef.h>
#include <stdint.h>

#include "base/report.h"
#include "analysis/stats.h"
#include "base/status.h"
#include "render/plot.h"

typedef enum dfl_noise_map {
    DFL_NOISE_MAP_AUTO = 0, /* diff for Diff dumps (M = 3), map1 (the softmax map) otherwise */
    DFL_NOISE_MAP_MAP1,
    DFL_NOISE_MAP_MAP2,
    DFL_NOISE_MAP_DIFF
} dfl_noise_map;

typedef enum dfl_noise_norm {
    DFL_NOISE_NORM_TOTAL = 0, /* noise/shares: Σ A / the row's total (1, or 1 − λ for diff) */
    DFL_NOISE_NORM_ABS        /* noise/shares_abs: Σ abs(A) / Σ abs(A), always in [0, 1] */
} dfl_noise_norm;

typedef enum dfl_noise_by {
    DFL_NOISE_BY_NONE = 0, /* one column of shares per dump (Figure 1) */
    DFL_NOISE_BY_DEPTH,    /* answer and noise per depth (Table 3) */
    DFL_NOISE_BY_LAYER,
    DFL_NOISE_BY_HEAD
} dfl_noise_by;

typedef enum dfl_noise_stat {
    DFL_NOISE_STAT_SHARES = 0,   /* the segment shares: the Figure-1 and Table-3 tables (default) */
    DFL_NOISE_STAT_ENTROPY,      /* noise/entropy: mean row entropy (nats) of each softmax map */
    DFL_NOISE_STAT_NEGATIVE_MASS /* noise/negative_mass: Diff only, the summed negative entries of the diff map */
} dfl_noise_stat;

/* "auto", "map1", "map2", "diff" / "total", "abs" / "none", "depth", "layer", "head";
 * the parsers give DFL_ERR_USAGE listing the names. */
const char *dfl_noise_map_name(dfl_noise_map m);
dfl_status dfl_noise_map_parse(const char *text, dfl_noise_map *out, dfl_error *err);
const char *dfl_noise_norm_name(dfl_noise_norm n);
dfl_status dfl_noise_norm_parse(const char *text, dfl_noise_norm *out, dfl_error *err);
const char *dfl_noise_by_name(dfl_noise_by b);
dfl_status dfl_noise_by_parse(const char *text, dfl_noise_by *out, dfl_error *err);
/* "shares", "entropy", "negative_mass". */
const char *dfl_noise_stat_name(dfl_noise_stat s);
dfl_status dfl_noise_stat_parse(const char *text, dfl_noise_stat *out, dfl_error *err);

/* Parse a list of depths "0,0.25,0.5" (each in [0, 1]) into a malloc'ed array in the
 * order given (caller frees). DFL_ERR_USAGE, DFL_ERR_NOMEM. */
dfl_status dfl_noise_parse_depths(const char *flag, const char *text, double **out, size_t *n, dfl_error *err);

#define DFL_NOISE_MAX_DUMPS 16

typedef struct dfl_noise_params {
    const char *const *dumps; /* [n_dumps] paths; required, 1..DFL_NOISE_MAX_DUMPS */
    size_t n_dumps;
    const char *const *labels; /* [n_dumps] names, or NULL: file names without ".h5"
                                  (the paths as given when two names clash) */
    dfl_noise_map map;         /* default auto */
    dfl_noise_norm norm;       /* default total */
    dfl_noise_by by;           /* default none */
    const int64_t *layers;     /* [n_layers] to average over, NULL = all */
    size_t n_layers;
    const int64_t *heads; /* [n_heads], NULL = all */
    size_t n_heads;
    double warn_total;   /* warn on (sample, layer, head) with abs(row total) below
                            this (default 0.05); the total is Σ noise/raw */
    dfl_noise_stat stat; /* what the tables show (default shares) */
} dfl_noise_params;

dfl_noise_params dfl_noise_params_default(void);

/* Averages of one group. */
typedef struct dfl_noise_cell {
    size_t n_samples;                 /* samples in the group (0: empty) */
    double share[DFL_SHARE_SEGMENTS]; /* mean shares, DFL_SHARE_* order */
    double noise;                     /* context_before + context_after */
    double ratio;                     /* answer / noise (inf when noise is 0, NaN when both are) */
    size_t n_scored, n_correct;       /* samples with target_correct, and how many are 1 */
    double accuracy;                  /* n_correct / n_scored, NaN when none is scored */
    double target_nll;                /* mean target_nll over the scored samples, NaN when none */
} dfl_noise_cell;

/* One dump's --stat values (entropy, negative mass): means over the selected layers and
 * heads, the analysis rows (already averaged in the dump) and the samples, per map. */
typedef struct dfl_noise_values {
    int n_maps;       /* maps with values: 1 or 2 (map1, map2) for entropy, 1 (diff) for the
                         negative mass; 0 when the dump has none (the negative mass of a
                         softmax dump) or --stat is shares */
    double all[2];    /* [n_maps] */
    double *by_layer; /* [layers, 2]: NaN for unselected layers */
    double *by_head;  /* [heads, 2] */
    double *by_depth; /* [n_depths, 2]: the groups of depth[] */
} dfl_noise_values;

/* What one dump gave. */
typedef struct dfl_noise_dump {
    char *path, *label, *model_type; /* owned */
    const char *map;                 /* "map1", "map2" or "diff" (static) */
    int64_t layers, heads;           /* L and H of the dump */
    size_t n_samples;
    int segment_present[DFL_SHARE_SEGMENTS]; /* some sample has keys of the segment */
    dfl_noise_cell all;
    size_t n_depths;          /* distinct depths, ascending */
    double *depth;            /* [n_depths] */
    dfl_noise_cell *by_depth; /* [n_depths] */
    size_t n_no_depth;        /* samples without a depth (left out of by_depth) */
    dfl_noise_cell *by_layer; /* [layers]: n_samples 0 for unselected layers */
    dfl_noise_cell *by_head;  /* [heads] */
    size_t n_entries;         /* (sample, layer, head) entries averaged */
    size_t n_low;             /* entries with abs(row total) < warn_total */
    size_t n_nonfinite;       /* entries whose row total is NaN or Inf (NaN under every norm) */
    double min_abs_total;     /* smallest abs(row total) seen */
    char low_example[160];    /* the first low entry: "sample 'd0-s1' layer 1 head 0 (total 0.012)" */
    dfl_noise_values stat;    /* --stat entropy or negative_mass */
} dfl_noise_dump;

typedef struct dfl_noise_result {
    dfl_noise_dump *dumps; /* [n_dumps] */
    size_t n_dumps;
    dfl_noise_norm norm;
    dfl_noise_stat stat;
    double warn_total;
    size_t n_layers_sel, n_heads_sel;       /* selection sizes (0 = all) */
    char layers_text[128], heads_text[128]; /* "all" or the lists as given, for the report */
} dfl_noise_result;

/* Read every dump and compute all groupings. The caller owns *out
 * (dfl_noise_result_free). Statuses: those of dfl_dump_open (DFL_ERR_IO, DFL_ERR_FORMAT
 * "not a difflens dump"); DFL_ERR_FORMAT for a dump without samples or with noise
 * datasets of the wrong shape; DFL_ERR_USAGE for a map the dump does not have (map2 or
 * diff of a softmax dump) or no dumps; DFL_ERR_RANGE for --layers / --heads outside a
 * dump; DFL_ERR_TENSOR, DFL_ERR_HDF5, DFL_ERR_NOMEM. */
dfl_status dfl_noise_analyze(const dfl_noise_params *p, dfl_noise_result **out, dfl_error *err);
void dfl_noise_result_free(dfl_noise_result *r);

/* The warnings a tool should print (one line each, no newline) into lines[cap][256];
 * returns how many: row totals below warn_total under --norm total (the shares are
 * unstable there), samples without depth under --by depth. */
size_t dfl_noise_warnings(const dfl_noise_result *r, dfl_noise_by by, char (*lines)[256], size_t cap);

/* The tables of `by` as a report (caller owns *out: dfl_report_destroy). With --stat
 * entropy or negative_mass, one table named after it: by none a row per map (map1,
 * map2; diff for the negative mass) and a samples row, a column per dump; by depth,
 * layer or head a row per group and per dump a column per map ("n/a" where a dump has
 * none; DFL_ERR_USAGE when no dump has the negative mass). With --stat shares: by none, table
 * "shares" (a row per segment, noise, answer/noise, accuracy, target NLL and samples;
 * a column per dump); by depth "by_depth", by layer "by_layer", by head "by_head" (a
 * row per group; per dump columns n, answer, noise, answer/noise [, accuracy]). Meta
 * lines say which map, normalisation, layers and heads were used and define noise.
 * DFL_ERR_FORMAT for --by depth when no dump has depths; DFL_ERR_NOMEM. */
dfl_status dfl_noise_report(const dfl_noise_result *r, dfl_noise_by by, dfl_report **out, dfl_error *err);

/* The Figure-1 grouped bar chart (a group per segment present, a bar per dump) as a
 * PNG at path. DFL_ERR_EXISTS unless overwrite, DFL_ERR_IO, DFL_ERR_NOMEM. */
dfl_status dfl_noise_plot_shares(const dfl_noise_result *r, const char *path, int overwrite, dfl_error *err);

/* Answer and noise against depth, one line per dump (two panels), as a PNG.
 * DFL_ERR_FORMAT when no dump has depths; else as above. */
dfl_status dfl_noise_plot_depth(const dfl_noise_result *r, const char *path, int overwrite, dfl_error *err);

/* The same two figures in pp's font and at pp's width (--font, --width; NULL = as above). */
dfl_status dfl_noise_plot_shares_paper(const dfl_noise_result *r, const char *path, int overwrite,
                                       const dfl_plot_paper *pp, dfl_error *err);
dfl_status dfl_noise_plot_depth_paper(const dfl_noise_result *r, const char *path, int overwrite,
                                      const dfl_plot_paper *pp, dfl_error *err);

/* ---- shared by noise.c (compute) and noise_report.c (tables, charts) ---- */

/* Depths closer than this are one group: prompts written by difflens carry depths
 * exactly, hand-written ones may differ in the last digits. */
#define DFL_NOISE_DEPTH_EPS 1e-9
/* snprintf that may cut (long paths in messages and labels). */
void dfl__noise_put(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* qsort comparison of doubles, ascending. */
int dfl__noise_cmp_double(const void *a, const void *b);

#endif
