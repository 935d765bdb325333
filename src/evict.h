/*
 * evict.h - the eviction search (evict.c): room for a fingerprint whose two buckets are
 * full, made by moving residents to their other buckets.
 */
#ifndef CF_EVICT_H
#define CF_EVICT_H

#include "internal.h"

typedef enum cf__found { CF__MOVED, CF__NO_PATH, CF__OUT_OF_NODES } cf__found;

/* A search on the stack must clear its visited set first (8 KiB for the default budget:
 * a quarter of all the instructions of filling a table). A table of at least this many
 * bytes gets its own search memory, whose set clears by generation, on its first search
 * that needs the set: 16 KiB, under 2 % of such a table. */
#define CF__OWN_SEARCH_MIN_TABLE ((size_t)1 << 20)

/* A search on the stack first tries with this many nodes, checking for a visited bucket by
 * scanning its queue, which needs no visited set to clear; most evictions need fewer
 * nodes. If that is not enough it starts over with more nodes and a visited set
 * (cf__bfs_steps), which finds the same path a single search would. */
#define CF__FIRST_NODES 16u

/* The search for room for fp in the full buckets i1 and i2 of t with z's memory (its cap
 * nodes; a visited set, or none for a search that scans its queue). */
CF__HIDDEN cf__found cf__bfs(const cf__shape *s, cf__table *t, cf__search *z, uint64_t i1,
                             uint64_t i2, uint32_t fp);
/* The rest of a search on the stack whose first nodes (z, no visited set) were not
 * enough: steps of more nodes, up to `most` in `queue` and `marks`, planning or not. */
CF__HIDDEN cf__found cf__bfs_steps(cf__table *t, cf__search *z, cf__mark *marks, uint32_t budget,
                                   uint32_t most, bool plan, uint64_t i1, uint64_t i2, uint32_t fp);

/* Search with the filter's own memory: a new generation makes every mark stale. */
static CF__INLINE cf__found cf__bfs_own(cf__search *own, cf__table *t, uint64_t i1, uint64_t i2,
                                        uint32_t fp)
{
    if (++own->gen == 0) { /* wrapped: stale entries could look current */
        memset(own->marks, 0, ((size_t)1 << (64u - own->shift)) * sizeof(cf__mark));
        own->gen = 1;
    }
    return cf__bfs(t->shape, t, own, i1, i2, fp);
}

/* Find room for fp in the full buckets i1 and i2 of t within f's budget (max_kicks
 * buckets examined beyond the two), moving residents if a path exists; false if none.
 * Inline: the insert that calls it keeps its frame. */
static CF__INLINE bool cf__evict(cf_filter *f, cf__table *t, uint64_t i1, uint64_t i2, uint32_t fp)
{
    uint32_t budget = f->max_kicks + 2u;
    cf__search *own = cf__search_of(f);
    if (own)
        return cf__bfs_own(own, t, i1, i2, fp) == CF__MOVED;
    cf__node queue[CF__STACK_NODES];
    cf__mark marks[2 * CF__STACK_NODES];
    cf__search z = {queue, NULL, budget < CF__FIRST_NODES ? budget : CF__FIRST_NODES, 0, 1, 0,
                    0,     0};
    cf__found r = cf__bfs(t->shape, t, &z, i1, i2, fp);
    if (r != CF__OUT_OF_NODES || z.cap == budget)
        return r == CF__MOVED;
    /* The same search with the whole budget finds the same path (breadth-first, in the
     * same order), wherever its memory is. */
    if (cf__table_size(t->shape, t->buckets) >= CF__OWN_SEARCH_MIN_TABLE &&
        (own = cf__own_search(f, budget)) != NULL)
        return cf__bfs_own(own, t, i1, i2, fp) == CF__MOVED;
    return cf__bfs_steps(t, &z, marks, budget, CF__STACK_NODES, false, i1, i2, fp) == CF__MOVED;
}

/* Evictions beside other writers (for locked.c), in a synchronized first
 * sub-filter t of a fast shape whose stripes other writers hold meanwhile. cf__plan finds
 * a path for fp, whose buckets i1 and i2 are full, reading t through atomic words and
 * moving nothing, with z's memory (CF__PLAN_NODES nodes in z->queue, twice as many marks
 * in z->marks): on the stack, whose visited set it clears as it needs it, or kept (own:
 * z->shift is the marks', whose entries are stale unless of generation z->gen, the last
 * search's). CF__MOVED with the path in z, CF__NO_PATH, or CF__OUT_OF_NODES when the
 * filter's budget needs more memory or the shape cannot be read so: the path runs from
 * node z->end up its parents to a root. With the locks of its buckets' stripes held,
 * cf__path_commit (given cf__code_of(t->shape)) checks that the path still holds and makes
 * its moves, fp into its root; false if it changed (nothing written). */
#define CF__PATH_MAX 32u /* the longest path a writer beside others makes */
CF__HIDDEN cf__found cf__plan(const cf_filter *f, cf__table *t, uint64_t i1, uint64_t i2,
                              uint32_t fp, cf__search *z, bool own);
CF__HIDDEN bool cf__path_commit(cf__table *t, enum cf__code code, const cf__search *z, uint32_t fp);

#endif /* CF_EVICT_H */
