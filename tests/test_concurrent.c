/*
 * test_concurrent.c - filters made with CF_CONCURRENT.
 *
 * - Differential: one thread, the same operations on a concurrent filter and on the same
 *   filter without the flag, for many shapes (odd bucket sizes, semi-sorted buckets,
 *   growth, the stash, clears): the same statuses, answers and bytes. Every write of a
 *   concurrent filter goes through its own code (bucket windows, stripe counters), so
 *   this holds that code to the plain one.
 * - Stress: reader threads look up stable keys (added before, never deleted) while writer
 *   threads add and delete keys of their own at high load, forcing evictions, growth and
 *   the stash: no lookup may miss a stable key. Then each writer's own model of what it
 *   holds is checked against the filter (every key found, the item count exact).
 *   CF_TEST_SCALE scales the lookups (50: over 10^8; 500: over 10^9). make test runs it
 *   under TSan too.
 * - Writers together: more writer threads than cores, each adding keys of its own into
 *   one filter until it is near full (they hold stripes, not the lock, and are preempted
 *   holding them), then deleting half, all of them adding one shared list of keys with
 *   cf_add_unique (each key must be added once, by one of them): every key held found,
 *   every count exact.
 * - Batched fills beside the lock: writers adding keys of their own with cf_add_many
 *   (which fills free slots without taking a stripe) and deleting them, round after
 *   round, then adding them and deleting half, beside a reader
 *   of stable keys and a thread that serializes the filter over and over (the lock's
 *   holder, who must see no fill land after it counted): every image loads (its item
 *   count agrees with its slots) and holds every stable key, no lookup misses one, and
 *   at the end every key held is found and the count is exact.
 * - Deletes beside moves: a small filter near full, one thread adding and deleting so that
 *   evictions keep moving fingerprints, another deleting and adding back keys of its own:
 *   every delete of a key held succeeds, every key held is found, the count is exact.
 * - Segment owners: writers of a segmented filter that each add, then delete, the keys of
 *   their own segments, at 93 % load (evictions all the time): the filter ends byte for
 *   byte as one thread doing the same leaves it, whatever the interleaving. Writers of
 *   different segments never meet: no lock word, counter, table word or eviction of one
 *   touches another's (table.h, "Synchronized tables"; a stripe lies in one segment).
 * - Planning steps: a writer's planning search on the stack, which tries 16 nodes, then
 *   64, 256 and the budget, each with a visited set of its own size (cf__bfs_steps), and
 *   the same search in kept memory with the whole budget at once give the same answer
 *   and the same path for every key of a full 12/4 filter's probes.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp */

#include "concurrent.h"
#include "evict.h"
#include "testutil.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------ */
/* Differential                                                                         */
/* ------------------------------------------------------------------------------------ */

/* Operations per shape, and the share of them that are deletes of a key added before. */
#define DIFF_OPS        6000u
#define DIFF_DEL_PCT    30u
#define DIFF_UNIQUE_PCT 10u

/* The concurrent filter replaced by plain's bytes loaded with CF_CONCURRENT
 * (cf_deserialize_flags), in whatever state plain reached (grown, stashing): the same
 * bytes, every added key found, and the differential goes on with it. NULL on failure
 * (cc freed). */
static cf_filter *diff_reload(const cf_filter *plain, cf_filter *cc, const uint64_t *added,
                              size_t nadded)
{
    size_t n = cf_serialized_size(plain);
    void *buf = malloc(n);
    cf_filter *loaded = NULL;
    if (CHECK(buf) && CHECK_ST(cf_serialize(plain, buf, n, NULL), CF_OK) &&
        CHECK_ST(cf_deserialize_flags(buf, n, CF_CONCURRENT, NULL, &loaded), CF_OK)) {
        CHECK(cft_same_bytes(loaded, cc));
        for (size_t j = 0; j < nadded; j++)
            if (!CHECK(cf_contains_hash(loaded, added[j])))
                break;
        cf_config got;
        cf_get_config(loaded, &got);
        CHECK(got.flags & CF_CONCURRENT);
    }
    free(buf);
    cf_free(cc);
    return loaded;
}

static void diff_shape(cf_config c, uint64_t seed)
{
    cft_context("differential f %u b %u expansion %u flags %u", c.fingerprint_bits, c.bucket_size,
                c.expansion, c.flags);
    c.flags |= CF_FIXED_SEED;
    c.seed = seed | 1u;
    cf_filter *plain = cft_new(c);
    c.flags |= CF_CONCURRENT;
    cf_filter *cc = cft_new(c);
    if (!CHECK(plain && cc)) {
        cf_free(plain);
        cf_free(cc);
        return;
    }
    uint64_t *added = malloc(DIFF_OPS * sizeof *added);
    size_t nadded = 0;
    cft_rng r = cft_rng_make(seed);
    bool cleared = false;
    for (unsigned i = 0; i < DIFF_OPS; i++) {
        uint64_t roll = cft_below(&r, 100);
        cf_status a, b;
        if (roll < DIFF_DEL_PCT && nadded) {
            size_t j = (size_t)cft_below(&r, nadded);
            uint64_t h = added[j];
            added[j] = added[--nadded];
            a = cf_delete_hash(plain, h);
            b = cf_delete_hash(cc, h);
        } else if (roll < DIFF_DEL_PCT + DIFF_UNIQUE_PCT) {
            uint8_t key[8];
            uint64_t id = cft_below(&r, 64);
            cft_put64(key, id);
            a = cf_add_unique(plain, key, sizeof key);
            b = cf_add_unique(cc, key, sizeof key);
        } else {
            uint64_t h = cft_next(&r);
            a = cf_add_hash(plain, h);
            b = cf_add_hash(cc, h);
            if (a == CF_OK)
                added[nadded++] = h;
        }
        if (!CHECK_ST(b, a))
            break;
        if (i == DIFF_OPS / 4 && !(cc = diff_reload(plain, cc, added, nadded)))
            break;
        if (!cleared && i == DIFF_OPS / 2) { /* a clear halfway, then more of everything */
            cf_clear(plain);
            cf_clear(cc);
            nadded = 0;
            cleared = true;
        }
    }
    CHECK(cft_same_bytes(plain, cc));
    cf_stats sp = cft_stats(plain), sc = cft_stats(cc);
    CHECK_EQ_U(sc.items, sp.items);
    CHECK_EQ_U(sc.stashed, sp.stashed);
    CHECK_EQ_U(sc.sub_filters, sp.sub_filters);
    CHECK(sc.bytes > sp.bytes); /* the stripe counters */
    for (unsigned i = 0; i < 2000; i++) {
        uint64_t h = i < nadded ? added[i] : cft_next(&r);
        CHECK_EQ_U(cf_contains_hash(cc, h), cf_contains_hash(plain, h));
        CHECK_EQ_U(cf_count_hash(cc, h), cf_count_hash(plain, h));
    }
    uint64_t batch[256];
    bool out_p[256], out_c[256];
    for (unsigned i = 0; i < 256; i++)
        batch[i] = i < nadded ? added[i] : cft_next(&r);
    cf_contains_many(plain, batch, 256, out_p);
    cf_contains_many(cc, batch, 256, out_c);
    CHECK(memcmp(out_p, out_c, sizeof out_p) == 0);
    cf_status stp[256], stc[256];
    CHECK_EQ_U(cf_add_many(cc, batch, 256, CF_ADD_UNIQUE, stc),
               cf_add_many(plain, batch, 256, CF_ADD_UNIQUE, stp));
    CHECK(memcmp(stp, stc, sizeof stp) == 0);
    CHECK(cft_same_bytes(plain, cc));
    cf_config got;
    cf_get_config(cc, &got);
    CHECK(got.flags & CF_CONCURRENT);
    free(added);
    cf_free(plain);
    cf_free(cc);
}

