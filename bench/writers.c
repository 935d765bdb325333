/*
 * writers.c - several threads filling one CF_CONCURRENT filter (`make bench` builds it as
 * build/cf-bench-writers).
 *
 * For each size: N pre-hashed keys into a fixed filter of capacity N (12-bit fingerprints,
 * b = 4, which the library sizes for 95 % of its slots: inserts evict more and more as it
 * fills), with cf_add_many in batches of BATCH, ROUNDS times in turn (the median printed):
 *   - plain, 1 thread: the filter without the flag (the baseline);
 *   - concurrent, T threads for T = 1 .. --threads, each taking the next BATCH keys from
 *     a shared cursor (an atomic add) until none are left: keys per second, and T threads
 *     over one (the goal on 2 cores: 2 threads >= 1.6 x one). This is how a program
 *     should feed writers: a thread that runs slower for a while (on this VM, one of two
 *     often does, for most of a run) takes fewer batches, and no thread finishes alone;
 *   - slices, T threads: each thread a fixed slice of N / T keys, as a program that splits
 *     its input beforehand does: the slower thread then finishes alone, putting the last,
 *     most crowded keys in with one core;
 *   - apart, T threads: each thread its slice into a filter of its own (capacity N / T),
 *     nothing shared: what the machine allows T busy threads (caches, memory, and on a VM
 *     perhaps fewer physical cores).
 * Wall-clock time (the threads' work together), every key checked present at the end and
 * the count checked exact.
 *
 * Usage: cf-bench-writers [--keys N[,N...]] [--threads T] [--seed S] [--max-kicks K]
 *                         [--room R]
 * (K: the filters' eviction budget, default the library's; R: each filter's capacity in
 * multiples of its keys, default 1: with 2 the keys fill half of it, and few inserts
 * evict)
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, in common.h */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define DEFAULT_KEYS "1000000,20000000" /* in cache, and far out of it */
#define ROUNDS       3
#define MAX_KEYS     8
#define MAX_THREADS  8
#define BATCH        256u /* keys per cf_add_many call */

/* How the keys are split among the threads (see the top of the file). */
enum split { CURSOR, SLICES, APART };

typedef struct share {
    cf_filter *f;
    const uint64_t *h; /* the thread's slice, or (CURSOR) every key */
    size_t n;
    atomic_size_t *next; /* CURSOR: the first key no thread has taken; else NULL */
    size_t added;
} share;

static void *fill_share(void *p)
{
    share *s = p;
    for (size_t i = 0;; i += BATCH) {
        if (s->next)
            i = atomic_fetch_add_explicit(s->next, BATCH, memory_order_relaxed);
        if (i >= s->n)
            return NULL;
        size_t m = s->n - i < BATCH ? s->n - i : BATCH;
        s->added += cf_add_many(s->f, s->h + i, m, 0, NULL);
    }
}

/* The filters' settings (see the usage above). */
typedef struct opts {
    unsigned kicks; /* eviction budget (0: the library's default) */
    double room;    /* capacity over keys */
} opts;

/* A fixed 12/4 filter for `keys` keys. */
static cf_filter *make(size_t keys, unsigned flags, const opts *o)
{
    cf_config c = {.capacity = (uint64_t)((double)keys * o->room),
                   .fingerprint_bits = 12,
                   .bucket_size = 4,
                   .max_kicks = o->kicks,
                   .flags = flags};
    cf_filter *f = NULL;
    if (cf_new(&c, &f) != CF_OK) {
        fprintf(stderr, "cf-bench-writers: cf_new failed\n");
        exit(2);
    }
    return f;
}

/* Every one of the n keys found in its filter (its slice's, apart) and added once, the
 * count right; the filters freed. */
static void check(share *s, unsigned threads, enum split how, size_t n)
{
    size_t added = 0, missing = 0;
    for (unsigned i = 0; i < threads; i++) {
        added += s[i].added;
        if (how == CURSOR && i > 0)
            continue; /* one filter, one array: checked once */
        bool *out = bench_xmalloc(s[i].n * sizeof *out);
        cf_contains_many(s[i].f, s[i].h, s[i].n, out);
        for (size_t j = 0; j < s[i].n; j++)
            missing += !out[j];
        free(out);
    }
    if (missing || added != n) {
        fprintf(stderr, "cf-bench-writers: %zu of %zu keys added, %zu missing\n", added, n,
                missing);
        exit(1);
    }
    cf_stats st;
    cf_get_stats(s[0].f, &st);
    if (how != APART && st.items != n) {
        fprintf(stderr, "cf-bench-writers: %llu items, not %zu\n", (unsigned long long)st.items, n);
        exit(1);
    }
    for (unsigned i = 0; i < (how == APART ? threads : 1u); i++)
        cf_free(s[i].f);
}

