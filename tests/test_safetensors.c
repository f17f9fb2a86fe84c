/* test_safetensors.c — cmocka suite for lib/safetensors: round trips, half-precision
 * conversions, every header validation error, atomic writing, and sharded sets.
 * Every file is generated here, in a fresh mkdtemp folder per test. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/safetensors.h"

/* ------------------------------------------------------------------------------------
 * fixtures
 * ---------------------------------------------------------------------------------- */

typedef struct {
    char dir[64];
} fixture;

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx) return -1;
    snprintf(fx->dir, sizeof fx->dir, "/tmp/dfl_st_test.XXXXXX");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int teardown(void **state)
{
    fixture *fx = *state;
    nftw(fx->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(fx);
    return 0;
}

/* A path inside the fixture folder (static buffer rotation: up to 4 live at once). */
static const char *P(void **state, const char *name)
{
    static char buf[4][256];
    static int k;
    fixture *fx = *state;
    char *b = buf[k++ % 4];
    snprintf(b, 256, "%s/%s", fx->dir, name);
    return b;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *s)
{
    write_bytes(path, s, strlen(s));
}

/* A safetensors image: the given header JSON and data_len bytes of data (i & 0xff). */
static unsigned char *image(const char *json, size_t data_len, size_t *len)
{
    size_t n = strlen(json);
    *len = 8 + n + data_len;
    unsigned char *b = malloc(*len);
    assert_non_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, json, n);
    for (size_t i = 0; i < data_len; i++)
        b[8 + n + i] = (unsigned char)i;
    return b;
}

static void write_image(const char *path, const char *json, size_t data_len)
{
    size_t len;
    unsigned char *b = image(json, data_len, &len);
    write_bytes(path, b, len);
    free(b);
}

/* Open a header+data image from memory and expect status `want` with a message
 * containing every given fragment (NULL-terminated list). */
