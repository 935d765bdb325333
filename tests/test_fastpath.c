/*
 * test_fastpath.c - the shape-specialised hot paths of fast.c (cf__contains_fb,
 * cf__add_fb, cf__contains_many_fb and cf__add_many_fb, compiled with constant widths for the
 * shapes of CF__FAST_SHAPES and with run-time widths for every other shape) give exactly
 * what a plain slot-by-slot lookup gives, for every fingerprint width 4..32 and bucket
 * sizes 1..8, 16 and 40.
 *
 * The reference ("plain path") is written here from the scalar primitives only: the key
 * of a hash (cf__key_of), its first bucket reduced with a plain `%` of the table's bucket
 * count, its second with cf__alt_of, the slots read one by one with cf__slot_get, and the
 * stash entries of struct cf_filter. It counts the fingerprints matching a hash in every
 * sub-filter and the stash; "contains" is a count above zero.
 *
 * For every shape:
 * 1. Lookups: a growing filter (expansion 2, three or more sub-filters) and a fixed one
 *    (expansion 0) pushed past its capacity until its stash holds fingerprints, filled with
 *    random bare hashes, keys (the empty key too) and extra copies. cf_contains_hash,
 *    cf_count_hash, cf_contains, cf_count, cf_contains_many (batches of 0, 1, 15, 16, 17,
 *    33, 256, 1000 and all at once; nothing written past the batch) and cf_contains_keys
 *    (the same batches, with NULL keys of nonzero length: false; NULL and non-NULL keys of
 *    length 0: the empty key's answer) all equal the reference, for present keys, absent
 *    keys, and again after a third of the added keys were deleted; no added key that was
 *    not deleted is ever missed. Some shapes also through a memory-mapped copy.
 * 2. cf_add_many is a loop of cf_add_hash / cf_add (flags 0) or of cf_add_unique
 *    (CF_ADD_UNIQUE): three twins of one config take the same key stream: one key by key,
 *    one through cf_add_many with a status array, one with status NULL, in batches of 0, 1,
 *    15, 16, 17, 1000 and others. Per-key statuses, return values (the number of CF_OK),
 *    cf_get_stats and cf_serialize bytes must agree, and nothing is written past a batch's
 *    statuses. Streams hold fresh keys, repeats of earlier keys, and runs of one hot key
 *    longer than its buckets hold. Configs: growing (expansion 2: growth, hot keys
 *    CF_FULL), fixed (CF_FULL, stash), growing at max_sub_filters 2 (stash, CF_FULL), and
 *    growing with an allocator that refuses the third sub-filter (CF_ENOMEM).
 * 3. The last bucket: keys whose first or second bucket is the last bucket of the table
 *    (of a fixed filter, and of the first and newest sub-filters of a growing one) fill
 *    it, through cf_add and through cf_add_many; every lookup call is checked on them; they
 *    are deleted again, and added again through cf_add_unique and CF_ADD_UNIQUE. Under
 *    ASan (the sanitizer build) this proves that the wide loads and stores of the fast
 *    paths stay inside the padded allocation.
 * Then, for a few shapes, cf_add_many's refusals: NULL filter, NULL hashes with n > 0,
 * unknown flag bits (every status CF_EINVAL, returns 0, filter unchanged); a memory-mapped
 * filter and one still loading chunk by chunk (CF_EREADONLY); n = 0 with NULL hashes
 * (returns 0, nothing written). The loading filter, once complete, takes the same
 * cf_add_many as its original and ends identical to it. cf_contains_keys with a NULL
 * argument or n = 0 writes nothing.
 *
 * CF_TEST_SEED repeats a run; CF_TEST_SCALE scales the key counts.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "testutil.h"

#include <stdlib.h>
#include <unistd.h>

/* Item ids that are not keys of a stream. */
#define ID_BARE    UINT64_MAX       /* a bare random hash, added with cf_add_hash */
#define ID_EMPTY   (UINT64_MAX - 1) /* the empty key */
/* Ids from here on are keys never added (ids of added keys stay far below). */
#define ABSENT_IDS (UINT64_C(1) << 50)

/* The batch sizes the batched calls are cut into, in turn. */
static const size_t batch_sizes[] = {1, 15, 16, 17, 0, 1000, 33, 2, 256, 31, 16, 64};
#define NBATCH (sizeof batch_sizes / sizeof batch_sizes[0])

static char g_dir[256];   /* temporary directory for files */
static unsigned g_shapes; /* shapes tested */
static unsigned g_fast;   /* of which fast shapes */

/* Statuses seen from cf_add_many across the run (coverage of the comparisons). */
static uint64_t g_seen[2][CF_EREADONLY + 1]; /* [flags][status] */
static uint64_t g_stash_filters, g_grown_filters;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test_fastpath: out of memory\n");
        exit(2);
    }
    return p;
}

/* ------------------------------------------------------------------------------------ */
/* Items: a bare hash, or a key of a stream (regenerated from its id when needed)        */
/* ------------------------------------------------------------------------------------ */

typedef struct item {
    uint64_t h;
    uint64_t id; /* key id in the pool's stream, ID_BARE or ID_EMPTY */
} item;

typedef struct pool {
    item *v;
    size_t n, cap;
} pool;

static void pool_push(pool *p, item x)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 256;
        item *v = realloc(p->v, p->cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "test_fastpath: out of memory\n");
            exit(2);
        }
        p->v = v;
    }
    p->v[p->n++] = x;
}

static void pool_free(pool *p)
{
    free(p->v);
    *p = (pool){NULL, 0, 0};
}

static bool keyed(const item *x)
{
    return x->id != ID_BARE;
}

/* The bytes of item x's key (keyed items only); returns its length. */
static size_t item_key(uint8_t *buf, uint64_t stream, const item *x)
{
    return x->id == ID_EMPTY ? 0 : cft_key_var(buf, stream, x->id);
}

static item key_item(const cf_filter *f, uint64_t stream, uint64_t id)
{
    uint8_t kb[CFT_KEY_MAX];
    item x = {0, id};
    size_t len = item_key(kb, stream, &x);
    x.h = cf_hash(f, kb, len);
    return x;
}

