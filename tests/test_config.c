/*
 * test_config.c - invalid configurations give CF_EINVAL (and never crash or allocate
 * absurdly); every valid boundary works; zero fields take their defaults.
 */
#include "testutil.h"

#include <limits.h>

static cf_filter *const SENTINEL = (cf_filter *)&cft; /* never dereferenced */

/* An allocator that refuses anything above 256 MiB: even if a bad config slipped through,
 * the test never asks the system for petabytes (which ASan would turn into an abort). */
static cft_alloc capped;

/* cfg must be rejected by both cf_bytes_needed and cf_new, leaving *out untouched and
 * allocating nothing. */
static void expect_einval(const cf_config *cfg, const char *what)
{
    cft_context("invalid config: %s", what);
    size_t bytes = 0;
    cf_status rb = cf_bytes_needed(cfg, &bytes);
    CHECK_ST(rb, CF_EINVAL);
    const char *why = NULL;
    CHECK_ST(cf_config_check(cfg, &why), CF_EINVAL);
    CHECK(why != NULL && *why != '\0');

    cf_config c = *cfg;
    if (c.allocator == NULL)
        c.allocator = &capped.a;
    uint64_t live = capped.live;
    cf_filter *out = SENTINEL;
    cf_status rn = cf_new(&c, &out);
    CHECK_ST(rn, CF_EINVAL);
    CHECK(out == SENTINEL);
    CHECK_EQ_U(capped.live, live);
    if (rn == CF_OK && out != SENTINEL)
        cf_free(out);

    /* With the default allocator too, but only when that cannot mean a giant malloc. */
    if (cfg->allocator == NULL && rb == CF_EINVAL && rn == CF_EINVAL) {
        out = SENTINEL;
        rn = cf_new(cfg, &out);
        CHECK_ST(rn, CF_EINVAL);
        CHECK(out == SENTINEL);
        if (rn == CF_OK && out != SENTINEL)
            cf_free(out);
    }
}

static void test_invalid(void)
{
    const cf_config base = {.capacity = 1000};
    cf_config c;
    char what[128];

    /* NULL arguments. */
    cft_context("NULL config/out");
    cf_filter *out = SENTINEL;
    CHECK_ST(cf_new(NULL, &out), CF_EINVAL);
    CHECK(out == SENTINEL);
    CHECK_ST(cf_new(&base, NULL), CF_EINVAL);
    size_t bytes = 0;
    CHECK_ST(cf_bytes_needed(NULL, &bytes), CF_EINVAL);
    CHECK_ST(cf_bytes_needed(&base, NULL), CF_EINVAL);
    CHECK_ST(cf_bytes_needed(NULL, NULL), CF_EINVAL);

    /* Capacity 0 and absurd capacities, also with every shape that makes them bigger. */
    const uint64_t caps[] = {0,
                             UINT64_MAX,
                             UINT64_MAX - 1,
                             UINT64_MAX / 2,
                             UINT64_C(1) << 62,
                             UINT64_C(1) << 56,
                             UINT64_C(1) << 50,
                             (UINT64_C(1) << 50) + 12345};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        const unsigned bs[] = {0, 1, 4, 255};
        const unsigned fs[] = {0, 4, 32};
        for (size_t bi = 0; bi < 4; bi++)
            for (size_t fi = 0; fi < 3; fi++) {
                c = base;
                c.capacity = caps[i];
                c.bucket_size = bs[bi];
                c.fingerprint_bits = fs[fi];
                snprintf(what, sizeof what, "capacity %llu b %u f %u", (unsigned long long)caps[i],
                         bs[bi], fs[fi]);
                expect_einval(&c, what);
            }
    }

    /* Fingerprint widths outside 4..32 (0 means the default, tested below). */
    const unsigned bad_f[] = {1, 2, 3, 33, 34, 64, 1000, UINT_MAX};
    for (size_t i = 0; i < sizeof bad_f / sizeof bad_f[0]; i++) {
        c = base;
        c.fingerprint_bits = bad_f[i];
        snprintf(what, sizeof what, "fingerprint_bits %u", bad_f[i]);
        expect_einval(&c, what);
    }

    /* Bucket sizes above 255 (0 means the default). */
    const unsigned bad_b[] = {256, 257, 1000, 65536, UINT_MAX};
    for (size_t i = 0; i < sizeof bad_b / sizeof bad_b[0]; i++) {
        c = base;
        c.bucket_size = bad_b[i];
        snprintf(what, sizeof what, "bucket_size %u", bad_b[i]);
        expect_einval(&c, what);
    }

    /* Kick budgets above 65535. */
    const unsigned bad_k[] = {65536, 65537, 1000000, UINT_MAX};
    for (size_t i = 0; i < sizeof bad_k / sizeof bad_k[0]; i++) {
        c = base;
        c.max_kicks = bad_k[i];
        snprintf(what, sizeof what, "max_kicks %u", bad_k[i]);
        expect_einval(&c, what);
    }

    /* Sub-filter limits above 65536. */
    const unsigned bad_s[] = {65537, 100000, UINT_MAX};
    for (size_t i = 0; i < sizeof bad_s / sizeof bad_s[0]; i++) {
        c = base;
        c.max_sub_filters = bad_s[i];
        c.expansion = 2;
        snprintf(what, sizeof what, "max_sub_filters %u", bad_s[i]);
        expect_einval(&c, what);
    }

    /* Allocators missing a function. */
    cf_allocator half = capped.a;
    half.alloc = NULL;
    c = base;
    c.allocator = &half;
    expect_einval(&c, "allocator without alloc");
    half = capped.a;
    half.free = NULL;
    expect_einval(&c, "allocator without free");
    half.alloc = NULL;
    expect_einval(&c, "allocator without alloc and free");

    /* Several bad fields at once. */
    c = base;
    c.capacity = 0;
    c.fingerprint_bits = 99;
    c.bucket_size = 999;
    expect_einval(&c, "everything wrong");
}

