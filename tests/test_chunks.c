/*
 * test_chunks.c - saving and loading in chunks: cf_dump_chunk, cf_dump_chunk_max,
 * cf_load_chunk, cf_is_loading.
 *
 * - Dumps: the header chunk is the file's meta section plus its file sum; each data chunk
 *   is at most CF_CHUNK_DATA_MAX bytes of one table plus a tag (XXH3-64 seeded with the
 *   XXH3-64 of the 64-byte header XOR the chunk's position), at the cursors that
 *   docs/FORMAT.md gives: all checked against cf_serialize's bytes by a chunker written
 *   here. cf_dump_chunk_max is the largest chunk; the final call gives length 0 and cursor
 *   0, and so does any cursor past the end; cursors before the end that are no chunk's,
 *   and buffers too small: CF_EINVAL.
 * - Round trips (small, growing, empty, stash entries, odd shapes, a table of three
 *   chunks), from unaligned buffers: the loaded filter serializes to the same bytes,
 *   answers alike, dumps the same chunks and behaves alike afterwards.
 * - Refusals at every step of a load: a missing, repeated, reordered, damaged, truncated,
 *   lengthened or foreign chunk, a wrong cursor; for the header chunk also every flipped
 *   bit of its meta section, a wrong length or cursor, a data chunk in its place. Each
 *   leaves the loader as it was: the correct chunk is accepted right after. A chunk after
 *   the last: CF_EINVAL.
 * - Damage that the tags cannot see (a recomputed tag, the header chunk's file sum), a
 *   forged dump (checksums right, item counts or unused bits wrong) and a filter changed
 *   during its dump: refused when the table is complete or by the last chunk.
 * - A chunk of another filter with the same 64-byte header (same settings, seed 0, as
 *   many keys), in a table of two chunks: cuckoofilter.h promises CF_ECORRUPT at once.
 * - While loading: read-only (cf_compact too), not serializable, not saved; lookups see
 *   the empty tables until their chunks come. Its dump is the header chunk and the data
 *   chunks it has taken, exactly (bytes and cursors), ending where it expects the next
 *   one; cf_dump_chunk_max is the original's.
 * - Dumps of a loading filter, after each k chunks (k = 1 .. all; shapes of one and of
 *   several sub-filters, and a sub-filter of two chunks): a cursor past the chunk it
 *   expects ends its dump as that chunk's own cursor does, one inside a chunk is CF_EINVAL;
 *   its dump loads into a filter in the same state (loading or not, stats, dump), which
 *   takes the rest of the original dump and ends identical to the original, bit for bit;
 *   so does the filter that was dumped.
 * - Allocation failures of the header chunk, and of the data chunk that allocates its
 *   table (the first of each table): CF_ENOMEM changes nothing, and the same chunk goes in
 *   once memory is back.
 */
#define _POSIX_C_SOURCE 200809L
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "format_util.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

/* The seed of a data chunk's tag, less its position: XXH3-64 of the file's header. */
static uint64_t tag_key(const uint8_t *file)
{
    return XXH3_64bits(file, HDR);
}

/* ------------------------------------------------------------------------------------ */
/* A whole dump                                                                         */
/* ------------------------------------------------------------------------------------ */

typedef struct chunk {
    uint64_t pos;    /* the cursor it was asked for */
    uint64_t cursor; /* the cursor that goes with it */
    buf b;
} chunk;

typedef struct dump {
    chunk *c;
    size_t n;
} dump;

static void dump_free(dump *d)
{
    for (size_t i = 0; i < d->n; i++)
        buf_free(&d->c[i].b);
    free(d->c);
    d->c = NULL;
    d->n = 0;
}

/* Every chunk of f, checked against the file format (f's own cf_serialize bytes). */
static dump dump_all(const cf_filter *f)
{
    dump d = {NULL, 0};
    size_t cap = cf_dump_chunk_max(f);
    if (!CHECK(cap > 0))
        return d;
    buf file = ser(f);
    if (!file.p)
        return d;
    uint8_t *tmp = xmalloc(cap);
    size_t cap_chunks = 8, largest = 0;
    d.c = xmalloc(cap_chunks * sizeof *d.c);
    uint64_t cursor = 0;
    uint64_t meta = meta_len_of(file.p);
    uint64_t key = tag_key(file.p);
    unsigned nt = (unsigned)rd(file.p + H_NT, 4);
    /* The positions FORMAT.md gives: header at 0, then T_k + j * 16 MiB, then E. */
    uint64_t want[4096];
    size_t nwant = 0;
    want[nwant++] = 0;
    for (unsigned k = 0; k < nt; k++) {
        uint64_t off = rd(file.p + HDR + DESC * k + 16, 8),
                 len = rd(file.p + HDR + DESC * k + 24, 8);
        for (uint64_t j = 0; j < len && nwant < 4095; j += CF_CHUNK_DATA_MAX)
            want[nwant++] = off + j;
    }
    uint64_t end = file.n - SUM;
    for (;;) {
        size_t len = 0;
        uint64_t pos = cursor;
        memset(tmp, 0xCC, cap);
        if (!CHECK_ST(cf_dump_chunk(f, &cursor, tmp, cap, &len), CF_OK))
            break;
        if (len == 0) {
            CHECK_EQ_U(cursor, 0);
            CHECK_EQ_U(pos, end);
            break;
        }
        if (!CHECK(d.n < nwant))
            break;
        CHECK_EQ_U(pos, want[d.n]);
        CHECK_EQ_U(cursor, d.n + 1 < nwant ? want[d.n + 1] : end);
        largest = len > largest ? len : largest;
        if (pos == 0) {
            CHECK_EQ_U(len, meta + SUM);
            CHECK(memcmp(tmp, file.p, (size_t)meta) == 0);
            CHECK(memcmp(tmp + meta, file.p + file.n - SUM, SUM) == 0);
        } else if (CHECK(len > SUM && pos + len - SUM <= end)) {
            CHECK(len - SUM <= CF_CHUNK_DATA_MAX);
            CHECK(len <= CF_CHUNK_MAX);
            CHECK(memcmp(tmp, file.p + pos, len - SUM) == 0);
            uint64_t tag = XXH3_64bits_withSeed(tmp, len - SUM, key ^ pos);
            CHECK_EQ_U(rd(tmp + len - SUM, 8), tag);
        }
        if (d.n == cap_chunks) {
            cap_chunks *= 2;
            d.c = realloc(d.c, cap_chunks * sizeof *d.c);
        }
        d.c[d.n].pos = pos;
        d.c[d.n].cursor = cursor;
        d.c[d.n].b = buf_copy(tmp, len);
        d.n++;
    }
    CHECK_EQ_U(d.n, nwant);
    CHECK_EQ_U(largest, cap); /* cf_dump_chunk_max is the largest chunk */
    free(tmp);
    buf_free(&file);
    return d;
}

static cf_status load_one(cf_filter **g, const chunk *c, const cf_allocator *a)
{
    return cf_load_chunk(g, c->cursor, c->b.p, c->b.n, a);
}

/* The chunks cf_dump_chunk gives for f from cursor 0 until it says the dump is over (len
 * 0, cursor 0), at most `limit` of them; f may be loading, so nothing is checked against
 * a file. *end: the cursor that ended the dump. */
static dump dump_raw(const cf_filter *f, size_t limit, uint64_t *end)
{
    dump d = {xmalloc((limit + 1) * sizeof(chunk)), 0};
    size_t cap = cf_dump_chunk_max(f);
    uint8_t *tmp = xmalloc(cap);
    uint64_t cursor = 0;
    *end = UINT64_MAX;
    for (;;) {
        size_t len = 999;
        uint64_t pos = cursor;
        if (!CHECK_ST(cf_dump_chunk(f, &cursor, tmp, cap, &len), CF_OK))
            break;
        if (len == 0) {
            CHECK_EQ_U(cursor, 0);
            *end = pos;
            break;
        }
        if (!CHECK_MSG(d.n < limit, "more than %zu chunks", limit))
            break;
        d.c[d.n].pos = pos;
        d.c[d.n].cursor = cursor;
        d.c[d.n].b = buf_copy(tmp, len);
        d.n++;
    }
    free(tmp);
    return d;
}

/* p is exactly the first k chunks of d: positions, cursors and bytes. */
static bool dump_is_prefix(const dump *p, const dump *d, size_t k)
{
    bool same = p->n == k && k <= d->n;
    for (size_t i = 0; same && i < k; i++)
        same = p->c[i].pos == d->c[i].pos && p->c[i].cursor == d->c[i].cursor &&
               buf_eq(p->c[i].b, d->c[i].b);
    return same;
}

