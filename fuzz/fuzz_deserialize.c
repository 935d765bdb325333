/*
 * fuzz_deserialize.c - libFuzzer target: candidate serialized filters through
 * cf_validate, cf_deserialize and (on Linux) cf_open_mapped. Any broken promise of
 * include/cuckoofilter.h or docs/FORMAT.md aborts.
 *
 * Input: a mode byte, then the candidate file (the rest of the input, any bytes).
 *
 *   mode bit 0   set the total-length field (u64 at offset 16) to the file's length
 *        bit 1   fix the meta checksum: XXH3-64 of [0, meta_len - 8) at meta_len - 8, where
 *                meta_len = 64 + 32 * ntables + 16 * nstash + 8 (ntables: u32 at 56,
 *                nstash: byte 43), when that is in range
 *        bit 2   fix the file checksum: XXH3-64 of [0, size - 8) at size - 8
 *        bit 3   also write the file to a memfd and open it with cf_open_mapped
 *        bits 4-7 the tracking allocator fails its Nth call in cf_deserialize (0 = never)
 *
 * The fix-ups (in that order) let random mutations get past the checksums, which they
 * would otherwise never do, to the range checks behind them.
 *
 * Checks:
 * - cf_validate: CF_OK, CF_ECORRUPT or CF_EVERSION; reason is NULL iff CF_OK; the same
 *   with a NULL reason.
 * - cf_deserialize agrees: the same status as cf_validate, except CF_ENOMEM, which it
 *   returns iff an allocation failed (leaking nothing); a refused input allocates nothing
 *   and leaves *out alone.
 * - An accepted file is canonical: cf_serialized_size is its length and cf_serialize
 *   gives it back byte for byte. Its stats and config are what its header and descriptors
 *   say; each table holds as many non-zero slots as its descriptor's items, with zero
 *   bits after its last slot.
 * - Lookups agree exactly with a reference reader written from docs/FORMAT.md (for
 *   hashes that hit stored fingerprints and stash entries, and random ones): cf_count_hash
 *   is the reference count, cf_contains_hash and cf_contains_many are count > 0, and
 *   cf_hash is XXH3-64 with the file's seed.
 * - The loaded filter works: a few adds each raise the added hash's count by exactly one
 *   (or fail with CF_FULL/CF_ENOMEM and change nothing), deleting them lowers it by one
 *   each and gives the item count back; the result serializes to a file that validates
 *   and round-trips. So does every state fz_check_mutations leads it through (growth,
 *   deletes, compaction, cf_clear). The same holds for the file loaded with
 *   cf_deserialize_flags(CF_CONCURRENT), which serializes to the same bytes and answers
 *   the same lookups, and saves what loads after adds with nothing between them (which
 *   would settle its stripes' counts first).
 * - With mode bit 3, on Linux (the file is a memfd, named by its /proc/self/fd path):
 *   cf_validate_file gives cf_validate's status and reason; cf_load loads what
 *   cf_deserialize does, to the same bytes; cf_open_mapped with CF_MAP_VERIFY returns
 *   what cf_validate does; without it, every file cf_validate accepts opens, and one it
 *   refuses either fails with the same status or (bad tables only) opens and answers
 *   lookups, stats, serialize and a dump without crashing. A mapped good file answers
 *   like the deserialized one and is read-only.
 */
#if defined(__linux__)
#define _GNU_SOURCE /* memfd_create */
#endif

#include "fuzz_common.h"
#include "fuzz_target.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#define FZ_MODE_TOTAL   0x01u
#define FZ_MODE_META    0x02u
#define FZ_MODE_FILE    0x04u
#define FZ_MODE_MAPPED  0x08u
#define FZ_ALLOC_LIMIT  (UINT64_C(64) << 20)
#define FZ_HEADER_BYTES 64u
#define FZ_MAX_PROBES   64u        /* hashes looked up per filter */
#define FZ_HIT_PROBES   24u        /* of them, ones made from stored fingerprints */
#define FZ_SCAN_SLOTS   (1u << 20) /* slots the reference reader scans at most */
#define FZ_ADDS         8u
#define FZ_DUMP_TABLES  64u /* dump mapped filters of at most this many tables */

/* ------------------------------------------------------------------------------------ */
/* Fix-ups                                                                              */
/* ------------------------------------------------------------------------------------ */

