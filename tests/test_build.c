/*
 * test_build.c - cf_sort_hashes and cf_build_hashes: the sort against qsort, and builds
 * with 1 to 4 threads against the filter that cf_add_many of the same hashes in the same
 * order gives, byte for byte: filters that fit, fixed ones filled past their room (stash,
 * refusals), growing ones that grow, unsegmented ones (one thread), and builds whose
 * threads' filters cannot be made. Every added key is found afterwards. Merges by ranges
 * of segments (cf_get_segments, cf_merge_segments, cf_stash_hashes) against cf_merge.
 */
#include "testutil.h"

#include "internal.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rotl(uint64_t h, unsigned f)
{
    return h << f | h >> (64u - f);
}

/* n random hashes of which about a quarter repeat another. */
static uint64_t *random_hashes(size_t n, uint64_t seed)
{
    uint64_t *h = malloc((n ? n : 1) * sizeof *h);
    cft_rng r = cft_rng_make(seed);
    for (size_t i = 0; i < n; i++)
        h[i] = i > 0 && cft_below(&r, 4) == 0 ? h[cft_below(&r, i)] : cft_next(&r);
    return h;
}

static void test_sort(void)
{
    static const size_t sizes[] = {0, 1, 2, 31, 33, 1000, 70000, 300000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (unsigned f = 4; f <= 32; f += 7)
            for (unsigned threads = 0; threads <= 4; threads++) {
                size_t n = sizes[si];
                cft_context("sort: %zu hashes, f %u, %u threads", n, f, threads);
                uint64_t *h = random_hashes(n, cft_subseed(si * 100 + f));
                uint64_t *want = malloc((n ? n : 1) * sizeof *want);
                for (size_t i = 0; i < n; i++)
                    want[i] = rotl(h[i], f);
                qsort(want, n, sizeof *want, cmp_u64);
                size_t d = 0;
                for (size_t i = 0; i < n; i++)
                    if (d == 0 || want[i] != want[d - 1])
                        want[d++] = want[i];
                size_t distinct = SIZE_MAX;
                CHECK_ST(cf_sort_hashes(h, n, f, threads, &distinct), CF_OK);
                CHECK_EQ_U(distinct, d);
                size_t bad = 0;
                for (size_t i = 0; i < d && i < distinct; i++)
                    bad += rotl(h[i], f) != want[i];
                CHECK_EQ_U(bad, 0);
                free(h);
                free(want);
            }
    size_t d;
    uint64_t one = 1;
    CHECK_ST(cf_sort_hashes(NULL, 1, 12, 1, &d), CF_EINVAL);
    CHECK_ST(cf_sort_hashes(&one, 1, 12, 1, NULL), CF_EINVAL);
    CHECK_ST(cf_sort_hashes(&one, 1, 3, 1, &d), CF_EINVAL);
    CHECK_ST(cf_sort_hashes(&one, 1, 33, 1, &d), CF_EINVAL);
    CHECK_ST(cf_sort_hashes(NULL, 0, 12, 1, &d), CF_OK);
    CHECK_EQ_U(d, 0);
}

typedef struct build_case {
    const char *what;
    cf_config c;
    size_t keys;     /* hashes before dropping repeats */
    bool threaded;   /* several threads fill (a segmented filter of room enough) */
    bool overfilled; /* some adds find no room */
    unsigned most_threads;
} build_case;

/* The filter c makes, with the sorted distinct hashes h[0 .. n) added by cf_add_many. */
static cf_filter *reference(const cf_config *c, const uint64_t *h, size_t n)
{
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(c, &f), CF_OK))
        return NULL;
    for (size_t at = 0; at < n; at += 1000)
        cf_add_many(f, h + at, n - at < 1000 ? n - at : 1000, 0, NULL);
    return f;
}

