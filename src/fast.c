/*
 * fast.c - the hot paths: lookups, inserts, deletes and their batched and keyed forms,
 * written once as always-inline templates of the fingerprint width F and bucket size B.
 *
 * Called with constants (a shape of CF__FAST_SHAPES), every mask and width folds into the
 * instructions; called with F = 0, they read the filter's shape and serve every other
 * shape. Out of cache, a lookup waits for two memory reads, and the CPU overlaps those of
 * consecutive lookups only as far as its out-of-order window reaches: the fewer
 * instructions a lookup takes, and the fewer of them wait for the loaded bucket, the more
 * lookups are in flight at once.
 *
 * This file is compiled once per CPU variant (CMakeLists.txt): for baseline x86-64 (and
 * every other architecture) as cf__ops_base, and on x86-64 also with -march=x86-64-v3 as
 * cf__ops_v3, where BMI2's mulx, shlx and shrx take any registers (the baseline mul
 * pins rdx:rax and costs moves and saves) and tzcnt and popcnt are instructions. cpu.c
 * gives each filter one variant's table when it is made, so a call costs the same one
 * indirect jump as with a single variant. Every variant computes the same answers and
 * writes the same bytes: the tests run under both (CUCKOOFILTER_CPU=baseline).
 *
 * Each variant is compiled once more for segmented tables (mapping.h): CF__SEG, their
 * segment bits, is then a constant of every bucket pair computed here, and the filters of
 * each mapping get that mapping's tables (cpu.c).
 */
#include "concurrent.h"

/* The tables this compilation defines, of XXH3 and of hash id 3 (CF_FAST_HASH):
 * CMakeLists.txt sets CF__FAST_V3 for the x86-64-v3 ones and CF__FAST_SEG for the
 * segmented ones. */
#if defined(CF__FAST_SEG) && CF__FAST_SEG
#define CF__SEG CF_SEGMENT_BITS
#if defined(CF__FAST_V3) && CF__FAST_V3
#define CF__OPS_TABLE    cf__ops_v3_seg
#define CF__OPS_TABLE_MS cf__ops_v3_seg_ms
#else
#define CF__OPS_TABLE    cf__ops_base_seg
#define CF__OPS_TABLE_MS cf__ops_base_seg_ms
#endif
#else
#define CF__SEG 0u
#if defined(CF__FAST_V3) && CF__FAST_V3
#define CF__OPS_TABLE    cf__ops_v3
#define CF__OPS_TABLE_MS cf__ops_v3_ms
#else
#define CF__OPS_TABLE    cf__ops_base
#define CF__OPS_TABLE_MS cf__ops_base_ms
#endif
#endif
/* Keys whose buckets the batched calls keep in flight ahead of the one being probed:
 * enough to cover a memory latency at the time a key takes; fewer leave part of it
 * bare, more gain nothing (build/cf-bench-speed, batched lookups far out of cache;
 * docs/PERFORMANCE.md, "Tuned constants"). */
#define CF__AHEAD 16u

/* The key of hash h in the first sub-filter (the only one of the simple state). */
static CF__INLINE cf__key cf__key0_fb(const cf_filter *f, uint64_t h, unsigned F)
{
    return cf__key_bits(F ? F : f->fp_bits, h);
}

/* The key of hash h in sub-filter t. Constant widths serve only sub-filters of the first
 * width (a wider one is of no fast shape); run-time widths serve any, a wider one with its
 * wider fingerprint. */
static CF__INLINE cf__key cf__key_fb(const cf_filter *f, const cf__table *t, uint64_t h, unsigned F)
{
    cf__key k = cf__key0_fb(f, h, F);
    if (!F)
        k.fp = cf__fp_in(&k, t);
    return k;
}

/* A lookup in a filter of one sub-filter and an empty stash (CF__ROW_SIMPLE): two buckets. */
static CF__INLINE bool cf__contains_fb(const cf_filter *f, uint64_t h, unsigned F, unsigned B)
{
    const cf__table *t = &f->t0; /* the simple state's one sub-filter (cf__pick_ops) */
    cf__key k = cf__key0_fb(f, h, F);
    uint64_t i1, i2;
    cf__buckets0_seg_fb(t, &k, &i1, &i2, CF__SEG, F);
    if (!F && !CF__SEMI_T(F, B)) /* a present key found in its first bucket skips the second */
        return cf__bucket_has(t, t->shape, i1, k.fp) || cf__bucket_has(t, t->shape, i2, k.fp);
    return cf__pair_has_fb(t, t->shape, i1, i2, k.fp, F, B);
}

/* The hash of key j of src (hashes, or keys hashed here: HASHED says which, as a constant),
 * and whether key j is valid (cf_contains answers false for a NULL key of nonzero length;
 * so does the batch). */
static CF__INLINE bool cf__source_hash(const cf_filter *f, const cf__source *src, size_t j,
                                       bool hashed, uint64_t *h)
{
    if (hashed) {
        *h = src->hashes[j];
        return true;
    }
    if (!src->keys[j] && src->lens[j]) {
        *h = 0;
        return false;
    }
    *h = cf__hash_key(f, src->keys[j], src->lens[j]);
    return true;
}

/* What a batched lookup keeps of each key between fetching its buckets and probing them,
 * in a ring of CF__AHEAD entries, with copies of the filter's table and shape: out is
 * bool, which may alias anything, and a store through it would otherwise make the compiler
 * reload them from the filter for every key. */
typedef struct cf__pending {
    cf__table t;
    cf__shape s;
    uint64_t i1[CF__AHEAD], i2[CF__AHEAD], h[CF__AHEAD];
    uint32_t fp[CF__AHEAD];
    bool valid[CF__AHEAD];
    /* The plain fast shapes in the simple state (cf__direct_fb) keep instead what the probe
     * reads: the buckets' addresses and the fingerprint's copies, one per lane. */
    const uint8_t *p1[CF__AHEAD], *p2[CF__AHEAD];
    uint64_t fps[CF__AHEAD];
} cf__pending;

/* Does a batch keep addresses and lane copies (cf__pending)? For the plain fast shapes in
 * the simple state, which probe the two buckets only: their addresses, computed for the
 * prefetch, are not computed again, nor the copies of the fingerprint. It saves
 * instructions for buckets of 3, 6 and 8 bytes and costs some for buckets of 2 and 4
 * bytes, whose addresses are one shift (bench/icount.sh, contains_many; docs/PERFORMANCE.md,
 * "Tuned constants"). */
static CF__INLINE bool cf__direct_fb(bool simple, unsigned F, unsigned B)
{
    unsigned bytes = F ? cf__bucket_bytes_fb(F, B) : 0;
    return simple && F && !CF__SEMI_T(F, B) && (bytes == 3 || bytes >= 6);
}

/* Key j of a batch: its hash and buckets, kept in the ring, and the fetch of its buckets. */
static CF__INLINE void cf__stage_fb(const cf_filter *f, const cf__source *src, size_t j,
                                    cf__pending *q, bool simple, bool direct, bool hashed,
                                    unsigned F, unsigned B)
{
    size_t x = j % CF__AHEAD;
    uint64_t h;
    bool valid = cf__source_hash(f, src, j, hashed, &h);
    if (!hashed)
        q->valid[x] = valid;
    cf__key k = simple ? cf__key0_fb(f, h, F) : cf__key_fb(f, &q->t, h, F);
    if (direct) {
        uint64_t i1, i2;
        cf__buckets0_seg_fb(&q->t, &k, &i1, &i2, CF__SEG, F);
        q->p1[x] = cf__bucket_at_fb(&q->t, &q->s, i1, F, B);
        q->p2[x] = cf__bucket_at_fb(&q->t, &q->s, i2, F, B);
        q->fps[x] = cf__fps_fb(k.fp, F, B);
        CF__PREFETCH(q->p1[x], 0);
        CF__PREFETCH(q->p2[x], 0);
        if (cf__bucket_bytes_fb(F, B) != cf__load_bytes_fb(F, B)) { /* may straddle two lines */
            CF__PREFETCH(q->p1[x] + cf__load_bytes_fb(F, B) - 1, 0);
            CF__PREFETCH(q->p2[x] + cf__load_bytes_fb(F, B) - 1, 0);
        }
        return;
    }
    if (simple)
        cf__buckets0_seg_fb(&q->t, &k, &q->i1[x], &q->i2[x], CF__SEG, F);
    else
        cf__buckets_seg_fb(&q->t, &k, &q->i1[x], &q->i2[x], CF__SEG, F);
    q->fp[x] = k.fp;
    q->h[x] = h;
    cf__prefetch_fb(&q->t, &q->s, q->i1[x], false, F, B);
    cf__prefetch_fb(&q->t, &q->s, q->i2[x], false, F, B);
}

