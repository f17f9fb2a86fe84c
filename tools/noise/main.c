/* noise — attention to the answer vs attention noise from dumps, and the needle
 * prompts that feed it (docs/noise.md). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/cli.h"
#include "analysis/noise.h"
#include "analysis/noise_lookback.h"
#include "text/noise_prompts.h"
#include "text/tokenizer.h"
#include "base/report.h"
#include "render/render.h"

/* SIGINT/SIGTERM/SIGHUP: remove this process's temporary files, say so, exit 128+sig. */
static void on_signal(int sig)
{
    dfl__tmp_unlink_all();
    dfl_cli_signal_note("noise", sig);
    _exit(128 + sig);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: noise DUMP.h5 [DUMP2.h5 ...] [options]\n"
                 "       noise prompts -o PROMPTS.jsonl [options]   (noise prompts --help)\n"
                 "\n"
                 "How much attention lands on the answer and how much on the context around it (the\n"
                 "paper's Figure 1 and Table 3), from the noise/ datasets probe writes. Each dump gets a\n"
                 "column: the share of each key segment (bos, context before, answer, context after,\n"
                 "query, distractor, target), noise = context_before + context_after (the paper's\n"
                 "definition), answer/noise, and the retrieval accuracy (target_correct).\n"
                 "\n"
                 "  --map auto|map1|map2|diff  which map of a Diff dump (default: auto = diff for Diff\n"
                 "                        dumps, map1 (the softmax map) for softmax dumps)\n"
                 "  --norm total|abs      total: noise/shares, each row divided by its total (1, or 1 - lambda\n"
                 "                        for diff: unstable where that is near 0); abs: noise/shares_abs,\n"
                 "                        shares of |attention|, always in [0, 1] (default: total)\n"
                 "  --by none|depth|layer|head  group: none = one table of shares (Figure 1); depth =\n"
                 "                        answer and noise per answer depth with counts (Table 3); layer,\n"
                 "                        head = where the signal lives (default: none)\n"
                 "  --stat shares|entropy|negative_mass  what the tables show: shares = the segment shares\n"
                 "                        above; entropy = noise/entropy, the mean row entropy (nats) of each\n"
                 "                        softmax map (map1, and map2 for Diff dumps); negative_mass =\n"
                 "                        noise/negative_mass, the summed negative entries of the diff map\n"
                 "                        (Diff dumps only, <= 0); grouped by --by like the shares, no plots\n"
                 "                        (default: shares)\n"
                 "  --layers LIST         average over these layers only, e.g. 0,2-3 (default: all)\n"
                 "  --heads LIST          average over these heads only (default: all)\n"
                 "  --labels A,B,...      names of the dumps (default: file names without .h5)\n"
                 "  --format table|csv|json|markdown  output format (default: table)\n"
                 "  --plot FILE           the Figure-1 grouped bar chart: a group per segment, a bar per dump;\n"
                 "                        PNG, SVG or PDF by the extension (.png, .svg, .pdf) (default: none)\n"
                 "  --plot-depth FILE     answer and noise against depth, a line per dump (.png, .svg, .pdf)\n"
                 "                        (default: none)\n"
                 "  --width IN            figure width in inches, 0 < IN <= 100 (3.3 = one column, 7 =\n"
                 "                        two): SVG/PDF get that size, PNG is 300 dpi (default: 8 in for\n"
                 "                        --plot, 10 in for more than 5 segments; 10.7 in for --plot-depth;\n"
                 "                        PNG 1 pixel per unit)\n"
                 "  --font FAMILY         font family of the figures (default: DejaVu Sans)\n"
                 "  --lookback            the lookback ratio of generated tokens instead of the shares (dumps\n"
                 "                        of probe --generate): by model (right vs wrong answers), layer, head\n"
                 "                        and step, of --map's map (default: off)\n"
                 "  --plot-lookback FILE  with --lookback: the ratio per step, a line per layer and dump\n"
                 "                        (default: none)\n"
                 "  --plot-lookback-heads FILE  with --lookback: layers x heads heatmaps, a panel per dump\n"
                 "                        (default: none)\n"
                 "  --warn-total X        warn on (sample, layer, head) whose row total (the sum of\n"
                 "                        noise/raw) is below X in magnitude (default: 0.05)\n"
                 "  --force               overwrite existing plots\n"
                 "  --quiet               no warnings on stderr (they stay in the report's notes)\n"
                 "  --help                this text\n"
                 "  --version             the version of difflens\n"
                 "\n"
                 "Exit status: 0 ok, 1 runtime error (bad dump, missing data), 2 usage error.\n");
}

