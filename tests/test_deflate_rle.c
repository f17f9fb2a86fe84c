/* test_deflate_rle.c — the run-length deflate encoder of the map writer
 * (lib/dump/deflate_rle.c) against zlib's inflater (an independent decoder that
 * refuses incomplete or over-subscribed codes, bad distances and streams that run
 * past their end).
 *
 * Inputs: empty, one byte, every length 1..600 of several kinds (random bytes, one
 * value, runs of every length around the 3-byte minimum and the 258-byte maximum,
 * byte planes of real f16 attention weights), skewed symbol counts that make
 * Huffman's own code deeper than deflate's 15 bits, and random data that cannot
 * shrink (stored blocks, over 65,535 bytes as well). Each must inflate to itself with
 * nothing left over, never write past the buffer it is given, and refuse (return 0) a
 * buffer one byte short of its stream. On planes of attention weights the stream must
 * be no larger than zlib's own with its Z_RLE strategy (the same token rule). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "base/half.h"
#include "dump/deflate_rle.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* dfl__deflate_rle(in, n) into a buffer of cap bytes followed by 64 canary bytes,
 * which must stay untouched; returns its size, compressed into *copy (cap + 64 bytes,
 * the caller frees). */
static size_t compress_into(const unsigned char *in, size_t n, size_t cap, unsigned char **copy)
{
    unsigned char *out = malloc(cap + 64);
    assert_non_null(out);
    memset(out, 0xA5, cap + 64);
    size_t z = dfl__deflate_rle(in, n, out, cap);
    for (size_t i = cap; i < cap + 64; i++)
        assert_int_equal(out[i], 0xA5);
    *copy = out;
    return z;
}

/* Compress in[n], check the stream with zlib and the refusals of short buffers; returns
 * its size. */
static size_t round_trip(const unsigned char *in, size_t n)
{
    unsigned char *out, *back = malloc(n + 1);
    assert_non_null(back);
    size_t z = compress_into(in, n, dfl__deflate_rle_bound(n), &out);
    assert_true(z > 0 && z <= dfl__deflate_rle_bound(n));

    z_stream s;
    memset(&s, 0, sizeof s);
    assert_int_equal(inflateInit2(&s, -15), Z_OK); /* raw deflate */
    s.next_in = out;
    s.avail_in = (uInt)z;
    s.next_out = back;
    s.avail_out = (uInt)(n + 1);
    assert_int_equal(inflate(&s, Z_FINISH), Z_STREAM_END);
    assert_int_equal(s.total_out, n);
    assert_int_equal(s.avail_in, 0); /* the final block ends the stream exactly */
    if (n) assert_memory_equal(back, in, n);
    inflateEnd(&s);

    /* one byte short of its size: refused; up to its size plus the bit writer's room:
     * refused, or the same stream (the stored form needs no room) */
    for (size_t cap = z - 1; cap < z + 8; cap++) {
        unsigned char *again;
        size_t r = compress_into(in, n, cap, &again);
        if (cap < z) assert_int_equal(r, 0);
        if (r) {
            assert_int_equal(r, z);
            assert_memory_equal(again, out, z);
        }
        free(again);
    }
    free(out);
    free(back);
    return z;
}

/* zlib's own size for in[n] with the strategy given (raw deflate, level 6). */
static size_t zlib_size(const unsigned char *in, size_t n, int strategy)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    assert_int_equal(deflateInit2(&s, 6, Z_DEFLATED, -15, 8, strategy), Z_OK);
    size_t cap = deflateBound(&s, (uLong)n);
    unsigned char *out = malloc(cap);
    assert_non_null(out);
    s.next_in = (unsigned char *)in;
    s.avail_in = (uInt)n;
    s.next_out = out;
    s.avail_out = (uInt)cap;
    assert_int_equal(deflate(&s, Z_FINISH), Z_STREAM_END);
    size_t z = s.total_out;
    deflateEnd(&s);
    free(out);
    return z;
}

/* ------------------------------------------------------------------ inputs */

