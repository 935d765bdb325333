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
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "kept.h"
#include "module_abi.h"

#include <cuckoofilter.h>

#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CFM_MODULE_NAME      "cuckoo"
#define CFM_TYPE_NAME        "cuckoo-cf" /* data type names are exactly 9 characters */
#define CFM_ENCVER           1           /* RDB encoding of the type; bump when it changes */
/* RedisBloom's cuckoo filter type, registered under its own name so that its RDB values
 * (a dump.rdb of Redis Stack or Redis 8, RESTORE payloads of its DUMP) load here, into
 * filters of its layout (CF_REDISBLOOM), and save in its format again: swapping
 * RedisBloom back in loads them too. Encoding 4 has each sub-filter's size; older ones
 * (before growth by a factor) do not, and are read as RedisBloom reads them. */
#define CFM_RB_TYPE_NAME     "MBbloomCF"
#define CFM_RB_ENCVER        4
/* A key's name in a log line is cut after this many bytes. */
#define CFM_LOGGED_KEY_BYTES 64u

/* RedisBloom's limits and defaults, which clients may rely on. */
#define CFM_MAX_CAPACITY    (1ll << 30)
#define CFM_DEFAULT_CAP     1024
#define CFM_DEFAULT_BUCKET  2
#define CFM_DEFAULT_ITERS   20
#define CFM_DEFAULT_EXPAND  1
#define CFM_DEFAULT_FILTERS 32
/* Our default width: 16 times fewer false positives than RedisBloom's 8-bit fingerprints
 * (0.1 % against 1.6 % for a full sub-filter of 2-slot buckets) for 1.5 bytes a slot. */
#define CFM_DEFAULT_FPBITS  12

/* Windows (CF.RESERVE ... WINDOW ms [GENERATIONS g]): generations when WINDOW comes
 * without GENERATIONS, as the cuckoo tool's default (keys go within 8/7 of the window). */
#define CFM_DEFAULT_GENERATIONS 8
/* The longest WINDOW: 100 years in ms, far past any use and well inside the library's
 * arithmetic (a time in ms times G - 1 < 4096). */
#define CFM_MAX_WINDOW          (100ll * 365 * 24 * 3600 * 1000)
/* The sweep that drops idle windowed filters' expired generations (a timer on the
 * primary): every CFM_SWEEP_MS it takes steps of a keyspace scan (a step visits one hash
 * bucket of keys: about one key) for up to CFM_SWEEP_BUDGET_NS of the server's time and at
 * most CFM_SWEEP_STEPS steps, so that its work per tick stays bounded whatever the
 * keyspace (1 % of a core at most); it goes on from where it stopped, database by
 * database (a round's time: docs/PERFORMANCE.md, "Tuned constants"). */
#define CFM_SWEEP_MS            100
#define CFM_SWEEP_BUDGET_NS     1000000 /* 1 ms a tick */
#define CFM_SWEEP_STEPS         10000
/* Steps between two reads of the clock (a read costs about as much as a step). */
#define CFM_SWEEP_CLOCK_EVERY   32

/* MAXITERATIONS counts cuckoo kicks of a random walk; the library's budget counts the
 * buckets its breadth-first search may examine. 25 per iteration maps RedisBloom's
 * default of 20 to 500, the library's default, with which a filter fills to its capacity
 * before it grows (20 alone would grow it at about 77 % of capacity for 2-slot buckets). */
#define CFM_KICKS_PER_ITERATION 25u

/* Allocations from this size up are first checked against the memory the server has
 * left (maxmemory, and the machine's RAM), so that an absurd CF.RESERVE or a forged
 * chunk header gets an error reply instead of the kernel's OOM killer. A header chunk is
 * checked for the whole filter it describes, whatever its tables' sizes. */
#define CFM_CHECKED_ALLOC ((size_t)16 << 20)

/* The machine's memory that the checks above keep free for everything else: a sixteenth
 * (1.5 GiB of 24), so that a filter that passes cannot push the server or its neighbours
 * into swap or the OOM killer. */
#define CFM_RAM_MARGIN_DIVISOR 16u

/* An incomplete filter (CF.LOADCHUNK has its header, not yet its last chunk) expires this
 * many seconds after its latest chunk unless another arrives (cf-load-timeout): a forged
 * header must not hold memory for good. The last chunk removes the expiry. */
#define CFM_DEFAULT_LOAD_TIMEOUT 600
#define CFM_MAX_LOAD_TIMEOUT     (30ll * 24 * 3600) /* a month, in seconds */

/* The module's fields in front of the library's header chunk in CF.SCANDUMP and in the
 * AOF: the library's CF_MODULE_PREFIX_BYTES (cf_module_prefix_write). */
#define CFM_PREFIX_BYTES CF_MODULE_PREFIX_BYTES
/* The most deletes a filter counts and every loader (chunks, RDB, RedisBloom's header and
 * record) accepts: CF.INFO replies with them as a signed 64-bit integer. */
#define CFM_MAX_DELETES  ((uint64_t)INT64_MAX)

/* CF.MEXISTS, CF.INSERT and CF.INSERTNX pass this many items per batched call of the
 * library (on the stack: 2 KiB of pointers and lengths, plus their answers). */
#define CFM_BATCH 128

/* free_effort counts one unit per this many bytes a filter holds. The server frees a
 * value on its lazy-free thread (UNLINK, FLUSHALL ASYNC, lazyfree-lazy-* settings) when
 * the effort is above 64 (its LAZYFREE_THRESHOLD): so filters over 4 MiB, whose free
 * returns megabytes of pages to the system, never stall the command loop. */
#define CFM_FREE_EFFORT_UNIT ((size_t)64 << 10)

/* The version in which each command appeared (COMMAND DOCS `since`). */
#define CFM_SINCE "0.1.0"

/* CF.RESERVE in RedisBloom's layout (LAYOUT redisbloom, or cf-layout redisbloom) with one
 * of this library's own options. */
#define CFM_ERR_RB_OPTIONS                                                                         \
    "ERR the redisbloom layout takes FPBITS 8 only, no SEMISORT and no SEED (LAYOUT native does)"
/* ... or with MAXFILTERS: RedisBloom's limit is the server's. */
#define CFM_ERR_RB_MAXFILTERS                                                                      \
    "ERR the redisbloom layout takes its sub-filter limit from cf-max-expansions, as "             \
    "RedisBloom does: no MAXFILTERS (LAYOUT native has it)"
/* ... or with a window, which only this library's layout has. */
#define CFM_ERR_RB_WINDOW "ERR the redisbloom layout has no WINDOW (LAYOUT native does)"
/* Room for "ERR " and the longest reason the library gives for a merge it refuses. */
#define CFM_ERROR_MAX     160
#define CFM_ERR_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"
#define CFM_ERR_LOADING                                                                            \
    "ERR the filter is incomplete: CF.LOADCHUNK has not received all of its chunks"

/* ------------------------------------------------------------------------------------ */
/* Settings                                                                             */
/* ------------------------------------------------------------------------------------ */

/* The layouts a new filter can have (cf-layout, CF.RESERVE ... LAYOUT): this library's
 * own, or RedisBloom's (CF_REDISBLOOM: its hash, 8-bit fingerprints and RDB type), for
 * fleets that still run RedisBloom beside this module. Indexes of cfm_layout_names. */
enum { CFM_LAYOUT_NATIVE, CFM_LAYOUT_REDISBLOOM };
static const char *cfm_layout_names[] = {"native", "redisbloom"};
#define CFM_LAYOUTS 2

/* The values of an enumerated setting's names, in order (CONFIG's enums take them). */
static const int cfm_enum_values[] = {0, 1};
_Static_assert(sizeof cfm_enum_values / sizeof cfm_enum_values[0] == CFM_LAYOUTS,
               "a value for each layout name");

/* RedisBloom's fingerprints are 8 bits wide, whatever cf-fingerprint-bits says. */
#define CFM_RB_FPBITS 8

/* What a new filter is made of. */
typedef struct cfm_spec {
    long long capacity, bucket_size, max_iterations, expansion, fpbits, max_filters;
    long long semi_sort;   /* 1: semi-sorted buckets (CF_SEMI_SORT), 4 slots only */
    long long layout;      /* CFM_LAYOUT_* */
    long long window;      /* WINDOW: the window in ms (0: keys stay until deleted) */
    long long generations; /* GENERATIONS of a window */
    uint64_t seed;
    bool has_seed;
} cfm_spec;

/* The defaults for filters created without CF.RESERVE: the module's load arguments and
 * configurations (cfm_settings). Written only by them, on the server's main thread. */
static cfm_spec cfm_defaults = {CFM_DEFAULT_CAP,
                                CFM_DEFAULT_BUCKET,
                                CFM_DEFAULT_ITERS,
                                CFM_DEFAULT_EXPAND,
                                CFM_DEFAULT_FPBITS,
                                CFM_DEFAULT_FILTERS,
                                0,
                                CFM_LAYOUT_NATIVE,
                                0,
                                CFM_DEFAULT_GENERATIONS,
                                0,
                                false};

static cf_rm_type *cfm_type;    /* set once at load */
static cf_rm_type *cfm_rb_type; /* RedisBloom's, likewise */

/* Totals over every filter of this server, for INFO cuckoo. Atomic: the server may free a
 * filter on its lazy-free thread while the main thread runs commands. */
typedef struct cfm_totals {
    atomic_ullong filters, sub_filters, items, bytes;
    atomic_ullong refused_full; /* adds refused for want of room (fixed filter full, or
                                   at its sub-filter limit) */
    atomic_ullong refused_hot;  /* adds of an item whose copies fill both its buckets */
} cfm_totals;

static cfm_totals cfm_total;

static void cfm_total_add(atomic_ullong *counter, unsigned long long delta)
{
    atomic_fetch_add_explicit(counter, delta, memory_order_relaxed);
}

static void cfm_total_sub(atomic_ullong *counter, unsigned long long delta)
{
    atomic_fetch_sub_explicit(counter, delta, memory_order_relaxed);
}

/* cf-load-timeout, in seconds; written only by the settings, on the main thread. */
static long long cfm_load_timeout = CFM_DEFAULT_LOAD_TIMEOUT;

/* ------------------------------------------------------------------------------------ */
/* The value stored under a key                                                         */
/* ------------------------------------------------------------------------------------ */

/* 64 bytes (a 64-byte size class): one of these per key. */
typedef struct cfm_value {
    cf_filter *f;
    uint64_t deletes;        /* deletes since the last compaction (CF.INFO) */
    size_t bytes;            /* held by this value and f, as the allocator counts (MallocSize) */
    cf_rm_ctx *ctx;          /* the running command's, for the memory check; or NULL */
    unsigned max_iterations; /* as given; the library runs with a scaled budget */
    /* What this filter adds to cfm_total's items and sub-filters (cfm_account). */
    unsigned counted_sub_filters;
    uint64_t counted_items;
    /* A window loading by chunks: the check its header chunk's prefix gave, made once the
     * window is complete (its seed comes with its first generation, not its header). */
    uint64_t pending_check;
    bool check_pending;
} cfm_value;

/* The memory the machine has available now (MemAvailable in /proc/meminfo), in bytes;
 * false where the system does not say. */
static bool cfm_mem_available(unsigned long long *bytes)
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

/* Did the command come from the primary or the AOF? Its outcome there was decided by the
 * primary (a refused command is not propagated), whatever this server's settings. */
static bool cfm_replaying(cf_rm_ctx *ctx)
{
    return (cf_rm.GetContextFlags(ctx) & (CF_RM_CTX_FLAGS_LOADING | CF_RM_CTX_FLAGS_REPLICATED)) !=
           0;
}

/* Is there room for `size` more bytes: under the machine's memory less a margin (the
 * lower of what it has available and its RAM less what the server holds) and, for a
 * client's command, under maxmemory (if set)? Loading (RDB, AOF, a full sync) and the
 * primary's writes on a replica are not held to maxmemory, as the server does not hold
 * them to it: a restart or a replica must end with the same data. Without a context there
 * is nothing to ask. */
static bool cfm_room_for(cf_rm_ctx *ctx, size_t size)
{
    if (!ctx)
        return true;
    bool replaying = cfm_replaying(ctx);
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
        if (cfm_mem_available(&avail) && avail < left)
            left = avail;
        unsigned long long margin = ram / CFM_RAM_MARGIN_DIVISOR;
        if (left <= margin || size > left - margin)
            return false;
    }
    return true;
}

static void *cfm_alloc(void *ctx, size_t size)
{
    cfm_value *v = ctx;
    if (size >= CFM_CHECKED_ALLOC && !cfm_room_for(v->ctx, size))
        return NULL;
    void *p = cf_rm.TryAlloc(size);
    if (!p)
        return NULL;
    size_t held = cf_rm.MallocSize(p);
    v->bytes += held;
    cfm_total_add(&cfm_total.bytes, held);
    return p;
}

static void cfm_free(void *ctx, void *ptr)
{
    cfm_value *v = ctx;
    if (!ptr)
        return;
    size_t held = cf_rm.MallocSize(ptr);
    v->bytes -= held;
    cfm_total_sub(&cfm_total.bytes, held);
    cf_rm.Free(ptr);
}

/* The server's allocator with v as context, for a filter of v's: the library keeps its
 * own copy. */
static cf_allocator cfm_allocator(cfm_value *v)
{
    return (cf_allocator){cfm_alloc, cfm_free, v};
}

/* A value with no filter yet; the filter is made with cfm_allocator(v). */
static cfm_value *cfm_value_alloc(cf_rm_ctx *ctx, unsigned max_iterations)
{
    cfm_value *v = cf_rm.TryAlloc(sizeof *v);
    if (!v)
        return NULL;
    memset(v, 0, sizeof *v);
    v->ctx = ctx;
    v->max_iterations = max_iterations;
    cfm_total_add(&cfm_total.filters, 1);
    v->bytes = cf_rm.MallocSize(v);
    cfm_total_add(&cfm_total.bytes, v->bytes);
    return v;
}

/* Bring cfm_total's items and sub-filters up to date with v's filter, after a change. */
static void cfm_account(cfm_value *v)
{
    cf_stats s = {0};
    cf_get_stats(v->f, &s);
    /* The differences, modulo 2^64 as the counters are: one atomic add for a figure that
     * changed, none for one that did not (most commands change one at most). */
    if (s.items != v->counted_items)
        cfm_total_add(&cfm_total.items, s.items - v->counted_items);
    if (s.sub_filters != v->counted_sub_filters)
        cfm_total_add(&cfm_total.sub_filters, (uint64_t)s.sub_filters - v->counted_sub_filters);
    v->counted_items = s.items;
    v->counted_sub_filters = s.sub_filters;
}

/* Also the server's free callback, possibly on its lazy-free thread. */
static void cfm_value_free(cfm_value *v)
{
    if (!v)
        return;
    cfm_total_sub(&cfm_total.items, v->counted_items);
    cfm_total_sub(&cfm_total.sub_filters, v->counted_sub_filters);
    cfm_total_sub(&cfm_total.filters, 1);
    cfm_total_sub(&cfm_total.bytes, cf_rm.MallocSize(v));
    cf_free(v->f);
    cf_rm.Free(v);
}

static unsigned cfm_kicks(long long iterations)
{
    unsigned long long k = (unsigned long long)iterations * CFM_KICKS_PER_ITERATION;
    return k > CF_MAX_MAX_KICKS ? CF_MAX_MAX_KICKS : (unsigned)k;
}

/* The config of v's filter as s says (*alloc: its allocator, which the config points
 * to); the seed is for this library's layout (RedisBloom's has none). */
static cf_config cfm_config_of(cfm_value *v, const cfm_spec *s, uint64_t seed, cf_allocator *alloc)
{
    *alloc = cfm_allocator(v);
    cf_config c = {
        .capacity = (uint64_t)s->capacity,
        .bucket_size = (unsigned)s->bucket_size,
        .expansion = (unsigned)s->expansion,
        .allocator = alloc,
        .max_sub_filters = (unsigned)s->max_filters,
    };
    if (s->layout == CFM_LAYOUT_REDISBLOOM) {
        /* RedisBloom's walk moves one fingerprint an iteration: MAXITERATIONS as it is.
         * Its hash has no seed, its fingerprints one width. Its sub-filter limit is not
         * the filter's (RedisBloom's formats have no room for one) but the server's
         * cf-max-expansions, checked as each add command starts (cfm_rb_at_limit). */
        c.max_kicks = (unsigned)s->max_iterations;
        c.max_sub_filters = CF_MAX_SUB_FILTERS;
        c.flags = CF_REDISBLOOM;
    } else {
        c.fingerprint_bits = (unsigned)s->fpbits;
        c.max_kicks = cfm_kicks(s->max_iterations);
        c.seed = seed;
        /* The seed is chosen by cfm_value_new or by the primary: a replica must not redraw
         * it. And sub-filters keep the first's width, as RedisBloom's do, so that
         * CF.RESERVE's arguments alone (which replication sends) make the same filter. */
        c.flags = CF_FIXED_SEED | CF_GROW_SAME_WIDTH | (s->semi_sort ? CF_SEMI_SORT : 0u);
        if (s->window) { /* generations of one size: no growth */
            c.window = (uint64_t)s->window;
            c.generations = (unsigned)s->generations;
            c.expansion = 0;
        }
    }
    return c;
}

