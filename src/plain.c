/*
 * plain.c - the plain kinds, without and with CF_CONCURRENT: their cold calls (clear,
 * compact, stats, config, release), which are every kind's defaults, and their rows of
 * the kind table. Their hot paths are fast.c's, their slow paths slow.c's.
 */
#include "plain.h"
#include "concurrent.h"

#include <math.h>

void cf__plain_release(cf_filter *f)
{
    /* A generation of a mapped windowed filter borrows its window's mapping (map_len 0). */
    if (f->more && f->more->map && f->more->map_len)
        cf__unmap(f->more->map, f->more->map_len);
    cf__filter_free(f, cf__ntables_all(f));
}

void cf__plain_clear(cf_filter *f)
{
    cf__hold(f);
    for (unsigned i = 0; i < f->ntables; i++)
        cf__table_clear(&f->tables[i]);
    cf__state_begin(f);
    cf__stash_count(f, 0);
    cf__stash_release(f);
    cf__state_end(f);
    cf__unhold(f);
}

static bool cf__stash_uses(const cf_filter *f, unsigned table)
{
    for (unsigned e = 0; e < f->stash_n; e++)
        if (f->more->stash[e].table == table)
            return true;
    return false;
}

/* Put fp, which sits in bucket x of sub-filter `from` (k, or k - 1 for its stash),
 * into a free slot of its pair in sub-filter k - 1 or an older one (newest first, as an
 * insert would). Bucket indices are nested, so its pair there is x divided by the ratio
 * of the two scales, and that bucket's alternate: the pair its key hashes to. Off the hot
 * path (compaction), so a plain divide. */
static bool cf__move_older(cf_filter *f, unsigned k, const cf__table *from, uint64_t x, uint32_t fp)
{
    for (unsigned n = k; n-- > 0;) {
        cf__table *t = &f->tables[n];
        uint64_t i1 = x / (cf__scale_of(from) / cf__scale_of(t));
        uint32_t fp_t = cf__fp_narrow(fp, from, t->shape->ext); /* the key's fingerprint there */
        if (cf__put_if_free(t, t->shape, i1, fp_t) ||
            cf__put_if_free(t, t->shape, cf__alt_of(t, i1, fp_t), fp_t))
            return true;
    }
    return false;
}

/* Compaction has exclusive access (as documented for concurrent filters too): no reader
 * holds the sub-filter arrays growth replaced, so they go now. The writers are held too,
 * which takes in the item counts kept in a concurrent filter's stripes. */
void cf__compact_begin(cf_filter *f)
{
    cf__hold(f);
    if (cf__is_cc(f))
        cf__cc_free_retired(f);
}

void cf__compact_end(cf_filter *f)
{
    unsigned n = f->ntables;
    while (n > 1 && f->tables[n - 1].items == 0 && !cf__stash_uses(f, n - 1))
        n--;
    cf__truncate(f, n, f->stash_n);
    cf__unhold(f);
}

cf_status cf__plain_compact(cf_filter *f)
{
    cf__compact_begin(f);
    /* Stashed fingerprints first: back into their sub-filter or an older one, where
     * lookups find them without the stash and where they no longer pin a sub-filter. */
    for (unsigned e = f->stash_n; e-- > 0;) {
        cf__stash x = f->more->stash[e];
        if (cf__move_older(f, x.table + 1, &f->tables[x.table], x.bucket, x.fp))
            cf__stash_remove(f, e);
    }
    /* A moved fingerprint keeps the delete rule safe: a key whose pair coincides with
     * its pair in the newer sub-filter coincides with it in the older one too. */
    for (unsigned k = f->ntables; k-- > 1;) {
        cf__table *t = &f->tables[k];
        const cf__shape *s = t->shape;
        for (uint64_t x = 0; x < t->buckets && t->items; x++)
            for (unsigned j = 0; j < s->b; j++) {
                uint32_t fp = cf__slot_get(t, s, x, j);
                if (fp && cf__move_older(f, k, t, x, fp)) {
                    cf__slot_set(t, s, x, j, 0);
                    t->items--;
                }
            }
    }
    cf__compact_end(f);
    return CF_OK;
}

