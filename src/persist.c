/*
 * persist.c - the file format (docs/FORMAT.md is its specification): serializing into a
 * buffer, validating and deserializing, atomic saves, loads, read-only memory-mapped
 * filters, and the chunked dump and load that the Redis module's SCANDUMP and LOADCHUNK
 * use.
 *
 * A file is
 *
 *   header (64 B) | descriptor per sub-filter (32 B) | stash entry (16 B each) | meta sum
 *   | zeros to a multiple of 64 | table 0 | zeros to 64 | ... | table n-1 | zeros to 64
 *   | file sum (8 B)
 *
 * The meta sum covers everything before it, so the header can be trusted (and the whole
 * layout computed from it) without reading the tables; the file sum covers everything
 * before it. Validation never trusts a field before checking it: lengths are compared
 * with the bytes actually present, every size is computed with overflow checks, and
 * nothing is allocated until every check has passed.
 */
#define _DEFAULT_SOURCE /* realpath with PATH_MAX, DT_ types */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "plain.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* "\x89CUCKOO\n": the high byte catches 7-bit transfers, the newline catches text-mode
 * conversions, and the letters make `head -c 8` readable. */
static const uint8_t cf__magic[8] = {0x89, 'C', 'U', 'C', 'K', 'O', 'O', '\n'};

#define CF__HEADER_BYTES 64u /* fixed header; a multiple of 8 so fields stay aligned */
#define CF__DESC_BYTES   32u /* per sub-filter: buckets, items, table offset, table bytes */
#define CF__ENTRY_BYTES  16u /* per stash entry: bucket, fingerprint, sub-filter */
#define CF__SUM_BYTES    8u  /* an XXH3-64 checksum */
#define CF__ALIGN        64u /* table alignment in the file: a cache line, for mmap */
#define CF__HASH_XXH3    1u  /* hash id: XXH3-64 of the key with the seed, split as in v1 */
#define CF__HASH_RB      2u  /* hash id: RedisBloom's layout (CF_REDISBLOOM, redisbloom.c) */
#define CF__FLAG_WIDEN   1u  /* header flag: sub-filters widen their fingerprints (CF__H_WIDEN) */
#define CF__FLAG_SEMI    2u  /* header flag: semi-sorted buckets (CF_SEMI_SORT) */
#define CF__FLAG_WINDOW  4u  /* header flag: a windowed file, its generations' images after it */
#define CF__FLAGS_KNOWN  (CF__FLAG_WIDEN | CF__FLAG_SEMI)
#define CF__GEN_BYTES    16u /* per generation of a windowed file: its image's offset and length */
#define CF__LOAD_FLAGS   CF_CONCURRENT /* what a loader may add: not a property of the file */

/* Header field offsets (docs/FORMAT.md, "Header"). */
enum {
    CF__H_MAGIC = 0,
    CF__H_VERSION = 8,
    CF__H_HEADER_BYTES = 10,
    CF__H_FLAGS = 12,
    CF__H_TOTAL = 16,
    CF__H_SEED = 24,
    CF__H_CAPACITY = 32,
    CF__H_FP_BITS = 40,
    CF__H_BUCKET = 41,
    CF__H_HASH = 42,
    CF__H_STASH = 43,
    CF__H_KICKS = 44,
    CF__H_WIDEN = 46,
    CF__H_EXPANSION = 48,
    CF__H_MAX_TABLES = 52,
    CF__H_TABLES = 56,
    CF__H_RESERVED2 = 60,
};

/* Windowed file header field offsets (docs/FORMAT.md, "Windowed files"): the first 24
 * bytes are every file's. */
enum {
    CF__W_WINDOW = 24,
    CF__W_GENERATION = 32,
    CF__W_GENERATIONS = 40,
    CF__W_RESERVED = 44,
};

/* Sub-filter descriptor field offsets (docs/FORMAT.md, "Sub-filter descriptor"). */
enum {
    CF__D_BUCKETS = 0,
    CF__D_ITEMS = 8,
    CF__D_OFFSET = 16,
    CF__D_LENGTH = 24,
};

/* Stash entry field offsets (docs/FORMAT.md, "Stash entry"). */
enum {
    CF__E_BUCKET = 0,
    CF__E_FP = 8,
    CF__E_TABLE = 12,
};

/* Writes to a file go through a buffer of this size, so that a filter of many small
 * sub-filters does not cost a system call per descriptor. */
#define CF__STAGE_BYTES 16384u

/* Attempts at a fresh temporary name before cf_save gives up (each collision means
 * another process picked the same name in the same nanosecond). */
#define CF__TMP_ATTEMPTS 64u

static uint64_t cf__align_up(uint64_t x)
{
    return (x + CF__ALIGN - 1) & ~(uint64_t)(CF__ALIGN - 1);
}

/* ------------------------------------------------------------------------------------ */
/* Layout                                                                               */
/* ------------------------------------------------------------------------------------ */

static uint64_t cf__meta_len(unsigned ntables, unsigned nstash)
{
    return CF__HEADER_BYTES + (uint64_t)ntables * CF__DESC_BYTES +
           (uint64_t)nstash * CF__ENTRY_BYTES + CF__SUM_BYTES;
}

/* Only a filter that grows by 1 can have many sub-filters (a factor of 2 or more reaches
 * the table size limit within 58 steps). Its tables all have the same buckets, and those
 * of one fingerprint width (all of them, or a run between two widenings) take the same
 * room in the file: the tables from i up to the returned index, before n, do. A filter
 * that grows by more has a run per table. So a walk over a file's tables takes a step per
 * run, at most 30 for any number of sub-filters. */
static unsigned cf__run_end(const cf_filter *f, unsigned i, unsigned n)
{
    if (f->expansion != 1)
        return i + 1;
    unsigned ext = f->tables[i].shape->ext;
    if (f->widen == 0 || ext == 32u - f->fp_bits)
        return n;
    uint64_t end = (uint64_t)256u * ext / f->widen + 1u; /* the first table past this width */
    return end < n ? (unsigned)end : n;
}

/* The room table i takes in the file: its bytes, aligned. */
static uint64_t cf__table_stride(const cf_filter *f, unsigned i)
{
    return cf__align_up(cf__data_bytes(f->tables[i].shape, f->tables[i].buckets));
}

/* Where table k of a live filter starts in its file (k == ntables: where the file sum
 * starts), run by run. */
static uint64_t cf__table_offset(const cf_filter *f, unsigned k)
{
    uint64_t pos = cf__align_up(cf__meta_len(cf__ntables_all(f), f->stash_n));
    for (unsigned i = 0, j; i < k; i = j) {
        j = cf__run_end(f, i, k);
        pos += (j - i) * cf__table_stride(f, i); /* < 2^63: 65536 tables of at most 2^46 */
    }
    return pos;
}

static uint64_t cf__plain_len(const cf_filter *f)
{
    return cf__table_offset(f, cf__ntables_all(f)) + CF__SUM_BYTES;
}

/* A windowed file's meta section: header, one entry per generation, meta sum. */
static uint64_t cf__window_meta_len(unsigned n)
{
    return CF__HEADER_BYTES + (uint64_t)n * CF__GEN_BYTES + CF__SUM_BYTES;
}

/* The next image's place in a windowed file, after one that ended at `end` (the meta
 * section's end for the first). */
static uint64_t cf__image_next(uint64_t end)
{
    return cf__align_up(end);
}

/* The generation whose image is i-th in a windowed file: oldest first. */
static const cf_filter *cf__image_gen(const cf_filter *f, unsigned i)
{
    const struct cf__window *w = cf__window_of(f);
    return cf__gen_at(w, w->n - 1u - i);
}

/* The length of image i of a windowed file: its generation's file, or while the window is
 * loading by chunks the length its header chunk gave (which every image is held to). */
static uint64_t cf__image_len(const cf_filter *f, unsigned i)
{
    const struct cf__window *w = cf__window_of(f);
    return w->loading ? w->loading[i] : cf__plain_len(cf__image_gen(f, i));
}

static uint64_t cf__file_len(const cf_filter *f)
{
    if (!cf__is_window(f))
        return cf__plain_len(f);
    uint64_t end = cf__window_meta_len(cf__window_of(f)->n);
    for (unsigned i = 0; i < cf__window_of(f)->n; i++)
        end = cf__image_next(end) + cf__image_len(f, i);
    return end;
}

/* ------------------------------------------------------------------------------------ */
/* Writing: one routine emits the bytes, into a buffer, a file or only a checksum        */
/* ------------------------------------------------------------------------------------ */

typedef struct cf__sink {
    uint8_t *out;   /* buffer mode: write here */
    int fd;         /* file mode (out NULL, fd >= 0); neither: checksums only */
    uint8_t *stage; /* file mode: CF__STAGE_BYTES of buffer */
    size_t staged;
    int err;            /* errno of the first failed write, 0 if none */
    bool in_meta;       /* still in the meta section, which has its own checksum */
    XXH3_state_t meta;  /* of the meta section so far */
    XXH3_state_t whole; /* of the file so far */
} cf__sink;

static void cf__sink_init(cf__sink *k, uint8_t *out, int fd, uint8_t *stage)
{
    k->out = out;
    k->fd = fd;
    k->stage = stage;
    k->staged = 0;
    k->err = 0;
    k->in_meta = true;
    XXH3_64bits_reset(&k->meta);
    XXH3_64bits_reset(&k->whole);
}

static int cf__write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void cf__flush(cf__sink *k)
{
    if (k->staged && !k->err)
        k->err = cf__write_all(k->fd, k->stage, k->staged);
    k->staged = 0;
}

static void cf__emit(cf__sink *k, const void *p, size_t n)
{
    if (n == 0)
        return;
    if (k->in_meta)
        XXH3_64bits_update(&k->meta, p, n);
    XXH3_64bits_update(&k->whole, p, n);
    if (k->out) {
        memcpy(k->out, p, n);
        k->out += n;
    } else if (k->fd >= 0 && !k->err) {
        if (k->staged + n > CF__STAGE_BYTES)
            cf__flush(k);
        if (n >= CF__STAGE_BYTES) {
            if (!k->err)
                k->err = cf__write_all(k->fd, p, n);
        } else {
            memcpy(k->stage + k->staged, p, n);
            k->staged += n;
        }
    }
}

