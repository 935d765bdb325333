/*
 * kept.c - RedisBloom's other data types, kept byte for byte.
 *
 * A dump of Redis Stack or Redis 8 may hold Bloom filters, count-min sketches, top-k and
 * t-digests beside cuckoo filters; a server that cannot load one of them does not start.
 * This module registers their types under RedisBloom's names and encoding versions and
 * keeps each value as the fields RedisBloom's rdb_save writes (unsigned and signed
 * integers, doubles, strings: docs/COMMANDS.md, "RedisBloom's other types"), read by a
 * parser per type that checks what RedisBloom's own load checks, and written back in the
 * same order. RDB, DUMP and a full sync carry the same bytes RedisBloom would write; an
 * AOF rewrite without an RDB preamble writes a RESTORE of that very payload. The keys
 * work with every generic command (TYPE, DEL, RENAME, EXPIRE, MEMORY USAGE, SCAN TYPE,
 * DUMP, MIGRATE, COPY); none of their commands is registered, so that a module that
 * serves them (valkey-bloom's BF.*, say) can be loaded beside this one.
 *
 * Written from the layouts RedisBloom's sources save (read for the format only); none of
 * its code.
 */
#define _POSIX_C_SOURCE 200809L /* strnlen */

#include "kept.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* The opcodes of a module value's fields in an RDB payload (the server's encoding; a
 * field's kind here is its opcode). A signed integer is saved as the unsigned one of its
 * bits, under this opcode: the server's SaveSigned does so. */
#define CFK_OP_EOF      0u
#define CFK_OP_UNSIGNED 2u
#define CFK_OP_DOUBLE   4u
#define CFK_OP_STRING   5u

/* DUMP payloads the AOF rewrite writes: the value's type byte (a module value with
 * opcodes), and the RDB version in the footer, the oldest that has that type, which every
 * server that loads modules takes. */
#define CFK_RDB_TYPE_MODULE_2 7u
#define CFK_RDB_VERSION       9u

/* A module type's id: 9 characters of this set, 6 bits each, then 10 bits of encoding. */
#define CFK_ID_CHARSET  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
#define CFK_ID_ENC_BITS 10u

/* The CRC-64 of DUMP payloads (Jones: reflected, no final XOR), its polynomial reflected. */
#define CFK_CRC64_POLY UINT64_C(0x95ac9329ac4bc9b5)

/* The field array starts with room for this many fields, and doubles. */
#define CFK_FIRST_FIELDS 16u

/* Layout constants of RedisBloom's formats. */
#define CFK_BF_OPTIONS_ENC  2u /* Bloom filters: options saved from this encoding */
#define CFK_BF_GROWTH_ENC   4u /* growth saved from this one; RedisBloom's default before */
#define CFK_BF_OLD_GROWTH   2u
#define CFK_CMS_COUNTER     4u  /* bytes of a count-min counter */
#define CFK_TOPK_BUCKET     8u  /* bytes of a top-k bucket (fingerprint, count) */
#define CFK_TOPK_HEAP_ENTRY 24u /* bytes of a top-k heap entry as RedisBloom saves it */

typedef struct cfk_field {
    uint64_t bits; /* the integer (a signed one's bits), the double's, or the length */
    char *bytes;   /* a string's bytes (the server's allocation), else NULL */
    uint8_t kind;  /* CFK_OP_* */
} cfk_field;

typedef struct cfk_type cfk_type;

typedef struct cfk_value {
    const cfk_type *type;
    cfk_field *fields;
    size_t n, cap;
    size_t bytes; /* held: this, the field array and the strings, as the allocator counts */
} cfk_value;

typedef struct cfk_reader {
    cf_rm_io *io;
    cfk_value *v;
    bool bad; /* an I/O error, no memory, or a field RedisBloom would refuse */
} cfk_reader;

struct cfk_type {
    const char *name;     /* RedisBloom's type name */
    int encver;           /* the encoding RedisBloom writes */
    const char *what;     /* for the log */
    const char *commands; /* the commands a server that serves it has */
    void (*parse)(cfk_reader *r, int encver);
    bool logged; /* its first value loaded said so in the log */
};

static uint64_t cfk_crc_table[256];

/* ------------------------------------------------------------------------------------ */
/* Reading fields                                                                       */
/* ------------------------------------------------------------------------------------ */

