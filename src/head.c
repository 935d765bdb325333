/*
 * head.c - the filter object below every kind: its head block and memory layout, `more`,
 * the sub-filter array and its growth (a sub-filter appended, reserved ahead, published,
 * dropped), the stash's memory, search memory, and the changes of state that publish
 * what lookups read outside the tables (cf__state_begin/end).
 */
#include "internal.h"

/* The struct is the fixed cost of every filter, many of them small (a Redis key each):
 * keep it within the 96 bytes the header promises. */
_Static_assert(sizeof(void *) != 8 || sizeof(cf_filter) <= 96,
               "cf_filter outgrew the 96 bytes cf_bytes_needed's documentation gives");

/* Sub-filter entries allocated up front: most growing filters stay within a few. */
#define CF__INITIAL_TABLES 4u

unsigned cf__mark_bits(size_t nodes)
{
    unsigned bits = 1;
    while (((size_t)1 << bits) < 2 * nodes)
        bits++;
    return bits;
}

/* Entries of the sub-filter array for `ntables` sub-filters: none for one (the struct
 * holds it), else from CF__INITIAL_TABLES, doubling, up to max_tables. A concurrent
 * filter (cc) has the array from the start: its first sub-filter's item count, which
 * every write changes, then sits away from the struct that every lookup reads. */
static unsigned cf__tables_cap(unsigned max_tables, unsigned ntables, bool cc)
{
    if (ntables <= 1 && !cc)
        return 0;
    unsigned cap = CF__INITIAL_TABLES;
    while (cap < ntables)
        cap *= 2;
    return cap < max_tables ? cap : max_tables;
}

/* The growth of each entry of a sub-filter array of `cap` entries, in its block after them
 * (entry k's at [k]). */
static cf__grown *cf__grown_of(cf__table *tables, unsigned cap)
{
    return (cf__grown *)(void *)(tables + cap);
}

/* Bytes of a sub-filter array of `cap` entries with their growth. */
static size_t cf__array_bytes(unsigned cap)
{
    return cap * (sizeof(cf__table) + sizeof(cf__grown));
}

/* Bytes of search memory for `nodes` nodes and 2^mark_bits marks: the struct, its queue
 * and its marks (all 8-byte aligned: each size is a multiple of 8). */
static size_t cf__search_bytes(size_t nodes, unsigned mark_bits)
{
    return sizeof(cf__search) + nodes * sizeof(cf__node) +
           ((size_t)1 << mark_bits) * sizeof(cf__mark);
}

/* Lay search memory for `nodes` nodes and 2^mark_bits marks out in `block` (of
 * cf__search_bytes), with every mark clear. */
static cf__search *cf__search_at(uint8_t *block, size_t nodes, unsigned mark_bits)
{
    cf__search *z = (cf__search *)(void *)block;
    uint8_t *queue = block + sizeof *z, *marks = queue + nodes * sizeof(cf__node);
    memset(marks, 0, ((size_t)1 << mark_bits) * sizeof(cf__mark));
    *z = (cf__search){(cf__node *)(void *)queue,
                      (cf__mark *)(void *)marks,
                      (uint32_t)nodes,
                      64u - mark_bits,
                      0,
                      0,
                      0,
                      0,
                      NULL};
    return z;
}

/* How the memory of a filter with `ntables` sub-filters is laid out, tables aside. */
typedef struct cf__head {
    size_t queue_len;   /* nodes of the filter's own search memory; 0: none (stack) */
    unsigned mark_bits; /* log2 of the entries in its visited set */
    unsigned bits;      /* the CF__B_OWN_* of its head */
    size_t head_bytes;  /* the filter struct and what follows it */
    unsigned tables_cap;
} cf__head;

/* The constant shape of p's first sub-filter, or NULL when it needs one of its own (a
 * bucket of more than CF__STATIC_SHAPE_B slots). */
static const cf__shape *cf__shape_first(const cf__params *p)
{
    return p->shape.exact ? cf__shape_static_exact(p->shape.b)
                          : cf__shape_static(p->shape.f, p->shape.b, p->shape.semi);
}

