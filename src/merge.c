/*
 * merge.c - cf_merge: one filter from filters built apart.
 *
 * Every fingerprint of the source is re-inserted into the destination from where it sits:
 * its bucket there and its fingerprint give its pair in any sub-filter of the same scale
 * or smaller (cf__place_fp), without its key. So two filters merge exactly when the keys map
 * the same way in both: same seed, fingerprint width, bucket shape and first size.
 *
 * Atomicity by copy: the destination's tables are copied before the first insert and put
 * back if one fails. An undo log would cost less memory for a small source, but evictions
 * move fingerprints along paths of any length in any sub-filter; the copy is one memcpy
 * per table, and a failure is rare (merges are sized to fit). A concurrent destination
 * cannot be put back under its lock-free readers (they would see the tables mid-copy), so
 * the merge first runs on a private plain copy of it, and only if that succeeds on the
 * filter itself, with concurrent writes: inserts are deterministic, and the same
 * fingerprints into the same state take the same paths, so the second run succeeds too.
 * It allocates nothing: before it begins, the filter gets every block the trial's growth
 * took (cf__reserve_like), so that running out of memory stops the merge while the
 * destination is still as it was.
 * Both filters' writers' locks are held throughout (taken in address order, so that two
 * merges of the same pair the other way round cannot deadlock).
 */
#include "build.h"

#include <string.h>

/* What a failed merge puts back: each original table's bytes and item count, and how
 * many sub-filters and stash entries there were (merging only appends to both). */
typedef struct cf__merge_undo {
    uint8_t *block; /* the tables' bytes, one after the other, then their item counts */
    unsigned ntables;
    unsigned stash_n;
} cf__merge_undo;

static const char *cf__merge_refusal(const cf_filter *dst, const cf_filter *src)
{
    if (!dst || !src)
        return "a filter is NULL";
    if (dst == src)
        return "a filter cannot merge with itself (merge a copy of it)";
    if (cf_is_loading(src))
        return "the source is still loading";
    if (cf__kind_of(dst)->no_merge || cf__kind_of(src)->no_merge)
        return cf__kind_of(dst)->no_merge ? cf__kind_of(dst)->no_merge : cf__kind_of(src)->no_merge;
    const cf__shape *d = cf__shape0(dst), *s = cf__shape0(src);
    if (cf__seed(dst) != cf__seed(src))
        return "seeds differ";
    if ((dst->bits & CF__B_FAST_HASH) != (src->bits & CF__B_FAST_HASH))
        return "hashes differ (one made with CF_FAST_HASH)";
    if (d->f != s->f)
        return "fingerprint widths differ";
    if (d->b != s->b)
        return "bucket sizes differ";
    if (d->semi != s->semi)
        return "bucket encodings differ (semi-sorted and plain)";
    if (d->seg != s->seg)
        return "bucket mappings differ (segmented and any-size: build both with the same "
               "capacity, or both with CF_SEGMENTED or CF_UNSEGMENTED)";
    if (dst->tables[0].buckets != src->tables[0].buckets)
        return "first sub-filter sizes differ (made with different capacities)";
    return NULL;
}

static uint64_t cf__items_of(const cf_filter *f)
{
    uint64_t n = f->stash_n;
    for (unsigned k = 0; k < f->ntables; k++)
        n += f->tables[k].items;
    return n;
}

/* A fixed filter has no room beyond its free slots and stash entries. */
static bool cf__cannot_fit(const cf_filter *dst, const cf_filter *src)
{
    if (dst->expansion != 0)
        return false;
    uint64_t free_slots = CF__STASH_SLOTS - dst->stash_n;
    for (unsigned k = 0; k < dst->ntables; k++) {
        const cf__table *t = &dst->tables[k];
        free_slots += t->buckets * t->shape->b - t->items;
    }
    return cf__items_of(src) > free_slots;
}

static cf_status cf__undo_save(cf_filter *f, cf__merge_undo *u)
{
    size_t bytes = 0;
    for (unsigned k = 0; k < f->ntables; k++) {
        const cf__table *t = &f->tables[k];
        size_t n = cf__table_size(t->shape, t->buckets);
        if (n > SIZE_MAX - bytes || SIZE_MAX - bytes - n < sizeof(uint64_t))
            return CF_ENOMEM; /* (bytes may reach SIZE_MAX - 8: no subtraction below 0) */
        bytes += n + sizeof(uint64_t);
    }
    u->block = cf__malloc(f, bytes);
    if (!u->block)
        return CF_ENOMEM;
    uint8_t *p = u->block;
    for (unsigned k = 0; k < f->ntables; k++) {
        const cf__table *t = &f->tables[k];
        size_t n = cf__table_size(t->shape, t->buckets);
        memcpy(p, t->data, n);
        memcpy(p + n, &t->items, sizeof t->items);
        p += n + sizeof t->items;
    }
    u->ntables = f->ntables;
    u->stash_n = f->stash_n;
    return CF_OK;
}

