/* effects — causal-tracing heatmaps, head grids and logit-lens tables from dumps
 * (docs/effects.md). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/effects.h"
#include "base/atomic.h"
#include "base/cli.h"
#include "base/report.h"
#include "render/plot.h"

static void on_signal(int sig)
{
    dfl__tmp_unlink_all();
    dfl_cli_signal_note("effects", sig);
    _exit(128 + sig);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: effects trace DUMP.h5 [options]            causal-tracing heatmap of a patching sweep\n"
                 "       effects heads DUMP.h5 [DUMP2.h5 ...] [options]  head grid: layers x heads, one scale\n"
                 "       effects lens DUMP.h5 [options]             logit-lens table: layer x position\n"
                 "\n"
                 "Figures and tables of what probe's interventions and readouts measured (docs/effects.md).\n"
                 "trace: the patch/ sweep of one sample (ROME Figure 1: positions down, with their tokens,\n"
                 "layers across; site head: layers down, heads across), the normalised effect\n"
                 "(patched - corrupted) / (clean - corrupted). heads: per dump a panel of direct logit\n"
                 "attribution (dla/heads, mean over rows and samples), of a head-patching sweep's effect,\n"
                 "or of head ablations (effects/target_nll minus the unmodified run's), all panels on one\n"
                 "diverging colour scale. lens: the most probable token after each position as each\n"
                 "layer's residual reads it, with its probability (lens/, probe --logit-lens K).\n"
                 "\n"
                 "  --out FILE            the figure: PNG, SVG or PDF by the extension (default: none)\n"
                 "  --format table|csv|json|markdown  the table on stdout (default: table when no --out,\n"
                 "                        else none)\n"
                 "  --sample S            the sample (id or index) (default: trace, lens: 0; heads: the mean\n"
                 "                        over every sample)\n"
                 "  --source auto|dla|patch|ablation  heads: what the grid shows (default: auto = dla, else\n"
                 "                        patch, else ablation: the first the dump has)\n"
                 "  --positions LIST      lens: these positions only, e.g. 0,5-9 (default: all)\n"
                 "  --tokenizer PATH      lens: decode the top tokens with this tokenizer.json (or its\n"
                 "                        folder, or a GGUF file) (default: the dump's token_text, else ids)\n"
                 "  --labels A,B,...      names of the panels (default: file names without .h5)\n"
                 "  --vmax X              colour limit, X > 0 (default: the largest |value| of all panels;\n"
                 "                        lens: 1)\n"
                 "  --title TEXT          figure title (default: what the values are)\n"
                 "  --width IN            figure width in inches, 0 < IN <= 100 (default: natural size)\n"
                 "  --font FAMILY         font family (default: DejaVu Sans)\n"
                 "  --force               overwrite an existing --out\n"
                 "  --help                this text\n"
                 "  --version             the version of difflens\n"
                 "\n"
                 "Exit status: 0 ok, 1 runtime error (bad dump, missing data), 2 usage error.\n");
}

static int usage_error(const dfl_error *err)
{
    fprintf(stderr, "effects: %s\n", err->msg);
    return 2;
}

/* "dir/name.h5" -> "name" into buf. */
static const char *default_label(const char *path, char *buf, size_t cap)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(buf, cap, "%s", b);
    size_t n = strlen(buf);
    if (n > 3 && !strcmp(buf + n - 3, ".h5")) buf[n - 3] = '\0';
    return buf;
}

