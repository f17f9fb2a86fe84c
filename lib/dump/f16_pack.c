/* f16_pack.c — vectorised f32 → f16 for the map writer (see f16_pack.h). Hand-written
 * because the conversion was 9% of a `--maps all` probe done one value at a time. */
#include "dump/f16_pack.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"

/* ------------------------------------------------------------ kernels */

/* 16 values per instruction; the tail with a masked load and store. */
__attribute__((target("avx512f"))) static void pack_avx512(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(src + i);
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(m, src + i);
        __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        uint16_t tmp[16];
        _mm256_storeu_si256((__m256i *)tmp, h);
        memcpy(dst + i, tmp, (n - i) * sizeof *dst);
    }
}

/* 8 values per instruction; the tail through a zero-padded copy. */
__attribute__((target("f16c,avx"))) static void pack_f16c(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    if (i < n) {
        float in[8] = {0};
        uint16_t out[8];
        memcpy(in, src + i, (n - i) * sizeof *src);
        _mm_storeu_si128((__m128i *)out,
                         _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        memcpy(dst + i, out, (n - i) * sizeof *dst);
    }
}

/* The same conversion with HDF5's byte shuffle fused in: the low byte of each half to
 * lo[], the high byte to hi[] (AVX-512BW narrows 16 halves to bytes in one instruction). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void planes_avx512(const float *src, uint8_t *lo,
                                                                               uint8_t *hi, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(lo + i), _mm256_cvtepi16_epi8(h));
        _mm_storeu_si128((__m128i *)(hi + i), _mm256_cvtepi16_epi8(_mm256_srli_epi16(h, 8)));
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_mask_storeu_epi8(lo + i, m, _mm256_cvtepi16_epi8(h));
        _mm_mask_storeu_epi8(hi + i, m, _mm256_cvtepi16_epi8(_mm256_srli_epi16(h, 8)));
    }
}

/* 16 values per step as two F16C conversions; low and high bytes split by SSE2 packs;
 * the tail through the scalar converter. */
__attribute__((target("f16c,avx"))) static void planes_f16c(const float *src, uint8_t *lo, uint8_t *hi, size_t n)
{
    const __m128i low = _mm_set1_epi16(0xff);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                b = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(lo + i), _mm_packus_epi16(_mm_and_si128(a, low), _mm_and_si128(b, low)));
        _mm_storeu_si128((__m128i *)(hi + i), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
    }
    for (; i < n; i++) {
        uint16_t h = dfl_f32_to_f16(src[i]);
        lo[i] = (uint8_t)h;
        hi[i] = (uint8_t)(h >> 8);
    }
}

static void planes_scalar(const float *src, uint8_t *lo, uint8_t *hi, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h = dfl_f32_to_f16(src[i]);
        lo[i] = (uint8_t)h;
        hi[i] = (uint8_t)(h >> 8);
    }
}

/* ----------------------------------------------------------- dispatch */

dfl__f16_isa dfl__f16_best_isa(void)
{
    static int best = -1; /* every thread computes the same answer */
    int b = __atomic_load_n(&best, __ATOMIC_RELAXED);
    if (b < 0) {
        __builtin_cpu_init();
        b = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl")
                ? DFL__F16_AVX512
            : dfl_cpu_has_f16c() ? DFL__F16_F16C
                                 : DFL__F16_SCALAR;
        /* DFL_CPU (as for the model's kernels): a narrower path on request */
        const char *env = getenv("DFL_CPU");
        int want = !env                         ? b
                   : strcmp(env, "scalar") == 0 ? DFL__F16_SCALAR
                   : strcmp(env, "avx2") == 0   ? DFL__F16_F16C
                                                : b;
        b = want < b ? want : b;
        __atomic_store_n(&best, b, __ATOMIC_RELAXED);
    }
    return (dfl__f16_isa)b;
}

size_t dfl__f16_pack_isa(dfl__f16_isa isa, const float *src, uint16_t *dst, size_t n)
{
    if (isa > dfl__f16_best_isa()) isa = dfl__f16_best_isa();
    switch (isa) {
    case DFL__F16_AVX512: pack_avx512(src, dst, n); return n;
    case DFL__F16_F16C: pack_f16c(src, dst, n); return n;
    case DFL__F16_SCALAR: break;
    }
    return 0;
}

size_t dfl__f16_pack(const float *src, uint16_t *dst, size_t n)
{
    return dfl__f16_pack_isa(dfl__f16_best_isa(), src, dst, n);
}

void dfl__f16_planes_isa(dfl__f16_isa isa, const float *src, uint8_t *lo, uint8_t *hi, size_t n)
{
    if (isa > dfl__f16_best_isa()) isa = dfl__f16_best_isa();
    switch (isa) {
    case DFL__F16_AVX512: planes_avx512(src, lo, hi, n); return;
    case DFL__F16_F16C: planes_f16c(src, lo, hi, n); return;
    case DFL__F16_SCALAR: planes_scalar(src, lo, hi, n); return;
    }
}

void dfl__f16_planes(const float *src, uint8_t *lo, uint8_t *hi, size_t n)
{
    dfl__f16_planes_isa(dfl__f16_best_isa(), src, lo, hi, n);
}
