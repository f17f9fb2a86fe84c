/* test_gguf_kernels.c — the GGUF paths of the weight-matrix kernels and the reader's C
 * API: quantized dfl_wmat panels against the naive twin and the per-value dequantizer,
 * llama.cpp's Q/K row order read back in Hugging Face order (checked against the
 * converter's permute written out here), the typed getters' error returns and the
 * reader's refusals of NULL and malformed input. The values themselves are checked
 * against numpy in tests/test_gguf.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "model/gguf.h"
#include "model/gguf_quant.h"
#include "model/kernels.h"
#include "model/safetensors.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* rows·cols/QK random blocks of type t whose f16 scale fields are finite (the byte
 * offsets of each type's f16 fields, docs/format.md). */
static unsigned char *random_rows(uint32_t t, int64_t rows, int64_t cols)
{
    size_t rb = dfl_ggml_row_bytes(t, cols), qk, bs;
    assert_true(rb > 0 && dfl_ggml_type_block(t, &qk, &bs));
    unsigned char *p = malloc(rb * (size_t)rows);
    for (size_t i = 0; i < rb * (size_t)rows; i++)
        p[i] = (unsigned char)next();
    static const int fields[15][2] = {
        [DFL_GGML_Q4_0] = {0, -1}, [DFL_GGML_Q4_1] = {0, 2},   [DFL_GGML_Q5_0] = {0, -1},   [DFL_GGML_Q5_1] = {0, 2},
        [DFL_GGML_Q8_0] = {0, -1}, [DFL_GGML_Q2_K] = {80, 82}, [DFL_GGML_Q3_K] = {108, -1}, [DFL_GGML_Q4_K] = {0, 2},
        [DFL_GGML_Q5_K] = {0, 2},  [DFL_GGML_Q6_K] = {208, -1}};
    for (size_t b = 0; b < rb * (size_t)rows / bs; b++)
        for (int f = 0; f < 2; f++) {
            int at = fields[t][f];
            if (at < 0) continue;
            uint16_t h = dfl_f32_to_f16((float)((int)(next() % 2001) - 1000) * 1e-5f);
            p[b * bs + (size_t)at] = (unsigned char)(h & 0xff);
            p[b * bs + (size_t)at + 1] = (unsigned char)(h >> 8);
        }
    return p;
}

static const uint32_t QTYPES[] = {DFL_GGML_Q8_0, DFL_GGML_Q4_0, DFL_GGML_Q4_1, DFL_GGML_Q5_0, DFL_GGML_Q5_1,
                                  DFL_GGML_Q2_K, DFL_GGML_Q3_K, DFL_GGML_Q4_K, DFL_GGML_Q5_K, DFL_GGML_Q6_K};

/* Quantized panels (more rows than one panel holds): dfl_wmat_rows equals the per-value
 * twin bit for bit, and the matmul its naive twin. */
static void test_quantized_wmat(void **state)
{
    (void)state;
    const int64_t n = 3, in = 512, out = (int64_t)(DFL_PANEL_BYTES / 4 / 512) + 37;
    float *x = malloc((size_t)(n * in) * 4), *y = malloc((size_t)(n * out) * 4), *yr = malloc((size_t)(n * out) * 4);
    float *scratch = malloc(dfl_matmul_scratch(in) * sizeof(float)), *rows = malloc((size_t)in * 4 * 5);
    for (int64_t i = 0; i < n * in; i++)
        x[i] = (float)((int)(next() % 2001) - 1000) * 1e-3f;
    for (size_t k = 0; k < sizeof QTYPES / sizeof QTYPES[0]; k++) {
        uint32_t t = QTYPES[k];
        unsigned char *raw = random_rows(t, out, in);
        dfl_wmat m = {raw, DFL_WMAT_GGML + (int)t, out, in, 0};
        size_t rb = dfl_ggml_row_bytes(t, in);
        dfl_wmat_rows(&m, out - 5, 5, rows);
        for (int r = 0; r < 5; r++)
            for (int64_t c = 0; c < in; c++) {
                float v = dfl_ggml_dequant_at(t, raw + (size_t)(out - 5 + r) * rb, c);
                assert_memory_equal(&v, &rows[r * in + c], sizeof v);
            }
        if (k < 3 || t == DFL_GGML_Q6_K) { /* the full product: a few types (the naive twin is slow) */
            dfl_matmul_wmat(y, x, &m, n, scratch);
            dfl_matmul_wmat_naive(yr, x, &m, n);
            for (int64_t i = 0; i < n * out; i++)
                assert_true(fabsf(y[i] - yr[i]) <= 1e-4f * fmaxf(1.0f, fabsf(yr[i])));
        }
        free(raw);
    }
    free(x), free(y), free(yr), free(scratch), free(rows);
}

