/*
 * mapping.h - which buckets a key may occupy: the bucket mappings of format versions 2
 * (any size) and 3 (segmented) (docs/FORMAT.md), from a key's 64-bit hash to its
 * fingerprint and its two buckets in any sub-filter, and back from a stored fingerprint to
 * its other bucket. The tables it indexes are table.h's; a table's shape says which
 * mapping it has (cf__shape.seg).
 */
#ifndef CF_MAPPING_H
#define CF_MAPPING_H

#include "cuckoofilter.h"
#include "table.h"

/* One 64-bit hash h per key. Its top f bits are the fingerprint (0 is the empty slot, so
 * a zero fingerprint becomes 1); its other 64 - f bits, as the fraction x = (h << f) / 2^64,
 * choose the first bucket: floor(x * m) in a table of m buckets, one multiply-high, no
 * modulo. The two never share a bit.
 *
 * The second bucket: in a table of m buckets (m even) a fingerprint fp has the odd offset
 * off = floor(frac(fp^2 * C) * m) | 1 (cf__fp_mix), and alt(i) = (off - i) mod m. That is an
 * involution (alt(alt(i)) = i) with no fixed point (2 i = off mod m has no solution: m even, off
 * odd).
 *
 * Segmented (format 3): m is a multiple of 2^s (s = the shape's seg, CF_SEGMENT_BITS), and
 * the offset is off = floor(frac(fp^2 * C) * 2^s) | 1, odd and below 2^s, and
 * alt(i) = i XOR off: an involution with no fixed point (off is not 0) that keeps every
 * bucket in its segment of 2^s buckets, so that a segment is a table of its own. The
 * second bucket then waits on one XOR after the first, not on a subtraction and a choice
 * of two: lookups begin their second read sooner.
 *
 * Growth nests: sub-filter k has m_k = m_0 * e^k buckets (e = expansion), so its first
 * bucket floor(x * m_k) is p * e^k + r with p = floor(x * m_0), the first bucket in
 * sub-filter 0, and 0 <= r < e^k. Its second bucket moves only that "prefix" p, with
 * sub-filter 0's involution: alt_k(p * e^k + r) = alt_0(p) * e^k + r. Then reducing a pair
 * of sub-filter k to sub-filter j < k (floor division by e^(k - j)) gives the key's pair
 * there, for every key: two keys whose fingerprint and pair coincide in a sub-filter
 * coincide in every older one. That is what makes deletes safe in a grown filter (see
 * slow.c). In sub-filter k, the keys with the same r form e^k independent copies of a
 * table of m_0 buckets, each at the whole table's load. */
typedef struct cf__key {
    uint64_t x;   /* the index bits, h << f: a fraction of 2^64 */
    uint64_t mix; /* cf__fp_mix(fp) */
    uint64_t h;   /* the hash, for the fingerprints of wider sub-filters (cf__fp_in) */
    uint32_t fp;  /* the f-bit fingerprint, never 0 */
} cf__key;

/* Growth that keeps the false-positive rate gives each new sub-filter fingerprints `ext`
 * bits wider than the first's: the f-bit fingerprint in the low bits, and above it the
 * low ext bits of a second mix of the hash, (h * CF__EXT_MULT) >> 32. Mapping stays the
 * first sub-filter's: the index bits (h << f) and the alternate (from the f-bit
 * fingerprint, the low f bits of any wider one) are the same in every sub-filter, so pairs
 * nest as above. And the fingerprints nest too: a narrower one is a wider one's low bits,
 * so two keys whose fingerprint and pair coincide in a sub-filter coincide in every older
 * one, which is what keeps deletes safe. A wider fingerprint is never 0 (its low bits are
 * not). The mix's bits depend on every bit of h, also on those below the index bits that
 * choose the bucket, so within a bucket the extra bits are as good as independent. */
#define CF__EXT_MULT UINT64_C(0xd6e8feb86659fd93)

/* 2^64 / golden ratio: multiples of it, as fractions, spread evenly over [0, 1). */
#define CF__ALT_MULT UINT64_C(0x9e3779b97f4a7c15)

/* The fraction whose multiple of m is fp's alternate offset: fp^2 * C. The square matters:
 * with fp * C alone, offsets would be additive (off(a) + off(b) = off(a + b), give or take
 * one), so chains of moves would return to their start far more often than at random, and
 * short fingerprints filled up early. Squared, the offsets reach the loads of a full
 * 64-bit mixer at the first failed insert (test_full prints them), at two multiplies. */
