/* kernels_gemm.c — the kernels' instruction-set path, and an AVX-512 sgemm (x · wᵀ). */
#include "model/kernels_gemm.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ path */

static dfl_cpu_path g_path, g_vector;
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
    dfl_cpu_path best =
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")
            ? DFL_CPU_AVX512
        : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? DFL_CPU_AVX2
                                                                          : DFL_CPU_SCALAR;
    const char *env = getenv("DFL_CPU");
    dfl_cpu_path want = best;
    int forced = 1;
    if (env && strcmp(env, "scalar") == 0)
        want = DFL_CPU_SCALAR;
    else if (env && strcmp(env, "avx2") == 0)
        want = DFL_CPU_AVX2;
    else if (env && strcmp(env, "avx512") == 0)
        want = DFL_CPU_AVX512;
    else
        forced = 0;
    g_path = want < best ? want : best;
    /* the row kernels take the CPU's best unless forced: OpenBLAS's kernels are not theirs */
    g_vector = g_path;
    if (!forced && best == DFL_CPU_AVX512 && dfl_gemm_openblas_is_avx512())
        g_path = DFL_CPU_AVX2; /* OpenBLAS multiplies with AVX-512 itself: keep its sgemm */
}

dfl_cpu_path dfl_cpu(void)
{
    pthread_once(&g_path_once, decide_path);
    return g_path;
}

dfl_cpu_path dfl_cpu_vector(void)
{
    pthread_once(&g_path_once, decide_path);
    return g_vector;
}

const char *dfl_cpu_name(dfl_cpu_path p)
{
    return p == DFL_CPU_AVX512 ? "avx512" : p == DFL_CPU_AVX2 ? "avx2" : "scalar";
}

/* ------------------------------------------------------------ AVX-512 sgemm */

/* Register block MR × NR of y (28 of the 32 zmm registers), a depth of KC per pass
 * (x packed once per pass; each strip of it, KC·MR floats, stays in L1 while it meets
 * every strip of a block of w) and NC columns of w per packed block (KC·NC floats in L2). */
#define MR 14
#define NR 32
#define KC 256
#define NC 256
/* Rows of x packed at a time: up to 1024 (1 MB, shared by the threads of a product
 * split by columns), so that each block of w is packed once per 1024 rows (it was once
 * per 384); the strips of x stream from L2 or L3 to L1 one at a time, 14 KB for every
 * 1.8 MFLOP of one block of w. More rows would pack w less often still but hold more
 * memory at long prompts (4 MB at 4096 rows: +3 MB of peak RSS there, measured). */
#define MC 1024

/* The height of the next strip of rows: MR while it fits, then 8, then 4 (the last rows
 * padded with zeros): 32 rows are 14 + 14 + 4, 128 rows 9 × 14 + 4. */
static int64_t strip_height(int64_t rows)
{
    return rows >= MR ? MR : rows > 4 ? 8 : 4;
}

/* The weights' layouts: w[k, out] f32 (read in place), w[out, k] f32 or bf16 (packed),
 * or w packed already (dfl_gemm_pack: k <= KC, strips of NR columns). */
enum { W_F32_KN, W_F32_NK, W_BF16_NK, W_PACKED };

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

/* 16 values of row `row` of w[out, k] (f32 or bf16) from column k0 as f32; lanes
 * outside km zero. */
