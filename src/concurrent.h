/*
 * concurrent.h - what the lookups of concurrent filters (CF_CONCURRENT) share between
 * concurrent.c, which has the rest, and the fixed-shape lookups of fast.c: the shared
 * state. The tables' own synchronization (stripe counters, reads through aligned atomic
 * words) is a mode of the table layer: table.h, "Synchronized tables".
 */
#ifndef CF_CONCURRENT_H
#define CF_CONCURRENT_H

#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* Sub-filter arrays growth may replace: the array doubles from 2 entries up to
 * CF_MAX_SUB_FILTERS = 2^16, 16 times. */
#define CF__CC_MAX_RETIRED 16u

/* The bits of `meta` below its count of writers' sections: a section in progress, and a
 * filter not in the simple state (more than one sub-filter, or a stash entry), which the
 * section's end writes. A reader of the simple state checks both with one load. Bit 2 is
 * set once, by cf__cc_ready, for a filter whose writers all take the lock (no cc->par): a
 * writer of stripes then checks everything it needs with that one load too. */
#define CF__CC_META_BUSY       1u
#define CF__CC_META_NOT_SIMPLE 3u /* busy, or bit 1: not simple */
#define CF__CC_META_NOT_PAR    4u
#define CF__CC_META_STEP       8u
/* Any state but the one writers of stripes write: while it holds, every stripe is held
 * (concurrent.c, cf__cc_settle), and a writer waiting for one gives up. */
#define CF__CC_META_SHUT       (CF__CC_META_NOT_SIMPLE | CF__CC_META_NOT_PAR)

/* The block that holds what lookups read, and no byte any write changes: a lookup beside a
 * writer that shared a cache line with the writer's lock, or with anything else a write
 * changes, would miss the cache on it on every call. Two 64-byte lines, as some
 * processors fetch lines in pairs; the shared state starts at such a boundary (its
 * allocation has the room to align it), and the lock starts at the next. */
#define CF__CC_ISOLATE 128u

/* Planning searches' memory a concurrent filter keeps (cf__cc_evict): a plan then
 * searches with its whole budget at once and clears its visited set by generation, as
 * cf__evict's own memory does, instead of starting small and over, clearing a set each
 * time. One per CF__CC_PLAN_TABLE bytes of the first sub-filter (16 KiB each: 1.6 % of
 * that), up to CF__CC_PLANS, for as many writers evicting at once; a writer that finds
 * each busy plans on its stack. */
#define CF__CC_PLANS      4u
#define CF__CC_PLAN_TABLE ((size_t)1 << 20)

#define CF__CC_PLAN_MARK_BITS 10u /* log2 of the marks: twice the nodes */
_Static_assert((1u << CF__CC_PLAN_MARK_BITS) == 2u * CF__PLAN_NODES,
               "a plan's visited set has twice its nodes' entries");

/* Stack addresses of threads fall in distinct runs of this size (glibc's default stack
 * is 8 MiB): what a thread picks its planning memory and its fills' counter by. */
#define CF__STACK_SHIFT 23u

/* Counters of the fills without a stripe (table.h, "Fills of free slots without the
 * stripe"), each on lines of its own (CF__CC_ISOLATE): a thread writes the one its stack
 * picks (cf__cc_fills_of), so that two writers rarely share one and never a line. 16: a
 * writer per core of common machines, 2 KiB a filter. */
#define CF__CC_FILL_SLOTS 16u

/* A counter's word: its writers under way in the low CF__CC_FILL_BUSY_BITS bits (each
 * thread one at most: 2^16 threads), above them the items they put in since the lock's
 * holder last took them in (cf__cc_close), modulo 2^48. */
#define CF__CC_FILL_BUSY_BITS 16u
#define CF__CC_FILL_BUSY      ((UINT64_C(1) << CF__CC_FILL_BUSY_BITS) - 1u)
#define CF__CC_FILL_ITEM      (UINT64_C(1) << CF__CC_FILL_BUSY_BITS)

typedef struct cf__cc_fills {
    _Alignas(CF__CC_ISOLATE) _Atomic uint64_t word;
} cf__cc_fills;

typedef struct cf__cc_plan {
    _Alignas(64) atomic_uint busy; /* taken by a writer (exchange, acquire) */
    cf__search z;
    cf__node queue[CF__PLAN_NODES];
    cf__mark marks[1u << CF__CC_PLAN_MARK_BITS];
} cf__cc_plan;

