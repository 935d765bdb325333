/*
 * table.c - bucket storage: how fingerprints are packed, how big a table is, and the
 * constants its probes use.
 *
 * A table is m buckets of b slots; a slot holds an f-bit fingerprint, 0 = empty. The slots
 * are packed back to back with no padding between slots or buckets, so the table costs
 * exactly m * b * f bits (plus 8 bytes at the end):
 *
 *   bit 0                                                              bit m*b*f
 *   |<------- bucket 0 ------->|<------- bucket 1 ------->|     |<- bucket m-1 ->|pad |
 *   | slot 0 | slot 1 |...|s b-1| slot 0 | slot 1 |...|s b-1| ... |               |8 B |
 *   |<- f ->|                                                                         |
 *
 *   slot j of bucket i starts at bit (i * b + j) * f, counted from bit 0 of byte 0
 *   (least significant bit first, so byte k holds bits 8k .. 8k+7: little-endian).
 *
 *   Example, b = 4, f = 12: a bucket is 48 bits = 6 bytes, and its four slots are
 *   the 12-bit fields at bits 0, 12, 24 and 36 of the 64-bit little-endian word loaded
 *   from byte 6 * i. One load and a few ALU operations compare all four (internal.h).
 *
 * Reading slot j of bucket i loads the 8 bytes at byte floor(bit / 8) and shifts by
 * bit % 8; since f <= 32, the slot lies inside those 64 bits, and the padding makes the
 * load legal for the last slot too.
 */
#include "internal.h"

void cf__divisor_init(cf__divisor *dv, uint64_t d)
{
    dv->d = d;
#if CF__HAVE_U128
    /* ceil(2^128 / d) = floor((2^128 - 1) / d) + 1 for every d >= 2. */
    cf__u128 c = ~(cf__u128)0 / d + 1;
    dv->c_lo = (uint64_t)c;
    dv->c_hi = (uint64_t)(c >> 64);
#else
    dv->c_lo = 0;
    dv->c_hi = 0;
#endif
}

void cf__shape_init(cf__shape *s, unsigned f, unsigned b)
{
    s->f = f;
    s->b = b;
    s->bucket_bits = f * b;
    s->fp_mask = (UINT64_C(1) << f) - 1;
    /* A bucket fits one load if it starts on a byte (then 64 bits are usable) or if it is
     * at most 57 bits wide (a start 0..7 bits into the byte leaves at least 57). */
    s->swar = (s->bucket_bits <= 64 && s->bucket_bits % 8 == 0) || s->bucket_bits <= 57;
    s->bucket_mask = 0;
    s->lane_lo = 0;
    s->lane_hi = 0;
    s->lane_low = 0;
    if (s->swar) {
        s->bucket_mask = s->bucket_bits == 64 ? UINT64_MAX : (UINT64_C(1) << s->bucket_bits) - 1;
        for (unsigned j = 0; j < b; j++)
            s->lane_lo |= UINT64_C(1) << (j * f);
        s->lane_hi = s->lane_lo << (f - 1);
        s->lane_low = s->lane_lo * ((UINT64_C(1) << (f - 1)) - 1);
    }
}

/* The load each bucket size reaches before its first failed insert, less a margin, in
 * parts per CF__LOAD_SCALE (index = bucket size; sizes past the table use the last).
 * b = 2, 4, 8 are the paper's 84 %, 95 % and 98 %, which our breadth-first eviction
 * exceeds; b = 1 is the 50 % threshold of 2-choice hashing, less a margin because small
 * tables fluctuate around it; the others lie between their neighbours. */
static const uint16_t cf__sizing_load[] = {
    0, 4500, 8400, 9100, 9500, 9600, 9700, 9750, 9800,
};

bool cf__buckets_for(const cf__shape *s, uint64_t capacity, uint64_t *buckets)
{
    size_t n = sizeof cf__sizing_load / sizeof cf__sizing_load[0];
    uint64_t load = cf__sizing_load[s->b < n ? s->b : n - 1];
    uint64_t scaled, m;
    /* m = ceil(capacity * SCALE / (b * load)), in integers: no rounding surprises. */
    if (!cf__mul_u64(capacity, CF__LOAD_SCALE, &scaled))
        return false;
    uint64_t per_bucket = (uint64_t)s->b * load;
    m = scaled / per_bucket + (scaled % per_bucket != 0);
    /* Even, so that cf__alt has no fixed point; at least 2. */
    m += m & 1u;
    if (m < 2)
        m = 2;
    size_t bytes;
    if (!cf__table_bytes(s, m, &bytes))
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
    total = bits / 8 + (bits % 8 != 0) + CF__TABLE_PAD;
    if (total > CF__MAX_TABLE_BYTES || total > SIZE_MAX)
        return false;
    *bytes = (size_t)total;
    return true;
}