/* ------------------------------------------------------------------------------------ */
/* The reference: the plain, slot-by-slot path                                           */
/* ------------------------------------------------------------------------------------ */

/* The key's two buckets in table t, computed as FORMAT.md says, with 128-bit products, a
 * plain divide and `%`: the first is floor(x * m / 2^64), the second moves its prefix
 * p = i1 / scale to (off - p) mod base and keeps the rest. */
static void ref_buckets(const cf__table *t, const cf__key *k, uint64_t *i1, uint64_t *i2)
{
    __extension__ typedef unsigned __int128 u128;
    uint64_t scale = cf__scale_of(t), base = t->buckets / scale;
    uint64_t mix = (uint64_t)k->fp * k->fp * UINT64_C(0x9e3779b97f4a7c15);
    unsigned seg = t->shape->seg; /* segmented: (p XOR off) with off from 2^seg */
    *i1 = (uint64_t)(((u128)k->x * t->buckets) >> 64);
    uint64_t off = (uint64_t)(((u128)mix * (seg ? UINT64_C(1) << seg : base)) >> 64) | 1u;
    uint64_t p = *i1 / scale, r = *i1 % scale;
    *i2 = (seg ? p ^ off : (off + base - p) % base) * scale + r;
}

/* Stored fingerprints matching hash h: every slot of both buckets of every sub-filter,
 * and the stash entries of each sub-filter that sit in the key's pair. */
/* The key's fingerprint in sub-filter t (FORMAT.md, "Hashing"): the first sub-filter's
 * f-bit fingerprint (the top f bits of h, 0 becoming 1), and for a sub-filter ext bits
 * wider, the low ext bits of (h * 0xd6e8feb86659fd93) >> 32 above it. */
static uint32_t ref_fp(const cf_filter *f, const cf__table *t, uint64_t h)
{
    unsigned f0 = f->fp_bits, e = t->shape->f - f0;
    uint64_t fp = h >> (64u - f0);
    if (fp == 0)
        fp = 1;
    uint64_t more = ((h * UINT64_C(0xd6e8feb86659fd93)) >> 32) & ((UINT64_C(1) << e) - 1);
    return (uint32_t)(fp | more << f0);
}

static uint64_t ref_count(const cf_filter *f, uint64_t h)
{
    cf__key k = cf__key_bits(f->fp_bits, h);
    uint64_t n = 0;
    for (unsigned x = 0; x < f->ntables; x++) {
        const cf__table *t = &f->tables[x];
        const cf__shape *s = t->shape;
        uint32_t fp = ref_fp(f, t, h);
        uint64_t i1, i2;
        ref_buckets(t, &k, &i1, &i2);
        for (unsigned j = 0; j < s->b; j++) {
            if (cf__slot_get(t, s, i1, j) == fp)
                n++;
            if (cf__slot_get(t, s, i2, j) == fp)
                n++;
        }
        for (unsigned e = 0; e < f->stash_n; e++) {
            const cf__stash *st = &f->more->stash[e];
            if (st->table == x && st->fp == fp && (st->bucket == i1 || st->bucket == i2))
                n++;
        }
    }
    return n;
}

/* ------------------------------------------------------------------------------------ */
/* Lookups against the reference                                                         */
/* ------------------------------------------------------------------------------------ */

/* cf_contains_many over hs[0 .. n) in batches (sizes from batch_sizes, starting at
 * `phase`), each checked against want[] and for writes past its end. */
static void check_many(const cf_filter *f, const uint64_t *hs, const bool *want, size_t n,
                       size_t phase)
{
    unsigned char *out = xmalloc(n + 1);
    size_t bad = 0;
    for (size_t pos = 0, s = phase; pos < n || s == phase; s++) {
        size_t m = batch_sizes[s % NBATCH];
        if (m > n - pos)
            m = n - pos;
        memset(out + pos, 0xA5, m + 1);
        cf_contains_many(f, hs + pos, m, (bool *)(void *)(out + pos));
        CHECK_MSG(out[pos + m] == 0xA5, "cf_contains_many wrote past a batch of %zu", m);
        for (size_t j = 0; j < m; j++) {
            bool got = ((const bool *)(const void *)out)[pos + j];
            if (got != want[pos + j] && bad++ < 3)
                CHECK_MSG(false, "cf_contains_many(%016llx) = %d, reference %d (batch of %zu)",
                          (unsigned long long)hs[pos + j], got, want[pos + j], m);
        }
        pos += m;
    }
    CHECK_MSG(bad == 0, "cf_contains_many: %zu of %zu answers differ from the reference", bad, n);
    /* All at once. */
    memset(out, 0xA5, n + 1);
    cf_contains_many(f, hs, n, (bool *)(void *)out);
    size_t bad_all = 0;
    for (size_t j = 0; j < n; j++)
        bad_all += ((const bool *)(const void *)out)[j] != want[j];
    CHECK_MSG(bad_all == 0 && out[n] == 0xA5,
              "cf_contains_many of all %zu: %zu answers differ from the reference", n, bad_all);
    free(out);
}

/* cf_contains_keys over the keyed items of it[0 .. n), with NULL keys of nonzero length
 * and keys of length 0 (NULL and not) mixed in, in batches. */
