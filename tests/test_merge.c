/*
 * test_merge.c - cf_merge and cf_new_like.
 *
 * 1. Differential against an exact multiset, for the fast shapes, semi-sorted buckets and
 *    a generic one: keys (some added twice) spread over parts made with cf_new_like, each
 *    with the capacity of the whole; the parts merged into a fresh filter. Then: items
 *    equal the multiset's size, every key is found and counted at least as often as it
 *    went in, the false-positive rate of absent keys is that of one filter given every
 *    key directly and near cf_stats.fpr, and every key deleted as often as it went in
 *    succeeds and leaves 0 items (a fingerprint placed in the wrong pair would make one
 *    of those deletes fail or take another key's copy).
 * 2. Grown filters: a filter grown to several sub-filters (widening and same-width
 *    growth) merges into an empty filter like it (which grows too), nothing lost, deletes
 *    as in 1; two grown filters merge, or say CF_FULL and leave the destination as it was.
 * 3. A copy of itself: every count doubles exactly (a fixed filter at 40 % load, where
 *    each copy finds a free slot of its own pair), absent keys included.
 * 4. Refusals, each with its reason and the destination byte for byte as it was: NULL,
 *    the same filter, seeds, widths, bucket sizes, encodings and first sizes that differ,
 *    windowed and RedisBloom-layout filters, a source still loading, a mapped
 *    destination (CF_EREADONLY); CF_FULL from a fixed destination without room (refused
 *    before any work) and from one whose first sub-filter is full (refused midway,
 *    undone).
 * 5. Allocation failures: every allocation of the merge failing in turn gives CF_ENOMEM
 *    or CF_OK; after CF_ENOMEM the destination is byte for byte as it was, a concurrent
 *    one too.
 * 6. Determinism, cf_new_like (settings, seed, allocator, emptiness), and a merged filter
 *    saved and loaded keeps every key.
 * 7. Concurrent filters (also under ThreadSanitizer): see test_concurrent below.
 * 8. The walk of bucket fractions a merge hashes with (cf__walk), against cf__key_bits.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define PARTS 3u

/* A fresh copy of f (NULL after a failed check). */
static cf_filter *copy_of(const cf_filter *f)
{
    size_t n = cf_serialized_size(f);
    uint8_t *buf = malloc(n);
    cf_filter *c = NULL;
    CHECK(buf && cf_serialize(f, buf, n, NULL) == CF_OK);
    CHECK_ST(cf_deserialize(buf, n, NULL, &c), CF_OK);
    free(buf);
    return c;
}

/* The share of `probes` keys never added (stream `stream`) that f says yes for. */
static double measured_fpr(const cf_filter *f, uint64_t stream, uint64_t probes)
{
    uint8_t key[CFT_KEY_MAX];
    uint64_t yes = 0;
    for (uint64_t id = 0; id < probes; id++) {
        size_t len = cft_key(key, stream, id);
        yes += cf_contains(f, key, len);
    }
    return (double)yes / (double)probes;
}

/* Every key of the multiset found and counted at least as often as added; then deleted
 * that often, each delete CF_OK, leaving nothing. */
static void check_and_drain(cf_filter *f, uint64_t stream, const uint8_t *times, uint64_t nkeys)
{
    uint8_t key[CFT_KEY_MAX];
    uint64_t total = 0, misses = 0, short_counts = 0, failed = 0;
    for (uint64_t id = 0; id < nkeys; id++) {
        if (!times[id])
            continue;
        size_t len = cft_key(key, stream, id);
        total += times[id];
        misses += !cf_contains(f, key, len);
        short_counts += cf_count(f, key, len) < times[id];
    }
    CHECK_EQ_U(cft_stats(f).items, total);
    CHECK_EQ_U(misses, 0);
    CHECK_EQ_U(short_counts, 0);
    for (uint64_t id = 0; id < nkeys; id++) {
        size_t len = cft_key(key, stream, id);
        for (unsigned t = 0; t < times[id]; t++)
            failed += cf_delete(f, key, len) != CF_OK;
        /* the keys still in are found after each delete of another */
        if (id % 997 == 0)
            for (uint64_t later = id + 1; later < nkeys && later < id + 50; later++) {
                len = cft_key(key, stream, later);
                misses += times[later] && !cf_contains(f, key, len);
            }
    }
    CHECK_EQ_U(failed, 0);
    CHECK_EQ_U(misses, 0);
    CHECK_EQ_U(cft_stats(f).items, 0);
}

