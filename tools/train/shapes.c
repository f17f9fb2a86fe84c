/* shapes.c — `train --task shapes`: the ViT / Diff-ViT pair on the synthetic shapes
 * images (train/train_vit.h, docs/train.md "Images: ViT vs Diff-ViT"). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "base/atomic.h"
#include "base/strbuf.h"
#include "model/kernels.h"
#include "train/train_vit.h"
#include "shapes.h"

static void usage(FILE *out)
{
    dfl_vit_params d = dfl_vit_params_default();
    fprintf(out,
            "usage: train --task shapes --out DIR [--diff] [options]   one ViT (or Diff-ViT) into DIR\n"
            "       train --task shapes --pair OUTDIR [--seeds LIST]   the pair into OUTDIR[/seed-S]/vit and\n"
            "                                                          .../diff_vit, then OUTDIR/shapes.csv\n"
            "       train --task shapes --samples DIR [--count N]      held-out images + prompts.jsonl\n"
            "\n"
            "Images of a bright square, circle, triangle or cross at a random place on a textured,\n"
            "speckled background; the class token's embedding is classified by cosine similarity\n"
            "to one vector per class. DIR gets a \"clip\" (ViT) or \"diffclip\" (Diff-ViT) model\n"
            "(config.json + model.safetensors, loadable by probe; the class vectors are its text\n"
            "tower: caption_tokens [[k]] is class k) and train.csv. See docs/train.md.\n"
            "\n"
            "  --diff              Diff-ViT: heads/2 differential heads (default: ViT)\n"
            "  --image-size S      image side in pixels (default: %lld)\n"
            "  --patch-size P      patch side, dividing S (default: %lld)\n"
            "  --hidden D          width (default: %lld)\n"
            "  --layers N          blocks (default: %lld)\n"
            "  --heads H           softmax maps per layer: ViT heads of D/H; Diff-ViT H/2\n"
            "                      differential heads of two D/H maps (default: %lld)\n"
            "  --ffn F             MLP width (default: %lld)\n"
            "  --embed E           joint embedding size (default: %lld)\n"
            "  --batch B           images per step (default: %lld)\n"
            "  --steps N           optimizer steps (default: %lld)\n"
            "  --warmup N          warm-up steps (default: %lld)\n"
            "  --lr X              peak learning rate (default: %g)\n"
            "  --min-lr X          floor of the cosine decay (default: %g)\n"
            "  --weight-decay X    AdamW decay on matrices (default: %g)\n"
            "  --clip X            global gradient-norm clip, 0 = off (default: %g)\n"
            "  --seed N            weights and training images (default: %llu)\n"
            "  --seeds LIST        with --pair: one pair per seed into OUTDIR/seed-S\n"
            "  --eval-every N      held-out accuracy every N steps (default: %lld)\n"
            "  --eval-samples N    held-out images (default: %lld)\n"
            "  --count N           with --samples: images to write (default: 8)\n"
            "  --first I           with --samples: index of the first held-out image (default: 100000,\n"
            "                      beyond the evaluation images)\n"
            "  --force             replace files of an earlier run\n"
            "  --threads N         threads (default: OMP_NUM_THREADS or all cores)\n"
            "  --quiet             no log lines\n"
            "  --help              this text\n"
            "\n"
            "Exit status: 0 done, 1 runtime error, 2 usage error.\n",
            (long long)d.image_size, (long long)d.patch_size, (long long)d.width, (long long)d.layers,
            (long long)d.heads, (long long)d.mlp_width, (long long)d.embed_dim, (long long)d.batch, (long long)d.steps,
            (long long)d.warmup, d.lr, d.min_lr, d.weight_decay, d.clip, (unsigned long long)d.seed,
            (long long)d.eval_every, (long long)d.eval_samples);
}

typedef struct state {
    const char *name;
    int quiet;
} state;

static void on_report(void *user, const dfl_vit_report *r)
{
    const state *st = user;
    if (r->is_eval && !st->quiet)
        fprintf(stderr, "train: %s step %lld/%lld  loss %.4f  eval_loss %.4f  eval_acc %.3f\n", st->name,
                (long long)r->step, (long long)r->steps, r->loss, r->eval_loss, r->eval_acc);
}

/* One model; appends "seed,model,params,steps,eval_loss,eval_acc,seconds" to csv (may be NULL). */
static dfl_status run(const dfl_vit_params *p, const char *name, int quiet, dfl_strbuf *csv, dfl_error *err)
{
    state st = {name, quiet};
    dfl_vit_result r;
    dfl_status s = dfl_vit_train(p, on_report, &st, &r, err);
    if (s) return s;
    if (!quiet)
        fprintf(stderr, "train: %s: %zu parameters, %lld steps in %.1f s into %s, eval_loss %.4f, eval_acc %.3f\n",
                name, r.n_params, (long long)p->steps, r.seconds, p->out, r.eval_loss, r.eval_acc);
    if (csv)
        dfl_strbuf_printf(csv, "%llu,%s,%zu,%lld,%.6f,%.6f,%.2f\n", (unsigned long long)p->seed, name, r.n_params,
                          (long long)p->steps, r.eval_loss, r.eval_acc, r.seconds);
    return DFL_OK;
}

