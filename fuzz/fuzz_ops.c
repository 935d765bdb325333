/*
 * fuzz_ops.c - libFuzzer target: one filter, a sequence of operations, and an exact model
 * of what the filter must hold. Any broken promise of include/cuckoofilter.h aborts.
 *
 * Input (every read past the end yields 0 bytes, so every input is valid):
 *
 *   header, 16 bytes
 *     0-1   capacity        u16 LE % 5001 (0 is invalid)
 *     2     fingerprint     bit 7 clear: one of the valid 0, 4..32; set: (v & 127) % 41
 *     3     bucket size     < 0xC0: v % 9 (0..8); < 0xF8: 9 + byte 4 % 247 (9..255);
 *                           else 256..260 (invalid)
 *     4     bucket size, the part above 8; with byte 3 < 0xC0, bit 7: CF_SEMI_SORT
 *           (CF_EINVAL unless the bucket size is 0 or 4), bit 6: CF_CONCURRENT (its
 *           writes and lookups, from this one thread)
 *     5-6   max_kicks       u16 LE: bit 15 set: v; clear: v % 600
 *     7     expansion       v % 6
 *     8-9   max_sub_filters u16 LE: bit 15 set: v & 0x7fff; clear: v % 10
 *     10    flags           bit 0: a tracking allocator (else NULL: malloc/free)
 *                           bit 1: its failure persists (every call from the Nth on)
 *                           bit 2: max_kicks = 65535 + v % 4466 (mostly invalid)
 *                           bit 3: max_sub_filters = 65535 + v % 4466 (mostly invalid)
 *                           bit 4: expansion = 32766 + v % 8 (huge, 32769+ invalid);
 *                                  forces the tracking allocator, which refuses > 64 MiB
 *                           bit 5: an allocator with a NULL function (invalid);
 *                                  bit 6 picks which
 *                           bit 7: CF_GROW_SAME_WIDTH (else growth widens fingerprints)
 *     11    N               the tracking allocator fails its Nth call (0 = never)
 *     12-15 seed            u32 LE, spread over 64 bits
 *
 *   then operations, at most FZ_MAX_OPS primitive calls in all: an opcode byte c, whose
 *   low 4 bits choose the operation and high 4 bits (`arg`) vary it, then its operands.
 *   A KEY operand is a byte k: k < 0x80: the 1-byte key k; k < 0xC0: a 2-byte key (k & 63,
 *   next byte); else a raw key of the next (k & 63) bytes, and a 0-byte key is passed as
 *   NULL when arg bit 3 is set. Small ids give many duplicates; raw keys any bytes.
 *
 *     0  ADD KEY              cf_add
 *     1  ADD_UNIQUE KEY       cf_add_unique
 *     2  ADD_HASH KEY         cf_add_hash(cf_hash(KEY))
 *     3  DELETE i             delete the (i % live)th key of the model (arg bit 0: by hash)
 *     4  DELETE_ABSENT KEY    a key the model lacks and the filter counts 0 times:
 *                             must be CF_NOT_FOUND and change nothing
 *     5  CONTAINS KEY         cf_contains, cf_contains_hash, cf_count agree with the model
 *     6  COUNT KEY            cf_count >= multiplicity
 *     7  CLEAR                cf_clear: nothing found afterwards, same size
 *     8  CONTAINS_MANY n s..  n % 65 hashes: model keys (s odd) or random ones
 *     9  STATS                every figure of cf_get_stats; NULL arguments
 *     10 BURST KEY n          the same key 1 + n % 64 times (hot key; arg bit 0: by hash)
 *     11 MANY n               1 + n new distinct keys (drives growth)
 *     12 DELETE_MANY n i      1 + n % 64 model keys, starting at i
 *     13 REARM n              tracking allocator: fail the nth next call (0 = never);
 *                             arg bit 0: and every call after it
 *     14 VERIFY               every model key is found
 *     15 ADD_RAW x            cf_add_hash(splitmix(8 bytes x)): hashes with no key
 *
 * Checks: no false negatives; cf_count >= multiplicity; cf_contains == (cf_count > 0) ==
 * cf_contains_hash == cf_contains_many; stats.items == the model's total; a failed add
 * (CF_FULL, CF_ENOMEM, CF_EXISTS) changes nothing (stats, allocations, counts, every model
 * key still found); CF_FULL only when the header allows it (a fixed filter's stash is
 * full; a growing filter's key is hot or it has max_sub_filters); capacity distinct keys
 * fit a fixed filter (with at least the default kick budget); CF_ENOMEM only from a
 * failed allocation while growing; a delete of a model key succeeds and removes one copy;
 * invalid configs (exactly the header's ranges) give CF_EINVAL from cf_new and
 * cf_bytes_needed, allocate nothing and leave *out alone; cf_new allocates exactly
 * cf_bytes_needed bytes, and fails with CF_ENOMEM iff an allocation failed; cf_free
 * returns every block.
 *
 * Work per input is bounded, so that each runs in milliseconds even when instrumented:
 * at most FZ_MAX_OPS calls, each charged for the sub-filters and slots it may probe
 * (FZ_WORK_BUDGET); a budget for failed adds (each may search the table for an eviction
 * path; once it is spent, adds are skipped); and one for checking every model key after
 * failures and deletes (the final check always runs).
 */
