/*
 * speed.c - the speed benchmark (`make bench`): every operation of the library, in ns per
 * key, beside the machine's own limit for the same memory traffic and beside libbloom,
 * all measured in the same run, so that the ratios hold on a noisy machine even when the
 * absolute numbers drift.
 *
 * Per configuration (fingerprint bits f, bucket size b, N keys): a fixed-size filter of
 * capacity N filled to capacity, lookups at 0, 50 and 100 % present keys (single and
 * batched), the false-positive rate, deletes of every key; the limit (two random 8-byte
 * reads per key in an array as large as the table) with and without hashing, and batched
 * with prefetch; libbloom at the same bits per key.
 *
 * Usage: cf-bench-speed [--keys N[,N...]] [--shapes f/b[s][,f/b[s]...]] [--queries Q]
 *                       [--seed S] [--quick] [--csv DIR] [--figures DIR] [--semi]
 * Numbers take a k, M or G suffix (10M = 10000000). --figures DIR writes the datasets of
 * the README's two figures instead of the tables (bench/figures.sh plots them); --semi
 * measures only the head-to-head of semi-sorted and plain buckets (compare_semi).
 * Exit status: 0; 1 if a present key was not found or an operation failed that must
 * not (an ERROR line says which); 2 for a usage or setup error. Timings never fail it.
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "common.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef CF_HAVE_LIBBLOOM
#include <bloom.h>
#endif

#ifndef CF_BENCH_BUILD_FLAGS
#define CF_BENCH_BUILD_FLAGS "unknown (not built by the project's CMake)"
#endif
#ifndef CF_BENCH_BUILD_TYPE
#define CF_BENCH_BUILD_TYPE "unknown"
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define PREFETCH(p) ((void)(p))
#endif

#define DEFAULT_KEYS   "1000000,50000000" /* in cache (1.6 MB table) and far out of it */
#define DEFAULT_SHAPES "12/4,13/4s,8/4,16/4,8/2,16/2,8/8" /* the default first; s: semi-sorted */
#define MAX_QUERIES    UINT64_C(10000000) /* per measurement: enough for 0.1 % FPR to ~1 % */
#define QUICK_KEYS     "100000"           /* --quick: a smoke test of a few seconds */
#define QUICK_SHAPES   "12/4,8/4"
#define MAX_LIST       16 /* entries of --keys and --shapes */
/* The most a semi-sorted 13/4 operation may cost over plain 12/4 at the same memory: the
 * price of its halved false-positive rate that the project promises (issue "Speed, round 4"). */
#define SEMI_GOAL      1.20

#define BATCH          256 /* keys per cf_contains_keys / cf_add_many call, as the issue asks */
/* Keys per batch of the batched limit: their positions computed and prefetched, then read. */
#define PREFETCH_BATCH 32
/* Every lookup and limit figure is the median of REPEATS interleaved runs, so that a burst
 * of noise on the VM moves one run, not the ratio. Up to REPEAT_KEYS keys (cheap), each
 * run asks all the queries and inserts are repeated too; above, each run asks a third of
 * them and inserts run once, which keeps the default run within ~5 minutes. */
#define REPEAT_KEYS    UINT64_C(4000000)
#define REPEATS        3

/* The library's default allocator asks for transparent huge pages on blocks of at least
 * 4 MiB (src/platform.c); the limit arrays get the same, so that both pay the same TLB
 * misses. */
#define HUGE_PAGE     ((size_t)2 << 20)
#define HUGE_MIN_SIZE ((size_t)4 << 20)

/* Figure 1: fingerprint widths, and enough absent queries to see ~1000 false positives. */
#define FIG_FPR_KEYS        UINT64_C(1000000)
#define FIG_FPR_MIN_BITS    4u
#define FIG_FPR_MAX_BITS    20u
#define FIG_FPR_POSITIVES   1000.0
#define FIG_FPR_MIN_Q       UINT64_C(2000000)
#define FIG_FPR_MAX_Q       UINT64_C(50000000) /* f = 20: ~370 positives, 5 % noise */
/* Figure 2: a table three times the 32 MiB L3 cache of the build machine (101 MB). */
#define FIG_LOAD_KEYS       UINT64_C(64000000)
#define FIG_LOAD_QUERIES    UINT64_C(2000000) /* per lookup measurement at each step */
#define FIG_LOAD_STEP       0.05
#define FIG_QUICK_DIVISOR   10u /* --quick --figures: smaller figures */
#define FIG_QUICK_LOAD_KEYS UINT64_C(1000000)

/* ------------------------------------------------------------------------------------ */
/* Keys                                                                                 */
/* ------------------------------------------------------------------------------------ */

/* Key i of stream `seed` is bench_gen(seed, i) (common.h); the streams' seeds all derive
 * from --seed. */
typedef struct seeds {
    uint64_t base, filter, present, absent, pick;
} seeds;

static seeds make_seeds(uint64_t base)
{
    seeds s = {base, bench_gen(base, 1), bench_gen(base, 2), bench_gen(base, 3),
               bench_gen(base, 4)};
    return s;
}

/* A stream of lookup keys: query j is for a present key (bench_gen(present, r mod n), r drawn
 * from the pick stream) with probability pct %, else for absent key bench_gen(absent, j). The
 * choice is branch-free, so every percentage costs the same to generate. */
typedef struct query_stream {
    uint64_t pick, present, absent;
    uint64_t n;      /* present keys: bench_gen(present, 0 .. n-1) */
    uint64_t thresh; /* present when the low 32 bits of the pick are below: pct * 2^32 / 100 */
} query_stream;

static query_stream make_queries(const seeds *s, uint64_t n, unsigned pct)
{
    query_stream q = {s->pick, s->present, s->absent, n, ((uint64_t)pct << 32) / 100};
    return q;
}

static inline uint64_t query_key(const query_stream *q, uint64_t j, unsigned *present)
{
    uint64_t r = bench_gen(q->pick, j);
    uint64_t p = (r & 0xffffffffu) < q->thresh;
    /* Masks, not ?:, which the compiler may turn into a branch that a 50 % mix mispredicts
     * half of the time. */
    uint64_t mask = 0 - p;
    uint64_t idx = (bench_reduce32(r >> 32, q->n) & mask) | (j & ~mask);
    *present = (unsigned)p;
    return bench_gen((q->present & mask) | (q->absent & ~mask), idx);
}

/* Answers of a lookup run: false positives and false negatives (which must be 0). */
typedef struct tally {
    uint64_t fp, fn, queries;
} tally;

/* ------------------------------------------------------------------------------------ */
/* Memory and the machine                                                               */
/* ------------------------------------------------------------------------------------ */

/* An array allocated the way the library allocates a table: malloc, and on blocks of
 * HUGE_MIN_SIZE or more, MADV_HUGEPAGE on the 2 MiB-aligned interior before the first
 * touch. Then filled, so that no page fault lands in a timed loop. */
static uint64_t *alloc_like_table(size_t words)
{
    size_t bytes = words * sizeof(uint64_t);
    uint64_t *a = bench_xmalloc(bytes);
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_MIN_SIZE) {
        uintptr_t start = ((uintptr_t)a + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
        uintptr_t end = ((uintptr_t)a + bytes) & ~(uintptr_t)(HUGE_PAGE - 1);
        if (end > start)
            (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
    }
#endif
    for (size_t i = 0; i < words; i++)
        a[i] = i;
    return a;
}

/* How much of this process's memory sits in transparent huge pages, in MiB; -1 if the
 * kernel does not say. */
static long huge_mib(void)
{
    char v[64];
    if (!bench_read_field("/proc/self/smaps_rollup", "AnonHugePages", v, sizeof v))
        return -1;
    return strtol(v, NULL, 10) / 1024;
}

/* ------------------------------------------------------------------------------------ */
/* Timed loops. Each returns ns per key. Keys are generated inside every timed loop, the  */
/* limits' included, so that generation costs the same everywhere.                      */
/* ------------------------------------------------------------------------------------ */

/* Keyed calls take the 8-byte key; pre-hashed calls take the key itself as the hash (the
 * keys are splitmix64 outputs: well mixed 64-bit values, as a hash must be). */
#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* Fill: cf_add (keyed) or cf_add_hash of keys bench_gen(seed, 0 .. n-1); *failures counts
 * statuses other than CF_OK. */
static ALWAYS_INLINE double time_insert_as(cf_filter *f, uint64_t seed, uint64_t n,
                                           uint64_t *failures, bool keyed)
{
    uint64_t bad = 0;
    double t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key = bench_gen(seed, i);
        bad += (keyed ? cf_add(f, &key, sizeof key) : cf_add_hash(f, key)) != CF_OK;
    }
    double t1 = bench_now();
    *failures += bad;
    return (t1 - t0) * 1e9 / (double)n;
}