static void cfk_push(cfk_reader *r, uint8_t kind, uint64_t bits, char *bytes)
{
    cfk_value *v = r->v;
    if (!r->bad && v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : CFK_FIRST_FIELDS;
        cfk_field *grown =
            cap <= SIZE_MAX / sizeof *grown ? cf_rm.TryAlloc(cap * sizeof *grown) : NULL;
        if (grown) {
            if (v->n)
                memcpy(grown, v->fields, v->n * sizeof *grown);
            cf_rm.Free(v->fields);
            v->fields = grown;
            v->cap = cap;
        } else {
            r->bad = true;
        }
    }
    if (r->bad) {
        if (bytes)
            cf_rm.Free(bytes);
        return;
    }
    v->fields[v->n++] = (cfk_field){.bits = bits, .bytes = bytes, .kind = kind};
}

static void cfk_io_check(cfk_reader *r)
{
    if (cf_rm.IsIOError(r->io))
        r->bad = true;
}

static uint64_t cfk_unsigned(cfk_reader *r)
{
    uint64_t x = r->bad ? 0 : cf_rm.LoadUnsigned(r->io);
    cfk_io_check(r);
    cfk_push(r, CFK_OP_UNSIGNED, x, NULL);
    return x;
}

static int64_t cfk_signed(cfk_reader *r)
{
    int64_t x = r->bad ? 0 : cf_rm.LoadSigned(r->io);
    cfk_io_check(r);
    cfk_push(r, CFK_OP_UNSIGNED, (uint64_t)x, NULL); /* the same bytes when saved */
    return x;
}

static double cfk_double(cfk_reader *r)
{
    double d = r->bad ? 0.0 : cf_rm.LoadDouble(r->io);
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits); /* kept as bits: a NaN's payload too */
    cfk_io_check(r);
    cfk_push(r, CFK_OP_DOUBLE, bits, NULL);
    return d;
}

/* A string field; its length (0 once anything failed). */
static size_t cfk_string(cfk_reader *r)
{
    size_t len = 0;
    char *p = r->bad ? NULL : cf_rm.LoadStringBuffer(r->io, &len);
    cfk_io_check(r);
    if (!p)
        r->bad = true;
    cfk_push(r, CFK_OP_STRING, len, p);
    return r->bad ? 0 : len;
}

/* A field RedisBloom fills in itself when it loads an older encoding, then saves. */
static void cfk_filled(cfk_reader *r, uint64_t x)
{
    cfk_push(r, CFK_OP_UNSIGNED, x, NULL);
}

static bool cfk_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a && b > UINT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

/* ------------------------------------------------------------------------------------ */
/* The four layouts                                                                     */
/* ------------------------------------------------------------------------------------ */

/* MBbloom--, a scalable Bloom filter. Encoding 4: its items, sub-filters n (at least 1),
 * options, growth; per sub-filter its entries, error rate (double), hashes, bits per
 * entry (double), bits, n2, bit array (a string of at least bits / 8 bytes, rounded up)
 * and items. Older encodings lack fields that RedisBloom fills as it loads them, and
 * saves: options 0 before encoding 2, growth 2 before 4, and in encoding 0 bits =
 * entries * bits per entry (truncated) and n2 = 0. */
static void cfk_parse_bloom(cfk_reader *r, int encver)
{
    (void)cfk_unsigned(r);
    uint64_t n = cfk_unsigned(r);
    if (n == 0)
        r->bad = true;
    if (encver >= (int)CFK_BF_OPTIONS_ENC)
        (void)cfk_unsigned(r);
    else
        cfk_filled(r, 0);
    if (encver >= (int)CFK_BF_GROWTH_ENC)
        (void)cfk_unsigned(r);
    else
        cfk_filled(r, CFK_BF_OLD_GROWTH);
    for (uint64_t i = 0; i < n && !r->bad; i++) {
        uint64_t entries = cfk_unsigned(r), bits;
        (void)cfk_double(r);
        (void)cfk_unsigned(r);
        double per_entry = cfk_double(r);
        if (encver == 0) {
            double b = (double)entries * per_entry;
            if (!(b >= 0.0 && b < 18446744073709551616.0)) { /* 2^64: representable */
                r->bad = true;
                break;
            }
            bits = (uint64_t)b;
            cfk_filled(r, bits);
            cfk_filled(r, 0);
        } else {
            bits = cfk_unsigned(r);
            (void)cfk_unsigned(r);
        }
        size_t len = cfk_string(r);
        if (len < bits / 8 + (bits % 8 != 0))
            r->bad = true;
        (void)cfk_unsigned(r);
    }
}

/* CMSk-TYPE, a count-min sketch: width and depth (neither 0), the count, and the
 * width * depth counters of 4 bytes as one string. */
