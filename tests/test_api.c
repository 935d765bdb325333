/*
 * test_api.c - unit tests for every public function and every status it can return.
 */
#include "testutil.h"

/* cf_new, cf_free, defaults, and NULL arguments of cf_new. */
static void test_new_free(void)
{
    cft_context("new/free");
    cf_filter *sentinel = (cf_filter *)&cft; /* never dereferenced */
    cf_filter *out = sentinel;
    cf_config cfg = {.capacity = 1000};

    CHECK_ST(cf_new(NULL, &out), CF_EINVAL);
    CHECK(out == sentinel);
    CHECK_ST(cf_new(&cfg, NULL), CF_EINVAL);
    CHECK_ST(cf_new(NULL, NULL), CF_EINVAL);

    cf_free(NULL); /* must be fine */

    /* Only capacity set: the documented defaults. */
    CHECK_ST(cf_new(&cfg, &out), CF_OK);
    CHECK(out != NULL && out != sentinel);
    cf_stats s = cft_stats(out);
    CHECK_EQ_U(s.fingerprint_bits, CF_DEFAULT_FINGERPRINT_BITS);
    CHECK_EQ_U(s.fingerprint_bits, 12);
    CHECK_EQ_U(s.bucket_size, CF_DEFAULT_BUCKET_SIZE);
    CHECK_EQ_U(s.bucket_size, 4);
    CHECK_EQ_U(s.sub_filters, 1);
    CHECK_EQ_U(s.items, 0);
    CHECK(s.slots >= cfg.capacity);
    CHECK_EQ_U(s.slots, s.buckets * s.bucket_size);
    CHECK(s.bytes > 0);
    CHECK(s.load_factor == 0.0);
    CHECK_EQ_U(s.stashed, 0);
    cf_free(out);

    /* The config is not retained: changing it afterwards changes nothing. */
    cf_config cfg2 = {.capacity = 5000, .bucket_size = 2, .fingerprint_bits = 16};
    cf_filter *g = NULL;
    CHECK_ST(cf_new(&cfg2, &g), CF_OK);
    cf_stats before = cft_stats(g);
    cfg2.capacity = 1;
    cfg2.bucket_size = 8;
    cfg2.fingerprint_bits = 4;
    cf_stats after = cft_stats(g);
    CHECK_STATS_EQ(before, after);
    CHECK_EQ_U(after.bucket_size, 2);
    CHECK_EQ_U(after.fingerprint_bits, 16);
    cf_free(g);
}

/* The allocator struct is copied: it may go away after cf_new; everything goes through it. */
static void test_allocator_copied(void)
{
    cft_context("allocator copied");
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_filter *f = NULL;
    {
        cf_allocator tmp = ta.a;
        cf_config cfg = {.capacity = 100, .expansion = 2, .allocator = &tmp};
        CHECK_ST(cf_new(&cfg, &f), CF_OK);
        tmp.alloc = NULL; /* the filter must use its own copy */
        tmp.free = NULL;
        tmp.ctx = NULL;
    }
    if (f == NULL)
        return;
    CHECK(ta.live > 0);
    uint64_t calls_after_new = ta.calls;
    uint8_t k[CFT_KEY_MAX];
    uint64_t n = 0;
    cf_stats s = cft_stats(f);
    /* Grow the filter: growth must allocate through the copied allocator. */
    while (s.sub_filters < 3 && n < 100000) {
        size_t len = cft_key(k, 1, n++);
        if (!CHECK_ST(cf_add(f, k, len), CF_OK))
            break;
        s = cft_stats(f);
    }
    CHECK(s.sub_filters >= 3);
    CHECK(ta.calls > calls_after_new);
    cf_free(f);
    CHECK_ALLOC_CLEAN(&ta);
    CHECK_EQ_U(ta.frees, ta.calls - ta.failures);
}

