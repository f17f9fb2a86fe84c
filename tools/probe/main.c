/* probe — instrumented forward pass: model + prompts → HDF5 dump. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/cli.h"
#include "model/hub.h"
#include "model/kernels.h"
#include "analysis/probe.h"
#include "analysis/probe_effects.h"
#include "analysis/stats.h"
#include "cluster/probe_mpi.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: probe --model DIR --prompts FILE.jsonl --out FILE.h5 [options]\n"
                 "       mpirun -np N probe … (the same flags: prompts split over N ranks, one dump)\n"
                 "\n"
                 "Runs a llama (or qwen2, qwen3, mistral), diff_transformer or diffllama model over\n"
                 "every prompt and writes what happens inside to an HDF5 dump (see docs/format.md\n"
                 "and docs/probe.md).\n"
                 "\n"
                 "  --model DIR            model directory: config.json + model.safetensors (or shards)\n"
                 "                         or a GGUF file (FILE.gguf, split files by any part)\n"
                 "                         or ORG/NAME[@REVISION]: a model in the local Hugging Face cache\n"
                 "                         (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub; default\n"
                 "                         revision main); never downloaded: probe does no network access\n"
                 "  --prompts FILE         prompts, JSON Lines (docs/format.md \"Prompt format\"): token\n"
                 "                         prompts, or text prompts (\"input\", docs/tokenize.md)\n"
                 "                         or chat prompts (\"messages\", rendered with DIR's chat template)\n"
                 "  --tokenizer PATH       tokenizer.json (or its folder) for text prompts; also labels\n"
                 "                         token prompts without \"text\" (default: DIR/tokenizer.json,\n"
                 "                         read only when a prompt has \"input\")\n"
                 "  --out FILE             dump to write (never overwritten without --force)\n"
                 "  --maps SEL             attention maps to store: none, all, or e.g.\n"
                 "                         'layers=0,3-5;heads=all;rows=analysis' (default: none)\n"
                 "  --map-dtype f16|f32    element type of stored maps (default: f16)\n"
                 "  --map-compression none|gzip[:LEVEL]\n"
                 "                         map tiles raw, or shuffle + deflate at LEVEL 0-9; level 1\n"
                 "                         deflates only the high byte planes (fast; docs/probe.md)\n"
                 "                         (default: gzip:1; gzip alone means gzip:1)\n"
                 "  --rows RULE            analysis rows for the noise shares: last, query, target, all\n"
                 "                         (default: last = last token of the last query span)\n"
                 "  --topk K               length of the outlier top lists (default: 100)\n"
                 "  --alpha A              hidden channel outlier threshold, |x| >= A (default: 6)\n"
                 "  --quantize-logits B[:G] fake-quantize attention logits to B bits (2-16), absmax per\n"
                 "                         G = tensor|head|row (default: off; G defaults to tensor)\n"
                 "  --save-logits          also store logits [T, vocab] per sample (default: off)\n"
                 "  --intervene SPEC       an intervention run beside the unmodified pass, its metrics in\n"
                 "                         effects/ (repeatable; docs/probe.md \"Interventions\"): e.g.\n"
                 "                         ablate:layer=3,head=1,mode=zero  lambda:layer=all,value=0\n"
                 "                         map:layer=2,use=map2  knockout:layer=0-3,from=last,to=answer\n"
                 "                         patch:site=resid_pre,layer=2,pos=query,source=clean\n"
                 "  --interventions FILE   a JSON array of such SPEC strings\n"
                 "  --patch-sweep SPEC     every (layer, position) or (layer, head) cell patched from\n"
                 "                         source=PROMPT into the other prompts, into patch/: e.g.\n"
                 "                         site=resid_pre,source=clean,metric=target_prob\n"
                 "  --logit-diff A,B       also the logit difference of tokens A and B (ids or strings)\n"
                 "  --apply SPEC           lambda, map or ablate (zero/mean) on every pass, the main one\n"
                 "                         included: maps, shares and NLL of the modified model\n"
                 "  --allow-unused         run even if the checkpoint holds tensors the model does not\n"
                 "                         use, with a warning listing them (default: refused)\n"
                 "  --threads N            threads for kernels and BLAS (default: OMP_NUM_THREADS or all cores;\n"
                 "                         under MPI: per rank)\n"
                 "  --strict               a NaN or Inf in the forward pass is an error (default: a warning,\n"
                 "                         recorded in the dump)\n"
                 "  --force                overwrite an existing --out; run even when the projected dump\n"
                 "                         exceeds the free space of its file system\n"
                 "  --quiet                no progress bar and no summary\n"
                 "  --log-every S          under MPI: a progress line every S seconds (default: 10)\n"
                 "  --help                 this text\n"
                 "  --version              the version of difflens\n"
                 "\n"
                 "Started by mpirun or srun, each rank runs a share of the prompts balanced by cost\n"
                 "into a part beside --out (.NAME.partRofN.h5); rank 0 joins them into --out and\n"
                 "alone prints progress and errors (docs/cluster.md).\n");
}

/* SIGINT/SIGTERM/SIGHUP: the first raises the flag the library polls per layer (it
 * then stops and removes its temporary file); a second one, if the run is stuck
 * elsewhere (loading a model), removes the temporaries at once and exits. */
