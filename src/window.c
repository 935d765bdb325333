/*
 * window.c - windowed filters (cf_config.generations): a ring of G generations, each a
 * filter of its own. Adds go to the newest; lookups, counts and deletes see them all; an
 * advance empties the oldest and makes it the newest.
 *
 * Why whole generations: dropping one forgets every key it holds at once, in one clear of
 * its table, with no per-slot clock bits (which would cost memory in every slot and a scan
 * of the whole table to expire). The price is a probe per generation in each lookup.
 *
 * Every generation has the same size and settings (no growth): then two keys whose
 * fingerprint and buckets coincide in one generation coincide in every one, and a delete
 * may take the oldest matching copy: if it was another key's, the deleted key's own copy
 * (in a generation no older, since none older matched) answers for that key, and stays
 * at least as long. Generations that grew would break this (the other key might not match
 * the deleted key's copy in a larger sub-filter), so a windowed filter has a capacity per
 * generation and says CF_FULL past it, as a fixed filter does.
 *
 * Concurrent windowed filters (CF_CONCURRENT): every generation is a concurrent filter,
 * and the ring itself never changes shape (the G filters are made once and reused), so a
 * lookup reads all G with no lock and no order: a key that is in any generation is found,
 * whichever generation is the newest meanwhile. Writers, advances included, take the
 * window's lock, so an add never lands in a generation an advance is emptying.
 */
#include "plain.h"

#include <math.h>

/* Hashes a batched lookup takes from the caller's keys at a time: hashed once, probed in
 * every generation (2 KiB of stack). */
#define CF__WINDOW_BATCH 256u

static const cf__ops cf__window_ops; /* its hot calls and its row, below */

static void cf__window_lock(const cf_filter *f)
{
    struct cf__window *w = cf__window_of(f);
    if (w->concurrent) /* fails only for a mutex it did not make: never here */
        (void)pthread_mutex_lock(&w->lock);
}

static void cf__window_unlock(const cf_filter *f)
{
    struct cf__window *w = cf__window_of(f);
    if (w->concurrent)
        (void)pthread_mutex_unlock(&w->lock);
}

/* The kind's hold, for the calls that read the whole window (its size, its bytes, its
 * chunks): every write of its generations takes the window's lock; each concurrent
 * generation's own hold is taken too, because that is what brings its stripes' counts
 * into its tables' item counts, which its image's descriptors carry. */
static void cf__window_hold(const cf_filter *f)
{
    cf__window_lock(f);
    const struct cf__window *w = cf__window_of(f);
    for (unsigned i = 0; i < w->n; i++)
        if (w->gen[i])
            cf__hold(w->gen[i]);
}

static void cf__window_unhold(const cf_filter *f)
{
    const struct cf__window *w = cf__window_of(f);
    for (unsigned i = w->n; i-- > 0;)
        if (w->gen[i])
            cf__unhold(w->gen[i]);
    cf__window_unlock(f);
}

/* ------------------------------------------------------------------------------------ */
/* Making and freeing                                                                   */
/* ------------------------------------------------------------------------------------ */

/* The config that makes one generation of settings p (a fixed filter, seed fixed). */
static void cf__gen_config(const cf__params *p, const cf_allocator *a, cf_config *c)
{
    memset(c, 0, sizeof *c);
    c->capacity = p->capacity;
    c->fingerprint_bits = p->shape.f;
    c->bucket_size = p->shape.b;
    c->max_kicks = p->max_kicks;
    c->seed = p->seed;
    c->allocator = a;
    c->max_sub_filters = p->max_tables;
    c->flags =
        CF_FIXED_SEED | (p->shape.semi ? CF_SEMI_SORT : 0u) | (p->concurrent ? CF_CONCURRENT : 0u);
}

/* Bytes of the window struct with its array of n generations. */
static size_t cf__window_block(unsigned n)
{
    return sizeof(struct cf__window) + (size_t)n * sizeof(cf_filter *);
}