static double time_insert(cf_filter *f, uint64_t seed, uint64_t n, uint64_t *failures)
{
    return time_insert_as(f, seed, n, failures, true);
}

static double time_insert_hash(cf_filter *f, uint64_t seed, uint64_t n, uint64_t *failures)
{
    return time_insert_as(f, seed, n, failures, false);
}

/* The same keys as hashes through cf_add_many, BATCH at a time. */
static double time_insert_many(cf_filter *f, uint64_t seed, uint64_t n, uint64_t *failures)
{
    uint64_t hashes[BATCH], bad = 0;
    double t0 = bench_now();
    for (uint64_t i = 0; i < n; i += BATCH) {
        size_t m = n - i < BATCH ? (size_t)(n - i) : BATCH;
        for (size_t k = 0; k < m; k++)
            hashes[k] = bench_gen(seed, i + k);
        bad += m - cf_add_many(f, hashes, m, 0, NULL);
    }
    double t1 = bench_now();
    *failures += bad;
    return (t1 - t0) * 1e9 / (double)n;
}

static ALWAYS_INLINE double time_delete_as(cf_filter *f, uint64_t seed, uint64_t n,
                                           uint64_t *failures, bool keyed)
{
    uint64_t bad = 0;
    double t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key = bench_gen(seed, i);
        bad += (keyed ? cf_delete(f, &key, sizeof key) : cf_delete_hash(f, key)) != CF_OK;
    }
    double t1 = bench_now();
    *failures += bad;
    return (t1 - t0) * 1e9 / (double)n;
}

static double time_delete(cf_filter *f, uint64_t seed, uint64_t n, uint64_t *failures)
{
    return time_delete_as(f, seed, n, failures, true);
}

static double time_delete_hash(cf_filter *f, uint64_t seed, uint64_t n, uint64_t *failures)
{
    return time_delete_as(f, seed, n, failures, false);
}

/* cf_contains (keyed) or cf_contains_hash on queries first .. first+count-1. */
static ALWAYS_INLINE double time_lookup_as(const cf_filter *f, const query_stream *q,
                                           uint64_t first, uint64_t count, tally *t, bool keyed)
{
    uint64_t fp = 0, fn = 0;
    double t0 = bench_now();
    for (uint64_t j = first; j < first + count; j++) {
        unsigned present;
        uint64_t key = query_key(q, j, &present);
        unsigned hit = keyed ? cf_contains(f, &key, sizeof key) : cf_contains_hash(f, key);
        fp += hit & (present ^ 1u);
        fn += present & (hit ^ 1u);
    }
    double t1 = bench_now();
    t->fp += fp;
    t->fn += fn;
    t->queries += count;
    return (t1 - t0) * 1e9 / (double)count;
}

static double time_lookup(const cf_filter *f, const query_stream *q, uint64_t first, uint64_t count,
                          tally *t)
{
    return time_lookup_as(f, q, first, count, t, true);
}

static double time_lookup_hash(const cf_filter *f, const query_stream *q, uint64_t first,
                               uint64_t count, tally *t)
{
    return time_lookup_as(f, q, first, count, t, false);
}

/* The same queries BATCH at a time: through cf_contains_keys (the pointer and length
 * arrays set up once, the keys written into the block buffer for each block), or as
 * hashes through cf_contains_many. */
static ALWAYS_INLINE double time_lookup_batched_as(const cf_filter *f, const query_stream *q,
                                                   uint64_t first, uint64_t count, tally *t,
                                                   bool keyed)
{
    uint64_t keys[BATCH];
    const void *ptrs[BATCH];
    size_t lens[BATCH];
    unsigned present[BATCH];
    bool out[BATCH];
    for (size_t k = 0; k < BATCH; k++) {
        ptrs[k] = &keys[k];
        lens[k] = sizeof keys[k];
    }
    uint64_t fp = 0, fn = 0;
    double t0 = bench_now();
    for (uint64_t j = first; j < first + count; j += BATCH) {
        size_t m = first + count - j < BATCH ? (size_t)(first + count - j) : BATCH;
        for (size_t k = 0; k < m; k++)
            keys[k] = query_key(q, j + k, &present[k]);
        if (keyed)
            cf_contains_keys(f, ptrs, lens, m, out);
        else
            cf_contains_many(f, keys, m, out);
        for (size_t k = 0; k < m; k++) {
            fp += (unsigned)out[k] & (present[k] ^ 1u);
            fn += present[k] & ((unsigned)out[k] ^ 1u);
        }
    }
    double t1 = bench_now();
    t->fp += fp;
    t->fn += fn;
    t->queries += count;
    return (t1 - t0) * 1e9 / (double)count;
}

static double time_lookup_batched(const cf_filter *f, const query_stream *q, uint64_t first,
                                  uint64_t count, tally *t)
{
    return time_lookup_batched_as(f, q, first, count, t, true);
}

static double time_lookup_many(const cf_filter *f, const query_stream *q, uint64_t first,
                               uint64_t count, tally *t)
{
    return time_lookup_batched_as(f, q, first, count, t, false);
}

/* The two positions of the limits: a multiply-high of the hash and of its halves swapped
 * onto [0, words), as a filter indexes its table. */
__extension__ typedef unsigned __int128 u128;

static inline uint64_t mulhi(uint64_t a, uint64_t b)
{
    return (uint64_t)(((u128)a * b) >> 64);
}

static inline uint64_t swap_halves(uint64_t h)
{
    return h << 32 | h >> 32;
}

/* The limit: per query two 8-byte reads at positions from the key's hash, in a plain
 * loop: the bare loop takes the key itself as the hash (precomputed, as a pre-hashed call
 * gets it), the hashed one calls cf_hash first. The flag `present` joins the sum, as the
 * lookup loops count it. */
static ALWAYS_INLINE double time_limit_as(const cf_filter *f, const uint64_t *a, size_t words,
                                          const query_stream *q, uint64_t first, uint64_t count,
                                          bool hashed)
{
    uint64_t sum = 0;
    double t0 = bench_now();
    for (uint64_t j = first; j < first + count; j++) {
        unsigned present;
        uint64_t key = query_key(q, j, &present);
        uint64_t h = hashed ? cf_hash(f, &key, sizeof key) : key;
        sum += a[mulhi(h, words)] + a[mulhi(swap_halves(h), words)] + present;
    }
    double t1 = bench_now();
    volatile uint64_t sink = sum;
    (void)sink;
    return (t1 - t0) * 1e9 / (double)count;
}

static double time_limit(const cf_filter *f, const uint64_t *a, size_t words, const query_stream *q,
                         uint64_t first, uint64_t count)
{
    return time_limit_as(f, a, words, q, first, count, false);
}

static double time_limit_hashed(const cf_filter *f, const uint64_t *a, size_t words,
                                const query_stream *q, uint64_t first, uint64_t count)
{
    return time_limit_as(f, a, words, q, first, count, true);
}

/* The batched limit: PREFETCH_BATCH keys' positions computed (hashed or not, as above) and
 * prefetched, then read, so that their memory reads overlap as a batched lookup's can. */
