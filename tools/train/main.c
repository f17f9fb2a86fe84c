/* train — train a llama, diff_transformer, diffllama or diff_transformer_v2 model (or a matched pair) on
 * the needle task; see docs/train.md. */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/cli.h"
#include "render/render.h"
#include "base/report.h"
#include "model/kernels.h"
#include "train/train.h"
#include "shapes.h"

static volatile sig_atomic_t g_stop = 0;

/* --font and --width of every figure the tool writes (zeroed: the figures' defaults) */
static dfl_plot_paper g_paper;

/* SIGINT/SIGTERM/SIGHUP: the loop stops at the end of its step, saves a checkpoint
 * (continue with --resume) and the tool exits 128 + sig. */
static void on_sigint(int sig)
{
    g_stop = sig;
}

static void usage(FILE *out)
{
    dfl_train_params d = dfl_train_params_default();
    fprintf(out,
            "usage: train --out DIR [options]          one model into DIR\n"
            "       train --pair OUTDIR [options]      a matched llama / diff_transformer pair into\n"
            "                                          OUTDIR/transformer and OUTDIR/diff\n"
            "       train --pair OUTDIR --seeds LIST   one pair per seed into OUTDIR/seed-S/, then the\n"
            "                                          summary over seeds (OUTDIR/seeds_*.csv, .md, .png)\n"
            "\n"
            "Trains on the needle task (docs/format.md): fresh samples every step from --seed, held-out\n"
            "retrieval accuracy every --eval-every steps. DIR gets config.json + model.safetensors\n"
            "(loadable by probe), checkpoint.safetensors, train.csv, train.png (curves; with --pair\n"
            "also OUTDIR/train.png comparing both). Multi-head attention only\n"
            "(num_key_value_heads = heads; GQA is not trained). See docs/train.md.\n"
            "\n"
            "model\n"
            "  --type T            llama | diff_transformer | diffllama | diff_transformer_v2\n"
            "                      (default: llama)\n"
            "  --layers N          layers (default: %lld)\n"
            "  --hidden D          hidden size (default: %lld)\n"
            "  --heads H           num_attention_heads: llama heads of D/H; diff_transformer\n"
            "                      differential heads of 2 sub-heads of D/H/2; diffllama maps of D/H\n"
            "                      (even); diff_transformer_v2 output heads of D/H from 2H q heads;\n"
            "                      with --pair the llama heads (the Diff model gets H/2)\n"
            "                      (default: %lld)\n"
            "  --ffn F             intermediate size (default: %lld)\n"
            "  --vocab V           vocabulary size, >= 128 (default: %lld)\n"
            "  --tie               tie the LM head to the embedding (default: untied)\n"
            "  --init-std S        std of the normal init of matrices (default: %g)\n"
            "task\n"
            "  --task needle|shapes  the needle task (default), or the images of a ViT / Diff-ViT\n"
            "                      pair with their own options (train --task shapes --help)\n"
            "  --seq T             tokens per sample (default: %lld)\n"
            "  --needles N         needles per sample, distinct keys, 1-64 (default: %d)\n"
            "  --queries R         queries per sample; the last one is scored (default: %d)\n"
            "  --digits M          digits per needle, 1-16 (default: %d)\n"
            "  --depth X           answer depth in [0, 1], or 'random' (default: random)\n"
            "  --loss target|all   cross-entropy on the queries' digits or on every token\n"
            "                      (default: target)\n"
            "optimisation\n"
            "  --batch B           sequences per step (default: %lld)\n"
            "  --steps N           optimizer steps (default: %lld)\n"
            "  --lr X              peak learning rate (default: %g)\n"
            "  --min-lr X          floor of the cosine decay (default: %g)\n"
            "  --warmup N          linear warm-up steps (default: %lld)\n"
            "  --weight-decay X    AdamW decay on matrices, not on norms or lambda (default: %g)\n"
            "  --beta1 X           AdamW beta1 (default: %g)\n"
            "  --beta2 X           AdamW beta2 (default: %g)\n"
            "  --clip X            global gradient-norm clip, 0 = off (default: %g)\n"
            "  --ablate-lambda     Diff models: hold lambda at 0 (one softmax map + subln; the\n"
            "                      paper's ablation); with --pair the Diff model (default: off)\n"
            "  --seed N            data, init and held-out seed (default: %llu)\n"
            "  --seeds LIST        with --pair: one pair per seed (e.g. 1,2,3 or 1-5) into\n"
            "                      OUTDIR/seed-S, then the summary over seeds; --resume\n"
            "                      continues each, starting the seeds not begun (default: off)\n"
            "  --summarize         with --pair and --seeds: only (re)write the summary of the\n"
            "                      runs in OUTDIR/seed-S (transformer, diff, diff_lambda0)\n"
            "run\n"
            "  --eval-every N      held-out loss/accuracy and a train.csv row every N steps,\n"
            "                      0 = only at the end (default: %lld)\n"
            "  --eval-samples N    held-out samples (default: %lld)\n"
            "  --ckpt-every N      checkpoint every N steps, 0 = only at the end (default: %lld)\n"
            "  --stop-at N         stop with a checkpoint after N steps (for --resume; default: off)\n"
            "  --keep-every N      also keep the model of every N-th step in DIR/steps/step-NNNNNN\n"
            "                      (0 = off; default: 0)\n"
            "  --resume            continue from DIR/checkpoint.safetensors (same flags needed)\n"
            "  --force-schedule    with --resume: accept another --steps, --lr, --min-lr or --warmup\n"
            "                      (the learning rates from the checkpoint on follow the new schedule)\n"
            "  --force             start over in a DIR that holds an earlier run\n"
            "  --threads N         threads (default: OMP_NUM_THREADS or all cores)\n"
            "  --plot FILE         also draw the curves (both models' with --pair) to FILE, .png, .svg\n"
            "                      or .pdf by its extension, replacing it (default: none)\n"
            "  --width IN          width in inches of --plot, DIR/train.png with --pair and the\n"
            "                      summary's seeds.png, 0 < IN <= 100 (3.3 = one column, 7 =\n"
            "                      two): SVG/PDF get that size, PNG is 300 dpi (default: 13.3 in;\n"
            "                      PNG 2000 pixels)\n"
            "  --font FAMILY       font family of those figures (default: DejaVu Sans)\n"
            "  --plot-only         with --plot: no training, only the curves of the train.csv\n"
            "                      already in DIR (or OUTDIR/transformer and OUTDIR/diff)\n"
            "  --quiet             no progress bar and no log lines\n"
            "  --help              this text\n"
            "  --version           the version of difflens\n"
            "\n"
            "Exit status: 0 done, 1 runtime error (also: a damaged checkpoint, a DIR another\n"
            "train is writing, a run that diverged, sizes over the memory available), 2 usage\n"
            "error, 130 stopped by Ctrl-C (a checkpoint and the model of the last step are\n"
            "written first).\n",
            (long long)d.layers, (long long)d.hidden, (long long)d.heads, (long long)d.ffn, (long long)d.vocab,
            d.init_std, (long long)d.task.seq_len, d.task.needles, d.task.queries, d.task.digits, (long long)d.batch,
            (long long)d.steps, d.lr, d.min_lr, (long long)d.warmup, d.weight_decay, d.beta1, d.beta2, d.clip,
            (unsigned long long)d.seed, (long long)d.eval_every, (long long)d.eval_samples, (long long)d.ckpt_every);
}