static volatile sig_atomic_t g_signal = 0;

static void on_signal(int sig)
{
    if (g_signal) {
        dfl__tmp_unlink_all();
        _exit(128 + sig);
    }
    g_signal = sig;
}

static const char *signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

/* Under MPI stderr reaches the user through the launcher (a pipe, a Slurm log), so
 * progress is a line every --log-every seconds instead of a bar redrawn in place. */
typedef struct tool_state {
    dfl_progress bar;
    int log_lines;    /* MPI rank 0, not --quiet */
    double log_every; /* seconds between lines */
    double last_line; /* elapsed seconds at the last line */
} tool_state;

static void log_line(tool_state *st, const dfl_probe_progress *pg, double rate, double eta)
{
    if (st->last_line > 0 && pg->elapsed - st->last_line < st->log_every) return;
    st->last_line = pg->elapsed;
    fprintf(stderr, "probe: %zu/%zu samples, %lld/%lld tokens, %.0f tok/s", pg->sample, pg->samples,
            (long long)pg->tokens_done, (long long)pg->tokens_total, rate);
    if (eta >= 0) fprintf(stderr, ", ETA %.0f s", eta);
    fprintf(stderr, "\n");
}

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
    if (st->log_lines) {
        log_line(st, pg, rate, eta);
        return;
    }
    char label[64];
    snprintf(label, sizeof label, "probe layer %lld/%lld", (long long)pg->layer + 1, (long long)pg->layers);
    st->bar.label = pg->sample < pg->samples ? label : "probe";
    dfl_progress_update(&st->bar, (double)pg->sample, (double)pg->samples, "samples", rate, "tok", eta);
}

/* "B" or "B:tensor|head|row" */
static dfl_status parse_quant(const char *text, dfl_forward_opts *o, dfl_error *err)
{
    char bits[16];
    const char *colon = strchr(text, ':');
    size_t n = colon ? (size_t)(colon - text) : strlen(text);
    if (n >= sizeof bits)
        return dfl__fail(err, DFL_ERR_USAGE, "--quantize-logits: '%s' is not BITS[:GRANULARITY]", text);
    memcpy(bits, text, n);
    bits[n] = '\0';
    int64_t b;
    dfl_status s = dfl_cli_int("--quantize-logits", bits, 2, 16, &b, err);
    if (s) return s;
    o->quant_bits = (int)b;
    o->quant_granularity = DFL_QUANT_TENSOR;
    if (!colon || !strcmp(colon + 1, "tensor")) return DFL_OK;
    if (!strcmp(colon + 1, "head"))
        o->quant_granularity = DFL_QUANT_HEAD;
    else if (!strcmp(colon + 1, "row"))
        o->quant_granularity = DFL_QUANT_ROW;
    else
        return dfl__fail(err, DFL_ERR_USAGE, "--quantize-logits: granularity '%s' is not tensor, head or row",
                         colon + 1);
    return DFL_OK;
}

/* "none", "gzip" or "gzip:LEVEL" (0-9) -> -1 or the level */
static dfl_status parse_compression(const char *text, int *gzip, dfl_error *err)
{
    int64_t level = 1; /* the default: docs/probe.md has the table it comes from */
    if (!strcmp(text, "none")) {
        *gzip = -1;
        return DFL_OK;
    }
    if (strncmp(text, "gzip", 4) || (text[4] && text[4] != ':'))
        return dfl__fail(err, DFL_ERR_USAGE, "--map-compression: '%s' is not none, gzip or gzip:LEVEL", text);
    dfl_status s = text[4] ? dfl_cli_int("--map-compression gzip level", text + 5, 0, 9, &level, err) : DFL_OK;
    if (!s) *gzip = (int)level;
    return s;
}