/* v's filter as s says. */
static cf_status cfm_filter_new(cfm_value *v, const cfm_spec *s, uint64_t seed)
{
    cf_allocator alloc;
    cf_config c = cfm_config_of(v, s, seed, &alloc);
    /* A window is g allocations of a table each: the whole is checked first, so that a
     * window too big for the memory left takes none of it on the way to its refusal. */
    size_t need;
    if (c.generations && (cf_bytes_needed(&c, &need) != CF_OK ||
                          (need >= CFM_CHECKED_ALLOC && !cfm_room_for(v->ctx, need))))
        return CF_ENOMEM;
    return cf_new(&c, &v->f);
}

static cf_status cfm_value_new(cf_rm_ctx *ctx, const cfm_spec *s, cfm_value **out)
{
    cfm_value *v = cfm_value_alloc(ctx, (unsigned)s->max_iterations);
    if (!v)
        return CF_ENOMEM;
    uint64_t seed = s->seed;
    if (!s->has_seed) /* a secret per filter: clients cannot aim keys at one bucket */
        cf_rm.GetRandomBytes((unsigned char *)&seed, sizeof seed);
    cf_status st = cfm_filter_new(v, s, seed);
    if (st != CF_OK) {
        cfm_value_free(v);
        return st;
    }
    *out = v;
    return CF_OK;
}

/* The module type of v: RedisBloom's for its layout, so that RDB files hold what RedisBloom
 * itself would write. */
static cf_rm_type *cfm_type_of(const cfm_value *v)
{
    cf_config c;
    cf_get_config(v->f, &c);
    return (c.flags & CF_REDISBLOOM) ? cfm_rb_type : cfm_type;
}

/* ------------------------------------------------------------------------------------ */
/* Helpers shared by the commands                                                       */
/* ------------------------------------------------------------------------------------ */

static bool cfm_resp3(cf_rm_ctx *ctx)
{
    return (cf_rm.GetContextFlags(ctx) & CF_RM_CTX_FLAGS_RESP3) != 0;
}

/* Is the argument `word`, ignoring ASCII case? */
static bool cfm_is(const cf_rm_string *arg, const char *word)
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

static bool cfm_ll(const cf_rm_string *arg, long long *out)
{
    return cf_rm.StringToLongLong(arg, out) == CF_RM_OK;
}

typedef enum cfm_kind { CFM_EMPTY, CFM_OURS, CFM_OTHER } cfm_kind;

/* Open the key argv[1]. For one of ours, *v is its value, bound to ctx for the memory
 * check until cfm_close. */
static cfm_kind cfm_open(cf_rm_ctx *ctx, cf_rm_string *name, int mode, cf_rm_key **key,
                         cfm_value **v)
{
    *key = cf_rm.OpenKey(ctx, name, mode);
    *v = NULL;
    int type = cf_rm.KeyType(*key);
    if (type == CF_RM_KEYTYPE_EMPTY)
        return CFM_EMPTY;
    if (type != CF_RM_KEYTYPE_MODULE)
        return CFM_OTHER;
    cf_rm_type *t = cf_rm.ModuleTypeGetType(*key);
    if (t != cfm_type && t != cfm_rb_type)
        return CFM_OTHER;
    *v = cf_rm.ModuleTypeGetValue(*key);
    (*v)->ctx = ctx;
    return CFM_OURS;
}

/* Does an open key of ours hold a filter of RedisBloom's type? */
static bool cfm_is_rb(cf_rm_key *key)
{
    return cf_rm.ModuleTypeGetType(key) == cfm_rb_type;
}

static void cfm_close(cf_rm_key *key, cfm_value *v)
{
    if (v)
        v->ctx = NULL;
    cf_rm.CloseKey(key);
}

/* Close the key and send an error reply. */
static int cfm_fail(cf_rm_ctx *ctx, cf_rm_key *key, cfm_value *v, const char *err)
{
    cfm_close(key, v);
    return cf_rm.ReplyWithError(ctx, err);
}

/* Replicate the creation of v under `key` with everything that defines it, the secret
 * seed included, so that the replica makes the very same filter. */
static void cfm_replicate_reserve(cf_rm_ctx *ctx, cf_rm_string *key, const cfm_value *v)
{
    cf_config c;
    cf_get_config(v->f, &c);
    if (c.flags & CF_REDISBLOOM) { /* no seed, one fingerprint width */
        cf_rm.Replicate(ctx, "CF.RESERVE", "slclclclcc", key, (long long)c.capacity, "BUCKETSIZE",
                        (long long)c.bucket_size, "MAXITERATIONS", (long long)v->max_iterations,
                        "EXPANSION", (long long)c.expansion, "LAYOUT",
                        cfm_layout_names[CFM_LAYOUT_REDISBLOOM]);
        return;
    }
    if (c.generations) { /* then the generation it is at, which its clock chose */
        cf_stats s;
        cf_get_stats(v->f, &s);
        cf_rm.Replicate(ctx, "CF.RESERVE", "slclclclclclclclclcl", key, (long long)c.capacity,
                        "BUCKETSIZE", (long long)c.bucket_size, "MAXITERATIONS",
                        (long long)v->max_iterations, "EXPANSION", 0ll, "FPBITS",
                        (long long)c.fingerprint_bits, "MAXFILTERS", (long long)c.max_sub_filters,
                        "SEMISORT", (long long)((c.flags & CF_SEMI_SORT) != 0), "SEED",
                        (long long)c.seed, "WINDOW", (long long)c.window, "GENERATIONS",
                        (long long)c.generations);
        if (s.generation)
            cf_rm.Replicate(ctx, "CF.ADVANCE", "sl", key, (long long)s.generation);
        return;
    }
    cf_rm.Replicate(ctx, "CF.RESERVE", "slclclclclclclcl", key, (long long)c.capacity, "BUCKETSIZE",
                    (long long)c.bucket_size, "MAXITERATIONS", (long long)v->max_iterations,
                    "EXPANSION", (long long)c.expansion, "FPBITS", (long long)c.fingerprint_bits,
                    "MAXFILTERS", (long long)c.max_sub_filters, "SEMISORT",
                    (long long)((c.flags & CF_SEMI_SORT) != 0), "SEED", (long long)c.seed);
}

/* May this call move windows by the clock? Only a primary does, in a write command or its
 * own sweep (cfm_sweep): replicas and AOF replays get its moves as explicit CF.ADVANCE
 * commands, so that they hold the same bytes whatever their clocks say. Reads never
 * write: they answer as at the generation due (cfm_read_at). */
static bool cfm_may_advance(cf_rm_ctx *ctx)
{
    int flags = cf_rm.GetContextFlags(ctx);
    return cf_rm.Milliseconds && !(flags & (CF_RM_CTX_FLAGS_REPLICATED | CF_RM_CTX_FLAGS_LOADING |
                                            CF_RM_CTX_FLAGS_SLAVE | CF_RM_CTX_FLAGS_READONLY));
}

/* The generation a read answers as at: the one due now by this server's clock, so that a
 * read (which never writes) does not see what fell out of a window, on a replica too; 0
 * (answers as the filter is) for a filter without a window. */
static uint64_t cfm_read_at(const cfm_value *v)
{
    return cf_rm.Milliseconds ? cf_generation_at(v->f, (uint64_t)cf_rm.Milliseconds()) : 0;
}

/* Bring v (under `name`) to the generation due now, dropping the generations that fell
 * out of its window, and send the move to replicas and the AOF as CF.ADVANCE unless the
 * command created v (its CF.RESERVE, replicated after, carries the generation). A clock
 * behind the filter's newest generation moves nothing: keys then stay longer, never
 * shorter. Nothing for a filter without a window. */
static void cfm_due(cf_rm_ctx *ctx, cf_rm_string *name, cfm_value *v, bool created)
{
    if (!cfm_may_advance(ctx) || cf_is_loading(v->f))
        return;
    uint64_t due = cf_generation_at(v->f, (uint64_t)cf_rm.Milliseconds());
    if (due == 0) /* no window (or nothing due since the epoch) */
        return;
    cf_stats s;
    cf_get_stats(v->f, &s);
    if (due <= s.generation || cf_advance_to(v->f, due) != CF_OK)
        return;
    cfm_account(v);
    if (!created)
        cf_rm.Replicate(ctx, "CF.ADVANCE", "sl", name, (long long)due);
}

/* The defaults of s that its layout fixes: RedisBloom's has one fingerprint width and
 * plain buckets, whatever cf-fingerprint-bits and cf-semi-sort say for this library's. */
static void cfm_spec_for_layout(cfm_spec *s)
{
    if (s->layout == CFM_LAYOUT_REDISBLOOM) {
        s->fpbits = CFM_RB_FPBITS;
        s->semi_sort = 0;
    }
}

/* Whether the server was told once that the AOF it loads creates filters as RedisBloom
 * writes them. */
static bool cfm_foreign_aof_logged;

/* A filter of layout `layout` created while the AOF loads, by a command this module never
 * writes there (it writes every creation as CF.RESERVE with a SEED or a LAYOUT): the tail
 * of an AOF that RedisBloom wrote. Under cf-layout native, such a filter is of this
 * library's layout, whose bytes and false positives differ and which RedisBloom cannot
 * load back: said once. */
static void cfm_note_foreign_aof(cf_rm_ctx *ctx, long long layout)
{
    if (cfm_foreign_aof_logged || layout != CFM_LAYOUT_NATIVE ||
        (cf_rm.GetContextFlags(ctx) & (CF_RM_CTX_FLAGS_LOADING | CF_RM_CTX_FLAGS_REPLICATED)) !=
            CF_RM_CTX_FLAGS_LOADING)
        return;
    cfm_foreign_aof_logged = true;
    cf_rm.Log(ctx, "warning",
              "the AOF being loaded creates cuckoo filters as RedisBloom writes them (CF.ADD or "
              "CF.INSERT on a missing key, CF.RESERVE without SEED or LAYOUT), not as this "
              "module does: under cf-layout native they become filters of this module's "
              "layout, with other false positives, which RedisBloom cannot load back. Rewrite "
              "RedisBloom's AOF before the swap (BGREWRITEAOF), or set cuckoo.cf-layout "
              "redisbloom");
}

/* Make a filter for a command that creates one on a missing key (CF.ADD, CF.INSERT): of
 * the defaults, or of `spec` (CF.INSERT's CAPACITY and WINDOW). */
static const char *cfm_create(cf_rm_ctx *ctx, cf_rm_key *key, const cfm_spec *spec, cfm_value **v)
{
    cfm_spec s = spec ? *spec : cfm_defaults;
    cfm_spec_for_layout(&s);
    cfm_note_foreign_aof(ctx, s.layout);
    cf_status st = cfm_value_new(ctx, &s, v);
    if (st == CF_ENOMEM)
        return "ERR Insufficient memory to create filter";
    if (st != CF_OK)
        return "ERR Could not create filter";
    cf_rm.ModuleTypeSetValue(key, cfm_type_of(*v), *v);
    return NULL;
}

/* Why an add was refused, and what the client is told. */
typedef enum cfm_refusal {
    CFM_NO_MEMORY, /* growing failed; the filter is unchanged */
    CFM_AT_LIMIT,  /* a growing filter that would need a sub-filter beyond its limit */
    CFM_NO_ROOM,   /* a fixed filter with no room left */
    CFM_HOT,       /* the item's copies fill both of its buckets */
} cfm_refusal;

static const char *const cfm_refusal_error[] = {
    [CFM_NO_MEMORY] = "ERR Insufficient memory",
    [CFM_AT_LIMIT] = "Maximum expansions reached",
    [CFM_NO_ROOM] = "Filter is full",
    [CFM_HOT] = ("Filter is full for this item: its copies fill both of its buckets "
                 "(CF.ADDNX adds an item once)"), /* one string: clang asks for the () */
};

/* Is v a filter of RedisBloom's layout with as many sub-filters as the server allows
 * (cf-max-expansions)? RedisBloom refuses a whole add command then, even if it has room.
 * The limit is the server's, not the filter's, so that a filter has the same one after a
 * restart, RESTORE or full sync; a replica follows its primary's outcome. */
static bool cfm_rb_at_limit(cf_rm_ctx *ctx, cf_rm_key *key, const cfm_value *v)
{
    if (!cfm_is_rb(key) || cfm_replaying(ctx))
        return false;
    cf_stats s;
    cf_get_stats(v->f, &s);
    return s.sub_filters >= cfm_defaults.max_filters;
}

/* Open `name` for adds: its complete filter, or a new one of `spec` (NULL: the defaults;
 * *created) unless nocreate. Returns NULL, or the error to reply with (cfm_fail). */
static const char *cfm_open_for_add(cf_rm_ctx *ctx, cf_rm_string *name, const cfm_spec *spec,
                                    bool nocreate, cf_rm_key **key, cfm_value **v, bool *created)
{
    const char *err = NULL;
    *created = false;
    switch (cfm_open(ctx, name, CF_RM_READ | CF_RM_WRITE, key, v)) {
    case CFM_OTHER:
        return CFM_ERR_WRONGTYPE;
    case CFM_EMPTY:
        if (nocreate)
            return "ERR not found";
        err = cfm_create(ctx, *key, spec, v);
        *created = !err;
        return err;
    case CFM_OURS:
        if (cf_is_loading((*v)->f))
            return CFM_ERR_LOADING;
        return cfm_rb_at_limit(ctx, *key, *v) ? cfm_refusal_error[CFM_AT_LIMIT] : NULL;
    }
    return NULL;
}

/* Open `name` for lookups: *v is its filter, or NULL for a missing key or one of another
 * type, which hold nothing (the answer is "no", as in RedisBloom). An incomplete filter
 * (mid CF.LOADCHUNK) could miss keys: false, with the error sent. */
static bool cfm_open_lookup(cf_rm_ctx *ctx, cf_rm_string *name, cf_rm_key **key, cfm_value **v)
{
    if (cfm_open(ctx, name, CF_RM_READ, key, v) == CFM_OURS && cf_is_loading((*v)->f)) {
        cfm_fail(ctx, *key, *v, CFM_ERR_LOADING);
        return false;
    }
    return true;
}

/* The items args[0 .. n) as the key arrays of the library's batched calls. */
static void cfm_items(cf_rm_string **args, size_t n, const void **keys, size_t *lens)
{
    for (size_t i = 0; i < n; i++)
        keys[i] = cf_rm.StringPtrLen(args[i], &lens[i]);
}

/* Why the add of `item` (status st, not CF_OK nor CF_EXISTS) was refused; counted in the
 * totals of INFO cuckoo. The library refuses an item whose copies fill both of its buckets
 * (a growing filter does not grow for one item), and otherwise only when there is no room
 * and no sub-filter to add. The test is on the filter's contents alone, which a refused
 * add leaves as they were, so CF.INSERT can ask after its whole batch went in and get
 * the answer CF.ADD would have got. */
static cfm_refusal cfm_refused(const cfm_value *v, cf_status st, const void *item, size_t len)
{
    cfm_refusal why;
    cf_config c;
    cf_get_config(v->f, &c);
    if (st == CF_ENOMEM)
        why = CFM_NO_MEMORY;
    else if (cf_count(v->f, item, len) >= 2u * c.bucket_size)
        why = CFM_HOT;
    else
        why = c.expansion > 0 ? CFM_AT_LIMIT : CFM_NO_ROOM;
    if (why == CFM_HOT)
        cfm_total_add(&cfm_total.refused_hot, 1);
    else if (why != CFM_NO_MEMORY)
        cfm_total_add(&cfm_total.refused_full, 1);
    return why;
}

/* After a write command's work on the filter under `name`: the totals follow it, the
 * command goes to replicas and the AOF as it came, and, if the filter changed,
 * keyspace-event subscribers hear `event` (class d, module events). */