static void test_builds(void)
{
    static const build_case cases[] = {
        {"segmented, 8 segments, room enough",
         {.capacity = 200000, .fingerprint_bits = 8, .bucket_size = 1, .flags = CF_SEGMENTED},
         300000,
         true,
         false,
         3},
        {"segmented 12/4, 4 segments",
         {.capacity = 900000, .flags = CF_SEGMENTED},
         700000,
         true,
         false,
         2},
        {"segmented, semi-sorted 13/4, 4 segments",
         {.capacity = 800000, .fingerprint_bits = 13, .flags = CF_SEGMENTED | CF_SEMI_SORT},
         600000,
         true,
         false,
         2},
        {"segmented, fixed, filled past its room (stash, refusals)",
         {.capacity = 200000, .fingerprint_bits = 8, .bucket_size = 1, .flags = CF_SEGMENTED},
         600000,
         true,
         true,
         4},
        {"segmented, growing past its first table",
         {.capacity = 100000,
          .fingerprint_bits = 10,
          .bucket_size = 2,
          .expansion = 2,
          .flags = CF_SEGMENTED},
         450000,
         false,
         false,
         0},
        {"any-size mapping: one thread",
         {.capacity = 200000, .fingerprint_bits = 12, .flags = CF_UNSEGMENTED},
         250000,
         false,
         false,
         0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const build_case *bc = &cases[ci];
        cf_config c = bc->c;
        c.seed = cft_subseed(7000 + ci);
        cft_context("build: %s, seed 0x%016llx", bc->what, (unsigned long long)c.seed);
        uint64_t *h = random_hashes(bc->keys, c.seed);
        size_t n = 0;
        unsigned fb = c.fingerprint_bits ? c.fingerprint_bits : 12;
        CHECK_ST(cf_sort_hashes(h, bc->keys, fb, 2, &n), CF_OK);
        cf_filter *want = reference(&c, h, n);
        if (!want)
            continue;
        for (unsigned threads = 1; threads <= 4; threads++) {
            cf_filter *f = NULL;
            cft_thread_alloc ota; /* the threads allocate nothing */
            cft_thread_alloc_init(&ota);
            c.allocator = &ota.a;
            if (!CHECK_ST(cf_new(&c, &f), CF_OK))
                continue;
            cf_build_report r;
            CHECK_ST(cf_build_hashes(f, h, n, threads, &r), CF_OK);
            CHECK_EQ_U(atomic_load(&ota.elsewhere), 0);
            CHECK_MSG(cft_same_bytes(f, want),
                      "%u threads: the bytes differ from one add after "
                      "another",
                      threads);
            CHECK_EQ_U(r.added + r.full, n);
            CHECK_EQ_U(cft_stats(f).items, r.added);
            CHECK(!bc->overfilled || cft_stats(f).stashed == 8);
            CHECK_MSG(!bc->overfilled || r.full > 0, "no add was refused");
            CHECK_MSG(bc->overfilled || r.full == 0, "%llu adds refused",
                      (unsigned long long)r.full);
            if (bc->threaded) /* at most one per 65536 hashes and per two segments */
                CHECK_EQ_U(r.threads, threads < bc->most_threads ? threads : bc->most_threads);
            else if (!(c.flags & CF_SEGMENTED))
                CHECK_EQ_U(r.threads, 1);
            /* No false negative: every hash added is found (refused ones were not). */
            if (r.full == 0) {
                size_t missed = 0;
                for (size_t i = 0; i < n; i++)
                    missed += !cf_contains_hash(f, h[i]);
                CHECK_EQ_U(missed, 0);
            }
            cf_free(f);
        }
        cf_free(want);
        free(h);
    }
}

/* A build whose threads' filters cannot all be made fills with one thread: the bytes
 * stay the same. */
static void test_alloc_failures(void)
{
    cf_config c = {.capacity = 300000,
                   .fingerprint_bits = 8,
                   .bucket_size = 1,
                   .seed = 99,
                   .flags = CF_SEGMENTED};
    uint64_t *h = random_hashes(200000, 99);
    size_t n;
    CHECK_ST(cf_sort_hashes(h, 200000, 8, 1, &n), CF_OK);
    cf_filter *want = reference(&c, h, n);
    for (uint64_t nth = 1; nth <= 12 && want; nth++) {
        cft_context("build, allocation %llu fails", (unsigned long long)nth);
        cft_alloc ta;
        cft_alloc_init(&ta);
        c.allocator = &ta.a;
        cf_filter *f = NULL;
        if (!CHECK_ST(cf_new(&c, &f), CF_OK))
            continue;
        cft_alloc_arm(&ta, nth, false);
        cf_build_report r;
        CHECK_ST(cf_build_hashes(f, h, n, 4, &r), CF_OK);
        cft_alloc_disarm(&ta);
        CHECK(cft_same_bytes(f, want));
        CHECK_EQ_U(r.added, n);
        cf_free(f);
        CHECK_EQ_U(ta.live, 0);
        CHECK_EQ_U(ta.bad_frees, 0);
    }
    cf_free(want);
    free(h);
}

/* The filter of config c holding the hashes h[0 .. n) (build order), built apart in
 * `ranges` ranges of segments and put together: each range's table, then the keys that
 * found no room in their segments, the first ones of all ranges in order, to the stash.
 * *unplaced receives how many found none; NULL on a failure (reported). */
static cf_filter *built_apart(const cf_config *c, const cf_mapping *m, const uint64_t *h, size_t n,
                              uint64_t ranges, uint64_t *unplaced)
{
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(c, &f), CF_OK))
        return NULL;
    uint64_t segments = m->buckets >> m->segment_bits, total = 0, stashed = 0;
    uint64_t first_unplaced[CF_STASH_SLOTS * 64];
    size_t nfirst = 0, at = 0;
    *unplaced = 0;
    for (uint64_t k = 0; k < ranges; k++) {
        uint64_t first = segments * k / ranges, end = segments * (k + 1) / ranges;
        size_t from = at;
        cf_place pl;
        while (at < n && cf_place_in(m, h[at], &pl) == CF_OK &&
               pl.bucket[0] >> m->segment_bits < end)
            at++;
        size_t len = 0;
        CHECK_ST(cf_segments_size(c, first, end, &len), CF_OK);
        uint8_t *part = malloc(len);
        cf_segments_report r;
        CHECK_ST(cf_build_segments(c, first, end, h + from, at - from, part, len, &r), CF_OK);
        CHECK_EQ_U(r.added + r.unplaced, at - from);
        for (uint64_t e = 0; e < r.unplaced && e < CF_STASH_SLOTS && nfirst < 64 * CF_STASH_SLOTS;
             e++)
            first_unplaced[nfirst++] = r.first_unplaced[e];
        total += r.added;
        *unplaced += r.unplaced;
        CHECK_ST(cf_put_segments(f, first, end, part, len), CF_OK);
        free(part);
    }
    CHECK_ST(cf_stash_unplaced(f, first_unplaced, nfirst, &stashed), CF_OK);
    CHECK_EQ_U(stashed, *unplaced < CF_STASH_SLOTS ? *unplaced : CF_STASH_SLOTS);
    CHECK_EQ_U(total + *unplaced, n);
    CHECK_EQ_U(cft_stats(f).items, total + stashed);
    return f;
}