struct cf__cc {
    /* What a lookup of the simple state reads besides its buckets: `meta` (see
     * CF__CC_META_*), which only the stash and growth change, and copies of the first
     * sub-filter's data, stripe counters, size and shape, which never change (its entry in the
     * sub-filter array holds its item count, which every write changes). */
    atomic_uint meta;
    atomic_uint *stripes0; /* cf__sync_stripe of the first sub-filter's bucket 0 */
    atomic_uint *locks0;   /* and its cf__sync_locks, which only writers touch */
    uint8_t *data0;
    uint64_t buckets0;
    const cf__shape *shape0;
    /* Writers may share the first sub-filter, each holding the stripes it writes
     * (locked.c): a shape the planning search reads through atomic words (cf__plan), in
     * the library's own layout. Else every writer takes the lock. */
    bool par;
    enum cf__code code0; /* cf__code_of(shape0), which an eviction's commit dispatches on */
    unsigned nplans;     /* planning memory, in this struct's block */
    cf__cc_plan *plans;
    /* The writers' lock: a mutex, which puts a waiting writer to sleep (a spin lock that
     * hands the lock on in turn stalls whenever the next in line is not running, as with
     * more threads than cores). Every write changes it; no lookup reads it. */
    _Alignas(CF__CC_ISOLATE) pthread_mutex_t lock;
    bool locked; /* the lock is held */
    /* Written by growth only. */
    void *retired[CF__CC_MAX_RETIRED];
    unsigned nretired;
    void *block; /* the allocation this struct was aligned in */
    /* Nonzero while every stripe of the first sub-filter is held: by the lock's holder, or
     * between holders by a state writers of stripes may not write. Fills without a stripe
     * wait for none then, and take the stripes' way instead. On a line of its own, which
     * every such fill reads and only the lock's holder writes. */
    _Alignas(CF__CC_ISOLATE) atomic_uint closed;
    cf__cc_fills fills[CF__CC_FILL_SLOTS];
};

_Static_assert(offsetof(struct cf__cc, lock) == CF__CC_ISOLATE,
               "the lock starts the line after the lookups' own");

static inline struct cf__cc *cf__cc_of(const cf_filter *f)
{
    return f->more->cc;
}

/* The first sub-filter as a lookup or a writer of stripes reads it: from the copies in
 * the shared state (its item count is the lock's holder's). */
static inline cf__table cf__cc_table0(const struct cf__cc *cc)
{
    return (cf__table){.data = cc->data0, .buckets = cc->buckets0, .shape = cc->shape0};
}

/* Is the filter in the state writers of stripes may write? A writer that holds a stripe
 * need not ask: in any other state every stripe is held (cf__cc_settle), and a change of
 * state is made under every stripe. */
static inline bool cf__cc_par(const struct cf__cc *cc)
{
    unsigned m = atomic_load_explicit((atomic_uint *)(uintptr_t)&cc->meta, memory_order_acquire);
    return !(m & CF__CC_META_SHUT);
}

/* Stripe `stripe` of the first sub-filter taken, waiting; false, not taken, if the filter
 * is (or goes) into a state writers of stripes may not write. */
static inline bool cf__cc_stripe_lock(const struct cf__cc *cc, uint64_t stripe)
{
    return cf__sync_lock_unless(cc->locks0, stripe, &cc->meta, CF__CC_META_SHUT);
}

/* The counter of the fills of the calling thread, picked by its stack's address. */
static inline _Atomic uint64_t *cf__cc_fills_of(struct cf__cc *cc)
{
    uintptr_t here = (uintptr_t)&cc;
    return &cc->fills[(here >> CF__STACK_SHIFT) % CF__CC_FILL_SLOTS].word;
}

/* A run of fills without a stripe begun on counter c: false, with none begun, if every
 * stripe is held. A sequentially consistent add, then load, against cf__cc_close's store
 * and loads: either the closer sees the run under way and waits for its end, or the run
 * sees the closer's mark. */
static inline bool cf__cc_fills_begin(const struct cf__cc *cc, _Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1u, memory_order_seq_cst);
    if (!atomic_load_explicit((atomic_uint *)(uintptr_t)&cc->closed, memory_order_seq_cst))
        return true;
    atomic_fetch_sub_explicit(c, 1u, memory_order_relaxed);
    return false;
}

/* Should a run of fills end now, for a lock's holder waiting? */
static inline bool cf__cc_fills_stop(const struct cf__cc *cc)
{
    return atomic_load_explicit((atomic_uint *)(uintptr_t)&cc->closed, memory_order_relaxed) != 0;
}

/* The run on counter c ended, `items` put in: one add for both, releasing its fills to
 * the holder that waits for the run's end. */
static inline void cf__cc_fills_end(_Atomic uint64_t *c, uint64_t items)
{
    atomic_fetch_add_explicit(c, items * CF__CC_FILL_ITEM - 1u, memory_order_release);
}

/* The writers of concurrent filters. fast.c has the writers of stripes for each shape:
 * an add's puts and a delete, under their stripes (cf__cc_each_fb, and
 * cf__sync_pair_remove_fb under both). locked.c has the rest: an eviction beside other writers
 * (cf__cc_evict: true if made, its item counted; false if the add needs the lock; the
 * stripes `held`, nh of them, are the caller's; `wait`: it may wait for a busy stripe,
 * as one that holds none or is in no run of fills may), and the writes under the lock. */
CF__HIDDEN bool cf__cc_evict(const cf_filter *f, cf__table *t, const uint64_t pair[2], uint32_t fp,
                             const uint64_t *held, unsigned nh, bool wait);
CF__HIDDEN cf_status cf__cc_add_locked(cf_filter *f, uint64_t h, bool unique);
/* The rest of an add whose buckets i1 and i2 were full: cf__cc_evict, else the lock. */
CF__HIDDEN cf_status cf__cc_add_full(cf_filter *f, uint64_t h, uint32_t fp, uint64_t i1,
                                     uint64_t i2);
CF__HIDDEN cf_status cf__cc_del_locked(cf_filter *f, uint64_t h);

#endif /* CF_CONCURRENT_H */
