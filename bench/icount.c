/*
 * icount.c - the operations whose instruction counts bench/icount.sh reports.
 *
 * Each operation runs in a function of its own (op_<name>, never inlined), COUNT times on
 * a filter of capacity 1M (the shape given as "F/B" in argv[1], default 12/4; "F/4s" for
 * semi-sorted buckets, a "c" after either for CF_CONCURRENT, a "g" for a filter that grows
 * to hold them, from an eighth, an "x" for the segmented mapping (CF_SEGMENTED); a fixed
 * seed), so that callgrind's
 * inclusive count of that function, divided by COUNT, is the exact number of instructions per
 * operation, the calling loop's few included: a figure with no noise, which judges a change to a
 * hot path where times on this machine drift by 30 %. Run natively it only does the work (and
 * checks that the keys it added are found); `make bench-icount` runs it under valgrind for each
 * fast shape.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, in common.h */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAPACITY  1000000u /* the filter; out of L2, as most filters are */
#define FILLED    CAPACITY /* full: the load the sizing gives each shape (95 % for b = 4) */
#define LOOKUPS   1000000u /* per lookup operation */
#define DELETES   100000u  /* of keys that were added */
#define REPLACES  100000u  /* deletes of added keys, each followed by an add of a new one */
#define BATCH     256u     /* keys per batched call */
#define NEW_SMALL 1000u    /* cf_new + cf_free of a small filter, this many times */
#define KEY_BYTES 8u       /* keyed calls take the 8-byte key whose hash is h[i] */
#define SEED      UINT64_C(0x1C0C7)
#define GROWN     8u /* "g": the first sub-filter holds CAPACITY / GROWN, and it doubles */

#if defined(__GNUC__) || defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

static unsigned g_f = 12, g_b = 4; /* the shape measured */
/* CF_SEMI_SORT for "F/4s", CF_SEGMENTED for "x", CF_FAST_HASH for "h" */
static unsigned g_flags;
static bool g_grow; /* "g" */

static cf_filter *make(void)
{
    if (!g_grow)
        return bench_filter(CAPACITY, g_f, g_b, g_flags, SEED);
    cf_config cfg = {.capacity = CAPACITY / GROWN,
                     .fingerprint_bits = g_f,
                     .bucket_size = g_b,
                     .expansion = 2,
                     .seed = SEED,
                     .flags = CF_FIXED_SEED | g_flags};
    cf_filter *f;
    bench_check(cf_new(&cfg, &f), "cf_new");
    return f;
}

NOINLINE static void op_add_hash(cf_filter *f, const uint64_t *h)
{
    for (uint32_t i = 0; i < FILLED; i++)
        cf_add_hash(f, h[i]);
}

NOINLINE static size_t op_add_key8(cf_filter *f, const uint64_t *keys)
{
    size_t added = 0;
    for (uint32_t i = 0; i < FILLED; i++)
        added += cf_add(f, &keys[i], KEY_BYTES) == CF_OK;
    return added;
}

NOINLINE static size_t op_add_many(cf_filter *f, const uint64_t *h)
{
    size_t added = 0;
    for (uint32_t i = 0; i < FILLED; i += BATCH)
        added += cf_add_many(f, h + i, FILLED - i < BATCH ? FILLED - i : BATCH, 0, NULL);
    return added;
}

NOINLINE static size_t op_add_keys8(cf_filter *f, const void *const *ptrs, const size_t *lens)
{
    size_t added = 0;
    for (uint32_t i = 0; i < FILLED; i += BATCH)
        added += cf_add_keys(f, ptrs + i, lens, FILLED - i < BATCH ? FILLED - i : BATCH, 0, NULL);
    return added;
}

NOINLINE static size_t op_contains_hash_absent(const cf_filter *f, const uint64_t *h)
{
    size_t hits = 0;
    for (uint32_t i = 0; i < LOOKUPS; i++)
        hits += cf_contains_hash(f, h[FILLED + i]);
    return hits;
}

NOINLINE static size_t op_contains_hash_present(const cf_filter *f, const uint64_t *h)
{
    size_t hits = 0;
    for (uint32_t i = 0; i < FILLED; i++)
        hits += cf_contains_hash(f, h[i]);
    return hits;
}

NOINLINE static size_t op_contains_key8(const cf_filter *f, const uint64_t *keys)
{
    size_t hits = 0;
    for (uint32_t i = 0; i < LOOKUPS; i++)
        hits += cf_contains(f, &keys[i], sizeof keys[i]);
    return hits;
}

NOINLINE static size_t op_contains_many(const cf_filter *f, const uint64_t *h, bool *out)
{
    size_t hits = 0;
    for (uint32_t i = 0; i < LOOKUPS; i += BATCH) {
        cf_contains_many(f, h + FILLED + i, BATCH, out);
        hits += out[0];
    }
    return hits;
}

NOINLINE static size_t op_contains_keys8(const cf_filter *f, const void *const *ptrs,
                                         const size_t *lens, bool *out)
{
    size_t hits = 0;
    for (uint32_t i = 0; i < LOOKUPS; i += BATCH) {
        cf_contains_keys(f, ptrs + FILLED + i, lens, BATCH, out);
        hits += out[0];
    }
    return hits;
}

NOINLINE static size_t op_delete_hash(cf_filter *f, const uint64_t *h)
{
    size_t deleted = 0;
    for (uint32_t i = 0; i < DELETES; i++)
        deleted += cf_delete_hash(f, h[i]) == CF_OK;
    return deleted;
}

