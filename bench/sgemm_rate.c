/* sgemm_rate.c — OpenBLAS sgemm throughput on the shapes of a Llama forward pass.
 *
 *   sgemm_rate T D F V L THREADS [REPEATS]
 *
 * Times C[M, N] = A[M, K] · B[N, K]ᵀ (row-major, B transposed: the call dfl_matmul_xwt
 * in lib/model/kernels.c makes) with M = T for the dense projections of one forward pass:
 *   q, k, v, o   K = D, N = D     4 per layer
 *   gate, up     K = D, N = F     2 per layer
 *   down         K = F, N = D     1 per layer
 *   LM head      K = D, N = V     once
 * Each shape is timed REPEATS times (default 5) after one warm-up call; the best time
 * counts. stderr gets one line per shape; stdout gets one number: the FLOP-weighted
 * rate in GFLOP/s, i.e. (Σ count·flops) / (Σ count·best seconds) over the shapes with
 * the counts above — the time the forward pass's projections would take at the rate
 * OpenBLAS reaches on each shape. Built with the library's flags and OpenBLAS (OpenMP
 * build), so OPENBLAS_CORETYPE and the thread count act on both the same way.
 */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemm_bench.h"

/* ------------------------------------------------------------------ helpers */

/* n floats filled with a deterministic pattern in [-1, 1); NULL when out of memory. */
static float *filled(size_t n, uint32_t seed)
{
    if (n > SIZE_MAX / sizeof(float)) return NULL;
    float *a = malloc(n * sizeof(float));
    if (!a) return NULL;
    uint32_t x = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        a[i] = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
    }
    return a;
}

/* Best seconds of `repeats` calls of C[M, N] = A[M, K] · B[N, K]ᵀ; < 0 when out of memory. */
static double time_shape(int M, int K, int N, int repeats)
{
    float *a = filled((size_t)M * (size_t)K, 1), *b = filled((size_t)N * (size_t)K, 2);
    float *c = filled((size_t)M * (size_t)N, 3);
    double best = -1.0;
    if (a && b && c) {
        for (int r = 0; r <= repeats; r++) { /* r = 0: warm-up (thread pool, pages) */
            double t0 = now_seconds();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
            double dt = now_seconds() - t0;
            if (r > 0 && (best < 0 || dt < best)) best = dt;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/* --------------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    gemm_bench_args a;
    int bad = parse_gemm_bench_args("sgemm_rate", argc, argv, &a);
    if (bad) return bad;
    const int T = a.T, D = a.D, F = a.F, V = a.V, L = a.L, threads = a.threads, repeats = a.repeats;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);

    struct {
        const char *name;
        int K, N;
        double count;
    } shapes[] = {
        {"q/k/v/o", D, D, 4.0 * L},
        {"gate/up", D, F, 2.0 * L},
        {"down", F, D, 1.0 * L},
        {"lm_head", D, V, 1.0},
    };
    double flops = 0.0, seconds = 0.0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double t = time_shape(T, shapes[i].K, shapes[i].N, repeats);
        if (t < 0) {
            fprintf(stderr, "sgemm_rate: out of memory for M=%d K=%d N=%d\n", T, shapes[i].K, shapes[i].N);
            return 1;
        }
        double f = 2.0 * T * (double)shapes[i].K * (double)shapes[i].N;
        fprintf(stderr, "sgemm M=%-5d K=%-5d N=%-5d %-8s x%-3.0f best %8.4f s  %7.1f GFLOP/s\n", T, shapes[i].K,
                shapes[i].N, shapes[i].name, shapes[i].count, t, f / t * 1e-9);
        flops += shapes[i].count * f;
        seconds += shapes[i].count * t;
    }
    printf("%.2f\n", flops / seconds * 1e-9);
    return 0;
}
