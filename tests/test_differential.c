/*
 * test_differential.c - random operations on a filter and on an exact multiset side by
 * side. The filter may say "present" for keys it does not hold, but never "absent" for a
 * key it holds, its counts are never below the truth, its item count is exactly the
 * truth, and a failed add (CF_FULL) changes nothing.
 *
 * At least 5 million operations in total (CF_TEST_SCALE scales it), spread over bucket
 * sizes 1, 2, 3, 4, 8, 16 and fingerprint widths 4, 7, 8, 12, 16, 23, 32, on fixed filters
 * (pushed to CF_FULL again and again) and growing ones (expansion 1, 2 and 3, starting
 * small so that they grow several times). Deletes only ever name keys that are in the
 * multiset: deleting an absent key may legitimately remove another key's fingerprint.
 */
#include "testutil.h"

/* ------------------------------------------------------------------------------------ */
/* The exact multiset: key id -> multiplicity, plus an array of the ids present so that  */
/* a random present key can be drawn in O(1). Open addressing, linear probing, deletion   */
/* by backward shift.                                                                    */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    uint64_t id; /* key id + 1; 0 = empty */
    uint32_t count;
    uint32_t pos; /* index in ms.live */
} ms_slot;

typedef struct {
    ms_slot *slots;
    size_t mask;
    size_t used;
    uint64_t *live; /* ids with count > 0 */
    size_t nlive;
    size_t live_cap;
    uint64_t total; /* sum of counts */
} multiset;

static size_t ms_home(const multiset *m, uint64_t id)
{
    return (size_t)(cft_mix64(id) & m->mask);
}