/* a: the caller's allocator, or NULL for the default. */
static void cf__head_layout(const cf__params *p, const cf_allocator *a, unsigned ntables,
                            cf__head *h)
{
    /* Everything here is bounded by max_kicks <= 65535 and max_tables <= 65536, so these
     * sums cannot overflow even a 32-bit size_t. */
    size_t budget = (size_t)p->max_kicks + 2;
    h->queue_len = budget > CF__STACK_NODES ? budget : 0;
    if (h->queue_len && p->redisbloom) /* its walk (redisbloom.c) never searches */
        h->queue_len = 0;
    h->mark_bits = h->queue_len ? cf__mark_bits(h->queue_len) : 0;
    h->bits = (p->fast_hash ? CF__B_FAST_HASH : 0u) | (a ? CF__B_OWN_ALLOC : 0u) |
              (cf__shape_first(p) && !p->concurrent && !p->shape.seg ? 0u : CF__B_OWN_SHAPE) |
              (h->queue_len ? CF__B_OWN_SEARCH : 0u);
    h->head_bytes = cf__head_at(h->bits, CF__B_OWN_SEARCH << 1);
    if (h->queue_len)
        h->head_bytes += cf__search_bytes(h->queue_len, h->mark_bits);
    h->tables_cap = cf__tables_cap(p->max_tables, ntables, p->concurrent);
}

/* Bytes of a filter's wide shapes: one per width past the first, for a filter whose
 * sub-filters (up to `ntables`) include a wider one. */
static size_t cf__wide_bytes(const cf__params *p, unsigned ntables)
{
    bool wide = ntables > 1 && cf__ext_of(p->shape.f, p->widen, ntables - 1) > 0;
    return wide ? (32u - p->shape.f) * sizeof(cf__shape) : 0;
}

size_t cf__fixed_bytes(const cf__params *p, const cf_allocator *a, unsigned ntables)
{
    cf__head h;
    cf__head_layout(p, a, ntables, &h);
    size_t more = h.tables_cap ? sizeof(cf__more) + cf__array_bytes(h.tables_cap) : 0;
    return h.head_bytes + more + cf__wide_bytes(p, ntables);
}

cf__more *cf__more_of(cf_filter *f)
{
    if (!f->more && (f->more = cf__malloc(f, sizeof(cf__more))) != NULL)
        memset(f->more, 0, sizeof *f->more);
    return f->more;
}

void cf__more_trim(cf_filter *f)
{
    const cf__more *m = f->more;
    if (m && !m->tables && !m->wide_shapes && !m->stash && !m->search && !m->map && !m->load &&
        !m->cc && !m->spare) {
        cf__mfree(f, f->more);
        f->more = NULL;
    }
}

bool cf__stash_room(cf_filter *f)
{
    cf__more *m = cf__more_of(f);
    if (m && !m->stash)
        m->stash = cf__malloc(f, CF__STASH_SLOTS * sizeof(cf__stash));
    if (m && m->stash)
        return true;
    cf__more_trim(f);
    return false;
}

void cf__state_begin(cf_filter *f)
{
    const cf__kind *k = cf__kind_of(f);
    if (k->state_begin)
        k->state_begin(f);
}

void cf__state_end(cf_filter *f)
{
    const cf__kind *k = cf__kind_of(f);
    if (k->state_end)
        k->state_end(f);
    cf__pick_ops(f);
}

/* Move f's first n sub-filters into an array of `cap` entries in f->more (which exists),
 * or for cap 0 (n <= 1) back into the struct; false if the allocation fails (nothing
 * changed). */
static bool cf__resize_tables(cf_filter *f, unsigned n, unsigned cap)
{
    cf__more *m = f->more;
    cf__table *to = &f->t0;
    cf__grown *grown = NULL;
    if (cap) {
        if (!(to = cf__malloc(f, cf__array_bytes(cap))))
            return false;
        grown = cf__grown_of(to, cap);
    }
    for (unsigned k = 0; k < n; k++) {
        to[k] = f->tables[k];
        if (f->tables[k].grown) {
            grown[k] = *f->tables[k].grown;
            to[k].grown = &grown[k];
        }
    }
    /* A concurrent filter's readers may still read the old array: it is kept. */
    if (m->tables && cf__is_cc(f) && !cf__cc_retire(f, m->tables)) {
        cf__mfree(f, to);
        return false;
    }
    if (m->tables && !cf__is_cc(f))
        cf__mfree(f, m->tables);
    m->tables = cap ? to : NULL;
    m->tables_cap = cap;
    cf__publish_tables(f, to);
    return true;
}

/* The growth of sub-filter n, of `buckets` buckets (a multiple of the first's): NULL
 * for the first's size, else set in f's array. */
static const cf__grown *cf__grown_at(cf_filter *f, unsigned n, uint64_t buckets)
{
    uint64_t base = f->tables[0].buckets;
    if (buckets == base)
        return NULL;
    cf__grown *g = &cf__grown_of(f->more->tables, f->more->tables_cap)[n];
    g->base = base;
    g->scale = buckets / base;
    cf__divisor_init(&g->per_scale, g->scale);
    return g;
}

