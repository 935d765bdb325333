/*
 * api.c - the public calls on filters (cuckoofilter.h): each checks its arguments, then
 * calls through the filter's hot paths (f->ops) or its kind's cold calls (plain.h), or
 * into the one kind a call is for (a window's). The file calls (persist.c), merging
 * (merge.c) and the reads and writes of RedisBloom's raw tables (redisbloom.c) are public
 * calls of their own files.
 */
#include "plain.h"

/* ------------------------------------------------------------------------------------ */
/* Settings and making                                                                  */
/* ------------------------------------------------------------------------------------ */

/* Copy *from (`end` bytes that this library fills) into a caller's struct of `size`
 * bytes: what fits, and zeros past `end` for the fields of a later header. */
static void cf__struct_out(void *out, size_t size, const void *from, size_t end)
{
    memcpy(out, from, size < end ? size : end);
    if (size > end)
        memset((unsigned char *)out + end, 0, size - end);
}

cf_status cf_bytes_needed_sized(const cf_config *config, size_t config_size, size_t *bytes)
{
    cf_config c;
    cf__params p;
    uint64_t buckets;
    size_t table_bytes;
    if (!bytes)
        return CF_EINVAL;
    cf_status st = cf__config_sized(config, config_size, &c, &p, &buckets, &table_bytes, NULL);
    if (st != CF_OK)
        return st;
    if (c.generations)
        return cf__window_bytes(&c, &p, bytes);
    return cf__bytes_of(&p, c.allocator, buckets, table_bytes, bytes);
}

cf_status cf_new_sized(const cf_config *config, size_t config_size, cf_filter **out)
{
    cf_config c;
    cf__params p;
    uint64_t buckets;
    size_t bytes;
    if (!out)
        return CF_EINVAL;
    cf_status st = cf__config_sized(config, config_size, &c, &p, &buckets, &bytes, NULL);
    if (st != CF_OK)
        return st;
    /* A seed nobody knows, unless the caller fixed one: keys cannot then be chosen in
     * advance to crowd one bucket pair (with a known seed, a search finds a few dozen such
     * keys, which fill a pair and the whole stash while the filter is nearly empty). */
    if (p.seed == 0 && !(c.flags & (CF_FIXED_SEED | CF_REDISBLOOM)) &&
        (st = cf_random_seed(&p.seed)) != CF_OK)
        return st;
    if (c.generations)
        return cf__window_new(&c, &p, out);
    return cf__filter_make(&p, c.allocator, 1, buckets, true, cf__first_ops(&p), out);
}

/* The filter config makes, with n sub-filters (growth's sizes) and no table memory yet:
 * for a loader that gives each table its memory as its bytes arrive. CF_EINVAL for a
 * window, a concurrent filter, n = 0, n past max_sub_filters, or a size past the limits. */
static cf_status cf__new_without_tables(const cf_config *config, unsigned n, cf_filter **out)
{
    cf_config c;
    cf__params p;
    uint64_t buckets;
    size_t bytes;
    cf_status st = cf__config_sized(config, sizeof *config, &c, &p, &buckets, &bytes, NULL);
    if (st != CF_OK)
        return st;
    if (n == 0 || n > p.max_tables || (n > 1 && p.expansion == 0) || c.generations ||
        p.concurrent) /* a loader makes plain filters (its caller may copy them) */
        return CF_EINVAL;
    /* Every sub-filter's size within the limits before anything is made (cf__filter_make
     * takes them as checked). */
    uint64_t b = buckets;
    for (unsigned k = 1; k < n; k++)
        if (!cf__mul_u64(b, p.expansion, &b) || !cf__table_bytes(&p.shape, b, &bytes))
            return CF_EINVAL;
    return cf__filter_make(&p, c.allocator, n, buckets, false, cf__first_ops(&p), out);
}

cf_status cf_new_like(const cf_filter *model, const cf_allocator *allocator, cf_filter **out)
{
    if (!model || !out || cf_is_loading(model))
        return CF_EINVAL;
    cf_config c;
    cf_get_config(model, &c);
    c.allocator = allocator;
    return cf_new(&c, out);
}

