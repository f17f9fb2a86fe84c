/* dump_schema.h — every dataset and attribute of the dump (docs/format.md "Dump",
 * format_version 1), named once.
 *
 * Two forms of the same names:
 *   - a macro per name (DFL_DS_* dataset paths, DFL_ATTR_* attribute names), string
 *     literals that writers and readers pass to dump.h / dump_read.h and that paste
 *     into longer literals ("%s/" DFL_DS_NOISE_RAW);
 *   - dfl_dump_schema[], a table of every entry: where it is, its dtype, its symbolic
 *     dimensions, for which model types, and whether every dump has it.
 * Dataset paths are relative to a sample group (/samples/NNNNNN/) unless they start
 * with '/'. tests/test_dump_schema.py checks this header against docs/format.md's
 * tables and against real dumps of every model type, so a name added here and not
 * there (or written by probe and not named here) fails a test.
 *
 * Adding a dataset: its macro and its table row here, its row in docs/format.md's
 * Datasets table, the write in lib/analysis/probe.c (what it sums, in probe_capture.c,
 * with its buffer in probe.c's buffer table), and the reader that shows it through the
 * macro; tests/test_dump_schema.py then checks it in every real dump without an edit.
 *
 * Dimension symbols: L layers, H heads as analysed (num_heads), T tokens, V vocabulary,
 * D hidden size, K topk, B histogram bins (3074), M maps in the noise statistics (1, or
 * 3 for Diff: map1, map2, diff), M' softmax maps (1, or 2 for Diff), 7 share segments,
 * Ls / Hs / R the layers, heads and query rows of stored maps, Gs map2's heads (Hs, or the
 * stored noise groups of a Motif GDA dump: attn/noise_groups), R' analysis rows.
 */
#ifndef DFL_DUMP_SCHEMA_H
#define DFL_DUMP_SCHEMA_H

#include <stddef.h>
#include <string.h>

/* ------------------------------------------------------------ groups */

#define DFL_DS_SAMPLES    "samples"
#define DFL_DS_SAMPLE_FMT "samples/%06zu" /* one group per prompt, its index in file order */

/* ------------------------------------------------- root attributes (on /) */

#define DFL_ATTR_FORMAT                  "format"
#define DFL_ATTR_FORMAT_VERSION          "format_version"
#define DFL_ATTR_MODEL_TYPE              "model_type"
#define DFL_ATTR_CONFIG                  "config"
#define DFL_ATTR_MODEL                   "model"
#define DFL_ATTR_NUM_LAYERS              "num_layers"
#define DFL_ATTR_NUM_HEADS               "num_heads"
#define DFL_ATTR_HEAD_DIM                "head_dim"
#define DFL_ATTR_LOGIT_QUANT_BITS        "logit_quant_bits"
#define DFL_ATTR_LOGIT_QUANT_GRANULARITY "logit_quant_granularity"
#define DFL_ATTR_ROWS                    "rows"
#define DFL_ATTR_TOPK                    "topk"
#define DFL_ATTR_NONFINITE_SAMPLES       "nonfinite_samples"
#define DFL_ATTR_ATTN_LOGIT_SOFTCAPPING  "attn_logit_softcapping"  /* Gemma 2 */
#define DFL_ATTR_FINAL_LOGIT_SOFTCAPPING "final_logit_softcapping" /* Gemma 2 */
#define DFL_ATTR_LOGIT_STATS_SOFTCAP     "logit_stats_softcap"     /* "before" */
/* probe --quantize (model/quantize.h): only in dumps written with it */
#define DFL_ATTR_QUANTIZE              "quantize"
#define DFL_ATTR_QUANT_WEIGHT_BITS     "quant_weight_bits"
#define DFL_ATTR_QUANT_WEIGHT_SCHEME   "quant_weight_scheme"
#define DFL_ATTR_QUANT_WEIGHT_CLIP     "quant_weight_clip"
#define DFL_ATTR_QUANT_WEIGHT_GROUP    "quant_weight_group"
#define DFL_ATTR_QUANT_WEIGHT_TENSORS  "quant_weight_tensors"
#define DFL_ATTR_QUANT_ACT_BITS        "quant_act_bits"
#define DFL_ATTR_QUANT_ACT_SCHEME      "quant_act_scheme"
#define DFL_ATTR_QUANT_ACT_CLIP        "quant_act_clip"
#define DFL_ATTR_QUANT_ACT_GRANULARITY "quant_act_granularity"
#define DFL_ATTR_QUANT_K_BITS          "quant_k_bits"
#define DFL_ATTR_QUANT_K_SCHEME        "quant_k_scheme"
#define DFL_ATTR_QUANT_K_CLIP          "quant_k_clip"
#define DFL_ATTR_QUANT_V_BITS          "quant_v_bits"
#define DFL_ATTR_QUANT_V_SCHEME        "quant_v_scheme"
#define DFL_ATTR_QUANT_V_CLIP          "quant_v_clip"
#define DFL_ATTR_QUANT_K_HADAMARD      "quant_k_hadamard"
#define DFL_ATTR_QUANT_ROTATE          "quant_rotate"
#define DFL_ATTR_INTERVENTIONS         "interventions" /* JSON: what probe applied */

/* ---------------------------------------------------------- root datasets */

