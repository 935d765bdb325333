/*
 * segments.c - the figures of segmented tables (CF_SEGMENTED) against the any-size mapping
 * of format version 2, from which CF_SEGMENTED_MIN_BUCKETS was chosen
 * (docs/PERFORMANCE.md, "Segmented tables"):
 *
 *   cf-bench-segments sizes        memory of each mapping for capacities 1M to 200M
 *   cf-bench-segments loads N [R [K]]  load at the first failed insert, b = 2, 4, 8, a
 *                                  table sized for N keys, R seeds each (default 3), with
 *                                  an eviction budget of K (default: the library's)
 *   cf-bench-segments budget N     a fill of N keys, then N / 16 more (most refused), with
 *                                  eviction budgets of 500 and 1000
 *   cf-bench-segments fpr N        false-positive rate of N keys, N absent keys probed
 *   cf-bench-segments fill N [J]   sort and fill times of N keys (cf_sort_hashes,
 *                                  cf_build_hashes) with 1 and J threads (default 2), at
 *                                  fingerprint widths 8, 12, 13, 16 and 18
 *   cf-bench-segments merge N [J]  merge times of two filters made alike for N keys, of
 *                                  0.49 N each (at N the fullest segment may find no
 *                                  room: the merge then goes on with one thread), with
 *                                  1 and J threads (cf_merge_threads, default 2), at
 *                                  widths 8, 12, 13, 16 and 18
 *
 * Keys are random 64-bit hashes from a fixed seed; every filter has a fixed seed.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, in common.h */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The hashes' generator: splitmix64 from this seed. */
#define SEED UINT64_C(0x5e6)

static uint64_t *hashes_from(uint64_t seed, size_t n)
{
    uint64_t *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) {
        fprintf(stderr, "cf-bench-segments: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        h[i] = bench_mix64(seed + i * BENCH_GOLDEN);
    return h;
}

/* A fixed filter; kicks: its eviction budget (0: the default). */
static cf_filter *make_kicks(uint64_t capacity, unsigned f, unsigned b, unsigned flags,
                             uint64_t seed, unsigned kicks)
{
    cf_config c = {.capacity = capacity,
                   .fingerprint_bits = f,
                   .bucket_size = b,
                   .seed = seed,
                   .max_kicks = kicks,
                   .flags = flags | CF_FIXED_SEED};
    cf_filter *out = NULL;
    if (cf_new(&c, &out) != CF_OK) {
        fprintf(stderr, "cf-bench-segments: cf_new failed (capacity %llu)\n",
                (unsigned long long)capacity);
        exit(1);
    }
    return out;
}

static cf_filter *make(uint64_t capacity, unsigned f, unsigned b, unsigned flags, uint64_t seed)
{
    return make_kicks(capacity, f, b, flags, seed, 0);
}

static void sizes(void)
{
    static const double caps[] = {1e6, 2e6, 4e6, 8e6, 12e6, 16e6, 17e6, 32e6, 50e6, 100e6, 200e6};
    printf("%12s %12s %12s %9s %s\n", "capacity", "any-size", "segmented", "extra", "default");
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        cf_config c = {.capacity = (uint64_t)caps[i], .flags = CF_UNSEGMENTED};
        cf_mapping any, seg, dflt;
        cf_config_mapping(&c, &any);
        c.flags = CF_SEGMENTED;
        cf_config_mapping(&c, &seg);
        c.flags = 0;
        cf_config_mapping(&c, &dflt);
        printf("%12.0f %12llu %12llu %8.2f%% %s\n", caps[i], (unsigned long long)any.buckets,
               (unsigned long long)seg.buckets,
               100.0 * ((double)seg.buckets / (double)any.buckets - 1.0),
               dflt.segment_bits ? "segmented" : "any-size");
    }
}

/* The load of a fixed filter at its first failed insert (the first key it stashes). */
static double load_at_failure(uint64_t n, unsigned b, unsigned flags, uint64_t seed, unsigned kicks)
{
    cf_filter *f = make_kicks(n, 12, b, flags, seed, kicks);
    cf_stats s;
    for (uint64_t i = 0;; i++) {
        uint64_t h = bench_mix64(seed * 1000003u + i * BENCH_GOLDEN);
        cf_status st = cf_add_hash(f, h);
        cf_get_stats(f, &s);
        if (st != CF_OK || s.stashed > 0)
            break;
    }
    cf_free(f);
    return (double)(s.items - s.stashed) / (double)s.slots;
}

