/*
 * evict.c - inserts whose two buckets are full: the older sub-filters, then the eviction
 * search (a breadth-first search for a path of moves that frees a slot of the key's
 * buckets, compiled per fast shape, plain or synchronized), then growth or the stash; the
 * placement of a merged fingerprint, which takes the same steps; and the planning search
 * of writers beside others, with the commit of its path under its stripes. Deterministic:
 * the same table and key give the same path, whatever memory it runs in.
 */
#include "evict.h"

/* A search on the stack must clear its visited set first, which costs more than the
 * search itself in a filling table (bench/icount.sh shows it, in add_hash). A table of at
 * least this many bytes gets its own search memory, whose set clears by generation, on
 * its first search that needs the set: for the default budget, a small part of such a
 * table. */
#define CF__OWN_SEARCH_MIN_TABLE ((size_t)1 << 20)

/* A search on the stack first tries with this many nodes, checking for a visited bucket by
 * scanning its queue, which needs no visited set to clear; most evictions need fewer
 * nodes. If that is not enough it starts over with more nodes and a visited set
 * (cf__bfs_steps), which finds the same path a single search would. */
#define CF__FIRST_NODES 16u

/* Slots of a bucket whose moves an eviction search fetches ahead: all of them for the
 * bucket sizes that are used (up to 8); larger buckets fetch the first 8. */
#define CF__PREFETCH_SLOTS 8u

/* A search on the stack (cf__evict, cf__plan) that needs more tries this many nodes next,
 * with a visited set of a few hundred bytes to clear, then four times as many, and so on
 * (cf__bfs_steps). */
#define CF__PLAN_MID_NODES 64u

/* Add `bucket` to the visited set of search z; false if it was there. */
static CF__INLINE bool cf__visit(cf__search *z, uint64_t bucket)
{
    if (!z->marks) { /* a small search: the visited buckets are the n queued ones */
        for (uint32_t i = 0; i < z->n; i++)
            if (z->queue[i].bucket == bucket)
                return false;
        return true;
    }
    /* Bucket numbers come from the hash, uniform over the table: the tag's low bits spread
     * them over the set as well as a multiply would. */
    uint32_t tag = (uint32_t)(bucket ^ (bucket >> 32));
    uint64_t mask = UINT64_MAX >> z->shift, i = tag & mask;
    for (;;) {
        cf__mark *m = &z->marks[i];
        if (m->gen != z->gen) {
            m->gen = z->gen;
            m->tag = tag;
            return true;
        }
        if (m->tag == tag)
            return false;
        i = (i + 1) & mask;
    }
}

/* cf__apply_path for a synchronized table, apart from the plain tables' searches (which
 * it would otherwise crowd): a plain bucket's moves inside their sections
 * (cf__path_seq_before), a semi-sorted bucket's writes each a section of its own
 * (cf__sync_slot_set). */
static CF__NOINLINE void cf__apply_path_sync(const cf__shape *s, const cf__node *q, cf__table *t,
                                             uint32_t end, unsigned slot, uint32_t fp)
{
    uint32_t cur = end;
    atomic_uint *open = NULL;
    while (q[cur].parent != CF__ROOT) {
        const cf__node *parent = &q[q[cur].parent];
        uint32_t moved = cf__slot_get(t, s, parent->bucket, q[cur].slot);
        atomic_uint *next = s->semi ? NULL : cf__sync_pair_seq(t, parent->bucket, q[cur].bucket);
        cf__path_seq_before(open, next);
        cf__sync_slot_set(t, q[cur].bucket, slot, moved);
        open = cf__path_seq_after(open, next);
        slot = q[cur].slot;
        cur = q[cur].parent;
    }
    cf__sync_slot_set(t, q[cur].bucket, slot, fp);
    cf__path_seq_after(open, NULL);
}

/* The root's write for the searches of widths read at run time (F = 0), out of line: it
 * then leaves the search loop its registers. Measured by bench/icount.sh (fills of grown
 * and semi-sorted grown filters), against the write inline and against every write of the
 * path out of line; the fast shapes' searches do best with it inline. */
static CF__NOINLINE void cf__slot_set_apart(cf__table *t, const cf__shape *s, uint64_t bucket,
                                            unsigned slot, uint32_t fp)
{
    cf__slot_set(t, s, bucket, slot, fp);
}

