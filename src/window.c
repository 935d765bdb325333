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
#include "image.h"

#include <math.h>

/* The ring a windowed head's `more` holds (cf__more.window): its generations, the clock's
 * place, and a loading window's progress. */
struct cf__window {
    cf_filter **gen;     /* the G generations: gen[newest] the newest, gen[(newest + 1) % G]
                            the oldest */
    unsigned n;          /* G */
    unsigned newest;     /* its index in gen */
    uint64_t generation; /* the newest generation's number */
    uint64_t window;     /* cf_config.window */
    bool concurrent;     /* CF_CONCURRENT: writers take `lock`, lookups take nothing */
    pthread_mutex_t lock;
    /* Loading chunk by chunk (cf_load_chunk): each generation's image length, n entries,
     * and the images complete so far (gen[loaded] is NULL or loading, those after it
     * NULL); NULL once every image is in. */
    uint64_t *loading;
    unsigned loaded;
};

/* A generation lookups can read: there and complete (not NULL or loading by chunks). */
static inline bool cf__gen_ready(const cf_filter *g)
{
    return g && !(g->more && g->more->load);
}

/* The generation `age` advances old (0 the newest). */
static inline cf_filter *cf__gen_at(const struct cf__window *w, unsigned age)
{
    unsigned i = w->newest + w->n - age;
    return w->gen[i >= w->n ? i - w->n : i];
}

static inline struct cf__window *cf__window_of(const cf_filter *f)
{
    return f->more->window;
}

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

/* A windowed head for generations of settings p: its window struct with room for G
 * generations, none made yet (gen[i] NULL); then the caller fills gen[]. */
static cf_status cf__window_head(const cf__params *p, const cf_allocator *a, unsigned n,
                                 uint64_t window, uint64_t generation, cf_filter **out)
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
    return st == CF_OK ? cf__filter_make(&gp, a, 1, buckets, true, cf__first_ops(&gp), out) : st;
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

