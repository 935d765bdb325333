/*
 * fuzz_chunks.c - libFuzzer target: a sequence of (cursor, chunk) records fed to
 * cf_load_chunk, starting from a NULL filter. Any broken promise of
 * include/cuckoofilter.h ("Saving and loading in chunks") or docs/FORMAT.md aborts.
 *
 * Input: records, until fewer than 12 bytes are left (at most FZ_MAX_RECORDS of them):
 *
 *   u64 LE   cursor   passed to cf_load_chunk with the chunk
 *   u32 LE   word     bits 0-27: the chunk's length (cut to what is left of the input)
 *                     bits 28-29: n != 0: the tracking allocator fails its nth call
 *                             during this record (only a header chunk allocates)
 *                     bit 30: after this record, abandon the load: cf_free the filter
 *                             and start again from NULL
 *                     bit 31: forge the chunk's checksum before feeding it: for a header
 *                             chunk (no filter yet) the meta checksum, XXH3-64 of
 *                             [0, len - 16) at len - 16; for a data chunk the tag,
 *                             XXH3_64bits_withSeed(bytes, len - 8, meta checksum XOR the
 *                             chunk's position) at len - 8
 *   bytes    the chunk
 *
 * The forgeries get random mutations past the checksums, to the checks behind them (a
 * table's slot count, the file checksum of the finished filter). Each chunk is copied
 * into a buffer of exactly its length, so that ASan catches a read past its end.
 *
 * Checks:
 * - A header chunk is accepted (CF_OK, *f set, loading, stats as its descriptors say,
 *   cursor = T_0) or refused with CF_ECORRUPT or CF_EVERSION having allocated nothing, or
 *   with CF_ENOMEM iff an allocation failed; a refused one leaves *f NULL and leaks
 *   nothing.
 * - While loading, the filter is read-only: adds and deletes give CF_EREADONLY,
 *   cf_clear does nothing, cf_serialize gives CF_EINVAL and cf_serialized_size 0, its dump
 *   is the header chunk it took, exactly, then the end (a buffer one byte short:
 *   CF_EINVAL), a NULL chunk with a length gives CF_EINVAL.
 * - A data chunk allocates at most one block, its table, when it is the table's first
 *   (and CF_ENOMEM iff that failed). A refused one (CF_ECORRUPT, CF_ENOMEM) leaves the
 *   filter loading and unchanged: the same stats, the same counts for a set of probe
 *   hashes, the same live allocations. An accepted one changes no figure but the memory
 *   held (the figures come from the header), and lookups then see more, never less.
 * - Once the filter is complete (!cf_is_loading), it takes no more chunks (CF_EINVAL), it
 *   serializes to a file that cf_validate accepts, the header chunk is that file's
 *   metadata plus its file checksum, every data chunk is the slice of the file at its
 *   position, and cf_dump_chunk gives back exactly the chunks that were accepted, bytes
 *   and cursors, then the end (and refuses a cursor that is not a chunk position, or a
 *   buffer too small for the chunk). Then every state fz_check_mutations leads it
 *   through (growth, deletes, compaction, cf_clear) saves validly and loads back byte
 *   for byte. Then it is freed and the next record starts a new load.
 * - At the end the filter is freed; every allocation was returned.
 */
#include "fuzz_common.h"
#include "fuzz_target.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define FZ_RECORD_HEADER 12u
#define FZ_MAX_RECORDS   4096u
#define FZ_LEN_MASK      0x0FFFFFFFu
#define FZ_FAIL_SHIFT    28u
#define FZ_ABANDON       0x40000000u
#define FZ_FORGE         0x80000000u
#define FZ_ALLOC_LIMIT   (UINT64_C(16) << 20) /* a bigger header chunk gets CF_ENOMEM */
#define FZ_PROBES        8u
#define FZ_PROBE_TABLES  64u /* probe only filters of at most this many tables */
#define FZ_HEADER_BYTES  64u

/* ------------------------------------------------------------------------------------ */
/* The load in progress and the chunks it accepted                                      */
/* ------------------------------------------------------------------------------------ */

