/*
 * concurrent.c - filters made with CF_CONCURRENT: lookups from any number of threads that
 * never block and never miss a key, beside writers that serialize on the filter's lock.
 *
 * Readers take no lock. Each table is cut into stripes of CF__CC_STRIPE_BUCKETS buckets,
 * each with a version counter after the table's bytes: a writer that moves a fingerprint
 * makes it odd, changes one bucket, makes it even again (a sequence lock per stripe; the
 * writes that need no section are said at cf__cc_put_if_free). A reader notes the counters
 * of its two buckets' stripes, reads the buckets, and if it finds the fingerprint answers
 * yes; if not, it checks that both counters are still what they were, and even: then
 * no fingerprint moved into or out of either bucket while it read them. Otherwise it
 * reads again. A key moves only between its own two buckets (an eviction), and a path of
 * moves is made from its free end back (cf__apply_path), so every fingerprint is in one
 * of its buckets at every instant, and a reader that read both while none moved saw it.
 * What lies outside the tables (the sub-filter count and
 * array, the stash) has one more counter of the same kind, `meta`, which a reader checks
 * once it has found nothing anywhere.
 *
 * Memory ordering (C11, the sequence lock of Boehm's "Can seqlocks get along with
 * programming language memory models?"): a writer stores the odd count relaxed, then a
 * release fence, then the data (relaxed atomic stores of whole aligned 64-bit words), then
 * the even count with release; a reader loads the count with acquire, the data relaxed,
 * then an acquire fence, then the count again. If the reader's two loads of the count are
 * equal and even, no store of that writer's section reached its data loads. Every access
 * to table bytes that may race is an atomic access of an aligned word: the writer's plain
 * reads race with nothing (writers hold the lock; readers only read).
 *
 * Memory a reader may hold is not freed while the filter lives: a sub-filter array that
 * growth replaces is kept (cf__cc_retire), the stash keeps its memory, tables are freed
 * only by cf_compact and cf_free, which need exclusive access. A new sub-filter is filled
 * and its entry written before the count that makes readers see it is stored (release).
 */
#include "concurrent.h"

/* The largest bucket in bytes (b = 255 slots of 32 bits), and the bytes a probe may read
 * past a bucket's start: the window a bucket is read into holds the bucket at the bit
 * offset it has in the table, which takes up to 7 buckets' bits before it (see
 * cf__cc_open). */
#define CF__CC_MAX_BUCKET_BITS (CF_MAX_BUCKET_SIZE * CF_MAX_FINGERPRINT_BITS)
#define CF__CC_WINDOW_BYTES    (7u * CF__CC_MAX_BUCKET_BITS / 8u + CF__CC_MAX_BUCKET_BITS / 8u + 16u)

_Static_assert(sizeof(_Atomic uint64_t) == sizeof(uint64_t) &&
                   sizeof(_Atomic uint32_t) == sizeof(uint32_t) &&
                   sizeof(_Atomic uint8_t) == sizeof(uint8_t) &&
                   sizeof(_Atomic(cf__table *)) == sizeof(cf__table *),
               "concurrent filters access plain fields as atomics of the same size");

/* ------------------------------------------------------------------------------------ */
/* Shared state, lock                                                                   */
/* ------------------------------------------------------------------------------------ */

struct cf__cc *cf__cc_new(cf_filter *f)
{
    void *block = cf__malloc(f, sizeof(struct cf__cc) + CF__CC_ISOLATE - 1u);
    if (!block)
        return NULL;
    uintptr_t at = ((uintptr_t)block + CF__CC_ISOLATE - 1u) & ~(uintptr_t)(CF__CC_ISOLATE - 1u);
    struct cf__cc *cc = (struct cf__cc *)(void *)((char *)block + (at - (uintptr_t)block));
    if (pthread_mutex_init(&cc->lock, NULL) != 0) {
        cf__mfree(f, block);
        return NULL;
    }
    atomic_init(&cc->meta, 0u);
    cc->stripes0 = NULL;
    cc->data0 = NULL;
    cc->buckets0 = 0;
    cc->shape0 = NULL;
    cc->nretired = 0;
    cc->block = block;
    return cc;
}