#define DFL_DS_MODEL_LAMBDA      "/model/lambda"
#define DFL_DS_MODEL_LAMBDA_INIT "/model/lambda_init"
#define DFL_DS_MODEL_NOISE_GROUP "/model/noise_group" /* Motif GDA: each signal head's noise group */

/* ----------------------------------- sample group attributes (on samples/N) */

#define DFL_ATTR_ID              "id"
#define DFL_ATTR_DEPTH           "depth"
#define DFL_ATTR_NONFINITE_LAYER "nonfinite_layer"
#define DFL_ATTR_NONFINITE_SITE  "nonfinite_site"

/* ------------------------------------------ datasets of a sample group */

#define DFL_DS_TOKENS                "tokens"
#define DFL_DS_SEGMENTS              "segments"
#define DFL_DS_TOKEN_TEXT            "token_text"
#define DFL_DS_TOKEN_OFFSETS         "token_offsets"
#define DFL_DS_INPUT                 "input"
#define DFL_DS_ATTN                  "attn" /* the group of stored maps; its datasets are named below */
#define DFL_DS_ATTN_MAP1             "attn/map1"
#define DFL_DS_ATTN_MAP2             "attn/map2"
#define DFL_DS_ATTN_DIFF             "attn/diff"
#define DFL_DS_ATTN_LAYERS           "attn/layers"
#define DFL_DS_ATTN_HEADS            "attn/heads"
#define DFL_DS_ATTN_ROWS             "attn/rows"
#define DFL_DS_ATTN_KEYS             "attn/keys"
#define DFL_DS_ATTN_NOISE_GROUPS     "attn/noise_groups" /* Motif GDA: the groups on map2's head axis */
#define DFL_DS_LAMBDA                "lambda"            /* DIFF V2: σ(λ) [L, T, H] of the sample */
#define DFL_DS_LOGITS                "logits"
#define DFL_DS_HIDDEN                "hidden" /* probe --save-hidden: each layer's output [L, T, D] */
#define DFL_DS_NLL                   "nll"
#define DFL_DS_ARGMAX                "argmax"
#define DFL_DS_TARGET_CORRECT        "target_correct"
#define DFL_DS_TARGET_NLL            "target_nll"
#define DFL_DS_NOISE                 "noise" /* the group */
#define DFL_DS_NOISE_SHARES          "noise/shares"
#define DFL_DS_NOISE_RAW             "noise/raw"
#define DFL_DS_NOISE_SHARES_ABS      "noise/shares_abs"
#define DFL_DS_NOISE_ENTROPY         "noise/entropy"
#define DFL_DS_NOISE_NEGATIVE_MASS   "noise/negative_mass"
#define DFL_DS_NOISE_ROWS            "noise/rows"
#define DFL_DS_LOGITS_TOP            "outliers/logits/top"
#define DFL_DS_LOGITS_TOP_INDEX      "outliers/logits/top_index"
#define DFL_DS_LOGITS_HIST           "outliers/logits/hist"
#define DFL_DS_LOGITS_MOMENTS        "outliers/logits/moments"
#define DFL_DS_HIDDEN_TOP            "outliers/hidden/top"
#define DFL_DS_HIDDEN_TOP_INDEX      "outliers/hidden/top_index"
#define DFL_DS_HIDDEN_HIST           "outliers/hidden/hist"
#define DFL_DS_HIDDEN_MOMENTS        "outliers/hidden/moments"
#define DFL_DS_HIDDEN_CHANNEL_ABSMAX "outliers/hidden/channel_absmax"
#define DFL_DS_HIDDEN_CHANNEL_COUNT  "outliers/hidden/channel_count"
/* readouts (probe --logit-lens K, --dla) */
#define DFL_DS_LENS_LAYERS      "lens/layers" /* −1 (the embedding), 0 … L−1 */
#define DFL_DS_LENS_TOP_IDS     "lens/top_ids"
#define DFL_DS_LENS_TOP_PROB    "lens/top_prob"
#define DFL_DS_LENS_TARGET_RANK "lens/target_rank"
#define DFL_DS_LENS_TARGET_PROB "lens/target_prob"
#define DFL_DS_DLA              "dla" /* the group */
#define DFL_DS_DLA_ROWS         "dla/rows"
#define DFL_DS_DLA_TARGET       "dla/target"
#define DFL_DS_DLA_HEADS        "dla/heads"
#define DFL_DS_DLA_MLP          "dla/mlp"
#define DFL_DS_DLA_EMBED        "dla/embed"
#define DFL_DS_DLA_BIAS         "dla/bias"
#define DFL_DS_DLA_LOGIT        "dla/logit"
/* probe --quant-stats: the linear layers' inputs, and q/k after RoPE */
#define DFL_DS_LINEAR_MOMENTS  "outliers/linear/moments"
#define DFL_DS_LINEAR_ATTN_IN  "outliers/linear/attn_in"
#define DFL_DS_LINEAR_ATTN_OUT "outliers/linear/attn_out"
#define DFL_DS_LINEAR_MLP_IN   "outliers/linear/mlp_in"
#define DFL_DS_LINEAR_DOWN_IN  "outliers/linear/down_in"
#define DFL_DS_QK_Q_ABS        "outliers/qk/q_abs"
#define DFL_DS_QK_K_ABS        "outliers/qk/k_abs"
/* probe --generate (docs/probe.md "Generation"): the tokens generated after the prompt */
#define DFL_DS_GENERATED_TOKENS           "generated/tokens"
#define DFL_DS_GENERATED_TEXT             "generated/text"
#define DFL_DS_GENERATED_TOKEN_TEXT       "generated/token_text"
#define DFL_DS_GENERATED_LOGPROB          "generated/logprob"
#define DFL_DS_GENERATED_TOP_IDS          "generated/top_ids"
#define DFL_DS_GENERATED_TOP_LOGPROBS     "generated/top_logprobs"
#define DFL_DS_GENERATED_LOOKBACK         "generated/lookback"
#define DFL_DS_GENERATED_SHARES           "generated/noise/shares"
#define DFL_DS_GENERATED_SHARES_ABS       "generated/noise/shares_abs"
#define DFL_DS_GENERATED_LAMBDA           "generated/lambda"
#define DFL_DS_GENERATED_EXPECT           "generated/expect"
#define DFL_DS_GENERATED_CORRECT          "generated/correct"
#define DFL_DS_GENERATED_LOGITS_TOP       "generated/outliers/logits/top"
#define DFL_DS_GENERATED_LOGITS_TOP_INDEX "generated/outliers/logits/top_index"
#define DFL_DS_GENERATED_LOGITS_MOMENTS   "generated/outliers/logits/moments"
#define DFL_DS_GENERATED_HIDDEN_TOP       "generated/outliers/hidden/top"
#define DFL_DS_GENERATED_HIDDEN_TOP_INDEX "generated/outliers/hidden/top_index"
#define DFL_DS_GENERATED_HIDDEN_MOMENTS   "generated/outliers/hidden/moments"
/* interventions (probe --intervene, docs/probe.md "Interventions"): E = 1 + interventions */
#define DFL_DS_EFFECTS_NAMES          "effects/names"
#define DFL_DS_EFFECTS_TARGET_NLL     "effects/target_nll"
#define DFL_DS_EFFECTS_TARGET_PROB    "effects/target_prob"
#define DFL_DS_EFFECTS_TARGET_LOGIT   "effects/target_logit"
#define DFL_DS_EFFECTS_TARGET_CORRECT "effects/target_correct"
#define DFL_DS_EFFECTS_LOGIT_DIFF     "effects/logit_diff"
#define DFL_DS_EFFECTS_LOGITS         "effects/logits"
#define DFL_DS_PATCH                  "patch" /* the group of a patch sweep */
#define DFL_DS_PATCH_LAYERS           "patch/layers"
#define DFL_DS_PATCH_POSITIONS        "patch/positions"
#define DFL_DS_PATCH_HEADS            "patch/heads"
#define DFL_DS_PATCH_PATCHED          "patch/patched"
#define DFL_DS_PATCH_CLEAN            "patch/clean"
#define DFL_DS_PATCH_CORRUPTED        "patch/corrupted"
#define DFL_DS_PATCH_EFFECT           "patch/effect"

