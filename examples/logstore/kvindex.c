/*
 * kvindex.c - the cuckoo table of (tag, offset) slots (see kvindex.h for the layout).
 *
 * Placement is the library's (cf_place_hash, cf_alt_bucket) and so is the kick budget
 * (CF_DEFAULT_MAX_KICKS). What is this file's own is the payload: a filter's slot is a
 * fingerprint, this table's slot also carries the offset of the key's record, and an
 * entry that found no room cannot be dropped the way a filter reports CF_FULL. So an
 * insert walks, undoes its walk when the budget runs out, and doubles the table.
 */
#include "kvindex.h"

#include <cuckoofilter.h>

#include <stdlib.h>
#include <string.h>

#define KV_OFFSET_MASK ((UINT64_C(1) << KV_OFFSET_BITS) - 1)

/* The load kv_index_buckets_for sizes for, in percent: below the 95 % that 4-slot buckets
 * reach, so that a table sized from a log's record count seldom has to double at once. */
#define KV_INDEX_TARGET_LOAD_PCT 90u

/* Doublings one insert may attempt before it gives up with KV_ENOMEM. A random table of
 * twice the size takes every entry with overwhelming probability; this bounds the loop
 * should a pathological key set (equal hashes) defeat that. */
#define KV_INDEX_MAX_GROWTH 8u

static inline uint32_t slot_tag(uint64_t slot)
{
    return (uint32_t)(slot >> KV_OFFSET_BITS);
}

static inline uint64_t make_slot(uint32_t tag, uint64_t offset)
{
    return (uint64_t)tag << KV_OFFSET_BITS | offset;
}

static uint64_t next_random(kv_index *ix)
{
    /* xorshift64* (Vigna): enough to pick victims; the state lives in the index. */
    ix->rng ^= ix->rng >> 12;
    ix->rng ^= ix->rng << 25;
    ix->rng ^= ix->rng >> 27;
    return ix->rng * UINT64_C(0x2545f4914f6cdd1d);
}

bool kv_index_buckets_for(uint64_t items, uint64_t *buckets)
{
    if (items > UINT64_MAX / 100u)
        return false;
    uint64_t slots = (items * 100u + KV_INDEX_TARGET_LOAD_PCT - 1) / KV_INDEX_TARGET_LOAD_PCT;
    uint64_t b = (slots + KV_INDEX_SLOTS - 1) / KV_INDEX_SLOTS;
    b += b & 1u;
    if (b < 2)
        b = 2;
    if (b > CF_PLACE_MAX_BUCKETS || b > SIZE_MAX / (KV_INDEX_SLOTS * sizeof(uint64_t)))
        return false;
    *buckets = b;
    return true;
}

static kv_status alloc_slots(uint64_t buckets, uint64_t **out)
{
    if (buckets > SIZE_MAX / (KV_INDEX_SLOTS * sizeof(uint64_t)))
        return KV_ENOMEM;
    *out = calloc((size_t)buckets * KV_INDEX_SLOTS, sizeof(uint64_t));
    return *out ? KV_OK : KV_ENOMEM;
}

kv_status kv_index_init(kv_index *ix, uint64_t buckets, uint64_t seed)
{
    memset(ix, 0, sizeof *ix);
    if (buckets < 2 || buckets % 2 || buckets > CF_PLACE_MAX_BUCKETS)
        return KV_EINVAL;
    kv_status st = alloc_slots(buckets, &ix->slots);
    if (st != KV_OK)
        return st;
    ix->buckets = buckets;
    ix->rng = seed | 1u; /* xorshift must not start at 0 */
    return KV_OK;
}

void kv_index_free(kv_index *ix)
{
    free(ix->slots);
    memset(ix, 0, sizeof *ix);
}

uint64_t kv_index_bytes(const kv_index *ix)
{
    return ix->buckets * KV_INDEX_SLOTS * sizeof(uint64_t);
}

static cf_place place_of(const kv_index *ix, uint64_t h)
{
    cf_place p;
    /* Cannot fail: the bucket count is kept even and within CF_PLACE_MAX_BUCKETS. */
    (void)cf_place_hash(h, ix->buckets, KV_TAG_BITS, &p);
    return p;
}

kv_status kv_index_find(const kv_index *ix, uint64_t h, const void *key, size_t klen,
                        const kv_index_io *io, uint64_t *pos)
{
    cf_place p = place_of(ix, h);
    for (unsigned i = 0; i < 2; i++) {
        const uint64_t *b = ix->slots + p.bucket[i] * KV_INDEX_SLOTS;
        for (unsigned j = 0; j < KV_INDEX_SLOTS; j++) {
            if (slot_tag(b[j]) != p.tag)
                continue;
            kv_status st = io->key_is(io->ctx, b[j] & KV_OFFSET_MASK, key, klen);
            if (st == KV_OK) {
                *pos = p.bucket[i] * KV_INDEX_SLOTS + j;
                return KV_OK;
            }
            if (st != KV_NOT_FOUND)
                return st;
        }
    }
    return KV_NOT_FOUND;
}

