/*
 * test_redisbloom.c - RedisBloom's layout (CF_REDISBLOOM) against a model of RedisBloom's
 * cuckoo filter written here from its documented behaviour (docs/FORMAT.md, "Hash id 2"):
 * byte arrays of m_k * b fingerprints, and RedisBloom's rules for inserts (first free slot
 * of the key's buckets, newest sub-filter first; its eviction walk, undone on failure;
 * growth), deletes, counts and compaction. After every operation the library's status
 * must be the model's; at checkpoints its tables, byte for byte, and lookups of keys never
 * added. Also: MurmurHash64A against SMHasher's published verification value, sizing as
 * RedisBloom sizes, the settings refused, files (hash id 2) and their validation.
 */
#include "format_util.h"
#include "internal.h"

#include <stdlib.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define RB_ALT_MULT   UINT64_C(0x5bd1e995) /* RedisBloom's alternate-bucket multiplier */
#define RB_MAX_TABLES 32u
#define RB_OPS        20000u /* per configuration at scale 1 */
#define RB_CHECK      97u    /* operations between two comparisons of the whole tables */
#define RB_PROBES     64u    /* absent keys looked up at each comparison */

/* ------------------------------------------------------------------------------------ */
/* MurmurHash64A                                                                        */
/* ------------------------------------------------------------------------------------ */

/* SMHasher's verification: key i is bytes 0..i-1 (i < 256) hashed with seed 256 - i; the
 * 256 hashes, little-endian, are hashed with seed 0; the low 32 bits of that are the
 * value SMHasher publishes for MurmurHash64A ("Murmur2B"): 0x1F0D3804. */
static void test_murmur(void)
{
    cft_context("MurmurHash64A");
    uint8_t key[256], hashes[256 * 8];
    for (unsigned i = 0; i < 256; i++) {
        key[i] = (uint8_t)i;
        cft_put64(hashes + 8 * i, cf__murmur64a(key, i, 256u - i));
    }
    CHECK_EQ_U(cf__murmur64a(hashes, sizeof hashes, 0) & UINT32_MAX, 0x1F0D3804u);
    /* The layout's hash is it with seed 0, and a filter's cf_hash is that. */
    cf_filter *f = cft_new((cf_config){.capacity = 100, .flags = CF_REDISBLOOM});
    CHECK(f != NULL);
    for (unsigned len = 0; f && len < 40; len++)
        CHECK_EQ_U(cf_hash(f, key, len), cf__murmur64a(key, len, 0));
    cf_free(f);
}

/* ------------------------------------------------------------------------------------ */
/* The model                                                                            */
/* ------------------------------------------------------------------------------------ */

typedef struct model {
    unsigned b, kicks, expansion, max_tables, ntables;
    uint64_t m[RB_MAX_TABLES];
    uint8_t *t[RB_MAX_TABLES];
} model;

static uint8_t fp_of(uint64_t h)
{
    return (uint8_t)(h % 255u + 1u);
}

static uint64_t alt_of(uint64_t i, uint8_t fp)
{
    return i ^ (uint64_t)fp * RB_ALT_MULT;
}

static uint8_t *bucket_at(model *md, unsigned k, uint64_t i)
{
    return md->t[k] + (i % md->m[k]) * md->b;
}

static int first(const uint8_t *bucket, unsigned b, uint8_t v)
{
    for (unsigned j = 0; j < b; j++)
        if (bucket[j] == v)
            return (int)j;
    return -1;
}

static unsigned copies(const uint8_t *bucket, unsigned b, uint8_t v)
{
    unsigned n = 0;
    for (unsigned j = 0; j < b; j++)
        n += bucket[j] == v;
    return n;
}

/* Put v in the first free slot of the bucket; false if it has none. */
static bool put_free(uint8_t *bucket, unsigned b, uint8_t v)
{
    int j = first(bucket, b, 0);
    if (j >= 0)
        bucket[j] = v;
    return j >= 0;
}

static void model_init(model *md, uint64_t buckets, const cf_config *c)
{
    memset(md, 0, sizeof *md);
    md->b = c->bucket_size ? c->bucket_size : 2u;
    md->kicks = c->max_kicks ? c->max_kicks : 20u; /* RedisBloom's MAXITERATIONS */
    md->max_tables = c->max_sub_filters ? c->max_sub_filters : 32u;
    unsigned e = c->expansion;
    md->expansion = 1;
    while (e && md->expansion < e)
        md->expansion *= 2;
    if (!e)
        md->expansion = 0;
    md->m[0] = buckets;
    md->t[0] = calloc(buckets * md->b, 1);
    md->ntables = 1;
}

