/* half.h — IEEE binary16 (f16) and bfloat16 (bf16) conversions to and from f32.
 * Used by the safetensors reader (F16/BF16 tensors) and by the dump writer and
 * reader (attention maps stored as f16); it lives in base so neither needs the
 * other's headers. */
#ifndef DFL_HALF_H
#define DFL_HALF_H

#include <stdint.h>

/* Exact: every f16/bf16 value is representable in f32. NaN payloads are kept
 * (a quiet NaN stays quiet), infinities and signed zeros keep their sign. */
float dfl_f16_to_f32(uint16_t h);
float dfl_bf16_to_f32(uint16_t b);

/* Round to nearest even from f32. NaN stays NaN (forced quiet), overflow gives
 * inf, values at or below half the smallest subnormal give a signed zero. */
uint16_t dfl_f32_to_f16(float f);
uint16_t dfl_f32_to_bf16(float f);

/* 1 when the CPU converts f16 in hardware (F16C, with AVX enabled by the OS). Asked of
 * CPUID, not __builtin_cpu_supports("f16c"), which clang 14 does not know. */
int dfl_cpu_has_f16c(void);

#endif