typedef struct fz_chunk {
    uint64_t cursor; /* the cursor that came with it */
    uint64_t pos;    /* its position: the cursor of the chunk before it (0: header) */
    size_t off, len; /* its bytes in fz_load.bytes */
} fz_chunk;

typedef struct fz_load {
    cf_filter *f;
    fz_alloc ta;
    fz_chunk *chunks;
    size_t nchunks, chunks_cap;
    uint8_t *bytes;
    size_t nbytes, bytes_cap;
    uint64_t meta_sum; /* the accepted header's */
    bool window;       /* it is a windowed dump's (FORMAT.md, "Windowed files") */
    uint64_t pos;      /* the position of the next chunk: the last accepted cursor */
    uint64_t probes[FZ_PROBES];
} fz_load;

static void fz_keep(fz_load *L, uint64_t cursor, const uint8_t *d, size_t len)
{
    if (L->nchunks == L->chunks_cap) {
        L->chunks_cap = L->chunks_cap ? 2 * L->chunks_cap : 16;
        L->chunks = realloc(L->chunks, L->chunks_cap * sizeof *L->chunks);
        FZ_REQUIRE(L->chunks != NULL);
    }
    if (len > L->bytes_cap - L->nbytes) {
        while (len > L->bytes_cap - L->nbytes)
            L->bytes_cap = L->bytes_cap ? 2 * L->bytes_cap : 4096;
        L->bytes = realloc(L->bytes, L->bytes_cap);
        FZ_REQUIRE(L->bytes != NULL);
    }
    memcpy(L->bytes + L->nbytes, d, len);
    L->chunks[L->nchunks++] = (fz_chunk){cursor, L->pos, L->nbytes, len};
    L->nbytes += len;
    L->pos = cursor;
}

static void fz_reset(fz_load *L)
{
    cf_free(L->f);
    L->f = NULL;
    FZ_REQUIRE(L->ta.live == 0 && L->ta.live_bytes == 0);
    L->nchunks = 0;
    L->nbytes = 0;
    L->pos = 0;
    L->window = false;
}

/* ------------------------------------------------------------------------------------ */
/* Checks                                                                               */
/* ------------------------------------------------------------------------------------ */

typedef struct fz_snapshot {
    cf_stats s;
    uint64_t counts[FZ_PROBES];
} fz_snapshot;

static void fz_snap(const fz_load *L, fz_snapshot *z)
{
    cf_get_stats(L->f, &z->s);
    memset(z->counts, 0, sizeof z->counts);
    if (z->s.sub_filters <= FZ_PROBE_TABLES)
        for (unsigned i = 0; i < FZ_PROBES; i++)
            z->counts[i] = cf_count_hash(L->f, L->probes[i]);
}

static bool fz_snap_equal(const fz_snapshot *a, const fz_snapshot *b)
{
    return fz_stats_equal(&a->s, &b->s) && memcmp(a->counts, b->counts, sizeof a->counts) == 0;
}

/* What every loading filter does: it is read-only, and its dump so far is its header
 * chunk d, exactly (cursor after it), then the end. */
static void fz_check_read_only(fz_load *L, uint64_t cursor, const uint8_t *d, size_t len)
{
    cf_filter *f = L->f;
    cf_stats s, s2;
    cf_get_stats(f, &s);
    FZ_REQUIRE(cf_serialized_size(f) == 0 && cf_dump_chunk_max(f) >= len);
    uint8_t buf[64];
    size_t n = 1;
    uint64_t c = 0;
    FZ_REQUIRE(cf_serialize(f, buf, sizeof buf, &n) == CF_EINVAL);
    uint8_t *hc = malloc(len);
    FZ_REQUIRE(hc != NULL);
    FZ_REQUIRE(cf_dump_chunk(f, &c, hc, len - 1, &n) == CF_EINVAL && c == 0);
    FZ_REQUIRE(cf_dump_chunk(f, &c, hc, len, &n) == CF_OK && n == len && c == cursor &&
               memcmp(hc, d, len) == 0);
    FZ_REQUIRE(cf_dump_chunk(f, &c, hc, len, &n) == CF_OK && n == 0 && c == 0);
    free(hc);
    FZ_REQUIRE(cf_add_hash(f, L->probes[0]) == CF_EREADONLY);
    FZ_REQUIRE(cf_add(f, "k", 1) == CF_EREADONLY);
    FZ_REQUIRE(cf_add_unique(f, "k", 1) == CF_EREADONLY);
    FZ_REQUIRE(cf_delete_hash(f, L->probes[0]) == CF_EREADONLY);
    FZ_REQUIRE(cf_delete(f, "k", 1) == CF_EREADONLY);
    cf_clear(f);
    FZ_REQUIRE(cf_load_chunk(&f, cursor, NULL, 1, NULL) == CF_EINVAL && f == L->f);
    FZ_REQUIRE(cf_load_chunk(NULL, cursor, d, len, NULL) == CF_EINVAL);
    cf_get_stats(f, &s2);
    FZ_REQUIRE(fz_stats_equal(&s, &s2) && cf_is_loading(f));
}