int dfl__train_shapes_main(int argc, char **argv)
{
    enum {
        O_TASK = 256,
        O_OUT,
        O_PAIR,
        O_SAMPLES,
        O_DIFF,
        O_IMG,
        O_PATCH,
        O_HIDDEN,
        O_LAYERS,
        O_HEADS,
        O_FFN,
        O_EMBED,
        O_BATCH,
        O_STEPS,
        O_WARMUP,
        O_LR,
        O_MINLR,
        O_WD,
        O_CLIP,
        O_SEED,
        O_SEEDS,
        O_EVERY,
        O_ESAMPLES,
        O_COUNT,
        O_FIRST,
        O_FORCE,
        O_THREADS,
        O_QUIET,
        O_HELP
    };
    static const struct option opts[] = {{"task", required_argument, 0, O_TASK},
                                         {"out", required_argument, 0, O_OUT},
                                         {"pair", required_argument, 0, O_PAIR},
                                         {"samples", required_argument, 0, O_SAMPLES},
                                         {"diff", no_argument, 0, O_DIFF},
                                         {"image-size", required_argument, 0, O_IMG},
                                         {"patch-size", required_argument, 0, O_PATCH},
                                         {"hidden", required_argument, 0, O_HIDDEN},
                                         {"layers", required_argument, 0, O_LAYERS},
                                         {"heads", required_argument, 0, O_HEADS},
                                         {"ffn", required_argument, 0, O_FFN},
                                         {"embed", required_argument, 0, O_EMBED},
                                         {"batch", required_argument, 0, O_BATCH},
                                         {"steps", required_argument, 0, O_STEPS},
                                         {"warmup", required_argument, 0, O_WARMUP},
                                         {"lr", required_argument, 0, O_LR},
                                         {"min-lr", required_argument, 0, O_MINLR},
                                         {"weight-decay", required_argument, 0, O_WD},
                                         {"clip", required_argument, 0, O_CLIP},
                                         {"seed", required_argument, 0, O_SEED},
                                         {"seeds", required_argument, 0, O_SEEDS},
                                         {"eval-every", required_argument, 0, O_EVERY},
                                         {"eval-samples", required_argument, 0, O_ESAMPLES},
                                         {"count", required_argument, 0, O_COUNT},
                                         {"first", required_argument, 0, O_FIRST},
                                         {"force", no_argument, 0, O_FORCE},
                                         {"threads", required_argument, 0, O_THREADS},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"help", no_argument, 0, O_HELP},
                                         {0, 0, 0, 0}};
    dfl_vit_params p = dfl_vit_params_default();
    dfl_error err = {DFL_OK, ""};
    const char *pair = NULL, *samples = NULL;
    int64_t v, threads = 0, count = 8, first = 100000;
    double x;
    int c, quiet = 0;
    int64_t *seeds = NULL;
    size_t n_seeds = 0;
    dfl_status s = DFL_OK;
#define INT(flag, lo, hi, dst)                                                                                         \
    if (!(s = dfl_cli_int(flag, optarg, lo, hi, &v, &err))) dst = v
#define DBL(flag, lo, hi, dst)                                                                                         \
    if (!(s = dfl_cli_double(flag, optarg, lo, hi, &x, &err))) dst = x
    opterr = 0;
    optind = 1;
    while (!s && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_TASK:
            if (strcmp(optarg, "shapes")) s = dfl__fail(&err, DFL_ERR_USAGE, "--task: '%s' is not shapes", optarg);
            break;
        case O_OUT: p.out = optarg; break;
        case O_PAIR: pair = optarg; break;
        case O_SAMPLES: samples = optarg; break;
        case O_DIFF: p.diff = 1; break;
        case O_IMG: INT("--image-size", 16, 1024, p.image_size); break;
        case O_PATCH: INT("--patch-size", 1, 1024, p.patch_size); break;
        case O_HIDDEN: INT("--hidden", 2, 4096, p.width); break;
        case O_LAYERS: INT("--layers", 1, 64, p.layers); break;
        case O_HEADS: INT("--heads", 1, 1024, p.heads); break;
        case O_FFN: INT("--ffn", 1, 16384, p.mlp_width); break;
        case O_EMBED: INT("--embed", 1, 4096, p.embed_dim); break;
        case O_BATCH: INT("--batch", 1, 4096, p.batch); break;
        case O_STEPS: INT("--steps", 1, (int64_t)1 << 30, p.steps); break;
        case O_WARMUP: INT("--warmup", 0, (int64_t)1 << 30, p.warmup); break;
        case O_LR: DBL("--lr", 1e-12, 10, p.lr); break;
        case O_MINLR: DBL("--min-lr", 0, 10, p.min_lr); break;
        case O_WD: DBL("--weight-decay", 0, 10, p.weight_decay); break;
        case O_CLIP: DBL("--clip", 0, 1e9, p.clip); break;
        case O_SEED: INT("--seed", 0, INT64_MAX, p.seed); break;
        case O_SEEDS:
            free(seeds);
            seeds = NULL;
            s = dfl_cli_index_list("--seeds", optarg, &seeds, &n_seeds, &err);
            break;
        case O_EVERY: INT("--eval-every", 0, (int64_t)1 << 30, p.eval_every); break;
        case O_ESAMPLES: INT("--eval-samples", 1, 1 << 20, p.eval_samples); break;
        case O_COUNT: INT("--count", 1, 10000, count); break;
        case O_FIRST: INT("--first", 0, (int64_t)1 << 40, first); break;
        case O_FORCE: p.overwrite = 1; break;
        case O_THREADS: INT("--threads", 1, 1024, threads); break;
        case O_QUIET: quiet = 1; break;
        case O_HELP: usage(stdout); return 0;
        default:
            s = dfl__fail(&err, DFL_ERR_USAGE, "unknown or incomplete option '%s' for --task shapes", argv[optind - 1]);
            break;
        }
    }