#include "fuzz_common.h"
#include "fuzz_target.h"

#include <cuckoofilter.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_HEADER_BYTES    16u
#define FZ_MAX_CAPACITY    5000u
#define FZ_MAX_OPS         2000u
#define FZ_FAIL_BUDGET     (UINT64_C(1) << 20) /* failed adds' worst-case search work */
#define FZ_WORK_BUDGET     (UINT64_C(1) << 16) /* calls x sub-filters, per input */
#define FZ_MAX_ENTRIES     4096u /* model entries: more than FZ_MAX_OPS adds can create */
#define FZ_INDEX_BITS      13u
#define FZ_INDEX_SIZE      (1u << FZ_INDEX_BITS)
#define FZ_KEY_MAX         64u
#define FZ_MANY_MAX        64u
#define FZ_VERIFY_BUDGET   (UINT64_C(1) << 14) /* key x sub-filter probes, per input */
#define FZ_ALLOC_LIMIT     ((size_t)64 << 20)  /* the tracking allocator refuses more */
#define FZ_STASH_SLOTS     8u                  /* the header: a fixed filter keeps up to 8 */
#define FZ_SMALL_EXPANSION 5u /* above this, growth may hit the table size limit (CF_FULL) */

/* ------------------------------------------------------------------------------------ */
/* Input                                                                                */
/* ------------------------------------------------------------------------------------ */

typedef struct fz_input {
    const uint8_t *p;
    size_t n;
} fz_input;

static uint8_t fz_byte(fz_input *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static uint64_t fz_u64(fz_input *in, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)fz_byte(in) << (8 * i);
    return v;
}

/* Up to *len bytes of the input (fewer at its end; *len says how many). */
static const uint8_t *fz_take(fz_input *in, size_t *len)
{
    const uint8_t *p = in->p;
    if (*len > in->n)
        *len = in->n;
    in->p += *len;
    in->n -= *len;
    return p;
}

typedef struct fz_key {
    const uint8_t *p; /* NULL only when len is 0 */
    size_t len;
    uint8_t buf[2];
} fz_key;

static void fz_read_key(fz_input *in, unsigned arg, fz_key *k)
{
    uint8_t c = fz_byte(in);
    if (c < 0x80) {
        k->buf[0] = c;
        k->len = 1;
        k->p = k->buf;
    } else if (c < 0xC0) {
        k->buf[0] = (uint8_t)(c & 0x3f);
        k->buf[1] = fz_byte(in);
        k->len = 2;
        k->p = k->buf;
    } else {
        k->len = c & 0x3fu;
        k->p = fz_take(in, &k->len);
        if (k->len == 0 && (arg & 8u))
            k->p = NULL;
    }
}

/* ------------------------------------------------------------------------------------ */
/* The model: a multiset of 64-bit key hashes (cf_add(k) is cf_add_hash(cf_hash(k)), so  */
/* keys with equal hashes are one key to the filter too), with the key bytes kept.      */
/* ------------------------------------------------------------------------------------ */

typedef struct fz_entry {
    uint64_t h;
    uint32_t count;
    uint32_t live_pos; /* where it is in model.live, while count > 0 */
    uint32_t slot;     /* its slot in model.index */
    uint8_t len;
    bool has_key; /* false: added by hash only */
    uint8_t key[FZ_KEY_MAX];
} fz_entry;

typedef struct fz_model {
    fz_entry e[FZ_MAX_ENTRIES];
    uint32_t n;
    uint32_t index[FZ_INDEX_SIZE]; /* entry number + 1; 0 = empty slot (linear probing) */
    uint32_t live[FZ_MAX_ENTRIES]; /* entries with count > 0 */
    uint32_t nlive;
    uint64_t total; /* sum of the counts */
    uint32_t multi; /* entries with count >= 2 */
} fz_model;

static fz_model model;

static void fz_model_init(void)
{
    memset(model.index, 0, sizeof model.index);
    model.n = 0;
    model.nlive = 0;
    model.total = 0;
    model.multi = 0;
}

