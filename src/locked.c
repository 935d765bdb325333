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
 * are evict.c's, as for one writer.
 */
#include "concurrent.h"
#include "evict.h"

/* Plans of one eviction before the writer takes the lock instead: a path changes under
 * its planner only when another writer moved or filled one of its buckets meanwhile. */
#define CF__PLAN_TRIES 4u

/* The distinct stripes of the buckets of the path planned in z, ascending, into out, and
 * in *root the stripe of its root (which fp goes into), for a writer that waits for them
 * (cf__stripes_take); the path has at most CF__PATH_MAX buckets (cf__path_try saw them). Each put
 * in its place as the walk meets it: a path is short. */
static unsigned cf__path_stripes(const cf__search *z, uint64_t out[CF__PATH_MAX], uint64_t *root)
{
    const cf__node *q = z->queue;
    unsigned n = 0;
    for (uint32_t cur = z->end;; cur = q[cur].parent) {
        uint64_t x = q[cur].bucket >> CF__SYNC_STRIPE_SHIFT;
        unsigned j = n;
        while (j > 0 && out[j - 1] > x)
            j--;
        if (j == 0 || out[j - 1] != x) {
            for (unsigned k = n; k > j; k--)
                out[k] = out[k - 1];
            out[j] = x;
            n++;
        }
        if (q[cur].parent == CF__ROOT) {
            *root = x;
            return n;
        }
    }
}

static bool cf__stripes_has(const uint64_t *stripes, unsigned n, uint64_t x)
{
    bool have = false;
    for (unsigned j = 0; j < n; j++)
        have |= stripes[j] == x;
    return have;
}

static void cf__stripes_give(atomic_uint *locks, const uint64_t *stripes, unsigned n)
{
    for (unsigned i = n; i-- > 0;)
        cf__sync_unlock(locks, stripes[i]);
}

/* How cf__path_try went. */
enum cf__took {
    CF__TOOK,      /* every stripe held */
    CF__TOOK_BUSY, /* one was busy: none taken */
    CF__TOOK_LONG  /* the path has more than CF__PATH_MAX buckets: none taken */
};

/* The stripes of the path planned in z taken without waiting, in the path's order, into
 * out (*n of them: the distinct ones but those of `held`, nh of them, the caller's
 * already), with the root's stripe (which fp goes into) in *root. No sort: with no other
 * writer on them, the common case, their order cannot matter. */
static enum cf__took cf__path_try(const struct cf__cc *cc, const cf__search *z,
                                  const uint64_t *held, unsigned nh, uint64_t out[CF__PATH_MAX],
                                  unsigned *n, uint64_t *root)
{
    const cf__node *q = z->queue;
    atomic_uint *locks = cc->locks0;
    unsigned m = 0, len = 0;
    for (uint32_t cur = z->end;; cur = q[cur].parent) {
        uint64_t x = q[cur].bucket >> CF__SYNC_STRIPE_SHIFT;
        if (len++ == CF__PATH_MAX) {
            cf__stripes_give(locks, out, m);
            return CF__TOOK_LONG;
        }
        if (!cf__stripes_has(held, nh, x)) {
            /* (a trylock of a stripe it took changes nothing, and fails) */
            if (cf__sync_trylock(locks, x))
                out[m++] = x;
            else if (!cf__stripes_has(out, m, x)) {
                cf__stripes_give(locks, out, m);
                return CF__TOOK_BUSY;
            }
        }
        if (q[cur].parent == CF__ROOT) {
            *n = m;
            *root = x;
            return CF__TOOK;
        }
    }
}

/* The stripes of n distinct ascending `want` taken, waiting, in order (as every writer
 * that waits for several takes them); false, with none held, if the filter is in a state
 * writers of stripes may not write (cf__cc_stripe_lock). */
static bool cf__stripes_take(const struct cf__cc *cc, const uint64_t *want, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!cf__cc_stripe_lock(cc, want[i])) {
            cf__stripes_give(cc->locks0, want, i);
            return false;
        }
    return true;
}

/* One of the filter's planning memories that no other writer holds, taken; NULL if each
 * is busy. A thread tries first the one its stack's address picks: evicting again, it
 * finds the memory it used last in its own cache, where threads that took turns on one
 * would move its lines between their cores at every eviction. */
static cf__cc_plan *cf__plan_take(struct cf__cc *cc)
{
    unsigned n = cc->nplans, first = 0;
    if (n > 1) {
        uintptr_t here = (uintptr_t)&first;
        first = (unsigned)((here >> CF__STACK_SHIFT) % n);
    }
    for (unsigned i = 0; i < n; i++) {
        unsigned k = first + i < n ? first + i : first + i - n;
        cf__cc_plan *p = &cc->plans[k];
        if (!atomic_load_explicit(&p->busy, memory_order_relaxed) &&
            !atomic_exchange_explicit(&p->busy, 1u, memory_order_acquire))
            return p;
    }
    return NULL;
}

bool cf__cc_evict(const cf_filter *f, cf__table *t, const uint64_t pair[2], uint32_t fp,
                  const uint64_t *held, unsigned nh, bool wait)
{
    struct cf__cc *cc = cf__cc_of(f);
    cf__cc_plan *own = cf__plan_take(cc);
    cf__node queue[CF__PLAN_NODES];
    cf__mark marks[2 * CF__PLAN_NODES];
    cf__search stack, *z = own ? &own->z : &stack;
    bool done = false;
    for (unsigned tries = 0; tries < CF__PLAN_TRIES; tries++) {
        uint64_t stripes[CF__PATH_MAX], root = 0;
        stack = (cf__search){.queue = queue, .marks = marks}; /* cf__plan reuses its fields */
        unsigned n = 0;
        /* no path, or one the lock's holder finds (growth, the stash): the lock */
        if (cf__plan(f, t, pair[0], pair[1], fp, z, own != NULL) != CF__MOVED)
            break;
        enum cf__took took = cf__path_try(cc, z, held, nh, stripes, &n, &root);
        if (took == CF__TOOK_LONG)
            break;
        if (took == CF__TOOK_BUSY) {
            if (!wait) /* (one that holds stripes waits for none: it plans again) */
                continue;
            n = cf__path_stripes(z, stripes, &root);
            if (!cf__stripes_take(cc, stripes, n)) /* (it gives up only in another state) */
                break;
        }
        if ((done = cf__path_commit(t, cc->code0, z, fp))) /* fp went into its root */
            cf__sync_count(cc->locks0, root, +1);
        cf__stripes_give(cc->locks0, stripes, n);
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
    if (cf__cc_evict(f, &t, pair, fp, NULL, 0, true))
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