static void check_keys(const cf_filter *f, uint64_t stream, const item *it, const uint64_t *ref,
                       size_t n, size_t phase)
{
    size_t cap = n + n / 4 + 8; /* n, 1 in 9 NULL keys, 1 in 13 empty keys */
    const void **kp = xmalloc(cap * sizeof *kp);
    size_t *kl = xmalloc(cap * sizeof *kl);
    bool *want = xmalloc(cap * sizeof *want);
    uint8_t *kb = xmalloc(cap * CFT_KEY_MAX);
    unsigned char *out = xmalloc(cap + 1);
    static const uint8_t nothing[1] = {0};
    bool empty_found = ref_count(f, cf_hash(f, NULL, 0)) > 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 9 == 4) { /* a NULL key of nonzero length: false, whatever the filter holds */
            kp[m] = NULL;
            kl[m] = 1 + i % 5;
            want[m++] = false;
        }
        if (i % 13 == 6) { /* the empty key, as NULL and as a pointer */
            kp[m] = i % 2 ? NULL : nothing;
            kl[m] = 0;
            want[m++] = empty_found;
        }
        if (!keyed(&it[i]))
            continue;
        uint8_t *p = kb + m * CFT_KEY_MAX;
        kl[m] = item_key(p, stream, &it[i]);
        kp[m] = kl[m] ? p : NULL;
        want[m++] = ref[i] > 0;
    }
    size_t bad = 0;
    for (size_t pos = 0, s = phase; pos < m || s == phase; s++) {
        size_t c = batch_sizes[s % NBATCH];
        if (c > m - pos)
            c = m - pos;
        memset(out + pos, 0xA5, c + 1);
        cf_contains_keys(f, kp + pos, kl + pos, c, (bool *)(void *)(out + pos));
        CHECK_MSG(out[pos + c] == 0xA5, "cf_contains_keys wrote past a batch of %zu", c);
        for (size_t j = 0; j < c; j++) {
            bool got = ((const bool *)(const void *)out)[pos + j];
            if (got != want[pos + j] && bad++ < 3)
                CHECK_MSG(false, "cf_contains_keys entry %zu (key %s, length %zu) = %d, want %d",
                          pos + j, kp[pos + j] ? "set" : "NULL", kl[pos + j], got, want[pos + j]);
        }
        pos += c;
    }
    CHECK_MSG(bad == 0, "cf_contains_keys: %zu of %zu answers differ", bad, m);
    free(kp);
    free(kl);
    free(want);
    free(kb);
    free(out);
}

/* Every lookup call against the reference for items it[0 .. n) (keys of `stream`). */
static void check_lookups(const cf_filter *f, uint64_t stream, const item *it, size_t n)
{
    uint64_t *ref = xmalloc(n * sizeof *ref);
    uint64_t *hs = xmalloc(n * sizeof *hs);
    bool *want = xmalloc(n * sizeof *want);
    size_t bad = 0;
    /* The operations the filter dispatches to follow its state: the simple ones (two
     * buckets, nothing else) only with one complete sub-filter and an empty stash. */
    bool simple = f->ntables == 1 && f->stash_n == 0;
    enum cf__code code = cf__code_of(f->tables[f->ntables - 1].shape); /* where inserts go */
    CHECK_MSG(f->ops == cf__ops_at(f->ops, simple ? CF__ROW_SIMPLE : CF__ROW_GENERAL, code),
              "f->ops does not follow the state (%u sub-filters, %u stashed)", f->ntables,
              f->stash_n);
    for (size_t i = 0; i < n; i++) {
        hs[i] = it[i].h;
        ref[i] = ref_count(f, hs[i]);
        want[i] = ref[i] > 0;
        bool c = cf_contains_hash(f, hs[i]);
        uint64_t k = cf_count_hash(f, hs[i]);
        bool ck = want[i];
        uint64_t kk = ref[i];
        if (keyed(&it[i])) {
            uint8_t kb[CFT_KEY_MAX];
            size_t len = item_key(kb, stream, &it[i]);
            ck = cf_contains(f, len ? kb : NULL, len);
            kk = cf_count(f, len ? kb : NULL, len);
        }
        if ((c != want[i] || k != ref[i] || ck != want[i] || kk != ref[i]) && bad++ < 3)
            CHECK_MSG(false,
                      "hash %016llx: cf_contains_hash %d cf_count_hash %llu cf_contains %d "
                      "cf_count %llu, reference count %llu",
                      (unsigned long long)hs[i], c, (unsigned long long)k, ck,
                      (unsigned long long)kk, (unsigned long long)ref[i]);
    }
    CHECK_MSG(bad == 0, "scalar lookups: %zu of %zu differ from the reference", bad, n);
    check_many(f, hs, want, n, n % NBATCH);
    check_keys(f, stream, it, ref, n, (n + 5) % NBATCH);
    free(ref);
    free(hs);
    free(want);
}

/* Every item of p is found (they were added and not deleted). */
static void check_found(const cf_filter *f, const pool *p)
{
    size_t missed = 0;
    for (size_t i = 0; i < p->n; i++)
        missed += !cf_contains_hash(f, p->v[i].h);
    CHECK_MSG(missed == 0, "%zu of %zu added keys are not found", missed, p->n);
}

/* ------------------------------------------------------------------------------------ */
/* Filters of a shape                                                                    */
/* ------------------------------------------------------------------------------------ */

/* Keys for a filter of bucket size b: fewer for larger buckets (their probes and
 * evictions cost more), enough for a few buckets. */
/* Are the shapes under test semi-sorted (CF_SEMI_SORT, b = 4)? Segmented (CF_SEGMENTED)?
 * Set by main around them. */
static bool g_semi, g_seg;

static uint64_t shape_keys(unsigned b)
{
    if (g_seg) /* a segment's slots: the smallest segmented table */
        return (UINT64_C(1) << CF_SEGMENT_BITS) * b;
    uint64_t n = cft_scaled_min(1600, 100) / b;
    return n < 48 ? 48 : n;
}

static cf_config shape_config(unsigned f, unsigned b, uint64_t capacity, unsigned expansion,
                              uint64_t tag)
{
    cf_config c = {.capacity = capacity,
                   .fingerprint_bits = f,
                   .bucket_size = b,
                   .expansion = expansion,
                   .seed = cft_subseed(tag ^ g_semi ^ (uint64_t)g_seg << 1),
                   .flags = (g_semi ? CF_SEMI_SORT : 0u) | (g_seg ? CF_SEGMENTED : 0u)};
    return c;
}

static bool is_fast(unsigned f, unsigned b)
{
    cf__shape s;
    cf__shape_init(&s, f, b, g_semi);
    return cf__code_of(&s) != CF__CODE_GENERIC;
}

/* Save f in the temporary directory and map it; NULL on failure (reported). */
static cf_filter *mapped_copy(const cf_filter *f, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    cf_filter *m = NULL;
    if (CHECK_ST(cf_save(f, path), CF_OK))
        CHECK_ST(cf_open_mapped(path, CF_MAP_VERIFY, NULL, &m), CF_OK);
    unlink(path);
    return m;
}

