/*
 * fuzz_common.h - what the fuzz targets share: the failure macro, a
 * tracking allocator that can fail on demand, little-endian fields and a mixer. Header
 * only (static inline), so each target stays one translation unit plus replay.c.
 */
#ifndef CF_FUZZ_COMMON_H
#define CF_FUZZ_COMMON_H

#include <cuckoofilter.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------ */
/* Failing: a broken property aborts, which is how libFuzzer (and ctest) learns of it    */
/* ------------------------------------------------------------------------------------ */

static inline _Noreturn void fz_violation(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: contract violated: %s\n", file, line, what);
    fflush(stderr);
    abort();
}

#define FZ_REQUIRE(cond) ((cond) ? (void)0 : fz_violation(__FILE__, __LINE__, #cond))

/* ------------------------------------------------------------------------------------ */
/* Little-endian fields and a mixer                                                     */
/* ------------------------------------------------------------------------------------ */

static inline uint32_t fz_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t fz_get64(const uint8_t *p)
{
    return (uint64_t)fz_get32(p) | (uint64_t)fz_get32(p + 4) << 32;
}

static inline void fz_put64(uint8_t *p, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* splitmix64's output function: a bijection with good avalanche. */
static inline uint64_t fz_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------------------------------ */
/* A tracking allocator that can fail on demand                                         */
/* ------------------------------------------------------------------------------------ */
/* Every block carries a header with its size and a magic number, so that a pointer freed
 * twice or never handed out is caught (ASan catches both too; this also works in the
 * uninstrumented replay build), and the live count tells a leak at once. Requests above
 * `limit` live bytes fail like an allocation failure, so that a header that describes a
 * huge filter costs nothing (libFuzzer would otherwise stop at its malloc limit). */

#define FZ_ALLOC_HDR   16u /* keeps the block 16-byte aligned, like malloc's */
#define FZ_ALLOC_MAGIC UINT64_C(0x6675a770c5b10c4e)

typedef struct fz_alloc {
    cf_allocator a;
    uint64_t calls;       /* alloc calls, failed ones included */
    uint64_t failures;    /* alloc calls that returned NULL */
    uint64_t live;        /* blocks handed out and not freed */
    uint64_t live_bytes;  /* their sizes */
    uint64_t total_bytes; /* every successful request */
    uint64_t fail_at;     /* the call number that fails; 0 = none */
    bool persist;         /* and every call after it */
    uint64_t limit;       /* live bytes beyond which a request fails */
} fz_alloc;

static inline void *fz_alloc_fn(void *ctx, size_t size)
{
    fz_alloc *t = (fz_alloc *)ctx;
    t->calls++;
    bool fail =
        t->fail_at != 0 && (t->calls == t->fail_at || (t->persist && t->calls > t->fail_at));
    if (fail || size > t->limit || t->live_bytes > t->limit - size) {
        t->failures++;
        return NULL;
    }
    unsigned char *p = (unsigned char *)malloc(size + FZ_ALLOC_HDR);
    if (p == NULL) {
        t->failures++;
        return NULL;
    }
    uint64_t sz = size, magic = FZ_ALLOC_MAGIC;
    memcpy(p, &sz, sizeof sz);
    memcpy(p + 8, &magic, sizeof magic);
    memset(p + FZ_ALLOC_HDR, 0xA5, size); /* cf_allocator: alloc need not zero memory */
    t->live++;
    t->live_bytes += size;
    t->total_bytes += size;
    return p + FZ_ALLOC_HDR;
}

static inline void fz_free_fn(void *ctx, void *ptr)
{
    fz_alloc *t = (fz_alloc *)ctx;
    FZ_REQUIRE(ptr != NULL); /* the library never frees NULL through an allocator */
    unsigned char *p = (unsigned char *)ptr - FZ_ALLOC_HDR;
    uint64_t sz, magic;
    memcpy(&sz, p, sizeof sz);
    memcpy(&magic, p + 8, sizeof magic);
    /* A pointer we did not hand out, or one freed twice. */
    FZ_REQUIRE(magic == FZ_ALLOC_MAGIC && t->live > 0 && sz <= t->live_bytes);
    magic = 0;
    memcpy(p + 8, &magic, sizeof magic);
    t->live--;
    t->live_bytes -= sz;
    free(p);
}

static inline void fz_alloc_init(fz_alloc *t, uint64_t limit)
{
    memset(t, 0, sizeof *t);
    t->a.alloc = fz_alloc_fn;
    t->a.free = fz_free_fn;
    t->a.ctx = t;
    t->limit = limit;
}

/* ------------------------------------------------------------------------------------ */
/* Stats                                                                                */
/* ------------------------------------------------------------------------------------ */

static inline bool fz_stats_equal(const cf_stats *a, const cf_stats *b)
{
    return a->items == b->items && a->slots == b->slots && a->buckets == b->buckets &&
           a->bytes == b->bytes && a->sub_filters == b->sub_filters &&
           a->fingerprint_bits == b->fingerprint_bits && a->bucket_size == b->bucket_size &&
           a->stashed == b->stashed && a->capacity == b->capacity &&
           !(a->load_factor < b->load_factor || a->load_factor > b->load_factor) &&
           !(a->fpr < b->fpr || a->fpr > b->fpr);
}

/* What every filter's figures (s, of filter f) must satisfy, whatever its contents. A
 * filter still loading chunk by chunk holds memory only for the tables whose chunks have
 * begun to arrive. */
static inline void fz_stats_sane(const cf_filter *f, const cf_stats *s, bool loading)
{
    cf_config c;
    cf_get_config(f, &c);
    if (s->generations && s->slots == 0) { /* a window none of whose images arrived yet */
        FZ_REQUIRE(loading && s->items == 0 && s->fpr == 0.0 && s->bytes == 0);
        return;
    }
    uint64_t slot_bits = s->fingerprint_bits - ((c.flags & CF_SEMI_SORT) ? 1u : 0u);
    FZ_REQUIRE(s->sub_filters >= 1 && s->buckets >= 2 * (uint64_t)s->sub_filters);
    FZ_REQUIRE(s->fingerprint_bits >= CF_MIN_FINGERPRINT_BITS &&
               s->fingerprint_bits <= CF_MAX_FINGERPRINT_BITS);
    FZ_REQUIRE(s->bucket_size >= 1 && s->bucket_size <= CF_MAX_BUCKET_SIZE);
    FZ_REQUIRE(s->slots == s->buckets * s->bucket_size);
    FZ_REQUIRE(loading || s->bytes * 8 >= s->slots * slot_bits); /* semi-sorted: f - 1 */
    FZ_REQUIRE(s->stashed <= 8u * (s->generations ? s->generations : 1u) &&
               s->stashed <= s->items); /* 8 a generation */
    FZ_REQUIRE(s->items <= s->slots + s->stashed);
    FZ_REQUIRE(s->capacity >= 1);
    double want = (double)(s->items - s->stashed) / (double)s->slots; /* never above 1 */
    double diff = s->load_factor - want;
    FZ_REQUIRE(diff <= 1e-12 * want && -diff <= 1e-12 * want);
    FZ_REQUIRE(s->fpr >= 0.0 && s->fpr <= 1.0); /* also false for NaN */
    FZ_REQUIRE(s->items != 0 || s->fpr == 0.0);
    FZ_REQUIRE(s->newest_fingerprint_bits >= s->fingerprint_bits &&
               s->newest_fingerprint_bits <= CF_MAX_FINGERPRINT_BITS);
    /* Now, full, every sub-filter there may be full: each at least the one before (the
     * two last summed in other orders: a rounding's worth of slack). */
    FZ_REQUIRE(s->fpr <= s->fpr_full * (1.0 + 1e-9) && s->fpr_full <= 1.0);
    FZ_REQUIRE(s->fpr_full <= s->fpr_bound * (1.0 + 1e-9) && s->fpr_bound <= 1.0);
}

/* ------------------------------------------------------------------------------------ */
/* Whatever a loader accepts saves validly, after any operation                         */
/* ------------------------------------------------------------------------------------ */

#define FZ_GROW_ADDS 4096u /* adds that try to make a loaded filter grow (inputs are small) */

/* cf_serialize gives exactly these bytes back. */
static inline void fz_check_serializes_to(const cf_filter *f, const uint8_t *b, size_t n)
{
    FZ_REQUIRE(cf_serialized_size(f) == n);
    uint8_t *out = (uint8_t *)malloc(n);
    FZ_REQUIRE(out != NULL);
    size_t written = 0;
    FZ_REQUIRE(cf_serialize(f, out, n - 1, &written) == CF_EINVAL && written == 0);
    FZ_REQUIRE(cf_serialize(f, out, n, &written) == CF_OK && written == n);
    FZ_REQUIRE(memcmp(out, b, n) == 0);
    free(out);
}

/* Serialize f: the result must validate, and load back to the same bytes. */
static inline void fz_check_round_trip(const cf_filter *f)
{
    size_t n = cf_serialized_size(f);
    FZ_REQUIRE(n > 0);
    uint8_t *out = (uint8_t *)malloc(n);
    FZ_REQUIRE(out != NULL);
    FZ_REQUIRE(cf_serialize(f, out, n, NULL) == CF_OK);
    const char *why = "unset";
    FZ_REQUIRE(cf_validate(out, n, &why) == CF_OK && why == NULL);
    cf_filter *g = NULL;
    FZ_REQUIRE(cf_deserialize(out, n, NULL, &g) == CF_OK && g != NULL);
    fz_check_serializes_to(g, out, n);
    cf_free(g);
    free(out);
}

/* Adds of `n` hashes from `seed` with nothing between them (no call that reads the
 * whole filter, which would settle a concurrent filter's counts first), then f saves
 * what loads (fz_check_round_trip); then the hashes added are deleted again. A concurrent
 * window once saved its generations' item counts without their stripes' adds. */
static inline void fz_check_adds_round_trip(cf_filter *f, uint64_t seed, unsigned n)
{
    uint64_t added[64];
    unsigned k = 0;
    for (unsigned i = 0; i < n && i < 64; i++) {
        uint64_t h = fz_mix64(seed ^ (UINT64_C(0xadd5) + i));
        if (cf_add_hash(f, h) == CF_OK)
            added[k++] = h;
    }
    fz_check_round_trip(f);
    while (k > 0)
        FZ_REQUIRE(cf_delete_hash(f, added[--k]) == CF_OK);
}

/* A filter a loader accepted (forged or not) through the operations that rewrite its
 * tables: adds until it grows (or refuses one), compaction, deletes of half of those keys,
 * compaction, deletes of the rest, cf_clear. After each it saves to a file that validates
 * and loads back byte for byte, and the keys it holds are found. */
static inline void fz_check_mutations(cf_filter *f, uint64_t seed)
{
    uint64_t *keys = (uint64_t *)malloc(FZ_GROW_ADDS * sizeof *keys);
    FZ_REQUIRE(keys != NULL);
    cf_stats s0, s;
    cf_get_stats(f, &s0);
    unsigned n = 0;
    while (n < FZ_GROW_ADDS) {
        uint64_t h = fz_mix64(seed ^ (UINT64_C(0x9e0) + n));
        cf_status st = cf_add_hash(f, h);
        if (st != CF_OK) {
            FZ_REQUIRE(st == CF_FULL || st == CF_ENOMEM);
            break;
        }
        keys[n++] = h;
        cf_get_stats(f, &s);
        if (s.sub_filters > s0.sub_filters)
            break;
    }
    fz_check_round_trip(f);
    for (int pass = 0; pass < 2; pass++) {
        FZ_REQUIRE(cf_compact(f) == CF_OK);
        cf_get_stats(f, &s);
        fz_stats_sane(f, &s, false);
        for (unsigned i = 0; i < n; i++)
            FZ_REQUIRE(cf_contains_hash(f, keys[i]));
        fz_check_round_trip(f);
        unsigned keep = pass == 0 ? n / 2 : 0;
        while (n > keep)
            FZ_REQUIRE(cf_delete_hash(f, keys[--n]) == CF_OK);
    }
    FZ_REQUIRE(cf_compact(f) == CF_OK);
    cf_get_stats(f, &s);
    FZ_REQUIRE(s.items == s0.items);
    fz_check_round_trip(f);
    cf_clear(f);
    cf_get_stats(f, &s);
    fz_stats_sane(f, &s, false);
    FZ_REQUIRE(s.items == 0 && s.stashed == 0 && s.load_factor == 0.0);
    fz_check_round_trip(f);
    free(keys);
}

#endif /* CF_FUZZ_COMMON_H */