static void expect_mem(const char *json, size_t data_len, dfl_status want, ...)
{
    size_t len;
    unsigned char *b = image(json, data_len, &len);
    dfl_st_file *f = NULL;
    dfl_error err = {0};
    dfl_status s = dfl_st_open_memory(b, len, "model.safetensors", &f, &err);
    if (s != want) fail_msg("header %s: status %d (%s), wanted %d", json, (int)s, err.msg, (int)want);
    if (want == DFL_OK) {
        assert_non_null(f);
    } else {
        assert_null(f);
        assert_int_equal(err.status, want);
        assert_non_null(strstr(err.msg, "model.safetensors"));
        va_list ap;
        va_start(ap, want);
        for (const char *frag; (frag = va_arg(ap, const char *));)
            if (!strstr(err.msg, frag)) fail_msg("message '%s' lacks '%s'", err.msg, frag);
        va_end(ap);
    }
    dfl_st_close(f);
    free(b);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static dfl_tensor mk(const char *name, dfl_dtype dt, int ndim, const int64_t *shape, const void *data, size_t nbytes)
{
    dfl_tensor t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i];
    t.data = data;
    t.nbytes = nbytes;
    return t;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ------------------------------------------------------------------------------------
 * dtypes
 * ---------------------------------------------------------------------------------- */

static void test_dtype_names_and_sizes(void **state)
{
    (void)state;
    static const char *names[] = {"F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"};
    static const size_t sizes[] = {4, 2, 2, 8, 8, 4, 2, 1, 1, 1};
    for (int i = 0; i < 10; i++) {
        assert_string_equal(dfl_dtype_name((dfl_dtype)i), names[i]);
        assert_int_equal(dfl_dtype_size((dfl_dtype)i), sizes[i]);
    }
    assert_null(dfl_dtype_name((dfl_dtype)10));
    assert_int_equal(dfl_dtype_size((dfl_dtype)-1), 0);
    dfl_tensor t = mk("s", DFL_DTYPE_F32, 0, NULL, NULL, 0);
    assert_int_equal(dfl_tensor_numel(&t), 1);
    int64_t sh[3] = {2, 0, 5};
    t = mk("z", DFL_DTYPE_F32, 3, sh, NULL, 0);
    assert_int_equal(dfl_tensor_numel(&t), 0);
}

/* ------------------------------------------------------------------------------------
 * round trips
 * ---------------------------------------------------------------------------------- */

static void test_roundtrip(void **state)
{
    float a[6] = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-3f}; /* [2, 3] */
    float sc = 42.5f;                                      /* scalar */
    uint16_t h[5], bf[8];                                  /* [5], [2, 2, 2] */
    const float hv[5] = {1.0f, -2.5f, 65504.0f, 0.5f, -0.125f};
    for (int i = 0; i < 5; i++)
        h[i] = dfl_f32_to_f16(hv[i]);
    for (int i = 0; i < 8; i++)
        bf[i] = dfl_f32_to_bf16((float)(i - 4) * 0.5f);
    int64_t i64[2] = {-7, 1LL << 40};
    uint8_t u8[3] = {1, 2, 255}; /* odd size: later tensors start unaligned */
    const int64_t s23[] = {2, 3}, s5[] = {5}, s222[] = {2, 2, 2}, s04[] = {0, 4}, s2[] = {2}, s3[] = {3};
    dfl_tensor ts[] = {
        mk("model.w", DFL_DTYPE_F32, 2, s23, a, sizeof a),    mk("u8", DFL_DTYPE_U8, 1, s3, u8, sizeof u8),
        mk("scalar", DFL_DTYPE_F32, 0, NULL, &sc, sizeof sc), mk("empty", DFL_DTYPE_F32, 2, s04, NULL, 0),
        mk("half", DFL_DTYPE_F16, 1, s5, h, sizeof h),        mk("brain", DFL_DTYPE_BF16, 3, s222, bf, sizeof bf),
        mk("ints", DFL_DTYPE_I64, 1, s2, i64, sizeof i64),
    };
    size_t n = sizeof ts / sizeof ts[0];
    const char *path = P(state, "rt.safetensors");
    dfl_error err = {0};
    assert_int_equal(dfl_st_write(path, ts, n, 0, &err), DFL_OK);

    /* The data buffer starts 8-byte aligned and the file holds exactly the data. */
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    unsigned char l8[8];
    assert_int_equal(fread(l8, 1, 8, fp), 8);
    fclose(fp);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | l8[i];
    assert_int_equal((8 + hl) % 8, 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += ts[i].nbytes;
    assert_int_equal((uint64_t)st.st_size, 8 + hl + total);

    dfl_st_file *f = NULL;
    assert_int_equal(dfl_st_open(path, &f, &err), DFL_OK);
    assert_int_equal(dfl_st_count(f), n);
    for (size_t i = 0; i < n; i++) {
        const dfl_tensor *t = dfl_st_at(f, i); /* header order = given order */
        assert_non_null(t);
        assert_string_equal(t->name, ts[i].name);
        assert_int_equal(t->dtype, ts[i].dtype);
        assert_int_equal(t->ndim, ts[i].ndim);
        for (int k = 0; k < t->ndim; k++)
            assert_int_equal(t->shape[k], ts[i].shape[k]);
        assert_int_equal(t->nbytes, ts[i].nbytes);
        if (t->nbytes) assert_memory_equal(t->data, ts[i].data, t->nbytes);
        assert_ptr_equal(dfl_st_find(f, ts[i].name), t);
    }
    assert_null(dfl_st_at(f, n));
    assert_null(dfl_st_find(f, "nope"));
    assert_null(dfl_st_find(f, "model.w2"));

    float out[8];
    assert_int_equal(dfl_tensor_to_f32(dfl_st_find(f, "model.w"), out, &err), DFL_OK);
    for (int i = 0; i < 6; i++)
        assert_int_equal(f32_bits(out[i]), f32_bits(a[i]));
    assert_int_equal(dfl_tensor_to_f32(dfl_st_find(f, "scalar"), out, &err), DFL_OK);
    assert_true(out[0] == 42.5f);
    assert_int_equal(dfl_tensor_numel(dfl_st_find(f, "scalar")), 1);
    assert_int_equal(dfl_tensor_numel(dfl_st_find(f, "empty")), 0);
    assert_int_equal(dfl_tensor_to_f32(dfl_st_find(f, "empty"), out, &err), DFL_OK);
    assert_int_equal(dfl_tensor_to_f32(dfl_st_find(f, "half"), out, &err), DFL_OK);
    for (int i = 0; i < 5; i++)
        assert_true(out[i] == hv[i]);
    assert_int_equal(dfl_tensor_to_f32(dfl_st_find(f, "brain"), out, &err), DFL_OK);
    for (int i = 0; i < 8; i++)
        assert_true(out[i] == (float)(i - 4) * 0.5f);
    dfl_st_close(f);
}

static void test_roundtrip_escaped_names(void **state)
{
    float v = 1.0f;
    const char *names[] = {"quote\"d", "back\\slash", "new\nline", "caf\xc3\xa9", ""};
    dfl_tensor ts[5];
    for (int i = 0; i < 5; i++)
        ts[i] = mk(names[i], DFL_DTYPE_F32, 0, NULL, &v, sizeof v);
    const char *path = P(state, "names.safetensors");
    dfl_error err = {0};
    assert_int_equal(dfl_st_write(path, ts, 5, 0, &err), DFL_OK);
    dfl_st_file *f = NULL;
    assert_int_equal(dfl_st_open(path, &f, &err), DFL_OK);
    assert_int_equal(dfl_st_count(f), 5);
    for (int i = 0; i < 5; i++) {
        assert_non_null(dfl_st_find(f, names[i]));
        assert_string_equal(dfl_st_at(f, (size_t)i)->name, names[i]);
    }
    dfl_st_close(f);
}

static void test_write_empty_set(void **state)
{
    const char *path = P(state, "none.safetensors");
    dfl_error err = {0};
    assert_int_equal(dfl_st_write(path, NULL, 0, 0, &err), DFL_OK);
    dfl_st_file *f = NULL;
    assert_int_equal(dfl_st_open(path, &f, &err), DFL_OK);
    assert_int_equal(dfl_st_count(f), 0);
    assert_null(dfl_st_find(f, "x"));
    dfl_st_close(f);
    dfl_st_close(NULL); /* accepted */
}

/* Data right after an odd-length header, in a buffer at an odd address. */
static void test_unaligned_data(void **state)
{
    (void)state;
    const char *json = "{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[1,13]}}";
    size_t n = strlen(json);
    unsigned char *buf = calloc(1, 8 + n + 13 + 1);
    assert_non_null(buf);
    unsigned char *b = buf + 1;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, json, n);
    const float v[3] = {1.5f, -2.0f, 1e30f};
    for (int i = 0; i < 3; i++) {
        uint32_t u = f32_bits(v[i]);
        for (int k = 0; k < 4; k++)
            b[8 + n + 1 + 4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    dfl_st_file *f = NULL;
    dfl_error err = {0};
    assert_int_equal(dfl_st_open_memory(b, 8 + n + 13, "mem", &f, &err), DFL_OK);
    float out[3];
    assert_int_equal(dfl_tensor_to_f32(dfl_st_find(f, "x"), out, &err), DFL_OK);
    for (int i = 0; i < 3; i++)
        assert_true(out[i] == v[i]);
    dfl_st_close(f);
    free(buf);
}

/* ------------------------------------------------------------------------------------
 * conversions
 * ---------------------------------------------------------------------------------- */

static void test_f16_to_f32_values(void **state)
{
    (void)state;
    assert_true(dfl_f16_to_f32(0x3c00) == 1.0f);
    assert_true(dfl_f16_to_f32(0xc100) == -2.5f);
    assert_true(dfl_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(dfl_f16_to_f32(0x0001) == ldexpf(1.0f, -24));           /* smallest subnormal */
    assert_true(dfl_f16_to_f32(0x03ff) == 1023.0f * ldexpf(1.0f, -24)); /* largest subnormal */
    assert_true(dfl_f16_to_f32(0x0400) == ldexpf(1.0f, -14));           /* smallest normal */
    assert_true(dfl_f16_to_f32(0x8001) == -ldexpf(1.0f, -24));
    assert_int_equal(f32_bits(dfl_f16_to_f32(0x8000)), 0x80000000u); /* -0 keeps its sign */
    assert_true(isinf(dfl_f16_to_f32(0x7c00)) && dfl_f16_to_f32(0x7c00) > 0);
    assert_true(isinf(dfl_f16_to_f32(0xfc00)) && dfl_f16_to_f32(0xfc00) < 0);
    assert_true(isnan(dfl_f16_to_f32(0x7e00)));
    assert_true(isnan(dfl_f16_to_f32(0x7c01))); /* signalling NaN must not become inf */
}

static void test_f32_to_f16_rounding(void **state)
{
    (void)state;
    assert_int_equal(dfl_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(dfl_f32_to_f16(-2.5f), 0xc100);
    assert_int_equal(dfl_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(dfl_f32_to_f16(65519.0f), 0x7bff); /* below the halfway point */
    assert_int_equal(dfl_f32_to_f16(65520.0f), 0x7c00); /* tie, odd mantissa: up to inf */
    assert_int_equal(dfl_f32_to_f16(1e6f), 0x7c00);
    assert_int_equal(dfl_f32_to_f16(-1e6f), 0xfc00);
    assert_int_equal(dfl_f32_to_f16(INFINITY), 0x7c00);
    assert_int_equal(dfl_f32_to_f16(-INFINITY), 0xfc00);
    uint16_t nan = dfl_f32_to_f16(NAN);
    assert_int_equal(nan & 0x7c00, 0x7c00);
    assert_true((nan & 0x3ff) != 0);
    /* A NaN whose payload sits only in the low bits must still come out NaN. */
    assert_true(isnan(dfl_f16_to_f32(dfl_f32_to_f16(bits_f32(0x7f800001u)))));
    /* Ties between normals go to the even mantissa. */
    assert_int_equal(dfl_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
    assert_int_equal(dfl_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
    assert_int_equal(dfl_f32_to_f16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)), 0x3c01);
    /* Subnormals, in units of 2^-24. */
    assert_int_equal(dfl_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
    assert_int_equal(dfl_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);        /* tie with 0 */
    assert_int_equal(dfl_f32_to_f16(-ldexpf(1.0f, -25)), 0x8000);       /* signed zero */
    assert_int_equal(dfl_f32_to_f16(1.5f * ldexpf(1.0f, -25)), 0x0001); /* above the tie */
    assert_int_equal(dfl_f32_to_f16(3.0f * ldexpf(1.0f, -25)), 0x0002); /* 1.5 units: to 2 */
    assert_int_equal(dfl_f32_to_f16(5.0f * ldexpf(1.0f, -25)), 0x0002); /* 2.5 units: to 2 */
    assert_int_equal(dfl_f32_to_f16(ldexpf(1.0f, -40)), 0x0000);
    assert_int_equal(dfl_f32_to_f16(1023.5f * ldexpf(1.0f, -24)), 0x0400); /* rounds up to normal */
    assert_int_equal(dfl_f32_to_f16(ldexpf(1.0f, -14)), 0x0400);
    /* Every f16 survives f16 -> f32 -> f16 unchanged (NaNs stay NaN). */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = dfl_f16_to_f32((uint16_t)h);
        uint16_t back = dfl_f32_to_f16(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            assert_true(isnan(f));
            assert_true(isnan(dfl_f16_to_f32(back)));
        } else if (back != h) {
            fail_msg("f16 0x%04x -> %g -> 0x%04x", h, (double)f, back);
        }
    }
}

static void test_bf16_conversions(void **state)
{
    (void)state;
    assert_true(dfl_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(dfl_bf16_to_f32(0xc020) == -2.5f);
    assert_true(dfl_bf16_to_f32(0x0001) == bits_f32(0x00010000u)); /* subnormal, exact */
    assert_true(isinf(dfl_bf16_to_f32(0x7f80)));
    assert_true(isnan(dfl_bf16_to_f32(0x7fc0)));
    assert_int_equal(dfl_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(dfl_f32_to_bf16(-2.5f), 0xc020);
    assert_int_equal(dfl_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80);     /* tie: to even */
    assert_int_equal(dfl_f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3f82); /* tie: to even */
    assert_int_equal(dfl_f32_to_bf16(1.0f + ldexpf(1.0f, -8) + ldexpf(1.0f, -20)), 0x3f81);
    assert_int_equal(dfl_f32_to_bf16(bits_f32(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to inf */
    assert_int_equal(dfl_f32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(dfl_f32_to_bf16(-INFINITY), 0xff80);
    assert_true(isnan(dfl_bf16_to_f32(dfl_f32_to_bf16(bits_f32(0x7f800001u))))); /* not inf */
    assert_true(isnan(dfl_bf16_to_f32(dfl_f32_to_bf16(NAN))));
    for (uint32_t b = 0; b < 0x10000u; b++) {
        if ((b & 0x7f80) == 0x7f80 && (b & 0x7f)) continue; /* NaNs checked above */
        if (dfl_f32_to_bf16(dfl_bf16_to_f32((uint16_t)b)) != b) fail_msg("bf16 0x%04x does not round-trip", b);
    }
}

static void test_to_f32_rejects_other_dtypes(void **state)
{
    (void)state;
    int32_t v[2] = {1, 2};
    const int64_t s2[] = {2};
    dfl_tensor t = mk("ids", DFL_DTYPE_I32, 1, s2, v, sizeof v);
    float out[2];
    dfl_error err = {0};
    assert_int_equal(dfl_tensor_to_f32(&t, out, &err), DFL_ERR_TENSOR);
    assert_non_null(strstr(err.msg, "ids"));
    assert_non_null(strstr(err.msg, "I32"));
}

/* ------------------------------------------------------------------------------------
 * header validation
 * ---------------------------------------------------------------------------------- */

static void test_open_missing_file(void **state)
{
    dfl_st_file *f = (dfl_st_file *)1;
    dfl_error err = {0};
    const char *path = P(state, "absent.safetensors");
    assert_int_equal(dfl_st_open(path, &f, &err), DFL_ERR_IO);
    assert_null(f);
    assert_non_null(strstr(err.msg, "absent.safetensors"));
    /* A folder is not a file either. */
    fixture *fx = *state;
    assert_int_equal(dfl_st_open(fx->dir, &f, &err), DFL_ERR_IO);
}

static void test_open_truncated_files(void **state)
{
    dfl_st_file *f = NULL;
    dfl_error err = {0};
    const char *empty = P(state, "empty.safetensors");
    write_bytes(empty, "", 0);
    assert_int_equal(dfl_st_open(empty, &f, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "empty.safetensors"));

    const char *five = P(state, "five.safetensors");
    write_bytes(five, "\x10\0\0\0\0", 5);
    assert_int_equal(dfl_st_open(five, &f, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "5 bytes"));

    /* Header length larger than what follows it. */
    const char *lie = P(state, "lie.safetensors");
    unsigned char b[20] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    write_bytes(lie, b, 10);
    assert_int_equal(dfl_st_open(lie, &f, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "header length 100 past the end of the file (10 bytes)"));

    /* A length whose 8 + N wraps around must not slip through. */
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    assert_int_equal(dfl_st_open_memory(huge, 16, "huge", &f, &err), DFL_ERR_FORMAT);
    assert_int_equal(dfl_st_open_memory(huge, 3, "short", &f, &err), DFL_ERR_FORMAT);
    assert_null(f);

    /* A valid file cut short inside its data. */
    const char *cut = P(state, "cut.safetensors");
    write_image(cut, "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 15);
    assert_int_equal(dfl_st_open(cut, &f, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "cut.safetensors: tensor 'w': data_offsets [0, 16] past the end"));
}

static void test_bad_json(void **state)
{
    (void)state;
    expect_mem("{\"a\":", 0, DFL_ERR_FORMAT, "not valid JSON", NULL);
    expect_mem("", 0, DFL_ERR_FORMAT, "not valid JSON", NULL);
    expect_mem("[1, 2]", 0, DFL_ERR_FORMAT, "not a JSON object", NULL);
    expect_mem("\"str\"", 0, DFL_ERR_FORMAT, "not a JSON object", NULL);
    expect_mem("{} x", 0, DFL_ERR_FORMAT, "trailing bytes", NULL);
    expect_mem("{}      ", 0, DFL_OK);  /* space padding is allowed */
    expect_mem("{}\n\t\r ", 0, DFL_OK); /* any JSON whitespace */
    expect_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}  ", 4, DFL_OK);
    /* A NUL inside the header would cut a name short. */
    size_t len;
    unsigned char *b = image("{\"a\":1}", 0, &len);
    b[10] = 0;
    dfl_st_file *f = NULL;
    dfl_error err = {0};
    assert_int_equal(dfl_st_open_memory(b, len, "nul", &f, &err), DFL_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "NUL byte at offset 10"));
    free(b);
}

static void test_bad_entries(void **state)
{
    (void)state;
    expect_mem("{\"w\":3}", 0, DFL_ERR_FORMAT, "tensor 'w'", "not an object", NULL);
    expect_mem("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DFL_ERR_FORMAT, "'w'", "no \"dtype\"", NULL);
    expect_mem("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DFL_ERR_FORMAT, "'w'",
               "\"dtype\" is not a string", NULL);
    expect_mem("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, DFL_ERR_FORMAT, "'w'",
               "unsupported dtype \"F8_E4M3\"", NULL);
    expect_mem("{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DFL_ERR_FORMAT,
               "unsupported dtype", NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, DFL_ERR_FORMAT, "'w'", "no \"shape\"", NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, DFL_ERR_FORMAT, "'w'", "no \"data_offsets\"", NULL);
    /* A good entry followed by a bad one is still refused, naming the bad one. */
    expect_mem("{\"ok\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
               "\"bad\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[1,2]}}",
               2, DFL_ERR_FORMAT, "tensor 'bad'", NULL);
}

static void test_bad_shapes(void **state)
{
    (void)state;
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, DFL_ERR_FORMAT, "'w'",
               "shape[0]", NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, DFL_ERR_FORMAT, "shape[0]",
               NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,\"2\"],\"data_offsets\":[0,8]}}", 8, DFL_ERR_FORMAT, "shape[1]",
               NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4, DFL_ERR_FORMAT, "shape[0]",
               NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[9007199254740992],\"data_offsets\":[0,4]}}", 4, DFL_ERR_FORMAT,
               "shape[0]", NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, DFL_ERR_FORMAT,
               "9 dims", NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, DFL_OK);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16, DFL_ERR_FORMAT,
               "\"shape\" is not an array", NULL);
    /* Dims that fit one by one but whose product overflows size_t. */
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[4503599627370496,4503599627370496],\"data_offsets\":[0,4]}}", 4,
               DFL_ERR_FORMAT, "overflows", NULL);
    /* A huge shape with a small range: caught by the size check, not allocated. */
    expect_mem("{\"w\":{\"dtype\":\"U8\",\"shape\":[4503599627370496],\"data_offsets\":[0,4]}}", 4, DFL_ERR_FORMAT,
               "need 4503599627370496", NULL);
    /* 1.0 is an integer value and 1e2 too: accepted. */
    expect_mem("{\"w\":{\"dtype\":\"U8\",\"shape\":[1.0,1e2],\"data_offsets\":[0,100]}}", 100, DFL_OK);
}

static void test_bad_offsets(void **state)
{
    (void)state;
    expect_mem("{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8, DFL_ERR_FORMAT,
               "tensor 'w': data_offsets [8, 4] reversed", NULL);
    expect_mem("{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[512],\"data_offsets\":[0,2048]}}", 1024,
               DFL_ERR_FORMAT,
               "model.safetensors: tensor 'model.norm.weight': data_offsets [0, 2048] past the end of the data "
               "(1024 bytes)",
               NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, DFL_ERR_FORMAT,
               "hold 4 bytes but the shape and dtype need 8", NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, DFL_ERR_FORMAT, "not a pair", NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 9, DFL_ERR_FORMAT, "not a pair",
               NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8, DFL_ERR_FORMAT, "not a pair",
               NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,\"8\"]}}", 8, DFL_ERR_FORMAT, "not a pair",
               NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":{\"a\":0}}}", 8, DFL_ERR_FORMAT, "not a pair",
               NULL);
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0.5,8.5]}}", 9, DFL_ERR_FORMAT, "not a pair",
               NULL);
    /* An empty tensor may sit exactly at the end of the data. */
    expect_mem("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}", 8, DFL_OK);
}

static void test_overlap_and_duplicates(void **state)
{
    (void)state;
    expect_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               12, DFL_ERR_FORMAT, "overlap", "'a'", "'b'", NULL);
    /* Listed in reverse order: still found after sorting by begin. */
    expect_mem("{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]},"
               "\"c\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},"
               "\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}",
               10, DFL_ERR_FORMAT, "overlap", NULL);
    /* Same range twice. */
    expect_mem("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
               4, DFL_ERR_FORMAT, "overlap", NULL);
    /* Touching ranges and an empty tensor inside another one are fine. */
    expect_mem("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
               "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[2,2]}}",
               8, DFL_OK);
    expect_mem("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
               "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
               2, DFL_ERR_FORMAT, "tensor 'a' appears twice", NULL);
}

static void test_metadata(void **state)
{
    (void)state;
    expect_mem("{\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"},"
               "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
               1, DFL_OK);
    expect_mem("{\"__metadata__\":[1]}", 0, DFL_ERR_FORMAT, "__metadata__ is not an object", NULL);
    expect_mem("{\"__metadata__\":{\"format\":1}}", 0, DFL_ERR_FORMAT, "'format' is not a string", NULL);
    expect_mem("{\"__metadata__\":{},\"__metadata__\":{}}", 0, DFL_ERR_FORMAT, "twice", NULL);
    /* __metadata__ is not a tensor. */
    size_t len;
    unsigned char *b =
        image("{\"__metadata__\":{},\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, &len);
    dfl_st_file *f = NULL;
    dfl_error err = {0};
    assert_int_equal(dfl_st_open_memory(b, len, "m", &f, &err), DFL_OK);
    assert_int_equal(dfl_st_count(f), 1);
    assert_null(dfl_st_find(f, "__metadata__"));
    dfl_st_close(f);
    free(b);
}

/* ------------------------------------------------------------------------------------
 * writing: refusals and atomicity
 * ---------------------------------------------------------------------------------- */

static void test_write_exists(void **state)
{
    const char *path = P(state, "keep.safetensors");
    write_text(path, "original");
    float v = 3.0f;
    dfl_tensor t = mk("v", DFL_DTYPE_F32, 0, NULL, &v, sizeof v);
    dfl_error err = {0};
    assert_int_equal(dfl_st_write(path, &t, 1, 0, &err), DFL_ERR_EXISTS);
    assert_non_null(strstr(err.msg, "keep.safetensors"));
    char buf[32] = {0};
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fread(buf, 1, sizeof buf - 1, fp), 8);
    fclose(fp);
    assert_string_equal(buf, "original");
    fixture *fx = *state;
    assert_int_equal(count_entries(fx->dir), 1); /* no temporary left over */

    assert_int_equal(dfl_st_write(path, &t, 1, 1, &err), DFL_OK);
    dfl_st_file *f = NULL;
    assert_int_equal(dfl_st_open(path, &f, &err), DFL_OK);
    assert_non_null(dfl_st_find(f, "v"));
    dfl_st_close(f);
    assert_int_equal(count_entries(fx->dir), 1);
}

static void test_write_missing_folder(void **state)
{
    float v = 3.0f;
    dfl_tensor t = mk("v", DFL_DTYPE_F32, 0, NULL, &v, sizeof v);
    dfl_error err = {0};
    assert_int_equal(dfl_st_write(P(state, "nope/out.safetensors"), &t, 1, 0, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "nope/out.safetensors"));
    fixture *fx = *state;
    assert_int_equal(count_entries(fx->dir), 0);
}

static void test_write_bad_tensors(void **state)
{
    fixture *fx = *state;
    float v[2] = {1, 2};
    const int64_t s2[] = {2}, s3[] = {3}, sneg[] = {-1};
    const char *path = P(state, "bad.safetensors");
    dfl_error err = {0};
    struct {
        dfl_tensor t[2];
        size_t n;
        dfl_status want;
        const char *frag;
    } cases[] = {
        {{mk("w", DFL_DTYPE_F32, 1, s3, v, sizeof v)}, 1, DFL_ERR_TENSOR, "'w': nbytes 8, shape and dtype need 12"},
        {{mk("w", DFL_DTYPE_F32, 1, sneg, v, 0)}, 1, DFL_ERR_TENSOR, "shape[0]"},
        {{mk("w", (dfl_dtype)42, 1, s2, v, sizeof v)}, 1, DFL_ERR_TENSOR, "invalid dtype"},
        {{mk("w", DFL_DTYPE_F32, 1, s2, NULL, sizeof v)}, 1, DFL_ERR_USAGE, "NULL data"},
        {{mk(NULL, DFL_DTYPE_F32, 1, s2, v, sizeof v)}, 1, DFL_ERR_USAGE, "no name"},
        {{mk("__metadata__", DFL_DTYPE_F32, 1, s2, v, sizeof v)}, 1, DFL_ERR_USAGE, "reserved"},
        {{mk("d", DFL_DTYPE_F32, 1, s2, v, sizeof v), mk("d", DFL_DTYPE_F32, 1, s2, v, sizeof v)},
         2,
         DFL_ERR_USAGE,
         "'d' given twice"},
    };
    dfl_tensor nine = mk("w", DFL_DTYPE_F32, 1, s2, v, sizeof v);
    nine.ndim = 9;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(dfl_st_write(path, cases[i].t, cases[i].n, 0, &err), cases[i].want);
        if (!strstr(err.msg, cases[i].frag)) fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].frag);
    }
    assert_int_equal(dfl_st_write(path, &nine, 1, 0, &err), DFL_ERR_TENSOR);
    assert_int_equal(dfl_st_write(NULL, &nine, 1, 0, &err), DFL_ERR_USAGE);
    assert_int_equal(dfl_st_write(path, NULL, 1, 0, &err), DFL_ERR_USAGE);
    assert_int_equal(count_entries(fx->dir), 0); /* nothing created, nothing left */
}