/* The largest chunk of a dump. */
static size_t dump_largest(const dump *d)
{
    size_t most = 0;
    for (size_t i = 0; i < d->n; i++)
        most = d->c[i].b.n > most ? d->c[i].b.n : most;
    return most;
}

/* A loading filter that has taken the first `taken` chunks of d dumps exactly those (the
 * header chunk and the data chunks so far), then ends where it expects the next one. */
static void check_loading_dump(const cf_filter *g, const dump *d, size_t taken, const char *what)
{
    CHECK_EQ_U(cf_dump_chunk_max(g), dump_largest(d));
    uint64_t end;
    dump p = dump_raw(g, d->n + 1, &end);
    CHECK_MSG(dump_is_prefix(&p, d, taken),
              "%s: a filter loaded from %zu of %zu chunks dumps %zu chunks, not those", what, taken,
              d->n, p.n);
    uint64_t want_end = taken < d->n ? d->c[taken].pos : d->c[d->n - 1].cursor;
    CHECK_MSG(end == want_end, "%s: the dump ended at %llu, want %llu", what,
              (unsigned long long)end, (unsigned long long)want_end);
    dump_free(&p);
}

/* Table k's descriptor in the header chunk of d. */
static const uint8_t *desc_of(const dump *d, unsigned k)
{
    return d->c[0].b.p + HDR + (size_t)DESC * k;
}

/* The figures of a filter that has taken the first `taken` chunks of d, the dump of a
 * filter whose figures are `all`: the same, but for the memory, which only the tables
 * whose first chunk is in hold (each with its 8 bytes of padding). */
static cf_stats loading_stats(const dump *d, size_t taken, const cf_stats *all)
{
    cf_stats s = *all;
    unsigned n = (unsigned)rd(d->c[0].b.p + H_NT, 4);
    uint64_t next = taken < d->n ? d->c[taken].pos : UINT64_MAX;
    s.bytes = 0;
    for (unsigned k = 0; k < n && rd(desc_of(d, k) + 16, 8) < next; k++)
        s.bytes += rd(desc_of(d, k) + 24, 8) + 8;
    return s;
}

/* ------------------------------------------------------------------------------------ */
/* Filters                                                                              */
/* ------------------------------------------------------------------------------------ */

/* A filter and which of the keys 0..n-1 of its stream went in. */
typedef struct made {
    cf_filter *f;
    uint64_t stream, n;
    bool *in;
} made;

static void made_free(made *m)
{
    cf_free(m->f);
    free(m->in);
    m->f = NULL;
    m->in = NULL;
}

/* Add keys until n are tried, the filter has want_subs sub-filters, or CF_FULL with a
 * full stash (a growing filter also says CF_FULL for a key whose fingerprint fills both
 * its buckets; such keys are skipped). */
static made make(cf_config c, uint64_t stream, uint64_t n, unsigned want_subs)
{
    made m = {NULL, stream, 0, xmalloc(n * sizeof(bool))};
    if (!CHECK_ST(cf_new(&c, &m.f), CF_OK))
        return m;
    uint8_t k[CFT_KEY_MAX];
    for (m.n = 0; m.n < n; m.n++) {
        if (want_subs && cft_stats(m.f).sub_filters >= want_subs)
            break;
        cf_status st = cf_add(m.f, k, cft_key_var(k, stream, m.n));
        m.in[m.n] = st == CF_OK;
        if (st == CF_FULL && cft_stats(m.f).stashed == 8)
            break;
    }
    return m;
}

/* The answers of a and b agree, for the keys of m and for as many others; both find
 * every key that went into m. */
static void compare(const cf_filter *a, const cf_filter *b, const made *m)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t fn = 0, diff = 0, n = m->n;
    for (uint64_t i = 0; i < 2 * n + 100; i++) {
        size_t len = cft_key_var(k, i < n ? m->stream : m->stream + 999, i);
        bool ca = cf_contains(a, k, len);
        fn += i < n && m->in[i] && (!ca || !cf_contains(b, k, len));
        diff += ca != cf_contains(b, k, len) || cf_count(a, k, len) != cf_count(b, k, len);
    }
    CHECK_EQ_U(fn, 0);
    CHECK_EQ_U(diff, 0);
    cf_stats sa = cft_stats(a), sb = cft_stats(b);
    CHECK_STATS_EQ(sa, sb);
}

/* ------------------------------------------------------------------------------------ */
/* Round trips                                                                          */
/* ------------------------------------------------------------------------------------ */

static void roundtrip(const made *m, const char *what)
{
    cft_context("round trip: %s", what);
    cf_filter *f = m->f;
    uint64_t stream = m->stream;
    dump d = dump_all(f);
    if (d.n == 0)
        return;
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_filter *g = NULL;
    bool ok = true;
    cf_stats fs = cft_stats(f);
    for (size_t i = 0; i < d.n && ok; i++) {
        uint64_t calls = ta.calls, frees = ta.frees;
        /* From an odd address: nothing may assume alignment. */
        uint8_t *odd = xmalloc(d.c[i].b.n + 1);
        memcpy(odd + 1, d.c[i].b.p, d.c[i].b.n);
        ok = CHECK_ST(cf_load_chunk(&g, d.c[i].cursor, odd + 1, d.c[i].b.n, &ta.a), CF_OK);
        free(odd);
        if (ok && i == 0 && cft_stats(f).stashed == 0) {
            /* Only the header: the tables are empty (not the allocator's garbage). */
            uint8_t k[CFT_KEY_MAX];
            uint64_t found = 0;
            for (uint64_t j = 0; j < m->n; j++)
                found += cf_count(g, k, cft_key_var(k, stream, j));
            CHECK_EQ_U(found, 0);
        }
        /* A data chunk allocates its table if it is the table's first, nothing else; the
         * last frees the running checksum, and the block that held it unless that also
         * holds the sub-filter array or the stash. */
        if (i > 0) {
            bool opens = false;
            for (unsigned k = 0; k < (unsigned)rd(d.c[0].b.p + H_NT, 4); k++)
                opens |= rd(desc_of(&d, k) + 16, 8) == d.c[i].pos;
            CHECK_EQ_U(ta.calls, calls + opens);
            bool holds = rd(d.c[0].b.p + H_NT, 4) > 1 || fs.stashed > 0;
            CHECK_EQ_U(ta.frees, frees + (i + 1 == d.n) * (holds ? 1u : 2u));
        }
        CHECK(cf_is_loading(g) == (i + 1 < d.n));
        cf_stats want = loading_stats(&d, i + 1, &fs);
        cf_stats got = cft_stats(g);
        CHECK_STATS_EQ(got, want);
    }
    if (ok && g) {
        buf a = ser(f), b = ser(g);
        CHECK_MSG(buf_eq(a, b), "%s: the loaded filter serializes differently", what);
        buf_free(&b);
        compare(f, g, m);
        cf_config c1, c2;
        cf_get_config(f, &c1);
        cf_get_config(g, &c2);
        CHECK(memcmp(&c1, &c2, sizeof c1) == 0);
        /* Its own dump is the same chunks. */
        dump d2 = dump_all(g);
        bool same = d2.n == d.n;
        for (size_t i = 0; same && i < d.n; i++)
            same = d2.c[i].cursor == d.c[i].cursor && buf_eq(d2.c[i].b, d.c[i].b);
        CHECK_MSG(same, "%s: the loaded filter dumps differently", what);
        dump_free(&d2);
        /* It behaves as the original: the same operations give the same bytes. */
        uint8_t k[CFT_KEY_MAX];
        uint64_t diff = 0;
        for (uint64_t i = 0; i < 300; i++) {
            size_t len = cft_key_var(k, stream + 7, i);
            diff += cf_add(f, k, len) != cf_add(g, k, len);
            if (i % 3 == 0) {
                len = cft_key_var(k, stream + 7, i / 2);
                diff += cf_delete(f, k, len) != cf_delete(g, k, len);
            }
        }
        CHECK_EQ_U(diff, 0);
        buf a2 = ser(f), b2 = ser(g);
        CHECK_MSG(buf_eq(a2, b2), "%s: differs from the original after the same operations", what);
        buf_free(&a);
        buf_free(&a2);
        buf_free(&b2);
    }
    cf_free(g);
    CHECK_ALLOC_CLEAN(&ta);
    printf("  %-40s %zu chunks (largest %zu bytes)\n", what, d.n, cf_dump_chunk_max(f));
    dump_free(&d);
}

/* ------------------------------------------------------------------------------------ */
/* While loading                                                                        */
/* ------------------------------------------------------------------------------------ */

