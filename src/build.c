/*
 * build.c - a filter built from a set of hashes: cf_sort_hashes and cf_build_hashes.
 *
 * Sorting the hashes by their index bits (h << f, then the fingerprint: rotl(h, f)) puts
 * them in the order of their first buckets, drops repeats next to each other, and lets
 * the adds walk the table from one end to the other. In a segmented table (mapping.h)
 * both buckets of a key, and every bucket an eviction reaches from them, lie in the key's
 * segment: the keys of one segment change nothing outside it. So threads that each add
 * the keys of a run of whole segments, in order, write the same bytes as one thread
 * adding every key in order: that is the promise, for any number of threads.
 *
 * Each thread adds through a filter of its own (a shadow: the same settings, fixed,
 * over the same table bytes), so that item counts, the eviction search's memory and the
 * stash are its own. An add that finds no room changes no table (the search plans its
 * moves before making any), only the stash or the filter's size. In a fixed filter it
 * goes to the stash, or is refused once the stash is full: the threads note such keys and
 * go on, and afterwards the first of them in key order fill the stash, the others are
 * counted refused, as one add after another would have had it. In a growing filter it
 * makes the filter grow, and everything after it goes elsewhere: the thread that meets it
 * stops there, the segments of later threads are cleared, and the rest of the keys go in
 * one after the other through the filter itself, exactly as they would have.
 *
 * Neighbouring segments share no byte (a segment is 2^16 buckets, whole bytes), but a
 * write may load and store 8 bytes from a bucket's first byte, reaching into the next
 * segment's first bucket. So no two threads ever write neighbouring segments at once:
 * each first adds the keys of all its segments but its last, and after every thread has,
 * the keys of its last.
 */
#include "build.h"
#include "image.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* Runs of hashes this short are sorted by insertion rather than by another radix pass. */
#define CF__SORT_SMALL     32u
/* Fewer hashes than this per thread are not worth one (to sort or to fill): a thread's
 * start costs tens of microseconds. */
#define CF__BUILD_MIN_KEYS ((size_t)1 << 16)

/* The sort key of hash h for f-bit fingerprints: its index bits on top (rotl(h, f)). */
static uint64_t cf__order_key(uint64_t h, unsigned f)
{
    return h << f | h >> (64u - f);
}

static uint64_t cf__order_hash(uint64_t k, unsigned f)
{
    return k >> f | k << (64u - f);
}

unsigned cf__threads_for(unsigned want, size_t n, size_t per)
{
    if (want == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        want =
            cpus > 0 ? (unsigned)(cpus < CF__BUILD_THREADS_MAX ? cpus : CF__BUILD_THREADS_MAX) : 1u;
    }
    if (want > CF__BUILD_THREADS_MAX)
        want = CF__BUILD_THREADS_MAX;
    size_t most = n / per;
    if ((size_t)want > most)
        want = most > 0 ? (unsigned)most : 1u;
    return want;
}

void cf__run_jobs(void *(*worker)(void *), void *jobs, size_t size, unsigned n)
{
    pthread_t threads[CF__BUILD_THREADS_MAX];
    bool started[CF__BUILD_THREADS_MAX] = {false};
    for (unsigned i = 1; i < n; i++)
        started[i] = pthread_create(&threads[i], NULL, worker, (char *)jobs + i * size) == 0;
    worker(jobs);
    for (unsigned i = 1; i < n; i++) {
        if (started[i])
            pthread_join(threads[i], NULL);
        else
            worker((char *)jobs + i * size);
    }
}

/* Where slice i of n items split among `jobs` starts (slice `jobs` starts at the end). */
static size_t cf__slice_at(size_t n, unsigned jobs, unsigned i)
{
    return i == jobs ? n : n / jobs * i;
}

/* ------------------------------------------------------------------------------------ */
/* Sorting                                                                              */
/* ------------------------------------------------------------------------------------ */

/* Puts a[0 .. n) in order of the byte at `shift`: run d, the values whose byte is d, at
 * a[start[d] .. end[d]), each carried to the next free place of its run (a cycle of
 * swaps). */
static void cf__split_runs(uint64_t *a, size_t n, unsigned shift, size_t start[256],
                           size_t end[256])
{
    size_t next[256];
    memset(start, 0, 256 * sizeof *start);
    for (size_t i = 0; i < n; i++)
        start[(a[i] >> shift) & 0xff]++;
    size_t sum = 0;
    for (unsigned d = 0; d < 256; d++) {
        size_t count = start[d];
        start[d] = next[d] = sum;
        end[d] = sum += count;
    }
    for (unsigned d = 0; d < 256; d++) {
        while (next[d] < end[d]) {
            uint64_t v = a[next[d]];
            unsigned vd = (unsigned)(v >> shift) & 0xff;
            while (vd != d) {
                uint64_t w = a[next[vd]];
                a[next[vd]++] = v;
                v = w;
                vd = (unsigned)(v >> shift) & 0xff;
            }
            a[next[d]++] = v;
        }
    }
}

