/* test_dump_direct.c — the dump's direct chunk writer (dfl_dump_stream_create_direct in
 * lib/dump/dump_direct.c) and the vectorised f32 → f16 packer (lib/dump/f16_pack.c).
 *
 * References: GCC's _Float16 conversion (libgcc's soft-float rounding, independent of
 * both converters) and the scalar dfl_f32_to_f16 over a sweep of every f32 exponent
 * and sign with the mantissa patterns that decide rounding; HDF5's own H5Dread (which
 * inflates and unshuffles through HDF5's filter pipeline) and the dump reader for the
 * written datasets, against the values written; the allocated-chunk count against the
 * causal-tile rule; chunk bytes written with 1 and 2 threads; error paths, including a
 * chunk write refused by a file-size limit; the fused conversion + shuffle (byte planes)
 * of every instruction set against the scalar converter, and each set forced with
 * DFL_CPU in a child process writing the same chunk bytes; pumped and unpumped streams
 * writing the same chunk bytes. */
#include <hdf5.h>
#include <omp.h>
#include <setjmp.h>
#include <spawn.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "base/half.h"
#include "dump/dump.h"
#include "dump/dump_chunks.h"
#include "dump/dump_read.h"
#include "dump/f16_pack.h"
#include "model/model.h"
#include "model/safetensors.h"

#define TMPDIR_PREFIX "dfl_direct"
#include "tmpdir.h"

/* ------------------------------------------------------------- f16 packing */

static uint16_t ref_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: the rule both converters document */
        return (uint16_t)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));
    _Float16 h = (_Float16)f;
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* Every sign/exponent/top-mantissa combination (the top 16 bits) with low halves that
 * sit on, just below and just above each rounding boundary, plus random ones: 4.7M
 * values per instruction set, packed in arrays of every length 1..47 (vector tails). */
static void test_f16_pack_matches_scalar(void **state)
{
    (void)state;
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2001,
                                    0x3000, 0x7fff, 0x8000, 0x8001, 0xc000, 0xefff, 0xf000, 0xffff};
    enum { NLOW = sizeof lows / sizeof lows[0], NRAND = 56, PER = NLOW + NRAND };
    float *in = malloc((size_t)65536 * PER * sizeof *in);
    uint16_t *want = malloc((size_t)65536 * PER * sizeof *want), *got = malloc((size_t)65536 * PER * sizeof *got);
    assert_non_null(in);
    assert_non_null(want);
    assert_non_null(got);
    size_t n = 0;
    for (uint32_t hi = 0; hi < 65536; hi++)
        for (int k = 0; k < PER; k++) {
            uint32_t bits = hi << 16 | (k < NLOW ? lows[k] : next_u32() & 0xffffu);
            memcpy(&in[n], &bits, 4);
            want[n] = dfl_f32_to_f16(in[n]);
            /* the scalar twin against the independent reference */
            if (want[n] != ref_half(in[n]))
                fail_msg("scalar: 0x%08x -> 0x%04x, reference 0x%04x", bits, want[n], ref_half(in[n]));
            n++;
        }
    assert_int_equal(dfl__f16_pack_isa(DFL__F16_SCALAR, in, got, 4), 0);
    for (int isa = DFL__F16_F16C; isa <= (int)dfl__f16_best_isa(); isa++) {
        memset(got, 0xab, n * sizeof *got);
        for (size_t at = 0, len = 1; at < n; at += len, len = len % 47 + 1) {
            size_t m = at + len <= n ? len : n - at;
            assert_int_equal(dfl__f16_pack_isa((dfl__f16_isa)isa, in + at, got + at, m), m);
        }
        for (size_t i = 0; i < n; i++)
            if (got[i] != want[i]) {
                uint32_t bits;
                memcpy(&bits, &in[i], 4);
                fail_msg("isa %d: 0x%08x -> 0x%04x, scalar 0x%04x", isa, bits, got[i], want[i]);
            }
    }
    /* the fused conversion + byte shuffle: low and high bytes of the same halves */
    uint8_t *lo = malloc(n), *hi = malloc(n);
    assert_non_null(lo);
    assert_non_null(hi);
    for (int isa = DFL__F16_SCALAR; isa <= (int)dfl__f16_best_isa(); isa++) {
        memset(lo, 0xab, n);
        memset(hi, 0xab, n);
        for (size_t at = 0, len = 1; at < n; at += len, len = len % 47 + 1) {
            size_t m = at + len <= n ? len : n - at;
            dfl__f16_planes_isa((dfl__f16_isa)isa, in + at, lo + at, hi + at, m);
        }
        for (size_t i = 0; i < n; i++)
            if (lo[i] != (want[i] & 0xff) || hi[i] != want[i] >> 8) {
                uint32_t bits;
                memcpy(&bits, &in[i], 4);
                fail_msg("planes, isa %d: 0x%08x -> 0x%02x%02x, scalar 0x%04x", isa, bits, hi[i], lo[i], want[i]);
            }
    }
    free(lo);
    free(hi);
    print_message("f16 packing checked for instruction sets up to %d (0 scalar, 1 F16C, 2 AVX-512)\n",
                  (int)dfl__f16_best_isa());
    free(in);
    free(want);
    free(got);
}