static void check_loading_state(cf_filter *g, const cf_stats *all, const dump *d, size_t taken,
                                const char *dir)
{
    cf_stats want = loading_stats(d, taken, all);
    if (!CHECK(g != NULL) || !CHECK(cf_is_loading(g)))
        return;
    uint8_t k[CFT_KEY_MAX];
    size_t len = cft_key(k, 1, 1);
    uint64_t h = cf_hash(g, k, len);
    CHECK_ST(cf_add(g, k, len), CF_EREADONLY);
    CHECK_ST(cf_add_unique(g, k, len), CF_EREADONLY);
    CHECK_ST(cf_delete(g, k, len), CF_EREADONLY);
    CHECK_ST(cf_add_hash(g, h), CF_EREADONLY);
    CHECK_ST(cf_delete_hash(g, h), CF_EREADONLY);
    CHECK_ST(cf_compact(g), CF_EREADONLY);
    cf_clear(g);
    cf_stats s = cft_stats(g);
    CHECK_STATS_EQ(s, want);
    CHECK_EQ_U(s.capacity, want.capacity);
    CHECK_EQ_U(cf_serialized_size(g), 0);
    uint8_t out[4096];
    size_t w = 77;
    CHECK_ST(cf_serialize(g, out, sizeof out, &w), CF_EINVAL);
    CHECK_EQ_U(w, 77);
    check_loading_dump(g, d, taken, "while loading");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/loading.cf", dir);
    CHECK_ST(cf_save(g, path), CF_EINVAL);
    CHECK(access(path, F_OK) != 0);
    bool many[4];
    uint64_t hs[4] = {h, 1, 2, 3};
    /* Lookups are allowed, and see what is loaded so far: every form of them the same. */
    cf_contains_many(g, hs, 4, many);
    for (size_t i = 0; i < 4; i++)
        CHECK_EQ_U(many[i], cf_contains_hash(g, hs[i]));
    CHECK_EQ_U(cf_contains(g, k, len), cf_contains_hash(g, h));
    CHECK_EQ_U(cf_count(g, k, len) > 0, cf_contains_hash(g, h));
}

/* ------------------------------------------------------------------------------------ */
/* Dumps of a loading filter                                                            */
/* ------------------------------------------------------------------------------------ */

static uint64_t g_partial_loads; /* loads resumed from the dump of a loading filter */

/* For k = 1 .. all chunks of f's dump: a filter that has taken the first k dumps exactly
 * those k chunks (bytes and cursors), refuses a cursor at or past the chunk it expects
 * (other than that chunk's own position, where its dump ends), reports the same
 * cf_dump_chunk_max as f; a fresh load of its dump is in the same state (loading or not,
 * same stats, same dump), takes the rest of f's dump and ends identical to f, and so does
 * the filter itself. */
static void test_loading_dumps(const cf_filter *f, const char *label)
{
    cft_context("dumps of a loading filter: %s", label);
    dump d = dump_all(f);
    if (d.n == 0)
        return;
    buf file = ser(f);
    size_t cap = cf_dump_chunk_max(f);
    uint8_t *tmp = xmalloc(cap);
    for (size_t k = 1; k <= d.n; k++) {
        cf_filter *g = NULL;
        bool ok = true;
        for (size_t i = 0; i < k && ok; i++)
            ok = CHECK_ST(load_one(&g, &d.c[i], NULL), CF_OK);
        if (!ok) {
            cf_free(g);
            break;
        }
        CHECK(cf_is_loading(g) == (k < d.n));
        cf_stats sg = cft_stats(g);
        check_loading_dump(g, &d, k, label);
        /* Past the end of what it has: chunk positions of f after the expected one, and
         * f's end, end its dump. */
        for (size_t j = k + 1; k < d.n && j <= d.n; j++) {
            uint64_t at = j < d.n ? d.c[j].pos : d.c[d.n - 1].cursor;
            uint64_t cursor = at;
            size_t len = 999;
            CHECK_MSG(cf_dump_chunk(g, &cursor, tmp, cap, &len) == CF_OK && len == 0,
                      "%zu of %zu chunks in: cursor %llu (chunk %zu) gave a chunk", k, d.n,
                      (unsigned long long)at, j);
            CHECK_EQ_U(cursor, 0);
        }
        /* Positions inside chunks it has: no chunk starts there. */
        for (size_t j = 1; j < k; j++) {
            uint64_t cursor = d.c[j].pos + 1;
            size_t len = 999;
            CHECK_ST(cf_dump_chunk(g, &cursor, tmp, cap, &len), CF_EINVAL);
            CHECK_EQ_U(cursor, d.c[j].pos + 1);
        }
        /* Its dump, loaded afresh: the same state, and the same dump again. */
        uint64_t end;
        dump p = dump_raw(g, d.n + 1, &end);
        cf_filter *h = NULL;
        ok = p.n == k;
        for (size_t i = 0; i < p.n && ok; i++)
            ok = CHECK_ST(load_one(&h, &p.c[i], NULL), CF_OK);
        if (ok && CHECK(h != NULL)) {
            CHECK(cf_is_loading(h) == cf_is_loading(g));
            cf_stats sh = cft_stats(h);
            CHECK_STATS_EQ(sh, sg);
            CHECK_EQ_U(cf_dump_chunk_max(h), cf_dump_chunk_max(f));
            check_loading_dump(h, &d, k, label);
            /* The rest of f's dump: both end as f. */
            for (size_t i = k; i < d.n && ok; i++)
                ok = CHECK_MSG(load_one(&h, &d.c[i], NULL) == CF_OK,
                               "resumed after %zu chunks: chunk %zu refused", k, i) &&
                     CHECK_ST(load_one(&g, &d.c[i], NULL), CF_OK);
            if (ok) {
                CHECK(!cf_is_loading(h) && !cf_is_loading(g));
                buf bh = ser(h), bg = ser(g);
                CHECK_MSG(buf_eq(file, bh), "resumed after %zu of %zu chunks: differs", k, d.n);
                CHECK_MSG(buf_eq(file, bg), "dumped after %zu of %zu chunks: differs", k, d.n);
                buf_free(&bh);
                buf_free(&bg);
                g_partial_loads++;
            }
        }
        cf_free(h);
        dump_free(&p);
        cf_free(g);
    }
    free(tmp);
    buf_free(&file);
    dump_free(&d);
}

/* ------------------------------------------------------------------------------------ */
/* Refusals                                                                             */
/* ------------------------------------------------------------------------------------ */

static uint64_t g_refused; /* refusals checked */

static void refuse(cf_filter **g, uint64_t cursor, const uint8_t *p, size_t n, cf_status want,
                   const char *what, size_t step)
{
    cf_filter *before = *g;
    buf b = buf_copy(p, n); /* exact size, for ASan */
    cf_status st = cf_load_chunk(g, cursor, p ? b.p : NULL, n, NULL);
    CHECK_MSG(st == want, "step %zu, %s: %s, want %s", step, what, cft_status_name(st),
              cft_status_name(want));
    CHECK_MSG(*g == before, "step %zu, %s: the filter pointer changed", step, what);
    if (st == CF_OK && *g != before) {
        cf_free(*g);
        *g = before;
    }
    buf_free(&b);
    g_refused++;
}

/* A chunk with one byte changed. */
static void refuse_flipped(cf_filter **g, const chunk *c, size_t at, uint8_t mask, cf_status want,
                           const char *what, size_t step)
{
    buf x = buf_copy(c->b.p, c->b.n);
    x.p[at] ^= mask;
    refuse(g, c->cursor, x.p, x.n, want, what, step);
    buf_free(&x);
}

/* Load the dump of f chunk by chunk; before each correct chunk, offer every kind of wrong
 * one. foreign: a dump of another filter of the same layout (or an empty dump). */
