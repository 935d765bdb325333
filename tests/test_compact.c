/*
 * test_compact.c - cf_compact: fingerprints of newer sub-filters move into free slots of
 * older ones, and the newest sub-filters left empty are freed.
 *
 * 1. Differential against an exact multiset: growing filters (expansion 1, 2, 3; bucket
 *    sizes 2 and 4; fingerprints of 8, 12 and 16 bits; first capacity 500-1000, so that
 *    there are many sub-filters) take random interleavings of adds (fresh keys, duplicates
 *    and a few hot keys), deletes of added keys and compactions, in cycles that grow the
 *    filter and shrink it again. After every compaction and at checkpoints: every key in
 *    the multiset is found and counted at least as often as it went in; cf_stats.items is
 *    the multiset's size. Each compaction also: returns CF_OK without calling the
 *    allocator; frees exactly the tables it drops (the allocator's live bytes fall by the
 *    drop in cf_stats.bytes); keeps items; never adds sub-filters, buckets or bytes;
 *    lowers no key's cf_count (a fingerprint moves into its key's pair, which contains the
 *    pair of every key that matched it before); leaves a file that cf_validate accepts
 *    (item counts agree with the tables), whose remaining sub-filters are the oldest ones
 *    unchanged in size, and whose newest sub-filter is not empty unless it is the only one
 *    or a stash entry belongs to it. Deleting everything leaves 0 items; a compaction
 *    then leaves exactly one sub-filter, byte for byte a fresh filter. One more shape sits
 *    at its max_sub_filters with stash entries.
 * 2. Compaction compacts: several sub-filters, most keys deleted, compact: fewer
 *    sub-filters and fewer bytes, nothing lost; everything deleted and compacted: the
 *    bytes of a fresh cf_new with the same config.
 * 3. Determinism: two filters given the same operations and compactions serialize alike at
 *    every compaction; a deserialized copy compacts to the same bytes as its original.
 * 4. No-ops and refusals: a fixed filter (with and without stash entries) and a growing
 *    filter of one sub-filter keep their bytes; NULL: CF_EINVAL; a filter still loading
 *    (after its header, after a data chunk) and a memory-mapped one: CF_EREADONLY and
 *    unchanged (the loading one then completes identical to its original).
 * 5. Stash entries of a growing filter at its limit (two equal sub-filters, 8 stash
 *    entries of the second): with the keys of the first deleted, a compaction moves the
 *    stashed fingerprints into the room that made (the stash empties, in all of 30
 *    filters: checked), so no stash entry pins an emptied sub-filter; the stashed keys
 *    stay found; then every other key out, each delete followed by a compaction, down to
 *    one sub-filter.
 * 6. Growth after compaction: many more keys, the new sub-filters sized from the
 *    remaining newest one, no false negatives; then everything out, back to one.
 * 7. Compaction never allocates: with every allocation failing it still returns CF_OK,
 *    frees what it drops, and every key is found.
 */
#define _POSIX_C_SOURCE 200809L
#include "format_util.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

/* The serialized file's view of sub-filter k and of stash entry e. */
static uint64_t desc_buckets(const buf *s, unsigned k)
{
    return rd(s->p + HDR + DESC * k, 8);
}

static uint64_t desc_items(const buf *s, unsigned k)
{
    return rd(s->p + HDR + DESC * k + 8, 8);
}

static unsigned file_tables(const buf *s)
{
    return (unsigned)rd(s->p + H_NT, 4);
}

static unsigned file_stashed(const buf *s)
{
    return s->p[H_STASH];
}

static unsigned stash_table(const buf *s, unsigned e)
{
    return (unsigned)rd(s->p + HDR + DESC * (uint64_t)file_tables(s) + ENTRY * e + 12, 4);
}

/* ------------------------------------------------------------------------------------ */
/* An exact multiset of keys                                                            */
/* ------------------------------------------------------------------------------------ */

#define HOT_IDS 4u /* ids 0..3 are added over and over (until CF_FULL) */

typedef struct bag {
    uint64_t stream;
    uint32_t *count;  /* copies of key id in the filter, for ids < cap */
    uint64_t *hash;   /* cf_hash of key id in the filter, for ids < next_id */
    uint64_t cap;     /* ids available */
    uint64_t next_id; /* ids below this have been used */
    uint64_t *copies; /* one entry per copy in the filter: its id */
    size_t n;         /* the number of copies: the filter's expected items */
    size_t max;       /* room in copies */
} bag;

static size_t bag_key(const bag *b, uint8_t *k, uint64_t id)
{
    return cft_key_var(k, b->stream, id);
}

/* A new id; the hash of its key in f is kept for the checks (cf_contains(f, key) is
 * cf_contains_hash(f, cf_hash(f, key)), and checking a few thousand keys after every
 * compaction would otherwise spend its time making keys). */
static uint64_t bag_fresh(bag *b, const cf_filter *f)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t id = b->next_id++;
    b->hash[id] = cf_hash(f, k, bag_key(b, k, id));
    return id;
}

/* Ids 0..HOT_IDS-1 are the hot keys. */
static bag bag_make(const cf_filter *f, uint64_t stream, uint64_t cap, size_t max)
{
    bag b = {stream,
             calloc(cap, sizeof(uint32_t)),
             xmalloc(cap * sizeof(uint64_t)),
             cap,
             0,
             xmalloc(max * sizeof(uint64_t)),
             0,
             max};
    if (!b.count)
        exit(2);
    while (b.next_id < HOT_IDS)
        bag_fresh(&b, f);
    return b;
}

static void bag_free(bag *b)
{
    free(b->count);
    free(b->hash);
    free(b->copies);
}

/* Every key of the bag is found and counted at least as often as it went in; the filter
 * holds exactly the bag's copies. Returns the number of failures. */