/* 1. Fill a filter (growing: until three sub-filters; fixed: until the stash is used and
 * adds fail), then check every lookup against the reference, delete a third, check again. */
static void lookup_scenario(unsigned fb, unsigned b, bool growing, uint64_t tag)
{
    uint64_t keys = shape_keys(b);
    cf_config c = shape_config(fb, b, growing ? (keys + 3) / 4 : keys, growing ? 2u : 0u, tag);
    cft_context("lookups: f %u b %u %s, capacity %llu, filter seed %016llx", fb, b,
                growing ? "growing" : "fixed", (unsigned long long)c.capacity,
                (unsigned long long)c.seed);
    cf_filter *f;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    const uint64_t stream = tag;
    cft_rng rng = cft_rng_make(cft_subseed(tag ^ 0x10));
    pool added = {0}, absent = {0}, gone = {0};
    item empty = {cf_hash(f, NULL, 0), ID_EMPTY};
    if (CHECK_ST(cf_add(f, NULL, 0), CF_OK))
        pool_push(&added, empty);

    uint64_t limit = 4 * keys + 64, fulls = 0;
    unsigned most_stashed = 0;
    for (uint64_t i = 0; i < limit; i++) {
        item x;
        uint64_t r = cft_below(&rng, 16);
        if (r == 0 && added.n > 0)
            x = added.v[cft_below(&rng, added.n)]; /* one more copy */
        else if (r < 6)
            x = (item){cft_next(&rng), ID_BARE};
        else
            x = key_item(f, stream, i);
        cf_status st;
        if (keyed(&x) && (i & 1)) {
            uint8_t kb[CFT_KEY_MAX];
            size_t len = item_key(kb, stream, &x);
            st = cf_add(f, len ? kb : NULL, len);
        } else {
            st = cf_add_hash(f, x.h);
        }
        if (st == CF_OK)
            pool_push(&added, x);
        else if (st == CF_FULL)
            fulls++;
        else if (!CHECK_ST(st, CF_OK))
            break;
        if (f->stash_n > most_stashed)
            most_stashed = f->stash_n;
        if (growing ? f->ntables >= 3 && i >= 2 * keys
                    : most_stashed >= CF__STASH_SLOTS / 2 && fulls >= 4)
            break;
    }
    if (cft_full_scale()) {
        if (growing)
            CHECK_MSG(f->ntables >= 3, "the growing filter has %u sub-filters", f->ntables);
        else
            CHECK_MSG(most_stashed > 0 && fulls > 0,
                      "the fixed filter never used its stash (%u) or refused an add (%llu)",
                      most_stashed, (unsigned long long)fulls);
    }
    g_grown_filters += f->ntables >= 3;
    g_stash_filters += f->stash_n > 0;

    size_t nabs = added.n / 2 + 50;
    for (size_t i = 0; i < nabs; i++)
        pool_push(&absent,
                  i % 3 ? key_item(f, stream, ABSENT_IDS + i) : (item){cft_next(&rng), ID_BARE});

    /* Present and absent keys, interleaved; then deletes; then everything again. */
    pool all = {0};
    for (size_t i = 0; i < added.n || i < absent.n; i++) {
        if (i < added.n)
            pool_push(&all, added.v[i]);
        if (i < absent.n)
            pool_push(&all, absent.v[i]);
    }
    check_lookups(f, stream, all.v, all.n);
    check_found(f, &added);

    pool kept = {0};
    for (size_t i = 0; i < added.n; i++) {
        item x = added.v[i];
        if (i % 3 != 1) {
            pool_push(&kept, x);
            continue;
        }
        cf_status st;
        if (keyed(&x) && (i & 2)) {
            uint8_t kb[CFT_KEY_MAX];
            size_t len = item_key(kb, stream, &x);
            st = cf_delete(f, len ? kb : NULL, len);
        } else {
            st = cf_delete_hash(f, x.h);
        }
        CHECK_ST(st, CF_OK);
        pool_push(&gone, x);
    }
    check_lookups(f, stream, all.v, all.n);
    check_found(f, &kept);

    /* A memory-mapped copy answers alike (some shapes: each costs a file). */
    if (is_fast(fb, b) || (fb % 7 == 4 && b % 2 == 1)) {
        cf_filter *m = mapped_copy(f, "lookups.cf");
        if (m) {
            check_lookups(m, stream, all.v, all.n);
            check_found(m, &kept);
            cf_free(m);
        }
    }
    pool_free(&all);
    pool_free(&added);
    pool_free(&absent);
    pool_free(&gone);
    pool_free(&kept);
    cf_free(f);
}

/* ------------------------------------------------------------------------------------ */
/* 2. cf_add_many against the sequential loop                                            */
/* ------------------------------------------------------------------------------------ */

typedef enum scenario { SC_GROWING, SC_FIXED, SC_LIMIT, SC_NOMEM, SC_COUNT } scenario;

static const char *const scenario_names[] = {"growing", "fixed", "at max_sub_filters",
                                             "allocator refusing growth"};

/* Copies of a hot key in one run: more than its two buckets hold in three sub-filters. */
static size_t hot_run(unsigned b)
{
    return 6 * (size_t)b + 1;
}

/* The key stream: fresh keys, repeats of earlier keys, and runs of a hot key. */
static uint64_t *make_stream(unsigned b, size_t n, cft_rng *rng)
{
    uint64_t *ids = xmalloc(n * sizeof *ids);
    const uint64_t hot = UINT64_C(1) << 40;
    size_t run = 0, runs = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = cft_below(rng, 64);
        if (run > 0) {
            ids[i] = hot + runs % 2; /* two hot keys, in turn */
            run--;
        } else if (r == 0 || (runs == 0 && i >= n / 2)) {
            ids[i] = hot + ++runs % 2;
            run = hot_run(b) - 1;
        } else if (r < 7 && i > 0) {
            ids[i] = ids[cft_below(rng, i)];
        } else {
            ids[i] = i;
        }
    }
    return ids;
}

