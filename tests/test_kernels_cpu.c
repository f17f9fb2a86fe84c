/* test_kernels_cpu.c — the kernels' instruction-set paths: the AVX-512 sgemm against a
 * double-precision product by brute force (tails in every dimension, depths past one
 * packed block, strides, both weight layouts and bf16 weights, threaded and inside a
 * parallel region), the product with a weight packed once (the attention's keys) against
 * the unpacked one bit for bit and against brute force, and each path the CPU has, forced by DFL_CPU in a child process
 * of this test (the path is fixed once per process), running the matmul of F32 and BF16 weights against its naive twin,
 * the bf16 conversion bit for bit, and the row kernels (RMSNorm, RoPE, softmax, SwiGLU, log-sum-exp) of that path
 * against their definitions in double. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/half.h"
#include "model/kernels.h"
#include "model/kernels_gemm.h"
#include "model/safetensors.h"

extern char **environ;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float *rand_array(size_t n)
{
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = frand();
    return a;
}

/* The best path of this CPU, from the CPU alone. */
static dfl_cpu_path cpu_best(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return DFL_CPU_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return DFL_CPU_AVX2;
    return DFL_CPU_SCALAR;
}

/* y (stride ldy) against Σ_k x·op(w) in double; each error within 1e-6 of Σ|x·w|
 * (f32 rounding over at most a few thousand terms) — and y outside [n, out] untouched. */
static int check_gemm(int64_t n, int64_t out, int64_t k, int wt, float alpha, int in_parallel, int ws_mode)
{
    /* ws_mode 0: no scratch; 1: a scratch for every thread, 4 bytes off 64-byte alignment;
     * 2: one too small for two threads (blocks allocated for the call instead) */
    size_t ws_n = ws_mode == 1 ? (size_t)3 << 20 : ws_mode == 2 ? (size_t)1 << 10 : 0;
    float *ws_base = ws_n ? malloc((ws_n + 32) * sizeof(float)) : NULL;
    float *ws = ws_base ? (float *)(((uintptr_t)ws_base + 63) / 64 * 64) + 1 : NULL;
    int64_t ldx = k + 3, ldw = (wt ? k : out) + 5, ldy = out + 2; /* wt 0: w[k, out]; 1, 2: w[out, k] */
    float *x = rand_array((size_t)(n * ldx)), *w = rand_array((size_t)((wt ? out : k) * ldw));
    float *y = malloc((size_t)(n * ldy) * sizeof *y);
    for (int64_t i = 0; i < n * ldy; i++)
        y[i] = 12345.0f;
    uint16_t *wb = NULL; /* wt 2: w[out, k] in bf16, alpha 1 */
    if (wt == 2) {
        wb = malloc((size_t)(out * ldw) * sizeof *wb);
        for (int64_t i = 0; i < out * ldw; i++) {
            wb[i] = dfl_f32_to_bf16(w[i]);
            w[i] = dfl_bf16_to_f32(wb[i]);
        }
        alpha = 1.0f;
    }
#pragma omp parallel num_threads(2) if (in_parallel)
    {
#pragma omp single
        {
            if (wb)
                assert_true(dfl_gemm_avx512_bf16(y, ldy, x, ldx, wb, ldw, n, out, k, ws, ws_n));
            else
                dfl_gemm_avx512(y, ldy, x, ldx, w, ldw, wt, n, out, k, alpha, ws, ws_n);
        }
    }
    free(wb);
    int bad = 0;
    for (int64_t i = 0; i < n && !bad; i++)
        for (int64_t o = 0; o < ldy && !bad; o++) {
            if (o >= out) {
                bad = y[i * ldy + o] != 12345.0f;
                continue;
            }
            double acc = 0, mag = 0;
            for (int64_t j = 0; j < k; j++) {
                double v = wt ? w[o * ldw + j] : w[j * ldw + o];
                acc += (double)x[i * ldx + j] * v;
                mag += fabs((double)x[i * ldx + j] * v);
            }
            acc *= alpha, mag *= fabs(alpha);
            if (fabs(y[i * ldy + o] - acc) > 1e-6 * mag + 1e-30) {
                fprintf(stderr, "gemm n=%lld out=%lld k=%lld wt=%d: y[%lld, %lld] = %.9g, want %.9g\n", (long long)n,
                        (long long)out, (long long)k, wt, (long long)i, (long long)o, y[i * ldy + o], acc);
                bad = 1;
            }
        }
    free(x), free(w), free(y), free(ws_base);
    return !bad;
}

