/*
 * internal.h - what the library's files above it share: the filter struct, the tables of
 * hot ops and of kinds (and the dispatch the lower layers need), and the calls between
 * files. Which buckets a key may occupy is mapping.h's, bucket storage table.h's, hashes
 * hash.h's, the portable primitives bits.h's; src/LAYERS orders them all. Nothing here
 * is exported: the shared library is built with -fvisibility=hidden and only CF_API
 * functions are visible.
 */
#ifndef CF_INTERNAL_H
#define CF_INTERNAL_H

#include "cuckoofilter.h"
#include "hash.h"
#include "mapping.h"
#include "platform.h"
#include "table.h"

#include <pthread.h>

/* CF__HAVE_V3: the build compiled fast.c for x86-64-v3 too (CMakeLists.txt says when). */
#ifndef CF__HAVE_V3
#define CF__HAVE_V3 0
#endif

/* ------------------------------------------------------------------------------------ */
/* The filter                                                                           */
/* ------------------------------------------------------------------------------------ */

/* Where a batched lookup takes its keys from: hashes, or keys to hash. */
typedef struct cf__source {
    const uint64_t *hashes;
    const void *const *keys;
    const size_t *lens;
} cf__source;

/* The hot paths of one shape, compiled for one CPU variant (fast.c), or of a kind with
 * paths of its own (RedisBloom's layout, a window). Keyed calls take checked arguments:
 * key is not NULL unless len is 0. The hot entries come first; after them, what no hot
 * path reads: the filter's kind, and the table the entry belongs to. */
typedef struct cf__ops {
    bool (*contains)(const cf_filter *f, uint64_t h);
    bool (*contains_key)(const cf_filter *f, const void *key, size_t len);
    cf_status (*add)(cf_filter *f, uint64_t h);
    cf_status (*add_key)(cf_filter *f, const void *key, size_t len);
    cf_status (*del)(cf_filter *f, uint64_t h);
    cf_status (*del_key)(cf_filter *f, const void *key, size_t len);
    void (*contains_many)(const cf_filter *f, const cf__source *src, size_t n, bool *out);
    size_t (*add_many)(cf_filter *f, const uint64_t *hashes, size_t n, unsigned flags,
                       cf_status *status);
    const struct cf__kind *kind;
    const struct cf__ops *table; /* entry [0][0] of its variant's table; NULL for a kind of
                                    one entry */
} cf__ops;

/* Each variant's operations, indexed by [row][cf__code_of(shape)]: row CF__ROW_SIMPLE for
 * a plain filter of one sub-filter and an empty stash, whose lookups and deletes touch two
 * buckets and nothing else, CF__ROW_GENERAL for any other plain filter (grown, stashed,
 * loading). A plain filter's `ops` follows its state (cf__pick_ops), so the hot paths
 * never test it. A concurrent filter has the operations of row CF__ROW_CONCURRENT in
 * every state: lookups that check it themselves, writers that take the lock. */
enum cf__row { CF__ROW_GENERAL = 0, CF__ROW_SIMPLE, CF__ROW_CONCURRENT, CF__ROWS };
typedef const cf__ops cf__ops_table[CF__ROWS][CF__CODES];
CF__HIDDEN extern cf__ops_table cf__ops_base;
CF__HIDDEN extern cf__ops_table cf__ops_base_seg; /* of segmented tables (fast.c) */
/* The same for hash id 3 (CF_FAST_HASH): only the keyed calls differ. */
CF__HIDDEN extern cf__ops_table cf__ops_base_ms;
CF__HIDDEN extern cf__ops_table cf__ops_base_seg_ms;
#if CF__HAVE_V3
CF__HIDDEN extern cf__ops_table cf__ops_v3;
CF__HIDDEN extern cf__ops_table cf__ops_v3_seg;
CF__HIDDEN extern cf__ops_table cf__ops_v3_ms;
CF__HIDDEN extern cf__ops_table cf__ops_v3_seg_ms;
#endif

/* The entry of row `row` and code `code` in the table of entry o (o->table not NULL). */
static inline const cf__ops *cf__ops_at(const cf__ops *o, enum cf__row row, enum cf__code code)
{
    return o->table + (size_t)row * CF__CODES + code;
}

/* The slow paths the per-shape code falls back to (slow.c; evict.c for inserts): a lookup in every
 * sub-filter and the stash; an insert whose buckets n1 and n2 in the newest sub-filter are full; a
 * delete from any sub-filter or the stash. */
CF__HIDDEN bool cf__contains_all(const cf_filter *f, uint64_t h);
CF__HIDDEN cf_status cf__insert_rest_h(cf_filter *f, uint64_t h, uint64_t n1, uint64_t n2);
/* The whole insert of key h for a filter of any shape and state: its newest sub-filter's
 * two buckets, then cf__insert_rest_h. */
