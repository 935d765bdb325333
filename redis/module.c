/*
 * module.c - the CF.* commands for Redis 7 and Valkey, on libcuckoofilter.
 *
 * docs/COMMANDS.md is the reference for every command. This file includes only the public
 * header of the library: the module is one more user of its API.
 *
 * Every command handler has the same shape: check the arity, parse the arguments (no key
 * touched yet), open the key and check its type, do the work, reply, replicate.
 *
 * Determinism: a replica re-executes the commands it receives, so every mutation must give
 * the same filter on both sides. The library's inserts, evictions, growth and compaction
 * are deterministic given the filter and the key. The one random thing, the secret hash
 * seed of a new filter, is never re-drawn on a replica: a command that creates a filter
 * replicates an explicit CF.RESERVE carrying the seed (the SEED option, which only the
 * replication stream and AOF replay may use), followed by the command itself.
 */
#include "module_abi.h"

#include <cuckoofilter.h>

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CF__MODULE_NAME "cuckoo"
#define CF__TYPE_NAME   "cuckoo-cf" /* data type names are exactly 9 characters */
#define CF__ENCVER      1           /* RDB encoding of the type; bump when it changes */

/* RedisBloom's limits and defaults, which clients may rely on. */
#define CF__MAX_CAPACITY    (1ll << 30)
#define CF__DEFAULT_CAP     1024
#define CF__DEFAULT_BUCKET  2
#define CF__DEFAULT_ITERS   20
#define CF__DEFAULT_EXPAND  1
#define CF__DEFAULT_FILTERS 32
/* Our default width: 16 times fewer false positives than RedisBloom's 8-bit fingerprints
 * (0.1 % against 1.6 % for a full sub-filter of 2-slot buckets) for 1.5 bytes a slot. */
#define CF__DEFAULT_FPBITS  12

/* MAXITERATIONS counts cuckoo kicks of a random walk; the library's budget counts the
 * buckets its breadth-first search may examine. 25 per iteration maps RedisBloom's
 * default of 20 to 500, the library's default, with which a filter fills to its capacity
 * before it grows (20 alone would grow it at about 77 % of capacity for 2-slot buckets). */
#define CF__KICKS_PER_ITERATION 25u

/* Allocations from this size up are first checked against the memory the server has
 * left (maxmemory, and the machine's RAM), so that an absurd CF.RESERVE or a forged
 * chunk header gets an error reply instead of the kernel's OOM killer. A header chunk is
 * checked for the whole filter it describes, whatever its tables' sizes. */
#define CF__CHECKED_ALLOC ((size_t)16 << 20)

/* The machine's memory that the checks above keep free for everything else: a sixteenth
 * (1.5 GiB of 24), so that a filter that passes cannot push the server or its neighbours
 * into swap or the OOM killer. */
#define CF__RAM_MARGIN_DIVISOR 16u

/* An incomplete filter (CF.LOADCHUNK has its header, not yet its last chunk) expires this
 * many seconds after its latest chunk unless another arrives (cf-load-timeout): a forged
 * header must not hold memory for good. The last chunk removes the expiry. */
#define CF__DEFAULT_LOAD_TIMEOUT 600
#define CF__MAX_LOAD_TIMEOUT     (30ll * 24 * 3600) /* a month, in seconds */

/* Each allocation carries its size in front, so the module knows exactly how many bytes
 * a filter holds (MEMORY USAGE, CF.INFO Size). 16 bytes keep malloc's alignment. */
#define CF__ALLOC_HEADER 16u

/* Module fields in front of the library's header chunk in CF.SCANDUMP and in the AOF:
 * deletes since the last compaction and MAXITERATIONS, then a check of those 16 bytes
 * (the filter's own seeded hash of them), each a little-endian u64. */
#define CF__PREFIX_FIELDS 16u
#define CF__PREFIX_BYTES  24u

/* CF.MEXISTS, CF.INSERT and CF.INSERTNX hash this many items per batched call (on the
 * stack: 1 KiB of hashes, plus their answers or statuses). */
#define CF__HASH_BATCH 128

/* free_effort counts one unit per this many bytes a filter holds. The server frees a
 * value on its lazy-free thread (UNLINK, FLUSHALL ASYNC, lazyfree-lazy-* settings) when
 * the effort is above 64 (its LAZYFREE_THRESHOLD): so filters over 4 MiB, whose free
 * returns megabytes of pages to the system, never stall the command loop. */
#define CF__FREE_EFFORT_UNIT ((size_t)64 << 10)

/* The version in which each command appeared (COMMAND DOCS `since`). */
#define CF__SINCE "0.1.0"

#define CF__ERR_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"
#define CF__ERR_LOADING                                                                            \
    "ERR the filter is incomplete: CF.LOADCHUNK has not received all of its chunks"

/* ------------------------------------------------------------------------------------ */
/* Settings                                                                             */
/* ------------------------------------------------------------------------------------ */

/* What a new filter is made of. */
typedef struct cf__spec {
    long long capacity, bucket_size, max_iterations, expansion, fpbits, max_filters;
    uint64_t seed;
    bool has_seed;
} cf__spec;

/* The defaults for filters created without CF.RESERVE: the module's load arguments and
 * configurations (cf__settings). Written only by them, on the server's main thread. */
static cf__spec cf__defaults = {CF__DEFAULT_CAP,
                                CF__DEFAULT_BUCKET,
                                CF__DEFAULT_ITERS,
                                CF__DEFAULT_EXPAND,
                                CF__DEFAULT_FPBITS,
                                CF__DEFAULT_FILTERS,
                                0,
                                false};

static cf_rm_type *cf__type; /* set once at load */

/* Totals over every filter of this server, for INFO cuckoo. Atomic: the server may free a
 * filter on its lazy-free thread while the main thread runs commands. */
typedef struct cf__totals {
    atomic_ullong filters, sub_filters, items, bytes;
    atomic_ullong refused_full; /* adds refused for want of room (fixed filter full, or
                                   at its sub-filter limit) */
    atomic_ullong refused_hot;  /* adds of an item whose copies fill both its buckets */
} cf__totals;

static cf__totals cf__total;

static void cf__total_add(atomic_ullong *counter, unsigned long long delta)
{
    atomic_fetch_add_explicit(counter, delta, memory_order_relaxed);
}

static void cf__total_sub(atomic_ullong *counter, unsigned long long delta)
{
    atomic_fetch_sub_explicit(counter, delta, memory_order_relaxed);
}

/* cf-load-timeout, in seconds; written only by the settings, on the main thread. */
static long long cf__load_timeout = CF__DEFAULT_LOAD_TIMEOUT;

/* ------------------------------------------------------------------------------------ */
/* The value stored under a key                                                         */
/* ------------------------------------------------------------------------------------ */

typedef struct cf__value {
    cf_filter *f;
    uint64_t deletes;        /* deletes since the last compaction (CF.INFO) */
    unsigned max_iterations; /* as given; the library runs with a scaled budget */
    size_t bytes;            /* held by f through the allocator, headers included */
    cf_rm_ctx *ctx;          /* the running command's, for the memory check; or NULL */
    cf_allocator alloc;      /* the server's allocator, with this value as context */
    /* What this filter adds to cf__total's items and sub-filters (cf__account). */
    uint64_t counted_items, counted_sub_filters;
} cf__value;

/* The memory the machine has available now (MemAvailable in /proc/meminfo), in bytes;
 * false where the system does not say. */
static bool cf__mem_available(unsigned long long *bytes)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return false;
    char line[128];
    bool found = false;
    unsigned long long kib;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1 && kib <= ULLONG_MAX / 1024;
    fclose(f);
    if (found)
        *bytes = kib * 1024;
    return found;
}

/* Is there room for `size` more bytes: under the machine's memory less a margin (the
 * lower of what it has available and its RAM less what the server holds) and, for a
 * client's command, under maxmemory (if set)? Loading (RDB, AOF, a full sync) and the
 * primary's writes on a replica are not held to maxmemory, as the server does not hold
 * them to it: a restart or a replica must end with the same data. Without a context there
 * is nothing to ask. */
static bool cf__room_for(cf_rm_ctx *ctx, size_t size)
{
    if (!ctx)
        return true;
    bool replaying =
        cf_rm.GetContextFlags(ctx) & (CF_RM_CTX_FLAGS_LOADING | CF_RM_CTX_FLAGS_REPLICATED);
    cf_rm_info *info = cf_rm.GetServerInfo(ctx, "memory");
    if (!info)
        return true;
    int e1 = 0, e2 = 0, e3 = 0;
    unsigned long long used = cf_rm.ServerInfoGetFieldUnsigned(info, "used_memory", &e1);
    unsigned long long limit = cf_rm.ServerInfoGetFieldUnsigned(info, "maxmemory", &e2);
    unsigned long long ram = cf_rm.ServerInfoGetFieldUnsigned(info, "total_system_memory", &e3);
    cf_rm.FreeServerInfo(ctx, info);
    if (e1)
        return true;
    if (!replaying && !e2 && limit && (used >= limit || size > limit - used))
        return false;
    if (!e3 && ram) {
        unsigned long long left = used < ram ? ram - used : 0, avail;
        if (cf__mem_available(&avail) && avail < left)
            left = avail;
        unsigned long long margin = ram / CF__RAM_MARGIN_DIVISOR;
        if (left <= margin || size > left - margin)
            return false;
    }
    return true;
}

