/*
 * build.c - `cuckoo build`: a filter sized to a set of keys and filled with them.
 *
 * The keys are a set: every distinct key is stored once, and a repeated line is counted as
 * already present. The input is read once and every key's hash is kept (the filter's hash,
 * cf_hash_seeded with the seed the filter will have). Sorting the hashes puts repeats next
 * to each other: what is left after dropping them is the set, whose size is the capacity,
 * (unless --capacity gives one: a filter made alike for every key set, to merge), and each
 * of its hashes is added once, with cf_add. (Skipping keys the filter already
 * answers yes for, as cf_add_unique does, would also skip the false positives among new
 * keys, leaving them unstored; deleting one later would remove the fingerprint it collided
 * with: a false negative.) Sorted hashes are also in bucket order, so the adds walk the
 * table from one end to the other instead of jumping about it.
 *
 * --jobs N sorts with N threads. Without --seed it fills with them too: each adds a slice
 * of the sorted hashes, so each writes its own part of the table, into a CF_CONCURRENT
 * filter whose writers hold only the stripes they write (the file does not record the
 * flag). Which of two adds that meet on a bucket comes first then varies, and so does the
 * file; with --seed, a promise that the same keys give the same file, one thread fills.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Room for "build FILE" in a progress line; a longer name is cut. */
#define LABEL_BYTES   256
/* First length of the hash array: 8192 entries (64 KiB), small next to any filter; it
 * doubles from there. */
#define ARRAY_INITIAL ((size_t)1 << 13)
/* Runs of hashes this short are sorted by insertion rather than by another radix pass. */
#define SORT_SMALL    32u
/* --jobs: at most this many threads (far more than the cores it pays to use). */
#define JOBS_MAX      256u
/* Fewer hashes than this per job are not worth a thread of the fill. */
#define JOB_MIN_KEYS  ((size_t)1 << 16)

static const char build_help[] =
    "Usage: cuckoo build FILE [OPTION...] [INPUT]\n"
    "Create a filter sized to the keys of INPUT (a file; stdin if absent or -) and add them.\n"
    "Keys are lines without their \"\\n\" or \"\\r\\n\" (an empty line is the empty key), or\n"
    "NUL-terminated with -0. The keys are a set: each distinct key is stored once, and a\n"
    "repeated key is counted as already present.\n"
    "\n"
    "  --capacity N            size the filter for N keys, such as 2500000, 2.5M or 1e6\n"
    "                          (default: the number of distinct keys in INPUT); builds\n"
    "                          with the same N, --seed and options make filters that "
    "merge\n" SHAPE_HELP "  --force                 overwrite FILE if it exists\n"
    "  -0, --null              keys are terminated by NUL bytes, not newlines\n"
    "  -j, --jobs N            sort the keys' hashes with N threads (default 1; at most\n"
    "                          256), which takes 8 more bytes per key of INPUT, and\n"
    "                          without --seed add them with N threads too\n"
    "  --progress              show progress even when stderr is not a terminal\n"
    "  -q, --quiet             no progress, no summary\n"
    "  -h, --help              show this help\n"
    "\n"
    "Without --capacity, the capacity is the number of distinct keys in INPUT. INPUT is\n"
    "read once; building takes 8 bytes of memory per key of INPUT besides the filter.\n"
    "The same set of keys (in any order, repeated or not) with the same --seed always\n"
    "gives the same file.\n"
    "Without --seed the seed is secret and random, so nobody can compute keys that\n"
    "collide in the filter; give --seed for files that must come out the same every time.\n"

    "Exit status 3 if some keys did not fit (the others are saved).\n";

/* Returns the array v of *cap hashes, reallocated twice as long (or ARRAY_INITIAL long
 * at first), and updates *cap; NULL, with v untouched, on failure. */
static uint64_t *grow_array(uint64_t *v, size_t *cap)
{
    size_t n = *cap ? *cap : ARRAY_INITIAL / 2;
    if (n > SIZE_MAX / 2 / sizeof *v)
        return NULL;
    n *= 2;
    uint64_t *bigger = realloc(v, n * sizeof *v);
    if (bigger)
        *cap = n;
    return bigger;
}

/* Sorts a[0 .. n) in place: a most-significant-digit radix sort on the byte at `shift`,
 * then the next byte within each run. Hashes are uniform, so a few passes leave runs
 * short enough for insertion sort; a run of equal hashes ends after the last byte. */
/* Puts a[0 .. n) in order of the byte at `shift`: run d, the hashes whose byte is d, at
 * a[start[d] .. end[d]). */