/* ------------------------------------------------------------------------------------
 * tensor sets
 * ---------------------------------------------------------------------------------- */

/* DIR/name with two F32 tensors named a and b, values base and base + 1. */
static void write_shard(void **state, const char *name, const char *a, const char *b, float base)
{
    float va = base, vb = base + 1;
    dfl_tensor ts[2] = {mk(a, DFL_DTYPE_F32, 0, NULL, &va, 4), mk(b, DFL_DTYPE_F32, 0, NULL, &vb, 4)};
    dfl_error err = {0};
    assert_int_equal(dfl_st_write(P(state, name), ts, 2, 1, &err), DFL_OK);
}

static void test_set_single(void **state)
{
    fixture *fx = *state;
    write_shard(state, "model.safetensors", "x", "y", 10);
    /* The single file wins over an index. */
    write_text(P(state, "model.safetensors.index.json"), "garbage");
    dfl_st_set *s = NULL;
    dfl_error err = {0};
    assert_int_equal(dfl_st_set_open(fx->dir, &s, &err), DFL_OK);
    assert_int_equal(dfl_st_set_count(s), 2);
    assert_string_equal(dfl_st_set_at(s, 0)->name, "x");
    assert_null(dfl_st_set_at(s, 2));
    float v;
    assert_int_equal(dfl_tensor_to_f32(dfl_st_set_find(s, "y"), &v, &err), DFL_OK);
    assert_true(v == 11.0f);
    assert_string_equal(dfl_st_set_file_of(s, "y"), P(state, "model.safetensors"));
    assert_null(dfl_st_set_find(s, "z"));
    assert_null(dfl_st_set_file_of(s, "z"));
    dfl_st_set_close(s);
    dfl_st_set_close(NULL);
}

