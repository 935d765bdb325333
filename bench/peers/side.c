/*
 * side.c - this library beside the paper authors' filter and fastfilter_cpp's, in one
 * process, on the same keys, with the machine's limit measured in the same run: what
 * issue 34's targets are stated against. bench/peers/run.sh builds it.
 *
 * Shape 12/4 for all three. Ours: a fixed filter of capacity N (95 % load), looked up by
 * precomputed hash (cf_contains_hash), by 8-byte key (cf_contains), deleted by hash; and
 * the same made with CF_FAST_HASH (hash id 3) and filled with the same keys, looked up by
 * 8-byte key. The peers hash the 8-byte key themselves (multiply-shift hashes, about what
 * a precomputed hash costs). The limit: two random 8-byte reads per key at positions drawn from a
 * precomputed hash, in an array the size of our table, allocated as the library allocates
 * tables (huge pages asked for). Every filter is filled once (fill times: one pass each);
 * then ROUNDS interleaved rounds of every lookup measurement, Q queries each from a new
 * slice of the keys, and the median of each is reported with its range; deletes last,
 * interleaved the same way (5 rounds at most). Times are thread CPU time, ns per
 * operation; pin the process (taskset) and keep the machine otherwise idle.
 *
 * Usage: side [N [Q [ROUNDS]]]   (default 50000000 2000000 9)
 */
#define _GNU_SOURCE /* madvise, MADV_HUGEPAGE */
#include "../common.h"
#include "peer.h"

#include <sys/mman.h>

#define MAX_ROUNDS  31
#define MAX_DELETES 5 /* rounds of deletes: each removes Q keys */
#define HUGE_PAGE   ((size_t)2 << 20)
#define KEY_SEED    UINT64_C(0x51DE)             /* the keys: bench_gen(KEY_SEED, i) */
#define ABSENT_SEED UINT64_C(0xAB5E)             /* keys never added */
#define LIMIT_MULT  UINT64_C(0x9e3779b97f4a7c15) /* the limit's second position */

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t mulhi(uint64_t a, uint64_t b)
{
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)a * b) >> 64);
}

/* The measurements, in the order printed. */
enum {
    LIMIT,
    OURS_ABSENT,
    OURS_PRESENT,
    OURS_KEYED,
    OURS_KEYED_FAST,
    AUTH_ABSENT,
    AUTH_PRESENT,
    FF_ABSENT,
    FF_PRESENT,
    OURS_DELETE,
    AUTH_DELETE,
    FF_DELETE,
    MEASURES
};
static const char *const measure_names[MEASURES] = {
    "limit: 2 reads per key",    "ours, absent (hash)",      "ours, present (hash)",
    "ours, absent (8-byte key)", "ours, absent (fast hash)", "authors, absent",
    "authors, present",          "fastfilter, absent",       "fastfilter, present",
    "ours, delete (hash)",       "authors, delete",          "fastfilter, delete"};

static void print_thp(void)
{
    char line[128] = "unknown";
    FILE *in = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (in) {
        if (!fgets(line, sizeof line, in))
            snprintf(line, sizeof line, "unknown\n");
        fclose(in);
    }
    printf("transparent huge pages: %s", line);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 50000000;
    size_t q = argc > 2 ? strtoull(argv[2], NULL, 10) : 2000000;
    int rounds = argc > 3 ? atoi(argv[3]) : 9;
    if (n < 2 || q < 1 || q * MAX_DELETES > n || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: side [N [Q [ROUNDS]]] with Q * %d <= N, 1 <= ROUNDS <= %d\n",
                MAX_DELETES, MAX_ROUNDS);
        return 2;
    }
    size_t absent_n = q * (size_t)rounds;
    uint64_t *key = bench_xmalloc(n * 8), *h = bench_xmalloc(n * 8);
    uint64_t *absent = bench_xmalloc(absent_n * 8), *ha = bench_xmalloc(absent_n * 8);
    cf_config c = {.capacity = n, .fingerprint_bits = 12, .bucket_size = 4, .expansion = 0};
    cf_filter *f, *g;
    bench_check(cf_new(&c, &f), "cf_new");
    c.flags = CF_FAST_HASH;
    bench_check(cf_new(&c, &g), "cf_new");
    for (size_t i = 0; i < n; i++) {
        key[i] = bench_gen(KEY_SEED, i);
        h[i] = cf_hash(f, &key[i], 8);
    }
    for (size_t i = 0; i < absent_n; i++) {
        absent[i] = bench_gen(ABSENT_SEED, i);
        ha[i] = cf_hash(f, &absent[i], 8);
    }
    cf_stats st;
    cf_get_stats(f, &st);
    size_t words = st.bytes / 8;
    uint64_t *limit = bench_xmalloc(words * 8);
    uintptr_t lo = ((uintptr_t)limit + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)limit + words * 8) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    for (size_t i = 0; i < words; i++)
        limit[i] = i;

    const peer *auth = &peer_authors, *ff = &peer_fastfilter;
    void *fa = auth->make(n), *fb = ff->make(n);
    size_t fails[3] = {0, 0, 0};
    double fill[3], t0 = cpu_ns();
    for (size_t i = 0; i < n; i++)
        fails[0] += cf_add_hash(f, h[i]) != CF_OK;
    fill[0] = (cpu_ns() - t0) / (double)n;
    size_t fast_fails = 0; /* (not timed: the same fill, another hash) */
    for (size_t i = 0; i < n; i++)
        fast_fails += cf_add(g, &key[i], 8) != CF_OK;
    t0 = cpu_ns();
    for (size_t i = 0; i < n; i++)
        fails[1] += !auth->add(fa, key[i]);
    fill[1] = (cpu_ns() - t0) / (double)n;
    t0 = cpu_ns();
    for (size_t i = 0; i < n; i++)
        fails[2] += !ff->add(fb, key[i]);
    fill[2] = (cpu_ns() - t0) / (double)n;
    cf_get_stats(f, &st);

    static double ns[MEASURES][MAX_ROUNDS];
    uint64_t sink = 0;
