/* kernels_gemm.c — the kernels' instruction-set path, and an AVX-512 sgemm (x · wᵀ). */
#include "model/kernels_gemm.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ path */

static dfl_cpu_path g_path;
static pthread_once_t g_path_once = PTHREAD_ONCE_INIT;

int dfl_gemm_openblas_is_avx512(void)
{
    const char *core = openblas_get_corename();
    static const char *const wide[] = {"skylakex", "cooperlake", "sapphirerapids"};
    for (size_t i = 0; core && i < sizeof wide / sizeof *wide; i++)
        if (strcasestr(core, wide[i])) return 1;
    return 0;
}

static void decide_path(void)
{
    __builtin_cpu_init();
    dfl_cpu_path best = __builtin_cpu_supports("avx512f") ? DFL_CPU_AVX512
                        : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? DFL_CPU_AVX2
                                                                                            : DFL_CPU_SCALAR;
    const char *env = getenv("DFL_CPU");
    dfl_cpu_path want = best;
    if (env && strcmp(env, "scalar") == 0)
        want = DFL_CPU_SCALAR;
    else if (env && strcmp(env, "avx2") == 0)
        want = DFL_CPU_AVX2;
    else if (env && strcmp(env, "avx512") == 0)
        want = DFL_CPU_AVX512;
    else if (best == DFL_CPU_AVX512 && dfl_gemm_openblas_is_avx512())
        want = DFL_CPU_AVX2; /* OpenBLAS multiplies with AVX-512 itself: keep its sgemm */
    g_path = want < best ? want : best;
}

dfl_cpu_path dfl_cpu(void)
{
    pthread_once(&g_path_once, decide_path);
    return g_path;
}

const char *dfl_cpu_name(dfl_cpu_path p)
{
    return p == DFL_CPU_AVX512 ? "avx512" : p == DFL_CPU_AVX2 ? "avx2" : "scalar";
}

/* ------------------------------------------------------------ AVX-512 sgemm */

/* Register block MR × NR of y (28 of the 32 zmm registers), a depth of KC per pass
 * (the packed x strip, KC·MR floats, stays in L1) and NC columns of w per packed block
 * (KC·NC floats in L2). */
#define MR 14
#define NR 32
#define KC 512
#define NC 256

/* ap[k][MR] = rows 0..mr-1 of x (stride ldx) at columns 0..kc-1; rows past mr zero. */
static void pack_x(float *ap, const float *x, int64_t ldx, int64_t mr, int64_t kc)
{
    for (int64_t i = 0; i < MR; i++)
        for (int64_t k = 0; k < kc; k++)
            ap[k * MR + i] = i < mr ? x[i * ldx + k] : 0.0f;
}

/* Strips of NR columns of y from w[out, k] (stride ldw): bp[s][k][NR] = w[s·NR + j, k]
 * for j < nc - s·NR, else 0. */
static void pack_w(float *bp, const float *w, int64_t ldw, int64_t nc, int64_t kc)
{
    for (int64_t s = 0; s * NR < nc; s++) {
        float *dst = bp + s * kc * NR;
        int64_t nr = nc - s * NR < NR ? nc - s * NR : NR;
        for (int64_t j = 0; j < NR; j++) {
            const float *src = w + (s * NR + j) * ldw;
            for (int64_t k = 0; k < kc; k++)
                dst[k * NR + j] = j < nr ? src[k] : 0.0f;
        }
    }
}

/* y[mr, nr] (stride ldy) = alpha · ap · b, or += when acc: MR × NR sums in registers.
 * Row k of b (nr values) at b + k·ldb: a packed strip (ldb NR) or w itself (wt 0). */
__attribute__((target("avx512f"))) static void micro(int64_t kc, const float *ap, const float *b, int64_t ldb,
                                                     float *y, int64_t ldy, int64_t mr, int64_t nr, float alpha,
                                                     int acc)
{
    __m512 c0[MR], c1[MR];
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : (__mmask16)0;
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++)
        c0[i] = c1[i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_maskz_loadu_ps(m0, b + k * ldb), b1 = _mm512_maskz_loadu_ps(m1, b + k * ldb + 16);
        const float *a = ap + k * MR;
#pragma GCC unroll 14
        for (int i = 0; i < MR; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
            c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
        }
    }
    __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) { /* constant bounds: c0, c1 stay in registers */
        if (i >= mr) break;
        float *r = y + i * ldy;
        __m512 v0 = _mm512_mul_ps(al, c0[i]), v1 = _mm512_mul_ps(al, c1[i]);
        if (acc) {
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, r));
            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, r + 16));
        }
        _mm512_mask_storeu_ps(r, m0, v0);
        _mm512_mask_storeu_ps(r + 16, m1, v1);
    }
}

