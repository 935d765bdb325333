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
 * filters are independent. A filter made with CF_CONCURRENT (below) relaxes that: its
 * lookups may run beside adds, deletes and clears from other threads.
 *
 * Errors: every fallible call returns a cf_status. The library never prints, never
 * aborts and never asserts on its input. A failed cf_add leaves the filter exactly as it
 * was.
 *
 * Stability. What this header declares is meant to be depended on:
 *   - names and signatures of functions, types, fields and constants are never changed or
 *     removed; the numbers of cf_status and of every flag bit are pinned;
 *   - cf_config and cf_stats only grow, by fields appended at their end whose 0 means
 *     "as before". A program passes the size of the struct it was compiled with (the
 *     inline cf_new, cf_get_stats, ... below do it for you: they call the *_sized
 *     functions with sizeof), so a program built against this header keeps working,
 *     unrecompiled, with a later library: that library reads and writes only the fields
 *     the program knows. A program built against a later header runs on this library as
 *     long as it leaves the fields this library does not know at 0 (else CF_EINVAL), and
 *     reads them as 0 from this library's cf_get_stats/cf_get_config. Bindings that call
 *     the library without this header call the *_sized functions themselves;
 *   - the file format is versioned (CF_FORMAT_VERSION): a library reads every version
 *     since 2, and says CF_EVERSION for a newer one.
 * Until version 1.0, a minor release (0.x) may still break the ABI; it then changes the
 * shared library's soname (libcuckoofilter.so.0.MINOR), so that no program runs against a
 * library it was not built for.
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
#define CF_VERSION_MINOR  2
#define CF_VERSION_PATCH  0
#define CF_VERSION_NUMBER (CF_VERSION_MAJOR * 10000 + CF_VERSION_MINOR * 100 + CF_VERSION_PATCH)

/* Defaults and limits of cf_config (the reason for each is in the field's comment). */
#define CF_DEFAULT_FINGERPRINT_BITS    12u /* the rate 2b / 2^f at b = 4: cf_expected_fpr */
#define CF_MIN_FINGERPRINT_BITS        4u
#define CF_MAX_FINGERPRINT_BITS        32u
#define CF_DEFAULT_BUCKET_SIZE         4u /* the paper's: high load for two probes a lookup */
#define CF_MAX_BUCKET_SIZE             255u
#define CF_DEFAULT_MAX_KICKS           500u /* the paper's budget, which the b = 4 sizing needs */
/* A segmented table's default budget (CF_SEGMENTED): its fullest segment, not its
 * average, meets the first failed insert, and twice the budget takes it past the load at
 * which an any-size table of the default budget fails (docs/PERFORMANCE.md). */
#define CF_DEFAULT_MAX_KICKS_SEGMENTED 1000u
#define CF_MAX_MAX_KICKS               65535u
#define CF_DEFAULT_MAX_SUB_FILTERS     32u    /* RedisBloom's default cf-max-expansions */
#define CF_MAX_SUB_FILTERS             65536u /* RedisBloom's upper bound for the same setting */
#define CF_MAX_EXPANSION               32768u /* RedisBloom's bound; one step past it outgrows RAM */
#define CF_MAX_GENERATIONS                                                                         \
    4096u /* a lookup probes every generation: past a few                                          \
                 thousand, a plain filter is the better tool */

typedef struct cf_filter cf_filter; /* opaque */

/* Every value is pinned: a status keeps its number in every later version, and a new
 * status only ever takes a new number, so a program may store or compare the numbers. */
typedef enum cf_status {
    CF_OK = 0,
    CF_NOT_FOUND = 1, /* cf_delete: no matching fingerprint */
    CF_FULL = 2,      /* cf_add: no room; the filter is exactly as it was before */
    CF_EXISTS = 3,    /* cf_add_unique: the key (probably) is there already; nothing added */
    CF_EINVAL = 4,    /* invalid argument or configuration */
    CF_ENOMEM = 5,    /* allocation failed; the filter is exactly as it was before */
    CF_ECORRUPT = 6,  /* serialized input failed validation */
    CF_EIO = 7,       /* a read, write or sync failed (errno says why) */
    CF_EVERSION = 8,  /* serialized by a newer format version, or with a feature this library
                         does not know: upgrade the library; or by format version 1, which
                         this library no longer reads: rebuild the filter from its keys */
    CF_EREADONLY = 9, /* the filter cannot change: it is memory-mapped (cf_open_mapped) or
                         still being loaded chunk by chunk (cf_load_chunk) */
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
    unsigned fingerprint_bits;     /* 4..32; 0 = from target_fpr if set, else 12 */
    unsigned bucket_size;          /* 1..255; 0 = 4. Fastest shapes (code of their own):
                                      b = 4 with f = 8, 12, 16; b = 2 with f = 8, 12, 16;
                                      b = 8 with f = 8 */
    unsigned max_kicks;            /* eviction budget per insert, 1..65535; 0 = 500, or
                                      1000 for a segmented table */
    unsigned expansion;            /* 0 = fixed size (cf_add may return CF_FULL);
                                      n >= 1 = on full, append a sub-filter n times larger;
                                      at most 32768 */
    uint64_t seed;                 /* hash seed, kept with the filter. 0 = a secret one
                                      drawn from the system's random source, so that
                                      nobody can choose keys that crowd one bucket pair;
                                      any other value (or 0 with CF_FIXED_SEED) is used as
                                      given, for a reproducible filter */
    const cf_allocator *allocator; /* NULL = malloc/free; the module passes Redis's own */
    unsigned max_sub_filters;      /* growing filters: at most this many sub-filters,
                                      then CF_FULL; 1..65536; 0 = 32 */
    unsigned flags;                /* 0, or CF_FIXED_SEED, CF_GROW_SAME_WIDTH, CF_SEMI_SORT,
                                      CF_CONCURRENT, CF_REDISBLOOM, CF_SEGMENTED,
                                      CF_UNSEGMENTED, CF_FAST_HASH; other bits are
                                      CF_EINVAL */
    double target_fpr;             /* sizing by target: with fingerprint_bits 0, the
                                      narrowest fingerprint whose false-positive rate at
                                      full load of the first table, cf_expected_fpr(f, b,
                                      1.0), is at most this; (0, 1). 0 = not used. Setting
                                      it and fingerprint_bits is CF_EINVAL */
    double fpr_bound;              /* growing filters: the most the false-positive rate may
                                      reach, however far the filter grows. Each new
                                      sub-filter gets fingerprints wider than the last
                                      (up to 32 bits) by just enough that the rate of all
                                      max_sub_filters sub-filters at full load stays within
                                      it. 0 = twice the first sub-filter's rate at full
                                      load, cf_expected_fpr(f, b, 1.0) (halfway from it to
                                      1 if that is more; the most widening there is if the
                                      fingerprints are too wide to reach it). Must exceed
                                      that rate and be below 1; CF_EINVAL for a fixed filter
                                      or with CF_GROW_SAME_WIDTH */
    unsigned generations;          /* a windowed filter ("Filters that forget" below):
                                      2..CF_MAX_GENERATIONS generations, each a fixed
                                      filter sized by the fields above (capacity is each
                                      generation's; expansion must be 0); 0 = a filter that
                                      keeps its keys until they are deleted */
    uint64_t window;               /* windowed filters: the window's length in the
                                      caller's time unit (cf_generation_at); 0 = advanced
                                      only by cf_advance and cf_advance_to */
} cf_config;

/* Flags of cf_config. */
#define CF_FIXED_SEED      1u /* use `seed` as given even when it is 0 (no secret seed drawn) */
/* Growing filters: every sub-filter keeps the first one's fingerprint width, as in 0.1 and
 * RedisBloom. Each sub-filter then adds its own false-positive rate: three full ones have
 * three times the rate of one. Without it, growth keeps the rate within fpr_bound. */
#define CF_GROW_SAME_WIDTH 2u
/* Semi-sorted buckets (the paper's section 5.2; 4-slot buckets only, else CF_EINVAL): each
 * bucket keeps its fingerprints sorted and codes their top 4 bits together, so that a slot
 * costs f - 1 bits instead of f, at the same false-positive rate: capacity * (f - 1) /
 * (8 * 0.95) bytes. Inserts and deletes take more work; lookups a little more. */
#define CF_SEMI_SORT       4u
/* Lookups beside writers: see "Concurrency" below. */
#define CF_CONCURRENT      8u
/* RedisBloom's layout, for filters moved from RedisBloom or to it: see "RedisBloom's
 * layout" below. */
#define CF_REDISBLOOM      16u
/* The bucket mapping (see "The mapping" below). By default a table of at least
 * CF_SEGMENTED_MIN_BUCKETS buckets (about 16M keys in buckets of 4) is segmented: cut into
 * segments of 2^CF_SEGMENT_BITS buckets that hold both buckets of each of their keys, so
 * that threads, processes or machines can each fill their own segments of one filter
 * (cf_build_hashes, `cuckoo build --jobs`, cuckoofilter.dask), and lookups compute the
 * second bucket with one XOR. Its bucket count is rounded up to whole segments, which
 * costs at most 1/64 of the memory at that size but much more in small tables, which keep
 * the any-size mapping of format version 2 (docs/PERFORMANCE.md, "Segmented tables", has
 * the figures). CF_SEGMENTED asks for segments at any size,
 * CF_UNSEGMENTED for the any-size mapping at any size; CF_SEGMENTED with CF_UNSEGMENTED or
 * CF_REDISBLOOM (whose layout has its own mapping) is CF_EINVAL. A segmented filter saves
 * as format version 3. */
#define CF_SEGMENTED       32u
#define CF_UNSEGMENTED     64u
/* 8-byte keys (integer ids) hashed by strongly universal multiply-shift with 128-bit words
 * drawn from the seed: ((a * key + b) mod 2^128) >> 64, the key read as a little-endian
 * u64 (format hash id 3, docs/FORMAT.md), then a xorshift-multiply. A shorter chain than
 * XXH3's, so keyed lookups of 8-byte keys take less time (docs/PERFORMANCE.md,
 * "CF_FAST_HASH"); for keys chosen
 * without the seed, any two collide in any of the bits a filter uses with the probability
 * of chance, as with XXH3. Keys of other lengths are hashed with XXH3 as without the
 * flag. cf_hash is then the filter's hash, not cf_hash_seeded's: hash keys with cf_hash
 * of the filter. CF_EINVAL with generations, with CF_REDISBLOOM (its hash is RedisBloom's)
 * and in the calls that take a config and hashes made without a filter (cf_config_mapping,
 * segments built apart). The filter's head takes 32 bytes more. Files of this hash need
 * a reader that knows hash id 3: older ones refuse them (CF_EVERSION). */