CF__HIDDEN cf_status cf__insert_any(cf_filter *f, uint64_t h);
CF__HIDDEN cf_status cf__delete_all(cf_filter *f, uint64_t h);
/* The copies of key h in every sub-filter and the stash, as cf_count_hash counts them. */
CF__HIDDEN uint64_t cf__count_all(const cf_filter *f, uint64_t h);

/* Merging (merge.c; slow.c): put fingerprint fp, which sits in bucket x of sub-filter
 * `from` of another filter with f's seed and first size, into f as an insert would: a
 * free slot of its pair in a sub-filter that can hold it (cf__takes), then an eviction,
 * growth, the stash (a concurrent filter's lock held). CF_OK; CF_FULL or CF_ENOMEM
 * with f as it was. Not for windowed or RedisBloom-layout filters. */
CF__HIDDEN cf_status cf__place_fp(cf_filter *f, const cf__table *from, uint64_t x, uint32_t fp);
/* A filter of f's contents, not concurrent, made with f's allocator (persist.c); the
 * caller holds f still (a concurrent f's lock). */
CF__HIDDEN cf_status cf__copy_plain(const cf_filter *f, cf_filter **out);
/* Every allocation f needs to become a filter of `ntables` sub-filters (as many as it has
 * or more) and `stash_n` stash entries, made now, so that the inserts that take it there
 * (those a trial on a copy of f made) allocate nothing: the stash, the wider shapes, a
 * sub-filter array with room for them all, and the blocks of the sub-filters it will
 * append (in f's layout, concurrent or not). CF_OK; CF_ENOMEM with f's contents as they
 * were. cf__reserve_drop frees what was not used. */
CF__HIDDEN cf_status cf__reserve_like(cf_filter *f, unsigned ntables, unsigned stash_n);
CF__HIDDEN void cf__reserve_drop(cf_filter *f);
/* Drop f's sub-filters from the n-th on (n >= 1) with what only they needed, as a copy of
 * the rest would hold, and its stash entries from the stash_n-th on. */
CF__HIDDEN void cf__truncate(cf_filter *f, unsigned n, unsigned stash_n);

/* One node of the breadth-first search for an eviction path (evict.c). */
#define CF__ROOT UINT32_MAX /* parent of the two root nodes */
typedef struct cf__node {
    uint64_t bucket;
    uint32_t parent; /* index of the node whose slot `slot` moves here; CF__ROOT for roots */
    uint32_t slot;
} cf__node;

/* Fingerprints that found no slot in a filter that cannot grow. An entry is an extra slot
 * of its key's bucket pair in sub-filter `table`: lookups, counts and deletes see it
 * there. It makes a fixed-size filter hold its capacity even when a small table or a
 * 2-choice (b = 1) table happens to overflow, which random keys do now and then. */
#define CF__STASH_SLOTS CF_STASH_SLOTS

typedef struct cf__stash {
    uint64_t bucket; /* either bucket of the pair */
    uint32_t fp;
    uint32_t table;
} cf__stash;

/* An entry of that search's visited-bucket set: the bucket number folded to 32 bits
 * (exact below 2^32 buckets; beyond, two buckets may share a tag and the second is then
 * skipped: a search a little less thorough, still deterministic, never a wrong move) and
 * the generation of the search that set it, so that the set clears by bumping it. */
typedef struct cf__mark {
    uint32_t tag;
    uint32_t gen;
} cf__mark;

/* The largest bucket size of a fast shape (table.h, CF__FAST_SHAPES), and the largest
 * first and second levels of an eviction search: 2b and 2b b buckets. */
#define CF__FAST_B_MAX 8u
#define CF__LEVEL1_MAX (2u * CF__FAST_B_MAX)
#define CF__LEVEL2_MAX (CF__LEVEL1_MAX * CF__FAST_B_MAX)

/* What the per-shape insert's one- and two-move evictions examined (fast shapes, a lone
 * unsynchronized sub-filter), none of it with a free slot: the first level's 2b buckets,
 * i1's residents' then i2's in slot order, and when `levels` is 2 the second level's 2b b,
 * the first level's buckets' residents' in the same order. The search goes on from there. */
typedef struct cf__seen {
    uint64_t level1[CF__LEVEL1_MAX];
    uint64_t level2[CF__LEVEL2_MAX];
    unsigned levels;
} cf__seen;

/* cf__insert_rest_h after the per-shape insert's own evictions (one to three moves) found
 * no path; `seen` holds what the first two levels examined (evict.c). */
CF__HIDDEN cf_status cf__insert_rest_seen_h(cf_filter *f, uint64_t h, uint64_t n1, uint64_t n2,
                                            const cf__seen *seen);

/* The working memory of one eviction search. */
typedef struct cf__search {
    cf__node *queue;
    cf__mark *marks; /* 2^(64 - shift) entries, >= 2 * cap; NULL: scan the queue instead */
    uint32_t cap;    /* nodes the queue holds: the search's budget */
    unsigned shift;  /* the visited set's hash takes the top 64 - shift bits */
    uint32_t gen;
    uint32_t n;    /* nodes queued so far */
    uint32_t end;  /* a planning search's result: the node at the path's free end */
    unsigned free; /* and its free slot */
    /* NULL, or the levels the insert's one- and two-move examined, which hold no free
     * slot: the search queues them without looking again */
    const cf__seen *seen;
} cf__search;