static ALWAYS_INLINE double time_limit_batched_as(const cf_filter *f, const uint64_t *a,
                                                  size_t words, const query_stream *q,
                                                  uint64_t first, uint64_t count, bool hashed)
{
    size_t p1[PREFETCH_BATCH], p2[PREFETCH_BATCH];
    unsigned present[PREFETCH_BATCH];
    uint64_t sum = 0;
    double t0 = bench_now();
    for (uint64_t j = first; j < first + count; j += PREFETCH_BATCH) {
        size_t m =
            first + count - j < PREFETCH_BATCH ? (size_t)(first + count - j) : PREFETCH_BATCH;
        for (size_t k = 0; k < m; k++) {
            uint64_t key = query_key(q, j + k, &present[k]);
            uint64_t h = hashed ? cf_hash(f, &key, sizeof key) : key;
            p1[k] = (size_t)mulhi(h, words);
            p2[k] = (size_t)mulhi(swap_halves(h), words);
            PREFETCH(&a[p1[k]]);
            PREFETCH(&a[p2[k]]);
        }
        for (size_t k = 0; k < m; k++)
            sum += a[p1[k]] + a[p2[k]] + present[k];
    }
    double t1 = bench_now();
    volatile uint64_t sink = sum;
    (void)sink;
    return (t1 - t0) * 1e9 / (double)count;
}

static double time_limit_batched(const cf_filter *f, const uint64_t *a, size_t words,
                                 const query_stream *q, uint64_t first, uint64_t count)
{
    return time_limit_batched_as(f, a, words, q, first, count, false);
}

static double time_limit_batched_hashed(const cf_filter *f, const uint64_t *a, size_t words,
                                        const query_stream *q, uint64_t first, uint64_t count)
{
    return time_limit_batched_as(f, a, words, q, first, count, true);
}

#ifdef CF_HAVE_LIBBLOOM
/* libbloom at the given bits per key: its bloom_init sizes for an error rate, and
 * bits/key = -ln(error) / ln(2)^2, so this error gives those bits. libbloom counts in
 * int: false if n or its bit count does not fit. */
static bool bloom_at_bits(struct bloom *bl, uint64_t n, double bits_per_key)
{
    double ln2 = log(2.0);
    if (n > (uint64_t)2147483647 || (double)n * bits_per_key > 2147483647.0 || n < 1000)
        return false;
    return bloom_init(bl, (int)n, exp(-bits_per_key * ln2 * ln2)) == 0;
}

static double time_bloom_insert(struct bloom *bl, uint64_t seed, uint64_t n, uint64_t *failures)
{
    uint64_t bad = 0;
    double t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key = bench_gen(seed, i);
        bad += bloom_add(bl, &key, (int)sizeof key) < 0;
    }
    double t1 = bench_now();
    *failures += bad;
    return (t1 - t0) * 1e9 / (double)n;
}

static double time_bloom_lookup(struct bloom *bl, const query_stream *q, uint64_t first,
                                uint64_t count, tally *t)
{
    uint64_t fp = 0, fn = 0;
    double t0 = bench_now();
    for (uint64_t j = first; j < first + count; j++) {
        unsigned present;
        uint64_t key = query_key(q, j, &present);
        unsigned hit = bloom_check(bl, &key, (int)sizeof key) > 0;
        fp += hit & (present ^ 1u);
        fn += present & (hit ^ 1u);
    }
    double t1 = bench_now();
    t->fp += fp;
    t->fn += fn;
    t->queries += count;
    return (t1 - t0) * 1e9 / (double)count;
}

/* The false-positive rate of a Bloom filter of `bits` bits, k hashes and n keys. */
static double bloom_theory(double bits, unsigned k, double n)
{
    return pow(1.0 - exp(-(double)k * n / bits), (double)k);
}
#endif

/* ------------------------------------------------------------------------------------ */
/* One configuration                                                                    */
/* ------------------------------------------------------------------------------------ */

static const unsigned PCTS[3] = {0, 50, 100};

typedef struct result {
    uint64_t n, bytes;
    unsigned f, b;
    bool semi; /* semi-sorted buckets (CF_SEMI_SORT) */
    /* Fills and deletes: keyed (cf_add, cf_delete) and pre-hashed (cf_add_hash,
     * cf_add_many, cf_delete_hash). Lookups by query mix: keyed single and batched
     * (cf_contains, cf_contains_keys), pre-hashed single and batched (cf_contains_hash,
     * cf_contains_many). */
    double insert, insert_hash, insert_many, del, del_hash;
    double lookup[3], lookup_batched[3], lookup_hash[3], lookup_many[3];
    double limit, limit_hashed, limit_batched, limit_batched_hashed;
    double fpr, fpr_expected, load;
    tally absent;              /* the 0 % single lookups: the FPR sample */
    bool bloom, bloom_refused; /* measured; refused: too small or too big for libbloom */
    double bloom_insert, bloom_lookup[3], bloom_bits_per_key, bloom_fpr, bloom_fpr_theory;
    unsigned bloom_k;
    uint64_t bloom_fp;
    long huge;
} result;

static int errors; /* ERROR lines printed: the exit status is 1 if any */

static void error_line(const char *what, unsigned f, unsigned b, uint64_t n, uint64_t count)
{
    printf("\nERROR: f=%u b=%u N=%" PRIu64 ": %s (%" PRIu64 ")\n", f, b, n, what, count);
    fflush(stdout);
    errors++;
}

/* Two filters that must be identical: their serialized bytes compared. */
static bool same_filter(const cf_filter *x, const cf_filter *y)
{
    size_t nx = cf_serialized_size(x), ny = cf_serialized_size(y);
    if (nx != ny || nx == 0)
        return false;
    unsigned char *bx = bench_xmalloc(nx), *by = bench_xmalloc(ny);
    size_t wx = 0, wy = 0;
    bool same = cf_serialize(x, bx, nx, &wx) == CF_OK && cf_serialize(y, by, ny, &wy) == CF_OK &&
                wx == wy && memcmp(bx, by, wx) == 0;
    free(bx);
    free(by);
    return same;
}