/* The shape of the sub-filters `ext` bits wider than the first: the first's for ext 0,
 * else one of the wide shapes, which the first wider sub-filter allocates; NULL if an
 * allocation fails. */
static const cf__shape *cf__shape_at(cf_filter *f, unsigned ext)
{
    if (ext == 0)
        return cf__shape0(f);
    cf__more *m = cf__more_of(f);
    if (!m)
        return NULL;
    if (!m->wide_shapes) {
        unsigned f0 = f->fp_bits, n = 32u - f0;
        cf__shape *w = cf__malloc(f, n * sizeof *w);
        if (!w)
            return NULL;
        for (unsigned e = 1; e <= n; e++) {
            cf__shape_init(&w[e - 1], f0 + e, cf__shape0(f)->b, cf__shape0(f)->semi);
            w[e - 1].ext = (uint8_t)e;
            w[e - 1].sync = cf__shape0(f)->sync;
            w[e - 1].seg = cf__shape0(f)->seg;
        }
        m->wide_shapes = w;
    }
    return &m->wide_shapes[ext - 1];
}

void cf__filter_free(cf_filter *f, unsigned ntables)
{
    cf_allocator a = *cf__alloc_of(f); /* a copy: the head holds it */
    cf__more *m = f->more;
    if (!(m && m->map))
        for (unsigned i = 0; i < ntables; i++)
            if (f->tables[i].data)
                a.free(a.ctx, f->tables[i].data);
    if (m) {
        if (m->cc)
            cf__cc_free(f, m->cc);
        void *held[] = {m->load, m->search, m->wide_shapes, m->stash, m->tables};
        for (size_t i = 0; i < sizeof held / sizeof held[0]; i++)
            if (held[i])
                a.free(a.ctx, held[i]);
        a.free(a.ctx, m);
    }
    a.free(a.ctx, f);
}

cf_status cf__filter_make(const cf__params *p, const cf_allocator *a, unsigned ntables,
                          uint64_t buckets0, bool with_data, const cf__ops *ops, cf_filter **out)
{
    cf__head h;
    cf__head_layout(p, a, ntables, &h);
    const cf_allocator *use = a ? a : &cf__default_allocator;
    uint8_t *head = use->alloc(use->ctx, h.head_bytes);
    if (!head)
        return CF_ENOMEM;
    cf_filter *f = (cf_filter *)(void *)head;
    memset(f, 0, sizeof *f);
    f->bits = (uint8_t)(h.bits | (p->redisbloom ? CF__B_REDISBLOOM : 0u));
    f->ops = ops;
    if (p->fast_hash)
        cf__ms_words(p->seed, (cf__ms *)(void *)(head + cf__head_at(h.bits, CF__B_FAST_HASH)));
    if (a)
        memcpy(head + cf__head_at(h.bits, CF__B_OWN_ALLOC), a, sizeof *a);
    /* A concurrent filter's shape is its own: its tables are synchronized (table.h). */
    const cf__shape *s0 = cf__shape_first(p);
    if (h.bits & CF__B_OWN_SHAPE) {
        cf__shape *own = (cf__shape *)(void *)(head + cf__head_at(h.bits, CF__B_OWN_SHAPE));
        *own = p->shape;
        own->sync = p->concurrent;
        s0 = own;
    }
    if (h.queue_len)
        cf__search_at(head + cf__head_at(h.bits, CF__B_OWN_SEARCH), h.queue_len, h.mark_bits);
    f->capacity = p->capacity;
    f->k8 = cf__k8_of(p->seed);
    /* cf__resolve and the loaders checked the ranges these fit */
    f->max_kicks = (uint16_t)p->max_kicks;
    f->expansion = (uint16_t)p->expansion;
    f->widen = (uint16_t)p->widen;
    f->last_table = (uint16_t)(p->max_tables - 1u);
    f->fp_bits = (uint8_t)p->shape.f;
    f->tables = &f->t0;
    cf__table_init(&f->t0, NULL, buckets0, s0, NULL);
    /* A concurrent filter has its shared state and its stash from the start: readers
     * never see them appear or go. */
    if (p->concurrent) {
        cf__more *m = cf__more_of(f);
        if (!m || !(m->cc = cf__cc_new(f)) || !cf__stash_room(f)) {
            cf__filter_free(f, 0);
            return CF_ENOMEM;
        }
        f->bits |= CF__B_CONCURRENT;
    }
    if (h.tables_cap && (!cf__more_of(f) || !cf__resize_tables(f, 0, h.tables_cap))) {
        cf__filter_free(f, 0);
        return CF_ENOMEM;
    }
    uint64_t buckets = buckets0;
    for (unsigned i = 0; i < ntables; i++) {
        uint8_t *data = NULL;
        /* The caller checked every size (cf_new through cf__buckets_for, a loader through
         * the file's layout), so only the allocations can fail. */
        const cf__shape *s = s0;
        if (i > 0) {
            cf__mul_u64(buckets, p->expansion, &buckets);
            s = cf__shape_at(f, cf__ext_of(p->shape.f, p->widen, i));
        }
        size_t block = 0;
        if (!s || !cf__table_block(s, buckets, &block) ||
            (with_data && !(data = cf__malloc(f, block)))) {
            cf__filter_free(f, i);
            return CF_ENOMEM;
        }
        cf__table_init(&f->tables[i], data, buckets, s, i ? cf__grown_at(f, i, buckets) : NULL);
    }
    f->ntables = ntables;
    if (p->concurrent)
        cf__cc_ready(f);
    cf__pick_ops(f);
    *out = f;
    return CF_OK;
}

