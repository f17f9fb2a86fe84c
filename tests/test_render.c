/* test_render.c — the render module: colormaps against their published values, value
 * scales and ticks, pooling against its brute-force twin, the bitmap font, the colour
 * bar, heatmap no-data cells, and a golden PNG decoded with libpng. Files are written
 * into a fresh mkdtemp folder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <omp.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "render/render.h"

/* ------------------------------------------------------------------------ */
/* Fixture: a temporary folder                                              */
/* ------------------------------------------------------------------------ */

#define TMPDIR_PREFIX "dfl_render"
#include "tmpdir.h"

static int count_files(void)
{
    int n = 0;
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void assert_rgb(dfl_rgb c, int r, int g, int b)
{
    if (c.r != r || c.g != g || c.b != b) {
        print_error("colour (%d, %d, %d), expected (%d, %d, %d)\n", c.r, c.g, c.b, r, g, b);
        fail();
    }
}

/* round(255 v) of a published float triple */
static void assert_published(dfl_rgb c, double r, double g, double b)
{
    assert_rgb(c, (int)floor(255 * r + 0.5), (int)floor(255 * g + 0.5), (int)floor(255 * b + 0.5));
}

/* ------------------------------------------------------------------------ */
/* Colormaps                                                                */
/* ------------------------------------------------------------------------ */

static void test_viridis_published(void **state)
{
    (void)state;
    /* _viridis_data[0], [128], [255] (van der Walt & Smith, CC0) */
    assert_published(dfl_cmap_entry(DFL_CMAP_VIRIDIS, 0), 0.267004, 0.004874, 0.329415);
    assert_published(dfl_cmap_entry(DFL_CMAP_VIRIDIS, 128), 0.127568, 0.566949, 0.550556);
    assert_published(dfl_cmap_entry(DFL_CMAP_VIRIDIS, 255), 0.993248, 0.906157, 0.143936);
    /* lookup as matplotlib: floor(256 t), 1.0 -> 255 */
    assert_published(dfl_cmap_color(DFL_CMAP_VIRIDIS, 0.5), 0.127568, 0.566949, 0.550556);
    assert_published(dfl_cmap_color(DFL_CMAP_VIRIDIS, 1.0), 0.993248, 0.906157, 0.143936);
    assert_published(dfl_cmap_color(DFL_CMAP_VIRIDIS, -3.0), 0.267004, 0.004874, 0.329415);
    assert_published(dfl_cmap_color(DFL_CMAP_VIRIDIS, 7.0), 0.993248, 0.906157, 0.143936);
    assert_published(dfl_cmap_color(DFL_CMAP_VIRIDIS, NAN), 0.267004, 0.004874, 0.329415);
    /* matplotlib: viridis(0.5, bytes=True) = (32, 144, 140) truncates; we round */
    dfl_rgb mid = dfl_cmap_color(DFL_CMAP_VIRIDIS, 0.5);
    assert_true(abs(mid.r - 32) <= 1 && abs(mid.g - 144) <= 1 && abs(mid.b - 140) <= 1);
}

static void test_magma_published(void **state)
{
    (void)state;
    assert_published(dfl_cmap_entry(DFL_CMAP_MAGMA, 0), 0.001462, 0.000466, 0.013866);
    assert_published(dfl_cmap_entry(DFL_CMAP_MAGMA, 128), 0.716387, 0.214982, 0.47529);
    assert_published(dfl_cmap_entry(DFL_CMAP_MAGMA, 255), 0.987053, 0.991438, 0.749504);
}

static void test_rdbu_diverging(void **state)
{
    (void)state;
    /* ColorBrewer RdBu ends, reversed: blue #053061 for low, red #67001f for high */
    assert_rgb(dfl_cmap_entry(DFL_CMAP_RDBU, 0), 0x05, 0x30, 0x61);
    assert_rgb(dfl_cmap_entry(DFL_CMAP_RDBU, 255), 0x67, 0x00, 0x1f);
    /* matplotlib RdBu_r(128/255) = (0.96908881, 0.96647443, 0.96493656): near white */
    assert_published(dfl_cmap_entry(DFL_CMAP_RDBU, 128), 0.96908881, 0.96647443, 0.96493656);
    assert_published(dfl_cmap_entry(DFL_CMAP_RDBU, 127), 0.9657055, 0.96724337, 0.9680892);
    assert_true(dfl_cmap_is_diverging(DFL_CMAP_RDBU));
    assert_false(dfl_cmap_is_diverging(DFL_CMAP_VIRIDIS));
    /* 0 on a diverging norm is the centre entry */
    dfl_norm n = {DFL_SCALE_LINEAR, 1, -2, 2, 0};
    assert_true(fabs(dfl_norm_apply(&n, 0) - 0.5) < 1e-12);
    assert_published(dfl_cmap_color(DFL_CMAP_RDBU, dfl_norm_apply(&n, 0)), 0.96908881, 0.96647443, 0.96493656);
}

static void test_cmap_parse(void **state)
{
    (void)state;
    dfl_cmap m;
    dfl_error err;
    assert_int_equal(dfl_cmap_parse("magma", &m, &err), DFL_OK);
    assert_int_equal(m, DFL_CMAP_MAGMA);
    assert_int_equal(dfl_cmap_parse("jet", &m, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "jet"));
    dfl_scale s;
    assert_int_equal(dfl_scale_parse("sqrt", &s, &err), DFL_OK);
    assert_int_equal(dfl_scale_parse("cubic", &s, &err), DFL_ERR_USAGE);
    dfl_pool_mode pm;
    assert_int_equal(dfl_pool_parse("max", &pm, &err), DFL_OK);
    assert_int_equal(pm, DFL_POOL_MAX);
    assert_int_equal(dfl_pool_parse("median", &pm, &err), DFL_ERR_USAGE);
}

/* ------------------------------------------------------------------------ */
/* Scales and ticks                                                         */
/* ------------------------------------------------------------------------ */

static void test_norms(void **state)
{
    (void)state;
    dfl_norm lin = {DFL_SCALE_LINEAR, 0, 0, 4, 0};
    assert_true(fabs(dfl_norm_apply(&lin, 1) - 0.25) < 1e-12);
    assert_true(dfl_norm_apply(&lin, -1) == 0 && dfl_norm_apply(&lin, 9) == 1);
    assert_true(isnan(dfl_norm_apply(&lin, NAN)));
    dfl_norm lg = {DFL_SCALE_LOG, 0, 1e-4, 1, 0};
    assert_true(fabs(dfl_norm_apply(&lg, 1e-2) - 0.5) < 1e-12);
    assert_true(dfl_norm_apply(&lg, 0) == 0);
    dfl_norm sq = {DFL_SCALE_SQRT, 0, 0, 4, 0};
    assert_true(fabs(dfl_norm_apply(&sq, 1) - 0.5) < 1e-12);
    dfl_norm dv = {DFL_SCALE_SQRT, 1, -4, 4, 0};
    assert_true(fabs(dfl_norm_apply(&dv, -1) - 0.25) < 1e-12);
    dfl_norm sl = {DFL_SCALE_LOG, 1, -1, 1, 0};
    assert_true(fabs(dfl_norm_apply(&sl, 0) - 0.5) < 1e-12);
    assert_true(dfl_norm_apply(&sl, 1e-3) > 0.5 && dfl_norm_apply(&sl, -1e-3) < 0.5);
    /* invert is the inverse of apply on every kind */
    dfl_norm all[] = {lin, lg, sq, dv, sl};
    for (int k = 0; k < 5; k++)
        for (double t = 0; t <= 1.0; t += 0.125) {
            double v = dfl_norm_invert(&all[k], t);
            assert_true(fabs(dfl_norm_apply(&all[k], v) - t) < 1e-9);
        }
    dfl_error err;
    dfl_norm bad = {DFL_SCALE_LOG, 0, 0, 1, 0};
    assert_int_equal(dfl_norm_check(&bad, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "log"));
    dfl_norm rev = {DFL_SCALE_LINEAR, 0, 2, 1, 0};
    assert_int_equal(dfl_norm_check(&rev, &err), DFL_ERR_USAGE);
    assert_int_equal(dfl_norm_check(&lin, &err), DFL_OK);
}

static void test_ticks(void **state)
{
    (void)state;
    double t[32], step;
    int n = dfl_ticks_linear(0, 1, 6, t, 32, &step);
    assert_int_equal(n, 6);
    assert_true(fabs(step - 0.2) < 1e-12 && t[0] == 0 && fabs(t[5] - 1) < 1e-12);
    n = dfl_ticks_linear(0, 4095, 8, t, 32, &step);
    assert_true(n >= 4 && n <= 8);
    for (int i = 0; i < n; i++)
        assert_true(t[i] >= 0 && t[i] <= 4095);
    n = dfl_ticks_log(1e-4, 1, 10, t, 32);
    assert_int_equal(n, 5);
    assert_true(fabs(t[0] - 1e-4) < 1e-16 && fabs(t[4] - 1) < 1e-12);
    /* colour-bar ticks stay inside the limits, for every scale */
    dfl_norm norms[] = {{DFL_SCALE_LINEAR, 0, 0, 0.0371, 0},
                        {DFL_SCALE_LOG, 0, 3e-5, 0.3, 0},
                        {DFL_SCALE_SQRT, 0, 0, 0.8, 0},
                        {DFL_SCALE_LINEAR, 1, -0.05, 0.05, 0},
                        {DFL_SCALE_LOG, 1, -0.5, 0.5, 0}};
    for (int k = 0; k < 5; k++) {
        n = dfl_ticks_for_norm(&norms[k], 8, t, 32);
        assert_true(n >= 2);
        for (int i = 0; i < n; i++)
            assert_true(t[i] >= norms[k].vmin - 1e-12 && t[i] <= norms[k].vmax + 1e-12);
    }
    char buf[32];
    dfl_tick_label(0.05, buf, sizeof buf);
    assert_string_equal(buf, "0.05");
    dfl_tick_label(1e-5, buf, sizeof buf);
    assert_string_equal(buf, "1e-5");
    dfl_tick_label(-0.2, buf, sizeof buf);
    assert_string_equal(buf, "\xe2\x88\x92"
                             "0.2");
}

/* ------------------------------------------------------------------------ */
/* Pooling                                                                  */
/* ------------------------------------------------------------------------ */

static uint32_t rng_state = 12345;
static float frand(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 16777216.0f;
}

/* The streaming pooler, fed in uneven row blocks, equals the naive twin. */
static void check_pool(int64_t rows, int64_t cols, int64_t orows, int64_t ocols, dfl_pool_mode mode, int causal)
{
    float *in = malloc((size_t)(rows * cols) * sizeof *in);
    float *fast = malloc((size_t)(orows * ocols) * sizeof *fast),
          *slow = malloc((size_t)(orows * ocols) * sizeof *slow);
    assert_non_null(in);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            in[i * cols + j] = causal && j > i ? NAN : frand() * 2 - (mode == DFL_POOL_MAX ? 1.0f : 0.0f);
    dfl_pool *p;
    dfl_error err;
    assert_int_equal(dfl_pool_create(rows, cols, orows, ocols, mode, &p, &err), DFL_OK);
    for (int64_t r0 = 0; r0 < rows;) {
        int64_t n = 1 + (int64_t)(frand() * 7);
        if (r0 + n > rows) n = rows - r0;
        dfl_pool_rows(p, r0, n, in + r0 * cols);
        r0 += n;
    }
    dfl_pool_result(p, fast);
    dfl_pool_destroy(p);
    dfl_pool_naive(in, rows, cols, orows, ocols, mode, slow);
    for (int64_t i = 0; i < orows * ocols; i++) {
        if (isnan(slow[i])) {
            assert_true(isnan(fast[i]));
            continue;
        }
        if (fabsf(fast[i] - slow[i]) > 1e-5f * (1 + fabsf(slow[i]))) {
            print_error("%lldx%lld -> %lldx%lld %s: cell %lld fast %g naive %g\n", (long long)rows, (long long)cols,
                        (long long)orows, (long long)ocols, dfl_pool_name(mode), (long long)i, fast[i], slow[i]);
            fail();
        }
    }
    free(in);
    free(fast);
    free(slow);
}

static void test_pool_vs_naive(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        check_pool(64, 64, 16, 16, (dfl_pool_mode)mode, 1); /* exact 4:1 */
        check_pool(37, 53, 10, 7, (dfl_pool_mode)mode, 0);  /* fractional edges */
        check_pool(50, 50, 17, 17, (dfl_pool_mode)mode, 1); /* fractional, causal */
        check_pool(9, 9, 9, 9, (dfl_pool_mode)mode, 1);     /* identity */
        check_pool(1, 300, 1, 64, (dfl_pool_mode)mode, 0);  /* a strip */
        check_pool(20, 20, 1, 1, (dfl_pool_mode)mode, 1);   /* everything in one cell */
    }
}

