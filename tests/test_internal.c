/*
 * test_internal.c - the mechanisms under the API, tested on their own: multiply-high and
 * the divide-free division, bit-packed slots, the SWAR bucket probes against a slot-by-slot loop,
 * the alternate-bucket function (involution, no fixed point, nested across sub-filter sizes),
 * fingerprints and sizing; the public mapping calls (cf_place_hash, cf_alt_bucket) give
 * exactly the buckets and fingerprint a filter's table uses.
 */
#include "internal.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static cft_rng rng;

/* floor(a * b / 2^64) by 128-bit arithmetic or, without it, by long multiplication of
 * 32-bit halves: the reference for cf__mulhi. */
static uint64_t ref_mulhi(uint64_t a, uint64_t b)
{
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)a * b) >> 64);
}

static void test_mulhi_div(void)
{
    cft_context("cf__mulhi, cf__div63");
    static const uint64_t divisors[] = {2,
                                        3,
                                        6,
                                        7,
                                        1000000,
                                        (UINT64_C(1) << 32) - 2,
                                        UINT64_C(1) << 32,
                                        (UINT64_C(1) << 32) + 2,
                                        UINT64_C(0x5555555555555556),
                                        UINT64_C(1) << 62,
                                        (UINT64_C(1) << 63) - 1};
    static const uint64_t values[] = {0, 1, 2, 3, (UINT64_C(1) << 63) - 1, (UINT64_C(1) << 63) - 2};
    for (size_t i = 0; i < sizeof divisors / sizeof divisors[0]; i++) {
        cf__divisor dv;
        cf__divisor_init(&dv, divisors[i]);
        for (size_t j = 0; j < sizeof values / sizeof values[0]; j++)
            CHECK_EQ_U(cf__div63(values[j], &dv), values[j] / divisors[i]);
        for (uint64_t k = 1; k < 64; k++) { /* around multiples, where the rounding is tightest */
            uint64_t m;
            if (!cf__mul_u64(divisors[i], k, &m) || m >= UINT64_C(1) << 63)
                break;
            CHECK_EQ_U(cf__div63(m, &dv), k);
            CHECK_EQ_U(cf__div63(m - 1, &dv), k - 1);
        }
    }
    static const uint64_t edges[] = {0, 1, 2, UINT64_C(1) << 32, UINT64_MAX - 1, UINT64_MAX};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        for (size_t j = 0; j < sizeof edges / sizeof edges[0]; j++)
            CHECK_EQ_U(cf__mulhi(edges[i], edges[j]), ref_mulhi(edges[i], edges[j]));
    for (int i = 0; i < 2000000; i++) {
        /* Divisors of every magnitude: a random value shifted right by 1..62. */
        uint64_t d = cft_next(&rng) >> (1 + cft_next(&rng) % 62);
        if (d < 2)
            d = 2;
        cf__divisor dv;
        cf__divisor_init(&dv, d);
        uint64_t a = cft_next(&rng), b = cft_next(&rng) >> (cft_next(&rng) % 64);
        if (!CHECK_EQ_U(cf__div63(a >> 1, &dv), (a >> 1) / d) ||
            !CHECK_EQ_U(cf__mulhi(a, b), ref_mulhi(a, b)))
            break;
    }
}

/* Every shape: random contents written slot by slot read back intact; a write touches
 * only its own slot; SWAR probes agree with the plain loop. */