static void split_runs(uint64_t *a, size_t n, unsigned shift, size_t start[256], size_t end[256])
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
    /* Each hash is carried to the next free place of its byte's run (a cycle of swaps). */
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
 * short enough for insertion sort; a run of equal hashes ends after the last byte. */
static void sort_hashes(uint64_t *a, size_t n, unsigned shift)
{
    if (n <= SORT_SMALL) {
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
    split_runs(a, n, shift, start, end);
    if (shift == 0)
        return;
    for (unsigned d = 0; d < 256; d++)
        sort_hashes(a + start[d], end[d] - start[d], shift - 8);
}

/* A parallel sort's job: its slice of the input, [from, to), whose top bytes it counts
 * (count[d]) and then scatters to their runs of the output, at[d] onwards; then the runs
 * of the output it takes next (through `next`), which it sorts in place. */
typedef struct sort_job {
    const uint64_t *in;
    uint64_t *out;
    size_t from, to;
    size_t count[256], at[256];
    const size_t *start, *end; /* the output's runs, once every job has counted */
    atomic_uint *next;
} sort_job;

static void *count_worker(void *p)
{
    sort_job *j = p;
    memset(j->count, 0, sizeof j->count);
    for (size_t i = j->from; i < j->to; i++)
        j->count[j->in[i] >> 56]++;
    return NULL;
}

static void *scatter_worker(void *p)
{
    sort_job *j = p;
    for (size_t i = j->from; i < j->to; i++)
        j->out[j->at[j->in[i] >> 56]++] = j->in[i];
    return NULL;
}

static void *sort_worker(void *p)
{
    const sort_job *j = p;
    for (unsigned d; (d = atomic_fetch_add(j->next, 1u)) < 256u;)
        sort_hashes(j->out + j->start[d], j->end[d] - j->start[d], 48);
    return NULL;
}

/* Where slice i of n items split among `jobs` starts (slice `jobs` starts at the end). */
static size_t slice_at(size_t n, unsigned jobs, unsigned i)
{
    return i == jobs ? n : n / jobs * i;
}

/* Starts worker(jobs[i]) on a thread of its own for i in [1, n), runs jobs[0] here, and
 * waits for them all; a job whose thread could not start runs here too. */
static void run_jobs(void *(*worker)(void *), void *jobs, size_t size, unsigned n)
{
    pthread_t threads[JOBS_MAX];
    bool started[JOBS_MAX] = {false};
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

/* Sorts in[0 .. n) with `jobs` threads into out[0 .. n) (which may be in when jobs is 1)
 * and drops repeats; returns the number of distinct hashes left in out. With several jobs the
 * first pass is out of place: each job counts the top bytes of its slice, then moves
 * its slice to its places in the runs those counts give, and the 256 runs are sorted by
 * whichever job is free. */
static size_t sort_unique(uint64_t *in, uint64_t *out, size_t n, unsigned jobs)
{
    if (n == 0)
        return 0;
    sort_job *job = jobs > 1 ? malloc(jobs * sizeof *job) : NULL;
    if (job) {
        size_t start[256], end[256];
        atomic_uint next = 0;
        for (unsigned i = 0; i < jobs; i++)
            job[i] = (sort_job){.in = in,
                                .out = out,
                                .from = slice_at(n, jobs, i),
                                .to = slice_at(n, jobs, i + 1),
                                .start = start,
                                .end = end,
                                .next = &next};
        run_jobs(count_worker, job, sizeof job[0], jobs);
        size_t sum = 0;
        for (unsigned d = 0; d < 256; d++) {
            start[d] = sum;
            for (unsigned i = 0; i < jobs; i++) {
                job[i].at[d] = sum;
                sum += job[i].count[d];
            }
            end[d] = sum;
        }
        run_jobs(scatter_worker, job, sizeof job[0], jobs);
        run_jobs(sort_worker, job, sizeof job[0], jobs);
        free(job);
    } else {
        if (out != in)
            memcpy(out, in, n * sizeof *in);
        sort_hashes(out, n, 56);
    }
    size_t d = 1;
    for (size_t i = 1; i < n; i++)
        if (out[i] != out[d - 1])
            out[d++] = out[i];
    return d;
}

/* One thread's share of a fill: hashes[from .. to) added to f, its outcomes counted. */
typedef struct fill_job {
    cf_filter *f;
    const uint64_t *hashes;
    size_t from, to;
    add_counts counts;
    cf_status stopped;          /* the status that stopped it, or CF_OK */
    atomic_uint_fast64_t *done; /* hashes every job has added so far */
    progress *pr;               /* the first job's: it shows the progress */
} fill_job;

static void *fill_worker(void *p)
{
    fill_job *j = p;
    cf_status status[CLI_ADD_BATCH];
    for (size_t start = j->from; start < j->to; start += CLI_ADD_BATCH) {
        size_t k = j->to - start < CLI_ADD_BATCH ? j->to - start : CLI_ADD_BATCH;
        cf_add_many(j->f, j->hashes + start, k, 0, status);
        for (size_t i = 0; i < k; i++)
            if (!cli_count_add(&j->counts, status[i])) {
                j->stopped = status[i];
                return NULL;
            }
        uint64_t done = atomic_fetch_add(j->done, k) + k;
        if (j->pr)
            progress_tick(j->pr, done);
    }
    return NULL;
}

/* hashes[0 .. n), sorted, added to the concurrent filter f by `jobs` threads, each a
 * slice; as cli_add_hashes. */
static cf_status fill(cf_filter *f, const uint64_t *hashes, size_t n, unsigned jobs,
                      add_counts *counts, progress *pr, uint64_t *done)
{
    fill_job job[JOBS_MAX];
    atomic_uint_fast64_t added = 0;
    for (unsigned i = 0; i < jobs; i++)
        job[i] = (fill_job){.f = f,
                            .hashes = hashes,
                            .from = slice_at(n, jobs, i),
                            .to = slice_at(n, jobs, i + 1),
                            .stopped = CF_OK,
                            .done = &added,
                            .pr = i == 0 ? pr : NULL};
    run_jobs(fill_worker, job, sizeof job[0], jobs);
    cf_status st = CF_OK;
    for (unsigned i = 0; i < jobs; i++) {
        counts->added += job[i].counts.added;
        counts->full += job[i].counts.full;
        if (st == CF_OK)
            st = job[i].stopped;
    }
    *done = atomic_load(&added);
    return st;
}

static int read_error(const key_reader *in, int err)
{
    cli_error("%s: %s (nothing saved)", in->name, strerror(err));
    return CLI_EXIT_FILE;
}

/* Reads every key of `in` and keeps its hash with `seed` in *hashes (*n of them). */
static int read_hashes(key_reader *in, uint64_t seed, const shape_opts *o, bool show_progress,
                       uint64_t **hashes, size_t *n)
{
    size_t cap = 0;
    progress pr;
    char label[LABEL_BYTES];
    snprintf(label, sizeof label, "reading %s", in->name);
    progress_start(&pr, label, o->quiet, show_progress, false, 0);
    const char *key;
    size_t len;
    int got;
    while ((got = key_reader_next(in, &key, &len)) > 0) {
        if (*n == cap) {
            uint64_t *v = grow_array(*hashes, &cap);
            if (!v) {
                progress_finish(&pr, *n);
                cli_error("%s: out of memory after %zu keys (nothing saved)", in->name, *n);
                return CLI_EXIT_FILE;
            }
            *hashes = v;
        }
        (*hashes)[(*n)++] = cf_hash_seeded(seed, key, len);
        progress_tick(&pr, *n);
    }
    int err = errno;
    progress_finish(&pr, *n);
    return got < 0 ? read_error(in, err) : CLI_EXIT_OK;
}

/* Makes the filter at `path` from the keys of `in`; *f receives it, *counts what
 * happened to the keys. */
static int build(const char *path, shape_opts *o, key_reader *in, bool show_progress, unsigned jobs,
                 cf_filter **f, add_counts *counts)
{
    /* The filter's seed is needed before it exists: the keys are hashed first. */
    const bool seeded = (o->cfg.flags & CF_FIXED_SEED) != 0;
    if (!seeded) {
        if (cf_random_seed(&o->cfg.seed) != CF_OK) {
            cli_error("%s: the system gave no random seed (give --seed)", path);
            return CLI_EXIT_FILE;
        }
        o->cfg.flags |= CF_FIXED_SEED;
    }
    uint64_t *hashes = NULL;
    size_t n = 0;
    int status = read_hashes(in, o->cfg.seed, o, show_progress, &hashes, &n);
    size_t distinct = 0;
    if (status == CLI_EXIT_OK) {
        /* Several jobs sort into a second array; without the memory for it, one job sorts
         * in place. */
        uint64_t *sorted = jobs > 1 && n > 0 ? malloc(n * sizeof *sorted) : NULL;
        distinct = sort_unique(hashes, sorted ? sorted : hashes, n, sorted ? jobs : 1u);
        if (sorted) {
            free(hashes);
            hashes = sorted;
        }
    }
    if (o->cfg.capacity == 0) /* no --capacity: the set's size; an empty set makes a filter too */
        o->cfg.capacity = distinct > 0 ? distinct : 1;
    /* Threads that fill (see the top); a window's generations are filled by one. */
    size_t most = distinct / JOB_MIN_KEYS;
    unsigned fillers = seeded || o->cfg.generations ? 1u : most < jobs ? (unsigned)most : jobs;
    cf_config cfg = o->cfg;
    if (fillers > 1)
        cfg.flags |= CF_CONCURRENT;
    if (status == CLI_EXIT_OK)
        status = cli_new_filter("build", path, &cfg, f);
    if (status == CLI_EXIT_OK) /* a window's keys go to the generation due now */
        status = cli_window_due(path, *f, &o->clock);
    if (status == CLI_EXIT_OK) {
        char label[LABEL_BYTES];
        snprintf(label, sizeof label, "build %s", path);
        progress pr;
        progress_start(&pr, label, o->quiet, show_progress, false, distinct);
        uint64_t done = 0;
        cf_status st = fillers > 1 ? fill(*f, hashes, distinct, fillers, counts, &pr, &done)
                                   : cli_add_hashes(*f, hashes, distinct, 0, counts, &pr, &done);
        progress_finish(&pr, done);
        counts->present = n - distinct;
        if (st != CF_OK) {
            cli_error("%s: %s after %" PRIu64 " keys (nothing saved)", path, cf_strerror(st), done);
            status = CLI_EXIT_FILE;
        }
    }
    free(hashes);
    return status;
}

int cmd_build(int argc, char **argv)
{
    static const cli_opt opts[] = {{"capacity", 0, true, OPT_CAPACITY},
                                   {"null", '0', false, OPT_NULL},
                                   {"jobs", 'j', true, OPT_JOBS},
                                   {"progress", 0, false, OPT_PROGRESS},
                                   SHAPE_OPTIONS};
    shape_opts o = {0};
    bool nul = false, show_progress = false;
    uint64_t jobs = 1;
    cli_parser p;
    cli_parser_init(&p, "build", build_help, opts, sizeof opts / sizeof opts[0], argc, argv);
    const char *value;
    int id;
    while ((id = cli_next_option(&p, &value)) >= 0) {
        if (id == OPT_CAPACITY) {
            if (!cli_parse_uint("build", "capacity", value, 1, UINT64_MAX, true, &o.cfg.capacity))
                return CLI_EXIT_USAGE;
        } else if (id == OPT_NULL)
            nul = true;
        else if (id == OPT_PROGRESS)
            show_progress = true;
        else if (id == OPT_JOBS) {
            if (!cli_parse_uint("build", "jobs", value, 1, JOBS_MAX, false, &jobs))
                return CLI_EXIT_USAGE;
        } else if (cli_shape_option("build", id, value, &o) == SHAPE_BAD) {
            return CLI_EXIT_USAGE;
        }
    }
    if (id == CLI_OPT_STOP)
        return p.status;
    if (p.operands < 1 || p.operands > 2)
        return cli_usage("build", p.operands == 0 ? "missing FILE" : "too many operands");
    int status = cli_check_shape("build", &o);
    if (status != CLI_EXIT_OK)
        return status;

    const char *path = argv[0];
    const char *input = p.operands == 2 && strcmp(argv[1], "-") != 0 ? argv[1] : NULL;
    status = cli_check_new_file(path, o.force);
    if (status != CLI_EXIT_OK)
        return status;

    int fd = STDIN_FILENO;
    if (input) {
        fd = open(input, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            cli_error("%s: %s", input, strerror(errno));
            return CLI_EXIT_FILE;
        }
    }
    key_reader in;
    cf_filter *f = NULL;
    add_counts counts = {0};
    if (!key_reader_open(&in, fd, input ? input : "stdin", nul)) {
        cli_error("%s: out of memory", path);
        status = CLI_EXIT_FILE;
    } else {
        status = build(path, &o, &in, show_progress, (unsigned)jobs, &f, &counts);
        key_reader_close(&in);
    }
    if (input)
        close(fd);

    if (status == CLI_EXIT_OK)
        status = cli_save_filter(f, path);
    if (status == CLI_EXIT_OK) {
        if (!o.quiet)
            cli_describe(path, "built", f);
        status = cli_report_adds(path, &counts, true, o.quiet);
    }
    cf_free(f);
    return status;
}