cf_status cf__window_gen_stats(const cf_filter *f, unsigned age, cf_stats *out)
{
    const struct cf__window *w = cf__window_of(f);
    if (age >= w->n || !cf__gen_at(w, age)) /* loading: not arrived */
        return CF_EINVAL;
    cf__window_lock(f);
    cf__stats(cf__gen_at(w, age), out);
    cf__window_unlock(f);
    return CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* The file format: a meta section, then one image (image.c) per generation             */
/* ------------------------------------------------------------------------------------ */
/* docs/FORMAT.md, "Windowed files". The header's first 24 bytes are every file's, with
 * CF__FLAG_WINDOW set; its own fields follow. */

#define CF__GEN_BYTES 16u /* per generation: its image's offset and length */

/* Windowed file header field offsets (docs/FORMAT.md, "Windowed files"). */
enum {
    CF__W_WINDOW = 24,
    CF__W_GENERATION = 32,
    CF__W_GENERATIONS = 40,
    CF__W_RESERVED = 44,
};

/* The meta section: header, one entry per generation, meta sum. */
static uint64_t cf__wfile_meta_len(unsigned n)
{
    return CF__HEADER_BYTES + (uint64_t)n * CF__GEN_BYTES + CF__SUM_BYTES;
}

/* The next image's place, after one that ended at `end` (the meta section's end for the
 * first). */
static uint64_t cf__image_next(uint64_t end)
{
    return cf__align_up(end);
}

/* The generation whose image is i-th in the file: oldest first. */
static const cf_filter *cf__image_gen(const cf_filter *f, unsigned i)
{
    const struct cf__window *w = cf__window_of(f);
    return cf__gen_at(w, w->n - 1u - i);
}

/* The length of image i: its generation's image, or while the window is loading by chunks
 * the length its header chunk gave (which every image is held to). */
static uint64_t cf__image_len_at(const cf_filter *f, unsigned i)
{
    const struct cf__window *w = cf__window_of(f);
    return w->loading ? w->loading[i] : cf__image_codec.len(cf__image_gen(f, i));
}

static uint64_t cf__wfile_len(const cf_filter *f)
{
    uint64_t end = cf__wfile_meta_len(cf__window_of(f)->n);
    for (unsigned i = 0; i < cf__window_of(f)->n; i++)
        end = cf__image_next(end) + cf__image_len_at(f, i);
    return end;
}

/* The meta section: the header, each image's offset and length, the meta sum (the header
 * chunk of a dump). */
static void cf__wfile_emit_meta(cf__sink *k, const cf_filter *f)
{
    const struct cf__window *w = cf__window_of(f);
    uint8_t h[CF__HEADER_BYTES];
    memset(h, 0, sizeof h);
    memcpy(h + CF__H_MAGIC, CF__MAGIC, CF__MAGIC_BYTES);
    cf__store_le16(h + CF__H_VERSION, CF__VERSION_ANY);
    cf__store_le16(h + CF__H_HEADER_BYTES, CF__HEADER_BYTES);
    cf__store_le32(h + CF__H_FLAGS, CF__FLAG_WINDOW);
    cf__store_le64(h + CF__H_TOTAL, cf__wfile_len(f));
    cf__store_le64(h + CF__W_WINDOW, w->window);
    cf__store_le64(h + CF__W_GENERATION, w->generation);
    cf__store_le32(h + CF__W_GENERATIONS, w->n);
    cf__emit(k, h, sizeof h);
    uint64_t end = cf__wfile_meta_len(w->n);
    for (unsigned i = 0; i < w->n; i++) {
        uint8_t e[CF__GEN_BYTES];
        uint64_t at = cf__image_next(end), len = cf__image_len_at(f, i);
        cf__store_le64(e, at);
        cf__store_le64(e + 8, len);
        cf__emit(k, e, sizeof e);
        end = at + len;
    }
    cf__emit_meta_sum(k);
}

/* The whole file: the meta section, then each generation's image, oldest first, each at a
 * multiple of 64 with sums of its own. */
static void cf__wfile_emit(cf__sink *k, const cf_filter *f)
{
    cf__wfile_emit_meta(k, f);
    const struct cf__window *w = cf__window_of(f);
    uint64_t end = cf__wfile_meta_len(w->n);
    for (unsigned i = 0; i < w->n; i++) {
        uint64_t at = cf__image_next(end);
        cf__emit_zeros(k, at - end);
        cf__sink_restart(k);
        const cf_filter *g = cf__image_gen(f, i);
        cf__image_codec.emit(k, g);
        end = at + cf__image_codec.len(g);
    }
}

/* Still loading by chunks: some images have not all arrived. */
static bool cf__wfile_loading(const cf_filter *f)
{
    return cf__window_of(f)->loading != NULL;
}

/* What a checked meta section says. */
typedef struct cf__wmeta {
    unsigned n;
    uint64_t window, generation, meta_len, total;
    const uint8_t *base;
} cf__wmeta;

static const uint8_t *cf__gen_entry(const cf__wmeta *w, unsigned i)
{
    return w->base + CF__HEADER_BYTES + (size_t)i * CF__GEN_BYTES;
}

/* The meta section (whole file, its prefix, or the header chunk, which is the meta section
 * alone): its fields, and its images placed one after the other as the layout says. */
static cf_status cf__wfile_parse(const uint8_t *b, size_t len, cf__extent extent, cf__wmeta *w,
                                 const char **why)
{
    unsigned version;
    cf_status st = cf__parse_start(b, len, &version, why);
    if (st != CF_OK)
        return st;
    w->total = cf__load_le64(b + CF__H_TOTAL);
    if (w->total >> 62 != 0) /* far past any table size: sums of lengths stay exact */
        return cf__corrupt(why, "total length out of range");
    if (extent == CF__WHOLE && w->total != len)
        return cf__corrupt(why, w->total > len ? "truncated: shorter than its header says"
                                               : "longer than its header says");
    w->n = cf__load_le32(b + CF__W_GENERATIONS);
    if (w->n < 2 || w->n > CF_MAX_GENERATIONS)
        return cf__corrupt(why, "bad generation count");
    w->meta_len = cf__wfile_meta_len(w->n);
    if (w->meta_len > len)
        return cf__corrupt(why, "truncated: shorter than its header");
    w->base = b;
    if (XXH3_64bits(b, (size_t)w->meta_len - CF__SUM_BYTES) !=
        cf__load_le64(b + w->meta_len - CF__SUM_BYTES))
        return cf__corrupt(why, "header checksum mismatch");
    /* A sound header of another version or with other flags: a newer writer's (a window's
     * own header has not changed since version 2). */
    if (cf__load_le32(b + CF__H_FLAGS) != CF__FLAG_WINDOW || version != CF__VERSION_ANY) {
        *why = "uses a feature or hash this library does not know";
        return CF_EVERSION;
    }
    for (unsigned i = CF__W_RESERVED; i < CF__HEADER_BYTES; i++)
        if (b[i] != 0)
            return cf__corrupt(why, "reserved header field is not zero");
    w->window = cf__load_le64(b + CF__W_WINDOW);
    w->generation = cf__load_le64(b + CF__W_GENERATION);
    uint64_t end = w->meta_len;
    for (unsigned i = 0; i < w->n; i++) {
        uint64_t at = cf__load_le64(cf__gen_entry(w, i)),
                 n = cf__load_le64(cf__gen_entry(w, i) + 8);
        if (at != cf__image_next(end) || n < CF__HEADER_BYTES || n > w->total || at > w->total - n)
            return cf__corrupt(why, "bad generation offset or length");
        end = at + n;
    }
    if (end != w->total)
        return cf__corrupt(why, "total length disagrees with the generations");
    return CF_OK;
}

/* Image i's meta section, checked (and its body too with `body`), and checked against the
 * first image's settings; the padding before it zero. */
static cf_status cf__wfile_image(const cf__wmeta *w, unsigned i, bool body, cf__params *p,
                                 const char **why)
{
    const uint8_t *b = w->base;
    uint64_t at = cf__load_le64(cf__gen_entry(w, i)), n = cf__load_le64(cf__gen_entry(w, i) + 8);
    uint64_t end =
        i ? cf__load_le64(cf__gen_entry(w, i - 1)) + cf__load_le64(cf__gen_entry(w, i - 1) + 8)
          : w->meta_len;
    for (uint64_t pos = end; pos < at; pos++)
        if (b[pos] != 0)
            return cf__corrupt(why, "padding is not zero");
    cf_status st = cf__image_parse(b + at, (size_t)n, body, p, why);
    if (st != CF_OK)
        return st;
    if (p->redisbloom || p->fast_hash || p->expansion != 0)
        return cf__corrupt(why, "a generation that grows or is of another hash than XXH3");
    if (!cf__image_same_settings(b + cf__load_le64(cf__gen_entry(w, 0)), b + at))
        return cf__corrupt(why, "generations with different settings");
    return CF_OK;
}

/* Every image's meta section and settings first (the first image's settings into *p0),
 * then with `body` every image's tables: a file mapped without checking its tables meets
 * the same first problem in the same order. Nothing is allocated. */
static cf_status cf__wfile_check(const cf__wmeta *w, bool body, cf__params *p0, const char **why)
{
    cf_status st = CF_OK;
    for (unsigned pass = 0; pass < (body ? 2u : 1u); pass++)
        for (unsigned i = 0; st == CF_OK && i < w->n; i++) {
            cf__params p;
            st = cf__wfile_image(w, i, pass == 1, i == 0 ? p0 : &p, why);
        }
    return st;
}

/* The meta section of a whole file and then cf__wfile_check. */
static cf_status cf__wfile_open(const uint8_t *b, size_t len, bool body, cf__wmeta *w,
                                cf__params *p0, const char **why)
{
    cf_status st = cf__wfile_parse(b, len, CF__WHOLE, w, why);
    return st == CF_OK ? cf__wfile_check(w, body, p0, why) : st;
}

static cf_status cf__wfile_validate(const uint8_t *b, size_t len, const char **why)
{
    cf__wmeta w;
    cf__params p0;
    return cf__wfile_open(b, len, true, &w, &p0, why);
}

/* A window of the images of a file that cf__wfile_open checked, whose first image's
 * settings are p0: each image made by `one` (built from its bytes, or mapped), oldest
 * first. The head takes the first image's settings. */
static cf_status cf__wfile_make(const cf__wmeta *w, const cf__params *p0, unsigned flags,
                                const cf_allocator *a,
                                cf_status (*one)(const uint8_t *image, size_t len, unsigned flags,
                                                 const cf_allocator *a, cf_filter **out),
                                cf_filter **out)
{
    cf__params p = *p0;
    p.concurrent = (flags & CF_CONCURRENT) != 0;
    cf_filter *f;
    cf_status st;
    if ((st = cf__window_head(&p, a, w->n, w->window, w->generation, &f)) != CF_OK)
        return st;
    struct cf__window *win = cf__window_of(f);
    for (unsigned i = 0; i < w->n; i++) { /* the head's newest is at n - 1: oldest at 0 */
        uint64_t at = cf__load_le64(cf__gen_entry(w, i)),
                 n = cf__load_le64(cf__gen_entry(w, i) + 8);
        if ((st = one(w->base + at, (size_t)n, flags, a, &win->gen[i])) != CF_OK) {
            cf__release(f);
            return st;
        }
    }
    *out = f;
    return CF_OK;
}

/* A window from a whole file whose every check has passed (cf__wfile_validate). */
static cf_status cf__wfile_build(const uint8_t *b, size_t len, unsigned flags,
                                 const cf_allocator *a, cf_filter **out)
{
    cf__wmeta w;
    cf__params p0;
    const char *why;
    cf_status st = cf__wfile_open(b, len, false, &w, &p0, &why);
    return st == CF_OK ? cf__wfile_make(&w, &p0, flags, a, cf__image_codec.build, out) : st;
}

/* A read-only window over a file's bytes that stay mapped; each image's meta section is
 * checked as it is mapped, and every body first with CF_MAP_VERIFY. */
static cf_status cf__wfile_map(const uint8_t *b, size_t len, unsigned flags, const cf_allocator *a,
                               cf_filter **out)
{
    cf__wmeta w;
    cf__params p0;
    const char *why;
    cf_status st = cf__wfile_open(b, len, (flags & CF_MAP_VERIFY) != 0, &w, &p0, &why);
    return st == CF_OK ? cf__wfile_make(&w, &p0, 0, a, cf__image_codec.map, out) : st;
}

/* A stream's next read (cf__codec.want): the meta section, then the length it gives
 * (once checked) plus one more byte, which shows whether the input is longer. */
static uint64_t cf__wfile_want(const uint8_t *b, size_t len)
{
    uint32_t n = cf__load_le32(b + CF__W_GENERATIONS);
    if (n < 2 || n > CF_MAX_GENERATIONS)
        return 0;
    if (len < cf__wfile_meta_len(n))
        return cf__wfile_meta_len(n);
    cf__wmeta w;
    const char *why;
    return cf__wfile_parse(b, len, CF__PREFIX, &w, &why) == CF_OK ? w.total + 1 : 0;
}

/* Its header chunk, or the largest of its images'. */
static size_t cf__wfile_dump_max(const cf_filter *f)
{
    const struct cf__window *w = cf__window_of(f);
    size_t most = (size_t)cf__wfile_meta_len(w->n);
    for (unsigned i = 0; i < w->n; i++)
        if (w->gen[i] && cf__image_codec.dump_max(w->gen[i]) > most)
            most = cf__image_codec.dump_max(w->gen[i]);
    return most;
}

/* Where image i of a window loading by chunks starts in its file. */
static uint64_t cf__loading_image_at(const struct cf__window *w, unsigned i)
{
    uint64_t at = cf__image_next(cf__wfile_meta_len(w->n));
    for (unsigned j = 0; j < i; j++)
        at = cf__image_next(at + w->loading[j]);
    return at;
}

/* Where the next chunk of a window loading by chunks goes: the image it is loading, at
 * that image's next chunk (its start while none of it has arrived). */
static uint64_t cf__wfile_load_pos(const cf_filter *f)
{
    const struct cf__window *w = cf__window_of(f);
    const cf_filter *g = w->gen[w->loaded];
    return cf__loading_image_at(w, w->loaded) + (g ? cf__load_of(g)->pos : 0u);
}

/* A windowed dump: its meta section as the header chunk, then each image's own dump,
 * oldest first, at the cursors of that image's place in the file (the image's cursor plus
 * its offset), but that the cursor after an image's last chunk is the next image's start,
 * where its header chunk is. A loading window dumps what it has: complete images, then
 * the chunks the image it is loading has taken. */
static cf_status cf__wfile_dump(const cf_filter *f, uint64_t *cursor, void *buf, size_t cap,
                                size_t *len)
{
    const struct cf__window *w = cf__window_of(f);
    uint64_t pos = *cursor, meta = cf__wfile_meta_len(w->n);
    if (pos == 0) {
        if (!buf || cap < meta)
            return CF_EINVAL;
        cf__sink k;
        cf__sink_init(&k, buf, -1, NULL);
        cf__wfile_emit_meta(&k, f);
        *len = (size_t)meta;
        *cursor = cf__image_next(meta);
        return CF_OK;
    }
    uint64_t at = cf__image_next(meta);
    for (unsigned i = 0; i < w->n && pos >= at; i++) {
        const cf_filter *g = cf__image_gen(f, i);
        if (!g) /* loading: not arrived */
            break;
        uint64_t end = at + cf__image_len_at(f, i);
        if (pos < end) {
            uint64_t inner = pos - at;
            cf_status st = cf__image_codec.dump(g, &inner, buf, cap, len);
            if (st != CF_OK || !*len)
                break;
            /* After an image's last chunk, the next image's header (its start) is next. */
            *cursor = inner == end - at - CF__SUM_BYTES && i + 1 < w->n ? cf__image_next(end)
                                                                        : at + inner;
            return CF_OK;
        }
        at = cf__image_next(end);
    }
    /* Past the last chunk (of the whole file, or of a loading window's data so far) is
     * the end; anywhere else is no chunk's position. */
    bool past = w->loading ? pos >= cf__wfile_load_pos(f) : pos >= cf__wfile_len(f) - CF__SUM_BYTES;
    if (!past)
        return CF_EINVAL;
    *len = 0;
    *cursor = 0;
    return CF_OK;
}

/* The settings of a window's head made from its header chunk, which holds none: the
 * defaults, until the first image's header brings the seed (nothing else of the head is
 * used by a window). */
static void cf__wfile_placeholder(cf__params *p)
{
    memset(p, 0, sizeof *p);
    cf__shape_init(&p->shape, CF_DEFAULT_FINGERPRINT_BITS, CF_DEFAULT_BUCKET_SIZE, false);
    p->capacity = 1;
    p->max_kicks = CF_DEFAULT_MAX_KICKS;
    p->max_tables = 1;
}

/* What a window whose header chunk said w will hold: its head and ring, and for each
 * generation its image's length (its tables, plus their file's header and padding) and
 * what a filter holds besides its tables while it loads. Generations whose eviction
 * budget needs search memory of their own (over 510 kicks) take that too, which no
 * windowed filter this library makes has. */
static cf_status cf__wfile_bytes_needed(const uint8_t *d, size_t len, size_t *bytes)
{
    cf__wmeta w;
    const char *why;
    cf_status st = cf__wfile_parse(d, len, CF__HEADER_CHUNK, &w, &why);
    if (st != CF_OK)
        return st;
    cf__params p;
    cf__wfile_placeholder(&p);
    uint64_t each = cf__fixed_bytes(&p, NULL, 1) + sizeof(cf__more) + CF__LOADING_BLOCK +
                    CF__STASH_SLOTS * sizeof(cf__stash);
    uint64_t total = cf__fixed_bytes(&p, NULL, 1) + sizeof(cf__more) + cf__window_block(w.n) +
                     (uint64_t)w.n * 8u;
    for (unsigned i = 0; i < w.n; i++) /* each below 2^63 and the sum below 2^64: n <= 4096 */
        total += cf__load_le64(cf__gen_entry(&w, i) + 8) + each;
    if (total > SIZE_MAX)
        return CF_EINVAL;
    *bytes = (size_t)total;
    return CF_OK;
}

/* A windowed dump's header chunk: a window of that many generations, none of them yet,
 * read-only until every image is in. Its head's settings are placeholders until the first
 * image's header brings the seed (nothing else of the head is used by a window). */
static cf_status cf__wfile_load_header(cf_filter **out, uint64_t cursor, const uint8_t *d,
                                       size_t len, const cf_allocator *a)
{
    cf__wmeta w;
    const char *why;
    cf_status st = cf__wfile_parse(d, len, CF__HEADER_CHUNK, &w, &why);
    if (st != CF_OK)
        return st;
    if (w.meta_len != len || cursor != cf__image_next(w.meta_len))
        return CF_ECORRUPT;
    if (!cf__allocator_ok(a))
        return CF_EINVAL;
    cf__params p;
    cf__wfile_placeholder(&p);
    cf_filter *f;
    if ((st = cf__window_head(&p, a, w.n, w.window, w.generation, &f)) != CF_OK)
        return st;
    struct cf__window *win = cf__window_of(f);
    if (!(win->loading = cf__malloc(f, (size_t)w.n * sizeof(uint64_t)))) {
        cf__release(f);
        return CF_ENOMEM;
    }
    for (unsigned i = 0; i < w.n; i++)
        win->loading[i] = cf__load_le64(cf__gen_entry(&w, i) + 8);
    f->bits |= CF__B_READ_ONLY;
    *out = f;
    return CF_OK;
}

/* The next chunk of a windowed dump: the image being loaded takes it (its header chunk
 * first, checked against the window's settings before anything is allocated). */
static cf_status cf__wfile_load(cf_filter *f, uint64_t cursor, const uint8_t *d, size_t len)
{
    struct cf__window *w = cf__window_of(f);
    if (!w->loading)
        return CF_EINVAL;
    unsigned i = w->loaded;
    uint64_t at = cf__loading_image_at(w, i), inner = cursor - at;
    if (i + 1 < w->n && cursor == cf__loading_image_at(w, i + 1))
        inner = w->loading[i] - CF__SUM_BYTES; /* the image's last chunk */
    else if (cursor <= at || inner >= w->loading[i])
        return CF_ECORRUPT;
    const cf_allocator *a = (f->bits & CF__B_OWN_ALLOC) ? cf__alloc_of(f) : NULL;
    cf_status st;
    if (!w->gen[i]) {
        uint8_t first[CF__HEADER_BYTES];
        if (i > 0)
            cf__image_header(w->gen[0], first);
        if (len < CF__HEADER_BYTES || cf__load_le64(d + CF__H_TOTAL) != w->loading[i] ||
            d[CF__H_HASH] != CF__HASH_XXH3 || cf__load_le32(d + CF__H_EXPANSION) != 0 ||
            (i > 0 && !cf__image_same_settings(first, d)))
            return CF_ECORRUPT;
        st = cf__image_codec.load_header(&w->gen[i], inner, d, len, a);
    } else {
        st = cf__image_codec.load(w->gen[i], inner, d, len);
    }
    if (st != CF_OK)
        return st;
    if (i == 0)
        f->k8 = w->gen[0]->k8; /* the window's seed, for the keys it hashes */
    if (!cf__image_codec.loading(w->gen[i]) && ++w->loaded == w->n) {
        cf__mfree(f, w->loading);
        w->loading = NULL;
        f->bits &= (uint8_t)~CF__B_READ_ONLY;
    }
    return CF_OK;
}

const cf__codec cf__window_codec = {
    .len = cf__wfile_len,
    .emit = cf__wfile_emit,
    .loading = cf__wfile_loading,
    .dump_max = cf__wfile_dump_max,
    .dump = cf__wfile_dump,
    .load = cf__wfile_load,
    .validate = cf__wfile_validate,
    .build = cf__wfile_build,
    .map = cf__wfile_map,
    .want = cf__wfile_want,
    .bytes_needed = cf__wfile_bytes_needed,
    .load_header = cf__wfile_load_header,
};

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
    .codec = &cf__window_codec,
};