static void *cf__alloc(void *ctx, size_t size)
{
    cf__value *v = ctx;
    if (size > SIZE_MAX - CF__ALLOC_HEADER)
        return NULL;
    if (size >= CF__CHECKED_ALLOC && !cf__room_for(v->ctx, size))
        return NULL;
    unsigned char *p = cf_rm.TryAlloc(size + CF__ALLOC_HEADER);
    if (!p)
        return NULL;
    memcpy(p, &size, sizeof size);
    v->bytes += size + CF__ALLOC_HEADER;
    cf__total_add(&cf__total.bytes, size + CF__ALLOC_HEADER);
    return p + CF__ALLOC_HEADER;
}

static void cf__free(void *ctx, void *ptr)
{
    cf__value *v = ctx;
    if (!ptr)
        return;
    unsigned char *p = (unsigned char *)ptr - CF__ALLOC_HEADER;
    size_t size;
    memcpy(&size, p, sizeof size);
    v->bytes -= size + CF__ALLOC_HEADER;
    cf__total_sub(&cf__total.bytes, size + CF__ALLOC_HEADER);
    cf_rm.Free(p);
}

/* A value with no filter yet; the filter is made with v->alloc. */
static cf__value *cf__value_alloc(cf_rm_ctx *ctx, unsigned max_iterations)
{
    cf__value *v = cf_rm.TryAlloc(sizeof *v);
    if (!v)
        return NULL;
    memset(v, 0, sizeof *v);
    v->ctx = ctx;
    v->max_iterations = max_iterations;
    v->alloc = (cf_allocator){cf__alloc, cf__free, v};
    cf__total_add(&cf__total.filters, 1);
    cf__total_add(&cf__total.bytes, sizeof *v);
    return v;
}

/* Bring cf__total's items and sub-filters up to date with v's filter, after a change. */
static void cf__account(cf__value *v)
{
    cf_stats s = {0};
    cf_get_stats(v->f, &s);
    cf__total_add(&cf__total.items, s.items);
    cf__total_sub(&cf__total.items, v->counted_items);
    cf__total_add(&cf__total.sub_filters, s.sub_filters);
    cf__total_sub(&cf__total.sub_filters, v->counted_sub_filters);
    v->counted_items = s.items;
    v->counted_sub_filters = s.sub_filters;
}

/* Also the server's free callback, possibly on its lazy-free thread. */
static void cf__value_free(cf__value *v)
{
    if (!v)
        return;
    cf__total_sub(&cf__total.items, v->counted_items);
    cf__total_sub(&cf__total.sub_filters, v->counted_sub_filters);
    cf__total_sub(&cf__total.filters, 1);
    cf__total_sub(&cf__total.bytes, sizeof *v);
    cf_free(v->f);
    cf_rm.Free(v);
}

static unsigned cf__kicks(long long iterations)
{
    unsigned long long k = (unsigned long long)iterations * CF__KICKS_PER_ITERATION;
    return k > CF_MAX_MAX_KICKS ? CF_MAX_MAX_KICKS : (unsigned)k;
}

static cf_status cf__value_new(cf_rm_ctx *ctx, const cf__spec *s, cf__value **out)
{
    cf__value *v = cf__value_alloc(ctx, (unsigned)s->max_iterations);
    if (!v)
        return CF_ENOMEM;
    uint64_t seed = s->seed;
    if (!s->has_seed) /* a secret per filter: clients cannot aim keys at one bucket */
        cf_rm.GetRandomBytes((unsigned char *)&seed, sizeof seed);
    cf_config c = {
        .capacity = (uint64_t)s->capacity,
        .fingerprint_bits = (unsigned)s->fpbits,
        .bucket_size = (unsigned)s->bucket_size,
        .max_kicks = cf__kicks(s->max_iterations),
        .expansion = (unsigned)s->expansion,
        .seed = seed,
        .flags = CF_FIXED_SEED, /* chosen here or by the primary: a replica must not redraw */
        .allocator = &v->alloc,
        .max_sub_filters = (unsigned)s->max_filters,
    };
    cf_status st = cf_new(&c, &v->f);
    if (st != CF_OK) {
        cf__value_free(v);
        return st;
    }
    *out = v;
    return CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Helpers shared by the commands                                                       */
/* ------------------------------------------------------------------------------------ */

static bool cf__resp3(cf_rm_ctx *ctx)
{
    return (cf_rm.GetContextFlags(ctx) & CF_RM_CTX_FLAGS_RESP3) != 0;
}

/* Is the argument `word`, ignoring ASCII case? */
static bool cf__is(const cf_rm_string *arg, const char *word)
{
    size_t len;
    const char *s = cf_rm.StringPtrLen(arg, &len);
    if (len != strlen(word))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i] >= 'a' && s[i] <= 'z' ? (char)(s[i] - 'a' + 'A') : s[i];
        char w = word[i] >= 'a' && word[i] <= 'z' ? (char)(word[i] - 'a' + 'A') : word[i];
        if (c != w)
            return false;
    }
    return true;
}

static bool cf__ll(const cf_rm_string *arg, long long *out)
{
    return cf_rm.StringToLongLong(arg, out) == CF_RM_OK;
}

typedef enum cf__kind { CF__EMPTY, CF__OURS, CF__OTHER } cf__kind;

/* Open the key argv[1]. For one of ours, *v is its value, bound to ctx for the memory
 * check until cf__close. */
static cf__kind cf__open(cf_rm_ctx *ctx, cf_rm_string *name, int mode, cf_rm_key **key,
                         cf__value **v)
{
    *key = cf_rm.OpenKey(ctx, name, mode);
    *v = NULL;
    int type = cf_rm.KeyType(*key);
    if (type == CF_RM_KEYTYPE_EMPTY)
        return CF__EMPTY;
    if (type != CF_RM_KEYTYPE_MODULE || cf_rm.ModuleTypeGetType(*key) != cf__type)
        return CF__OTHER;
    *v = cf_rm.ModuleTypeGetValue(*key);
    (*v)->ctx = ctx;
    return CF__OURS;
}

static void cf__close(cf_rm_key *key, cf__value *v)
{
    if (v)
        v->ctx = NULL;
    cf_rm.CloseKey(key);
}

/* Close the key and send an error reply. */
static int cf__fail(cf_rm_ctx *ctx, cf_rm_key *key, cf__value *v, const char *err)
{
    cf__close(key, v);
    return cf_rm.ReplyWithError(ctx, err);
}

/* Replicate the creation of v under `key` with everything that defines it, the secret
 * seed included, so that the replica makes the very same filter. */
static void cf__replicate_reserve(cf_rm_ctx *ctx, cf_rm_string *key, const cf__value *v)
{
    cf_config c;
    cf_get_config(v->f, &c);
    cf_rm.Replicate(ctx, "CF.RESERVE", "slclclclclclcl", key, (long long)c.capacity, "BUCKETSIZE",
                    (long long)c.bucket_size, "MAXITERATIONS", (long long)v->max_iterations,
                    "EXPANSION", (long long)c.expansion, "FPBITS", (long long)c.fingerprint_bits,
                    "MAXFILTERS", (long long)c.max_sub_filters, "SEED", (long long)c.seed);
}

/* Make a filter for a command that creates one on a missing key (CF.ADD, CF.INSERT). */
static const char *cf__create(cf_rm_ctx *ctx, cf_rm_key *key, long long capacity, cf__value **v)
{
    cf__spec s = cf__defaults;
    s.capacity = capacity;
    cf_status st = cf__value_new(ctx, &s, v);
    if (st == CF_ENOMEM)
        return "ERR Insufficient memory to create filter";
    if (st != CF_OK)
        return "ERR Could not create filter";
    cf_rm.ModuleTypeSetValue(key, cf__type, *v);
    return NULL;
}

/* Why an add was refused, and what the client is told. */
typedef enum cf__refusal {
    CF__NO_MEMORY, /* growing failed; the filter is unchanged */
    CF__AT_LIMIT,  /* a growing filter that would need a sub-filter beyond its limit */
    CF__NO_ROOM,   /* a fixed filter with no room left */
    CF__HOT,       /* the item's copies fill both of its buckets */
} cf__refusal;

static const char *const cf__refusal_error[] = {
    [CF__NO_MEMORY] = "ERR Insufficient memory",
    [CF__AT_LIMIT] = "Maximum expansions reached",
    [CF__NO_ROOM] = "Filter is full",
    [CF__HOT] = ("Filter is full for this item: its copies fill both of its buckets "
                 "(CF.ADDNX adds an item once)"), /* one string: clang asks for the () */
};