/* Key j's answer, without a branch on it in the simple state (whether a present key is
 * in its first or second bucket is a coin toss the predictor would lose). */
static CF__INLINE bool cf__probe_fb(const cf_filter *f, size_t j, const cf__pending *q, bool simple,
                                    bool direct, bool hashed, unsigned F, unsigned B)
{
    size_t x = j % CF__AHEAD;
    if (direct) {
        uint64_t w1 = cf__load_fb(q->p1[x], F, B) ^ q->fps[x],
                 w2 = cf__load_fb(q->p2[x], F, B) ^ q->fps[x];
        bool found = (cf__zero_lanes_fb(w1, F, B) | cf__zero_lanes_fb(w2, F, B)) != 0;
        return found & (hashed || q->valid[x]);
    }
    bool hit = cf__pair_has_fb(&q->t, &q->s, q->i1[x], q->i2[x], q->fp[x], F, B);
    if (!simple && !hit)
        hit = cf__contains_all(f, q->h[x]);
    return hit & (hashed || q->valid[x]);
}

/* Batched lookups: while key p is probed, the buckets of key p + CF__AHEAD are already
 * being fetched, so that up to 2 * CF__AHEAD reads overlap. SIMPLE (a constant: the filter
 * is in the simple state) probes sub-filter 0 alone; otherwise only the newest
 * sub-filter's buckets are prefetched, and a key not found there is looked up completely,
 * as cf_contains_hash would. The loop is split where the ring fills and where it drains,
 * so that its steady state tests nothing but its own end. */
static CF__INLINE void cf__contains_many_fb(const cf_filter *f, const cf__source *src, size_t n,
                                            bool *out, bool simple, bool hashed, unsigned F,
                                            unsigned B)
{
    cf__pending q;
    q.t = simple ? f->t0 : f->tables[f->ntables - 1];
    q.s = *q.t.shape;
    const bool direct = cf__direct_fb(simple, F, B);
    size_t j = 0;
    for (; j < n && j < CF__AHEAD; j++)
        cf__stage_fb(f, src, j, &q, simple, direct, hashed, F, B);
    for (; j < n; j++) {
        out[j - CF__AHEAD] = cf__probe_fb(f, j - CF__AHEAD, &q, simple, direct, hashed, F, B);
        cf__stage_fb(f, src, j, &q, simple, direct, hashed, F, B);
    }
    for (j = n < CF__AHEAD ? 0 : n - CF__AHEAD; j < n; j++)
        out[j] = cf__probe_fb(f, j, &q, simple, direct, hashed, F, B);
}

/* Every fast shape's bucket fits the evictions' arrays (CF__FAST_B_MAX). */
#define CF__B_FITS(F, B)                                                                           \
    _Static_assert((B) <= CF__FAST_B_MAX, "a fast bucket size above CF__FAST_B_MAX");
CF__FAST_SHAPES(CF__B_FITS)
#undef CF__B_FITS
_Static_assert(CF__SEMI_BUCKET <= CF__FAST_B_MAX, "the semi-sorted bucket above CF__FAST_B_MAX");

/* The residents of bucket i of t (constant widths), into res[0 .. b), their other buckets
 * into next[0 .. b), each fetched. */
static CF__INLINE void cf__expand_fb(const cf__table *t, uint64_t i, uint32_t *res, uint64_t *next,
                                     unsigned F, unsigned B)
{
    const bool semi = CF__SEMI_T(F, B);
    const unsigned b = semi ? CF__SEMI_BUCKET : B;
    uint64_t word = cf__load_fb(cf__bucket_at_fb(t, NULL, i, F, B), F, B);
    unsigned pre = semi ? cf__semi_word_prefixes(word) : 0;
    for (unsigned j = 0; j < b; j++) {
        res[j] = cf__word_resident_fb(word, pre, j, F, B);
        next[j] = cf__alt0_seg_fb(t, i, res[j], CF__SEG, F);
        cf__prefetch_fb(t, NULL, next[j], true, F, B);
    }
}

/* The first of buckets next[0 .. n) of t with a free slot: its index, and the slot into
 * *slot; n if none has one. */
static CF__INLINE unsigned cf__first_free_fb(const cf__table *t, const uint64_t *next, unsigned n,
                                             unsigned *slot, unsigned F, unsigned B)
{
    for (unsigned c = 0; c < n; c++) {
        int free_slot = cf__word_free_slot_fb(
            cf__load_fb(cf__bucket_at_fb(t, NULL, next[c], F, B), F, B), F, B);
        if (free_slot >= 0) {
            *slot = (unsigned)free_slot;
            return c;
        }
    }
    return n;
}

/* The evictions of a full pair i1, i2 of a filter's only sub-filter t by one, two or three
 * moves: the path the search (evict.c) finds when that many are enough, as they are for
 * nearly every eviction of a fill (docs/PERFORMANCE.md, "Inserts"); false, nothing
 * changed, when they are not. The search expands its levels breadth-first, each bucket's
 * residents in slot order, and takes the first whose other bucket has a free slot,
 * skipping the buckets it visited. Every bucket it skips is full (a root, or one examined
 * before), and so is every bucket a skipped one leads to (examined when it was first
 * expanded, or now, above it): examining them again finds nothing. So these, which skip
 * nothing, find the same first free bucket, by the same path: each bucket on it is the
 * first occurrence of its own. The caller checks that the budget covers every level
 * examined (max_kicks >= 2b, 2b (1 + b), 2b (1 + b + b^2)) and that t is not synchronized
 * (whose moves are the search's sections). The paths are written as the search's are:
 * the free end first, then up to the root. What the levels examined, in `seen`, is where
 * the next level and the search go on from when they fail.
 *
 * Level 1 (c < 2b): root c / b's resident in slot c % b, seen->level1[c] its other bucket.
 * Every bucket of a level is fetched before the first is examined: each check goes either
 * way at random, and the reads would otherwise wait one after the other. */
static CF__INLINE bool cf__evict_one_fb(cf__table *t, uint64_t i1, uint64_t i2, uint32_t fp,
                                        cf__seen *seen, uint32_t res[CF__LEVEL1_MAX], unsigned F,
                                        unsigned B)
{
    const unsigned b = CF__SEMI_T(F, B) ? CF__SEMI_BUCKET : B, n = 2u * b;
    cf__expand_fb(t, i1, res, seen->level1, F, B);
    cf__expand_fb(t, i2, res + b, seen->level1 + b, F, B);
    seen->levels = 1;
    unsigned slot, c = cf__first_free_fb(t, seen->level1, n, &slot, F, B);
    if (c == n)
        return false;
    cf__path_step_fb(t, seen->level1[c], slot, 0, res[c], F, B);
    cf__path_step_fb(t, c < b ? i1 : i2, c % b, res[c], fp, F, B);
    t->items++;
    return true;
}

/* Level 2 (d < 2b b): the resident of level-1 bucket d / b in slot d % b, seen->level2[d]
 * its other bucket; res and res2 the residents of the levels above. All fetched at once. */