#define CF_FAST_HASH       128u

typedef struct cf_stats {
    uint64_t items;   /* fingerprints stored (adds minus deletes), stashed ones included */
    uint64_t slots;   /* fingerprint slots in all sub-filters */
    uint64_t buckets; /* buckets in all sub-filters */
    uint64_t bytes;   /* memory held by the tables */
    unsigned sub_filters;
    unsigned fingerprint_bits;
    unsigned bucket_size;
    double load_factor; /* (items - stashed) / slots: the share of slots in use, never
                           above 1 (the stash is counted in `stashed`, not here) */
    double fpr;         /* expected false-positive rate at the current load */
    uint64_t stashed;   /* items (counted in `items`) held in the overflow stash: a fixed
                           filter keeps up to 8 fingerprints that found no slot there;
                           non-zero means the tables are at their limit */
    uint64_t capacity;  /* the capacity the filter was created with */
    unsigned newest_fingerprint_bits; /* the newest sub-filter's width: fingerprint_bits
                                         (the first's) unless growth widened them */
    double fpr_bound; /* the most `fpr` can reach: at full load of every sub-filter the
                         filter may have (one for a fixed filter, max_sub_filters for a
                         growing one), each at its width */
    double fpr_full;  /* `fpr` once the current sub-filters are full */
    /* Windowed filters (0 for others): the figures above are those of every generation
     * together (counts summed, rates combined; capacity is each generation's, the widths
     * the newest's), and: */
    uint64_t window;           /* the window's length, as configured */
    uint64_t generation;       /* the newest generation's number (cf_advance_to) */
    unsigned generations;      /* generations in the ring, all of them live */
    unsigned generations_used; /* generations that hold at least one item */
} cf_stats;

/* The smallest structs the *_sized functions take: cf_config as far as `allocator` and
 * cf_stats as far as `fpr`, the layouts of library 0.1. A larger size is read or written
 * as far as the library knows the fields. */
#define CF_CONFIG_SIZE_MIN (offsetof(cf_config, allocator) + sizeof(const cf_allocator *))
#define CF_STATS_SIZE_MIN  (offsetof(cf_stats, fpr) + sizeof(double))

/* ------------------------------------------------------------------------------------ */
/* Creating and destroying                                                              */
/* ------------------------------------------------------------------------------------ */

/* Create a filter sized so that `config->capacity` random keys fit.
 *
 * Its hash seed is secret unless the config fixes one (see cf_config.seed): a filter
 * whose seed is public, or 0, can be filled by keys chosen to share one bucket pair.
 * Fix a seed (any non-zero value, or CF_FIXED_SEED) only for reproducible files and
 * tests, and keep it secret from whoever chooses the keys.
 *
 * The table is not rounded to a power of two: it holds within a few percent of
 * capacity * fingerprint_bits / (8 * load) bytes, where load is what the bucket size
 * reaches (0.84 for b = 2, 0.95 for b = 4, 0.98 for b = 8). The same config with a fixed
 * seed always gives the same filter, bit for bit.
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
 * hold at any load (b = 1 with f = 4 and a million keys, say), or unknown flags;
 * CF_ENOMEM if an allocation failed; CF_EIO if a secret seed was to be drawn and the
 * system's random source gave none.
 * Thread safety: reentrant. */
static inline cf_status cf_new(const cf_config *config, cf_filter **out);

/* cf_new for a config of `config_size` bytes (see "Stability" above): fields past it take
 * their defaults. CF_EINVAL if config_size is below CF_CONFIG_SIZE_MIN, or if the bytes
 * past the fields this library knows are not all 0. */
CF_API cf_status cf_new_sized(const cf_config *config, size_t config_size, cf_filter **out);

/* The config with every default applied and checked, as cf_new would run it: the
 * fingerprint width (chosen from target_fpr when that is set, which then reads 0), bucket
 * size, eviction budget and sub-filter limit take their values; capacity, expansion,
 * seed (0 stays 0: cf_new draws the secret seed), flags and allocator are copied. So a
 * program (the cuckoo tool does) can show the settings a filter will have before making
 * it, without deriving defaults of its own; cf_new(out) makes the same filter as
 * cf_new(config).
 * Returns CF_OK and fills *out; CF_EINVAL as cf_new would (out untouched).
 * Thread safety: reentrant. */
static inline cf_status cf_config_resolve(const cf_config *config, cf_config *out);
CF_API cf_status cf_config_resolve_sized(const cf_config *config, size_t config_size,
                                         cf_config *out, size_t out_size);

/* Whether cf_new would accept `config`, and if not, why: CF_OK (and *reason NULL), or
 * CF_EINVAL with *reason a static one-line English description of the first rule it
 * breaks ("fingerprint width must be 4 to 32 bits", ...), so that a program can show the
 * library's own words instead of restating its rules. reason may be NULL. Draws no seed
 * and allocates nothing. Thread safety: reentrant. */
static inline cf_status cf_config_check(const cf_config *config, const char **reason);
CF_API cf_status cf_config_check_sized(const cf_config *config, size_t config_size,
                                       const char **reason);

/* The number of bytes cf_new would allocate for `config` (the tables, the filter and its
 * scratch space), computed without allocating. Use it to refuse a config that is too big
 * before trying it. Besides the table, a filter holds 96 bytes, plus 24 for its copy of
 * a caller's allocator, 48 for a bucket size above 8 and 32 for CF_FAST_HASH; growth, a
 * stash and large eviction budgets add to that when they need it.
 * Returns CF_OK and sets *bytes; CF_EINVAL as cf_new would. Thread safety: reentrant. */
static inline cf_status cf_bytes_needed(const cf_config *config, size_t *bytes);
CF_API cf_status cf_bytes_needed_sized(const cf_config *config, size_t config_size, size_t *bytes);

/* Free the filter and everything it holds, through its allocator. NULL is fine. */
CF_API void cf_free(cf_filter *f);

/* ------------------------------------------------------------------------------------ */
/* Keys                                                                                 */
/* ------------------------------------------------------------------------------------ */
/* A key is any `len` bytes at `key` (key may be NULL only when len is 0). It is hashed
 * with the filter's own seeded 64-bit hash (XXH3; multiply-shift for 8-byte keys with
 * CF_FAST_HASH). */

/* Add a key. Adding the same key again stores another copy (see cf_count); one key can
 * occupy at most 2 * bucket_size slots of each sub-filter, and a fixed filter may keep
 * up to 8 more copies in its stash (see cf_stats.stashed).
 *
 * When there is no free slot in the key's two buckets, resident fingerprints are moved to
 * their other bucket (at most max_kicks buckets are examined). The moves are planned
 * before any is made, so a failure moves nothing. A growing filter then appends a
 * sub-filter `expansion` times larger than the last, unless the key's own copies already
 * fill both its buckets (a hot key never grows the filter) or max_sub_filters is reached.
 * The search for moves uses up to 19 KB of stack when max_kicks is at most 510 (the
 * default is 500), and memory the filter holds (32 to 48 bytes per kick) for larger budgets
 * (a segmented table's default, 1000, among them).
 *
 * Returns CF_OK; CF_FULL (nothing changed); CF_ENOMEM while growing, or when a fixed
 * filter first needs its stash (200 bytes, held while it has entries) (nothing changed);
 * CF_EINVAL for NULL arguments; CF_EREADONLY for a mapped or loading filter.
 * Thread safety: needs exclusive access to f. */
CF_API cf_status cf_add(cf_filter *f, const void *key, size_t len);

/* Add a key unless cf_contains already says it is there.
 * Returns CF_OK (added), CF_EXISTS (probably present; nothing added), or as cf_add. A
 * false positive makes this skip a key that was never added: use cf_add for counting. */
CF_API cf_status cf_add_unique(cf_filter *f, const void *key, size_t len);

/* Is the key (probably) in the filter? false is certain: a key that was added and not
 * deleted is always found. true is wrong with probability about cf_stats.fpr.
 * Returns false for NULL arguments. Thread safety: concurrent with other const calls. */
CF_API bool cf_contains(const cf_filter *f, const void *key, size_t len);

/* Many lookups at once: out[i] = cf_contains(f, keys[i], lens[i]) for i < n. On a filter
 * larger than the caches this is several times faster than a loop of cf_contains: the
 * buckets of the next keys are fetched while earlier ones are compared, so their memory
 * reads overlap. Any n works; a few hundred keys or more per call amortise the start.
 * Does nothing if a pointer is NULL; a NULL keys[i] with lens[i] > 0 answers false.
 * Thread safety: concurrent with other const calls. */
CF_API void cf_contains_keys(const cf_filter *f, const void *const *keys, const size_t *lens,
                             size_t n, bool *out);

/* Many adds at once: keys[i] of lens[i] bytes for i < n, in order, exactly as cf_add_many
 * adds their hashes (flags 0 or CF_ADD_UNIQUE, `status` and the return value as there),
 * and as fast on a large filter. A NULL keys[i] with lens[i] > 0 gets CF_EINVAL and the
 * other keys are still added. Returns the number of keys added; 0 if the call is refused
 * (f, keys or lens NULL with n > 0, unknown flags, read-only filter: every status
 * CF_EINVAL or CF_EREADONLY). Thread safety: needs exclusive access to f. */
CF_API size_t cf_add_keys(cf_filter *f, const void *const *keys, const size_t *lens, size_t n,
                          unsigned flags, cf_status *status);

/* Remove one copy of a key.
 * Only delete keys that were added. Deleting a key that was never added can remove the
 * fingerprint of another key that shares its fingerprint and buckets, and that other key
 * would then be missed: the filter cannot tell the two apart.
 * Returns CF_OK; CF_NOT_FOUND (no matching fingerprint; nothing changed); CF_EINVAL;
 * CF_EREADONLY for a mapped or loading filter.
 * Thread safety: needs exclusive access to f. */
CF_API cf_status cf_delete(cf_filter *f, const void *key, size_t len);

/* How many stored fingerprints match the key: never less than (times added - times
 * deleted), possibly more through false positives. 0 for NULL arguments. */
