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
    return v;
}

static void cf__value_free(cf__value *v)
{
    if (!v)
        return;
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
        cf_rm.Free(v);
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

/* The error for an add of `item` that found no room. */
static const char *cf__add_error(const cf__value *v, cf_status st, const char *item, size_t len)
{
    static const char hot[] = "Filter is full for this item: its copies fill both of its "
                              "buckets (CF.ADDNX adds an item once)";
    if (st == CF_ENOMEM)
        return "ERR Insufficient memory";
    cf_config c;
    cf_stats s;
    cf_get_config(v->f, &c);
    cf_get_stats(v->f, &s);
    /* A growing filter refuses an add only at its sub-filter limit or for an item whose
     * copies fill both its buckets (it does not grow for one item). A fixed filter is
     * also full when it has no room left at all. */
    if (c.expansion > 0)
        return s.sub_filters >= c.max_sub_filters ? "Maximum expansions reached" : hot;
    return cf_count(v->f, item, len) >= 2u * s.bucket_size ? hot : "Filter is full";
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
        const char *err = cf__add_error(v, st, item, len);
        if (created) /* cannot happen (a new filter has room), but never leave it half-made */
            cf_rm.DeleteKey(key);
        return cf__fail(ctx, key, created ? NULL : v, err);
    }
    if (created)
        cf__replicate_reserve(ctx, argv[1], v);
    cf_rm.ReplicateVerbatim(ctx);
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

    cf_rm_key *key;
    cf__value *v;
    bool created = false;
    switch (cf__open(ctx, argv[1], CF_RM_READ | CF_RM_WRITE, &key, &v)) {
    case CF__OTHER:
        return cf__fail(ctx, key, v, CF__ERR_WRONGTYPE);
    case CF__EMPTY: {
        if (nocreate)
            return cf__fail(ctx, key, NULL, "ERR not found");
        const char *err = cf__create(ctx, key, capacity, &v);
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
    bool resp3 = cf__resp3(ctx);
    cf_rm.ReplyWithArray(ctx, argc - items);
    /* The items go in batch by batch through cf_add_many, which is exactly one cf_add (for
     * CF.INSERTNX, cf_add_unique) per item in order, with the same statuses: a refused
     * item does not stop the others, and the filter ends as the loop of single adds would
     * leave it, on a replica too. */
    uint64_t hashes[CF__HASH_BATCH];
    cf_status status[CF__HASH_BATCH];
    for (int i = items; i < argc;) {
        size_t n = 0;
        for (; n < CF__HASH_BATCH && i + (int)n < argc; n++) {
            size_t len;
            const char *item = cf_rm.StringPtrLen(argv[i + (int)n], &len);
            hashes[n] = cf_hash(v->f, item, len);
        }
        cf_add_many(v->f, hashes, n, nx ? CF_ADD_UNIQUE : 0u, status);
        for (size_t j = 0; j < n; j++) {
            cf_status st = status[j];
            if (nx)
                cf_rm.ReplyWithLongLong(ctx, st == CF_OK ? 1 : st == CF_EXISTS ? 0 : -1);
            else if (resp3)
                cf_rm.ReplyWithBool(ctx, st == CF_OK);
            else
                cf_rm.ReplyWithLongLong(ctx, st == CF_OK ? 1 : -1);
        }
        i += (int)n;
    }
    if (created)
        cf__replicate_reserve(ctx, argv[1], v);
    cf_rm.ReplicateVerbatim(ctx);
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
    cf_rm.ReplicateVerbatim(ctx);
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
    cf_rm.ReplicateVerbatim(ctx);
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
        {"Fingerprint bits", g.stats.fingerprint_bits},
    };
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
    cf_rm.ReplicateVerbatim(ctx);
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
        cf_rm.LogIOError(io, "warning",
                         "cuckoo: filter saved with RDB encoding %d; this module reads %d", encver,
                         CF__ENCVER);
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
            cf_rm.LogIOError(io, "warning", "cuckoo: refusing a filter in the RDB: %s", why);
        cf__value_free(v);
        return NULL;
    }
    v->deletes = deletes;
    v->ctx = NULL;
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
        cf_rm.Log(ctx, "warning", "cuckoo: module arguments come in pairs: NAME VALUE ...");
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
            cf_rm.Log(ctx, "warning", "cuckoo: Unrecognized option '%.*s'", (int)len, name);
            return CF_RM_ERR;
        }
        if (!s->target) {
            cf_rm.Log(ctx, "notice", "cuckoo: '%s' is a Bloom filter setting; ignored", s->name);
            continue;
        }
        long long n;
        if (!cf__ll(argv[i + 1], &n) || n < s->min || n > s->max) {
            cf_rm.Log(ctx, "warning", "cuckoo: %s must be an integer in [%lld, %lld]", s->name,
                      s->min, s->max);
            return CF_RM_ERR;
        }
        *s->target = n;
    }
    if (cf__defaults.capacity < 2 * cf__defaults.bucket_size) {
        cf_rm.Log(ctx, "warning", "cuckoo: cf-initial-size must be at least 2 * cf-bucket-size");
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
        .copy = cf__copy,
    };
    cf__type = cf_rm.CreateDataType(ctx, CF__TYPE_NAME, CF__ENCVER, &methods);
    if (!cf__type)
        return CF_RM_ERR;

    const struct {
        const char *name;
        cf_rm_cmd_fn fn;
        const char *flags;
    } commands[] = {
        {"cf.reserve", cf__cmd_reserve, "write deny-oom"},
        {"cf.add", cf__cmd_add, "write deny-oom"},
        {"cf.addnx", cf__cmd_addnx, "write deny-oom"},
        {"cf.insert", cf__cmd_insert, "write deny-oom"},
        {"cf.insertnx", cf__cmd_insertnx, "write deny-oom"},
        {"cf.exists", cf__cmd_exists, "readonly fast"},
        {"cf.mexists", cf__cmd_mexists, "readonly fast"},
        {"cf.count", cf__cmd_count, "readonly fast"},
        {"cf.del", cf__cmd_del, "write fast"},
        {"cf.compact", cf__cmd_compact, "write"},
        {"cf.info", cf__cmd_info, "readonly fast"},
        {"cf.debug", cf__cmd_debug, "readonly fast"},
        {"cf.scandump", cf__cmd_scandump, "readonly"},
        {"cf.loadchunk", cf__cmd_loadchunk, "write deny-oom"},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (cf_rm.CreateCommand(ctx, commands[i].name, commands[i].fn, commands[i].flags, 1, 1,
                                1) != CF_RM_OK)
            return CF_RM_ERR;
    return CF_RM_OK;
}