static uint64_t check_bag(const cf_filter *f, const bag *b, const char *when)
{
    uint64_t missing = 0, under = 0;
    for (uint64_t id = 0; id < b->next_id; id++) {
        if (b->count[id] == 0)
            continue;
        missing += !cf_contains_hash(f, b->hash[id]);
        under += cf_count_hash(f, b->hash[id]) < b->count[id];
    }
    CHECK_MSG(missing == 0 && under == 0, "%s: %llu keys missing, %llu under-counted", when,
              (unsigned long long)missing, (unsigned long long)under);
    uint64_t items = cft_stats(f).items;
    CHECK_MSG(items == b->n, "%s: %llu items, the multiset holds %zu", when,
              (unsigned long long)items, b->n);
    return missing + under + (items != b->n);
}

/* ------------------------------------------------------------------------------------ */
/* A compaction and everything that must hold around it                                 */
/* ------------------------------------------------------------------------------------ */

#define PROBES 256u /* keys never added whose counts are watched too */

typedef struct tally {
    uint64_t compactions, shrank, freed, pinned;
    unsigned most_subs;
} tally;

/* The keys whose counts a compaction must not lower: every key in the bag, keys that went
 * in and are gone (every 16th id), and PROBES keys never added. Sets *h to the key's hash
 * in f. */
static bool watched(const cf_filter *f, const bag *b, uint64_t i, uint64_t *h)
{
    if (i >= b->next_id) {
        uint8_t k[CFT_KEY_MAX];
        *h = cf_hash(f, k, cft_key(k, b->stream + 1, i));
        return true;
    }
    if (b->count[i] == 0 && i % 16 != 0)
        return false;
    *h = b->hash[i];
    return true;
}

/* cf_compact(f) with the checks of (1). ta: the filter's allocator. */
static uint64_t compact_checked(cf_filter *f, const bag *b, cft_alloc *ta, tally *t,
                                const char *when)
{
    uint64_t h, fails = 0;
    cf_stats s0 = cft_stats(f);
    buf before = ser(f);
    uint64_t nprobe = b->next_id + PROBES;
    uint64_t *counts = xmalloc(nprobe * sizeof *counts);
    for (uint64_t i = 0; i < nprobe; i++)
        if (watched(f, b, i, &h))
            counts[i] = cf_count_hash(f, h);
    uint64_t calls = ta->calls, frees = ta->frees, live_bytes = ta->live_bytes;

    fails += !CHECK_ST(cf_compact(f), CF_OK);

    cf_stats s1 = cft_stats(f);
    /* Its one allocation: the sub-filter array, shrunk to what a copy would have. */
    uint64_t allocs = ta->calls - calls;
    fails += !CHECK_MSG(allocs <= 1, "%s: the compaction called alloc %llu times", when,
                        (unsigned long long)allocs);
    fails += !CHECK_EQ_U(s1.items, s0.items);
    fails += !CHECK(s1.stashed <= s0.stashed); /* stashed fingerprints may find room */
    fails += !CHECK(s1.sub_filters >= 1 && s1.sub_filters <= s0.sub_filters);
    fails += !CHECK(s1.bytes <= s0.bytes && s1.buckets <= s0.buckets && s1.slots <= s0.slots);
    fails += !CHECK((s1.sub_filters < s0.sub_filters) == (s1.bytes < s0.bytes));
    /* The shapes of wider sub-filters go with the last of them, the stash's room with its
     * last entry. */
    bool shapes_freed = s0.newest_fingerprint_bits > s0.fingerprint_bits &&
                        s1.newest_fingerprint_bits == s1.fingerprint_bits;
    bool stash_freed = s0.stashed > 0 && s1.stashed == 0;
    /* Back to one sub-filter, the filter struct holds it: the array goes; and the block
     * that held the array and the stash goes once it holds neither (nor search memory,
     * which only tables of 1 MiB get, far larger than these). */
    bool to_one = s0.sub_filters > 1 && s1.sub_filters == 1;
    bool had_more = s0.sub_filters > 1 || s0.stashed > 0;
    bool more_freed = had_more && s1.sub_filters == 1 && s1.stashed == 0;
    fails += !CHECK_EQ_U(ta->frees - frees, s0.sub_filters - s1.sub_filters + allocs +
                                                shapes_freed + stash_freed + to_one + more_freed);
    if (allocs == 0 && !shapes_freed && !stash_freed && !to_one)
        fails += !CHECK_EQ_U(live_bytes - ta->live_bytes, s0.bytes - s1.bytes);
    else
        fails += !CHECK(live_bytes - ta->live_bytes > s0.bytes - s1.bytes);

    /* No key's count goes down, whether it was added or not. */
    uint64_t lower = 0;
    for (uint64_t i = 0; i < nprobe; i++)
        if (watched(f, b, i, &h))
            lower += cf_count_hash(f, h) < counts[i];
    fails += !CHECK_MSG(lower == 0, "%s: %llu keys counted less after the compaction", when,
                        (unsigned long long)lower);
    free(counts);

    fails += check_bag(f, b, when);

    /* The file: valid (each table's item count is its occupied slots), the oldest
     * sub-filters kept as they were sized, the newest not left empty without reason. */
    buf after = ser(f);
    if (before.p && after.p) {
        const char *why = NULL;
        fails += !CHECK_MSG(cf_validate(after.p, after.n, &why) == CF_OK, "%s: %s", when,
                            why ? why : "?");
        unsigned nt = file_tables(&after);
        fails += !CHECK_EQ_U(nt, s1.sub_filters);
        /* It holds exactly what a copy of it holds (MEMORY USAGE of a replica in Redis). */
        cft_alloc tc;
        cft_alloc_init(&tc);
        cf_filter *copy = NULL;
        if (CHECK_ST(cf_deserialize(after.p, after.n, &tc.a, &copy), CF_OK))
            fails += !CHECK_EQ_U(tc.live_bytes, ta->live_bytes);
        cf_free(copy);
        for (unsigned i = 0; i < nt && i < file_tables(&before); i++)
            fails += !CHECK_EQ_U(desc_buckets(&after, i), desc_buckets(&before, i));
        fails += !CHECK(desc_items(&after, 0) >= desc_items(&before, 0)); /* it only gains */
        bool stash_newest = false;
        for (unsigned e = 0; e < file_stashed(&after); e++) {
            fails += !CHECK(stash_table(&after, e) < nt);
            stash_newest |= stash_table(&after, e) == nt - 1;
        }
        fails += !CHECK_MSG(nt == 1 || desc_items(&after, nt - 1) > 0 || stash_newest,
                            "%s: the newest of %u sub-filters is empty and was kept", when, nt);
        if (nt > 1 && desc_items(&after, nt - 1) == 0)
            t->pinned++;
    }
    buf_free(&before);
    buf_free(&after);
    t->compactions++;
    t->shrank += s1.sub_filters < s0.sub_filters;
    t->freed += s0.sub_filters - s1.sub_filters;
    return fails;
}