/* Why the add of `item` (status st, not CF_OK nor CF_EXISTS) was refused; counted in the
 * totals of INFO cuckoo. The library refuses an item whose copies fill both of its buckets
 * (a growing filter does not grow for one item), and otherwise only when there is no room
 * and no sub-filter to add. The test is on the filter's contents alone, which a refused
 * add leaves as they were, so CF.INSERT can ask after its whole batch went in and get
 * the answer CF.ADD would have got. */
static cf__refusal cf__refused(const cf__value *v, cf_status st, const char *item, size_t len)
{
    cf__refusal why;
    cf_config c;
    cf_get_config(v->f, &c);
    if (st == CF_ENOMEM)
        why = CF__NO_MEMORY;
    else if (cf_count(v->f, item, len) >= 2u * c.bucket_size)
        why = CF__HOT;
    else
        why = c.expansion > 0 ? CF__AT_LIMIT : CF__NO_ROOM;
    if (why == CF__HOT)
        cf__total_add(&cf__total.refused_hot, 1);
    else if (why != CF__NO_MEMORY)
        cf__total_add(&cf__total.refused_full, 1);
    return why;
}

/* After a write command's work on the filter under `name`: the totals follow it, the
 * command goes to replicas and the AOF as it came, and, if the filter changed,
 * keyspace-event subscribers hear `event` (class d, module events). */
static void cf__wrote(cf_rm_ctx *ctx, cf_rm_string *name, cf__value *v, const char *event,
                      bool changed)
{
    cf__account(v);
    cf_rm.ReplicateVerbatim(ctx);
    if (changed)
        cf_rm.NotifyKeyspaceEvent(ctx, CF_RM_NOTIFY_MODULE, event, name);
}

/* After a delete: compact once deletes pass a tenth of the items (RedisBloom's rule), so
 * that a filter that grew and then emptied gives its memory back. */
static void cf__after_delete(cf__value *v)
{
    cf_stats s;
    v->deletes++;
    cf_get_stats(v->f, &s);
    if (s.sub_filters > 1 && v->deletes > s.items / 10) {
        cf_compact(v->f);
        v->deletes = 0;
    }
}

/* ------------------------------------------------------------------------------------ */
/* CF.RESERVE key capacity [BUCKETSIZE b] [MAXITERATIONS m] [EXPANSION e] [FPBITS f]    */
/*            [MAXFILTERS n]                                                            */
/* ------------------------------------------------------------------------------------ */

typedef struct cf__option {
    const char *name;
    long long min, max;
    size_t offset; /* of the long long in cf__spec */
    const char *parse_error, *range_error;
} cf__option;

static const cf__option cf__options[] = {
    {"BUCKETSIZE", 1, CF_MAX_BUCKET_SIZE, offsetof(cf__spec, bucket_size),
     "Couldn't parse BUCKETSIZE", "BUCKETSIZE: value must be in the range [1, 255]"},
    {"MAXITERATIONS", 1, CF_MAX_MAX_KICKS, offsetof(cf__spec, max_iterations),
     "Couldn't parse MAXITERATIONS", "MAXITERATIONS: value must be in the range [1, 65535]"},
    {"EXPANSION", 0, CF_MAX_EXPANSION, offsetof(cf__spec, expansion), "Couldn't parse EXPANSION",
     "EXPANSION: value must be in the range [0, 32768]"},
    {"FPBITS", CF_MIN_FINGERPRINT_BITS, CF_MAX_FINGERPRINT_BITS, offsetof(cf__spec, fpbits),
     "Couldn't parse FPBITS", "FPBITS: value must be in the range [4, 32]"},
    {"MAXFILTERS", 1, CF_MAX_SUB_FILTERS, offsetof(cf__spec, max_filters),
     "Couldn't parse MAXFILTERS", "MAXFILTERS: value must be in the range [1, 65536]"},
};

/* Apply one option pair to s; NULL, or the error to reply with. */
static const char *cf__reserve_option(cf_rm_ctx *ctx, const cf_rm_string *name,
                                      const cf_rm_string *value, cf__spec *s)
{
    long long n;
    if (cf__is(name, "SEED")) {
        /* Only the primary (through replication) and AOF replay choose a seed. */
        int flags = cf_rm.GetContextFlags(ctx);
        if (!(flags & (CF_RM_CTX_FLAGS_REPLICATED | CF_RM_CTX_FLAGS_LOADING)))
            return "Unknown argument received";
        if (!cf__ll(value, &n))
            return "Couldn't parse SEED";
        s->seed = (uint64_t)n;
        s->has_seed = true;
        return NULL;
    }
    for (size_t i = 0; i < sizeof cf__options / sizeof cf__options[0]; i++) {
        const cf__option *o = &cf__options[i];
        if (!cf__is(name, o->name))
            continue;
        if (!cf__ll(value, &n))
            return o->parse_error;
        if (n < o->min || n > o->max)
            return o->range_error;
        memcpy((char *)s + o->offset, &n, sizeof n);
        return NULL;
    }
    return "Unknown argument received";
}

static int cf__cmd_reserve(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc < 3 || argc % 2 == 0)
        return cf_rm.WrongArity(ctx);
    cf__spec s = cf__defaults;
    if (!cf__ll(argv[2], &s.capacity))
        return cf_rm.ReplyWithError(ctx, "Bad capacity");
    for (int i = 3; i < argc; i += 2) {
        const char *err = cf__reserve_option(ctx, argv[i], argv[i + 1], &s);
        if (err)
            return cf_rm.ReplyWithError(ctx, err);
    }
    if (s.capacity < 2 * s.bucket_size || s.capacity > CF__MAX_CAPACITY)
        return cf_rm.ReplyWithError(ctx,
                                    "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]");

    cf_rm_key *key;
    cf__value *v;
    switch (cf__open(ctx, argv[1], CF_RM_READ | CF_RM_WRITE, &key, &v)) {
    case CF__OURS:
        return cf__fail(ctx, key, v, "ERR item exists");
    case CF__OTHER:
        return cf__fail(ctx, key, v, CF__ERR_WRONGTYPE);
    case CF__EMPTY:
        break;
    }
    cf_status st = cf__value_new(ctx, &s, &v);
    if (st != CF_OK)
        return cf__fail(ctx, key, NULL,
                        st == CF_ENOMEM ? "ERR Insufficient memory to create filter"
                                        : "ERR Could not create filter");
    cf_rm.ModuleTypeSetValue(key, cf__type, v);
    cf__replicate_reserve(ctx, argv[1], v);
    cf__account(v);
    cf_rm.NotifyKeyspaceEvent(ctx, CF_RM_NOTIFY_MODULE, "cf.reserve", argv[1]);
    cf__close(key, v);
    return cf_rm.ReplyWithSimpleString(ctx, "OK");
}

/* ------------------------------------------------------------------------------------ */
/* CF.ADD key item, CF.ADDNX key item                                                   */
/* ------------------------------------------------------------------------------------ */

static int cf__add_command(cf_rm_ctx *ctx, cf_rm_string **argv, int argc, bool nx)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cf__value *v;
    bool created = false;
    switch (cf__open(ctx, argv[1], CF_RM_READ | CF_RM_WRITE, &key, &v)) {
    case CF__OTHER:
        return cf__fail(ctx, key, v, CF__ERR_WRONGTYPE);
    case CF__EMPTY: {
        const char *err = cf__create(ctx, key, cf__defaults.capacity, &v);
        if (err)
            return cf__fail(ctx, key, NULL, err);
        created = true;
        break;
    }
    case CF__OURS:
        if (cf_is_loading(v->f))
            return cf__fail(ctx, key, v, CF__ERR_LOADING);
        break;
    }
    size_t len;
    const char *item = cf_rm.StringPtrLen(argv[2], &len);
    cf_status st = nx ? cf_add_unique(v->f, item, len) : cf_add(v->f, item, len);
    if (st != CF_OK && st != CF_EXISTS) {
        const char *err = cf__refusal_error[cf__refused(v, st, item, len)];
        if (created) /* cannot happen (a new filter has room), but never leave it half-made */
            cf_rm.DeleteKey(key);
        return cf__fail(ctx, key, created ? NULL : v, err);
    }
    if (created)
        cf__replicate_reserve(ctx, argv[1], v);
    cf__wrote(ctx, argv[1], v, nx ? "cf.addnx" : "cf.add", st == CF_OK);
    cf__close(key, v);
    return cf_rm.ReplyWithBool(ctx, st == CF_OK);
}

static int cf__cmd_add(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    return cf__add_command(ctx, argv, argc, false);
}

static int cf__cmd_addnx(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    return cf__add_command(ctx, argv, argc, true);
}

/* ------------------------------------------------------------------------------------ */
/* CF.INSERT key [CAPACITY c] [NOCREATE] ITEMS item..., CF.INSERTNX (same)              */
/* ------------------------------------------------------------------------------------ */

