/*
 * test_kv.c - cuckoo-kv (examples/logstore) held to kvstore.h and README.md.
 *
 * 1. API edges: a missing store (KV_ENOSTORE) and a created one (its log is exactly the
 *    header README.md specifies); an odd index size (KV_EINVAL); sync_each; a second open
 *    of an open store (KV_EBUSY, in this process and in a child); empty, longest and too
 *    long keys; too long values; NULL arguments; kv_strerror and kv_error; a leftover
 *    KV_COMPACT_NAME removed by kv_open; kv_foreach's order (newest record last) and its
 *    early stop.
 * 2. Torn tails, for three kinds of last record (an overwrite, a new key, a delete): the
 *    store writes exactly the log README.md specifies, built here from the format; the
 *    log cut at every length inside its last record, the last record with any bit of its
 *    key, value or checksum flipped (it ends at the end of the file and fails its
 *    checksum) or with a good header whose lengths run past the end, and a good log
 *    followed by zero bytes, all open with the tail cut off (kv_stats.truncated, the
 *    file's size) and every earlier record intact, compact to exactly the live records,
 *    and take new records after the cut. A bit flipped anywhere in an earlier record (its
 *    lengths too) or in the last record's header, a record copied to the end of the log,
 *    a flipped bit in the log's header, or a log shorter than that header: refused with
 *    KV_ECORRUPT (naming the bad record's offset) and left as it was.
 * 3. Import and export: a file with repeated lines, an empty line, lines at, just over
 *    and far over KV_IMPORT_MAX_RECORD and no final newline comes back byte for byte;
 *    the result counts; records keyed by their XXH3-128; a deleted record is skipped on
 *    export and counted; an unknown manifest is KV_NOT_FOUND; no temporary file is left.
 * 4. Differential: 1M random puts (overwrites, empty values), gets, deletes and has calls
 *    on keys of 1..40 bytes (text and binary) against an exact model, from an index of 2
 *    buckets that must double many times. Every 100k operations: the stats against the
 *    model (records, live keys, log, live and dead bytes to the byte), close, reopen
 *    (alternately with 2 buckets and sized from the log), every key of the model read
 *    back; every third time a kv_compact first, whose log must be exactly the live
 *    records in their order. kv_foreach at the end: the model's keys, values and order.
 *
 * CF_TEST_SEED repeats a run; CF_TEST_SCALE scales the differential's size.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw, lstat, fork */
#include "kvstore.h"
#include "testutil.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------ */
/* The log format (README.md), rebuilt here so that no expectation comes from the code  */
/* under test                                                                           */
/* ------------------------------------------------------------------------------------ */

#define LOG_HEADER       32u /* magic, version, flags, seed, checksum */
#define LOG_VERSION      1u  /* the only version README.md defines */
#define REC_HEAD         16u /* type, 3 zero bytes, key length, value length, check */
#define REC_CHECK_AT     12u /* the header check, of the bytes before it */
#define REC_SUM          8u  /* the XXH3-64 that ends every record */
#define REC_PUT          1u  /* record types */
#define REC_DEL          2u
#define REC_KLEN_AT      4u   /* offset of the key length in a record */
#define REC_VLEN_AT      8u   /* offset of the value length in a record */
#define SLOTS_PER_BUCKET 4u   /* kv_stats.index_slots: "4 per bucket" */
#define SLOT_BYTES       8u   /* README.md: a 16-bit tag and a 48-bit offset */
#define HASH_HEX         33u  /* 32 hex digits of an XXH3-128 and a NUL */
#define PATH_CAP         512u /* paths under the temporary directory */
#define ARRAY_LEN(a)     (sizeof(a) / sizeof((a)[0]))

static char g_root[256]; /* the test's temporary directory, removed at the end */

static uint64_t rec_size(size_t klen, size_t vlen)
{
    return (uint64_t)REC_HEAD + klen + vlen + REC_SUM;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n == 0 ? 1 : n);
    if (p == NULL) {
        fprintf(stderr, "test_kv: out of memory\n");
        exit(2);
    }
    return p;
}

/* A growable byte string. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void by_add(bytes *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap == 0 ? 4096 : b->cap;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = xmalloc(cap);
        if (b->n > 0)
            memcpy(p, b->p, b->n);
        free(b->p);
        b->p = p;
        b->cap = cap;
    }
    if (n > 0)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void by_str(bytes *b, const char *s)
{
    by_add(b, s, strlen(s));
}

static void by_free(bytes *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (unsigned i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void log_header(bytes *b, uint64_t seed)
{
    uint8_t h[LOG_HEADER];
    memcpy(h, "CUCKOOKV", 8);
    put_le32(h + 8, LOG_VERSION);
    put_le32(h + 12, 0);
    cft_put64(h + 16, seed);
    cft_put64(h + 24, XXH3_64bits(h, 24));
    by_add(b, h, sizeof h);
}

/* The header check of the record header h at `offset`: the low 32 bits of XXH3-64. */
static void seal_head(uint8_t *h, uint64_t offset)
{
    put_le32(h + REC_CHECK_AT, (uint32_t)XXH3_64bits_withSeed(h, REC_CHECK_AT, offset));
}

static void log_record(bytes *b, unsigned type, const void *key, size_t klen, const void *val,
                       size_t vlen)
{
    size_t at = b->n;
    uint8_t h[REC_HEAD] = {(uint8_t)type};
    put_le32(h + REC_KLEN_AT, (uint32_t)klen);
    put_le32(h + REC_VLEN_AT, (uint32_t)vlen);
    seal_head(h, at);
    by_add(b, h, sizeof h);
    by_add(b, key, klen);
    by_add(b, val, vlen);
    uint8_t sum[REC_SUM];
    cft_put64(sum, XXH3_64bits_withSeed(b->p + at, REC_HEAD + klen + vlen, (uint64_t)at));
    by_add(b, sum, sizeof sum);
}

/* ------------------------------------------------------------------------------------ */
/* Files                                                                                */
/* ------------------------------------------------------------------------------------ */