/* ------------------------------------------------------------------------------------ */
/* 1. Differential                                                                      */
/* ------------------------------------------------------------------------------------ */

typedef struct diff_state {
    cf_filter *f;
    bag b;
    cft_rng r;
    cft_alloc *ta;
    tally t;
    unsigned bsize, max_subs;
    uint64_t adds, full, deletes, checkpoints, fails, stash_seen;
} diff_state;

static void diff_add(diff_state *d)
{
    bag *b = &d->b;
    uint8_t k[CFT_KEY_MAX];
    uint64_t id;
    double u = cft_unit(&d->r);
    if (u < 0.04)
        id = cft_below(&d->r, HOT_IDS);
    else if ((u < 0.2 && b->n > 0) || b->next_id == b->cap)
        id = b->n > 0 ? b->copies[cft_below(&d->r, b->n)] : 0;
    else
        id = bag_fresh(b, d->f);
    size_t len = bag_key(b, k, id);
    cf_status st = cf_add(d->f, k, len);
    d->adds++;
    if (st == CF_OK) {
        b->count[id]++;
        b->copies[b->n++] = id;
        return;
    }
    /* Refused: a hot key (its two buckets in the newest sub-filter hold nothing but its
     * fingerprint), or a filter at its limit with a full stash. */
    cf_stats s = cft_stats(d->f);
    d->full++;
    if (!CHECK_MSG(st == CF_FULL && (cf_count(d->f, k, len) >= 2u * d->bsize ||
                                     (s.sub_filters == d->max_subs && s.stashed == 8)),
                   "add of key %llu (%u copies in): %s, count %llu, %u sub-filters, %llu stashed",
                   (unsigned long long)id, b->count[id], cft_status_name(st),
                   (unsigned long long)cf_count(d->f, k, len), s.sub_filters,
                   (unsigned long long)s.stashed))
        d->fails++;
}

static void diff_delete(diff_state *d)
{
    bag *b = &d->b;
    if (b->n == 0)
        return;
    uint8_t k[CFT_KEY_MAX];
    size_t at = (size_t)cft_below(&d->r, b->n);
    uint64_t id = b->copies[at];
    b->copies[at] = b->copies[--b->n];
    b->count[id]--;
    size_t len = bag_key(b, k, id);
    cf_status st = cf_delete(d->f, k, len);
    d->deletes++;
    if (!CHECK_MSG(st == CF_OK, "delete of key %llu (%u copies left): %s", (unsigned long long)id,
                   b->count[id], cft_status_name(st)))
        d->fails++;
    if (b->count[id] > 0 &&
        !CHECK_MSG(cf_contains(d->f, k, len), "key %llu lost with %u copies left",
                   (unsigned long long)id, b->count[id]))
        d->fails++;
}

/* One operation: an add with probability p_add (or when nothing is in), else a delete;
 * now and then a compaction or a full check. */
static void diff_step(diff_state *d, double p_add)
{
    if (d->b.n == 0 || (d->b.n < d->b.max && cft_unit(&d->r) < p_add))
        diff_add(d);
    else
        diff_delete(d);
    cf_stats s = cft_stats(d->f);
    d->t.most_subs = s.sub_filters > d->t.most_subs ? s.sub_filters : d->t.most_subs;
    d->stash_seen += s.stashed > 0;
    uint64_t dice = cft_below(&d->r, 1000);
    if (dice < 2)
        d->fails += compact_checked(d->f, &d->b, d->ta, &d->t, "random compaction");
    else if (dice < 3) {
        d->checkpoints++;
        d->fails += check_bag(d->f, &d->b, "checkpoint");
    }
}