static void test_pool_values(void **state)
{
    (void)state;
    /* 4 x 4 -> 2 x 2 mean by hand; NaN is skipped, an all-NaN cell stays NaN */
    float in[16] = {1, 2, NAN, NAN, 3, 4, NAN, NAN, 1, 1, 8, 0, 1, 1, 0, -4};
    float out[4];
    dfl_pool *p;
    dfl_error err;
    assert_int_equal(dfl_pool_create(4, 4, 2, 2, DFL_POOL_MEAN, &p, &err), DFL_OK);
    dfl_pool_rows(p, 0, 4, in);
    dfl_pool_result(p, out);
    dfl_pool_destroy(p);
    assert_true(out[0] == 2.5f && isnan(out[1]) && out[2] == 1.0f && out[3] == 1.0f);
    /* max keeps the entry farthest from 0, sign included */
    assert_int_equal(dfl_pool_create(4, 4, 2, 2, DFL_POOL_MAX, &p, &err), DFL_OK);
    dfl_pool_rows(p, 0, 4, in);
    dfl_pool_result(p, out);
    dfl_pool_destroy(p);
    assert_true(out[0] == 4.0f && isnan(out[1]) && out[2] == 1.0f && out[3] == 8.0f);
    /* a single sharp needle in 256 x 256 -> 16 x 16: max keeps it, mean dilutes it 256x */
    float *big = calloc(256 * 256, sizeof *big), pooled[256];
    big[100 * 256 + 37] = 1.0f;
    for (int mode = 0; mode < 2; mode++) {
        assert_int_equal(dfl_pool_create(256, 256, 16, 16, (dfl_pool_mode)mode, &p, &err), DFL_OK);
        dfl_pool_rows(p, 0, 256, big);
        dfl_pool_result(p, pooled);
        dfl_pool_destroy(p);
        float want = mode == DFL_POOL_MAX ? 1.0f : 1.0f / 256.0f;
        assert_true(fabsf(pooled[(100 / 16) * 16 + 37 / 16] - want) < 1e-7f);
    }
    free(big);
    /* growing is refused */
    assert_int_equal(dfl_pool_create(4, 4, 8, 2, DFL_POOL_MEAN, &p, &err), DFL_ERR_USAGE);
    assert_null(p);
}

