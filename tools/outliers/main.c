/* outliers — activation-outlier statistics from dumps, Table-5 style (docs/outliers.md). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/cli.h"
#include "analysis/outliers.h"
#include "analysis/outliers_quant.h"
#include "base/report.h"
#include "render/render.h"

/* SIGINT/SIGTERM/SIGHUP: remove this process's temporary files, say so, exit 128+sig. */
static void on_signal(int sig)
{
    dfl__tmp_unlink_all();
    dfl_cli_signal_note("outliers", sig);
    _exit(128 + sig);
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: outliers A.h5 [B.h5 ...] [options]\n"
        "\n"
        "Largest activation magnitudes of attention logits and hidden states from probe dumps, side by\n"
        "side: the paper's Table 5 (Top-n and median of abs(x) over all layers and samples), and with the\n"
        "options below per-layer, per-head and quantization views (see docs/outliers.md).\n"
        "\n"
        "tables\n"
        "  --labels A,B,...      names of the dumps (default: their model types; repeated types add the file name)\n"
        "  --top LIST            Top-n columns of Table 5 (default: 1,2,3,10,100); n above the dump's K\n"
        "                        (probe --topk) shows n/a\n"
        "  --per-layer           per layer: top-1/2/3, median, max/median, kurtosis, massive activations\n"
        "  --massive-abs X       massive activation: abs(x) > X (default: 100)\n"
        "  --massive-ratio X     ... and abs(x) >= X times the layer median (default: 1000)\n"
        "  --per-head            attention logits per head, from the stored top-K lists only\n"
        "  --quant               quantization view: LLM.int8() outlier features, SmoothQuant per-channel max\n"
        "                        profile, SQNR of absmax-quantized attention logits\n"
        "  --bits LIST           SQNR bit widths, 2..16 (default: 8,6,4; implies --quant)\n"
        "  --int8-layers F       LLM.int8 feature: in at least this share of the layers (default: 0.25)\n"
        "  --int8-tokens F       ... with abs(x) >= alpha in at least this share of the tokens (default: 0.06);\n"
        "                        alpha is the probe's --alpha, stored in the dump\n"
        "  --channels            the whole per-channel max profile as a long table (layer, channel)\n"
        "  --quant-stats         instead: the statistics quantization engineers read (docs/outliers.md\n"
        "                        \"Quantization statistics\"): per layer and linear-layer input mean, std,\n"
        "                        skewness, kurtosis (excess and Pearson), normalised entropy, energy\n"
        "                        (probe --quant-stats); the residual stream layer to layer (probe\n"
        "                        --save-hidden); Sink_k (probe --maps); the Q/K massive-values map;\n"
        "                        --plot draws them\n"
        "  --sink-eps X          the threshold of Sink_k, 0 <= X <= 1 (default: 0.3)\n"
        "\n"
        "output\n"
        "  --format FMT          table, csv, json or markdown (default: table)\n"
        "  --plot FILE           per-layer top-1 and median on a log axis, one panel per activation;\n"
        "                        PNG, SVG or PDF by the extension (.png, .svg, .pdf)\n"
        "                        (default: no plot)\n"
        "  --width IN            plot width in inches, 0 < IN <= 100 (3.3 = one column, 7 = two):\n"
        "                        SVG/PDF get that size, PNG is 300 dpi (default: 12 in; PNG 1800 pixels)\n"
        "  --font FAMILY         font family of the plot (default: DejaVu Sans)\n"
        "  --force               overwrite an existing plot\n"
        "  --help                this text\n"
        "  --version             the version of difflens\n"
        "\n"
        "exit status: 0 done, 1 runtime error (unreadable dump, no outlier statistics), 2 usage error\n");
}