static void test_differential(void)
{
    /* Small tables, so that the ops fill them: evictions, growth, the stash. Bucket bits
     * of every residue mod 8 (5 x 3 = 15, 6 x 1, 4 x 3 = 12, ...), one byte-aligned wide
     * bucket, semi-sorted buckets of even and odd widths; the fast shapes whose bucket
     * fills a 2-, 4- or 8-byte word, which lookups read with one load. */
    const cf_config shapes[] = {
        {.capacity = 3000, .fingerprint_bits = 12, .bucket_size = 4},
        {.capacity = 3000, .fingerprint_bits = 13, .bucket_size = 4},
        {.capacity = 3000, .fingerprint_bits = 11, .bucket_size = 4, .flags = CF_SEMI_SORT},
        {.capacity = 500, .fingerprint_bits = 12, .bucket_size = 4, .expansion = 2},
        {.capacity = 500, .fingerprint_bits = 5, .bucket_size = 3, .expansion = 2},
        {.capacity = 2000, .fingerprint_bits = 6, .bucket_size = 1},
        {.capacity = 400, .fingerprint_bits = 4, .bucket_size = 3, .expansion = 4},
        {.capacity = 3000, .fingerprint_bits = 13, .bucket_size = 4, .flags = CF_SEMI_SORT},
        {.capacity = 500,
         .fingerprint_bits = 10,
         .bucket_size = 4,
         .expansion = 2,
         .flags = CF_SEMI_SORT},
        {.capacity = 3000, .fingerprint_bits = 32, .bucket_size = 8},
        {.capacity = 3000, .fingerprint_bits = 7, .bucket_size = 37},
        {.capacity = 300, .fingerprint_bits = 16, .bucket_size = 2, .expansion = 3},
        {.capacity = 2000, .fingerprint_bits = 8, .bucket_size = 4},
        {.capacity = 2000, .fingerprint_bits = 16, .bucket_size = 4},
        {.capacity = 2000, .fingerprint_bits = 8, .bucket_size = 2},
        {.capacity = 2000, .fingerprint_bits = 8, .bucket_size = 8},
        {.capacity = 2000, .fingerprint_bits = 9, .bucket_size = 4, .flags = CF_SEMI_SORT},
        /* Segmented tables (one segment of 2^16 buckets: 2-choice buckets fill it), of a
         * fast shape, a semi-sorted one and one read at run time, one growing. */
        {.capacity = 2000, .fingerprint_bits = 12, .bucket_size = 4, .flags = CF_SEGMENTED},
        {.capacity = 2000,
         .fingerprint_bits = 13,
         .bucket_size = 4,
         .flags = CF_SEGMENTED | CF_SEMI_SORT},
        {.capacity = 2000, .fingerprint_bits = 6, .bucket_size = 1, .flags = CF_SEGMENTED},
        {.capacity = 500,
         .fingerprint_bits = 8,
         .bucket_size = 1,
         .expansion = 2,
         .flags = CF_SEGMENTED},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        diff_shape(shapes[i], cft_subseed(100 + i));
}

/* ------------------------------------------------------------------------------------ */
/* Stress                                                                               */
/* ------------------------------------------------------------------------------------ */

#define STRESS_READERS     2u
#define STRESS_WRITERS     2u
#define STRESS_STABLE      8000u    /* keys added first, never deleted */
#define STRESS_LOOKUPS     1000000u /* per reader at scale 1 */
#define STRESS_WRITER_KEYS 3000u    /* most keys a writer holds at once */
#define STRESS_WRITES      200000u  /* lookups go on until the writers did this many */

typedef struct stress {
    cf_filter *f;
    uint64_t stable_stream;
    atomic_uint readers_left;
    atomic_ullong writes; /* adds and deletes done so far, by every writer */
    unsigned long long min_writes;
} stress;

typedef struct reader_arg {
    stress *s;
    uint64_t lookups; /* at least this many; then how many it did */
    uint64_t misses, batched_misses;
} reader_arg;

/* A thread that copies the filter while the others run: statistics, and whole snapshots
 * through cf_serialize, each loaded back and checked for a sample of the stable keys. */
typedef struct snapshot_arg {
    stress *s;
    uint64_t snapshots, bad_snapshots, snapshot_misses;
} snapshot_arg;

#define STRESS_SNAPSHOT_SAMPLE 500u
#define STRESS_SNAPSHOT_EVERY  2000u /* writes between two snapshots */
#define STRESS_SNAPSHOT_TRIES  16u   /* each failed try saw a growth, and growths are few */

typedef struct writer_arg {
    stress *s;
    uint64_t stream, seed;
    uint64_t *held; /* ids of the keys it holds now */
    size_t nheld;
    uint64_t adds, deletes, failed_deletes, full;
} writer_arg;

/* Keys are 16 bytes (cft_key): the keyed calls. */
static void *stress_reader(void *p)
{
    reader_arg *a = p;
    stress *s = a->s;
    uint8_t keys[64][CFT_KEY_MAX];
    const void *ptrs[64];
    size_t lens[64];
    bool out[64];
    /* Lookups are faster than writes: they go on until the writers have done their share
     * too, so that the lookups meet as many moves and growths at every scale. */
    uint64_t i = 0;
    while (i < a->lookups ||
           atomic_load_explicit(&s->writes, memory_order_relaxed) < s->min_writes) {
        uint64_t id = i % STRESS_STABLE;
        size_t len = cft_key(keys[0], s->stable_stream, id);
        a->misses += !cf_contains(s->f, keys[0], len);
        i++;
        if (i % 1024 == 0) { /* now and then a batch through cf_contains_keys */
            for (unsigned k = 0; k < 64; k++) {
                lens[k] = cft_key(keys[k], s->stable_stream, (id + k) % STRESS_STABLE);
                ptrs[k] = keys[k];
            }
            cf_contains_keys(s->f, ptrs, lens, 64, out);
            for (unsigned k = 0; k < 64; k++)
                a->batched_misses += !out[k];
        }
    }
    a->lookups = i;
    atomic_fetch_sub(&s->readers_left, 1u);
    return NULL;
}

static void *stress_snapshots(void *p)
{
    snapshot_arg *a = p;
    stress *s = a->s;
    uint8_t key[CFT_KEY_MAX];
    unsigned long long last = 0;
    while (atomic_load(&s->readers_left) > 0) {
        /* Paced by the writers, whom each snapshot holds up (it takes their lock). */
        unsigned long long w = atomic_load_explicit(&s->writes, memory_order_relaxed);
        if (w - last < STRESS_SNAPSHOT_EVERY && a->snapshots > 0) {
            sched_yield();
            continue;
        }
        last = w;
        cf_stats st;
        cf_get_stats(s->f, &st);
        a->bad_snapshots += st.items < STRESS_STABLE;
        /* Writers may grow the filter between the size and the copy, past any fixed margin
         * (a growth adds a sub-filter as large as all before it): serialize then refuses
         * the short buffer, and a caller asks for the new size again. */
        uint8_t *buf = NULL;
        size_t n = 0;
        cf_status sst = CF_EINVAL;
        for (unsigned attempt = 0; attempt < STRESS_SNAPSHOT_TRIES && sst != CF_OK; attempt++) {
            free(buf);
            size_t cap = cf_serialized_size(s->f);
            buf = malloc(cap);
            sst = buf ? cf_serialize(s->f, buf, cap, &n) : CF_ENOMEM;
        }
        cf_filter *copy = NULL;
        if (sst != CF_OK || cf_deserialize(buf, n, NULL, &copy) != CF_OK) {
            a->bad_snapshots++;
        } else {
            for (uint64_t id = a->snapshots % 7u; id < STRESS_STABLE;
                 id += STRESS_STABLE / STRESS_SNAPSHOT_SAMPLE) {
                size_t len = cft_key(key, s->stable_stream, id);
                a->snapshot_misses += !cf_contains(copy, key, len);
            }
        }
        cf_free(copy);
        free(buf);
        a->snapshots++;
    }
    return NULL;
}

static void *stress_writer(void *p)
{
    writer_arg *a = p;
    stress *s = a->s;
    cft_rng r = cft_rng_make(a->seed);
    uint64_t next_id = 0;
    uint8_t key[CFT_KEY_MAX];
    while (atomic_load(&s->readers_left) > 0) {
        /* Mostly adds while it holds few keys, mostly deletes once it holds many: the
         * filter stays near full and inserts keep evicting. */
        bool add = a->nheld == 0 || (a->nheld < STRESS_WRITER_KEYS &&
                                     cft_below(&r, STRESS_WRITER_KEYS) >= a->nheld / 2);
        if (add) {
            uint64_t id = next_id++;
            size_t len = cft_key(key, a->stream, id);
            cf_status st = cf_add(s->f, key, len);
            if (st == CF_OK) {
                a->held[a->nheld++] = id;
                a->adds++;
            } else {
                a->full++;
            }
        } else {
            size_t j = (size_t)cft_below(&r, a->nheld);
            size_t len = cft_key(key, a->stream, a->held[j]);
            a->held[j] = a->held[--a->nheld];
            a->failed_deletes += cf_delete(s->f, key, len) != CF_OK;
            a->deletes++;
        }
        atomic_fetch_add_explicit(&s->writes, 1u, memory_order_relaxed);
    }
    return NULL;
}

/* RELOAD: the stable keys go into a filter without the flag, which is saved and loaded
 * back with it (cf_load_flags) before the threads start: a concurrent filter that begins
 * in a file's state (grown, say). */
static void stress_run(const char *label, cf_config c, bool reload)
{
    cft_context("stress %s", label);
    if (!reload)
        c.flags |= CF_CONCURRENT;
    stress s = {.f = cft_new(c), .stable_stream = cft_subseed(7)};
    if (!CHECK(s.f))
        return;
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = 0; id < STRESS_STABLE; id++) {
        size_t len = cft_key(key, s.stable_stream, id);
        if (!CHECK_ST(cf_add(s.f, key, len), CF_OK)) {
            cf_free(s.f);
            return;
        }
    }
    if (reload) {
        const char *dir = getenv("TMPDIR");
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/cf_test_concurrent_XXXXXX", dir && *dir ? dir : "/tmp");
        int fd = mkstemp(path);
        cf_filter *loaded = NULL;
        bool ok = CHECK(fd >= 0) && close(fd) == 0 && CHECK_ST(cf_save(s.f, path), CF_OK) &&
                  CHECK_ST(cf_load_flags(path, CF_CONCURRENT, NULL, &loaded), CF_OK) &&
                  CHECK(cft_same_bytes(loaded, s.f));
        CHECK_ST(cf_load_flags(path, CF_SEMI_SORT, NULL, &loaded), CF_EINVAL); /* not a load flag */
        remove(path);
        cf_free(s.f);
        if (!ok) {
            cf_free(loaded);
            return;
        }
        s.f = loaded;
    }
    atomic_init(&s.readers_left, STRESS_READERS);
    atomic_init(&s.writes, 0u);
    s.min_writes = cft_scaled(STRESS_WRITES);
    reader_arg ra[STRESS_READERS];
    writer_arg wa[STRESS_WRITERS];
    pthread_t rt[STRESS_READERS], wt[STRESS_WRITERS];
    for (unsigned i = 0; i < STRESS_WRITERS; i++) {
        wa[i] = (writer_arg){.s = &s, .stream = cft_subseed(20 + i), .seed = cft_subseed(30 + i)};
        wa[i].held = malloc(STRESS_WRITER_KEYS * sizeof *wa[i].held);
        CHECK(pthread_create(&wt[i], NULL, stress_writer, &wa[i]) == 0);
    }
    for (unsigned i = 0; i < STRESS_READERS; i++) {
        ra[i] = (reader_arg){.s = &s, .lookups = cft_scaled(STRESS_LOOKUPS)};
        CHECK(pthread_create(&rt[i], NULL, stress_reader, &ra[i]) == 0);
    }
    snapshot_arg sa = {.s = &s};
    pthread_t st_thread;
    CHECK(pthread_create(&st_thread, NULL, stress_snapshots, &sa) == 0);
    uint64_t lookups = 0, misses = 0, adds = 0, deletes = 0, full = 0, held = 0;
    for (unsigned i = 0; i < STRESS_READERS; i++) {
        pthread_join(rt[i], NULL);
        lookups += ra[i].lookups;
        misses += ra[i].misses + ra[i].batched_misses;
    }
    for (unsigned i = 0; i < STRESS_WRITERS; i++) {
        pthread_join(wt[i], NULL);
        adds += wa[i].adds;
        deletes += wa[i].deletes;
        full += wa[i].full;
        held += wa[i].nheld;
        CHECK_EQ_U(wa[i].failed_deletes, 0);
    }
    pthread_join(st_thread, NULL);
    cf_stats st = cft_stats(s.f);
    printf("  stress %s: %llu lookups, %llu adds, %llu deletes, %llu full, %llu snapshots, "
           "%u sub-filters, %llu stashed, load %.3f\n",
           label, (unsigned long long)lookups, (unsigned long long)adds,
           (unsigned long long)deletes, (unsigned long long)full, (unsigned long long)sa.snapshots,
           (unsigned)st.sub_filters, (unsigned long long)st.stashed, st.load_factor);
    CHECK_EQ_U(misses, 0);
    CHECK(sa.snapshots > 0);
    CHECK_EQ_U(sa.bad_snapshots, 0);
    CHECK_EQ_U(sa.snapshot_misses, 0);
    CHECK(adds > 0 && deletes > 0);
    /* The final contents against the writers' models. */
    CHECK_EQ_U(st.items, STRESS_STABLE + held);
    for (uint64_t id = 0; id < STRESS_STABLE; id++) {
        size_t len = cft_key(key, s.stable_stream, id);
        CHECK(cf_contains(s.f, key, len));
    }
    for (unsigned i = 0; i < STRESS_WRITERS; i++)
        for (size_t j = 0; j < wa[i].nheld; j++) {
            size_t len = cft_key(key, wa[i].stream, wa[i].held[j]);
            CHECK(cf_count(s.f, key, len) >= 1);
        }
    for (unsigned i = 0; i < STRESS_WRITERS; i++)
        free(wa[i].held);
    cf_free(s.f);
}

