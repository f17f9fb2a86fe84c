/* quantize_forward.c — what probe --quantize costs: the forward pass of a fake-quantized
 * model against the same model's plain forward, in one process, alternating (the load
 * of a shared machine drifts; each pair of passes sees about the same).
 *
 *   quantize_forward MODEL_DIR PROMPTS.jsonl REPEATS SPEC...
 *
 * Per SPEC: the model loaded a second time and dfl_quant_model applied to it (its load
 * and its weight pass timed apart), then REPEATS rounds of one plain pass (no --quantize)
 * and one quantized pass (dfl_forward_opts.quant = SPEC) over the first prompt, logits of
 * every row computed and dropped. Prints per SPEC: "SPEC plain_s quant_s ratio cpu_ratio
 * load_s pass_s pass_cpu_s plain_cpu_s quant_cpu_s" (best of REPEATS each: wall seconds,
 * their ratio, the ratio of the passes' CPU seconds over all threads — steadier on a
 * shared machine; load_s the plain load of the copy (the file is mapped, read later),
 * pass_s and pass_cpu_s its weight pass, wall and CPU). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "model/forward.h"
#include "model/model.h"
#include "model/quantize.h"
#include "text/prompts.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static dfl_status discard(void *u, int64_t r0, int64_t n, int64_t V, const float *z, dfl_error *e)
{
    (void)u, (void)r0, (void)n, (void)V, (void)z, (void)e;
    return DFL_OK;
}

/* Wall seconds of one forward pass of m over p (its CPU seconds, all threads, in *cpu),
 * or -1 on failure (printed). */
static double pass(const dfl_model *m, const dfl_prompt *p, const dfl_forward_opts *o, double *cpu)
{
    dfl_capture cap = {.logits_rows = discard};
    dfl_error err;
    double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    if (dfl_forward(m, p->tokens, (int64_t)p->n_tokens, o, &cap, &err)) {
        fprintf(stderr, "quantize_forward: %s\n", err.msg);
        return -1;
    }
    *cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    return now() - t0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: quantize_forward MODEL_DIR PROMPTS.jsonl REPEATS SPEC...\n");
        return 2;
    }
    int repeats = atoi(argv[3]);
    dfl_error err;
    dfl_model *base = NULL;
    dfl_prompt_set ps;
    if (dfl_model_load(argv[1], &base, &err) || dfl_prompt_set_read(argv[2], &ps, &err)) {
        fprintf(stderr, "quantize_forward: %s\n", err.msg);
        return 1;
    }
    const dfl_prompt *p = &ps.items[0];
    dfl_forward_opts plain = dfl_forward_opts_default();
    plain.release_layers = -1;
    int rc = 0;
    for (int a = 4; a < argc && !rc; a++) {
        dfl_qspec q = dfl_qspec_default();
        dfl_model *m = NULL;
        double t0 = now(), t1 = 0, c1 = 0, t2 = 0;
        if (dfl_qspec_parse(argv[a], &q, &err) || dfl_model_load(argv[1], &m, &err) ||
            ((t1 = now()), (c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID)), dfl_quant_model(m, &q, &err))) {
            fprintf(stderr, "quantize_forward: %s: %s\n", argv[a], err.msg);
            dfl_model_free(m);
            rc = 1;
            break;
        }
        t2 = now();
        double pass_cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c1;
        dfl_forward_opts o = plain;
        o.quant = &q;
        double best_p = 1e30, best_q = 1e30, cpu_p = 1e30, cpu_q = 1e30, cp, cq;
        for (int r = 0; r < repeats; r++) {
            double sp = pass(base, p, &plain, &cp), sq = pass(m, p, &o, &cq);
            if (sp < 0 || sq < 0) rc = 1;
            if (sp < best_p) best_p = sp;
            if (sq < best_q) best_q = sq;
            if (cp < cpu_p) cpu_p = cp;
            if (cq < cpu_q) cpu_q = cq;
        }
        printf("%s %.4f %.4f %.4f %.4f %.4f %.4f %.4f %.4f %.4f\n", argv[a], best_p, best_q, best_q / best_p,
               cpu_q / cpu_p, t1 - t0, t2 - t1, pass_cpu, cpu_p, cpu_q);
        fflush(stdout);
        dfl_model_free(m);
    }
    dfl_prompt_set_free(&ps);
    dfl_model_free(base);
    return rc;
}
