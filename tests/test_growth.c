/*
 * test_growth.c - growing filters.
 *
 * 1. Delete safety across sub-filters: a filter starting at capacity 1000 takes 50k+
 *    distinct keys (expansion 1, 2, 4; several shapes), then every key is deleted in random
 *    order. After each delete, every remaining key that the delete could have hurt is
 *    checked: those with the same fingerprint and the same bucket pair in the oldest
 *    sub-filter (indices are nested, so keys that share a pair in any sub-filter share it
 *    there), plus a few random ones; every 1000 deletes, all remaining keys are. No false
 *    negatives, ever; at the end no items.
 * 2. Hot key: adding one key over and over ends in CF_FULL without growing (at most
 *    2 * bucket_size copies per sub-filter).
 * 3. Sub-filter cap: max_sub_filters 3, expansion 1: distinct keys until CF_FULL; then
 *    exactly 3 sub-filters and nothing lost.
 * 4. Duplicates: each key added 2-3 times, interleaved across growth; every copy deleted;
 *    no false negatives along the way.
 */
#include "internal.h"
#include "testutil.h"

/* Groups of keys that one delete could affect (see above), as lists in a hash table. */
#define RISK_GROUPS 65536u
#define RISK_NONE   UINT64_MAX

static uint64_t risk_group(const cf_filter *f, const uint8_t *key, size_t len)
{
    cf__key k = cf__key_bits(f->fp_bits, cf_hash(f, key, len));
    const cf__table *t = &f->tables[0];
    uint64_t i1, i2;
    cf__buckets(t, &k, &i1, &i2);
    uint64_t lo = i1 < i2 ? i1 : i2;
    return cft_mix64(lo * UINT64_C(0x100000001b3) ^ k.fp) % RISK_GROUPS;
}

static void shuffle(uint64_t *a, size_t n, cft_rng *r)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)cft_below(r, i);
        uint64_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* Keys ids[0..n) are all present (ids index into stream). */
static uint64_t missing_of(const cf_filter *f, uint64_t stream, const uint64_t *ids, size_t n)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t missing = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = cft_key(k, stream, ids[i]);
        missing += !cf_contains(f, k, len);
    }
    return missing;
}

/* ------------------------------------------------------------------------------------ */

/* flags: 0 (sub-filters widen their fingerprints) or CF_GROW_SAME_WIDTH, and
 * CF_SEMI_SORT. */