static void test_stress(void)
{
    /* A fixed filter too small for all the writers' keys: full, evicting, stashing. */
    stress_run("fixed",
               (cf_config){.capacity = STRESS_STABLE + STRESS_WRITERS * STRESS_WRITER_KEYS * 3 / 4,
                           .fingerprint_bits = 12,
                           .bucket_size = 4},
               false);
    /* Shapes read at run time (13-bit fingerprints: what a target rate of 0.1 % picks;
     * semi-sorted 11-bit ones), whose lookups have a fast path of their own, in fixed
     * filters that hold all the writers' keys at about 94 % load: inserts evict all the
     * time and the stash stays empty, so lookups stay on that path. */
    const uint64_t roomy = STRESS_STABLE + STRESS_WRITERS * STRESS_WRITER_KEYS;
    stress_run("near full 13/4",
               (cf_config){.capacity = roomy, .fingerprint_bits = 13, .bucket_size = 4}, false);
    /* A fast shape of 4-byte buckets, two to an aligned word, each read with one load. */
    stress_run("near full 8/4",
               (cf_config){.capacity = roomy, .fingerprint_bits = 8, .bucket_size = 4}, false);
    stress_run(
        "near full semi-sorted 11/4",
        (cf_config){
            .capacity = roomy, .fingerprint_bits = 11, .bucket_size = 4, .flags = CF_SEMI_SORT},
        false);
    /* A segmented one (its own per-shape code): lookups beside writers there too. */
    stress_run(
        "segmented 12/4",
        (cf_config){
            .capacity = roomy, .fingerprint_bits = 12, .bucket_size = 4, .flags = CF_SEGMENTED},
        false);
    /* A growing one that starts small: it grows while readers read. */
    stress_run("growing", (cf_config){.capacity = 1024, .expansion = 2}, false);
    /* The same, loaded from a file with the flag when it has grown already: readers must
     * look past its first sub-filter from the start. */
    stress_run("growing, loaded", (cf_config){.capacity = 1024, .expansion = 2}, true);
    /* RedisBloom's layout, whose calls all take the writers' lock: growing, and loaded. */
    stress_run(
        "redisbloom layout",
        (cf_config){.capacity = 1024, .expansion = 2, .max_kicks = 20, .flags = CF_REDISBLOOM},
        false);
    stress_run(
        "redisbloom layout, loaded",
        (cf_config){.capacity = 1024, .expansion = 2, .max_kicks = 20, .flags = CF_REDISBLOOM},
        true);
    /* Semi-sorted buckets. */
    stress_run("semi-sorted",
               (cf_config){.capacity = 1024,
                           .expansion = 2,
                           .fingerprint_bits = 13,
                           .bucket_size = 4,
                           .flags = CF_SEMI_SORT},
               false);
}