static inline uint64_t cf__fp_mix(uint32_t fp)
{
    return (uint64_t)fp * fp * CF__ALT_MULT;
}

/* The key of hash h for f-bit fingerprints. */
static inline cf__key cf__key_bits(unsigned f, uint64_t h)
{
    cf__key k;
    uint32_t fp = (uint32_t)(h >> (64u - f));
    k.fp = fp + (fp < 1u); /* compare-and-add-carry: two instructions */
    k.x = h << f;
    k.mix = cf__fp_mix(k.fp);
    k.h = h;
    return k;
}

/* Hashes for fingerprints whose keys are not known (a merge re-inserts them): a walk over
 * the buckets of a first sub-filter of m buckets in order, giving in each the least index
 * fraction that maps to it and is a multiple of 2^f (h << f always is). The hash
 * fp << (64 - f) | fraction >> f is then, for cf__key_bits, a key with fingerprint fp and
 * first bucket that bucket: the same pair as the key whose fingerprint sits there, so
 * inserting it is inserting that key, in a filter that does not grow (the finer bits a
 * new sub-filter would take are not the key's). 2^64 = q * m + r steps the fraction
 * exactly, with no division per bucket. */
typedef struct cf__walk {
    uint64_t q, r, m;
    uint64_t base, rem; /* floor and remainder of bucket * 2^64 / m */
    unsigned f;
} cf__walk;

/* False where m is too large for f-bit fingerprints to leave a whole multiple of 2^f in
 * every bucket's share of the fractions (m >= 2^(64 - f)). */
static inline bool cf__walk_init(cf__walk *w, unsigned f, uint64_t m)
{
    if (m == 0 || m > (UINT64_MAX >> f))
        return false;
    w->q = UINT64_MAX / m;
    w->r = UINT64_MAX % m + 1u;
    if (w->r == m) {
        w->q++;
        w->r = 0;
    }
    w->m = m;
    w->base = w->rem = 0;
    w->f = f;
    return true;
}

static inline uint64_t cf__walk_hash(const cf__walk *w, uint32_t fp)
{
    uint64_t unit = UINT64_C(1) << w->f;
    uint64_t least = w->base + (w->rem != 0); /* ceil(bucket * 2^64 / m) */
    uint64_t fraction = (least + unit - 1u) & ~(unit - 1u);
    return (uint64_t)fp << (64u - w->f) | fraction >> w->f;
}

static inline void cf__walk_next(cf__walk *w)
{
    uint64_t rem = w->rem + w->r; /* both below m < 2^63: no overflow */
    w->base += w->q + (rem >= w->m);
    w->rem = rem >= w->m ? rem - w->m : rem;
}

/* The walk moved to bucket x (< m) at once: x * 2^64 = x * q * m + x * r, so its floor
 * over m is x * q + floor(x * r / m), the product x * r taken bit by bit modulo m (it may
 * pass 2^64, and no 128-bit type is assumed). */
static inline void cf__walk_seek(cf__walk *w, uint64_t x)
{
    uint64_t quo = 0, rem = 0; /* x's bits so far, times r: quo * m + rem, rem < m < 2^60 */
    for (unsigned bit = 64; bit-- > 0;) {
        quo <<= 1;
        rem <<= 1;
        if (rem >= w->m) {
            rem -= w->m;
            quo++;
        }
        if (x >> bit & 1u) {
            rem += w->r;
            if (rem >= w->m) {
                rem -= w->m;
                quo++;
            }
        }
    }
    w->base = x * w->q + quo;
    w->rem = rem;
}

/* The fingerprint the key has in sub-filter t: k->fp, and for a wider one the low ext bits
 * of (h * CF__EXT_MULT) >> 32 above it. */
static inline uint32_t cf__fp_in(const cf__key *k, const cf__table *t)
{
    unsigned ext = t->shape->ext;
    if (CF__LIKELY(ext == 0))
        return k->fp;
    uint32_t more = (uint32_t)((k->h * CF__EXT_MULT) >> 32) & ((UINT32_C(1) << ext) - 1u);
    return k->fp | more << (t->shape->f - ext);
}

/* A stored fingerprint of sub-filter t narrowed to `ext` extra bits (ext <= t's): the
 * fingerprint the same key has in a sub-filter of that width, its low bits. */
static inline uint32_t cf__fp_narrow(uint32_t fp, const cf__table *t, unsigned ext)
{
    unsigned width = t->shape->f - t->shape->ext + ext;
    return fp & (uint32_t)((UINT64_C(1) << width) - 1u);
}

