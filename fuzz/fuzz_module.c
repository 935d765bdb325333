/*
 * fuzz_module.c - the Redis module's loading paths (redis/module.c) on a fake server: the
 * RDB loader (what RESTORE, a restart and a full sync run on a payload) and CF.LOADCHUNK.
 *
 * The module is linked whole, with this file in place of redis/module_abi.c: cf_rm_init
 * fills the server's function table with the fakes below (one key, "k"; replies and
 * replication dropped; an allocator that counts bytes; INFO memory answered from that
 * count), and the module registers its type and commands with them as with a server.
 *
 * Input: a mode byte, then the payload.
 *   mode bit 0   0: CF.LOADCHUNK commands; 1: one RDB value
 *   mode bit 1   the context says the server is loading (not held to maxmemory)
 *   mode bit 2   forge checksums: the meta checksum and the module's field check of a
 *                header chunk, the tag of a data chunk (as fuzz_chunks does), so that
 *                inputs reach past the checks
 *   mode bit 3   with bit 0: a value of RedisBloom's type (MBbloomCF), of RDB encoding
 *                1 + (mode >> 4) % 5 (5: newer than it knows, refused)
 *   CF.LOADCHUNK payload: records of (cursor: u64, length: u16, bytes)
 *   RDB payload: what the loader reads, in order: an unsigned is 8 bytes (little-endian),
 *                a string a u16 length (0xFFFF: a u32 length follows) and its bytes;
 *                running short is an I/O error
 *
 * What it checks:
 * - Memory: under maxmemory (FZ_MAXMEMORY; none while loading, where the machine's limit
 *   FZ_RAM applies) the module never holds more than the limit allows plus what the
 *   input itself brought: a forged header is refused before it costs anything.
 * - A refused load leaves no key and holds nothing; an accepted RDB value, and whatever
 *   CF.LOADCHUNK left, saves (rdb_save) to a stream that loads back to a value saving the
 *   very same bytes, and so it does after each of CF.COMPACT, CF.ADD (until the filter
 *   grows or refuses), CF.DEL of half of those items (which may compact), CF.COMPACT and
 *   CF.DEL of the rest: what the module accepts, it can always save and load again. (An
 *   incomplete filter of RedisBloom's type saves as the complete one of its bytes so far,
 *   which holds the memory of the tables it lacks: never less.)
 * - Nothing leaks: once the key is deleted, every byte the module took is back.
 */
#include "fuzz_common.h"
#include "fuzz_target.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "module_abi.h"

#include <stdarg.h>

#define FZ_MAXMEMORY   ((uint64_t)64 << 20)  /* the fake server's maxmemory */
#define FZ_RAM         ((uint64_t)512 << 20) /* and its total_system_memory */
#define FZ_ALLOC_LIMIT ((uint64_t)1 << 30)   /* TryAlloc refuses past this many live bytes */
#define FZ_PREFIX      24u                   /* the module's fields before a header chunk */
#define FZ_HEADER      64u                   /* the file format's header */
#define FZ_MAX_RECORDS 64u                   /* CF.LOADCHUNK commands per input */
#define FZ_RB_ENCVER   4u                    /* RedisBloom's newest RDB encoding */
#define FZ_LONG_STRING 0xFFFFu               /* a string length that says a u32 length follows */

/* ------------------------------------------------------------------------------------ */
/* The fake server                                                                      */
/* ------------------------------------------------------------------------------------ */

struct cf_rm_ctx {
    int flags;
};
struct cf_rm_string {
    const char *p;
    size_t n;
};
struct cf_rm_key {
    int unused;
};
struct cf_rm_command {
    int unused;
};
struct cf_rm_type {
    cf_rm_type_methods m;
};
struct cf_rm_info {
    int unused;
};
struct cf_rm_io {
    const uint8_t *in; /* loading: what is left to read */
    size_t left;
    uint8_t *out; /* saving */
    size_t out_len, out_cap;
    int error;
    cf_rm_ctx *ctx;
};

cf_rm_api cf_rm;