/* The whole tool; under MPI every rank runs it and only rank 0 prints. */
static int run(int argc, char **argv, int mpi, int rank)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"prompts", required_argument, 0, 'p'},
                                         {"out", required_argument, 0, 'o'},
                                         {"maps", required_argument, 0, 'M'},
                                         {"map-dtype", required_argument, 0, 'D'},
                                         {"map-compression", required_argument, 0, 'C'},
                                         {"rows", required_argument, 0, 'r'},
                                         {"topk", required_argument, 0, 'k'},
                                         {"alpha", required_argument, 0, 'a'},
                                         {"quantize-logits", required_argument, 0, 'Q'},
                                         {"save-logits", no_argument, 0, 'L'},
                                         {"threads", required_argument, 0, 't'},
                                         {"force", no_argument, 0, 'f'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {"log-every", required_argument, 0, 'E'},
                                         {"tokenizer", required_argument, 0, 'T'},
                                         {"strict", no_argument, 0, 'S'},
                                         {"allow-unused", no_argument, 0, 'U'},
                                         {"intervene", required_argument, 0, 'I'},
                                         {"interventions", required_argument, 0, 'J'},
                                         {"patch-sweep", required_argument, 0, 'W'},
                                         {"logit-diff", required_argument, 0, 'G'},
                                         {"apply", required_argument, 0, 'A'},
                                         DFL_CLI_COMMON_OPTIONS,
                                         {0, 0, 0, 0}};
    dfl_probe_params p = dfl_probe_params_default();
    dfl_error err = {DFL_OK, ""};
    /* --intervene / --patch-sweep specs in order; the sweeps' "sweep:" copies are owned */
    enum { MAX_IV = 256 };
    const char *specs[MAX_IV];
    char *owned[MAX_IV];
    size_t n_owned = 0;
    const char *applies[MAX_IV];
    dfl_effects_params fx = {specs, 0, NULL, NULL, applies, 0};