static void test_gemm_avx512_matches_brute_force(void **state)
{
    (void)state;
    if (cpu_best() != DFL_CPU_AVX512) {
        printf("this CPU has no AVX-512: only the paths it has are tested (test_forced_paths)\n");
        return;
    }
    /* n, out, k: a single element; tails of the 14-row and 32-column blocks; depth past
     * one 512-deep pass; more columns than one 256-column packed block; a shape large
     * enough to run on both threads, split by columns and (few columns) by rows */
    static const int64_t shapes[][3] = {{1, 1, 1},    {13, 31, 7},   {15, 33, 513},  {29, 65, 1030},
                                        {3, 300, 64}, {200, 70, 96}, {130, 600, 80}, {700, 40, 50}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int wt = 0; wt < 3; wt++)
            for (int par = 0; par < 2; par++)
                for (int ws = 0; ws < 3; ws++)
                    assert_true(
                        check_gemm(shapes[s][0], shapes[s][1], shapes[s][2], wt, wt == 1 ? 1.0f : 0.125f, par, ws));
    /* k = 0: an empty sum writes zeros */
    float y[6] = {1, 2, 3, 4, 5, 6}, x[1] = {1}, w[1] = {1};
    dfl_gemm_avx512(y, 3, x, 1, w, 1, 1, 2, 3, 0, 1.0f, NULL, 0);
    for (int i = 0; i < 6; i++)
        assert_true(y[i] == 0.0f);
}

/* A weight packed once (dfl_gemm_pack) and multiplied by dfl_gemm_avx512_packed, over
 * all its rows and a prefix of them (the keys a query block sees): bit-identical to the
 * unpacked product of the same rows, and within 1e-6 of Σ|x·w| of the double sums;
 * serially inside a parallel region (as the attention's tasks run it) and over threads,
 * with and without scratch. Depths past one 256-deep pass are refused (0 floats). */
static void test_gemm_packed(void **state)
{
    (void)state;
    if (cpu_best() != DFL_CPU_AVX512) {
        printf("this CPU has no AVX-512: the packed product is the AVX-512 path's\n");
        return;
    }
    assert_int_equal(dfl_gemm_packed_floats(100, 257), 0);
    assert_int_equal(dfl_gemm_packed_floats(33, 10), 64 * 10);
    static const int64_t shapes[][3] = {{1, 1, 1},     {13, 31, 7},    {3, 300, 64},
                                        {200, 70, 96}, {130, 600, 80}, {29, 65, 256}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++) {
        int64_t n = shapes[sh][0], out = shapes[sh][1], k = shapes[sh][2], ldx = k + 3, ldw = k + 5;
        float *x = rand_array((size_t)(n * ldx)), *w = rand_array((size_t)(out * ldw));
        float *bp = aligned_alloc(64, (dfl_gemm_packed_floats(out, k) + 16) * sizeof(float));
        float *y = malloc((size_t)(n * out) * sizeof *y), *yr = malloc((size_t)(n * out) * sizeof *yr);
        float *ws = aligned_alloc(64, ((size_t)3 << 20) * sizeof(float));
        assert_non_null(bp);
        dfl_gemm_pack(bp, w, ldw, out, k);
        int64_t prefixes[2] = {out, out / 2 + 1};
        for (int pi = 0; pi < 2; pi++)
            for (int par = 0; par < 2; par++)
                for (int use_ws = 0; use_ws < 2; use_ws++) {
                    int64_t o1 = prefixes[pi];
#pragma omp parallel num_threads(2) if (par)
                    {
#pragma omp single
                        {
                            dfl_gemm_avx512_packed(y, o1, x, ldx, bp, n, o1, k, 0.5f, use_ws ? ws : NULL,
                                                   use_ws ? (size_t)3 << 20 : 0);
                            dfl_gemm_avx512(yr, o1, x, ldx, w, ldw, 1, n, o1, k, 0.5f, NULL, 0);
                        }
                    }
                    assert_memory_equal(y, yr, (size_t)(n * o1) * sizeof *y);
                    for (int64_t i = 0; i < n; i++)
                        for (int64_t o = 0; o < o1; o++) {
                            double acc = 0, mag = 0;
                            for (int64_t j = 0; j < k; j++) {
                                acc += (double)x[i * ldx + j] * w[o * ldw + j];
                                mag += fabs((double)x[i * ldx + j] * w[o * ldw + j]);
                            }
                            assert_true(fabs(y[i * o1 + o] - 0.5 * acc) <= 0.5e-6 * mag + 1e-30);
                        }
                }
        free(x), free(w), free(bp), free(y), free(yr), free(ws);
    }
}

