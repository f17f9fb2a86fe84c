/* test_dump_chunks.c — the dump reader's direct chunk decoder (lib/dump/dump_chunks.c)
 * against HDF5's own reads and against the values written, on layouts built here with
 * the HDF5 C API: shuffle + deflate, deflate alone, shuffle alone, no filters, f16 and
 * f32, partial edge chunks, unwritten chunks with zero and non-zero fill values, chunks
 * stored with a filter skipped, layouts the decoder must leave to HDF5, and a corrupt
 * chunk. */
#include <hdf5.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "dump/dump_chunks.h"
#include "dump/dump_read.h"
#include "base/half.h"

#define TMPDIR_PREFIX "dfl_chunks"
#include "tmpdir.h"

/* [3][2][37][53]: every dimension ends in a partial chunk for the chunk shapes below */
static const int64_t DIMS[4] = {3, 2, 37, 53};
#define NVAL ((size_t)3 * 2 * 37 * 53)

typedef struct layout {
    const char *name;
    int f16, shuffle, deflate, big_endian, contiguous;
    double fill; /* fill value (0 = HDF5's default) */
    int direct;  /* whether the direct decoder must take it */
} layout;

static uint64_t rng_state = 88172645463325252ull;
static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* Values as stored (f16 rounded through the library's own conversion), with a causal
 * pattern: entries with key > row are never written (they read as the fill value). */
static void make_values(float *v, int f16, double fill)
{
    for (size_t i = 0; i < NVAL; i++) {
        int64_t key = (int64_t)(i % 53), row = (int64_t)(i / 53 % 37);
        double x = uniform();
        float f = (float)(x < 0.05 ? -x * 1e3 : x < 0.1 ? x * 1e-6 : x);
        if (f16) f = dfl_f16_to_f32(dfl_f32_to_f16(f));
        v[i] = key > row ? (float)fill : f;
    }
}

static hid_t file_with_root_attrs(const char *path)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t st = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(st, H5T_VARIABLE);
    const char *fmt = DFL_DUMP_FORMAT;
    hid_t a = H5Acreate2(f, "format", st, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(H5Awrite(a, st, &fmt) >= 0);
    H5Aclose(a);
    int64_t ver = 1;
    a = H5Acreate2(f, "format_version", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(H5Awrite(a, H5T_NATIVE_INT64, &ver) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(st);
    return f;
}

/* Write dataset `name` of layout l holding v: row by row, only keys <= row, so chunks
 * wholly above the diagonal are never allocated. */
static void write_dataset(hid_t f, const char *name, const layout *l, const float *v)
{
    hsize_t dims[4], chunk[4] = {1, 2, 8, 16};
    for (int i = 0; i < 4; i++)
        dims[i] = (hsize_t)DIMS[i];
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (!l->contiguous) {
        assert_true(H5Pset_chunk(dcpl, 4, chunk) >= 0);
        if (l->shuffle) assert_true(H5Pset_shuffle(dcpl) >= 0);
        if (l->deflate) assert_true(H5Pset_deflate(dcpl, 4) >= 0);
    }
    if (l->fill != 0) {
        float fv = (float)l->fill;
        assert_true(H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fv) >= 0);
    }
    hid_t ftype = l->f16 ? H5Tcopy(H5T_IEEE_F32LE) : H5Tcopy(l->big_endian ? H5T_IEEE_F32BE : H5T_IEEE_F32LE);
    if (l->f16) /* IEEE binary16, as numpy's float16 is stored */
        assert_true(H5Tset_fields(ftype, 15, 10, 5, 0, 10) >= 0 && H5Tset_precision(ftype, 16) >= 0 &&
                    H5Tset_size(ftype, 2) >= 0 && H5Tset_ebias(ftype, 15) >= 0);
    hid_t sp = H5Screate_simple(4, dims, NULL);
    hid_t ds = H5Dcreate2(f, name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(ds >= 0);
    for (hsize_t a = 0; a < dims[0]; a++)
        for (hsize_t b = 0; b < dims[1]; b++)
            for (hsize_t r = 0; r < dims[2]; r++) {
                hsize_t start[4] = {a, b, r, 0}, count[4] = {1, 1, 1, r + 1 < dims[3] ? r + 1 : dims[3]};
                hid_t ms = H5Screate_simple(4, count, NULL);
                assert_true(H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL) >= 0);
                const float *src = v + ((a * dims[1] + b) * dims[2] + r) * dims[3];
                uint16_t half[64];
                for (hsize_t j = 0; j < count[3]; j++)
                    half[j] = dfl_f32_to_f16(src[j]);
                /* f16 as raw half bits (ftype in memory too): no HDF5 conversion */
                assert_true(H5Dwrite(ds, l->f16 ? ftype : H5T_NATIVE_FLOAT, ms, sp, H5P_DEFAULT,
                                     l->f16 ? (const void *)half : (const void *)src) >= 0);
                H5Sclose(ms);
            }
    H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(ftype);
    H5Pclose(dcpl);
}

/* A random box inside DIMS (sometimes the whole extent, sometimes one element). */
static void random_box(int64_t *start, int64_t *count, int k)
{
    for (int i = 0; i < 4; i++) {
        if (k == 0) {
            start[i] = 0;
            count[i] = DIMS[i];
        } else if (k == 1) {
            start[i] = (int64_t)(uniform() * (double)DIMS[i]);
            count[i] = 1;
        } else {
            start[i] = (int64_t)(uniform() * (double)DIMS[i]);
            count[i] = 1 + (int64_t)(uniform() * (double)(DIMS[i] - start[i]));
        }
    }
}

/* One dataset opened twice: `fast` as the reader opens it (decoding chunks directly
 * when it can, which must match want_direct), `slow` switched to HDF5's reads. */
typedef struct two_slabs {
    dfl_dump_reader *r;
    dfl_dump_slab *fast, *slow;
} two_slabs;

static two_slabs open_two(const char *path, const char *name, int want_direct)
{
    two_slabs t;
    dfl_error err;
    if (dfl_dump_open(path, &t.r, &err)) fail_msg("%s", err.msg);
    assert_int_equal(dfl_dump_slab_open(t.r, name, &t.fast, &err), DFL_OK);
    assert_int_equal(dfl_dump_slab_open(t.r, name, &t.slow, &err), DFL_OK);
    assert_int_equal(dfl__dump_slab_direct(t.fast, 1), want_direct);
    assert_int_equal(dfl__dump_slab_direct(t.slow, 0), 0);
    return t;
}

static void close_two(two_slabs *t)
{
    dfl_dump_slab_close(t->fast);
    dfl_dump_slab_close(t->slow);
    dfl_dump_close(t->r);
}

/* Read 40 boxes both ways; both must equal the values written, bit for bit. */
static void check_boxes(const char *path, const char *name, const float *v, int want_direct)
{
    two_slabs t = open_two(path, name, want_direct);
    dfl_error err;
    float *a = malloc(NVAL * sizeof *a), *b = malloc(NVAL * sizeof *b), *want = malloc(NVAL * sizeof *want);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(want);
    for (int k = 0; k < 40; k++) {
        int64_t start[4], count[4];
        random_box(start, count, k);
        size_t n = (size_t)(count[0] * count[1] * count[2] * count[3]), at = 0;
        memset(a, 0xA5, n * sizeof *a);
        assert_int_equal(dfl_dump_slab_read_f32(t.fast, start, count, a, &err), DFL_OK);
        assert_int_equal(dfl_dump_slab_read_f32(t.slow, start, count, b, &err), DFL_OK);
        for (int64_t i0 = 0; i0 < count[0]; i0++)
            for (int64_t i1 = 0; i1 < count[1]; i1++)
                for (int64_t i2 = 0; i2 < count[2]; i2++)
                    for (int64_t i3 = 0; i3 < count[3]; i3++)
                        want[at++] =
                            v[(((start[0] + i0) * DIMS[1] + start[1] + i1) * DIMS[2] + start[2] + i2) * DIMS[3] +
                              start[3] + i3];
        assert_memory_equal(a, want, n * sizeof *a);
        assert_memory_equal(b, want, n * sizeof *b);
    }
    free(a);
    free(b);
    free(want);
    close_two(&t);
}

static void run_layout(const layout *l)
{
    char name[64];
    snprintf(name, sizeof name, "%s.h5", l->name);
    const char *path = path_of(name);
    float *v = malloc(NVAL * sizeof *v);
    assert_non_null(v);
    make_values(v, l->f16, l->fill);
    hid_t f = file_with_root_attrs(path);
    write_dataset(f, "m", l, v);
    H5Fclose(f);
    check_boxes(path, "m", v, l->direct);
    free(v);
}

static void test_shuffle_deflate_f16(void **state)
{
    (void)state;
    layout l = {"shuf_gzip_f16", 1, 1, 1, 0, 0, 0, 1};
    run_layout(&l);
}

static void test_deflate_f16(void **state)
{
    (void)state;
    layout l = {"gzip_f16", 1, 0, 1, 0, 0, 0, 1};
    run_layout(&l);
}

static void test_shuffle_deflate_f32(void **state)
{
    (void)state;
    layout l = {"shuf_gzip_f32", 0, 1, 1, 0, 0, 0, 1};
    run_layout(&l);
}

static void test_shuffle_only_f32(void **state)
{
    (void)state;
    layout l = {"shuf_f32", 0, 1, 0, 0, 0, 0, 1};
    run_layout(&l);
}

static void test_no_filters_f16(void **state)
{
    (void)state;
    layout l = {"plain_f16", 1, 0, 0, 0, 0, 0, 0}; /* no filter: left to HDF5 (no lengths in the index) */
    run_layout(&l);
}

static void test_fill_value(void **state)
{
    (void)state;
    layout l = {"fill_f32", 0, 1, 1, 0, 0, -0.25, 1};
    run_layout(&l);
}

static void test_left_to_hdf5(void **state)
{
    (void)state;
    layout be = {"big_endian_f32", 0, 1, 1, 1, 0, 0, 0};
    run_layout(&be);
    layout contiguous = {"contiguous_f16", 1, 0, 0, 0, 1, 0, 0};
    run_layout(&contiguous);
}

/* Chunks written raw with H5Dwrite_chunk: one with deflate skipped (filter mask bit
 * set, bytes only shuffled), one whose deflate stream is garbage. */
static void test_raw_chunks(void **state)
{
    (void)state;
    const char *path = path_of("raw.h5");
    hid_t f = file_with_root_attrs(path);
    hsize_t dims[2] = {4, 6}, chunk[2] = {2, 6};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), sp = H5Screate_simple(2, dims, NULL);
    assert_true(H5Pset_chunk(dcpl, 2, chunk) >= 0 && H5Pset_shuffle(dcpl) >= 0 && H5Pset_deflate(dcpl, 1) >= 0);
    hid_t ds = H5Dcreate2(f, "m", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(ds >= 0);
    /* chunk (0, 0): 12 floats shuffled into 4 byte planes, deflate skipped (bit 1) */
    float vals[12];
    unsigned char planes[48];
    for (int e = 0; e < 12; e++) {
        vals[e] = (float)e * 0.5f - 2.0f;
        uint32_t u;
        memcpy(&u, &vals[e], 4);
        for (int b = 0; b < 4; b++)
            planes[b * 12 + e] = (unsigned char)(u >> (8 * b));
    }
    hsize_t off0[2] = {0, 0}, off1[2] = {2, 0};
    assert_true(H5Dwrite_chunk(ds, H5P_DEFAULT, 1u << 1, off0, sizeof planes, planes) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Fclose(f);

    dfl_error err;
    float got[24], ref[24];
    int64_t start[2] = {0, 0}, count[2] = {4, 6};
    two_slabs t = open_two(path, "m", 1);
    assert_int_equal(dfl_dump_slab_read_f32(t.fast, start, count, got, &err), DFL_OK);
    assert_int_equal(dfl_dump_slab_read_f32(t.slow, start, count, ref, &err), DFL_OK);
    assert_memory_equal(got, vals, sizeof vals);
    assert_memory_equal(got, ref, sizeof got);
    for (int i = 12; i < 24; i++)
        assert_true(got[i] == 0.0f); /* unwritten chunk */
    close_two(&t);

    /* now a chunk whose deflate stream is garbage */
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ds = H5Dopen2(f, "m", H5P_DEFAULT);
    unsigned char junk[40];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 37 + 11);
    assert_true(H5Dwrite_chunk(ds, H5P_DEFAULT, 0, off1, sizeof junk, junk) >= 0);
    H5Dclose(ds);
    H5Fclose(f);
    dfl_dump_reader *r;
    dfl_dump_slab *fast;
    assert_int_equal(dfl_dump_open(path, &r, &err), DFL_OK);
    assert_int_equal(dfl_dump_slab_open(r, "m", &fast, &err), DFL_OK);
    assert_int_equal(dfl_dump_slab_read_f32(fast, start, count, got, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "the chunk at [2, 0] is corrupt"));
    assert_non_null(strstr(err.msg, "raw.h5"));
    /* rows 0-1 alone do not touch the bad chunk */
    count[0] = 2;
    assert_int_equal(dfl_dump_slab_read_f32(fast, start, count, got, &err), DFL_OK);
    assert_memory_equal(got, vals, sizeof vals);
    dfl_dump_slab_close(fast);
    dfl_dump_close(r);

    /* a chunk whose stored size no deflate stream of 48 bytes can have */
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ds = H5Dopen2(f, "m", H5P_DEFAULT);
    static unsigned char huge[8192];
    assert_true(H5Dwrite_chunk(ds, H5P_DEFAULT, 0, off1, sizeof huge, huge) >= 0);
    H5Dclose(ds);
    H5Fclose(f);
    assert_int_equal(dfl_dump_open(path, &r, &err), DFL_OK);
    assert_int_equal(dfl_dump_slab_open(r, "m", &fast, &err), DFL_OK);
    count[0] = 4;
    assert_int_equal(dfl_dump_slab_read_f32(fast, start, count, got, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "the chunk at [2, 0] is corrupt (its stored size, 8192 bytes for 48 bytes"));
    dfl_dump_slab_close(fast);
    dfl_dump_close(r);
}

/* Dataset "m" of path, rows x cols f32 in chunks of crows x ccols, shuffled (and
 * deflated at level 1 when asked), holding v, written whole with H5Dwrite. */
static void write_2d(const char *path, hsize_t rows, hsize_t cols, hsize_t crows, hsize_t ccols, int deflate,
                     const float *v)
{
    hid_t f = file_with_root_attrs(path);
    hsize_t dims[2] = {rows, cols}, chunk[2] = {crows, ccols};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), sp = H5Screate_simple(2, dims, NULL);
    assert_true(H5Pset_chunk(dcpl, 2, chunk) >= 0 && H5Pset_shuffle(dcpl) >= 0);
    if (deflate) assert_true(H5Pset_deflate(dcpl, 1) >= 0);
    hid_t ds = H5Dcreate2(f, "m", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Fclose(f);
}

/* 100 x 100 floats in 1 x 2 chunks: 5,000 chunks, more than one decoding batch. */
static void test_many_chunks(void **state)
{
    (void)state;
    const char *path = path_of("many.h5");
    static float v[100 * 100], got[100 * 100], ref[100 * 100];
    for (int i = 0; i < 100 * 100; i++)
        v[i] = (float)uniform() - 0.5f;
    write_2d(path, 100, 100, 1, 2, 1, v);
    dfl_error err;
    int64_t start[2] = {0, 0}, count[2] = {100, 100};
    two_slabs t = open_two(path, "m", 1);
    assert_int_equal(dfl_dump_slab_read_f32(t.fast, start, count, got, &err), DFL_OK);
    assert_int_equal(dfl_dump_slab_read_f32(t.slow, start, count, ref, &err), DFL_OK);
    assert_memory_equal(got, v, sizeof v);
    assert_memory_equal(ref, v, sizeof v);
    close_two(&t);
}

/* More stored bytes than one batch holds (16 MB): the box is decoded in several. */
static void test_batches_by_bytes(void **state)
{
    (void)state;
    const char *path = path_of("large.h5");
    enum { ROWS = 2048, COLS = 2560 }; /* 21 MB of f32, shuffled, not deflated: 32 chunks of 640 KB */
    float *v = malloc(sizeof(float) * ROWS * COLS), *got = malloc(sizeof(float) * ROWS * COLS);
    assert_non_null(v);
    assert_non_null(got);
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++)
        v[i] = (float)uniform() - 0.5f;
    write_2d(path, ROWS, COLS, 64, COLS, 0, v);
    dfl_error err;
    int64_t start[2] = {0, 0}, count[2] = {ROWS, COLS};
    two_slabs t = open_two(path, "m", 1);
    assert_int_equal(dfl_dump_slab_read_f32(t.fast, start, count, got, &err), DFL_OK);
    assert_memory_equal(got, v, sizeof(float) * ROWS * COLS);
    close_two(&t);
    free(v);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffle_deflate_f16), cmocka_unit_test(test_deflate_f16),
        cmocka_unit_test(test_shuffle_deflate_f32), cmocka_unit_test(test_shuffle_only_f32),
        cmocka_unit_test(test_no_filters_f16),      cmocka_unit_test(test_fill_value),
        cmocka_unit_test(test_left_to_hdf5),        cmocka_unit_test(test_raw_chunks),
        cmocka_unit_test(test_many_chunks),         cmocka_unit_test(test_batches_by_bytes),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