/* Make the moves of a found path, from its free end back to a root: each fingerprint
 * steps into the slot its successor just left, and `fp` takes the root's slot. Each is
 * copied before its old slot is overwritten, so that every fingerprint is in one of its
 * buckets at every moment: what the readers of a synchronized table rely on. */
static CF__INLINE void cf__apply_path(const cf__shape *s, const cf__node *q, cf__table *t,
                                      uint32_t end, unsigned slot, uint32_t fp, bool SYNC,
                                      unsigned F, unsigned B)
{
    if (SYNC) {
        cf__apply_path_sync(s, q, t, end, slot, fp);
        return;
    }
    uint32_t cur = end;
    if (F) {              /* constant widths: each step an exclusive or into the bucket's word */
        uint32_t old = 0; /* what the slot being written holds: the free end's, nothing */
        for (; q[cur].parent != CF__ROOT; cur = q[cur].parent) {
            uint64_t word =
                cf__load_fb(cf__bucket_at_fb(t, s, q[q[cur].parent].bucket, F, B), F, B);
            unsigned pre = CF__SEMI_T(F, B) ? cf__semi_word_prefixes(word) : 0;
            uint32_t moved = cf__word_resident_fb(word, pre, q[cur].slot, F, B);
            cf__path_step_fb(t, q[cur].bucket, slot, old, moved, F, B);
            old = moved;
            slot = q[cur].slot;
        }
        cf__path_step_fb(t, q[cur].bucket, slot, old, fp, F, B);
        return;
    }
    while (q[cur].parent != CF__ROOT) {
        const cf__node *parent = &q[q[cur].parent];
        uint32_t moved = cf__slot_get(t, s, parent->bucket, q[cur].slot);
        cf__slot_set(t, s, q[cur].bucket, slot, moved);
        slot = q[cur].slot;
        cur = q[cur].parent;
    }
    cf__slot_set_apart(t, s, q[cur].bucket, slot, fp);
}

/* Slot j of bucket `bucket`: with constant widths (F) from its loaded word (and for a
 * semi-sorted bucket its prefixes), which the caller passes, else from the table. */
static CF__INLINE uint32_t cf__resident_fb(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                           uint64_t word, unsigned pre, unsigned j, unsigned F,
                                           unsigned B)
{
    return F ? cf__word_resident_fb(word, pre, j, F, B) : cf__slot_get_plain(t, s, bucket, j);
}

/* Bucket i's word, as cf__load_fb reads it (the bits above the bucket aside), for a search
 * that plans only (PLAN: through atomic words, beside other writers) or moves too. */
static CF__INLINE uint64_t cf__search_load_fb(const cf__table *t, const cf__shape *s, uint64_t i,
                                              bool PLAN, unsigned F, unsigned B)
{
    if (PLAN)
        return cf__sync_fast_word(t, i, cf__bucket_bytes_fb(F, B));
    return cf__load_fb(cf__bucket_at_fb(t, s, i, F, B), F, B);
}

/* The first free slot of bucket `next` (constant widths F, B): the lowest zero lane, or
 * for a semi-sorted bucket slot 0 when it is empty (empty slots sort first); -1 if none. */
static CF__INLINE int cf__free_slot_fb(const cf__table *t, const cf__shape *s, uint64_t next,
                                       bool PLAN, unsigned F, unsigned B)
{
    return cf__word_free_slot_fb(cf__search_load_fb(t, s, next, PLAN, F, B), F, B);
}

/* The breadth-first search for a path of moves that frees a slot of bucket i1 or i2,
 * which then takes fp. F and B: constant widths for the fast shapes, plain and
 * semi-sorted (a bucket read with one load, its residents taken from the word, a free
 * slot found in it), 0 for every other shape. SYNC: the table is synchronized (its moves
 * are sections). PLAN (fast shapes only): the search reads the table through atomic
 * words, beside writers of other stripes, and moves nothing: the path ends at node
 * z->end, whose slot z->free is free (cf__path_commit makes it). */