static void model_free(model *md)
{
    for (unsigned k = 0; k < RB_MAX_TABLES; k++)
        free(md->t[k]);
}

static bool model_has(model *md, uint64_t h)
{
    uint8_t fp = fp_of(h);
    for (unsigned k = 0; k < md->ntables; k++)
        if (first(bucket_at(md, k, h), md->b, fp) >= 0 ||
            first(bucket_at(md, k, alt_of(h, fp)), md->b, fp) >= 0)
            return true;
    return false;
}

static uint64_t model_count(model *md, uint64_t h)
{
    uint8_t fp = fp_of(h);
    uint64_t n = 0;
    for (unsigned k = 0; k < md->ntables; k++) {
        uint8_t *b1 = bucket_at(md, k, h), *b2 = bucket_at(md, k, alt_of(h, fp));
        n += copies(b1, md->b, fp) + (b2 != b1 ? copies(b2, md->b, fp) : 0u);
    }
    return n;
}

static cf_status model_add(model *md, uint64_t h)
{
    uint8_t fp = fp_of(h);
    for (unsigned k = md->ntables; k-- > 0;)
        if (put_free(bucket_at(md, k, h), md->b, fp) ||
            put_free(bucket_at(md, k, alt_of(h, fp)), md->b, fp))
            return CF_OK;
    unsigned top = md->ntables - 1;
    uint8_t *b1 = bucket_at(md, top, h), *b2 = bucket_at(md, top, alt_of(h, fp));
    if (copies(b1, md->b, fp) == md->b && copies(b2, md->b, fp) == md->b)
        return CF_FULL; /* the hot-key rule: this library's, not RedisBloom's */
    uint64_t i = h % md->m[top];
    unsigned victim = 0;
    uint8_t carry = fp;
    for (unsigned n = 0; n < md->kicks; n++) {
        uint8_t *bk = bucket_at(md, top, i), out = bk[victim];
        bk[victim] = carry;
        carry = out;
        i = alt_of(i, carry) % md->m[top];
        if (put_free(bucket_at(md, top, i), md->b, carry))
            return CF_OK;
        victim = (victim + 1) % md->b;
    }
    for (unsigned n = 0; n < md->kicks; n++) {
        victim = (victim + md->b - 1) % md->b;
        i = alt_of(i, carry) % md->m[top];
        uint8_t *bk = bucket_at(md, top, i), back = bk[victim];
        bk[victim] = carry;
        carry = back;
    }
    if (md->expansion == 0 || md->ntables == md->max_tables || md->ntables == RB_MAX_TABLES)
        return CF_FULL;
    md->m[md->ntables] = md->m[top] * md->expansion;
    md->t[md->ntables] = calloc(md->m[md->ntables] * md->b, 1);
    put_free(bucket_at(md, md->ntables, h), md->b, fp);
    md->ntables++;
    return CF_OK;
}

static cf_status model_delete(model *md, uint64_t h)
{
    uint8_t fp = fp_of(h);
    for (unsigned k = md->ntables; k-- > 0;) {
        uint8_t *bs[2] = {bucket_at(md, k, h), bucket_at(md, k, alt_of(h, fp))};
        for (unsigned w = 0; w < 2; w++) {
            int j = first(bs[w], md->b, fp);
            if (j >= 0) {
                bs[w][j] = 0;
                return CF_OK;
            }
        }
    }
    return CF_NOT_FOUND;
}

/* RedisBloom's compaction (every sub-filter tried): newest first, each fingerprint into
 * the oldest sub-filter with a free slot in its bucket or that bucket's alternate, both
 * reduced to that sub-filter's size; empty sub-filters at the end go. */
