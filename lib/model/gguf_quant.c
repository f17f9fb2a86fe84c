/* gguf_quant.c — ggml block geometry and dequantizers (row loops after ggml's
 * dequantize_row_*, and a per-value twin written from the byte layouts). */
#include "model/gguf_quant.h"

#include <string.h>

#include "base/half.h"

/* ------------------------------------------------------------------ types */

typedef struct type_info {
    const char *name;
    uint16_t elems, bytes;
    uint8_t supported;
} type_info;

/* {name, values per block, bytes per block, dequantized here} as ggml.c's type traits. */
static const type_info TYPES[DFL_GGML_TYPE_COUNT] = {
    [0] = {"F32", 1, 4, 1},         [1] = {"F16", 1, 2, 1},         [2] = {"Q4_0", 32, 18, 1},
    [3] = {"Q4_1", 32, 20, 1},      [6] = {"Q5_0", 32, 22, 1},      [7] = {"Q5_1", 32, 24, 1},
    [8] = {"Q8_0", 32, 34, 1},      [9] = {"Q8_1", 32, 36, 0},      [10] = {"Q2_K", 256, 84, 1},
    [11] = {"Q3_K", 256, 110, 1},   [12] = {"Q4_K", 256, 144, 1},   [13] = {"Q5_K", 256, 176, 1},
    [14] = {"Q6_K", 256, 210, 1},   [15] = {"Q8_K", 256, 292, 0},   [16] = {"IQ2_XXS", 256, 66, 0},
    [17] = {"IQ2_XS", 256, 74, 0},  [18] = {"IQ3_XXS", 256, 98, 0}, [19] = {"IQ1_S", 256, 50, 0},
    [20] = {"IQ4_NL", 32, 18, 0},   [21] = {"IQ3_S", 256, 110, 0},  [22] = {"IQ2_S", 256, 82, 0},
    [23] = {"IQ4_XS", 256, 136, 0}, [24] = {"I8", 1, 1, 0},         [25] = {"I16", 1, 2, 0},
    [26] = {"I32", 1, 4, 0},        [27] = {"I64", 1, 8, 0},        [28] = {"F64", 1, 8, 0},
    [29] = {"IQ1_M", 256, 56, 0},   [30] = {"BF16", 1, 2, 1},       [34] = {"TQ1_0", 256, 54, 0},
    [35] = {"TQ2_0", 256, 66, 0},   [39] = {"MXFP4", 32, 17, 0},
};

static const type_info *info(uint32_t t)
{
    return t < DFL_GGML_TYPE_COUNT && TYPES[t].name ? &TYPES[t] : NULL;
}

const char *dfl_ggml_type_name(uint32_t type)
{
    const type_info *i = info(type);
    return i ? i->name : NULL;
}

int dfl_ggml_type_block(uint32_t type, size_t *elems, size_t *bytes)
{
    const type_info *i = info(type);
    if (!i) return 0;
    *elems = i->elems;
    *bytes = i->bytes;
    return 1;
}

int dfl_ggml_type_supported(uint32_t type)
{
    const type_info *i = info(type);
    return i && i->supported;
}

size_t dfl_ggml_row_bytes(uint32_t type, int64_t n)
{
    const type_info *i = info(type);
    if (!i || n <= 0 || n % i->elems) return 0;
    return (size_t)(n / i->elems) * i->bytes; /* n < 2^62 / ... : callers bound n */
}

/* ------------------------------------------------------------- row loops */

static float f16_at(const uint8_t *p)
{
    return dfl_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* The K-quants' 6-bit scale j and min j packed into 12 bytes (ggml's get_scale_min_k4). */
static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* Q3_K's sixteen 6-bit scales (biased by 32) out of 12 bytes: low nibbles in bytes
 * 0–7 (scales 0–7 low halves, 8–15 high halves), the top 2 bits in bytes 8–11. */
