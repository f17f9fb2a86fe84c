/* gemm_shapes.c — difflens' own matrix product (dfl_gemm, on the path dfl_cpu() chose)
 * on the shapes of the bench model's forward pass, in GFLOP/s.
 *
 *   gemm_shapes [REPEATS]       (threads: OMP_NUM_THREADS; DFL_CPU picks the path)
 *
 * Shapes (y[n, out] = x[n, k] · wᵀ unless noted), T = 1024, hidden 512, FFN 1408:
 * q/k/v/o (1024 × 512 × 512), gate and up (1024 × 1408 × 512), down (1024 × 512 ×
 * 1408), the LM head's block (512 × 32000 × 512), and one attention task's QKᵀ
 * (128 × 1024 × 64) and AV (128 × 64 × 1024, w[k, out]). Each is timed REPEATS times
 * (default 20) on the same inputs, the best counts: inputs that stay in cache, so these
 * are the product's own rates, an upper bound on what the forward pass sees. */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "model/kernels_gemm.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long repeats = 20;
    if (argc > 2 || (argc == 2 && ((repeats = strtol(argv[1], NULL, 10)) < 1 || repeats > 100000))) {
        fprintf(stderr, "usage: gemm_shapes [REPEATS (1-100000)]\n");
        return 2;
    }
    static const struct {
        const char *name;
        int64_t n, out, k;
        int wt;
    } shapes[] = {{"q, k, v, o", 1024, 512, 512, 1},    {"gate, up", 1024, 1408, 512, 1},
                  {"down", 1024, 512, 1408, 1},         {"LM head block", 512, 32000, 512, 1},
                  {"attention QK^T", 128, 1024, 64, 1}, {"attention AV", 128, 64, 1024, 0}};
    printf("path %s\n", dfl_cpu_name(dfl_cpu()));
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t n = shapes[s].n, out = shapes[s].out, k = shapes[s].k;
        float *x = malloc((size_t)(n * k) * sizeof *x), *w = malloc((size_t)(out * k) * sizeof *w),
              *y = malloc((size_t)(n * out) * sizeof *y);
        if (!x || !w || !y) {
            fprintf(stderr, "gemm_shapes: out of memory\n");
            return 1;
        }
        for (int64_t i = 0; i < n * k; i++)
            x[i] = (float)(i % 97) / 97.0f - 0.5f;
        for (int64_t i = 0; i < out * k; i++)
            w[i] = (float)(i % 89) / 89.0f - 0.5f;
        double best = 1e30;
        for (long r = 0; r < repeats; r++) {
            double t = now_seconds();
            dfl_gemm(y, out, x, k, w, shapes[s].wt ? k : out, shapes[s].wt, n, out, k, 1.0f);
            t = now_seconds() - t;
            best = t < best ? t : best;
        }
        printf("%-16s %5lld x %5lld x %5lld  %7.1f GFLOP/s\n", shapes[s].name, (long long)n, (long long)out,
               (long long)k, 2.0 * (double)n * (double)out * (double)k / best / 1e9);
        free(x), free(w), free(y);
    }
    return 0;
}