static void cfk_parse_cms(cfk_reader *r, int encver)
{
    (void)encver;
    uint64_t width = cfk_unsigned(r), depth = cfk_unsigned(r), want = 0;
    (void)cfk_unsigned(r);
    if (width == 0 || depth == 0 || !cfk_mul(width, depth, &want) ||
        !cfk_mul(want, CFK_CMS_COUNTER, &want))
        r->bad = true;
    if (cfk_string(r) != want)
        r->bad = true;
}

/* TopK-TYPE: k, width, depth (32-bit, none 0), the decay (double), the width * depth
 * buckets of 8 bytes as one string, the k heap entries of 24 bytes as one, then k items,
 * each as RedisBloom saves it: its bytes and a NUL, or the NUL alone for an empty entry
 * (it keeps a 1-byte item as empty, and an item as far as its first NUL). */
static void cfk_parse_topk(cfk_reader *r, int encver)
{
    (void)encver;
    uint64_t k = cfk_unsigned(r), width = cfk_unsigned(r), depth = cfk_unsigned(r);
    (void)cfk_double(r);
    uint64_t data = 0, heap = 0;
    if (k == 0 || width == 0 || depth == 0 || k > UINT32_MAX || width > UINT32_MAX ||
        depth > UINT32_MAX || !cfk_mul(width * depth, CFK_TOPK_BUCKET, &data) ||
        !cfk_mul(k, CFK_TOPK_HEAP_ENTRY, &heap))
        r->bad = true;
    if (cfk_string(r) != data || cfk_string(r) != heap)
        r->bad = true;
    for (uint64_t i = 0; i < k && !r->bad; i++) {
        size_t len = cfk_string(r);
        if (r->bad)
            break;
        cfk_field *item = &r->v->fields[r->v->n - 1];
        size_t kept = len <= 1 ? 0 : strnlen(item->bytes, len);
        if (len == 0 || (len > 1 && kept == len)) { /* no NUL: RedisBloom reads past it */
            r->bad = true;
            break;
        }
        item->bytes[kept] = '\0';
        item->bits = kept + 1;
    }
}

/* TDIS-TYPE, a t-digest: compression, min, max (doubles); cap, merged nodes (0 to cap),
 * unmerged nodes, compressions (signed); merged and unmerged weights (doubles); then the
 * merged nodes' means, then their weights (doubles). */
static void cfk_parse_tdigest(cfk_reader *r, int encver)
{
    (void)encver;
    for (unsigned i = 0; i < 3; i++)
        (void)cfk_double(r);
    int64_t cap = cfk_signed(r), merged = cfk_signed(r);
    (void)cfk_signed(r);
    (void)cfk_signed(r);
    (void)cfk_double(r);
    (void)cfk_double(r);
    if (merged < 0 || merged > cap)
        r->bad = true;
    for (uint64_t i = 0; !r->bad && i < 2u * (uint64_t)merged; i++)
        (void)cfk_double(r);
}

static cfk_type cfk_types[] = {
    {"MBbloom--", 4, "Bloom filter", "BF.*", cfk_parse_bloom, false},
    {"CMSk-TYPE", 0, "count-min sketch", "CMS.*", cfk_parse_cms, false},
    {"TopK-TYPE", 0, "top-k", "TOPK.*", cfk_parse_topk, false},
    {"TDIS-TYPE", 0, "t-digest", "TDIGEST.*", cfk_parse_tdigest, false},
};
#define CFK_TYPES (sizeof cfk_types / sizeof cfk_types[0])

/* ------------------------------------------------------------------------------------ */
/* The type callbacks                                                                   */
/* ------------------------------------------------------------------------------------ */

static void cfk_free(void *value)
{
    cfk_value *v = value;
    for (size_t i = 0; i < v->n; i++)
        if (v->fields[i].bytes)
            cf_rm.Free(v->fields[i].bytes);
    if (v->fields)
        cf_rm.Free(v->fields);
    cf_rm.Free(v);
}

static void cfk_count_bytes(cfk_value *v)
{
    v->bytes = cf_rm.MallocSize(v) + (v->fields ? cf_rm.MallocSize(v->fields) : 0);
    for (size_t i = 0; i < v->n; i++)
        if (v->fields[i].bytes)
            v->bytes += cf_rm.MallocSize(v->fields[i].bytes);
}