/* The segments of a filter built apart, range by range, and put together: the bytes of
 * cf_build_hashes, for every way of cutting the segments into ranges tried, a fixed
 * filter given more keys than fit too (its stash, then refusals). */
static void test_segments_apart(void)
{
    static const struct {
        cf_config c;
        size_t keys;
    } configs[] = {
        {{.capacity = 700000, .seed = 31, .flags = CF_SEGMENTED}, 630000},
        {{.capacity = 600000,
          .fingerprint_bits = 13,
          .seed = 32,
          .flags = CF_SEGMENTED | CF_SEMI_SORT},
         540000},
        {{.capacity = 300000,
          .fingerprint_bits = 7,
          .bucket_size = 1,
          .seed = 33,
          .flags = CF_SEGMENTED},
         270000},
        {{.capacity = 200000,
          .fingerprint_bits = 8,
          .bucket_size = 1,
          .seed = 34,
          .flags = CF_SEGMENTED},
         600000},
    };
    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++) {
        const cf_config *c = &configs[ci].c;
        cft_context("segments apart: config %zu", ci);
        cf_mapping m;
        if (!CHECK_ST(cf_config_mapping(c, &m), CF_OK) || !CHECK(m.segment_bits == CF_SEGMENT_BITS))
            continue;
        uint64_t segments = m.buckets >> m.segment_bits;
        size_t n;
        uint64_t *h = random_hashes(configs[ci].keys, c->seed);
        CHECK_ST(cf_sort_hashes(h, configs[ci].keys, m.tag_bits, 2, &n), CF_OK);
        cf_filter *want = NULL;
        cf_build_report r;
        if (!CHECK_ST(cf_new(c, &want), CF_OK) ||
            !CHECK_ST(cf_build_hashes(want, h, n, 1, &r), CF_OK))
            continue;
        for (uint64_t ranges = 1; ranges <= segments; ranges += 2) {
            uint64_t unplaced = 0;
            cf_filter *f = built_apart(c, &m, h, n, ranges, &unplaced);
            if (!f)
                break;
            CHECK_EQ_U(unplaced, r.full + cft_stats(want).stashed);
            CHECK_MSG(cft_same_bytes(f, want), "%llu ranges: not the bytes of cf_build_hashes",
                      (unsigned long long)ranges);
            cf_free(f);
        }
        CHECK(ci < 3 ? r.full == 0 : r.full > 0 && cft_stats(want).stashed == CF_STASH_SLOTS);
        /* Refusals: hashes of another segment, a wrong length, an empty or past range, a
         * growing filter. */
        size_t len = 0;
        CHECK_ST(cf_segments_size(c, 0, 1, &len), CF_OK);
        uint8_t *part = calloc(len + 1, 1);
        cf_segments_report sr;
        CHECK_ST(cf_build_segments(c, 0, 1, h + n - 1, 1, part, len, &sr), CF_EINVAL);
        CHECK_ST(cf_build_segments(c, 0, 1, h, 1, part, len + 1, &sr), CF_EINVAL);
        CHECK_ST(cf_build_segments(c, 1, 1, h, 0, part, 0, &sr), CF_EINVAL);
        cf_config grows = *c;
        grows.expansion = 2;
        CHECK_ST(cf_build_segments(&grows, 0, 1, h, 1, part, len, &sr), CF_EINVAL);
        CHECK_ST(cf_segments_size(c, 0, segments + 1, &len), CF_EINVAL);
        CHECK_ST(cf_put_segments(want, 0, 1, part, len + 1), CF_EINVAL);
        if (c->flags & CF_SEMI_SORT) { /* a code past the last: refused, nothing changed */
            memset(part, 0xff, len);
            uint64_t items = cft_stats(want).items;
            CHECK_ST(cf_put_segments(want, 0, 1, part, len), CF_ECORRUPT);
            CHECK_EQ_U(cft_stats(want).items, items);
        }
        /* An empty segment put over a full one: its items go. */
        memset(part, 0, len);
        uint64_t before = cft_stats(want).items;
        CHECK_ST(cf_put_segments(want, 0, 1, part, len), CF_OK);
        CHECK(cft_stats(want).items < before);
        free(part);
        cf_free(want);
        free(h);
    }
    cf_config plain = {.capacity = 1000, .seed = 40, .flags = CF_UNSEGMENTED};
    size_t len;
    CHECK_ST(cf_segments_size(&plain, 0, 1, &len), CF_EINVAL);
    cf_filter *f = NULL;
    uint64_t stashed;
    if (CHECK_ST(cf_new(&plain, &f), CF_OK)) {
        CHECK_ST(cf_stash_unplaced(f, NULL, 0, &stashed), CF_EINVAL);
        cf_free(f);
    }
}