static void path_in(char *out, const char *dir, const char *name)
{
    int n = snprintf(out, PATH_CAP, "%s/%s", dir, name);
    if (n < 0 || n >= (int)PATH_CAP) {
        fprintf(stderr, "test_kv: path too long: %s/%s\n", dir, name);
        exit(2);
    }
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static bool write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* The whole file in a new buffer (NULL if it cannot be read). */
static uint8_t *read_file(const char *path, size_t *n)
{
    *n = 0;
    int64_t size = file_size(path);
    FILE *f = size < 0 ? NULL : fopen(path, "rb");
    if (f == NULL)
        return NULL;
    uint8_t *p = xmalloc((size_t)size);
    bool ok = fread(p, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok) {
        free(p);
        return NULL;
    }
    *n = (size_t)size;
    return p;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_tree(const char *path)
{
    if (exists(path))
        (void)nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Entries of a directory, but . and .. (-1 if it cannot be read). */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static size_t first_difference(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    size_t n = an < bn ? an : bn, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* The file at path holds exactly want[0..n). */
static void check_file_is(const char *path, const uint8_t *want, size_t n, const char *what)
{
    size_t got_n = 0;
    uint8_t *got = read_file(path, &got_n);
    size_t at = got == NULL ? 0 : first_difference(got, got_n, want, n);
    CHECK_MSG(got != NULL && got_n == n && at == n,
              "%s (%s): %zu bytes, want %zu; first difference at byte %zu", what, path, got_n, n,
              at);
    free(got);
}

/* ------------------------------------------------------------------------------------ */
/* Store helpers                                                                        */
/* ------------------------------------------------------------------------------------ */

static const char *kv_name(kv_status st)
{
    switch (st) {
    case KV_OK:
        return "KV_OK";
    case KV_NOT_FOUND:
        return "KV_NOT_FOUND";
    case KV_EINVAL:
        return "KV_EINVAL";
    case KV_ENOMEM:
        return "KV_ENOMEM";
    case KV_EIO:
        return "KV_EIO";
    case KV_ECORRUPT:
        return "KV_ECORRUPT";
    case KV_EBUSY:
        return "KV_EBUSY";
    case KV_ENOSTORE:
        return "KV_ENOSTORE";
    case KV_EFULL:
        return "KV_EFULL";
    }
    return "(not a kv_status)";
}

static bool check_kv(kv_status got, kv_status want, const char *file, int line, const char *expr)
{
    return cft_check_msg(got == want, file, line, expr, "got %s, want %s", kv_name(got),
                         kv_name(want));
}

#define CHECK_KV(got, want) check_kv((got), (want), __FILE__, __LINE__, #got " == " #want)

static kv_store *open_store(const char *dir, bool create, uint64_t seed, uint64_t buckets)
{
    kv_options o = {.create = create, .seed = seed, .buckets = buckets};
    kv_store *s = NULL;
    char err[KV_ERROR_MAX] = "";
    kv_status st = kv_open(dir, &o, &s, err);
    if (!CHECK_MSG(st == KV_OK && s != NULL, "kv_open(%s): %s: %s", dir, kv_name(st), err))
        return NULL;
    return s;
}

/* A message is there (kv_error, kv_strerror, err). */
static bool nonempty(const char *m)
{
    return m != NULL && m[0] != '\0';
}

static kv_stats stats_of(const kv_store *s)
{
    kv_stats st;
    memset(&st, 0, sizeof st);
    kv_get_stats(s, &st);
    return st;
}

/* kv_get's answer is want[0..wlen), followed by a NUL. */
static bool value_is(const void *got, size_t glen, const void *want, size_t wlen)
{
    return got != NULL && glen == wlen && (wlen == 0 || memcmp(got, want, wlen) == 0) &&
           ((const char *)got)[glen] == '\0';
}

/* The key holds want[0..wlen) (want NULL: the key is absent), through kv_get and kv_has. */
static bool holds(kv_store *s, const void *key, size_t klen, const void *want, size_t wlen)
{
    void *v = NULL;
    size_t vlen = 0;
    kv_status st = kv_get(s, key, klen, &v, &vlen);
    bool ok = want == NULL ? st == KV_NOT_FOUND : st == KV_OK && value_is(v, vlen, want, wlen);
    free(v);
    return ok && kv_has(s, key, klen) == (want == NULL ? KV_NOT_FOUND : KV_OK);
}

static void hash_hex(char out[HASH_HEX], const void *p, size_t n)
{
    XXH128_hash_t h = XXH3_128bits(p, n);
    snprintf(out, HASH_HEX, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
}

/* ------------------------------------------------------------------------------------ */
/* 1. API edges                                                                         */
/* ------------------------------------------------------------------------------------ */

#define ORDER_KEYS 10u /* kv_foreach order: enough keys for an overwrite and a delete inside */
#define STOP_AFTER 3u  /* kv_foreach early stop: fewer than the keys there are */

typedef struct {
    int order[ORDER_KEYS + 1]; /* key numbers in the order visited */
    unsigned visits;
    unsigned stop_after; /* 0 = never stop */
    bool bad;            /* a key or value that is not one of ours */
} order_walk;

static int order_visit(void *ctx, const void *key, size_t klen, const void *value, size_t vlen)
{
    order_walk *w = ctx;
    char k[16], v[16];
    unsigned i = w->visits++;
    int num = -1;
    /* Keys are "key<n>", values "value<n>". */
    for (int j = 0; j < (int)ORDER_KEYS; j++) {
        snprintf(k, sizeof k, "key%d", j);
        if (klen == strlen(k) && memcmp(key, k, klen) == 0)
            num = j;
    }
    if (num >= 0)
        snprintf(v, sizeof v, "value%d", num);
    if (num < 0 || vlen != strlen(v) || memcmp(value, v, vlen) != 0)
        w->bad = true;
    if (i < ARRAY_LEN(w->order))
        w->order[i] = num;
    return w->stop_after != 0 && w->visits >= w->stop_after;
}

static void test_foreach_order(uint64_t seed)
{
    cft_context("api: kv_foreach");
    char dir[PATH_CAP], k[16], v[16];
    path_in(dir, g_root, "order");
    kv_store *s = open_store(dir, true, seed, 0);
    if (s == NULL)
        return;
    for (int i = 0; i < (int)ORDER_KEYS; i++) {
        snprintf(k, sizeof k, "key%d", i);
        snprintf(v, sizeof v, "value%d", i);
        CHECK_KV(kv_put(s, k, strlen(k), v, strlen(v)), KV_OK);
    }
    /* key2 rewritten moves to the end; key5 deleted is not visited. */
    CHECK_KV(kv_put(s, "key2", 4, "value2", 6), KV_OK);
    CHECK_KV(kv_del(s, "key5", 4), KV_OK);
    static const int want[] = {0, 1, 3, 4, 6, 7, 8, 9, 2};
    order_walk w;
    memset(&w, 0, sizeof w);
    CHECK_KV(kv_foreach(s, order_visit, &w), KV_OK);
    CHECK_EQ_U(w.visits, ARRAY_LEN(want));
    CHECK(!w.bad);
    for (size_t i = 0; i < ARRAY_LEN(want) && i < w.visits; i++)
        CHECK_MSG(w.order[i] == want[i], "visit %zu: key%d, want key%d", i, w.order[i], want[i]);

    memset(&w, 0, sizeof w);
    w.stop_after = STOP_AFTER;
    CHECK_KV(kv_foreach(s, order_visit, &w), KV_OK);
    CHECK_EQ_U(w.visits, STOP_AFTER);
    CHECK_KV(kv_close(s), KV_OK);
}

static void test_create_and_open(uint64_t seed)
{
    char dir[PATH_CAP], log[PATH_CAP], err[KV_ERROR_MAX];
    kv_store *s = NULL;
    kv_options plain = {.seed = seed};

    cft_context("api: a missing store");
    path_in(dir, g_root, "missing");
    path_in(log, dir, KV_LOG_NAME);
    err[0] = '\0';
    CHECK_KV(kv_open(dir, &plain, &s, err), KV_ENOSTORE);
    CHECK(nonempty(err));
    CHECK_KV(kv_open(dir, NULL, &s, NULL), KV_ENOSTORE);
    CHECK_MSG(!exists(dir), "a failed kv_open without create made %s", dir);
    /* An empty directory is no store either. */
    CHECK(mkdir(dir, 0700) == 0);
    CHECK_KV(kv_open(dir, NULL, &s, err), KV_ENOSTORE);
    CHECK(!exists(log));

    cft_context("api: a new store");
    path_in(dir, g_root, "new");
    path_in(log, dir, KV_LOG_NAME);
    kv_options odd = {.create = true, .seed = seed, .buckets = 3};
    CHECK_KV(kv_open(dir, &odd, &s, err), KV_EINVAL); /* kv_options.buckets must be even */
    CHECK(nonempty(err));
    s = open_store(dir, true, seed, 0);
    if (s == NULL)
        return;
    CHECK_MSG(kv_error(s) != NULL && kv_error(s)[0] == '\0', "no call failed yet");
    kv_stats st = stats_of(s);
    CHECK_EQ_U(st.records, 0);
    CHECK_EQ_U(st.live_keys, 0);
    CHECK_EQ_U(st.log_bytes, LOG_HEADER);
    CHECK_EQ_U(st.live_bytes, 0);
    CHECK_EQ_U(st.dead_bytes, 0);
    CHECK_EQ_U(st.truncated, 0);
    CHECK(st.bytes_per_key == 0.0);
    CHECK_KV(kv_close(s), KV_OK);
    bytes want = {0};
    log_header(&want, seed);
    check_file_is(log, want.p, want.n, "a new store's log");
    by_free(&want);
    /* Opened again without create, and empty; records synced one by one. */
    kv_options each = {.sync_each = true};
    err[0] = '\0';
    CHECK_KV(kv_open(dir, &each, &s, err), KV_OK);
    if (s != NULL) {
        CHECK_EQ_U(stats_of(s).live_keys, 0);
        CHECK(holds(s, "a", 1, NULL, 0));
        CHECK_KV(kv_put(s, "a", 1, "synced", 6), KV_OK);
        CHECK_KV(kv_del(s, "a", 1), KV_OK);
        CHECK_KV(kv_put(s, "b", 1, "synced", 6), KV_OK);
        CHECK_KV(kv_close(s), KV_OK);
    }
    s = open_store(dir, false, 0, 0);
    if (s != NULL) {
        CHECK(holds(s, "a", 1, NULL, 0));
        CHECK(holds(s, "b", 1, "synced", 6));
        CHECK_EQ_U(stats_of(s).records, 3);
        CHECK_KV(kv_close(s), KV_OK);
    }
}

static void test_busy(const char *dir)
{
    cft_context("api: one process at a time");
    kv_store *s = open_store(dir, false, 0, 0);
    if (s == NULL)
        return;
    kv_store *other = NULL;
    char err[KV_ERROR_MAX] = "";
    kv_status st = kv_open(dir, NULL, &other, err);
    CHECK_KV(st, KV_EBUSY);
    CHECK(nonempty(err));
    if (st == KV_OK)
        kv_close(other);

    /* From another process, which is what the lock is for. */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        kv_store *c = NULL;
        kv_status cst = kv_open(dir, NULL, &c, NULL);
        if (cst == KV_OK)
            kv_close(c);
        _exit((int)cst);
    }
    int ws = 0;
    CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid);
    CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == (int)KV_EBUSY,
              "kv_open in a child process: status %d, want %d (KV_EBUSY)",
              WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, (int)KV_EBUSY);

    /* The first store is unharmed, and once it is closed the store opens again. */
    CHECK_KV(kv_put(s, "busy", 4, "yes", 3), KV_OK);
    CHECK_KV(kv_close(s), KV_OK);
    s = open_store(dir, false, 0, 0);
    if (s != NULL) {
        CHECK(holds(s, "busy", 4, "yes", 3));
        CHECK_KV(kv_close(s), KV_OK);
    }
}

/* A key of n bytes; the same bytes every time. */
static uint8_t *long_key(size_t n)
{
    uint8_t *k = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        k[i] = (uint8_t)(i * 7 + 1);
    return k;
}

static void test_limits(kv_store *s)
{
    cft_context("api: keys and values at and over their limits");
    uint8_t *big = long_key(KV_MAX_KEY + 1);
    uint64_t records = stats_of(s).records;
    const char small[] = "v";

    CHECK_KV(kv_put(s, "", 0, "x", 1), KV_EINVAL);
    CHECK(nonempty(kv_error(s)));
    CHECK_KV(kv_put(s, big, KV_MAX_KEY + 1, "x", 1), KV_EINVAL);
    CHECK(nonempty(kv_error(s)));
    /* Refused before the value is touched: only its first byte exists. */
    CHECK_KV(kv_put(s, "k", 1, small, KV_MAX_VALUE + 1), KV_EINVAL);
    void *v = NULL;
    size_t vlen = 0;
    CHECK_KV(kv_get(s, "", 0, &v, &vlen), KV_EINVAL);
    CHECK_KV(kv_get(s, big, KV_MAX_KEY + 1, &v, &vlen), KV_EINVAL);
    CHECK_KV(kv_has(s, "", 0), KV_EINVAL);
    CHECK_KV(kv_has(s, big, KV_MAX_KEY + 1), KV_EINVAL);
    CHECK_KV(kv_del(s, "", 0), KV_EINVAL);
    CHECK_KV(kv_del(s, big, KV_MAX_KEY + 1), KV_EINVAL);
    CHECK_EQ_U(stats_of(s).records, records);

    /* The longest key works, an empty value too, and both survive a reopen. */
    CHECK_KV(kv_put(s, big, KV_MAX_KEY, "longest", 7), KV_OK);
    CHECK_KV(kv_put(s, "empty", 5, small, 0), KV_OK);
    CHECK(holds(s, big, KV_MAX_KEY, "longest", 7));
    CHECK(holds(s, "empty", 5, "", 0));
    /* A key one byte shorter is another key. */
    CHECK(holds(s, big, KV_MAX_KEY - 1, NULL, 0));
    CHECK_EQ_U(stats_of(s).records, records + 2);
    free(big);
}

static void test_null_arguments(kv_store *s, const char *dir)
{
    cft_context("api: NULL arguments");
    kv_store *t = NULL;
    void *v = NULL;
    size_t vlen = 0;
    order_walk w;
    memset(&w, 0, sizeof w);
    kv_import_result ir;
    kv_export_result er;
    char path[PATH_CAP];
    path_in(path, g_root, "never-written");
    uint64_t records = stats_of(s).records;

    CHECK_KV(kv_open(NULL, NULL, &t, NULL), KV_EINVAL);
    CHECK_KV(kv_open(dir, NULL, NULL, NULL), KV_EINVAL);
    CHECK_KV(kv_put(NULL, "a", 1, "b", 1), KV_EINVAL);
    CHECK_KV(kv_put(s, NULL, 1, "b", 1), KV_EINVAL);
    CHECK_KV(kv_put(s, "a", 1, NULL, 1), KV_EINVAL);
    CHECK_KV(kv_get(NULL, "a", 1, &v, &vlen), KV_EINVAL);
    CHECK_KV(kv_get(s, NULL, 1, &v, &vlen), KV_EINVAL);
    CHECK_KV(kv_get(s, "a", 1, NULL, &vlen), KV_EINVAL);
    CHECK_KV(kv_get(s, "a", 1, &v, NULL), KV_EINVAL);
    CHECK_KV(kv_has(NULL, "a", 1), KV_EINVAL);
    CHECK_KV(kv_has(s, NULL, 1), KV_EINVAL);
    CHECK_KV(kv_del(NULL, "a", 1), KV_EINVAL);
    CHECK_KV(kv_del(s, NULL, 1), KV_EINVAL);
    CHECK_KV(kv_foreach(NULL, order_visit, &w), KV_EINVAL);
    CHECK_KV(kv_foreach(s, NULL, &w), KV_EINVAL);
    CHECK_KV(kv_sync(NULL), KV_EINVAL);
    CHECK_KV(kv_compact(NULL), KV_EINVAL);
    CHECK_KV(kv_import(NULL, path, NULL, &ir), KV_EINVAL);
    CHECK_KV(kv_import(s, NULL, NULL, &ir), KV_EINVAL);
    CHECK_KV(kv_export(NULL, path, NULL, &er), KV_EINVAL);
    CHECK_KV(kv_export(s, NULL, NULL, &er), KV_EINVAL);
    CHECK_KV(kv_close(NULL), KV_OK);
    CHECK(!exists(path));
    CHECK_EQ_U(stats_of(s).records, records);
    CHECK_EQ_U(w.visits, 0);
}

static void test_strerror(void)
{
    cft_context("api: kv_strerror");
    static const kv_status all[] = {KV_OK,       KV_NOT_FOUND, KV_EINVAL,   KV_ENOMEM, KV_EIO,
                                    KV_ECORRUPT, KV_EBUSY,     KV_ENOSTORE, KV_EFULL};
    for (size_t i = 0; i < ARRAY_LEN(all); i++) {
        const char *m = kv_strerror(all[i]);
        if (!CHECK_MSG(nonempty(m), "kv_strerror(%s)", kv_name(all[i])))
            continue;
        for (size_t j = 0; j < i; j++) {
            const char *o = kv_strerror(all[j]);
            CHECK_MSG(o == NULL || strcmp(m, o) != 0, "%s and %s are both \"%s\"", kv_name(all[i]),
                      kv_name(all[j]), m);
        }
    }
    const char *m = kv_strerror((kv_status)99);
    CHECK(nonempty(m));
}

static void test_leftover_compact_file(const char *dir)
{
    cft_context("api: a leftover %s", KV_COMPACT_NAME);
    char tmp[PATH_CAP];
    path_in(tmp, dir, KV_COMPACT_NAME);
    static const char junk[] = "half a compacted log, left by a crash";
    CHECK(write_file(tmp, junk, sizeof junk));
    kv_store *s = open_store(dir, false, 0, 0);
    CHECK_MSG(!exists(tmp), "kv_open left %s in place", tmp);
    if (s != NULL) {
        CHECK(holds(s, "busy", 4, "yes", 3));
        CHECK(holds(s, "empty", 5, "", 0));
        CHECK_KV(kv_close(s), KV_OK);
    }
}

static void test_api(void)
{
    uint64_t seed = cft_subseed(10) | 1; /* nonzero: 0 asks the store for a random seed */
    test_create_and_open(seed);
    test_strerror();
    char dir[PATH_CAP];
    path_in(dir, g_root, "api");
    cft_context("api: opening the store of the limit tests");
    kv_store *s = open_store(dir, true, seed, 0);
    if (s == NULL)
        return;
    test_limits(s);
    test_null_arguments(s, dir);
    CHECK_KV(kv_sync(s), KV_OK);
    CHECK_KV(kv_close(s), KV_OK);

    /* The longest key was read back from the log by the scan. */
    cft_context("api: reopened");
    s = open_store(dir, false, 0, 0);
    if (s != NULL) {
        uint8_t *big = long_key(KV_MAX_KEY);
        CHECK(holds(s, big, KV_MAX_KEY, "longest", 7));
        CHECK_KV(kv_del(s, big, KV_MAX_KEY), KV_OK);
        CHECK(holds(s, big, KV_MAX_KEY, NULL, 0));
        CHECK_KV(kv_del(s, big, KV_MAX_KEY), KV_NOT_FOUND);
        free(big);
        CHECK_KV(kv_close(s), KV_OK);
    }
    test_busy(dir);
    test_leftover_compact_file(dir);
    test_foreach_order(seed);
}

/* ------------------------------------------------------------------------------------ */
/* 2. Torn tails and damage                                                             */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    unsigned type;
    const char *key;
    size_t klen;
    const char *val;
    size_t vlen;
} script_op;

#define LIT(s) s, sizeof(s) - 1

/* Every record of a torn-tail log but the last: text and binary keys, an empty value,
 * an overwrite and a delete. */
static const script_op torn_prefix[] = {
    {REC_PUT, LIT("alpha"), LIT("one")},
    {REC_PUT, LIT("beta"), LIT("")},
    {REC_PUT, LIT("\0\xff\nkey"), LIT("binary \0 value\r\n with a NUL")},
    {REC_DEL, LIT("beta"), LIT("")},
    {REC_PUT, LIT("alpha"), LIT("two, longer than one")},
};

/* The last record, torn: an overwrite, a new key, a delete. */
static const script_op torn_last[] = {
    {REC_PUT, LIT("alpha"), LIT("three: what a torn write must not leave behind")},
    {REC_PUT, LIT("gamma, new in the last record"), LIT("\x01\x02\x03 value")},
    {REC_DEL, LIT("alpha"), LIT("")},
};

#define TORN_OPS (ARRAY_LEN(torn_prefix) + 1)

/* What the first `applied` ops leave under key: the put that set it, or NULL. */
static const script_op *script_value(const script_op *ops, size_t applied, const char *key,
                                     size_t klen)
{
    const script_op *v = NULL;
    for (size_t j = 0; j < applied; j++)
        if (ops[j].klen == klen && memcmp(ops[j].key, key, klen) == 0)
            v = ops[j].type == REC_PUT ? &ops[j] : NULL;
    return v;
}

/* Every key the script names holds what the first `applied` ops left. */
static void check_script_state(kv_store *s, const script_op *ops, size_t n, size_t applied)
{
    for (size_t j = 0; j < n; j++) {
        const script_op *v = script_value(ops, applied, ops[j].key, ops[j].klen);
        CHECK_MSG(
            holds(s, ops[j].key, ops[j].klen, v == NULL ? NULL : v->val, v == NULL ? 0 : v->vlen),
            "the key of op %zu after the first %zu ops: want %s", j, applied,
            v == NULL ? "absent" : "its value");
    }
}

static void build_script_log(bytes *b, uint64_t seed, const script_op *ops, size_t n,
                             uint64_t *ends)
{
    log_header(b, seed);
    for (size_t j = 0; j < n; j++) {
        log_record(b, ops[j].type, ops[j].key, ops[j].klen, ops[j].val, ops[j].vlen);
        ends[j] = b->n;
    }
}

/* A fresh store directory holding p[0..n) as its log. */
static bool plant_log(const char *dir, const uint8_t *p, size_t n)
{
    char log[PATH_CAP];
    rm_tree(dir);
    path_in(log, dir, KV_LOG_NAME);
    return CHECK(mkdir(dir, 0700) == 0) && CHECK(write_file(log, p, n));
}

/* A torn-tail log's script: its ops and the seed in its header. */
typedef struct {
    const script_op *ops;
    size_t n;
    uint64_t seed;
} script;

/* The log kv_compact makes of the first `applied` ops: one put per live key, in the
 * order of their newest puts; *live gets their number. */
static void build_compacted_log(bytes *b, const script *sc, size_t applied, uint64_t *live)
{
    *live = 0;
    log_header(b, sc->seed);
    for (size_t j = 0; j < applied; j++) {
        const script_op *op = &sc->ops[j];
        if (script_value(sc->ops, applied, op->key, op->klen) == op) {
            log_record(b, REC_PUT, op->key, op->klen, op->val, op->vlen);
            (*live)++;
        }
    }
}

/* The log p[0..n) opens with the tail from `keep` on left out, the first `applied` ops of
 * the script intact, and reading changes nothing in the directory; the first write (with
 * `compact`, a kv_compact; else a put) first moves the tail's exact bytes to
 * KV_LOG_NAME.torn-KEEP, then cuts the log there, and the new record goes where the cut
 * was. kv_stats.truncated keeps telling what kv_open found. */
static void check_recovers(const char *dir, const uint8_t *p, size_t n, uint64_t keep,
                           const script *sc, size_t applied, bool compact)
{
    char log[PATH_CAP], torn[PATH_CAP], torn_name[KV_TORN_NAME_MAX], err[KV_ERROR_MAX] = "";
    path_in(log, dir, KV_LOG_NAME);
    snprintf(torn_name, sizeof torn_name, KV_LOG_NAME ".torn-%llu", (unsigned long long)keep);
    path_in(torn, dir, torn_name);
    unlink(torn);
    if (!plant_log(dir, p, n))
        return;
    kv_store *s = NULL;
    kv_status st = kv_open(dir, NULL, &s, err);
    if (!CHECK_MSG(st == KV_OK && s != NULL, "%s: %s", kv_name(st), err))
        return;
    kv_stats ks = stats_of(s);
    CHECK_EQ_U(ks.truncated, n - keep);
    CHECK_EQ_U(ks.torn_offset, n > keep ? keep : 0);
    CHECK(!ks.torn_kept && ks.torn_name[0] == '\0');
    CHECK_EQ_U(ks.records, applied);
    CHECK_EQ_U(ks.log_bytes, keep);
    check_script_state(s, sc->ops, sc->n, applied);
    /* Reads left the log, tail and all, as it was, and made no file. */
    check_file_is(log, p, n, "a torn log after reads");
    CHECK(access(torn, F_OK) != 0);

    uint64_t records = applied;
    if (compact) {
        bytes want = {0};
        build_compacted_log(&want, sc, applied, &records);
        CHECK_KV(kv_compact(s), KV_OK);
        check_file_is(log, want.p, want.n, "a compacted log");
        ks = stats_of(s);
        CHECK_EQ_U(ks.truncated, n - keep);
        CHECK_EQ_U(ks.records, records);
        CHECK_EQ_U(ks.dead_bytes, 0);
        check_script_state(s, sc->ops, sc->n, applied);
        keep = want.n;
        by_free(&want);
    }

    static const char after[] = "after the cut";
    CHECK_KV(kv_put(s, LIT(after), LIT("new")), KV_OK);
    ks = stats_of(s);
    if (ks.truncated) {
        CHECK(ks.torn_kept && strcmp(ks.torn_name, torn_name) == 0);
        check_file_is(torn, p + (n - ks.truncated), (size_t)ks.truncated, "the torn tail kept");
    } else {
        CHECK(!ks.torn_kept && access(torn, F_OK) != 0);
    }
    CHECK_KV(kv_close(s), KV_OK);
    CHECK_EQ_I(file_size(log), (int64_t)(keep + rec_size(sizeof after - 1, 3)));
    s = open_store(dir, false, 0, 0);
    unlink(torn);
    if (s == NULL)
        return;
    ks = stats_of(s);
    CHECK_EQ_U(ks.truncated, 0);
    CHECK_EQ_U(ks.records, records + 1);
    check_script_state(s, sc->ops, sc->n, applied);
    CHECK(holds(s, LIT(after), LIT("new")));
    CHECK_KV(kv_close(s), KV_OK);
}

/* The log p[0..n) is refused as damaged, naming `offset` (UINT64_MAX: no offset to name),
 * and left as it was. */
static void check_refused(const char *dir, const uint8_t *p, size_t n, uint64_t offset)
{
    char log[PATH_CAP], err[KV_ERROR_MAX] = "";
    path_in(log, dir, KV_LOG_NAME);
    if (!plant_log(dir, p, n))
        return;
    kv_store *s = NULL;
    kv_status st = kv_open(dir, NULL, &s, err);
    if (!CHECK_KV(st, KV_ECORRUPT)) {
        if (st == KV_OK)
            kv_close(s);
    } else if (CHECK(nonempty(err)) && offset != UINT64_MAX) {
        char dec[24], hex[24];
        snprintf(dec, sizeof dec, "%llu", (unsigned long long)offset);
        snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)offset);
        CHECK_MSG(strstr(err, dec) != NULL || strstr(err, hex) != NULL,
                  "the message \"%s\" does not name offset %s", err, dec);
    }
    check_file_is(log, p, n, "a refused log");
}