AVX512 static inline __m512 load_row16(const void *w, int kind, int64_t ldw, int64_t row, int64_t k0, __mmask16 km)
{
    if (kind == W_BF16_NK) {
        const uint16_t *src = (const uint16_t *)w + row * ldw + k0;
        __m256i h = _mm256_maskz_loadu_epi16(km, src);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    return _mm512_maskz_loadu_ps(km, (const float *)w + row * ldw + k0);
}

/* r[16] rows → r[c] = column c of the 16 × 16 block (unpack, shuffle, two lane steps). */
AVX512 static inline void transpose16(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 4; g++) { /* r[4g + c], lane L: column 4L + c of rows 4g..4g+3 */
        r[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int c = 0; c < 4; c++) {
        t[c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
        t[4 + c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
        t[8 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xDD);
        r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xDD);
    }
}

/* ap[k][h] = rows 0..mr-1 of x (stride ldx) at columns 0..kc-1, rows mr..h-1 zero
 * (h <= 16): 16 × 16 blocks transposed in registers, h lanes of each stored. */
AVX512 static void pack_x(float *ap, const float *x, int64_t ldx, int64_t h, int64_t mr, int64_t kc)
{
    __mmask16 hm = (__mmask16)((1u << h) - 1);
    for (int64_t kb = 0; kb < kc; kb += 16) {
        int64_t kn = kc - kb < 16 ? kc - kb : 16;
        __mmask16 km = (__mmask16)(kn == 16 ? 0xFFFF : (1u << kn) - 1);
        __m512 r[16];
        for (int j = 0; j < 16; j++)
            r[j] = j < mr ? _mm512_maskz_loadu_ps(km, x + j * ldx + kb) : _mm512_setzero_ps();
        transpose16(r);
        for (int c = 0; c < kn; c++)
            _mm512_mask_storeu_ps(ap + (kb + c) * h, hm, r[c]);
    }
}

/* Strips of NR columns of y from rows [o0, o0 + nc) and columns [k0, k0 + kc) of
 * w[out, k] (f32 or bf16, stride ldw): bp[s][k][NR] = w[o0 + s·NR + j, k0 + k] for
 * j < nc - s·NR, else 0; 16 × 16 blocks transposed in registers, bf16 widened on load. */
AVX512 static void pack_w(float *bp, const void *w, int kind, int64_t ldw, int64_t o0, int64_t nc, int64_t k0,
                          int64_t kc)
{
    for (int64_t s = 0; s * NR < nc; s++) {
        float *dst = bp + s * kc * NR;
        for (int64_t h = 0; h < NR; h += 16) {
            int64_t j0 = s * NR + h; /* the block's first row of w, from o0 */
            for (int64_t kb = 0; kb < kc; kb += 16) {
                int64_t kn = kc - kb < 16 ? kc - kb : 16;
                __mmask16 km = (__mmask16)(kn == 16 ? 0xFFFF : (1u << kn) - 1);
                __m512 r[16];
                for (int j = 0; j < 16; j++)
                    r[j] = j0 + j < nc ? load_row16(w, kind, ldw, o0 + j0 + j, k0 + kb, km) : _mm512_setzero_ps();
                transpose16(r);
                for (int c = 0; c < kn; c++)
                    _mm512_store_ps(dst + (kb + c) * NR + h, r[c]);
            }
        }
    }
}

/* y[mr, nr] (stride ldy) = alpha · ap · b, or += when acc: H × NR sums in registers
 * (H a constant once inlined: the loops unroll and the sums never leave registers). Row
 * k of b (nr values) at b + k·ldb: a packed strip (ldb NR) or w itself (W_F32_KN). */
AVX512 static inline __attribute__((always_inline)) void micro_h(const int H, int64_t kc, const float *ap,
                                                                 const float *b, int64_t ldb, float *y, int64_t ldy,
                                                                 int64_t mr, int64_t nr, float alpha, int acc)
{
    __m512 c0[MR], c1[MR];
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : (__mmask16)0;
#pragma GCC unroll 14
    for (int i = 0; i < H; i++)
        c0[i] = c1[i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_maskz_loadu_ps(m0, b + k * ldb), b1 = _mm512_maskz_loadu_ps(m1, b + k * ldb + 16);
        const float *a = ap + k * H;
#pragma GCC unroll 14
        for (int i = 0; i < H; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
            c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
        }
    }
    __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
    for (int i = 0; i < H; i++) { /* constant bounds: c0, c1 stay in registers */
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

AVX512 static void micro(int64_t h, int64_t kc, const float *ap, const float *b, int64_t ldb, float *y, int64_t ldy,
                         int64_t mr, int64_t nr, float alpha, int acc)
{
    if (h == MR)
        micro_h(MR, kc, ap, b, ldb, y, ldy, mr, nr, alpha, acc);
    else if (h == 8)
        micro_h(8, kc, ap, b, ldb, y, ldy, mr, nr, alpha, acc);
    else
        micro_h(4, kc, ap, b, ldb, y, ldy, mr, nr, alpha, acc);
}

/* Rows [i0, i1) × columns [o0, o1) of y, packing into ap and bp. With nth > 1 the
 * threads of the enclosing region share x's strips in ap: each packs every nth strip
 * (from strip `me`) and waits for the others, every thread of the region calling this
 * with the same rows and depth (columns may be empty). */
static void gemm_range(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int kind, int64_t ldw,
                       int64_t i0, int64_t i1, int64_t o0, int64_t o1, int64_t k, float alpha, float *ap, float *bp,
                       int me, int nth)
{
    for (int64_t k0 = 0; k0 < k; k0 += KC) {
        int64_t kc = k - k0 < KC ? k - k0 : KC;
        for (int64_t m0 = i0; m0 < i1; m0 += MC) {
            int64_t m1 = i1 - m0 < MC ? i1 : m0 + MC;
            /* the block's strips of x, packed once for every block of w */
            if (nth > 1) {
#pragma omp barrier /* everyone is done with the strips of the previous block */
            }
            float *a = ap;
            int64_t strip = 0;
            for (int64_t r0 = m0, h; r0 < m1; r0 += h, a += h * kc, strip++) {
                h = strip_height(m1 - r0);
                if (strip % nth == me) pack_x(a, x + r0 * ldx + k0, ldx, h, m1 - r0 < h ? m1 - r0 : h, kc);
            }
            if (nth > 1) {
#pragma omp barrier /* every strip is packed */
            }
            for (int64_t b0 = o0; b0 < o1; b0 += NC) {
                int64_t nc = o1 - b0 < NC ? o1 - b0 : NC;
                /* the block's strips of w: packed here, already (b0 is a multiple of NR),
                 * or w itself */
                const float *blk = kind == W_PACKED ? (const float *)w + b0 * kc : bp;
                if (kind == W_F32_NK || kind == W_BF16_NK) pack_w(bp, w, kind, ldw, b0, nc, k0, kc);
                a = ap;
                for (int64_t r0 = m0, h; r0 < m1; r0 += h, a += h * kc) {
                    h = strip_height(m1 - r0);
                    int64_t mr = m1 - r0 < h ? m1 - r0 : h;
                    for (int64_t s = 0; s * NR < nc; s++) {
                        int64_t nr = nc - s * NR < NR ? nc - s * NR : NR;
                        const float *b =
                            kind != W_F32_KN ? blk + s * kc * NR : (const float *)w + k0 * ldw + b0 + s * NR;
                        micro(h, kc, a, b, kind != W_F32_KN ? NR : ldw, y + r0 * ldy + b0 + s * NR, ldy, mr, nr, alpha,
                              k0 > 0);
                    }
                }
            }
        }
    }
}

/* Floats of x's packed strips for `rows` rows: MC rows at most, with at most 3 rows of
 * padding (strip_height), a multiple of 16 floats. */
static size_t pack_x_floats(int64_t rows)
{
    size_t r = (size_t)(rows < MC ? rows : MC);
    return (r + 3 + 15) / 16 * 16 * KC;
}

/* The product over threads (outside a parallel region, when large enough), packing into
 * ws (ws_n floats) when it holds the blocks, else into blocks allocated for the call; 0
 * when those could not be allocated (y is then incomplete). Split by columns, the
 * threads pack x's strips once between them into one panel (in ws: the split's whole
 * point is that all of them read all of x) and each its own blocks of w; split by rows
 * (few columns), each packs its own rows. */
static int gemm_run(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int kind, int64_t ldw, int64_t n,
                    int64_t out, int64_t k, float alpha, float *ws, size_t ws_n)
{
    if (n <= 0 || out <= 0) return 1;
    if (k <= 0) {
        for (int64_t i = 0; i < n; i++)
            memset(y + i * ldy, 0, (size_t)out * sizeof(float));
        return 1;
    }
    double flops = 2.0 * (double)n * (double)out * (double)k;
    int fail = 0;
    /* ws aligned to 64 bytes (pack_w's aligned stores) */
    float *ws64 = ws ? (float *)(((uintptr_t)ws + 63) / 64 * 64) : NULL;
    size_t ws64_n = ws ? ws_n - (size_t)(ws64 - ws) : 0;
    if (ws && ws_n < (size_t)(ws64 - ws)) ws64 = NULL;
    const size_t pw = (size_t)KC * NC; /* one block of w */
#pragma omp parallel if (flops > 4e6 && !omp_in_parallel()) reduction(| : fail)
    {
        int nth = omp_get_num_threads(), me = omp_get_thread_num();
        int64_t i0 = 0, i1 = n, o0 = 0, o1 = out, step;
        int by_rows = out < 2 * NR * nth; /* else columns: each thread packs only its own part of w */
        if (!by_rows) {
            step = (out + nth - 1) / nth;
            step = (step + NR - 1) / NR * NR;
            o0 = me * step < out ? me * step : out;
            o1 = o0 + step < out ? o0 + step : out;
        } else {
            step = (n + nth - 1) / nth;
            step = (step + MR - 1) / MR * MR;
            i0 = me * step < n ? me * step : n;
            i1 = i0 + step < n ? i0 + step : n;
        }
        size_t px = pack_x_floats(by_rows ? step : n);
        /* the caller's scratch when it serves all threads: no large allocation (whose
         * free would raise malloc's mmap threshold and keep the memory in the heap) */
        if (!by_rows && nth > 1 && ws64 && ws64_n >= px + (size_t)nth * pw) {
            gemm_range(y, ldy, x, ldx, w, kind, ldw, i0, i1, o0, o1, k, alpha, ws64, ws64 + px + (size_t)me * pw, me,
                       nth);
        } else if (i0 < i1 && o0 < o1) {
            size_t per = px + pw;
            int own = !(ws64 && ws64_n >= (size_t)nth * per);
            float *ap = own ? aligned_alloc(64, px * sizeof(float)) : ws64 + (size_t)me * per;
            float *bp = own ? aligned_alloc(64, pw * sizeof(float)) : ap + px;
            if (ap && bp)
                gemm_range(y, ldy, x, ldx, w, kind, ldw, i0, i1, o0, o1, k, alpha, ap, bp, 0, 1);
            else
                fail = 1;
            if (own) {
                free(ap);
                free(bp);
            }
        }
    }
    return !fail;
}

void dfl_gemm_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t ldw, int wt, int64_t n,
                     int64_t out, int64_t k, float alpha, float *scratch, size_t scratch_n)
{
    if (!gemm_run(y, ldy, x, ldx, w, wt ? W_F32_NK : W_F32_KN, ldw, n, out, k, alpha, scratch, scratch_n))
        /* no memory for the packed blocks: OpenBLAS needs none of ours */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, wt ? CblasTrans : CblasNoTrans, (int)n, (int)out, (int)k, alpha, x,
                    (int)ldx, w, (int)ldw, 0.0f, y, (int)ldy);
}

size_t dfl_gemm_packed_floats(int64_t out, int64_t k)
{
    if (out <= 0 || k <= 0 || k > KC) return 0;
    return (size_t)((out + NR - 1) / NR) * NR * (size_t)k;
}

AVX512 void dfl_gemm_pack(float *bp, const float *w, int64_t ldw, int64_t out, int64_t k)
{
    int64_t strips = (out + NR - 1) / NR;
#pragma omp parallel for schedule(static) if (strips > 8 && !omp_in_parallel())
    for (int64_t s = 0; s < strips; s++) {
        int64_t nc = out - s * NR < NR ? out - s * NR : NR;
        pack_w(bp + s * k * NR, w, W_F32_NK, ldw, s * NR, nc, 0, k);
    }
}

void dfl_gemm_avx512_packed(float *y, int64_t ldy, const float *x, int64_t ldx, const float *bp, int64_t n, int64_t out,
                            int64_t k, float alpha, float *scratch, size_t scratch_n)
{
    /* one pass over the depth only (dfl_gemm_packed_floats); else, or with no memory
     * for x's strips, the plain sums */
    if (k > KC || !gemm_run(y, ldy, x, ldx, bp, W_PACKED, 0, n, out, k, alpha, scratch, scratch_n))
        for (int64_t i = 0; i < n; i++)
            for (int64_t o = 0; o < out; o++) {
                const float *b = bp + o / NR * NR * k + o % NR;
                float acc = 0.0f;
                for (int64_t j = 0; j < k; j++)
                    acc += x[i * ldx + j] * b[j * NR];
                y[i * ldy + o] = alpha * acc;
            }
}

int dfl_gemm_avx512_bf16(float *y, int64_t ldy, const float *x, int64_t ldx, const uint16_t *w, int64_t ldw, int64_t n,
                         int64_t out, int64_t k, float *scratch, size_t scratch_n)
{
    return gemm_run(y, ldy, x, ldx, w, W_BF16_NK, ldw, n, out, k, 1.0f, scratch, scratch_n);
}

void dfl_gemm_scratch(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t ldw, int wt,
                      int64_t n, int64_t out, int64_t k, float alpha, float *scratch, size_t scratch_n)
{
    if (dfl_cpu() == DFL_CPU_AVX512) {
        dfl_gemm_avx512(y, ldy, x, ldx, w, ldw, wt, n, out, k, alpha, scratch, scratch_n);
        return;
    }
    if (n <= 0 || out <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, wt ? CblasTrans : CblasNoTrans, (int)n, (int)out, (int)k, alpha, x,
                (int)ldx, w, (int)ldw, 0.0f, y, (int)ldy);
}

void dfl_gemm(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t ldw, int wt, int64_t n,
              int64_t out, int64_t k, float alpha)
{
    dfl_gemm_scratch(y, ldy, x, ldx, w, ldw, wt, n, out, k, alpha, NULL, 0);
}