static struct {
    uint64_t live, peak; /* bytes held through Alloc/TryAlloc */
    bool exists;         /* the one key, "k" */
    void *value;
    struct cf_rm_type type;         /* what CreateDataType registered: the module's own */
    struct cf_rm_type rb_type;      /* and RedisBloom's (MBbloomCF) */
    struct cf_rm_type kept_type;    /* and each of its other types, in turn */
    struct cf_rm_type *value_type;  /* the key's */
    cf_rm_cmd_fn loadchunk;         /* the CF.LOADCHUNK handler */
    cf_rm_cmd_fn add, del, compact; /* and the writes fz_exercise runs on what loaded */
    cf_rm_cmd_fn exists_cmd;        /* and CF.EXISTS, which tells an incomplete filter */
    bool registered;
    const char *error; /* the last error reply, or NULL */
    struct cf_rm_info info;
    struct cf_rm_key key;
    bool no_maxmemory;
} fz;

static void *fz_server_try_alloc(size_t n)
{
    if (n > FZ_ALLOC_LIMIT || fz.live > FZ_ALLOC_LIMIT - n)
        return NULL;
    uint64_t *p = malloc(n + 16);
    if (!p)
        return NULL;
    p[0] = n;
    fz.live += n;
    if (fz.live > fz.peak)
        fz.peak = fz.live;
    return (uint8_t *)p + 16;
}

static void *fz_server_alloc(size_t n)
{
    void *p = fz_server_try_alloc(n);
    FZ_REQUIRE(p != NULL); /* the server's Alloc never fails: it aborts */
    return p;
}

/* The size the allocation was asked for: a server's allocator may round it up. */
static size_t fz_server_malloc_size(void *p)
{
    const uint64_t *h = (const uint64_t *)(const void *)((const uint8_t *)p - 16);
    return (size_t)h[0];
}

static void fz_server_free(void *p)
{
    if (!p)
        return;
    uint64_t *h = (uint64_t *)(void *)((uint8_t *)p - 16);
    fz.live -= h[0];
    free(h);
}

static void fz_set_module_attribs(cf_rm_ctx *c, const char *n, int v, int a)
{
    (void)c, (void)n, (void)v, (void)a;
}

static int fz_create_command(cf_rm_ctx *c, const char *name, cf_rm_cmd_fn fn, const char *flags,
                             int first, int last, int step)
{
    (void)c, (void)flags, (void)first, (void)last, (void)step;
    if (strcmp(name, "cf.loadchunk") == 0)
        fz.loadchunk = fn;
    else if (strcmp(name, "cf.add") == 0)
        fz.add = fn;
    else if (strcmp(name, "cf.del") == 0)
        fz.del = fn;
    else if (strcmp(name, "cf.compact") == 0)
        fz.compact = fn;
    else if (strcmp(name, "cf.exists") == 0)
        fz.exists_cmd = fn;
    return CF_RM_OK;
}

/* Every command's metadata must be well formed: a version, an arity, a key spec list
 * ended by a zero entry, arguments ended by a nameless one. */
#define FZ_MAX_KEY_SPECS 4 /* more than any command has (CF.MERGE: destination, sources) */
static cf_rm_command fz_command;

static cf_rm_command *fz_get_command(cf_rm_ctx *c, const char *name)
{
    (void)c, (void)name;
    return &fz_command;
}

static int fz_set_command_info(cf_rm_command *command, const cf_rm_command_info *info)
{
    FZ_REQUIRE(command == &fz_command && info->version && info->arity != 0 && info->summary);
    FZ_REQUIRE(info->key_specs && info->key_specs[0].begin_search_type != 0);
    size_t specs = 1;
    while (specs < FZ_MAX_KEY_SPECS && info->key_specs[specs].begin_search_type != 0)
        specs++;
    FZ_REQUIRE(specs < FZ_MAX_KEY_SPECS); /* ended by a zero entry */
    for (const cf_rm_command_arg *a = info->args; a && a->name; a++)
        FZ_REQUIRE(a->type != CF_RM_ARG_PURE_TOKEN || a->token);
    return CF_RM_OK;
}

static int fz_notify(cf_rm_ctx *c, int type, const char *event, cf_rm_string *key)
{
    (void)c, (void)type, (void)event, (void)key;
    return CF_RM_OK;
}

static int fz_register_info(cf_rm_ctx *c, cf_rm_info_fn fn)
{
    (void)c, (void)fn;
    return CF_RM_OK;
}

