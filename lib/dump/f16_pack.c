/* f16_pack.c — vectorised f32 → f16 for the map writer (see f16_pack.h). Hand-written
 * because the conversion was 9% of a `--maps all` probe done one value at a time. */
#include "dump/f16_pack.h"

#include <immintrin.h>
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

/* ----------------------------------------------------------- dispatch */

dfl__f16_isa dfl__f16_best_isa(void)
{
    static int best = -1; /* every thread computes the same answer */
    int b = __atomic_load_n(&best, __ATOMIC_RELAXED);
    if (b < 0) {
        __builtin_cpu_init();
        b = __builtin_cpu_supports("avx512f") ? DFL__F16_AVX512 : dfl_cpu_has_f16c() ? DFL__F16_F16C : DFL__F16_SCALAR;
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
