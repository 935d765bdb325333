/*
 * test_window.c - windowed filters (cf_config.generations): the window's promise in time
 * against a model of exact timestamps, across advances, deletes, failed adds, saves,
 * loads and mappings; bad configs and damaged files; allocation failures; lookups beside
 * a writer that advances.
 */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#define WIN_G     6u    /* generations in most tests */
#define WIN_W     1000u /* the window, in the model's time unit */
#define WIN_KEYS  4000u /* distinct keys of the differential test */
#define MODEL_MAX 64u   /* copies of one key the model keeps (adds are far fewer) */

static cf_config win_config(uint64_t capacity, unsigned fp_bits, unsigned generations,
                            uint64_t window)
{
    cf_config c = {.capacity = capacity,
                   .fingerprint_bits = fp_bits,
                   .seed = cft_subseed(0x3170),
                   .flags = CF_FIXED_SEED,
                   .generations = generations,
                   .window = window};
    return c;
}

static void test_config(void)
{
    cft_context("config");
    cf_filter *f = NULL;
    cf_config c = win_config(100, 12, 1, 0);
    CHECK_ST(cf_new(&c, &f), CF_EINVAL); /* one generation */
    c.generations = CF_MAX_GENERATIONS + 1u;
    CHECK_ST(cf_new(&c, &f), CF_EINVAL);
    c = win_config(100, 12, 0, 60);
    CHECK_ST(cf_new(&c, &f), CF_EINVAL); /* a window without generations */
    c = win_config(100, 12, 4, 60);
    c.expansion = 2;
    CHECK_ST(cf_new(&c, &f), CF_EINVAL); /* generations do not grow */
    c = win_config(100, 0, 4, 60);
    c.flags |= CF_REDISBLOOM;
    c.seed = 0;
    CHECK_ST(cf_new(&c, &f), CF_EINVAL);
    CHECK(f == NULL);

    /* target_fpr sizes for every generation at full load */
    c = win_config(1000, 0, 8, 0);
    c.target_fpr = 0.01;
    cf_config r;
    CHECK_ST(cf_config_resolve(&c, &r), CF_OK);
    CHECK(cf_expected_fpr(r.fingerprint_bits, 4, 8.0) <= 0.01);
    CHECK(cf_expected_fpr(r.fingerprint_bits - 1u, 4, 8.0) > 0.01);
    CHECK_EQ_U(r.generations, 8);

    /* what cf_bytes_needed says is what cf_new takes */
    cft_alloc t;
    cft_alloc_init(&t);
    c = win_config(5000, 12, 5, 100);
    c.allocator = &t.a;
    size_t need = 0;
    CHECK_ST(cf_bytes_needed(&c, &need), CF_OK);
    if (CHECK_ST(cf_new(&c, &f), CF_OK)) {
        CHECK_EQ_U(t.live_bytes, need);
        cf_config back;
        cf_get_config(f, &back);
        CHECK_EQ_U(back.generations, 5);
        CHECK_EQ_U(back.window, 100);
        CHECK_EQ_U(back.seed, c.seed);
        back.allocator = &t.a;
        cf_filter *g = NULL;
        if (CHECK_ST(cf_new(&back, &g), CF_OK)) { /* the same filter again */
            CHECK(cft_same_bytes(f, g));
            cf_free(g);
        }
        cf_free(f);
    }
    CHECK_ALLOC_CLEAN(&t);
    c.flags |= CF_CONCURRENT; /* the same, with generations and a head of their own kind */
    CHECK_ST(cf_bytes_needed(&c, &need), CF_OK);
    if (CHECK_ST(cf_new(&c, &f), CF_OK)) {
        CHECK_EQ_U(t.live_bytes, need);
        cf_free(f);
    }
    CHECK_ALLOC_CLEAN(&t);

    /* calls meant for windows refuse other filters */
    f = cft_new((cf_config){.capacity = 100});
    CHECK_ST(cf_advance(f), CF_EINVAL);
    CHECK_ST(cf_advance_to(f, 3), CF_EINVAL);
    CHECK_EQ_U(cf_generation_at(f, 12345), 0);
    cf_stats st;
    CHECK_ST(cf_get_generation_stats(f, 0, &st), CF_EINVAL);
    CHECK_EQ_U(cft_stats(f).generations, 0);
    cf_free(f);
    CHECK_ST(cf_advance(NULL), CF_EINVAL);
}