static void cf__cc_drop_retired(cf_filter *f, struct cf__cc *cc)
{
    for (unsigned i = 0; i < cc->nretired; i++)
        cf__mfree(f, cc->retired[i]);
    cc->nretired = 0;
}

void cf__cc_free_retired(cf_filter *f)
{
    cf__cc_drop_retired(f, cf__cc_of(f));
}

void cf__cc_free(cf_filter *f, struct cf__cc *cc)
{
    cf__cc_drop_retired(f, cc);
    (void)pthread_mutex_destroy(&cc->lock);
    cf__mfree(f, cc->block);
}

size_t cf__cc_fixed_bytes(void)
{
    return sizeof(struct cf__cc) + CF__CC_ISOLATE - 1u + CF__STASH_SLOTS * sizeof(cf__stash);
}

bool cf__cc_retire(cf_filter *f, void *array)
{
    struct cf__cc *cc = cf__cc_of(f);
    if (cc->nretired == CF__CC_MAX_RETIRED)
        return false;
    cc->retired[cc->nretired++] = array;
    return true;
}

void cf__cc_lock(const cf_filter *f)
{
    /* It fails only on a mutex it did not make, or (some kinds) one this thread holds:
     * neither happens here. */
    (void)pthread_mutex_lock(&cf__cc_of(f)->lock);
}

void cf__cc_unlock(const cf_filter *f)
{
    (void)pthread_mutex_unlock(&cf__cc_of(f)->lock);
}