/* Growth and cf_clear beside readers of the calls that read the sub-filter array and its
 * count outside the lookups: cf_get_stats and cf_contains_keys (a batch first asks whether
 * any sub-filter is complete). Small filters that grow by a sub-filter every few hundred
 * adds, many times a round, then are cleared and filled again: under ThreadSanitizer a
 * read of either that is not ordered against growth is a reported race. The figures a
 * reader sees must be those of one moment. */
#define GROWTH_ROUNDS     16u /* filters, each grown to its limit while read */
#define GROWTH_MAX_TABLES 48u
#define GROWTH_FILLS      3u /* fills of each, cleared in between */
#define GROWTH_BATCH      32u

typedef struct growth {
    cf_filter *f;
    atomic_bool done;
    uint64_t stream;
} growth;

typedef struct growth_reader {
    growth *g;
    uint64_t calls, bad;
} growth_reader;

static void *growth_read(void *p)
{
    growth_reader *a = p;
    uint8_t keys[GROWTH_BATCH][CFT_KEY_MAX];
    const void *ptrs[GROWTH_BATCH];
    size_t lens[GROWTH_BATCH];
    bool out[GROWTH_BATCH];
    for (unsigned k = 0; k < GROWTH_BATCH; k++) {
        lens[k] = cft_key(keys[k], a->g->stream, k);
        ptrs[k] = keys[k];
    }
    unsigned seen = 1;
    while (!atomic_load(&a->g->done)) {
        cf_stats st;
        cf_get_stats(a->g->f, &st);
        /* One moment's figures: whole sub-filters, never fewer than before (a concurrent
         * filter's cf_clear keeps them), items that fit. */
        a->bad += st.sub_filters < seen || st.sub_filters > GROWTH_MAX_TABLES ||
                  st.slots != st.buckets * st.bucket_size || st.items > st.slots + st.stashed ||
                  st.fingerprint_bits != 12 || st.bytes == 0;
        seen = st.sub_filters;
        cf_contains_keys(a->g->f, ptrs, lens, GROWTH_BATCH, out);
        a->calls++;
    }
    return NULL;
}

