/* attnmap — attention heatmaps from a dump as PNG, SVG or PDF (docs/attnmap.md). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "render/attnmap.h"
#include "base/atomic.h"
#include "base/cli.h"

/* SIGINT/SIGTERM/SIGHUP: remove this process's temporary files, say so, exit 128+sig. */
static void on_signal(int sig)
{
    dfl__tmp_unlink_all();
    dfl_cli_signal_note("attnmap", sig);
    _exit(128 + sig);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: attnmap DUMP.h5 -o OUT.png|OUT.svg|OUT.pdf [options]\n"
                 "\n"
                 "Draws attention maps that `probe --maps` stored in a dump as a heatmap figure: one map,\n"
                 "a grid of heads, layers or maps, or two dumps side by side (see docs/attnmap.md).\n"
                 "The format follows the extension: PNG, or SVG and PDF with vector text and axes and\n"
                 "each map as one image of its cells (nearest-neighbour, never smoothed).\n"
                 "\n"
                 "what to draw\n"
                 "  -o, --out FILE        .png, .svg or .pdf to write (never overwritten without --force)\n"
                 "  --sample ID|INDEX     sample id, or else its index (default: the first sample)\n"
                 "  --caption N           DiffCLIP / CLIP dumps: caption N's text-tower map (causal, with\n"
                 "                        its token labels) instead of the image (default: the image)\n"
                 "  --layer L|all         layer number, or a tile per captured layer (default: the first captured)\n"
                 "  --head H|all|mean     head number, a tile per captured head, or their mean\n"
                 "                        (default: the first captured)\n"
                 "  --map map1|map2|diff|all\n"
                 "                        which map; all = map1 | map2 | diff of a Diff dump\n"
                 "                        (default: diff for Diff dumps, map1 (softmax) otherwise)\n"
                 "  --layers, --heads, --maps  the same flags under their plural names\n"
                 "  --vs OTHER.h5         the same sample, layer and head of a second dump beside it,\n"
                 "                        on one colour scale (the samples' tokens must match)\n"
                 "  --labels A,B          names of the two dumps (default: their model types)\n"
                 "  --delta               with --vs: one map of DUMP - OTHER on a diverging scale\n"
                 "  --rows A:B            query positions A <= q < B only (default: all captured rows)\n"
                 "  --cols C:D            key positions C <= k < D only (default: all keys)\n"
                 "\n"
                 "how to draw it\n"
                 "  --size N              pixels of a tile's longer side, 16 to 8192\n"
                 "                        (default: 1024 for one map, 512 per tile in grids)\n"
                 "  --pool mean|max       downsampling of large maps: area mean, or the entry farthest\n"
                 "                        from 0 so single sharp entries stay visible (default: mean)\n"
                 "  --cmap viridis|magma  sequential colormap (default: viridis); maps with negative\n"
                 "                        entries (diff, --delta) always use the diverging rdbu, centred at 0\n"
                 "  --scale linear|log|sqrt  value scale (default: linear; log is symmetric on diverging maps)\n"
                 "  --vmin X, --vmax X    colour limits (default: robust, the 99.5th percentile leaving out\n"
                 "                        bos keys; diverging scales use max(|vmin|, |vmax|))\n"
                 "  --no-token-labels     never print token text (default: printed when the dump has it\n"
                 "                        and a token's cell is at least 10 px)\n"
                 "  --width IN            lay the figure out for a width in inches, text at 8 pt, maps\n"
                 "                        sized to fit (3.3 = one paper column, 7 = two; --size ignored)\n"
                 "                        (default: none; tiles of --size units, 72 units per inch in\n"
                 "                        SVG and PDF)\n"
                 "  --dpi N               PNG pixels per inch, 50 to 2400 (default: 1 pixel per unit, or\n"
                 "                        300 with --width)\n"
                 "  --pixel-scale K       PNG pixels per unit when --dpi is not given, 0.25 to 16\n"
                 "                        (default: 1; --scale is the value scale)\n"
                 "  --font FAMILY         font family (default: DejaVu Sans); glyphs it lacks come from\n"
                 "                        other installed fonts, or show as a box with the code point\n"
                 "  --force               overwrite an existing output\n"
                 "  --quiet               no summary line\n"
                 "  --help                this text\n"
                 "  --version             the version of difflens\n");
}

static int bad(const dfl_error *err)
{
    fprintf(stderr, "attnmap: %s\n", err->msg);
    return 2;
}

