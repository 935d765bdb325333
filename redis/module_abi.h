/*
 * module_abi.h - the part of the Redis / Valkey module ABI that this module uses, declared
 * by this project (no server header is included or copied).
 *
 * How the ABI works: the server calls the module's exported RedisModule_OnLoad(ctx, argv,
 * argc). The first pointer-sized word of that context is the server's lookup function,
 * int lookup(const char *name, void *slot), which stores the address of the API function
 * called `name` ("RedisModule_ReplyWithError", ...) into *slot and returns 0, or returns
 * non-zero when the server does not have it. cf_rm_init() looks up every function below
 * that way, so a server that lacks one refuses to load the module instead of crashing
 * later. The numeric constants are the server's documented values.
 *
 * Every function used here exists in Redis 7.0 and in Valkey, except those marked optional:
 * cf_rm_init leaves those NULL where the server lacks them, and every use checks first.
 */
#ifndef CF_REDIS_MODULE_ABI_H
#define CF_REDIS_MODULE_ABI_H

#include <stddef.h>
#include <stdint.h>

/* Opaque server objects: the module only ever holds pointers to them. */
typedef struct cf_rm_ctx cf_rm_ctx;                 /* a call's context */
typedef struct cf_rm_string cf_rm_string;           /* a server string (an argument, a key) */
typedef struct cf_rm_key cf_rm_key;                 /* an open key */
typedef struct cf_rm_type cf_rm_type;               /* a registered data type */
typedef struct cf_rm_io cf_rm_io;                   /* RDB or AOF stream of a type callback */
typedef struct cf_rm_digest cf_rm_digest;           /* DEBUG DIGEST accumulator */
typedef struct cf_rm_info cf_rm_info;               /* result of GetServerInfo */
typedef struct cf_rm_defrag_ctx cf_rm_defrag_ctx;   /* only named in the methods table */
typedef struct cf_rm_command cf_rm_command;         /* a registered command (GetCommand) */
typedef struct cf_rm_info_ctx cf_rm_info_ctx;       /* an INFO reply being built */
typedef struct cf_rm_scan_cursor cf_rm_scan_cursor; /* where a keyspace scan is */

/* Status values. */
#define CF_RM_OK  0
#define CF_RM_ERR 1

/* The API version this module is written against (the only one that exists). */
#define CF_RM_APIVER_1 1

/* OpenKey modes. */
#define CF_RM_READ  (1 << 0)
#define CF_RM_WRITE (1 << 1)

/* SetExpire: remove the key's time to live. */
#define CF_RM_NO_EXPIRE (-1)

/* KeyType results that matter here. */
#define CF_RM_KEYTYPE_EMPTY  0
#define CF_RM_KEYTYPE_MODULE 6

/* GetContextFlags bits. */
#define CF_RM_CTX_FLAGS_LUA        (1 << 0)  /* the command runs in a script */
#define CF_RM_CTX_FLAGS_SLAVE      (1 << 3)  /* this server is a replica */
#define CF_RM_CTX_FLAGS_READONLY   (1 << 4)  /* this server takes no writes from clients */
#define CF_RM_CTX_FLAGS_REPLICATED (1 << 12) /* the command came from the primary */
#define CF_RM_CTX_FLAGS_LOADING    (1 << 13) /* the server is loading (AOF replay) */
#define CF_RM_CTX_FLAGS_RESP3      (1 << 22) /* the client speaks RESP3 */

/* SetModuleOptions: the module checks IsIOError after every load call, so the server may
 * load its data from a stream that can fail (diskless replication). */
#define CF_RM_OPTIONS_HANDLE_IO_ERRORS (1 << 0)

/* Version 3 of the data type methods table (has copy; understood by Redis 6.2 and later
 * and by Valkey, which ignore fields past the version they are told). */
#define CF_RM_TYPE_METHOD_VERSION 3

/* NotifyKeyspaceEvent classes. */
#define CF_RM_NOTIFY_GENERIC (1 << 2)  /* g: DEL and other type-independent events */
#define CF_RM_NOTIFY_MODULE  (1 << 13) /* d: events of module data types */

typedef int (*cf_rm_cmd_fn)(cf_rm_ctx *ctx, cf_rm_string **argv, int argc);

/* A timer's callback (CreateTimer), and a keyspace scan's, with each key opened for
 * reading (NULL if it could not be). */
