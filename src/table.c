/*
 * table.c - bucket storage, out of line: shapes, table sizes, and the whole-table scans
 * that validation uses. table.h has the layout and the probes.
 */
#include "table.h"

#include <sched.h>

#include "cuckoofilter.h"

#include "semi_table.inc"

/* No table may exceed 64 TiB: no machine this runs on can address more in one block, and
 * the bound keeps every bit offset (bytes * 8) far from overflowing 64 bits. */
#define CF__MAX_TABLE_BYTES (UINT64_C(1) << 46)

/* Bucket indices come from the 64 - f hash bits that the fingerprint does not use. A
 * table of m buckets maps their 2^(64 - f) values onto m buckets; capping m at 2^(58 - f)
 * keeps each bucket's share within 1/64 of the others' (at least 64 values per bucket). */
#define CF__INDEX_BIAS_BITS 6u

/* Sizing loads, in parts per 10000, for the bucket sizes the paper measured and the ones
 * in between. Each sits just below the load at which the first insert fails (measured by
 * tests/test_full.c and bench/figures.c), so that `capacity` random keys always fit. */
#define CF__LOAD_SCALE 10000u

/* A bucket fits one load if it starts on a byte (then 64 bits are usable) or if it is at
 * most 57 bits wide (a start 0..7 bits into the byte leaves at least 57). */
#define CF__SWAR(bits) (((bits) <= 64u && (bits) % 8u == 0) || (bits) <= 57u)

void cf__shape_init(cf__shape *s, unsigned f, unsigned b, bool semi)
{
    s->f = (uint8_t)f;
    s->b = (uint8_t)b;
    s->ext = 0;
    s->semi = semi;
    s->sync = false;
    s->exact = false;
    s->seg = 0;
    s->bucket_bits = (uint16_t)(semi ? 4 * (f - 1) : f * b);
    s->fp_mask = (UINT64_C(1) << f) - 1;
    s->swar = !semi && CF__SWAR(f * b);
    s->bucket_mask = 0;
    s->lane_lo = 0;
    s->lane_hi = 0;
    s->lane_low = 0;
    if (semi && f >= CF__SEMI_SWAR_MIN_F && f <= CF__SEMI_SWAR_MAX_F) {
        unsigned w = f - CF__SEMI_PREFIX_BITS;
        s->bucket_mask = (UINT64_C(1) << s->bucket_bits) - 1;
        for (unsigned j = 0; j < 4; j++) {
            s->lane_lo |= UINT64_C(1) << (j * w);
            s->semi_gather |= UINT64_C(1) << ((3 - j) * (w - 1));
        }
        s->lane_low = s->lane_lo * ((UINT64_C(1) << (w - 1)) - 1);
    }
    if (s->swar) {
        s->bucket_mask = s->bucket_bits == 64 ? UINT64_MAX : (UINT64_C(1) << s->bucket_bits) - 1;
        for (unsigned j = 0; j < b; j++)
            s->lane_lo |= UINT64_C(1) << (j * f);
        s->lane_hi = s->lane_lo << (f - 1);
        s->lane_low = s->lane_lo * ((UINT64_C(1) << (f - 1)) - 1);
    }
}

/* What cf__shape_init makes, as constant expressions (test_internal holds the two equal):
 * the n low bits, lane j's bit 0, and the shape. */
#define CF__LOW(n)        ((n) >= 64u ? UINT64_MAX : (UINT64_C(1) << ((n)&63u)) - 1u)
#define CF__LANE(f, b, j) ((j) < (b) ? UINT64_C(1) << (((j) * (f)) & 63u) : 0u)
#define CF__LANES(f, b)                                                                            \
    (CF__SWAR((f) * (b))                                                                           \
         ? CF__LANE(f, b, 0u) | CF__LANE(f, b, 1u) | CF__LANE(f, b, 2u) | CF__LANE(f, b, 3u) |     \
               CF__LANE(f, b, 4u) | CF__LANE(f, b, 5u) | CF__LANE(f, b, 6u) | CF__LANE(f, b, 7u)   \
         : 0u)
#define CF__SHAPE_AS(f, b, exact)                                                                  \
    {                                                                                              \
        (f), (b), 0, CF__SWAR((f) * (b)), false, false, (exact), 0, (f) * (b), CF__LOW(f),         \
            CF__SWAR((f) * (b)) ? CF__LOW((f) * (b)) : 0u, CF__LANES(f, b),                        \
            {CF__LANES(f, b) << ((f)-1u)}, CF__LANES(f, b) * CF__LOW((f)-1u)                       \
    }
