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
#include "model/quantize.h"
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
                 "  --save-logits[=f32|f16] also store logits [T, vocab] per sample, f32 or IEEE half\n"
                 "                         (half the bytes; for compare) (default: off; f32 when given)\n"
                 "  --save-hidden[=f16|f32] also store each layer's output [L, T, hidden] per sample, for\n"
                 "                         compare's per-layer divergence (default: off; f16 when given)\n"
                 "  --quant-stats          also store the moments and channel energies of every linear\n"
                 "                         layer's input and the mean |q|, |k| per head and dimension, for\n"
                 "                         outliers --quant-stats (default: off)\n"
                 "  --logit-lens K         logit lens: each layer's residual decoded through the final norm\n"
                 "                         and LM head, top K tokens and the next token's rank (default: off)\n"
                 "  --dla                  direct logit attribution of each head, MLP and the embedding at\n"
                 "                         the analysis rows (default: off)\n"
                 "  --logit-diff A,B       measure logit[A] − logit[B] instead of the next token's logit:\n"
                 "                         what --dla attributes (token ids) and the interventions report\n"
                 "                         (ids or single-token strings) (default: the next token)\n"
                 "  --generate N           then generate up to N tokens per prompt, KV-cached, stopping at\n"
                 "                         the model's EOS ids; a prompt's \"generate\" overrides N\n"
                 "                         (default: 0 = off; docs/probe.md \"Generation\")\n"
                 "  --temperature T        sample at temperature T > 0 (default: greedy; 0 = greedy)\n"
                 "  --top-k K              sample from the K most probable tokens (default: 0 = all)\n"
                 "  --top-p P              sample from the smallest set holding P of the mass (default: 1)\n"
                 "  --seed S               seed of the sampling draws (default: 0)\n"
                 "  --alternatives K       most probable tokens stored per generated step (default: 5)\n"
                 "  --quantize SPEC        fake-quantize weights, linear inputs and/or the KV cache, and rotate\n"
                 "                         (QuaRot); repeatable or comma-separated, e.g.\n"
                 "                         'weights=4:group=128:asym,kv=8:hadamard,acts=8,rotate'\n"
                 "                         (docs/probe.md \"Quantization\"; default: none)\n"
                 "  --intervene SPEC       an intervention run beside the unmodified pass, its metrics in\n"
                 "                         effects/ (repeatable; docs/probe.md \"Interventions\"): e.g.\n"
                 "                         ablate:layer=3,head=1,mode=zero  lambda:layer=all,value=0\n"
                 "                         map:layer=2,use=map2  knockout:layer=0-3,from=last,to=answer\n"
                 "                         patch:site=resid_pre,layer=2,pos=query,source=clean\n"
                 "  --interventions FILE   a JSON array of such SPEC strings\n"
                 "  --patch-sweep SPEC     every (layer, position) or (layer, head) cell patched from\n"
                 "                         source=PROMPT into the other prompts, into patch/: e.g.\n"
                 "                         site=resid_pre,source=clean,metric=target_prob\n"
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

/* "A,B": two token ids (checked against the vocabulary once the model is loaded) */
static dfl_status parse_logit_diff(const char *text, int32_t ab[2], dfl_error *err)
{
    const char *comma = strchr(text, ',');
    char first[32];
    if (!comma || (size_t)(comma - text) >= sizeof first)
        return dfl__fail(err, DFL_ERR_USAGE, "--logit-diff: '%s' is not A,B (two token ids)", text);
    memcpy(first, text, (size_t)(comma - text));
    first[comma - text] = '\0';
    int64_t a, b;
    dfl_status s = dfl_cli_int("--logit-diff A", first, 0, INT32_MAX, &a, err);
    if (!s) s = dfl_cli_int("--logit-diff B", comma + 1, 0, INT32_MAX, &b, err);
    if (s) return s;
    ab[0] = (int32_t)a;
    ab[1] = (int32_t)b;
    return DFL_OK;
}