static void test_growth_beside_readers(void)
{
    cft_context("growth and clear beside cf_get_stats and cf_contains_keys");
    uint64_t calls = 0, bad = 0, adds = 0, grown = 0;
    uint8_t key[CFT_KEY_MAX];
    for (unsigned round = 0; round < cft_scaled(GROWTH_ROUNDS); round++) {
        cf_config c = {.capacity = 64,
                       .expansion = 1,
                       .max_sub_filters = GROWTH_MAX_TABLES,
                       .seed = cft_subseed(60 + round),
                       .flags = CF_CONCURRENT};
        growth g = {.f = cft_new(c), .stream = cft_subseed(70 + round)};
        if (!CHECK(g.f))
            return;
        atomic_init(&g.done, false);
        growth_reader ra[STRESS_READERS];
        pthread_t rt[STRESS_READERS];
        for (unsigned i = 0; i < STRESS_READERS; i++) {
            ra[i] = (growth_reader){.g = &g};
            CHECK(pthread_create(&rt[i], NULL, growth_read, &ra[i]) == 0);
        }
        uint64_t id = 0;
        for (unsigned fill = 0; fill < GROWTH_FILLS; fill++) {
            while (cf_add(g.f, key, cft_key(key, g.stream, id++)) == CF_OK)
                adds++;
            if (fill + 1 < GROWTH_FILLS)
                cf_clear(g.f);
        }
        atomic_store(&g.done, true);
        for (unsigned i = 0; i < STRESS_READERS; i++) {
            pthread_join(rt[i], NULL);
            calls += ra[i].calls;
            bad += ra[i].bad;
        }
        grown += cft_stats(g.f).sub_filters - 1;
        cf_free(g.f);
    }
    printf("  growth beside readers: %llu adds, %llu growths, %llu reader calls\n",
           (unsigned long long)adds, (unsigned long long)grown, (unsigned long long)calls);
    CHECK_EQ_U(bad, 0);
    CHECK(grown >= cft_scaled(GROWTH_ROUNDS) * (GROWTH_MAX_TABLES - 1));
}

/* ------------------------------------------------------------------------------------ */
/* Writers together                                                                      */
/* ------------------------------------------------------------------------------------ */

#define TOGETHER_WRITERS  4u    /* more than the 2 cores CI has */
#define TOGETHER_KEYS     6000u /* each writer's own */
#define TOGETHER_SHARED   3000u /* the list every writer adds with cf_add_unique */
/* Each writer's own keys in a filter whose first table takes at least a MiB, so that its
 * writers plan evictions in the filter's planning memory (fewer of them than writers:
 * some plan on their stacks meanwhile). */
#define TOGETHER_BIG_KEYS 200000u

typedef struct together {
    cf_filter *f;
    uint64_t stream, shared_stream, keys;
    atomic_uint *added_by; /* per shared key: the writers whose cf_add_unique added it */
    uint64_t added, deleted, failed, unique_bad;
} together;

static void *together_writer(void *p)
{
    together *a = p;
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = 0; id < a->keys; id++) {
        size_t len = cft_key(key, a->stream, id);
        a->failed += cf_add(a->f, key, len) != CF_OK;
        /* every other time one of the shared list, in the same order as the other writers,
         * which are adding it at about the same moment */
        if (id % 2 == 0) {
            uint64_t sid = id / 2 % TOGETHER_SHARED;
            len = cft_key(key, a->shared_stream, sid);
            cf_status st = cf_add_unique(a->f, key, len);
            if (st == CF_OK)
                atomic_fetch_add(&a->added_by[sid], 1u);
            a->unique_bad += st != CF_OK && st != CF_EXISTS;
        }
    }
    a->added = a->keys;
    for (uint64_t id = 0; id < a->keys; id += 2) {
        size_t len = cft_key(key, a->stream, id);
        a->failed += cf_delete(a->f, key, len) != CF_OK;
        a->deleted++;
    }
    return NULL;
}

static void together_run(const char *label, cf_config c, uint64_t keys)
{
    cft_context("writers together %s", label);
    c.flags |= CF_CONCURRENT;
    cf_filter *f = cft_new(c);
    if (!CHECK(f))
        return;
    together a[TOGETHER_WRITERS];
    pthread_t t[TOGETHER_WRITERS];
    uint64_t shared_stream = cft_subseed(90);
    atomic_uint *added_by = calloc(TOGETHER_SHARED, sizeof *added_by);
    if (!CHECK(added_by)) {
        cf_free(f);
        return;
    }
    for (unsigned i = 0; i < TOGETHER_WRITERS; i++) {
        a[i] = (together){.f = f,
                          .stream = cft_subseed(91 + i),
                          .shared_stream = shared_stream,
                          .keys = keys,
                          .added_by = added_by};
        CHECK(pthread_create(&t[i], NULL, together_writer, &a[i]) == 0);
    }
    uint64_t held = 0;
    for (unsigned i = 0; i < TOGETHER_WRITERS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_U(a[i].failed, 0);
        CHECK_EQ_U(a[i].unique_bad, 0);
        held += a[i].added - a[i].deleted;
    }
    /* A shared key is added by one writer at most (its check and its put are one step for
     * the others; another key's false positive may have kept it out), and found if so. */
    uint64_t unique_ok = 0;
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t sid = 0; sid < TOGETHER_SHARED; sid++) {
        unsigned n = atomic_load(&added_by[sid]);
        CHECK(n <= 1);
        size_t len = cft_key(key, shared_stream, sid);
        if (n)
            CHECK(cf_contains(f, key, len));
        unique_ok += n;
    }
    free(added_by);
    cf_stats st = cft_stats(f);
    printf("  writers together %s: %u writers, %llu held, %llu shared, load %.3f, %u sub-filters\n",
           label, TOGETHER_WRITERS, (unsigned long long)held, (unsigned long long)unique_ok,
           st.load_factor, (unsigned)st.sub_filters);
    CHECK_EQ_U(st.items, held + unique_ok);
    for (unsigned i = 0; i < TOGETHER_WRITERS; i++)
        for (uint64_t id = 1; id < keys; id += 2) {
            size_t len = cft_key(key, a[i].stream, id);
            CHECK(cf_contains(f, key, len));
        }
    cf_free(f);
}