#define ZERO_TAILS_MAX 4096u /* the longest run of trailing zero bytes tried */

static void torn_scenario(size_t kind, uint64_t seed)
{
    script_op ops[TORN_OPS];
    memcpy(ops, torn_prefix, sizeof torn_prefix);
    ops[TORN_OPS - 1] = torn_last[kind];
    const script_op *last = &ops[TORN_OPS - 1];
    const script sc = {ops, TORN_OPS, seed};

    char dir[PATH_CAP], name[32], log[PATH_CAP], copy[PATH_CAP];
    snprintf(name, sizeof name, "torn%zu", kind);
    path_in(dir, g_root, name);
    path_in(log, dir, KV_LOG_NAME);
    path_in(copy, g_root, "torn-copy");

    cft_context("torn tails, scenario %zu: writing", kind);
    kv_store *s = open_store(dir, true, seed, 0);
    if (s == NULL)
        return;
    for (size_t j = 0; j < TORN_OPS; j++)
        CHECK_KV(ops[j].type == REC_PUT
                     ? kv_put(s, ops[j].key, ops[j].klen, ops[j].val, ops[j].vlen)
                     : kv_del(s, ops[j].key, ops[j].klen),
                 KV_OK);
    CHECK_KV(kv_close(s), KV_OK);

    bytes good = {0};
    uint64_t ends[TORN_OPS];
    build_script_log(&good, seed, ops, TORN_OPS, ends);
    check_file_is(log, good.p, good.n, "the log as README.md specifies it");
    const uint64_t prev = ends[TORN_OPS - 2], end = ends[TORN_OPS - 1];

    /* Cut at every length inside the last record (at its start, nothing is torn). */
    for (uint64_t len = prev; len < end; len++) {
        cft_context("torn tails, scenario %zu: log cut to %llu of %llu bytes", kind,
                    (unsigned long long)len, (unsigned long long)end);
        check_recovers(copy, good.p, (size_t)len, prev, &sc, TORN_OPS - 1, len == prev + 1);
    }

    /* A good log followed by zero bytes. */
    static const size_t zeros[] = {1, 7, REC_HEAD, 20, 75, ZERO_TAILS_MAX};
    uint8_t *buf = xmalloc(good.n + ZERO_TAILS_MAX);
    memcpy(buf, good.p, good.n);
    memset(buf + good.n, 0, ZERO_TAILS_MAX);
    for (size_t z = 0; z < ARRAY_LEN(zeros); z++) {
        cft_context("torn tails, scenario %zu: %zu zero bytes after the log", kind, zeros[z]);
        check_recovers(copy, buf, good.n + zeros[z], good.n, &sc, TORN_OPS, z == 0);
    }

    /* The last record, with a good header, ending at the end of the file but failing its
     * checksum: torn. Its header damaged: refused (the header check tells a damaged
     * length from a record cut short). */
    for (uint64_t at = prev; at < end; at++)
        for (unsigned bit = 0; bit < 8; bit++) {
            cft_context("torn tails, scenario %zu: last record, bit %u of byte %llu flipped", kind,
                        bit, (unsigned long long)at);
            buf[at] ^= (uint8_t)(1u << bit);
            if (at < prev + REC_HEAD)
                check_refused(copy, buf, good.n, prev);
            else
                check_recovers(copy, buf, good.n, prev, &sc, TORN_OPS - 1, false);
            buf[at] ^= (uint8_t)(1u << bit);
        }

    /* A good header (its check made anew) claiming a longer key or value, within the
     * limits, than the file holds: cut short. */
    static const unsigned fields[] = {REC_KLEN_AT, REC_VLEN_AT};
    for (size_t fi = 0; last->type == REC_PUT && fi < ARRAY_LEN(fields); fi++) {
        unsigned field = fields[fi];
        uint8_t *p = buf + prev + field;
        uint32_t len = get_le32(p);
        uint32_t max = field == REC_KLEN_AT ? KV_MAX_KEY : (uint32_t)KV_MAX_VALUE;
        for (unsigned bit = 0; bit < 32; bit++) {
            uint32_t longer = len | ((uint32_t)1 << bit);
            if (longer == len || longer > max)
                continue;
            cft_context("torn tails, scenario %zu: last record's length at +%u is %u, not %u", kind,
                        field, longer, len);
            put_le32(p, longer);
            seal_head(buf + prev, prev);
            check_recovers(copy, buf, good.n, prev, &sc, TORN_OPS - 1, false);
            put_le32(p, len);
            seal_head(buf + prev, prev);
        }
    }

    /* Damage that is not a torn tail, the same for every scenario. */
    if (kind == 0) {
        /* The first record again at the end: whole, but its checks are seeded with the
         * offset it was written at. */
        cft_context("damage: the first record copied to the end of the log");
        uint8_t *twice = xmalloc(good.n + ends[0] - LOG_HEADER);
        memcpy(twice, good.p, good.n);
        memcpy(twice + good.n, good.p + LOG_HEADER, ends[0] - LOG_HEADER);
        check_refused(copy, twice, good.n + ends[0] - LOG_HEADER, good.n);
        free(twice);

        for (size_t j = 0; j + 1 < TORN_OPS; j++) {
            uint64_t start = j == 0 ? LOG_HEADER : ends[j - 1];
            /* Its lengths too: a longer one would look like a record cut short, but the
             * header check fails, and whole records follow. */
            for (uint64_t at = start; at < ends[j]; at++) {
                for (unsigned bit = 0; bit < 8; bit++) {
                    cft_context("damage: record %zu at %llu, bit %u of byte %llu flipped", j,
                                (unsigned long long)start, bit, (unsigned long long)at);
                    buf[at] ^= (uint8_t)(1u << bit);
                    check_refused(copy, buf, good.n, start);
                    buf[at] ^= (uint8_t)(1u << bit);
                }
            }
        }
        for (unsigned at = 0; at < LOG_HEADER; at++)
            for (unsigned bit = 0; bit < 8; bit++) {
                cft_context("damage: header, bit %u of byte %u flipped", bit, at);
                buf[at] ^= (uint8_t)(1u << bit);
                check_refused(copy, buf, good.n, UINT64_MAX);
                buf[at] ^= (uint8_t)(1u << bit);
            }
        for (size_t len = 0; len < LOG_HEADER; len++) {
            cft_context("damage: a log of %zu bytes, shorter than its header", len);
            check_refused(copy, good.p, len, UINT64_MAX);
        }
    }
    free(buf);
    by_free(&good);
    rm_tree(copy);
    rm_tree(dir);
}