static cf_rm_type *fz_create_data_type(cf_rm_ctx *c, const char *name, int encver,
                                       cf_rm_type_methods *m)
{
    (void)c, (void)encver;
    /* (RedisBloom's other types, which the module keeps as they are: not fuzzed here) */
    struct cf_rm_type *t = strcmp(name, "MBbloomCF") == 0   ? &fz.rb_type
                           : strcmp(name, "cuckoo-cf") == 0 ? &fz.type
                                                            : &fz.kept_type;
    t->m = *m;
    return t;
}

static void fz_set_module_options(cf_rm_ctx *c, int o)
{
    (void)c, (void)o;
}

static int fz_get_context_flags(cf_rm_ctx *c)
{
    return c ? c->flags : 0;
}

static void fz_log(cf_rm_ctx *c, const char *level, const char *fmt, ...)
{
    (void)c, (void)level, (void)fmt;
}

static void fz_log_io_error(cf_rm_io *io, const char *level, const char *fmt, ...)
{
    (void)io, (void)level, (void)fmt;
}

static void fz_random_bytes(unsigned char *dst, size_t len)
{
    for (size_t i = 0; i < len; i++)
        dst[i] = (unsigned char)(i * 37u + 11u); /* deterministic runs */
}

static cf_rm_info *fz_get_server_info(cf_rm_ctx *c, const char *section)
{
    (void)c, (void)section;
    return &fz.info;
}

static void fz_free_server_info(cf_rm_ctx *c, cf_rm_info *i)
{
    (void)c, (void)i;
}

static unsigned long long fz_info_field(cf_rm_info *i, const char *field, int *err)
{
    (void)i;
    *err = 0;
    if (strcmp(field, "used_memory") == 0)
        return fz.live;
    if (strcmp(field, "maxmemory") == 0)
        return fz.no_maxmemory ? 0 : FZ_MAXMEMORY;
    if (strcmp(field, "total_system_memory") == 0)
        return FZ_RAM;
    *err = 1;
    return 0;
}

static int fz_register_config(cf_rm_ctx *c, const char *name, long long def, unsigned int flags,
                              long long min, long long max, cf_rm_config_get_fn get,
                              cf_rm_config_set_fn set, cf_rm_config_apply_fn apply, void *priv)
{
    (void)c, (void)name, (void)def, (void)flags, (void)min, (void)max, (void)get, (void)set;
    (void)apply, (void)priv;
    return CF_RM_OK;
}

static int fz_register_enum_config(cf_rm_ctx *c, const char *name, int def, unsigned int flags,
                                   const char **names, const int *values, int count,
                                   cf_rm_config_get_enum_fn get, cf_rm_config_set_enum_fn set,
                                   cf_rm_config_apply_fn apply, void *priv)
{
    (void)c, (void)name, (void)def, (void)flags, (void)names, (void)values, (void)count;
    (void)get, (void)set, (void)apply, (void)priv;
    return CF_RM_OK;
}

static int fz_load_configs(cf_rm_ctx *c)
{
    (void)c;
    return CF_RM_OK;
}

static cf_rm_string *fz_create_string(cf_rm_ctx *c, const char *p, size_t n)
{
    (void)c, (void)p, (void)n;
    return NULL; /* only config errors make strings, and no config is set here */
}

static const char *fz_string_ptr_len(const cf_rm_string *s, size_t *n)
{
    *n = s->n;
    return s->p;
}

static int fz_string_to_ll(const cf_rm_string *s, long long *out)
{
    long long v = 0;
    if (s->n == 0 || s->n > 18)
        return CF_RM_ERR;
    for (size_t i = 0; i < s->n; i++) {
        if (s->p[i] < '0' || s->p[i] > '9')
            return CF_RM_ERR;
        v = v * 10 + (s->p[i] - '0');
    }
    *out = v;
    return CF_RM_OK;
}

static cf_rm_key *fz_open_key(cf_rm_ctx *c, cf_rm_string *name, int mode)
{
    (void)c, (void)name, (void)mode;
    return &fz.key;
}

static void fz_close_key(cf_rm_key *k)
{
    (void)k;
}

static int fz_key_type(cf_rm_key *k)
{
    (void)k;
    return fz.exists ? CF_RM_KEYTYPE_MODULE : CF_RM_KEYTYPE_EMPTY;
}

static int fz_delete_key(cf_rm_key *k)
{
    (void)k;
    if (fz.exists)
        fz.value_type->m.free(fz.value);
    fz.exists = false;
    fz.value = NULL;
    return CF_RM_OK;
}

