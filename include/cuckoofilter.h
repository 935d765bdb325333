/*
 * cuckoofilter.h - the whole public API of libcuckoofilter.
 *
 * A cuckoo filter answers "have I seen this key?" with no false negatives, a tunable
 * false-positive rate and, unlike a Bloom filter, deletion. This header is the manual:
 * every function is documented where it is declared.
 *
 * Usage:
 *
 *     #include <cuckoofilter.h>
 *
 *     cf_config cfg = {.capacity = 1000000};   // everything else has a default
 *     cf_filter *f;
 *     if (cf_new(&cfg, &f) != CF_OK)
 *         return 1;
 *     cf_add(f, "alice", 5);
 *     if (cf_contains(f, "alice", 5))          // true: no false negatives
 *         puts("probably seen alice");
 *     if (!cf_contains(f, "bob", 3))           // false: definitely not added
 *         puts("never seen bob");
 *     cf_delete(f, "alice", 5);
 *     cf_free(f);
 *
 * Link with -lcuckoofilter (pkg-config: cuckoofilter; CMake: cuckoofilter::cuckoofilter).
 *
 * Thread safety: a filter has no global state and no hidden locks. Functions taking a
 * `const cf_filter *` may run concurrently with each other on the same filter. A call
 * taking a non-const `cf_filter *` needs exclusive access to that filter. Different
 * filters are independent.
 *
 * Errors: every fallible call returns a cf_status. The library never prints, never
 * aborts and never asserts on its input. A failed cf_add leaves the filter exactly as it
 * was.
 */
#ifndef CUCKOOFILTER_H
#define CUCKOOFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(CF_SHARED_BUILD)
#define CF_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define CF_API __attribute__((visibility("default")))
#else
#define CF_API
#endif

/* Library version. cf_version() returns the same numbers as a string, so a program can
 * tell the header it was compiled against from the library it runs with. */
#define CF_VERSION_MAJOR  0
#define CF_VERSION_MINOR  1
#define CF_VERSION_PATCH  0
#define CF_VERSION_NUMBER (CF_VERSION_MAJOR * 10000 + CF_VERSION_MINOR * 100 + CF_VERSION_PATCH)

/* Defaults and limits of cf_config (the reason for each is in the field's comment). */
#define CF_DEFAULT_FINGERPRINT_BITS 12u /* ~0.2 % false positives at b = 4, 1.6 bytes/key */
#define CF_MIN_FINGERPRINT_BITS     4u
#define CF_MAX_FINGERPRINT_BITS     32u
#define CF_DEFAULT_BUCKET_SIZE      4u /* 95 % load at 2 probes per lookup */
#define CF_MAX_BUCKET_SIZE          255u
#define CF_DEFAULT_MAX_KICKS        500u /* the paper's budget; enough for 95 % load at b = 4 */
#define CF_MAX_MAX_KICKS            65535u
#define CF_DEFAULT_MAX_SUB_FILTERS  32u    /* RedisBloom's default cf-max-expansions */
#define CF_MAX_SUB_FILTERS          65536u /* RedisBloom's upper bound for the same setting */
#define CF_MAX_EXPANSION            32768u /* RedisBloom's bound; one step past it outgrows RAM */

typedef struct cf_filter cf_filter; /* opaque */

typedef enum cf_status {
    CF_OK = 0,
    CF_NOT_FOUND, /* cf_delete: no matching fingerprint */
    CF_FULL,      /* cf_add: no room; the filter is exactly as it was before */
    CF_EXISTS,    /* cf_add_unique: the key (probably) is there already; nothing added */
    CF_EINVAL,    /* invalid argument or configuration */
    CF_ENOMEM,    /* allocation failed; the filter is exactly as it was before */
    CF_ECORRUPT,  /* serialized input failed validation */
    CF_EIO,       /* a read, write or sync failed */
} cf_status;

/* A custom allocator, used for every allocation the filter makes. "Try" semantics:
 * alloc returns NULL on failure and the library reports CF_ENOMEM. Like malloc, alloc
 * returns memory aligned for any object; it need not zero it. free is called with every
 * pointer alloc returned, exactly once. Both must be set. */