/* The pooled grid a[n] equals the naive b[n] (NaN where b is NaN), to the tolerance
 * check_pool uses. */
static void assert_pooled_equal(const float *a, const float *b, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        if (isnan(b[i]) ? !isnan(a[i]) : !(fabsf(a[i] - b[i]) <= 1e-5f * (1 + fabsf(b[i])))) {
            print_error("%s: cell %lld fast %g naive %g\n", what, (long long)i, a[i], b[i]);
            fail();
        }
    }
}

/* What dfl_pool_rows_valid must never look at: it would show in any mean or max. */
#define GARBAGE 1e30f

typedef enum { VALID_NULL, VALID_CAUSAL, VALID_RANDOM } valid_kind;

/* A rows x cols grid with NaN entries inside the data, its valid lengths [rows], and
 * the same grid with every entry past its row's valid length NaN (for the naive twin). */
static float *valid_fixture(int64_t rows, int64_t cols, valid_kind vk, int64_t *valid)
{
    float *grid = malloc((size_t)(rows * cols) * sizeof *grid);
    assert_non_null(grid);
    for (int64_t i = 0; i < rows; i++) {
        /* random lengths include none, all, and more than all */
        const int64_t pick[5] = {0, cols, cols + 7, cols / 3, (int64_t)(frand() * (float)cols)};
        valid[i] = vk == VALID_NULL ? cols : vk == VALID_CAUSAL ? i + 1 : pick[(int)(frand() * 5) % 5];
        for (int64_t j = 0; j < cols; j++)
            grid[i * cols + j] = j >= valid[i] || frand() < 0.05f ? NAN : frand() * 2 - 1;
    }
    return grid;
}

/* Feed grid (with its valid lengths) to dfl_pool_rows_valid in blocks of `step` rows
 * (0: uneven, 1..300), each block copied into rows of stride ld = its widest valid row
 * (pad > 0: cols + pad) with GARBAGE past every row's valid length; out [orows][ocols]. */
