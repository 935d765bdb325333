/*
 * test_abi.c - the interface that has to last: structs that grow (a caller compiled with
 * an older, smaller struct, and one compiled with a later, larger one), pinned status
 * numbers, cf_config_resolve, sizing by a target false-positive rate, and cf_add_keys
 * against the cf_add calls it stands for.
 */
#include "testutil.h"

/* The numbers are a promise (the header pins them): a change here is a broken ABI. */
_Static_assert(CF_OK == 0 && CF_NOT_FOUND == 1 && CF_FULL == 2 && CF_EXISTS == 3 &&
                   CF_EINVAL == 4 && CF_ENOMEM == 5 && CF_ECORRUPT == 6 && CF_EIO == 7 &&
                   CF_EVERSION == 8 && CF_EREADONLY == 9,
               "cf_status values are pinned");
_Static_assert(CF_FIXED_SEED == 1u && CF_ADD_UNIQUE == 1u && CF_MAP_VERIFY == 1u,
               "flag bits are pinned");

/* The structs as library 0.1's header declared them: what a program built then holds. */
typedef struct old_config {
    uint64_t capacity;
    unsigned fingerprint_bits;
    unsigned bucket_size;
    unsigned max_kicks;
    unsigned expansion;
    uint64_t seed;
    const cf_allocator *allocator;
} old_config;

typedef struct old_stats {
    uint64_t items, slots, buckets, bytes;
    unsigned sub_filters, fingerprint_bits, bucket_size;
    double load_factor, fpr;
} old_stats;

/* A later header's structs: today's with one more field appended. */
typedef struct new_config {
    cf_config now;
    uint64_t later;
} new_config;

typedef struct new_stats {
    cf_stats now;
    uint64_t later;
} new_stats;

/* Room past a struct that a call must never write into. */
#define CANARY      0xa5
#define CANARY_SIZE 64u

static bool untouched(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != CANARY)
            return false;
    return true;
}

static void test_sizes(void)
{
    cft_context("struct sizes");
    CHECK_EQ_U(CF_CONFIG_SIZE_MIN, sizeof(old_config));
    CHECK_EQ_U(CF_STATS_SIZE_MIN, sizeof(old_stats));
    /* The old fields keep their places: only appended fields are new. */
    CHECK_EQ_U(offsetof(cf_config, seed), offsetof(old_config, seed));
    CHECK_EQ_U(offsetof(cf_config, allocator), offsetof(old_config, allocator));
    CHECK_EQ_U(offsetof(cf_stats, fpr), offsetof(old_stats, fpr));
    CHECK_EQ_U(offsetof(cf_stats, load_factor), offsetof(old_stats, load_factor));
}

