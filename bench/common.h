/*
 * common.h - what the benchmark programs share: a clock, a key generator, and the
 * machine's own limit for a cuckoo lookup (two random reads), measured in the same run
 * so that every figure can be read as a ratio on a noisy machine.
 */
#ifndef CF_BENCH_COMMON_H
#define CF_BENCH_COMMON_H

#include <cuckoofilter.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* splitmix64: a fast, well-mixed sequence; keys are the 8 bytes of successive values. */
static inline uint64_t bench_next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline void *bench_xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "bench: out of memory allocating %zu bytes\n", n);
        exit(2);
    }
    return p;
}

static inline void bench_check(cf_status st, const char *what)
{
    if (st != CF_OK) {
        fprintf(stderr, "bench: %s: %s\n", what, cf_strerror(st));
        exit(2);
    }
}

/* The memory system's limit for n lookups in a table of `bytes` bytes: for each of n
 * keys, two reads of 8 bytes at positions drawn from the key's hash, in a plain loop (no
 * prefetch), the sum kept so the loads are not optimised away. Returns ns per key. */
static inline double bench_two_reads_ns(size_t bytes, uint64_t n, uint64_t seed)
{
    size_t words = bytes / 8 > 0 ? bytes / 8 : 1;
    uint64_t *a = bench_xmalloc(words * 8);
    for (size_t i = 0; i < words; i++)
        a[i] = i;
    volatile uint64_t sink;
    uint64_t sum = 0, st = seed;
    double t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t h = bench_next(&st);
        /* Multiply-shift range reduction: the cheapest mapping of a hash onto the array. */
        size_t p1 = (size_t)(((h & 0xffffffffu) * (uint64_t)words) >> 32);
        size_t p2 = (size_t)(((h >> 32) * (uint64_t)words) >> 32);
        sum += a[p1] + a[p2];
    }
    double t1 = bench_now();
    sink = sum;
    (void)sink;
    free(a);
    return (t1 - t0) * 1e9 / (double)n;
}

/* The false-positive rate a filter of f-bit fingerprints and b-slot buckets should show
 * at a load: 1 - (1 - 1/(2^f - 1))^(2 b load). */
static inline double bench_fpr_bound(unsigned fbits, unsigned b, double load)
{
    return 1.0 - pow(1.0 - 1.0 / (ldexp(1.0, (int)fbits) - 1.0), 2.0 * b * load);
}

/* One speed run: n random 8-byte keys from `seed` added to an empty f (cf_add), looked up
 * again (cf_contains), then n absent keys from another stream looked up, and the two-reads
 * limit for an array of f's size. Times are ns per key. */
typedef struct bench_speed {
    double insert_ns, hit_ns, miss_ns, limit_ns;
    uint64_t missed;    /* present keys not found: a false negative, must be 0 */
    uint64_t positives; /* absent keys found: false positives */
} bench_speed;

static inline bench_speed bench_measure(cf_filter *f, uint64_t n, uint64_t seed)
{
    bench_speed r = {0};
    uint64_t st = seed, key;
    double t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        key = bench_next(&st);
        bench_check(cf_add(f, &key, sizeof key), "cf_add");
    }
    r.insert_ns = (bench_now() - t0) * 1e9 / (double)n;
    st = seed;
    t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        key = bench_next(&st);
        r.missed += !cf_contains(f, &key, sizeof key);
    }
    r.hit_ns = (bench_now() - t0) * 1e9 / (double)n;
    /* A 64-bit collision with a present key has probability ~n^2 / 2^64: negligible. */
    st = ~seed;
    t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        key = bench_next(&st);
        r.positives += cf_contains(f, &key, sizeof key);
    }
    r.miss_ns = (bench_now() - t0) * 1e9 / (double)n;
    cf_stats s;
    cf_get_stats(f, &s);
    r.limit_ns = bench_two_reads_ns((size_t)s.bytes, n, seed);
    return r;
}

#endif /* CF_BENCH_COMMON_H */