static void refusal_suite(const cf_filter *f, const dump *foreign, const char *dir,
                          const char *label)
{
    cft_context("refusals: %s", label);
    dump d = dump_all(f);
    if (d.n < 2)
        return;
    cf_stats want = cft_stats(f);
    cf_filter *g = NULL;
    const chunk *hc = &d.c[0];
    uint64_t meta = hc->b.n - SUM;

    /* The header chunk. */
    refuse(&g, d.c[1].cursor, d.c[1].b.p, d.c[1].b.n, CF_ECORRUPT, "data chunk first", 0);
    refuse(&g, hc->cursor, NULL, 0, CF_ECORRUPT, "nothing", 0);
    refuse(&g, hc->cursor, hc->b.p, hc->b.n - 1, CF_ECORRUPT, "header 1 byte short", 0);
    refuse(&g, hc->cursor, hc->b.p, hc->b.n - SUM, CF_ECORRUPT, "header without file sum", 0);
    refuse(&g, hc->cursor, hc->b.p, 63, CF_ECORRUPT, "63 bytes of header", 0);
    {
        buf x = {xmalloc(hc->b.n + 1), hc->b.n + 1};
        memcpy(x.p, hc->b.p, hc->b.n);
        x.p[hc->b.n] = 0;
        refuse(&g, hc->cursor, x.p, x.n, CF_ECORRUPT, "header 1 byte long", 0);
        buf_free(&x);
    }
    static const int64_t dc[] = {-64, -1, 1, 64};
    for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++)
        refuse(&g, hc->cursor + (uint64_t)dc[i], hc->b.p, hc->b.n, CF_ECORRUPT,
               "header, wrong cursor", 0);
    refuse(&g, 0, hc->b.p, hc->b.n, CF_ECORRUPT, "header, cursor 0", 0);
    refuse(&g, UINT64_MAX, hc->b.p, hc->b.n, CF_ECORRUPT, "header, cursor 2^64-1", 0);
    /* Every bit of the meta section. */
    for (size_t at = 0; at < meta; at++)
        for (unsigned bit = 0; bit < 8; bit++) {
            /* A version this library does not read (1 or above 3) is a version error; 0,
             * 2 and 3 are read on, and then the meta sum fails. */
            unsigned v = (unsigned)rd(hc->b.p + H_VERSION, 2);
            if (at == H_VERSION || at == H_VERSION + 1)
                v ^= 1u << (bit + 8 * (unsigned)(at - H_VERSION));
            bool version = v == 1 || v > 3;
            refuse_flipped(&g, hc, at, (uint8_t)(1u << bit), version ? CF_EVERSION : CF_ECORRUPT,
                           "header, flipped bit", 0);
        }
    cf_allocator half = {NULL, NULL, NULL};
    CHECK_ST(cf_load_chunk(&g, hc->cursor, hc->b.p, hc->b.n, &half), CF_EINVAL);
    CHECK(g == NULL);
    if (!CHECK_ST(load_one(&g, hc, NULL), CF_OK)) {
        dump_free(&d);
        return;
    }
    check_loading_state(g, &want, &d, 1, dir);
    /* The filter is loading: another header is not the next chunk. */
    refuse(&g, hc->cursor, hc->b.p, hc->b.n, CF_ECORRUPT, "the header again", 0);
    bool any_foreign = false;

    for (size_t i = 1; i < d.n; i++) {
        const chunk *c = &d.c[i];
        size_t n = c->b.n;
        if (i + 1 < d.n)
            refuse(&g, d.c[i + 1].cursor, d.c[i + 1].b.p, d.c[i + 1].b.n, CF_ECORRUPT,
                   "the next chunk (one missing)", i);
        if (i + 2 < d.n)
            refuse(&g, d.c[i + 2].cursor, d.c[i + 2].b.p, d.c[i + 2].b.n, CF_ECORRUPT,
                   "two chunks ahead", i);
        if (i + 1 < d.n)
            refuse(&g, d.c[d.n - 1].cursor, d.c[d.n - 1].b.p, d.c[d.n - 1].b.n, CF_ECORRUPT,
                   "the last chunk", i);
        if (i > 1)
            refuse(&g, d.c[i - 1].cursor, d.c[i - 1].b.p, d.c[i - 1].b.n, CF_ECORRUPT,
                   "the previous chunk again", i);
        /* The right bytes with a wrong cursor. */
        refuse(&g, c->cursor + 1, c->b.p, n, CF_ECORRUPT, "cursor + 1", i);
        refuse(&g, c->cursor - 1, c->b.p, n, CF_ECORRUPT, "cursor - 1", i);
        refuse(&g, c->pos, c->b.p, n, CF_ECORRUPT, "the chunk's own position as cursor", i);
        refuse(&g, 0, c->b.p, n, CF_ECORRUPT, "cursor 0", i);
        refuse(&g, UINT64_MAX, c->b.p, n, CF_ECORRUPT, "cursor 2^64-1", i);
        if (i + 1 < d.n)
            refuse(&g, d.c[i + 1].cursor, c->b.p, n, CF_ECORRUPT, "the next chunk's cursor", i);
        /* Wrong lengths. */
        refuse(&g, c->cursor, c->b.p, n - 1, CF_ECORRUPT, "1 byte short", i);
        refuse(&g, c->cursor, c->b.p, n - SUM, CF_ECORRUPT, "without its tag", i);
        refuse(&g, c->cursor, c->b.p, n - SUM - 1, CF_ECORRUPT, "short, without its tag", i);
        refuse(&g, c->cursor, c->b.p, 1, CF_ECORRUPT, "1 byte", i);
        refuse(&g, c->cursor, c->b.p, 0, CF_ECORRUPT, "0 bytes", i);
        refuse(&g, c->cursor, NULL, 0, CF_ECORRUPT, "NULL, 0 bytes", i);
        CHECK_ST(cf_load_chunk(&g, c->cursor, NULL, n, NULL), CF_EINVAL);
        {
            buf x = {xmalloc(n + 1), n + 1};
            memcpy(x.p, c->b.p, n);
            x.p[n] = 0;
            refuse(&g, c->cursor, x.p, x.n, CF_ECORRUPT, "1 byte long", i);
            buf_free(&x);
        }
        /* Damage: data bytes (first, middle, last) and every byte of the tag. */
        size_t data = n - SUM;
        size_t spots[3] = {0, data / 2, data - 1};
        for (size_t s = 0; s < 3; s++)
            for (unsigned bit = 0; bit < 8; bit += 7)
                refuse_flipped(&g, c, spots[s], (uint8_t)(1u << bit), CF_ECORRUPT, "damaged data",
                               i);
        for (size_t t = 0; t < SUM; t++)
            refuse_flipped(&g, c, data + t, 0x10, CF_ECORRUPT, "damaged tag", i);
        /* The same position of another filter. */
        if (foreign && i < foreign->n && foreign->c[i].cursor == c->cursor &&
            foreign->c[i].b.n == n) {
            any_foreign = true;
            refuse(&g, c->cursor, foreign->c[i].b.p, n, CF_ECORRUPT, "foreign chunk", i);
        }
        check_loading_state(g, &want, &d, i, dir);
        /* And now the right one. */
        if (!CHECK_MSG(load_one(&g, c, NULL) == CF_OK, "step %zu: the right chunk refused", i))
            break;
    }
    if (foreign && foreign->n > 1)
        CHECK(any_foreign);
    CHECK(!cf_is_loading(g));
    /* Complete: nothing more is taken. */
    CHECK_ST(load_one(&g, &d.c[d.n - 1], NULL), CF_EINVAL);
    CHECK_ST(load_one(&g, &d.c[0], NULL), CF_EINVAL);
    CHECK_ST(load_one(&g, &d.c[1], NULL), CF_EINVAL);
    buf a = ser(f), b = ser(g);
    CHECK_MSG(buf_eq(a, b), "%s: loaded after the refusals, the filter differs", label);
    buf_free(&a);
    buf_free(&b);
    cf_free(g);
    dump_free(&d);
}

/* Load d with chunk `at` replaced by x (NULL: unchanged); every chunk must be accepted up
 * to some point, then one refused, and never the whole load. Returns the index of the
 * refused chunk (d->n if none was). */
static size_t load_until_refused(const dump *d, size_t at, const buf *x)
{
    cf_filter *g = NULL;
    size_t i;
    for (i = 0; i < d->n; i++) {
        const chunk *c = &d->c[i];
        const buf *b = i == at && x ? x : &c->b;
        cf_status st = cf_load_chunk(&g, c->cursor, b->p, b->n, NULL);
        if (st != CF_OK) {
            CHECK_ST(st, CF_ECORRUPT);
            break;
        }
    }
    if (i < d->n && g) {
        /* Refused and stuck: the loader still waits, and is still safe to query. Its dump
         * is the chunks it took (the replaced one as it came). */
        CHECK(cf_is_loading(g));
        uint8_t k[CFT_KEY_MAX];
        for (uint64_t j = 0; j < 100; j++) { /* every form of lookup gives one answer */
            size_t n = cft_key(k, 3, j);
            bool found = cf_contains(g, k, n);
            CHECK_EQ_U(found, cf_contains_hash(g, cf_hash(g, k, n)));
            CHECK_EQ_U(found, cf_count(g, k, n) > 0);
        }
        uint64_t end;
        dump p = dump_raw(g, d->n + 1, &end);
        bool same = p.n == i && end == d->c[i].pos;
        for (size_t j = 0; same && j < i; j++)
            same = p.c[j].pos == d->c[j].pos && p.c[j].cursor == d->c[j].cursor &&
                   buf_eq(p.c[j].b, j == at && x ? *x : d->c[j].b);
        CHECK_MSG(same, "stuck at chunk %zu: it dumps %zu other chunks", i, p.n);
        dump_free(&p);
    }
    cf_free(g);
    return i;
}