static CF__INLINE bool cf__evict_two_fb(cf__table *t, uint64_t i1, uint64_t i2, uint32_t fp,
                                        cf__seen *seen, const uint32_t res[CF__LEVEL1_MAX],
                                        uint32_t res2[CF__LEVEL2_MAX], unsigned F, unsigned B)
{
    const unsigned b = CF__SEMI_T(F, B) ? CF__SEMI_BUCKET : B, n = 2u * b;
    for (unsigned c = 0; c < n; c++)
        cf__expand_fb(t, seen->level1[c], res2 + c * b, seen->level2 + c * b, F, B);
    seen->levels = 2;
    unsigned slot, d = cf__first_free_fb(t, seen->level2, n * b, &slot, F, B);
    if (d == n * b)
        return false;
    unsigned c = d / b;
    cf__path_step_fb(t, seen->level2[d], slot, 0, res2[d], F, B);
    cf__path_step_fb(t, seen->level1[c], d % b, res2[d], res[c], F, B);
    cf__path_step_fb(t, c < b ? i1 : i2, c % b, res[c], fp, F, B);
    t->items++;
    return true;
}

/* Level 3: the residents of each level-2 bucket in turn, its b other buckets fetched
 * together (as the search fetches a bucket's), a level too wide to fetch at once. */
static CF__INLINE bool cf__evict_three_fb(cf__table *t, uint64_t i1, uint64_t i2, uint32_t fp,
                                          const cf__seen *seen, const uint32_t res[CF__LEVEL1_MAX],
                                          const uint32_t res2[CF__LEVEL2_MAX], unsigned F,
                                          unsigned B)
{
    const unsigned b = CF__SEMI_T(F, B) ? CF__SEMI_BUCKET : B, n = 2u * b;
    for (unsigned d = 0; d < n * b; d++) {
        uint32_t res3[CF__FAST_B_MAX];
        uint64_t next3[CF__FAST_B_MAX];
        cf__expand_fb(t, seen->level2[d], res3, next3, F, B);
        unsigned slot, e = cf__first_free_fb(t, next3, b, &slot, F, B);
        if (e == b)
            continue;
        unsigned c = d / b;
        cf__path_step_fb(t, next3[e], slot, 0, res3[e], F, B);
        cf__path_step_fb(t, seen->level2[d], e, res3[e], res2[d], F, B);
        cf__path_step_fb(t, seen->level1[c], d % b, res2[d], res[c], F, B);
        cf__path_step_fb(t, c < b ? i1 : i2, c % b, res[c], fp, F, B);
        t->items++;
        return true;
    }
    return false;
}

/* An insert whose two buckets in the filter's only sub-filter are full: the one-, two-
 * and three-move evictions, as far as the budget covers them, else the search, from what
 * they examined. Each shape's is a function of its own (cf__add_evict_F_B, passed to the
 * insert as EVICT): the insert's fast path then saves no registers for it. */
typedef cf_status (*cf__evict_fn)(cf_filter *f, uint64_t h, uint32_t fp, uint64_t i1, uint64_t i2);

static CF__INLINE cf_status cf__add_evict_fb(cf_filter *f, uint64_t h, uint32_t fp, uint64_t i1,
                                             uint64_t i2, unsigned F, unsigned B)
{
    const uint32_t b = CF__SEMI_T(F, B) ? CF__SEMI_BUCKET : B, kicks = f->max_kicks;
    /* (F = 0 never comes here: the search alone serves widths read at run time) */
    if (!F || kicks < 2u * b)
        return cf__insert_rest_h(f, h, i1, i2);
    cf__table *t = &f->tables[0];
    cf__seen seen;
    uint32_t res[CF__LEVEL1_MAX], res2[CF__LEVEL2_MAX];
    if (cf__evict_one_fb(t, i1, i2, fp, &seen, res, F, B))
        return CF_OK;
    if (kicks >= 2u * b * (1u + b)) {
        if (cf__evict_two_fb(t, i1, i2, fp, &seen, res, res2, F, B))
            return CF_OK;
        if (kicks >= 2u * b * (1u + b + b * b) &&
            cf__evict_three_fb(t, i1, i2, fp, &seen, res, res2, F, B))
            return CF_OK;
    }
    return cf__insert_rest_seen_h(f, h, i1, i2, &seen);
}

/* An insert whose buckets i1 and i2 in the newest sub-filter are full: the insert's own
 * evictions (EVICT) in a lone unsynchronized sub-filter of a fast shape, else the slow
 * path. */
static CF__INLINE cf_status cf__add_full_at_fb(cf_filter *f, uint64_t h, uint32_t fp, uint64_t i1,
                                               uint64_t i2, cf__evict_fn EVICT, unsigned F)
{
    if (F && f->ntables == 1 && !f->tables[0].shape->sync)
        return EVICT(f, h, fp, i1, i2);
    return cf__insert_rest_h(f, h, i1, i2);
}

/* fp into the first free slot of bucket i1 of t, else of i2; false if both are full. */
static CF__INLINE bool cf__put_pair_fb(cf__table *t, uint64_t i1, uint64_t i2, uint32_t fp,
                                       unsigned F, unsigned B)
{
    /* A loop rather than two calls: the compiler then shares one store between them. */
    uint64_t i[2] = {i1, i2};
    for (unsigned w = 0; w < 2; w++)
        if (cf__put_if_free_fb(t, t->shape, i[w], fp, F, B))
            return true;
    return false;
}

/* Insert of the key of hash h, whose fingerprint is fp and whose buckets in the newest
 * sub-filter are i1 and i2: the first free slot of i1, else of i2, else as above. */
static CF__INLINE cf_status cf__add_at_fb(cf_filter *f, uint64_t h, uint32_t fp, uint64_t i1,
                                          uint64_t i2, cf__evict_fn EVICT, unsigned F, unsigned B)
{
    if (cf__put_pair_fb(&f->tables[f->ntables - 1], i1, i2, fp, F, B))
        return CF_OK;
    return cf__add_full_at_fb(f, h, fp, i1, i2, EVICT, F);
}

/* The same for a single insert, which passes the hash alone (FULL, each shape's
 * cf__add_full_F_B, out of line): the buckets are computed again there, on the few inserts
 * that need them, so that the fast path keeps nothing for it and saves no registers. */
typedef cf_status (*cf__full_fn)(cf_filter *f, uint64_t h);

/* The fingerprint of hash h in the newest sub-filter, and its buckets there. */
static CF__INLINE uint32_t cf__newest_buckets_fb(const cf_filter *f, uint64_t h, uint64_t *i1,
                                                 uint64_t *i2, unsigned F)
{
    const cf__table *t = &f->tables[f->ntables - 1];
    cf__key k = cf__key_fb(f, t, h, F);
    cf__buckets_seg_fb(t, &k, i1, i2, CF__SEG, F);
    return k.fp;
}

static CF__INLINE cf_status cf__add_full_fb(cf_filter *f, uint64_t h, cf__evict_fn EVICT,
                                            unsigned F)
{
    uint64_t i1, i2;
    uint32_t fp = cf__newest_buckets_fb(f, h, &i1, &i2, F);
    return cf__add_full_at_fb(f, h, fp, i1, i2, EVICT, F);
}

static CF__INLINE cf_status cf__add_in_fb(cf_filter *f, uint64_t h, cf__full_fn FULL, bool SIMPLE,
                                          unsigned F, unsigned B)
{
    /* the simple state's one sub-filter: an offset from f, not a pointer to load */
    cf__table *t = SIMPLE ? &f->t0 : &f->tables[f->ntables - 1];
    cf__key k = cf__key_fb(f, t, h, F);
    uint64_t i1, i2;
    cf__buckets_seg_fb(t, &k, &i1, &i2, CF__SEG, F);
    /* i2's line on its way while i1 is tried: an insert that finds i1 full then waits for
     * one memory latency, not two in a row. A fetch, not a load: the insert branches on
     * i1 alone, so that one with room in i1 (most, until the filter is nearly full) waits
     * for nothing else (docs/PERFORMANCE.md, "Inserts", has the measured variants). The
     * batched inserts fetch both buckets as they stage each key. */
    cf__prefetch_fb(t, t->shape, i2, true, F, B);
    return cf__put_pair_fb(t, i1, i2, k.fp, F, B) ? CF_OK : FULL(f, h);
}

static CF__INLINE cf_status cf__add_fb(cf_filter *f, uint64_t h, cf__full_fn FULL, unsigned F,
                                       unsigned B)
{
    return cf__add_in_fb(f, h, FULL, false, F, B);
}

