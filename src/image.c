/*
 * image.c - one filter's image (docs/FORMAT.md is its specification): its bytes written
 * into a sink, validated and read back whole or mapped, and dumped and loaded in chunks
 * (the Redis module's SCANDUMP and LOADCHUNK). Every kind but the window writes one image;
 * a windowed file holds one per generation (window.c).
 *
 * An image is
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
#include "image.h"

#include <errno.h>
#include <unistd.h>

#define CF__DESC_BYTES  32u /* per sub-filter: buckets, items, table offset, table bytes */
#define CF__ENTRY_BYTES 16u /* per stash entry: bucket, fingerprint, sub-filter */
#define CF__HASH_RB     2u  /* hash id: RedisBloom's layout (CF_REDISBLOOM, redisbloom.c) */
#define CF__HASH_MS     3u  /* hash id: multiply-shift for 8-byte keys (CF_FAST_HASH, hash.h) */
#define CF__FLAG_WIDEN  1u  /* header flag: sub-filters widen their fingerprints (CF__H_WIDEN) */
#define CF__FLAG_SEMI   2u  /* header flag: semi-sorted buckets (CF_SEMI_SORT) */
#define CF__FLAGS_KNOWN (CF__FLAG_WIDEN | CF__FLAG_SEMI)

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

/* f's image's length. */
static uint64_t cf__image_len(const cf_filter *f)
{
    return cf__table_offset(f, cf__ntables_all(f)) + CF__SUM_BYTES;
}

/* ------------------------------------------------------------------------------------ */
/* Writing: one routine emits the bytes, into a buffer, a file or only a checksum        */
/* ------------------------------------------------------------------------------------ */

void cf__sink_init(cf__sink *k, uint8_t *out, int fd, uint8_t *stage)
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

void cf__flush(cf__sink *k)
{
    if (k->staged && !k->err)
        k->err = cf__write_all(k->fd, k->stage, k->staged);
    k->staged = 0;
}

void cf__emit(cf__sink *k, const void *p, size_t n)
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

void cf__emit_zeros(cf__sink *k, uint64_t n)
{
    static const uint8_t zeros[CF__ALIGN];
    while (n > 0) {
        size_t step = n < sizeof zeros ? (size_t)n : sizeof zeros;
        cf__emit(k, zeros, step);
        n -= step;
    }
}

uint64_t cf__emit_meta_sum(cf__sink *k)
{
    uint64_t sum = XXH3_64bits_digest(&k->meta);
    uint8_t b[CF__SUM_BYTES];
    cf__store_le64(b, sum);
    cf__emit(k, b, sizeof b);
    k->in_meta = false;
    return sum;
}

void cf__sink_restart(cf__sink *k)
{
    k->in_meta = true;
    XXH3_64bits_reset(&k->meta);
    XXH3_64bits_reset(&k->whole);
}

void cf__image_header(const cf_filter *f, uint8_t h[CF__HEADER_BYTES])
{
    const cf__shape *s = cf__shape0(f);
    memset(h, 0, CF__HEADER_BYTES);
    memcpy(h + CF__H_MAGIC, CF__MAGIC, CF__MAGIC_BYTES);
    cf__store_le16(h + CF__H_VERSION, s->seg ? CF__VERSION_SEG : CF__VERSION_ANY);
    cf__store_le16(h + CF__H_HEADER_BYTES, CF__HEADER_BYTES);
    cf__store_le64(h + CF__H_TOTAL, cf__image_len(f));
    cf__store_le64(h + CF__H_SEED, cf__seed(f));
    cf__store_le64(h + CF__H_CAPACITY, f->capacity);
    h[CF__H_FP_BITS] = (uint8_t)s->f;
    h[CF__H_BUCKET] = (uint8_t)s->b;
    h[CF__H_HASH] = (uint8_t)(cf__is_rb(f)                       ? CF__HASH_RB
                              : (f->bits & CF__B_FAST_HASH) != 0 ? CF__HASH_MS
                                                                 : CF__HASH_XXH3);
    h[CF__H_STASH] = (uint8_t)f->stash_n;
    cf__store_le16(h + CF__H_KICKS, (uint16_t)f->max_kicks);
    cf__store_le32(h + CF__H_FLAGS,
                   (f->widen ? CF__FLAG_WIDEN : 0u) | (s->semi ? CF__FLAG_SEMI : 0u));
    cf__store_le16(h + CF__H_WIDEN, (uint16_t)f->widen);
    cf__store_le32(h + CF__H_EXPANSION, f->expansion);
    cf__store_le32(h + CF__H_MAX_TABLES, cf__max_tables(f));
    cf__store_le32(h + CF__H_TABLES, cf__ntables_all(f));
    h[CF__H_SEGMENT] = s->seg;
}

