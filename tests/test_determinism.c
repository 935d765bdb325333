/*
 * test_determinism.c - same config and seed, same operations => the same answers.
 *
 * 1. Two filters with the same config and seed, one running the baseline code and one the
 *    code this CPU picks (cf_cpu_variant), get the same operations in lockstep (adds,
 *    duplicates, add_unique, deletes; fixed filters pushed into CF_FULL, growing filters
 *    through several growths): every return value is the same, and so are the answers to
 *    200k probe keys (contains, contains_hash, contains_many, count), every stats field
 *    and the serialized bytes.
 * 2. A different seed gives different hash values (and different false positives).
 * 3. cf_clear, then the same operations as on a fresh filter: the same answers.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include "testutil.h"

typedef struct {
    uint64_t *ids; /* keys (stream ids) with at least one copy in, one entry per copy */
    size_t n, cap;
} bag;

static void bag_push(bag *b, uint64_t id)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 1024;
        uint64_t *p = realloc(b->ids, b->cap * sizeof *p);
        if (p == NULL)
            exit(2);
        b->ids = p;
    }
    b->ids[b->n++] = id;
}

static uint64_t bag_take(bag *b, cft_rng *r)
{
    size_t i = (size_t)cft_below(r, b->n);
    uint64_t id = b->ids[i];
    b->ids[i] = b->ids[--b->n];
    return id;
}

/* Run `ops` random operations on the filters fs[0..nf) in lockstep; every call must
 * return the same on all of them. `next_id` numbers fresh keys. Returns false on the
 * first divergence. */
static bool lockstep(cf_filter *const *fs, size_t nf, uint64_t stream, uint64_t ops, cft_rng *r,
                     bag *in, uint64_t *next_id)
{
    uint8_t k[CFT_KEY_MAX];
    for (uint64_t op = 0; op < ops; op++) {
        unsigned what = (unsigned)cft_below(r, 100);
        uint64_t id;
        cf_status rc[4];
        if (what < 60 || in->n == 0) {
            /* add: a fresh key, or a duplicate */
            bool dup = in->n > 0 && what % 6 == 0;
            id = dup ? in->ids[cft_below(r, in->n)] : (*next_id)++;
            size_t len = cft_key_var(k, stream, id);
            bool via_hash = what % 2 == 1;
            for (size_t i = 0; i < nf; i++)
                rc[i] =
                    via_hash ? cf_add_hash(fs[i], cf_hash(fs[i], k, len)) : cf_add(fs[i], k, len);
            if (rc[0] == CF_OK)
                bag_push(in, id);
        } else if (what < 70) {
            id = what % 3 == 0 && in->n > 0 ? in->ids[cft_below(r, in->n)] : (*next_id)++;
            size_t len = cft_key_var(k, stream, id);
            for (size_t i = 0; i < nf; i++)
                rc[i] = cf_add_unique(fs[i], k, len);
            if (rc[0] == CF_OK)
                bag_push(in, id);
        } else {
            id = bag_take(in, r);
            size_t len = cft_key_var(k, stream, id);
            for (size_t i = 0; i < nf; i++)
                rc[i] = cf_delete(fs[i], k, len);
            CHECK_ST(rc[0], CF_OK);
        }
        for (size_t i = 1; i < nf; i++) {
            if (!CHECK_MSG(rc[i] == rc[0],
                           "op %llu (kind %u, key %llu): filter %zu says %s, "
                           "filter 0 says %s",
                           (unsigned long long)op, what, (unsigned long long)id, i,
                           cft_status_name(rc[i]), cft_status_name(rc[0])))
                return false;
        }
    }
    return true;
}

/* Same answers to every question. */
static void compare(cf_filter *const *fs, size_t nf, uint64_t stream, uint64_t next_id,
                    uint64_t probes)
{
    uint8_t k[CFT_KEY_MAX];
    cf_stats s0 = cft_stats(fs[0]);
    for (size_t i = 1; i < nf; i++) {
        cf_stats si = cft_stats(fs[i]);
        CHECK_STATS_EQ(s0, si);
    }
    enum { B = 512 };
    uint64_t hs[B];
    bool out[4][B];
    uint64_t diff = 0, positives = 0;
    for (uint64_t p = 0; p < probes; p += B) {
        size_t nb = probes - p < B ? (size_t)(probes - p) : B;
        for (size_t j = 0; j < nb; j++) {
            /* Half the probes are keys used so far, half never-used keys. */
            uint64_t id =
                (p + j) % 2 ? cft_below(&(cft_rng){p + j}, next_id + 1) : next_id + 1000000 + p + j;
            size_t len = cft_key_var(k, stream, id);
            uint64_t h = cf_hash(fs[0], k, len);
            hs[j] = h;
            bool c0 = cf_contains(fs[0], k, len);
            uint64_t n0 = cf_count(fs[0], k, len);
            positives += c0;
            for (size_t i = 1; i < nf; i++) {
                diff += cf_hash(fs[i], k, len) != h;
                diff += cf_contains(fs[i], k, len) != c0;
                diff += cf_contains_hash(fs[i], h) != c0;
                diff += cf_count(fs[i], k, len) != n0;
                diff += cf_count_hash(fs[i], h) != n0;
            }
        }
        for (size_t i = 0; i < nf; i++)
            cf_contains_many(fs[i], hs, nb, out[i]);
        for (size_t i = 1; i < nf; i++)
            for (size_t j = 0; j < nb; j++)
                diff += out[i][j] != out[0][j];
    }
    CHECK_MSG(diff == 0, "%llu differing answers over %llu probes", (unsigned long long)diff,
              (unsigned long long)probes);
    CHECK(positives > 0);
}

