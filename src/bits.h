/*
 * bits.h - the library's portable primitives: compiler hints, bit counts, the one
 * little-endian codec (tables and files alike are little-endian on every host, so that a
 * file written on one machine reads the same on another), overflow-checked arithmetic,
 * multiply-high and division by an invariant. Nothing here knows about filters.
 */
#ifndef CF_BITS_H
#define CF_BITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define CF__HIDDEN          __attribute__((visibility("hidden")))
#define CF__LIKELY(x)       __builtin_expect(!!(x), 1)
#define CF__UNLIKELY(x)     __builtin_expect(!!(x), 0)
#define CF__INLINE          inline __attribute__((always_inline))
#define CF__NOINLINE        __attribute__((noinline))
#define CF__PREFETCH(p, rw) __builtin_prefetch((p), (rw), 3)
#else
#define CF__HIDDEN
#define CF__LIKELY(x)   (x)
#define CF__UNLIKELY(x) (x)
#define CF__INLINE      inline
#define CF__NOINLINE
#define CF__PREFETCH(p, rw) ((void)(p))
#endif

#if defined(__SIZEOF_INT128__)
#define CF__HAVE_U128 1
__extension__ typedef unsigned __int128 cf__u128;
#else
#define CF__HAVE_U128 0
#endif

/* ------------------------------------------------------------------------------------ */
/* Portable bit tricks                                                                  */
/* ------------------------------------------------------------------------------------ */

static inline unsigned cf__ctz64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(x);
#else
    unsigned n = 0;
    while (!(x & 1u)) {
        x >>= 1;
        n++;
    }
    return n;
#endif
}

/* Leading zeros of x != 0. */
static inline unsigned cf__clz64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_clzll(x);
#else
    unsigned n = 0;
    while (!(x & (UINT64_C(1) << 63))) {
        x <<= 1;
        n++;
    }
    return n;
#endif
}

/* Set bits of x, which every caller has few of (a bucket's matching lanes): x86-64 code
 * built for processors without the popcount instruction would call the compiler's
 * general routine, where a loop over the few bits is shorter. */
static inline unsigned cf__popcount64(uint64_t x)
{
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__POPCNT__) || !defined(__x86_64__))
    return (unsigned)__builtin_popcountll(x);
#else
    unsigned n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
#endif
}

static inline uint64_t cf__load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t cf__load_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint16_t cf__load_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline void cf__store_le32(uint8_t *p, uint32_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    memcpy(p, &v, sizeof v);
}

static inline void cf__store_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void cf__store_le64(uint8_t *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, sizeof v);
}

/* a * b, or false if it does not fit in 64 bits. */
static inline bool cf__mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

static inline uint64_t cf__rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64u - r));
}

static inline uint64_t cf__bswap64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_bswap64(x);
#else
    x = (x >> 32) | (x << 32);
    x = ((x & UINT64_C(0xffff0000ffff0000)) >> 16) | ((x & UINT64_C(0x0000ffff0000ffff)) << 16);
    return ((x & UINT64_C(0xff00ff00ff00ff00)) >> 8) | ((x & UINT64_C(0x00ff00ff00ff00ff)) << 8);
#endif
}

/* The value of x, hidden from the optimiser: a multiply by a constant that it would
 * otherwise unfold into a chain of 4 to 6 shifts and adds stays one multiply. */
static CF__INLINE uint64_t cf__opaque(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    __asm__("" : "+r"(x));
#endif
    return x;
}

/* ------------------------------------------------------------------------------------ */
/* Multiply-high, and exact division without a hardware divide                           */
/* ------------------------------------------------------------------------------------ */

/* The high 64 bits of a * b: floor(a * b / 2^64), which maps a 64-bit fraction a / 2^64
 * onto [0, b) with one multiply (Lemire's "fast alternative to the modulo reduction"). */
static inline uint64_t cf__mulhi(uint64_t a, uint64_t b)
{
#if defined(__BMI2__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    /* mulx writes any two registers; gcc 12 emits mul for the 128-bit product instead,
     * which pins rdx:rax and costs a move before and after each of a lookup's two. */
    uint64_t hi, lo;
    __asm__("mulx %[b], %[lo], %[hi]" : [hi] "=r"(hi), [lo] "=r"(lo) : [b] "rm"(b), "d"(a));
    (void)lo;
    return hi;
#elif CF__HAVE_U128
    return (uint64_t)(((cf__u128)a * b) >> 64);
#else
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t mid = (a0 * b0 >> 32) + (uint32_t)(a1 * b0) + (uint32_t)(a0 * b1);
    return a1 * b1 + (a1 * b0 >> 32) + (a0 * b1 >> 32) + (mid >> 32);
#endif
}