static void test_writers_together(void)
{
    const uint64_t keys = TOGETHER_WRITERS * TOGETHER_KEYS + TOGETHER_SHARED;
    const uint64_t big = TOGETHER_WRITERS * TOGETHER_BIG_KEYS + TOGETHER_SHARED;
    /* Fixed, sized for all of them (about 95 % at the peak): evictions all the time. */
    together_run("12/4", (cf_config){.capacity = keys, .fingerprint_bits = 12, .bucket_size = 4},
                 TOGETHER_KEYS);
    together_run("12/4, planning memory",
                 (cf_config){.capacity = big, .fingerprint_bits = 12, .bucket_size = 4},
                 TOGETHER_BIG_KEYS);
    together_run(
        "semi-sorted 13/4",
        (cf_config){
            .capacity = keys, .fingerprint_bits = 13, .bucket_size = 4, .flags = CF_SEMI_SORT},
        TOGETHER_KEYS);
    /* Too small: it grows while the writers write, which then take the lock. */
    together_run("growing", (cf_config){.capacity = keys / 8, .expansion = 2}, TOGETHER_KEYS);
    /* A shape whose writers always take the lock. */
    together_run("13/4", (cf_config){.capacity = keys, .fingerprint_bits = 13, .bucket_size = 4},
                 TOGETHER_KEYS);
}

/* ------------------------------------------------------------------------------------ */
/* Batched fills beside the lock                                                        */
/* ------------------------------------------------------------------------------------ */

#define FILLS_WRITERS  3u     /* with the reader and the holder, more threads than cores */
#define FILLS_CAPACITY 60000u /* a few dozen stripes */
#define FILLS_STABLE   6000u  /* added before the threads start, never deleted */
#define FILLS_LOAD     0.92   /* of the capacity, at the peak: evictions inside runs too */
#define FILLS_BATCH    64u
#define FILLS_ROUNDS   30u /* each writer's adds and deletes of all its keys */

typedef struct fills {
    cf_filter *f;
    const uint64_t *stable;
    uint64_t *own; /* a writer's keys */
    size_t n;
    atomic_uint *writing; /* writers not done yet */
    uint64_t refused, missed, images, bad_images;
} fills;

/* A writer: its keys in batches and deleted again, round after round, then once more
 * with every other one deleted. */
static void *fills_writer(void *p)
{
    fills *a = p;
    uint64_t rounds = cft_scaled(FILLS_ROUNDS);
    for (uint64_t r = 0; r <= rounds; r++) {
        for (size_t i = 0; i < a->n; i += FILLS_BATCH) {
            size_t m = a->n - i < FILLS_BATCH ? a->n - i : FILLS_BATCH;
            a->refused += m - cf_add_many(a->f, a->own + i, m, 0, NULL);
        }
        for (size_t i = 0; i < a->n; i += r == rounds ? 2 : 1)
            a->refused += cf_delete_hash(a->f, a->own[i]) != CF_OK;
    }
    atomic_fetch_sub(a->writing, 1u);
    return NULL;
}

/* The reader: every stable key, round after round, until the writers are done. */
static void *fills_reader(void *p)
{
    fills *a = p;
    while (atomic_load(a->writing))
        for (size_t i = 0; i < FILLS_STABLE; i++)
            a->missed += !cf_contains_hash(a->f, a->stable[i]);
    return NULL;
}

/* The holder: images of the filter, each loaded and checked, until the writers are done
 * (and one more after). */
static void *fills_holder(void *p)
{
    fills *a = p;
    size_t cap = cf_serialized_size(a->f);
    uint8_t *buf = malloc(cap);
    bool last = false;
    while (buf && !last) {
        last = atomic_load(a->writing) == 0;
        size_t len = 0;
        cf_filter *g = NULL;
        a->images++;
        if (cf_serialize(a->f, buf, cap, &len) != CF_OK ||
            cf_deserialize(buf, len, NULL, &g) != CF_OK) {
            a->bad_images++;
            continue;
        }
        for (size_t i = 0; i < FILLS_STABLE; i++)
            a->missed += !cf_contains_hash(g, a->stable[i]);
        cf_free(g);
    }
    a->bad_images += !buf;
    free(buf);
    return NULL;
}

static void fills_run(const char *label, unsigned fp_bits, unsigned bucket_size)
{
    cft_context("batched fills beside the lock, %s", label);
    cf_filter *f = cft_new((cf_config){.capacity = FILLS_CAPACITY,
                                       .fingerprint_bits = fp_bits,
                                       .bucket_size = bucket_size,
                                       .flags = CF_CONCURRENT});
    size_t per = (size_t)((FILLS_CAPACITY * FILLS_LOAD - FILLS_STABLE) / FILLS_WRITERS);
    uint64_t *keys = malloc((FILLS_STABLE + FILLS_WRITERS * per) * sizeof *keys);
    if (!CHECK(f) || !CHECK(keys)) {
        cf_free(f);
        free(keys);
        return;
    }
    cft_rng r = cft_rng_make(cft_subseed(1300 + fp_bits + bucket_size));
    for (size_t i = 0; i < FILLS_STABLE + FILLS_WRITERS * per; i++)
        keys[i] = cft_next(&r);
    for (size_t i = 0; i < FILLS_STABLE; i++)
        CHECK_ST(cf_add_hash(f, keys[i]), CF_OK);
    atomic_uint writing;
    atomic_init(&writing, FILLS_WRITERS);
    fills a[FILLS_WRITERS + 2];
    pthread_t t[FILLS_WRITERS + 2];
    void *(*run[FILLS_WRITERS + 2])(void *);
    for (unsigned i = 0; i < FILLS_WRITERS + 2; i++) {
        a[i] = (fills){.f = f, .stable = keys, .writing = &writing};
        run[i] = i < FILLS_WRITERS    ? fills_writer
                 : i == FILLS_WRITERS ? fills_reader
                                      : fills_holder;
        if (i < FILLS_WRITERS) {
            a[i].own = keys + FILLS_STABLE + i * per;
            a[i].n = per;
        }
    }
    bool started[FILLS_WRITERS + 2];
    for (unsigned i = 0; i < FILLS_WRITERS + 2; i++)
        started[i] = CHECK(pthread_create(&t[i], NULL, run[i], &a[i]) == 0);
    if (!started[0] || !started[1] || !started[2]) /* (so that the others end) */
        atomic_store(&writing, 0u);
    uint64_t refused = 0, missed = 0, images = 0, bad = 0;
    for (unsigned i = 0; i < FILLS_WRITERS + 2; i++) {
        if (!started[i])
            continue;
        pthread_join(t[i], NULL);
        refused += a[i].refused;
        missed += a[i].missed;
        images += a[i].images;
        bad += a[i].bad_images;
    }
    cf_stats st = cft_stats(f);
    printf("  batched fills beside the lock, %s: %u writers, %llu images, load %.3f at the end\n",
           label, FILLS_WRITERS, (unsigned long long)images, st.load_factor);
    CHECK_EQ_U(refused, 0);
    CHECK_EQ_U(missed, 0);
    CHECK_EQ_U(bad, 0);
    CHECK_EQ_U(st.items, FILLS_STABLE + FILLS_WRITERS * (per / 2));
    for (size_t i = 0; i < FILLS_STABLE; i++)
        CHECK(cf_contains_hash(f, keys[i]));
    for (unsigned w = 0; w < FILLS_WRITERS; w++)
        for (size_t i = 1; i < per; i += 2)
            CHECK(cf_contains_hash(f, a[w].own[i]));
    cf_free(f);
    free(keys);
}