static int fz_set_value(cf_rm_key *k, cf_rm_type *t, void *v)
{
    FZ_REQUIRE(t == &fz.type || t == &fz.rb_type);
    fz_delete_key(k);
    fz.exists = true;
    fz.value = v;
    fz.value_type = t;
    return CF_RM_OK;
}

static int fz_set_expire(cf_rm_key *k, long long ms)
{
    (void)k;
    FZ_REQUIRE(fz.exists && (ms > 0 || ms == CF_RM_NO_EXPIRE));
    return CF_RM_OK;
}

static cf_rm_type *fz_get_type(cf_rm_key *k)
{
    (void)k;
    return fz.value_type;
}

static void *fz_get_value(cf_rm_key *k)
{
    (void)k;
    return fz.value;
}

static int fz_wrong_arity(cf_rm_ctx *c)
{
    (void)c;
    fz.error = "wrong arity";
    return CF_RM_OK;
}

static int fz_reply_error(cf_rm_ctx *c, const char *e)
{
    (void)c;
    fz.error = e;
    return CF_RM_OK;
}

static int fz_reply_simple(cf_rm_ctx *c, const char *m)
{
    (void)c, (void)m;
    return CF_RM_OK;
}

static int fz_reply_ll(cf_rm_ctx *c, long long v)
{
    (void)c, (void)v;
    return CF_RM_OK;
}

static int fz_reply_long(cf_rm_ctx *c, long v)
{
    (void)c, (void)v;
    return CF_RM_OK;
}

static int fz_reply_int(cf_rm_ctx *c, int v)
{
    (void)c, (void)v;
    return CF_RM_OK;
}

static int fz_reply_buffer(cf_rm_ctx *c, const char *b, size_t n)
{
    (void)c, (void)b, (void)n;
    return CF_RM_OK;
}

static int fz_reply_null(cf_rm_ctx *c)
{
    (void)c;
    return CF_RM_OK;
}

static int fz_replicate_verbatim(cf_rm_ctx *c)
{
    (void)c;
    return CF_RM_OK;
}

static int fz_replicate(cf_rm_ctx *c, const char *cmd, const char *fmt, ...)
{
    (void)c, (void)cmd, (void)fmt;
    return CF_RM_OK;
}

static void fz_emit_aof(cf_rm_io *io, const char *cmd, const char *fmt, ...)
{
    (void)io, (void)cmd, (void)fmt;
}

static void fz_out(cf_rm_io *io, const void *p, size_t n)
{
    if (io->out_len + n > io->out_cap) {
        size_t cap = (io->out_len + n) * 2;
        uint8_t *b = realloc(io->out, cap);
        FZ_REQUIRE(b != NULL);
        io->out = b;
        io->out_cap = cap;
    }
    memcpy(io->out + io->out_len, p, n);
    io->out_len += n;
}

static void fz_save_unsigned(cf_rm_io *io, uint64_t v)
{
    uint8_t b[8];
    fz_put64(b, v);
    fz_out(io, b, sizeof b);
}

static void fz_save_string(cf_rm_io *io, const char *p, size_t n)
{
    FZ_REQUIRE(n <= UINT32_MAX); /* filters here hold at most FZ_ALLOC_LIMIT */
    uint8_t b[6] = {(uint8_t)n, (uint8_t)(n >> 8)};
    size_t head = 2;
    if (n >= FZ_LONG_STRING) { /* the escape, then a u32 length */
        b[0] = b[1] = 0xFF;
        for (unsigned i = 0; i < 4; i++)
            b[2 + i] = (uint8_t)(n >> (8 * i));
        head = 6;
    }
    fz_out(io, b, head);
    fz_out(io, p, n);
}

static uint64_t fz_load_unsigned(cf_rm_io *io)
{
    if (io->error || io->left < 8) {
        io->error = 1;
        return 0;
    }
    uint64_t v = fz_get64(io->in);
    io->in += 8;
    io->left -= 8;
    return v;
}

static char *fz_load_string(cf_rm_io *io, size_t *len)
{
    size_t n = 0, head = 2;
    if (!io->error && io->left >= 2)
        n = (size_t)(io->in[0] | io->in[1] << 8);
    if (n == FZ_LONG_STRING && io->left >= 6) {
        n = (size_t)fz_get32(io->in + 2);
        head = 6;
    }
    if (io->error || io->left < head || io->left - head < n) {
        io->error = 1;
        return NULL;
    }
    char *s = fz_server_alloc(n ? n : 1); /* the server allocates the string for the module */
    memcpy(s, io->in + head, n);
    io->in += head + n;
    io->left -= head + n;
    *len = n;
    return s;
}

