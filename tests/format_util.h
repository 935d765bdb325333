/*
 * format_util.h - the file format as docs/FORMAT.md describes it, for the persistence
 * tests (test_persist, test_chunks, test_golden): field offsets, little-endian access,
 * the layout, and exact-size byte buffers. Written from the specification, independent
 * of src/persist.c, so that the tests check the library against the document.
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
