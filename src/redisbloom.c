/*
 * redisbloom.c - RedisBloom's layout (CF_REDISBLOOM): its hash, fingerprints and bucket
 * mapping, and its order of work for inserts, evictions, deletes and compaction, so that a
 * filter moved from RedisBloom answers every key as it did there and, as it changes,
 * holds what RedisBloom would have held. Written from RedisBloom's observable behaviour as
 * docs/FORMAT.md ("Hash id 2") states it; none of its code.
 *
 * A key's hash h is MurmurHash64A of its bytes with seed 0; its fingerprint fp is
 * h % 255 + 1; in a sub-filter of m buckets (a power of two) its buckets are h mod m and
 * (h XOR fp * CF__RB_ALT_MULT) mod m. The second is the first's alternate and back again
 * (XOR with one value), and for m <= 128 it may be the first itself. Sub-filters nest: m_j
 * divides m_k for j < k, so reducing a pair of sub-filter k mod m_j gives the key's pair in
 * sub-filter j, and deletes stay safe newest sub-filter first, as in slow.c.
 *
 * The tables are this library's (table.h) with f = 8: a slot is a byte, bucket i's slot j
 * is byte i * b + j, as in RedisBloom's own arrays. Their shapes are exact (table.h): no
 * padding after the last byte, so that a table of a power of two bytes takes that much
 * memory, as in RedisBloom; every access here is a byte's. Nothing here is on the hot
 * paths of the library's own layout: a filter of this layout has these operations in
 * every state.
 */
#include "plain.h"

/* RedisBloom's multiplier for the alternate bucket: fp * this, XORed into the bucket. */
#define CF__RB_ALT_MULT UINT64_C(0x5bd1e995)

/* Fingerprints are h % 255 + 1: 1 to 255, a byte that is never 0 (the empty slot). */
#define CF__RB_FP_VALUES 255u

/* ------------------------------------------------------------------------------------ */
/* Keys and buckets                                                                     */
/* ------------------------------------------------------------------------------------ */

typedef struct cf__rb_key {
    uint64_t h;
    uint64_t flip; /* fp * CF__RB_ALT_MULT: XORed into a bucket, its alternate */
    uint32_t fp;
} cf__rb_key;

static cf__rb_key cf__rb_key_of(uint64_t h)
{
    cf__rb_key k;
    k.h = h;
    k.fp = (uint32_t)(h % CF__RB_FP_VALUES) + 1u;
    k.flip = (uint64_t)k.fp * CF__RB_ALT_MULT;
    return k;
}

/* The key's buckets in sub-filter t (t->buckets a power of two). */
static void cf__rb_buckets(const cf__table *t, const cf__rb_key *k, uint64_t *i1, uint64_t *i2)
{
    uint64_t mask = t->buckets - 1u;
    *i1 = k->h & mask;
    *i2 = (k->h ^ k->flip) & mask;
}

/* The other bucket of fingerprint fp in bucket i of sub-filter t. */
static uint64_t cf__rb_alt(const cf__table *t, uint64_t i, uint32_t fp)
{
    return (i ^ (uint64_t)fp * CF__RB_ALT_MULT) & (t->buckets - 1u);
}

/* Bucket i of sub-filter t: its b slots, a byte each. */
static uint8_t *cf__rb_bucket(const cf__table *t, uint64_t i)
{
    return t->data + i * t->shape->b;
}

/* Copies of fp in bucket i (fp = 0: its empty slots). */
static unsigned cf__rb_bucket_count(const cf__table *t, uint64_t i, uint32_t fp)
{
    const uint8_t *x = cf__rb_bucket(t, i);
    unsigned n = 0;
    for (unsigned j = 0; j < t->shape->b; j++)
        n += x[j] == fp;
    return n;
}

/* The first slot of bucket i holding fp (fp = 0: the first empty one), or -1. */
static int cf__rb_bucket_find(const cf__table *t, uint64_t i, uint32_t fp)
{
    const uint8_t *x = cf__rb_bucket(t, i);
    for (unsigned j = 0; j < t->shape->b; j++)
        if (x[j] == fp)
            return (int)j;
    return -1;
}

/* fp in the first empty slot of bucket i, counted; false if it has none. */
static bool cf__rb_put_if_free(cf__table *t, uint64_t i, uint32_t fp)
{
    int j = cf__rb_bucket_find(t, i, 0);
    if (j < 0)
        return false;
    cf__rb_bucket(t, i)[j] = (uint8_t)fp;
    t->items++;
    return true;
}