/* Keys for `filled` that stop once the stash holds this many. */
#define UNTIL_STASHED 2u
#define TO_STASH      UINT64_MAX

/* A fixed segmented filter like c (seed included) holding keys [from, from + n) of
 * stream 9 (refused ones are dropped), or with n TO_STASH keys from `from` on until
 * UNTIL_STASHED of them are in its stash. */
static cf_filter *filled(const cf_config *c, uint64_t from, uint64_t n)
{
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(c, &f), CF_OK))
        return NULL;
    uint8_t key[CFT_KEY_MAX];
    for (uint64_t id = from; id - from < n; id++) {
        if (n == TO_STASH && cft_stats(f).stashed == UNTIL_STASHED)
            break;
        size_t len = cft_key(key, 9, id);
        (void)cf_add(f, key, len);
    }
    return f;
}

/* Filters src[0 .. nsrc) merged range by range as the header says (`ranges` ranges); NULL
 * with *full set if more fingerprints found no room than the stash holds. */
static cf_filter *merged_apart(cf_filter *const *src, size_t nsrc, uint64_t ranges, bool *full)
{
    cf_config c;
    cf_mapping m;
    cf_get_config(src[0], &c);
    if (!CHECK_ST(cf_get_mapping(src[0], &m), CF_OK))
        return NULL;
    uint64_t segments = m.buckets >> m.segment_bits;
    /* each source's stash hashes, and the hashes that found no room: by source, the table
     * ones of every range, then the stash ones (noted by index, to put in stash order) */
    uint64_t stash[8][CF_STASH_SLOTS], table_out[8][64], stash_out[8][CF_STASH_SLOTS];
    size_t nstash[8], ntable[8] = {0};
    bool stash_lost[8][CF_STASH_SLOTS] = {{false}};
    uint64_t lost = 0;
    for (size_t i = 0; i < nsrc; i++)
        CHECK_ST(cf_stash_hashes(src[i], stash[i], CF_STASH_SLOTS, &nstash[i]), CF_OK);
    cf_filter *out = NULL;
    if (!CHECK_ST(cf_new_like(src[0], NULL, &out), CF_OK))
        return NULL;
    for (uint64_t k = 0; k < ranges; k++) {
        uint64_t first = segments * k / ranges, end = segments * (k + 1) / ranges;
        size_t len = 0;
        CHECK_ST(cf_segments_size(&c, first, end, &len), CF_OK);
        uint8_t *dst = malloc(len), *part = malloc(len);
        CHECK_ST(cf_get_segments(src[0], first, end, dst, len), CF_OK);
        for (size_t i = 1; i < nsrc; i++) {
            cf_segments_report r;
            CHECK_ST(cf_get_segments(src[i], first, end, part, len), CF_OK);
            CHECK_ST(cf_merge_segments(&c, first, end, dst, len, part, NULL, 0, &r), CF_OK);
            for (uint64_t e = 0; e < r.unplaced && e < CF_STASH_SLOTS && ntable[i] < 64; e++)
                table_out[i][ntable[i]++] = r.first_unplaced[e];
            lost += r.unplaced;
            uint64_t in_range[CF_STASH_SLOTS];
            size_t nin = 0, index[CF_STASH_SLOTS];
            for (size_t e = 0; e < nstash[i]; e++) {
                cf_place pl;
                CHECK_ST(cf_place_in(&m, stash[i][e], &pl), CF_OK);
                uint64_t s = pl.bucket[0] >> m.segment_bits;
                if (s >= first && s < end) {
                    index[nin] = e;
                    in_range[nin++] = stash[i][e];
                }
            }
            CHECK_ST(cf_merge_segments(&c, first, end, dst, len, NULL, in_range, nin, &r), CF_OK);
            /* which of them found no room: each reported hash is one of them, in order */
            for (uint64_t e = 0, at = 0; e < r.unplaced && e < CF_STASH_SLOTS; e++) {
                while (at < nin && in_range[at] != r.first_unplaced[e])
                    at++;
                if (CHECK(at < nin))
                    stash_lost[i][index[at++]] = true;
            }
            lost += r.unplaced;
        }
        CHECK_ST(cf_put_segments(out, first, end, dst, len), CF_OK);
        free(dst);
        free(part);
    }
    uint64_t order[8 * (64 + CF_STASH_SLOTS) + CF_STASH_SLOTS];
    size_t n = 0;
    for (size_t e = 0; e < nstash[0]; e++)
        order[n++] = stash[0][e];
    for (size_t i = 1; i < nsrc; i++) {
        for (size_t e = 0; e < ntable[i]; e++)
            order[n++] = table_out[i][e];
        for (size_t e = 0; e < nstash[i]; e++)
            if (stash_lost[i][e])
                order[n++] = stash[i][e];
        (void)stash_out;
    }
    uint64_t stashed = 0;
    CHECK_ST(cf_stash_unplaced(out, order, n, &stashed), CF_OK);
    *full = stashed < nstash[0] + lost;
    if (*full) {
        cf_free(out);
        return NULL;
    }
    return out;
}