/* 1. Parts of one model merged into a fresh filter. */
static void test_parts(cf_config c, uint64_t tag)
{
    cft_context("parts f=%u b=%u flags=%u", c.fingerprint_bits, c.bucket_size, c.flags);
    cft_rng r = cft_rng_make(cft_subseed(tag));
    c.seed = cft_next(&r) | 1u;
    const uint64_t nkeys = c.capacity * 9 / 10; /* distinct keys; some go in twice */
    cf_filter *model = cft_new(c), *direct = cft_new(c), *part[PARTS] = {NULL};
    uint8_t *times = calloc(nkeys, 1);
    if (!model || !direct || !times)
        goto out;
    for (unsigned p = 0; p < PARTS; p++)
        CHECK_ST(cf_new_like(model, NULL, &part[p]), CF_OK);
    uint64_t stream = cft_subseed(tag + 1), added = 0;
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = 0; id < nkeys; id++) {
        unsigned n = cft_below(&r, 20) == 0 ? 2u : 1u;
        if (added + n > c.capacity * 19 / 20)
            break;
        size_t len = cft_key(key, stream, id);
        for (unsigned t = 0; t < n; t++) {
            if (!CHECK_ST(cf_add(part[cft_below(&r, PARTS)], key, len), CF_OK) ||
                !CHECK_ST(cf_add(direct, key, len), CF_OK))
                goto out;
            times[id]++;
            added++;
        }
    }
    const char *why = "unset";
    for (unsigned p = 0; p < PARTS; p++) {
        CHECK_ST(cf_merge(model, part[p], &why), CF_OK);
        CHECK(why == NULL);
    }
    cf_stats st = cft_stats(model);
    CHECK_EQ_U(st.items, added);
    CHECK_EQ_U(st.sub_filters, 1);
    /* The rate of absent keys: the direct filter's, and the formula's at this load. */
    uint64_t probes = cft_scaled_min(400000, 100000);
    double merged = measured_fpr(model, cft_subseed(tag + 2), probes);
    double one = measured_fpr(direct, cft_subseed(tag + 2), probes);
    double expect = st.fpr, sigma = sqrt(expect / (double)probes);
    CHECK_MSG(fabs(merged - expect) < 5 * sigma + 0.1 * expect, "merged fpr %g, formula %g", merged,
              expect);
    CHECK_MSG(fabs(merged - one) < 7 * sigma + 0.1 * expect, "merged fpr %g, one filter %g", merged,
              one);
    check_and_drain(model, stream, times, nkeys);
out:
    for (unsigned p = 0; p < PARTS; p++)
        cf_free(part[p]);
    cf_free(model);
    cf_free(direct);
    free(times);
}

/* 2. Grown filters. */
static void test_grown(unsigned flags, uint64_t tag)
{
    cft_context("grown flags=%u", flags);
    cft_rng r = cft_rng_make(cft_subseed(tag));
    cf_config c = {.capacity = 2000, .expansion = 2, .flags = flags, .seed = cft_next(&r) | 1u};
    cf_filter *a = cft_new(c), *b = cft_new(c), *into = NULL;
    uint64_t nkeys = 12000, stream = cft_subseed(tag + 1);
    uint8_t *times = calloc(nkeys, 1), key[CFT_KEY_MAX];
    if (!a || !b || !times)
        goto out;
    for (uint64_t id = 0; id < nkeys; id++) {
        size_t len = cft_key(key, stream, id);
        cf_filter *to = id < nkeys * 5 / 6 ? a : b;
        if (CHECK_ST(cf_add(to, key, len), CF_OK))
            times[id] = 1;
    }
    CHECK(cft_stats(a).sub_filters >= 3);
    /* Into an empty filter like it: everything, growing where needed. */
    if (!CHECK_ST(cf_new_like(a, NULL, &into), CF_OK))
        goto out;
    CHECK_ST(cf_merge(into, a, NULL), CF_OK);
    CHECK(cft_stats(into).sub_filters >= 2);
    /* Then b: it fits or it is refused, and either way nothing is lost. */
    cf_filter *before = copy_of(into);
    const char *why = NULL;
    cf_status st = cf_merge(into, b, &why);
    CHECK(st == CF_OK || st == CF_FULL);
    if (st == CF_FULL) {
        CHECK(before && cft_same_bytes(into, before));
        CHECK(why && strstr(why, "do not fit"));
        for (uint64_t id = nkeys * 5 / 6; id < nkeys; id++)
            times[id] = 0;
    }
    printf("  grown flags %u: %u and %u sub-filters merged into %u: %s\n", flags,
           cft_stats(a).sub_filters, cft_stats(b).sub_filters, cft_stats(into).sub_filters,
           cf_strerror(st));
    cf_free(before);
    check_and_drain(into, stream, times, nkeys);
out:
    cf_free(a);
    cf_free(b);
    cf_free(into);
    free(times);
}