static void model_compact(model *md)
{
    for (unsigned k = md->ntables; k-- > 1;)
        for (uint64_t x = 0; x < md->m[k]; x++)
            for (unsigned j = 0; j < md->b; j++) {
                uint8_t fp = md->t[k][x * md->b + j];
                for (unsigned n = 0; fp && n < k; n++)
                    if (put_free(bucket_at(md, n, x), md->b, fp) ||
                        put_free(bucket_at(md, n, alt_of(x, fp)), md->b, fp)) {
                        md->t[k][x * md->b + j] = 0;
                        break;
                    }
            }
    while (md->ntables > 1) {
        unsigned top = md->ntables - 1;
        uint64_t used = 0;
        for (uint64_t i = 0; i < md->m[top] * md->b; i++)
            used += md->t[top][i] != 0;
        if (used)
            break;
        free(md->t[top]);
        md->t[top] = NULL;
        md->ntables--;
    }
}

/* ------------------------------------------------------------------------------------ */
/* Comparing                                                                            */
/* ------------------------------------------------------------------------------------ */

/* The library's file holds the model's tables, byte for byte, in hash id 2. */
static bool same_tables(const cf_filter *f, model *md, const char *label, uint64_t op)
{
    buf file = ser(f);
    if (!file.p)
        return false;
    bool ok = CHECK_EQ_U(file.p[H_HASH], 2) && CHECK_EQ_U(file.p[H_F], 8) &&
              CHECK_EQ_U(rd(file.p + H_NT, 4), md->ntables);
    for (unsigned k = 0; ok && k < md->ntables; k++) {
        const uint8_t *d = file.p + HDR + DESC * k;
        uint64_t items = 0;
        for (uint64_t i = 0; i < md->m[k] * md->b; i++)
            items += md->t[k][i] != 0;
        ok = CHECK_EQ_U(rd(d, 8), md->m[k]) && CHECK_EQ_U(rd(d + 8, 8), items) &&
             CHECK_EQ_U(rd(d + 24, 8), md->m[k] * md->b) &&
             CHECK_MSG(memcmp(file.p + rd(d + 16, 8), md->t[k], md->m[k] * md->b) == 0,
                       "%s, operation %llu: sub-filter %u differs from RedisBloom's", label,
                       (unsigned long long)op, k);
    }
    buf_free(&file);
    return ok;
}

typedef struct live {
    uint64_t *h;
    size_t n, cap;
} live;

