/*
 * build.c - `cuckoo build`: a filter sized to a set of keys and filled with them.
 *
 * The keys are a set: every distinct key is stored once, and a repeated line is counted as
 * already present. When the filter already answers yes for a key, that key is either a
 * repeat or a false positive (a new key whose fingerprint is already in one of its
 * buckets), and the filter cannot tell which. Skipping a false positive, as cf_add_unique
 * does, would leave a key of the set unstored, and deleting that key later would remove
 * the fingerprint it collided with: a false negative for a key that was added. So such
 * keys are set aside (hash and position in the input); once every other key is in, the
 * input is replayed up to the last of them to find each hash's first position, and the
 * keys that were not repeats are added. Memory: a list entry for each key set aside
 * (the repeats and about fpr * n others), nothing for the rest.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Keys per cf_add_many call (see add_batch): enough to overlap many memory reads, few
 * enough that the hashes and statuses stay on the stack. */
#define ADD_BATCH     256
/* Room for "build FILE" in a progress line; a longer name is cut. */
#define LABEL_BYTES   256
/* First length of the growing arrays: 8192 entries (64 or 128 KiB), small next to any
 * filter; they double from there. */
#define ARRAY_INITIAL ((size_t)1 << 13)
/* `first` of an unused slot of the first-position table, and of a hash the replay has
 * not met yet. Positions are below both: an input has fewer than 2^64 - 2 keys. */
#define SLOT_EMPTY    UINT64_MAX
#define NOT_MET_YET   (UINT64_MAX - 1)

static const char build_help[] =
    "Usage: cuckoo build FILE [OPTION...] [INPUT]\n"
    "Create a filter sized to the keys of INPUT (a file; stdin if absent or -) and add them.\n"
    "Keys are lines without their \"\\n\" or \"\\r\\n\" (an empty line is the empty key), or\n"
    "NUL-terminated with -0. The keys are a set: each distinct key is stored once, and a\n"
    "repeated key is counted as already present.\n"
    "\n"
    "  --fpr P                 false-positive rate wanted at full load (such as 0.001)\n"
    "  --fingerprint-bits F    fingerprint width, 4 to 32 (default 12: about 0.19%)\n"
    "  --bucket-size B         slots per bucket, 1 to 255 (default 4)\n"
    "  --max-kicks K           eviction budget per insert, 1 to 65535 (default 500)\n"
    "  --expansion X           0 (default): fixed size; X >= 1: room to grow by X\n"
    "  --max-sub-filters M     growing filters stop at M sub-filters (default 32)\n"
    "  --seed S                hash seed, decimal or 0x-hexadecimal (default: random)\n"
    "  --force                 overwrite FILE if it exists\n"
    "  -0, --null              keys are terminated by NUL bytes, not newlines\n"
    "  --progress              show progress even when stderr is not a terminal\n"
    "  -q, --quiet             no progress, no summary\n"
    "  -h, --help              show this help\n"
    "\n"
    "The capacity is the number of keys in INPUT. A file is read to count its keys, read\n"
    "again to add them, and partly a third time to tell repeated keys from false\n"
    "positives; memory is needed only for those. Stdin is read once, keeping 8 bytes per\n"
    "key. Without --seed the seed is secret and random, so nobody can compute keys that\n"
    "collide in the filter; give --seed for files that must come out the same every time.\n"
    "Exit status 3 if some keys did not fit (the others are saved).\n";

/* Returns the array v of *cap elements of `size` bytes, reallocated twice as long (or
 * ARRAY_INITIAL long at first), and updates *cap; NULL, with v untouched, on failure. */
static void *grow_array(void *v, size_t *cap, size_t size)
{
    size_t n = *cap ? *cap : ARRAY_INITIAL / 2;
    if (n > SIZE_MAX / 2 / size)
        return NULL;
    n *= 2;
    void *bigger = realloc(v, n * size);
    if (bigger)
        *cap = n;
    return bigger;
}

/* A key the filter already answered yes for when its turn came. */
typedef struct set_aside {
    uint64_t hash;
    uint64_t index; /* its position in the input, from 0 */
} set_aside;