/* 3. A copy of itself doubles every count. */
static void test_self_copy(uint64_t tag)
{
    cft_context("self copy");
    cf_filter *f = cft_new((cf_config){.capacity = 10000, .seed = 7}), *g = NULL;
    uint8_t key[CFT_KEY_MAX];
    uint64_t stream = cft_subseed(tag), other = cft_subseed(tag + 1), wrong = 0;
    if (!f)
        return;
    for (uint64_t id = 0; id < 4000; id++) {
        size_t len = cft_key(key, stream, id);
        CHECK_ST(cf_add(f, key, len), CF_OK);
    }
    if ((g = copy_of(f)) == NULL)
        goto out;
    CHECK_ST(cf_merge(f, g, NULL), CF_OK);
    CHECK_EQ_U(cft_stats(f).items, 8000);
    for (uint64_t id = 0; id < 20000; id++) {
        size_t len = cft_key(key, id < 4000 ? stream : other, id);
        wrong += cf_count(f, key, len) != 2 * cf_count(g, key, len);
    }
    CHECK_EQ_U(wrong, 0);
out:
    cf_free(f);
    cf_free(g);
}

/* 4. Refusals: each with its status and reason, dst unchanged. */
static void refused(cf_filter *dst, const cf_filter *src, cf_status want, const char *reason)
{
    cft_context("refusal: %s", reason);
    cf_filter *before = copy_of(dst);
    const char *why = NULL;
    CHECK_ST(cf_merge(dst, src, &why), want);
    CHECK_MSG(why && strstr(why, reason), "reason \"%s\", want \"%s\"", why ? why : "(null)",
              reason);
    if (want == CF_EINVAL) { /* cf_merge_check says the same, without a merge */
        const char *said = NULL;
        CHECK_ST(cf_merge_check(dst, src, &said), CF_EINVAL);
        CHECK(said && why && strcmp(said, why) == 0);
    }
    CHECK(before && cft_same_bytes(dst, before));
    cf_free(before);
}

/* Segmented filters made alike merge: every key of either is found. */
static void test_segmented(void)
{
    cft_context("merge of segmented filters");
    cf_config c = {.capacity = 300000, .seed = 21, .flags = CF_SEGMENTED};
    cf_filter *a = cft_new(c), *b = cft_new(c);
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = 0; a && b && id < 100000; id++) {
        size_t len = cft_key(key, id % 2 ? 3 : 4, id);
        CHECK_ST(cf_add(id % 2 ? a : b, key, len), CF_OK);
    }
    if (a && b && CHECK_ST(cf_merge(a, b, NULL), CF_OK)) {
        uint64_t missed = 0;
        for (uint64_t id = 0; id < 100000; id++) {
            size_t len = cft_key(key, id % 2 ? 3 : 4, id);
            missed += !cf_contains(a, key, len);
        }
        CHECK_EQ_U(missed, 0);
        CHECK_EQ_U(cft_stats(a).items, 100000);
    }
    cf_free(a);
    cf_free(b);
}

/* f loaded with CF_CONCURRENT: NULL on failure. */
static cf_filter *concurrent_copy(const cf_filter *f)
{
    size_t n = cf_serialized_size(f);
    uint8_t *buf = malloc(n);
    cf_filter *out = NULL;
    if (buf && cf_serialize(f, buf, n, NULL) == CF_OK)
        (void)cf_deserialize_flags(buf, n, CF_CONCURRENT, NULL, &out);
    free(buf);
    return out;
}

/* Filters a and b of config c, keys [0, na) of stream 5 in a and [na, na + nb) in b. */
static bool fill_pair(cf_config c, uint64_t na, uint64_t nb, cf_filter **a, cf_filter **b)
{
    *a = cft_new(c);
    *b = cft_new(c);
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = 0; *a && *b && id < na + nb; id++) {
        size_t len = cft_key(key, 5, id);
        if (!CHECK_ST(cf_add(id < na ? *a : *b, key, len), CF_OK))
            break;
    }
    return *a && *b;
}

/* Segment by segment (cf_merge_threads): the same bytes for any number of threads, one
 * and "one per processor" included, every key found, the counts exact; a merge that does
 * not fit its segments puts the table back and goes on as cf_merge does, with the same
 * result for any number of threads; one that does not fit at all leaves dst as it was. */