void cf__cc_meta_begin(cf_filter *f)
{
    atomic_uint *meta = &cf__cc_of(f)->meta;
    unsigned v = atomic_load_explicit(meta, memory_order_relaxed);
    atomic_store_explicit(meta, v | CF__CC_META_BUSY, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

void cf__cc_meta_end(cf_filter *f)
{
    atomic_uint *meta = &cf__cc_of(f)->meta;
    unsigned v = atomic_load_explicit(meta, memory_order_relaxed);
    unsigned next = (v & ~(CF__CC_META_STEP - 1u)) + CF__CC_META_STEP;
    if (!cf__is_simple(f))
        next |= CF__CC_META_NOT_SIMPLE & ~CF__CC_META_BUSY;
    atomic_store_explicit(meta, next, memory_order_release);
}

void cf__cc_ready(cf_filter *f)
{
    struct cf__cc *cc = cf__cc_of(f);
    cc->data0 = f->tables[0].data;
    cc->buckets0 = f->tables[0].buckets;
    cc->shape0 = f->tables[0].shape;
    cc->stripes0 = cf__cc_stripe(&f->tables[0], 0);
}

/* ------------------------------------------------------------------------------------ */
/* Tables: stripes, and buckets read and written through aligned atomic words            */
/* ------------------------------------------------------------------------------------ */

bool cf__cc_extra_bytes(const cf__shape *s, uint64_t buckets, size_t *bytes)
{
    uint64_t n = cf__cc_stripes_n(buckets), extra;
    size_t size = cf__table_size(s, buckets);
    if (!cf__mul_u64(n, sizeof(atomic_uint), &extra) || extra > SIZE_MAX - 16u)
        return false;
    *bytes = (size_t)extra + CF__CC_TAIL_PAD + (cf__cc_stripes_at(s, buckets) - size);
    return true;
}

/* A bucket copied out of a table: the window's bytes hold the table's bytes from `first`
 * on, at `at`, so that bucket `index` of `view` (a table over the window) is the bucket,
 * at the same bit offset within its first byte. Every probe and write of table.h then
 * works on it unchanged. */
typedef struct cf__cc_window {
    cf__table view;
    uint64_t first; /* the table's byte where the bucket starts */
    size_t at;      /* where that byte is in the window */
    size_t span;    /* bytes the bucket's bits touch */
    uint8_t bytes[CF__CC_WINDOW_BYTES];
} cf__cc_window;

/* Copy bucket `bucket` of t into w: with relaxed atomic loads of the aligned words that
 * hold it and the CF__TABLE_PAD bytes a probe reads past it. */
static void cf__cc_open(const cf__table *t, uint64_t bucket, cf__cc_window *w)
{
    const cf__shape *s = t->shape;
    uint64_t bit = bucket * s->bucket_bits;
    unsigned r = (unsigned)(bit & 7u), j = 0;
    /* The first index j whose bucket starts at the same offset within a byte: there is
     * one below 8, as bit = bucket * bucket_bits is a multiple of gcd(bucket_bits, 8). */
    while ((j * s->bucket_bits & 7u) != r)
        j++;
    w->first = bit >> 3;
    w->at = (j * s->bucket_bits - r) / 8u;
    w->span = (r + s->bucket_bits + 7u) / 8u;
    uint64_t end = w->first + w->span + CF__TABLE_PAD, size = cf__table_size(s, t->buckets);
    if (end > size)
        end = size;
    memset(w->bytes, 0, w->at + w->span + CF__TABLE_PAD);
    _Atomic uint64_t *words = cf__cc_words(t);
    for (uint64_t k = w->first >> 3; k * 8u < end; k++) {
        uint8_t b[8];
        cf__store_le64(b, atomic_load_explicit(&words[k], memory_order_relaxed));
        uint64_t from = k * 8u > w->first ? k * 8u : w->first,
                 to = k * 8u + 8u < end ? k * 8u + 8u : end;
        memcpy(w->bytes + w->at + (from - w->first), b + (from - k * 8u), (size_t)(to - from));
    }
    w->view.data = w->bytes;
    w->view.buckets = j + 1u;
    w->view.items = 0;
    w->view.shape = s;
    w->view.grown = NULL;
}

/* Write the bucket back from w into t (the caller holds the writers' lock): its bytes
 * only, a whole aligned word at a time, inside a section of its stripe's counter. The
 * bits of its first and last bytes that belong to its neighbours are written back as they
 * were: no other writer runs. */
static void cf__cc_commit(cf__table *t, uint64_t bucket, const cf__cc_window *w)
{
    atomic_uint *c = cf__cc_stripe(t, bucket);
    _Atomic uint64_t *words = cf__cc_words(t);
    uint64_t end = w->first + w->span;
    cf__seq_begin(c);
    for (uint64_t k = w->first >> 3; k * 8u < end; k++) {
        uint8_t b[8];
        cf__store_le64(b, atomic_load_explicit(&words[k], memory_order_relaxed));
        uint64_t from = k * 8u > w->first ? k * 8u : w->first,
                 to = k * 8u + 8u < end ? k * 8u + 8u : end;
        memcpy(b + (from - k * 8u), w->bytes + w->at + (from - w->first), (size_t)(to - from));
        atomic_store_explicit(&words[k], cf__load_le64(b), memory_order_relaxed);
    }
    cf__seq_end(c);
}

/* The bits `mask << sh` of aligned word k of t set to v, the other bits written back as
 * they were (the caller holds the writers' lock: no other writer runs). */
static void cf__cc_word_put(cf__table *t, uint64_t k, unsigned sh, uint64_t mask, uint64_t v)
{
    _Atomic uint64_t *w = cf__cc_words(t) + k;
    uint8_t b[8];
    cf__store_le64(b, atomic_load_explicit(w, memory_order_relaxed));
    uint64_t x = (cf__load_le64(b) & ~(mask << sh)) | (v << sh);
    cf__store_le64(b, x);
    uint64_t raw;
    memcpy(&raw, b, sizeof raw);
    atomic_store_explicit(w, raw, memory_order_relaxed);
}

/* Slot `slot` of bucket `bucket` of t (not semi-sorted) set to fp: the one or two aligned
 * words that hold its bits, each stored whole, the bits of every other slot as they
 * were. A reader that loads a word before or after sees the other slots the same. */
static void cf__cc_slot_put(cf__table *t, uint64_t bucket, unsigned slot, uint32_t fp)
{
    const cf__shape *s = t->shape;
    uint64_t bit = cf__slot_bit(s, bucket, slot);
    unsigned sh = (unsigned)(bit & 63u);
    cf__cc_word_put(t, bit >> 6, sh, s->fp_mask, fp);
    if (sh + s->f > 64u) /* the slot's high bits are the next word's low bits */
        cf__cc_word_put(t, (bit >> 6) + 1u, 0, s->fp_mask >> (64u - sh), fp >> (64u - sh));
}

/* Which writes need a section of the bucket's stripe counter. A reader that finds nothing
 * must be able to tell that a fingerprint moved between its buckets while it read, and a
 * count must not see a moving one twice: every step of a move (cf__cc_slot_set with a
 * fingerprint: the copy into the free end of an eviction path, each overwrite back along
 * it) is a section. A new fingerprint put into a free slot (cf__cc_put_if_free), or a
 * slot cleared for a delete, changes what a lookup of that one key finds, while its add
 * or delete is under way, and no other slot's bits: no section, so that readers beside a
 * writer rarely see a counter change. A semi-sorted bucket is encoded as a whole, so that
 * any change rewrites the other fingerprints' bits: every write is a section, through a
 * window. */
bool cf__cc_put_if_free(cf__table *t, uint64_t bucket, uint32_t fp)
{
    const cf__shape *s = t->shape;
    if (s->semi) {
        cf__cc_window w;
        cf__cc_open(t, bucket, &w);
        if (!cf__put_if_free(&w.view, s, w.view.buckets - 1u, fp))
            return false;
        cf__cc_commit(t, bucket, &w);
        t->items++;
        return true;
    }
    /* Plain reads of the table race with nothing: only writers write it, and they hold
     * the lock. */
    int j = cf__bucket_find(t, s, bucket, 0);
    if (j < 0)
        return false;
    cf__cc_slot_put(t, bucket, (unsigned)j, fp);
    t->items++;
    return true;
}

void cf__cc_slot_set(cf__table *t, uint64_t bucket, unsigned slot, uint32_t fp)
{
    const cf__shape *s = t->shape;
    if (s->semi) {
        cf__cc_window w;
        cf__cc_open(t, bucket, &w);
        cf__slot_set(&w.view, s, w.view.buckets - 1u, slot, fp);
        cf__cc_commit(t, bucket, &w);
        return;
    }
    if (fp == 0) {
        cf__cc_slot_put(t, bucket, slot, fp);
        return;
    }
    atomic_uint *c = cf__cc_stripe(t, bucket);
    cf__seq_begin(c);
    cf__cc_slot_put(t, bucket, slot, fp);
    cf__seq_end(c);
}

void cf__cc_table_clear(cf__table *t)
{
    /* Bucket by bucket, each under its stripe's counter: a reader sees every bucket
     * before or after, as with deletes. Empty buckets are skipped. Slots cleared in
     * ascending order meet every fingerprint of a semi-sorted bucket too (table.h). */
    const cf__shape *s = t->shape;
    for (uint64_t x = 0; x < t->buckets; x++) {
        bool any = false;
        for (unsigned j = 0; j < s->b && !any; j++)
            any = cf__slot_get(t, s, x, j) != 0;
        if (!any)
            continue;
        cf__cc_window w;
        cf__cc_open(t, x, &w);
        for (unsigned j = 0; j < s->b; j++)
            cf__slot_set(&w.view, s, w.view.buckets - 1u, j, 0);
        cf__cc_commit(t, x, &w);
    }
    t->items = 0;
}

/* ------------------------------------------------------------------------------------ */
/* Readers                                                                              */
/* ------------------------------------------------------------------------------------ */

unsigned cf__cc_ntables(const cf_filter *f)
{
    return atomic_load_explicit((_Atomic uint32_t *)(uintptr_t)&f->ntables, memory_order_acquire);
}

/* The filter's sub-filters as a reader sees them: the count first (acquire), so that the
 * array it then loads holds every entry the count covers. */
static unsigned cf__cc_tables(const cf_filter *f, const cf__table **tables)
{
    unsigned n = cf__cc_ntables(f);
    *tables =
        atomic_load_explicit((_Atomic(cf__table *) *)(uintptr_t)&f->tables, memory_order_acquire);
    return n;
}

/* Copies of fp in bucket `bucket` of t, read in one piece: a bucket that fits the 8
 * bytes from its first byte (s->bucket_mask) as one word, any other through a window. */
static unsigned cf__cc_bucket_count(const cf__table *t, uint64_t bucket, uint32_t fp)
{
    const cf__shape *s = t->shape;
    if (s->bucket_mask) {
        uint64_t word = cf__cc_bucket_word(t, bucket * s->bucket_bits, s->bucket_mask);
        return cf__popcount64(s->semi ? cf__semi_match1_word(s, word, fp)
                                      : cf__lanes_equal(s, word, fp));
    }
    cf__cc_window w;
    cf__cc_open(t, bucket, &w);
    return cf__bucket_count(&w.view, t->shape, w.view.buckets - 1u, fp);
}

/* Copies of the key in sub-filter t's buckets i1 and i2 (one bucket if they are the
 * same), read until both stripes were still, and even, across the reads. With stop_at_one
 * it returns as soon as it finds one copy, without that check (a copy it saw is one the
 * filter held, or a fingerprint in the middle of a write, which is at worst a false
 * positive). */
static unsigned cf__cc_pair_count(const cf__table *t, uint64_t i1, uint64_t i2, uint32_t fp,
                                  bool stop_at_one)
{
    atomic_uint *c1 = cf__cc_stripe(t, i1), *c2 = cf__cc_stripe(t, i2);
    for (;;) {
        unsigned v1 = atomic_load_explicit(c1, memory_order_acquire);
        unsigned v2 = atomic_load_explicit(c2, memory_order_acquire);
        unsigned n = cf__cc_bucket_count(t, i1, fp);
        if (n && stop_at_one)
            return n;
        if (i2 != i1)
            n += cf__cc_bucket_count(t, i2, fp);
        if (n && stop_at_one)
            return n;
        if (cf__seq_same(c1, v1) && cf__seq_same(c2, v2))
            return n;
    }
}

/* Stash entries of sub-filter `table` that hold fp in the pair i1, i2. */
static unsigned cf__cc_stash_count(const cf_filter *f, unsigned table, uint32_t fp, uint64_t i1,
                                   uint64_t i2)
{
    unsigned n =
        atomic_load_explicit((_Atomic uint8_t *)(uintptr_t)&f->stash_n, memory_order_relaxed);
    const cf__stash *stash = f->more->stash;
    unsigned hits = 0;
    for (unsigned e = 0; e < n && e < CF__STASH_SLOTS; e++) {
        uint64_t b = atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)&stash[e].bucket,
                                          memory_order_relaxed);
        uint32_t x =
            atomic_load_explicit((_Atomic uint32_t *)(uintptr_t)&stash[e].fp, memory_order_relaxed);
        uint32_t tt = atomic_load_explicit((_Atomic uint32_t *)(uintptr_t)&stash[e].table,
                                           memory_order_relaxed);
        hits += tt == table && x == fp && (b == i1 || b == i2);
    }
    return hits;
}