static int fz_is_io_error(cf_rm_io *io)
{
    return io->error;
}

static cf_rm_ctx *fz_context_from_io(cf_rm_io *io)
{
    return io->ctx;
}

static void fz_digest_add(cf_rm_digest *md, const char *p, size_t n)
{
    (void)md, (void)p, (void)n;
}

static void fz_digest_ll(cf_rm_digest *md, long long v)
{
    (void)md, (void)v;
}

static void fz_digest_end(cf_rm_digest *md)
{
    (void)md;
}

int cf_rm_init(cf_rm_ctx *ctx, const char *name, int version, const char **missing)
{
    (void)ctx, (void)name, (void)version;
    *missing = NULL;
    cf_rm = (cf_rm_api){
        .SetModuleAttribs = fz_set_module_attribs,
        .CreateCommand = fz_create_command,
        .GetCommand = fz_get_command,
        .SetCommandInfo = fz_set_command_info, /* no ACL categories: as on Redis 7.0 */
        .NotifyKeyspaceEvent = fz_notify,
        .RegisterInfoFunc = fz_register_info,
        .CreateDataType = fz_create_data_type,
        .SetModuleOptions = fz_set_module_options,
        .GetContextFlags = fz_get_context_flags,
        .Log = fz_log,
        .LogIOError = fz_log_io_error,
        .Alloc = fz_server_alloc,
        .TryAlloc = fz_server_try_alloc,
        .MallocSize = fz_server_malloc_size,
        .Free = fz_server_free,
        .GetRandomBytes = fz_random_bytes,
        .GetServerInfo = fz_get_server_info,
        .FreeServerInfo = fz_free_server_info,
        .ServerInfoGetFieldUnsigned = fz_info_field,
        .RegisterNumericConfig = fz_register_config,
        .RegisterEnumConfig = fz_register_enum_config,
        .LoadConfigs = fz_load_configs,
        .CreateString = fz_create_string,
        .StringPtrLen = fz_string_ptr_len,
        .StringToLongLong = fz_string_to_ll,
        .OpenKey = fz_open_key,
        .CloseKey = fz_close_key,
        .KeyType = fz_key_type,
        .DeleteKey = fz_delete_key,
        .ModuleTypeSetValue = fz_set_value,
        .SetExpire = fz_set_expire,
        .ModuleTypeGetType = fz_get_type,
        .ModuleTypeGetValue = fz_get_value,
        .WrongArity = fz_wrong_arity,
        .ReplyWithError = fz_reply_error,
        .ReplyWithSimpleString = fz_reply_simple,
        .ReplyWithLongLong = fz_reply_ll,
        .ReplyWithBool = fz_reply_int,
        .ReplyWithArray = fz_reply_long,
        .ReplyWithMap = fz_reply_long,
        .ReplyWithStringBuffer = fz_reply_buffer,
        .ReplyWithNull = fz_reply_null,
        .ReplicateVerbatim = fz_replicate_verbatim,
        .Replicate = fz_replicate,
        .EmitAOF = fz_emit_aof,
        .SaveUnsigned = fz_save_unsigned,
        .LoadUnsigned = fz_load_unsigned,
        .SaveStringBuffer = fz_save_string,
        .LoadStringBuffer = fz_load_string,
        .IsIOError = fz_is_io_error,
        .GetContextFromIO = fz_context_from_io,
        .DigestAddStringBuffer = fz_digest_add,
        .DigestAddLongLong = fz_digest_ll,
        .DigestEndSequence = fz_digest_end,
    };
    return CF_RM_OK;
}

int RedisModule_OnLoad(cf_rm_ctx *ctx, cf_rm_string **argv, int argc);

/* ------------------------------------------------------------------------------------ */
/* Forging                                                                              */
/* ------------------------------------------------------------------------------------ */

/* A header chunk (the file format's meta section and file sum, after `skip` bytes of the
 * module's fields when there are any): its meta checksum, and the fields' check. */