/* cf_new under a CPU variant: "baseline", or NULL for the one the library picks. */
static cf_status new_on(const cf_config *c, const char *variant, cf_filter **out)
{
    if (variant)
        setenv("CUCKOOFILTER_CPU", variant, 1);
    else
        unsetenv("CUCKOOFILTER_CPU");
    cf_status st = cf_new(c, out);
    unsetenv("CUCKOOFILTER_CPU");
    return st;
}

/* Filter 0 runs the baseline code and filter 1 the code this CPU picks (x86-64-v3 where it
 * can): the same operations must give the same answers and the same bytes. */
static void test_same_seed(void)
{
    setenv("CUCKOOFILTER_CPU", "baseline", 1);
    CHECK_MSG(strcmp(cf_cpu_variant(), "baseline") == 0, "CUCKOOFILTER_CPU=baseline gives %s",
              cf_cpu_variant());
    unsetenv("CUCKOOFILTER_CPU");
    printf("  variants: filter 0 baseline, filter 1 %s\n", cf_cpu_variant());
    const struct {
        unsigned b, f, e;
        uint64_t cap, ops;
        unsigned flags;
    } sh[] = {{4, 12, 0, 20000, 120000, 0},
              {2, 16, 2, 500, 60000, 0},
              {8, 8, 0, 10000, 80000, 0},
              {1, 12, 1, 1000, 40000, 0},
              {3, 7, 3, 300, 50000, 0},
              {16, 32, 0, 3000, 30000, 0},
              {4, 8, 2, 2000, 60000, 0},
              {2, 12, 0, 5000, 40000, 0},
              {4, 16, 0, 5000, 40000, 0},
              {2, 8, 1, 400, 40000, 0},
              /* semi-sorted: code of their own (13, 9), widths at run time (12), generic (20) */
              {4, 13, 0, 20000, 120000, CF_SEMI_SORT},
              {4, 9, 2, 500, 60000, CF_SEMI_SORT},
              {4, 12, 0, 5000, 40000, CF_SEMI_SORT},
              {4, 20, 1, 1000, 40000, CF_SEMI_SORT}};
    const uint64_t probes = cft_scaled_min(200000, 1000);
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        uint64_t seed = cft_subseed(10 + i);
        cft_context("same seed: b %u f %u e %u%s cap %llu filter seed 0x%016llx", sh[i].b, sh[i].f,
                    sh[i].e, sh[i].flags ? " semi-sorted" : "", (unsigned long long)sh[i].cap,
                    (unsigned long long)seed);
        cf_config c = {.capacity = sh[i].cap,
                       .bucket_size = sh[i].b,
                       .fingerprint_bits = sh[i].f,
                       .expansion = sh[i].e,
                       .max_sub_filters = sh[i].e == 1 ? 1000 : 0,
                       .seed = seed,
                       .flags = sh[i].flags};
        cf_filter *fs[2] = {NULL, NULL};
        if (!CHECK_ST(new_on(&c, "baseline", &fs[0]), CF_OK) ||
            !CHECK_ST(new_on(&c, NULL, &fs[1]), CF_OK)) {
            cf_free(fs[0]);
            cf_free(fs[1]);
            continue;
        }
        cft_rng r = cft_rng_make(seed + 1);
        bag in = {0};
        uint64_t next_id = 0;
        bool same = lockstep(fs, 2, 20 + i, cft_scaled(sh[i].ops), &r, &in, &next_id);
        if (same) {
            compare(fs, 2, 20 + i, next_id, probes);
            CHECK_MSG(cft_same_bytes(fs[0], fs[1]), "the filters' bytes differ");
        }
        cf_stats s = cft_stats(fs[0]);
        printf("  same seed b %2u f %2u e %u%s: %llu items, %u sub-filters, load %.3f: %s\n",
               sh[i].b, sh[i].f, sh[i].e, sh[i].flags ? " semi" : "", (unsigned long long)s.items,
               s.sub_filters, s.load_factor, same ? "identical" : "DIVERGED");
        if (sh[i].e && cft_full_scale())
            CHECK(s.sub_filters > 2);
        else if (cft_full_scale())
            CHECK(s.load_factor > 0.8); /* pushed close to full */
        free(in.ids);
        cf_free(fs[0]);
        cf_free(fs[1]);
    }
}

