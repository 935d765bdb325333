/*
 * locked.c - the writers of concurrent filters (CF_CONCURRENT), so that lookups beside
 * them (concurrent.c, fast.c) never block and never miss a key, and writers run beside
 * each other.
 *
 * In the simple state (one sub-filter, no stash) of a filter whose shape allows it
 * (cc->par), a writer holds only the stripes of the buckets it writes (table.h,
 * "Synchronized tables"): an add takes its buckets' stripes one at a time and puts the
 * fingerprint into a free slot; with both full it plans an eviction path without locks
 * (cf__plan), then takes the path's stripes, checks that the path still holds and makes
 * it (cf__path_commit), or plans again. A delete, and a unique add (whose check and put
 * are one step), take both buckets' stripes. A writer that waits for a stripe holds no
 * other, or takes them in ascending order, so writers never wait on each other in a
 * circle; one that holds its pair's takes its path's others without waiting, or plans
 * again.
 *
 * Everything else takes the filter's lock (cf__cc_lock): growth, the stash, a path past
 * the planning search's memory or that keeps changing under it, any write of a filter in
 * another state or of another shape, and the calls that read or change the whole filter.
 * In the simple state the lock holds every stripe of the first sub-filter too, and a
 * change of state is made holding them, so that a writer of stripes, which checks the
 * state once it holds its own, stands aside until the filter is simple again. Under the
 * lock the writes are filter.c's, as for one writer.
 */
#include "concurrent.h"

/* Plans of one eviction before the writer takes the lock instead: a path changes under
 * its planner only when another writer moved or filled one of its buckets meanwhile. */
#define CF__PLAN_TRIES 4u

/* Keys ahead whose buckets and stripe locks a batch of adds fetches meanwhile: as many
 * as the processor's misses in flight cover (fast.c's batches take as many). */
#define CF__ADD_AHEAD 16u

/* Is the filter in the state writers of stripes may write (read before each write: a
 * change of state is made under every stripe, so a writer that then takes one sees it)? */
static bool cf__par(const struct cf__cc *cc)
{
    unsigned m = atomic_load_explicit(&cc->meta, memory_order_acquire);
    return cc->par && !(m & CF__CC_META_NOT_SIMPLE);
}

/* The distinct stripes of n buckets, ascending, into out (n entries of room): an
 * insertion sort, as n is a pair or a short path. */
static unsigned cf__stripes_of(const uint64_t *buckets, unsigned n, uint64_t *out)
{
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t x = buckets[i] >> CF__SYNC_STRIPE_SHIFT;
        unsigned j = m;
        while (j > 0 && out[j - 1] > x)
            j--;
        if (j > 0 && out[j - 1] == x)
            continue;
        for (unsigned k = m; k > j; k--)
            out[k] = out[k - 1];
        out[j] = x;
        m++;
    }
    return m;
}

static CF__INLINE void cf__lock_stripes(atomic_uint *locks, const uint64_t *stripes, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        cf__sync_lock(locks, stripes[i]);
}

static CF__INLINE void cf__unlock_stripes(atomic_uint *locks, const uint64_t *stripes, unsigned n)
{
    for (unsigned i = n; i-- > 0;)
        cf__sync_unlock(locks, stripes[i]);
}

/* Key h's fingerprint and buckets in the first sub-filter t (of the first width, and the
 * first size), and the stripes of its pair: the lower first, the higher after it unless
 * they are one; the count of stripes. */
static CF__INLINE unsigned cf__par_key(const cf_filter *f, const cf__table *t, uint64_t h,
                                       uint32_t *fp, uint64_t pair[2], uint64_t stripes[2])
{
    cf__key k = cf__key_bits(f->fp_bits, h);
    *fp = k.fp;
    cf__buckets0(t, &k, &pair[0], &pair[1]);
    uint64_t a = pair[0] >> CF__SYNC_STRIPE_SHIFT, b = pair[1] >> CF__SYNC_STRIPE_SHIFT;
    stripes[0] = a < b ? a : b;
    stripes[1] = a < b ? b : a;
    return 1u + (a != b);
}

/* fp into a free slot of bucket `bucket`, whose stripe the caller holds. */
static bool cf__par_put(cf__table *t, atomic_uint *locks, uint64_t bucket, uint32_t fp)
{
    if (!cf__sync_put(t, bucket, fp))
        return false;
    cf__sync_count(locks, bucket >> CF__SYNC_STRIPE_SHIFT, +1);
    return true;
}

/* What a writer of stripes did: its write, nothing (it needs the lock), or nothing yet
 * (the next step). */