static void test_fills_beside_lock(void)
{
    /* 6- and 3-byte buckets: some slots lie across two words, which a run fills under
     * the stripe; 4-byte ones never. */
    fills_run("12/4", 12, 4);
    fills_run("12/2", 12, 2);
    fills_run("8/4", 8, 4);
}

/* ------------------------------------------------------------------------------------ */
/* Deletes beside moves                                                                 */
/* ------------------------------------------------------------------------------------ */

/* A small fixed filter near full (a few stripes), so that a mover's adds evict all the
 * time, moving the fingerprints of a deleter's keys between their two buckets while it
 * deletes and adds them back. A delete finds its key's bucket before it takes a lock
 * (fast.c), and its key may move meanwhile: it must find it all the same. */
#define MOVES_CAPACITY 2048u
#define MOVES_FILL     0.62 /* of the capacity: the mover's keys */
#define MOVES_OWN      600u /* the deleter's keys (with the mover's, about 87 % of the slots) */
#define MOVES_ROUNDS   300u

typedef struct moves {
    cf_filter *f;
    uint64_t *keys; /* 0: a key given up (its add refused) */
    size_t n;
    uint64_t seed;
    atomic_bool stop;
    uint64_t ops, failed_deletes;
} moves;

/* The mover: a random key of its own deleted, a new one added, until told to stop. */
static void *moves_mover(void *p)
{
    moves *a = p;
    cft_rng r = cft_rng_make(a->seed);
    while (!atomic_load_explicit(&a->stop, memory_order_relaxed)) {
        size_t j = (size_t)cft_below(&r, a->n);
        if (a->keys[j] == 0)
            continue;
        a->failed_deletes += cf_delete_hash(a->f, a->keys[j]) != CF_OK;
        uint64_t h = cft_next(&r) | 1u;
        a->keys[j] = cf_add_hash(a->f, h) == CF_OK ? h : 0;
        a->ops++;
    }
    return NULL;
}

static void test_deletes_beside_moves(void)
{
    cft_context("deletes beside moves");
    cf_config c = {.capacity = MOVES_CAPACITY,
                   .fingerprint_bits = 12,
                   .bucket_size = 4,
                   .expansion = 0,
                   .flags = CF_CONCURRENT};
    cf_filter *f = cft_new(c);
    size_t nm = (size_t)(MOVES_CAPACITY * MOVES_FILL);
    uint64_t *mine = malloc(nm * sizeof *mine), own[MOVES_OWN];
    if (!CHECK(f && mine)) {
        cf_free(f);
        free(mine);
        return;
    }
    cft_rng r = cft_rng_make(cft_subseed(95));
    for (size_t j = 0; j < nm; j++) {
        mine[j] = cft_next(&r) | 1u;
        if (cf_add_hash(f, mine[j]) != CF_OK)
            mine[j] = 0;
    }
    for (size_t j = 0; j < MOVES_OWN; j++) {
        own[j] = cft_next(&r) | 1u;
        if (cf_add_hash(f, own[j]) != CF_OK)
            own[j] = 0;
    }
    moves a = {.f = f, .keys = mine, .n = nm, .seed = cft_subseed(96)};
    pthread_t t;
    if (!CHECK(pthread_create(&t, NULL, moves_mover, &a) == 0)) {
        cf_free(f);
        free(mine);
        return;
    }
    uint64_t rounds = cft_scaled(MOVES_ROUNDS), deletes = 0, failed = 0;
    for (uint64_t k = 0; k < rounds; k++)
        for (size_t j = 0; j < MOVES_OWN; j++) {
            if (own[j] == 0)
                continue;
            failed += cf_delete_hash(f, own[j]) != CF_OK;
            deletes++;
            if (cf_add_hash(f, own[j]) != CF_OK)
                own[j] = 0;
        }
    atomic_store(&a.stop, true);
    pthread_join(t, NULL);
    cf_stats st = cft_stats(f);
    printf("  deletes beside moves: %llu deletes beside %llu of the mover's writes, load %.3f, "
           "%u stashed\n",
           (unsigned long long)deletes, (unsigned long long)a.ops, st.load_factor,
           (unsigned)st.stashed);
    CHECK_EQ_U(failed, 0);
    CHECK_EQ_U(a.failed_deletes, 0);
    uint64_t held = 0;
    for (size_t j = 0; j < nm; j++)
        if (mine[j]) {
            CHECK(cf_contains_hash(f, mine[j]));
            held++;
        }
    for (size_t j = 0; j < MOVES_OWN; j++)
        if (own[j]) {
            CHECK(cf_contains_hash(f, own[j]));
            held++;
        }
    CHECK_EQ_U(st.items, held);
    if (cft_full_scale())
        CHECK(deletes > MOVES_OWN * (uint64_t)MOVES_ROUNDS / 2); /* most keys kept going */
    free(mine);
    cf_free(f);
}

/* The path a planning search found, from its free end up to its root, equal in a and b. */
static bool same_path(const cf__search *a, const cf__search *b)
{
    if (a->end != b->end || a->free != b->free)
        return false;
    for (uint32_t x = a->end, y = b->end;; x = a->queue[x].parent, y = b->queue[y].parent) {
        if (a->queue[x].bucket != b->queue[y].bucket || a->queue[x].slot != b->queue[y].slot ||
            (a->queue[x].parent == CF__ROOT) != (b->queue[y].parent == CF__ROOT))
            return false;
        if (a->queue[x].parent == CF__ROOT)
            return true;
    }
}