static void usage_prompts(FILE *out)
{
    fprintf(out, "usage: noise prompts -o PROMPTS.jsonl [options]\n"
                 "\n"
                 "Writes prompts for the attention-noise experiment: the synthetic multi-needle retrieval\n"
                 "task of docs/format.md \"Needle task\" (vocabulary 0 <bos>, 1 <needle>, 2 <query>, 3 <sep>,\n"
                 "5-14 digits, 15-78 keys, 79+ filler) or, with --template, prompts for a real tokenizer's\n"
                 "model from pre-tokenized pieces. Every prompt has its answer, query, target (and\n"
                 "distractor) spans and its depth; ids are d<depth%%>-s<sample>.\n"
                 "\n"
                 "  -o, --out FILE        JSONL to write (never overwritten without --force)\n"
                 "  --length LIST         tokens per prompt, one or more (e.g. 256 or 1024,2048) (default: 256)\n"
                 "  --depths LIST         answer depths in [0, 1] (default: 0,0.25,0.5,0.75,1)\n"
                 "  --samples S           prompts per depth and length, 1 to 1000000 (default: 20)\n"
                 "  --seed X              generator seed, 0 to 2^63-1 (default: 1)\n"
                 "synthetic task only\n"
                 "  --needles N           needles in the context, 1 to 64 (default: 4)\n"
                 "  --queries R           queries at the end; the last asks for the answer, 1 to 64 (default: 1)\n"
                 "  --digits M            digits per needle, 1 to 16 (default: 4)\n"
                 "  --vocab-size V        vocabulary size, >= 128 (default: 128); with --template: check\n"
                 "                        every id < V (default: the template's vocab_size, if any)\n"
                 "template\n"
                 "  --template FILE.json  {\"haystack\": [ids], \"needle\": [ids], \"answer\": [start, end],\n"
                 "                        \"distractors\": [[ids], ...], \"query\": [ids], \"target\": [ids],\n"
                 "                        \"bos\": id|null, \"vocab_size\": V} (docs/noise.md)\n"
                 "  --tokenizer PATH      tokenizer.json (or a checkpoint folder): the --template holds text\n"
                 "                        pieces instead of ids, {\"haystack\": \"...\" | {\"file\": F},\n"
                 "                        \"needle\": \"...\", \"answer\": \"part of the needle\", \"distractors\":\n"
                 "                        [\"...\"], \"query\": \"...\", \"target\": \"...\", \"bos\": true|false},\n"
                 "                        and prompts get the decoded pieces as text (default: ids)\n"
                 "free-form retrieval\n"
                 "  --free-form           end each prompt before the last query's answer: the answer is\n"
                 "                        \"expect\" and its length \"generate\", for probe --generate, which\n"
                 "                        scores the generated answer by exact match (default: off)\n"
                 "  --force               overwrite an existing output\n"
                 "  --quiet               no summary line\n"
                 "  --help                this text\n"
                 "  --version             the version of difflens\n");
}

static int bad(const dfl_error *err)
{
    fprintf(stderr, "noise: %s\n", err->msg);
    return 2;
}