typedef enum { CF__PAR_DONE, CF__PAR_LOCK, CF__PAR_ON } cf__par_step;

/* The stripes of n distinct ascending `want` taken, those of `held` (nh of them) being
 * held already: in order if none is held, else each without waiting (a writer that
 * holds a stripe and waits for another might wait on one that waits for it); false, with
 * none of them taken, if one is busy. */
static bool cf__take(atomic_uint *locks, const uint64_t *want, unsigned n, const uint64_t *held,
                     unsigned nh)
{
    for (unsigned i = 0; i < n; i++) {
        bool have = false;
        for (unsigned j = 0; j < nh; j++)
            have |= held[j] == want[i];
        if (have)
            continue;
        if (nh == 0) {
            cf__sync_lock(locks, want[i]);
        } else if (!cf__sync_trylock(locks, want[i])) {
            while (i-- > 0) {
                have = false;
                for (unsigned j = 0; j < nh; j++)
                    have |= held[j] == want[i];
                if (!have)
                    cf__sync_unlock(locks, want[i]);
            }
            return false;
        }
    }
    return true;
}

static void cf__give(atomic_uint *locks, const uint64_t *stripes, unsigned n, const uint64_t *held,
                     unsigned nh)
{
    for (unsigned i = n; i-- > 0;) {
        bool have = false;
        for (unsigned j = 0; j < nh; j++)
            have |= held[j] == stripes[i];
        if (!have)
            cf__sync_unlock(locks, stripes[i]);
    }
}

/* The eviction of an add whose pair is full, beside other writers, the stripes `held`
 * (nh: 0, or its pair's, for a unique add) held: CF__PAR_DONE if made. */
static cf__par_step cf__par_evict(const cf_filter *f, cf__table *t, const uint64_t pair[2],
                                  uint32_t fp, const uint64_t *held, unsigned nh)
{
    const struct cf__cc *cc = cf__cc_of(f);
    cf__node queue[CF__PLAN_NODES];
    cf__mark marks[2 * CF__PLAN_NODES];
    for (unsigned tries = 0; tries < CF__PLAN_TRIES; tries++) {
        cf__search z = {.queue = queue, .marks = marks};
        uint64_t path[CF__PATH_MAX], stripes[CF__PATH_MAX];
        if (cf__plan(f, t, pair[0], pair[1], fp, &z) != CF__MOVED)
            return CF__PAR_LOCK; /* no path, or one the lock's holder finds: growth, the stash */
        unsigned len = cf__path_buckets(&z, path, CF__PATH_MAX);
        if (len == 0)
            return CF__PAR_LOCK;
        unsigned n = cf__stripes_of(path, len, stripes);
        if (!cf__take(cc->locks0, stripes, n, held, nh))
            continue;
        bool done = false, simple = cf__par(cc);
        if (simple && (done = cf__path_commit(t, &z, fp))) /* fp went into its root */
            cf__sync_count(cc->locks0, path[len - 1u] >> CF__SYNC_STRIPE_SHIFT, +1);
        cf__give(cc->locks0, stripes, n, held, nh);
        if (done || !simple)
            return done ? CF__PAR_DONE : CF__PAR_LOCK;
    }
    return CF__PAR_LOCK;
}

/* An add beside other writers: true with *st if it was made so, false if it needs the
 * lock. With `unique`, CF_EXISTS if the pair holds the fingerprint (the simple state keeps
 * a key nowhere else), checked under the same stripes as the put, which its eviction
 * keeps. Each step checks the state again once it holds its stripes. */
static bool cf__par_add(cf_filter *f, uint64_t h, bool unique, cf_status *st)
{
    const struct cf__cc *cc = cf__cc_of(f);
    if (!cf__par(cc))
        return false;
    cf__table t = cf__cc_table0(cc);
    uint32_t fp;
    uint64_t pair[2], stripes[2];
    unsigned n = cf__par_key(f, &t, h, &fp, pair, stripes);
    cf__par_step step = CF__PAR_ON;
    *st = CF_OK;
    if (unique) {
        cf__lock_stripes(cc->locks0, stripes, n);
        if (!cf__par(cc))
            step = CF__PAR_LOCK;
        else if (cf__sync_bucket_find(&t, pair[0], fp) >= 0 ||
                 cf__sync_bucket_find(&t, pair[1], fp) >= 0) {
            *st = CF_EXISTS;
            step = CF__PAR_DONE;
        } else if (cf__par_put(&t, cc->locks0, pair[0], fp) ||
                   cf__par_put(&t, cc->locks0, pair[1], fp))
            step = CF__PAR_DONE;
        else
            step = cf__par_evict(f, &t, pair, fp, stripes, n);
        cf__unlock_stripes(cc->locks0, stripes, n);
        return step == CF__PAR_DONE;
    }
    /* A put writes one bucket and needs only its stripe: one at a time, half the lock
     * words a pair would take, which are what writers of different buckets share most. */
    for (unsigned w = 0; w < 2 && step == CF__PAR_ON; w++) {
        uint64_t stripe = pair[w] >> CF__SYNC_STRIPE_SHIFT;
        cf__sync_lock(cc->locks0, stripe);
        if (!cf__par(cc))
            step = CF__PAR_LOCK;
        else if (cf__par_put(&t, cc->locks0, pair[w], fp))
            step = CF__PAR_DONE;
        cf__sync_unlock(cc->locks0, stripe);
    }
    if (step == CF__PAR_ON)
        step = cf__par_evict(f, &t, pair, fp, NULL, 0);
    return step == CF__PAR_DONE;
}