/* For each hash set aside, the first position in the input of a key with that hash. */
typedef struct first_seen {
    uint64_t hash;
    uint64_t first; /* or SLOT_EMPTY, NOT_MET_YET */
} first_seen;

typedef struct build_job {
    const char *path;  /* the filter file */
    shape_opts *shape; /* its settings; the capacity is set here */
    key_reader *in;
    bool one_pass;    /* stdin is a pipe: the hashes are kept in `hashes` */
    bool progress;    /* --progress */
    uint64_t *hashes; /* one pass: every key's hash, in input order */
    size_t nhashes;
    size_t hashes_cap;
    char label[LABEL_BYTES];
    cf_filter *f;
    add_counts counts;
    uint64_t next_index; /* position of the next key to add */
    set_aside *aside;
    size_t naside;
    size_t aside_cap;
} build_job;

static int read_error(const key_reader *in, int err)
{
    cli_error("%s: %s (nothing saved)", in->name, strerror(err));
    return CLI_EXIT_FILE;
}

/* An add failed for a reason other than a full filter: out of memory. */
static int add_failed(const build_job *b, cf_status st)
{
    cli_error("%s: %s after %" PRIu64 " keys (nothing saved)", b->path, cf_strerror(st),
              b->next_index);
    return CLI_EXIT_FILE;
}

/* Adds the keys with hashes[0 .. n), n <= ADD_BATCH, the next ones of the input, or sets
 * them aside when the filter already answers yes for them at their turn.
 * That is cf_add_unique key by key, which cf_add_many with CF_ADD_UNIQUE does for the
 * whole batch: CF_EXISTS marks a key to set aside, and the filter fetches the buckets of
 * the next keys while each goes in, overlapping their cache misses, which a
 * lookup-then-add per key cannot. Returns CF_OK, or the status that stops the build (with
 * next_index at its key). */
static cf_status add_batch(build_job *b, const uint64_t *hashes, size_t n)
{
    cf_status status[ADD_BATCH];
    cf_add_many(b->f, hashes, n, CF_ADD_UNIQUE, status);
    for (size_t i = 0; i < n; i++, b->next_index++) {
        if (status[i] == CF_EXISTS) {
            if (b->naside == b->aside_cap) {
                set_aside *v = grow_array(b->aside, &b->aside_cap, sizeof *v);
                if (!v)
                    return CF_ENOMEM;
                b->aside = v;
            }
            b->aside[b->naside++] = (set_aside){.hash = hashes[i], .index = b->next_index};
            continue;
        }
        if (!cli_count_add(&b->counts, status[i]))
            return status[i];
    }
    return CF_OK;
}

/* The table slot of hash h: its own, or the empty one where it would go. */
static first_seen *find_slot(first_seen *table, size_t mask, uint64_t h)
{
    size_t i = (size_t)h & mask; /* the filter's hashes are uniformly mixed already */
    while (table[i].first != SLOT_EMPTY && table[i].hash != h)
        i = (i + 1) & mask;
    return &table[i];
}

/* The hash of the key at position j of a replay (called for j = 0, 1, ...): 1, 0 at
 * the end of the input, -1 on a read error. */
static int replay_next(build_job *b, uint64_t j, uint64_t *h)
{
    if (b->one_pass) {
        if (j >= b->nhashes)
            return 0;
        *h = b->hashes[j];
        return 1;
    }
    const char *key;
    size_t len;
    int got = key_reader_next(b->in, &key, &len);
    if (got > 0)
        *h = cf_hash(b->f, key, len);
    return got;
}

/* Sorts the keys set aside into repeats (counted as present) and false positives (added
 * now), by replaying the input from `start` (a file) or from the hash list. */