static int cf__insert_command(cf_rm_ctx *ctx, cf_rm_string **argv, int argc, bool nx)
{
    if (argc < 4)
        return cf_rm.WrongArity(ctx);
    long long capacity = cf__defaults.capacity;
    bool nocreate = false, has_capacity = false;
    int items = argc;
    for (int i = 2; i < argc && items == argc; i++) {
        if (cf__is(argv[i], "CAPACITY")) {
            if (++i == argc)
                return cf_rm.WrongArity(ctx);
            if (!cf__ll(argv[i], &capacity))
                return cf_rm.ReplyWithError(ctx, "Bad capacity");
            has_capacity = true;
        } else if (cf__is(argv[i], "NOCREATE")) {
            nocreate = true;
        } else if (cf__is(argv[i], "ITEMS")) {
            items = i + 1;
        } else {
            return cf_rm.ReplyWithError(ctx, "Unknown argument received");
        }
    }
    if (items >= argc)
        return cf_rm.WrongArity(ctx);
    /* The range depends on this server's cf-bucket-size. A command from the primary or the
     * AOF was checked when it ran there, and the filter it may create arrives as an explicit
     * CF.RESERVE first: refusing it here, under other module arguments, would drop its
     * items on this side only. */
    bool replayed =
        cf_rm.GetContextFlags(ctx) & (CF_RM_CTX_FLAGS_REPLICATED | CF_RM_CTX_FLAGS_LOADING);
    if (has_capacity && !replayed &&
        (capacity < 2 * cf__defaults.bucket_size || capacity > CF__MAX_CAPACITY))
        return cf_rm.ReplyWithError(
            ctx, "Capacity must be in the range [cf-bucket-size * 2, 1073741824]");

    /* Every item's outcome comes before the reply, which is an error instead of the array
     * if an item met the sub-filter limit. */
    size_t count = (size_t)(argc - items);
    cf_status *outcome = cf_rm.TryAlloc(count * sizeof *outcome);
    if (!outcome)
        return cf_rm.ReplyWithError(ctx, "ERR Insufficient memory");
    cf_rm_key *key;
    cf__value *v;
    bool created = false;
    const char *err = NULL;
    switch (cf__open(ctx, argv[1], CF_RM_READ | CF_RM_WRITE, &key, &v)) {
    case CF__OTHER:
        err = CF__ERR_WRONGTYPE;
        break;
    case CF__EMPTY:
        if (nocreate)
            err = "ERR not found";
        else if (!(err = cf__create(ctx, key, capacity, &v)))
            created = true;
        break;
    case CF__OURS:
        if (cf_is_loading(v->f))
            err = CF__ERR_LOADING;
        break;
    }
    if (err) {
        cf_rm.Free(outcome);
        return cf__fail(ctx, key, v, err);
    }
    /* The items go in batch by batch through cf_add_many, which is exactly one cf_add (for
     * CF.INSERTNX, cf_add_unique) per item in order, with the same statuses: a refused
     * item does not stop the others, and the filter ends as the loop of single adds would
     * leave it, on a replica too. */
    uint64_t hashes[CF__HASH_BATCH];
    bool at_limit = false;
    size_t added = 0;
    for (size_t i = 0; i < count;) {
        size_t n = 0;
        for (; n < CF__HASH_BATCH && i + n < count; n++) {
            size_t len;
            const char *item = cf_rm.StringPtrLen(argv[(size_t)items + i + n], &len);
            hashes[n] = cf_hash(v->f, item, len);
        }
        added += cf_add_many(v->f, hashes, n, nx ? CF_ADD_UNIQUE : 0u, outcome + i);
        for (size_t j = i; j < i + n; j++)
            if (outcome[j] != CF_OK && outcome[j] != CF_EXISTS) {
                size_t len;
                const char *item = cf_rm.StringPtrLen(argv[(size_t)items + j], &len);
                at_limit |= cf__refused(v, outcome[j], item, len) == CF__AT_LIMIT;
            }
        i += n;
    }
    if (created)
        cf__replicate_reserve(ctx, argv[1], v);
    cf__wrote(ctx, argv[1], v, nx ? "cf.insertnx" : "cf.insert", added > 0);
    if (at_limit) { /* as RedisBloom answers; the items that found room stay */
        cf_rm.Free(outcome);
        return cf__fail(ctx, key, v, cf__refusal_error[CF__AT_LIMIT]);
    }
    bool resp3 = cf__resp3(ctx);
    cf_rm.ReplyWithArray(ctx, (long)count);
    for (size_t j = 0; j < count; j++) {
        cf_status st = outcome[j];
        if (nx)
            cf_rm.ReplyWithLongLong(ctx, st == CF_OK ? 1 : st == CF_EXISTS ? 0 : -1);
        else if (resp3)
            cf_rm.ReplyWithBool(ctx, st == CF_OK);
        else
            cf_rm.ReplyWithLongLong(ctx, st == CF_OK ? 1 : -1);
    }
    cf_rm.Free(outcome);
    cf__close(key, v);
    return CF_RM_OK;
}

static int cf__cmd_insert(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    return cf__insert_command(ctx, argv, argc, false);
}

static int cf__cmd_insertnx(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    return cf__insert_command(ctx, argv, argc, true);
}

/* ------------------------------------------------------------------------------------ */
/* CF.EXISTS key item, CF.MEXISTS key item..., CF.COUNT key item                        */
/* ------------------------------------------------------------------------------------ */
/* A missing key, or a key of another type, holds nothing: the answer is "no", as in
 * RedisBloom. An incomplete filter (mid CF.LOADCHUNK) could miss keys, so it refuses. */

static int cf__cmd_exists(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cf__value *v;
    bool found = false;
    if (cf__open(ctx, argv[1], CF_RM_READ, &key, &v) == CF__OURS) {
        if (cf_is_loading(v->f))
            return cf__fail(ctx, key, v, CF__ERR_LOADING);
        size_t len;
        const char *item = cf_rm.StringPtrLen(argv[2], &len);
        found = cf_contains(v->f, item, len);
    }
    cf__close(key, v);
    return cf_rm.ReplyWithBool(ctx, found);
}

static int cf__cmd_mexists(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc < 3)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cf__value *v;
    if (cf__open(ctx, argv[1], CF_RM_READ, &key, &v) == CF__OURS && cf_is_loading(v->f))
        return cf__fail(ctx, key, v, CF__ERR_LOADING);
    cf_rm.ReplyWithArray(ctx, argc - 2);
    uint64_t hashes[CF__HASH_BATCH];
    bool found[CF__HASH_BATCH];
    for (int i = 2; i < argc;) {
        size_t n = 0;
        for (; n < CF__HASH_BATCH && i + (int)n < argc; n++) {
            size_t len;
            const char *item = cf_rm.StringPtrLen(argv[i + (int)n], &len);
            hashes[n] = v ? cf_hash(v->f, item, len) : 0;
            found[n] = false;
        }
        if (v)
            cf_contains_many(v->f, hashes, n, found);
        for (size_t j = 0; j < n; j++)
            cf_rm.ReplyWithBool(ctx, found[j]);
        i += (int)n;
    }
    cf__close(key, v);
    return CF_RM_OK;
}

static int cf__cmd_count(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cf__value *v;
    uint64_t n = 0;
    if (cf__open(ctx, argv[1], CF_RM_READ, &key, &v) == CF__OURS) {
        if (cf_is_loading(v->f))
            return cf__fail(ctx, key, v, CF__ERR_LOADING);
        size_t len;
        const char *item = cf_rm.StringPtrLen(argv[2], &len);
        n = cf_count(v->f, item, len);
    }
    cf__close(key, v);
    return cf_rm.ReplyWithLongLong(ctx, n > LLONG_MAX ? LLONG_MAX : (long long)n);
}

/* ------------------------------------------------------------------------------------ */
/* CF.DEL key item, CF.COMPACT key                                                      */
/* ------------------------------------------------------------------------------------ */

/* Open for writing a key that must hold a complete filter. Otherwise send `missing` (the
 * key is missing or of another type) or the incomplete-filter error, and return NULL. */
static cf__value *cf__open_complete(cf_rm_ctx *ctx, cf_rm_string *name, cf_rm_key **key,
                                    const char *missing)
{
    cf__value *v;
    if (cf__open(ctx, name, CF_RM_READ | CF_RM_WRITE, key, &v) != CF__OURS) {
        cf__fail(ctx, *key, v, missing);
        return NULL;
    }
    if (cf_is_loading(v->f)) {
        cf__fail(ctx, *key, v, CF__ERR_LOADING);
        return NULL;
    }
    return v;
}

static int cf__cmd_del(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cf__value *v = cf__open_complete(ctx, argv[1], &key, "Not found");
    if (!v)
        return CF_RM_OK;
    size_t len;
    const char *item = cf_rm.StringPtrLen(argv[2], &len);
    bool deleted = cf_delete(v->f, item, len) == CF_OK;
    if (deleted)
        cf__after_delete(v);
    cf__wrote(ctx, argv[1], v, "cf.del", deleted);
    cf__close(key, v);
    return cf_rm.ReplyWithBool(ctx, deleted);
}