cf_status cf_table_load_begin(const cf_config *config, unsigned n, cf_filter **out)
{
    if (!config || !out || !(config->flags & CF_REDISBLOOM))
        return CF_EINVAL;
    cf_filter *f;
    cf_status st = cf__new_without_tables(config, n, &f);
    if (st == CF_OK && (st = cf__rb_raw_begin(f, n)) != CF_OK)
        cf_free(f);
    if (st == CF_OK)
        *out = f;
    return st;
}

cf_status cf_config_resolve_sized(const cf_config *config, size_t config_size, cf_config *out,
                                  size_t out_size)
{
    cf_config c;
    cf__params p;
    uint64_t buckets;
    size_t bytes;
    if (!out || out_size < CF_CONFIG_SIZE_MIN)
        return CF_EINVAL;
    cf_status st = cf__config_sized(config, config_size, &c, &p, &buckets, &bytes, NULL);
    if (st != CF_OK)
        return st;
    c.fingerprint_bits = p.shape.f;
    c.bucket_size = p.shape.b;
    c.expansion = p.expansion; /* RedisBloom's layout rounds it */
    c.max_kicks = p.max_kicks;
    c.max_sub_filters = p.max_tables;
    c.target_fpr = 0.0;
    /* which gives the same widening */
    c.fpr_bound = p.widen ? cf__fpr_bound(p.shape.f, p.shape.b, p.widen, p.max_tables) : 0.0;
    cf__struct_out(out, out_size, &c, CF__CONFIG_END);
    return CF_OK;
}

cf_status cf_config_check_sized(const cf_config *config, size_t config_size, const char **reason)
{
    cf_config c;
    cf__params p;
    uint64_t buckets;
    size_t bytes;
    const char *why = NULL;
    cf_status st = cf__config_sized(config, config_size, &c, &p, &buckets, &bytes, &why);
    if (reason)
        *reason = why;
    return st;
}

double cf_expected_fpr(unsigned fingerprint_bits, unsigned bucket_size, double loads)
{
    return cf__expected_fpr(fingerprint_bits, bucket_size, loads);
}

/* ------------------------------------------------------------------------------------ */
/* The whole filter                                                                     */
/* ------------------------------------------------------------------------------------ */

void cf_free(cf_filter *f)
{
    if (f)
        cf__release(f);
}

void cf_clear(cf_filter *f)
{
    if (f && !cf__read_only(f))
        cf__clear(f);
}

cf_status cf_compact(cf_filter *f)
{
    if (!f)
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    return cf__compact(f);
}

cf_status cf_get_stats_sized(const cf_filter *f, cf_stats *caller, size_t size)
{
    if (!f || !caller || size < CF_STATS_SIZE_MIN)
        return CF_EINVAL;
    cf_stats st = {0};
    cf__stats(f, &st);
    cf__struct_out(caller, size, &st, CF__STATS_END);
    return CF_OK;
}