/* "all", "mean" (when allowed) or a number in [0, 1e6]. */
static int parse_index(const char *flag, const char *text, int allow_mean, int64_t *out, dfl_error *err)
{
    if (!strcmp(text, "all"))
        *out = DFL_ATTNMAP_ALL;
    else if (allow_mean && !strcmp(text, "mean"))
        *out = DFL_ATTNMAP_MEAN;
    else if (dfl_cli_int(flag, text, 0, 1000000, out, err)) {
        snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg), "%s",
                 allow_mean ? ", all or mean" : " or all");
        return 1;
    }
    return 0;
}

enum {
    O_SAMPLE = 256,
    O_LAYER,
    O_HEAD,
    O_MAP,
    O_VS,
    O_LABELS,
    O_DELTA,
    O_ROWS,
    O_COLS,
    O_SIZE,
    O_POOL,
    O_CMAP,
    O_SCALE,
    O_VMIN,
    O_VMAX,
    O_NOTOK,
    O_FORCE,
    O_QUIET,
    O_HELP,
    O_WIDTH,
    O_DPI,
    O_PXSCALE,
    O_FONT,
    O_CAPTION
};

/* One option c with its argument into p (*labels: the --labels block, replaced).
 * Returns -1 to go on, else the exit code (0 after --help). */
