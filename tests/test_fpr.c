/*
 * test_fpr.c - the measured false-positive rate at full load.
 *
 * A fixed filter (b 4; f 8, 12, 16; plus b 2 and b 8 at f 12) is filled with exactly
 * `capacity` keys, then queried with keys that were never added. The measured rate must
 * be within 10 % of
 *
 *     p = 1 - (1 - 1 / (2^f - 1))^(2 * b * load)
 *
 * (two buckets of b slots, a fraction `load` of them occupied, each holding one of the
 * 2^f - 1 non-zero fingerprints), and stats.fpr within 10 % of the measured rate.
 *
 * How many queries: at least 2 million (CF_TEST_SCALE scales this up or down), and at
 * least enough that the expected number of false positives is 2500. The count is
 * binomial, so its standard deviation is at most sqrt(2500) = 50, i.e. 2 % of the
 * expectation, and the 10 % window is 5 standard deviations wide on each side: a
 * correct filter fails this with probability below 1e-6, while a filter whose rate is
 * really 10 % off is caught half the time or more, and one 15 % off almost always. For
 * f = 16 that means about 21 million queries.
 *
 * Then growing filters, grown to 1000 times their first capacity: the measured rate on
 * stats.fpr, and within stats.fpr_bound when the sub-filters widen their fingerprints.
 */
#include "testutil.h"

/* flags: 0 or CF_SEMI_SORT, whose buckets take f - 1 bits a slot and must give the rate
 * of f bits. */
static void measure(unsigned b, unsigned fb, unsigned flags, uint64_t cap, uint64_t tag)
{
    uint64_t seed = cft_subseed(tag);
    bool semi = (flags & CF_SEMI_SORT) != 0;
    cft_context("fpr b %u f %u%s capacity %llu filter seed 0x%016llx (tag %llu)", b, fb,
                semi ? " semi-sorted" : "", (unsigned long long)cap, (unsigned long long)seed,
                (unsigned long long)tag);
    cf_config c = {
        .capacity = cap, .bucket_size = b, .fingerprint_bits = fb, .seed = seed, .flags = flags};
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    uint8_t k[CFT_KEY_MAX];
    const uint64_t in_stream = tag * 2, out_stream = tag * 2 + 1;
    uint64_t added = 0;
    for (uint64_t i = 0; i < cap; i++) {
        size_t len = cft_key(k, in_stream, i);
        if (!CHECK_ST(cf_add(f, k, len), CF_OK))
            break;
        added++;
    }
    cf_stats s = cft_stats(f);
    CHECK_EQ_U(s.items, added);
    double load = s.load_factor;
    double expected = 1.0 - pow(1.0 - 1.0 / (ldexp(1.0, (int)fb) - 1.0), 2.0 * b * load);

    uint64_t queries = cft_scaled(2000000);
    double for_count = ceil(2500.0 / expected);
    if ((double)queries < for_count)
        queries = (uint64_t)for_count;

    /* Half the queries through cf_contains, half through cf_contains_many (same answers
     * are required by test_api; here both feed the count). */
    uint64_t fp = 0;
    enum { B = 1024 };
    uint64_t hs[B];
    bool out[B];
    for (uint64_t q = 0; q < queries;) {
        if ((q / B) % 2 == 0) {
            uint64_t end = q + B < queries ? q + B : queries;
            for (; q < end; q++) {
                size_t len = cft_key(k, out_stream, q);
                fp += cf_contains(f, k, len);
            }
        } else {
            size_t nb = queries - q < B ? (size_t)(queries - q) : B;
            for (size_t j = 0; j < nb; j++) {
                size_t len = cft_key(k, out_stream, q + j);
                hs[j] = cf_hash(f, k, len);
            }
            cf_contains_many(f, hs, nb, out);
            for (size_t j = 0; j < nb; j++)
                fp += out[j];
            q += nb;
        }
    }
    double measured = (double)fp / (double)queries;
    double sigma = sqrt(expected * (1.0 - expected) / (double)queries);
    printf("  b %u f %2u%s: load %.4f, %llu queries, %llu false positives: measured %.6g, "
           "formula %.6g (%+.2f %%, %.1f sigma), stats.fpr %.6g (%+.2f %% of measured)\n",
           b, fb, semi ? " semi-sorted" : "", load, (unsigned long long)queries,
           (unsigned long long)fp, measured, expected, (measured / expected - 1.0) * 100.0,
           (measured - expected) / sigma, s.fpr,
           measured > 0.0 ? (s.fpr / measured - 1.0) * 100.0 : 0.0);
    fflush(stdout);
    CHECK(load > 0.5 && load <= 1.0);
    CHECK_MSG(fabs(measured - expected) <= 0.10 * expected,
              "measured rate %.6g, formula %.6g: off by more than 10 %%", measured, expected);
    CHECK_MSG(fabs(s.fpr - measured) <= 0.10 * measured,
              "stats.fpr %.6g, measured %.6g: off by more than 10 %%", s.fpr, measured);
    if (semi) { /* capacity (f - 1) / (8 * 0.95) bytes, to 0.1 % */
        double want = (double)cap * (fb - 1) / (8.0 * 0.95);
        printf("  b %u f %2u semi-sorted: %llu table bytes, capacity (f - 1) / (8 * 0.95) = %.0f "
               "(%+.4f %%)\n",
               b, fb, (unsigned long long)s.bytes, want, ((double)s.bytes / want - 1.0) * 100.0);
        CHECK_MSG(fabs((double)s.bytes - want) <= 0.001 * want, "%llu bytes, want %.0f",
                  (unsigned long long)s.bytes, want);
    }
    cf_free(f);
}

