/*
 * test_sizing.c - memory and capacity promises of cf_new:
 *
 * 1. The table is not rounded to a power of two: stats.bytes is within 5 % of
 *    capacity * f / (8 * alpha_b), alpha = 0.84 (b 2), 0.95 (b 4), 0.98 (b 8).
 * 2. `capacity` distinct random keys always fit into a fixed-size filter (expansion 0):
 *    cf_add never returns CF_FULL before `capacity` keys, for many capacities, shapes and
 *    seeds.
 */
#include "testutil.h"

static void test_memory(void)
{
    static const struct {
        unsigned b;
        double alpha;
    } loads[] = {{2, 0.84}, {4, 0.95}, {8, 0.98}};
    const uint64_t caps[] = {1100000, 5500000, 1000003, 3333333, 777777};
    const unsigned fs[] = {12, 8, 16};
    const double tol = 0.05;
    for (size_t li = 0; li < sizeof loads / sizeof loads[0]; li++)
        for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++)
            for (size_t fi = 0; fi < sizeof fs / sizeof fs[0]; fi++) {
                unsigned b = loads[li].b, fb = fs[fi];
                uint64_t cap = caps[ci];
                cft_context("memory: capacity %llu b %u f %u", (unsigned long long)cap, b, fb);
                cf_config c = {.capacity = cap, .bucket_size = b, .fingerprint_bits = fb};
                cf_filter *f = NULL;
                if (!CHECK_ST(cf_new(&c, &f), CF_OK))
                    continue;
                cf_stats s = cft_stats(f);
                double ideal = (double)cap * fb / (8.0 * loads[li].alpha);
                double ratio = (double)s.bytes / ideal;
                CHECK_MSG(fabs(ratio - 1.0) <= tol,
                          "stats.bytes %llu, ideal %.0f (ratio %.4f, allowed 1 +- %.2f)",
                          (unsigned long long)s.bytes, ideal, ratio, tol);
                /* The slots agree with the bytes and the capacity. */
                double slot_ratio = (double)s.slots / ((double)cap / loads[li].alpha);
                CHECK_MSG(fabs(slot_ratio - 1.0) <= tol, "slots %llu, ideal %.0f",
                          (unsigned long long)s.slots, (double)cap / loads[li].alpha);
                CHECK(s.bytes * 8 >= s.slots * fb);
                CHECK_EQ_U(s.slots, s.buckets * b);
                size_t need = 0;
                CHECK_ST(cf_bytes_needed(&c, &need), CF_OK);
                CHECK(need >= s.bytes);
                if (ci < 2 && fi == 0)
                    printf("memory: capacity %7llu b %u f %2u: %9llu bytes, ideal %9.0f "
                           "(%+.2f %%), needed %llu\n",
                           (unsigned long long)cap, b, fb, (unsigned long long)s.bytes, ideal,
                           (ratio - 1.0) * 100.0, (unsigned long long)need);
                cf_free(f);
            }
}

/* Insert exactly `cap` distinct keys; every add must succeed. */
static uint64_t stash_used; /* filters that needed the stash to take `capacity` keys */
static uint64_t refused;    /* configs refused as impossible for their shape */

static void fill_exactly(uint64_t cap, unsigned b, unsigned fb, uint64_t seed_tag,
                         uint64_t *failures)
{
    uint64_t seed = cft_subseed(seed_tag);
    cft_context("fit: capacity %llu b %u f %u filter seed 0x%016llx (tag %llu)",
                (unsigned long long)cap, b, fb, (unsigned long long)seed,
                (unsigned long long)seed_tag);
    cf_config c = {.capacity = cap, .bucket_size = b, .fingerprint_bits = fb, .seed = seed};
    cf_filter *f = NULL;
    cf_status rc0 = cf_new(&c, &f);
    if (rc0 == CF_EINVAL && b * fb <= 16) {
        /* The header allows refusing a capacity that a shape with short fingerprints in
         * small buckets (b * f below about 16) cannot hold at any load. cf_bytes_needed
         * must agree. */
        size_t need = 0;
        CHECK_ST(cf_bytes_needed(&c, &need), CF_EINVAL);
        refused++;
        printf("  note: capacity %llu b %u f %u refused with CF_EINVAL (allowed: b * f <= 16)\n",
               (unsigned long long)cap, b, fb);
        return;
    }
    if (!CHECK_ST(rc0, CF_OK))
        return;
    uint8_t k[CFT_KEY_MAX];
    const uint64_t stream = seed_tag * 1000003 + 17;
    uint64_t added = 0;
    for (uint64_t i = 0; i < cap; i++) {
        size_t len = cft_key(k, stream, i);
        cf_status rc = cf_add(f, k, len);
        if (!CHECK_MSG(rc == CF_OK, "add %llu of %llu returned %s (load %.4f)",
                       (unsigned long long)i + 1, (unsigned long long)cap, cft_status_name(rc),
                       cft_stats(f).load_factor)) {
            (*failures)++;
            break;
        }
        added++;
    }
    cf_stats s = cft_stats(f);
    CHECK_EQ_U(s.items, added);
    CHECK_EQ_U(s.sub_filters, 1);
    CHECK(s.load_factor <= 1.0);
    CHECK(s.stashed <= 8);
    if (s.stashed > 0) {
        stash_used++;
        printf("  note: capacity %llu b %u f %u (tag %llu): %llu of the keys are in the stash\n",
               (unsigned long long)cap, b, fb, (unsigned long long)seed_tag,
               (unsigned long long)s.stashed);
    }
    uint64_t missing = 0;
    for (uint64_t i = 0; i < added; i++) {
        size_t len = cft_key(k, stream, i);
        missing += !cf_contains(f, k, len);
    }
    CHECK_EQ_U(missing, 0);
    cf_free(f);
}

