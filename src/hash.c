/*
 * hash.c - the hashes of keys of any length (hash.h).
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hash.h"

/* MurmurHash64A's multiplier and shift (Austin Appleby's published constants). */
#define CF__MURMUR_M UINT64_C(0xc6a4a7935bd1e995)
#define CF__MURMUR_R 47u

uint64_t cf__hash_any(uint64_t seed, const void *key, size_t len)
{
    return XXH3_64bits_withSeed(key, len, seed);
}

void cf__ms_words(uint64_t seed, cf__ms *out)
{
    uint64_t w[4];
    for (unsigned i = 0; i < 4; i++) {
        uint8_t le[8];
        cf__store_le64(le, i + 1u);
        w[i] = XXH3_64bits_withSeed(le, sizeof le, seed);
    }
    *out = (cf__ms){w[0], w[1], w[2], w[3]};
}

uint64_t cf__murmur64a(const void *key, size_t len, uint64_t seed)
{
    const uint8_t *p = (const uint8_t *)key;
    uint64_t h = seed ^ (uint64_t)len * CF__MURMUR_M;
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t k = cf__load_le64(p) * CF__MURMUR_M;
        k ^= k >> CF__MURMUR_R;
        h = (h ^ k * CF__MURMUR_M) * CF__MURMUR_M;
    }
    if (len > 0) { /* the last 1 to 7 bytes, little-endian, then one multiply */
        uint64_t tail = 0;
        for (size_t i = len; i-- > 0;)
            tail = tail << 8 | p[i];
        h = (h ^ tail) * CF__MURMUR_M;
    }
    h ^= h >> CF__MURMUR_R;
    h *= CF__MURMUR_M;
    return h ^ (h >> CF__MURMUR_R);
}