#define CF__SHAPE(f, b) CF__SHAPE_AS(f, b, false)
#define CF__SHAPE_ROW(f)                                                                           \
    CF__SHAPE(f, 1u), CF__SHAPE(f, 2u), CF__SHAPE(f, 3u), CF__SHAPE(f, 4u), CF__SHAPE(f, 5u),      \
        CF__SHAPE(f, 6u), CF__SHAPE(f, 7u), CF__SHAPE(f, 8u)

/* Every semi-sorted shape (b = 4), at [f - CF_MIN_FINGERPRINT_BITS]. */
#define CF__SEMI_SWAR(f) ((f) >= CF__SEMI_SWAR_MIN_F && (f) <= CF__SEMI_SWAR_MAX_F)
#define CF__SEMI_LANES(f)                                                                          \
    (CF__SEMI_SWAR(f) ? CF__LANE((f)-4u, 4u, 0u) | CF__LANE((f)-4u, 4u, 1u) |                      \
                            CF__LANE((f)-4u, 4u, 2u) | CF__LANE((f)-4u, 4u, 3u)                    \
                      : 0u)
#define CF__SEMI_GATHER(f)                                                                         \
    (CF__SEMI_SWAR(f) ? CF__LANE((f)-5u, 4u, 0u) | CF__LANE((f)-5u, 4u, 1u) |                      \
                            CF__LANE((f)-5u, 4u, 2u) | CF__LANE((f)-5u, 4u, 3u)                    \
                      : 0u)
#define CF__SEMI_SHAPE(f)                                                                          \
    {                                                                                              \
        (f), 4u, 0, false, true, false, false, 0, 4u * ((f)-1u), CF__LOW(f),                       \
            CF__SEMI_SWAR(f) ? CF__LOW(4u * ((f)-1u)) : 0u, CF__SEMI_LANES(f),                     \
            {CF__SEMI_GATHER(f)}, CF__SEMI_LANES(f) * CF__LOW((f)-5u)                              \
    }
static const cf__shape cf__static_semi_shapes[] = {
    CF__SEMI_SHAPE(4u),  CF__SEMI_SHAPE(5u),  CF__SEMI_SHAPE(6u),  CF__SEMI_SHAPE(7u),
    CF__SEMI_SHAPE(8u),  CF__SEMI_SHAPE(9u),  CF__SEMI_SHAPE(10u), CF__SEMI_SHAPE(11u),
    CF__SEMI_SHAPE(12u), CF__SEMI_SHAPE(13u), CF__SEMI_SHAPE(14u), CF__SEMI_SHAPE(15u),
    CF__SEMI_SHAPE(16u), CF__SEMI_SHAPE(17u), CF__SEMI_SHAPE(18u), CF__SEMI_SHAPE(19u),
    CF__SEMI_SHAPE(20u), CF__SEMI_SHAPE(21u), CF__SEMI_SHAPE(22u), CF__SEMI_SHAPE(23u),
    CF__SEMI_SHAPE(24u), CF__SEMI_SHAPE(25u), CF__SEMI_SHAPE(26u), CF__SEMI_SHAPE(27u),
    CF__SEMI_SHAPE(28u), CF__SEMI_SHAPE(29u), CF__SEMI_SHAPE(30u), CF__SEMI_SHAPE(31u),
    CF__SEMI_SHAPE(32u),
};
_Static_assert(sizeof cf__static_semi_shapes / sizeof cf__static_semi_shapes[0] ==
                   CF_MAX_FINGERPRINT_BITS - CF_MIN_FINGERPRINT_BITS + 1u,
               "a semi-sorted shape per fingerprint width");

