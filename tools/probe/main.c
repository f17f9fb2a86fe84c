/* probe — instrumented forward pass: model + prompts → HDF5 dump. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "probe.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: probe --model DIR --prompts FILE.jsonl --out FILE.h5 [options]\n"
            "\n"
            "Runs a llama, diff_transformer or diffllama model over every prompt and writes\n"
            "what happens inside to an HDF5 dump (see docs/format.md).\n"
            "\n"
            "  --model DIR         model directory: config.json + model.safetensors (or shards)\n"
            "  --prompts FILE      prompts, JSON Lines (docs/format.md \"Prompt format\")\n"
            "  --out FILE          dump to write (never overwritten without --force)\n"
            "  --maps all|none     attention maps of every layer, head and row (default: none)\n"
            "  --map-dtype f16|f32 element type of stored maps (default: f16)\n"
            "  --save-logits       also store logits [T, vocab] per sample (default: off)\n"
            "  --threads N         threads for kernels and BLAS (default: OMP_NUM_THREADS or all cores)\n"
            "  --force             overwrite an existing --out\n"
            "  --quiet             no progress bar and no summary\n"
            "  --help              this text\n");
}

typedef struct tool_state {
    const char *prompts;
    dfl_progress bar;
} tool_state;

static void on_warn(void *user, const char *msg)
{
    (void)user;
    fprintf(stderr, "probe: warning: %s\n", msg);
}

static void on_progress(void *user, const dfl_probe_progress *pg)
{
    tool_state *st = user;
    double rate = pg->elapsed > 0 ? (double)pg->tokens_done / pg->elapsed : 0;
    double eta = rate > 0 ? (double)(pg->tokens_total - pg->tokens_done) / rate : -1;
    dfl_progress_update(&st->bar, (double)pg->sample, (double)pg->samples, "samples", rate, "tok", eta);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"prompts", required_argument, 0, 'p'},
        {"out", required_argument, 0, 'o'},     {"maps", required_argument, 0, 'M'},
        {"map-dtype", required_argument, 0, 'D'}, {"save-logits", no_argument, 0, 'L'},
        {"threads", required_argument, 0, 't'}, {"force", no_argument, 0, 'f'},
        {"quiet", no_argument, 0, 'q'},         {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    dfl_probe_params p = dfl_probe_params_default();
    dfl_error err = {DFL_OK, ""};
    int64_t threads = 0;
    int quiet = 0, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': p.model_dir = optarg; break;
        case 'p': p.prompts_path = optarg; break;
        case 'o': p.out_path = optarg; break;
        case 'M':
            if (!strcmp(optarg, "all")) p.maps = DFL_MAPS_ALL;
            else if (!strcmp(optarg, "none")) p.maps = DFL_MAPS_NONE;
            else {
                fprintf(stderr, "probe: --maps: '%s' is not all or none\n", optarg);
                return 2;
            }
            break;
        case 'D':
            if (strcmp(optarg, "f16") && strcmp(optarg, "f32")) {
                fprintf(stderr, "probe: --map-dtype: '%s' is not f16 or f32\n", optarg);
                return 2;
            }
            p.map_f16 = !strcmp(optarg, "f16");
            break;
        case 'L': p.save_logits = 1; break;
        case 't':
            if (dfl_cli_int("--threads", optarg, 1, 1024, &threads, &err)) {
                fprintf(stderr, "probe: %s\n", err.msg);
                return 2;
            }
            break;
        case 'f': p.overwrite = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "probe: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!p.model_dir || !p.prompts_path || !p.out_path) {
        fprintf(stderr, "probe: --model, --prompts and --out are required (see --help)\n");
        return 2;
    }
    dfl_cli_set_threads((int)threads);

    tool_state st = {p.prompts_path, dfl_progress_start(stderr, "probe", quiet)};
    p.user = &st;
    p.warn = on_warn;
    p.progress = on_progress;
    dfl_probe_report rep;
    dfl_status s = dfl_probe_run(&p, &rep, &err);
    dfl_progress_end(&st.bar);
    if (s) {
        fprintf(stderr, "probe: %s\n", err.msg);
        return dfl_status_exit_code(s);
    }
    if (!quiet)
        fprintf(stderr, "probe: wrote %s: %zu samples, %lld tokens, forward %.3f s (%.0f tok/s, %.2f GFLOP/s)\n",
                p.out_path, rep.samples, (long long)rep.tokens, rep.forward_seconds,
                rep.forward_seconds > 0 ? (double)rep.tokens / rep.forward_seconds : 0.0,
                rep.forward_seconds > 0 ? rep.flops / rep.forward_seconds * 1e-9 : 0.0);
    return 0;
}