static int add_set_aside(build_job *b, off_t start)
{
    if (b->naside == 0)
        return CLI_EXIT_OK;
    /* At most half full, so that probe sequences stay short. naside * 2 cannot overflow:
     * the list of naside 16-byte entries fits in memory. */
    size_t slots = 1;
    while (slots < b->naside * 2) {
        if (slots > SIZE_MAX / 2 / sizeof(first_seen))
            return add_failed(b, CF_ENOMEM);
        slots *= 2;
    }
    first_seen *table = malloc(slots * sizeof *table);
    if (!table)
        return add_failed(b, CF_ENOMEM);
    size_t mask = slots - 1;
    for (size_t i = 0; i < slots; i++)
        table[i].first = SLOT_EMPTY;
    for (size_t i = 0; i < b->naside; i++) {
        first_seen *e = find_slot(table, mask, b->aside[i].hash);
        *e = (first_seen){.hash = b->aside[i].hash, .first = NOT_MET_YET};
    }

    int status = CLI_EXIT_OK;
    if (!b->one_pass && !key_reader_rewind(b->in, start))
        status = read_error(b->in, errno);
    /* The list is in input order: nothing after its last entry matters. */
    uint64_t last = b->aside[b->naside - 1].index;
    int got = 1;
    uint64_t h = 0;
    for (uint64_t j = 0; status == CLI_EXIT_OK && j <= last && (got = replay_next(b, j, &h)) > 0;
         j++) {
        first_seen *e = find_slot(table, mask, h);
        if (e->first == NOT_MET_YET)
            e->first = j;
    }
    if (status == CLI_EXIT_OK && got < 0)
        status = read_error(b->in, errno);

    for (size_t i = 0; status == CLI_EXIT_OK && i < b->naside; i++) {
        const set_aside *a = &b->aside[i];
        /* An earlier key has the same hash: a repeat. Otherwise a new key whose
         * fingerprint happened to be there already (or an input that changed between
         * the passes): add it. */
        if (find_slot(table, mask, a->hash)->first < a->index) {
            b->counts.present++;
            continue;
        }
        cf_status st = cf_add_hash(b->f, a->hash);
        if (!cli_count_add(&b->counts, st))
            status = add_failed(b, st);
    }
    free(table);
    return status;
}

/* A seekable input: count the keys, go back, add them. Nothing is kept per key. */
static int build_two_passes(build_job *b, off_t start)
{
    uint64_t keys;
    if (!key_reader_count(b->in, &keys))
        return read_error(b->in, errno);
    if (!key_reader_rewind(b->in, start))
        return read_error(b->in, errno);
    b->shape->cfg.capacity = keys > 0 ? keys : 1; /* an empty set still makes a valid filter */
    int status = cli_new_filter("build", b->path, &b->shape->cfg, &b->f);
    if (status != CLI_EXIT_OK)
        return status;

    progress pr;
    progress_start(&pr, b->label, b->shape->quiet, b->progress, false, keys);
    const char *key;
    size_t len;
    int got;
    uint64_t hashes[ADD_BATCH];
    size_t n = 0;
    do {
        got = key_reader_next(b->in, &key, &len);
        if (got > 0)
            hashes[n++] = cf_hash(b->f, key, len);
        if (n == ADD_BATCH || (got <= 0 && n > 0)) {
            cf_status st = add_batch(b, hashes, n);
            if (st != CF_OK)
                return add_failed(b, st);
            n = 0;
            progress_tick(&pr, b->next_index);
        }
    } while (got > 0);
    progress_finish(&pr, b->next_index);
    if (got < 0)
        return read_error(b->in, errno);
    return add_set_aside(b, start);
}

/* A pipe: one pass. The filter's hash depends only on its seed, so a throwaway filter
 * with the same seed hashes the keys while their number is unknown; the hashes are kept,
 * then added to the filter sized for them. */