/* Every shape of b <= CF__STATIC_SHAPE_B, at [f - CF_MIN_FINGERPRINT_BITS][b - 1]. */
static const cf__shape cf__static_shapes[][CF__STATIC_SHAPE_B] = {
    {CF__SHAPE_ROW(4u)},  {CF__SHAPE_ROW(5u)},  {CF__SHAPE_ROW(6u)},  {CF__SHAPE_ROW(7u)},
    {CF__SHAPE_ROW(8u)},  {CF__SHAPE_ROW(9u)},  {CF__SHAPE_ROW(10u)}, {CF__SHAPE_ROW(11u)},
    {CF__SHAPE_ROW(12u)}, {CF__SHAPE_ROW(13u)}, {CF__SHAPE_ROW(14u)}, {CF__SHAPE_ROW(15u)},
    {CF__SHAPE_ROW(16u)}, {CF__SHAPE_ROW(17u)}, {CF__SHAPE_ROW(18u)}, {CF__SHAPE_ROW(19u)},
    {CF__SHAPE_ROW(20u)}, {CF__SHAPE_ROW(21u)}, {CF__SHAPE_ROW(22u)}, {CF__SHAPE_ROW(23u)},
    {CF__SHAPE_ROW(24u)}, {CF__SHAPE_ROW(25u)}, {CF__SHAPE_ROW(26u)}, {CF__SHAPE_ROW(27u)},
    {CF__SHAPE_ROW(28u)}, {CF__SHAPE_ROW(29u)}, {CF__SHAPE_ROW(30u)}, {CF__SHAPE_ROW(31u)},
    {CF__SHAPE_ROW(32u)},
};
_Static_assert(sizeof cf__static_shapes / sizeof cf__static_shapes[0] ==
                   CF_MAX_FINGERPRINT_BITS - CF_MIN_FINGERPRINT_BITS + 1u,
               "a row per fingerprint width");

/* RedisBloom's exact shapes, at [b - 1]. */
static const cf__shape cf__static_exact_shapes[CF__STATIC_SHAPE_B] = {
    CF__SHAPE_AS(8u, 1u, true), CF__SHAPE_AS(8u, 2u, true), CF__SHAPE_AS(8u, 3u, true),
    CF__SHAPE_AS(8u, 4u, true), CF__SHAPE_AS(8u, 5u, true), CF__SHAPE_AS(8u, 6u, true),
    CF__SHAPE_AS(8u, 7u, true), CF__SHAPE_AS(8u, 8u, true),
};

const cf__shape *cf__shape_static_exact(unsigned b)
{
    return b >= 1 && b <= CF__STATIC_SHAPE_B ? &cf__static_exact_shapes[b - 1] : NULL;
}

const cf__shape *cf__shape_static(unsigned f, unsigned b, bool semi)
{
    if (b < 1 || b > CF__STATIC_SHAPE_B || f < CF_MIN_FINGERPRINT_BITS ||
        f > CF_MAX_FINGERPRINT_BITS || (semi && b != 4))
        return NULL;
    if (semi)
        return &cf__static_semi_shapes[f - CF_MIN_FINGERPRINT_BITS];
    return &cf__static_shapes[f - CF_MIN_FINGERPRINT_BITS][b - 1];
}

enum cf__code cf__code_of(const cf__shape *s)
{
    if (s->ext != 0) /* a wider sub-filter's: no shape of code of its own */
        return CF__CODE_GENERIC;
    if (s->semi) {
#define CF__CODE_SEMI_CASE(F)                                                                      \
    if (s->f == (F))                                                                               \
        return CF__CODE_SEMI_##F;
        CF__SEMI_FAST_SHAPES(CF__CODE_SEMI_CASE)
#undef CF__CODE_SEMI_CASE
        return s->bucket_mask ? CF__CODE_SEMI : CF__CODE_GENERIC;
    }
#define CF__CODE_CASE(F, B)                                                                        \
    if (s->f == (F) && s->b == (B))                                                                \
        return CF__CODE_##F##_##B;
    CF__FAST_SHAPES(CF__CODE_CASE)
#undef CF__CODE_CASE
    return CF__CODE_GENERIC;
}

/* The load each bucket size reaches before its first failed insert, less a margin, in
 * parts per CF__LOAD_SCALE (index = bucket size; sizes past the table use the last).
 * b = 2, 4, 8 are the paper's 84 %, 95 % and 98 %, which our breadth-first eviction
 * exceeds (0.87, 0.96, 0.99: bench/figures.c); b = 1 is the 50 % threshold of 2-choice
 * hashing, less a margin; the others lie between their neighbours. */
static const uint16_t cf__sizing_load[] = {
    0, 4500, 8400, 9100, 9500, 9600, 9700, 9750, 9800,
};

/* Never size for less than 1 % load: a shape that needs less is hopeless anyway. */
#define CF__MIN_SIZING_LOAD 100u

/* The model allows this many (log2: 2^-3 = 1/8) overflowing fingerprint classes per
 * table; measured failures begin near 2, so the margin is 10x or more, and the 8-slot
 * stash absorbs what the model misses. */
#define CF__OVERFLOW_LOG2 3

/* log2(x) for x >= 1, in units of 2^-16, with integers only (x's top 31 bits are used,
 * then one bit of the fraction per squaring). */