static int run_prompts(int argc, char **argv)
{
    enum {
        O_LENGTH = 256,
        O_DEPTHS,
        O_SAMPLES,
        O_SEED,
        O_NEEDLES,
        O_QUERIES,
        O_DIGITS,
        O_VOCAB,
        O_TEMPLATE,
        O_FORCE,
        O_QUIET,
        O_HELP,
        O_TOKENIZER,
        O_FREE
    };
    static const struct option opts[] = {{"out", required_argument, 0, 'o'},
                                         {"length", required_argument, 0, O_LENGTH},
                                         {"depths", required_argument, 0, O_DEPTHS},
                                         {"samples", required_argument, 0, O_SAMPLES},
                                         {"seed", required_argument, 0, O_SEED},
                                         {"needles", required_argument, 0, O_NEEDLES},
                                         {"queries", required_argument, 0, O_QUERIES},
                                         {"digits", required_argument, 0, O_DIGITS},
                                         {"vocab-size", required_argument, 0, O_VOCAB},
                                         {"template", required_argument, 0, O_TEMPLATE},
                                         {"force", no_argument, 0, O_FORCE},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"help", no_argument, 0, O_HELP},
                                         {"tokenizer", required_argument, 0, O_TOKENIZER},
                                         {"free-form", no_argument, 0, O_FREE},
                                         DFL_CLI_COMMON_OPTIONS,
                                         {0, 0, 0, 0}};
    dfl_noise_prompts_params p = dfl_noise_prompts_default();
    dfl_error err = {DFL_OK, ""};
    const char *out = NULL, *tmpl_path = NULL, *tok_path = NULL;
    int64_t *lengths = NULL, v;
    double *depths = NULL;
    size_t n_lengths = 0, n_depths = 0;
    int force = 0, quiet = 0, synthetic_flag = 0, vocab_given = 0, free_form = 0, c, rc = 0;
    optind = 1;
    while (!rc && (c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case O_LENGTH:
            free(lengths);
            lengths = NULL;
            if (dfl_cli_int_list("--length", optarg, 1, 1 << 24, 0, &lengths, &n_lengths, &err)) rc = bad(&err);
            break;
        case O_DEPTHS:
            free(depths);
            depths = NULL;
            if (dfl_noise_parse_depths("--depths", optarg, &depths, &n_depths, &err)) rc = bad(&err);
            break;
        case O_SAMPLES:
            if (dfl_cli_int("--samples", optarg, 1, 1000000, &p.samples, &err)) rc = bad(&err);
            break;
        case O_SEED:
            if (dfl_cli_int("--seed", optarg, 0, INT64_MAX, &v, &err)) rc = bad(&err);
            p.seed = (uint64_t)v;
            break;
        case O_NEEDLES:
            if (dfl_cli_int("--needles", optarg, 1, 64, &v, &err)) rc = bad(&err);
            p.needles = (int)v, synthetic_flag = 1;
            break;
        case O_QUERIES:
            if (dfl_cli_int("--queries", optarg, 1, 64, &v, &err)) rc = bad(&err);
            p.queries = (int)v, synthetic_flag = 1;
            break;
        case O_DIGITS:
            if (dfl_cli_int("--digits", optarg, 1, 16, &v, &err)) rc = bad(&err);
            p.digits = (int)v, synthetic_flag = 1;
            break;
        case O_VOCAB:
            if (dfl_cli_int("--vocab-size", optarg, 1, (int64_t)1 << 31, &p.vocab_size, &err)) rc = bad(&err);
            vocab_given = 1;
            break;
        case O_TEMPLATE: tmpl_path = optarg; break;
        case O_TOKENIZER: tok_path = optarg; break;
        case O_FREE: free_form = 1; break;
        case O_FORCE: force = 1; break;
        case O_QUIET: quiet = 1; break;
        case O_HELP:
            usage_prompts(stdout);
            free(lengths), free(depths);
            return 0;
        case DFL_CLI_OPT_VERSION:
        case DFL_CLI_OPT_LIST: free(lengths), free(depths); return dfl_cli_common(stdout, "noise prompts", c, opts);
        default:
            usage_prompts(stderr);
            rc = 2;
            break;
        }
    }
    if (!rc && optind < argc) {
        fprintf(stderr, "noise prompts: unexpected argument '%s'\n", argv[optind]);
        rc = 2;
    }
    if (!rc && !out) {
        fprintf(stderr, "noise prompts: -o PROMPTS.jsonl is required (see noise prompts --help)\n");
        rc = 2;
    }
    if (!rc && tmpl_path && synthetic_flag) {
        fprintf(stderr,
                "noise prompts: --needles, --queries and --digits are for the synthetic task, not --template\n");
        rc = 2;
    }
    if (!rc && tok_path && !tmpl_path) {
        fprintf(stderr, "noise prompts: --tokenizer needs --template (a template of text pieces)\n");
        rc = 2;
    }
    if (!rc && !tmpl_path && p.vocab_size < 128) {
        fprintf(stderr, "noise prompts: --vocab-size %lld: the synthetic task needs at least 128\n",
                (long long)p.vocab_size);
        rc = 2;
    }
    if (rc) {
        free(lengths), free(depths);
        return rc;
    }
    p.lengths = lengths, p.n_lengths = n_lengths;
    p.depths = depths, p.n_depths = n_depths;

    dfl_noise_template tmpl;
    memset(&tmpl, 0, sizeof tmpl);
    dfl_prompt_set set = {NULL, 0};
    dfl_status s = DFL_OK;
    dfl_tokenizer *tok = NULL;
    const char *inputs[2] = {tmpl_path, tok_path};
    s = dfl__check_not_input(out, inputs, 2, &err);
    if (!s && tok_path) s = dfl_tokenizer_open_path(tok_path, &tok, &err);
    if (!s && tmpl_path) {
        if (!vocab_given) p.vocab_size = 0;
        s = tok ? dfl_noise_template_read_text(tmpl_path, tok, &tmpl, &err)
                : dfl_noise_template_read(tmpl_path, &tmpl, &err);
        p.tmpl = &tmpl;
    }
    if (!s) s = dfl_noise_prompts_make(&p, &set, &err);
    if (!s && tok) s = dfl_noise_prompts_label(&set, tok, &err);
    if (!s && free_form) s = dfl_noise_prompts_free_form(&set, &err);
    if (!s) s = dfl_prompt_set_write(out, set.items, set.count, force, &err);
    if (s) {
        fprintf(stderr, "noise prompts: %s\n", err.msg);
        rc = dfl_status_exit_code(s);
    } else if (!quiet) {
        fprintf(stderr, "noise prompts: wrote %zu prompts (%zu length%s x %zu depth%s x %lld samples, %s) to %s\n",
                set.count, n_lengths ? n_lengths : 1, n_lengths > 1 ? "s" : "", n_depths ? n_depths : 5,
                (n_depths ? n_depths : 5) > 1 ? "s" : "", (long long)p.samples,
                tmpl_path ? "template" : "synthetic needle task", out);
    }
    dfl_prompt_set_free(&set);
    dfl_noise_template_free(&tmpl);
    dfl_tokenizer_close(tok);
    free(lengths), free(depths);
    return rc;
}

