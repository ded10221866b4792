/*
 * xoshiro256** (Blackman and Vigna, public domain reference algorithm),
 * seeded through splitmix64 so that any 64-bit seed, 0 included, gives a
 * well-mixed non-zero state.
 */
#include "core/rng.h"

#include <assert.h>

static uint64_t rotl(uint64_t x, int k)
{
        return (x << k) | (x >> (64 - k));
}

static uint64_t splitmix64(uint64_t *x)
{
        uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

void tg_rng_seed(struct tg_rng *rng, uint64_t seed)
{
        for (int i = 0; i < 4; i++)
                rng->s[i] = splitmix64(&seed);
}

uint64_t tg_rng_next(struct tg_rng *rng)
{
        uint64_t *s = rng->s;
        uint64_t result = rotl(s[1] * 5, 7) * 9;
        uint64_t t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = rotl(s[3], 45);
        return result;
}

int64_t tg_rng_range(struct tg_rng *rng, int64_t lo, int64_t hi)
{
        assert(lo <= hi);
        uint64_t span = (uint64_t)hi - (uint64_t)lo; /* hi - lo, exact in unsigned */
        if (span == UINT64_MAX)
                return (int64_t)tg_rng_next(rng);
        uint64_t n = span + 1;
        /* Rejection sampling: drop the top partial bucket so every value is
         * equally likely. */
        uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
        uint64_t x;
        do {
                x = tg_rng_next(rng);
        } while (x >= limit);
        return (int64_t)((uint64_t)lo + x % n);
}

double tg_rng_unit(struct tg_rng *rng)
{
        return (double)(tg_rng_next(rng) >> 11) * 0x1.0p-53;
}