static void fz_fix(uint8_t *b, size_t n, unsigned mode)
{
    if ((mode & FZ_MODE_TOTAL) && n >= 24)
        fz_put64(b + 16, n);
    if ((mode & FZ_MODE_META) && n >= FZ_HEADER_BYTES) {
        uint64_t meta_len = FZ_HEADER_BYTES + 32u * (uint64_t)fz_get32(b + 56) + 16u * b[43] + 8u;
        if (meta_len <= n)
            fz_put64(b + meta_len - 8, XXH3_64bits(b, (size_t)meta_len - 8));
    }
    if ((mode & FZ_MODE_FILE) && n >= 8)
        fz_put64(b + n - 8, XXH3_64bits(b, n - 8));
}

/* ------------------------------------------------------------------------------------ */
/* A reference reader of a file cf_validate accepted, from docs/FORMAT.md alone          */
/* ------------------------------------------------------------------------------------ */

typedef struct fz_file {
    const uint8_t *b;
    size_t n;
    unsigned f, bsize, ntables, nstash;
    unsigned widen; /* header flag bit 0: the widening at byte 46, in 1/256 bits */
    bool semi;      /* header flag bit 1: semi-sorted buckets */
    bool rb;        /* hash id 2: RedisBloom's layout */
} fz_file;

static void fz_file_open(fz_file *x, const uint8_t *b, size_t n)
{
    x->b = b;
    x->n = n;
    x->f = b[40];
    x->bsize = b[41];
    x->nstash = b[43];
    x->ntables = fz_get32(b + 56);
    x->widen = (fz_get32(b + 12) & 1u) ? (unsigned)(b[46] | b[47] << 8) : 0u;
    x->semi = (fz_get32(b + 12) & 2u) != 0;
    x->rb = b[42] == 2;
}

/* A file cf_validate accepted: a plain file, one image; or a windowed file (FORMAT.md,
 * "Windowed files"), whose images are plain files, oldest first. */
typedef struct fz_whole {
    fz_file *img;
    unsigned n;
    bool window;
} fz_whole;

static void fz_whole_open(fz_whole *w, const uint8_t *b, size_t n)
{
    w->window = (fz_get32(b + 12) & 4u) != 0;
    w->n = w->window ? fz_get32(b + 40) : 1u;
    w->img = malloc(w->n * sizeof *w->img);
    FZ_REQUIRE(w->img != NULL);
    for (unsigned i = 0; i < w->n; i++) {
        const uint8_t *e = b + FZ_HEADER_BYTES + 16u * (size_t)i;
        fz_file_open(&w->img[i], w->window ? b + fz_get64(e) : b,
                     w->window ? (size_t)fz_get64(e + 8) : n);
    }
}

/* Table k's fingerprint width (FORMAT.md): f + ceil(k * widen / 256), at most 32. */
static unsigned fz_width(const fz_file *x, unsigned k)
{
    uint64_t ext = ((uint64_t)k * x->widen + 255) / 256;
    return ext < 32u - x->f ? x->f + (unsigned)ext : 32u;
}

static const uint8_t *fz_desc(const fz_file *x, unsigned k)
{
    return x->b + FZ_HEADER_BYTES + 32u * (size_t)k;
}

static const uint8_t *fz_entry(const fz_file *x, unsigned e)
{
    return x->b + FZ_HEADER_BYTES + 32u * (size_t)x->ntables + 16u * (size_t)e;
}

static uint64_t fz_buckets(const fz_file *x, unsigned k)
{
    return fz_get64(fz_desc(x, k));
}

/* The n <= 32 bits at bit `bit` of table k, least significant first. */
static uint32_t fz_bits(const fz_file *x, unsigned k, uint64_t bit, unsigned n)
{
    uint64_t at = fz_get64(fz_desc(x, k) + 16) + bit / 8;
    uint64_t v = 0;
    for (unsigned q = 0; q < 5 && at + q < x->n; q++) /* bit % 8 + n <= 39 bits */
        v |= (uint64_t)x->b[at + q] << (8 * q);
    return (uint32_t)((v >> (bit % 8)) & ((UINT64_C(1) << n) - 1));
}

/* C(n, k) for the small n and k of a semi-sorted code. */
static uint32_t fz_choose(unsigned n, unsigned k)
{
    uint32_t r = 1;
    for (unsigned i = 1; i <= k; i++)
        r = i <= n ? r * (n + 1 - i) / i : 0;
    return r;
}