static void pool_fed(const float *grid, const int64_t *valid, int64_t rows, int64_t cols, int64_t orows, int64_t ocols,
                     dfl_pool_mode mode, int pass_null, int64_t step, int64_t pad, float *out)
{
    float *blk = malloc((size_t)(300 * (cols + pad + 1)) * sizeof *blk);
    assert_non_null(blk);
    dfl_pool *p;
    dfl_error err;
    assert_int_equal(dfl_pool_create(rows, cols, orows, ocols, mode, &p, &err), DFL_OK);
    for (int64_t r0 = 0; r0 < rows;) {
        int64_t n = step ? step : 1 + (int64_t)(frand() * 300);
        if (n > 300) n = 300;
        if (r0 + n > rows) n = rows - r0;
        int64_t ld = 1;
        for (int64_t k = 0; k < n; k++) {
            int64_t len = valid[r0 + k] < cols ? valid[r0 + k] : cols;
            ld = len > ld ? len : ld;
        }
        if (pad || pass_null) ld = cols + pad;
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < ld; j++)
                blk[k * ld + j] = j < valid[r0 + k] && j < cols ? grid[(r0 + k) * cols + j] : GARBAGE;
        dfl_pool_rows_valid(p, r0, n, blk, ld, pass_null ? NULL : valid + r0);
        r0 += n;
    }
    dfl_pool_result(p, out);
    dfl_pool_destroy(p);
    free(blk);
}

/* dfl_pool_rows_valid, fed in blocks of several sizes, packed or padded, equals the
 * naive twin on the NaN-masked grid, for both modes. */
static void check_pool_valid(int64_t rows, int64_t cols, int64_t orows, int64_t ocols, valid_kind vk)
{
    int64_t *valid = malloc((size_t)rows * sizeof *valid);
    assert_non_null(valid);
    float *grid = valid_fixture(rows, cols, vk, valid);
    float *slow = malloc((size_t)(orows * ocols) * sizeof *slow);
    float *fast = malloc((size_t)(orows * ocols) * sizeof *fast);
    assert_true(slow && fast);
    const int64_t steps[4] = {7, 64, 256, 0}, pads[2] = {0, 5};
    for (int mode = 0; mode < 2; mode++) {
        dfl_pool_naive(grid, rows, cols, orows, ocols, (dfl_pool_mode)mode, slow);
        for (int s = 0; s < 4; s++)
            for (int q = 0; q < 2; q++) {
                char what[160];
                snprintf(what, sizeof what, "%lldx%lld -> %lldx%lld %s valid %d step %lld pad %lld", (long long)rows,
                         (long long)cols, (long long)orows, (long long)ocols, dfl_pool_name((dfl_pool_mode)mode),
                         (int)vk, (long long)steps[s], (long long)pads[q]);
                pool_fed(grid, valid, rows, cols, orows, ocols, (dfl_pool_mode)mode, vk == VALID_NULL, steps[s],
                         pads[q], fast);
                assert_pooled_equal(fast, slow, orows * ocols, what);
            }
    }
    free(grid);
    free(valid);
    free(slow);
    free(fast);
}

static void test_pool_valid_integer(void **state)
{
    (void)state;
    for (int vk = 0; vk < 3; vk++) {
        check_pool_valid(512, 512, 128, 128, (valid_kind)vk); /* 4:1, as 4096 -> 1024 */
        check_pool_valid(100, 90, 100, 90, (valid_kind)vk);   /* 1:1 */
        check_pool_valid(300, 96, 100, 32, (valid_kind)vk);   /* 3:1 */
        check_pool_valid(96, 256, 12, 16, (valid_kind)vk);    /* 16:1 in x, 8:1 in y */
        check_pool_valid(200, 640, 50, 10, (valid_kind)vk);   /* 64:1 in x */
        check_pool_valid(257, 512, 100, 128, (valid_kind)vk); /* 4:1 in x only */
    }
}

static void test_pool_valid_fractional(void **state)
{
    (void)state;
    for (int vk = 0; vk < 3; vk++) {
        check_pool_valid(300, 500, 70, 123, (valid_kind)vk);  /* both ways fractional */
        check_pool_valid(250, 257, 100, 100, (valid_kind)vk); /* about 2.5:1 */
        check_pool_valid(150, 150, 149, 149, (valid_kind)vk); /* nearly 1:1: a boundary in every row */
        check_pool_valid(64, 300, 3, 7, (valid_kind)vk);      /* few, wide output cells */
    }
}

/* Entries past a row's valid length are never read, not even by a vector load: they
 * lie on pages that may not be read at all. */
static void test_pool_valid_unreadable_tail(void **state)
{
    (void)state;
    const int64_t fp = sysconf(_SC_PAGESIZE) / (int64_t)sizeof(float); /* floats per page */
    const int64_t rows = 32, ld = 3 * fp, cols = ld - 96;
    const size_t bytes = (size_t)(rows * ld) * sizeof(float);
    float *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(buf != MAP_FAILED);
    int64_t valid[32];
    float *grid = malloc((size_t)(rows * cols) * sizeof *grid);
    assert_non_null(grid);
    for (int64_t i = 0; i < rows; i++) {
        valid[i] = (i % 4) * fp; /* 0, 1 or 2 pages, or past cols (all) */
        for (int64_t j = 0; j < ld; j++) {
            float v = frand() * 2 - 1;
            buf[i * ld + j] = j < valid[i] ? v : GARBAGE;
            if (j < cols) grid[i * cols + j] = j < valid[i] ? v : NAN;
        }
        if (valid[i] < cols)
            assert_int_equal(mprotect(buf + i * ld + valid[i], (size_t)(ld - valid[i]) * sizeof(float), PROT_NONE), 0);
    }
    /* 4:1 (fast path), then a fractional width; 32 rows of ~3000 are one parallel block */
    const int64_t widths[2] = {cols / 4, 700};
    float slow[8 * 744], fast[8 * 744];
    for (int w = 0; w < 2; w++)
        for (int mode = 0; mode < 2; mode++) {
            dfl_pool *p;
            dfl_error err;
            assert_int_equal(dfl_pool_create(rows, cols, 8, widths[w], (dfl_pool_mode)mode, &p, &err), DFL_OK);
            dfl_pool_rows_valid(p, 0, rows, buf, ld, valid);
            dfl_pool_result(p, fast);
            dfl_pool_destroy(p);
            dfl_pool_naive(grid, rows, cols, 8, widths[w], (dfl_pool_mode)mode, slow);
            assert_pooled_equal(fast, slow, 8 * widths[w], "unreadable tail");
        }
    munmap(buf, bytes);
    free(grid);
}