cf_status cf__window_head(const cf__params *p, const cf_allocator *a, unsigned n, uint64_t window,
                          uint64_t generation, cf_filter **out)
{
    cf__params head = *p;
    head.concurrent = false; /* the generations are; the head has no tables to guard */
    cf_filter *f;
    cf_status st = cf__filter_make(&head, a, 0, 2, false, &cf__window_ops, &f);
    if (st != CF_OK)
        return st;
    cf__more *m = cf__more_of(f);
    struct cf__window *w = m ? cf__malloc(f, cf__window_block(n)) : NULL;
    if (w)
        memset(w, 0, sizeof *w);
    if (!w || (p->concurrent && pthread_mutex_init(&w->lock, NULL) != 0)) {
        if (w)
            cf__mfree(f, w);
        cf__plain_release(f);
        return CF_ENOMEM;
    }
    w->gen = (cf_filter **)(void *)(w + 1);
    for (unsigned i = 0; i < n; i++)
        w->gen[i] = NULL;
    w->n = n;
    w->newest = n - 1u;
    w->generation = generation;
    w->window = window;
    w->concurrent = p->concurrent;
    m->window = w;
    f->bits |= CF__B_WINDOW;
    *out = f;
    return CF_OK;
}

static void cf__window_release(cf_filter *f)
{
    struct cf__window *w = cf__window_of(f);
    for (unsigned i = 0; i < w->n; i++)
        if (w->gen[i])
            cf__release(w->gen[i]);
    if (w->loading)
        cf__mfree(f, w->loading);
    if (w->concurrent)
        (void)pthread_mutex_destroy(&w->lock);
    cf__mfree(f, w);
    f->more->window = NULL;
    cf__plain_release(f);
}

/* Generation i of a new window of settings p: a filter cf_new would make of
 * cf__gen_config's config. */
static cf_status cf__gen_new(const cf__params *p, const cf_allocator *a, cf_filter **out)
{
    cf_config g, c;
    cf__params gp;
    uint64_t buckets;
    size_t bytes;
    cf__gen_config(p, a, &g);
    cf_status st = cf__config_sized(&g, sizeof g, &c, &gp, &buckets, &bytes, NULL);
    return st == CF_OK ? cf__make(&gp, a, 1, buckets, true, out) : st;
}

cf_status cf__window_new(const cf_config *c, const cf__params *p, cf_filter **out)
{
    cf_filter *f;
    cf_status st = cf__window_head(p, c->allocator, c->generations, c->window, 0, &f);
    if (st != CF_OK)
        return st;
    struct cf__window *w = cf__window_of(f);
    const cf_allocator *a = cf__alloc_of(f) == &cf__default_allocator ? NULL : cf__alloc_of(f);
    for (unsigned i = 0; i < w->n; i++)
        if ((st = cf__gen_new(p, a, &w->gen[i])) != CF_OK) {
            cf__window_release(f);
            return st;
        }
    *out = f;
    return CF_OK;
}