cf_status cf_get_config_sized(const cf_filter *f, cf_config *caller, size_t size)
{
    if (!f || !caller || size < CF_CONFIG_SIZE_MIN)
        return CF_EINVAL;
    cf_config c = {0};
    cf__config(f, &c);
    cf__struct_out(caller, size, &c, CF__CONFIG_END);
    return CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Keys                                                                                 */
/* ------------------------------------------------------------------------------------ */

uint64_t cf_hash(const cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return 0;
    return cf__hash(f, key, len);
}

uint64_t cf_hash_seeded(uint64_t seed, const void *key, size_t len)
{
    if (!key && len)
        return 0;
    return cf__hash_any(seed, key, len);
}

/* The bucket counts cf_place_hash takes: even (cf__alt has no fixed point then) and
 * within the limit the header gives. */
static bool cf__place_buckets_ok(uint64_t buckets)
{
    return buckets >= 2 && buckets <= CF_PLACE_MAX_BUCKETS && buckets % 2 == 0;
}

/* The mapping of a filter's first sub-filter (internal.h), for tables outside the library. */
cf_status cf_place_hash(uint64_t h, uint64_t buckets, unsigned tag_bits, cf_place *out)
{
    if (!out || !cf__place_buckets_ok(buckets) || tag_bits < CF_MIN_FINGERPRINT_BITS ||
        tag_bits > CF_MAX_FINGERPRINT_BITS)
        return CF_EINVAL;
    cf__key k = cf__key_bits(tag_bits, h);
    out->bucket[0] = cf__mulhi(k.x, buckets);
    out->bucket[1] = cf__alt(out->bucket[0], cf__alt_offset(k.mix, buckets), buckets);
    out->tag = k.fp;
    return CF_OK;
}

uint64_t cf_alt_bucket(uint64_t bucket, uint32_t tag, uint64_t buckets)
{
    if (!cf__place_buckets_ok(buckets) || bucket >= buckets || tag == 0)
        return UINT64_MAX;
    return cf__alt(bucket, cf__alt_offset(cf__fp_mix(tag), buckets), buckets);
}

/* A mapping cf_place_in takes: its bucket count as cf_place_hash's, a whole number of
 * segments of 2^16 .. 2^60 buckets if it has them, and its tag width. */
static bool cf__mapping_ok(const cf_mapping *m)
{
    unsigned s = m->segment_bits;
    return cf__place_buckets_ok(m->buckets) && m->tag_bits >= CF_MIN_FINGERPRINT_BITS &&
           m->tag_bits <= CF_MAX_FINGERPRINT_BITS &&
           (s == 0 || (s >= CF_SEGMENT_BITS && s <= 60 && m->buckets % (UINT64_C(1) << s) == 0));
}

cf_status cf_get_mapping(const cf_filter *f, cf_mapping *out)
{
    if (!f || !out || cf__is_rb(f) || cf__kind_of(f)->composite)
        return CF_EINVAL;
    const cf__table *t = &f->tables[0];
    out->buckets = t->buckets;
    out->tag_bits = t->shape->f;
    out->segment_bits = t->shape->seg;
    return CF_OK;
}

cf_status cf_place_in(const cf_mapping *m, uint64_t h, cf_place *out)
{
    if (!m || !out || !cf__mapping_ok(m))
        return CF_EINVAL;
    cf__key k = cf__key_bits(m->tag_bits, h);
    out->bucket[0] = cf__mulhi(k.x, m->buckets);
    out->bucket[1] = cf__alt_mix(out->bucket[0], k.mix, m->buckets, m->segment_bits);
    out->tag = k.fp;
    return CF_OK;
}

uint64_t cf_alt_in(const cf_mapping *m, uint64_t bucket, uint32_t tag)
{
    if (!m || !cf__mapping_ok(m) || bucket >= m->buckets || tag == 0)
        return UINT64_MAX;
    return cf__alt_mix(bucket, cf__fp_mix(tag), m->buckets, m->segment_bits);
}

cf_status cf_add_hash(cf_filter *f, uint64_t h)
{
    if (!f)
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    return f->ops->add(f, h);
}

bool cf_contains_hash(const cf_filter *f, uint64_t h)
{
    if (!f)
        return false;
    return f->ops->contains(f, h);
}

cf_status cf_delete_hash(cf_filter *f, uint64_t h)
{
    if (!f)
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    return f->ops->del(f, h);
}

uint64_t cf_count_hash(const cf_filter *f, uint64_t h)
{
    return f ? cf__count(f, h) : 0;
}

/* The batched lookups start from the newest sub-filter; a filter still loading may have
 * none complete yet, and then holds nothing a lookup can see. A concurrent filter's count
 * may be growing meanwhile. */
static bool cf__batch_empty(const cf_filter *f, size_t n, bool *out)
{
    if (cf__kind_of(f)->composite || cf__ntables_now(f) != 0)
        return false;
    memset(out, 0, n * sizeof *out);
    return true;
}

void cf_contains_many(const cf_filter *f, const uint64_t *hashes, size_t n, bool *out)
{
    if (!f || !hashes || !out || cf__batch_empty(f, n, out))
        return;
    cf__source src = {hashes, NULL, NULL};
    f->ops->contains_many(f, &src, n, out);
}

void cf_contains_keys(const cf_filter *f, const void *const *keys, const size_t *lens, size_t n,
                      bool *out)
{
    if (!f || !keys || !lens || !out || cf__batch_empty(f, n, out))
        return;
    cf__source src = {NULL, keys, lens};
    f->ops->contains_many(f, &src, n, out);
}

/* Whether a batched add may go ahead (CF_OK); if not, every key's status is the reason. */
static cf_status cf__add_batch_ok(const cf_filter *f, bool input_ok, size_t n, unsigned flags,
                                  cf_status *status)
{
    cf_status refused = !f || !input_ok || (flags & ~(unsigned)CF_ADD_UNIQUE) ? CF_EINVAL
                        : cf__read_only(f)                                    ? CF_EREADONLY
                                                                              : CF_OK;
    for (size_t i = 0; refused != CF_OK && status && i < n; i++)
        status[i] = refused;
    return refused;
}

size_t cf_add_many(cf_filter *f, const uint64_t *hashes, size_t n, unsigned flags,
                   cf_status *status)
{
    if (cf__add_batch_ok(f, hashes || !n, n, flags, status) != CF_OK)
        return 0;
    return f->ops->add_many(f, hashes, n, flags, status);
}

/* Keys that cf_add_keys hashes at a time: their hashes and statuses stay in cache (3 KiB
 * of stack) and the batch is long enough for cf_add_many's prefetching to overlap its
 * reads. */
#define CF__ADD_KEYS_BATCH 256u

/* cf_add_keys for a filter whose kind hashes keys its own way or not (own: a constant in
 * each call, so that each hashes its keys with no test per key). */
static CF__INLINE size_t cf__add_keys(cf_filter *f, bool own, const void *const *keys,
                                      const size_t *lens, size_t n, unsigned flags,
                                      cf_status *status)
{
    uint64_t hashes[CF__ADD_KEYS_BATCH];
    cf_status st[CF__ADD_KEYS_BATCH];
    size_t added = 0;
    for (size_t start = 0; start < n;) {
        /* A batch of the keys that can be hashed; a NULL key with bytes to read is
         * refused where it stands, and the next batch starts after it. */
        size_t end = start, k = 0;
        for (; end < n && k < CF__ADD_KEYS_BATCH && (keys[end] || lens[end] == 0); end++)
            hashes[k++] = own ? cf__kind_of(f)->hash(f, keys[end], lens[end])
                              : cf__hash_key(f, keys[end], lens[end]);
        added += f->ops->add_many(f, hashes, k, flags, status ? st : NULL);
        if (status)
            memcpy(status + start, st, k * sizeof *st);
        if (end < n && k < CF__ADD_KEYS_BATCH) {
            if (status)
                status[end] = CF_EINVAL;
            end++;
        }
        start = end;
    }
    return added;
}

size_t cf_add_keys(cf_filter *f, const void *const *keys, const size_t *lens, size_t n,
                   unsigned flags, cf_status *status)
{
    if (cf__add_batch_ok(f, (keys && lens) || !n, n, flags, status) != CF_OK)
        return 0;
    return cf__kind_of(f)->hash ? cf__add_keys(f, true, keys, lens, n, flags, status)
                                : cf__add_keys(f, false, keys, lens, n, flags, status);
}

cf_status cf_add(cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    return f->ops->add_key(f, key, len);
}

cf_status cf_add_unique(cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    uint64_t h = cf__hash(f, key, len);
    /* A kind with writers to hold (concurrent, windowed) checks and adds as one step, in
     * its batch: beside other writers, and for a window with its refresh of a key an older
     * generation holds. Others check, then add: a batch of one costs more than both
     * (bench/icount.sh; docs/PERFORMANCE.md, "Tuned constants"). */
    if (cf__kind_of(f)->hold) {
        cf_status st;
        f->ops->add_many(f, &h, 1, CF_ADD_UNIQUE, &st);
        return st;
    }
    if (f->ops->contains(f, h))
        return CF_EXISTS;
    return f->ops->add(f, h);
}

bool cf_contains(const cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return false;
    return f->ops->contains_key(f, key, len);
}

cf_status cf_delete(cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    return f->ops->del_key(f, key, len);
}

uint64_t cf_count(const cf_filter *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return 0;
    return cf__count(f, cf__hash(f, key, len));
}

/* ------------------------------------------------------------------------------------ */
/* Windows                                                                              */
/* ------------------------------------------------------------------------------------ */

static cf_status cf__window_call_ok(const cf_filter *f)
{
    if (!f || !cf__is_window(f))
        return CF_EINVAL;
    return cf__read_only(f) ? CF_EREADONLY : CF_OK;
}

cf_status cf_advance(cf_filter *f)
{
    cf_status st = cf__window_call_ok(f);
    return st == CF_OK ? cf__window_step(f, false, 0) : st;
}

cf_status cf_advance_to(cf_filter *f, uint64_t generation)
{
    cf_status st = cf__window_call_ok(f);
    return st == CF_OK ? cf__window_step(f, true, generation) : st;
}

uint64_t cf_generation_at(const cf_filter *f, uint64_t now)
{
    return f && cf__is_window(f) ? cf__window_generation_at(f, now) : 0;
}

/* The lookups as at a generation: the plain calls for every other filter (and for the
 * arguments those refuse). */
bool cf_contains_at(const cf_filter *f, const void *key, size_t len, uint64_t generation)
{
    if (!f || (!key && len) || !cf__is_window(f))
        return cf_contains(f, key, len);
    return cf__window_contains_at(f, cf__hash(f, key, len), generation);
}

uint64_t cf_count_at(const cf_filter *f, const void *key, size_t len, uint64_t generation)
{
    if (!f || (!key && len) || !cf__is_window(f))
        return cf_count(f, key, len);
    return cf__window_count_at(f, cf__hash(f, key, len), generation);
}

void cf_contains_keys_at(const cf_filter *f, const void *const *keys, const size_t *lens, size_t n,
                         uint64_t generation, bool *out)
{
    if (!f || !keys || !lens || !out || !cf__is_window(f)) {
        cf_contains_keys(f, keys, lens, n, out);
        return;
    }
    cf__source src = {NULL, keys, lens};
    cf__window_many_at(f, &src, n, generation, out);
}

cf_status cf_get_generation_stats_sized(const cf_filter *f, unsigned age, cf_stats *out,
                                        size_t out_size)
{
    if (!f || !cf__is_window(f) || !out || out_size < CF_STATS_SIZE_MIN)
        return CF_EINVAL;
    cf_stats st = {0};
    cf_status s = cf__window_gen_stats(f, age, &st);
    if (s == CF_OK)
        cf__struct_out(out, out_size, &st, CF__STATS_END);
    return s;
}

/* ------------------------------------------------------------------------------------ */
/* Status and version                                                                   */
/* ------------------------------------------------------------------------------------ */

const char *cf_strerror(cf_status s)
{
    switch (s) {
    case CF_OK:
        return "success";
    case CF_NOT_FOUND:
        return "key not found";
    case CF_FULL:
        return "filter is full";
    case CF_EXISTS:
        return "key already present";
    case CF_EINVAL:
        return "invalid argument";
    case CF_ENOMEM:
        return "out of memory";
    case CF_ECORRUPT:
        return "corrupt or invalid serialized filter";
    case CF_EIO:
        return "input/output error";
    case CF_EVERSION:
        return "unsupported format version (a newer library's, or the retired version 1)";
    case CF_EREADONLY:
        return "filter is read-only (memory-mapped or still loading)";
    }
    return "unknown status";
}

#define CF__STR2(x) #x
#define CF__STR(x)  CF__STR2(x)

const char *cf_version(void)
{
    return CF__STR(CF_VERSION_MAJOR) "." CF__STR(CF_VERSION_MINOR) "." CF__STR(CF_VERSION_PATCH);
}
