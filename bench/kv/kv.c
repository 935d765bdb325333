/*
 * kv.c - the cuckoo-kv benchmark (cf-bench-kv; `make bench` runs it): put and get
 * throughput, index bytes per key and load, the time to reopen a store (the index rebuilt
 * from the log), overwrites, deletes and kv_compact, beside the bare system calls a store
 * is made of (pwrite of a record, pread of a random record) measured in the same run and
 * the same directory, so that the ratios hold on a noisy machine.
 *
 * Per N (default 1M, then 10M keys): a baseline file written and read back; an empty store
 * filled with N distinct keys (kv_options.buckets = 0: the index starts small and doubles
 * as it grows); N random gets of present keys, every value checked, and N gets of absent
 * keys; kv_close, then kv_open timed twice, once after the log is dropped from the page
 * cache and once warm; N/10 overwrites, N/10 deletes; kv_compact; the compacted store
 * reopened and a sample of keys checked. The store is removed before the next N.
 *
 * Usage: cf-bench-kv [--keys N] [--quick] [--seed S] [--dir DIR]
 * N takes a k, M or G suffix (10M = 10000000). Exit status: 0; 1 if the store gave a wrong
 * answer or an operation failed that must not (an ERROR line says which); 2 for a usage or
 * setup error, not enough disk space for a size included. Timings never fail it.
 */
#define _XOPEN_SOURCE 700 /* pread, pwrite, mkdtemp, nftw, statvfs, posix_fadvise */

#include "common.h"  /* bench/common.h: the benchmarks' clock, keys and report pieces */
#include "kvstore.h" /* the example store (examples/logstore), which knows nothing of this */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define QUICK_KEYS UINT64_C(100000) /* --quick: a smoke run of a few seconds */
#define MIN_KEYS   UINT64_C(10)     /* N/10 overwrites and deletes must be at least one */

#define KEY_LEN          16 /* 16 hex digits: all 64 bits of a distinct counter-derived value */
#define VALUE_MIN        16 /* values of 16..32 bytes, as the issue asks */
#define VALUE_MAX        32
/* A record is a 16-byte header (its own check included), the key, the value and an 8-byte
 * checksum; the log starts with a 32-byte header (README, "The log"). */
#define RECORD_HEADER    16
#define RECORD_OVERHEAD  (RECORD_HEADER + 8)
#define LOG_HEADER       32
/* The baseline writes and reads buffers the size of a mean put record (64 bytes). */
#define BASELINE_RECORD  (RECORD_OVERHEAD + KEY_LEN + (VALUE_MIN + VALUE_MAX) / 2)
/* A system call costs the same at any file size: more baseline calls would only add time. */
#define BASELINE_MAX_OPS UINT64_C(1000000)
#define CHANGE_DIVISOR   10               /* overwrites and deletes: N/10 each */
#define VERIFY_SAMPLE    UINT64_C(100000) /* keys checked after compact and reopen (untimed) */
/* Free space asked of the directory beyond the files' own bytes: file-system blocks and
 * metadata, and room for whatever else writes there meanwhile. */
#define DISK_MARGIN      1.25

static const uint64_t DEFAULT_SIZES[] = {1000000, 10000000}; /* the two sizes */

/* ------------------------------------------------------------------------------------ */
/* Keys and values                                                                      */
/* ------------------------------------------------------------------------------------ */

/* Every stream derives from --seed. Key i of a run is bench_gen(key, i): present keys are
 * 0 .. N-1 and absent ones N .. 2N-1, so an absent key can never equal a present one. */
typedef struct seeds {
    uint64_t base, index, key, value[2], pick, perm, verify;
} seeds;

static seeds make_seeds(uint64_t base)
{
    seeds s = {.base = base,
               .index = bench_gen(base, 1),
               .key = bench_gen(base, 2),
               .value = {bench_gen(base, 3), bench_gen(base, 4)},
               .pick = bench_gen(base, 5),
               .perm = bench_gen(base, 6),
               .verify = bench_gen(base, 7)};
    return s;
}