enum {
    O_LABELS = 256,
    O_TOP,
    O_PER_LAYER,
    O_MASSIVE_ABS,
    O_MASSIVE_RATIO,
    O_PER_HEAD,
    O_QUANT,
    O_BITS,
    O_INT8_LAYERS,
    O_INT8_TOKENS,
    O_CHANNELS,
    O_FORMAT,
    O_PLOT,
    O_FORCE,
    O_HELP,
    O_WIDTH,
    O_FONT,
    O_QSTATS,
    O_SINK_EPS
};
static const struct option opts[] = {{"labels", required_argument, 0, O_LABELS},
                                     {"top", required_argument, 0, O_TOP},
                                     {"per-layer", no_argument, 0, O_PER_LAYER},
                                     {"massive-abs", required_argument, 0, O_MASSIVE_ABS},
                                     {"massive-ratio", required_argument, 0, O_MASSIVE_RATIO},
                                     {"per-head", no_argument, 0, O_PER_HEAD},
                                     {"quant", no_argument, 0, O_QUANT},
                                     {"bits", required_argument, 0, O_BITS},
                                     {"int8-layers", required_argument, 0, O_INT8_LAYERS},
                                     {"int8-tokens", required_argument, 0, O_INT8_TOKENS},
                                     {"channels", no_argument, 0, O_CHANNELS},
                                     {"format", required_argument, 0, O_FORMAT},
                                     {"plot", required_argument, 0, O_PLOT},
                                     {"force", no_argument, 0, O_FORCE},
                                     {"help", no_argument, 0, O_HELP},
                                     {"width", required_argument, 0, O_WIDTH},
                                     {"font", required_argument, 0, O_FONT},
                                     {"quant-stats", no_argument, 0, O_QSTATS},
                                     {"sink-eps", required_argument, 0, O_SINK_EPS},
                                     DFL_CLI_COMMON_OPTIONS,
                                     {0, 0, 0, 0}};

/* What the command line asks for: the library's parameters and the output format.
 * labels is the one block dfl_cli_split made for --labels (p.labels point into it). */
typedef struct cli {
    dfl_outliers_params p;
    dfl_report_format fmt;
    char **labels;
    int n_labels;
    int qstats;      /* --quant-stats: outliers_quant.h instead of the Table-5 report */
    double sink_eps; /* --sink-eps */
} cli;

/* One flag (O_*, not --help) and its argument into c. DFL_ERR_USAGE naming the flag. */
static dfl_status apply_flag(cli *c, int opt, const char *arg, dfl_error *err)
{
    dfl_outliers_params *p = &c->p;
    int64_t list[DFL_OUTLIERS_MAX_RANKS];
    int n;
    dfl_status s = DFL_OK;
    switch (opt) {
    case O_LABELS: {
        free(c->labels);
        c->labels = NULL;
        size_t k = 0;
        if ((s = dfl_cli_split("--labels", arg, DFL_OUTLIERS_MAX_DUMPS, &c->labels, &k, err))) return s;
        c->n_labels = (int)k;
        for (size_t i = 0; i < k; i++)
            p->labels[i] = c->labels[i];
        break;
    }
    case O_TOP:
        if ((s = dfl_outliers_parse_list("--top", arg, 1, DFL_TOPK_MAX, list, DFL_OUTLIERS_MAX_RANKS, &n, err)))
            return s;
        memcpy(p->ranks, list, sizeof(int64_t) * (size_t)n);
        p->n_ranks = n;
        break;
    case O_PER_LAYER: p->per_layer = 1; break;
    case O_MASSIVE_ABS: s = dfl_cli_double("--massive-abs", arg, 0, 1e30, &p->massive_abs, err); break;
    case O_MASSIVE_RATIO: s = dfl_cli_double("--massive-ratio", arg, 0, 1e30, &p->massive_ratio, err); break;
    case O_PER_HEAD: p->per_head = 1; break;
    case O_QUANT: p->quant = 1; break;
    case O_BITS:
        if ((s = dfl_outliers_parse_list("--bits", arg, 2, 16, list, DFL_OUTLIERS_MAX_BITS, &n, err))) return s;
        for (int i = 0; i < n; i++)
            p->bits[i] = (int)list[i];
        p->nbits = n;
        p->quant = 1;
        break;
    case O_INT8_LAYERS: s = dfl_cli_double("--int8-layers", arg, 1e-9, 1, &p->int8_layers, err); break;
    case O_INT8_TOKENS: s = dfl_cli_double("--int8-tokens", arg, 1e-9, 1, &p->int8_tokens, err); break;
    case O_CHANNELS: p->channels = 1; break;
    case O_FORMAT: s = dfl_report_format_parse(arg, &c->fmt, err); break;
    case O_PLOT: {
        dfl_format pf; /* the plot's format comes from its extension: checked now */
        if ((s = dfl_format_of_path(arg, &pf, err))) return s;
        p->plot_path = arg;
        break;
    }
    case O_WIDTH: s = dfl_plot_width_parse(arg, &p->paper.width_in, err); break;
    case O_FONT: p->paper.font = arg; break;
    case O_FORCE: p->overwrite = 1; break;
    case O_QSTATS: c->qstats = 1; break;
    case O_SINK_EPS: s = dfl_cli_double("--sink-eps", arg, 0, 1, &c->sink_eps, err); break;
    }
    return s;
}