/* Damage that the tags cannot see. */
static void test_hidden_damage(const cf_filter *f, const char *label)
{
    cft_context("hidden damage: %s", label);
    dump d = dump_all(f);
    if (d.n < 2)
        return;
    const chunk *hc = &d.c[0];
    uint64_t meta = hc->b.n - SUM;
    uint64_t key = tag_key(hc->b.p);
    /* The file sum carried by the header chunk: the header itself is accepted (its own
     * checksum does not cover it), the last chunk is not. */
    for (size_t t = 0; t < SUM; t += 3) {
        buf x = buf_copy(hc->b.p, hc->b.n);
        x.p[meta + t] ^= 0x01;
        size_t refused = load_until_refused(&d, 0, &x);
        CHECK_MSG(refused < d.n, "a damaged file sum in the header chunk got through");
        CHECK_MSG(refused == d.n - 1, "refused at chunk %zu of %zu", refused, d.n);
        buf_free(&x);
    }
    /* A damaged data byte under a recomputed tag: refused when its table is complete (the
     * count of fingerprints) or at the last chunk (the file sum). */
    for (size_t i = 1; i < d.n; i++) {
        const chunk *c = &d.c[i];
        size_t data = c->b.n - SUM;
        for (unsigned kind = 0; kind < 2; kind++) {
            buf x = buf_copy(c->b.p, c->b.n);
            size_t at = kind ? data - 1 : data / 3;
            x.p[at] ^= kind ? 0x01 : 0x80;
            wr(x.p + data, 8, XXH3_64bits_withSeed(x.p, data, key ^ c->pos));
            size_t refused = load_until_refused(&d, i, &x);
            CHECK_MSG(refused < d.n, "chunk %zu: damage under a good tag got through", i);
            CHECK(refused >= i);
            buf_free(&x);
        }
    }
    dump_free(&d);
}

/* ------------------------------------------------------------------------------------ */
/* Chunks made here, from file bytes, as docs/FORMAT.md describes them                  */
/* ------------------------------------------------------------------------------------ */

static dump chunks_from_file(const buf file)
{
    dump d = {xmalloc(64 * sizeof(chunk)), 0};
    uint64_t meta = meta_len_of(file.p), key = tag_key(file.p);
    unsigned nt = (unsigned)rd(file.p + H_NT, 4);
    d.c[0].pos = 0;
    d.c[0].cursor = align64(meta);
    d.c[0].b = buf_copy(file.p, (size_t)meta + SUM);
    memcpy(d.c[0].b.p + meta, file.p + file.n - SUM, SUM);
    d.n = 1;
    for (unsigned k = 0; k < nt; k++) {
        uint64_t off = rd(file.p + HDR + DESC * k + 16, 8);
        uint64_t len = rd(file.p + HDR + DESC * k + 24, 8);
        for (uint64_t j = 0; j < len && d.n < 64; j += CF_CHUNK_DATA_MAX) {
            uint64_t n = len - j < CF_CHUNK_DATA_MAX ? len - j : CF_CHUNK_DATA_MAX;
            chunk *c = &d.c[d.n++];
            c->pos = off + j;
            c->cursor = j + n < len ? off + j + n : align64(off + len);
            c->b = buf_copy(file.p + off + j, (size_t)n + SUM);
            wr(c->b.p + n, 8, XXH3_64bits_withSeed(c->b.p, (size_t)n, key ^ c->pos));
        }
    }
    return d;
}

/* Both checksums recomputed (meta sum where the header's counts put it, file sum last). */
static void resum(uint8_t *b, size_t n)
{
    uint64_t meta = meta_len_of(b);
    wr(b + meta - SUM, 8, XXH3_64bits(b, (size_t)meta - SUM));
    wr(b + n - SUM, 8, XXH3_64bits(b, n - SUM));
}

static uint64_t g_forged[4]; /* forged dumps tried: items + 1, items - 1, unused bit, a
                                wider table's fingerprint with its low f bits 0 */

/* The chunker above agrees with cf_dump_chunk; a dump of a forged file (checksums right,
 * contents not) is refused when the table it damages is complete. */
static void test_forged_dumps(const cf_filter *f, const char *label)
{
    cft_context("forged dumps: %s", label);
    buf file = ser(f);
    if (!file.p)
        return;
    dump mine = chunks_from_file(file), theirs = dump_all(f);
    bool same = mine.n == theirs.n;
    for (size_t i = 0; same && i < mine.n; i++)
        same = mine.c[i].pos == theirs.c[i].pos && mine.c[i].cursor == theirs.c[i].cursor &&
               buf_eq(mine.c[i].b, theirs.c[i].b);
    CHECK_MSG(same, "%s: the chunks differ from the specification's", label);
    dump_free(&theirs);
    dump_free(&mine);

    unsigned nt = (unsigned)rd(file.p + H_NT, 4);
    unsigned fb = file.p[40], bs = file.p[41];
    for (unsigned k = 0; k < nt; k++) {
        const uint8_t *d = file.p + HDR + DESC * k;
        uint64_t items = rd(d + 8, 8), slots = rd(d, 8) * bs;
        uint64_t bits = rd(d, 8) * bs * fb;
        for (unsigned kind = 0; kind < 4; kind++) {
            buf x = buf_copy(file.p, file.n);
            uint8_t *xd = x.p + HDR + DESC * k;
            if (kind == 0 && items < slots)
                wr(xd + 8, 8, items + 1); /* one item more than the table holds */
            else if (kind == 1 && items > 0)
                wr(xd + 8, 8, items - 1);
            else if (kind == 2 && bits % 8) /* a bit set after the last slot */
                x.p[rd(xd + 16, 8) + bits / 8] |= (uint8_t)(0x80u);
            else if (kind == 3 && forge_low_bits_zero(x.p, x.n, k)) {
                /* forged above */
            } else {
                buf_free(&x);
                continue;
            }
            g_forged[kind]++;
            resum(x.p, x.n);
            CHECK_ST(cf_validate(x.p, x.n, NULL), CF_ECORRUPT); /* a file: refused */
            dump fd = chunks_from_file(x);
            /* The chunk that completes table k. */
            uint64_t tend = rd(xd + 16, 8) + rd(xd + 24, 8);
            size_t last = 0;
            for (size_t i = 1; i < fd.n; i++)
                if (fd.c[i].pos < tend && fd.c[i].pos + fd.c[i].b.n - SUM == tend)
                    last = i;
            cf_filter *g = NULL;
            size_t i;
            for (i = 0; i < fd.n; i++)
                if (load_one(&g, &fd.c[i], NULL) != CF_OK)
                    break;
            CHECK_MSG(i == last && last > 0,
                      "%s: table %u, forged %s: refused at chunk %zu, want %zu of %zu", label, k,
                      kind == 0   ? "items + 1"
                      : kind == 1 ? "items - 1"
                      : kind == 2 ? "unused bit"
                                  : "low f bits 0",
                      i, last, fd.n);
            if (i < fd.n)
                CHECK_ST(load_one(&g, &fd.c[i], NULL), CF_ECORRUPT); /* still refused */
            cf_free(g);
            dump_free(&fd);
            buf_free(&x);
        }
    }
    buf_free(&file);
}

/* A chunk of another filter whose 64-byte header is the same as the loading one's: two
 * filters made with the same settings (the default seed 0 included) holding as many keys,
 * but other ones. The tag cannot tell them apart (it is bound to the header, so that a
 * chunk costs the same for any number of sub-filters; filters with distinct seeds, as the
 * Redis module makes, have distinct headers). cuckoofilter.h and docs/FORMAT.md promise
 * only that such a load fails by its last chunk: the first chunk of a table of two chunks
 * is the case to see, since a chunk that completes a table is caught by its item count. */