/* The odd offset of a fingerprint whose mix is `mix` in a table of m buckets (m even):
 * in [1, m - 1]. */
static inline uint64_t cf__alt_offset(uint64_t mix, uint64_t m)
{
    return cf__mulhi(mix, m) | 1u;
}

/* (off - bucket) mod m, for bucket < m and off < m (both below 2^63). */
static inline uint64_t cf__alt(uint64_t bucket, uint64_t off, uint64_t m)
{
    /* Both values computed, then chosen: gcc 12 makes this a conditional move, 2
     * instructions fewer than the mask of the sign that clang 14 makes of it; neither a
     * branch, which would go either way at random and discard the lookups in flight at
     * each misprediction. */
    uint64_t d = off - bucket, w = d + m;
    return (int64_t)d < 0 ? w : d;
}

/* The segmented offset of a fingerprint whose mix is `mix`, for segments of 2^seg buckets
 * (0 < seg < 64): odd, in [1, 2^seg - 1]. */
static inline uint64_t cf__seg_offset(uint64_t mix, unsigned seg)
{
    return mix >> (64u - seg) | 1u;
}

/* The fingerprint widths whose segmented offsets the hot paths read from a table
 * (mapping.c, from scripts/gen-seg-table): the fast shapes' and the fast semi-sorted
 * ones' up to 13 bits (16 KiB); wider ones would take a table of 128 KiB, out of the
 * first-level cache, and compute their offset. */
#define CF__SEG_TABLE_WIDTHS(X) X(8) X(9) X(12) X(13)
#define CF__SEG_TABLE_DECL(F)   CF__HIDDEN extern const uint16_t cf__seg_off_##F[1u << F];
CF__SEG_TABLE_WIDTHS(CF__SEG_TABLE_DECL)
#undef CF__SEG_TABLE_DECL
_Static_assert(CF_SEGMENT_BITS == 16, "the offset tables hold 16-bit offsets");

/* Does width F (a constant) have an offset table? */
static CF__INLINE bool cf__seg_table_fb(unsigned F)
{
#define CF__SEG_TABLE_IS(W) || F == W
    return false CF__SEG_TABLE_WIDTHS(CF__SEG_TABLE_IS);
#undef CF__SEG_TABLE_IS
}

/* The segmented offset, g(fp) | 1, of the key of hash h, for f-bit fingerprints (a
 * constant with a table). Indexed by the hash's top bits, before the fingerprint
 * is made nonzero (entry 0 is fingerprint 1's): on the way to the second bucket a shift
 * and a load from the first-level cache, where computing it takes a compare, an add and
 * two multiplies before the shift (docs/PERFORMANCE.md, "Segmented tables"). */
static CF__INLINE uint64_t cf__seg_off_fb(uint64_t h, unsigned F)
{
#define CF__SEG_TABLE_CASE(W)                                                                      \
    case W:                                                                                        \
        return cf__seg_off_##W[h >> (64u - W)];
    switch (F) {
        CF__SEG_TABLE_WIDTHS(CF__SEG_TABLE_CASE)
    default:
        return 0; /* (no such call: cf__seg_table_fb) */
    }
#undef CF__SEG_TABLE_CASE
}

/* The other bucket of `bucket` in a first sub-filter of m buckets and segments of 2^seg
 * (0: the any-size mapping), for a fingerprint whose mix is `mix`. seg is a constant in
 * the per-shape code of fast.c (compiled once per mapping), else read from the shape. */
static CF__INLINE uint64_t cf__alt_mix(uint64_t bucket, uint64_t mix, uint64_t m, unsigned seg)
{
    if (seg)
        return bucket ^ cf__seg_offset(mix, seg);
    return cf__alt(bucket, cf__alt_offset(mix, m), m);
}

/* The key's two buckets in the first sub-filter (base == buckets, scale 1), for segments
 * of 2^SEG buckets, SEG a constant (0: the any-size mapping): the hot path. */
static CF__INLINE void cf__buckets0_seg(const cf__table *t, const cf__key *k, uint64_t *i1,
                                        uint64_t *i2, unsigned SEG)
{
    *i1 = cf__mulhi(k->x, t->buckets);
    *i2 = cf__alt_mix(*i1, k->mix, t->buckets, SEG);
}

/* The same for f-bit fingerprints (F a constant, 0 if read at run time): a width with an
 * offset table reads the offset from it. */