static void test_segments_threads(void)
{
    cft_context("merge segment by segment, with threads");
    /* 9 segments (not a power of two: the threads' walks start mid-table), 4 threads of
     * at least 2 segments and 65,536 fingerprints each */
    cf_config c = {.capacity = cft_scaled(2000000), .seed = 23, .flags = CF_SEGMENTED};
    uint64_t na = c.capacity * 3 / 10, nb = c.capacity * 3 / 10;
    cf_filter *a, *b;
    if (!fill_pair(c, na, nb, &a, &b))
        goto out;
    cf_filter *one = copy_of(a);
    const char *said = "unset";
    CHECK_ST(cf_merge_check(a, b, &said), CF_OK);
    CHECK(said == NULL);
    if (!one || !CHECK_ST(cf_merge(one, b, NULL), CF_OK))
        goto out1;
    uint8_t key[CFT_KEY_MAX];
    CHECK_EQ_U(cft_missing(one, 5, na + nb), 0);
    CHECK_EQ_U(cft_stats(one).items, na + nb);
    unsigned threads[] = {2, 3, 4, 0, 64};
    for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
        cft_context("merge segment by segment, %u threads", threads[i]);
        cf_filter *m = copy_of(a);
        const char *why = "unset";
        if (m && CHECK_ST(cf_merge_threads(m, b, threads[i], &why), CF_OK)) {
            CHECK(why == NULL);
            CHECK_MSG(cft_same_bytes(m, one), "%u threads merge other bytes than one", threads[i]);
        }
        cf_free(m);
    }
    /* A src that grew: its first sub-filter by segments, the rest one after another. */
    cft_context("merge segment by segment, a grown source");
    {
        cf_config g = c;
        g.capacity = c.capacity / 16u; /* one segment */
        g.expansion = 2;
        cf_filter *grown = cft_new(g);
        uint64_t ng = c.capacity / 4u;
        for (uint64_t id = 0; grown && id < ng; id++) {
            size_t len = cft_key(key, 6, id);
            CHECK_ST(cf_add(grown, key, len), CF_OK);
        }
        /* (a grown source of another first size is refused: make dst like it) */
        cf_filter *like = NULL;
        if (grown && CHECK_ST(cf_new_like(grown, NULL, &like), CF_OK) &&
            CHECK(cft_stats(grown).sub_filters > 1)) {
            CHECK_ST(cf_merge_threads(like, grown, 1, NULL), CF_OK);
            cf_filter *like2 = NULL;
            CHECK_ST(cf_new_like(grown, NULL, &like2), CF_OK);
            if (like2 && CHECK_ST(cf_merge_threads(like2, grown, 4, NULL), CF_OK))
                CHECK(cft_same_bytes(like, like2));
            CHECK_EQ_U(cft_missing(like, 6, ng), 0);
            cf_free(like2);
        }
        cf_free(like);
        cf_free(grown);
    }
    /* Past the first failure: the least merged load whose merge succeeds with a stash
     * entry (a fingerprint that found no slot in its segment). */
    cft_context("merge segment by segment, a segment without room");
    /* 6 segments just filled to 95 % (2^16 * 4 * 0.95 each): 3 threads of 2 segments */
    c.capacity = 6u * 249036u;
    bool seen_stash = false, seen_full = false;
    for (unsigned per_mille = 495; per_mille <= 525 && !(seen_stash && seen_full); per_mille++) {
        cf_filter *x, *y;
        uint64_t n = c.capacity * per_mille / 1000u;
        if (!fill_pair(c, n, n, &x, &y)) {
            cf_free(x);
            cf_free(y);
            break;
        }
        cf_filter *m1 = copy_of(x), *m4 = NULL;
        cft_thread_alloc ota;
        cft_thread_alloc_init(&ota);
        size_t bytes = cf_serialized_size(x);
        uint8_t *buf = malloc(bytes);
        if (buf && CHECK_ST(cf_serialize(x, buf, bytes, NULL), CF_OK))
            CHECK_ST(cf_deserialize(buf, bytes, &ota.a, &m4), CF_OK);
        free(buf);
        cf_status s1 = m1 ? cf_merge_threads(m1, y, 1, NULL) : CF_ENOMEM;
        cf_status s4 = m4 ? cf_merge_threads(m4, y, 4, NULL) : CF_ENOMEM;
        CHECK_ST(s4, s1);
        CHECK_EQ_U(atomic_load(&ota.elsewhere), 0);
        if (s1 == CF_OK && cft_stats(m1).stashed > 0 && !seen_stash) {
            seen_stash = true;
            CHECK(cft_same_bytes(m1, m4));
            /* a concurrent dst merges one fingerprint after another, stash and all */
            cf_filter *cc = concurrent_copy(x);
            if (CHECK(cc != NULL) && CHECK_ST(cf_merge(cc, y, NULL), CF_OK))
                CHECK_MSG(cft_same_bytes(cc, m1), "segment by segment, not the sequential bytes");
            cf_free(cc);
            CHECK_EQ_U(cft_missing(m4, 5, 2 * n), 0);
        } else if (s1 == CF_FULL && !seen_full) {
            seen_full = true;
            CHECK(cft_same_bytes(m1, x));
            CHECK(cft_same_bytes(m4, x));
        }
        cf_free(m1);
        cf_free(m4);
        cf_free(x);
        cf_free(y);
    }
    CHECK_MSG(seen_stash && seen_full, "no merged load gave a stash (%d) and a refusal (%d)",
              seen_stash, seen_full);
