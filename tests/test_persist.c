/*
 * test_persist.c - saving and loading: cf_serialize, cf_deserialize, cf_validate, cf_save,
 * cf_load, cf_validate_file and cf_open_mapped.
 *
 * - Round trips for every shape: f = 4..32 x b in {1,2,3,4,5,7,8,16} (and a few odd bucket
 *   sizes up to 255) x expansion 0..3, each filled three ways (random keys with duplicates
 *   and deletes; overfilled until CF_FULL, so that the stash is in use; empty). Each filter
 *   goes through cf_serialize/cf_deserialize, cf_save/cf_load, cf_open_mapped (flags 0
 *   and CF_MAP_VERIFY) and a chunked dump/load; every copy must serialize to the same
 *   bytes and answer exactly like the original (no false negatives, equal counts, stats
 *   and config). Then the same random operations are applied to the original and to the
 *   writable copies, which must return the same statuses and end with identical bytes.
 *   The bytes are also rebuilt by an independent writer in this file (from docs/FORMAT.md)
 *   and every table's non-zero slots are counted independently.
 * - Every truncation (and extension) of small files: CF_ECORRUPT, *out untouched, nothing
 *   allocated, through every reader.
 * - Every bit flip of whole small files: refused (CF_EVERSION only in the version field);
 *   cf_open_mapped without CF_MAP_VERIFY refuses every flip in the meta section.
 * - Forged files: one field changed and both checksums recomputed, so that only the range
 *   and consistency checks can refuse them; positive controls (valid changes) accepted.
 * - Allocation failures of cf_deserialize, cf_load (file and FIFO), cf_open_mapped and
 *   cf_save, for every N: CF_ENOMEM, nothing leaked, files untouched.
 * - Files: permissions, umask, temporary files, errors and errno (ENOENT, EISDIR, a write
 *   that fails halfway through RLIMIT_FSIZE), relative paths, FIFOs, NULL arguments.
 * - Mapped filters: read-only, same answers, saved identically (also over their own file),
 *   damage caught only with CF_MAP_VERIFY, unmapped by cf_free, unaffected by a later save
 *   over the same path.
 * - Extremes: every field at its limit (f 32, b 255, kicks 65535, expansion 32768, 65536
 *   sub-filters allowed, seed 2^64-1), and 300 sub-filters (a file bigger than cf_save's
 *   write buffer, made of many small pieces). Readers get buffers at odd addresses.
 */
#define _POSIX_C_SOURCE 200809L
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "format_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static cf_filter *const SENTINEL = (cf_filter *)&cft; /* never dereferenced */
static const char *const NOT_SET = "(reason not set)";

/* ------------------------------------------------------------------------------------ */
/* The format, as docs/FORMAT.md describes it (independent of src/image.c)              */
/* ------------------------------------------------------------------------------------ */

static const uint8_t MAGIC[8] = {0x89, 'C', 'U', 'C', 'K', 'O', 'O', '\n'};

/* Recompute both checksums: the meta sum where the header's counts put it (if that is
 * inside the buffer), then the file sum over everything but the last 8 bytes. */
static void resum(uint8_t *b, size_t n)
{
    if (n < HDR + SUM)
        return;
    uint64_t meta = meta_len_of(b);
    if (meta <= n - SUM)
        wr(b + meta - SUM, 8, XXH3_64bits(b, (size_t)meta - SUM));
    wr(b + n - SUM, 8, XXH3_64bits(b, n - SUM));
}

/* An independent writer: a file taken apart into its fields, and put back together with
 * the layout computed from scratch. */
#define FORGE_MAX_TABLES 1024
#define FORGE_MAX_STASH  16

typedef struct forge {
    uint8_t hdr[HDR];
    unsigned nt, ns;
    uint64_t buckets[FORGE_MAX_TABLES], items[FORGE_MAX_TABLES], tlen[FORGE_MAX_TABLES];
    const uint8_t *tab[FORGE_MAX_TABLES];
    uint64_t s_bucket[FORGE_MAX_STASH];
    uint32_t s_fp[FORGE_MAX_STASH], s_table[FORGE_MAX_STASH];
} forge;

/* Take apart a valid file (tables point into b). */
static bool forge_parse(forge *g, const uint8_t *b, size_t n)
{
    if (n < HDR)
        return false;
    memcpy(g->hdr, b, HDR);
    g->nt = (unsigned)rd(b + H_NT, 4);
    g->ns = b[H_STASH];
    if (g->nt == 0 || g->nt > FORGE_MAX_TABLES || g->ns > FORGE_MAX_STASH || meta_len_of(b) > n)
        return false;
    for (unsigned k = 0; k < g->nt; k++) {
        const uint8_t *d = b + HDR + DESC * k;
        g->buckets[k] = rd(d, 8);
        g->items[k] = rd(d + 8, 8);
        uint64_t off = rd(d + 16, 8);
        g->tlen[k] = rd(d + 24, 8);
        if (off > n || g->tlen[k] > n - off)
            return false;
        g->tab[k] = b + off;
    }
    for (unsigned e = 0; e < g->ns; e++) {
        const uint8_t *x = b + HDR + DESC * g->nt + ENTRY * e;
        g->s_bucket[e] = rd(x, 8);
        g->s_fp[e] = (uint32_t)rd(x + 8, 4);
        g->s_table[e] = (uint32_t)rd(x + 12, 4);
    }
    return true;
}

/* Put it back together: total, counts, offsets and checksums computed here. */
static buf forge_emit(const forge *g)
{
    uint64_t meta = HDR + DESC * (uint64_t)g->nt + ENTRY * (uint64_t)g->ns + SUM;
    uint64_t off[FORGE_MAX_TABLES], pos = align64(meta);
    for (unsigned k = 0; k < g->nt; k++) {
        off[k] = pos;
        pos = align64(pos + g->tlen[k]);
    }
    size_t total = (size_t)pos + SUM;
    buf b = {calloc(total, 1), total};
    if (!b.p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    memcpy(b.p, g->hdr, HDR);
    wr(b.p + H_TOTAL, 8, total);
    b.p[H_STASH] = (uint8_t)g->ns;
    wr(b.p + H_NT, 4, g->nt);
    for (unsigned k = 0; k < g->nt; k++) {
        uint8_t *d = b.p + HDR + DESC * k;
        wr(d, 8, g->buckets[k]);
        wr(d + 8, 8, g->items[k]);
        wr(d + 16, 8, off[k]);
        wr(d + 24, 8, g->tlen[k]);
        memcpy(b.p + off[k], g->tab[k], (size_t)g->tlen[k]);
    }
    for (unsigned e = 0; e < g->ns; e++) {
        uint8_t *x = b.p + HDR + DESC * g->nt + ENTRY * e;
        wr(x, 8, g->s_bucket[e]);
        wr(x + 8, 4, g->s_fp[e]);
        wr(x + 12, 4, g->s_table[e]);
    }
    wr(b.p + meta - SUM, 8, XXH3_64bits(b.p, (size_t)meta - SUM));
    wr(b.p + total - SUM, 8, XXH3_64bits(b.p, total - SUM));
    return b;
}

/* Slot s of a packed table (f bits each, least significant bit first). */
static uint32_t slot_at(const uint8_t *t, uint64_t s, unsigned f)
{
    return (uint32_t)bits_at(t, s * f, f);
}

/* Check a valid file against the specification, field by field. */
static void check_layout(buf b, const cf_filter *f)
{
    cf_stats s = cft_stats(f);
    cf_config c;
    cf_get_config(f, &c);
    CHECK(b.n >= HDR && memcmp(b.p, MAGIC, 8) == 0);
    bool seg = (c.flags & CF_SEGMENTED) != 0;
    CHECK_EQ_U(rd(b.p + H_VERSION, 2), seg ? 3 : 2);
    CHECK_EQ_U(rd(b.p + H_HLEN, 2), 64);
    bool widens = c.expansion && !(c.flags & CF_GROW_SAME_WIDTH);
    bool semi = (c.flags & CF_SEMI_SORT) != 0;
    CHECK_EQ_U(rd(b.p + H_FLAGS, 4), (widens ? 1u : 0u) | (semi ? 2u : 0u));
    CHECK_EQ_U(rd(b.p + H_TOTAL, 8), b.n);
    CHECK_EQ_U(rd(b.p + H_SEED, 8), c.seed);
    CHECK_EQ_U(rd(b.p + H_CAP, 8), c.capacity);
    CHECK_EQ_U(b.p[H_F], s.fingerprint_bits);
    CHECK_EQ_U(b.p[H_B], s.bucket_size);
    CHECK_EQ_U(b.p[H_HASH], 1);
    CHECK_EQ_U(b.p[H_STASH], s.stashed);
    CHECK_EQ_U(rd(b.p + H_KICKS, 2), c.max_kicks);
    CHECK((rd(b.p + H_WIDEN, 2) != 0) == widens);
    CHECK_EQ_U(rd(b.p + H_EXP, 4), c.expansion);
    CHECK_EQ_U(rd(b.p + H_MAXT, 4), c.max_sub_filters);
    CHECK_EQ_U(rd(b.p + H_NT, 4), s.sub_filters);
    CHECK_EQ_U(rd(b.p + H_RES2, 4), seg ? CF_SEGMENT_BITS : 0); /* segment bits, reserved */
    static forge g;
    if (!CHECK(forge_parse(&g, b.p, b.n)))
        return;
    uint64_t buckets = 0, items = 0;
    unsigned bs = s.bucket_size;
    for (unsigned k = 0; k < g.nt; k++) {
        unsigned fb = width_of(b.p, k);
        buckets += g.buckets[k];
        items += g.items[k];
        uint64_t bits = g.buckets[k] * (semi ? 4 * (fb - 1) : bs * fb);
        CHECK_EQ_U(g.tlen[k], (bits + 7) / 8);
        if (k > 0)
            CHECK_EQ_U(g.buckets[k], g.buckets[k - 1] * c.expansion);
        uint64_t used = 0;
        uint32_t v[255];
        for (uint64_t x = 0; x < g.buckets[k]; x++) {
            CHECK(bucket_slots(b.p, k, g.tab[k], x, v));
            for (unsigned j = 0; j < bs; j++)
                used += v[j] != 0;
        }
        CHECK_EQ_U(used, g.items[k]);
        if (bits % 8)
            CHECK_EQ_U(g.tab[k][bits / 8] >> (bits % 8), 0);
    }
    CHECK_EQ_U(buckets, s.buckets);
    CHECK_EQ_U(items + g.ns, s.items);
    for (unsigned e = 0; e < g.ns; e++) {
        CHECK(g.s_table[e] < g.nt);
        CHECK(g.s_fp[e] != 0 && g.s_fp[e] < (UINT64_C(1) << width_of(b.p, g.s_table[e])));
        CHECK(g.s_table[e] < g.nt && g.s_bucket[e] < g.buckets[g.s_table[e]]);
    }
    buf again = forge_emit(&g);
    CHECK_MSG(buf_eq(again, b), "the independent writer gives other bytes (%zu vs %zu)", again.n,
              b.n);
    buf_free(&again);
}

/* ------------------------------------------------------------------------------------ */
/* A temporary directory                                                                */
/* ------------------------------------------------------------------------------------ */

static char g_dir[256]; /* paths built from it have PATH_MAX bytes: never truncated */

static void dir_make(void)
{
    const char *t = getenv("TMPDIR");
    if (!t || !*t)
        t = "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/cf_test_persist_XXXXXX", t);
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        exit(2);
    }
}

static void dir_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", g_dir, name);
}

/* Remove everything in dir (one level of subdirectories), then dir itself if `self`. */
static void dir_empty(const char *dir, bool self)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                dir_empty(p, true);
            else
                unlink(p);
        }
        closedir(d);
    }
    if (self)
        rmdir(dir);
}

/* Entries of dir whose name contains ".tmp-" (cf_save's temporary files). */
static unsigned count_temps(const char *dir)
{
    unsigned n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp-") != NULL;
    closedir(d);
    return n;
}

/* Write a new file (removing the old one first: truncating a file in place makes ext4
 * flush it to disk on close, which is slow). */