/* The generation arithmetic, by hand: G - 1 advances keep a key, the G-th drops it. */
static void test_generations(void)
{
    cft_context("generations");
    cf_config c = win_config(1000, 32, 4, 300);
    cf_filter *f = cft_new(c);
    if (!f)
        return;
    CHECK_EQ_U(cf_generation_at(f, 0), 0);
    CHECK_EQ_U(cf_generation_at(f, 99), 0); /* a generation spans 300 / (4 - 1) = 100 */
    CHECK_EQ_U(cf_generation_at(f, 100), 1);
    /* (2^64 - 1) * 3 / 300 = (2^64 - 1) / 100, with no overflow on the way */
    CHECK_EQ_U(cf_generation_at(f, UINT64_MAX), UINT64_MAX / 100u);
    cf_filter *fast = cft_new(win_config(10, 12, 4, 1)); /* now * 3 / 1 passes 2^64 */
    if (fast) {
        CHECK_EQ_U(cf_generation_at(fast, UINT64_MAX / 2u), UINT64_MAX);
        CHECK_EQ_U(cf_generation_at(fast, UINT64_MAX / 3u), UINT64_MAX / 3u * 3u);
        cf_free(fast);
    }
    CHECK_ST(cf_add(f, "a", 1), CF_OK);
    for (unsigned i = 0; i < 3; i++) {
        CHECK_ST(cf_advance(f), CF_OK);
        CHECK(cf_contains(f, "a", 1));
    }
    CHECK_ST(cf_add(f, "b", 1), CF_OK);
    cf_stats st = cft_stats(f);
    CHECK_EQ_U(st.generation, 3);
    CHECK_EQ_U(st.generations, 4);
    CHECK_EQ_U(st.generations_used, 2);
    CHECK_EQ_U(st.items, 2);
    CHECK_EQ_U(st.window, 300);
    cf_stats g;
    CHECK_ST(cf_get_generation_stats(f, 3, &g), CF_OK); /* the oldest holds "a" */
    CHECK_EQ_U(g.items, 1);
    CHECK_ST(cf_get_generation_stats(f, 4, &g), CF_EINVAL);
    CHECK_ST(cf_advance(f), CF_OK);
    CHECK(!cf_contains(f, "a", 1));
    CHECK(cf_contains(f, "b", 1));
    CHECK_ST(cf_advance_to(f, 2), CF_EINVAL); /* backwards: nothing changes */
    CHECK_EQ_U(cft_stats(f).generation, 4);
    CHECK_ST(cf_advance_to(f, 4), CF_OK); /* current: nothing to do */
    CHECK(cf_contains(f, "b", 1));
    /* a jump past the window drops everything, and leaves the ring as single steps would */
    cf_filter *h = cft_new(c);
    if (h) {
        CHECK_ST(cf_advance_to(f, 4 + 4 * 1000 + 3), CF_OK);
        CHECK_EQ_U(cft_stats(f).items, 0);
        for (unsigned i = 0; i < 4 + 4 * 1000 + 3; i++)
            cf_advance(h);
        cf_add(f, "c", 1);
        cf_add(h, "c", 1);
        CHECK(cft_same_bytes(f, h));
        cf_free(h);
    }
    /* the end of the numbers */
    CHECK_ST(cf_advance_to(f, UINT64_MAX), CF_OK);
    CHECK_ST(cf_advance(f), CF_EINVAL);
    cf_free(f);
}

/* Lookups as at a later generation answer what the filter advanced there answers, for
 * every generation from the newest to past the window, single and batched; a plain filter
 * answers as its plain calls. */
