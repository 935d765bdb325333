/*
 * format_util.h - the file format as docs/FORMAT.md describes it, for the persistence
 * tests (test_persist, test_chunks, test_golden): field offsets, little-endian access,
 * the layout, and exact-size byte buffers. Written from the specification, independent
 * of src/image.c and src/window.c, so that the tests check the library against the
 * document.
 */
#ifndef CF_FORMAT_UTIL_H
#define CF_FORMAT_UTIL_H

#include "testutil.h"

enum {
    H_MAGIC = 0,
    H_VERSION = 8,
    H_HLEN = 10,
    H_FLAGS = 12,
    H_TOTAL = 16,
    H_SEED = 24,
    H_CAP = 32,
    H_F = 40,
    H_B = 41,
    H_HASH = 42,
    H_STASH = 43,
    H_KICKS = 44,
    H_WIDEN = 46,
    H_EXP = 48,
    H_MAXT = 52,
    H_NT = 56,
    H_RES2 = 60,
    HDR = 64,
    DESC = 32,
    ENTRY = 16,
    SUM = 8,
};

/* The n-byte little-endian value at p. */
static inline uint64_t rd(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline void wr(uint8_t *p, unsigned n, uint64_t v)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t align64(uint64_t x)
{
    return (x + 63) & ~(uint64_t)63;
}

/* meta_len as the header's counts say. */
/* Sub-filter k's fingerprint width, from the header b (FORMAT.md): the first's, plus
 * ceil(k * widening / 256) bits for a widening filter (flag bit 0), up to 32. */
static inline unsigned width_of(const uint8_t *b, unsigned k)
{
    unsigned f = b[H_F];
    uint64_t widen = (rd(b + H_FLAGS, 4) & 1u) ? rd(b + H_WIDEN, 2) : 0;
    uint64_t ext = (k * widen + 255) / 256;
    return ext < 32 - f ? f + (unsigned)ext : 32u;
}

/* Does the file keep its buckets semi-sorted (flag bit 1)? */
static inline bool semi_of(const uint8_t *b)
{
    return (rd(b + H_FLAGS, 4) & 2u) != 0;
}

/* Bits per bucket of sub-filter k: b * f_k, or 4 (f_k - 1) semi-sorted. */
static inline uint64_t bucket_bits_of(const uint8_t *b, unsigned k)
{
    unsigned f = width_of(b, k);
    return semi_of(b) ? 4u * (f - 1u) : (uint64_t)b[H_B] * f;
}

/* The n bits at bit `bit` of t, least significant first, read one by one. */
static inline uint64_t bits_at(const uint8_t *t, uint64_t bit, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++, bit++)
        v |= (uint64_t)((t[bit / 8] >> (bit % 8)) & 1u) << i;
    return v;
}

static inline uint64_t binom(unsigned n, unsigned k)
{
    uint64_t r = 1;
    for (unsigned i = 0; i < k; i++)
        r = r * (n - i) / (i + 1);
    return k > n ? 0 : r;
}

/* The b slots of bucket i of sub-filter k's table t, as FORMAT.md lays them out, into v
 * (room for 255); false if the bucket is invalid (semi-sorted: a code past 3875, or
 * values out of order). A semi-sorted bucket's code is decoded as FORMAT.md says, largest
 * prefix first. */
static inline bool bucket_slots(const uint8_t *b, unsigned k, const uint8_t *t, uint64_t i,
                                uint32_t *v)
{
    unsigned f = width_of(b, k), bs = b[H_B];
    uint64_t bit = i * bucket_bits_of(b, k);
    if (!semi_of(b)) {
        for (unsigned j = 0; j < bs; j++)
            v[j] = (uint32_t)bits_at(t, bit + (uint64_t)j * f, f);
        return true;
    }
    uint64_t c = bits_at(t, bit, 12);
    if (c >= binom(19, 4))
        return false;
    unsigned p[4];
    for (unsigned j = 4; j-- > 0;) { /* p_j: the largest q with C(q + j, j + 1) <= c */
        unsigned q = 0;
        while (q < 15 && binom(q + 1 + j, j + 1) <= c)
            q++;
        p[j] = q;
        c -= binom(q + j, j + 1);
    }
    for (unsigned j = 0; j < 4; j++)
        v[j] = p[j] << (f - 4) | (uint32_t)bits_at(t, bit + 12 + (uint64_t)j * (f - 4), f - 4);
    return v[0] <= v[1] && v[1] <= v[2] && v[2] <= v[3];
}