static uint64_t fz_forge_header(uint8_t *d, size_t len, size_t skip)
{
    if (len < skip + FZ_HEADER + 16u)
        return 0;
    uint8_t *h = d + skip;
    size_t n = len - skip;
    fz_put64(h + n - 16, XXH3_64bits(h, n - 16));
    if (skip)
        fz_put64(d + 16, XXH3_64bits_withSeed(d, 16, fz_get64(h + 24)));
    return XXH3_64bits(h, FZ_HEADER);
}

static void fz_forge_data(uint8_t *d, size_t len, uint64_t header_sum, uint64_t pos)
{
    if (len >= 8)
        fz_put64(d + len - 8, XXH3_64bits_withSeed(d, len - 8, header_sum ^ pos));
}

/* ------------------------------------------------------------------------------------ */
/* The two paths                                                                        */
/* ------------------------------------------------------------------------------------ */

/* What the module may hold: the limit that applies, plus what the input brought. */
static void fz_check_memory(uint64_t input)
{
    uint64_t limit = fz.no_maxmemory ? FZ_RAM : FZ_MAXMEMORY;
    FZ_REQUIRE(fz.peak <= limit + 4 * input + (1u << 20));
}

static void fz_loadchunks(const uint8_t *p, size_t n, int flags, bool forge)
{
    cf_rm_ctx ctx = {flags};
    char name[] = "k", cmd[] = "CF.LOADCHUNK", cursor_text[24];
    uint64_t header_sum = 0;
    for (unsigned r = 0; r < FZ_MAX_RECORDS && n >= 10; r++) {
        uint64_t cursor = fz_get64(p);
        size_t len = (size_t)(p[8] | p[9] << 8);
        p += 10;
        n -= 10;
        if (len > n)
            len = n;
        uint8_t *data = malloc(len ? len : 1);
        FZ_REQUIRE(data != NULL);
        memcpy(data, p, len);
        p += len;
        n -= len;
        if (forge && !fz.exists)
            header_sum = fz_forge_header(data, len, FZ_PREFIX);
        else if (forge)
            fz_forge_data(data, len, header_sum, cursor);
        /* The cursor a data chunk carries is the next one's position; its own position is
         * what the filter expects, which a forged tag needs: the fuzzer finds those. */
        snprintf(cursor_text, sizeof cursor_text, "%llu", (unsigned long long)cursor);
        cf_rm_string argv[4] = {{cmd, sizeof cmd - 1},
                                {name, 1},
                                {cursor_text, strlen(cursor_text)},
                                {(const char *)data, len}};
        cf_rm_string *args[4] = {&argv[0], &argv[1], &argv[2], &argv[3]};
        bool existed = fz.exists;
        uint64_t before = fz.live;
        fz.error = NULL;
        fz.loadchunk(&ctx, args, 4);
        /* A refused header leaves no key and holds nothing. */
        if (!existed && fz.error)
            FZ_REQUIRE(!fz.exists && fz.live == before);
        free(data);
        fz_check_memory(len + 24);
    }
}

static void fz_command_on_k(cf_rm_cmd_fn fn, const char *item);

/* Is the key's filter incomplete (CF.LOADCHUNK has not had all its chunks)? */
static bool fz_incomplete(void)
{
    fz_command_on_k(fz.exists_cmd, "x");
    return fz.error && strstr(fz.error, "incomplete") != NULL;
}

/* Saved and loaded again (by its type: the module's own, or RedisBloom's at its newest
 * encoding), value v saves the very same bytes. An incomplete filter of RedisBloom's
 * type saves as the complete filter of its bytes so far (RedisBloom's format has no
 * incomplete one), whose copy holds the tables whose chunks it has not had yet. */
static void fz_check_saves(const struct cf_rm_type *t, void *v)
{
    bool rb_incomplete = t == &fz.rb_type && fz_incomplete();
    cf_rm_ctx ctx = {CF_RM_CTX_FLAGS_LOADING};
    cf_rm_io out = {.ctx = &ctx};
    t->m.rdb_save(&out, v);
    cf_rm_io again = {.in = out.out, .left = out.out_len, .ctx = &ctx};
    void *w = t->m.rdb_load(&again, t == &fz.rb_type ? FZ_RB_ENCVER : 1);
    FZ_REQUIRE(w != NULL && again.left == 0 && !again.error);
    cf_rm_io out2 = {.ctx = &ctx};
    t->m.rdb_save(&out2, w);
    FZ_REQUIRE(out2.out_len == out.out_len && memcmp(out2.out, out.out, out.out_len) == 0);
    FZ_REQUIRE(rb_incomplete ? t->m.mem_usage(v) <= t->m.mem_usage(w)
                             : t->m.mem_usage(v) == t->m.mem_usage(w));
    t->m.free(w);
    free(out.out);
    free(out2.out);
}