/* cf_config_check names the rule each config breaks. */
static void test_reasons(void)
{
    static const struct {
        cf_config c;
        const char *reason;
    } cases[] = {
        {{.capacity = 0}, "capacity must be at least 1"},
        {{.capacity = 10, .fingerprint_bits = 3}, "4 to 32 bits"},
        {{.capacity = 10, .fingerprint_bits = 33}, "4 to 32 bits"},
        {{.capacity = 10, .bucket_size = 256}, "1 to 255"},
        {{.capacity = 10, .fingerprint_bits = 12, .target_fpr = 0.01}, "alternatives"},
        {{.capacity = 10, .target_fpr = 1e-30}, "target rate"},
        {{.capacity = 10, .flags = CF_SEMI_SORT, .bucket_size = 2}, "4 slots"},
        {{.capacity = 10, .fpr_bound = 0.5}, "rate bound is for growing"},
        {{.capacity = 10, .expansion = 2, .fpr_bound = 1e-9}, "rate bound must"},
        {{.capacity = 10, .generations = 1}, "generations must be"},
        {{.capacity = 10, .window = 5}, "needs generations"},
        {{.capacity = 10, .flags = 1u << 30}, "unknown flags"},
        {{.capacity = 10, .flags = CF_REDISBLOOM, .seed = 3}, "RedisBloom"},
        {{.capacity = UINT64_MAX}, "capacity is too large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cft_context("reason: %s", cases[i].reason);
        const char *why = NULL;
        CHECK_ST(cf_config_check(&cases[i].c, &why), CF_EINVAL);
        CHECK_MSG(why && strstr(why, cases[i].reason), "got \"%s\"", why ? why : "(null)");
    }
    cft_context("reason: NULL");
    const char *why = NULL;
    CHECK_ST(cf_config_check(NULL, &why), CF_EINVAL);
    CHECK(why && strstr(why, "NULL"));
    CHECK_ST(cf_config_check(&cases[1].c, NULL), CF_EINVAL);
}

/* A valid config: cf_new works, the filter holds what it says, and a few keys behave. */
static void expect_valid(const cf_config *cfg, const char *what, unsigned want_b, unsigned want_f)
{
    cft_context("valid config: %s", what);
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_config c = *cfg;
    c.allocator = &ta.a;
    size_t need = 0;
    CHECK_ST(cf_bytes_needed(&c, &need), CF_OK);
    const char *why = "unset";
    CHECK_ST(cf_config_check(&c, &why), CF_OK);
    CHECK(why == NULL);
    cf_filter *f = SENTINEL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    CHECK(f != SENTINEL && f != NULL);
    CHECK_EQ_U(ta.total_bytes, need);
    cf_stats s = cft_stats(f);
    CHECK_EQ_U(s.bucket_size, want_b);
    CHECK_EQ_U(s.fingerprint_bits, want_f);
    CHECK_EQ_U(s.sub_filters, 1);
    CHECK_EQ_U(s.items, 0);
    CHECK(s.slots >= c.capacity);
    CHECK_EQ_U(s.slots, s.buckets * want_b);

    uint8_t k[CFT_KEY_MAX];
    const uint64_t n = c.capacity < 20 ? c.capacity : 20;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = cft_key(k, 1, i);
        CHECK_ST(cf_add(f, k, len), CF_OK);
    }
    for (uint64_t i = 0; i < n; i++) {
        size_t len = cft_key(k, 1, i);
        CHECK(cf_contains(f, k, len));
        CHECK(cf_count(f, k, len) >= 1);
    }
    for (uint64_t i = 0; i < n; i++) {
        size_t len = cft_key(k, 1, i);
        CHECK_ST(cf_delete(f, k, len), CF_OK);
    }
    CHECK_EQ_U(cft_stats(f).items, 0);
    cf_free(f);
    CHECK_ALLOC_CLEAN(&ta);
}