static void run_config(const char *label, cf_config c, uint64_t ops)
{
    cft_context("RedisBloom's layout, %s", label);
    c.flags |= CF_REDISBLOOM;
    cf_filter *f = cft_new(c);
    if (!CHECK(f))
        return;
    cf_stats st0 = cft_stats(f);
    model md;
    model_init(&md, st0.buckets, &c);
    cft_rng r = cft_rng_make(cft_subseed(c.capacity * 31 + c.bucket_size));
    live keys = {malloc(4096 * sizeof(uint64_t)), 0, 4096};
    uint64_t next_id = 0, grown = 0, full = 0;
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t op = 0; op < ops; op++) {
        uint64_t what = cft_below(&r, 100);
        if (what < 55 || keys.n == 0) { /* add, keyed or hashed */
            size_t len = cft_key(key, 5, next_id++);
            uint64_t h = cf__murmur64a(key, len, 0);
            unsigned before = md.ntables;
            cf_status want = model_add(&md, h);
            cf_status got = what % 2 ? cf_add(f, key, len) : cf_add_hash(f, h);
            if (!CHECK_MSG(got == want, "%s, op %llu: add gave %s, RedisBloom %s", label,
                           (unsigned long long)op, cft_status_name(got), cft_status_name(want)))
                break;
            grown += md.ntables > before;
            full += want == CF_FULL;
            if (want == CF_OK) {
                if (keys.n == keys.cap)
                    keys.h = realloc(keys.h, (keys.cap *= 2) * sizeof(uint64_t));
                keys.h[keys.n++] = h;
            }
        } else if (what < 60) { /* add_unique of a key held or new */
            uint64_t h = cft_below(&r, 2) ? keys.h[cft_below(&r, keys.n)] : cft_next(&r);
            cf_status want = model_has(&md, h) ? CF_EXISTS : model_add(&md, h);
            cf_status got;
            cf_add_many(f, &h, 1, CF_ADD_UNIQUE, &got);
            if (!CHECK_MSG(got == want, "%s, op %llu: add_unique gave %s, RedisBloom %s", label,
                           (unsigned long long)op, cft_status_name(got), cft_status_name(want)))
                break;
            if (want == CF_OK) {
                if (keys.n == keys.cap)
                    keys.h = realloc(keys.h, (keys.cap *= 2) * sizeof(uint64_t));
                keys.h[keys.n++] = h;
            }
        } else if (what < 88) { /* delete a key held */
            size_t j = (size_t)cft_below(&r, keys.n);
            uint64_t h = keys.h[j];
            keys.h[j] = keys.h[--keys.n];
            CHECK_ST(model_delete(&md, h), CF_OK);
            if (!CHECK_ST(cf_delete_hash(f, h), CF_OK))
                break;
        } else if (what < 90) { /* delete a key that matches nothing (one that matches would
                                   take another key's copy, as the API warns) */
            uint64_t h = cft_next(&r);
            if (!model_has(&md, h) && !CHECK_ST(cf_delete_hash(f, h), CF_NOT_FOUND))
                break;
        } else if (what < 99) { /* count and lookup */
            uint64_t h = cft_below(&r, 2) ? keys.h[cft_below(&r, keys.n)] : cft_next(&r);
            CHECK_EQ_U(cf_count_hash(f, h), model_count(&md, h));
            CHECK(cf_contains_hash(f, h) == model_has(&md, h));
        } else {
            model_compact(&md);
            CHECK_ST(cf_compact(f), CF_OK);
        }
        if (op % RB_CHECK == 0 || op + 1 == ops) {
            if (!same_tables(f, &md, label, op))
                break;
            uint64_t hs[RB_PROBES];
            bool out[RB_PROBES];
            for (unsigned i = 0; i < RB_PROBES; i++)
                hs[i] = cft_next(&r);
            cf_contains_many(f, hs, RB_PROBES, out);
            for (unsigned i = 0; i < RB_PROBES; i++)
                CHECK(out[i] == model_has(&md, hs[i]));
        }
    }
    /* No false negatives: every key added and not deleted. */
    uint64_t missed = 0;
    for (size_t j = 0; j < keys.n; j++)
        missed += !cf_contains_hash(f, keys.h[j]);
    CHECK_EQ_U(missed, 0);
    printf("  %-34s %llu keys held, %u sub-filters, %llu growths, %llu full\n", label,
           (unsigned long long)keys.n, md.ntables, (unsigned long long)grown,
           (unsigned long long)full);
    /* Saved and loaded: the same layout, answers and bytes. */
    buf a = ser(f);
    cf_filter *g = NULL;
    if (a.p && CHECK_ST(cf_deserialize(a.p, a.n, NULL, &g), CF_OK)) {
        cf_config gc;
        cf_get_config(g, &gc);
        CHECK((gc.flags & CF_REDISBLOOM) != 0);
        CHECK(cft_same_bytes(f, g));
        for (size_t j = 0; j < keys.n; j++)
            missed += !cf_contains_hash(g, keys.h[j]);
        CHECK_EQ_U(missed, 0);
        CHECK(same_tables(g, &md, label, ops));
        cf_free(g);
    }
    buf_free(&a);
    free(keys.h);
    model_free(&md);
    cf_free(f);
}

static void test_against_model(void)
{
    uint64_t n = cft_scaled(RB_OPS);
    run_config("b1, growing by 1",
               (cf_config){.capacity = 8, .bucket_size = 1, .expansion = 1, .max_sub_filters = 12},
               n);
    run_config("b2 (default), growing by 2",
               (cf_config){.capacity = 16, .expansion = 2, .max_sub_filters = 16}, n);
    run_config("b2, growing by 3 (rounded to 4)",
               (cf_config){.capacity = 16, .expansion = 3, .max_sub_filters = 5}, n);
    run_config("b4, fixed", (cf_config){.capacity = 256, .bucket_size = 4}, n);
    run_config("b3, 5 kicks, growing by 1",
               (cf_config){.capacity = 30,
                           .bucket_size = 3,
                           .max_kicks = 5,
                           .expansion = 1,
                           .max_sub_filters = 16},
               n);
    run_config(
        "b8, 1 kick, growing by 2",
        (cf_config){
            .capacity = 64, .bucket_size = 8, .max_kicks = 1, .expansion = 2, .max_sub_filters = 6},
        n);
    run_config("b2, 20 kicks, 2 buckets",
               (cf_config){.capacity = 4, .max_kicks = 20, .expansion = 1}, n);
    run_config(
        "b12, growing by 2",
        (cf_config){.capacity = 100, .bucket_size = 12, .expansion = 2, .max_sub_filters = 5}, n);
}