CF_API uint64_t cf_count(const cf_filter *f, const void *key, size_t len);

/* Remove every key. The filter keeps its size (every sub-filter), settings and seed.
 * NULL is fine, and a mapped or loading filter is left as it is. Thread safety: needs exclusive
 * access to f. */
CF_API void cf_clear(cf_filter *f);

/* Move stashed fingerprints back into the tables and fingerprints from newer sub-filters
 * into free slots of older ones, then free the newest sub-filters that are left empty. After many
 * deletes this gives memory back and makes lookups cheaper (fewer sub-filters to probe); a fixed
 * filter (one sub-filter) is left as it is. No key is lost: every fingerprint moves into the pair
 * of buckets its key hashes to, and deletes stay safe afterwards. Deterministic: the same filter
 * always compacts to the same filter, and afterwards holds the same memory as a copy of it.
 * Cost: one pass over every sub-filter but the oldest, and at most one small allocation (a
 * smaller array of sub-filters; if it fails, the filter keeps the bigger one).
 * Returns CF_OK; CF_EINVAL for NULL; CF_EREADONLY for a mapped or loading filter.
 * Thread safety: needs exclusive access to f. */
CF_API cf_status cf_compact(cf_filter *f);

/* ------------------------------------------------------------------------------------ */
/* Merging                                                                              */
/* ------------------------------------------------------------------------------------ */
/* Filters built apart (per thread, per file, per machine) merge exactly when they
 * share seed, fingerprint width, bucket size and encoding (semi-sorted or not), layout and
 * first sub-filter size: make them all from one model with cf_new_like, or with one
 * config and a fixed seed. A fingerprint keeps its key's bucket pair only at the size of
 * the sub-filter that held it or smaller (finer bits of the key are not stored), so
 * every fingerprint of a source's first sub-filter must find room in the destination's
 * first: give filters meant to be merged the capacity of all their keys together. */

/* An empty filter that merges with `model`: made with the settings and seed that
 * cf_get_config reports (a windowed model gives an empty window), with `allocator`
 * (NULL = malloc/free).
 * Returns CF_OK and sets *out; CF_EINVAL for NULL pointers or a model still loading;
 * CF_ENOMEM. Thread safety: concurrent with other const calls on model. */
CF_API cf_status cf_new_like(const cf_filter *model, const cf_allocator *allocator,
                             cf_filter **out);

/* Add every fingerprint of src to dst, as if every key added to src and not deleted had
 * been added to dst: counts and item totals add up, every key of either is found, and the
 * false-positive rate is the formula's at the merged load. Merging a filter with a copy of
 * itself doubles every count, as adding its keys again would. Each fingerprint enters
 * dst as an insert would, in the largest of dst's sub-filters that can hold it (see
 * above): a free slot of its pair, then an eviction, then growth where the new sub-filter
 * can hold it, then the stash of a fixed filter.
 * Atomic: on any failure dst is exactly as it was. The merge copies dst's tables first,
 * so it needs memory for a second copy of them while it runs (a CF_CONCURRENT dst that
 * grows also gets its new sub-filters' memory before anything changes).
 * Deterministic: the same two filters always merge to the same filter.
 * reason: if not NULL, receives NULL on CF_OK, else a static one-line English description
 * of what was wrong ("seeds differ", "the merged fingerprints do not fit", ...).
 * Returns CF_OK; CF_FULL (the fingerprints do not fit; a fixed dst's items plus src's
 * beyond its slots are refused before any work); CF_ENOMEM; CF_EREADONLY for a mapped or
 * loading dst; CF_EINVAL for NULL filters, dst and src the same filter, filters that
 * differ as above, a src still loading, and windowed or RedisBloom-layout filters (which
 * do not merge yet).
 * Cost: a pass over src's slots and an insert for each fingerprint, and the copy; into a
 * CF_CONCURRENT dst, the merge runs twice (on a private copy first, see merge.c).
 * Thread safety: needs exclusive access to dst, but a CF_CONCURRENT dst, which lookups may
 * read meanwhile (writers wait); src is only read (a CF_CONCURRENT src's writers wait). */
CF_API cf_status cf_merge(cf_filter *dst, const cf_filter *src, const char **reason);

/* cf_merge with up to `threads` threads (0: one per online processor; 1: cf_merge). Where
 * dst is a plain segmented filter (CF_SEGMENTED, or the default from
 * CF_SEGMENTED_MIN_BUCKETS) in its simple state (one sub-filter, an empty stash) and src's
 * first sub-filter is of its size, each thread re-inserts the fingerprints of its own run
 * of whole segments, which no other thread's touch: the result is byte for byte
 * cf_merge's, for any number of threads (every merge that can go segment by segment does,
 * with one thread too). A fingerprint that finds no slot in its segment goes to a fixed
 * dst's stash, those of all threads in bucket order (CF_FULL if they are more than it
 * holds); a growing dst, which would grow, gets its table back and the merge goes on with
 * one thread, as cf_merge describes. Threads add nothing
 * to a merge that cannot go segment by segment (they are not started), nor for fewer
 * than 65,536 fingerprints a thread. Same returns and thread safety as cf_merge; the
 * threads allocate nothing, and their shadows (a filter's head each) are allocated with
 * dst's allocator before any starts. */
CF_API cf_status cf_merge_threads(cf_filter *dst, const cf_filter *src, unsigned threads,
                                  const char **reason);

/* Whether cf_merge takes dst and src as they are made: CF_OK, or CF_EINVAL with cf_merge's
 * reason ("seeds differ", ...) in *reason if not NULL. Nothing about room, memory or a
 * read-only dst is checked, and nothing changes. Thread safety: concurrent with other
 * const calls on both. */
CF_API cf_status cf_merge_check(const cf_filter *dst, const cf_filter *src, const char **reason);

/* ------------------------------------------------------------------------------------ */
/* Figures, settings, versions                                                          */
/* ------------------------------------------------------------------------------------ */

/* Fill *out with the filter's figures. Does nothing if either pointer is NULL. For a
 * filter still loading by chunks (cf_load_chunk) they are those of the filter its header
 * describes, but for `bytes`, which counts only the tables whose chunks have begun to
 * arrive (the memory actually held). */
static inline void cf_get_stats(const cf_filter *f, cf_stats *out);

/* cf_get_stats into a struct of `out_size` bytes (see "Stability" above): the fields that
 * fit are written, bytes past the fields this library knows are set to 0, and nothing
 * beyond out_size is touched. Returns CF_OK; CF_EINVAL (nothing written) for NULL
 * pointers or out_size below CF_STATS_SIZE_MIN. */
CF_API cf_status cf_get_stats_sized(const cf_filter *f, cf_stats *out, size_t out_size);

/* The expected false-positive rate of a lookup in a filter of `fingerprint_bits`-bit
 * fingerprints in buckets of `bucket_size` slots, whose sub-filters' load factors add up
 * to `loads` (one sub-filter at full load: 1.0; three full ones: 3.0). It is what
 * cf_stats.fpr reports for a filter, and it sizes one: the smallest width whose
 * cf_expected_fpr(f, b, 1.0) meets a target rate. Returns 1.0 for arguments out of range.
 * Thread safety: reentrant. */
CF_API double cf_expected_fpr(unsigned fingerprint_bits, unsigned bucket_size, double loads);

/* The settings the filter runs with: the config it was created with (or that its file
 * carried), defaults applied and the seed it drew, so that cf_new(out) makes an empty
 * filter of the same first size and seed (out->flags is CF_FIXED_SEED for seed 0).
 * out->allocator is set to NULL. Does nothing if either pointer is NULL. */
static inline void cf_get_config(const cf_filter *f, cf_config *out);
/* As cf_get_stats_sized, for cf_get_config (out_size at least CF_CONFIG_SIZE_MIN). */
CF_API cf_status cf_get_config_sized(const cf_filter *f, cf_config *out, size_t out_size);

/* A static, one-line English description of a status ("filter is full", ...). Never
 * NULL, also for values outside the enum. */
CF_API const char *cf_strerror(cf_status s);

/* "MAJOR.MINOR.PATCH" of the library that is running. */
CF_API const char *cf_version(void);

/* The variant of the library's compiled hot paths that filters made now use:
 * "x86-64-v3" (AVX2, BMI2, ...) when the library was built for x86-64 and this CPU and OS
 * support that level, else "baseline". Each filter is bound to a variant when it is made
 * (cf_new, a load, a copy). Setting the environment variable CUCKOOFILTER_CPU=baseline
 * forces the baseline. Every variant gives the same answers and the same bytes. Thread
 * safety: reentrant (it reads the environment). */
CF_API const char *cf_cpu_variant(void);

/* ------------------------------------------------------------------------------------ */
/* Concurrency: CF_CONCURRENT                                                           */
/* ------------------------------------------------------------------------------------ */
/* A filter made with CF_CONCURRENT takes lookups beside writers. Any number of threads
 * may call cf_contains*, cf_count* and cf_get_stats while other threads call cf_add*,
 * cf_delete*, cf_add_many and cf_clear, growth included. Lookups take no lock and never
 * wait for a writer to finish: they read again when a writer changed what they read. A key
 * whose add returned before a lookup began, and whose delete has not begun, is found, also
 * while inserts move it or the filter grows. A count beside writers counts every copy
 * whose add returned and whose delete has not begun, and may count one a writer is adding
 * or deleting.
 *
 * Writers run beside each other too: while the filter has one sub-filter and an empty
 * stash, an add or a delete of a shape with code of its own (b = 4 or 2 with 8-, 12- or
 * 16-bit fingerprints, 8/8, semi-sorted 9/4 and 13/4) holds only the stripes of 256
 * buckets it writes, an eviction too; cf_add_many (without CF_ADD_UNIQUE) of such a
 * shape but the semi-sorted ones puts a key into a free slot holding none (a
 * compare-and-swap of the slot's word), so that writers of one filter share no lock's
 * cache line. Anything else (growth, the stash, other shapes, a unique add whose buckets
 * are full, RedisBloom's layout) takes the filter's own lock (a mutex), which also holds
 * every stripe and waits for those lockless puts under way. cf_add_unique and CF_ADD_UNIQUE check
 * and add as one step. cf_get_stats, cf_serialize, cf_save and the chunk dump take that lock to
 * copy a consistent state: writers wait for them, lookups do not. cf_compact, cf_free and the
 * loaders still need exclusive access.
 *
 * Not stored in files: cf_load and cf_deserialize give a filter without it, cf_load_flags
 * and cf_deserialize_flags one with it.
 *
 * The cost: a lookup reads a sequence counter besides its two buckets, and again after
 * them (semi-sorted buckets: two), each bucket through the aligned 64-bit words that hold
 * it, so shapes whose buckets straddle words (12-bit fingerprints in 4-slot buckets) pay
 * more than those read with one load each (16-bit ones, the fastest beside writers);
 * writes take stripe locks and change whole aligned words with atomic instructions. The
 * counters and locks take 8 bytes per 256 buckets, the lockless puts' counters 2 KiB a
 * filter, and a first table of a MiB or more gets 16 KiB of planning
 * memory per MiB, up to 4 (64 KiB), for writers evicting at once (cf_bytes_needed counts
 * it). build/cf-bench-concurrent measures lookups beside writers and
 * build/cf-bench-writers writers beside each other; the README's performance tables give
 * the figures.
 *
 * Threads that fill one filter together do best taking batches (of a few hundred keys,
 * for cf_add_many) from a shared cursor rather than fixed slices: inserts get dearer as
 * the filter fills, and a thread that falls behind would put the last, dearest keys in
 * alone. */

