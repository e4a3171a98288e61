/*
 * The arithmetic the two samplers share (the record shim's --stacks sampling, shim/record/stacks.c,
 * and the watch agent's heap profile, shim/agent/profile.c): one estimator, one generator, one
 * stack hash. Neither library links libm, so the logarithm and exponential are here too.
 */
#ifndef ALLOCLENS_SAMPLING_H
#define ALLOCLENS_SAMPLING_H

#include <stdint.h>

/* splitmix64's finaliser: spreads a few weak seed sources over all 64 bits. */
static inline uint64_t sampling_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One xorshift64* step of the generator whose state is `*state` (never 0). */
static inline uint64_t sampling_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* -ln(u) for u in (0, 1]: u = m * 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(z),
 * z = (m - 1) / (m + 1), |z| < 0.172; the series to z^13 is exact to about 1e-11, far below what
 * a sample count can tell. */
static inline double sampling_neg_log(double u)
{
    union {
        double d;
        uint64_t b;
    } v = {.d = u};
    int e = (int)((v.b >> 52) & 0x7ff) - 1023;
    v.b = (v.b & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1, 2) */
    double m = v.d;
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e += 1;
    }
    double z = (m - 1) / (m + 1), z2 = z * z;
    double series =
        z * (1 + z2 * (1.0 / 3 + z2 * (1.0 / 5 + z2 * (1.0 / 7 + z2 * (1.0 / 9 + z2 * (1.0 / 11 + z2 / 13))))));
    return -(e * 0.6931471805599453 + 2 * series);
}

/* Bytes to the next point of a Poisson process of mean `mean` bytes: exponentially distributed,
 * at least 1. An allocation of n bytes that the countdown ends inside is sampled: with the
 * countdown drawn afresh from its end (the process is memoryless), P(sampled) = 1 - exp(-n / mean),
 * independently of every other allocation. */
static inline uint64_t sampling_countdown(uint64_t *state, uint64_t mean)
{
    double u = (double)((sampling_next(state) >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
    double bytes = sampling_neg_log(u) * (double)mean;
    return bytes < 1 ? 1 : bytes > 9.2e18 ? (uint64_t)9.2e18 : (uint64_t)bytes + 1;
}

/* 1 - exp(-x) for x >= 0, the probability that an allocation of x mean intervals is sampled:
 * exp(-x) = 2^-k exp(-r), r = x - k ln 2 in [0, ln 2), exp(-r) by its series (18 terms: exact to
 * 1e-16); the series of 1 - exp(-x) itself below 1e-3, where the subtraction would cancel. */
static inline double sampling_probability(double x)
{
    if (x <= 0)
        return 0;
    if (x < 1e-3)
        return x * (1 - x * (0.5 - x * (1.0 / 6 - x / 24)));
    if (x > 745)
        return 1;
    int k = (int)(x / 0.6931471805599453);
    double r = x - k * 0.6931471805599453;
    double term = 1, sum = 1;
    for (int i = 1; i <= 18; i++) {
        term *= -r / i;
        sum += term;
    }
    if (k > 1022)
        return 1;
    union {
        double d;
        uint64_t b;
    } scale = {.b = (uint64_t)(1023 - k) << 52}; /* 2^-k */
    return 1 - sum * scale.d;
}

/* A stack's hash: four independent lanes (the multiplications of one lane wait for each other: a
 * single chain cost about 5 cycles a frame), then a full 64-bit mix. Never 0 (0 marks an empty
 * slot). */
static inline uint64_t sampling_hash_frames(void *const *f, int n)
{
    uint64_t a = 0x9E3779B97F4A7C15ull ^ (uint64_t)n, b = 0xC2B2AE3D27D4EB4Full, c = 0x165667B19E3779F9ull,
             d = 0x27D4EB2F165667C5ull;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        a = (a ^ (uint64_t)(uintptr_t)f[i]) * 0xff51afd7ed558ccdull;
        b = (b ^ (uint64_t)(uintptr_t)f[i + 1]) * 0xc4ceb9fe1a85ec53ull;
        c = (c ^ (uint64_t)(uintptr_t)f[i + 2]) * 0xff51afd7ed558ccdull;
        d = (d ^ (uint64_t)(uintptr_t)f[i + 3]) * 0xc4ceb9fe1a85ec53ull;
    }
    for (; i < n; i++)
        a = (a ^ (uint64_t)(uintptr_t)f[i]) * 0xff51afd7ed558ccdull;
    uint64_t h = a ^ (b >> 7 | b << 57) ^ (c >> 19 | c << 45) ^ (d >> 31 | d << 33);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h | 1;
}

#endif
