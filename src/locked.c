/*
 * locked.c - the writers of concurrent filters (CF_CONCURRENT): each takes the filter's
 * lock around filter.c's insert or delete, which write through the table layer's
 * synchronized mode and mark each change of state, so that lookups beside them
 * (concurrent.c, fast.c) never block and never miss a key.
 */
#include "internal.h"

cf_status cf__cc_add(cf_filter *f, uint64_t h)
{
    cf__cc_lock(f);
    cf_status st = cf__insert_any(f, h);
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
    cf_status st = cf__delete_all(f, h);
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
                           : cf__insert_any(f, hashes[j]);
        added += st == CF_OK;
        if (status)
            status[j] = st;
    }
    cf__cc_unlock(f);
    return added;
}