int main(int argc, char **argv)
{
    enum {
        O_OUT = 256,
        O_FORMAT,
        O_SAMPLE,
        O_SOURCE,
        O_POSITIONS,
        O_TOKENIZER,
        O_LABELS,
        O_VMAX,
        O_TITLE,
        O_WIDTH,
        O_FONT,
        O_FORCE,
        O_HELP
    };
    static const struct option opts[] = {{"out", required_argument, 0, O_OUT},
                                         {"format", required_argument, 0, O_FORMAT},
                                         {"sample", required_argument, 0, O_SAMPLE},
                                         {"source", required_argument, 0, O_SOURCE},
                                         {"positions", required_argument, 0, O_POSITIONS},
                                         {"tokenizer", required_argument, 0, O_TOKENIZER},
                                         {"labels", required_argument, 0, O_LABELS},
                                         {"vmax", required_argument, 0, O_VMAX},
                                         {"title", required_argument, 0, O_TITLE},
                                         {"width", required_argument, 0, O_WIDTH},
                                         {"font", required_argument, 0, O_FONT},
                                         {"force", no_argument, 0, O_FORCE},
                                         {"help", no_argument, 0, O_HELP},
                                         DFL_CLI_COMMON_OPTIONS,
                                         {0, 0, 0, 0}};
    dfl_error err = {DFL_OK, ""};
    dfl_effects_style st = dfl_effects_style_default();
    dfl_effects_source src = DFL_EFFECTS_AUTO;
    dfl_report_format fmt = DFL_REPORT_TABLE;
    const char *out = NULL, *sample = NULL, *tokenizer = NULL;
    char **labels = NULL;
    size_t n_labels = 0, n_pos = 0;
    int64_t *positions = NULL;
    int has_format = 0, force = 0, c, rc = 0;
    dfl_status s = DFL_OK;
    while (!s && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_OUT: out = optarg; break;
        case O_FORMAT:
            s = dfl_report_format_parse(optarg, &fmt, &err);
            has_format = 1;
            break;
        case O_SAMPLE: sample = optarg; break;
        case O_SOURCE: s = dfl_effects_source_parse(optarg, &src, &err); break;
        case O_POSITIONS:
            free(positions);
            s = dfl_cli_index_list("--positions", optarg, &positions, &n_pos, &err);
            break;
        case O_TOKENIZER: tokenizer = optarg; break;
        case O_LABELS:
            free(labels);
            s = dfl_cli_split("--labels", optarg, 0, &labels, &n_labels, &err);
            break;
        case O_VMAX: s = dfl_cli_double("--vmax", optarg, 1e-30, 1e30, &st.vmax, &err); break;
        case O_TITLE: st.title = optarg; break;
        case O_WIDTH: s = dfl_plot_width_parse(optarg, &st.width_in, &err); break;
        case O_FONT: st.font = optarg; break;
        case O_FORCE: force = 1; break;
        case O_HELP:
            usage(stdout);
            free(positions), free(labels);
            return 0;
        case DFL_CLI_OPT_VERSION:
        case DFL_CLI_OPT_LIST: free(positions), free(labels); return dfl_cli_common(stdout, "effects", c, opts);
        default:
            usage(stderr);
            free(positions), free(labels);
            return 2;
        }
    }
    const char *cmd = optind < argc ? argv[optind] : NULL;
    int ndumps = argc - optind - 1;
    if (!s && !cmd)
        s = dfl__fail(&err, DFL_ERR_USAGE, "a command is required: trace, heads or lens (see --help)");
    else if (!s && strcmp(cmd, "trace") && strcmp(cmd, "heads") && strcmp(cmd, "lens"))
        s = dfl__fail(&err, DFL_ERR_USAGE, "unknown command '%s' (trace, heads or lens)", cmd);
    else if (!s && ndumps < 1)
        s = dfl__fail(&err, DFL_ERR_USAGE, "%s: a dump is required", cmd);
    else if (!s && strcmp(cmd, "heads") && ndumps > 1)
        s = dfl__fail(&err, DFL_ERR_USAGE, "%s takes one dump (got %d)", cmd, ndumps);
    else if (!s && ndumps > 16)
        s = dfl__fail(&err, DFL_ERR_USAGE, "at most 16 dumps (got %d)", ndumps);
    else if (!s && labels && n_labels != (size_t)ndumps)
        s = dfl__fail(&err, DFL_ERR_USAGE, "--labels names %zu panels for %d dumps", n_labels, ndumps);
    else if (!s && (positions || tokenizer) && strcmp(cmd, "lens"))
        s = dfl__fail(&err, DFL_ERR_USAGE, "--positions and --tokenizer are for lens");
    else if (!s && src != DFL_EFFECTS_AUTO && strcmp(cmd, "heads"))
        s = dfl__fail(&err, DFL_ERR_USAGE, "--source is for heads");
    if (s) {
        free(positions), free(labels);
        return usage_error(&err);
    }
    dfl_cli_catch_signals(on_signal);
    dfl_effects_grid grids[16];
    memset(grids, 0, sizeof grids);
    int n = 0;
    for (int k = 0; k < ndumps && !s; k++, n++) {
        const char *path = argv[optind + 1 + k];
        char buf[256];
        const char *label = labels ? labels[k] : default_label(path, buf, sizeof buf);
        if (!strcmp(cmd, "trace"))
            s = dfl_effects_trace(path, sample, label, &grids[k], &err);
        else if (!strcmp(cmd, "heads"))
            s = dfl_effects_heads(path, src, sample, label, &grids[k], &err);
        else
            s = dfl_effects_lens(path, sample, positions, n_pos, tokenizer, label, &grids[k], &err);
    }
    if (!s && !strcmp(cmd, "lens")) {
        st.diverging = 0;
        if (st.vmax == 0) st.vmax = 1.0;
    }
    if (!s && out) s = dfl_effects_draw(grids, n, &st, out, force, &err);
    if (!s && (has_format || !out)) s = dfl_effects_table(grids, n, fmt, stdout, &err);
    if (s) {
        fprintf(stderr, "effects: %s\n", err.msg);
        rc = dfl_status_exit_code(s);
    }
    for (int k = 0; k < n; k++)
        dfl_effects_grid_free(&grids[k]);
    free(positions), free(labels);
    return rc;
}