/* cf_add, cf_contains, cf_delete, cf_count, cf_add_unique on a small filter. */
static void test_basic_ops(void)
{
    cft_context("basic ops");
    cf_filter *f = cft_new((cf_config){.capacity = 1000, .seed = 42});
    if (f == NULL)
        return;

    CHECK(!cf_contains(f, "alice", 5));
    CHECK_EQ_U(cf_count(f, "alice", 5), 0);
    CHECK_ST(cf_delete(f, "alice", 5), CF_NOT_FOUND); /* empty filter: certain */

    CHECK_ST(cf_add(f, "alice", 5), CF_OK);
    CHECK(cf_contains(f, "alice", 5));
    CHECK_EQ_U(cf_count(f, "alice", 5), 1);
    CHECK_EQ_U(cft_stats(f).items, 1);

    /* Duplicates are stored and counted (only one key in the filter: counts exact). */
    CHECK_ST(cf_add(f, "alice", 5), CF_OK);
    CHECK_ST(cf_add(f, "alice", 5), CF_OK);
    CHECK_EQ_U(cf_count(f, "alice", 5), 3);
    CHECK_EQ_U(cft_stats(f).items, 3);
    CHECK_ST(cf_delete(f, "alice", 5), CF_OK);
    CHECK_EQ_U(cf_count(f, "alice", 5), 2);
    CHECK(cf_contains(f, "alice", 5));
    CHECK_ST(cf_delete(f, "alice", 5), CF_OK);
    CHECK_ST(cf_delete(f, "alice", 5), CF_OK);
    CHECK_EQ_U(cf_count(f, "alice", 5), 0);
    CHECK(!cf_contains(f, "alice", 5));
    CHECK_ST(cf_delete(f, "alice", 5), CF_NOT_FOUND);
    CHECK_EQ_U(cft_stats(f).items, 0);

    /* cf_add_unique: CF_OK, then CF_EXISTS with nothing added. */
    CHECK_ST(cf_add_unique(f, "bob", 3), CF_OK);
    CHECK_ST(cf_add_unique(f, "bob", 3), CF_EXISTS);
    CHECK_ST(cf_add_unique(f, "bob", 3), CF_EXISTS);
    CHECK_EQ_U(cf_count(f, "bob", 3), 1);
    CHECK_EQ_U(cft_stats(f).items, 1);
    /* After cf_add of the same key, add_unique still says EXISTS. */
    CHECK_ST(cf_add(f, "bob", 3), CF_OK);
    CHECK_ST(cf_add_unique(f, "bob", 3), CF_EXISTS);
    CHECK_EQ_U(cf_count(f, "bob", 3), 2);

    /* The empty key: NULL with length 0 is valid, and is the same key as "" of length 0. */
    CHECK(!cf_contains(f, NULL, 0));
    CHECK_ST(cf_add(f, NULL, 0), CF_OK);
    CHECK(cf_contains(f, NULL, 0));
    CHECK(cf_contains(f, "", 0));
    CHECK(cf_contains(f, "xyz", 0));
    CHECK_EQ_U(cf_count(f, NULL, 0), 1);
    CHECK_ST(cf_add_unique(f, NULL, 0), CF_EXISTS);
    CHECK_ST(cf_delete(f, "", 0), CF_OK);
    CHECK(!cf_contains(f, NULL, 0));
    CHECK_ST(cf_delete(f, NULL, 0), CF_NOT_FOUND);
    CHECK_ST(cf_add_unique(f, NULL, 0), CF_OK);
    CHECK_EQ_U(cf_count(f, NULL, 0), 1);
    CHECK_EQ_U(cf_hash(f, NULL, 0), cf_hash(f, "", 0));

    /* Many distinct keys of many lengths, including long ones and one-byte differences. */
    uint8_t big[1000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 7 + 3);
    uint64_t items0 = cft_stats(f).items;
    for (size_t len = 1; len <= sizeof big; len += 37)
        CHECK_ST(cf_add(f, big, len), CF_OK);
    for (size_t len = 1; len <= sizeof big; len += 37)
        CHECK(cf_contains(f, big, len));
    uint64_t added = (sizeof big - 1) / 37 + 1;
    CHECK_EQ_U(cft_stats(f).items, items0 + added);
    for (size_t len = 1; len <= sizeof big; len += 37)
        CHECK_ST(cf_delete(f, big, len), CF_OK);
    CHECK_EQ_U(cft_stats(f).items, items0);
    cf_free(f);
}

/* NULL filter / NULL key arguments everywhere: CF_EINVAL, false or 0, no crash. */
static void test_null_args(void)
{
    cft_context("NULL arguments");
    cf_filter *f = cft_new((cf_config){.capacity = 100, .seed = 1});
    if (f == NULL)
        return;
    CHECK_ST(cf_add(f, "k", 1), CF_OK);
    cf_stats before = cft_stats(f);

    CHECK_ST(cf_add(NULL, "k", 1), CF_EINVAL);
    CHECK_ST(cf_add(NULL, NULL, 0), CF_EINVAL);
    CHECK_ST(cf_add(f, NULL, 1), CF_EINVAL);
    CHECK_ST(cf_add(f, NULL, 100), CF_EINVAL);
    CHECK_ST(cf_add_unique(NULL, "k", 1), CF_EINVAL);
    CHECK_ST(cf_add_unique(f, NULL, 3), CF_EINVAL);
    CHECK(!cf_contains(NULL, "k", 1));
    CHECK(!cf_contains(NULL, NULL, 0));
    CHECK(!cf_contains(f, NULL, 1));
    CHECK_ST(cf_delete(NULL, "k", 1), CF_EINVAL);
    CHECK_ST(cf_delete(f, NULL, 1), CF_EINVAL);
    CHECK_EQ_U(cf_count(NULL, "k", 1), 0);
    CHECK_EQ_U(cf_count(f, NULL, 1), 0);
    cf_clear(NULL);

    cf_stats s;
    memset(&s, 0x5A, sizeof s);
    cf_stats s_copy = s;
    cf_get_stats(NULL, &s);
    CHECK(memcmp(&s, &s_copy, sizeof s) == 0); /* untouched */
    cf_get_stats(f, NULL);

    CHECK_EQ_U(cf_hash(NULL, "k", 1), 0);
    CHECK_EQ_U(cf_hash(NULL, NULL, 0), 0);
    (void)cf_hash(f, NULL, 5); /* only: no crash */

    uint64_t h = cf_hash(f, "k", 1);
    CHECK_ST(cf_add_hash(NULL, h), CF_EINVAL);
    CHECK(!cf_contains_hash(NULL, h));
    CHECK_ST(cf_delete_hash(NULL, h), CF_EINVAL);
    CHECK_EQ_U(cf_count_hash(NULL, h), 0);

    uint64_t hs[3] = {h, h + 1, h + 2};
    bool out[3] = {true, false, true};
    cf_contains_many(NULL, hs, 3, out);
    CHECK(out[0] && !out[1] && out[2]); /* untouched */
    cf_contains_many(f, NULL, 3, out);
    CHECK(out[0] && !out[1] && out[2]);
    cf_contains_many(f, hs, 3, NULL);
    cf_contains_many(f, hs, 0, out);
    CHECK(out[0] && !out[1] && out[2]);
    cf_contains_many(f, NULL, 0, NULL);

    /* The filter is as it was. */
    cf_stats after = cft_stats(f);
    CHECK_STATS_EQ(before, after);
    CHECK(cf_contains(f, "k", 1));
    CHECK_EQ_U(cf_count(f, "k", 1), 1);
    cf_free(f);
}