static void test_differential(cf_config c, uint64_t tag, uint64_t live_max, bool at_limit)
{
    cft_alloc ta;
    cft_alloc_init(&ta);
    c.seed = cft_subseed(tag);
    c.allocator = &ta.a;
    cft_context("differential cap %llu b %u f %u e %u max_sub %u, filter seed 0x%016llx (tag %llu)",
                (unsigned long long)c.capacity, c.bucket_size, c.fingerprint_bits, c.expansion,
                c.max_sub_filters, (unsigned long long)c.seed, (unsigned long long)tag);
    diff_state d;
    memset(&d, 0, sizeof d);
    d.f = cft_new(c);
    if (!d.f)
        return;
    d.b = bag_make(d.f, tag, 4 * live_max + 100000, live_max);
    d.r = cft_rng_make(c.seed ^ 0x5eed);
    d.ta = &ta;
    d.bsize = c.bucket_size;
    d.max_subs = c.max_sub_filters ? c.max_sub_filters : CF_DEFAULT_MAX_SUB_FILTERS;
    const unsigned cycles = 3;
    for (unsigned cy = 0; cy < cycles && d.fails < 20; cy++) {
        /* Grow to hi keys (or as far as 4 * hi adds get: all of live_max the first time),
         * shrink to lo, compact. */
        uint64_t hi = cy == 0 ? live_max : live_max / 3 + cft_below(&d.r, live_max - live_max / 3);
        uint64_t lo = cft_below(&d.r, live_max / 20 + 1);
        for (uint64_t ops = 0; d.b.n < hi && ops < 4 * hi && d.fails < 20; ops++)
            diff_step(&d, 0.8);
        d.fails += check_bag(d.f, &d.b, "after growing");
        while (d.b.n > lo && d.fails < 20)
            diff_step(&d, 0.25);
        d.fails += compact_checked(d.f, &d.b, &ta, &d.t, "after shrinking");
    }
    /* Everything out: no items; one compaction leaves one sub-filter, as fresh. */
    while (d.b.n > 0 && d.fails < 20)
        diff_delete(&d);
    cf_stats s = cft_stats(d.f);
    CHECK_EQ_U(s.items, 0);
    CHECK_EQ_U(s.stashed, 0);
    unsigned subs_at_end = s.sub_filters;
    uint64_t shrank = d.t.shrank;
    d.fails += compact_checked(d.f, &d.b, &ta, &d.t, "everything deleted");
    s = cft_stats(d.f);
    CHECK_EQ_U(s.sub_filters, 1);
    cf_config fc = c;
    fc.allocator = NULL;
    cf_filter *fresh = cft_new(fc);
    if (fresh) {
        buf a = ser(d.f), z = ser(fresh);
        CHECK_MSG(buf_eq(a, z), "deleted and compacted, the filter is not a fresh one");
        cf_stats sz = cft_stats(fresh);
        CHECK_STATS_EQ(s, sz);
        buf_free(&a);
        buf_free(&z);
        cf_free(fresh);
    }
    if (cft_full_scale()) {
        /* The run did what it is for. */
        CHECK_MSG(d.t.most_subs >= (c.expansion == 1 ? 4u : 3u), "at most %u sub-filters",
                  d.t.most_subs);
        CHECK_MSG(shrank >= 1, "no compaction freed a sub-filter before the last");
        CHECK(d.t.compactions >= 10);
        if (at_limit)
            CHECK_MSG(d.stash_seen > 0, "the stash was never used");
    }
    printf("  differential b %u f %2u e %u cap %4llu%s: %llu adds (%llu refused), %llu deletes, "
           "%llu compactions (%llu freed %llu sub-filters, %llu kept an empty one), up to %u "
           "sub-filters, %u before the last compaction\n",
           c.bucket_size, c.fingerprint_bits, c.expansion, (unsigned long long)c.capacity,
           at_limit ? " at its limit" : "", (unsigned long long)d.adds, (unsigned long long)d.full,
           (unsigned long long)d.deletes, (unsigned long long)d.t.compactions,
           (unsigned long long)d.t.shrank, (unsigned long long)d.t.freed,
           (unsigned long long)d.t.pinned, d.t.most_subs, subs_at_end);
    cf_free(d.f);
    CHECK_ALLOC_CLEAN(&ta);
    bag_free(&d.b);
}

/* ------------------------------------------------------------------------------------ */
/* 2. Compaction compacts                                                               */
/* ------------------------------------------------------------------------------------ */

/* Add keys 0..n-1 of the stream; all must be accepted. */
static uint64_t add_range(cf_filter *f, uint64_t stream, uint64_t from, uint64_t to)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t refused = 0;
    for (uint64_t i = from; i < to; i++)
        refused += cf_add(f, k, cft_key(k, stream, i)) != CF_OK;
    CHECK_MSG(refused == 0, "%llu of %llu adds refused", (unsigned long long)refused,
              (unsigned long long)(to - from));
    return refused;
}

static uint64_t missing_in(const cf_filter *f, uint64_t stream, const bool *in, uint64_t n)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i++)
        missing += in[i] && !cf_contains(f, k, cft_key(k, stream, i));
    return missing;
}

/* Delete each of keys 0..n-1 that is in with probability p (p >= 1: all). */
static uint64_t delete_some(cf_filter *f, uint64_t stream, bool *in, uint64_t n, double p,
                            cft_rng *r)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t deleted = 0, bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!in[i] || (p < 1.0 && cft_unit(r) >= p))
            continue;
        bad += cf_delete(f, k, cft_key(k, stream, i)) != CF_OK;
        in[i] = false;
        deleted++;
    }
    CHECK_EQ_U(bad, 0);
    return deleted;
}