static const char *INDEX2 = "{\"metadata\":{\"total_size\":16},\"weight_map\":{"
                            "\"a\":\"model-00001-of-00002.safetensors\","
                            "\"b\":\"model-00001-of-00002.safetensors\","
                            "\"c\":\"model-00002-of-00002.safetensors\","
                            "\"d\":\"model-00002-of-00002.safetensors\"}}";

static void test_set_sharded(void **state)
{
    fixture *fx = *state;
    write_shard(state, "model-00001-of-00002.safetensors", "a", "b", 1);
    write_shard(state, "model-00002-of-00002.safetensors", "c", "d", 3);
    write_text(P(state, "model.safetensors.index.json"), INDEX2);
    dfl_st_set *s = NULL;
    dfl_error err = {0};
    assert_int_equal(dfl_st_set_open(fx->dir, &s, &err), DFL_OK);
    assert_int_equal(dfl_st_set_count(s), 4);
    const char *names = "abcd";
    for (int i = 0; i < 4; i++) {
        char nm[2] = {names[i], 0};
        float v;
        const dfl_tensor *t = dfl_st_set_find(s, nm);
        assert_non_null(t);
        assert_ptr_equal(dfl_st_set_at(s, (size_t)i), t); /* files in index order */
        assert_int_equal(dfl_tensor_to_f32(t, &v, &err), DFL_OK);
        assert_true(v == (float)(i + 1));
        assert_non_null(strstr(dfl_st_set_file_of(s, nm), i < 2 ? "00001-of" : "00002-of"));
    }
    assert_null(dfl_st_set_find(s, "e"));
    dfl_st_set_close(s);
}

