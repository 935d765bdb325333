/*
 * concurrent.c - lookups of a CF_CONCURRENT filter beside a busy writer (`make bench`
 * runs it as build/cf-bench-concurrent).
 *
 * For each size: a filter of N keys (12-bit fingerprints or --bits F, b = 4) filled to 90 %,
 * then
 * pre-hashed lookups (half of them present keys) timed in one thread, single
 * (cf_contains_hash) and batched (cf_contains_many, 256 a call), each in five settings,
 * ROUNDS times in turn (the median of each is printed):
 *   - plain: the filter without the flag, nothing else running (the baseline);
 *   - concurrent, alone: the filter with the flag, nothing else running;
 *   - concurrent + writer: the same while another thread adds and deletes keys of its own
 *     as fast as it can (one add, one delete of its oldest key, and again: the load stays
 *     at 90 % and inserts evict);
 *   - plain + writer elsewhere: the plain filter while the writer works on a filter of its
 *     own of the same size: what the machine allows two busy threads (shared caches,
 *     memory, and on a VM perhaps one physical core), with no sharing between them;
 *   - plain behind a lock + writer: what a filter without the flag needs beside a writer, a
 *     copy of the plain filter locked as a whole (a mutex) by the reader for each call and
 *     by the writer for each add and delete;
 *   - with --race, plain + writer of itself, unlocked: the plain filter read while the
 *     writer adds to and deletes from that very filter with no synchronization at all. A
 *     data race, which the library forbids and this setting commits on purpose, for one
 *     figure: what sharing the table's cache lines with a busy writer costs the plain
 *     filter's own lookup, the bound of every design that shares a table with a writer
 *     (its answers are not checked: a fingerprint in flight may be missed). The filters
 *     are fixed (no growth), so the writer changes only bucket bytes and counts.
 * The goal: with a writer, at least 80 % of the plain filter's lookup rate. Instruction
 * counts per lookup with and without the flag: bench/icount.sh 12/4 12/4c.
 *
 * Usage: cf-bench-concurrent [--keys N[,N...]] [--bits F] [--queries Q] [--seed S] [--race]
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, in common.h */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define DEFAULT_KEYS    "1000000,20000000" /* in cache (1.6 MB table), and far out of it */
#define DEFAULT_QUERIES UINT64_C(4000000)  /* per timed run */
#define FILL            0.90               /* load the filters are filled to */
#define ROUNDS          5
#define MAX_KEYS        8
#define BATCH           256u /* keys per cf_contains_many call: cf-bench-speed's batch */

typedef struct writer {
    cf_filter *f;
    pthread_mutex_t *lock; /* taken for each write, or NULL */
    uint64_t stream, ops;
    atomic_bool stop;
} writer;

static void lock(pthread_mutex_t *m)
{
    if (m && pthread_mutex_lock(m) != 0) {
        fprintf(stderr, "cf-bench-concurrent: pthread_mutex_lock failed\n");
        exit(2);
    }
}

static void unlock(pthread_mutex_t *m)
{
    if (m)
        (void)pthread_mutex_unlock(m);
}

/* Keys the writer keeps added at once: it deletes each this many adds later. */
#define BACKLOG 1000u

/* Adds key i and deletes key i - BACKLOG, so that the filter's load stays where it is,
 * and at the end the keys still added: the filter is as it was for the next setting. A
 * key whose add failed (a full filter) is not deleted: its delete could remove another
 * key's fingerprint, a false negative for that key. */
static void writer_delete(writer *w, uint64_t i)
{
    lock(w->lock);
    (void)cf_delete_hash(w->f, bench_gen(w->stream, i));
    unlock(w->lock);
}

static void *writer_main(void *p)
{
    writer *w = p;
    bool added[BACKLOG];
    uint64_t i = 0, ops = 0;
    while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
        if (i >= BACKLOG && added[i % BACKLOG]) {
            writer_delete(w, i - BACKLOG);
            ops++;
        }
        lock(w->lock);
        added[i % BACKLOG] = cf_add_hash(w->f, bench_gen(w->stream, i)) == CF_OK;
        unlock(w->lock);
        ops++;
        i++;
    }
    w->ops = ops;
    for (uint64_t k = i > BACKLOG ? i - BACKLOG : 0; k < i; k++)
        if (added[k % BACKLOG])
            writer_delete(w, k);
    return NULL;
}

/* Query j: a present key (of stream `present`, n of them) for odd j, else an absent one. */
static uint64_t query(uint64_t present, uint64_t n, uint64_t absent, uint64_t j)
{
    uint64_t r = bench_gen(absent, j);
    return j & 1u ? bench_gen(present, bench_reduce32(r >> 32, n)) : r;
}

/* ns per lookup of queries first .. first + q: one cf_contains_hash each, or (batched)
 * cf_contains_many over BATCH at a time, each call under mutex m if not NULL; *misses
 * counts present keys not found (must stay 0). */