static bool file_write(const char *path, const void *p, size_t n)
{
    unlink(path);
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return false;
    bool ok = fwrite(p, 1, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

static buf file_read(const char *path)
{
    buf b = {NULL, 0};
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return b;
    size_t cap = 4096;
    b.p = malloc(cap);
    for (;;) {
        if (b.n == cap)
            b.p = realloc(b.p, cap *= 2);
        size_t r = fread(b.p + b.n, 1, cap - b.n, fp);
        if (r == 0)
            break;
        b.n += r;
    }
    fclose(fp);
    return b;
}

/* How many mappings of the file now at `path` this process holds, by inode (from
 * /proc/self/maps); -1 if unknown (no /proc, or no such file). */
static int count_mappings(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    FILE *fp = fopen("/proc/self/maps", "r");
    if (!fp)
        return -1;
    char line[PATH_MAX + 256];
    int n = 0;
    while (fgets(line, sizeof line, fp)) {
        /* address perms offset dev inode path */
        unsigned long long inode = 0;
        char dev[32];
        if (sscanf(line, "%*s %*s %*s %31s %llu", dev, &inode) == 2 &&
            inode == (unsigned long long)st.st_ino)
            n++;
    }
    fclose(fp);
    return n;
}

/* ------------------------------------------------------------------------------------ */
/* Keys and random operations                                                           */
/* ------------------------------------------------------------------------------------ */

/* The keys given to a filter: id -> copies added and not deleted. */
typedef struct keyset {
    uint64_t stream, n, cap;
    uint32_t *cnt;
} keyset;

static void ks_init(keyset *ks, uint64_t stream)
{
    ks->stream = stream;
    ks->n = 0;
    ks->cap = 256;
    ks->cnt = calloc(ks->cap, sizeof *ks->cnt);
}

static void ks_free(keyset *ks)
{
    free(ks->cnt);
    ks->cnt = NULL;
}

static uint64_t ks_new(keyset *ks)
{
    if (ks->n == ks->cap) {
        ks->cnt = realloc(ks->cnt, (size_t)(ks->cap *= 2) * sizeof *ks->cnt);
        if (!ks->cnt) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
    }
    ks->cnt[ks->n] = 0;
    return ks->n++;
}

static size_t ks_key(const keyset *ks, uint8_t *k, uint64_t id)
{
    return cft_key_var(k, ks->stream, id);
}

/* A key that was never given to the filter. */
static size_t absent_key(const keyset *ks, uint8_t *k, uint64_t i)
{
    return cft_key_var(k, ks->stream + UINT64_C(0x100000001), i);
}

typedef struct mix {
    unsigned add_new, add_dup, del, unique; /* percentages, summing to 100 */
} mix;

static const mix MIX_NORMAL = {75, 10, 10, 5};
static const mix MIX_DUPS = {40, 45, 10, 5};

/* One random operation, applied to fs[0..nf): the first filter decides what the keyset
 * records; the others must return the same status. Returns fs[0]'s status. */
static cf_status one_op(cf_filter **fs, size_t nf, keyset *ks, cft_rng *r, mix m)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t x = cft_below(r, 100), id = 0;
    enum { NEW, DUP, DEL, UNIQUE } op;
    if (x < m.add_new)
        op = NEW;
    else if (x < m.add_new + m.add_dup)
        op = DUP;
    else if (x < m.add_new + m.add_dup + m.del)
        op = DEL;
    else
        op = UNIQUE;
    if (op == DUP || op == DEL) {
        /* A key with copies in the filter, if there is one. */
        uint64_t tries = ks->n;
        id = ks->n ? cft_below(r, ks->n) : 0;
        while (tries > 0 && ks->cnt[id] == 0) {
            id = (id + 1) % ks->n;
            tries--;
        }
        if (tries == 0)
            op = NEW;
    }
    if (op == NEW)
        id = ks_new(ks);
    if (op == UNIQUE)
        id = cft_below(r, ks->n + 1) == ks->n ? ks_new(ks) : cft_below(r, ks->n);
    size_t len = ks_key(ks, k, id);
    cf_status st[8];
    for (size_t i = 0; i < nf; i++) {
        st[i] = CF_EINVAL;
        switch (op) {
        case NEW:
        case DUP:
            st[i] = cf_add(fs[i], k, len);
            break;
        case DEL:
            st[i] = cf_delete(fs[i], k, len);
            break;
        case UNIQUE:
            st[i] = cf_add_unique(fs[i], k, len);
            break;
        }
        if (i > 0)
            CHECK_MSG(st[i] == st[0], "op %d on key %llu: copy %zu says %s, original %s", (int)op,
                      (unsigned long long)id, i, cft_status_name(st[i]), cft_status_name(st[0]));
    }
    if (op == DEL)
        CHECK_ST(st[0], CF_OK); /* the key has copies: a delete must find one */
    else if (op == UNIQUE && ks->cnt[id] > 0)
        CHECK_ST(st[0], CF_EXISTS);
    else
        CHECK_MSG(st[0] == CF_OK || st[0] == CF_FULL || (op == UNIQUE && st[0] == CF_EXISTS),
                  "add returned %s", cft_status_name(st[0]));
    if (st[0] == CF_OK) {
        if (op == DEL)
            ks->cnt[id]--;
        else
            ks->cnt[id]++;
    }
    return st[0];
}

/* a and b answer alike for every key given and for as many absent ones; a has no false
 * negative; stats and config are equal. */
static void compare(const cf_filter *a, const cf_filter *b, const keyset *ks, const char *what)
{
    uint8_t k[CFT_KEY_MAX];
    uint64_t fn_a = 0, fn_b = 0, under = 0, diff = 0, cdiff = 0, hdiff = 0;
    uint64_t absent = ks->n < 300 ? 300 : ks->n;
    enum { BATCH = 64 };
    uint64_t hs[BATCH];
    bool oa[BATCH], ob[BATCH];
    size_t nb = 0;
    uint64_t mdiff = 0;
    for (uint64_t i = 0; i < ks->n + absent; i++) {
        size_t len = i < ks->n ? ks_key(ks, k, i) : absent_key(ks, k, i - ks->n);
        bool ca = cf_contains(a, k, len), cb = cf_contains(b, k, len);
        uint64_t na = cf_count(a, k, len), nb2 = cf_count(b, k, len);
        uint64_t ha = cf_hash(a, k, len);
        hdiff += ha != cf_hash(b, k, len);
        diff += ca != cb;
        cdiff += na != nb2;
        if (i < ks->n && ks->cnt[i] > 0) {
            fn_a += !ca;
            fn_b += !cb;
            under += na < ks->cnt[i];
        }
        hs[nb++] = ha;
        if (nb == BATCH || i + 1 == ks->n + absent) {
            cf_contains_many(a, hs, nb, oa);
            cf_contains_many(b, hs, nb, ob);
            for (size_t j = 0; j < nb; j++)
                mdiff += oa[j] != ob[j] || oa[j] != cf_contains_hash(a, hs[j]);
            nb = 0;
        }
    }
    CHECK_MSG(fn_a == 0 && fn_b == 0, "%s: false negatives: %llu in the original, %llu in the copy",
              what, (unsigned long long)fn_a, (unsigned long long)fn_b);
    CHECK_MSG(under == 0, "%s: %llu counts below the copies added", what,
              (unsigned long long)under);
    CHECK_MSG(diff == 0 && cdiff == 0 && hdiff == 0 && mdiff == 0,
              "%s: %llu answers, %llu counts, %llu hashes, %llu batch answers differ", what,
              (unsigned long long)diff, (unsigned long long)cdiff, (unsigned long long)hdiff,
              (unsigned long long)mdiff);
    cf_stats sa = cft_stats(a), sb = cft_stats(b);
    CHECK_STATS_EQ(sa, sb);
    CHECK_EQ_U(sa.capacity, sb.capacity);
    cf_config c1, c2;
    memset(&c1, 0xA5, sizeof c1);
    memset(&c2, 0x5A, sizeof c2);
    cf_get_config(a, &c1);
    cf_get_config(b, &c2);
    CHECK_MSG(c1.capacity == c2.capacity && c1.fingerprint_bits == c2.fingerprint_bits &&
                  c1.bucket_size == c2.bucket_size && c1.max_kicks == c2.max_kicks &&
                  c1.expansion == c2.expansion && c1.seed == c2.seed &&
                  c1.max_sub_filters == c2.max_sub_filters && c2.allocator == NULL,
              "%s: configs differ", what);
}

/* A copy of f through cf_dump_chunk and cf_load_chunk; NULL on failure. */
static cf_filter *chunk_copy(const cf_filter *f, const cf_allocator *a)
{
    size_t cap = cf_dump_chunk_max(f);
    if (!CHECK(cap > 0))
        return NULL;
    uint8_t *chunk = malloc(cap);
    uint64_t cursor = 0;
    cf_filter *g = NULL;
    bool ok = true;
    unsigned chunks = 0;
    do {
        size_t len = 0;
        if (!CHECK_ST(cf_dump_chunk(f, &cursor, chunk, cap, &len), CF_OK)) {
            ok = false;
            break;
        }
        CHECK(len <= cap);
        if (len == 0) {
            CHECK_EQ_U(cursor, 0);
            break;
        }
        chunks++;
        if (!CHECK_ST(cf_load_chunk(&g, cursor, chunk, len, a), CF_OK)) {
            ok = false;
            break;
        }
    } while (cursor != 0 && chunks < 100000);
    free(chunk);
    if (!ok || !CHECK(g != NULL) || !CHECK(!cf_is_loading(g))) {
        cf_free(g);
        return NULL;
    }
    return g;
}

/* ------------------------------------------------------------------------------------ */
/* Round trips                                                                          */
/* ------------------------------------------------------------------------------------ */

typedef enum { FILL_MIXED, FILL_OVER, FILL_EMPTY } fill_kind;

static const char *const FILL_NAME[] = {"mixed", "overfilled", "empty"};

typedef struct rt_totals {
    uint64_t filters, with_stash, multi, keys;
} rt_totals;

static void fill(cf_filter *f, keyset *ks, cft_rng *r, fill_kind how, unsigned expansion,
                 uint64_t cap)
{
    cf_filter *fs[1] = {f};
    if (how == FILL_EMPTY)
        return;
    if (how == FILL_OVER) {
        /* New keys until CF_FULL: a fixed filter (or a growing one at its sub-filter limit)
         * has used its stash by then. Then a few deletes. */
        mix only_new = {100, 0, 0, 0};
        uint64_t limit = 40 * cap + 1000, i, fulls = 0;
        /* A growing filter also says CF_FULL for a key whose fingerprint already fills both
         * its buckets (common with short fingerprints): go on until the stash is full. */
        for (i = 0; i < limit; i++)
            if (one_op(fs, 1, ks, r, only_new) == CF_FULL &&
                (expansion == 0 || cft_stats(f).stashed == 8 || ++fulls == 500))
                break;
        CHECK_MSG(i < limit, "never full after %llu keys", (unsigned long long)i);
        CHECK_MSG(cft_stats(f).stashed > 0, "full, and nothing stashed");
        mix only_del = {0, 0, 100, 0};
        uint64_t dels = cft_below(r, 4);
        for (i = 0; i < dels; i++)
            one_op(fs, 1, ks, r, only_del);
        return;
    }
    /* Mixed: fixed filters to ~90 % of capacity, growing ones to 3 sub-filters. */
    mix m = cft_below(r, 2) ? MIX_NORMAL : MIX_DUPS;
    uint64_t limit = 60 * cap + 1000, fulls = 0;
    for (uint64_t i = 0; i < limit && fulls < 3; i++) {
        cf_stats s = cft_stats(f);
        if (expansion == 0 ? s.items * 10 >= cap * 9 : s.sub_filters >= 3)
            break;
        fulls += one_op(fs, 1, ks, r, m) == CF_FULL;
    }
}

static void roundtrip(cf_filter *f, keyset *ks, cft_rng *r, const char *label, uint64_t idx,
                      rt_totals *tot)
{
    cft_context("%s", label);
    cf_stats s0 = cft_stats(f);
    tot->filters++;
    tot->with_stash += s0.stashed > 0;
    tot->multi += s0.sub_filters > 1;
    tot->keys += ks->n;

    buf b = ser(f);
    if (!b.p)
        return;
    const char *why = NOT_SET;
    CHECK_ST(cf_validate(b.p, b.n, &why), CF_OK);
    CHECK(why == NULL);
    check_layout(b, f);

    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_filter *copies[4] = {NULL, NULL, NULL, NULL}; /* deserialized, loaded, chunks */
    const char *names[4] = {"", "", "", ""};
    size_t nc = 0;

    /* From an odd address: nothing may assume alignment. */
    uint8_t *odd = malloc(b.n + 1);
    memcpy(odd + 1, b.p, b.n);
    CHECK_ST(cf_validate(odd + 1, b.n, NULL), CF_OK);
    cf_filter *g = SENTINEL;
    if (CHECK_ST(cf_deserialize(odd + 1, b.n, &ta.a, &g), CF_OK)) {
        names[nc] = "cf_deserialize";
        copies[nc++] = g;
    }
    free(odd);

    char path[PATH_MAX];
    dir_path(path, sizeof path, "rt.cf");
    /* cf_save (which syncs to disk, slowly) for one filter in 16; a plain write of the
     * serialized bytes for the others. */
    bool saved = idx % 16 == 0 || s0.sub_filters > 64 ? CHECK_ST(cf_save(f, path), CF_OK)
                                                      : file_write(path, b.p, b.n);
    if (CHECK(saved)) {
        buf fb = file_read(path);
        CHECK_MSG(buf_eq(fb, b), "the file is not the serialized bytes");
        buf_free(&fb);
        CHECK_EQ_U(count_temps(g_dir), 0);
        cf_filter *h = SENTINEL;
        if (CHECK_ST(cf_load(path, &ta.a, &h), CF_OK)) {
            names[nc] = "cf_load";
            copies[nc++] = h;
        }
        for (unsigned flags = 0; flags <= CF_MAP_VERIFY; flags++) {
            cf_filter *m = SENTINEL;
            if (!CHECK_ST(cf_open_mapped(path, flags, &ta.a, &m), CF_OK))
                continue;
            buf mb = ser(m);
            CHECK_MSG(buf_eq(mb, b), "mapped (flags %u) serializes differently", flags);
            buf_free(&mb);
            compare(f, m, ks, flags ? "mapped, verified" : "mapped");
            cf_free(m);
        }
    }
    cf_filter *c = chunk_copy(f, &ta.a);
    if (c) {
        names[nc] = "chunks";
        copies[nc++] = c;
    }
    for (size_t i = 0; i < nc; i++) {
        buf cb = ser(copies[i]);
        CHECK_MSG(buf_eq(cb, b), "%s: serializes differently", names[i]);
        buf_free(&cb);
        compare(f, copies[i], ks, names[i]);
    }

    /* The copies behave exactly like the original: the same operations, the same
     * statuses, the same bytes at the end. */
    cf_filter *all[5] = {f};
    for (size_t i = 0; i < nc; i++)
        all[i + 1] = copies[i];
    uint64_t ops = cft_scaled(100 + cft_below(r, 200));
    for (uint64_t i = 0; i < ops; i++)
        one_op(all, nc + 1, ks, r, (idx & 1) ? MIX_NORMAL : MIX_DUPS);
    buf after = ser(f);
    for (size_t i = 0; i < nc; i++) {
        buf cb = ser(copies[i]);
        CHECK_MSG(buf_eq(cb, after), "%s: differs from the original after %llu operations",
                  names[i], (unsigned long long)ops);
        buf_free(&cb);
        compare(f, copies[i], ks, names[i]);
        cf_free(copies[i]);
    }
    buf_free(&after);
    buf_free(&b);
    CHECK_ALLOC_CLEAN(&ta);
}

static cf_filter *make_filter(uint64_t *cap, unsigned fb, unsigned bs, unsigned e, uint64_t seed,
                              unsigned kicks, unsigned max_subs)
{
    for (;;) {
        cf_config c = {.capacity = *cap,
                       .fingerprint_bits = fb,
                       .bucket_size = bs,
                       .expansion = e,
                       .seed = seed,
                       .max_kicks = kicks,
                       .max_sub_filters = max_subs};
        cf_filter *f = NULL;
        cf_status st = cf_new(&c, &f);
        if (st == CF_OK)
            return f;
        /* A shape that cannot hold this many keys: try fewer. */
        if (!CHECK_MSG(st == CF_EINVAL && *cap > 1, "cf_new f %u b %u cap %llu: %s", fb, bs,
                       (unsigned long long)*cap, cft_status_name(st)))
            return NULL;
        *cap /= 2;
    }
}

static void test_roundtrip_shapes(void)
{
    static const unsigned bsizes[] = {1, 2, 3, 4, 5, 7, 8, 16};
    static const unsigned odd_b[] = {6, 11, 100, 255};
    static const unsigned odd_f[] = {4, 9, 17, 32};
    rt_totals tot = {0, 0, 0, 0};
    uint64_t idx = 0;
    uint64_t overfilled = 0, grown = 0;
    double t0 = cft_now();
    /* Every width, bucket size, expansion and fill of the first pass meet each other in
     * threes: the quick default runs the third of their product where (fi + bi + ei + how)
     * is a multiple of 3, which still pairs every two of them and holds every (f, b, e)
     * with one fill; CF_TEST_SCALE >= 3 runs all of it. A filter's seed depends on its
     * place in the product, so either run makes the same filters. */
    unsigned stride = cft.scale >= 3.0 ? 1u : 3u;
    for (unsigned pass = 0; pass < 2; pass++) {
        unsigned nf = pass == 0 ? 29 : 4, nb = pass == 0 ? 8 : 4, ne = pass == 0 ? 4 : 2;
        for (unsigned fi = 0; fi < nf; fi++)
            for (unsigned bi = 0; bi < nb; bi++)
                for (unsigned ei = 0; ei < ne; ei++)
                    for (unsigned how = 0; how < 3; how++, idx++) {
                        if (pass == 0 && (fi + bi + ei + how) % stride != 0)
                            continue;
                        unsigned fb = pass == 0 ? 4 + fi : odd_f[fi];
                        unsigned bs = pass == 0 ? bsizes[bi] : odd_b[bi];
                        unsigned e = pass == 0 ? ei : 2 * ei;
                        uint64_t seed = cft_subseed(idx);
                        cft_rng r = cft_rng_make(seed);
                        /* Settings that a file must carry: kicks, sub-filter limits. */
                        unsigned kicks = idx % 7 == 3 ? (unsigned)(1 + cft_below(&r, 40)) : 0;
                        unsigned max_subs = e == 0             ? (idx % 5 == 1 ? 3 : 0)
                                            : how == FILL_OVER ? 2
                                            : idx % 4 == 1     ? 3 + (unsigned)(idx % 5)
                                                               : 0;
                        uint64_t cap = bs >= 100 ? 20 + cft_below(&r, 40) : 40 + cft_below(&r, 80);
                        cf_filter *f = make_filter(&cap, fb, bs, e, seed, kicks, max_subs);
                        if (!f)
                            continue;
                        char label[200];
                        snprintf(label, sizeof label,
                                 "round trip f %u b %u e %u cap %llu kicks %u max_subs %u %s, "
                                 "filter seed 0x%016llx",
                                 fb, bs, e, (unsigned long long)cap, kicks, max_subs,
                                 FILL_NAME[how], (unsigned long long)seed);
                        cft_context("%s", label);
                        keyset ks;
                        ks_init(&ks, idx);
                        fill(f, &ks, &r, (fill_kind)how, e, cap);
                        overfilled += how == FILL_OVER;
                        grown += how == FILL_MIXED && e > 0;
                        roundtrip(f, &ks, &r, label, idx, &tot);
                        ks_free(&ks);
                        cf_free(f);
                    }
    }
    printf("  round trips: %llu filters (%llu with stash entries, %llu with several "
           "sub-filters), %llu keys, %.2f s\n",
           (unsigned long long)tot.filters, (unsigned long long)tot.with_stash,
           (unsigned long long)tot.multi, (unsigned long long)tot.keys, cft_now() - t0);
    cft_context("round trip totals");
    CHECK(tot.with_stash >= overfilled); /* every overfilled filter, at least */
    CHECK(tot.multi >= grown);           /* every growing filter filled past its first */
    CHECK(overfilled >= 29 * 8 * 4 / stride && grown >= 29 * 8 * 3 / stride);
}

/* ------------------------------------------------------------------------------------ */
/* Small test files                                                                     */
/* ------------------------------------------------------------------------------------ */

typedef struct sample {
    const char *name;
    buf b;
} sample;

enum { N_SAMPLES = 6 };
static sample g_samples[N_SAMPLES];

static buf build_sample(unsigned which)
{
    cf_filter *f = NULL;
    cf_config c = {.capacity = 100, .seed = cft_subseed(1000 + which)};
    uint64_t n = 60;
    switch (which) {
    case 0: /* fixed, f 12 b 4 */
        break;
    case 1: /* growing, 3 sub-filters */
        c = (cf_config){.capacity = 20, .expansion = 2, .seed = cft_subseed(1001)};
        n = 200;
        break;
    case 2: /* fixed with a full stash */
        c = (cf_config){
            .capacity = 30, .bucket_size = 2, .fingerprint_bits = 8, .seed = cft_subseed(1002)};
        n = 1000;
        break;
    case 3: /* f 7 b 3: the last byte of the table has unused bits */
        c = (cf_config){
            .capacity = 10, .bucket_size = 3, .fingerprint_bits = 7, .seed = cft_subseed(1003)};
        n = 8;
        break;
    case 5: /* semi-sorted, f 13, growing and widening to 3 sub-filters */
        c = (cf_config){.capacity = 200,
                        .fingerprint_bits = 13,
                        .expansion = 2,
                        .seed = cft_subseed(1005),
                        .flags = CF_SEMI_SORT};
        n = 1000;
        break;
    default: /* growing at its sub-filter limit, with stash entries in sub-filter 1 */
        c = (cf_config){.capacity = 10,
                        .expansion = 1,
                        .max_sub_filters = 2,
                        .bucket_size = 1,
                        .fingerprint_bits = 9,
                        .seed = cft_subseed(1004)};
        n = 1000;
        break;
    }
    CHECK_ST(cf_new(&c, &f), CF_OK);
    uint8_t k[CFT_KEY_MAX];
    for (uint64_t i = 0; i < n; i++) {
        size_t len = cft_key(k, 500 + which, i);
        if ((which == 1 || which == 5) && cft_stats(f).sub_filters == 3)
            break;
        if (cf_add(f, k, len) == CF_FULL)
            break;
    }
    buf b = ser(f);
    cf_free(f);
    return b;
}

static void make_samples(void)
{
    static const char *const names[N_SAMPLES] = {"fixed f12 b4",
                                                 "growing 3 sub-filters",
                                                 "fixed with 8 stash entries",
                                                 "f7 b3 odd table bits",
                                                 "growing at limit, stash",
                                                 "semi-sorted f13, 3 widening sub-filters"};
    for (unsigned i = 0; i < N_SAMPLES; i++) {
        g_samples[i].name = names[i];
        g_samples[i].b = build_sample(i);
    }
    /* What each sample is for. */
    buf *b = &g_samples[1].b;
    CHECK_EQ_U(rd(b->p + H_NT, 4), 3);
    CHECK_EQ_U(g_samples[2].b.p[H_STASH], 8);
    b = &g_samples[3].b;
    uint64_t bits = rd(b->p + HDR, 8) * 3 * 7;
    CHECK_MSG(bits % 8 != 0, "sample 3: %llu table bits", (unsigned long long)bits);
    b = &g_samples[4].b;
    CHECK_EQ_U(rd(b->p + H_NT, 4), 2);
    CHECK(b->p[H_STASH] > 0);
    bool in_second = false;
    for (unsigned e = 0; e < b->p[H_STASH]; e++)
        in_second |= rd(b->p + HDR + 2 * DESC + ENTRY * e + 12, 4) == 1;
    CHECK(in_second);
    b = &g_samples[5].b;
    CHECK_EQ_U(rd(b->p + H_NT, 4), 3);
    CHECK_EQ_U(rd(b->p + H_FLAGS, 4), 3u); /* widening, semi-sorted */
    for (unsigned i = 0; i < N_SAMPLES; i++)
        printf("  sample %u (%s): %zu bytes, meta %llu bytes\n", i, g_samples[i].name,
               g_samples[i].b.n, (unsigned long long)meta_len_of(g_samples[i].b.p));
}

/* ------------------------------------------------------------------------------------ */
/* Refused input, through every reader                                                  */
/* ------------------------------------------------------------------------------------ */

enum {
    VIA_MEMORY = 1, /* cf_validate, cf_deserialize */
    VIA_FILE = 2,   /* cf_validate_file, cf_load, cf_open_mapped with CF_MAP_VERIFY */
    VIA_MAPPED = 4, /* cf_open_mapped without CF_MAP_VERIFY refuses it too */
    VIA_CHUNK = 8,  /* the header chunk made of it is refused */
    FORGED = 16,    /* the checksums are right: the reason must not be a checksum */
    VIA_ALL = 1 | 2 | 4 | 8,
};

static void check_reason(const char *why, unsigned how, const char *what)
{
    if (!CHECK_MSG(why != NULL && why != NOT_SET, "%s: no reason", what))
        return;
    CHECK_MSG(*why != '\0' && strchr(why, '\n') == NULL, "%s: reason \"%s\"", what, why);
    if (how & FORGED)
        CHECK_MSG(strstr(why, "checksum") == NULL, "%s: refused for \"%s\"", what, why);
}

/* b must be refused with `want` by the readers in `how`; nothing allocated. */
static void expect_refused(const uint8_t *p, size_t n, cf_status want, unsigned how,
                           const char *what)
{
    buf b = buf_copy(p, n);
    cft_alloc ta;
    cft_alloc_init(&ta);
    if (how & VIA_MEMORY) {
        const char *why = NOT_SET;
        CHECK_MSG(cf_validate(b.p, b.n, &why) == want, "%s: cf_validate gave %s, want %s", what,
                  cft_status_name(cf_validate(b.p, b.n, NULL)), cft_status_name(want));
        check_reason(why, how, what);
        cf_filter *out = SENTINEL;
        cf_status st = cf_deserialize(b.p, b.n, &ta.a, &out);
        CHECK_MSG(st == want, "%s: cf_deserialize gave %s", what, cft_status_name(st));
        CHECK(out == SENTINEL);
        if (out != SENTINEL)
            cf_free(out);
    }
    char path[PATH_MAX];
    dir_path(path, sizeof path, "refused.cf");
    if ((how & (VIA_FILE | VIA_MAPPED)) && CHECK(file_write(path, b.p, b.n))) {
        const char *why = NOT_SET;
        cf_status st = cf_validate_file(path, &why);
        CHECK_MSG(st == want, "%s: cf_validate_file gave %s", what, cft_status_name(st));
        check_reason(why, how, what);
        cf_filter *out = SENTINEL;
        st = cf_load(path, &ta.a, &out);
        CHECK_MSG(st == want, "%s: cf_load gave %s", what, cft_status_name(st));
        CHECK(out == SENTINEL);
        st = cf_open_mapped(path, CF_MAP_VERIFY, &ta.a, &out);
        CHECK_MSG(st == want, "%s: cf_open_mapped(CF_MAP_VERIFY) gave %s", what,
                  cft_status_name(st));
        CHECK(out == SENTINEL);
        if (how & VIA_MAPPED) {
            st = cf_open_mapped(path, 0, &ta.a, &out);
            CHECK_MSG(st == want, "%s: cf_open_mapped(0) gave %s", what, cft_status_name(st));
            CHECK(out == SENTINEL);
        } else {
            /* Damage in the tables, which only CF_MAP_VERIFY reads: the file opens, and
             * may answer wrongly but must not crash. */
            cft_alloc tm;
            cft_alloc_init(&tm);
            st = cf_open_mapped(path, 0, &tm.a, &out);
            if (CHECK_MSG(st == CF_OK, "%s: cf_open_mapped(0) gave %s", what,
                          cft_status_name(st))) {
                uint8_t k[CFT_KEY_MAX];
                for (uint64_t i = 0; i < 200; i++) {
                    size_t len = cft_key(k, 900, i);
                    (void)cf_contains(out, k, len);
                    (void)cf_count(out, k, len);
                }
                cf_free(out);
            }
            CHECK_ALLOC_CLEAN(&tm);
        }
        /* Reading /proc/self/maps is slow under ASan: one refusal in 16. */
        static unsigned calls_since;
        if (calls_since++ % 16 == 0)
            CHECK(count_mappings(path) <= 0);
    }
    uint64_t meta = n >= HDR ? meta_len_of(b.p) : 0;
    if ((how & VIA_CHUNK) && n >= HDR + SUM && meta + SUM <= n && meta >= HDR) {
        /* The header chunk: the meta section, then the file sum. */
        buf chunk = buf_copy(b.p, (size_t)meta + SUM);
        memcpy(chunk.p + meta, b.p + n - SUM, SUM);
        cf_filter *g = NULL;
        cf_status st = cf_load_chunk(&g, align64(meta), chunk.p, chunk.n, &ta.a);
        CHECK_MSG(st == want, "%s: header chunk gave %s", what, cft_status_name(st));
        CHECK(g == NULL);
        cf_free(g);
        buf_free(&chunk);
    }
    CHECK_MSG(ta.calls == 0, "%s: %llu allocations before refusing", what,
              (unsigned long long)ta.calls);
    CHECK_ALLOC_CLEAN(&ta);
    buf_free(&b);
}

/* b must be accepted by every reader. */
static void expect_ok(const uint8_t *p, size_t n, const char *what)
{
    buf b = buf_copy(p, n);
    const char *why = NOT_SET;
    CHECK_MSG(cf_validate(b.p, b.n, &why) == CF_OK, "%s: refused (%s)", what,
              why && why != NOT_SET ? why : "?");
    CHECK(why == NULL);
    cf_filter *out = NULL;
    if (CHECK_ST(cf_deserialize(b.p, b.n, NULL, &out), CF_OK)) {
        buf again = ser(out);
        CHECK_MSG(buf_eq(again, b), "%s: serializes differently", what);
        buf_free(&again);
        cf_free(out);
    }
    char path[PATH_MAX];
    dir_path(path, sizeof path, "accepted.cf");
    if (CHECK(file_write(path, b.p, b.n))) {
        CHECK_ST(cf_validate_file(path, NULL), CF_OK);
        out = NULL;
        if (CHECK_ST(cf_open_mapped(path, CF_MAP_VERIFY, NULL, &out), CF_OK))
            cf_free(out);
    }
    buf_free(&b);
}

static void test_truncation(void)
{
    for (unsigned s = 0; s < N_SAMPLES; s++) {
        buf b = g_samples[s].b;
        cft_context("truncation of sample %u (%s)", s, g_samples[s].name);
        for (size_t len = 0; len < b.n; len++) {
            char what[96];
            snprintf(what, sizeof what, "first %zu of %zu bytes", len, b.n);
            unsigned how = VIA_MEMORY | VIA_FILE | VIA_MAPPED;
            /* Files for every length of the first samples; a sample of lengths otherwise. */
            if (s >= 2 && len % 5 != 0 && len + 16 < b.n)
                how = VIA_MEMORY;
            expect_refused(b.p, len, CF_ECORRUPT, how, what);
        }
        /* NULL with length 0. */
        cf_filter *out = SENTINEL;
        CHECK_ST(cf_deserialize(NULL, 0, NULL, &out), CF_ECORRUPT);
        CHECK(out == SENTINEL);
        const char *why = NOT_SET;
        CHECK_ST(cf_validate(NULL, 0, &why), CF_ECORRUPT);
        check_reason(why, 0, "NULL, 0");
        /* Extra bytes after a whole file. */
        static const size_t extra[] = {1, 7, 8, 9, 63, 64, 65, 4096};
        for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
            for (unsigned fillv = 0; fillv < 2; fillv++) {
                buf x = {calloc(b.n + extra[i], 1), b.n + extra[i]};
                memcpy(x.p, b.p, b.n);
                if (fillv)
                    memset(x.p + b.n, 0xEE, extra[i]);
                char what[96];
                snprintf(what, sizeof what, "%zu extra bytes of %s", extra[i],
                         fillv ? "0xEE" : "zeros");
                expect_refused(x.p, x.n, CF_ECORRUPT, VIA_MEMORY | VIA_FILE | VIA_MAPPED, what);
                /* ... also with the file sum moved to the new end. */
                resum(x.p, x.n);
                expect_refused(x.p, x.n, CF_ECORRUPT, VIA_MEMORY | VIA_FILE | VIA_MAPPED, what);
                buf_free(&x);
            }
        expect_ok(b.p, b.n, "the sample itself");
    }
}

static void test_bit_flips(void)
{
    for (unsigned s = 0; s < N_SAMPLES; s++) {
        buf b = buf_copy(g_samples[s].b.p, g_samples[s].b.n);
        uint64_t meta = meta_len_of(b.p);
        cft_context("bit flips of sample %u (%s)", s, g_samples[s].name);
        uint64_t eversion = 0;
        for (size_t i = 0; i < b.n; i++)
            for (unsigned bit = 0; bit < 8; bit++) {
                b.p[i] ^= (uint8_t)(1u << bit);
                char what[96];
                snprintf(what, sizeof what, "bit %u of byte %zu flipped", bit, i);
                bool version = i == H_VERSION || i == H_VERSION + 1;
                /* The version: 2 -> 0 is corrupt, and so is 2 -> 3, a segmented file
                 * (its meta sum no longer matches; version 3 is this library's); any other
                 * is a newer version (one flip cannot make the retired version 1). */
                cf_status want =
                    version && !(i == H_VERSION && bit <= 1) ? CF_EVERSION : CF_ECORRUPT;
                eversion += want == CF_EVERSION;
                unsigned how = VIA_MEMORY;
                if (i < meta)
                    how |= VIA_MAPPED | VIA_CHUNK;
                /* Files for the meta section of the first samples and a sample of the rest. */
                if ((i < meta && s < 3) || i % 13 == 0 || i + SUM >= b.n)
                    how |= VIA_FILE;
                expect_refused(b.p, b.n, want, how, what);
                b.p[i] ^= (uint8_t)(1u << bit);
            }
        CHECK_EQ_U(eversion, 14);
        /* Random damage: 1 to 4 random bytes replaced. */
        cft_rng r = cft_rng_make(cft_subseed(2000 + s));
        for (uint64_t t = 0; t < cft_scaled(500); t++) {
            buf x = buf_copy(b.p, b.n);
            unsigned nbytes = 1 + (unsigned)cft_below(&r, 4);
            for (unsigned j = 0; j < nbytes; j++)
                x.p[cft_below(&r, b.n)] = (uint8_t)cft_next(&r);
            bool changed = memcmp(x.p, b.p, b.n) != 0;
            bool version = memcmp(x.p + H_VERSION, b.p + H_VERSION, 2) != 0;
            if (changed) {
                const char *why = NOT_SET;
                cf_status st = cf_validate(x.p, x.n, &why);
                CHECK_MSG(st == CF_ECORRUPT || (version && st == CF_EVERSION),
                          "random damage %llu: %s", (unsigned long long)t, cft_status_name(st));
                check_reason(why, 0, "random damage");
            }
            buf_free(&x);
        }
        expect_ok(b.p, b.n, "the sample after the flips");
        buf_free(&b);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Forged files                                                                         */
/* ------------------------------------------------------------------------------------ */

static buf patched(const buf base, size_t at, unsigned width, uint64_t value)
{
    buf x = buf_copy(base.p, base.n);
    if (CHECK(at < x.n && width <= x.n - at)) { /* inside the sample, or the test is wrong */
        wr(x.p + at, width, value);
        resum(x.p, x.n);
    }
    return x;
}

static void refuse_patch(const buf base, size_t at, unsigned width, uint64_t value, cf_status want,
                         unsigned how, const char *what)
{
    buf x = patched(base, at, width, value);
    expect_refused(x.p, x.n, want, how | FORGED, what);
    buf_free(&x);
}

static void accept_patch(const buf base, size_t at, unsigned width, uint64_t value,
                         const char *what)
{
    cft_context("forged, valid: %s", what);
    buf x = patched(base, at, width, value);
    expect_ok(x.p, x.n, what);
    buf_free(&x);
}

/* A semi-sorted file whose bucket has a code past the last (3875), or values out of order
 * with the same number of items, is refused by the table checks (FORMAT.md, "Semi-sorted
 * tables"); the checksums are right. */
static void refuse_semi_tables(const buf sm)
{
    const unsigned T = VIA_MEMORY | VIA_FILE;
    uint64_t off = rd(sm.p + HDR + 16, 8), m = rd(sm.p + HDR, 8);
    buf x = buf_copy(sm.p, sm.n);
    /* Bucket 0's code, 12 bits at the table's start. */
    wr(x.p + off, 2, (rd(x.p + off, 2) & ~UINT64_C(0xFFF)) | 0xFFFu);
    resum(x.p, x.n);
    expect_refused(x.p, x.n, CF_ECORRUPT, T | FORGED, "semi-sorted code 4095");
    buf_free(&x);
    /* Two values of one prefix with their suffixes swapped: the same items, out of order. */
    unsigned f = sm.p[H_F], w = f - 4;
    bool done = false;
    for (uint64_t i = 0; i < m && !done; i++) {
        uint32_t v[255];
        if (!CHECK(bucket_slots(sm.p, 0, sm.p + off, i, v)))
            break;
        for (unsigned j = 0; j + 1 < 4 && !done; j++) {
            if (v[j] == 0 || v[j] == v[j + 1] || v[j] >> w != v[j + 1] >> w)
                continue;
            x = buf_copy(sm.p, sm.n);
            uint64_t bit = i * 4 * (f - 1) + 12 + (uint64_t)j * w;
            for (unsigned k = 0; k < 2 * w; k++, bit++) { /* suffixes j and j + 1 swapped */
                uint32_t from = k < w ? v[j + 1] >> k : v[j] >> (k - w);
                uint8_t *p = x.p + off + bit / 8;
                *p = (uint8_t)((*p & ~(1u << (bit % 8))) | (from & 1u) << (bit % 8));
            }
            resum(x.p, x.n);
            expect_refused(x.p, x.n, CF_ECORRUPT, T | FORGED, "semi-sorted values out of order");
            buf_free(&x);
            done = true;
        }
    }
    CHECK_MSG(done, "no bucket of the semi-sorted sample has two values of one prefix");
}

static void test_forged(void)
{
    const buf fx = g_samples[0].b;            /* fixed */
    const buf gr = g_samples[1].b;            /* growing, 3 sub-filters */
    const buf st8 = g_samples[2].b;           /* fixed, 8 stash entries */
    const buf odd = g_samples[3].b;           /* unused bits after the last slot */
    const buf lim = g_samples[4].b;           /* growing, stash in sub-filter 1 */
    const unsigned M = VIA_ALL;               /* refused by the meta checks */
    const unsigned T = VIA_MEMORY | VIA_FILE; /* refused by the table checks only */
    cft_context("forged files");

    /* Controls: changes that leave a valid file must be accepted (so that the refusals
     * below are the range checks at work, not broken checksums). */
    accept_patch(fx, H_SEED, 8, 12345, "another seed");
    accept_patch(fx, H_CAP, 8, 1, "capacity 1");
    accept_patch(fx, H_CAP, 8, UINT64_MAX, "capacity 2^64-1");
    accept_patch(fx, H_KICKS, 2, 65535, "max kicks 65535");
    accept_patch(fx, H_KICKS, 2, 1, "max kicks 1");
    accept_patch(fx, H_EXP, 4, 5, "a fixed filter turned growing");
    accept_patch(fx, H_EXP, 4, 32768, "expansion 32768");
    accept_patch(fx, H_MAXT, 4, 65536, "max sub-filters 65536");
    accept_patch(fx, H_MAXT, 4, 1, "max sub-filters 1");
    accept_patch(gr, H_MAXT, 4, 3, "max sub-filters = sub-filters");
    {
        forge g; /* a stash entry dropped: a valid filter with 7 */
        CHECK(forge_parse(&g, st8.p, st8.n));
        buf x = forge_emit(&g);
        CHECK_MSG(buf_eq(x, st8), "the independent writer differs");
        buf_free(&x);
        g.ns = 7;
        x = forge_emit(&g);
        CHECK_EQ_U(x.n, st8.n);
        expect_ok(x.p, x.n, "a stash entry dropped");
        buf_free(&x);
    }

    /* The header. */
    refuse_patch(fx, H_F, 1, 3, CF_ECORRUPT, M, "fingerprint bits 3");
    refuse_patch(fx, H_F, 1, 33, CF_ECORRUPT, M, "fingerprint bits 33");
    refuse_patch(fx, H_F, 1, 0, CF_ECORRUPT, M, "fingerprint bits 0");
    refuse_patch(fx, H_F, 1, 255, CF_ECORRUPT, M, "fingerprint bits 255");
    refuse_patch(fx, H_B, 1, 0, CF_ECORRUPT, M, "bucket size 0");
    refuse_patch(fx, H_KICKS, 2, 0, CF_ECORRUPT, M, "max kicks 0");
    refuse_patch(fx, H_EXP, 4, 32769, CF_ECORRUPT, M, "expansion 32769");
    refuse_patch(gr, H_EXP, 4, 32769, CF_ECORRUPT, M, "growing, expansion 32769");
    refuse_patch(fx, H_EXP, 4, UINT32_MAX, CF_ECORRUPT, M, "expansion 2^32-1");
    refuse_patch(gr, H_EXP, 4, 0, CF_ECORRUPT, M, "expansion 0 with 3 sub-filters");
    refuse_patch(lim, H_EXP, 4, 0, CF_ECORRUPT, M, "expansion 0 with 2 sub-filters");
    refuse_patch(gr, H_EXP, 4, 3, CF_ECORRUPT, M, "expansion 3 for tables grown by 2");
    refuse_patch(fx, H_NT, 4, 0, CF_ECORRUPT, M, "0 sub-filters");
    refuse_patch(fx, H_NT, 4, 65537, CF_ECORRUPT, M, "65537 sub-filters");
    refuse_patch(gr, H_MAXT, 4, 2, CF_ECORRUPT, M, "3 sub-filters, max 2");
    refuse_patch(fx, H_MAXT, 4, 0, CF_ECORRUPT, M, "max sub-filters 0");
    refuse_patch(fx, H_MAXT, 4, 65537, CF_ECORRUPT, M, "max sub-filters 65537");
    refuse_patch(fx, H_CAP, 8, 0, CF_ECORRUPT, M, "capacity 0");
    refuse_patch(fx, H_WIDEN, 1, 1, CF_ECORRUPT, M, "a widening without its flag");
    refuse_patch(fx, H_WIDEN + 1, 1, 0x80, CF_ECORRUPT, M, "a widening without its flag (2)");
    for (unsigned i = 0; i < 4; i++) {
        char what[64];
        snprintf(what, sizeof what, "reserved byte %u", H_RES2 + i);
        refuse_patch(fx, H_RES2 + i, 1, 1u << i, CF_ECORRUPT, M, what);
    }
    refuse_patch(fx, H_HLEN, 2, 65, CF_ECORRUPT, M, "header length 65");
    refuse_patch(fx, H_HLEN, 2, 0, CF_ECORRUPT, M, "header length 0");
    refuse_patch(fx, H_MAGIC, 1, 0x88, CF_ECORRUPT, M, "magic");
    refuse_patch(fx, H_MAGIC + 7, 1, '\r', CF_ECORRUPT, M, "magic, newline");
    refuse_patch(fx, H_VERSION, 2, 0, CF_ECORRUPT, M, "version 0");
    refuse_patch(fx, H_VERSION, 2, 1, CF_EVERSION, M, "version 1");
    {
        /* The retired version says so, so that its owner knows to rebuild the filter. */
        buf v1 = patched(fx, H_VERSION, 2, 1);
        const char *why = NULL;
        CHECK_ST(cf_validate(v1.p, v1.n, &why), CF_EVERSION);
        CHECK_MSG(why && strstr(why, "version 1") && strstr(why, "rebuild"), "reason: %s",
                  why ? why : "(none)");
        buf_free(&v1);
    }
    refuse_patch(fx, H_VERSION, 2, 3, CF_ECORRUPT, M, "version 3 without segments");
    refuse_patch(fx, H_VERSION, 2, 4, CF_EVERSION, M, "version 4");
    refuse_patch(fx, H_VERSION, 2, 0xFFFF, CF_EVERSION, M, "version 65535");
    for (unsigned bit = 3; bit < 32; bit++) {
        char what[64];
        snprintf(what, sizeof what, "flag bit %u", bit);
        refuse_patch(fx, H_FLAGS, 4, UINT64_C(1) << bit, CF_EVERSION, M, what);
    }
    /* Bit 2 makes it a windowed file, whose other fields this one's are not. */
    refuse_patch(fx, H_FLAGS, 4, 4, CF_ECORRUPT, M, "windowed flag on a plain file");
    /* Bit 1 says the buckets are semi-sorted, 4 (f - 1) bits each: the plain tables'
     * lengths disagree, and other bucket sizes than 4 have no such layout. */
    refuse_patch(fx, H_FLAGS, 4, 2, CF_ECORRUPT, M, "semi-sorted flag on plain tables");
    refuse_patch(st8, H_FLAGS, 4, 2, CF_ECORRUPT, M, "semi-sorted flag with 2-slot buckets");
    refuse_semi_tables(g_samples[5].b);
    /* A wider sub-filter's fingerprint whose low f bits are 0 (no writer makes one):
     * compaction would narrow it to an empty slot that is still counted, and the filter
     * could no longer be saved. Plain and semi-sorted tables, each wider sub-filter. */
    for (unsigned which = 1; which <= 5; which += 4) {
        const buf w = g_samples[which].b;
        for (unsigned k = 1; k < 3; k++) {
            char what[96];
            snprintf(what, sizeof what, "%s: sub-filter %u, a fingerprint's low %u bits 0",
                     g_samples[which].name, k, w.p[H_F]);
            buf x = buf_copy(w.p, w.n);
            if (CHECK_MSG(forge_low_bits_zero(x.p, x.n, k), "%s: not forged", what)) {
                resum(x.p, x.n);
                expect_refused(x.p, x.n, CF_ECORRUPT, T | FORGED, what);
            }
            buf_free(&x);
        }
    }
    /* Bit 0 says the sub-filters widen, by the amount at byte 46: neither without the
     * other, and never for a fixed filter. */
    refuse_patch(fx, H_FLAGS, 4, 1, CF_ECORRUPT, M, "widening flag without a widening");

    /* Hash id 2 is RedisBloom's layout: only for 8-bit fingerprints and seed 0. */
    refuse_patch(fx, H_HASH, 1, 2, CF_ECORRUPT, M, "hash id 2 on a seeded 12-bit filter");
    refuse_patch(fx, H_HASH, 1, 4, CF_EVERSION, M, "hash id 4");
    refuse_patch(fx, H_HASH, 1, 0, CF_EVERSION, M, "hash id 0");
    refuse_patch(fx, H_HASH, 1, 255, CF_EVERSION, M, "hash id 255");
    refuse_patch(fx, H_STASH, 1, 9, CF_ECORRUPT, M, "stash count 9, no room for it");
    /* The total length. */
    refuse_patch(fx, H_TOTAL, 8, fx.n + 64, CF_ECORRUPT, M, "total + 64");
    refuse_patch(fx, H_TOTAL, 8, fx.n - 1, CF_ECORRUPT, M, "total - 1");
    refuse_patch(fx, H_TOTAL, 8, 0, CF_ECORRUPT, M, "total 0");
    {
        /* The total agrees with the length, not with the tables. */
        buf x = {calloc(fx.n + 64, 1), fx.n + 64};
        memcpy(x.p, fx.p, fx.n - SUM);
        wr(x.p + H_TOTAL, 8, x.n);
        resum(x.p, x.n);
        expect_refused(x.p, x.n, CF_ECORRUPT, M | FORGED,
                       "64 more bytes of padding, total says so");
        buf_free(&x);
        x = buf_copy(fx.p, fx.n - 64);
        memcpy(x.p + x.n - SUM, fx.p + fx.n - SUM, SUM);
        wr(x.p + H_TOTAL, 8, x.n);
        resum(x.p, x.n);
        expect_refused(x.p, x.n, CF_ECORRUPT, M | FORGED, "64 bytes less, total says so");
        buf_free(&x);
    }

    /* Descriptors. */
    uint64_t b0 = rd(fx.p + HDR, 8), items0 = rd(fx.p + HDR + 8, 8);
    uint64_t slots0 = b0 * fx.p[H_B];
    refuse_patch(fx, HDR, 8, b0 + 1, CF_ECORRUPT, M, "odd bucket count");
    refuse_patch(fx, HDR, 8, b0 - 1, CF_ECORRUPT, M, "odd bucket count, smaller");
    refuse_patch(fx, HDR, 8, 0, CF_ECORRUPT, M, "0 buckets");
    refuse_patch(fx, HDR, 8, b0 + 2, CF_ECORRUPT, M, "buckets disagree with the length");
    refuse_patch(fx, HDR, 8, UINT64_C(1) << 62, CF_ECORRUPT, M, "2^62 buckets");
    refuse_patch(fx, HDR + 8, 8, slots0 + 1, CF_ECORRUPT, M, "items > slots");
    refuse_patch(fx, HDR + 8, 8, UINT64_MAX, CF_ECORRUPT, M, "items 2^64-1");
    refuse_patch(fx, HDR + 8, 8, items0 + 1, CF_ECORRUPT, T, "items + 1");
    refuse_patch(fx, HDR + 8, 8, items0 - 1, CF_ECORRUPT, T, "items - 1");
    refuse_patch(fx, HDR + 8, 8, slots0, CF_ECORRUPT, T, "items = slots");
    refuse_patch(fx, HDR + 16, 8, rd(fx.p + HDR + 16, 8) + 64, CF_ECORRUPT, M, "offset + 64");
    refuse_patch(fx, HDR + 16, 8, rd(fx.p + HDR + 16, 8) - 8, CF_ECORRUPT, M, "offset - 8");
    refuse_patch(fx, HDR + 16, 8, UINT64_MAX, CF_ECORRUPT, M, "offset 2^64-1");
    refuse_patch(fx, HDR + 24, 8, rd(fx.p + HDR + 24, 8) + 1, CF_ECORRUPT, M, "length + 1");
    refuse_patch(fx, HDR + 24, 8, rd(fx.p + HDR + 24, 8) - 1, CF_ECORRUPT, M, "length - 1");
    refuse_patch(fx, HDR + 24, 8, UINT64_MAX, CF_ECORRUPT, M, "length 2^64-1");
    uint64_t g0 = rd(gr.p + HDR, 8), g1 = rd(gr.p + HDR + DESC, 8);
    CHECK_EQ_U(g1, 2 * g0);
    refuse_patch(gr, HDR + DESC, 8, g1 + 2, CF_ECORRUPT, M, "sub-filter 1 not 2 x sub-filter 0");
    refuse_patch(gr, HDR + DESC, 8, g0, CF_ECORRUPT, M, "sub-filter 1 as big as sub-filter 0");
    refuse_patch(gr, HDR + 2 * DESC, 8, 3 * g1, CF_ECORRUPT, M, "sub-filter 2 3 x sub-filter 1");
    {
        /* An item moved from one sub-filter to another: the total is right. */
        buf x = buf_copy(gr.p, gr.n);
        wr(x.p + HDR + 8, 8, rd(x.p + HDR + 8, 8) - 1);
        wr(x.p + HDR + 2 * DESC + 8, 8, rd(x.p + HDR + 2 * DESC + 8, 8) + 1);
        resum(x.p, x.n);
        expect_refused(x.p, x.n, CF_ECORRUPT, T | FORGED, "an item moved between sub-filters");
        buf_free(&x);
    }
    /* Sub-filters that are each consistent, but not what growth makes: all three the same
     * size, rebuilt with the independent writer. */
    {
        forge g;
        CHECK(forge_parse(&g, gr.p, gr.n));
        g.buckets[1] = g.buckets[0];
        g.tlen[1] = g.tlen[0];
        g.items[1] = 0;
        uint8_t *zeros = calloc((size_t)g.tlen[0], 1);
        g.tab[1] = zeros;
        buf x = forge_emit(&g);
        expect_refused(x.p, x.n, CF_ECORRUPT, M | FORGED, "sub-filter 1 not grown, layout right");
        buf_free(&x);
        free(zeros);
    }

    /* Padding and unused bits. */
    uint64_t meta = meta_len_of(fx.p), t0 = rd(fx.p + HDR + 16, 8);
    uint64_t tend = t0 + rd(fx.p + HDR + 24, 8);
    CHECK(align64(meta) > meta && align64(tend) > tend);
    refuse_patch(fx, (size_t)meta, 1, 1, CF_ECORRUPT, T, "padding after the meta section");
    refuse_patch(fx, (size_t)t0 - 1, 1, 0x80, CF_ECORRUPT, T, "padding before table 0");
    refuse_patch(fx, (size_t)tend, 1, 1, CF_ECORRUPT, T, "padding after table 0");
    refuse_patch(fx, fx.n - SUM - 1, 1, 0x80, CF_ECORRUPT, T, "padding before the file sum");
    uint64_t gt1 = rd(gr.p + HDR + DESC + 16, 8);
    uint64_t gend0 = rd(gr.p + HDR + 16, 8) + rd(gr.p + HDR + 24, 8);
    if (CHECK(gt1 > gend0))
        refuse_patch(gr, (size_t)gt1 - 1, 1, 1, CF_ECORRUPT, T, "padding between tables");
    {
        uint64_t bits = rd(odd.p + HDR, 8) * odd.p[H_B] * odd.p[H_F];
        uint64_t last = rd(odd.p + HDR + 16, 8) + bits / 8;
        unsigned used = (unsigned)(bits % 8);
        for (unsigned bit = used; bit < 8; bit++) {
            char what[64];
            snprintf(what, sizeof what, "unused bit %u of the last table byte", bit);
            buf x = buf_copy(odd.p, odd.n);
            x.p[last] = (uint8_t)(x.p[last] | (1u << bit));
            resum(x.p, x.n);
            expect_refused(x.p, x.n, CF_ECORRUPT, T | FORGED, what);
            buf_free(&x);
        }
    }

    /* Stash entries. */
    {
        size_t e0 = HDR + DESC * 1; /* entry 0 of the fixed sample */
        unsigned fb = st8.p[H_F];
        uint64_t m0 = rd(st8.p + HDR, 8);
        refuse_patch(st8, e0 + 8, 4, 0, CF_ECORRUPT, M, "stash fingerprint 0");
        refuse_patch(st8, e0 + 8, 4, UINT64_C(1) << fb, CF_ECORRUPT, M, "stash fingerprint > mask");
        refuse_patch(st8, e0 + 8, 4, UINT32_MAX, CF_ECORRUPT, M, "stash fingerprint 2^32-1");
        refuse_patch(st8, e0 + 12, 4, 1, CF_ECORRUPT, M, "stash sub-filter 1 of 1");
        refuse_patch(st8, e0 + 12, 4, UINT32_MAX, CF_ECORRUPT, M, "stash sub-filter 2^32-1");
        refuse_patch(st8, e0, 8, m0, CF_ECORRUPT, M, "stash bucket = buckets");
        refuse_patch(st8, e0, 8, UINT64_MAX, CF_ECORRUPT, M, "stash bucket 2^64-1");
        size_t e7 = e0 + 7 * ENTRY;
        refuse_patch(st8, e7 + 8, 4, 0, CF_ECORRUPT, M, "last stash entry, fingerprint 0");
        size_t l0 = HDR + DESC * 2; /* entry 0 of the growing sample */
        refuse_patch(lim, l0 + 12, 4, 2, CF_ECORRUPT, M, "stash sub-filter 2 of 2");
        uint64_t lb1 = rd(lim.p + HDR + DESC, 8);
        refuse_patch(lim, l0, 8, lb1, CF_ECORRUPT, M, "stash bucket = buckets, sub-filter 1");
        accept_patch(lim, l0, 8, lb1 - 1, "stash bucket moved to the last bucket");
        /* An entry of a wider sub-filter whose fingerprint's low f bits are 0. */
        for (unsigned e = 0; e < lim.p[H_STASH]; e++) {
            size_t at = l0 + ENTRY * e;
            unsigned k = (unsigned)rd(lim.p + at + 12, 4), fl = lim.p[H_F];
            if (k == 0 || !CHECK(width_of(lim.p, k) > fl))
                continue;
            uint64_t fp = rd(lim.p + at + 8, 4) & ~((UINT64_C(1) << fl) - 1);
            refuse_patch(lim, at + 8, 4, fp ? fp : UINT64_C(1) << fl, CF_ECORRUPT, M,
                         "stash fingerprint of sub-filter 1, low f bits 0");
            accept_patch(lim, at + 8, 4, (fp ? fp : UINT64_C(1) << fl) | 1u,
                         "stash fingerprint of sub-filter 1, low bit 1");
            break;
        }
    }
    {
        /* Nine stash entries, otherwise perfectly laid out. */
        forge g;
        CHECK(forge_parse(&g, st8.p, st8.n));
        CHECK_EQ_U(g.ns, 8);
        g.s_bucket[8] = g.s_bucket[0];
        g.s_fp[8] = g.s_fp[0];
        g.s_table[8] = g.s_table[0];
        g.ns = 9;
        buf x = forge_emit(&g);
        CHECK_EQ_U(x.n, st8.n);
        expect_refused(x.p, x.n, CF_ECORRUPT, M | FORGED, "9 stash entries");
        buf_free(&x);
        g.ns = 16;
        for (unsigned e = 9; e < 16; e++) {
            g.s_bucket[e] = g.s_bucket[0];
            g.s_fp[e] = g.s_fp[0];
            g.s_table[e] = 0;
        }
        x = forge_emit(&g);
        expect_refused(x.p, x.n, CF_ECORRUPT, M | FORGED, "16 stash entries");
        buf_free(&x);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Allocation failures                                                                  */
/* ------------------------------------------------------------------------------------ */

/* Write b into a FIFO from a child process; returns its pid (or -1). */
static pid_t fifo_writer(const char *path, const buf b)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    alarm(60); /* a safety net should the reader never come */
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        _exit(3);
    size_t off = 0;
    while (off < b.n) {
        ssize_t w = write(fd, b.p + off, b.n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(4);
        off += (size_t)w;
    }
    close(fd);
    _exit(0);
}

static int wait_child(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

typedef enum { R_DESERIALIZE, R_LOAD, R_LOAD_FIFO, R_DESERIALIZE_CC, R_LOAD_CC, R_MAPPED } reader;

static const char *const READER_NAME[] = {"cf_deserialize",
                                          "cf_load",
                                          "cf_load (FIFO)",
                                          "cf_deserialize_flags (concurrent)",
                                          "cf_load_flags (concurrent)",
                                          "cf_open_mapped"};

static cf_status read_with(reader rd_kind, const buf b, const char *path, cft_alloc *ta,
                           cf_filter **out)
{
    switch (rd_kind) {
    case R_DESERIALIZE:
        return cf_deserialize(b.p, b.n, &ta->a, out);
    case R_LOAD:
        return cf_load(path, &ta->a, out);
    case R_LOAD_FIFO: {
        pid_t pid = fifo_writer(path, b);
        if (!CHECK(pid > 0))
            return CF_EIO;
        cf_status st = cf_load(path, &ta->a, out);
        int rc = wait_child(pid);
        if (st == CF_OK)
            CHECK_EQ_I(rc, 0);
        return st;
    }
    case R_DESERIALIZE_CC:
        return cf_deserialize_flags(b.p, b.n, CF_CONCURRENT, &ta->a, out);
    case R_LOAD_CC:
        return cf_load_flags(path, CF_CONCURRENT, &ta->a, out);
    case R_MAPPED:
        return cf_open_mapped(path, CF_MAP_VERIFY, &ta->a, out);
    }
    return CF_EINVAL;
}

static void test_alloc_failures(void)
{
    char path[PATH_MAX], fifo[PATH_MAX];
    dir_path(path, sizeof path, "alloc.cf");
    dir_path(fifo, sizeof fifo, "alloc.fifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    /* A bigger file too, so that reading a FIFO grows its buffer a few times. */
    cf_filter *big = NULL;
    cf_config bc = {.capacity = 60000, .expansion = 2, .seed = cft_subseed(3)};
    CHECK_ST(cf_new(&bc, &big), CF_OK);
    uint8_t k[CFT_KEY_MAX];
    for (uint64_t i = 0; i < 70000; i++)
        cf_add(big, k, cft_key(k, 77, i));
    buf bigb = ser(big);
    cf_free(big);
    const buf files[3] = {g_samples[1].b, g_samples[2].b, bigb};
    for (unsigned fi = 0; fi < 3; fi++) {
        const buf b = files[fi];
        CHECK(file_write(path, b.p, b.n));
        for (unsigned rk = R_DESERIALIZE; rk <= R_MAPPED; rk++)
            for (unsigned persist = 0; persist < 2; persist++) {
                cft_context("allocation failures: %s, file %u, %s", READER_NAME[rk], fi,
                            persist ? "persistent" : "single");
                const char *p = rk == R_LOAD_FIFO ? fifo : path;
                uint64_t n;
                bool done = false;
                for (n = 1; n < 100 && !done; n++) {
                    cft_alloc ta;
                    cft_alloc_init(&ta);
                    cft_alloc_arm(&ta, n, persist);
                    cf_filter *out = SENTINEL;
                    cf_status st = read_with((reader)rk, b, p, &ta, &out);
                    if (st == CF_OK) {
                        CHECK_MSG(ta.failures == 0, "CF_OK although allocation %llu failed",
                                  (unsigned long long)n);
                        buf again = ser(out);
                        CHECK(buf_eq(again, b));
                        buf_free(&again);
                        cf_free(out);
                        done = true;
                    } else {
                        CHECK_MSG(st == CF_ENOMEM, "allocation %llu failing: %s",
                                  (unsigned long long)n, cft_status_name(st));
                        CHECK(out == SENTINEL);
                    }
                    CHECK_ALLOC_CLEAN(&ta);
                    if (rk != R_LOAD_FIFO)
                        CHECK(count_mappings(path) <= 0);
                }
                CHECK(done);
                if (fi == 0 && persist == 0)
                    printf("  %-34s CF_ENOMEM for N = 1..%llu, then success\n", READER_NAME[rk],
                           (unsigned long long)(n - 2));
            }
    }
    buf_free(&bigb);
    unlink(fifo);

    /* cf_save: the target keeps its old bytes, no temporary file stays. */
    cft_context("allocation failures: cf_save");
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_filter *f = NULL;
    cf_config c = {.capacity = 500, .seed = cft_subseed(9), .allocator = &ta.a};
    CHECK_ST(cf_new(&c, &f), CF_OK);
    CHECK_ST(cf_add(f, "x", 1), CF_OK);
    const buf old = g_samples[0].b;
    CHECK(file_write(path, old.p, old.n));
    uint64_t n;
    for (n = 1; n < 100; n++) {
        cft_alloc_arm(&ta, n, false);
        uint64_t live = ta.live;
        cf_status st = cf_save(f, path);
        cft_alloc_disarm(&ta);
        CHECK_EQ_U(ta.live, live);
        CHECK_EQ_U(count_temps(g_dir), 0);
        if (st == CF_OK)
            break;
        CHECK_ST(st, CF_ENOMEM);
        buf now = file_read(path);
        CHECK_MSG(buf_eq(now, old), "cf_save failing allocation %llu changed the file",
                  (unsigned long long)n);
        buf_free(&now);
    }
    CHECK(n > 1);
    buf want = ser(f);
    buf now = file_read(path);
    CHECK(buf_eq(now, want));
    buf_free(&now);
    buf_free(&want);
    cf_free(f);
    CHECK_ALLOC_CLEAN(&ta);
    unlink(path);
}

/* ------------------------------------------------------------------------------------ */
/* Files                                                                                */
/* ------------------------------------------------------------------------------------ */

static unsigned mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0xFFFFu;
}

static void test_files(void)
{
    cft_context("files");
    char path[PATH_MAX], other[PATH_MAX], sub[PATH_MAX];
    dir_path(path, sizeof path, "f.cf");
    dir_path(other, sizeof other, "other.cf");
    dir_path(sub, sizeof sub, "sub");
    cf_filter *f = NULL;
    cf_config c = {.capacity = 1000, .expansion = 2, .seed = cft_subseed(77)};
    CHECK_ST(cf_new(&c, &f), CF_OK);
    uint8_t k[CFT_KEY_MAX];
    for (uint64_t i = 0; i < 3000; i++)
        CHECK_ST(cf_add(f, k, cft_key(k, 5, i)), CF_OK);
    buf b = ser(f);

    /* New files: 0666 less the umask. */
    mode_t old_mask = umask(022);
    unlink(path);
    CHECK_ST(cf_save(f, path), CF_OK);
    CHECK_EQ_U(mode_of(path), 0644);
    unlink(path);
    umask(077);
    CHECK_ST(cf_save(f, path), CF_OK);
    CHECK_EQ_U(mode_of(path), 0600);
    unlink(path);
    umask(0);
    CHECK_ST(cf_save(f, path), CF_OK);
    CHECK_EQ_U(mode_of(path), 0666);
    umask(022);
    /* An existing file keeps its permissions. */
    static const unsigned modes[] = {0640, 0604, 0400, 0666, 0700};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        CHECK(chmod(path, (mode_t)modes[i]) == 0);
        CHECK_ST(cf_save(f, path), CF_OK);
        CHECK_EQ_U(mode_of(path), modes[i]);
        CHECK_EQ_U(count_temps(g_dir), 0);
    }
    umask(old_mask);
    buf fb = file_read(path);
    CHECK(buf_eq(fb, b));
    buf_free(&fb);
    /* Saving over a file of other contents replaces it whole. */
    CHECK(file_write(other, "garbage that is longer than nothing", 35));
    CHECK_ST(cf_save(f, other), CF_OK);
    fb = file_read(other);
    CHECK(buf_eq(fb, b));
    buf_free(&fb);
    cf_filter *g = SENTINEL;
    CHECK_ST(cf_load(path, NULL, &g), CF_OK);
    if (g != SENTINEL) {
        buf gb = ser(g);
        CHECK(buf_eq(gb, b));
        buf_free(&gb);
        cf_free(g);
    }
    const char *why = NOT_SET;
    CHECK_ST(cf_validate_file(path, &why), CF_OK);
    CHECK(why == NULL);

    /* A relative path: the temporary file and the sync are in the current directory. */
    int cwd = open(".", O_RDONLY | O_DIRECTORY);
    if (CHECK(cwd >= 0) && CHECK(chdir(g_dir) == 0)) {
        CHECK_ST(cf_save(f, "relative.cf"), CF_OK);
        g = NULL;
        CHECK_ST(cf_load("relative.cf", NULL, &g), CF_OK);
        cf_free(g);
        CHECK_EQ_U(count_temps("."), 0);
        unlink("relative.cf");
        CHECK(fchdir(cwd) == 0);
    }
    if (cwd >= 0)
        close(cwd);
    /* A long file name (valid: 240 < 255 bytes): saved, or refused with nothing left. */
    {
        char name[241], longp[PATH_MAX];
        memset(name, 'n', 240);
        name[240] = '\0';
        dir_path(longp, sizeof longp, name);
        errno = 0;
        cf_status ls = cf_save(f, longp);
        int e = errno;
        if (ls == CF_OK) {
            g = NULL;
            CHECK_ST(cf_load(longp, NULL, &g), CF_OK);
            cf_free(g);
            unlink(longp);
        } else {
            CHECK_ST(ls, CF_EIO);
            CHECK(e != 0);
            CHECK(access(longp, F_OK) != 0);
            printf("  a file name of 240 bytes: CF_EIO (%s)\n", strerror(e));
        }
        CHECK_EQ_U(count_temps(g_dir), 0);
    }

    /* Saving where it cannot. */
    char nodir[PATH_MAX];
    dir_path(nodir, sizeof nodir, "no/such/dir/f.cf");
    errno = 0;
    CHECK_ST(cf_save(f, nodir), CF_EIO);
    CHECK_EQ_I(errno, ENOENT);
    CHECK(mkdir(sub, 0700) == 0);
    errno = 0;
    CHECK_ST(cf_save(f, sub), CF_EIO);
    CHECK_EQ_I(errno, EISDIR);
    struct stat st;
    CHECK(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));
    char slash[PATH_MAX + 1];
    snprintf(slash, sizeof slash, "%s/", sub);
    errno = 0;
    CHECK_ST(cf_save(f, slash), CF_EIO);
    CHECK(errno != 0);
    CHECK_EQ_U(count_temps(g_dir), 0);
    CHECK_EQ_U(count_temps(sub), 0);
    CHECK(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));
    /* A write that fails halfway (the file size limit): the old file stays. */
    {
        CHECK(file_write(other, g_samples[0].b.p, g_samples[0].b.n));
        struct rlimit rl, low;
        void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
        if (CHECK(getrlimit(RLIMIT_FSIZE, &rl) == 0)) {
            low = rl;
            low.rlim_cur = 1000;
            if (CHECK(b.n > 1000) && CHECK(setrlimit(RLIMIT_FSIZE, &low) == 0)) {
                errno = 0;
                cf_status s = cf_save(f, other);
                int e = errno;
                setrlimit(RLIMIT_FSIZE, &rl);
                CHECK_ST(s, CF_EIO);
                CHECK_EQ_I(e, EFBIG);
            }
        }
        signal(SIGXFSZ, old_handler);
        fb = file_read(other);
        CHECK(buf_eq(fb, g_samples[0].b));
        buf_free(&fb);
        CHECK_EQ_U(count_temps(g_dir), 0);
    }

    /* Loading what is not there, or not a filter. */
    char missing[PATH_MAX], empty[PATH_MAX], junk[PATH_MAX];
    dir_path(missing, sizeof missing, "missing.cf");
    dir_path(empty, sizeof empty, "empty.cf");
    dir_path(junk, sizeof junk, "junk.cf");
    CHECK(file_write(empty, "", 0));
    static const char junk_text[] =
        "this is not a cuckoo filter, but it is long enough to have a header";
    CHECK(file_write(junk, junk_text, strlen(junk_text)));
    cf_filter *out = SENTINEL;
    errno = 0;
    CHECK_ST(cf_load(missing, NULL, &out), CF_EIO);
    CHECK_EQ_I(errno, ENOENT);
    errno = 0;
    CHECK_ST(cf_load(sub, NULL, &out), CF_EIO);
    CHECK_EQ_I(errno, EISDIR);
    CHECK_ST(cf_load(empty, NULL, &out), CF_ECORRUPT);
    CHECK_ST(cf_load(junk, NULL, &out), CF_ECORRUPT);
    CHECK(out == SENTINEL);
    why = NOT_SET;
    errno = 0;
    CHECK_ST(cf_validate_file(missing, &why), CF_EIO);
    CHECK_EQ_I(errno, ENOENT);
    CHECK_ST(cf_validate_file(sub, NULL), CF_EIO);
    why = NOT_SET;
    CHECK_ST(cf_validate_file(empty, &why), CF_ECORRUPT);
    check_reason(why, 0, "empty file");
    why = NOT_SET;
    CHECK_ST(cf_validate_file(junk, &why), CF_ECORRUPT);
    check_reason(why, 0, "junk file");
    errno = 0;
    CHECK_ST(cf_open_mapped(missing, 0, NULL, &out), CF_EIO);
    CHECK_EQ_I(errno, ENOENT);
    CHECK_ST(cf_open_mapped(sub, 0, NULL, &out), CF_EIO);
    CHECK_ST(cf_open_mapped(empty, 0, NULL, &out), CF_ECORRUPT);
    CHECK_ST(cf_open_mapped(empty, CF_MAP_VERIFY, NULL, &out), CF_ECORRUPT);
    CHECK_ST(cf_open_mapped(junk, 0, NULL, &out), CF_ECORRUPT);
    CHECK(out == SENTINEL);

    /* A FIFO: cf_load and cf_validate_file read it; cf_open_mapped cannot map it. */
    char fifo[PATH_MAX];
    dir_path(fifo, sizeof fifo, "f.fifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    pid_t pid = fifo_writer(fifo, b);
    g = NULL;
    CHECK_ST(cf_load(fifo, NULL, &g), CF_OK);
    CHECK_EQ_I(wait_child(pid), 0);
    if (g) {
        buf gb = ser(g);
        CHECK(buf_eq(gb, b));
        buf_free(&gb);
        cf_free(g);
    }
    pid = fifo_writer(fifo, b);
    CHECK_ST(cf_validate_file(fifo, NULL), CF_OK);
    CHECK_EQ_I(wait_child(pid), 0);
    buf bad = buf_copy(b.p, b.n);
    bad.p[bad.n / 2] ^= 1;
    pid = fifo_writer(fifo, bad);
    why = NOT_SET;
    CHECK_ST(cf_validate_file(fifo, &why), CF_ECORRUPT);
    check_reason(why, 0, "damaged FIFO");
    wait_child(pid);
    pid = fifo_writer(fifo, bad);
    out = SENTINEL;
    CHECK_ST(cf_load(fifo, NULL, &out), CF_ECORRUPT);
    CHECK(out == SENTINEL);
    wait_child(pid);
    buf_free(&bad);
    pid = fifo_writer(fifo, b);
    errno = 0;
    CHECK_ST(cf_open_mapped(fifo, 0, NULL, &out), CF_EIO);
    CHECK(errno != 0);
    CHECK(out == SENTINEL);
    wait_child(pid);
    buf nothing = {NULL, 0};
    pid = fifo_writer(fifo, nothing);
    CHECK_ST(cf_load(fifo, NULL, &out), CF_ECORRUPT);
    wait_child(pid);
    unlink(fifo);

    /* NULL and invalid arguments. */
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_allocator half = {ta.a.alloc, NULL, &ta};
    cf_allocator half2 = {NULL, ta.a.free, &ta};
    uint8_t small[16];
    size_t written = 12345;
    CHECK_EQ_U(cf_serialized_size(NULL), 0);
    CHECK_ST(cf_serialize(NULL, small, sizeof small, &written), CF_EINVAL);
    CHECK_ST(cf_serialize(f, NULL, b.n, &written), CF_EINVAL);
    memset(small, 0x5C, sizeof small);
    CHECK_ST(cf_serialize(f, small, sizeof small, &written), CF_EINVAL);
    uint8_t *almost = malloc(b.n);
    memset(almost, 0x5C, b.n);
    CHECK_ST(cf_serialize(f, almost, b.n - 1, &written), CF_EINVAL);
    bool untouched = true;
    for (size_t i = 0; i < b.n; i++)
        untouched &= almost[i] == 0x5C;
    CHECK_MSG(untouched, "a failed cf_serialize wrote into the buffer");
    CHECK_EQ_U(written, 12345);
    CHECK_ST(cf_serialize(f, almost, b.n, NULL), CF_OK);
    CHECK(memcmp(almost, b.p, b.n) == 0);
    free(almost);
    uint8_t *roomy = malloc(b.n + 100);
    memset(roomy, 0x5C, b.n + 100);
    written = 0;
    CHECK_ST(cf_serialize(f, roomy, b.n + 100, &written), CF_OK);
    CHECK_EQ_U(written, b.n);
    CHECK(memcmp(roomy, b.p, b.n) == 0);
    untouched = true;
    for (size_t i = b.n; i < b.n + 100; i++)
        untouched &= roomy[i] == 0x5C;
    CHECK_MSG(untouched, "cf_serialize wrote past the end of the filter");
    free(roomy);
    out = SENTINEL;
    CHECK_ST(cf_deserialize(b.p, b.n, NULL, NULL), CF_EINVAL);
    CHECK_ST(cf_deserialize(NULL, 10, NULL, &out), CF_EINVAL);
    CHECK_ST(cf_deserialize(b.p, b.n, &half, &out), CF_EINVAL);
    CHECK_ST(cf_deserialize(b.p, b.n, &half2, &out), CF_EINVAL);
    CHECK(out == SENTINEL);
    why = NOT_SET;
    CHECK_ST(cf_validate(NULL, 10, &why), CF_EINVAL);
    CHECK_ST(cf_validate(b.p, b.n, NULL), CF_OK);
    CHECK_ST(cf_save(NULL, path), CF_EINVAL);
    CHECK_ST(cf_save(f, NULL), CF_EINVAL);
    CHECK_ST(cf_save(f, ""), CF_EINVAL);
    CHECK_ST(cf_load(NULL, NULL, &out), CF_EINVAL);
    CHECK_ST(cf_load(path, NULL, NULL), CF_EINVAL);
    CHECK_ST(cf_load(path, &half, &out), CF_EINVAL);
    CHECK_ST(cf_load(path, &half2, &out), CF_EINVAL);
    CHECK_ST(cf_validate_file(NULL, &why), CF_EINVAL);
    CHECK_ST(cf_open_mapped(NULL, 0, NULL, &out), CF_EINVAL);
    CHECK_ST(cf_open_mapped(path, 0, NULL, NULL), CF_EINVAL);
    CHECK_ST(cf_open_mapped(path, 2, NULL, &out), CF_EINVAL);
    CHECK_ST(cf_open_mapped(path, CF_MAP_VERIFY | 0x80000000u, NULL, &out), CF_EINVAL);
    CHECK_ST(cf_open_mapped(path, 0, &half, &out), CF_EINVAL);
    CHECK(out == SENTINEL);
    CHECK_EQ_U(ta.calls, 0);
    CHECK(count_mappings(path) <= 0);
    CHECK_EQ_U(count_temps(g_dir), 0);

    buf_free(&b);
    cf_free(f);
    unlink(path);
    unlink(other);
    unlink(empty);
    unlink(junk);
    rmdir(sub);
}

/* ------------------------------------------------------------------------------------ */
/* Mapped filters                                                                       */
/* ------------------------------------------------------------------------------------ */

static void test_mapped(void)
{
    cft_context("mapped");
    char path[PATH_MAX], copy[PATH_MAX];
    dir_path(path, sizeof path, "mapped.cf");
    dir_path(copy, sizeof copy, "mapped-copy.cf");
    /* A growing filter at its sub-filter limit with stash entries: every part of the
     * format in one file. */
    cf_filter *f = NULL;
    cf_config c = {
        .capacity = 300, .expansion = 2, .max_sub_filters = 3, .seed = cft_subseed(4242)};
    CHECK_ST(cf_new(&c, &f), CF_OK);
    keyset ks;
    ks_init(&ks, 31);
    cft_rng r = cft_rng_make(cft_subseed(31));
    cf_filter *fs[1] = {f};
    mix only_new = {100, 0, 0, 0};
    for (unsigned i = 0; i < 100000; i++)
        if (one_op(fs, 1, &ks, &r, only_new) == CF_FULL)
            break;
    for (unsigned i = 0; i < 200; i++)
        one_op(fs, 1, &ks, &r, MIX_DUPS);
    cf_stats s = cft_stats(f);
    CHECK_EQ_U(s.sub_filters, 3);
    CHECK(s.stashed > 0);
    CHECK_ST(cf_save(f, path), CF_OK);
    buf b = ser(f);

    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_filter *m = NULL;
    if (!CHECK_ST(cf_open_mapped(path, 0, &ta.a, &m), CF_OK))
        return;
    CHECK(count_mappings(path) == 1 || count_mappings(path) == -1);
    compare(f, m, &ks, "mapped");
    /* Read-only: every mutator refuses, nothing changes. */
    uint8_t k[CFT_KEY_MAX];
    size_t len = ks_key(&ks, k, 0);
    uint64_t h = cf_hash(m, k, len);
    CHECK_ST(cf_add(m, k, len), CF_EREADONLY);
    CHECK_ST(cf_add(m, "new key", 7), CF_EREADONLY);
    CHECK_ST(cf_add_unique(m, k, len), CF_EREADONLY);
    CHECK_ST(cf_add_unique(m, "new key", 7), CF_EREADONLY);
    CHECK_ST(cf_delete(m, k, len), CF_EREADONLY);
    CHECK_ST(cf_delete(m, "new key", 7), CF_EREADONLY);
    CHECK_ST(cf_add_hash(m, h), CF_EREADONLY);
    CHECK_ST(cf_add_hash(m, 12345), CF_EREADONLY);
    CHECK_ST(cf_delete_hash(m, h), CF_EREADONLY);
    CHECK_ST(cf_add(m, NULL, 1), CF_EINVAL);
    cf_clear(m);
    compare(f, m, &ks, "mapped, after the mutators and cf_clear");
    buf mb = ser(m);
    CHECK_MSG(buf_eq(mb, b), "a mapped filter serializes differently");
    buf_free(&mb);
    /* Its chunks are the original's. */
    cf_filter *cc = chunk_copy(m, NULL);
    if (cc) {
        buf cb = ser(cc);
        CHECK(buf_eq(cb, b));
        buf_free(&cb);
        cf_free(cc);
    }
    /* Saved elsewhere: the same bytes. */
    CHECK_ST(cf_save(m, copy), CF_OK);
    buf cb = file_read(copy);
    CHECK_MSG(buf_eq(cb, b), "a mapped filter saves differently");
    buf_free(&cb);
    /* Saved over its own file: the same bytes, and the mapping still answers. */
    CHECK_ST(cf_save(m, path), CF_OK);
    cb = file_read(path);
    CHECK_MSG(buf_eq(cb, b), "a mapped filter saved over its own file differs");
    buf_free(&cb);
    compare(f, m, &ks, "mapped, after saving over its own file");
    /* The file replaced by a save: the mapping still sees the old one. */
    cf_filter *other = NULL;
    cf_config oc = {.capacity = 50, .seed = 1};
    CHECK_ST(cf_new(&oc, &other), CF_OK);
    CHECK_ST(cf_add(other, "x", 1), CF_OK);
    CHECK_ST(cf_save(other, path), CF_OK);
    compare(f, m, &ks, "mapped, after its file was replaced");
    mb = ser(m);
    CHECK(buf_eq(mb, b));
    buf_free(&mb);
    cf_free(other);
    cf_free(m);
    CHECK(count_mappings(path) <= 0);
    CHECK(count_mappings(copy) <= 0);
    CHECK_ALLOC_CLEAN(&ta);

    /* A damaged table byte, with the file sum left as it was: only CF_MAP_VERIFY notices;
     * without it the filter opens and answers (perhaps wrongly) without crashing. */
    uint64_t t1 = rd(b.p + HDR + DESC + 16, 8), l1 = rd(b.p + HDR + DESC + 24, 8);
    static const unsigned where[] = {0, 1, 2, 3};
    for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
        buf x = buf_copy(b.p, b.n);
        size_t at;
        switch (where[w]) {
        case 0: /* the first byte of table 1 */
            at = (size_t)t1;
            break;
        case 1: /* the middle of table 1 */
            at = (size_t)(t1 + l1 / 2);
            break;
        case 2: /* the last byte of table 1 */
            at = (size_t)(t1 + l1 - 1);
            break;
        default: /* the last byte of the last table */
            at = (size_t)(rd(b.p + HDR + 2 * DESC + 16, 8) + rd(b.p + HDR + 2 * DESC + 24, 8) - 1);
            break;
        }
        x.p[at] = (uint8_t)~x.p[at];
        CHECK(file_write(copy, x.p, x.n));
        m = SENTINEL;
        if (CHECK_ST(cf_open_mapped(copy, 0, NULL, &m), CF_OK)) {
            uint64_t found = 0;
            for (uint64_t i = 0; i < ks.n + 1000; i++) {
                size_t kl = i < ks.n ? ks_key(&ks, k, i) : absent_key(&ks, k, i);
                found += cf_contains(m, k, kl) + cf_count(m, k, kl);
            }
            CHECK(found > 0);
            cf_stats ms = cft_stats(m);
            CHECK_EQ_U(ms.items, s.items);
            buf xb = ser(m); /* the damaged table, with a fresh file sum */
            CHECK(xb.p && xb.n == x.n);
            buf_free(&xb);
            cf_free(m);
        }
        m = SENTINEL;
        const char *why = NOT_SET;
        CHECK_ST(cf_open_mapped(copy, CF_MAP_VERIFY, NULL, &m), CF_ECORRUPT);
        CHECK(m == SENTINEL);
        CHECK_ST(cf_validate_file(copy, &why), CF_ECORRUPT);
        check_reason(why, 0, "damaged table");
        CHECK(count_mappings(copy) <= 0);
        buf_free(&x);
    }
    /* The same with the file sum recomputed: only the table check notices. */
    {
        buf x = buf_copy(b.p, b.n);
        /* Empty a non-empty slot: the items count no longer matches. */
        forge g;
        CHECK(forge_parse(&g, x.p, x.n));
        unsigned fb = x.p[H_F];
        uint64_t slot = 0;
        while (slot_at(g.tab[0], slot, fb) == 0)
            slot++;
        uint8_t *t = x.p + rd(x.p + HDR + 16, 8);
        for (unsigned i = 0; i < fb; i++) {
            uint64_t bit = slot * fb + i;
            t[bit / 8] = (uint8_t)(t[bit / 8] & ~(1u << (bit % 8)));
        }
        resum(x.p, x.n);
        CHECK(file_write(copy, x.p, x.n));
        m = NULL;
        if (CHECK_ST(cf_open_mapped(copy, 0, NULL, &m), CF_OK))
            cf_free(m);
        m = SENTINEL;
        CHECK_ST(cf_open_mapped(copy, CF_MAP_VERIFY, NULL, &m), CF_ECORRUPT);
        CHECK(m == SENTINEL);
        buf_free(&x);
    }

    buf_free(&b);
    ks_free(&ks);
    cf_free(f);
    unlink(path);
    unlink(copy);
}

/* A filter at the limits of the format's small fields: kicks 65535, expansion 32768,
 * max sub-filters 65536, f 32, b 255, seed 2^64-1. */
static void test_extremes(void)
{
    cft_context("extreme settings");
    cf_config c = {.capacity = 3,
                   .fingerprint_bits = 32,
                   .bucket_size = 255,
                   .max_kicks = 65535,
                   .expansion = 32768,
                   .seed = UINT64_MAX,
                   .max_sub_filters = 65536};
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    keyset ks;
    ks_init(&ks, 99);
    cft_rng r = cft_rng_make(cft_subseed(99));
    cf_filter *fs[1] = {f};
    while (cft_stats(f).sub_filters < 2 && ks.n < 5000)
        one_op(fs, 1, &ks, &r, MIX_NORMAL);
    CHECK_EQ_U(cft_stats(f).sub_filters, 2);
    rt_totals tot = {0, 0, 0, 0};
    roundtrip(f, &ks, &r, "extreme settings", 1, &tot);
    ks_free(&ks);
    cf_free(f);

    /* The smallest step of growth: expansion 32768 from 4 buckets of f 4, b 1. */
    cf_config c2 = {.capacity = 1,
                    .fingerprint_bits = 4,
                    .bucket_size = 1,
                    .expansion = 32768,
                    .seed = cft_subseed(98)};
    if (CHECK_ST(cf_new(&c2, &f), CF_OK)) {
        ks_init(&ks, 98);
        fs[0] = f;
        while (cft_stats(f).sub_filters < 2 && ks.n < 5000)
            one_op(fs, 1, &ks, &r, MIX_NORMAL);
        CHECK_EQ_U(cft_stats(f).sub_filters, 2);
        roundtrip(f, &ks, &r, "expansion 32768", 3, &tot);
        ks_free(&ks);
        cf_free(f);
    }

    /* 300 sub-filters: a meta section and a file bigger than cf_save's 16 KiB buffer, made
     * of many small pieces. */
    cf_config c3 = {.capacity = 2, .expansion = 1, .max_sub_filters = 1000, .seed = cft_subseed(7)};
    if (CHECK_ST(cf_new(&c3, &f), CF_OK)) {
        ks_init(&ks, 97);
        fs[0] = f;
        mix only_new = {100, 0, 0, 0};
        while (cft_stats(f).sub_filters < 300 && ks.n < 100000)
            one_op(fs, 1, &ks, &r, only_new);
        CHECK_EQ_U(cft_stats(f).sub_filters, 300);
        CHECK(cf_serialized_size(f) > 16384 + 9600);
        roundtrip(f, &ks, &r, "300 sub-filters", 5, &tot);
        ks_free(&ks);
        cf_free(f);
    }
}

/* A stream (a pipe, a device) is checked as it is read: a wrong beginning stops the read
 * at once, and nothing is read past the length its checked header gives. Before this,
 * /dev/zero was read to the end (never) and a pipe to its writer's end. */
static void test_streams(void)
{
    cft_context("streams");
    const buf b = g_samples[0].b;
    /* /dev/zero: not a filter from its first byte. */
    cft_alloc ta;
    cft_alloc_init(&ta);
    cf_filter *out = NULL;
    const char *why = NULL;
    CHECK_ST(cf_load("/dev/zero", &ta.a, &out), CF_ECORRUPT);
    CHECK(out == NULL);
    CHECK_MSG(ta.total_bytes <= HDR, "cf_load(/dev/zero) allocated %llu bytes",
              (unsigned long long)ta.total_bytes);
    CHECK_ALLOC_CLEAN(&ta);
    CHECK_ST(cf_validate_file("/dev/zero", &why), CF_ECORRUPT);
    CHECK(why && strstr(why, "magic"));

    /* A FIFO that carries a good filter, then more than a hundred times as many zeros:
     * refused as longer than its header says, having read one byte past its length. */
    char fifo[PATH_MAX];
    dir_path(fifo, sizeof fifo, "stream.fifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    size_t extra = 128 * b.n + (8u << 20);
    buf longer = {xmalloc(b.n + extra), b.n + extra};
    memcpy(longer.p, b.p, b.n);
    memset(longer.p + b.n, 0, extra);
    signal(SIGPIPE, SIG_IGN); /* the writer's: the reader stops early on purpose */
    pid_t pid = fifo_writer(fifo, longer);
    cft_alloc_init(&ta);
    CHECK_ST(cf_load(fifo, &ta.a, &out), CF_ECORRUPT);
    CHECK_MSG(ta.total_bytes <= 4 * (uint64_t)b.n + 4096,
              "a %zu-byte filter followed by %zu zeros cost %llu bytes of buffers", b.n, extra,
              (unsigned long long)ta.total_bytes);
    CHECK_ALLOC_CLEAN(&ta);
    kill(pid, SIGKILL);
    wait_child(pid);
    pid = fifo_writer(fifo, longer);
    why = NULL;
    CHECK_ST(cf_validate_file(fifo, &why), CF_ECORRUPT);
    CHECK(why && strstr(why, "longer"));
    kill(pid, SIGKILL);
    wait_child(pid);
    buf_free(&longer);

    /* A header whose meta section claims 2^40 bytes of tables, then the stream ends: the
     * buffers follow what arrived, not what was claimed. */
    buf forged = buf_copy(b.p, b.n);
    uint64_t meta = meta_len_of(forged.p);
    uint64_t len0 = rd(forged.p + HDR + 24, 8), buckets = rd(forged.p + HDR, 8);
    uint64_t big = buckets << 20; /* the same shape, 2^20 times the buckets */
    uint64_t big_len = len0 << 20;
    if (CHECK(rd(forged.p + H_NT, 4) == 1 && (len0 << 20) >> 20 == len0)) {
        wr(forged.p + HDR, 8, big);
        wr(forged.p + HDR + 24, 8, big_len);
        wr(forged.p + H_TOTAL, 8, align64(rd(forged.p + HDR + 16, 8) + big_len) + SUM);
        wr(forged.p + meta - SUM, 8, XXH3_64bits(forged.p, (size_t)(meta - SUM)));
        pid = fifo_writer(fifo, forged);
        cft_alloc_init(&ta);
        why = NULL;
        CHECK_ST(cf_load(fifo, &ta.a, &out), CF_ECORRUPT);
        CHECK_MSG(ta.total_bytes <= 4 * (uint64_t)forged.n + 4096,
                  "a header claiming %llu bytes, %zu sent, cost %llu bytes of buffers",
                  (unsigned long long)big_len, forged.n, (unsigned long long)ta.total_bytes);
        CHECK_ALLOC_CLEAN(&ta);
        CHECK_EQ_I(wait_child(pid), 0);
        pid = fifo_writer(fifo, forged);
        CHECK_ST(cf_validate_file(fifo, &why), CF_ECORRUPT);
        CHECK(why && strstr(why, "truncated"));
        wait_child(pid);
    }
    buf_free(&forged);
    signal(SIGPIPE, SIG_DFL);
    unlink(fifo);
}

/* Where cf_save writes: through a symbolic link to its target (the link stays), keeping
 * the replaced file's owner, group and mode, never over a special file; and what it
 * cleans: the temporaries of saves whose process died. */
static void test_save_paths(void)
{
    cft_context("save paths");
    cf_filter *f = NULL;
    cf_config c = {.capacity = 100, .seed = 5};
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    cf_add(f, "k", 1);
    char target[PATH_MAX], link[PATH_MAX], fifo[PATH_MAX], tmp[PATH_MAX * 2];
    dir_path(target, sizeof target, "target.cf");
    dir_path(link, sizeof link, "link.cf");
    dir_path(fifo, sizeof fifo, "fifo.cf");
    CHECK_ST(cf_save(f, target), CF_OK);
    CHECK(symlink("target.cf", link) == 0);
    /* Owned by someone else (as root), group-writable: both kept through the link. */
    bool root = geteuid() == 0;
    if (root)
        CHECK(chown(target, 65534, 65534) == 0);
    CHECK(chmod(target, 0664) == 0);
    cf_add(f, "k2", 2);
    CHECK_ST(cf_save(f, link), CF_OK);
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(stat(target, &st) == 0 && (st.st_mode & 07777) == 0664);
    if (root)
        CHECK_MSG(st.st_uid == 65534 && st.st_gid == 65534, "owner %u:%u, want 65534:65534",
                  (unsigned)st.st_uid, (unsigned)st.st_gid);
    else
        printf("  (not root: the owner of a file of another user cannot be kept; mode checked)\n");
    cf_filter *g = NULL;
    CHECK_ST(cf_load(target, NULL, &g), CF_OK);
    CHECK(g && cf_contains(g, "k2", 2));
    cf_free(g);
    /* A FIFO (a special file) is not replaced. */
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_ST(cf_save(f, fifo), CF_EINVAL);
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    unlink(fifo);
    /* Temporaries: a dead writer's is removed; a live one's, and names not of our form,
     * are left alone. */
    fflush(NULL);
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    wait_child(dead);
    const char *names[3];
    char n0[64], n1[64], n2[64];
    snprintf(n0, sizeof n0, "target.cf.tmp-%ld-0123456789abcdef", (long)dead);
    snprintf(n1, sizeof n1, "target.cf.tmp-%ld-0123456789abcdef", (long)getppid());
    snprintf(n2, sizeof n2, "target.cf.tmp-%ld-0123456789abcdeX", (long)dead);
    names[0] = n0, names[1] = n1, names[2] = n2;
    for (int i = 0; i < 3; i++) {
        snprintf(tmp, sizeof tmp, "%s/%s", g_dir, names[i]);
        FILE *t = fopen(tmp, "w");
        CHECK(t && fputs("partial", t) >= 0 && fclose(t) == 0);
    }
    CHECK_ST(cf_save(f, link), CF_OK);
    for (int i = 0; i < 3; i++) {
        snprintf(tmp, sizeof tmp, "%s/%s", g_dir, names[i]);
        CHECK_MSG((access(tmp, F_OK) == 0) == (i != 0), "%s %s", names[i],
                  i == 0 ? "was left (its writer is dead)" : "was removed (not ours to remove)");
        unlink(tmp);
    }
    unlink(link);
    unlink(target);
    cf_free(f);
}

/* Segmented files (format version 3): a sample saved, mapped and loaded back alike; its
 * segment field, version and sizes forged; every flip of its meta section refused; a
 * grown one and a semi-sorted one round trip. */
static void test_segmented(void)
{
    const unsigned M = VIA_ALL;
    static const struct {
        cf_config c;
        uint64_t n;
    } cases[] = {
        {{.capacity = 1000, .seed = 77, .flags = CF_SEGMENTED}, 3000},
        {{.capacity = 10, .bucket_size = 1, .expansion = 2, .seed = 78, .flags = CF_SEGMENTED},
         60000},
        {{.capacity = 50, .fingerprint_bits = 13, .seed = 79, .flags = CF_SEGMENTED | CF_SEMI_SORT},
         5000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cft_context("segmented sample %zu", i);
        cf_filter *f = NULL;
        if (!CHECK_ST(cf_new(&cases[i].c, &f), CF_OK))
            continue;
        uint8_t k[CFT_KEY_MAX];
        for (uint64_t j = 0; j < cases[i].n; j++)
            CHECK_ST(cf_add(f, k, cft_key(k, 900 + i, j)), CF_OK);
        buf b = {malloc(cf_serialized_size(f)), cf_serialized_size(f)};
        CHECK_ST(cf_serialize(f, b.p, b.n, NULL), CF_OK);
        CHECK_EQ_U(rd(b.p + H_VERSION, 2), 3);
        CHECK_EQ_U(b.p[H_RES2], CF_SEGMENT_BITS);
        CHECK(i != 1 || rd(b.p + H_NT, 4) >= 2);
        expect_ok(b.p, b.n, "the segmented sample");
        /* Loaded and mapped, it finds every key and saves the same bytes. */
        cf_filter *g = NULL;
        if (CHECK_ST(cf_deserialize(b.p, b.n, NULL, &g), CF_OK)) {
            uint64_t missed = 0;
            for (uint64_t j = 0; j < cases[i].n; j++)
                missed += !cf_contains(g, k, cft_key(k, 900 + i, j));
            CHECK_EQ_U(missed, 0);
            CHECK(cft_same_bytes(f, g));
            cf_mapping m;
            CHECK_ST(cf_get_mapping(g, &m), CF_OK);
            CHECK_EQ_U(m.segment_bits, CF_SEGMENT_BITS);
            cf_free(g);
        }
        if (i == 0) {
            /* The segment field: only 16 is this library's; 0 in version 3, or any in
             * version 2, is corrupt; other sizes are a newer writer's. */
            refuse_patch(b, H_RES2, 1, 0, CF_ECORRUPT, M, "version 3, no segments");
            refuse_patch(b, H_RES2, 1, 15, CF_EVERSION, M, "segments of 2^15");
            refuse_patch(b, H_RES2, 1, 17, CF_EVERSION, M, "segments of 2^17");
            refuse_patch(b, H_RES2, 1, 255, CF_EVERSION, M, "segments of 2^255");
            refuse_patch(b, H_VERSION, 2, 2, CF_ECORRUPT, M, "version 2 with a segment field");
            for (unsigned r = 1; r < 4; r++)
                refuse_patch(b, H_RES2 + r, 1, 1, CF_ECORRUPT, M, "reserved byte after segments");
            /* A first table of other than whole segments (its length as the layout would
             * compute it, so that only the segments disagree). */
            buf x = patched(b, HDR, 8, (UINT64_C(1) << 16) - 2);
            wr(x.p + HDR + 24, 8, ((UINT64_C(1) << 16) - 2) * 48 / 8);
            resum(x.p, x.n);
            expect_refused(x.p, x.n, CF_ECORRUPT, M | FORGED, "a part of a segment");
            buf_free(&x);
            /* A plain file that claims segments: its table is no whole segment. */
            buf y = patched(g_samples[0].b, H_VERSION, 2, 3);
            wr(y.p + H_RES2, 1, CF_SEGMENT_BITS);
            resum(y.p, y.n);
            expect_refused(y.p, y.n, CF_ECORRUPT, M | FORGED, "a small table claiming segments");
            buf_free(&y);
            /* Every flip of a meta bit. */
            uint64_t meta = meta_len_of(b.p);
            for (size_t at = 0; at < meta; at++)
                for (unsigned bit = 0; bit < 8; bit++) {
                    b.p[at] ^= (uint8_t)(1u << bit);
                    const char *why = NOT_SET;
                    cf_status st = cf_validate(b.p, b.n, &why);
                    CHECK_MSG(st == CF_ECORRUPT || (at < H_VERSION + 2 && st == CF_EVERSION),
                              "bit %u of byte %zu: %s", bit, at, cft_status_name(st));
                    b.p[at] ^= (uint8_t)(1u << bit);
                }
            /* Truncated anywhere in the meta section, and by a byte. */
            for (size_t len = 0; len < meta; len++)
                expect_refused(b.p, len, CF_ECORRUPT, VIA_MEMORY, "truncated segmented file");
            expect_refused(b.p, b.n - 1, CF_ECORRUPT, VIA_MEMORY | VIA_FILE | VIA_MAPPED,
                           "a byte short");
        }
        buf_free(&b);
        cf_free(f);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Files written by parts                                                               */
/* ------------------------------------------------------------------------------------ */

/* A segmented filter's file written by parts: the ranges of segments built apart
 * (cf_build_segments), the head from their reports, a temporary file, the ranges written
 * at their offsets in any order, the commit. */
typedef struct file_parts {
    const cf_config *c;
    uint64_t segments, items, unplaced, nfirst;
    uint64_t first_unplaced[4 * CF_STASH_SLOTS];
    struct {
        uint64_t first, end;
        uint8_t *bytes;
        size_t len;
    } range[4];
    unsigned nranges;
} file_parts;

/* The ranges of `nranges` of c's filter holding the sorted hashes h[0 .. n). */
static bool parts_build(file_parts *ps, const cf_config *c, const uint64_t *h, size_t n,
                        unsigned nranges)
{
    cf_mapping m;
    memset(ps, 0, sizeof *ps);
    ps->c = c;
    if (!CHECK_ST(cf_config_mapping(c, &m), CF_OK))
        return false;
    ps->segments = m.buckets >> m.segment_bits;
    ps->nranges = nranges;
    if (!CHECK(nranges <= ps->segments))
        return false;
    size_t at = 0;
    for (unsigned k = 0; k < nranges; k++) {
        uint64_t first = ps->segments * k / nranges, end = ps->segments * (k + 1) / nranges;
        size_t from = at;
        cf_place pl;
        while (at < n && cf_place_in(&m, h[at], &pl) == CF_OK &&
               pl.bucket[0] >> m.segment_bits < end)
            at++;
        ps->range[k].first = first;
        ps->range[k].end = end;
        CHECK_ST(cf_segments_size(c, first, end, &ps->range[k].len), CF_OK);
        ps->range[k].bytes = malloc(ps->range[k].len);
        cf_segments_report r;
        if (!CHECK_ST(cf_build_segments(c, first, end, h + from, at - from, ps->range[k].bytes,
                                        ps->range[k].len, &r),
                      CF_OK))
            return false;
        CHECK_EQ_U(r.items, r.added);
        ps->items += r.items;
        ps->unplaced += r.unplaced;
        for (uint64_t e = 0; e < r.unplaced && e < CF_STASH_SLOTS; e++)
            ps->first_unplaced[ps->nfirst++] = r.first_unplaced[e];
    }
    return CHECK_EQ_U(at, n);
}

static void parts_free(file_parts *ps)
{
    for (unsigned k = 0; k < ps->nranges; k++)
        free(ps->range[k].bytes);
}

/* Range k written into the temporary file tmp, `shift` segments past its place. */
static bool parts_write(const file_parts *ps, const cf_segments_file *info, const char *tmp,
                        unsigned k, int64_t shift)
{
    int fd = open(tmp, O_WRONLY);
    if (!CHECK(fd >= 0))
        return false;
    uint64_t at =
        info->head_len + (uint64_t)((int64_t)ps->range[k].first + shift) * info->segment_bytes;
    bool ok =
        pwrite(fd, ps->range[k].bytes, ps->range[k].len, (off_t)at) == (ssize_t)ps->range[k].len;
    return CHECK(close(fd) == 0 && ok);
}

static void test_file_parts(void)
{
    /* keys: per thousand slots */
    static const struct {
        cf_config c;
        unsigned keys;
        unsigned ranges;
    } cases[] = {
        {{.capacity = 1000000, .seed = 81, .flags = CF_SEGMENTED}, 900, 3},
        {{.capacity = 600000,
          .fingerprint_bits = 13,
          .seed = 82,
          .flags = CF_SEGMENTED | CF_SEMI_SORT},
         900,
         2},
        /* fuller than a table of the paper's budget fills without a failure: the stash */
        {{.capacity = 480000, .max_kicks = 500, .seed = 83, .flags = CF_SEGMENTED}, 960, 2},
        /* more than fits: a full stash, and refusals */
        {{.capacity = 100000,
          .fingerprint_bits = 8,
          .bucket_size = 1,
          .seed = 84,
          .flags = CF_SEGMENTED},
         1000,
         1},
    };
    char path[PATH_MAX], tmp[PATH_MAX];
    dir_path(path, sizeof path, "parts.cf");
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const cf_config *c = &cases[ci].c;
        cft_context("file by parts: case %zu", ci);
        cf_mapping m;
        if (!CHECK_ST(cf_config_mapping(c, &m), CF_OK))
            continue;
        size_t n =
            (size_t)(m.buckets * (c->bucket_size ? c->bucket_size : 4u) * cases[ci].keys / 1000);
        uint64_t *h = malloc(n * sizeof *h);
        cft_rng rng = cft_rng_make(c->seed);
        for (size_t i = 0; i < n; i++)
            h[i] = cft_next(&rng);
        CHECK_ST(cf_sort_hashes(h, n, m.tag_bits, 1, &n), CF_OK);
        /* What cf_save writes of the filter built whole. */
        cf_filter *want = NULL;
        cf_build_report br;
        file_parts ps;
        if (!CHECK_ST(cf_new(c, &want), CF_OK) ||
            !CHECK_ST(cf_build_hashes(want, h, n, 1, &br), CF_OK) ||
            !parts_build(&ps, c, h, n, cases[ci].ranges)) {
            cf_free(want);
            free(h);
            continue;
        }
        char wpath[PATH_MAX];
        dir_path(wpath, sizeof wpath, "whole.cf");
        CHECK_ST(cf_save(want, wpath), CF_OK);
        buf wb = file_read(wpath);
        uint8_t head[CF_SEGMENTS_HEAD_MAX];
        cf_segments_file info;
        CHECK_ST(cf_segments_file_head(c, ps.items, ps.first_unplaced, ps.nfirst, head, sizeof head,
                                       &info),
                 CF_OK);
        CHECK_EQ_U(info.stashed, cft_stats(want).stashed);
        CHECK_EQ_U(ps.unplaced - info.stashed, br.full);
        CHECK_EQ_U(info.total, wb.n);
        /* the header, a descriptor, the stash and the meta checksum, to a multiple of 64 */
        CHECK_EQ_U(info.head_len, (64 + 32 + 16 * info.stashed + 8 + 63) / 64 * 64);
        CHECK(ci < 2 ? info.stashed == 0 : info.stashed > 0);
        CHECK(ci != 3 || (info.stashed == CF_STASH_SLOTS && ps.unplaced > info.stashed));
        /* A part missing, then at the wrong place: refused, the old file kept, the
         * temporary file left; written right, committed. */
        CHECK(file_write(path, "old", 3));
        if (!CHECK_ST(cf_file_begin(path, head, info.head_len, info.total, tmp, sizeof tmp), CF_OK))
            goto next;
        CHECK(strncmp(tmp, path, strlen(path)) == 0 && strstr(tmp, ".tmp-") != NULL);
        for (unsigned k = ps.nranges; k-- > 1;)
            parts_write(&ps, &info, tmp, k, 0);
        const char *why = NOT_SET;
        if (ps.items > 0) {
            CHECK_ST(cf_file_commit(tmp, path, &why), CF_ECORRUPT);
            CHECK(why != NULL && why != NOT_SET);
            buf old = file_read(path);
            CHECK(old.n == 3 && memcmp(old.p, "old", 3) == 0);
            buf_free(&old);
            CHECK(access(tmp, F_OK) == 0);
            if (ps.nranges > 1) {
                parts_write(&ps, &info, tmp, 0, 1); /* over range 1's first segment */
                CHECK_ST(cf_file_commit(tmp, path, &why), CF_ECORRUPT);
                parts_write(&ps, &info, tmp, 1, 0);
            }
        }
        parts_write(&ps, &info, tmp, 0, 0);
        why = NOT_SET;
        CHECK_ST(cf_file_commit(tmp, path, &why), CF_OK);
        CHECK(why == NULL);
        CHECK(access(tmp, F_OK) != 0);
        buf got = file_read(path);
        CHECK_MSG(got.n == wb.n && memcmp(got.p, wb.p, wb.n) == 0,
                  "the file by parts is not cf_save's (%zu against %zu bytes)", got.n, wb.n);
        buf_free(&got);
    next:
        buf_free(&wb);
        parts_free(&ps);
        cf_free(want);
        free(h);
        unlink(wpath);
    }
    cft_context("file by parts: refusals");
    cf_config c = {.capacity = 100000, .seed = 85, .flags = CF_SEGMENTED};
    uint8_t head[CF_SEGMENTS_HEAD_MAX];
    cf_segments_file info;
    cf_mapping m;
    CHECK_ST(cf_config_mapping(&c, &m), CF_OK);
    uint64_t slots = m.buckets * 4, one = 1;
    CHECK_ST(cf_segments_file_head(&c, slots + 1, NULL, 0, head, sizeof head, &info), CF_EINVAL);
    CHECK_ST(cf_segments_file_head(&c, 0, NULL, 0, head, sizeof head - 1, &info), CF_EINVAL);
    CHECK_ST(cf_segments_file_head(&c, 0, NULL, 1, head, sizeof head, &info), CF_EINVAL);
    CHECK_ST(cf_segments_file_head(&c, 0, &one, 1, NULL, sizeof head, &info), CF_EINVAL);
    CHECK_ST(cf_segments_file_head(&c, 0, &one, 1, head, sizeof head, NULL), CF_EINVAL);
    CHECK_ST(cf_segments_file_head(NULL, 0, NULL, 0, head, sizeof head, &info), CF_EINVAL);
    cf_config other = c;
    other.expansion = 2;
    CHECK_ST(cf_segments_file_head(&other, 0, NULL, 0, head, sizeof head, &info), CF_EINVAL);
    other = c;
    other.flags = CF_UNSEGMENTED;
    CHECK_ST(cf_segments_file_head(&other, 0, NULL, 0, head, sizeof head, &info), CF_EINVAL);
    /* An empty filter: the file of cf_new's filter. */
    if (CHECK_ST(cf_segments_file_head(&c, 0, NULL, 0, head, sizeof head, &info), CF_OK) &&
        CHECK_ST(cf_file_begin(path, head, info.head_len, info.total, tmp, sizeof tmp), CF_OK)) {
        /* its permission bits and the link to it kept */
        char target[PATH_MAX], link[PATH_MAX];
        dir_path(target, sizeof target, "target.cf");
        dir_path(link, sizeof link, "link.cf");
        CHECK(file_write(target, "x", 1) && chmod(target, 0640) == 0 && symlink(target, link) == 0);
        char tmp2[PATH_MAX];
        /* room for the link's temporary name, not the target's (two bytes longer) */
        CHECK_ST(cf_file_begin(link, head, info.head_len, info.total, tmp2,
                               strlen(link) + CF_FILE_TEMP_EXTRA),
                 CF_EINVAL);
        CHECK_ST(cf_file_begin(link, head, info.head_len, info.total, tmp2, sizeof tmp2), CF_OK);
        CHECK_ST(cf_file_commit(tmp2, link, NULL), CF_OK);
        struct stat st;
        CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
        CHECK(stat(target, &st) == 0 && (st.st_mode & 07777) == 0640);
        cf_filter *g = NULL, *e = cft_new(c);
        if (CHECK_ST(cf_load(target, NULL, &g), CF_OK))
            CHECK(cft_same_bytes(g, e));
        cf_free(g);
        cf_free(e);
        /* The temporary file cut short: refused. */
        CHECK(truncate(tmp, (off_t)info.total - 1) == 0);
        CHECK_ST(cf_file_commit(tmp, path, NULL), CF_ECORRUPT);
        CHECK(truncate(tmp, 10) == 0);
        CHECK_ST(cf_file_commit(tmp, path, NULL), CF_ECORRUPT);
        unlink(tmp);
        CHECK_ST(cf_file_commit(tmp, path, NULL), CF_EIO);
        unlink(link);
        unlink(target);
    }
    /* begin's refusals: no file is left. */
    CHECK_ST(cf_file_begin(path, head, info.head_len, info.total, tmp, strlen(path) + 1),
             CF_EINVAL);
    CHECK_ST(cf_file_begin(path, head, 300, 200, tmp, sizeof tmp), CF_EINVAL);
    CHECK_ST(cf_file_begin("", head, 1, 1, tmp, sizeof tmp), CF_EINVAL);
    CHECK_ST(cf_file_commit(NULL, path, NULL), CF_EINVAL);
    char nodir[PATH_MAX];
    dir_path(nodir, sizeof nodir, "no/such/dir/f.cf");
    CHECK_ST(cf_file_begin(nodir, head, info.head_len, info.total, tmp, sizeof tmp), CF_EIO);
    CHECK_ST(cf_file_begin(g_dir, head, info.head_len, info.total, tmp, sizeof tmp), CF_EIO);
    unlink(path);
    CHECK_EQ_U(count_temps(g_dir), 0);
    /* Allocation failures: each refused with CF_ENOMEM, nothing left allocated. */
    uint64_t stash[3] = {1u << 20, 2u << 20, 3u << 20};
    for (uint64_t nth = 1;; nth++) {
        cft_alloc ta;
        cft_alloc_init(&ta);
        c.allocator = &ta.a;
        cft_alloc_arm(&ta, nth, false);
        cf_status st = cf_segments_file_head(&c, 7, stash, 3, head, sizeof head, &info);
        CHECK_ALLOC_CLEAN(&ta);
        if (ta.failures == 0) {
            CHECK_ST(st, CF_OK);
            CHECK_EQ_U(info.stashed, 3);
            break;
        }
        CHECK_ST(st, CF_ENOMEM);
    }
}

int main(void)
{
    cft_init("test_persist");
    dir_make();
    make_samples();
    /* Each part's time goes to the log, to show where a slow run spends it. */
    static const struct {
        const char *name;
        void (*run)(void);
    } parts[] = {
        {"files", test_files},         {"mapped", test_mapped},
        {"forged", test_forged},       {"truncation", test_truncation},
        {"bit flips", test_bit_flips}, {"allocation failures", test_alloc_failures},
        {"extremes", test_extremes},   {"round trips", test_roundtrip_shapes},
        {"streams", test_streams},     {"save paths", test_save_paths},
        {"segmented", test_segmented}, {"files by parts", test_file_parts},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        double t = cft_now();
        parts[i].run();
        printf("  %s: %.2f s\n", parts[i].name, cft_now() - t);
    }
    for (unsigned i = 0; i < N_SAMPLES; i++)
        buf_free(&g_samples[i].b);
    CHECK_EQ_U(count_temps(g_dir), 0);
    dir_empty(g_dir, true);
    return cft_finish();
}
