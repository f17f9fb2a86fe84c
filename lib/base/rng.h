/* rng.h — the library's one pseudo-random generator: splitmix64 addressed by
 * (seed, stream, index), so any sample of any stream can be drawn without replaying
 * the ones before it (the needle task, noise prompts, weight initialisation). Not
 * for cryptography. Streams in use: 0 training samples, 1 held-out samples, 2 weight
 * initialisation, 3 template noise prompts. */
#ifndef DFL_RNG_H
#define DFL_RNG_H

#include <stdint.h>

/* splitmix64: one 64-bit word of state, passes BigCrush, trivially seekable. */
typedef struct dfl_rng {
    uint64_t s;
} dfl_rng;

/* A generator for (seed, stream, index): independent-looking streams from one seed. */
dfl_rng dfl_rng_make(uint64_t seed, uint64_t stream, uint64_t index);
uint64_t dfl_rng_next(dfl_rng *r);
/* Uniform in [0, n) (n >= 1), without modulo bias. */
uint64_t dfl_rng_below(dfl_rng *r, uint64_t n);
/* Uniform double in [0, 1) with 53 random bits. */
double dfl_rng_uniform(dfl_rng *r);
/* Standard normal (Box–Muller, one value per call). */
double dfl_rng_normal(dfl_rng *r);

#endif