static void test_torn(void)
{
    uint64_t seed = cft_subseed(20) | 1; /* nonzero: 0 asks the store for a random seed */
    for (size_t sc = 0; sc < ARRAY_LEN(torn_last); sc++)
        torn_scenario(sc, seed);
}

/* ------------------------------------------------------------------------------------ */
/* 3. Import and export                                                                 */
/* ------------------------------------------------------------------------------------ */

#define IMPORT_PIECES_MAX 64u /* records of the test's import file, with room to spare */
#define HASH_BYTES        16u /* a manifest entry: one XXH3-128 */
/* Two whole records and a short third: the cut falls inside the line twice. */
#define LONG_LINE         (2 * KV_IMPORT_MAX_RECORD + 123)

typedef struct {
    size_t off, len;
} piece;

/* The records of p[0..n), as kvstore.h defines them: lines, '\n' included, cut into
 * pieces of at most KV_IMPORT_MAX_RECORD bytes. */
static size_t split_records(const uint8_t *p, size_t n, piece *out)
{
    size_t count = 0;
    for (size_t at = 0; at < n && count < IMPORT_PIECES_MAX;) {
        size_t limit = n - at < KV_IMPORT_MAX_RECORD ? n - at : KV_IMPORT_MAX_RECORD;
        const uint8_t *nl = memchr(p + at, '\n', limit);
        size_t len = nl == NULL ? limit : (size_t)(nl - (p + at)) + 1;
        out[count].off = at;
        out[count].len = len;
        count++;
        at += len;
    }
    return count;
}