static double time_lookups(const cf_filter *f, pthread_mutex_t *m, bool batched, uint64_t present,
                           uint64_t n, uint64_t absent, uint64_t first, uint64_t q,
                           uint64_t *misses)
{
    uint64_t miss = 0, hits = 0;
    double t0 = bench_now();
    if (!batched) {
        for (uint64_t j = first; j < first + q; j++) {
            uint64_t h = query(present, n, absent, j);
            lock(m);
            bool hit = cf_contains_hash(f, h);
            unlock(m);
            miss += (j & 1u) & !hit;
            hits += hit;
        }
    } else {
        uint64_t h[BATCH];
        bool out[BATCH];
        for (uint64_t j = first; j < first + q; j += BATCH) {
            size_t c = first + q - j < BATCH ? (size_t)(first + q - j) : BATCH;
            for (size_t k = 0; k < c; k++)
                h[k] = query(present, n, absent, j + k);
            lock(m);
            cf_contains_many(f, h, c, out);
            unlock(m);
            for (size_t k = 0; k < c; k++) {
                miss += ((j + k) & 1u) & !out[k];
                hits += out[k];
            }
        }
    }
    double t1 = bench_now();
    *misses += miss;
    if (hits > q) /* keeps the loop's result alive */
        printf("impossible\n");
    return (t1 - t0) * 1e9 / (double)q;
}

/* The lookups of time_lookups while a writer thread works on filter w_filter, both under
 * mutex m if not NULL. */
static double time_beside(const cf_filter *f, pthread_mutex_t *m, bool batched, cf_filter *w_filter,
                          uint64_t stream, uint64_t present, uint64_t n, uint64_t absent,
                          uint64_t first, uint64_t q, uint64_t *misses, uint64_t *writes,
                          double *seconds)
{
    writer w = {.f = w_filter, .lock = m, .stream = stream};
    atomic_init(&w.stop, false);
    pthread_t t;
    if (pthread_create(&t, NULL, writer_main, &w) != 0) {
        fprintf(stderr, "cf-bench-concurrent: pthread_create failed\n");
        exit(2);
    }
    double t0 = bench_now();
    double ns = time_lookups(f, m, batched, present, n, absent, first, q, misses);
    atomic_store(&w.stop, true);
    pthread_join(t, NULL);
    *seconds += bench_now() - t0;
    *writes += w.ops;
    return ns;
}