static void test_plan_steps(void)
{
    cft_context("planning steps");
    cf_config c = {.capacity = 40000, .seed = 11, .flags = CF_CONCURRENT};
    cf_filter *f = cft_new(c);
    uint8_t key[CFT_KEY_MAX];
    /* filled until an add finds no room (its stash full too): some pairs then have no path */
    cf_status st = CF_OK;
    for (uint64_t id = 0; f && st == CF_OK && id < 2 * c.capacity; id++) {
        size_t len = cft_key(key, 21, id);
        st = cf_add(f, key, len);
    }
    CHECK_ST(st, CF_FULL);
    static cf__node q_own[CF__PLAN_NODES], q_stack[CF__PLAN_NODES];
    static cf__mark m_own[2 * CF__PLAN_NODES], m_stack[2 * CF__PLAN_NODES];
    cf__search own = {q_own, m_own, 0,   64u - CF__CC_PLAN_MARK_BITS, 0, 0,
                      0,     0,     NULL}; /* as a plan's */
    uint64_t moved = 0, deep = 0, deepest = 0, other = 0, differ = 0;
    cft_rng r = cft_rng_make(cft_subseed(7));
    for (uint64_t probe = 0; f && probe < cft_scaled(20000); probe++) {
        cf__table *t = &f->tables[0];
        cf__key k = cf__key_bits(f->fp_bits, cft_next(&r));
        uint64_t i1, i2;
        cf__buckets(t, &k, &i1, &i2);
        uint32_t fp = cf__fp_in(&k, t);
        cf__search stack = {q_stack, m_stack, 0, 0, 0, 0, 0, 0, NULL};
        cf__found a = cf__plan(f, t, i1, i2, fp, &own, true);
        cf__found b = cf__plan(f, t, i1, i2, fp, &stack, false);
        bool same = a == b && (a != CF__MOVED || same_path(&own, &stack));
        differ += !same;
        if (!same && differ <= 3)
            CHECK_MSG(same, "probe %llu: %d in kept memory (%u nodes), %d on the stack",
                      (unsigned long long)probe, (int)a, own.n, (int)b);
        moved += a == CF__MOVED;
        other += a != CF__MOVED;
        deep += own.n > 64u; /* (the stack's third step or later) */
        deepest += own.n > 256u;
    }
    CHECK_EQ_U(differ, 0);
    /* the steps were all taken: paths found past 64 and 256 nodes, and searches that ran
     * out of budget */
    CHECK(moved > 0 && deep > 0 && deepest > 0 && other > 0);
    printf("  planning steps: %llu paths, %llu past 64 nodes, %llu past 256, %llu none\n",
           (unsigned long long)moved, (unsigned long long)deep, (unsigned long long)deepest,
           (unsigned long long)other);
    cf_free(f);
}

/* ------------------------------------------------------------------------------------ */
/* Segment owners                                                                       */
/* ------------------------------------------------------------------------------------ */

#define OWNERS          3u   /* more writers than cores: preempted holding stripes */
#define OWNERS_SEGMENTS 4u   /* one or two each */
#define OWNERS_LOAD     0.93 /* of the slots: most adds near the end evict */
#define OWNERS_DELETE   3u   /* each writer then deletes every third of its keys */

typedef struct owner {
    cf_filter *f;
    const uint64_t *keys; /* every key, in order; this writer's are those of its segments */
    const uint64_t *seg;  /* each key's segment */
    size_t n;
    unsigned me, of; /* its segments: those s with s % of == me */
    uint64_t refused;
} owner;

static void *owner_run(void *p)
{
    owner *o = p;
    for (size_t i = 0; i < o->n; i++)
        if (o->seg[i] % o->of == o->me)
            o->refused += cf_add_hash(o->f, o->keys[i]) != CF_OK;
    for (size_t i = 0; i < o->n; i += OWNERS_DELETE)
        if (o->seg[i] % o->of == o->me)
            o->refused += cf_delete_hash(o->f, o->keys[i]) != CF_OK;
    return NULL;
}

static void test_segment_owners(void)
{
    cft_context("segment owners");
    cf_config c = {.capacity = 1000,
                   .fingerprint_bits = 12,
                   .bucket_size = 4,
                   .seed = 31,
                   .flags = CF_CONCURRENT | CF_SEGMENTED};
    /* exactly OWNERS_SEGMENTS segments: their slots, at 95 % (the sizing) */
    c.capacity = (uint64_t)((double)(OWNERS_SEGMENTS << CF_SEGMENT_BITS) * 4 * 0.95);
    cf_filter *f = cft_new(c), *one = cft_new(c);
    cf_mapping m;
    if (!f || !one || !CHECK_ST(cf_get_mapping(f, &m), CF_OK) ||
        !CHECK_EQ_U(m.buckets >> m.segment_bits, OWNERS_SEGMENTS)) {
        cf_free(f);
        cf_free(one);
        return;
    }
    size_t n = (size_t)((double)m.buckets * 4 * OWNERS_LOAD);
    uint64_t *keys = malloc(n * sizeof *keys), *seg = malloc(n * sizeof *seg);
    cft_rng r = cft_rng_make(cft_subseed(1200));
    for (size_t i = 0; keys && seg && i < n; i++) {
        cf_place pl;
        keys[i] = cft_next(&r);
        CHECK_ST(cf_place_in(&m, keys[i], &pl), CF_OK);
        seg[i] = pl.bucket[0] >> m.segment_bits;
    }
    owner o[OWNERS];
    pthread_t t[OWNERS];
    bool started[OWNERS] = {false};
    for (unsigned i = 0; keys && seg && i < OWNERS; i++) {
        o[i] = (owner){f, keys, seg, n, i, OWNERS, 0};
        started[i] = CHECK(pthread_create(&t[i], NULL, owner_run, &o[i]) == 0);
    }
    for (unsigned i = 0; i < OWNERS; i++)
        if (started[i]) {
            pthread_join(t[i], NULL);
            CHECK_EQ_U(o[i].refused, 0);
        }
    /* one thread, the same operations, writer after writer */
    for (unsigned i = 0; keys && seg && i < OWNERS; i++) {
        o[i] = (owner){one, keys, seg, n, i, OWNERS, 0};
        owner_run(&o[i]);
        CHECK_EQ_U(o[i].refused, 0);
    }
    cf_stats st = cft_stats(f);
    printf("  segment owners: %u writers, %zu keys, load %.3f before the deletes, %llu stashed\n",
           OWNERS, n, (double)n / (double)(m.buckets * 4), (unsigned long long)st.stashed);
    CHECK_MSG(cft_same_bytes(f, one), "writers of their own segments left other bytes than one "
                                      "thread doing the same");
    free(keys);
    free(seg);
    cf_free(f);
    cf_free(one);
}

int main(void)
{
    cft_init("test_concurrent");
    test_differential();
    test_stress();
    test_growth_beside_readers();
    test_writers_together();
    test_fills_beside_lock();
    test_deletes_beside_moves();
    test_segment_owners();
    test_plan_steps();
    return cft_finish();
}