/* ------------------------------------------------------------------------------------ */
/* Settings and files                                                                   */
/* ------------------------------------------------------------------------------------ */

static void test_sizing(void)
{
    cft_context("sizing as RedisBloom sizes");
    /* (capacity, bucket size) -> buckets, as RedisBloom 2.x-8.x makes them. */
    static const uint64_t cases[][3] = {{4, 2, 2},
                                        {6, 3, 2},
                                        {7, 3, 2},
                                        {10, 2, 8},
                                        {100, 1, 128},
                                        {100, 4, 32},
                                        {1000, 2, 512},
                                        {1024, 2, 512},
                                        {1025, 2, 512},
                                        {1026, 2, 1024},
                                        {10000, 2, 8192},
                                        {510, 255, 2},
                                        {1u << 20, 4, 1u << 18},
                                        {1, 2, 2},
                                        {3, 2, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cf_filter *f = cft_new((cf_config){
            .capacity = cases[i][0], .bucket_size = (unsigned)cases[i][1], .flags = CF_REDISBLOOM});
        if (!CHECK(f))
            continue;
        cf_stats s = cft_stats(f);
        CHECK_MSG(s.buckets == cases[i][2] && s.fingerprint_bits == 8 &&
                      s.bucket_size == cases[i][1],
                  "capacity %llu, b %llu: %llu buckets of %u x %u bits",
                  (unsigned long long)cases[i][0], (unsigned long long)cases[i][1],
                  (unsigned long long)s.buckets, s.bucket_size, s.fingerprint_bits);
        cf_free(f);
    }
    cf_config c = {.capacity = 1000, .flags = CF_REDISBLOOM, .expansion = 5}, out;
    CHECK_ST(cf_config_resolve(&c, &out), CF_OK);
    CHECK_EQ_U(out.expansion, 8); /* rounded up to a power of two, as RedisBloom does */
    CHECK_EQ_U(out.bucket_size, 2);
    CHECK_EQ_U(out.max_kicks, 20);
    CHECK_EQ_U(out.fingerprint_bits, 8);
    /* Refused: what the layout cannot be. */
    const cf_config bad[] = {
        {.capacity = 100, .flags = CF_REDISBLOOM | CF_SEMI_SORT, .bucket_size = 4},
        {.capacity = 100, .flags = CF_REDISBLOOM, .fingerprint_bits = 12},
        {.capacity = 100, .flags = CF_REDISBLOOM, .seed = 7},
        {.capacity = 100, .flags = CF_REDISBLOOM, .target_fpr = 0.01},
        {.capacity = 100, .flags = CF_REDISBLOOM, .expansion = 2, .fpr_bound = 0.1},
        {.capacity = 100, .flags = CF_REDISBLOOM, .bucket_size = 256},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cf_filter *f = NULL;
        CHECK_MSG(cf_new(&bad[i], &f) == CF_EINVAL && f == NULL, "bad config %zu accepted", i);
    }
}

/* A file of the layout, patched at `at` and checksummed again: refused. */
static void refused(const buf good, size_t at, unsigned width, uint64_t v, const char *what)
{
    buf x = buf_copy(good.p, good.n);
    wr(x.p + at, width, v);
    uint64_t meta = meta_len_of(x.p);
    wr(x.p + meta - SUM, 8, XXH3_64bits(x.p, (size_t)meta - SUM));
    wr(x.p + x.n - SUM, 8, XXH3_64bits(x.p, x.n - SUM));
    const char *why = NULL;
    CHECK_MSG(cf_validate(x.p, x.n, &why) == CF_ECORRUPT, "%s: accepted", what);
    buf_free(&x);
}

static void test_files(void)
{
    cft_context("files of RedisBloom's layout");
    cf_filter *f = cft_new(
        (cf_config){.capacity = 40, .expansion = 2, .max_kicks = 20, .flags = CF_REDISBLOOM});
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t i = 0; f && i < 200; i++)
        CHECK_ST(cf_add(f, key, cft_key(key, 9, i)), CF_OK);
    buf good = ser(f);
    if (!good.p || !CHECK(cft_stats(f).sub_filters >= 2)) {
        cf_free(f);
        return;
    }
    CHECK_ST(cf_validate(good.p, good.n, NULL), CF_OK);
    CHECK_EQ_U(good.p[H_HASH], 2);
    CHECK_EQ_U(rd(good.p + H_SEED, 8), 0);
    refused(good, H_F, 1, 12, "fingerprint bits 12");
    refused(good, H_SEED, 8, 1, "a seed");
    refused(good, H_EXP, 4, 3, "expansion 3");
    refused(good, H_FLAGS, 4, 1, "widening flag");
    /* The same tables read as the library's own layout are a valid file too: only the
     * hash id tells them apart. */
    buf x = buf_copy(good.p, good.n);
    x.p[H_HASH] = 1;
    wr(x.p + meta_len_of(x.p) - SUM, 8, XXH3_64bits(x.p, (size_t)meta_len_of(x.p) - SUM));
    wr(x.p + x.n - SUM, 8, XXH3_64bits(x.p, x.n - SUM));
    CHECK_ST(cf_validate(x.p, x.n, NULL), CF_OK);
    buf_free(&x);
    /* A file of the library's own layout whose first sub-filter has a number of buckets
     * that is no power of two, and otherwise everything this layout asks (8-bit
     * fingerprints, seed 0, no widening): refused once its hash id says RedisBloom's. */
    cf_filter *own = cft_new((cf_config){
        .capacity = 20, .fingerprint_bits = 8, .bucket_size = 2, .flags = CF_FIXED_SEED});
    buf o = own ? ser(own) : (buf){NULL, 0};
    uint64_t m = o.p ? rd(o.p + HDR, 8) : 0;
    if (CHECK_MSG(m && (m & (m - 1)) != 0, "the library's own sizing gave %llu buckets",
                  (unsigned long long)m)) {
        CHECK_ST(cf_validate(o.p, o.n, NULL), CF_OK);
        refused(o, H_HASH, 1, 2, "sub-filters of no power of two buckets");
    }
    buf_free(&o);
    cf_free(own);
    for (uint64_t i = 0; i < 200; i++)
        CHECK(cf_contains(f, key, cft_key(key, 9, i)));
    buf_free(&good);
    cf_free(f);
}