/* ------------------------------- attributes of datasets and sub-groups */

#define DFL_ATTR_SEGMENTS     "segments"  /* on noise: the 7 share segments, comma-separated */
#define DFL_ATTR_MAPS         "maps"      /* on noise: "map1" or "map1,map2,diff" */
#define DFL_ATTR_ROWS_RULE    "rows_rule" /* on noise: the analysis-row rule */
#define DFL_ATTR_COLUMNS      "columns"   /* on top_index and moments: what each column holds */
#define DFL_ATTR_EDGES        "edges"     /* on hist: f64 [B+1] lower bin edges */
#define DFL_ATTR_MIN_EXPONENT "min_exponent"
#define DFL_ATTR_MAX_EXPONENT "max_exponent"
#define DFL_ATTR_SUB_BINS     "sub_bins"
#define DFL_ATTR_BINS         "bins"  /* on hist: the binning rule in words */
#define DFL_ATTR_ALPHA        "alpha" /* on channel_count: the threshold */
/* on dla (probe --dla) */
#define DFL_ATTR_DIRECTION  "direction"  /* on dla: "target" or "logit_diff:A,B" */
#define DFL_ATTR_NORM_SCALE "norm_scale" /* on dla: the final norm's scale convention */

/* ---------------------------------------- image samples (DiffCLIP and CLIP dumps) */

#define DFL_DS_MODEL_TEXT_LAMBDA       "/model/text_lambda"      /* diffclip: the text tower's λ per layer */
#define DFL_DS_MODEL_TEXT_LAMBDA_INIT  "/model/text_lambda_init" /* diffclip */
#define DFL_DS_IMAGE_INPUT             "image/input"             /* the model's input before normalisation */
#define DFL_DS_IMAGE_SIZE              "image/size"              /* width, height of the original */
#define DFL_DS_IMAGE_GEOMETRY          "image/geometry"          /* resize and crop: attr columns */
#define DFL_DS_IMAGE_BOX               "image/box"               /* the object, pixels of the original */
#define DFL_DS_VISION_SEGMENTS         "vision/segments"         /* 1 cls, 2 object, 0 background */
#define DFL_DS_VISION_MAP1             "vision/attn/map1"
#define DFL_DS_VISION_MAP2             "vision/attn/map2"
#define DFL_DS_VISION_DIFF             "vision/attn/diff"
#define DFL_DS_VISION_ROWS             "vision/attn/rows"
#define DFL_DS_VISION_SHARES           "vision/noise/shares"
#define DFL_DS_VISION_SHARES_ABS       "vision/noise/shares_abs"
#define DFL_DS_VISION_NOISE_ROWS       "vision/noise/rows"
#define DFL_DS_VISION_HIDDEN_TOP       "vision/outliers/hidden/top"
#define DFL_DS_VISION_HIDDEN_TOP_INDEX "vision/outliers/hidden/top_index"
#define DFL_DS_VISION_TOKEN_NORM       "vision/outliers/token_norm"
#define DFL_DS_CAPTION_TOKENS          "captions/tokens"
#define DFL_DS_CAPTION_TEXT            "captions/text"
#define DFL_DS_EMBED_IMAGE             "embed/image"
#define DFL_DS_EMBED_TEXT              "embed/text"
#define DFL_DS_SCORES_SIMILARITY       "scores/similarity"
#define DFL_DS_SCORES_ZERO_SHOT        "scores/zero_shot"
/* the text tower's maps of caption i: text/NNN/ holds what a text dump's sample holds
 * (tokens, token_text, attn/map1 … with its scales), NNN = i as %03zu */