static void cf__emit_zeros(cf__sink *k, uint64_t n)
{
    static const uint8_t zeros[CF__ALIGN];
    while (n > 0) {
        size_t step = n < sizeof zeros ? (size_t)n : sizeof zeros;
        cf__emit(k, zeros, step);
        n -= step;
    }
}

/* The 64-byte header of f's file. */
static void cf__header(const cf_filter *f, uint8_t h[CF__HEADER_BYTES])
{
    const cf__shape *s = cf__shape0(f);
    memset(h, 0, CF__HEADER_BYTES);
    memcpy(h + CF__H_MAGIC, cf__magic, sizeof cf__magic);
    cf__store_le16(h + CF__H_VERSION, CF_FORMAT_VERSION);
    cf__store_le16(h + CF__H_HEADER_BYTES, CF__HEADER_BYTES);
    cf__store_le64(h + CF__H_TOTAL, cf__plain_len(f));
    cf__store_le64(h + CF__H_SEED, cf__seed(f));
    cf__store_le64(h + CF__H_CAPACITY, f->capacity);
    h[CF__H_FP_BITS] = (uint8_t)s->f;
    h[CF__H_BUCKET] = (uint8_t)s->b;
    h[CF__H_HASH] = (uint8_t)(cf__is_rb(f) ? CF__HASH_RB : CF__HASH_XXH3);
    h[CF__H_STASH] = (uint8_t)f->stash_n;
    cf__store_le16(h + CF__H_KICKS, (uint16_t)f->max_kicks);
    cf__store_le32(h + CF__H_FLAGS,
                   (f->widen ? CF__FLAG_WIDEN : 0u) | (s->semi ? CF__FLAG_SEMI : 0u));
    cf__store_le16(h + CF__H_WIDEN, (uint16_t)f->widen);
    cf__store_le32(h + CF__H_EXPANSION, f->expansion);
    cf__store_le32(h + CF__H_MAX_TABLES, cf__max_tables(f));
    cf__store_le32(h + CF__H_TABLES, cf__ntables_all(f));
}

/* The meta section: header, descriptors, stash, meta sum. Returns the meta sum. */
static uint64_t cf__emit_meta(cf__sink *k, const cf_filter *f)
{
    uint8_t h[CF__HEADER_BYTES];
    cf__header(f, h);
    cf__emit(k, h, sizeof h);

    for (unsigned i = 0; i < cf__ntables_all(f); i++) {
        const cf__table *t = &f->tables[i];
        uint8_t d[CF__DESC_BYTES];
        cf__store_le64(d + CF__D_BUCKETS, t->buckets);
        cf__store_le64(d + CF__D_ITEMS, t->items);
        cf__store_le64(d + CF__D_OFFSET, cf__table_offset(f, i));
        cf__store_le64(d + CF__D_LENGTH, cf__data_bytes(t->shape, t->buckets));
        cf__emit(k, d, sizeof d);
    }
    for (unsigned e = 0; e < f->stash_n; e++) {
        uint8_t x[CF__ENTRY_BYTES];
        const cf__stash *y = &f->more->stash[e];
        cf__store_le64(x + CF__E_BUCKET, y->bucket);
        cf__store_le32(x + CF__E_FP, y->fp);
        cf__store_le32(x + CF__E_TABLE, y->table);
        cf__emit(k, x, sizeof x);
    }
    uint64_t sum = XXH3_64bits_digest(&k->meta);
    uint8_t b[CF__SUM_BYTES];
    cf__store_le64(b, sum);
    cf__emit(k, b, sizeof b);
    k->in_meta = false;
    return sum;
}

/* Everything after the meta section. Returns the file sum. */
static uint64_t cf__emit_body(cf__sink *k, const cf_filter *f)
{
    uint64_t pos = cf__meta_len(f->ntables, f->stash_n);
    for (unsigned i = 0; i <= f->ntables; i++) {
        uint64_t start = cf__table_offset(f, i);
        cf__emit_zeros(k, start - pos);
        if (i == f->ntables)
            break;
        uint64_t len = cf__data_bytes(f->tables[i].shape, f->tables[i].buckets);
        cf__emit(k, f->tables[i].data, (size_t)len);
        pos = start + len;
    }
    uint64_t sum = XXH3_64bits_digest(&k->whole);
    uint8_t b[CF__SUM_BYTES];
    cf__store_le64(b, sum);
    cf__emit(k, b, sizeof b);
    return sum;
}

/* A new image in the same sink: its own meta and file sums start over. */
static void cf__sink_restart(cf__sink *k)
{
    k->in_meta = true;
    XXH3_64bits_reset(&k->meta);
    XXH3_64bits_reset(&k->whole);
}

static void cf__emit_window_meta(cf__sink *k, const cf_filter *f);

/* f's whole file: a plain filter's meta and body; a windowed filter's meta section (its
 * header, the generations' offsets and lengths, the meta sum), then each generation's
 * image, oldest first, each at a multiple of 64. */
static void cf__emit_file(cf__sink *k, const cf_filter *f)
{
    if (!cf__is_window(f)) {
        cf__emit_meta(k, f);
        cf__emit_body(k, f);
        return;
    }
    cf__emit_window_meta(k, f);
    const struct cf__window *w = cf__window_of(f);
    uint64_t end = cf__window_meta_len(w->n);
    for (unsigned i = 0; i < w->n; i++) {
        uint64_t at = cf__image_next(end);
        cf__emit_zeros(k, at - end);
        cf__sink_restart(k);
        const cf_filter *g = cf__image_gen(f, i);
        cf__emit_meta(k, g);
        cf__emit_body(k, g);
        end = at + cf__plain_len(g);
    }
}

/* A windowed file's meta section: its header, each image's offset and length, the meta
 * sum (the header chunk of its dump). */
static void cf__emit_window_meta(cf__sink *k, const cf_filter *f)
{
    const struct cf__window *w = cf__window_of(f);
    uint8_t h[CF__HEADER_BYTES];
    memset(h, 0, sizeof h);
    memcpy(h + CF__H_MAGIC, cf__magic, sizeof cf__magic);
    cf__store_le16(h + CF__H_VERSION, CF_FORMAT_VERSION);
    cf__store_le16(h + CF__H_HEADER_BYTES, CF__HEADER_BYTES);
    cf__store_le32(h + CF__H_FLAGS, CF__FLAG_WINDOW);
    cf__store_le64(h + CF__H_TOTAL, cf__file_len(f));
    cf__store_le64(h + CF__W_WINDOW, w->window);
    cf__store_le64(h + CF__W_GENERATION, w->generation);
    cf__store_le32(h + CF__W_GENERATIONS, w->n);
    cf__emit(k, h, sizeof h);
    uint64_t end = cf__window_meta_len(w->n);
    for (unsigned i = 0; i < w->n; i++) {
        uint8_t e[CF__GEN_BYTES];
        uint64_t at = cf__image_next(end), len = cf__image_len(f, i);
        cf__store_le64(e, at);
        cf__store_le64(e + 8, len);
        cf__emit(k, e, sizeof e);
        end = at + len;
    }
    uint8_t b[CF__SUM_BYTES];
    cf__store_le64(b, XXH3_64bits_digest(&k->meta));
    cf__emit(k, b, sizeof b);
    k->in_meta = false;
}

/* The file sum of f, computed without writing anything. */
static uint64_t cf__file_sum(const cf_filter *f)
{
    cf__sink k;
    cf__sink_init(&k, NULL, -1, NULL);
    cf__emit_meta(&k, f);
    return cf__emit_body(&k, f);
}

/* Still loading by chunks: a plain filter, or a window some of whose images have not all
 * arrived. */
static bool cf__loading_any(const cf_filter *f)
{
    return cf__load_of(f) || (cf__is_window(f) && cf__window_of(f)->loading);
}

static size_t cf__serialized_size(const cf_filter *f)
{
    if (cf__loading_any(f))
        return 0;
    uint64_t n = cf__file_len(f);
    return n > SIZE_MAX ? 0 : (size_t)n;
}

size_t cf_serialized_size(const cf_filter *f)
{
    if (!f)
        return 0;
    cf__hold(f);
    size_t n = cf__serialized_size(f);
    cf__unhold(f);
    return n;
}

static cf_status cf__serialize(const cf_filter *f, void *buf, size_t cap, size_t *written)
{
    if (!buf || cf__loading_any(f))
        return CF_EINVAL;
    size_t n = cf__serialized_size(f);
    if (n == 0 || cap < n)
        return CF_EINVAL;
    cf__sink k;
    cf__sink_init(&k, buf, -1, NULL);
    cf__emit_file(&k, f);
    if (written)
        *written = n;
    return CF_OK;
}

cf_status cf__copy_plain(const cf_filter *f, cf_filter **out)
{
    size_t n = cf__serialized_size(f);
    uint8_t *buf = n ? cf__malloc(f, n) : NULL;
    if (!buf)
        return n ? CF_ENOMEM : CF_EINVAL;
    cf_status st = cf__serialize(f, buf, n, NULL);
    if (st == CF_OK)
        st = cf_deserialize(buf, n, (f->bits & CF__B_OWN_ALLOC) ? cf__alloc_of(f) : NULL, out);
    cf__mfree(f, buf);
    return st;
}