static int q3k_scale(const uint8_t *s, int k)
{
    int lo = k < 8 ? s[k] & 0xF : s[k - 8] >> 4;
    int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* Each loop follows ggml's dequantize_row_<type> statement for statement: the same
 * float products and differences in the same order. */
static void row_q4_0(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 18, y += 32) {
        const float d = f16_at(x);
        const uint8_t *qs = x + 2;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 0x0F) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

static void row_q4_1(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 20, y += 32) {
        const float d = f16_at(x), m = f16_at(x + 2);
        const uint8_t *qs = x + 4;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(qs[j] & 0x0F) * d + m;
            y[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}

static void row_q5(const uint8_t *x, float *y, int64_t nb, int has_min)
{
    size_t bs = has_min ? 24 : 22, hoff = has_min ? 4 : 2;
    for (int64_t i = 0; i < nb; i++, x += bs, y += 32) {
        const float d = f16_at(x), m = has_min ? f16_at(x + 2) : 0.0f;
        const uint8_t *qh8 = x + hoff, *qs = x + hoff + 4;
        uint32_t qh = (uint32_t)qh8[0] | (uint32_t)qh8[1] << 8 | (uint32_t)qh8[2] << 16 | (uint32_t)qh8[3] << 24;
        for (int j = 0; j < 16; j++) {
            const int xh0 = (int)(((qh >> j) << 4) & 0x10), xh1 = (int)((qh >> (j + 12)) & 0x10);
            const int x0 = (qs[j] & 0x0F) | xh0, x1 = (qs[j] >> 4) | xh1;
            if (has_min) {
                y[j] = (float)x0 * d + m;
                y[j + 16] = (float)x1 * d + m;
            } else {
                y[j] = (float)(x0 - 16) * d;
                y[j + 16] = (float)(x1 - 16) * d;
            }
        }
    }
}

static void row_q8_0(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 34, y += 32) {
        const float d = f16_at(x);
        for (int j = 0; j < 32; j++)
            y[j] = (float)(int8_t)x[2 + j] * d;
    }
}

/* Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin. */
static void row_q2_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 84) {
        const uint8_t *sc = x, *q = x + 16;
        const float d = f16_at(x + 80), min = f16_at(x + 82);
        int is = 0;
        for (int n = 0; n < 256; n += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int half = 0; half < 2; half++) {
                    uint8_t s = sc[is++];
                    const float dl = d * (float)(s & 0xF), ml = min * (float)(s >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
                }
    }
}

/* Q3_K: hmask[32], qs[64], scales[12], d. */
static void row_q3_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 110) {
        const uint8_t *hm = x, *q = x + 32, *s = x + 96;
        const float d_all = f16_at(x + 108);
        uint8_t m = 1;
        int is = 0;
        for (int n = 0; n < 256; n += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1))
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * (float)q3k_scale(s, is++);
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
    }
}