static void test_slots_and_probes(void)
{
    static const unsigned widths[] = {4, 5, 7, 8, 9, 12, 13, 16, 17, 23, 24, 31, 32};
    static const unsigned sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 255};
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            unsigned f = widths[wi], b = sizes[si];
            cft_context("slots b %u f %u", b, f);
            cf__shape s, plain;
            cf__shape_init(&s, f, b, false);
            plain = s;
            plain.swar = false;
            const uint64_t buckets = b > 16 ? 6 : 50;
            size_t bytes;
            if (!CHECK(cf__table_bytes(&s, buckets, &bytes)))
                continue;
            cf__table t = {.buckets = buckets, .shape = &s};
            t.data = calloc(1, bytes);
            uint32_t *model = calloc(buckets * b, sizeof *model);
            if (!t.data || !model) {
                free(t.data);
                free(model);
                CHECK_MSG(false, "out of memory");
                return;
            }
            /* Small fingerprint alphabet, so buckets hold repeats and empties. */
            for (int round = 0; round < 4; round++) {
                for (uint64_t i = 0; i < buckets * b; i++) {
                    uint32_t v = (uint32_t)(cft_next(&rng) % 4);
                    v = v == 3 ? (uint32_t)(cft_next(&rng) & s.fp_mask) : v;
                    cf__slot_set(&t, &s, i / b, (unsigned)(i % b), v);
                    model[i] = v;
                }
                for (uint64_t i = 0; i < buckets * b; i++)
                    if (!CHECK_EQ_U(cf__slot_get(&t, &s, i / b, (unsigned)(i % b)), model[i]))
                        break;
                for (uint64_t i = 0; i < buckets; i++) {
                    for (uint32_t v = 0; v < 4; v++) {
                        uint32_t probe = v == 3 ? model[i * b] : v;
                        unsigned n = 0;
                        int first = -1;
                        for (unsigned j = 0; j < b; j++) {
                            if (model[i * b + j] == probe) {
                                n++;
                                if (first < 0)
                                    first = (int)j;
                            }
                        }
                        CHECK_EQ_U(cf__bucket_count(&t, &s, i, probe), n);
                        CHECK_EQ_U(cf__bucket_count(&t, &plain, i, probe), n);
                        CHECK_EQ_I(cf__bucket_find(&t, &s, i, probe), first);
                        CHECK_EQ_I(cf__bucket_find(&t, &plain, i, probe), first);
                        CHECK(cf__bucket_has(&t, &s, i, probe) == (n > 0));
                    }
                }
            }
            /* The padding stays zero: nothing was written past the slots. */
            uint64_t used = (buckets * b * f + 7) / 8;
            for (size_t i = (size_t)used; i < bytes; i++)
                CHECK_EQ_U(t.data[i], 0);
            free(t.data);
            free(model);
        }
    }
}

static void test_swar_shapes(void)
{
    cft_context("swar shapes");
    /* The fast paths the speed issue names must take the one-load probe. */
    static const unsigned shapes[][2] = {{4, 8}, {4, 12}, {4, 16}, {2, 8}, {2, 16}, {8, 8}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        cf__shape s;
        cf__shape_init(&s, shapes[i][1], shapes[i][0], false);
        CHECK_MSG(s.swar, "b %u f %u", shapes[i][0], shapes[i][1]);
    }
}

/* The constant shapes are what cf__shape_init makes, field by field, and the larger
 * buckets have none. */
static void test_static_shapes(void)
{
    for (unsigned f = CF_MIN_FINGERPRINT_BITS; f <= CF_MAX_FINGERPRINT_BITS; f++)
        for (unsigned b = 1; b <= CF_MAX_BUCKET_SIZE; b++) {
            cft_context("static shape b %u f %u", b, f);
            const cf__shape *c = cf__shape_static(f, b, false);
            if (b > CF__STATIC_SHAPE_B) {
                CHECK(c == NULL);
                continue;
            }
            cf__shape s;
            cf__shape_init(&s, f, b, false);
            if (!CHECK(c != NULL))
                continue;
            CHECK_EQ_U(c->f, s.f);
            CHECK_EQ_U(c->b, s.b);
            CHECK_EQ_U(c->ext, s.ext);
            CHECK_EQ_U(c->swar, s.swar);
            CHECK_EQ_U(c->bucket_bits, s.bucket_bits);
            CHECK_EQ_U(c->fp_mask, s.fp_mask);
            CHECK_EQ_U(c->bucket_mask, s.bucket_mask);
            CHECK_EQ_U(c->lane_lo, s.lane_lo);
            CHECK_EQ_U(c->lane_hi, s.lane_hi);
            CHECK_EQ_U(c->lane_low, s.lane_low);
            CHECK(!c->exact && !c->sync && !c->semi);
        }
    /* RedisBloom's exact shapes: the 8-bit ones, exact, and their tables unpadded. */
    for (unsigned b = 1; b <= CF_MAX_BUCKET_SIZE; b++) {
        cft_context("exact shape b %u", b);
        const cf__shape *e = cf__shape_static_exact(b), *c = cf__shape_static(8, b, false);
        if (b > CF__STATIC_SHAPE_B) {
            CHECK(e == NULL);
            continue;
        }
        if (!CHECK(e != NULL && c != NULL))
            continue;
        CHECK(e->exact && e->f == c->f && e->b == c->b && e->ext == c->ext && e->swar == c->swar &&
              e->semi == c->semi && e->sync == c->sync && e->seg == c->seg &&
              e->bucket_bits == c->bucket_bits && e->fp_mask == c->fp_mask &&
              e->bucket_mask == c->bucket_mask && e->lane_lo == c->lane_lo &&
              e->lane_hi == c->lane_hi && e->lane_low == c->lane_low);
        CHECK_EQ_U(cf__table_size(e, 64), 64u * b);
        CHECK_EQ_U(cf__table_size(c, 64), 64u * b + CF__TABLE_PAD);
    }
}

