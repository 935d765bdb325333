/*
 * keys.c - the subcommands that take keys: add, delete, query and count.
 *
 * Keys come from the command line when there are any after FILE, else from stdin.
 * add and delete load the filter, change it and save it atomically; query and count map
 * the file and answer from it in place.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Keys per cf_contains_keys call: enough for the library to overlap their memory reads,
 * few enough that the keys' copies stay in the L1 cache until they are printed. */
#define QUERY_BATCH         256
/* Keys handed at once to the thread that answers a query beside the one that reads: each
 * hand-over wakes a thread (microseconds), 4096 lookups and prints take about 200. */
#define QUERY_HANDOFF       4096
/* First size of the buffer holding a batch's keys; it grows for long keys. */
#define BATCH_BYTES_INITIAL ((size_t)1 << 16)
/* stdout buffer when it is not a terminal: one write() per many answers. */
#define OUTPUT_BUFFER_BYTES ((size_t)1 << 16)
/* The largest --threads taken: any count a script may pass (a query uses two at most). */
#define QUERY_MAX_THREADS   1024
/* Room for "query FILE" in a progress line; a longer name is cut. */
#define LABEL_BYTES         256

/* What a subcommand that takes keys was asked to do. */
typedef struct key_cmd {
    const char *sub;
    const char *path;
    char **keys; /* the keys on the command line, after FILE */
    size_t nkeys;
    char label[LABEL_BYTES]; /* "add FILE", for the progress line */
    bool nul;
    bool quiet;
    bool progress;
    bool unique;
    bool present;
    bool absent;
    bool no_verify;
    bool no_wait;
    unsigned threads;       /* query: 1, or more to read and answer on two threads */
    cli_clock clock;        /* a windowed filter: the time its window is brought to */
    uint64_t at;            /* query, count: the generation they answer as at (cf_contains_at) */
    uint64_t save_every_ms; /* add, delete from stdin: save this often (0: at the end) */
} key_cmd;

/* Returned by parse_key_cmd when the command should go on. */
#define KEEP_GOING (-1)

/* Reads the command line into *c. Returns KEEP_GOING, or the exit status of a command
 * that is over (--help, a usage error). */
static int parse_key_cmd(key_cmd *c, const char *sub, const cli_opt *opts, size_t nopts,
                         const char *help, int argc, char **argv)
{
    *c = (key_cmd){.sub = sub};
    cli_parser p;
    cli_parser_init(&p, sub, help, opts, nopts, argc, argv);
    const char *value;
    int id;
    while ((id = cli_next_option(&p, &value)) >= 0) {
        switch (id) {
        case OPT_NULL:
            c->nul = true;
            break;
        case OPT_QUIET:
            c->quiet = true;
            break;
        case OPT_PROGRESS:
            c->progress = true;
            break;
        case OPT_UNIQUE:
            c->unique = true;
            break;
        case OPT_PRESENT:
            c->present = true;
            break;
        case OPT_ABSENT:
            c->absent = true;
            break;
        case OPT_NO_VERIFY:
            c->no_verify = true;
            break;
        case OPT_NO_WAIT:
            c->no_wait = true;
            break;
        case OPT_AT:
        case OPT_NOW:
            if (!cli_clock_option(sub, id, value, &c->clock))
                return CLI_EXIT_USAGE;
            break;
        case OPT_SAVE_EVERY:
            if (!cli_parse_duration(sub, "save-every", value, &c->save_every_ms))
                return CLI_EXIT_USAGE;
            break;
        case OPT_THREADS: {
            uint64_t v;
            if (!cli_parse_uint(sub, "threads", value, 1, QUERY_MAX_THREADS, false, &v))
                return CLI_EXIT_USAGE;
            c->threads = (unsigned)v;
            break;
        }
        default:
            break;
        }
    }
    if (id == CLI_OPT_STOP)
        return p.status;
    if (p.operands == 0)
        return cli_usage(sub, "missing FILE");
    if (c->present && c->absent)
        return cli_usage(sub, "--present and --absent exclude each other");
    c->path = argv[0];
    c->keys = argv + 1;
    c->nkeys = (size_t)p.operands - 1;
    snprintf(c->label, sizeof c->label, "%s %s", sub, c->path);
    return KEEP_GOING;
}