static void test_really_compacts(unsigned e, unsigned b, unsigned fb, uint64_t n, uint64_t tag)
{
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_config c = {.capacity = 1000,
                   .expansion = e,
                   .bucket_size = b,
                   .fingerprint_bits = fb,
                   .max_sub_filters = 64,
                   .seed = cft_subseed(tag),
                   .allocator = &ta.a};
    cft_context("compaction compacts: e %u b %u f %u, %llu keys, filter seed 0x%016llx", e, b, fb,
                (unsigned long long)n, (unsigned long long)c.seed);
    cf_filter *f = cft_new(c);
    if (!f)
        return;
    cft_rng r = cft_rng_make(c.seed);
    bool *in = xmalloc(n * sizeof *in);
    for (uint64_t i = 0; i < n; i++)
        in[i] = true;
    add_range(f, tag, 0, n);
    cf_stats s0 = cft_stats(f);
    CHECK_EQ_U(s0.items, n);
    if (cft_full_scale())
        CHECK_MSG(s0.sub_filters >= 4, "only %u sub-filters", s0.sub_filters);

    /* 95 % of the keys out, then a compaction. */
    uint64_t deleted = delete_some(f, tag, in, n, 0.95, &r);
    cf_stats s1 = cft_stats(f);
    CHECK_EQ_U(s1.items, n - deleted);
    CHECK_EQ_U(s1.sub_filters, s0.sub_filters); /* deleting never shrinks */
    uint64_t frees = ta.frees, live = ta.live_bytes, calls = ta.calls;
    CHECK_ST(cf_compact(f), CF_OK);
    uint64_t allocs = ta.calls - calls; /* the smaller sub-filter array, if it shrank */
    cf_stats s2 = cft_stats(f);
    CHECK_MSG(s2.sub_filters < s1.sub_filters, "%u sub-filters before, %u after", s1.sub_filters,
              s2.sub_filters);
    CHECK_MSG(s2.bytes < s1.bytes, "%llu bytes before, %llu after", (unsigned long long)s1.bytes,
              (unsigned long long)s2.bytes);
    CHECK(s2.load_factor > s1.load_factor);
    CHECK_EQ_U(s2.items, s1.items);
    CHECK(allocs <= 1);
    CHECK_EQ_U(ta.frees - frees, s1.sub_filters - s2.sub_filters + allocs);
    CHECK(live - ta.live_bytes >= s1.bytes - s2.bytes);
    CHECK_EQ_U(missing_in(f, tag, in, n), 0);
    printf("  compaction compacts (e %u b %u f %2u): %llu keys in %u sub-filters (%llu bytes); "
           "%llu left: %u sub-filters (%llu bytes)\n",
           e, b, fb, (unsigned long long)n, s1.sub_filters, (unsigned long long)s1.bytes,
           (unsigned long long)(n - deleted), s2.sub_filters, (unsigned long long)s2.bytes);

    /* Everything out and compacted: exactly a fresh filter of the same config. */
    delete_some(f, tag, in, n, 1.0, &r);
    CHECK_EQ_U(cft_stats(f).items, 0);
    CHECK_ST(cf_compact(f), CF_OK);
    cf_stats s3 = cft_stats(f);
    CHECK_EQ_U(s3.sub_filters, 1);
    cf_config fc = c;
    fc.allocator = NULL;
    cf_filter *fresh = cft_new(fc);
    if (fresh) {
        buf a = ser(f), z = ser(fresh);
        CHECK_MSG(buf_eq(a, z), "deleted and compacted, the filter is not a fresh one");
        cf_stats sz = cft_stats(fresh);
        CHECK_STATS_EQ(s3, sz);
        /* And it behaves as one: the same adds give the same bytes. */
        add_range(f, tag + 1, 0, 3000);
        add_range(fresh, tag + 1, 0, 3000);
        buf a2 = ser(f), z2 = ser(fresh);
        CHECK_MSG(buf_eq(a2, z2), "after the same adds, the compacted filter differs");
        buf_free(&a);
        buf_free(&z);
        buf_free(&a2);
        buf_free(&z2);
        cf_free(fresh);
    }
    cf_free(f);
    CHECK_ALLOC_CLEAN(&ta);
    free(in);
}

/* ------------------------------------------------------------------------------------ */
/* 3. Determinism                                                                       */
/* ------------------------------------------------------------------------------------ */

static void test_determinism(unsigned e, uint64_t tag)
{
    cf_config c = {.capacity = 700, .expansion = e, .seed = cft_subseed(tag)};
    cft_context("determinism e %u, filter seed 0x%016llx", e, (unsigned long long)c.seed);
    cf_filter *a = cft_new(c), *b = cft_new(c);
    if (!a || !b) {
        cf_free(a);
        cf_free(b);
        return;
    }
    cft_rng r = cft_rng_make(c.seed);
    uint8_t k[CFT_KEY_MAX];
    uint64_t next = 0, compactions = 0, differ = 0, copies_checked = 0, changed = 0;
    for (unsigned round = 0; round < 8; round++) {
        /* Adds, then deletes of random earlier keys (some never added or already gone:
         * both filters see the same calls), then a compaction. */
        uint64_t adds = 500 + cft_below(&r, 4000);
        for (uint64_t i = 0; i < adds; i++, next++) {
            size_t len = cft_key(k, tag, next);
            differ += cf_add(a, k, len) != cf_add(b, k, len);
        }
        uint64_t dels = cft_below(&r, next);
        for (uint64_t i = 0; i < dels; i++) {
            size_t len = cft_key(k, tag, cft_below(&r, next));
            differ += cf_delete(a, k, len) != cf_delete(b, k, len);
        }
        /* A copy through the file format compacts to the same bytes. */
        buf pre = ser(a);
        cf_filter *copy = NULL;
        if (pre.p && CHECK_ST(cf_deserialize(pre.p, pre.n, NULL, &copy), CF_OK)) {
            CHECK_ST(cf_compact(copy), CF_OK);
            copies_checked++;
        }
        CHECK_ST(cf_compact(a), CF_OK);
        CHECK_ST(cf_compact(b), CF_OK);
        compactions++;
        buf sa = ser(a), sb = ser(b);
        CHECK_MSG(buf_eq(sa, sb), "round %u: the same operations compacted differently", round);
        changed += !buf_eq(pre, sa);
        if (copy) {
            buf sc = ser(copy);
            CHECK_MSG(buf_eq(sa, sc), "round %u: a deserialized copy compacted differently", round);
            buf_free(&sc);
        }
        cf_free(copy);
        buf_free(&pre);
        buf_free(&sa);
        buf_free(&sb);
    }
    CHECK_EQ_U(differ, 0);
    if (cft_full_scale())
        CHECK_MSG(changed >= 2, "only %llu compactions changed anything",
                  (unsigned long long)changed);
    printf("  determinism e %u: %llu compactions (%llu changed the filter), %llu copies\n", e,
           (unsigned long long)compactions, (unsigned long long)changed,
           (unsigned long long)copies_checked);
    cf_free(a);
    cf_free(b);
}

/* ------------------------------------------------------------------------------------ */
/* 4. No-ops and refusals                                                               */
/* ------------------------------------------------------------------------------------ */

/* cf_compact(f) returns CF_OK and changes nothing. */
static void check_noop(cf_filter *f, const char *what)
{
    cft_context("no-op: %s", what);
    buf a = ser(f);
    cf_stats s0 = cft_stats(f);
    CHECK_ST(cf_compact(f), CF_OK);
    buf b = ser(f);
    cf_stats s1 = cft_stats(f);
    CHECK_MSG(buf_eq(a, b), "%s: the compaction changed the filter", what);
    CHECK_STATS_EQ(s0, s1);
    buf_free(&a);
    buf_free(&b);
}