/* Semi-sorted buckets: the table of prefixes holds every multiset of four ascending 4-bit
 * prefixes once, at its rank; the constant shapes are cf__shape_init's; and buckets written
 * through the slot calls hold, and give back in ascending order, exactly the fingerprints
 * a model multiset holds, at every width. */
/* The hot paths' semi-sorted writes of constant widths (fast.c), which move lanes and
 * nibbles instead of decoding: fp into a free slot of bucket i, and slot `slot` cleared.
 * Only widths of CF__SEMI_FAST_SHAPES (f 9 and 13). */
#define SEMI_FAST_PUT(F)                                                                           \
    if (f == (F))                                                                                  \
        return cf__put_if_free_fb(t, t->shape, i, fp, (F), CF__SEMI_B);
static bool semi_fast_put(cf__table *t, unsigned f, uint64_t i, uint32_t fp)
{
    CF__SEMI_FAST_SHAPES(SEMI_FAST_PUT)
    return false;
}
#undef SEMI_FAST_PUT
#define SEMI_FAST_CLEAR(F)                                                                         \
    if (f == (F)) {                                                                                \
        uint8_t *p = cf__bucket_at_fb(t, NULL, i, (F), CF__SEMI_B);                                \
        cf__store_fb(p, cf__semi_remove_word_fb(cf__load_fb(p, (F), CF__SEMI_B), slot, (F)), (F),  \
                     CF__SEMI_B);                                                                  \
    }
static void semi_fast_clear(cf__table *t, unsigned f, uint64_t i, unsigned slot)
{
    CF__SEMI_FAST_SHAPES(SEMI_FAST_CLEAR)
}
#undef SEMI_FAST_CLEAR

