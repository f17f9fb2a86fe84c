/* test_kernels_gemv.c — dfl_gemv_wmat (decoding's few-row product, weights converted in
 * registers) against its serial twin dfl_matmul_wmat_naive (double sums), for BF16,
 * F16, aligned and unaligned F32 weights, 1 to DFL_GEMV_MAX_ROWS rows, widths that are
 * and are not multiples of the 16 lanes; and which weights it takes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "model/kernels_gemv.h"
#include "model/safetensors.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void check(int dtype, int64_t rows, int64_t cols, int64_t n, int unaligned)
{
    size_t esz = dtype == DFL_DTYPE_F32 ? 4 : 2, bytes = (size_t)(rows * cols) * esz;
    unsigned char *buf = malloc(bytes + 4);
    unsigned char *data = buf + (unaligned ? 2 : 0);
    for (int64_t i = 0; i < rows * cols; i++) {
        float v = frand();
        if (dtype == DFL_DTYPE_F32) {
            memcpy(data + i * 4, &v, 4);
        } else {
            uint16_t h = dtype == DFL_DTYPE_BF16 ? dfl_f32_to_bf16(v) : dfl_f32_to_f16(v);
            memcpy(data + i * 2, &h, 2);
        }
    }
    float *x = malloc((size_t)(n * cols) * sizeof(float)), *y = malloc((size_t)(n * rows) * sizeof(float));
    float *want = malloc((size_t)(n * rows) * sizeof(float));
    for (int64_t i = 0; i < n * cols; i++)
        x[i] = frand();
    dfl_wmat w = {data, dtype, rows, cols, 0};
    assert_true(dfl_gemv_wmat_supported(&w));
    dfl_gemv_wmat(y, x, &w, n);
    dfl_matmul_wmat_naive(want, x, &w, n);
    for (int64_t i = 0; i < n * rows; i++)
        assert_true(fabsf(y[i] - want[i]) <= 1e-5f * (float)cols);
    free(buf), free(x), free(y), free(want);
}

static void test_gemv_matches_naive(void **state)
{
    (void)state;
    static const int dtypes[] = {DFL_DTYPE_BF16, DFL_DTYPE_F16, DFL_DTYPE_F32};
    for (int d = 0; d < 3; d++)
        for (int64_t n = 1; n <= DFL_GEMV_MAX_ROWS; n++) {
            check(dtypes[d], 37, 64, n, 0);
            check(dtypes[d], 300, 77, n, 0);
            check(dtypes[d], 5, 3, n, d == 2);
        }
}

static void test_gemv_refuses_paired_rows(void **state)
{
    (void)state;
    float v[4] = {0};
    dfl_wmat paired = {v, DFL_DTYPE_F32, 2, 2, 2};
    assert_false(dfl_gemv_wmat_supported(&paired));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemv_matches_naive),
        cmocka_unit_test(test_gemv_refuses_paired_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