/* Slot j of bucket i of table k. Plain: its width in bits, least significant first.
 * Semi-sorted (FORMAT.md): the prefix decoded from the 12-bit code at the bucket's start,
 * p3 first, then the suffix of value j; a file the validator accepted has codes below
 * 3876 and values in order, which fz_scan checks. */
static uint32_t fz_slot(const fz_file *x, unsigned k, uint64_t i, unsigned j)
{
    unsigned w = fz_width(x, k);
    if (!x->semi)
        return fz_bits(x, k, (i * x->bsize + j) * w, w);
    uint64_t bit = i * 4u * (w - 1u);
    uint32_t rest = fz_bits(x, k, bit, 12), prefix = 0;
    for (unsigned q = 4; q-- > j;) { /* p_q: the largest p with C(p + q, q + 1) <= rest */
        unsigned p = 15;
        while (fz_choose(p + q, q + 1) > rest)
            p--;
        rest -= fz_choose(p + q, q + 1);
        prefix = p;
    }
    return prefix << (w - 4) | fz_bits(x, k, bit + 12 + (uint64_t)j * (w - 4), w - 4);
}

__extension__ typedef unsigned __int128 fz_u128;

static uint64_t fz_mulhi(uint64_t a, uint64_t b)
{
    return (uint64_t)(((fz_u128)a * b) >> 64);
}

/* MurmurHash64A (FORMAT.md, "Hash id 2"), seed 0. */
static uint64_t fz_murmur(const uint8_t *p, size_t len)
{
    const uint64_t m = UINT64_C(0xc6a4a7935bd1e995);
    uint64_t h = len * m;
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t k = fz_get64(p) * m;
        h = (h ^ (k ^ k >> 47) * m) * m;
    }
    uint64_t tail = 0;
    for (size_t i = 0; i < len; i++)
        tail |= (uint64_t)p[i] << (8 * i);
    if (len)
        h = (h ^ tail) * m;
    h = (h ^ h >> 47) * m;
    return h ^ h >> 47;
}

#define FZ_RB_MULT UINT64_C(0x5bd1e995)

/* Hash id 2's count: the key's fingerprint h % 255 + 1 in buckets h mod m and
 * (h XOR fp * 0x5bd1e995) mod m of every sub-filter, a bucket that is both once. */
static uint64_t fz_rb_count(const fz_file *x, uint64_t h)
{
    uint32_t fp = (uint32_t)(h % 255u) + 1u;
    uint64_t total = 0;
    for (unsigned k = 0; k < x->ntables; k++) {
        uint64_t m = fz_buckets(x, k), i1 = h % m, i2 = (h ^ fp * FZ_RB_MULT) % m;
        for (unsigned j = 0; j < x->bsize; j++)
            total +=
                (uint64_t)(fz_slot(x, k, i1, j) == fp) + (i2 != i1 && fz_slot(x, k, i2, j) == fp);
    }
    return total;
}

/* The number of slots and stash entries that match h, as FORMAT.md defines a count: in
 * table k of m = m0 * s buckets, i1 = floor(x * m / 2^64) with x = h << f, and i2 keeps
 * i1 mod s and moves p = i1 / s to (off - p) mod m0, off = floor(frac(fp^2 C) m0) | 1. */
static uint64_t fz_ref_count(const fz_file *x, uint64_t h)
{
    if (x->rb)
        return fz_rb_count(x, h);
    uint32_t fp = (uint32_t)(h >> (64u - x->f));
    fp += fp == 0;
    uint64_t frac = h << x->f, total = 0, m0 = fz_buckets(x, 0);
    uint64_t off = fz_mulhi((uint64_t)fp * fp * UINT64_C(0x9e3779b97f4a7c15), m0) | 1u;
    uint64_t more = (h * UINT64_C(0xd6e8feb86659fd93)) >> 32; /* a wider table's extra bits */
    for (unsigned k = 0; k < x->ntables; k++) {
        uint64_t m = fz_buckets(x, k), scale = m / m0;
        uint64_t i1 = fz_mulhi(frac, m), p = i1 / scale;
        uint64_t i2 = ((off + m0 - p) % m0) * scale + i1 % scale;
        unsigned e_bits = fz_width(x, k) - x->f;
        uint32_t fk = (uint32_t)(fp | (more & ((UINT64_C(1) << e_bits) - 1)) << x->f);
        for (unsigned j = 0; j < x->bsize; j++)
            total += (uint64_t)(fz_slot(x, k, i1, j) == fk) + (fz_slot(x, k, i2, j) == fk);
        for (unsigned e = 0; e < x->nstash; e++) {
            const uint8_t *s = fz_entry(x, e);
            uint64_t bucket = fz_get64(s);
            if (fz_get32(s + 12) == k && fz_get32(s + 8) == fk && (bucket == i1 || bucket == i2))
                total++;
        }
    }
    return total;
}