static int build_one_pass(build_job *b)
{
    cf_config hash_cfg = b->shape->cfg;
    hash_cfg.capacity = 1;
    cf_filter *hasher;
    int status = cli_new_filter("build", b->path, &hash_cfg, &hasher);
    if (status != CLI_EXIT_OK)
        return status;
    /* The filter must have the hasher's seed, which it may have drawn. */
    cf_config drawn;
    cf_get_config(hasher, &drawn);
    b->shape->cfg.seed = drawn.seed;
    b->shape->cfg.flags |= CF_FIXED_SEED;

    b->one_pass = true;
    progress pr;
    char read_label[sizeof b->label];
    snprintf(read_label, sizeof read_label, "reading %s", b->in->name);
    progress_start(&pr, read_label, b->shape->quiet, b->progress, false, 0);
    const char *key;
    size_t len;
    int got;
    bool memory_ok = true;
    while ((got = key_reader_next(b->in, &key, &len)) > 0) {
        if (b->nhashes == b->hashes_cap) {
            uint64_t *v = grow_array(b->hashes, &b->hashes_cap, sizeof *v);
            if (!v) {
                memory_ok = false;
                break;
            }
            b->hashes = v;
        }
        b->hashes[b->nhashes++] = cf_hash(hasher, key, len);
        progress_tick(&pr, b->nhashes);
    }
    int err = errno;
    cf_free(hasher);
    progress_finish(&pr, b->nhashes);
    if (!memory_ok) {
        cli_error("%s: out of memory after %zu keys (nothing saved)", b->in->name, b->nhashes);
        return CLI_EXIT_FILE;
    }
    if (got < 0)
        return read_error(b->in, err);

    b->shape->cfg.capacity = b->nhashes > 0 ? b->nhashes : 1;
    status = cli_new_filter("build", b->path, &b->shape->cfg, &b->f);
    if (status != CLI_EXIT_OK)
        return status;
    progress_start(&pr, b->label, b->shape->quiet, b->progress, false, b->nhashes);
    for (size_t i = 0; i < b->nhashes; i += ADD_BATCH) {
        size_t n = b->nhashes - i < ADD_BATCH ? b->nhashes - i : ADD_BATCH;
        cf_status st = add_batch(b, b->hashes + i, n);
        if (st != CF_OK)
            return add_failed(b, st);
        progress_tick(&pr, b->next_index);
    }
    progress_finish(&pr, b->next_index);
    return add_set_aside(b, 0);
}

int cmd_build(int argc, char **argv)
{
    static const cli_opt opts[] = {
        {"null", '0', false, OPT_NULL}, {"progress", 0, false, OPT_PROGRESS}, SHAPE_OPTIONS};
    shape_opts o = {0};
    bool nul = false, show_progress = false;
    cli_parser p;
    cli_parser_init(&p, "build", build_help, opts, sizeof opts / sizeof opts[0], argc, argv);
    const char *value;
    int id;
    while ((id = cli_next_option(&p, &value)) >= 0) {
        if (id == OPT_NULL)
            nul = true;
        else if (id == OPT_PROGRESS)
            show_progress = true;
        else if (cli_shape_option("build", id, value, &o) == SHAPE_BAD)
            return CLI_EXIT_USAGE;
    }
    if (id == CLI_OPT_STOP)
        return p.status;
    if (p.operands < 1 || p.operands > 2)
        return cli_usage("build", p.operands == 0 ? "missing FILE" : "too many operands");
    int status = cli_resolve_fpr("build", &o);
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
    build_job b = {.path = path, .shape = &o, .in = &in, .progress = show_progress};
    snprintf(b.label, sizeof b.label, "build %s", path);
    if (!key_reader_open(&in, fd, input ? input : "stdin", nul)) {
        cli_error("%s: out of memory", path);
        status = CLI_EXIT_FILE;
    } else {
        /* A regular file, given by name or redirected to stdin, can be read again. */
        struct stat st;
        off_t start = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? lseek(fd, 0, SEEK_CUR) : -1;
        status = start >= 0 ? build_two_passes(&b, start) : build_one_pass(&b);
        key_reader_close(&in);
    }
    if (input)
        close(fd);
    free(b.hashes);
    free(b.aside);

    if (status == CLI_EXIT_OK)
        status = cli_save_filter(b.f, path);
    if (status == CLI_EXIT_OK) {
        if (!o.quiet)
            cli_describe(path, "built", b.f);
        status = cli_report_adds(path, &b.counts, true, o.quiet);
    }
    cf_free(b.f);
    return status;
}