static void test_semi_sorted(void)
{
    cft_context("semi-sorted codes");
    uint8_t seen[1u << 16] = {0};
    for (unsigned c = 0; c < (1u << CF__SEMI_CODE_BITS); c++) {
        unsigned pre = cf__semi_prefixes[c];
        uint32_t fp[4];
        for (unsigned j = 0; j < 4; j++)
            fp[j] = (pre >> (4 * j)) & 15u;
        if (c >= CF__SEMI_CODES) {
            CHECK_EQ_U(pre, 0);
            continue;
        }
        CHECK(fp[0] <= fp[1] && fp[1] <= fp[2] && fp[2] <= fp[3]);
        CHECK_EQ_U(cf__semi_rank(fp, 0), c);
        CHECK_EQ_U(seen[pre], 0);
        seen[pre] = 1;
    }
    /* Each spread table: the same prefixes, p_j at bit j (f - 4). */
#define SEMI_SPREAD_CHECK(F)                                                                       \
    for (unsigned c = 0; c < (1u << CF__SEMI_CODE_BITS); c++) {                                    \
        uint32_t want = 0;                                                                         \
        for (unsigned j = 0; j < 4; j++)                                                           \
            want |= ((cf__semi_prefixes[c] >> (4 * j)) & 15u) << (j * ((F)-4u));                   \
        if (cf__semi_spread_##F[c] != want) {                                                      \
            cft_context("semi-sorted spread table f %u code %u", (unsigned)(F), c);                \
            CHECK_EQ_U(cf__semi_spread_##F[c], want);                                              \
            break;                                                                                 \
        }                                                                                          \
    }
    CF__SEMI_FAST_SHAPES(SEMI_SPREAD_CHECK)
#undef SEMI_SPREAD_CHECK
    for (unsigned f = CF_MIN_FINGERPRINT_BITS; f <= CF_MAX_FINGERPRINT_BITS; f++) {
        cft_context("semi-sorted b 4 f %u", f);
        cf__shape s;
        cf__shape_init(&s, f, 4, true);
        const cf__shape *c = cf__shape_static(f, 4, true);
        CHECK_EQ_U(s.bucket_bits, 4 * (f - 1));
        if (CHECK(c != NULL))
            CHECK(c->f == s.f && c->b == s.b && c->semi && !c->swar && c->ext == 0 &&
                  c->bucket_bits == s.bucket_bits && c->fp_mask == s.fp_mask &&
                  c->bucket_mask == s.bucket_mask && c->lane_lo == s.lane_lo &&
                  c->semi_gather == s.semi_gather && c->lane_low == s.lane_low);
        CHECK((s.bucket_mask != 0) == (f >= CF__SEMI_SWAR_MIN_F && f <= CF__SEMI_SWAR_MAX_F));
        CHECK(cf__shape_static(f, 2, true) == NULL && cf__shape_static(f, 8, true) == NULL);
        const uint64_t buckets = 64;
        size_t bytes;
        if (!CHECK(cf__table_bytes(&s, buckets, &bytes)))
            continue;
        cf__table t = {.buckets = buckets, .shape = &s};
        t.data = calloc(1, bytes);
        uint32_t *model = calloc(buckets * 4, sizeof *model); /* each bucket's, ascending */
        /* For the fast widths, a twin table written by the hot paths' word operations:
         * byte for byte the generic one after every operation. */
        bool fast = false;
#define SEMI_IS_FAST(F) fast |= f == (F);
        CF__SEMI_FAST_SHAPES(SEMI_IS_FAST)
#undef SEMI_IS_FAST
        cf__table t2 = {.buckets = buckets, .shape = c};
        t2.data = calloc(1, bytes);
        if (!t.data || !model || !t2.data) {
            free(t.data);
            free(t2.data);
            free(model);
            CHECK_MSG(false, "out of memory");
            return;
        }
        for (int op = 0; op < 20000; op++) {
            uint64_t i = cft_next(&rng) % buckets;
            /* Values crowd few prefixes and suffixes now and then, to test ties. */
            uint32_t fp = (uint32_t)(cft_next(&rng) & s.fp_mask);
            if (op % 3 == 0)
                fp &= (uint32_t)(s.fp_mask & 0xF000000Fu) | 1u;
            fp += fp == 0;
            unsigned slot = (unsigned)(cft_next(&rng) % 4);
            uint32_t *m = &model[i * 4];
            if (op % 2 == 0) { /* put into a free slot, or clear a slot */
                bool put = cf__put_if_free(&t, &s, i, fp);
                if (put) {
                    CHECK(m[0] == 0);
                    m[0] = fp;
                } else {
                    CHECK(m[0] != 0);
                }
                if (fast)
                    CHECK(semi_fast_put(&t2, f, i, fp) == put);
            } else {
                uint32_t had = cf__slot_get(&t, &s, i, slot);
                CHECK_EQ_U(had, m[slot]);
                cf__slot_set(&t, &s, i, slot, 0);
                t.items -= had != 0;
                m[slot] = 0;
                if (fast)
                    semi_fast_clear(&t2, f, i, slot);
            }
            if (fast && memcmp(t.data, t2.data, bytes) != 0) {
                CHECK_MSG(false, "f %u op %d: the hot paths' semi-sorted write differs", f, op);
                fast = false;
            }
            for (unsigned a = 1; a < 4; a++) /* the model, sorted as the bucket keeps it */
                for (unsigned b = a; b > 0 && m[b - 1] > m[b]; b--) {
                    uint32_t x = m[b];
                    m[b] = m[b - 1];
                    m[b - 1] = x;
                }
            uint32_t v[4];
            CHECK(cf__semi_get(&t, &s, i, v) < CF__SEMI_CODES);
            for (unsigned j = 0; j < 4; j++)
                if (!CHECK_EQ_U(v[j], m[j]))
                    break;
            unsigned want = 0;
            for (unsigned j = 0; j < 4; j++)
                want += m[j] == fp;
            CHECK_EQ_U(cf__bucket_count(&t, &s, i, fp), want);
            CHECK(cf__bucket_has(&t, &s, i, fp) == (want > 0));
            /* The one-load comparison against the decoded bucket, for a stored
             * fingerprint, a probe, and empty slots. */
            uint32_t probes[3] = {m[slot], fp ^ (uint32_t)(cft_next(&rng) & 3u), 0};
            for (unsigned q = 0; q < 3; q++) {
                unsigned bits = 0;
                for (unsigned j = 0; j < 4; j++)
                    bits |= (unsigned)(m[j] == probes[q]) << j;
                CHECK_EQ_U(cf__semi_match(&t, &s, i, probes[q]), bits);
            }
        }
        uint64_t used = 0, want = 0;
        for (uint64_t i = 0; i < buckets * 4; i++)
            want += model[i] != 0;
        CHECK(cf__table_scan(&s, t.data, 0, buckets, &used));
        CHECK_EQ_U(used, want);
        CHECK_EQ_U(t.items, want);
        CHECK(cf__table_tail_clear(&s, t.data, buckets));
        /* A code past the last, and fingerprints out of order, are not canonical. */
        cf__bits_put(t.data, 0, CF__SEMI_CODE_MASK, CF__SEMI_CODES);
        CHECK(!cf__table_scan(&s, t.data, 0, 1, &used));
        if (f >= 8) { /* suffixes of 4 bits or more: 1, 2, 3, 4 share prefix 0 */
            uint32_t v[4] = {1, 2, 3, 4};
            cf__semi_put(&t, &s, 1, v);
            cf__bits_put(t.data, s.bucket_bits + CF__SEMI_CODE_BITS + 1, 1, 1); /* 1 -> 3 */
            CHECK(!cf__table_scan(&s, t.data, 1, 2, &used));
        }
        free(t.data);
        free(t2.data);
        free(model);
    }
}

/* A table of base * scale buckets and shape s (whose mapping is all that matters here), as
 * cf__table_init makes it (without data), with its growth in *g. */
static cf__table table_of(uint64_t base, uint64_t scale, cf__grown *g, const cf__shape *s)
{
    cf__table t = {.buckets = base * scale, .shape = s};
    if (scale > 1) {
        *g = (cf__grown){.base = base, .scale = scale};
        cf__divisor_init(&g->per_scale, scale);
        t.grown = g;
    }
    return t;
}

/* Both mappings (SEG 0 and CF_SEGMENT_BITS): an involution without fixed points that nests
 * under growth, and with segments, one that keeps every bucket in its segment. */
static void test_alt(unsigned seg)
{
    cft_context("alt, segment bits %u", seg);
    cf__shape sh;
    cf__shape_init(&sh, 12, 4, false);
    sh.seg = (uint8_t)seg;
    for (int i = 0; i < 200000; i++) {
        uint64_t m = (cft_next(&rng) >> (cft_next(&rng) % 60 + 4)) | 2u;
        m += m & 1u;
        if (seg) /* 1 to 2^24 segments */
            m = ((cft_next(&rng) >> (cft_next(&rng) % 24 + 40)) + 1) << seg;
        cf__grown g;
        cf__table t = table_of(m, 1, &g, &sh);
        uint32_t fp = (uint32_t)(cft_next(&rng) % 0xffffffffu) + 1;
        uint64_t b0 = cft_next(&rng) % m;
        uint64_t b1 = cf__alt_of0(&t, b0, fp);
        CHECK(b1 < m);
        CHECK(b1 != b0);                         /* no fixed point */
        CHECK_EQ_U(cf__alt_of0(&t, b1, fp), b0); /* involution */
        if (seg)
            CHECK_EQ_U(b1 >> seg, b0 >> seg); /* in one segment */
        /* Nested: in sub-filters e and e^2 times larger, a key's pair, and any bucket's
         * alternate, divide down to the smaller sub-filter's. */
        uint64_t e = 1 + cft_next(&rng) % 5, big;
        if (!cf__mul_u64(m, e * e, &big) || big > UINT64_C(1) << 58)
            continue;
        cf__grown gT, gM;
        cf__table T = table_of(m, e * e, &gT, &sh), M = table_of(m, e, &gM, &sh);
        cf__key k = cf__key_bits(1 + (unsigned)(cft_next(&rng) % 32), cft_next(&rng));
        uint64_t B0, B1, s0, s1, M0, M1;
        cf__buckets(&T, &k, &B0, &B1);
        cf__buckets(&M, &k, &M0, &M1);
        cf__buckets(&t, &k, &s0, &s1);
        CHECK(B0 < T.buckets && B1 < T.buckets && B0 != B1);
        CHECK_EQ_U(cf__alt_of0(&T, B0, k.fp), B1);
        CHECK_EQ_U(cf__alt_of0(&T, B1, k.fp), B0);
        CHECK_EQ_U(B0 / (e * e), s0);
        CHECK_EQ_U(M0 / e, s0);
        CHECK_EQ_U(B0 / e, M0);
        CHECK_EQ_U(B1 / e, M1);
        uint64_t X = cft_next(&rng) % T.buckets;
        CHECK_EQ_U(cf__alt_of0(&T, X, fp) / e, cf__alt_of0(&M, X / e, fp));
        if (!CHECK_EQ_U(B1 / (e * e), s1))
            break;
    }
}

/* The offset tables hold, for each value of a hash's top f bits, the offset the
 * segmented mapping computes for that key's fingerprint; the pair the hot paths compute
 * with them is the mapping's. */
static void test_seg_tables(void)
{
    cft_context("segmented offset tables");
    cf__shape sh;
    cf__shape_init(&sh, 12, 4, false);
    sh.seg = CF_SEGMENT_BITS;
#define CHECK_SEG_TABLE(F)                                                                         \
    for (uint64_t x = 0; x < (UINT64_C(1) << F); x++) {                                            \
        uint64_t h = x << (64u - F) | (cft_next(&rng) >> F);                                       \
        cf__key k = cf__key_bits(F, h);                                                            \
        uint64_t want = cf__seg_offset(cf__fp_mix(x ? (uint32_t)x : 1u), CF_SEGMENT_BITS);         \
        CHECK(cf__seg_table_fb(F));                                                                \
        if (!CHECK_EQ_U(cf__seg_off_##F[x], want) || !CHECK_EQ_U(cf__seg_off_fb(h, F), want))      \
            break;                                                                                 \
        cf__grown g;                                                                               \
        cf__table t = table_of((cft_next(&rng) % 4096 + 1) << CF_SEGMENT_BITS, 1, &g, &sh);        \
        uint64_t a1, a2, b1, b2;                                                                   \
        cf__buckets0_seg(&t, &k, &a1, &a2, CF_SEGMENT_BITS);                                       \
        cf__buckets0_seg_fb(&t, &k, &b1, &b2, CF_SEGMENT_BITS, F);                                 \
        if (!CHECK_EQ_U(b1, a1) || !CHECK_EQ_U(b2, a2))                                            \
            break;                                                                                 \
    }
    CF__SEG_TABLE_WIDTHS(CHECK_SEG_TABLE)
#undef CHECK_SEG_TABLE
    CHECK(!cf__seg_table_fb(16)); /* (128 KiB: computed) */
}

/* The per-shape insert's one-, two- and three-move evictions (fast.c), and the search
 * that goes on from what they examined when they fail (cf__insert_rest_seen_h), take the
 * path the whole search (evict.c) would: twin filters take the same hashes, one through
 * cf_add_hash, the other through the whole search wherever both buckets are full
 * (cf__insert_rest_h, as the insert would call it without them), until the first refusal;
 * their tables, counts and stashes must be the same bytes throughout. A budget too small
 * for a level (max_kicks below 2b, 2b (1 + b), 2b (1 + b + b^2)) must leave it to the
 * search, which runs out of nodes where they would not. */
static void test_evict_one(void)
{
    const struct {
        unsigned f, b, flags, kicks;
    } sh[] = {{12, 4, 0, 0},
              {8, 4, 0, 0},
              {16, 4, 0, 0},
              {12, 2, 0, 0},
              {8, 2, 0, 0},
              {16, 2, 0, 0},
              {8, 8, 0, 0},
              {13, 4, CF_SEMI_SORT, 0},
              {9, 4, CF_SEMI_SORT, 0},
              {12, 4, CF_SEGMENTED, 0},
              {13, 4, CF_SEMI_SORT | CF_SEGMENTED, 0},
              {12, 4, 0, 20},
              {12, 4, 0, 5},
              {8, 8, 0, 60},
              {12, 2, 0, 8},
              {12, 4, 0, 100},
              {12, 2, 0, 20}};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        cft_context("the insert's own evictions, f %u b %u flags 0x%x max_kicks %u", sh[i].f,
                    sh[i].b, sh[i].flags, sh[i].kicks);
        /* a small budget meets its first refusal early: more keys, for as many full pairs */
        cf_config c = {.capacity = (sh[i].flags & CF_SEGMENTED) ? 300000
                                   : sh[i].kicks                ? 100000
                                                                : 20000,
                       .fingerprint_bits = sh[i].f,
                       .bucket_size = sh[i].b,
                       .max_kicks = sh[i].kicks,
                       .expansion = 0,
                       .seed = 0x0E1,
                       .flags = CF_FIXED_SEED | sh[i].flags};
        cf_filter *a = cft_new(c), *b = cft_new(c);
        if (a == NULL || b == NULL)
            return;
        const cf__shape *s = b->t0.shape;
        size_t bytes = cf__table_size(s, b->t0.buckets);
        uint64_t full_pairs = 0, checks = 0;
        bool same = true;
        for (uint64_t n = 0; same; n++) {
            uint64_t h = cft_next(&rng);
            cf__key k = cf__key_bits(s->f, h);
            uint64_t i1, i2;
            cf__buckets0(&b->t0, &k, &i1, &i2);
            bool full =
                cf__bucket_find(&b->t0, s, i1, 0) < 0 && cf__bucket_find(&b->t0, s, i2, 0) < 0;
            cf_status sb = full ? cf__insert_rest_h(b, h, i1, i2) : cf_add_hash(b, h);
            cf_status sa = cf_add_hash(a, h);
            full_pairs += full;
            same = CHECK_EQ_U(sa, sb);
            if (n % 512 == 0 || sa != CF_OK) {
                checks++;
                same = same &&
                       CHECK_MSG(memcmp(a->t0.data, b->t0.data, bytes) == 0 &&
                                     a->t0.items == b->t0.items && a->stash_n == b->stash_n,
                                 "the tables differ after %llu keys", (unsigned long long)n + 1);
            }
            if (sa != CF_OK)
                break;
        }
        /* the twins went through many full pairs: the insert's evictions ran */
        CHECK_MSG(full_pairs > 1000, "only %llu full pairs", (unsigned long long)full_pairs);
        CHECK(checks > 10);
        cf_free(a);
        cf_free(b);
    }
}

static void test_key_bits(void)
{
    cft_context("key bits");
    for (unsigned f = CF_MIN_FINGERPRINT_BITS; f <= CF_MAX_FINGERPRINT_BITS; f++) {
        cf__shape s;
        cf__shape_init(&s, f, 4, false);
        cf__key zero = cf__key_bits(s.f, 0), ones = cf__key_bits(s.f, UINT64_MAX);
        CHECK_EQ_U(zero.fp, 1); /* 0 is the empty slot: it becomes 1 */
        CHECK_EQ_U(ones.fp, s.fp_mask);
        CHECK_EQ_U(ones.x, UINT64_MAX << f); /* the index uses the other bits */
        for (int i = 0; i < 1000; i++) {
            uint64_t h = cft_next(&rng);
            cf__key k = cf__key_bits(s.f, h);
            CHECK(k.fp != 0 && k.fp <= s.fp_mask);
            CHECK_EQ_U(k.x, h << f);
            CHECK_EQ_U(k.mix, (uint64_t)k.fp * k.fp * UINT64_C(0x9e3779b97f4a7c15));
        }
    }
}

static void test_place(void)
{
    cft_context("place");
    for (int i = 0; i < 200000; i++) {
        uint64_t m = (cft_next(&rng) >> (cft_next(&rng) % 64)) | 2u;
        m += m & 1u;
        if (m > CF_PLACE_MAX_BUCKETS)
            m = CF_PLACE_MAX_BUCKETS;
        unsigned f =
            CF_MIN_FINGERPRINT_BITS +
            (unsigned)cft_below(&rng, CF_MAX_FINGERPRINT_BITS - CF_MIN_FINGERPRINT_BITS + 1);
        cf__shape s;
        cf__shape_init(&s, f, 4, false);
        cf__grown g;
        cf__table t = table_of(m, 1, &g, &s);
        uint64_t h = cft_next(&rng);
        cf__key k = cf__key_bits(s.f, h);
        uint64_t i1, i2;
        cf__buckets(&t, &k, &i1, &i2); /* as the filter places h */
        cf_place p, q;
        CHECK_ST(cf_place_hash(h, m, f, &p), CF_OK);
        CHECK_EQ_U(p.tag, k.fp);
        CHECK_EQ_U(p.bucket[0], i1);
        CHECK_EQ_U(p.bucket[1], i2);
        CHECK_EQ_U(cf_alt_bucket(p.bucket[0], p.tag, m), p.bucket[1]);
        cf_mapping any = {m, f, 0};
        CHECK_ST(cf_place_in(&any, h, &q), CF_OK);
        CHECK(p.bucket[0] == q.bucket[0] && p.bucket[1] == q.bucket[1] && p.tag == q.tag);
        CHECK_EQ_U(cf_alt_in(&any, p.bucket[0], p.tag), p.bucket[1]);
        /* The segmented mapping, in a table of whole segments. */
        s.seg = CF_SEGMENT_BITS;
        uint64_t ms = (m >> CF_SEGMENT_BITS << CF_SEGMENT_BITS) + (UINT64_C(1) << CF_SEGMENT_BITS);
        if (ms > CF_PLACE_MAX_BUCKETS)
            ms = CF_PLACE_MAX_BUCKETS;
        t = table_of(ms, 1, &g, &s);
        cf__buckets(&t, &k, &i1, &i2);
        cf_mapping seg = {ms, f, CF_SEGMENT_BITS};
        CHECK_ST(cf_place_in(&seg, h, &q), CF_OK);
        CHECK_EQ_U(q.tag, k.fp);
        CHECK_EQ_U(q.bucket[0], i1);
        CHECK_EQ_U(q.bucket[1], i2);
        CHECK_EQ_U(q.bucket[0] >> CF_SEGMENT_BITS, q.bucket[1] >> CF_SEGMENT_BITS);
        CHECK_EQ_U(cf_alt_in(&seg, q.bucket[1], q.tag), q.bucket[0]);
        if (!CHECK_EQ_U(cf_alt_bucket(p.bucket[1], p.tag, m), p.bucket[0]))
            break;
    }
    cf_mapping bad[] = {{1u << 16, 12, 15}, {(1u << 16) + 2, 12, 16}, {1u << 16, 3, 16},
                        {1u << 16, 33, 16}, {1u << 16, 12, 61},       {0, 12, 16},
                        {3, 12, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cf_place q = {{7, 7}, 7};
        CHECK_ST(cf_place_in(&bad[i], 1, &q), CF_EINVAL);
        CHECK_EQ_U(q.tag, 7);
        CHECK_EQ_U(cf_alt_in(&bad[i], 0, 5), UINT64_MAX);
    }
    cf_mapping one = {1u << 16, 12, 16};
    CHECK_ST(cf_place_in(NULL, 1, &(cf_place){{0, 0}, 0}), CF_EINVAL);
    CHECK_ST(cf_place_in(&one, 1, NULL), CF_EINVAL);
    CHECK_EQ_U(cf_alt_in(&one, 1u << 16, 5), UINT64_MAX);
    CHECK_EQ_U(cf_alt_in(&one, 0, 0), UINT64_MAX);
    CHECK_EQ_U(cf_alt_in(NULL, 0, 5), UINT64_MAX);
    cf_place p = {{7, 7}, 7};
    CHECK_ST(cf_place_hash(1, 0, 16, &p), CF_EINVAL);
    CHECK_ST(cf_place_hash(1, 3, 16, &p), CF_EINVAL);
    CHECK_ST(cf_place_hash(1, CF_PLACE_MAX_BUCKETS + 2, 16, &p), CF_EINVAL);
    CHECK_ST(cf_place_hash(1, 64, CF_MIN_FINGERPRINT_BITS - 1, &p), CF_EINVAL);
    CHECK_ST(cf_place_hash(1, 64, CF_MAX_FINGERPRINT_BITS + 1, &p), CF_EINVAL);
    CHECK_ST(cf_place_hash(1, 64, 16, NULL), CF_EINVAL);
    CHECK_EQ_U(p.tag, 7); /* untouched by a refusal */
    CHECK_EQ_U(cf_alt_bucket(64, 5, 64), UINT64_MAX);
    CHECK_EQ_U(cf_alt_bucket(0, 0, 64), UINT64_MAX);
    CHECK_EQ_U(cf_alt_bucket(0, 5, 63), UINT64_MAX);
    CHECK_EQ_U(cf_alt_bucket(0, 5, 0), UINT64_MAX);
    CHECK_EQ_U(cf_hash_seeded(99, "key", 3), XXH3_64bits_withSeed("key", 3, 99));
    CHECK_EQ_U(cf_hash_seeded(99, NULL, 0), XXH3_64bits_withSeed("", 0, 99));
    CHECK_EQ_U(cf_hash_seeded(99, NULL, 1), 0);
}

static void test_sizing(void)
{
    cft_context("sizing");
    static const unsigned sizes[] = {1, 2, 3, 4, 8, 16};
    static const unsigned widths[] = {4, 8, 12, 16, 32};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            cf__shape s;
            cf__shape_init(&s, widths[wi], sizes[si], false);
            uint64_t prev = 0;
            for (uint64_t c = 1; c < (UINT64_C(1) << 40); c = c * 3 / 2 + 1) {
                uint64_t m;
                size_t bytes;
                if (!cf__buckets_for(&s, c, &m, &bytes))
                    break; /* too big for this shape; larger ones must be too */
                CHECK(m % 2 == 0 && m >= 2);
                CHECK(m * s.b >= c); /* room for every key */
                CHECK(m >= prev);    /* more keys never get a smaller table */
                prev = m;
            }
        }
    }
}

/* The inline XXH3 of 8- and 16-byte keys is XXH3: every seed's flips, keys at every
 * alignment, against the library's own XXH3_64bits_withSeed. */
static void test_short_hash(void)
{
    cft_context("xxh3 of 8 and 16 bytes");
    uint8_t buf[32];
    static const uint64_t seeds[] = {0, 1, UINT64_MAX, UINT64_C(0x00000000ffffffff),
                                     UINT64_C(0xffffffff00000000)};
    for (int i = 0; i < 200000; i++) {
        uint64_t seed = i < 5 ? seeds[i] : cft_next(&rng);
        for (size_t j = 0; j < sizeof buf; j++)
            buf[j] = (uint8_t)cft_next(&rng);
        if (i % 7 == 0)
            memset(buf, i % 14 ? 0xff : 0, sizeof buf);
        uint64_t k8 = cf__k8_of(seed);
        size_t at = (size_t)i % 16;
        if (!CHECK_EQ_U(cf__seed_of(k8), seed) || /* the filter keeps k8 in place of its seed */
            !CHECK_EQ_U(cf__xxh3_8(buf + at, k8), XXH3_64bits_withSeed(buf + at, 8, seed)) ||
            !CHECK_EQ_U(cf__xxh3_16(buf + at, k8), XXH3_64bits_withSeed(buf + at, 16, seed)))
            break;
    }
}

int main(void)
{
    cft_init("test_internal");
    rng = cft_rng_make(cft.seed);
    test_mulhi_div();
    test_slots_and_probes();
    test_swar_shapes();
    test_static_shapes();
    test_semi_sorted();
    test_alt(0);
    test_alt(CF_SEGMENT_BITS);
    test_key_bits();
    test_seg_tables();
    test_evict_one();
    test_short_hash();
    test_place();
    test_sizing();
    return cft_finish();
}
