/*
 * testutil.h - the small harness every tests/test_*.c uses.
 *
 * - CHECK(cond), CHECK_MSG(cond, fmt, ...), CHECK_EQ_U(a, b), CHECK_EQ_I(a, b),
 *   CHECK_ST(got, want), CHECK_NEAR(a, b, rel): count checks; on failure print
 *   file:line, the expression, the values, the current context (cft_context) and the seed.
 *   Each returns true when the check passed, so `if (!CHECK(x)) return;` works.
 * - A deterministic PRNG (splitmix64). The run's seed is a fixed default, overridden by the
 *   environment variable CF_TEST_SEED (decimal or 0x-hex); it is printed at start and with
 *   every failure. CF_TEST_SCALE (a positive number, default 1) scales the sizes of the
 *   heavy tests through cft_scaled().
 * - A tracking cf_allocator: live allocations and bytes, calls, and a switch to make its
 *   Nth next call (or every call from the Nth on) fail.
 * - Distinct, reproducible keys: cft_key(buf, stream, id) gives 16 bytes and
 *   cft_key_var(buf, stream, id) 16..48 bytes; different (stream, id) pairs always give
 *   different keys.
 *
 * Every function here is static inline: each test is a single translation unit.
 */
#ifndef CF_TESTUTIL_H
#define CF_TESTUTIL_H

#include <cuckoofilter.h>

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CFT_DEFAULT_SEED UINT64_C(0x2545f4914f6cdd1d)
#define CFT_MAX_REPORTS  40 /* failures printed in full; later ones are only counted */

#if defined(__GNUC__) || defined(__clang__)
#define CFT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CFT_PRINTF(a, b)
#endif

struct cft_state {
    const char *name;
    uint64_t seed;
    double scale;
    uint64_t checks;
    uint64_t failed;
    char context[320];
    struct timespec start;
};

static struct cft_state cft;

/* ------------------------------------------------------------------------------------ */
/* Timing                                                                               */
/* ------------------------------------------------------------------------------------ */

static inline double cft_now(void)
{
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC) != TIME_UTC)
        return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double cft_elapsed(void)
{
    return cft_now() - ((double)cft.start.tv_sec + (double)cft.start.tv_nsec * 1e-9);
}

/* ------------------------------------------------------------------------------------ */
/* PRNG                                                                                 */
/* ------------------------------------------------------------------------------------ */

/* The splitmix64 output function: a bijection of 64-bit values with good avalanche. */
static inline uint64_t cft_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

typedef struct cft_rng {
    uint64_t s;
} cft_rng;

static inline cft_rng cft_rng_make(uint64_t seed)
{
    cft_rng r = {cft_mix64(seed ^ UINT64_C(0x6a09e667f3bcc909))};
    return r;
}

static inline uint64_t cft_next(cft_rng *r)
{
    r->s += UINT64_C(0x9e3779b97f4a7c15);
    return cft_mix64(r->s);
}

/* Uniform in [0, n); n must be > 0. Unbiased (rejection of the short last interval). */
static inline uint64_t cft_below(cft_rng *r, uint64_t n)
{
    uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
    for (;;) {
        uint64_t x = cft_next(r);
        if (x >= threshold)
            return x % n;
    }
}

/* Uniform in [0, 1). */
static inline double cft_unit(cft_rng *r)
{
    return (double)(cft_next(r) >> 11) * 0x1.0p-53;
}

/* A seed for one part of a test, derived from the run's seed and a tag. */
static inline uint64_t cft_subseed(uint64_t tag)
{
    return cft_mix64(cft.seed ^ cft_mix64(tag + UINT64_C(0x3c6ef372fe94f82b)));
}

/* ------------------------------------------------------------------------------------ */
/* Keys                                                                                 */
/* ------------------------------------------------------------------------------------ */

#define CFT_KEY_MAX 48