static void test_grow_then_delete(unsigned b, unsigned fb, unsigned e, unsigned flags,
                                  uint64_t nkeys, uint64_t tag)
{
    const uint64_t cap = 1000;
    const unsigned max_sub = e == 1 ? 200 : 0;
    uint64_t seed = cft_subseed(tag);
    cft_context("grow/delete b %u f %u e %u%s%s keys %llu filter seed 0x%016llx (tag %llu)", b, fb,
                e, (flags & CF_GROW_SAME_WIDTH) ? " same width" : "",
                (flags & CF_SEMI_SORT) ? " semi-sorted" : "", (unsigned long long)nkeys,
                (unsigned long long)seed, (unsigned long long)tag);
    cf_filter *f = cft_new((cf_config){.capacity = cap,
                                       .bucket_size = b,
                                       .fingerprint_bits = fb,
                                       .expansion = e,
                                       .max_sub_filters = max_sub,
                                       .seed = seed,
                                       .flags = flags});
    if (f == NULL)
        return;
    cft_rng r = cft_rng_make(seed);
    const uint64_t stream = tag;
    const uint64_t slots0 = cft_stats(f).slots; /* the first sub-filter's */
    uint8_t k[CFT_KEY_MAX];
    uint64_t *ids = malloc(nkeys * sizeof *ids);
    if (ids == NULL)
        exit(2);
    for (uint64_t i = 0; i < nkeys; i++) {
        ids[i] = i;
        size_t len = cft_key(k, stream, i);
        if (!CHECK_MSG(cf_add(f, k, len) == CF_OK, "add %llu failed", (unsigned long long)i)) {
            nkeys = i;
            break;
        }
    }
    cf_stats s = cft_stats(f);
    CHECK_EQ_U(s.items, nkeys);
    unsigned subs = s.sub_filters;
    /* Sub-filter k has slots0 * e^k slots and holds no more keys than that: at least this
     * many sub-filters. */
    unsigned need = 0;
    for (double held = 0.0, next = (double)slots0; held < (double)nkeys; next *= e, need++)
        held += next;
    CHECK_MSG(subs >= need, "%u sub-filters for %llu keys, expected at least %u", subs,
              (unsigned long long)nkeys, need);
    CHECK_EQ_U(missing_of(f, stream, ids, nkeys), 0);

    /* The at-risk groups: head[g] -> next[id] -> ... over the ids of group g. */
    uint64_t *head = malloc(RISK_GROUPS * sizeof *head), *next = malloc(nkeys * sizeof *next);
    uint64_t *group = malloc(nkeys * sizeof *group);
    bool *gone = calloc(nkeys ? nkeys : 1, sizeof *gone);
    if (head == NULL || next == NULL || group == NULL || gone == NULL)
        exit(2);
    for (uint64_t g = 0; g < RISK_GROUPS; g++)
        head[g] = RISK_NONE;
    for (uint64_t i = 0; i < nkeys; i++) {
        size_t len = cft_key(k, stream, i);
        group[i] = risk_group(f, k, len);
        next[i] = head[group[i]];
        head[group[i]] = i;
    }

    /* Delete in random order. ids[0..left) are the keys still in. */
    shuffle(ids, nkeys, &r);
    size_t left = nkeys;
    uint64_t bad = 0, sweeps = 0, risk_checks = 0;
    while (left > 0) {
        uint64_t id = ids[left - 1];
        size_t len = cft_key(k, stream, id);
        cf_status rc = cf_delete(f, k, len);
        left--;
        gone[id] = true;
        if (!CHECK_MSG(rc == CF_OK, "delete of added key %llu returned %s", (unsigned long long)id,
                       cft_status_name(rc)))
            bad++;
        /* After each delete: every remaining key it could have hurt. */
        for (uint64_t j = head[group[id]]; j != RISK_NONE; j = next[j]) {
            if (gone[j])
                continue;
            risk_checks++;
            len = cft_key(k, stream, j);
            if (!CHECK_MSG(cf_contains(f, k, len),
                           "key %llu (same fingerprint and buckets) lost after deleting key %llu",
                           (unsigned long long)j, (unsigned long long)id))
                bad++;
        }
        /* After each delete: a few random remaining keys. */
        for (int j = 0; j < 4 && left > 0; j++) {
            uint64_t other = ids[cft_below(&r, left)];
            len = cft_key(k, stream, other);
            if (!CHECK_MSG(cf_contains(f, k, len),
                           "key %llu lost after deleting key %llu (%zu keys left)",
                           (unsigned long long)other, (unsigned long long)id, left))
                bad++;
        }
        if (left % 1000 == 0) {
            sweeps++;
            uint64_t m = missing_of(f, stream, ids, left);
            CHECK_MSG(m == 0, "%llu of %zu remaining keys lost", (unsigned long long)m, left);
            CHECK_EQ_U(cft_stats(f).items, left);
            bad += m;
        }
        if (bad > 20)
            break;
    }
    s = cft_stats(f);
    CHECK_EQ_U(s.items, left);
    if (left == 0)
        CHECK(s.load_factor == 0.0);
    CHECK_EQ_U(s.sub_filters, subs); /* deleting never shrinks */
    /* Empty: none of the keys is there any more (only true: the filter holds nothing). */
    uint64_t found = 0;
    for (uint64_t i = 0; left == 0 && i < nkeys; i++) {
        size_t len = cft_key(k, stream, i);
        found += cf_contains(f, k, len);
    }
    CHECK_EQ_U(found, 0);
    printf("  grow/delete b %2u f %2u e %u%s: %llu keys in %u sub-filters, deleted in random "
           "order, %llu at-risk checks, %llu sweeps\n",
           b, fb, e, flags ? " same width" : "", (unsigned long long)nkeys, subs,
           (unsigned long long)risk_checks, (unsigned long long)sweeps);
    free(head);
    free(next);
    free(group);
    free(gone);
    free(ids);
    cf_free(f);
}

