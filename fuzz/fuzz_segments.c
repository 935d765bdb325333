/*
 * fuzz_segments.c - merges by ranges of segments (cf_merge_segments, with cf_get_segments,
 * cf_put_segments and cf_stash_hashes): range bytes from real filters, then damaged.
 *
 * Input: a shape byte, a mode byte, a seed (8 bytes), then records of 6 bytes: a 4-byte
 * offset and a 1-byte value to exclusive-or there (offset bit 31: the source range, else
 * the destination; the rest taken modulo the range's length), and a flag byte whose bit 0
 * makes the record a hash instead (the 4 bytes, mixed with the seed, as a key's hash).
 *   shape  % 4: 4-bit fingerprints, buckets of 1; 8-bit, 1; 4-bit, 2; semi-sorted 5/4
 *   mode   bits 0-2: keys in the destination filter, a share of its slots (fz_shares);
 *          bits 3-5: in the source filter likewise; bit 6: the range is the last segment,
 *          else every one
 *
 * What it checks:
 * - A range with a bucket a filter never writes, in either input, is CF_ECORRUPT exactly
 *   when cf_put_segments refuses the same bytes, and a hash of another segment CF_EINVAL:
 *   the destination is then unchanged.
 * - Otherwise CF_OK, and the destination's bytes are a range cf_put_segments takes, whose
 *   items are the destination's before plus report.added; added + unplaced is every
 *   fingerprint of the source plus every hash.
 * - No false negative: every key of the destination filter in the range is found in the
 *   merged range, and, where nothing was damaged and nothing unplaced, every key of the
 *   source filter and every hash too.
 */
#include "fuzz_common.h"
#include "fuzz_target.h"

/* Records read at most (hashes among them: at most CF_STASH_SLOTS count as a stash's). */
#define FZ_SEG_RECORDS 512u
#define FZ_SEG_HASHES  64u
/* A short eviction search: inputs past a filter's room try many, and the fuzzer wants
 * many inputs a second. */
#define FZ_SEG_KICKS   16u

/* Keys a filter gets, in 256ths of its slots: mostly few (the fuzzer wants many inputs a
 * second), up to three eighths each: together more than a table of buckets of 1 holds. */
static const unsigned fz_shares[8] = {0, 2, 8, 32, 48, 64, 80, 96};

static const struct {
    unsigned f, b, flags;
} fz_shapes[] = {
    {4, 1, 0},
    {8, 1, 0},
    {4, 2, 0},
    {5, 4, CF_SEMI_SORT},
};

/* A filter of config c holding n keys drawn from seed (their hashes into keys). */
static cf_filter *fz_filled(const cf_config *c, uint64_t seed, size_t n, uint64_t *keys)
{
    cf_filter *f = NULL;
    FZ_REQUIRE(cf_new(c, &f) == CF_OK);
    for (size_t i = 0; i < n; i++) {
        keys[i] = fz_mix64(seed + i);
        (void)cf_add_hash(f, keys[i]); /* (one that does not fit: not held) */
    }
    return f;
}

/* The range bytes put into a new filter of config c: NULL if refused as corrupt. */
static cf_filter *fz_put(const cf_config *c, uint64_t first, uint64_t end, const uint8_t *bytes,
                         size_t len)
{
    cf_filter *f = NULL;
    FZ_REQUIRE(cf_new(c, &f) == CF_OK);
    cf_status st = cf_put_segments(f, first, end, bytes, len);
    FZ_REQUIRE(st == CF_OK || st == CF_ECORRUPT);
    if (st != CF_OK) {
        cf_free(f);
        return NULL;
    }
    return f;
}

/* Is hash h's first bucket in segments [first, end) of mapping m? */
static bool fz_in_range(const cf_mapping *m, uint64_t h, uint64_t first, uint64_t end)
{
    cf_place p;
    FZ_REQUIRE(cf_place_in(m, h, &p) == CF_OK);
    uint64_t s = p.bucket[0] >> m->segment_bits;
    return s >= first && s < end;
}