/* ------------------------------------------------------------------------------------ */
/* Filters that forget: windowed filters                                                */
/* ------------------------------------------------------------------------------------ */
/* "Have I seen this key in the last hour?" A filter made with cf_config.generations = G
 * (2 or more) keeps G generations, each a filter of its own sized by the rest of the
 * config (capacity: the keys one generation takes). Adds go to the newest generation;
 * lookups, counts and deletes see every generation; cf_advance drops the oldest
 * generation whole and starts a new, empty one. So a key is found for at least G - 1
 * advances after its last add, and forgotten after G.
 *
 * The library never reads a clock (a replica, a reload and a test replay the same
 * advances and get the same bytes). Time comes from the caller: with cf_config.window =
 * W (any unit: milliseconds, seconds), generation g covers the times t with
 * floor(t * (G - 1) / W) = g, and a caller advances to cf_generation_at(f, now) before
 * each operation. Then the promise is in time: a key is found for at least W after its
 * last add (no false negative inside the window), and forgotten within W * G / (G - 1)
 * (W plus one generation's span, W / (G - 1)). More generations forget closer to W, at
 * the cost of a probe per generation in every lookup.
 *
 * The false-positive rate is that of every generation together: about G times one
 * generation's. cf_config.target_fpr sizes the fingerprints for all G generations at
 * full load; cf_stats.fpr reports the combined rate, fpr_bound its most.
 *
 * Generations do not grow: expansion must be 0 (CF_EINVAL otherwise), and an add to a
 * full newest generation says CF_FULL (nothing changed), so size `capacity` for the keys
 * one generation's span brings. (With generations of different sizes, deleting a key
 * could take another key's fingerprint from an older generation that the deleted key's
 * own copy does not stand in for.) A delete takes the key's oldest copy, so that a key
 * added again stays for the window after its last add. cf_add_unique (and CF_ADD_UNIQUE)
 * says CF_EXISTS for a key any generation holds, and refreshes one that only older
 * generations hold: a copy goes to the newest (CF_FULL if it does not fit, nothing
 * changed), so that a key seen again and again stays for a window after it was last
 * seen, with at most one copy per generation. A windowed filter may be
 * semi-sorted or concurrent (CF_CONCURRENT: lookups beside writers, an advance
 * included); not of RedisBloom's layout (CF_EINVAL). Saved, loaded,
 * mapped and dumped in chunks like any filter: the file holds the generations, the
 * newest one's number and the window (docs/FORMAT.md, "Windowed files"); a dump is the
 * file's meta section, then each generation's own dump. */

/* Drop the oldest generation and start a new, empty one: the newest generation's number
 * goes up by 1. The dropped generation's memory is reused.
 * Returns CF_OK; CF_EINVAL for NULL, a filter that is not windowed, or one whose
 * generation number is at its end (UINT64_MAX); CF_EREADONLY for a mapped filter.
 * Thread safety: a write (needs exclusive access, or
 * CF_CONCURRENT: lookups may run beside it). */
CF_API cf_status cf_advance(cf_filter *f);

/* Advance until the newest generation's number is `generation`: min(generation - current,
 * G) generations dropped, none if it is current already. The number starts at 0 in a
 * new filter; a caller with a clock advances to cf_generation_at(f, now).
 * Returns CF_OK; CF_EINVAL (nothing changed) for a generation older than the newest
 * (the caller's clock went backwards), NULL, or a filter that is not windowed;
 * CF_EREADONLY. Thread safety: as cf_advance. */
CF_API cf_status cf_advance_to(cf_filter *f, uint64_t generation);

/* The generation that time `now` falls in, floor(now * (G - 1) / window), in the unit of
 * cf_config.window (UINT64_MAX past it); for a window of 0, the newest generation's number. 0 if f
 * is NULL or not windowed. Thread safety: a const call. */
CF_API uint64_t cf_generation_at(const cf_filter *f, uint64_t now);

/* Lookups as at generation `generation` without advancing (a reader that may not write:
 * a read-only command, a mapped file, a replica): what the same call would answer after
 * cf_advance_to(f, generation), the generations that advance would drop unseen. A
 * generation at or before the newest answers as the plain call; so does a filter that is
 * not windowed, whatever `generation` says. Arguments and answers as cf_contains,
 * cf_count and cf_contains_keys. Thread safety: const calls; on a CF_CONCURRENT window
 * they take the writers' lock (the plain lookups take none). */
CF_API bool cf_contains_at(const cf_filter *f, const void *key, size_t len, uint64_t generation);
CF_API uint64_t cf_count_at(const cf_filter *f, const void *key, size_t len, uint64_t generation);
CF_API void cf_contains_keys_at(const cf_filter *f, const void *const *keys, const size_t *lens,
                                size_t n, uint64_t generation, bool *out);

/* The figures of one generation, `age` advances old (0: the newest, G - 1: the oldest),
 * as cf_get_stats gives a filter's (its window fields 0). Returns CF_OK; CF_EINVAL for
 * NULL pointers, a filter that is not windowed, age >= G or out_size below
 * CF_STATS_SIZE_MIN. */
static inline cf_status cf_get_generation_stats(const cf_filter *f, unsigned age, cf_stats *out);
CF_API cf_status cf_get_generation_stats_sized(const cf_filter *f, unsigned age, cf_stats *out,
                                               size_t out_size);

/* ------------------------------------------------------------------------------------ */
/* Pre-hashed keys                                                                      */
/* ------------------------------------------------------------------------------------ */
/* For callers that already hold a hash: `h` must be a well-mixed 64-bit hash of the key
 * (every bit is used). cf_add_hash(f, cf_hash(f, k, n)) is exactly cf_add(f, k, n). Mixing
 * the two forms with different hash functions for the same key breaks the guarantees. */

/* The filter's own hash of a key (XXH3-64 with the filter's seed; for 8-byte keys
 * multiply-shift with words from the seed under CF_FAST_HASH; MurmurHash64A with seed 0
 * for CF_REDISBLOOM). 0 if f is NULL. */
CF_API uint64_t cf_hash(const cf_filter *f, const void *key, size_t len);
/* As cf_add, cf_contains, cf_delete and cf_count. */
CF_API cf_status cf_add_hash(cf_filter *f, uint64_t h);
CF_API bool cf_contains_hash(const cf_filter *f, uint64_t h);
CF_API cf_status cf_delete_hash(cf_filter *f, uint64_t h);
CF_API uint64_t cf_count_hash(const cf_filter *f, uint64_t h);
/* out[i] = cf_contains_hash(f, hashes[i]) for i < n, batched as cf_contains_keys is.
 * Does nothing if a pointer is NULL. Thread safety: concurrent with other const calls. */
CF_API void cf_contains_many(const cf_filter *f, const uint64_t *hashes, size_t n, bool *out);

/* Flags of cf_add_many. */
#define CF_ADD_UNIQUE 1u /* add a key only if cf_contains says it is absent (cf_add_unique) */

/* Add n pre-hashed keys in order: exactly what n calls of cf_add_hash (with CF_ADD_UNIQUE,
 * of cf_add_unique) would do, giving the same filter and the same statuses, but faster on
 * a filter larger than the caches, because the buckets of the next keys are fetched while
 * each key goes in. A failure (CF_FULL, CF_ENOMEM) does not stop the batch: the next keys
 * are still tried, as with separate calls.
 * status: NULL, or n entries that receive each key's status (CF_OK, CF_EXISTS, CF_FULL,
 * CF_ENOMEM, or for every key CF_EINVAL / CF_EREADONLY if the call is refused).
 * flags: 0 or CF_ADD_UNIQUE; other bits make the call CF_EINVAL.
 * Returns the number of keys added (statuses CF_OK); 0 if the call is refused (f NULL,
 * hashes NULL with n > 0, unknown flags, read-only filter).
 * Thread safety: modifies f; needs exclusive access. */
CF_API size_t cf_add_many(cf_filter *f, const uint64_t *hashes, size_t n, unsigned flags,
                          cf_status *status);

/* Building a filter from a set of keys, with threads: hash the keys (cf_hash_seeded with
 * the filter's seed; cf_hash of the filter for one made with CF_FAST_HASH), put the hashes
 * in build order with cf_sort_hashes (which also says how many distinct keys there are,
 * the capacity to make the filter with), then add them with cf_build_hashes. The filter
 * is the one that adding the distinct hashes in build order one by one gives, byte for
 * byte, whatever the number of threads: a segmented filter (CF_SEGMENTED) is filled by
 * several threads at once, each its own segments; any other filter by one. `cuckoo build
 * --jobs N` and cuckoofilter.dask build this way. */

/* Sort hashes[0 .. n) in place into build order for `fingerprint_bits`-bit fingerprints
 * (the order of their first buckets, then their fingerprints: ascending rotl(h, f)) and
 * move the distinct ones to hashes[0 .. *distinct), with up to `threads` threads (0: one
 * per online processor; fewer for a short array). It allocates n hashes' worth of memory
 * to sort with several threads, and sorts with one, in place, without it.
 * Returns CF_OK; CF_EINVAL for NULL pointers (hashes may be NULL when n is 0) or a width
 * outside 4..32. Thread safety: reentrant. */