/* argv into c (flags, then the dumps). -1 to go on and run; otherwise the exit status,
 * with its message printed: 0 after --help, 2 for a usage error. */
static int parse_args(int argc, char **argv, cli *c)
{
    dfl_error err = {DFL_OK, ""};
    int opt;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (opt == O_HELP) {
            usage(stdout);
            return 0;
        }
        if (opt == DFL_CLI_OPT_VERSION || opt == DFL_CLI_OPT_LIST) return dfl_cli_common(stdout, "outliers", opt, opts);
        if (opt == '?' || opt < O_LABELS) {
            usage(stderr);
            return 2;
        }
        if (apply_flag(c, opt, optarg, &err)) {
            fprintf(stderr, "outliers: %s\n", err.msg);
            return 2;
        }
    }
    for (; optind < argc; optind++) {
        if (c->p.n_dumps == DFL_OUTLIERS_MAX_DUMPS) {
            fprintf(stderr, "outliers: at most %d dumps\n", DFL_OUTLIERS_MAX_DUMPS);
            return 2;
        }
        c->p.dumps[c->p.n_dumps++] = argv[optind];
    }
    if (!c->p.n_dumps) {
        fprintf(stderr, "outliers: no dump given (usage: outliers A.h5 [B.h5 ...]; see --help)\n");
        return 2;
    }
    if (c->labels && c->n_labels != c->p.n_dumps) {
        fprintf(stderr, "outliers: --labels names %d dump%s but %d %s given\n", c->n_labels,
                c->n_labels == 1 ? "" : "s", c->p.n_dumps, c->p.n_dumps == 1 ? "is" : "are");
        return 2;
    }
    return -1;
}

/* Pool the dumps, print the report in c->fmt on stdout (and write the plot); the exit
 * status (0, or the status's: 1 runtime error, 2 usage error). */
static int run(const cli *c)
{
    dfl_error err = {DFL_OK, ""};
    dfl_report *rep = NULL;
    dfl_status s = dfl__check_not_input(c->p.plot_path, c->p.dumps, (size_t)c->p.n_dumps, &err);
    if (!s && c->qstats) {
        dfl_outliers_quant_params q = {c->p.dumps,  (size_t)c->p.n_dumps, c->labels ? c->p.labels : NULL,
                                       c->sink_eps, c->p.plot_path,       c->p.overwrite,
                                       &c->p.paper};
        s = dfl_outliers_quant_run(&q, &rep, &err);
    } else if (!s) {
        s = dfl_outliers_run(&c->p, &rep, &err);
    }
    if (!s) s = dfl_report_write(rep, c->fmt, stdout, &err);
    dfl_report_destroy(rep);
    if (s) {
        fprintf(stderr, "outliers: %s\n", err.msg);
        return dfl_status_exit_code(s);
    }
    return 0;
}

int main(int argc, char **argv)
{
    dfl_cli_catch_signals(on_signal);
    cli c = {dfl_outliers_params_default(), DFL_REPORT_TABLE, NULL, 0, 0, 0.3};
    int rc = parse_args(argc, argv, &c);
    if (rc < 0) rc = run(&c);
    free(c.labels);
    return rc;
}
