/*
 * fuzz_kvlog.c - cuckoo-kv's log recovery (examples/logstore) against a model.
 *
 * Input: a mode byte, 8 bytes of index seed, 2 bytes of damage parameter, then either
 * operations (mode bit 0 clear) or raw bytes to follow the log's header (bit 0 set).
 *   operation: type (bit 0: put or delete), key length - 1 (5 bits), value length (6
 *              bits), then the key and the value; each becomes a sealed record, as the
 *              store writes it.
 *   mode bits 1-2: damage to the end of the log: 0 none, 1 cut the last N bytes, 2 append
 *              N zero bytes, 3 flip one bit at a position; N and the position come from the
 *              damage parameter.
 *
 * What it checks (the store is opened from a fresh directory holding only the log):
 * - kv_open either refuses the log (KV_ECORRUPT) or opens it; refused or opened, the log
 *   is byte for byte what was written after every reading call, and the directory holds
 *   nothing else: reading never changes the log.
 * - Opened: the records it holds are a prefix of those written (of every one when there
 *   was no damage), it holds exactly the model's live keys and values after that prefix,
 *   and log_bytes + truncated is the file's size, torn_offset where the prefix ends.
 * - The first put keeps the tail's exact bytes in cuckoo-kv.log.torn-OFFSET, then cuts the
 *   log, and appends where the cut was; reopened, the store has no torn tail, the prefix's
 *   keys and the new one.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "fuzz_common.h"
#include "fuzz_target.h"

#include "kvstore.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define FZ_HEADER      32u /* the log's header */
#define FZ_REC_HEAD    16u
#define FZ_REC_TAIL    8u
#define FZ_MAX_RECORDS 64u /* per input: enough for every shape of log, and fast */
#define FZ_NEW_KEY     "\x01new key, longer than any input key"

typedef struct fz_op {
    bool put;
    const uint8_t *key, *value;
    size_t klen, vlen;
} fz_op;

static char fz_dir[64];