#define DFL_DS_TEXT_GROUP     "text/%03zu"
#define DFL_ATTR_SITES        "sites"    /* on linear/moments: the sites of axis 1 */
#define DFL_ATTR_BINS         "bins"     /* on hist: the binning rule in words */
#define DFL_ATTR_ALPHA        "alpha"    /* on channel_count: the threshold */
#define DFL_ATTR_STOP         "stop"     /* on generated/tokens: "eos" or "length" */
#define DFL_ATTR_DECODING     "decoding" /* on generated/tokens: "greedy" or the sampling values */
#define DFL_ATTR_BINS         "bins"     /* on hist: the binning rule in words */
#define DFL_ATTR_ALPHA        "alpha"    /* on channel_count: the threshold */
#define DFL_ATTR_PATCH_SITE   "site"     /* on patch: resid_pre, attn_out, mlp_out or head */
#define DFL_ATTR_PATCH_METRIC "metric"   /* on patch: the metric swept */
#define DFL_ATTR_PATCH_SOURCE "source"   /* on patch: the clean prompt's id */

/* ------------------------------------------------------------ the table */

typedef enum dfl_dump_entry_kind {
    DFL_ENTRY_DATASET = 0,
    DFL_ENTRY_ATTRIBUTE /* attribute `name` of object `path` ("/" root, "" the sample group) */
} dfl_dump_entry_kind;

typedef enum dfl_dump_entry_models {
    DFL_MODELS_ALL = 0,
    DFL_MODELS_DIFF /* the differential types only (diff_transformer, diffllama, motif,
                     * diff_transformer_v2; /model/lambda*: all but diff_transformer_v2) */
} dfl_dump_entry_models;

typedef enum dfl_dump_entry_presence {
    DFL_ALWAYS = 0, /* in every dump (of the model types above), every sample */
    DFL_OPTIONAL    /* only with a flag or prompt field (`when` says which) */
} dfl_dump_entry_presence;

typedef struct dfl_dump_entry {
    dfl_dump_entry_kind kind;
    const char *path;  /* dataset path, or the object an attribute is on */
    const char *name;  /* attribute name; NULL for datasets */
    const char *dtype; /* f16 f32 f64 i32 i64 u8 u32 u64 str; "f16|f32": either */
    const char *dims;  /* symbolic, comma-separated ("M,L,H,7"); "" a scalar */
    dfl_dump_entry_models models;
    dfl_dump_entry_presence presence;
    const char *when; /* for optional entries: when they are written */
} dfl_dump_entry;

#define DFL_DS_(path, dtype, dims, models, presence, when)                                                             \
    {                                                                                                                  \
        DFL_ENTRY_DATASET, path, NULL, dtype, dims, models, presence, when                                             \
    }
#define DFL_AT_(object, name, dtype, dims, models, presence, when)                                                     \
    {                                                                                                                  \
        DFL_ENTRY_ATTRIBUTE, object, name, dtype, dims, models, presence, when                                         \
    }