static int cf__cmd_compact(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 2)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cf__value *v = cf__open_complete(ctx, argv[1], &key, "Cuckoo filter was not found");
    if (!v)
        return CF_RM_OK;
    cf_compact(v->f);
    v->deletes = 0;
    cf__wrote(ctx, argv[1], v, "cf.compact", true);
    cf__close(key, v);
    return cf_rm.ReplyWithSimpleString(ctx, "OK");
}

/* ------------------------------------------------------------------------------------ */
/* CF.INFO key, CF.DEBUG key                                                            */
/* ------------------------------------------------------------------------------------ */

/* Open a key that must hold a filter; on failure the error is sent and NULL returned. */
static cf__value *cf__open_existing(cf_rm_ctx *ctx, cf_rm_string *name, cf_rm_key **key)
{
    cf__value *v;
    switch (cf__open(ctx, name, CF_RM_READ, key, &v)) {
    case CF__EMPTY:
        cf__fail(ctx, *key, v, "ERR not found");
        return NULL;
    case CF__OTHER:
        cf__fail(ctx, *key, v, CF__ERR_WRONGTYPE);
        return NULL;
    case CF__OURS:
        break;
    }
    return v;
}

/* The figures CF.INFO and CF.DEBUG report. */
typedef struct cf__figures {
    cf_config config;
    cf_stats stats;
    uint64_t first_buckets; /* buckets of the first sub-filter */
    uint64_t size;          /* bytes held, as MEMORY USAGE counts them */
} cf__figures;

static void cf__figures_of(const cf__value *v, cf__figures *out)
{
    cf_get_config(v->f, &out->config);
    cf_get_stats(v->f, &out->stats);
    /* Sub-filter k has e^k times the first one's buckets. */
    uint64_t sum = 0, term = 1;
    for (unsigned k = 0; k < out->stats.sub_filters; k++) {
        sum += term;
        term *= out->config.expansion;
    }
    out->first_buckets = sum ? out->stats.buckets / sum : 0;
    out->size = sizeof *v + v->bytes;
}

static int cf__cmd_info(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 2)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cf__value *v = cf__open_existing(ctx, argv[1], &key);
    if (!v)
        return CF_RM_OK;
    cf__figures g;
    cf__figures_of(v, &g);
    const struct {
        const char *name;
        uint64_t value;
    } fields[] = {
        {"Size", g.size},
        {"Number of buckets", g.first_buckets},
        {"Number of filters", g.stats.sub_filters},
        {"Number of items inserted", g.stats.items},
        {"Number of items deleted", v->deletes},
        {"Bucket size", g.stats.bucket_size},
        {"Expansion rate", g.config.expansion},
        {"Max iterations", v->max_iterations},
    }; /* exactly RedisBloom's fields, in its order: clients reject others (CF.DEBUG has more) */
    long n = (long)(sizeof fields / sizeof fields[0]);
    if (cf__resp3(ctx))
        cf_rm.ReplyWithMap(ctx, n);
    else
        cf_rm.ReplyWithArray(ctx, 2 * n);
    for (long i = 0; i < n; i++) {
        cf_rm.ReplyWithSimpleString(ctx, fields[i].name);
        cf_rm.ReplyWithLongLong(ctx, (long long)fields[i].value);
    }
    cf__close(key, v);
    return CF_RM_OK;
}

static int cf__cmd_debug(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 2)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cf__value *v = cf__open_existing(ctx, argv[1], &key);
    if (!v)
        return CF_RM_OK;
    cf__figures g;
    cf__figures_of(v, &g);
    char text[256];
    int n = snprintf(text, sizeof text,
                     "bktsize:%u buckets:%llu items:%llu deletes:%llu filters:%u "
                     "max_iterations:%u expansion:%u fpbits:%u",
                     g.stats.bucket_size, (unsigned long long)g.first_buckets,
                     (unsigned long long)g.stats.items, (unsigned long long)v->deletes,
                     g.stats.sub_filters, v->max_iterations, g.config.expansion,
                     g.stats.fingerprint_bits);
    cf__close(key, v);
    return cf_rm.ReplyWithStringBuffer(ctx, text, (size_t)n);
}

/* ------------------------------------------------------------------------------------ */
/* Chunks: CF.SCANDUMP, CF.LOADCHUNK, and the type callbacks built on them              */
/* ------------------------------------------------------------------------------------ */
/* A filter travels as the library's chunks (docs/FORMAT.md): a header chunk, then data
 * chunks of at most 16 MiB, each checked as it arrives. The module puts its own fields
 * (CF__PREFIX_BYTES) in front of the header chunk. */

static void cf__put_u64(unsigned char *p, uint64_t x)
{
    for (unsigned i = 0; i < 8; i++)
        p[i] = (unsigned char)(x >> (8 * i));
}

static uint64_t cf__get_u64(const unsigned char *p)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 8; i++)
        x |= (uint64_t)p[i] << (8 * i);
    return x;
}

/* The check of the module's two fields: the filter's own hash of them (little-endian). */
static uint64_t cf__fields_check(const cf_filter *f, uint64_t deletes, uint64_t iterations)
{
    unsigned char b[CF__PREFIX_FIELDS];
    cf__put_u64(b, deletes);
    cf__put_u64(b + 8, iterations);
    return cf_hash(f, b, sizeof b);
}

/* A buffer that holds any chunk of v, prefix included. Commands get NULL when memory is
 * short; saving (AOF, digest) treats that like the server's own allocations do. */
static unsigned char *cf__chunk_buffer(const cf__value *v, size_t *cap, bool must)
{
    *cap = cf_dump_chunk_max(v->f) + CF__PREFIX_BYTES;
    return must ? cf_rm.Alloc(*cap) : cf_rm.TryAlloc(*cap);
}

/* The chunk at *cursor into buf (which has room for the prefix), advancing *cursor;
 * *len = 0 at the end. The header chunk gets the module's fields in front. */
static cf_status cf__dump(const cf__value *v, uint64_t *cursor, unsigned char *buf, size_t cap,
                          size_t *len)
{
    bool header = *cursor == 0;
    size_t skip = header ? CF__PREFIX_BYTES : 0;
    cf_status st = cf_dump_chunk(v->f, cursor, buf + skip, cap - skip, len);
    if (st == CF_OK && header) {
        cf__put_u64(buf, v->deletes);
        cf__put_u64(buf + 8, v->max_iterations);
        cf__put_u64(buf + CF__PREFIX_FIELDS, cf__fields_check(v->f, v->deletes, v->max_iterations));
        *len += CF__PREFIX_BYTES;
    }
    return st;
}

/* Give v's filter its next chunk. The first (the header) is checked first for the memory
 * of the whole filter it describes, so that a forged one is refused before anything is
 * allocated; the tables then get their memory as their chunks arrive. */
static cf_status cf__take_chunk(cf__value *v, uint64_t cursor, const void *data, size_t len)
{
    size_t need;
    if (!v->f && cf_chunk_bytes_needed(data, len, &need) == CF_OK && !cf__room_for(v->ctx, need))
        return CF_ENOMEM;
    return cf_load_chunk(&v->f, cursor, data, len, &v->alloc);
}

/* Start a value from a prefixed header chunk: CF_OK and *out, or the library's status
 * (CF_ECORRUPT for a bad prefix). */
static cf_status cf__load_header(cf_rm_ctx *ctx, uint64_t cursor, const unsigned char *data,
                                 size_t len, cf__value **out)
{
    if (len < CF__PREFIX_BYTES)
        return CF_ECORRUPT;
    uint64_t iterations = cf__get_u64(data + 8);
    /* CF.INFO replies with the deletes as a signed 64-bit integer; no filter gets near. */
    if (iterations < 1 || iterations > CF_MAX_MAX_KICKS || cf__get_u64(data) > INT64_MAX)
        return CF_ECORRUPT;
    cf__value *v = cf__value_alloc(ctx, (unsigned)iterations);
    if (!v)
        return CF_ENOMEM;
    v->deletes = cf__get_u64(data);
    cf_status st = cf__take_chunk(v, cursor, data + CF__PREFIX_BYTES, len - CF__PREFIX_BYTES);
    if (st == CF_OK && cf__get_u64(data + CF__PREFIX_FIELDS) !=
                           cf__fields_check(v->f, v->deletes, v->max_iterations))
        st = CF_ECORRUPT; /* the fields do not belong with this header */
    if (st != CF_OK) {
        cf__value_free(v);
        return st;
    }
    *out = v;
    return CF_OK;
}