static void test_small(void **state)
{
    (void)state;
    unsigned char one = 7;
    round_trip(&one, 0);
    round_trip(&one, 1);
    unsigned char buf[600];
    for (size_t n = 1; n <= sizeof buf; n++) {
        for (size_t i = 0; i < n; i++) /* random */
            buf[i] = (unsigned char)next_u32();
        round_trip(buf, n);
        memset(buf, 0, n); /* one value: one literal, then matches */
        round_trip(buf, n);
        for (size_t i = 0; i < n; i++) /* few values, short runs */
            buf[i] = (unsigned char)(next_u32() % 3 == 0 ? 0x3c : next_u32() % 4);
        round_trip(buf, n);
    }
}

/* Runs of every length from 1 to 600 between two other values: the 3-byte minimum, the
 * 258-byte maximum and what follows a run cut at it. */
static void test_runs(void **state)
{
    (void)state;
    unsigned char buf[1400];
    for (size_t run = 1; run <= 600; run++) {
        size_t n = 0;
        buf[n++] = 1;
        buf[n++] = 2;
        for (size_t k = 0; k < run; k++)
            buf[n++] = 9;
        buf[n++] = 3;
        for (size_t k = 0; k < run % 7; k++)
            buf[n++] = 3;
        round_trip(buf, n);
    }
}

/* Fibonacci counts: Huffman's code for 30 symbols of counts 1, 1, 2, 3, 5, ... is 29
 * bits deep; deflate allows 15, so the lengths must be limited and kept complete. */
static void test_deep_code(void **state)
{
    (void)state;
    size_t f[30], total = 0;
    f[0] = f[1] = 1;
    for (int i = 2; i < 30; i++)
        f[i] = f[i - 1] + f[i - 2];
    for (int i = 0; i < 24; i++) /* 24 symbols: 121,392 bytes */
        total += f[i];
    unsigned char *buf = malloc(total);
    assert_non_null(buf);
    size_t at = 0;
    for (int i = 0; i < 24; i++)
        for (size_t k = 0; k < f[i]; k++)
            buf[at++] = (unsigned char)(2 * i + 1);
    for (size_t i = total - 1; i > 0; i--) { /* shuffled: no runs, literals only */
        size_t j = next_u32() % (i + 1);
        unsigned char t = buf[i];
        buf[i] = buf[j];
        buf[j] = t;
    }
    size_t z = round_trip(buf, total);
    assert_true(z < total / 2); /* a real Huffman block, not stored */
    free(buf);
}

/* Random bytes do not shrink: stored blocks, more than one when over 65,535 bytes. */
static void test_incompressible(void **state)
{
    (void)state;
    size_t sizes[] = {65535, 65536, 200000};
    for (size_t k = 0; k < 3; k++) {
        unsigned char *buf = malloc(sizes[k]);
        assert_non_null(buf);
        for (size_t i = 0; i < sizes[k]; i++)
            buf[i] = (unsigned char)next_u32();
        size_t z = round_trip(buf, sizes[k]);
        assert_int_equal(z, sizes[k] + 5 * ((sizes[k] + 65534) / 65535));
        free(buf);
    }
}

/* The high byte plane of a 32 × 512 tile of f16 causal softmax rows (the map writer's
 * input), on and below the diagonal: no larger than zlib's Z_RLE (the same tokens,
 * zlib's Huffman code) and smaller than the plane. */
static void test_map_plane(void **state)
{
    (void)state;
    enum { R = 32, K = 512 };
    for (int r0 = 0; r0 < 1024; r0 += 480) {
        unsigned char *hi = malloc(R * K);
        assert_non_null(hi);
        for (int i = 0; i < R; i++) {
            int q = r0 + i; /* the row's query: keys 0..q visible */
            double w[K], sum = 0;
            for (int j = 0; j < K; j++) {
                w[j] = j <= q ? exp(3.0 * ((double)next_u32() / 4294967296.0 - 0.5)) : 0.0;
                sum += w[j];
            }
            for (int j = 0; j < K; j++)
                hi[i * K + j] = (unsigned char)(dfl_f32_to_f16((float)(w[j] / sum)) >> 8);
        }
        size_t z = round_trip(hi, R * K), rle = zlib_size(hi, R * K, Z_RLE);
        assert_true(z <= rle);
        assert_true(z < R * K);
        free(hi);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),          cmocka_unit_test(test_runs),      cmocka_unit_test(test_deep_code),
        cmocka_unit_test(test_incompressible), cmocka_unit_test(test_map_plane),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