static void cf__undo_apply(cf_filter *f, const cf__merge_undo *u)
{
    cf__truncate(f, u->ntables, u->stash_n);
    const uint8_t *p = u->block;
    for (unsigned k = 0; k < f->ntables; k++) {
        cf__table *t = &f->tables[k];
        size_t n = cf__table_size(t->shape, t->buckets);
        memcpy(t->data, p, n);
        memcpy(&t->items, p + n, sizeof t->items);
        p += n + sizeof t->items;
    }
}

/* Hashes a merge hands the insert path at once: long enough for cf_add_many's prefetching
 * to overlap the reads of their buckets, short enough for the stack (2 KiB). */
#define CF__MERGE_BATCH 256u

/* The fingerprints of src's sub-filter t (one of the first's size and width) into a dst
 * that does not grow, through the insert path itself (prefetched batches), as hashes of
 * keys with their pairs (cf__walk). False, having done nothing, where no walk exists. */
static bool cf__merge_by_hash(cf_filter *dst, const cf__table *t, cf_status *st)
{
    cf__walk w;
    if (!cf__walk_init(&w, cf__shape0(dst)->f, t->buckets))
        return false;
    uint64_t hashes[CF__MERGE_BATCH];
    cf_status sts[CF__MERGE_BATCH];
    size_t n = 0;
    const cf__shape *s = t->shape;
    *st = CF_OK;
    uint32_t fps[CF_MAX_BUCKET_SIZE];
    for (uint64_t x = 0; x < t->buckets && *st == CF_OK; x++, cf__walk_next(&w)) {
        for (unsigned j = 0, k = cf__bucket_fps(t, s, x, fps); j < k; j++)
            hashes[n++] = cf__walk_hash(&w, fps[j]);
        if (n > CF__MERGE_BATCH - s->b || (n && x + 1 == t->buckets)) {
            if (dst->ops->add_many(dst, hashes, n, 0, sts) != n) /* the first failure */
                for (size_t i = 0; i < n && *st == CF_OK; i++)
                    *st = sts[i];
            n = 0;
        }
    }
    return true;
}

/* Segment by segment. A segmented table's keys of one segment change nothing outside it
 * (build.c), and a fingerprint's pair in dst's first table is its own in src's when the
 * two are alike: so threads that each re-insert the fingerprints of a run of whole
 * segments, in bucket order, through a shadow of dst (build.h), make the bytes one thread
 * makes, whatever their number. Neighbouring segments are never written at once: each
 * thread first does all its segments but its last, then, after every thread has, its
 * last. A fingerprint that finds no slot changes no table, only its shadow's stash (or
 * is refused once that is full): into a fixed dst, the threads note such fingerprints and
 * go on, and afterwards they go to dst's stash in bucket order, as one insert after
 * another would have put them, or the merge is refused if they are more than it holds.
 * A growing dst would grow at the first: the thread that meets one stops, and the merge
 * puts the table back and takes the sequential path. Used for every merge it can serve,
 * with one thread as with many, so that the result never depends on their number. */

/* Fingerprints a merge thread takes at least (a thread's start costs tens of
 * microseconds). */
#define CF__MERGE_MIN_ITEMS ((uint64_t)1 << 16)

/* One thread's part: segments [first, end) of src's first table t, through its shadow. */
typedef struct cf__merge_job {
    cf_filter *shadow;
    const cf__table *t;
    unsigned f; /* the fingerprints' width */
    bool fixed; /* dst does not grow: fingerprints without a slot are noted */
    uint64_t first, end;
    bool last_part;   /* the round: the last segment, else the others */
    bool stopped;     /* (growing dst) a fingerprint found no slot: the thread stopped */
    uint64_t refused; /* (fixed dst) ones its shadow refused, its stash being full */
} cf__merge_job;