/* A program built with the 0.1 structs, run against this library. */
static void test_old_caller(void)
{
    cft_context("old caller");
    old_config oc = {.capacity = 5000, .bucket_size = 2, .seed = 77};
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new_sized((const cf_config *)(const void *)&oc, sizeof oc, &f), CF_OK))
        return;
    /* The fields it lacks took their defaults, the ones it set were read. */
    cf_config cfg = {.capacity = 5000, .bucket_size = 2, .seed = 77};
    cf_filter *g = NULL;
    CHECK_ST(cf_new(&cfg, &g), CF_OK);
    for (uint64_t i = 0; i < 3000; i++) {
        CHECK_ST(cf_add_hash(f, cft_mix64(i)), CF_OK);
        CHECK_ST(cf_add_hash(g, cft_mix64(i)), CF_OK);
    }
    CHECK_MSG(cft_same_bytes(f, g), "an old config made another filter than today's");

    /* Its stats struct is filled as far as it goes, and not a byte further. */
    struct {
        old_stats s;
        unsigned char after[CANARY_SIZE];
    } os;
    memset(&os, CANARY, sizeof os);
    CHECK_ST(cf_get_stats_sized(f, (cf_stats *)(void *)&os.s, sizeof os.s), CF_OK);
    CHECK(untouched(os.after, sizeof os.after));
    cf_stats now = cft_stats(f);
    CHECK_EQ_U(os.s.items, 3000);
    CHECK_EQ_U(os.s.slots, now.slots);
    CHECK_EQ_U(os.s.bucket_size, 2);
    CHECK_EQ_U(os.s.fingerprint_bits, CF_DEFAULT_FINGERPRINT_BITS);
    CHECK(os.s.load_factor == now.load_factor && os.s.fpr == now.fpr);

    struct {
        old_config c;
        unsigned char after[CANARY_SIZE];
    } ocb;
    memset(&ocb, CANARY, sizeof ocb);
    CHECK_ST(cf_get_config_sized(f, (cf_config *)(void *)&ocb.c, sizeof ocb.c), CF_OK);
    CHECK(untouched(ocb.after, sizeof ocb.after));
    CHECK_EQ_U(ocb.c.capacity, 5000);
    CHECK_EQ_U(ocb.c.seed, 77);
    CHECK_EQ_U(ocb.c.max_kicks, CF_DEFAULT_MAX_KICKS);
    CHECK(ocb.c.allocator == NULL);

    /* Smaller than any layout there ever was: refused, nothing written. */
    memset(&os, CANARY, sizeof os);
    CHECK_ST(cf_get_stats_sized(f, (cf_stats *)(void *)&os.s, CF_STATS_SIZE_MIN - 1), CF_EINVAL);
    CHECK(untouched((const unsigned char *)&os, sizeof os));
    CHECK_ST(cf_get_config_sized(f, &cfg, CF_CONFIG_SIZE_MIN - 1), CF_EINVAL);
    cf_filter *h = NULL;
    CHECK_ST(cf_new_sized(&cfg, CF_CONFIG_SIZE_MIN - 1, &h), CF_EINVAL);
    CHECK(h == NULL);
    size_t bytes = 0;
    CHECK_ST(cf_bytes_needed_sized(&cfg, 0, &bytes), CF_EINVAL);
    CHECK_ST(cf_bytes_needed_sized((const cf_config *)(const void *)&oc, sizeof oc, &bytes), CF_OK);
    size_t want = 0;
    CHECK_ST(cf_bytes_needed(&cfg, &want), CF_OK);
    CHECK_EQ_U(bytes, want);
    cf_free(f);
    cf_free(g);
}

/* A program built against a later header (one more field), run against this library. */
static void test_new_caller(void)
{
    cft_context("new caller");
    new_config nc;
    memset(&nc, 0, sizeof nc);
    nc.now.capacity = 1000;
    nc.now.seed = 5;
    cf_filter *f = NULL;
    /* The field this library does not know is 0: "as before", so the call works. */
    if (!CHECK_ST(cf_new_sized(&nc.now, sizeof nc, &f), CF_OK))
        return;
    /* Set, it would be ignored: refused instead, as every call that reads a config. */
    nc.later = 1;
    cf_filter *g = NULL;
    size_t bytes;
    cf_config resolved;
    CHECK_ST(cf_new_sized(&nc.now, sizeof nc, &g), CF_EINVAL);
    CHECK(g == NULL);
    CHECK_ST(cf_bytes_needed_sized(&nc.now, sizeof nc, &bytes), CF_EINVAL);
    CHECK_ST(cf_config_resolve_sized(&nc.now, sizeof nc, &resolved, sizeof resolved), CF_EINVAL);

    /* Outputs: the field this library does not know reads 0, whatever was there. */
    new_stats ns;
    memset(&ns, CANARY, sizeof ns);
    CHECK_ST(cf_get_stats_sized(f, &ns.now, sizeof ns), CF_OK);
    CHECK_EQ_U(ns.later, 0);
    CHECK_EQ_U(ns.now.capacity, 1000);
    new_config back;
    memset(&back, CANARY, sizeof back);
    CHECK_ST(cf_get_config_sized(f, &back.now, sizeof back), CF_OK);
    CHECK_EQ_U(back.later, 0);
    CHECK_EQ_U(back.now.seed, 5);
    cf_free(f);
}