/* Sorts a[0 .. n) in place: a most-significant-digit radix sort on the byte at `shift`,
 * then the next byte within each run. Hashes are uniform, so a few passes leave runs
 * short enough for insertion sort. */
static void cf__radix_sort(uint64_t *a, size_t n, unsigned shift)
{
    if (n <= CF__SORT_SMALL) {
        for (size_t i = 1; i < n; i++) {
            uint64_t v = a[i];
            size_t j = i;
            for (; j > 0 && a[j - 1] > v; j--)
                a[j] = a[j - 1];
            a[j] = v;
        }
        return;
    }
    size_t start[256], end[256];
    cf__split_runs(a, n, shift, start, end);
    if (shift == 0)
        return;
    for (unsigned d = 0; d < 256; d++)
        cf__radix_sort(a + start[d], end[d] - start[d], shift - 8);
}

/* A parallel sort's job: its slice of the input, [from, to), whose top bytes it counts
 * and then scatters to their runs of the output, at[d] onwards; then the runs of the
 * output it takes next (through `next`), which it sorts in place. */
typedef struct cf__sort_job {
    const uint64_t *in;
    uint64_t *out;
    size_t from, to;
    size_t count[256], at[256];
    const size_t *start, *end; /* the output's runs, once every job has counted */
    atomic_uint *next;
} cf__sort_job;

static void *cf__count_worker(void *p)
{
    cf__sort_job *j = p;
    memset(j->count, 0, sizeof j->count);
    for (size_t i = j->from; i < j->to; i++)
        j->count[j->in[i] >> 56]++;
    return NULL;
}

static void *cf__scatter_worker(void *p)
{
    cf__sort_job *j = p;
    for (size_t i = j->from; i < j->to; i++)
        j->out[j->at[j->in[i] >> 56]++] = j->in[i];
    return NULL;
}

static void *cf__sort_worker(void *p)
{
    const cf__sort_job *j = p;
    for (unsigned d; (d = atomic_fetch_add(j->next, 1u)) < 256u;)
        cf__radix_sort(j->out + j->start[d], j->end[d] - j->start[d], 48);
    return NULL;
}

/* Sorts in[0 .. n) with `jobs` threads into out[0 .. n): each job counts the top bytes
 * of its slice, then moves its slice to its places in the runs those counts give, and the
 * 256 runs are sorted by whichever job is free. False, having done nothing, where the
 * jobs' memory is not there. */
static bool cf__sort_parallel(const uint64_t *in, uint64_t *out, size_t n, unsigned jobs)
{
    cf__sort_job *job = cf__default_allocator.alloc(NULL, jobs * sizeof *job);
    if (!job)
        return false;
    size_t start[256], end[256];
    atomic_uint next = 0;
    for (unsigned i = 0; i < jobs; i++)
        job[i] = (cf__sort_job){.in = in,
                                .out = out,
                                .from = cf__slice_at(n, jobs, i),
                                .to = cf__slice_at(n, jobs, i + 1),
                                .start = start,
                                .end = end,
                                .next = &next};
    cf__run_jobs(cf__count_worker, job, sizeof job[0], jobs);
    size_t sum = 0;
    for (unsigned d = 0; d < 256; d++) {
        start[d] = sum;
        for (unsigned i = 0; i < jobs; i++) {
            job[i].at[d] = sum;
            sum += job[i].count[d];
        }
        end[d] = sum;
    }
    cf__run_jobs(cf__scatter_worker, job, sizeof job[0], jobs);
    cf__run_jobs(cf__sort_worker, job, sizeof job[0], jobs);
    cf__default_allocator.free(NULL, job);
    return true;
}