out1:
    cf_free(one);
out:
    cf_free(a);
    cf_free(b);
}

static void test_refusals(const char *dir)
{
    cf_config c = {.capacity = 1000, .seed = 11};
    cf_filter *dst = cft_new(c);
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = 0; dst && id < 300; id++) {
        size_t len = cft_key(key, 1, id);
        CHECK_ST(cf_add(dst, key, len), CF_OK);
    }
    const char *why = NULL;
    CHECK_ST(cf_merge(NULL, dst, &why), CF_EINVAL);
    CHECK(why && strstr(why, "NULL"));
    CHECK_ST(cf_merge(dst, NULL, NULL), CF_EINVAL);
    refused(dst, dst, CF_EINVAL, "itself");
    struct {
        cf_config c;
        const char *reason;
    } differ[] = {
        {{.capacity = 1000, .seed = 12}, "seeds differ"},
        {{.capacity = 1000, .seed = 11, .fingerprint_bits = 16}, "fingerprint widths differ"},
        {{.capacity = 1000, .seed = 11, .bucket_size = 2}, "bucket sizes differ"},
        {{.capacity = 1000, .seed = 11, .fingerprint_bits = 12, .flags = CF_SEMI_SORT},
         "encodings differ"},
        {{.capacity = 1000, .seed = 11, .flags = CF_SEGMENTED}, "mappings differ"},
        {{.capacity = 5000, .seed = 11}, "first sub-filter sizes differ"},
        {{.capacity = 1000, .seed = 11, .flags = CF_FAST_HASH}, "hashes differ"},
        {{.capacity = 1000, .seed = 11, .generations = 4}, "windowed"},
        {{.capacity = 1000, .flags = CF_REDISBLOOM}, "RedisBloom"},
    };
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        cf_filter *src = cft_new(differ[i].c);
        if (!src)
            continue;
        size_t len = cft_key(key, 2, i);
        CHECK_ST(cf_add(src, key, len), CF_OK);
        refused(dst, src, CF_EINVAL, differ[i].reason);
        if (i >= 7) { /* kinds that merge with nothing: the other way round too */
            cf_filter *dst2 = copy_of(src);
            cf_filter *like = NULL;
            CHECK_ST(cf_new_like(src, NULL, &like), CF_OK);
            if (dst2 && like)
                refused(dst2 ? dst2 : src, like, CF_EINVAL, differ[i].reason);
            cf_free(dst2);
            cf_free(like);
        }
        cf_free(src);
    }
    /* A source still loading, a mapped destination. */
    char path[512];
    snprintf(path, sizeof path, "%s/dst.cf", dir);
    CHECK_ST(cf_save(dst, path), CF_OK);
    cf_filter *mapped = NULL, *loading = NULL;
    if (CHECK_ST(cf_open_mapped(path, 0, NULL, &mapped), CF_OK)) {
        CHECK_ST(cf_merge(mapped, dst, &why), CF_EREADONLY);
        CHECK(why && strstr(why, "read-only"));
        cf_free(mapped);
    }
    uint8_t chunk[4096];
    uint64_t cursor = 0;
    size_t n = 0;
    if (CHECK_ST(cf_dump_chunk(dst, &cursor, chunk, sizeof chunk, &n), CF_OK) &&
        CHECK_ST(cf_load_chunk(&loading, cursor, chunk, n, NULL), CF_OK)) {
        refused(dst, loading, CF_EINVAL, "loading");
        CHECK_ST(cf_merge(loading, dst, NULL), CF_EREADONLY);
    }
    cf_free(loading);
    /* CF_FULL before any work: a fixed filter without the room. */
    cf_filter *big = cft_new((cf_config){.capacity = 1000, .seed = 11}), *like = NULL;
    for (uint64_t id = 0; big && id < 800; id++) {
        size_t len = cft_key(key, 3, id);
        CHECK_ST(cf_add(big, key, len), CF_OK);
    }
    if (big)
        refused(dst, big, CF_FULL, "do not fit");
    /* CF_FULL midway: a grown destination whose first sub-filter is full cannot take the
     * first sub-filter's fingerprints of another (the second is no place for them). */
    cf_filter *grown = cft_new((cf_config){.capacity = 1000, .seed = 11, .expansion = 2});
    for (uint64_t id = 0; grown && id < 4000; id++) {
        size_t len = cft_key(key, 4, id);
        CHECK_ST(cf_add(grown, key, len), CF_OK);
    }
    if (grown && CHECK_ST(cf_new_like(grown, NULL, &like), CF_OK)) {
        for (uint64_t id = 0; id < 900; id++) {
            size_t len = cft_key(key, 5, id);
            CHECK_ST(cf_add(like, key, len), CF_OK);
        }
        refused(grown, like, CF_FULL, "do not fit");
        /* every key of the destination still there */
        uint64_t misses = 0;
        for (uint64_t id = 0; id < 4000; id++) {
            size_t len = cft_key(key, 4, id);
            misses += !cf_contains(grown, key, len);
        }
        CHECK_EQ_U(misses, 0);
    }
    cf_free(like);
    cf_free(grown);
    cf_free(big);
    cf_free(dst);
    unlink(path);
}