static void *cf__merge_worker(void *p)
{
    cf__merge_job *j = p;
    const cf__shape *s = j->t->shape;
    uint64_t from = (j->last_part ? j->end - 1u : j->first) << s->seg;
    uint64_t to = (j->last_part ? j->end : j->end - 1u) << s->seg;
    cf__walk w;
    if (j->stopped || from == to || !cf__walk_init(&w, j->f, j->t->buckets))
        return NULL; /* (the walk exists: cf__merge_segments checked it) */
    cf__walk_seek(&w, from);
    cf_filter *sh = j->shadow;
    uint64_t hashes[CF__MERGE_BATCH];
    cf_status sts[CF__MERGE_BATCH];
    uint32_t fps[CF_MAX_BUCKET_SIZE];
    size_t n = 0;
    for (uint64_t x = from; x < to; x++, cf__walk_next(&w)) {
        for (unsigned i = 0, k = cf__bucket_fps(j->t, s, x, fps); i < k; i++)
            hashes[n++] = cf__walk_hash(&w, fps[i]);
        if (n > CF__MERGE_BATCH - s->b || (n && x + 1 == to)) {
            size_t added = sh->ops->add_many(sh, hashes, n, 0, sts);
            if (!j->fixed && (added != n || sh->stash_n != 0)) {
                j->stopped = true;
                return NULL;
            }
            j->refused += n - added;
            n = 0;
        }
    }
    return NULL;
}

/* Can src's first table t go into dst segment by segment? dst a plain filter in its
 * simple state whose table is segmented, and t of its size and width (cf__merge_refusal
 * checked the rest). */
static bool cf__by_segments_ok(const cf_filter *dst, const cf__table *t)
{
    cf__walk w;
    return cf__kind_of(dst) == &cf__kind_plain && cf__shape0(dst)->seg && cf__is_simple(dst) &&
           dst->tables == &dst->t0 && !t->grown && t->shape->ext == 0 &&
           t->buckets == dst->t0.buckets && cf__walk_init(&w, cf__shape0(dst)->f, t->buckets);
}

/* The fingerprints of src's first table t into dst's, segment by segment, with `threads`
 * threads at most (0: one per processor), where cf__by_segments_ok says so. CF_OK, every
 * one in dst's table or stash; CF_FULL, CF_ENOMEM (dst's table part done, to be put
 * back); or *fallback set, CF_OK: a growing dst's table part done, to be put back and
 * merged the sequential way, or nothing done (the threads' memory is not there). */
static cf_status cf__merge_segments(cf_filter *dst, const cf__table *t, unsigned threads,
                                    bool *fallback)
{
    cf__merge_job job[CF__BUILD_THREADS_MAX];
    uint64_t segments = t->buckets >> t->shape->seg;
    unsigned jobs = cf__threads_for(threads, (size_t)t->items, CF__MERGE_MIN_ITEMS);
    if ((uint64_t)jobs > segments / 2u) /* two segments each at least (see above) */
        jobs = segments >= 2u ? (unsigned)(segments / 2u) : 1u;
    *fallback = false;
    for (unsigned i = 0; i < jobs; i++) {
        job[i] = (cf__merge_job){.t = t,
                                 .f = cf__shape0(dst)->f,
                                 .fixed = dst->expansion == 0,
                                 .first = segments * i / jobs,
                                 .end = segments * (i + 1u) / jobs};
        if (cf__shadow_of(dst, &job[i].shadow) != CF_OK) {
            for (unsigned k = 0; k < i; k++)
                cf__shadow_free(job[k].shadow);
            *fallback = true;
            return CF_OK;
        }
    }
    for (unsigned round = 0; round < 2; round++) {
        for (unsigned i = 0; i < jobs; i++)
            job[i].last_part = round == 1;
        cf__run_jobs(cf__merge_worker, job, sizeof job[0], jobs);
    }
    uint64_t unplaced = 0;
    for (unsigned i = 0; i < jobs; i++) {
        *fallback |= job[i].stopped;
        unplaced += job[i].shadow->stash_n + job[i].refused;
        dst->t0.items += job[i].shadow->t0.items;
    }
    cf_status st = !*fallback && unplaced > CF__STASH_SLOTS - dst->stash_n ? CF_FULL : CF_OK;
    /* the shadows' stashes in bucket order: dst's (it is empty in the simple state) */
    for (unsigned i = 0; i < jobs && st == CF_OK && !*fallback; i++)
        for (unsigned e = 0; e < job[i].shadow->stash_n && st == CF_OK; e++) {
            if (cf__stash_room(dst))
                cf__stash_push(dst, cf__stash_of(job[i].shadow)[e]);
            else
                st = CF_ENOMEM;
        }
    for (unsigned i = 0; i < jobs; i++)
        cf__shadow_free(job[i].shadow);
    return st;
}

