/*
 * filter.c - the cuckoo filter: hashing keys, inserting with eviction, growth across
 * sub-filters, lookups, deletes and the public API around them.
 */
#include "evict.h"

#include <math.h>
#include <stdint.h>

/* The largest first sub-filter of RedisBloom's layout that cf_new makes (a power of two
 * that cf__table_bytes then checks against the memory limits). */
#define CF__RB_MAX_BUCKETS (UINT64_C(1) << 62)

/* ------------------------------------------------------------------------------------ */
/* Configuration                                                                        */
/* ------------------------------------------------------------------------------------ */

static unsigned cf__or_default(unsigned v, unsigned def)
{
    return v ? v : def;
}

/* The flags cf_config.flags may have. */
#define CF__CONFIG_FLAGS                                                                           \
    (CF_FIXED_SEED | CF_GROW_SAME_WIDTH | CF_SEMI_SORT | CF_CONCURRENT | CF_REDISBLOOM)

/* The end of the last field of each struct this library knows: a caller's struct may be
 * larger (a later header's), and then the bytes past these must be 0. */
#define CF__CONFIG_END (offsetof(cf_config, window) + sizeof(uint64_t))
#define CF__STATS_END  (offsetof(cf_stats, generations_used) + sizeof(unsigned))
_Static_assert(CF__CONFIG_END == sizeof(cf_config),
               "a field appended to cf_config: move CF__CONFIG_END");
_Static_assert(CF__STATS_END == sizeof(cf_stats),
               "a field appended to cf_stats: move CF__STATS_END");

/* Copy *from (`end` bytes that this library fills) into a caller's struct of `size`
 * bytes: what fits, and zeros past `end` for the fields of a later header. */
static void cf__struct_out(void *out, size_t size, const void *from, size_t end)
{
    memcpy(out, from, size < end ? size : end);
    if (size > end)
        memset((unsigned char *)out + end, 0, size - end);
}

/* The narrowest fingerprint whose false-positive rate at full load of `tables` tables (a
 * windowed filter's generations, else 1) is at most `target`; 0 if none is (target below
 * what 32 bits give, or not in (0, 1)). */
static unsigned cf__bits_for_fpr(double target, unsigned b, unsigned tables)
{
    if (!(target > 0.0 && target < 1.0))
        return 0;
    for (unsigned f = CF_MIN_FINGERPRINT_BITS; f <= CF_MAX_FINGERPRINT_BITS; f++)
        if (cf_expected_fpr(f, b, (double)tables) <= target)
            return f;
    return 0;
}

/* log(1 - p) for a stored and a probed f-bit fingerprint matching with probability p (see
 * cf_expected_fpr): a lookup misses a sub-filter of f-bit fingerprints at load a with
 * probability exp(2 b a log(1 - p)). */
static double cf__log_miss(unsigned f)
{
    int w = (int)f;
    return log1p(-ldexp(ldexp(1.0, w) + 2.0, -2 * w));
}

/* The false-positive rate of `tables` sub-filters at full load, the first of f-bit
 * fingerprints and each next one cf__ext_of bits wider: cf_stats.fpr_bound. miss[e] is
 * cf__log_miss(f + e). Sub-filters are counted by width: those of at most e extra bits
 * are the k with k * widen <= 256 e. */
static double cf__bound_of(const double *miss, unsigned f, unsigned b, unsigned widen,
                           unsigned tables)
{
    double sum = 0.0;
    uint64_t done = 0; /* sub-filters counted so far */
    for (unsigned e = 0; e <= 32u - f && done < tables; e++) {
        uint64_t upto = widen == 0 || e == 32u - f ? tables : (uint64_t)256u * e / widen + 1u;
        upto = upto < tables ? upto : tables;
        sum += (double)(upto - done) * miss[e];
        done = upto;
    }
    return -expm1(2.0 * (double)b * sum);
}

/* The narrowest widening (extra bits per sub-filter, in 1/256 bits) that keeps the rate
 * of p's max_tables sub-filters at full load within `bound`; false if even 32-bit
 * fingerprints from the second sub-filter on cannot. Bound 0 asks for twice the first
 * sub-filter's rate, or where that cannot be had (fingerprints too wide to widen much),
 * for the most widening there is. The rate falls as the widening grows, so a bisection
 * finds it. */
