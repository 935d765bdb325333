/*
 * test_alloc_fail.c - allocation failures.
 *
 * cf_new: for every N from 1 until cf_new succeeds without a failure, the allocator fails
 * its Nth call (and, in a second pass, every call from the Nth on): cf_new returns
 * CF_ENOMEM, leaves *out untouched and leaks nothing.
 *
 * Growth: a growing filter is filled; whenever an add allocates (that is, grows), it is
 * retried with the allocator failing its 1st, 2nd, ... call, until it succeeds: every
 * failed add returns CF_ENOMEM and leaves the filter exactly as it was (stats, live
 * allocations, every key found, the key's count). At the end cf_free returns everything.
 *
 * The stash: the add that first stashes allocates its room, and fails as cleanly.
 */
#include "testutil.h"

static cf_filter *const SENTINEL = (cf_filter *)&cft; /* never dereferenced */

static void new_with_failures(const cf_config *base, const char *what, bool persist)
{
    cft_context("cf_new %s, %s failure", what, persist ? "persistent" : "single");
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_config c = *base;
    c.allocator = &ta.a;
    size_t need = 0;
    CHECK_ST(cf_bytes_needed(&c, &need), CF_OK);
    uint64_t n;
    bool succeeded = false;
    for (n = 1; n <= 10000; n++) {
        cft_alloc_init(&ta);
        cft_alloc_arm(&ta, n, persist);
        cf_filter *out = SENTINEL;
        cf_status rc = cf_new(&c, &out);
        if (rc == CF_OK) {
            /* Only allowed once no call failed. */
            CHECK_MSG(ta.failures == 0, "cf_new returned CF_OK although alloc call %llu failed",
                      (unsigned long long)n);
            CHECK(ta.calls < n);
            CHECK(out != SENTINEL && out != NULL);
            CHECK_EQ_U(ta.total_bytes, need);
            if (out != SENTINEL && out != NULL) {
                /* It works. */
                CHECK_ST(cf_add(out, "k", 1), CF_OK);
                CHECK(cf_contains(out, "k", 1));
                cf_free(out);
            }
            CHECK_ALLOC_CLEAN(&ta);
            succeeded = true;
            break;
        }
        CHECK_MSG(rc == CF_ENOMEM, "failing alloc call %llu: cf_new returned %s",
                  (unsigned long long)n, cft_status_name(rc));
        CHECK(ta.failures >= 1);
        CHECK(out == SENTINEL);
        CHECK_MSG(ta.live == 0 && ta.live_bytes == 0,
                  "failing alloc call %llu: %llu blocks (%llu bytes) leaked", (unsigned long long)n,
                  (unsigned long long)ta.live, (unsigned long long)ta.live_bytes);
        CHECK_EQ_U(ta.bad_frees, 0);
    }
    CHECK(succeeded);
    printf("  cf_new %-28s %s: CF_ENOMEM for N = 1..%llu, then success\n", what,
           persist ? "persistent" : "single    ", (unsigned long long)(n - 1));
}