NOINLINE static size_t op_delete_key8(cf_filter *f, const uint64_t *keys)
{
    size_t deleted = 0;
    for (uint32_t i = 0; i < DELETES; i++)
        deleted += cf_delete(f, &keys[i], KEY_BYTES) == CF_OK;
    return deleted;
}

/* Sustained load: a key that was added deleted, then a new one added, REPLACES times, in a
 * full filter (the count is of the pair). Returns the adds refused. */
NOINLINE static size_t op_replace_hash(cf_filter *f, const uint64_t *h, const uint64_t *fresh)
{
    size_t refused = 0;
    for (uint32_t i = 0; i < REPLACES; i++) {
        (void)cf_delete_hash(f, h[i]);
        refused += cf_add_hash(f, fresh[i]) != CF_OK;
    }
    return refused;
}

NOINLINE static void op_new_free_small(void)
{
    for (uint32_t i = 0; i < NEW_SMALL; i++) {
        cf_config c = {.capacity = 1000, .seed = SEED};
        cf_filter *f;
        if (cf_new(&c, &f) == CF_OK)
            cf_free(f);
    }
}

int main(int argc, char **argv)
{
    char suffix[5] = "";
    if (argc > 1 && (sscanf(argv[1], "%u/%u%4s", &g_f, &g_b, suffix) < 2 ||
                     strspn(suffix, "scgxh") != strlen(suffix))) {
        fprintf(stderr, "usage: cf-bench-icount [F/B, then s for semi-sorted buckets (B = 4), "
                        "c for CF_CONCURRENT, g for a growing filter, x for segments, h for "
                        "CF_FAST_HASH]\n");
        return 2;
    }
    g_grow = strchr(suffix, 'g') != NULL;
    g_flags = (strchr(suffix, 's') ? CF_SEMI_SORT : 0u) |
              (strchr(suffix, 'c') ? CF_CONCURRENT : 0u) |
              (strchr(suffix, 'x') ? CF_SEGMENTED : 0u) | (strchr(suffix, 'h') ? CF_FAST_HASH : 0u);
    size_t total = FILLED + LOOKUPS + BATCH;
    uint64_t *h = malloc(total * sizeof *h), *keys = malloc(total * sizeof *keys);
    const void **ptrs = malloc(total * sizeof *ptrs);
    size_t *lens = malloc(BATCH * sizeof *lens);
    bool *out = malloc(BATCH * sizeof *out);
    if (!h || !keys || !ptrs || !lens || !out)
        return 1;
    cf_filter *f = make(), *g = make(), *k = make(), *m = make();
    /* Key i is the 8 bytes of splitmix64 step i; h[i] is its hash by the filters' seed, so that
     * pre-hashed and keyed calls ask about the same keys. */
    for (size_t i = 0; i < total; i++) {
        keys[i] = bench_mix64(i + BENCH_GOLDEN); /* splitmix64: distinct for distinct i */
        h[i] = cf_hash(f, &keys[i], KEY_BYTES);
        ptrs[i] = &keys[i];
    }
    for (size_t i = 0; i < BATCH; i++)
        lens[i] = KEY_BYTES;
    op_add_hash(f, h);
    size_t batched = op_add_many(g, h);
    size_t keyed_added = op_add_key8(k, keys);
    size_t keyed_batched = op_add_keys8(m, (const void *const *)ptrs, lens);
    size_t absent = op_contains_hash_absent(f, h);
    size_t present = op_contains_hash_present(f, h);
    size_t keyed = op_contains_key8(f, keys);
    size_t many = op_contains_many(f, h, out);
    size_t many_keys = op_contains_keys8(f, (const void *const *)ptrs, lens, out);
    size_t deleted = op_delete_hash(f, h);
    size_t deleted_keyed = op_delete_key8(k, keys);
    size_t replace_refused = op_replace_hash(g, h, h + FILLED);
    op_new_free_small();
    /* The counts of each operation, for icount.sh; and the answers, as a check. */
    printf("add_hash %u\nadd_key8 %u\nadd_many %u\nadd_keys8 %u\ncontains_hash_absent %u\n"
           "contains_hash_present %u\ncontains_key8 %u\ncontains_many %u\ncontains_keys8 %u\n"
           "delete_hash %u\ndelete_key8 %u\nreplace_hash %u\nnew_free_small %u\n",
           FILLED, FILLED, FILLED, FILLED, LOOKUPS, FILLED, LOOKUPS, LOOKUPS, LOOKUPS, DELETES,
           DELETES, REPLACES, NEW_SMALL);
    int status = present == FILLED && keyed == LOOKUPS && deleted == DELETES &&
                         deleted_keyed == DELETES && batched == FILLED && keyed_added == FILLED &&
                         keyed_batched == FILLED
                     ? 0
                     : 1;
    if (status)
        fprintf(stderr, "icount: a key that was added was not found (or not added)\n");
    fprintf(stderr,
            "icount: f %u b %u: %zu false positives in %u lookups of absent keys; batched, "
            "%zu and %zu in the first keys of %u batches; %zu adds of %u refused at sustained "
            "load\n",
            g_f, g_b, absent, LOOKUPS, many, many_keys, LOOKUPS / BATCH, replace_refused, REPLACES);
    cf_free(f);
    cf_free(g);
    cf_free(k);
    cf_free(m);
    free(h);
    free(keys);
    free(ptrs);
    free(lens);
    free(out);
    return status;
}