#undef INT
#undef DBL
    if (!s && optind < argc) s = dfl__fail(&err, DFL_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!s && (!!pair + !!p.out + !!samples) != 1)
        s = dfl__fail(&err, DFL_ERR_USAGE, "give exactly one of --out DIR, --pair OUTDIR and --samples DIR");
    if (!s && ((pair && strlen(pair) > 3000) || (p.out && strlen(p.out) > 3000) || (samples && strlen(samples) > 3000)))
        s = dfl__fail(&err, DFL_ERR_USAGE, "output path too long");
    if (!s && seeds && !pair) s = dfl__fail(&err, DFL_ERR_USAGE, "--seeds needs --pair OUTDIR");
    if (!s && n_seeds > 64) s = dfl__fail(&err, DFL_ERR_USAGE, "--seeds: at most 64 seeds, got %zu", n_seeds);
    if (!s && pair && p.diff) s = dfl__fail(&err, DFL_ERR_USAGE, "--diff goes with --out (--pair trains both)");
    if (!s && p.min_lr > p.lr) s = dfl__fail(&err, DFL_ERR_USAGE, "--min-lr %g exceeds --lr %g", p.min_lr, p.lr);
    if (!s && !samples) {
        dfl_vit_params q = p;
        q.diff = pair ? 1 : p.diff;
        s = dfl_vit_params_check(&q, &err);
    }
    if (s) {
        fprintf(stderr, "train: %s\n(see train --task shapes --help)\n", err.msg);
        free(seeds);
        return dfl_status_exit_code(s);
    }
    dfl_set_threads((int)threads);
    if (samples) {
        s = dfl_shapes_write_samples(samples, p.seed, (uint64_t)first, (int)count, p.image_size, p.overwrite, &err);
        if (!s && !quiet)
            fprintf(stderr, "train: wrote %lld images and prompts.jsonl into %s\n", (long long)count, samples);
    } else if (p.out) {
        s = run(&p, p.diff ? "diff_vit" : "vit", quiet, NULL, &err);
    } else {
        dfl_strbuf csv = {0};
        dfl_strbuf_printf(&csv, "seed,model,params,steps,eval_loss,eval_acc,seconds\n");
        int64_t one = (int64_t)p.seed;
        const int64_t *list = seeds ? seeds : &one;
        size_t n = seeds ? n_seeds : 1;
        char dir[4200];
        for (size_t i = 0; !s && i < n; i++) {
            for (int diff = 0; !s && diff < 2; diff++) {
                dfl_vit_params q = p;
                q.diff = diff, q.seed = (uint64_t)list[i];
                if (seeds)
                    snprintf(dir, sizeof dir, "%s/seed-%lld/%s", pair, (long long)list[i], diff ? "diff_vit" : "vit");
                else
                    snprintf(dir, sizeof dir, "%s/%s", pair, diff ? "diff_vit" : "vit");
                q.out = dir;
                s = run(&q, diff ? "diff_vit" : "vit", quiet, &csv, &err);
            }
        }
        if (!s && csv.oom) s = dfl__fail(&err, DFL_ERR_NOMEM, "out of memory");
        if (!s) {
            snprintf(dir, sizeof dir, "%s/shapes.csv", pair);
            s = dfl__atomic_write(dir, csv.p, csv.len, 1, &err);
        }
        if (!s) fputs(csv.p, stdout);
        dfl_strbuf_free(&csv);
    }
    free(seeds);
    if (s) {
        fprintf(stderr, "train: %s\n", err.msg);
        return dfl_status_exit_code(s);
    }
    return 0;
}