static inline void cft_put64(uint8_t *p, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Bytes 0..7 are a bijection of id (for a fixed stream), bytes 8..15 a bijection of the
 * stream: two different (stream, id) pairs never give the same key. */
static inline size_t cft_key(uint8_t *buf, uint64_t stream, uint64_t id)
{
    cft_put64(buf, cft_mix64(id + stream * UINT64_C(0xd1b54a32d192ed03)));
    cft_put64(buf + 8, cft_mix64(stream ^ UINT64_C(0xa0761d6478bd642f)));
    return 16;
}

/* As cft_key, then 0..32 more bytes (the length depends on stream and id). */
static inline size_t cft_key_var(uint8_t *buf, uint64_t stream, uint64_t id)
{
    size_t len = cft_key(buf, stream, id);
    uint64_t extra = cft_mix64(id ^ cft_mix64(stream + 77)) % 33;
    uint64_t x = id * 31 + stream;
    for (uint64_t i = 0; i < extra; i++) {
        x = cft_mix64(x + i);
        buf[len++] = (uint8_t)x;
    }
    return len;
}

/* ------------------------------------------------------------------------------------ */
/* Environment                                                                          */
/* ------------------------------------------------------------------------------------ */

/* CF_TEST_SCALE times n, at least `min`. */
static inline uint64_t cft_scaled_min(uint64_t n, uint64_t min)
{
    double v = (double)n * cft.scale;
    uint64_t r = v >= 1.8e19 ? UINT64_MAX : (uint64_t)v;
    return r < min ? min : r;
}

static inline uint64_t cft_scaled(uint64_t n)
{
    return cft_scaled_min(n, 1);
}

/* Checks that a test really exercised what it meant to (a fixed filter did fill up, a
 * growing one did grow) hold for the default sizes and above; a run scaled down with
 * CF_TEST_SCALE < 1 is a quick smoke test and skips them. */
static inline bool cft_full_scale(void)
{
    return cft.scale >= 1.0;
}

static inline void cft_init(const char *name)
{
    cft.name = name;
    cft.seed = CFT_DEFAULT_SEED;
    cft.scale = 1.0;
    cft.checks = 0;
    cft.failed = 0;
    cft.context[0] = '\0';
    if (timespec_get(&cft.start, TIME_UTC) != TIME_UTC)
        memset(&cft.start, 0, sizeof cft.start);

    const char *s = getenv("CF_TEST_SEED");
    if (s != NULL && *s != '\0') {
        char *end = NULL;
        unsigned long long v = strtoull(s, &end, 0);
        if (end != NULL && *end == '\0')
            cft.seed = (uint64_t)v;
        else
            fprintf(stderr, "%s: ignoring unparsable CF_TEST_SEED=%s\n", name, s);
    }
    const char *sc = getenv("CF_TEST_SCALE");
    if (sc != NULL && *sc != '\0') {
        char *end = NULL;
        double v = strtod(sc, &end);
        if (end != NULL && *end == '\0' && v > 0.0 && v < 1e6)
            cft.scale = v;
        else
            fprintf(stderr, "%s: ignoring unusable CF_TEST_SCALE=%s\n", name, sc);
    }
    printf("%s: seed 0x%016llx (CF_TEST_SEED), scale %g (CF_TEST_SCALE)\n", name,
           (unsigned long long)cft.seed, cft.scale);
    fflush(stdout);
}

/* Describe what is being tested right now; printed with every failure. */
static inline CFT_PRINTF(1, 2) void cft_context(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cft.context, sizeof cft.context, fmt, ap);
    va_end(ap);
}

static inline int cft_finish(void)
{
    printf("%s: %llu checks, %llu failed (seed 0x%016llx, %.2f s)\n", cft.name,
           (unsigned long long)cft.checks, (unsigned long long)cft.failed,
           (unsigned long long)cft.seed, cft_elapsed());
    fflush(stdout);
    return cft.failed == 0 ? 0 : 1;
}

/* ------------------------------------------------------------------------------------ */
/* Checks                                                                               */
/* ------------------------------------------------------------------------------------ */

static inline CFT_PRINTF(4, 5) void cft_report(const char *file, int line, const char *expr,
                                               const char *fmt, ...)
{
    cft.failed++;
    if (cft.failed > CFT_MAX_REPORTS) {
        if (cft.failed == CFT_MAX_REPORTS + 1)
            fprintf(stderr, "%s: more failures; only counting from now on\n", cft.name);
        return;
    }
    fprintf(stderr, "%s:%d: FAILED: %s", file, line, expr);
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        fputs(" -- ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fprintf(stderr, "\n    [%s] seed 0x%016llx%s%s\n", cft.name, (unsigned long long)cft.seed,
            cft.context[0] != '\0' ? ", " : "", cft.context);
    fflush(stderr);
}

