/*
 * demo.c - what `make demo` runs: build a filter of 10 million random keys and show what
 * it costs and how well it answers.
 */
#define _POSIX_C_SOURCE 199309L
#include "common.h"

#include <math.h>

/* Enough keys that the table (~16 MB) is out of the L2 cache, small enough for a demo. */
#define DEMO_KEYS UINT64_C(10000000)
#define DEMO_SEED UINT64_C(20261121)

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : DEMO_KEYS;
    if (n == 0) {
        fprintf(stderr, "usage: cf-demo [KEYS]\n");
        return 1;
    }
    cf_config cfg = {.capacity = n, .seed = DEMO_SEED};
    cf_filter *f;
    bench_check(cf_new(&cfg, &f), "cf_new");
    printf("cuckoofilter %s: %" PRIu64 " random 8-byte keys, capacity %" PRIu64
           ", defaults (12-bit fingerprints, 4-slot buckets)\n\n",
           cf_version(), n, n);

    uint64_t st = DEMO_SEED, key;
    double t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        key = bench_next(&st);
        bench_check(cf_add(f, &key, sizeof key), "cf_add");
    }
    double t_insert = bench_now() - t0;

    st = DEMO_SEED;
    uint64_t missed = 0;
    t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        key = bench_next(&st);
        missed += !cf_contains(f, &key, sizeof key);
    }
    double t_hit = bench_now() - t0;

    /* Absent keys: a different stream (a 64-bit collision with a present key is ~1e-5). */
    uint64_t st2 = ~DEMO_SEED, positives = 0;
    t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        key = bench_next(&st2);
        positives += cf_contains(f, &key, sizeof key);
    }
    double t_miss = bench_now() - t0;

    cf_stats s;
    cf_get_stats(f, &s);
    double limit = bench_two_reads_ns((size_t)s.bytes, n, DEMO_SEED);
    double bound = 1.0 - pow(1.0 - 1.0 / (ldexp(1.0, (int)s.fingerprint_bits) - 1.0),
                             2.0 * s.bucket_size * s.load_factor);
    double fpr = (double)positives / (double)n;

    printf("  load factor         %.4f  (%" PRIu64 " items in %" PRIu64 " slots)\n", s.load_factor,
           s.items, s.slots);
    printf("  memory              %.2f MB, %.2f bits per key\n", (double)s.bytes / 1e6,
           (double)s.bytes * 8.0 / (double)s.items);
    printf("  false negatives     %" PRIu64 "  (must be 0)\n", missed);
    printf("  false positives     %.5f%% measured over %" PRIu64 " absent keys\n", fpr * 100.0, n);
    printf("                      %.5f%% bound 1-(1-1/(2^f-1))^(2b*load)\n", bound * 100.0);
    printf("\n  %-30s %8s %14s\n", "operation", "ns/key", "x memory limit");
    printf("  %-30s %8.1f %14.2f\n", "insert (cf_add)", t_insert * 1e9 / (double)n,
           t_insert * 1e9 / (double)n / limit);
    printf("  %-30s %8.1f %14.2f\n", "lookup, present keys", t_hit * 1e9 / (double)n,
           t_hit * 1e9 / (double)n / limit);
    printf("  %-30s %8.1f %14.2f\n", "lookup, absent keys", t_miss * 1e9 / (double)n,
           t_miss * 1e9 / (double)n / limit);
    printf("  %-30s %8.1f %14.2f\n", "limit: 2 random 8-byte reads", limit, 1.0);
    printf("\n(the limit is a plain loop of two random reads per key over an array as big as "
           "the filter,\n measured in this run: the cost of a lookup's two bucket reads "
           "with nothing else)\n");
    cf_free(f);
    return missed == 0 ? 0 : 1;
}