/* The same in the simple state (CF__ROW_SIMPLE). */
static CF__INLINE cf_status cf__add_simple_fb(cf_filter *f, uint64_t h, cf__full_fn FULL,
                                              unsigned F, unsigned B)
{
    return cf__add_in_fb(f, h, FULL, true, F, B);
}

/* Batched inserts, in order: the buckets of the next CF__AHEAD keys in the newest
 * sub-filter are computed and fetched (for writing) while each key goes in, exactly as
 * cf_add_hash (or, with CF_ADD_UNIQUE, cf_add_unique) would put it. A key staged before a
 * growth is placed anew: its buckets were the old newest sub-filter's. */
static CF__INLINE size_t cf__add_many_fb(cf_filter *f, const uint64_t *hashes, size_t n,
                                         unsigned flags, cf_status *status, cf__evict_fn EVICT,
                                         unsigned F, unsigned B)
{
    uint64_t i1[CF__AHEAD], i2[CF__AHEAD];
    uint32_t fp[CF__AHEAD];
    unsigned staged_in[CF__AHEAD]; /* f->ntables when the key was staged */
    size_t added = 0, j = 0;
    for (; j < n + CF__AHEAD; j++) {
        if (j >= CF__AHEAD) {
            size_t p = j - CF__AHEAD, x = p % CF__AHEAD;
            cf_status st;
            /* f->ops, not this shape's simple lookup: an insert before may have grown or
             * stashed, and ops follows the state. */
            if ((flags & CF_ADD_UNIQUE) && f->ops->contains(f, hashes[p]))
                st = CF_EXISTS;
            else if (CF__LIKELY(staged_in[x] == f->ntables))
                st = cf__add_at_fb(f, hashes[p], fp[x], i1[x], i2[x], EVICT, F, B);
            else if (F && f->tables[f->ntables - 1].shape->ext != 0)
                break; /* grown into a wider sub-filter, which constant widths do not serve */
            else {     /* staged before a growth: placed anew in the newest sub-filter */
                fp[x] = cf__newest_buckets_fb(f, hashes[p], &i1[x], &i2[x], F);
                st = cf__add_at_fb(f, hashes[p], fp[x], i1[x], i2[x], EVICT, F, B);
            }
            added += st == CF_OK;
            if (status)
                status[p] = st;
        }
        if (j < n) {
            size_t x = j % CF__AHEAD;
            const cf__table *t = &f->tables[f->ntables - 1];
            cf__key k = cf__key_fb(f, t, hashes[j], F);
            cf__buckets_seg_fb(t, &k, &i1[x], &i2[x], CF__SEG, F);
            fp[x] = k.fp;
            staged_in[x] = f->ntables;
            cf__prefetch_fb(t, t->shape, i1[x], true, F, B);
            cf__prefetch_fb(t, t->shape, i2[x], true, F, B);
        }
    }
    if (CF__UNLIKELY(j < n + CF__AHEAD)) { /* the rest, by the filter's operations as it is now */
        size_t p = j - CF__AHEAD;
        added += f->ops->add_many(f, hashes + p, n - p, flags, status ? status + p : NULL);
    }
    return added;
}

/* Delete in a filter of one sub-filter and an empty stash: the first slot holding the
 * fingerprint, first bucket first, is cleared, as the slow path (cf__delete_all) would
 * choose. */
static CF__INLINE cf_status cf__delete_fb(cf_filter *f, uint64_t h, unsigned F, unsigned B)
{
    if (!F)
        return cf__delete_all(f, h);
    cf__table *t = &f->t0;
    cf__key k = cf__key0_fb(f, h, F);
    uint64_t i1, i2;
    cf__buckets0_seg_fb(t, &k, &i1, &i2, CF__SEG, F);
    if (CF__SEMI_T(F, B)) {
        /* Both buckets compared at once; the lowest bit of a match is the first slot's
         * (cf__zero_lanes_fb), which the bucket then drops and re-sorts. */
        uint64_t m1 = cf__semi_match_fb(t, i1, k.fp, F), m2 = cf__semi_match_fb(t, i2, k.fp, F);
        if (!(m1 | m2))
            return CF_NOT_FOUND;
        uint64_t m = m1 ? m1 : m2;
        uint8_t *p = cf__bucket_at_fb(t, NULL, m1 ? i1 : i2, F, B);
        cf__store_fb(p,
                     cf__semi_remove_word_fb(cf__load_fb(p, F, B), cf__semi_match_slot_fb(m, F), F),
                     F, B);
        t->items--;
        return CF_OK;
    }
    return cf__pair_remove_fb(t, t->shape, i1, i2, k.fp, F, B) ? CF_OK : CF_NOT_FOUND;
}

/* What the fast lookup reads of the shared state besides `meta`: the first sub-filter
 * (cf__cc_table0) and its stripe counters, which never change while readers may run. */
typedef struct cf__cc_first {
    cf__table t;
    atomic_uint *stripes;
} cf__cc_first;

static CF__INLINE cf__cc_first cf__cc_first_of(const struct cf__cc *cc)
{
    return (cf__cc_first){.t = cf__cc_table0(cc), .stripes = cc->stripes0};
}

/* Can the fast lookup serve a concurrent filter whose meta is m (of shape s, the first
 * sub-filter's)? The simple state, and a bucket of one load: a fast shape's, or one read
 * at run time that fits the 8 bytes from its first byte (s->bucket_mask). */
static CF__INLINE bool cf__cc_fast_ok(unsigned m, const cf__shape *s, unsigned F)
{
    return !(m & CF__CC_META_NOT_SIMPLE) && (F || s->bucket_mask);
}

/* The fast lookup of key h (fingerprint fp, buckets i1 and i2 in the first sub-filter),
 * once cf__cc_fast_ok said yes; table.h ("Synchronized tables") has the argument. Its two buckets
 * are read through aligned atomic words between two reads of the counter their moves go under: a
 * fingerprint found is an answer, and no fingerprint is one if no such move began meanwhile.
 * `meta` need not be read again: a key whose add returned before `meta` said "simple" is
 * in the first sub-filter, which growth leaves in place, and the stash was empty.
 * Anything else (a move in between) goes to the lookup of every state, which reads again
 * until it gets one answer. No loop here: the few values a try needs then stay in
 * registers. */
static CF__INLINE bool cf__cc_probe_fb(const cf_filter *f, const cf__cc_first *c, uint64_t h,
                                       uint32_t fp, uint64_t i1, uint64_t i2, unsigned F,
                                       unsigned B)
{
    const cf__table *t = &c->t;
    const cf__shape *s = t->shape;
    /* the pair's counter, or a semi-sorted shape's two buckets' (table.h) */
    const bool semi = F ? CF__SEMI_T(F, B) : s->semi;
    atomic_uint *c1 =
        &c->stripes[semi ? i1 >> CF__SYNC_STRIPE_SHIFT : cf__sync_pair_stripe(i1, i2)];
    atomic_uint *c2 = &c->stripes[i2 >> CF__SYNC_STRIPE_SHIFT];
    /* two counters in one register: fewer live values, no spill */
    uint64_t v = atomic_load_explicit(c1, memory_order_acquire);
    if (semi)
        v |= (uint64_t)atomic_load_explicit(c2, memory_order_acquire) << 32;
    bool found;
    if (F) {
        const unsigned bytes = cf__bucket_bytes_fb(F, B);
        uint64_t w1 = cf__sync_fast_word(t, i1, bytes), w2 = cf__sync_fast_word(t, i2, bytes);
        found = (cf__word_match_fb(w1, fp, F, B) | cf__word_match_fb(w2, fp, F, B)) != 0;
    } else {
        uint64_t b1 = cf__bucket_bit(s, i1), b2 = cf__bucket_bit(s, i2);
        uint64_t w1 = cf__sync_bucket_word(t, b1, s->bucket_mask);
        uint64_t w2 = cf__sync_bucket_word(t, b2, s->bucket_mask);
        if (CF__SEMI_T(F, B))
            found = (cf__semi_match1_word(s, w1, fp) | cf__semi_match1_word(s, w2, fp)) != 0;
        else
            found = (cf__lanes_equal(s, w1, fp) | cf__lanes_equal(s, w2, fp)) != 0;
    }
    /* The counters are checked whether or not it found the fingerprint, with no branch on
     * the buckets' contents until then: a branch that waits for a bucket's cache miss and
     * then goes the other way half the time would discard the next lookups' loads, which
     * the processor has started meanwhile. */
    atomic_thread_fence(memory_order_acquire);
    uint64_t u = atomic_load_explicit(c1, memory_order_relaxed);
    if (semi)
        u |= (uint64_t)atomic_load_explicit(c2, memory_order_relaxed) << 32;
    bool still = ((v & CF__SYNC_ODD_PAIR) | (u ^ v)) == 0;
    if (CF__LIKELY(found | still))
        return found;
    return cf__cc_contains(f, h);
}