/* cf_table_size/read/write and cf_append_sub_filter: a filter rebuilt from its tables'
 * bytes is the same filter; arbitrary bytes written in answer as RedisBloom's arrays would
 * (the model, given the same bytes); the calls refuse what they must. */
static void test_raw_tables(void)
{
    cft_context("raw tables of RedisBloom's layout");
    cf_config c = {.capacity = 64,
                   .bucket_size = 4,
                   .expansion = 2,
                   .max_kicks = 10,
                   .max_sub_filters = 4,
                   .flags = CF_REDISBLOOM};
    cf_filter *f = cft_new(c), *g = cft_new(c);
    if (!f || !g) {
        cf_free(f);
        cf_free(g);
        return;
    }
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t i = 0; cft_stats(f).sub_filters < 3; i++)
        CHECK_ST(cf_add(f, key, cft_key(key, 11, i)), CF_OK);
    unsigned n = cft_stats(f).sub_filters;
    while (cft_stats(g).sub_filters < n)
        CHECK_ST(cf_append_sub_filter(g), CF_OK);
    for (unsigned k = 0; k < n; k++) {
        uint64_t size = cf_table_size(f, k);
        CHECK_EQ_U(size, 16u * 4u << k); /* 16 buckets of 4, doubling */
        CHECK_EQ_U(cf_table_size(g, k), size);
        uint8_t *bytes = malloc(size);
        CHECK_ST(cf_table_read(f, k, 0, bytes, size), CF_OK);
        /* Written back whole, then its end again over itself. */
        CHECK_ST(cf_table_write(g, k, 0, bytes, size), CF_OK);
        CHECK_ST(cf_table_write(g, k, size / 3, bytes + size / 3, size - size / 3), CF_OK);
        free(bytes);
    }
    CHECK(cft_same_bytes(f, g));
    CHECK_EQ_U(cft_stats(g).items, cft_stats(f).items);
    CHECK_EQ_U(cf_table_size(f, n), 0);
    uint8_t b8[8] = {0};
    CHECK_ST(cf_table_read(f, 0, cf_table_size(f, 0) - 4, b8, 8), CF_EINVAL); /* past the end */
    CHECK_ST(cf_table_write(f, n, 0, b8, 1), CF_EINVAL);
    CHECK_ST(cf_table_read(f, 0, 0, NULL, 1), CF_EINVAL);
    CHECK_ST(cf_table_read(f, 0, 0, b8, 0), CF_OK);
    CHECK_ST(cf_append_sub_filter(f), CF_OK); /* the 4th of 4 */
    CHECK_ST(cf_append_sub_filter(f), CF_FULL);
    cf_filter *own = cft_new((cf_config){.capacity = 64, .expansion = 2});
    CHECK_EQ_U(cf_table_size(own, 0), 0);
    CHECK_ST(cf_table_read(own, 0, 0, b8, 1), CF_EINVAL);
    CHECK_ST(cf_table_write(own, 0, 0, b8, 1), CF_EINVAL);
    CHECK_ST(cf_append_sub_filter(own), CF_EINVAL);
    cf_free(own);
    cf_filter *fixed = cft_new((cf_config){.capacity = 64, .flags = CF_REDISBLOOM});
    CHECK_ST(cf_append_sub_filter(fixed), CF_FULL);

    /* Any bytes: the library answers as the model holding the same bytes. */
    model md;
    c = (cf_config){.capacity = 64, .expansion = 2, .max_kicks = 10, .flags = CF_REDISBLOOM};
    cf_filter *h = cft_new(c);
    if (fixed && h) {
        model_init(&md, cft_stats(h).buckets, &c);
        cft_rng r = cft_rng_make(cft_subseed(77));
        for (uint64_t i = 0; i < md.m[0] * md.b; i++)
            md.t[0][i] = cft_below(&r, 3) ? 0 : (uint8_t)cft_next(&r);
        CHECK_ST(cf_table_write(h, 0, 0, md.t[0], md.m[0] * md.b), CF_OK);
        for (unsigned i = 0; i < 2000; i++) {
            uint64_t x = cft_next(&r);
            CHECK_EQ_U(cf_count_hash(h, x), model_count(&md, x));
            if (i % 4 == 0)
                CHECK_ST(cf_add_hash(h, x), model_add(&md, x));
            if (i % 7 == 0 && model_has(&md, x))
                CHECK_ST(cf_delete_hash(h, x), model_delete(&md, x));
        }
        same_tables(h, &md, "arbitrary bytes", 2000);
        model_free(&md);
    }
    cf_free(h);
    cf_free(fixed);
    cf_free(f);
    cf_free(g);
}