/* A windowed file's count: every image's (FORMAT.md). */
static uint64_t fz_whole_count(const fz_whole *w, uint64_t h)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < w->n; i++)
        total += fz_ref_count(&w->img[i], h);
    return total;
}

/* A hash whose fingerprint is v (its low f bits, for a wider table's: a hit there only if
 * the extra bits agree too) and whose first bucket in a table of m buckets is i: the
 * smallest fraction in bucket i that the 64 - f index bits can hold (a bucket spans at
 * least 2^(f + 6) of them: CF__INDEX_BIAS_BITS). */
static uint64_t fz_hash_at(const fz_file *x, uint32_t v, uint64_t i, uint64_t m)
{
    if (x->rb) { /* h = i + m t with h % 255 = v - 1: m is a power of two, prime to 255 */
        uint64_t h = i;
        for (unsigned t = 0; t < 255 && h % 255u != (v + 254u) % 255u; t++)
            h += m;
        return h;
    }
    uint64_t frac = (uint64_t)((((fz_u128)i << 64) + m - 1) / m);
    uint64_t low = (UINT64_C(1) << x->f) - 1;
    frac = (frac + low) & ~low;
    v &= (uint32_t)((UINT64_C(1) << x->f) - 1);
    return ((uint64_t)v << (64u - x->f)) | (frac >> x->f);
}

typedef struct fz_probes {
    uint64_t h[FZ_MAX_PROBES];
    uint64_t ref[FZ_MAX_PROBES]; /* the reference count of each */
    unsigned n;
} fz_probes;

static void fz_scan_image(const fz_file *x, fz_probes *p, unsigned nprobes, uint64_t *scanned_io,
                          uint64_t *stored_io);

/* Scan the tables (checking the counts and trailing bits the validator promised) and
 * choose the hashes to look up: some that hit stored fingerprints (top f bits the
 * fingerprint, low bits the bucket: i1 is that bucket in its table), the stash entries,
 * and random ones. */
static void fz_scan(const fz_whole *w, fz_probes *p, uint64_t seed)
{
    uint64_t scanned = 0, stored = 0, tables = 0;
    for (unsigned g = 0; g < w->n; g++)
        tables += w->img[g].ntables;
    unsigned nprobes = tables > 1024 ? 8u : FZ_MAX_PROBES; /* each costs every table */
    p->n = 0;
    for (unsigned g = 0; g < w->n; g++) {
        const fz_file *x = &w->img[g];
        fz_scan_image(x, p, nprobes, &scanned, &stored);
        for (unsigned e = 0; e < x->nstash && p->n < nprobes; e++) {
            const uint8_t *s = fz_entry(x, e);
            p->h[p->n++] =
                fz_hash_at(x, fz_get32(s + 8), fz_get64(s), fz_buckets(x, fz_get32(s + 12)));
        }
    }
    for (uint64_t r = seed; p->n < nprobes; r++)
        p->h[p->n++] = fz_mix64(r);
    for (unsigned i = 0; i < p->n; i++)
        p->ref[i] = fz_whole_count(w, p->h[i]);
}