/* The meta section: header, descriptors, stash, meta sum. Returns the meta sum. */
static uint64_t cf__emit_meta(cf__sink *k, const cf_filter *f)
{
    uint8_t h[CF__HEADER_BYTES];
    cf__image_header(f, h);
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
    return cf__emit_meta_sum(k);
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

static void cf__image_emit(cf__sink *k, const cf_filter *f)
{
    cf__emit_meta(k, f);
    cf__emit_body(k, f);
}

/* The file sum of f, computed without writing anything. */
static uint64_t cf__file_sum(const cf_filter *f)
{
    cf__sink k;
    cf__sink_init(&k, NULL, -1, NULL);
    cf__emit_meta(&k, f);
    return cf__emit_body(&k, f);
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
    sk->seg = p->shape.seg;
}

/* The checks every file's first 64 bytes get: magic, version, header length. The
 * version goes to *version. */
cf_status cf__parse_start(const uint8_t *b, size_t len, unsigned *version, const char **why)
{
    if (len < CF__MAGIC_BYTES || memcmp(b, CF__MAGIC, CF__MAGIC_BYTES) != 0)
        return cf__corrupt(why, len == 0 ? "empty" : "not a cuckoo filter (bad magic number)");
    if (len < CF__HEADER_BYTES)
        return cf__corrupt(why, "truncated: shorter than the 64-byte header");
    *version = cf__load_le16(b + CF__H_VERSION);
    if (*version == 0)
        return cf__corrupt(why, "bad format version 0");
    if (*version > CF_FORMAT_VERSION) {
        *why = "written by a newer format version";
        return CF_EVERSION;
    }
    if (*version < CF__VERSION_ANY) {
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

static cf_status cf__parse_meta(const uint8_t *b, size_t len, cf__extent extent, cf__meta *m,
                                const char **why)
{
    unsigned version;
    cf_status st = cf__parse_start(b, len, &version, why);
    if (st != CF_OK)
        return st;
    if ((cf__load_le32(b + CF__H_FLAGS) & CF__FLAG_WINDOW) != 0)
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
        (b[CF__H_HASH] != CF__HASH_XXH3 && b[CF__H_HASH] != CF__HASH_RB &&
         b[CF__H_HASH] != CF__HASH_MS)) {
        *why = "uses a feature or hash this library does not know";
        return CF_EVERSION;
    }
    unsigned seg = b[CF__H_SEGMENT];
    if (b[CF__H_RESERVED2] != 0 || b[CF__H_RESERVED2 + 1] != 0 || b[CF__H_RESERVED2 + 2] != 0 ||
        (version == CF__VERSION_ANY && seg != 0))
        return cf__corrupt(why, "reserved header field is not zero");
    /* Version 3 has segments, of the one size this library makes: another size is a
     * feature of a newer writer. */
    if (version == CF__VERSION_SEG && seg != CF_SEGMENT_BITS) {
        if (seg == 0)
            return cf__corrupt(why, "a segmented file (version 3) without segments");
        *why = "uses segments of a size this library does not know";
        return CF_EVERSION;
    }

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
    p->shape.seg = (uint8_t)seg;
    /* RedisBloom's layout: its fingerprints, no seed, no widening or semi-sorting, no
     * stash, no segments, sizes that are powers of two (checked with each table below). */
    p->redisbloom = b[CF__H_HASH] == CF__HASH_RB;
    p->shape.exact = p->redisbloom;
    p->fast_hash = b[CF__H_HASH] == CF__HASH_MS;
    if (p->redisbloom && (f != CF__RB_FP_BITS || flags != 0 || p->seed != 0 || m->nstash != 0 ||
                          seg != 0 || (p->expansion & (p->expansion - 1u)) != 0))
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
        if (k == 0 && seg && (buckets == 0 || (buckets & ((UINT64_C(1) << seg) - 1u)) != 0))
            return cf__corrupt(why, "a segmented table of other than whole segments");
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

/* The part of validation that reads the tables but for the file sum: the padding and
 * every table's item count. m came from cf__parse_meta over the whole file. */
static cf_status cf__check_tables(const cf__meta *m, const char **why)
{
    const uint8_t *b = m->base;
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

/* The part of validation that reads the tables: the file sum, then cf__check_tables. */
static cf_status cf__check_body(const cf__meta *m, const char **why)
{
    const uint8_t *b = m->base;
    if (XXH3_64bits(b, (size_t)m->total - CF__SUM_BYTES) !=
        cf__load_le64(b + m->total - CF__SUM_BYTES))
        return cf__corrupt(why, "checksum mismatch");
    return cf__check_tables(m, why);
}

uint64_t cf__image_head(const cf_filter *f, uint8_t *out, uint64_t *total)
{
    cf__sink k;
    cf__sink_init(&k, out, -1, NULL);
    cf__emit_meta(&k, f);
    uint64_t head = cf__table_offset(f, 0);
    cf__emit_zeros(&k, head - cf__meta_len(f->ntables, f->stash_n));
    *total = cf__image_len(f);
    return head;
}

cf_status cf__image_unsummed(const uint8_t *b, size_t len, uint64_t *sum, const char **why)
{
    cf__meta m;
    cf_status st = cf__parse_meta(b, len, CF__WHOLE, &m, why);
    if (st == CF_OK)
        st = cf__check_tables(&m, why);
    if (st == CF_OK)
        *sum = XXH3_64bits(b, (size_t)m.total - CF__SUM_BYTES);
    return st;
}

cf_status cf__image_parse(const uint8_t *b, size_t len, bool body, cf__params *p, const char **why)
{
    cf__meta m;
    cf_status st = cf__parse_meta(b, len, CF__WHOLE, &m, why);
    if (st == CF_OK && body)
        st = cf__check_body(&m, why);
    if (st == CF_OK)
        *p = m.p;
    return st;
}

static cf_status cf__image_validate(const uint8_t *b, size_t len, const char **why)
{
    cf__params p;
    return cf__image_parse(b, len, true, &p, why);
}

/* The settings: the header but for the total length, the stash and the sub-filter counts
 * (docs/FORMAT.md, "Windowed files", which every generation shares). */
bool cf__image_same_settings(const uint8_t *a, const uint8_t *b)
{
    return memcmp(a + CF__H_VERSION, b + CF__H_VERSION, 2) == 0 &&
           a[CF__H_SEGMENT] == b[CF__H_SEGMENT] &&
           memcmp(a + CF__H_FLAGS, b + CF__H_FLAGS, 4) == 0 &&
           memcmp(a + CF__H_SEED, b + CF__H_SEED, CF__H_STASH - CF__H_SEED) == 0 &&
           memcmp(a + CF__H_KICKS, b + CF__H_KICKS, CF__H_TABLES - CF__H_KICKS) == 0;
}

/* A filter for a checked meta section: tables allocated and empty (with_data) or left
 * for the caller to point at; items and stash filled in. */
static cf_status cf__make_from_meta(const cf__meta *m, const cf_allocator *a, bool with_data,
                                    cf_filter **out)
{
    cf_filter *f;
    if (!cf__allocator_ok(a))
        return CF_EINVAL;
    cf_status st =
        cf__filter_make(&m->p, a, m->ntables, m->buckets0, with_data, cf__first_ops(&m->p), &f);
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

/* A filter from an image's bytes whose every check has passed (cf__image_validate): its
 * meta section read again (a few dozen bytes), its tables copied. */
static cf_status cf__image_build(const uint8_t *b, size_t len, unsigned flags,
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

/* A read-only filter over an image's bytes that stay mapped: its meta section checked (its
 * body too with CF_MAP_VERIFY), its tables pointing into the bytes. It borrows them (`map`
 * set, `map_len` 0): whoever made the mapping unmaps it. */
static cf_status cf__image_map(const uint8_t *b, size_t len, unsigned flags, const cf_allocator *a,
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

static cf_status cf__dump_chunk(const cf_filter *f, uint64_t *cursor, void *buf, size_t cap,
                                size_t *len)
{
    if (cf__load_of(f) && cf__load_of(f)->raw)
        return CF_EINVAL; /* raw tables loading: no file position is theirs yet */
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
    cf__image_header(f, h);
    cf__store_le64((uint8_t *)buf + n,
                   cf__chunk_tag(buf, (size_t)n, XXH3_64bits(h, sizeof h), pos));
    *len = (size_t)(n + CF__SUM_BYTES);
    *cursor = next;
    return CF_OK;
}

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

static cf_status cf__image_bytes_needed(const uint8_t *d, size_t len, size_t *bytes)
{
    cf__meta m;
    const char *why;
    cf_status st = cf__parse_meta(d, len, CF__HEADER_CHUNK, &m, &why);
    if (st != CF_OK)
        return st;
    return cf__meta_bytes(&m, bytes) ? CF_OK : CF_EINVAL;
}

/* The header chunk: check it as a file header, then make the filter it describes, with no
 * table memory yet: each table gets its memory with its first chunk. */
static cf_status cf__image_load_header(cf_filter **out, uint64_t cursor, const uint8_t *d,
                                       size_t len, const cf_allocator *a)
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

/* The next data chunk: checked against its tag and its place, copied into its table (the
 * table's memory with its first chunk), the slots of the buckets it completes counted
 * and the file sum carried on. */
static cf_status cf__image_load(cf_filter *f, uint64_t cursor, const uint8_t *d, size_t len)
{
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
    uint64_t to = table_done ? t->buckets : cf__buckets_within(s, upto);
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

/* ------------------------------------------------------------------------------------ */
/* The codec                                                                            */
/* ------------------------------------------------------------------------------------ */

static bool cf__image_loading(const cf_filter *f)
{
    return cf__load_of(f) != NULL;
}

/* A stream's next read (cf__codec.want): the meta section, then the length it gives (once
 * checked) plus one more byte, which shows whether the input is longer. */
static uint64_t cf__image_want(const uint8_t *b, size_t len)
{
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

const cf__codec cf__image_codec = {
    .len = cf__image_len,
    .emit = cf__image_emit,
    .loading = cf__image_loading,
    .dump_max = cf__dump_chunk_max,
    .dump = cf__dump_chunk,
    .load = cf__image_load,
    .validate = cf__image_validate,
    .build = cf__image_build,
    .map = cf__image_map,
    .want = cf__image_want,
    .bytes_needed = cf__image_bytes_needed,
    .load_header = cf__image_load_header,
};