CF_API cf_status cf_sort_hashes(uint64_t *hashes, size_t n, unsigned fingerprint_bits,
                                unsigned threads, size_t *distinct);

/* What cf_build_hashes did. */
typedef struct cf_build_report {
    uint64_t added;   /* hashes added (CF_OK) */
    uint64_t full;    /* hashes refused with CF_FULL (the filter had no room) */
    unsigned threads; /* threads that filled: 1 unless the filter is segmented and has
                         one sub-filter and an empty stash when the call begins */
} cf_build_report;

/* Add hashes[0 .. n), in build order without repeats (cf_sort_hashes with f's first
 * fingerprint width), to f: exactly what cf_add_many(f, hashes, n, 0, status) would do,
 * but a segmented filter with up to `threads` threads (0: one per online processor; at
 * most one per two segments and per 65536 hashes), each adding the hashes of its own
 * segments. Where an add would change more than a table slot (a stash entry, growth),
 * the threads' work ends and the rest go in one by one, as they would have. The same
 * keys in the same order give the same bytes for any `threads`.
 * report: receives the counts.
 * Returns CF_OK (refused adds are counted in report->full); CF_EINVAL for NULL pointers
 * or hashes not in build order; CF_EREADONLY; CF_ENOMEM if an add ran out of memory (the
 * later hashes were still tried, as cf_add_many does).
 * Thread safety: modifies f; needs exclusive access. */
CF_API cf_status cf_build_hashes(cf_filter *f, const uint64_t *hashes, size_t n, unsigned threads,
                                 cf_build_report *report);

/* ------------------------------------------------------------------------------------ */
/* The mapping, for cuckoo tables of your own                                           */
/* ------------------------------------------------------------------------------------ */
/* A program that keeps its own cuckoo hash table, whose slots hold a short tag and a
 * payload (an offset into a log, a row number), can place its keys exactly as a filter
 * does and move them the same way: an entry's other bucket follows from its bucket and
 * its tag alone, so an entry can be kicked out without its key ("partial-key cuckoo
 * hashing"). examples/logstore builds its index on these three calls.
 *
 * A table of m buckets (m even) with t-bit tags: a key with hash h goes in
 * place.bucket[0] or place.bucket[1], and its slot records place.tag. The two buckets
 * always differ. cf_alt_bucket(place.bucket[0], place.tag, m) is place.bucket[1] and the
 * other way round. A filter of m buckets and t-bit fingerprints uses the same buckets and
 * fingerprint for h. Doubling m keeps nothing: rehash each key into the larger table. */

/* A key's place in a table: its two candidate buckets and its tag. */
typedef struct cf_place {
    uint64_t bucket[2]; /* different, each below the table's bucket count */
    uint32_t tag;       /* tag_bits wide, never 0 (0 can mark an empty slot) */
} cf_place;

/* The limits of cf_place_hash and cf_alt_bucket: bucket counts even, 2 .. 2^60. */
#define CF_PLACE_MAX_BUCKETS (UINT64_C(1) << 60)

/* XXH3-64 of the key with `seed`: what cf_hash returns for a filter whose seed is `seed`
 * (and that is not made with CF_FAST_HASH or CF_REDISBLOOM).
 * key may be NULL only when len is 0 (otherwise returns 0). Thread safety: reentrant. */
CF_API uint64_t cf_hash_seeded(uint64_t seed, const void *key, size_t len);

/* A secret seed from the system's random source, never 0: what cf_new draws for a config
 * whose seed is 0. For a program that hashes keys (cf_hash_seeded) before it makes the
 * filter they go into, as `cuckoo build` does to count the distinct keys first: it then
 * makes the filter with this seed.
 * Returns CF_OK and sets *out; CF_EINVAL if out is NULL; CF_EIO if the system's random
 * source gave nothing. Thread safety: reentrant. */
CF_API cf_status cf_random_seed(uint64_t *out);

/* The place of hash h in a table of `buckets` buckets with `tag_bits`-bit tags.
 * Returns CF_OK and fills *out; CF_EINVAL if out is NULL, buckets is odd or outside
 * 2 .. CF_PLACE_MAX_BUCKETS, or tag_bits is outside 4 .. 32. Thread safety: reentrant. */
CF_API cf_status cf_place_hash(uint64_t h, uint64_t buckets, unsigned tag_bits, cf_place *out);

/* The other candidate bucket of an entry with `tag` that sits in `bucket`. An involution:
 * cf_alt_bucket(cf_alt_bucket(i, tag, m), tag, m) == i, and never equal to `bucket`.
 * Returns UINT64_MAX if buckets is out of range as for cf_place_hash, bucket >= buckets
 * or tag is 0. Thread safety: reentrant. */
CF_API uint64_t cf_alt_bucket(uint64_t bucket, uint32_t tag, uint64_t buckets);

/* Segmented tables (CF_SEGMENTED, format version 3) map keys another way: a table of S
 * segments of 2^s buckets places a key's first bucket as above, and its second in the
 * same segment, bucket[0] XOR an odd number below 2^s made from the tag. A segment is then
 * a table of its own: whoever holds the hashes of its keys can fill it alone (a thread, a
 * Dask worker), and a key's segment, bucket[0] >> s, says where it lives (a server of a
 * cluster that serves a range of segments). The calls below place keys by either mapping. */

/* Buckets per segment of a segmented filter: 2^16 (smaller segments fill less far before
 * the first failed insert, below the load a table is sized for; docs/PERFORMANCE.md,
 * "Tuned constants"). */
#define CF_SEGMENT_BITS          16u
/* Tables of at least this many buckets are segmented unless CF_UNSEGMENTED: 64 segments,
 * where rounding up to whole segments costs at most 1/64 of the memory. */
#define CF_SEGMENTED_MIN_BUCKETS (UINT64_C(1) << 22)

/* A table's mapping. */
typedef struct cf_mapping {
    uint64_t buckets;      /* the bucket count: even, 2 .. CF_PLACE_MAX_BUCKETS; with
                              segments, a multiple of 2^segment_bits */
    unsigned tag_bits;     /* 4..32 */
    unsigned segment_bits; /* 0: the any-size mapping (cf_place_hash, format version 2);
                              else 16..60: segments of 2^segment_bits buckets (a filter's
                              are CF_SEGMENT_BITS) */
} cf_mapping;

/* The mapping of f's first sub-filter (its keys' buckets in a grown filter's later
 * sub-filters follow from it as docs/FORMAT.md says).
 * Returns CF_OK and fills *out; CF_EINVAL for NULL pointers or a filter of RedisBloom's
 * layout or a window (which map keys their own way). Thread safety: concurrent with
 * other const calls. */
CF_API cf_status cf_get_mapping(const cf_filter *f, cf_mapping *out);

/* The place of hash h in a table of mapping *m (cf_place_hash for segment_bits 0).
 * Returns CF_OK and fills *out; CF_EINVAL if a pointer is NULL or *m is out of range.
 * Thread safety: reentrant. */
CF_API cf_status cf_place_in(const cf_mapping *m, uint64_t h, cf_place *out);

/* The other candidate bucket in a table of mapping *m of an entry with `tag` that sits in
 * `bucket` (cf_alt_bucket for segment_bits 0): an involution without fixed points, in the
 * same segment. Returns UINT64_MAX if m is NULL or out of range, bucket >= m->buckets or
 * tag is 0. Thread safety: reentrant. */
CF_API uint64_t cf_alt_in(const cf_mapping *m, uint64_t bucket, uint32_t tag);

/* Segments built apart: a segment's keys go nowhere else, so the segments of a fixed
 * filter can be filled in different processes or machines (cuckoofilter.dask does) and
 * joined: each part gets the hashes of its range of segments (cf_place_in's bucket[0] >>
 * segment_bits says which), fills that range's table bytes with cf_build_segments, and
 * cf_put_segments copies them into the filter cf_new(config) made; the keys that found
 * no room in their segments go to its stash, the first ones in build order, with
 * cf_stash_unplaced. With the hashes of every range, in build order, the filter is byte
 * for byte the one cf_build_hashes makes. */

/* The stash of a fixed filter: this many fingerprints that found no slot. */
#define CF_STASH_SLOTS 8u

/* The mapping the filter cf_new(config) makes has, without making it (a client that
 * routes keys to the servers of ranges of segments needs nothing else).
 * Returns CF_OK and fills *out; CF_EINVAL for a config cf_new refuses, a RedisBloom
 * layout, a window or CF_FAST_HASH, or NULL pointers. Thread safety: reentrant. */
CF_API cf_status cf_config_mapping(const cf_config *config, cf_mapping *out);

/* The bytes of the table of segments [first, end) of a filter of `config`.
 * Returns CF_OK and sets *bytes; CF_EINVAL if the config is not segmented, the range is
 * empty or past the last segment, or a pointer is NULL. Thread safety: reentrant. */
CF_API cf_status cf_segments_size(const cf_config *config, uint64_t first, uint64_t end,
                                  size_t *bytes);

/* What cf_build_segments did. */
typedef struct cf_segments_report {
    uint64_t added;                          /* keys added to the table bytes */
    uint64_t items;                          /* fingerprints the table bytes hold after */
    uint64_t unplaced;                       /* keys that found no room in their segment */
    uint64_t first_unplaced[CF_STASH_SLOTS]; /* the hashes of the first of them, in order
                                                (as many as there are, up to 8) */
} cf_segments_report;

/* Fill out[0 .. out_len) (cf_segments_size bytes) with the table of segments
 * [first, end) of a fixed filter of `config` after adding hashes[0 .. n) to it in order,
 * the hashes in build order without repeats (cf_sort_hashes) and all in those segments.
 * A key that finds no room changes nothing and is counted in report->unplaced (the whole
 * filter stashes the first such keys of all ranges, in order: cf_stash_unplaced). It
 * uses a table of the range's size, no more.
 * Returns CF_OK; CF_EINVAL for a config that is not segmented or grows, a range as
 * above, hashes out of order or of other segments, a wrong out_len or NULL pointers;
 * CF_ENOMEM. Thread safety: reentrant. */
CF_API cf_status cf_build_segments(const cf_config *config, uint64_t first, uint64_t end,
                                   const uint64_t *hashes, size_t n, void *out, size_t out_len,
                                   cf_segments_report *report);