static void test_clear(void)
{
    cft_context("clear");
    for (unsigned expansion = 0; expansion <= 2; expansion += 2) {
        cf_filter *f = cft_new((cf_config){.capacity = 500,
                                           .bucket_size = 4,
                                           .fingerprint_bits = 12,
                                           .expansion = expansion,
                                           .seed = 77});
        if (f == NULL)
            return;
        uint64_t h_before = cf_hash(f, "seeded", 6);
        uint8_t k[CFT_KEY_MAX];
        uint64_t n = expansion ? 3000 : 400;
        for (uint64_t i = 0; i < n; i++) {
            size_t len = cft_key(k, 2, i);
            CHECK_ST(cf_add(f, k, len), CF_OK);
        }
        cf_stats full = cft_stats(f);
        CHECK_EQ_U(full.items, n);
        if (expansion)
            CHECK(full.sub_filters > 1);
        cf_clear(f);
        cf_stats s = cft_stats(f);
        CHECK_EQ_U(s.items, 0);
        CHECK(s.load_factor == 0.0);
        /* Same size (every sub-filter), settings and seed. */
        CHECK_EQ_U(s.slots, full.slots);
        CHECK_EQ_U(s.buckets, full.buckets);
        CHECK_EQ_U(s.bytes, full.bytes);
        CHECK_EQ_U(s.sub_filters, full.sub_filters);
        CHECK_EQ_U(s.fingerprint_bits, full.fingerprint_bits);
        CHECK_EQ_U(s.bucket_size, full.bucket_size);
        CHECK_EQ_U(cf_hash(f, "seeded", 6), h_before);
        for (uint64_t i = 0; i < n; i++) {
            size_t len = cft_key(k, 2, i);
            CHECK(!cf_contains(f, k, len));
            CHECK_EQ_U(cf_count(f, k, len), 0);
        }
        /* Usable again. */
        for (uint64_t i = 0; i < n; i++) {
            size_t len = cft_key(k, 3, i);
            CHECK_ST(cf_add(f, k, len), CF_OK);
        }
        for (uint64_t i = 0; i < n; i++) {
            size_t len = cft_key(k, 3, i);
            CHECK(cf_contains(f, k, len));
        }
        CHECK_EQ_U(cft_stats(f).items, n);
        cf_free(f);
    }
}

static void test_strerror_version(void)
{
    cft_context("strerror/version");
    const cf_status all[] = {CF_OK,     CF_NOT_FOUND, CF_FULL, CF_EXISTS,   CF_EINVAL,
                             CF_ENOMEM, CF_ECORRUPT,  CF_EIO,  CF_EVERSION, CF_EREADONLY};
    const size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n; i++) {
        const char *m = cf_strerror(all[i]);
        CHECK_MSG(m != NULL, "status %d", (int)all[i]);
        if (m == NULL)
            continue;
        CHECK_MSG(strlen(m) > 0 && strchr(m, '\n') == NULL, "status %d: \"%s\"", (int)all[i], m);
        /* Distinct texts for distinct statuses. */
        for (size_t j = 0; j < i; j++) {
            const char *o = cf_strerror(all[j]);
            CHECK_MSG(o == NULL || strcmp(m, o) != 0, "statuses %d and %d both say \"%s\"",
                      (int)all[i], (int)all[j], m);
        }
        /* Static: the same pointer every time. */
        CHECK(cf_strerror(all[i]) == m);
    }
    const int odd[] = {-1, 8, 9, 99, 12345, -2147483647 - 1, 2147483647};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        const char *m = cf_strerror((cf_status)odd[i]);
        CHECK_MSG(m != NULL, "cf_strerror(%d)", odd[i]);
    }

    const char *v = cf_version();
    if (CHECK(v != NULL)) {
        char want[64];
        snprintf(want, sizeof want, "%d.%d.%d", CF_VERSION_MAJOR, CF_VERSION_MINOR,
                 CF_VERSION_PATCH);
        CHECK_MSG(strcmp(v, want) == 0, "cf_version() \"%s\", header \"%s\"", v, want);
    }
    CHECK_EQ_I(CF_VERSION_NUMBER,
               CF_VERSION_MAJOR * 10000 + CF_VERSION_MINOR * 100 + CF_VERSION_PATCH);
}

