/* compare — llama.cpp's --kl-divergence block and per-layer divergences from two dumps of
 * the same prompts, a base and an other (docs/compare.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/compare.h"
#include "base/atomic.h"
#include "base/cli.h"
#include "base/report.h"
#include "render/render.h"

/* SIGINT/SIGTERM/SIGHUP: remove this process's temporary files, say so, exit 128+sig. */
static void on_signal(int sig)
{
    dfl__tmp_unlink_all();
    dfl_cli_signal_note("compare", sig);
    _exit(128 + sig);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: compare BASE.h5 OTHER.h5 [BASE2.h5 OTHER2.h5] [options]\n"
                 "\n"
                 "Compares a dump against a base dump of the same prompts, as llama.cpp's llama-perplexity\n"
                 "--kl-divergence does, and layer by layer. OTHER is for example a quantized model, or the\n"
                 "model with probe --quantize-logits. From the logits both dumps hold (probe --save-logits\n"
                 "[f16]): llama.cpp's statistics with the same labels and definitions (Mean PPL(Q), Mean\n"
                 "PPL(base), Cor, ln(PPL(Q)/PPL(base)), PPL ratio, difference, Mean KLD with its\n"
                 "percentiles, the Δp statistics, RMS Δp, Same top p); per layer the cosine, relative L2 and\n"
                 "Pearson of the hidden states (probe --save-hidden) and the Jensen-Shannon divergence of the\n"
                 "attention rows both dumps stored (probe --maps). Two pairs are compared side by side (a\n"
                 "Transformer and a Diff Transformer, each against its quantized self).\n"
                 "\n"
                 "  --from N              first scored position: the logits at t = N..T-2 predict token t+1\n"
                 "                        (default: 0, every position with a next token); attention rows and\n"
                 "                        hidden states from position N on\n"
                 "  --score all|target    all: every position from --from on; target: only those whose next\n"
                 "                        token is a target token (the needle task's answer) (default: all)\n"
                 "  --threshold X         a layer has diverged when 1 - cosine of its hidden states exceeds X\n"
                 "                        (default: 0.01)\n"
                 "  --labels A[,B]        names of the pairs (default: the other dumps' file names)\n"
                 "  --format table|csv|json|markdown|llama  output format; llama = llama.cpp's own text of\n"
                 "                        the block, line for line (default: table)\n"
                 "  --plot FILE           per-layer divergence, a panel per pair (.png, .svg, .pdf) (default: none)\n"
                 "  --width IN            figure width in inches, 0 < IN <= 100 (default: 6 in per pair)\n"
                 "  --font FAMILY         font family of the figure (default: DejaVu Sans)\n"
                 "  --force               overwrite an existing plot\n"
                 "  --quiet               no notes on stderr\n"
                 "  --help                this text\n"
                 "  --version             the version of difflens\n"
                 "\n"
                 "Exit status: 0 ok, 1 runtime error (bad dump, different prompts), 2 usage error.\n");
}

static int bad(const dfl_error *err)
{
    fprintf(stderr, "compare: %s\n", err->msg);
    return 2;
}