/* ------------------------------------------------------------------------------------ */

/* Add one key until the filter refuses it; the sub-filter count must not move. */
static void hot_key(cf_filter *f, unsigned b, const char *where)
{
    cf_stats s0 = cft_stats(f);
    const char *hot = "the hot key";
    const size_t hl = strlen(hot);
    uint64_t c0 = cf_count(f, hot, hl);
    uint64_t ok = 0;
    cf_status rc = CF_OK;
    const uint64_t limit = 2u * b * s0.sub_filters + 10;
    while (ok <= limit) {
        rc = cf_add(f, hot, hl);
        if (rc != CF_OK)
            break;
        ok++;
    }
    if (!CHECK_MSG(rc == CF_FULL, "%s: after %llu copies the add returned %s", where,
                   (unsigned long long)ok, cft_status_name(rc)))
        return; /* more adds could only grow it further */
    cf_stats s1 = cft_stats(f);
    CHECK_MSG(s1.sub_filters == s0.sub_filters, "%s: the hot key grew the filter from %u to %u",
              where, s0.sub_filters, s1.sub_filters);
    CHECK_MSG(ok >= 1 && ok <= 2u * b * s0.sub_filters,
              "%s: %llu copies accepted (b %u, %u sub-filters)", where, (unsigned long long)ok, b,
              s0.sub_filters);
    CHECK_EQ_U(s1.items, s0.items + ok);
    CHECK(cf_count(f, hot, hl) >= c0 + ok);
    /* Refused again and again, the filter still does not grow. */
    for (int i = 0; i < 100; i++)
        CHECK_ST(cf_add(f, hot, hl), CF_FULL);
    CHECK_EQ_U(cft_stats(f).sub_filters, s0.sub_filters);
    CHECK_EQ_U(cft_stats(f).items, s1.items);
    /* Every copy can be deleted again. */
    for (uint64_t i = 0; i < ok; i++)
        CHECK_ST(cf_delete(f, hot, hl), CF_OK);
    CHECK_EQ_U(cft_stats(f).items, s0.items);
    printf("  hot key (%s): %llu copies, then CF_FULL with %u sub-filter(s)\n", where,
           (unsigned long long)ok, s0.sub_filters);
}

