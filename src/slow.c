/*
 * slow.c - the lookups, deletes and counts the per-shape code of fast.c falls back to,
 * for the plain kinds: every sub-filter and the stash.
 */
#include "internal.h"

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
