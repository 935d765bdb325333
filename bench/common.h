/*
 * common.h - what the benchmark programs share: a clock, key generators, and the
 * machine's own limit for a cuckoo lookup (two random reads), measured in the same run
 * so that every figure can be read as a ratio on a noisy machine; and the small pieces of
 * a report (numbers with separators, the CPU's name, the compiler, counts with k/M/G).
 * Everything is static inline, so that a program that uses only part of it compiles
 * without warnings, and it needs nothing but the C library and cuckoofilter.h.
 */
#ifndef CF_BENCH_COMMON_H
#define CF_BENCH_COMMON_H

#include <cuckoofilter.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
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

/* --seed's default in every benchmark that takes one: one seed for all of them. */
#define BENCH_DEFAULT_SEED UINT64_C(20261121)

#define BENCH_GOLDEN UINT64_C(0x9e3779b97f4a7c15) /* 2^64 / golden ratio: splitmix64's step */

/* The splitmix64 finalizer: a bijection of 64-bit values, so distinct inputs give
 * distinct keys. */
static inline uint64_t bench_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* splitmix64: a fast, well-mixed sequence; keys are the 8 bytes of successive values.
 * From state s it returns bench_gen(s, 1), bench_gen(s, 2), ... */
static inline uint64_t bench_next(uint64_t *state)
{
    return bench_mix64(*state += BENCH_GOLDEN);
}

/* Key i of stream `seed`: counter-based, so that any key can be drawn again at random,
 * and distinct i give distinct values (BENCH_GOLDEN is odd, bench_mix64 a bijection). Two
 * streams meet only if their seeds differ by (i - j) * BENCH_GOLDEN for a small i - j,
 * which for random seeds has probability ~1e-11. */
static inline uint64_t bench_gen(uint64_t seed, uint64_t i)
{
    return bench_mix64(seed + i * BENCH_GOLDEN);
}

/* qsort's order of doubles. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n timings (n odd), sorting them; the one timing when n is 1. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], bench_cmp_double);
    return v[n / 2];
}

/* Multiply-shift range reduction of a 32-bit value onto [0, range), range <= 2^32. */
static inline uint64_t bench_reduce32(uint64_t x32, uint64_t range)
{
    return (x32 * range) >> 32;
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

/* A fixed-size filter of `capacity` keys, f-bit fingerprints and b-slot buckets (flags:
 * 0 or CF_SEMI_SORT) with a fixed seed, so that every run builds the same one; exits if
 * cf_new refuses. */
static inline cf_filter *bench_filter(uint64_t capacity, unsigned fbits, unsigned b, unsigned flags,
                                      uint64_t seed)
{
    cf_config cfg = {.capacity = capacity,
                     .fingerprint_bits = fbits,
                     .bucket_size = b,
                     .seed = seed,
                     .flags = CF_FIXED_SEED | flags};
    cf_filter *f;
    bench_check(cf_new(&cfg, &f), "cf_new");
    return f;
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

/* ------------------------------------------------------------------------------------ */
/* Reports                                                                              */
/* ------------------------------------------------------------------------------------ */

/* n with thousands separators, into buf. */
static inline const char *bench_grouped(uint64_t n, char *buf, size_t cap)
{
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%" PRIu64, n);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < cap; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

/* The first line of `path` that starts with `key`, the rest after its ':' (trimmed) into
 * out; or the whole first line when key is NULL. false if not found. For files such as
 * /proc/cpuinfo ("model name"), /proc/self/smaps_rollup, or a /sys file of one line. */
static inline bool bench_read_field(const char *path, const char *key, char *out, size_t cap)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, fp)) {
        char *v = line;
        if (key) {
            if (strncmp(line, key, strlen(key)) != 0 || !(v = strchr(line, ':')))
                continue;
            v++;
        }
        while (*v == ' ' || *v == '\t')
            v++;
        size_t len = strcspn(v, "\n");
        len = len < cap - 1 ? len : cap - 1;
        memcpy(out, v, len);
        out[len] = '\0';
        found = true;
    }
    fclose(fp);
    return found;
}

/* The compiler that built the program, as a report's header names it. */
static inline const char *bench_compiler(void)
{
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#else
    return "unknown";
#endif
}

/* A count with an optional k/M/G suffix (10M = 10000000); 0 on a malformed one or one
 * that does not fit in 64 bits. *end is set to what follows it (to s if malformed), for
 * the caller to accept a list separator or nothing. */
static inline uint64_t bench_parse_count(const char *s, const char **end)
{
    char *e;
    *end = s;
    errno = 0;
    unsigned long long v = strtoull(s, &e, 10);
    if (e == s || errno || *s == '-')
        return 0;
    uint64_t mult = 1;
    if (*e == 'k' || *e == 'K')
        mult = 1000;
    else if (*e == 'M' || *e == 'm')
        mult = 1000000;
    else if (*e == 'G' || *e == 'g')
        mult = 1000000000;
    if (mult > 1)
        e++;
    if (v > UINT64_MAX / mult)
        return 0;
    *end = e;
    return (uint64_t)v * mult;
}

/* The first lines of a benchmark's report: its title, the command that ran it and the date
 * (UTC), so that a pasted report says how to reproduce it. */
static inline void bench_print_start(const char *title, int argc, char **argv)
{
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("# %s\n\n- command:", title);
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n- date: %s\n", date);
}

/* A --seed value: any unsigned 64-bit number, decimal or 0x-hex. false if malformed. */
static inline bool bench_parse_seed(const char *s, uint64_t *out)
{
    char *e;
    errno = 0;
    *out = strtoull(s, &e, 0);
    return !errno && !*e && e != s;
}

#endif /* CF_BENCH_COMMON_H */