/* Nodes of a planning search's memory (evict.h, cf__plan). */
#define CF__PLAN_NODES 512u /* the default budget (CF_DEFAULT_MAX_KICKS + 2) and more */

/* A filter loading chunk by chunk (cf_load_chunk): the file position of the next chunk,
 * the hash of the 64-byte header that each chunk's tag is bound to, and the whole file's
 * checksum that the loaded filter must reproduce. While loading, the filter's `ntables`
 * counts the sub-filters whose every chunk is in (lookups see only those) and `ntables`
 * here the sub-filters the header describes; a table gets its memory when its first chunk
 * arrives, so a forged header holds nothing it did not send. Each chunk is checked as it
 * arrives, at a cost bounded by its own size: `items` counts the occupied slots of the
 * first `bucket` buckets of the table being filled, and an XXH3 state that follows this
 * struct in its allocation (persist.c) carries the file sum over the bytes received so
 * far. Allocated with the header chunk, freed with the last chunk: a filter that is not
 * loading carries none of it. */
typedef struct cf__loading {
    uint64_t pos;
    uint64_t header_sum;
    uint64_t file_sum;
    uint64_t items;
    uint64_t bucket;
    unsigned ntables;
    /* Loading RedisBloom's raw tables by cf_table_write (redisbloom.c), not chunks: pos is
     * then the next byte of table `table`, the first one not complete. */
    bool raw;
    unsigned table;
} cf__loading;

/* What a filter holds beyond its first sub-filter and its settings, allocated the first
 * time one of these is needed (cf__more_of) and freed with the filter or as soon as it
 * holds none of them again (cf__more_trim): most small filters (a Redis key each) never
 * carry it. */
typedef struct cf__more {
    /* The sub-filter array, once the filter (or the file it loads) has two or more, in one
     * block with the growth of each, right after the tables_cap entries (see
     * cf__grown_of); else NULL. It doubles as the filter grows, and a loaded or compacted
     * filter gets the size growth would have given it, so that a copy holds exactly what
     * its original holds. */
    cf__table *tables;
    unsigned tables_cap;
    /* Widening filters: the shape of ext extra bits at [ext - 1], up to 32 bits; allocated
     * with the first wider sub-filter. */
    cf__shape *wide_shapes;
    cf__stash *stash; /* CF__STASH_SLOTS entries while any is in use, else NULL */
    /* Search memory with a visited set that clears by generation (see cf__evict), made
     * on the first search that needs it in a table large enough to afford it (a filter
     * whose budget is too big for the stack has it in its head instead). */
    cf__search *search;
    /* Memory-mapped (cf_open_mapped): the mapping, which the tables point into. */
    void *map;
    size_t map_len;
    cf__loading *load; /* loading chunk by chunk (cf_load_chunk), else NULL: see cf__loading */
    struct cf__cc *cc; /* CF_CONCURRENT: the writers' lock and what readers check (concurrent.c) */
    struct cf__window *window; /* a windowed filter's generations (window.c) */
    struct cf__spare *spare;   /* blocks a merge reserved for the sub-filters it appends
                                  (cf__reserve_like), else NULL */
} cf__more;

/* The tables' blocks of sub-filters first .. first + n - 1, allocated before they are
 * appended (cf__table_append takes each, NULL once taken). */
typedef struct cf__spare {
    unsigned first, n;
    uint8_t *block[];
} cf__spare;

/* cf_filter.bits */
#define CF__B_FAST_HASH 1u /* CF_FAST_HASH: hash id 3's words (cf__ms) follow the struct */
#define CF__B_OWN_ALLOC 2u /* then a copy of a caller's allocator */
#define CF__B_OWN_SHAPE                                                                            \
    4u /* then a copy of its shape (b > CF__STATIC_SHAPE_B, concurrent, segmented) */
#define CF__B_OWN_SEARCH 8u   /* then search memory: its budget is too big for the stack */
#define CF__B_READ_ONLY  16u  /* mapped or loading (more->map, more->load) */
#define CF__B_CONCURRENT 32u  /* CF_CONCURRENT: more->cc, stripes after each table */
#define CF__B_REDISBLOOM 64u  /* CF_REDISBLOOM: RedisBloom's hash and mapping (redisbloom.c) */
#define CF__B_WINDOW     128u /* windowed: more->window holds the generations (window.c) */

/* A filter: 96 bytes (its fixed overhead with a shape of b <= 8 and the default allocator;
 * CF_FAST_HASH adds 32, a caller's allocator 24, a larger shape 48), then the tables. The head
 * block holds the struct and, after it, what the bits say, in that order. */