typedef void (*cf_rm_timer_fn)(cf_rm_ctx *ctx, void *data);
typedef void (*cf_rm_scan_fn)(cf_rm_ctx *ctx, cf_rm_string *keyname, cf_rm_key *key, void *data);

/* INFO: the server calls this to let the module add its sections (InfoAddSection, then
 * fields). for_crash_report: the server is writing a crash log. */
typedef void (*cf_rm_info_fn)(cf_rm_info_ctx *ctx, int for_crash_report);

/* Command metadata for SetCommandInfo (COMMAND INFO, COMMAND DOCS; the server also checks
 * the arity before calling the handler). Version 1 of these structures, whose sizes the
 * module passes along so that the server reads them correctly. Arrays end with an entry
 * of zeros. Enumerations are ints in the server's ABI. */
#define CF_RM_COMMAND_INFO_VERSION 1

/* Argument types. */
#define CF_RM_ARG_STRING     0
#define CF_RM_ARG_INTEGER    1
#define CF_RM_ARG_KEY        3 /* a key name: key_spec_index says which key spec */
#define CF_RM_ARG_PURE_TOKEN 6 /* a keyword alone (token) */
#define CF_RM_ARG_ONEOF      7 /* one of the subargs */

/* Argument flags. */
#define CF_RM_ARG_OPTIONAL (1 << 0)
#define CF_RM_ARG_MULTIPLE (1 << 1)

/* Key specs: where the keys are (begin search) and how many follow (find keys). */
#define CF_RM_KSPEC_BS_INDEX 2 /* at a fixed argument index */
#define CF_RM_KSPEC_FK_RANGE 2 /* a range after it */

/* Key spec flags: the access (RO, RW, OW, RM) and what the command does to the data. */
#define CF_RM_KEY_RO     (1ull << 0)
#define CF_RM_KEY_RW     (1ull << 1)
#define CF_RM_KEY_ACCESS (1ull << 4) /* returns user data (or facts about it) */
#define CF_RM_KEY_UPDATE (1ull << 5) /* changes data in place */
#define CF_RM_KEY_INSERT (1ull << 6) /* adds data */
#define CF_RM_KEY_DELETE (1ull << 7) /* removes data */

typedef struct cf_rm_command_arg {
    const char *name;
    int type; /* CF_RM_ARG_* type */
    int key_spec_index;
    const char *token;
    const char *summary;
    const char *since;
    int flags; /* CF_RM_ARG_OPTIONAL, ... */
    const char *deprecated_since;
    struct cf_rm_command_arg *subargs;
    const char *display_text;
} cf_rm_command_arg;

typedef struct cf_rm_command_history {
    const char *since;
    const char *changes;
} cf_rm_command_history;

typedef struct cf_rm_key_spec {
    const char *notes;
    uint64_t flags; /* CF_RM_KEY_* */
    int begin_search_type;
    union {
        struct {
            int pos;
        } index;
        struct {
            const char *keyword;
            int startfrom;
        } keyword;
    } bs;
    int find_keys_type;
    union {
        struct {
            int lastkey, keystep, limit;
        } range;
        struct {
            int keynumidx, firstkey, keystep;
        } keynum;
    } fk;
} cf_rm_key_spec;

typedef struct cf_rm_command_info_version {
    int version;
    size_t sizeof_historyentry;
    size_t sizeof_keyspec;
    size_t sizeof_arg;
} cf_rm_command_info_version;

typedef struct cf_rm_command_info {
    const cf_rm_command_info_version *version;
    const char *summary;
    const char *complexity;
    const char *since;
    cf_rm_command_history *history;
    const char *tips;
    int arity; /* -N: at least N */
    cf_rm_key_spec *key_specs;
    cf_rm_command_arg *args;
} cf_rm_command_info;

/* A numeric module configuration (CONFIG GET / SET <module>.<name>). The setter returns
 * CF_RM_OK, or CF_RM_ERR with *err set to a string the server frees. */
#define CF_RM_CONFIG_DEFAULT    0
/* Redis >= 8: the name is not prefixed with the module's, and may list aliases after '|'.
 * Older servers (and Valkey 8) refuse a registration that carries it. */
#define CF_RM_CONFIG_UNPREFIXED (1u << 9)
typedef long long (*cf_rm_config_get_fn)(const char *name, void *privdata);
typedef int (*cf_rm_config_set_fn)(const char *name, long long value, void *privdata,
                                   cf_rm_string **err);