static void test_fit(void)
{
    const uint64_t caps[] = {1, 2, 3, 4, 5, 7, 10, 16, 100, 1000, 12345, 100000, 1000000};
    const unsigned bs[] = {1, 2, 4, 8};
    const unsigned fs[] = {8, 12, 16};
    uint64_t failures = 0, runs = 0;
    double t0 = cft_now();
    for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++) {
        uint64_t cap = caps[ci];
        if (cap >= 100000)
            cap = cft_scaled(cap);
        /* Small tables are cheap: give them more seeds (edge cases live there). */
        unsigned seeds = cap <= 12345 ? 10 : cap <= 100000 ? 3 : 2;
        for (size_t bi = 0; bi < sizeof bs / sizeof bs[0]; bi++)
            for (size_t fi = 0; fi < sizeof fs / sizeof fs[0]; fi++)
                for (unsigned s = 0; s < seeds; s++) {
                    uint64_t tag = ((ci * 16 + bi) * 16 + fi) * 64 + s;
                    fill_exactly(cap, bs[bi], fs[fi], tag, &failures);
                    runs++;
                }
    }
    /* Odd shapes too. */
    const struct {
        unsigned b, f;
    } odd[] = {{3, 7}, {16, 4}, {5, 23}, {255, 32}, {6, 32}, {16, 16}};
    for (size_t oi = 0; oi < sizeof odd / sizeof odd[0]; oi++)
        for (uint64_t cap = 1; cap <= 30000; cap = cap * 7 + 3)
            for (unsigned s = 0; s < 3; s++) {
                fill_exactly(cap, odd[oi].b, odd[oi].f, 1000000 + oi * 1000 + cap * 3 + s,
                             &failures);
                runs++;
            }
    /* Short fingerprints in small buckets: a bucket has at most 2^f - 1 alternates, so
     * these are sized for lower loads (or refused, see fill_exactly); keys must fit. */
    const struct {
        unsigned b, f;
    } shortf[] = {{1, 4}, {1, 5}, {1, 6}, {1, 8}, {2, 4}, {2, 5}, {2, 6}, {3, 4}, {4, 4}, {8, 4}};
    const uint64_t scaps[] = {10, 1000, 100000, 1000000};
    for (size_t si = 0; si < sizeof shortf / sizeof shortf[0]; si++)
        for (size_t ci = 0; ci < sizeof scaps / sizeof scaps[0]; ci++) {
            uint64_t cap = scaps[ci] >= 100000 ? cft_scaled(scaps[ci]) : scaps[ci];
            unsigned seeds = cap >= 1000000 ? 1 : cap >= 100000 ? 2 : 5;
            for (unsigned s = 0; s < seeds; s++) {
                fill_exactly(cap, shortf[si].b, shortf[si].f, 2000000 + si * 1000 + ci * 10 + s,
                             &failures);
                runs++;
            }
        }
    printf("fit: %llu filters filled to capacity, %llu failed, %llu needed the stash, %llu "
           "refused as impossible, %.2f s\n",
           (unsigned long long)runs, (unsigned long long)failures, (unsigned long long)stash_used,
           (unsigned long long)refused, cft_now() - t0);
}

int main(void)
{
    cft_init("test_sizing");
    test_memory();
    test_fit();
    return cft_finish();
}