static void expect_set(void **state, dfl_status want, const char *frag1, const char *frag2)
{
    fixture *fx = *state;
    dfl_st_set *s = (dfl_st_set *)1;
    dfl_error err = {0};
    assert_int_equal(dfl_st_set_open(fx->dir, &s, &err), want);
    assert_null(s);
    if (!strstr(err.msg, frag1)) fail_msg("'%s' lacks '%s'", err.msg, frag1);
    if (frag2 && !strstr(err.msg, frag2)) fail_msg("'%s' lacks '%s'", err.msg, frag2);
}

static void test_set_index_missing_tensor(void **state)
{
    write_shard(state, "model-00001-of-00002.safetensors", "a", "b", 1);
    write_shard(state, "model-00002-of-00002.safetensors", "c", "x", 3); /* no d */
    write_text(P(state, "model.safetensors.index.json"), INDEX2);
    expect_set(state, DFL_ERR_FORMAT, "model.safetensors.index.json: tensor 'd'", "00002-of-00002");
}

static void test_set_index_missing_shard(void **state)
{
    write_shard(state, "model-00001-of-00002.safetensors", "a", "b", 1);
    write_text(P(state, "model.safetensors.index.json"), INDEX2);
    expect_set(state, DFL_ERR_IO, "model.safetensors.index.json: shard 'model-00002-of-00002.safetensors'", NULL);
}