static void test_hot_key(void)
{
    const struct {
        unsigned b, f, e;
    } sh[] = {{4, 12, 2}, {2, 16, 1}, {8, 8, 4}, {1, 12, 2}, {3, 7, 1}, {16, 32, 2}};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        uint64_t seed = cft_subseed(500 + i);
        cft_context("hot key b %u f %u e %u filter seed 0x%016llx", sh[i].b, sh[i].f, sh[i].e,
                    (unsigned long long)seed);
        cf_filter *f = cft_new((cf_config){.capacity = 1000,
                                           .bucket_size = sh[i].b,
                                           .fingerprint_bits = sh[i].f,
                                           .expansion = sh[i].e,
                                           .seed = seed});
        if (f == NULL)
            continue;
        uint8_t k[CFT_KEY_MAX];
        /* Fresh filter with a few keys (low load): no growth. */
        for (uint64_t j = 0; j < 100; j++) {
            size_t len = cft_key(k, 600 + i, j);
            CHECK_ST(cf_add(f, k, len), CF_OK);
        }
        hot_key(f, sh[i].b, "1 sub-filter");
        /* Grow to 3 sub-filters, stopping right after the growth (the newest is nearly
         * empty), then the hot key again. */
        uint64_t n = 100;
        while (cft_stats(f).sub_filters < 3 && n < 1000000) {
            size_t len = cft_key(k, 600 + i, n++);
            if (!CHECK_ST(cf_add(f, k, len), CF_OK))
                break;
        }
        CHECK_EQ_U(cft_stats(f).sub_filters, 3);
        hot_key(f, sh[i].b, "3 sub-filters");
        uint64_t missing = 0;
        for (uint64_t j = 0; j < n; j++) {
            size_t len = cft_key(k, 600 + i, j);
            missing += !cf_contains(f, k, len);
        }
        CHECK_EQ_U(missing, 0);
        cf_free(f);
    }

    /* The hot key in a fixed filter: CF_FULL after 2b copies and a full stash. */
    cft_context("hot key, fixed filter");
    cf_filter *f = cft_new((cf_config){
        .capacity = 1000, .bucket_size = 4, .fingerprint_bits = 12, .seed = cft_subseed(555)});
    if (f != NULL) {
        uint64_t ok = 0;
        cf_status rc = CF_OK;
        while (ok < 100 && (rc = cf_add(f, "h", 1)) == CF_OK)
            ok++;
        CHECK_ST(rc, CF_FULL);
        /* An empty filter: both buckets (2b = 8 slots) take copies, then the fixed
         * filter's 8-entry stash (the header says so), then nothing more. */
        cf_stats s = cft_stats(f);
        CHECK_EQ_U(ok, 16);
        CHECK_EQ_U(s.stashed, 8);
        CHECK_EQ_U(cf_count(f, "h", 1), ok);
        CHECK_EQ_U(s.items, ok);
        for (uint64_t i = 0; i < ok; i++)
            CHECK_ST(cf_delete(f, "h", 1), CF_OK);
        CHECK_ST(cf_delete(f, "h", 1), CF_NOT_FOUND);
        CHECK_EQ_U(cft_stats(f).items, 0);
        cf_free(f);
    }
}

/* ------------------------------------------------------------------------------------ */

static void test_max_sub_filters(void)
{
    const struct {
        unsigned b, f, e, max_sub;
        uint64_t cap;
    } sh[] = {{4, 12, 1, 3, 1000}, {2, 8, 1, 3, 500},   {8, 16, 1, 3, 2000},
              {4, 12, 2, 3, 300},  {4, 12, 1, 1, 1000}, {1, 16, 3, 2, 400}};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        uint64_t seed = cft_subseed(700 + i);
        cft_context("max_sub_filters %u b %u f %u e %u cap %llu filter seed 0x%016llx",
                    sh[i].max_sub, sh[i].b, sh[i].f, sh[i].e, (unsigned long long)sh[i].cap,
                    (unsigned long long)seed);
        cf_filter *f = cft_new((cf_config){.capacity = sh[i].cap,
                                           .bucket_size = sh[i].b,
                                           .fingerprint_bits = sh[i].f,
                                           .expansion = sh[i].e,
                                           .max_sub_filters = sh[i].max_sub,
                                           .seed = seed});
        if (f == NULL)
            continue;
        const uint64_t stream = 800 + i;
        uint8_t k[CFT_KEY_MAX];
        uint64_t n = 0;
        cf_status rc = CF_OK;
        cf_stats before = cft_stats(f);
        while (n < 10000000) {
            size_t len = cft_key(k, stream, n);
            before = cft_stats(f);
            rc = cf_add(f, k, len);
            if (rc != CF_OK)
                break;
            n++;
        }
        CHECK_ST(rc, CF_FULL);
        cf_stats s = cft_stats(f);
        CHECK_STATS_EQ(before, s);
        CHECK_EQ_U(s.sub_filters, sh[i].max_sub);
        CHECK_EQ_U(s.items, n);
        /* More distinct keys: CF_FULL or OK, never growth; nothing lost. */
        uint64_t more_ok = 0;
        static uint64_t ok_ids[200];
        for (uint64_t j = 1; j <= 200; j++) {
            size_t len = cft_key(k, stream, n + j);
            rc = cf_add(f, k, len);
            CHECK(rc == CF_OK || rc == CF_FULL);
            if (rc == CF_OK)
                ok_ids[more_ok++] = n + j;
        }
        s = cft_stats(f);
        CHECK_EQ_U(s.sub_filters, sh[i].max_sub);
        CHECK_EQ_U(s.items, n + more_ok);
        uint64_t missing = 0;
        for (uint64_t j = 0; j < n; j++) {
            size_t len = cft_key(k, stream, j);
            missing += !cf_contains(f, k, len);
        }
        missing += missing_of(f, stream, ok_ids, more_ok);
        CHECK_EQ_U(missing, 0);
        printf("  max_sub_filters %u (e %u, b %u): CF_FULL after %llu keys, load %.4f\n",
               sh[i].max_sub, sh[i].e, sh[i].b, (unsigned long long)n, s.load_factor);
        cf_free(f);
    }
}

