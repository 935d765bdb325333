/*
 * plain.h - the plain kinds' cold calls (plain.c; the count is slow.c's), which are every
 * kind's defaults, and the dispatch of every kind's cold calls for the files above the
 * plain kinds: each asks the filter's kind table (internal.h, "Kinds") and takes the
 * plain filter's call where the kind has none of its own.
 */
#ifndef CF_PLAIN_H
#define CF_PLAIN_H

#include "internal.h"

/* The plain filter's cold calls (plain.c). */
CF__HIDDEN void cf__plain_release(cf_filter *f);
CF__HIDDEN void cf__plain_clear(cf_filter *f);
CF__HIDDEN cf_status cf__plain_compact(cf_filter *f);
CF__HIDDEN void cf__plain_stats(const cf_filter *f, cf_stats *out);
CF__HIDDEN void cf__plain_config(const cf_filter *f, cf_config *out);
/* Every compaction's start (the writers held, and the sub-filter arrays growth replaced
 * freed: no reader holds them, compaction taking exclusive access) and end (the newest
 * sub-filters left empty dropped, the writers let go), for the kinds' own compactions. */
CF__HIDDEN void cf__compact_begin(cf_filter *f);
CF__HIDDEN void cf__compact_end(cf_filter *f);

static inline void cf__release(cf_filter *f)
{
    const cf__kind *k = cf__kind_of(f);
    (k->release ? k->release : cf__plain_release)(f);
}

static inline void cf__clear(cf_filter *f)
{
    const cf__kind *k = cf__kind_of(f);
    (k->clear ? k->clear : cf__plain_clear)(f);
}

static inline cf_status cf__compact(cf_filter *f)
{
    const cf__kind *k = cf__kind_of(f);
    return (k->compact ? k->compact : cf__plain_compact)(f);
}

static inline uint64_t cf__count(const cf_filter *f, uint64_t h)
{
    const cf__kind *k = cf__kind_of(f);
    return (k->count ? k->count : cf__count_all)(f, h);
}

/* The filter's hash of a key: its kind's, else XXH3 with its seed (cf__hash_key, which
 * the per-shape code of fast.c calls directly). */
static inline uint64_t cf__hash(const cf_filter *f, const void *key, size_t len)
{
    const cf__kind *k = cf__kind_of(f);
    return CF__UNLIKELY(k->hash != NULL) ? k->hash(f, key, len) : cf__hash_key(f, key, len);
}

static inline void cf__stats(const cf_filter *f, cf_stats *out)
{
    const cf__kind *k = cf__kind_of(f);
    (k->stats ? k->stats : cf__plain_stats)(f, out);
}

static inline void cf__config(const cf_filter *f, cf_config *out)
{
    const cf__kind *k = cf__kind_of(f);
    (k->config ? k->config : cf__plain_config)(f, out);
}

#endif /* CF_PLAIN_H */