/* Keys of keys[0 .. n) in the range that f does not find. */
static size_t fz_missing(const cf_filter *f, const cf_mapping *m, const uint64_t *keys, size_t n,
                         const cf_filter *held_in, uint64_t first, uint64_t end)
{
    size_t missed = 0;
    for (size_t i = 0; i < n; i++)
        if (fz_in_range(m, keys[i], first, end) && (!held_in || cf_contains_hash(held_in, keys[i])))
            missed += !cf_contains_hash(f, keys[i]);
    return missed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 10)
        return 0;
    unsigned shape = data[0] % 4u, mode = data[1];
    uint64_t seed = fz_get64(data + 2);
    cf_config c = {.fingerprint_bits = fz_shapes[shape].f,
                   .bucket_size = fz_shapes[shape].b,
                   .max_kicks = FZ_SEG_KICKS,
                   .seed = seed | 1u,
                   .flags = CF_SEGMENTED | fz_shapes[shape].flags};
    /* two segments: 2^17 buckets at the sizing's 95 % */
    c.capacity = (uint64_t)((double)((uint64_t)2 << CF_SEGMENT_BITS) * c.bucket_size * 0.95);
    cf_mapping m;
    FZ_REQUIRE(cf_config_mapping(&c, &m) == CF_OK && m.segment_bits == CF_SEGMENT_BITS);
    uint64_t segments = m.buckets >> m.segment_bits;
    uint64_t first = mode & 64u ? segments - 1u : 0u, end = segments;
    size_t len = 0;
    FZ_REQUIRE(cf_segments_size(&c, first, end, &len) == CF_OK);

    uint64_t slots = m.buckets * c.bucket_size;
    size_t na = (size_t)(slots * fz_shares[mode & 7u] / 256u);
    size_t nb = (size_t)(slots * fz_shares[mode >> 3 & 7u] / 256u);
    uint64_t *keys_a = malloc((na + nb + 1) * sizeof *keys_a), *keys_b = keys_a + na;
    uint64_t hashes[FZ_SEG_HASHES];
    size_t nh = 0;
    FZ_REQUIRE(keys_a != NULL);
    cf_filter *a = fz_filled(&c, seed, na, keys_a);
    cf_filter *b = fz_filled(&c, ~seed, nb, keys_b);
    uint8_t *dst = malloc(len), *src = malloc(len), *before = malloc(len);
    FZ_REQUIRE(dst && src && before);
    FZ_REQUIRE(cf_get_segments(a, first, end, dst, len) == CF_OK);
    FZ_REQUIRE(cf_get_segments(b, first, end, src, len) == CF_OK);
    bool damaged_src = false, foreign = false;
    for (size_t at = 10, r = 0; at + 6 <= size && r < FZ_SEG_RECORDS; at += 6, r++) {
        uint32_t v = fz_get32(data + at);
        if (data[at + 5] & 1u) {
            if (nh < FZ_SEG_HASHES) {
                hashes[nh] = fz_mix64(v ^ seed);
                foreign |= !fz_in_range(&m, hashes[nh], first, end);
                nh++;
            }
            continue;
        }
        bool to_src = v >> 31;
        size_t off = (v & 0x7fffffffu) % len;
        (to_src ? src : dst)[off] ^= data[at + 4];
        damaged_src |= to_src && data[at + 4] != 0;
    }
    memcpy(before, dst, len);
    cf_filter *dst_f = fz_put(&c, first, end, dst, len), *src_f = fz_put(&c, first, end, src, len);

    cf_segments_report rep;
    cf_status st = cf_merge_segments(&c, first, end, dst, len, src, hashes, nh, &rep);
    if (!dst_f || !src_f || foreign) { /* (the hashes are checked first) */
        FZ_REQUIRE(st == (foreign ? CF_EINVAL : CF_ECORRUPT));
        FZ_REQUIRE(memcmp(dst, before, len) == 0);
    } else {
        FZ_REQUIRE(st == CF_OK);
        cf_stats sd, ss, sm;
        cf_get_stats(dst_f, &sd);
        cf_get_stats(src_f, &ss);
        FZ_REQUIRE(rep.added + rep.unplaced == ss.items + nh);
        cf_filter *merged = fz_put(&c, first, end, dst, len);
        FZ_REQUIRE(merged != NULL);
        cf_get_stats(merged, &sm);
        FZ_REQUIRE(sm.items == sd.items + rep.added);
        /* the destination's keys it held; the source's and the hashes if all placed */
        FZ_REQUIRE(fz_missing(merged, &m, keys_a, na, dst_f, first, end) == 0);
        if (!damaged_src && rep.unplaced == 0) {
            FZ_REQUIRE(fz_missing(merged, &m, keys_b, nb, b, first, end) == 0);
            FZ_REQUIRE(fz_missing(merged, &m, hashes, nh, NULL, first, end) == 0);
        }
        cf_free(merged);
    }
    /* The whole filters' stash entries, as hashes, are keys of their own range. */
    uint64_t stash[CF_STASH_SLOTS];
    size_t ns = 0;
    FZ_REQUIRE(cf_stash_hashes(a, stash, CF_STASH_SLOTS, &ns) == CF_OK);
    FZ_REQUIRE(fz_missing(a, &m, stash, ns, NULL, 0, segments) == 0);
    cf_free(dst_f);
    cf_free(src_f);
    cf_free(a);
    cf_free(b);
    free(dst);
    free(src);
    free(before);
    free(keys_a);
    return 0;
}
