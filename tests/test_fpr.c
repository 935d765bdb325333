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
 */
#include "testutil.h"

static void measure(unsigned b, unsigned fb, uint64_t cap, uint64_t tag)
{
    uint64_t seed = cft_subseed(tag);
    cft_context("fpr b %u f %u capacity %llu filter seed 0x%016llx (tag %llu)", b, fb,
                (unsigned long long)cap, (unsigned long long)seed, (unsigned long long)tag);
    cf_config c = {.capacity = cap, .bucket_size = b, .fingerprint_bits = fb, .seed = seed};
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
    printf("  b %u f %2u: load %.4f, %llu queries, %llu false positives: measured %.6g, "
           "formula %.6g (%+.2f %%, %.1f sigma), stats.fpr %.6g (%+.2f %% of measured)\n",
           b, fb, load, (unsigned long long)queries, (unsigned long long)fp, measured, expected,
           (measured / expected - 1.0) * 100.0, (measured - expected) / sigma, s.fpr,
           measured > 0.0 ? (s.fpr / measured - 1.0) * 100.0 : 0.0);
    fflush(stdout);
    CHECK(load > 0.5 && load <= 1.0);
    CHECK_MSG(fabs(measured - expected) <= 0.10 * expected,
              "measured rate %.6g, formula %.6g: off by more than 10 %%", measured, expected);
    CHECK_MSG(fabs(s.fpr - measured) <= 0.10 * measured,
              "stats.fpr %.6g, measured %.6g: off by more than 10 %%", s.fpr, measured);
    cf_free(f);
}

int main(void)
{
    cft_init("test_fpr");
    const uint64_t cap = cft_scaled_min(1000000, 10000);
    measure(4, 8, cap, 1);
    measure(4, 12, cap, 2);
    measure(4, 16, cap, 3);
    measure(2, 12, cap, 4);
    measure(8, 12, cap, 5);
    return cft_finish();
}
