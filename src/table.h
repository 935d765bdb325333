/*
 * table.h - bucket storage: how fingerprints are packed into a table, how big a table is,
 * and every probe that reads or writes its bytes. A change of layout touches this file and
 * table.c only; the rest of the library sees buckets and slots.
 *
 * A table is m buckets of b slots; a slot holds an f-bit fingerprint, 0 = empty. The slots
 * are packed back to back with no padding between slots or buckets, so the table costs
 * exactly m * b * f bits (plus CF__TABLE_PAD bytes at the end):
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
 *   from byte 6 * i. One load and a few ALU operations compare all four.
 *
 * Reading slot j of bucket i loads the 8 bytes at byte floor(bit / 8) and shifts by
 * bit % 8; since f <= 32, the slot lies inside those 64 bits, and the padding makes the
 * load legal for the last slot too.
 *
 * Semi-sorted buckets (CF_SEMI_SORT) pack 4 slots into 4 (f - 1) bits instead, as the
 * section "Semi-sorted buckets" below describes; the slot and bucket calls hide that.
 *
 * Two families of probes: those taking a cf__shape, with widths read at run time (any
 * shape), and the `_fb` templates (named for their last two parameters), always
 * inlined with the fingerprint width F and bucket size B as constants (fast.c compiles them
 * per fast shape; F = 0 falls back to the first family).
 */
#ifndef CF_TABLE_H
#define CF_TABLE_H

#include "bits.h"

#include <stdatomic.h>

/* Bytes of zero padding after every table, so that a probe may always load 8 bytes at
 * the byte where a bucket or slot starts, even for the last one. */
#define CF__TABLE_PAD 8u

/* The shapes whose probes are compiled with constant widths (fast.c): every bucket is a
 * whole number of bytes, at most 8, so one unaligned 64-bit load at byte b * f / 8 * i
 * holds bucket i with no shift. These are the paper's shapes, the library's default
 * (b = 4, f = 12) and the Redis module's (b = 2, f = 12). Any other shape takes the same
 * code with its widths read from the shape at run time. */
#define CF__FAST_SHAPES(X) X(8, 4) X(12, 4) X(16, 4) X(8, 2) X(12, 2) X(16, 2) X(8, 8)

/* The semi-sorted shapes (b = 4, CF_SEMI_SORT) whose probes are compiled with constant
 * widths, each with a table of prefixes spread for it (scripts/gen-semi-table): widths
 * whose bucket, 4 (f - 1) bits, is a whole number of bytes (f odd) and whose spread
 * prefixes, 3 (f - 4) + 4 bits, fit 32; they take the memory of the 8- and 12-bit fast
 * shapes. */
#define CF__SEMI_FAST_SHAPES(X) X(9) X(13)

/* The bucket size the templates are given for semi-sorted buckets (see CF__SEMI_T). */
#define CF__SEMI_B 0x100u

#define CF__CODE_ENUM(F, B)   CF__CODE_##F##_##B,
#define CF__CODE_SEMI_ENUM(F) CF__CODE_SEMI_##F,
/* CF__CODE_GENERIC: any shape without code of its own, widths read at run time (F = B =
 * 0). CF__CODE_SEMI: semi-sorted buckets of one load (8 <= f <= 16), widths read at run
 * time (F = 0, B = CF__SEMI_B); CF__CODE_SEMI_F: those of CF__SEMI_FAST_SHAPES (F = f,
 * B = CF__SEMI_B). Then the fast shapes. */
enum cf__code {
    CF__CODE_GENERIC = 0,
    CF__CODE_SEMI,
    CF__SEMI_FAST_SHAPES(CF__CODE_SEMI_ENUM) CF__FAST_SHAPES(CF__CODE_ENUM) CF__CODES
};
#undef CF__CODE_ENUM
#undef CF__CODE_SEMI_ENUM

/* A shape is what every table of one filter shares: fingerprint width f, bucket size b and
 * the masks derived from them. The shapes of b <= CF__STATIC_SHAPE_B are constants
 * (cf__shape_static), so that a filter of one of them carries a pointer, not a copy. */
typedef struct cf__shape {
    uint8_t f;   /* fingerprint bits, 4..32 */
    uint8_t b;   /* slots per bucket, 1..255 */
    uint8_t ext; /* f less the first sub-filter's width (0 but for wider ones) */
    /* (bits of one byte, so that seg fits before bucket_bits: a filter that keeps a copy
     * of its shape keeps 48 bytes) */
    bool swar : 1;        /* see lane_lo */
    bool semi : 1;        /* semi-sorted buckets (b = 4; see cf__semi_get) */
    bool sync : 1;        /* tables read by threads beside their writer: see "Synchronized
                             tables" (a filter made with CF_CONCURRENT) */
    bool exact : 1;       /* RedisBloom's layout (f = 8, plain): tables without
                             CF__TABLE_PAD, read a byte a slot (redisbloom.c), so that a
                             power-of-two table takes its allocator's size class exactly */
    uint8_t seg;          /* segment bits of the mapping (mapping.h): 0 for format 2's
                             any-size mapping, else CF_SEGMENT_BITS */
    uint16_t bucket_bits; /* b * f, or 4 (f - 1) semi-sorted */
    uint64_t fp_mask;     /* f low bits set */
    /* The SWAR probe: when a whole bucket fits in one 64-bit load, the b slots are
     * compared at once as b lanes of f bits. A semi-sorted bucket that fits one load
     * (8 <= f <= 16; see cf__semi_match) has its four suffixes compared as four lanes of
     * f - 4 bits, and these describe those lanes; else they are 0. */
    uint64_t bucket_mask; /* bucket_bits low bits set */
    uint64_t lane_lo;     /* bit 0 of every lane */
    union {
        uint64_t lane_hi;     /* bit f - 1 of every lane */
        uint64_t semi_gather; /* semi-sorted: the multiplier of cf__semi_match */
    };
    uint64_t lane_low; /* bits 0..f-2 of every lane (of a suffix) */
} cf__shape;

/* Where the sub-filters after the first differ from it: sub-filter k has base * scale
 * buckets, scale = expansion^k (see cf__buckets). */
typedef struct cf__grown {
    uint64_t base;         /* buckets of the filter's first sub-filter, where alternates are made */
    uint64_t scale;        /* expansion^k, >= 2 */
    cf__divisor per_scale; /* for bucket / scale */
} cf__grown;

typedef struct cf__table {
    uint8_t *data;          /* bucket_bits * buckets bits, then CF__TABLE_PAD zero bytes */
    uint64_t buckets;       /* always even (see cf__alt) */
    uint64_t items;         /* occupied slots */
    const cf__shape *shape; /* its width's: wider than the first's after growth that keeps
                               the false-positive rate (see cf__fp_in) */
    const cf__grown *grown; /* NULL for the first sub-filter (and any of its size) */
} cf__table;

/* Bucket sizes up to this have constant shapes for every fingerprint width. */
#define CF__STATIC_SHAPE_B 8u

/* The constant shape of f-bit fingerprints in buckets of b <= CF__STATIC_SHAPE_B slots,
 * semi-sorted or not (with ext 0), or NULL for larger buckets. */
CF__HIDDEN const cf__shape *cf__shape_static(unsigned f, unsigned b, bool semi);

/* The constant exact shape (RedisBloom's layout: 8-bit slots) of buckets of
 * b <= CF__STATIC_SHAPE_B slots, or NULL for larger buckets. */
CF__HIDDEN const cf__shape *cf__shape_static_exact(unsigned b);

/* Which code the shape's tables take: their own (fast.c) or the generic. */
CF__HIDDEN enum cf__code cf__code_of(const cf__shape *s);

/* The shape of f-bit fingerprints in buckets of b slots, semi-sorted (b = 4) or not. */
CF__HIDDEN void cf__shape_init(cf__shape *s, unsigned f, unsigned b, bool semi);

/* Bytes that hold the slots of `buckets` buckets: their bits rounded up to whole bytes,
 * no padding (the length of a table in a file). The caller has checked the size. */
static inline uint64_t cf__data_bytes(const cf__shape *s, uint64_t buckets)
{
    uint64_t bits = buckets * s->bucket_bits;
    return bits / 8 + (bits % 8 != 0);
}

/* The occupied slots of p[0, len), bytes of a table of 8-bit slots that is not
 * semi-sorted (RedisBloom's layout), where every byte is a slot and any range of bytes is
 * whole slots. */
static inline uint64_t cf__byte_slots_used(const uint8_t *p, size_t len)
{
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += p[i] != 0;
    return n;
}

/* The buckets whose every bit lies in the first `bytes` bytes of a table. */
static inline uint64_t cf__buckets_within(const cf__shape *s, uint64_t bytes)
{
    return bytes * 8 / s->bucket_bits;
}

/* Bytes a table of `buckets` buckets needs (padding included), or false if it exceeds
 * the limits of table.c (CF__MAX_TABLE_BYTES, CF__INDEX_BIAS_BITS). */