/* A filter of several sub-filters with most of its keys deleted: one that a compaction
 * shrinks. */
static cf_filter *shrinkable(uint64_t tag, bool **in_out, uint64_t *n_out)
{
    cf_config c = {.capacity = 500, .expansion = 2, .seed = cft_subseed(tag)};
    cf_filter *f = cft_new(c);
    if (!f)
        return NULL;
    const uint64_t n = 6000;
    bool *in = xmalloc(n * sizeof *in);
    for (uint64_t i = 0; i < n; i++)
        in[i] = true;
    add_range(f, tag, 0, n);
    cft_rng r = cft_rng_make(c.seed);
    delete_some(f, tag, in, n, 0.9, &r);
    *in_out = in;
    *n_out = n;
    return f;
}

static void test_noops_and_refusals(const char *dir)
{
    uint8_t k[CFT_KEY_MAX];
    cft_rng r = cft_rng_make(cft_subseed(40));
    /* Fixed filters: half full with some deletes, and full with stash entries. */
    {
        cf_config c = {.capacity = 3000, .seed = cft_subseed(41)};
        cf_filter *f = cft_new(c);
        if (f) {
            bool in[2000];
            for (uint64_t i = 0; i < 2000; i++)
                in[i] = true;
            add_range(f, 41, 0, 2000);
            delete_some(f, 41, in, 2000, 0.3, &r);
            check_noop(f, "fixed filter");
            CHECK_EQ_U(missing_in(f, 41, in, 2000), 0);
            cf_free(f);
        }
        cf_config s = {
            .capacity = 40, .bucket_size = 2, .fingerprint_bits = 8, .seed = cft_subseed(42)};
        f = cft_new(s);
        if (f) {
            for (uint64_t i = 0; i < 10000 && cft_stats(f).stashed < 8; i++)
                (void)cf_add(f, k, cft_key(k, 42, i));
            CHECK_EQ_U(cft_stats(f).stashed, 8);
            check_noop(f, "fixed filter with a full stash");
            cf_free(f);
        }
    }
    /* A growing filter of one sub-filter, empty and with keys. */
    {
        cf_config c = {.capacity = 2000, .expansion = 2, .seed = cft_subseed(43)};
        cf_filter *f = cft_new(c);
        if (f) {
            check_noop(f, "empty growing filter");
            bool in[1500];
            for (uint64_t i = 0; i < 1500; i++)
                in[i] = true;
            add_range(f, 43, 0, 1500);
            delete_some(f, 43, in, 1500, 0.5, &r);
            CHECK_EQ_U(cft_stats(f).sub_filters, 1);
            check_noop(f, "growing filter, one sub-filter");
            CHECK_EQ_U(missing_in(f, 43, in, 1500), 0);
            cf_free(f);
        }
    }
    cft_context("cf_compact(NULL)");
    CHECK_ST(cf_compact(NULL), CF_EINVAL);

    /* Read-only filters: loading, mapped. The original is one a compaction would shrink. */
    bool *in = NULL;
    uint64_t n = 0;
    cf_filter *f = shrinkable(44, &in, &n);
    if (!f)
        return;
    buf orig = ser(f);
    {
        cft_context("read-only: compaction would shrink the original");
        cf_filter *copy = NULL;
        if (orig.p && CHECK_ST(cf_deserialize(orig.p, orig.n, NULL, &copy), CF_OK)) {
            CHECK_ST(cf_compact(copy), CF_OK);
            CHECK(cft_stats(copy).sub_filters < cft_stats(f).sub_filters);
        }
        cf_free(copy);
    }
    /* Loading: after the header chunk, and after a data chunk too. */
    cft_context("cf_compact on a loading filter");
    size_t cap = cf_dump_chunk_max(f);
    uint8_t *chunk = xmalloc(cap);
    uint64_t cursor = 0;
    cf_filter *g = NULL;
    size_t len = 0, nchunks = 0, refused = 0;
    do {
        if (!CHECK_ST(cf_dump_chunk(f, &cursor, chunk, cap, &len), CF_OK))
            break;
        if (len == 0)
            break;
        if (!CHECK_ST(cf_load_chunk(&g, cursor, chunk, len, NULL), CF_OK))
            break;
        nchunks++;
        if (cf_is_loading(g)) {
            cf_stats s0 = cft_stats(g);
            CHECK_ST(cf_compact(g), CF_EREADONLY);
            refused++;
            CHECK(cf_is_loading(g));
            cf_stats s1 = cft_stats(g);
            CHECK_STATS_EQ(s0, s1);
        }
    } while (cursor != 0);
    CHECK(nchunks >= 3);
    CHECK_EQ_U(refused, nchunks - 1);
    if (CHECK(g && !cf_is_loading(g))) {
        buf gl = ser(g);
        CHECK_MSG(buf_eq(orig, gl), "loaded after refused compactions, the filter differs");
        buf_free(&gl);
    }
    cf_free(g);
    free(chunk);
    /* Mapped. */
    cft_context("cf_compact on a mapped filter");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/compact.cf", dir);
    if (CHECK_ST(cf_save(f, path), CF_OK)) {
        for (unsigned flags = 0; flags <= CF_MAP_VERIFY; flags += CF_MAP_VERIFY) {
            cf_filter *m = NULL;
            if (!CHECK_ST(cf_open_mapped(path, flags, NULL, &m), CF_OK))
                continue;
            CHECK_ST(cf_compact(m), CF_EREADONLY);
            buf mb = ser(m);
            CHECK_MSG(buf_eq(orig, mb), "mapped: the compaction changed the filter");
            CHECK_EQ_U(missing_in(m, 44, in, n), 0);
            buf_free(&mb);
            cf_free(m);
        }
        cf_filter *l = NULL;
        if (CHECK_ST(cf_load(path, NULL, &l), CF_OK)) {
            buf lb = ser(l);
            CHECK_MSG(buf_eq(orig, lb), "mapped: the file changed");
            buf_free(&lb);
        }
        cf_free(l);
        CHECK(unlink(path) == 0);
    }
    buf_free(&orig);
    free(in);
    cf_free(f);
}

