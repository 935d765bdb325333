/*
 * slow.c - the paths the per-shape code of fast.c falls back to, for the plain kinds: an
 * insert whose two buckets are full (older sub-filters, an eviction, growth, the stash),
 * lookups, deletes and counts in every sub-filter and the stash, and the placement of a
 * merged fingerprint.
 */
#include "evict.h"

/* Append a sub-filter `expansion` times the size of the newest and put the key in it. */
static cf_status cf__grow(cf_filter *f, const cf__key *k)
{
    cf__table *t;
    cf_status st = cf__table_append(f, &t);
    if (st != CF_OK)
        return st;
    uint64_t i1, i2;
    cf__buckets(t, k, &i1, &i2);
    /* An empty table always has room. Readers see none of it before the count. */
    cf__put_if_free(t, t->shape, i1, cf__fp_in(k, t));
    cf__table_publish(f);
    return CF_OK;
}

/* An insert whose buckets n1 and n2 in the newest sub-filter are both full: the older
 * sub-filters, then an eviction search, then growth or the stash. Off the fast path. */
static CF__INLINE cf_status cf__insert_rest(cf_filter *f, const cf__key *k, uint64_t n1,
                                            uint64_t n2)
{
    cf__table *newest = &f->tables[f->ntables - 1];
    const cf__shape *s = newest->shape;
    uint32_t fp = cf__fp_in(k, newest);
    uint64_t i1, i2;
    for (unsigned n = f->ntables - 1; n-- > 0;) {
        cf__table *t = &f->tables[n];
        uint32_t fp_t = cf__fp_in(k, t);
        cf__buckets(t, k, &i1, &i2);
        if (cf__table_put(t, i1, fp_t) || cf__table_put(t, i2, fp_t))
            return CF_OK;
    }
    /* When both buckets hold nothing but this fingerprint, no move can help (every
     * resident's other bucket is the other one). It is one key added 2b times, or keys
     * that share fingerprint and bucket pair (common when b * f is small). A growing
     * filter says full: growing for one hot key is how filters balloon. A fixed filter
     * may still stash it, like any key that found no room. */
    bool hot = cf__bucket_all(newest, s, n1, fp) && cf__bucket_all(newest, s, n2, fp);
    if (!hot && cf__evict(f, newest, n1, n2, fp)) {
        newest->items++;
        return CF_OK;
    }
    cf_status st = hot ? CF_FULL : cf__grow(f, k);
    /* The last resort of a filter that cannot grow; never a way round the hot-key rule. */
    if (st == CF_FULL && (!hot || f->expansion == 0) && f->stash_n < CF__STASH_SLOTS) {
        if (!cf__stash_room(f))
            return CF_ENOMEM; /* nothing has changed */
        cf__stash_push(f, (cf__stash){n1, fp, f->ntables - 1});
        return CF_OK;
    }
    return st;
}

/* Whether sub-filter t can hold fingerprints of sub-filter `from` (of a filter of the same
 * seed and first size), and if so, into *i the bucket of t that bucket x of `from` reduces
 * to: t's scale must divide from's, and its fingerprints be no wider (the low bits of
 * from's). Equal scales, the common case, take no division. */
static bool cf__takes(const cf__table *t, const cf__table *from, uint64_t x, uint64_t *i)
{
    uint64_t sf = cf__scale_of(from), st = cf__scale_of(t);
    if (t->shape->ext > from->shape->ext || (sf != st && sf % st != 0))
        return false;
    *i = sf == st ? x : x / (sf / st);
    return true;
}

cf_status cf__place_fp(cf_filter *f, const cf__table *from, uint64_t x, uint32_t fp)
{
    cf__table *newest = NULL;
    uint64_t n1 = 0, n2 = 0;
    uint32_t nfp = 0;
    unsigned nk = 0;
    /* A free slot in the newest sub-filter that takes it, then in older ones, as an insert
     * looks; the first sub-filter takes any. */
    for (unsigned k = f->ntables; k-- > 0;) {
        cf__table *t = &f->tables[k];
        uint64_t i1;
        if (!cf__takes(t, from, x, &i1))
            continue;
        uint32_t fp_t = cf__fp_narrow(fp, from, t->shape->ext);
        uint64_t i2 = cf__alt_of(t, i1, fp_t);
        if (cf__table_put(t, i1, fp_t) || cf__table_put(t, i2, fp_t))
            return CF_OK;
        if (!newest) {
            newest = t;
            nk = k;
            n1 = i1;
            n2 = i2;
            nfp = fp_t;
        }
    }
    /* The insert's rules from here: evict within that sub-filter unless the pair holds
     * nothing but this fingerprint, then grow, then the stash. */
    const cf__shape *s = newest->shape;
    bool hot = cf__bucket_all(newest, s, n1, nfp) && cf__bucket_all(newest, s, n2, nfp);
    if (!hot && cf__evict(f, newest, n1, n2, nfp)) {
        newest->items++;
        return CF_OK;
    }
    cf_status st = CF_FULL;
    cf__table *last = &f->tables[f->ntables - 1];
    uint64_t scale, i = 0;
    /* Growth helps only if the new sub-filter takes it: one no finer than `from`. */
    if (!hot && f->expansion != 0 && cf__mul_u64(cf__scale_of(last), f->expansion, &scale) &&
        cf__scale_of(from) % scale == 0 &&
        cf__ext_of(f->fp_bits, f->widen, f->ntables) <= from->shape->ext) {
        cf__table *t;
        st = cf__table_append(f, &t);
        if (st == CF_OK) {
            (void)cf__takes(t, from, x, &i); /* true: its scale and width are checked above */
            cf__put_if_free(t, t->shape, i, cf__fp_narrow(fp, from, t->shape->ext));
            cf__table_publish(f); /* readers see none of it before this */
            return CF_OK;
        }
    }
    if (st == CF_FULL && (!hot || f->expansion == 0) && f->stash_n < CF__STASH_SLOTS) {
        if (!cf__stash_room(f))
            return CF_ENOMEM;
        cf__stash_push(f, (cf__stash){n1, nfp, nk});
        return CF_OK;
    }
    return st;
}