static CF__INLINE bool cf__cc_contains_fb(const cf_filter *f, uint64_t h, unsigned F, unsigned B)
{
    const struct cf__cc *cc = cf__cc_of(f);
    unsigned m = atomic_load_explicit((atomic_uint *)(uintptr_t)&cc->meta, memory_order_acquire);
    if (CF__UNLIKELY(!cf__cc_fast_ok(m, cc->shape0, F)))
        return cf__cc_contains(f, h);
    cf__key k = cf__key0_fb(f, h, F);
    uint64_t i1, i2;
    cf__buckets0_seg_fb(&(cf__table){.buckets = cc->buckets0}, &k, &i1, &i2, CF__SEG, F);
    const cf__cc_first c = cf__cc_first_of(cc);
    return cf__cc_probe_fb(f, &c, h, k.fp, i1, i2, F, B);
}

/* Batched lookups of a concurrent filter: each key as cf__cc_contains_fb, with the buckets
 * of the key CF__AHEAD places further fetched meanwhile. Each key checks `meta` again
 * when its turn comes: a key whose add returned before then is found, even if the filter
 * grew since the batch began. HASHED as in cf__contains_many_fb. */
static CF__INLINE void cf__cc_contains_many_fb(const cf_filter *f, const cf__source *src, size_t n,
                                               bool *out, bool hashed, unsigned F, unsigned B)
{
    const struct cf__cc *cc = cf__cc_of(f);
    atomic_uint *meta = (atomic_uint *)(uintptr_t)&cc->meta;
    /* what the probes read besides meta, loaded once (it never changes while readers run):
     * meta's acquire load would make each probe load it again */
    const cf__cc_first c = cf__cc_first_of(cc);
    const cf__shape *s = c.t.shape;
    cf__pending q;
    q.t = c.t;
    q.s = *s;
    for (size_t j = 0; j < n + CF__AHEAD; j++) {
        if (j >= CF__AHEAD) {
            size_t p = j - CF__AHEAD, x = p % CF__AHEAD;
            unsigned m = atomic_load_explicit(meta, memory_order_acquire);
            bool hit = cf__cc_fast_ok(m, s, F)
                           ? cf__cc_probe_fb(f, &c, q.h[x], q.fp[x], q.i1[x], q.i2[x], F, B)
                           : cf__cc_contains(f, q.h[x]);
            out[p] = hit & (hashed || q.valid[x]);
        }
        if (j < n)
            cf__stage_fb(f, src, j, &q, true, false, hashed, F, B);
    }
}

/* Writers of stripes (concurrent.h; locked.c has the argument). Constant widths only: a
 * shape read at run time is no cc->par shape, and its writers take the lock. Each
 * template has two forms. The first takes its stripes only if they are free, else calls
 * the second (WAIT), which waits for them: the first then calls nothing it must come back
 * from, and keeps its values in registers it need not save. */

/* The stripes of buckets i1 and i2 taken, waiting, in ascending order (as every writer
 * that waits for several takes them), into st: st[0] <= st[1], equal if they share one.
 * False, with neither held, if the filter is in a state writers of stripes may not write
 * (cf__cc_stripe_lock). */
static CF__INLINE bool cf__pair_lock(const struct cf__cc *cc, uint64_t i1, uint64_t i2,
                                     uint64_t st[2])
{
    uint64_t a = i1 >> CF__SYNC_STRIPE_SHIFT, b = i2 >> CF__SYNC_STRIPE_SHIFT;
    st[0] = a < b ? a : b;
    st[1] = a < b ? b : a;
    if (!cf__cc_stripe_lock(cc, st[0]))
        return false;
    /* (holding one, the state cannot change: the second is held only by writers) */
    if (st[1] != st[0] && !cf__cc_stripe_lock(cc, st[1])) {
        cf__sync_unlock(cc->locks0, st[0]);
        return false;
    }
    return true;
}

/* What cf__cc_each_fb did. */
enum cf__cc_done {
    CF__CC_DONE,    /* fp put or removed */
    CF__CC_NEITHER, /* neither bucket had room for fp (a put) or held it (a removal) */
    CF__CC_BUSY,    /* a stripe was busy, and WAIT was not given */
    CF__CC_LOCK     /* the filter is in another state: the lock's writers take over */
};

/* fp put into (ADD) or removed from bucket i1, else bucket i2, of the first sub-filter,
 * each bucket under its own stripe alone, taken in turn (half the lock words a pair takes,
 * and they are what writers of other buckets share most). A stripe taken says the state
 * is the simple one (every stripe is held in any other: cf__cc_stripe_lock), so the
 * first form, which only tries, checks nothing more; `meta`, read only for a busy stripe,
 * says whether another writer holds it or the state does. The slot is the one the plain
 * filter's put or delete chooses. A removal that finds fp in neither bucket proves
 * nothing: fp may have moved from i2 to i1 between the two. */
static CF__INLINE enum cf__cc_done cf__cc_each_fb(const cf_filter *f, const struct cf__cc *cc,
                                                  uint32_t fp, uint64_t i1, uint64_t i2, bool ADD,
                                                  bool WAIT, unsigned F, unsigned B)
{
    cf__table t = cf__cc_table0(cc);
    atomic_uint *locks = cc->locks0;
    /* i2's read under way while i1 is tried (a put that finds i1 full would otherwise wait
     * for it after i1's); for reading only: writers of i2's stripe keep its line */
    if (ADD)
        cf__prefetch_fb(&t, t.shape, i2, false, F, B);
    /* the bucket by value, i1 then i2 (over an array of the two, gcc kept it in memory) */
    for (uint64_t i = i1;; i = i2) {
        uint64_t stripe = i >> CF__SYNC_STRIPE_SHIFT;
        /* (a busy stripe's cc taken from f anew: the hot path keeps no register for it) */
        if (!WAIT && !cf__sync_trylock(locks, stripe))
            return cf__cc_par(cf__cc_of(f)) ? CF__CC_BUSY : CF__CC_LOCK;
        if (WAIT && !cf__cc_stripe_lock(cc, stripe))
            return CF__CC_LOCK;
        atomic_uint *seq = &cc->stripes0[stripe];
        bool done =
            ADD ? cf__sync_put_fb(&t, seq, i, fp, F, B) : cf__sync_remove_fb(&t, seq, i, fp, F, B);
        cf__sync_unlock_n(locks, stripe, done ? (ADD ? 1 : -1) : 0);
        if (done)
            return CF__CC_DONE;
        if (i == i2)
            return CF__CC_NEITHER;
    }
}

/* The add of key h, whose fingerprint is fp and whose buckets in the first sub-filter are
 * i1 and i2: a put (cf__cc_each_fb), then an eviction, else the lock (locked.c). */
static CF__INLINE cf_status cf__cc_add_at_fb(cf_filter *f, const struct cf__cc *cc, uint64_t h,
                                             uint32_t fp, uint64_t i1, uint64_t i2, bool WAIT,
                                             cf_status (*wait)(cf_filter *, uint64_t), unsigned F,
                                             unsigned B)
{
    switch (cf__cc_each_fb(f, cc, fp, i1, i2, true, WAIT, F, B)) {
    case CF__CC_DONE:
        return CF_OK;
    case CF__CC_NEITHER:
        return cf__cc_add_full(f, h, fp, i1, i2);
    case CF__CC_BUSY:
        return wait(f, h);
    default:
        return cf__cc_add_locked(f, h, false);
    }
}