static void cfm_wrote(cf_rm_ctx *ctx, cf_rm_string *name, cfm_value *v, const char *event,
                      bool changed)
{
    cfm_account(v);
    cf_rm.ReplicateVerbatim(ctx);
    if (changed)
        cf_rm.NotifyKeyspaceEvent(ctx, CF_RM_NOTIFY_MODULE, event, name);
}

/* After a delete: compact once deletes pass a tenth of the items (RedisBloom's rule), so
 * that a filter that grew and then emptied gives its memory back. */
static void cfm_after_delete(cfm_value *v)
{
    cf_stats s;
    /* Held at the bound every loader accepts (CF.INFO's signed reply), never past it: a
     * count taken past it would make the key's own DUMP, RDB and chunks unloadable. */
    if (v->deletes < CFM_MAX_DELETES)
        v->deletes++;
    cf_get_stats(v->f, &s);
    if (s.sub_filters > 1 && v->deletes > s.items / 10) {
        cf_compact(v->f);
        v->deletes = 0;
    }
}

/* ------------------------------------------------------------------------------------ */
/* CF.RESERVE key capacity [BUCKETSIZE b] [MAXITERATIONS m] [EXPANSION e] [FPBITS f]    */
/*            [MAXFILTERS n] [SEMISORT 0|1]                                             */
/* ------------------------------------------------------------------------------------ */

/* The options of CF.RESERVE and their ranges (the library's limits), from which their
 * error replies are written. */
typedef struct cfm_option {
    const char *name;
    long long min, max;
    size_t offset; /* of the long long in cfm_spec */
} cfm_option;

static const cfm_option cfm_options[] = {
    {"BUCKETSIZE", 1, CF_MAX_BUCKET_SIZE, offsetof(cfm_spec, bucket_size)},
    {"MAXITERATIONS", 1, CF_MAX_MAX_KICKS, offsetof(cfm_spec, max_iterations)},
    {"EXPANSION", 0, CF_MAX_EXPANSION, offsetof(cfm_spec, expansion)},
    {"FPBITS", CF_MIN_FINGERPRINT_BITS, CF_MAX_FINGERPRINT_BITS, offsetof(cfm_spec, fpbits)},
    {"MAXFILTERS", 1, CF_MAX_SUB_FILTERS, offsetof(cfm_spec, max_filters)},
    {"SEMISORT", 0, 1, offsetof(cfm_spec, semi_sort)},
    {"WINDOW", 1, CFM_MAX_WINDOW, offsetof(cfm_spec, window)},
    {"GENERATIONS", 2, CF_MAX_GENERATIONS, offsetof(cfm_spec, generations)},
};

/* Semi-sorted buckets have 4 slots. */
#define CFM_SEMI_BUCKET 4

/* Room for an error reply written from a template and numbers. */
#define CFM_ERROR_BYTES 128

/* Write an error reply into err; returns false, for the callers that fail with it. */
static bool cfm_error(char err[CFM_ERROR_BYTES], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool cfm_error(char err[CFM_ERROR_BYTES], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, CFM_ERROR_BYTES, fmt, ap);
    va_end(ap);
    return false;
}

/* The layout named by arg (ignoring ASCII case), or -1. */
static int cfm_layout_named(const cf_rm_string *arg)
{
    for (int i = 0; i < CFM_LAYOUTS; i++)
        if (cfm_is(arg, cfm_layout_names[i]))
            return cfm_enum_values[i];
    return -1;
}

/* Apply one option pair to s. Returns true, or false with the error reply in err. */
static bool cfm_reserve_option(cf_rm_ctx *ctx, const cf_rm_string *name, const cf_rm_string *value,
                               cfm_spec *s, char err[CFM_ERROR_BYTES])
{
    long long n;
    if (cfm_is(name, "LAYOUT")) {
        int layout = cfm_layout_named(value);
        if (layout < 0)
            return cfm_error(err, "ERR LAYOUT must be %s or %s", cfm_layout_names[0],
                             cfm_layout_names[1]);
        s->layout = layout;
        return true;
    }
    if (cfm_is(name, "SEED")) {
        /* Only the primary (through replication) and AOF replay choose a seed. */
        if (!cfm_replaying(ctx))
            return cfm_error(err, "Unknown argument received");
        if (!cfm_ll(value, &n))
            return cfm_error(err, "Couldn't parse SEED");
        s->seed = (uint64_t)n;
        s->has_seed = true;
        return true;
    }
    for (size_t i = 0; i < sizeof cfm_options / sizeof cfm_options[0]; i++) {
        const cfm_option *o = &cfm_options[i];
        if (!cfm_is(name, o->name))
            continue;
        if (!cfm_ll(value, &n))
            return cfm_error(err, "Couldn't parse %s", o->name);
        if (n < o->min || n > o->max)
            return cfm_error(err, "%s: value must be in the range [%lld, %lld]", o->name, o->min,
                             o->max);
        memcpy((char *)s + o->offset, &n, sizeof n);
        return true;
    }
    return cfm_error(err, "Unknown argument received");
}

/* The options a window takes, given as the arguments args[0 .. n) (option, value pairs):
 * GENERATIONS only with WINDOW, and no EXPANSION but 0 (its generations keep one size).
 * NULL, or the error reply. */
static const char *cfm_window_check(cfm_spec *s, cf_rm_string **args, int n)
{
    bool generations = false, expansion = false;
    for (int i = 0; i + 1 < n; i += 2) {
        generations |= cfm_is(args[i], "GENERATIONS");
        expansion |= cfm_is(args[i], "EXPANSION") && s->expansion != 0;
    }
    if (generations && !s->window)
        return "ERR GENERATIONS is for a window: give WINDOW too";
    if (s->window && expansion)
        return "ERR a window's generations keep one size: no EXPANSION";
    if (s->window)
        s->expansion = 0;
    return NULL;
}

/* Reply that a capacity is out of range; `least` names its lower bound. */
static int cfm_capacity_error(cf_rm_ctx *ctx, const char *least)
{
    char err[CFM_ERROR_BYTES];
    snprintf(err, sizeof err, "Capacity must be in the range [%s, %lld]", least, CFM_MAX_CAPACITY);
    return cf_rm.ReplyWithError(ctx, err);
}

static int cfm_cmd_reserve(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc < 3 || argc % 2 == 0)
        return cf_rm.WrongArity(ctx);
    cfm_spec s = cfm_defaults;
    if (!cfm_ll(argv[2], &s.capacity))
        return cf_rm.ReplyWithError(ctx, "Bad capacity");
    /* The layout first: the defaults of FPBITS and SEMISORT depend on it. A SEED (from a
     * primary or an AOF, which older versions wrote without LAYOUT) means this library's
     * layout, whatever cf-layout says here. */
    bool named = false; /* a SEED or a LAYOUT, as this module writes every creation */
    for (int i = 3; i < argc; i += 2)
        if (cfm_is(argv[i], "SEED")) {
            s.layout = CFM_LAYOUT_NATIVE;
            named = true;
        }
    for (int i = 3; i < argc; i += 2)
        if (cfm_is(argv[i], "LAYOUT") && cfm_layout_named(argv[i + 1]) >= 0) {
            s.layout = cfm_layout_named(argv[i + 1]);
            named = true;
        }
    if (!named)
        cfm_note_foreign_aof(ctx, s.layout);
    cfm_spec_for_layout(&s);
    for (int i = 3; i < argc; i += 2) {
        char err[CFM_ERROR_BYTES];
        if (!cfm_reserve_option(ctx, argv[i], argv[i + 1], &s, err))
            return cf_rm.ReplyWithError(ctx, err);
    }
    if (s.capacity < 2 * s.bucket_size || s.capacity > CFM_MAX_CAPACITY)
        return cfm_capacity_error(ctx, "2 * BUCKETSIZE");
    if (s.semi_sort && s.bucket_size != CFM_SEMI_BUCKET)
        return cf_rm.ReplyWithError(ctx, "ERR SEMISORT 1 needs BUCKETSIZE 4");
    if (s.layout == CFM_LAYOUT_REDISBLOOM &&
        (s.fpbits != CFM_RB_FPBITS || s.semi_sort || s.has_seed))
        return cf_rm.ReplyWithError(ctx, CFM_ERR_RB_OPTIONS);
    if (s.layout == CFM_LAYOUT_REDISBLOOM && s.window)
        return cf_rm.ReplyWithError(ctx, CFM_ERR_RB_WINDOW);
    /* (Earlier versions replicated and logged it for this layout: taken there, unused.) */
    for (int i = 3; i < argc && s.layout == CFM_LAYOUT_REDISBLOOM && !cfm_replaying(ctx); i += 2)
        if (cfm_is(argv[i], "MAXFILTERS"))
            return cf_rm.ReplyWithError(ctx, CFM_ERR_RB_MAXFILTERS);
    const char *werr = cfm_window_check(&s, argv + 3, argc - 3);
    if (werr)
        return cf_rm.ReplyWithError(ctx, werr);

    cf_rm_key *key;
    cfm_value *v;
    switch (cfm_open(ctx, argv[1], CF_RM_READ | CF_RM_WRITE, &key, &v)) {
    case CFM_OURS:
        return cfm_fail(ctx, key, v, "ERR item exists");
    case CFM_OTHER:
        return cfm_fail(ctx, key, v, CFM_ERR_WRONGTYPE);
    case CFM_EMPTY:
        break;
    }
    cf_status st = cfm_value_new(ctx, &s, &v);
    if (st != CF_OK)
        return cfm_fail(ctx, key, NULL,
                        st == CF_ENOMEM ? "ERR Insufficient memory to create filter"
                                        : "ERR Could not create filter");
    cf_rm.ModuleTypeSetValue(key, cfm_type_of(v), v);
    cfm_due(ctx, argv[1], v, true);
    cfm_replicate_reserve(ctx, argv[1], v);
    cfm_account(v);
    cf_rm.NotifyKeyspaceEvent(ctx, CF_RM_NOTIFY_MODULE, "cf.reserve", argv[1]);
    cfm_close(key, v);
    return cf_rm.ReplyWithSimpleString(ctx, "OK");
}

/* ------------------------------------------------------------------------------------ */
/* CF.ADD key item, CF.ADDNX key item                                                   */
/* ------------------------------------------------------------------------------------ */

static int cfm_add_command(cf_rm_ctx *ctx, cf_rm_string **argv, int argc, bool nx)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cfm_value *v;
    bool created;
    const char *err = cfm_open_for_add(ctx, argv[1], NULL, false, &key, &v, &created);
    if (err)
        return cfm_fail(ctx, key, v, err);
    cfm_due(ctx, argv[1], v, created);
    size_t len;
    const char *item = cf_rm.StringPtrLen(argv[2], &len);
    cf_status st = nx ? cf_add_unique(v->f, item, len) : cf_add(v->f, item, len);
    if (st != CF_OK && st != CF_EXISTS) {
        err = cfm_refusal_error[cfm_refused(v, st, item, len)];
        if (created) /* cannot happen (a new filter has room), but never leave it half-made */
            cf_rm.DeleteKey(key);
        return cfm_fail(ctx, key, created ? NULL : v, err);
    }
    if (created)
        cfm_replicate_reserve(ctx, argv[1], v);
    cfm_wrote(ctx, argv[1], v, nx ? "cf.addnx" : "cf.add", st == CF_OK);
    cfm_close(key, v);
    return cf_rm.ReplyWithBool(ctx, st == CF_OK);
}

static int cfm_cmd_add(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    return cfm_add_command(ctx, argv, argc, false);
}

static int cfm_cmd_addnx(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    return cfm_add_command(ctx, argv, argc, true);
}

/* ------------------------------------------------------------------------------------ */
/* CF.INSERT key [CAPACITY c] [NOCREATE] ITEMS item..., CF.INSERTNX (same)              */
/* ------------------------------------------------------------------------------------ */

static int cfm_insert_command(cf_rm_ctx *ctx, cf_rm_string **argv, int argc, bool nx)
{
    if (argc < 4)
        return cf_rm.WrongArity(ctx);
    cfm_spec spec = cfm_defaults;
    long long capacity = cfm_defaults.capacity;
    bool nocreate = false, has_capacity = false, has_generations = false;
    int items = argc;
    for (int i = 2; i < argc && items == argc; i++) {
        if (cfm_is(argv[i], "CAPACITY")) {
            if (++i == argc)
                return cf_rm.WrongArity(ctx);
            if (!cfm_ll(argv[i], &capacity))
                return cf_rm.ReplyWithError(ctx, "Bad capacity");
            has_capacity = true;
        } else if (cfm_is(argv[i], "WINDOW") || cfm_is(argv[i], "GENERATIONS")) {
            if (i + 1 == argc)
                return cf_rm.WrongArity(ctx);
            char err[CFM_ERROR_BYTES];
            has_generations |= cfm_is(argv[i], "GENERATIONS");
            if (!cfm_reserve_option(ctx, argv[i], argv[i + 1], &spec, err))
                return cf_rm.ReplyWithError(ctx, err);
            i++;
        } else if (cfm_is(argv[i], "NOCREATE")) {
            nocreate = true;
        } else if (cfm_is(argv[i], "ITEMS")) {
            items = i + 1;
        } else {
            return cf_rm.ReplyWithError(ctx, "Unknown argument received");
        }
    }
    if (items >= argc)
        return cf_rm.WrongArity(ctx);
    if (has_generations && !spec.window)
        return cf_rm.ReplyWithError(ctx, "ERR GENERATIONS is for a window: give WINDOW too");
    if (spec.window && spec.layout == CFM_LAYOUT_REDISBLOOM)
        return cf_rm.ReplyWithError(ctx, CFM_ERR_RB_WINDOW);
    if (spec.window)
        spec.expansion = 0;
    spec.capacity = capacity;
    /* The range depends on this server's cf-bucket-size. A command from the primary or the
     * AOF was checked when it ran there, and the filter it may create arrives as an explicit
     * CF.RESERVE first: refusing it here, under other module arguments, would drop its
     * items on this side only. */
    if (has_capacity && !cfm_replaying(ctx) &&
        (capacity < 2 * cfm_defaults.bucket_size || capacity > CFM_MAX_CAPACITY))
        return cfm_capacity_error(ctx, "cf-bucket-size * 2");

    /* Every item's outcome comes before the reply, which is an error instead of the array
     * if an item met the sub-filter limit. */
    size_t count = (size_t)(argc - items);
    cf_status *outcome = cf_rm.TryAlloc(count * sizeof *outcome);
    if (!outcome)
        return cf_rm.ReplyWithError(ctx, "ERR Insufficient memory");
    cf_rm_key *key;
    cfm_value *v;
    bool created;
    const char *err = cfm_open_for_add(ctx, argv[1], &spec, nocreate, &key, &v, &created);
    if (err) {
        cf_rm.Free(outcome);
        return cfm_fail(ctx, key, v, err);
    }
    cfm_due(ctx, argv[1], v, created);
    /* The items go in batch by batch through cf_add_many, which is exactly one cf_add (for
     * CF.INSERTNX, cf_add_unique) per item in order, with the same statuses: a refused
     * item does not stop the others, and the filter ends as the loop of single adds would
     * leave it, on a replica too. */
    const void *keys[CFM_BATCH];
    size_t lens[CFM_BATCH];
    bool at_limit = false;
    size_t added = 0;
    for (size_t i = 0; i < count;) {
        size_t n = count - i < CFM_BATCH ? count - i : CFM_BATCH;
        cfm_items(argv + (size_t)items + i, n, keys, lens);
        added += cf_add_keys(v->f, keys, lens, n, nx ? CF_ADD_UNIQUE : 0u, outcome + i);
        for (size_t j = 0; j < n; j++)
            if (outcome[i + j] != CF_OK && outcome[i + j] != CF_EXISTS)
                at_limit |= cfm_refused(v, outcome[i + j], keys[j], lens[j]) == CFM_AT_LIMIT;
        i += n;
    }
    if (created)
        cfm_replicate_reserve(ctx, argv[1], v);
    cfm_wrote(ctx, argv[1], v, nx ? "cf.insertnx" : "cf.insert", added > 0);
    if (at_limit) { /* as RedisBloom answers; the items that found room stay */
        cf_rm.Free(outcome);
        return cfm_fail(ctx, key, v, cfm_refusal_error[CFM_AT_LIMIT]);
    }
    bool resp3 = cfm_resp3(ctx);
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
    cfm_close(key, v);
    return CF_RM_OK;
}

static int cfm_cmd_insert(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    return cfm_insert_command(ctx, argv, argc, false);
}