CF__HIDDEN bool cf__table_bytes(const cf__shape *s, uint64_t buckets, size_t *bytes);
/* The number of buckets for `capacity` items, capacity / (b * load) rounded up to an even
 * number, and the table's bytes; false if it does not fit the limits. */
CF__HIDDEN bool cf__buckets_for(const cf__shape *s, uint64_t capacity, uint64_t *buckets,
                                size_t *bytes);

/* The padding after a table of shape s: none for an exact shape. */
static inline unsigned cf__table_pad(const cf__shape *s)
{
    return s->exact ? 0u : CF__TABLE_PAD;
}

/* Bytes a table of `buckets` buckets holds, padding included; its size was checked. */
static inline size_t cf__table_size(const cf__shape *s, uint64_t buckets)
{
    return (size_t)cf__data_bytes(s, buckets) + cf__table_pad(s);
}

/* Bytes of the block a table of `buckets` buckets takes in memory: cf__table_size, and
 * for a synchronized shape its stripe counters (see "Synchronized tables"); false if that
 * overflows. */
CF__HIDDEN bool cf__table_block(const cf__shape *s, uint64_t buckets, size_t *bytes);

/* Table t, empty (its block zeroed, if it has one: cf__table_block bytes, which the
 * caller sized), of `buckets` buckets of the given shape; grown is NULL for a table of the
 * first sub-filter's size. */
static inline void cf__table_init(cf__table *t, uint8_t *data, uint64_t buckets,
                                  const cf__shape *shape, const cf__grown *grown)
{
    t->shape = shape;
    size_t block = cf__table_size(shape, buckets);
    if (shape->sync)
        (void)cf__table_block(shape, buckets, &block); /* checked when it was allocated */
    if (data)
        memset(data, 0, block);
    t->data = data;
    t->buckets = buckets;
    t->items = 0;
    t->grown = grown;
}

/* Count the occupied slots of buckets [from, to) of the table whose bytes are `data` into
 * *used; false if a bucket is not in canonical form (a semi-sorted bucket with a code
 * past CF__SEMI_CODES or fingerprints out of order) or, in a table wider than the first
 * (s->ext > 0), holds a fingerprint whose low f - ext bits are 0: no filter writes
 * either. data may be a mapped file: probes never read past the last bucket's byte plus
 * CF__TABLE_PAD, which in a file are the next table, zeros or the file sum. */
CF__HIDDEN bool cf__table_scan(const cf__shape *s, const uint8_t *data, uint64_t from, uint64_t to,
                               uint64_t *used);

/* Are the bits past the last slot of a table of `buckets` buckets, in its last byte, zero? */
CF__HIDDEN bool cf__table_tail_clear(const cf__shape *s, const uint8_t *data, uint64_t buckets);

/* The field of `mask` (its low bits set) at bit `bit` of data: a 64-bit load at the byte
 * where it starts, shifted, so it must end within 57 bits of that byte's start. */
static inline uint64_t cf__bits_get(const uint8_t *data, uint64_t bit, uint64_t mask)
{
    return (cf__load_le64(data + (bit >> 3)) >> (bit & 7u)) & mask;
}

static inline void cf__bits_put(uint8_t *data, uint64_t bit, uint64_t mask, uint64_t v)
{
    uint8_t *p = data + (bit >> 3);
    unsigned shift = (unsigned)(bit & 7u);
    cf__store_le64(p, (cf__load_le64(p) & ~(mask << shift)) | (v << shift));
}

/* ------------------------------------------------------------------------------------ */
/* Semi-sorted buckets                                                                  */
/* ------------------------------------------------------------------------------------ */
/* A semi-sorted bucket (CF_SEMI_SORT, b = 4) keeps its four fingerprints in ascending
 * order, empty slots (0) first. Each splits into its top 4 bits, the prefix, and the
 * f - 4 bits below, the suffix. The four prefixes, ascending, are one of C(19, 4) = 3876
 * multisets: their rank (cf__semi_rank), a 12-bit code, takes the place of their 16 bits,
 * so that a slot costs f - 1 bits. From the bucket's first bit:
 *
 *   | code (12 bits) | suffix 0 (f - 4) | suffix 1 | suffix 2 | suffix 3 |
 *
 * A slot's position is its rank in the bucket: setting one re-sorts the bucket, which
 * moves only the slots below it (an emptied slot goes first), so a walk that clears slots
 * in ascending order still meets each of the others once. */
#define CF__SEMI_BUCKET      4u /* the one bucket size it has */
#define CF__SEMI_PREFIX_BITS 4u
#define CF__SEMI_CODE_BITS   12u
#define CF__SEMI_CODES       3876u /* C(19, 4) */
#define CF__SEMI_PREFIX_MASK 0xFu
#define CF__SEMI_CODE_MASK   0xFFFu
/* Widths whose semi-sorted bucket, 4 (f - 1) bits starting 0 or 4 bits into a byte, fits
 * one 64-bit load, and whose suffixes (f - 4 bits) are wide enough for cf__semi_match's
 * gathering multiply. */
#define CF__SEMI_SWAR_MIN_F  8u
#define CF__SEMI_SWAR_MAX_F  16u

/* The prefixes of each code, p0 | p1 << 4 | p2 << 8 | p3 << 12, ascending; 0 for the
 * codes past CF__SEMI_CODES (table.c, from scripts/gen-semi-table). */
CF__HIDDEN extern const uint16_t cf__semi_prefixes[1u << CF__SEMI_CODE_BITS];

/* The same prefixes spread for each width f of CF__SEMI_FAST_SHAPES, p_j at bit j (f - 4),
 * the spacing of the bucket's suffixes (cf__semi_match_fb). */
#define CF__SEMI_SPREAD_DECL(F)                                                                    \
    CF__HIDDEN extern const uint32_t cf__semi_spread_##F[1u << CF__SEMI_CODE_BITS];
CF__SEMI_FAST_SHAPES(CF__SEMI_SPREAD_DECL)
#undef CF__SEMI_SPREAD_DECL

/* The code of ascending prefixes p0 <= .. <= p3 packed as nibbles, p_j at bits 4 j: their
 * rank in the combinatorial number system, sum C(p_i + i, i + 1). */
static inline unsigned cf__semi_rank_nibbles(unsigned pre)
{
    unsigned q0 = pre & CF__SEMI_PREFIX_MASK, q1 = (pre >> 4 & CF__SEMI_PREFIX_MASK) + 1;
    unsigned q2 = (pre >> 8 & CF__SEMI_PREFIX_MASK) + 2,
             q3 = (pre >> 12 & CF__SEMI_PREFIX_MASK) + 3;
    return q0 + q1 * (q1 - 1) / 2 + q2 * (q2 - 1) * (q2 - 2) / 6 +
           q3 * (q3 - 1) * (q3 - 2) * (q3 - 3) / 24;
}

/* The code of four ascending fingerprints of suffix width w: their prefixes' rank. */
static inline unsigned cf__semi_rank(const uint32_t fp[4], unsigned w)
{
    return cf__semi_rank_nibbles(fp[0] >> w | (fp[1] >> w) << 4 | (fp[2] >> w) << 8 |
                                 (fp[3] >> w) << 12);
}

/* The four fingerprints of semi-sorted bucket `bucket`, ascending, into fp; returns its
 * code (which only a corrupt table has at CF__SEMI_CODES or past). Out of line, like the
 * other semi-sorted calls below, so that the generic probes that branch to them stay small
 * enough to inline. */
CF__HIDDEN unsigned cf__semi_get(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                 uint32_t fp[4]);

/* Write fp[0..3], in any order, into semi-sorted bucket `bucket`: sorted, coded. */
CF__HIDDEN void cf__semi_put(cf__table *t, const cf__shape *s, uint64_t bucket, uint32_t fp[4]);

/* Put fp into semi-sorted bucket `bucket` if it has an empty slot; false if not. */
CF__HIDDEN bool cf__semi_put_if_free(cf__table *t, const cf__shape *s, uint64_t bucket,
                                     uint32_t fp);

/* Slot `slot` (in ascending order) of semi-sorted bucket `bucket`, read and written. */
CF__HIDDEN uint32_t cf__semi_slot_get(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                      unsigned slot);
CF__HIDDEN void cf__semi_slot_set(cf__table *t, const cf__shape *s, uint64_t bucket, unsigned slot,
                                  uint32_t fp);

/* The slots of a semi-sorted bucket (its bits in `word`) that hold fp, a bit per slot (in
 * the bucket's ascending order), for a bucket of one load (s->bucket_mask set), compared without
 * decoding: its prefixes, from the table, as four 4-bit lanes against fp's, its suffixes
 * as four lanes of w = f - 4 bits against fp's; each comparison leaves the top bit of
 * every equal lane set (exact: no carry crosses a lane), and a multiply gathers the four
 * bits of each into bits 0..3, where they are and-ed. The top bit of suffix lane j, at
 * bit j w after a shift by w - 1, times semi_gather = sum of 2^((3 - k)(w - 1)), lands
 * on bit 3 (w - 1) + j + (j - k)(w - 1) for term k, inside bits 3 (w - 1) .. + 3 only for
 * k = j when w >= 4, and every term on a bit of its own (no carries); likewise for the
 * prefixes (w = 4, shifted by 3: 0x249 gathers into bits 9..12). */