static CF__INLINE cf__found cf__bfs_in_fb(const cf__shape *s, cf__table *t, cf__search *z,
                                          uint64_t i1, uint64_t i2, uint32_t fp, bool semi,
                                          bool SYNC, bool PLAN, unsigned F, unsigned B)
{
    /* The residents' fingerprints in the first sub-filter's width, which chooses their
     * alternates: their low bits (all of them but in a wider sub-filter). */
    uint32_t mask0 = (uint32_t)((UINT64_C(1) << (s->f - s->ext)) - 1u);
    unsigned b = F ? (CF__SEMI_T(F, B) ? CF__SEMI_BUCKET : B) : s->b;
    const unsigned seg = s->seg; /* the mapping, read once */
    cf__node *q = z->queue;
    z->n = 0;
    cf__visit(z, i1);
    q[z->n++] = (cf__node){i1, CF__ROOT, 0};
    cf__visit(z, i2);
    q[z->n++] = (cf__node){i2, CF__ROOT, 0};
    uint32_t head = 0;
    if (F && z->seen) {
        /* the levels the insert examined, queued as below, none of them free: the two
         * roots' candidates, then those of each first-level node */
        const cf__seen *v = z->seen;
        for (unsigned c = 0; c < 2u * b; c++) {
            if (!cf__visit(z, v->level1[c]))
                continue;
            if (z->n == z->cap)
                return CF__OUT_OF_NODES;
            q[z->n++] = (cf__node){v->level1[c], c / b, c % b};
        }
        head = 2;
        for (uint32_t end = z->n; v->levels == 2 && head < end; head++) {
            unsigned c = q[head].parent * b + q[head].slot; /* its index in level1 */
            for (unsigned j = 0; j < b; j++) {
                if (!cf__visit(z, v->level2[c * b + j]))
                    continue;
                if (z->n == z->cap)
                    return CF__OUT_OF_NODES;
                q[z->n++] = (cf__node){v->level2[c * b + j], head, j};
            }
        }
    }
    for (; head < z->n; head++) {
        uint64_t bucket = q[head].bucket;
        /* Every resident's other bucket is fetched at once before any is examined: how
         * each check goes is a coin toss at high load, and a mispredicted branch would
         * otherwise wait for one read after another. */
        /* A semi-sorted bucket is decoded once, its 4 slots at a time. */
        uint64_t nexts[CF__PREFETCH_SLOTS];
        uint32_t semi_fps[CF__SEMI_BUCKET];
        unsigned ahead = b < CF__PREFETCH_SLOTS ? b : CF__PREFETCH_SLOTS;
        uint64_t word = F ? cf__search_load_fb(t, s, bucket, PLAN, F, B) : 0;
        unsigned pre = F && semi ? cf__semi_word_prefixes(word) : 0;
        if (semi && !F)
            cf__semi_get(t, s, bucket, semi_fps);
        for (unsigned j = 0; j < ahead; j++) {
            uint32_t resident =
                semi && !F ? semi_fps[j] : cf__resident_fb(t, s, bucket, word, pre, j, F, B);
            nexts[j] = cf__alt_of0_seg(t, bucket, resident & mask0, seg);
            if (F)
                cf__prefetch_fb(t, s, nexts[j], true, F, B);
            else
                cf__bucket_prefetch(t, s, nexts[j], true);
        }
        for (unsigned j = 0; j < b; j++) {
            uint64_t next =
                j < ahead
                    ? nexts[j]
                    : cf__alt_of0_seg(t, bucket,
                                      cf__resident_fb(t, s, bucket, word, pre, j, F, B) & mask0,
                                      seg);
            if (!cf__visit(z, next))
                continue;
            if (z->n == z->cap)
                return CF__OUT_OF_NODES;
            q[z->n] = (cf__node){next, head, j};
            int free_slot =
                F ? cf__free_slot_fb(t, s, next, PLAN, F, B) : cf__bucket_find(t, s, next, 0);
            if (free_slot >= 0) {
                if (PLAN) {
                    z->end = z->n;
                    z->free = (unsigned)free_slot;
                } else {
                    cf__apply_path(s, q, t, z->n, (unsigned)free_slot, fp, SYNC, F, B);
                }
                return CF__MOVED;
            }
            z->n++;
        }
    }
    return CF__NO_PATH;
}