static int cfm_cmd_insertnx(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    return cfm_insert_command(ctx, argv, argc, true);
}

/* ------------------------------------------------------------------------------------ */
/* CF.EXISTS key item, CF.MEXISTS key item..., CF.COUNT key item                        */
/* ------------------------------------------------------------------------------------ */
/* (cfm_open_lookup says what a missing key and an incomplete filter answer.) */

static int cfm_cmd_exists(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cfm_value *v;
    bool found = false;
    if (!cfm_open_lookup(ctx, argv[1], &key, &v))
        return CF_RM_OK;
    if (v) {
        size_t len;
        const char *item = cf_rm.StringPtrLen(argv[2], &len);
        found = cf_contains_at(v->f, item, len, cfm_read_at(v));
    }
    cfm_close(key, v);
    return cf_rm.ReplyWithBool(ctx, found);
}

static int cfm_cmd_mexists(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc < 3)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cfm_value *v;
    if (!cfm_open_lookup(ctx, argv[1], &key, &v))
        return CF_RM_OK;
    cf_rm.ReplyWithArray(ctx, argc - 2);
    const void *keys[CFM_BATCH];
    size_t lens[CFM_BATCH];
    bool found[CFM_BATCH] = {false};
    for (size_t i = 2; i < (size_t)argc;) {
        size_t n = (size_t)argc - i < CFM_BATCH ? (size_t)argc - i : CFM_BATCH;
        if (v) {
            cfm_items(argv + i, n, keys, lens);
            cf_contains_keys_at(v->f, keys, lens, n, cfm_read_at(v), found);
        }
        for (size_t j = 0; j < n; j++)
            cf_rm.ReplyWithBool(ctx, found[j]);
        i += n;
    }
    cfm_close(key, v);
    return CF_RM_OK;
}

static int cfm_cmd_count(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cfm_value *v;
    uint64_t n = 0;
    if (!cfm_open_lookup(ctx, argv[1], &key, &v))
        return CF_RM_OK;
    if (v) {
        size_t len;
        const char *item = cf_rm.StringPtrLen(argv[2], &len);
        n = cf_count_at(v->f, item, len, cfm_read_at(v));
    }
    cfm_close(key, v);
    return cf_rm.ReplyWithLongLong(ctx, n > LLONG_MAX ? LLONG_MAX : (long long)n);
}

/* ------------------------------------------------------------------------------------ */
/* CF.DEL key item, CF.COMPACT key                                                      */
/* ------------------------------------------------------------------------------------ */

/* Open for writing a key that must hold a complete filter. Otherwise send `missing` (the
 * key is missing or of another type) or the incomplete-filter error, and return NULL. */
static cfm_value *cfm_open_complete(cf_rm_ctx *ctx, cf_rm_string *name, cf_rm_key **key,
                                    const char *missing)
{
    cfm_value *v;
    if (cfm_open(ctx, name, CF_RM_READ | CF_RM_WRITE, key, &v) != CFM_OURS) {
        cfm_fail(ctx, *key, v, missing);
        return NULL;
    }
    if (cf_is_loading(v->f)) {
        cfm_fail(ctx, *key, v, CFM_ERR_LOADING);
        return NULL;
    }
    return v;
}

static int cfm_cmd_del(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cfm_value *v = cfm_open_complete(ctx, argv[1], &key, "Not found");
    if (!v)
        return CF_RM_OK;
    cfm_due(ctx, argv[1], v, false);
    size_t len;
    const char *item = cf_rm.StringPtrLen(argv[2], &len);
    bool deleted = cf_delete(v->f, item, len) == CF_OK;
    if (deleted)
        cfm_after_delete(v);
    cfm_wrote(ctx, argv[1], v, "cf.del", deleted);
    cfm_close(key, v);
    return cf_rm.ReplyWithBool(ctx, deleted);
}

static int cfm_cmd_compact(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 2)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cfm_value *v = cfm_open_complete(ctx, argv[1], &key, "Cuckoo filter was not found");
    if (!v)
        return CF_RM_OK;
    cfm_due(ctx, argv[1], v, false);
    cf_compact(v->f);
    v->deletes = 0;
    cfm_wrote(ctx, argv[1], v, "cf.compact", true);
    cfm_close(key, v);
    return cf_rm.ReplyWithSimpleString(ctx, "OK");
}

/* CF.ADVANCE key generation: a windowed filter brought to its generation `generation`,
 * dropping the generations that leave its window (what a primary sends its replicas and
 * its AOF whenever its clock moves a filter; a client may send it too, to move a window
 * ahead of the clock). A generation already reached changes nothing. */
static int cfm_cmd_advance(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    long long generation;
    if (!cfm_ll(argv[2], &generation) || generation < 0)
        return cf_rm.ReplyWithError(ctx, "ERR generation must be a number from 0");
    cf_rm_key *key;
    cfm_value *v = cfm_open_complete(ctx, argv[1], &key, "ERR not found");
    if (!v)
        return CF_RM_OK;
    cf_stats s;
    cf_get_stats(v->f, &s);
    if (!s.generations)
        return cfm_fail(ctx, key, v, "ERR not a filter with a window (CF.RESERVE ... WINDOW)");
    if ((uint64_t)generation < s.generation)
        return cfm_fail(ctx, key, v, "ERR the filter is at a later generation already");
    /* A client may move a window ahead of the clock, but no further than a jump that
     * drops every generation: past that the clock would move nothing until it caught up,
     * and a window sent to the last generation would never forget again. The primary's
     * own moves (replicated, or in the AOF) are taken as they come. */
    uint64_t due = cf_generation_at(v->f, (uint64_t)cf_rm.Milliseconds());
    if (!cfm_replaying(ctx) && (uint64_t)generation > due &&
        (uint64_t)generation - due > s.generations)
        return cfm_fail(ctx, key, v,
                        "ERR generation is more than the window's generations ahead of the "
                        "clock's");
    bool moved = (uint64_t)generation > s.generation;
    cf_advance_to(v->f, (uint64_t)generation); /* checked above: cannot fail */
    cfm_wrote(ctx, argv[1], v, "cf.advance", moved);
    cfm_close(key, v);
    return cf_rm.ReplyWithSimpleString(ctx, "OK");
}

/* A deep copy of a value (the server's copy callback, below). */
static void *cfm_copy(cf_rm_string *from, cf_rm_string *to, const void *value);

/* CF.MERGE destkey srckey [srckey ...]: every item of the sources added to destkey, as
 * PFMERGE merges HyperLogLogs: a missing destkey starts as an empty filter like the first
 * source (its settings and seed), and counts add up. All or nothing: with several sources
 * they go into a copy of destkey that replaces it at the end. A missing source is an error
 * (a mistyped name would otherwise merge nothing, silently). Replicated as itself: a merge
 * is deterministic, so a replica and an AOF replay make the same bytes. */
static int cfm_cmd_merge(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc < 3)
        return cf_rm.WrongArity(ctx);
    int nsrc = argc - 2;
    cf_rm_key **keys = cf_rm.TryAlloc((size_t)argc * sizeof *keys);
    cfm_value **src = cf_rm.TryAlloc((size_t)argc * sizeof *src);
    if (!keys || !src) {
        cf_rm.Free(keys);
        cf_rm.Free(src);
        return cf_rm.ReplyWithError(ctx, "ERR Insufficient memory");
    }
    const char *err = NULL;
    int opened = 0;
    for (int i = 0; i < nsrc && !err; i++, opened++) {
        cfm_kind kind = cfm_open(ctx, argv[2 + i], CF_RM_READ, &keys[i], &src[i]);
        err = kind == CFM_EMPTY          ? "ERR source key not found"
              : kind == CFM_OTHER        ? CFM_ERR_WRONGTYPE
              : cf_is_loading(src[i]->f) ? CFM_ERR_LOADING
                                         : NULL;
    }
    cf_rm_key *dkey = NULL;
    cfm_value *dest = NULL, *work = NULL;
    if (!err) {
        cfm_kind kind = cfm_open(ctx, argv[1], CF_RM_READ | CF_RM_WRITE, &dkey, &dest);
        err = kind == CFM_OTHER                            ? CFM_ERR_WRONGTYPE
              : kind == CFM_OURS && cf_is_loading(dest->f) ? CFM_ERR_LOADING
                                                           : NULL;
        /* destkey's items are in the merge already: as a source too they would count
         * twice (the library refuses a filter merged with itself for the same reason). */
        for (int i = 0; i < nsrc && !err && dest; i++)
            if (src[i] == dest)
                err = "ERR a filter cannot merge with itself: a source is the destination "
                      "key, whose items the merge holds already";
    }
    if (!err && !dest) { /* an empty filter like the first source, in the server's memory */
        work = cfm_value_alloc(ctx, src[0]->max_iterations);
        cf_allocator alloc = work ? cfm_allocator(work) : (cf_allocator){0};
        if (!work || cf_new_like(src[0]->f, &alloc, &work->f) != CF_OK)
            err = "ERR Insufficient memory to create filter";
    } else if (!err) {
        work = nsrc > 1 ? cfm_copy(NULL, NULL, dest) : dest;
        if (!work)
            err = "ERR Insufficient memory";
        else
            work->ctx = ctx;
    }
    for (int i = 0; i < nsrc && !err; i++) {
        const char *why = NULL;
        cf_status st = cf_merge(work->f, src[i]->f, &why);
        if (st == CF_ENOMEM)
            err = "ERR Insufficient memory";
        else if (st != CF_OK)
            err = why; /* the library's reason, prefixed below */
    }
    for (int i = 0; i < opened; i++)
        cfm_close(keys[i], src[i]);
    cf_rm.Free(keys);
    cf_rm.Free(src);
    if (err) {
        if (work && work != dest)
            cfm_value_free(work);
        if (dkey)
            cfm_close(dkey, dest);
        if (strncmp(err, "ERR ", 4) == 0 || strncmp(err, "WRONGTYPE", 9) == 0)
            return cf_rm.ReplyWithError(ctx, err);
        char line[CFM_ERROR_MAX];
        snprintf(line, sizeof line, "ERR %s", err);
        return cf_rm.ReplyWithError(ctx, line);
    }
    if (work != dest)
        cf_rm.ModuleTypeSetValue(dkey, cfm_type_of(work), work); /* frees dest, if any */
    cfm_wrote(ctx, argv[1], work, "cf.merge", true);
    cfm_close(dkey, work);
    return cf_rm.ReplyWithSimpleString(ctx, "OK");
}

/* ------------------------------------------------------------------------------------ */
/* CF.INFO key, CF.DEBUG key                                                            */
/* ------------------------------------------------------------------------------------ */

/* Open a key that must hold a filter; on failure the error is sent and NULL returned. */
static cfm_value *cfm_open_existing(cf_rm_ctx *ctx, cf_rm_string *name, cf_rm_key **key)
{
    cfm_value *v;
    switch (cfm_open(ctx, name, CF_RM_READ, key, &v)) {
    case CFM_EMPTY:
        cfm_fail(ctx, *key, v, "ERR not found");
        return NULL;
    case CFM_OTHER:
        cfm_fail(ctx, *key, v, CFM_ERR_WRONGTYPE);
        return NULL;
    case CFM_OURS:
        break;
    }
    return v;
}

/* RedisBloom's count of a filter's bytes (CF.INFO Size): its filter record, a record per
 * sub-filter, and the tables' bytes. Reported as it is for filters of its layout, whose
 * clients compare it; MEMORY USAGE counts what this module holds. */
#define CFM_RB_FILTER_RECORD 40u
#define CFM_RB_SUB_RECORD    16u

/* The figures CF.INFO and CF.DEBUG report. */
typedef struct cfm_figures {
    cf_config config;
    cf_stats stats;
    uint64_t first_buckets; /* buckets of the first sub-filter */
    uint64_t size;          /* CF.INFO's Size: bytes held, or RedisBloom's count */
    bool rb;                /* RedisBloom's layout */
} cfm_figures;

static void cfm_figures_of(const cfm_value *v, cfm_figures *out)
{
    cf_get_config(v->f, &out->config);
    cf_get_stats(v->f, &out->stats);
    out->rb = (out->config.flags & CF_REDISBLOOM) != 0;
    /* Sub-filter k has e^k times the first one's buckets. */
    uint64_t sum = 0, term = 1;
    for (unsigned k = 0; k < out->stats.sub_filters; k++) {
        sum += term;
        term *= out->config.expansion;
    }
    out->first_buckets = sum ? out->stats.buckets / sum : 0;
    out->size = v->bytes;
    if (out->rb)
        out->size = CFM_RB_FILTER_RECORD + (uint64_t)CFM_RB_SUB_RECORD * out->stats.sub_filters +
                    out->stats.buckets * out->stats.bucket_size;
}

static int cfm_cmd_info(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 2)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cfm_value *v = cfm_open_existing(ctx, argv[1], &key);
    if (!v)
        return CF_RM_OK;
    cfm_figures g;
    cfm_figures_of(v, &g);
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
    if (cfm_resp3(ctx))
        cf_rm.ReplyWithMap(ctx, n);
    else
        cf_rm.ReplyWithArray(ctx, 2 * n);
    for (long i = 0; i < n; i++) {
        cf_rm.ReplyWithSimpleString(ctx, fields[i].name);
        cf_rm.ReplyWithLongLong(ctx, (long long)fields[i].value);
    }
    cfm_close(key, v);
    return CF_RM_OK;
}

static int cfm_cmd_debug(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 2)
        return cf_rm.WrongArity(ctx);
    cf_rm_key *key;
    cfm_value *v = cfm_open_existing(ctx, argv[1], &key);
    if (!v)
        return CF_RM_OK;
    cfm_figures g;
    cfm_figures_of(v, &g);
    char text[400]; /* room for every field at its widest: n stays below its size */
    int n = snprintf(text, sizeof text,
                     "bktsize:%u buckets:%llu items:%llu deletes:%llu filters:%u "
                     "max_iterations:%u expansion:%u",
                     g.stats.bucket_size, (unsigned long long)g.first_buckets,
                     (unsigned long long)g.stats.items, (unsigned long long)v->deletes,
                     g.stats.sub_filters, v->max_iterations, g.config.expansion);
    /* RedisBloom's layout: RedisBloom's line exactly, which its clients and tests compare.
     * This library's: a window's fields (its length in ms, its generations, the newest's
     * number), then fpbits; the line ends with the layout, as clients parse it. */
    if (!g.rb && g.stats.generations)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      " window:%llu generations:%u generation:%llu",
                      (unsigned long long)g.stats.window, g.stats.generations,
                      (unsigned long long)g.stats.generation);
    if (!g.rb)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      " fpbits:%u fpr:%.6g fpr_bound:%.6g layout:%s", g.stats.fingerprint_bits,
                      g.stats.fpr, g.stats.fpr_bound, cfm_layout_names[CFM_LAYOUT_NATIVE]);
    cfm_close(key, v);
    return cf_rm.ReplyWithStringBuffer(ctx, text, (size_t)n);
}

/* ------------------------------------------------------------------------------------ */
/* Chunks: CF.SCANDUMP, CF.LOADCHUNK, and the type callbacks built on them              */
/* ------------------------------------------------------------------------------------ */
/* A filter travels as the library's chunks (docs/FORMAT.md): a header chunk, then data
 * chunks of at most 16 MiB, each checked as it arrives. The module puts its own fields
 * (CFM_PREFIX_BYTES) in front of the header chunk. */

static void cfm_put_u64(unsigned char *p, uint64_t x)
{
    for (unsigned i = 0; i < 8; i++)
        p[i] = (unsigned char)(x >> (8 * i));
}

static uint64_t cfm_get_u64(const unsigned char *p)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 8; i++)
        x |= (uint64_t)p[i] << (8 * i);
    return x;
}

/* A buffer that holds any chunk of v, prefix included. Commands get NULL when memory is
 * short; saving (AOF, digest) treats that like the server's own allocations do. */
static unsigned char *cfm_chunk_buffer(const cfm_value *v, size_t *cap, bool must)
{
    *cap = cf_dump_chunk_max(v->f) + CFM_PREFIX_BYTES;
    return must ? cf_rm.Alloc(*cap) : cf_rm.TryAlloc(*cap);
}

/* The chunk at *cursor into buf (which has room for the prefix), advancing *cursor;
 * *len = 0 at the end. The header chunk gets the module's fields in front. */