/* ------------------------------------------------------------------------------------ */
/* 5. Stash entries of a growing filter at its limit                                    */
/* ------------------------------------------------------------------------------------ */

/* Remove one copy of key id from the bag and the filter. */
static bool bag_delete_at(bag *b, cf_filter *f, size_t at)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t id = b->copies[at];
    b->copies[at] = b->copies[--b->n];
    b->count[id]--;
    return CHECK_ST(cf_delete(f, k, bag_key(b, k, id)), CF_OK);
}

/* A growing filter at its limit of 2 equal sub-filters (expansion 1), with 8 stash
 * entries: they belong to sub-filter 1. The keys added before the growth sit in
 * sub-filter 0; deleting them frees room there and leaves the stash as it is (deletes in
 * sub-filter 0 cannot drain entries of sub-filter 1). A compaction then moves the stashed
 * fingerprints into sub-filter 0, so none is left to pin an emptied sub-filter 1. Then
 * the rest of the keys, one by one, each delete followed by a compaction. Returns the
 * stash entries left after that compaction. */
static uint64_t test_stash_at_limit(uint64_t tag)
{
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_config c = {.capacity = 100,
                   .expansion = 1,
                   .max_sub_filters = 2,
                   .bucket_size = 4,
                   .fingerprint_bits = 16,
                   .seed = cft_subseed(tag),
                   .allocator = &ta.a};
    cft_context("stash at the limit, filter seed 0x%016llx (tag %llu)", (unsigned long long)c.seed,
                (unsigned long long)tag);
    cf_filter *f = cft_new(c);
    if (!f)
        return 0;
    bag b = bag_make(f, tag, 100000, 1000);
    tally t;
    memset(&t, 0, sizeof t);
    uint8_t k[CFT_KEY_MAX];
    /* Distinct keys until an add is refused with the stash full. */
    cf_status st = CF_OK;
    uint64_t grown_at = 0;
    while (b.next_id < b.cap && b.n < b.max) {
        uint64_t id = bag_fresh(&b, f);
        st = cf_add(f, k, bag_key(&b, k, id));
        if (st == CF_OK) {
            b.count[id]++;
            b.copies[b.n++] = id;
        } else if (cft_stats(f).stashed == 8)
            break;
        if (grown_at == 0 && cft_stats(f).sub_filters == 2)
            grown_at = id;
    }
    CHECK_ST(st, CF_FULL);
    cf_stats s = cft_stats(f);
    CHECK_EQ_U(s.sub_filters, 2);
    CHECK_EQ_U(s.stashed, 8);
    compact_checked(f, &b, &ta, &t, "at the limit, full stash");
    for (size_t i = b.n; i-- > 0;)
        if (b.copies[i] < grown_at)
            bag_delete_at(&b, f, i);
    compact_checked(f, &b, &ta, &t, "the keys of sub-filter 0 deleted");
    uint64_t left = cft_stats(f).stashed;
    CHECK_EQ_U(t.pinned, 0);
    /* The rest in random order, a compaction after each delete. */
    cft_rng r = cft_rng_make(c.seed);
    while (b.n > 0) {
        if (!bag_delete_at(&b, f, (size_t)cft_below(&r, b.n)))
            break;
        if (compact_checked(f, &b, &ta, &t, "deleting") > 0)
            break;
    }
    CHECK_EQ_U(cft_stats(f).items, 0);
    CHECK_EQ_U(cft_stats(f).sub_filters, 1);
    cf_free(f);
    CHECK_ALLOC_CLEAN(&ta);
    bag_free(&b);
    return left;
}

/* ------------------------------------------------------------------------------------ */
/* 6. Growth after compaction                                                           */
/* ------------------------------------------------------------------------------------ */

static void test_grow_after(unsigned e, unsigned b, uint64_t tag)
{
    cf_config c = {.capacity = 800,
                   .expansion = e,
                   .bucket_size = b,
                   .max_sub_filters = 100,
                   .seed = cft_subseed(tag)};
    cft_context("growth after compaction e %u b %u, filter seed 0x%016llx", e, b,
                (unsigned long long)c.seed);
    cf_filter *f = cft_new(c);
    if (!f)
        return;
    const uint64_t m0 = cft_stats(f).buckets;
    const uint64_t n1 = e == 1 ? 8000 : 12000, n2 = e == 1 ? 20000 : 60000, n = n1 + n2;
    bool *in = xmalloc(n * sizeof *in);
    for (uint64_t i = 0; i < n; i++)
        in[i] = i < n1;
    cft_rng r = cft_rng_make(c.seed);
    add_range(f, tag, 0, n1);
    unsigned subs0 = cft_stats(f).sub_filters;
    delete_some(f, tag, in, n1, 0.9, &r);
    CHECK_ST(cf_compact(f), CF_OK);
    unsigned subs1 = cft_stats(f).sub_filters;
    CHECK(subs1 < subs0);
    /* Many more keys: new sub-filters, each e times the newest. */
    for (uint64_t i = n1; i < n; i++)
        in[i] = true;
    add_range(f, tag, n1, n);
    cf_stats s = cft_stats(f);
    CHECK_MSG(s.sub_filters > subs1, "no growth after the compaction: %u sub-filters",
              s.sub_filters);
    uint64_t want = 0, m = m0;
    for (unsigned i = 0; i < s.sub_filters; i++, m *= e)
        want += m;
    CHECK_EQ_U(s.buckets, want);
    uint64_t live = 0;
    for (uint64_t i = 0; i < n; i++)
        live += in[i];
    CHECK_EQ_U(s.items, live);
    CHECK_EQ_U(missing_in(f, tag, in, n), 0);
    buf file = ser(f);
    if (file.p)
        CHECK_ST(cf_validate(file.p, file.n, NULL), CF_OK);
    buf_free(&file);
    /* Compact again half-way through deleting, then everything out: one sub-filter. */
    delete_some(f, tag, in, n, 0.5, &r);
    CHECK_ST(cf_compact(f), CF_OK);
    CHECK_EQ_U(missing_in(f, tag, in, n), 0);
    delete_some(f, tag, in, n, 1.0, &r);
    CHECK_EQ_U(cft_stats(f).items, 0);
    CHECK_ST(cf_compact(f), CF_OK);
    CHECK_EQ_U(cft_stats(f).sub_filters, 1);
    CHECK_EQ_U(cft_stats(f).buckets, m0);
    printf("  growth after compaction (e %u b %u): %u sub-filters, compacted to %u, grown to %u\n",
           e, b, subs0, subs1, s.sub_filters);
    free(in);
    cf_free(f);
}

