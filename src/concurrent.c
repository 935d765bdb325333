/*
 * concurrent.c - filters made with CF_CONCURRENT: lookups from any number of threads that
 * never block and never miss a key, beside writers of stripes and the filter's lock.
 *
 * Three layers. The tables' own synchronization is a mode of the table layer (table.h,
 * "Synchronized tables": stripe counters, reads and writes through aligned atomic words,
 * and why a reader that found nothing while the counter of its pair was still saw every
 * fingerprint of its two buckets that could answer it). This file has what lies above the
 * tables: the shared state, the writers' lock, `meta`, and the lookups of every state.
 * The writers (fast.c's of stripes, locked.c's under the lock around slow.c's insert
 * and delete) write through the table layer; head.c marks each change of state
 * (cf__state_begin, cf__state_end).
 *
 * A key moves only between its own two buckets (an eviction), and a path of moves is made
 * from its free end back (evict.c, cf__apply_path), so every fingerprint is in one of its
 * buckets at every instant. What lies outside the tables (the sub-filter count and array,
 * the stash) has one more sequence counter, `meta`, which a reader checks once it has
 * found nothing anywhere.
 *
 * Memory a reader may hold is not freed while the filter lives: a sub-filter array that
 * growth replaces is kept (cf__cc_retire), the stash keeps its memory, tables are freed
 * only by cf_compact and cf_free, which need exclusive access. A new sub-filter is filled
 * and its entry written before the count that makes readers see it is stored (release).
 */
#include "concurrent.h"

#include <sched.h>

/* ------------------------------------------------------------------------------------ */
/* Shared state, lock                                                                   */
/* ------------------------------------------------------------------------------------ */

/* The planning memories of a filter whose first sub-filter has `buckets` of shape s. */
static unsigned cf__cc_nplans(const cf__shape *s, uint64_t buckets)
{
    size_t n = cf__table_size(s, buckets) / CF__CC_PLAN_TABLE;
    return n < CF__CC_PLANS ? (unsigned)n : CF__CC_PLANS;
}

/* The shared state's block: the struct, aligned (one of its lines is the lookups' own),
 * then its planning memories. */
static size_t cf__cc_block_bytes(unsigned nplans)
{
    return sizeof(struct cf__cc) + CF__CC_ISOLATE - 1u + nplans * sizeof(cf__cc_plan);
}

struct cf__cc *cf__cc_new(cf_filter *f)
{
    unsigned nplans = cf__cc_nplans(f->t0.shape, f->t0.buckets);
    void *block = cf__malloc(f, cf__cc_block_bytes(nplans));
    if (!block)
        return NULL;
    uintptr_t at = ((uintptr_t)block + CF__CC_ISOLATE - 1u) & ~(uintptr_t)(CF__CC_ISOLATE - 1u);
    struct cf__cc *cc = (struct cf__cc *)(void *)((char *)block + (at - (uintptr_t)block));
    if (pthread_mutex_init(&cc->lock, NULL) != 0) {
        cf__mfree(f, block);
        return NULL;
    }
    atomic_init(&cc->meta, 0u);
    cc->stripes0 = NULL;
    cc->locks0 = NULL;
    cc->data0 = NULL;
    cc->buckets0 = 0;
    cc->shape0 = NULL;
    cc->par = false;
    cc->code0 = CF__CODE_GENERIC;
    cc->nplans = nplans;
    cc->plans = (cf__cc_plan *)(void *)(cc + 1);
    for (unsigned k = 0; k < nplans; k++) {
        cf__cc_plan *p = &cc->plans[k];
        atomic_init(&p->busy, 0u);
        memset(p->marks, 0, sizeof p->marks);
        p->z = (cf__search){
            .queue = p->queue, .marks = p->marks, .shift = 64u - CF__CC_PLAN_MARK_BITS, .gen = 0};
    }
    cc->locked = false;
    atomic_init(&cc->closed, 0u);
    for (unsigned k = 0; k < CF__CC_FILL_SLOTS; k++)
        atomic_init(&cc->fills[k].word, 0u);
    cc->nretired = 0;
    cc->block = block;
    return cc;
}

static void cf__cc_drop_retired(cf_filter *f, struct cf__cc *cc)
{
    for (unsigned i = 0; i < cc->nretired; i++)
        cf__mfree(f, cc->retired[i]);
    cc->nretired = 0;
}

void cf__cc_free_retired(cf_filter *f)
{
    cf__cc_drop_retired(f, cf__cc_of(f));
}

