/* gemm_shapes.c — difflens' own matrix product (dfl_gemm, on the path dfl_cpu() chose)
 * on the shapes of a Llama forward pass: bench/sgemm_rate.c's measurement with the
 * library's product instead of OpenBLAS's.
 *
 *   gemm_shapes T D F V L THREADS [REPEATS]
 *
 * Times y[M, N] = x[M, K] · wᵀ with M = T for the dense projections (q, k, v, o: K = D,
 * N = D, 4 per layer; gate, up: K = D, N = F, 2; down: K = F, N = D, 1; LM head: K = D,
 * N = V, once), REPEATS times each (default 5) after a warm-up, the best counting;
 * stderr gets one line per shape, stdout the FLOP-weighted rate in GFLOP/s, as
 * sgemm_rate prints it. stderr also gets one attention task's QKᵀ (128 × 1024 × 64) and
 * AV (128 × 64 × 1024, w[k, out]), not in the weighted rate. The inputs stay in cache
 * between repeats: these are the product's own rates, an upper bound on what the forward
 * pass sees. */
#define _POSIX_C_SOURCE 199309L
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemm_bench.h"
#include "model/kernels_gemm.h"

/* Best seconds of `repeats` calls of y[n, out] = x[n, k] · op(w) (wt 1: w[out, k], 0:
 * w[k, out]); < 0 when out of memory. */
static double time_shape(int64_t n, int64_t out, int64_t k, int wt, int repeats)
{
    float *x = malloc((size_t)(n * k) * sizeof *x), *w = malloc((size_t)(out * k) * sizeof *w),
          *y = malloc((size_t)(n * out) * sizeof *y);
    double best = -1.0;
    if (x && w && y) {
        for (int64_t i = 0; i < n * k; i++)
            x[i] = (float)(i % 97) / 97.0f - 0.5f;
        for (int64_t i = 0; i < out * k; i++)
            w[i] = (float)(i % 89) / 89.0f - 0.5f;
        for (int r = 0; r <= repeats; r++) { /* r = 0: warm-up (threads, pages) */
            double t0 = now_seconds();
            dfl_gemm(y, out, x, k, w, wt ? k : out, wt, n, out, k, 1.0f);
            double dt = now_seconds() - t0;
            if (r > 0 && (best < 0 || dt < best)) best = dt;
        }
    }
    free(x), free(w), free(y);
    return best;
}

int main(int argc, char **argv)
{
    gemm_bench_args a;
    int bad = parse_gemm_bench_args("gemm_shapes", argc, argv, &a);
    if (bad) return bad;
    const int T = a.T, D = a.D, F = a.F, V = a.V, L = a.L, threads = a.threads, repeats = a.repeats;
    omp_set_num_threads(threads);
    fprintf(stderr, "dfl_gemm on the %s path\n", dfl_cpu_name(dfl_cpu()));
    struct {
        const char *name;
        int64_t n, out, k;
        int wt;
        double count; /* per forward pass; 0: not in the weighted rate */
    } shapes[] = {
        {"q/k/v/o", T, D, D, 1, 4.0 * L}, {"gate/up", T, F, D, 1, 2.0 * L},   {"down", T, D, F, 1, 1.0 * L},
        {"lm_head", T, V, D, 1, 1.0},     {"attn QK^T", 128, 1024, 64, 1, 0}, {"attn AV", 128, 64, 1024, 0, 0},
    };
    double flops = 0.0, seconds = 0.0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double t = time_shape(shapes[i].n, shapes[i].out, shapes[i].k, shapes[i].wt, repeats);
        if (t < 0) {
            fprintf(stderr, "gemm_shapes: out of memory for %s\n", shapes[i].name);
            return 1;
        }
        double f = 2.0 * (double)shapes[i].n * (double)shapes[i].out * (double)shapes[i].k;
        fprintf(stderr, "dfl_gemm M=%-5lld K=%-5lld N=%-5lld %-9s x%-3.0f best %8.4f s  %7.1f GFLOP/s\n",
                (long long)shapes[i].n, (long long)shapes[i].k, (long long)shapes[i].out, shapes[i].name,
                shapes[i].count, t, f / t * 1e-9);
        flops += shapes[i].count * f;
        seconds += shapes[i].count * t;
    }
    printf("%.2f\n", flops / seconds * 1e-9);
    return 0;
}