/* 5. Every allocation of the merge failing in turn: its copy, growth, the stash; into a
 * plain destination and a concurrent one (whose merge runs on a trial copy first, then
 * allocates before it changes the destination). */
static void test_alloc_failures(unsigned flags)
{
    cft_context("allocation failures, flags %u", flags);
    cft_alloc t;
    cft_alloc_init(&t);
    cf_config c = {.capacity = 500, .seed = 5, .expansion = 2};
    cf_filter *src = cft_new(c), *dst = NULL;
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = 0; src && id < 1500; id++) {
        size_t len = cft_key(key, 6, id);
        CHECK_ST(cf_add(src, key, len), CF_OK);
    }
    c.flags = flags;
    c.allocator = &t.a;
    CHECK(src && CHECK_ST(cf_new(&c, &dst), CF_OK));
    bool done = false;
    unsigned failed = 0;
    for (uint64_t nth = 1; dst && src && !done && nth < 100; nth++) {
        cf_filter *before = copy_of(dst);
        cft_alloc_arm(&t, nth, false);
        cf_status st = cf_merge(dst, src, NULL);
        cft_alloc_disarm(&t);
        CHECK(st == CF_OK || st == CF_ENOMEM);
        if (st == CF_ENOMEM)
            CHECK_MSG(before && cft_same_bytes(dst, before),
                      "changed after allocation %llu of the merge failed", (unsigned long long)nth);
        failed += st == CF_ENOMEM;
        done = st == CF_OK;
        cf_free(before);
    }
    CHECK(done);
    CHECK(failed > 2); /* the copy, a new sub-filter's block and its array at least */
    for (uint64_t id = 0; done && id < 1500; id++) {
        size_t len = cft_key(key, 6, id);
        CHECK(cf_contains(dst, key, len));
    }
    cf_free(dst);
    cf_free(src);
    CHECK_ALLOC_CLEAN(&t);
}