static cf_status cfm_dump(const cfm_value *v, uint64_t *cursor, unsigned char *buf, size_t cap,
                          size_t *len)
{
    bool header = *cursor == 0;
    size_t skip = header ? CFM_PREFIX_BYTES : 0;
    cf_status st = cf_dump_chunk(v->f, cursor, buf + skip, cap - skip, len);
    if (st == CF_OK && header &&
        (st = cf_module_prefix_write(v->f, v->deletes, v->max_iterations, buf)) == CF_OK)
        *len += CFM_PREFIX_BYTES;
    return st;
}

/* Give v's filter its next chunk. The first (the header) is checked first for the memory
 * of the whole filter it describes, so that a forged one is refused before anything is
 * allocated; the tables then get their memory as their chunks arrive. */
static cf_status cfm_take_chunk(cfm_value *v, uint64_t cursor, const void *data, size_t len)
{
    size_t need;
    if (!v->f && cf_chunk_bytes_needed(data, len, &need) == CF_OK && !cfm_room_for(v->ctx, need))
        return CF_ENOMEM;
    cf_allocator alloc = cfm_allocator(v);
    return cf_load_chunk(&v->f, cursor, data, len, &alloc);
}

/* Is v's filter a window? Its fields' check waits until it is complete. */
static bool cfm_is_window(const cfm_value *v)
{
    cf_config c;
    cf_get_config(v->f, &c);
    return c.generations != 0;
}

/* Start a value from a prefixed header chunk: CF_OK and *out, or the library's status
 * (CF_ECORRUPT for a bad prefix). */
static cf_status cfm_load_header(cf_rm_ctx *ctx, uint64_t cursor, const unsigned char *data,
                                 size_t len, cfm_value **out)
{
    uint64_t deletes, iterations, check;
    cf_status st = cf_module_prefix_read(data, len, &deletes, &iterations, &check);
    if (st != CF_OK)
        return st;
    cfm_value *v = cfm_value_alloc(ctx, (unsigned)iterations);
    if (!v)
        return CF_ENOMEM;
    v->deletes = deletes;
    st = cfm_take_chunk(v, cursor, data + CFM_PREFIX_BYTES, len - CFM_PREFIX_BYTES);
    if (st == CF_OK && cfm_is_window(v)) {
        v->pending_check = check;
        v->check_pending = true;
    } else if (st == CF_OK &&
               check != cf_module_fields_check(v->f, v->deletes, v->max_iterations)) {
        st = CF_ECORRUPT; /* the fields do not belong with this header */
    }
    if (st != CF_OK) {
        cfm_value_free(v);
        return st;
    }
    *out = v;
    return CF_OK;
}

/* The next data chunk of a value loading by chunks; once the filter is complete, a
 * window's pending check of its fields (CF_ECORRUPT if they do not belong with it). */
static cf_status cfm_load_data(cfm_value *v, uint64_t cursor, const void *data, size_t len)
{
    cf_status st = cfm_take_chunk(v, cursor, data, len);
    if (st != CF_OK || cf_is_loading(v->f) || !v->check_pending)
        return st;
    v->check_pending = false;
    return v->pending_check == cf_module_fields_check(v->f, v->deletes, v->max_iterations)
               ? CF_OK
               : CF_ECORRUPT;
}

/* ------------------------------------------------------------------------------------ */
/* RedisBloom's chunks (keys of type MBbloomCF)                                         */
/* ------------------------------------------------------------------------------------ */
/* Its CF.SCANDUMP gives, at iterator 0, a 38-byte header (little-endian: u64 items,
 * buckets of the first sub-filter, deletes, sub-filters; u16 bucket size, MAXITERATIONS,
 * expansion) with iterator 1; then the sub-filters' bytes as one run, a chunk a
 * sub-filter (16 MiB slices of a bigger one), each with the iterator 1 + the offset where
 * it ends; then [0, nil]. CF.LOADCHUNK takes the header at iterator 1 and a chunk at the
 * iterator that came with it. So a filter of RedisBloom's travels between it and this
 * module either way. */
#define CFM_RB_HEADER 38u
#define CFM_RB_SLICE  ((uint64_t)16 << 20) /* its largest data chunk */

/* What a client that decoded CF.SCANDUMP's bytes as text sends back: U+FFFD, in UTF-8,
 * wherever a byte was not valid UTF-8 (node-redis and ioredis do, unless asked for
 * buffers). Said in the error, which would otherwise not tell why. */
#define CFM_DECODED_HINT                                                                           \
    " (the chunk holds U+FFFD replacement characters: a client decoded CF.SCANDUMP's bytes as "    \
    "text; ask it for buffers, such as node-redis's withTypeMapping({[RESP_TYPES.BLOB_STRING]: "   \
    "Buffer}) or ioredis's callBuffer)"

/* RedisBloom's own limit on a sub-filter's buckets. */
#define CFM_RB_MAX_BUCKETS (UINT64_C(1) << 56)

/* The spec of a filter of RedisBloom's layout (checked fields of a record or a header):
 * its first sub-filter of m buckets of b slots, MAXITERATIONS as v says (RedisBloom's
 * walk takes it as it is), growing by e. */
static cfm_spec cfm_rb_spec(const cfm_value *v, uint64_t m, unsigned b, unsigned e)
{
    return (cfm_spec){.capacity = (long long)(m * b), /* m buckets: RedisBloom's sizing; in
                                                         range, as the callers saw its bytes
                                                         or room */
                      .bucket_size = b,
                      .max_iterations = v->max_iterations,
                      .expansion = e,
                      .layout = CFM_LAYOUT_REDISBLOOM};
}

/* v's filter of RedisBloom's layout with its first sub-filter (a record's). */
static cf_status cfm_rb_new(cfm_value *v, uint64_t m, unsigned b, unsigned e)
{
    cfm_spec s = cfm_rb_spec(v, m, b, e);
    return cfm_filter_new(v, &s, 0);
}

/* The bytes of sub-filter k of a record, m * e^k buckets of b slots (b <= 255); 0 past
 * RedisBloom's limit. */
static uint64_t cfm_rb_table_bytes(uint64_t m, uint64_t e, unsigned k, uint64_t b)
{
    uint64_t buckets = m;
    for (unsigned i = 0; i < k && e > 1; i++) {
        if (buckets > CFM_RB_MAX_BUCKETS / e)
            return 0;
        buckets *= e;
    }
    return buckets > CFM_RB_MAX_BUCKETS ? 0 : buckets * b;
}

static bool cfm_looks_decoded(const unsigned char *p, size_t len)
{
    for (size_t i = 0; i + 2 < len; i++)
        if (p[i] == 0xEF && p[i + 1] == 0xBF && p[i + 2] == 0xBD)
            return true;
    return false;
}

/* Refusals of chunks logged in a second at most: a client that sends garbage in a loop
 * cannot fill the disk with the log. */
#define CFM_REFUSALS_LOGGED_PER_SECOND 10u

static struct {
    time_t second;         /* of the latest logged refusal */
    unsigned logged;       /* in that second */
    unsigned long skipped; /* not logged since the last line */
} cfm_refusal_log;

/* Refuse a chunk with RedisBloom's short `reply` (the text its clients match), and say
 * why in the server's log: `why`, and that the chunk was decoded as text if it looks so. */
static int cfm_chunk_refused(cf_rm_ctx *ctx, cf_rm_key *key, cfm_value *v, const char *reply,
                             const char *why, const unsigned char *p, size_t len)
{
    time_t now = time(NULL);
    if (now != cfm_refusal_log.second) {
        cfm_refusal_log.second = now;
        cfm_refusal_log.logged = 0;
    }
    if (cfm_refusal_log.logged < CFM_REFUSALS_LOGGED_PER_SECOND) {
        cfm_refusal_log.logged++;
        cf_rm.Log(ctx, "notice", "CF.LOADCHUNK: %s (a chunk of %zu bytes): %s%s%s", reply, len, why,
                  cfm_looks_decoded(p, len) ? CFM_DECODED_HINT : "",
                  cfm_refusal_log.skipped ? "; earlier refusals were not logged" : "");
        cfm_refusal_log.skipped = 0;
    } else {
        cfm_refusal_log.skipped++;
    }
    return cfm_fail(ctx, key, v, reply);
}

static void cfm_rb_header(const cfm_value *v, unsigned char h[CFM_RB_HEADER])
{
    cf_config c;
    cf_stats s;
    cf_get_config(v->f, &c);
    cf_get_stats(v->f, &s);
    cfm_put_u64(h, s.items);
    cfm_put_u64(h + 8, cf_table_size(v->f, 0) / c.bucket_size);
    cfm_put_u64(h + 16, v->deletes);
    cfm_put_u64(h + 24, s.sub_filters);
    uint16_t small[3] = {(uint16_t)c.bucket_size, (uint16_t)v->max_iterations,
                         (uint16_t)c.expansion}; /* in range: checked when made */
    for (unsigned i = 0; i < 3; i++) {
        h[32 + 2 * i] = (uint8_t)small[i];
        h[33 + 2 * i] = (uint8_t)(small[i] >> 8);
    }
}

/* The data chunk RedisBloom gives for byte `at` of the sub-filters' run, among the bytes
 * the filter has (cf_table_loaded: all of them, or a loading filter's so far): its length
 * (0 past the end), sub-filter *k and offset *off there. A sub-filter of at most a slice
 * is one chunk, whole, wherever `at` falls in it; a bigger one's chunk runs from `at` to
 * the next slice's end or its own. At the offsets of a walk from 0, they are the slices.
 * *advance is what RedisBloom adds to the iterator: the chunk's length, which for a
 * whole sub-filter is counted from `at`, not from its start. */
static uint64_t cfm_rb_chunk_at(const cf_filter *f, uint64_t at, unsigned *k, uint64_t *off,
                                uint64_t *advance)
{
    uint64_t pos = 0, size, have = cf_table_loaded(f), len;
    for (*k = 0; (size = cf_table_size(f, *k)) != 0 && pos < have; (*k)++, pos += size) {
        if (at >= pos + size)
            continue;
        *off = size <= CFM_RB_SLICE ? 0 : at - pos;
        len = size - *off < CFM_RB_SLICE ? size - *off : CFM_RB_SLICE;
        *advance = len;
        if (len > have - pos - *off) /* a loading filter's last bytes: what came */
            len = *advance = have - pos - *off;
        return len;
    }
    return 0; /* the end (of what has come) */
}

/* The sub-filter and offset that a chunk of `len` bytes ending at byte `end` fills; false
 * if it is not inside one sub-filter. */
static bool cfm_rb_chunk_place(const cf_filter *f, uint64_t end, uint64_t len, unsigned *k,
                               uint64_t *off)
{
    uint64_t pos = 0, size;
    for (*k = 0; len && end >= len && (size = cf_table_size(f, *k)) != 0; (*k)++, pos += size)
        if (end - len >= pos && end <= pos + size) {
            *off = end - len - pos;
            return true;
        }
    return false;
}

/* A header chunk, then a data chunk, refused, in RedisBloom's words. */
#define CFM_ERR_NO_FILTER "Couldn't create filter!"
#define CFM_ERR_NO_CHUNK  "Couldn't load chunk!"

/* A filter of RedisBloom's layout and type under `key` from its 38-byte header: loading
 * (cf_table_load_begin), each sub-filter's memory taken as its first chunk comes, so a
 * forged header costs nothing. NULL, or the error's text and *why, the reason to log.
 * Every refusal is RedisBloom's "Couldn't create filter!" (a wrong length aside), memory
 * too, as there: clients tell a header refused by that text. */
static const char *cfm_rb_from_header(cf_rm_ctx *ctx, const unsigned char *h, size_t len,
                                      cfm_value **out, const char **why)
{
    *why = "its fields are out of range";
    if (len != CFM_RB_HEADER) {
        /* RedisBloom's reply where its layout is the server's; this library's otherwise,
         * as for any header it refuses */
        *why = "a RedisBloom header chunk (at iterator 1) is 38 bytes";
        return cfm_defaults.layout == CFM_LAYOUT_REDISBLOOM ? "Invalid header" : CFM_ERR_NO_FILTER;
    }
    uint64_t m = cfm_get_u64(h + 8), deletes = cfm_get_u64(h + 16), n = cfm_get_u64(h + 24);
    unsigned b = (unsigned)(h[32] | h[33] << 8), iterations = (unsigned)(h[34] | h[35] << 8);
    unsigned e = (unsigned)(h[36] | h[37] << 8);
    uint64_t total = 0;
    bool ok = n >= 1 && n <= CF_MAX_SUB_FILTERS && m >= 2 && (m & (m - 1)) == 0 && b >= 1 &&
              b <= CF_MAX_BUCKET_SIZE && iterations >= 1 && e <= CF_MAX_EXPANSION &&
              (e & (e - 1)) == 0 && (e != 0 || n == 1) && deletes <= CFM_MAX_DELETES;
    for (unsigned k = 0; ok && k < n; k++) {
        uint64_t size = cfm_rb_table_bytes(m, e, k, b);
        ok = size != 0 && total <= UINT64_MAX - size;
        total += size;
    }
    if (!ok)
        return CFM_ERR_NO_FILTER;
    /* More sub-filters than this server lets a filter have (RedisBloom's own cannot make
     * them, and each costs every lookup a probe): refused, unless the primary or the AOF
     * sends it (a setting lowered since). */
    if (n > (uint64_t)cfm_defaults.max_filters && !cfm_replaying(ctx)) {
        *why = "it has more sub-filters than cf-max-expansions allows";
        return CFM_ERR_NO_FILTER;
    }
    if (total > SIZE_MAX || !cfm_room_for(ctx, (size_t)total)) {
        *why = "the filter it describes does not fit in this server's memory";
        return CFM_ERR_NO_FILTER;
    }
    cfm_value *v = cfm_value_alloc(ctx, iterations);
    cf_allocator alloc;
    cfm_spec spec = v ? cfm_rb_spec(v, m, b, e) : (cfm_spec){0};
    cf_config c = v ? cfm_config_of(v, &spec, 0, &alloc) : (cf_config){0};
    cf_status st = v ? cf_table_load_begin(&c, (unsigned)n, &v->f) : CF_ENOMEM;
    if (st != CF_OK) {
        cfm_value_free(v);
        *why = cf_strerror(st);
        return CFM_ERR_NO_FILTER;
    }
    v->deletes = deletes;
    *out = v;
    return NULL;
}

/* CF.SCANDUMP's reply: the next iterator and the chunk's bytes, nil for none (the end). */
static void cfm_reply_chunk(cf_rm_ctx *ctx, uint64_t next, const void *bytes, size_t len)
{
    cf_rm.ReplyWithArray(ctx, 2);
    cf_rm.ReplyWithLongLong(ctx, (long long)next);
    if (len)
        cf_rm.ReplyWithStringBuffer(ctx, (const char *)bytes, len);
    else
        cf_rm.ReplyWithNull(ctx);
}

/* CF.SCANDUMP of a key of RedisBloom's type: its chunks, as RedisBloom gives them at any
 * iterator. An empty filter gives [0, nil] at once, as there (its parameters do not
 * travel: a copy made from its chunks is RedisBloom's default filter on the first add). */
static int cfm_rb_scandump(cf_rm_ctx *ctx, cf_rm_key *key, cfm_value *v, uint64_t it)
{
    unsigned char header[CFM_RB_HEADER];
    unsigned k = 0;
    uint64_t off = 0, len = 0, advance = 0;
    cf_stats s;
    cf_get_stats(v->f, &s);
    if (s.items > 0 && it == 0) {
        cfm_rb_header(v, header);
        cfm_reply_chunk(ctx, 1, header, sizeof header);
    } else if (s.items == 0 || (len = cfm_rb_chunk_at(v->f, it - 1, &k, &off, &advance)) == 0) {
        cfm_reply_chunk(ctx, 0, NULL, 0);
    } else {
        char *buf = cf_rm.TryAlloc((size_t)len);
        if (!buf)
            return cfm_fail(ctx, key, v, "ERR Insufficient memory");
        cf_table_read(v->f, k, off, buf, (size_t)len);
        cfm_reply_chunk(ctx, it + advance, buf, (size_t)len); /* it - 1 < the bytes */
        cf_rm.Free(buf);
    }
    cfm_close(key, v);
    return CF_RM_OK;
}