struct cf_filter {
    const cf__ops *ops; /* the hot paths for this shape, state and CPU */
    cf__table *tables;  /* oldest first: &t0 while the filter has one sub-filter, else the
                           array in `more`; tables[ntables - 1] is the newest */
    uint64_t k8;        /* the seed, kept as the 8-byte hash's bitflip (cf__k8_of) */
    cf__table t0;       /* the first sub-filter while it is the only one */
    uint64_t capacity;  /* as configured; kept for cf_get_config and the file */
    cf__more *more;
    uint32_t ntables;
    uint16_t max_kicks;
    uint16_t expansion;
    uint16_t widen;      /* see cf__params */
    uint16_t last_table; /* max_sub_filters - 1 */
    uint8_t stash_n;
    uint8_t fp_bits; /* the first sub-filter's fingerprint width (the key's bits) */
    uint8_t bits;    /* CF__B_* */
};

/* Hash id 3's words, first after the struct: a fixed offset for the keyed hot paths. */
static inline const cf__ms *cf__ms_of(const cf_filter *f)
{
    return (const cf__ms *)(const void *)(f + 1);
}

/* The offset in a filter's head block of what bit `which` (CF__B_FAST_HASH, CF__B_OWN_*)
 * says follows the struct, for a head with `bits`: after the struct and what the lower
 * bits add. */
static inline size_t cf__head_at(unsigned bits, unsigned which)
{
    size_t at = sizeof(cf_filter);
    if (which > CF__B_FAST_HASH && (bits & CF__B_FAST_HASH))
        at += sizeof(cf__ms);
    if (which > CF__B_OWN_ALLOC && (bits & CF__B_OWN_ALLOC))
        at += sizeof(cf_allocator);
    if (which > CF__B_OWN_SHAPE && (bits & CF__B_OWN_SHAPE))
        at += sizeof(cf__shape);
    return at;
}

static inline const cf_allocator *cf__alloc_of(const cf_filter *f)
{
    return (f->bits & CF__B_OWN_ALLOC)
               ? (const cf_allocator *)(const void *)((const uint8_t *)f +
                                                      cf__head_at(f->bits, CF__B_OWN_ALLOC))
               : &cf__default_allocator;
}

static inline void *cf__malloc(const cf_filter *f, size_t size)
{
    const cf_allocator *a = cf__alloc_of(f);
    return a->alloc(a->ctx, size);
}

static inline void cf__mfree(const cf_filter *f, void *p)
{
    const cf_allocator *a = cf__alloc_of(f);
    a->free(a->ctx, p);
}

/* The first sub-filter's shape: every other sub-filter's but for its width. */
static inline const cf__shape *cf__shape0(const cf_filter *f)
{
    return f->tables[0].shape;
}

static inline uint64_t cf__seed(const cf_filter *f)
{
    return cf__seed_of(f->k8);
}

static inline unsigned cf__max_tables(const cf_filter *f)
{
    return f->last_table + 1u;
}

/* f's `more`, allocated if it has none yet (head.c); NULL if that fails. */
CF__HIDDEN cf__more *cf__more_of(cf_filter *f);
/* Free f's `more` if it holds nothing (head.c). */
CF__HIDDEN void cf__more_trim(cf_filter *f);

static inline cf__stash *cf__stash_of(const cf_filter *f)
{
    return f->more ? f->more->stash : NULL;
}

static inline cf__loading *cf__load_of(const cf_filter *f)
{
    return f->more ? f->more->load : NULL;
}

/* The sub-filters a filter's file describes: all of them, also while it is still loading. */
static inline unsigned cf__ntables_all(const cf_filter *f)
{
    const cf__loading *load = cf__load_of(f);
    return load ? load->ntables : f->ntables;
}

/* The state whose lookups touch two buckets and nothing else: one complete sub-filter and
 * an empty stash. */
static inline bool cf__is_simple(const cf_filter *f)
{
    return f->ntables == 1 && f->stash_n == 0;
}

/* ------------------------------------------------------------------------------------ */
/* Concurrent filters (CF_CONCURRENT, concurrent.c)                                     */
/* ------------------------------------------------------------------------------------ */

static inline bool cf__is_cc(const cf_filter *f)
{
    return (f->bits & CF__B_CONCURRENT) != 0;
}

/* The lookup of concurrent filters in any state (concurrent.c). fast.c has the lookups,
 * single and batched, and the writers for each shape (concurrent.h). */
CF__HIDDEN bool cf__cc_contains(const cf_filter *f, uint64_t h);

/* The shared state of a concurrent filter, made with it; NULL if the allocation fails.
 * cf__cc_ready completes it once the first sub-filter has its memory. */
CF__HIDDEN struct cf__cc *cf__cc_new(cf_filter *f);
CF__HIDDEN void cf__cc_ready(cf_filter *f);
/* Free it, and the sub-filter arrays that growth replaced while readers might hold them. */
CF__HIDDEN void cf__cc_free(cf_filter *f, struct cf__cc *cc);
/* Keep a replaced sub-filter array until the filter is freed (or compacted, which needs
 * exclusive access: cf__cc_free_retired); false if there is no room (the caller then
 * keeps the old array and fails). */