/* The search on a copy of z in the frame, copied back: the visited set's stores (32-bit
 * words, as some of z's fields are) would otherwise make the compiler load z's fields
 * again after each, and store the queue's count at every node. */
static CF__INLINE cf__found cf__bfs_fb(const cf__shape *s, cf__table *t, cf__search *z, uint64_t i1,
                                       uint64_t i2, uint32_t fp, bool semi, bool SYNC, bool PLAN,
                                       unsigned F, unsigned B)
{
    cf__search local = *z;
    cf__found r = cf__bfs_in_fb(s, t, &local, i1, i2, fp, semi, SYNC, PLAN, F, B);
    *z = local;
    return r;
}

/* The search compiled for the table's code, plain or synchronized (SYNC), or planning
 * only (PLAN: fast shapes). */
static CF__INLINE cf__found cf__bfs_code(const cf__shape *s, cf__table *t, cf__search *z,
                                         uint64_t i1, uint64_t i2, uint32_t fp, bool SYNC,
                                         bool PLAN)
{
    switch (cf__code_of(s)) {
#define CF__BFS_CASE(F, B)                                                                         \
    case CF__CODE_##F##_##B:                                                                       \
        return cf__bfs_fb(s, t, z, i1, i2, fp, false, SYNC, PLAN, F, B);
        CF__FAST_SHAPES(CF__BFS_CASE)
#undef CF__BFS_CASE
#define CF__BFS_SEMI_CASE(F)                                                                       \
    case CF__CODE_SEMI_##F:                                                                        \
        return cf__bfs_fb(s, t, z, i1, i2, fp, true, SYNC, PLAN, F, CF__SEMI_B);
        CF__SEMI_FAST_SHAPES(CF__BFS_SEMI_CASE)
#undef CF__BFS_SEMI_CASE
    default:
        if (PLAN) /* widths read at run time read the table plainly: the caller's lock */
            return CF__OUT_OF_NODES;
        return s->semi ? cf__bfs_fb(s, t, z, i1, i2, fp, true, SYNC, false, 0, 0)
                       : cf__bfs_fb(s, t, z, i1, i2, fp, false, SYNC, false, 0, 0);
    }
}

/* A synchronized table's search: compiled apart, so that a plain table's does not test
 * for its writes. */
static CF__NOINLINE cf__found cf__bfs_sync(const cf__shape *s, cf__table *t, cf__search *z,
                                           uint64_t i1, uint64_t i2, uint32_t fp)
{
    return cf__bfs_code(s, t, z, i1, i2, fp, true, false);
}

/* Search for room for fp in the full buckets i1 and i2 of t by moving residents to their
 * other buckets, with z->cap nodes. Breadth-first: every resident of a bucket on the
 * frontier is a candidate, so the path found is the shortest within the budget, and it
 * is planned completely before anything moves. A failed search therefore changes
 * nothing, and the result depends only on the table's contents: replaying the same
 * operations gives the same table. Each bucket enters the search once, so a path never
 * passes through a bucket twice. */
static cf__found cf__bfs(const cf__shape *s, cf__table *t, cf__search *z, uint64_t i1, uint64_t i2,
                         uint32_t fp)
{
    if (CF__UNLIKELY(s->sync))
        return cf__bfs_sync(s, t, z, i1, i2, fp);
    return cf__bfs_code(s, t, z, i1, i2, fp, false, false);
}

static CF__NOINLINE cf__found cf__bfs_plan(const cf__shape *s, cf__table *t, cf__search *z,
                                           uint64_t i1, uint64_t i2, uint32_t fp);

/* Search with the filter's own memory: a new generation makes every mark stale. seen is
 * this search's alone (cf__search). */
static CF__INLINE cf__found cf__bfs_own(cf__search *own, cf__table *t, uint64_t i1, uint64_t i2,
                                        uint32_t fp, const cf__seen *seen)
{
    if (++own->gen == 0) { /* wrapped: stale entries could look current */
        memset(own->marks, 0, ((size_t)1 << (64u - own->shift)) * sizeof(cf__mark));
        own->gen = 1;
    }
    own->seen = seen;
    cf__found r = cf__bfs(t->shape, t, own, i1, i2, fp);
    own->seen = NULL;
    return r;
}