static void test_new(void)
{
    static const struct {
        const char *what;
        cf_config c;
    } cases[] = {
        {"fixed b4 f12", {.capacity = 1000}},
        {"fixed b2 f16 cap 1", {.capacity = 1, .bucket_size = 2, .fingerprint_bits = 16}},
        {"fixed b8 f8 cap 100000", {.capacity = 100000, .bucket_size = 8, .fingerprint_bits = 8}},
        {"growing e2 b4 f12", {.capacity = 100, .expansion = 2}},
        {"growing e1 b3 f7",
         {.capacity = 500, .expansion = 1, .bucket_size = 3, .fingerprint_bits = 7}},
        {"growing e3 b255 f32",
         {.capacity = 50, .expansion = 3, .bucket_size = 255, .fingerprint_bits = 32}},
        {"concurrent growing e2 b4 f12", {.capacity = 100, .expansion = 2, .flags = CF_CONCURRENT}},
        {"concurrent semi b4 f13",
         {.capacity = 1000, .fingerprint_bits = 13, .flags = CF_SEMI_SORT | CF_CONCURRENT}},
        {"fast hash growing e2 b4 f12", {.capacity = 100, .expansion = 2, .flags = CF_FAST_HASH}},
        {"fast hash concurrent b9 f12",
         {.capacity = 1000, .bucket_size = 9, .flags = CF_FAST_HASH | CF_CONCURRENT}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        new_with_failures(&cases[i].c, cases[i].what, false);
        new_with_failures(&cases[i].c, cases[i].what, true);
    }
}

typedef enum { VIA_ADD, VIA_ADD_HASH, VIA_ADD_UNIQUE } add_path;

static cf_status do_add(cf_filter *f, add_path p, const uint8_t *k, size_t len)
{
    switch (p) {
    case VIA_ADD:
        return cf_add(f, k, len);
    case VIA_ADD_HASH:
        return cf_add_hash(f, cf_hash(f, k, len));
    case VIA_ADD_UNIQUE:
        return cf_add_unique(f, k, len);
    }
    return CF_EINVAL;
}

static void test_growth(unsigned b, unsigned fb, unsigned e, uint64_t cap, unsigned growths,
                        bool persist, uint64_t tag, unsigned flags)
{
    uint64_t seed = cft_subseed(tag);
    cft_context("growth b %u f %u e %u cap %llu flags %u %s failures, filter seed 0x%016llx (tag "
                "%llu)",
                b, fb, e, (unsigned long long)cap, flags, persist ? "persistent" : "single",
                (unsigned long long)seed, (unsigned long long)tag);
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_config c = {.capacity = cap,
                   .bucket_size = b,
                   .fingerprint_bits = fb,
                   .expansion = e,
                   .seed = seed,
                   .allocator = &ta.a,
                   .flags = flags};
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    const uint64_t stream = tag;
    uint8_t k[CFT_KEY_MAX];
    uint64_t n = 0, grown = 0, enomem = 0;
    while (grown < growths && n < 10000000) {
        size_t len = cft_key(k, stream, n);
        add_path path = (add_path)(n % 3);
        cf_stats before = cft_stats(f);
        uint64_t live = ta.live, live_bytes = ta.live_bytes;
        uint64_t count_before = cf_count(f, k, len);
        /* First try: fail the first allocation this add makes (if any). */
        cf_status rc = CF_ENOMEM;
        uint64_t nth;
        for (nth = 1; nth <= 1000; nth++) {
            uint64_t calls0 = ta.calls;
            cft_alloc_arm(&ta, nth, persist);
            rc = do_add(f, path, k, len);
            uint64_t calls = ta.calls - calls0;
            cft_alloc_disarm(&ta);
            if (rc == CF_OK) {
                CHECK_MSG(calls < nth, "add returned CF_OK although alloc call %llu failed",
                          (unsigned long long)nth);
                break;
            }
            if (path == VIA_ADD_UNIQUE && rc == CF_EXISTS) {
                /* A false positive of add_unique: nothing added, allowed. Use cf_add. */
                CHECK(count_before > 0);
                path = VIA_ADD;
                nth = 0;
                continue;
            }
            if (!CHECK_MSG(rc == CF_ENOMEM, "add with alloc call %llu failing returned %s",
                           (unsigned long long)nth, cft_status_name(rc)))
                break;
            enomem++;
            CHECK(calls >= nth);
            /* Nothing changed. */
            cf_stats after = cft_stats(f);
            CHECK_STATS_EQ(before, after);
            CHECK_EQ_U(ta.live, live);
            CHECK_EQ_U(ta.live_bytes, live_bytes);
            CHECK_EQ_U(ta.bad_frees, 0);
            CHECK_EQ_U(cf_count(f, k, len), count_before);
            CHECK_EQ_U(cft_missing(f, stream, n), 0);
        }
        if (!CHECK_MSG(rc == CF_OK, "key %llu: add never succeeded", (unsigned long long)n))
            break;
        cf_stats s = cft_stats(f);
        CHECK_EQ_U(s.items, before.items + 1);
        if (nth > 1) {
            /* An add that allocated: CF_ENOMEM is only for growth, so it must have grown. */
            CHECK_MSG(s.sub_filters == before.sub_filters + 1,
                      "an add that allocated went from %u to %u sub-filters", before.sub_filters,
                      s.sub_filters);
            grown++;
            CHECK_EQ_U(cft_missing(f, stream, n + 1), 0);
        } else {
            CHECK_EQ_U(s.sub_filters, before.sub_filters);
        }
        n++;
    }
    CHECK_EQ_U(grown, growths);
    CHECK_EQ_U(cft_missing(f, stream, n), 0);
    cf_stats s = cft_stats(f);
    CHECK_EQ_U(s.items, n);
    CHECK_EQ_U(s.sub_filters, 1 + growths);
    printf("  growth b %u f %2u e %u cap %4llu flags %u %s: %llu keys, %llu growths, %llu "
           "CF_ENOMEM\n",
           b, fb, e, (unsigned long long)cap, flags, persist ? "persistent" : "single    ",
           (unsigned long long)n, (unsigned long long)grown, (unsigned long long)enomem);
    cf_free(f);
    CHECK_ALLOC_CLEAN(&ta);
    CHECK_EQ_U(ta.frees, ta.calls - ta.failures);
}

/* A filter whose growth fails keeps working in its existing sub-filter, and grows once
 * memory is back. */
static void test_growth_refused_then_allowed(void)
{
    cft_context("growth refused, then allowed");
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_config c = {.capacity = 200, .expansion = 2, .seed = cft_subseed(7), .allocator = &ta.a};
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    enum { N = 2000 };
    static bool added[N];
    memset(added, 0, sizeof added);
    uint8_t k[CFT_KEY_MAX];
    uint64_t refused = 0, n_added = 0, tried = 0;
    /* No memory at all from now on. */
    cft_alloc_arm(&ta, 1, true);
    for (uint64_t i = 0; i < N && refused < 50; i++, tried++) {
        size_t len = cft_key(k, 77, i);
        cf_stats before = cft_stats(f);
        cf_status rc = cf_add(f, k, len);
        if (rc == CF_OK) {
            added[i] = true;
            n_added++;
            continue;
        }
        CHECK_ST(rc, CF_ENOMEM);
        cf_stats after = cft_stats(f);
        CHECK_STATS_EQ(before, after);
        refused++;
    }
    CHECK_EQ_U(refused, 50);
    CHECK_EQ_U(cft_stats(f).sub_filters, 1);
    CHECK_EQ_U(cft_stats(f).items, n_added);
    uint64_t missing = 0;
    for (uint64_t i = 0; i < tried; i++) {
        size_t len = cft_key(k, 77, i);
        missing += added[i] && !cf_contains(f, k, len);
    }
    CHECK_EQ_U(missing, 0);
    /* Memory is back: the refused keys go in, the filter grows. */
    cft_alloc_disarm(&ta);
    for (uint64_t i = 0; i < tried; i++) {
        if (added[i])
            continue;
        size_t len = cft_key(k, 77, i);
        CHECK_ST(cf_add(f, k, len), CF_OK);
    }
    CHECK(cft_stats(f).sub_filters > 1);
    CHECK_EQ_U(cft_stats(f).items, tried);
    CHECK_EQ_U(cft_missing(f, 77, tried), 0);
    cf_free(f);
    CHECK_ALLOC_CLEAN(&ta);
}

/* A table of a megabyte or more takes search memory of its own at its first long eviction
 * search. If that allocation fails, the search runs on the stack instead: every insert
 * still succeeds, and the filter ends up byte for byte as one whose allocation worked.
 * The budget (max_kicks 100) leaves the insert's own evictions at two moves: with the
 * default, three moves end nearly every eviction of a fill to 95 %, and the search, which
 * this is about, would hardly run. */
static void test_search_memory_refused(void)
{
    cft_context("search memory refused");
    cf_config c = {
        .capacity = 1000000, .max_kicks = 100, .seed = cft_subseed(90), .flags = CF_FIXED_SEED};
    cft_alloc ta, tb;
    cft_alloc_init(&ta);
    cft_alloc_init(&tb);
    cf_config ca = c, cb = c;
    ca.allocator = &ta.a;
    cb.allocator = &tb.a;
    cf_filter *fa = NULL, *fb = NULL;
    if (!CHECK_ST(cf_new(&ca, &fa), CF_OK) || !CHECK_ST(cf_new(&cb, &fb), CF_OK)) {
        cf_free(fa);
        cf_free(fb);
        return;
    }
    ta.fail_at = ta.calls + 1; /* every allocation from now on fails */
    ta.fail_persist = true;
    uint64_t n = 950000, added = 0; /* 95 % load: many long searches */
    for (uint64_t i = 0; i < n; i++) {
        uint64_t h = cft_mix64(i + 1);
        cf_status sa = cf_add_hash(fa, h), sb = cf_add_hash(fb, h);
        if (!CHECK_ST(sa, sb))
            break;
        added += sa == CF_OK;
    }
    CHECK_EQ_U(added, n);
    CHECK_MSG(ta.failures > 0, "the search never asked for memory");
    CHECK_MSG(tb.calls > 3, "the search took no memory of its own");
    CHECK_MSG(cft_same_bytes(fa, fb), "stack and own search memory built different filters");
    cf_free(fa);
    cf_free(fb);
    CHECK_ALLOC_CLEAN(&ta);
    CHECK_ALLOC_CLEAN(&tb);
}

/* A fixed filter allocates room for its stash when it first stashes a fingerprint, and
 * frees it with the last entry. Filled until CF_FULL, each add tried first with its first
 * allocation failing: one that needed the room returns CF_ENOMEM and changes nothing,
 * then succeeds with the room. Deleting every key gives the room back. */
static void test_stash_room(void)
{
    cft_context("stash room");
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_config c = {.capacity = 30,
                   .bucket_size = 2,
                   .fingerprint_bits = 8,
                   .seed = cft_subseed(70),
                   .allocator = &ta.a};
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    uint8_t k[CFT_KEY_MAX];
    uint64_t n = 0, refused = 0, base_live = ta.live;
    for (cf_status rc = CF_OK; rc != CF_FULL && n < 100000; n++) {
        size_t len = cft_key(k, 70, n);
        cf_stats before = cft_stats(f);
        uint64_t live_bytes = ta.live_bytes;
        cft_alloc_arm(&ta, 1, false);
        rc = cf_add(f, k, len);
        cft_alloc_disarm(&ta);
        if (rc == CF_ENOMEM) {
            refused++;
            CHECK_EQ_U(before.stashed, 0); /* only the first stash allocates */
            cf_stats after = cft_stats(f);
            CHECK_STATS_EQ(before, after);
            CHECK_EQ_U(ta.live_bytes, live_bytes);
            CHECK_EQ_U(cf_count(f, k, len), 0);
            rc = cf_add(f, k, len);
            CHECK_ST(rc, CF_OK);
            CHECK_EQ_U(cft_stats(f).stashed, 1);
        }
        CHECK(rc == CF_OK || rc == CF_FULL);
    }
    CHECK_EQ_U(refused, 1);
    CHECK_EQ_U(cft_stats(f).stashed, 8);
    CHECK_EQ_U(ta.live, base_live + 2);    /* the stash's room, and the block that points to it */
    for (uint64_t i = 0; i + 1 < n; i++) { /* every key but the refused last */
        size_t len = cft_key(k, 70, i);
        CHECK_ST(cf_delete(f, k, len), CF_OK);
    }
    CHECK_EQ_U(cft_stats(f).items, 0);
    CHECK_EQ_U(ta.live, base_live);
    cf_free(f);
    CHECK_ALLOC_CLEAN(&ta);
}

int main(void)
{
    cft_init("test_alloc_fail");
    test_stash_room();
    test_search_memory_refused();
    test_new();
    const struct {
        unsigned b, f, e;
        uint64_t cap;
        unsigned growths;
    } g[] = {{4, 12, 2, 100, 5}, {2, 16, 1, 64, 6}, {8, 8, 3, 50, 4},
             {1, 12, 2, 40, 5},  {3, 23, 4, 30, 3}, {16, 32, 2, 20, 4}};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        test_growth(g[i].b, g[i].f, g[i].e, g[i].cap, g[i].growths, false, 10 + i, 0);
        test_growth(g[i].b, g[i].f, g[i].e, g[i].cap, g[i].growths, true, 20 + i, 0);
    }
    /* A concurrent filter's growth: its retired sub-filter arrays are kept, not freed. */
    test_growth(4, 12, 2, 100, 6, false, 40, CF_CONCURRENT);
    test_growth(4, 13, 2, 100, 5, true, 41, CF_SEMI_SORT | CF_CONCURRENT);
    test_growth_refused_then_allowed();
    return cft_finish();
}