/* One image's part of fz_scan: its tables, while the scan's budget lasts. */
static void fz_scan_image(const fz_file *x, fz_probes *p, unsigned nprobes, uint64_t *scanned_io,
                          uint64_t *stored_io)
{
    uint64_t scanned = *scanned_io, stored = *stored_io;
    for (unsigned k = 0; k < x->ntables; k++) {
        uint64_t m = fz_buckets(x, k), occupied = 0;
        if (scanned + m * x->bsize > FZ_SCAN_SLOTS) {
            scanned = FZ_SCAN_SLOTS;
            break;
        }
        scanned += m * x->bsize;
        for (uint64_t i = 0; i < m; i++) {
            if (x->semi) /* a valid code, ascending values */
                FZ_REQUIRE(fz_bits(x, k, i * 4u * (fz_width(x, k) - 1u), 12) < 3876u &&
                           fz_slot(x, k, i, 0) <= fz_slot(x, k, i, 1) &&
                           fz_slot(x, k, i, 1) <= fz_slot(x, k, i, 2) &&
                           fz_slot(x, k, i, 2) <= fz_slot(x, k, i, 3));
            for (unsigned j = 0; j < x->bsize; j++) {
                uint32_t v = fz_slot(x, k, i, j);
                if (v == 0)
                    continue;
                occupied++;
                stored++;
                if (p->n < FZ_HIT_PROBES && p->n < nprobes && stored % 3 == 1)
                    p->h[p->n++] = fz_hash_at(x, v, i, m);
            }
        }
        FZ_REQUIRE(occupied == fz_get64(fz_desc(x, k) + 8)); /* as the descriptor says */
        uint64_t per = x->semi ? 4u * (fz_width(x, k) - 1u) : (uint64_t)x->bsize * fz_width(x, k);
        uint64_t bits = m * per, len = fz_get64(fz_desc(x, k) + 24);
        FZ_REQUIRE(len == bits / 8 + (bits % 8 != 0));
        if (bits % 8)
            FZ_REQUIRE((x->b[fz_get64(fz_desc(x, k) + 16) + bits / 8] >> (bits % 8)) == 0);
    }
    *scanned_io = scanned;
    *stored_io = stored;
}

/* ------------------------------------------------------------------------------------ */
/* Checks                                                                               */
/* ------------------------------------------------------------------------------------ */

/* Every lookup form agrees with the reference. */
static void fz_check_lookups(const cf_filter *f, const fz_probes *p)
{
    bool many[FZ_MAX_PROBES];
    memset(many, 0, sizeof many);
    cf_contains_many(f, p->h, p->n, many);
    for (unsigned i = 0; i < p->n; i++) {
        FZ_REQUIRE(cf_count_hash(f, p->h[i]) == p->ref[i]);
        FZ_REQUIRE(cf_contains_hash(f, p->h[i]) == (p->ref[i] > 0));
        FZ_REQUIRE(many[i] == (p->ref[i] > 0));
    }
}

/* Stats and config are what the file says. */
static void fz_check_figures(const cf_filter *f, const fz_whole *w, const uint8_t *file)
{
    const fz_file *x = &w->img[0], *newest = &w->img[w->n - 1];
    const uint8_t *b = x->b;
    cf_stats s;
    cf_get_stats(f, &s);
    fz_stats_sane(f, &s, false);
    uint64_t items = 0, buckets = 0, stashed = 0, tables = 0;
    for (unsigned g = 0; g < w->n; g++) {
        const fz_file *y = &w->img[g];
        items += y->nstash;
        stashed += y->nstash;
        tables += y->ntables;
        for (unsigned k = 0; k < y->ntables; k++) {
            items += fz_get64(fz_desc(y, k) + 8);
            buckets += fz_buckets(y, k);
        }
    }
    FZ_REQUIRE(s.items == items && s.buckets == buckets && s.stashed == stashed);
    FZ_REQUIRE(s.newest_fingerprint_bits == fz_width(newest, newest->ntables - 1));
    FZ_REQUIRE(s.sub_filters == tables && s.fingerprint_bits == x->f && s.bucket_size == x->bsize &&
               s.capacity == fz_get64(b + 32));
    FZ_REQUIRE(s.generations == (w->window ? w->n : 0u) &&
               s.window == (w->window ? fz_get64(file + 24) : 0u) &&
               s.generation == (w->window ? fz_get64(file + 32) : 0u));
    cf_config c;
    memset(&c, 0xA5, sizeof c);
    cf_get_config(f, &c);
    FZ_REQUIRE(c.capacity == fz_get64(b + 32) && c.seed == fz_get64(b + 24));
    FZ_REQUIRE(c.fingerprint_bits == x->f && c.bucket_size == x->bsize);
    FZ_REQUIRE(c.max_kicks == (unsigned)(b[44] | b[45] << 8));
    FZ_REQUIRE(c.expansion == fz_get32(b + 48) && c.max_sub_filters == fz_get32(b + 52));
    FZ_REQUIRE(c.allocator == NULL);
    FZ_REQUIRE(c.generations == (w->window ? w->n : 0u) &&
               c.window == (w->window ? fz_get64(file + 24) : 0u));
}

