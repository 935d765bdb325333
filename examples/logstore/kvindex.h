/*
 * kvindex.h - the store's in-memory index: a cuckoo hash table of (tag, offset) slots.
 *
 *   bucket i (32 bytes, half a cache line):
 *   +------------------+------------------+------------------+------------------+
 *   | tag:16 | off:48  | tag:16 | off:48  | tag:16 | off:48  | tag:16 | off:48  |
 *   +------------------+------------------+------------------+------------------+
 *   a slot is one uint64_t, tag << 48 | offset; 0 is an empty slot (tags are never 0)
 *
 * A key with hash h lives in one of the two buckets cf_place_hash gives, with the tag it
 * gives: the library's own mapping, so an entry moves to cf_alt_bucket(bucket, tag)
 * without its key. The index never holds keys: where a tag matches, it asks the log
 * (kv_index_io) whether the record at that offset holds the key. Keys are distinct: the
 * store updates an entry's offset rather than inserting a key twice.
 */
#ifndef KVINDEX_H
#define KVINDEX_H

#include "kvstore.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KV_INDEX_SLOTS 4u  /* per bucket: two choices of 4 slots reach 95 % load */
#define KV_TAG_BITS    16u /* a lookup meets a foreign tag with odds 8 / 2^16: few log reads */
#define KV_OFFSET_BITS 48u /* with the tag, one 64-bit slot (KV_MAX_LOG_BYTES follows) */

/* The log, as the index sees it. */
typedef struct kv_index_io {
    /* Does the record at `offset` hold `key`? KV_OK yes, KV_NOT_FOUND no, else an error. */
    kv_status (*key_is)(void *ctx, uint64_t offset, const void *key, size_t klen);
    /* The index hash (cf_hash_seeded with the store's seed) of the key of the record at
     * `offset`, for a rehash. KV_OK or an error. */
    kv_status (*hash_at)(void *ctx, uint64_t offset, uint64_t *h);
    void *ctx;
} kv_index_io;

typedef struct kv_index {
    uint64_t *slots;   /* buckets * KV_INDEX_SLOTS */
    uint64_t buckets;  /* even, at least 2 */
    uint64_t items;    /* occupied slots */
    uint64_t rng;      /* xorshift64* state: which entry a kick moves */
    uint64_t rehashes; /* doublings so far */
} kv_index;

/* The smallest even bucket count whose slots hold `items` entries at the load a cuckoo
 * table of 4-slot buckets fills to with ease (90 %); false on overflow. */
bool kv_index_buckets_for(uint64_t items, uint64_t *buckets);

/* An empty index of `buckets` buckets (even, >= 2). seed starts the kick generator.
 * KV_OK, KV_EINVAL or KV_ENOMEM. */
kv_status kv_index_init(kv_index *ix, uint64_t buckets, uint64_t seed);
void kv_index_free(kv_index *ix);

/* Bytes the table holds. */
uint64_t kv_index_bytes(const kv_index *ix);

/* The slot that holds key (hash h): KV_OK with *pos set; KV_NOT_FOUND; an error of
 * io->key_is. */
kv_status kv_index_find(const kv_index *ix, uint64_t h, const void *key, size_t klen,
                        const kv_index_io *io, uint64_t *pos);

/* The slot of the entry for hash h at exactly `offset`, or UINT64_MAX: does the index
 * point at this record? No log read. */
uint64_t kv_index_find_offset(const kv_index *ix, uint64_t h, uint64_t offset);

uint64_t kv_index_offset(const kv_index *ix, uint64_t pos);
void kv_index_set_offset(kv_index *ix, uint64_t pos, uint64_t offset);
void kv_index_remove(kv_index *ix, uint64_t pos);

/* Add the entry (h, offset) of a key that is not in the index. When the kicks run out the
 * table doubles, and every entry is rehashed with io->hash_at; nothing is ever dropped.
 * KV_OK; KV_ENOMEM or an error of io->hash_at, and then the index is exactly as it was. */
kv_status kv_index_insert(kv_index *ix, uint64_t h, uint64_t offset, const kv_index_io *io);

#endif /* KVINDEX_H */