static inline bool cft_check(bool ok, const char *file, int line, const char *expr)
{
    cft.checks++;
    if (!ok)
        cft_report(file, line, expr, NULL);
    return ok;
}

static inline CFT_PRINTF(5, 6) bool cft_check_msg(bool ok, const char *file, int line,
                                                  const char *expr, const char *fmt, ...)
{
    cft.checks++;
    if (ok)
        return true;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cft_report(file, line, expr, "%s", msg);
    return false;
}

static inline bool cft_check_eq_u(uint64_t a, uint64_t b, const char *file, int line,
                                  const char *ea, const char *eb)
{
    cft.checks++;
    if (a == b)
        return true;
    char expr[256];
    snprintf(expr, sizeof expr, "%s == %s", ea, eb);
    cft_report(file, line, expr, "%llu != %llu", (unsigned long long)a, (unsigned long long)b);
    return false;
}

static inline bool cft_check_eq_i(int64_t a, int64_t b, const char *file, int line, const char *ea,
                                  const char *eb)
{
    cft.checks++;
    if (a == b)
        return true;
    char expr[256];
    snprintf(expr, sizeof expr, "%s == %s", ea, eb);
    cft_report(file, line, expr, "%lld != %lld", (long long)a, (long long)b);
    return false;
}

static inline const char *cft_status_name(cf_status s)
{
    switch (s) {
    case CF_OK:
        return "CF_OK";
    case CF_NOT_FOUND:
        return "CF_NOT_FOUND";
    case CF_FULL:
        return "CF_FULL";
    case CF_EXISTS:
        return "CF_EXISTS";
    case CF_EINVAL:
        return "CF_EINVAL";
    case CF_ENOMEM:
        return "CF_ENOMEM";
    case CF_ECORRUPT:
        return "CF_ECORRUPT";
    case CF_EIO:
        return "CF_EIO";
    case CF_EVERSION:
        return "CF_EVERSION";
    case CF_EREADONLY:
        return "CF_EREADONLY";
    }
    return "(not a cf_status)";
}

static inline bool cft_check_st(cf_status got, cf_status want, const char *file, int line,
                                const char *eg, const char *ew)
{
    cft.checks++;
    if (got == want)
        return true;
    char expr[256];
    snprintf(expr, sizeof expr, "%s == %s", eg, ew);
    cft_report(file, line, expr, "got %s (%d), want %s (%d)", cft_status_name(got), (int)got,
               cft_status_name(want), (int)want);
    return false;
}

static inline bool cft_check_near(double a, double b, double rel, const char *file, int line,
                                  const char *ea, const char *eb)
{
    cft.checks++;
    double diff = fabs(a - b);
    double mag = fabs(b);
    if (diff <= rel * mag || (a == b))
        return true;
    char expr[256];
    snprintf(expr, sizeof expr, "%s ~= %s", ea, eb);
    cft_report(file, line, expr, "%.9g vs %.9g: relative difference %.4g > %.4g", a, b,
               mag > 0.0 ? diff / mag : diff, rel);
    return false;
}