/* A windowed dump's header chunk was accepted: a window of that many generations, none
 * arrived, whose whole memory (cf_chunk_bytes_needed) covers its images. */
static void fz_check_loading_window(fz_load *L, uint64_t cursor, const uint8_t *d, size_t len)
{
    cf_filter *f = L->f;
    FZ_REQUIRE(len >= FZ_HEADER_BYTES + 8u);
    unsigned n = fz_get32(d + 40);
    FZ_REQUIRE(n >= 2 && len == FZ_HEADER_BYTES + 16u * (size_t)n + 8u);
    FZ_REQUIRE(cursor == ((len + 63u) & ~(size_t)63u));
    uint64_t images = 0;
    for (unsigned i = 0; i < n; i++)
        images += fz_get64(d + FZ_HEADER_BYTES + 16u * (size_t)i + 8);
    size_t needed = 0;
    FZ_REQUIRE(cf_chunk_bytes_needed(d, len, &needed) == CF_OK && needed > images);
    cf_stats s;
    cf_get_stats(f, &s);
    fz_stats_sane(f, &s, true);
    FZ_REQUIRE(s.items == 0 && s.sub_filters == 0 && s.bytes == 0 && s.generations == n &&
               s.window == fz_get64(d + 24) && s.generation == fz_get64(d + 32));
    fz_check_read_only(L, cursor, d, len);
}

/* A header chunk was accepted: the filter it made is loading, read-only, and its
 * figures are those of the header. */
static void fz_check_loading(fz_load *L, uint64_t cursor, const uint8_t *d, size_t len)
{
    cf_filter *f = L->f;
    FZ_REQUIRE(f != NULL && cf_is_loading(f));
    if (L->window) {
        fz_check_loading_window(L, cursor, d, len);
        return;
    }
    FZ_REQUIRE(len >= FZ_HEADER_BYTES + 32u + 16u);
    size_t meta_len = len - 8;
    FZ_REQUIRE(cursor == ((meta_len + 63u) & ~(size_t)63u)); /* T_0 */
    unsigned ntables = fz_get32(d + 56), nstash = d[43];
    FZ_REQUIRE(meta_len == FZ_HEADER_BYTES + 32u * (size_t)ntables + 16u * nstash + 8u);
    /* Its figures are the header's, but for its memory: no table has any yet. The whole
     * filter's memory, which cf_chunk_bytes_needed gives, covers at least its tables. */
    uint64_t items = nstash, buckets = 0, tables = 0;
    for (unsigned k = 0; k < ntables; k++) {
        items += fz_get64(d + FZ_HEADER_BYTES + 32u * (size_t)k + 8);
        buckets += fz_get64(d + FZ_HEADER_BYTES + 32u * (size_t)k);
        tables += fz_get64(d + FZ_HEADER_BYTES + 32u * (size_t)k + 24) + 8u;
    }
    size_t needed = 0;
    FZ_REQUIRE(cf_chunk_bytes_needed(d, len, &needed) == CF_OK && needed > tables);
    cf_stats s;
    cf_get_stats(f, &s);
    fz_stats_sane(f, &s, true);
    FZ_REQUIRE(s.items == items && s.buckets == buckets && s.sub_filters == ntables &&
               s.bytes == 0 && s.stashed == nstash && s.fingerprint_bits == d[40] &&
               s.bucket_size == d[41] && s.capacity == fz_get64(d + 32));
    fz_check_read_only(L, cursor, d, len);
}