typedef struct cf_allocator {
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *ptr);
    void *ctx;
} cf_allocator;

typedef struct cf_config {
    uint64_t capacity;             /* items to hold (required, >= 1) */
    unsigned fingerprint_bits;     /* 4..32; 0 = 12 */
    unsigned bucket_size;          /* 1..255; 0 = 4 (2, 4 and 8 are the fast paths) */
    unsigned max_kicks;            /* eviction budget per insert, 1..65535; 0 = 500 */
    unsigned expansion;            /* 0 = fixed size (cf_add may return CF_FULL);
                                      n >= 1 = on full, append a sub-filter n times larger;
                                      at most 32768 */
    uint64_t seed;                 /* hash seed, kept with the filter */
    const cf_allocator *allocator; /* NULL = malloc/free; the module passes Redis's own */
    unsigned max_sub_filters;      /* growing filters: at most this many sub-filters,
                                      then CF_FULL; 1..65536; 0 = 32 */
} cf_config;

typedef struct cf_stats {
    uint64_t items;   /* fingerprints stored (adds minus deletes) */
    uint64_t slots;   /* fingerprint slots in all sub-filters */
    uint64_t buckets; /* buckets in all sub-filters */
    uint64_t bytes;   /* memory held by the tables */
    unsigned sub_filters;
    unsigned fingerprint_bits;
    unsigned bucket_size;
    double load_factor; /* items / slots */
    double fpr;         /* expected false-positive rate at the current load */
    uint64_t stashed;   /* items (counted in `items`) held in the overflow stash: a fixed
                           filter keeps up to 8 fingerprints that found no slot there;
                           non-zero means the tables are at their limit */
} cf_stats;

/* ------------------------------------------------------------------------------------ */
/* Creating and destroying                                                              */
/* ------------------------------------------------------------------------------------ */

/* Create a filter sized so that `config->capacity` random keys fit.
 *
 * The table is not rounded to a power of two: it holds within a few percent of
 * capacity * fingerprint_bits / (8 * load) bytes, where load is what the bucket size
 * reaches (0.84 for b = 2, 0.95 for b = 4, 0.98 for b = 8). The same config (seed
 * included) always gives the same filter, bit for bit.
 *
 * Short fingerprints in small buckets (b * f below about 16) limit where a key can go: a
 * bucket has at most 2^f - 1 alternates. For those shapes the table is sized for a
 * lower load, so that `capacity` keys still fit; cf_bytes_needed says what that costs.
 *
 * config: the settings; zero fields take their defaults (see cf_config). Not retained:
 *         the filter copies what it needs, including *config->allocator.
 * out:    receives the new filter on CF_OK; untouched otherwise.
 *
 * Returns CF_OK; CF_EINVAL for a NULL argument, a field out of range, capacity 0, a
 * capacity so large that the table could not be addressed, or one that the shape cannot
 * hold at any load (b = 1 with f = 4 and a million keys, say); CF_ENOMEM if an
 * allocation failed.
 * Thread safety: reentrant. */
CF_API cf_status cf_new(const cf_config *config, cf_filter **out);

/* The number of bytes cf_new would allocate for `config` (the tables, the filter and its
 * scratch space), computed without allocating. Use it to refuse a config that is too big
 * before trying it.
 * Returns CF_OK and sets *bytes; CF_EINVAL as cf_new would. Thread safety: reentrant. */
CF_API cf_status cf_bytes_needed(const cf_config *config, size_t *bytes);

/* Free the filter and everything it holds, through its allocator. NULL is fine. */
CF_API void cf_free(cf_filter *f);

/* ------------------------------------------------------------------------------------ */
/* Keys                                                                                 */
/* ------------------------------------------------------------------------------------ */
/* A key is any `len` bytes at `key` (key may be NULL only when len is 0). It is hashed
 * with the filter's own seeded 64-bit hash (XXH3). */