static void test_set_index_bad_shard_names(void **state)
{
    write_shard(state, "s.safetensors", "a", "b", 1);
    write_text(P(state, "model.safetensors.index.json"), "{\"weight_map\":{\"a\":\"../s.safetensors\"}}");
    expect_set(state, DFL_ERR_FORMAT, "tensor 'a'", "'../s.safetensors'");
    write_text(P(state, "model.safetensors.index.json"), "{\"weight_map\":{\"a\":\"..\"}}");
    expect_set(state, DFL_ERR_FORMAT, "tensor 'a'", "plain file name");
    write_text(P(state, "model.safetensors.index.json"), "{\"weight_map\":{\"a\":\"\"}}");
    expect_set(state, DFL_ERR_FORMAT, "tensor 'a'", "plain file name");
    write_text(P(state, "model.safetensors.index.json"), "{\"weight_map\":{\"a\":1}}");
    expect_set(state, DFL_ERR_FORMAT, "tensor 'a'", "not a string");
}

static void test_set_index_malformed(void **state)
{
    write_text(P(state, "model.safetensors.index.json"), "{\"weight_map\":");
    expect_set(state, DFL_ERR_FORMAT, "index.json: not valid JSON", NULL);
    write_text(P(state, "model.safetensors.index.json"), "[\"weight_map\"]");
    expect_set(state, DFL_ERR_FORMAT, "no \"weight_map\"", NULL);
    write_text(P(state, "model.safetensors.index.json"), "{\"weight_map\":[]}");
    expect_set(state, DFL_ERR_FORMAT, "no \"weight_map\"", NULL);
    write_text(P(state, "model.safetensors.index.json"), "{\"weight_map\":{}}");
    expect_set(state, DFL_ERR_FORMAT, "empty", NULL);
    /* A shard that is not a valid safetensors file. */
    write_text(P(state, "s.safetensors"), "not a safetensors file");
    write_text(P(state, "model.safetensors.index.json"), "{\"weight_map\":{\"a\":\"s.safetensors\"}}");
    expect_set(state, DFL_ERR_FORMAT, "shard 's.safetensors'", NULL);
}