/* The filter is complete: its file, its chunks and a fresh dump all agree. */
static void fz_check_complete(fz_load *L)
{
    cf_filter *f = L->f;
    FZ_REQUIRE(!cf_is_loading(f));
    const fz_chunk *hdr = &L->chunks[0];
    const uint8_t *hb = L->bytes + hdr->off;
    FZ_REQUIRE(cf_load_chunk(&f, hdr->cursor, hb, hdr->len, NULL) == CF_EINVAL && f == L->f);
    FZ_REQUIRE(!cf_is_loading(f));

    size_t n = cf_serialized_size(f);
    FZ_REQUIRE(n > hdr->len);
    uint8_t *file = malloc(n);
    FZ_REQUIRE(file != NULL);
    size_t written = 0;
    FZ_REQUIRE(cf_serialize(f, file, n, &written) == CF_OK && written == n);
    const char *why = "unset";
    FZ_REQUIRE(cf_validate(file, n, &why) == CF_OK && why == NULL);

    /* The header chunk: the metadata, then the file checksum (a window's: its meta
     * section; its images' file sums come with their own header chunks). */
    FZ_REQUIRE(memcmp(file, hb, hdr->len - 8) == 0);
    FZ_REQUIRE(L->window || memcmp(file + n - 8, hb + hdr->len - 8, 8) == 0);
    /* Each data chunk: the file's bytes at its position, then its tag. */
    for (size_t i = 1; i < L->nchunks; i++) {
        const fz_chunk *c = &L->chunks[i];
        FZ_REQUIRE(c->len >= 9 && c->pos > L->chunks[i - 1].pos && c->cursor > c->pos);
        FZ_REQUIRE(c->pos + c->len - 8 <= n);
        FZ_REQUIRE(memcmp(file + c->pos, L->bytes + c->off, c->len - 8) == 0);
    }

    /* A fresh dump: exactly the accepted chunks, then the end. */
    size_t cap = cf_dump_chunk_max(f);
    FZ_REQUIRE(cap > 0);
    uint8_t *buf = malloc(cap);
    FZ_REQUIRE(buf != NULL);
    uint64_t cursor = 0;
    for (size_t i = 0; i <= L->nchunks; i++) {
        size_t len = 0;
        uint64_t asked = cursor;
        FZ_REQUIRE(cf_dump_chunk(f, &cursor, buf, cap, &len) == CF_OK);
        if (i == L->nchunks) {
            FZ_REQUIRE(len == 0 && cursor == 0);
            break;
        }
        const fz_chunk *c = &L->chunks[i];
        FZ_REQUIRE(asked == c->pos && cursor == c->cursor && len == c->len);
        FZ_REQUIRE(memcmp(buf, L->bytes + c->off, len) == 0);
        /* Not a chunk position, or a buffer one byte short: refused. */
        uint64_t bad = c->pos + 1, at = c->pos;
        FZ_REQUIRE(cf_dump_chunk(f, &bad, buf, cap, &len) == CF_EINVAL);
        FZ_REQUIRE(cf_dump_chunk(f, &at, buf, c->len - 1, &len) == CF_EINVAL);
    }
    free(buf);
    free(file);
    fz_check_mutations(f, L->meta_sum);
}

/* ------------------------------------------------------------------------------------ */
/* Feeding one record                                                                   */
/* ------------------------------------------------------------------------------------ */

static void fz_forge(const fz_load *L, uint8_t *d, size_t len)
{
    if (L->f == NULL) {
        if (len >= FZ_HEADER_BYTES + 16u)
            fz_put64(d + len - 16, XXH3_64bits(d, len - 16));
    } else if (len >= 8) {
        fz_put64(d + len - 8, XXH3_64bits_withSeed(d, len - 8, L->meta_sum ^ L->pos));
    }
}