/* Seconds to add h[0, n) from `threads` threads to a new filter with `flags`, the keys
 * split among them as `how` says. */
static double fill(const uint64_t *h, size_t n, unsigned flags, const opts *o, unsigned threads,
                   enum split how)
{
    share s[MAX_THREADS];
    pthread_t t[MAX_THREADS];
    size_t per = n / threads;
    atomic_size_t next;
    atomic_init(&next, 0);
    cf_filter *shared = how == APART ? NULL : make(n, flags, o);
    for (unsigned i = 0; i < threads; i++) {
        size_t m = i + 1 == threads ? n - i * per : per;
        if (how == CURSOR)
            s[i] = (share){shared, h, n, &next, 0};
        else
            s[i] = (share){how == APART ? make(m, flags, o) : shared, h + i * per, m, NULL, 0};
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
    check(s, threads, how, n);
    return secs;
}

int main(int argc, char **argv)
{
    const char *keys_arg = DEFAULT_KEYS;
    unsigned threads = 2;
    opts o = {.kicks = 0, .room = 1.0};
    uint64_t seed = BENCH_DEFAULT_SEED;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keys") && i + 1 < argc)
            keys_arg = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--max-kicks") && i + 1 < argc)
            o.kicks = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--room") && i + 1 < argc)
            o.room = strtod(argv[++i], NULL);
        else {
            fprintf(stderr, "usage: cf-bench-writers [--keys N[,N...]] [--threads T] [--seed S] "
                            "[--max-kicks K] [--room R]\n");
            return 2;
        }
    }
    if (!(o.room >= 1.0 && o.room <= 64.0)) {
        fprintf(stderr, "cf-bench-writers: --room must be 1 to 64\n");
        return 2;
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
    printf("keys per second filling a fixed 12/4 filter of %.3g times their count, to %.1f %% "
           "of its slots (cf_add_many, %u a call; median of %d; build %s, %s)\n",
           o.room, 95.0 / o.room, BATCH, ROUNDS, CF_BENCH_BUILD_TYPE, CF_BENCH_BUILD_FLAGS);
    for (size_t k = 0; k < nsizes; k++) {
        size_t n = sizes[k];
        uint64_t *h = bench_xmalloc(n * sizeof *h);
        for (size_t i = 0; i < n; i++)
            h[i] = bench_gen(seed, i);
        double plain[ROUNDS], cc[MAX_THREADS][ROUNDS], slices[MAX_THREADS][ROUNDS],
            apart[MAX_THREADS][ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            plain[r] = fill(h, n, 0, &o, 1, SLICES);
            for (unsigned t = 1; t <= threads; t++) {
                cc[t - 1][r] = fill(h, n, CF_CONCURRENT, &o, t, CURSOR);
                if (t > 1) /* (one thread's slice is every key: the cursor's run) */
                    slices[t - 1][r] = fill(h, n, CF_CONCURRENT, &o, t, SLICES);
                apart[t - 1][r] = fill(h, n, CF_CONCURRENT, &o, t, APART);
            }
        }
        double base = bench_median(plain, ROUNDS), one = bench_median(cc[0], ROUNDS);
        printf("%zu keys\n  plain, 1 thread          %8.2f M/s\n", n, (double)n / base / 1e6);
        for (unsigned t = 1; t <= threads; t++) {
            double secs = bench_median(cc[t - 1], ROUNDS);
            double alone = bench_median(apart[t - 1], ROUNDS);
            printf("  concurrent, %u thread%s   %8.2f M/s  (%.2f x plain, %.2f x 1 thread", t,
                   t == 1 ? " " : "s", (double)n / secs / 1e6, base / secs, one / secs);
            if (t > 1) {
                double sl = bench_median(slices[t - 1], ROUNDS);
                printf("; in fixed slices %.2f M/s, %.2f x", (double)n / sl / 1e6, one / sl);
            }
            printf("; apart %.2f M/s)\n", (double)n / alone / 1e6);
        }
        free(h);
    }
    return 0;
}