/* --------------------------------------------------------- direct streams */

/* [2][3][37][53]: partial edge chunks in the row and key dimensions for every chunk shape */
static const int64_t DIMS[4] = {2, 3, 37, 53};
#define NVAL ((size_t)2 * 3 * 37 * 53)

static dfl_model g_model;

static void init_model(void)
{
    memset(&g_model, 0, sizeof g_model);
    g_model.config.type = DFL_MODEL_LLAMA;
    g_model.config.num_layers = 2;
    g_model.config.num_heads = 3;
    g_model.config.head_dim = 4;
    g_model.config_text = "{}";
    g_model.path = "model";
}

static int setup(void **state)
{
    init_model();
    return group_setup(state);
}

/* Values with every class the converter handles: normal, f16-subnormal, tiny, huge
 * (→ inf), negative, NaN, ±0, inf. */
static float value_at(size_t i)
{
    uint32_t r = (uint32_t)(i * 2654435761u);
    switch (r % 11) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return 3e-6f * (float)(r % 97); /* f16 subnormals */
    case 3: return 1e-9f;
    case 4: return 70000.0f + (float)(r % 5);
    case 5: return -(float)(r % 1000) / 7.0f;
    case 6: return __builtin_nanf("0x12345");
    case 7: return __builtin_inff();
    default: return (float)(r % 100000) / 99991.0f;
    }
}

static void path_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s", path_of(name));
}

/* Write value_at(i) causally (row r reaches keys <= r) in runs of `run` rows, with
 * `threads` compressing threads; after every write, when `pump`: a pump (1), or the
 * queued jobs deflated by an OpenMP loop of the test's own through
 * dfl_dump_stream_work, then a pump every other write (2, as probe's attention region
 * does); finish the dump at path. */
static void write_direct_pumped(const char *path, dfl_h5_type type, int gzip, const int64_t *chunk, int64_t open_rows,
                                int threads, int run, int pump)
{
    dfl_dump_info info = {&g_model, "model", 0, "none", "last"};
    dfl_dump *d = NULL;
    dfl_error err = {DFL_OK, ""};
    assert_int_equal(dfl_dump_create(path, 1, &info, &d, &err), DFL_OK);
    dfl_dump_direct opt = dfl_dump_direct_default();
    opt.gzip = gzip;
    opt.open_rows = open_rows;
    opt.threads = threads;
    dfl_dump_stream *s = NULL;
    if (dfl_dump_stream_create_direct(d, "m", type, 4, DIMS, chunk, &opt, &s, &err)) fail_msg("%s", err.msg);
    float *buf = malloc(NVAL * sizeof *buf);
    /* as the forward hands rows out: masked (future) keys hold 0 */
    for (size_t i = 0; i < NVAL; i++)
        buf[i] = i % 53 > i / 53 % 37 ? 0.0f : value_at(i);
    for (int64_t a = 0; a < DIMS[0]; a++)
        for (int64_t b = 0; b < DIMS[1]; b++)
            for (int64_t r = 0, n; r < DIMS[2]; r += n) {
                /* a run stops at the end of a row of chunks, as probe's do: it reaches only
                 * the keys its last row sees, so no chunk wholly in its rows' future */
                int64_t end = (r / chunk[2] + 1) * chunk[2];
                n = r + run <= end ? run : end - r;
                if (r + n > DIMS[2]) n = DIMS[2] - r;
                int64_t keys = r + n < DIMS[3] ? r + n : DIMS[3];
                int64_t start[4] = {a, b, r, 0}, count[4] = {1, 1, n, keys};
                const float *src = buf + (size_t)((a * DIMS[1] + b) * DIMS[2] + r) * (size_t)DIMS[3];
                if (dfl_dump_stream_write_f32(s, start, count, src, DIMS[3], &err)) fail_msg("%s", err.msg);
                if (pump == 2) {
                    int64_t jobs = dfl_dump_stream_jobs(s);
#pragma omp parallel for schedule(dynamic, 1) num_threads(2)
                    for (int64_t k = 0; k < jobs; k++)
                        dfl_dump_stream_work(s, k, omp_get_thread_num());
                }
                if ((pump == 1 || (pump == 2 && r / run % 2)) && dfl_dump_stream_pump(s, &err)) fail_msg("%s", err.msg);
            }
    if (dfl_dump_stream_flush(s, &err)) fail_msg("%s", err.msg);
    dfl_dump_stream_close(s);
    assert_int_equal(dfl_dump_finish(d, &err), DFL_OK);
    free(buf);
}