static void add_many_scenario(unsigned fb, unsigned b, scenario sc, unsigned flags, uint64_t tag)
{
    uint64_t keys = shape_keys(b);
    cf_config c;
    switch (sc) {
    case SC_GROWING:
        c = shape_config(fb, b, (keys + 3) / 4, 2, tag);
        break;
    case SC_FIXED:
        c = shape_config(fb, b, keys, 0, tag);
        break;
    case SC_LIMIT:
        c = shape_config(fb, b, keys / 2, 1, tag);
        c.max_sub_filters = 2;
        break;
    default:
        c = shape_config(fb, b, (keys + 3) / 4, 2, tag);
        break;
    }
    size_t n = (size_t)(2 * keys) + 2 * hot_run(b);
    cft_context("cf_add_many: f %u b %u %s%s, capacity %llu, %zu keys, filter seed %016llx", fb, b,
                scenario_names[sc], flags ? " CF_ADD_UNIQUE" : "", (unsigned long long)c.capacity,
                n, (unsigned long long)c.seed);

    cft_alloc ta[3];
    cf_filter *f[3] = {NULL, NULL, NULL}; /* sequential, batched, batched without statuses */
    for (int i = 0; i < 3; i++) {
        cft_alloc_init(&ta[i]);
        c.allocator = &ta[i].a;
        if (!CHECK_ST(cf_new(&c, &f[i]), CF_OK)) {
            for (int j = 0; j < i; j++)
                cf_free(f[j]);
            return;
        }
        /* The second sub-filter (twice the first) fits, the third (four times) does not. */
        size_t second;
        if (sc == SC_NOMEM &&
            CHECK(cf__table_bytes(cf__shape0(f[i]), 2 * f[i]->tables[0].buckets, &second)))
            ta[i].max_size = second;
    }
    const uint64_t stream = tag;
    cft_rng rng = cft_rng_make(cft_subseed(tag ^ 0x20));
    uint64_t *ids = make_stream(b, n, &rng);
    uint64_t *hs = xmalloc(n * sizeof *hs);
    cf_status *st_seq = xmalloc(n * sizeof *st_seq);
    cf_status *st_bat = xmalloc((n + 1) * sizeof *st_bat);
    for (size_t i = 0; i < n; i++)
        hs[i] = key_item(f[0], stream, ids[i]).h;

    /* Sequential. */
    size_t ok_seq = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t kb[CFT_KEY_MAX];
        size_t len = cft_key_var(kb, stream, ids[i]);
        if (flags & CF_ADD_UNIQUE)
            st_seq[i] = cf_add_unique(f[0], kb, len);
        else
            st_seq[i] = i & 1 ? cf_add(f[0], kb, len) : cf_add_hash(f[0], hs[i]);
        ok_seq += st_seq[i] == CF_OK;
    }

    /* Batched, with statuses, in the batch sizes of the list; without, in other sizes. */
    size_t ok_bat = 0, ok_nul = 0, over = 0, bad_ret = 0;
    size_t s = tag % NBATCH;
    for (size_t pos = 0; pos < n; s++) {
        size_t m = batch_sizes[s % NBATCH];
        if (m > n - pos)
            m = n - pos;
        st_bat[pos + m] = CF_ECORRUPT; /* never a status of an add */
        size_t r = cf_add_many(f[1], hs + pos, m, flags, st_bat + pos);
        over += st_bat[pos + m] != CF_ECORRUPT;
        size_t oks = 0;
        for (size_t j = 0; j < m; j++)
            oks += st_bat[pos + j] == CF_OK;
        bad_ret += r != oks;
        ok_bat += r;
        pos += m;
    }
    for (size_t pos = 0; pos < n; s += 5) {
        size_t m = batch_sizes[s % NBATCH] * 3 + 1;
        if (m > n - pos)
            m = n - pos;
        ok_nul += cf_add_many(f[2], hs + pos, m, flags, NULL);
        pos += m;
    }

    CHECK_MSG(over == 0, "cf_add_many wrote a status past its batch %zu times", over);
    CHECK_MSG(bad_ret == 0, "cf_add_many returned other than its CF_OK count %zu times", bad_ret);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) {
        g_seen[flags & CF_ADD_UNIQUE][st_bat[i] <= CF_EREADONLY ? st_bat[i] : 0]++;
        if (st_bat[i] != st_seq[i] && diff++ < 3)
            CHECK_MSG(false, "key %zu (hash %016llx): cf_add_many says %s, the loop %s", i,
                      (unsigned long long)hs[i], cft_status_name(st_bat[i]),
                      cft_status_name(st_seq[i]));
    }
    CHECK_MSG(diff == 0, "%zu of %zu statuses differ", diff, n);
    CHECK_EQ_U(ok_bat, ok_seq);
    CHECK_EQ_U(ok_nul, ok_seq);
    cf_stats sa = cft_stats(f[0]), sb = cft_stats(f[1]), sn = cft_stats(f[2]);
    CHECK_STATS_EQ(sa, sb);
    CHECK_STATS_EQ(sa, sn);
    CHECK_MSG(cft_same_bytes(f[0], f[1]),
              "cf_add_many (statuses) and the loop serialize differently");
    CHECK_MSG(cft_same_bytes(f[0], f[2]),
              "cf_add_many (no statuses) and the loop serialize differently");

    /* What the scenario was meant to exercise did happen (full-size runs). With
     * CF_ADD_UNIQUE, short fingerprints answer "exists" for most new keys and the filter
     * never fills: main checks that the unique runs as a whole saw every status. */
    if (cft_full_scale()) {
        size_t full = 0, nomem = 0, exists = 0;
        for (size_t i = 0; i < n; i++) {
            full += st_seq[i] == CF_FULL;
            nomem += st_seq[i] == CF_ENOMEM;
            exists += st_seq[i] == CF_EXISTS;
        }
        if (flags & CF_ADD_UNIQUE) {
            CHECK_MSG(exists > 0, "no CF_EXISTS");
        } else {
            if (sc == SC_GROWING)
                CHECK_MSG(sa.sub_filters >= 2 && full > 0,
                          "%u sub-filters; the hot keys got CF_FULL %zu times", sa.sub_filters,
                          full);
            if (sc == SC_FIXED || sc == SC_LIMIT)
                CHECK_MSG(full > 0 && sa.stashed > 0, "CF_FULL %zu times, %llu stashed", full,
                          (unsigned long long)sa.stashed);
            if (sc == SC_NOMEM)
                CHECK_MSG(nomem > 0, "no CF_ENOMEM");
        }
    }
    for (int i = 0; i < 3; i++) {
        cf_free(f[i]);
        CHECK_ALLOC_CLEAN(&ta[i]);
    }
    free(ids);
    free(hs);
    free(st_seq);
    free(st_bat);
}