CF__HIDDEN bool cf__cc_retire(cf_filter *f, void *array);
CF__HIDDEN void cf__cc_free_retired(cf_filter *f);

/* What a concurrent filter whose first sub-filter has `buckets` of shape s holds besides a
 * plain one's head, its `more` and sub-filter array, and its tables' blocks: its shared
 * state (with its planning memory) and stash. */
CF__HIDDEN size_t cf__cc_fixed_bytes(const cf__shape *s, uint64_t buckets);

/* The writers' lock: every call that changes a concurrent filter holds it, but the
 * writers of stripes of the simple state (locked.c), from whom it holds every stripe. */
CF__HIDDEN void cf__cc_lock(const cf_filter *f);
CF__HIDDEN void cf__cc_unlock(const cf_filter *f);

/* A concurrent filter's `meta` section (see cf__state_begin, its one caller). */
CF__HIDDEN void cf__cc_meta_begin(cf_filter *f);
CF__HIDDEN void cf__cc_meta_end(cf_filter *f);

/* The copies of key h a concurrent filter holds, as cf_count_hash counts them. */
CF__HIDDEN uint64_t cf__cc_count(const cf_filter *f, uint64_t h);

/* ------------------------------------------------------------------------------------ */
/* Changes of state                                                                     */
/* ------------------------------------------------------------------------------------ */
/* Every change to what lookups find outside the tables (the sub-filter count and array,
 * the stash) happens between cf__state_begin and cf__state_end (head.c). The pair is
 * where a filter's kind matters: a concurrent filter's readers learn of the change from
 * its `meta` counter, and every filter's operations follow its new state (cf__pick_ops).
 * The fields it changes are stored through the calls below, as atomics of their size for
 * every filter (a plain store where the processor needs no more), so that the writers
 * need not know whether lookups run beside them. */
CF__HIDDEN void cf__state_begin(cf_filter *f);
CF__HIDDEN void cf__state_end(cf_filter *f);

_Static_assert(sizeof(_Atomic uint64_t) == sizeof(uint64_t) &&
                   sizeof(_Atomic uint32_t) == sizeof(uint32_t) &&
                   sizeof(_Atomic uint8_t) == sizeof(uint8_t) &&
                   sizeof(_Atomic(cf__table *)) == sizeof(cf__table *),
               "the state's fields are stored as atomics of the same size");

/* The sub-filter array and count (release: the array's entries, and the tables they
 * describe, are complete before a reader can see them). */
static inline void cf__publish_tables(cf_filter *f, cf__table *tables)
{
    atomic_store_explicit((_Atomic(cf__table *) *)(void *)&f->tables, tables, memory_order_release);
}

static inline void cf__publish_ntables(cf_filter *f, unsigned n)
{
    atomic_store_explicit((_Atomic uint32_t *)(void *)&f->ntables, n, memory_order_release);
}

/* The sub-filter count as a reader beside the writers reads it (acquire, to pair with
 * cf__publish_ntables). */
static inline unsigned cf__ntables_now(const cf_filter *f)
{
    return atomic_load_explicit((_Atomic uint32_t *)(void *)(uintptr_t)&f->ntables,
                                memory_order_acquire);
}

/* Stash entry e, and the stash's count. */
static inline void cf__stash_store(cf_filter *f, unsigned e, const cf__stash *x)
{
    cf__stash *to = &f->more->stash[e];
    atomic_store_explicit((_Atomic uint64_t *)(void *)&to->bucket, x->bucket, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint32_t *)(void *)&to->fp, x->fp, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint32_t *)(void *)&to->table, x->table, memory_order_relaxed);
}

static inline void cf__stash_count(cf_filter *f, unsigned n)
{
    atomic_store_explicit((_Atomic uint8_t *)(void *)&f->stash_n, (uint8_t)n, memory_order_relaxed);
}

/* ------------------------------------------------------------------------------------ */
/* RedisBloom's layout (CF_REDISBLOOM, redisbloom.c)                                     */
/* ------------------------------------------------------------------------------------ */

static inline bool cf__is_rb(const cf_filter *f)
{
    return (f->bits & CF__B_REDISBLOOM) != 0;
}

/* The layout's fingerprint width, and its defaults for the bucket size and the eviction
 * budget (RedisBloom's, whose eviction walk moves one fingerprint per kick). */
#define CF__RB_FP_BITS 8u
#define CF__RB_BUCKET  2u
#define CF__RB_KICKS   20u

/* The first ops of a filter of the layout, without and with CF_CONCURRENT (every call
 * under the writers' lock): its kind's. */
CF__HIDDEN const cf__ops *cf__rb_ops_for(bool concurrent);
/* Make f (of the layout, n sub-filters, no table memory: cf_table_load_begin) a filter
 * that loads its raw tables by cf_table_write; CF_ENOMEM with f as it was. */