static result run_config(uint64_t n, unsigned fbits, unsigned b, bool semi, uint64_t queries_opt,
                         const seeds *sd)
{
    result r = {.n = n, .f = fbits, .b = b, .semi = semi};
    unsigned flags = semi ? CF_SEMI_SORT : 0u;
    bool cheap = n <= REPEAT_KEYS;
    int reps = cheap ? REPEATS : 1; /* of inserts */
    uint64_t q = queries_opt ? queries_opt : (n < MAX_QUERIES ? n : MAX_QUERIES);
    /* Run i asks queries first[i] .. first[i] + count[i] - 1: all q each when cheap, else
     * a third of them each. */
    uint64_t first[REPEATS], count[REPEATS];
    for (int i = 0; i < REPEATS; i++) {
        count[i] = cheap ? q : q / REPEATS + ((uint64_t)i < q % REPEATS);
        first[i] = i ? first[i - 1] + count[i - 1] : 0;
    }
    /* f: keys through cf_add; g: the keys as hashes through cf_add_many, and h through
     * cf_add_hash, which must build g's bytes. */
    cf_filter *f = bench_filter(n, fbits, b, flags, sd->filter),
              *g = bench_filter(n, fbits, b, flags, sd->filter),
              *h = bench_filter(n, fbits, b, flags, sd->filter);
    cf_stats st;
    cf_get_stats(f, &st);
    r.bytes = st.bytes;

    /* Fills: to capacity, cleared between repetitions (cf_clear is not timed). */
    double t[REPEATS], lim[REPEATS], limh[REPEATS], limb[REPEATS], limbh[REPEATS];
    uint64_t fail = 0, fail_many = 0, fail_hash = 0;
    for (int i = 0; i < reps; i++) {
        if (i)
            cf_clear(f);
        t[i] = time_insert(f, sd->present, n, &fail);
    }
    r.insert = bench_median(t, reps);
    for (int i = 0; i < reps; i++) {
        if (i)
            cf_clear(g);
        t[i] = time_insert_many(g, sd->present, n, &fail_many);
    }
    r.insert_many = bench_median(t, reps);
    for (int i = 0; i < reps; i++) {
        if (i)
            cf_clear(h);
        t[i] = time_insert_hash(h, sd->present, n, &fail_hash);
    }
    r.insert_hash = bench_median(t, reps);
    if (fail)
        error_line("cf_add of a key up to capacity did not return CF_OK", fbits, b, n, fail);
    if (fail_many)
        error_line("cf_add_many did not add every key up to capacity", fbits, b, n, fail_many);
    if (fail_hash)
        error_line("cf_add_hash of a key up to capacity did not return CF_OK", fbits, b, n,
                   fail_hash);
    if (!same_filter(g, h))
        error_line("cf_add_many and cf_add_hash built different filters", fbits, b, n, 1);
    cf_get_stats(f, &st);
    r.load = st.load_factor;
    r.fpr_expected = st.fpr;

    /* Limits and lookups, interleaved by run so that drift hits them alike. Each run asks
     * other queries, so the FPR sample is all of them. */
    size_t words = (size_t)((r.bytes + 7) / 8);
    uint64_t *a = alloc_like_table(words);
    r.huge = huge_mib();
    query_stream qs[3];
    for (int p = 0; p < 3; p++)
        qs[p] = make_queries(sd, n, PCTS[p]);
    tally single[3] = {{0}}, batched[3] = {{0}}, hashed[3] = {{0}}, many[3] = {{0}};
    double ls[3][REPEATS], lb[3][REPEATS], lh[3][REPEATS], lm[3][REPEATS];
    for (int i = 0; i < REPEATS; i++) {
        lim[i] = time_limit(f, a, words, &qs[1], first[i], count[i]);
        limh[i] = time_limit_hashed(f, a, words, &qs[1], first[i], count[i]);
        limb[i] = time_limit_batched(f, a, words, &qs[1], first[i], count[i]);
        limbh[i] = time_limit_batched_hashed(f, a, words, &qs[1], first[i], count[i]);
        for (int p = 0; p < 3; p++) {
            ls[p][i] = time_lookup(f, &qs[p], first[i], count[i], &single[p]);
            lb[p][i] = time_lookup_batched(f, &qs[p], first[i], count[i], &batched[p]);
            lh[p][i] = time_lookup_hash(g, &qs[p], first[i], count[i], &hashed[p]);
            lm[p][i] = time_lookup_many(g, &qs[p], first[i], count[i], &many[p]);
        }
    }
    free(a);
    r.limit = bench_median(lim, REPEATS);
    r.limit_hashed = bench_median(limh, REPEATS);
    r.limit_batched = bench_median(limb, REPEATS);
    r.limit_batched_hashed = bench_median(limbh, REPEATS);
    for (int p = 0; p < 3; p++) {
        r.lookup[p] = bench_median(ls[p], REPEATS);
        r.lookup_batched[p] = bench_median(lb[p], REPEATS);
        r.lookup_hash[p] = bench_median(lh[p], REPEATS);
        r.lookup_many[p] = bench_median(lm[p], REPEATS);
        if (single[p].fn)
            error_line("false negatives in cf_contains", fbits, b, n, single[p].fn);
        if (batched[p].fn)
            error_line("false negatives in cf_contains_keys", fbits, b, n, batched[p].fn);
        if (hashed[p].fn)
            error_line("false negatives in cf_contains_hash", fbits, b, n, hashed[p].fn);
        if (many[p].fn)
            error_line("false negatives in cf_contains_many", fbits, b, n, many[p].fn);
        if (single[p].fp != batched[p].fp)
            error_line("cf_contains and cf_contains_keys disagree (false positives)", fbits, b, n,
                       single[p].fp > batched[p].fp ? single[p].fp - batched[p].fp
                                                    : batched[p].fp - single[p].fp);
        if (hashed[p].fp != many[p].fp)
            error_line(
                "cf_contains_hash and cf_contains_many disagree (false positives)", fbits, b, n,
                hashed[p].fp > many[p].fp ? hashed[p].fp - many[p].fp : many[p].fp - hashed[p].fp);
    }
    r.absent = single[0];
    r.fpr = (double)r.absent.fp / (double)r.absent.queries;

    /* Deletes: every key, and each must be found; refilled (not timed) between runs. */
    uint64_t fail_del = 0, fail_refill = 0;
    for (int i = 0; i < reps; i++) {
        if (i)
            (void)time_insert(f, sd->present, n, &fail_refill);
        t[i] = time_delete(f, sd->present, n, &fail_del);
    }
    r.del = bench_median(t, reps);
    for (int i = 0; i < reps; i++) {
        if (i)
            (void)time_insert_hash(g, sd->present, n, &fail_refill);
        t[i] = time_delete_hash(g, sd->present, n, &fail_del);
    }
    r.del_hash = bench_median(t, reps);
    if (fail_refill)
        error_line("cf_add of a key up to capacity did not return CF_OK", fbits, b, n, fail_refill);
    if (fail_del)
        error_line("a delete of an added key did not return CF_OK", fbits, b, n, fail_del);
    cf_get_stats(f, &st);
    if (st.items != 0)
        error_line("items left after deleting every key", fbits, b, n, st.items);
    cf_get_stats(g, &st);
    if (st.items != 0)
        error_line("items left after deleting every hash", fbits, b, n, st.items);
    cf_free(f);
    cf_free(g);
    cf_free(h);

#ifdef CF_HAVE_LIBBLOOM
    struct bloom bl;
    double bpk = 8.0 * (double)r.bytes / (double)n;
    if (bloom_at_bits(&bl, n, bpk)) {
        r.bloom = true;
        r.bloom_bits_per_key = (double)bl.bits / (double)n;
        r.bloom_k = (unsigned)bl.hashes;
        uint64_t fail_bloom = 0;
        for (int i = 0; i < reps; i++) {
            if (i)
                bloom_reset(&bl);
            t[i] = time_bloom_insert(&bl, sd->present, n, &fail_bloom);
        }
        r.bloom_insert = bench_median(t, reps);
        tally bt[3] = {{0}};
        for (int i = 0; i < REPEATS; i++)
            for (int p = 0; p < 3; p++)
                ls[p][i] = time_bloom_lookup(&bl, &qs[p], first[i], count[i], &bt[p]);
        for (int p = 0; p < 3; p++) {
            r.bloom_lookup[p] = bench_median(ls[p], REPEATS);
            if (bt[p].fn)
                error_line("false negatives in libbloom", fbits, b, n, bt[p].fn);
        }
        if (fail_bloom)
            error_line("bloom_add failed", fbits, b, n, fail_bloom);
        r.bloom_fp = bt[0].fp;
        r.bloom_fpr = (double)bt[0].fp / (double)bt[0].queries;
        r.bloom_fpr_theory = bloom_theory((double)bl.bits, r.bloom_k, (double)n);
        bloom_free(&bl);
    } else {
        r.bloom_refused = true;
    }
#endif
    return r;
}

/* ------------------------------------------------------------------------------------ */
/* Output                                                                               */
/* ------------------------------------------------------------------------------------ */

static FILE *csv_speed, *csv_fpr;

static void row(const result *r, const char *op, const char *label, double ns, double limit,
                const char *limit_name)
{
    printf("| %s | %.1f | %.1f | %.2f | %s |\n", label, ns, 1e3 / ns, ns / limit, limit_name);
    if (csv_speed)
        fprintf(csv_speed, "%" PRIu64 ",%u,%u,%" PRIu64 ",%s,%.3f,%.3f,%.4f,%s\n", r->n, r->f, r->b,
                r->bytes, op, ns, 1e3 / ns, ns / limit, limit_name);
}