typedef struct tool_state {
    dfl_progress bar;
    const char *name;
    int quiet;
    char label[96];
} tool_state;

static void on_report(void *user, const dfl_train_report *r)
{
    tool_state *st = user;
    if (r->is_eval) {
        if (st->quiet) return;
        dfl_progress_end(&st->bar);
        fprintf(stderr, "train: %s step %lld/%lld  loss %.4f  eval_loss %.4f  eval_acc %.3f  %.0f tok/s\n", st->name,
                (long long)r->step, (long long)r->steps, r->train_loss_avg, r->eval_loss, r->eval_acc, r->tokens_per_s);
        return;
    }
    double eta =
        r->tokens_per_s > 0 && r->step > 0 ? r->elapsed_s / (double)r->step * (double)(r->steps - r->step) : -1;
    snprintf(st->label, sizeof st->label, "train %s loss %.3f", st->name, r->loss);
    st->bar.label = st->label;
    dfl_progress_update(&st->bar, (double)r->step, (double)r->steps, "steps", r->tokens_per_s, "tok", eta);
}

static void on_warn(void *user, const char *msg)
{
    (void)user;
    fprintf(stderr, "train: warning: %s\n", msg);
}

/* Train one model; prints the summary. Returns the exit code (0, 1, 2, 128 + signal). */
/* The curves of n runs (their train.csv) to plot; 0, or the exit code after a message. */
static int write_plot(const char *plot, const char *const *csvs, const char *const *labels, int n, const char *title,
                      int quiet)
{
    dfl_error err = {DFL_OK, ""};
    if (dfl_train_plot_paper(plot, csvs, labels, n, title, &g_paper, &err)) {
        fprintf(stderr, "train: %s\n", err.msg);
        return dfl_status_exit_code(err.status);
    }
    if (!quiet) fprintf(stderr, "train: wrote %s\n", plot);
    return 0;
}

