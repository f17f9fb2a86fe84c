/* gguf_quant.h — ggml tensor types: their block geometry and the dequantizers of the
 * types difflens reads (docs/format.md "GGUF blocks" gives every byte layout).
 *
 * A ggml tensor row of n values (n a multiple of the type's block) is n/QK blocks laid
 * end to end, each `bytes` long; values are little-endian and blocks are unaligned.
 * Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (blocks of 32) and the
 * K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (super-blocks of 256). Every value equals
 * ggml's dequantize_row_<type> (ggml-quants.c) bit for bit: the same f16 scale
 * conversion (exact), the same float operations in the same order, each rounded to
 * f32 (no fused multiply-add: the library builds with ISO C's fp-contract off).
 * Other ggml types (IQ*, TQ*, MXFP4, Q8_1, Q8_K, integers, F64) are known by name so
 * that a refusal can say which one it met.
 */
#ifndef DFL_GGUF_QUANT_H
#define DFL_GGUF_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* ggml_type values as ggml.h numbers them (ids 4, 5, 31–33, 36–38 were removed). */
enum {
    DFL_GGML_F32 = 0,
    DFL_GGML_F16 = 1,
    DFL_GGML_Q4_0 = 2,
    DFL_GGML_Q4_1 = 3,
    DFL_GGML_Q5_0 = 6,
    DFL_GGML_Q5_1 = 7,
    DFL_GGML_Q8_0 = 8,
    DFL_GGML_Q8_1 = 9,
    DFL_GGML_Q2_K = 10,
    DFL_GGML_Q3_K = 11,
    DFL_GGML_Q4_K = 12,
    DFL_GGML_Q5_K = 13,
    DFL_GGML_Q6_K = 14,
    DFL_GGML_Q8_K = 15,
    DFL_GGML_BF16 = 30,
    DFL_GGML_TYPE_COUNT = 40
};

/* "Q4_K", "IQ2_XXS", ...; NULL for an id ggml does not define (or no longer does). */
const char *dfl_ggml_type_name(uint32_t type);

/* Values per block and bytes per block of a known type; 0 (and nothing stored) for an
 * unknown id. */
int dfl_ggml_type_block(uint32_t type, size_t *elems, size_t *bytes);

/* 1 when difflens dequantizes the type (the list above), else 0. */
int dfl_ggml_type_supported(uint32_t type);

/* Bytes of a row of n values; 0 when the type is unknown or n is not a multiple of its
 * block (n = 0 gives 0 too). */
size_t dfl_ggml_row_bytes(uint32_t type, int64_t n);

/* dst[n] = the n values of the row at src (a supported type, n a multiple of its
 * block, src any alignment). Serial; the caller parallelises over rows. */
void dfl_ggml_dequant_row(uint32_t type, const void *src, float *dst, int64_t n);

/* Naive twin: value i of the row at src, computed on its own from the byte layout
 * (the tests hold it against dfl_ggml_dequant_row and against numpy). */
float dfl_ggml_dequant_at(uint32_t type, const void *src, int64_t i);

#endif