/* The pooled grid does not depend on the thread count, bit for bit (blocks large
 * enough to be shared out, by output row and by column strip). Every other entry is
 * +-1e12, cancelling in pairs of rows: a sum taken in another order would differ in
 * its low bits, which the mean of the small entries then shows. */
static void test_pool_valid_threads(void **state)
{
    (void)state;
    const int64_t shapes[4][4] = {{512, 512, 128, 128}, {600, 600, 128, 100}, {512, 512, 2, 128}, {600, 700, 3, 90}};
    int64_t valid[600];
    int was = omp_get_max_threads();
    for (int sh = 0; sh < 4; sh++) {
        const int64_t *d = shapes[sh];
        float *grid = valid_fixture(d[0], d[1], VALID_CAUSAL, valid);
        for (int64_t i = 0; i < d[0]; i++)
            for (int64_t j = 0; j < d[1]; j += 2)
                if (!isnan(grid[i * d[1] + j])) grid[i * d[1] + j] = i % 2 ? 1e12f : -1e12f;
        size_t n = (size_t)(d[2] * d[3]);
        float *one = malloc(n * sizeof *one), *two = malloc(n * sizeof *two);
        assert_true(one && two);
        for (int mode = 0; mode < 2; mode++) {
            omp_set_num_threads(1);
            pool_fed(grid, valid, d[0], d[1], d[2], d[3], (dfl_pool_mode)mode, 0, 256, 0, one);
            omp_set_num_threads(2);
            pool_fed(grid, valid, d[0], d[1], d[2], d[3], (dfl_pool_mode)mode, 0, 256, 0, two);
            assert_memory_equal(one, two, n * sizeof *one);
        }
        free(grid);
        free(one);
        free(two);
    }
    omp_set_num_threads(was);
}

/* Rows outside the grid are skipped, blocks may come in any order, and a block that
 * never reaches an output row leaves it NaN. */
static void test_pool_valid_edges(void **state)
{
    (void)state;
    float in[6 * 8], out[3 * 4], want[3 * 4];
    int64_t valid[6] = {8, 8, 8, 8, 8, 8};
    for (int i = 0; i < 6 * 8; i++)
        in[i] = (float)(i % 7) - 2;
    for (int mode = 0; mode < 2; mode++) {
        dfl_pool *p;
        dfl_error err;
        assert_int_equal(dfl_pool_create(4, 8, 2, 4, (dfl_pool_mode)mode, &p, &err), DFL_OK);
        /* rows -1 .. 4 of a 4-row grid: the first and last are not in it */
        dfl_pool_rows_valid(p, 2, 4, in + 3 * 8, 8, valid);
        dfl_pool_rows_valid(p, -1, 3, in, 8, valid);
        dfl_pool_rows_valid(p, 0, 0, in, 8, valid);
        dfl_pool_result(p, out);
        dfl_pool_destroy(p);
        dfl_pool_naive(in + 8, 4, 8, 2, 4, (dfl_pool_mode)mode, want);
        assert_pooled_equal(out, want, 8, "rows outside");
        /* only rows 0..1 given: output row 1 has no data */
        assert_int_equal(dfl_pool_create(4, 8, 2, 4, (dfl_pool_mode)mode, &p, &err), DFL_OK);
        dfl_pool_rows_valid(p, 0, 2, in, 8, NULL);
        dfl_pool_result(p, out);
        dfl_pool_destroy(p);
        for (int x = 0; x < 4; x++)
            assert_true(!isnan(out[x]) && isnan(out[4 + x]));
    }
}

/* ------------------------------------------------------------------------ */
/* Canvas, font, heatmap, colour bar                                        */
/* ------------------------------------------------------------------------ */

static const dfl_rgb WHITE = {255, 255, 255}, BLACK = {0, 0, 0};

/* Counts pixels darker than mid-grey in the box (x0, y0, w, h). */
static int dark_pixels(const dfl_canvas *c, int x0, int y0, int w, int h)
{
    int n = 0;
    for (int y = y0; y < y0 + h; y++)
        for (int x = x0; x < x0 + w; x++)
            n += dfl_canvas_get(c, x, y).r < 128;
    return n;
}