static inline unsigned cf__semi_match1_word(const cf__shape *s, uint64_t word, uint32_t fp)
{
    unsigned w = s->f - CF__SEMI_PREFIX_BITS;
    uint64_t x = cf__semi_prefixes[word & CF__SEMI_CODE_MASK] ^ (UINT64_C(0x1111) * (fp >> w));
    uint64_t zp = ~(((x & 0x7777u) + 0x7777u) | x | 0x7777u) & 0x8888u;
    uint64_t y = (word >> CF__SEMI_CODE_BITS) ^ (s->lane_lo * (fp & (s->fp_mask >> 4)));
    uint64_t hi = s->lane_low + s->lane_lo;
    uint64_t zs = ~(((y & s->lane_low) + s->lane_low) | y | s->lane_low) & hi;
    uint64_t gp = ((zp >> 3) * 0x249u) >> 9;
    uint64_t gs = ((zs >> (w - 1)) * s->semi_gather) >> (3 * (w - 1));
    return (unsigned)(gp & gs) & 0xFu;
}

/* The same for bucket `bucket` of t (word: the bucket, s->bucket_mask of it). */
static inline unsigned cf__semi_match1(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                       uint32_t fp)
{
    return cf__semi_match1_word(s, cf__bits_get(t->data, bucket * s->bucket_bits, s->bucket_mask),
                                fp);
}

/* The same for any semi-sorted bucket (decoded where it takes more than one load). */
CF__HIDDEN unsigned cf__semi_match(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                   uint32_t fp);

/* ------------------------------------------------------------------------------------ */
/* Slots and buckets of any shape                                                       */
/* ------------------------------------------------------------------------------------ */

static CF__INLINE uint64_t cf__bucket_bit(const cf__shape *s, uint64_t bucket)
{
    return bucket * s->bucket_bits;
}

static inline uint64_t cf__slot_bit(const cf__shape *s, uint64_t bucket, unsigned slot)
{
    return bucket * s->bucket_bits + (uint64_t)slot * s->f;
}

/* Slot `slot` of a bucket that is not semi-sorted. */
static inline uint32_t cf__slot_get_plain(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                          unsigned slot)
{
    return (uint32_t)cf__bits_get(t->data, cf__slot_bit(s, bucket, slot), s->fp_mask);
}

static inline uint32_t cf__slot_get(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                    unsigned slot)
{
    if (CF__UNLIKELY(s->semi))
        return cf__semi_slot_get(t, s, bucket, slot);
    return cf__slot_get_plain(t, s, bucket, slot);
}

static inline void cf__slot_set(cf__table *t, const cf__shape *s, uint64_t bucket, unsigned slot,
                                uint32_t fp)
{
    if (CF__UNLIKELY(s->semi)) {
        cf__semi_slot_set(t, s, bucket, slot, fp);
        return;
    }
    cf__bits_put(t->data, cf__slot_bit(s, bucket, slot), s->fp_mask, fp);
}

/* The whole bucket as b lanes of f bits (only for shapes with s->swar). */
static inline uint64_t cf__bucket_word(const cf__table *t, const cf__shape *s, uint64_t bucket)
{
    uint64_t bit = bucket * s->bucket_bits;
    return (cf__load_le64(t->data + (bit >> 3)) >> (bit & 7u)) & s->bucket_mask;
}

/* The fingerprints bucket holds, into out[0 .. count) (b entries of room); the count. One
 * load for a shape whose bucket fits a word. */
static inline unsigned cf__bucket_fps(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                      uint32_t *out)
{
    unsigned n = 0;
    if (s->swar) {
        for (uint64_t w = cf__bucket_word(t, s, bucket); w;) {
            unsigned at = cf__ctz64(w) / s->f * s->f;
            out[n++] = (uint32_t)((w >> at) & s->fp_mask);
            w &= ~(s->fp_mask << at);
        }
        return n;
    }
    for (unsigned j = 0; j < s->b; j++)
        if ((out[n] = cf__slot_get(t, s, bucket, j)) != 0)
            n++;
    return n;
}

/* The top bit of every lane of w that equals fp. Exact: no carry crosses a lane, since
 * (lane & low) + low < 2^f. */
static inline uint64_t cf__lanes_equal(const cf__shape *s, uint64_t w, uint32_t fp)
{
    uint64_t x = w ^ (s->lane_lo * fp);
    uint64_t y = (x & s->lane_low) + s->lane_low;
    return ~(y | x | s->lane_low) & s->lane_hi;
}

static inline bool cf__bucket_has(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                  uint32_t fp)
{
    if (CF__LIKELY(s->swar))
        return cf__lanes_equal(s, cf__bucket_word(t, s, bucket), fp) != 0;
    if (s->semi)
        return cf__semi_match(t, s, bucket, fp) != 0;
    for (unsigned j = 0; j < s->b; j++)
        if (cf__slot_get(t, s, bucket, j) == fp)
            return true;
    return false;
}

static inline unsigned cf__bucket_count(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                        uint32_t fp)
{
    if (CF__LIKELY(s->swar))
        return cf__popcount64(cf__lanes_equal(s, cf__bucket_word(t, s, bucket), fp));
    if (s->semi)
        return cf__popcount64(cf__semi_match(t, s, bucket, fp));
    unsigned n = 0;
    for (unsigned j = 0; j < s->b; j++)
        n += cf__slot_get(t, s, bucket, j) == fp;
    return n;
}

/* Every slot of the bucket holds fp. */
static inline bool cf__bucket_all(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                  uint32_t fp)
{
    if (CF__LIKELY(s->swar))
        return cf__lanes_equal(s, cf__bucket_word(t, s, bucket), fp) == s->lane_hi;
    if (s->semi)
        return cf__semi_match(t, s, bucket, fp) == 0xFu;
    for (unsigned j = 0; j < s->b; j++)
        if (cf__slot_get(t, s, bucket, j) != fp)
            return false;
    return true;
}

/* The first slot of the bucket holding fp (fp = 0: the first empty slot), or -1. */
static inline int cf__bucket_find(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                  uint32_t fp)
{
    if (CF__LIKELY(s->swar)) {
        uint64_t m = cf__lanes_equal(s, cf__bucket_word(t, s, bucket), fp);
        return m ? (int)(cf__ctz64(m) / s->f) : -1;
    }
    if (s->semi) {
        unsigned m = cf__semi_match(t, s, bucket, fp);
        return m ? (int)cf__ctz64(m) : -1;
    }
    for (unsigned j = 0; j < s->b; j++)
        if (cf__slot_get(t, s, bucket, j) == fp)
            return (int)j;
    return -1;
}

/* Put fp into the first free slot of bucket; false if it has none. */
static inline bool cf__put_if_free(cf__table *t, const cf__shape *s, uint64_t bucket, uint32_t fp)
{
    if (CF__UNLIKELY(s->semi))
        return cf__semi_put_if_free(t, s, bucket, fp);
    int j = cf__bucket_find(t, s, bucket, 0);
    if (j < 0)
        return false;
    cf__slot_set(t, s, bucket, (unsigned)j, fp);
    t->items++;
    return true;
}

/* Start fetching bucket i of a table of any shape, for reading or for writing. */
static inline void cf__bucket_prefetch(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                       bool write)
{
    const uint8_t *p = t->data + ((bucket * s->bucket_bits) >> 3);
    /* The builtin takes its read/write hint as a literal only. */
    if (write)
        CF__PREFETCH(p, 1);
    else
        CF__PREFETCH(p, 0);
}