static bool same_piece(const uint8_t *p, piece a, piece b)
{
    return a.len == b.len && memcmp(p + a.off, p + b.off, a.len) == 0;
}

static void add_line_of(bytes *b, cft_rng *r, size_t len)
{
    static const char text[] = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint8_t *line = xmalloc(len);
    for (size_t i = 0; i + 1 < len; i++)
        line[i] = (uint8_t)text[cft_below(r, sizeof text - 1)];
    line[len - 1] = '\n';
    by_add(b, line, len);
    free(line);
}

#define UNSET UINT64_MAX /* a result field the call must overwrite */

static const kv_import_result unset_import = {.records = UNSET, .stored = UNSET, .bytes = UNSET};

static void check_export(kv_store *s, const char *path, const char *name, const uint8_t *want,
                         size_t n, uint64_t records, uint64_t missing)
{
    /* The permissions an export leaves: those of the file it replaced, or those of a new
     * file (0666 less the umask). */
    struct stat sb;
    mode_t mask = umask(0);
    umask(mask);
    mode_t want_mode = stat(path, &sb) == 0 ? sb.st_mode & 07777 : (mode_t)(0666 & ~mask);
    kv_export_result er = {.records = UNSET, .written = UNSET, .missing = UNSET, .bytes = UNSET};
    kv_status st = kv_export(s, path, name, &er);
    if (!CHECK_MSG(st == KV_OK, "kv_export(%s): %s: %s", name ? name : "NULL", kv_name(st),
                   kv_error(s)))
        return;
    CHECK_EQ_U(er.records, records);
    CHECK_EQ_U(er.written, records - missing);
    CHECK_EQ_U(er.missing, missing);
    CHECK_EQ_U(er.bytes, n);
    check_file_is(path, want, n, "an export");
    if (CHECK(stat(path, &sb) == 0))
        CHECK_EQ_U(sb.st_mode & 07777, want_mode);
    /* Once more over a file of another mode: the mode stays. */
    if (CHECK(chmod(path, 0640) == 0)) {
        CHECK_KV(kv_export(s, path, name, &er), KV_OK);
        CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0640);
        check_file_is(path, want, n, "an export over an older one");
    }
}

