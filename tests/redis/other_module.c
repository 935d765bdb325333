/*
 * other_module.c - a stand-in for RedisBloom in tests: a module that registers RedisBloom's
 * cuckoo filter type name (MBbloomCF) and its CF.RESERVE command, and nothing that works.
 * test_redisbloom.py loads it before the project's module, which must then refuse to load
 * and say why in the server's log. Its values are never made, so its callbacks do nothing.
 */
#include "module_abi.h"

#include <stddef.h>

__attribute__((visibility("default"))) int RedisModule_OnLoad(cf_rm_ctx *ctx, cf_rm_string **argv,
                                                              int argc);

static void *other_rdb_load(cf_rm_io *io, int encver)
{
    (void)io;
    (void)encver;
    return NULL;
}

static void other_rdb_save(cf_rm_io *io, void *value)
{
    (void)io;
    (void)value;
}

static void other_free(void *value)
{
    (void)value;
}

static int other_reserve(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    (void)argv;
    (void)argc;
    return cf_rm.ReplyWithError(ctx, "ERR a stand-in module");
}

int RedisModule_OnLoad(cf_rm_ctx *ctx, cf_rm_string **argv, int argc)
{
    (void)argv;
    (void)argc;
    const char *missing;
    if (cf_rm_init(ctx, "otherbloom", 1, &missing) != CF_RM_OK)
        return CF_RM_ERR;
    cf_rm_type_methods methods = {
        .version = CF_RM_TYPE_METHOD_VERSION,
        .rdb_load = other_rdb_load,
        .rdb_save = other_rdb_save,
        .free = other_free,
    };
    if (!cf_rm.CreateDataType(ctx, "MBbloomCF", 4, &methods))
        return CF_RM_ERR;
    return cf_rm.CreateCommand(ctx, "cf.reserve", other_reserve, "write", 1, 1, 1);
}