int main(int argc, char **argv)
{
    enum { O_FROM = 256, O_SCORE, O_THRESHOLD, O_LABELS, O_FORMAT, O_PLOT, O_WIDTH, O_FONT, O_FORCE, O_QUIET, O_HELP };
    static const struct option opts[] = {{"from", required_argument, 0, O_FROM},
                                         {"score", required_argument, 0, O_SCORE},
                                         {"threshold", required_argument, 0, O_THRESHOLD},
                                         {"labels", required_argument, 0, O_LABELS},
                                         {"format", required_argument, 0, O_FORMAT},
                                         {"plot", required_argument, 0, O_PLOT},
                                         {"width", required_argument, 0, O_WIDTH},
                                         {"font", required_argument, 0, O_FONT},
                                         {"force", no_argument, 0, O_FORCE},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"help", no_argument, 0, O_HELP},
                                         DFL_CLI_COMMON_OPTIONS,
                                         {0, 0, 0, 0}};
    dfl_cli_catch_signals(on_signal);
    dfl_compare_params p = dfl_compare_params_default();
    dfl_plot_paper paper = {NULL, 0.0};
    dfl_error err = {DFL_OK, ""};
    dfl_report_format fmt = DFL_REPORT_TABLE;
    int llama = 0, force = 0, quiet = 0, c, rc = 0;
    const char *plot = NULL;
    char **labels = NULL;
    size_t n_labels = 0;
    while (!rc && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_FROM:
            if (dfl_cli_int("--from", optarg, 0, INT32_MAX, &p.from, &err)) rc = bad(&err);
            break;
        case O_SCORE:
            if (!strcmp(optarg, "all") || !strcmp(optarg, "target")) {
                p.target_only = !strcmp(optarg, "target");
            } else {
                fprintf(stderr, "compare: --score %s: all or target\n", optarg);
                rc = 2;
            }
            break;
        case O_THRESHOLD:
            if (dfl_cli_double("--threshold", optarg, 0.0, 2.0, &p.threshold, &err)) rc = bad(&err);
            break;
        case O_LABELS:
            free(labels);
            if (dfl_cli_split("--labels", optarg, DFL_COMPARE_MAX_PAIRS, &labels, &n_labels, &err)) rc = bad(&err);
            break;
        case O_FORMAT:
            llama = !strcmp(optarg, "llama");
            if (!llama && dfl_report_format_parse(optarg, &fmt, &err)) {
                fprintf(stderr, "compare: %s, llama\n", err.msg);
                rc = 2;
            }
            break;
        case O_PLOT: plot = optarg; break;
        case O_WIDTH:
            if (dfl_plot_width_parse(optarg, &paper.width_in, &err)) rc = bad(&err);
            break;
        case O_FONT: paper.font = optarg; break;
        case O_FORCE: force = 1; break;
        case O_QUIET: quiet = 1; break;
        case O_HELP:
            usage(stdout);
            rc = -1;
            break;
        case DFL_CLI_OPT_VERSION:
        case DFL_CLI_OPT_LIST: rc = dfl_cli_common(stdout, "compare", c, opts) ? 1 : -1; break;
        default:
            usage(stderr);
            rc = 2;
            break;
        }
    }
    dfl_format plot_fmt;
    if (!rc && plot && dfl_format_of_path(plot, &plot_fmt, &err)) rc = bad(&err);
    size_t n_dumps = optind < argc ? (size_t)(argc - optind) : 0;
    if (!rc && (n_dumps != 2 && n_dumps != 4)) {
        fprintf(stderr, "compare: %zu dump%s given; give BASE.h5 OTHER.h5, or two such pairs (see --help)\n", n_dumps,
                n_dumps == 1 ? "" : "s");
        rc = 2;
    }
    if (!rc && labels && n_labels != n_dumps / 2) {
        fprintf(stderr, "compare: --labels names %zu pair%s but %zu %s given\n", n_labels, n_labels == 1 ? "" : "s",
                n_dumps / 2, n_dumps / 2 == 1 ? "is" : "are");
        rc = 2;
    }
    dfl_compare_result *res = NULL;
    dfl_report *rep = NULL;
    char *text = NULL;
    if (!rc) {
        p.dumps = (const char *const *)(argv + optind);
        p.n_pairs = n_dumps / 2;
        p.labels = (const char *const *)labels;
        if (!paper.width_in && plot) paper.width_in = 6.0 * (double)p.n_pairs;
        dfl_status s = dfl__check_not_input(plot, p.dumps, n_dumps, &err);
        if (!s) s = dfl_compare_run(&p, &res, &err);
        if (!s) s = dfl_compare_report(res, &rep, &err);
        if (!s && plot) s = dfl_compare_plot(res, plot, force, &paper, &err);
        if (!s && !quiet)
            for (size_t i = 0; i < p.n_pairs; i++)
                if (!dfl_compare_kld_of(res, i))
                    fprintf(stderr, "compare: note: pair %zu has no logits (probe --save-logits): no KLD block\n",
                            i + 1);
        if (!s && llama) {
            s = dfl_compare_llama_text(res, &text, &err);
            if (!s && fputs(text, stdout) < 0) s = DFL_ERR_IO, snprintf(err.msg, sizeof err.msg, "cannot write");
        } else if (!s) {
            s = dfl_report_write(rep, fmt, stdout, &err);
        }
        if (!s && fflush(stdout)) s = DFL_ERR_IO, snprintf(err.msg, sizeof err.msg, "cannot write the output");
        if (s) {
            fprintf(stderr, "compare: %s\n", err.msg);
            rc = dfl_status_exit_code(s);
        }
    }
    free(text);
    dfl_report_destroy(rep);
    dfl_compare_result_free(res);
    free(labels);
    return rc < 0 ? 0 : rc;
}