static int cf__cmd_scandump(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    long long it;
    if (!cf__ll(argv[2], &it) || it < 0)
        return cf_rm.ReplyWithError(ctx, "Invalid position");
    cf_rm_key *key;
    cf__value *v = cf__open_existing(ctx, argv[1], &key);
    if (!v)
        return CF_RM_OK;
    size_t cap, len;
    unsigned char *buf = cf__chunk_buffer(v, &cap, false);
    if (!buf)
        return cf__fail(ctx, key, v, "ERR Insufficient memory");
    uint64_t cursor = (uint64_t)it;
    if (cf__dump(v, &cursor, buf, cap, &len) != CF_OK) {
        cf_rm.Free(buf);
        return cf__fail(ctx, key, v, "Invalid position");
    }
    cf_rm.ReplyWithArray(ctx, 2);
    cf_rm.ReplyWithLongLong(ctx, (long long)cursor);
    if (len)
        cf_rm.ReplyWithStringBuffer(ctx, (const char *)buf, len);
    else
        cf_rm.ReplyWithNull(ctx);
    cf_rm.Free(buf);
    cf__close(key, v);
    return CF_RM_OK;
}

static int cf__cmd_loadchunk(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 4)
        return cf_rm.WrongArity(ctx);
    long long it;
    if (!cf__ll(argv[2], &it) || it <= 0)
        return cf_rm.ReplyWithError(ctx, "Invalid position");
    size_t len;
    const unsigned char *data = (const unsigned char *)cf_rm.StringPtrLen(argv[3], &len);
    cf_rm_key *key;
    cf__value *v;
    cf_status st;
    switch (cf__open(ctx, argv[1], CF_RM_READ | CF_RM_WRITE, &key, &v)) {
    case CF__OTHER:
        return cf__fail(ctx, key, v, CF__ERR_WRONGTYPE);
    case CF__EMPTY: /* the header chunk: the key is made here */
        if (len < CF__PREFIX_BYTES)
            return cf__fail(ctx, key, NULL, "Invalid header");
        st = cf__load_header(ctx, (uint64_t)it, data, len, &v);
        if (st != CF_OK)
            return cf__fail(ctx, key, NULL,
                            st == CF_ENOMEM ? "ERR Insufficient memory to create filter"
                                            : "Couldn't create filter!");
        cf_rm.ModuleTypeSetValue(key, cf__type, v);
        break;
    case CF__OURS:
        if (!cf_is_loading(v->f))
            return cf__fail(ctx, key, v, "ERR item exists");
        st = cf__take_chunk(v, (uint64_t)it, data, len);
        if (st == CF_ENOMEM) /* the filter is as it was: the chunk can come again */
            return cf__fail(ctx, key, v, "ERR Insufficient memory");
        if (st != CF_OK) {
            /* Never leave a filter that cannot be completed: the load starts over. */
            v->ctx = NULL;
            cf_rm.DeleteKey(key);
            cf_rm.Replicate(ctx, "DEL", "s", argv[1]);
            cf_rm.NotifyKeyspaceEvent(ctx, CF_RM_NOTIFY_GENERIC, "del", argv[1]);
            cf_rm.CloseKey(key);
            return cf_rm.ReplyWithError(ctx,
                                        "Couldn't load chunk! (the incomplete filter was removed: "
                                        "load it again from its first chunk)");
        }
        break;
    }
    /* An incomplete filter expires unless its next chunk comes in time; the last chunk
     * makes the filter persistent. A replica and an AOF replay run the same command and
     * set the same rule (the primary's expiry reaches a replica as a DEL). */
    cf_rm.SetExpire(key, cf_is_loading(v->f) ? cf__load_timeout * 1000 : CF_RM_NO_EXPIRE);
    cf__wrote(ctx, argv[1], v, "cf.loadchunk", true);
    cf__close(key, v);
    return cf_rm.ReplyWithSimpleString(ctx, "OK");
}

/* RDB: the module's fields, then (cursor, chunk) pairs, then a 0, then the check of the
 * fields. Cursors after a chunk are never 0, so the 0 ends the list. */
static void cf__rdb_save(cf_rm_io *io, void *value)
{
    const cf__value *v = value;
    cf_rm.SaveUnsigned(io, v->deletes);
    cf_rm.SaveUnsigned(io, v->max_iterations);
    cf_rm.SaveUnsigned(io, cf_is_loading(v->f));
    size_t cap = cf_dump_chunk_max(v->f), len;
    unsigned char *buf = cf_rm.Alloc(cap); /* like the server's own: no memory, no save */
    uint64_t cursor = 0;
    while (cf_dump_chunk(v->f, &cursor, buf, cap, &len) == CF_OK && len) {
        cf_rm.SaveUnsigned(io, cursor);
        cf_rm.SaveStringBuffer(io, (const char *)buf, len);
    }
    cf_rm.SaveUnsigned(io, 0);
    cf_rm.SaveUnsigned(io, cf__fields_check(v->f, v->deletes, v->max_iterations));
    cf_rm.Free(buf);
}

static void *cf__rdb_load(cf_rm_io *io, int encver)
{
    if (encver != CF__ENCVER) {
        cf_rm.LogIOError(io, "warning", "filter saved with RDB encoding %d; this module reads %d",
                         encver, CF__ENCVER);
        return NULL;
    }
    uint64_t deletes = cf_rm.LoadUnsigned(io);
    uint64_t iterations = cf_rm.LoadUnsigned(io);
    uint64_t loading = cf_rm.LoadUnsigned(io);
    if (cf_rm.IsIOError(io))
        return NULL;
    const char *why = NULL;
    cf__value *v = NULL;
    if (iterations < 1 || iterations > CF_MAX_MAX_KICKS || loading > 1 || deletes > INT64_MAX)
        why = "bad module fields";
    else if (!(v = cf__value_alloc(cf_rm.GetContextFromIO(io), (unsigned)iterations)))
        why = "out of memory";
    while (!why) {
        uint64_t cursor = cf_rm.LoadUnsigned(io);
        if (cf_rm.IsIOError(io) || cursor == 0)
            break;
        size_t len;
        char *chunk = cf_rm.LoadStringBuffer(io, &len);
        if (cf_rm.IsIOError(io))
            break;
        cf_status st = cf__take_chunk(v, cursor, chunk, len);
        cf_rm.Free(chunk);
        if (st != CF_OK)
            why = cf_strerror(st);
    }
    if (!why && !cf_rm.IsIOError(io) && (!v->f || cf_is_loading(v->f) != (loading == 1)))
        why = "incomplete filter";
    uint64_t check = why || cf_rm.IsIOError(io) ? 0 : cf_rm.LoadUnsigned(io);
    if (!why && !cf_rm.IsIOError(io) && check != cf__fields_check(v->f, deletes, iterations))
        why = "the module's fields fail their check";
    if (why || cf_rm.IsIOError(io)) {
        if (why)
            cf_rm.LogIOError(io, "warning", "refusing a filter in the RDB: %s", why);
        cf__value_free(v);
        return NULL;
    }
    v->deletes = deletes;
    v->ctx = NULL;
    cf__account(v);
    return v;
}

/* The AOF rebuilds a filter with the very chunks CF.SCANDUMP would give. */
static void cf__aof_rewrite(cf_rm_io *aof, cf_rm_string *key, void *value)
{
    const cf__value *v = value;
    size_t cap, len;
    unsigned char *buf = cf__chunk_buffer(v, &cap, true);
    uint64_t cursor = 0;
    while (cf__dump(v, &cursor, buf, cap, &len) == CF_OK && len)
        cf_rm.EmitAOF(aof, "CF.LOADCHUNK", "slb", key, (long long)cursor, (const char *)buf, len);
    cf_rm.Free(buf);
}

static void cf__digest(cf_rm_digest *md, void *value)
{
    const cf__value *v = value;
    size_t cap, len;
    unsigned char *buf = cf__chunk_buffer(v, &cap, true);
    uint64_t cursor = 0;
    while (cf__dump(v, &cursor, buf, cap, &len) == CF_OK && len)
        cf_rm.DigestAddStringBuffer(md, (const char *)buf, len);
    cf_rm.Free(buf);
    cf_rm.DigestEndSequence(md);
}

static void *cf__copy(cf_rm_string *from, cf_rm_string *to, const void *value)
{
    (void)from;
    (void)to;
    const cf__value *v = value;
    size_t cap, len;
    unsigned char *buf = cf__chunk_buffer(v, &cap, false);
    cf__value *c = NULL;
    uint64_t cursor = 0;
    cf_status st = buf ? CF_OK : CF_ENOMEM;
    while (st == CF_OK && (st = cf__dump(v, &cursor, buf, cap, &len)) == CF_OK && len)
        st = c ? cf_load_chunk(&c->f, cursor, buf, len, NULL)
               : cf__load_header(NULL, cursor, buf, len, &c);
    cf_rm.Free(buf);
    if (st != CF_OK) {
        cf__value_free(c);
        return NULL;
    }
    cf__account(c);
    return c;
}

static size_t cf__mem_usage(const void *value)
{
    const cf__value *v = value;
    return sizeof *v + v->bytes;
}

static void cf__free_value(void *value)
{
    cf__value_free(value);
}

static size_t cf__free_effort(cf_rm_string *key, const void *value)
{
    (void)key;
    const cf__value *v = value;
    return 1 + v->bytes / CF__FREE_EFFORT_UNIT;
}