static int run_analysis(int argc, char **argv)
{
    enum {
        O_MAP = 256,
        O_NORM,
        O_BY,
        O_LAYERS,
        O_HEADS,
        O_LABELS,
        O_FORMAT,
        O_PLOT,
        O_PLOTD,
        O_WARN,
        O_FORCE,
        O_QUIET,
        O_HELP,
        O_WIDTH,
        O_FONT,
        O_STAT,
        O_LOOKBACK,
        O_PLOT_LB,
        O_PLOT_LBH
    };
    static const struct option opts[] = {{"map", required_argument, 0, O_MAP},
                                         {"norm", required_argument, 0, O_NORM},
                                         {"by", required_argument, 0, O_BY},
                                         {"layers", required_argument, 0, O_LAYERS},
                                         {"heads", required_argument, 0, O_HEADS},
                                         {"labels", required_argument, 0, O_LABELS},
                                         {"format", required_argument, 0, O_FORMAT},
                                         {"plot", required_argument, 0, O_PLOT},
                                         {"plot-depth", required_argument, 0, O_PLOTD},
                                         {"warn-total", required_argument, 0, O_WARN},
                                         {"force", no_argument, 0, O_FORCE},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"help", no_argument, 0, O_HELP},
                                         {"width", required_argument, 0, O_WIDTH},
                                         {"font", required_argument, 0, O_FONT},
                                         {"stat", required_argument, 0, O_STAT},
                                         {"lookback", no_argument, 0, O_LOOKBACK},
                                         {"plot-lookback", required_argument, 0, O_PLOT_LB},
                                         {"plot-lookback-heads", required_argument, 0, O_PLOT_LBH},
                                         DFL_CLI_COMMON_OPTIONS,
                                         {0, 0, 0, 0}};
    dfl_plot_paper paper = {NULL, 0.0};
    dfl_noise_params p = dfl_noise_params_default();
    dfl_error err = {DFL_OK, ""};
    dfl_report_format fmt = DFL_REPORT_TABLE;
    const char *plot = NULL, *plot_depth = NULL, *plot_lb = NULL, *plot_lbh = NULL;
    int lookback = 0;
    char **labels = NULL; /* one block (dfl_cli_split) */
    int64_t *layers = NULL, *heads = NULL;
    size_t n_labels = 0;
    int force = 0, quiet = 0, c, rc = 0;
    while (!rc && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_MAP:
            if (dfl_noise_map_parse(optarg, &p.map, &err)) rc = bad(&err);
            break;
        case O_NORM:
            if (dfl_noise_norm_parse(optarg, &p.norm, &err)) rc = bad(&err);
            break;
        case O_BY:
            if (dfl_noise_by_parse(optarg, &p.by, &err)) rc = bad(&err);
            break;
        case O_STAT:
            if (dfl_noise_stat_parse(optarg, &p.stat, &err)) rc = bad(&err);
            break;
        case O_LAYERS:
            free(layers);
            layers = NULL;
            if (dfl_cli_index_list("--layers", optarg, &layers, &p.n_layers, &err)) rc = bad(&err);
            p.layers = layers;
            break;
        case O_HEADS:
            free(heads);
            heads = NULL;
            if (dfl_cli_index_list("--heads", optarg, &heads, &p.n_heads, &err)) rc = bad(&err);
            p.heads = heads;
            break;
        case O_LABELS:
            free(labels);
            if (dfl_cli_split("--labels", optarg, DFL_NOISE_MAX_DUMPS, &labels, &n_labels, &err)) rc = bad(&err);
            break;
        case O_FORMAT:
            if (dfl_report_format_parse(optarg, &fmt, &err)) rc = bad(&err);
            break;
        case O_PLOT: plot = optarg; break;
        case O_PLOTD: plot_depth = optarg; break;
        case O_LOOKBACK: lookback = 1; break;
        case O_PLOT_LB: plot_lb = optarg; break;
        case O_PLOT_LBH: plot_lbh = optarg; break;
        case O_WIDTH:
            if (dfl_plot_width_parse(optarg, &paper.width_in, &err)) rc = bad(&err);
            break;
        case O_FONT: paper.font = optarg; break;
        case O_WARN:
            if (dfl_cli_double("--warn-total", optarg, 0.0, 1e30, &p.warn_total, &err)) rc = bad(&err);
            break;
        case O_FORCE: force = 1; break;
        case O_QUIET: quiet = 1; break;
        case O_HELP:
            usage(stdout);
            rc = -1;
            break;
        case DFL_CLI_OPT_VERSION:
        case DFL_CLI_OPT_LIST: rc = dfl_cli_common(stdout, "noise", c, opts) ? 1 : -1; break;
        default:
            usage(stderr);
            rc = 2;
            break;
        }
    }
    /* a plot's format comes from its extension: a bad one fails before any reading */
    dfl_format plot_fmt;
    if (!rc && plot && dfl_format_of_path(plot, &plot_fmt, &err)) rc = bad(&err);
    if (!rc && plot_depth && dfl_format_of_path(plot_depth, &plot_fmt, &err)) rc = bad(&err);
    if (!rc && p.stat != DFL_NOISE_STAT_SHARES && (plot || plot_depth)) {
        fprintf(stderr, "noise: --plot and --plot-depth draw the shares; --stat %s has tables only\n",
                dfl_noise_stat_name(p.stat));
        rc = 2;
    }
    if (!rc && (plot_lb || plot_lbh) && !lookback) {
        fprintf(stderr, "noise: --plot-lookback and --plot-lookback-heads need --lookback\n");
        rc = 2;
    }
    if (!rc && lookback && (plot || plot_depth || p.by != DFL_NOISE_BY_NONE || p.stat != DFL_NOISE_STAT_SHARES)) {
        fprintf(stderr, "noise: --lookback has its own tables and plots (--plot-lookback, --plot-lookback-heads)\n");
        rc = 2;
    }
    if (!rc && plot_lb && dfl_format_of_path(plot_lb, &plot_fmt, &err)) rc = bad(&err);
    if (!rc && plot_lbh && dfl_format_of_path(plot_lbh, &plot_fmt, &err)) rc = bad(&err);
    size_t n_dumps = optind < argc ? (size_t)(argc - optind) : 0;
    if (!rc && n_dumps == 0) {
        fprintf(stderr, "noise: at least one dump is required (see --help)\n");
        rc = 2;
    }
    if (!rc && n_dumps > DFL_NOISE_MAX_DUMPS) {
        fprintf(stderr, "noise: %zu dumps given; at most %d\n", n_dumps, DFL_NOISE_MAX_DUMPS);
        rc = 2;
    }
    if (!rc && labels && n_labels != n_dumps) {
        fprintf(stderr, "noise: --labels names %zu dump%s but %zu %s given\n", n_labels, n_labels == 1 ? "" : "s",
                n_dumps, n_dumps == 1 ? "is" : "are");
        rc = 2;
    }

    dfl_noise_result *res = NULL;
    dfl_report *rep = NULL;
    dfl_status s = DFL_OK;
    if (!rc && lookback) { /* noise --lookback: its own analysis, tables and figures */
        dfl_lookback_result *lr = NULL;
        const char *const *dumps = (const char *const *)(argv + optind);
        s = dfl__check_not_input(plot_lb, dumps, n_dumps, &err);
        if (!s) s = dfl__check_not_input(plot_lbh, dumps, n_dumps, &err);
        if (!s) s = dfl_lookback_analyze(dumps, (const char *const *)labels, n_dumps, p.map, &lr, &err);
        if (!s) s = dfl_lookback_report(lr, &rep, &err);
        if (!s && plot_lb) s = dfl_lookback_plot_steps(lr, plot_lb, force, &paper, &err);
        if (!s && plot_lbh) s = dfl_lookback_plot_heads(lr, plot_lbh, force, &paper, &err);
        if (!s) s = dfl_report_write(rep, fmt, stdout, &err);
        if (s) {
            fprintf(stderr, "noise: %s\n", err.msg);
            rc = dfl_status_exit_code(s);
        }
        dfl_lookback_result_free(lr);
        rc = rc ? rc : -1;
    }
    if (!rc) {
        p.dumps = (const char *const *)(argv + optind);
        p.n_dumps = n_dumps;
        p.labels = (const char *const *)labels;
        s = dfl__check_not_input(plot, p.dumps, p.n_dumps, &err);
        if (!s) s = dfl__check_not_input(plot_depth, p.dumps, p.n_dumps, &err);
        if (!s) s = dfl_noise_analyze(&p, &res, &err);
        if (!s) s = dfl_noise_report(res, p.by, &rep, &err);
        /* the plots before the tables, so that a failed plot leaves no output at all */
        if (!s && plot) s = dfl_noise_plot_shares_paper(res, plot, force, &paper, &err);
        if (!s && plot_depth) s = dfl_noise_plot_depth_paper(res, plot_depth, force, &paper, &err);
        if (!s) {
            char lines[2 * DFL_NOISE_MAX_DUMPS][256];
            size_t nw = dfl_noise_warnings(res, p.by, lines, 2 * DFL_NOISE_MAX_DUMPS);
            for (size_t i = 0; i < nw && !quiet; i++)
                fprintf(stderr, "noise: warning: %s\n", lines[i]);
            s = dfl_report_write(rep, fmt, stdout, &err);
            if (!s && fflush(stdout)) s = DFL_ERR_IO, snprintf(err.msg, sizeof err.msg, "cannot write the output");
        }
        if (s) {
            fprintf(stderr, "noise: %s\n", err.msg);
            rc = dfl_status_exit_code(s);
        }
    }
    dfl_report_destroy(rep);
    dfl_noise_result_free(res);
    free(layers), free(heads), free(labels);
    return rc < 0 ? 0 : rc;
}

int main(int argc, char **argv)
{
    dfl_cli_catch_signals(on_signal);
    if (argc > 1 && !strcmp(argv[1], "prompts")) return run_prompts(argc - 1, argv + 1);
    return run_analysis(argc, argv);
}