static void write_direct(const char *path, dfl_h5_type type, int gzip, const int64_t *chunk, int64_t open_rows,
                         int threads, int run)
{
    write_direct_pumped(path, type, gzip, chunk, open_rows, threads, run, 0);
}

/* What each element must read as: causal values, 0 above the diagonal. */
static float expected(size_t i, int f16)
{
    int64_t key = (int64_t)(i % 53), row = (int64_t)(i / 53 % 37);
    if (key > row) return 0.0f;
    float v = value_at(i);
    if (!f16) return v;
    _Float16 h;
    uint16_t b = ref_half(v);
    memcpy(&h, &b, 2);
    return (float)h;
}

/* Bit-identical, except that two NaNs match (HDF5's f16 → f32 conversion picks its
 * own payload; the f16 bits themselves are compared exactly in check_file). */
static int same_bits(float a, float b)
{
    return memcmp(&a, &b, 4) == 0 || (a != a && b != b);
}

/* Chunks the causal rule allocates: those whose first key is <= their last row. */
static hsize_t causal_chunks(const int64_t *chunk)
{
    hsize_t n = 0;
    for (int64_t a = 0; a < DIMS[0]; a += chunk[0])
        for (int64_t b = 0; b < DIMS[1]; b += chunk[1])
            for (int64_t r = 0; r < DIMS[2]; r += chunk[2]) {
                int64_t last = r + chunk[2] < DIMS[2] ? r + chunk[2] - 1 : DIMS[2] - 1;
                for (int64_t k = 0; k < DIMS[3]; k += chunk[3])
                    n += k <= last;
            }
    return n;
}

/* Read path back with H5Dread and with the dump reader; check both, the filters and
 * the allocated chunks. */
static void check_file(const char *path, int f16, int gzip, const int64_t *chunk)
{
    float *got = malloc(NVAL * sizeof *got);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "m", H5P_DEFAULT);
    assert_true(ds >= 0);
    assert_true(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    for (size_t i = 0; i < NVAL; i++)
        if (!same_bits(got[i], expected(i, f16)))
            fail_msg("H5Dread, gzip %d f16 %d: element %zu is %a, want %a", gzip, f16, i, got[i], expected(i, f16));
    if (f16) {
        /* the stored half bits, read without conversion */
        uint16_t *half = malloc(NVAL * sizeof *half);
        hid_t ft = H5Dget_type(ds);
        assert_true(H5Dread(ds, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, half) >= 0);
        for (size_t i = 0; i < NVAL; i++) {
            uint16_t want = i % 53 > i / 53 % 37 ? 0 : ref_half(value_at(i));
            if (half[i] != want) fail_msg("H5Dread, gzip %d: half %zu is 0x%04x, want 0x%04x", gzip, i, half[i], want);
        }
        H5Tclose(ft);
        free(half);
    }
    hid_t dcpl = H5Dget_create_plist(ds);
    assert_int_equal(H5Pget_nfilters(dcpl), gzip < 0 ? 0 : 2);
    if (gzip >= 0) {
        unsigned flags, cd[4];
        size_t ncd = 4;
        assert_int_equal(H5Pget_filter2(dcpl, 0, &flags, &ncd, cd, 0, NULL, NULL), H5Z_FILTER_SHUFFLE);
        ncd = 4;
        assert_int_equal(H5Pget_filter2(dcpl, 1, &flags, &ncd, cd, 0, NULL, NULL), H5Z_FILTER_DEFLATE);
        assert_int_equal(cd[0], (unsigned)gzip);
    }
    H5Pclose(dcpl);
    hid_t sp = H5Dget_space(ds);
    hsize_t nchunks = 0;
    assert_true(H5Dget_num_chunks(ds, sp, &nchunks) >= 0);
    assert_int_equal(nchunks, causal_chunks(chunk));
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);

    dfl_dump_reader *r = NULL;
    dfl_dump_slab *slab = NULL;
    dfl_error err = {DFL_OK, ""};
    assert_int_equal(dfl_dump_open(path, &r, &err), DFL_OK);
    assert_int_equal(dfl_dump_slab_open(r, "m", &slab, &err), DFL_OK);
    /* the reader's chunk decoder takes the compressed ones; unfiltered ones are HDF5's */
    assert_int_equal(dfl__dump_slab_direct(slab, 1), gzip >= 0);
    int64_t start[4] = {0, 0, 0, 0};
    memset(got, 0, NVAL * sizeof *got);
    assert_int_equal(dfl_dump_slab_read_f32(slab, start, DIMS, got, &err), DFL_OK);
    for (size_t i = 0; i < NVAL; i++)
        if (!same_bits(got[i], expected(i, f16)))
            fail_msg("dump reader: element %zu is %a, want %a", i, got[i], expected(i, f16));
    dfl_dump_slab_close(slab);
    dfl_dump_close(r);
    free(got);
}

