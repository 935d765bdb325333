/*
 * kvstore.c - the store: its log on disk and its index in memory (see kvstore.h).
 *
 * The log is the truth and the index only a way into it. Every change appends a record;
 * the index learns of it after the record is written, or is put back if writing failed,
 * so the two never disagree about a record that is on disk. kv_open rebuilds the index
 * by replaying the log.
 */
#define _GNU_SOURCE /* getrandom, fdatasync, O_CLOEXEC, O_DIRECTORY */

#include "kvstore.h"
#include "kvindex.h"

#include <cuckoofilter.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The log's layout: docs in README.md ("The log"). */
#define KV_MAGIC        "CUCKOOKV"
#define KV_MAGIC_BYTES  8u
#define KV_VERSION      1u
#define KV_HEADER_BYTES 32u /* magic, version, flags, seed, checksum */
#define KV_REC_HEAD     16u /* type, 3 zero bytes, key length, value length, header check */
#define KV_REC_CHECKED  12u /* the header bytes its check covers */
#define KV_REC_TAIL     8u  /* the record's checksum */
#define KV_REC_PUT      1u
#define KV_REC_DEL      2u

/* A log read that the map does not cover goes through pread; the map is renewed when the
 * part it misses has grown to this fraction of it, so that renewing stays rare (amortised
 * constant) and most reads need no system call. */
#define KV_REMAP_DIVISOR 8u

/* A pread for a key comparison reads this much at once: the header and a short key in one
 * system call, rather than the header first. */
#define KV_READ_AHEAD 256u

/* A torn tail is copied aside through a buffer of this size (the tail of a crash is a
 * record at most, but zeros after it can be longer). */
#define KV_COPY_BUFFER ((size_t)1 << 16)

typedef struct kv_rec {
    unsigned type;
    uint32_t klen;
    uint32_t vlen;
    uint64_t size; /* the whole record, header and checksum included */
} kv_rec;

struct kv_store {
    int dirfd;      /* the directory, held with an exclusive flock */
    int fd;         /* the log */
    char *log_path; /* for messages */
    uint64_t seed;  /* the index hash's seed, from the log's header */
    uint64_t end;   /* the log's size: the end of its last record */
    bool sync_each; /* kv_options.sync_each */
    bool dirty;     /* written since the last sync */
    bool broken;    /* a failure left memory and disk out of step: reopen */
    kv_index index;
    kv_index_io io;
    const uint8_t *map; /* read-only map of the log's first map_len bytes */
    size_t map_len;
    uint8_t *rbuf; /* reads the map does not cover */
    size_t rbuf_cap;
    uint8_t *wbuf; /* the record being written */
    size_t wbuf_cap;
    uint64_t match_size; /* size of the record key_is last matched */
    uint64_t records;
    uint64_t live_bytes;
    uint64_t tag_misses;
    uint64_t truncated; /* a torn tail after s->end: its bytes, start, records */
    uint64_t torn_at;
    uint64_t torn_records;
    char torn_name[KV_TORN_NAME_MAX]; /* where it went, once moved; "" while still in the
                                         log file, past s->end (see torn_pending) */
    char err[KV_ERROR_MAX];
};

/* ------------------------------------------------------------------------------------ */
/* Small helpers                                                                        */
/* ------------------------------------------------------------------------------------ */

static uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t load_le64(const uint8_t *p)
{
    return (uint64_t)load_le32(p) | (uint64_t)load_le32(p + 4) << 32;
}

static void store_le32(uint8_t *p, uint32_t v)
{
    for (unsigned i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void store_le64(uint8_t *p, uint64_t v)
{
    store_le32(p, (uint32_t)v);
    store_le32(p + 4, (uint32_t)(v >> 32));
}

/* Records the message of a failed call and returns its status. */
static kv_status fail(kv_store *s, kv_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static kv_status fail(kv_store *s, kv_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return st;
}

static kv_status fail_errno(kv_store *s, const char *what, int err)
{
    return fail(s, KV_EIO, "%s: %s: %s", s->log_path, what, strerror(err));
}

static bool grow_buffer(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n = n > SIZE_MAX / 2 ? need : n * 2;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return false;
    *buf = p;
    *cap = n;
    return true;
}

static bool write_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return false;
        }
        p += w;
        len -= (size_t)w;
        off += (uint64_t)w;
    }
    return true;
}

static uint64_t checksum(const uint8_t *rec, uint64_t covered, uint64_t offset)
{
    return cf_hash_seeded(offset, rec, (size_t)covered);
}

/* The check of a record's header: its own, so that a damaged length is caught before it
 * is believed. Otherwise a flipped bit could make a record in the middle look longer than
 * the file, which is what a torn last record looks like, and the records after it would be
 * cut off as a torn tail. */
static uint32_t head_check(const uint8_t *p, uint64_t offset)
{
    return (uint32_t)cf_hash_seeded(offset, p, KV_REC_CHECKED);
}

/* The header of the record at p (KV_REC_HEAD bytes) at `offset` in the log; false if no
 * writer could have made it. */