/* The keys of the command line, or stdin's when there are none. */
static int open_keys(const key_cmd *c, key_reader *in)
{
    if (c->nkeys > 0) {
        key_reader_args(in, c->keys, c->nkeys);
        return CLI_EXIT_OK;
    }
    if (!key_reader_open(in, STDIN_FILENO, "stdin", c->nul)) {
        cli_error("stdin: out of memory");
        return CLI_EXIT_FILE;
    }
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------------------ */
/* add and delete                                                                       */
/* ------------------------------------------------------------------------------------ */

static const char add_help[] =
    "Usage: cuckoo add FILE [OPTION...] [KEY...]\n"
    "Add the KEYs, or the keys read from stdin when there are none, to the filter in FILE.\n"
    "Keys on stdin are lines without their \"\\n\" or \"\\r\\n\" (an empty line is the empty\n"
    "key), or NUL-terminated with -0. Put -- before KEYs that begin with '-'.\n"
    "\n"
    "  --unique        add a key only if the filter does not (probably) hold it yet (a\n"
    "                  windowed filter copies a key only older generations hold into the\n"
    "                  newest: it stays a window after it was last seen)\n"
    "  --at T          windowed filters: the time is T (Unix seconds), not the clock's\n"
    "  --now           windowed filters: the time is the clock's (the default)\n"
    "  -0, --null      keys on stdin are terminated by NUL bytes, not newlines\n"
    "  --no-wait       fail at once if another command is changing FILE\n"
    "  --save-every D  keys from stdin: also save every D (such as 30s or 5m) while\n"
    "                  reading, when keys were added since the last save\n"
    "  --progress      show progress even when stderr is not a terminal\n"
    "  -q, --quiet     no progress, no summary\n"
    "  -h, --help      show this help\n"
    "\n"
    "A key that does not fit (a fixed filter is full, a growing one has all its\n"
    "sub-filters, or the key was added too often) is counted and skipped; the keys that\n"
    "fit are saved, and the exit status is 3. FILE is replaced atomically: whatever\n"
    "happens, it holds the old filter or the new one. Commands that change the same FILE\n"
    "take turns (a lock on FILE), so none loses another's keys.\n"
    "Stopped by SIGINT (Ctrl-C), SIGTERM or SIGHUP while reading stdin (`tail -f log |\n"
    "cuckoo add seen.cf`), it saves the keys added so far, then dies of that signal.\n";

static const char delete_help[] =
    "Usage: cuckoo delete FILE [OPTION...] [KEY...]\n"
    "Delete one copy of each KEY, or of each key read from stdin when there are none (put\n"
    "-- before KEYs that begin with '-').\n"
    "Only delete keys that were added: deleting another key can remove the fingerprint of\n"
    "an added key that shares it, which is then no longer found.\n"
    "\n"
    "  --at T          windowed filters: the time is T (Unix seconds), not the clock's\n"
    "  --now           windowed filters: the time is the clock's (the default)\n"
    "  -0, --null      keys on stdin are terminated by NUL bytes, not newlines\n"
    "  --no-wait       fail at once if another command is changing FILE\n"
    "  --save-every D  keys from stdin: also save every D (such as 30s or 5m) while\n"
    "                  reading, when keys were deleted since the last save\n"
    "  --progress      show progress even when stderr is not a terminal\n"
    "  -q, --quiet     no progress, no summary\n"
    "  -h, --help      show this help\n"
    "\n"
    "FILE is replaced atomically: whatever happens, it holds the old filter or the new one.\n"
    "Commands that change the same FILE take turns (a lock on FILE). Stopped by SIGINT,\n"
    "SIGTERM or SIGHUP while reading stdin, it saves the deletes so far, then dies of that\n"
    "signal.\n";

/* Adds the keys of `in` to f, CLI_ADD_BATCH at a time (with --unique, CF_ADD_UNIQUE):
 * what one cf_add (cf_add_unique) per key in order would do. Stops after the batch whose
 * key has a status that stops the command (cli_count_add), as if that key had been the
 * last one read: *done counts the keys before it and *st is its status.
 * Returns what the last key_reader_next returned, or 1 after such a key; *err is errno of
 * a read error. */
static int add_keys(const key_cmd *c, cf_filter *f, key_reader *in, progress *pr, add_counts *added,
                    uint64_t *done, cf_status *st, int *err)
{
    uint64_t hashes[CLI_ADD_BATCH];
    size_t n = 0;
    const char *key;
    size_t len;
    int got;
    do {
        got = key_reader_next(in, &key, &len);
        if (got < 0)
            *err = errno;
        else if (got > 0)
            hashes[n++] = cf_hash(f, key, len);
        if (n == CLI_ADD_BATCH || (got <= 0 && n > 0)) {
            *st = cli_add_hashes(f, hashes, n, c->unique ? CF_ADD_UNIQUE : 0u, added, pr, done);
            if (*st != CF_OK)
                return 1;
            n = 0;
        }
    } while (got > 0);
    return got;
}

/* Deletes the keys of `in` from f, as add_keys adds them. */
static int delete_keys(cf_filter *f, key_reader *in, progress *pr, uint64_t *deleted,
                       uint64_t *not_found, uint64_t *done, cf_status *st, int *err)
{
    const char *key;
    size_t len;
    int got;
    while ((got = key_reader_next(in, &key, &len)) > 0) {
        *st = cf_delete(f, key, len);
        if (*st == CF_OK)
            (*deleted)++;
        else if (*st == CF_NOT_FOUND)
            (*not_found)++;
        else
            return 1;
        progress_tick(pr, ++*done);
    }
    *err = errno;
    return got;
}

/* Load, apply every key, save (the caller holds the file's lock): add (is_delete false)
 * or delete. *stopped_by: the signal that ended the keys from stdin, 0 if their end did. */
static int change_locked(const key_cmd *c, bool is_delete, int *stopped_by)
{
    *stopped_by = 0;
    cf_filter *f;
    cf_status st = cf_load(c->path, NULL, &f);
    if (st != CF_OK)
        return cli_fail(c->path, NULL, st, errno);
    key_reader in;
    int status = cli_window_due(c->path, f, &c->clock);
    if (status == CLI_EXIT_OK)
        status = open_keys(c, &in);
    if (status == CLI_EXIT_OK && !key_reader_catch(&in, c->save_every_ms)) {
        status = cli_fail(c->path, "cannot catch signals", CF_EIO, errno);
        key_reader_close(&in);
    }
    if (status != CLI_EXIT_OK) {
        cf_free(f);
        return status;
    }

    add_counts added = {0};
    uint64_t deleted = 0, not_found = 0, done = 0, changed_at_save = 0;
    progress pr;
    progress_start(&pr, c->label, c->quiet, c->progress, false, c->nkeys);
    int got, err = 0;
    st = CF_OK;
    /* The keys, in runs that a caught signal ends: a save that is due, then more; a stop
     * ends the keys as their end would (what came before it is saved). */
    for (;;) {
        got = is_delete ? delete_keys(f, &in, &pr, &deleted, &not_found, &done, &st, &err)
                        : add_keys(c, f, &in, &pr, &added, &done, &st, &err);
        if (got != KEY_READER_CAUGHT)
            break;
        int sig = key_reader_caught();
        uint64_t changed = is_delete ? deleted : added.added;
        if (sig != SIGALRM) {
            *stopped_by = sig;
            got = 0;
            break;
        }
        if (changed != changed_at_save && (st = cf_save(f, c->path)) != CF_OK) {
            status = cli_fail(c->path, "cannot save", st, errno);
            break;
        }
        changed_at_save = changed;
    }
    progress_finish(&pr, done);

    /* A read error or a failed add leaves the file as it was (or as the last periodic save
     * left it), so that running the same command again gives what one successful run
     * would have. */
    const char *unsaved = changed_at_save ? "nothing saved since the last save" : "nothing saved";
    if (status != CLI_EXIT_OK) {
        /* the failed periodic save said why */
    } else if (got < 0) {
        cli_error("%s: %s (%s)", in.name, strerror(err), unsaved);
        status = CLI_EXIT_FILE;
    } else if (got > 0) {
        cli_error("%s: %s after %" PRIu64 " keys (%s)", c->path, cf_strerror(st), done, unsaved);
        status = CLI_EXIT_FILE;
    } else if ((is_delete ? deleted : added.added) != changed_at_save) {
        st = cf_save(f, c->path);
        if (st != CF_OK)
            status = cli_fail(c->path, "cannot save", st, errno);
    }
    cf_free(f);
    /* Only now may a signal that came since act as it would have (key_reader_close). */
    key_reader_close(&in);
    if (status == CLI_EXIT_OK && *stopped_by && !c->quiet)
        fprintf(stderr, "%s: stopped by signal %d (%s): what came before it is saved\n", c->path,
                *stopped_by, strsignal(*stopped_by));
    if (status != CLI_EXIT_OK)
        return status;
    if (!is_delete)
        return cli_report_adds(c->path, &added, c->unique, c->quiet);
    if (!c->quiet)
        fprintf(stderr, "%s: deleted %" PRIu64 ", not found %" PRIu64 "\n", c->path, deleted,
                not_found);
    return CLI_EXIT_OK;
}

/* Lock, load, apply every key, save, unlock: add (is_delete false) or delete. Stopped by
 * a signal, it then dies of it, as the shell and a supervisor expect of a stopped
 * command. */
static int change_filter(const key_cmd *c, bool is_delete)
{
    int lock, stopped_by;
    int status = cli_lock_file(c->path, !c->no_wait, &lock);
    if (status != CLI_EXIT_OK)
        return status;
    status = change_locked(c, is_delete, &stopped_by);
    close(lock);
    /* (A save that failed then exits with its own status: what was read is not saved.) */
    if (stopped_by && (status == CLI_EXIT_OK || status == CLI_EXIT_FULL)) {
        fflush(NULL);
        signal(stopped_by, SIG_DFL);
        raise(stopped_by);
        return CLI_EXIT_SIGNAL + stopped_by; /* if the default was to ignore it */
    }
    return status;
}

int cmd_add(int argc, char **argv)
{
    static const cli_opt opts[] = {
        {"unique", 0, false, OPT_UNIQUE},
        {"null", '0', false, OPT_NULL},
        {"no-wait", 0, false, OPT_NO_WAIT},
        {"progress", 0, false, OPT_PROGRESS},
        {"quiet", 'q', false, OPT_QUIET},
        {"at", 0, true, OPT_AT},
        {"now", 0, false, OPT_NOW},
        {"help", 'h', false, OPT_HELP},
        {"save-every", 0, true, OPT_SAVE_EVERY},
    };
    key_cmd c;
    int status = parse_key_cmd(&c, "add", opts, sizeof opts / sizeof opts[0], add_help, argc, argv);
    return status == KEEP_GOING ? change_filter(&c, false) : status;
}

int cmd_delete(int argc, char **argv)
{
    static const cli_opt opts[] = {
        {"null", '0', false, OPT_NULL},
        {"no-wait", 0, false, OPT_NO_WAIT},
        {"progress", 0, false, OPT_PROGRESS},
        {"quiet", 'q', false, OPT_QUIET},
        {"at", 0, true, OPT_AT},
        {"now", 0, false, OPT_NOW},
        {"help", 'h', false, OPT_HELP},
        {"save-every", 0, true, OPT_SAVE_EVERY},
    };
    key_cmd c;
    int status =
        parse_key_cmd(&c, "delete", opts, sizeof opts / sizeof opts[0], delete_help, argc, argv);
    return status == KEEP_GOING ? change_filter(&c, true) : status;
}

/* ------------------------------------------------------------------------------------ */
/* query and count                                                                      */
/* ------------------------------------------------------------------------------------ */

static const char query_help[] =
    "Usage: cuckoo query FILE [OPTION...] [KEY...]\n"
    "Look up the KEYs, or the keys read from stdin when there are none, and print\n"
    "KEY<TAB>yes or KEY<TAB>no for each, in order. yes is wrong with the filter's\n"
    "false-positive rate; no is always right. Put -- before KEYs that begin with '-'.\n"
    "\n"
    "  --present       print only the keys that are (probably) present, one per line\n"
    "  --absent        print only the keys that are certainly absent, one per line\n"
    "  -0, --null      keys on stdin, and the records printed, end with NUL bytes\n"
    "  --at T          windowed filters: answer as at time T (Unix seconds), not now\n"
    "  --now           windowed filters: answer as now (the default)\n"
    "  --no-verify     skip the check of the whole file's checksum (for a very large\n"
    "                  file; a damaged table then gives wrong answers, never a crash)\n"
    "  --threads N     1: read, look up and print on one thread; 2 or more: look up\n"
    "                  and print on a second thread while the first reads (the\n"
    "                  default for keys on stdin with 2 or more processors)\n"
    "  --progress      show progress even when stderr is not a terminal\n"
    "  -q, --quiet     no progress\n"
    "  -h, --help      show this help\n"
    "\n"
    "Example: cat urls | cuckoo query blocklist.cf --absent\n";

static const char count_help[] =
    "Usage: cuckoo count FILE [OPTION...] [KEY...]\n"
    "Print KEY<TAB>N for each KEY, or each key read from stdin when there are none: N is\n"
    "how many stored fingerprints match the key, at least the times it was added minus\n"
    "the times it was deleted (false positives can make it more). Put -- before KEYs\n"
    "that begin with '-'.\n"
    "\n"
    "  -0, --null      keys on stdin, and the records printed, end with NUL bytes\n"
    "  --at T          windowed filters: answer as at time T (Unix seconds), not now\n"
    "  --now           windowed filters: answer as now (the default)\n"
    "  --no-verify     skip the check of the whole file's checksum\n"
    "  --progress      show progress even when stderr is not a terminal\n"
    "  -q, --quiet     no progress\n"
    "  -h, --help      show this help\n";

/* Keys waiting to be answered, copied: the reader reuses its buffer. */
typedef struct query_batch {
    const void *keys[QUERY_HANDOFF]; /* into bytes, set when the batch is answered */
    bool found[QUERY_HANDOFF];
    size_t offset[QUERY_HANDOFF]; /* of each key in bytes */
    size_t len[QUERY_HANDOFF];
    size_t n;
    char *bytes;
    size_t used;
    size_t cap;
} query_batch;

static bool batch_push(query_batch *b, const char *key, size_t len)
{
    if (!b->bytes || len > b->cap - b->used) {
        size_t cap = b->cap ? b->cap : BATCH_BYTES_INITIAL;
        while (cap - b->used < len) {
            if (cap > SIZE_MAX / 2)
                return false;
            cap *= 2;
        }
        char *bytes = realloc(b->bytes, cap);
        if (!bytes)
            return false;
        b->bytes = bytes;
        b->cap = cap;
    }
    if (len > 0)
        memcpy(b->bytes + b->used, key, len);
    b->offset[b->n] = b->used;
    b->len[b->n] = len;
    b->used += len;
    b->n++;
    return true;
}

/* Answers the batch and prints it, QUERY_BATCH keys at a time. Returns false once stdout
 * has failed. */
static bool batch_flush(query_batch *b, const cf_filter *f, const key_cmd *c)
{
    /* Pointers only now: bytes may have moved while the batch grew. */
    for (size_t i = 0; i < b->n; i++)
        b->keys[i] = b->bytes + b->offset[i];
    char term = c->nul ? '\0' : '\n';
    for (size_t from = 0; from < b->n; from += QUERY_BATCH) {
        size_t to = b->n - from < QUERY_BATCH ? b->n : from + QUERY_BATCH;
        cf_contains_keys_at(f, b->keys + from, b->len + from, to - from, c->at, b->found + from);
        for (size_t i = from; i < to; i++) {
            bool wanted = c->present ? b->found[i] : c->absent ? !b->found[i] : true;
            if (!wanted)
                continue;
            fwrite(b->bytes + b->offset[i], 1, b->len[i], stdout);
            if (!c->present && !c->absent)
                fputs(b->found[i] ? "\tyes" : "\tno", stdout);
            putchar(term);
        }
    }
    b->n = 0;
    b->used = 0;
    return !ferror(stdout);
}

static void batch_free(query_batch *b)
{
    if (b)
        free(b->bytes);
    free(b);
}

/* A query on two threads: the main thread reads keys into one batch while the answerer
 * looks up and prints the other, batches in the order read. Lookups of a filter need no
 * lock (the library allows any number of concurrent const calls); the two threads share
 * only the hand-over below. */
typedef struct query_pipe {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    query_batch *ready; /* handed over and not yet answered; NULL while the answerer waits */
    bool closing;       /* no batch will follow */
    bool failed;        /* stdout failed: stop reading */
    const cf_filter *f;
    const key_cmd *c;
    pthread_t answerer;
} query_pipe;

static void *answerer_main(void *arg)
{
    query_pipe *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->ready && !q->closing)
            pthread_cond_wait(&q->cv, &q->mu);
        query_batch *b = q->ready;
        if (!b)
            break;
        pthread_mutex_unlock(&q->mu);
        bool ok = batch_flush(b, q->f, q->c);
        pthread_mutex_lock(&q->mu);
        q->ready = NULL;
        q->failed |= !ok;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Waits until the answerer is done with the batch before, then hands b over. Returns
 * false once stdout has failed. */
static bool pipe_hand(query_pipe *q, query_batch *b)
{
    pthread_mutex_lock(&q->mu);
    while (q->ready)
        pthread_cond_wait(&q->cv, &q->mu);
    bool ok = !q->failed;
    if (ok && b->n) {
        q->ready = b;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return ok;
}

/* Lets the answerer finish and stop. */
static void pipe_close(query_pipe *q)
{
    pthread_mutex_lock(&q->mu);
    q->closing = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->answerer, NULL);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
}

/* Starts the answerer; false if the system would not (the query then runs on one thread). */
static bool pipe_open(query_pipe *q, const cf_filter *f, const key_cmd *c)
{
    *q = (query_pipe){.f = f, .c = c};
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        return false;
    if (pthread_cond_init(&q->cv, NULL) != 0) {
        pthread_mutex_destroy(&q->mu);
        return false;
    }
    if (pthread_create(&q->answerer, NULL, answerer_main, q) != 0) {
        pthread_cond_destroy(&q->cv);
        pthread_mutex_destroy(&q->mu);
        return false;
    }
    return true;
}

/* Parses the command line of query or count (KEEP_GOING to go on), then opens the filter
 * and the keys. */
static int start_lookups(key_cmd *c, const char *name, const cli_opt *opts, size_t nopts,
                         const char *help, int argc, char **argv, cf_filter **f, key_reader *in)
{
    int status = parse_key_cmd(c, name, opts, nopts, help, argc, argv);
    if (status != KEEP_GOING)
        return status;
    status = cli_open_mapped(c->path, !c->no_verify, f);
    if (status != CLI_EXIT_OK)
        return status;
    /* A windowed filter answers as at the generation due now: those that fell out of the
     * window since the file was written are not seen (0 for other filters: as they are). */
    c->at = cf_generation_at(*f, cli_clock_now(&c->clock));
    status = open_keys(c, in);
    if (status != CLI_EXIT_OK) {
        cf_free(*f);
        return status;
    }
    if (isatty(STDOUT_FILENO) != 1)
        setvbuf(stdout, NULL, _IOFBF, OUTPUT_BUFFER_BYTES);
    return KEEP_GOING;
}

/* The status after the last key: a read error, else whatever stdout says. */
static int end_lookups(int got, int err, const key_reader *in, cf_filter *f)
{
    cf_free(f);
    int status = CLI_EXIT_OK;
    if (got < 0) {
        cli_error("%s: %s", in->name, strerror(err));
        status = CLI_EXIT_FILE;
    }
    return cli_finish_stdout(status);
}

int cmd_query(int argc, char **argv)
{
    static const cli_opt opts[] = {
        {"present", 0, false, OPT_PRESENT},
        {"absent", 0, false, OPT_ABSENT},
        {"null", '0', false, OPT_NULL},
        {"progress", 0, false, OPT_PROGRESS},
        {"no-verify", 0, false, OPT_NO_VERIFY},
        {"quiet", 'q', false, OPT_QUIET},
        {"threads", 0, true, OPT_THREADS},
        {"at", 0, true, OPT_AT},
        {"now", 0, false, OPT_NOW},
        {"help", 'h', false, OPT_HELP},
    };
    key_cmd c;
    cf_filter *f;
    key_reader in;
    int status = start_lookups(&c, "query", opts, sizeof opts / sizeof opts[0], query_help, argc,
                               argv, &f, &in);
    if (status != KEEP_GOING)
        return status;

    /* Two batches: with a second thread, one fills while the other is answered. */
    query_batch *batch[2] = {calloc(1, sizeof *batch[0]), calloc(1, sizeof *batch[1])};
    if (!batch[0] || !batch[1]) {
        cli_error("out of memory");
        batch_free(batch[0]);
        batch_free(batch[1]);
        key_reader_close(&in);
        cf_free(f);
        return CLI_EXIT_FILE;
    }
    /* By default two threads for keys on stdin (a few on the command line are not worth
     * one) when there are two processors to run them. */
    if (c.threads == 0)
        c.threads = c.nkeys == 0 && sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 2u : 1u;
    query_pipe qp;
    bool piped = c.threads > 1 && pipe_open(&qp, f, &c);
    /* On one thread, small batches: the keys' copies stay in the L1 cache until printed. */
    size_t limit = piped ? QUERY_HANDOFF : QUERY_BATCH;
    query_batch *b = batch[0];
    progress pr;
    progress_start(&pr, c.label, c.quiet, c.progress, true, c.nkeys);
    uint64_t done = 0;
    const char *key;
    size_t len;
    int got;
    bool memory_ok = true, out_ok = true;
    while ((got = key_reader_next(&in, &key, &len)) > 0) {
        if (!batch_push(b, key, len)) {
            memory_ok = false;
            break;
        }
        if (b->n == limit) {
            /* A failed write stops the loop; cli_finish_stdout reports it. */
            out_ok = piped ? pipe_hand(&qp, b) : batch_flush(b, f, &c);
            if (!out_ok)
                break;
            if (piped)
                b = b == batch[0] ? batch[1] : batch[0];
        }
        progress_tick(&pr, ++done);
    }
    int err = memory_ok ? errno : ENOMEM;
    if (got == 0 && out_ok)
        (void)(piped ? pipe_hand(&qp, b) : batch_flush(b, f, &c));
    if (piped)
        pipe_close(&qp);
    progress_finish(&pr, done);
    key_reader_close(&in);
    batch_free(batch[0]);
    batch_free(batch[1]);
    if (!memory_ok)
        got = -1;
    return end_lookups(got, err, &in, f);
}

int cmd_count(int argc, char **argv)
{
    static const cli_opt opts[] = {
        {"null", '0', false, OPT_NULL},
        {"progress", 0, false, OPT_PROGRESS},
        {"no-verify", 0, false, OPT_NO_VERIFY},
        {"quiet", 'q', false, OPT_QUIET},
        {"at", 0, true, OPT_AT},
        {"now", 0, false, OPT_NOW},
        {"help", 'h', false, OPT_HELP},
    };
    key_cmd c;
    cf_filter *f;
    key_reader in;
    int status = start_lookups(&c, "count", opts, sizeof opts / sizeof opts[0], count_help, argc,
                               argv, &f, &in);
    if (status != KEEP_GOING)
        return status;

    progress pr;
    progress_start(&pr, c.label, c.quiet, c.progress, true, c.nkeys);
    char term = c.nul ? '\0' : '\n';
    uint64_t done = 0;
    const char *key;
    size_t len;
    int got;
    while ((got = key_reader_next(&in, &key, &len)) > 0) {
        fwrite(key, 1, len, stdout);
        printf("\t%" PRIu64 "%c", cf_count_at(f, key, len, c.at), term);
        if (ferror(stdout))
            break;
        progress_tick(&pr, ++done);
    }
    int err = errno;
    progress_finish(&pr, done);
    key_reader_close(&in);
    return end_lookups(got, err, &in, f);
}
