/*
 * config.c - settings: a caller's cf_config checked, its defaults applied and resolved
 * into the parameters every kind shares (cf__params), the table sized for its capacity,
 * and the false-positive rates those settings give. No filter is made here.
 */
#include "internal.h"

#include <math.h>

/* The largest first sub-filter of RedisBloom's layout that cf_new makes (a power of two
 * that cf__table_bytes then checks against the memory limits). */
#define CF__RB_MAX_BUCKETS (UINT64_C(1) << 62)

static unsigned cf__or_default(unsigned v, unsigned def)
{
    return v ? v : def;
}

/* The flags cf_config.flags may have. */
#define CF__CONFIG_FLAGS                                                                           \
    (CF_FIXED_SEED | CF_GROW_SAME_WIDTH | CF_SEMI_SORT | CF_CONCURRENT | CF_REDISBLOOM |           \
     CF_SEGMENTED | CF_UNSEGMENTED | CF_FAST_HASH)

/* The narrowest fingerprint whose false-positive rate at full load of `tables` tables (a
 * windowed filter's generations, else 1) is at most `target`; 0 if none is (target below
 * what 32 bits give, or not in (0, 1)). */
static unsigned cf__bits_for_fpr(double target, unsigned b, unsigned tables)
{
    if (!(target > 0.0 && target < 1.0))
        return 0;
    for (unsigned f = CF_MIN_FINGERPRINT_BITS; f <= CF_MAX_FINGERPRINT_BITS; f++)
        if (cf__expected_fpr(f, b, (double)tables) <= target)
            return f;
    return 0;
}

/* log(1 - p) for a stored and a probed f-bit fingerprint matching with probability p (see
 * cf_expected_fpr): a lookup misses a sub-filter of f-bit fingerprints at load a with
 * probability exp(2 b a log(1 - p)). */
double cf__log_miss(unsigned f)
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
    double first = cf__expected_fpr(f, b, 1.0);
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
double cf__fpr_bound(unsigned f, unsigned b, unsigned widen, unsigned tables)
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

/* The mapping: segments for a table of *buckets (format 2's count) where the flags ask
 * for them, or by default from CF_SEGMENTED_MIN_BUCKETS on, the count then rounded up to
 * whole segments and *bytes made again, and the segmented default budget unless one was
 * given. False if the rounded table is too large. */
static bool cf__segment(unsigned flags, bool kicks_given, cf__params *p, uint64_t *buckets,
                        size_t *bytes)
{
    bool want = (flags & CF_SEGMENTED) ||
                (!(flags & CF_UNSEGMENTED) && *buckets >= CF_SEGMENTED_MIN_BUCKETS);
    if (!want)
        return true;
    uint64_t unit = UINT64_C(1) << CF_SEGMENT_BITS;
    uint64_t m = *buckets + (unit - *buckets % unit) % unit; /* *buckets < 2^60: no overflow */
    p->shape.seg = (uint8_t)CF_SEGMENT_BITS;
    if (!kicks_given)
        p->max_kicks = CF_DEFAULT_MAX_KICKS_SEGMENTED;
    if (!cf__table_bytes(&p->shape, m, bytes))
        return false;
    *buckets = m;
    return true;
}

/* The reasons cf_config_check gives (one line each; the header's config comments are
 * the full rules). */
static cf_status cf__bad(const char **why, const char *reason)
{
    if (why)
        *why = reason;
    return CF_EINVAL;
}

/* RedisBloom's layout: its fingerprints, its default bucket size and MAXITERATIONS, no
 * seed, no widening, expansion a power of two (cf__resolve has checked the common
 * ranges). */
static cf_status cf__resolve_rb(const cf_config *c, cf__params *p, const char **why)
{
    if ((c->flags & CF_SEMI_SORT) || c->target_fpr != 0.0 || c->fpr_bound != 0.0 || c->seed != 0 ||
        (c->fingerprint_bits != 0 && c->fingerprint_bits != CF__RB_FP_BITS))
        return cf__bad(why, "RedisBloom's layout has its own hash and 8-bit fingerprints of "
                            "one width: no seed, semi-sorting, target rate, rate bound or "
                            "other width");
    cf__shape_init(&p->shape, CF__RB_FP_BITS, cf__or_default(c->bucket_size, CF__RB_BUCKET), false);
    p->shape.exact = true; /* its tables, as RedisBloom's, end at their last byte */
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
    if ((c->flags & CF_SEGMENTED) && (c->flags & (CF_UNSEGMENTED | CF_REDISBLOOM)))
        return cf__bad(why, "segments are this library's mapping: not with CF_UNSEGMENTED or "
                            "RedisBloom's layout");
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
    /* A window's generations hash as one filter does, with XXH3 (window.c). */
    if ((c->flags & CF_FAST_HASH) && (windowed || (c->flags & CF_REDISBLOOM)))
        return cf__bad(why, "CF_FAST_HASH is for filters without generations, in this "
                            "library's layout (RedisBloom's has its own hash)");
    if (!cf__allocator_ok(c->allocator))
        return cf__bad(why, "an allocator needs both its functions");
    p->redisbloom = false;
    p->fast_hash = (c->flags & CF_FAST_HASH) != 0;
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

cf_status cf__config_sized(const cf_config *config, size_t size, cf_config *c, cf__params *p,
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
        ok = cf__buckets_for(&p->shape, p->capacity, buckets, table_bytes) &&
             cf__segment(c->flags, c->max_kicks != 0, p, buckets, table_bytes);
    }
    return ok ? CF_OK
              : cf__bad(why, "the capacity is too large for a table, or for what this "
                             "fingerprint width and bucket size can tell apart");
}

double cf__expected_fpr(unsigned fingerprint_bits, unsigned bucket_size, double loads)
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