static void test_font(void **state)
{
    (void)state;
    dfl_canvas *c;
    dfl_error err;
    assert_int_equal(dfl_canvas_create(200, 60, WHITE, &c, &err), DFL_OK);
    /* Pango widths: longer text is wider, scale 2 about doubles it */
    int a = dfl_text_width("A", 1), ab = dfl_text_width("AB", 1), ab2 = dfl_text_width("AB", 2);
    assert_true(a > 2 && ab > a && abs(ab2 - 2 * ab) <= 2);
    assert_int_equal(dfl_text_width("", 1), 0);
    assert_int_equal(dfl_text_length("caf\xc3\xa9"), 4);
    /* text lands inside its line box at the anchor, and nowhere else */
    dfl_canvas_text(c, 10, 5, "AB", 2, BLACK, DFL_ALIGN_LEFT);
    assert_true(dark_pixels(c, 10, 5, ab2 + 1, 2 * DFL_FONT_H) > 20);
    assert_int_equal(dark_pixels(c, 0, 0, 10, 60), 0);
    assert_int_equal(dark_pixels(c, 10 + ab2 + 2, 0, 60, 60), 0);
    /* right alignment ends the text at x */
    dfl_canvas_text(c, 190, 40, "AB", 1, BLACK, DFL_ALIGN_RIGHT);
    assert_true(dark_pixels(c, 190 - ab, 40, ab, DFL_FONT_H) > 5);
    assert_int_equal(dark_pixels(c, 191, 30, 9, 30), 0);
    dfl_canvas_destroy(c);

    /* Unicode: λ, −, ≥ and CJK draw glyphs (font fallback), never a '?' */
    const char *labels[4] = {"\xce\xbb", "\xe2\x88\x92", "\xe2\x89\xa5", "\xe6\x9d\xb1"};
    dfl_canvas *q;
    assert_int_equal(dfl_canvas_create(40, 40, WHITE, &q, &err), DFL_OK);
    dfl_canvas_text(q, 5, 5, "?", 3, BLACK, DFL_ALIGN_LEFT);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(dfl_canvas_create(40, 40, WHITE, &c, &err), DFL_OK);
        dfl_canvas_text(c, 5, 5, labels[i], 3, BLACK, DFL_ALIGN_LEFT);
        int differ = 0, ink = 0;
        for (int y = 0; y < 40; y++)
            for (int x = 0; x < 40; x++) {
                dfl_rgb u = dfl_canvas_get(c, x, y), v = dfl_canvas_get(q, x, y);
                differ += u.r != v.r;
                ink += u.r < 128;
            }
        assert_true(ink > 3);
        assert_true(differ > 10);
        dfl_canvas_destroy(c);
    }
    dfl_canvas_destroy(q);

    /* drawing off the canvas is clipped, not a crash; rotated text runs upwards */
    assert_int_equal(dfl_canvas_create(40, 80, WHITE, &c, &err), DFL_OK);
    dfl_canvas_text(c, -400, -5, "clipped text", 3, BLACK, DFL_ALIGN_LEFT);
    dfl_canvas_text_up(c, 10, 70, "upward", 1, BLACK, DFL_ALIGN_LEFT);
    int up = dfl_text_width("upward", 1);
    assert_true(dark_pixels(c, 10, 70 - up, DFL_FONT_H, up) > 10);
    assert_int_equal(dark_pixels(c, 10, 0, DFL_FONT_H, 70 - up - 2), 0);
    dfl_canvas_destroy(c);
    /* clipping text to a number of characters adds an ellipsis */
    char buf[32];
    dfl_text_clip(buf, sizeof buf, "abcdefghijkl", 5);
    assert_string_equal(buf, "abcd\xe2\x80\xa6");
    dfl_text_clip(buf, sizeof buf, "a\tb", 5);
    assert_string_equal(buf, "a b");
    assert_int_equal(dfl_canvas_create(0, 10, WHITE, &c, &err), DFL_ERR_USAGE);
}

static void test_heatmap_nodata(void **state)
{
    (void)state;
    dfl_canvas *c;
    dfl_error err;
    assert_int_equal(dfl_canvas_create(16, 16, WHITE, &c, &err), DFL_OK);
    /* 2 x 2 causal grid: the upper right is masked */
    float v[4] = {0.0f, NAN, 0.5f, 1.0f};
    dfl_norm n = {DFL_SCALE_LINEAR, 0, 0, 1, 0};
    dfl_rgb nodata = {200, 200, 200}, hatch = {160, 160, 160};
    dfl_canvas_heatmap(c, 0, 0, v, 2, 2, 8, 8, &n, DFL_CMAP_VIRIDIS, nodata, hatch);
    dfl_rgb zero = dfl_cmap_color(DFL_CMAP_VIRIDIS, 0);
    assert_rgb(dfl_canvas_get(c, 3, 3), zero.r, zero.g, zero.b);
    dfl_rgb top = dfl_cmap_entry(DFL_CMAP_VIRIDIS, 255);
    assert_rgb(dfl_canvas_get(c, 12, 12), top.r, top.g, top.b);
    /* masked cells are neutral grey (r = g = b), never the colour of 0 */
    int greys = 0;
    for (int y = 0; y < 8; y++)
        for (int x = 8; x < 16; x++) {
            dfl_rgb k = dfl_canvas_get(c, x, y);
            assert_true(k.r == k.g && k.g == k.b);
            assert_false(k.r == zero.r && k.g == zero.g && k.b == zero.b);
            greys += k.r < 200;
        }
    assert_true(greys > 0 && greys < 64); /* hatched: lines of the darker grey over the lighter */
    dfl_canvas_destroy(c);
}

static void test_colorbar_range(void **state)
{
    (void)state;
    dfl_canvas *c;
    dfl_error err;
    assert_int_equal(dfl_canvas_create(200, 300, WHITE, &c, &err), DFL_OK);
    dfl_colorbar cb = {DFL_CMAP_MAGMA, {DFL_SCALE_LINEAR, 0, 0, 0.04, 0}, "attention", "note", 0, 1, 1, NULL};
    int n = dfl_canvas_colorbar(c, 20, 40, 18, 200, &cb);
    assert_true(n >= 2);
    /* top row = the colour of vmax, bottom row = the colour of vmin */
    dfl_rgb hi = dfl_cmap_color(DFL_CMAP_MAGMA, 1.0 - 0.5 / 200), lo = dfl_cmap_color(DFL_CMAP_MAGMA, 0.5 / 200);
    dfl_rgb t = dfl_canvas_get(c, 29, 40), b = dfl_canvas_get(c, 29, 239);
    assert_rgb(t, hi.r, hi.g, hi.b);
    assert_rgb(b, lo.r, lo.g, lo.b);
    /* the extension triangle above the bar (extend_high) has the top colour */
    dfl_rgb tri = dfl_canvas_get(c, 29, 40 - 3);
    dfl_rgb top = dfl_cmap_color(DFL_CMAP_MAGMA, 1);
    assert_rgb(tri, top.r, top.g, top.b);
    /* no triangle below (extend_low off): white under the frame */
    assert_rgb(dfl_canvas_get(c, 29, 240 + 3), 255, 255, 255);
    /* tick marks at 0 (bottom) and 0.04 (top) */
    assert_rgb(dfl_canvas_get(c, 20 + 18 + 1, 239), 0x22, 0x22, 0x22);
    assert_rgb(dfl_canvas_get(c, 20 + 18 + 1, 40), 0x22, 0x22, 0x22);
    assert_true(dfl_colorbar_width(&cb, 18) > 18);
    dfl_canvas_destroy(c);
}

