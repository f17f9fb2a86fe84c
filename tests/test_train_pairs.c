/* test_train_pairs.c — dfl_train_pairs_run (the loop of `train --pair --seeds`) driven
 * in-process: two tiny seeds of a few steps (each seed's pair is the run
 * dfl_train_run gives for that seed alone, the summary is written and returned, the
 * hooks see every model), a resume that finds everything trained, the stop flag
 * (the loop ends after the model that saw it, no summary), and the usage errors. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/status.h"
#include "train/train.h"

static char g_dir[256];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static int group_setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/dfl_pairs_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The pair of a tiny model: a step takes about a millisecond. */
static dfl_train_pairs_params tiny_pairs(const char *dir, const uint64_t *seeds, int n)
{
    dfl_train_params p = dfl_train_params_default();
    p.layers = 1, p.hidden = 16, p.heads = 2, p.ffn = 16;
    p.task.seq_len = 32, p.task.needles = 2, p.task.digits = 2;
    p.batch = 2, p.steps = 3, p.warmup = 1, p.eval_every = 3, p.eval_samples = 2;
    dfl_train_pairs_params pp = dfl_train_pairs_params_default();
    dfl_error err;
    assert_int_equal(dfl_train_pair_params(&p, &pp.llama, &pp.diff, &err), DFL_OK);
    pp.dir = dir, pp.seeds = seeds, pp.n_seeds = n;
    return pp;
}

typedef struct seen {
    int begins, ends, notes, ended_ok, already;
    char last[64];
    volatile sig_atomic_t stop;
    int stop_after_steps; /* raise stop after this many reported steps (0: never) */
    int steps;
} seen;

static void on_begin(void *user, const char *name, const dfl_train_params *p)
{
    seen *s = user;
    (void)p;
    s->begins++;
    snprintf(s->last, sizeof s->last, "%s", name);
}

static void on_end(void *user, const char *name, const dfl_train_params *p, const dfl_train_result *r)
{
    seen *s = user;
    (void)name, (void)p;
    s->ends++;
    if (r) s->ended_ok++, s->already += r->steps_done == r->start_step;
}

static void on_note(void *user, const char *msg)
{
    seen *s = user;
    (void)msg;
    s->notes++;
}

static void on_report(void *user, const dfl_train_report *r)
{
    seen *s = user;
    if (r->is_eval) return;
    if (s->stop_after_steps && ++s->steps >= s->stop_after_steps) s->stop = 1;
}

static dfl_train_pairs_hooks hooks_of(seen *s)
{
    dfl_train_pairs_hooks h = {{s, on_report, &s->stop, NULL}, on_begin, on_end, on_note};
    return h;
}

static int exists(const char *dir, const char *file)
{
    char p[600];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return stat(p, &st) == 0;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*n ? *n : 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(x, y, na);
    free(x), free(y);
}

/* ----------------------------------------------------------------- tests */

