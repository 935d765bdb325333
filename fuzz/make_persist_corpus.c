/*
 * make_persist_corpus.c - write the seed corpora of fuzz_deserialize and fuzz_chunks
 * (fuzz/corpus/deserialize/seed-* and fuzz/corpus/chunks/seed-*) from real filters, and
 * RDB records of fuzz_module (fuzz/corpus/module/seed-rdb-*).
 *
 *   cmake --build build --target make_persist_corpus
 *   build/fuzz/make_persist_corpus fuzz/corpus
 *
 * Built only on demand (it is not part of `all`). Only files named seed-* are replaced;
 * inputs the fuzzer found (named by their SHA-1) are left alone. The output is
 * deterministic: the same library writes the same bytes.
 *
 * deserialize seeds are a mode byte (see fuzz_deserialize.c) and a file: valid files of
 * many shapes, then truncated ones and ones with a field or a table byte changed. Most
 * have every fix-up bit set, so that the changed ones fail at the check they aim at, not
 * at a checksum. chunks seeds are records (u64 cursor, u32 length and flags, bytes; see
 * fuzz_chunks.c): real dumps, and dumps with chunks damaged, forged, repeated, swapped,
 * missing or foreign, each followed by the right chunk.
 */
#define _POSIX_C_SOURCE 200809L

#include <cuckoofilter.h>

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* fuzz_deserialize's mode bits */
#define M_TOTAL  0x01u
#define M_META   0x02u
#define M_FILE   0x04u
#define M_MAPPED 0x08u
#define M_FIXALL (M_TOTAL | M_META | M_FILE)
#define M_ALL    (M_FIXALL | M_MAPPED)

/* fuzz_chunks's record flags */
#define R_ABANDON 0x40000000u
#define R_FORGE   0x80000000u
#define R_FAIL(n) ((uint32_t)(n) << 28)

static const char *prog = "make_persist_corpus";
static unsigned written_files = 0;
static unsigned long written_bytes = 0;

/* Print "prog: what: detail" (detail may be NULL) and exit. */
static _Noreturn void die(const char *what, const char *detail)
{
    fprintf(stderr, "%s: %s%s%s\n", prog, what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL)
        die("out of memory", NULL);
    return p;
}

/* ------------------------------------------------------------------------------------ */
/* Output                                                                               */
/* ------------------------------------------------------------------------------------ */

static void make_dir(const char *path)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        die(path, strerror(errno));
}

/* Remove the seed-* files of a directory (the fuzzer's finds stay). */
static void remove_seeds(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        die(dir, strerror(errno));
    const struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "seed-", 5) != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (remove(path) != 0)
            die(path, strerror(errno));
    }
    closedir(d);
}

/* Write dir/seed-NAME: the prefix bytes (0 or 1), then data. */
static void write_seed(const char *dir, const char *name, const uint8_t *prefix, size_t np,
                       const uint8_t *data, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (fp == NULL)
        die(path, strerror(errno));
    if ((np > 0 && fwrite(prefix, 1, np, fp) != np) || (n > 0 && fwrite(data, 1, n, fp) != n) ||
        fclose(fp) != 0)
        die(path, "write failed");
    written_files++;
    written_bytes += np + n;
}

/* ------------------------------------------------------------------------------------ */
/* Filters                                                                              */
/* ------------------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t z)
{
    z += UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

typedef struct shape {
    uint64_t capacity;
    unsigned f, b, kicks, expansion, max_subs;
    uint64_t seed;
    unsigned flags;
} shape;

static cf_filter *make(const shape *s)
{
    cf_config c = {.capacity = s->capacity,
                   .fingerprint_bits = s->f,
                   .bucket_size = s->b,
                   .max_kicks = s->kicks,
                   .expansion = s->expansion,
                   .seed = s->seed,
                   .max_sub_filters = s->max_subs,
                   .flags = s->flags | CF_FIXED_SEED}; /* seed 0 too: deterministic output */
    cf_filter *f;
    cf_status st = cf_new(&c, &f);
    if (st != CF_OK)
        die("cf_new", cf_strerror(st));
    return f;
}

/* Add key i of those from `salt`. */
static void fill_one(cf_filter *f, uint64_t salt, unsigned i)
{
    cf_status st = cf_add_hash(f, mix64(salt * 1000003u + i));
    if (st != CF_OK)
        die("cf_add_hash", cf_strerror(st));
}

/* Add n keys (hashes from `salt`); stop early once `stashed` entries are in the stash. */
static void fill(cf_filter *f, unsigned n, uint64_t salt, uint64_t stashed)
{
    for (unsigned i = 0; i < n; i++) {
        cf_stats s;
        cf_get_stats(f, &s);
        if (stashed > 0 && s.stashed >= stashed)
            return;
        fill_one(f, salt, i);
    }
    if (stashed > 0)
        die("fill", "the stash never got that many entries");
}

typedef struct blob {
    uint8_t *p;
    size_t n;
} blob;

static blob serialize(const cf_filter *f)
{
    blob b = {xmalloc(cf_serialized_size(f)), cf_serialized_size(f)};
    if (cf_serialize(f, b.p, b.n, NULL) != CF_OK)
        die("cf_serialize", "failed");
    return b;
}

/* ------------------------------------------------------------------------------------ */
/* deserialize seeds                                                                    */
/* ------------------------------------------------------------------------------------ */

static const char *deser_dir, *module_dir;