static void *cfk_load(cf_rm_io *io, int encver, cfk_type *t)
{
    if (encver > t->encver) {
        cf_rm.LogIOError(io, "warning",
                         "RedisBloom %s of RDB encoding %d; this module reads up to %d", t->what,
                         encver, t->encver);
        return NULL;
    }
    cfk_value *v = cf_rm.TryAlloc(sizeof *v);
    if (!v)
        return NULL;
    *v = (cfk_value){.type = t};
    cfk_reader r = {.io = io, .v = v, .bad = false};
    t->parse(&r, encver);
    if (r.bad) {
        cfk_free(v);
        return NULL;
    }
    cfk_count_bytes(v);
    if (!t->logged) {
        t->logged = true;
        cf_rm.Log(cf_rm.GetContextFromIO(io), "notice",
                  "kept a RedisBloom %s (type %s) as it is: this module does not serve %s, but "
                  "saves, dumps and replicates such keys unchanged; move them to a server that "
                  "serves them (DUMP and RESTORE, or MIGRATE)",
                  t->what, t->name, t->commands);
    }
    return v;
}

/* One rdb_load per type: the server passes no type to it. */
#define CFK_LOADER(i)                                                                              \
    static void *cfk_load_##i(cf_rm_io *io, int encver)                                            \
    {                                                                                              \
        return cfk_load(io, encver, &cfk_types[i]);                                                \
    }
CFK_LOADER(0)
CFK_LOADER(1)
CFK_LOADER(2)
CFK_LOADER(3)
#undef CFK_LOADER
static void *(*const cfk_loaders[])(cf_rm_io *, int) = {cfk_load_0, cfk_load_1, cfk_load_2,
                                                        cfk_load_3};
_Static_assert(sizeof cfk_loaders / sizeof cfk_loaders[0] == CFK_TYPES, "a loader per type");

static void cfk_save(cf_rm_io *io, void *value)
{
    const cfk_value *v = value;
    for (size_t i = 0; i < v->n; i++) {
        const cfk_field *x = &v->fields[i];
        double d;
        switch (x->kind) {
        case CFK_OP_UNSIGNED:
            cf_rm.SaveUnsigned(io, x->bits);
            break;
        case CFK_OP_DOUBLE:
            memcpy(&d, &x->bits, sizeof d);
            cf_rm.SaveDouble(io, d);
            break;
        default:
            cf_rm.SaveStringBuffer(io, x->bytes, (size_t)x->bits);
            break;
        }
    }
}

static size_t cfk_mem_usage(const void *value)
{
    return ((const cfk_value *)value)->bytes;
}

static void cfk_digest(cf_rm_digest *md, void *value)
{
    const cfk_value *v = value;
    for (size_t i = 0; i < v->n; i++) {
        const cfk_field *x = &v->fields[i];
        cf_rm.DigestAddLongLong(md, x->kind);
        if (x->bytes)
            cf_rm.DigestAddStringBuffer(md, x->bytes, (size_t)x->bits);
        else
            cf_rm.DigestAddLongLong(md, (long long)x->bits);
    }
    cf_rm.DigestEndSequence(md);
}

static void *cfk_copy(cf_rm_string *from, cf_rm_string *to, const void *value)
{
    (void)from, (void)to;
    const cfk_value *v = value;
    cfk_value *c = cf_rm.TryAlloc(sizeof *c);
    if (!c)
        return NULL;
    *c = (cfk_value){.type = v->type};
    c->fields = v->n ? cf_rm.TryAlloc(v->n * sizeof *c->fields) : NULL;
    if (v->n && !c->fields) {
        cf_rm.Free(c);
        return NULL;
    }
    for (size_t i = 0; i < v->n; i++) {
        cfk_field x = v->fields[i];
        if (x.bytes) {
            char *p = cf_rm.TryAlloc(x.bits ? (size_t)x.bits : 1);
            if (!p) {
                cfk_free(c);
                return NULL;
            }
            memcpy(p, x.bytes, (size_t)x.bits);
            x.bytes = p;
        }
        c->fields[c->n++] = x;
    }
    c->cap = c->n;
    cfk_count_bytes(c);
    return c;
}

/* ------------------------------------------------------------------------------------ */
/* The AOF: a RESTORE of the value's DUMP payload                                       */
/* ------------------------------------------------------------------------------------ */