/* convert_hf_to_gguf.py's permute: w.reshape(n_head, 2, hd/2, D).swapaxes(1, 2): stored
 * row h·hd + 2i + s is Hugging Face row h·hd + s·hd/2 + i. pair_hd gives the rows back
 * in Hugging Face order, for F32 (the sgemm fast path must not be taken), F16 and Q8_0. */
static void test_pair_order(void **state)
{
    (void)state;
    const int64_t heads = 3, hd = 8, cols = 64, rows = heads * hd;
    float *hf = malloc((size_t)(rows * cols) * 4), *stored = malloc((size_t)(rows * cols) * 4);
    float *got = malloc((size_t)(rows * cols) * 4), *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4);
    float *scratch = malloc(dfl_matmul_scratch(cols) * sizeof(float));
    for (int64_t i = 0; i < rows * cols; i++)
        hf[i] = (float)(i % 1000) * 0.25f; /* exact in f16 too */
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int s = 0; s < 2; s++)
                memcpy(stored + (h * hd + 2 * i + s) * cols, hf + (h * hd + s * hd / 2 + i) * cols, (size_t)cols * 4);
    for (int64_t k = 0; k < cols; k++)
        x[k] = k == 5 ? 1.0f : 0.0f; /* y = column 5 of W */
    uint16_t *h16 = malloc((size_t)(rows * cols) * 2);
    for (int64_t i = 0; i < rows * cols; i++)
        h16[i] = dfl_f32_to_f16(stored[i]);
    dfl_wmat m32 = {stored, DFL_DTYPE_F32, rows, cols, hd}, m16 = {h16, DFL_DTYPE_F16, rows, cols, hd};
    const dfl_wmat *ms[2] = {&m32, &m16};
    for (int c = 0; c < 2; c++) {
        dfl_wmat_rows(ms[c], 0, rows, got);
        assert_memory_equal(got, hf, (size_t)(rows * cols) * 4);
        dfl_matmul_wmat(y, x, ms[c], 1, scratch);
        for (int64_t r = 0; r < rows; r++)
            assert_true(y[r] == hf[r * cols + 5]);
        dfl_matmul_wmat_naive(y, x, ms[c], 1);
        for (int64_t r = 0; r < rows; r++)
            assert_true(y[r] == hf[r * cols + 5]);
    }
    /* Q8_0: rows of blocks permuted the same way */
    unsigned char *q = random_rows(DFL_GGML_Q8_0, rows, cols),
                  *qs = malloc(dfl_ggml_row_bytes(DFL_GGML_Q8_0, cols) * (size_t)rows);
    size_t rb = dfl_ggml_row_bytes(DFL_GGML_Q8_0, cols);
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int s = 0; s < 2; s++)
                memcpy(qs + (h * hd + 2 * i + s) * rb, q + (h * hd + s * hd / 2 + i) * rb, rb);
    dfl_wmat mq = {qs, DFL_WMAT_GGML + DFL_GGML_Q8_0, rows, cols, hd},
             mp = {q, DFL_WMAT_GGML + DFL_GGML_Q8_0, rows, cols, 0};
    float *want = malloc((size_t)(rows * cols) * 4);
    dfl_wmat_rows(&mq, 0, rows, got);
    dfl_wmat_rows(&mp, 0, rows, want);
    assert_memory_equal(got, want, (size_t)(rows * cols) * 4);
    free(hf), free(stored), free(got), free(x), free(y), free(scratch), free(h16), free(q), free(qs), free(want);
}