/* INFO cuckoo (and INFO, INFO everything): the totals over every filter of the server. */
static void cf__info(cf_rm_info_ctx *ctx, int for_crash_report)
{
    (void)for_crash_report;
    if (cf_rm.InfoAddSection(ctx, "") != CF_RM_OK) /* "" names the section "cuckoo" */
        return;
    const struct {
        const char *name; /* the server prefixes "cuckoo_" */
        const atomic_ullong *counter;
    } fields[] = {
        {"filters", &cf__total.filters},
        {"sub_filters", &cf__total.sub_filters},
        {"items", &cf__total.items},
        {"bytes", &cf__total.bytes},
        {"adds_refused_full", &cf__total.refused_full},
        {"adds_refused_hot_item", &cf__total.refused_hot},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        cf_rm.InfoAddFieldULongLong(ctx, fields[i].name,
                                    atomic_load_explicit(fields[i].counter, memory_order_relaxed));
}

/* ------------------------------------------------------------------------------------ */
/* Loading the module                                                                   */
/* ------------------------------------------------------------------------------------ */

/* The module's settings: the defaults of filters that commands create on a missing key.
 * Each is a load argument (NAME VALUE pairs on the loadmodule line; RedisBloom's names are
 * accepted too, so that its loadmodule line works here, and its Bloom filter settings are
 * accepted and ignored) and a configuration, cuckoo.<name>, for CONFIG GET and SET. */
typedef struct cf__setting {
    const char *name, *alias;
    long long min, max;
    long long *target; /* NULL: a Bloom filter setting, ignored */
} cf__setting;

static const cf__setting cf__settings[] = {
    {"cf-max-expansions", "CF_MAX_EXPANSIONS", 1, CF_MAX_SUB_FILTERS, &cf__defaults.max_filters},
    {"cf-initial-size", NULL, 4, CF__MAX_CAPACITY, &cf__defaults.capacity},
    {"cf-bucket-size", NULL, 1, CF_MAX_BUCKET_SIZE, &cf__defaults.bucket_size},
    {"cf-max-iterations", NULL, 1, CF_MAX_MAX_KICKS, &cf__defaults.max_iterations},
    {"cf-expansion-factor", NULL, 0, CF_MAX_EXPANSION, &cf__defaults.expansion},
    {"cf-fingerprint-bits", NULL, CF_MIN_FINGERPRINT_BITS, CF_MAX_FINGERPRINT_BITS,
     &cf__defaults.fpbits},
    {"cf-load-timeout", NULL, 1, CF__MAX_LOAD_TIMEOUT, &cf__load_timeout},
    {"bf-initial-size", "INITIAL_SIZE", 0, 0, NULL},
    {"bf-error-rate", "ERROR_RATE", 0, 0, NULL},
};

/* A created filter needs capacity >= 2 * bucket size: NULL if `value` for `s` keeps that
 * true, else why not. */
static const char *cf__setting_conflict(const cf__setting *s, long long value)
{
    if (s->target == &cf__defaults.capacity && value < 2 * cf__defaults.bucket_size)
        return "cf-initial-size must be at least 2 * cf-bucket-size";
    if (s->target == &cf__defaults.bucket_size && 2 * value > cf__defaults.capacity)
        return "cf-bucket-size must be at most cf-initial-size / 2";
    return NULL;
}

static long long cf__config_get(const char *name, void *privdata)
{
    (void)name;
    return *((const cf__setting *)privdata)->target;
}

static int cf__config_set(const char *name, long long value, void *privdata, cf_rm_string **err)
{
    (void)name;
    const cf__setting *s = privdata;
    const char *why = cf__setting_conflict(s, value);
    if (why) {
        *err = cf_rm.CreateString(NULL, why, strlen(why));
        return CF_RM_ERR;
    }
    *s->target = value;
    return CF_RM_OK;
}

static int cf__configure(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    const size_t count = sizeof cf__settings / sizeof cf__settings[0];
    if (argc % 2) {
        cf_rm.Log(ctx, "warning", "module arguments come in pairs: NAME VALUE ...");
        return CF_RM_ERR;
    }
    for (int i = 0; i < argc; i += 2) {
        size_t len;
        const char *name = cf_rm.StringPtrLen(argv[i], &len);
        const cf__setting *s = NULL;
        for (size_t k = 0; k < count && !s; k++)
            if (cf__is(argv[i], cf__settings[k].name) ||
                (cf__settings[k].alias && cf__is(argv[i], cf__settings[k].alias)))
                s = &cf__settings[k];
        if (!s) {
            cf_rm.Log(ctx, "warning", "Unrecognized option '%.*s'", (int)len, name);
            return CF_RM_ERR;
        }
        if (!s->target) {
            cf_rm.Log(ctx, "notice", "'%s' is a Bloom filter setting; ignored", s->name);
            continue;
        }
        long long n;
        if (!cf__ll(argv[i + 1], &n) || n < s->min || n > s->max) {
            cf_rm.Log(ctx, "warning", "%s must be an integer in [%lld, %lld]", s->name, s->min,
                      s->max);
            return CF_RM_ERR;
        }
        *s->target = n;
    }
    if (cf__defaults.capacity < 2 * cf__defaults.bucket_size) {
        cf_rm.Log(ctx, "warning", "cf-initial-size must be at least 2 * cf-bucket-size");
        return CF_RM_ERR;
    }
    /* Then the configurations, starting from those values; LoadConfigs applies the
     * server's config file (cuckoo.cf-bucket-size 4, ...) on top. */
    for (size_t k = 0; k < count; k++) {
        const cf__setting *s = &cf__settings[k];
        if (s->target &&
            cf_rm.RegisterNumericConfig(ctx, s->name, *s->target, CF_RM_CONFIG_DEFAULT, s->min,
                                        s->max, cf__config_get, cf__config_set, NULL,
                                        (void *)(uintptr_t)s /* only read back */) != CF_RM_OK)
            return CF_RM_ERR;
    }
    return cf_rm.LoadConfigs(ctx);
}

/* ------------------------------------------------------------------------------------ */
/* The commands                                                                         */
/* ------------------------------------------------------------------------------------ */
/* One entry per command: its handler, flags and arity, and what COMMAND INFO and COMMAND
 * DOCS tell clients (docs/COMMANDS.md is the full reference). Every command takes one
 * key, argv[1]. */

/* The key spec of a command whose key is argv[1] alone, with these CF_RM_KEY_* flags. */
#define CF__KEY_SPEC(key_flags)                                                                    \
    ((cf_rm_key_spec[]){{.flags = (key_flags),                                                     \
                         .begin_search_type = CF_RM_KSPEC_BS_INDEX,                                \
                         .bs.index.pos = 1,                                                        \
                         .find_keys_type = CF_RM_KSPEC_FK_RANGE,                                   \
                         .fk.range = {.lastkey = 0, .keystep = 1, .limit = 0}},                    \
                        {0}})

/* Arguments (a list ends with an entry of zeros). */
#define CF__ARG_KEY                                                                                \
    {                                                                                              \
        .name = "key", .type = CF_RM_ARG_KEY, .key_spec_index = 0                                  \
    }
#define CF__ARG_ITEM                                                                               \
    {                                                                                              \
        .name = "item", .type = CF_RM_ARG_STRING, .key_spec_index = -1                             \
    }
#define CF__ARG_ITEMS                                                                              \
    {                                                                                              \
        .name = "item", .type = CF_RM_ARG_STRING, .key_spec_index = -1,                            \
        .flags = CF_RM_ARG_MULTIPLE                                                                \
    }
#define CF__ARG_OPTION(arg_name, keyword)                                                          \
    {                                                                                              \
        .name = (arg_name), .type = CF_RM_ARG_INTEGER, .key_spec_index = -1, .token = (keyword),   \
        .flags = CF_RM_ARG_OPTIONAL                                                                \
    }
#define CF__ARGS(...) ((cf_rm_command_arg[]){__VA_ARGS__, {0}})

#define CF__INSERT_ARGS                                                                            \
    CF__ARGS(CF__ARG_KEY, CF__ARG_OPTION("capacity", "CAPACITY"),                                  \
             {.name = "nocreate",                                                                  \
              .type = CF_RM_ARG_PURE_TOKEN,                                                        \
              .key_spec_index = -1,                                                                \
              .token = "NOCREATE",                                                                 \
              .flags = CF_RM_ARG_OPTIONAL},                                                        \
             {.name = "item",                                                                      \
              .type = CF_RM_ARG_STRING,                                                            \
              .key_spec_index = -1,                                                                \
              .token = "ITEMS",                                                                    \
              .flags = CF_RM_ARG_MULTIPLE})

/* Complexities: k is the number of sub-filters, b the bucket size, n the number of items
 * given, m the filter's size in bytes. */
#define CF__O_ADD                                                                                  \
    "O(k + MAXITERATIONS) per item, O(m) when the filter grows (a new sub-filter is allocated)"

typedef struct cf__command {
    const char *name;
    cf_rm_cmd_fn fn;
    const char *flags; /* server command flags */
    int arity;         /* -N: at least N */
    cf_rm_key_spec *key_spec;
    cf_rm_command_arg *args;
    const char *summary, *complexity;
} cf__command;

static const cf__command cf__commands[] = {
    {"cf.reserve", cf__cmd_reserve, "write deny-oom", -3,
     CF__KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_INSERT),
     CF__ARGS(CF__ARG_KEY, {.name = "capacity", .type = CF_RM_ARG_INTEGER, .key_spec_index = -1},
              CF__ARG_OPTION("bucketsize", "BUCKETSIZE"),
              CF__ARG_OPTION("maxiterations", "MAXITERATIONS"),
              CF__ARG_OPTION("expansion", "EXPANSION"), CF__ARG_OPTION("fpbits", "FPBITS"),
              CF__ARG_OPTION("maxfilters", "MAXFILTERS")),
     "Creates an empty cuckoo filter for capacity items",
     "O(m) to allocate the table (zeroed lazily by the system)"},
    {"cf.add", cf__cmd_add, "write deny-oom", 3, CF__KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_INSERT),
     CF__ARGS(CF__ARG_KEY, CF__ARG_ITEM),
     "Adds an item to a cuckoo filter, creating the filter if the key does not exist", CF__O_ADD},
    {"cf.addnx", cf__cmd_addnx, "write deny-oom", 3,
     CF__KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_ACCESS | CF_RM_KEY_INSERT),
     CF__ARGS(CF__ARG_KEY, CF__ARG_ITEM),
     "Adds an item to a cuckoo filter unless it is (possibly) there already", CF__O_ADD},
    {"cf.insert", cf__cmd_insert, "write deny-oom", -4,
     CF__KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_INSERT), CF__INSERT_ARGS,
     "Adds items to a cuckoo filter, creating the filter unless NOCREATE is given",
     "O(n * (k + MAXITERATIONS)), O(m) when the filter grows"},
    {"cf.insertnx", cf__cmd_insertnx, "write deny-oom", -4,
     CF__KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_ACCESS | CF_RM_KEY_INSERT), CF__INSERT_ARGS,
     "Adds the items that are not (possibly) in a cuckoo filter already",
     "O(n * (k + MAXITERATIONS)), O(m) when the filter grows"},
    {"cf.exists", cf__cmd_exists, "readonly fast", 3, CF__KEY_SPEC(CF_RM_KEY_RO | CF_RM_KEY_ACCESS),
     CF__ARGS(CF__ARG_KEY, CF__ARG_ITEM),
     "Tells whether an item may be in a cuckoo filter (0: it certainly is not)", "O(k)"},
    {"cf.mexists", cf__cmd_mexists, "readonly fast", -3,
     CF__KEY_SPEC(CF_RM_KEY_RO | CF_RM_KEY_ACCESS), CF__ARGS(CF__ARG_KEY, CF__ARG_ITEMS),
     "Tells for each item whether it may be in a cuckoo filter", "O(n * k)"},
    {"cf.count", cf__cmd_count, "readonly fast", 3, CF__KEY_SPEC(CF_RM_KEY_RO | CF_RM_KEY_ACCESS),
     CF__ARGS(CF__ARG_KEY, CF__ARG_ITEM),
     "Counts the fingerprints in a cuckoo filter that match an item (at least its adds minus "
     "its deletes)",
     "O(k * b)"},
    {"cf.del", cf__cmd_del, "write fast", 3, CF__KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_DELETE),
     CF__ARGS(CF__ARG_KEY, CF__ARG_ITEM),
     "Removes one copy of an item that was added to a cuckoo filter", "O(k)"},
    {"cf.compact", cf__cmd_compact, "write", 2, CF__KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_UPDATE),
     CF__ARGS(CF__ARG_KEY),
     "Moves the items of a grown cuckoo filter into its older sub-filters and frees the ones "
     "left empty",
     "O(m)"},
    {"cf.info", cf__cmd_info, "readonly fast", 2, CF__KEY_SPEC(CF_RM_KEY_RO), CF__ARGS(CF__ARG_KEY),
     "Returns the size, shape and item counts of a cuckoo filter", "O(k)"},
    {"cf.debug", cf__cmd_debug, "readonly fast", 2, CF__KEY_SPEC(CF_RM_KEY_RO),
     CF__ARGS(CF__ARG_KEY),
     "Returns a one-line description of a cuckoo filter, fingerprint width included", "O(k)"},
    {"cf.scandump", cf__cmd_scandump, "readonly", 3, CF__KEY_SPEC(CF_RM_KEY_RO | CF_RM_KEY_ACCESS),
     CF__ARGS(CF__ARG_KEY, {.name = "iterator", .type = CF_RM_ARG_INTEGER, .key_spec_index = -1}),
     "Returns the chunk of a cuckoo filter at an iterator (0 first) and the next iterator "
     "(0 at the end), for CF.LOADCHUNK",
     "O(size of the chunk), at most 16 MiB"},
    {"cf.loadchunk", cf__cmd_loadchunk, "write deny-oom", 4,
     CF__KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_INSERT),
     CF__ARGS(CF__ARG_KEY, {.name = "iterator", .type = CF_RM_ARG_INTEGER, .key_spec_index = -1},
              {.name = "data", .type = CF_RM_ARG_STRING, .key_spec_index = -1}),
     "Restores a cuckoo filter, chunk by chunk, from what CF.SCANDUMP returned",
     "O(size of the chunk), at most 16 MiB"},
};