/* Before each model: its progress bar. */
static void on_begin(void *user, const char *name, const dfl_train_params *p)
{
    (void)p;
    tool_state *st = user;
    st->name = name;
    st->bar = dfl_progress_start(stderr, "train", st->quiet);
}

/* After each model (r NULL: it failed; the caller prints why): its summary line. */
static void on_end(void *user, const char *name, const dfl_train_params *p, const dfl_train_result *r)
{
    tool_state *st = user;
    dfl_progress_end(&st->bar);
    if (!r) return;
    if (r->steps_done == r->start_step && !r->interrupted) {
        if (!st->quiet)
            fprintf(stderr, "train: %s: already trained (%lld steps) in %s\n", name, (long long)r->steps_done, p->out);
        return;
    }
    /* the eval quoted is the last one made, which need not be at the last step */
    char evaltxt[48];
    if (r->eval_step > 0)
        snprintf(evaltxt, sizeof evaltxt, "eval at step %lld", (long long)r->eval_step);
    else
        snprintf(evaltxt, sizeof evaltxt, "no eval in this run");
    if (!st->quiet || r->interrupted)
        fprintf(stderr,
                "train: %s: %lld/%lld steps in %s (this run: %lld steps, %.1f s, %.0f tok/s; steady %.0f tok/s), "
                "final loss %.4f, eval_loss %.4f, eval_acc %.3f (%s)%s\n",
                name, (long long)r->steps_done, (long long)p->steps, p->out, (long long)(r->steps_done - r->start_step),
                r->seconds, r->tokens_per_s, r->steady_tokens_per_s, r->loss, r->eval_loss, r->eval_acc, evaltxt,
                r->interrupted ? " (stopped; continue with --resume)" : "");
}

static void on_note(void *user, const char *msg)
{
    tool_state *st = user;
    if (!st->quiet) fprintf(stderr, "train: %s\n", msg);
}

/* One model into p->out. Returns the exit code (0, 1, 2, 128 + signal). */
static int run_one(const dfl_train_params *p, const char *name, tool_state *st)
{
    dfl_error err = {DFL_OK, ""};
    dfl_train_result res;
    dfl_train_hooks hooks = {st, on_report, &g_stop, on_warn};
    on_begin(st, name, p);
    dfl_status s = dfl_train_run(p, &hooks, &res, &err);
    on_end(st, name, p, s ? NULL : &res);
    if (s) {
        fprintf(stderr, "train: %s\n", err.msg);
        return dfl_status_exit_code(s);
    }
    return res.interrupted && g_stop ? 128 + g_stop : 0;
}