/* One command on the key, "k", with one argument or none. */
static void fz_command_on_k(cf_rm_cmd_fn fn, const char *item)
{
    cf_rm_ctx ctx = {0};
    char name[] = "k", cmd[] = "CF.X";
    cf_rm_string argv[3] = {{cmd, sizeof cmd - 1}, {name, 1}, {item, item ? strlen(item) : 0}};
    cf_rm_string *args[3] = {&argv[0], &argv[1], &argv[2]};
    fz.error = NULL;
    fn(&ctx, args, item ? 3 : 2);
}

/* The writes that rewrite a filter's tables, on whatever a load left under "k"; after
 * each, it still saves and loads back byte for byte. */
static void fz_exercise(void)
{
    char item[24];
    fz_check_saves(fz.value_type, fz.value);
    fz_command_on_k(fz.compact, NULL); /* first, while the older sub-filters have room */
    fz_check_saves(fz.value_type, fz.value);
    unsigned n = 0;
    size_t held = fz.value_type->m.mem_usage(fz.value); /* grows with its first new table */
    while (n < FZ_GROW_ADDS && fz.value_type->m.mem_usage(fz.value) == held) {
        snprintf(item, sizeof item, "i%u", n);
        fz_command_on_k(fz.add, item);
        if (fz.error)
            break;
        n++;
    }
    fz_check_saves(fz.value_type, fz.value);
    for (unsigned keep = n / 2;; keep = 0) {
        while (n > keep) {
            snprintf(item, sizeof item, "i%u", --n);
            fz_command_on_k(fz.del, item);
        }
        fz_check_saves(fz.value_type, fz.value);
        fz_command_on_k(fz.compact, NULL);
        fz_check_saves(fz.value_type, fz.value);
        if (keep == 0)
            break;
    }
}

static void fz_rdb(const uint8_t *p, size_t n, int flags, bool forge, bool rb, int rb_encver)
{
    cf_rm_ctx ctx = {flags};
    uint8_t *copy = malloc(n ? n : 1);
    FZ_REQUIRE(copy != NULL);
    memcpy(copy, p, n);
    /* Forging: the header chunk is the first string, after three unsigneds and a cursor. */
    if (forge && !rb && n >= 34) { /* RedisBloom's records carry no checksum */
        size_t len = (size_t)(copy[32] | copy[33] << 8);
        if (len <= n - 34) {
            uint8_t *h = copy + 34;
            fz_forge_header(h, len, 0);
        }
    }
    cf_rm_io io = {.in = copy, .left = n, .ctx = &ctx};
    uint64_t before = fz.live;
    struct cf_rm_type *t = rb ? &fz.rb_type : &fz.type;
    void *v = t->m.rdb_load(&io, rb ? rb_encver : 1);
    fz_check_memory(n);
    free(copy);
    if (!v) {
        FZ_REQUIRE(fz.live == before);
        return;
    }
    fz_set_value(&fz.key, t, v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fz.registered) {
        cf_rm_ctx ctx = {0};
        FZ_REQUIRE(RedisModule_OnLoad(&ctx, NULL, 0) == CF_RM_OK && fz.loadchunk != NULL);
        fz.registered = true;
    }
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    int flags = mode & 2u ? CF_RM_CTX_FLAGS_LOADING : 0;
    fz.no_maxmemory = (mode & 2u) != 0; /* loading is not held to maxmemory */
    uint64_t base = fz.live;
    fz.peak = fz.live;
    if (mode & 1u)
        fz_rdb(data + 1, size - 1, flags, mode & 4u, mode & 8u, 1 + (int)(mode >> 4) % 5);
    else
        fz_loadchunks(data + 1, size - 1, flags, mode & 4u);
    if (fz.exists)
        fz_exercise();
    cf_rm_key *k = &fz.key;
    fz_delete_key(k);
    FZ_REQUIRE(fz.live == base); /* nothing leaks */
    return 0;
}