static void loads(uint64_t n, unsigned runs, unsigned kicks)
{
    static const unsigned bs[] = {2, 4, 8};
    printf("load at the first failed insert, f 12, a table sized for %llu keys, %u seeds, "
           "eviction budget %s\n",
           (unsigned long long)n, runs, kicks ? "given" : "the default");
    printf("%3s %10s %-40s %-40s\n", "b", "", "any-size", "segmented");
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) {
        printf("%3u %10s", bs[i], "");
        for (unsigned m = 0; m < 2; m++) {
            char line[64] = "";
            for (unsigned r = 0; r < runs; r++) {
                double l =
                    load_at_failure(n, bs[i], m ? CF_SEGMENTED : CF_UNSEGMENTED, r + 1, kicks);
                size_t used = strlen(line);
                snprintf(line + used, sizeof line - used, "%s%.4f", r ? " " : "", l);
            }
            printf(" %-40s", line);
            fflush(stdout);
        }
        printf("\n");
    }
}

/* What a segmented table's eviction budget costs: a fill of N keys into a table sized for
 * them, then N / 16 keys more (a full table, most of them refused in full segments), with
 * the any-size default budget and with the segmented one. */
static void budget(uint64_t n)
{
    static const unsigned budgets[] = {CF_DEFAULT_MAX_KICKS, CF_DEFAULT_MAX_KICKS_SEGMENTED};
    uint64_t more = n / 16;
    uint64_t *h = hashes_from(SEED, n + more);
    printf("a segmented table, f 12 b 4, %llu keys, then %llu more\n", (unsigned long long)n,
           (unsigned long long)more);
    for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
        cf_filter *f = make_kicks(n, 12, 4, CF_SEGMENTED, 9, budgets[i]);
        double t0 = bench_now();
        size_t filled = cf_add_many(f, h, n, 0, NULL);
        double t1 = bench_now();
        size_t added = cf_add_many(f, h + n, more, 0, NULL);
        double t2 = bench_now();
        cf_stats s;
        cf_get_stats(f, &s);
        printf("budget %4u: fill %.2f s (%zu added); then %.2f s, %.2f us a key (%zu added, "
               "load %.4f)\n",
               budgets[i], t1 - t0, filled, t2 - t1, 1e6 * (t2 - t1) / (double)more, added,
               s.load_factor);
        cf_free(f);
    }
    free(h);
}

static void fpr(uint64_t n)
{
    uint64_t *h = hashes_from(SEED, n), *probe = hashes_from(SEED + 1, n);
    bool *out = malloc(n * sizeof *out);
    printf("false-positive rate, f 12 b 4, %llu keys, %llu absent keys probed\n",
           (unsigned long long)n, (unsigned long long)n);
    for (unsigned m = 0; m < 2; m++) {
        cf_filter *f = make(n, 12, 4, m ? CF_SEGMENTED : CF_UNSEGMENTED, 9);
        cf_add_many(f, h, n, 0, NULL);
        cf_contains_many(f, probe, n, out);
        uint64_t hits = 0;
        for (uint64_t i = 0; i < n; i++)
            hits += out[i];
        cf_stats s;
        cf_get_stats(f, &s);
        printf("%-10s load %.4f rate %.6f%% (expected %.6f%%)\n", m ? "segmented" : "any-size",
               s.load_factor, 100.0 * (double)hits / (double)n, 100.0 * s.fpr);
        cf_free(f);
    }
    free(out);
    free(h);
    free(probe);
}