/* A growing filter filled to `growth` times its first capacity, with widening (the
 * default) or CF_GROW_SAME_WIDTH. Every key added must be found; the measured rate must be
 * within 10 % of stats.fpr (which sums the sub-filters' rates width by width), and with
 * widening, within stats.fpr_bound, which must be at most twice the first sub-filter's
 * rate at full load (the default bound). Without widening the rate must exceed that: it
 * is what widening is for. */
static void measure_growth(unsigned fb, uint64_t cap, uint64_t growth, bool same_width,
                           uint64_t tag)
{
    uint64_t seed = cft_subseed(tag);
    cft_context("growing fpr f %u capacity %llu x %llu%s, filter seed 0x%016llx (tag %llu)", fb,
                (unsigned long long)cap, (unsigned long long)growth,
                same_width ? ", same width" : "", (unsigned long long)seed,
                (unsigned long long)tag);
    cf_config c = {.capacity = cap,
                   .fingerprint_bits = fb,
                   .expansion = 2,
                   .seed = seed,
                   .flags = same_width ? CF_GROW_SAME_WIDTH : 0u};
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    uint8_t k[CFT_KEY_MAX];
    const uint64_t in_stream = tag * 2, out_stream = tag * 2 + 1, n = cap * growth;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = cft_key(k, in_stream, i);
        if (!CHECK_ST(cf_add(f, k, len), CF_OK))
            break;
    }
    uint64_t missed = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = cft_key(k, in_stream, i);
        missed += !cf_contains(f, k, len);
    }
    CHECK_MSG(missed == 0, "%llu keys added and not found", (unsigned long long)missed);
    cf_stats s = cft_stats(f);
    double first = cf_expected_fpr(fb, 4, 1.0);
    uint64_t queries = cft_scaled(2000000);
    if ((double)queries < ceil(2500.0 / s.fpr))
        queries = (uint64_t)ceil(2500.0 / s.fpr);
    uint64_t hits = 0;
    for (uint64_t q = 0; q < queries; q++) {
        size_t len = cft_key(k, out_stream, q);
        hits += cf_contains(f, k, len);
    }
    double measured = (double)hits / (double)queries;
    double sigma = sqrt(s.fpr * (1.0 - s.fpr) / (double)queries);
    printf("  f %u, capacity %llu grown %llux%s: %u sub-filters (f %u..%u), %.2f bits per key; "
           "%llu queries: measured %.6g, stats.fpr %.6g (%+.2f %%), bound %.6g, first "
           "sub-filter full %.6g\n",
           fb, (unsigned long long)cap, (unsigned long long)growth,
           same_width ? ", same width" : "", s.sub_filters, s.fingerprint_bits,
           s.newest_fingerprint_bits, 8.0 * (double)s.bytes / (double)n,
           (unsigned long long)queries, measured, s.fpr, (measured / s.fpr - 1.0) * 100.0,
           s.fpr_bound, first);
    fflush(stdout);
    CHECK_MSG(fabs(s.fpr - measured) <= 0.10 * measured,
              "stats.fpr %.6g, measured %.6g: off by more than 10 %%", s.fpr, measured);
    if (same_width) {
        CHECK_EQ_U(s.newest_fingerprint_bits, fb);
        CHECK_MSG(measured > 2.0 * first, "same width: measured %.6g, not above %.6g", measured,
                  2.0 * first);
    } else {
        CHECK(s.newest_fingerprint_bits > fb);
        CHECK_MSG(s.fpr_bound <= 2.0 * first, "bound %.6g above twice %.6g", s.fpr_bound, first);
        CHECK(s.fpr <= s.fpr_bound);
        CHECK_MSG(measured <= s.fpr_bound + 5.0 * sigma, "measured %.6g above the bound %.6g",
                  measured, s.fpr_bound);
    }
    cf_free(f);
}

int main(void)
{
    cft_init("test_fpr");
    const uint64_t cap = cft_scaled_min(1000000, 10000);
    measure(4, 8, 0, cap, 1);
    measure(4, 12, 0, cap, 2);
    measure(4, 16, 0, cap, 3);
    measure(2, 12, 0, cap, 4);
    measure(8, 12, 0, cap, 5);
    measure(4, 13, CF_SEMI_SORT, cap, 9); /* in the memory of 12 bits */
    measure(4, 9, CF_SEMI_SORT, cap, 10);
    measure(4, 16, CF_SEMI_SORT, cap, 11); /* widths read at run time */
    /* Grown 1000 times: 10 sub-filters of doubling size. */
    const uint64_t first = cft_scaled_min(1000, 100);
    measure_growth(12, first, 1000, false, 6);
    measure_growth(8, first, 1000, false, 7);
    measure_growth(12, first, 1000, true, 8);
    return cft_finish();
}