static void test_legend(void **state)
{
    (void)state;
    dfl_legend_item items[3] = {{"bos", {0, 0, 0}, 0, {0, 0, 0}},
                                {"answer", {0, 158, 115}, 0, {0, 0, 0}},
                                {"masked", {200, 200, 200}, 1, {160, 160, 160}}};
    int w, h;
    dfl_legend_size(items, 3, 1, 1000, &w, &h);
    assert_int_equal(h, DFL_FONT_H);
    dfl_legend_size(items, 3, 1, 60, &w, &h); /* narrow: wraps onto three lines */
    assert_true(h > 2 * DFL_FONT_H);
    dfl_canvas *c;
    dfl_error err;
    assert_int_equal(dfl_canvas_create(300, 40, WHITE, &c, &err), DFL_OK);
    assert_int_equal(dfl_canvas_legend(c, 0, 0, items, 3, 1, 300, BLACK), DFL_FONT_H);
    assert_rgb(dfl_canvas_get(c, 5, 5), 0, 0, 0); /* inside the bos swatch */
    dfl_canvas_destroy(c);
}

/* ------------------------------------------------------------------------ */
/* PNG                                                                      */
/* ------------------------------------------------------------------------ */

/* Decode a PNG with libpng's simplified API into RGB; caller frees. */
static uint8_t *decode_png(const char *path, int *w, int *h)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, path)) return NULL;
    img.format = PNG_FORMAT_RGB;
    uint8_t *buf = malloc(PNG_IMAGE_SIZE(img));
    if (!buf || !png_image_finish_read(&img, NULL, buf, 0, NULL)) {
        free(buf);
        png_image_free(&img);
        return NULL;
    }
    *w = (int)img.width;
    *h = (int)img.height;
    return buf;
}

static void test_png_golden(void **state)
{
    (void)state;
    dfl_canvas *c;
    dfl_error err;
    assert_int_equal(dfl_canvas_create(37, 21, WHITE, &c, &err), DFL_OK);
    float v[9] = {0.0f, NAN, NAN, 0.25f, 0.5f, NAN, 0.75f, 1.0f, 2.0f};
    dfl_norm n = {DFL_SCALE_LINEAR, 0, 0, 1, 0};
    dfl_rgb nodata = {200, 200, 200}, hatch = {160, 160, 160};
    dfl_canvas_heatmap(c, 2, 1, v, 3, 3, 6, 6, &n, DFL_CMAP_VIRIDIS, nodata, hatch);
    dfl_rgb red = {255, 0, 0};
    dfl_canvas_line(c, 25, 0, 36, 11, red);
    const char *keys[1] = {"Software"}, *vals[1] = {"test_render"};
    const char *path = path_of("golden.png");
    assert_int_equal(dfl_png_write(c, path, 0, keys, vals, 1, &err), DFL_OK);
    int w = 0, h = 0;
    uint8_t *px = decode_png(path, &w, &h);
    assert_non_null(px);
    assert_int_equal(w, 37);
    assert_int_equal(h, 21);
    /* every pixel matches the canvas */
    for (int y = 0; y < 21; y++)
        for (int x = 0; x < 37; x++) {
            dfl_rgb k = dfl_canvas_get(c, x, y);
            const uint8_t *p = px + 3 * (y * 37 + x);
            assert_true(p[0] == k.r && p[1] == k.g && p[2] == k.b);
        }
    /* chosen pixels: value 0, 0.5, 1 and the clipped 2 (top colour), a masked cell, the line */
    struct {
        int x, y, r, g, b;
    } want[] = {
        {4, 3, 68, 1, 84},      /* v = 0: viridis[0] */
        {10, 9, 0, 0, 0},       /* v = 0.5: viridis[128] (filled below) */
        {16, 15, 253, 231, 37}, /* v = 2 > vmax: viridis[255] */
        {0, 0, 255, 255, 255},  /* background */
    };
    dfl_rgb mid = dfl_cmap_entry(DFL_CMAP_VIRIDIS, 128);
    want[1].r = mid.r;
    want[1].g = mid.g;
    want[1].b = mid.b;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const uint8_t *p = px + 3 * (want[i].y * 37 + want[i].x);
        if (p[0] != want[i].r || p[1] != want[i].g || p[2] != want[i].b) {
            print_error("pixel (%d, %d) = (%d, %d, %d), expected (%d, %d, %d)\n", want[i].x, want[i].y, p[0], p[1],
                        p[2], want[i].r, want[i].g, want[i].b);
            fail();
        }
    }
    /* on the anti-aliased line: red dominates */
    const uint8_t *l = px + 3 * (5 * 37 + 30);
    assert_true(l[0] == 255 && l[1] < 200 && l[1] == l[2]);
    /* the masked cell (row 0, col 2) is grey */
    const uint8_t *m = px + 3 * (3 * 37 + 2 + 2 * 6 + 3);
    assert_true(m[0] == m[1] && m[1] == m[2] && m[0] >= 160 && m[0] <= 200);
    free(px);

    /* an existing file is kept without overwrite, replaced with it */
    assert_int_equal(dfl_png_write(c, path, 0, NULL, NULL, 0, &err), DFL_ERR_EXISTS);
    assert_non_null(strstr(err.msg, "golden.png"));
    assert_int_equal(dfl_png_write(c, path, 1, NULL, NULL, 0, &err), DFL_OK);
    /* an unwritable folder: an error, and nothing left behind */
    int before = count_files();
    assert_int_equal(dfl_png_write(c, path_of("no/such/dir/x.png"), 0, NULL, NULL, 0, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "x.png"));
    assert_int_equal(count_files(), before);
    dfl_canvas_destroy(c);
}