/* Copies of key h in the whole filter (stop_at_one: 0 or 1, as soon as one is seen),
 * from every sub-filter and the stash as they were at one instant. */
static uint64_t cf__cc_count_h(const cf_filter *f, uint64_t h, bool stop_at_one)
{
    atomic_uint *meta = &cf__cc_of(f)->meta;
    cf__key k = cf__key_bits(f->fp_bits, h);
    for (;;) {
        unsigned m = atomic_load_explicit(meta, memory_order_acquire);
        const cf__table *tables;
        unsigned n = cf__cc_tables(f, &tables);
        uint64_t count = 0;
        for (unsigned i = n; i-- > 0;) {
            const cf__table *t = &tables[i];
            uint32_t fp = cf__fp_in(&k, t);
            uint64_t i1, i2;
            cf__buckets(t, &k, &i1, &i2);
            count += cf__cc_pair_count(t, i1, i2, fp, stop_at_one);
            count += cf__cc_stash_count(f, i, fp, i1, i2);
            if (count && stop_at_one)
                return 1;
        }
        if (cf__seq_same(meta, m))
            return count;
    }
}

uint64_t cf__cc_count(const cf_filter *f, uint64_t h)
{
    return cf__cc_count_h(f, h, false);
}

bool cf__cc_contains(const cf_filter *f, uint64_t h)
{
    return cf__cc_count_h(f, h, true) != 0;
}