/* 1 when argv holds --task shapes (or --task=shapes): that mode has its own options. */
static int task_shapes(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--task=shapes")) return 1;
        if (!strcmp(argv[i], "--task") && i + 1 < argc && !strcmp(argv[i + 1], "shapes")) return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (task_shapes(argc, argv)) return dfl__train_shapes_main(argc, argv);
    enum {
        O_TYPE = 256,
        O_PAIR,
        O_OUT,
        O_LAYERS,
        O_HIDDEN,
        O_HEADS,
        O_FFN,
        O_VOCAB,
        O_TIE,
        O_INIT,
        O_SEQ,
        O_NEEDLES,
        O_QUERIES,
        O_DIGITS,
        O_DEPTH,
        O_LOSS,
        O_BATCH,
        O_STEPS,
        O_LR,
        O_MINLR,
        O_WARMUP,
        O_WD,
        O_B1,
        O_B2,
        O_CLIP,
        O_SEED,
        O_EVERY,
        O_ESAMPLES,
        O_CKPT,
        O_STOPAT,
        O_RESUME,
        O_FORCE,
        O_THREADS,
        O_QUIET,
        O_HELP,
        O_PLOT,
        O_PLOTONLY,
        O_KEEP,
        O_ABLATE,
        O_SEEDS,
        O_SUMMARIZE,
        O_FSCHED,
        O_WIDTH,
        O_FONT,
        O_TASK
    };
    static const struct option opts[] = {{"type", required_argument, 0, O_TYPE},
                                         {"pair", required_argument, 0, O_PAIR},
                                         {"out", required_argument, 0, O_OUT},
                                         {"layers", required_argument, 0, O_LAYERS},
                                         {"hidden", required_argument, 0, O_HIDDEN},
                                         {"heads", required_argument, 0, O_HEADS},
                                         {"ffn", required_argument, 0, O_FFN},
                                         {"vocab", required_argument, 0, O_VOCAB},
                                         {"tie", no_argument, 0, O_TIE},
                                         {"init-std", required_argument, 0, O_INIT},
                                         {"seq", required_argument, 0, O_SEQ},
                                         {"needles", required_argument, 0, O_NEEDLES},
                                         {"queries", required_argument, 0, O_QUERIES},
                                         {"digits", required_argument, 0, O_DIGITS},
                                         {"depth", required_argument, 0, O_DEPTH},
                                         {"loss", required_argument, 0, O_LOSS},
                                         {"batch", required_argument, 0, O_BATCH},
                                         {"steps", required_argument, 0, O_STEPS},
                                         {"lr", required_argument, 0, O_LR},
                                         {"min-lr", required_argument, 0, O_MINLR},
                                         {"warmup", required_argument, 0, O_WARMUP},
                                         {"weight-decay", required_argument, 0, O_WD},
                                         {"beta1", required_argument, 0, O_B1},
                                         {"beta2", required_argument, 0, O_B2},
                                         {"clip", required_argument, 0, O_CLIP},
                                         {"seed", required_argument, 0, O_SEED},
                                         {"eval-every", required_argument, 0, O_EVERY},
                                         {"eval-samples", required_argument, 0, O_ESAMPLES},
                                         {"ckpt-every", required_argument, 0, O_CKPT},
                                         {"stop-at", required_argument, 0, O_STOPAT},
                                         {"resume", no_argument, 0, O_RESUME},
                                         {"force", no_argument, 0, O_FORCE},
                                         {"force-schedule", no_argument, 0, O_FSCHED},
                                         {"threads", required_argument, 0, O_THREADS},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"help", no_argument, 0, O_HELP},
                                         {"plot", required_argument, 0, O_PLOT},
                                         {"plot-only", no_argument, 0, O_PLOTONLY},
                                         {"keep-every", required_argument, 0, O_KEEP},
                                         {"ablate-lambda", no_argument, 0, O_ABLATE},
                                         {"seeds", required_argument, 0, O_SEEDS},
                                         {"summarize", no_argument, 0, O_SUMMARIZE},
                                         {"width", required_argument, 0, O_WIDTH},
                                         {"font", required_argument, 0, O_FONT},
                                         {"task", required_argument, 0, O_TASK},
                                         DFL_CLI_COMMON_OPTIONS,
                                         {0, 0, 0, 0}};
    dfl_train_params p = dfl_train_params_default();
    dfl_error err = {DFL_OK, ""};
    const char *pair = NULL, *plot = NULL;
    int64_t v, threads = 0;
    double x;
    int c, quiet = 0, plot_only = 0, summarize = 0;
    int64_t *seeds = NULL; /* [n_seeds] sorted, distinct */
    size_t n_seeds = 0;
    dfl_status s = DFL_OK;