/* 6. Determinism, cf_new_like, and a save and load of a merged filter. */
static void test_like_and_files(const char *dir)
{
    cft_context("new_like and files");
    cft_alloc t;
    cft_alloc_init(&t);
    cf_config c = {.capacity = 3000, .fingerprint_bits = 16, .bucket_size = 2, .seed = 9};
    cf_filter *a = cft_new(c), *b = NULL, *m1 = NULL, *m2 = NULL, *loaded = NULL;
    if (!a || !CHECK_ST(cf_new_like(a, &t.a, &b), CF_OK))
        goto out;
    CHECK_ST(cf_new_like(NULL, NULL, &m1), CF_EINVAL);
    CHECK_ST(cf_new_like(a, NULL, NULL), CF_EINVAL);
    cf_config ca, cb;
    cf_get_config(a, &ca);
    cf_get_config(b, &cb);
    CHECK(memcmp(&ca, &cb, sizeof ca) == 0);
    CHECK(cft_same_bytes(a, b));
    CHECK(t.live > 0); /* b lives in the caller's allocator */
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = 0; id < 2000; id++) {
        size_t len = cft_key(key, 7, id);
        CHECK_ST(cf_add(id % 2 ? a : b, key, len), CF_OK);
    }
    CHECK_ST(cf_new_like(a, NULL, &m1), CF_OK);
    CHECK_ST(cf_new_like(a, NULL, &m2), CF_OK);
    CHECK_ST(cf_merge(m1, a, NULL), CF_OK);
    CHECK_ST(cf_merge(m1, b, NULL), CF_OK);
    CHECK_ST(cf_merge(m2, a, NULL), CF_OK);
    CHECK_ST(cf_merge(m2, b, NULL), CF_OK);
    CHECK(cft_same_bytes(m1, m2));
    char path[512];
    snprintf(path, sizeof path, "%s/merged.cf", dir);
    CHECK_ST(cf_save(m1, path), CF_OK);
    if (CHECK_ST(cf_load(path, NULL, &loaded), CF_OK)) {
        uint64_t misses = 0;
        for (uint64_t id = 0; id < 2000; id++) {
            size_t len = cft_key(key, 7, id);
            misses += !cf_contains(loaded, key, len);
        }
        CHECK_EQ_U(misses, 0);
        CHECK_EQ_U(cft_stats(loaded).items, 2000);
    }
    unlink(path);
out:
    cf_free(a);
    cf_free(b);
    cf_free(m1);
    cf_free(m2);
    cf_free(loaded);
    CHECK_ALLOC_CLEAN(&t);
}

/* 7. Concurrent filters: a CF_CONCURRENT destination or source merges to the bytes a plain
 * one gives; a refused merge into a concurrent destination leaves its bytes; lookups
 * beside a merge into a concurrent destination find every key it held (the merge's
 * trial copy, then its writes, under the lookups' feet). */
typedef struct merge_reader {
    const cf_filter *f;
    atomic_bool *done;
    uint64_t lookups, misses;
} merge_reader;

static void *merge_lookups(void *p)
{
    merge_reader *r = p;
    uint8_t key[CFT_KEY_MAX];
    uint64_t id = 0;
    while (!atomic_load(r->done)) {
        size_t len = cft_key(key, 8, id);
        r->misses += !cf_contains(r->f, key, len);
        r->lookups++;
        id = (id + 1) % 1000;
    }
    return NULL;
}

static cf_filter *filled(cf_config c, unsigned flags, uint64_t stream, uint64_t n)
{
    c.flags |= flags;
    cf_filter *f = cft_new(c);
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = 0; f && id < n; id++) {
        size_t len = cft_key(key, stream, id);
        CHECK_ST(cf_add(f, key, len), CF_OK);
    }
    return f;
}

static void test_concurrent(void)
{
    cft_context("concurrent");
    cf_config c = {.capacity = 50000, .seed = 21, .expansion = 2};
    cf_filter *plain = filled(c, 0, 8, 1000), *cc = filled(c, CF_CONCURRENT, 8, 1000);
    /* A grown source with room made in its first sub-filter: the merge grows dst. */
    cf_filter *src = filled(c, 0, 9, 60000), *cc_src = filled(c, CF_CONCURRENT, 9, 60000);
    if (!plain || !cc || !src || !cc_src)
        goto out;
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = 0; id < 3000; id++) {
        size_t len = cft_key(key, 9, id);
        CHECK_ST(cf_delete(src, key, len), CF_OK);
        CHECK_ST(cf_delete(cc_src, key, len), CF_OK);
    }
    CHECK_ST(cf_merge(plain, src, NULL), CF_OK);
    atomic_bool done = false;
    merge_reader r = {cc, &done, 0, 0};
    pthread_t t;
    bool started = pthread_create(&t, NULL, merge_lookups, &r) == 0;
    CHECK(started);
    CHECK_ST(cf_merge(cc, cc_src, NULL), CF_OK);
    atomic_store(&done, true);
    if (started)
        pthread_join(t, NULL);
    CHECK_EQ_U(r.misses, 0);
    printf("  concurrent: %llu lookups beside the merge, %llu misses; %u sub-filters\n",
           (unsigned long long)r.lookups, (unsigned long long)r.misses,
           (unsigned)cft_stats(cc).sub_filters);
    CHECK(cft_same_bytes(plain, cc));
    /* A refusal leaves a concurrent destination's bytes. */
    cf_filter *other = filled((cf_config){.capacity = 50000, .seed = 22}, 0, 10, 10);
    cf_filter *before = copy_of(cc);
    const char *why = NULL;
    CHECK_ST(cf_merge(cc, other, &why), CF_EINVAL);
    CHECK(why && strstr(why, "seeds differ"));
    CHECK(before && cft_same_bytes(cc, before));
    cf_free(before);
    cf_free(other);