/* Merges range by range give cf_merge's bytes, for every cut into ranges tried: sources
 * with room, a source with stash entries, and a merge that does not fit. */
static void test_merge_apart(void)
{
    /* 3 segments filled to 95 % by the capacity */
    cf_config c = {.capacity = 3u * 249036u, .seed = 41, .flags = CF_SEGMENTED};
    struct {
        uint64_t n[3];
        const char *what;
    } cases[] = {
        {{180000, 180000, 180000}, "room to spare"},
        {{TO_STASH, 10, 0}, "a first source with its stash"},
        {{20, TO_STASH, 0}, "a source with its stash"},
        {{420000, 420000, 0}, "more than fits"},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        cft_context("merge apart: %s", cases[ci].what);
        cf_filter *src[3] = {NULL, NULL, NULL};
        size_t nsrc = 0;
        for (uint64_t from = 0; nsrc < 3 && cases[ci].n[nsrc]; from += 1000000u, nsrc++)
            src[nsrc] = filled(&c, from, cases[ci].n[nsrc]);
        cf_filter *want = NULL;
        cf_status st = CF_OK;
        CHECK_ST(cf_new_like(src[0], NULL, &want), CF_OK);
        CHECK_ST(cf_merge(want, src[0], NULL), CF_OK);
        for (size_t i = 1; i < nsrc && st == CF_OK; i++)
            st = cf_merge(want, src[i], NULL);
        bool stashes = false;
        for (size_t i = 0; i < nsrc; i++)
            stashes |= cft_stats(src[i]).stashed > 0;
        CHECK(ci == 1 || ci == 2 ? stashes : !stashes);
        for (uint64_t ranges = 1; ranges <= 3; ranges++) {
            bool full = false;
            cf_filter *f = merged_apart(src, nsrc, ranges, &full);
            CHECK_EQ_I(full, st == CF_FULL);
            if (st == CF_OK)
                CHECK_MSG(f && cft_same_bytes(f, want), "%llu ranges: not cf_merge's bytes",
                          (unsigned long long)ranges);
            cf_free(f);
        }
        CHECK(ci == 3 ? st == CF_FULL : st == CF_OK);
        cf_free(want);
        for (size_t i = 0; i < nsrc; i++)
            cf_free(src[i]);
    }
    /* Refusals: not segmented, a bad length, a corrupt range, hashes of other segments. */
    cft_context("merge apart: refusals");
    cf_filter *f = filled(&c, 0, 1000), *g = NULL;
    cf_config un = {.capacity = 1000, .seed = 41, .flags = CF_UNSEGMENTED};
    size_t len = 0, n = 0;
    uint64_t hs[CF_STASH_SLOTS];
    CHECK_ST(cf_segments_size(&c, 0, 1, &len), CF_OK);
    uint8_t *part = calloc(len, 1), *dst = calloc(len, 1);
    cf_segments_report r;
    if (f && CHECK_ST(cf_new(&un, &g), CF_OK)) {
        CHECK_ST(cf_get_segments(g, 0, 1, part, len), CF_EINVAL);
        CHECK_ST(cf_stash_hashes(g, hs, CF_STASH_SLOTS, &n), CF_EINVAL);
        CHECK_ST(cf_merge_segments(&un, 0, 1, dst, len, part, NULL, 0, &r), CF_EINVAL);
        CHECK_ST(cf_get_segments(f, 0, 1, part, len - 1), CF_EINVAL);
        CHECK_ST(cf_get_segments(f, 0, 4, part, len), CF_EINVAL);
        CHECK_ST(cf_get_segments(f, 0, 1, part, len), CF_OK);
        CHECK_ST(cf_merge_segments(&c, 0, 1, dst, len - 1, part, NULL, 0, &r), CF_EINVAL);
        /* a filter still loading by chunks (its header alone): nothing to read yet */
        size_t cap = cf_dump_chunk_max(f), clen = 0;
        uint8_t *chunk = malloc(cap);
        uint64_t cursor = 0;
        cf_filter *loading = NULL;
        CHECK_ST(cf_dump_chunk(f, &cursor, chunk, cap, &clen), CF_OK);
        if (CHECK_ST(cf_load_chunk(&loading, cursor, chunk, clen, NULL), CF_OK) &&
            CHECK(cf_is_loading(loading))) {
            CHECK_ST(cf_get_segments(loading, 0, 1, part, len), CF_EINVAL);
            CHECK_ST(cf_stash_hashes(loading, hs, CF_STASH_SLOTS, &n), CF_EINVAL);
        }
        cf_free(loading);
        free(chunk);
        memcpy(dst, part, len);
        uint64_t far = 0; /* a hash whose first bucket is in the last segment */
        cf_mapping m;
        cf_place pl;
        CHECK_ST(cf_get_mapping(f, &m), CF_OK);
        for (uint64_t h = 1; far == 0; h += UINT64_C(0x9e3779b97f4a7c15))
            if (cf_place_in(&m, h, &pl) == CF_OK && pl.bucket[0] >> m.segment_bits == 2)
                far = h;
        CHECK_ST(cf_merge_segments(&c, 0, 1, dst, len, NULL, &far, 1, &r), CF_EINVAL);
        CHECK(memcmp(dst, part, len) == 0);
        cf_config semi = {.capacity = c.capacity,
                          .fingerprint_bits = 13,
                          .seed = 41,
                          .flags = CF_SEGMENTED | CF_SEMI_SORT};
        size_t slen = 0;
        CHECK_ST(cf_segments_size(&semi, 0, 1, &slen), CF_OK);
        uint8_t *bad = malloc(slen), *zero = calloc(slen, 1);
        memset(bad, 0xff, slen); /* codes past the last */
        CHECK_ST(cf_merge_segments(&semi, 0, 1, zero, slen, bad, NULL, 0, &r), CF_ECORRUPT);
        CHECK_ST(cf_merge_segments(&semi, 0, 1, bad, slen, zero, NULL, 0, &r), CF_ECORRUPT);
        CHECK_ST(cf_merge_segments(&semi, 0, 1, zero, slen, zero, NULL, 0, &r), CF_OK);
        free(bad);
        free(zero);
        CHECK_ST(cf_merge_segments(&c, 0, 1, NULL, len, part, NULL, 0, &r), CF_EINVAL);
        /* Allocation failures: CF_ENOMEM and dst as it was, until the merge gets through
         * (a source that overfills the range, so that its stash's memory is wanted). */
        cf_config quick = c; /* (short searches: most of the source finds no room) */
        quick.max_kicks = 8;
        cf_filter *full = filled(&quick, 5000000, 3u * 249036u);
        cf_filter *more = filled(&quick, 7000000, 100000);
        uint8_t *src = malloc(len), *was = malloc(len);
        CHECK_ST(cf_get_segments(full, 0, 1, dst, len), CF_OK);
        CHECK_ST(cf_get_segments(more, 0, 1, src, len), CF_OK);
        memcpy(was, dst, len);
        uint8_t *want = malloc(len); /* what the merge gives with every allocation */
        cf_segments_report wr;
        memcpy(want, dst, len);
        CHECK_ST(cf_merge_segments(&quick, 0, 1, want, len, src, NULL, 0, &wr), CF_OK);
        cf_status got = CF_ENOMEM;
        for (uint64_t nth = 1; nth <= 32 && got == CF_ENOMEM; nth++) {
            cft_alloc ta;
            cft_alloc_init(&ta);
            cf_config failing = quick;
            failing.allocator = &ta.a;
            cft_alloc_arm(&ta, nth, false);
            got = cf_merge_segments(&failing, 0, 1, dst, len, src, NULL, 0, &r);
            CHECK_MSG(got == CF_OK || got == CF_ENOMEM, "allocation %llu: %s",
                      (unsigned long long)nth, cf_strerror(got));
            CHECK(got == CF_OK || memcmp(dst, was, len) == 0);
            CHECK_EQ_U(ta.live, 0);
        }
        CHECK_ST(got, CF_OK);
        CHECK(wr.unplaced > CF_STASH_SLOTS); /* (its stash was wanted) */
        CHECK(r.added == wr.added && r.unplaced == wr.unplaced && memcmp(dst, want, len) == 0);
        free(want);
        free(src);
        free(was);
        cf_free(full);
        cf_free(more);
    }
    free(part);
    free(dst);
    cf_free(f);
    cf_free(g);
}

