/*
 * ab.c - two builds of the library side by side in one process: which is faster at the
 * same work, on this machine, now. Each build's libcuckoofilter.so is loaded on its own
 * (dlopen, RTLD_LOCAL), each gets a filter of the same shape and seed, and every
 * measurement alternates between them in slices, the order of each pair of slices
 * swapped every time: drift of the machine's speed falls on both alike. Times are thread
 * CPU time; pin the process (taskset) and keep the machine otherwise idle.
 *
 * Measured, in ns per operation for A and B and the ratio B / A:
 * - fills: the keys from 0 to --fill of capacity, in 40 slices; those from --from on
 *   are timed (a band of the load, for inserts that find their first bucket full more
 *   often, or that evict);
 * - lookups of absent and present keys by hash, and of absent 8-byte keys (cf_contains),
 *   7 rounds each, the medians;
 * - deletes by hash of added keys in a scattered order, 5 rounds, the median.
 * Run it twice with A and B swapped: a ratio that holds both ways is the code's.
 *
 * Usage: cf-bench-ab LIB_A LIB_B [N [F/B [--fill X] [--from Y] [--semi] [--concurrent]]]
 *   LIB_A, LIB_B   two libcuckoofilter.so files (two build directories of two commits)
 *   N              capacity and keys (default 20M); F/B the shape (default 12/4)
 */
#define _GNU_SOURCE /* dlopen's RTLD_* with some C libraries */
#include "common.h"

#include <dlfcn.h>

#define SLICES      40u /* of a fill: enough to spread drift over both, few clock reads */
#define ROUNDS      7   /* of each lookup measurement */
#define DEL_ROUNDS  5   /* of deletes: each removes 1/40 of the keys */
#define ABSENT_BASE (UINT64_C(1) << 40)  /* keys never added: far above every added index */
#define SCATTER     UINT64_C(2654435761) /* a prime: steps of it mod N visit each key once */

typedef cf_status (*new_fn)(const cf_config *, size_t, cf_filter **);
typedef void (*free_fn)(cf_filter *);
typedef cf_status (*hash_op_fn)(cf_filter *, uint64_t);
typedef bool (*has_hash_fn)(const cf_filter *, uint64_t);
typedef bool (*has_key_fn)(const cf_filter *, const void *, size_t);

typedef struct build {
    new_fn make;
    free_fn drop;
    hash_op_fn add, del;
    has_hash_fn has;
    has_key_fn has_key;
    cf_filter *f;
} build;

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *symbol(void *lib, const char *path, const char *name)
{
    void *p = dlsym(lib, name);
    if (p == NULL) {
        fprintf(stderr, "cf-bench-ab: %s has no %s\n", path, name);
        exit(2);
    }
    return p;
}

/* Each function by name. A data pointer stored into a function pointer's bytes: POSIX's
 * own way with dlsym (ISO C has no conversion between the two). */
static void load(build *b, const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "cf-bench-ab: %s\n", dlerror());
        exit(2);
    }
    *(void **)&b->make = symbol(lib, path, "cf_new_sized");
    *(void **)&b->drop = symbol(lib, path, "cf_free");
    *(void **)&b->add = symbol(lib, path, "cf_add_hash");
    *(void **)&b->del = symbol(lib, path, "cf_delete_hash");
    *(void **)&b->has = symbol(lib, path, "cf_contains_hash");
    *(void **)&b->has_key = symbol(lib, path, "cf_contains");
}

/* The key after `at` in a scattered walk of all n: steps of `stride`, a number prime to n
 * (SCATTER mod n, for n below SCATTER), so that n steps visit each key once; no divide. */
