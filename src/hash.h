/*
 * hash.h - the hashes of keys, below everything else in the library: XXH3-64 with a seed
 * (the library's own layout), written out for 8- and 16-byte keys and out of line for any
 * length; multiply-shift for 8-byte keys (CF_FAST_HASH); and MurmurHash64A (RedisBloom's
 * layout). The filter's choice between them is its kind's and its flags' (cf__hash_key,
 * internal.h; redisbloom.c; fast.c's keyed calls).
 */
#ifndef CF_HASH_H
#define CF_HASH_H

#include "bits.h"

/* XXH3-64 with a seed (xxHash 0.8), for the two key lengths that are most common (integer
 * ids, UUIDs and hash digests), written from XXH3's specification: for these lengths it
 * is a few operations on the key and words derived from the seed. With the length a
 * constant, an 8-byte key hashes in a fraction of the general XXH3 call's instructions
 * (bench/icount.sh, the keyed calls; docs/PERFORMANCE.md, "Tuned constants").
 * tests/test_internal.c holds both to XXH3_64bits_withSeed. */
#define CF__XXH3_MX 0x9FB21C651E98DF25u /* XXH3's rrmxmx multiplier (4 to 8 bytes) */
#define CF__XXH3_AV 0x165667919E3779F9u /* XXH3's avalanche multiplier (9 to 16 bytes) */

/* Words of XXH3's default secret, xored in pairs as its specification says for 8- and
 * 16-byte keys (little-endian bytes 8..15 ^ 16..23, 24..31 ^ 32..39, 40..47 ^ 48..55). */
#define CF__XXH3_S8    UINT64_C(0xc73ab174c5ecd5a2)
#define CF__XXH3_S16LO UINT64_C(0x6782737bea4239b9)
#define CF__XXH3_S16HI UINT64_C(0xaf56bc3b0996523a)

/* x with its low half's bytes, reversed, xored into its high half: the form the seed takes
 * in the 8-byte case. Its own inverse (the low half does not change). */
static inline uint64_t cf__seed_swap(uint64_t x)
{
    return x ^ (cf__bswap64(x) & ~(uint64_t)UINT32_MAX);
}

/* The 8-byte case's bitflip for seed. A filter keeps it in place of the seed, which it
 * gives back exactly (cf__seed_of): the 8-byte hash, the hottest, then reads one word. */
static inline uint64_t cf__k8_of(uint64_t seed)
{
    return CF__XXH3_S8 - cf__seed_swap(seed);
}

static inline uint64_t cf__seed_of(uint64_t k8)
{
    return cf__seed_swap(CF__XXH3_S8 - k8);
}

/* XXH3 of the 8 bytes at p for the seed of bitflip k8: its 4-to-8-byte case, where the
 * input word is the key's two little-endian halves swapped, xored with the bitflip and
 * mixed by rrmxmx. */
static inline uint64_t cf__xxh3_8(const void *p, uint64_t k8)
{
    uint64_t x = cf__rotl64(cf__load_le64((const uint8_t *)p), 32) ^ k8;
    x ^= cf__rotl64(x, 49) ^ cf__rotl64(x, 24);
    x *= CF__XXH3_MX;
    x ^= (x >> 35) + 8u;
    x *= CF__XXH3_MX;
    return x ^ (x >> 28);
}

/* XXH3 of the 16 bytes at p for the seed of bitflip k8: its 9-to-16-byte case (the
 * 128-bit product folded by xor). */
static inline uint64_t cf__xxh3_16(const void *p, uint64_t k8)
{
    uint64_t seed = cf__seed_of(k8);
    uint64_t lo = cf__load_le64((const uint8_t *)p) ^ (CF__XXH3_S16LO + seed);
    uint64_t hi = cf__load_le64((const uint8_t *)p + 8) ^ (CF__XXH3_S16HI - seed);
    uint64_t acc = 16u + cf__bswap64(lo) + hi + ((lo * hi) ^ cf__mulhi(lo, hi));
    acc ^= acc >> 37;
    acc *= CF__XXH3_AV;
    return acc ^ (acc >> 32);
}

/* Hash id 3 (CF_FAST_HASH): for 8-byte keys, strongly universal multiply-shift with
 * 128-bit words (Dietzfelbinger's multiply-add-shift), g = ((a * k + b) mod 2^128) >> 64,
 * k the key as a little-endian u64, then a fixed xorshift-multiply: h = (g ^ g >> 31) * M.
 * - For a and b drawn at random, the g of any two distinct keys are independent and
 *   uniform over 64 bits, and h is a bijection of g, so the same holds for h: every set of
 *   h's bits collides with the probability of chance for keys chosen without the seed.
 *   That is what the seed's secrecy protects. The paper authors' filter and fastfilter_cpp
 *   hash integer keys with the same family.
 * - The xorshift-multiply is for keys that are not random: g alone maps an arithmetic
 *   progression of keys (ids with a stride) to one of hashes, and such sets then filled a
 *   filter to lower loads than random keys do (test_full holds them to random keys' loads).
 * - Its cost: a multiply-high, two multiplies, a few additions and a shift, where XXH3's
 *   8-byte case takes two dependent multiplies among a dozen steps.
 * a and b come from the seed (cf__ms_words); other lengths keep XXH3 with the seed. */
#define CF__MS_FIN_SHIFT 31u                          /* g's high bits into its low ones */
#define CF__MS_FIN_MULT  UINT64_C(0x9fb21c651e98df25) /* odd: the multiply is a bijection */

typedef struct cf__ms {
    uint64_t a_lo, a_hi, b_lo, b_hi;
} cf__ms;

static inline uint64_t cf__ms8(const void *p, const cf__ms *w)
{
    uint64_t k = cf__load_le64((const uint8_t *)p);
#if CF__HAVE_U128
    cf__u128 b = (cf__u128)w->b_hi << 64 | w->b_lo;
    uint64_t g = (uint64_t)(((cf__u128)w->a_lo * k + b) >> 64) + w->a_hi * k;
#else
    uint64_t lo = w->a_lo * k, sum = lo + w->b_lo;
    uint64_t g = cf__mulhi(w->a_lo, k) + w->a_hi * k + w->b_hi + (sum < lo);
#endif
    return (g ^ g >> CF__MS_FIN_SHIFT) * CF__MS_FIN_MULT;
}

/* Hash id 3's a (a_hi:a_lo) and b (b_hi:b_lo) for seed: XXH3-64 with the seed of the
 * 8-byte little-endian integers 1, 2, 3 and 4, in that order (docs/FORMAT.md). */
CF__HIDDEN void cf__ms_words(uint64_t seed, cf__ms *out);

/* XXH3-64 of the len bytes at key with seed (any length). */
CF__HIDDEN uint64_t cf__hash_any(uint64_t seed, const void *key, size_t len);

/* MurmurHash64A (64-bit MurmurHash2) of the key; with seed 0, RedisBloom's hash. */
CF__HIDDEN uint64_t cf__murmur64a(const void *key, size_t len, uint64_t seed);

#endif /* CF_HASH_H */