/* Every compression choice, f16 and f32, three chunk shapes (one with two heads per
 * chunk row), runs that end inside and across chunk rows, one to three open rows. */
static void test_round_trip(void **state)
{
    (void)state;
    static const int64_t chunks[3][4] = {{1, 1, 8, 16}, {1, 2, 8, 16}, {1, 1, 32, 48}};
    static const int levels[] = {-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    char path[512];
    path_in(path, sizeof path, "rt.h5");
    for (int f16 = 0; f16 < 2; f16++)
        for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++)
            for (int c = 0; c < 3; c++) {
                /* two heads per chunk row: head 1 comes back to every row of tiles */
                int run = 1 + (int)((l + (size_t)c) % 9), open_rows = c == 1 ? 5 : 1 + (int)(l % 3);
                write_direct_pumped(path, f16 ? DFL_H5_F16 : DFL_H5_F32, levels[l], chunks[c], open_rows, 2, run,
                                    (int)(l + (size_t)c) % 2);
                check_file(path, f16, levels[l], chunks[c]);
            }
}

/* The raw bytes of every stored chunk of dataset "m" of path, concatenated: [*n]. */
static unsigned char *chunk_bytes(const char *path, size_t *n)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), ds = H5Dopen2(f, "m", H5P_DEFAULT);
    hid_t sp = H5Dget_space(ds);
    hsize_t count = 0;
    assert_true(H5Dget_num_chunks(ds, sp, &count) >= 0);
    unsigned char *all = NULL;
    *n = 0;
    for (hsize_t i = 0; i < count; i++) {
        hsize_t off[4], size = 0;
        unsigned mask = 0;
        haddr_t addr;
        assert_true(H5Dget_chunk_info(ds, sp, i, off, &mask, &addr, &size) >= 0);
        all = realloc(all, *n + (size_t)size + sizeof off);
        memcpy(all + *n, off, sizeof off); /* position, then bytes */
        assert_true(H5Dread_chunk(ds, H5P_DEFAULT, off, &mask, all + *n + sizeof off) >= 0);
        assert_int_equal(mask, 0);
        *n += (size_t)size + sizeof off;
    }
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);
    return all;
}

static void test_threads_identical(void **state)
{
    (void)state;
    static const int64_t chunk[4] = {1, 1, 8, 16};
    char p1[512], p2[512];
    path_in(p1, sizeof p1, "t1.h5");
    path_in(p2, sizeof p2, "t2.h5");
    static const int levels[] = {6, 1, -1};
    for (int l = 0; l < 3; l++)
        for (int f16 = 0; f16 < 2; f16++) {
            dfl_h5_type type = f16 ? DFL_H5_F16 : DFL_H5_F32;
            write_direct(p1, type, levels[l], chunk, 4, 1, 5);
            /* two threads, a pump after every write, or the jobs deflated by outside threads
             * (as probe's attention region does): the same bytes */
            for (int pump = 1; pump <= 2; pump++) {
                write_direct_pumped(p2, type, levels[l], chunk, 4, 2, 5, pump);
                size_t n1, n2;
                unsigned char *a = chunk_bytes(p1, &n1), *b = chunk_bytes(p2, &n2);
                assert_true(n1 > 0);
                assert_int_equal(n1, n2);
                assert_memory_equal(a, b, n1);
                free(a);
                free(b);
            }
        }
}