/* ------------------------------------------------------------------------------------ */

static void test_duplicates(unsigned b, unsigned fb, unsigned e, uint64_t nkeys, uint64_t tag)
{
    uint64_t seed = cft_subseed(tag);
    cft_context("duplicates b %u f %u e %u keys %llu filter seed 0x%016llx (tag %llu)", b, fb, e,
                (unsigned long long)nkeys, (unsigned long long)seed, (unsigned long long)tag);
    cf_filter *f = cft_new((cf_config){.capacity = 500,
                                       .bucket_size = b,
                                       .fingerprint_bits = fb,
                                       .expansion = e,
                                       .max_sub_filters = e == 1 ? 500 : 0,
                                       .seed = seed});
    if (f == NULL)
        return;
    cft_rng r = cft_rng_make(seed ^ 1);
    const uint64_t stream = tag;
    uint8_t k[CFT_KEY_MAX];
    /* Each key gets 2 or 3 copies. The copies are added in a shuffled order of
     * (key, copy) pairs, so copies of one key land before and after growths. */
    uint8_t *copies = malloc(nkeys);
    uint8_t *have = calloc(nkeys, 1);
    uint64_t total = 0;
    if (copies == NULL || have == NULL)
        exit(2);
    for (uint64_t i = 0; i < nkeys; i++) {
        copies[i] = (uint8_t)(2 + cft_below(&r, 2));
        total += copies[i];
    }
    uint64_t *order = malloc(total * sizeof *order);
    if (order == NULL)
        exit(2);
    uint64_t t = 0;
    for (uint64_t i = 0; i < nkeys; i++)
        for (unsigned c = 0; c < copies[i]; c++)
            order[t++] = i;
    shuffle(order, total, &r);
    uint64_t bad = 0;
    for (uint64_t j = 0; j < total && bad < 20; j++) {
        uint64_t id = order[j];
        size_t len = cft_key(k, stream, id);
        cf_status rc = cf_add(f, k, len);
        if (!CHECK_MSG(rc == CF_OK, "copy %u of key %llu: %s", have[id] + 1u,
                       (unsigned long long)id, cft_status_name(rc))) {
            bad++;
            continue;
        }
        have[id]++;
        if (cf_count(f, k, len) < have[id]) {
            CHECK_MSG(false, "key %llu: count %llu < %u", (unsigned long long)id,
                      (unsigned long long)cf_count(f, k, len), have[id]);
            bad++;
        }
    }
    cf_stats s = cft_stats(f);
    CHECK_EQ_U(s.items, total);
    unsigned subs = s.sub_filters;
    if (cft_full_scale())
        CHECK_MSG(subs >= 4, "only %u sub-filters", subs);
    /* Delete every copy, in another shuffled order. */
    shuffle(order, total, &r);
    uint64_t remaining = total;
    for (uint64_t j = 0; j < total && bad < 20; j++) {
        uint64_t id = order[j];
        size_t len = cft_key(k, stream, id);
        if (!CHECK_ST(cf_delete(f, k, len), CF_OK)) {
            bad++;
            continue;
        }
        have[id]--;
        remaining--;
        if (have[id] > 0 && !CHECK_MSG(cf_contains(f, k, len), "key %llu lost with %u copies left",
                                       (unsigned long long)id, have[id]))
            bad++;
        if (j % 1000 == 999 || j + 1 == total) {
            uint64_t missing = 0, under = 0;
            for (uint64_t i = 0; i < nkeys; i++) {
                if (have[i] == 0)
                    continue;
                len = cft_key(k, stream, i);
                missing += !cf_contains(f, k, len);
                under += cf_count(f, k, len) < have[i];
            }
            CHECK_MSG(missing == 0 && under == 0,
                      "after %llu deletes: %llu keys missing, %llu under-counted",
                      (unsigned long long)j + 1, (unsigned long long)missing,
                      (unsigned long long)under);
            CHECK_EQ_U(cft_stats(f).items, remaining);
            bad += missing + under;
        }
    }
    CHECK_EQ_U(cft_stats(f).items, 0);
    printf("  duplicates b %2u f %2u e %u: %llu keys, %llu copies, %u sub-filters\n", b, fb, e,
           (unsigned long long)nkeys, (unsigned long long)total, subs);
    free(order);
    free(copies);
    free(have);
    cf_free(f);
}