/* An RDB length: 6, 14, 32 or 64 bits after a prefix, big-endian. Bytes written. */
static size_t cfk_put_len(uint8_t *p, uint64_t x)
{
    if (x < 64u) {
        p[0] = (uint8_t)x;
        return 1;
    }
    if (x < 16384u) {
        p[0] = (uint8_t)(0x40u | (x >> 8));
        p[1] = (uint8_t)x;
        return 2;
    }
    unsigned width = x <= UINT32_MAX ? 4u : 8u;
    p[0] = width == 4u ? 0x80u : 0x81u;
    for (unsigned i = 0; i < width; i++)
        p[1 + i] = (uint8_t)(x >> (8u * (width - 1u - i)));
    return 1u + width;
}

static void cfk_put_le(uint8_t *p, uint64_t x, unsigned width)
{
    for (unsigned i = 0; i < width; i++)
        p[i] = (uint8_t)(x >> (8u * i));
}

static uint64_t cfk_module_id(const cfk_type *t)
{
    uint64_t id = 0;
    for (const char *c = t->name; *c; c++)
        id = (id << 6) | (uint64_t)(strchr(CFK_ID_CHARSET, *c) - CFK_ID_CHARSET);
    return (id << CFK_ID_ENC_BITS) | (uint64_t)t->encver;
}

static uint64_t cfk_crc64(const uint8_t *p, size_t len)
{
    uint64_t crc = 0;
    for (size_t i = 0; i < len; i++)
        crc = cfk_crc_table[(uint8_t)(crc ^ p[i])] ^ (crc >> 8);
    return crc;
}

/* The most bytes a field takes in a payload besides a string's bytes: its opcode, and a
 * length or a value of at most 9 bytes. */
#define CFK_FIELD_MAX 10u
/* The rest: the type byte, the module id (9 bytes), EOF, the version and the CRC. */
#define CFK_FRAME_MAX 21u

static void cfk_aof_rewrite(cf_rm_io *aof, cf_rm_string *key, void *value)
{
    const cfk_value *v = value;
    size_t size = CFK_FRAME_MAX;
    for (size_t i = 0; i < v->n; i++)
        size += CFK_FIELD_MAX + (v->fields[i].bytes ? (size_t)v->fields[i].bits : 0);
    uint8_t *buf = cf_rm.Alloc(size), *p = buf; /* as the server's own: no memory, no rewrite */
    *p++ = CFK_RDB_TYPE_MODULE_2;
    p += cfk_put_len(p, cfk_module_id(v->type));
    for (size_t i = 0; i < v->n; i++) {
        const cfk_field *x = &v->fields[i];
        p += cfk_put_len(p, x->kind);
        if (x->kind == CFK_OP_DOUBLE) {
            cfk_put_le(p, x->bits, 8);
            p += 8;
        } else {
            p += cfk_put_len(p, x->bits);
        }
        if (x->bytes) {
            memcpy(p, x->bytes, (size_t)x->bits);
            p += (size_t)x->bits;
        }
    }
    p += cfk_put_len(p, CFK_OP_EOF);
    cfk_put_le(p, CFK_RDB_VERSION, 2);
    p += 2;
    cfk_put_le(p, cfk_crc64(buf, (size_t)(p - buf)), 8);
    p += 8;
    cf_rm.EmitAOF(aof, "RESTORE", "slbc", key, 0LL, (const char *)buf, (size_t)(p - buf),
                  "REPLACE");
    cf_rm.Free(buf);
}

/* ------------------------------------------------------------------------------------ */
/* Registration                                                                         */
/* ------------------------------------------------------------------------------------ */

int cfk_register_types(cf_rm_ctx *ctx)
{
    for (unsigned i = 0; i < 256u; i++) {
        uint64_t crc = i;
        for (unsigned b = 0; b < 8u; b++)
            crc = (crc & 1u) ? (crc >> 1) ^ CFK_CRC64_POLY : crc >> 1;
        cfk_crc_table[i] = crc;
    }
    for (size_t i = 0; i < CFK_TYPES; i++) {
        cf_rm_type_methods methods = {
            .version = CF_RM_TYPE_METHOD_VERSION,
            .rdb_load = cfk_loaders[i],
            .rdb_save = cfk_save,
            .aof_rewrite = cfk_aof_rewrite,
            .mem_usage = cfk_mem_usage,
            .digest = cfk_digest,
            .free = cfk_free,
            .copy = cfk_copy,
        };
        if (!cf_rm.CreateDataType(ctx, cfk_types[i].name, cfk_types[i].encver, &methods)) {
            cf_rm.Log(ctx, "warning",
                      "RedisBloom's %s type %s is registered already, by another module: this "
                      "module cannot be loaded beside it",
                      cfk_types[i].what, cfk_types[i].name);
            return CF_RM_ERR;
        }
    }
    return CF_RM_OK;
}