/* An enumerated configuration: clients see names, the module their int values. */
typedef int (*cf_rm_config_get_enum_fn)(const char *name, void *privdata);
typedef int (*cf_rm_config_set_enum_fn)(const char *name, int value, void *privdata,
                                        cf_rm_string **err);
typedef int (*cf_rm_config_apply_fn)(cf_rm_ctx *ctx, void *privdata, cf_rm_string **err);

typedef struct cf_rm_type_methods {
    uint64_t version;
    void *(*rdb_load)(cf_rm_io *rdb, int encver);
    void (*rdb_save)(cf_rm_io *rdb, void *value);
    void (*aof_rewrite)(cf_rm_io *aof, cf_rm_string *key, void *value);
    size_t (*mem_usage)(const void *value);
    void (*digest)(cf_rm_digest *md, void *value);
    void (*free)(void *value);
    int (*aux_load)(cf_rm_io *rdb, int encver, int when);
    void (*aux_save)(cf_rm_io *rdb, int when);
    int aux_save_triggers;
    size_t (*free_effort)(cf_rm_string *key, const void *value);
    void (*unlink)(cf_rm_string *key, const void *value);
    void *(*copy)(cf_rm_string *fromkey, cf_rm_string *tokey, const void *value);
    int (*defrag)(cf_rm_defrag_ctx *ctx, cf_rm_string *key, void **value);
} cf_rm_type_methods;

/* The API functions, filled in by cf_rm_init. Names are the server's without the
 * "RedisModule_" prefix. */