/* Sub-filters are searched newest first. For delete this is what keeps other keys safe:
 * two keys whose fingerprint and bucket pair coincide in a sub-filter coincide in every
 * older (smaller) one too, because bucket indices are nested (h mod m_k, reduced mod a
 * divisor m_j of m_k). So the copy a delete finds first is one that the key it belongs
 * to can spare: it could have used the deleted key's own copy, further on, instead. */

/* The stash entries of sub-filter `table` that hold the key's fingerprint in its pair:
 * a bit per entry. */
static unsigned cf__stash_match(const cf_filter *f, unsigned table, const cf__key *k, uint64_t i1,
                                uint64_t i2)
{
    unsigned hits = 0;
    uint32_t fp = cf__fp_in(k, &f->tables[table]);
    for (unsigned e = 0; e < f->stash_n; e++) {
        const cf__stash *x = &f->more->stash[e];
        if (x->table == table && x->fp == fp && (x->bucket == i1 || x->bucket == i2))
            hits |= 1u << e;
    }
    return hits;
}

/* A delete freed a slot in sub-filter `table`: move back the stash entries that now fit,
 * so that the stash is empty again as soon as it can be (lookups then skip it). */
static void cf__stash_drain(cf_filter *f, unsigned table)
{
    cf__table *t = &f->tables[table];
    for (unsigned e = f->stash_n; e-- > 0;) {
        cf__stash x = f->more->stash[e];
        if (x.table != table)
            continue;
        uint64_t other = cf__alt_of(t, x.bucket, x.fp);
        if (cf__table_put(t, x.bucket, x.fp) || cf__table_put(t, other, x.fp))
            cf__stash_remove(f, e);
    }
}

bool cf__contains_all(const cf_filter *f, uint64_t h)
{
    cf__key k = cf__key_bits(f->fp_bits, h);
    for (unsigned n = f->ntables; n-- > 0;) {
        const cf__table *t = &f->tables[n];
        uint32_t fp = cf__fp_in(&k, t);
        uint64_t i1, i2;
        cf__buckets(t, &k, &i1, &i2);
        if (cf__bucket_has(t, t->shape, i1, fp) || cf__bucket_has(t, t->shape, i2, fp))
            return true;
        if (CF__UNLIKELY(f->stash_n) && cf__stash_match(f, n, &k, i1, i2))
            return true;
    }
    return false;
}

cf_status cf__insert_rest_h(cf_filter *f, uint64_t h, uint64_t n1, uint64_t n2)
{
    cf__key k = cf__key_bits(f->fp_bits, h);
    return cf__insert_rest(f, &k, n1, n2);
}

cf_status cf__insert_any(cf_filter *f, uint64_t h)
{
    cf__table *t = &f->tables[f->ntables - 1];
    cf__key k = cf__key_bits(f->fp_bits, h);
    uint32_t fp = cf__fp_in(&k, t);
    uint64_t i1, i2;
    cf__buckets(t, &k, &i1, &i2);
    if (cf__table_put(t, i1, fp) || cf__table_put(t, i2, fp))
        return CF_OK;
    return cf__insert_rest_h(f, h, i1, i2);
}

cf_status cf__delete_all(cf_filter *f, uint64_t h)
{
    cf__key k = cf__key_bits(f->fp_bits, h);
    for (unsigned n = f->ntables; n-- > 0;) {
        cf__table *t = &f->tables[n];
        uint32_t fp = cf__fp_in(&k, t);
        uint64_t i[2];
        cf__buckets(t, &k, &i[0], &i[1]);
        for (unsigned w = 0; w < 2; w++) {
            int j = cf__bucket_find(t, t->shape, i[w], fp);
            if (j >= 0) {
                cf__table_set(t, i[w], (unsigned)j, 0);
                t->items--;
                if (CF__UNLIKELY(f->stash_n))
                    cf__stash_drain(f, n);
                return CF_OK;
            }
        }
        unsigned hits = f->stash_n ? cf__stash_match(f, n, &k, i[0], i[1]) : 0;
        if (hits) {
            cf__stash_remove(f, cf__ctz64(hits));
            return CF_OK;
        }
    }
    return CF_NOT_FOUND;
}

uint64_t cf__count_all(const cf_filter *f, uint64_t h)
{
    cf__key key = cf__key_bits(f->fp_bits, h), *k = &key;
    uint64_t total = 0;
    for (unsigned n = 0; n < f->ntables; n++) {
        const cf__table *t = &f->tables[n];
        uint32_t fp = cf__fp_in(k, t);
        uint64_t i1, i2;
        cf__buckets(t, k, &i1, &i2);
        total += cf__bucket_count(t, t->shape, i1, fp) + cf__bucket_count(t, t->shape, i2, fp);
        if (CF__UNLIKELY(f->stash_n))
            total += cf__popcount64(cf__stash_match(f, n, k, i1, i2));
    }
    return total;
}