static void test_refusals(void)
{
    cft_context("build refusals");
    cf_config c = {.capacity = 1000, .seed = 5, .flags = CF_SEGMENTED};
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return;
    uint64_t h[3] = {3, 2, 1};
    cf_build_report r;
    CHECK_ST(cf_build_hashes(f, h, 3, 2, &r), CF_EINVAL); /* not in build order */
    CHECK_EQ_U(cft_stats(f).items, 0);
    uint64_t same[2] = {7, 7};
    CHECK_ST(cf_build_hashes(f, same, 2, 2, &r), CF_EINVAL); /* a repeat */
    CHECK_ST(cf_build_hashes(NULL, h, 0, 2, &r), CF_EINVAL);
    CHECK_ST(cf_build_hashes(f, NULL, 1, 2, &r), CF_EINVAL);
    CHECK_ST(cf_build_hashes(f, h, 1, 2, NULL), CF_EINVAL);
    CHECK_ST(cf_build_hashes(f, NULL, 0, 2, &r), CF_OK);
    CHECK_EQ_U(r.added, 0);
    cf_free(f);
}

int main(void)
{
    cft_init("test_build");
    static const struct {
        const char *name;
        void (*run)(void);
    } parts[] = {{"sort", test_sort},
                 {"builds", test_builds},
                 {"allocation failures", test_alloc_failures},
                 {"segments apart", test_segments_apart},
                 {"merges apart", test_merge_apart},
                 {"refusals", test_refusals}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        double t = cft_now();
        parts[i].run();
        printf("  %s: %.2f s\n", parts[i].name, cft_now() - t);
    }
    return cft_finish();
}