void cf__stash_push(cf_filter *f, cf__stash x)
{
    cf__state_begin(f);
    cf__stash_store(f, f->stash_n, &x);
    cf__stash_count(f, f->stash_n + 1u);
    cf__state_end(f);
}

void cf__stash_release(cf_filter *f)
{
    if (f->more && f->more->stash && !cf__is_cc(f)) {
        cf__mfree(f, f->more->stash);
        f->more->stash = NULL;
        cf__more_trim(f);
    }
}

cf__search *cf__own_search(cf_filter *f, uint32_t budget)
{
    unsigned bits = cf__mark_bits(budget);
    cf__more *m = cf__more_of(f);
    uint8_t *block = m ? cf__malloc(f, cf__search_bytes(budget, bits)) : NULL;
    if (!block) {
        cf__more_trim(f);
        return NULL;
    }
    return m->search = cf__search_at(block, budget, bits);
}

/* Sub-filter n of f (n >= 1), `expansion` times sub-filter n - 1 of `*buckets` buckets:
 * its bucket count into *buckets, its width beyond the first's into *ext and its block's
 * bytes into *bytes; false if it cannot be made (a fixed filter, the limit, a size
 * overflowing). */
static bool cf__append_size(const cf_filter *f, unsigned n, uint64_t *buckets, unsigned *ext,
                            size_t *bytes)
{
    if (f->expansion == 0 || n >= cf__max_tables(f))
        return false;
    *ext = cf__ext_of(f->fp_bits, f->widen, n);
    cf__shape want;
    cf__shape_init(&want, f->fp_bits + *ext, cf__shape0(f)->b, cf__shape0(f)->semi);
    want.sync = cf__shape0(f)->sync;
    want.exact = cf__shape0(f)->exact;
    return cf__mul_u64(*buckets, f->expansion, buckets) &&
           cf__table_bytes(&want, *buckets, bytes) && cf__table_block(&want, *buckets, bytes);
}

/* The block reserved for sub-filter n (cf__reserve_like), taken; else NULL. */
static uint8_t *cf__spare_take(cf__more *m, unsigned n)
{
    cf__spare *sp = m->spare;
    if (!sp || n < sp->first || n - sp->first >= sp->n)
        return NULL;
    uint8_t *block = sp->block[n - sp->first];
    sp->block[n - sp->first] = NULL;
    return block;
}

cf_status cf__table_append(cf_filter *f, cf__table **out)
{
    unsigned n = f->ntables, ext;
    uint64_t buckets = f->tables[n - 1].buckets;
    size_t bytes;
    if (!cf__append_size(f, n, &buckets, &ext, &bytes))
        return CF_FULL;
    /* Every allocation first (`more`, the table, the first wide shapes, a bigger
     * sub-filter array), so that a failure of any leaves the filter as it was. */
    cf__more *m = cf__more_of(f);
    bool new_shapes = ext > 0 && m && !m->wide_shapes;
    uint8_t *data = m ? cf__spare_take(m, n) : NULL;
    if (m && !data)
        data = cf__malloc(f, bytes);
    const cf__shape *s = data ? cf__shape_at(f, ext) : NULL;
    unsigned cap = cf__tables_cap(cf__max_tables(f), n + 1, cf__is_cc(f));
    if (!s || (cap > m->tables_cap && !cf__resize_tables(f, n, cap))) {
        if (data)
            cf__mfree(f, data);
        if (new_shapes && m->wide_shapes) {
            cf__mfree(f, m->wide_shapes);
            m->wide_shapes = NULL;
        }
        cf__more_trim(f);
        return CF_ENOMEM;
    }
    cf__table *t = &f->tables[n];
    cf__table_init(t, data, buckets, s, cf__grown_at(f, n, buckets));
    *out = t;
    return CF_OK;
}