/* ------------------------------------------------------------------------------------ */
/* 7. Compaction never allocates                                                        */
/* ------------------------------------------------------------------------------------ */

static void test_no_allocation(unsigned e, uint64_t tag)
{
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_config c = {.capacity = 500,
                   .expansion = e,
                   .max_sub_filters = 100,
                   .seed = cft_subseed(tag),
                   .allocator = &ta.a};
    cft_context("compaction with failing allocations, e %u, filter seed 0x%016llx", e,
                (unsigned long long)c.seed);
    cf_filter *f = cft_new(c);
    if (!f)
        return;
    const uint64_t n = 8000;
    bool in[8000];
    for (uint64_t i = 0; i < n; i++)
        in[i] = true;
    add_range(f, tag, 0, n);
    cft_rng r = cft_rng_make(c.seed);
    delete_some(f, tag, in, n, 0.85, &r);
    cf_stats s0 = cft_stats(f);
    uint64_t calls = ta.calls, frees = ta.frees, live = ta.live_bytes;
    cft_alloc_arm(&ta, 1, true); /* every allocation from now on fails */
    CHECK_ST(cf_compact(f), CF_OK);
    /* At most the smaller sub-filter array was tried, and it failed: the old one stays. */
    CHECK(ta.calls - calls <= 1);
    CHECK_EQ_U(ta.failures, ta.calls - calls);
    cf_stats s1 = cft_stats(f);
    CHECK(s1.sub_filters < s0.sub_filters);
    CHECK_EQ_U(s1.items, s0.items);
    CHECK_EQ_U(ta.frees - frees, s0.sub_filters - s1.sub_filters);
    CHECK_EQ_U(live - ta.live_bytes, s0.bytes - s1.bytes);
    CHECK_EQ_U(missing_in(f, tag, in, n), 0);
    /* Still failing: a second compaction (with less or nothing to do) succeeds too. */
    CHECK_ST(cf_compact(f), CF_OK);
    CHECK_EQ_U(ta.failures, ta.calls - calls);
    CHECK_EQ_U(missing_in(f, tag, in, n), 0);
    cft_alloc_disarm(&ta);
    /* The allocator back: growth works again. */
    bool more[8000];
    for (uint64_t i = 0; i < n; i++)
        more[i] = true;
    add_range(f, tag + 1, 0, n);
    CHECK_EQ_U(missing_in(f, tag, in, n), 0);
    CHECK_EQ_U(missing_in(f, tag + 1, more, n), 0);
    printf("  no allocation (e %u): %u sub-filters compacted to %u with every allocation "
           "failing\n",
           e, s0.sub_filters, s1.sub_filters);
    cf_free(f);
    CHECK_ALLOC_CLEAN(&ta);
}

/* ------------------------------------------------------------------------------------ */

int main(void)
{
    cft_init("test_compact");
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/cf_test_compact_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    double t0 = cft_now();

    static const unsigned es[] = {1, 2, 3}, bs[] = {2, 4}, fs[] = {8, 12, 16};
    uint64_t tag = 100;
    const uint64_t live_max = cft_scaled_min(6000, 600);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            for (size_t l = 0; l < 3; l++, tag++) {
                cf_config c = {.capacity = 500 + 250 * ((i + j + l) % 3),
                               .expansion = es[i],
                               .bucket_size = bs[j],
                               .fingerprint_bits = fs[l]};
                test_differential(c, tag, live_max, false);
            }
    /* At its limit: max_sub_filters reached, the stash in use, adds refused. */
    cf_config lim = {.capacity = 300,
                     .expansion = 2,
                     .bucket_size = 2,
                     .fingerprint_bits = 8,
                     .max_sub_filters = 3};
    test_differential(lim, tag++, live_max, true);
    printf("  differential: %.2f s\n", cft_now() - t0);

    t0 = cft_now();
    test_really_compacts(2, 4, 12, cft_scaled_min(20000, 5000), 200);
    test_really_compacts(1, 2, 16, cft_scaled_min(8000, 4000), 201);
    test_really_compacts(3, 4, 8, cft_scaled_min(20000, 5000), 202);
    test_determinism(1, 300);
    test_determinism(2, 301);
    test_noops_and_refusals(dir);
    uint64_t stash_left = 0, stash_runs = 30;
    for (uint64_t i = 0; i < stash_runs; i++)
        stash_left += test_stash_at_limit(400 + i);
    cft_context("stash at the limit");
    printf("  stash at the limit: %llu stash entries left in %llu filters after the compaction\n",
           (unsigned long long)stash_left, (unsigned long long)stash_runs);
    /* Sub-filter 0 lost every key it had before the growth: there is room for all 8. */
    CHECK_EQ_U(stash_left, 0);
    test_grow_after(1, 4, 500);
    test_grow_after(2, 2, 501);
    test_grow_after(3, 4, 502);
    test_no_allocation(1, 600);
    test_no_allocation(2, 601);
    printf("  the rest: %.2f s\n", cft_now() - t0);
    CHECK(rmdir(dir) == 0);
    return cft_finish();
}