static void test_resolve(void)
{
    cft_context("cf_config_resolve");
    cf_config in = {.capacity = 12345, .expansion = 2, .seed = 9}, out;
    memset(&out, 0xff, sizeof out);
    if (!CHECK_ST(cf_config_resolve(&in, &out), CF_OK))
        return;
    CHECK_EQ_U(out.capacity, 12345);
    CHECK_EQ_U(out.fingerprint_bits, CF_DEFAULT_FINGERPRINT_BITS);
    CHECK_EQ_U(out.bucket_size, CF_DEFAULT_BUCKET_SIZE);
    CHECK_EQ_U(out.max_kicks, CF_DEFAULT_MAX_KICKS);
    CHECK_EQ_U(out.max_sub_filters, CF_DEFAULT_MAX_SUB_FILTERS);
    CHECK_EQ_U(out.expansion, 2);
    CHECK_EQ_U(out.seed, 9);
    CHECK_EQ_U(out.flags, 0);
    CHECK(out.allocator == NULL && out.target_fpr == 0.0);

    /* Resolving is idempotent, and the resolved config makes the same filter. */
    cf_config again;
    CHECK_ST(cf_config_resolve(&out, &again), CF_OK);
    CHECK(memcmp(&again, &out, sizeof out) == 0);
    cf_filter *a = NULL, *b = NULL;
    CHECK_ST(cf_new(&in, &a), CF_OK);
    CHECK_ST(cf_new(&out, &b), CF_OK);
    if (a && b) {
        cf_config ca, cb;
        cf_get_config(a, &ca);
        cf_get_config(b, &cb);
        CHECK(memcmp(&ca, &cb, sizeof ca) == 0);
        CHECK_EQ_U(cft_stats(a).bytes, cft_stats(b).bytes);
    }
    cf_free(a);
    cf_free(b);

    /* Refused as cf_new refuses, out untouched; seed 0 is not drawn here. */
    cf_config bad[] = {
        {.capacity = 0},
        {.capacity = 10, .fingerprint_bits = 3},
        {.capacity = 10, .bucket_size = 256},
        {.capacity = 10, .flags = 0x80000000u}, /* a flag no library has */
        {.capacity = UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&out, 0xab, sizeof out);
        CHECK_ST(cf_config_resolve(&bad[i], &out), CF_EINVAL);
        CHECK(((unsigned char *)&out)[0] == 0xab);
    }
    CHECK_ST(cf_config_resolve(NULL, &out), CF_EINVAL);
    CHECK_ST(cf_config_resolve(&in, NULL), CF_EINVAL);
    cf_config zero = {.capacity = 10};
    CHECK_ST(cf_config_resolve(&zero, &out), CF_OK);
    CHECK_EQ_U(out.seed, 0);
    CHECK_EQ_U(out.flags, 0);
}

/* target_fpr picks the narrowest width that meets it, for every bucket size. */
static void test_target_fpr(void)
{
    const double targets[] = {0.5, 0.1, 0.03, 0.01, 1e-3, 2e-4, 1e-5, 1e-7, 2e-9};
    const unsigned sizes[] = {1, 2, 4, 8, 16};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (size_t ti = 0; ti < sizeof targets / sizeof targets[0]; ti++) {
            unsigned b = sizes[si];
            double t = targets[ti];
            cft_context("target_fpr %g, b %u", t, b);
            cf_config c = {.capacity = 1000, .bucket_size = b, .target_fpr = t}, out;
            cf_status st = cf_config_resolve(&c, &out);
            /* The widest fingerprint cannot meet it: refused, not quietly missed. */
            if (cf_expected_fpr(CF_MAX_FINGERPRINT_BITS, b, 1.0) > t) {
                CHECK_ST(st, CF_EINVAL);
                continue;
            }
            if (!CHECK_ST(st, CF_OK))
                continue;
            unsigned f = out.fingerprint_bits;
            CHECK(out.target_fpr == 0.0);
            CHECK_MSG(cf_expected_fpr(f, b, 1.0) <= t, "f %u gives %g", f,
                      cf_expected_fpr(f, b, 1.0));
            CHECK_MSG(f == CF_MIN_FINGERPRINT_BITS || cf_expected_fpr(f - 1, b, 1.0) > t,
                      "f %u is not the narrowest", f);
            cf_filter *flt = NULL;
            if (CHECK_ST(cf_new(&c, &flt), CF_OK))
                CHECK_EQ_U(cft_stats(flt).fingerprint_bits, f);
            cf_free(flt);
        }
    }
    cft_context("target_fpr refused");
    const double bad[] = {-0.1, 1.0, 2.0, 1e-30, (double)NAN, (double)INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cf_config c = {.capacity = 1000, .target_fpr = bad[i]};
        cf_filter *flt = NULL;
        CHECK_MSG(cf_new(&c, &flt) == CF_EINVAL, "target %g accepted", bad[i]);
        cf_free(flt);
    }
    cf_config both = {.capacity = 1000, .fingerprint_bits = 12, .target_fpr = 0.01};
    cf_filter *flt = NULL;
    CHECK_ST(cf_new(&both, &flt), CF_EINVAL);
}