/* Add a key. Adding the same key again stores another copy (see cf_count); one key can
 * occupy at most 2 * bucket_size slots of each sub-filter, and a fixed filter may keep
 * up to 8 more copies in its stash (see cf_stats.stashed).
 *
 * When there is no free slot in the key's two buckets, resident fingerprints are moved to
 * their other bucket (at most max_kicks buckets are examined). The moves are planned
 * before any is made, so a failure moves nothing. A growing filter then appends a
 * sub-filter `expansion` times larger than the last, unless the key's own copies already
 * fill both its buckets (a hot key never grows the filter) or max_sub_filters is reached.
 *
 * Returns CF_OK; CF_FULL (nothing changed); CF_ENOMEM while growing (nothing changed);
 * CF_EINVAL for NULL arguments. Thread safety: needs exclusive access to f. */
CF_API cf_status cf_add(cf_filter *f, const void *key, size_t len);

/* Add a key unless cf_contains already says it is there.
 * Returns CF_OK (added), CF_EXISTS (probably present; nothing added), or as cf_add. A
 * false positive makes this skip a key that was never added: use cf_add for counting. */
CF_API cf_status cf_add_unique(cf_filter *f, const void *key, size_t len);

/* Is the key (probably) in the filter? false is certain: a key that was added and not
 * deleted is always found. true is wrong with probability about cf_stats.fpr.
 * Returns false for NULL arguments. Thread safety: concurrent with other const calls. */
CF_API bool cf_contains(const cf_filter *f, const void *key, size_t len);

/* Remove one copy of a key.
 * Only delete keys that were added. Deleting a key that was never added can remove the
 * fingerprint of another key that shares its fingerprint and buckets, and that other key
 * would then be missed: the filter cannot tell the two apart.
 * Returns CF_OK; CF_NOT_FOUND (no matching fingerprint; nothing changed); CF_EINVAL.
 * Thread safety: needs exclusive access to f. */
CF_API cf_status cf_delete(cf_filter *f, const void *key, size_t len);

/* How many stored fingerprints match the key: never less than (times added - times
 * deleted), possibly more through false positives. 0 for NULL arguments. */
CF_API uint64_t cf_count(const cf_filter *f, const void *key, size_t len);

/* Remove every key. The filter keeps its size (every sub-filter), settings and seed.
 * NULL is fine. Thread safety: needs exclusive access to f. */
CF_API void cf_clear(cf_filter *f);

/* Fill *out with the filter's figures. Does nothing if either pointer is NULL. */
CF_API void cf_get_stats(const cf_filter *f, cf_stats *out);

/* A static, one-line English description of a status ("filter is full", ...). Never
 * NULL, also for values outside the enum. */
CF_API const char *cf_strerror(cf_status s);

/* "MAJOR.MINOR.PATCH" of the library that is running. */
CF_API const char *cf_version(void);

/* ------------------------------------------------------------------------------------ */
/* Pre-hashed keys                                                                      */
/* ------------------------------------------------------------------------------------ */
/* For callers that already hold a hash: `h` must be a well-mixed 64-bit hash of the key
 * (every bit is used). cf_add_hash(f, cf_hash(f, k, n)) is exactly cf_add(f, k, n). Mixing
 * the two forms with different hash functions for the same key breaks the guarantees. */

/* The filter's own hash of a key (XXH3-64 with the filter's seed). 0 if f is NULL. */
CF_API uint64_t cf_hash(const cf_filter *f, const void *key, size_t len);
/* As cf_add, cf_contains, cf_delete and cf_count. */
CF_API cf_status cf_add_hash(cf_filter *f, uint64_t h);
CF_API bool cf_contains_hash(const cf_filter *f, uint64_t h);
CF_API cf_status cf_delete_hash(cf_filter *f, uint64_t h);
CF_API uint64_t cf_count_hash(const cf_filter *f, uint64_t h);
/* out[i] = cf_contains_hash(f, hashes[i]) for i < n. Does nothing if a pointer is NULL.
 * Thread safety: concurrent with other const calls. */
CF_API void cf_contains_many(const cf_filter *f, const uint64_t *hashes, size_t n, bool *out);

#ifdef __cplusplus
}
#endif

#endif /* CUCKOOFILTER_H */