cf_status cf__window_bytes(const cf_config *c, const cf__params *p, size_t *bytes)
{
    cf_config g;
    cf__gen_config(p, c->allocator, &g);
    cf__params head_params = *p;
    head_params.concurrent = false; /* as cf__window_head makes the head */
    cf_config gc;
    cf__params gp;
    uint64_t buckets;
    size_t one, table_bytes, head = cf__fixed_bytes(&head_params, c->allocator, 0);
    cf_status st = cf__config_sized(&g, sizeof g, &gc, &gp, &buckets, &table_bytes, NULL);
    if (st != CF_OK || (st = cf__bytes_of(&gp, c->allocator, buckets, table_bytes, &one)) != CF_OK)
        return st;
    size_t window = cf__window_block(c->generations) + sizeof(cf__more);
    if (one > (SIZE_MAX - head - window) / c->generations)
        return CF_EINVAL;
    *bytes = head + window + one * c->generations;
    return CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Advancing                                                                            */
/* ------------------------------------------------------------------------------------ */

/* Empty generation g for reuse as the newest (an empty one is clear already). */
static void cf__window_drop(cf_filter *g)
{
    cf_stats st = {0};
    cf__stats(g, &st);
    if (st.items)
        cf__clear(g);
}

static cf_status cf__window_advance(cf_filter *f, uint64_t generation)
{
    struct cf__window *w = cf__window_of(f);
    if (generation < w->generation)
        return CF_EINVAL;
    uint64_t steps = generation - w->generation;
    /* Past G steps every generation is dropped once: the ring's order then restarts from
     * the same place, as G single steps would leave it. */
    unsigned drops = steps < w->n ? (unsigned)steps : w->n;
    for (unsigned i = 0; i < drops; i++) {
        w->newest = w->newest + 1u == w->n ? 0u : w->newest + 1u;
        cf__window_drop(w->gen[w->newest]);
    }
    if (steps > w->n) { /* ... and turned by the rest of the steps, as they would */
        unsigned rest = (unsigned)((steps - w->n) % w->n);
        w->newest = (w->newest + rest) % w->n;
    }
    w->generation = generation;
    return CF_OK;
}

cf_status cf__window_step(cf_filter *f, bool to, uint64_t generation)
{
    cf__window_lock(f);
    struct cf__window *w = cf__window_of(f);
    cf_status st = !to && w->generation == UINT64_MAX
                       ? CF_EINVAL
                       : cf__window_advance(f, to ? generation : w->generation + 1u);
    cf__window_unlock(f);
    return st;
}

uint64_t cf__window_generation_at(const cf_filter *f, uint64_t now)
{
    const struct cf__window *w = cf__window_of(f);
    if (w->window == 0)
        return w->generation;
    __extension__ typedef unsigned __int128 u128;
    u128 g = (u128)now * (w->n - 1u) / w->window;     /* < 2^76: exact in 128 bits */
    return g > UINT64_MAX ? UINT64_MAX : (uint64_t)g; /* past the last number: the last */
}

/* ------------------------------------------------------------------------------------ */
/* Operations                                                                           */
/* ------------------------------------------------------------------------------------ */

/* The generations still live once the window is at generation g, newest first (by age):
 * all of them up to its newest, none from G generations after. */
static unsigned cf__window_live(const struct cf__window *w, uint64_t g)
{
    if (g <= w->generation)
        return w->n;
    return g - w->generation >= w->n ? 0u : w->n - (unsigned)(g - w->generation);
}

/* Generation number i of the `live` newest, i < live. All of them (the plain lookups) are
 * taken in the ring's order, which never reads `newest`: a concurrent window's readers
 * take no lock, and an advance may move it meanwhile. Fewer (the lookups as at a later
 * generation) are taken by age, under the writers' lock of a concurrent window. */
static const cf_filter *cf__live_gen(const struct cf__window *w, unsigned i, unsigned live)
{
    return live == w->n ? w->gen[i] : cf__gen_at(w, i);
}

/* Is h in one of the `live` newest generations? */
static bool cf__window_contains_live(const cf_filter *f, uint64_t h, unsigned live)
{
    const struct cf__window *w = cf__window_of(f);
    for (unsigned i = 0; i < live; i++) {
        const cf_filter *g = cf__live_gen(w, i, live);
        if (cf__gen_ready(g) && g->ops->contains(g, h))
            return true;
    }
    return false;
}

static bool cf__window_contains(const cf_filter *f, uint64_t h)
{
    return cf__window_contains_live(f, h, cf__window_of(f)->n);
}

static bool cf__window_contains_key(const cf_filter *f, const void *key, size_t len)
{
    return cf__window_contains(f, cf__hash_key(f, key, len));
}

static cf_status cf__window_add(cf_filter *f, uint64_t h)
{
    cf__window_lock(f);
    cf_filter *g = cf__gen_at(cf__window_of(f), 0);
    cf_status st = g->ops->add(g, h);
    cf__window_unlock(f);
    return st;
}

static cf_status cf__window_add_key(cf_filter *f, const void *key, size_t len)
{
    return cf__window_add(f, cf__hash_key(f, key, len));
}

/* The oldest copy goes: a key added again later stays for the window after that add. */
static cf_status cf__window_del(cf_filter *f, uint64_t h)
{
    cf__window_lock(f);
    const struct cf__window *w = cf__window_of(f);
    cf_status st = CF_NOT_FOUND;
    for (unsigned age = w->n; age-- > 0 && st == CF_NOT_FOUND;) {
        cf_filter *g = cf__gen_at(w, age);
        st = g->ops->del(g, h);
    }
    cf__window_unlock(f);
    return st;
}

static cf_status cf__window_del_key(cf_filter *f, const void *key, size_t len)
{
    return cf__window_del(f, cf__hash_key(f, key, len));
}

/* Batched lookups in the `live` newest generations. */
static void cf__window_many_live(const cf_filter *f, const cf__source *src, size_t n, bool *out,
                                 unsigned live)
{
    const struct cf__window *w = cf__window_of(f);
    uint64_t hashes[CF__WINDOW_BATCH];
    bool invalid[CF__WINDOW_BATCH];
    for (size_t start = 0; start < n; start += CF__WINDOW_BATCH) {
        size_t k = n - start < CF__WINDOW_BATCH ? n - start : CF__WINDOW_BATCH;
        bool *o = out + start;
        for (size_t j = 0; j < k; j++) {
            size_t i = start + j;
            bool valid = src->hashes || src->keys[i] || !src->lens[i];
            hashes[j] = src->hashes ? src->hashes[i]
                        : valid     ? cf__hash_key(f, src->keys[i], src->lens[i])
                                    : 0;
            o[j] = false;
            invalid[j] = !valid; /* answers false (its hash 0 is probed, and ignored) */
        }
        cf__source batch = {hashes, NULL, NULL};
        for (unsigned i = 0; i < live; i++) {
            const cf_filter *g = cf__live_gen(w, i, live);
            bool got[CF__WINDOW_BATCH];
            if (!cf__gen_ready(g))
                continue;
            g->ops->contains_many(g, &batch, k, got);
            for (size_t j = 0; j < k; j++)
                o[j] = o[j] || (got[j] && !invalid[j]);
        }
    }
}

static void cf__window_contains_many(const cf_filter *f, const cf__source *src, size_t n, bool *out)
{
    cf__window_many_live(f, src, n, out, cf__window_of(f)->n);
}

static size_t cf__window_add_many(cf_filter *f, const uint64_t *hashes, size_t n, unsigned flags,
                                  cf_status *status)
{
    cf__window_lock(f);
    const struct cf__window *w = cf__window_of(f);
    cf_filter *g = cf__gen_at(w, 0);
    size_t added = 0;
    if (!(flags & CF_ADD_UNIQUE)) {
        added = g->ops->add_many(g, hashes, n, 0, status);
    } else {
        /* Unique: a key the newest generation holds is there already (which also covers
         * the keys this batch added before it). One only an older generation holds is
         * there too, and is refreshed: a copy goes to the newest generation, so that a key
         * seen again stays for a window after it was last seen, as one that is added each
         * time would, with at most one copy per generation. */
        for (size_t i = 0; i < n; i++) {
            cf_status st = CF_EXISTS;
            if (!g->ops->contains(g, hashes[i])) {
                bool older = false;
                for (unsigned age = 1; age < w->n && !older; age++) {
                    const cf_filter *o = cf__gen_at(w, age);
                    older = o->ops->contains(o, hashes[i]);
                }
                st = g->ops->add(g, hashes[i]);
                if (older && st == CF_OK)
                    st = CF_EXISTS;
            }
            added += st == CF_OK;
            if (status)
                status[i] = st;
        }
    }
    cf__window_unlock(f);
    return added;
}

static const cf__kind cf__kind_window; /* its row: the end of the file */

static const cf__ops cf__window_ops = {cf__window_contains,      cf__window_contains_key,
                                       cf__window_add,           cf__window_add_key,
                                       cf__window_del,           cf__window_del_key,
                                       cf__window_contains_many, cf__window_add_many,
                                       &cf__kind_window,         NULL};

/* The copies of h in the `live` newest generations. */
static uint64_t cf__window_count_live(const cf_filter *f, uint64_t h, unsigned live)
{
    const struct cf__window *w = cf__window_of(f);
    uint64_t n = 0;
    for (unsigned i = 0; i < live; i++)
        if (cf__gen_ready(cf__live_gen(w, i, live)))
            n += cf__count(cf__live_gen(w, i, live), h);
    return n;
}

static uint64_t cf__window_count(const cf_filter *f, uint64_t h)
{
    return cf__window_count_live(f, h, cf__window_of(f)->n);
}

bool cf__window_contains_at(const cf_filter *f, uint64_t h, uint64_t generation)
{
    cf__window_lock(f);
    bool found = cf__window_contains_live(f, h, cf__window_live(cf__window_of(f), generation));
    cf__window_unlock(f);
    return found;
}

uint64_t cf__window_count_at(const cf_filter *f, uint64_t h, uint64_t generation)
{
    cf__window_lock(f);
    uint64_t n = cf__window_count_live(f, h, cf__window_live(cf__window_of(f), generation));
    cf__window_unlock(f);
    return n;
}

void cf__window_many_at(const cf_filter *f, const cf__source *src, size_t n, uint64_t generation,
                        bool *out)
{
    cf__window_lock(f);
    cf__window_many_live(f, src, n, out, cf__window_live(cf__window_of(f), generation));
    cf__window_unlock(f);
}

static void cf__window_clear(cf_filter *f)
{
    cf__window_lock(f);
    struct cf__window *w = cf__window_of(f);
    for (unsigned i = 0; i < w->n; i++)
        cf__window_drop(w->gen[i]);
    cf__window_unlock(f);
}

static cf_status cf__window_compact(cf_filter *f)
{
    struct cf__window *w = cf__window_of(f);
    for (unsigned i = 0; i < w->n; i++) {
        cf_status st = cf__compact(w->gen[i]);
        if (st != CF_OK)
            return st;
    }
    return CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Figures                                                                              */
/* ------------------------------------------------------------------------------------ */

/* The rate of several generations together: a lookup is a false positive unless it
 * misses every one (1 - prod(1 - r_i)). */
static double cf__combine(double miss_log, double rate)
{
    return miss_log + log1p(-rate);
}

static void cf__window_stats(const cf_filter *f, cf_stats *out)
{
    cf__window_lock(f);
    const struct cf__window *w = cf__window_of(f);
    double miss = 0.0, miss_full = 0.0, miss_bound = 0.0;
    memset(out, 0, sizeof *out);
    for (unsigned age = 0; age < w->n; age++) {
        cf_stats g = {0};
        if (!cf__gen_at(w, age)) /* not arrived yet (loading by chunks) */
            continue;
        cf__stats(cf__gen_at(w, age), &g);
        if (out->slots == 0) {
            *out = g;
        } else {
            out->items += g.items;
            out->slots += g.slots;
            out->buckets += g.buckets;
            out->bytes += g.bytes;
            out->sub_filters += g.sub_filters;
            out->stashed += g.stashed;
            if (g.newest_fingerprint_bits > out->newest_fingerprint_bits)
                out->newest_fingerprint_bits = g.newest_fingerprint_bits;
        }
        out->generations_used += g.items != 0;
        miss = cf__combine(miss, g.fpr);
        miss_full = cf__combine(miss_full, g.fpr_full);
        miss_bound = cf__combine(miss_bound, g.fpr_bound);
    }
    out->load_factor = out->slots ? (double)(out->items - out->stashed) / (double)out->slots : 0.0;
    out->fpr = 0.0 - expm1(miss);
    out->fpr_full = 0.0 - expm1(miss_full);
    out->fpr_bound = 0.0 - expm1(miss_bound);
    out->window = w->window;
    out->generation = w->generation;
    out->generations = w->n;
    cf__window_unlock(f);
}

static void cf__window_config(const cf_filter *f, cf_config *out)
{
    const struct cf__window *w = cf__window_of(f);
    memset(out, 0, sizeof *out); /* all but the window while no generation has arrived */
    if (w->gen[0])
        cf__config(w->gen[0], out);
    out->generations = w->n;
    out->window = w->window;
}

void cf__window_gen_stats(const cf_filter *f, unsigned age, cf_stats *out)
{
    cf__window_lock(f);
    cf__stats(cf__gen_at(cf__window_of(f), age), out);
    cf__window_unlock(f);
}

/* ------------------------------------------------------------------------------------ */
/* The row                                                                              */
/* ------------------------------------------------------------------------------------ */

static const cf__kind cf__kind_window = {
    .composite = true,
    .no_merge = "windowed filters do not merge",
    .release = cf__window_release,
    .clear = cf__window_clear,
    .compact = cf__window_compact,
    .count = cf__window_count,
    .stats = cf__window_stats,
    .config = cf__window_config,
    .hold = cf__window_hold,
    .unhold = cf__window_unhold,
    .pick = cf__ops_stay, /* its generations have states of their own */
};