static int cfm_cmd_scandump(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 3)
        return cf_rm.WrongArity(ctx);
    long long it;
    if (!cfm_ll(argv[2], &it) || it < 0)
        return cf_rm.ReplyWithError(ctx, "Invalid position");
    cf_rm_key *key;
    cfm_value *v = cfm_open_existing(ctx, argv[1], &key);
    if (!v)
        return CF_RM_OK;
    if (cfm_is_rb(key))
        return cfm_rb_scandump(ctx, key, v, (uint64_t)it);
    size_t cap, len;
    unsigned char *buf = cfm_chunk_buffer(v, &cap, false);
    if (!buf)
        return cfm_fail(ctx, key, v, "ERR Insufficient memory");
    uint64_t cursor = (uint64_t)it;
    if (cfm_dump(v, &cursor, buf, cap, &len) != CF_OK) {
        cf_rm.Free(buf);
        return cfm_fail(ctx, key, v, "Invalid position");
    }
    cfm_reply_chunk(ctx, cursor, buf, len);
    cf_rm.Free(buf);
    cfm_close(key, v);
    return CF_RM_OK;
}

static int cfm_cmd_loadchunk(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    if (argc != 4)
        return cf_rm.WrongArity(ctx);
    long long it;
    if (!cfm_ll(argv[2], &it) || it <= 0)
        return cf_rm.ReplyWithError(ctx, "Invalid position");
    size_t len;
    const unsigned char *data = (const unsigned char *)cf_rm.StringPtrLen(argv[3], &len);
    cf_rm_key *key;
    cfm_value *v;
    cf_status st;
    /* Whether the key was a filter still loading (a new one is): a complete filter of
     * RedisBloom's layout takes chunks too, and keeps whatever expiry it has. */
    bool loading = true;
    switch (cfm_open(ctx, argv[1], CF_RM_READ | CF_RM_WRITE, &key, &v)) {
    case CFM_OTHER:
        return cfm_fail(ctx, key, v, CFM_ERR_WRONGTYPE);
    case CFM_EMPTY: /* the header chunk: the key is made here */
        /* RedisBloom's header; this module's is never at 1 */
        if (it == 1) {
            const char *why, *err = cfm_rb_from_header(ctx, data, len, &v, &why);
            if (err)
                return cfm_chunk_refused(ctx, key, NULL, err, why, data, len);
            cf_rm.ModuleTypeSetValue(key, cfm_rb_type, v);
            break;
        }
        st = len < CFM_PREFIX_BYTES ? CF_ECORRUPT
                                    : cfm_load_header(ctx, (uint64_t)it, data, len, &v);
        if (st != CF_OK)
            return cfm_chunk_refused(ctx, key, NULL, CFM_ERR_NO_FILTER,
                                     len < CFM_PREFIX_BYTES ? "too short for a header chunk"
                                                            : cf_strerror(st),
                                     data, len);
        cf_rm.ModuleTypeSetValue(key, cfm_type, v);
        break;
    case CFM_OURS:
        loading = cf_is_loading(v->f);
        if (cfm_is_rb(key)) { /* RedisBloom's data chunk: the bytes before `it` - 1 */
            unsigned k;
            uint64_t off;
            if (it == 1)
                return cfm_fail(ctx, key, v, "ERR item exists");
            if (!cfm_rb_chunk_place(v->f, (uint64_t)it - 1, len, &k, &off))
                return cfm_chunk_refused(ctx, key, v, CFM_ERR_NO_CHUNK,
                                         "its bytes, which end where its iterator says, are "
                                         "not all inside one sub-filter",
                                         data, len);
            /* A loading filter's sub-filter takes its memory with its first chunk. */
            if (cf_is_loading(v->f) && off == 0 && !cfm_room_for(ctx, cf_table_size(v->f, k)))
                return cfm_fail(ctx, key, v, "ERR Insufficient memory");
            st = cf_table_write(v->f, k, off, data, len);
            if (st == CF_ENOMEM)
                return cfm_fail(ctx, key, v, "ERR Insufficient memory");
            if (st != CF_OK) /* out of order: the filter is as it was, it waits for the next */
                return cfm_chunk_refused(ctx, key, v, CFM_ERR_NO_CHUNK, cf_strerror(st), data, len);
            break;
        }
        if (!cf_is_loading(v->f))
            return cfm_fail(ctx, key, v, "ERR item exists");
        st = cfm_load_data(v, (uint64_t)it, data, len);
        if (st == CF_ENOMEM) /* the filter is as it was: the chunk can come again */
            return cfm_fail(ctx, key, v, "ERR Insufficient memory");
        if (st != CF_OK) {
            /* Never leave a filter that cannot be completed: the load starts over. */
            v->ctx = NULL;
            cf_rm.DeleteKey(key);
            cf_rm.Replicate(ctx, "DEL", "s", argv[1]);
            cf_rm.NotifyKeyspaceEvent(ctx, CF_RM_NOTIFY_GENERIC, "del", argv[1]);
            cf_rm.CloseKey(key);
            return cf_rm.ReplyWithError(ctx,
                                        CFM_ERR_NO_CHUNK " (the incomplete filter was removed: "
                                                         "load it again from its first chunk)");
        }
        break;
    }
    /* An incomplete filter expires unless its next chunk comes in time; the last chunk
     * makes the filter persistent. A replica and an AOF replay run the same command and
     * set the same rule (the primary's expiry reaches a replica as a DEL). */
    if (loading)
        cf_rm.SetExpire(key, cf_is_loading(v->f) ? cfm_load_timeout * 1000 : CF_RM_NO_EXPIRE);
    cfm_wrote(ctx, argv[1], v, "cf.loadchunk", true);
    cfm_close(key, v);
    return cf_rm.ReplyWithSimpleString(ctx, "OK");
}

/* RDB: the module's fields, then (cursor, chunk) pairs, then a 0, then the check of the
 * fields. Cursors after a chunk are never 0, so the 0 ends the list. */
static void cfm_rdb_save(cf_rm_io *io, void *value)
{
    const cfm_value *v = value;
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
    cf_rm.SaveUnsigned(io, cf_module_fields_check(v->f, v->deletes, v->max_iterations));
    cf_rm.Free(buf);
}

/* The end of an RDB load: the value, or NULL (nothing held) if `why` says it is refused
 * or the stream failed. */
static void *cfm_rdb_loaded(cf_rm_io *io, cfm_value *v, const char *why, uint64_t deletes)
{
    if (why || cf_rm.IsIOError(io)) {
        if (why)
            cf_rm.LogIOError(io, "warning", "refusing a filter in the RDB: %s", why);
        cfm_value_free(v);
        return NULL;
    }
    v->deletes = deletes;
    v->ctx = NULL;
    cfm_account(v);
    return v;
}

static void *cfm_rdb_load(cf_rm_io *io, int encver)
{
    if (encver != CFM_ENCVER) {
        cf_rm.LogIOError(io, "warning", "filter saved with RDB encoding %d; this module reads %d",
                         encver, CFM_ENCVER);
        return NULL;
    }
    uint64_t deletes = cf_rm.LoadUnsigned(io);
    uint64_t iterations = cf_rm.LoadUnsigned(io);
    uint64_t loading = cf_rm.LoadUnsigned(io);
    if (cf_rm.IsIOError(io))
        return NULL;
    const char *why = NULL;
    cfm_value *v = NULL;
    if (iterations < 1 || iterations > CF_MAX_MAX_KICKS || loading > 1 || deletes > CFM_MAX_DELETES)
        why = "bad module fields";
    else if (!(v = cfm_value_alloc(cf_rm.GetContextFromIO(io), (unsigned)iterations)))
        why = "out of memory";
    while (!why) {
        uint64_t cursor = cf_rm.LoadUnsigned(io);
        if (cf_rm.IsIOError(io) || cursor == 0)
            break;
        size_t len;
        char *chunk = cf_rm.LoadStringBuffer(io, &len);
        if (cf_rm.IsIOError(io))
            break;
        cf_status st = cfm_take_chunk(v, cursor, chunk, len);
        cf_rm.Free(chunk);
        if (st != CF_OK)
            why = cf_strerror(st);
    }
    if (!why && !cf_rm.IsIOError(io) && (!v->f || cf_is_loading(v->f) != (loading == 1)))
        why = "incomplete filter";
    uint64_t check = why || cf_rm.IsIOError(io) ? 0 : cf_rm.LoadUnsigned(io);
    if (!why && !cf_rm.IsIOError(io) && check != cf_module_fields_check(v->f, deletes, iterations))
        why = "the module's fields fail their check";
    return cfm_rdb_loaded(io, v, why, deletes);
}

/* ------------------------------------------------------------------------------------ */
/* RedisBloom's RDB values (type MBbloomCF)                                             */
/* ------------------------------------------------------------------------------------ */
/* Its record, every number an RDB unsigned: the sub-filters n, the first's buckets m, the
 * items, then (encoding 4) the deletes since the last compaction, the bucket size b,
 * MAXITERATIONS and the expansion e; then per sub-filter k (encoding 4: its buckets,
 * m * e^k) its m_k * b bytes as one string. Before encoding 4 every sub-filter has m
 * buckets and b, MAXITERATIONS and the expansion are the server's settings, as
 * RedisBloom takes them. */

/* Whether the server was told once that its RedisBloom filters' way back needs
 * cf-layout redisbloom: one line a process, however many such keys load. */
static bool cfm_way_back_logged;

/* What a user moving from RedisBloom must know about a filter of RedisBloom's type that
 * loaded (RDB, RESTORE, a full sync), in the log:
 * - under cf-layout native, new filters are of this module's type, which RedisBloom
 *   cannot load: once, how to keep the way back open;
 * - a record older than encoding 4 was made by RedisBloom 2.0 or older, whose hash
 *   RedisBloom 2.2 replaced: most of its items are not found (there either), each key. */
static void cfm_rb_loaded_notes(cf_rm_io *io, int encver)
{
    cf_rm_ctx *ctx = cf_rm.GetContextFromIO(io);
    if (cfm_defaults.layout == CFM_LAYOUT_NATIVE && !cfm_way_back_logged) {
        cfm_way_back_logged = true;
        cf_rm.Log(ctx, "warning",
                  "loaded a RedisBloom cuckoo filter (type MBbloomCF) while cf-layout is native: "
                  "filters created from now on are of this module's type, which RedisBloom "
                  "cannot load (it refuses the whole dump.rdb). To keep the way back to "
                  "RedisBloom open, set cuckoo.cf-layout redisbloom");
    }
    if (encver >= CFM_RB_ENCVER)
        return;
    size_t len = 0;
    const cf_rm_string *key = cf_rm.GetKeyNameFromIO ? cf_rm.GetKeyNameFromIO(io) : NULL;
    const char *name = key ? cf_rm.StringPtrLen(key, &len) : "";
    int shown = len > CFM_LOGGED_KEY_BYTES ? (int)CFM_LOGGED_KEY_BYTES : (int)len;
    cf_rm.Log(ctx, "warning",
              "RedisBloom cuckoo filter '%.*s'%s of RDB encoding %d, made by RedisBloom 2.0 or "
              "older: RedisBloom 2.2 changed the hash, and most of its items are not found, "
              "here as there; rebuild it from its source",
              shown, name, len > CFM_LOGGED_KEY_BYTES ? "..." : "", encver);
}

static void *cfm_rb_rdb_load(cf_rm_io *io, int encver)
{
    if (encver > CFM_RB_ENCVER) {
        cf_rm.LogIOError(io, "warning",
                         "RedisBloom cuckoo filter of RDB encoding %d; this module reads up to %d",
                         encver, CFM_RB_ENCVER);
        return NULL;
    }
    uint64_t n = cf_rm.LoadUnsigned(io), m = cf_rm.LoadUnsigned(io);
    (void)cf_rm.LoadUnsigned(io); /* the items: counted again from the tables */
    uint64_t deletes = 0, b = (uint64_t)cfm_defaults.bucket_size;
    uint64_t iterations = (uint64_t)cfm_defaults.max_iterations;
    uint64_t e = 1; /* old records: every sub-filter of one size, or the setting, rounded */
    while (n == 1 && e < (uint64_t)cfm_defaults.expansion)
        e *= 2;
    if (n == 1 && cfm_defaults.expansion == 0)
        e = 0;
    if (encver >= CFM_RB_ENCVER) {
        deletes = cf_rm.LoadUnsigned(io);
        b = cf_rm.LoadUnsigned(io);
        iterations = cf_rm.LoadUnsigned(io);
        e = cf_rm.LoadUnsigned(io);
    }
    if (cf_rm.IsIOError(io))
        return NULL;
    const char *why = NULL;
    cfm_value *v = NULL;
    if (n < 1 || n > CF_MAX_SUB_FILTERS || m < 2 || (m & (m - 1)) || b < 1 ||
        b > CF_MAX_BUCKET_SIZE || iterations < 1 || iterations > CF_MAX_MAX_KICKS ||
        e > CF_MAX_EXPANSION || (e & (e - 1)) || (e == 0 && n > 1) || deletes > CFM_MAX_DELETES)
        why = "bad RedisBloom filter fields";
    else if (!(v = cfm_value_alloc(cf_rm.GetContextFromIO(io), (unsigned)iterations)))
        why = "out of memory";
    for (unsigned k = 0; !why && k < n; k++) {
        uint64_t want = cfm_rb_table_bytes(m, e, k, b);
        if (encver >= CFM_RB_ENCVER && cf_rm.LoadUnsigned(io) != want / b)
            why = "a sub-filter of another size than its place says";
        size_t len = 0;
        char *data = why || cf_rm.IsIOError(io) ? NULL : cf_rm.LoadStringBuffer(io, &len);
        if (!data)
            break;
        /* The table is made once its bytes are in hand: a forged record costs no more
         * memory than it carries. */
        cf_status st = want == 0 || len != want ? CF_ECORRUPT : CF_OK;
        if (st == CF_OK && k == 0) {
            st = cfm_rb_new(v, m, (unsigned)b, (unsigned)e);
        } else if (st == CF_OK) {
            st = cf_append_sub_filter(v->f);
        }
        if (st == CF_OK)
            st = cf_table_write(v->f, k, 0, data, len);
        cf_rm.Free(data);
        if (st != CF_OK)
            why = st == CF_ECORRUPT ? "a sub-filter of the wrong length" : cf_strerror(st);
    }
    void *loaded = cfm_rdb_loaded(io, v, why, deletes);
    if (loaded)
        cfm_rb_loaded_notes(io, encver);
    return loaded;
}

static void cfm_rb_rdb_save(cf_rm_io *io, void *value)
{
    const cfm_value *v = value;
    cf_config c;
    cf_stats s;
    cf_get_config(v->f, &c);
    cf_get_stats(v->f, &s);
    uint64_t b = c.bucket_size;
    cf_rm.SaveUnsigned(io, s.sub_filters);
    cf_rm.SaveUnsigned(io, cf_table_size(v->f, 0) / b);
    cf_rm.SaveUnsigned(io, s.items);
    cf_rm.SaveUnsigned(io, v->deletes);
    cf_rm.SaveUnsigned(io, b);
    cf_rm.SaveUnsigned(io, v->max_iterations);
    cf_rm.SaveUnsigned(io, c.expansion);
    for (unsigned k = 0; k < s.sub_filters; k++) {
        uint64_t size = cf_table_size(v->f, k);
        char *buf = cf_rm.Alloc((size_t)size); /* like the server's own: no memory, no save */
        cf_table_read(v->f, k, 0, buf, (size_t)size);
        cf_rm.SaveUnsigned(io, size / b);
        cf_rm.SaveStringBuffer(io, buf, (size_t)size);
        cf_rm.Free(buf);
    }
}

/* The AOF rebuilds a filter of RedisBloom's type with RedisBloom's chunks (an empty one
 * too), which RedisBloom's CF.LOADCHUNK takes as well. */
static void cfm_rb_aof_rewrite(cf_rm_io *aof, cf_rm_string *key, void *value)
{
    const cfm_value *v = value;
    unsigned char header[CFM_RB_HEADER];
    cfm_rb_header(v, header);
    cf_rm.EmitAOF(aof, "CF.LOADCHUNK", "slb", key, 1LL, (const char *)header, sizeof header);
    unsigned k;
    uint64_t at = 0, off, len, advance;
    while ((len = cfm_rb_chunk_at(v->f, at, &k, &off, &advance)) != 0) {
        char *buf = cf_rm.Alloc((size_t)len); /* like the server's own: no memory, no rewrite */
        cf_table_read(v->f, k, off, buf, (size_t)len);
        at += len;
        cf_rm.EmitAOF(aof, "CF.LOADCHUNK", "slb", key, (long long)(at + 1), buf, (size_t)len);
        cf_rm.Free(buf);
    }
}

/* RedisBloom's type digests what it saves and CF.SCANDUMP gives (its header and tables),
 * not this library's image of the filter: the image carries fields RedisBloom's formats
 * do not (the capacity it was reserved with), which a copy loaded from them makes anew,
 * so that a replica's DEBUG DIGEST would differ from its primary's over equal filters. */