static void fz_feed(fz_load *L, uint64_t cursor, const uint8_t *d, size_t len, unsigned fail)
{
    fz_alloc *ta = &L->ta;
    uint64_t calls = ta->calls, failures = ta->failures;
    ta->fail_at = fail ? ta->calls + fail : 0;

    if (L->f == NULL) {
        cf_filter *f = NULL;
        cf_status st = cf_load_chunk(&f, cursor, d, len, &ta->a);
        ta->fail_at = 0;
        if (st == CF_OK) {
            FZ_REQUIRE(ta->failures == failures);
            L->f = f;
            L->window = (fz_get32(d + 12) & 4u) != 0;
            L->meta_sum = fz_get64(d + len - (L->window ? 8 : 16));
            fz_check_loading(L, cursor, d, len);
            fz_keep(L, cursor, d, len);
            return;
        }
        FZ_REQUIRE(f == NULL && ta->live == 0 && ta->live_bytes == 0);
        FZ_REQUIRE((st == CF_ENOMEM) == (ta->failures > failures));
        if (st != CF_ENOMEM)
            FZ_REQUIRE((st == CF_ECORRUPT || st == CF_EVERSION) && ta->calls == calls);
        return;
    }

    fz_snapshot before, after;
    fz_snap(L, &before);
    cf_filter *f = L->f;
    uint64_t live = ta->live;
    cf_status st = cf_load_chunk(&f, cursor, d, len, &ta->a);
    ta->fail_at = 0;
    /* A data chunk allocates at most one block: its table, when it is the table's first.
     * (A window's images each begin with a header chunk, which makes a filter.) */
    FZ_REQUIRE(f == L->f && (L->window || ta->calls <= calls + 1));
    fz_snap(L, &after);
    if (st != CF_OK) {
        FZ_REQUIRE(st == CF_ECORRUPT || (st == CF_ENOMEM && ta->failures > failures) ||
                   (L->window && st == CF_EVERSION)); /* an image header of a newer writer */
        FZ_REQUIRE(cf_is_loading(f) && fz_snap_equal(&before, &after) && ta->live == live);
        return;
    }
    FZ_REQUIRE(ta->failures == failures);
    /* The figures are the header's throughout; only the memory held can grow (by the
     * table a first chunk brings). Lookups see more sub-filters, never fewer. */
    FZ_REQUIRE(L->window
                   ? after.s.items >= before.s.items && after.s.sub_filters >= before.s.sub_filters
                   : after.s.items == before.s.items &&
                         after.s.sub_filters == before.s.sub_filters &&
                         after.s.buckets == before.s.buckets);
    FZ_REQUIRE(after.s.bytes >= before.s.bytes);
    for (unsigned i = 0; i < FZ_PROBES; i++)
        FZ_REQUIRE(after.s.sub_filters > FZ_PROBE_TABLES || after.counts[i] >= before.counts[i]);
    FZ_REQUIRE(cursor > L->pos && len > 8);
    fz_keep(L, cursor, d, len);
    if (!cf_is_loading(f)) {
        fz_check_complete(L);
        fz_reset(L);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fz_load L; /* the buffers are freed at the end of each input */
    memset(&L, 0, sizeof L);
    fz_alloc_init(&L.ta, FZ_ALLOC_LIMIT);
    for (unsigned i = 0; i < FZ_PROBES; i++)
        L.probes[i] = fz_mix64(size * FZ_PROBES + i);

    for (unsigned r = 0; r < FZ_MAX_RECORDS && size >= FZ_RECORD_HEADER; r++) {
        uint64_t cursor = fz_get64(data);
        uint32_t word = fz_get32(data + 8);
        data += FZ_RECORD_HEADER;
        size -= FZ_RECORD_HEADER;
        size_t len = word & FZ_LEN_MASK;
        if (len > size)
            len = size;
        uint8_t *chunk = malloc(len > 0 ? len : 1);
        FZ_REQUIRE(chunk != NULL);
        if (len > 0)
            memcpy(chunk, data, len);
        data += len;
        size -= len;
        if (word & FZ_FORGE)
            fz_forge(&L, chunk, len);
        fz_feed(&L, cursor, chunk, len, (word >> FZ_FAIL_SHIFT) & 3u);
        free(chunk);
        if (word & FZ_ABANDON)
            fz_reset(&L);
    }
    fz_reset(&L);
    free(L.chunks);
    free(L.bytes);
    return 0;
}