/* ------------------------------------------------- instruction sets forced */

extern char **environ;
static const char *const g_isa_names[] = {"scalar", "avx2", "avx512"};

/* In the child (DFL_CPU set by the parent): the set must be the one asked for, capped
 * at the CPU's; then the gzip:1 f16 dataset at path. */
static int child_isa(const char *name, int cpu_best, const char *path)
{
    int want = strcmp(name, "scalar") == 0 ? DFL__F16_SCALAR : strcmp(name, "avx2") == 0 ? DFL__F16_F16C : 2;
    if (want > cpu_best) want = cpu_best;
    if ((int)dfl__f16_best_isa() != want) {
        fprintf(stderr, "DFL_CPU=%s: set %d, want %d\n", name, (int)dfl__f16_best_isa(), want);
        return 1;
    }
    static const int64_t chunk[4] = {1, 1, 8, 16};
    write_direct(path, DFL_H5_F16, 1, chunk, 4, 2, 5);
    return 0;
}

static void test_forced_isa(void **state)
{
    (void)state;
    static const int64_t chunk[4] = {1, 1, 8, 16};
    char mine[512], theirs[512];
    path_in(mine, sizeof mine, "isa_auto.h5");
    path_in(theirs, sizeof theirs, "isa_forced.h5");
    /* this process: the CPU's best set, unless DFL_CPU narrows it; the reference file */
    write_direct(mine, DFL_H5_F16, 1, chunk, 4, 2, 5);
    size_t n1, n2;
    unsigned char *a = chunk_bytes(mine, &n1);
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **env = calloc(ne + 2, sizeof *env);
    assert_non_null(env);
    for (int p = 0; p < 3; p++) {
        size_t k = 0;
        for (size_t i = 0; i < ne; i++)
            if (strncmp(environ[i], "DFL_CPU=", 8) != 0) env[k++] = environ[i];
        char var[32], best[8];
        snprintf(var, sizeof var, "DFL_CPU=%s", g_isa_names[p]);
        env[k++] = var;
        env[k] = NULL;
        /* the CPU's own best, not this process's (which DFL_CPU may have narrowed) */
        __builtin_cpu_init();
        int cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl")
                      ? 2
                  : dfl_cpu_has_f16c() ? 1
                                       : 0;
        snprintf(best, sizeof best, "%d", cpu);
        char *argv[] = {"test_dump_direct", "--isa", (char *)g_isa_names[p], best, theirs, NULL};
        pid_t pid;
        int st = -1;
        remove(theirs);
        if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, env) != 0 || waitpid(pid, &st, 0) != pid) st = -1;
        if (st != 0) fail_msg("DFL_CPU=%s: child status %d", g_isa_names[p], st);
        unsigned char *b = chunk_bytes(theirs, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1);
        free(b);
    }
    print_message("f16 planes forced to each of scalar, avx2, avx512 (capped at the CPU's): same chunks\n");
    free(env);
    free(a);
}

/* -------------------------------------------------------------- error paths */