static void cfm_rb_digest(cf_rm_digest *md, void *value)
{
    const cfm_value *v = value;
    unsigned char header[CFM_RB_HEADER];
    cfm_rb_header(v, header);
    cf_rm.DigestAddStringBuffer(md, (const char *)header, sizeof header);
    unsigned k;
    uint64_t at = 0, off, len, advance;
    while ((len = cfm_rb_chunk_at(v->f, at, &k, &off, &advance)) != 0) {
        char *buf = cf_rm.Alloc((size_t)len);
        cf_table_read(v->f, k, off, buf, (size_t)len);
        cf_rm.DigestAddStringBuffer(md, buf, (size_t)len);
        cf_rm.Free(buf);
        at += len;
    }
    cf_rm.DigestEndSequence(md);
}

/* The AOF rebuilds a filter with the very chunks CF.SCANDUMP would give. */
static void cfm_aof_rewrite(cf_rm_io *aof, cf_rm_string *key, void *value)
{
    const cfm_value *v = value;
    size_t cap, len;
    unsigned char *buf = cfm_chunk_buffer(v, &cap, true);
    uint64_t cursor = 0;
    while (cfm_dump(v, &cursor, buf, cap, &len) == CF_OK && len)
        cf_rm.EmitAOF(aof, "CF.LOADCHUNK", "slb", key, (long long)cursor, (const char *)buf, len);
    cf_rm.Free(buf);
}

static void cfm_digest(cf_rm_digest *md, void *value)
{
    const cfm_value *v = value;
    size_t cap, len;
    unsigned char *buf = cfm_chunk_buffer(v, &cap, true);
    uint64_t cursor = 0;
    while (cfm_dump(v, &cursor, buf, cap, &len) == CF_OK && len)
        cf_rm.DigestAddStringBuffer(md, (const char *)buf, len);
    cf_rm.Free(buf);
    cf_rm.DigestEndSequence(md);
}

static void *cfm_copy(cf_rm_string *from, cf_rm_string *to, const void *value)
{
    (void)from;
    (void)to;
    const cfm_value *v = value;
    size_t cap, len;
    unsigned char *buf = cfm_chunk_buffer(v, &cap, false);
    cfm_value *c = NULL;
    uint64_t cursor = 0;
    cf_status st = buf ? CF_OK : CF_ENOMEM;
    while (st == CF_OK && (st = cfm_dump(v, &cursor, buf, cap, &len)) == CF_OK && len)
        st = c ? cfm_load_data(c, cursor, buf, len) : cfm_load_header(NULL, cursor, buf, len, &c);
    cf_rm.Free(buf);
    if (st != CF_OK) {
        cfm_value_free(c);
        return NULL;
    }
    cfm_account(c);
    return c;
}

static size_t cfm_mem_usage(const void *value)
{
    const cfm_value *v = value;
    return v->bytes;
}

static void cfm_free_value(void *value)
{
    cfm_value_free(value);
}

static size_t cfm_free_effort(cf_rm_string *key, const void *value)
{
    (void)key;
    const cfm_value *v = value;
    return 1 + v->bytes / CFM_FREE_EFFORT_UNIT;
}

/* INFO cuckoo (and INFO, INFO everything): the totals over every filter of the server. */
static void cfm_info(cf_rm_info_ctx *ctx, int for_crash_report)
{
    (void)for_crash_report;
    if (cf_rm.InfoAddSection(ctx, "") != CF_RM_OK) /* "" names the section "cuckoo" */
        return;
    const struct {
        const char *name; /* the server prefixes "cuckoo_" */
        const atomic_ullong *counter;
    } fields[] = {
        {"filters", &cfm_total.filters},
        {"sub_filters", &cfm_total.sub_filters},
        {"items", &cfm_total.items},
        {"bytes", &cfm_total.bytes},
        {"adds_refused_full", &cfm_total.refused_full},
        {"adds_refused_hot_item", &cfm_total.refused_hot},
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
 * accepted and ignored) and a configuration, cuckoo.<name>, for CONFIG GET and SET.
 * RedisBloom's own settings also answer to its unprefixed names where the server has
 * them (Redis 8: CONFIG SET cf-bucket-size 4). */
typedef struct cfm_setting {
    const char *name, *alias;
    long long min, max;
    long long *target;  /* NULL: a Bloom filter setting, ignored */
    const char **names; /* an enumeration's value names (values 0, 1, ...), or NULL */
    bool redisbloom;    /* one of RedisBloom's configurations */
} cfm_setting;

static const cfm_setting cfm_settings[] = {
    {"cf-max-expansions", "CF_MAX_EXPANSIONS", 1, CF_MAX_SUB_FILTERS, &cfm_defaults.max_filters,
     NULL, true},
    {"cf-initial-size", NULL, 4, CFM_MAX_CAPACITY, &cfm_defaults.capacity, NULL, true},
    {"cf-bucket-size", NULL, 1, CF_MAX_BUCKET_SIZE, &cfm_defaults.bucket_size, NULL, true},
    {"cf-max-iterations", NULL, 1, CF_MAX_MAX_KICKS, &cfm_defaults.max_iterations, NULL, true},
    {"cf-expansion-factor", NULL, 0, CF_MAX_EXPANSION, &cfm_defaults.expansion, NULL, true},
    {"cf-fingerprint-bits", NULL, CF_MIN_FINGERPRINT_BITS, CF_MAX_FINGERPRINT_BITS,
     &cfm_defaults.fpbits, NULL, false},
    {"cf-semi-sort", NULL, 0, 1, &cfm_defaults.semi_sort, NULL, false},
    {"cf-load-timeout", NULL, 1, CFM_MAX_LOAD_TIMEOUT, &cfm_load_timeout, NULL, false},
    {"cf-layout", NULL, 0, CFM_LAYOUTS - 1, &cfm_defaults.layout, cfm_layout_names, false},
    {"bf-initial-size", "INITIAL_SIZE", 0, 0, NULL, NULL, false},
    {"bf-error-rate", "ERROR_RATE", 0, 0, NULL, NULL, false},
};

/* A created filter needs capacity >= 2 * bucket size: NULL if `value` for `s` keeps that
 * true, else why not. */
static const char *cfm_setting_conflict(const cfm_setting *s, long long value)
{
    if (s->target == &cfm_defaults.capacity && value < 2 * cfm_defaults.bucket_size)
        return "cf-initial-size must be at least 2 * cf-bucket-size";
    if (s->target == &cfm_defaults.bucket_size && 2 * value > cfm_defaults.capacity)
        return "cf-bucket-size must be at most cf-initial-size / 2";
    if (s->target == &cfm_defaults.semi_sort && value &&
        cfm_defaults.bucket_size != CFM_SEMI_BUCKET)
        return "cf-semi-sort 1 needs cf-bucket-size 4";
    if (s->target == &cfm_defaults.bucket_size && value != CFM_SEMI_BUCKET &&
        cfm_defaults.semi_sort)
        return "cf-semi-sort 1 needs cf-bucket-size 4";
    return NULL;
}

static long long cfm_config_get(const char *name, void *privdata)
{
    (void)name;
    return *((const cfm_setting *)privdata)->target;
}

static int cfm_config_set(const char *name, long long value, void *privdata, cf_rm_string **err)
{
    (void)name;
    const cfm_setting *s = privdata;
    const char *why = cfm_setting_conflict(s, value);
    if (why) {
        *err = cf_rm.CreateString(NULL, why, strlen(why));
        return CF_RM_ERR;
    }
    *s->target = value;
    return CF_RM_OK;
}

static int cfm_config_get_enum(const char *name, void *privdata)
{
    return (int)cfm_config_get(name, privdata);
}

static int cfm_config_set_enum(const char *name, int value, void *privdata, cf_rm_string **err)
{
    return cfm_config_set(name, value, privdata, err);
}

/* The load argument `arg` for s, into *n. */
static bool cfm_setting_value(const cfm_setting *s, const cf_rm_string *arg, long long *n)
{
    if (!s->names)
        return cfm_ll(arg, n) && *n >= s->min && *n <= s->max;
    for (long long i = s->min; i <= s->max; i++)
        if (cfm_is(arg, s->names[i])) {
            *n = i;
            return true;
        }
    return false;
}

/* Register s as a configuration. One of RedisBloom's goes by its unprefixed name with
 * ours as an alias where the server can (*unprefixed, cleared on the first refusal: older
 * servers refuse the flag and log it, once). */
static int cfm_register_setting(cf_rm_ctx *ctx, const cfm_setting *s, bool *unprefixed)
{
    void *priv = (void *)(uintptr_t)s; /* only read back */
    if (s->names)
        return cf_rm.RegisterEnumConfig(ctx, s->name, (int)*s->target, CF_RM_CONFIG_DEFAULT,
                                        s->names, cfm_enum_values, (int)(s->max + 1),
                                        cfm_config_get_enum, cfm_config_set_enum, NULL, priv);
    if (s->redisbloom && *unprefixed) {
        char both[64];
        snprintf(both, sizeof both, "%s|" CFM_MODULE_NAME ".%s", s->name, s->name);
        if (cf_rm.RegisterNumericConfig(ctx, both, *s->target, CF_RM_CONFIG_UNPREFIXED, s->min,
                                        s->max, cfm_config_get, cfm_config_set, NULL,
                                        priv) == CF_RM_OK)
            return CF_RM_OK;
        *unprefixed = false;
        cf_rm.Log(ctx, "notice",
                  "this server has no unprefixed module configurations: RedisBloom's %s "
                  "is " CFM_MODULE_NAME ".%s here (and so for its other settings)",
                  s->name, s->name);
    }
    return cf_rm.RegisterNumericConfig(ctx, s->name, *s->target, CF_RM_CONFIG_DEFAULT, s->min,
                                       s->max, cfm_config_get, cfm_config_set, NULL, priv);
}

static int cfm_configure(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    const size_t count = sizeof cfm_settings / sizeof cfm_settings[0];
    if (argc % 2) {
        cf_rm.Log(ctx, "warning", "module arguments come in pairs: NAME VALUE ...");
        return CF_RM_ERR;
    }
    for (int i = 0; i < argc; i += 2) {
        size_t len;
        const char *name = cf_rm.StringPtrLen(argv[i], &len);
        const cfm_setting *s = NULL;
        for (size_t k = 0; k < count && !s; k++)
            if (cfm_is(argv[i], cfm_settings[k].name) ||
                (cfm_settings[k].alias && cfm_is(argv[i], cfm_settings[k].alias)))
                s = &cfm_settings[k];
        if (!s) {
            cf_rm.Log(ctx, "warning", "Unrecognized option '%.*s'", (int)len, name);
            return CF_RM_ERR;
        }
        if (!s->target) {
            cf_rm.Log(ctx, "notice", "'%s' is a Bloom filter setting; ignored", s->name);
            continue;
        }
        long long n;
        if (!cfm_setting_value(s, argv[i + 1], &n)) {
            if (s->names)
                cf_rm.Log(ctx, "warning", "%s must be %s or %s", s->name, s->names[0], s->names[1]);
            else
                cf_rm.Log(ctx, "warning", "%s must be an integer in [%lld, %lld]", s->name, s->min,
                          s->max);
            return CF_RM_ERR;
        }
        *s->target = n;
    }
    if (cfm_defaults.capacity < 2 * cfm_defaults.bucket_size) {
        cf_rm.Log(ctx, "warning", "cf-initial-size must be at least 2 * cf-bucket-size");
        return CF_RM_ERR;
    }
    if (cfm_defaults.semi_sort && cfm_defaults.bucket_size != CFM_SEMI_BUCKET) {
        cf_rm.Log(ctx, "warning", "cf-semi-sort 1 needs cf-bucket-size 4");
        return CF_RM_ERR;
    }
    /* Then the configurations, starting from those values; LoadConfigs applies the
     * server's config file (cuckoo.cf-bucket-size 4, ...) on top. */
    bool unprefixed = true;
    for (size_t k = 0; k < count; k++)
        if (cfm_settings[k].target &&
            cfm_register_setting(ctx, &cfm_settings[k], &unprefixed) != CF_RM_OK)
            return CF_RM_ERR;
    return cf_rm.LoadConfigs(ctx);
}

/* ------------------------------------------------------------------------------------ */
/* The commands                                                                         */
/* ------------------------------------------------------------------------------------ */
/* One entry per command: its handler, flags and arity, and what COMMAND INFO and COMMAND
 * DOCS tell clients (docs/COMMANDS.md is the full reference). Every command takes one
 * key, argv[1], but CF.MERGE, whose keys run to the last argument. */

/* The key spec of a command whose key is argv[1] alone, with these CF_RM_KEY_* flags. */
#define CFM_KEY_SPEC(key_flags)                                                                    \
    ((cf_rm_key_spec[]){{.flags = (key_flags),                                                     \
                         .begin_search_type = CF_RM_KSPEC_BS_INDEX,                                \
                         .bs.index.pos = 1,                                                        \
                         .find_keys_type = CF_RM_KSPEC_FK_RANGE,                                   \
                         .fk.range = {.lastkey = 0, .keystep = 1, .limit = 0}},                    \
                        {0}})

/* CF.MERGE's keys: the destination at argv[1], written; the sources from argv[2] to the
 * last, read. */
#define CFM_MERGE_KEY_SPECS                                                                        \
    ((cf_rm_key_spec[]){{.flags = CF_RM_KEY_RW | CF_RM_KEY_INSERT,                                 \
                         .begin_search_type = CF_RM_KSPEC_BS_INDEX,                                \
                         .bs.index.pos = 1,                                                        \
                         .find_keys_type = CF_RM_KSPEC_FK_RANGE,                                   \
                         .fk.range = {.lastkey = 0, .keystep = 1, .limit = 0}},                    \
                        {.flags = CF_RM_KEY_RO | CF_RM_KEY_ACCESS,                                 \
                         .begin_search_type = CF_RM_KSPEC_BS_INDEX,                                \
                         .bs.index.pos = 2,                                                        \
                         .find_keys_type = CF_RM_KSPEC_FK_RANGE,                                   \
                         .fk.range = {.lastkey = -1, .keystep = 1, .limit = 0}},                   \
                        {0}})

/* Arguments (a list ends with an entry of zeros). */
#define CFM_ARG_KEY                                                                                \
    {                                                                                              \
        .name = "key", .type = CF_RM_ARG_KEY, .key_spec_index = 0                                  \
    }
#define CFM_ARG_ITEM                                                                               \
    {                                                                                              \
        .name = "item", .type = CF_RM_ARG_STRING, .key_spec_index = -1                             \
    }
#define CFM_ARG_ITEMS                                                                              \
    {                                                                                              \
        .name = "item", .type = CF_RM_ARG_STRING, .key_spec_index = -1,                            \
        .flags = CF_RM_ARG_MULTIPLE                                                                \
    }
#define CFM_ARG_OPTION(arg_name, keyword)                                                          \
    {                                                                                              \
        .name = (arg_name), .type = CF_RM_ARG_INTEGER, .key_spec_index = -1, .token = (keyword),   \
        .flags = CF_RM_ARG_OPTIONAL                                                                \
    }
#define CFM_ARG_TOKEN(word)                                                                        \
    {                                                                                              \
        .name = (word), .type = CF_RM_ARG_PURE_TOKEN, .key_spec_index = -1, .token = (word)        \
    }
#define CFM_ARGS(...) ((cf_rm_command_arg[]){__VA_ARGS__, {0}})

#define CFM_INSERT_ARGS                                                                            \
    CFM_ARGS(                                                                                      \
        CFM_ARG_KEY, CFM_ARG_OPTION("capacity", "CAPACITY"), CFM_ARG_OPTION("window", "WINDOW"),   \
        CFM_ARG_OPTION("generations", "GENERATIONS"),                                              \
        {.name = "nocreate",                                                                       \
         .type = CF_RM_ARG_PURE_TOKEN,                                                             \
         .key_spec_index = -1,                                                                     \
         .token = "NOCREATE",                                                                      \
         .flags = CF_RM_ARG_OPTIONAL},                                                             \
        {.name = "items", .type = CF_RM_ARG_PURE_TOKEN, .key_spec_index = -1, .token = "ITEMS"},   \
        CFM_ARG_ITEMS)

/* Complexities: k is the number of sub-filters, b the bucket size, n the number of items
 * given, m the filter's size in bytes. */
#define CFM_O_ADD                                                                                  \
    "O(k + MAXITERATIONS) per item, O(m) when the filter grows (a new sub-filter is allocated)"

/* CF.INFO and CF.DEBUG: their figures change with every write, as RedisBloom's say too
 * (a client or proxy must not cache or compare them across servers). */
#define CFM_TIPS_FIGURES "nondeterministic_output"

typedef struct cfm_command {
    const char *name;
    cf_rm_cmd_fn fn;
    const char *flags; /* server command flags */
    int arity;         /* -N: at least N */
    cf_rm_key_spec *key_spec;
    cf_rm_command_arg *args;
    const char *summary, *complexity;
    const char *tips; /* COMMAND INFO's tips for clients, or NULL */
} cfm_command;

static const cfm_command cfm_commands[] = {
    {"cf.reserve", cfm_cmd_reserve, "write deny-oom", -3,
     CFM_KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_INSERT),
     CFM_ARGS(CFM_ARG_KEY, {.name = "capacity", .type = CF_RM_ARG_INTEGER, .key_spec_index = -1},
              CFM_ARG_OPTION("bucketsize", "BUCKETSIZE"),
              CFM_ARG_OPTION("maxiterations", "MAXITERATIONS"),
              CFM_ARG_OPTION("expansion", "EXPANSION"), CFM_ARG_OPTION("fpbits", "FPBITS"),
              CFM_ARG_OPTION("maxfilters", "MAXFILTERS"), CFM_ARG_OPTION("semisort", "SEMISORT"),
              {.name = "layout",
               .type = CF_RM_ARG_ONEOF,
               .key_spec_index = -1,
               .token = "LAYOUT",
               .flags = CF_RM_ARG_OPTIONAL,
               .subargs = CFM_ARGS(CFM_ARG_TOKEN("native"), CFM_ARG_TOKEN("redisbloom"))},
              CFM_ARG_OPTION("window", "WINDOW"), CFM_ARG_OPTION("generations", "GENERATIONS")),
     "Creates an empty cuckoo filter for capacity items",
     "O(m) to allocate the table (zeroed lazily by the system)", NULL},
    {"cf.add", cfm_cmd_add, "write deny-oom", 3, CFM_KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_INSERT),
     CFM_ARGS(CFM_ARG_KEY, CFM_ARG_ITEM),
     "Adds an item to a cuckoo filter, creating the filter if the key does not exist", CFM_O_ADD,
     NULL},
    {"cf.addnx", cfm_cmd_addnx, "write deny-oom", 3,
     CFM_KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_ACCESS | CF_RM_KEY_INSERT),
     CFM_ARGS(CFM_ARG_KEY, CFM_ARG_ITEM),
     "Adds an item to a cuckoo filter unless it is (possibly) there already", CFM_O_ADD, NULL},
    {"cf.insert", cfm_cmd_insert, "write deny-oom", -4,
     CFM_KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_INSERT), CFM_INSERT_ARGS,
     "Adds items to a cuckoo filter, creating the filter unless NOCREATE is given",
     "O(n * (k + MAXITERATIONS)), O(m) when the filter grows", NULL},
    {"cf.insertnx", cfm_cmd_insertnx, "write deny-oom", -4,
     CFM_KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_ACCESS | CF_RM_KEY_INSERT), CFM_INSERT_ARGS,
     "Adds the items that are not (possibly) in a cuckoo filter already",
     "O(n * (k + MAXITERATIONS)), O(m) when the filter grows", NULL},
    {"cf.exists", cfm_cmd_exists, "readonly fast", 3, CFM_KEY_SPEC(CF_RM_KEY_RO | CF_RM_KEY_ACCESS),
     CFM_ARGS(CFM_ARG_KEY, CFM_ARG_ITEM),
     "Tells whether an item may be in a cuckoo filter (0: it certainly is not)", "O(k)", NULL},
    {"cf.mexists", cfm_cmd_mexists, "readonly fast", -3,
     CFM_KEY_SPEC(CF_RM_KEY_RO | CF_RM_KEY_ACCESS), CFM_ARGS(CFM_ARG_KEY, CFM_ARG_ITEMS),
     "Tells for each item whether it may be in a cuckoo filter", "O(n * k)", NULL},
    {"cf.count", cfm_cmd_count, "readonly fast", 3, CFM_KEY_SPEC(CF_RM_KEY_RO | CF_RM_KEY_ACCESS),
     CFM_ARGS(CFM_ARG_KEY, CFM_ARG_ITEM),
     "Counts the fingerprints in a cuckoo filter that match an item (at least its adds minus "
     "its deletes)",
     "O(k * b)", NULL},
    {"cf.del", cfm_cmd_del, "write fast", 3, CFM_KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_DELETE),
     CFM_ARGS(CFM_ARG_KEY, CFM_ARG_ITEM),
     "Removes one copy of an item that was added to a cuckoo filter", "O(k)", NULL},
    {"cf.compact", cfm_cmd_compact, "write", 2, CFM_KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_UPDATE),
     CFM_ARGS(CFM_ARG_KEY),
     "Moves the items of a grown cuckoo filter into its older sub-filters and frees the ones "
     "left empty",
     "O(m)", NULL},
    {"cf.advance", cfm_cmd_advance, "write fast", 3, CFM_KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_DELETE),
     CFM_ARGS(CFM_ARG_KEY, {.name = "generation", .type = CF_RM_ARG_INTEGER, .key_spec_index = -1}),
     "Moves a cuckoo filter with a window to a later generation, forgetting the items that "
     "leave the window",
     "O(m) for the generations dropped, O(1) when none is", NULL},
    {"cf.merge", cfm_cmd_merge, "write deny-oom", -3, CFM_MERGE_KEY_SPECS,
     CFM_ARGS({.name = "destkey", .type = CF_RM_ARG_KEY, .key_spec_index = 0},
              {.name = "srckey",
               .type = CF_RM_ARG_KEY,
               .key_spec_index = 1,
               .flags = CF_RM_ARG_MULTIPLE}),
     "Adds every item of the source cuckoo filters to the destination, which a missing key "
     "starts as an empty filter like the first source",
     "O(m) for each source of m bytes, and the copy of the destination with several sources", NULL},
    {"cf.info", cfm_cmd_info, "readonly fast", 2, CFM_KEY_SPEC(CF_RM_KEY_RO), CFM_ARGS(CFM_ARG_KEY),
     "Returns the size, shape and item counts of a cuckoo filter", "O(k)", CFM_TIPS_FIGURES},
    {"cf.debug", cfm_cmd_debug, "readonly fast", 2, CFM_KEY_SPEC(CF_RM_KEY_RO),
     CFM_ARGS(CFM_ARG_KEY),
     "Returns a one-line description of a cuckoo filter, fingerprint width included", "O(k)",
     CFM_TIPS_FIGURES},
    {"cf.scandump", cfm_cmd_scandump, "readonly", 3, CFM_KEY_SPEC(CF_RM_KEY_RO | CF_RM_KEY_ACCESS),
     CFM_ARGS(CFM_ARG_KEY, {.name = "iterator", .type = CF_RM_ARG_INTEGER, .key_spec_index = -1}),
     "Returns the chunk of a cuckoo filter at an iterator (0 first) and the next iterator "
     "(0 at the end), for CF.LOADCHUNK",
     "O(size of the chunk), at most 16 MiB", NULL},
    {"cf.loadchunk", cfm_cmd_loadchunk, "write deny-oom", 4,
     CFM_KEY_SPEC(CF_RM_KEY_RW | CF_RM_KEY_INSERT),
     CFM_ARGS(CFM_ARG_KEY, {.name = "iterator", .type = CF_RM_ARG_INTEGER, .key_spec_index = -1},
              {.name = "data", .type = CF_RM_ARG_STRING, .key_spec_index = -1}),
     "Restores a cuckoo filter, chunk by chunk, from what CF.SCANDUMP returned",
     "O(size of the chunk), at most 16 MiB", NULL},
};