static bool parse_head(const uint8_t *p, uint64_t offset, kv_rec *r)
{
    r->type = p[0];
    r->klen = load_le32(p + 4);
    r->vlen = load_le32(p + 8);
    r->size = KV_REC_HEAD + (uint64_t)r->klen + r->vlen + KV_REC_TAIL;
    if (load_le32(p + KV_REC_CHECKED) != head_check(p, offset) || (p[1] | p[2] | p[3]))
        return false;
    if (r->klen == 0 || r->klen > KV_MAX_KEY || r->vlen > KV_MAX_VALUE)
        return false;
    return r->type == KV_REC_PUT || (r->type == KV_REC_DEL && r->vlen == 0);
}

/* Writes the header check and the checksum of the n-byte record at p, to be written at
 * `offset` (both are seeded with it, so a record copied elsewhere does not pass). */
static void seal_record(uint8_t *p, uint64_t n, uint64_t offset)
{
    store_le32(p + KV_REC_CHECKED, head_check(p, offset));
    store_le64(p + n - KV_REC_TAIL, checksum(p, n - KV_REC_TAIL, offset));
}

/* ------------------------------------------------------------------------------------ */
/* Reading the log                                                                      */
/* ------------------------------------------------------------------------------------ */

static void unmap(kv_store *s)
{
    if (s->map)
        munmap((void *)(uintptr_t)s->map, s->map_len);
    s->map = NULL;
    s->map_len = 0;
}

/* Map the whole log. On failure reads fall back to pread. */
static void remap(kv_store *s)
{
    unmap(s);
    if (s->end == 0 || s->end > SIZE_MAX)
        return;
    void *m = mmap(NULL, (size_t)s->end, PROT_READ, MAP_SHARED, s->fd, 0);
    if (m == MAP_FAILED)
        return;
    s->map = m;
    s->map_len = (size_t)s->end;
}

/* A view of the `len` bytes at `off` of the log (off + len <= end): in the map, or read
 * into rbuf. Valid until the next read. */
static kv_status read_at(kv_store *s, uint64_t off, size_t len, const uint8_t **out)
{
    if (off + len > s->map_len && s->end - s->map_len >= s->map_len / KV_REMAP_DIVISOR)
        remap(s);
    if (off + len <= s->map_len) {
        *out = s->map + off;
        return KV_OK;
    }
    if (!grow_buffer(&s->rbuf, &s->rbuf_cap, len))
        return fail(s, KV_ENOMEM, "%s: out of memory reading a record", s->log_path);
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(s->fd, s->rbuf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail_errno(s, "read", errno);
        if (r == 0)
            return fail(s, KV_ECORRUPT, "%s: shorter than expected at offset %llu", s->log_path,
                        (unsigned long long)(off + got));
        got += (size_t)r;
    }
    *out = s->rbuf;
    return KV_OK;
}

/* The record at off: its header in *r, and in *p its first `want` bytes or all of it,
 * whichever is shorter (at least the header). */
static kv_status read_record(kv_store *s, uint64_t off, uint64_t want, kv_rec *r, const uint8_t **p)
{
    uint64_t avail = s->end - off;
    uint64_t first = avail < KV_READ_AHEAD ? avail : KV_READ_AHEAD;
    if (first < KV_REC_HEAD)
        return fail(s, KV_ECORRUPT, "%s: no record at offset %llu", s->log_path,
                    (unsigned long long)off);
    kv_status st = read_at(s, off, (size_t)first, p);
    if (st != KV_OK)
        return st;
    if (!parse_head(*p, off, r) || r->size > avail)
        return fail(s, KV_ECORRUPT, "%s: damaged record at offset %llu", s->log_path,
                    (unsigned long long)off);
    uint64_t need = want < r->size ? want : r->size;
    return need > first ? read_at(s, off, (size_t)need, p) : KV_OK;
}

static kv_status io_key_is(void *ctx, uint64_t off, const void *key, size_t klen)
{
    kv_store *s = ctx;
    kv_rec r = {0, 0, 0, 0};
    const uint8_t *p;
    kv_status st = read_record(s, off, KV_REC_HEAD + (uint64_t)klen, &r, &p);
    if (st != KV_OK)
        return st;
    if (r.type != KV_REC_PUT)
        return fail(s, KV_ECORRUPT, "%s: the index points at a delete record (offset %llu)",
                    s->log_path, (unsigned long long)off);
    if (r.klen != klen || memcmp(p + KV_REC_HEAD, key, klen) != 0) {
        s->tag_misses++;
        return KV_NOT_FOUND;
    }
    s->match_size = r.size;
    return KV_OK;
}