/* Copy the table bytes of segments [first, end) (as cf_build_segments makes them) into
 * f, replacing what those segments held; its item count follows.
 * Returns CF_OK; CF_ECORRUPT, f unchanged, if a bucket is not one a filter writes;
 * CF_EINVAL if f is not a segmented filter of one sub-filter (not concurrent, not a
 * window), for a range as above, a length other than cf_segments_size's, or NULL
 * pointers; CF_EREADONLY; CF_ENOMEM (the check's copy). Thread safety: modifies f; needs
 * exclusive access. */
CF_API cf_status cf_put_segments(cf_filter *f, uint64_t first, uint64_t end, const void *bytes,
                                 size_t len);

/* The keys that found no room in their segments (cf_build_segments' first_unplaced of
 * every range, in range order) into f's stash, while it has room: hashes[0 .. n) in
 * order, each as the add that found no room would have stashed it. *stashed receives how
 * many went in; the others are refused, as cf_add_hash refuses a key once the stash is
 * full.
 * Returns CF_OK; CF_EINVAL if f is not a fixed segmented filter of one sub-filter (not
 * concurrent) or for NULL pointers (hashes may be NULL when n is 0); CF_EREADONLY;
 * CF_ENOMEM (the stash's memory). Thread safety: modifies f; needs exclusive access. */
CF_API cf_status cf_stash_unplaced(cf_filter *f, const uint64_t *hashes, size_t n,
                                   uint64_t *stashed);

/* Merges by ranges of segments (cuckoofilter.dask's merge): the fingerprints of a
 * segment stay in it through a merge too, so filters made alike (cf_merge) merge range by
 * range, anywhere. For each range, cf_get_segments gives each filter's table bytes, and
 * cf_merge_segments adds to the first's those of the others, each followed by its stash
 * entries of that range (cf_stash_hashes); cf_put_segments puts the ranges into a filter
 * made like them (cf_new_like), and cf_stash_unplaced gives its stash the first filter's
 * stash entries, then the fingerprints that found no room, filter by filter, each
 * filter's table ones in range order, then its stash ones in stash order. The filter is
 * then byte for byte the one cf_merge makes of the same filters in the same order. */

/* Copy the table bytes of segments [first, end) of f (as cf_put_segments takes them) to
 * out[0 .. len).
 * Returns CF_OK; CF_EINVAL if f is not a segmented filter of one sub-filter (not a
 * window) or is still loading, for a range as above, a length other than
 * cf_segments_size's, or NULL pointers. Thread safety: concurrent with other const calls
 * (a CF_CONCURRENT f's writers wait). */
CF_API cf_status cf_get_segments(const cf_filter *f, uint64_t first, uint64_t end, void *out,
                                 size_t len);

/* The entries of f's stash as hashes in stash order, as cf_merge_segments and
 * cf_stash_unplaced take them (a hash of a key with the entry's fingerprint and first
 * bucket) into out[0 .. cap); *n receives their number (at most CF_STASH_SLOTS: pass
 * that much room).
 * Returns CF_OK; CF_EINVAL if f is not a segmented filter of one sub-filter or is still
 * loading, cap is below the count, or for NULL pointers. Thread safety: as
 * cf_get_segments. */
CF_API cf_status cf_stash_hashes(const cf_filter *f, uint64_t *out, size_t cap, size_t *n);

/* Add to dst[0 .. len), the table bytes of segments [first, end) of a fixed filter of
 * `config`, every fingerprint of src[0 .. len) (the same range of a filter made alike;
 * NULL: none), bucket after bucket as cf_merge adds them, then the keys of hashes[0 .. n)
 * in order (a filter's stash entries in the range: cf_stash_hashes). A fingerprint that
 * finds no room changes nothing and is counted in report->unplaced, first_unplaced
 * holding the hashes of the first of them (for cf_stash_unplaced). On any error dst is
 * unchanged. It uses two tables of the range's size.
 * Returns CF_OK; CF_ECORRUPT if a bucket of dst or src is not one a filter writes;
 * CF_EINVAL for a config that is not segmented or grows, a range as above, a length other
 * than cf_segments_size's, hashes of other segments, or NULL pointers (hashes may be NULL
 * when n is 0); CF_ENOMEM. Thread safety: reentrant. */
CF_API cf_status cf_merge_segments(const cf_config *config, uint64_t first, uint64_t end, void *dst,
                                   size_t len, const void *src, const uint64_t *hashes, size_t n,
                                   cf_segments_report *report);

/* Files written by parts: a segmented filter's file made without any process holding its
 * table (cuckoofilter.dask's build and merge with a path). With the reports of every
 * range (cf_build_segments, cf_merge_segments):
 *   1. cf_segments_file_head gives the bytes of the file before its table: the header,
 *      the stash made of the unplaced hashes (as cf_stash_unplaced makes it) and the
 *      padding, and where each range goes;
 *   2. cf_file_begin makes a temporary file of them next to the path, as long as the
 *      whole file (the table reads as zeros until written);
 *   3. each range's table bytes are written into it at their offset, by any process that
 *      sees the file (pwrite; on a network file system, then fsync or close);
 *   4. cf_file_commit checks the file, writes its checksum and puts it in place, as
 *      cf_save would have.
 * The file is then byte for byte the one cf_save writes of the filter made of the same
 * ranges and unplaced hashes (cf_put_segments, cf_stash_unplaced). */

/* The most bytes before the table of a file of one sub-filter: the header (64), a
 * descriptor (32), a full stash (8 entries of 16) and the meta checksum (8), padded to a
 * multiple of 64 (docs/FORMAT.md). */
#define CF_SEGMENTS_HEAD_MAX 256u

/* Where the parts of a file written by parts go. */
typedef struct cf_segments_file {
    uint64_t head_len;      /* the bytes before the table, at offset 0 */
    uint64_t segment_bytes; /* a segment's table bytes: segments [first, end) go at
                               head_len + first * segment_bytes */
    uint64_t total;         /* the file's length */
    uint64_t stashed;       /* how many of the unplaced hashes the stash holds */
} cf_segments_file;

/* The first info->head_len bytes, into out[0 .. cap) (cap at least CF_SEGMENTS_HEAD_MAX),
 * of the file of a fixed segmented filter of `config` whose table holds `items`
 * fingerprints (the reports' `items`, summed) and whose stash holds the first of
 * unplaced[0 .. n) (every range's first_unplaced, in range order), while it has room:
 * info->stashed says how many (fewer than the ranges' unplaced count in all: the keys did
 * not fit, as cf_add_hash would have said).
 * Returns CF_OK; CF_EINVAL for a config that is not segmented or grows, more items than
 * slots, cap below CF_SEGMENTS_HEAD_MAX or NULL pointers (unplaced may be NULL when n is
 * 0); CF_ENOMEM. Thread safety: reentrant. */
CF_API cf_status cf_segments_file_head(const cf_config *config, uint64_t items,
                                       const uint64_t *unplaced, size_t n, void *out, size_t cap,
                                       cf_segments_file *info);

/* Bytes a temporary name takes beyond its path's (its suffix and the NUL). */
#define CF_FILE_TEMP_EXTRA 33u

/* Create a new temporary file next to `path` (next to the file it names if it is a
 * symbolic link), holding head[0 .. len) at offset 0 and `total` bytes long (the rest
 * reads as zeros); its name, which cf_save's cleanup knows, into tmp[0 .. tmp_size):
 * tmp_size at least the length of that file's path + CF_FILE_TEMP_EXTRA (PATH_MAX +
 * CF_FILE_TEMP_EXTRA always does).
 * Returns CF_OK; CF_EINVAL for NULL pointers, an empty path, len above total or tmp_size
 * too small; CF_EIO (errno says why), and then no file is left. Thread safety: reentrant. */
CF_API cf_status cf_file_begin(const char *path, const void *head, size_t len, uint64_t total,
                               char *tmp, size_t tmp_size);

/* Finish the temporary file `tmp` that cf_file_begin made for `path`, its parts written:
 * check it as cf_validate_file would but for its checksum (every table's item count and
 * buckets included), write the checksum, make it durable and rename it over `path`, as
 * cf_save does (a file there keeps its owner and permissions; a symbolic link is
 * followed).
 * Returns CF_OK; CF_ECORRUPT with *reason (reason may be NULL) if the file is not a whole
 * filter file (a part missing or written at the wrong offset), and tmp is left as it was
 * for the caller to remove or complete; CF_EINVAL for NULL pointers or a path that is not
 * a regular file; CF_EIO (errno says why; tmp is left as it was). Thread safety:
 * reentrant; writers of the same path: the last rename wins, as for cf_save. */
CF_API cf_status cf_file_commit(const char *tmp, const char *path, const char **reason);

/* ------------------------------------------------------------------------------------ */
/* Saving and loading                                                                   */
/* ------------------------------------------------------------------------------------ */
/* The serialized form is the file format of docs/FORMAT.md: little-endian on every host,
 * versioned, every parameter included (seed too), checksummed with XXH3-64, and with the
 * tables 64-byte aligned so that a file can be memory-mapped and queried in place. The
 * same filter always serializes to the same bytes.
 *
 * Everything that reads serialized bytes checks the magic number, the version, the range
 * of every field, the exact total length and the checksums before it allocates anything.
 * Bad input gets CF_ECORRUPT (or CF_EVERSION), never a crash and never a half-built
 * filter. A filter loaded from its bytes answers exactly as the one that was saved. */

/* The newest format version this library writes and reads: 3, for segmented filters
 * (CF_SEGMENTED); every other filter is written as version 2. Version 2 changed how keys
 * map to buckets; a version-1 file gets CF_EVERSION: rebuild it from its keys. */
#define CF_FORMAT_VERSION 3u

/* The exact number of bytes cf_serialize writes for f; 0 if f is NULL or still loading. */
CF_API size_t cf_serialized_size(const cf_filter *f);

/* Write f into buf[0 .. cf_serialized_size(f)).
 * written: receives the byte count on CF_OK (may be NULL).
 * Returns CF_OK; CF_EINVAL for NULL arguments, a buffer smaller than cf_serialized_size
 * (nothing written), or a filter still being loaded by chunks.
 * Thread safety: concurrent with other const calls. */
CF_API cf_status cf_serialize(const cf_filter *f, void *buf, size_t cap, size_t *written);