/* ------------------------------------------------------------------------------------ */
/* 3. The last bucket                                                                    */
/* ------------------------------------------------------------------------------------ */

/* Keys of `stream` whose first bucket (want_first) or only second bucket is the last
 * bucket of table t: up to `want` of them appended to p. */
static void find_last_bucket_keys(const cf_filter *f, const cf__table *t, uint64_t stream,
                                  uint64_t *next_id, bool want_first, size_t want, pool *p)
{
    const uint64_t last = t->buckets - 1;
    /* Hits come about 1 in (buckets / 2) keys; give up far beyond that. */
    uint64_t budget = 64 * t->buckets + 10000;
    for (size_t found = 0; found < want && budget-- > 0;) {
        item x = key_item(f, stream, (*next_id)++);
        cf__key k = cf__key_bits(f->fp_bits, x.h);
        uint64_t i1, i2;
        ref_buckets(t, &k, &i1, &i2);
        if (want_first ? i1 == last : i2 == last && i1 != last) {
            pool_push(p, x);
            found++;
        }
    }
}

static void last_bucket_scenario(unsigned fb, unsigned b, bool growing, uint64_t tag)
{
    cf_config c = shape_config(fb, b, growing ? 8u * b : 40u * b, growing ? 2u : 0u, tag);
    cft_context("last bucket: f %u b %u %s, capacity %llu, filter seed %016llx", fb, b,
                growing ? "growing" : "fixed", (unsigned long long)c.capacity,
                (unsigned long long)c.seed);
    cf_filter *a, *z; /* keys added by cf_add, and by cf_add_many */
    if (!CHECK_ST(cf_new(&c, &a), CF_OK))
        return;
    if (!CHECK_ST(cf_new(&c, &z), CF_OK)) {
        cf_free(a);
        return;
    }
    const uint64_t stream = tag;
    if (growing) { /* three sub-filters: random hashes into both, until it grew twice */
        cft_rng rng = cft_rng_make(cft_subseed(tag ^ 0x30));
        for (int i = 0; i < 100000 && a->ntables < 3; i++) {
            uint64_t h = cft_next(&rng);
            cf_status sa = cf_add_hash(a, h), sz = cf_add_hash(z, h);
            if (!CHECK_ST(sz, sa))
                break;
        }
        CHECK_MSG(a->ntables >= 3, "the growing filter has %u sub-filters", a->ntables);
    }
    pool p = {0};
    uint64_t next_id = 0;
    const unsigned newest = a->ntables - 1; /* the adds below may grow the filter again */
    /* The last bucket of the newest sub-filter, and of the first (its keys' buckets in the
     * newer ones are elsewhere). */
    for (unsigned pass = 0; pass < (growing ? 2u : 1u); pass++) {
        const cf__table *t = &a->tables[pass == 0 ? newest : 0];
        size_t before = p.n;
        find_last_bucket_keys(a, t, stream, &next_id, true, b + 2, &p);
        find_last_bucket_keys(a, t, stream, &next_id, false, b + 1, &p);
        CHECK_MSG(p.n - before == 2 * b + 3, "found only %zu keys for the last bucket of %llu",
                  p.n - before, (unsigned long long)t->buckets);
    }
    /* In: key by key, and in one batch. */
    uint64_t *hs = xmalloc((p.n + 1) * sizeof *hs);
    cf_status *st = xmalloc((p.n + 1) * sizeof *st);
    for (size_t i = 0; i < p.n; i++)
        hs[i] = p.v[i].h;
    size_t oks = 0;
    pool in = {0};
    for (size_t i = 0; i < p.n; i++) {
        uint8_t kb[CFT_KEY_MAX];
        size_t len = item_key(kb, stream, &p.v[i]);
        cf_status sa = cf_add(a, kb, len);
        oks += sa == CF_OK;
        if (sa == CF_OK)
            pool_push(&in, p.v[i]);
        st[i] = CF_ECORRUPT;
    }
    st[p.n] = CF_ECORRUPT;
    CHECK_EQ_U(cf_add_many(z, hs, p.n, 0, st), oks);
    CHECK_MSG(st[p.n] == CF_ECORRUPT, "a status written past the batch");
    CHECK_MSG(cft_same_bytes(a, z), "cf_add_many and cf_add serialize differently");
    /* The last bucket of the (then) newest sub-filter is full now. */
    const cf__table *t = &a->tables[newest];
    unsigned used = 0;
    for (unsigned j = 0; j < b; j++)
        used += cf__slot_get(t, t->shape, t->buckets - 1, j) != 0;
    CHECK_MSG(used == b, "the last bucket holds %u fingerprints of %u", used, b);

    /* Lookups there, then out again, then lookups of what is left. */
    check_lookups(a, stream, p.v, p.n);
    check_lookups(z, stream, p.v, p.n);
    check_found(a, &in);
    for (size_t i = 0; i < in.n; i++) {
        uint8_t kb[CFT_KEY_MAX];
        size_t len = item_key(kb, stream, &in.v[i]);
        CHECK_ST(cf_delete(a, kb, len), CF_OK);
        CHECK_ST(cf_delete_hash(z, in.v[i].h), CF_OK);
    }
    CHECK_MSG(cft_same_bytes(a, z), "after the deletes, the twins differ");
    check_lookups(a, stream, p.v, p.n);
    /* And in again with CF_ADD_UNIQUE, against cf_add_unique. */
    size_t ok_u = 0;
    for (size_t i = 0; i < p.n; i++) {
        uint8_t kb[CFT_KEY_MAX];
        size_t len = item_key(kb, stream, &p.v[i]);
        cf_status sa = cf_add_unique(a, kb, len);
        ok_u += sa == CF_OK;
        st[i] = sa;
    }
    cf_status *su = xmalloc((p.n + 1) * sizeof *su);
    CHECK_EQ_U(cf_add_many(z, hs, p.n, CF_ADD_UNIQUE, su), ok_u);
    size_t diff = 0;
    for (size_t i = 0; i < p.n; i++)
        diff += su[i] != st[i];
    CHECK_MSG(diff == 0, "%zu CF_ADD_UNIQUE statuses differ", diff);
    CHECK_MSG(cft_same_bytes(a, z), "after CF_ADD_UNIQUE, the twins differ");
    check_lookups(z, stream, p.v, p.n);
    free(su);
    free(hs);
    free(st);
    pool_free(&p);
    pool_free(&in);
    cf_free(a);
    cf_free(z);
}