/* ------------------------------------------------------------------------------------ */
/* Lookups                                                                              */
/* ------------------------------------------------------------------------------------ */

static bool cf__rb_has(const cf_filter *f, const cf__rb_key *k)
{
    for (unsigned n = f->ntables; n-- > 0;) {
        const cf__table *t = &f->tables[n];
        uint64_t i1, i2;
        cf__rb_buckets(t, k, &i1, &i2);
        if (cf__rb_bucket_find(t, i1, k->fp) >= 0 || cf__rb_bucket_find(t, i2, k->fp) >= 0)
            return true;
    }
    return false;
}

/* Copies of the key's fingerprint in its buckets of every sub-filter; a bucket that is
 * both of its buckets counts once (RedisBloom counts it twice). */
static uint64_t cf__rb_copies(const cf_filter *f, const cf__rb_key *k)
{
    uint64_t total = 0;
    for (unsigned n = 0; n < f->ntables; n++) {
        const cf__table *t = &f->tables[n];
        uint64_t i1, i2;
        cf__rb_buckets(t, k, &i1, &i2);
        total += cf__rb_bucket_count(t, i1, k->fp);
        if (i2 != i1)
            total += cf__rb_bucket_count(t, i2, k->fp);
    }
    return total;
}

/* ------------------------------------------------------------------------------------ */
/* Inserts                                                                              */
/* ------------------------------------------------------------------------------------ */

/* RedisBloom's eviction, in the newest sub-filter t from the key's first bucket i: put fp
 * in slot `victim` of the bucket, take what was there to its other bucket, and stop at the
 * first bucket with a free slot; else the next victim is the next slot, for at most
 * max_kicks moves. If they all fail, they are undone, last first, and nothing changed. */
static bool cf__rb_kick(const cf_filter *f, cf__table *t, uint64_t i, uint32_t fp)
{
    unsigned b = t->shape->b, victim = 0;
    for (unsigned move = 0; move < f->max_kicks; move++) {
        uint8_t *x = cf__rb_bucket(t, i);
        uint32_t out = x[victim];
        x[victim] = (uint8_t)fp;
        fp = out;
        i = cf__rb_alt(t, i, fp);
        if (cf__rb_put_if_free(t, i, fp))
            return true;
        victim = (victim + 1u) % b;
    }
    for (unsigned move = 0; move < f->max_kicks; move++) {
        victim = (victim + b - 1u) % b;
        i = cf__rb_alt(t, i, fp);
        uint8_t *x = cf__rb_bucket(t, i);
        uint32_t back = x[victim];
        x[victim] = (uint8_t)fp;
        fp = back;
    }
    return false;
}

/* The first free slot of the key's buckets, newest sub-filter first; then an eviction in
 * the newest; then a new sub-filter, where its first bucket is free. A failure (CF_FULL,
 * CF_ENOMEM) leaves the filter as it was. */
static cf_status cf__rb_insert(cf_filter *f, const cf__rb_key *k)
{
    uint64_t i1, i2;
    for (unsigned n = f->ntables; n-- > 0;) {
        cf__table *t = &f->tables[n];
        cf__rb_buckets(t, k, &i1, &i2);
        if (cf__rb_put_if_free(t, i1, k->fp) || cf__rb_put_if_free(t, i2, k->fp))
            return CF_OK;
    }
    cf__table *t = &f->tables[f->ntables - 1];
    cf__rb_buckets(t, k, &i1, &i2);
    /* Both buckets hold nothing but this fingerprint: no move can help, and RedisBloom
     * would grow for it, as often as it is added. This library says full instead (one hot
     * key is how RedisBloom filters balloon). */
    unsigned b = t->shape->b;
    if (cf__rb_bucket_count(t, i1, k->fp) == b && cf__rb_bucket_count(t, i2, k->fp) == b)
        return CF_FULL;
    if (cf__rb_kick(f, t, i1, k->fp))
        return CF_OK;
    cf_status st = cf__table_append(f, &t);
    if (st != CF_OK)
        return st;
    cf__rb_buckets(t, k, &i1, &i2);
    cf__rb_put_if_free(t, i1, k->fp); /* an empty table has room */
    cf__table_publish(f);
    return CF_OK;
}