static CF__INLINE cf_status cf__cc_add_fb(cf_filter *f, uint64_t h, bool WAIT,
                                          cf_status (*wait)(cf_filter *, uint64_t), unsigned F,
                                          unsigned B)
{
    const struct cf__cc *cc = cf__cc_of(f);
    if (!F)
        return cf__cc_add_locked(f, h, false);
    cf__key k = cf__key0_fb(f, h, F);
    uint64_t i1, i2;
    cf__buckets0_seg_fb(&(cf__table){.buckets = cc->buckets0}, &k, &i1, &i2, CF__SEG, F);
    return cf__cc_add_at_fb(f, cc, h, k.fp, i1, i2, WAIT, wait, F, B);
}

/* A unique add: its pair's stripes held across its check and its put, or its eviction,
 * which takes the path's other stripes without waiting. */
static CF__INLINE cf_status cf__cc_add_unique_at_fb(cf_filter *f, const struct cf__cc *cc,
                                                    uint64_t h, uint32_t fp, uint64_t i1,
                                                    uint64_t i2, unsigned F, unsigned B)
{
    cf__table t = cf__cc_table0(cc);
    atomic_uint *locks = cc->locks0;
    uint64_t st[2], pair[2] = {i1, i2};
    if (!cf__pair_lock(cc, i1, i2, st))
        return cf__cc_add_locked(f, h, true);
    unsigned n = 1u + (st[0] != st[1]);
    int r = -1; /* -1: the lock's */
    uint64_t w1 = cf__sync_fast_word(&t, i1, cf__bucket_bytes_fb(F, B));
    uint64_t w2 = cf__sync_fast_word(&t, i2, cf__bucket_bytes_fb(F, B));
    if (cf__word_match_fb(w1, fp, F, B) | cf__word_match_fb(w2, fp, F, B))
        r = CF_EXISTS;
    for (unsigned w = 0; w < 2 && r < 0; w++) {
        uint64_t stripe = pair[w] >> CF__SYNC_STRIPE_SHIFT;
        if (cf__sync_put_fb(&t, &cc->stripes0[stripe], pair[w], fp, F, B)) {
            cf__sync_count(locks, stripe, +1);
            r = CF_OK;
        }
    }
    if (r < 0 && cf__cc_evict(f, &t, pair, fp, st, n, false))
        r = CF_OK;
    for (unsigned k = n; k-- > 0;)
        cf__sync_unlock(locks, st[k]);
    return r >= 0 ? (cf_status)r : cf__cc_add_locked(f, h, true);
}

/* A delete beside other writers, the slot chosen as the fast delete would choose it. The
 * first form removes fp from bucket i1 under its stripe alone, else from i2 under its
 * (cf__cc_each_fb): one lock at a time, where a pair's two stripes are two. Anything else
 * (fp in neither bucket, a busy stripe) goes to the waiting form, which holds both
 * stripes: only under both is "in neither" an answer, since a fingerprint moving between
 * them is in one or the other for anyone who holds both. */
static CF__INLINE cf_status cf__cc_delete_fb(cf_filter *f, uint64_t h, bool WAIT,
                                             cf_status (*wait)(cf_filter *, uint64_t), unsigned F,
                                             unsigned B)
{
    const struct cf__cc *cc = cf__cc_of(f);
    if (!F)
        return cf__cc_del_locked(f, h);
    cf__table t = cf__cc_table0(cc);
    atomic_uint *locks = cc->locks0;
    cf__key k = cf__key0_fb(f, h, F);
    uint64_t i1, i2;
    cf__buckets0_seg_fb(&t, &k, &i1, &i2, CF__SEG, F);
    if (!WAIT) {
        switch (cf__cc_each_fb(f, cc, k.fp, i1, i2, false, false, F, B)) {
        case CF__CC_DONE:
            return CF_OK;
        case CF__CC_LOCK:
            return cf__cc_del_locked(f, h);
        default:
            return wait(f, h);
        }
    }
    uint64_t st[2];
    if (!cf__pair_lock(cc, i1, i2, st))
        return cf__cc_del_locked(f, h);
    unsigned from = cf__sync_pair_remove_fb(&t, cc->stripes0, i1, i2, k.fp, F, B);
    /* the item removed is counted in its bucket's stripe, with that stripe's unlock */
    uint64_t s1 = i1 >> CF__SYNC_STRIPE_SHIFT, s2 = i2 >> CF__SYNC_STRIPE_SHIFT;
    int d1 = -(from == 1), d2 = -(from == 2);
    if (s1 != s2)
        cf__sync_unlock_n(locks, s2, d2);
    else
        d1 += d2;
    cf__sync_unlock_n(locks, s1, d1);
    return from ? CF_OK : CF_NOT_FOUND;
}

/* fp into the first free slot of bucket i of the first sub-filter t, for a run of fills:
 * without its stripe, or if that slot lies across two words with its stripe if it is
 * free (a run waits for nothing: see below); CF__FILL_SPLIT if it is not. */
static CF__INLINE enum cf__fill cf__cc_fill_at_fb(const struct cf__cc *cc, cf__table *t, uint64_t i,
                                                  uint32_t fp, unsigned F, unsigned B)
{
    enum cf__fill r = cf__sync_fill_fb(t, i, fp, false, F, B);
    if (r != CF__FILL_SPLIT)
        return r;
    uint64_t stripe = i >> CF__SYNC_STRIPE_SHIFT;
    if (!cf__sync_trylock(cc->locks0, stripe))
        return CF__FILL_SPLIT;
    r = cf__sync_fill_fb(t, i, fp, true, F, B);
    cf__sync_unlock(cc->locks0, stripe); /* (the run counts the item) */
    return r;
}

/* A batched add's fill of fp into bucket i1, else i2, of the first sub-filter, holding
 * no stripe (table.h, "Fills of free slots without the stripe"), in the run of fills on
 * *run, begun if none is under way (*filled: the run's items so far). The slot is the one
 * a single add chooses; with both buckets full, an eviction that takes its path's
 * stripes only if they are free. False, with no run under way, if the add must take the
 * stripes' way: a stripe it needs is busy, or every stripe is held; that way may wait,
 * and a run under way would keep a lock's holder waiting for it meanwhile. */
static CF__INLINE bool cf__cc_fill_fb(const cf_filter *f, struct cf__cc *cc, cf__table *t,
                                      _Atomic uint64_t **run, uint64_t *filled, uint32_t fp,
                                      uint64_t i1, uint64_t i2, unsigned F, unsigned B)
{
    if (*run && cf__cc_fills_stop(cc)) {
        cf__cc_fills_end(*run, *filled);
        *run = NULL;
    }
    if (!*run) {
        _Atomic uint64_t *c = cf__cc_fills_of(cc);
        if (!cf__cc_fills_begin(cc, c))
            return false;
        *run = c;
        *filled = 0;
    }
    enum cf__fill r = cf__cc_fill_at_fb(cc, t, i1, fp, F, B);
    if (r == CF__FILL_NONE)
        r = cf__cc_fill_at_fb(cc, t, i2, fp, F, B);
    if (r == CF__FILL_DONE) {
        (*filled)++;
        return true;
    }
    /* both full: an eviction that waits for no stripe (it counts its item) */
    uint64_t pair[2] = {i1, i2};
    if (r == CF__FILL_NONE && cf__cc_evict(f, t, pair, fp, NULL, 0, false))
        return true;
    cf__cc_fills_end(*run, *filled);
    *run = NULL;
    return false;
}

/* Batched adds of a concurrent filter, with the buckets and stripe locks of the key
 * CF__AHEAD places further fetched meanwhile. Plain shapes fill a free slot without a
 * stripe (cf__cc_fill_fb) where they can; else, and for unique adds and semi-sorted
 * shapes, each key is a single add (writers of other stripes run between them, and
 * CF_ADD_UNIQUE's check and its insert are one step for them). A key's buckets in the
 * first sub-filter never change: one staged before a growth is placed by the lock,
 * anew. */