cf_status cf_sort_hashes(uint64_t *hashes, size_t n, unsigned fingerprint_bits, unsigned threads,
                         size_t *distinct)
{
    if ((!hashes && n > 0) || !distinct || fingerprint_bits < CF_MIN_FINGERPRINT_BITS ||
        fingerprint_bits > CF_MAX_FINGERPRINT_BITS || n > SIZE_MAX / sizeof *hashes)
        return CF_EINVAL;
    unsigned f = fingerprint_bits;
    for (size_t i = 0; i < n; i++)
        hashes[i] = cf__order_key(hashes[i], f);
    unsigned jobs = cf__threads_for(threads, n, CF__BUILD_MIN_KEYS);
    /* Several threads sort out of place (then back, dropping repeats); without the memory
     * for it, one sorts in place. */
    uint64_t *out = jobs > 1 ? cf__default_allocator.alloc(NULL, n * sizeof *out) : NULL;
    const uint64_t *from = hashes;
    if (out && cf__sort_parallel(hashes, out, n, jobs))
        from = out;
    else
        cf__radix_sort(hashes, n, 56);
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        if (d == 0 || from[i] != cf__order_key(hashes[d - 1], f))
            hashes[d++] = cf__order_hash(from[i], f);
    if (out)
        cf__default_allocator.free(NULL, out);
    *distinct = d;
    return CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Filling                                                                              */
/* ------------------------------------------------------------------------------------ */

/* Hashes each cf_add_many call of the sequential fill takes: long enough for its
 * prefetching, short enough for the statuses on the stack (2 KiB). */
#define CF__BUILD_BATCH 512u

/* hashes[0 .. n) added to f in order, their outcomes counted into *r; the first status
 * other than CF_OK and CF_FULL, if any, into *bad. */
static void cf__fill_in_order(cf_filter *f, const uint64_t *hashes, size_t n, cf_build_report *r,
                              cf_status *bad)
{
    cf_status status[CF__BUILD_BATCH];
    for (size_t at = 0; at < n; at += CF__BUILD_BATCH) {
        size_t k = n - at < CF__BUILD_BATCH ? n - at : CF__BUILD_BATCH;
        cf_add_many(f, hashes + at, k, 0, status);
        for (size_t i = 0; i < k; i++) {
            r->added += status[i] == CF_OK;
            r->full += status[i] == CF_FULL;
            if (status[i] != CF_OK && status[i] != CF_FULL && *bad == CF_OK)
                *bad = status[i];
        }
    }
}

/* One thread's part: the keys of segments [first, last], hashes[from .. to), the last
 * segment's from `split` on; its shadow; where it stopped (`stop`, or `to` if it did
 * not) and what it added. */
typedef struct cf__fill_job {
    cf_filter *shadow;
    const uint64_t *hashes;
    size_t from, split, to;
    size_t stop;
    uint64_t end;   /* one past its last segment */
    bool last_part; /* the round: the last segment's keys, else the others */
    bool fixed;     /* keys that find no room are noted (the shadow's stash), not stopped at */
    size_t refused; /* keys the shadow refused once its stash was full */
} cf__fill_job;

static void *cf__fill_worker(void *p)
{
    cf__fill_job *j = p;
    size_t from = j->last_part ? j->split : j->from, to = j->last_part ? j->to : j->split;
    if (j->stop != j->to) /* stopped in the first round */
        return NULL;
    if (j->fixed) { /* batched: the shadow's stash and refusals keep the key order */
        cf_status status[CF__BUILD_BATCH];
        for (size_t at = from; at < to; at += CF__BUILD_BATCH) {
            size_t k = to - at < CF__BUILD_BATCH ? to - at : CF__BUILD_BATCH;
            cf_add_many(j->shadow, j->hashes + at, k, 0, status);
            for (size_t i = 0; i < k; i++)
                j->refused += status[i] != CF_OK;
        }
        return NULL;
    }
    for (size_t i = from; i < to; i++) {
        /* Anything but a slot of the table (a stash entry) makes a growing filter grow:
         * the rest is the filter's to do, in key order (see the top). */
        if (cf_add_hash(j->shadow, j->hashes[i]) != CF_OK || j->shadow->stash_n != 0) {
            j->stop = i;
            return NULL;
        }
    }
    return NULL;
}

cf_status cf__shadow_of(const cf_filter *f, cf_filter **out)
{
    cf_config c, resolved;
    cf__params p;
    uint64_t buckets;
    size_t bytes;
    cf_get_config(f, &c);
    c.expansion = 0;
    c.fpr_bound = 0.0;
    c.max_sub_filters = 0;
    c.flags &= ~(unsigned)(CF_GROW_SAME_WIDTH | CF_CONCURRENT);
    cf_status st = cf__config_sized(&c, sizeof c, &resolved, &p, &buckets, &bytes, NULL);
    if (st != CF_OK)
        return st;
    const cf_allocator *a = cf__alloc_of(f);
    st = cf__filter_make(&p, a == &cf__default_allocator ? NULL : a, 1, buckets, false,
                         cf__first_ops(&p), out);
    if (st != CF_OK)
        return st;
    if (!cf__stash_room(*out) || !cf__search_ready(*out)) {
        cf_free(*out);
        return CF_ENOMEM;
    }
    (*out)->t0.data = f->t0.data;
    return CF_OK;
}

void cf__shadow_free(cf_filter *s)
{
    s->t0.data = NULL;
    cf_free(s);
}

/* The segment of the first bucket of hash h in f's first table. */
static uint64_t cf__segment_of(const cf_filter *f, uint64_t h)
{
    cf__key k = cf__key_bits(f->fp_bits, h);
    return cf__mulhi(k.x, f->t0.buckets) >> cf__shape0(f)->seg;
}

/* The bytes of one segment of tables of shape s (2^16 buckets of whole bytes, or of 4-bit
 * slots: a whole number of bytes). */
static uint64_t cf__segment_bytes(const cf__shape *s)
{
    return (UINT64_C(1) << s->seg) * s->bucket_bits / 8u;
}

/* The first index in hashes[0 .. n) whose segment is at least s (they are in order). */
static size_t cf__first_in(const cf_filter *f, const uint64_t *hashes, size_t n, uint64_t s)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cf__segment_of(f, hashes[mid]) < s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The parallel fill of the segmented filter f in its simple state with `jobs` threads (at
 * most one per two segments): hashes[0 .. *done) added, *done set where the threads
 * stopped. False, having done nothing, where a shadow cannot be made. */
static bool cf__fill_segments(cf_filter *f, const uint64_t *hashes, size_t n, unsigned jobs,
                              size_t *done, cf_build_report *r)
{
    cf__fill_job job[CF__BUILD_THREADS_MAX];
    uint64_t segments = f->t0.buckets >> cf__shape0(f)->seg;
    uint64_t first = 0; /* job i's first segment */
    for (unsigned i = 0; i < jobs; i++) {
        /* About n / jobs keys each, whole segments, and at least two segments each. */
        uint64_t next =
            i + 1 == jobs ? segments : cf__segment_of(f, hashes[cf__slice_at(n, jobs, i + 1)]);
        uint64_t least = first + 2, most = segments - 2u * (jobs - 1u - i);
        next = next < least ? least : next > most ? most : next;
        size_t from = cf__first_in(f, hashes, n, first), to = cf__first_in(f, hashes, n, next);
        job[i] = (cf__fill_job){.hashes = hashes,
                                .from = from,
                                .split = cf__first_in(f, hashes, n, next - 1u),
                                .to = to,
                                .stop = to,
                                .end = next,
                                .fixed = f->expansion == 0};
        if (cf__shadow_of(f, &job[i].shadow) != CF_OK) {
            for (unsigned k = 0; k < i; k++)
                cf__shadow_free(job[k].shadow);
            return false;
        }
        first = next;
    }
    for (unsigned round = 0; round < 2; round++) {
        for (unsigned i = 0; i < jobs; i++)
            job[i].last_part = round == 1;
        cf__run_jobs(cf__fill_worker, job, sizeof job[0], jobs);
    }
    /* The first job that stopped early ends the parallel part; the later ones' segments
     * go back to empty. */
    unsigned stopped = jobs;
    for (unsigned i = 0; i < jobs && stopped == jobs; i++)
        if (job[i].stop != job[i].to)
            stopped = i;
    const cf__shape *s = cf__shape0(f);
    for (unsigned i = 0; i <= stopped && i < jobs; i++) {
        const cf_filter *sh = job[i].shadow;
        unsigned stashed = job[i].fixed ? sh->stash_n : 0u;
        f->t0.items += sh->t0.items;
        r->added += job[i].stop - job[i].from - stashed - job[i].refused;
        /* A fixed filter's keys that found no room, in key order (a shadow stashes its
         * first ones, then refuses): the filter's stash takes the first of them, as many
         * as it has room for, and refuses the others (it is empty in the simple state). */
        for (unsigned e = 0; e < stashed; e++) {
            if (f->stash_n < CF__STASH_SLOTS && cf__stash_room(f)) {
                cf__stash_push(f, cf__stash_of(sh)[e]);
                r->added++;
            } else {
                r->full++;
            }
        }
        r->full += job[i].refused;
    }
    for (unsigned i = 0; i < jobs; i++)
        cf__shadow_free(job[i].shadow);
    if (stopped < jobs) {
        uint64_t seg_bytes = cf__segment_bytes(s);
        uint64_t from_seg = job[stopped].end;
        memset(f->t0.data + from_seg * seg_bytes, 0, (size_t)((segments - from_seg) * seg_bytes));
        *done = job[stopped].stop;
    } else {
        *done = n;
    }
    return true;
}

/* Are hashes[0 .. n) in build order for f-bit fingerprints, without repeats? */
static bool cf__in_order(const uint64_t *hashes, size_t n, unsigned f)
{
    for (size_t i = 1; i < n; i++)
        if (cf__order_key(hashes[i - 1], f) >= cf__order_key(hashes[i], f))
            return false;
    return true;
}

/* A thread's share of that check: hashes[from - 1 .. to) (the one before its first too). */
typedef struct cf__order_job {
    const uint64_t *hashes;
    size_t from, to;
    unsigned f;
    bool ok;
} cf__order_job;

static void *cf__order_worker(void *p)
{
    cf__order_job *j = p;
    size_t first = j->from ? j->from - 1u : 0u;
    j->ok = cf__in_order(j->hashes + first, j->to - first, j->f);
    return NULL;
}

/* cf__in_order with `jobs` threads, each a slice (a pass over memory: on a filter filled
 * by threads, one thread's would be a good part of the time). */
static bool cf__in_order_by(const uint64_t *hashes, size_t n, unsigned f, unsigned jobs)
{
    cf__order_job job[CF__BUILD_THREADS_MAX];
    for (unsigned i = 0; i < jobs; i++)
        job[i] = (cf__order_job){hashes, cf__slice_at(n, jobs, i), cf__slice_at(n, jobs, i + 1), f,
                                 false};
    cf__run_jobs(cf__order_worker, job, sizeof job[0], jobs);
    for (unsigned i = 0; i < jobs; i++)
        if (!job[i].ok)
            return false;
    return true;
}

cf_status cf_build_hashes(cf_filter *f, const uint64_t *hashes, size_t n, unsigned threads,
                          cf_build_report *report)
{
    if (!f || (!hashes && n > 0) || !report)
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    if (n == 0) { /* (hashes may be NULL then: no pointer is made from it) */
        *report = (cf_build_report){.added = 0, .full = 0, .threads = 1};
        return CF_OK;
    }
    cf_config c;
    cf_get_config(f, &c);
    /* Threads for a segmented plain filter in its simple state with two segments each. */
    const cf__shape *s = cf__shape0(f);
    unsigned jobs = 1;
    if (cf__kind_of(f) == &cf__kind_plain && s->seg && cf__is_simple(f) && f->tables == &f->t0) {
        uint64_t pairs = (f->t0.buckets >> s->seg) / 2u;
        jobs = cf__threads_for(threads, n, CF__BUILD_MIN_KEYS);
        jobs = (uint64_t)jobs > pairs ? (unsigned)(pairs ? pairs : 1u) : jobs;
    }
    if (!cf__in_order_by(hashes, n, c.fingerprint_bits, jobs))
        return CF_EINVAL;
    cf_build_report r = {.added = 0, .full = 0, .threads = 1};
    cf_status bad = CF_OK;
    size_t done = 0;
    if (jobs > 1 && cf__fill_segments(f, hashes, n, jobs, &done, &r))
        r.threads = jobs;
    cf__fill_in_order(f, hashes + done, n - done, &r, &bad);
    *report = r;
    return bad;
}

/* ------------------------------------------------------------------------------------ */
/* Segments built apart                                                                 */
/* ------------------------------------------------------------------------------------ */

/* A config's settings and first table's buckets, without a filter; CF_EINVAL for
 * RedisBloom's layout or a window, whose keys map their own way, and for CF_FAST_HASH,
 * whose keys a caller without the filter would hash otherwise (cf_hash_seeded is XXH3). */
static cf_status cf__sized(const cf_config *config, cf__params *p, uint64_t *buckets)
{
    cf_config c;
    size_t bytes;
    cf_status st = cf__config_sized(config, sizeof *config, &c, p, buckets, &bytes, NULL);
    if (st == CF_OK && (p->redisbloom || p->fast_hash || c.generations))
        st = CF_EINVAL;
    return st;
}

cf_status cf_config_mapping(const cf_config *config, cf_mapping *out)
{
    cf__params p;
    uint64_t buckets;
    if (!out)
        return CF_EINVAL;
    cf_status st = cf__sized(config, &p, &buckets);
    if (st != CF_OK)
        return st;
    out->buckets = buckets;
    out->tag_bits = p.shape.f;
    out->segment_bits = p.shape.seg;
    return CF_OK;
}

/* The settings of a segmented config, sized: its params, its first table's buckets and
 * the bytes of one segment; CF_EINVAL for another config. */
static cf_status cf__segmented(const cf_config *config, cf__params *p, uint64_t *buckets,
                               uint64_t *seg_bytes)
{
    cf_status st = cf__sized(config, p, buckets);
    if (st == CF_OK && !p->shape.seg)
        st = CF_EINVAL;
    if (st == CF_OK)
        *seg_bytes = cf__segment_bytes(&p->shape);
    return st;
}

cf_status cf_segments_size(const cf_config *config, uint64_t first, uint64_t end, size_t *bytes)
{
    cf__params p;
    uint64_t buckets, seg_bytes;
    if (!bytes)
        return CF_EINVAL;
    cf_status st = cf__segmented(config, &p, &buckets, &seg_bytes);
    if (st != CF_OK)
        return st;
    if (first >= end || end > buckets >> p.shape.seg)
        return CF_EINVAL;
    *bytes = (size_t)((end - first) * seg_bytes); /* at most the table, which fits size_t */
    return CF_OK;
}

/* Segments [first, end) of a table of `buckets` buckets are a table of their own (both
 * buckets of each of their keys, and every eviction, stay in them): a table of
 * (end - first) segments holds their keys the same way, each key at its bucket less the
 * range's first, given the hash of a key with the same fingerprint whose first bucket
 * that is (cf__walk's, in build order). */
/* The segment of hash h's first bucket in a table of `buckets` buckets and segments of
 * 2^seg, for f-bit fingerprints. */
static uint64_t cf__segment_in(uint64_t h, unsigned f, uint64_t buckets, unsigned seg)
{
    return cf__mulhi(h << f, buckets) >> seg;
}

/* The settings of a fixed segmented config whose segments [first, end) are len bytes: its
 * params and its first table's buckets; CF_EINVAL for another config or range. */
static cf_status cf__range_sized(const cf_config *config, uint64_t first, uint64_t end, size_t len,
                                 cf__params *p, uint64_t *buckets)
{
    uint64_t seg_bytes;
    cf_status st = cf__segmented(config, p, buckets, &seg_bytes);
    if (st == CF_OK && (p->expansion != 0 || first >= end || end > *buckets >> p->shape.seg ||
                        len != (end - first) * seg_bytes))
        st = CF_EINVAL;
    return st;
}

/* The key with fingerprint fp whose first bucket is walk w's (over the range the table of
 * `part` is) added to part; full_hash is its hash in the whole table. A key that finds no
 * room changes no table (the part's stash takes its first ones, then refusals): it is
 * noted in *r, and the whole filter's stash decides. CF_OK, or CF_ENOMEM (the part's
 * stash's memory). */
static cf_status cf__range_add(cf_filter *part, const cf__walk *w, uint32_t fp, uint64_t full_hash,
                               cf_segments_report *r)
{
    unsigned stashed = part->stash_n;
    cf_status st = cf_add_hash(part, cf__walk_hash(w, fp));
    if (st == CF_ENOMEM)
        return st;
    if (st == CF_OK && part->stash_n == stashed) {
        r->added++;
        return CF_OK;
    }
    if (r->unplaced < CF_STASH_SLOTS)
        r->first_unplaced[r->unplaced] = full_hash;
    r->unplaced++;
    return CF_OK;
}

cf_status cf_build_segments(const cf_config *config, uint64_t first, uint64_t end,
                            const uint64_t *hashes, size_t n, void *out, size_t out_len,
                            cf_segments_report *report)
{
    cf__params p;
    uint64_t buckets;
    if (!config || (!hashes && n > 0) || !out || !report)
        return CF_EINVAL;
    cf_status st = cf__range_sized(config, first, end, out_len, &p, &buckets);
    if (st != CF_OK)
        return st;
    unsigned f = p.shape.f, seg = p.shape.seg;
    if (!cf__in_order(hashes, n, f))
        return CF_EINVAL;
    /* In order: the first and the last in the range are all in it. */
    if (n > 0 && (cf__segment_in(hashes[0], f, buckets, seg) < first ||
                  cf__segment_in(hashes[n - 1], f, buckets, seg) >= end))
        return CF_EINVAL;
    uint64_t base = first << seg, range = (end - first) << seg;
    p.concurrent = false;
    cf_filter *part;
    st = cf__filter_make(&p, config->allocator, 1, range, true, cf__first_ops(&p), &part);
    if (st != CF_OK)
        return st;
    cf__walk w;
    if (!cf__walk_init(&w, f, range)) { /* range <= buckets, which the config checked */
        cf_free(part);
        return CF_EINVAL;
    }
    uint64_t at = 0; /* the walk's bucket */
    cf_segments_report r = {0};
    for (size_t i = 0; i < n && st == CF_OK; i++) {
        cf__key k = cf__key_bits(f, hashes[i]);
        uint64_t b = cf__mulhi(k.x, buckets) - base;
        for (; at < b; at++)
            cf__walk_next(&w);
        st = cf__range_add(part, &w, k.fp, hashes[i], &r);
    }
    if (st == CF_OK) {
        memcpy(out, part->t0.data, out_len);
        r.items = part->t0.items;
        *report = r;
    }
    cf_free(part);
    return st;
}

cf_status cf_put_segments(cf_filter *f, uint64_t first, uint64_t end, const void *bytes, size_t len)
{
    if (!f || !bytes)
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    const cf__shape *s = cf__shape0(f);
    if (cf__kind_of(f) != &cf__kind_plain || !s->seg || f->ntables != 1 || f->tables != &f->t0)
        return CF_EINVAL;
    uint64_t seg_bytes = cf__segment_bytes(s);
    if (first >= end || end > f->t0.buckets >> s->seg || len != (end - first) * seg_bytes)
        return CF_EINVAL;
    /* Checked in a copy with the padding probes read past the last bucket: a bucket out
     * of canonical form changes nothing. */
    uint64_t nb = (end - first) << s->seg, used = 0, was = 0;
    uint8_t *copy = cf__malloc(f, len + CF__TABLE_PAD);
    if (!copy)
        return CF_ENOMEM;
    memcpy(copy, bytes, len);
    memset(copy + len, 0, CF__TABLE_PAD);
    bool sound = cf__table_scan(s, copy, 0, nb, &used);
    cf__mfree(f, copy);
    if (!sound)
        return CF_ECORRUPT;
    uint8_t *at = f->t0.data + first * seg_bytes;
    (void)cf__table_scan(s, f->t0.data, first << s->seg, end << s->seg, &was); /* f's: sound */
    memcpy(at, bytes, len);
    f->t0.items = f->t0.items - was + used;
    return CF_OK;
}

/* hashes[0 .. n) into f's stash while it has room, each at its first bucket; how many
 * went in into *stashed. CF_OK or CF_ENOMEM. */
static cf_status cf__stash_in(cf_filter *f, const uint64_t *hashes, size_t n, uint64_t *stashed)
{
    *stashed = 0;
    for (size_t i = 0; i < n && f->stash_n < CF__STASH_SLOTS; i++) {
        if (!cf__stash_room(f))
            return CF_ENOMEM;
        cf__key k = cf__key_bits(f->fp_bits, hashes[i]);
        uint64_t i1, i2;
        cf__buckets0(&f->t0, &k, &i1, &i2);
        cf__stash_push(f, (cf__stash){i1, k.fp, 0});
        ++*stashed;
    }
    return CF_OK;
}

cf_status cf_stash_unplaced(cf_filter *f, const uint64_t *hashes, size_t n, uint64_t *stashed)
{
    if (!f || (!hashes && n > 0) || !stashed)
        return CF_EINVAL;
    if (cf__read_only(f))
        return CF_EREADONLY;
    if (cf__kind_of(f) != &cf__kind_plain || !cf__shape0(f)->seg || f->ntables != 1 ||
        f->expansion != 0)
        return CF_EINVAL;
    return cf__stash_in(f, hashes, n, stashed);
}

cf_status cf_segments_file_head(const cf_config *config, uint64_t items, const uint64_t *unplaced,
                                size_t n, void *out, size_t cap, cf_segments_file *info)
{
    cf__params p;
    uint64_t buckets, seg_bytes;
    if (!config || (!unplaced && n > 0) || !out || cap < CF_SEGMENTS_HEAD_MAX || !info)
        return CF_EINVAL;
    cf_status st = cf__segmented(config, &p, &buckets, &seg_bytes);
    if (st == CF_OK && (p.expansion != 0 || items > buckets * p.shape.b)) /* (no overflow:
                                                                     the config sized it) */
        st = CF_EINVAL;
    if (st != CF_OK)
        return st;
    /* The filter's head without its table: what the file says but for the table bytes. */
    p.concurrent = false;
    cf_filter *shell;
    st = cf__filter_make(&p, config->allocator, 1, buckets, false, cf__first_ops(&p), &shell);
    if (st != CF_OK)
        return st;
    shell->t0.items = items;
    uint64_t stashed = 0;
    st = cf__stash_in(shell, unplaced, n, &stashed);
    if (st == CF_OK) {
        info->head_len = cf__image_head(shell, out, &info->total);
        info->segment_bytes = seg_bytes;
        info->stashed = stashed;
    }
    cf_free(shell);
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* Merges by ranges                                                                     */
/* ------------------------------------------------------------------------------------ */

/* Is f a segmented filter of one sub-filter whose segments [first, end) are len bytes? */
static bool cf__range_of(const cf_filter *f, uint64_t first, uint64_t end, size_t len)
{
    const cf__shape *s = cf__shape0(f);
    const cf__kind *k = cf__kind_of(f);
    return (k == &cf__kind_plain || k == &cf__kind_plain_cc) && s->seg && f->ntables == 1 &&
           first < end && end <= f->t0.buckets >> s->seg &&
           len == (end - first) * cf__segment_bytes(s);
}

cf_status cf_get_segments(const cf_filter *f, uint64_t first, uint64_t end, void *out, size_t len)
{
    if (!f || !out)
        return CF_EINVAL;
    cf__hold(f);
    cf_status st = CF_EINVAL;
    if (cf__range_of(f, first, end, len)) {
        memcpy(out, f->t0.data + first * cf__segment_bytes(cf__shape0(f)), len);
        st = CF_OK;
    }
    cf__unhold(f);
    return st;
}

/* The hash of a key with fingerprint fp whose first bucket is `bucket` of a first table
 * of `buckets` buckets (a walk moved there). */
static uint64_t cf__hash_at(unsigned f, uint64_t buckets, uint64_t bucket, uint32_t fp)
{
    cf__walk w = {0};
    (void)cf__walk_init(&w, f, buckets); /* (a filter's table has a walk: cf_config checks) */
    cf__walk_seek(&w, bucket);
    return cf__walk_hash(&w, fp);
}

cf_status cf_stash_hashes(const cf_filter *f, uint64_t *out, size_t cap, size_t *n)
{
    if (!f || !out || !n)
        return CF_EINVAL;
    cf__hold(f);
    cf_status st = CF_EINVAL;
    uint64_t segments = f->t0.buckets >> cf__shape0(f)->seg;
    if (segments &&
        cf__range_of(f, 0, segments, (size_t)(segments * cf__segment_bytes(cf__shape0(f)))) &&
        f->stash_n <= cap) {
        const cf__stash *stash = cf__stash_of(f);
        for (unsigned e = 0; e < f->stash_n; e++)
            out[e] = cf__hash_at(f->fp_bits, f->t0.buckets, stash[e].bucket, stash[e].fp);
        *n = f->stash_n;
        st = CF_OK;
    }
    cf__unhold(f);
    return st;
}

/* A fixed plain filter of the range's size holding the range's table bytes `bytes`
 * (checked: CF_ECORRUPT for a bucket out of canonical form), its item count theirs. */
static cf_status cf__range_filter(const cf__params *p, const cf_allocator *a, uint64_t range,
                                  const void *bytes, size_t len, cf_filter **out)
{
    cf_status st = cf__filter_make(p, a, 1, range, true, cf__first_ops(p), out);
    if (st != CF_OK)
        return st;
    cf_filter *part = *out;
    memcpy(part->t0.data, bytes, len); /* (the pad after it stays zero) */
    uint64_t used = 0;
    if (!cf__table_scan(&p->shape, part->t0.data, 0, range, &used)) {
        cf_free(part);
        *out = NULL;
        return CF_ECORRUPT;
    }
    part->t0.items = used;
    return CF_OK;
}

cf_status cf_merge_segments(const cf_config *config, uint64_t first, uint64_t end, void *dst,
                            size_t len, const void *src, const uint64_t *hashes, size_t n,
                            cf_segments_report *report)
{
    cf__params p;
    uint64_t buckets;
    if (!config || !dst || (!hashes && n > 0) || !report)
        return CF_EINVAL;
    cf_status st = cf__range_sized(config, first, end, len, &p, &buckets);
    if (st != CF_OK)
        return st;
    unsigned f = p.shape.f, seg = p.shape.seg;
    for (size_t i = 0; i < n; i++) /* every key in the range */
        if (cf__segment_in(hashes[i], f, buckets, seg) - first >= end - first)
            return CF_EINVAL;
    uint64_t base = first << seg, range = (end - first) << seg;
    p.concurrent = false;
    cf_filter *part = NULL, *from = NULL;
    st = cf__range_filter(&p, config->allocator, range, dst, len, &part);
    if (st == CF_OK && src)
        st = cf__range_filter(&p, config->allocator, range, src, len, &from);
    /* over the range, and over the whole table from the range's first bucket */
    cf__walk w = {0}, whole = {0};
    if (st == CF_OK && (!cf__walk_init(&w, f, range) || !cf__walk_init(&whole, f, buckets)))
        st = CF_EINVAL; /* (range <= buckets, which the config checked) */
    if (st != CF_OK) {
        cf_free(part);
        cf_free(from);
        return st;
    }
    cf_segments_report r = {0};
    cf__walk_seek(&whole, base);
    uint32_t fps[CF_MAX_BUCKET_SIZE];
    for (uint64_t x = 0; from && x < range && st == CF_OK;
         x++, cf__walk_next(&w), cf__walk_next(&whole))
        for (unsigned j = 0, k = cf__bucket_fps(&from->t0, &p.shape, x, fps); j < k && st == CF_OK;
             j++)
            st = cf__range_add(part, &w, fps[j], cf__walk_hash(&whole, fps[j]), &r);
    for (size_t i = 0; i < n && st == CF_OK; i++) {
        cf__key k = cf__key_bits(f, hashes[i]);
        cf__walk_seek(&w, cf__mulhi(k.x, buckets) - base);
        st = cf__range_add(part, &w, k.fp, hashes[i], &r);
    }
    if (st == CF_OK) {
        memcpy(dst, part->t0.data, len);
        r.items = part->t0.items;
        *report = r;
    }
    cf_free(part);
    cf_free(from);
    return st;
}