#define TIME(m, r, count, body)                                                                    \
    do {                                                                                           \
        double start = cpu_ns();                                                                   \
        for (size_t i = 0; i < (count); i++)                                                       \
            body;                                                                                  \
        ns[m][r] = (cpu_ns() - start) / (double)(count);                                           \
    } while (0)
    for (int r = 0; r < rounds; r++) {
        size_t a = (size_t)r * q, p = ((size_t)r * q * 7) % (n - q + 1);
        TIME(LIMIT, r, q,
             sink += limit[mulhi(ha[a + i], words)] + limit[mulhi(ha[a + i] * LIMIT_MULT, words)]);
        TIME(OURS_ABSENT, r, q, sink += cf_contains_hash(f, ha[a + i]));
        TIME(AUTH_ABSENT, r, q, sink += (uint64_t)auth->contains(fa, absent[a + i]));
        TIME(FF_ABSENT, r, q, sink += (uint64_t)ff->contains(fb, absent[a + i]));
        TIME(OURS_PRESENT, r, q, sink += cf_contains_hash(f, h[p + i]));
        TIME(AUTH_PRESENT, r, q, sink += (uint64_t)auth->contains(fa, key[p + i]));
        TIME(FF_PRESENT, r, q, sink += (uint64_t)ff->contains(fb, key[p + i]));
        TIME(OURS_KEYED, r, q, sink += cf_contains(f, &absent[a + i], 8));
        TIME(OURS_KEYED_FAST, r, q, sink += cf_contains(g, &absent[a + i], 8));
    }
    int deletes = rounds < MAX_DELETES ? rounds : MAX_DELETES;
    for (int r = 0; r < deletes; r++) {
        size_t d = (size_t)r * q;
        TIME(OURS_DELETE, r, q, sink += cf_delete_hash(f, h[d + i]) == CF_OK);
        TIME(AUTH_DELETE, r, q, sink += (uint64_t)auth->del(fa, key[d + i]));
        TIME(FF_DELETE, r, q, sink += (uint64_t)ff->del(fb, key[d + i]));
    }
#undef TIME

    printf("bench/peers/side: N %zu, %d rounds of %zu queries (deletes: %d rounds), f 12, b 4\n", n,
           rounds, q, deletes);
    print_thp();
    printf("fill to capacity, ns per insert: ours %.1f (%.2f bits/key, load %.3f, %zu refused; "
           "with the fast hash %zu refused), authors %.1f (%.2f bits/key, %zu refused), "
           "fastfilter %.1f (%.2f bits/key, %zu refused)\n",
           fill[0], 8.0 * (double)st.bytes / (double)n, st.load_factor, fails[0], fast_fails,
           fill[1], 8.0 * (double)auth->bytes(fa) / (double)n, fails[1], fill[2],
           8.0 * (double)ff->bytes(fb) / (double)n, fails[2]);
    double lim = bench_median(ns[LIMIT], rounds);
    printf("%-28s %8s %17s %8s\n", "ns per operation", "median", "range", "x limit");
    for (int m = 0; m < MEASURES; m++) {
        int count = m >= OURS_DELETE ? deletes : rounds;
        double med = bench_median(ns[m], count);
        printf("%-28s %8.1f %7.1f - %7.1f %8.2f\n", measure_names[m], med, ns[m][0],
               ns[m][count - 1], med / lim);
    }
    printf("(fill, x limit: ours %.2f, authors %.2f, fastfilter %.2f)\n", fill[0] / lim,
           fill[1] / lim, fill[2] / lim);
    printf("checksum %" PRIu64 "\n", sink);
    cf_free(f);
    cf_free(g);
    return 0;
}