static void test_lookups_at(void)
{
    cft_context("lookups as at a generation");
    cf_config c = win_config(400, 32, 5, 0);
    cf_filter *f = cft_new(c);
    if (!f)
        return;
    enum { PER = 60, GENS = 5 };
    uint8_t key[GENS * PER][CFT_KEY_MAX];
    const void *keys[GENS * PER];
    size_t lens[GENS * PER];
    for (unsigned g = 0; g < GENS; g++) {
        for (unsigned i = 0; i < PER; i++) {
            unsigned k = g * PER + i;
            lens[k] = cft_key(key[k], 13, k);
            keys[k] = key[k];
            cf_add(f, key[k], lens[k]);
        }
        if (g + 1 < GENS)
            cf_advance(f);
    }
    uint64_t newest = cft_stats(f).generation;
    for (uint64_t at = 0; at <= newest + GENS + 1; at++) {
        cft_context("lookups as at generation %llu (newest %llu)", (unsigned long long)at,
                    (unsigned long long)newest);
        cf_filter *g = NULL;
        size_t n = cf_serialized_size(f);
        uint8_t *buf = malloc(n);
        if (!CHECK(buf) || !CHECK_ST(cf_serialize(f, buf, n, NULL), CF_OK) ||
            !CHECK_ST(cf_deserialize(buf, n, NULL, &g), CF_OK)) {
            free(buf);
            break;
        }
        free(buf);
        if (at > newest)
            CHECK_ST(cf_advance_to(g, at), CF_OK);
        bool many[GENS * PER];
        cf_contains_keys_at(f, keys, lens, GENS * PER, at, many);
        for (unsigned k = 0; k < GENS * PER; k++) {
            bool want = cf_contains(g, keys[k], lens[k]);
            CHECK_EQ_U(cf_contains_at(f, keys[k], lens[k], at), want);
            CHECK_EQ_U(many[k], want);
            CHECK_EQ_U(cf_count_at(f, keys[k], lens[k], at), cf_count(g, keys[k], lens[k]));
        }
        cf_free(g);
    }
    cft_context("lookups as at a generation");
    CHECK(cf_contains_at(f, keys[GENS * PER - 1], lens[GENS * PER - 1], newest + GENS - 1));
    CHECK(!cf_contains_at(f, keys[GENS * PER - 1], lens[GENS * PER - 1], newest + GENS));
    cf_free(f);
    cf_filter *p = cft_new((cf_config){.capacity = 100, .seed = 2, .flags = CF_FIXED_SEED});
    if (p) {
        cf_add(p, "k", 1);
        CHECK(cf_contains_at(p, "k", 1, 1000) && cf_count_at(p, "k", 1, 1000) == 1);
        CHECK(!cf_contains_at(p, NULL, 3, 0) && !cf_contains_at(NULL, "k", 1, 0));
        cf_free(p);
    }
}

/* The model: each key's copies, by the time and generation of their add. */
typedef struct win_model {
    uint32_t n;
    uint64_t time[MODEL_MAX], gen[MODEL_MAX]; /* oldest first */
} win_model;

static bool win_save_load(cf_filter **f, const char *path, cft_rng *r)
{
    cf_filter *g = NULL;
    size_t n = cf_serialized_size(*f);
    uint8_t *buf = malloc(n);
    if (!CHECK(buf) || !CHECK_ST(cf_serialize(*f, buf, n, NULL), CF_OK)) {
        free(buf);
        return false;
    }
    CHECK_ST(cf_validate(buf, n, NULL), CF_OK);
    bool ok;
    /* through a file one time in ten (each save syncs it to disk) */
    switch (cft_below(r, 10) ? 0 : 1 + cft_below(r, 2)) {
    case 0:
        ok = CHECK_ST(cf_deserialize(buf, n, NULL, &g), CF_OK);
        break;
    case 1:
        ok = CHECK_ST(cf_save(*f, path), CF_OK) && CHECK_ST(cf_load(path, NULL, &g), CF_OK);
        break;
    default: { /* a mapped copy answers alike; the writable one goes on from a load */
        cf_filter *m = NULL;
        ok = CHECK_ST(cf_save(*f, path), CF_OK) &&
             CHECK_ST(cf_open_mapped(path, CF_MAP_VERIFY, NULL, &m), CF_OK);
        if (ok) {
            CHECK(cft_same_bytes(*f, m));
            CHECK_ST(cf_add(m, "x", 1), CF_EREADONLY);
            CHECK_ST(cf_advance(m), CF_EREADONLY);
            CHECK_EQ_U(cft_stats(m).items, cft_stats(*f).items);
            cf_free(m);
        }
        ok = ok && CHECK_ST(cf_deserialize(buf, n, NULL, &g), CF_OK);
    }
    }
    free(buf);
    if (!ok)
        return false;
    CHECK(cft_same_bytes(*f, g));
    cf_free(*f);
    *f = g;
    return true;
}

/* Random adds, deletes and lookups over time, with the clock driving the advances: every
 * key whose last add was less than W ago is found; a key all of whose copies are older
 * than W * G / (G - 1) is not (32-bit fingerprints: a false positive would take ~2^-26);
 * counts equal the model's copies of the live generations. */