static kv_status io_hash_at(void *ctx, uint64_t off, uint64_t *h)
{
    kv_store *s = ctx;
    kv_rec r = {0, 0, 0, 0};
    const uint8_t *p;
    kv_status st = read_record(s, off, KV_REC_HEAD + (uint64_t)KV_MAX_KEY, &r, &p);
    if (st != KV_OK)
        return st;
    *h = cf_hash_seeded(s->seed, p + KV_REC_HEAD, r.klen);
    return KV_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Opening: the header, the scan, the index                                             */
/* ------------------------------------------------------------------------------------ */

static void make_header(uint8_t h[KV_HEADER_BYTES], uint64_t seed)
{
    memcpy(h, KV_MAGIC, KV_MAGIC_BYTES);
    store_le32(h + 8, KV_VERSION);
    store_le32(h + 12, 0);
    store_le64(h + 16, seed);
    store_le64(h + 24, cf_hash_seeded(0, h, 24));
}

static kv_status check_header(kv_store *s, const uint8_t *h)
{
    if (memcmp(h, KV_MAGIC, KV_MAGIC_BYTES) != 0)
        return fail(s, KV_ECORRUPT, "%s: not a cuckoo-kv log (bad magic)", s->log_path);
    if (load_le64(h + 24) != cf_hash_seeded(0, h, 24))
        return fail(s, KV_ECORRUPT, "%s: damaged header (checksum mismatch)", s->log_path);
    if (load_le32(h + 8) != KV_VERSION || load_le32(h + 12) != 0)
        return fail(s, KV_ECORRUPT, "%s: log version %u (flags %#x) is not supported", s->log_path,
                    load_le32(h + 8), load_le32(h + 12));
    s->seed = load_le64(h + 16);
    return KV_OK;
}

static bool all_zero(const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* Checks every record of the mapped log of `size` bytes, and finds where the good ones
 * end. A damaged last record is a torn write (a crash in the middle of an append): it is
 * what *good_end leaves out. Damage followed by more data is not, and fails. */
static kv_status scan(kv_store *s, const uint8_t *m, uint64_t size, uint64_t *good_end,
                      uint64_t *puts, uint64_t *dels)
{
    uint64_t off = KV_HEADER_BYTES;
    *puts = *dels = 0;
    while (off < size) {
        uint64_t rem = size - off;
        kv_rec r = {0, 0, 0, 0};
        if (rem < KV_REC_HEAD)
            break; /* a header cut short */
        if (!parse_head(m + off, off, &r)) {
            if (all_zero(m + off, rem))
                break; /* space the file system gave but the append never filled */
            return fail(s, KV_ECORRUPT,
                        "%s: damaged record header at offset %llu (%llu bytes follow it)",
                        s->log_path, (unsigned long long)off, (unsigned long long)rem);
        }
        if (r.size > rem)
            break; /* a record cut short */
        uint64_t sum = load_le64(m + off + r.size - KV_REC_TAIL);
        if (sum != checksum(m + off, r.size - KV_REC_TAIL, off)) {
            if (r.size == rem || all_zero(m + off + r.size, rem - r.size))
                break; /* the last record, written in part */
            return fail(s, KV_ECORRUPT,
                        "%s: damaged record at offset %llu (checksum mismatch; %llu bytes follow "
                        "it)",
                        s->log_path, (unsigned long long)off, (unsigned long long)(rem - r.size));
        }
        if (r.type == KV_REC_PUT)
            (*puts)++;
        else
            (*dels)++;
        off += r.size;
    }
    *good_end = off;
    return KV_OK;
}

/* Builds the index by replaying the log's records in [KV_HEADER_BYTES, s->end), all
 * checked by scan. */
static kv_status replay(kv_store *s)
{
    uint64_t off = KV_HEADER_BYTES;
    while (off < s->end) {
        kv_rec r = {0, 0, 0, 0};
        const uint8_t *p;
        kv_status st = read_record(s, off, KV_REC_HEAD + (uint64_t)KV_MAX_KEY, &r, &p);
        if (st != KV_OK)
            return st;
        /* p is only valid until the next read: the key is hashed at once. */
        uint64_t h = cf_hash_seeded(s->seed, p + KV_REC_HEAD, r.klen);
        uint64_t pos;
        if (!grow_buffer(&s->wbuf, &s->wbuf_cap, r.klen))
            return fail(s, KV_ENOMEM, "%s: out of memory", s->log_path);
        memcpy(s->wbuf, p + KV_REC_HEAD, r.klen);
        st = kv_index_find(&s->index, h, s->wbuf, r.klen, &s->io, &pos);
        if (st != KV_OK && st != KV_NOT_FOUND)
            return st;
        if (r.type == KV_REC_PUT) {
            if (st == KV_OK) {
                s->live_bytes -= s->match_size;
                kv_index_set_offset(&s->index, pos, off);
            } else if ((st = kv_index_insert(&s->index, h, off, &s->io)) != KV_OK) {
                return st == KV_ENOMEM ? fail(s, st, "%s: out of memory for the index", s->log_path)
                                       : st;
            }
            s->live_bytes += r.size;
        } else if (st == KV_OK) {
            s->live_bytes -= s->match_size;
            kv_index_remove(&s->index, pos);
        }
        s->records++;
        off += r.size;
    }
    return KV_OK;
}

/* Records that begin in a torn tail at off (of a map of `size` bytes): how many headers
 * parse there one after another. A crash mid-append leaves one; zeros hold none. */
static uint64_t count_torn(const uint8_t *m, uint64_t off, uint64_t size)
{
    uint64_t n = 0;
    kv_rec r = {0, 0, 0, 0};
    while (size - off >= KV_REC_HEAD && parse_head(m + off, off, &r)) {
        n++;
        if (r.size > size - off)
            break;
        off += r.size;
    }
    return n;
}

/* Reads the log open in s->fd: checks it, leaves a torn tail out (it stays in the file
 * until the first write, see keep_torn_tail), rebuilds the index. */
static kv_status load(kv_store *s, uint64_t buckets)
{
    struct stat sb;
    if (fstat(s->fd, &sb) != 0)
        return fail_errno(s, "stat", errno);
    uint64_t size = (uint64_t)sb.st_size;
    if (size < KV_HEADER_BYTES)
        return fail(s, KV_ECORRUPT, "%s: %llu bytes, too short for a log header", s->log_path,
                    (unsigned long long)size);
    if (size > KV_MAX_LOG_BYTES || size > SIZE_MAX)
        return fail(s, KV_ECORRUPT, "%s: larger than a log can be", s->log_path);
    s->end = size;
    remap(s);
    if (!s->map)
        return fail_errno(s, "mmap", errno);
    kv_status st = check_header(s, s->map);
    uint64_t good_end = 0, puts = 0, dels = 0;
    if (st == KV_OK)
        st = scan(s, s->map, size, &good_end, &puts, &dels);
    if (st != KV_OK)
        return st;
    if (good_end < size) {
        s->truncated = size - good_end;
        s->torn_at = good_end;
        s->torn_records = count_torn(s->map, good_end, size);
        s->end = good_end;
        remap(s);
    }
    if (!buckets && !kv_index_buckets_for(puts > dels ? puts - dels : 0, &buckets))
        return fail(s, KV_ENOMEM, "%s: too many records for the index", s->log_path);
    if ((st = kv_index_init(&s->index, buckets, s->seed)) != KV_OK)
        return fail(s, st, "%s: cannot make an index of %llu buckets: %s", s->log_path,
                    (unsigned long long)buckets, kv_strerror(st));
    s->records = 0;
    s->live_bytes = 0;
    return replay(s);
}

static uint64_t random_seed(void)
{
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
    return seed;
}

/* The end of writing a new file whose writes succeeded so far (ok): synced and closed.
 * Returns whether all of it succeeded; *err is the errno of the first failure. */
static bool finish_file(int fd, bool ok, int *err)
{
    if (ok && fsync(fd) != 0) {
        ok = false;
        *err = errno;
    }
    if (close(fd) != 0 && ok) {
        ok = false;
        *err = errno;
    }
    return ok;
}

/* A new, empty log: written under a temporary name and renamed, so that a crash never
 * leaves a log without its header. */
static kv_status create_log(kv_store *s, uint64_t seed)
{
    uint8_t h[KV_HEADER_BYTES];
    make_header(h, seed ? seed : random_seed());
    int fd = openat(s->dirfd, KV_COMPACT_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return fail_errno(s, "cannot create", errno);
    bool ok = write_all(fd, h, sizeof h, 0);
    int err = errno;
    ok = finish_file(fd, ok, &err);
    if (ok && renameat(s->dirfd, KV_COMPACT_NAME, s->dirfd, KV_LOG_NAME) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        unlinkat(s->dirfd, KV_COMPACT_NAME, 0);
        return fail_errno(s, "cannot create", err);
    }
    fsync(s->dirfd);
    return KV_OK;
}

static kv_status open_dir(kv_store *s, const char *dir, bool create)
{
    s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dirfd < 0 && errno == ENOENT && create) {
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return fail(s, KV_EIO, "%s: cannot create the directory: %s", dir, strerror(errno));
        s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (s->dirfd < 0) {
        if (errno == ENOENT)
            return fail(s, KV_ENOSTORE, "%s: no such store", dir);
        return fail(s, KV_EIO, "%s: %s", dir, strerror(errno));
    }
    if (flock(s->dirfd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            return fail(s, KV_EBUSY, "%s: the store is in use by another process", dir);
        return fail(s, KV_EIO, "%s: cannot lock: %s", dir, strerror(errno));
    }
    /* A compaction or a creation that a crash interrupted: the log is whole without it. */
    if (unlinkat(s->dirfd, KV_COMPACT_NAME, 0) != 0 && errno != ENOENT)
        return fail(s, KV_EIO, "%s/%s: cannot remove: %s", dir, KV_COMPACT_NAME, strerror(errno));
    return KV_OK;
}

static void destroy(kv_store *s)
{
    unmap(s);
    kv_index_free(&s->index);
    if (s->fd >= 0)
        close(s->fd);
    if (s->dirfd >= 0)
        close(s->dirfd); /* releases the lock */
    free(s->rbuf);
    free(s->wbuf);
    free(s->log_path);
    free(s);
}

kv_status kv_open(const char *dir, const kv_options *o, kv_store **out, char *err)
{
    static const kv_options defaults = {false, false, 0, 0};
    if (err)
        err[0] = '\0';
    if (!dir || !out || !*dir) {
        if (err)
            snprintf(err, KV_ERROR_MAX, "kv_open: no directory given");
        return KV_EINVAL;
    }
    if (!o)
        o = &defaults;
    if (o->buckets % 2 || o->buckets > CF_PLACE_MAX_BUCKETS) {
        if (err)
            snprintf(err, KV_ERROR_MAX, "kv_open: the index size must be even");
        return KV_EINVAL;
    }
    kv_store *s = calloc(1, sizeof *s);
    size_t plen = strlen(dir) + 1 + sizeof KV_LOG_NAME;
    char *path = malloc(plen);
    if (!s || !path) {
        free(s);
        free(path);
        if (err)
            snprintf(err, KV_ERROR_MAX, "%s: out of memory", dir);
        return KV_ENOMEM;
    }
    snprintf(path, plen, "%s/%s", dir, KV_LOG_NAME);
    s->log_path = path;
    s->fd = -1;
    s->sync_each = o->sync_each;
    s->io = (kv_index_io){io_key_is, io_hash_at, s};

    kv_status st = open_dir(s, dir, o->create);
    if (st == KV_OK) {
        s->fd = openat(s->dirfd, KV_LOG_NAME, O_RDWR | O_CLOEXEC);
        if (s->fd < 0 && errno == ENOENT) {
            if (!o->create)
                st = fail(s, KV_ENOSTORE, "%s: no store here (no %s)", dir, KV_LOG_NAME);
            else if ((st = create_log(s, o->seed)) == KV_OK)
                s->fd = openat(s->dirfd, KV_LOG_NAME, O_RDWR | O_CLOEXEC);
        }
        if (st == KV_OK && s->fd < 0)
            st = fail_errno(s, "cannot open", errno);
    }
    if (st == KV_OK)
        st = load(s, o->buckets);
    if (st != KV_OK) {
        if (err)
            memcpy(err, s->err, KV_ERROR_MAX);
        destroy(s);
        return st;
    }
    *out = s;
    return KV_OK;
}

kv_status kv_sync(kv_store *s)
{
    if (!s)
        return KV_EINVAL;
    if (s->dirty && fdatasync(s->fd) != 0)
        return fail_errno(s, "sync", errno);
    s->dirty = false;
    return KV_OK;
}

kv_status kv_close(kv_store *s)
{
    if (!s)
        return KV_OK;
    kv_status st = kv_sync(s);
    destroy(s);
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* Changing the store                                                                   */
/* ------------------------------------------------------------------------------------ */

static kv_status usable(kv_store *s)
{
    if (s->broken)
        return fail(s, KV_EIO, "%s: an earlier failure left the store inconsistent: reopen it",
                    s->log_path);
    return KV_OK;
}

static bool key_ok(const void *key, size_t klen)
{
    return key && klen > 0 && klen <= KV_MAX_KEY;
}

/* Attempts at a free name for a torn tail's file (.torn-OFFSET, then .torn-OFFSET.N): a
 * log torn twice at the same offset keeps both. */
#define KV_TORN_ATTEMPTS 100u

/* Is a torn tail that kv_open found still in the log file? */
static bool torn_pending(const kv_store *s)
{
    return s->truncated && !s->torn_name[0];
}

/* Before the log changes: if kv_open left a torn tail in the file, copy its bytes to a
 * file of their own beside the log, sync it and the directory, and only then cut the
 * log. A failure leaves the log as it was (and no partial copy). */
static kv_status keep_torn_tail(kv_store *s)
{
    if (!torn_pending(s))
        return KV_OK;
    char name[KV_TORN_NAME_MAX];
    int fd = -1;
    for (unsigned i = 0; fd < 0 && i < KV_TORN_ATTEMPTS; i++) {
        if (i == 0)
            snprintf(name, sizeof name, KV_LOG_NAME ".torn-%llu", (unsigned long long)s->torn_at);
        else
            snprintf(name, sizeof name, KV_LOG_NAME ".torn-%llu.%u", (unsigned long long)s->torn_at,
                     i);
        fd = openat(s->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            return fail_errno(s, "cannot keep the torn tail", errno);
    }
    if (fd < 0)
        return fail(s, KV_EIO, "%s: no free name to keep the torn tail at offset %llu", s->log_path,
                    (unsigned long long)s->torn_at);
    bool ok = grow_buffer(&s->rbuf, &s->rbuf_cap, KV_COPY_BUFFER);
    int err = ok ? 0 : ENOMEM;
    for (uint64_t done = 0; ok && done < s->truncated;) {
        size_t n =
            s->truncated - done < KV_COPY_BUFFER ? (size_t)(s->truncated - done) : KV_COPY_BUFFER;
        ssize_t r = pread(s->fd, s->rbuf, n, (off_t)(s->torn_at + done));
        if (r < 0 && errno == EINTR)
            continue;
        ok = r > 0 && write_all(fd, s->rbuf, (size_t)r, done);
        if (!ok)
            err = r == 0 ? EIO : errno; /* a tail shorter than at open; or the error */
        done += ok ? (uint64_t)r : 0;
    }
    if (!finish_file(fd, ok, &err)) {
        unlinkat(s->dirfd, name, 0);
        return fail_errno(s, "cannot keep the torn tail", err);
    }
    fsync(s->dirfd);
    if (ftruncate(s->fd, (off_t)s->torn_at) != 0 || fdatasync(s->fd) != 0)
        return fail_errno(s, "cannot cut off the torn tail (its bytes are kept)", errno);
    memcpy(s->torn_name, name, sizeof name);
    return KV_OK;
}

kv_status kv_recover(kv_store *s)
{
    if (!s)
        return KV_EINVAL;
    kv_status st = usable(s);
    return st == KV_OK ? keep_torn_tail(s) : st;
}

/* Appends one record at s->end. On failure the log is cut back to where it was. */
static kv_status append(kv_store *s, unsigned type, const void *key, size_t klen, const void *value,
                        size_t vlen, uint64_t *size)
{
    uint64_t n = KV_REC_HEAD + (uint64_t)klen + vlen + KV_REC_TAIL;
    kv_status st = keep_torn_tail(s);
    if (st != KV_OK)
        return st;
    if (s->end + n > KV_MAX_LOG_BYTES)
        return fail(s, KV_EFULL, "%s: the log is full (%llu bytes): compact it", s->log_path,
                    (unsigned long long)s->end);
    if (!grow_buffer(&s->wbuf, &s->wbuf_cap, (size_t)n))
        return fail(s, KV_ENOMEM, "%s: out of memory for a record of %llu bytes", s->log_path,
                    (unsigned long long)n);
    uint8_t *p = s->wbuf;
    p[0] = (uint8_t)type;
    p[1] = p[2] = p[3] = 0;
    store_le32(p + 4, (uint32_t)klen);
    store_le32(p + 8, (uint32_t)vlen);
    memcpy(p + KV_REC_HEAD, key, klen);
    if (vlen)
        memcpy(p + KV_REC_HEAD + klen, value, vlen);
    seal_record(p, n, s->end);
    if (!write_all(s->fd, p, (size_t)n, s->end) || (s->sync_each && fdatasync(s->fd) != 0)) {
        int err = errno;
        if (ftruncate(s->fd, (off_t)s->end) != 0)
            s->broken = true;
        return fail_errno(s, "cannot append", err);
    }
    s->end += n;
    s->dirty = true;
    s->records++;
    *size = n;
    return KV_OK;
}

kv_status kv_put(kv_store *s, const void *key, size_t klen, const void *value, size_t vlen)
{
    if (!s)
        return KV_EINVAL;
    if (!key_ok(key, klen) || (!value && vlen) || vlen > KV_MAX_VALUE)
        return fail(s, KV_EINVAL, "put: the key must be 1 to %u bytes and the value at most %zu",
                    KV_MAX_KEY, KV_MAX_VALUE);
    kv_status st = usable(s);
    if (st != KV_OK)
        return st;
    uint64_t h = cf_hash_seeded(s->seed, key, klen), pos, size;
    st = kv_index_find(&s->index, h, key, klen, &s->io, &pos);
    if (st != KV_OK && st != KV_NOT_FOUND)
        return st;
    bool found = st == KV_OK;
    uint64_t old_size = s->match_size, off = s->end;
    /* A new key enters the index first, while growing it can still fail harmlessly. */
    if (!found && (st = kv_index_insert(&s->index, h, off, &s->io)) != KV_OK)
        return st == KV_ENOMEM ? fail(s, st, "%s: out of memory for the index", s->log_path) : st;
    if ((st = append(s, KV_REC_PUT, key, klen, value, vlen, &size)) != KV_OK) {
        if (!found)
            kv_index_remove(&s->index, kv_index_find_offset(&s->index, h, off));
        return st;
    }
    if (found) {
        kv_index_set_offset(&s->index, pos, off);
        s->live_bytes -= old_size;
    }
    s->live_bytes += size;
    return KV_OK;
}

kv_status kv_del(kv_store *s, const void *key, size_t klen)
{
    if (!s)
        return KV_EINVAL;
    if (!key_ok(key, klen))
        return fail(s, KV_EINVAL, "del: the key must be 1 to %u bytes", KV_MAX_KEY);
    kv_status st = usable(s);
    if (st != KV_OK)
        return st;
    uint64_t h = cf_hash_seeded(s->seed, key, klen), pos, size;
    if ((st = kv_index_find(&s->index, h, key, klen, &s->io, &pos)) != KV_OK)
        return st;
    uint64_t old_size = s->match_size;
    if ((st = append(s, KV_REC_DEL, key, klen, NULL, 0, &size)) != KV_OK)
        return st;
    kv_index_remove(&s->index, pos);
    s->live_bytes -= old_size;
    return KV_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Reading values                                                                       */
/* ------------------------------------------------------------------------------------ */

static kv_status lookup(kv_store *s, const void *key, size_t klen, uint64_t *off)
{
    if (!key_ok(key, klen))
        return fail(s, KV_EINVAL, "the key must be 1 to %u bytes", KV_MAX_KEY);
    kv_status st = usable(s);
    if (st != KV_OK)
        return st;
    uint64_t pos;
    st = kv_index_find(&s->index, cf_hash_seeded(s->seed, key, klen), key, klen, &s->io, &pos);
    if (st == KV_OK)
        *off = kv_index_offset(&s->index, pos);
    return st;
}

kv_status kv_has(kv_store *s, const void *key, size_t klen)
{
    uint64_t off = 0;
    return s ? lookup(s, key, klen, &off) : KV_EINVAL;
}

kv_status kv_get(kv_store *s, const void *key, size_t klen, void **value, size_t *vlen)
{
    if (!s || !value || !vlen)
        return KV_EINVAL;
    uint64_t off = 0;
    kv_status st = lookup(s, key, klen, &off);
    kv_rec r = {0, 0, 0, 0};
    const uint8_t *p;
    if (st == KV_OK)
        st = read_record(s, off, UINT64_MAX, &r, &p);
    if (st != KV_OK)
        return st;
    if (load_le64(p + r.size - KV_REC_TAIL) != checksum(p, r.size - KV_REC_TAIL, off))
        return fail(s, KV_ECORRUPT, "%s: damaged record at offset %llu (checksum mismatch)",
                    s->log_path, (unsigned long long)off);
    uint8_t *v = malloc((size_t)r.vlen + 1);
    if (!v)
        return fail(s, KV_ENOMEM, "out of memory for a value of %u bytes", r.vlen);
    memcpy(v, p + KV_REC_HEAD + r.klen, r.vlen);
    v[r.vlen] = 0;
    *value = v;
    *vlen = r.vlen;
    return KV_OK;
}

/* Calls fn(ctx, offset, record header, record bytes) for every live record, in log order,
 * from a fresh map of the whole log. */
typedef int (*live_fn)(void *ctx, uint64_t off, const kv_rec *r, const uint8_t *p);

static kv_status each_live(kv_store *s, live_fn fn, void *ctx)
{
    remap(s);
    if (!s->map)
        return fail_errno(s, "mmap", errno);
    for (uint64_t off = KV_HEADER_BYTES; off < s->end;) {
        kv_rec r = {0, 0, 0, 0};
        if (s->end - off < KV_REC_HEAD || !parse_head(s->map + off, off, &r) ||
            r.size > s->end - off)
            return fail(s, KV_ECORRUPT, "%s: damaged record at offset %llu", s->log_path,
                        (unsigned long long)off);
        const uint8_t *p = s->map + off;
        if (r.type == KV_REC_PUT &&
            kv_index_find_offset(&s->index, cf_hash_seeded(s->seed, p + KV_REC_HEAD, r.klen),
                                 off) != UINT64_MAX) {
            int rc = fn(ctx, off, &r, p);
            if (rc < 0)
                return KV_EIO; /* the caller knows why */
            if (rc > 0)
                break;
        }
        off += r.size;
    }
    return KV_OK;
}

typedef struct visit_ctx {
    kv_visit_fn fn;
    void *ctx;
} visit_ctx;

static int visit_one(void *ctx, uint64_t off, const kv_rec *r, const uint8_t *p)
{
    (void)off;
    visit_ctx *v = ctx;
    return v->fn(v->ctx, p + KV_REC_HEAD, r->klen, p + KV_REC_HEAD + r->klen, r->vlen) ? 1 : 0;
}

kv_status kv_foreach(kv_store *s, kv_visit_fn fn, void *ctx)
{
    if (!s || !fn)
        return KV_EINVAL;
    kv_status st = usable(s);
    if (st != KV_OK)
        return st;
    visit_ctx v = {fn, ctx};
    return each_live(s, visit_one, &v);
}

/* ------------------------------------------------------------------------------------ */
/* Compaction                                                                           */
/* ------------------------------------------------------------------------------------ */

/* Bytes compaction gathers before each write. */
#define KV_COMPACT_BUFFER ((size_t)1 << 20)

typedef struct compact_ctx {
    kv_store *s;
    int fd;
    uint64_t out_off; /* where the next record goes in the new log */
    uint8_t *buf;
    size_t used;
    int err; /* errno of a failed write */
} compact_ctx;

static bool compact_flush(compact_ctx *c)
{
    if (c->used && !write_all(c->fd, c->buf, c->used, c->out_off - c->used)) {
        c->err = errno;
        return false;
    }
    c->used = 0;
    return true;
}

/* Appends bytes to the new log through the buffer. */
static bool compact_write(compact_ctx *c, const uint8_t *p, size_t n)
{
    while (n) {
        if (c->used == KV_COMPACT_BUFFER && !compact_flush(c))
            return false;
        size_t room = KV_COMPACT_BUFFER - c->used, k = n < room ? n : room;
        memcpy(c->buf + c->used, p, k);
        c->used += k;
        c->out_off += k;
        p += k;
        n -= k;
    }
    return true;
}

static int compact_one(void *ctx, uint64_t off, const kv_rec *r, const uint8_t *p)
{
    (void)off;
    compact_ctx *c = ctx;
    kv_store *s = c->s;
    /* A record is rewritten whole, sealed for its new offset. */
    if (!grow_buffer(&s->wbuf, &s->wbuf_cap, (size_t)r->size)) {
        c->err = ENOMEM;
        return -1;
    }
    memcpy(s->wbuf, p, (size_t)r->size);
    seal_record(s->wbuf, r->size, c->out_off);
    return compact_write(c, s->wbuf, (size_t)r->size) ? 0 : -1;
}

/* Reads the new log back before it replaces the old one: every record must pass its
 * checks, and the live keys must all be there. Cheap (the pages are still cached), and it
 * means that no fault of the copy, in this code or below it, can cost the old log. */
static bool new_log_ok(kv_store *s, int fd, uint64_t size)
{
    void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return false;
    uint64_t good_end = 0, puts = 0, dels = 0;
    bool ok = check_header(s, m) == KV_OK && scan(s, m, size, &good_end, &puts, &dels) == KV_OK &&
              good_end == size && puts == s->index.items && dels == 0;
    munmap(m, (size_t)size);
    return ok;
}

kv_status kv_compact(kv_store *s)
{
    if (!s)
        return KV_EINVAL;
    kv_status st = usable(s);
    if (st == KV_OK)
        st = keep_torn_tail(s); /* the new log will not have it */
    if (st != KV_OK)
        return st;
    struct stat sb;
    if (fstat(s->fd, &sb) != 0)
        return fail_errno(s, "stat", errno);
    compact_ctx c = {s, -1, KV_HEADER_BYTES, malloc(KV_COMPACT_BUFFER), 0, 0};
    if (!c.buf)
        return fail(s, KV_ENOMEM, "%s: out of memory for compaction", s->log_path);
    c.fd = openat(s->dirfd, KV_COMPACT_NAME, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
                  sb.st_mode & 07777);
    if (c.fd < 0) {
        int err = errno;
        free(c.buf);
        return fail_errno(s, "compact: cannot create the new log", err);
    }
    make_header(c.buf, s->seed);
    c.used = KV_HEADER_BYTES;
    st = each_live(s, compact_one, &c);
    if (c.err)
        st = fail_errno(s, "compact: cannot write the new log", c.err);
    else if (st == KV_OK && (!compact_flush(&c) || fsync(c.fd) != 0))
        st = fail_errno(s, "compact: cannot write the new log", c.err ? c.err : errno);
    free(c.buf);
    if (st == KV_OK && !new_log_ok(s, c.fd, c.out_off))
        st = fail(s, KV_EIO, "%s: compact: the new log failed its check; the old one is kept",
                  s->log_path);
    if (st == KV_OK && renameat(s->dirfd, KV_COMPACT_NAME, s->dirfd, KV_LOG_NAME) != 0)
        st = fail_errno(s, "compact: cannot rename the new log into place", errno);
    if (st != KV_OK) {
        close(c.fd);
        unlinkat(s->dirfd, KV_COMPACT_NAME, 0);
        return st;
    }
    fsync(s->dirfd);
    /* The new log is in place: read it as kv_open would. */
    unmap(s);
    close(s->fd);
    s->fd = c.fd;
    s->dirty = false;
    uint64_t truncated = s->truncated, torn_records = s->torn_records;
    uint64_t rehashes = s->index.rehashes;
    kv_index_free(&s->index);
    st = load(s, 0);
    s->truncated = truncated; /* what kv_open found, which the stats keep telling */
    s->torn_records = torn_records;
    s->index.rehashes += rehashes;
    if (st != KV_OK)
        s->broken = true;
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* Figures and messages                                                                 */
/* ------------------------------------------------------------------------------------ */

void kv_get_stats(const kv_store *s, kv_stats *out)
{
    if (!s || !out)
        return;
    memset(out, 0, sizeof *out);
    out->records = s->records;
    out->live_keys = s->index.items;
    out->log_bytes = s->end;
    out->live_bytes = s->live_bytes;
    out->dead_bytes = s->end - KV_HEADER_BYTES - s->live_bytes;
    out->index_slots = s->index.buckets * KV_INDEX_SLOTS;
    out->index_bytes = kv_index_bytes(&s->index);
    out->rehashes = s->index.rehashes;
    out->tag_misses = s->tag_misses;
    out->index_load = out->index_slots ? (double)out->live_keys / (double)out->index_slots : 0;
    out->bytes_per_key = out->live_keys ? (double)out->index_bytes / (double)out->live_keys : 0;
    out->truncated = s->truncated;
    out->torn_offset = s->torn_at;
    out->torn_records = s->torn_records;
    out->torn_kept = s->truncated && !torn_pending(s);
    memcpy(out->torn_name, s->torn_name, sizeof out->torn_name);
}

const char *kv_error(const kv_store *s)
{
    return s ? s->err : "";
}

const char *kv_strerror(kv_status st)
{
    switch (st) {
    case KV_OK:
        return "success";
    case KV_NOT_FOUND:
        return "no such key";
    case KV_EINVAL:
        return "invalid argument";
    case KV_ENOMEM:
        return "out of memory";
    case KV_EIO:
        return "input/output error";
    case KV_ECORRUPT:
        return "the log is damaged";
    case KV_EBUSY:
        return "the store is in use by another process";
    case KV_ENOSTORE:
        return "no such store";
    case KV_EFULL:
        return "the log is full";
    }
    return "unknown status";
}