static CF__INLINE void cf__buckets0_seg_fb(const cf__table *t, const cf__key *k, uint64_t *i1,
                                           uint64_t *i2, unsigned SEG, unsigned F)
{
    if (SEG && cf__seg_table_fb(F)) {
        *i1 = cf__mulhi(k->x, t->buckets);
        *i2 = *i1 ^ cf__seg_off_fb(k->h, F);
        return;
    }
    cf__buckets0_seg(t, k, i1, i2, SEG);
}

/* The other bucket of `bucket` in a first sub-filter t (not grown) for fingerprint fp
 * (F a constant): a width with an offset table reads it at fp, which is what the hash's
 * top bits gave it (fp is never 0, the entry that differs). */
static CF__INLINE uint64_t cf__alt0_seg_fb(const cf__table *t, uint64_t bucket, uint32_t fp,
                                           unsigned SEG, unsigned F)
{
    if (SEG && cf__seg_table_fb(F))
        return bucket ^ cf__seg_off_fb((uint64_t)fp << (64u - F), F);
    return cf__alt_mix(bucket, cf__fp_mix(fp), t->buckets, SEG);
}

/* The same with the mapping read from the table's shape. */
static inline void cf__buckets0(const cf__table *t, const cf__key *k, uint64_t *i1, uint64_t *i2)
{
    *i1 = cf__mulhi(k->x, t->buckets);
    *i2 = cf__alt_mix(*i1, k->mix, t->buckets, t->shape->seg);
}

/* Sub-filter t's buckets over the first's: expansion^k for sub-filter k (1 when 1). */
static inline uint64_t cf__scale_of(const cf__table *t)
{
    return t->grown ? t->grown->scale : 1u;
}

/* The key's two buckets in any sub-filter, for segments of 2^SEG buckets (as for
 * cf__buckets0_seg). */
static CF__INLINE void cf__buckets_seg(const cf__table *t, const cf__key *k, uint64_t *i1,
                                       uint64_t *i2, unsigned SEG)
{
    const cf__grown *g = t->grown;
    if (CF__LIKELY(!g)) {
        cf__buckets0_seg(t, k, i1, i2, SEG);
        return;
    }
    uint64_t p = cf__mulhi(k->x, g->base); /* = floor(i1 / scale) */
    uint64_t a = cf__alt_mix(p, k->mix, g->base, SEG);
    *i1 = cf__mulhi(k->x, t->buckets);
    *i2 = *i1 + (a - p) * g->scale; /* modulo 2^64: a < p wraps and comes back */
}

/* The same for f-bit fingerprints (F a constant, 0 if read at run time), as
 * cf__buckets0_seg_fb for a first sub-filter. */
static CF__INLINE void cf__buckets_seg_fb(const cf__table *t, const cf__key *k, uint64_t *i1,
                                          uint64_t *i2, unsigned SEG, unsigned F)
{
    if (CF__LIKELY(!t->grown)) {
        cf__buckets0_seg_fb(t, k, i1, i2, SEG, F);
        return;
    }
    cf__buckets_seg(t, k, i1, i2, SEG);
}

/* The same with the mapping read from the table's shape. */
static inline void cf__buckets(const cf__table *t, const cf__key *k, uint64_t *i1, uint64_t *i2)
{
    cf__buckets_seg(t, k, i1, i2, t->shape->seg);
}

/* The other bucket in table t of bucket `bucket` for a key whose fingerprint in the first
 * sub-filter is fp0, the table's segment bits being seg (a loop over one table reads them
 * once). */
static CF__INLINE uint64_t cf__alt_of0_seg(const cf__table *t, uint64_t bucket, uint32_t fp0,
                                           unsigned seg)
{
    const cf__grown *g = t->grown;
    if (CF__LIKELY(!g))
        return cf__alt_mix(bucket, cf__fp_mix(fp0), t->buckets, seg);
    uint64_t p = cf__div63(bucket, &g->per_scale);
    return bucket + (cf__alt_mix(p, cf__fp_mix(fp0), g->base, seg) - p) * g->scale;
}

static inline uint64_t cf__alt_of0(const cf__table *t, uint64_t bucket, uint32_t fp0)
{
    return cf__alt_of0_seg(t, bucket, fp0, t->shape->seg);
}

/* The other bucket of fingerprint fp (of t's width) in bucket `bucket` of table t. */
static inline uint64_t cf__alt_of(const cf__table *t, uint64_t bucket, uint32_t fp)
{
    return cf__alt_of0(t, bucket, cf__fp_narrow(fp, t, 0));
}

#endif /* CF_MAPPING_H */