/* ------------------------------------------------------------------------------------ */
/* Refusals of cf_add_many                                                               */
/* ------------------------------------------------------------------------------------ */

/* statuses st[0 .. n) all `want`. */
static bool all_status(const cf_status *st, size_t n, cf_status want)
{
    for (size_t i = 0; i < n; i++)
        if (st[i] != want)
            return false;
    return true;
}

static void refusals(unsigned fb, unsigned b, uint64_t tag)
{
    enum { N = 40 };
    cf_config c = shape_config(fb, b, 2000, 1, tag);
    cft_context("cf_add_many refusals: f %u b %u, filter seed %016llx", fb, b,
                (unsigned long long)c.seed);
    cf_filter *f, *g;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    if (!CHECK_ST(cf_new(&c, &g), CF_OK)) {
        cf_free(f);
        return;
    }
    cft_rng rng = cft_rng_make(cft_subseed(tag ^ 0x40));
    uint64_t hs[N];
    cf_status st[N + 1];
    for (size_t i = 0; i < N; i++)
        hs[i] = cft_next(&rng);
    CHECK_EQ_U(cf_add_many(f, hs, N / 2, 0, NULL), N / 2);
    CHECK_EQ_U(cf_add_many(g, hs, N / 2, 0, NULL), N / 2);

    /* Invalid calls: every status CF_EINVAL, 0 returned, nothing changed. */
    static const unsigned bad_flags[] = {2u, 4u, 0x80000000u, CF_ADD_UNIQUE | 8u, ~0u};
    for (size_t i = 0; i <= N; i++)
        st[i] = CF_OK;
    CHECK_EQ_U(cf_add_many(NULL, hs, N, 0, st), 0);
    CHECK(all_status(st, N, CF_EINVAL));
    CHECK_EQ_U(cf_add_many(NULL, hs, N, CF_ADD_UNIQUE, NULL), 0);
    for (size_t i = 0; i <= N; i++)
        st[i] = CF_OK;
    CHECK_EQ_U(cf_add_many(f, NULL, N, 0, st), 0);
    CHECK(all_status(st, N, CF_EINVAL));
    CHECK_ST(st[N], CF_OK);
    CHECK_EQ_U(cf_add_many(f, NULL, N, CF_ADD_UNIQUE, NULL), 0);
    for (size_t k = 0; k < sizeof bad_flags / sizeof bad_flags[0]; k++) {
        for (size_t i = 0; i <= N; i++)
            st[i] = CF_OK;
        CHECK_EQ_U(cf_add_many(f, hs, N, bad_flags[k], st), 0);
        CHECK_MSG(all_status(st, N, CF_EINVAL), "flags %#x", bad_flags[k]);
        CHECK_ST(st[N], CF_OK);
        CHECK_EQ_U(cf_add_many(f, hs, N, bad_flags[k], NULL), 0);
    }
    /* n = 0: nothing to do, nothing written, even with NULL hashes. */
    st[0] = CF_ECORRUPT;
    CHECK_EQ_U(cf_add_many(f, NULL, 0, 0, st), 0);
    CHECK_EQ_U(cf_add_many(f, hs, 0, CF_ADD_UNIQUE, st), 0);
    CHECK_EQ_U(cf_add_many(f, NULL, 0, 0, NULL), 0);
    CHECK_ST(st[0], CF_ECORRUPT);
    CHECK_MSG(cft_same_bytes(f, g), "a refused cf_add_many changed the filter");

    /* cf_contains_keys does nothing when a pointer is NULL, or for n = 0. */
    {
        static const char k0[] = "k";
        const void *keys[1] = {k0};
        size_t lens[1] = {1};
        unsigned char out[2] = {0xA5, 0xA5};
        bool *o = (bool *)(void *)out;
        cf_contains_keys(NULL, keys, lens, 1, o);
        cf_contains_keys(f, NULL, lens, 1, o);
        cf_contains_keys(f, keys, NULL, 1, o);
        cf_contains_keys(f, keys, lens, 0, o);
        cf_contains_keys(f, keys, lens, 1, NULL);
        CHECK_MSG(out[0] == 0xA5, "cf_contains_keys wrote an answer for a call it must ignore");
        cf_contains_keys(f, keys, lens, 1, o);
        CHECK_MSG(out[0] <= 1 && out[1] == 0xA5, "cf_contains_keys of one key");
    }

    /* Memory-mapped: CF_EREADONLY for every key, with and without CF_ADD_UNIQUE. */
    cf_filter *m = mapped_copy(f, "refusals.cf");
    if (m) {
        for (unsigned flags = 0; flags <= CF_ADD_UNIQUE; flags++) {
            for (size_t i = 0; i <= N; i++)
                st[i] = CF_OK;
            CHECK_EQ_U(cf_add_many(m, hs, N, flags, st), 0);
            CHECK(all_status(st, N, CF_EREADONLY));
            CHECK_ST(st[N], CF_OK);
            CHECK_EQ_U(cf_add_many(m, hs, N, flags, NULL), 0);
        }
        st[0] = CF_ECORRUPT;
        CHECK_EQ_U(cf_add_many(m, hs, 0, 0, st), 0);
        CHECK_ST(st[0], CF_ECORRUPT);
        CHECK_MSG(cft_same_bytes(f, m), "the mapped filter changed");
        cf_free(m);
    }

    /* Loading chunk by chunk: read-only until the last chunk, then like its original. */
    size_t cap = cf_dump_chunk_max(f);
    uint8_t *buf = xmalloc(cap);
    uint64_t cursor = 0;
    size_t len = 0;
    cf_filter *l = NULL;
    if (CHECK_ST(cf_dump_chunk(f, &cursor, buf, cap, &len), CF_OK) &&
        CHECK_ST(cf_load_chunk(&l, cursor, buf, len, NULL), CF_OK)) {
        CHECK(cf_is_loading(l));
        for (unsigned flags = 0; flags <= CF_ADD_UNIQUE; flags++) {
            for (size_t i = 0; i <= N; i++)
                st[i] = CF_OK;
            CHECK_EQ_U(cf_add_many(l, hs, N, flags, st), 0);
            CHECK(all_status(st, N, CF_EREADONLY));
            CHECK_ST(st[N], CF_OK);
        }
        while (cursor != 0) {
            if (!CHECK_ST(cf_dump_chunk(f, &cursor, buf, cap, &len), CF_OK))
                break;
            if (len && !CHECK_ST(cf_load_chunk(&l, cursor, buf, len, NULL), CF_OK))
                break;
        }
        CHECK(!cf_is_loading(l));
        CHECK_MSG(cft_same_bytes(f, l), "the loaded copy differs");
        cf_status sf[N], sl[N];
        size_t rf = cf_add_many(f, hs, N, CF_ADD_UNIQUE, sf);
        size_t rl = cf_add_many(l, hs, N, CF_ADD_UNIQUE, sl);
        CHECK_EQ_U(rl, rf);
        CHECK_EQ_U(rf, N / 2); /* the first half was there already */
        CHECK(memcmp(sf, sl, sizeof sf) == 0);
        CHECK_MSG(cft_same_bytes(f, l), "the loaded copy differs after cf_add_many");
    }
    cf_free(l);
    free(buf);
    cf_free(f);
    cf_free(g);
}

