/* half.c — f16 and bf16 scalar conversions (see half.h). Bit manipulation on the
 * IEEE layouts, no floating-point arithmetic, so the results do not depend on the
 * compiler's rounding mode or on -ffast-math style flags. */
#include "base/half.h"

#include <cpuid.h>
#include <string.h>

/* ------------------------------------------------------------------------------------
 * helpers
 * ---------------------------------------------------------------------------------- */

static float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float dfl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf or NaN: keep the payload, so a quiet NaN stays quiet */
        return bits_to_f32(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) /* normal: rebias 15 -> 127 */
        return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0) return bits_to_f32(sign);
    /* Subnormal m * 2^-24: shift the leading 1 up to the implicit-bit position,
     * lowering the exponent once per shift; every such value is a normal f32. */
    uint32_t e = 113;
    while (!(mant & 0x400u)) {
        mant <<= 1;
        e--;
    }
    return bits_to_f32(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

float dfl_bf16_to_f32(uint16_t b)
{
    return bits_to_f32((uint32_t)b << 16);
}

uint16_t dfl_f32_to_f16(float f)
{
    uint32_t x = f32_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: keep the top payload bits and force quiet */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    /* 65520 = 65504 + half an ulp is a tie with an odd mantissa: it rounds up to inf. */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    uint32_t e = ax >> 23;
    if (ax < 0x38800000u) {
        /* Below 2^-14: an f16 subnormal r * 2^-24. The f32 is m * 2^(e-150) with the
         * implicit bit, so r = m >> (126 - e), rounded to nearest even. At or below
         * 2^-25 (a tie with 0, and 0 is even) the result is a signed zero. */
        if (ax <= 0x33000000u) return sign;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 here */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++; /* may carry into 0x400: fine */
        return (uint16_t)(sign | r);
    }
    uint32_t h = ((e - 112u) << 10) | ((ax >> 13) & 0x3ffu);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* carry into exp is right */
    return (uint16_t)(sign | h);
}

uint16_t dfl_f32_to_bf16(float f)
{
    uint32_t x = f32_to_bits(f);
    /* NaN: truncating could clear every payload bit and make it inf; force quiet. */
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest even; overflow gives inf */
    return (uint16_t)(x >> 16);
}

int dfl_cpu_has_f16c(void)
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