/* The 64 bits of hi:lo from bit (sh mod 64) on: x86's shrd, which takes its count mod 64
 * itself (so a caller need not mask it). gcc 12 proves a masked count below 64 in some
 * inlined callers and not in others, and there emits the 128-bit shift's general form (a
 * test, a second shift and a cmov more) for the bucket reads of deletes and adds. */
static inline uint64_t cf__shr128(uint64_t lo, uint64_t hi, unsigned sh)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __asm__("shrdq %%cl, %[hi], %[lo]" : [lo] "+r"(lo) : [hi] "r"(hi), "c"(sh) : "cc");
    return lo;
#elif CF__HAVE_U128
    return (uint64_t)((((cf__u128)hi << 64) | lo) >> (sh & 63u));
#else
    /* hi << (64 - sh) in two steps, so that sh = 0 shifts it out rather than by 64 */
    sh &= 63u;
    return (lo >> sh) | ((hi << 1) << (63u - sh));
#endif
}

/* The bits that x << (sh mod 64) shifts past bit 63: the high word of the 128-bit shift.
 * x86's shld into a zero word, two instructions where the portable form takes five. */
static inline uint64_t cf__shl_out(uint64_t x, unsigned sh)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    uint64_t hi = 0;
    __asm__("shldq %%cl, %[x], %[hi]" : [hi] "+r"(hi) : [x] "r"(x), "c"(sh) : "cc");
    return hi;
#else
    /* x >> (64 - sh) in two steps, so that sh = 0 shifts it all out rather than by 64 */
    sh &= 63u;
    return (x >> 1) >> (63u - sh);
#endif
}

/* A 64-bit divide costs 15 to 90 cycles depending on the CPU; dividing a bucket number by
 * a sub-filter's scale (an eviction in a grown filter) is two multiplies instead.
 *
 * For a divisor d >= 2, let L = ceil(log2 d) and M = ceil(2^(63 + L) / d). Then for every
 * a < 2^63, floor(a / d) = floor(a * M / 2^(63 + L)), which is the high word of the
 * 128-bit product a * M shifted right by L - 1. Proof: M = (2^(63+L) + e) / d with
 * 0 <= e < d, so a M / 2^(63+L) = a / d + a e / (d 2^(63+L)), and the error term is below
 * 2^63 / 2^(63+L) = 2^-L <= 1/d; a / d = q + r/d with r <= d - 1, so the sum stays below
 * q + 1. And M fits 64 bits: d > 2^(L-1) gives M <= 2^64 - 1 (and d = 2^L gives 2^63).
 * This is the method of Granlund and Montgomery, "Division by invariant integers using
 * multiplication" (1994), with the precision chosen so that no correction step is needed. */
typedef struct cf__divisor {
    uint64_t magic; /* M = ceil(2^(63 + L) / d); without 128-bit arithmetic, d itself */
    unsigned shift; /* L - 1 */
} cf__divisor;

static inline void cf__divisor_init(cf__divisor *dv, uint64_t d)
{
    dv->magic = d;
    dv->shift = 0;
#if CF__HAVE_U128
    unsigned L = 64u - cf__clz64(d - 1); /* ceil(log2 d), d >= 2 */
    /* ceil(2^(63+L) / d) = floor((2^(63+L) - 1) / d) + 1; 63 + L <= 127. */
    cf__u128 top = ((cf__u128)1 << (63u + L)) - 1;
    dv->magic = (uint64_t)(top / d + 1);
    dv->shift = L - 1;
#endif
}

/* floor(a / d), for a < 2^63 (bucket numbers: at most 58 bits). */
static inline uint64_t cf__div63(uint64_t a, const cf__divisor *dv)
{
#if CF__HAVE_U128
    return cf__mulhi(a, dv->magic) >> dv->shift;
#else
    return a / dv->magic;
#endif
}

#endif /* CF_BITS_H */