/* ------------------------------------------------------ one forced path */

/* |got − want| within tol·(|want| + floor); prints the first miss. */
static int close_to(const char *what, int64_t i, double got, double want, double tol, double floor)
{
    if (fabs(got - want) <= tol * (fabs(want) + floor)) return 1;
    fprintf(stderr, "%s[%lld] = %.9g, want %.9g\n", what, (long long)i, got, want);
    return 0;
}

/* The row kernels on this process's path against their definitions in double: RMSNorm
 * (with and without a gain), RoPE (both pairings), the windowed softmax, SwiGLU (with
 * its extremes) and log-sum-exp with the first argmax. Widths leave vector tails. */
static int rows_match(void)
{
    int ok = 1;
    const int64_t n = 5, d = 67;
    float *x = rand_array((size_t)(n * d)), *gain = rand_array((size_t)d), *y = malloc((size_t)(n * d) * 4);
    for (int g = 0; g < 2 && ok; g++) {
        dfl_rmsnorm(y, x, g ? gain : NULL, n, d, 1e-5f, 0.7f);
        for (int64_t i = 0; i < n && ok; i++) {
            double ss = 0;
            for (int64_t j = 0; j < d; j++)
                ss += (double)x[i * d + j] * x[i * d + j];
            for (int64_t j = 0; j < d && ok; j++)
                ok = close_to("rmsnorm", i * d + j, y[i * d + j],
                              x[i * d + j] / sqrt(ss / d + 1e-5) * 0.7 * (g ? gain[j] : 1.0), 1e-6, 1e-3);
        }
    }
    /* RoPE: 3 heads of 70 (35 pairs), angles in [-pi, pi] */
    const int64_t nh = 3, hd = 70, half = hd / 2;
    float *r = rand_array((size_t)(nh * hd)), *r0 = malloc((size_t)(nh * hd) * 4), *c = malloc((size_t)half * 4),
          *sn = malloc((size_t)half * 4);
    memcpy(r0, r, (size_t)(nh * hd) * 4);
    for (int64_t j = 0; j < half; j++) {
        double a = 3.14159265358979 * frand();
        c[j] = (float)cos(a), sn[j] = (float)sin(a);
    }
    for (int il = 0; il < 2 && ok; il++) {
        memcpy(r, r0, (size_t)(nh * hd) * 4);
        dfl_rope_apply(r, 1, nh * hd, nh, hd, c, sn, il);
        for (int64_t h = 0; h < nh; h++)
            for (int64_t j = 0; j < half && ok; j++) {
                int64_t ia = h * hd + (il ? 2 * j : j), ib = h * hd + (il ? 2 * j + 1 : j + half);
                double a = r0[ia], b = r0[ib];
                ok = close_to("rope a", ia, r[ia], a * c[j] - b * sn[j], 1e-6, 1.0) &&
                     close_to("rope b", ib, r[ib], a * sn[j] + b * c[j], 1e-6, 1.0);
            }
    }
    /* softmax: 4 rows of 203 columns, windows [lo, lim], scores up to ±20 */
    const int64_t sr = 4, sc = 203;
    int64_t lo[4] = {0, 5, 17, 0}, lim[4] = {0, 100, 202, 150};
    float *s = rand_array((size_t)(sr * sc)), *s0 = malloc((size_t)(sr * sc) * 4);
    for (int64_t i = 0; i < sr * sc; i++)
        s[i] *= 20.0f;
    memcpy(s0, s, (size_t)(sr * sc) * 4);
    dfl_softmax_window(s, sr, sc, sc, lo, lim);
    for (int64_t i = 0; i < sr && ok; i++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = lo[i]; j <= lim[i]; j++)
            mx = fmax(mx, s0[i * sc + j]);
        for (int64_t j = lo[i]; j <= lim[i]; j++)
            sum += exp(s0[i * sc + j] - mx);
        for (int64_t j = 0; j < sc && ok; j++)
            ok = close_to("softmax", i * sc + j, s[i * sc + j],
                          j >= lo[i] && j <= lim[i] ? exp(s0[i * sc + j] - mx) / sum : 0.0, 1e-5, 1e-30);
    }
    /* SwiGLU: g·σ(g)·u over 1000 values in ±30 and the extremes */
    const int64_t ng = 1000;
    float *g = rand_array((size_t)ng), *g0 = malloc((size_t)ng * 4), *u = rand_array((size_t)ng);
    for (int64_t i = 0; i < ng; i++)
        g[i] *= 30.0f;
    g[3] = -100.0f, g[4] = 100.0f, g[5] = -INFINITY, g[6] = INFINITY, g[7] = 0.0f, g[8] = -88.8f, g[9] = -87.5f;
    memcpy(g0, g, (size_t)ng * 4);
    dfl_swiglu(g, u, 1, ng);
    ok = ok && isnan(g[5]) && g[6] == INFINITY * (u[6] > 0 ? 1.0f : -1.0f);
    for (int64_t i = 0; i < ng && ok; i++)
        if (i != 5 && i != 6) ok = close_to("swiglu", i, g[i], g0[i] / (1.0 + exp(-(double)g0[i])) * u[i], 1e-5, 1e-30);
    /* log-sum-exp and the first argmax of 3 rows of 1001 (a tie in row 1) */
    const int64_t lr = 3, V = 1001;
    float *z = rand_array((size_t)(lr * V));
    for (int64_t i = 0; i < lr * V; i++)
        z[i] *= 15.0f;
    z[V + 10] = z[V + 900] = 40.0f;
    double lse[3];
    int32_t am[3];
    int finite = 0;
    dfl_logsumexp_argmax(z, lr, V, lse, am, &finite);
    ok = ok && finite;
    z[V + 500] = NAN; /* the finiteness flag of this path */
    dfl_logsumexp_argmax(z, lr, V, lse, am, &finite);
    ok = ok && !finite;
    z[V + 500] = -INFINITY;
    dfl_logsumexp_argmax(z, lr, V, lse, am, &finite);
    ok = ok && !finite;
    z[V + 500] = 0.0f;
    dfl_logsumexp_argmax(z, lr, V, lse, am, NULL);
    for (int64_t i = 0; i < lr && ok; i++) {
        int64_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (z[i * V + v] > z[i * V + best]) best = v;
        double sum = 0;
        for (int64_t v = 0; v < V; v++)
            sum += exp((double)z[i * V + v] - z[i * V + best]);
        ok = close_to("lse", i, lse[i], z[i * V + best] + log(sum), 1e-6, 1.0) && am[i] == (int32_t)best;
        if (am[i] != (int32_t)best)
            fprintf(stderr, "argmax[%lld] = %d, want %lld\n", (long long)i, am[i], (long long)best);
    }
    ok = ok && am[1] == 10;
    free(x), free(gain), free(y), free(r), free(r0), free(c), free(sn), free(s), free(s0), free(g), free(g0), free(u);
    free(z);
    return ok;
}