CF__HIDDEN cf_status cf__rb_raw_begin(cf_filter *f, unsigned n);

/* ------------------------------------------------------------------------------------ */
/* Windowed filters (cf_config.generations, window.c)                                   */
/* ------------------------------------------------------------------------------------ */
/* A windowed filter is a head (the seed, the first generation's settings, no tables of
 * its own) whose `more` holds a ring of generations (struct cf__window, window.c's own),
 * each a filter of its own. Every call on a filter's contents goes through its kind; the
 * window's own calls (api.c) ask cf__is_window first. */

static inline bool cf__is_window(const cf_filter *f)
{
    return (f->bits & CF__B_WINDOW) != 0;
}

/* ------------------------------------------------------------------------------------ */
/* Kinds                                                                                */
/* ------------------------------------------------------------------------------------ */
/* A filter's kind is fixed when it is made or loaded, by the ops it starts with
 * (cf__filter_make): plain and plain concurrent (plain.c), RedisBloom's layout without and
 * with CF_CONCURRENT (redisbloom.c), windowed (window.c). Its hot calls go through
 * f->ops; its cold calls, those in which kinds differ, through the kind's table,
 * f->ops->kind. A NULL entry means the plain filter's: the dispatch below, and plain.h's
 * for the calls above the kinds, calls that. DESIGN.md, "Adding a kind", lists what a new
 * kind touches. */
typedef struct cf__kind {
    const char *name;
    unsigned flags; /* the CF_* flags cf_get_config reports for the kind */
    bool composite; /* a head whose parts hold the tables (none of its own) */
    /* CF_CONCURRENT's writers take turns under the lock, never beside each other in
     * stripes, whatever the shape (the kind's inserts have no planner). */
    bool serial_writers;
    const char *no_merge; /* why cf_merge refuses the kind, or NULL: it merges */
    /* Free the filter and what the kind holds beyond the plain object (cf_free). */
    void (*release)(cf_filter *f);
    void (*clear)(cf_filter *f);
    cf_status (*compact)(cf_filter *f);
    uint64_t (*count)(const cf_filter *f, uint64_t h);
    uint64_t (*hash)(const cf_filter *f, const void *key, size_t len);
    void (*stats)(const cf_filter *f, cf_stats *out);
    void (*config)(const cf_filter *f, cf_config *out);
    /* Hold the writers still, for a call that reads or changes the whole filter; NULL:
     * nothing to hold (a plain filter's callers give such calls exclusive access). */
    void (*hold)(const cf_filter *f);
    void (*unhold)(const cf_filter *f);
    /* Around a change of state (cf__state_begin, cf__state_end); NULL: nothing. */
    void (*state_begin)(cf_filter *f);
    void (*state_end)(cf_filter *f);
    /* The ops f's state takes; NULL: the plain filter's (cf__plain_pick). */
    const cf__ops *(*pick)(const cf_filter *f);
    /* Its file format (image.h); NULL: one image (image.c). */
    const struct cf__codec *codec;
} cf__kind;

/* The plain kinds (plain.c): fast.c's tables point at them. */
CF__HIDDEN extern const cf__kind cf__kind_plain, cf__kind_plain_cc;

static inline const cf__kind *cf__kind_of(const cf_filter *f)
{
    return f->ops->kind;
}

static inline void cf__hold(const cf_filter *f)
{
    const cf__kind *k = cf__kind_of(f);
    if (k->hold)
        k->hold(f);
}

static inline void cf__unhold(const cf_filter *f)
{
    const cf__kind *k = cf__kind_of(f);
    if (k->unhold)
        k->unhold(f);
}

/* The pick of a kind of one entry of ops, whatever the state. */
static inline const cf__ops *cf__ops_stay(const cf_filter *f)
{
    return f->ops;
}

/* A plain filter's ops for its state: those of its newest sub-filter's shape, where
 * inserts go (lookups of the general state go through every sub-filter, each with its
 * own); the simple state's read the struct's own sub-filter (f->t0), saving the load of
 * f->tables, so the one sub-filter must be there. */
static inline const cf__ops *cf__plain_pick(const cf_filter *f)
{
    const cf__shape *s = f->tables[f->ntables ? f->ntables - 1 : 0].shape;
    bool simple = cf__is_simple(f) && f->tables == &f->t0;
    return cf__ops_at(f->ops, simple ? CF__ROW_SIMPLE : CF__ROW_GENERAL, cf__code_of(s));
}

/* Point f->ops at the operations for f's state: whenever the number of complete
 * sub-filters or of stash entries changes (cf__state_end). Stored only if they differ: a
 * concurrent filter's readers load them with no ordering (and its never change). */
static inline void cf__pick_ops(cf_filter *f)
{
    const cf__kind *k = cf__kind_of(f);
    const cf__ops *to = k->pick ? k->pick(f) : cf__plain_pick(f);
    if (f->ops != to)
        f->ops = to;
}