#define CHECK(cond) cft_check((cond) ? true : false, __FILE__, __LINE__, #cond)
#define CHECK_MSG(cond, ...)                                                                       \
    cft_check_msg((cond) ? true : false, __FILE__, __LINE__, #cond, __VA_ARGS__)
#define CHECK_EQ_U(a, b)    cft_check_eq_u((uint64_t)(a), (uint64_t)(b), __FILE__, __LINE__, #a, #b)
#define CHECK_EQ_I(a, b)    cft_check_eq_i((int64_t)(a), (int64_t)(b), __FILE__, __LINE__, #a, #b)
#define CHECK_ST(got, want) cft_check_st((got), (want), __FILE__, __LINE__, #got, #want)
#define CHECK_NEAR(a, b, rel)                                                                      \
    cft_check_near((double)(a), (double)(b), (double)(rel), __FILE__, __LINE__, #a, #b)

/* ------------------------------------------------------------------------------------ */
/* Making filters                                                                       */
/* ------------------------------------------------------------------------------------ */

/* cf_new of config c (written in place: cft_new((cf_config){.capacity = 1000})), checked:
 * NULL after a failed check. */
static inline cf_filter *cft_new(cf_config c)
{
    cf_filter *f = NULL;
    if (!CHECK_ST(cf_new(&c, &f), CF_OK))
        return NULL;
    return f;
}

/* Do a and b serialize to the same bytes (the same filter, bit for bit)? False for a
 * filter that cannot be serialized (one still loading) or if memory runs out. */
static inline bool cft_same_bytes(const cf_filter *a, const cf_filter *b)
{
    size_t na = cf_serialized_size(a), nb = cf_serialized_size(b);
    if (na == 0 || na != nb)
        return false;
    uint8_t *pa = malloc(na), *pb = malloc(nb);
    bool same = pa && pb && cf_serialize(a, pa, na, NULL) == CF_OK &&
                cf_serialize(b, pb, nb, NULL) == CF_OK && memcmp(pa, pb, na) == 0;
    free(pa);
    free(pb);
    return same;
}

/* f's chunks (cf_dump_chunk), loaded into a new filter (cf_load_chunk): NULL after a
 * failed check. */
static inline cf_filter *cft_chunk_copy(const cf_filter *f)
{
    size_t cap = cf_dump_chunk_max(f), len = 0;
    uint8_t *p = malloc(cap ? cap : 1u);
    cf_filter *g = NULL;
    uint64_t cursor = 0, at;
    bool ok = CHECK(p != NULL);
    do {
        at = cursor;
        ok = ok && CHECK_ST(cf_dump_chunk(f, &cursor, p, cap, &len), CF_OK);
        if (ok && len)
            ok = CHECK_MSG(cf_load_chunk(&g, cursor, p, len, NULL) == CF_OK,
                           "the chunk at %llu (%zu bytes) is refused", (unsigned long long)at, len);
    } while (ok && len && cursor != 0);
    free(p);
    if (!ok || !CHECK(g && !cf_is_loading(g))) {
        cf_free(g);
        return NULL;
    }
    return g;
}

/* The property every accepted filter keeps: its bytes validate, and every way back in
 * (cf_deserialize plain and CF_CONCURRENT, cf_load of its cf_save, a mapped open, its
 * chunks) gives a filter of the same bytes, which again takes a write (an add and the
 * delete of the same key, or the write's refusal) and still saves and loads alike.
 * `path`: a scratch file. False after a failed check. */
static inline bool cft_round_trips(const cf_filter *f, const char *path)
{
    size_t n = cf_serialized_size(f);
    uint8_t *b = n ? malloc(n) : NULL;
    const char *why = NULL;
    if (!CHECK(b) || !CHECK_ST(cf_serialize(f, b, n, NULL), CF_OK)) {
        free(b);
        return false;
    }
    cf_status valid = cf_validate(b, n, &why); /* before the check reads why */
    if (!CHECK_MSG(valid == CF_OK, "its own bytes fail validation: %s", why ? why : "?")) {
        free(b);
        return false;
    }
    uint64_t failed = cft.failed;
    cf_filter *copies[5] = {NULL, NULL, NULL, NULL, NULL};
    CHECK_ST(cf_deserialize(b, n, NULL, &copies[0]), CF_OK);
    CHECK_ST(cf_deserialize_flags(b, n, CF_CONCURRENT, NULL, &copies[1]), CF_OK);
    if (CHECK_ST(cf_save(f, path), CF_OK)) {
        CHECK_ST(cf_load(path, NULL, &copies[2]), CF_OK);
        CHECK_ST(cf_load_flags(path, CF_CONCURRENT, NULL, &copies[3]), CF_OK);
        cf_filter *m = NULL;
        if (CHECK_ST(cf_open_mapped(path, CF_MAP_VERIFY, NULL, &m), CF_OK))
            CHECK_MSG(cft_same_bytes(f, m), "the mapped file serializes differently");
        cf_free(m);
    }
    copies[4] = cft_chunk_copy(f);
    for (unsigned i = 0; i < 5; i++) {
        if (!copies[i])
            continue;
        CHECK_MSG(cft_same_bytes(f, copies[i]), "copy %u serializes differently", i);
        /* a write and its undoing: the copy still saves what loads */
        static const char key[] = "cft-round-trip";
        cf_status st = cf_add(copies[i], key, sizeof key);
        if (st == CF_OK)
            CHECK_ST(cf_delete(copies[i], key, sizeof key), CF_OK);
        size_t m = cf_serialized_size(copies[i]);
        uint8_t *c = m ? malloc(m) : NULL;
        why = NULL;
        if (CHECK(c) && CHECK_ST(cf_serialize(copies[i], c, m, NULL), CF_OK)) {
            valid = cf_validate(c, m, &why);
            CHECK_MSG(valid == CF_OK, "copy %u, written after a write, fails validation: %s", i,
                      why ? why : "?");
        }
        free(c);
        cf_free(copies[i]);
    }
    free(b);
    return cft.failed == failed;
}

/* ------------------------------------------------------------------------------------ */
/* Stats helpers                                                                        */
/* ------------------------------------------------------------------------------------ */

static inline cf_stats cft_stats(const cf_filter *f)
{
    cf_stats s;
    memset(&s, 0, sizeof s);
    cf_get_stats(f, &s);
    return s;
}

/* Every field equal (the doubles too: the same state must give the same figures). */
static inline bool cft_stats_equal(const cf_stats *a, const cf_stats *b)
{
    return a->items == b->items && a->slots == b->slots && a->buckets == b->buckets &&
           a->bytes == b->bytes && a->sub_filters == b->sub_filters &&
           a->fingerprint_bits == b->fingerprint_bits && a->bucket_size == b->bucket_size &&
           a->load_factor == b->load_factor && a->fpr == b->fpr && a->stashed == b->stashed;
}

static inline void cft_stats_print(const char *label, const cf_stats *s)
{
    fprintf(stderr,
            "    %s: items %llu slots %llu buckets %llu bytes %llu sub_filters %u f %u b %u "
            "load %.6f fpr %.6g stashed %llu\n",
            label, (unsigned long long)s->items, (unsigned long long)s->slots,
            (unsigned long long)s->buckets, (unsigned long long)s->bytes, s->sub_filters,
            s->fingerprint_bits, s->bucket_size, s->load_factor, s->fpr,
            (unsigned long long)s->stashed);
}

#define CHECK_STATS_EQ(a, b)                                                                       \
    do {                                                                                           \
        if (!CHECK_MSG(cft_stats_equal(&(a), &(b)), "stats differ")) {                             \
            cft_stats_print(#a, &(a));                                                             \
            cft_stats_print(#b, &(b));                                                             \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------------------------ */
/* Tracking allocator                                                                   */
/* ------------------------------------------------------------------------------------ */

#define CFT_ALLOC_HDR   32u /* keeps the user block aligned like malloc's (16) */
#define CFT_ALLOC_MAGIC UINT64_C(0xa110ca7edb10c4ed)

typedef struct cft_alloc {
    cf_allocator a;       /* hand &t->a to cf_config.allocator; a.ctx == t */
    uint64_t calls;       /* alloc calls, failed ones included */
    uint64_t failures;    /* alloc calls that returned NULL */
    uint64_t frees;       /* free calls with a non-NULL pointer */
    uint64_t null_frees;  /* free calls with NULL */
    uint64_t bad_frees;   /* free calls with a pointer this allocator did not hand out */
    uint64_t live;        /* blocks handed out and not freed */
    uint64_t live_bytes;  /* their requested sizes */
    uint64_t total_bytes; /* sum of every successful request */
    uint64_t fail_at;     /* 0: never fail; else the call number (calls after the increment)
                             that fails */
    bool fail_persist;    /* fail every call from fail_at on */
    uint64_t max_size;    /* refuse (NULL) requests above this; 0 = no limit */
} cft_alloc;

static inline void *cft_alloc_fn(void *ctx, size_t size)
{
    cft_alloc *t = (cft_alloc *)ctx;
    t->calls++;
    if (t->fail_at != 0 && (t->calls == t->fail_at || (t->fail_persist && t->calls > t->fail_at))) {
        t->failures++;
        return NULL;
    }
    if ((t->max_size != 0 && (uint64_t)size > t->max_size) || size > SIZE_MAX - CFT_ALLOC_HDR) {
        t->failures++;
        return NULL;
    }
    unsigned char *p = (unsigned char *)malloc(size + CFT_ALLOC_HDR);
    if (p == NULL) {
        t->failures++;
        return NULL;
    }
    uint64_t magic = CFT_ALLOC_MAGIC, sz = (uint64_t)size;
    memcpy(p, &magic, sizeof magic);
    memcpy(p + 8, &sz, sizeof sz);
    /* Garbage, not zeros: the header says alloc need not zero memory. */
    memset(p + CFT_ALLOC_HDR, 0xA5, size);
    t->live++;
    t->live_bytes += sz;
    t->total_bytes += sz;
    return p + CFT_ALLOC_HDR;
}

static inline void cft_free_fn(void *ctx, void *ptr)
{
    cft_alloc *t = (cft_alloc *)ctx;
    if (ptr == NULL) {
        t->null_frees++;
        return;
    }
    unsigned char *p = (unsigned char *)ptr - CFT_ALLOC_HDR;
    uint64_t magic, sz;
    memcpy(&magic, p, sizeof magic);
    memcpy(&sz, p + 8, sizeof sz);
    if (magic != CFT_ALLOC_MAGIC || t->live == 0 || sz > t->live_bytes) {
        t->bad_frees++;
        return; /* leak it rather than crash */
    }
    magic = 0;
    memcpy(p, &magic, sizeof magic);
    t->frees++;
    t->live--;
    t->live_bytes -= sz;
    free(p);
}

static inline void cft_alloc_init(cft_alloc *t)
{
    memset(t, 0, sizeof *t);
    t->a.alloc = cft_alloc_fn;
    t->a.free = cft_free_fn;
    t->a.ctx = t;
}

/* Keys [0, n) of `stream` (cft_key) that f does not find: 0 is no false negative. */
static inline uint64_t cft_missing(const cf_filter *f, uint64_t stream, uint64_t n)
{
    uint8_t key[CFT_KEY_MAX];
    uint64_t missing = 0;
    for (uint64_t id = 0; id < n; id++) {
        size_t len = cft_key(key, stream, id);
        missing += !cf_contains(f, key, len);
    }
    return missing;
}

/* An allocator (malloc's) that counts its calls from threads other than the one that set
 * it up: a library's own threads must make none, a caller's allocator need not be
 * thread-safe. A thread-local's address tells the threads apart. */
static _Thread_local char cft_thread_mark;

typedef struct cft_thread_alloc {
    cf_allocator a; /* hand &t->a to a filter; a.ctx == t */
    const char *owner;
    atomic_uint elsewhere;
} cft_thread_alloc;

static inline void cft_thread_note(cft_thread_alloc *t)
{
    if (&cft_thread_mark != t->owner)
        atomic_fetch_add(&t->elsewhere, 1u);
}

static inline void *cft_thread_alloc_fn(void *ctx, size_t size)
{
    cft_thread_note((cft_thread_alloc *)ctx);
    return malloc(size);
}

static inline void cft_thread_free_fn(void *ctx, void *ptr)
{
    cft_thread_note((cft_thread_alloc *)ctx);
    free(ptr);
}

static inline void cft_thread_alloc_init(cft_thread_alloc *t)
{
    t->a.alloc = cft_thread_alloc_fn;
    t->a.free = cft_thread_free_fn;
    t->a.ctx = t;
    t->owner = &cft_thread_mark;
    atomic_init(&t->elsewhere, 0u);
}

/* Make the nth next call fail (n >= 1); with persist, that call and every later one. */
static inline void cft_alloc_arm(cft_alloc *t, uint64_t nth, bool persist)
{
    t->fail_at = t->calls + nth;
    t->fail_persist = persist;
}

static inline void cft_alloc_disarm(cft_alloc *t)
{
    t->fail_at = 0;
    t->fail_persist = false;
}

#define CHECK_ALLOC_CLEAN(t)                                                                       \
    do {                                                                                           \
        CHECK_EQ_U((t)->live, 0);                                                                  \
        CHECK_EQ_U((t)->live_bytes, 0);                                                            \
        CHECK_EQ_U((t)->bad_frees, 0);                                                             \
    } while (0)

#endif /* CF_TESTUTIL_H */