static void fpr_row(const result *r, const char *filter, const char *label, double bpk,
                    double measured, uint64_t fps, double expected, const char *expected_how,
                    double bound)
{
    printf("| %s | %.2f | %.4f%% (%" PRIu64 " of %" PRIu64 ") | %.4f%% %s | ", label, bpk,
           measured * 100.0, fps, r->absent.queries, expected * 100.0, expected_how);
    if (bound > 0)
        printf("%.4f%% | ", bound * 100.0);
    else
        printf("- | ");
    if (measured > 0) {
        double lb = log2(1.0 / measured);
        printf("%.2f | %.2f |\n", lb, bpk / lb);
    } else {
        printf("- | - |\n");
    }
    if (csv_fpr) {
        fprintf(csv_fpr, "%" PRIu64 ",%u,%u,%s,%.4f,%" PRIu64 ",%" PRIu64 ",%.8f,%.8f,", r->n, r->f,
                r->b, filter, bpk, r->absent.queries, fps, measured, expected);
        if (bound > 0) /* a Bloom filter has no bound of this form: the field stays empty */
            fprintf(csv_fpr, "%.8f", bound);
        fprintf(csv_fpr, "\n");
    }
}

static void print_result(const result *r)
{
    static const char *const lookup_ops[3] = {"lookup_0", "lookup_50", "lookup_100"};
    static const char *const batched_ops[3] = {"lookup_batched_0", "lookup_batched_50",
                                               "lookup_batched_100"};
    static const char *const bloom_ops[3] = {"bloom_lookup_0", "bloom_lookup_50",
                                             "bloom_lookup_100"};
    static const char *const hash_ops[3] = {"lookup_hash_0", "lookup_hash_50", "lookup_hash_100"};
    static const char *const many_ops[3] = {"lookup_many_0", "lookup_many_50", "lookup_many_100"};
    char label[128];
    printf("Table %.2f MB, %.2f bits per key, load %.4f at capacity; %s; huge pages held by the "
           "process (table and limit array): ",
           (double)r->bytes / 1e6, 8.0 * (double)r->bytes / (double)r->n, r->load,
           r->n <= REPEAT_KEYS ? "every figure the median of 3 runs"
                               : "inserts and deletes one run, lookups and limits the median of 3 "
                                 "interleaved runs of a third of the queries each");
    if (r->huge >= 0)
        printf("%ld MiB.\n\n", r->huge);
    else
        printf("unknown.\n\n");
    printf("| operation | ns/key | Mops/s | ratio | to |\n|---|---:|---:|---:|---|\n");
    row(r, "insert", "fill: cf_add (8-byte keys), empty to capacity", r->insert, r->limit, "limit");
    row(r, "insert_hash", "fill: cf_add_hash", r->insert_hash, r->limit, "limit");
    row(r, "insert_many", "fill: cf_add_many (256 hashes)", r->insert_many, r->limit, "limit");
    for (int p = 0; p < 3; p++) {
        snprintf(label, sizeof label, "lookup %u%% present: cf_contains_hash", PCTS[p]);
        row(r, hash_ops[p], label, r->lookup_hash[p], r->limit, "limit");
    }
    for (int p = 0; p < 3; p++) {
        snprintf(label, sizeof label, "lookup %u%% present: cf_contains (8-byte keys)", PCTS[p]);
        row(r, lookup_ops[p], label, r->lookup[p], r->limit, "limit");
    }
    for (int p = 0; p < 3; p++) {
        snprintf(label, sizeof label, "lookup %u%% present: cf_contains_many (256)", PCTS[p]);
        row(r, many_ops[p], label, r->lookup_many[p], r->limit_batched, "batched limit");
    }
    for (int p = 0; p < 3; p++) {
        snprintf(label, sizeof label, "lookup %u%% present: cf_contains_keys (256)", PCTS[p]);
        row(r, batched_ops[p], label, r->lookup_batched[p], r->limit_batched, "batched limit");
    }
    row(r, "delete_hash", "delete: cf_delete_hash, every key", r->del_hash, r->limit, "limit");
    row(r, "delete", "delete: cf_delete, every key", r->del, r->limit, "limit");
    row(r, "limit", "**limit**: 2 random 8-byte reads per precomputed hash (multiply-high)",
        r->limit, r->limit, "limit");
    row(r, "limit_hashed", "hashed limit: cf_hash, then the same", r->limit_hashed, r->limit,
        "limit");
    row(r, "limit_batched", "**batched limit**: the same for 32 keys prefetched, then read",
        r->limit_batched, r->limit_batched, "batched limit");
    row(r, "limit_batched_hashed", "hashed batched limit: cf_hash, then the same",
        r->limit_batched_hashed, r->limit_batched, "batched limit");
    if (r->bloom) {
        snprintf(label, sizeof label, "libbloom insert: bloom_add (k = %u)", r->bloom_k);
        row(r, "bloom_insert", label, r->bloom_insert, r->limit, "limit");
        for (int p = 0; p < 3; p++) {
            snprintf(label, sizeof label, "libbloom lookup %u%% present: bloom_check", PCTS[p]);
            row(r, bloom_ops[p], label, r->bloom_lookup[p], r->limit, "limit");
        }
    }
    if (r->bloom_refused)
        printf("\nlibbloom: not measured (it takes 1000 to 2^31-1 keys and at most 2^31-1 bits)\n");
    printf("\n| filter | bits/key | FPR measured | FPR expected | bound 2b/2^f | log2(1/FPR) | "
           "bits/key ÷ log2(1/FPR) |\n|---|---:|---:|---:|---:|---:|---:|\n");
    double bpk = 8.0 * (double)r->bytes / (double)r->n;
    double bound = 2.0 * r->b / ldexp(1.0, (int)r->f);
    snprintf(label, sizeof label, "cuckoo f=%u b=%u", r->f, r->b);
    fpr_row(r, "cuckoo", label, bpk, r->fpr, r->absent.fp, r->fpr_expected, "(cf_stats.fpr)",
            bound);
    if (r->bloom) {
        snprintf(label, sizeof label, "libbloom k=%u", r->bloom_k);
        fpr_row(r, "libbloom", label, r->bloom_bits_per_key, r->bloom_fpr, r->bloom_fp,
                r->bloom_fpr_theory, "((1-e^(-kN/m))^k)", 0.0);
    }
    printf("\n");
    fflush(stdout);
}

/* One line of the targets table: measured / limit against the goal. */
static void target_row(const char *what, double ns, double limit, const char *limit_name,
                       double goal)
{
    double x = ns / limit;
    printf("| %s | %.1f ns / %.1f ns %s = %.2f | <= %.2f | %s |\n", what, ns, limit, limit_name, x,
           goal, x <= goal ? "yes" : "no");
}

static void print_targets(const result *r)
{
    char nb[32];
    printf("## Targets (f = 12, b = 4, %s keys; ratios to the limits of the same run)\n\n",
           bench_grouped(r->n, nb, sizeof nb));
    printf("| target | measured | goal | met |\n|---|---:|---:|---|\n");
    target_row("cf_contains_hash, absent keys", r->lookup_hash[0], r->limit, "limit", 1.10);
    target_row("cf_contains_hash, present keys", r->lookup_hash[2], r->limit, "limit", 1.10);
    target_row("cf_contains, 8-byte keys (absent)", r->lookup[0], r->limit, "limit", 1.35);
    target_row("cf_contains_many, 256 per call (absent)", r->lookup_many[0], r->limit_batched,
               "batched", 1.15);
    target_row("cf_contains_many, 256 per call (present)", r->lookup_many[2], r->limit_batched,
               "batched", 1.15);
    target_row("cf_contains_keys, 8-byte keys, 256 per call (absent)", r->lookup_batched[0],
               r->limit_batched, "batched", 1.40);
    target_row("cf_delete_hash", r->del_hash, r->limit, "limit", 1.30);
    target_row("fill to capacity, cf_add", r->insert, r->limit, "limit", 3.5);
    target_row("fill to capacity, cf_add_many", r->insert_many, r->limit, "limit", 2.2);
    if (r->bloom) {
        for (int p = 0; p < 3; p++) {
            double x = r->bloom_lookup[p] / r->lookup[p];
            printf("| lookup %u%% present: bloom_check ns / cf_contains ns | %.2f | > 1 "
                   "(faster) | %s |\n",
                   PCTS[p], x, x > 1.0 ? "yes" : "no");
        }
        printf("| FPR at the same bits/key (%.2f): cuckoo / libbloom | %.4f%% / %.4f%% = %.2f | "
               "< 1 (lower) | %s |\n",
               8.0 * (double)r->bytes / (double)r->n, r->fpr * 100.0, r->bloom_fpr * 100.0,
               r->bloom_fpr > 0 ? r->fpr / r->bloom_fpr : 0.0,
               r->fpr < r->bloom_fpr ? "yes" : "no");
    } else {
        printf("| lookup and FPR vs libbloom | not built with libbloom | | |\n");
    }
    printf("\n");
}