typedef struct cf_rm_api {
    void (*SetModuleAttribs)(cf_rm_ctx *ctx, const char *name, int ver, int apiver);
    int (*CreateCommand)(cf_rm_ctx *ctx, const char *name, cf_rm_cmd_fn fn, const char *flags,
                         int firstkey, int lastkey, int keystep);
    cf_rm_command *(*GetCommand)(cf_rm_ctx *ctx, const char *name);
    int (*SetCommandInfo)(cf_rm_command *command, const cf_rm_command_info *info);
    /* Optional (Redis 7.4, Valkey 8): module ACL categories, declared during the load. */
    int (*AddACLCategory)(cf_rm_ctx *ctx, const char *name);
    int (*SetCommandACLCategories)(cf_rm_command *command, const char *categories);
    cf_rm_type *(*CreateDataType)(cf_rm_ctx *ctx, const char *name, int encver,
                                  cf_rm_type_methods *methods);
    void (*SetModuleOptions)(cf_rm_ctx *ctx, int options);
    int (*GetContextFlags)(cf_rm_ctx *ctx);
    void (*Log)(cf_rm_ctx *ctx, const char *level, const char *fmt, ...);
    void (*LogIOError)(cf_rm_io *io, const char *level, const char *fmt, ...);

    void *(*Alloc)(size_t bytes); /* the server's own policy: never NULL, aborts when out */
    void *(*TryAlloc)(size_t bytes);
    size_t (*MallocSize)(void *ptr); /* the bytes the allocator holds for ptr (Redis >= 6.0) */
    void (*Free)(void *ptr);
    void (*GetRandomBytes)(unsigned char *dst, size_t len);
    cf_rm_info *(*GetServerInfo)(cf_rm_ctx *ctx, const char *section);
    void (*FreeServerInfo)(cf_rm_ctx *ctx, cf_rm_info *data);
    unsigned long long (*ServerInfoGetFieldUnsigned)(cf_rm_info *data, const char *field,
                                                     int *out_err);

    int (*RegisterNumericConfig)(cf_rm_ctx *ctx, const char *name, long long default_value,
                                 unsigned int flags, long long min, long long max,
                                 cf_rm_config_get_fn get, cf_rm_config_set_fn set,
                                 cf_rm_config_apply_fn apply, void *privdata);
    int (*RegisterEnumConfig)(cf_rm_ctx *ctx, const char *name, int default_value,
                              unsigned int flags, const char **names, const int *values, int count,
                              cf_rm_config_get_enum_fn get, cf_rm_config_set_enum_fn set,
                              cf_rm_config_apply_fn apply, void *privdata);
    int (*LoadConfigs)(cf_rm_ctx *ctx);

    cf_rm_string *(*CreateString)(cf_rm_ctx *ctx, const char *ptr, size_t len);
    const char *(*StringPtrLen)(const cf_rm_string *str, size_t *len);
    int (*StringToLongLong)(const cf_rm_string *str, long long *ll);

    cf_rm_key *(*OpenKey)(cf_rm_ctx *ctx, cf_rm_string *name, int mode);
    void (*CloseKey)(cf_rm_key *key);
    int (*KeyType)(cf_rm_key *key);
    int (*DeleteKey)(cf_rm_key *key);
    int (*ModuleTypeSetValue)(cf_rm_key *key, cf_rm_type *type, void *value);
    int (*SetExpire)(cf_rm_key *key, long long milliseconds); /* from now; or NO_EXPIRE */
    cf_rm_type *(*ModuleTypeGetType)(cf_rm_key *key);
    void *(*ModuleTypeGetValue)(cf_rm_key *key);

    int (*WrongArity)(cf_rm_ctx *ctx);
    int (*ReplyWithError)(cf_rm_ctx *ctx, const char *err);
    int (*ReplyWithSimpleString)(cf_rm_ctx *ctx, const char *msg);
    int (*ReplyWithLongLong)(cf_rm_ctx *ctx, long long ll);
    int (*ReplyWithBool)(cf_rm_ctx *ctx, int b);
    int (*ReplyWithArray)(cf_rm_ctx *ctx, long len);
    int (*ReplyWithMap)(cf_rm_ctx *ctx, long len);
    int (*ReplyWithStringBuffer)(cf_rm_ctx *ctx, const char *buf, size_t len);
    int (*ReplyWithNull)(cf_rm_ctx *ctx);

    int (*NotifyKeyspaceEvent)(cf_rm_ctx *ctx, int type, const char *event, cf_rm_string *key);
    int (*RegisterInfoFunc)(cf_rm_ctx *ctx, cf_rm_info_fn fn);
    int (*InfoAddSection)(cf_rm_info_ctx *ctx, const char *name);
    int (*InfoAddFieldULongLong)(cf_rm_info_ctx *ctx, const char *field, unsigned long long value);

    int (*ReplicateVerbatim)(cf_rm_ctx *ctx);
    int (*Replicate)(cf_rm_ctx *ctx, const char *cmd, const char *fmt, ...);
    void (*EmitAOF)(cf_rm_io *io, const char *cmd, const char *fmt, ...);

    void (*SaveUnsigned)(cf_rm_io *io, uint64_t value);
    uint64_t (*LoadUnsigned)(cf_rm_io *io);
    void (*SaveStringBuffer)(cf_rm_io *io, const char *buf, size_t len);
    char *(*LoadStringBuffer)(cf_rm_io *io, size_t *len);
    int64_t (*LoadSigned)(cf_rm_io *io);
    void (*SaveDouble)(cf_rm_io *io, double value);
    double (*LoadDouble)(cf_rm_io *io);
    int (*IsIOError)(cf_rm_io *io);
    cf_rm_ctx *(*GetContextFromIO)(cf_rm_io *io);

    void (*DigestAddStringBuffer)(cf_rm_digest *md, const char *buf, size_t len);
    void (*DigestAddLongLong)(cf_rm_digest *md, long long ll);
    void (*DigestEndSequence)(cf_rm_digest *md);

    /* Optional here (every server has them; the module's fuzzing harness does not): the
     * clock and the keyspace sweep of windowed filters. */
    long long (*Milliseconds)(void); /* the server's Unix time in ms */
    uint64_t (*CreateTimer)(cf_rm_ctx *ctx, long long period_ms, cf_rm_timer_fn callback,
                            void *data);
    cf_rm_scan_cursor *(*ScanCursorCreate)(void);
    void (*ScanCursorDestroy)(cf_rm_scan_cursor *cursor);
    int (*Scan)(cf_rm_ctx *ctx, cf_rm_scan_cursor *cursor, cf_rm_scan_fn fn, void *data);
    int (*SelectDb)(cf_rm_ctx *ctx, int db);
    /* The key a type callback loads or saves (its name in log lines), or NULL. */
    const cf_rm_string *(*GetKeyNameFromIO)(cf_rm_io *io);
} cf_rm_api;

/* The table every file of the module calls through. */
extern cf_rm_api cf_rm;

/* Look up every function of cf_rm from the server and register the module's name and
 * version. Returns CF_RM_OK, or CF_RM_ERR naming the missing function in *missing. */
int cf_rm_init(cf_rm_ctx *ctx, const char *name, int version, const char **missing);

#endif /* CF_REDIS_MODULE_ABI_H */