uint64_t kv_index_find_offset(const kv_index *ix, uint64_t h, uint64_t offset)
{
    cf_place p = place_of(ix, h);
    uint64_t want = make_slot(p.tag, offset);
    for (unsigned i = 0; i < 2; i++)
        for (unsigned j = 0; j < KV_INDEX_SLOTS; j++)
            if (ix->slots[p.bucket[i] * KV_INDEX_SLOTS + j] == want)
                return p.bucket[i] * KV_INDEX_SLOTS + j;
    return UINT64_MAX;
}

uint64_t kv_index_offset(const kv_index *ix, uint64_t pos)
{
    return ix->slots[pos] & KV_OFFSET_MASK;
}

void kv_index_set_offset(kv_index *ix, uint64_t pos, uint64_t offset)
{
    ix->slots[pos] = make_slot(slot_tag(ix->slots[pos]), offset);
}

void kv_index_remove(kv_index *ix, uint64_t pos)
{
    ix->slots[pos] = 0;
    ix->items--;
}

/* A free slot of bucket b, or -1. */
static int free_slot(const uint64_t *slots, uint64_t b)
{
    for (unsigned j = 0; j < KV_INDEX_SLOTS; j++)
        if (slots[b * KV_INDEX_SLOTS + j] == 0)
            return (int)j;
    return -1;
}

/* Put `slot` into bucket b0 or b1 of `slots` (a table of `buckets`), kicking entries
 * along a random walk of at most CF_DEFAULT_MAX_KICKS steps. On failure the walk is
 * undone in reverse, which restores every slot even where the walk passed twice, and the
 * table is exactly as before. */
static bool place_entry(kv_index *ix, uint64_t *slots, uint64_t buckets, uint64_t b0, uint64_t b1,
                        uint64_t slot)
{
    int j;
    if ((j = free_slot(slots, b0)) >= 0) {
        slots[b0 * KV_INDEX_SLOTS + (unsigned)j] = slot;
        return true;
    }
    if ((j = free_slot(slots, b1)) >= 0) {
        slots[b1 * KV_INDEX_SLOTS + (unsigned)j] = slot;
        return true;
    }
    uint64_t path[CF_DEFAULT_MAX_KICKS]; /* slot positions written, in order */
    uint64_t held = slot;
    uint64_t b = next_random(ix) & 1u ? b1 : b0;
    for (unsigned k = 0; k < CF_DEFAULT_MAX_KICKS; k++) {
        uint64_t pos = b * KV_INDEX_SLOTS + next_random(ix) % KV_INDEX_SLOTS;
        uint64_t victim = slots[pos];
        slots[pos] = held;
        path[k] = pos;
        held = victim;
        b = cf_alt_bucket(b, slot_tag(held), buckets);
        if ((j = free_slot(slots, b)) >= 0) {
            slots[b * KV_INDEX_SLOTS + (unsigned)j] = held;
            return true;
        }
    }
    for (unsigned u = CF_DEFAULT_MAX_KICKS; u-- > 0;) {
        uint64_t back = slots[path[u]];
        slots[path[u]] = held;
        held = back;
    }
    return false;
}

/* Every entry of ix, and the new one (h, offset), into a new table of `buckets`.
 * KV_OK with *out set; KV_OK with *out NULL when some entry did not fit (a larger table
 * is needed); KV_ENOMEM or an error of io->hash_at. */
static kv_status rehash_into(kv_index *ix, uint64_t buckets, uint64_t h, uint64_t offset,
                             const kv_index_io *io, uint64_t **out)
{
    uint64_t *slots;
    *out = NULL;
    kv_status st = alloc_slots(buckets, &slots);
    if (st != KV_OK)
        return st;
    uint64_t n = ix->buckets * KV_INDEX_SLOTS;
    for (uint64_t i = 0; i <= n; i++) {
        uint64_t eh = h, eoff = offset;
        if (i < n) {
            if (ix->slots[i] == 0)
                continue;
            eoff = ix->slots[i] & KV_OFFSET_MASK;
            if ((st = io->hash_at(io->ctx, eoff, &eh)) != KV_OK) {
                free(slots);
                return st;
            }
        }
        cf_place p;
        (void)cf_place_hash(eh, buckets, KV_TAG_BITS, &p);
        if (!place_entry(ix, slots, buckets, p.bucket[0], p.bucket[1], make_slot(p.tag, eoff))) {
            free(slots);
            return KV_OK;
        }
    }
    *out = slots;
    return KV_OK;
}

kv_status kv_index_insert(kv_index *ix, uint64_t h, uint64_t offset, const kv_index_io *io)
{
    cf_place p = place_of(ix, h);
    if (place_entry(ix, ix->slots, ix->buckets, p.bucket[0], p.bucket[1],
                    make_slot(p.tag, offset))) {
        ix->items++;
        return KV_OK;
    }
    uint64_t buckets = ix->buckets;
    for (unsigned g = 0; g < KV_INDEX_MAX_GROWTH; g++) {
        if (buckets > CF_PLACE_MAX_BUCKETS / 2)
            return KV_ENOMEM;
        buckets *= 2;
        uint64_t *slots;
        kv_status st = rehash_into(ix, buckets, h, offset, io, &slots);
        if (st != KV_OK)
            return st;
        if (!slots)
            continue;
        free(ix->slots);
        ix->slots = slots;
        ix->buckets = buckets;
        ix->items++;
        ix->rehashes += g + 1;
        return KV_OK;
    }
    return KV_ENOMEM;
}