/* ------------------------------------------------------------------------------------ */
/* Synchronized tables (shape->sync)                                                    */
/* ------------------------------------------------------------------------------------ */
/* The tables of a filter made with CF_CONCURRENT are read by lookups that take no lock
 * while a writer changes them. Their block has, after the table's bytes, a sequence
 * counter for each stripe of CF__SYNC_STRIPE_BUCKETS buckets:
 *
 *   | cf__table_size bytes | 0-7 zero bytes to a multiple of 8 | a 4-byte counter per
 *   stripe | a 4-byte writers' lock per stripe | CF__SYNC_TAIL_PAD bytes |
 *
 * Every access to such a table's bytes that may race is an atomic access of an aligned
 * 64-bit word; a writer's plain reads race with nothing (one writer at a time; readers
 * only read). A writer that moves a fingerprint makes the counter of that move odd,
 * writes, and makes it even again (cf__seq_begin, cf__seq_end). A reader notes the
 * counter its two buckets go under, reads the buckets, and if it finds nothing checks
 * that the counter is still what it was, and even (cf__seq_same): then no fingerprint
 * that could answer it moved while it read them (cf__sync_pair_count).
 *
 * Which counter. A lookup of a key whose fingerprint is fp and whose buckets are i1 and i2
 * is answered only by a slot of i1 or i2 holding fp. A fingerprint's other bucket depends
 * only on its bucket and itself, so such a one in i1 has i2 as its other bucket, and one
 * in i2 has i1: it belongs to the pair {i1, i2}. So only a move of one of the pair's own
 * fingerprints between i1 and i2 can hide the answer from a reader; every other write
 * leaves the slots it answers from as they were, a whole aligned word being stored at
 * once. A move between buckets a and b of plain buckets goes under one counter, that of
 * the stripe of the lower of a and b (cf__sync_pair_seq): one counter for a reader to
 * note, where one per bucket were two. A semi-sorted bucket is encoded as a whole, so
 * that any write of it changes the bits of fingerprints of other pairs: its writes go
 * under its own stripe's counter, and its readers note both buckets' counters.
 *
 * Memory ordering (C11, the sequence lock of Boehm's "Can seqlocks get along with
 * programming language memory models?"): a writer stores the odd count relaxed, then a
 * release fence, then the data (relaxed atomic stores of whole aligned words), then the
 * even count with release; a reader loads the count with acquire, the data relaxed, then
 * an acquire fence, then the count again. If the reader's two loads of the count are
 * equal and even, no store of that writer's section reached its data loads.
 *
 * Which writes are sections: every move of a plain bucket's fingerprint, from before its
 * copy into its new bucket until its old slot is overwritten (an eviction path's writes,
 * cf__path_seq_before and cf__path_seq_after), so that a reader that finds nothing can
 * tell a fingerprint moved between its buckets while it read, and a count does not see a
 * moving one twice. A new fingerprint put into a free slot, or a slot cleared for a
 * delete, changes what a lookup of that one key finds while its add or delete is under
 * way, and no other slot's bits: no section, so that readers beside a writer rarely see
 * a counter change. Every write of a semi-sorted bucket is a section of its stripe.
 *
 * Several writers. Each stripe also has a writers' lock (cf__sync_lock), which readers
 * never touch. A stripe starts on a 64-bit word (256 buckets of any width are a multiple
 * of 64 bits), so the aligned words a writer stores belong to the stripes it holds, and
 * writers of other stripes run beside it (and fills that hold none: "Fills of free slots
 * without the stripe", below). What a writer reads
 * beyond its stripes (a probe's 8 bytes may reach into the next) goes through atomic
 * loads too. The lock word also counts the items its holders added less those they
 * removed since the table's count last took them in (cf__sync_lock_all), so that writers
 * of different stripes share no counter. */

/* Buckets per stripe: a reader beside a writer retries only when the writer moves a
 * fingerprint in one of the 2 x 256 buckets around its own two, and the counters cost 4
 * bytes per 256 buckets (0.26 % of a table of 6-byte buckets). Larger stripes measured no
 * faster (build/cf-bench-concurrent; docs/PERFORMANCE.md, "Tuned constants"). */
#define CF__SYNC_STRIPE_SHIFT   8u
#define CF__SYNC_STRIPE_BUCKETS (UINT64_C(1) << CF__SYNC_STRIPE_SHIFT)

/* The low bits of two counters held in one 64-bit value: either odd is a section open. */
#define CF__SYNC_ODD_PAIR UINT64_C(0x100000001)

/* Bytes after the stripe counters: the second aligned word cf__sync_word_bit loads for the
 * last bucket may reach past the counters. */
#define CF__SYNC_TAIL_PAD 8u

_Static_assert(sizeof(_Atomic uint64_t) == sizeof(uint64_t) &&
                   sizeof(atomic_uint) == sizeof(unsigned),
               "synchronized tables access their bytes and counters as atomics of their size");

static inline uint64_t cf__sync_stripes_n(uint64_t buckets)
{
    return (buckets + CF__SYNC_STRIPE_BUCKETS - 1) >> CF__SYNC_STRIPE_SHIFT;
}

/* The stripe counters start at the table's size rounded up to 8 bytes: the last aligned
 * word a reader loads for the table's padding ends there. */
static inline size_t cf__sync_stripes_at(const cf__shape *s, uint64_t buckets)
{
    size_t size = cf__table_size(s, buckets);
    return size + (8u - size % 8u) % 8u;
}

/* The counter of the stripe that holds `bucket`. */
static inline atomic_uint *cf__sync_stripe(const cf__table *t, uint64_t bucket)
{
    atomic_uint *c = (atomic_uint *)(void *)(t->data + cf__sync_stripes_at(t->shape, t->buckets));
    return &c[bucket >> CF__SYNC_STRIPE_SHIFT];
}

/* The writers' locks of t's stripes, one word each: bit 0 held, the bits above a count
 * (mod 2^31) of items added less items removed by its holders since cf__sync_lock_all
 * last took it in. */
static inline atomic_uint *cf__sync_locks(const cf__table *t)
{
    return cf__sync_stripe(t, 0) + cf__sync_stripes_n(t->buckets);
}

#define CF__SYNC_HELD     1u
#define CF__SYNC_ONE_ITEM 2u /* an item in the lock word's count */

/* The stripe whose counter moves between buckets a and b go under, for plain buckets: the
 * lower one's (a writer of such a move holds both stripes). No branch: which of a
 * lookup's two buckets is the lower is a coin toss. */
static inline uint64_t cf__sync_pair_stripe(uint64_t a, uint64_t b)
{
    return (a < b ? a : b) >> CF__SYNC_STRIPE_SHIFT;
}

/* That counter, of table t. */
static inline atomic_uint *cf__sync_pair_seq(const cf__table *t, uint64_t a, uint64_t b)
{
    return &cf__sync_stripe(t, 0)[cf__sync_pair_stripe(a, b)];
}

/* Take the lock of stripe `stripe` of the table whose locks are `locks` (spinning, then
 * yielding: cf__sync_wait). */
CF__HIDDEN void cf__sync_wait(atomic_uint *lock);

/* cf__sync_wait, but false (the lock not taken) once a bit of `shut` is set in `gate`:
 * the word by which the stripes' owner says that it holds every stripe for good (for a
 * concurrent filter, `meta`: concurrent.h), so that waiting would never end. */
CF__HIDDEN bool cf__sync_wait_unless(atomic_uint *lock, const atomic_uint *gate, unsigned shut);

/* The lock of stripe `stripe` if no one holds it; false if someone does. One atomic or
 * of the held bit (x86: lock bts): on a held lock it changes nothing, so the holder's own
 * stores to its word (the count, the release) lose nothing to it. */
static inline bool cf__sync_trylock(atomic_uint *locks, uint64_t stripe)
{
    return !(atomic_fetch_or_explicit(&locks[stripe], CF__SYNC_HELD, memory_order_acquire) &
             CF__SYNC_HELD);
}

static inline void cf__sync_lock(atomic_uint *locks, uint64_t stripe)
{
    if (CF__UNLIKELY(!cf__sync_trylock(locks, stripe)))
        cf__sync_wait(&locks[stripe]);
}

static inline bool cf__sync_lock_unless(atomic_uint *locks, uint64_t stripe,
                                        const atomic_uint *gate, unsigned shut)
{
    return cf__sync_trylock(locks, stripe) || cf__sync_wait_unless(&locks[stripe], gate, shut);
}

/* The lock of stripe `stripe` given up, its holder having added d items to the stripe
 * (-1, 0 or +1) since it counted last: one store for both. The caller holds the lock, so
 * CF__SYNC_HELD is set in the word: one add clears it and counts the items. */
static inline void cf__sync_unlock_n(atomic_uint *locks, uint64_t stripe, int d)
{
    atomic_uint *l = &locks[stripe];
    unsigned v = atomic_load_explicit(l, memory_order_relaxed);
    atomic_store_explicit(l, v + ((unsigned)d * CF__SYNC_ONE_ITEM - CF__SYNC_HELD),
                          memory_order_release);
}

static inline void cf__sync_unlock(atomic_uint *locks, uint64_t stripe)
{
    cf__sync_unlock_n(locks, stripe, 0);
}

/* An item added to (+1) or removed from (-1) stripe `stripe`, whose lock the caller
 * holds. */
static inline void cf__sync_count(atomic_uint *locks, uint64_t stripe, int d)
{
    atomic_uint *l = &locks[stripe];
    unsigned v = atomic_load_explicit(l, memory_order_relaxed);
    atomic_store_explicit(l, v + (unsigned)d * CF__SYNC_ONE_ITEM, memory_order_relaxed);
}

/* Every stripe's lock, in order (what a writer of the whole table holds: no writer of a
 * stripe runs beside it), with the counts of the lock words taken into t->items. */
CF__HIDDEN void cf__sync_lock_all(cf__table *t);
CF__HIDDEN void cf__sync_unlock_all(const cf__table *t);

static inline _Atomic uint64_t *cf__sync_words(const cf__table *t)
{
    return (_Atomic uint64_t *)(void *)t->data;
}

/* Word w of a synchronized table loaded (relaxed) in the order cf__load_le64 reads its
 * bytes, and stored (relaxed) from that order: every access to its words goes through
 * these two. */
