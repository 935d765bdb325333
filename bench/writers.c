/*
 * writers.c - several threads filling one CF_CONCURRENT filter (`make bench` builds it as
 * build/cf-bench-writers).
 *
 * For each size: N pre-hashed keys into a fixed filter of capacity N (12-bit fingerprints,
 * b = 4, which the library sizes for 95 % of its slots: inserts evict more and more as it
 * fills), with cf_add_many in batches of BATCH, each thread its own share of the keys,
 * ROUNDS times in turn (the median printed):
 *   - plain, 1 thread: the filter without the flag (the baseline);
 *   - concurrent, T threads for T = 1 .. --threads: keys per second, and T threads over
 *     one (the goal on 2 cores: 2 threads >= 1.6 x one);
 *   - apart, T threads: each thread its share into a filter of its own (capacity N / T),
 *     nothing shared: what the machine allows T busy threads (caches, memory, and on a VM
 *     perhaps fewer physical cores).
 * Wall-clock time (the threads' work together), every key checked present at the end.
 *
 * Usage: cf-bench-writers [--keys N[,N...]] [--threads T] [--seed S]
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, in common.h */
#include "common.h"

#include <pthread.h>
#include <string.h>

#define DEFAULT_KEYS "1000000,20000000" /* in cache, and far out of it */
#define ROUNDS       3
#define MAX_KEYS     8
#define MAX_THREADS  8
#define BATCH        256u /* keys per cf_add_many call */

typedef struct share {
    cf_filter *f;
    const uint64_t *h;
    size_t n;
    size_t added;
} share;

static void *fill_share(void *p)
{
    share *s = p;
    for (size_t i = 0; i < s->n; i += BATCH) {
        size_t m = s->n - i < BATCH ? s->n - i : BATCH;
        s->added += cf_add_many(s->f, s->h + i, m, 0, NULL);
    }
    return NULL;
}

static cf_filter *make(size_t capacity, unsigned flags)
{
    cf_config c = {.capacity = capacity, .fingerprint_bits = 12, .bucket_size = 4, .flags = flags};
    cf_filter *f = NULL;
    if (cf_new(&c, &f) != CF_OK) {
        fprintf(stderr, "cf-bench-writers: cf_new failed\n");
        exit(2);
    }
    return f;
}

/* Every key of each share found, the counts right; the filters freed. */
static void check(share *s, unsigned threads, bool apart)
{
    for (unsigned i = 0; i < threads; i++) {
        bool *out = bench_xmalloc(s[i].n * sizeof *out);
        cf_contains_many(s[i].f, s[i].h, s[i].n, out);
        size_t missing = 0;
        for (size_t j = 0; j < s[i].n; j++)
            missing += !out[j];
        free(out);
        if (missing || s[i].added != s[i].n) {
            fprintf(stderr, "cf-bench-writers: %zu of %zu keys added, %zu missing\n", s[i].added,
                    s[i].n, missing);
            exit(1);
        }
    }
    size_t n = 0;
    for (unsigned i = 0; i < threads; i++)
        n += s[i].n;
    cf_stats st;
    cf_get_stats(s[0].f, &st);
    if (!apart && st.items != n) {
        fprintf(stderr, "cf-bench-writers: %llu items, not %zu\n", (unsigned long long)st.items, n);
        exit(1);
    }
    for (unsigned i = 0; i < (apart ? threads : 1u); i++)
        cf_free(s[i].f);
}

/* Seconds to add h[0, n) from `threads` threads to a new filter with `flags`, or (apart)
 * each thread its share to a filter of its own. */
static double fill(const uint64_t *h, size_t n, unsigned flags, unsigned threads, bool apart)
{
    share s[MAX_THREADS];
    pthread_t t[MAX_THREADS];
    size_t per = n / threads;
    cf_filter *shared = apart ? NULL : make(n, flags);
    for (unsigned i = 0; i < threads; i++) {
        size_t m = i + 1 == threads ? n - i * per : per;
        s[i] = (share){apart ? make(m, flags) : shared, h + i * per, m, 0};
    }
    double t0 = bench_now();
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&t[i], NULL, fill_share, &s[i]) != 0) {
            fprintf(stderr, "cf-bench-writers: pthread_create failed\n");
            exit(2);
        }
    }
    for (unsigned i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    double secs = bench_now() - t0;
    check(s, threads, apart);
    return secs;
}

int main(int argc, char **argv)
{
    const char *keys_arg = DEFAULT_KEYS;
    unsigned threads = 2;
    uint64_t seed = BENCH_DEFAULT_SEED;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keys") && i + 1 < argc)
            keys_arg = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else {
            fprintf(stderr, "usage: cf-bench-writers [--keys N[,N...]] [--threads T] [--seed S]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "cf-bench-writers: --threads must be 1 to %d\n", MAX_THREADS);
        return 2;
    }
    size_t sizes[MAX_KEYS], nsizes = 0;
    for (const char *p = keys_arg; *p && nsizes < MAX_KEYS;) {
        char *end;
        sizes[nsizes++] = (size_t)strtoull(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p)
            break;
    }
    printf("keys per second filling a fixed 12/4 filter to its capacity, 95 %% of its slots "
           "(cf_add_many, %u a call; median of %d; build %s, %s)\n",
           BATCH, ROUNDS, CF_BENCH_BUILD_TYPE, CF_BENCH_BUILD_FLAGS);
    for (size_t k = 0; k < nsizes; k++) {
        size_t n = sizes[k];
        uint64_t *h = bench_xmalloc(n * sizeof *h);
        for (size_t i = 0; i < n; i++)
            h[i] = bench_gen(seed, i);
        double plain[ROUNDS], cc[MAX_THREADS][ROUNDS], apart[MAX_THREADS][ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            plain[r] = fill(h, n, 0, 1, false);
            for (unsigned t = 1; t <= threads; t++) {
                cc[t - 1][r] = fill(h, n, CF_CONCURRENT, t, false);
                apart[t - 1][r] = fill(h, n, CF_CONCURRENT, t, true);
            }
        }
        double base = bench_median(plain, ROUNDS), one = bench_median(cc[0], ROUNDS);
        printf("%zu keys\n  plain, 1 thread          %8.2f M/s\n", n, (double)n / base / 1e6);
        for (unsigned t = 1; t <= threads; t++) {
            double secs = bench_median(cc[t - 1], ROUNDS);
            double alone = bench_median(apart[t - 1], ROUNDS);
            printf("  concurrent, %u thread%s   %8.2f M/s  (%.2f x plain, %.2f x 1 thread; "
                   "apart %.2f M/s)\n",
                   t, t == 1 ? " " : "s", (double)n / secs / 1e6, base / secs, one / secs,
                   (double)n / alone / 1e6);
        }
        free(h);
    }
    return 0;
}