/* Empty again; O(entries). */
static void fz_model_reset(void)
{
    for (uint32_t i = 0; i < model.n; i++)
        model.index[model.e[i].slot] = 0;
    model.n = 0;
    model.nlive = 0;
    model.total = 0;
    model.multi = 0;
}

static uint32_t fz_model_slot(uint64_t h)
{
    return (uint32_t)(fz_mix64(h) >> (64u - FZ_INDEX_BITS));
}

static fz_entry *fz_model_find(uint64_t h)
{
    for (uint32_t i = fz_model_slot(h);; i = (i + 1) & (FZ_INDEX_SIZE - 1)) {
        uint32_t v = model.index[i];
        if (v == 0)
            return NULL;
        if (model.e[v - 1].h == h)
            return &model.e[v - 1];
    }
}

static uint32_t fz_model_count(uint64_t h)
{
    const fz_entry *e = fz_model_find(h);
    return e ? e->count : 0;
}

/* One more copy of h. The model has room: the caller checked fz_model_has_room. */
static void fz_model_add(uint64_t h, const uint8_t *key, size_t len, bool has_key)
{
    fz_entry *e = fz_model_find(h);
    if (e == NULL) {
        FZ_REQUIRE(model.n < FZ_MAX_ENTRIES);
        uint32_t i = fz_model_slot(h);
        while (model.index[i] != 0)
            i = (i + 1) & (FZ_INDEX_SIZE - 1);
        e = &model.e[model.n];
        memset(e, 0, sizeof *e);
        e->h = h;
        e->slot = i;
        e->has_key = has_key && len <= FZ_KEY_MAX;
        if (e->has_key) {
            e->len = (uint8_t)len;
            if (len > 0)
                memcpy(e->key, key, len);
        }
        model.index[i] = ++model.n;
    }
    if (e->count == 0) {
        e->live_pos = model.nlive;
        model.live[model.nlive++] = (uint32_t)(e - model.e);
    } else if (e->count == 1) {
        model.multi++;
    }
    e->count++;
    model.total++;
}

static void fz_model_remove(fz_entry *e)
{
    FZ_REQUIRE(e->count > 0);
    if (e->count == 2)
        model.multi--;
    e->count--;
    model.total--;
    if (e->count == 0) {
        uint32_t last = model.live[--model.nlive];
        model.live[e->live_pos] = last;
        model.e[last].live_pos = e->live_pos;
    }
}

static bool fz_model_has_room(uint64_t h)
{
    return model.n < FZ_MAX_ENTRIES || fz_model_find(h) != NULL;
}

/* ------------------------------------------------------------------------------------ */
/* The filter under test                                                                */
/* ------------------------------------------------------------------------------------ */

typedef struct fz_ctx {
    cf_filter *f;
    fz_alloc ta;
    bool tracking;
    /* The config, defaults resolved. */
    uint64_t capacity;
    unsigned fbits, b, max_kicks, max_sub, expansion;
    bool semi;     /* CF_SEMI_SORT */
    cf_stats last; /* at the previous stats check */
    uint64_t verify_budget;
    uint64_t fail_budget;
    uint64_t work;
    unsigned ops;
    uint64_t many_next;
} fz_ctx;

static cf_stats fz_raw_stats(const fz_ctx *x)
{
    cf_stats s;
    memset(&s, 0, sizeof s);
    cf_get_stats(x->f, &s);
    return s;
}

/* Every figure against the model and the config; sizes never shrink. */
static cf_stats fz_check_stats(fz_ctx *x)
{
    cf_stats s = fz_raw_stats(x);
    FZ_REQUIRE(s.items == model.total);
    FZ_REQUIRE(s.fingerprint_bits == x->fbits);
    FZ_REQUIRE(s.bucket_size == x->b);
    FZ_REQUIRE(s.sub_filters >= 1 && s.sub_filters <= x->max_sub);
    FZ_REQUIRE(x->expansion != 0 || s.sub_filters == 1);
    FZ_REQUIRE(s.slots == s.buckets * x->b);
    /* f bits per slot, packed or not; semi-sorted, f - 1 */
    FZ_REQUIRE(s.bytes * 8 >= s.slots * (x->fbits - (x->semi ? 1u : 0u)));
    FZ_REQUIRE(s.stashed <= FZ_STASH_SLOTS && s.stashed <= s.items);
    FZ_REQUIRE(s.items <= s.slots + s.stashed);
    double want = (double)(s.items - s.stashed) / (double)s.slots; /* never above 1 */
    double diff = s.load_factor - want;
    FZ_REQUIRE(diff <= 1e-12 * want && -diff <= 1e-12 * want);
    FZ_REQUIRE(s.fpr >= 0.0 && s.fpr <= 1.0); /* also false for NaN */
    FZ_REQUIRE(s.items != 0 || s.fpr == 0.0);
    FZ_REQUIRE(s.sub_filters >= x->last.sub_filters && s.buckets >= x->last.buckets &&
               s.slots >= x->last.slots && s.bytes >= x->last.bytes);
    x->last = s;
    return s;
}

