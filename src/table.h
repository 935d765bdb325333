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
 * Two families of probes: those taking a cf__shape, with widths read at run time (any
 * shape), and the `_t` templates, always inlined with the fingerprint width F and bucket
 * size B as constants (fast.c compiles them per fast shape; F = 0 falls back to the
 * first family).
 */
#ifndef CF_TABLE_H
#define CF_TABLE_H

#include "bits.h"

/* Bytes of zero padding after every table, so that a probe may always load 8 bytes at
 * the byte where a bucket or slot starts, even for the last one. */
#define CF__TABLE_PAD 8u

/* The shapes whose probes are compiled with constant widths (fast.c): every bucket is a
 * whole number of bytes, at most 8, so one unaligned 64-bit load at byte b * f / 8 * i
 * holds bucket i with no shift. These are the paper's shapes, the library's default
 * (b = 4, f = 12) and the Redis module's (b = 2, f = 12). Any other shape takes the same
 * code with its widths read from the shape at run time. */
#define CF__FAST_SHAPES(X) X(8, 4) X(12, 4) X(16, 4) X(8, 2) X(12, 2) X(16, 2) X(8, 8)

#define CF__KIND_ENUM(F, B) CF__KIND_##F##_##B,
enum cf__kind { CF__KIND_GENERIC = 0, CF__FAST_SHAPES(CF__KIND_ENUM) CF__KINDS };
#undef CF__KIND_ENUM

/* A shape is what every table of one filter shares: fingerprint width f, bucket size b and
 * the masks derived from them. The shapes of b <= CF__STATIC_SHAPE_B are constants
 * (cf__shape_static), so that a filter of one of them carries a pointer, not a copy. */