/* The ACL category of every command, on servers that let modules add one (ACL SETUSER u
 * +@cuckoo). There the commands also join the categories of their flags (@read or
 * @write, @fast or @slow), which the server gives its own commands but not a module's.
 * Servers without module categories (Redis 7.0) put module commands in @all alone. */
#define CFM_ACL_CATEGORY "cuckoo"

/* The ACL categories of command c: CFM_ACL_CATEGORY and those of its flags. */
static const char *cfm_acl_categories(const cfm_command *c)
{
    bool fast = strstr(c->flags, "fast") != NULL;
    if (strstr(c->flags, "write"))
        return fast ? CFM_ACL_CATEGORY " write fast" : CFM_ACL_CATEGORY " write slow";
    return fast ? CFM_ACL_CATEGORY " read fast" : CFM_ACL_CATEGORY " read slow";
}

static int cfm_register_commands(cf_rm_ctx *ctx)
{
    static const cf_rm_command_info_version version = {
        .version = CF_RM_COMMAND_INFO_VERSION,
        .sizeof_historyentry = sizeof(cf_rm_command_history),
        .sizeof_keyspec = sizeof(cf_rm_key_spec),
        .sizeof_arg = sizeof(cf_rm_command_arg),
    };
    bool category = cf_rm.AddACLCategory && cf_rm.SetCommandACLCategories &&
                    cf_rm.AddACLCategory(ctx, CFM_ACL_CATEGORY) == CF_RM_OK;
    for (size_t i = 0; i < sizeof cfm_commands / sizeof cfm_commands[0]; i++) {
        const cfm_command *c = &cfm_commands[i];
        /* (the legacy key range, for servers that read it: a spec that runs to the end
         * makes the last key the last argument) */
        int last = c->key_spec[1].begin_search_type ? -1 : 1;
        if (cf_rm.CreateCommand(ctx, c->name, c->fn, c->flags, 1, last, 1) != CF_RM_OK) {
            cf_rm.Log(ctx, "warning",
                      "%s is registered already, by another module: this module cannot be "
                      "loaded beside it",
                      c->name);
            return CF_RM_ERR;
        }
        cf_rm_command *command = cf_rm.GetCommand(ctx, c->name);
        const cf_rm_command_info info = {
            .version = &version,
            .summary = c->summary,
            .complexity = c->complexity,
            .since = CFM_SINCE,
            .arity = c->arity,
            .key_specs = c->key_spec,
            .args = c->args,
            .tips = c->tips,
        };
        if (!command || cf_rm.SetCommandInfo(command, &info) != CF_RM_OK)
            return CF_RM_ERR;
        if (category && cf_rm.SetCommandACLCategories(command, cfm_acl_categories(c)) != CF_RM_OK)
            return CF_RM_ERR;
    }
    return CF_RM_OK;
}

/* ------------------------------------------------------------------------------------ */
/* The sweep: idle windowed filters lose their expired generations too                  */
/* ------------------------------------------------------------------------------------ */
/* A timer on the primary walks the keyspace, database by database, a bounded number of
 * scan steps a tick, and brings every windowed filter it meets to the generation due (as
 * a write would, replicated as CF.ADVANCE). Where it is: touched only by the server's main
 * thread, which runs timers. */
static struct {
    cf_rm_scan_cursor *cursor;
    int db;
} cfm_sweep_at;

static void cfm_sweep_key(cf_rm_ctx *ctx, cf_rm_string *name, cf_rm_key *seen, void *unused)
{
    (void)unused;
    /* Only ours are opened again, for writing: the scan opened every key for reading. */
    if (!seen || cf_rm.KeyType(seen) != CF_RM_KEYTYPE_MODULE ||
        cf_rm.ModuleTypeGetType(seen) != cfm_type)
        return;
    cf_rm_key *key;
    cfm_value *v;
    if (cfm_open(ctx, name, CF_RM_READ | CF_RM_WRITE, &key, &v) == CFM_OURS)
        cfm_due(ctx, name, v, false);
    cfm_close(key, v);
}

/* A monotonic clock in ns, for the sweep's budget (not the windows' time, which is the
 * server's Milliseconds). */
static uint64_t cfm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cfm_sweep(cf_rm_ctx *ctx, void *unused)
{
    (void)unused;
    cf_rm.CreateTimer(ctx, CFM_SWEEP_MS, cfm_sweep, NULL);
    if (!cfm_may_advance(ctx))
        return;
    if (cf_rm.SelectDb(ctx, cfm_sweep_at.db) != CF_RM_OK) /* fewer databases now */
        cfm_sweep_at.db = 0;
    uint64_t start = cfm_now_ns();
    for (int step = 0; step < CFM_SWEEP_STEPS; step++) {
        if (step % CFM_SWEEP_CLOCK_EVERY == CFM_SWEEP_CLOCK_EVERY - 1 &&
            cfm_now_ns() - start > CFM_SWEEP_BUDGET_NS)
            break;
        if (cf_rm.Scan(ctx, cfm_sweep_at.cursor, cfm_sweep_key, NULL))
            continue;
        /* This database is done: the next one, from its start (after the last, the
         * first again, at the next tick). */
        cf_rm.ScanCursorDestroy(cfm_sweep_at.cursor);
        cfm_sweep_at.cursor = cf_rm.ScanCursorCreate();
        if (cf_rm.SelectDb(ctx, ++cfm_sweep_at.db) != CF_RM_OK) {
            cfm_sweep_at.db = 0;
            break;
        }
    }
}

/* Start the sweep, where the server has what it needs (every server does; the module's
 * fuzzing harness does not). */
static void cfm_sweep_start(cf_rm_ctx *ctx)
{
    if (!cf_rm.Milliseconds || !cf_rm.CreateTimer || !cf_rm.Scan || !cf_rm.ScanCursorCreate ||
        !cf_rm.ScanCursorDestroy || !cf_rm.SelectDb) {
        cf_rm.Log(ctx, "notice",
                  "this server lacks the clock, timer or scan API: windowed filters (CF.RESERVE "
                  "... WINDOW) advance only by CF.ADVANCE");
        return;
    }
    cfm_sweep_at.cursor = cf_rm.ScanCursorCreate();
    cfm_sweep_at.db = 0;
    cf_rm.CreateTimer(ctx, CFM_SWEEP_MS, cfm_sweep, NULL);
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(cf_rm_ctx *ctx, cf_rm_string **argv,
                                                              int argc);

int RedisModule_OnLoad(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    const char *missing;
    if (cf_rm_init(ctx, CFM_MODULE_NAME, CF_VERSION_NUMBER, &missing) != CF_RM_OK)
        return CF_RM_ERR; /* the server names the module that failed to load */
    if (cfm_configure(ctx, argv, argc) != CF_RM_OK)
        return CF_RM_ERR;
    cf_rm.SetModuleOptions(ctx, CF_RM_OPTIONS_HANDLE_IO_ERRORS);

    cf_rm_type_methods methods = {
        .version = CF_RM_TYPE_METHOD_VERSION,
        .rdb_load = cfm_rdb_load,
        .rdb_save = cfm_rdb_save,
        .aof_rewrite = cfm_aof_rewrite,
        .mem_usage = cfm_mem_usage,
        .digest = cfm_digest,
        .free = cfm_free_value,
        .free_effort = cfm_free_effort,
        .copy = cfm_copy,
    };
    cfm_type = cf_rm.CreateDataType(ctx, CFM_TYPE_NAME, CFM_ENCVER, &methods);
    if (!cfm_type)
        return CF_RM_ERR;
    /* RedisBloom's type: its own RDB format and chunks; the rest as for ours. */
    methods.rdb_load = cfm_rb_rdb_load;
    methods.rdb_save = cfm_rb_rdb_save;
    methods.aof_rewrite = cfm_rb_aof_rewrite;
    methods.digest = cfm_rb_digest;
    cfm_rb_type = cf_rm.CreateDataType(ctx, CFM_RB_TYPE_NAME, CFM_RB_ENCVER, &methods);
    if (!cfm_rb_type) {
        cf_rm.Log(ctx, "warning",
                  "RedisBloom's cuckoo filter type %s is registered already: RedisBloom (or "
                  "another module with its cuckoo filters) is loaded. This module serves the "
                  "CF.* commands and RedisBloom's filters in its place, and cannot be loaded "
                  "beside it: load one or the other",
                  CFM_RB_TYPE_NAME);
        return CF_RM_ERR;
    }
    if (cfk_register_types(ctx) != CF_RM_OK) /* RedisBloom's others, kept as they are */
        return CF_RM_ERR;
    if (cf_rm.RegisterInfoFunc(ctx, cfm_info) != CF_RM_OK)
        return CF_RM_ERR;
    if (cfm_register_commands(ctx) != CF_RM_OK)
        return CF_RM_ERR;
    cfm_sweep_start(ctx);
    return CF_RM_OK;
}