#define INT(flag, lo, hi, dst)                                                                                         \
    if (!(s = dfl_cli_int(flag, optarg, lo, hi, &v, &err))) dst = v
#define DBL(flag, lo, hi, dst)                                                                                         \
    if (!(s = dfl_cli_double(flag, optarg, lo, hi, &x, &err))) dst = x
    opterr = 0;
    while (!s && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_TYPE:
            if (!strcmp(optarg, "llama"))
                p.type = DFL_MODEL_LLAMA;
            else if (!strcmp(optarg, "diff_transformer"))
                p.type = DFL_MODEL_DIFF_TRANSFORMER;
            else if (!strcmp(optarg, "diffllama"))
                p.type = DFL_MODEL_DIFFLLAMA;
            else if (!strcmp(optarg, "diff_transformer_v2"))
                p.type = DFL_MODEL_DIFF_V2;
            else
                s = dfl__fail(&err, DFL_ERR_USAGE,
                              "--type: '%s' is not llama, diff_transformer, diffllama or "
                              "diff_transformer_v2",
                              optarg);
            break;
        case O_PAIR: pair = optarg; break;
        case O_OUT: p.out = optarg; break;
        case O_LAYERS: INT("--layers", 1, 1024, p.layers); break;
        case O_HIDDEN: INT("--hidden", 2, 65536, p.hidden); break;
        case O_HEADS: INT("--heads", 1, 1024, p.heads); break;
        case O_FFN: INT("--ffn", 1, 1 << 18, p.ffn); break;
        case O_VOCAB: INT("--vocab", DFL_NEEDLE_MIN_VOCAB, 1 << 24, p.vocab); break;
        case O_TIE: p.tie = 1; break;
        case O_INIT: DBL("--init-std", 1e-6, 10, p.init_std); break;
        case O_SEQ: INT("--seq", 8, 1 << 16, p.task.seq_len); break;
        case O_NEEDLES: INT("--needles", 1, DFL_NEEDLE_MAX, p.task.needles); break;
        case O_QUERIES: INT("--queries", 1, DFL_NEEDLE_MAX, p.task.queries); break;
        case O_DIGITS: INT("--digits", 1, 16, p.task.digits); break;
        case O_DEPTH:
            if (!strcmp(optarg, "random"))
                p.task.depth = -1;
            else
                DBL("--depth", 0, 1, p.task.depth);
            break;
        case O_LOSS:
            if (!strcmp(optarg, "target"))
                p.loss = DFL_LOSS_TARGET;
            else if (!strcmp(optarg, "all"))
                p.loss = DFL_LOSS_ALL;
            else
                s = dfl__fail(&err, DFL_ERR_USAGE, "--loss: '%s' is not target or all", optarg);
            break;
        case O_BATCH: INT("--batch", 1, 65536, p.batch); break;
        case O_STEPS: INT("--steps", 1, (int64_t)1 << 40, p.steps); break;
        case O_LR: DBL("--lr", 1e-12, 10, p.lr); break;
        case O_MINLR: DBL("--min-lr", 0, 10, p.min_lr); break;
        case O_WARMUP: INT("--warmup", 0, (int64_t)1 << 40, p.warmup); break;
        case O_WD: DBL("--weight-decay", 0, 10, p.weight_decay); break;
        case O_B1: DBL("--beta1", 0, 0.999999, p.beta1); break;
        case O_B2: DBL("--beta2", 0, 0.999999999, p.beta2); break;
        case O_CLIP: DBL("--clip", 0, 1e9, p.clip); break;
        case O_SEED: INT("--seed", 0, INT64_MAX, p.seed); break;
        case O_EVERY: INT("--eval-every", 0, (int64_t)1 << 40, p.eval_every); break;
        case O_ESAMPLES: INT("--eval-samples", 1, 1 << 20, p.eval_samples); break;
        case O_CKPT: INT("--ckpt-every", 0, (int64_t)1 << 40, p.ckpt_every); break;
        case O_KEEP: INT("--keep-every", 0, (int64_t)1 << 40, p.keep_every); break;
        case O_ABLATE: p.ablate_lambda = 1; break;
        case O_SEEDS:
            free(seeds);
            seeds = NULL;
            s = dfl_cli_index_list("--seeds", optarg, &seeds, &n_seeds, &err);
            break;
        case O_SUMMARIZE: summarize = 1; break;
        case O_STOPAT: INT("--stop-at", 1, (int64_t)1 << 40, p.stop_at); break;
        case O_RESUME: p.resume = 1; break;
        case O_FSCHED: p.force_schedule = 1; break;
        case O_FORCE: p.overwrite = 1; break;
        case O_THREADS: INT("--threads", 1, 1024, threads); break;
        case O_QUIET: quiet = 1; break;
        case O_PLOT: plot = optarg; break;
        case O_WIDTH: s = dfl_plot_width_parse(optarg, &g_paper.width_in, &err); break;
        case O_FONT: g_paper.font = optarg; break;
        case O_TASK:
            if (strcmp(optarg, "needle"))
                s = dfl__fail(&err, DFL_ERR_USAGE, "--task: '%s' is not needle or shapes", optarg);
            break;
        case O_PLOTONLY: plot_only = 1; break;
        case O_HELP: usage(stdout); return 0;
        case DFL_CLI_OPT_VERSION:
        case DFL_CLI_OPT_LIST: return dfl_cli_common(stdout, "train", c, opts);
        default: s = dfl__fail(&err, DFL_ERR_USAGE, "unknown or incomplete option '%s'", argv[optind - 1]); break;
        }
    }