/* Q4_K: d, dmin, scales[12], qs[128]. */
static void row_q4_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 144) {
        const float d = f16_at(x), min = f16_at(x + 2);
        const uint8_t *scales = x + 4, *q = x + 16;
        for (int is = 0; is < 8; is += 2, q += 32) {
            uint8_t sc, m;
            scale_min_k4(is, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Q5_K: d, dmin, scales[12], qh[32], qs[128]. */
static void row_q5_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 176) {
        const float d = f16_at(x), min = f16_at(x + 2);
        const uint8_t *scales = x + 4, *qh = x + 16, *ql = x + 48;
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, ql += 32, u1 = (uint8_t)(u1 << 2), u2 = (uint8_t)(u2 << 2)) {
            uint8_t sc, m;
            scale_min_k4(is, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

/* Q6_K: ql[128], qh[64], scales[16] (int8), d. */
static void row_q6_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 210) {
        const float d = f16_at(x + 208);
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(const void *)(x + 192);
        for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * (float)sc[is + 0] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
    }
}

void dfl_ggml_dequant_row(uint32_t type, const void *src, float *dst, int64_t n)
{
    const uint8_t *x = src;
    switch (type) {
    case DFL_GGML_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case DFL_GGML_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = f16_at(x + 2 * i);
        break;
    case DFL_GGML_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = dfl_bf16_to_f32((uint16_t)(x[2 * i] | x[2 * i + 1] << 8));
        break;
    case DFL_GGML_Q4_0: row_q4_0(x, dst, n / 32); break;
    case DFL_GGML_Q4_1: row_q4_1(x, dst, n / 32); break;
    case DFL_GGML_Q5_0: row_q5(x, dst, n / 32, 0); break;
    case DFL_GGML_Q5_1: row_q5(x, dst, n / 32, 1); break;
    case DFL_GGML_Q8_0: row_q8_0(x, dst, n / 32); break;
    case DFL_GGML_Q2_K: row_q2_k(x, dst, n / 256); break;
    case DFL_GGML_Q3_K: row_q3_k(x, dst, n / 256); break;
    case DFL_GGML_Q4_K: row_q4_k(x, dst, n / 256); break;
    case DFL_GGML_Q5_K: row_q5_k(x, dst, n / 256); break;
    case DFL_GGML_Q6_K: row_q6_k(x, dst, n / 256); break;
    default: break; /* unsupported: callers check dfl_ggml_type_supported first */
    }
}

/* ------------------------------------------------------------ naive twin */

/* Value i from its block alone: block b = i / QK, position j = i % QK within it. */
float dfl_ggml_dequant_at(uint32_t type, const void *src, int64_t i)
{
    const type_info *t = info(type);
    if (!t || !t->supported) return 0.0f;
    const uint8_t *b = (const uint8_t *)src + (size_t)(i / t->elems) * t->bytes;
    int j = (int)(i % t->elems);
    switch (type) {
    case DFL_GGML_F32: {
        float v;
        memcpy(&v, b, sizeof v);
        return v;
    }
    case DFL_GGML_F16: return f16_at(b);
    case DFL_GGML_BF16: return dfl_bf16_to_f32((uint16_t)(b[0] | b[1] << 8));
    case DFL_GGML_Q4_0: { /* d, qs[16]: value j < 16 in the low nibble of qs[j], else the high one of qs[j−16] */
        int q = j < 16 ? b[2 + j] & 0xF : b[2 + j - 16] >> 4;
        return (float)(q - 8) * f16_at(b);
    }
    case DFL_GGML_Q4_1: { /* d, m, qs[16] */
        int q = j < 16 ? b[4 + j] & 0xF : b[4 + j - 16] >> 4;
        return (float)q * f16_at(b) + f16_at(b + 2);
    }
    case DFL_GGML_Q5_0:
    case DFL_GGML_Q5_1: { /* d, (m), qh (32 bits: bit j is value j's fifth bit), qs[16] */
        int o = type == DFL_GGML_Q5_1 ? 4 : 2;
        int lo = j < 16 ? b[o + 4 + j] & 0xF : b[o + 4 + j - 16] >> 4;
        int hi = (b[o + j / 8] >> (j % 8)) & 1;
        int q = lo | hi << 4;
        return type == DFL_GGML_Q5_1 ? (float)q * f16_at(b) + f16_at(b + 2) : (float)(q - 16) * f16_at(b);
    }
    case DFL_GGML_Q8_0: return (float)(int8_t)b[2 + j] * f16_at(b);
    default: break;
    }
    /* K-quants: 256 values in two halves of 128 (Q2/Q3/Q6) or four groups of 64 (Q4/Q5). */
    int h = j / 128, w = j % 128, s = w / 32, l = w % 32;
    switch (type) {
    case DFL_GGML_Q2_K: { /* scales[16], qs[64], d, dmin; scale 8h + 2s + (l >= 16) */
        uint8_t sc = b[8 * h + 2 * s + l / 16];
        int q = (b[16 + 32 * h + l] >> (2 * s)) & 3;
        float dl = f16_at(b + 80) * (float)(sc & 0xF), ml = f16_at(b + 82) * (float)(sc >> 4);
        return dl * (float)q - ml;
    }
    case DFL_GGML_Q3_K: { /* hmask[32], qs[64], scales[12], d; high bit 4h + s of hmask[l] */
        int q = (b[32 + 32 * h + l] >> (2 * s)) & 3;
        int high = (b[l] >> (4 * h + s)) & 1;
        float dl = f16_at(b + 108) * (float)q3k_scale(b + 96, 8 * h + 2 * s + l / 16);
        return dl * (float)(q - (high ? 0 : 4));
    }
    case DFL_GGML_Q4_K:
    case DFL_GGML_Q5_K: { /* d, dmin, scales[12], (qh[32]), qs[128]; group g = j/64 */
        int g = j / 64, u = j % 64, k = u / 32, ll = u % 32;
        const uint8_t *qs = b + (type == DFL_GGML_Q5_K ? 48 : 16);
        uint8_t sc, m;
        scale_min_k4(2 * g + k, b + 4, &sc, &m);
        int q = k ? qs[32 * g + ll] >> 4 : qs[32 * g + ll] & 0xF;
        if (type == DFL_GGML_Q5_K) q += ((b[16 + ll] >> (2 * g + k)) & 1) * 16;
        float d1 = f16_at(b) * (float)sc, m1 = f16_at(b + 2) * (float)m;
        return d1 * (float)q - m1;
    }
    case DFL_GGML_Q6_K: { /* ql[128], qh[64], scales[16], d; quarter s of half h */
        uint8_t lob = b[64 * h + l + (s & 1) * 32];
        int lo = s < 2 ? lob & 0xF : lob >> 4;
        int hi = (b[128 + 32 * h + l] >> (2 * s)) & 3;
        int q = (lo | hi << 4) - 32;
        int8_t sc = (int8_t)b[192 + 8 * h + l / 16 + 2 * s];
        return f16_at(b + 208) * (float)sc * (float)q;
    }
    default: return 0.0f;
    }
}