static uint64_t scatter(uint64_t at, uint64_t stride, uint64_t n)
{
    at += stride;
    return at >= n ? at - n : at;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

static void row(const char *what, double a, double b)
{
    printf("%-24s %9.2f %9.2f %7.3f\n", what, a, b, b / a);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: cf-bench-ab LIB_A LIB_B [N [F/B [--fill X] [--from Y] "
                        "[--semi] [--concurrent]]]\n");
        return 2;
    }
    uint64_t n = UINT64_C(20000000);
    if (argc > 3) {
        const char *end;
        n = bench_parse_count(argv[3], &end);
        if (*end != '\0')
            n = 0; /* refused below */
    }
    unsigned fb = 12, bs = 4, flags = 0;
    double fill = 1.0, from = 0.0;
    if (argc > 4 && sscanf(argv[4], "%u/%u", &fb, &bs) != 2) {
        fprintf(stderr, "cf-bench-ab: shape %s is not F/B\n", argv[4]);
        return 2;
    }
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "--semi") == 0)
            flags |= CF_SEMI_SORT;
        else if (strcmp(argv[i], "--concurrent") == 0)
            flags |= CF_CONCURRENT;
        else if (strcmp(argv[i], "--fill") == 0 && i + 1 < argc)
            fill = atof(argv[++i]);
        else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
            from = atof(argv[++i]);
        else {
            fprintf(stderr, "cf-bench-ab: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (n < SLICES * 40u || n >= SCATTER || !(fill > 0.0 && fill <= 1.0) ||
        !(from >= 0.0 && from < fill)) {
        fprintf(stderr,
                "cf-bench-ab: N of at least %u, 0 < --fill <= 1, 0 <= --from < "
                "--fill\n",
                SLICES * 40u);
        return 2;
    }
    build b[2];
    load(&b[0], argv[1]);
    load(&b[1], argv[2]);
    uint64_t *h = malloc((size_t)n * sizeof *h);
    if (h == NULL) {
        fprintf(stderr, "cf-bench-ab: out of memory\n");
        return 2;
    }
    for (uint64_t i = 0; i < n; i++)
        h[i] = bench_mix64(i + BENCH_GOLDEN);
    for (int k = 0; k < 2; k++) {
        cf_config c = {.capacity = n,
                       .fingerprint_bits = fb,
                       .bucket_size = bs,
                       .expansion = 0,
                       .seed = BENCH_DEFAULT_SEED,
                       .flags = CF_FIXED_SEED | flags};
        if (b[k].make(&c, sizeof c, &b[k].f) != CF_OK) {
            fprintf(stderr, "cf-bench-ab: cf_new of %u/%u failed\n", fb, bs);
            return 2;
        }
    }
    printf("cf-bench-ab: A %s, B %s; N %" PRIu64 ", %u/%u%s, fill %.2f, timed from %.2f\n", argv[1],
           argv[2], n, fb, bs, flags ? " semi-sorted" : "", fill, from);
    printf("%-24s %9s %9s %7s\n", "ns per operation", "A", "B", "B / A");

    /* The fill, in slices, alternating. */
    uint64_t filled = (uint64_t)(fill * (double)n), timed = 0, refused[2] = {0, 0};
    double fill_ns[2] = {0, 0};
    for (unsigned s = 0; s < SLICES; s++) {
        uint64_t lo = filled * s / SLICES, hi = filled * (s + 1) / SLICES;
        bool on = (double)lo >= from * (double)n;
        timed += on ? hi - lo : 0;
        for (int k0 = 0; k0 < 2; k0++) {
            int k = (s & 1u) ? 1 - k0 : k0;
            double t = cpu_ns();
            for (uint64_t i = lo; i < hi; i++)
                refused[k] += b[k].add(b[k].f, h[i]) != CF_OK;
            if (on)
                fill_ns[k] += cpu_ns() - t;
        }
    }
    row("fill (timed band)", fill_ns[0] / (double)timed, fill_ns[1] / (double)timed);

    /* Lookups, 7 rounds, alternating. */
    uint64_t q = filled / 20, sink = 0, stride = SCATTER % filled;
    double absent[2][ROUNDS], present[2][ROUNDS], keyed[2][ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        for (int k0 = 0; k0 < 2; k0++) {
            int k = (r & 1) ? 1 - k0 : k0;
            uint64_t base = ABSENT_BASE + (uint64_t)r * q;
            double t = cpu_ns();
            for (uint64_t i = 0; i < q; i++)
                sink += b[k].has(b[k].f, bench_mix64(base + i));
            absent[k][r] = (cpu_ns() - t) / (double)q;
            uint64_t at = (uint64_t)r;
            t = cpu_ns();
            for (uint64_t i = 0; i < q; i++) {
                sink += b[k].has(b[k].f, h[at]);
                at = scatter(at, stride, filled);
            }
            present[k][r] = (cpu_ns() - t) / (double)q;
            t = cpu_ns();
            for (uint64_t i = 0; i < q; i++) {
                uint64_t key = base + i;
                sink += b[k].has_key(b[k].f, &key, sizeof key);
            }
            keyed[k][r] = (cpu_ns() - t) / (double)q;
        }
    }
    row("absent (hash)", median(absent[0], ROUNDS), median(absent[1], ROUNDS));
    row("present (hash)", median(present[0], ROUNDS), median(present[1], ROUNDS));
    row("absent (8-byte key)", median(keyed[0], ROUNDS), median(keyed[1], ROUNDS));

    /* Deletes of added keys, scattered, alternating. */
    uint64_t d = filled / 40, next_del = 0;
    double del[2][DEL_ROUNDS];
    for (int r = 0; r < DEL_ROUNDS; r++) {
        for (int k0 = 0; k0 < 2; k0++) {
            int k = (r & 1) ? 1 - k0 : k0;
            double t = cpu_ns();
            for (uint64_t i = 0; i < d; i++) {
                sink += b[k].del(b[k].f, h[next_del]) == CF_OK;
                next_del = scatter(next_del, stride, filled);
            }
            del[k][r] = (cpu_ns() - t) / (double)d;
        }
    }
    row("delete (hash)", median(del[0], DEL_ROUNDS), median(del[1], DEL_ROUNDS));
    printf("refused: A %" PRIu64 ", B %" PRIu64 "; checksum %" PRIu64 "\n", refused[0], refused[1],
           sink);
    b[0].drop(b[0].f);
    b[1].drop(b[1].f);
    free(h);
    return 0;
}