static void test_valid(void)
{
    cf_config c;
    char what[128];

    c = (cf_config){.capacity = 1};
    expect_valid(&c, "capacity 1", 4, 12);
    c = (cf_config){.capacity = 2};
    expect_valid(&c, "capacity 2", 4, 12);

    /* Zero fields take the defaults: f 12, b 4 ("bucket size 0" is valid). */
    c = (cf_config){.capacity = 1000, .bucket_size = 0, .fingerprint_bits = 0};
    expect_valid(&c, "b 0, f 0 -> defaults", CF_DEFAULT_BUCKET_SIZE, CF_DEFAULT_FINGERPRINT_BITS);
    c = (cf_config){.capacity = 1000, .bucket_size = 0, .fingerprint_bits = 16};
    expect_valid(&c, "b 0 -> 4", 4, 16);
    c = (cf_config){.capacity = 1000, .bucket_size = 2, .fingerprint_bits = 0};
    expect_valid(&c, "f 0 -> 12", 2, 12);
    c = (cf_config){.capacity = 1000, .max_kicks = 0, .max_sub_filters = 0, .expansion = 0};
    expect_valid(&c, "max_kicks 0, max_sub_filters 0", 4, 12);

    /* Boundaries of every range. */
    const unsigned fs[] = {4, 5, 7, 8, 9, 12, 16, 17, 23, 24, 31, 32};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        c = (cf_config){.capacity = 1000, .fingerprint_bits = fs[i]};
        snprintf(what, sizeof what, "f %u", fs[i]);
        expect_valid(&c, what, 4, fs[i]);
    }
    const unsigned bs[] = {1, 2, 3, 4, 5, 7, 8, 16, 100, 254, 255};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) {
        for (unsigned f = 4; f <= 32; f += 28) {
            c = (cf_config){.capacity = 1000, .bucket_size = bs[i], .fingerprint_bits = f};
            snprintf(what, sizeof what, "b %u f %u", bs[i], f);
            expect_valid(&c, what, bs[i], f);
            c.capacity = 1;
            snprintf(what, sizeof what, "b %u f %u capacity 1", bs[i], f);
            expect_valid(&c, what, bs[i], f);
        }
    }
    const unsigned ks[] = {1, 2, 65534, 65535};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        c = (cf_config){.capacity = 1000, .max_kicks = ks[i]};
        snprintf(what, sizeof what, "max_kicks %u", ks[i]);
        expect_valid(&c, what, 4, 12);
    }
    const unsigned ss[] = {1, 2, 65535, 65536};
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        c = (cf_config){.capacity = 1000, .max_sub_filters = ss[i], .expansion = 1};
        snprintf(what, sizeof what, "max_sub_filters %u", ss[i]);
        expect_valid(&c, what, 4, 12);
    }
    const uint64_t seeds[] = {0, 1, UINT64_MAX};
    for (size_t i = 0; i < 3; i++) {
        c = (cf_config){.capacity = 1000, .seed = seeds[i]};
        snprintf(what, sizeof what, "seed %llu", (unsigned long long)seeds[i]);
        expect_valid(&c, what, 4, 12);
    }
    const unsigned es[] = {1, 2, 3, 4, 16, 1000};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) {
        c = (cf_config){.capacity = 100, .expansion = es[i]};
        snprintf(what, sizeof what, "expansion %u", es[i]);
        expect_valid(&c, what, 4, 12);
    }
    /* A large but sane capacity (fits easily in memory). */
    c = (cf_config){.capacity = 10000000, .fingerprint_bits = 8};
    expect_valid(&c, "capacity 1e7 f 8", 4, 8);
}