/* Semi-sorted 13-bit buckets against plain 12-bit ones, the same memory per slot, head
 * to head: both filters built side by side and each lookup timed on one, then at once on
 * the other (the order alternating), SEMI_ROUNDS times. A ratio is the median of the
 * rounds' ratios, so that the drift between two runs of run_config minutes apart, which
 * moves one filter's figures and not the other's, stays out of it. */
#define SEMI_ROUNDS 7

typedef double (*lookup_timer)(const cf_filter *, const query_stream *, uint64_t, uint64_t,
                               tally *);

static void compare_semi(uint64_t n, uint64_t queries_opt, const seeds *sd)
{
    const struct {
        const char *name;
        lookup_timer time;
        unsigned pct; /* index into PCTS */
    } ops[] = {
        {"cf_contains_hash, absent keys", time_lookup_hash, 0},
        {"cf_contains_hash, present keys", time_lookup_hash, 2},
        {"cf_contains, 8-byte keys (absent)", time_lookup, 0},
        {"cf_contains_many, 256 per call (absent)", time_lookup_many, 0},
        {"cf_contains_many, 256 per call (present)", time_lookup_many, 2},
        {"cf_contains_keys, 256 per call (absent)", time_lookup_batched, 0},
    };
    enum { OPS = sizeof ops / sizeof ops[0] };
    uint64_t fail = 0;
    cf_filter *filters[2] = {bench_filter(n, 13, 4, CF_SEMI_SORT, sd->filter),
                             bench_filter(n, 12, 4, 0, sd->filter)};
    for (int x = 0; x < 2; x++)
        (void)time_insert_many(filters[x], sd->present, n, &fail);
    if (fail)
        error_line("cf_add_many did not add every key up to capacity", 13, 4, n, fail);
    uint64_t q = queries_opt ? queries_opt : (n < MAX_QUERIES ? n : MAX_QUERIES);
    uint64_t count = q / REPEATS ? q / REPEATS : q;
    query_stream qs[3];
    for (int i = 0; i < 3; i++)
        qs[i] = make_queries(sd, n, PCTS[i]);
    double ns[OPS][2][SEMI_ROUNDS], ratio[OPS][SEMI_ROUNDS];
    tally t[OPS][2];
    memset(t, 0, sizeof t);
    for (int r = 0; r < SEMI_ROUNDS; r++) {
        uint64_t first = (uint64_t)(r % REPEATS) * count;
        for (int o = 0; o < OPS; o++) {
            for (int k = 0; k < 2; k++) {
                int x = (r + k) % 2; /* semi-sorted first in even rounds, plain in odd */
                ns[o][x][r] = ops[o].time(filters[x], &qs[ops[o].pct], first, count, &t[o][x]);
            }
            ratio[o][r] = ns[o][0][r] / ns[o][1][r];
        }
    }
    for (int o = 0; o < OPS; o++)
        for (int x = 0; x < 2; x++)
            if (t[o][x].fn)
                error_line("false negatives in a lookup of the semi-sorted comparison", x ? 12 : 13,
                           4, n, t[o][x].fn);
    uint64_t bytes[2];
    for (int x = 0; x < 2; x++) {
        cf_stats st;
        cf_get_stats(filters[x], &st);
        bytes[x] = st.bytes;
        cf_free(filters[x]);
    }

    char nb[32];
    printf("## Semi-sorted buckets (f = 13, b = 4 semi-sorted against f = 12, b = 4; %s keys, "
           "the same memory)\n\n"
           "Both filters timed back to back, %d rounds; each figure is the median of its "
           "rounds, the ratio the median of the rounds' ratios.\n\n",
           bench_grouped(n, nb, sizeof nb), SEMI_ROUNDS);
    printf("| operation | semi-sorted ns | plain ns | ratio | goal | met |\n"
           "|---|---:|---:|---:|---:|---|\n");
    for (int o = 0; o < OPS; o++) {
        double x = bench_median(ratio[o], SEMI_ROUNDS);
        printf("| %s | %.1f | %.1f | %.2f | <= %.2f | %s |\n", ops[o].name,
               bench_median(ns[o][0], SEMI_ROUNDS), bench_median(ns[o][1], SEMI_ROUNDS), x,
               SEMI_GOAL, x <= SEMI_GOAL ? "yes" : "no");
    }
    printf("| bytes | %" PRIu64 " | %" PRIu64 " | %.4f | | |\n", bytes[0], bytes[1],
           (double)bytes[0] / (double)bytes[1]);
    /* The first row's lookups: absent keys, so every hit is a false positive. */
    printf("| false-positive rate | %.4f%% | %.4f%% | | | |\n\n",
           100.0 * (double)t[0][0].fp / (double)t[0][0].queries,
           100.0 * (double)t[0][1].fp / (double)t[0][1].queries);
}

static void print_header(int argc, char **argv, const seeds *sd, uint64_t queries)
{
    char cpu[256] = "unknown", thp[256] = "unknown (no /sys/kernel/mm/transparent_hugepage)";
    bench_read_field("/proc/cpuinfo", "model name", cpu, sizeof cpu);
    bench_read_field("/sys/kernel/mm/transparent_hugepage/enabled", NULL, thp, sizeof thp);

    bench_print_start("cuckoofilter speed benchmark", argc, argv);
    printf("- library: cuckoofilter %s (header %d.%d.%d)\n", cf_version(), CF_VERSION_MAJOR,
           CF_VERSION_MINOR, CF_VERSION_PATCH);
    printf("- compiler: %s\n", bench_compiler());
    printf("- build: %s, flags: %s\n", CF_BENCH_BUILD_TYPE, CF_BENCH_BUILD_FLAGS);
    printf("- CPU: %s (%ld online)\n", cpu, sysconf(_SC_NPROCESSORS_ONLN));
    printf("- transparent huge pages: %s. The library asks for them (MADV_HUGEPAGE) on tables "
           "of 4 MiB or more; the limit arrays are allocated the same way (malloc, madvise on "
           "the 2 MiB-aligned interior, then touched before timing).\n",
           thp);
#ifdef CF_HAVE_LIBBLOOM
    printf("- libbloom: %s, as packaged (its bit array comes from calloc: no huge pages)\n",
           bloom_version());
#else
    printf("- libbloom: not built in (install libbloom-dev and reconfigure)\n");
#endif
    printf("- seeds: --seed %" PRIu64 " gives filter 0x%016" PRIx64 ", present keys 0x%016" PRIx64
           ", absent keys 0x%016" PRIx64 ", query picks 0x%016" PRIx64 "\n",
           sd->base, sd->filter, sd->present, sd->absent, sd->pick);
    printf("- keys: 8 bytes, key i of a stream = splitmix64 finalizer of (seed + i * 2^64/phi); "
           "a query picks a present key gen(present, r mod N) or an absent one gen(absent, j), "
           "generated inside every timed loop\n");
    if (queries)
        printf("- lookups: %" PRIu64 " queries per measurement", queries);
    else
        printf("- lookups: min(N, 10M) queries per measurement");
    printf("; up to %" PRIu64 " keys every figure is the median of %d runs; above, lookups and "
           "limits are the median of %d interleaved runs of a third of the queries each, inserts "
           "and deletes one run\n",
           REPEAT_KEYS, REPEATS, REPEATS);
    printf("- ratio: single-key rows / limit (the bare machine loop: two random 8-byte reads "
           "per key in an array as large as the table, at positions from a precomputed 64-bit "
           "hash by multiply-high, no library call); batched rows / batched limit (the same, 32 "
           "keys' positions computed and prefetched, then read). Pre-hashed calls take the "
           "8-byte key itself as the hash; keyed calls hash it (XXH3)\n");
#if CF_VERSION_NUMBER >= 200 /* cf_cpu_variant is 0.2's; older builds measure as baselines */
    printf("- code variant: %s (cf_cpu_variant; CUCKOOFILTER_CPU=baseline forces the "
           "baseline)\n\n",
           cf_cpu_variant());
#else
    printf("- code variant: the library predates cf_cpu_variant (one variant)\n\n");
#endif
    fflush(stdout);
}

