/*
 * figures.c - the figures in the README, measured in one run:
 *   1. load at the first CF_FULL (fixed size, f = 12, capacity 1M, median of 5 seeds);
 *   2. measured false-positive rate at full load against the bound, f = 8, 12, 16, b = 4;
 *   3. bytes for capacities that are not powers of two, against the formula and against
 *      a power-of-two table.
 * Speed is measured by speed.c (cf-bench-speed).
 * Usage: cf-bench-figures [QUERIES]   (absent keys per FPR figure; default 10M)
 */
#define _POSIX_C_SOURCE 199309L
#include "common.h"

#include <math.h>

#define FILL_CAPACITY UINT64_C(1000000)  /* the 1M-item tables */
#define FILL_SEEDS    5                  /* median of five, as the issue asks */
#define FPR_QUERIES   UINT64_C(10000000) /* >= 10M absent keys per width */

/* Add distinct random hashes until the first CF_FULL; returns the load then, and in
 * *first_stash the load when the tables first turned a key away to the stash. */
static double fill_to_full(cf_filter *f, uint64_t *stream, double *first_stash)
{
    cf_stats s;
    *first_stash = 0.0;
    while (cf_add_hash(f, bench_next(stream)) == CF_OK) {
        if (*first_stash == 0.0) {
            cf_get_stats(f, &s);
            if (s.stashed)
                *first_stash = (double)(s.items - 1) / (double)s.slots;
        }
    }
    cf_get_stats(f, &s);
    return s.load_factor;
}

static void first_full_loads(void)
{
    static const unsigned sizes[] = {2, 4, 8};
    static const double paper[] = {0.84, 0.95, 0.98};
    printf("## Load at the first CF_FULL (fixed size, f = 12, capacity 1M, %d seeds)\n\n"
           "\"tables alone\": the load when an eviction search first failed and the key went\n"
           "to the 8-entry stash instead (what the paper measures).\n\n",
           FILL_SEEDS);
    printf("| bucket size | median load | min | max | tables alone (median) | paper |\n"
           "|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        double loads[FILL_SEEDS], alone[FILL_SEEDS];
        for (int seed = 0; seed < FILL_SEEDS; seed++) {
            cf_filter *f = bench_filter(FILL_CAPACITY, 12, sizes[i], 0, (uint64_t)seed + 1);
            uint64_t stream = (uint64_t)seed * 1000003u + sizes[i];
            loads[seed] = fill_to_full(f, &stream, &alone[seed]);
            cf_free(f);
        }
        qsort(loads, FILL_SEEDS, sizeof loads[0], bench_cmp_double);
        qsort(alone, FILL_SEEDS, sizeof alone[0], bench_cmp_double);
        printf("| %u | %.4f | %.4f | %.4f | %.4f | %.2f |\n", sizes[i], loads[FILL_SEEDS / 2],
               loads[0], loads[FILL_SEEDS - 1], alone[FILL_SEEDS / 2], paper[i]);
    }
    printf("\n");
}

static void fpr_at_full_load(uint64_t queries)
{
    static const unsigned widths[] = {8, 12, 16};
    printf("## False-positive rate at full load (b = 4, capacity 1M, %" PRIu64
           " absent keys each)\n\n",
           queries);
    printf("| f | load | measured | bound 1-(1-1/(2^f-1))^(2b*load) | measured/bound |\n"
           "|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        cf_filter *f = bench_filter(FILL_CAPACITY, widths[i], 4, 0, 42);
        uint64_t stream = 7, hits = 0;
        double first_stash;
        double load = fill_to_full(f, &stream, &first_stash);
        /* The fill consumed a prefix of this stream; absent keys come from another. */
        uint64_t absent = UINT64_C(0xabcdef);
        for (uint64_t q = 0; q < queries; q++)
            hits += cf_contains_hash(f, bench_next(&absent));
        double measured = (double)hits / (double)queries;
        double bound = bench_fpr_bound(widths[i], 4, load);
        printf("| %u | %.4f | %.6f%% | %.6f%% | %.3f |\n", widths[i], load, measured * 100.0,
               bound * 100.0, measured / bound);
        cf_free(f);
    }
    printf("\n");
}

static void bytes_for_capacities(void)
{
    static const uint64_t caps[] = {1100000, 5500000};
    printf("## Memory for capacities that are not powers of two (b = 4, f = 12)\n\n");
    printf("| capacity | bytes | capacity*f/(8*0.95) | ratio | power-of-two table | "
           "ratio |\n|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        cf_filter *f = bench_filter(caps[i], 12, 4, 0, 1);
        cf_stats s;
        cf_get_stats(f, &s);
        double ideal = (double)caps[i] * 12.0 / (8.0 * 0.95);
        /* The paper's table: the next power of two of capacity / (b * 0.95) buckets. */
        uint64_t need = (uint64_t)ceil((double)caps[i] / (4.0 * 0.95)), pow2 = 1;
        while (pow2 < need)
            pow2 <<= 1;
        double pow2_bytes = (double)pow2 * 4.0 * 12.0 / 8.0;
        printf("| %" PRIu64 " | %" PRIu64 " | %.0f | %.4f | %.0f | %.3f |\n", caps[i], s.bytes,
               ideal, (double)s.bytes / ideal, pow2_bytes, pow2_bytes / ideal);
        cf_free(f);
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    uint64_t queries = argc > 1 ? strtoull(argv[1], NULL, 10) : FPR_QUERIES;
    if (queries == 0) {
        fprintf(stderr, "usage: cf-bench-figures [QUERIES]\n");
        return 1;
    }
    printf("# cuckoofilter %s figures\n\n", cf_version());
    first_full_loads();
    fpr_at_full_load(queries);
    bytes_for_capacities();
    return 0;
}