/* In the child: DFL_CPU=name was set by the parent. The path must be the one asked for
 * (or the CPU's best when it lacks it), and the matmul of F32 and BF16 weights through
 * it must match the naive twin, the bf16 rows the exact conversion. Exit status 0 = ok. */
static int child_run(const char *name)
{
    dfl_cpu_path want = strcmp(name, "scalar") == 0 ? DFL_CPU_SCALAR
                        : strcmp(name, "avx2") == 0 ? DFL_CPU_AVX2
                                                    : DFL_CPU_AVX512;
    dfl_cpu_path best = cpu_best(), got = dfl_cpu(), vec = dfl_cpu_vector();
    if (got != (want < best ? want : best) || vec != got) {
        fprintf(stderr, "DFL_CPU=%s: path %s, row kernels %s\n", name, dfl_cpu_name(got), dfl_cpu_name(vec));
        return 1;
    }
    if (!rows_match()) {
        fprintf(stderr, "DFL_CPU=%s: a row kernel differs from its definition\n", name);
        return 1;
    }
    const int64_t n = 45, in = 300, out = 77;
    float *x = rand_array((size_t)(n * in)), *w = rand_array((size_t)(out * in));
    float *y = malloc((size_t)(n * out) * 4), *yr = malloc((size_t)(n * out) * 4),
          *rows = malloc((size_t)(out * in) * 4);
    float *scratch = malloc(dfl_matmul_scratch(in) * sizeof(float));
    uint16_t *wb = malloc((size_t)(out * in) * 2);
    for (int64_t i = 0; i < out * in; i++)
        wb[i] = dfl_f32_to_bf16(w[i]);
    int ok = 1;
    for (int dt = 0; dt < 2 && ok; dt++) {
        dfl_wmat m = {dt ? (const void *)wb : (const void *)w, dt ? DFL_DTYPE_BF16 : DFL_DTYPE_F32, out, in, 0};
        dfl_matmul_wmat(y, x, &m, n, scratch);
        dfl_matmul_wmat_naive(yr, x, &m, n);
        for (int64_t i = 0; i < n * out && ok; i++)
            ok = fabs((double)y[i] - yr[i]) < 1e-4; /* sums of 300 products of size < 1 */
    }
    dfl_wmat mb = {wb, DFL_DTYPE_BF16, out, in, 0};
    dfl_wmat_rows(&mb, 0, out, rows);
    for (int64_t i = 0; i < out * in && ok; i++)
        ok = rows[i] == dfl_bf16_to_f32(wb[i]);
    if (!ok) fprintf(stderr, "DFL_CPU=%s: a kernel differs from its twin\n", name);
    free(x), free(w), free(y), free(yr), free(rows), free(scratch), free(wb);
    return !ok;
}