static void ms_init(multiset *m)
{
    memset(m, 0, sizeof *m);
    m->mask = 1023;
    m->slots = calloc(m->mask + 1, sizeof *m->slots);
    m->live_cap = 1024;
    m->live = malloc(m->live_cap * sizeof *m->live);
    if (m->slots == NULL || m->live == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
}

static void ms_free(multiset *m)
{
    free(m->slots);
    free(m->live);
    memset(m, 0, sizeof *m);
}

static ms_slot *ms_find(const multiset *m, uint64_t key_id)
{
    uint64_t id = key_id + 1;
    for (size_t i = ms_home(m, id);; i = (i + 1) & m->mask) {
        if (m->slots[i].id == id)
            return &m->slots[i];
        if (m->slots[i].id == 0)
            return NULL;
    }
}

static uint32_t ms_count(const multiset *m, uint64_t key_id)
{
    const ms_slot *s = ms_find(m, key_id);
    return s == NULL ? 0 : s->count;
}

static void ms_grow(multiset *m)
{
    ms_slot *old = m->slots;
    size_t n = m->mask + 1;
    m->mask = n * 2 - 1;
    m->slots = calloc(n * 2, sizeof *m->slots);
    if (m->slots == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < n; i++) {
        if (old[i].id == 0)
            continue;
        size_t j = ms_home(m, old[i].id);
        while (m->slots[j].id != 0)
            j = (j + 1) & m->mask;
        m->slots[j] = old[i];
    }
    free(old);
}

static void ms_add(multiset *m, uint64_t key_id)
{
    ms_slot *s = ms_find(m, key_id);
    if (s != NULL) {
        s->count++;
        m->total++;
        return;
    }
    if ((m->used + 1) * 2 > m->mask + 1)
        ms_grow(m);
    if (m->nlive == m->live_cap) {
        m->live_cap *= 2;
        uint64_t *nl = realloc(m->live, m->live_cap * sizeof *m->live);
        if (nl == NULL) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
        m->live = nl;
    }
    uint64_t id = key_id + 1;
    size_t i = ms_home(m, id);
    while (m->slots[i].id != 0)
        i = (i + 1) & m->mask;
    m->slots[i].id = id;
    m->slots[i].count = 1;
    m->slots[i].pos = (uint32_t)m->nlive;
    m->live[m->nlive++] = key_id;
    m->used++;
    m->total++;
}

/* Remove one copy; the key must be present. */
static void ms_remove(multiset *m, uint64_t key_id)
{
    ms_slot *s = ms_find(m, key_id);
    if (s == NULL || s->count == 0) {
        fprintf(stderr, "test bug: ms_remove of absent key\n");
        exit(2);
    }
    m->total--;
    if (--s->count > 0)
        return;
    /* Last copy: drop it from the live array (swap with the last) and from the table. */
    uint32_t pos = s->pos;
    uint64_t moved = m->live[--m->nlive];
    if (pos != m->nlive) {
        m->live[pos] = moved;
        ms_find(m, moved)->pos = pos;
    }
    size_t i = (size_t)(s - m->slots);
    m->slots[i].id = 0;
    m->used--;
    /* Backward-shift deletion keeps every probe sequence unbroken. */
    for (size_t j = (i + 1) & m->mask; m->slots[j].id != 0; j = (j + 1) & m->mask) {
        size_t h = ms_home(m, m->slots[j].id);
        /* Can slot j's entry move to i? Only if its home is not in (i, j] cyclically. */
        bool between = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (!between) {
            m->slots[i] = m->slots[j];
            m->slots[j].id = 0;
            i = j;
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* The driver                                                                           */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    unsigned b, f, expansion;
    uint64_t capacity;
    uint64_t hi;        /* fill phase ends above this many items ... */
    uint64_t lo;        /* ... and the drain phase below this many */
    unsigned max_sub;   /* growing filters: cf_config.max_sub_filters */
    unsigned max_kicks; /* 0 = default */
    unsigned flags;     /* cf_config.flags: CF_SEGMENTED for the segmented mapping */
} shape;

typedef struct {
    cf_filter *f;
    multiset ms;
    cft_rng rng;
    uint64_t stream;
    uint64_t next_id;    /* fresh ids are never reused: a fresh key is never in the multiset */
    uint64_t recent[64]; /* ids whose last copy was deleted: re-added later */
    unsigned nrecent;
    unsigned b, max_sub;
    bool growing;
    bool eight; /* CF_FAST_HASH: even ids are 8-byte keys (key_of) */
    /* tallies */
    uint64_t ops, adds, full, full_new, deletes, uniques, exists, probes, fp_absent, sweeps;
    uint64_t grow_events;
} run;

static size_t key_of(const run *r, uint64_t id, uint8_t *buf)
{
    if (r->eight && id % 2 == 0) { /* ids in a run, as CF_FAST_HASH's 8-byte keys often are */
        uint64_t v = r->stream << 40 | id;
        memcpy(buf, &v, sizeof v);
        return sizeof v;
    }
    return cft_key_var(buf, r->stream, id);
}

/* A random key of the multiset: its id in *id and its bytes in buf; false if it is empty. */
static bool pick_live(run *r, uint64_t *id, uint8_t *buf, size_t *len)
{
    if (r->ms.nlive == 0)
        return false;
    *id = r->ms.live[cft_below(&r->rng, r->ms.nlive)];
    *len = key_of(r, *id, buf);
    return true;
}

/* Every key in the multiset is found and counted at least as often as it was added. */
static void sweep(run *r)
{
    r->sweeps++;
    uint8_t k[CFT_KEY_MAX];
    uint64_t missing = 0, undercount = 0;
    const bool batch = (r->sweeps & 1) == 0;
    enum { B = 256 };
    uint64_t hs[B];
    bool out[B];
    size_t nb = 0;
    for (size_t i = 0; i < r->ms.nlive; i++) {
        uint64_t id = r->ms.live[i];
        size_t len = key_of(r, id, k);
        if (batch) {
            hs[nb++] = cf_hash(r->f, k, len);
            if (nb == B || i + 1 == r->ms.nlive) {
                memset(out, 0, sizeof out);
                cf_contains_many(r->f, hs, nb, out);
                for (size_t j = 0; j < nb; j++)
                    missing += !out[j];
                nb = 0;
            }
        } else {
            missing += !cf_contains(r->f, k, len);
        }
        if (i % 8 == 0) {
            uint64_t c = cf_count(r->f, k, len);
            undercount += c < ms_count(&r->ms, id);
        }
    }
    CHECK_MSG(missing == 0, "sweep after %llu ops: %llu of %zu keys missing",
              (unsigned long long)r->ops, (unsigned long long)missing, r->ms.nlive);
    CHECK_MSG(undercount == 0, "sweep after %llu ops: %llu keys under-counted",
              (unsigned long long)r->ops, (unsigned long long)undercount);
    cf_stats s = cft_stats(r->f);
    CHECK_EQ_U(s.items, r->ms.total);
    CHECK(s.stashed <= 8);
}

/* A few random present keys are still found (cheap per-op check). */
static void spot_check(run *r, unsigned n)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t id;
    size_t len;
    for (unsigned i = 0; i < n && pick_live(r, &id, k, &len); i++) {
        CHECK_MSG(cf_contains(r->f, k, len), "op %llu: present key id %llu not found",
                  (unsigned long long)r->ops, (unsigned long long)id);
    }
}

/* After CF_FULL: nothing changed. */
static void check_full(run *r, uint64_t id, const uint8_t *k, size_t len, const cf_stats *before,
                       uint64_t count_before)
{
    r->full++;
    cf_stats after = cft_stats(r->f);
    CHECK_STATS_EQ(*before, after);
    CHECK_EQ_U(cf_count(r->f, k, len), count_before);
    if (r->growing) {
        /* A growing filter says FULL only for a hot key (its fingerprint fills both of its
         * buckets: at least 2b matches) or at the sub-filter limit. */
        CHECK_MSG(count_before >= 2u * r->b || after.sub_filters >= r->max_sub,
                  "growing filter: CF_FULL for key id %llu with count %llu, %u sub-filters",
                  (unsigned long long)id, (unsigned long long)count_before, after.sub_filters);
    }
    spot_check(r, 16);
    /* A full sweep after some of the failures (they come in bursts near full load). */
    if ((r->full & 63) == 1)
        sweep(r);
}

/* Add key `id` (fresh, re-added, or a duplicate). */
static void op_add(run *r, uint64_t id, bool is_new)
{
    uint8_t k[CFT_KEY_MAX];
    size_t len = key_of(r, id, k);
    cf_stats before = cft_stats(r->f);
    uint64_t count_before = cf_count(r->f, k, len);
    uint32_t mult = ms_count(&r->ms, id);
    CHECK_MSG(count_before >= mult, "count %llu < multiplicity %u",
              (unsigned long long)count_before, mult);
    cf_status rc;
    if (cft_below(&r->rng, 2) == 0)
        rc = cf_add(r->f, k, len);
    else
        rc = cf_add_hash(r->f, cf_hash(r->f, k, len));
    r->adds++;
    if (rc == CF_OK) {
        ms_add(&r->ms, id);
        cf_stats s = cft_stats(r->f);
        CHECK_EQ_U(s.items, before.items + 1);
        if (s.sub_filters > before.sub_filters)
            r->grow_events++;
        CHECK(s.sub_filters >= before.sub_filters);
        CHECK(cf_contains(r->f, k, len));
        CHECK_MSG(cf_count(r->f, k, len) >= mult + 1u, "count below multiplicity %u", mult + 1);
    } else if (CHECK_MSG(rc == CF_FULL, "cf_add returned %s", cft_status_name(rc))) {
        if (is_new)
            r->full_new++;
        check_full(r, id, k, len, &before, count_before);
    }
}

static void op_add_unique(run *r, uint64_t id)
{
    uint8_t k[CFT_KEY_MAX];
    size_t len = key_of(r, id, k);
    cf_stats before = cft_stats(r->f);
    bool there = cf_contains(r->f, k, len);
    uint64_t count_before = cf_count(r->f, k, len);
    uint32_t mult = ms_count(&r->ms, id);
    if (mult > 0)
        CHECK(there);
    cf_status rc = cf_add_unique(r->f, k, len);
    r->uniques++;
    if (there) {
        /* Present (truly or by a false positive): CF_EXISTS, nothing added. */
        r->exists++;
        CHECK_ST(rc, CF_EXISTS);
        cf_stats after = cft_stats(r->f);
        CHECK_STATS_EQ(before, after);
        return;
    }
    if (rc == CF_OK) {
        ms_add(&r->ms, id);
        CHECK_EQ_U(cft_stats(r->f).items, before.items + 1);
        CHECK(cf_contains(r->f, k, len));
    } else if (CHECK_MSG(rc == CF_FULL, "cf_add_unique returned %s", cft_status_name(rc))) {
        r->full_new++;
        check_full(r, id, k, len, &before, count_before);
    }
}

static void op_delete(run *r)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t id;
    size_t len;
    if (!pick_live(r, &id, k, &len))
        return;
    uint64_t items = cft_stats(r->f).items;
    cf_status rc;
    if (cft_below(&r->rng, 2) == 0)
        rc = cf_delete(r->f, k, len);
    else
        rc = cf_delete_hash(r->f, cf_hash(r->f, k, len));
    r->deletes++;
    if (!CHECK_MSG(rc == CF_OK, "delete of present key id %llu (multiplicity %u) returned %s",
                   (unsigned long long)id, ms_count(&r->ms, id), cft_status_name(rc)))
        return;
    ms_remove(&r->ms, id);
    CHECK_EQ_U(cft_stats(r->f).items, items - 1);
    uint32_t mult = ms_count(&r->ms, id);
    if (mult > 0) {
        CHECK(cf_contains(r->f, k, len));
        CHECK(cf_count(r->f, k, len) >= mult);
    } else if (r->nrecent < 64) {
        r->recent[r->nrecent++] = id;
    } else {
        r->recent[cft_below(&r->rng, 64)] = id;
    }
}

static void op_contains(run *r, bool present)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t id;
    size_t len;
    if (present && pick_live(r, &id, k, &len)) {
        bool a = cf_contains(r->f, k, len);
        bool b = cf_contains_hash(r->f, cf_hash(r->f, k, len));
        CHECK_MSG(a && b, "present key id %llu (multiplicity %u): contains %d, contains_hash %d",
                  (unsigned long long)id, ms_count(&r->ms, id), a, b);
    } else {
        /* A key never added: any answer is allowed, but both paths must agree. */
        id = r->next_id++;
        len = key_of(r, id, k);
        bool a = cf_contains(r->f, k, len);
        CHECK(cf_contains_hash(r->f, cf_hash(r->f, k, len)) == a);
        r->probes++;
        r->fp_absent += a;
    }
}