void cf__cc_free(cf_filter *f, struct cf__cc *cc)
{
    cf__cc_drop_retired(f, cc);
    (void)pthread_mutex_destroy(&cc->lock);
    cf__mfree(f, cc->block);
}

size_t cf__cc_fixed_bytes(const cf__shape *s, uint64_t buckets)
{
    return cf__cc_block_bytes(cf__cc_nplans(s, buckets)) + CF__STASH_SLOTS * sizeof(cf__stash);
}

bool cf__cc_retire(cf_filter *f, void *array)
{
    struct cf__cc *cc = cf__cc_of(f);
    if (cc->nretired == CF__CC_MAX_RETIRED)
        return false;
    cc->retired[cc->nretired++] = array;
    return true;
}

/* Spins of a closer waiting for a run of fills before it yields its processor (the
 * run's thread may not be running): a run ends within a few fills. */
#define CF__CC_CLOSE_SPINS 64u

/* Every stripe of t, the first sub-filter, being held: fills without a stripe stopped
 * (cf__cc_fills_begin then fails, and a run under way ends at its next fill), the runs
 * under way waited for, and their items taken into t's count. Afterwards no one writes
 * t's words but the stripes' holder. */
static void cf__cc_close(struct cf__cc *cc, cf__table *t)
{
    atomic_store_explicit(&cc->closed, 1u, memory_order_seq_cst);
    for (unsigned k = 0; k < CF__CC_FILL_SLOTS; k++) {
        _Atomic uint64_t *c = &cc->fills[k].word;
        uint64_t v;
        for (unsigned spins = 0;
             (v = atomic_load_explicit(c, memory_order_seq_cst)) & CF__CC_FILL_BUSY; spins++)
            if (spins >= CF__CC_CLOSE_SPINS) {
                sched_yield();
                spins = 0;
            }
        /* (a run that begins now backs off at once: only its busy count moves) */
        uint64_t items = v & ~CF__CC_FILL_BUSY;
        atomic_fetch_sub_explicit(c, items, memory_order_acquire);
        t->items += items / CF__CC_FILL_ITEM;
    }
}

/* The stripes of the first sub-filter as they must be: every one held by a holder of the
 * lock (hold), whose writes then meet no writer of stripes, and between holders in any
 * state but the one writers of stripes write; else free. A writer of stripes that gets
 * one therefore needs no check of the state, and one that waits gives up once `meta`
 * says it is another (cf__cc_stripe_lock). Held, they count nothing: cf__sync_lock_all
 * takes their counts into the table's. */
static void cf__cc_settle(const cf_filter *f, bool hold)
{
    struct cf__cc *cc = cf__cc_of(f);
    if (!f->tables[0].data) /* (a filter loading has no table to hold yet) */
        return;
    bool held = hold || !cc->par || !cf__is_simple(f);
    bool was = atomic_load_explicit(&cc->closed, memory_order_relaxed) != 0; /* (ours alone) */
    if (held && !was) {
        cf__sync_lock_all(&f->tables[0]);
        cf__cc_close(cc, &f->tables[0]);
    } else if (!held && was) {
        atomic_store_explicit(&cc->closed, 0u, memory_order_release);
        cf__sync_unlock_all(&f->tables[0]);
    }
}

void cf__cc_lock(const cf_filter *f)
{
    struct cf__cc *cc = cf__cc_of(f);
    /* It fails only on a mutex it did not make, or (some kinds) one this thread holds:
     * neither happens here. */
    (void)pthread_mutex_lock(&cc->lock);
    cc->locked = true;
    cf__cc_settle(f, true);
}

void cf__cc_unlock(const cf_filter *f)
{
    struct cf__cc *cc = cf__cc_of(f);
    cf__cc_settle(f, false);
    cc->locked = false;
    (void)pthread_mutex_unlock(&cc->lock);
}