/* Write the n bits of v at bit `bit` of t, least significant first. */
static inline void bits_put(uint8_t *t, uint64_t bit, unsigned n, uint64_t v)
{
    for (unsigned i = 0; i < n; i++, bit++)
        t[bit / 8] = (uint8_t)((t[bit / 8] & ~(1u << (bit % 8))) | ((v >> i) & 1u) << (bit % 8));
}

/* Write v[0..b-1] into bucket i of sub-filter k's table t as FORMAT.md lays it out (a
 * semi-sorted bucket: v sorted first, then coded). */
static inline void bucket_put(const uint8_t *b, unsigned k, uint8_t *t, uint64_t i, uint32_t *v)
{
    unsigned f = width_of(b, k), bs = b[H_B];
    uint64_t bit = i * bucket_bits_of(b, k);
    if (!semi_of(b)) {
        for (unsigned j = 0; j < bs; j++)
            bits_put(t, bit + (uint64_t)j * f, f, v[j]);
        return;
    }
    for (unsigned j = 1; j < 4; j++) /* insertion sort of four */
        for (unsigned q = j; q > 0 && v[q - 1] > v[q]; q--) {
            uint32_t x = v[q];
            v[q] = v[q - 1];
            v[q - 1] = x;
        }
    uint64_t c = 0;
    for (unsigned j = 0; j < 4; j++)
        c += binom((v[j] >> (f - 4)) + j, j + 1);
    bits_put(t, bit, 12, c);
    for (unsigned j = 0; j < 4; j++)
        bits_put(t, bit + 12 + (uint64_t)j * (f - 4), f - 4, v[j] & ((1u << (f - 4)) - 1u));
}

/* In the file b (n bytes), give the first stored fingerprint of sub-filter k, which must
 * be wider than the first sub-filter's f bits, low f bits of 0 (its upper bits kept, or bit
 * f set if they are 0 too): a slot no writer makes (FORMAT.md, Tables) that changes no
 * count. The checksums are left for the caller. False if the table holds no fingerprint. */
static inline bool forge_low_bits_zero(uint8_t *b, size_t n, unsigned k)
{
    unsigned f = b[H_F];
    uint64_t m = rd(b + HDR + DESC * k, 8), off = rd(b + HDR + DESC * k + 16, 8);
    if (width_of(b, k) <= f || off >= n)
        return false;
    uint32_t v[255];
    for (uint64_t i = 0; i < m; i++) {
        bucket_slots(b, k, b + off, i, v);
        for (unsigned j = 0; j < (semi_of(b) ? 4u : b[H_B]); j++) {
            if (v[j] == 0)
                continue;
            v[j] &= ~((1u << f) - 1u);
            if (v[j] == 0)
                v[j] = 1u << f;
            bucket_put(b, k, b + off, i, v);
            return true;
        }
    }
    return false;
}

static inline uint64_t meta_len_of(const uint8_t *b)
{
    return HDR + DESC * rd(b + H_NT, 4) + ENTRY * (uint64_t)b[H_STASH] + SUM;
}

/* malloc that ends the test on failure (the tests' own buffers, not the library's). */
static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* A byte buffer with its exact length (heap-allocated with exactly n bytes, so that ASan
 * catches a reader going past the end). */
typedef struct buf {
    uint8_t *p;
    size_t n;
} buf;

static inline buf buf_copy(const uint8_t *p, size_t n)
{
    buf b = {xmalloc(n), n};
    if (n)
        memcpy(b.p, p, n);
    return b;
}

static inline bool buf_eq(buf a, buf b)
{
    return a.p && b.p && a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

static inline void buf_free(buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = 0;
}

/* cf_serialize into an exact-size buffer (p NULL on failure). */
static inline buf ser(const cf_filter *f)
{
    buf b = {NULL, 0};
    size_t n = cf_serialized_size(f);
    if (!CHECK(n > 0))
        return b;
    b = (buf){xmalloc(n), n};
    size_t written = 0;
    if (!CHECK_ST(cf_serialize(f, b.p, n, &written), CF_OK) || !CHECK_EQ_U(written, n))
        buf_free(&b);
    return b;
}

#endif /* CF_FORMAT_UTIL_H */
