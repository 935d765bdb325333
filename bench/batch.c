/*
 * batch.c - the C library's batched lookup of 8-byte keys, as the baseline that
 * bench/python_bench.py (`make bench-python`) holds the Python package's contains_many
 * against: the same keys, the same filter, timed in the same run.
 *
 * It reads KEYS (little-endian uint64, as numpy's tofile writes them), makes a filter of
 * capacity = their count with the target false-positive rate FPR and seed SEED (with
 * --concurrent, CF_CONCURRENT, as the Python constructor makes it), adds them all, then
 * looks them all up with cf_contains_keys, 4096 at a time (the chunks the package passes),
 * ROUNDS times, and prints the median ns per key and the number found.
 *
 * Usage: cf-bench-batch KEYS FPR SEED [--concurrent]
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, in common.h */
#include "common.h"

#define CHUNK  4096u /* keys per cf_contains_keys call, as the Python package passes them */
#define ROUNDS 5

static uint64_t *read_keys(const char *path, size_t *n)
{
    FILE *in = fopen(path, "rb");
    if (!in) {
        fprintf(stderr, "cf-bench-batch: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    size_t cap = 1u << 20, len = 0;
    uint64_t *keys = bench_xmalloc(cap * sizeof *keys);
    for (;;) {
        if (len == cap)
            keys = realloc(keys, (cap *= 2) * sizeof *keys);
        if (!keys) {
            fprintf(stderr, "cf-bench-batch: out of memory\n");
            exit(2);
        }
        size_t got = fread(keys + len, sizeof *keys, cap - len, in);
        len += got;
        if (got == 0)
            break;
    }
    fclose(in);
    *n = len;
    return keys;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5 || (argc == 5 && strcmp(argv[4], "--concurrent") != 0)) {
        fprintf(stderr, "usage: cf-bench-batch KEYS FPR SEED [--concurrent]\n");
        return 2;
    }
    size_t n;
    uint64_t *keys = read_keys(argv[1], &n);
    uint64_t seed;
    if (!bench_parse_seed(argv[3], &seed) || n == 0) {
        fprintf(stderr, "cf-bench-batch: bad seed or no keys\n");
        return 2;
    }
    cf_config c = {.capacity = n,
                   .target_fpr = strtod(argv[2], NULL),
                   .seed = seed,
                   .flags = CF_FIXED_SEED | (argc == 5 ? CF_CONCURRENT : 0u)};
    cf_filter *f;
    bench_check(cf_new(&c, &f), "cf_new");
    const void **p = bench_xmalloc(CHUNK * sizeof *p);
    size_t *lens = bench_xmalloc(CHUNK * sizeof *lens);
    bool *found = bench_xmalloc(n);
    for (size_t i = 0; i < CHUNK; i++)
        lens[i] = 8;
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? n - i : CHUNK;
        for (size_t j = 0; j < m; j++)
            p[j] = &keys[i + j];
        cf_add_keys(f, p, lens, m, 0, NULL);
    }
    double t[ROUNDS];
    size_t hits = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = bench_now();
        for (size_t i = 0; i < n; i += CHUNK) {
            size_t m = n - i < CHUNK ? n - i : CHUNK;
            for (size_t j = 0; j < m; j++)
                p[j] = &keys[i + j];
            cf_contains_keys(f, p, lens, m, found + i);
        }
        t[r] = (bench_now() - t0) * 1e9 / (double)n;
        hits = 0;
        for (size_t i = 0; i < n; i++)
            hits += found[i];
    }
    printf("%.2f %zu\n", bench_median(t, ROUNDS), hits);
    cf_free(f);
    free(keys);
    free(p);
    free(lens);
    free(found);
    return hits == n ? 0 : 1;
}