cf_status cf__reserve_like(cf_filter *f, unsigned ntables, unsigned stash_n)
{
    cf__more *m = cf__more_of(f);
    unsigned n0 = f->ntables, extra = ntables > n0 ? ntables - n0 : 0;
    if (!m || (stash_n > f->stash_n && !cf__stash_room(f)))
        return CF_ENOMEM;
    if (extra) {
        /* at most CF_MAX_SUB_FILTERS entries: no overflow */
        cf__spare *sp = cf__malloc(f, sizeof *sp + extra * sizeof sp->block[0]);
        if (!sp)
            return CF_ENOMEM;
        *sp = (cf__spare){.first = n0, .n = 0};
        m->spare = sp;
        uint64_t buckets = f->tables[n0 - 1].buckets;
        unsigned cap = cf__tables_cap(cf__max_tables(f), ntables, cf__is_cc(f)), ext = 0;
        for (unsigned k = n0; k < ntables; k++) {
            size_t bytes;
            /* (the sizes the trial's growth took: they fit) */
            if (!cf__append_size(f, k, &buckets, &ext, &bytes) ||
                !(sp->block[sp->n] = cf__malloc(f, bytes)))
                goto fail;
            sp->n++;
        }
        if ((ext > 0 && !cf__shape_at(f, ext)) ||
            (cap > m->tables_cap && !cf__resize_tables(f, n0, cap)))
            goto fail;
    }
    return CF_OK;
fail:
    cf__reserve_drop(f);
    return CF_ENOMEM;
}

void cf__reserve_drop(cf_filter *f)
{
    cf__more *m = f->more;
    if (!m || !m->spare)
        return;
    for (unsigned k = 0; k < m->spare->n; k++)
        if (m->spare->block[k])
            cf__mfree(f, m->spare->block[k]);
    cf__mfree(f, m->spare);
    m->spare = NULL;
    cf__more_trim(f);
}

void cf__table_publish(cf_filter *f)
{
    cf__state_begin(f);
    cf__publish_ntables(f, f->ntables + 1);
    cf__state_end(f);
}

void cf__truncate(cf_filter *f, unsigned n, unsigned stash_n)
{
    cf__state_begin(f);
    if (f->stash_n > stash_n) {
        cf__stash_count(f, stash_n);
        if (stash_n == 0)
            cf__stash_release(f);
    }
    while (f->ntables > n) {
        cf__publish_ntables(f, f->ntables - 1u);
        cf__mfree(f, f->tables[f->ntables].data);
        f->tables[f->ntables].data = NULL;
    }
    cf__more *m = f->more;
    /* The wide shapes go with the last wider sub-filter, as a copy would have none. */
    if (m && m->wide_shapes && f->tables[f->ntables - 1].shape->ext == 0) {
        cf__mfree(f, m->wide_shapes);
        m->wide_shapes = NULL;
    }
    /* Shrink the sub-filter array to its canonical size (none for one sub-filter); if that
     * allocation fails, the bigger array is kept, which is only a few bytes more. */
    unsigned cap = cf__tables_cap(cf__max_tables(f), f->ntables, cf__is_cc(f));
    if (m && cap < m->tables_cap)
        cf__resize_tables(f, f->ntables, cap);
    cf__state_end(f);
    cf__more_trim(f);
}

void cf__stash_remove(cf_filter *f, unsigned e)
{
    cf__state_begin(f);
    cf__stash_store(f, e, &f->more->stash[f->stash_n - 1u]);
    cf__stash_count(f, f->stash_n - 1u);
    if (f->stash_n == 0)
        cf__stash_release(f);
    cf__state_end(f);
}

cf_status cf__bytes_of(const cf__params *p, const cf_allocator *a, uint64_t buckets,
                       size_t table_bytes, size_t *bytes)
{
    size_t fixed = cf__fixed_bytes(p, a, 1);
    if (p->concurrent) {
        cf__shape synced = p->shape;
        synced.sync = true;
        size_t block;
        if (!cf__table_block(&synced, buckets, &block))
            return CF_EINVAL;
        table_bytes = block;
        fixed += cf__cc_fixed_bytes(&synced, buckets);
    }
    if (table_bytes > SIZE_MAX - fixed)
        return CF_EINVAL;
    *bytes = fixed + table_bytes;
    return CF_OK;
}