static int parse_option(int c, dfl_attnmap_params *p, char ***labels, int *quiet, dfl_error *err)
{
    int rc = 0;
    int64_t v;
    switch (c) {
    case 'o': p->out_path = optarg; break;
    case O_SAMPLE: p->sample = optarg; break;
    case O_CAPTION:
        if (dfl_cli_int("--caption", optarg, 0, 1000000, &p->caption, err)) rc = bad(err);
        break;
    case O_LAYER:
        if (parse_index("--layer", optarg, 0, &p->layer, err)) return bad(err);
        break;
    case O_HEAD:
        if (parse_index("--head", optarg, 1, &p->head, err)) return bad(err);
        break;
    case O_MAP:
        if (dfl_attn_map_parse(optarg, &p->map, err) || p->map == DFL_ATTN_AUTO) {
            fprintf(stderr, "attnmap: --map: '%s' is not map1, map2, diff or all\n", optarg);
            return 2;
        }
        break;
    case O_VS: p->vs_path = optarg; break;
    case O_LABELS: {
        free(*labels);
        *labels = NULL;
        size_t k = 0;
        if (dfl_cli_split("--labels", optarg, 0, labels, &k, err) || k != 2) {
            fprintf(stderr, "attnmap: --labels: '%s' is not two names A,B\n", optarg);
            return 2; /* main frees *labels */
        }
        p->labels[0] = (*labels)[0];
        p->labels[1] = (*labels)[1];
        break;
    }
    case O_DELTA: p->delta = 1; break;
    case O_ROWS:
        if (dfl_attnmap_parse_range("--rows", optarg, p->rows, err)) rc = bad(err);
        p->has_rows = 1;
        break;
    case O_COLS:
        if (dfl_attnmap_parse_range("--cols", optarg, p->cols, err)) rc = bad(err);
        p->has_cols = 1;
        break;
    case O_SIZE:
        if (dfl_cli_int("--size", optarg, 16, 8192, &v, err)) rc = bad(err);
        p->size = (int)v;
        break;
    case O_POOL:
        if (dfl_pool_parse(optarg, &p->pool, err)) rc = bad(err);
        break;
    case O_CMAP:
        if (dfl_cmap_parse(optarg, &p->cmap, err))
            rc = bad(err);
        else if (dfl_cmap_is_diverging(p->cmap)) {
            fprintf(stderr,
                    "attnmap: --cmap: '%s' is diverging; it is chosen by itself for maps with negative "
                    "entries (use viridis or magma)\n",
                    optarg);
            rc = 2;
        }
        break;
    case O_SCALE:
        if (dfl_scale_parse(optarg, &p->scale, err)) rc = bad(err);
        break;
    case O_VMIN:
        if (dfl_cli_double("--vmin", optarg, -1e30, 1e30, &p->vmin, err)) rc = bad(err);
        p->has_vmin = 1;
        break;
    case O_VMAX:
        if (dfl_cli_double("--vmax", optarg, -1e30, 1e30, &p->vmax, err)) rc = bad(err);
        p->has_vmax = 1;
        break;
    case O_NOTOK: p->token_labels = 0; break;
    case O_WIDTH:
        if (dfl_cli_double("--width", optarg, 1.0, 100.0, &p->width_in, err)) rc = bad(err);
        break;
    case O_DPI:
        if (dfl_cli_double("--dpi", optarg, 50.0, 2400.0, &p->dpi, err)) rc = bad(err);
        break;
    case O_PXSCALE:
        if (dfl_cli_double("--pixel-scale", optarg, 0.25, 16.0, &p->px_scale, err)) rc = bad(err);
        break;
    case O_FONT: p->font = optarg; break;
    case O_FORCE: p->overwrite = 1; break;
    case O_QUIET: *quiet = 1; break;
    case O_HELP: usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
    return rc ? rc : -1;
}

/* The command line into p; the positional DUMP and the flags that need each other.
 * Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, dfl_attnmap_params *p, char ***labels, int *quiet)
{
    static const struct option opts[] = {{"out", required_argument, 0, 'o'},
                                         {"sample", required_argument, 0, O_SAMPLE},
                                         {"caption", required_argument, 0, O_CAPTION},
                                         {"layer", required_argument, 0, O_LAYER},
                                         {"layers", required_argument, 0, O_LAYER},
                                         {"head", required_argument, 0, O_HEAD},
                                         {"heads", required_argument, 0, O_HEAD},
                                         {"map", required_argument, 0, O_MAP},
                                         {"maps", required_argument, 0, O_MAP},
                                         {"vs", required_argument, 0, O_VS},
                                         {"labels", required_argument, 0, O_LABELS},
                                         {"delta", no_argument, 0, O_DELTA},
                                         {"rows", required_argument, 0, O_ROWS},
                                         {"cols", required_argument, 0, O_COLS},
                                         {"size", required_argument, 0, O_SIZE},
                                         {"pool", required_argument, 0, O_POOL},
                                         {"cmap", required_argument, 0, O_CMAP},
                                         {"scale", required_argument, 0, O_SCALE},
                                         {"vmin", required_argument, 0, O_VMIN},
                                         {"vmax", required_argument, 0, O_VMAX},
                                         {"no-token-labels", no_argument, 0, O_NOTOK},
                                         {"force", no_argument, 0, O_FORCE},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"help", no_argument, 0, O_HELP},
                                         {"width", required_argument, 0, O_WIDTH},
                                         {"dpi", required_argument, 0, O_DPI},
                                         {"pixel-scale", required_argument, 0, O_PXSCALE},
                                         {"font", required_argument, 0, O_FONT},
                                         DFL_CLI_COMMON_OPTIONS,
                                         {0, 0, 0, 0}};
    dfl_error err = {DFL_OK, ""};
    int c;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        if (c == DFL_CLI_OPT_VERSION || c == DFL_CLI_OPT_LIST) return dfl_cli_common(stdout, "attnmap", c, opts);
        int rc = parse_option(c, p, labels, quiet, &err);
        if (rc >= 0) return rc;
    }
    if (optind < argc) p->dump_path = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "attnmap: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!p->dump_path || !p->out_path) {
        fprintf(stderr, "attnmap: a dump and -o OUT.png|.svg|.pdf are required (see --help)\n");
        return 2;
    }
    if (p->delta && !p->vs_path) {
        fprintf(stderr, "attnmap: --delta needs --vs OTHER.h5\n");
        return 2;
    }
    if (p->labels[0] && !p->vs_path) {
        fprintf(stderr, "attnmap: --labels needs --vs OTHER.h5\n");
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    dfl_cli_catch_signals(on_signal);
    dfl_attnmap_params p = dfl_attnmap_params_default();
    char **labels = NULL; /* one block (dfl_cli_split) */
    int quiet = 0;
    int rc = parse_args(argc, argv, &p, &labels, &quiet);
    if (rc >= 0) {
        free(labels);
        return rc;
    }
    dfl_attnmap_report rep;
    dfl_error err = {DFL_OK, ""};
    dfl_status s = dfl_attnmap_run(&p, &rep, &err);
    free(labels);
    if (s) {
        fprintf(stderr, "attnmap: %s\n", err.msg);
        return dfl_status_exit_code(s);
    }
    if (!quiet)
        fprintf(stderr,
                "attnmap: wrote %s: %d x %d units (%.2f in wide), %d tile%s, colour limits %.4g to %.4g%s, %.3f s\n",
                p.out_path, rep.width, rep.height, rep.width_in, rep.tiles, rep.tiles == 1 ? "" : "s", rep.vmin,
                rep.vmax, rep.robust ? " (robust)" : "", rep.total_seconds);
    return 0;
}