static inline void make_key(uint64_t key_seed, uint64_t i, char key[KEY_LEN])
{
    static const char hex[] = "0123456789abcdef";
    uint64_t v = bench_gen(key_seed, i);
    for (int d = KEY_LEN - 1; d >= 0; d--, v >>= 4)
        key[d] = hex[v & 15];
}

/* The value of key i in version `value_seed` (value[0] put by the fill, value[1] by the
 * overwrites) into out; returns its length, VALUE_MIN .. VALUE_MAX. */
static inline size_t make_value(uint64_t value_seed, uint64_t i, unsigned char out[VALUE_MAX])
{
    uint64_t h = bench_gen(value_seed, i);
    for (size_t w = 0; w < VALUE_MAX / 8; w++) {
        uint64_t x = bench_gen(h, w); /* word w of stream h */
        memcpy(out + 8 * w, &x, sizeof x);
    }
    return VALUE_MIN + (size_t)(h % (VALUE_MAX - VALUE_MIN + 1));
}

/* A random order of 0 .. N-1 without a table: j -> (a j + b) mod N with a coprime to N.
 * Overwrites take keys perm(0 .. N/10-1), deletes perm(N/10 .. 2N/10-1); the inverse tells
 * the checks afterwards what became of any key. N < 2^32 keeps a j within 64 bits. */
typedef struct perm {
    uint64_t n, a, b, a_inv;
} perm;

static uint64_t gcd(uint64_t x, uint64_t y)
{
    while (y) {
        uint64_t t = x % y;
        x = y;
        y = t;
    }
    return x;
}

/* The inverse of a modulo n (a coprime to n), by the extended Euclidean algorithm. */
static uint64_t mod_inverse(uint64_t a, uint64_t n)
{
    int64_t t = 0, next_t = 1, r = (int64_t)n, next_r = (int64_t)a;
    while (next_r != 0) {
        int64_t q = r / next_r, tmp = t - q * next_t;
        t = next_t;
        next_t = tmp;
        tmp = r - q * next_r;
        r = next_r;
        next_r = tmp;
    }
    return (uint64_t)(t < 0 ? t + (int64_t)n : t);
}

static perm make_perm(uint64_t seed, uint64_t n)
{
    perm p = {n, bench_gen(seed, 0) % n, bench_gen(seed, 1) % n, 0};
    while (p.a == 0 || gcd(p.a, n) != 1)
        p.a = (p.a + 1) % n;
    p.a_inv = mod_inverse(p.a, n);
    return p;
}

static inline uint64_t perm_at(const perm *p, uint64_t j)
{
    return (p->a * j + p->b) % p->n;
}

static inline uint64_t perm_index(const perm *p, uint64_t i)
{
    return (i + p->n - p->b) % p->n * p->a_inv % p->n;
}

/* ------------------------------------------------------------------------------------ */
/* Errors and files                                                                     */
/* ------------------------------------------------------------------------------------ */

static int errors;              /* ERROR lines printed: the exit status is 1 if any */
static char work_dir[PATH_MAX]; /* this run's directory, removed at the end */

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    if (remove(path) != 0)
        fprintf(stderr, "cf-bench-kv: cannot remove %s: %s\n", path, strerror(errno));
    return 0; /* go on: remove as much as possible */
}