static bool cf__widen_for(cf__params *p, double bound)
{
    double miss[33];
    unsigned f = p->shape.f, b = p->shape.b, lo = 1, hi = 256u * (32u - f);
    for (unsigned e = 0; e <= 32u - f; e++)
        miss[e] = cf__log_miss(f + e);
    double first = cf_expected_fpr(f, b, 1.0);
    bool by_default = bound == 0.0;
    if (by_default) /* twice the first's, or for the shortest fingerprints halfway to 1 */
        bound = 2.0 * first < 1.0 ? 2.0 * first : (1.0 + first) / 2.0;
    else if (!(bound > first && bound < 1.0))
        return false;
    if (hi == 0) { /* 32 bits: nothing to widen */
        p->widen = 0;
        return by_default;
    }
    double most = cf__bound_of(miss, f, b, hi, p->max_tables);
    if (!(bound > first) || most > bound) {
        if (!by_default)
            return false;
        /* The rate of the most widening; the bisection then finds the narrowest widening
         * that gives it (several may give the same widths), so that a filter's own bound
         * (cf_get_config) makes the same widening again. */
        bound = most;
    }
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (cf__bound_of(miss, f, b, mid, p->max_tables) <= bound)
            hi = mid;
        else
            lo = mid + 1;
    }
    p->widen = lo;
    return true;
}

/* cf_stats.fpr_bound of a widening filter whose first sub-filter has f-bit fingerprints
 * in buckets of b, for `tables` sub-filters (a few microseconds: computed when asked). */
static double cf__fpr_bound(unsigned f, unsigned b, unsigned widen, unsigned tables)
{
    double miss[33];
    for (unsigned e = 0; e <= 32u - f; e++)
        miss[e] = cf__log_miss(f + e);
    return cf__bound_of(miss, f, b, widen, tables);
}