/* ------------------------------------------------------------------------------------ */
/* Figure datasets                                                                      */
/* ------------------------------------------------------------------------------------ */

static FILE *open_csv(const char *dir, const char *name, const char *header)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    if (!fp) {
        fprintf(stderr, "cf-bench-speed: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    if (*header)
        fprintf(fp, "%s\n", header);
    return fp;
}

/* Absent queries answered true by f, in batches. */
static uint64_t count_false_positives(const cf_filter *f, uint64_t absent, uint64_t count)
{
    query_stream q = {0, 0, absent, 1, 0};
    tally t = {0};
    (void)time_lookup_batched(f, &q, 0, count, &t);
    return t.fp;
}

/* Figure 1: measured FPR against bits per key, f = 4..20 at b = 4 to capacity, and
 * libbloom at the same bits per key. */
static void figure_fpr(const char *dir, bool quick, const seeds *sd)
{
    uint64_t n = quick ? FIG_FPR_KEYS / FIG_QUICK_DIVISOR : FIG_FPR_KEYS;
    uint64_t qmin = quick ? FIG_FPR_MIN_Q / FIG_QUICK_DIVISOR : FIG_FPR_MIN_Q;
    uint64_t qmax = quick ? FIG_FPR_MAX_Q / FIG_QUICK_DIVISOR : FIG_FPR_MAX_Q;
    /* One row per width, libbloom beside it (its columns empty without libbloom). */
    FILE *fp = open_csv(dir, "fpr-vs-bits.csv",
                        "fingerprint_bits,bits_per_key,queries,false_positives,fpr_measured,"
                        "fpr_expected,bloom_k,bloom_bits_per_key,bloom_false_positives,"
                        "bloom_fpr_measured,bloom_fpr_theory");
    for (unsigned fbits = FIG_FPR_MIN_BITS; fbits <= FIG_FPR_MAX_BITS; fbits++) {
        cf_filter *f = bench_filter(n, fbits, 4, 0, sd->filter);
        uint64_t fail = 0;
        (void)time_insert(f, sd->present, n, &fail);
        if (fail)
            error_line("cf_add of a key up to capacity did not return CF_OK", fbits, 4, n, fail);
        cf_stats st;
        cf_get_stats(f, &st);
        double bpk = 8.0 * (double)st.bytes / (double)n;
        double want = ceil(FIG_FPR_POSITIVES / st.fpr);
        uint64_t q = want < (double)qmin ? qmin : want > (double)qmax ? qmax : (uint64_t)want;
        uint64_t fps = count_false_positives(f, sd->absent, q);
        cf_free(f);
        fprintf(fp, "%u,%.4f,%" PRIu64 ",%" PRIu64 ",%.9f,%.9f,", fbits, bpk, q, fps,
                (double)fps / (double)q, st.fpr);
        fprintf(stderr, "fpr-vs-bits: f=%u %.2f bits/key: cuckoo %.6f%%", fbits, bpk,
                100.0 * (double)fps / (double)q);
#ifdef CF_HAVE_LIBBLOOM
        struct bloom bl;
        if (bloom_at_bits(&bl, n, bpk)) {
            uint64_t bad = 0;
            (void)time_bloom_insert(&bl, sd->present, n, &bad);
            query_stream qa = {0, 0, sd->absent, 1, 0};
            tally t = {0};
            (void)time_bloom_lookup(&bl, &qa, 0, q, &t);
            fprintf(fp, "%d,%.4f,%" PRIu64 ",%.9f,%.9f", bl.hashes, (double)bl.bits / (double)n,
                    t.fp, (double)t.fp / (double)q,
                    bloom_theory((double)bl.bits, (unsigned)bl.hashes, (double)n));
            fprintf(stderr, ", libbloom %.6f%%", 100.0 * (double)t.fp / (double)q);
            bloom_free(&bl);
        } else {
            fprintf(fp, ",,,,");
        }
#else
        fprintf(fp, ",,,,");
#endif
        fprintf(fp, "\n");
        fprintf(stderr, "\n");
    }
    fclose(fp);
}

/* Figure 2: throughput against load, f = 12, b = 4, out of cache, as in the paper's
 * figure: fill in steps of 5 % of the slots up to the first CF_FULL; at each step the
 * step's insert throughput and a fixed number of lookups. */
static void figure_load(const char *dir, bool quick, const seeds *sd)
{
    uint64_t n = quick ? FIG_QUICK_LOAD_KEYS : FIG_LOAD_KEYS;
    uint64_t q = quick ? FIG_LOAD_QUERIES / FIG_QUICK_DIVISOR / 2 : FIG_LOAD_QUERIES;
    cf_filter *f = bench_filter(n, 12, 4, 0, sd->filter);
    cf_stats st;
    cf_get_stats(f, &st);
    size_t words = (size_t)((st.bytes + 7) / 8);
    uint64_t *a = alloc_like_table(words);
    FILE *fp = open_csv(dir, "throughput-vs-load.csv",
                        "load,items,insert_mops,lookup_present_mops,lookup_absent_mops,"
                        "batched_present_mops,batched_absent_mops,limit_mops,batched_limit_mops");
    /* The figure's subtitle, beside the data rather than in it. */
    FILE *meta = open_csv(dir, "throughput-vs-load.txt", ""); /* no header */
    char nb[32], qb[32];
    fprintf(meta, "f = 12, b = 4, capacity %s (%.0f MB table), %s lookups per point\n",
            bench_grouped(n, nb, sizeof nb), (double)st.bytes / 1e6,
            bench_grouped(q, qb, sizeof qb));
    fclose(meta);
    uint64_t items = 0;
    bool full = false;
    for (unsigned step = 1; !full; step++) {
        uint64_t target = (uint64_t)((double)step * FIG_LOAD_STEP * (double)st.slots);
        if (target >= st.slots)
            target = st.slots;
        uint64_t start = items;
        double t0 = bench_now();
        while (items < target) {
            uint64_t key = bench_gen(sd->present, items);
            if (cf_add(f, &key, sizeof key) != CF_OK) {
                full = true;
                break;
            }
            items++;
        }
        double t1 = bench_now();
        /* The failed add counts as an attempt: its search is what the last step costs. */
        double insert_mops = (double)(items - start + full) / ((t1 - t0) * 1e6);
        if (items == 0)
            break;
        query_stream present = make_queries(sd, items, 100), absent = make_queries(sd, items, 0);
        tally tp = {0}, ta = {0}, bp = {0}, ba = {0};
        double lim = time_limit(f, a, words, &present, 0, q);
        double limb = time_limit_batched(f, a, words, &present, 0, q);
        double sp = time_lookup(f, &present, 0, q, &tp);
        double sa = time_lookup(f, &absent, 0, q, &ta);
        double bps = time_lookup_batched(f, &present, 0, q, &bp);
        double bas = time_lookup_batched(f, &absent, 0, q, &ba);
        if (tp.fn + bp.fn)
            error_line("false negatives", 12, 4, n, tp.fn + bp.fn);
        cf_get_stats(f, &st);
        fprintf(fp, "%.4f,%" PRIu64 ",%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", st.load_factor, items,
                insert_mops, 1e3 / sp, 1e3 / sa, 1e3 / bps, 1e3 / bas, 1e3 / lim, 1e3 / limb);
        fprintf(stderr,
                "throughput-vs-load: load %.4f insert %.2f Mops/s lookups %.1f %.1f %.1f %.1f\n",
                st.load_factor, insert_mops, 1e3 / sp, 1e3 / sa, 1e3 / bps, 1e3 / bas);
        if (target == st.slots)
            break;
    }
    fclose(fp);
    free(a);
    cf_free(f);
}

/* ------------------------------------------------------------------------------------ */
/* Options                                                                              */
/* ------------------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: cf-bench-speed [--keys N[,N...]] [--shapes f/b[,f/b...]] [--queries Q]\n"
            "                      [--seed S] [--quick] [--csv DIR] [--figures DIR] [--semi]\n"
            "  --keys     filter sizes (default " DEFAULT_KEYS ")\n"
            "  --shapes   fingerprint bits / bucket size, s after 4 for semi-sorted buckets\n"
            "             (default " DEFAULT_SHAPES ")\n"
            "  --queries  lookups per measurement (default min(keys, 10M))\n"
            "  --seed     the seed every stream derives from (default %" PRIu64 ")\n"
            "  --quick    a smoke test: " QUICK_KEYS " keys, shapes " QUICK_SHAPES "\n"
            "  --csv      also write DIR/speed.csv and DIR/fpr.csv\n"
            "  --figures  write the README figures' data to DIR instead (with --quick: small)\n"
            "  --semi     only the semi-sorted comparison (13/4s against 12/4) at each --keys\n"
            "Numbers take k, M or G (10M = 10000000).\n",
            BENCH_DEFAULT_SEED);
    exit(2);
}

static size_t parse_keys(const char *s, uint64_t *out)
{
    size_t n = 0;
    for (;;) {
        const char *e = s;
        uint64_t v = bench_parse_count(s, &e);
        /* Present keys are drawn by 32-bit multiply-shift: N < 2^32. */
        if (v == 0 || v > UINT32_MAX || n == MAX_LIST || (*e != ',' && *e != '\0'))
            return 0;
        out[n++] = v;
        if (*e == '\0')
            return n;
        s = e + 1;
    }
}

