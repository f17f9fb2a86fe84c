/* overhead.c — what probe's statistics cost on top of the plain forward pass.
 *
 *   overhead MODEL_DIR PROMPTS.jsonl REPEATS
 *
 * plain: dfl_forward computing the logits of every row and nothing else;
 * probe: dfl_probe_run with maps off (noise shares, logit and hidden outliers,
 * NLL/argmax, target accuracy: everything probe always writes), its forward time.
 * Best of REPEATS each, the first prompt only. Prints "plain_s probe_s ratio". */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "model/forward.h"
#include "model/model.h"
#include "analysis/probe.h"
#include "text/prompts.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static dfl_status discard(void *u, int64_t r0, int64_t n, int64_t V, const float *z, dfl_error *e)
{
    (void)u, (void)r0, (void)n, (void)V, (void)z, (void)e;
    return DFL_OK;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: overhead MODEL_DIR PROMPTS.jsonl REPEATS\n");
        return 2;
    }
    int repeats = atoi(argv[3]);
    dfl_error err;
    dfl_model *m = NULL;
    dfl_prompt_set ps;
    if (dfl_model_load(argv[1], &m, &err) || dfl_prompt_set_read(argv[2], &ps, &err)) {
        fprintf(stderr, "overhead: %s\n", err.msg);
        return 1;
    }
    dfl_capture cap = {.logits_rows = discard};
    double plain = 1e30, probe = 1e30;
    for (int i = 0; i < repeats; i++) {
        double t0 = now();
        if (dfl_forward(m, ps.items[0].tokens, (int64_t)ps.items[0].n_tokens, NULL, &cap, &err)) {
            fprintf(stderr, "overhead: %s\n", err.msg);
            return 1;
        }
        double t = now() - t0;
        plain = t < plain ? t : plain;

        dfl_probe_params p = dfl_probe_params_default();
        p.model_dir = argv[1];
        p.prompts_path = argv[2];
        p.out_path = "build/bench/overhead.h5";
        p.overwrite = 1;
        dfl_probe_report rep;
        if (dfl_probe_run(&p, &rep, &err)) {
            fprintf(stderr, "overhead: %s\n", err.msg);
            return 1;
        }
        probe = rep.forward_seconds < probe ? rep.forward_seconds : probe;
    }
    printf("%.4f %.4f %.3f\n", plain, probe, probe / plain);
    dfl_prompt_set_free(&ps);
    dfl_model_free(m);
    return 0;
}
