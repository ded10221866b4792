/*
 * A small seeded pseudo-random generator (xoshiro256**, seeded by splitmix64)
 * passed explicitly to every piece of pure logic that draws: the same seed
 * replays the same draws, so tests and simulations are reproducible. Not for
 * secrets.
 *
 * struct tg_rng lives on the caller's stack or inside another struct; its
 * members are touched only through these functions.
 */
#ifndef TG_RNG_H
#define TG_RNG_H

#include <stdint.h>

struct tg_rng {
        uint64_t s[4];
};

void tg_rng_seed(struct tg_rng *rng, uint64_t seed);
uint64_t tg_rng_next(struct tg_rng *rng);
/* Uniform in [lo, hi] (inclusive); lo must be <= hi. Unbiased. */
int64_t tg_rng_range(struct tg_rng *rng, int64_t lo, int64_t hi);
/* Uniform double in [0, 1). */
double tg_rng_unit(struct tg_rng *rng);

#endif
