/*
 * concurrent.h - what the lookups of concurrent filters (CF_CONCURRENT) share between
 * concurrent.c, which has the rest and the argument for their memory ordering, and the
 * fixed-shape lookups of fast.c: the shared state, the stripe counters and the reads of a
 * table through aligned atomic words.
 */
#ifndef CF_CONCURRENT_H
#define CF_CONCURRENT_H

#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* Buckets per stripe: a reader beside a writer retries only when the writer moves a
 * fingerprint in one of the 2 x 256 buckets around its own two, and the counters cost 4
 * bytes per 256 buckets (0.26 % of a table of 6-byte buckets). 4096 measured no faster. */
#define CF__CC_STRIPE_SHIFT   8u
#define CF__CC_STRIPE_BUCKETS (UINT64_C(1) << CF__CC_STRIPE_SHIFT)

/* The low bits of two counters held in one 64-bit value: either odd is a section open. */
#define CF__CC_ODD_PAIR UINT64_C(0x100000001)

/* Sub-filter arrays growth may replace: the array doubles from 2 entries up to
 * CF_MAX_SUB_FILTERS = 2^16, 16 times. */
#define CF__CC_MAX_RETIRED 16u

/* Bytes after a table's stripe counters: the second aligned word cf__cc_word_at loads
 * for the last bucket may reach past the counters. */
#define CF__CC_TAIL_PAD 8u

/* The bits of `meta` below its count of writers' sections: a section in progress, and a
 * filter not in the simple state (more than one sub-filter, or a stash entry), which the
 * section's end writes. A reader of the simple state checks both with one load. */
#define CF__CC_META_BUSY       1u
#define CF__CC_META_NOT_SIMPLE 3u /* busy, or bit 1: not simple */
#define CF__CC_META_STEP       4u

/* The block that holds what lookups read, and no byte any write changes: a lookup beside a
 * writer that shared a cache line with the writer's lock, or with anything else a write
 * changes, would miss the cache on it on every call. Two 64-byte lines, as some
 * processors fetch lines in pairs; the shared state starts at such a boundary (its
 * allocation has the room to align it), and the lock starts at the next. */
#define CF__CC_ISOLATE 128u

struct cf__cc {
    /* What a lookup of the simple state reads besides its buckets: `meta` (see
     * CF__CC_META_*), which only the stash and growth change, and copies of the first
     * sub-filter's data, size and shape, which never change (its entry in the sub-filter
     * array holds its item count, which every write changes). */
    atomic_uint meta;
    atomic_uint *stripes0;
    uint8_t *data0;
    uint64_t buckets0;
    const cf__shape *shape0;
    /* The writers' lock: a mutex, which puts a waiting writer to sleep (a spin lock that
     * hands the lock on in turn stalls whenever the next in line is not running, as with
     * more threads than cores). Every write changes it; no lookup reads it. */
    _Alignas(CF__CC_ISOLATE) pthread_mutex_t lock;
    /* Written by growth only. */
    void *retired[CF__CC_MAX_RETIRED];
    unsigned nretired;
    void *block; /* the allocation this struct was aligned in */
};

_Static_assert(offsetof(struct cf__cc, lock) == CF__CC_ISOLATE,
               "the lock starts the line after the lookups' own");

static inline struct cf__cc *cf__cc_of(const cf_filter *f)
{
    return f->more->cc;
}

static inline uint64_t cf__cc_stripes_n(uint64_t buckets)
{
    return (buckets + CF__CC_STRIPE_BUCKETS - 1) >> CF__CC_STRIPE_SHIFT;
}

/* The stripe counters start at the table's size rounded up to 8 bytes: the last aligned
 * word a reader loads for the table's padding ends there. */
static inline size_t cf__cc_stripes_at(const cf__shape *s, uint64_t buckets)
{
    size_t size = cf__table_size(s, buckets);
    return size + (8u - size % 8u) % 8u;
}

static inline atomic_uint *cf__cc_stripe(const cf__table *t, uint64_t bucket)
{
    atomic_uint *c = (atomic_uint *)(void *)(t->data + cf__cc_stripes_at(t->shape, t->buckets));
    return &c[bucket >> CF__CC_STRIPE_SHIFT];
}

static inline _Atomic uint64_t *cf__cc_words(const cf__table *t)
{
    return (_Atomic uint64_t *)(void *)t->data;
}

/* A writer's section under sequence counter c: odd, then the writes, then even. */
static inline void cf__seq_begin(atomic_uint *c)
{
    unsigned v = atomic_load_explicit(c, memory_order_relaxed);
    atomic_store_explicit(c, v + 1u, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static inline void cf__seq_end(atomic_uint *c)
{
    unsigned v = atomic_load_explicit(c, memory_order_relaxed);
    atomic_store_explicit(c, v + 1u, memory_order_release);
}

/* A reader's check after reading under c: unchanged since `seen`, and even. */
static inline bool cf__seq_same(atomic_uint *c, unsigned seen)
{
    atomic_thread_fence(memory_order_acquire);
    return !(seen & 1u) && atomic_load_explicit(c, memory_order_relaxed) == seen;
}

/* The 8 bytes of t from byte `at` on, as cf__load_le64 would read them, through the two
 * aligned words that hold them (relaxed atomic loads), with no branch. Every table of a
 * concurrent filter is followed by its stripe counters and CF__CC_TAIL_PAD bytes, so the
 * second word is always inside its block. */
static inline uint64_t cf__cc_word_at(const cf__table *t, uint64_t at)
{
    _Atomic uint64_t *w = cf__cc_words(t) + (at >> 3);
    uint64_t lo = atomic_load_explicit(&w[0], memory_order_relaxed);
    uint64_t hi = atomic_load_explicit(&w[1], memory_order_relaxed);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    lo = __builtin_bswap64(lo);
    hi = __builtin_bswap64(hi);
#endif
    unsigned sh = (unsigned)(at & 7u) * 8u;
#if defined(__SIZEOF_INT128__)
    /* one double shift (x86's shrd) */
    return (uint64_t)((((cf__u128)hi << 64) | lo) >> sh);
#else
    /* hi << (64 - sh) in two steps, so that sh = 0 shifts it out rather than by 64 */
    return (lo >> sh) | ((hi << 1) << (63u - sh));
#endif
}

/* Bucket i of a fast shape of `bytes`-byte buckets in the low bits; the bits above it,
 * which the match ignores, are the next buckets' or zero. A bucket of 2, 4 or 8 bytes
 * never straddles two aligned words: it is read with one load. */
static inline uint64_t cf__cc_fast_word(const cf__table *t, uint64_t i, unsigned bytes)
{
    if (8u % bytes != 0)
        return cf__cc_word_at(t, i * bytes);
    /* by the bucket's index, not its byte (i * bytes / 8): no multiply and shift back */
    const unsigned per = 8u / bytes;
    uint64_t w = atomic_load_explicit(cf__cc_words(t) + i / per, memory_order_relaxed);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w >> ((unsigned)(i % per) * bytes * 8u);
}

/* The bucket that starts at bit `bit` of t (bucket * bucket_bits), for a shape whose
 * bucket fits the 8 bytes from its first byte (mask: its bucket_mask, nonzero), read
 * through aligned atomic words: cf__bucket_word for tables that writers change meanwhile.
 * A caller of two buckets computes both positions first, then reads them. */
static inline uint64_t cf__cc_bucket_word(const cf__table *t, uint64_t bit, uint64_t mask)
{
    return (cf__cc_word_at(t, bit >> 3) >> (bit & 7u)) & mask;
}

#endif /* CF_CONCURRENT_H */