/* A filter begun by cf_table_load_begin takes no table memory until its bytes come,
 * takes them only in order (any other refused, nothing changed), reads what has not come
 * as empty, is loading and read-only until the last byte, and is then the filter whose
 * bytes it took: the same bytes, writable, and every way back in gives it again. Each
 * allocation that fails on the way leaves it as it was. */
static void test_raw_load(void)
{
    cft_context("loading raw tables");
    cf_config c = {.capacity = 64,
                   .bucket_size = 4,
                   .expansion = 2,
                   .max_kicks = 10,
                   .max_sub_filters = 8,
                   .flags = CF_REDISBLOOM};
    cf_filter *f = cft_new(c);
    if (!f)
        return;
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t i = 0; cft_stats(f).sub_filters < 3; i++)
        CHECK_ST(cf_add(f, key, cft_key(key, 12, i)), CF_OK);
    unsigned n = cft_stats(f).sub_filters;
    uint64_t total = cf_table_loaded(f);
    CHECK_EQ_U(total, 16u * 4u * (1u + 2u + 4u));
    uint8_t *run = malloc(total);
    for (unsigned k = 0, at = 0; run && k < n; at += (unsigned)cf_table_size(f, k), k++)
        CHECK_ST(cf_table_read(f, k, 0, run + at, cf_table_size(f, k)), CF_OK);

    cft_alloc t;
    cft_alloc_init(&t);
    cf_config lc = c;
    lc.allocator = &t.a;
    cf_filter *g = NULL;
    CHECK_ST(cf_table_load_begin(&lc, 0, &g), CF_EINVAL);
    CHECK_ST(cf_table_load_begin(&lc, 9, &g), CF_EINVAL); /* past max_sub_filters */
    cf_config plain = lc;
    plain.flags = 0;
    CHECK_ST(cf_table_load_begin(&plain, 1, &g), CF_EINVAL);
    cf_config fixed = lc;
    fixed.expansion = 0;
    CHECK_ST(cf_table_load_begin(&fixed, 2, &g), CF_EINVAL);
    if (!run || !CHECK_ST(cf_table_load_begin(&lc, n, &g), CF_OK)) {
        free(run);
        cf_free(f);
        return;
    }
    CHECK(t.live_bytes < 1024); /* no table yet */
    CHECK(cf_is_loading(g));
    CHECK_EQ_U(cft_stats(g).sub_filters, n);
    CHECK_EQ_U(cf_table_loaded(g), 0);
    CHECK_ST(cf_add(g, "x", 1), CF_EREADONLY);
    CHECK(!cf_contains(g, "x", 1));
    CHECK_EQ_U(cf_serialized_size(g), 0);
    uint64_t cursor = 0;
    size_t len;
    uint8_t chunk[256];
    CHECK_ST(cf_dump_chunk(g, &cursor, chunk, sizeof chunk, &len), CF_EINVAL);
    CHECK_ST(cf_load_chunk(&g, 64, chunk, 16, NULL), CF_EINVAL);
    uint8_t zeros[8], got8[8];
    memset(zeros, 0, sizeof zeros);
    CHECK_ST(cf_table_read(g, 2, 8, got8, 8), CF_OK); /* not arrived: empty slots */
    CHECK(memcmp(got8, zeros, 8) == 0);
    /* In slices of 24 bytes (a slice never crosses a sub-filter), each allocation failing
     * once first, and the wrong slices refused on the way. */
    uint64_t at = 0;
    for (unsigned k = 0; k < n; k++) {
        uint64_t size = cf_table_size(f, k);
        for (uint64_t off = 0; off < size;) {
            size_t step = size - off < 24 ? (size_t)(size - off) : 24u;
            if (off + step < size)
                CHECK_ST(cf_table_write(g, k, off + step, run + at + step, 1), CF_ECORRUPT);
            if (k + 1 < n)
                CHECK_ST(cf_table_write(g, k + 1, 0, run, 1), CF_ECORRUPT);
            if (off == 0) {
                cft_alloc_arm(&t, 1, false);
                CHECK_ST(cf_table_write(g, k, off, run + at, step), CF_ENOMEM);
                cft_alloc_disarm(&t);
                CHECK_EQ_U(cf_table_loaded(g), at);
            }
            CHECK_ST(cf_table_write(g, k, off, run + at, step), CF_OK);
            off += step;
            at += step;
            CHECK_EQ_U(cf_table_loaded(g), at);
            CHECK(cf_is_loading(g) == (at < total));
        }
    }
    CHECK(!cf_is_loading(g));
    CHECK(cft_same_bytes(f, g));
    CHECK_EQ_U(cft_stats(g).items, cft_stats(f).items);
    for (uint64_t i = 0; i < 40; i++)
        CHECK(cf_contains(g, key, cft_key(key, 12, i)));
    char path[64];
    snprintf(path, sizeof path, "/tmp/cf-test-rb-%ld.cf", (long)getpid());
    cft_round_trips(g, path);
    CHECK_ST(cf_add(g, key, cft_key(key, 12, 1000000)), CF_OK); /* writable */
    unlink(path);
    cf_free(g);
    CHECK_ALLOC_CLEAN(&t);
    free(run);
    cf_free(f);
}

/* Every filter of this layout saves and loads again byte for byte, by every path. */
static void test_round_trips(void)
{
    cft_context("round trips of RedisBloom's layout");
    char path[64];
    snprintf(path, sizeof path, "/tmp/cf-test-rb-rt-%ld.cf", (long)getpid());
    static const unsigned sizes[] = {1, 2, 4, 8};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cf_config c = {.capacity = 200,
                       .bucket_size = sizes[i],
                       .expansion = 2,
                       .max_kicks = 20,
                       .flags = CF_REDISBLOOM};
        cf_filter *f = cft_new(c);
        uint8_t key[CFT_KEY_MAX];
        for (uint64_t k = 0; f && k < 700; k++) {
            cf_add(f, key, cft_key(key, 13, k));
            if (k % 5 == 0)
                cf_delete(f, key, cft_key(key, 13, k / 2));
            if (k % 250 == 0)
                cft_round_trips(f, path);
        }
        if (f)
            cft_round_trips(f, path);
        cf_free(f);
    }
    unlink(path);
}

int main(void)
{
    cft_init("test_redisbloom");
    test_murmur();
    test_sizing();
    test_files();
    test_against_model();
    test_raw_tables();
    test_raw_load();
    test_round_trips();
    return cft_finish();
}