/* cf_bytes_needed equals what cf_new allocates, counted by a tracking allocator. */
static void test_bytes_needed(void)
{
    static const struct {
        uint64_t cap;
        unsigned b, f, e;
    } cases[] = {
        {1, 0, 0, 0},
        {1, 1, 4, 0},
        {2, 2, 8, 0},
        {1000, 4, 12, 0},
        {1000, 4, 12, 2},
        {12345, 8, 16, 0},
        {100000, 2, 32, 1},
        {77777, 3, 7, 3},
        {5000, 255, 32, 0},
        {999, 16, 23, 4},
        {1100000, 4, 12, 0},
        {65536, 1, 5, 0},
        /* RedisBloom's layout (fingerprint width 0: its 8 bits), whose tables are unpadded */
        {4, 2, 0, 1},
        {1000, 2, 0, 2},
        {100000, 4, 0, 0},
        {5000, 255, 0, 1},
    };
    /* The cases of RedisBloom's layout: the last ones. */
    const size_t rb_first = sizeof cases / sizeof cases[0] - 4;
    /* Each case plain and concurrent (stripe counters, shared state and stash). */
    for (size_t i = 0; i < 2 * (sizeof cases / sizeof cases[0]); i++) {
        size_t c = i / 2;
        unsigned flags = (i % 2 ? CF_CONCURRENT : 0u) | (c >= rb_first ? CF_REDISBLOOM : 0u);
        cft_context("bytes_needed case %zu: cap %llu b %u f %u e %u flags %u", c,
                    (unsigned long long)cases[c].cap, cases[c].b, cases[c].f, cases[c].e, flags);
        cft_alloc ta;
        cft_alloc_init(&ta);
        cf_config cfg = {.capacity = cases[c].cap,
                         .bucket_size = cases[c].b,
                         .fingerprint_bits = cases[c].f,
                         .expansion = cases[c].e,
                         .allocator = &ta.a,
                         .flags = flags};
        size_t need = 0;
        if (!CHECK_ST(cf_bytes_needed(&cfg, &need), CF_OK))
            continue;
        CHECK_EQ_U(ta.calls, 0); /* computed without allocating */
        cf_filter *f = NULL;
        if (!CHECK_ST(cf_new(&cfg, &f), CF_OK))
            continue;
        CHECK_EQ_U(need, ta.total_bytes);
        CHECK_EQ_U(need, ta.live_bytes);
        cf_stats s = cft_stats(f);
        CHECK(s.bytes > 0);
        CHECK(s.bytes <= need);
        /* The default allocator gives the same figure, less the filter's copy of a
         * caller's allocator. */
        cfg.allocator = NULL;
        size_t need2 = 0;
        CHECK_ST(cf_bytes_needed(&cfg, &need2), CF_OK);
        CHECK_EQ_U(need2 + sizeof(cf_allocator), need);
        cf_free(f);
        CHECK_ALLOC_CLEAN(&ta);
        CHECK_EQ_U(ta.null_frees, 0);
    }

    cft_context("bytes_needed EINVAL");
    size_t bytes = 0;
    cf_config ok = {.capacity = 10};
    CHECK_ST(cf_bytes_needed(NULL, &bytes), CF_EINVAL);
    CHECK_ST(cf_bytes_needed(&ok, NULL), CF_EINVAL);
    cf_config bad = {.capacity = 0};
    CHECK_ST(cf_bytes_needed(&bad, &bytes), CF_EINVAL);
    bad = ok;
    bad.fingerprint_bits = 33;
    CHECK_ST(cf_bytes_needed(&bad, &bytes), CF_EINVAL);
    bad = ok;
    bad.bucket_size = 256;
    CHECK_ST(cf_bytes_needed(&bad, &bytes), CF_EINVAL);
    bad = ok;
    bad.capacity = UINT64_MAX;
    CHECK_ST(cf_bytes_needed(&bad, &bytes), CF_EINVAL);
}

/* cf_hash: deterministic per (key, seed), different across seeds and keys. */
static void test_hash(void)
{
    cft_context("hash");
    uint64_t seed = cft_subseed(10);
    cf_filter *a = cft_new((cf_config){.capacity = 100, .seed = seed});
    cf_filter *b = cft_new((cf_config){.capacity = 100000,
                                       .bucket_size = 8,
                                       .fingerprint_bits = 16,
                                       .expansion = 2,
                                       .seed = seed}); /* other shape, same seed */
    cf_filter *c = cft_new((cf_config){.capacity = 100, .seed = seed + 1});
    cf_filter *d = cft_new((cf_config){.capacity = 100, .seed = ~seed});
    if (a == NULL || b == NULL || c == NULL || d == NULL)
        goto out;
    uint8_t k[CFT_KEY_MAX];
    unsigned same_c = 0, same_d = 0;
    uint64_t prev = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        size_t len = cft_key_var(k, 4, i);
        uint64_t ha = cf_hash(a, k, len);
        CHECK_EQ_U(cf_hash(a, k, len), ha);
        CHECK_EQ_U(cf_hash(b, k, len), ha);
        same_c += cf_hash(c, k, len) == ha;
        same_d += cf_hash(d, k, len) == ha;
        if (i > 0)
            CHECK(ha != prev);
        prev = ha;
    }
    /* A 64-bit hash that ignores the seed would match 1000 times; a seeded one ~never. */
    CHECK_EQ_U(same_c, 0);
    CHECK_EQ_U(same_d, 0);
    /* Changing any single byte changes the hash. */
    size_t len = cft_key_var(k, 5, 1);
    uint64_t h0 = cf_hash(a, k, len);
    for (size_t i = 0; i < len; i++) {
        k[i] ^= 1;
        CHECK_MSG(cf_hash(a, k, len) != h0, "byte %zu", i);
        k[i] ^= 1;
    }
    CHECK(cf_hash(a, k, len - 1) != h0);
    CHECK(cf_hash(a, NULL, 0) != h0);
