/*
 * evict.h - the eviction search beside other writers (evict.c, for locked.c): room for a
 * fingerprint whose two buckets are full, planned without moving anything, then made.
 */
#ifndef CF_EVICT_H
#define CF_EVICT_H

#include "internal.h"

typedef enum cf__found { CF__MOVED, CF__NO_PATH, CF__OUT_OF_NODES } cf__found;

/* Evictions beside other writers, in a synchronized first
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