static int64_t cf__log2_q16(uint64_t x)
{
    unsigned ip = 63u - cf__clz64(x | 1u);
    uint64_t y = ip >= 30 ? x >> (ip - 30) : x << (30 - ip); /* [2^30, 2^31): 1.xxx */
    int64_t r = (int64_t)ip << 16;
    for (int bit = 15; bit >= 0; bit--) {
        y = (y * y) >> 30;
        if (y >= (UINT64_C(1) << 31)) {
            y >>= 1;
            r += INT64_C(1) << bit;
        }
    }
    return r;
}

/* Is `load` (per CF__LOAD_SCALE) safe for n keys? A key can only ever sit in its two
 * buckets, and keys sharing fingerprint and bucket pair form a class of which at most 2b
 * fit. Classes number m (2^f - 1) / 2, keys per class are ~Poisson(2 b load / 2^f), so
 * the expected number of overflowing classes is about n (2 b load / 2^f)^(2b) / (2b+1)!.
 * For 4-slot buckets that is nothing even at f = 4; for b = 1 or 2 with short
 * fingerprints it grows with n, and the table must be emptier. In log2:
 *   log n + 2b log(2 b load) <= 2b f + log (2b+1)! - CF__OVERFLOW_LOG2.  */
static bool cf__load_is_safe(const cf__shape *s, uint64_t n, uint64_t load)
{
    int64_t two_b = 2 * (int64_t)s->b;
    int64_t log_fact = 0;
    for (uint64_t k = 2; k <= (uint64_t)two_b + 1; k++)
        log_fact += cf__log2_q16(k);
    int64_t lhs = cf__log2_q16(n) +
                  two_b * (cf__log2_q16((uint64_t)two_b * load) - cf__log2_q16(CF__LOAD_SCALE));
    int64_t rhs = (two_b * (int64_t)s->f - CF__OVERFLOW_LOG2) * 65536 + log_fact;
    return lhs <= rhs;
}

/* With a fixed search budget, the load at the first failure sinks slowly as tables grow
 * (b = 4: 0.964 at 1M keys, 0.958 at 30M, 0.955 at 200M, stash included): past 2^27
 * keys, size for 0.15 % less load per doubling. */
#define CF__LARGE_TABLE_LOG2       27u
#define CF__LOAD_LOSS_PER_DOUBLING 15u

/* The load to size a table of `capacity` keys for, per CF__LOAD_SCALE; 0 if even the
 * minimum is not safe (the shape cannot hold that many keys). */
