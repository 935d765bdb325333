/*
 * kept.h - RedisBloom's data types other than its cuckoo filter (Bloom filters, count-min
 * sketches, top-k and t-digests), which the module keeps as they are: a dump of Redis
 * Stack or Redis 8 loads whole, and those keys save, dump, replicate and rewrite into the
 * AOF in RedisBloom's own formats, for a server that serves them. No command of theirs is
 * served here. See kept.c.
 */
#ifndef CF_REDIS_KEPT_H
#define CF_REDIS_KEPT_H

#include "module_abi.h"

/* Register the kept types (during RedisModule_OnLoad). CF_RM_OK, or CF_RM_ERR with a log
 * line that says which type could not be registered. */
int cfk_register_types(cf_rm_ctx *ctx);

#endif /* CF_REDIS_KEPT_H */