/* The filter's hash of an 8-byte key: XXH3-64 with its seed, or hash id 3's. For the
 * calls beside the per-shape keyed ones, which each table of fast.c has for its hash. */
static CF__INLINE uint64_t cf__hash8(const cf_filter *f, const void *key)
{
    if (f->bits & CF__B_FAST_HASH)
        return cf__ms8(key, cf__ms_of(f));
    return cf__xxh3_8(key, f->k8);
}

/* The filter's hash of a key (XXH3-64 with its seed, but for 8-byte keys under hash id 3):
 * 8- and 16-byte keys inline, others out of line. */
static CF__INLINE uint64_t cf__hash_key(const cf_filter *f, const void *key, size_t len)
{
    if (CF__LIKELY(len == 8))
        return cf__hash8(f, key);
    if (len == 16)
        return cf__xxh3_16(key, f->k8);
    return cf__hash_any(cf__seed(f), key, len);
}

/* Mapped and loading filters take no adds, deletes or clears. */
static inline bool cf__read_only(const cf_filter *f)
{
    return (f->bits & CF__B_READ_ONLY) != 0;
}

/* Settings shared by every sub-filter: a config with its defaults applied, or a file's
 * header, checked. */
typedef struct cf__params {
    cf__shape shape;
    uint64_t capacity, seed;
    unsigned max_kicks, expansion, max_tables;
    unsigned widen;  /* extra fingerprint bits per sub-filter, in 1/256 bits (0: same width) */
    bool concurrent; /* CF_CONCURRENT (never from a file) */
    bool redisbloom; /* CF_REDISBLOOM (a file's hash id 2) */
    bool fast_hash;  /* CF_FAST_HASH (a file's hash id 3) */
} cf__params;

/* Settings (config.c). */
/* The end of the last field of each struct this library knows: a caller's struct may be
 * larger (a later header's), and then the bytes past these must be 0. */
#define CF__CONFIG_END (offsetof(cf_config, window) + sizeof(uint64_t))

#define CF__STATS_END (offsetof(cf_stats, generations_used) + sizeof(unsigned))

_Static_assert(CF__CONFIG_END == sizeof(cf_config),
               "a field appended to cf_config: move CF__CONFIG_END");

_Static_assert(CF__STATS_END == sizeof(cf_stats),
               "a field appended to cf_stats: move CF__STATS_END");

/* A caller's config of `size` bytes copied into *c (the fields it lacks read 0, their
 * defaults; bytes past the fields this library knows must be 0, since ignoring a field the
 * caller set would give a filter other than the one asked for), resolved into *p and
 * sized: the first sub-filter's buckets and table bytes. CF_EINVAL with *why (if not NULL)
 * the reason. What cf_new, cf_bytes_needed and cf_config_resolve start from. */
CF__HIDDEN cf_status cf__config_sized(const cf_config *config, size_t size, cf_config *c,
                                      cf__params *p, uint64_t *buckets, size_t *table_bytes,
                                      const char **why);
/* cf_expected_fpr; log(1 - p) of f-bit fingerprints (see cf__expected_fpr); the rate of
 * `tables` sub-filters at full load that widen by `widen` (cf_stats.fpr_bound). */
CF__HIDDEN double cf__expected_fpr(unsigned fingerprint_bits, unsigned bucket_size, double loads);
CF__HIDDEN double cf__log_miss(unsigned f);
CF__HIDDEN double cf__fpr_bound(unsigned f, unsigned b, unsigned widen, unsigned tables);

/* Fingerprint bits that sub-filter k adds to the first's f: ceil(k * widen / 256), up to
 * 32 bits in all. */
static inline unsigned cf__ext_of(unsigned f, unsigned widen, unsigned k)
{
    uint64_t ext = ((uint64_t)k * widen + 255u) / 256u;
    return ext < 32u - f ? (unsigned)ext : 32u - f;
}

/* A filter with `ntables` sub-filters, the first of buckets0 buckets, each next one
 * `expansion` times larger, all empty. Without with_data, the tables get no memory (data
 * NULL) and the caller points them somewhere. Every size must have been checked. `ops`
 * is an entry of the kind's ops (cpu.c's cf__first_ops chooses; a window's head its own): the
 * filter then takes those of its state (cf__pick_ops). */
CF__HIDDEN cf_status cf__filter_make(const cf__params *p, const cf_allocator *a, unsigned ntables,
                                     uint64_t buckets0, bool with_data, const cf__ops *ops,
                                     cf_filter **out);

/* The ops a filter of settings p starts with, for cf__filter_make (cpu.c): those of the
 * kind p describes (RedisBloom's layout or a plain kind, concurrent or not) in the variant
 * this CPU runs. */
CF__HIDDEN const cf__ops *cf__first_ops(const cf__params *p);

/* The bytes of a filter with `ntables` sub-filters besides its tables, made with
 * allocator a (NULL: the default): the head (the struct and what follows it), `more`
 * and the sub-filter array, as cf__filter_make allocates them. */
