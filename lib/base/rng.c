/* rng.c — splitmix64 with a seekable start (see rng.h). */
#include "base/rng.h"

#include <math.h>

/* -------------------------------------------------------------------- PRNG */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

dfl_rng dfl_rng_make(uint64_t seed, uint64_t stream, uint64_t index)
{
    /* Hash each coordinate in turn, so (seed, stream, index) triples that differ in
     * any word start far apart. */
    uint64_t s = mix64(seed + 0x9E3779B97F4A7C15ull);
    s = mix64(s ^ (stream * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull));
    s = mix64(s ^ (index * 0x8CB92BA72F3D8DD7ull + 0x2545F4914F6CDD1Dull));
    dfl_rng r = {s};
    return r;
}

uint64_t dfl_rng_next(dfl_rng *r)
{
    r->s += 0x9E3779B97F4A7C15ull;
    return mix64(r->s);
}

uint64_t dfl_rng_below(dfl_rng *r, uint64_t n)
{
    /* Reject the top partial copy of [0, n) so every value is equally likely. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = dfl_rng_next(r);
    while (x >= lim);
    return x % n;
}

double dfl_rng_uniform(dfl_rng *r)
{
    return (double)(dfl_rng_next(r) >> 11) * 0x1.0p-53;
}

double dfl_rng_normal(dfl_rng *r)
{
    double u1 = 1.0 - dfl_rng_uniform(r); /* (0, 1]: log stays finite */
    double u2 = dfl_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