/* The kick budget takes effect: with max_kicks 1 a fixed filter fills up to a lower load
 * than with the default budget (same seed, same keys). */
static void test_max_kicks_effect(void)
{
    cft_context("max_kicks effect");
    double load[2] = {0, 0};
    const unsigned kicks[2] = {1, 0};
    for (int i = 0; i < 2; i++) {
        cf_config c = {.capacity = 20000, .max_kicks = kicks[i], .seed = cft_subseed(1)};
        cf_filter *f = NULL;
        if (!CHECK_ST(cf_new(&c, &f), CF_OK))
            return;
        uint8_t k[CFT_KEY_MAX];
        for (uint64_t id = 0; id < 100000; id++) {
            size_t len = cft_key(k, 2, id);
            cf_status rc = cf_add(f, k, len);
            if (rc != CF_OK) {
                CHECK_ST(rc, CF_FULL);
                break;
            }
        }
        load[i] = cft_stats(f).load_factor;
        cf_free(f);
    }
    CHECK_MSG(load[0] < load[1], "load at first failure: max_kicks 1 %.4f, default %.4f", load[0],
              load[1]);
    CHECK_MSG(load[1] >= 0.90, "default budget, b 4: first failure at load %.4f", load[1]);
}

/* An enormous expansion factor must not crash or overflow when the filter grows: the add
 * either grows, or reports CF_FULL / CF_ENOMEM with nothing lost. */
static void test_absurd_expansion(void)
{
    const unsigned es[] = {65536, 1u << 24, UINT_MAX};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) {
        cft_context("expansion %u", es[i]);
        cft_alloc ta;
        cft_alloc_init(&ta);
        ta.max_size = UINT64_C(256) << 20;
        cf_config c = {.capacity = 100, .expansion = es[i], .allocator = &ta.a};
        cf_filter *f = SENTINEL;
        cf_status rc = cf_new(&c, &f);
        CHECK(rc == CF_OK || rc == CF_EINVAL);
        if (rc != CF_OK) {
            CHECK(f == SENTINEL);
            CHECK_ALLOC_CLEAN(&ta);
            continue;
        }
        uint8_t k[CFT_KEY_MAX];
        uint64_t added = 0;
        for (uint64_t id = 0; id < 5000; id++) {
            size_t len = cft_key(k, 3, id);
            rc = cf_add(f, k, len);
            if (rc == CF_OK) {
                added++;
                continue;
            }
            CHECK_MSG(rc == CF_FULL || rc == CF_ENOMEM, "add returned %s", cft_status_name(rc));
            break;
        }
        CHECK_EQ_U(cft_stats(f).items, added);
        for (uint64_t id = 0; id < added; id++) {
            size_t len = cft_key(k, 3, id);
            CHECK(cf_contains(f, k, len));
        }
        cf_free(f);
        CHECK_ALLOC_CLEAN(&ta);
    }
}