static void op_count(run *r)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t id;
    size_t len;
    if (!pick_live(r, &id, k, &len))
        return;
    uint64_t c = cf_count(r->f, k, len);
    CHECK_EQ_U(cf_count_hash(r->f, cf_hash(r->f, k, len)), c);
    uint32_t mult = ms_count(&r->ms, id);
    CHECK_MSG(c >= mult, "key id %llu: count %llu < multiplicity %u", (unsigned long long)id,
              (unsigned long long)c, mult);
}

static uint64_t run_shape(const shape *sh, uint64_t ops, uint64_t tag)
{
    run r;
    memset(&r, 0, sizeof r);
    uint64_t fseed = cft_subseed(tag);
    r.rng = cft_rng_make(cft_subseed(tag + 0x1000));
    r.stream = tag;
    r.b = sh->b;
    r.growing = sh->expansion > 0;
    r.eight = (sh->flags & CF_FAST_HASH) != 0;
    r.max_sub = sh->max_sub ? sh->max_sub : CF_DEFAULT_MAX_SUB_FILTERS;
    cft_context("b %u f %u expansion %u capacity %llu max_kicks %u flags %u filter seed "
                "0x%016llx (tag %llu)",
                sh->b, sh->f, sh->expansion, (unsigned long long)sh->capacity, sh->max_kicks,
                sh->flags, (unsigned long long)fseed, (unsigned long long)tag);
    cf_config c = {.capacity = sh->capacity,
                   .bucket_size = sh->b,
                   .fingerprint_bits = sh->f,
                   .expansion = sh->expansion,
                   .max_kicks = sh->max_kicks,
                   .max_sub_filters = sh->max_sub,
                   .seed = fseed,
                   .flags = sh->flags};
    if (!CHECK_ST(cf_new(&c, &r.f), CF_OK))
        return 0;
    ms_init(&r.ms);

    bool filling = true;
    uint64_t full_at_phase = 0;
    const uint64_t sweep_every = 25000;
    for (r.ops = 1; r.ops <= ops; r.ops++) {
        /* Phases: fill until above hi (fixed filters: or after a burst of CF_FULL for fresh
         * keys), then drain until below lo. */
        if (filling && (r.ms.total >= sh->hi || r.full_new >= full_at_phase + 32)) {
            filling = false;
        } else if (!filling && r.ms.total <= sh->lo) {
            filling = true;
            full_at_phase = r.full_new;
        }
        double u = cft_unit(&r.rng);
        /* fill: 50 % new adds, 8 % duplicates, 7 % add_unique, 15 % deletes, 20 % reads.
         * drain: 12 % new adds, 4 % duplicates, 4 % add_unique, 60 % deletes, 20 % reads. */
        double p_new = filling ? 0.50 : 0.12, p_dup = filling ? 0.08 : 0.04,
               p_uni = filling ? 0.07 : 0.04, p_del = filling ? 0.15 : 0.60;
        if (u < p_new) {
            /* A fresh key, or now and then one whose copies were all deleted. */
            if (r.nrecent > 0 && cft_below(&r.rng, 8) == 0) {
                unsigned j = (unsigned)cft_below(&r.rng, r.nrecent);
                uint64_t id = r.recent[j];
                r.recent[j] = r.recent[--r.nrecent];
                if (ms_count(&r.ms, id) == 0)
                    op_add(&r, id, true);
            } else {
                op_add(&r, r.next_id++, true);
            }
        } else if ((u -= p_new) < p_dup) {
            if (r.ms.nlive > 0)
                op_add(&r, r.ms.live[cft_below(&r.rng, r.ms.nlive)], false);
        } else if ((u -= p_dup) < p_uni) {
            if (r.ms.nlive > 0 && cft_below(&r.rng, 4) == 0)
                op_add_unique(&r, r.ms.live[cft_below(&r.rng, r.ms.nlive)]);
            else
                op_add_unique(&r, r.next_id++);
        } else if ((u -= p_uni) < p_del) {
            op_delete(&r);
        } else if ((u -= p_del) < 0.10) {
            op_contains(&r, cft_below(&r.rng, 4) != 0);
        } else {
            op_count(&r);
        }
        /* After every op: the item count is exact and random present keys are found. */
        CHECK_EQ_U(cft_stats(r.f).items, r.ms.total);
        spot_check(&r, 2);
        if (r.ops % sweep_every == 0)
            sweep(&r);
        if (cft.failed > 100)
            break; /* enough to diagnose */
    }
    sweep(&r);
    uint64_t done = r.ops > ops ? ops : r.ops;

    /* Drain completely: every delete of a present key works, then the filter is empty. */
    while (r.ms.nlive > 0 && cft.failed <= 100) /* a failed delete removes nothing */
        op_delete(&r);
    cf_stats s = cft_stats(r.f);
    CHECK_EQ_U(s.items, 0);
    CHECK(s.load_factor == 0.0);

    printf("  b %2u f %2u e %u cap %6llu%s: %7llu ops, %6llu adds (%5llu FULL, %4llu growths, %2u "
           "sub-filters), %6llu deletes, %5llu add_unique (%5llu EXISTS), fp %.4f\n",
           sh->b, sh->f, sh->expansion, (unsigned long long)sh->capacity,
           (sh->flags & CF_SEGMENTED) ? " seg" : "", (unsigned long long)done,
           (unsigned long long)r.adds, (unsigned long long)r.full,
           (unsigned long long)r.grow_events, s.sub_filters, (unsigned long long)r.deletes,
           (unsigned long long)r.uniques, (unsigned long long)r.exists,
           r.probes ? (double)r.fp_absent / (double)r.probes : 0.0);
    fflush(stdout);
    /* The run did what it was for (a scaled-down run may stop before that). */
    if (cft_full_scale() && !r.growing && sh->hi > sh->capacity) /* driven past capacity */
        CHECK_MSG(r.full > 0, "a fixed filter driven past capacity never returned CF_FULL");
    if (cft_full_scale() && r.growing)
        CHECK_MSG(r.grow_events >= 3, "growing filter grew only %llu times",
                  (unsigned long long)r.grow_events);
    cf_free(r.f);
    ms_free(&r.ms);
    return done;
}