static void test_differential(unsigned semi)
{
    cft_context("differential semi=%u", semi);
    cf_config c = win_config(50, semi ? 13 : 32, WIN_G, WIN_W);
    if (semi)
        c.flags |= CF_SEMI_SORT;
    cf_filter *f = cft_new(c);
    win_model *m = calloc(WIN_KEYS, sizeof *m);
    if (!f || !CHECK(m)) {
        cf_free(f);
        free(m);
        return;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/cf-test-window-%ld.cf", (long)getpid());
    cft_rng r = cft_rng_make(cft_subseed(0x3171 + semi));
    uint64_t now = 5u * WIN_W, ops = cft_scaled(60000), full = 0;
    const uint64_t forget = (uint64_t)WIN_W * WIN_G / (WIN_G - 1u);
    for (uint64_t op = 0; op < ops && !cft.failed; op++) {
        now += cft_below(&r, 4); /* ~60 adds a generation: some find it full (50) */
        uint64_t due = cf_generation_at(f, now);
        CHECK_ST(cf_advance_to(f, due), CF_OK);
        uint32_t id = (uint32_t)cft_below(&r, WIN_KEYS);
        win_model *k = &m[id];
        /* the model drops the copies of generations the filter dropped */
        uint32_t live = 0;
        while (live < k->n && k->gen[live] + WIN_G <= due)
            live++;
        memmove(k->time, k->time + live, (k->n - live) * sizeof k->time[0]);
        memmove(k->gen, k->gen + live, (k->n - live) * sizeof k->gen[0]);
        k->n -= live;
        uint8_t key[CFT_KEY_MAX];
        size_t len = cft_key(key, 7, id);
        uint64_t roll = cft_below(&r, 100);
        if (roll < 45 && k->n < MODEL_MAX) {
            cf_stats before = cft_stats(f);
            cf_status st = cf_add(f, key, len);
            if (st == CF_OK) {
                k->time[k->n] = now;
                k->gen[k->n++] = due;
            } else {
                CHECK_ST(st, CF_FULL);
                cf_stats after = cft_stats(f);
                CHECK_STATS_EQ(before, after);
                full++;
            }
        } else if (roll < 60 && k->n) {
            CHECK_ST(cf_delete(f, key, len), CF_OK);
            memmove(k->time, k->time + 1, (k->n - 1) * sizeof k->time[0]); /* the oldest */
            memmove(k->gen, k->gen + 1, (k->n - 1) * sizeof k->gen[0]);
            k->n--;
        } else if (roll < 61) {
            win_save_load(&f, path, &r);
        } else {
            bool found = cf_contains(f, key, len);
            if (k->n && now < k->time[k->n - 1] + WIN_W)
                CHECK_MSG(found, "key %u added at %llu missed at %llu", id,
                          (unsigned long long)k->time[k->n - 1], (unsigned long long)now);
            if (!semi) {
                CHECK_EQ_U(cf_count(f, key, len), k->n);
                if (k->n == 0)
                    CHECK(!found);
            }
            if (k->n && now >= k->time[k->n - 1] + forget)
                CHECK_MSG(0, "a copy outlived the bound: added %llu, now %llu",
                          (unsigned long long)k->time[k->n - 1], (unsigned long long)now);
        }
    }
    /* every generation full at some point: adds refused and nothing changed */
    CHECK_MSG(full > 0 || cft_scaled(1) > 1, "no add was refused (make the window fuller)");
    unlink(path);
    cf_free(f);
    free(m);
}

/* Whatever a window holds saves and loads again byte for byte, by every path and every
 * loader, for every kind of generation (plain, semi-sorted, concurrent, both) and every
 * width with code of its own (and some without): a window half full, with deletes, after
 * advances, with a generation full. A concurrent window's generations count their items
 * in their stripes, which its images must carry (once written with the header's counts
 * stale: "table contents disagree with the header"). */
static void test_every_kind(void)
{
    static const struct {
        unsigned f, b, semi, seg; /* seg: CF_SEGMENTED generations */
    } shapes[] = {{8, 4, 0, 0},  {12, 4, 0, 0}, {16, 4, 0, 0}, {8, 2, 0, 0},  {12, 2, 0, 0},
                  {16, 2, 0, 0}, {8, 8, 0, 0},  {4, 4, 0, 0},  {13, 4, 0, 0}, {32, 4, 0, 0},
                  {9, 4, 1, 0},  {13, 4, 1, 0}, {12, 4, 1, 0}, {5, 4, 1, 0},  {17, 3, 0, 0},
                  {24, 1, 0, 0}, {12, 4, 0, 1}, {13, 4, 1, 1}, {7, 3, 0, 1}};
    char path[64];
    snprintf(path, sizeof path, "/tmp/cf-test-window-kinds-%ld.cf", (long)getpid());
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (unsigned cc = 0; cc < 2; cc++) {
            cft_context("every kind: f %u b %u semi %u segmented %u concurrent %u", shapes[i].f,
                        shapes[i].b, shapes[i].semi, shapes[i].seg, cc);
            cf_config c = win_config(200, shapes[i].f, 3, 0);
            c.bucket_size = shapes[i].b;
            c.flags |= (shapes[i].semi ? CF_SEMI_SORT : 0u) | (cc ? CF_CONCURRENT : 0u) |
                       (shapes[i].seg ? CF_SEGMENTED : 0u);
            cf_filter *f = cft_new(c);
            if (!f)
                continue;
            uint64_t id = 0;
            for (unsigned step = 0; step < 5 && !cft.failed; step++) {
                /* a generation filled until refused, then some of its keys deleted */
                uint8_t key[CFT_KEY_MAX];
                uint64_t first = id;
                while (cf_add(f, key, cft_key(key, 41, id)) == CF_OK && id - first < 400)
                    id++;
                for (uint64_t k = first; k < id; k += 3)
                    CHECK_ST(cf_delete(f, key, cft_key(key, 41, k)), CF_OK);
                if (!cft_round_trips(f, path))
                    break;
                CHECK_ST(cf_advance(f), CF_OK);
            }
            cf_free(f);
        }
    unlink(path);
}

/* The same operations and advances give the same bytes. */
static void test_determinism(void)
{
    cft_context("determinism");
    cf_config c = win_config(300, 12, 3, 0);
    cf_filter *a = cft_new(c), *b = cft_new(c);
    if (!a || !b) {
        cf_free(a);
        cf_free(b);
        return;
    }
    uint64_t hashes[64];
    for (unsigned round = 0; round < 20; round++) {
        for (unsigned i = 0; i < 64; i++)
            hashes[i] = cft_mix64(round * 64u + i);
        cf_add_many(a, hashes, 64, 0, NULL);
        for (unsigned i = 0; i < 64; i++)
            cf_add_hash(b, hashes[i]);
        bool out_a[64], out_b[64];
        cf_contains_many(a, hashes, 64, out_a);
        for (unsigned i = 0; i < 64; i++) {
            out_b[i] = cf_contains_hash(b, hashes[i]);
            CHECK(out_a[i] && out_b[i]);
        }
        CHECK_ST(cf_delete_hash(a, hashes[3]), CF_OK);
        CHECK_ST(cf_delete_hash(b, hashes[3]), CF_OK);
        if (round % 3 == 0) {
            cf_advance(a);
            cf_advance_to(b, cft_stats(b).generation + 1u);
        }
        CHECK(cft_same_bytes(a, b));
    }
    /* unique adds see every generation */
    cf_advance(a);
    uint64_t twice[2] = {cft_mix64(UINT64_C(1) << 40), cft_mix64((UINT64_C(1) << 40) + 1u)};
    CHECK_ST(cf_add_hash(a, twice[0]), CF_OK);
    cf_advance(a);
    cf_status st[2];
    CHECK_EQ_U(cf_add_many(a, twice, 2, CF_ADD_UNIQUE, st), 1);
    CHECK_ST(st[0], CF_EXISTS);
    CHECK_ST(st[1], CF_OK);
    /* the key only an older generation held is refreshed: a copy in the newest, once */
    CHECK_EQ_U(cf_count_hash(a, twice[0]), 2);
    CHECK_EQ_U(cf_add_many(a, twice, 2, CF_ADD_UNIQUE, st), 0);
    CHECK_EQ_U(cf_count_hash(a, twice[0]), 2);
    CHECK_EQ_U(cf_count_hash(a, twice[1]), 1);
    for (unsigned i = 0; i < 2; i++) /* so it outlives the generation of its first add */
        cf_advance(a);
    CHECK(cf_contains_hash(a, twice[0]));
    const void *keys[2] = {"k", NULL};
    size_t lens[2] = {1, 3};
    bool out[2];
    cf_add(a, "k", 1);
    cf_contains_keys(a, keys, lens, 2, out);
    CHECK(out[0] && !out[1]);
    CHECK_ST(cf_add_unique(a, "k", 1), CF_EXISTS);
    cf_clear(a);
    CHECK_EQ_U(cft_stats(a).items, 0);
    cf_free(a);
    cf_free(b);
}

/* Damaged files are refused: every byte of a windowed file is checked (sums, or zero
 * padding), so any single flipped byte and any truncation fails. */
static void test_corrupt(void)
{
    cft_context("corrupt");
    cf_filter *f = cft_new(win_config(200, 12, 3, 50));
    if (!f)
        return;
    for (unsigned i = 0; i < 150; i++) {
        uint8_t key[CFT_KEY_MAX];
        cf_add(f, key, cft_key(key, 9, i));
        if (i % 60 == 59)
            cf_advance(f);
    }
    size_t n = cf_serialized_size(f);
    uint8_t *buf = malloc(n);
    if (!CHECK(buf) || !CHECK_ST(cf_serialize(f, buf, n, NULL), CF_OK)) {
        free(buf);
        cf_free(f);
        return;
    }
    cft_rng r = cft_rng_make(cft_subseed(0x3172));
    for (unsigned trial = 0; trial < 2000; trial++) {
        size_t at = trial < 512 ? trial : (size_t)cft_below(&r, n);
        buf[at] ^= (uint8_t)(1u + cft_below(&r, 255));
        cf_filter *g = NULL;
        const char *why = NULL;
        cf_status st = cf_deserialize(buf, n, NULL, &g);
        CHECK_MSG(st == CF_ECORRUPT || st == CF_EVERSION, "byte %zu flipped: %s", at,
                  cf_strerror(st));
        CHECK(cf_validate(buf, n, &why) != CF_OK && why != NULL);
        cf_free(g);
        CHECK_ST(cf_serialize(f, buf, n, NULL), CF_OK);
    }
    for (size_t cut = 0; cut < n; cut += 1 + cut / 3) {
        cf_filter *g = NULL;
        CHECK(cf_deserialize(buf, cut, NULL, &g) != CF_OK && g == NULL);
    }
    /* An image of another window (another seed, the same shape and length) put in place of
     * the second: every checksum holds, and the mismatch is still found, also when the file
     * is mapped without CF_MAP_VERIFY. */
    cf_config oc = win_config(200, 12, 3, 50);
    oc.seed ^= 1u;
    cf_filter *o = cft_new(oc);
    size_t on = o ? cf_serialized_size(o) : 0;
    uint8_t *ob = on == n ? malloc(on) : NULL;
    if (CHECK(ob) && CHECK_ST(cf_serialize(o, ob, on, NULL), CF_OK)) {
        uint64_t at = 0, len = 0;
        for (unsigned i = 0; i < 8; i++) {
            at |= (uint64_t)buf[64 + 16 + i] << (8 * i);
            len |= (uint64_t)buf[64 + 16 + 8 + i] << (8 * i);
        }
        memcpy(buf + at, ob + at, (size_t)len);
        const char *why = NULL;
        CHECK_ST(cf_validate(buf, n, &why), CF_ECORRUPT);
        CHECK_MSG(why && strstr(why, "different settings"), "reason: %s", why ? why : "none");
        char path[64];
        snprintf(path, sizeof path, "/tmp/cf-test-window-mix-%ld.cf", (long)getpid());
        FILE *out = fopen(path, "wb");
        if (CHECK(out)) {
            CHECK_EQ_U(fwrite(buf, 1, n, out), n);
            fclose(out);
            cf_filter *m = NULL;
            CHECK_ST(cf_open_mapped(path, 0, NULL, &m), CF_ECORRUPT);
            CHECK(m == NULL);
            unlink(path);
        }
        CHECK_ST(cf_serialize(f, buf, n, NULL), CF_OK);
        /* A plain filter of hash id 3 (CF_FAST_HASH), of the generation's size and seed, in
         * its place: generations hash with XXH3. */
        cf_config pc = win_config(200, 12, 0, 0);
        pc.flags |= CF_FAST_HASH;
        cf_filter *p = cft_new(pc);
        if (p && CHECK_EQ_U(cf_serialized_size(p), len) &&
            CHECK_ST(cf_serialize(p, buf + at, (size_t)len, NULL), CF_OK)) {
            CHECK_ST(cf_validate(buf, n, &why), CF_ECORRUPT);
            CHECK_MSG(why && strstr(why, "another hash"), "reason: %s", why ? why : "none");
        }
        cf_free(p);
        CHECK_ST(cf_serialize(f, buf, n, NULL), CF_OK);
    }
    free(ob);
    cf_free(o);
    /* a plain filter's image alone is a plain filter, and is not taken for a window */
    cf_filter *g = NULL;
    CHECK_ST(cf_deserialize(buf, n, NULL, &g), CF_OK);
    cf_free(g);
    free(buf);
    cf_free(f);
}

/* A dump in chunks loads into the same filter; so does a dump of a half-loaded one, which
 * then takes the rest; a chunk out of place, of another window, or a generation of other
 * settings is refused and changes nothing. */
typedef struct win_chunk {
    uint64_t cursor;
    size_t len;
    uint8_t *p;
} win_chunk;

static size_t win_dump(const cf_filter *f, win_chunk *out, size_t max)
{
    size_t n = 0, cap = cf_dump_chunk_max(f);
    uint64_t cursor = 0;
    do {
        uint8_t *p = malloc(cap);
        size_t len = 0;
        if (!CHECK(p) || !CHECK_ST(cf_dump_chunk(f, &cursor, p, cap, &len), CF_OK)) {
            free(p);
            break;
        }
        if (len == 0 || !CHECK(n < max)) {
            free(p);
            break;
        }
        out[n++] = (win_chunk){cursor, len, p};
    } while (cursor != 0);
    return n;
}

static void win_chunks_free(win_chunk *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(c[i].p);
}

static void test_chunks(void)
{
    cft_context("chunks");
    cf_filter *f = cft_new(win_config(300, 12, 4, 60));
    cf_filter *other = cft_new(win_config(300, 16, 4, 60));
    if (!f || !other) {
        cf_free(f);
        cf_free(other);
        return;
    }
    for (unsigned i = 0; i < 600; i++) {
        uint8_t key[CFT_KEY_MAX];
        cf_add(f, key, cft_key(key, 11, i));
        cf_add(other, key, cft_key(key, 11, i));
        if (i % 200 == 199) {
            cf_advance(f);
            cf_advance(other);
        }
    }
    win_chunk c[64], o[64];
    size_t n = win_dump(f, c, 64), no = win_dump(other, o, 64);
    CHECK(n >= 1 + 4 * 2); /* the window's header, then each generation's header and table */
    size_t bytes = 0;
    CHECK_ST(cf_chunk_bytes_needed(c[0].p, c[0].len, &bytes), CF_OK);
    CHECK(bytes >= cft_stats(f).bytes);
    cf_filter *g = NULL;
    for (size_t i = 0; i < n; i++) {
        cft_context("chunks: chunk %zu of %zu", i, n);
        if (i > 0) { /* wrong ones first: refused, and the right one still goes in */
            cf_filter *before = g;
            CHECK(cf_load_chunk(&g, c[i].cursor + 1, c[i].p, c[i].len, NULL) != CF_OK);
            if (i + 1 < n)
                CHECK(cf_load_chunk(&g, c[i + 1].cursor, c[i + 1].p, c[i + 1].len, NULL) != CF_OK);
            if (i < no && o[i].cursor == c[i].cursor) /* the other window's chunk */
                CHECK(cf_load_chunk(&g, o[i].cursor, o[i].p, o[i].len, NULL) != CF_OK);
            CHECK(g == before);
            CHECK(cf_is_loading(g));
            CHECK_ST(cf_add(g, "k", 1), CF_EREADONLY);
            CHECK_EQ_U(cf_serialized_size(g), 0);
        }
        if (!CHECK_ST(cf_load_chunk(&g, c[i].cursor, c[i].p, c[i].len, NULL), CF_OK))
            break;
        if (i == n / 2) { /* a dump of the half-loaded window, loaded, then the rest */
            win_chunk h[64];
            size_t nh = win_dump(g, h, 64);
            CHECK_EQ_U(nh, i + 1);
            cf_filter *g2 = NULL;
            for (size_t j = 0; j < nh; j++) {
                CHECK_EQ_U(h[j].cursor, c[j].cursor);
                CHECK(h[j].len == c[j].len && memcmp(h[j].p, c[j].p, c[j].len) == 0);
                CHECK_ST(cf_load_chunk(&g2, h[j].cursor, h[j].p, h[j].len, NULL), CF_OK);
            }
            for (size_t j = nh; j < n; j++)
                CHECK_ST(cf_load_chunk(&g2, c[j].cursor, c[j].p, c[j].len, NULL), CF_OK);
            CHECK(!cf_is_loading(g2));
            CHECK(cft_same_bytes(f, g2));
            cf_free(g2);
            win_chunks_free(h, nh);
        }
    }
    cft_context("chunks");
    CHECK(!cf_is_loading(g));
    CHECK(cft_same_bytes(f, g));
    CHECK_ST(cf_advance(g), CF_OK); /* writable once complete */
    /* the other window's generation where this one's belongs: other settings */
    cf_filter *h = NULL;
    CHECK_ST(cf_load_chunk(&h, c[0].cursor, c[0].p, c[0].len, NULL), CF_OK);
    CHECK(cf_load_chunk(&h, o[1].cursor, o[1].p, o[1].len, NULL) != CF_OK ||
          o[1].cursor != c[1].cursor);
    cf_free(h);
    cf_free(g);
    win_chunks_free(c, n);
    win_chunks_free(o, no);
    cf_free(f);
    cf_free(other);
}

/* Every allocation that fails gives CF_ENOMEM and frees what was taken. */
static void test_alloc_fail(void)
{
    cft_context("allocation failures");
    cft_alloc t;
    cft_alloc_init(&t);
    cf_config c = win_config(100, 12, 4, 10);
    c.allocator = &t.a;
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    uint64_t calls = t.calls;
    size_t n = cf_serialized_size(f);
    uint8_t *buf = malloc(n);
    if (CHECK(buf))
        CHECK_ST(cf_serialize(f, buf, n, NULL), CF_OK);
    cf_free(f);
    for (uint64_t nth = 1; nth <= calls && buf; nth++) {
        cft_alloc_arm(&t, nth, false);
        f = NULL;
        CHECK_ST(cf_new(&c, &f), CF_ENOMEM);
        CHECK(f == NULL);
        cft_alloc_arm(&t, nth, false);
        CHECK_ST(cf_deserialize(buf, n, &t.a, &f), CF_ENOMEM);
        cft_alloc_disarm(&t);
        CHECK_ALLOC_CLEAN(&t);
    }
    free(buf);
}

/* Lookups beside a writer that adds and advances: a key added before the lookups began
 * is found as long as fewer than G advances passed since. */
typedef struct win_reader {
    cf_filter *f;
    atomic_uint stop;
    atomic_uint rounds; /* passes over the first keys, done */
    uint64_t misses;
} win_reader;

static void *win_read(void *arg)
{
    win_reader *r = arg;
    while (!atomic_load(&r->stop)) {
        for (uint64_t i = 0; i < 500; i++)
            r->misses += !cf_contains_hash(r->f, cft_mix64(i));
        atomic_fetch_add(&r->rounds, 1u);
    }
    return NULL;
}

/* Until the reader has made `n` more passes. */
static void win_wait(win_reader *r, unsigned n)
{
    unsigned start = atomic_load(&r->rounds);
    while (atomic_load(&r->rounds) - start < n)
        sched_yield();
}

static void test_concurrent(void)
{
    cft_context("concurrent");
    cf_config c = win_config(4000, 12, 4, 0);
    c.flags |= CF_CONCURRENT;
    cf_filter *f = cft_new(c);
    if (!f)
        return;
    for (uint64_t i = 0; i < 500; i++)
        CHECK_ST(cf_add_hash(f, cft_mix64(i)), CF_OK);
    win_reader r;
    r.f = f;
    r.misses = 0;
    atomic_init(&r.stop, 0u);
    atomic_init(&r.rounds, 0u);
    pthread_t th;
    if (!CHECK(pthread_create(&th, NULL, win_read, &r) == 0)) {
        cf_free(f);
        return;
    }
    /* three advances (of four generations): the first keys stay; the writer fills each
     * new generation and clears the one it drops */
    win_wait(&r, 1);
    for (unsigned a = 0; a < 3; a++) {
        for (uint64_t i = 0; i < 3000; i++)
            cf_add_hash(f, cft_mix64(1000000u * (a + 1u) + i));
        CHECK_ST(cf_advance(f), CF_OK);
        for (uint64_t i = 0; i < 3000; i++)
            cf_delete_hash(f, cft_mix64(1000000u * (a + 1u) + i));
    }
    win_wait(&r, 2);
    atomic_store(&r.stop, 1u);
    pthread_join(th, NULL);
    CHECK_EQ_U(r.misses, 0);
    cf_free(f);
}

int main(void)
{
    cft_init("test_window");
    test_config();
    test_generations();
    test_lookups_at();
    test_differential(0);
    test_differential(1);
    test_determinism();
    test_every_kind();
    test_corrupt();
    test_chunks();
    test_alloc_fail();
    test_concurrent();
    return cft_finish();
}