/* The seed: secret (drawn, never 0) unless the config fixes one; a fixed seed, 0
 * included with CF_FIXED_SEED, gives the same filter every time; cf_get_config gives a
 * config that makes the same filter again. */
static void test_seeds(void)
{
    cft_context("seeds");
    enum { FILTERS = 8, KEYS = 500 };
    uint64_t seen[FILTERS];
    for (unsigned i = 0; i < FILTERS; i++) {
        cf_config c = {.capacity = 1000}, back;
        cf_filter *f = NULL, *g = NULL;
        if (!CHECK_ST(cf_new(&c, &f), CF_OK))
            return;
        cf_get_config(f, &back);
        seen[i] = back.seed;
        CHECK(back.seed != 0 && back.flags == 0);
        for (unsigned j = 0; j < i; j++)
            CHECK_MSG(seen[j] != seen[i], "filters %u and %u drew the same seed %llx", j, i,
                      (unsigned long long)seen[i]);
        /* Its config makes the same filter: the same keys give the same bytes. */
        if (CHECK_ST(cf_new(&back, &g), CF_OK)) {
            for (unsigned k = 0; k < KEYS; k++) {
                cf_add(f, &k, sizeof k);
                cf_add(g, &k, sizeof k);
            }
            CHECK(cft_same_bytes(f, g));
        }
        cf_free(f);
        cf_free(g);
    }
    /* Fixed: 0 with the flag, and any other value, as given. */
    const uint64_t fixed[] = {0, 1, UINT64_MAX};
    for (size_t i = 0; i < 3; i++) {
        cf_config c = {.capacity = 1000, .seed = fixed[i], .flags = fixed[i] ? 0 : CF_FIXED_SEED};
        cf_config back;
        cf_filter *f = NULL;
        if (!CHECK_ST(cf_new(&c, &f), CF_OK))
            continue;
        cf_get_config(f, &back);
        CHECK_EQ_U(back.seed, fixed[i]);
        CHECK_EQ_U(back.flags, fixed[i] ? 0u : CF_FIXED_SEED);
        CHECK_EQ_U(cf_hash(f, "k", 1), cf_hash_seeded(fixed[i], "k", 1));
        cf_free(f);
    }
    /* Unknown flags. */
    cf_config bad = {.capacity = 1000, .flags = 0x80000000u}; /* a flag no library has */
    cf_filter *f = NULL;
    size_t bytes;
    CHECK_ST(cf_new(&bad, &f), CF_EINVAL);
    CHECK(f == NULL);
    CHECK_ST(cf_bytes_needed(&bad, &bytes), CF_EINVAL);
}

/* A growing filter's config (cf_get_config) makes the same filter again, its widening
 * included, for every width: also where the default bound cannot be met and the widening
 * is the most there is (f 28 and more), which several widenings give. Filled past its
 * first sub-filter, the copy must serialize to the same bytes. */
static void test_growth_config(void)
{
    for (unsigned f = CF_MIN_FINGERPRINT_BITS; f <= CF_MAX_FINGERPRINT_BITS; f++) {
        for (unsigned b = 1; b <= 8; b *= 2) {
            cft_context("growth config f %u b %u", f, b);
            cf_config c = {.capacity = 100,
                           .fingerprint_bits = f,
                           .bucket_size = b,
                           .expansion = 2,
                           .seed = cft_subseed(f * 10 + b)},
                      back;
            cf_filter *a = cft_new(c);
            if (!a)
                continue;
            cf_get_config(a, &back);
            cf_filter *g = cft_new(back);
            if (g) {
                for (unsigned k = 0; k < 500; k++) {
                    cf_add(a, &k, sizeof k);
                    cf_add(g, &k, sizeof k);
                }
                CHECK(cft_stats(a).sub_filters > 1);
                CHECK(cft_same_bytes(a, g));
            }
            cf_free(a);
            cf_free(g);
        }
    }
}

/* CF_SEMI_SORT: 4-slot buckets only (the default size too), every width; the filter
 * reports it and makes the same filter again from its config; a semi-sorted table of f
 * bits takes the bytes of a plain one of f - 1. */