/* The rest of a search on the stack whose first CF__FIRST_NODES nodes (z, no visited set)
 * found no path: CF__PLAN_MID_NODES nodes, then four times as many, and so on up to
 * `budget`, each step starting over with a visited set of its size (in `marks`) to clear
 * (a cleared set for the whole budget, 8 KiB for the default, cost as many instructions
 * as the search); CF__OUT_OF_NODES past `most`, the memory's room. Breadth-first in the
 * same order, each step finds the path one search of the whole budget would. PLAN: a
 * planning search (cf__bfs_plan), else cf__bfs. */
static cf__found cf__bfs_steps(cf__table *t, cf__search *z, cf__mark *marks, uint32_t budget,
                               uint32_t most, bool plan, uint64_t i1, uint64_t i2, uint32_t fp)
{
    cf__node *queue = z->queue;
    cf__found r = CF__OUT_OF_NODES;
    for (uint32_t cap = CF__PLAN_MID_NODES; r == CF__OUT_OF_NODES && z->cap < budget; cap *= 4u) {
        if (cap >= budget)
            cap = budget;
        if (cap > most)
            return CF__OUT_OF_NODES;
        unsigned bits = cf__mark_bits(cap);
        memset(marks, 0, ((size_t)1 << bits) * sizeof(cf__mark));
        *z = (cf__search){queue, marks, cap, 64u - bits, 1, 0, 0, 0, z->seen};
        r = plan ? cf__bfs_plan(t->shape, t, z, i1, i2, fp) : cf__bfs(t->shape, t, z, i1, i2, fp);
    }
    return r;
}

/* Find room for fp in the full buckets i1 and i2 of t within f's budget (max_kicks
 * buckets examined beyond the two), moving residents if a path exists; false if none.
 * Inline: the insert that calls it keeps its frame. seen: as cf__search has it. */
static CF__INLINE bool cf__evict(cf_filter *f, cf__table *t, uint64_t i1, uint64_t i2, uint32_t fp,
                                 const cf__seen *seen)
{
    uint32_t budget = f->max_kicks + 2u;
    cf__search *own = cf__search_of(f);
    if (own)
        return cf__bfs_own(own, t, i1, i2, fp, seen) == CF__MOVED;
    cf__node queue[CF__STACK_NODES];
    cf__mark marks[2 * CF__STACK_NODES];
    cf__search z = {queue, NULL, budget < CF__FIRST_NODES ? budget : CF__FIRST_NODES, 0, 1, 0, 0,
                    0,     seen};
    cf__found r = cf__bfs(t->shape, t, &z, i1, i2, fp);
    if (r != CF__OUT_OF_NODES || z.cap == budget)
        return r == CF__MOVED;
    /* The same search with the whole budget finds the same path (breadth-first, in the
     * same order), wherever its memory is. */
    if (cf__table_size(t->shape, t->buckets) >= CF__OWN_SEARCH_MIN_TABLE &&
        (own = cf__own_search(f, budget)) != NULL)
        return cf__bfs_own(own, t, i1, i2, fp, seen) == CF__MOVED;
    return cf__bfs_steps(t, &z, marks, budget, CF__STACK_NODES, false, i1, i2, fp) == CF__MOVED;
}