/* ------------------------------------------------------------------------------------ */

static void test_shape(unsigned fb, unsigned b)
{
    uint64_t tag = ((uint64_t)fb << 16 | b) << 8;
    g_shapes++;
    g_fast += is_fast(fb, b);
    lookup_scenario(fb, b, true, tag + 1);
    lookup_scenario(fb, b, false, tag + 2);
    for (int sc = 0; sc < SC_COUNT; sc++)
        for (unsigned flags = 0; flags <= CF_ADD_UNIQUE; flags++)
            add_many_scenario(fb, b, (scenario)sc, flags, tag + 16 + 2 * (uint64_t)sc + flags);
    last_bucket_scenario(fb, b, false, tag + 32);
    last_bucket_scenario(fb, b, true, tag + 33);
}

int main(void)
{
    cft_init("test_fastpath");
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/cf_test_fastpath_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 2;
    }

    static const unsigned sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 40};
    double t0 = cft_now();
    for (unsigned fb = CF_MIN_FINGERPRINT_BITS; fb <= CF_MAX_FINGERPRINT_BITS; fb++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            test_shape(fb, sizes[i]);
    g_semi = true; /* and every width semi-sorted */
    for (unsigned fb = CF_MIN_FINGERPRINT_BITS; fb <= CF_MAX_FINGERPRINT_BITS; fb++)
        test_shape(fb, 4);
    g_semi = false;
    printf("  %u shapes (%u fast), semi-sorted ones included: %.2f s\n", g_shapes, g_fast,
           cft_now() - t0);
    /* Segmented tables (the per-shape code compiled for their mapping): every fast shape,
     * semi-sorted ones too, and some of the generic code's, each filled to its stash and
     * refusals, every lookup and delete checked. Each is a segment of 2^16 buckets at
     * least, too many slots to grow three times here: growth of segmented filters is
     * test_differential's and test_growth's. */
    t0 = cft_now();
    g_seg = true;
    static const unsigned seg_shapes[][3] = {{8, 4, 0},  {12, 4, 0}, {16, 4, 0}, {8, 2, 0},
                                             {12, 2, 0}, {16, 2, 0}, {8, 8, 0},  {5, 1, 0},
                                             {13, 3, 0}, {9, 4, 1},  {13, 4, 1}, {10, 4, 1}};
    const size_t nseg = sizeof seg_shapes / sizeof seg_shapes[0];
    for (size_t i = 0; i < nseg; i++) {
        g_semi = seg_shapes[i][2] != 0;
        lookup_scenario(seg_shapes[i][0], seg_shapes[i][1], false, 0x5e6000 + i);
    }
    g_semi = g_seg = false;
    printf("  segmented: %zu shapes: %.2f s\n", nseg, cft_now() - t0);
    for (unsigned u = 0; u < 2; u++) {
        const uint64_t *seen = g_seen[u];
        printf("  cf_add_many%s statuses compared: OK %llu, EXISTS %llu, FULL %llu, ENOMEM %llu\n",
               u ? " CF_ADD_UNIQUE" : "", (unsigned long long)seen[CF_OK],
               (unsigned long long)seen[CF_EXISTS], (unsigned long long)seen[CF_FULL],
               (unsigned long long)seen[CF_ENOMEM]);
        if (cft_full_scale())
            CHECK_MSG(seen[CF_OK] && seen[CF_FULL] && seen[CF_ENOMEM] && (!u || seen[CF_EXISTS]),
                      "cf_add_many%s never returned some status", u ? " CF_ADD_UNIQUE" : "");
    }
    printf("  lookups on %llu filters with 3+ sub-filters, %llu with stash entries\n",
           (unsigned long long)g_grown_filters, (unsigned long long)g_stash_filters);

    t0 = cft_now();
    refusals(12, 4, 1);
    refusals(8, 2, 2);
    refusals(13, 3, 3);
    printf("  refusals: %.2f s\n", cft_now() - t0);

    rmdir(g_dir);
    return cft_finish();
}