/* Run this test binary again as `self --path NAME` with DFL_CPU=NAME (or unset). */
static int spawn_path(const char *name)
{
    char **env = NULL;
    size_t ne = 0;
    while (environ[ne])
        ne++;
    env = calloc(ne + 2, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], "DFL_CPU=", 8) != 0) env[k++] = environ[i];
    char var[32];
    snprintf(var, sizeof var, "DFL_CPU=%s", name);
    if (strcmp(name, "auto") != 0) env[k++] = var;
    char *argv[] = {"test_kernels_cpu", "--path", (char *)name, NULL};
    pid_t pid;
    int st = -1;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, env) != 0 || waitpid(pid, &st, 0) != pid) st = -1;
    free(env);
    return st;
}

static void test_forced_paths(void **state)
{
    (void)state;
    /* every path: the CPU has scalar always; avx2 and avx512 when it has them (a path
     * the CPU lacks falls back, which the child checks too) */
    const char *names[] = {"scalar", "avx2", "avx512"};
    for (int p = 0; p < 3; p++) {
        int st = spawn_path(names[p]);
        if (st != 0) fprintf(stderr, "DFL_CPU=%s: child status %d\n", names[p], st);
        assert_int_equal(st, 0);
    }
    assert_int_equal(spawn_path("auto"), 0);
}

/* Unset DFL_CPU: AVX-512 products exactly when the CPU has it and OpenBLAS's kernels do
 * not; the row kernels on the CPU's best path. */
static int child_auto(void)
{
    dfl_cpu_path best = cpu_best(), want = best;
    if (best == DFL_CPU_AVX512 && dfl_gemm_openblas_is_avx512()) want = DFL_CPU_AVX2;
    if (dfl_cpu() != want || dfl_cpu_vector() != best) {
        fprintf(stderr, "auto: path %s, row kernels %s, want %s, %s\n", dfl_cpu_name(dfl_cpu()),
                dfl_cpu_name(dfl_cpu_vector()), dfl_cpu_name(want), dfl_cpu_name(best));
        return 1;
    }
    return !rows_match();
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--path") == 0)
        return strcmp(argv[2], "auto") == 0 ? child_auto() : child_run(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_avx512_matches_brute_force),
        cmocka_unit_test(test_gemm_packed),
        cmocka_unit_test(test_forced_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