bool cf__search_ready(cf_filter *f)
{
    return cf__search_of(f) ||
           cf__table_size(f->t0.shape, f->t0.buckets) < CF__OWN_SEARCH_MIN_TABLE ||
           cf__own_search(f, f->max_kicks + 2u) != NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Inserts whose buckets are full                                                       */
/* ------------------------------------------------------------------------------------ */

/* Append a sub-filter `expansion` times the size of the newest and put the key in it. */
static cf_status cf__grow(cf_filter *f, const cf__key *k)
{
    cf__table *t;
    cf_status st = cf__table_append(f, &t);
    if (st != CF_OK)
        return st;
    uint64_t i1, i2;
    cf__buckets(t, k, &i1, &i2);
    /* An empty table always has room. Readers see none of it before the count. */
    cf__put_if_free(t, t->shape, i1, cf__fp_in(k, t));
    cf__table_publish(f);
    return CF_OK;
}

/* An insert whose buckets n1 and n2 in the newest sub-filter are both full: the older
 * sub-filters, then an eviction search, then growth or the stash. Off the fast path. */
static CF__INLINE cf_status cf__insert_rest(cf_filter *f, const cf__key *k, uint64_t n1,
                                            uint64_t n2, const cf__seen *seen)
{
    cf__table *newest = &f->tables[f->ntables - 1];
    const cf__shape *s = newest->shape;
    uint32_t fp = cf__fp_in(k, newest);
    uint64_t i1, i2;
    for (unsigned n = f->ntables - 1; n-- > 0;) {
        cf__table *t = &f->tables[n];
        uint32_t fp_t = cf__fp_in(k, t);
        cf__buckets(t, k, &i1, &i2);
        if (cf__table_put(t, i1, fp_t) || cf__table_put(t, i2, fp_t))
            return CF_OK;
    }
    /* When both buckets hold nothing but this fingerprint, no move can help (every
     * resident's other bucket is the other one). It is one key added 2b times, or keys
     * that share fingerprint and bucket pair (common when b * f is small). A growing
     * filter says full: growing for one hot key is how filters balloon. A fixed filter
     * may still stash it, like any key that found no room. */
    bool hot = cf__bucket_all(newest, s, n1, fp) && cf__bucket_all(newest, s, n2, fp);
    if (!hot && cf__evict(f, newest, n1, n2, fp, seen)) {
        newest->items++;
        return CF_OK;
    }
    cf_status st = hot ? CF_FULL : cf__grow(f, k);
    /* The last resort of a filter that cannot grow; never a way round the hot-key rule. */
    if (st == CF_FULL && (!hot || f->expansion == 0) && f->stash_n < CF__STASH_SLOTS) {
        if (!cf__stash_room(f))
            return CF_ENOMEM; /* nothing has changed */
        cf__stash_push(f, (cf__stash){n1, fp, f->ntables - 1});
        return CF_OK;
    }
    return st;
}

/* Whether sub-filter t can hold fingerprints of sub-filter `from` (of a filter of the same
 * seed and first size), and if so, into *i the bucket of t that bucket x of `from` reduces
 * to: t's scale must divide from's, and its fingerprints be no wider (the low bits of
 * from's). Equal scales, the common case, take no division. */
static bool cf__takes(const cf__table *t, const cf__table *from, uint64_t x, uint64_t *i)
{
    uint64_t sf = cf__scale_of(from), st = cf__scale_of(t);
    if (t->shape->ext > from->shape->ext || (sf != st && sf % st != 0))
        return false;
    *i = sf == st ? x : x / (sf / st);
    return true;
}

cf_status cf__place_fp(cf_filter *f, const cf__table *from, uint64_t x, uint32_t fp)
{
    cf__table *newest = NULL;
    uint64_t n1 = 0, n2 = 0;
    uint32_t nfp = 0;
    unsigned nk = 0;
    /* A free slot in the newest sub-filter that takes it, then in older ones, as an insert
     * looks; the first sub-filter takes any. */
    for (unsigned k = f->ntables; k-- > 0;) {
        cf__table *t = &f->tables[k];
        uint64_t i1;
        if (!cf__takes(t, from, x, &i1))
            continue;
        uint32_t fp_t = cf__fp_narrow(fp, from, t->shape->ext);
        uint64_t i2 = cf__alt_of(t, i1, fp_t);
        if (cf__table_put(t, i1, fp_t) || cf__table_put(t, i2, fp_t))
            return CF_OK;
        if (!newest) {
            newest = t;
            nk = k;
            n1 = i1;
            n2 = i2;
            nfp = fp_t;
        }
    }
    /* The insert's rules from here: evict within that sub-filter unless the pair holds
     * nothing but this fingerprint, then grow, then the stash. */
    const cf__shape *s = newest->shape;
    bool hot = cf__bucket_all(newest, s, n1, nfp) && cf__bucket_all(newest, s, n2, nfp);
    if (!hot && cf__evict(f, newest, n1, n2, nfp, NULL)) {
        newest->items++;
        return CF_OK;
    }
    cf_status st = CF_FULL;
    cf__table *last = &f->tables[f->ntables - 1];
    uint64_t scale, i = 0;
    /* Growth helps only if the new sub-filter takes it: one no finer than `from`. */
    if (!hot && f->expansion != 0 && cf__mul_u64(cf__scale_of(last), f->expansion, &scale) &&
        cf__scale_of(from) % scale == 0 &&
        cf__ext_of(f->fp_bits, f->widen, f->ntables) <= from->shape->ext) {
        cf__table *t;
        st = cf__table_append(f, &t);
        if (st == CF_OK) {
            (void)cf__takes(t, from, x, &i); /* true: its scale and width are checked above */
            cf__put_if_free(t, t->shape, i, cf__fp_narrow(fp, from, t->shape->ext));
            cf__table_publish(f); /* readers see none of it before this */
            return CF_OK;
        }
    }
    if (st == CF_FULL && (!hot || f->expansion == 0) && f->stash_n < CF__STASH_SLOTS) {
        if (!cf__stash_room(f))
            return CF_ENOMEM;
        cf__stash_push(f, (cf__stash){n1, nfp, nk});
        return CF_OK;
    }
    return st;
}

cf_status cf__insert_rest_h(cf_filter *f, uint64_t h, uint64_t n1, uint64_t n2)
{
    cf__key k = cf__key_bits(f->fp_bits, h);
    return cf__insert_rest(f, &k, n1, n2, NULL);
}

cf_status cf__insert_rest_seen_h(cf_filter *f, uint64_t h, uint64_t n1, uint64_t n2,
                                 const cf__seen *seen)
{
    cf__key k = cf__key_bits(f->fp_bits, h);
    return cf__insert_rest(f, &k, n1, n2, seen);
}

cf_status cf__insert_any(cf_filter *f, uint64_t h)
{
    cf__table *t = &f->tables[f->ntables - 1];
    cf__key k = cf__key_bits(f->fp_bits, h);
    uint32_t fp = cf__fp_in(&k, t);
    uint64_t i1, i2;
    cf__buckets(t, &k, &i1, &i2);
    if (cf__table_put(t, i1, fp) || cf__table_put(t, i2, fp))
        return CF_OK;
    return cf__insert_rest_h(f, h, i1, i2);
}

/* ------------------------------------------------------------------------------------ */
/* Evictions beside other writers (locked.c)                                            */
/* ------------------------------------------------------------------------------------ */

static CF__NOINLINE cf__found cf__bfs_plan(const cf__shape *s, cf__table *t, cf__search *z,
                                           uint64_t i1, uint64_t i2, uint32_t fp)
{
    return cf__bfs_code(s, t, z, i1, i2, fp, true, true);
}

cf__found cf__plan(const cf_filter *f, cf__table *t, uint64_t i1, uint64_t i2, uint32_t fp,
                   cf__search *z, bool own)
{
    /* A budget past the memory is searched by the caller under the writers' lock, where
     * the same search finds the same path. */
    uint32_t budget = f->max_kicks + 2u;
    if (own) {               /* as cf__bfs_own: the whole budget at once */
        if (++z->gen == 0) { /* wrapped: stale entries could look current */
            memset(z->marks, 0, ((size_t)1 << (64u - z->shift)) * sizeof(cf__mark));
            z->gen = 1;
        }
        z->cap = budget < CF__PLAN_NODES ? budget : CF__PLAN_NODES;
        return cf__bfs_plan(t->shape, t, z, i1, i2, fp);
    }
    /* On the stack: cf__evict's steps, whose visited set must be cleared for each search;
     * a middle step clears a small one. */
    cf__node *queue = z->queue;
    cf__mark *marks = z->marks;
    *z = (cf__search){queue, NULL, budget < CF__FIRST_NODES ? budget : CF__FIRST_NODES, 0, 1, 0, 0,
                      0,     NULL};
    cf__found r = cf__bfs_plan(t->shape, t, z, i1, i2, fp);
    if (r != CF__OUT_OF_NODES || z->cap == budget)
        return r;
    return cf__bfs_steps(t, z, marks, budget, CF__PLAN_NODES, true, i1, i2, fp);
}

/* cf__path_commit for a plain fast shape (constant widths F, B): each slot read from its
 * bucket's word, the free end filled as a fill without the stripe may take it meanwhile
 * (table.h, cf__sync_fill_slot_fb: then nothing is written and the path no longer holds),
 * and each later step's write the exclusive or of the slot's old and new fingerprint,
 * inside the sections of the moves it makes and ends (cf__path_seq_before). */
static CF__INLINE bool cf__path_commit_fb(cf__table *t, const cf__search *z, uint32_t fp,
                                          unsigned F, unsigned B)
{
    const cf__node *q = z->queue;
    const unsigned bytes = cf__bucket_bytes_fb(F, B);
    uint32_t moved[CF__PATH_MAX + 1u];
    unsigned n = 0;
    /* Still a path: its free end free, and every step's slot holding a fingerprint whose
     * other bucket is the step's (which one need not matter: any such moves as well). */
    if (cf__word_slot_fb(cf__sync_fast_word(t, q[z->end].bucket, bytes), z->free, F))
        return false;
    for (uint32_t cur = z->end; q[cur].parent != CF__ROOT; cur = q[cur].parent) {
        uint64_t from = q[q[cur].parent].bucket;
        uint32_t v = cf__word_slot_fb(cf__sync_fast_word(t, from, bytes), q[cur].slot, F);
        if (v == 0 || cf__alt_of0(t, from, v) != q[cur].bucket || n == CF__PATH_MAX)
            return false;
        moved[n++] = v;
    }
    moved[n] = fp; /* what the root's slot takes */
    /* cf__apply_path's order: each copied before its old slot is overwritten. */
    unsigned slot = z->free;
    uint32_t was = 0, cur = z->end;
    atomic_uint *open = NULL;
    for (unsigned k = 0; k <= n; k++) {
        uint64_t bucket = q[cur].bucket;
        atomic_uint *next = k < n ? cf__sync_pair_seq(t, q[q[cur].parent].bucket, bucket) : NULL;
        cf__path_seq_before(open, next);
        uint64_t bit = cf__slot_bit_fb(bucket, slot, F, B);
        if (k > 0) {
            cf__sync_xor_fb(t, bit, was ^ moved[k], F, B);
        } else if (cf__sync_fill_slot_fb(t, bit, moved[0], true, F, B) != CF__FILL_DONE) {
            cf__path_seq_after(next, NULL); /* a section with no write */
            return false;
        }
        open = cf__path_seq_after(open, next);
        was = moved[k];
        slot = q[cur].slot;
        cur = q[cur].parent;
    }
    return true;
}

/* Any other shape a writer of stripes plans for (the semi-sorted fast shapes, whose
 * buckets a write encodes anew). */
static bool cf__path_commit_any(cf__table *t, const cf__search *z, uint32_t fp)
{
    const cf__node *q = z->queue;
    uint32_t moved[CF__PATH_MAX];
    unsigned n = 0;
    if (cf__sync_slot_get(t, q[z->end].bucket, z->free) != 0)
        return false;
    for (uint32_t cur = z->end; q[cur].parent != CF__ROOT; cur = q[cur].parent) {
        uint64_t from = q[q[cur].parent].bucket;
        uint32_t v = cf__sync_slot_get(t, from, q[cur].slot);
        if (v == 0 || cf__alt_of0(t, from, v) != q[cur].bucket || n == CF__PATH_MAX)
            return false;
        moved[n++] = v;
    }
    unsigned slot = z->free, k = 0;
    uint32_t cur = z->end;
    for (; q[cur].parent != CF__ROOT; cur = q[cur].parent) {
        cf__sync_slot_set(t, q[cur].bucket, slot, moved[k++]);
        slot = q[cur].slot;
    }
    cf__sync_slot_set(t, q[cur].bucket, slot, fp);
    return true;
}

bool cf__path_commit(cf__table *t, enum cf__code code, const cf__search *z, uint32_t fp)
{
    switch (code) {
#define CF__COMMIT_CASE(F, B)                                                                      \
    case CF__CODE_##F##_##B:                                                                       \
        return cf__path_commit_fb(t, z, fp, F, B);
        CF__FAST_SHAPES(CF__COMMIT_CASE)
#undef CF__COMMIT_CASE
    default:
        return cf__path_commit_any(t, z, fp);
    }
}
