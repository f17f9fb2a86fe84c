/* gen_choose_harness.c — probe --generate's token choice (dfl__gen_choose) on given
 * logits, for tests/test_generate.py.
 *
 *   gen_choose_harness TEMPERATURE TOP_K TOP_P DRAWS < logits (V numbers)
 *
 * Draws with u = (i + 0.5) / DRAWS for i < DRAWS, an even grid over [0, 1): each token is
 * chosen for a share of the grid equal to its probability, within 1 / DRAWS. Prints one
 * count per token. TEMPERATURE 0 = greedy.
 */
#include <stdio.h>
#include <stdlib.h>

#include "analysis/probe_generate.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: gen_choose_harness TEMPERATURE TOP_K TOP_P DRAWS < logits\n");
        return 1;
    }
    dfl_generate_params gp = {0};
    gp.temperature = strtod(argv[1], NULL);
    gp.sample = gp.temperature > 0;
    gp.top_k = strtol(argv[2], NULL, 10);
    gp.top_p = strtod(argv[3], NULL);
    long draws = strtol(argv[4], NULL, 10);
    int64_t V = 0, cap = 1024;
    float *z = malloc((size_t)cap * sizeof *z);
    double v;
    while (z && scanf("%lf", &v) == 1) {
        if (V == cap && !(z = realloc(z, (size_t)(cap *= 2) * sizeof *z))) break;
        z[V++] = (float)v;
    }
    long *count = calloc((size_t)V, sizeof *count);
    dfl__gen_pair *pairs = malloc((size_t)V * sizeof *pairs);
    double *prob = malloc((size_t)V * sizeof *prob);
    if (!z || !count || !pairs || !prob || V == 0) return 1;
    for (long i = 0; i < draws; i++)
        count[dfl__gen_choose(&gp, z, V, ((double)i + 0.5) / (double)draws, pairs, prob)]++;
    for (int64_t t = 0; t < V; t++)
        printf("%ld\n", count[t]);
    free(z);
    free(count);
    free(pairs);
    free(prob);
    return 0;
}