int main(void)
{
    cft_init("test_differential");
    /* Fixed filters: lo/hi in items; the fill phase also ends after 32 CF_FULLs for fresh
     * keys, so these are pushed into CF_FULL in every cycle (hi is above capacity). */
#define FIXED(b, f, cap)                                                                           \
    {                                                                                              \
        b, f, 0, cap, (cap)*2, (cap) / 3, 0, 0, 0                                                  \
    }
    /* Growing filters start small and are driven to several times their capacity. */
#define GROW(b, f, e, cap, hi, ms)                                                                 \
    {                                                                                              \
        b, f, e, cap, hi, (hi) / 3, ms, 0, 0                                                       \
    }
    static const shape shapes[] = {
        FIXED(1, 8, 3000),
        FIXED(1, 16, 2000),
        FIXED(1, 32, 1500),
        FIXED(2, 4, 3000),
        FIXED(2, 12, 4000),
        FIXED(2, 23, 2500),
        FIXED(3, 7, 3000),
        FIXED(3, 16, 3500),
        FIXED(3, 32, 2000),
        FIXED(4, 4, 4000),
        FIXED(4, 8, 5000),
        FIXED(4, 12, 6000),
        FIXED(4, 16, 3000),
        FIXED(4, 32, 2500),
        FIXED(8, 7, 4000),
        FIXED(8, 12, 5000),
        FIXED(8, 23, 3000),
        FIXED(16, 4, 3000),
        FIXED(16, 8, 4000),
        FIXED(16, 16, 3000),
        FIXED(16, 32, 2000),
        GROW(4, 12, 1, 300, 6000, 64),
        GROW(2, 16, 2, 200, 20000, 0),
        GROW(8, 8, 3, 100, 30000, 0),
        GROW(1, 12, 2, 150, 8000, 0),
        GROW(3, 23, 1, 250, 5000, 64),
        GROW(16, 7, 2, 100, 12000, 0),
        GROW(4, 32, 3, 150, 25000, 0),
        GROW(2, 4, 1, 200, 3000, 64),
        GROW(8, 16, 1, 100, 2500, 0),
        /* Segmented (CF_SEGMENTED): one segment of 2^16 buckets at least, whatever the
         * capacity. A fixed one driven to CF_FULL; one of the default shape (its own
         * code) filled to a quarter, not to its capacity; one that grows. */
        {1, 8, 0, 30000, 80000, 20000, 0, 0, CF_SEGMENTED},
        {4, 12, 0, 249000, 60000, 20000, 0, 0, CF_SEGMENTED},
        {1, 12, 2, 1000, 60000, 20000, 0, 0, CF_SEGMENTED},
        /* Hash id 3 (half the keys 8 bytes): fixed, growing, semi-sorted, segmented. */
        {4, 12, 0, 6000, 12000, 2000, 0, 0, CF_FAST_HASH},
        {2, 16, 2, 200, 20000, 6666, 0, 0, CF_FAST_HASH},
        {4, 13, 0, 5000, 10000, 1666, 0, 0, CF_FAST_HASH | CF_SEMI_SORT},
        {4, 12, 0, 249000, 60000, 20000, 0, 0, CF_FAST_HASH | CF_SEGMENTED},
    };
#undef FIXED
#undef GROW
    const size_t nshapes = sizeof shapes / sizeof shapes[0];
    const uint64_t total = cft_scaled(5000000);
    const uint64_t per = total / nshapes + 1;
    uint64_t done = 0;
    for (size_t i = 0; i < nshapes; i++)
        done += run_shape(&shapes[i], per, 100 + i);

    /* A short run with a tiny kick budget: failures come early and often. */
    shape tiny_kicks = {4, 12, 0, 3000, 6000, 1000, 0, 1, 0};
    done += run_shape(&tiny_kicks, per / 2, 999);
    shape tiny_kicks_grow = {2, 8, 2, 100, 8000, 2000, 0, 2, 0};
    done += run_shape(&tiny_kicks_grow, per / 2, 998);

    printf("test_differential: %llu operations in total\n", (unsigned long long)done);
    cft_context("total");
    CHECK_MSG(cft.failed > 0 || done >= total, "only %llu of %llu operations ran",
              (unsigned long long)done, (unsigned long long)total);
    return cft_finish();
}