CF__HIDDEN size_t cf__fixed_bytes(const cf__params *p, const cf_allocator *a, unsigned ntables);
/* The bytes cf_new takes for a filter of settings p whose first sub-filter has `buckets`
 * buckets in `table_bytes` (head.c); CF_EINVAL past SIZE_MAX. */
CF__HIDDEN cf_status cf__bytes_of(const cf__params *p, const cf_allocator *a, uint64_t buckets,
                                  size_t table_bytes, size_t *bytes);

/* Room for a full stash in f's `more` (false if an allocation fails: nothing changed). */
CF__HIDDEN bool cf__stash_room(cf_filter *f);

/* NULL (the default) or an allocator with both functions set. */
static inline bool cf__allocator_ok(const cf_allocator *a)
{
    return !a || (a->alloc && a->free);
}

/* Windowed filters (window.c) */
/* cf_new and cf_bytes_needed for a config with generations (c resolved into p). */
CF__HIDDEN cf_status cf__window_new(const cf_config *c, const cf__params *p, cf_filter **out);
CF__HIDDEN cf_status cf__window_bytes(const cf_config *c, const cf__params *p, size_t *bytes);
/* The windowed file format (image.h, "cf__codec"): persist.c's for a windowed file's
 * bytes, whose header names no kind. */
CF__HIDDEN extern const struct cf__codec cf__window_codec;
/* The window's own calls (the public ones in api.c): an advance by one generation or to
 * `generation` (to); the generation of time `now`; lookups, counts and batched lookups as
 * at a generation; the stats of the generation `age` advances old (there: CF_EINVAL past
 * the oldest, or for one a loading window has not received). */
CF__HIDDEN cf_status cf__window_step(cf_filter *f, bool to, uint64_t generation);
CF__HIDDEN uint64_t cf__window_generation_at(const cf_filter *f, uint64_t now);
CF__HIDDEN bool cf__window_contains_at(const cf_filter *f, uint64_t h, uint64_t generation);
CF__HIDDEN uint64_t cf__window_count_at(const cf_filter *f, uint64_t h, uint64_t generation);
CF__HIDDEN void cf__window_many_at(const cf_filter *f, const cf__source *src, size_t n,
                                   uint64_t generation, bool *out);
CF__HIDDEN cf_status cf__window_gen_stats(const cf_filter *f, unsigned age, cf_stats *out);

/* ------------------------------------------------------------------------------------ */
/* The object (head.c)                                                                  */
/* ------------------------------------------------------------------------------------ */
/* Eviction searches of up to this many nodes can run in memory on the stack (16 KB), so a
 * filter with the default budget (500 kicks) needs no search memory of its own: many
 * small filters (one per key in Redis) stay small. Larger budgets get a block with the
 * filter. */
#define CF__STACK_NODES 512u

/* Free what the filter holds: the first `ntables` tables that have data (unless mapped),
 * `more` and what it points to, the head. */
CF__HIDDEN void cf__filter_free(cf_filter *f, unsigned ntables);

/* log2 of the visited-set entries for a search of `nodes` nodes: at least twice as many. */
CF__HIDDEN unsigned cf__mark_bits(size_t nodes);

/* f's search memory: its head's, or one made later in `more`; NULL if it has none. */
static inline cf__search *cf__search_of(cf_filter *f)
{
    if (f->bits & CF__B_OWN_SEARCH)
        return (cf__search *)(void *)((uint8_t *)f + cf__head_at(f->bits, CF__B_OWN_SEARCH));
    return f->more ? f->more->search : NULL;
}

/* Give f search memory of its own for `budget` nodes, in a block of its own; NULL if
 * the allocation failed (the search then runs on the stack, as before). */
CF__HIDDEN cf__search *cf__own_search(cf_filter *f, uint32_t budget);

/* The search memory of its own that an eviction in f's first table may take, made now if
 * it will be wanted (evict.c): false if it could not be. A filter that threads write
 * through then allocates nothing on them. */
CF__HIDDEN bool cf__search_ready(cf_filter *f);

/* A new stash entry, in a stash with room; stash entry e dropped (the stash's memory goes
 * with its last entry, but a concurrent filter's, which readers may be reading). */
CF__HIDDEN void cf__stash_push(cf_filter *f, cf__stash x);
CF__HIDDEN void cf__stash_remove(cf_filter *f, unsigned e);
/* An empty stash's memory goes (but a concurrent filter's, which readers may be reading:
 * it has its stash from the start). Inside a change of state. */
CF__HIDDEN void cf__stash_release(cf_filter *f);

/* Growth (head.c), for every kind: a new, empty sub-filter `expansion` times the newest,
 * at tables[ntables] but not yet counted (CF_FULL at the limit, CF_ENOMEM with nothing
 * changed); then, once the caller has put its key there, the count that publishes it. */
CF__HIDDEN cf_status cf__table_append(cf_filter *f, cf__table **out);
CF__HIDDEN void cf__table_publish(cf_filter *f);

#endif /* CF_INTERNAL_H */