static void test_different_seed(void)
{
    cft_context("different seeds");
    uint64_t seed = cft_subseed(30);
    cf_config c = {.capacity = 20000, .fingerprint_bits = 8, .seed = seed};
    cf_filter *a = NULL, *b = NULL;
    CHECK_ST(cf_new(&c, &a), CF_OK);
    c.seed = seed ^ 1; /* one bit apart */
    CHECK_ST(cf_new(&c, &b), CF_OK);
    if (a == NULL || b == NULL)
        goto out;
    uint8_t k[CFT_KEY_MAX];
    uint64_t same_hash = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        size_t len = cft_key_var(k, 31, i);
        same_hash += cf_hash(a, k, len) == cf_hash(b, k, len);
    }
    CHECK_EQ_U(same_hash, 0);
    /* Same keys in both; the false positives (f 8: ~3 % at this load) must differ. */
    for (uint64_t i = 0; i < 19000; i++) {
        size_t len = cft_key_var(k, 32, i);
        CHECK_ST(cf_add(a, k, len), CF_OK);
        CHECK_ST(cf_add(b, k, len), CF_OK);
    }
    uint64_t fa = 0, fb = 0, both = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        size_t len = cft_key_var(k, 33, i);
        bool x = cf_contains(a, k, len), y = cf_contains(b, k, len);
        fa += x;
        fb += y;
        both += x && y;
    }
    /* Independent seeds: both ~ fa * fb / 100000 (~10), far below fa (~3000). */
    CHECK_MSG(fa > 100 && fb > 100 && both * 4 < fa && both * 4 < fb,
              "false positives: %llu and %llu, %llu in common", (unsigned long long)fa,
              (unsigned long long)fb, (unsigned long long)both);
    printf("  different seeds: false positives %llu and %llu, %llu shared\n",
           (unsigned long long)fa, (unsigned long long)fb, (unsigned long long)both);
out:
    cf_free(a);
    cf_free(b);
}

static void test_clear_like_fresh(void)
{
    const struct {
        unsigned b, f, e;
        uint64_t cap, ops;
    } sh[] = {{4, 12, 0, 10000, 80000},
              {2, 8, 0, 5000, 40000},
              {8, 16, 0, 8000, 60000},
              {4, 12, 2, 100000, 30000}};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        uint64_t seed = cft_subseed(40 + i);
        cft_context("clear vs fresh: b %u f %u e %u cap %llu filter seed 0x%016llx", sh[i].b,
                    sh[i].f, sh[i].e, (unsigned long long)sh[i].cap, (unsigned long long)seed);
        cf_config c = {.capacity = sh[i].cap,
                       .bucket_size = sh[i].b,
                       .fingerprint_bits = sh[i].f,
                       .expansion = sh[i].e,
                       .seed = seed};
        cf_filter *used = NULL, *fresh = NULL;
        if (!CHECK_ST(cf_new(&c, &used), CF_OK) || !CHECK_ST(cf_new(&c, &fresh), CF_OK)) {
            cf_free(used);
            cf_free(fresh);
            continue;
        }
        /* History on one filter (to full, for the fixed ones), then cf_clear. */
        cft_rng r = cft_rng_make(seed + 2);
        bag in = {0};
        uint64_t next_id = 0;
        cf_filter *one[1] = {used};
        lockstep(one, 1, 50 + i, sh[i].ops, &r, &in, &next_id);
        cf_stats hs = cft_stats(used);
        CHECK(hs.items > 0);
        CHECK_EQ_U(hs.sub_filters, 1); /* capacities chosen so that e 2 does not grow */
        cf_clear(used);
        /* The same new history on both. */
        in.n = 0;
        next_id = 0;
        r = cft_rng_make(seed + 3);
        cf_filter *both[2] = {fresh, used};
        bool same = lockstep(both, 2, 60 + i, sh[i].ops, &r, &in, &next_id);
        if (same)
            compare(both, 2, 60 + i, next_id, cft_scaled_min(100000, 1000));
        cf_stats s = cft_stats(fresh);
        printf("  clear vs fresh b %u f %2u e %u: %llu items, load %.3f: %s\n", sh[i].b, sh[i].f,
               sh[i].e, (unsigned long long)s.items, s.load_factor,
               same ? "identical" : "DIVERGED");
        free(in.ids);
        cf_free(used);
        cf_free(fresh);
    }
}

int main(void)
{
    cft_init("test_determinism");
    test_same_seed();
    test_different_seed();
    test_clear_like_fresh();
    return cft_finish();
}
