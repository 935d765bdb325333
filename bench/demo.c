/*
 * demo.c - what `make demo` runs: build a filter of 10 million random keys and show what
 * it costs and how well it answers.
 */
#define _POSIX_C_SOURCE 199309L
#include "common.h"

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
    cf_config cfg = {.capacity = n, .seed = DEMO_SEED, .flags = CF_FIXED_SEED};
    cf_filter *f;
    bench_check(cf_new(&cfg, &f), "cf_new");
    printf("cuckoofilter %s: %" PRIu64 " random 8-byte keys, capacity %" PRIu64
           ", defaults (12-bit fingerprints, 4-slot buckets)\n\n",
           cf_version(), n, n);

    bench_speed r = bench_measure(f, n, DEMO_SEED);
    cf_stats s;
    cf_get_stats(f, &s);
    double bound = bench_fpr_bound(s.fingerprint_bits, s.bucket_size, s.load_factor);
    double fpr = (double)r.positives / (double)n;

    printf("  load factor         %.4f  (%" PRIu64 " items in %" PRIu64 " slots)\n", s.load_factor,
           s.items, s.slots);
    printf("  memory              %.2f MB, %.2f bits per key\n", (double)s.bytes / 1e6,
           (double)s.bytes * 8.0 / (double)s.items);
    printf("  false negatives     %" PRIu64 "  (must be 0)\n", r.missed);
    printf("  false positives     %.5f%% measured over %" PRIu64 " absent keys\n", fpr * 100.0, n);
    printf("                      %.5f%% bound 1-(1-1/(2^f-1))^(2b*load)\n", bound * 100.0);
    printf("\n  %-30s %8s %14s\n", "operation", "ns/key", "x memory limit");
    printf("  %-30s %8.1f %14.2f\n", "insert (cf_add)", r.insert_ns, r.insert_ns / r.limit_ns);
    printf("  %-30s %8.1f %14.2f\n", "lookup, present keys", r.hit_ns, r.hit_ns / r.limit_ns);
    printf("  %-30s %8.1f %14.2f\n", "lookup, absent keys", r.miss_ns, r.miss_ns / r.limit_ns);
    printf("  %-30s %8.1f %14.2f\n", "limit: 2 random 8-byte reads", r.limit_ns, 1.0);
    printf("\n(the limit is a plain loop of two random reads per key over an array as big as "
           "the filter,\n measured in this run: the cost of a lookup's two bucket reads "
           "with nothing else)\n");
    cf_free(f);
    return r.missed == 0 ? 0 : 1;
}