static void test_types(void **state)
{
    (void)state;
    size_t e, b;
    assert_string_equal(dfl_ggml_type_name(DFL_GGML_Q4_K), "Q4_K");
    assert_string_equal(dfl_ggml_type_name(16), "IQ2_XXS");
    assert_null(dfl_ggml_type_name(4)); /* Q4_2: removed upstream */
    assert_null(dfl_ggml_type_name(40));
    assert_false(dfl_ggml_type_block(31, &e, &b));
    assert_true(dfl_ggml_type_block(DFL_GGML_Q6_K, &e, &b) && e == 256 && b == 210);
    assert_false(dfl_ggml_type_supported(16)); /* IQ types are known by name only */
    assert_false(dfl_ggml_type_supported(DFL_GGML_Q8_K));
    assert_true(dfl_ggml_type_supported(DFL_GGML_BF16));
    assert_int_equal(dfl_ggml_row_bytes(DFL_GGML_Q4_0, 64), 36);
    assert_int_equal(dfl_ggml_row_bytes(DFL_GGML_Q4_0, 48), 0); /* not whole blocks */
    assert_int_equal(dfl_ggml_row_bytes(99, 64), 0);
    /* Q8_0 by hand: d = 0.5, qs = -3 → -1.5 */
    unsigned char blk[34] = {0};
    uint16_t h = dfl_f32_to_f16(0.5f);
    blk[0] = (unsigned char)(h & 0xff), blk[1] = (unsigned char)(h >> 8), blk[2] = (unsigned char)(int8_t)-3;
    float row[32];
    dfl_ggml_dequant_row(DFL_GGML_Q8_0, blk, row, 32);
    assert_true(row[0] == -1.5f && row[1] == 0.0f);
    assert_true(dfl_ggml_dequant_at(DFL_GGML_Q8_0, blk, 0) == -1.5f);
}

/* A minimal image: one u32 key and one F32 tensor of 4 values. */
static size_t tiny(unsigned char *p)
{
    size_t o = 0;
#define PUT(v, n) (memcpy(p + o, &(uint64_t){(uint64_t)(v)}, n), o += n)
    memcpy(p, "GGUF", 4), o = 4;
    PUT(3, 4), PUT(1, 8), PUT(1, 8);
    PUT(1, 8), p[o++] = 'k', PUT(DFL_GGUF_U32, 4), PUT(7, 4);
    PUT(1, 8), p[o++] = 'w', PUT(1, 4), PUT(4, 8), PUT(DFL_GGML_F32, 4), PUT(0, 8);
#undef PUT
    while (o % 32)
        p[o++] = 0;
    for (int i = 0; i < 4; i++, o += 4)
        memcpy(p + o, &(float){(float)i}, 4);
    return o;
}

static void test_reader_api(void **state)
{
    (void)state;
    unsigned char buf[128];
    size_t n = tiny(buf);
    dfl_gguf *g;
    dfl_error err;
    assert_int_equal(dfl_gguf_open_memory(buf, n, "tiny", &g, &err), DFL_OK);
    assert_int_equal(dfl_gguf_version(g), 3);
    int64_t v;
    double d;
    int bl;
    const char *s;
    size_t len;
    assert_int_equal(dfl_gguf_get_int(g, "k", &v), 1);
    assert_int_equal(v, 7);
    assert_int_equal(dfl_gguf_get_num(g, "k", &d), 1);
    assert_true(d == 7.0);
    assert_int_equal(dfl_gguf_get_bool(g, "k", &bl), -1); /* another type */
    assert_int_equal(dfl_gguf_get_str(g, "k", &s, &len), -1);
    assert_int_equal(dfl_gguf_get_int(g, "absent", &v), 0);
    assert_false(dfl_gguf_arr_int(dfl_gguf_find_kv(g, "k"), 0, &v)); /* not an array */
    assert_null(dfl_gguf_kv_at(g, 1));
    assert_null(dfl_gguf_tensor_at(g, 1));
    assert_null(dfl_gguf_find_tensor(g, "x"));
    const dfl_gguf_tensor *t = dfl_gguf_find_tensor(g, "w");
    assert_non_null(t);
    assert_true(t->ne[0] == 4 && t->ne[1] == 1 && t->nbytes == 16 && ((const float *)t->data)[3] == 3.0f);
    assert_string_equal(dfl_gguf_file_of(g, t), "tiny");
    dfl_gguf_close(g);
    dfl_gguf_close(NULL);
    /* a wrong f32 count: the data section is too short */
    unsigned char bad[128];
    memcpy(bad, buf, n);
    bad[24 + 8 + 1 + 4 + 4 + 8 + 1 + 4] = 5; /* ne[0] 4 → 5: 20 bytes, 16 present */
    assert_int_equal(dfl_gguf_open_memory(bad, n, "bad", &g, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "run past"));
    assert_int_equal(dfl_gguf_open(NULL, &g, &err), DFL_ERR_USAGE);
    assert_int_equal(dfl_gguf_open("/nonexistent/x.gguf", &g, &err), DFL_ERR_IO);
    assert_null(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantized_wmat),
        cmocka_unit_test(test_pair_order),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_reader_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