/* Adds and deletes on a loaded filter. Counts move by exactly one per call: moves during
 * an eviction keep a fingerprint within its bucket pair, and so does moving an entry out
 * of the stash. */
static void fz_check_updates(cf_filter *f, fz_alloc *ta, uint64_t seed)
{
    uint64_t added[FZ_ADDS];
    unsigned nadded = 0;
    cf_stats s0;
    cf_get_stats(f, &s0);
    for (unsigned i = 0; i < FZ_ADDS; i++) {
        uint64_t h = fz_mix64(seed ^ (UINT64_C(0x5eed) + i));
        uint64_t c0 = cf_count_hash(f, h), live = ta->live;
        cf_stats before, after;
        cf_get_stats(f, &before);
        cf_status st = cf_add_hash(f, h);
        cf_get_stats(f, &after);
        fz_stats_sane(f, &after, false);
        if (st == CF_OK) {
            FZ_REQUIRE(cf_count_hash(f, h) == c0 + 1 && cf_contains_hash(f, h));
            FZ_REQUIRE(after.items == before.items + 1);
            FZ_REQUIRE(after.sub_filters >= before.sub_filters);
            added[nadded++] = h;
        } else {
            FZ_REQUIRE(st == CF_FULL || st == CF_ENOMEM);
            FZ_REQUIRE(fz_stats_equal(&before, &after) && ta->live == live);
            FZ_REQUIRE(cf_count_hash(f, h) == c0);
        }
    }
    for (unsigned i = 0; i < nadded; i++)
        FZ_REQUIRE(cf_contains_hash(f, added[i]));
    fz_check_round_trip(f);
    while (nadded > 0) {
        uint64_t h = added[--nadded];
        uint64_t c0 = cf_count_hash(f, h);
        cf_stats before, after;
        cf_get_stats(f, &before);
        FZ_REQUIRE(c0 >= 1 && cf_delete_hash(f, h) == CF_OK);
        cf_get_stats(f, &after);
        fz_stats_sane(f, &after, false);
        FZ_REQUIRE(cf_count_hash(f, h) == c0 - 1 && after.items + 1 == before.items);
        FZ_REQUIRE(after.slots == before.slots && after.sub_filters == before.sub_filters);
    }
    cf_stats s1;
    cf_get_stats(f, &s1);
    FZ_REQUIRE(s1.items == s0.items);
    fz_check_round_trip(f);
    fz_check_mutations(f, seed);
}

/* ------------------------------------------------------------------------------------ */
/* The file paths (Linux: a memfd, opened by its /proc path)                            */
/* ------------------------------------------------------------------------------------ */

#if defined(__linux__)
static int fz_memfd = -2;
static char fz_memfd_path[64];

/* The file holding exactly b[0, n); false if there is none (no memfd here). */
static bool fz_memfd_write(const uint8_t *b, size_t n)
{
    if (fz_memfd == -2) {
        fz_memfd = memfd_create("cf-fuzz-deserialize", MFD_CLOEXEC);
        if (fz_memfd >= 0)
            snprintf(fz_memfd_path, sizeof fz_memfd_path, "/proc/self/fd/%d", fz_memfd);
    }
    if (fz_memfd < 0 || ftruncate(fz_memfd, 0) != 0)
        return false;
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(fz_memfd, b + done, n - done, (off_t)done);
        if (w <= 0)
            return false;
        done += (size_t)w;
    }
    return true;
}