static inline uint64_t cf__sync_get(_Atomic uint64_t *w)
{
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void cf__sync_set(_Atomic uint64_t *w, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    atomic_store_explicit(w, v, memory_order_relaxed);
}

/* The bits of word w where `delta` has ones flipped in one atomic step (an exclusive or
 * commutes with the byte order): a writer of some slots of a word never undoes another's
 * write of its other slots meanwhile. */
static inline void cf__sync_flip(_Atomic uint64_t *w, uint64_t delta)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    delta = __builtin_bswap64(delta);
#endif
    atomic_fetch_xor_explicit(w, delta, memory_order_relaxed);
}

/* Word w set to `want` if it still holds *expect (both in cf__sync_get's order); else false
 * with *expect what it holds. */
static inline bool cf__sync_cas(_Atomic uint64_t *w, uint64_t *expect, uint64_t want)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint64_t e = __builtin_bswap64(*expect);
    bool ok = atomic_compare_exchange_weak_explicit(w, &e, __builtin_bswap64(want),
                                                    memory_order_relaxed, memory_order_relaxed);
    *expect = __builtin_bswap64(e);
    return ok;
#else
    return atomic_compare_exchange_weak_explicit(w, expect, want, memory_order_relaxed,
                                                 memory_order_relaxed);
#endif
}