/* x rounded up to a power of two (x <= 2^63). */
static uint64_t cf__pow2_up(uint64_t x)
{
    uint64_t p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

/* RedisBloom's layout: its fingerprints, its default bucket size and MAXITERATIONS, no
 * seed, no widening, expansion a power of two (cf__resolve has checked the common
 * ranges). */
/* The reasons cf_config_check gives (one line each; the header's config comments are
 * the full rules). */
static cf_status cf__bad(const char **why, const char *reason)
{
    if (why)
        *why = reason;
    return CF_EINVAL;
}

static cf_status cf__resolve_rb(const cf_config *c, cf__params *p, const char **why)
{
    if ((c->flags & CF_SEMI_SORT) || c->target_fpr != 0.0 || c->fpr_bound != 0.0 || c->seed != 0 ||
        (c->fingerprint_bits != 0 && c->fingerprint_bits != CF__RB_FP_BITS))
        return cf__bad(why, "RedisBloom's layout has its own hash and 8-bit fingerprints of "
                            "one width: no seed, semi-sorting, target rate, rate bound or "
                            "other width");
    cf__shape_init(&p->shape, CF__RB_FP_BITS, cf__or_default(c->bucket_size, CF__RB_BUCKET), false);
    p->max_kicks = cf__or_default(c->max_kicks, CF__RB_KICKS);
    p->expansion = p->expansion ? (unsigned)cf__pow2_up(p->expansion) : 0u; /* <= 32768 */
    p->widen = 0;
    p->redisbloom = true;
    return CF_OK;
}

/* A config with its defaults applied and checked; no sizing yet (and no seed drawn). */
static cf_status cf__resolve(const cf_config *c, cf__params *p, const char **why)
{
    if (c->capacity == 0)
        return cf__bad(why, "capacity must be at least 1");
    if ((c->flags & ~(unsigned)CF__CONFIG_FLAGS) != 0)
        return cf__bad(why, "unknown flags");
    /* A window: 2 or more generations (one would forget everything at each advance) of
     * one size (window.c says why), and RedisBloom's layout has none. */
    bool windowed = c->generations != 0;
    if (windowed && (c->generations < 2 || c->generations > CF_MAX_GENERATIONS))
        return cf__bad(why, "generations must be 2 to 4096 (or 0: no window)");
    if (windowed && (c->expansion != 0 || (c->flags & CF_REDISBLOOM)))
        return cf__bad(why, "a windowed filter's generations keep one size and this "
                            "library's layout: no expansion or RedisBloom layout");
    if (!windowed && c->window != 0)
        return cf__bad(why, "a window length needs generations");
    if (!cf__allocator_ok(c->allocator))
        return cf__bad(why, "an allocator needs both its functions");
    p->redisbloom = false;
    unsigned b = cf__or_default(c->bucket_size, CF_DEFAULT_BUCKET_SIZE);
    unsigned f = c->fingerprint_bits;
    if (b > CF_MAX_BUCKET_SIZE)
        return cf__bad(why, "bucket size must be 1 to 255");
    if (c->target_fpr != 0.0 && f != 0)
        return cf__bad(why, "a target rate and a fingerprint width are alternatives: give one");
    if (c->target_fpr != 0.0 &&
        (f = cf__bits_for_fpr(c->target_fpr, b, windowed ? c->generations : 1u)) == 0)
        return cf__bad(why, "the target rate must be in (0, 1) and reachable with 32-bit "
                            "fingerprints in buckets of this size");
    f = cf__or_default(f, CF_DEFAULT_FINGERPRINT_BITS);
    p->capacity = c->capacity;
    p->seed = c->seed;
    p->max_kicks = cf__or_default(c->max_kicks, CF_DEFAULT_MAX_KICKS);
    p->max_tables = cf__or_default(c->max_sub_filters, CF_DEFAULT_MAX_SUB_FILTERS);
    p->expansion = c->expansion;
    if (f < CF_MIN_FINGERPRINT_BITS || f > CF_MAX_FINGERPRINT_BITS)
        return cf__bad(why, "fingerprint width must be 4 to 32 bits");
    if (p->max_kicks > CF_MAX_MAX_KICKS)
        return cf__bad(why, "the eviction budget must be 1 to 65535");
    if (p->max_tables > CF_MAX_SUB_FILTERS)
        return cf__bad(why, "the sub-filter limit must be 1 to 65536");
    if (p->expansion > CF_MAX_EXPANSION)
        return cf__bad(why, "expansion must be at most 32768");
    p->concurrent = (c->flags & CF_CONCURRENT) != 0;
    if (c->flags & CF_REDISBLOOM)
        return cf__resolve_rb(c, p, why);
    bool semi = (c->flags & CF_SEMI_SORT) != 0;
    if (semi && b != CF__SEMI_BUCKET)
        return cf__bad(why, "semi-sorted buckets have 4 slots");
    cf__shape_init(&p->shape, f, b, semi);
    /* Growing filters widen their fingerprints unless told not to (a bound is then an
     * error, as it is for a filter that cannot grow). */
    p->widen = 0;
    bool same_width = p->expansion == 0 || (c->flags & CF_GROW_SAME_WIDTH);
    if (same_width && c->fpr_bound != 0.0)
        return cf__bad(why, "a rate bound is for growing filters that widen their fingerprints");
    if (!same_width && !cf__widen_for(p, c->fpr_bound))
        return cf__bad(why, "the rate bound must exceed the first sub-filter's rate at full "
                            "load, be below 1, and be reachable with 32-bit fingerprints");
    return CF_OK;
}

/* What cf_new, cf_bytes_needed and cf_config_resolve start from: a caller's config of
 * `size` bytes copied into *c (the fields it lacks read 0, their defaults; bytes past the
 * fields this library knows must be 0, since ignoring a field the caller set would give
 * a filter other than the one asked for), resolved into *p and sized. */
static cf_status cf__config_sized(const cf_config *config, size_t size, cf_config *c, cf__params *p,
                                  uint64_t *buckets, size_t *table_bytes, const char **why)
{
    if (!config)
        return cf__bad(why, "the config is NULL");
    if (size < CF_CONFIG_SIZE_MIN)
        return cf__bad(why, "the config is smaller than the oldest cf_config");
    memset(c, 0, sizeof *c);
    memcpy(c, config, size < CF__CONFIG_END ? size : CF__CONFIG_END);
    for (size_t i = CF__CONFIG_END; i < size; i++)
        if (((const unsigned char *)config)[i] != 0)
            return cf__bad(why, "the config sets fields this library does not know");
    cf_status st = cf__resolve(c, p, why);
    if (st != CF_OK)
        return st;
    bool ok;
    if (p->redisbloom) { /* RedisBloom's size: capacity / b rounded up to a power of two */
        uint64_t want = p->capacity / p->shape.b;
        *buckets = want > CF__RB_MAX_BUCKETS ? 0 : cf__pow2_up(want < 2 ? 2 : want);
        ok = *buckets && cf__table_bytes(&p->shape, *buckets, table_bytes);
    } else {
        ok = cf__buckets_for(&p->shape, p->capacity, buckets, table_bytes);
    }
    return ok ? CF_OK
              : cf__bad(why, "the capacity is too large for a table, or for what this "
                             "fingerprint width and bucket size can tell apart");
}

cf_status cf_bytes_needed_sized(const cf_config *config, size_t config_size, size_t *bytes)
{
    cf_config c;
    cf__params p;
    uint64_t buckets;
    size_t table_bytes;
    if (!bytes)
        return CF_EINVAL;
    cf_status st = cf__config_sized(config, config_size, &c, &p, &buckets, &table_bytes, NULL);
    if (st != CF_OK)
        return st;
    if (c.generations)
        return cf__window_bytes(&c, &p, bytes);
    size_t fixed = cf__fixed_bytes(&p, c.allocator, 1);
    if (p.concurrent) {
        cf__shape synced = p.shape;
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

cf_status cf_new_sized(const cf_config *config, size_t config_size, cf_filter **out)
{
    cf_config c;
    cf__params p;
    uint64_t buckets;
    size_t bytes;
    if (!out)
        return CF_EINVAL;
    cf_status st = cf__config_sized(config, config_size, &c, &p, &buckets, &bytes, NULL);
    if (st != CF_OK)
        return st;
    /* A seed nobody knows, unless the caller fixed one: keys cannot then be chosen in
     * advance to crowd one bucket pair (for seed 0, 40 such keys took 75 s of one core to
     * find, and they filled a pair and the whole stash at 0.15 % load). */
    if (p.seed == 0 && !(c.flags & (CF_FIXED_SEED | CF_REDISBLOOM)) &&
        (st = cf_random_seed(&p.seed)) != CF_OK)
        return st;
    if (c.generations)
        return cf__window_new(&c, &p, out);
    return cf__filter_make(&p, c.allocator, 1, buckets, true, out);
}

cf_status cf__new_without_tables(const cf_config *config, unsigned n, cf_filter **out)
{
    cf_config c;
    cf__params p;
    uint64_t buckets;
    size_t bytes;
    cf_status st = cf__config_sized(config, sizeof *config, &c, &p, &buckets, &bytes, NULL);
    if (st != CF_OK)
        return st;
    if (n == 0 || n > p.max_tables || (n > 1 && p.expansion == 0) || c.generations ||
        p.concurrent) /* a loader makes plain filters (its caller may copy them) */
        return CF_EINVAL;
    /* Every sub-filter's size within the limits before anything is made (cf__filter_make
     * takes them as checked). */
    uint64_t b = buckets;
    for (unsigned k = 1; k < n; k++)
        if (!cf__mul_u64(b, p.expansion, &b) || !cf__table_bytes(&p.shape, b, &bytes))
            return CF_EINVAL;
    return cf__filter_make(&p, c.allocator, n, buckets, false, out);
}

cf_status cf_config_resolve_sized(const cf_config *config, size_t config_size, cf_config *out,
                                  size_t out_size)
{
    cf_config c;
    cf__params p;
    uint64_t buckets;
    size_t bytes;
    if (!out || out_size < CF_CONFIG_SIZE_MIN)
        return CF_EINVAL;
    cf_status st = cf__config_sized(config, config_size, &c, &p, &buckets, &bytes, NULL);
    if (st != CF_OK)
        return st;
    c.fingerprint_bits = p.shape.f;
    c.bucket_size = p.shape.b;
    c.expansion = p.expansion; /* RedisBloom's layout rounds it */
    c.max_kicks = p.max_kicks;
    c.max_sub_filters = p.max_tables;
    c.target_fpr = 0.0;
    /* which gives the same widening */
    c.fpr_bound = p.widen ? cf__fpr_bound(p.shape.f, p.shape.b, p.widen, p.max_tables) : 0.0;
    cf__struct_out(out, out_size, &c, CF__CONFIG_END);
    return CF_OK;
}

cf_status cf_config_check_sized(const cf_config *config, size_t config_size, const char **reason)
{
    cf_config c;
    cf__params p;
    uint64_t buckets;
    size_t bytes;
    const char *why = NULL;
    cf_status st = cf__config_sized(config, config_size, &c, &p, &buckets, &bytes, &why);
    if (reason)
        *reason = why;
    return st;
}

void cf_free(cf_filter *f)
{
    if (!f)
        return;
    /* A generation of a mapped windowed filter borrows its window's mapping (map_len 0). */
    if (f->more && f->more->map && f->more->map_len)
        cf__unmap(f->more->map, f->more->map_len);
    cf__filter_free(f, cf__ntables_all(f));
}

void cf_clear(cf_filter *f)
{
    if (!f || cf__read_only(f))
        return;
    if (cf__is_window(f)) {
        cf__window_clear(f);
        return;
    }
    cf__lock_writers(f);
    for (unsigned i = 0; i < f->ntables; i++)
        cf__table_clear(&f->tables[i]);
    cf__state_begin(f);
    cf__stash_count(f, 0);
    cf__stash_release(f);
    cf__state_end(f);
    cf__unlock_writers(f);
}

/* ------------------------------------------------------------------------------------ */
/* Insert                                                                               */
/* ------------------------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------------------------ */
/* Compaction                                                                           */
/* ------------------------------------------------------------------------------------ */

/* Drop stash entry e; the stash's memory goes with its last entry (but a concurrent
 * filter's, which readers may be reading). */
static void cf__stash_remove(cf_filter *f, unsigned e)
{
    cf__state_begin(f);
    cf__stash_store(f, e, &f->more->stash[f->stash_n - 1u]);
    cf__stash_count(f, f->stash_n - 1u);
    if (f->stash_n == 0)
        cf__stash_release(f);
    cf__state_end(f);
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

cf_status cf__place(cf_filter *f, const cf__table *from, uint64_t x, uint32_t fp)
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

static bool cf__stash_uses(const cf_filter *f, unsigned table)
{
    for (unsigned e = 0; e < f->stash_n; e++)
        if (f->more->stash[e].table == table)
            return true;
    return false;
}

cf_status cf_compact(cf_filter *f)
{
    if (!f)
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    if (cf__is_window(f))
        return cf__window_compact(f);
    /* Exclusive access (as documented for concurrent filters too): no reader holds the
     * sub-filter arrays growth replaced, so they go now. The writers' lock too, which
     * takes in the item counts kept in a concurrent filter's stripes. */
    cf__lock_writers(f);
    if (cf__is_cc(f))
        cf__cc_free_retired(f);
    if (cf__is_rb(f)) { /* RedisBloom's order of moves; such a filter never stashes */
        cf__rb_compact_moves(f);
    } else {
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
    }
    unsigned n = f->ntables;
    while (n > 1 && f->tables[n - 1].items == 0 && !cf__stash_uses(f, n - 1))
        n--;
    cf__truncate(f, n, f->stash_n);
    cf__unlock_writers(f);
    return CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Lookup and delete                                                                    */
/* ------------------------------------------------------------------------------------ */
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

/* ------------------------------------------------------------------------------------ */
/* The slow paths of the per-shape code (fast.c)                                         */
/* ------------------------------------------------------------------------------------ */

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

static uint64_t cf__count_key(const cf_filter *f, const cf__key *k)
{
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

/* ------------------------------------------------------------------------------------ */
/* Public calls                                                                         */
/* ------------------------------------------------------------------------------------ */

/* The filter's hash of a key: its layout's (rb: cf__is_rb(f); the per-shape code of
 * fast.c, which RedisBloom's layout never runs, calls cf__hash_key directly). */
static CF__INLINE uint64_t cf__hash_of(const cf_filter *f, bool rb, const void *key, size_t len)
{
    return CF__UNLIKELY(rb) ? cf__rb_hash(key, len) : cf__hash_key(f, key, len);
}

uint64_t cf_hash(const cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return 0;
    return cf__hash_of(f, cf__is_rb(f), key, len);
}

uint64_t cf_hash_seeded(uint64_t seed, const void *key, size_t len)
{
    if (!key && len)
        return 0;
    return cf__hash_any(seed, key, len);
}

/* The bucket counts cf_place_hash takes: even (cf__alt has no fixed point then) and
 * within the limit the header gives. */
static bool cf__place_buckets_ok(uint64_t buckets)
{
    return buckets >= 2 && buckets <= CF_PLACE_MAX_BUCKETS && buckets % 2 == 0;
}

/* The mapping of a filter's first sub-filter (internal.h), for tables outside the library. */
cf_status cf_place_hash(uint64_t h, uint64_t buckets, unsigned tag_bits, cf_place *out)
{
    if (!out || !cf__place_buckets_ok(buckets) || tag_bits < CF_MIN_FINGERPRINT_BITS ||
        tag_bits > CF_MAX_FINGERPRINT_BITS)
        return CF_EINVAL;
    cf__key k = cf__key_bits(tag_bits, h);
    out->bucket[0] = cf__mulhi(k.x, buckets);
    out->bucket[1] = cf__alt(out->bucket[0], cf__alt_offset(k.mix, buckets), buckets);
    out->tag = k.fp;
    return CF_OK;
}

uint64_t cf_alt_bucket(uint64_t bucket, uint32_t tag, uint64_t buckets)
{
    if (!cf__place_buckets_ok(buckets) || bucket >= buckets || tag == 0)
        return UINT64_MAX;
    return cf__alt(bucket, cf__alt_offset(cf__fp_mix(tag), buckets), buckets);
}

cf_status cf_add_hash(cf_filter *f, uint64_t h)
{
    if (!f)
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    return f->ops->add(f, h);
}

bool cf_contains_hash(const cf_filter *f, uint64_t h)
{
    if (!f)
        return false;
    return f->ops->contains(f, h);
}

cf_status cf_delete_hash(cf_filter *f, uint64_t h)
{
    if (!f)
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    return f->ops->del(f, h);
}

uint64_t cf_count_hash(const cf_filter *f, uint64_t h)
{
    if (!f)
        return 0;
    if (cf__is_window(f))
        return cf__window_count(f, h);
    if (cf__is_rb(f))
        return cf__rb_count(f, h);
    if (cf__is_cc(f))
        return cf__cc_count(f, h);
    cf__key k = cf__key_bits(f->fp_bits, h);
    return cf__count_key(f, &k);
}

/* The batched lookups start from the newest sub-filter; a filter still loading may have
 * none complete yet, and then holds nothing a lookup can see. A concurrent filter's count
 * may be growing meanwhile. */
static bool cf__batch_empty(const cf_filter *f, size_t n, bool *out)
{
    if (cf__is_window(f) || (cf__is_cc(f) ? cf__cc_ntables(f) : f->ntables) != 0)
        return false;
    memset(out, 0, n * sizeof *out);
    return true;
}

void cf_contains_many(const cf_filter *f, const uint64_t *hashes, size_t n, bool *out)
{
    if (!f || !hashes || !out || cf__batch_empty(f, n, out))
        return;
    cf__source src = {hashes, NULL, NULL};
    f->ops->contains_many(f, &src, n, out);
}

void cf_contains_keys(const cf_filter *f, const void *const *keys, const size_t *lens, size_t n,
                      bool *out)
{
    if (!f || !keys || !lens || !out || cf__batch_empty(f, n, out))
        return;
    cf__source src = {NULL, keys, lens};
    f->ops->contains_many(f, &src, n, out);
}

/* Whether a batched add may go ahead (CF_OK); if not, every key's status is the reason. */
static cf_status cf__add_batch_ok(const cf_filter *f, bool input_ok, size_t n, unsigned flags,
                                  cf_status *status)
{
    cf_status refused = !f || !input_ok || (flags & ~(unsigned)CF_ADD_UNIQUE) ? CF_EINVAL
                        : cf__read_only(f)                                    ? CF_EREADONLY
                                                                              : CF_OK;
    for (size_t i = 0; refused != CF_OK && status && i < n; i++)
        status[i] = refused;
    return refused;
}

size_t cf_add_many(cf_filter *f, const uint64_t *hashes, size_t n, unsigned flags,
                   cf_status *status)
{
    if (cf__add_batch_ok(f, hashes || !n, n, flags, status) != CF_OK)
        return 0;
    return f->ops->add_many(f, hashes, n, flags, status);
}

/* Keys that cf_add_keys hashes at a time: their hashes and statuses stay in cache (3 KiB
 * of stack) and the batch is long enough for cf_add_many's prefetching to overlap its
 * reads. */
#define CF__ADD_KEYS_BATCH 256u

/* cf_add_keys for a filter whose layout is or is not RedisBloom's (rb: a constant in each
 * call, so that each hashes its keys with no test per key). */
static CF__INLINE size_t cf__add_keys(cf_filter *f, bool rb, const void *const *keys,
                                      const size_t *lens, size_t n, unsigned flags,
                                      cf_status *status)
{
    uint64_t hashes[CF__ADD_KEYS_BATCH];
    cf_status st[CF__ADD_KEYS_BATCH];
    size_t added = 0;
    for (size_t start = 0; start < n;) {
        /* A batch of the keys that can be hashed; a NULL key with bytes to read is
         * refused where it stands, and the next batch starts after it. */
        size_t end = start, k = 0;
        for (; end < n && k < CF__ADD_KEYS_BATCH && (keys[end] || lens[end] == 0); end++)
            hashes[k++] = cf__hash_of(f, rb, keys[end], lens[end]);
        added += f->ops->add_many(f, hashes, k, flags, status ? st : NULL);
        if (status)
            memcpy(status + start, st, k * sizeof *st);
        if (end < n && k < CF__ADD_KEYS_BATCH) {
            if (status)
                status[end] = CF_EINVAL;
            end++;
        }
        start = end;
    }
    return added;
}

size_t cf_add_keys(cf_filter *f, const void *const *keys, const size_t *lens, size_t n,
                   unsigned flags, cf_status *status)
{
    if (cf__add_batch_ok(f, (keys && lens) || !n, n, flags, status) != CF_OK)
        return 0;
    return cf__is_rb(f) ? cf__add_keys(f, true, keys, lens, n, flags, status)
                        : cf__add_keys(f, false, keys, lens, n, flags, status);
}

cf_status cf_add(cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    return f->ops->add_key(f, key, len);
}

cf_status cf_add_unique(cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    uint64_t h = cf_hash(f, key, len);
    if (cf__is_cc(f) || cf__is_window(f)) { /* the check and the add as one step */
        cf_status st;
        f->ops->add_many(f, &h, 1, CF_ADD_UNIQUE, &st);
        return st;
    }
    if (f->ops->contains(f, h))
        return CF_EXISTS;
    return f->ops->add(f, h);
}

bool cf_contains(const cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return false;
    return f->ops->contains_key(f, key, len);
}

cf_status cf_delete(cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    return f->ops->del_key(f, key, len);
}

uint64_t cf_count(const cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return 0;
    return cf_count_hash(f, cf_hash(f, key, len));
}

cf_status cf_get_stats_sized(const cf_filter *f, cf_stats *caller, size_t size)
{
    if (!f || !caller || size < CF_STATS_SIZE_MIN)
        return CF_EINVAL;
    cf_stats st = {0}, *out = &st;
    if (cf__is_window(f)) {
        cf__window_stats(f, out);
        cf__struct_out(caller, size, out, CF__STATS_END);
        return CF_OK;
    }
    /* The counts of one moment, which a concurrent filter's lock holds still (growth
     * replaces the sub-filter array, the first's shape read through it too). */
    cf__lock_writers(f);
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
    cf__unlock_writers(f);
    /* For a filter that does not widen, a rate of one width at the load of every
     * sub-filter there can be. */
    out->fpr_bound = f->widen ? cf__fpr_bound(s->f, s->b, f->widen, cf__max_tables(f))
                              : cf_expected_fpr(s->f, s->b, f->expansion ? cf__max_tables(f) : 1.0);
    cf__struct_out(caller, size, out, CF__STATS_END);
    return CF_OK;
}

double cf_expected_fpr(unsigned fingerprint_bits, unsigned bucket_size, double loads)
{
    if (fingerprint_bits < CF_MIN_FINGERPRINT_BITS || fingerprint_bits > CF_MAX_FINGERPRINT_BITS ||
        bucket_size == 0 || bucket_size > CF_MAX_BUCKET_SIZE || !(loads >= 0.0))
        return 1.0;
    /* A stored and a probed fingerprint match with probability p = (2^f + 2) / 2^(2f):
     * the value 1 is twice as likely as the others (it also stands for 0). A lookup
     * compares against the 2b slots of two buckets in every sub-filter, each occupied with
     * that sub-filter's load, so it misses them all with probability
     * prod (1 - p)^(2 b load) = (1 - p)^(2 b loads). */
    int f = (int)fingerprint_bits;
    double p = ldexp(ldexp(1.0, f) + 2.0, -2 * f);
    return -expm1(2.0 * (double)bucket_size * loads * log1p(-p));
}

cf_status cf_get_config_sized(const cf_filter *f, cf_config *caller, size_t size)
{
    if (!f || !caller || size < CF_CONFIG_SIZE_MIN)
        return CF_EINVAL;
    cf_config c = {0}, *out = &c;
    if (cf__is_window(f)) {
        cf__window_config(f, out);
        cf__struct_out(caller, size, out, CF__CONFIG_END);
        return CF_OK;
    }
    out->capacity = f->capacity;
    const cf__shape *s = cf__shape0(f);
    out->fingerprint_bits = s->f;
    out->bucket_size = s->b;
    out->max_kicks = f->max_kicks;
    out->expansion = f->expansion;
    out->seed = cf__seed(f);
    out->flags = out->seed == 0 ? CF_FIXED_SEED : 0u; /* so that cf_new(out) keeps seed 0 */
    if (cf__is_rb(f))
        out->flags |= CF_REDISBLOOM;
    if (s->semi)
        out->flags |= CF_SEMI_SORT;
    if (cf__is_cc(f))
        out->flags |= CF_CONCURRENT;
    if (f->expansion != 0 && f->widen == 0)
        out->flags |= CF_GROW_SAME_WIDTH;
    else if (f->expansion != 0) /* which gives the same widening again */
        out->fpr_bound = cf__fpr_bound(s->f, s->b, f->widen, cf__max_tables(f));
    out->allocator = NULL;
    out->max_sub_filters = cf__max_tables(f);
    cf__struct_out(caller, size, out, CF__CONFIG_END);
    return CF_OK;
}

const char *cf_strerror(cf_status s)
{
    switch (s) {
    case CF_OK:
        return "success";
    case CF_NOT_FOUND:
        return "key not found";
    case CF_FULL:
        return "filter is full";
    case CF_EXISTS:
        return "key already present";
    case CF_EINVAL:
        return "invalid argument";
    case CF_ENOMEM:
        return "out of memory";
    case CF_ECORRUPT:
        return "corrupt or invalid serialized filter";
    case CF_EIO:
        return "input/output error";
    case CF_EVERSION:
        return "unsupported format version (a newer library's, or the retired version 1)";
    case CF_EREADONLY:
        return "filter is read-only (memory-mapped or still loading)";
    }
    return "unknown status";
}

#define CF__STR2(x) #x
#define CF__STR(x)  CF__STR2(x)

const char *cf_version(void)
{
    return CF__STR(CF_VERSION_MAJOR) "." CF__STR(CF_VERSION_MINOR) "." CF__STR(CF_VERSION_PATCH);
}