/* The ACL category of every command, on servers that let modules add one (ACL SETUSER u
 * +@cuckoo). There the commands also join the categories of their flags (@read or
 * @write, @fast or @slow), which the server gives its own commands but not a module's.
 * Servers without module categories (Redis 7.0) put module commands in @all alone. */
#define CF__ACL_CATEGORY "cuckoo"

/* The ACL categories of command c: CF__ACL_CATEGORY and those of its flags. */
static const char *cf__acl_categories(const cf__command *c)
{
    bool fast = strstr(c->flags, "fast") != NULL;
    if (strstr(c->flags, "write"))
        return fast ? CF__ACL_CATEGORY " write fast" : CF__ACL_CATEGORY " write slow";
    return fast ? CF__ACL_CATEGORY " read fast" : CF__ACL_CATEGORY " read slow";
}

static int cf__register_commands(cf_rm_ctx *ctx)
{
    static const cf_rm_command_info_version version = {
        .version = CF_RM_COMMAND_INFO_VERSION,
        .sizeof_historyentry = sizeof(cf_rm_command_history),
        .sizeof_keyspec = sizeof(cf_rm_key_spec),
        .sizeof_arg = sizeof(cf_rm_command_arg),
    };
    bool category = cf_rm.AddACLCategory && cf_rm.SetCommandACLCategories &&
                    cf_rm.AddACLCategory(ctx, CF__ACL_CATEGORY) == CF_RM_OK;
    for (size_t i = 0; i < sizeof cf__commands / sizeof cf__commands[0]; i++) {
        const cf__command *c = &cf__commands[i];
        if (cf_rm.CreateCommand(ctx, c->name, c->fn, c->flags, 1, 1, 1) != CF_RM_OK)
            return CF_RM_ERR;
        cf_rm_command *command = cf_rm.GetCommand(ctx, c->name);
        const cf_rm_command_info info = {
            .version = &version,
            .summary = c->summary,
            .complexity = c->complexity,
            .since = CF__SINCE,
            .arity = c->arity,
            .key_specs = c->key_spec,
            .args = c->args,
        };
        if (!command || cf_rm.SetCommandInfo(command, &info) != CF_RM_OK)
            return CF_RM_ERR;
        if (category && cf_rm.SetCommandACLCategories(command, cf__acl_categories(c)) != CF_RM_OK)
            return CF_RM_ERR;
    }
    return CF_RM_OK;
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(cf_rm_ctx *ctx, cf_rm_string **argv,
                                                              int argc);

int RedisModule_OnLoad(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    const char *missing;
    if (cf_rm_init(ctx, CF__MODULE_NAME, CF_VERSION_NUMBER, &missing) != CF_RM_OK)
        return CF_RM_ERR; /* the server names the module that failed to load */
    if (cf__configure(ctx, argv, argc) != CF_RM_OK)
        return CF_RM_ERR;
    cf_rm.SetModuleOptions(ctx, CF_RM_OPTIONS_HANDLE_IO_ERRORS);

    cf_rm_type_methods methods = {
        .version = CF_RM_TYPE_METHOD_VERSION,
        .rdb_load = cf__rdb_load,
        .rdb_save = cf__rdb_save,
        .aof_rewrite = cf__aof_rewrite,
        .mem_usage = cf__mem_usage,
        .digest = cf__digest,
        .free = cf__free_value,
        .free_effort = cf__free_effort,
        .copy = cf__copy,
    };
    cf__type = cf_rm.CreateDataType(ctx, CF__TYPE_NAME, CF__ENCVER, &methods);
    if (!cf__type)
        return CF_RM_ERR;
    if (cf_rm.RegisterInfoFunc(ctx, cf__info) != CF_RM_OK)
        return CF_RM_ERR;
    return cf__register_commands(ctx);
}