/* Every entry of the schema, in docs/format.md's order. */
static const dfl_dump_entry dfl_dump_schema[] = {
    /* root attributes */
    DFL_AT_("/", DFL_ATTR_FORMAT, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_FORMAT_VERSION, "i32", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_MODEL_TYPE, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_CONFIG, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_MODEL, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_NUM_LAYERS, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_NUM_HEADS, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_HEAD_DIM, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_LOGIT_QUANT_BITS, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_LOGIT_QUANT_GRANULARITY, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_ROWS, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_TOPK, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_NONFINITE_SAMPLES, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("/", DFL_ATTR_ATTN_LOGIT_SOFTCAPPING, "f64", "", DFL_MODELS_ALL, DFL_OPTIONAL,
            "the model soft-caps scores"),
    DFL_AT_("/", DFL_ATTR_FINAL_LOGIT_SOFTCAPPING, "f64", "", DFL_MODELS_ALL, DFL_OPTIONAL,
            "the model soft-caps logits"),
    DFL_AT_("/", DFL_ATTR_LOGIT_STATS_SOFTCAP, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "the model soft-caps scores"),
    DFL_AT_("/", DFL_ATTR_QUANTIZE, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_WEIGHT_BITS, "i64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_WEIGHT_SCHEME, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_WEIGHT_CLIP, "f64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_WEIGHT_GROUP, "i64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_WEIGHT_TENSORS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_ACT_BITS, "i64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_ACT_SCHEME, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_ACT_CLIP, "f64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_ACT_GRANULARITY, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_K_BITS, "i64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_K_SCHEME, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_K_CLIP, "f64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_V_BITS, "i64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_V_SCHEME, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_V_CLIP, "f64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_K_HADAMARD, "i64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_QUANT_ROTATE, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quantize"),
    DFL_AT_("/", DFL_ATTR_INTERVENTIONS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL,
            "--intervene, --interventions, --patch-sweep or --logit-diff"),
    /* /model */
    /* one λ per layer: every Diff type but DIFF V2 (its λ is per token: the sample's lambda) */
    DFL_DS_(DFL_DS_MODEL_LAMBDA, "f32", "L", DFL_MODELS_DIFF, DFL_OPTIONAL, "Diff models but DIFF V2"),
    DFL_DS_(DFL_DS_MODEL_LAMBDA_INIT, "f32", "L", DFL_MODELS_DIFF, DFL_OPTIONAL, "Diff models but DIFF V2"),
    DFL_DS_(DFL_DS_MODEL_NOISE_GROUP, "i32", "H", DFL_MODELS_DIFF, DFL_OPTIONAL, "Motif GDA models"),
    /* the sample group's attributes */
    DFL_AT_("", DFL_ATTR_ID, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("", DFL_ATTR_DEPTH, "f64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_("", DFL_ATTR_NONFINITE_LAYER, "i64", "", DFL_MODELS_ALL, DFL_OPTIONAL, "a NaN or Inf in the forward pass"),
    DFL_AT_("", DFL_ATTR_NONFINITE_SITE, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "a NaN or Inf in the forward pass"),
    /* per token */
    DFL_DS_(DFL_DS_TOKENS, "i32", "T", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_SEGMENTS, "u8", "T", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_TOKEN_TEXT, "str", "T", DFL_MODELS_ALL, DFL_OPTIONAL, "the prompt has text (or a tokenizer)"),
    DFL_DS_(DFL_DS_TOKEN_OFFSETS, "i32", "T,2", DFL_MODELS_ALL, DFL_OPTIONAL, "the prompt has offsets (text prompts)"),
    DFL_DS_(DFL_DS_INPUT, "str", "1", DFL_MODELS_ALL, DFL_OPTIONAL, "the prompt has input (text prompts)"),
    /* maps */
    DFL_DS_(DFL_DS_ATTN_MAP1, "f16|f32", "Ls,Hs,R,T", DFL_MODELS_ALL, DFL_OPTIONAL, "--maps"),
    DFL_DS_(DFL_DS_ATTN_MAP2, "f16|f32", "Ls,Gs,R,T", DFL_MODELS_DIFF, DFL_OPTIONAL, "--maps"),
    DFL_DS_(DFL_DS_ATTN_DIFF, "f16|f32", "Ls,Hs,R,T", DFL_MODELS_DIFF, DFL_OPTIONAL, "--maps"),
    DFL_DS_(DFL_DS_ATTN_LAYERS, "i32", "Ls", DFL_MODELS_ALL, DFL_OPTIONAL, "--maps"),
    DFL_DS_(DFL_DS_ATTN_HEADS, "i32", "Hs", DFL_MODELS_ALL, DFL_OPTIONAL, "--maps"),
    DFL_DS_(DFL_DS_ATTN_ROWS, "i32", "R", DFL_MODELS_ALL, DFL_OPTIONAL, "--maps"),
    DFL_DS_(DFL_DS_ATTN_KEYS, "i32", "T", DFL_MODELS_ALL, DFL_OPTIONAL, "--maps"),
    DFL_DS_(DFL_DS_ATTN_NOISE_GROUPS, "i32", "Gs", DFL_MODELS_DIFF, DFL_OPTIONAL, "--maps, Motif GDA models"),
    DFL_DS_(DFL_DS_LAMBDA, "f32", "L,T,H", DFL_MODELS_DIFF, DFL_OPTIONAL, "DIFF V2 models"),
    /* next-token predictions */
    DFL_DS_(DFL_DS_LOGITS, "f16|f32", "T,V", DFL_MODELS_ALL, DFL_OPTIONAL, "--save-logits"),
    DFL_DS_(DFL_DS_HIDDEN, "f16|f32", "L,T,D", DFL_MODELS_ALL, DFL_OPTIONAL, "--save-hidden"),
    DFL_DS_(DFL_DS_NLL, "f32", "T", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_ARGMAX, "i32", "T", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_TARGET_CORRECT, "u8", "", DFL_MODELS_ALL, DFL_OPTIONAL, "the prompt has target tokens"),
    DFL_DS_(DFL_DS_TARGET_NLL, "f32", "", DFL_MODELS_ALL, DFL_OPTIONAL, "the prompt has target tokens"),
    /* noise statistics of the analysis rows */
    DFL_DS_(DFL_DS_NOISE_SHARES, "f32", "M,L,H,7", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_NOISE_RAW, "f32", "M,L,H,7", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_NOISE_SHARES_ABS, "f32", "M,L,H,7", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_NOISE_ENTROPY, "f32", "M',L,H", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_NOISE_NEGATIVE_MASS, "f32", "L,H", DFL_MODELS_DIFF, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_NOISE_ROWS, "i32", "R'", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_NOISE, DFL_ATTR_SEGMENTS, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_NOISE, DFL_ATTR_MAPS, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_NOISE, DFL_ATTR_ROWS_RULE, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    /* outliers */
    DFL_DS_(DFL_DS_LOGITS_TOP, "f32", "L,K", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_LOGITS_TOP_INDEX, "i32", "L,K,4", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_LOGITS_TOP_INDEX, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_HIDDEN_TOP, "f32", "L,K", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_HIDDEN_TOP_INDEX, "i32", "L,K,2", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_HIDDEN_TOP_INDEX, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_LOGITS_HIST, "u64", "L,B", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_LOGITS_HIST, DFL_ATTR_EDGES, "f64", "B+1", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_LOGITS_HIST, DFL_ATTR_MIN_EXPONENT, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_LOGITS_HIST, DFL_ATTR_MAX_EXPONENT, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_LOGITS_HIST, DFL_ATTR_SUB_BINS, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_LOGITS_HIST, DFL_ATTR_BINS, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_HIDDEN_HIST, "u64", "L,B", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_HIDDEN_HIST, DFL_ATTR_EDGES, "f64", "B+1", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_HIDDEN_HIST, DFL_ATTR_MIN_EXPONENT, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_HIDDEN_HIST, DFL_ATTR_MAX_EXPONENT, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_HIDDEN_HIST, DFL_ATTR_SUB_BINS, "i64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_HIDDEN_HIST, DFL_ATTR_BINS, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_LOGITS_MOMENTS, "f64", "L,6", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_LOGITS_MOMENTS, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_HIDDEN_MOMENTS, "f64", "L,6", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_HIDDEN_MOMENTS, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_HIDDEN_CHANNEL_ABSMAX, "f32", "L,D", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_DS_(DFL_DS_HIDDEN_CHANNEL_COUNT, "u32", "L,D", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    DFL_AT_(DFL_DS_HIDDEN_CHANNEL_COUNT, DFL_ATTR_ALPHA, "f64", "", DFL_MODELS_ALL, DFL_ALWAYS, NULL),
    /* readouts */
    DFL_DS_(DFL_DS_LENS_LAYERS, "i32", "L+1", DFL_MODELS_ALL, DFL_OPTIONAL, "--logit-lens"),
    DFL_DS_(DFL_DS_LENS_TOP_IDS, "i32", "L+1,T,K'", DFL_MODELS_ALL, DFL_OPTIONAL, "--logit-lens"),
    DFL_DS_(DFL_DS_LENS_TOP_PROB, "f32", "L+1,T,K'", DFL_MODELS_ALL, DFL_OPTIONAL, "--logit-lens"),
    DFL_DS_(DFL_DS_LENS_TARGET_RANK, "i32", "L+1,T", DFL_MODELS_ALL, DFL_OPTIONAL, "--logit-lens"),
    DFL_DS_(DFL_DS_LENS_TARGET_PROB, "f32", "L+1,T", DFL_MODELS_ALL, DFL_OPTIONAL, "--logit-lens"),
    DFL_DS_(DFL_DS_DLA_ROWS, "i32", "R'", DFL_MODELS_ALL, DFL_OPTIONAL, "--dla"),
    DFL_DS_(DFL_DS_DLA_TARGET, "i32", "R'", DFL_MODELS_ALL, DFL_OPTIONAL, "--dla"),
    DFL_DS_(DFL_DS_DLA_HEADS, "f32", "R',L,H", DFL_MODELS_ALL, DFL_OPTIONAL, "--dla"),
    DFL_DS_(DFL_DS_DLA_MLP, "f32", "R',L", DFL_MODELS_ALL, DFL_OPTIONAL, "--dla"),
    DFL_DS_(DFL_DS_DLA_EMBED, "f32", "R'", DFL_MODELS_ALL, DFL_OPTIONAL, "--dla"),
    DFL_DS_(DFL_DS_DLA_BIAS, "f32", "R'", DFL_MODELS_ALL, DFL_OPTIONAL, "--dla"),
    DFL_DS_(DFL_DS_DLA_LOGIT, "f32", "R'", DFL_MODELS_ALL, DFL_OPTIONAL, "--dla"),
    DFL_AT_(DFL_DS_DLA, DFL_ATTR_DIRECTION, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--dla"),
    DFL_AT_(DFL_DS_DLA, DFL_ATTR_NORM_SCALE, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--dla"),
    /* image samples: DiffCLIP and CLIP dumps (Lv, Hv, Tv: the image tower's layers, heads
     * as analysed, tokens 1 + grid²; S the input side; N captions, C their longest) */
    DFL_DS_(DFL_DS_MODEL_TEXT_LAMBDA, "f32", "Lt", DFL_MODELS_DIFF, DFL_OPTIONAL, "diffclip"),
    DFL_DS_(DFL_DS_MODEL_TEXT_LAMBDA_INIT, "f32", "Lt", DFL_MODELS_DIFF, DFL_OPTIONAL, "diffclip"),
    DFL_DS_(DFL_DS_IMAGE_INPUT, "u8", "S,S,3", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_IMAGE_SIZE, "i32", "2", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_IMAGE_GEOMETRY, "i32", "7", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_AT_(DFL_DS_IMAGE_GEOMETRY, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_IMAGE_BOX, "i32", "4", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with a box"),
    DFL_DS_(DFL_DS_VISION_SEGMENTS, "u8", "Tv", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_VISION_MAP1, "f32", "Lv,Hv,R,Tv", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_VISION_MAP2, "f32", "Lv,Hv,R,Tv", DFL_MODELS_DIFF, DFL_OPTIONAL, "image prompts, diffclip"),
    DFL_DS_(DFL_DS_VISION_DIFF, "f32", "Lv,Hv,R,Tv", DFL_MODELS_DIFF, DFL_OPTIONAL, "image prompts, diffclip"),
    DFL_DS_(DFL_DS_VISION_ROWS, "i32", "R", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_VISION_SHARES, "f32", "M,Lv,Hv,3", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_AT_(DFL_DS_VISION_SHARES, DFL_ATTR_SEGMENTS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_AT_(DFL_DS_VISION_SHARES, DFL_ATTR_MAPS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_VISION_SHARES_ABS, "f32", "M,Lv,Hv,3", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_VISION_NOISE_ROWS, "i32", "R'", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_VISION_HIDDEN_TOP, "f32", "Lv,K", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_VISION_HIDDEN_TOP_INDEX, "i32", "Lv,K,4", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_AT_(DFL_DS_VISION_HIDDEN_TOP_INDEX, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_VISION_TOKEN_NORM, "f32", "Lv,Tv", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_CAPTION_TOKENS, "i32", "N,C", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with captions"),
    DFL_DS_(DFL_DS_CAPTION_TEXT, "str", "N", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with text captions"),
    DFL_DS_(DFL_DS_EMBED_IMAGE, "f32", "E", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts"),
    DFL_DS_(DFL_DS_EMBED_TEXT, "f32", "N,E", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with captions"),
    DFL_DS_(DFL_DS_SCORES_SIMILARITY, "f32", "N", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with captions"),
    DFL_DS_(DFL_DS_SCORES_ZERO_SHOT, "f32", "N", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with captions"),
    DFL_DS_("text/NNN/tokens", "i32", "C", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with captions"),
    DFL_DS_("text/NNN/token_text", "str", "C", DFL_MODELS_ALL, DFL_OPTIONAL, "captions with a tokenizer"),
    DFL_DS_("text/NNN/attn/map1", "f32", "Lt,Ht,C,C", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with captions"),
    DFL_DS_("text/NNN/attn/map2", "f32", "Lt,Ht,C,C", DFL_MODELS_DIFF, DFL_OPTIONAL, "captions, diffclip"),
    DFL_DS_("text/NNN/attn/diff", "f32", "Lt,Ht,C,C", DFL_MODELS_DIFF, DFL_OPTIONAL, "captions, diffclip"),
    DFL_DS_("text/NNN/attn/layers", "i32", "Lt", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with captions"),
    DFL_DS_("text/NNN/attn/heads", "i32", "Ht", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with captions"),
    DFL_DS_("text/NNN/attn/rows", "i32", "C", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with captions"),
    DFL_DS_("text/NNN/attn/keys", "i32", "C", DFL_MODELS_ALL, DFL_OPTIONAL, "image prompts with captions"),
    /* probe --quant-stats */
    DFL_DS_(DFL_DS_LINEAR_MOMENTS, "f64", "L,4,6", DFL_MODELS_ALL, DFL_OPTIONAL, "--quant-stats"),
    DFL_AT_(DFL_DS_LINEAR_MOMENTS, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quant-stats"),
    DFL_AT_(DFL_DS_LINEAR_MOMENTS, DFL_ATTR_SITES, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--quant-stats"),
    DFL_DS_(DFL_DS_LINEAR_ATTN_IN, "f64", "L,D", DFL_MODELS_ALL, DFL_OPTIONAL, "--quant-stats"),
    DFL_DS_(DFL_DS_LINEAR_ATTN_OUT, "f64", "L,A", DFL_MODELS_ALL, DFL_OPTIONAL, "--quant-stats"),
    DFL_DS_(DFL_DS_LINEAR_MLP_IN, "f64", "L,D", DFL_MODELS_ALL, DFL_OPTIONAL, "--quant-stats"),
    DFL_DS_(DFL_DS_LINEAR_DOWN_IN, "f64", "L,F", DFL_MODELS_ALL, DFL_OPTIONAL, "--quant-stats"),
    DFL_DS_(DFL_DS_QK_Q_ABS, "f32", "L,Hq,d", DFL_MODELS_ALL, DFL_OPTIONAL, "--quant-stats"),
    DFL_DS_(DFL_DS_QK_K_ABS, "f32", "L,Hk,d", DFL_MODELS_ALL, DFL_OPTIONAL, "--quant-stats"),
    /* generation: n generated tokens, Hs = H */
    DFL_DS_(DFL_DS_GENERATED_TOKENS, "i32", "n", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_AT_(DFL_DS_GENERATED_TOKENS, DFL_ATTR_STOP, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_AT_(DFL_DS_GENERATED_TOKENS, DFL_ATTR_DECODING, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_TEXT, "str", "1", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate with a tokenizer"),
    DFL_DS_(DFL_DS_GENERATED_TOKEN_TEXT, "str", "n", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate with a tokenizer"),
    DFL_DS_(DFL_DS_GENERATED_LOGPROB, "f32", "n", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_TOP_IDS, "i32", "n,A", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_TOP_LOGPROBS, "f32", "n,A", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_LOOKBACK, "f32", "M,L,H,n", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_AT_(DFL_DS_GENERATED_LOOKBACK, DFL_ATTR_MAPS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_SHARES, "f32", "M,L,H,n,8", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_AT_(DFL_DS_GENERATED_SHARES, DFL_ATTR_SEGMENTS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_SHARES_ABS, "f32", "M,L,H,n,8", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_LAMBDA, "f32", "L,n-1,H", DFL_MODELS_DIFF, DFL_OPTIONAL, "--generate, DIFF V2 models"),
    DFL_DS_(DFL_DS_GENERATED_EXPECT, "i32", "E", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate, the prompt has expect"),
    DFL_DS_(DFL_DS_GENERATED_CORRECT, "u8", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate, the prompt has expect"),
    DFL_DS_(DFL_DS_GENERATED_LOGITS_TOP, "f32", "L,K", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_LOGITS_TOP_INDEX, "i32", "L,K,4", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_AT_(DFL_DS_GENERATED_LOGITS_TOP_INDEX, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_LOGITS_MOMENTS, "f64", "L,6", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_AT_(DFL_DS_GENERATED_LOGITS_MOMENTS, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_HIDDEN_TOP, "f32", "L,K", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_HIDDEN_TOP_INDEX, "i32", "L,K,2", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_AT_(DFL_DS_GENERATED_HIDDEN_TOP_INDEX, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_DS_(DFL_DS_GENERATED_HIDDEN_MOMENTS, "f64", "L,6", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    DFL_AT_(DFL_DS_GENERATED_HIDDEN_MOMENTS, DFL_ATTR_COLUMNS, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--generate"),
    /* interventions */
    DFL_DS_(DFL_DS_EFFECTS_NAMES, "str", "E", DFL_MODELS_ALL, DFL_OPTIONAL, "--intervene"),
    DFL_DS_(DFL_DS_EFFECTS_TARGET_NLL, "f32", "E", DFL_MODELS_ALL, DFL_OPTIONAL, "--intervene"),
    DFL_DS_(DFL_DS_EFFECTS_TARGET_PROB, "f32", "E", DFL_MODELS_ALL, DFL_OPTIONAL, "--intervene"),
    DFL_DS_(DFL_DS_EFFECTS_TARGET_LOGIT, "f32", "E", DFL_MODELS_ALL, DFL_OPTIONAL, "--intervene"),
    DFL_DS_(DFL_DS_EFFECTS_TARGET_CORRECT, "u8", "E", DFL_MODELS_ALL, DFL_OPTIONAL, "--intervene"),
    DFL_DS_(DFL_DS_EFFECTS_LOGIT_DIFF, "f32", "E", DFL_MODELS_ALL, DFL_OPTIONAL, "--intervene and --logit-diff"),
    DFL_DS_(DFL_DS_EFFECTS_LOGITS, "f32", "E,T,V", DFL_MODELS_ALL, DFL_OPTIONAL, "--intervene and --save-logits"),
    DFL_DS_(DFL_DS_PATCH_LAYERS, "i32", "Lp", DFL_MODELS_ALL, DFL_OPTIONAL, "--patch-sweep"),
    DFL_DS_(DFL_DS_PATCH_POSITIONS, "i32", "P", DFL_MODELS_ALL, DFL_OPTIONAL, "--patch-sweep (not site head)"),
    DFL_DS_(DFL_DS_PATCH_HEADS, "i32", "H", DFL_MODELS_ALL, DFL_OPTIONAL, "--patch-sweep site=head"),
    DFL_DS_(DFL_DS_PATCH_PATCHED, "f32", "Lp,P", DFL_MODELS_ALL, DFL_OPTIONAL, "--patch-sweep (P = H at site head)"),
    DFL_DS_(DFL_DS_PATCH_CLEAN, "f32", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--patch-sweep"),
    DFL_DS_(DFL_DS_PATCH_CORRUPTED, "f32", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--patch-sweep"),
    DFL_DS_(DFL_DS_PATCH_EFFECT, "f32", "Lp,P", DFL_MODELS_ALL, DFL_OPTIONAL, "--patch-sweep (P = H at site head)"),
    DFL_AT_(DFL_DS_PATCH, DFL_ATTR_PATCH_SITE, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--patch-sweep"),
    DFL_AT_(DFL_DS_PATCH, DFL_ATTR_PATCH_METRIC, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--patch-sweep"),
    DFL_AT_(DFL_DS_PATCH, DFL_ATTR_PATCH_SOURCE, "str", "", DFL_MODELS_ALL, DFL_OPTIONAL, "--patch-sweep"),
};

#undef DFL_DS_
#undef DFL_AT_

#define DFL_DUMP_SCHEMA_ENTRIES (sizeof dfl_dump_schema / sizeof dfl_dump_schema[0])

/* The dataset entry of `path` (sample-relative, or absolute with a leading '/'), or
 * NULL when the schema has no such dataset. */
static inline const dfl_dump_entry *dfl_dump_schema_dataset(const char *path)
{
    for (size_t i = 0; i < DFL_DUMP_SCHEMA_ENTRIES; i++)
        if (dfl_dump_schema[i].kind == DFL_ENTRY_DATASET && !strcmp(dfl_dump_schema[i].path, path))
            return &dfl_dump_schema[i];
    return NULL;
}

#endif
