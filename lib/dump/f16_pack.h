/* f16_pack.h — internal to the dump writer: f32 → IEEE half conversion of whole arrays
 * with the CPU's conversion instructions (AVX-512F or F16C, chosen at run time).
 *
 * Both round to nearest even and keep NaN payload bits the way the scalar
 * dfl_f32_to_f16 does (sign | 0x7e00 | top 10 payload bits), so they are bit-identical
 * to it for every input; tests/test_dump_direct.c checks that. A CPU with neither gets 0
 * back and the caller converts with the scalar function. DFL_CPU=scalar or avx2 (the
 * model kernels' variable) caps the set at scalar or F16C, once per process. */
#ifndef DFL_F16_PACK_H
#define DFL_F16_PACK_H

#include <stddef.h>
#include <stdint.h>

/* Instruction sets, best last. */
typedef enum dfl__f16_isa { DFL__F16_SCALAR = 0, DFL__F16_F16C, DFL__F16_AVX512 } dfl__f16_isa;

/* The best set this CPU has (checked once). */
dfl__f16_isa dfl__f16_best_isa(void);

/* Convert src[n] into dst[n] with `isa` (at most what dfl__f16_best_isa returns):
 * returns n, or 0 (nothing written) for DFL__F16_SCALAR. */
size_t dfl__f16_pack_isa(dfl__f16_isa isa, const float *src, uint16_t *dst, size_t n);

/* The same with the best set. */
size_t dfl__f16_pack(const float *src, uint16_t *dst, size_t n);

/* The conversion with HDF5's byte shuffle fused in: lo[i] and hi[i] are the low and
 * high bytes of the half of src[i] (bit-identical to dfl_f32_to_f16 on every path,
 * scalar included) — a chunk's two shuffled planes in one pass. */
void dfl__f16_planes_isa(dfl__f16_isa isa, const float *src, uint8_t *lo, uint8_t *hi, size_t n);
void dfl__f16_planes(const float *src, uint8_t *lo, uint8_t *hi, size_t n);

#endif