/* Every key of the model is found, at least as often as it was added. Charged to the
 * per-input budget unless forced (the final check is). */
static void fz_verify_all(fz_ctx *x, bool forced)
{
    uint64_t cost = (uint64_t)model.nlive * (x->last.sub_filters + 1u);
    if (!forced) {
        if (cost > x->verify_budget)
            return;
        x->verify_budget -= cost;
    }
    for (uint32_t i = 0; i < model.nlive; i++) {
        const fz_entry *e = &model.e[model.live[i]];
        bool found = e->has_key ? cf_contains(x->f, e->key, e->len) : cf_contains_hash(x->f, e->h);
        FZ_REQUIRE(found); /* a false negative */
        FZ_REQUIRE(cf_count_hash(x->f, e->h) >= e->count);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Operations                                                                           */
/* ------------------------------------------------------------------------------------ */

typedef enum fz_via { VIA_ADD, VIA_ADD_HASH, VIA_ADD_UNIQUE } fz_via;

/* Add one copy of a key (key may be NULL when len is 0; has_key false: by hash only). */
static void fz_add(fz_ctx *x, const uint8_t *key, size_t len, bool has_key, uint64_t h, fz_via via)
{
    if (x->fail_budget == 0 || !fz_model_has_room(h))
        return;
    uint32_t had = fz_model_count(h);
    cf_stats before = fz_raw_stats(x);
    uint64_t live = x->ta.live, live_bytes = x->ta.live_bytes, failures = x->ta.failures;
    uint64_t count_before = cf_count_hash(x->f, h);
    FZ_REQUIRE(count_before >= had);

    cf_status st = CF_EINVAL;
    switch (via) {
    case VIA_ADD:
        st = has_key ? cf_add(x->f, key, len) : cf_add_hash(x->f, h);
        break;
    case VIA_ADD_HASH:
        st = cf_add_hash(x->f, h);
        break;
    case VIA_ADD_UNIQUE:
        st = cf_add_unique(x->f, key, len);
        /* cf_contains was true (the key is in the model): nothing may be added. */
        FZ_REQUIRE(had == 0 || st == CF_EXISTS);
        break;
    }

    if (st == CF_OK) {
        fz_model_add(h, key, len, has_key);
        cf_stats s = fz_check_stats(x);
        FZ_REQUIRE(s.items == before.items + 1);
        FZ_REQUIRE(cf_count_hash(x->f, h) >= count_before + 1);
        if (via == VIA_ADD_UNIQUE)
            FZ_REQUIRE(count_before == 0); /* it was not found before */
        if (s.sub_filters > before.sub_filters)
            FZ_REQUIRE(x->expansion > 0);
        return;
    }

    /* A failed add changes nothing. */
    FZ_REQUIRE(st == CF_FULL || st == CF_ENOMEM || (via == VIA_ADD_UNIQUE && st == CF_EXISTS));
    cf_stats after = fz_raw_stats(x);
    FZ_REQUIRE(fz_stats_equal(&before, &after));
    FZ_REQUIRE(x->ta.live == live && x->ta.live_bytes == live_bytes);
    FZ_REQUIRE(cf_count_hash(x->f, h) == count_before);
    if (st == CF_EXISTS) {
        FZ_REQUIRE(count_before > 0);
        return;
    }
    /* What the search for an eviction path may have cost: max_kicks + 2 buckets at most,
     * b slots each, each slot's other bucket scanned (b slots, unless probed at once). */
    uint64_t nodes = x->max_kicks + 2u < before.buckets ? x->max_kicks + 2u : before.buckets;
    uint64_t cost = nodes * x->b * x->b + 1u;
    x->fail_budget = cost < x->fail_budget ? x->fail_budget - cost : 0;
    if (st == CF_ENOMEM) {
        /* Only growth and a fixed filter's first stash allocate, and only a failed
         * allocation is CF_ENOMEM. */
        FZ_REQUIRE(x->expansion > 0 || before.stashed == 0);
        FZ_REQUIRE(x->tracking && x->ta.failures > failures);
    } else if (x->expansion == 0) {
        /* A fixed filter refuses only when its stash is full too... */
        FZ_REQUIRE(before.stashed == FZ_STASH_SLOTS);
        /* ...and `capacity` distinct random keys fit (the sizing promise, for the kick
         * budget it was made for). */
        FZ_REQUIRE(!(x->max_kicks >= CF_DEFAULT_MAX_KICKS && model.multi == 0 && had == 0 &&
                     model.total < x->capacity));
    } else {
        /* A growing filter refuses a hot key (its copies fill both buckets) or when it
         * has max_sub_filters; a huge expansion may also outgrow the table size limit. */
        FZ_REQUIRE(count_before >= 2u * x->b || before.sub_filters >= x->max_sub ||
                   x->expansion > FZ_SMALL_EXPANSION);
    }
    fz_verify_all(x, false);
}

static void fz_delete_live(fz_ctx *x, uint32_t pick, bool by_hash)
{
    if (model.nlive == 0)
        return;
    fz_entry *e = &model.e[model.live[pick % model.nlive]];
    cf_stats before = fz_raw_stats(x);
    uint64_t count_before = cf_count_hash(x->f, e->h);
    FZ_REQUIRE(count_before >= e->count);
    cf_status st =
        by_hash || !e->has_key ? cf_delete_hash(x->f, e->h) : cf_delete(x->f, e->key, e->len);
    FZ_REQUIRE(st == CF_OK); /* the key was added and not deleted */
    fz_model_remove(e);
    cf_stats s = fz_check_stats(x);
    FZ_REQUIRE(s.items + 1 == before.items);
    FZ_REQUIRE(s.slots == before.slots && s.bytes == before.bytes &&
               s.sub_filters == before.sub_filters);
    uint64_t count = cf_count_hash(x->f, e->h);
    FZ_REQUIRE(count >= e->count);
    FZ_REQUIRE(count + 1 == count_before); /* one copy removed */
    fz_verify_all(x, false);               /* no other key lost its fingerprint */
}

static void fz_delete_absent(fz_ctx *x, const fz_key *k, bool by_hash)
{
    uint64_t h = cf_hash(x->f, k->p, k->len);
    /* Only a key the filter has no fingerprint for: deleting another key's fingerprint
     * is what the header warns against. */
    if (fz_model_count(h) != 0 || cf_count_hash(x->f, h) != 0)
        return;
    cf_stats before = fz_raw_stats(x);
    cf_status st = by_hash ? cf_delete_hash(x->f, h) : cf_delete(x->f, k->p, k->len);
    FZ_REQUIRE(st == CF_NOT_FOUND);
    cf_stats after = fz_raw_stats(x);
    FZ_REQUIRE(fz_stats_equal(&before, &after));
}

static void fz_contains(fz_ctx *x, const fz_key *k)
{
    uint64_t h = cf_hash(x->f, k->p, k->len);
    FZ_REQUIRE(h == cf_hash(x->f, k->p, k->len));
    bool found = cf_contains(x->f, k->p, k->len);
    uint64_t count = cf_count(x->f, k->p, k->len);
    FZ_REQUIRE(found == cf_contains_hash(x->f, h));
    FZ_REQUIRE(count == cf_count_hash(x->f, h));
    FZ_REQUIRE(found == (count > 0));
    FZ_REQUIRE(count >= fz_model_count(h));
}

static void fz_clear(fz_ctx *x)
{
    cf_stats before = fz_raw_stats(x);
    cf_clear(x->f);
    cf_stats s = fz_raw_stats(x);
    FZ_REQUIRE(s.items == 0 && s.stashed == 0);
    FZ_REQUIRE(s.slots == before.slots && s.buckets == before.buckets && s.bytes == before.bytes &&
               s.sub_filters == before.sub_filters);
    /* An empty filter finds nothing. */
    uint64_t cost = (uint64_t)model.nlive * (s.sub_filters + 1u);
    if (cost <= x->verify_budget) {
        x->verify_budget -= cost;
        for (uint32_t i = 0; i < model.nlive; i++) {
            uint64_t h = model.e[model.live[i]].h;
            FZ_REQUIRE(!cf_contains_hash(x->f, h) && cf_count_hash(x->f, h) == 0);
        }
    }
    fz_model_reset();
    fz_check_stats(x);
}

static void fz_contains_many(fz_ctx *x, fz_input *in)
{
    uint64_t hashes[FZ_MANY_MAX];
    bool out[FZ_MANY_MAX + 1];
    size_t n = fz_byte(in) % (FZ_MANY_MAX + 1u);
    x->work += n * (1u + x->last.sub_filters) * (1u + x->b / 16u);
    uint64_t salt = fz_byte(in);
    for (size_t i = 0; i < n; i++) {
        unsigned s = fz_byte(in);
        if ((s & 1u) && model.nlive > 0)
            hashes[i] = model.e[model.live[(s >> 1) % model.nlive]].h;
        else
            hashes[i] = fz_mix64((salt << 16) ^ ((uint64_t)s << 8) ^ i);
    }
    for (size_t i = 0; i <= n; i++)
        out[i] = (i & 1) != 0;
    /* A NULL pointer: nothing happens. */
    cf_contains_many(x->f, NULL, n, out);
    cf_contains_many(x->f, hashes, n, NULL);
    for (size_t i = 0; i <= n; i++)
        FZ_REQUIRE(out[i] == ((i & 1) != 0));
    out[n] = true; /* a canary: n answers, not one more */
    cf_contains_many(x->f, hashes, n, out);
    FZ_REQUIRE(out[n]);
    for (size_t i = 0; i < n; i++) {
        FZ_REQUIRE(out[i] == cf_contains_hash(x->f, hashes[i]));
        FZ_REQUIRE(out[i] || fz_model_count(hashes[i]) == 0);
    }
}

/* Every figure, and the calls that must do nothing with a NULL argument. */
static void fz_stats_op(fz_ctx *x)
{
    cf_stats before = fz_check_stats(x);
    cf_stats junk, copy;
    memset(&junk, 0x5a, sizeof junk);
    copy = junk;
    cf_get_stats(NULL, &junk);
    FZ_REQUIRE(memcmp(&junk, &copy, sizeof junk) == 0);
    cf_get_stats(x->f, NULL);
    FZ_REQUIRE(cf_add(x->f, NULL, 1) == CF_EINVAL);
    FZ_REQUIRE(cf_add_unique(x->f, NULL, 1) == CF_EINVAL);
    FZ_REQUIRE(cf_delete(x->f, NULL, 1) == CF_EINVAL);
    FZ_REQUIRE(!cf_contains(x->f, NULL, 1));
    FZ_REQUIRE(cf_count(x->f, NULL, 1) == 0);
    FZ_REQUIRE(cf_add(NULL, "k", 1) == CF_EINVAL);
    FZ_REQUIRE(cf_add_unique(NULL, "k", 1) == CF_EINVAL);
    FZ_REQUIRE(cf_delete(NULL, "k", 1) == CF_EINVAL);
    FZ_REQUIRE(!cf_contains(NULL, "k", 1));
    FZ_REQUIRE(cf_count(NULL, "k", 1) == 0);
    FZ_REQUIRE(cf_hash(NULL, "k", 1) == 0);
    FZ_REQUIRE(cf_add_hash(NULL, 1) == CF_EINVAL);
    FZ_REQUIRE(cf_delete_hash(NULL, 1) == CF_EINVAL);
    FZ_REQUIRE(!cf_contains_hash(NULL, 1));
    FZ_REQUIRE(cf_count_hash(NULL, 1) == 0);
    cf_clear(NULL);
    cf_free(NULL);
    for (int s = -1; s <= (int)CF_EREADONLY + 1; s++)
        FZ_REQUIRE(cf_strerror((cf_status)s) != NULL);
    cf_stats after = fz_raw_stats(x);
    FZ_REQUIRE(fz_stats_equal(&before, &after));
}

/* ------------------------------------------------------------------------------------ */
/* Config                                                                               */
/* ------------------------------------------------------------------------------------ */

enum {
    FZ_FLAG_TRACKING = 1u << 0,
    FZ_FLAG_PERSIST = 1u << 1,
    FZ_FLAG_KICKS_BIG = 1u << 2,
    FZ_FLAG_SUB_BIG = 1u << 3,
    FZ_FLAG_EXP_BIG = 1u << 4,
    FZ_FLAG_BROKEN_ALLOC = 1u << 5,
    FZ_FLAG_BROKEN_FREE = 1u << 6,
    FZ_FLAG_SAME_WIDTH = 1u << 7,
};

/* Decode the header into c; returns whether the header's ranges make it invalid. */
static bool fz_config(fz_input *in, fz_ctx *x, cf_config *c, cf_allocator *broken)
{
    uint8_t h[FZ_HEADER_BYTES];
    for (unsigned i = 0; i < FZ_HEADER_BYTES; i++)
        h[i] = fz_byte(in);
    unsigned flags = h[10];
    unsigned v;

    memset(c, 0, sizeof *c);
    c->capacity = ((unsigned)h[0] | (unsigned)h[1] << 8) % (FZ_MAX_CAPACITY + 1u);
    if (h[2] & 0x80) {
        c->fingerprint_bits = (h[2] & 0x7fu) % 41u;
    } else {
        unsigned i = h[2] % 30u; /* 0 and 4..32 */
        c->fingerprint_bits = i == 0 ? 0 : i + 3;
    }
    if (h[3] < 0xC0)
        c->bucket_size = h[3] % 9u;
    else if (h[3] < 0xF8)
        c->bucket_size = 9u + h[4] % 247u;
    else
        c->bucket_size = 256u + (h[3] - 0xF8u) % 5u;
    v = (unsigned)h[5] | (unsigned)h[6] << 8;
    c->max_kicks = (flags & FZ_FLAG_KICKS_BIG) ? 65535u + v % 4466u : (v & 0x8000u) ? v : v % 600u;
    c->expansion = (flags & FZ_FLAG_EXP_BIG) ? 32766u + h[7] % 8u : h[7] % 6u;
    v = (unsigned)h[8] | (unsigned)h[9] << 8;
    c->max_sub_filters = (flags & FZ_FLAG_SUB_BIG) ? 65535u + v % 4466u
                         : (v & 0x8000u)           ? v & 0x7fffu
                                                   : v % 10u;
    uint64_t seed =
        (uint64_t)h[12] | (uint64_t)h[13] << 8 | (uint64_t)h[14] << 16 | (uint64_t)h[15] << 24;
    c->seed = seed * UINT64_C(0x9e3779b97f4a7c15);

    if (flags & FZ_FLAG_SAME_WIDTH)
        c->flags |= CF_GROW_SAME_WIDTH;
    if (h[3] < 0xC0 && (h[4] & 0x80))
        c->flags |= CF_SEMI_SORT;
    if (h[3] < 0xC0 && (h[4] & 0x40))
        c->flags |= CF_CONCURRENT;
    x->tracking = (flags & (FZ_FLAG_TRACKING | FZ_FLAG_EXP_BIG)) != 0;
    fz_alloc_init(&x->ta, FZ_ALLOC_LIMIT);
    x->ta.fail_at = h[11];
    x->ta.persist = (flags & FZ_FLAG_PERSIST) != 0;
    if (x->tracking)
        c->allocator = &x->ta.a;
    bool broken_allocator = (flags & FZ_FLAG_BROKEN_ALLOC) != 0;
    if (broken_allocator) {
        *broken = x->ta.a;
        if (flags & FZ_FLAG_BROKEN_FREE)
            broken->free = NULL;
        else
            broken->alloc = NULL;
        c->allocator = broken;
    }

    x->capacity = c->capacity;
    x->fbits = c->fingerprint_bits ? c->fingerprint_bits : CF_DEFAULT_FINGERPRINT_BITS;
    x->semi = (c->flags & CF_SEMI_SORT) != 0;
    x->b = c->bucket_size ? c->bucket_size : CF_DEFAULT_BUCKET_SIZE;
    x->max_kicks = c->max_kicks ? c->max_kicks : CF_DEFAULT_MAX_KICKS;
    x->max_sub = c->max_sub_filters ? c->max_sub_filters : CF_DEFAULT_MAX_SUB_FILTERS;
    x->expansion = c->expansion;

    /* The header's rules, and nothing else: for capacities up to 5000 every shape fits. */
    bool f_ok = c->fingerprint_bits == 0 || (c->fingerprint_bits >= CF_MIN_FINGERPRINT_BITS &&
                                             c->fingerprint_bits <= CF_MAX_FINGERPRINT_BITS);
    return c->capacity == 0 || !f_ok || c->bucket_size > CF_MAX_BUCKET_SIZE ||
           c->max_kicks > CF_MAX_MAX_KICKS || c->max_sub_filters > CF_MAX_SUB_FILTERS ||
           c->expansion > CF_MAX_EXPANSION || broken_allocator ||
           ((c->flags & CF_SEMI_SORT) && x->b != 4); /* semi-sorted buckets have 4 slots */
}

/* ------------------------------------------------------------------------------------ */
/* The target                                                                           */
/* ------------------------------------------------------------------------------------ */

/* May one more call be made? Charges it. */
static bool fz_next(fz_ctx *x)
{
    if (x->ops >= FZ_MAX_OPS || x->work >= FZ_WORK_BUDGET)
        return false;
    x->ops++;
    x->work += (1u + x->last.sub_filters) * (1u + x->b / 16u); /* big buckets: slow probes */
    return true;
}

static void fz_run_ops(fz_ctx *x, fz_input *in)
{
    while (in->n > 0 && fz_next(x)) {
        uint8_t c = fz_byte(in);
        unsigned op = c & 15u, arg = (unsigned)c >> 4;
        fz_key k;
        switch (op) {
        case 0:
        case 1:
        case 2:
            fz_read_key(in, arg, &k);
            fz_add(x, k.p, k.len, true, cf_hash(x->f, k.p, k.len),
                   op == 0   ? VIA_ADD
                   : op == 1 ? VIA_ADD_UNIQUE
                             : VIA_ADD_HASH);
            break;
        case 3:
            fz_delete_live(x, fz_byte(in), arg & 1u);
            break;
        case 4:
            fz_read_key(in, arg, &k);
            fz_delete_absent(x, &k, arg & 1u);
            break;
        case 5:
        case 6:
            fz_read_key(in, arg, &k);
            fz_contains(x, &k);
            break;
        case 7:
            fz_clear(x);
            break;
        case 8:
            fz_contains_many(x, in);
            break;
        case 9:
            fz_stats_op(x);
            break;
        case 10: {
            fz_read_key(in, arg, &k);
            unsigned n = 1u + fz_byte(in) % 64u;
            uint64_t h = cf_hash(x->f, k.p, k.len);
            for (unsigned i = 0; i < n && fz_next(x); i++)
                fz_add(x, k.p, k.len, true, h, (arg & 1u) ? VIA_ADD_HASH : VIA_ADD);
            break;
        }
        case 11: {
            unsigned n = 1u + fz_byte(in);
            for (unsigned i = 0; i < n && fz_next(x); i++) {
                uint8_t key[9];
                uint64_t id = x->many_next++;
                key[0] = 0xA7;
                for (unsigned j = 0; j < 8; j++)
                    key[1 + j] = (uint8_t)(id >> (8 * j));
                fz_add(x, key, sizeof key, true, cf_hash(x->f, key, sizeof key),
                       (i + arg) % 3 == 0 ? VIA_ADD_HASH : VIA_ADD);
            }
            break;
        }
        case 12: {
            unsigned n = 1u + fz_byte(in) % 64u;
            uint32_t start = fz_byte(in);
            for (unsigned i = 0; i < n && fz_next(x); i++)
                fz_delete_live(x, start + i * 37u, ((arg + i) & 1u) != 0);
            break;
        }
        case 13: {
            unsigned n = fz_byte(in);
            if (x->tracking) {
                x->ta.fail_at = n ? x->ta.calls + n : 0;
                x->ta.persist = (arg & 1u) != 0;
            }
            break;
        }
        case 14:
            fz_verify_all(x, false);
            break;
        default: {
            uint64_t h = fz_mix64(fz_u64(in, 8));
            fz_add(x, NULL, 0, false, h, VIA_ADD_HASH);
            break;
        }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    static fz_ctx x; /* large; one input at a time */
    memset(&x, 0, sizeof x);
    cf_config cfg;
    cf_allocator broken;
    bool invalid = fz_config(&in, &x, &cfg, &broken);
    fz_model_init();

    size_t need = 0;
    cf_status sb = cf_bytes_needed(&cfg, &need);
    FZ_REQUIRE(sb == (invalid ? CF_EINVAL : CF_OK));
    FZ_REQUIRE(cf_bytes_needed(&cfg, NULL) == CF_EINVAL);
    FZ_REQUIRE(cf_bytes_needed(NULL, &need) == CF_EINVAL);

    cf_filter *const sentinel = (cf_filter *)(void *)&x; /* never dereferenced */
    cf_filter *f = sentinel;
    FZ_REQUIRE(cf_new(NULL, &f) == CF_EINVAL && f == sentinel);
    FZ_REQUIRE(cf_new(&cfg, NULL) == CF_EINVAL);
    FZ_REQUIRE(x.ta.calls == 0);
    cf_status st = cf_new(&cfg, &f);
    if (invalid) {
        FZ_REQUIRE(st == CF_EINVAL && f == sentinel);
        FZ_REQUIRE(x.ta.calls == 0); /* nothing allocated */
        return 0;
    }
    if (x.tracking && x.ta.failures > 0) {
        FZ_REQUIRE(st == CF_ENOMEM && f == sentinel);
        FZ_REQUIRE(x.ta.live == 0 && x.ta.live_bytes == 0);
        return 0;
    }
    FZ_REQUIRE(st == CF_OK && f != sentinel && f != NULL);
    if (x.tracking)
        FZ_REQUIRE(x.ta.total_bytes == need);
    x.f = f;
    x.verify_budget = FZ_VERIFY_BUDGET;
    x.fail_budget = FZ_FAIL_BUDGET;
    cf_stats s = fz_check_stats(&x);
    FZ_REQUIRE(s.items == 0 && s.sub_filters == 1 && s.stashed == 0);
    FZ_REQUIRE(s.bytes < need);
    FZ_REQUIRE(s.slots + FZ_STASH_SLOTS >= x.capacity);

    fz_run_ops(&x, &in);

    fz_check_stats(&x);
    fz_verify_all(&x, true);
    cf_free(f);
    FZ_REQUIRE(x.ta.live == 0 && x.ta.live_bytes == 0);
    return 0;
}