/* ------------------------------------------------------------------------------------ */
/* Writers                                                                              */
/* ------------------------------------------------------------------------------------ */

void cf__cc_set_tables(cf_filter *f, cf__table *tables)
{
    atomic_store_explicit((_Atomic(cf__table *) *)(void *)&f->tables, tables, memory_order_release);
}

void cf__cc_set_ntables(cf_filter *f, unsigned n)
{
    atomic_store_explicit((_Atomic uint32_t *)(void *)&f->ntables, n, memory_order_release);
}

void cf__cc_stash_set(cf_filter *f, unsigned e, const cf__stash *x)
{
    cf__stash *to = &f->more->stash[e];
    atomic_store_explicit((_Atomic uint64_t *)(void *)&to->bucket, x->bucket, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint32_t *)(void *)&to->fp, x->fp, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint32_t *)(void *)&to->table, x->table, memory_order_relaxed);
}

void cf__cc_stash_n(cf_filter *f, unsigned n)
{
    atomic_store_explicit((_Atomic uint8_t *)(void *)&f->stash_n, (uint8_t)n, memory_order_relaxed);
}

/* The insert of cf_add_hash, under the lock: the newest sub-filter's two buckets, then
 * the slow path (filter.c), which writes through the calls above. */
static cf_status cf__cc_insert(cf_filter *f, uint64_t h)
{
    cf__table *t = &f->tables[f->ntables - 1];
    cf__key k = cf__key_bits(f->fp_bits, h);
    uint32_t fp = cf__fp_in(&k, t);
    uint64_t i1, i2;
    cf__buckets(t, &k, &i1, &i2);
    if (cf__cc_put_if_free(t, i1, fp) || cf__cc_put_if_free(t, i2, fp))
        return CF_OK;
    return cf__cc_insert_rest_h(f, h, i1, i2);
}

