/* test_probe_shard.c — the MPI split of prompts by cost, against the best split found by
 * brute force, and its error paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "analysis/probe.h"
#include "model/forward.h"

static const char *CONFIG = "{\"model_type\": \"llama\", \"vocab_size\": 1000, \"hidden_size\": 64,"
                            " \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4}";

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static size_t urand(size_t n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (size_t)(rng % n);
}

static dfl_config config(void)
{
    dfl_config c;
    dfl_error err;
    assert_int_equal(dfl_config_parse(CONFIG, strlen(CONFIG), "test", &c, &err), DFL_OK);
    return c;
}

/* The smallest possible largest load over all ranks^n assignments. */
static double best_makespan(const double *cost, size_t n, int ranks)
{
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total *= (size_t)ranks;
    double best = 1e300;
    for (size_t a = 0; a < total; a++) {
        double load[4] = {0};
        size_t code = a;
        for (size_t i = 0; i < n; i++, code /= (size_t)ranks)
            load[code % (size_t)ranks] += cost[i];
        double worst = 0;
        for (int r = 0; r < ranks; r++)
            worst = load[r] > worst ? load[r] : worst;
        best = worst < best ? worst : best;
    }
    return best;
}

static void test_shard_near_best(void **st)
{
    (void)st;
    dfl_config c = config();
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 1 + urand(8), tokens[8];
        int ranks = 2 + (int)urand(3), owner[8];
        double cost[8], load[4] = {0};
        for (size_t i = 0; i < n; i++)
            tokens[i] = 1 + urand(4096), cost[i] = dfl_forward_flops(&c, (int64_t)tokens[i]);
        dfl_error err;
        assert_int_equal(dfl_probe_shard(&c, tokens, n, ranks, owner, &err), DFL_OK);
        for (size_t i = 0; i < n; i++) {
            assert_true(owner[i] >= 0 && owner[i] < ranks);
            load[owner[i]] += cost[i];
        }
        double worst = 0;
        for (int r = 0; r < ranks; r++)
            worst = load[r] > worst ? load[r] : worst;
        /* Graham's bound for longest-first list scheduling */
        double bound = (4.0 / 3.0 - 1.0 / (3.0 * ranks)) * best_makespan(cost, n, ranks);
        assert_true(worst <= bound * (1 + 1e-12));
        /* every rank computes the same split from the same inputs */
        int again[8];
        assert_int_equal(dfl_probe_shard(&c, tokens, n, ranks, again, &err), DFL_OK);
        assert_memory_equal(owner, again, n * sizeof *owner);
    }
}

static void test_shard_known_split(void **st)
{
    (void)st;
    dfl_config c = config();
    /* one long prompt against three short ones whose total costs less: the long one
     * alone on one rank */
    size_t tokens[4] = {100, 4000, 100, 100};
    int owner[4];
    dfl_error err;
    assert_int_equal(dfl_probe_shard(&c, tokens, 4, 2, owner, &err), DFL_OK);
    assert_int_equal(owner[1], 0);
    assert_int_equal(owner[0], 1);
    assert_int_equal(owner[2], 1);
    assert_int_equal(owner[3], 1);
}

static void test_shard_errors(void **st)
{
    (void)st;
    dfl_config c = config();
    size_t tokens[1] = {5};
    int owner[1];
    dfl_error err;
    assert_int_equal(dfl_probe_shard(&c, tokens, 1, 0, owner, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "0 ranks"));
    assert_int_equal(dfl_probe_shard(&c, tokens, 0, 3, owner, &err), DFL_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_near_best),
        cmocka_unit_test(test_shard_known_split),
        cmocka_unit_test(test_shard_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