/* Every fingerprint of src into dst: the oldest sub-filter's first (they have the fewest
 * places to go, so they take them while there is room), then the stash. Segment by
 * segment where dst and src's first table allow it, with `threads` (undo: how to put dst
 * back if a fingerprint finds no slot there; NULL: never that way). Else through the
 * insert path where dst is one sub-filter that cannot grow (fast: plain, fixed, one) and
 * the sub-filter has the first one's size and width; else each with cf__place_fp. */
static cf_status cf__merge_all(cf_filter *dst, const cf_filter *src, bool fast,
                               const cf__merge_undo *undo, unsigned threads)
{
    for (unsigned k = 0; k < src->ntables; k++) {
        const cf__table *t = &src->tables[k];
        const cf__shape *s = t->shape;
        cf_status st;
        if (k == 0 && undo && cf__by_segments_ok(dst, t)) {
            bool fallback;
            if ((st = cf__merge_segments(dst, t, threads, &fallback)) != CF_OK)
                return st;
            if (!fallback)
                continue;
            cf__undo_apply(dst, undo); /* (nothing to put back where nothing ran) */
        }
        if (fast && !t->grown && s->ext == 0 && cf__merge_by_hash(dst, t, &st)) {
            if (st != CF_OK)
                return st;
            continue;
        }
        uint32_t fps[CF_MAX_BUCKET_SIZE];
        for (uint64_t x = 0; x < t->buckets; x++)
            for (unsigned j = 0, n = cf__bucket_fps(t, s, x, fps); j < n; j++)
                if ((st = cf__place_fp(dst, t, x, fps[j])) != CF_OK)
                    return st;
    }
    const cf__stash *stash = cf__stash_of(src);
    for (unsigned e = 0; e < src->stash_n; e++) {
        cf_status st =
            cf__place_fp(dst, &src->tables[stash[e].table], stash[e].bucket, stash[e].fp);
        if (st != CF_OK)
            return st;
    }
    return CF_OK;
}

/* The merge of filters that may merge, their writers' locks held. */
static cf_status cf__merge_held(cf_filter *dst, const cf_filter *src, unsigned threads)
{
    if (cf__cannot_fit(dst, src))
        return CF_FULL;
    cf_status st;
    if (cf__kind_of(dst)->flags & CF_CONCURRENT) {
        cf_filter *trial = NULL;
        st = cf__copy_plain(dst, &trial);
        if (st == CF_OK) /* the very path the second run takes: cf__place_fp's */
            st = cf__merge_all(trial, src, false, NULL, 0);
        unsigned ntables = trial ? trial->ntables : 0, stash_n = trial ? trial->stash_n : 0;
        if (trial)
            cf__release(trial);
        if (st == CF_OK) /* what the trial allocated, allocated on dst before it changes */
            st = cf__reserve_like(dst, ntables, stash_n);
        if (st == CF_OK) {
            st = cf__merge_all(dst, src, false, NULL, 0);
            cf__reserve_drop(dst);
        }
        return st;
    }
    cf__merge_undo u;
    if ((st = cf__undo_save(dst, &u)) != CF_OK)
        return st;
    st = cf__merge_all(dst, src, dst->expansion == 0 && dst->ntables == 1, &u, threads);
    if (st != CF_OK)
        cf__undo_apply(dst, &u);
    cf__mfree(dst, u.block);
    return st;
}

cf_status cf_merge_check(const cf_filter *dst, const cf_filter *src, const char **reason)
{
    const char *why = cf__merge_refusal(dst, src);
    if (reason)
        *reason = why;
    return why ? CF_EINVAL : CF_OK;
}

cf_status cf_merge(cf_filter *dst, const cf_filter *src, const char **reason)
{
    return cf_merge_threads(dst, src, 1, reason);
}

cf_status cf_merge_threads(cf_filter *dst, const cf_filter *src, unsigned threads,
                           const char **reason)
{
    const char *why = NULL;
    cf_status st = CF_EINVAL;
    if (dst && dst != src && cf__read_only(dst)) {
        st = CF_EREADONLY;
        why = "the destination is read-only (mapped or loading)";
    } else if ((why = cf__merge_refusal(dst, src)) == NULL) {
        const cf_filter *first = (uintptr_t)dst < (uintptr_t)src ? dst : src;
        const cf_filter *second = first == dst ? src : dst;
        cf__hold(first);
        cf__hold(second);
        st = cf__merge_held(dst, src, threads);
        cf__unhold(second);
        cf__unhold(first);
        why = st == CF_OK     ? NULL
              : st == CF_FULL ? "the merged fingerprints do not fit in the destination"
                              : "out of memory";
    }
    if (reason)
        *reason = why;
    return st;
}