static void test_errors(void **state)
{
    (void)state;
    char path[512];
    path_in(path, sizeof path, "err.h5");
    dfl_dump_info info = {&g_model, "model", 0, "none", "last"};
    dfl_dump *d = NULL;
    dfl_error err = {DFL_OK, ""};
    assert_int_equal(dfl_dump_create(path, 1, &info, &d, &err), DFL_OK);
    static const int64_t chunk[4] = {1, 1, 8, 16};
    dfl_dump_direct opt = dfl_dump_direct_default();
    dfl_dump_stream *s = NULL;
    assert_int_equal(dfl_dump_stream_create_direct(d, "i", DFL_H5_I32, 4, DIMS, chunk, &opt, &s, &err), DFL_ERR_USAGE);
    assert_int_equal(dfl_dump_stream_create_direct(d, "r", DFL_H5_F32, 5, DIMS, chunk, &opt, &s, &err), DFL_ERR_USAGE);
    opt.gzip = 10;
    assert_int_equal(dfl_dump_stream_create_direct(d, "g", DFL_H5_F32, 4, DIMS, chunk, &opt, &s, &err), DFL_ERR_USAGE);
    opt.gzip = 1;
    opt.open_rows = 0;
    assert_int_equal(dfl_dump_stream_create_direct(d, "o", DFL_H5_F32, 4, DIMS, chunk, &opt, &s, &err), DFL_ERR_USAGE);
    opt.open_rows = 1;
    assert_null(s);
    assert_int_equal(dfl_dump_stream_create_direct(d, "m", DFL_H5_F32, 4, DIMS, chunk, &opt, &s, &err), DFL_OK);
    float row[53] = {0};
    int64_t out_start[4] = {0, 0, 36, 50}, out_count[4] = {1, 1, 1, 4};
    assert_int_equal(dfl_dump_stream_write_f32(s, out_start, out_count, row, 53, &err), DFL_ERR_USAGE);
    /* row 7 completes the first chunk row, which is then stored: going back is refused */
    int64_t start[4] = {0, 0, 7, 0}, count[4] = {1, 1, 1, 53};
    assert_int_equal(dfl_dump_stream_write_f32(s, start, count, row, 53, &err), DFL_OK);
    start[2] = 3;
    assert_int_equal(dfl_dump_stream_write_f32(s, start, count, row, 53, &err), DFL_ERR_USAGE);
    assert_non_null(strstr(err.msg, "already stored"));
    /* with one open row, a second chunk row pushes the first out incomplete */
    start[2] = 8;
    assert_int_equal(dfl_dump_stream_write_f32(s, start, count, row, 53, &err), DFL_OK);
    start[1] = 1;
    assert_int_equal(dfl_dump_stream_write_f32(s, start, count, row, 53, &err), DFL_OK);
    start[1] = 0;
    start[2] = 9;
    assert_int_equal(dfl_dump_stream_write_f32(s, start, count, row, 53, &err), DFL_ERR_USAGE);
    assert_int_equal(dfl_dump_stream_flush(s, &err), DFL_OK);
    dfl_dump_stream_close(s);
    dfl_dump_stream_close(NULL);
    dfl_dump_abort(d);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
}

/* A chunk write that the file system refuses (a file-size limit, as a full disk would):
 * a clear HDF5 error, and after abort no file at the path. */
static void test_write_refused(void **state)
{
    (void)state;
    char path[512];
    path_in(path, sizeof path, "full.h5");
    dfl_dump_info info = {&g_model, "model", 0, "none", "last"};
    dfl_dump *d = NULL;
    dfl_error err = {DFL_OK, ""};
    assert_int_equal(dfl_dump_create(path, 1, &info, &d, &err), DFL_OK);
    static const int64_t dims[4] = {1, 1, 64, 4096}, chunk[4] = {1, 1, 32, 512};
    dfl_dump_direct opt = dfl_dump_direct_default();
    opt.gzip = -1; /* raw chunks: 64 KB each, far past the limit */
    opt.open_rows = 2;
    dfl_dump_stream *s = NULL;
    assert_int_equal(dfl_dump_stream_create_direct(d, "m", DFL_H5_F32, 4, dims, chunk, &opt, &s, &err), DFL_OK);
    float *rows = calloc(64 * 4096, sizeof *rows);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* the write fails with EFBIG instead */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int64_t start[4] = {0, 0, 0, 0}, count[4] = {1, 1, 64, 4096};
    dfl_status st = dfl_dump_stream_write_f32(s, start, count, rows, 4096, &err);
    if (!st) st = dfl_dump_stream_flush(s, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_int_equal(st, DFL_ERR_HDF5);
    assert_non_null(strstr(err.msg, "failed to write the chunk at"));
    dfl_dump_stream_close(s);
    dfl_dump_abort(d);
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
    free(rows);
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--isa") == 0) {
        init_model();
        return child_isa(argv[2], (int)strtol(argv[3], NULL, 10), argv[4]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_pack_matches_scalar), cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_threads_identical),       cmocka_unit_test(test_errors),
        cmocka_unit_test(test_write_refused),           cmocka_unit_test(test_forced_isa),
    };
    return cmocka_run_group_tests(tests, setup, group_teardown);
}