out:
    cf_free(plain);
    cf_free(cc);
    cf_free(src);
    cf_free(cc_src);
}

/* 8. The walk that gives a merge its hashes: for every bucket it visits, the hash's key has
 * the fingerprint given and that bucket as its first, in tables of many sizes (odd ones,
 * powers of two, one just below the largest a width allows) and widths. */
static void test_walk(void)
{
    static const unsigned widths[] = {4, 8, 12, 16, 31, 32};
    static const uint64_t sizes[] = {
        2, 6, 1000, 65536, 1000002, UINT64_C(1) << 40, (UINT64_C(1) << 40) + 6, UINT64_C(3) << 50};
    cft_rng r = cft_rng_make(cft_subseed(800));
    uint64_t wrong = 0, walks = 0;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        unsigned f = widths[i];
        for (size_t j = 0; j <= sizeof sizes / sizeof sizes[0]; j++) {
            /* the last size: the largest this width allows, whose shares are barely wider
             * than 2^f */
            uint64_t m = j < sizeof sizes / sizeof sizes[0] ? sizes[j] : UINT64_MAX >> f;
            cf__walk w;
            if (!cf__walk_init(&w, f, m))
                continue;
            walks++;
            uint64_t steps = m < 2000000 ? m : 2000;
            for (uint64_t b = 0; b < steps; b++, cf__walk_next(&w)) {
                uint32_t fp = (uint32_t)(cft_below(&r, (UINT64_C(1) << f) - 1) + 1);
                cf__key k = cf__key_bits(f, cf__walk_hash(&w, fp));
                wrong += k.fp != fp || cf__mulhi(k.x, m) != b;
                if (b % 97 == 0) { /* a walk moved there at once is where the steps are */
                    cf__walk s;
                    (void)cf__walk_init(&s, f, m);
                    cf__walk_seek(&s, b);
                    wrong += s.base != w.base || s.rem != w.rem;
                }
            }
            for (unsigned t = 0; t < 200; t++) { /* anywhere, far beyond the steps */
                uint64_t x = cft_below(&r, m - 1);
                cf__walk s;
                (void)cf__walk_init(&s, f, m);
                cf__walk_seek(&s, x);
                uint32_t fp = (uint32_t)((UINT64_C(1) << f) - 1);
                cf__key k = cf__key_bits(f, cf__walk_hash(&s, fp));
                /* x's least fraction: one unit (2^f) less maps below x */
                wrong += cf__mulhi(k.x, m) != x ||
                         (x > 0 && cf__mulhi(k.x - (UINT64_C(1) << f), m) == x);
            }
        }
        cf__walk w;
        CHECK(!cf__walk_init(&w, f, (UINT64_MAX >> f) + 1)); /* no whole multiple of 2^f */
    }
    CHECK(walks > 30);
    CHECK_EQ_U(wrong, 0);
}

int main(void)
{
    cft_init("test_merge");
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/cf_test_merge_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    const uint64_t cap = cft_scaled_min(60000, 6000);
    static const struct {
        unsigned f, b, flags;
    } shapes[] = {{12, 4, 0}, {8, 4, 0},
                  {16, 4, 0}, {12, 2, 0},
                  {8, 8, 0},  {13, 4, CF_SEMI_SORT},
                  {10, 3, 0}, {12, 4, CF_FAST_HASH}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        test_parts((cf_config){.capacity = cap,
                               .fingerprint_bits = shapes[i].f,
                               .bucket_size = shapes[i].b,
                               .flags = shapes[i].flags},
                   100 + 10 * i);
    test_grown(0, 200);
    test_grown(CF_GROW_SAME_WIDTH, 210);
    test_self_copy(300);
    test_refusals(dir);
    test_segmented();
    test_segments_threads();
    test_alloc_failures(0);
    test_alloc_failures(CF_CONCURRENT);
    test_like_and_files(dir);
    test_concurrent();
    test_walk();
    rmdir(dir);
    return cft_finish();
}
