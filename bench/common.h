/*
 * common.h - what the benchmark programs share: a clock, a key generator, and the
 * machine's own limit for a cuckoo lookup (two random reads), measured in the same run
 * so that every figure can be read as a ratio on a noisy machine.
 */
#ifndef CF_BENCH_COMMON_H
#define CF_BENCH_COMMON_H

#include <cuckoofilter.h>

#include <inttypes.h>
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

#endif /* CF_BENCH_COMMON_H */
