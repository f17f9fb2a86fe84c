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
    fprintf(out,
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

static int bad(const dfl_error *err)
{
    fprintf(stderr, "outliers: %s\n", err->msg);
    return 2;
}

int main(int argc, char **argv)
{
    dfl_cli_catch_signals(on_signal);
    enum { O_LABELS = 256, O_TOP, O_PER_LAYER, O_MASSIVE_ABS, O_MASSIVE_RATIO, O_PER_HEAD, O_QUANT, O_BITS,
           O_INT8_LAYERS, O_INT8_TOKENS, O_CHANNELS, O_FORMAT, O_PLOT, O_FORCE, O_HELP, O_WIDTH, O_FONT };
    static const struct option opts[] = {
        {"labels", required_argument, 0, O_LABELS},
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
        DFL_CLI_COMMON_OPTIONS,
        {0, 0, 0, 0}};
    dfl_outliers_params p = dfl_outliers_params_default();
    dfl_report_format fmt = DFL_REPORT_TABLE;
    dfl_error err = {DFL_OK, ""};
    char **labels = NULL; /* one block (dfl_cli_split) */
    int c, n_labels = 0;
    int64_t list[DFL_OUTLIERS_MAX_RANKS];
    int n;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_LABELS: {
            free(labels);
            size_t k = 0;
            if (dfl_cli_split("--labels", optarg, DFL_OUTLIERS_MAX_DUMPS, &labels, &k, &err)) {
                fprintf(stderr, "outliers: %s\n", err.msg);
                return 2;
            }
            n_labels = (int)k;
            for (size_t i = 0; i < k; i++) p.labels[i] = labels[i];
            break;
        }
        case O_TOP:
            if (dfl_outliers_parse_list("--top", optarg, 1, DFL_TOPK_MAX, list, DFL_OUTLIERS_MAX_RANKS, &n, &err))
                goto usage_error;
            memcpy(p.ranks, list, sizeof(int64_t) * (size_t)n);
            p.n_ranks = n;
            break;
        case O_PER_LAYER: p.per_layer = 1; break;
        case O_MASSIVE_ABS:
            if (dfl_cli_double("--massive-abs", optarg, 0, 1e30, &p.massive_abs, &err)) goto usage_error;
            break;
        case O_MASSIVE_RATIO:
            if (dfl_cli_double("--massive-ratio", optarg, 0, 1e30, &p.massive_ratio, &err)) goto usage_error;
            break;
        case O_PER_HEAD: p.per_head = 1; break;
        case O_QUANT: p.quant = 1; break;
        case O_BITS:
            if (dfl_outliers_parse_list("--bits", optarg, 2, 16, list, DFL_OUTLIERS_MAX_BITS, &n, &err))
                goto usage_error;
            for (int i = 0; i < n; i++) p.bits[i] = (int)list[i];
            p.nbits = n;
            p.quant = 1;
            break;
        case O_INT8_LAYERS:
            if (dfl_cli_double("--int8-layers", optarg, 1e-9, 1, &p.int8_layers, &err)) goto usage_error;
            break;
        case O_INT8_TOKENS:
            if (dfl_cli_double("--int8-tokens", optarg, 1e-9, 1, &p.int8_tokens, &err)) goto usage_error;
            break;
        case O_CHANNELS: p.channels = 1; break;
        case O_FORMAT:
            if (dfl_report_format_parse(optarg, &fmt, &err)) goto usage_error;
            break;
        case O_PLOT: {
            dfl_format pf; /* the plot's format comes from its extension: checked now */
            if (dfl_format_of_path(optarg, &pf, &err)) goto usage_error;
            p.plot_path = optarg;
            break;
        }
        case O_WIDTH:
            if (dfl_plot_width_parse(optarg, &p.paper.width_in, &err)) goto usage_error;
            break;
        case O_FONT: p.paper.font = optarg; break;
        case O_FORCE: p.overwrite = 1; break;
        case O_HELP: usage(stdout); free(labels); return 0;
        case DFL_CLI_OPT_VERSION: case DFL_CLI_OPT_LIST: free(labels); return dfl_cli_common(stdout, "outliers", c, opts);
        default: usage(stderr); free(labels); return 2;
        }
    }
    for (; optind < argc; optind++) {
        if (p.n_dumps == DFL_OUTLIERS_MAX_DUMPS) {
            fprintf(stderr, "outliers: at most %d dumps\n", DFL_OUTLIERS_MAX_DUMPS);
            free(labels);
            return 2;
        }
        p.dumps[p.n_dumps++] = argv[optind];
    }
    if (!p.n_dumps) {
        fprintf(stderr, "outliers: no dump given (usage: outliers A.h5 [B.h5 ...]; see --help)\n");
        free(labels);
        return 2;
    }
    if (labels && n_labels != p.n_dumps) {
        fprintf(stderr, "outliers: --labels names %d dump%s but %d %s given\n", n_labels, n_labels == 1 ? "" : "s",
                p.n_dumps, p.n_dumps == 1 ? "is" : "are");
        free(labels);
        return 2;
    }

    dfl_report *rep = NULL;
    dfl_status s = dfl__check_not_input(p.plot_path, p.dumps, (size_t)p.n_dumps, &err);
    if (!s) s = dfl_outliers_run(&p, &rep, &err);
    if (!s) s = dfl_report_write(rep, fmt, stdout, &err);
    dfl_report_destroy(rep);
    free(labels);
    if (s) {
        fprintf(stderr, "outliers: %s\n", err.msg);
        return dfl_status_exit_code(s);
    }
    return 0;

usage_error:
    free(labels);
    return bad(&err);
}