/* --save-logits / --save-hidden [=f32|f16]: *out 1 (f32) or 2 (f16); dflt when no value. */
static dfl_status parse_store_type(const char *flag, const char *text, int dflt, int *out, dfl_error *err)
{
    if (!text) return *out = dflt, DFL_OK;
    if (!strcmp(text, "f32")) return *out = 1, DFL_OK;
    if (!strcmp(text, "f16")) return *out = 2, DFL_OK;
    return dfl__fail(err, DFL_ERR_USAGE, "%s=%s: f32 or f16", flag, text);
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
                                         {"save-logits", optional_argument, 0, 'L'},
                                         {"save-hidden", optional_argument, 0, 0x5348},
                                         {"quant-stats", no_argument, 0, 0x5153},
                                         {"logit-lens", required_argument, 0, 'N'},
                                         {"dla", no_argument, 0, 'A'},
                                         {"logit-diff", required_argument, 0, 'Z'},
                                         {"quantize", required_argument, 0, 'W'},
                                         {"threads", required_argument, 0, 't'},
                                         {"force", no_argument, 0, 'f'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {"log-every", required_argument, 0, 'E'},
                                         {"tokenizer", required_argument, 0, 'T'},
                                         {"strict", no_argument, 0, 'S'},
                                         {"allow-unused", no_argument, 0, 'U'},
                                         {"generate", required_argument, 0, 'G'},
                                         {"temperature", required_argument, 0, 'J'},
                                         {"top-k", required_argument, 0, 'K'},
                                         {"top-p", required_argument, 0, 'P'},
                                         {"seed", required_argument, 0, 0x5345},
                                         {"alternatives", required_argument, 0, 0x414C},
                                         {"intervene", required_argument, 0, 0x4956},
                                         {"interventions", required_argument, 0, 0x4946},
                                         {"patch-sweep", required_argument, 0, 0x5053},
                                         {"apply", required_argument, 0, 0x4150},
                                         DFL_CLI_COMMON_OPTIONS,
                                         {0, 0, 0, 0}};
    dfl_probe_params p = dfl_probe_params_default();
    dfl_qspec quant = dfl_qspec_default();
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
        case 'N':
            if (!(s = dfl_cli_int("--logit-lens", optarg, 1, 1 << 20, &k, &err))) p.lens_topk = (int32_t)k;
            break;
        case 'A': p.dla = 1; break;
        case 'Z': { /* one flag for both: --dla reads ids, the interventions ids or strings */
            dfl_error ids_err;
            fx.logit_diff = optarg;
            p.logit_diff_set = parse_logit_diff(optarg, p.logit_diff, &ids_err) == DFL_OK;
            break;
        }
        case 0x5153: p.quant_stats = 1; break;
        case 'L':
        case 0x5348: /* the type may also follow as its own word: --save-logits f16 */
            if (!optarg && optind < argc && (!strcmp(argv[optind], "f16") || !strcmp(argv[optind], "f32")))
                optarg = argv[optind++];
            if (c == 'L')
                s = parse_store_type("--save-logits", optarg, 1, &p.save_logits, &err);
            else
                s = parse_store_type("--save-hidden", optarg, 2, &p.save_hidden, &err);
            break;
        case 'W': s = dfl_qspec_parse(optarg, &quant, &err); break;
        case 't': s = dfl_cli_int("--threads", optarg, 1, 1024, &threads, &err); break;
        case 'f': p.overwrite = 1; break;
        case 'S': p.strict = 1; break;
        case 'U': p.allow_unused = 1; break;
        case 'G': s = dfl_cli_int("--generate", optarg, 0, 1 << 20, &p.generate.tokens, &err); break;
        case 'J':
            s = dfl_cli_double("--temperature", optarg, 0.0, 1e6, &p.generate.temperature, &err);
            p.generate.sample = p.generate.temperature > 0;
            if (!p.generate.sample) p.generate.temperature = 1.0; /* 0: greedy */
            break;
        case 'K':
            s = dfl_cli_int("--top-k", optarg, 0, INT32_MAX, &p.generate.top_k, &err);
            p.generate.sample = 1;
            break;
        case 'P':
            s = dfl_cli_double("--top-p", optarg, 1e-9, 1.0, &p.generate.top_p, &err);
            p.generate.sample = 1;
            break;
        case 0x5345: /* --seed */
            if (!(s = dfl_cli_int("--seed", optarg, 0, INT64_MAX, &k, &err))) p.generate.seed = (uint64_t)k;
            break;
        case 0x414C: /* --alternatives */
            if (!(s = dfl_cli_int("--alternatives", optarg, 0, 64, &k, &err))) p.generate.alternatives = (int32_t)k;
            break;
        case 0x4956: /* --intervene */
        case 0x5053: /* --patch-sweep */
            if (fx.n_specs == MAX_IV) {
                s = dfl__fail(&err, DFL_ERR_USAGE, "more than %d --intervene/--patch-sweep", MAX_IV);
                break;
            }
            if (c == 0x4956) {
                specs[fx.n_specs++] = optarg;
            } else if ((owned[n_owned] = malloc(strlen(optarg) + 7))) {
                snprintf(owned[n_owned], strlen(optarg) + 7, "sweep:%s", optarg);
                specs[fx.n_specs++] = owned[n_owned++];
            } else {
                s = dfl__fail(&err, DFL_ERR_NOMEM, "out of memory");
            }
            break;
        case 0x4946: fx.file = optarg; break; /* --interventions */
        case 0x4150:                          /* --apply */
            if (fx.n_apply == MAX_IV)
                s = dfl__fail(&err, DFL_ERR_USAGE, "more than %d --apply", MAX_IV);
            else
                applies[fx.n_apply++] = optarg;
            break;
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
    if (!s && p.dla && fx.logit_diff && !p.logit_diff_set)
        s = dfl__fail(&err, DFL_ERR_USAGE, "--logit-diff %s: with --dla, A and B are token ids", fx.logit_diff);
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
    if (dfl_qspec_any(&quant)) {
        p.forward.quant = &quant;
        if (quant.w.bits || quant.rotate) p.forward.release_layers = -1; /* f32 copies, not file pages */
    }
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
        if (rep.generated_samples)
            fprintf(stderr, ", generated %lld tokens (%.3g tok/s decoding)", (long long)rep.generated_tokens,
                    rep.generate_seconds > 0 ? (double)rep.generated_tokens / rep.generate_seconds : 0.0);
        if (rep.expects) fprintf(stderr, ", expected answers generated %zu/%zu", rep.expects_correct, rep.expects);
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