out:
    cf_free(a);
    cf_free(b);
    cf_free(c);
    cf_free(d);
}

/* CF_FAST_HASH (hash id 3): its own hash of 8-byte keys, XXH3 of the others; kept by
 * cf_get_config, files and copies; refused where keys are hashed without the filter; its
 * words in the head beside a caller's allocator, in a plain and a concurrent filter. */
static void test_fast_hash(void)
{
    uint64_t seed = cft_subseed(11);
    for (unsigned conc = 0; conc < 2; conc++) {
        cft_context("CF_FAST_HASH%s", conc ? ", concurrent" : "");
        cft_alloc ta;
        cft_alloc_init(&ta);
        cf_config c = {.capacity = 500,
                       .expansion = 2,
                       .seed = seed,
                       .allocator = &ta.a,
                       .flags = CF_FAST_HASH | (conc ? CF_CONCURRENT : 0u)};
        cf_filter *f = cft_new(c), *g = NULL,
                  *x = cft_new((cf_config){.capacity = 500, .seed = seed});
        if (!f || !x) {
            cf_free(f);
            cf_free(x);
            continue;
        }
        uint8_t k[CFT_KEY_MAX];
        unsigned same8 = 0;
        for (uint64_t i = 0; i < 2000; i++) {
            uint64_t id = i << 32; /* ids with a stride */
            memcpy(k, &id, 8);
            same8 += cf_hash(f, k, 8) == cf_hash_seeded(seed, k, 8);
            CHECK_EQ_U(cf_hash(f, k, 8), cf_hash(f, k, 8));
            size_t len = cft_key_var(k, 3, i);
            CHECK_EQ_U(cf_hash(f, k, len), cf_hash_seeded(seed, k, len));
            CHECK_EQ_U(cf_hash(f, k, len), cf_hash(x, k, len));
        }
        CHECK_EQ_U(same8, 0); /* another hash of 8-byte keys: equal ~never */
        /* 2000 8-byte keys through growth (the head's words, then the allocator copy). */
        for (uint64_t i = 0; i < 2000; i++) {
            memcpy(k, &i, 8);
            CHECK_ST(cf_add(f, k, 8), CF_OK);
        }
        CHECK(cft_stats(f).sub_filters >= 2);
        cf_config got;
        cf_get_config(f, &got);
        CHECK(got.flags & CF_FAST_HASH);
        /* A file of it: hash id 3, every key found after the load. */
        size_t n = cf_serialized_size(f);
        uint8_t *b = malloc(n);
        if (b && CHECK_ST(cf_serialize(f, b, n, NULL), CF_OK)) {
            CHECK_EQ_U(b[42], 3);
            if (CHECK_ST(cf_deserialize(b, n, NULL, &g), CF_OK)) {
                uint64_t missing = 0;
                for (uint64_t i = 0; i < 2000; i++) {
                    memcpy(k, &i, 8);
                    missing += !cf_contains(g, k, 8);
                }
                CHECK_EQ_U(missing, 0);
                memcpy(k, &(uint64_t){7}, 8);
                CHECK_EQ_U(cf_hash(g, k, 8), cf_hash(f, k, 8));
            }
        }
        free(b);
        cf_free(g);
        /* A filter made from its config hashes alike. */
        got.allocator = NULL;
        g = cft_new(got);
        memcpy(k, &(uint64_t){9}, 8);
        CHECK(g && cf_hash(g, k, 8) == cf_hash(f, k, 8));
        cf_free(g);
        cf_free(f);
        cf_free(x);
        CHECK_ALLOC_CLEAN(&ta);
    }
    cft_context("CF_FAST_HASH refusals");
    cf_filter *f = NULL;
    cf_mapping m;
    const char *why = NULL;
    CHECK_ST(cf_new(&(cf_config){.capacity = 100, .generations = 4, .flags = CF_FAST_HASH}, &f),
             CF_EINVAL);
    CHECK_ST(cf_new(&(cf_config){.capacity = 100, .flags = CF_FAST_HASH | CF_REDISBLOOM}, &f),
             CF_EINVAL);
    CHECK_ST(
        cf_config_check(&(cf_config){.capacity = 100, .flags = CF_FAST_HASH | CF_REDISBLOOM}, &why),
        CF_EINVAL);
    CHECK(why && strstr(why, "CF_FAST_HASH"));
    CHECK_ST(cf_config_mapping(&(cf_config){.capacity = 100, .flags = CF_FAST_HASH}, &m),
             CF_EINVAL);
    CHECK_ST(cf_config_mapping(&(cf_config){.capacity = 100}, &m), CF_OK);
    CHECK(f == NULL);
}

