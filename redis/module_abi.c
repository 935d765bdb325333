/*
 * module_abi.c - fills the cf_rm table from the server (see module_abi.h).
 */
#include "module_abi.h"

#include <stdbool.h>
#include <string.h>

cf_rm_api cf_rm;

/* One entry per function: the server's name for it, where its address goes, and whether
 * the module can do without it. */
#define CF_RM_FN(field)                                                                            \
    {                                                                                              \
        "RedisModule_" #field, (void *)&cf_rm.field, false                                         \
    }
#define CF_RM_OPTIONAL_FN(field)                                                                   \
    {                                                                                              \
        "RedisModule_" #field, (void *)&cf_rm.field, true                                          \
    }

int cf_rm_init(cf_rm_ctx *ctx, const char *name, int version, const char **missing)
{
    const struct {
        const char *name;
        void *slot;
        bool optional;
    } fns[] = {
        CF_RM_FN(SetModuleAttribs),
        CF_RM_FN(CreateCommand),
        CF_RM_FN(GetCommand),
        CF_RM_FN(SetCommandInfo),
        CF_RM_OPTIONAL_FN(AddACLCategory),
        CF_RM_OPTIONAL_FN(SetCommandACLCategories),
        CF_RM_FN(CreateDataType),
        CF_RM_FN(SetModuleOptions),
        CF_RM_FN(GetContextFlags),
        CF_RM_FN(Log),
        CF_RM_FN(LogIOError),
        CF_RM_FN(Alloc),
        CF_RM_FN(TryAlloc),
        CF_RM_FN(MallocSize),
        CF_RM_FN(Free),
        CF_RM_FN(GetRandomBytes),
        CF_RM_FN(GetServerInfo),
        CF_RM_FN(FreeServerInfo),
        CF_RM_FN(ServerInfoGetFieldUnsigned),
        CF_RM_FN(RegisterNumericConfig),
        CF_RM_FN(RegisterEnumConfig),
        CF_RM_FN(LoadConfigs),
        CF_RM_FN(CreateString),
        CF_RM_FN(StringPtrLen),
        CF_RM_FN(StringToLongLong),
        CF_RM_FN(OpenKey),
        CF_RM_FN(CloseKey),
        CF_RM_FN(KeyType),
        CF_RM_FN(DeleteKey),
        CF_RM_FN(ModuleTypeSetValue),
        CF_RM_FN(SetExpire),
        CF_RM_FN(ModuleTypeGetType),
        CF_RM_FN(ModuleTypeGetValue),
        CF_RM_FN(WrongArity),
        CF_RM_FN(ReplyWithError),
        CF_RM_FN(ReplyWithSimpleString),
        CF_RM_FN(ReplyWithLongLong),
        CF_RM_FN(ReplyWithBool),
        CF_RM_FN(ReplyWithArray),
        CF_RM_FN(ReplyWithMap),
        CF_RM_FN(ReplyWithStringBuffer),
        CF_RM_FN(ReplyWithNull),
        CF_RM_FN(NotifyKeyspaceEvent),
        CF_RM_FN(RegisterInfoFunc),
        CF_RM_FN(InfoAddSection),
        CF_RM_FN(InfoAddFieldULongLong),
        CF_RM_FN(ReplicateVerbatim),
        CF_RM_FN(Replicate),
        CF_RM_FN(EmitAOF),
        CF_RM_FN(SaveUnsigned),
        CF_RM_FN(LoadUnsigned),
        CF_RM_FN(SaveStringBuffer),
        CF_RM_FN(LoadStringBuffer),
        CF_RM_FN(LoadSigned),
        CF_RM_FN(SaveDouble),
        CF_RM_FN(LoadDouble),
        CF_RM_FN(IsIOError),
        CF_RM_FN(GetContextFromIO),
        CF_RM_FN(DigestAddStringBuffer),
        CF_RM_FN(DigestAddLongLong),
        CF_RM_FN(DigestEndSequence),
        CF_RM_OPTIONAL_FN(Milliseconds),
        CF_RM_OPTIONAL_FN(CreateTimer),
        CF_RM_OPTIONAL_FN(ScanCursorCreate),
        CF_RM_OPTIONAL_FN(ScanCursorDestroy),
        CF_RM_OPTIONAL_FN(Scan),
        CF_RM_OPTIONAL_FN(SelectDb),
        CF_RM_OPTIONAL_FN(GetKeyNameFromIO),
    };
    /* The lookup function is the context's first word. It is a function pointer stored
     * as data, so it is copied out bytewise (ISO C has no cast between the two). */
    int (*lookup)(const char *, void *);
    memcpy(&lookup, (const void *)ctx, sizeof lookup);
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (lookup(fns[i].name, fns[i].slot) != CF_RM_OK && !fns[i].optional) {
            *missing = fns[i].name;
            return CF_RM_ERR;
        }
    cf_rm.SetModuleAttribs(ctx, name, version, CF_RM_APIVER_1);
    return CF_RM_OK;
}