static void test_foreign_same_header(void)
{
    cft_context("foreign chunk, same header");
    /* f 32, b 4: 4.2M keys of capacity need a table of ~17.7 MB, two chunks. */
    cf_config c = {.capacity = 4200000, .fingerprint_bits = 32, .seed = 7}; /* one seed: */
    made a = make(c, 600, 3000, 0), b = make(c, 601, 3000, 0);              /* one header */
    dump da = {NULL, 0}, db = {NULL, 0};
    if (a.f && b.f) {
        da = dump_all(a.f);
        db = dump_all(b.f);
    }
    if (CHECK(da.n == 3 && db.n == 3)) {
        CHECK(memcmp(da.c[0].b.p, db.c[0].b.p, HDR) == 0); /* the same header */
        CHECK(!buf_eq(da.c[1].b, db.c[1].b));              /* other contents */
        cf_filter *g = NULL;
        CHECK_ST(load_one(&g, &da.c[0], NULL), CF_OK);
        cf_status st = load_one(&g, &db.c[1], NULL);
        CHECK_MSG(st == CF_OK || st == CF_ECORRUPT, "chunk 1 of another filter: %s",
                  cft_status_name(st));
        if (st == CF_ECORRUPT) {
            /* Refused, the loader unchanged: the right chunk is taken. */
            CHECK_ST(load_one(&g, &da.c[1], NULL), CF_OK);
            CHECK_ST(load_one(&g, &da.c[2], NULL), CF_OK);
            CHECK(!cf_is_loading(g));
        } else {
            /* Taken: then the load must fail, by its last chunk, and stay incomplete. */
            CHECK(cf_is_loading(g));
            CHECK_ST(load_one(&g, &da.c[2], NULL), CF_ECORRUPT);
            CHECK(cf_is_loading(g));
        }
        cf_free(g);
    }
    dump_free(&da);
    dump_free(&db);
    made_free(&a);
    made_free(&b);
}

/* ------------------------------------------------------------------------------------ */
/* Modified during a dump                                                               */
/* ------------------------------------------------------------------------------------ */

/* Dump f, calling `change` after chunk `after`; the load must be refused by the last
 * chunk, unless the chunks it got are exactly those of the filter before the change. */
typedef void (*change_fn)(cf_filter *f, uint64_t stream);

static void change_add(cf_filter *f, uint64_t stream)
{
    uint8_t k[CFT_KEY_MAX];
    for (uint64_t i = 0; i < 20; i++)
        cf_add(f, k, cft_key(k, stream + 50, i));
}

/* One key in, another out: the counts stay, the contents move. */
static void change_swap(cf_filter *f, uint64_t stream)
{
    uint8_t k[CFT_KEY_MAX];
    for (uint64_t i = 0; i < 30; i++) {
        CHECK_ST(cf_add(f, k, cft_key_var(k, stream + 60, i)), CF_OK);
        CHECK_ST(cf_delete(f, k, cft_key_var(k, stream, i)), CF_OK);
    }
}

static void change_grow(cf_filter *f, uint64_t stream)
{
    uint8_t k[CFT_KEY_MAX];
    unsigned subs = cft_stats(f).sub_filters;
    for (uint64_t i = 0; i < 1000000 && cft_stats(f).sub_filters == subs; i++)
        cf_add(f, k, cft_key(k, stream + 70, i));
    CHECK(cft_stats(f).sub_filters > subs);
}

static void test_modified(cf_config c, uint64_t n, change_fn change, size_t after,
                          const char *label)
{
    cft_context("modified during the dump: %s", label);
    uint64_t stream = 4000 + (uint64_t)after;
    made mk = make(c, stream, n, 0);
    cf_filter *f = mk.f;
    if (!f) {
        made_free(&mk);
        return;
    }
    CHECK_EQ_U(mk.n, n);
    dump before = dump_all(f);
    size_t cap = cf_dump_chunk_max(f) * 4;
    uint8_t *tmp = xmalloc(cap);
    uint64_t cursor = 0, pos;
    cf_filter *g = NULL;
    size_t i = 0, accepted = 0;
    bool refused = false, dump_failed = false, same_as_before = true;
    for (;; i++) {
        if (i == after + 1)
            change(f, stream);
        size_t len = 0;
        pos = cursor;
        cf_status st = cf_dump_chunk(f, &cursor, tmp, cap, &len);
        if (st != CF_OK) {
            /* The old cursor is no position of the changed filter: the dump stops. */
            CHECK_ST(st, CF_EINVAL);
            dump_failed = true;
            break;
        }
        if (len == 0)
            break;
        same_as_before &= i < before.n && before.c[i].pos == pos && before.c[i].b.n == len &&
                          memcmp(before.c[i].b.p, tmp, len) == 0;
        st = cf_load_chunk(&g, cursor, tmp, len, NULL);
        if (st != CF_OK) {
            CHECK_ST(st, CF_ECORRUPT);
            refused = true;
            break;
        }
        accepted++;
    }
    if (!refused && !dump_failed) {
        /* Accepted whole: only if every chunk was the one from before the change. */
        CHECK_MSG(same_as_before, "%s: a dump mixing two states was accepted", label);
        CHECK(g && !cf_is_loading(g));
        if (g) {
            buf b = ser(g);
            cf_filter *orig = NULL;
            /* Rebuild the original from its chunks, for comparison. */
            for (size_t j = 0; j < before.n; j++)
                CHECK_ST(load_one(&orig, &before.c[j], NULL), CF_OK);
            buf o = ser(orig);
            CHECK(buf_eq(o, b));
            buf_free(&o);
            buf_free(&b);
            cf_free(orig);
        }
    }
    printf("  modified after chunk %zu (%s): %zu chunks accepted, then %s\n", after, label,
           accepted,
           refused       ? "refused"
           : dump_failed ? "the dump stopped (CF_EINVAL)"
                         : "complete (identical to the state before)");
    CHECK(refused || dump_failed || same_as_before);
    cf_free(g);
    free(tmp);
    dump_free(&before);
    made_free(&mk);
}

/* ------------------------------------------------------------------------------------ */
/* cf_dump_chunk's arguments                                                            */
/* ------------------------------------------------------------------------------------ */

static void test_dump_arguments(const cf_filter *f, const char *label)
{
    cft_context("dump arguments: %s", label);
    dump d = dump_all(f);
    if (d.n < 2)
        return;
    size_t cap = cf_dump_chunk_max(f);
    uint8_t *tmp = xmalloc(cap + 16);
    uint64_t end = d.c[d.n - 1].cursor;
    /* Positions that are not where a chunk starts. */
    uint64_t bad[64];
    size_t nb = 0;
    bad[nb++] = 1;
    bad[nb++] = 8;
    bad[nb++] = d.c[1].pos - 1;
    bad[nb++] = d.c[1].pos + 1;
    if (d.c[1].b.n - SUM >= 2)
        bad[nb++] = d.c[1].pos + (d.c[1].b.n - SUM) / 2;
    bad[nb++] = end - 1;
    for (size_t i = 1; i + 1 < d.n && nb < 60; i++) {
        uint64_t chunk_end = d.c[i].pos + d.c[i].b.n - SUM;
        if (chunk_end < d.c[i + 1].pos) /* padding between tables */
            bad[nb++] = chunk_end;
        if (d.c[i].b.n - SUM >= 2)
            bad[nb++] = d.c[i].pos + d.c[i].b.n - SUM - 1;
    }
    for (size_t i = 0; i < nb; i++) {
        uint64_t cursor = bad[i];
        size_t len = 999;
        CHECK_MSG(cf_dump_chunk(f, &cursor, tmp, cap, &len) == CF_EINVAL, "cursor %llu accepted",
                  (unsigned long long)bad[i]);
        CHECK_EQ_U(cursor, bad[i]);
    }
    /* Past the end: the end of the dump, as the end cursor gives it. */
    const uint64_t past[] = {end + 1, end + SUM, end + 64, UINT64_MAX - 63, UINT64_MAX};
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
        uint64_t cursor = past[i];
        size_t len = 999;
        CHECK_MSG(cf_dump_chunk(f, &cursor, tmp, cap, &len) == CF_OK && len == 0,
                  "cursor %llu past the end gave a chunk", (unsigned long long)past[i]);
        CHECK_EQ_U(cursor, 0);
    }
    /* Buffers one byte too small; NULL arguments. */
    for (size_t i = 0; i < d.n; i++) {
        uint64_t cursor = d.c[i].pos;
        size_t len = 999;
        CHECK_ST(cf_dump_chunk(f, &cursor, tmp, d.c[i].b.n - 1, &len), CF_EINVAL);
        CHECK_EQ_U(cursor, d.c[i].pos);
        CHECK_ST(cf_dump_chunk(f, &cursor, NULL, cap, &len), CF_EINVAL);
        CHECK_ST(cf_dump_chunk(f, &cursor, tmp, 0, &len), CF_EINVAL);
        CHECK_ST(cf_dump_chunk(f, &cursor, tmp, d.c[i].b.n, &len), CF_OK); /* exactly enough */
        CHECK_EQ_U(len, d.c[i].b.n);
        CHECK(memcmp(tmp, d.c[i].b.p, len) == 0);
    }
    uint64_t cursor = 0;
    size_t len = 0;
    CHECK_ST(cf_dump_chunk(NULL, &cursor, tmp, cap, &len), CF_EINVAL);
    CHECK_ST(cf_dump_chunk(f, NULL, tmp, cap, &len), CF_EINVAL);
    CHECK_ST(cf_dump_chunk(f, &cursor, tmp, cap, NULL), CF_EINVAL);
    CHECK_EQ_U(cf_dump_chunk_max(NULL), 0);
    /* The end: length 0 and cursor 0, whatever the buffer. */
    cursor = end;
    len = 999;
    CHECK_ST(cf_dump_chunk(f, &cursor, tmp, cap, &len), CF_OK);
    CHECK_EQ_U(len, 0);
    CHECK_EQ_U(cursor, 0);
    /* A dump can start again, and gives the same chunks. */
    dump d2 = dump_all(f);
    bool same = d2.n == d.n;
    for (size_t i = 0; same && i < d.n; i++)
        same = d2.c[i].cursor == d.c[i].cursor && buf_eq(d2.c[i].b, d.c[i].b);
    CHECK(same);
    dump_free(&d2);
    free(tmp);
    dump_free(&d);
}