/* f/b, or f/4s for semi-sorted buckets. */
static size_t parse_shapes(const char *s, unsigned *fs, unsigned *bs, bool *semi)
{
    size_t n = 0;
    for (;;) {
        char *e;
        unsigned long f = strtoul(s, &e, 10);
        if (e == s || *e != '/')
            return 0;
        const char *bstart = e + 1;
        unsigned long b = strtoul(bstart, &e, 10);
        semi[n] = *e == 's';
        e += semi[n];
        if (e == bstart || f < CF_MIN_FINGERPRINT_BITS || f > CF_MAX_FINGERPRINT_BITS || b < 1 ||
            b > CF_MAX_BUCKET_SIZE || (semi[n] && b != 4) || n == MAX_LIST ||
            (*e != ',' && *e != '\0'))
            return 0;
        fs[n] = (unsigned)f;
        bs[n] = (unsigned)b;
        n++;
        if (*e == '\0')
            return n;
        s = e + 1;
    }
}

int main(int argc, char **argv)
{
    const char *keys_arg = NULL, *shapes_arg = NULL, *csv_dir = NULL, *fig_dir = NULL;
    uint64_t queries = 0, seed = BENCH_DEFAULT_SEED;
    bool quick = false, semi_only = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(o, "--quick") == 0) {
            quick = true;
        } else if (strcmp(o, "--keys") == 0 && has_value) {
            keys_arg = argv[++i];
        } else if (strcmp(o, "--shapes") == 0 && has_value) {
            shapes_arg = argv[++i];
        } else if (strcmp(o, "--queries") == 0 && has_value) {
            const char *e = NULL;
            queries = bench_parse_count(argv[++i], &e);
            if (queries == 0 || *e)
                usage();
        } else if (strcmp(o, "--seed") == 0 && has_value) {
            if (!bench_parse_seed(argv[++i], &seed))
                usage();
        } else if (strcmp(o, "--csv") == 0 && has_value) {
            csv_dir = argv[++i];
        } else if (strcmp(o, "--figures") == 0 && has_value) {
            fig_dir = argv[++i];
        } else if (strcmp(o, "--semi") == 0) {
            semi_only = true;
        } else {
            usage();
        }
    }
    uint64_t keys[MAX_LIST];
    unsigned fs[MAX_LIST], bs[MAX_LIST];
    bool semi[MAX_LIST];
    size_t nkeys = parse_keys(keys_arg ? keys_arg : quick ? QUICK_KEYS : DEFAULT_KEYS, keys);
    size_t nshapes = parse_shapes(shapes_arg ? shapes_arg
                                  : quick    ? QUICK_SHAPES
                                             : DEFAULT_SHAPES,
                                  fs, bs, semi);
    if (nkeys == 0 || nshapes == 0)
        usage();
    seeds sd = make_seeds(seed);
    double start = bench_now();

    if (fig_dir) {
        if (mkdir(fig_dir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "cf-bench-speed: %s: %s\n", fig_dir, strerror(errno));
            return 2;
        }
        figure_fpr(fig_dir, quick, &sd);
        figure_load(fig_dir, quick, &sd);
        fprintf(stderr, "figures data written to %s in %.0f s\n", fig_dir, bench_now() - start);
        return errors ? 1 : 0;
    }

    if (csv_dir) {
        if (mkdir(csv_dir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "cf-bench-speed: %s: %s\n", csv_dir, strerror(errno));
            return 2;
        }
        csv_speed = open_csv(csv_dir, "speed.csv",
                             "keys,fingerprint_bits,bucket_size,bytes,operation,ns_per_key,mops,"
                             "ratio,ratio_to");
        csv_fpr = open_csv(csv_dir, "fpr.csv",
                           "keys,fingerprint_bits,bucket_size,filter,bits_per_key,queries,"
                           "false_positives,fpr_measured,fpr_expected,fpr_bound");
    }

    print_header(argc, argv, &sd, queries);
    if (semi_only) {
        for (size_t k = 0; k < nkeys; k++)
            compare_semi(keys[k], queries, &sd);
        printf("Run time: %.1f s.%s\n", bench_now() - start,
               errors ? " ERRORS above: exit status 1." : "");
        return errors ? 1 : 0;
    }
    result target = {0}, semi13 = {0};
    for (size_t s = 0; s < nshapes; s++) {
        for (size_t k = 0; k < nkeys; k++) {
            char nb[32];
            printf("## f = %u, b = %u%s, %s keys\n\n", fs[s], bs[s],
                   semi[s] ? " (semi-sorted)" : "", bench_grouped(keys[k], nb, sizeof nb));
            fflush(stdout);
            result r = run_config(keys[k], fs[s], bs[s], semi[s], queries, &sd);
            print_result(&r);
            if (fs[s] == 12 && bs[s] == 4 && !semi[s] && r.n >= target.n)
                target = r;
            if (fs[s] == 13 && semi[s] && r.n >= semi13.n)
                semi13 = r;
        }
    }
    if (target.n)
        print_targets(&target);
    if (target.n && semi13.n == target.n)
        compare_semi(target.n, queries, &sd);
    if (csv_speed)
        fclose(csv_speed);
    if (csv_fpr)
        fclose(csv_fpr);
    printf("Run time: %.1f s.%s\n", bench_now() - start,
           errors ? " ERRORS above: exit status 1." : "");
    return errors ? 1 : 0;
}