void cf__plain_stats(const cf_filter *f, cf_stats *out)
{
    /* The counts of one moment, which a concurrent filter's lock holds still (growth
     * replaces the sub-filter array, the first's shape read through it too). */
    cf__hold(f);
    const cf__shape *s = cf__shape0(f);
    /* The log of the chance that a lookup misses every sub-filter, over 2b: now, and once
     * every sub-filter is full. Widths only grow from one sub-filter to the next: loads
     * are summed over each run of one width, and a log taken per run. */
    double miss = 0.0, miss_full = 0.0;
    /* A filter still loading reports the filter its header describes, but for `bytes`:
     * only the tables whose chunks have begun to arrive hold memory. */
    for (unsigned n = 0; n < cf__ntables_all(f);) {
        unsigned width = f->tables[n].shape->f;
        double loads = 0.0, count = 0.0;
        for (; n < cf__ntables_all(f) && f->tables[n].shape->f == width; n++) {
            const cf__table *t = &f->tables[n];
            uint64_t slots = t->buckets * s->b;
            out->items += t->items;
            out->buckets += t->buckets;
            out->slots += slots;
            size_t block = 0;
            if (t->data)
                (void)cf__table_block(t->shape, t->buckets, &block); /* sized when made */
            out->bytes += block;
            loads += (double)t->items / (double)slots;
            count += 1.0;
        }
        double m = cf__log_miss(width);
        miss += loads * m;
        miss_full += count * m;
    }
    out->items += f->stash_n;
    out->stashed = f->stash_n;
    out->sub_filters = cf__ntables_all(f);
    out->fingerprint_bits = s->f;
    out->bucket_size = s->b;
    out->capacity = f->capacity;
    out->load_factor = (double)(out->items - out->stashed) / (double)out->slots;
    /* cf_expected_fpr, width by width (0.0 - : an empty filter's rate is +0, not -0) */
    out->fpr = 0.0 - expm1(2.0 * (double)s->b * miss);
    out->fpr_full = 0.0 - expm1(2.0 * (double)s->b * miss_full);
    out->newest_fingerprint_bits = f->tables[cf__ntables_all(f) - 1].shape->f;
    cf__unhold(f);
    /* For a filter that does not widen, a rate of one width at the load of every
     * sub-filter there can be. */
    out->fpr_bound = f->widen
                         ? cf__fpr_bound(s->f, s->b, f->widen, cf__max_tables(f))
                         : cf__expected_fpr(s->f, s->b, f->expansion ? cf__max_tables(f) : 1.0);
}

void cf__plain_config(const cf_filter *f, cf_config *out)
{
    out->capacity = f->capacity;
    const cf__shape *s = cf__shape0(f);
    out->fingerprint_bits = s->f;
    out->bucket_size = s->b;
    out->max_kicks = f->max_kicks;
    out->expansion = f->expansion;
    out->seed = cf__seed(f);
    /* CF_FIXED_SEED so that cf_new(out) keeps seed 0 */
    out->flags = cf__kind_of(f)->flags | (out->seed == 0 ? CF_FIXED_SEED : 0u);
    if (f->bits & CF__B_FAST_HASH)
        out->flags |= CF_FAST_HASH;
    if (s->semi)
        out->flags |= CF_SEMI_SORT;
    /* The mapping, where the default would choose the other one for this capacity. */
    if (s->seg)
        out->flags |= CF_SEGMENTED;
    else if (!cf__is_rb(f) && f->tables[0].buckets >= CF_SEGMENTED_MIN_BUCKETS)
        out->flags |= CF_UNSEGMENTED;
    if (f->expansion != 0 && f->widen == 0)
        out->flags |= CF_GROW_SAME_WIDTH;
    else if (f->expansion != 0) /* which gives the same widening again */
        out->fpr_bound = cf__fpr_bound(s->f, s->b, f->widen, cf__max_tables(f));
    out->allocator = NULL;
    out->max_sub_filters = cf__max_tables(f);
}

/* ------------------------------------------------------------------------------------ */
/* The rows                                                                             */
/* ------------------------------------------------------------------------------------ */

/* A concurrent filter's ops: its first sub-filter's shape's in every state (its lookups
 * check the state themselves). */
static const cf__ops *cf__cc_pick(const cf_filter *f)
{
    return cf__ops_at(f->ops, CF__ROW_CONCURRENT, cf__code_of(cf__shape0(f)));
}

/* The plain filter: every call its own (NULL). */
const cf__kind cf__kind_plain = {.flags = 0};

/* CF_CONCURRENT: writers held by its lock, readers told of changes of state by `meta`. */
const cf__kind cf__kind_plain_cc = {
    .flags = CF_CONCURRENT,
    .count = cf__cc_count,
    .hold = cf__cc_lock,
    .unhold = cf__cc_unlock,
    .state_begin = cf__cc_meta_begin,
    .state_end = cf__cc_meta_end,
    .pick = cf__cc_pick,
};