void cf__cc_meta_begin(cf_filter *f)
{
    /* A change of state is made under every stripe (the lock's holder holds them), or by
     * a loader, which has the filter to itself: a writer of stripes that takes one
     * afterwards finds the filter simple, and none holds one meanwhile. */
    atomic_uint *meta = &cf__cc_of(f)->meta;
    unsigned v = atomic_load_explicit(meta, memory_order_relaxed);
    atomic_store_explicit(meta, v | CF__CC_META_BUSY, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

void cf__cc_meta_end(cf_filter *f)
{
    atomic_uint *meta = &cf__cc_of(f)->meta;
    unsigned v = atomic_load_explicit(meta, memory_order_relaxed);
    unsigned next = (v & ~(CF__CC_META_STEP - 1u)) + CF__CC_META_STEP + (v & CF__CC_META_NOT_PAR);
    if (!cf__is_simple(f))
        next |= CF__CC_META_NOT_SIMPLE & ~CF__CC_META_BUSY;
    atomic_store_explicit(meta, next, memory_order_release);
    if (!cf__cc_of(f)->locked) /* else at the holder's unlock */
        cf__cc_settle(f, false);
}

void cf__cc_ready(cf_filter *f)
{
    struct cf__cc *cc = cf__cc_of(f);
    cc->data0 = f->tables[0].data;
    cc->buckets0 = f->tables[0].buckets;
    cc->shape0 = f->tables[0].shape;
    cc->stripes0 = cf__sync_stripe(&f->tables[0], 0);
    cc->locks0 = cf__sync_locks(&f->tables[0]);
    enum cf__code code = cf__code_of(cc->shape0);
    cc->code0 = code;
    cc->par = !cf__kind_of(f)->serial_writers && code != CF__CODE_GENERIC && code != CF__CODE_SEMI;
    if (!cc->par) /* before any other thread has the filter */
        atomic_fetch_or_explicit(&cc->meta, CF__CC_META_NOT_PAR, memory_order_relaxed);
    cf__cc_settle(f, false);
}

/* ------------------------------------------------------------------------------------ */
/* Readers                                                                              */
/* ------------------------------------------------------------------------------------ */

/* The filter's sub-filters as a reader sees them: the count first (acquire), so that the
 * array it then loads holds every entry the count covers. */
static unsigned cf__cc_tables(const cf_filter *f, const cf__table **tables)
{
    unsigned n = cf__ntables_now(f);
    *tables =
        atomic_load_explicit((_Atomic(cf__table *) *)(uintptr_t)&f->tables, memory_order_acquire);
    return n;
}

/* Stash entries of sub-filter `table` that hold fp in the pair i1, i2. */
static unsigned cf__cc_stash_count(const cf_filter *f, unsigned table, uint32_t fp, uint64_t i1,
                                   uint64_t i2)
{
    unsigned n =
        atomic_load_explicit((_Atomic uint8_t *)(uintptr_t)&f->stash_n, memory_order_relaxed);
    const cf__stash *stash = f->more->stash;
    unsigned hits = 0;
    for (unsigned e = 0; e < n && e < CF__STASH_SLOTS; e++) {
        uint64_t b = atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)&stash[e].bucket,
                                          memory_order_relaxed);
        uint32_t x =
            atomic_load_explicit((_Atomic uint32_t *)(uintptr_t)&stash[e].fp, memory_order_relaxed);
        uint32_t tt = atomic_load_explicit((_Atomic uint32_t *)(uintptr_t)&stash[e].table,
                                           memory_order_relaxed);
        hits += tt == table && x == fp && (b == i1 || b == i2);
    }
    return hits;
}

/* Copies of key h in the whole filter (stop_at_one: 0 or 1, as soon as one is seen),
 * from every sub-filter and the stash as they were at one instant. */
static uint64_t cf__cc_count_h(const cf_filter *f, uint64_t h, bool stop_at_one)
{
    atomic_uint *meta = &cf__cc_of(f)->meta;
    cf__key k = cf__key_bits(f->fp_bits, h);
    for (;;) {
        unsigned m = atomic_load_explicit(meta, memory_order_acquire);
        const cf__table *tables;
        unsigned n = cf__cc_tables(f, &tables);
        uint64_t count = 0;
        for (unsigned i = n; i-- > 0;) {
            const cf__table *t = &tables[i];
            uint32_t fp = cf__fp_in(&k, t);
            uint64_t i1, i2;
            cf__buckets(t, &k, &i1, &i2);
            count += cf__sync_pair_count(t, i1, i2, fp, stop_at_one);
            count += cf__cc_stash_count(f, i, fp, i1, i2);
            if (count && stop_at_one)
                return 1;
        }
        if (cf__seq_same(meta, m))
            return count;
    }
}

uint64_t cf__cc_count(const cf_filter *f, uint64_t h)
{
    return cf__cc_count_h(f, h, false);
}

bool cf__cc_contains(const cf_filter *f, uint64_t h)
{
    return cf__cc_count_h(f, h, true) != 0;
}