/* cf_add_keys gives the filter and the statuses that one cf_add (cf_add_unique) per key
 * gives, NULL keys included, across its internal batches, up to and past full. */
static void test_add_keys(void)
{
    enum { N = 3000 };
    static const void *keys[N];
    static size_t lens[N];
    static uint8_t store[N][CFT_KEY_MAX];
    static cf_status got[N];
    cft_rng rng = cft_rng_make(cft_subseed(31));
    for (unsigned unique = 0; unique < 2; unique++) {
        cft_context("cf_add_keys, unique %u", unique);
        for (size_t i = 0; i < N; i++) {
            /* Repeats (for CF_ADD_UNIQUE), and now and then a NULL key with bytes. */
            uint64_t id = cft_below(&rng, N / 2);
            lens[i] = cft_key_var(store[i], 7, id);
            keys[i] = cft_below(&rng, 97) == 0 ? NULL : store[i];
        }
        keys[0] = NULL;
        keys[N - 1] = NULL;
        cf_config c = {.capacity = 1000, .seed = 3}; /* fills up about a third of the way */
        cf_filter *f = NULL, *g = NULL;
        if (!CHECK_ST(cf_new(&c, &f), CF_OK) || !CHECK_ST(cf_new(&c, &g), CF_OK)) {
            cf_free(f);
            return;
        }
        size_t added = cf_add_keys(f, keys, lens, N, unique ? CF_ADD_UNIQUE : 0, got);
        size_t want_added = 0;
        for (size_t i = 0; i < N; i++) {
            cf_status want = !keys[i] ? CF_EINVAL
                             : unique ? cf_add_unique(g, keys[i], lens[i])
                                      : cf_add(g, keys[i], lens[i]);
            want_added += want == CF_OK;
            if (!CHECK_MSG(got[i] == want, "key %zu: %s, cf_add says %s", i,
                           cft_status_name(got[i]), cft_status_name(want)))
                break;
        }
        CHECK_EQ_U(added, want_added);
        CHECK(want_added < N); /* the filter did fill */
        CHECK_MSG(cft_same_bytes(f, g), "cf_add_keys made another filter than cf_add");
        /* Without a status array the same keys are added. */
        cf_clear(g);
        CHECK_EQ_U(cf_add_keys(g, keys, lens, N, unique ? CF_ADD_UNIQUE : 0, NULL), added);
        cf_free(f);
        cf_free(g);
    }

    cft_context("cf_add_keys refused");
    cf_config c = {.capacity = 100};
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    cf_status st[2] = {CF_OK, CF_OK};
    const void *two[2] = {"a", "b"};
    size_t two_lens[2] = {1, 1};
    CHECK_EQ_U(cf_add_keys(NULL, two, two_lens, 2, 0, st), 0);
    CHECK(st[0] == CF_EINVAL && st[1] == CF_EINVAL);
    CHECK_EQ_U(cf_add_keys(f, NULL, two_lens, 2, 0, st), 0);
    CHECK_EQ_U(cf_add_keys(f, two, NULL, 2, 0, st), 0);
    CHECK_EQ_U(cf_add_keys(f, two, two_lens, 2, 2, st), 0);
    CHECK(st[0] == CF_EINVAL && st[1] == CF_EINVAL);
    CHECK_EQ_U(cf_add_keys(f, NULL, NULL, 0, 0, NULL), 0);
    CHECK_EQ_U(cft_stats(f).items, 0);
    CHECK_EQ_U(cf_add_keys(f, two, two_lens, 2, 0, st), 2);
    CHECK(st[0] == CF_OK && st[1] == CF_OK && cf_contains(f, "a", 1) && cf_contains(f, "b", 1));
    cf_free(f);
}

int main(void)
{
    cft_init("test_abi");
    test_sizes();
    test_old_caller();
    test_new_caller();
    test_resolve();
    test_target_fpr();
    test_add_keys();
    cft_context("end");
    return cft_finish();
}