static void test_import_export(void)
{
    cft_context("import: building the file");
    cft_rng r = cft_rng_make(cft_subseed(30));
    bytes f = {0}, longline = {0};
    add_line_of(&longline, &r, LONG_LINE);
    by_str(&f, "apple\n");
    by_str(&f, "banana\n");
    by_str(&f, "\n");
    by_str(&f, "apple\n");
    by_add(&f, longline.p, longline.n);
    by_str(&f, "banana\n");
    add_line_of(&f, &r, KV_IMPORT_MAX_RECORD);     /* exactly one record */
    add_line_of(&f, &r, KV_IMPORT_MAX_RECORD + 1); /* a full record, then "\n" */
    by_add(&f, LIT("\0\x01\r\xff\tbinary\n"));
    by_str(&f, "\n");
    by_add(&f, longline.p, longline.n);
    by_str(&f, "apple\n");
    by_str(&f, "cherry\n");
    by_str(&f, "apple\n");
    by_str(&f, "no newline at the end");
    by_free(&longline);

    piece pc[IMPORT_PIECES_MAX];
    size_t npc = split_records(f.p, f.n, pc);
    size_t distinct = 0, apples = 0;
    piece apple = {0, 6}; /* "apple\n", the file's first record */
    for (size_t i = 0; i < npc; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = same_piece(f.p, pc[i], pc[j]);
        if (!seen)
            distinct++;
        if (same_piece(f.p, pc[i], apple))
            apples++;
    }

    char dir[PATH_CAP], in[PATH_CAP], outdir[PATH_CAP], out[PATH_CAP], out2[PATH_CAP];
    char empty_in[PATH_CAP], empty_out[PATH_CAP], nosuch[PATH_CAP], other[PATH_CAP];
    path_in(dir, g_root, "import-store");
    path_in(in, g_root, "import.txt");
    path_in(empty_in, g_root, "empty.txt");
    path_in(outdir, g_root, "exports");
    path_in(out, outdir, "copy.txt");
    path_in(out2, outdir, "again.txt");
    path_in(empty_out, outdir, "empty.txt");
    path_in(nosuch, outdir, "nosuch.txt");
    path_in(other, g_root, "other.txt");
    if (!CHECK(write_file(in, f.p, f.n)) || !CHECK(write_file(empty_in, "", 0)) ||
        !CHECK(mkdir(outdir, 0700) == 0))
        return;
    kv_store *s = open_store(dir, true, cft_subseed(31) | 1, 0);
    if (s == NULL)
        return;

    cft_context("import: %zu records, %zu distinct", npc, distinct);
    kv_import_result ir = unset_import;
    kv_status st = kv_import(s, in, NULL, &ir);
    CHECK_MSG(st == KV_OK, "kv_import: %s: %s", kv_name(st), kv_error(s));
    CHECK_EQ_U(ir.records, npc);
    CHECK_EQ_U(ir.stored, distinct);
    CHECK_EQ_U(ir.bytes, f.n);
    CHECK_EQ_U(stats_of(s).live_keys, distinct + 1); /* and the manifest */
    for (size_t i = 0; i < npc; i++) {
        char key[HASH_HEX];
        hash_hex(key, f.p + pc[i].off, pc[i].len);
        CHECK_MSG(holds(s, key, HASH_HEX - 1, f.p + pc[i].off, pc[i].len),
                  "record %zu (%zu bytes at %zu) under its hash %s", i, pc[i].len, pc[i].off, key);
    }
    /* The manifest: one hash per record, equal where the records are equal. */
    void *man = NULL;
    size_t man_len = 0;
    st = kv_get(s, LIT(KV_MANIFEST_PREFIX KV_DEFAULT_NAME), &man, &man_len);
    if (CHECK_KV(st, KV_OK) && CHECK_EQ_U(man_len, HASH_BYTES * npc)) {
        const uint8_t *m = man;
        for (size_t i = 0; i < npc; i++)
            for (size_t j = 0; j < i; j++)
                CHECK_MSG((memcmp(m + HASH_BYTES * i, m + HASH_BYTES * j, HASH_BYTES) == 0) ==
                              same_piece(f.p, pc[i], pc[j]),
                          "manifest entries %zu and %zu", j, i);
    }
    free(man);

    cft_context("export: the whole file back");
    check_export(s, out, NULL, f.p, f.n, npc, 0);
    check_export(s, out, KV_DEFAULT_NAME, f.p, f.n, npc, 0);

    cft_context("import: the same file again, under another name");
    ir = unset_import;
    CHECK_KV(kv_import(s, in, "again", &ir), KV_OK);
    CHECK_EQ_U(ir.records, npc);
    CHECK_EQ_U(ir.stored, 0);
    CHECK_EQ_U(stats_of(s).live_keys, distinct + 2);
    check_export(s, out2, "again", f.p, f.n, npc, 0);

    cft_context("import: an empty file");
    ir = unset_import;
    CHECK_KV(kv_import(s, empty_in, "empty", &ir), KV_OK);
    CHECK_EQ_U(ir.records, 0);
    CHECK_EQ_U(ir.stored, 0);
    CHECK_EQ_U(ir.bytes, 0);
    check_export(s, empty_out, "empty", f.p, 0, 0, 0);

    cft_context("import and export: refusals");
    kv_export_result er;
    CHECK_KV(kv_export(s, nosuch, "no such name", &er), KV_NOT_FOUND);
    CHECK_MSG(!exists(nosuch), "a refused export wrote %s", nosuch);
    ir = unset_import;
    CHECK_KV(kv_import(s, nosuch, "from nothing", &ir), KV_EIO);
    CHECK_MSG(nonempty(ir.why) || nonempty(kv_error(s)), "no word on why the import failed");

    cft_context("export: after \"apple\\n\" (%zu times in the file) was deleted", apples);
    char key[HASH_HEX];
    hash_hex(key, "apple\n", 6);
    CHECK_KV(kv_del(s, key, HASH_HEX - 1), KV_OK);
    bytes lacking = {0};
    for (size_t i = 0; i < npc; i++)
        if (!same_piece(f.p, pc[i], apple))
            by_add(&lacking, f.p + pc[i].off, pc[i].len);
    check_export(s, out, NULL, lacking.p, lacking.n, npc, apples);
    check_export(s, out2, "again", lacking.p, lacking.n, npc, apples);
    CHECK_KV(kv_close(s), KV_OK);

    cft_context("export: reopened");
    s = open_store(dir, false, 0, 0);
    if (s != NULL) {
        check_export(s, out, NULL, lacking.p, lacking.n, npc, apples);
        /* A new import under a name replaces its manifest. */
        static const char small[] = "x\ny\nx\n";
        ir = unset_import;
        if (CHECK(write_file(other, small, sizeof small - 1)) &&
            CHECK_KV(kv_import(s, other, "again", &ir), KV_OK)) {
            CHECK_EQ_U(ir.records, 3);
            CHECK_EQ_U(ir.stored, 2);
            check_export(s, out2, "again", (const uint8_t *)small, sizeof small - 1, 3, 0);
        }
        CHECK_KV(kv_close(s), KV_OK);
    }
    /* Exports replace their files by renames: nothing else is left in the directory. */
    CHECK_EQ_I(count_entries(outdir), 3);
    by_free(&lacking);
    by_free(&f);
}

/* ------------------------------------------------------------------------------------ */
/* 4. The differential test                                                             */
/* ------------------------------------------------------------------------------------ */

#define DIFF_OPS         1000000u /* at scale 1; enough to cross every index size many times */
#define DIFF_OPS_MIN     20000u   /* a scaled-down run still doubles the index a few times */
#define DIFF_KEYS        60000u   /* candidate keys; about 3/4 of those in play are live */
#define DIFF_KEYS_MIN    2000u    /* a scaled-down run still has keys of every length */
#define DIFF_CHECKPOINTS 10u      /* close, reopen and read everything back every ~100k ops */
#define COMPACT_EVERY    3u       /* checkpoints: a compaction at every third */
#define FIRST_BUCKETS    2u       /* the smallest even index: it has to double many times */
#define MIN_REHASHES     5u       /* 8 slots to 256 at least: the index really grew */
#define RAMP_PERCENT     60u      /* keys come into play over the first 60 % of the ops */
#define WINDOW_MIN       64u      /* keys in play at the start */
#define KEY_MAX_LEN      40u      /* short keys collide in tags and repeat: all lengths matter */
#define VAL_MAX_LEN      100u     /* small values: many records per megabyte of log */
#define EMPTY_ONE_IN     10u      /* one put in ten stores an empty value */
#define PCT_PUT          40u      /* puts outrun deletes 8:3: the store grows as keys come in */
#define PCT_DEL          15u      /* enough deletes that delete records and reinserts are common */
#define PCT_GET          30u      /* the rest: kv_has */
#define PCT_ANY_KEY      10u      /* of gets and has: any key, also the many never put */