static void test_semi_config(void)
{
    for (unsigned b = 1; b <= 9; b++) {
        cft_context("semi-sorted b %u", b);
        cf_config c = {.capacity = 100, .bucket_size = b, .flags = CF_SEMI_SORT};
        cf_filter *f = NULL;
        size_t need;
        cf_status want = b == 4 ? CF_OK : CF_EINVAL;
        CHECK_ST(cf_bytes_needed(&c, &need), want);
        CHECK_ST(cf_new(&c, &f), want);
        cf_free(f);
    }
    for (unsigned fb = CF_MIN_FINGERPRINT_BITS; fb <= CF_MAX_FINGERPRINT_BITS; fb++) {
        cft_context("semi-sorted f %u", fb);
        cf_config c = {.capacity = 1000,
                       .fingerprint_bits = fb,
                       .expansion = fb % 3,
                       .seed = cft_subseed(700 + fb),
                       .flags = CF_SEMI_SORT},
                  back, resolved;
        CHECK_ST(cf_config_resolve(&c, &resolved), CF_OK);
        CHECK_EQ_U(resolved.flags & CF_SEMI_SORT, CF_SEMI_SORT);
        CHECK_EQ_U(resolved.bucket_size, 4);
        cf_filter *a = cft_new(c);
        if (!a)
            continue;
        cf_get_config(a, &back);
        CHECK_EQ_U(back.flags & CF_SEMI_SORT, CF_SEMI_SORT);
        cf_filter *g = cft_new(back);
        if (g) {
            for (unsigned k = 0; k < 2000; k++) {
                cf_add(a, &k, sizeof k);
                cf_add(g, &k, sizeof k);
            }
            CHECK(cft_same_bytes(a, g));
        }
        if (fb > CF_MIN_FINGERPRINT_BITS) {
            cf_config p = {.capacity = 1000, .fingerprint_bits = fb - 1, .seed = 1};
            cf_filter *plain = cft_new(p);
            if (plain) {
                cf_stats sp = cft_stats(plain), ss = cft_stats(a);
                if (c.expansion == 0)
                    CHECK_EQ_U(ss.bytes, sp.bytes);
                CHECK_EQ_U(ss.fingerprint_bits, fb);
            }
            cf_free(plain);
        }
        cf_free(a);
        cf_free(g);
    }
}

/* The mapping: the flags' rules, the default's switch at CF_SEGMENTED_MIN_BUCKETS, and
 * cf_get_config's flags, which make the same mapping again. */