static uint64_t cf__sizing_load_for(const cf__shape *s, uint64_t capacity)
{
    size_t n = sizeof cf__sizing_load / sizeof cf__sizing_load[0];
    uint64_t hi = cf__sizing_load[s->b < n ? s->b : n - 1], lo = CF__MIN_SIZING_LOAD;
    unsigned log2_n = 63u - cf__clz64(capacity | 1u);
    if (log2_n > CF__LARGE_TABLE_LOG2)
        hi -= (log2_n - CF__LARGE_TABLE_LOG2) * CF__LOAD_LOSS_PER_DOUBLING;
    if (cf__load_is_safe(s, capacity, hi))
        return hi;
    if (!cf__load_is_safe(s, capacity, lo))
        return 0;
    while (hi - lo > 1) { /* the largest safe load: the condition grows with the load */
        uint64_t mid = lo + (hi - lo) / 2;
        if (cf__load_is_safe(s, capacity, mid))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

bool cf__buckets_for(const cf__shape *s, uint64_t capacity, uint64_t *buckets, size_t *bytes)
{
    uint64_t load = cf__sizing_load_for(s, capacity);
    uint64_t scaled, m;
    if (load == 0)
        return false;
    /* m = ceil(capacity * SCALE / (b * load)), in integers: no rounding surprises. */
    if (!cf__mul_u64(capacity, CF__LOAD_SCALE, &scaled))
        return false;
    uint64_t per_bucket = (uint64_t)s->b * load;
    m = scaled / per_bucket + (scaled % per_bucket != 0);
    /* Even, so that cf__alt has no fixed point; at least 2. */
    m += m & 1u;
    if (m < 2)
        m = 2;
    if (!cf__table_bytes(s, m, bytes))
        return false;
    *buckets = m;
    return true;
}

bool cf__table_bytes(const cf__shape *s, uint64_t buckets, size_t *bytes)
{
    uint64_t bits, total;
    if (buckets > (UINT64_C(1) << (64u - s->f - CF__INDEX_BIAS_BITS)))
        return false;
    if (!cf__mul_u64(buckets, s->bucket_bits, &bits))
        return false;
    total = cf__data_bytes(s, buckets) + cf__table_pad(s);
    if (total > CF__MAX_TABLE_BYTES || total > SIZE_MAX)
        return false;
    *bytes = (size_t)total;
    return true;
}

unsigned cf__semi_get(const cf__table *t, const cf__shape *s, uint64_t bucket, uint32_t fp[4])
{
    unsigned w = s->f - CF__SEMI_PREFIX_BITS;
    uint64_t bit = bucket * s->bucket_bits, suffix = s->fp_mask >> CF__SEMI_PREFIX_BITS;
    unsigned code;
    if (s->bucket_mask) { /* one load, the fields taken from it */
        uint64_t word = cf__bits_get(t->data, bit, s->bucket_mask);
        code = (unsigned)(word & CF__SEMI_CODE_MASK);
        unsigned pre = cf__semi_prefixes[code];
        word >>= CF__SEMI_CODE_BITS;
        for (unsigned j = 0; j < 4; j++, word >>= w)
            fp[j] = ((pre >> (4 * j)) & CF__SEMI_PREFIX_MASK) << w | (uint32_t)(word & suffix);
        return code;
    }
    code = (unsigned)cf__bits_get(t->data, bit, CF__SEMI_CODE_MASK);
    unsigned pre = cf__semi_prefixes[code];
    bit += CF__SEMI_CODE_BITS;
    for (unsigned j = 0; j < 4; j++, bit += w)
        fp[j] = ((pre >> (4 * j)) & CF__SEMI_PREFIX_MASK) << w |
                (uint32_t)cf__bits_get(t->data, bit, suffix);
    return code;
}

/* Write the four ascending fingerprints fp of suffix width w into bucket `bucket`: one
 * store for a bucket of one load, else field by field. */
static void cf__semi_write(cf__table *t, const cf__shape *s, uint64_t bucket, const uint32_t fp[4])
{
    unsigned w = s->f - CF__SEMI_PREFIX_BITS;
    uint64_t bit = bucket * s->bucket_bits, suffix = s->fp_mask >> CF__SEMI_PREFIX_BITS;
    uint64_t code = cf__semi_rank(fp, w);
    if (s->bucket_mask) {
        uint64_t word = 0;
        for (unsigned j = 4; j-- > 0;)
            word = word << w | (fp[j] & suffix);
        cf__bits_put(t->data, bit, s->bucket_mask, word << CF__SEMI_CODE_BITS | code);
        return;
    }
    cf__bits_put(t->data, bit, CF__SEMI_CODE_MASK, code);
    bit += CF__SEMI_CODE_BITS;
    for (unsigned j = 0; j < 4; j++, bit += w)
        cf__bits_put(t->data, bit, suffix, fp[j] & suffix);
}

void cf__semi_put(cf__table *t, const cf__shape *s, uint64_t bucket, uint32_t fp[4])
{
    for (unsigned i = 1; i < 4; i++) /* insertion sort */
        for (unsigned j = i; j > 0 && fp[j - 1] > fp[j]; j--) {
            uint32_t x = fp[j];
            fp[j] = fp[j - 1];
            fp[j - 1] = x;
        }
    cf__semi_write(t, s, bucket, fp);
}

bool cf__semi_put_if_free(cf__table *t, const cf__shape *s, uint64_t bucket, uint32_t fp)
{
    uint32_t v[4];
    cf__semi_get(t, s, bucket, v);
    if (v[0] != 0) /* empty slots sort first */
        return false;
    unsigned j = 0; /* fp goes where the values below it end */
    for (; j < 3 && v[j + 1] < fp; j++)
        v[j] = v[j + 1];
    v[j] = fp;
    cf__semi_write(t, s, bucket, v);
    t->items++;
    return true;
}

uint32_t cf__semi_slot_get(const cf__table *t, const cf__shape *s, uint64_t bucket, unsigned slot)
{
    uint32_t v[4];
    cf__semi_get(t, s, bucket, v);
    return v[slot];
}

void cf__semi_slot_set(cf__table *t, const cf__shape *s, uint64_t bucket, unsigned slot,
                       uint32_t fp)
{
    uint32_t v[4];
    cf__semi_get(t, s, bucket, v);
    v[slot] = fp;
    cf__semi_put(t, s, bucket, v);
}

unsigned cf__semi_match(const cf__table *t, const cf__shape *s, uint64_t bucket, uint32_t fp)
{
    if (s->bucket_mask)
        return cf__semi_match1(t, s, bucket, fp);
    uint32_t v[4];
    cf__semi_get(t, s, bucket, v);
    return (unsigned)(v[0] == fp) | (unsigned)(v[1] == fp) << 1 | (unsigned)(v[2] == fp) << 2 |
           (unsigned)(v[3] == fp) << 3;
}

bool cf__table_scan(const cf__shape *s, const uint8_t *data, uint64_t from, uint64_t to,
                    uint64_t *used)
{
    if (s->exact) { /* a byte a slot, and not a byte past the last */
        *used = cf__byte_slots_used(data + from * s->b, (size_t)((to - from) * s->b));
        return true;
    }
    cf__table t = {0};
    t.data = (uint8_t *)(uintptr_t)data; /* read only: the probes below never write */
    /* The bits of the first sub-filter's width. */
    uint32_t low = (uint32_t)(s->fp_mask >> s->ext);
    uint64_t n = 0;
    for (uint64_t i = from; i < to; i++) {
        /* A wider table's fingerprint keeps the key's, never 0, in its low bits: compaction
         * narrows it to them, and a stored 0 there would become a counted empty slot. */
        if (s->semi) {
            uint32_t v[4];
            if (cf__semi_get(&t, s, i, v) >= CF__SEMI_CODES || v[0] > v[1] || v[1] > v[2] ||
                v[2] > v[3])
                return false;
            for (unsigned j = 0; s->ext && j < 4; j++)
                if (v[j] != 0 && (v[j] & low) == 0)
                    return false;
        } else if (s->ext) {
            for (unsigned j = 0; j < s->b; j++) {
                uint32_t v = cf__slot_get_plain(&t, s, i, j);
                if (v != 0 && (v & low) == 0)
                    return false;
            }
        }
        n += s->b - cf__bucket_count(&t, s, i, 0);
    }
    *used = n;
    return true;
}

bool cf__table_tail_clear(const cf__shape *s, const uint8_t *data, uint64_t buckets)
{
    uint64_t bits = buckets * s->bucket_bits;
    return bits % 8 == 0 || (data[bits / 8] >> (bits % 8)) == 0;
}

/* ------------------------------------------------------------------------------------ */
/* Synchronized tables                                                                  */
/* ------------------------------------------------------------------------------------ */

/* The largest bucket in bits (b = 255 slots of 32 bits), and the bytes a probe may read
 * past a bucket's start: the window a bucket is read into holds the bucket at the bit
 * offset it has in the table, which takes up to 7 buckets' bits before it (see
 * cf__sync_open). */
#define CF__SYNC_MAX_BUCKET_BITS (CF_MAX_BUCKET_SIZE * CF_MAX_FINGERPRINT_BITS)
#define CF__SYNC_WINDOW_BYTES                                                                      \
    (7u * CF__SYNC_MAX_BUCKET_BITS / 8u + CF__SYNC_MAX_BUCKET_BITS / 8u + 16u)

bool cf__table_block(const cf__shape *s, uint64_t buckets, size_t *bytes)
{
    size_t size = cf__table_size(s, buckets);
    if (!s->sync) {
        *bytes = size;
        return true;
    }
    uint64_t words; /* a counter and a lock per stripe */
    size_t at = cf__sync_stripes_at(s, buckets);
    if (!cf__mul_u64(cf__sync_stripes_n(buckets), 2u * sizeof(atomic_uint), &words) ||
        words > SIZE_MAX - CF__SYNC_TAIL_PAD - at)
        return false;
    *bytes = at + (size_t)words + CF__SYNC_TAIL_PAD;
    return true;
}

/* A bucket copied out of a synchronized table: the window's bytes hold the table's bytes
 * from `first` on, at `at`, so that bucket `index` of `view` (a plain table over the
 * window) is the bucket, at the same bit offset within its first byte. Every probe and
 * write of a plain table then works on it unchanged. */
typedef struct cf__sync_window {
    cf__table view;
    cf__shape shape; /* the table's, not synchronized */
    uint64_t first;  /* the table's byte where the bucket starts */
    size_t at;       /* where that byte is in the window */
    size_t span;     /* bytes the bucket's bits touch */
    uint64_t index;  /* the bucket's index in view */
    uint8_t bytes[CF__SYNC_WINDOW_BYTES];
} cf__sync_window;

/* Copy bucket `bucket` of t into w: with relaxed atomic loads of the aligned words that
 * hold it and the CF__TABLE_PAD bytes a probe reads past it. */
static void cf__sync_open(const cf__table *t, uint64_t bucket, cf__sync_window *w)
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
    _Atomic uint64_t *words = cf__sync_words(t);
    for (uint64_t k = w->first >> 3; k * 8u < end; k++) {
        uint8_t b[8];
        cf__store_le64(b, atomic_load_explicit(&words[k], memory_order_relaxed));
        uint64_t from = k * 8u > w->first ? k * 8u : w->first,
                 to = k * 8u + 8u < end ? k * 8u + 8u : end;
        memcpy(w->bytes + w->at + (from - w->first), b + (from - k * 8u), (size_t)(to - from));
    }
    w->shape = *s;
    w->shape.sync = false;
    w->index = j;
    cf__table_init(&w->view, NULL, j + 1u, &w->shape, NULL);
    w->view.data = w->bytes;
}

/* Write the bucket back from w into t (the caller is its only writer): its bytes only, a
 * whole aligned word at a time, inside a section of its stripe's counter. The bits of its
 * first and last bytes that belong to its neighbours are written back as they were. */
static void cf__sync_commit(cf__table *t, uint64_t bucket, const cf__sync_window *w)
{
    atomic_uint *c = cf__sync_stripe(t, bucket);
    _Atomic uint64_t *words = cf__sync_words(t);
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
 * they were (no other writer writes the word meanwhile: the caller holds its stripe, or
 * is the table's only writer). */
static void cf__sync_word_put(cf__table *t, uint64_t k, unsigned sh, uint64_t mask, uint64_t v)
{
    _Atomic uint64_t *w = cf__sync_words(t) + k;
    cf__sync_set(w, (cf__sync_get(w) & ~(mask << sh)) | (v << sh));
}

/* Slot `slot` of bucket `bucket` of t (not semi-sorted) set to fp: the one or two aligned
 * words that hold its bits, each stored whole, the bits of every other slot as they
 * were. A reader that loads a word before or after sees the other slots the same. */
static void cf__sync_slot_put(cf__table *t, uint64_t bucket, unsigned slot, uint32_t fp)
{
    const cf__shape *s = t->shape;
    uint64_t bit = cf__slot_bit(s, bucket, slot);
    unsigned sh = (unsigned)(bit & 63u);
    cf__sync_word_put(t, bit >> 6, sh, s->fp_mask, fp);
    if (sh + s->f > 64u) /* the slot's high bits are the next word's low bits */
        cf__sync_word_put(t, (bit >> 6) + 1u, 0, s->fp_mask >> (64u - sh), fp >> (64u - sh));
}

bool cf__sync_put_if_free(cf__table *t, uint64_t bucket, uint32_t fp)
{
    const cf__shape *s = t->shape;
    if (s->semi) {
        cf__sync_window w;
        cf__sync_open(t, bucket, &w);
        if (!cf__put_if_free(&w.view, &w.shape, w.index, fp))
            return false;
        cf__sync_commit(t, bucket, &w);
        return true;
    }
    /* A bucket of one load is read through atomic words: its 8 bytes may reach into a
     * stripe another writer holds. Any other shape has one writer at a time, whose plain
     * reads race with nothing. */
    int j = s->bucket_mask ? cf__sync_bucket_find(t, bucket, 0) : cf__bucket_find(t, s, bucket, 0);
    if (j < 0)
        return false;
    cf__sync_slot_put(t, bucket, (unsigned)j, fp);
    return true;
}

void cf__sync_slot_set(cf__table *t, uint64_t bucket, unsigned slot, uint32_t fp)
{
    if (t->shape->semi) {
        cf__sync_window w;
        cf__sync_open(t, bucket, &w);
        cf__slot_set(&w.view, &w.shape, w.index, slot, fp);
        cf__sync_commit(t, bucket, &w);
        return;
    }
    /* a plain bucket's move is a section of its caller's (cf__path_seq_before) */
    cf__sync_slot_put(t, bucket, slot, fp);
}

/* Spins before a waiting writer yields its processor: about as long as a holder takes
 * for a few buckets, so that a holder that is running hands the lock on without a
 * system call, and one that is not (more threads than cores) gets the processor. */
#define CF__SYNC_SPINS 64u

bool cf__sync_wait_unless(atomic_uint *lock, const atomic_uint *gate, unsigned shut)
{
    for (unsigned spins = 0;; spins++) {
        /* read until free, then taken as cf__sync_trylock takes it */
        if (!(atomic_load_explicit(lock, memory_order_relaxed) & CF__SYNC_HELD) &&
            cf__sync_trylock(lock, 0))
            return true;
        if (gate &&
            (atomic_load_explicit((atomic_uint *)(uintptr_t)gate, memory_order_relaxed) & shut))
            return false;
        if (spins >= CF__SYNC_SPINS) {
            sched_yield();
            spins = 0;
        }
    }
}

void cf__sync_wait(atomic_uint *lock)
{
    (void)cf__sync_wait_unless(lock, NULL, 0);
}

void cf__sync_lock_all(cf__table *t)
{
    uint64_t n = cf__sync_stripes_n(t->buckets), items = t->items;
    atomic_uint *locks = cf__sync_locks(t);
    for (uint64_t k = 0; k < n; k++) {
        cf__sync_lock(locks, k);
        atomic_uint *l = &locks[k];
        unsigned v = atomic_load_explicit(l, memory_order_relaxed);
        items += (uint64_t)(int64_t)((int32_t)(v & ~CF__SYNC_HELD) / (int32_t)CF__SYNC_ONE_ITEM);
        atomic_store_explicit(l, CF__SYNC_HELD, memory_order_relaxed);
    }
    t->items = items;
}

void cf__sync_unlock_all(const cf__table *t)
{
    uint64_t n = cf__sync_stripes_n(t->buckets);
    atomic_uint *locks = cf__sync_locks(t);
    for (uint64_t k = 0; k < n; k++)
        cf__sync_unlock(locks, k);
}

void cf__sync_clear(cf__table *t)
{
    /* Bucket by bucket, each under its stripe's counter: a reader sees every bucket
     * before or after, as with deletes. Empty buckets are skipped. Slots cleared in
     * ascending order meet every fingerprint of a semi-sorted bucket too. */
    const cf__shape *s = t->shape;
    for (uint64_t x = 0; x < t->buckets; x++) {
        bool any = false;
        for (unsigned j = 0; j < s->b && !any; j++)
            any = cf__slot_get(t, s, x, j) != 0;
        if (!any)
            continue;
        cf__sync_window w;
        cf__sync_open(t, x, &w);
        for (unsigned j = 0; j < s->b; j++)
            cf__slot_set(&w.view, &w.shape, w.index, j, 0);
        cf__sync_commit(t, x, &w);
    }
    t->items = 0;
}

/* Copies of fp in bucket `bucket` of synchronized table t, read in one piece: a bucket
 * that fits the 8 bytes from its first byte (s->bucket_mask) as one word, matched in it
 * at once; plain slots of 64 bits or fewer (a widened sub-filter's 15/4, say) as one
 * word too, taken from it one by one; any other through a window. */
static CF__INLINE unsigned cf__sync_bucket_count(const cf__table *t, uint64_t bucket, uint32_t fp)
{
    const cf__shape *s = t->shape;
    if (s->bucket_mask) {
        uint64_t word = cf__sync_bucket_word(t, bucket * s->bucket_bits, s->bucket_mask);
        return cf__popcount64(s->semi ? cf__semi_match1_word(s, word, fp)
                                      : cf__lanes_equal(s, word, fp));
    }
    if (!s->semi && s->bucket_bits <= 64u) {
        uint64_t word = cf__sync_word_bit(t, bucket * s->bucket_bits);
        unsigned n = 0;
        for (unsigned j = 0; j < s->b; j++)
            n += ((word >> (j * s->f)) & s->fp_mask) == fp;
        return n;
    }
    cf__sync_window w;
    cf__sync_open(t, bucket, &w);
    return cf__bucket_count(&w.view, &w.shape, w.index, fp);
}

unsigned cf__sync_pair_count(const cf__table *t, uint64_t i1, uint64_t i2, uint32_t fp,
                             bool stop_at_one)
{
    bool semi = t->shape->semi; /* its buckets' counters, else the pair's */
    atomic_uint *c1 = semi ? cf__sync_stripe(t, i1) : cf__sync_pair_seq(t, i1, i2);
    atomic_uint *c2 = semi ? cf__sync_stripe(t, i2) : c1;
    for (;;) {
        unsigned v1 = atomic_load_explicit(c1, memory_order_acquire);
        unsigned v2 = semi ? atomic_load_explicit(c2, memory_order_acquire) : v1;
        unsigned n = cf__sync_bucket_count(t, i1, fp);
        if (n && stop_at_one)
            return n;
        if (i2 != i1)
            n += cf__sync_bucket_count(t, i2, fp);
        if (n && stop_at_one)
            return n;
        if (cf__seq_same(c1, v1) && (!semi || cf__seq_same(c2, v2)))
            return n;
    }
}