/* Make a filter from the `len` bytes at buf, which must be exactly one serialized filter.
 * Every byte is validated first (see above); the filter is then built with `allocator`
 * (NULL = malloc/free), independent of buf.
 * Returns CF_OK and sets *out; CF_ECORRUPT for any malformed or damaged input;
 * CF_EVERSION for a newer format; CF_ENOMEM; CF_EINVAL for NULL arguments (buf may be
 * NULL only with len 0, which is CF_ECORRUPT). *out is untouched on failure.
 * Thread safety: reentrant. */
CF_API cf_status cf_deserialize(const void *buf, size_t len, const cf_allocator *allocator,
                                cf_filter **out);

/* cf_deserialize with flags: 0, or CF_CONCURRENT for a filter that threads may then read
 * while others change it, as if cf_new had made it with that flag (the flag is not
 * stored in the bytes). Other bits are CF_EINVAL. */
CF_API cf_status cf_deserialize_flags(const void *buf, size_t len, unsigned flags,
                                      const cf_allocator *allocator, cf_filter **out);

/* Check serialized bytes completely, as cf_deserialize would, without allocating.
 * reason: if not NULL, receives a static one-line English description of the first
 * problem found ("checksum mismatch", "truncated: ...") or NULL when the bytes are good.
 * Returns CF_OK, CF_ECORRUPT, CF_EVERSION, or CF_EINVAL (buf NULL with len > 0).
 * Thread safety: reentrant. */
CF_API cf_status cf_validate(const void *buf, size_t len, const char **reason);

/* Save f to the file at `path`, atomically: the bytes go to a new temporary file in the
 * same directory, which is flushed to disk (fsync) and renamed over `path`; then the
 * directory is synced. A crash at any moment leaves either the old file or the new one.
 * A symbolic link is followed: the file it names is replaced and the link stays. A file
 * that already exists keeps its owner and group (as far as this process may set them:
 * root may) and its permission bits; a new one gets 0666 minus the umask. Only a regular
 * file is ever replaced. Temporary files that earlier saves to the same path left behind
 * when their process died mid-save are removed (those of live processes are not).
 * Memory: the tables are written from the filter, with no copy.
 * Returns CF_OK; CF_EIO if a step failed (errno says why): before the rename, the
 * temporary file is removed and `path` is untouched; if only the final directory sync
 * failed, the new file is in place but may not survive a crash. CF_EINVAL for NULL
 * arguments, a filter still being loaded by chunks, or a path that names something other
 * than a regular file (a device, a FIFO, a socket); CF_ENOMEM.
 * Thread safety: concurrent with other const calls on f; two saves to the same path
 * race (the last rename wins, each file is whole: a program whose processes change one
 * file takes a lock around its load-change-save, as the cuckoo tool does). */
CF_API cf_status cf_save(const cf_filter *f, const char *path);

/* Load the filter saved at `path`, validated completely (as cf_deserialize). A regular
 * file is mapped; anything else (a pipe, a device) is read as a stream and checked as it
 * comes: the reading stops at the first byte that cannot begin a filter (so /dev/zero
 * costs 8 bytes), and never goes past the length its checked header gives (plus one
 * byte, to see whether the input is longer); the buffer grows with what arrives.
 * Returns CF_OK and sets *out; CF_EIO if the file cannot be opened or read (errno says
 * why: ENOENT, EACCES, ...); CF_ECORRUPT, CF_EVERSION, CF_ENOMEM, CF_EINVAL as
 * cf_deserialize. cf_validate_file tells what is wrong with a corrupt file.
 * Thread safety: reentrant. */
CF_API cf_status cf_load(const char *path, const cf_allocator *allocator, cf_filter **out);

/* cf_load with flags, as cf_deserialize_flags: 0, or CF_CONCURRENT (a service that saves
 * its filter loads it again ready for lookups beside writers). Other bits are
 * CF_EINVAL. */
CF_API cf_status cf_load_flags(const char *path, unsigned flags, const cf_allocator *allocator,
                               cf_filter **out);

/* cf_validate for a file: reads it (memory-mapped; a stream as cf_load reads one) and
 * checks it completely. reason as for cf_validate. Returns as cf_validate, or CF_EIO. */
CF_API cf_status cf_validate_file(const char *path, const char **reason);

/* Flags of cf_open_mapped. */
#define CF_MAP_VERIFY                                                                              \
    1u /* also check the tables' checksum and contents (reads the whole                            \
          file once) before returning */

/* Open the filter saved at `path` read-only, answering lookups straight from the file's
 * pages (mmap): no copy and no load time, and the page cache is shared by every process
 * that maps the same file. The header, every parameter and the layout are validated at
 * once; the tables themselves only with CF_MAP_VERIFY (without it, a damaged table can
 * give wrong answers but never a crash or a read outside the file).
 *
 * The result is a normal filter for every const call (cf_contains, cf_count,
 * cf_contains_many, cf_get_stats, cf_serialize, cf_save, ...). cf_add, cf_add_unique,
 * cf_delete and their _hash forms return CF_EREADONLY; cf_clear does nothing. cf_free
 * unmaps the file. Files written by cf_save are replaced by rename, so a mapped reader
 * keeps seeing the old file until it reopens; truncating a mapped file in place is not
 * supported (the process would get SIGBUS, as with any mmap).
 *
 * flags: 0 or CF_MAP_VERIFY. allocator: for the small filter struct (NULL = malloc).
 * Returns CF_OK and sets *out; CF_EIO (errno says why); CF_ECORRUPT; CF_EVERSION;
 * CF_ENOMEM; CF_EINVAL for NULL arguments or unknown flags.
 * Thread safety: reentrant; the filter it returns is safe for concurrent lookups. */
CF_API cf_status cf_open_mapped(const char *path, unsigned flags, const cf_allocator *allocator,
                                cf_filter **out);

/* ------------------------------------------------------------------------------------ */
/* Saving and loading in chunks                                                         */
/* ------------------------------------------------------------------------------------ */
/* For protocols that move a filter in bounded pieces (the Redis module's CF.SCANDUMP and
 * CF.LOADCHUNK sit on these). The first chunk is the header: the file format's header,
 * descriptors and stash, with their checksum. Each later chunk is at most
 * CF_CHUNK_DATA_MAX bytes of one table followed by an 8-byte tag that binds it to its
 * position and to the header, so a damaged, repeated, reordered or missing chunk is
 * refused at once, and so is a chunk of another filter unless both filters have the same
 * 64-byte header (same seed, shape and size); the load of a mix of two filters then fails
 * by its last chunk at the latest, which checks the whole filter against the header. A cursor is an
 * opaque 64-bit position (in fact the chunk's offset in the file format); 0 starts a dump and ends
 * it.
 *
 *     uint64_t cursor = 0;                         // dump
 *     do {
 *         cf_dump_chunk(f, &cursor, buf, cap, &len);  // cap >= cf_dump_chunk_max(f)
 *         if (len) send(cursor, buf, len);         // the cursor goes with the chunk
 *     } while (cursor != 0);
 *
 *     cf_filter *g = NULL;                          // load, in the same order
 *     while (receive(&cursor, &data, &len))
 *         if (cf_load_chunk(&g, cursor, data, len, NULL) != CF_OK) ... refuse, cf_free(g)
 *     // cf_is_loading(g) is false once the last chunk is in
 *
 * The chunks of one filter are always the same bytes: a filter rebuilt from them is
 * identical to the original, bit for bit. If the filter changes during a dump, the chunks
 * no longer add up to the filter the header describes, and the loader refuses the dump
 * by its last chunk at the latest.
 *
 * A filter that is still loading can be dumped too: the dump is its header chunk and the
 * data chunks it has taken so far, and loading that dump gives a filter in the same
 * loading state, which then takes the rest of the original dump. (A server saving its
 * data in the middle of a chunked load relies on this.) */

/* Bytes in one chunk, at most: 16 MiB, RedisBloom's bound for CF.SCANDUMP, which clients
 * and proxies may size their buffers by. The header chunk stays far below it (its
 * metadata is 64 bytes plus 32 per sub-filter and 16 per stash entry: 2 MiB at most). */
#define CF_CHUNK_MAX ((size_t)16 << 20)

/* Table bytes in one data chunk, at most: room for the 8-byte tag within CF_CHUNK_MAX. */
#define CF_CHUNK_DATA_MAX (CF_CHUNK_MAX - 8u)

/* The largest chunk cf_dump_chunk produces for f: a buffer this big fits any of them.
 * 0 if f is NULL. */
CF_API size_t cf_dump_chunk_max(const cf_filter *f);

/* Write the chunk at *cursor into buf and advance *cursor to the next chunk.
 * cursor: 0 for the first chunk (the header); afterwards the value the previous call
 *         left. When the dump is over, returns CF_OK with *len = 0 and *cursor = 0.
 * len:    receives the chunk's size.
 * Pass the advanced *cursor to cf_load_chunk together with the chunk.
 * On a loading filter, the dump ends before the chunk the filter expects next.
 * A cursor past the last chunk ends the dump as the end cursor does (CF_OK, *len = 0,
 * *cursor = 0), so that a client that asks past the end gets "no more".
 * Returns CF_OK; CF_EINVAL for NULL arguments, a cursor before the end that is not a
 * chunk position of this filter, or a buffer too small for the chunk.
 * Thread safety: concurrent with other const calls. */
CF_API cf_status cf_dump_chunk(const cf_filter *f, uint64_t *cursor, void *buf, size_t cap,
                               size_t *len);

/* The memory a filter will hold once it is loaded from the dump that starts with this
 * header chunk: its tables and its structures, in bytes. The chunk is checked as
 * cf_load_chunk checks it, and nothing is allocated, so a loader can refuse a filter too
 * big for the memory it has before it takes any chunk.
 * Returns CF_OK and sets *bytes; CF_ECORRUPT or CF_EVERSION as cf_load_chunk would for
 * this chunk; CF_EINVAL for NULL arguments or a size that does not fit in a size_t.
 * Thread safety: reentrant. */
CF_API cf_status cf_chunk_bytes_needed(const void *chunk, size_t len, size_t *bytes);