static void test_mapping_config(void)
{
    cft_context("mapping config");
    const char *why = NULL;
    cf_config both = {.capacity = 1000, .flags = CF_SEGMENTED | CF_UNSEGMENTED};
    CHECK_ST(cf_config_check(&both, &why), CF_EINVAL);
    CHECK(why && strstr(why, "segments"));
    cf_config rb = {.capacity = 1000, .flags = CF_SEGMENTED | CF_REDISBLOOM};
    CHECK_ST(cf_config_check(&rb, &why), CF_EINVAL);
    cf_config rb_any = {.capacity = 1000, .flags = CF_UNSEGMENTED | CF_REDISBLOOM};
    CHECK_ST(cf_config_check(&rb_any, NULL), CF_OK);
    /* The default: segments from CF_SEGMENTED_MIN_BUCKETS buckets of the any-size sizing
     * on, found by bisection over the capacity. */
    uint64_t lo = 1, hi = UINT64_C(1) << 26;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        cf_config c = {.capacity = mid};
        cf_mapping m;
        CHECK_ST(cf_config_mapping(&c, &m), CF_OK);
        if (m.segment_bits)
            hi = mid;
        else
            lo = mid + 1;
    }
    cf_config below = {.capacity = lo - 1, .flags = CF_UNSEGMENTED}, at = {.capacity = lo};
    cf_mapping mb, ma;
    CHECK_ST(cf_config_mapping(&below, &mb), CF_OK);
    CHECK_ST(cf_config_mapping(&at, &ma), CF_OK);
    at.flags = CF_UNSEGMENTED;
    cf_mapping ma_any;
    CHECK_ST(cf_config_mapping(&at, &ma_any), CF_OK);
    CHECK(mb.buckets < CF_SEGMENTED_MIN_BUCKETS && ma_any.buckets >= CF_SEGMENTED_MIN_BUCKETS);
    CHECK_EQ_U(ma.segment_bits, CF_SEGMENT_BITS);
    CHECK_EQ_U(ma.buckets % (UINT64_C(1) << CF_SEGMENT_BITS), 0);
    CHECK(ma.buckets >= ma_any.buckets &&
          ma.buckets - ma_any.buckets < (UINT64_C(1) << CF_SEGMENT_BITS));
    printf("  segmented by default from capacity %llu (%llu buckets)\n", (unsigned long long)lo,
           (unsigned long long)ma.buckets);
    /* cf_get_config says what makes the same mapping: CF_SEGMENTED for a segmented
     * filter, CF_UNSEGMENTED for an any-size one the default would segment, neither for a
     * small one. */
    static const struct {
        uint64_t capacity;
        unsigned flags, want;
    } cases[] = {{1000, 0, 0},
                 {1000, CF_SEGMENTED, CF_SEGMENTED},
                 {1000, CF_UNSEGMENTED, 0},
                 {20000000, CF_UNSEGMENTED, CF_UNSEGMENTED}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cf_config c = {.capacity = cases[i].capacity, .seed = 3, .flags = cases[i].flags};
        cf_mapping m1, m2;
        CHECK_ST(cf_config_mapping(&c, &m1), CF_OK);
        cf_filter *f = NULL, *g = NULL;
        if (!CHECK_ST(cf_new(&c, &f), CF_OK))
            continue;
        cf_config back;
        cf_get_config(f, &back);
        CHECK_EQ_U(back.flags & (CF_SEGMENTED | CF_UNSEGMENTED), cases[i].want);
        CHECK_ST(cf_get_mapping(f, &m2), CF_OK);
        CHECK(m1.buckets == m2.buckets && m1.segment_bits == m2.segment_bits);
        if (CHECK_ST(cf_new(&back, &g), CF_OK)) {
            cf_mapping m3;
            CHECK_ST(cf_get_mapping(g, &m3), CF_OK);
            CHECK(m3.buckets == m2.buckets && m3.segment_bits == m2.segment_bits);
            cf_free(g);
        }
        cf_free(f);
    }
    cf_config rbc = {.capacity = 1000, .flags = CF_REDISBLOOM};
    cf_mapping mrb;
    CHECK_ST(cf_config_mapping(&rbc, &mrb), CF_EINVAL);
    /* The eviction budget: a segmented table's default is its own (asked for, or by size),
     * a budget given is kept. */
    const struct {
        uint64_t capacity;
        unsigned flags, kicks, want;
    } budgets[] = {{1000, 0, 0, CF_DEFAULT_MAX_KICKS},
                   {1000, CF_SEGMENTED, 0, CF_DEFAULT_MAX_KICKS_SEGMENTED},
                   {1000, CF_SEGMENTED, 500, 500},
                   {lo, 0, 0, CF_DEFAULT_MAX_KICKS_SEGMENTED},
                   {lo, CF_UNSEGMENTED, 0, CF_DEFAULT_MAX_KICKS},
                   {lo, 0, 77, 77}};
    for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
        cf_config c = {.capacity = budgets[i].capacity,
                       .max_kicks = budgets[i].kicks,
                       .flags = budgets[i].flags},
                  r;
        if (CHECK_ST(cf_config_resolve(&c, &r), CF_OK))
            CHECK_MSG(r.max_kicks == budgets[i].want, "budget case %zu: %u, not %u", i, r.max_kicks,
                      budgets[i].want);
    }
}

int main(void)
{
    cft_init("test_config");
    cft_alloc_init(&capped);
    capped.max_size = UINT64_C(256) << 20;
    test_invalid();
    test_reasons();
    test_valid();
    test_max_kicks_effect();
    test_absurd_expansion();
    test_seeds();
    test_growth_config();
    test_semi_config();
    test_mapping_config();
    cft_context("end");
    CHECK_ALLOC_CLEAN(&capped);
    return cft_finish();
}