#undef INT
#undef DBL
    if (!s && optind < argc) s = dfl__fail(&err, DFL_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    dfl_format fmt;
    if (!s && plot) s = dfl_format_of_path(plot, &fmt, &err);
    if (!s && plot_only && !plot) s = dfl__fail(&err, DFL_ERR_USAGE, "--plot-only needs --plot FILE");
    if (!s && ((pair && strlen(pair) > 3000) || (p.out && strlen(p.out) > 3000)))
        s = dfl__fail(&err, DFL_ERR_USAGE, "output path too long");
    if (!s && !pair == !p.out) s = dfl__fail(&err, DFL_ERR_USAGE, "give exactly one of --out DIR and --pair OUTDIR");
    if (!s && p.resume && p.overwrite) s = dfl__fail(&err, DFL_ERR_USAGE, "--resume and --force exclude each other");
    if (!s && seeds && !pair) s = dfl__fail(&err, DFL_ERR_USAGE, "--seeds needs --pair OUTDIR");
    if (!s && seeds && (plot || plot_only))
        s = dfl__fail(&err, DFL_ERR_USAGE,
                      "--plot and --plot-only go with --out or --pair, not --seeds (the summary has its own figure)");
    if (!s && summarize && !seeds)
        s = dfl__fail(&err, DFL_ERR_USAGE, "--summarize needs --pair OUTDIR and --seeds LIST");
    if (!s && n_seeds > 64) s = dfl__fail(&err, DFL_ERR_USAGE, "--seeds: at most 64 seeds, got %zu", n_seeds);
    if (!s && p.force_schedule && !p.resume) s = dfl__fail(&err, DFL_ERR_USAGE, "--force-schedule goes with --resume");
    if (!s && p.min_lr > p.lr) s = dfl__fail(&err, DFL_ERR_USAGE, "--min-lr %g exceeds --lr %g", p.min_lr, p.lr);
    dfl_train_params pl, pd;
    char out_l[4096], out_d[4096];
    dfl_config cl, cd;
    if (!s && pair) {
        if (!(s = dfl_train_pair_params(&p, &pl, &pd, &err))) {
            snprintf(out_l, sizeof out_l, "%s/transformer", pair);
            snprintf(out_d, sizeof out_d, "%s/diff", pair);
            pl.out = out_l, pd.out = out_d;
        }
    }
    if (!s) s = dfl_train_params_config(pair ? &pl : &p, &cl, &err);
    if (!s && pair) s = dfl_train_params_config(&pd, &cd, &err);
    if (!s) {
        dfl_needle_params t = p.task;
        t.vocab_size = p.vocab;
        s = dfl_needle_check(&t, &err);
    }
    if (s) {
        fprintf(stderr, "train: %s\n(see train --help)\n", err.msg);
        free(seeds);
        return dfl_status_exit_code(s);
    }
    dfl_set_threads((int)threads);
    dfl_cli_catch_signals(on_sigint);

    tool_state st;
    memset(&st, 0, sizeof st);
    st.quiet = quiet;
    if (!pair) {
        int rc = plot_only ? 0 : run_one(&p, dfl_model_type_name(p.type), &st);
        if (rc == 0 && plot) {
            char csv[4200], title[160];
            snprintf(csv, sizeof csv, "%s/train.csv", p.out);
            snprintf(title, sizeof title, "%s on the needle task", dfl_model_type_name(p.type));
            const char *csvs[1] = {csv}, *labels[1] = {dfl_model_type_name(p.type)};
            rc = write_plot(plot, csvs, labels, 1, title, quiet);
        }
        return rc;
    }

    size_t nl = dfl_train_param_count(&cl), nd = dfl_train_param_count(&cd);
    if (!plot_only) {
        printf("transformer: llama, %lld heads of head_dim %lld: %zu parameters\n", (long long)cl.num_heads,
               (long long)cl.head_dim, nl);
        printf("diff: diff_transformer, %lld differential heads of head_dim %lld (values %lld): %zu parameters%s\n",
               (long long)cd.num_heads, (long long)cd.head_dim, 2 * (long long)cd.head_dim, nd,
               pd.ablate_lambda ? " (lambda held at 0)" : "");
        printf("difference: %lld = %lld layers x 6 x head_dim (lambda_q1/k1/q2/k2 + subln)\n",
               (long long)nd - (long long)nl, (long long)cd.num_layers);
        fflush(stdout);
    }
    int rc = 0;
    if (!plot_only) {
        dfl_train_pairs_params pp = dfl_train_pairs_params_default();
        uint64_t us[64];
        for (size_t i = 0; i < n_seeds; i++)
            us[i] = (uint64_t)seeds[i];
        pp.llama = pl, pp.diff = pd, pp.dir = pair, pp.paper = &g_paper;
        pp.seeds = seeds ? us : NULL, pp.n_seeds = (int)n_seeds, pp.summarize = summarize;
        dfl_train_pairs_hooks hooks = {{&st, on_report, &g_stop, on_warn}, on_begin, on_end, on_note};
        dfl_train_pairs_result res;
        dfl_status ps = dfl_train_pairs_run(&pp, &hooks, &res, &err);
        if (ps)
            fprintf(stderr, "train: %s\n", err.msg), rc = dfl_status_exit_code(ps);
        else if (res.stopped)
            rc = 128 + g_stop;
        if (res.summary_md) fputs(res.summary_md, stdout);
        free(res.summary_md);
    }
    if (rc == 0 && plot) { /* --plot of the pair (refused with --seeds) */
        char title[128], c0[4200], c1[4200];
        const char *csvs[2] = {c0, c1}, *labels[2] = {"Transformer", "Diff"};
        snprintf(c0, sizeof c0, "%s/train.csv", pl.out);
        snprintf(c1, sizeof c1, "%s/train.csv", pd.out);
        snprintf(title, sizeof title, "Transformer vs Diff, %zu / %zu params", nl, nd);
        rc = write_plot(plot, csvs, labels, 2, title, quiet);
    }
    free(seeds);
    return rc;
}