static CF__INLINE size_t cf__cc_add_many_fb(cf_filter *f, const uint64_t *hashes, size_t n,
                                            bool unique, cf_status *status,
                                            cf_status (*wait)(cf_filter *, uint64_t), unsigned F,
                                            unsigned B)
{
    const struct cf__cc *cc = cf__cc_of(f);
    size_t added = 0;
    if (!F) {
        for (size_t j = 0; j < n; j++) {
            cf_status st = cf__cc_add_locked(f, hashes[j], unique);
            added += st == CF_OK;
            if (status)
                status[j] = st;
        }
        return added;
    }
    cf__table t = cf__cc_table0(cc);
    uint64_t i1[CF__AHEAD], i2[CF__AHEAD];
    uint32_t fp[CF__AHEAD];
    const bool fills = !unique && !CF__SEMI_T(F, B);
    struct cf__cc *ccw = cf__cc_of(f); /* (its fills' counters) */
    _Atomic uint64_t *run = NULL;      /* the run of fills under way */
    uint64_t filled = 0;
    for (size_t j = 0; j < n + CF__AHEAD; j++) {
        if (j >= CF__AHEAD) {
            size_t p = j - CF__AHEAD, x = p % CF__AHEAD;
            cf_status st;
            if (fills && cf__cc_fill_fb(f, ccw, &t, &run, &filled, fp[x], i1[x], i2[x], F, B))
                st = CF_OK;
            else if (!cf__cc_par(cc))
                st = cf__cc_add_locked(f, hashes[p], unique);
            else if (unique)
                st = cf__cc_add_unique_at_fb(f, cc, hashes[p], fp[x], i1[x], i2[x], F, B);
            else
                st = cf__cc_add_at_fb(f, cc, hashes[p], fp[x], i1[x], i2[x], false, wait, F, B);
            added += st == CF_OK;
            if (status)
                status[p] = st;
        }
        if (j < n) {
            size_t x = j % CF__AHEAD;
            cf__key k = cf__key0_fb(f, hashes[j], F);
            cf__buckets0_seg_fb(&t, &k, &i1[x], &i2[x], CF__SEG, F);
            fp[x] = k.fp;
            cf__prefetch_fb(&t, t.shape, i1[x], true, F, B);
            cf__prefetch_fb(&t, t.shape, i2[x], true, F, B);
            /* (a fill takes no lock: fetching its line to write would move it) */
            if (!fills) {
                CF__PREFETCH(&cc->locks0[i1[x] >> CF__SYNC_STRIPE_SHIFT], 1);
                CF__PREFETCH(&cc->locks0[i2[x] >> CF__SYNC_STRIPE_SHIFT], 1);
            }
        }
    }
    if (run)
        cf__cc_fills_end(run, filled);
    return added;
}

/* A keyed call of operation OP (a hashed one of this shape, the template's arguments
 * after the hash given): 8-byte keys hashed inline, every other length in a function of
 * its own, reached by a tail call. The 8-byte path then keeps nothing across a call (no
 * callee-saved register to push and pop), which a shared path with the out-of-line hash
 * of other lengths needed. Twice: OP_key with XXH3 and OP_key_ms with hash id 3's
 * multiply-shift (CF_FAST_HASH), each in the tables of its filters, so that neither tests
 * which hash the filter has. */
#define CF__KEYED(RET, CONST, OP, SHAPE, ...)                                                      \
    static CF__NOINLINE RET OP##_key_any_##SHAPE(CONST cf_filter *f, const void *key, size_t len)  \
    {                                                                                              \
        return OP##_fb(f, cf__hash_key(f, key, len), __VA_ARGS__);                                 \
    }                                                                                              \
    static RET OP##_key_##SHAPE(CONST cf_filter *f, const void *key, size_t len)                   \
    {                                                                                              \
        if (CF__LIKELY(len == 8))                                                                  \
            return OP##_fb(f, cf__xxh3_8(key, f->k8), __VA_ARGS__);                                \
        return OP##_key_any_##SHAPE(f, key, len);                                                  \
    }                                                                                              \
    static RET OP##_key_ms_##SHAPE(CONST cf_filter *f, const void *key, size_t len)                \
    {                                                                                              \
        if (CF__LIKELY(len == 8))                                                                  \
            return OP##_##SHAPE(f, cf__ms8(key, cf__ms_of(f)));                                    \
        return OP##_key_any_##SHAPE(f, key, len);                                                  \
    }

/* Each template compiled for each fast shape, and once for all other shapes, into tables
 * of operations per state and shape (indexed by cf__code_of), one per variant. */