/* The writer's other formats and its errors: SVG and PDF files start as such, an
 * existing file needs overwrite, bad options and extensions are usage errors, an
 * unwritable folder is an I/O error, and nothing is left behind on any failure. */
static void test_write_formats(void **state)
{
    (void)state;
    dfl_canvas *c;
    dfl_error err;
    assert_int_equal(dfl_canvas_create(120, 80, WHITE, &c, &err), DFL_OK);
    dfl_canvas_text(c, 4, 4, "\xce\xbb = 0.8", 2, BLACK, DFL_ALIGN_LEFT);
    dfl_format f;
    assert_int_equal(dfl_format_of_path("a/b.SVG", &f, &err), DFL_OK);
    assert_int_equal(f, DFL_FORMAT_SVG);
    assert_int_equal(dfl_format_of_path("a.pdf/b", &f, &err), DFL_ERR_USAGE);
    const char *heads[2] = {"<?xml", "%PDF-"}, *names[2] = {"w.svg", "w.pdf"};
    for (int i = 0; i < 2; i++) {
        const char *path = path_of(names[i]);
        assert_int_equal(dfl_canvas_write(c, path, 0, NULL, &err), DFL_OK);
        FILE *fp = fopen(path, "rb");
        char head[8] = {0};
        assert_non_null(fp);
        assert_true(fread(head, 1, 5, fp) == 5);
        fclose(fp);
        assert_memory_equal(head, heads[i], 5);
        assert_int_equal(dfl_canvas_write(c, path, 0, NULL, &err), DFL_ERR_EXISTS);
        assert_int_equal(dfl_canvas_write(c, path, 1, NULL, &err), DFL_OK);
    }
    int before = count_files();
    assert_int_equal(dfl_canvas_write(c, path_of("no/such/dir/x.svg"), 0, NULL, &err), DFL_ERR_IO);
    assert_int_equal(dfl_canvas_write(c, path_of("no/such/dir/x.pdf"), 0, NULL, &err), DFL_ERR_IO);
    assert_int_equal(dfl_canvas_write(c, path_of("x.tiff"), 0, NULL, &err), DFL_ERR_USAGE);
    dfl_output o = dfl_output_default();
    o.dpi = -1;
    assert_int_equal(dfl_canvas_write(c, path_of("x.png"), 0, &o, &err), DFL_ERR_USAGE);
    o = dfl_output_default();
    o.width_in = 500; /* 500 in at 10000 dpi: beyond the largest PNG */
    o.dpi = 10000;
    assert_int_equal(dfl_canvas_write(c, path_of("x.png"), 0, &o, &err), DFL_ERR_USAGE);
    assert_int_equal(count_files(), before);
    /* --dpi with a width: 2 in at 60 dpi is 120 pixels */
    o = dfl_output_default();
    o.width_in = 2;
    o.dpi = 60;
    assert_int_equal(dfl_canvas_write(c, path_of("d.png"), 0, &o, &err), DFL_OK);
    int w = 0, h = 0;
    uint8_t *px = decode_png(path_of("d.png"), &w, &h);
    assert_non_null(px);
    assert_int_equal(w, 120);
    assert_int_equal(h, 80);
    free(px);
    dfl_canvas_destroy(c);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Quickselect against the sorted array: the value of rank round(q·(n−1)), for sizes with
 * many repeats, sorted and reversed inputs. */
static void test_quantile_select(void **state)
{
    (void)state;
    uint32_t seed = 12345;
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 1 + (size_t)(trial * 37 % 500);
        float *v = malloc(n * sizeof *v), *sorted = malloc(n * sizeof *sorted);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            v[i] = trial % 3 == 0 ? (float)(seed >> 28) : trial % 3 == 1 ? (float)i : (float)(n - i);
        }
        memcpy(sorted, v, n * sizeof *v);
        qsort(sorted, n, sizeof *sorted, cmp_float);
        double qs[4] = {0.0, 0.5, 0.995, 1.0};
        for (int k = 0; k < 4; k++) {
            float *w = malloc(n * sizeof *w);
            memcpy(w, v, n * sizeof *v);
            size_t rank = (size_t)floor(qs[k] * (double)(n - 1) + 0.5);
            assert_true(dfl_quantile_select(w, n, qs[k]) == sorted[rank]);
            free(w);
        }
        free(v), free(sorted);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantile_select),
        cmocka_unit_test(test_viridis_published),
        cmocka_unit_test(test_magma_published),
        cmocka_unit_test(test_rdbu_diverging),
        cmocka_unit_test(test_cmap_parse),
        cmocka_unit_test(test_norms),
        cmocka_unit_test(test_ticks),
        cmocka_unit_test(test_pool_vs_naive),
        cmocka_unit_test(test_pool_values),
        cmocka_unit_test(test_pool_valid_integer),
        cmocka_unit_test(test_pool_valid_fractional),
        cmocka_unit_test(test_pool_valid_unreadable_tail),
        cmocka_unit_test(test_pool_valid_threads),
        cmocka_unit_test(test_pool_valid_edges),
        cmocka_unit_test(test_font),
        cmocka_unit_test(test_heatmap_nodata),
        cmocka_unit_test(test_colorbar_range),
        cmocka_unit_test(test_legend),
        cmocka_unit_test(test_png_golden),
        cmocka_unit_test(test_write_formats),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