static void fz_put32(uint8_t *p, uint32_t v)
{
    for (unsigned i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Remove every file of the store's directory. */
static void fz_clean(void)
{
    DIR *d = opendir(fz_dir);
    FZ_REQUIRE(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

static size_t fz_dir_entries(void)
{
    DIR *d = opendir(fz_dir);
    FZ_REQUIRE(d != NULL);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void fz_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", fz_dir, name);
}

static void fz_write_file(const char *name, const uint8_t *p, size_t n)
{
    char path[128];
    fz_path(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    FZ_REQUIRE(f != NULL && fwrite(p, 1, n, f) == n && fclose(f) == 0);
}

/* Does the file begin with p[0 .. n), and is it `total` bytes long? */
static bool fz_file_starts(const char *name, const uint8_t *p, size_t n, size_t total)
{
    char path[128];
    fz_path(path, sizeof path, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    uint8_t *got = malloc(total + 1);
    FZ_REQUIRE(got != NULL);
    size_t r = fread(got, 1, total + 1, f);
    fclose(f);
    bool same = r == total && n <= total && memcmp(got, p, n) == 0;
    free(got);
    return same;
}

/* The file's bytes are p[0 .. n)? */
static bool fz_file_is(const char *name, const uint8_t *p, size_t n)
{
    return fz_file_starts(name, p, n, n);
}

/* The record of op at offset `off`, sealed as the store seals it, appended to buf. */
static size_t fz_record(uint8_t *buf, uint64_t off, const fz_op *op)
{
    size_t n = FZ_REC_HEAD + op->klen + op->vlen + FZ_REC_TAIL;
    memset(buf, 0, FZ_REC_HEAD);
    buf[0] = op->put ? 1 : 2;
    fz_put32(buf + 4, (uint32_t)op->klen);
    fz_put32(buf + 8, (uint32_t)op->vlen);
    fz_put32(buf + 12, (uint32_t)cf_hash_seeded(off, buf, 12));
    memcpy(buf + FZ_REC_HEAD, op->key, op->klen);
    if (op->vlen)
        memcpy(buf + FZ_REC_HEAD + op->klen, op->value, op->vlen);
    fz_put64(buf + n - FZ_REC_TAIL, cf_hash_seeded(off, buf, n - FZ_REC_TAIL));
    return n;
}

/* The live value of key after ops[0 .. upto): its op index, or -1. */
static long fz_live(const fz_op *ops, size_t upto, const uint8_t *key, size_t klen)
{
    long at = -1;
    for (size_t i = 0; i < upto; i++)
        if (ops[i].klen == klen && memcmp(ops[i].key, key, klen) == 0)
            at = ops[i].put ? (long)i : -1;
    return at;
}

typedef struct fz_visit {
    const fz_op *ops;
    size_t upto, seen;
} fz_visit;

static int fz_visit_key(void *ctx, const void *key, size_t klen, const void *value, size_t vlen)
{
    fz_visit *v = ctx;
    if (!v->ops) { /* raw logs have no model: only count */
        v->seen++;
        return 0;
    }
    long at = fz_live(v->ops, v->upto, key, klen);
    FZ_REQUIRE(at >= 0 && v->ops[at].vlen == vlen &&
               (vlen == 0 || memcmp(v->ops[at].value, value, vlen) == 0));
    v->seen++;
    return 0;
}

/* The store holds exactly the live keys of ops[0 .. upto). */
static void fz_check_content(kv_store *s, const fz_op *ops, size_t upto, bool raw)
{
    fz_visit v = {raw ? NULL : ops, upto, 0};
    FZ_REQUIRE(kv_foreach(s, fz_visit_key, &v) == KV_OK); /* every record read back */
    if (raw)
        return;
    size_t live = 0;
    for (size_t i = 0; i < upto; i++)
        live += ops[i].put && fz_live(ops, upto, ops[i].key, ops[i].klen) == (long)i;
    FZ_REQUIRE(v.seen == live);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    if (size < 11)
        return 0;
    if (!fz_dir[0]) {
        snprintf(fz_dir, sizeof fz_dir, "/tmp/fuzz_kvlog.XXXXXX");
        FZ_REQUIRE(mkdtemp(fz_dir) != NULL);
    }
    fz_clean();
    unsigned mode = in[0];
    uint64_t seed = fz_get64(in + 1);
    unsigned param = (unsigned)in[9] | (unsigned)in[10] << 8;
    const uint8_t *p = in + 11, *end = in + size;
    bool raw = mode & 1u;

    /* The log as a writer would leave it, and the offsets where its records end. */
    size_t cap = FZ_HEADER + (size_t)(end - p) * 2 + FZ_MAX_RECORDS * (FZ_REC_HEAD + FZ_REC_TAIL);
    uint8_t *log = calloc(1, cap + 65536);
    fz_op ops[FZ_MAX_RECORDS];
    uint64_t ends[FZ_MAX_RECORDS + 1];
    FZ_REQUIRE(log != NULL);
    memcpy(log, "CUCKOOKV", 8);
    fz_put32(log + 8, 1);
    fz_put64(log + 16, seed);
    fz_put64(log + 24, cf_hash_seeded(0, log, 24));
    size_t n = FZ_HEADER, nops = 0;
    ends[0] = n;
    if (raw) {
        memcpy(log + n, p, (size_t)(end - p));
        n += (size_t)(end - p);
    } else {
        while (nops < FZ_MAX_RECORDS && end - p >= 2) {
            fz_op op = {.put = !(p[0] & 1u), .klen = (size_t)(p[0] >> 1 & 31u) + 1};
            op.vlen = op.put ? (size_t)(p[1] & 63u) : 0;
            p += 2;
            if ((size_t)(end - p) < op.klen + op.vlen)
                break;
            op.key = p;
            op.value = p + op.klen;
            p += op.klen + op.vlen;
            n += fz_record(log + n, n, &op);
            ops[nops++] = op;
            ends[nops] = n;
        }
    }
    size_t whole = n; /* the undamaged log */
    switch (mode >> 1 & 3u) {
    case 1: /* cut */
        n -= n > FZ_HEADER ? param % (n - FZ_HEADER + 1) : 0;
        break;
    case 2: /* zeros after */
        n += param % 4096u;
        break;
    case 3: /* one bit */
        if (n > FZ_HEADER)
            log[FZ_HEADER + param / 8 % (n - FZ_HEADER)] ^= (uint8_t)(1u << (param % 8));
        break;
    default:
        break;
    }
    fz_write_file(KV_LOG_NAME, log, n);

    kv_store *s = NULL;
    char err[KV_ERROR_MAX];
    kv_options o = {.create = false};
    kv_status st = kv_open(fz_dir, &o, &s, err);
    FZ_REQUIRE(fz_file_is(KV_LOG_NAME, log, n) && fz_dir_entries() == 1);
    if (st != KV_OK) {
        FZ_REQUIRE(st == KV_ECORRUPT && s == NULL && err[0] != '\0');
        FZ_REQUIRE(raw || (mode >> 1 & 3u) != 0); /* an undamaged log always opens */
        free(log);
        return 0;
    }
    kv_stats t;
    kv_get_stats(s, &t);
    FZ_REQUIRE(t.log_bytes + t.truncated == n && t.log_bytes >= FZ_HEADER);
    FZ_REQUIRE(t.truncated == 0 || (t.torn_offset == t.log_bytes && !t.torn_kept));
    size_t upto = 0;
    if (!raw) {
        /* The store holds a prefix of the records written. */
        FZ_REQUIRE(t.records <= nops && ends[t.records] == t.log_bytes);
        upto = (size_t)t.records;
        if ((mode >> 1 & 3u) == 0 || ((mode >> 1 & 3u) == 2 && n >= whole))
            FZ_REQUIRE(upto == nops);
    }
    fz_check_content(s, ops, upto, raw);
    FZ_REQUIRE(fz_file_is(KV_LOG_NAME, log, n) && fz_dir_entries() == 1);

    /* The first write: the tail goes aside, then the log is cut and appended to. */
    uint64_t prefix = t.log_bytes, tail = t.truncated;
    FZ_REQUIRE(kv_put(s, FZ_NEW_KEY, sizeof FZ_NEW_KEY - 1, "v", 1) == KV_OK);
    kv_get_stats(s, &t);
    if (tail) {
        char name[KV_TORN_NAME_MAX];
        snprintf(name, sizeof name, KV_LOG_NAME ".torn-%llu", (unsigned long long)prefix);
        FZ_REQUIRE(t.torn_kept && strcmp(t.torn_name, name) == 0);
        FZ_REQUIRE(fz_file_is(name, log + prefix, (size_t)tail) && fz_dir_entries() == 2);
    } else {
        FZ_REQUIRE(!t.torn_kept && fz_dir_entries() == 1);
    }
    FZ_REQUIRE(kv_close(s) == KV_OK);
    FZ_REQUIRE(fz_file_starts(KV_LOG_NAME, log, (size_t)prefix, (size_t)t.log_bytes));
    s = NULL;
    FZ_REQUIRE(kv_open(fz_dir, &o, &s, err) == KV_OK);
    kv_get_stats(s, &t);
    FZ_REQUIRE(t.truncated == 0 && t.log_bytes > prefix);
    void *value = NULL;
    size_t vlen = 0;
    FZ_REQUIRE(kv_get(s, FZ_NEW_KEY, sizeof FZ_NEW_KEY - 1, &value, &vlen) == KV_OK && vlen == 1);
    free(value);
    if (!raw) {
        FZ_REQUIRE(t.records == upto + 1);
        FZ_REQUIRE(kv_del(s, FZ_NEW_KEY, sizeof FZ_NEW_KEY - 1) == KV_OK);
        fz_check_content(s, ops, upto, false);
    }
    FZ_REQUIRE(kv_close(s) == KV_OK);
    free(log);
    return 0;
}