/* ------------------------------------------------------------------------------------ */
/* Allocation failures, NULL arguments                                                  */
/* ------------------------------------------------------------------------------------ */

static void test_alloc_failures(const cf_filter *f, const char *label)
{
    dump d = dump_all(f);
    if (d.n < 2)
        return;
    for (unsigned persist = 0; persist < 2; persist++) {
        cft_context("header chunk allocation failures: %s, %s", label,
                    persist ? "persistent" : "single");
        uint64_t n;
        bool done = false;
        for (n = 1; n < 100 && !done; n++) {
            cft_alloc ta;
            cft_alloc_init(&ta);
            cft_alloc_arm(&ta, n, persist);
            cf_filter *g = NULL;
            cf_status st = load_one(&g, &d.c[0], &ta.a);
            if (st == CF_OK) {
                CHECK(ta.failures == 0);
                /* Each data chunk with the allocator failing: the first chunk of a table
                 * (which allocates it) gets CF_ENOMEM and changes nothing, the others go
                 * in; then the refused one goes in as soon as memory is back. */
                uint64_t refused = 0, opening = 0;
                for (size_t i = 1; i < d.n; i++) {
                    cf_stats before = cft_stats(g);
                    cft_alloc_arm(&ta, 1, true);
                    cf_status sd = load_one(&g, &d.c[i], NULL);
                    cft_alloc_disarm(&ta);
                    for (unsigned k = 0; k < (unsigned)rd(d.c[0].b.p + H_NT, 4); k++)
                        opening += rd(desc_of(&d, k) + 16, 8) == d.c[i].pos;
                    if (sd == CF_ENOMEM) {
                        refused++;
                        cf_stats after = cft_stats(g);
                        CHECK_STATS_EQ(after, before);
                        check_loading_dump(g, &d, i, "after CF_ENOMEM");
                        sd = load_one(&g, &d.c[i], NULL);
                    }
                    CHECK_ST(sd, CF_OK);
                }
                CHECK_EQ_U(refused, opening);
                CHECK_EQ_U(ta.failures, refused);
                CHECK(!cf_is_loading(g));
                buf a = ser(f), b = ser(g);
                CHECK_MSG(buf_eq(a, b), "%s: loaded through CF_ENOMEM, differs", label);
                buf_free(&a);
                buf_free(&b);
                cf_free(g);
                done = true;
            } else {
                CHECK_ST(st, CF_ENOMEM);
                CHECK(g == NULL);
            }
            CHECK_ALLOC_CLEAN(&ta);
        }
        CHECK(done);
        if (persist == 0)
            printf("  %s: header chunk CF_ENOMEM for N = 1..%llu, then success\n", label,
                   (unsigned long long)(n - 2));
    }
    dump_free(&d);
}

static void test_null_arguments(const cf_filter *f)
{
    cft_context("NULL arguments");
    dump d = dump_all(f);
    if (d.n < 2)
        return;
    cf_filter *g = NULL;
    CHECK_ST(cf_load_chunk(NULL, d.c[0].cursor, d.c[0].b.p, d.c[0].b.n, NULL), CF_EINVAL);
    CHECK_ST(cf_load_chunk(&g, d.c[0].cursor, NULL, d.c[0].b.n, NULL), CF_EINVAL);
    CHECK_ST(cf_load_chunk(&g, d.c[0].cursor, NULL, 0, NULL), CF_ECORRUPT);
    cf_allocator half = {NULL, NULL, NULL};
    CHECK_ST(cf_load_chunk(&g, d.c[0].cursor, d.c[0].b.p, d.c[0].b.n, &half), CF_EINVAL);
    CHECK(g == NULL);
    CHECK(!cf_is_loading(NULL));
    CHECK(!cf_is_loading(f));
    /* A filter that is not loading takes no chunk. */
    cf_filter *plain = NULL;
    cf_config c = {.capacity = 100, .seed = cft_subseed(14)};
    CHECK_ST(cf_new(&c, &plain), CF_OK);
    cf_filter *same = plain;
    CHECK_ST(cf_load_chunk(&plain, d.c[1].cursor, d.c[1].b.p, d.c[1].b.n, NULL), CF_EINVAL);
    CHECK_ST(cf_load_chunk(&plain, d.c[0].cursor, d.c[0].b.p, d.c[0].b.n, NULL), CF_EINVAL);
    CHECK(plain == same);
    cf_free(plain);
    dump_free(&d);
}

/* The Redis module's prefix, as docs/FORMAT.md ("In the Redis module") gives it: two
 * little-endian u64 fields, then the filter's own hash of their 16 bytes. */