static cf_status cf__rb_delete(cf_filter *f, const cf__rb_key *k)
{
    for (unsigned n = f->ntables; n-- > 0;) {
        cf__table *t = &f->tables[n];
        uint64_t i[2];
        cf__rb_buckets(t, k, &i[0], &i[1]);
        for (unsigned w = 0; w < 2; w++) {
            int j = cf__rb_bucket_find(t, i[w], k->fp);
            if (j >= 0) {
                cf__rb_bucket(t, i[w])[j] = 0;
                t->items--;
                return CF_OK;
            }
        }
    }
    return CF_NOT_FOUND;
}

/* ------------------------------------------------------------------------------------ */
/* Compaction                                                                           */
/* ------------------------------------------------------------------------------------ */

static cf_status cf__rb_compact(cf_filter *f)
{
    cf__compact_begin(f);
    /* Newest sub-filter first, each fingerprint into the first free slot of its buckets in
     * the oldest sub-filter that has one: its bucket there is its bucket here reduced,
     * and so is the alternate (XOR with fp * CF__RB_ALT_MULT, then the smaller mask). */
    for (unsigned k = f->ntables; k-- > 1;) {
        cf__table *t = &f->tables[k];
        for (uint64_t x = 0; x < t->buckets && t->items; x++)
            for (unsigned j = 0; j < t->shape->b; j++) {
                uint8_t *slot = cf__rb_bucket(t, x) + j;
                uint32_t fp = *slot;
                uint64_t other = x ^ (uint64_t)fp * CF__RB_ALT_MULT;
                for (unsigned n = 0; fp && n < k; n++) {
                    cf__table *o = &f->tables[n];
                    uint64_t mask = o->buckets - 1u;
                    if (cf__rb_put_if_free(o, x & mask, fp) ||
                        cf__rb_put_if_free(o, other & mask, fp)) {
                        *slot = 0;
                        t->items--;
                        break;
                    }
                }
            }
    }
    cf__compact_end(f); /* such a filter never stashes */
    return CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* The operations                                                                       */
/* ------------------------------------------------------------------------------------ */

static bool cf__rb_contains(const cf_filter *f, uint64_t h)
{
    cf__rb_key k = cf__rb_key_of(h);
    return cf__rb_has(f, &k);
}

static uint64_t cf__rb_hash(const void *key, size_t len)
{
    return cf__murmur64a(key, len, 0);
}

static bool cf__rb_contains_key(const cf_filter *f, const void *key, size_t len)
{
    return cf__rb_contains(f, cf__rb_hash(key, len));
}

static cf_status cf__rb_add(cf_filter *f, uint64_t h)
{
    cf__rb_key k = cf__rb_key_of(h);
    return cf__rb_insert(f, &k);
}

static cf_status cf__rb_add_key(cf_filter *f, const void *key, size_t len)
{
    return cf__rb_add(f, cf__rb_hash(key, len));
}

static cf_status cf__rb_del(cf_filter *f, uint64_t h)
{
    cf__rb_key k = cf__rb_key_of(h);
    return cf__rb_delete(f, &k);
}

static cf_status cf__rb_del_key(cf_filter *f, const void *key, size_t len)
{
    return cf__rb_del(f, cf__rb_hash(key, len));
}

static void cf__rb_contains_many(const cf_filter *f, const cf__source *src, size_t n, bool *out)
{
    for (size_t j = 0; j < n; j++) {
        if (src->hashes)
            out[j] = cf__rb_contains(f, src->hashes[j]);
        else /* a NULL key with bytes to read is not there, as cf_contains says */
            out[j] = (src->keys[j] || !src->lens[j]) &&
                     cf__rb_contains_key(f, src->keys[j], src->lens[j]);
    }
}

static size_t cf__rb_add_many(cf_filter *f, const uint64_t *hashes, size_t n, unsigned flags,
                              cf_status *status)
{
    size_t added = 0;
    for (size_t j = 0; j < n; j++) {
        cf__rb_key k = cf__rb_key_of(hashes[j]);
        cf_status st =
            (flags & CF_ADD_UNIQUE) && cf__rb_has(f, &k) ? CF_EXISTS : cf__rb_insert(f, &k);
        added += st == CF_OK;
        if (status)
            status[j] = st;
    }
    return added;
}

static uint64_t cf__rb_count(const cf_filter *f, uint64_t h)
{
    cf__rb_key k = cf__rb_key_of(h);
    cf__hold(f);
    uint64_t n = cf__rb_copies(f, &k);
    cf__unhold(f);
    return n;
}

/* CF_CONCURRENT: every call holds the writers' lock, lookups too. This layout's lookups
 * would need the seqlock reads of concurrent.c to run beside writers without it. */
#define CF__RB_LOCKED(ret, name, params, args)                                                     \
    static ret name##_cc params                                                                    \
    {                                                                                              \
        cf__cc_lock(f);                                                                            \
        ret r = name args;                                                                         \
        cf__cc_unlock(f);                                                                          \
        return r;                                                                                  \
    }
CF__RB_LOCKED(bool, cf__rb_contains, (const cf_filter *f, uint64_t h), (f, h))
CF__RB_LOCKED(bool, cf__rb_contains_key, (const cf_filter *f, const void *key, size_t len),
              (f, key, len))
CF__RB_LOCKED(cf_status, cf__rb_add, (cf_filter * f, uint64_t h), (f, h))
CF__RB_LOCKED(cf_status, cf__rb_add_key, (cf_filter * f, const void *key, size_t len),
              (f, key, len))
CF__RB_LOCKED(cf_status, cf__rb_del, (cf_filter * f, uint64_t h), (f, h))
CF__RB_LOCKED(cf_status, cf__rb_del_key, (cf_filter * f, const void *key, size_t len),
              (f, key, len))
CF__RB_LOCKED(size_t, cf__rb_add_many,
              (cf_filter * f, const uint64_t *hashes, size_t n, unsigned flags, cf_status *status),
              (f, hashes, n, flags, status))

static void cf__rb_contains_many_cc(const cf_filter *f, const cf__source *src, size_t n, bool *out)
{
    cf__cc_lock(f);
    cf__rb_contains_many(f, src, n, out);
    cf__cc_unlock(f);
}

/* ------------------------------------------------------------------------------------ */
/* The rows                                                                             */
/* ------------------------------------------------------------------------------------ */

static uint64_t cf__rb_hash_of(const cf_filter *f, const void *key, size_t len)
{
    (void)f;
    return cf__rb_hash(key, len);
}

static const cf__kind cf__kind_rb = {
    .flags = CF_REDISBLOOM,
    .no_merge = "RedisBloom-layout filters do not merge",
    .compact = cf__rb_compact,
    .count = cf__rb_count,
    .hash = cf__rb_hash_of,
    .pick = cf__ops_stay,
};

static const cf__kind cf__kind_rb_cc = {
    .flags = CF_REDISBLOOM | CF_CONCURRENT,
    .serial_writers = true, /* its evictions are RedisBloom's, which cf__plan does not make */
    .no_merge = "RedisBloom-layout filters do not merge",
    .compact = cf__rb_compact,
    .count = cf__rb_count,
    .hash = cf__rb_hash_of,
    .hold = cf__cc_lock,
    .unhold = cf__cc_unlock,
    .state_begin = cf__cc_meta_begin,
    .state_end = cf__cc_meta_end,
    .pick = cf__ops_stay,
};

static const cf__ops cf__rb_ops = {
    cf__rb_contains, cf__rb_contains_key,  cf__rb_add,      cf__rb_add_key, cf__rb_del,
    cf__rb_del_key,  cf__rb_contains_many, cf__rb_add_many, &cf__kind_rb,   NULL};

static const cf__ops cf__rb_ops_cc = {cf__rb_contains_cc,      cf__rb_contains_key_cc,
                                      cf__rb_add_cc,           cf__rb_add_key_cc,
                                      cf__rb_del_cc,           cf__rb_del_key_cc,
                                      cf__rb_contains_many_cc, cf__rb_add_many_cc,
                                      &cf__kind_rb_cc,         NULL};

const cf__ops *cf__rb_ops_for(bool concurrent)
{
    return concurrent ? &cf__rb_ops_cc : &cf__rb_ops;
}

/* ------------------------------------------------------------------------------------ */
/* Raw tables                                                                           */
/* ------------------------------------------------------------------------------------ */

/* f's loading state if it is loading raw tables (cf_table_load_begin), else NULL. */
static cf__loading *cf__rb_raw_load(const cf_filter *f)
{
    cf__loading *load = cf__load_of(f);
    return load && load->raw ? load : NULL;
}

uint64_t cf_table_size(const cf_filter *f, unsigned k)
{
    if (!f || !(cf__kind_of(f)->flags & CF_REDISBLOOM) || k >= cf__ntables_all(f))
        return 0;
    return f->tables[k].buckets * cf__shape0(f)->b; /* a byte a slot: checked when made */
}

/* Is [offset, offset + len) inside sub-filter k's table of a filter of this layout? */
static bool cf__rb_range(const cf_filter *f, unsigned k, uint64_t offset, size_t len)
{
    uint64_t size = cf_table_size(f, k);
    return size != 0 && offset <= size && len <= size - offset;
}

cf_status cf_table_read(const cf_filter *f, unsigned k, uint64_t offset, void *buf, size_t len)
{
    if (!buf && len)
        return CF_EINVAL;
    if (!cf__rb_range(f, k, offset, len))
        return CF_EINVAL;
    if (len == 0)
        return CF_OK;
    cf__hold(f);
    if (f->tables[k].data)
        memcpy(buf, f->tables[k].data + offset, len);
    else /* loading, and none of its bytes arrived yet */
        memset(buf, 0, len);
    cf__unhold(f);
    return CF_OK;
}

cf_status cf__rb_raw_begin(cf_filter *f, unsigned n)
{
    cf__more *m = cf__more_of(f);
    cf__loading *load = m ? cf__malloc(f, sizeof *load) : NULL;
    if (!load)
        return CF_ENOMEM;
    memset(load, 0, sizeof *load);
    load->raw = true;
    load->ntables = n;
    m->load = load;
    f->bits |= CF__B_READ_ONLY;
    cf__state_begin(f); /* none of its sub-filters can be read yet */
    cf__publish_ntables(f, 0);
    cf__state_end(f);
    return CF_OK;
}

/* The next bytes of a filter loading raw tables: table k's memory at its first bytes,
 * zeroed, so that what has not arrived reads as empty slots; published once whole; the
 * filter complete and writable after the last table's last byte. */
static cf_status cf__rb_load_write(cf_filter *f, cf__loading *load, unsigned k, uint64_t offset,
                                   const uint8_t *data, size_t len)
{
    if (k != load->table || offset != load->pos)
        return CF_ECORRUPT; /* not the next bytes */
    cf__table *t = &f->tables[k];
    if (!t->data) {
        size_t bytes = 0;
        (void)cf__table_block(t->shape, t->buckets, &bytes); /* checked when made */
        if (!(t->data = cf__malloc(f, bytes)))
            return CF_ENOMEM;
        memset(t->data, 0, bytes);
    }
    memcpy(t->data + offset, data, len);
    t->items += cf__byte_slots_used(data, len);
    load->pos += len;
    if (load->pos < cf_table_size(f, k))
        return CF_OK;
    load->pos = 0;
    load->table++;
    cf__state_begin(f);
    cf__publish_ntables(f, load->table);
    cf__state_end(f);
    if (load->table == load->ntables) {
        cf__mfree(f, load);
        f->more->load = NULL;
        f->bits &= (uint8_t)~CF__B_READ_ONLY;
        cf__more_trim(f);
    }
    return CF_OK;
}

cf_status cf_table_write(cf_filter *f, unsigned k, uint64_t offset, const void *data, size_t len)
{
    if (!data && len)
        return CF_EINVAL;
    if (!cf__rb_range(f, k, offset, len))
        return CF_EINVAL;
    cf__loading *load = cf__rb_raw_load(f);
    if (load)
        return len ? cf__rb_load_write(f, load, k, offset, data, len) : CF_OK;
    if (cf__read_only(f))
        return CF_EREADONLY;
    if (len == 0)
        return CF_OK;
    cf__table *t = &f->tables[k];
    uint8_t *at = t->data + offset;
    cf__hold(f);
    t->items = t->items - cf__byte_slots_used(at, len) + cf__byte_slots_used(data, len);
    memcpy(at, data, len);
    cf__unhold(f);
    return CF_OK;
}

uint64_t cf_table_loaded(const cf_filter *f)
{
    uint64_t total = 0;
    const cf__loading *load = f ? cf__rb_raw_load(f) : NULL;
    unsigned done = load ? load->table : f ? cf__ntables_all(f) : 0;
    for (unsigned k = 0; k < done; k++)
        total += cf_table_size(f, k);
    return total + (load ? load->pos : 0);
}

cf_status cf_append_sub_filter(cf_filter *f)
{
    if (!f || !(cf__kind_of(f)->flags & CF_REDISBLOOM))
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    cf__hold(f);
    cf__table *t;
    cf_status st = cf__table_append(f, &t);
    if (st == CF_OK)
        cf__table_publish(f);
    cf__unhold(f);
    return st;
}