static void fill(uint64_t n, unsigned jobs)
{
    static const unsigned widths[] = {8, 12, 13, 16, 18};
    uint64_t *h = hashes_from(SEED, n), *work = malloc(n * sizeof *work);
    printf("%llu keys, default mapping: sort and fill seconds, 1 thread / %u threads\n",
           (unsigned long long)n, jobs);
    printf("%5s %9s %17s %17s %7s %7s\n", "width", "segments", "sort", "fill", "sort x", "fill x");
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        double t[2][2];
        unsigned segments = 0;
        for (unsigned k = 0; k < 2; k++) {
            unsigned threads = k ? jobs : 1u;
            memcpy(work, h, n * sizeof *h);
            size_t d = 0;
            double t0 = bench_now();
            cf_sort_hashes(work, n, widths[w], threads, &d);
            double t1 = bench_now();
            cf_filter *f = make(d, widths[w], 4, 0, 5);
            cf_build_report r;
            double t2 = bench_now();
            cf_build_hashes(f, work, d, threads, &r);
            double t3 = bench_now();
            cf_mapping m;
            cf_get_mapping(f, &m);
            segments = m.segment_bits ? (unsigned)(m.buckets >> m.segment_bits) : 0u;
            t[k][0] = t1 - t0;
            t[k][1] = t3 - t2;
            cf_free(f);
        }
        printf("%5u %9u %8.2f / %6.2f %8.2f / %6.2f %6.2fx %6.2fx\n", widths[w], segments, t[0][0],
               t[1][0], t[0][1], t[1][1], t[0][0] / t[1][0], t[0][1] / t[1][1]);
        fflush(stdout);
    }
    free(work);
    free(h);
}

/* A filter of capacity n, width f, holding hashes h[0 .. k) (sorted into work). */
static cf_filter *built(uint64_t n, unsigned f, const uint64_t *h, size_t k, uint64_t *work)
{
    memcpy(work, h, k * sizeof *h);
    size_t d = 0;
    cf_sort_hashes(work, k, f, 0, &d);
    cf_filter *out = make(n, f, 4, 0, 5);
    cf_build_report r;
    cf_build_hashes(out, work, d, 0, &r);
    return out;
}

static void merge(uint64_t n, unsigned jobs)
{
    static const unsigned widths[] = {8, 12, 13, 16, 18};
    uint64_t *h = hashes_from(SEED, n), *work = malloc(n * sizeof *work);
    size_t half = (size_t)(n / 100 * 49), all = 2 * half;
    printf("%zu keys in two filters made alike for %llu, default mapping: merge seconds, "
           "median of 3 runs (1 thread, %u threads alternating)\n",
           all, (unsigned long long)n, jobs);
    printf("%5s %9s %8s %8s %7s\n", "width", "segments", "1", "threads", "x");
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        cf_filter *b = built(n, widths[w], h + half, all - half, work);
        double t[2][3];
        for (unsigned run = 0; run < 3; run++)
            for (unsigned k = 0; k < 2; k++) {
                cf_filter *dst = built(n, widths[w], h, half, work); /* a's twin */
                double t0 = bench_now();
                cf_status st = cf_merge_threads(dst, b, k ? jobs : 1u, NULL);
                t[k][run] = bench_now() - t0;
                if (st != CF_OK)
                    fprintf(stderr, "cf-bench-segments: merge: %s\n", cf_strerror(st));
                cf_free(dst);
            }
        cf_mapping m;
        cf_get_mapping(b, &m);
        double one = bench_median(t[0], 3), many = bench_median(t[1], 3);
        printf("%5u %9llu %8.2f %8.2f %6.2fx\n", widths[w],
               (unsigned long long)(m.segment_bits ? m.buckets >> m.segment_bits : 0), one, many,
               one / many);
        fflush(stdout);
        cf_free(b);
    }
    free(work);
    free(h);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "sizes";
    uint64_t n = argc > 2 ? (uint64_t)strtod(argv[2], NULL) : 0;
    unsigned extra = argc > 3 ? (unsigned)atoi(argv[3]) : 0;
    unsigned kicks = argc > 4 ? (unsigned)atoi(argv[4]) : 0;
    if (strcmp(what, "sizes") == 0)
        sizes();
    else if (strcmp(what, "loads") == 0 && n)
        loads(n, extra ? extra : 3u, kicks);
    else if (strcmp(what, "budget") == 0 && n)
        budget(n);
    else if (strcmp(what, "fpr") == 0 && n)
        fpr(n);
    else if (strcmp(what, "fill") == 0 && n)
        fill(n, extra ? extra : 2u);
    else if (strcmp(what, "merge") == 0 && n)
        merge(n, extra ? extra : 2u);
    else {
        fprintf(
            stderr,
            "usage: cf-bench-segments sizes | loads N [SEEDS [KICKS]] | budget N | fpr N | fill N "
            "[THREADS] | merge N [THREADS]\n");
        return 2;
    }
    return 0;
}