static void test_module_prefix(void)
{
    cft_context("the module's prefix");
    cf_filter *f = NULL, *g = NULL;
    cf_config c = {.capacity = 100, .seed = cft_subseed(15)};
    CHECK_ST(cf_new(&c, &f), CF_OK);
    c.seed = cft_subseed(16);
    CHECK_ST(cf_new(&c, &g), CF_OK);
    const uint64_t deletes = cft_subseed(17) >> 2, iterations = 1 + cft_subseed(18) % 65535;
    uint8_t p[CF_MODULE_PREFIX_BYTES + 1];
    memset(p, 0xA5, sizeof p);
    CHECK_ST(cf_module_prefix_write(f, deletes, iterations, p), CF_OK);
    CHECK_EQ_U(rd(p, 8), deletes);
    CHECK_EQ_U(rd(p + 8, 8), iterations);
    CHECK_EQ_U(rd(p + 16, 8), cf_hash(f, p, 16));
    CHECK_EQ_U(p[CF_MODULE_PREFIX_BYTES], 0xA5); /* nothing past it */
    CHECK_EQ_U(cf_module_fields_check(f, deletes, iterations), cf_hash(f, p, 16));
    CHECK(cf_module_fields_check(g, deletes, iterations) != cf_hash(f, p, 16));
    uint64_t d = 0, m = 0, k = 0;
    CHECK_ST(cf_module_prefix_read(p, sizeof p, &d, &m, &k), CF_OK);
    CHECK_EQ_U(d, deletes);
    CHECK_EQ_U(m, iterations);
    CHECK_EQ_U(k, rd(p + 16, 8));
    /* Out of range: deletes from 2^63, iterations 0 and past 65535; too short. */
    const uint64_t bad[][2] = {{UINT64_C(1) << 63, 20}, {0, 0}, {0, 65536}, {UINT64_MAX, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t q[CF_MODULE_PREFIX_BYTES];
        memcpy(q, p, sizeof q);
        CHECK_ST(cf_module_prefix_write(f, bad[i][0], bad[i][1], q), CF_EINVAL);
        CHECK(memcmp(q, p, sizeof q) == 0);
        wr(q, 8, bad[i][0]);
        wr(q + 8, 8, bad[i][1]);
        CHECK_ST(cf_module_prefix_read(q, sizeof q, &d, &m, &k), CF_ECORRUPT);
    }
    CHECK_ST(cf_module_prefix_write(f, 0, 1, p), CF_OK);
    CHECK_ST(cf_module_prefix_write(f, (UINT64_C(1) << 63) - 1, 65535, p), CF_OK);
    CHECK_ST(cf_module_prefix_read(p, CF_MODULE_PREFIX_BYTES - 1, &d, &m, &k), CF_ECORRUPT);
    CHECK_ST(cf_module_prefix_read(NULL, 0, &d, &m, &k), CF_ECORRUPT);
    CHECK_ST(cf_module_prefix_read(NULL, 5, &d, &m, &k), CF_EINVAL);
    CHECK_ST(cf_module_prefix_read(p, sizeof p, NULL, &m, &k), CF_EINVAL);
    CHECK_ST(cf_module_prefix_write(NULL, 0, 1, p), CF_EINVAL);
    CHECK_ST(cf_module_prefix_write(f, 0, 1, NULL), CF_EINVAL);
    CHECK_EQ_U(cf_module_fields_check(NULL, 0, 1), 0);
    cf_free(f);
    cf_free(g);
}

/* ------------------------------------------------------------------------------------ */

static char g_dir[256];

int main(void)
{
    cft_init("test_chunks");
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/cf_test_chunks_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 2;
    }
    double t0 = cft_now();

    /* Small, growing, empty, with stash entries, odd shapes. */
    const struct {
        const char *name;
        cf_config c;
        uint64_t n;
        unsigned subs;
    } cases[] = {
        {"fixed f12 b4", {.capacity = 1000, .seed = 1}, 800, 0},
        {"growing e2, 4 sub-filters", {.capacity = 100, .expansion = 2, .seed = 2}, 100000, 4},
        {"growing e1, 5 sub-filters",
         {.capacity = 64, .expansion = 1, .seed = 3, .bucket_size = 2, .fingerprint_bits = 16},
         100000,
         5},
        /* Widening: runs of sub-filters of one width (the file's tables walked run by run). */
        {"growing e1, widths in runs",
         {.capacity = 16, .expansion = 1, .seed = 11, .fingerprint_bits = 8, .fpr_bound = 0.05},
         100000,
         30},
        {"growing e1, widened to 32 bits at once",
         {.capacity = 16, .expansion = 1, .seed = 12, .fingerprint_bits = 28},
         100000,
         12},
        {"empty", {.capacity = 5000, .seed = 4}, 0, 0},
        {"empty growing", {.capacity = 50, .expansion = 3, .seed = 5}, 0, 0},
        {"fixed, full stash",
         {.capacity = 40, .bucket_size = 2, .fingerprint_bits = 8, .seed = 6},
         100000,
         0},
        {"growing at its limit, stash",
         {.capacity = 30,
          .expansion = 2,
          .max_sub_filters = 2,
          .bucket_size = 1,
          .fingerprint_bits = 10,
          .seed = 7},
         100000,
         0},
        {"f4 b1", {.capacity = 50, .bucket_size = 1, .fingerprint_bits = 4, .seed = 8}, 40, 0},
        {"f32 b255",
         {.capacity = 3000, .bucket_size = 255, .fingerprint_bits = 32, .seed = 9},
         2000,
         0},
        {"f7 b3", {.capacity = 999, .bucket_size = 3, .fingerprint_bits = 7, .seed = 10}, 900, 0},
    };
    const size_t ncases = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < ncases; i++) {
        cf_config c = cases[i].c;
        c.seed = cft_subseed(cases[i].c.seed); /* the run's seed (CF_TEST_SEED) */
        made m = make(c, 100 + i, cases[i].n, cases[i].subs);
        cf_filter *f = m.f;
        if (!f) {
            made_free(&m);
            continue;
        }
        cft_context("%s", cases[i].name);
        if (cases[i].subs)
            CHECK_EQ_U(cft_stats(f).sub_filters, cases[i].subs);
        if (strstr(cases[i].name, "stash"))
            CHECK_EQ_U(cft_stats(f).stashed, 8);
        /* Another filter of the same layout: same settings, another seed. */
        cf_config oc = c;
        oc.seed = cft_subseed(cases[i].c.seed + 1000);
        made other = make(oc, 100 + i, cases[i].n, cases[i].subs);
        dump foreign = {NULL, 0};
        if (other.f && cf_serialized_size(other.f) == cf_serialized_size(f) &&
            cft_stats(other.f).sub_filters == cft_stats(f).sub_filters &&
            cft_stats(other.f).stashed == cft_stats(f).stashed)
            foreign = dump_all(other.f);
        test_dump_arguments(f, cases[i].name);
        refusal_suite(f, foreign.n ? &foreign : NULL, g_dir, cases[i].name);
        test_hidden_damage(f, cases[i].name);
        test_forged_dumps(f, cases[i].name);
        test_loading_dumps(f, cases[i].name);
        if (i < 3)
            test_alloc_failures(f, cases[i].name);
        if (i == 0)
            test_null_arguments(f);
        roundtrip(&m, cases[i].name); /* last: it changes f */
        dump_free(&foreign);
        made_free(&other);
        made_free(&m);
    }
    printf("  small filters: %.2f s, %llu refusals; forged dumps: %llu items + 1, %llu items - 1, "
           "%llu unused bit, %llu low f bits 0\n",
           cft_now() - t0, (unsigned long long)g_refused, (unsigned long long)g_forged[0],
           (unsigned long long)g_forged[1], (unsigned long long)g_forged[2],
           (unsigned long long)g_forged[3]);
    cft_context("forged dumps");
    CHECK(g_forged[0] > 0 && g_forged[1] > 0 && g_forged[2] > 0 && g_forged[3] > 0);

    test_foreign_same_header();
    test_module_prefix();

    /* Filters that change during their dump. */
    cf_config fixed = {.capacity = 2000, .seed = cft_subseed(11)};
    cf_config growing = {.capacity = 200, .expansion = 2, .seed = cft_subseed(12)};
    test_modified(fixed, 1500, change_add, 0, "fixed, keys added after the header");
    test_modified(fixed, 1500, change_swap, 0, "fixed, keys swapped after the header");
    test_modified(growing, 1000, change_add, 1, "growing, keys added after chunk 1");
    test_modified(growing, 1000, change_swap, 1, "growing, keys swapped after chunk 1");
    test_modified(growing, 1000, change_swap, 2, "growing, keys swapped after chunk 2");
    test_modified(growing, 1000, change_grow, 0, "growing, grown after the header");
    test_modified(growing, 1000, change_grow, 1, "growing, grown after chunk 1");

    /* A table bigger than CF_CHUNK_DATA_MAX: three chunks of one table. */
    t0 = cft_now();
    cf_config big = {.capacity = 22000000, .seed = cft_subseed(13)};
    made bm = make(big, 300, 5000, 0);
    cf_filter *f = bm.f;
    if (f) {
        CHECK(cft_stats(f).bytes > 2 * CF_CHUNK_DATA_MAX);
        CHECK_EQ_U(cf_dump_chunk_max(f), CF_CHUNK_MAX); /* a full chunk: the bound, exactly */
        test_dump_arguments(f, "big");
        refusal_suite(f, NULL, g_dir, "big");
        test_hidden_damage(f, "big");
        test_forged_dumps(f, "big");
        roundtrip(&bm, "22M capacity, one table of 3 chunks");
    }
    made_free(&bm);
    printf("  big filter: %.2f s\n", cft_now() - t0);

    /* A growing filter whose second sub-filter is two chunks: 264 buckets, then 264 *
     * 16384 (26 MB). Header, table 0, two chunks of table 1: a loading filter that stops
     * between sub-filters, and one that stops inside one. */
    t0 = cft_now();
    cf_config wide = {
        .capacity = 1000, .expansion = 16384, .max_sub_filters = 2, .seed = cft_subseed(15)};
    made wm = make(wide, 310, 100000, 2);
    if (wm.f) {
        cft_context("growing, two chunks in sub-filter 1");
        uint8_t k[CFT_KEY_MAX];
        for (uint64_t i = 0; i < 20000; i++)
            CHECK_ST(cf_add(wm.f, k, cft_key(k, 311, i)), CF_OK);
        cf_stats ws = cft_stats(wm.f);
        CHECK_EQ_U(ws.sub_filters, 2);
        CHECK(ws.bytes > CF_CHUNK_DATA_MAX);
        dump wd = dump_all(wm.f);
        CHECK_EQ_U(wd.n, 4);
        dump_free(&wd);
        test_dump_arguments(wm.f, "growing, big sub-filter 1");
        test_loading_dumps(wm.f, "growing, big sub-filter 1");
    }
    made_free(&wm);
    printf("  growing filter with a sub-filter of two chunks: %.2f s; %llu loads resumed from "
           "the dump of a loading filter\n",
           cft_now() - t0, (unsigned long long)g_partial_loads);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/loading.cf", g_dir); /* only if cf_save wrongly saved */
    unlink(path);
    CHECK(rmdir(g_dir) == 0);
    return cft_finish();
}