/* cf_add_hash(f, cf_hash(f, k, n)) is cf_add(f, k, n); the other _hash calls likewise. */
static void test_prehashed(void)
{
    for (unsigned e = 0; e <= 2; e += 2) {
        cft_context("pre-hashed, expansion %u", e);
        uint64_t seed = cft_subseed(20 + e);
        cf_filter *a = cft_new((cf_config){.capacity = 2000,
                                           .bucket_size = 4,
                                           .fingerprint_bits = 12,
                                           .expansion = e,
                                           .seed = seed});
        cf_filter *b = cft_new((cf_config){.capacity = 2000,
                                           .bucket_size = 4,
                                           .fingerprint_bits = 12,
                                           .expansion = e,
                                           .seed = seed});
        if (a == NULL || b == NULL) {
            cf_free(a);
            cf_free(b);
            return;
        }
        uint8_t k[CFT_KEY_MAX];
        const uint64_t n = e ? 6000 : 1800;
        for (uint64_t i = 0; i < n; i++) {
            size_t len = cft_key_var(k, 6, i);
            cf_status ra = cf_add(a, k, len);
            cf_status rb = cf_add_hash(b, cf_hash(b, k, len));
            CHECK_ST(rb, ra);
            CHECK_ST(ra, CF_OK);
        }
        cf_stats sa = cft_stats(a), sb = cft_stats(b);
        CHECK_STATS_EQ(sa, sb);
        if (e)
            CHECK(sa.sub_filters > 1);

        /* Probes: present and absent keys give the same answers both ways. */
        enum { P = 20000 };
        static uint64_t hs[P];
        static bool many[P];
        for (uint64_t i = 0; i < P; i++) {
            size_t len = cft_key_var(k, i % 2 ? 6 : 7, i);
            uint64_t h = cf_hash(a, k, len);
            hs[i] = h;
            bool ca = cf_contains(a, k, len);
            CHECK(cf_contains_hash(a, h) == ca);
            CHECK(cf_contains_hash(b, h) == ca);
            CHECK(cf_contains(b, k, len) == ca);
            uint64_t cnt = cf_count(a, k, len);
            CHECK_EQ_U(cf_count_hash(a, h), cnt);
            CHECK_EQ_U(cf_count_hash(b, h), cnt);
            CHECK((cnt > 0) == ca);
            if (i % 2 && i < n)
                CHECK(ca); /* added */
        }
        /* cf_contains_many == cf_contains_hash one by one, whatever the batch split. */
        memset(many, 0, sizeof many);
        cf_contains_many(a, hs, P, many);
        size_t mism = 0;
        for (size_t i = 0; i < P; i++)
            mism += many[i] != cf_contains_hash(a, hs[i]);
        CHECK_EQ_U(mism, 0);
        memset(many, 1, sizeof many);
        for (size_t off = 0; off < P;) {
            size_t chunk = 1 + (off * 7919) % 97;
            if (chunk > P - off)
                chunk = P - off;
            cf_contains_many(b, hs + off, chunk, many + off);
            off += chunk;
        }
        mism = 0;
        for (size_t i = 0; i < P; i++)
            mism += many[i] != cf_contains_hash(b, hs[i]);
        CHECK_EQ_U(mism, 0);

        /* cf_delete_hash is cf_delete. */
        for (uint64_t i = 0; i < n; i += 2) {
            size_t len = cft_key_var(k, 6, i);
            CHECK_ST(cf_delete(a, k, len), CF_OK);
            CHECK_ST(cf_delete_hash(b, cf_hash(b, k, len)), CF_OK);
        }
        sa = cft_stats(a);
        sb = cft_stats(b);
        CHECK_STATS_EQ(sa, sb);
        CHECK_EQ_U(sa.items, n / 2);
        for (uint64_t i = 1; i < n; i += 2) {
            size_t len = cft_key_var(k, 6, i);
            CHECK(cf_contains(a, k, len));
            CHECK(cf_contains_hash(b, cf_hash(b, k, len)));
        }
        cf_free(a);
        cf_free(b);
    }

    /* The hash path on an empty filter, and NOT_FOUND from cf_delete_hash. */
    cft_context("pre-hashed, empty filter");
    cf_filter *f = cft_new((cf_config){.capacity = 100, .seed = 5});
    if (f == NULL)
        return;
    uint64_t h = cf_hash(f, "x", 1);
    CHECK(!cf_contains_hash(f, h));
    CHECK_EQ_U(cf_count_hash(f, h), 0);
    CHECK_ST(cf_delete_hash(f, h), CF_NOT_FOUND);
    CHECK_ST(cf_add_hash(f, h), CF_OK);
    CHECK_ST(cf_add_hash(f, h), CF_OK);
    CHECK(cf_contains(f, "x", 1));
    CHECK_EQ_U(cf_count(f, "x", 1), 2);
    CHECK_EQ_U(cf_count_hash(f, h), 2);
    CHECK_ST(cf_add_unique(f, "x", 1), CF_EXISTS);
    CHECK_ST(cf_delete_hash(f, h), CF_OK);
    CHECK_ST(cf_delete(f, "x", 1), CF_OK);
    CHECK_ST(cf_delete_hash(f, h), CF_NOT_FOUND);
    /* Extreme hash values are fine. */
    const uint64_t odd[] = {0, 1, UINT64_MAX, UINT64_C(1) << 63, UINT64_C(0xffffffff)};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        CHECK_ST(cf_add_hash(f, odd[i]), CF_OK);
        CHECK(cf_contains_hash(f, odd[i]));
    }
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        CHECK_ST(cf_delete_hash(f, odd[i]), CF_OK);
    CHECK_EQ_U(cft_stats(f).items, 0);
    cf_free(f);
}