typedef struct cf__shape {
    uint8_t f;            /* fingerprint bits, 4..32 */
    uint8_t b;            /* slots per bucket, 1..255 */
    uint8_t ext;          /* f less the first sub-filter's width (0 but for wider ones) */
    bool swar;            /* see lane_lo */
    uint16_t bucket_bits; /* b * f */
    uint64_t fp_mask;     /* f low bits set */
    /* The SWAR probe: when a whole bucket fits in one 64-bit load, the b slots are
     * compared at once as b lanes of f bits. */
    uint64_t bucket_mask; /* bucket_bits low bits set */
    uint64_t lane_lo;     /* bit 0 of every lane */
    uint64_t lane_hi;     /* bit f - 1 of every lane */
    uint64_t lane_low;    /* bits 0..f-2 of every lane */
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

/* The constant shape of f-bit fingerprints in buckets of b <= CF__STATIC_SHAPE_B slots
 * (with ext 0), or NULL for larger buckets. */
CF__HIDDEN const cf__shape *cf__shape_static(unsigned f, unsigned b);

/* Which code the shape's tables take: their own (fast.c) or the generic. */
CF__HIDDEN enum cf__kind cf__kind_of(const cf__shape *s);

CF__HIDDEN void cf__shape_init(cf__shape *s, unsigned f, unsigned b);

/* Bytes that hold the slots of `buckets` buckets: their bits rounded up to whole bytes,
 * no padding (the length of a table in a file). The caller has checked the size. */
static inline uint64_t cf__data_bytes(const cf__shape *s, uint64_t buckets)
{
    uint64_t bits = buckets * s->bucket_bits;
    return bits / 8 + (bits % 8 != 0);
}

/* Bytes a table of `buckets` buckets needs (padding included), or false if it exceeds
 * the limits of table.c (CF__MAX_TABLE_BYTES, CF__INDEX_BIAS_BITS). */
CF__HIDDEN bool cf__table_bytes(const cf__shape *s, uint64_t buckets, size_t *bytes);
/* The number of buckets for `capacity` items, capacity / (b * load) rounded up to an even
 * number, and the table's bytes; false if it does not fit the limits. */
CF__HIDDEN bool cf__buckets_for(const cf__shape *s, uint64_t capacity, uint64_t *buckets,
                                size_t *bytes);

/* Bytes a table of `buckets` buckets holds, padding included; its size was checked. */
static inline size_t cf__table_size(const cf__shape *s, uint64_t buckets)
{
    return (size_t)cf__data_bytes(s, buckets) + CF__TABLE_PAD;
}

/* Table t, empty (its data zeroed, if it has any), of `buckets` buckets of the given shape;
 * grown is NULL for a table of the first sub-filter's size. */
static inline void cf__table_init(cf__table *t, uint8_t *data, uint64_t buckets,
                                  const cf__shape *shape, const cf__grown *grown)
{
    t->shape = shape;
    if (data)
        memset(data, 0, cf__table_size(shape, buckets));
    t->data = data;
    t->buckets = buckets;
    t->items = 0;
    t->grown = grown;
}

/* Every slot of the table empty again. */
static inline void cf__table_clear(cf__table *t)
{
    memset(t->data, 0, cf__table_size(t->shape, t->buckets));
    t->items = 0;
}

/* Occupied slots of buckets [from, to) of the table whose bytes are `data`. data may be a
 * mapped file: probes never read past the last bucket's byte plus CF__TABLE_PAD, which in
 * a file are the next table, zeros or the file sum. */
CF__HIDDEN uint64_t cf__table_used(const cf__shape *s, const uint8_t *data, uint64_t from,
                                   uint64_t to);

/* Are the bits past the last slot of a table of `buckets` buckets, in its last byte, zero? */
CF__HIDDEN bool cf__table_tail_clear(const cf__shape *s, const uint8_t *data, uint64_t buckets);

static inline uint64_t cf__slot_bit(const cf__shape *s, uint64_t bucket, unsigned slot)
{
    return bucket * s->bucket_bits + (uint64_t)slot * s->f;
}

static inline uint32_t cf__slot_get(const cf__table *t, const cf__shape *s, uint64_t bucket,
                                    unsigned slot)
{
    uint64_t bit = cf__slot_bit(s, bucket, slot);
    return (uint32_t)((cf__load_le64(t->data + (bit >> 3)) >> (bit & 7u)) & s->fp_mask);
}

static inline void cf__slot_set(cf__table *t, const cf__shape *s, uint64_t bucket, unsigned slot,
                                uint32_t fp)
{
    uint64_t bit = cf__slot_bit(s, bucket, slot);
    uint8_t *p = t->data + (bit >> 3);
    unsigned shift = (unsigned)(bit & 7u);
    uint64_t w = cf__load_le64(p);
    w = (w & ~(s->fp_mask << shift)) | ((uint64_t)fp << shift);
    cf__store_le64(p, w);
}

/* The whole bucket as b lanes of f bits (only for shapes with s->swar). */
static inline uint64_t cf__bucket_word(const cf__table *t, const cf__shape *s, uint64_t bucket)
{
    uint64_t bit = bucket * s->bucket_bits;
    return (cf__load_le64(t->data + (bit >> 3)) >> (bit & 7u)) & s->bucket_mask;
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
    for (unsigned j = 0; j < s->b; j++)
        if (cf__slot_get(t, s, bucket, j) == fp)
            return (int)j;
    return -1;
}

/* Put fp into the first free slot of bucket; false if it has none. */
static inline bool cf__put_if_free(cf__table *t, const cf__shape *s, uint64_t bucket, uint32_t fp)
{
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
/* Probes with constant widths (the `_t` templates)                                     */
/* ------------------------------------------------------------------------------------ */
/* Fast shapes start every bucket on a byte and fit it in one 2-, 4- or 8-byte load, so
 * bucket i is the word at byte i * F * B / 8, with no shift. */

/* Bit 0 of each of the B lanes of F bits. */
static CF__INLINE uint64_t cf__lanes_lo_t(unsigned F, unsigned B)
{
    uint64_t lo = 0;
    for (unsigned j = 0; j < B; j++)
        lo |= UINT64_C(1) << (j * F);
    return lo;
}

/* The first byte of bucket i. */
static CF__INLINE uint8_t *cf__bucket_at_t(const cf__table *t, const cf__shape *s, uint64_t i,
                                           unsigned F, unsigned B)
{
    if (F)
        return t->data + i * (F * B / 8);
    return t->data + ((i * s->bucket_bits) >> 3);
}

/* The zero lanes of w, the B lanes of F bits of a bucket: nonzero iff a lane is zero, and
 * its lowest set bit is the top bit of the first zero lane. (w - lo) & ~w sets the top bit
 * of a lane that is 0, and of a lane that is 1 with a borrow from a zero lane below it,
 * never of another: so the answer is exact as a whole and in its lowest bit. The bits
 * above the bucket (the next bucket's, loaded with it) only borrow upward, out of it. */
static CF__INLINE uint64_t cf__zero_lanes_t(uint64_t w, unsigned F, unsigned B)
{
    uint64_t lo = cf__lanes_lo_t(F, B);
    return (w - lo) & ~w & (lo << (F - 1));
}

/* Bytes a fast shape loads for a bucket: the bucket's size rounded up to 2, 4 or 8. A
 * bucket of 2, 4 or 8 bytes is then read with one aligned load that never straddles two
 * cache lines (a wider load would, now and then, and cost a second memory read). */
static CF__INLINE unsigned cf__load_bytes_t(unsigned F, unsigned B)
{
    unsigned bytes = F * B / 8;
    return bytes <= 2 ? 2u : bytes <= 4 ? 4u : 8u;
}

static CF__INLINE uint64_t cf__load_t(const uint8_t *p, unsigned F, unsigned B)
{
    unsigned n = cf__load_bytes_t(F, B);
    return n == 2 ? cf__load_le16(p) : n == 4 ? cf__load_le32(p) : cf__load_le64(p);
}

static CF__INLINE void cf__store_t(uint8_t *p, uint64_t w, unsigned F, unsigned B)
{
    unsigned n = cf__load_bytes_t(F, B);
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
static CF__INLINE void cf__prefetch_t(const cf__table *t, const cf__shape *s, uint64_t i,
                                      bool write, unsigned F, unsigned B)
{
    const uint8_t *p = cf__bucket_at_t(t, s, i, F, B);
    const uint8_t *last = p + (F ? cf__load_bytes_t(F, B) : 8u) - 1;
    bool straddles = !F || F * B / 8 != cf__load_bytes_t(F, B);
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
static CF__INLINE uint64_t cf__fps_t(uint32_t fp, unsigned F, unsigned B)
{
    return cf__opaque(cf__lanes_lo_t(F, B)) * fp;
}

/* Nonzero iff a slot of bucket i holds fp. */
static CF__INLINE uint64_t cf__match_t(const cf__table *t, const cf__shape *s, uint64_t i,
                                       uint32_t fp, unsigned F, unsigned B)
{
    if (!F)
        return cf__bucket_has(t, s, i, fp);
    return cf__zero_lanes_t(cf__load_t(cf__bucket_at_t(t, s, i, F, B), F, B) ^ cf__fps_t(fp, F, B),
                            F, B);
}

/* Does bucket i1 or bucket i2 hold fp? Both buckets are loaded and compared with no
 * branch between them: for present keys, which of the two holds the key is a coin toss,
 * and a mispredicted branch would throw away the lookups in flight behind it. */
static CF__INLINE bool cf__pair_has_t(const cf__table *t, const cf__shape *s, uint64_t i1,
                                      uint64_t i2, uint32_t fp, unsigned F, unsigned B)
{
    return (cf__match_t(t, s, i1, fp, F, B) | cf__match_t(t, s, i2, fp, F, B)) != 0;
}

/* Put fp into the first free slot of bucket i; false if it has none. */
static CF__INLINE bool cf__put_if_free_t(cf__table *t, const cf__shape *s, uint64_t i, uint32_t fp,
                                         unsigned F, unsigned B)
{
    if (!F)
        return cf__put_if_free(t, s, i, fp);
    uint8_t *p = cf__bucket_at_t(t, s, i, F, B);
    uint64_t word = cf__load_t(p, F, B), empty = cf__zero_lanes_t(word, F, B);
    if (!empty)
        return false;
    /* The slot is zero, so or-ing the fingerprint in sets it; the rest of the word (the
     * next bucket's bytes, if any) is written back unchanged. */
    cf__store_t(p, word | (uint64_t)fp << (cf__ctz64(empty) - (F - 1)), F, B);
    t->items++;
    return true;
}

/* Clear the first slot holding fp of bucket i1, or if it has none of bucket i2; false if
 * neither holds fp (fast shapes only). As in cf__pair_has_t, both buckets are loaded and
 * compared before anything is decided. */
static CF__INLINE bool cf__pair_remove_t(cf__table *t, const cf__shape *s, uint64_t i1, uint64_t i2,
                                         uint32_t fp, unsigned F, unsigned B)
{
    uint8_t *p1 = cf__bucket_at_t(t, s, i1, F, B), *p2 = cf__bucket_at_t(t, s, i2, F, B);
    uint64_t w1 = cf__load_t(p1, F, B), w2 = cf__load_t(p2, F, B);
    uint64_t fps = cf__fps_t(fp, F, B);
    uint64_t m1 = cf__zero_lanes_t(w1 ^ fps, F, B), m2 = cf__zero_lanes_t(w2 ^ fps, F, B);
    if (!(m1 | m2))
        return false;
    uint8_t *p = m1 ? p1 : p2;
    uint64_t w = m1 ? w1 : w2, m = m1 ? m1 : m2;
    uint64_t lane = ((UINT64_C(1) << F) - 1) << (cf__ctz64(m) - (F - 1));
    cf__store_t(p, w & ~lane, F, B);
    t->items--;
    return true;
}

#endif /* CF_TABLE_H */