/* Take the next chunk of a dump.
 * f:      *f == NULL for the header chunk: it is validated like a file header and, when
 *         good, a filter of that shape is allocated into *f, in the loading state, with
 *         no memory for its tables yet. Afterwards *f is that filter and each data chunk
 *         must be the next in order.
 * cursor: the cursor cf_dump_chunk returned with this chunk.
 * allocator: used for the header chunk (NULL = malloc/free); ignored afterwards.
 * Memory and time follow what arrives: a sub-filter's table is allocated when its first
 * chunk arrives, and each chunk is checked (its tag, the slots it completes, the running
 * file checksum) at a cost proportional to its own length, the last one included. So a
 * forged header describing a huge filter costs only its own bytes until the chunks
 * themselves arrive; cf_chunk_bytes_needed tells what the whole filter will take.
 * While loading, the filter is read-only (adds and deletes return CF_EREADONLY; lookups
 * see only the sub-filters whose chunks have all arrived). After the last chunk it is
 * complete and identical to the one dumped.
 * Returns CF_OK; CF_ECORRUPT for a chunk that is damaged, foreign, out of order or not
 * the expected one, or for a last chunk that leaves a filter other than the one dumped
 * (in every case the filter is unchanged and still expects the same chunk);
 * CF_EVERSION; CF_ENOMEM; CF_EINVAL for NULL arguments or a filter that is not loading.
 * Thread safety: needs exclusive access to *f. */
CF_API cf_status cf_load_chunk(cf_filter **f, uint64_t cursor, const void *data, size_t len,
                               const cf_allocator *allocator);

/* true while a filter made by cf_load_chunk still expects chunks; false otherwise. */
CF_API bool cf_is_loading(const cf_filter *f);

/* The Redis module's prefix: 24 bytes the module puts in front of a dump's header chunk
 * (CF.SCANDUMP, CF.LOADCHUNK; docs/FORMAT.md, "In the Redis module"): the deletes since
 * the last compaction (below 2^63), MAXITERATIONS (1..CF_MAX_MAX_KICKS), then their check,
 * the filter's own hash (cf_hash) of those 16 bytes, each a little-endian u64. The check
 * ties the fields to the filter's seed, so they cannot be moved to another filter. The
 * module and the Python binding's chunks() write and read it through these calls. */
#define CF_MODULE_PREFIX_BYTES 24u

/* The check of the module's two fields for f: cf_hash of their 16 bytes. 0 if f is NULL.
 * Thread safety: a const call. */
CF_API uint64_t cf_module_fields_check(const cf_filter *f, uint64_t deletes,
                                       uint64_t max_iterations);

/* The prefix for f with these fields, into out (CF_MODULE_PREFIX_BYTES bytes).
 * Returns CF_OK; CF_EINVAL for NULL pointers or a field out of range (nothing written).
 * Thread safety: a const call. */
CF_API cf_status cf_module_prefix_write(const cf_filter *f, uint64_t deletes,
                                        uint64_t max_iterations, void *out);

/* The fields of the prefix at the start of len bytes, and its check (which the caller
 * compares with cf_module_fields_check once it has the filter: a window's seed arrives
 * with its first generation, after the header chunk).
 * Returns CF_OK; CF_ECORRUPT if len is shorter than a prefix or a field is out of range;
 * CF_EINVAL for NULL pointers. Thread safety: reentrant. */
CF_API cf_status cf_module_prefix_read(const void *data, size_t len, uint64_t *deletes,
                                       uint64_t *max_iterations, uint64_t *check);

/* ------------------------------------------------------------------------------------ */
/* RedisBloom's layout: CF_REDISBLOOM                                                   */
/* ------------------------------------------------------------------------------------ */
/* A filter made with CF_REDISBLOOM has RedisBloom's layout, for filters moved from
 * RedisBloom (Redis Stack, Redis 8) or to it: its hash and bucket mapping, so that every
 * key such a filter holds is found, and so that keys never added get the very answers
 * RedisBloom gives them. A key's hash is MurmurHash64A with seed 0 (cf_hash); its
 * fingerprint is h % 255 + 1 (8 bits, 1..255); in a sub-filter of m buckets (a power of
 * two) its buckets are h mod m and (h XOR fp * 0x5bd1e995) mod m, which may be one bucket.
 * Sub-filter k has m_0 * expansion^k buckets. Operations do what RedisBloom's do: an insert
 * takes the first free slot of the key's buckets in the newest sub-filter, then in older
 * ones, then evicts in the newest along RedisBloom's own deterministic path (at most
 * max_kicks moves, undone if they fail), then grows; a delete clears the first copy, newest
 * sub-filter first; cf_compact moves fingerprints into the oldest sub-filter with room.
 * What stays this library's: a key added 2b times over (its buckets hold nothing else) gets
 * CF_FULL instead of growth, a count sees a bucket the key's two share once, and a fixed
 * filter has no stash. Settings: fingerprint_bits 0 or 8; bucket_size 0 means 2 and
 * max_kicks 0 means 20 (RedisBloom's defaults: its eviction walk moves one fingerprint a
 * kick); seed 0 (the hash has none); expansion is rounded up to a power of two, as
 * RedisBloom does; the first sub-filter has capacity / bucket_size buckets rounded up to a
 * power of two, at least 2. Not with CF_SEMI_SORT, target_fpr or fpr_bound (CF_EINVAL);
 * sub-filters never widen. Lookups are slower than this library's own layout (no batched
 * fetches), and with CF_CONCURRENT they take the writers' lock. Files say the layout (hash
 * id 2, docs/FORMAT.md): cf_load gives it back. */

/* Raw tables. A filter of RedisBloom's layout keeps its tables exactly as RedisBloom
 * does: sub-filter k is m_k * b bytes, a byte a slot (0 empty), bucket i's slots at bytes
 * i * b .. i * b + b - 1. These calls move those bytes in and out, so that a filter can
 * travel in RedisBloom's own formats (its CF.SCANDUMP chunks and RDB values). Every byte
 * value is a valid slot, so no write can make the filter unsound; but bytes that were not
 * RedisBloom's (or this library's) own for the same keys answer for other keys. They
 * return CF_EINVAL for any other layout. Thread safety: writes need exclusive access; a
 * read is a const call. */

/* Sub-filter k's table size in bytes (m_k * b); 0 if there is no sub-filter k or f is
 * not of RedisBloom's layout. */
CF_API uint64_t cf_table_size(const cf_filter *f, unsigned k);

/* Copy len bytes of sub-filter k's table, from byte `offset`, into buf.
 * Returns CF_OK; CF_EINVAL for NULL arguments, another layout, or a range past the table. */
CF_API cf_status cf_table_read(const cf_filter *f, unsigned k, uint64_t offset, void *buf,
                               size_t len);

/* Overwrite len bytes of sub-filter k's table, from byte `offset`, with data; the
 * filter's item count follows (the non-zero bytes replaced go, the new ones count). On a
 * filter begun by cf_table_load_begin, the bytes must be the next ones it expects.
 * Returns CF_OK; CF_EINVAL for NULL arguments, another layout, a range past the table;
 * CF_ECORRUPT for bytes of a loading filter that are not the next ones (nothing changed);
 * CF_ENOMEM (nothing changed); CF_EREADONLY for a mapped filter or one loading chunks. */
CF_API cf_status cf_table_write(cf_filter *f, unsigned k, uint64_t offset, const void *data,
                                size_t len);

/* A filter of RedisBloom's layout to be filled from its raw tables as they arrive (its
 * CF.SCANDUMP chunks): the filter cf_new(config) makes, with n sub-filters as growth sizes
 * them (sub-filter k has expansion^k times the first one's buckets), and no table memory
 * yet. It is loading (cf_is_loading; read-only, and its lookups see only the sub-filters
 * whose bytes have all arrived) until cf_table_write has given it every byte of every
 * sub-filter, in order: sub-filter 0 from byte 0 to its end, then sub-filter 1, and so
 * on. Each sub-filter's memory is taken at its first bytes, so a header that claims a
 * large filter costs nothing until the bytes come; cf_table_read reads bytes that have
 * not arrived as 0 (empty slots). A loading filter takes no cf_dump_chunk.
 * Returns CF_OK; CF_EINVAL for a config without CF_REDISBLOOM or that cf_new refuses, a
 * window, CF_CONCURRENT, n = 0, n past max_sub_filters, n > 1 without expansion, or a
 * sub-filter past the size limits; CF_ENOMEM. */
CF_API cf_status cf_table_load_begin(const cf_config *config, unsigned n, cf_filter **out);

/* The bytes of the sub-filters' run (sub-filter 0's table, then 1's, ...) that a filter
 * begun by cf_table_load_begin has received; the whole run once it is complete, and for
 * any other filter of RedisBloom's layout; 0 for another layout or NULL. */
CF_API uint64_t cf_table_loaded(const cf_filter *f);

/* Append an empty sub-filter, expansion times the newest, as growth would (for a filter
 * whose saved form says it had more sub-filters than cf_new makes). Returns CF_OK;
 * CF_FULL for a fixed filter or one at max_sub_filters; CF_ENOMEM (nothing changed);
 * CF_EINVAL for NULL or another layout; CF_EREADONLY for a mapped filter. */
CF_API cf_status cf_append_sub_filter(cf_filter *f);

/* ------------------------------------------------------------------------------------ */
/* The calls that pass a struct's size, written out                                     */
/* ------------------------------------------------------------------------------------ */
/* Inline, so that the size compiled into a program is the size of the struct in the
 * header it was compiled with. */

static inline cf_status cf_new(const cf_config *config, cf_filter **out)
{
    return cf_new_sized(config, sizeof(cf_config), out);
}

static inline cf_status cf_config_resolve(const cf_config *config, cf_config *out)
{
    return cf_config_resolve_sized(config, sizeof(cf_config), out, sizeof(cf_config));
}

static inline cf_status cf_config_check(const cf_config *config, const char **reason)
{
    return cf_config_check_sized(config, sizeof(cf_config), reason);
}

static inline cf_status cf_bytes_needed(const cf_config *config, size_t *bytes)
{
    return cf_bytes_needed_sized(config, sizeof(cf_config), bytes);
}

static inline void cf_get_stats(const cf_filter *f, cf_stats *out)
{
    (void)cf_get_stats_sized(f, out, sizeof(cf_stats));
}

static inline void cf_get_config(const cf_filter *f, cf_config *out)
{
    (void)cf_get_config_sized(f, out, sizeof(cf_config));
}

static inline cf_status cf_get_generation_stats(const cf_filter *f, unsigned age, cf_stats *out)
{
    return cf_get_generation_stats_sized(f, age, out, sizeof(cf_stats));
}

#ifdef __cplusplus
}
#endif

#endif /* CUCKOOFILTER_H */