/* Stats: items, slots, buckets, load_factor = items/slots, fpr in (0,1) rising with load. */
static void test_stats(void)
{
    static const struct {
        unsigned b, f;
    } shapes[] = {{4, 12}, {2, 8}, {8, 16}, {1, 4}, {3, 23}, {16, 32}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        unsigned b = shapes[si].b, fb = shapes[si].f;
        cft_context("stats b %u f %u", b, fb);
        const uint64_t cap = 4000;
        cf_filter *f = cft_new((cf_config){.capacity = cap,
                                           .bucket_size = b,
                                           .fingerprint_bits = fb,
                                           .seed = cft_subseed(30 + si)});
        if (f == NULL)
            continue;
        cf_stats s = cft_stats(f);
        CHECK_EQ_U(s.bucket_size, b);
        CHECK_EQ_U(s.fingerprint_bits, fb);
        CHECK_EQ_U(s.sub_filters, 1);
        CHECK_EQ_U(s.items, 0);
        CHECK_EQ_U(s.slots, s.buckets * b);
        CHECK(s.slots >= cap);
        CHECK(s.bytes > 0);
        /* At least the fingerprint bits must be held. */
        CHECK(s.bytes * 8 >= s.slots * fb);
        CHECK(s.load_factor == 0.0);
        CHECK(s.fpr >= 0.0 && s.fpr < 1.0);

        uint8_t k[CFT_KEY_MAX];
        double prev_fpr = s.fpr;
        uint64_t added = 0;
        const uint64_t steps[] = {1, cap / 10, cap / 4, cap / 2, (cap * 3) / 4, cap};
        for (size_t st = 0; st < sizeof steps / sizeof steps[0]; st++) {
            while (added < steps[st]) {
                size_t len = cft_key(k, 8, added);
                if (!CHECK_ST(cf_add(f, k, len), CF_OK))
                    break;
                added++;
            }
            s = cft_stats(f);
            CHECK_EQ_U(s.items, added);
            CHECK_NEAR(s.load_factor, (double)added / (double)s.slots, 1e-12);
            CHECK_MSG(s.fpr > 0.0 && s.fpr < 1.0, "fpr %g at load %g", s.fpr, s.load_factor);
            CHECK_MSG(s.fpr > prev_fpr, "fpr %g at load %g not above %g", s.fpr, s.load_factor,
                      prev_fpr);
            prev_fpr = s.fpr;
        }
        /* Deleting lowers it again. */
        for (uint64_t i = 0; i < added / 2; i++) {
            size_t len = cft_key(k, 8, i);
            CHECK_ST(cf_delete(f, k, len), CF_OK);
        }
        s = cft_stats(f);
        CHECK_EQ_U(s.items, added - added / 2);
        CHECK(s.fpr < prev_fpr);
        cf_free(f);
    }

    /* Growing filters: slots, buckets and bytes add up over sub-filters; items stay exact. */
    cft_context("stats, growing");
    cf_filter *g = cft_new((cf_config){
        .capacity = 1000, .bucket_size = 4, .fingerprint_bits = 12, .expansion = 2, .seed = 99});
    if (g == NULL)
        return;
    cf_stats s0 = cft_stats(g);
    uint8_t k[CFT_KEY_MAX];
    uint64_t n = 0;
    cf_stats s = s0;
    while (s.sub_filters < 3 && n < 50000) {
        size_t len = cft_key(k, 9, n);
        if (!CHECK_ST(cf_add(g, k, len), CF_OK))
            break;
        n++;
        s = cft_stats(g);
    }
    CHECK_EQ_U(s.sub_filters, 3);
    CHECK_EQ_U(s.items, n);
    CHECK_EQ_U(s.slots, s.buckets * 4);
    CHECK(s.buckets >= s0.buckets * 7); /* 1 + 2 + 4 */
    CHECK(s.bytes >= s0.bytes * 7 - 64);
    CHECK_NEAR(s.load_factor, (double)n / (double)s.slots, 1e-12);
    cf_free(g);
}

/* The smallest filter and the extreme shapes still behave. */
/* cf_expected_fpr: the formula, independently written; what cf_stats.fpr reports; the
 * range guard. */