/* Remove a directory this run made, and everything in it. */
static void remove_tree(const char *dir)
{
    /* Depth first, so that a directory is empty by the time it is removed; at most 16
     * descriptors open (the tree is two levels deep). */
    (void)nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void error_count(uint64_t n, const char *what, uint64_t got, uint64_t want)
{
    printf("\nERROR: N=%" PRIu64 ": %s: %" PRIu64 ", expected %" PRIu64 "\n", n, what, got, want);
    fflush(stdout);
    errors++;
}

/* An operation that must succeed did not: the numbers after it would mean nothing, so the
 * run ends here (status 1), its directory removed. */
static void fatal(uint64_t n, const char *what, kv_status st, const char *detail)
{
    printf("\nERROR: N=%" PRIu64 ": %s: %s (%s)\n", n, what, kv_strerror(st), detail);
    fflush(stdout);
    remove_tree(work_dir);
    exit(1);
}

static inline void check_kv(kv_status st, const kv_store *s, uint64_t n, const char *what)
{
    if (st != KV_OK)
        fatal(n, what, st, kv_error(s));
}

static void join_path(char out[PATH_MAX], const char *dir, const char *name)
{
    int len = snprintf(out, PATH_MAX, "%s/%s", dir, name);
    if (len < 0 || len >= PATH_MAX) {
        fprintf(stderr, "cf-bench-kv: path too long: %s/%s\n", dir, name);
        remove_tree(work_dir);
        exit(2);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Checking answers                                                                     */
/* ------------------------------------------------------------------------------------ */

/* kv_get's answers that were not the expected one, by kind, and the first of them. */
typedef struct tally {
    uint64_t wrong;   /* a value other than the one put */
    uint64_t missing; /* KV_NOT_FOUND for a key that has a value */
    uint64_t found;   /* a value for a key that has none */
    uint64_t failed;  /* any other status */
    char first[KV_ERROR_MAX + 64];
} tally;

/* One kv_get answer (st, got, got_len) against the expected value (want NULL: none). */
static inline void tally_get(tally *t, const kv_store *s, const char *key, kv_status st, void *got,
                             size_t got_len, const unsigned char *want, size_t want_len)
{
    const char *what = NULL;
    if (st == KV_OK) {
        if (!want) {
            t->found++;
            what = "a value for a key that has none";
        } else if (got_len != want_len || memcmp(got, want, want_len) != 0) {
            t->wrong++;
            what = "a wrong value";
        }
        free(got);
    } else if (st == KV_NOT_FOUND) {
        if (want) {
            t->missing++;
            what = "KV_NOT_FOUND for a key that has a value";
        }
    } else {
        t->failed++;
        what = kv_error(s);
    }
    if (what && !t->first[0])
        snprintf(t->first, sizeof t->first, "key %.*s: %s", KEY_LEN, key, what);
}

static void report_tally(uint64_t n, const char *phase, const tally *t)
{
    uint64_t bad = t->wrong + t->missing + t->found + t->failed;
    if (!bad)
        return;
    printf("\nERROR: N=%" PRIu64 ": %s: %" PRIu64 " wrong answers (%" PRIu64
           " wrong values, %" PRIu64 " present keys not found, %" PRIu64
           " absent keys found, %" PRIu64 " failed calls); first: %s\n",
           n, phase, bad, t->wrong, t->missing, t->found, t->failed, t->first);
    fflush(stdout);
    errors++;
}

/* The store's counts against what the run put into it. */
static kv_stats expect_stats(const kv_store *s, uint64_t n, const char *when, uint64_t records,
                             uint64_t live)
{
    kv_stats st;
    kv_get_stats(s, &st);
    char what[128];
    if (st.records != records) {
        snprintf(what, sizeof what, "kv_stats.records %s", when);
        error_count(n, what, st.records, records);
    }
    if (st.live_keys != live) {
        snprintf(what, sizeof what, "kv_stats.live_keys %s", when);
        error_count(n, what, st.live_keys, live);
    }
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* Timed loops. Each returns seconds. Keys (and values, where a call takes or returns   */
/* one) are generated inside every timed loop, the baselines' included, so that         */
/* generation costs the same everywhere.                                                */
/* ------------------------------------------------------------------------------------ */

/* The baseline's writes: ops buffers of BASELINE_RECORD bytes (a key and a value in each)
 * appended with pwrite at successive offsets, as a store appends records. */
static double time_pwrite(int fd, const seeds *sd, uint64_t ops)
{
    unsigned char rec[BASELINE_RECORD] = {0};
    double t0 = bench_now();
    for (uint64_t i = 0; i < ops; i++) {
        make_key(sd->key, i, (char *)rec + RECORD_HEADER);
        (void)make_value(sd->value[0], i, rec + RECORD_HEADER + KEY_LEN);
        off_t at = (off_t)(i * BASELINE_RECORD);
        if (pwrite(fd, rec, sizeof rec, at) != (ssize_t)sizeof rec) {
            fprintf(stderr, "cf-bench-kv: baseline pwrite: %s\n", strerror(errno));
            remove_tree(work_dir);
            exit(2);
        }
    }
    return bench_now() - t0;
}

/* The baseline's reads: ops preads of one record at random of the ops that time_pwrite
 * wrote; the key generated as a get generates it, and compared so that the work is kept. */
static double time_pread(int fd, const seeds *sd, uint64_t ops)
{
    unsigned char rec[BASELINE_RECORD];
    char key[KEY_LEN];
    uint64_t mismatches = 0;
    double t0 = bench_now();
    for (uint64_t j = 0; j < ops; j++) {
        uint64_t i = bench_reduce32(bench_gen(sd->pick, j) >> 32, ops);
        make_key(sd->key, i, key);
        off_t at = (off_t)(i * BASELINE_RECORD);
        if (pread(fd, rec, sizeof rec, at) != (ssize_t)sizeof rec) {
            fprintf(stderr, "cf-bench-kv: baseline pread: %s\n", strerror(errno));
            remove_tree(work_dir);
            exit(2);
        }
        mismatches += memcmp(rec + RECORD_HEADER, key, KEY_LEN) != 0;
    }
    double secs = bench_now() - t0;
    if (mismatches) {
        fprintf(stderr, "cf-bench-kv: the baseline file read back wrong (%" PRIu64 " records)\n",
                mismatches);
        remove_tree(work_dir);
        exit(2);
    }
    return secs;
}

/* The fill: keys 0 .. n-1, each new, with their first values. */
static double time_fill(kv_store *s, const seeds *sd, uint64_t n)
{
    char key[KEY_LEN];
    unsigned char val[VALUE_MAX];
    double t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        make_key(sd->key, i, key);
        size_t vlen = make_value(sd->value[0], i, val);
        check_kv(kv_put(s, key, KEY_LEN, val, vlen), s, n, "kv_put of a new key");
    }
    return bench_now() - t0;
}

/* count gets of present keys drawn at random, each value compared with the one put. */
static double time_get_present(kv_store *s, const seeds *sd, uint64_t n, uint64_t count, tally *t)
{
    char key[KEY_LEN];
    unsigned char want[VALUE_MAX];
    double t0 = bench_now();
    for (uint64_t j = 0; j < count; j++) {
        uint64_t i = bench_reduce32(bench_gen(sd->pick, j) >> 32, n);
        make_key(sd->key, i, key);
        size_t want_len = make_value(sd->value[0], i, want);
        void *got = NULL;
        size_t got_len = 0;
        kv_status st = kv_get(s, key, KEY_LEN, &got, &got_len);
        tally_get(t, s, key, st, got, got_len, want, want_len);
    }
    return bench_now() - t0;
}

/* count gets of absent keys (n .. n + count - 1), each of which must be KV_NOT_FOUND. */
static double time_get_absent(kv_store *s, const seeds *sd, uint64_t n, uint64_t count, tally *t)
{
    char key[KEY_LEN];
    double t0 = bench_now();
    for (uint64_t j = 0; j < count; j++) {
        make_key(sd->key, n + j, key);
        void *got = NULL;
        size_t got_len = 0;
        kv_status st = kv_get(s, key, KEY_LEN, &got, &got_len);
        tally_get(t, s, key, st, got, got_len, NULL, 0);
    }
    return bench_now() - t0;
}

/* Overwrites: keys perm(0 .. m-1) get their second values. */
static double time_overwrite(kv_store *s, const seeds *sd, const perm *p, uint64_t m)
{
    char key[KEY_LEN];
    unsigned char val[VALUE_MAX];
    double t0 = bench_now();
    for (uint64_t j = 0; j < m; j++) {
        uint64_t i = perm_at(p, j);
        make_key(sd->key, i, key);
        size_t vlen = make_value(sd->value[1], i, val);
        check_kv(kv_put(s, key, KEY_LEN, val, vlen), s, p->n, "kv_put of an existing key");
    }
    return bench_now() - t0;
}

/* Deletes: keys perm(m .. 2m-1), each present, so each must be KV_OK. */
static double time_delete(kv_store *s, const seeds *sd, const perm *p, uint64_t m)
{
    char key[KEY_LEN];
    double t0 = bench_now();
    for (uint64_t j = m; j < 2 * m; j++) {
        make_key(sd->key, perm_at(p, j), key);
        check_kv(kv_del(s, key, KEY_LEN), s, p->n, "kv_del of a present key");
    }
    return bench_now() - t0;
}

/* Untimed: a sample of keys at random against what the run made of each (first value,
 * overwritten, deleted), and as many absent keys. */
static void verify_sample(kv_store *s, const seeds *sd, const perm *p, uint64_t m, tally *t)
{
    uint64_t count = p->n < VERIFY_SAMPLE ? p->n : VERIFY_SAMPLE;
    char key[KEY_LEN];
    unsigned char want[VALUE_MAX];
    for (uint64_t j = 0; j < count; j++) {
        uint64_t i = bench_reduce32(bench_gen(sd->verify, j) >> 32, p->n), at = perm_index(p, i);
        bool deleted = at >= m && at < 2 * m;
        size_t want_len = make_value(sd->value[at < m], i, want);
        make_key(sd->key, i, key);
        void *got = NULL;
        size_t got_len = 0;
        kv_status st = kv_get(s, key, KEY_LEN, &got, &got_len);
        tally_get(t, s, key, st, got, got_len, deleted ? NULL : want, want_len);
        make_key(sd->key, p->n + j, key);
        got = NULL;
        st = kv_get(s, key, KEY_LEN, &got, &got_len);
        tally_get(t, s, key, st, got, got_len, NULL, 0);
    }
}

/* kv_open timed; o.create only for the fill's empty store. */
static kv_store *open_store(const char *dir, bool create, const seeds *sd, uint64_t n, double *secs)
{
    kv_options o = {.create = create, .seed = sd->index, .buckets = 0};
    char err[KV_ERROR_MAX] = "";
    kv_store *s = NULL;
    double t0 = bench_now();
    kv_status st = kv_open(dir, &o, &s, err);
    *secs = bench_now() - t0;
    if (st != KV_OK)
        fatal(n, "kv_open", st, err);
    return s;
}

static double close_store(kv_store *s, uint64_t n)
{
    double t0 = bench_now();
    kv_status st = kv_close(s);
    double secs = bench_now() - t0;
    if (st != KV_OK)
        fatal(n, "kv_close", st, "the final sync failed");
    return secs;
}

/* Drop the log's pages from this machine's page cache, so that the next kv_open reads it
 * from the disk (or from the host's cache on a VM: hence "cold-ish"). The log is clean
 * after kv_close's sync, and the kernel drops clean pages on POSIX_FADV_DONTNEED. */
static bool drop_from_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    bool done = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    close(fd);
    return done;
}

/* ------------------------------------------------------------------------------------ */
/* Output                                                                               */
/* ------------------------------------------------------------------------------------ */

static double mb(uint64_t bytes)
{
    return (double)bytes / 1e6;
}

/* One row of a size's table; base_ns > 0 adds the ratio to that baseline. */
static void row(const char *label, uint64_t ops, double secs, double base_ns, const char *base)
{
    char nb[32], rb[32];
    double ns = secs * 1e9 / (double)ops;
    uint64_t rate = secs > 0 ? (uint64_t)((double)ops / secs) : 0;
    printf("| %s | %s | %.3f | %.1f | %s |", label, bench_grouped(ops, nb, sizeof nb), secs, ns,
           bench_grouped(rate, rb, sizeof rb));
    if (base_ns > 0)
        printf(" %.2f x %s |\n", ns / base_ns, base);
    else
        printf(" - |\n");
    fflush(stdout);
}

static uint64_t free_bytes(const char *dir)
{
    struct statvfs v;
    if (statvfs(dir, &v) != 0)
        return 0;
    return (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
}

/* The most the files of a size hold at once, with DISK_MARGIN: the log after the fill,
 * the overwrites and the deletes (deletes counted as puts: an upper bound), and during
 * kv_compact the new log beside it. The baseline file is gone by then. */
static uint64_t bytes_needed(uint64_t n)
{
    uint64_t m = n / CHANGE_DIVISOR, rec = RECORD_OVERHEAD + KEY_LEN + VALUE_MAX;
    uint64_t log = LOG_HEADER + (n + 2 * m) * rec, compacted = LOG_HEADER + (n - m) * rec;
    return (uint64_t)((double)(log + compacted) * DISK_MARGIN);
}

static void print_header(int argc, char **argv, const seeds *sd)
{
    char cpu[256] = "unknown";
    bench_read_field("/proc/cpuinfo", "model name", cpu, sizeof cpu);

    bench_print_start("cuckoo-kv benchmark", argc, argv);
    printf("- library: cuckoofilter %s\n", cf_version());
    printf("- compiler: %s\n", bench_compiler());
#ifdef CF_BENCH_BUILD_FLAGS
    printf("- build flags: %s\n", CF_BENCH_BUILD_FLAGS);
#else
    printf("- build flags: not recorded by this build (CF_BENCH_BUILD_FLAGS undefined)");
#ifdef __OPTIMIZE__
    printf("; optimised\n");
#else
    printf("; NOT optimised: the numbers do not stand for a release build\n");
#endif
#endif
    printf("- CPU: %s (%ld online)\n", cpu, sysconf(_SC_NPROCESSORS_ONLN));
    printf("- directory: %s (%.1f GB free)\n", work_dir, (double)free_bytes(work_dir) / 1e9);
    printf("- seeds: --seed %" PRIu64 " gives index 0x%016" PRIx64 ", keys 0x%016" PRIx64
           ", picks 0x%016" PRIx64 "\n",
           sd->base, sd->index, sd->key, sd->pick);
    printf("- keys: %d bytes, the hex digits of splitmix64(seed + i * 2^64/phi), present i < N, "
           "absent i >= N; values %d..%d bytes of the same kind; generated inside every timed "
           "loop, the baselines' included\n",
           KEY_LEN, VALUE_MIN, VALUE_MAX);
    printf("- put: kv_put of N new keys into an empty store, kv_options.buckets = 0 (the index "
           "starts small and doubles as it grows), sync_each off; get: N kv_get of present keys "
           "drawn at random (each value compared with the one put), then N of absent keys\n");
    printf("- baseline: pwrite of a %d-byte buffer (a put record of mean size) at successive "
           "offsets of a file in the same directory, then pread of %d bytes at a random record "
           "of it; min(N, %" PRIu64 ") calls each. A ratio below 1: the store's call costs "
           "less than the bare system call (it may read through a memory map)\n",
           BASELINE_RECORD, BASELINE_RECORD, BASELINE_MAX_OPS);
    printf("- reopen: kv_close (its sync timed apart), then kv_open, which checks every record "
           "of the log and rebuilds the index: cold-ish after posix_fadvise(DONTNEED) drops the "
           "log from this machine's page cache (a VM's host may still hold it), then warm\n");
    printf("- then: N/%d overwrites and N/%d deletes of other keys, in random order; kv_compact; "
           "the compacted store reopened and min(N, %" PRIu64 ") present and as many absent "
           "keys checked (untimed)\n\n",
           CHANGE_DIVISOR, CHANGE_DIVISOR, VERIFY_SAMPLE);
    fflush(stdout);
}

/* ------------------------------------------------------------------------------------ */
/* One size                                                                             */
/* ------------------------------------------------------------------------------------ */

static void run_size(uint64_t n, const seeds *sd)
{
    char nb[32], store[PATH_MAX], log[PATH_MAX], baseline[PATH_MAX], name[64];
    snprintf(name, sizeof name, "store-%" PRIu64, n);
    join_path(store, work_dir, name);
    join_path(log, store, KV_LOG_NAME);
    join_path(baseline, work_dir, "baseline.dat");
    uint64_t m = n / CHANGE_DIVISOR;
    uint64_t base_ops = n < BASELINE_MAX_OPS ? n : BASELINE_MAX_OPS;

    printf("## %s keys\n\n", bench_grouped(n, nb, sizeof nb));
    printf("| step | ops | s | ns/op | ops/s | vs baseline |\n|---|---|---|---|---|---|\n");
    fflush(stdout);

    int fd = open(baseline, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        fprintf(stderr, "cf-bench-kv: %s: %s\n", baseline, strerror(errno));
        remove_tree(work_dir);
        exit(2);
    }
    double secs = time_pwrite(fd, sd, base_ops);
    double pwrite_ns = secs * 1e9 / (double)base_ops;
    row("baseline: pwrite of a record", base_ops, secs, 0, NULL);
    secs = time_pread(fd, sd, base_ops);
    double pread_ns = secs * 1e9 / (double)base_ops;
    row("baseline: pread of a random record", base_ops, secs, 0, NULL);
    close(fd);
    remove(baseline);

    /* The fill. */
    kv_store *s = open_store(store, true, sd, n, &secs);
    secs = time_fill(s, sd, n);
    kv_stats filled = expect_stats(s, n, "after the fill", n, n);
    char label[128];
    snprintf(label, sizeof label, "put, new key (%" PRIu64 " rehashes)", filled.rehashes);
    row(label, n, secs, pwrite_ns, "pwrite");

    /* Gets. */
    tally present = {0}, absent = {0};
    secs = time_get_present(s, sd, n, n, &present);
    kv_stats after_present;
    kv_get_stats(s, &after_present);
    row("get, present key", n, secs, pread_ns, "pread");
    secs = time_get_absent(s, sd, n, n, &absent);
    kv_stats after_absent;
    kv_get_stats(s, &after_absent);
    row("get, absent key", n, secs, pread_ns, "pread");
    report_tally(n, "gets of present keys", &present);
    report_tally(n, "gets of absent keys", &absent);

    /* Reopens. */
    double close_secs = close_store(s, n);
    bool dropped = drop_from_cache(log);
    s = open_store(store, false, sd, n, &secs);
    kv_stats reopened = expect_stats(s, n, "after reopening", n, n);
    if (reopened.truncated)
        error_count(n, "bytes cut off a log that was closed cleanly", reopened.truncated, 0);
    row(dropped ? "reopen, cold-ish (records)" : "reopen, page cache NOT dropped (records)", n,
        secs, 0, NULL);
    (void)close_store(s, n);
    s = open_store(store, false, sd, n, &secs);
    row("reopen, warm (records)", n, secs, 0, NULL);

    /* Changes, and compaction. */
    perm p = make_perm(sd->perm, n);
    secs = time_overwrite(s, sd, &p, m);
    (void)expect_stats(s, n, "after the overwrites", n + m, n);
    row("put, existing key", m, secs, pwrite_ns, "pwrite");
    secs = time_delete(s, sd, &p, m);
    kv_stats changed = expect_stats(s, n, "after the deletes", n + 2 * m, n - m);
    row("del", m, secs, pwrite_ns, "pwrite");
    double t0 = bench_now();
    check_kv(kv_compact(s), s, n, "kv_compact");
    secs = bench_now() - t0;
    kv_stats compacted = expect_stats(s, n, "after kv_compact", n - m, n - m);
    if (compacted.dead_bytes)
        error_count(n, "kv_stats.dead_bytes after kv_compact", compacted.dead_bytes, 0);
    row("kv_compact (live records)", n - m, secs, 0, NULL);
    (void)close_store(s, n);
    s = open_store(store, false, sd, n, &secs);
    (void)expect_stats(s, n, "after kv_compact and reopening", n - m, n - m);
    row("reopen after kv_compact (records)", n - m, secs, 0, NULL);
    tally sample = {0};
    verify_sample(s, sd, &p, m, &sample);
    report_tally(n, "gets after kv_compact and reopening", &sample);
    (void)close_store(s, n);
    remove_tree(store);

    printf("\n- index after the fill: %s slots, %.1f MB, %.2f bytes per key, load %.3f, %" PRIu64
           " rehashes\n",
           bench_grouped(filled.index_slots, nb, sizeof nb), mb(filled.index_bytes),
           filled.live_keys ? (double)filled.index_bytes / (double)filled.live_keys : 0.0,
           filled.index_load, filled.rehashes);
    printf("- index after reopening (sized from the log): %s slots, %.1f MB, %.2f bytes per "
           "key, load %.3f\n",
           bench_grouped(reopened.index_slots, nb, sizeof nb), mb(reopened.index_bytes),
           reopened.live_keys ? (double)reopened.index_bytes / (double)reopened.live_keys : 0.0,
           reopened.index_load);
    printf("- tag_misses (log reads for a matching tag of another key): fill %" PRIu64
           " (%.4f per put), present gets %" PRIu64 " (%.4f per get), absent gets %" PRIu64
           " (%.4f per get)\n",
           filled.tag_misses, (double)filled.tag_misses / (double)n,
           after_present.tag_misses - filled.tag_misses,
           (double)(after_present.tag_misses - filled.tag_misses) / (double)n,
           after_absent.tag_misses - after_present.tag_misses,
           (double)(after_absent.tag_misses - after_present.tag_misses) / (double)n);
    printf("- log: %.1f MB after the fill; kv_close after it (sync) %.3f s; %.1f MB after the "
           "changes (%.1f MB dead); %.1f MB after kv_compact\n\n",
           mb(filled.log_bytes), close_secs, mb(changed.log_bytes), mb(changed.dead_bytes),
           mb(compacted.log_bytes));
    fflush(stdout);
}

/* ------------------------------------------------------------------------------------ */
/* Options                                                                              */
/* ------------------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: cf-bench-kv [--keys N] [--quick] [--seed S] [--dir DIR]\n"
            "  --keys   one size, %" PRIu64 " .. 2^32-1 keys (default: 1M, then 10M)\n"
            "  --quick  a smoke run: %" PRIu64 " keys\n"
            "  --seed   the seed every stream derives from (default %" PRIu64 ")\n"
            "  --dir    where to make this run's directory, removed at the end\n"
            "           (default $TMPDIR, else /tmp)\n"
            "N takes k, M or G (10M = 10000000).\n",
            MIN_KEYS, QUICK_KEYS, BENCH_DEFAULT_SEED);
    exit(2);
}

int main(int argc, char **argv)
{
    uint64_t seed = BENCH_DEFAULT_SEED, keys = 0;
    const char *parent = NULL;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(o, "--quick") == 0) {
            quick = true;
        } else if (strcmp(o, "--keys") == 0 && has_value) {
            const char *e;
            keys = bench_parse_count(argv[++i], &e);
            /* Random keys are drawn by 32-bit multiply-shift: N < 2^32. Nothing may follow
             * the count (*e is the suffix's end, or the string's start on a malformed one). */
            if (*e != '\0' || keys < MIN_KEYS || keys > UINT32_MAX)
                usage();
        } else if (strcmp(o, "--seed") == 0 && has_value) {
            if (!bench_parse_seed(argv[++i], &seed))
                usage();
        } else if (strcmp(o, "--dir") == 0 && has_value) {
            parent = argv[++i];
        } else {
            usage();
        }
    }
    const uint64_t *sizes = DEFAULT_SIZES;
    size_t nsizes = sizeof DEFAULT_SIZES / sizeof DEFAULT_SIZES[0];
    if (keys || quick) {
        if (!keys)
            keys = QUICK_KEYS;
        sizes = &keys;
        nsizes = 1;
    }
    if (!parent) {
        parent = getenv("TMPDIR");
        if (!parent || !*parent)
            parent = "/tmp";
    }
    join_path(work_dir, parent, "cf-bench-kv.XXXXXX");
    if (!mkdtemp(work_dir)) {
        fprintf(stderr, "cf-bench-kv: cannot make a directory in %s: %s\n", parent,
                strerror(errno));
        return 2;
    }

    seeds sd = make_seeds(seed);
    double start = bench_now();
    print_header(argc, argv, &sd);
    int skipped = 0;
    for (size_t k = 0; k < nsizes; k++) {
        uint64_t need = bytes_needed(sizes[k]), have = free_bytes(work_dir);
        if (have < need) {
            char nb[32];
            printf("## %s keys: NOT RUN\n\nNot enough disk space in %s: this size needs about "
                   "%.2f GB, the file system has %.2f GB free. Use --dir on a larger one.\n\n",
                   bench_grouped(sizes[k], nb, sizeof nb), work_dir, (double)need / 1e9,
                   (double)have / 1e9);
            fflush(stdout);
            skipped++;
            continue;
        }
        run_size(sizes[k], &sd);
    }
    remove_tree(work_dir);
    printf("Run time: %.1f s.%s%s\n", bench_now() - start,
           errors ? " ERRORS above: exit status 1." : "",
           !errors && skipped ? " Sizes NOT RUN above: exit status 2." : "");
    return errors ? 1 : skipped ? 2 : 0;
}