cf_status cf__cc_add(cf_filter *f, uint64_t h)
{
    cf__cc_lock(f);
    cf_status st = cf__cc_insert(f, h);
    cf__cc_unlock(f);
    return st;
}

cf_status cf__cc_add_key(cf_filter *f, const void *key, size_t len)
{
    return cf__cc_add(f, cf__hash_key(f, key, len));
}

cf_status cf__cc_del(cf_filter *f, uint64_t h)
{
    cf__cc_lock(f);
    cf_status st = cf__cc_delete_all(f, h);
    cf__cc_unlock(f);
    return st;
}

cf_status cf__cc_del_key(cf_filter *f, const void *key, size_t len)
{
    return cf__cc_del(f, cf__hash_key(f, key, len));
}

/* In order, under one hold of the lock, so that CF_ADD_UNIQUE's check and the insert
 * after it are one step for other writers too. */
size_t cf__cc_add_many(cf_filter *f, const uint64_t *hashes, size_t n, unsigned flags,
                       cf_status *status)
{
    size_t added = 0;
    cf__cc_lock(f);
    for (size_t j = 0; j < n; j++) {
        cf_status st = (flags & CF_ADD_UNIQUE) && f->ops->contains(f, hashes[j])
                           ? CF_EXISTS
                           : cf__cc_insert(f, hashes[j]);
        added += st == CF_OK;
        if (status)
            status[j] = st;
    }
    cf__cc_unlock(f);
    return added;
}