static void deser(const char *name, unsigned mode, const uint8_t *p, size_t n)
{
    uint8_t m = (uint8_t)mode;
    write_seed(deser_dir, name, &m, 1, p, n);
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put(uint8_t *p, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A copy of the file with `bytes` bytes at `at` set to v (fixed up by the target). */
static void deser_field(const char *name, const blob *b, size_t at, uint64_t v, unsigned bytes)
{
    uint8_t *c = xmalloc(b->n);
    memcpy(c, b->p, b->n);
    if (at + bytes > b->n)
        die(name, "field past the end");
    put(c + at, v, bytes);
    deser(name, M_ALL, c, b->n);
    free(c);
}

static size_t meta_len(const blob *b)
{
    return 64u + 32u * (size_t)(get64(b->p + 56) & 0xFFFFFFFFu) + 16u * b->p[43] + 8u;
}

static size_t table_offset(const blob *b, unsigned k)
{
    return (size_t)get64(b->p + 64 + 32u * k + 16);
}

static size_t table_len(const blob *b, unsigned k)
{
    return (size_t)get64(b->p + 64 + 32u * k + 24);
}

/* A copy of the (plain, widening) file b whose first stored fingerprint in sub-filter k
 * has its low f bits 0 (its upper bits kept, or bit f set if they are 0 too); checksums
 * left for the target's fix-ups. */
static blob low_bits_zero(const blob *b, unsigned k)
{
    unsigned f = b->p[40], bs = b->p[41], widen = (unsigned)(b->p[46] | b->p[47] << 8);
    unsigned w = f + (k * widen + 255) / 256;
    if (w > 32 || w == f || (get64(b->p + 12) & 2u))
        die("low_bits_zero", "not a plain widening file");
    blob x = {xmalloc(b->n), b->n};
    memcpy(x.p, b->p, b->n);
    uint8_t *t = x.p + table_offset(b, k);
    uint64_t slots = get64(b->p + 64 + 32u * k) * bs, mask = (UINT64_C(1) << w) - 1;
    for (uint64_t j = 0; j < slots; j++) {
        uint64_t bit = j * w, word = get64(t + bit / 8), v = (word >> (bit % 8)) & mask;
        if (v == 0)
            continue;
        v &= ~((UINT64_C(1) << f) - 1);
        if (v == 0)
            v = UINT64_C(1) << f;
        put(t + bit / 8, (word & ~(mask << (bit % 8))) | v << (bit % 8), 8);
        return x;
    }
    die("low_bits_zero", "the table holds no fingerprint");
}

/* The Redis module's RDB record of the filter whose file is b (docs/FORMAT.md, "In the
 * Redis module"), as fuzz_module reads it (mode 1: an unsigned is 8 bytes, a string a u16
 * length and its bytes): the chunks made from the file's bytes, every checksum and tag
 * right, so that it reaches the table checks behind them. */
static void module_rdb_seed(const char *name, const blob *b)
{
    uint64_t seed = get64(b->p + 24), key = cf_hash_seeded(0, b->p, 64);
    unsigned nt = (unsigned)(get64(b->p + 56) & 0xFFFFFFFFu);
    uint8_t *out = xmalloc(b->n * 2 + 256), fields[16];
    size_t n = 0, ml = meta_len(b);
    put(fields, 0, 8);      /* deletes */
    put(fields + 8, 20, 8); /* MAXITERATIONS */
    uint64_t head[3] = {0, 20, 0};
    for (unsigned i = 0; i < 3; i++, n += 8)
        put(out + n, head[i], 8);
    put(out + n, (ml + 63) & ~(size_t)63, 8); /* the header chunk's cursor: T_0 */
    put(out + n + 8, ml + 8, 2);
    memcpy(out + n + 10, b->p, ml);
    put(out + n + 10 + ml, cf_hash_seeded(0, b->p, b->n - 8), 8); /* the file checksum */
    n += 10 + ml + 8;
    for (unsigned k = 0; k < nt; k++) {
        size_t off = table_offset(b, k), len = table_len(b, k);
        if (len + 8 > UINT16_MAX)
            die(name, "a table too big for a fuzz_module string");
        put(out + n, (off + len + 63) & ~(size_t)63, 8);
        put(out + n + 8, len + 8, 2);
        memcpy(out + n + 10, b->p + off, len);
        put(out + n + 10 + len, cf_hash_seeded(key ^ off, b->p + off, len), 8);
        n += 10 + len + 8;
    }
    put(out + n, 0, 8);
    put(out + n + 8, cf_hash_seeded(seed, fields, sizeof fields), 8);
    n += 16;
    uint8_t mode = 1; /* an RDB value */
    write_seed(module_dir, name, &mode, 1, out, n);
    free(out);
}

/* RedisBloom's own RDB record (type MBbloomCF, encoding `encver`) of the filter of its
 * layout whose file is b, as fuzz_module reads it (mode 1 | 8, the encoding in the high
 * bits): the sub-filters, the first's buckets, the items, then (encoding 4) deletes,
 * bucket size, MAXITERATIONS and expansion, then per sub-filter (encoding 4: its buckets)
 * its bytes. `cut` bytes are dropped from the last table (a forged record). */
static void module_rb_seed(const char *name, const blob *b, unsigned encver, size_t cut)
{
    unsigned nt = (unsigned)(get64(b->p + 56) & 0xFFFFFFFFu), bs = b->p[41];
    uint8_t *out = xmalloc(b->n + 64u * nt + 64), mode = (uint8_t)(1u | 8u | (encver - 1u) << 4);
    size_t n = 0;
    uint64_t items = 0;
    for (unsigned k = 0; k < nt; k++)
        items += get64(b->p + 64 + 32u * k + 8);
    uint64_t head[7] = {nt,
                        get64(b->p + 64),
                        items,
                        3,
                        bs,
                        get64(b->p + 44) & 0xFFFF,
                        get64(b->p + 48) & 0xFFFFFFFFu};
    for (unsigned i = 0; i < (encver >= 4 ? 7u : 3u); i++, n += 8)
        put(out + n, head[i], 8);
    for (unsigned k = 0; k < nt; k++) {
        size_t len = table_len(b, k) - (k + 1 == nt ? cut : 0);
        if (encver >= 4) {
            put(out + n, get64(b->p + 64 + 32u * k), 8);
            n += 8;
        }
        if (len > UINT16_MAX)
            die(name, "a table too big for a fuzz_module string");
        put(out + n, len, 2);
        memcpy(out + n + 2, b->p + table_offset(b, k), len);
        n += 2 + len;
    }
    write_seed(module_dir, name, &mode, 1, out, n);
    free(out);
}

/* RedisBloom's CF.SCANDUMP chunks of the filter of its layout whose file is b, as
 * fuzz_module's CF.LOADCHUNK records (mode 0: cursor u64, length u16, bytes): the 38-byte
 * header at iterator 1 (items, first sub-filter's buckets, deletes, sub-filters as u64;
 * bucket size, MAXITERATIONS, expansion as u16), then each table at the iterator that
 * comes with it (1 + where it ends in the run of tables). */
static void module_rb_chunks_seed(const char *name, const blob *b)
{
    unsigned nt = (unsigned)(get64(b->p + 56) & 0xFFFFFFFFu);
    uint8_t *out = xmalloc(b->n + 64u * nt + 64), mode = 0, h[38];
    uint64_t items = 0, at = 0;
    for (unsigned k = 0; k < nt; k++)
        items += get64(b->p + 64 + 32u * k + 8);
    put(h, items, 8);
    put(h + 8, get64(b->p + 64), 8);
    put(h + 16, 0, 8);
    put(h + 24, nt, 8);
    put(h + 32, b->p[41], 2);
    put(h + 34, get64(b->p + 44) & 0xFFFF, 2);
    put(h + 36, get64(b->p + 48) & 0xFFFF, 2);
    size_t n = 0;
    put(out, 1, 8);
    put(out + 8, sizeof h, 2);
    memcpy(out + 10, h, sizeof h);
    n += 10 + sizeof h;
    for (unsigned k = 0; k < nt; k++) {
        size_t len = table_len(b, k);
        at += len;
        put(out + n, at + 1, 8);
        put(out + n + 8, len, 2);
        memcpy(out + n + 10, b->p + table_offset(b, k), len);
        n += 10 + len;
    }
    write_seed(module_dir, name, &mode, 1, out, n);
    free(out);
}

/* The window c makes, with n1 keys from salt1 in a generation and n2 from salt2 in the
 * next. */
static cf_filter *make_window(const cf_config *c, unsigned n1, uint64_t salt1, unsigned n2,
                              uint64_t salt2)
{
    cf_filter *f;
    cf_status st = cf_new(c, &f);
    if (st != CF_OK)
        die("cf_new", cf_strerror(st));
    fill(f, n1, salt1, 0);
    if ((st = cf_advance(f)) != CF_OK)
        die("cf_advance", cf_strerror(st));
    fill(f, n2, salt2, 0);
    return f;
}

/* fuzz_module's CF.LOADCHUNK records (mode 0: cursor u64, length u16, bytes) of f's
 * chunks as CF.SCANDUMP gives them: the module's fields (deletes, MAXITERATIONS, and their
 * check, the filter's own hash of them) in front of the header chunk. A window's check
 * can only be made once its first generation brings the seed. */
static void module_chunks_seed(const char *name, const cf_filter *f, uint64_t deletes)
{
    size_t cap = cf_dump_chunk_max(f), len, n = 0;
    uint8_t *chunk = xmalloc(cap), *out = xmalloc(cf_serialized_size(f) * 2 + 4096), fields[16];
    put(fields, deletes, 8);
    put(fields + 8, 20, 8); /* MAXITERATIONS */
    uint64_t cursor = 0;
    do {
        bool header = cursor == 0;
        if (cf_dump_chunk(f, &cursor, chunk, cap, &len) != CF_OK)
            die(name, "cf_dump_chunk failed");
        if (len == 0)
            break;
        size_t extra = header ? 24u : 0u;
        if (len + extra > UINT16_MAX)
            die(name, "a chunk too big for a fuzz_module record");
        put(out + n, cursor, 8);
        put(out + n + 8, len + extra, 2);
        n += 10;
        if (header) {
            memcpy(out + n, fields, sizeof fields);
            put(out + n + 16, cf_hash(f, fields, sizeof fields), 8);
            n += 24;
        }
        memcpy(out + n, chunk, len);
        n += len;
    } while (cursor != 0);
    uint8_t mode = 0;
    write_seed(module_dir, name, &mode, 1, out, n);
    free(out);
    free(chunk);
}

/* fuzz_module's CF.LOADCHUNK record of a RedisBloom header alone (38 bytes at iterator 1),
 * then `data` bytes of its first sub-filter's chunk, if any. */
static void module_rb_header_seed(const char *name, uint64_t m, uint64_t deletes, uint64_t n,
                                  unsigned b, unsigned e, size_t data)
{
    uint8_t out[10 + 38 + 10 + 64] = {0}, mode = 0;
    put(out, 1, 8);
    put(out + 8, 38, 2);
    put(out + 10 + 8, m, 8);
    put(out + 10 + 16, deletes, 8);
    put(out + 10 + 24, n, 8);
    put(out + 10 + 32, b, 2);
    put(out + 10 + 34, 20, 2);
    put(out + 10 + 36, e, 2);
    size_t len = 10 + 38;
    if (data) {
        if (data > 64)
            die(name, "a first chunk past the seed's room");
        put(out + len, 1 + data, 8);
        put(out + len + 8, data, 2);
        out[len + 10] = 7; /* a fingerprint */
        len += 10 + data;
    }
    write_seed(module_dir, name, &mode, 1, out, len);
}

/* The cases of "Nothing accepted is ever lost": each once refused or lost, kept as seeds.
 * A concurrent window's file at each fast width (its images once carried stale item
 * counts); windows' chunks in the module (once refused at the first chunk); RedisBloom
 * headers with deletes at their bound (once taken past it by one CF.DEL), claiming a
 * gigabyte (once allocated at once) and 65,536 sub-filters. */
static void lost_seeds(void)
{
    static const unsigned widths[] = {8, 12, 16};
    for (unsigned i = 0; i < 3; i++) {
        cf_config c = {.capacity = 40,
                       .fingerprint_bits = widths[i],
                       .seed = 51u + i,
                       .flags = CF_FIXED_SEED | CF_CONCURRENT,
                       .generations = 3,
                       .window = 3600};
        cf_filter *f = make_window(&c, 30, 60u + i, 12, 63u + i);
        blob b = serialize(f);
        char name[64];
        snprintf(name, sizeof name, "window-concurrent-f%u", widths[i]);
        deser(name, 0u, b.p, b.n);
        snprintf(name, sizeof name, "window-chunks-f%u", widths[i]);
        module_chunks_seed(name, f, i == 0 ? (uint64_t)INT64_MAX : 3u);
        free(b.p);
        cf_free(f);
    }
    module_rb_header_seed("rb-deletes-max", 2, (uint64_t)INT64_MAX, 1, 1, 1, 2);
    module_rb_header_seed("rb-header-1gib", (uint64_t)1 << 28, 0, 1, 4, 1, 0);
    module_rb_header_seed("rb-header-65536", 2, 0, 65536, 1, 1, 2);
}

static void deserialize_seeds(void)
{
    /* Every fingerprint width with two of the fast bucket sizes (each size three or more
     * times): fixed filters, about two thirds full. */
    static const unsigned fs[] = {4, 8, 12, 16, 32}, bs[] = {1, 2, 4, 8};
    for (unsigned i = 0; i < 5; i++) {
        for (unsigned j = i % 2; j < 4; j += 2) {
            shape s = {.capacity = 80, .f = fs[i], .b = bs[j], .seed = 100u * i + j};
            cf_filter *f = make(&s);
            fill(f, 50, i * 4 + j, 0);
            blob b = serialize(f);
            char name[64];
            snprintf(name, sizeof name, "f%u-b%u", fs[i], bs[j]);
            /* Mostly every fix-up and the mapped path; some files as they are. */
            deser(name, (i + j) % 4 == 0 ? 0u : (i + j) % 4 == 1 ? M_MAPPED : M_ALL, b.p, b.n);
            free(b.p);
            cf_free(f);
        }
    }

    /* Windowed files (as they are: the fix-ups are a plain file's): three generations,
     * keys in two of them, plain and semi-sorted. */
    for (unsigned semi = 0; semi < 2; semi++) {
        cf_config c = {.capacity = 30,
                       .fingerprint_bits = semi ? 13u : 12u,
                       .seed = 31u + semi,
                       .flags = CF_FIXED_SEED | (semi ? CF_SEMI_SORT : 0u),
                       .generations = 3,
                       .window = 3600};
        cf_filter *f = make_window(&c, 20, 40u + semi, 10, 42u + semi);
        blob b = serialize(f);
        deser(semi ? "window-semi" : "window", semi ? M_MAPPED : 0u, b.p, b.n);
        free(b.p);
        cf_free(f);
    }

    /* Other shapes: no SWAR probe (b * f > 64), odd sizes, the largest bucket. */
    static const shape odd[] = {
        {.capacity = 60, .f = 7, .b = 3, .seed = 7},
        {.capacity = 40, .f = 5, .b = 16, .seed = 5},
        {.capacity = 300, .f = 32, .b = 255, .seed = 9},
        {.capacity = 50, .f = 13, .b = 5, .kicks = 65535, .seed = UINT64_MAX},
        {.capacity = 80, .f = 13, .b = 4, .seed = 13, .flags = CF_SEMI_SORT},
        {.capacity = 80, .f = 5, .b = 4, .seed = 14, .flags = CF_SEMI_SORT},
        {.capacity = 40, .f = 32, .b = 4, .seed = 15, .flags = CF_SEMI_SORT},
        /* format version 3: one segment, in its smallest bytes (4-bit, 1-slot buckets) */
        {.capacity = 60, .f = 4, .b = 1, .seed = 16, .flags = CF_SEGMENTED},
    };
    static const char *const odd_names[] = {"f7-b3",    "f5-b16",  "f32-b255", "f13-b5-kicks65535",
                                            "semi-f13", "semi-f5", "semi-f32", "segmented-f4-b1"};
    for (unsigned i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        cf_filter *f = make(&odd[i]);
        fill(f, (unsigned)odd[i].capacity / 2, 40 + i, 0);
        blob b = serialize(f);
        deser(odd_names[i], M_ALL, b.p, b.n);
        free(b.p);
        cf_free(f);
    }

    /* Empty filters. */
    {
        shape s = {.capacity = 1};
        cf_filter *f = make(&s);
        blob b = serialize(f);
        deser("empty-capacity-1", M_ALL, b.p, b.n);
        free(b.p);
        cf_free(f);
        shape g = {.capacity = 100, .expansion = 32768, .max_subs = 65536, .seed = 3};
        f = make(&g);
        b = serialize(f);
        deser("empty-growing-limits", M_ALL, b.p, b.n);
        free(b.p);
        cf_free(f);
    }

    /* A fixed filter with 3 stash entries, and one with a full stash. */
    blob stash;
    {
        shape s = {.capacity = 24, .f = 8, .b = 1, .kicks = 1, .seed = 11};
        cf_filter *f = make(&s);
        fill(f, 500, 50, 3);
        stash = serialize(f);
        deser("stash-3", M_ALL, stash.p, stash.n);
        fill(f, 500, 51, 8);
        blob b = serialize(f);
        deser("stash-8", M_ALL, b.p, b.n);
        free(b.p);
        cf_free(f);
    }
    /* A growing filter at its max_sub_filters, with stash entries. */
    {
        shape s = {.capacity = 4, .f = 6, .b = 1, .kicks = 1, .expansion = 1, .max_subs = 3};
        cf_filter *f = make(&s);
        fill(f, 500, 52, 2);
        blob b = serialize(f);
        deser("growing-stash", M_ALL, b.p, b.n);
        free(b.p);
        cf_free(f);
    }

    /* Growing filters: 4 sub-filters at expansion 2, 3 at 4, 30 at 1. */
    blob grow;
    {
        shape s = {.capacity = 16, .f = 12, .b = 4, .expansion = 2, .seed = 21};
        cf_filter *f = make(&s);
        fill(f, 200, 60, 0);
        grow = serialize(f);
        deser("growing-e2", M_ALL, grow.p, grow.n);
        cf_free(f);
        shape s4 = {.capacity = 8, .f = 16, .b = 2, .expansion = 4, .seed = 22};
        f = make(&s4);
        fill(f, 150, 61, 0);
        blob b = serialize(f);
        deser("growing-e4", M_ALL, b.p, b.n);
        free(b.p);
        cf_free(f);
        /* Sub-filters of the first's width (the others above widen theirs). */
        shape sw = {.capacity = 16,
                    .f = 12,
                    .b = 4,
                    .expansion = 2,
                    .seed = 24,
                    .flags = CF_GROW_SAME_WIDTH};
        f = make(&sw);
        fill(f, 200, 63, 0);
        b = serialize(f);
        deser("growing-e2-same-width", M_ALL, b.p, b.n);
        free(b.p);
        cf_free(f);
        shape s1 = {.capacity = 2, .f = 8, .b = 2, .expansion = 1, .max_subs = 1000, .seed = 23};
        f = make(&s1);
        fill(f, 120, 62, 0);
        b = serialize(f);
        deser("growing-e1-many", M_ALL, b.p, b.n);
        /* Allocation failures while loading it: the head, the table array, tables. */
        for (unsigned n = 1; n <= 4; n++) {
            char name[64];
            snprintf(name, sizeof name, "growing-e1-alloc-fail-%u", n == 4 ? 9u : n);
            deser(name, M_ALL | (n == 4 ? 9u : n) << 4, b.p, b.n);
        }
        free(b.p);
        cf_free(f);
    }

    /* Truncated, with and without the fix-ups. */
    size_t ml = meta_len(&grow);
    const size_t cuts[] = {0, 7, 8, 63, 64, ml - 1, ml, grow.n - 9, grow.n - 1};
    for (unsigned i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "truncated-%zu", cuts[i]);
        deser(name, i % 2 ? M_ALL : 0u, grow.p, cuts[i]);
    }
    deser("mode-only", M_ALL, NULL, 0);
    {
        uint8_t *c = xmalloc(grow.n + 64);
        memcpy(c, grow.p, grow.n);
        memset(c + grow.n, 0, 64);
        deser("extended-64", M_ALL, c, grow.n + 64);
        free(c);
    }

    /* Damage without the fix-ups: the checksums catch it. */
    {
        uint8_t *c = xmalloc(grow.n);
        memcpy(c, grow.p, grow.n);
        c[32] ^= 1; /* capacity */
        deser("flip-header-raw", 0, c, grow.n);
        memcpy(c, grow.p, grow.n);
        c[table_offset(&grow, 1)] ^= 0x10;
        deser("flip-table-raw", 0, c, grow.n);
        free(c);
    }

    /* One field at a time out of range (the target fixes the checksums). */
    deser_field("magic", &grow, 1, 'c', 1);
    deser_field("version-0", &grow, 8, 0, 2);
    deser_field("version-2", &grow, 8, 2, 2);
    deser_field("header-bytes-63", &grow, 10, 63, 2);
    deser_field("flags-0", &grow, 12, 0, 4); /* grow widens: a widening without its flag */
    deser_field("flags-3", &grow, 12, 3, 4); /* a flag no reader knows */
    deser_field("capacity-0", &grow, 32, 0, 8);
    deser_field("f-3", &grow, 40, 3, 1);
    deser_field("f-33", &grow, 40, 33, 1);
    deser_field("b-0", &grow, 41, 0, 1);
    deser_field("b-2", &grow, 41, 2, 1);
    deser_field("hash-2", &grow, 42, 2, 1);
    deser_field("stash-9", &grow, 43, 9, 1);
    deser_field("kicks-0", &grow, 44, 0, 2);
    deser_field("widen-0", &grow, 46, 0, 2);
    deser_field("widen-1", &grow, 46, 1, 2);
    deser_field("widen-too-fast", &grow, 46, 256 * (32 - 12) + 1, 2);
    deser_field("expansion-32769", &grow, 48, 32769, 4);
    deser_field("expansion-0", &grow, 48, 0, 4);
    deser_field("expansion-3", &grow, 48, 3, 4);
    deser_field("max-subs-0", &grow, 52, 0, 4);
    deser_field("max-subs-65537", &grow, 52, 65537, 4);
    deser_field("max-subs-3", &grow, 52, 3, 4);
    deser_field("ntables-0", &grow, 56, 0, 4);
    deser_field("ntables-3", &grow, 56, 3, 4);
    deser_field("reserved2", &grow, 60, 1, 4);
    deser_field("desc0-buckets-odd", &grow, 64, get64(grow.p + 64) + 1, 8);
    deser_field("desc1-buckets", &grow, 96, get64(grow.p + 96) + 2, 8);
    deser_field("desc0-items-plus-1", &grow, 72, get64(grow.p + 72) + 1, 8);
    deser_field("desc0-items-huge", &grow, 72, UINT64_MAX, 8);
    deser_field("desc1-offset", &grow, 96 + 16, table_offset(&grow, 1) + 64, 8);
    deser_field("desc1-length", &grow, 96 + 24, table_len(&grow, 1) + 1, 8);
    deser_field("table1-byte", &grow, table_offset(&grow, 1), grow.p[table_offset(&grow, 1)] ^ 1,
                1);
    deser_field("table0-last-byte", &grow, table_offset(&grow, 0) + table_len(&grow, 0) - 1, 0xFF,
                1);
    {
        /* A fingerprint of sub-filter 1, which is wider, with its low f bits 0: a slot no
         * writer makes, that compaction would narrow to a counted empty one. In a filter
         * that grew and then lost half its keys, so that compaction has room to move it
         * into sub-filter 0. */
        shape s = {.capacity = 40, .expansion = 2, .seed = 78};
        cf_filter *f = make(&s);
        unsigned n = 0;
        for (cf_stats st = {.sub_filters = 1}; st.sub_filters < 2; cf_get_stats(f, &st))
            fill_one(f, 79, n++);
        for (unsigned i = 0; i < n / 2; i++)
            if (cf_delete_hash(f, mix64(79 * 1000003u + i)) != CF_OK)
                die("cf_delete_hash", "an added key was not found");
        blob room = serialize(f);
        blob x = low_bits_zero(&room, 1);
        deser("table1-low-bits-0", M_ALL, x.p, x.n);
        module_rdb_seed("rdb-table1-low-bits-0", &x);
        module_rdb_seed("rdb-grown-half-deleted", &room);
        free(x.p);
        free(room.p);
        cf_free(f);
    }
    {
        /* RedisBloom's layout (hash id 2), grown twice, and what it may not be. */
        shape s = {
            .capacity = 16, .f = 8, .b = 2, .kicks = 20, .expansion = 2, .flags = CF_REDISBLOOM};
        cf_filter *f = make(&s);
        fill(f, 90, 81, 0);
        blob rb = serialize(f);
        deser("redisbloom-e2", M_ALL, rb.p, rb.n);
        module_rdb_seed("rdb-redisbloom-e2", &rb);
        module_rb_seed("mbbloomcf-e2", &rb, 4, 0);
        module_rb_seed("mbbloomcf-e2-short", &rb, 4, 1);
        module_rb_chunks_seed("mbbloomcf-chunks-e2", &rb);
        deser_field("redisbloom-f-12", &rb, 40, 12, 1);
        deser_field("redisbloom-seed-1", &rb, 24, 1, 8);
        deser_field("redisbloom-expansion-3", &rb, 48, 3, 4);
        deser_field("redisbloom-hash-3", &rb, 42, 3, 1);
        deser_field("redisbloom-buckets-6", &rb, 64, 6, 8);
        free(rb.p);
        cf_free(f);
        /* Before encoding 4: sub-filters of one size, the server's bucket size (2). */
        shape e1 = {
            .capacity = 16, .f = 8, .b = 2, .kicks = 20, .expansion = 1, .flags = CF_REDISBLOOM};
        f = make(&e1);
        fill(f, 50, 82, 0);
        rb = serialize(f);
        module_rb_seed("mbbloomcf-encver3", &rb, 3, 0);
        free(rb.p);
        cf_free(f);
    }
    deser_field("padding", &grow, ml, 1, 1);
    deser_field("padding-last", &grow, grow.n - 9, 1, 1);

    size_t st0 = meta_len(&stash) - 8 - 16u * stash.p[43]; /* the first stash entry */
    deser_field("stash-bucket", &stash, st0, get64(stash.p + 64), 8);
    deser_field("stash-fp-0", &stash, st0 + 8, 0, 4);
    deser_field("stash-fp-256", &stash, st0 + 8, 256, 4);
    deser_field("stash-fp-255", &stash, st0 + 8, 255, 4);
    deser_field("stash-table-1", &stash, st0 + 12, 1, 4);
    deser_field("stash-count-2", &stash, 43, 2, 1);
    /* f = 5, b = 1: a table whose last slot does not end on a byte boundary, and one
     * with a bit set after it. */
    for (uint64_t cap = 3;; cap++) {
        shape s = {.capacity = cap, .f = 5, .b = 1, .seed = 31};
        cf_filter *f = make(&s);
        cf_stats st;
        cf_get_stats(f, &st);
        if ((st.slots * 5) % 8 == 0) {
            cf_free(f);
            continue;
        }
        fill(f, 2, 63, 0);
        blob b = serialize(f);
        deser("f5-b1-small", M_ALL, b.p, b.n);
        size_t at = table_offset(&b, 0) + table_len(&b, 0) - 1;
        deser_field("f5-b1-trailing-bits", &b, at, b.p[at] | 0x80, 1);
        free(b.p);
        cf_free(f);
        break;
    }
    free(stash.p);
    free(grow.p);
}

/* ------------------------------------------------------------------------------------ */
/* chunks seeds                                                                         */
/* ------------------------------------------------------------------------------------ */

typedef struct chunk {
    uint64_t cursor;
    blob data;
} chunk;

typedef struct dump {
    chunk c[64];
    unsigned n;
} dump;

static void dump_of(const cf_filter *f, dump *d)
{
    size_t cap = cf_dump_chunk_max(f);
    uint64_t cursor = 0;
    d->n = 0;
    for (;;) {
        uint8_t *buf = xmalloc(cap);
        size_t len;
        if (cf_dump_chunk(f, &cursor, buf, cap, &len) != CF_OK)
            die("cf_dump_chunk", "failed");
        if (len == 0) {
            free(buf);
            return;
        }
        if (d->n == sizeof d->c / sizeof d->c[0])
            die("dump_of", "too many chunks");
        d->c[d->n++] = (chunk){cursor, {buf, len}};
    }
}

static void dump_free(dump *d)
{
    for (unsigned i = 0; i < d->n; i++)
        free(d->c[i].data.p);
    d->n = 0;
}

/* The records of one seed, built up in a buffer. */
typedef struct records {
    uint8_t *p;
    size_t n, cap;
} records;

static void rec_raw(records *r, uint64_t cursor, uint32_t flags, const uint8_t *p, size_t n,
                    size_t claimed)
{
    if (r->n + 12 + n > r->cap) {
        r->cap = (r->n + 12 + n) * 2;
        r->p = realloc(r->p, r->cap);
        if (r->p == NULL)
            die("out of memory", NULL);
    }
    put(r->p + r->n, cursor, 8);
    put(r->p + r->n + 8, (uint32_t)claimed | flags, 4);
    if (n > 0)
        memcpy(r->p + r->n + 12, p, n);
    r->n += 12 + n;
}

static void rec(records *r, const chunk *c, uint32_t flags)
{
    rec_raw(r, c->cursor, flags, c->data.p, c->data.n, c->data.n);
}

/* Chunk i with byte `at` xored with x (and the cursor moved by dc). */
static void rec_changed(records *r, const chunk *c, size_t at, uint8_t x, int64_t dc,
                        uint32_t flags)
{
    uint8_t *p = xmalloc(c->data.n);
    memcpy(p, c->data.p, c->data.n);
    p[at] ^= x;
    rec_raw(r, c->cursor + (uint64_t)dc, flags, p, c->data.n, c->data.n);
    free(p);
}

/* The chunk with `bytes` bytes at `at` set to v, its checksum forged by the target. */
static void rec_field(records *r, const chunk *c, size_t at, uint64_t v, unsigned bytes)
{
    uint8_t *p = xmalloc(c->data.n);
    memcpy(p, c->data.p, c->data.n);
    if (at + bytes > c->data.n)
        die("rec_field", "field past the end of a chunk");
    put(p + at, v, bytes);
    rec_raw(r, c->cursor, R_FORGE, p, c->data.n, c->data.n);
    free(p);
}

static void rec_all(records *r, const dump *d, unsigned from)
{
    for (unsigned i = from; i < d->n; i++)
        rec(r, &d->c[i], 0);
}

static const char *chunks_dir;

static void chunks_seed(const char *name, records *r)
{
    write_seed(chunks_dir, name, NULL, 0, r->p, r->n);
    r->n = 0;
}

static void chunks_seeds(void)
{
    records r = {NULL, 0, 0};
    static const struct {
        const char *name;
        shape s;
        unsigned keys;
        uint64_t stashed;
    } shapes[] = {
        {"f4-b1", {.capacity = 60, .f = 4, .b = 1, .seed = 1}, 30, 0},
        {"f8-b2", {.capacity = 60, .f = 8, .b = 2, .seed = 2}, 40, 0},
        {"f12-b4", {.capacity = 100, .f = 12, .b = 4, .seed = 3}, 70, 0},
        {"f16-b8", {.capacity = 100, .f = 16, .b = 8, .seed = 4}, 70, 0},
        {"f32-b4", {.capacity = 60, .f = 32, .b = 4, .seed = 5}, 40, 0},
        {"f7-b3", {.capacity = 60, .f = 7, .b = 3, .seed = 6}, 40, 0},
        {"f32-b255", {.capacity = 200, .f = 32, .b = 255, .seed = 7}, 100, 0},
        {"empty", {.capacity = 1}, 0, 0},
        {"stash", {.capacity = 24, .f = 8, .b = 1, .kicks = 1, .seed = 11}, 500, 4},
        {"growing-e2", {.capacity = 16, .f = 12, .b = 4, .expansion = 2, .seed = 21}, 200, 0},
        {"semi-growing-e2",
         {.capacity = 16, .f = 13, .b = 4, .expansion = 2, .seed = 24, .flags = CF_SEMI_SORT},
         200,
         0},
        {"growing-e1-many",
         {.capacity = 2, .f = 8, .b = 2, .expansion = 1, .max_subs = 100, .seed = 23},
         80,
         0},
        {"growing-stash",
         {.capacity = 4, .f = 6, .b = 1, .kicks = 1, .expansion = 1, .max_subs = 3},
         500,
         2},
        {"redisbloom-e2",
         {.capacity = 16, .f = 8, .b = 2, .kicks = 20, .expansion = 2, .flags = CF_REDISBLOOM},
         120,
         0},
    };
    dump dumps[sizeof shapes / sizeof shapes[0]];
    for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        cf_filter *f = make(&shapes[i].s);
        fill(f, shapes[i].keys, 70 + i, shapes[i].stashed);
        dump_of(f, &dumps[i]);
        cf_free(f);
        rec_all(&r, &dumps[i], 0);
        chunks_seed(shapes[i].name, &r);
    }
    /* A windowed dump: three generations, keys in two of them; then one with a chunk of
     * its second generation swapped for its third's. */
    {
        cf_config c = {.capacity = 30,
                       .fingerprint_bits = 12,
                       .seed = 33,
                       .flags = CF_FIXED_SEED,
                       .generations = 3,
                       .window = 60000};
        cf_filter *f;
        cf_status st = cf_new(&c, &f);
        if (st != CF_OK)
            die("cf_new", cf_strerror(st));
        fill(f, 20, 90, 0);
        if ((st = cf_advance(f)) != CF_OK)
            die("cf_advance", cf_strerror(st));
        fill(f, 10, 91, 0);
        dump w;
        dump_of(f, &w);
        cf_free(f);
        rec_all(&r, &w, 0);
        chunks_seed("window", &r);
        if (w.n < 7)
            die("window", "fewer than 7 chunks");
        for (unsigned i = 0; i < 3; i++)
            rec(&r, &w.c[i], 0);
        rec(&r, &w.c[5], 0);
        rec_all(&r, &w, 3);
        chunks_seed("window-swapped", &r);
        dump_free(&w);
    }

    const dump *g = &dumps[9]; /* growing-e2: a header and 4 or more tables */
    const dump *o = &dumps[2]; /* another filter */
    if (g->n < 5)
        die("growing-e2", "fewer than 5 chunks");
    const chunk *h = &g->c[0];
    size_t hl = h->data.n;

    rec_all(&r, &dumps[0], 0);
    rec_all(&r, &dumps[8], 0);
    chunks_seed("two-dumps", &r);

    rec_all(&r, g, 0);
    rec_all(&r, g, 0);
    chunks_seed("twice", &r);

    /* Damaged, then the right chunk. */
    rec(&r, h, 0);
    rec_changed(&r, &g->c[1], 0, 1, 0, 0);
    rec_all(&r, g, 1);
    chunks_seed("damaged-data", &r);

    rec(&r, h, 0);
    rec(&r, &g->c[2], 0);
    rec(&r, &g->c[1], 0);
    rec_all(&r, g, 1);
    chunks_seed("swapped", &r);

    rec(&r, h, 0);
    rec(&r, &g->c[1], 0);
    rec(&r, &g->c[1], 0);
    rec(&r, &g->c[3], 0);
    rec(&r, h, 0);
    rec_all(&r, g, 2);
    chunks_seed("repeated-missing", &r);

    rec(&r, h, 0);
    rec(&r, &o->c[1], 0);
    rec_changed(&r, &g->c[1], 0, 0, 64, 0);
    rec_changed(&r, &g->c[1], 0, 0, -1, 0);
    rec_all(&r, g, 1);
    chunks_seed("foreign-and-bad-cursor", &r);

    /* Chunk lengths off by one. */
    rec(&r, h, 0);
    rec_raw(&r, g->c[1].cursor, 0, g->c[1].data.p, g->c[1].data.n - 1, g->c[1].data.n - 1);
    rec_all(&r, g, 1);
    rec_raw(&r, h->cursor, 0, h->data.p, hl - 1, hl - 1);
    chunks_seed("short-chunks", &r);

    /* Forged tags: the tag passes, the slot count or the file checksum does not. */
    rec(&r, h, 0);
    rec_changed(&r, &g->c[1], 0, 0x01, 0, R_FORGE);
    rec_all(&r, g, 1);
    chunks_seed("forged-data", &r);

    const dump *f8 = &dumps[1]; /* f = 8: a byte is a slot */
    size_t nz = 0;
    while (f8->c[1].data.p[nz] == 0)
        nz++;
    rec(&r, &f8->c[0], 0);
    rec_changed(&r, &f8->c[1], nz, f8->c[1].data.p[nz], 0, R_FORGE); /* a slot emptied */
    rec_changed(&r, &f8->c[1], nz == 0 ? 1 : 0, 0x01, 0, R_FORGE);   /* one filled */
    rec_all(&r, f8, 1);
    chunks_seed("forged-data-count", &r);

    rec(&r, h, 0);
    for (unsigned i = 1; i + 1 < g->n; i++)
        rec(&r, &g->c[i], 0);
    const chunk *last = &g->c[g->n - 1];
    rec_changed(&r, last, last->data.n - 9, 0x80, 0, R_FORGE);
    rec_changed(&r, last, 0, 0x00, 0, R_FORGE);
    chunks_seed("forged-last", &r);

    /* A header changed and its meta checksum forged: seed, file checksum. */
    rec_changed(&r, h, 24, 0x01, 0, R_FORGE);
    for (unsigned i = 1; i < g->n; i++)
        rec_changed(&r, &g->c[i], 0, 0, 0, R_FORGE);
    rec(&r, h, R_ABANDON);
    rec_all(&r, g, 0);
    chunks_seed("forged-header-seed", &r);

    rec_changed(&r, h, hl - 1, 0x01, 0, 0);
    rec_all(&r, g, 1);
    chunks_seed("header-file-sum", &r);

    rec_changed(&r, h, 41, 0x01, 0, R_FORGE); /* the bucket size */
    rec_changed(&r, h, 56, 0x01, 0, R_FORGE); /* the table count */
    rec_changed(&r, h, 8, 0x02, 0, R_FORGE);  /* version 3 */
    rec_changed(&r, h, 0, 0x00, -64, 0);      /* cursor */
    rec_all(&r, g, 0);
    chunks_seed("header-fields", &r);

    /* Header chunks with one field out of range each (checksum forged), then the right
     * one; the same for a stash entry. */
    {
        static const struct {
            size_t at;
            uint64_t v;
            unsigned bytes;
        } fields[] = {
            {8, 0, 2},         {10, 63, 2},     {12, 1, 4},      {16, 1, 8},     {32, 0, 8},
            {40, 3, 1},        {40, 33, 1},     {41, 0, 1},      {42, 2, 1},     {44, 0, 2},
            {46, 1, 2},        {48, 32769, 4},  {48, 0, 4},      {48, 3, 4},     {52, 0, 4},
            {52, 65537, 4},    {52, 3, 4},      {60, 1, 4},      {64, 3, 8},     {64 + 32, 2, 8},
            {64 + 8, 1000, 8}, {64 + 16, 0, 8}, {64 + 24, 1, 8}, {56, 65537, 4},
        };
        for (unsigned i = 0; i < sizeof fields / sizeof fields[0]; i++)
            rec_field(&r, h, fields[i].at, fields[i].v, fields[i].bytes);
        rec_all(&r, g, 0);
        chunks_seed("header-ranges", &r);

        const chunk *sh = &dumps[8].c[0];
        size_t e0 = sh->data.n - 16 - 16u * sh->data.p[43]; /* the first stash entry */
        rec_field(&r, sh, e0, get64(sh->data.p + 64), 8);   /* bucket = m */
        rec_field(&r, sh, e0 + 8, 0, 4);                    /* fingerprint 0 */
        rec_field(&r, sh, e0 + 8, 256, 4);                  /* fingerprint > 2^f - 1 */
        rec_field(&r, sh, e0 + 12, 1, 4);                   /* sub-filter 1 of 1 */
        rec_all(&r, &dumps[8], 0);
        chunks_seed("stash-ranges", &r);
    }

    /* Allocation failures at the header: the head, the table array, each table. */
    for (unsigned n = 1; n <= 3; n++)
        rec(&r, h, R_FAIL(n));
    rec_all(&r, g, 0);
    chunks_seed("alloc-fail", &r);

    /* A load abandoned midway, then a whole one; a truncated last record. */
    rec(&r, h, 0);
    rec(&r, &g->c[1], R_ABANDON);
    rec_all(&r, g, 0);
    rec_raw(&r, h->cursor, 0, h->data.p, 20, hl);
    chunks_seed("abandoned", &r);

    /* The data chunk of the stash filter, damaged: the header has the stash. */
    rec(&r, &dumps[8].c[0], 0);
    rec_changed(&r, &dumps[8].c[1], dumps[8].c[1].data.n - 1, 0x01, 0, 0);
    rec_all(&r, &dumps[8], 1);
    chunks_seed("stash-damaged", &r);

    for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        dump_free(&dumps[i]);
    free(r.p);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr,
                "usage: %s CORPUS_DIR   (writes CORPUS_DIR/deserialize, CORPUS_DIR/chunks and the "
                "RDB seeds of CORPUS_DIR/module)\n",
                prog);
        return 2;
    }
    char d1[4096], d2[4096], d3[4096];
    snprintf(d1, sizeof d1, "%s/deserialize", argv[1]);
    snprintf(d2, sizeof d2, "%s/chunks", argv[1]);
    snprintf(d3, sizeof d3, "%s/module", argv[1]);
    make_dir(argv[1]);
    make_dir(d1);
    make_dir(d2);
    make_dir(d3);
    remove_seeds(d1);
    remove_seeds(d2);
    remove_seeds(d3);
    deser_dir = d1;
    module_dir = d3;
    deserialize_seeds();
    lost_seeds();
    chunks_dir = d2;
    chunks_seeds();
    printf("%s: wrote %u seeds under %s (%lu bytes)\n", prog, written_files, argv[1],
           written_bytes);
    return 0;
}