/* A delete beside other writers (see cf__par_add). */
static bool cf__par_del(cf_filter *f, uint64_t h, cf_status *st)
{
    const struct cf__cc *cc = cf__cc_of(f);
    if (!cf__par(cc))
        return false;
    cf__table t = cf__cc_table0(cc);
    uint32_t fp;
    uint64_t pair[2], stripes[2];
    unsigned n = cf__par_key(f, &t, h, &fp, pair, stripes);
    cf__lock_stripes(cc->locks0, stripes, n);
    bool simple = cf__par(cc);
    *st = CF_NOT_FOUND;
    for (unsigned w = 0; w < 2 && simple && *st != CF_OK; w++) {
        int j = cf__sync_bucket_find(&t, pair[w], fp);
        if (j >= 0) {
            cf__sync_slot_clear(&t, pair[w], (unsigned)j);
            cf__sync_count(cc->locks0, pair[w] >> CF__SYNC_STRIPE_SHIFT, -1);
            *st = CF_OK;
        }
    }
    cf__unlock_stripes(cc->locks0, stripes, n);
    return simple;
}

/* An add under the lock: filter.c's, the check of a unique one with it. */
static cf_status cf__locked_add(cf_filter *f, uint64_t h, bool unique)
{
    cf__cc_lock(f);
    cf_status st = unique && f->ops->contains(f, h) ? CF_EXISTS : cf__insert_any(f, h);
    cf__cc_unlock(f);
    return st;
}

cf_status cf__cc_add(cf_filter *f, uint64_t h)
{
    cf_status st;
    if (cf__par_add(f, h, false, &st))
        return st;
    return cf__locked_add(f, h, false);
}

cf_status cf__cc_add_key(cf_filter *f, const void *key, size_t len)
{
    return cf__cc_add(f, cf__hash_key(f, key, len));
}

cf_status cf__cc_del(cf_filter *f, uint64_t h)
{
    cf_status st;
    if (cf__par_del(f, h, &st))
        return st;
    cf__cc_lock(f);
    st = cf__delete_all(f, h);
    cf__cc_unlock(f);
    return st;
}

cf_status cf__cc_del_key(cf_filter *f, const void *key, size_t len)
{
    return cf__cc_del(f, cf__hash_key(f, key, len));
}

/* Each key as a single add: writers of other stripes run between them, and
 * CF_ADD_UNIQUE's check and its insert are one step for them (the same stripes, or the
 * lock). */
size_t cf__cc_add_many(cf_filter *f, const uint64_t *hashes, size_t n, unsigned flags,
                       cf_status *status)
{
    bool unique = (flags & CF_ADD_UNIQUE) != 0;
    size_t added = 0;
    const struct cf__cc *cc = cf__cc_of(f);
    cf__table t = cf__cc_table0(cc);
    for (size_t j = 0; j < n; j++) {
        if (cc->par && j + CF__ADD_AHEAD < n) {
            uint32_t fp;
            uint64_t pair[2], stripes[2];
            cf__par_key(f, &t, hashes[j + CF__ADD_AHEAD], &fp, pair, stripes);
            for (unsigned w = 0; w < 2; w++) {
                cf__bucket_prefetch(&t, t.shape, pair[w], true);
                CF__PREFETCH(&cc->locks0[stripes[w]], 1);
            }
        }
        cf_status st;
        if (!cf__par_add(f, hashes[j], unique, &st))
            st = cf__locked_add(f, hashes[j], unique);
        added += st == CF_OK;
        if (status)
            status[j] = st;
    }
    return added;
}