#define FREE_OWNED()                                                                                                   \
    do {                                                                                                               \
        for (size_t i_ = 0; i_ < n_owned; i_++)                                                                        \
            free(owned[i_]);                                                                                           \
    } while (0)
    int64_t threads = 0, k;
    double log_every = 10.0;
    int speak = rank == 0, quiet = !speak, c, rc = 0;
    opterr = speak;
    dfl_status s = DFL_OK;
    while (!s && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': p.model_dir = optarg; break;
        case 'p': p.prompts_path = optarg; break;
        case 'T': p.tokenizer_path = optarg; break;
        case 'o': p.out_path = optarg; break;
        case 'M':
            dfl_map_select_free(&p.maps);
            FREE_OWNED();
            s = dfl_map_select_parse(optarg, &p.maps, &err);
            break;
        case 'D':
            if (strcmp(optarg, "f16") && strcmp(optarg, "f32"))
                s = dfl__fail(&err, DFL_ERR_USAGE, "--map-dtype: '%s' is not f16 or f32", optarg);
            p.map_f16 = !strcmp(optarg, "f16");
            break;
        case 'C': s = parse_compression(optarg, &p.map_gzip, &err); break;
        case 'r': s = dfl_rows_rule_parse(optarg, &p.rows, &err); break;
        case 'k':
            if (!(s = dfl_cli_int("--topk", optarg, 1, DFL_TOPK_MAX, &k, &err))) p.topk = (int32_t)k;
            break;
        case 'a': s = dfl_cli_double("--alpha", optarg, 0.0, 1e30, &p.alpha, &err); break;
        case 'Q': s = parse_quant(optarg, &p.forward, &err); break;
        case 'L': p.save_logits = 1; break;
        case 't': s = dfl_cli_int("--threads", optarg, 1, 1024, &threads, &err); break;
        case 'f': p.overwrite = 1; break;
        case 'S': p.strict = 1; break;
        case 'U': p.allow_unused = 1; break;
        case 'I':
        case 'W':
            if (fx.n_specs == MAX_IV) {
                s = dfl__fail(&err, DFL_ERR_USAGE, "more than %d --intervene/--patch-sweep", MAX_IV);
                break;
            }
            if (c == 'I') {
                specs[fx.n_specs++] = optarg;
            } else if ((owned[n_owned] = malloc(strlen(optarg) + 7))) {
                snprintf(owned[n_owned], strlen(optarg) + 7, "sweep:%s", optarg);
                specs[fx.n_specs++] = owned[n_owned++];
            } else {
                s = dfl__fail(&err, DFL_ERR_NOMEM, "out of memory");
            }
            break;
        case 'J': fx.file = optarg; break;
        case 'A':
            if (fx.n_apply == MAX_IV)
                s = dfl__fail(&err, DFL_ERR_USAGE, "more than %d --apply", MAX_IV);
            else
                applies[fx.n_apply++] = optarg;
            break;
        case 'G': fx.logit_diff = optarg; break;
        case 'q': quiet = 1; break;
        case 'E': s = dfl_cli_double("--log-every", optarg, 0.0, 86400.0, &log_every, &err); break;
        case 'h':
            if (speak) usage(stdout);
            dfl_map_select_free(&p.maps);
            FREE_OWNED();
            return 0;
        case DFL_CLI_OPT_VERSION:
        case DFL_CLI_OPT_LIST:
            dfl_map_select_free(&p.maps);
            FREE_OWNED();
            return speak ? dfl_cli_common(stdout, "probe", c, opts) : 0;
        default:
            if (speak) usage(stderr);
            dfl_map_select_free(&p.maps);
            FREE_OWNED();
            return 2;
        }
    }
    if (!s && optind < argc) s = dfl__fail(&err, DFL_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!s && (!p.model_dir || !p.prompts_path || !p.out_path))
        s = dfl__fail(&err, DFL_ERR_USAGE, "--model, --prompts and --out are required (see --help)");
    if (s) {
        if (speak) fprintf(stderr, "probe: %s\n", err.msg);
        dfl_map_select_free(&p.maps);
        FREE_OWNED();
        return 2;
    }
    char *model_dir = NULL; /* --model itself, or ORG/NAME's snapshot folder in the hub cache */
    if ((s = dfl_hub_model_dir(p.model_dir, &model_dir, &err))) {
        if (speak) fprintf(stderr, "probe: %s\n", err.msg);
        dfl_map_select_free(&p.maps);
        FREE_OWNED();
        return dfl_status_exit_code(s);
    }
    p.model_dir = model_dir;
    if (fx.n_specs || fx.file || fx.logit_diff || fx.n_apply) p.effects = &fx;
    dfl_set_threads((int)threads);

    tool_state st = {dfl_progress_start(stderr, "probe", quiet || mpi), mpi && !quiet, log_every, 0};
    dfl_cli_catch_signals(on_signal);
    p.cancel = &g_signal;
    p.user = &st;
    p.warn = on_warn;
    p.progress = on_progress;
    dfl_probe_report rep;
    s = mpi ? dfl_probe_mpi_run(&p, &rep, &err) : dfl_probe_run(&p, &rep, &err);
    dfl_progress_end(&st.bar);
    if (s == DFL_ERR_CANCELLED) {
        if (speak) fprintf(stderr, "probe: stopped by %s; %s not written\n", signal_name(g_signal), p.out_path);
        rc = 128 + g_signal;
    } else if (s) {
        if (speak) fprintf(stderr, "probe: %s\n", err.msg);
        rc = dfl_status_exit_code(s);
    } else if (!quiet) {
        fprintf(stderr, "probe: wrote %s: %zu samples, %lld tokens, forward %.3f s (%.0f tok/s, %.2f GFLOP/s)",
                p.out_path, rep.samples, (long long)rep.tokens, rep.forward_seconds,
                rep.forward_seconds > 0 ? (double)rep.tokens / rep.forward_seconds : 0.0,
                rep.forward_seconds > 0 ? rep.flops / rep.forward_seconds * 1e-9 : 0.0);
        if (rep.targets) fprintf(stderr, ", target accuracy %zu/%zu", rep.targets_correct, rep.targets);
        if (rep.nonfinite_samples) fprintf(stderr, " (%zu with NaN/Inf: see above)", rep.nonfinite_samples);
        if (mpi) fprintf(stderr, ", parts joined in %.3f s", rep.join_seconds);
        fprintf(stderr, "\n");
    }
    dfl_map_select_free(&p.maps);
    FREE_OWNED();
    free(model_dir);
    return rc;
}

int main(int argc, char **argv)
{
    int rank = 0, ranks = 1, mpi = dfl_mpi_launched();
    dfl_error mpi_err = {DFL_OK, ""};
    if (mpi && dfl_mpi_start(&argc, &argv, &rank, &ranks, &mpi_err)) {
        fprintf(stderr, "probe: %s\n", mpi_err.msg);
        return 1;
    }
    int rc = run(argc, argv, mpi, rank);
    if (mpi) dfl_mpi_stop();
    return rc;
}