static void test_two_seeds(void **state)
{
    (void)state;
    char dir[300], alone[300], a[400], b[400];
    snprintf(dir, sizeof dir, "%s/seeds", g_dir);
    const uint64_t seeds[2] = {5, 7};
    dfl_train_pairs_params pp = tiny_pairs(dir, seeds, 2);
    seen s;
    memset(&s, 0, sizeof s);
    dfl_train_pairs_hooks h = hooks_of(&s);
    dfl_train_pairs_result res;
    dfl_error err = {DFL_OK, ""};
    assert_int_equal(dfl_train_pairs_run(&pp, &h, &res, &err), DFL_OK);
    assert_int_equal(res.models, 4);
    assert_int_equal(res.stopped, 0);
    assert_int_equal(s.begins, 4);
    assert_int_equal(s.ended_ok, 4);
    assert_string_equal(s.last, "diff");
    assert_true(s.notes >= 3); /* two "seed S" lines and the summary's */
    assert_non_null(res.summary_md);
    assert_non_null(strstr(res.summary_md, "Transformer"));
    assert_non_null(strstr(res.summary_md, "Diff"));
    free(res.summary_md);
    const char *files[] = {"seed-5/transformer/model.safetensors",
                           "seed-5/diff/checkpoint.safetensors",
                           "seed-7/transformer/train.csv",
                           "seed-7/diff/model.safetensors",
                           "seed-5/train.png",
                           "seeds_curves.csv",
                           "seeds_steps_to.csv",
                           "seeds_steps_to.md",
                           "seeds.png"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        assert_true(exists(dir, files[i]));

    /* seed 7's Diff model is the run of seed 7 alone */
    dfl_train_params p = pp.diff;
    snprintf(alone, sizeof alone, "%s/alone", g_dir);
    p.out = alone, p.seed = 7;
    dfl_train_result r;
    assert_int_equal(dfl_train_run(&p, NULL, &r, &err), DFL_OK);
    snprintf(a, sizeof a, "%s/model.safetensors", alone);
    snprintf(b, sizeof b, "%s/seed-7/diff/model.safetensors", dir);
    assert_same_file(a, b);

    /* a resume finds every model trained and rewrites the summary */
    pp.llama.resume = pp.diff.resume = 1;
    memset(&s, 0, sizeof s);
    assert_int_equal(dfl_train_pairs_run(&pp, &h, &res, &err), DFL_OK);
    assert_int_equal(res.models, 4);
    assert_int_equal(s.already, 4);
    assert_non_null(res.summary_md);
    free(res.summary_md);

    /* only the summary */
    pp.summarize = 1;
    memset(&s, 0, sizeof s);
    assert_int_equal(dfl_train_pairs_run(&pp, &h, &res, &err), DFL_OK);
    assert_int_equal(res.models, 0);
    assert_int_equal(s.begins, 0);
    assert_non_null(res.summary_md);
    free(res.summary_md);
}

static void test_stop(void **state)
{
    (void)state;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/stopped", g_dir);
    const uint64_t seeds[2] = {1, 2};
    dfl_train_pairs_params pp = tiny_pairs(dir, seeds, 2);
    seen s;
    memset(&s, 0, sizeof s);
    s.stop_after_steps = 1;
    dfl_train_pairs_hooks h = hooks_of(&s);
    dfl_train_pairs_result res;
    dfl_error err = {DFL_OK, ""};
    assert_int_equal(dfl_train_pairs_run(&pp, &h, &res, &err), DFL_OK);
    assert_int_equal(res.stopped, 1);
    assert_int_equal(s.begins, 1); /* the Diff model and seed 2 never start */
    assert_null(res.summary_md);
    assert_true(exists(dir, "seed-1/transformer/checkpoint.safetensors"));
    assert_false(exists(dir, "seed-1/diff"));
    assert_false(exists(dir, "seed-2"));
    assert_false(exists(dir, "seeds_steps_to.md"));
}

static void test_usage(void **state)
{
    (void)state;
    uint64_t seeds[65] = {0};
    dfl_train_pairs_result res;
    dfl_error err = {DFL_OK, ""};
    dfl_train_pairs_params pp = tiny_pairs(g_dir, seeds, 65);
    assert_int_equal(dfl_train_pairs_run(&pp, NULL, &res, &err), DFL_ERR_USAGE);
    pp = tiny_pairs(g_dir, NULL, 0);
    pp.summarize = 1;
    assert_int_equal(dfl_train_pairs_run(&pp, NULL, &res, &err), DFL_ERR_USAGE);
    pp = tiny_pairs(NULL, NULL, 0);
    assert_int_equal(dfl_train_pairs_run(&pp, NULL, &res, &err), DFL_ERR_USAGE);
    pp = tiny_pairs(g_dir, seeds, 0); /* seeds given with a count of 0 */
    assert_int_equal(dfl_train_pairs_run(&pp, NULL, &res, &err), DFL_ERR_USAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_seeds),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