typedef struct {
    uint8_t key[KEY_MAX_LEN];
    uint8_t val[VAL_MAX_LEN];
    uint8_t klen, vlen;
    bool live;
    uint64_t seq; /* when its newest put was: kv_foreach's order */
} entry;

typedef struct {
    entry *e;            /* distinct keys, sorted by (length, bytes) so that bsearch finds them */
    size_t n;            /* entries */
    uint32_t *order;     /* a shuffle of e: the order in which keys come into play */
    uint64_t live;       /* keys with a value */
    uint64_t records;    /* records the log holds */
    uint64_t log_bytes;  /* its size */
    uint64_t live_bytes; /* the records of the live values */
    uint64_t seq;
} model;

typedef struct {
    const uint8_t *p;
    size_t n;
} span;

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->klen != y->klen)
        return x->klen < y->klen ? -1 : 1;
    return memcmp(x->key, y->key, x->klen);
}

static int span_entry_cmp(const void *k, const void *b)
{
    const span *x = k;
    const entry *y = b;
    if (x->n != y->klen)
        return x->n < y->klen ? -1 : 1;
    return memcmp(x->p, y->key, x->n);
}

static int seq_cmp(const void *a, const void *b)
{
    const entry *const *x = a, *const *y = b;
    return ((*x)->seq > (*y)->seq) - ((*x)->seq < (*y)->seq);
}

/* Half the keys text, half any bytes (NUL and newline included). */
static void make_key(cft_rng *r, entry *e)
{
    static const char text[] = "abcdefghijklmnopqrstuvwxyz0123456789:_-./";
    bool binary = cft_below(r, 2) == 0;
    e->klen = (uint8_t)(1 + cft_below(r, KEY_MAX_LEN));
    for (size_t i = 0; i < e->klen; i++) {
        uint64_t x = cft_next(r);
        e->key[i] = binary ? (uint8_t)x : (uint8_t)text[x % (sizeof text - 1)];
    }
}

static void model_init(model *m, uint64_t keys, cft_rng *r)
{
    memset(m, 0, sizeof *m);
    m->e = xmalloc((size_t)keys * sizeof *m->e);
    memset(m->e, 0, (size_t)keys * sizeof *m->e);
    for (size_t i = 0; i < keys; i++)
        make_key(r, &m->e[i]);
    qsort(m->e, (size_t)keys, sizeof *m->e, entry_cmp);
    /* Short keys repeat (there are 256 of one byte): keep one of each. */
    size_t n = 0;
    for (size_t i = 0; i < keys; i++)
        if (n == 0 || entry_cmp(&m->e[n - 1], &m->e[i]) != 0)
            m->e[n++] = m->e[i];
    m->n = n;
    m->order = xmalloc(n * sizeof *m->order);
    for (size_t i = 0; i < n; i++)
        m->order[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)cft_below(r, i + 1);
        uint32_t t = m->order[i];
        m->order[i] = m->order[j];
        m->order[j] = t;
    }
}

static void model_put(model *m, entry *e, const uint8_t *v, size_t vlen)
{
    if (e->live)
        m->live_bytes -= rec_size(e->klen, e->vlen);
    else
        m->live++;
    memcpy(e->val, v, vlen);
    e->vlen = (uint8_t)vlen;
    e->live = true;
    e->seq = ++m->seq;
    m->live_bytes += rec_size(e->klen, vlen);
    m->records++;
    m->log_bytes += rec_size(e->klen, vlen);
}

static void model_del(model *m, entry *e)
{
    m->live_bytes -= rec_size(e->klen, e->vlen);
    m->live--;
    e->live = false;
    m->records++;
    m->log_bytes += rec_size(e->klen, 0);
}

typedef struct {
    kv_store *s;
    model m;
    cft_rng rng;
    char dir[PATH_CAP], log[PATH_CAP];
    uint64_t seed;
    uint64_t ops, ramp;
    bool *seen; /* kv_foreach: entries visited */
    /* tallies, for the summary */
    uint64_t puts, overwrites, empties, dels, del_hits, gets, get_hits, has;
    uint64_t rehashes, first_rehashes, reopens, compactions, max_live;
} diff;

static void diff_check_get(kv_store *s, const entry *e, uint64_t op)
{
    void *v = NULL;
    size_t vlen = 0;
    kv_status st = kv_get(s, e->key, e->klen, &v, &vlen);
    if (e->live)
        CHECK_MSG(st == KV_OK && value_is(v, vlen, e->val, e->vlen),
                  "op %llu: get of a live key (%u bytes): %s, %zu bytes, want %u bytes",
                  (unsigned long long)op, e->klen, kv_name(st), vlen, e->vlen);
    else
        CHECK_MSG(st == KV_NOT_FOUND, "op %llu: get of an absent key (%u bytes): %s",
                  (unsigned long long)op, e->klen, kv_name(st));
    free(v);
}

static void diff_check_has(kv_store *s, const entry *e, uint64_t op)
{
    kv_status st = kv_has(s, e->key, e->klen);
    CHECK_MSG(st == (e->live ? KV_OK : KV_NOT_FOUND), "op %llu: has of %s key (%u bytes): %s",
              (unsigned long long)op, e->live ? "a live" : "an absent", e->klen, kv_name(st));
}

static void diff_step(diff *d, uint64_t op)
{
    model *m = &d->m;
    uint64_t window = (uint64_t)m->n * (op + 1) / d->ramp;
    if (window < WINDOW_MIN)
        window = WINDOW_MIN;
    if (window > m->n)
        window = m->n;
    uint64_t dice = cft_below(&d->rng, 100);
    entry *e = &m->e[m->order[cft_below(&d->rng, window)]];
    if (dice >= PCT_PUT + PCT_DEL && cft_below(&d->rng, 100) < PCT_ANY_KEY)
        e = &m->e[cft_below(&d->rng, m->n)];

    if (dice < PCT_PUT) {
        uint8_t v[VAL_MAX_LEN];
        size_t vlen =
            cft_below(&d->rng, EMPTY_ONE_IN) == 0 ? 0 : (size_t)cft_below(&d->rng, VAL_MAX_LEN + 1);
        for (size_t i = 0; i < vlen; i++)
            v[i] = (uint8_t)cft_next(&d->rng);
        kv_status st = kv_put(d->s, e->key, e->klen, v, vlen);
        d->puts++;
        d->overwrites += e->live;
        d->empties += vlen == 0;
        if (CHECK_MSG(st == KV_OK, "op %llu: put: %s: %s", (unsigned long long)op, kv_name(st),
                      kv_error(d->s)))
            model_put(m, e, v, vlen);
    } else if (dice < PCT_PUT + PCT_DEL) {
        kv_status st = kv_del(d->s, e->key, e->klen);
        d->dels++;
        d->del_hits += e->live;
        CHECK_MSG(st == (e->live ? KV_OK : KV_NOT_FOUND), "op %llu: del of %s key: %s",
                  (unsigned long long)op, e->live ? "a live" : "an absent", kv_name(st));
        if (st == KV_OK && e->live)
            model_del(m, e);
    } else if (dice < PCT_PUT + PCT_DEL + PCT_GET) {
        d->gets++;
        d->get_hits += e->live;
        diff_check_get(d->s, e, op);
    } else {
        d->has++;
        diff_check_has(d->s, e, op);
    }
    if (m->live > d->max_live)
        d->max_live = m->live;
}

/* The stats and the log's size against the model. */
static void diff_check_stats(const diff *d)
{
    kv_stats st = stats_of(d->s);
    CHECK_EQ_U(st.live_keys, d->m.live);
    CHECK_EQ_U(st.records, d->m.records);
    CHECK_EQ_U(st.log_bytes, d->m.log_bytes);
    CHECK_EQ_U(st.live_bytes, d->m.live_bytes);
    CHECK_EQ_U(st.dead_bytes, d->m.log_bytes - LOG_HEADER - d->m.live_bytes);
    CHECK_EQ_U(st.truncated, 0);
    CHECK_MSG(st.index_slots >= st.live_keys, "%llu slots for %llu keys",
              (unsigned long long)st.index_slots, (unsigned long long)st.live_keys);
    CHECK(st.index_bytes >= st.index_slots * SLOT_BYTES);
    CHECK_NEAR(st.index_load, (double)st.live_keys / (double)st.index_slots, 1e-12);
    CHECK_NEAR(st.bytes_per_key,
               st.live_keys == 0 ? 0.0 : (double)st.index_bytes / (double)st.live_keys, 1e-12);
    CHECK_EQ_I(file_size(d->log), (int64_t)d->m.log_bytes);
}

