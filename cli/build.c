/*
 * build.c - `cuckoo build`: a filter sized to a set of keys and filled with them.
 *
 * The keys are a set: every distinct key is stored once, and a repeated line is counted as
 * already present. The input is read once and every key's hash is kept (the filter's hash,
 * cf_hash_seeded with the seed the filter will have). The library sorts the hashes into
 * build order (cf_sort_hashes), which puts repeats next to each other: what is left after
 * dropping them is the set, whose size is the capacity (unless --capacity gives one: a
 * filter made alike for every key set, to merge), and each of its hashes is added once,
 * by cf_build_hashes. (Skipping keys the filter already answers yes for, as cf_add_unique
 * does, would also skip the false positives among new keys, leaving them unstored;
 * deleting one later would remove the fingerprint it collided with: a false negative.)
 *
 * --jobs N sorts with N threads, and fills a segmented filter (the default from 2^22
 * buckets, about 16M keys) with N threads, each its own segments: the file is the same for
 * every N, and with --seed for every run.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Room for "build FILE" in a progress line; a longer name is cut. */
#define LABEL_BYTES   256
/* First length of the hash array: 8192 entries (64 KiB), small next to any filter; it
 * doubles from there. */
#define ARRAY_INITIAL ((size_t)1 << 13)
/* Keys per cf_build_hashes call, at least: each call's threads share its segments, so a
 * call needs many (8M keys of 4-slot buckets are 32 segments); between calls, the
 * progress line moves. */
#define BUILD_STEP    ((size_t)1 << 23)
/* Progress moves about this many times in a build larger than that. */
#define BUILD_STEPS   16u

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
    "                          256), which takes 8 more bytes per key of INPUT, and add\n"
    "                          them with N threads to a segmented filter (--mapping;\n"
    "                          by default from about 16M keys): the file is the same\n"
    "                          for every N\n"
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

/* The first fingerprint width of the filter o's options make, whatever its capacity: the
 * width its build order sorts by. */
static unsigned first_width(const shape_opts *o)
{
    cf_config c = o->cfg, out;
    c.capacity = 1;
    return cf_config_resolve(&c, &out) == CF_OK ? out.fingerprint_bits : 0u;
}

/* Adds the hashes[0 .. n), in build order, to f with `jobs` threads, a step at a time. */
static cf_status fill(cf_filter *f, const uint64_t *hashes, size_t n, unsigned jobs,
                      add_counts *counts, progress *pr, uint64_t *done)
{
    size_t step = n / BUILD_STEPS > BUILD_STEP ? n / BUILD_STEPS : BUILD_STEP;
    for (size_t at = 0; at < n; at += step) {
        size_t k = n - at < step ? n - at : step;
        cf_build_report r;
        cf_status st = cf_build_hashes(f, hashes + at, k, jobs, &r);
        counts->added += r.added;
        counts->full += r.full;
        if (st != CF_OK)
            return st;
        *done += k;
        progress_tick(pr, *done);
    }
    return CF_OK;
}

/* Makes the filter at `path` from the keys of `in`; *f receives it, *counts what
 * happened to the keys. */
static int build(const char *path, shape_opts *o, key_reader *in, bool show_progress, unsigned jobs,
                 cf_filter **f, add_counts *counts)
{
    /* The filter's seed is needed before it exists: the keys are hashed first. */
    if (!(o->cfg.flags & CF_FIXED_SEED)) {
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
    if (status == CLI_EXIT_OK &&
        cf_sort_hashes(hashes, n, first_width(o), jobs, &distinct) != CF_OK) {
        cli_error("%s: the keys could not be sorted (nothing saved)", path);
        status = CLI_EXIT_FILE;
    }
    if (o->cfg.capacity == 0) /* no --capacity: the set's size; an empty set makes a filter too */
        o->cfg.capacity = distinct > 0 ? distinct : 1;
    if (status == CLI_EXIT_OK)
        status = cli_new_filter("build", path, &o->cfg, f);
    if (status == CLI_EXIT_OK) /* a window's keys go to the generation due now */
        status = cli_window_due(path, *f, &o->clock);
    if (status == CLI_EXIT_OK) {
        char label[LABEL_BYTES];
        snprintf(label, sizeof label, "build %s", path);
        progress pr;
        progress_start(&pr, label, o->quiet, show_progress, false, distinct);
        uint64_t done = 0;
        cf_status st = fill(*f, hashes, distinct, jobs, counts, &pr, &done);
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
            if (!cli_parse_uint("build", "jobs", value, 1, CLI_JOBS_MAX, false, &jobs))
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