/* Whatever the tables hold, a mapped filter answers without crashing. */
static void fz_exercise_mapped(const cf_filter *m, size_t n, const fz_probes *p)
{
    cf_stats s;
    cf_get_stats(m, &s);
    fz_stats_sane(m, &s, false);
    bool many[FZ_MAX_PROBES];
    cf_contains_many(m, p->h, p->n, many);
    for (unsigned i = 0; i < p->n; i++)
        FZ_REQUIRE(cf_contains_hash(m, p->h[i]) == (cf_count_hash(m, p->h[i]) > 0) &&
                   many[i] == cf_contains_hash(m, p->h[i]));
    FZ_REQUIRE(cf_serialized_size(m) == n);
    uint8_t *out = malloc(n);
    FZ_REQUIRE(out != NULL);
    FZ_REQUIRE(cf_serialize(m, out, n, NULL) == CF_OK);
    size_t cap = cf_dump_chunk_max(m);
    uint8_t *chunk = malloc(cap);
    FZ_REQUIRE(chunk != NULL && cap > 0);
    /* The header and one chunk per table (each is < 16 MiB here), then the end. Each data
     * chunk costs a pass over the metadata: only small filters go all the way. */
    uint64_t cursor = 0;
    size_t len = 1;
    unsigned chunks = s.sub_filters <= FZ_DUMP_TABLES
                          ? s.sub_filters + 2u + s.generations /* a header per generation */
                          : 2u;
    for (unsigned i = 0; i < chunks && len > 0; i++) {
        FZ_REQUIRE(cf_dump_chunk(m, &cursor, chunk, cap, &len) == CF_OK && len <= cap);
        FZ_REQUIRE((len == 0) == (cursor == 0));
    }
    if (s.sub_filters <= FZ_DUMP_TABLES)
        FZ_REQUIRE(len == 0);
    free(chunk);
    free(out);
}

static void fz_check_files(const uint8_t *b, size_t n, cf_status valid, const cf_filter *loaded,
                           const fz_probes *p)
{
    if (!fz_memfd_write(b, n))
        return;
    cf_filter *const sentinel = (cf_filter *)(void *)&fz_memfd;
    const char *why = "unset", *why_file = "unset";
    FZ_REQUIRE(cf_validate(b, n, &why) == valid);
    cf_status st = cf_validate_file(fz_memfd_path, &why_file);
    if (st == CF_EIO)
        return; /* no /proc here */
    FZ_REQUIRE(st == valid && (why == NULL) == (why_file == NULL));
    FZ_REQUIRE(why == NULL || strcmp(why, why_file) == 0);

    /* cf_load: as cf_deserialize. */
    fz_alloc ta;
    fz_alloc_init(&ta, FZ_ALLOC_LIMIT);
    cf_filter *m = sentinel;
    st = cf_load(fz_memfd_path, &ta.a, &m);
    FZ_REQUIRE(st == valid);
    if (st == CF_OK) {
        FZ_REQUIRE(m != sentinel && m != NULL);
        fz_check_serializes_to(m, b, n);
        fz_check_lookups(m, p);
        cf_free(m);
    } else {
        FZ_REQUIRE(m == sentinel);
    }
    FZ_REQUIRE(ta.live == 0 && ta.live_bytes == 0);

    m = sentinel;
    st = cf_open_mapped(fz_memfd_path, CF_MAP_VERIFY, NULL, &m);
    FZ_REQUIRE(st == valid);
    if (st == CF_OK) {
        FZ_REQUIRE(m != sentinel && m != NULL);
        fz_check_serializes_to(m, b, n);
        cf_stats sm, sl;
        cf_get_stats(m, &sm);
        if (loaded != NULL) {
            cf_get_stats(loaded, &sl);
            FZ_REQUIRE(fz_stats_equal(&sm, &sl));
        }
        fz_check_lookups(m, p);
        FZ_REQUIRE(cf_add_hash(m, p->h[0]) == CF_EREADONLY);
        FZ_REQUIRE(cf_add(m, "k", 1) == CF_EREADONLY);
        FZ_REQUIRE(cf_add_unique(m, "k", 1) == CF_EREADONLY);
        FZ_REQUIRE(cf_delete_hash(m, p->h[0]) == CF_EREADONLY);
        FZ_REQUIRE(cf_delete(m, "k", 1) == CF_EREADONLY);
        cf_clear(m);
        cf_get_stats(m, &sl);
        FZ_REQUIRE(fz_stats_equal(&sm, &sl));
        fz_check_lookups(m, p);
        cf_free(m);
    } else {
        FZ_REQUIRE(m == sentinel);
    }

    m = sentinel;
    st = cf_open_mapped(fz_memfd_path, 0, NULL, &m);
    if (valid == CF_OK)
        FZ_REQUIRE(st == CF_OK);
    if (st != CF_OK) {
        FZ_REQUIRE(st == valid && m == sentinel);
        return;
    }
    /* Accepted without its tables checked: they may be anything, even for a file that
     * cf_validate refused. */
    FZ_REQUIRE(m != sentinel && m != NULL);
    fz_probes random;
    random.n = 16;
    for (unsigned i = 0; i < random.n; i++)
        random.h[i] = fz_mix64(n + i);
    fz_exercise_mapped(m, n, valid == CF_OK ? p : &random);
    if (valid == CF_OK) {
        fz_check_serializes_to(m, b, n);
        fz_check_lookups(m, p);
    }
    cf_free(m);
}
#endif