/* Every key of the model, live or not, reads back as the model has it. */
static void diff_check_all(const diff *d)
{
    for (size_t i = 0; i < d->m.n; i++) {
        diff_check_get(d->s, &d->m.e[i], d->ops);
        diff_check_has(d->s, &d->m.e[i], d->ops);
    }
}

typedef struct {
    const model *m;
    bool *seen;
    uint64_t visits, unknown, wrong, twice, disorder, last_seq;
} walk;

static int walk_visit(void *ctx, const void *key, size_t klen, const void *value, size_t vlen)
{
    walk *w = ctx;
    w->visits++;
    span k = {key, klen};
    const entry *e = bsearch(&k, w->m->e, w->m->n, sizeof *w->m->e, span_entry_cmp);
    if (e == NULL || !e->live) {
        w->unknown++;
        return 0;
    }
    size_t i = (size_t)(e - w->m->e);
    w->twice += w->seen[i];
    w->seen[i] = true;
    if (vlen != e->vlen || (vlen > 0 && memcmp(value, e->val, vlen) != 0))
        w->wrong++;
    w->disorder += e->seq <= w->last_seq;
    w->last_seq = e->seq;
    return 0;
}

/* kv_foreach visits the model's live keys, once each, with their values, in the order of
 * their newest puts. */
static void diff_check_foreach(diff *d)
{
    walk w = {.m = &d->m, .seen = d->seen};
    memset(d->seen, 0, d->m.n * sizeof *d->seen);
    CHECK_KV(kv_foreach(d->s, walk_visit, &w), KV_OK);
    CHECK_EQ_U(w.visits, d->m.live);
    CHECK_EQ_U(w.unknown, 0);
    CHECK_EQ_U(w.wrong, 0);
    CHECK_EQ_U(w.twice, 0);
    CHECK_EQ_U(w.disorder, 0);
}

static void diff_compact(diff *d)
{
    char tmp[PATH_CAP];
    path_in(tmp, d->dir, KV_COMPACT_NAME);
    kv_stats before = stats_of(d->s);
    CHECK(before.dead_bytes > 0); /* the workload overwrites and deletes */
    kv_status st = kv_compact(d->s);
    if (!CHECK_MSG(st == KV_OK, "kv_compact: %s: %s", kv_name(st), kv_error(d->s)))
        return;
    d->compactions++;
    kv_stats after = stats_of(d->s);
    CHECK_EQ_U(after.dead_bytes, 0);
    CHECK_MSG(after.log_bytes < before.log_bytes, "log of %llu bytes, %llu before compacting",
              (unsigned long long)after.log_bytes, (unsigned long long)before.log_bytes);
    CHECK(!exists(tmp));
    d->m.records = d->m.live;
    d->m.log_bytes = LOG_HEADER + d->m.live_bytes;
    diff_check_stats(d);

    /* The new log: the header, then one put per live key, in the order of their puts. */
    const entry **live = xmalloc((size_t)d->m.live * sizeof *live);
    size_t n = 0;
    for (size_t i = 0; i < d->m.n && n < d->m.live; i++)
        if (d->m.e[i].live)
            live[n++] = &d->m.e[i];
    qsort(live, n, sizeof *live, seq_cmp);
    bytes want = {0};
    log_header(&want, d->seed);
    for (size_t i = 0; i < n; i++)
        log_record(&want, REC_PUT, live[i]->key, live[i]->klen, live[i]->val, live[i]->vlen);
    check_file_is(d->log, want.p, want.n, "the compacted log");
    by_free(&want);
    free(live);

    diff_check_all(d);
    diff_check_foreach(d);
}

static void test_differential(void)
{
    diff d;
    memset(&d, 0, sizeof d);
    d.ops = cft_scaled_min(DIFF_OPS, DIFF_OPS_MIN);
    d.ramp = d.ops * RAMP_PERCENT / 100;
    d.rng = cft_rng_make(cft_subseed(40));
    d.seed = cft_subseed(41) | 1; /* nonzero: 0 asks the store for a random seed */
    cft_context("differential: making %llu keys",
                (unsigned long long)cft_scaled_min(DIFF_KEYS, DIFF_KEYS_MIN));
    model_init(&d.m, cft_scaled_min(DIFF_KEYS, DIFF_KEYS_MIN), &d.rng);
    d.seen = xmalloc(d.m.n * sizeof *d.seen);
    d.m.log_bytes = LOG_HEADER;
    path_in(d.dir, g_root, "differential");
    path_in(d.log, d.dir, KV_LOG_NAME);

    d.s = open_store(d.dir, true, d.seed, FIRST_BUCKETS);
    for (unsigned cp = 1; d.s != NULL && cp <= DIFF_CHECKPOINTS; cp++) {
        uint64_t from = d.ops * (cp - 1) / DIFF_CHECKPOINTS, to = d.ops * cp / DIFF_CHECKPOINTS;
        cft_context("differential: ops %llu..%llu", (unsigned long long)from,
                    (unsigned long long)to);
        for (uint64_t op = from; op < to; op++)
            diff_step(&d, op);

        cft_context("differential: checkpoint %u after %llu ops", cp, (unsigned long long)to);
        diff_check_stats(&d);
        kv_stats st = stats_of(d.s);
        d.rehashes += st.rehashes;
        if (cp == 1) {
            /* A new store of 2 buckets: every slot beyond the first 8 came by doubling. */
            d.first_rehashes = st.rehashes;
            CHECK_MSG(st.rehashes >= MIN_REHASHES, "%llu rehashes for %llu live keys",
                      (unsigned long long)st.rehashes, (unsigned long long)st.live_keys);
            uint64_t slots = (uint64_t)SLOTS_PER_BUCKET * FIRST_BUCKETS;
            for (uint64_t i = 0; i < st.rehashes && slots <= st.index_slots; i++)
                slots *= 2;
            CHECK_EQ_U(st.index_slots, slots);
        }
        if (cp % COMPACT_EVERY == 0) {
            cft_context("differential: compaction at checkpoint %u", cp);
            diff_compact(&d);
        }
        if (cp == DIFF_CHECKPOINTS)
            break;

        /* Reopened alternately from 2 buckets (rehashing as the log is read) and sized
         * from the log. */
        cft_context("differential: reopened at checkpoint %u", cp);
        CHECK_KV(kv_close(d.s), KV_OK);
        d.s = open_store(d.dir, false, 0, cp % 2 == 1 ? FIRST_BUCKETS : 0);
        if (d.s == NULL)
            break;
        d.reopens++;
        diff_check_stats(&d);
        diff_check_all(&d);
    }
    if (d.s != NULL) {
        cft_context("differential: the end");
        diff_check_foreach(&d);
        CHECK_KV(kv_close(d.s), KV_OK);
    }
    CHECK_MSG(d.rehashes >= MIN_REHASHES, "%llu rehashes in all", (unsigned long long)d.rehashes);
    printf("  differential: %llu ops on %zu keys (%llu puts, %llu overwrites, %llu empty; "
           "%llu gets, %llu found; %llu deletes, %llu found; %llu has), at most %llu live; "
           "%llu rehashes (%llu before the first reopen), %llu reopens, %llu compactions\n",
           (unsigned long long)d.ops, d.m.n, (unsigned long long)d.puts,
           (unsigned long long)d.overwrites, (unsigned long long)d.empties,
           (unsigned long long)d.gets, (unsigned long long)d.get_hits, (unsigned long long)d.dels,
           (unsigned long long)d.del_hits, (unsigned long long)d.has,
           (unsigned long long)d.max_live, (unsigned long long)d.rehashes,
           (unsigned long long)d.first_rehashes, (unsigned long long)d.reopens,
           (unsigned long long)d.compactions);
    free(d.seen);
    free(d.m.e);
    free(d.m.order);
    rm_tree(d.dir);
}

/* ------------------------------------------------------------------------------------ */

int main(void)
{
    cft_init("test_kv");
    const char *tmp = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/cf_test_kv_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 2;
    }
    double t0 = cft_now();
    test_api();
    printf("  api: %.2f s\n", cft_now() - t0);
    t0 = cft_now();
    test_torn();
    printf("  torn tails and damage: %.2f s\n", cft_now() - t0);
    t0 = cft_now();
    test_import_export();
    printf("  import and export: %.2f s\n", cft_now() - t0);
    t0 = cft_now();
    test_differential();
    printf("  differential: %.2f s\n", cft_now() - t0);
    rm_tree(g_root);
    CHECK(!exists(g_root));
    return cft_finish();
}