cf_status cf_serialize(const cf_filter *f, void *buf, size_t cap, size_t *written)
{
    if (!f)
        return CF_EINVAL;
    cf__hold(f);
    cf_status st = cf__serialize(f, buf, cap, written);
    cf__unhold(f);
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* Reading: validation before anything else                                             */
/* ------------------------------------------------------------------------------------ */

/* What a checked meta section says. */
typedef struct cf__meta {
    cf__params p;
    unsigned ntables, nstash;
    uint64_t buckets0;
    uint64_t meta_len; /* header, descriptors, stash and meta sum */
    uint64_t total;    /* the file's length */
    const uint8_t *base;
} cf__meta;

/* How much of a file a buffer holds: all of it; only the meta section followed by the
 * file sum (the header chunk of a dump); or its beginning, the meta section at least (a
 * stream being read). */
typedef enum { CF__WHOLE, CF__HEADER_CHUNK, CF__PREFIX } cf__extent;

static cf_status cf__corrupt(const char **why, const char *text)
{
    *why = text;
    return CF_ECORRUPT;
}

static const uint8_t *cf__desc(const cf__meta *m, unsigned k)
{
    return m->base + CF__HEADER_BYTES + (size_t)k * CF__DESC_BYTES;
}

static const uint8_t *cf__entry(const cf__meta *m, unsigned e)
{
    return m->base + CF__HEADER_BYTES + (size_t)m->ntables * CF__DESC_BYTES +
           (size_t)e * CF__ENTRY_BYTES;
}

/* Make *sk the shape of table k of a filter of settings p, for tables taken in order: its
 * width changes at most 28 times, and only then is the shape made again. */
static void cf__shape_for(const cf__params *p, unsigned k, cf__shape *sk)
{
    unsigned ext = cf__ext_of(p->shape.f, p->widen, k);
    if (p->shape.f + ext != sk->f)
        cf__shape_init(sk, p->shape.f + ext, p->shape.b, p->shape.semi);
    sk->ext = (uint8_t)ext;
}

/* The checks every file's first 64 bytes get: magic, version, header length. */
static cf_status cf__parse_start(const uint8_t *b, size_t len, const char **why)
{
    if (len < sizeof cf__magic || memcmp(b, cf__magic, sizeof cf__magic) != 0)
        return cf__corrupt(why, len == 0 ? "empty" : "not a cuckoo filter (bad magic number)");
    if (len < CF__HEADER_BYTES)
        return cf__corrupt(why, "truncated: shorter than the 64-byte header");
    unsigned version = cf__load_le16(b + CF__H_VERSION);
    if (version == 0)
        return cf__corrupt(why, "bad format version 0");
    if (version > CF_FORMAT_VERSION) {
        *why = "written by a newer format version";
        return CF_EVERSION;
    }
    if (version < CF_FORMAT_VERSION) {
        /* Version 1 placed keys by another mapping (FORMAT.md): its tables cannot be read
         * by this one, and no such file was published. */
        *why = "written in format version 1, whose bucket mapping this library no longer "
               "reads: rebuild the filter from its keys";
        return CF_EVERSION;
    }
    if (cf__load_le16(b + CF__H_HEADER_BYTES) != CF__HEADER_BYTES)
        return cf__corrupt(why, "bad header length");
    return CF_OK;
}

/* A windowed file (its flags say so; its other header fields are its own). */
static bool cf__is_window_file(const uint8_t *b, size_t len)
{
    return len >= CF__HEADER_BYTES && memcmp(b, cf__magic, sizeof cf__magic) == 0 &&
           (cf__load_le32(b + CF__H_FLAGS) & CF__FLAG_WINDOW) != 0;
}

static cf_status cf__parse_meta(const uint8_t *b, size_t len, cf__extent extent, cf__meta *m,
                                const char **why)
{
    cf_status st = cf__parse_start(b, len, why);
    if (st != CF_OK)
        return st;
    if (cf__is_window_file(b, len))
        return cf__corrupt(why, "a windowed file where one filter was expected");
    m->total = cf__load_le64(b + CF__H_TOTAL);
    if (extent == CF__WHOLE && m->total != len)
        return cf__corrupt(why, m->total > len ? "truncated: shorter than its header says"
                                               : "longer than its header says");
    m->ntables = cf__load_le32(b + CF__H_TABLES);
    m->nstash = b[CF__H_STASH];
    if (m->ntables == 0 || m->ntables > CF_MAX_SUB_FILTERS)
        return cf__corrupt(why, "bad sub-filter count");
    if (m->nstash > CF__STASH_SLOTS)
        return cf__corrupt(why, "bad stash count");
    m->meta_len = cf__meta_len(m->ntables, m->nstash);
    if (extent == CF__HEADER_CHUNK ? m->meta_len + CF__SUM_BYTES != len : m->meta_len > len)
        return cf__corrupt(why, extent == CF__HEADER_CHUNK ? "header chunk of the wrong length"
                                                           : "truncated: shorter than its header");
    /* From here on, the meta section is all present: check its sum before reading more. */
    m->base = b;
    if (XXH3_64bits(b, (size_t)m->meta_len - CF__SUM_BYTES) !=
        cf__load_le64(b + m->meta_len - CF__SUM_BYTES))
        return cf__corrupt(why, "header checksum mismatch");
    /* A sound header with unknown flags or hash comes from a newer writer. */
    uint32_t flags = cf__load_le32(b + CF__H_FLAGS);
    if ((flags & ~CF__FLAGS_KNOWN) != 0 ||
        (b[CF__H_HASH] != CF__HASH_XXH3 && b[CF__H_HASH] != CF__HASH_RB)) {
        *why = "uses a feature or hash this library does not know";
        return CF_EVERSION;
    }
    if (cf__load_le32(b + CF__H_RESERVED2) != 0)
        return cf__corrupt(why, "reserved header field is not zero");

    cf__params *p = &m->p;
    unsigned f = b[CF__H_FP_BITS], bsize = b[CF__H_BUCKET];
    p->concurrent = false; /* not a property of the file: the loader's flags say */
    p->seed = cf__load_le64(b + CF__H_SEED);
    p->capacity = cf__load_le64(b + CF__H_CAPACITY);
    p->max_kicks = cf__load_le16(b + CF__H_KICKS);
    p->expansion = cf__load_le32(b + CF__H_EXPANSION);
    p->max_tables = cf__load_le32(b + CF__H_MAX_TABLES);
    p->widen = cf__load_le16(b + CF__H_WIDEN);
    if (f < CF_MIN_FINGERPRINT_BITS || f > CF_MAX_FINGERPRINT_BITS || bsize == 0 ||
        p->capacity == 0 || p->max_kicks == 0 || p->expansion > CF_MAX_EXPANSION ||
        p->max_tables == 0 || p->max_tables > CF_MAX_SUB_FILTERS || m->ntables > p->max_tables ||
        (p->expansion == 0 && m->ntables != 1))
        return cf__corrupt(why, "parameter out of range");
    /* Widening: flagged, of a growing filter, and no faster than to 32 bits at once. */
    if ((p->widen != 0) != ((flags & CF__FLAG_WIDEN) != 0) ||
        (p->widen != 0 && (p->expansion == 0 || p->widen > 256u * (32u - f))))
        return cf__corrupt(why, "bad fingerprint widening");
    bool semi = (flags & CF__FLAG_SEMI) != 0;
    if (semi && bsize != CF__SEMI_BUCKET)
        return cf__corrupt(why, "semi-sorted buckets of other than 4 slots");
    cf__shape_init(&p->shape, f, bsize, semi);
    /* RedisBloom's layout: its fingerprints, no seed, no widening or semi-sorting, no
     * stash, sizes that are powers of two (checked with each table below). */
    p->redisbloom = b[CF__H_HASH] == CF__HASH_RB;
    if (p->redisbloom && (f != CF__RB_FP_BITS || flags != 0 || p->seed != 0 || m->nstash != 0 ||
                          (p->expansion & (p->expansion - 1u)) != 0))
        return cf__corrupt(why, "bad settings for RedisBloom's layout");

    /* The tables: sizes nested as growth makes them, placed where the layout says. */
    uint64_t pos = cf__align_up(m->meta_len), buckets = 0;
    cf__shape sk = p->shape;
    for (unsigned k = 0; k < m->ntables; k++) {
        const uint8_t *d = cf__desc(m, k);
        uint64_t want = buckets, slots = 0;
        size_t bytes;
        cf__shape_for(p, k, &sk);
        if (k == 0)
            want = m->buckets0 = cf__load_le64(d + CF__D_BUCKETS);
        else if (!cf__mul_u64(buckets, p->expansion, &want))
            return cf__corrupt(why, "sub-filter size out of range");
        buckets = cf__load_le64(d + CF__D_BUCKETS);
        if (buckets != want || buckets < 2 || buckets % 2 != 0 ||
            (p->redisbloom && (buckets & (buckets - 1u)) != 0) ||
            !cf__table_bytes(&sk, buckets, &bytes))
            return cf__corrupt(why, "bad sub-filter size");
        cf__mul_u64(buckets, bsize, &slots); /* cannot overflow: bounded by the table size */
        if (cf__load_le64(d + CF__D_ITEMS) > slots)
            return cf__corrupt(why, "more items than slots");
        uint64_t len_k = cf__data_bytes(&sk, buckets);
        if (cf__load_le64(d + CF__D_OFFSET) != pos || cf__load_le64(d + CF__D_LENGTH) != len_k)
            return cf__corrupt(why, "bad table offset or length");
        pos = cf__align_up(pos + len_k); /* < 2^63: 65536 tables of at most 2^46 bytes */
    }
    if (pos + CF__SUM_BYTES != m->total)
        return cf__corrupt(why, "total length disagrees with the tables");
    for (unsigned e = 0; e < m->nstash; e++) {
        const uint8_t *x = cf__entry(m, e);
        uint64_t bucket = cf__load_le64(x + CF__E_BUCKET);
        uint32_t fp = cf__load_le32(x + CF__E_FP), table = cf__load_le32(x + CF__E_TABLE);
        unsigned width = table < m->ntables ? f + cf__ext_of(f, p->widen, table) : 32u;
        /* its low f bits are the key's fingerprint, never 0, in a wider table too */
        if (table >= m->ntables || (fp & p->shape.fp_mask) == 0 || (uint64_t)fp >> width != 0 ||
            bucket >= cf__load_le64(cf__desc(m, table) + CF__D_BUCKETS))
            return cf__corrupt(why, "bad stash entry");
    }
    return CF_OK;
}

/* A table's buckets in canonical form, as many occupied slots as the header says, and the
 * bits past its last slot zero. */
static bool cf__table_sound(const cf__shape *s, const uint8_t *data, uint64_t buckets,
                            uint64_t items)
{
    uint64_t used;
    return cf__table_tail_clear(s, data, buckets) && cf__table_scan(s, data, 0, buckets, &used) &&
           used == items;
}

/* The part of validation that reads the tables: the file sum, the padding and every
 * table's item count. m came from cf__parse_meta over the whole file. */
static cf_status cf__check_body(const cf__meta *m, const char **why)
{
    const uint8_t *b = m->base;
    if (XXH3_64bits(b, (size_t)m->total - CF__SUM_BYTES) !=
        cf__load_le64(b + m->total - CF__SUM_BYTES))
        return cf__corrupt(why, "checksum mismatch");
    uint64_t pos = m->meta_len;
    const cf__params *p = &m->p;
    cf__shape sk = p->shape;
    for (unsigned k = 0; k <= m->ntables; k++) {
        uint64_t start = k < m->ntables ? cf__load_le64(cf__desc(m, k) + CF__D_OFFSET)
                                        : m->total - CF__SUM_BYTES;
        for (; pos < start; pos++)
            if (b[pos] != 0)
                return cf__corrupt(why, "padding is not zero");
        if (k == m->ntables)
            break;
        const uint8_t *d = cf__desc(m, k);
        cf__shape_for(p, k, &sk);
        if (!cf__table_sound(&sk, b + start, cf__load_le64(d + CF__D_BUCKETS),
                             cf__load_le64(d + CF__D_ITEMS)))
            return cf__corrupt(why, "table contents disagree with the header");
        pos = start + cf__load_le64(d + CF__D_LENGTH);
    }
    return CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Windowed files: a meta section, then one plain file (an image) per generation         */
/* ------------------------------------------------------------------------------------ */

/* What a checked windowed meta section says. */
typedef struct cf__wmeta {
    unsigned n;
    uint64_t window, generation, meta_len, total;
    const uint8_t *base;
} cf__wmeta;

static const uint8_t *cf__gen_entry(const cf__wmeta *w, unsigned i)
{
    return w->base + CF__HEADER_BYTES + (size_t)i * CF__GEN_BYTES;
}

/* The meta section of a windowed file (extent as for cf__parse_meta, but never a header
 * chunk): its fields, and its images placed one after the other as the layout says. */
static cf_status cf__parse_window(const uint8_t *b, size_t len, cf__extent extent, cf__wmeta *w,
                                  const char **why)
{
    cf_status st = cf__parse_start(b, len, why);
    if (st != CF_OK)
        return st;
    w->total = cf__load_le64(b + CF__H_TOTAL);
    if (w->total >> 62 != 0) /* far past any table size: sums of lengths stay exact */
        return cf__corrupt(why, "total length out of range");
    if (extent == CF__WHOLE && w->total != len)
        return cf__corrupt(why, w->total > len ? "truncated: shorter than its header says"
                                               : "longer than its header says");
    w->n = cf__load_le32(b + CF__W_GENERATIONS);
    if (w->n < 2 || w->n > CF_MAX_GENERATIONS)
        return cf__corrupt(why, "bad generation count");
    w->meta_len = cf__window_meta_len(w->n);
    if (w->meta_len > len)
        return cf__corrupt(why, "truncated: shorter than its header");
    w->base = b;
    if (XXH3_64bits(b, (size_t)w->meta_len - CF__SUM_BYTES) !=
        cf__load_le64(b + w->meta_len - CF__SUM_BYTES))
        return cf__corrupt(why, "header checksum mismatch");
    if (cf__load_le32(b + CF__H_FLAGS) != CF__FLAG_WINDOW) { /* a sound header: newer */
        *why = "uses a feature or hash this library does not know";
        return CF_EVERSION;
    }
    for (unsigned i = CF__W_RESERVED; i < CF__HEADER_BYTES; i++)
        if (b[i] != 0)
            return cf__corrupt(why, "reserved header field is not zero");
    w->window = cf__load_le64(b + CF__W_WINDOW);
    w->generation = cf__load_le64(b + CF__W_GENERATION);
    uint64_t end = w->meta_len;
    for (unsigned i = 0; i < w->n; i++) {
        uint64_t at = cf__load_le64(cf__gen_entry(w, i)),
                 n = cf__load_le64(cf__gen_entry(w, i) + 8);
        if (at != cf__image_next(end) || n < CF__HEADER_BYTES || n > w->total || at > w->total - n)
            return cf__corrupt(why, "bad generation offset or length");
        end = at + n;
    }
    if (end != w->total)
        return cf__corrupt(why, "total length disagrees with the generations");
    return CF_OK;
}

/* The settings every generation of a window shares: its header but for the total length,
 * the stash and the sub-filter counts (docs/FORMAT.md). */
static bool cf__same_settings(const uint8_t *a, const uint8_t *b)
{
    return memcmp(a + CF__H_FLAGS, b + CF__H_FLAGS, 4) == 0 &&
           memcmp(a + CF__H_SEED, b + CF__H_SEED, CF__H_STASH - CF__H_SEED) == 0 &&
           memcmp(a + CF__H_KICKS, b + CF__H_KICKS, CF__H_TABLES - CF__H_KICKS) == 0;
}

/* Image i's meta section, checked (and its body too with `body`), and checked against the
 * first image's settings; the padding before it zero. */
static cf_status cf__parse_image(const cf__wmeta *w, unsigned i, bool body, cf__meta *m,
                                 const char **why)
{
    const uint8_t *b = w->base;
    uint64_t at = cf__load_le64(cf__gen_entry(w, i)), n = cf__load_le64(cf__gen_entry(w, i) + 8);
    uint64_t end =
        i ? cf__load_le64(cf__gen_entry(w, i - 1)) + cf__load_le64(cf__gen_entry(w, i - 1) + 8)
          : w->meta_len;
    for (uint64_t pos = end; pos < at; pos++)
        if (b[pos] != 0)
            return cf__corrupt(why, "padding is not zero");
    cf_status st = cf__parse_meta(b + at, (size_t)n, CF__WHOLE, m, why);
    if (st == CF_OK && body)
        st = cf__check_body(m, why);
    if (st != CF_OK)
        return st;
    const uint8_t *first = b + cf__load_le64(cf__gen_entry(w, 0));
    if (m->p.redisbloom || m->p.expansion != 0)
        return cf__corrupt(why, "a generation that grows or is of RedisBloom's layout");
    if (!cf__same_settings(first, b + at))
        return cf__corrupt(why, "generations with different settings");
    return CF_OK;
}

static cf_status cf__validate_window(const uint8_t *b, size_t len, cf__wmeta *w, const char **why)
{
    /* Every image's meta section first, then the bodies: a file mapped without checking
     * its tables (cf__window_build) meets the same first problem in the same order. */
    cf_status st = cf__parse_window(b, len, CF__WHOLE, w, why);
    for (unsigned pass = 0; pass < 2; pass++)
        for (unsigned i = 0; st == CF_OK && i < w->n; i++) {
            cf__meta m;
            st = cf__parse_image(w, i, pass == 1, &m, why);
        }
    return st;
}

/* A window made of the images of a checked windowed file: each by `one` (built from its
 * bytes, or mapped), oldest first. */
static cf_status cf__window_build(const cf__wmeta *w, unsigned flags, const cf_allocator *a,
                                  cf_status (*one)(const uint8_t *image, size_t len, unsigned flags,
                                                   const cf_allocator *a, cf_filter **out),
                                  cf_filter **out)
{
    /* Every image's meta section and settings first, before anything is allocated (also
     * for a file mapped without CF_MAP_VERIFY, whose parameters are all checked). */
    cf__meta m0, m;
    const char *why;
    cf_status st = cf__parse_image(w, 0, false, &m0, &why);
    for (unsigned i = 1; st == CF_OK && i < w->n; i++)
        st = cf__parse_image(w, i, false, &m, &why);
    if (st != CF_OK)
        return st;
    m0.p.concurrent = (flags & CF_CONCURRENT) != 0;
    cf_filter *f;
    if ((st = cf__window_head(&m0.p, a, w->n, w->window, w->generation, &f)) != CF_OK)
        return st;
    struct cf__window *win = cf__window_of(f);
    for (unsigned i = 0; i < w->n; i++) { /* the head's newest is at n - 1: oldest at 0 */
        uint64_t at = cf__load_le64(cf__gen_entry(w, i)),
                 n = cf__load_le64(cf__gen_entry(w, i) + 8);
        if ((st = one(w->base + at, (size_t)n, flags, a, &win->gen[i])) != CF_OK) {
            cf__release(f);
            return st;
        }
    }
    *out = f;
    return CF_OK;
}

/* Every check of a whole file, windowed or not (m: a plain file's meta section). */
static cf_status cf__validate_all(const uint8_t *b, size_t len, cf__meta *m, const char **why)
{
    if (cf__is_window_file(b, len)) {
        cf__wmeta w;
        return cf__validate_window(b, len, &w, why);
    }
    cf_status st = cf__parse_meta(b, len, CF__WHOLE, m, why);
    return st == CF_OK ? cf__check_body(m, why) : st;
}

cf_status cf_validate(const void *buf, size_t len, const char **reason)
{
    const char *why = NULL;
    cf__meta m;
    cf_status st = !buf && len ? CF_EINVAL : cf__validate_all(buf, len, &m, &why);
    if (st == CF_EINVAL)
        why = "invalid argument";
    if (reason)
        *reason = why;
    return st;
}

/* A filter for a checked meta section: tables allocated and empty (with_data) or left
 * for the caller to point at; items and stash filled in. */
static cf_status cf__make_from_meta(const cf__meta *m, const cf_allocator *a, bool with_data,
                                    cf_filter **out)
{
    cf_filter *f;
    if (!cf__allocator_ok(a))
        return CF_EINVAL;
    cf_status st = cf__make(&m->p, a, m->ntables, m->buckets0, with_data, &f);
    if (st != CF_OK)
        return st;
    for (unsigned k = 0; k < m->ntables; k++)
        f->tables[k].items = cf__load_le64(cf__desc(m, k) + CF__D_ITEMS);
    if (m->nstash && !cf__stash_room(f)) {
        cf__release(f);
        return CF_ENOMEM;
    }
    for (unsigned e = 0; e < m->nstash; e++) {
        const uint8_t *x = cf__entry(m, e);
        f->more->stash[e] =
            (cf__stash){cf__load_le64(x + CF__E_BUCKET), cf__load_le32(x + CF__E_FP),
                        cf__load_le32(x + CF__E_TABLE)};
    }
    f->stash_n = (uint8_t)m->nstash; /* at most CF__STASH_SLOTS: checked by the parse */
    cf__state_begin(f);              /* a concurrent filter's readers learn of a stash from it */
    cf__state_end(f);
    *out = f;
    return CF_OK;
}

/* A filter from a plain file's bytes whose every check has passed: its meta section read
 * again (a few dozen bytes), its tables copied. */
static cf_status cf__build_checked(const uint8_t *b, size_t len, unsigned flags,
                                   const cf_allocator *a, cf_filter **out)
{
    const char *why;
    cf__meta m;
    cf_filter *f;
    cf_status st = cf__parse_meta(b, len, CF__WHOLE, &m, &why);
    m.p.concurrent = (flags & CF_CONCURRENT) != 0;
    if (st == CF_OK)
        st = cf__make_from_meta(&m, a, true, &f);
    if (st != CF_OK)
        return st;
    for (unsigned k = 0; k < m.ntables; k++) {
        const uint8_t *d = cf__desc(&m, k);
        memcpy(f->tables[k].data, b + cf__load_le64(d + CF__D_OFFSET),
               (size_t)cf__load_le64(d + CF__D_LENGTH));
    }
    *out = f;
    return CF_OK;
}

/* A filter built from a whole file's bytes, validated completely first (a window's images
 * once, with the file: not again one by one); flags as cf_load_flags. */
static cf_status cf__build(const uint8_t *b, size_t len, unsigned flags, const cf_allocator *a,
                           cf_filter **out)
{
    const char *why;
    cf__meta m;
    if (cf__is_window_file(b, len)) {
        cf__wmeta w;
        cf_status st = cf__validate_window(b, len, &w, &why);
        return st == CF_OK ? cf__window_build(&w, flags, a, cf__build_checked, out) : st;
    }
    cf_status st = cf__validate_all(b, len, &m, &why);
    return st == CF_OK ? cf__build_checked(b, len, flags, a, out) : st;
}

cf_status cf_deserialize(const void *buf, size_t len, const cf_allocator *allocator,
                         cf_filter **out)
{
    return cf_deserialize_flags(buf, len, 0, allocator, out);
}

cf_status cf_deserialize_flags(const void *buf, size_t len, unsigned flags,
                               const cf_allocator *allocator, cf_filter **out)
{
    if (!out || (!buf && len) || (flags & ~CF__LOAD_FLAGS) != 0)
        return CF_EINVAL;
    return cf__build(buf, len, flags, allocator, out);
}

/* ------------------------------------------------------------------------------------ */
/* Files                                                                                */
/* ------------------------------------------------------------------------------------ */

/* A whole file in memory: mapped when it is a regular file, read otherwise (a pipe). */
typedef struct cf__view {
    const uint8_t *data;
    size_t len;
    void *map;      /* the mapping to release, or NULL */
    uint8_t *owned; /* the buffer to release, or NULL */
    const cf_allocator *alloc;
} cf__view;

static void cf__view_release(cf__view *v)
{
    if (v->map)
        cf__unmap(v->map, v->len);
    if (v->owned)
        v->alloc->free(v->alloc->ctx, v->owned);
}

/* How many bytes of a stream to read, given its first len bytes: enough for the header,
 * then for the meta section, then the length that section (checked) gives plus one more
 * byte, which shows whether the input is longer. 0: stop now, these bytes already cannot
 * begin a filter (validation then says why). */
static uint64_t cf__stream_want(const uint8_t *b, size_t len)
{
    size_t magic = len < sizeof cf__magic ? len : sizeof cf__magic;
    if (memcmp(b, cf__magic, magic) != 0)
        return 0;
    if (len < CF__HEADER_BYTES)
        return CF__HEADER_BYTES;
    if (cf__is_window_file(b, len)) {
        uint32_t n = cf__load_le32(b + CF__W_GENERATIONS);
        if (n < 2 || n > CF_MAX_GENERATIONS)
            return 0;
        if (len < cf__window_meta_len(n))
            return cf__window_meta_len(n);
        cf__wmeta w;
        const char *why;
        return cf__parse_window(b, len, CF__PREFIX, &w, &why) == CF_OK ? w.total + 1 : 0;
    }
    uint32_t ntables = cf__load_le32(b + CF__H_TABLES);
    unsigned nstash = b[CF__H_STASH];
    if (ntables == 0 || ntables > CF_MAX_SUB_FILTERS || nstash > CF__STASH_SLOTS)
        return 0;
    uint64_t meta_len = cf__meta_len(ntables, nstash);
    if (len < meta_len)
        return meta_len;
    cf__meta m;
    const char *why;
    if (cf__parse_meta(b, len, CF__PREFIX, &m, &why) != CF_OK)
        return 0;
    return m.total + 1; /* total < 2^63: cf__parse_meta checked it against the layout */
}

/* Read a stream (a pipe, a device) into a buffer, checking as it comes: the header first,
 * refused at once if it cannot be one (so /dev/zero costs 8 bytes), then no more than the
 * length the checked meta section gives. The buffer doubles as data arrives, so memory
 * follows what was sent, up to the size of the filter the header describes. */
static cf_status cf__slurp(int fd, cf__view *v)
{
    size_t cap = 0, len = 0;
    uint8_t *buf = NULL;
    for (;;) {
        uint64_t want = len ? cf__stream_want(buf, len) : CF__HEADER_BYTES;
        if (want <= len)
            break;
        if (want > SIZE_MAX) {
            errno = EFBIG;
            if (buf)
                v->alloc->free(v->alloc->ctx, buf);
            return CF_EIO;
        }
        if (len == cap) {
            size_t bigger = cap ? cap * 2 : CF__STAGE_BYTES;
            if (bigger <= cap || bigger > want)
                bigger = (size_t)want;
            uint8_t *nb = v->alloc->alloc(v->alloc->ctx, bigger);
            if (!nb) {
                if (buf)
                    v->alloc->free(v->alloc->ctx, buf);
                return CF_ENOMEM;
            }
            if (buf) {
                memcpy(nb, buf, len);
                v->alloc->free(v->alloc->ctx, buf);
            }
            buf = nb;
            cap = bigger;
        }
        size_t room = cap - len < want - len ? cap - len : (size_t)(want - len);
        ssize_t r = read(fd, buf + len, room);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            v->alloc->free(v->alloc->ctx, buf);
            errno = e;
            return CF_EIO;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    v->data = v->owned = buf;
    v->len = len;
    return CF_OK;
}

/* map_only: refuse what cannot be mapped (ENODEV) rather than read it. */
static cf_status cf__view_open(const char *path, const cf_allocator *a, bool map_only, cf__view *v)
{
    struct stat st;
    memset(v, 0, sizeof *v);
    v->alloc = a ? a : &cf__default_allocator;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return CF_EIO;
    cf_status status = CF_OK;
    if (fstat(fd, &st) != 0) {
        status = CF_EIO;
    } else if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        status = CF_EIO;
    } else if (!S_ISREG(st.st_mode)) {
        if (map_only) {
            errno = ENODEV;
            status = CF_EIO;
        } else {
            status = cf__slurp(fd, v);
        }
    } else if ((uint64_t)st.st_size > SIZE_MAX) {
        errno = EFBIG;
        status = CF_EIO;
    } else if (st.st_size > 0) {
        void *map = cf__map_file(fd, (size_t)st.st_size);
        if (!map) {
            status = CF_EIO;
        } else {
            v->map = map;
            v->data = map;
            v->len = (size_t)st.st_size;
        }
    }
    int e = errno;
    close(fd);
    errno = e;
    return status;
}

cf_status cf_validate_file(const char *path, const char **reason)
{
    cf__view v;
    cf__meta m;
    const char *why = NULL;
    if (!path)
        return CF_EINVAL;
    cf_status st = cf__view_open(path, NULL, false, &v);
    if (st == CF_OK) {
        st = cf__validate_all(v.data, v.len, &m, &why);
        cf__view_release(&v);
    }
    if (reason)
        *reason = why;
    return st;
}

cf_status cf_load(const char *path, const cf_allocator *allocator, cf_filter **out)
{
    return cf_load_flags(path, 0, allocator, out);
}

cf_status cf_load_flags(const char *path, unsigned flags, const cf_allocator *allocator,
                        cf_filter **out)
{
    cf__view v;
    if (!path || !out || !cf__allocator_ok(allocator) || (flags & ~CF__LOAD_FLAGS) != 0)
        return CF_EINVAL;
    cf_status st = cf__view_open(path, allocator, false, &v);
    if (st != CF_OK)
        return st;
    st = cf__build(v.data, v.len, flags, allocator, out);
    cf__view_release(&v);
    return st;
}

/* A read-only filter over the bytes of one plain file that stay mapped: its meta section
 * checked (its body too with CF_MAP_VERIFY), its tables pointing into the bytes. It
 * borrows them (`map` set, `map_len` 0): whoever made the mapping unmaps it. */
static cf_status cf__map_image(const uint8_t *b, size_t len, unsigned flags, const cf_allocator *a,
                               cf_filter **out)
{
    cf__meta m;
    const char *why;
    cf_filter *f;
    cf_status st = cf__parse_meta(b, len, CF__WHOLE, &m, &why);
    if (st == CF_OK && (flags & CF_MAP_VERIFY))
        st = cf__check_body(&m, &why);
    if (st == CF_OK)
        st = cf__make_from_meta(&m, a, false, &f);
    if (st != CF_OK)
        return st;
    cf__more *more = cf__more_of(f);
    if (!more) {
        cf__release(f);
        return CF_ENOMEM;
    }
    for (unsigned k = 0; k < m.ntables; k++)
        f->tables[k].data =
            (uint8_t *)(uintptr_t)(b + cf__load_le64(cf__desc(&m, k) + CF__D_OFFSET));
    more->map = (void *)(uintptr_t)b;
    more->map_len = 0;
    f->bits |= CF__B_READ_ONLY;
    *out = f;
    return CF_OK;
}

cf_status cf_open_mapped(const char *path, unsigned flags, const cf_allocator *allocator,
                         cf_filter **out)
{
    cf__view v;
    const char *why;
    if (!path || !out || (flags & ~CF_MAP_VERIFY) != 0 || !cf__allocator_ok(allocator))
        return CF_EINVAL;
    cf_status st = cf__view_open(path, allocator, true, &v);
    if (st != CF_OK)
        return st;
    cf_filter *f = NULL;
    if (cf__is_window_file(v.data, v.len)) {
        cf__wmeta w;
        st = (flags & CF_MAP_VERIFY) ? cf__validate_window(v.data, v.len, &w, &why)
                                     : cf__parse_window(v.data, v.len, CF__WHOLE, &w, &why);
        /* each image's meta section is checked as it is mapped (cf__map_image) */
        if (st == CF_OK)
            st = cf__window_build(&w, 0, allocator, cf__map_image, &f);
    } else {
        st = cf__map_image(v.data, v.len, flags & CF_MAP_VERIFY, allocator, &f);
    }
    cf__more *more = st == CF_OK ? cf__more_of(f) : NULL;
    if (st == CF_OK && !more) {
        cf__release(f);
        st = CF_ENOMEM;
    }
    if (st != CF_OK) {
        cf__view_release(&v);
        return st;
    }
    more->map = v.map;
    more->map_len = v.len;
    f->bits |= CF__B_READ_ONLY;
    *out = f;
    return CF_OK;
}

/* The directory holding `path`, written into dir (at least strlen(path) + 2 bytes). */
static void cf__dirname(const char *path, char *dir)
{
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (n == 0)
        memcpy(dir, ".", 2);
    else {
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
}

/* The longest file name Linux file systems take (NAME_MAX). */
#define CF__NAME_MAX 255u

/* What the temporary name adds to the file's name: ".tmp-", a pid of up to 10 digits,
 * "-" and 16 hex digits. */
#define CF__TMP_EXTRA 32u

/* Bytes the temporary name may need beyond the path: CF__TMP_EXTRA and the NUL. */
#define CF__TMP_SUFFIX (CF__TMP_EXTRA + 1u)

/* The temporary names of `path` begin with its file name, cut short if the name and the
 * suffix would exceed NAME_MAX (so that any name that can be saved to has temporary
 * names too): where that file name starts in path, and how much of it they use. */
static void cf__temp_base(const char *path, size_t *dir_len, size_t *base_len)
{
    const char *slash = strrchr(path, '/');
    *dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    *base_len = strlen(path) - *dir_len;
    if (*base_len > CF__NAME_MAX - CF__TMP_EXTRA)
        *base_len = CF__NAME_MAX - CF__TMP_EXTRA;
}

/* The pid in a temporary name of ours, `name` being what follows the base: ".tmp-",
 * decimal digits, "-" and 16 hex digits. 0 if the name is not of that form. */
static long cf__temp_pid(const char *name)
{
    static const char dot[] = ".tmp-";
    if (strncmp(name, dot, sizeof dot - 1) != 0)
        return 0;
    const char *p = name + sizeof dot - 1;
    long pid = 0;
    for (; *p >= '0' && *p <= '9' && pid < INT_MAX / 10; p++)
        pid = pid * 10 + (*p - '0');
    if (*p++ != '-')
        return 0;
    for (unsigned i = 0; i < 16; i++, p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return *p == '\0' ? pid : 0;
}

/* Remove the temporary files of `path` that saves left behind when their process died
 * (killed mid-write): those whose pid no longer runs. A live writer's are left alone, as
 * is anything that is not a regular file of exactly our naming. Best effort: a failure
 * here never fails the save. */
static void cf__remove_stale_temps(const char *path, char *dir)
{
    size_t dir_len, base_len;
    cf__temp_base(path, &dir_len, &base_len);
    cf__dirname(path, dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    const char *base = path + dir_len;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, base, base_len) != 0)
            continue;
        long pid = cf__temp_pid(e->d_name + base_len);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* Create a new temporary file next to `path`, named into tmp; its descriptor or -1. */
static int cf__create_temp(const char *path, char *tmp, size_t tmp_size)
{
    size_t dir_len, base_len;
    cf__temp_base(path, &dir_len, &base_len);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t nonce = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
    for (unsigned attempt = 0; attempt < CF__TMP_ATTEMPTS; attempt++) {
        nonce = nonce * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        snprintf(tmp, tmp_size, "%.*s.tmp-%ld-%016llx", (int)(dir_len + base_len), path,
                 (long)getpid(), (unsigned long long)nonce);
        /* 0666: the umask applies, as for any new file. */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

static cf_status cf__save(const cf_filter *f, const char *path);

cf_status cf_save(const cf_filter *f, const char *path)
{
    if (!f || !path || !*path || cf__loading_any(f))
        return CF_EINVAL;
    cf__hold(f);
    cf_status st = cf__save(f, path);
    cf__unhold(f);
    return st;
}

static cf_status cf__save(const cf_filter *f, const char *path)
{
    /* One block: the write buffer, the resolved path, then the temporary name (and, after
     * the rename, the directory's name). */
    const size_t block_bytes = CF__STAGE_BYTES + PATH_MAX + PATH_MAX + CF__TMP_SUFFIX;
    uint8_t *block = cf__malloc(f, block_bytes);
    if (!block)
        return CF_ENOMEM;
    char *resolved = (char *)(block + CF__STAGE_BYTES);
    char *tmp = resolved + PATH_MAX;
    int err = 0;
    cf_status status = CF_OK;
    struct stat old;
    bool exists = false;
    /* A symbolic link is followed: the file it names is replaced, the link stays. And
     * only a regular file is ever replaced (never a device, a FIFO or a socket). */
    if (lstat(path, &old) == 0) {
        exists = true;
        if (S_ISLNK(old.st_mode)) {
            if (realpath(path, resolved) && stat(resolved, &old) == 0)
                path = resolved;
            else
                err = errno;
        }
        if (!err && S_ISDIR(old.st_mode))
            err = EISDIR;
        else if (!err && !S_ISREG(old.st_mode))
            status = CF_EINVAL;
    } else if (errno != ENOENT) {
        err = errno;
    }
    size_t plen = strlen(path);
    if (!err && status == CF_OK && plen >= PATH_MAX)
        err = ENAMETOOLONG;
    bool created = false, renamed = false;
    int fd = -1;
    if (!err && status == CF_OK) {
        cf__remove_stale_temps(path, tmp);
        fd = cf__create_temp(path, tmp, plen + CF__TMP_SUFFIX);
        if (fd < 0)
            err = errno;
    }
    if (fd >= 0) {
        created = true;
        /* Replacing a file: keep its owner and group where this process may (root may;
         * an ordinary user can give the group of a group of its own), then its permission
         * bits (a 0640 file stays 0640), set last because a change of owner clears the
         * set-id bits. */
        if (exists && fchown(fd, old.st_uid, old.st_gid) != 0 &&
            fchown(fd, (uid_t)-1, old.st_gid) != 0 && errno != EPERM)
            err = errno;
        if (!err && exists && fchmod(fd, old.st_mode & 07777) != 0)
            err = errno;
        if (!err) {
            cf__sink k;
            cf__sink_init(&k, NULL, fd, block);
            cf__emit_file(&k, f);
            cf__flush(&k);
            err = k.err;
        }
        if (!err && fsync(fd) != 0)
            err = errno;
        if (close(fd) != 0 && !err)
            err = errno;
        if (!err && rename(tmp, path) != 0)
            err = errno;
        renamed = !err;
    }
    if (renamed) {
        /* The rename is durable only once the directory is synced. Some file systems
         * cannot sync a directory (EINVAL); there is nothing more to do on those. */
        cf__dirname(path, tmp);
        int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || (fsync(dfd) != 0 && errno != EINVAL))
            err = errno;
        if (dfd >= 0)
            close(dfd);
    } else if (created) {
        unlink(tmp);
    }
    cf__mfree(f, block);
    if (status != CF_OK)
        return status;
    errno = err;
    return err ? CF_EIO : CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Chunks                                                                               */
/* ------------------------------------------------------------------------------------ */
/* A cursor is a file position. The header chunk is the meta section followed by the file
 * sum (so that the loader can check the finished filter against it); data chunk j of
 * table k is bytes [j * CF_CHUNK_DATA_MAX, ...) of that table, followed by a tag. */

/* The data chunk starting at file position pos: its table, the table's offset, the
 * chunk's length and the position of the chunk after it (the file sum's position after
 * the last). false if no data chunk of f starts at pos. */
static bool cf__chunk_at(const cf_filter *f, uint64_t pos, unsigned *table, uint64_t *start,
                         uint64_t *len, uint64_t *next)
{
    unsigned ntables = cf__ntables_all(f);
    uint64_t t = cf__table_offset(f, 0);
    if (pos < t)
        return false;
    /* Run by run, then straight to the table of its run that holds pos. */
    for (unsigned i = 0, j; i < ntables; i = j) {
        j = cf__run_end(f, i, ntables);
        uint64_t stride = cf__table_stride(f, i);
        if (pos - t >= (j - i) * stride) {
            t += (j - i) * stride;
            continue;
        }
        unsigned k = i + (unsigned)((pos - t) / stride);
        uint64_t at = t + (k - i) * stride,
                 n = cf__data_bytes(f->tables[k].shape, f->tables[k].buckets);
        if (pos - at >= n || (pos - at) % CF_CHUNK_DATA_MAX != 0)
            return false;
        *table = k;
        *start = at;
        *len = at + n - pos < CF_CHUNK_DATA_MAX ? at + n - pos : CF_CHUNK_DATA_MAX;
        *next = pos + *len == at + n ? at + stride : pos + *len;
        return true;
    }
    return false;
}

/* A data chunk's tag: its bytes hashed with a seed made of its position and its filter's
 * header (which holds the random seed, the shape and the total length), so that it
 * costs the same for any number of sub-filters. Whatever the header does not cover
 * (item counts, the stash, the contents of other chunks) the file sum checks once the
 * last chunk is in. */
static uint64_t cf__chunk_tag(const uint8_t *p, size_t n, uint64_t header_sum, uint64_t pos)
{
    return XXH3_64bits_withSeed(p, n, header_sum ^ pos);
}

static size_t cf__dump_chunk_max(const cf_filter *f)
{
    uint64_t most = cf__meta_len(cf__ntables_all(f), f->stash_n) + CF__SUM_BYTES;
    for (unsigned k = 0; k < cf__ntables_all(f); k++) {
        uint64_t n = cf__data_bytes(f->tables[k].shape, f->tables[k].buckets);
        n = (n < CF_CHUNK_DATA_MAX ? n : CF_CHUNK_DATA_MAX) + CF__SUM_BYTES;
        most = n > most ? n : most;
    }
    return (size_t)most;
}

/* A window's: its header chunk, or the largest of its images'. */
static size_t cf__window_dump_max(const cf_filter *f)
{
    const struct cf__window *w = cf__window_of(f);
    size_t most = (size_t)cf__window_meta_len(w->n);
    for (unsigned i = 0; i < w->n; i++)
        if (w->gen[i] && cf__dump_chunk_max(w->gen[i]) > most)
            most = cf__dump_chunk_max(w->gen[i]);
    return most;
}

size_t cf_dump_chunk_max(const cf_filter *f)
{
    if (!f)
        return 0;
    cf__hold(f);
    size_t n = cf__is_window(f) ? cf__window_dump_max(f) : cf__dump_chunk_max(f);
    cf__unhold(f);
    return n;
}

static cf_status cf__dump_chunk(const cf_filter *f, uint64_t *cursor, void *buf, size_t cap,
                                size_t *len);

/* Where image i of a window loading by chunks starts in its file. */
static uint64_t cf__loading_image_at(const struct cf__window *w, unsigned i)
{
    uint64_t at = cf__image_next(cf__window_meta_len(w->n));
    for (unsigned j = 0; j < i; j++)
        at = cf__image_next(at + w->loading[j]);
    return at;
}

/* Where the next chunk of a window loading by chunks goes: the image it is loading, at
 * that image's next chunk (its start while none of it has arrived). */
static uint64_t cf__window_load_pos(const cf_filter *f)
{
    const struct cf__window *w = cf__window_of(f);
    const cf_filter *g = w->gen[w->loaded];
    return cf__loading_image_at(w, w->loaded) + (g ? cf__load_of(g)->pos : 0u);
}

/* A windowed dump: its meta section as the header chunk, then each image's own dump,
 * oldest first, at the cursors of that image's place in the file (the image's cursor plus
 * its offset), but that the cursor after an image's last chunk is the next image's start,
 * where its header chunk is. A loading window dumps what it has: complete images, then
 * the chunks the image it is loading has taken. */
static cf_status cf__window_dump(const cf_filter *f, uint64_t *cursor, void *buf, size_t cap,
                                 size_t *len)
{
    const struct cf__window *w = cf__window_of(f);
    uint64_t pos = *cursor, meta = cf__window_meta_len(w->n);
    if (pos == 0) {
        if (!buf || cap < meta)
            return CF_EINVAL;
        cf__sink k;
        cf__sink_init(&k, buf, -1, NULL);
        cf__emit_window_meta(&k, f);
        *len = (size_t)meta;
        *cursor = cf__image_next(meta);
        return CF_OK;
    }
    uint64_t at = cf__image_next(meta);
    for (unsigned i = 0; i < w->n && pos >= at; i++) {
        const cf_filter *g = cf__image_gen(f, i);
        if (!g) /* loading: not arrived */
            break;
        uint64_t end = at + cf__image_len(f, i);
        if (pos < end) {
            uint64_t inner = pos - at;
            cf_status st = cf__dump_chunk(g, &inner, buf, cap, len);
            if (st != CF_OK || !*len)
                break;
            /* After an image's last chunk, the next image's header (its start) is next. */
            *cursor = inner == end - at - CF__SUM_BYTES && i + 1 < w->n ? cf__image_next(end)
                                                                        : at + inner;
            return CF_OK;
        }
        at = cf__image_next(end);
    }
    /* Past the last chunk (of the whole file, or of a loading window's data so far) is
     * the end; anywhere else is no chunk's position. */
    bool past = w->loading ? pos >= cf__window_load_pos(f) : pos >= cf__file_len(f) - CF__SUM_BYTES;
    if (!past)
        return CF_EINVAL;
    *len = 0;
    *cursor = 0;
    return CF_OK;
}

cf_status cf_dump_chunk(const cf_filter *f, uint64_t *cursor, void *buf, size_t cap, size_t *len)
{
    if (!f || !cursor || !len || (cf__load_of(f) && cf__load_of(f)->raw))
        return CF_EINVAL; /* raw tables loading: no file position is theirs yet */
    cf__hold(f);
    cf_status st = cf__is_window(f) ? cf__window_dump(f, cursor, buf, cap, len)
                                    : cf__dump_chunk(f, cursor, buf, cap, len);
    cf__unhold(f);
    return st;
}

static cf_status cf__dump_chunk(const cf_filter *f, uint64_t *cursor, void *buf, size_t cap,
                                size_t *len)
{
    /* A loading filter dumps what it has received: its header, then the data chunks
     * before the one it expects. Loading those gives a filter in the same state. */
    uint64_t pos = *cursor,
             end = cf__load_of(f) ? cf__load_of(f)->pos : cf__table_offset(f, f->ntables);
    unsigned ntables = cf__ntables_all(f);
    cf__sink k;
    if (pos >= end) { /* past the last chunk */
        *len = 0;
        *cursor = 0;
        return CF_OK;
    }
    if (pos == 0) {
        uint64_t meta_len = cf__meta_len(ntables, f->stash_n);
        if (!buf || cap < meta_len + CF__SUM_BYTES)
            return CF_EINVAL;
        cf__sink_init(&k, buf, -1, NULL);
        cf__emit_meta(&k, f);
        cf__store_le64((uint8_t *)buf + meta_len,
                       cf__load_of(f) ? cf__load_of(f)->file_sum : cf__file_sum(f));
        *len = (size_t)(meta_len + CF__SUM_BYTES);
        *cursor = cf__align_up(meta_len);
        return CF_OK;
    }
    unsigned t;
    uint64_t start, n, next;
    if (!cf__chunk_at(f, pos, &t, &start, &n, &next))
        return CF_EINVAL;
    if (!buf || cap < n + CF__SUM_BYTES)
        return CF_EINVAL;
    memcpy(buf, f->tables[t].data + (pos - start), (size_t)n);
    uint8_t h[CF__HEADER_BYTES];
    cf__header(f, h);
    cf__store_le64((uint8_t *)buf + n,
                   cf__chunk_tag(buf, (size_t)n, XXH3_64bits(h, sizeof h), pos));
    *len = (size_t)(n + CF__SUM_BYTES);
    *cursor = next;
    return CF_OK;
}

/* A loading filter's state (cf__loading) and, after it, the running file sum: XXH3's
 * state asks for 64-byte alignment, which an allocator need not give, so the block has
 * room to align it. */
#define CF__LOADING_BLOCK (sizeof(cf__loading) + sizeof(XXH3_state_t) + 63u)

static XXH3_state_t *cf__sum_state(const cf_filter *f)
{
    uintptr_t after = (uintptr_t)(f->more->load + 1);
    return (XXH3_state_t *)((after + 63u) & ~(uintptr_t)63u);
}

static void cf__sum_zeros(XXH3_state_t *st, uint64_t n)
{
    static const uint8_t zeros[CF__ALIGN];
    for (; n > 0; n -= n < CF__ALIGN ? n : CF__ALIGN)
        XXH3_64bits_update(st, zeros, n < CF__ALIGN ? (size_t)n : CF__ALIGN);
}

/* The memory the complete filter of a checked meta section holds while it loads (with the
 * default allocator): its structures, its tables and its loading state. false if that
 * exceeds a size_t. */
static bool cf__meta_bytes(const cf__meta *m, size_t *bytes)
{
    size_t total = cf__fixed_bytes(&m->p, NULL, m->ntables) + CF__LOADING_BLOCK +
                   (m->nstash ? CF__STASH_SLOTS * sizeof(cf__stash) : 0);
    if (m->ntables == 1) /* where a filter of more keeps the loading state */
        total += sizeof(cf__more);
    const cf__params *p = &m->p;
    cf__shape sk = p->shape;
    for (unsigned k = 0; k < m->ntables; k++) {
        size_t t;
        cf__shape_for(p, k, &sk);
        cf__table_bytes(&sk, cf__load_le64(cf__desc(m, k) + CF__D_BUCKETS),
                        &t); /* checked by the parse */
        if (t > SIZE_MAX - total)
            return false;
        total += t;
    }
    *bytes = total;
    return true;
}

/* What a window whose header chunk said w will hold: its head and ring, and for each
 * generation its image's length (its tables, plus their file's header and padding) and
 * what a filter holds besides its tables while it loads. Generations whose eviction
 * budget needs search memory of their own (over 510 kicks) take that too, which no
 * windowed filter this library makes has. */
static cf_status cf__window_meta_bytes(const cf__wmeta *w, size_t *bytes)
{
    cf__params p;
    memset(&p, 0, sizeof p);
    cf__shape_init(&p.shape, CF_DEFAULT_FINGERPRINT_BITS, CF_DEFAULT_BUCKET_SIZE, false);
    p.max_kicks = CF_DEFAULT_MAX_KICKS;
    p.max_tables = 1;
    uint64_t each = cf__fixed_bytes(&p, NULL, 1) + sizeof(cf__more) + CF__LOADING_BLOCK +
                    CF__STASH_SLOTS * sizeof(cf__stash);
    uint64_t total = cf__fixed_bytes(&p, NULL, 1) + sizeof(cf__more) + sizeof(struct cf__window) +
                     (uint64_t)w->n * (sizeof(cf_filter *) + 8u);
    for (unsigned i = 0; i < w->n; i++) /* each below 2^63 and the sum below 2^64: n <= 4096 */
        total += cf__load_le64(cf__gen_entry(w, i) + 8) + each;
    if (total > SIZE_MAX)
        return CF_EINVAL;
    *bytes = (size_t)total;
    return CF_OK;
}

cf_status cf_chunk_bytes_needed(const void *chunk, size_t len, size_t *bytes)
{
    cf__meta m;
    const char *why;
    if (!bytes || (!chunk && len))
        return CF_EINVAL;
    if (cf__is_window_file(chunk, len)) {
        cf__wmeta w;
        cf_status st = cf__parse_window(chunk, len, CF__HEADER_CHUNK, &w, &why);
        return st == CF_OK ? cf__window_meta_bytes(&w, bytes) : st;
    }
    cf_status st = cf__parse_meta(chunk, len, CF__HEADER_CHUNK, &m, &why);
    if (st != CF_OK)
        return st;
    return cf__meta_bytes(&m, bytes) ? CF_OK : CF_EINVAL;
}

/* The header chunk: check it as a file header, then make the filter it describes, with no
 * table memory yet: each table gets its memory with its first chunk. */
static cf_status cf__load_header(cf_filter **out, uint64_t cursor, const uint8_t *d, size_t len,
                                 const cf_allocator *a)
{
    cf__meta m;
    const char *why;
    cf_status st = cf__parse_meta(d, len, CF__HEADER_CHUNK, &m, &why);
    if (st != CF_OK)
        return st;
    if (cursor != cf__align_up(m.meta_len))
        return CF_ECORRUPT;
    cf_filter *f;
    st = cf__make_from_meta(&m, a, false, &f);
    if (st != CF_OK)
        return st;
    cf__more *more = cf__more_of(f);
    cf__loading *load = more ? cf__malloc(f, CF__LOADING_BLOCK) : NULL;
    if (!load) {
        cf__release(f);
        return CF_ENOMEM;
    }
    *load = (cf__loading){.pos = cursor,
                          .header_sum = XXH3_64bits(d, CF__HEADER_BYTES),
                          .file_sum = cf__load_le64(d + m.meta_len),
                          .ntables = f->ntables};
    more->load = load;
    f->bits |= CF__B_READ_ONLY;
    XXH3_state_t *sum = cf__sum_state(f);
    XXH3_64bits_reset(sum);
    XXH3_64bits_update(sum, d, (size_t)m.meta_len);
    cf__sum_zeros(sum, cursor - m.meta_len);
    cf__state_begin(f); /* none of its sub-filters can be read yet */
    cf__publish_ntables(f, 0);
    cf__state_end(f);
    *out = f;
    return CF_OK;
}

/* A windowed dump's header chunk: a window of that many generations, none of them yet,
 * read-only until every image is in. Its head's settings are placeholders until the first
 * image's header brings the seed (nothing else of the head is used by a window). */
static cf_status cf__window_load_header(cf_filter **out, uint64_t cursor, const uint8_t *d,
                                        size_t len, const cf_allocator *a)
{
    cf__wmeta w;
    const char *why;
    cf_status st = cf__parse_window(d, len, CF__HEADER_CHUNK, &w, &why);
    if (st != CF_OK)
        return st;
    if (w.meta_len != len || cursor != cf__image_next(w.meta_len))
        return CF_ECORRUPT;
    if (!cf__allocator_ok(a))
        return CF_EINVAL;
    cf__params p;
    memset(&p, 0, sizeof p);
    cf__shape_init(&p.shape, CF_DEFAULT_FINGERPRINT_BITS, CF_DEFAULT_BUCKET_SIZE, false);
    p.capacity = 1;
    p.max_kicks = CF_DEFAULT_MAX_KICKS;
    p.max_tables = 1;
    cf_filter *f;
    if ((st = cf__window_head(&p, a, w.n, w.window, w.generation, &f)) != CF_OK)
        return st;
    struct cf__window *win = cf__window_of(f);
    if (!(win->loading = cf__malloc(f, (size_t)w.n * sizeof(uint64_t)))) {
        cf__release(f);
        return CF_ENOMEM;
    }
    for (unsigned i = 0; i < w.n; i++)
        win->loading[i] = cf__load_le64(cf__gen_entry(&w, i) + 8);
    f->bits |= CF__B_READ_ONLY;
    *out = f;
    return CF_OK;
}

/* The next chunk of a windowed dump: the image being loaded takes it (its header chunk
 * first, checked against the window's settings before anything is allocated). */
static cf_status cf__window_load(cf_filter *f, uint64_t cursor, const uint8_t *d, size_t len)
{
    struct cf__window *w = cf__window_of(f);
    if (!w->loading)
        return CF_EINVAL;
    unsigned i = w->loaded;
    uint64_t at = cf__loading_image_at(w, i), inner = cursor - at;
    if (i + 1 < w->n && cursor == cf__loading_image_at(w, i + 1))
        inner = w->loading[i] - CF__SUM_BYTES; /* the image's last chunk */
    else if (cursor <= at || inner >= w->loading[i])
        return CF_ECORRUPT;
    if (!w->gen[i]) {
        uint8_t first[CF__HEADER_BYTES];
        if (i > 0)
            cf__header(w->gen[0], first);
        if (len < CF__HEADER_BYTES || cf__load_le64(d + CF__H_TOTAL) != w->loading[i] ||
            d[CF__H_HASH] != CF__HASH_XXH3 || cf__load_le32(d + CF__H_EXPANSION) != 0 ||
            (i > 0 && !cf__same_settings(first, d)))
            return CF_ECORRUPT;
    }
    const cf_allocator *a = (f->bits & CF__B_OWN_ALLOC) ? cf__alloc_of(f) : NULL;
    cf_status st = cf_load_chunk(&w->gen[i], inner, d, len, a);
    if (st != CF_OK)
        return st;
    if (i == 0)
        f->k8 = w->gen[0]->k8; /* the window's seed, for the keys it hashes */
    if (!cf_is_loading(w->gen[i]) && ++w->loaded == w->n) {
        cf__mfree(f, w->loading);
        w->loading = NULL;
        f->bits &= (uint8_t)~CF__B_READ_ONLY;
    }
    return CF_OK;
}

cf_status cf_load_chunk(cf_filter **fp, uint64_t cursor, const void *data, size_t len,
                        const cf_allocator *allocator)
{
    if (!fp || (!data && len))
        return CF_EINVAL;
    const uint8_t *d = data;
    if (!*fp)
        return cf__is_window_file(d, len) ? cf__window_load_header(fp, cursor, d, len, allocator)
                                          : cf__load_header(fp, cursor, d, len, allocator);
    cf_filter *f = *fp;
    if (cf__is_window(f))
        return cf__window_load(f, cursor, d, len);
    cf__loading *load = cf__load_of(f);
    if (!load || load->raw) /* raw tables load by cf_table_write */
        return CF_EINVAL;
    unsigned k;
    uint64_t pos = load->pos, start, n, next;
    cf__chunk_at(f, pos, &k, &start, &n, &next); /* load->pos is always a chunk position */
    if (len != n + CF__SUM_BYTES || cursor != next ||
        cf__chunk_tag(d, (size_t)n, load->header_sum, pos) != cf__load_le64(d + n))
        return CF_ECORRUPT;
    cf__table *t = &f->tables[k];
    const cf__shape *s = t->shape;
    uint64_t body = cf__data_bytes(s, t->buckets);
    bool first = pos == start;
    if (first) {
        /* Not zeroed: the chunks fill every byte of the body before anything reads it.
         * The padding after it, which probes read, is. */
        size_t bytes = cf__table_size(s, t->buckets);
        if (!(t->data = cf__malloc(f, bytes)))
            return CF_ENOMEM;
        memset(t->data + body, 0, bytes - (size_t)body);
    }
    memcpy(t->data + (pos - start), d, (size_t)n);
    /* Count the slots of the buckets this chunk completes, and carry the file sum on, in
     * a copy of the state until the chunk is accepted. */
    uint64_t upto = pos + n - start;
    bool table_done = upto == body;
    uint64_t from = first ? 0 : load->bucket, items = first ? 0 : load->items;
    uint64_t to = table_done ? t->buckets : upto * 8 / s->bucket_bits;
    uint64_t used = 0;
    bool canonical = cf__table_scan(s, t->data, from, to, &used);
    items += used;
    XXH3_state_t sum;
    memcpy(&sum, cf__sum_state(f), sizeof sum);
    XXH3_64bits_update(&sum, d, (size_t)n);
    if (table_done)
        cf__sum_zeros(&sum, cf__align_up(start + body) - (start + body));
    /* A finished table must hold as many fingerprints as the header says, and a finished
     * filter must be the very one dumped: its file sum must match the header chunk's. A
     * dump of a filter that changed midway fails here. */
    bool ok = canonical &&
              (!table_done || (items == t->items && cf__table_tail_clear(s, t->data, t->buckets)));
    uint64_t end = cf__table_offset(f, load->ntables);
    if (ok && next == end)
        ok = XXH3_64bits_digest(&sum) == load->file_sum;
    if (!ok) {
        if (first) { /* as it was */
            cf__mfree(f, t->data);
            t->data = NULL;
        }
        return CF_ECORRUPT;
    }
    memcpy(cf__sum_state(f), &sum, sizeof sum);
    load->items = items;
    load->bucket = to;
    load->pos = next;
    if (table_done) {
        cf__state_begin(f);
        cf__publish_ntables(f, k + 1);
        cf__state_end(f);
    }
    if (next == end) { /* complete */
        cf__mfree(f, load);
        f->more->load = NULL;
        f->bits &= (uint8_t)~CF__B_READ_ONLY;
        cf__more_trim(f);
    }
    return CF_OK;
}

bool cf_is_loading(const cf_filter *f)
{
    return f && cf__loading_any(f);
}