/* A filter that grows by e = 1 adds a sub-filter of the first's size each time, and every
 * lookup probes all of them: its checks cost the square of its keys. A third of the keys
 * still makes about 20 sub-filters; CF_TEST_SCALE=3 gives the others' count. */
#define CFT_SAME_SIZE_SHARE 3u

static uint64_t keys_for(unsigned e, uint64_t nkeys)
{
    return e == 1 ? nkeys / CFT_SAME_SIZE_SHARE : nkeys;
}

int main(void)
{
    cft_init("test_growth");
    const uint64_t nkeys = cft_scaled_min(60000, 5000);
    const struct {
        unsigned b, f, e;
    } sh[] = {{4, 12, 1}, {4, 12, 2}, {4, 12, 4}, {2, 8, 2},  {8, 16, 1},
              {1, 16, 2}, {3, 7, 4},  {16, 4, 2}, {2, 32, 1}, {8, 23, 4}};
    /* Every shape with widening sub-filters (the default), and with the first's width. */
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        uint64_t n = keys_for(sh[i].e, nkeys);
        test_grow_then_delete(sh[i].b, sh[i].f, sh[i].e, 0, n, 10 + i);
        test_grow_then_delete(sh[i].b, sh[i].f, sh[i].e, CF_GROW_SAME_WIDTH, n, 40 + i);
    }
    /* Semi-sorted buckets, at widths from the shortest to the widest (widening ones reach
     * 32 bits, where a bucket is 124 bits). */
    const struct {
        unsigned f, e;
    } semi[] = {{4, 2}, {5, 1}, {8, 2}, {12, 1}, {13, 2}, {16, 4}, {31, 1}, {32, 2}};
    for (size_t i = 0; i < sizeof semi / sizeof semi[0]; i++) {
        uint64_t n = keys_for(semi[i].e, nkeys);
        test_grow_then_delete(4, semi[i].f, semi[i].e, CF_SEMI_SORT, n, 70 + i);
        test_grow_then_delete(4, semi[i].f, semi[i].e, CF_SEMI_SORT | CF_GROW_SAME_WIDTH, n,
                              80 + i);
    }
    test_hot_key();
    test_max_sub_filters();
    const struct {
        unsigned b, f, e;
    } dsh[] = {{4, 12, 2}, {2, 16, 1}, {8, 8, 4}, {3, 23, 2}, {16, 12, 1}};
    for (size_t i = 0; i < sizeof dsh / sizeof dsh[0]; i++)
        test_duplicates(dsh[i].b, dsh[i].f, dsh[i].e,
                        keys_for(dsh[i].e, cft_scaled_min(15000, 2000)), 900 + i);
    return cft_finish();
}