#define CF__FNS(F, B)                                                                              \
    static CF__NOINLINE bool cf__contains_##F##_##B(const cf_filter *f, uint64_t h)                \
    {                                                                                              \
        return cf__contains_fb(f, h, F, B);                                                        \
    }                                                                                              \
    CF__KEYED(bool, const, cf__contains, F##_##B, F, B)                                            \
    static CF__NOINLINE bool cf__cc_contains_##F##_##B(const cf_filter *f, uint64_t h)             \
    {                                                                                              \
        return cf__cc_contains_fb(f, h, F, B);                                                     \
    }                                                                                              \
    CF__KEYED(bool, const, cf__cc_contains, F##_##B, F, B)                                         \
    static void cf__cc_contains_many_##F##_##B(const cf_filter *f, const cf__source *src,          \
                                               size_t n, bool *out)                                \
    {                                                                                              \
        if (src->hashes)                                                                           \
            cf__cc_contains_many_fb(f, src, n, out, true, F, B);                                   \
        else                                                                                       \
            cf__cc_contains_many_fb(f, src, n, out, false, F, B);                                  \
    }                                                                                              \
    static CF__NOINLINE cf_status cf__add_evict_##F##_##B(cf_filter *f, uint64_t h, uint32_t fp,   \
                                                          uint64_t i1, uint64_t i2)                \
    {                                                                                              \
        return cf__add_evict_fb(f, h, fp, i1, i2, F, B);                                           \
    }                                                                                              \
    static CF__NOINLINE cf_status cf__add_full_##F##_##B(cf_filter *f, uint64_t h)                 \
    {                                                                                              \
        return cf__add_full_fb(f, h, cf__add_evict_##F##_##B, F);                                  \
    }                                                                                              \
    static CF__NOINLINE cf_status cf__add_##F##_##B(cf_filter *f, uint64_t h)                      \
    {                                                                                              \
        return cf__add_fb(f, h, cf__add_full_##F##_##B, F, B);                                     \
    }                                                                                              \
    CF__KEYED(cf_status, , cf__add, F##_##B, cf__add_full_##F##_##B, F, B)                         \
    static CF__NOINLINE cf_status cf__add_simple_##F##_##B(cf_filter *f, uint64_t h)               \
    {                                                                                              \
        return cf__add_simple_fb(f, h, cf__add_full_##F##_##B, F, B);                              \
    }                                                                                              \
    CF__KEYED(cf_status, , cf__add_simple, F##_##B, cf__add_full_##F##_##B, F, B)                  \
    static CF__NOINLINE cf_status cf__delete_##F##_##B(cf_filter *f, uint64_t h)                   \
    {                                                                                              \
        return cf__delete_fb(f, h, F, B);                                                          \
    }                                                                                              \
    CF__KEYED(cf_status, , cf__delete, F##_##B, F, B)                                              \
    static void cf__contains_many_##F##_##B(const cf_filter *f, const cf__source *src, size_t n,   \
                                            bool *out)                                             \
    {                                                                                              \
        if (src->hashes)                                                                           \
            cf__contains_many_fb(f, src, n, out, true, true, F, B);                                \
        else                                                                                       \
            cf__contains_many_fb(f, src, n, out, true, false, F, B);                               \
    }                                                                                              \
    static void cf__contains_many_all_##F##_##B(const cf_filter *f, const cf__source *src,         \
                                                size_t n, bool *out)                               \
    {                                                                                              \
        cf__contains_many_fb(f, src, n, out, false, src->hashes != NULL, F, B);                    \
    }                                                                                              \
    static size_t cf__add_many_##F##_##B(cf_filter *f, const uint64_t *hashes, size_t n,           \
                                         unsigned flags, cf_status *status)                        \
    {                                                                                              \
        return cf__add_many_fb(f, hashes, n, flags, status, cf__add_evict_##F##_##B, F, B);        \
    }                                                                                              \
    static CF__NOINLINE cf_status cf__cc_add_wait_##F##_##B(cf_filter *f, uint64_t h)              \
    {                                                                                              \
        return cf__cc_add_fb(f, h, true, NULL, F, B);                                              \
    }                                                                                              \
    static CF__NOINLINE cf_status cf__cc_add_##F##_##B(cf_filter *f, uint64_t h)                   \
    {                                                                                              \
        return cf__cc_add_fb(f, h, false, cf__cc_add_wait_##F##_##B, F, B);                        \
    }                                                                                              \
    CF__KEYED(cf_status, , cf__cc_add, F##_##B, false, cf__cc_add_wait_##F##_##B, F, B)            \
    static CF__NOINLINE cf_status cf__cc_delete_wait_##F##_##B(cf_filter *f, uint64_t h)           \
    {                                                                                              \
        return cf__cc_delete_fb(f, h, true, NULL, F, B);                                           \
    }                                                                                              \
    static CF__NOINLINE cf_status cf__cc_delete_##F##_##B(cf_filter *f, uint64_t h)                \
    {                                                                                              \
        return cf__cc_delete_fb(f, h, false, cf__cc_delete_wait_##F##_##B, F, B);                  \
    }                                                                                              \
    CF__KEYED(cf_status, , cf__cc_delete, F##_##B, false, cf__cc_delete_wait_##F##_##B, F, B)      \
    static size_t cf__cc_add_many_##F##_##B(cf_filter *f, const uint64_t *hashes, size_t n,        \
                                            unsigned flags, cf_status *status)                     \
    {                                                                                              \
        /* unique (CF_ADD_UNIQUE) as a constant: the other adds' loop carries none of it */        \
        if (flags & CF_ADD_UNIQUE)                                                                 \
            return cf__cc_add_many_fb(f, hashes, n, true, status, cf__cc_add_wait_##F##_##B, F,    \
                                      B);                                                          \
        return cf__cc_add_many_fb(f, hashes, n, false, status, cf__cc_add_wait_##F##_##B, F, B);   \
    }
CF__FNS(0, 0)          /* CF__CODE_GENERIC: widths from the shape */
CF__FNS(0, CF__SEMI_B) /* CF__CODE_SEMI: semi-sorted, widths from the shape */
#define CF__SEMI_FNS(F) CF__FNS(F, CF__SEMI_B)
CF__SEMI_FAST_SHAPES(CF__SEMI_FNS)
#undef CF__SEMI_FNS
CF__FAST_SHAPES(CF__FNS)
#undef CF__FNS
#undef CF__KEYED

/* The general state's lookups and deletes: every sub-filter and the stash. */
static bool cf__contains_key_all(const cf_filter *f, const void *key, size_t len)
{
    return cf__contains_all(f, cf__hash_key(f, key, len));
}

static cf_status cf__delete_key_all(cf_filter *f, const void *key, size_t len)
{
    return cf__delete_all(f, cf__hash_key(f, key, len));
}

/* An entry's keyed function of operation OP for shape S (F_B, pasted where B is not yet
 * expanded, as the functions were named): OP_key_S, or OP_key_ms_S while the table of
 * hash id 3 is defined (CF__K). */
#define CF__KN3(OP, K, S) OP##_##K##_##S
#define CF__KN2(OP, K, S) CF__KN3(OP, K, S)
#define CF__KN(OP, S)     CF__KN2(OP, CF__K, S)
#define CF__OPS_SIMPLE(F, B)                                                                       \
    {                                                                                              \
        cf__contains_##F##_##B,      CF__KN(cf__contains, F##_##B),                                \
        cf__add_simple_##F##_##B,    CF__KN(cf__add_simple, F##_##B),                              \
        cf__delete_##F##_##B,        CF__KN(cf__delete, F##_##B),                                  \
        cf__contains_many_##F##_##B, cf__add_many_##F##_##B,                                       \
        CF__OPS_COLD(cf__kind_plain)},
#define CF__OPS_GENERAL(F, B)                                                                      \
    {cf__contains_all,                                                                             \
     cf__contains_key_all,                                                                         \
     cf__add_##F##_##B,                                                                            \
     CF__KN(cf__add, F##_##B),                                                                     \
     cf__delete_all,                                                                               \
     cf__delete_key_all,                                                                           \
     cf__contains_many_all_##F##_##B,                                                              \
     cf__add_many_##F##_##B,                                                                       \
     CF__OPS_COLD(cf__kind_plain)},
#define CF__OPS_CONCURRENT(F, B)                                                                   \
    {cf__cc_contains_##F##_##B,      CF__KN(cf__cc_contains, F##_##B),                             \
     cf__cc_add_##F##_##B,           CF__KN(cf__cc_add, F##_##B),                                  \
     cf__cc_delete_##F##_##B,        CF__KN(cf__cc_delete, F##_##B),                               \
     cf__cc_contains_many_##F##_##B, cf__cc_add_many_##F##_##B,                                    \
     CF__OPS_COLD(cf__kind_plain_cc)},
#define CF__OPS_SEMI_SIMPLE(F)     CF__OPS_SIMPLE(F, CF__SEMI_B)
#define CF__OPS_SEMI_GENERAL(F)    CF__OPS_GENERAL(F, CF__SEMI_B)
#define CF__OPS_SEMI_CONCURRENT(F) CF__OPS_CONCURRENT(F, CF__SEMI_B)
#define CF__OPS_ROWS                                                                               \
    {                                                                                              \
        [CF__ROW_GENERAL] = {CF__OPS_GENERAL(0, 0) CF__OPS_GENERAL(0, CF__SEMI_B)                  \
                                 CF__SEMI_FAST_SHAPES(CF__OPS_SEMI_GENERAL)                        \
                                     CF__FAST_SHAPES(CF__OPS_GENERAL)},                            \
        [CF__ROW_SIMPLE] = {CF__OPS_SIMPLE(0, 0) CF__OPS_SIMPLE(0, CF__SEMI_B)                     \
                                CF__SEMI_FAST_SHAPES(CF__OPS_SEMI_SIMPLE)                          \
                                    CF__FAST_SHAPES(CF__OPS_SIMPLE)},                              \
        [CF__ROW_CONCURRENT] = {CF__OPS_CONCURRENT(0, 0) CF__OPS_CONCURRENT(0, CF__SEMI_B)         \
                                    CF__SEMI_FAST_SHAPES(CF__OPS_SEMI_CONCURRENT)                  \
                                        CF__FAST_SHAPES(CF__OPS_CONCURRENT)},                      \
    }
/* Every entry's kind and table: the plain kinds (plain.c), the first entry of the table
 * being defined (CF__OPS_THIS). */
#define CF__OPS_COLD(kind) &kind, &CF__OPS_THIS[0][0]
#define CF__K              key
#define CF__OPS_THIS       CF__OPS_TABLE
cf__ops_table CF__OPS_TABLE = CF__OPS_ROWS;
#undef CF__K
#undef CF__OPS_THIS
#define CF__K        key_ms
#define CF__OPS_THIS CF__OPS_TABLE_MS
cf__ops_table CF__OPS_TABLE_MS = CF__OPS_ROWS;
#undef CF__K
#undef CF__OPS_THIS
#undef CF__OPS_COLD
#undef CF__OPS_ROWS
#undef CF__OPS_SIMPLE
#undef CF__OPS_GENERAL
#undef CF__OPS_CONCURRENT
#undef CF__OPS_SEMI_SIMPLE
#undef CF__OPS_SEMI_GENERAL
#undef CF__OPS_SEMI_CONCURRENT
#undef CF__KN
#undef CF__KN2
#undef CF__KN3