static void test_expected_fpr(void)
{
    cft_context("expected fpr");
    for (unsigned fb = CF_MIN_FINGERPRINT_BITS; fb <= CF_MAX_FINGERPRINT_BITS; fb++)
        for (unsigned b = 1; b <= 16; b *= 2) {
            double two_f = (double)(UINT64_C(1) << fb);
            double p = (two_f + 2.0) / (two_f * two_f);
            /* 1 - pow(1 - p, n) cancels at small p: good to about 1e-16 / p relative. */
            CHECK_NEAR(cf_expected_fpr(fb, b, 1.0), 1.0 - pow(1.0 - p, 2.0 * b), 1e-6);
            CHECK_NEAR(cf_expected_fpr(fb, b, 2.5), 1.0 - pow(1.0 - p, 5.0 * b), 1e-6);
            CHECK(cf_expected_fpr(fb, b, 0.0) == 0.0);
            if (fb > CF_MIN_FINGERPRINT_BITS)
                CHECK(cf_expected_fpr(fb, b, 1.0) < cf_expected_fpr(fb - 1, b, 1.0));
        }
    CHECK(cf_expected_fpr(3, 4, 1.0) == 1.0);
    CHECK(cf_expected_fpr(33, 4, 1.0) == 1.0);
    CHECK(cf_expected_fpr(12, 0, 1.0) == 1.0);
    CHECK(cf_expected_fpr(12, 256, 1.0) == 1.0);
    CHECK(cf_expected_fpr(12, 4, -0.5) == 1.0);

    /* A growing filter: stats.fpr is the formula at the sum of its sub-filters' loads. */
    cf_config cfg = {.capacity = 1000, .expansion = 2, .seed = cft_subseed(90)};
    cf_filter *f;
    if (!CHECK_ST(cf_new(&cfg, &f), CF_OK))
        return;
    uint8_t k[CFT_KEY_MAX];
    for (uint64_t i = 0; i < 5000; i++)
        CHECK_ST(cf_add(f, k, cft_key(k, 91, i)), CF_OK);
    cf_stats s = cft_stats(f);
    CHECK(s.sub_filters > 1);
    /* The per-table loads are not in cf_stats, so bound instead: their sum is at least the
     * overall load (items over all slots) and at most one per sub-filter, and above one
     * since every older sub-filter filled up before the next was added. */
    CHECK(s.fpr > cf_expected_fpr(12, 4, s.load_factor));
    CHECK(s.fpr > cf_expected_fpr(12, 4, 1.0));
    CHECK(s.fpr < cf_expected_fpr(12, 4, s.sub_filters));
    cf_free(f);
}

static void test_tiny(void)
{
    cft_context("capacity 1");
    cf_filter *f = cft_new((cf_config){.capacity = 1, .seed = 3});
    if (f == NULL)
        return;
    CHECK_ST(cf_add(f, "only", 4), CF_OK);
    CHECK(cf_contains(f, "only", 4));
    cf_stats s = cft_stats(f);
    CHECK(s.slots >= 1);
    CHECK_EQ_U(s.items, 1);
    /* Fill it up: eventually CF_FULL, nothing lost. */
    uint8_t k[CFT_KEY_MAX];
    uint64_t ok = 0;
    cf_status rc = CF_OK;
    for (uint64_t i = 0; i < 10000 && rc == CF_OK; i++) {
        size_t len = cft_key(k, 10, i);
        rc = cf_add(f, k, len);
        ok += rc == CF_OK;
    }
    CHECK_ST(rc, CF_FULL);
    s = cft_stats(f);
    CHECK_EQ_U(s.items, ok + 1);
    CHECK(s.stashed <= 8);
    CHECK(cf_contains(f, "only", 4));
    for (uint64_t i = 0; i < ok; i++) {
        size_t len = cft_key(k, 10, i);
        CHECK(cf_contains(f, k, len));
    }
    cf_free(f);
}

/* A filter's fixed overhead, what it holds besides its tables (cf_stats.bytes), is what
 * the header says: 96 bytes, 24 more for a copy of a caller's allocator, 48 more for a
 * bucket size above 8; for growing filters too, until they grow. Many small filters (a
 * Redis key each) depend on it. */
static void test_fixed_overhead(void)
{
    static const unsigned shapes[][2] = {{1, 4}, {2, 8},  {2, 12}, {4, 12},  {4, 9},
                                         {8, 8}, {8, 32}, {9, 12}, {255, 32}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (unsigned e = 0; e < 3; e++)
            for (int custom = 0; custom < 2; custom++) {
                unsigned b = shapes[i][0], fb = shapes[i][1];
                cft_context("fixed overhead b %u f %u e %u, %s allocator", b, fb, e,
                            custom ? "a caller's" : "the default");
                cft_alloc ta;
                cft_alloc_init(&ta);
                cf_config c = {.capacity = 1 + 999 * e,
                               .bucket_size = b,
                               .fingerprint_bits = fb,
                               .expansion = e,
                               .allocator = custom ? &ta.a : NULL};
                size_t need = 0;
                cf_filter *f = NULL;
                if (!CHECK_ST(cf_bytes_needed(&c, &need), CF_OK) ||
                    !CHECK_ST(cf_new(&c, &f), CF_OK))
                    continue;
                size_t want = 96 + (custom ? sizeof(cf_allocator) : 0u) + (b > 8 ? 48u : 0u);
                CHECK_EQ_U(need - cft_stats(f).bytes, want);
                cf_free(f);
                f = NULL;
                c.flags = CF_FAST_HASH; /* its words: 32 bytes more */
                if (!CHECK_ST(cf_bytes_needed(&c, &need), CF_OK) ||
                    !CHECK_ST(cf_new(&c, &f), CF_OK))
                    continue;
                CHECK_EQ_U(need - cft_stats(f).bytes, want + 32u);
                if (custom)
                    CHECK_EQ_U(ta.live_bytes, need);
                cf_free(f);
            }
}

int main(void)
{
    cft_init("test_api");
    test_new_free();
    test_allocator_copied();
    test_basic_ops();
    test_null_args();
    test_clear();
    test_strerror_version();
    test_bytes_needed();
    test_hash();
    test_fast_hash();
    test_prehashed();
    test_stats();
    test_expected_fpr();
    test_tiny();
    test_fixed_overhead();
    return cft_finish();
}