static void run(uint64_t capacity, unsigned fbits, uint64_t queries, uint64_t seed, bool race)
{
    uint64_t present = bench_gen(seed, 1), absent = bench_gen(seed, 2), churn = bench_gen(seed, 3);
    uint64_t n = (uint64_t)((double)capacity * FILL);
    cf_filter *plain = bench_filter(capacity, fbits, 4, 0, seed);
    cf_filter *cc = bench_filter(capacity, fbits, 4, CF_CONCURRENT, seed);
    cf_filter *other = bench_filter(capacity, fbits, 4, 0, seed); /* the writer's own */
    cf_filter *locked = bench_filter(capacity, fbits, 4, 0, seed);
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    for (uint64_t i = 0; i < n; i++) {
        bench_check(cf_add_hash(plain, bench_gen(present, i)), "cf_add_hash");
        bench_check(cf_add_hash(cc, bench_gen(present, i)), "cf_add_hash");
        bench_check(cf_add_hash(locked, bench_gen(present, i)), "cf_add_hash");
        bench_check(cf_add_hash(other, bench_gen(churn, UINT64_C(1) << 40 | i)), "cf_add_hash");
    }
    /* [single, batched] */
    double t_plain[2][ROUNDS], t_alone[2][ROUNDS], t_busy[2][ROUNDS], t_apart[2][ROUNDS],
        t_locked[2][ROUNDS], t_race[2][ROUNDS];
    /* unchecked: the data race's misses, which prove nothing */
    uint64_t misses = 0, unchecked = 0, writes[2] = {0, 0}, writes_apart[2] = {0, 0},
             writes_locked[2] = {0, 0}, writes_race[2] = {0, 0};
    double busy_seconds[2] = {0, 0}, apart_seconds[2] = {0, 0}, locked_seconds[2] = {0, 0},
           race_seconds[2] = {0, 0};
    for (int r = 0; r < ROUNDS; r++)
        for (int b = 0; b < 2; b++) {
            uint64_t first = (uint64_t)r * queries, stream = bench_gen(churn, (uint64_t)r);
            t_plain[b][r] =
                time_lookups(plain, NULL, b, present, n, absent, first, queries, &misses);
            t_alone[b][r] = time_lookups(cc, NULL, b, present, n, absent, first, queries, &misses);
            t_busy[b][r] = time_beside(cc, NULL, b, cc, stream, present, n, absent, first, queries,
                                       &misses, &writes[b], &busy_seconds[b]);
            t_apart[b][r] = time_beside(plain, NULL, b, other, stream, present, n, absent, first,
                                        queries, &misses, &writes_apart[b], &apart_seconds[b]);
            t_locked[b][r] = time_beside(locked, &m, b, locked, stream, present, n, absent, first,
                                         queries, &misses, &writes_locked[b], &locked_seconds[b]);
            if (race)
                t_race[b][r] = time_beside(plain, NULL, b, plain, stream, present, n, absent, first,
                                           queries, &unchecked, &writes_race[b], &race_seconds[b]);
        }
    char nb[32];
    printf("## %s keys (capacity, filled to %.0f %%), %u-bit fingerprints\n\n",
           bench_grouped(capacity, nb, sizeof nb), FILL * 100, fbits);
    double ratio[2], kept[2]; /* vs the plain filter; vs the flagged filter alone */
    for (int b = 0; b < 2; b++) {
        double p = bench_median(t_plain[b], ROUNDS), a = bench_median(t_alone[b], ROUNDS),
               w = bench_median(t_busy[b], ROUNDS), o = bench_median(t_apart[b], ROUNDS),
               l = bench_median(t_locked[b], ROUNDS);
        ratio[b] = p / w;
        kept[b] = a / w;
        if (b)
            printf("| batched lookups (cf_contains_many, %u a call)", BATCH);
        else
            printf("| single lookups (cf_contains_hash)");
        printf(", half present | ns | rate vs plain |\n|---|---:|---:|\n");
        printf("| plain filter, no writer | %.1f | 1.00 |\n", p);
        printf("| CF_CONCURRENT, no writer | %.1f | %.2f |\n", a, p / a);
        printf("| CF_CONCURRENT, beside a writer (%.3g M writes/s) | %.1f | %.2f |\n",
               (double)writes[b] / busy_seconds[b] / 1e6, w, p / w);
        printf("| plain filter, beside a writer on a filter of its own (%.3g M writes/s) | %.1f | "
               "%.2f |\n",
               (double)writes_apart[b] / apart_seconds[b] / 1e6, o, p / o);
        printf("| plain filter behind a mutex, beside a writer that takes it (%.3g M writes/s) | "
               "%.1f | %.2f |\n",
               (double)writes_locked[b] / locked_seconds[b] / 1e6, l, p / l);
        if (race) {
            double x = bench_median(t_race[b], ROUNDS);
            printf("| plain filter, beside a writer of itself, unlocked: a data race, the bound "
                   "(%.3g M writes/s) | %.1f | %.2f |\n",
                   (double)writes_race[b] / race_seconds[b] / 1e6, x, p / x);
        }
        printf("\n");
    }
    printf("Goal: beside a writer, at least 0.80 of the plain rate: single lookups %s (%.2f), "
           "batched %s (%.2f). The writer's own cost: beside it, the concurrent filter keeps "
           "%.2f (single) and %.2f (batched) of its rate alone.\n\n",
           ratio[0] >= 0.80 ? "met" : "not met", ratio[0], ratio[1] >= 0.80 ? "met" : "not met",
           ratio[1], kept[0], kept[1]);
    if (misses) {
        printf("ERROR: %llu present keys not found\n", (unsigned long long)misses);
        exit(1);
    }
    cf_free(plain);
    cf_free(cc);
    cf_free(other);
    cf_free(locked);
}

int main(int argc, char **argv)
{
    const char *keys_arg = DEFAULT_KEYS;
    uint64_t queries = DEFAULT_QUERIES, seed = BENCH_DEFAULT_SEED, fbits = 12;
    bool race = false;
    for (int i = 1; i < argc; i++) {
        const char *e = NULL;
        if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc) {
            keys_arg = argv[++i];
        } else if (strcmp(argv[i], "--bits") == 0 && i + 1 < argc) {
            fbits = bench_parse_count(argv[++i], &e);
            if (fbits < CF_MIN_FINGERPRINT_BITS || fbits > CF_MAX_FINGERPRINT_BITS || *e)
                goto usage;
        } else if (strcmp(argv[i], "--queries") == 0 && i + 1 < argc) {
            queries = bench_parse_count(argv[++i], &e);
            if (queries == 0 || *e)
                goto usage;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            if (!bench_parse_seed(argv[++i], &seed))
                goto usage;
        } else if (strcmp(argv[i], "--race") == 0) {
            race = true;
        } else {
            goto usage;
        }
    }
    uint64_t keys[MAX_KEYS];
    size_t nkeys = 0;
    for (const char *s = keys_arg;;) {
        const char *e = NULL;
        uint64_t v = bench_parse_count(s, &e);
        if (v == 0 || v > UINT32_MAX || nkeys == MAX_KEYS || (*e != ',' && *e != '\0'))
            goto usage;
        keys[nkeys++] = v;
        if (*e == '\0')
            break;
        s = e + 1;
    }
    bench_print_start("cf-bench-concurrent: lookups beside a writer", argc, argv);
    for (size_t k = 0; k < nkeys; k++)
        run(keys[k], (unsigned)fbits, queries, seed, race);
    return 0;
usage:
    fprintf(stderr,
            "usage: cf-bench-concurrent [--keys N[,N...]] [--bits F] [--queries Q] [--seed S] "
            "[--race]\n");
    return 2;
}
