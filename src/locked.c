/*
 * locked.c - the writers of concurrent filters (CF_CONCURRENT) beyond the puts and
 * deletes of fast.c, so that lookups beside them (concurrent.c, fast.c) never block and
 * never miss a key, and writers run beside each other.
 *
 * In the simple state (one sub-filter, no stash) of a filter whose shape allows it
 * (cc->par), a writer holds only the stripes of the buckets it writes (table.h,
 * "Synchronized tables"). fast.c's add takes its buckets' stripes one at a time and puts
 * the fingerprint into a free slot; with both full it comes here (cf__cc_evict), which
 * plans an eviction path without locks (cf__plan), then takes the path's stripes, checks
 * that the path still holds and makes it (cf__path_commit), or plans again. A delete takes
 * its buckets' stripes one at a time too and removes the fingerprint from the first that
 * holds it, or else takes both buckets' stripes, as a unique add (whose check and put are
 * one step) does. A writer
 * that waits for a stripe holds no other, or takes them in ascending order, so writers
 * never wait on each other in a circle; one that holds its pair's takes its path's others
 * without waiting, or plans again.
 *
 * Everything else takes the filter's lock (cf__cc_lock): growth, the stash, a path past
 * the planning search's memory or that keeps changing under it, any write of a filter in
 * another state or of another shape, and the calls that read or change the whole filter.
 * The lock's holder holds every stripe of the first sub-filter too, and so does any
 * other state between holders (concurrent.c, cf__cc_settle): a writer of stripes that
 * gets one knows the filter is simple, with no check, and one that waits for one gives
 * up and takes the lock once `meta` says the state is another. Under the lock the writes
 * are filter.c's, as for one writer.
 */
#include "concurrent.h"

/* Plans of one eviction before the writer takes the lock instead: a path changes under
 * its planner only when another writer moved or filled one of its buckets meanwhile. */
#define CF__PLAN_TRIES 4u

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

/* The stripes of n distinct ascending `want` taken, those of `held` (nh of them) being
 * held already: in order if none is held, else each without waiting (a writer that
 * holds a stripe and waits for another might wait on one that waits for it); false, with
 * none of them taken, if one is busy, or with none held, if the filter is in a state
 * writers of stripes may not write (cf__cc_stripe_lock). */
static bool cf__take(const struct cf__cc *cc, const uint64_t *want, unsigned n,
                     const uint64_t *held, unsigned nh)
{
    atomic_uint *locks = cc->locks0;
    for (unsigned i = 0; i < n; i++) {
        bool have = false;
        for (unsigned j = 0; j < nh; j++)
            have |= held[j] == want[i];
        if (have)
            continue;
        if (nh ? !cf__sync_trylock(locks, want[i]) : !cf__cc_stripe_lock(cc, want[i])) {
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

/* One of the filter's planning memories that no other writer holds, taken; NULL if each
 * is busy. */
static cf__cc_plan *cf__plan_take(struct cf__cc *cc)
{
    for (unsigned k = 0; k < cc->nplans; k++) {
        cf__cc_plan *p = &cc->plans[k];
        if (!atomic_load_explicit(&p->busy, memory_order_relaxed) &&
            !atomic_exchange_explicit(&p->busy, 1u, memory_order_acquire))
            return p;
    }
    return NULL;
}

bool cf__cc_evict(const cf_filter *f, cf__table *t, const uint64_t pair[2], uint32_t fp,
                  const uint64_t *held, unsigned nh)
{
    struct cf__cc *cc = cf__cc_of(f);
    cf__cc_plan *own = cf__plan_take(cc);
    cf__node queue[CF__PLAN_NODES];
    cf__mark marks[2 * CF__PLAN_NODES];
    cf__search stack, *z = own ? &own->z : &stack;
    bool done = false;
    for (unsigned tries = 0; tries < CF__PLAN_TRIES; tries++) {
        uint64_t path[CF__PATH_MAX], stripes[CF__PATH_MAX];
        stack = (cf__search){.queue = queue, .marks = marks}; /* cf__plan reuses its fields */
        unsigned len = 0;
        /* no path, or one the lock's holder finds (growth, the stash): the lock */
        if (cf__plan(f, t, pair[0], pair[1], fp, z, own != NULL) != CF__MOVED ||
            (len = cf__path_buckets(z, path, CF__PATH_MAX)) == 0)
            break;
        unsigned n = cf__stripes_of(path, len, stripes);
        if (!cf__take(cc, stripes, n, held, nh)) {
            if (nh == 0) /* (waiting, it gives up only in another state) */
                break;
            continue;
        }
        if ((done = cf__path_commit(t, cc->kind0, z, fp))) /* fp went into its root */
            cf__sync_count(cc->locks0, path[len - 1u] >> CF__SYNC_STRIPE_SHIFT, +1);
        cf__give(cc->locks0, stripes, n, held, nh);
        if (done)
            break;
    }
    if (own)
        atomic_store_explicit(&own->busy, 0u, memory_order_release);
    return done;
}

cf_status cf__cc_add_locked(cf_filter *f, uint64_t h, bool unique)
{
    cf__cc_lock(f);
    cf_status st = unique && f->ops->contains(f, h) ? CF_EXISTS : cf__insert_any(f, h);
    cf__cc_unlock(f);
    return st;
}

cf_status cf__cc_add_full(cf_filter *f, uint64_t h, uint32_t fp, uint64_t i1, uint64_t i2)
{
    cf__table t = cf__cc_table0(cf__cc_of(f));
    uint64_t pair[2] = {i1, i2};
    if (cf__cc_evict(f, &t, pair, fp, NULL, 0))
        return CF_OK;
    return cf__cc_add_locked(f, h, false);
}

cf_status cf__cc_del_locked(cf_filter *f, uint64_t h)
{
    cf__cc_lock(f);
    cf_status st = cf__delete_all(f, h);
    cf__cc_unlock(f);
    return st;
}