/* A writer's section under sequence counter c: odd, then the writes, then even. */
static inline void cf__seq_begin(atomic_uint *c)
{
    unsigned v = atomic_load_explicit(c, memory_order_relaxed);
    atomic_store_explicit(c, v + 1u, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static inline void cf__seq_end(atomic_uint *c)
{
    unsigned v = atomic_load_explicit(c, memory_order_relaxed);
    atomic_store_explicit(c, v + 1u, memory_order_release);
}

/* The sections of a path of moves in a table of plain buckets, written from its free end
 * back to its root: each write brings one fingerprint into a slot (`next`, the counter of
 * its move; NULL for the path's new fingerprint, whose put is no section) and displaces
 * the one whose section is open (`open`; NULL at the free end). A move's section spans
 * its copy and the overwrite of its old slot, the next write; two moves under the same
 * counter share one section. Before the write: */
static inline void cf__path_seq_before(atomic_uint *open, atomic_uint *next)
{
    if (next && next != open)
        cf__seq_begin(next);
}

/* After it: the displaced fingerprint's section closed; the one now open returned. */
static inline atomic_uint *cf__path_seq_after(atomic_uint *open, atomic_uint *next)
{
    if (open && open != next)
        cf__seq_end(open);
    return next;
}

/* A reader's check after reading under c: unchanged since `seen`, and even. */
static inline bool cf__seq_same(atomic_uint *c, unsigned seen)
{
    atomic_thread_fence(memory_order_acquire);
    return !(seen & 1u) && atomic_load_explicit(c, memory_order_relaxed) == seen;
}

/* The 64 bits of t from bit `bit` on, as cf__load_le64 would read them, through the two
 * aligned words that hold them (relaxed atomic loads), with no branch. By bit, not byte:
 * the word's index and the shift are then one value's (bit / 64, bit mod 64). The
 * block's counters and tail pad keep the second word inside it. */
static inline uint64_t cf__sync_word_bit(const cf__table *t, uint64_t bit)
{
    _Atomic uint64_t *w = cf__sync_words(t) + (bit >> 6);
    uint64_t lo = cf__sync_get(&w[0]), hi = cf__sync_get(&w[1]);
    return cf__shr128(lo, hi, (unsigned)bit);
}

/* Bucket i of a fast shape of `bytes`-byte buckets in the low bits; the bits above it,
 * which the match ignores, are the next buckets' or zero. A bucket of 2, 4 or 8 bytes
 * never straddles two aligned words: it is read with one load. */
static inline uint64_t cf__sync_fast_word(const cf__table *t, uint64_t i, unsigned bytes)
{
    if (8u % bytes != 0)
        return cf__sync_word_bit(t, i * bytes * 8u);
    /* by the bucket's index, not its byte (i * bytes / 8): no multiply and shift back */
    const unsigned per = 8u / bytes;
    return cf__sync_get(cf__sync_words(t) + i / per) >> ((unsigned)(i % per) * bytes * 8u);
}

/* The bucket that starts at bit `bit` of t (bucket * bucket_bits), for a shape whose
 * bucket fits the 8 bytes from its first byte (mask: its bucket_mask, nonzero), read
 * through aligned atomic words: cf__bucket_word for a synchronized table. A caller of two
 * buckets computes both positions first, then reads them. */
static inline uint64_t cf__sync_bucket_word(const cf__table *t, uint64_t bit, uint64_t mask)
{
    return cf__sync_word_bit(t, bit) & mask;
}

/* cf__bucket_find of a synchronized table whose bucket is one load (s->bucket_mask, as
 * every shape a writer shares with others has), read through atomic words. */
static inline int cf__sync_bucket_find(const cf__table *t, uint64_t bucket, uint32_t fp)
{
    const cf__shape *s = t->shape;
    uint64_t w = cf__sync_bucket_word(t, bucket * s->bucket_bits, s->bucket_mask);
    if (s->semi) {
        unsigned m = cf__semi_match1_word(s, w, fp);
        return m ? (int)cf__ctz64(m) : -1;
    }
    uint64_t m = cf__lanes_equal(s, w, fp);
    return m ? (int)(cf__ctz64(m) / s->f) : -1;
}

/* Slot `slot` of bucket `bucket` (for a semi-sorted one, in ascending order) of a
 * synchronized table whose bucket is one load, read through atomic words. */
static inline uint32_t cf__sync_slot_get(const cf__table *t, uint64_t bucket, unsigned slot)
{
    const cf__shape *s = t->shape;
    uint64_t w = cf__sync_bucket_word(t, bucket * s->bucket_bits, s->bucket_mask);
    if (s->semi) {
        unsigned sw = s->f - CF__SEMI_PREFIX_BITS;
        unsigned pre = cf__semi_prefixes[w & CF__SEMI_CODE_MASK];
        return (uint32_t)((pre >> (CF__SEMI_PREFIX_BITS * slot)) & CF__SEMI_PREFIX_MASK) << sw |
               (uint32_t)((w >> (CF__SEMI_CODE_BITS + sw * slot)) & ((UINT64_C(1) << sw) - 1u));
    }
    return (uint32_t)((w >> (slot * s->f)) & s->fp_mask);
}

/* Copies of fp in buckets i1 and i2 of synchronized table t (one bucket if they are the
 * same), read until the counter of the pair (a semi-sorted table's: of both buckets) was
 * still, and even, across the reads. With stop_at_one
 * it returns as soon as it finds one copy, without that check (a copy it saw is one the
 * table held, or a fingerprint in the middle of a write, at worst a false positive). */
CF__HIDDEN unsigned cf__sync_pair_count(const cf__table *t, uint64_t i1, uint64_t i2, uint32_t fp,
                                        bool stop_at_one);

/* The writes of a synchronized table (table.c): cf__put_if_free (which leaves the item
 * counts to its caller) and cf__slot_set through aligned atomic words (a semi-sorted
 * bucket's write a section of its own; a plain bucket's move a section its caller opens,
 * cf__path_seq_before), and every slot cleared bucket by bucket, each a section, so that
 * a reader sees each bucket before or after. */
CF__HIDDEN bool cf__sync_put_if_free(cf__table *t, uint64_t bucket, uint32_t fp);
CF__HIDDEN void cf__sync_slot_set(cf__table *t, uint64_t bucket, unsigned slot, uint32_t fp);
CF__HIDDEN void cf__sync_clear(cf__table *t);

/* The writes of the library's slow paths, in the table's mode: a plain table's directly,
 * a synchronized one's as above. Tables no reader can see yet (a sub-filter being made)
 * or that readers may not run beside (compaction) take the plain writes. */
static inline bool cf__table_put(cf__table *t, uint64_t bucket, uint32_t fp)
{
    if (CF__UNLIKELY(t->shape->sync)) {
        if (!cf__sync_put_if_free(t, bucket, fp))
            return false;
        t->items++;
        return true;
    }
    return cf__put_if_free(t, t->shape, bucket, fp);
}

static inline void cf__table_set(cf__table *t, uint64_t bucket, unsigned slot, uint32_t fp)
{
    const cf__shape *s = t->shape;
    if (CF__UNLIKELY(s->sync))
        cf__sync_slot_set(t, bucket, slot, fp);
    else
        cf__slot_set(t, s, bucket, slot, fp);
}

/* Every slot of the table empty again. */
static inline void cf__table_clear(cf__table *t)
{
    if (CF__UNLIKELY(t->shape->sync)) {
        cf__sync_clear(t);
        return;
    }
    memset(t->data, 0, cf__table_size(t->shape, t->buckets));
    t->items = 0;
}

/* ------------------------------------------------------------------------------------ */
/* Probes with constant widths (the `_fb` templates)                                    */
/* ------------------------------------------------------------------------------------ */
/* Fast shapes start every bucket on a byte and fit it in one 2-, 4- or 8-byte load, so
 * bucket i is the word at byte i * F * B / 8, with no shift. */

/* Bit 0 of each of the B lanes of F bits. */
static CF__INLINE uint64_t cf__lanes_lo_fb(unsigned F, unsigned B)
{
    uint64_t lo = 0;
    for (unsigned j = 0; j < B; j++)
        lo |= UINT64_C(1) << (j * F);
    return lo;
}

/* Do the templates compile a semi-sorted kind (B = CF__SEMI_B)? */
#define CF__SEMI_T(F, B) ((B) == CF__SEMI_B)

/* Bytes of a bucket of a shape with constant widths: b f / 8, or semi-sorted 4 (f - 1) / 8. */
static CF__INLINE unsigned cf__bucket_bytes_fb(unsigned F, unsigned B)
{
    return CF__SEMI_T(F, B) ? (F - 1) / 2 : F * B / 8;
}

/* Where slot `slot` of bucket i starts, in bits, for a shape with constant widths that is
 * not semi-sorted. */
static CF__INLINE uint64_t cf__slot_bit_fb(uint64_t i, unsigned slot, unsigned F, unsigned B)
{
    return i * cf__bucket_bytes_fb(F, B) * 8u + slot * F;
}

/* Slot j of the bucket whose first bytes are `word` (constant width F, not semi-sorted). */
static CF__INLINE uint32_t cf__word_slot_fb(uint64_t word, unsigned j, unsigned F)
{
    return (uint32_t)(word >> (F * j)) & (uint32_t)((UINT64_C(1) << F) - 1u);
}

/* The bits of a bucket of constant widths, in the low bits of its word. */
static CF__INLINE uint64_t cf__bucket_mask_fb(unsigned F, unsigned B)
{
    unsigned bits = cf__bucket_bytes_fb(F, B) * 8u;
    return bits == 64u ? UINT64_MAX : (UINT64_C(1) << bits) - 1u;
}

/* The first byte of bucket i. */
static CF__INLINE uint8_t *cf__bucket_at_fb(const cf__table *t, const cf__shape *s, uint64_t i,
                                            unsigned F, unsigned B)
{
    if (F)
        return t->data + i * cf__bucket_bytes_fb(F, B);
    return t->data + ((i * s->bucket_bits) >> 3);
}

/* The zero lanes of w, the B lanes of F bits of a bucket: nonzero iff a lane is zero, and
 * its lowest set bit is the top bit of the first zero lane. (w - lo) & ~w sets the top bit
 * of a lane that is 0, and of a lane that is 1 with a borrow from a zero lane below it,
 * never of another: so the answer is exact as a whole and in its lowest bit. The bits
 * above the bucket (the next bucket's, loaded with it) only borrow upward, out of it. */
static CF__INLINE uint64_t cf__zero_lanes_fb(uint64_t w, unsigned F, unsigned B)
{
    uint64_t lo = cf__lanes_lo_fb(F, B);
    return (w - lo) & ~w & (lo << (F - 1));
}

/* Bytes a fast shape loads for a bucket: the bucket's size rounded up to 2, 4 or 8. A
 * bucket of 2, 4 or 8 bytes is then read with one aligned load that never straddles two
 * cache lines (a wider load would, now and then, and cost a second memory read). */
static CF__INLINE unsigned cf__load_bytes_fb(unsigned F, unsigned B)
{
    unsigned bytes = cf__bucket_bytes_fb(F, B);
    return bytes <= 2 ? 2u : bytes <= 4 ? 4u : 8u;
}

static CF__INLINE uint64_t cf__load_fb(const uint8_t *p, unsigned F, unsigned B)
{
    unsigned n = cf__load_bytes_fb(F, B);
    return n == 2 ? cf__load_le16(p) : n == 4 ? cf__load_le32(p) : cf__load_le64(p);
}

static CF__INLINE void cf__store_fb(uint8_t *p, uint64_t w, unsigned F, unsigned B)
{
    unsigned n = cf__load_bytes_fb(F, B);
    if (n == 2)
        cf__store_le16(p, (uint16_t)w);
    else if (n == 4)
        cf__store_le32(p, (uint32_t)w);
    else
        cf__store_le64(p, w);
}

/* Start fetching bucket i: its first cache line and, for a load that may straddle two
 * lines (buckets of 3 and 6 bytes, and any shape read at run time), the line of its last
 * byte too. */
static CF__INLINE void cf__prefetch_fb(const cf__table *t, const cf__shape *s, uint64_t i,
                                       bool write, unsigned F, unsigned B)
{
    const uint8_t *p = cf__bucket_at_fb(t, s, i, F, B);
    const uint8_t *last = p + (F ? cf__load_bytes_fb(F, B) : 8u) - 1;
    bool straddles = !F || cf__bucket_bytes_fb(F, B) != cf__load_bytes_fb(F, B);
    /* The builtin takes its read/write hint as a literal only (clang checks that before
     * inlining), hence one call per case. */
    if (write) {
        CF__PREFETCH(p, 1);
        if (straddles)
            CF__PREFETCH(last, 1);
    } else {
        CF__PREFETCH(p, 0);
        if (straddles)
            CF__PREFETCH(last, 0);
    }
}

/* B copies of fp, one per lane: what a bucket's word is compared with. */
static CF__INLINE uint64_t cf__fps_fb(uint32_t fp, unsigned F, unsigned B)
{
    return cf__opaque(cf__lanes_lo_fb(F, B)) * fp;
}

/* The spread prefix table of constant width F. */
static CF__INLINE const uint32_t *cf__semi_spread_fb(unsigned F)
{
#define CF__SEMI_SPREAD_CASE(F_)                                                                   \
    if (F == F_)                                                                                   \
        return cf__semi_spread_##F_;
    CF__SEMI_FAST_SHAPES(CF__SEMI_SPREAD_CASE)
#undef CF__SEMI_SPREAD_CASE
    return NULL;
}

/* Nonzero iff a slot of the semi-sorted bucket whose first bytes are `word`, of constant
 * width F, holds fp: the bit (j + 1) W - 1 for a matching slot j, W = F - 4. The bucket is
 * compared in place, as four lanes of W bits: its suffixes against fp's, and in the same
 * lanes the prefixes of its code, spread by the table to the suffixes' spacing, against
 * fp's; a lane is zero in the or of the two differences iff both match. No deposit
 * (pdep): slow on some CPUs that have it, and none in the baseline variant. */
static CF__INLINE uint64_t cf__semi_match_word_fb(uint64_t word, uint32_t fp, unsigned F)
{
    const unsigned W = F - CF__SEMI_PREFIX_BITS;
    /* The word may hold the next bucket's first bytes too, above the suffixes: they only
     * borrow upward, out of the lanes (cf__zero_lanes_fb). */
    uint64_t lanes = cf__opaque(cf__lanes_lo_fb(W, 4));
    uint64_t pre = cf__semi_spread_fb(F)[word & CF__SEMI_CODE_MASK] ^ lanes * (fp >> W);
    uint64_t suf = (word >> CF__SEMI_CODE_BITS) ^ lanes * (fp & ((UINT32_C(1) << W) - 1));
    return cf__zero_lanes_fb(pre | suf, W, 4);
}

/* The same for bucket i of t, loaded. */
static CF__INLINE uint64_t cf__semi_match_fb(const cf__table *t, uint64_t i, uint32_t fp,
                                             unsigned F)
{
    return cf__semi_match_word_fb(
        cf__load_fb(cf__bucket_at_fb(t, NULL, i, F, CF__SEMI_B), F, CF__SEMI_B), fp, F);
}

/* The slot of the lowest match in a mask of cf__semi_match_fb (constant width F). */
static CF__INLINE unsigned cf__semi_match_slot_fb(uint64_t m, unsigned F)
{
    return cf__ctz64(m) / (F - CF__SEMI_PREFIX_BITS);
}

/* The prefixes of the semi-sorted bucket whose first bytes are `word`, a nibble a slot. */
static CF__INLINE unsigned cf__semi_word_prefixes(uint64_t word)
{
    return cf__semi_prefixes[word & CF__SEMI_CODE_MASK];
}

/* Slot j (in ascending order) of the semi-sorted bucket whose first bytes are `word`
 * (constant width F), whose prefixes are `pre` (cf__semi_word_prefixes). */
static CF__INLINE uint32_t cf__semi_word_slot_fb(uint64_t word, unsigned pre, unsigned j,
                                                 unsigned F)
{
    const unsigned W = F - CF__SEMI_PREFIX_BITS;
    return (uint32_t)((pre >> (CF__SEMI_PREFIX_BITS * j)) & CF__SEMI_PREFIX_MASK) << W |
           (uint32_t)((word >> (CF__SEMI_CODE_BITS + W * j)) & ((UINT64_C(1) << W) - 1u));
}

/* Whether slot 0 of the semi-sorted bucket whose first bytes are `word` is empty (empty
 * slots sort first: then the bucket has room). */
static CF__INLINE bool cf__semi_word_empty_slot_fb(uint64_t word, unsigned F)
{
    const unsigned W = F - CF__SEMI_PREFIX_BITS;
    return !(cf__semi_word_prefixes(word) & CF__SEMI_PREFIX_MASK) &&
           !((word >> CF__SEMI_CODE_BITS) & ((UINT64_C(1) << W) - 1u));
}

/* The semi-sorted bucket of `word` (constant width F) without the fingerprint of slot j:
 * slots 0 .. j - 1 move up one and slot 0 is empty (0), as a sort would leave them; the
 * slots above j, and the bits above the bucket, stay. No decoding: the suffixes move as
 * lanes, the prefixes as nibbles of the code's table entry, which is then ranked anew. */
static CF__INLINE uint64_t cf__semi_remove_word_fb(uint64_t word, unsigned j, unsigned F)
{
    const unsigned W = F - CF__SEMI_PREFIX_BITS;
    uint64_t suf = word >> CF__SEMI_CODE_BITS, low = (UINT64_C(1) << (W * (j + 1))) - 1u;
    unsigned pre = cf__semi_prefixes[word & CF__SEMI_CODE_MASK];
    unsigned plow = (1u << (CF__SEMI_PREFIX_BITS * (j + 1))) - 1u;
    suf = ((suf << W) & low) | (suf & ~low);
    pre = ((pre << CF__SEMI_PREFIX_BITS) & plow) | (pre & ~plow);
    return suf << CF__SEMI_CODE_BITS | cf__semi_rank_nibbles(pre);
}

/* Put fp into the semi-sorted bucket of `word` (constant width F) if its slot 0 is empty
 * (empty slots sort first): the j slots above it that hold less than fp move down one and
 * fp takes slot j, as cf__semi_put_if_free does. False, word unchanged, if it is full. */
static CF__INLINE bool cf__semi_add_word_fb(uint64_t *word, uint32_t fp, unsigned F)
{
    const unsigned W = F - CF__SEMI_PREFIX_BITS;
    const uint64_t lane = (UINT64_C(1) << W) - 1u;
    uint64_t suf = *word >> CF__SEMI_CODE_BITS;
    unsigned pre = cf__semi_prefixes[*word & CF__SEMI_CODE_MASK];
    if ((pre & CF__SEMI_PREFIX_MASK) | (suf & lane))
        return false;
    unsigned j = 0;
    for (unsigned k = 1; k < 4; k++)
        j += ((uint32_t)(pre >> (CF__SEMI_PREFIX_BITS * k) & CF__SEMI_PREFIX_MASK) << W |
              (uint32_t)(suf >> (W * k) & lane)) < fp;
    uint64_t below = (UINT64_C(1) << (W * j)) - 1u, upto = (UINT64_C(1) << (W * (j + 1))) - 1u;
    unsigned pbelow = (1u << (CF__SEMI_PREFIX_BITS * j)) - 1u;
    unsigned pupto = (1u << (CF__SEMI_PREFIX_BITS * (j + 1))) - 1u;
    suf = ((suf >> W) & below) | (uint64_t)(fp & lane) << (W * j) | (suf & ~upto);
    pre = ((pre >> CF__SEMI_PREFIX_BITS) & pbelow) | (fp >> W) << (CF__SEMI_PREFIX_BITS * j) |
          (pre & ~pupto);
    *word = suf << CF__SEMI_CODE_BITS | cf__semi_rank_nibbles(pre);
    return true;
}

/* Slot j of the bucket whose first bytes are `word` (constant widths; a semi-sorted
 * bucket's prefixes in `pre`, cf__semi_word_prefixes, in ascending order). */
static CF__INLINE uint32_t cf__word_resident_fb(uint64_t word, unsigned pre, unsigned j, unsigned F,
                                                unsigned B)
{
    if (CF__SEMI_T(F, B))
        return cf__semi_word_slot_fb(word, pre, j, F);
    return cf__word_slot_fb(word, j, F);
}

/* The first free slot of the bucket whose first bytes are `word` (constant widths): the
 * lowest zero lane, or for a semi-sorted bucket slot 0 when it is empty (empty slots sort
 * first); -1 if none. */
static CF__INLINE int cf__word_free_slot_fb(uint64_t word, unsigned F, unsigned B)
{
    if (CF__SEMI_T(F, B))
        return cf__semi_word_empty_slot_fb(word, F) ? 0 : -1;
    uint64_t empty = cf__zero_lanes_fb(word, F, B);
    return empty ? (int)(cf__ctz64(empty) / F) : -1;
}

/* One step of an eviction's path in a bucket of t (constant widths): slot j of bucket i,
 * which holds `old` (0: the free end's free slot), takes `val`. The word is loaded here,
 * after the step before, whose bytes it may hold. */
static CF__INLINE void cf__path_step_fb(cf__table *t, uint64_t i, unsigned j, uint32_t old,
                                        uint32_t val, unsigned F, unsigned B)
{
    if (CF__SEMI_T(F, B)) { /* the bucket re-sorted */
        cf__slot_set(t, t->shape, i, j, val);
        return;
    }
    uint8_t *p = cf__bucket_at_fb(t, NULL, i, F, B);
    cf__store_fb(p, cf__load_fb(p, F, B) ^ (uint64_t)(old ^ val) << (F * j), F, B);
}

/* Nonzero iff a slot of the bucket whose first bytes are `word` holds fp (constant widths;
 * bits above the bucket are ignored). */
static CF__INLINE uint64_t cf__word_match_fb(uint64_t word, uint32_t fp, unsigned F, unsigned B)
{
    if (CF__SEMI_T(F, B))
        return cf__semi_match_word_fb(word, fp, F);
    return cf__zero_lanes_fb(word ^ cf__fps_fb(fp, F, B), F, B);
}

/* Nonzero iff a slot of bucket i holds fp. */
static CF__INLINE uint64_t cf__match_fb(const cf__table *t, const cf__shape *s, uint64_t i,
                                        uint32_t fp, unsigned F, unsigned B)
{
    if (CF__SEMI_T(F, B))
        return F ? cf__semi_match_fb(t, i, fp, F) : cf__semi_match1(t, s, i, fp);
    if (!F)
        return cf__bucket_has(t, s, i, fp);
    return cf__zero_lanes_fb(
        cf__load_fb(cf__bucket_at_fb(t, s, i, F, B), F, B) ^ cf__fps_fb(fp, F, B), F, B);
}

/* Does bucket i1 or bucket i2 hold fp? Both buckets are loaded and compared with no
 * branch between them: for present keys, which of the two holds the key is a coin toss,
 * and a mispredicted branch would throw away the lookups in flight behind it. */
static CF__INLINE bool cf__pair_has_fb(const cf__table *t, const cf__shape *s, uint64_t i1,
                                       uint64_t i2, uint32_t fp, unsigned F, unsigned B)
{
    return (cf__match_fb(t, s, i1, fp, F, B) | cf__match_fb(t, s, i2, fp, F, B)) != 0;
}

/* Put fp into the first free slot of bucket i; false if it has none. */
static CF__INLINE bool cf__put_if_free_fb(cf__table *t, const cf__shape *s, uint64_t i, uint32_t fp,
                                          unsigned F, unsigned B)
{
    if (!F)
        return cf__put_if_free(t, s, i, fp);
    uint8_t *p = cf__bucket_at_fb(t, s, i, F, B);
    if (CF__SEMI_T(F, B)) {
        uint64_t w = cf__load_fb(p, F, B);
        if (!cf__semi_add_word_fb(&w, fp, F))
            return false;
        cf__store_fb(p, w, F, B);
        t->items++;
        return true;
    }
    uint64_t word = cf__load_fb(p, F, B), empty = cf__zero_lanes_fb(word, F, B);
    if (!empty)
        return false;
    /* The slot is zero, so or-ing the fingerprint in sets it; the rest of the word (the
     * next bucket's bytes, if any) is written back unchanged. */
    cf__store_fb(p, word | (uint64_t)fp << (cf__ctz64(empty) - (F - 1)), F, B);
    t->items++;
    return true;
}

/* Clear the first slot holding fp of bucket i1, or if it has none of bucket i2; false if
 * neither holds fp (fast shapes only). As in cf__pair_has_fb, both buckets are loaded and
 * compared before anything is decided. */
static CF__INLINE bool cf__pair_remove_fb(cf__table *t, const cf__shape *s, uint64_t i1,
                                          uint64_t i2, uint32_t fp, unsigned F, unsigned B)
{
    uint8_t *p1 = cf__bucket_at_fb(t, s, i1, F, B), *p2 = cf__bucket_at_fb(t, s, i2, F, B);
    uint64_t w1 = cf__load_fb(p1, F, B), w2 = cf__load_fb(p2, F, B);
    uint64_t fps = cf__fps_fb(fp, F, B);
    uint64_t m1 = cf__zero_lanes_fb(w1 ^ fps, F, B), m2 = cf__zero_lanes_fb(w2 ^ fps, F, B);
    /* One store either way (the word unchanged when no slot holds fp), and the lane's
     * mask from the lowest set bit: fewer instructions than a return and a shift count. */
    uint8_t *p = m1 ? p1 : p2;
    uint64_t w = m1 ? w1 : w2, m = m1 ? m1 : m2;
    uint64_t top = m & (UINT64_C(0) - m); /* the top bit of the first matching lane, or 0 */
    uint64_t lane = (top << 1) - (top >> (F - 1)); /* that lane's F bits (modulo 2^64) */
    cf__store_fb(p, w & ~lane, F, B);
    bool found = m != 0;
    t->items -= found;
    return found;
}

/* ------------------------------------------------------------------------------------ */
/* Writes of synchronized tables with constant widths (the writers of stripes)           */
/* ------------------------------------------------------------------------------------ */
/* A writer that holds a bucket's stripe changes its bits by an exclusive or into the one
 * or two aligned words that hold them, each flipped in one atomic step (cf__sync_flip): a
 * stripe starts on a word, so those words hold no other stripe's bits, and a reader loads
 * each before or after the flip. A delete of a plain bucket flips one slot's bits (fp to
 * 0), as does every step of an eviction's path but its free end (one fingerprint to
 * another).
 *
 * Fills of free slots without the stripe. A batched add of a plain fast shape puts a new
 * fingerprint into a free slot that lies inside one aligned word with a compare-and-swap
 * of that word, holding no stripe (fast.c, cf__cc_add_many_fb): its lock words then stay
 * in both cores' caches, where taking one moved its line between them on nearly every
 * add. Such a fill changes a slot only from empty to full, so every other writer of
 * plain buckets of the simple state keeps its own slots: it flips the bits of slots that
 * hold a fingerprint (a fill never touches them) and fills a free slot with the same
 * compare-and-swap, looking again if the slot was taken meanwhile (cf__sync_fill_fb). A
 * slot across two words, which no compare-and-swap covers, is filled only by a holder of
 * its stripe. The lock's holder meets no such fill: it waits for those under way before
 * it writes (concurrent.h, cf__cc_close). */

/* The bits of t from bit `bit` on flipped where `delta` has ones, all of them inside a
 * bucket of a fast shape whose stripe the caller holds. A bucket of 2, 4 or 8 bytes is
 * inside one word. */
static CF__INLINE void cf__sync_xor_fb(cf__table *t, uint64_t bit, uint64_t delta, unsigned F,
                                       unsigned B)
{
    _Atomic uint64_t *w = cf__sync_words(t) + (bit >> 6);
    unsigned sh = (unsigned)bit; /* mod 64, as x86's shifts take it */
    uint64_t lo = delta << (sh & 63u), hi = cf__shl_out(delta, sh);
    /* The first word holds bit `bit` of the bucket, so it is the caller's to flip even
     * unchanged (no branch); the second is flipped only if the bits reach it, as it may
     * start the next stripe. */
    cf__sync_flip(w, lo);
    if (8u % cf__bucket_bytes_fb(F, B) != 0 && hi)
        cf__sync_flip(&w[1], hi);
}

/* How cf__sync_fill_fb went. */
enum cf__fill {
    CF__FILL_NONE = 0, /* no free slot (for a slot given, it is not free) */
    CF__FILL_DONE = 1, /* fp went in */
    CF__FILL_SPLIT = 2 /* the free slot lies across two words, and the stripe is not held */
};

/* fp into the F-bit slot at bit `bit` of a plain bucket of a fast shape, if it is still
 * free, beside fills without the stripe (see above). HELD: the caller holds the slot's
 * stripe, which a slot across two words needs (no one else fills it then: two flips). */
static CF__INLINE enum cf__fill cf__sync_fill_slot_fb(cf__table *t, uint64_t bit, uint32_t fp,
                                                      bool HELD, unsigned F, unsigned B)
{
    _Atomic uint64_t *w = cf__sync_words(t) + (bit >> 6);
    unsigned sh = (unsigned)bit & 63u;
    if (8u % cf__bucket_bytes_fb(F, B) != 0 && sh + F > 64u) {
        if (!HELD)
            return CF__FILL_SPLIT;
        cf__sync_flip(w, (uint64_t)fp << sh);
        cf__sync_flip(&w[1], (uint64_t)fp >> (64u - sh));
        return CF__FILL_DONE;
    }
    uint64_t lane = ((UINT64_C(1) << F) - 1u) << sh, v = cf__sync_get(w);
    do {
        if (v & lane)
            return CF__FILL_NONE;
    } while (!cf__sync_cas(w, &v, v | (uint64_t)fp << sh));
    return CF__FILL_DONE;
}

/* fp into the first free slot of plain bucket i of a fast shape (the one the plain put
 * chooses), looking again whenever another writer took it first. */
static CF__INLINE enum cf__fill cf__sync_fill_fb(cf__table *t, uint64_t i, uint32_t fp, bool HELD,
                                                 unsigned F, unsigned B)
{
    const unsigned bytes = cf__bucket_bytes_fb(F, B);
    for (;;) {
        uint64_t empty = cf__zero_lanes_fb(cf__sync_fast_word(t, i, bytes), F, B);
        if (!empty)
            return CF__FILL_NONE;
        enum cf__fill r =
            cf__sync_fill_slot_fb(t, i * bytes * 8u + cf__ctz64(empty) - (F - 1), fp, HELD, F, B);
        if (r != CF__FILL_NONE)
            return r;
    }
}

/* cf__put_if_free_fb of a synchronized table (constant widths), whose bucket i's stripe
 * the caller holds and whose counter is `seq`; the item counts are the caller's. A new
 * fingerprint in a free slot is no section; a semi-sorted bucket, rewritten whole, is. */
static CF__INLINE bool cf__sync_put_fb(cf__table *t, atomic_uint *seq, uint64_t i, uint32_t fp,
                                       unsigned F, unsigned B)
{
    if (CF__SEMI_T(F, B)) {
        const unsigned bytes = cf__bucket_bytes_fb(F, B);
        uint64_t w = cf__sync_fast_word(t, i, bytes), was = w;
        if (!cf__semi_add_word_fb(&w, fp, F))
            return false;
        cf__seq_begin(seq);
        cf__sync_xor_fb(t, i * bytes * 8u, (w ^ was) & cf__bucket_mask_fb(F, B), F, B);
        cf__seq_end(seq);
        return true;
    }
    return cf__sync_fill_fb(t, i, fp, true, F, B) == CF__FILL_DONE;
}

/* The first slot of bucket i that holds fp cleared, given the bucket's bits w and their
 * match with fp, m (nonzero), under i's stripe, whose counter is seq (a semi-sorted
 * bucket's rewrite is a section, a cleared slot is none). */
static CF__INLINE void cf__sync_clear_match_fb(cf__table *t, atomic_uint *seq, uint64_t i,
                                               uint64_t w, uint64_t m, uint32_t fp, unsigned F,
                                               unsigned B)
{
    const unsigned bytes = cf__bucket_bytes_fb(F, B);
    if (CF__SEMI_T(F, B)) {
        uint64_t now = cf__semi_remove_word_fb(w, cf__ctz64(m) / (F - CF__SEMI_PREFIX_BITS), F);
        cf__seq_begin(seq);
        cf__sync_xor_fb(t, i * bytes * 8u, (now ^ w) & cf__bucket_mask_fb(F, B), F, B);
        cf__seq_end(seq);
    } else {
        /* the lowest set bit of m is the top bit of the first matching lane */
        cf__sync_xor_fb(t, i * bytes * 8u + cf__ctz64(m) - (F - 1), fp, F, B);
    }
}

/* One fingerprint fp removed from bucket i of a synchronized table (constant widths),
 * whose stripe the caller holds and whose counter is seq; false if i holds none. The
 * item counts are the caller's. */
static CF__INLINE bool cf__sync_remove_fb(cf__table *t, atomic_uint *seq, uint64_t i, uint32_t fp,
                                          unsigned F, unsigned B)
{
    uint64_t w = cf__sync_fast_word(t, i, cf__bucket_bytes_fb(F, B));
    uint64_t m = cf__word_match_fb(w, fp, F, B);
    if (!m)
        return false;
    cf__sync_clear_match_fb(t, seq, i, w, m, fp, F, B);
    return true;
}

/* cf__pair_remove_fb of a synchronized table (constant widths), whose buckets' stripes the
 * caller holds; `seqs` are its stripe counters. 0 if neither bucket holds fp, else the
 * bucket it left: 1 for i1, 2 for i2. The item counts are the caller's. */
static CF__INLINE unsigned cf__sync_pair_remove_fb(cf__table *t, atomic_uint *seqs, uint64_t i1,
                                                   uint64_t i2, uint32_t fp, unsigned F, unsigned B)
{
    const unsigned bytes = cf__bucket_bytes_fb(F, B);
    uint64_t w1 = cf__sync_fast_word(t, i1, bytes), w2 = cf__sync_fast_word(t, i2, bytes);
    uint64_t m1 = cf__word_match_fb(w1, fp, F, B), m2 = cf__word_match_fb(w2, fp, F, B);
    if (!(m1 | m2))
        return 0;
    uint64_t i = m1 ? i1 : i2;
    cf__sync_clear_match_fb(t, &seqs[i >> CF__SYNC_STRIPE_SHIFT], i, m1 ? w1 : w2, m1 ? m1 : m2, fp,
                            F, B);
    return m1 ? 1u : 2u;
}

#endif /* CF_TABLE_H */