static void test_set_duplicate_across_shards(void **state)
{
    write_shard(state, "s1.safetensors", "a", "b", 1);
    write_shard(state, "s2.safetensors", "b", "c", 3);
    write_text(P(state, "model.safetensors.index.json"),
               "{\"weight_map\":{\"a\":\"s1.safetensors\",\"c\":\"s2.safetensors\"}}");
    expect_set(state, DFL_ERR_FORMAT, "tensor 'b' is in both", NULL);
}

static void test_set_nothing_there(void **state)
{
    fixture *fx = *state;
    dfl_st_set *s = NULL;
    dfl_error err = {0};
    char want[256];
    snprintf(want, sizeof want, "%s: no model.safetensors or model.safetensors.index.json", fx->dir);
    assert_int_equal(dfl_st_set_open(fx->dir, &s, &err), DFL_ERR_IO);
    assert_string_equal(err.msg, want);
    assert_null(s);
    assert_int_equal(dfl_st_set_open(P(state, "no-such-dir"), &s, &err), DFL_ERR_IO);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_dtype_names_and_sizes),
        T(test_roundtrip),
        T(test_roundtrip_escaped_names),
        T(test_write_empty_set),
        T(test_unaligned_data),
        T(test_f16_to_f32_values),
        T(test_f32_to_f16_rounding),
        T(test_bf16_conversions),
        T(test_to_f32_rejects_other_dtypes),
        T(test_open_missing_file),
        T(test_open_truncated_files),
        T(test_bad_json),
        T(test_bad_entries),
        T(test_bad_shapes),
        T(test_bad_offsets),
        T(test_overlap_and_duplicates),
        T(test_metadata),
        T(test_write_exists),
        T(test_write_missing_folder),
        T(test_write_bad_tensors),
        T(test_set_single),
        T(test_set_sharded),
        T(test_set_index_missing_tensor),
        T(test_set_index_missing_shard),
        T(test_set_index_bad_shard_names),
        T(test_set_index_malformed),
        T(test_set_duplicate_across_shards),
        T(test_set_nothing_there),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