/* ------------------------------------------------------------------------------------ */
/* The target                                                                           */
/* ------------------------------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned mode = size > 0 ? data[0] : 0;
    size_t n = size > 0 ? size - 1 : 0;
    /* A buffer of exactly the file's size, so that ASan catches a read past its end. */
    uint8_t *b = malloc(n > 0 ? n : 1);
    FZ_REQUIRE(b != NULL);
    if (n > 0)
        memcpy(b, data + 1, n);
    fz_fix(b, n, mode);

    const char *reason = "unset";
    cf_status valid = cf_validate(b, n, &reason);
    FZ_REQUIRE(valid == CF_OK || valid == CF_ECORRUPT || valid == CF_EVERSION);
    FZ_REQUIRE((valid == CF_OK) == (reason == NULL));
    FZ_REQUIRE(reason == NULL || reason[0] != '\0');
    FZ_REQUIRE(cf_validate(b, n, NULL) == valid);

    fz_alloc ta;
    fz_alloc_init(&ta, FZ_ALLOC_LIMIT);
    ta.fail_at = mode >> 4;
    cf_filter *const sentinel = (cf_filter *)(void *)&ta; /* never dereferenced */
    cf_filter *f = sentinel;
    FZ_REQUIRE(cf_deserialize(b, n, &ta.a, NULL) == CF_EINVAL && ta.calls == 0);
    cf_status st = cf_deserialize(b, n, &ta.a, &f);
    if (valid != CF_OK) {
        /* Refused before anything was allocated. */
        FZ_REQUIRE(st == valid && f == sentinel && ta.calls == 0);
    } else if (ta.failures > 0) {
        FZ_REQUIRE(st == CF_ENOMEM && f == sentinel);
        FZ_REQUIRE(ta.live == 0 && ta.live_bytes == 0);
    } else {
        FZ_REQUIRE(st == CF_OK && f != sentinel && f != NULL);
    }
    ta.fail_at = 0;

    fz_whole x = {NULL, 0, false};
    fz_probes p;
    p.n = 0;
    if (valid == CF_OK) {
        fz_whole_open(&x, b, n);
        fz_scan(&x, &p, fz_get64(b + 24) ^ n);
    }
    if (st == CF_OK) {
        fz_check_serializes_to(f, b, n);
        fz_check_figures(f, &x, b);
        fz_check_lookups(f, &p);
        uint8_t key[3] = {(uint8_t)n, (uint8_t)mode, 0x5a};
        uint64_t h = cf_hash(f, key, sizeof key);
        FZ_REQUIRE(h == (x.img[0].rb
                             ? fz_murmur(key, sizeof key)
                             : XXH3_64bits_withSeed(key, sizeof key, fz_get64(x.img[0].b + 24))));
        FZ_REQUIRE(cf_contains(f, key, sizeof key) == cf_contains_hash(f, h));
        FZ_REQUIRE(cf_count(f, key, sizeof key) == fz_whole_count(&x, h));
    }
#if defined(__linux__)
    if (mode & FZ_MODE_MAPPED)
        fz_check_files(b, n, valid, st == CF_OK ? f : NULL, &p);
#endif
    if (st == CF_OK) {
        fz_check_updates(f, &ta, fz_get64(b + 24) ^ n);
        cf_free(f);
        /* The same file loaded concurrent: the same bytes, answers and updates. */
        cf_filter *g = NULL;
        FZ_REQUIRE(cf_deserialize_flags(b, n, CF_SEMI_SORT, &ta.a, &g) == CF_EINVAL && !g);
        FZ_REQUIRE(cf_deserialize_flags(b, n, CF_CONCURRENT, &ta.a, &g) == CF_OK && g);
        fz_check_serializes_to(g, b, n);
        fz_check_lookups(g, &p);
        fz_check_adds_round_trip(g, fz_get64(b + 24) ^ n, FZ_ADDS);
        fz_check_updates(g, &ta, fz_get64(b + 24) ^ n);
        cf_free(g);
    }
    FZ_REQUIRE(ta.live == 0 && ta.live_bytes == 0);
    free(x.img);
    free(b);
    return 0;
}