/* Rows [i0, i1) × columns [o0, o1) of y, packing into ap and bp. */
static void gemm_range(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t ldw, int wt,
                       int64_t i0, int64_t i1, int64_t o0, int64_t o1, int64_t k, float alpha, float *ap, float *bp)
{
    for (int64_t k0 = 0; k0 < k; k0 += KC) {
        int64_t kc = k - k0 < KC ? k - k0 : KC;
        for (int64_t b0 = o0; b0 < o1; b0 += NC) {
            int64_t nc = o1 - b0 < NC ? o1 - b0 : NC;
            /* w[k, out] rows are read in place; w[out, k] is transposed into strips */
            if (wt) pack_w(bp, w + b0 * ldw + k0, ldw, nc, kc);
            for (int64_t r0 = i0; r0 < i1; r0 += MR) {
                int64_t mr = i1 - r0 < MR ? i1 - r0 : MR;
                pack_x(ap, x + r0 * ldx + k0, ldx, mr, kc);
                for (int64_t s = 0; s * NR < nc; s++) {
                    int64_t nr = nc - s * NR < NR ? nc - s * NR : NR;
                    const float *b = wt ? bp + s * kc * NR : w + k0 * ldw + b0 + s * NR;
                    micro(kc, ap, b, wt ? NR : ldw, y + r0 * ldy + b0 + s * NR, ldy, mr, nr, alpha, k0 > 0);
                }
            }
        }
    }
}

void dfl_gemm_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t ldw, int wt, int64_t n,
                     int64_t out, int64_t k, float alpha)
{
    if (n <= 0 || out <= 0) return;
    if (k <= 0) {
        for (int64_t i = 0; i < n; i++)
            memset(y + i * ldy, 0, (size_t)out * sizeof(float));
        return;
    }
    double flops = 2.0 * (double)n * (double)out * (double)k;
    int fail = 0;
#pragma omp parallel if (flops > 4e6 && !omp_in_parallel()) reduction(| : fail)
    {
        int nth = omp_get_num_threads(), me = omp_get_thread_num();
        int64_t i0 = 0, i1 = n, o0 = 0, o1 = out;
        if (out >= 2 * NR * nth) { /* columns: each thread packs only its own part of w */
            int64_t step = (out + nth - 1) / nth;
            step = (step + NR - 1) / NR * NR;
            o0 = me * step < out ? me * step : out;
            o1 = o0 + step < out ? o0 + step : out;
        } else {
            int64_t step = (n + nth - 1) / nth;
            step = (step + MR - 1) / MR * MR;
            i0 = me * step < n ? me * step : n;
            i1 = i0 + step < n ? i0 + step : n;
        }
        if (i0 < i1 && o0 < o1) {
            float *ap = aligned_alloc(64, (size_t)KC * MR * sizeof(float));
            float *bp = aligned_alloc(64, (size_t)KC * NC * sizeof(float));
            if (ap && bp)
                gemm_range(y, ldy, x, ldx, w, ldw, wt, i0, i1, o0, o1, k, alpha, ap, bp);
            else
                fail = 1;
            free(ap);
            free(bp);
        }
    }
    if (fail) /* no memory for the packed blocks: OpenBLAS needs none of ours */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, wt ? CblasTrans : CblasNoTrans, (int)n, (int)out, (int)k, alpha, x,
                    (int)ldx, w, (int)ldw, 0.0f, y, (int)ldy);
}

void dfl_gemm(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t ldw, int wt, int64_t n,
              int64_t out, int64_t k, float alpha)
{
    if (dfl_cpu() == DFL_CPU_AVX512) {
        dfl_gemm_avx512(y, ldy, x, ldx, w, ldw, wt, n, out, k, alpha);
        return;
    }
    if (n <= 0 || out <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, wt ? CblasTrans : CblasNoTrans, (int)n, (int)out, (int)k, alpha, x,
                (int)ldx, w, (int)ldw, 0.0f, y, (int)ldy);
}
