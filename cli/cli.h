/*
 * cli.h - what the source files of the `cuckoo` command-line tool share: exit statuses,
 * error messages, option parsing, the key reader and the progress line.
 *
 * The tool uses nothing of the library but its public header, to prove the API suffices.
 */
#ifndef CUCKOO_CLI_H
#define CUCKOO_CLI_H

#include <cuckoofilter.h>

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Exit statuses, documented in cuckoo(1). */
#define CLI_EXIT_OK     0
#define CLI_EXIT_USAGE  1 /* bad command line: no file was read or written */
#define CLI_EXIT_FILE   2 /* missing, corrupt or unwritable file, read error, out of memory */
#define CLI_EXIT_FULL   3 /* some keys did not fit; the ones that did were saved */
/* A command stopped by a signal dies of it; where that signal's default is to go on, it
 * exits with this plus the signal's number, as a shell reports one. */
#define CLI_EXIT_SIGNAL 128

#if defined(__GNUC__) || defined(__clang__)
#define CLI_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CLI_PRINTF(fmt, args)
#endif

/* ------------------------------------------------------------------------------------ */
/* Messages (common.c)                                                                  */
/* ------------------------------------------------------------------------------------ */

/* Longest message: room for a long path (PATH_MAX is 4096 on Linux) and what follows it;
 * anything longer is cut. */
#define CLI_MESSAGE_MAX 8192

/* "cuckoo: MESSAGE\n" on stderr: every error is one such line. */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);

/* "cuckoo: SUB: MESSAGE (see 'cuckoo SUB --help')" on stderr, one line; returns
 * CLI_EXIT_USAGE. sub is NULL for the top level. */
int cli_usage(const char *sub, const char *fmt, ...) CLI_PRINTF(2, 3);

/* Reports a failed library call on `path` as one line and returns CLI_EXIT_FILE.
 * what:  "cannot save" and the like, or NULL when the path and the reason say it all.
 * err:   errno right after the call, used for CF_EIO.
 * A corrupt or too new file is named with the reason cf_validate_file gives. */
int cli_fail(const char *path, const char *what, cf_status st, int err);

/* The line cli_fail_reason prints, without "cuckoo: " (and without "PATH: " if path is
 * NULL), into line. */
void cli_fail_text(char line[CLI_MESSAGE_MAX], const char *path, const char *what, cf_status st,
                   int err, const char *reason);

/* As cli_fail, with the reason cf_validate or cf_validate_file gave (NULL if none). */
int cli_fail_reason(const char *path, const char *what, cf_status st, int err, const char *reason);

/* Flushes stdout; on a write error (disk full, closed descriptor) reports it and returns
 * CLI_EXIT_FILE, else `status`. Every command that prints to stdout ends with this. */
int cli_finish_stdout(int status);

/* Opens `path` read-only and memory-mapped for lookups, reporting any failure.
 * verify: check the tables' checksum first (CF_MAP_VERIFY). */
int cli_open_mapped(const char *path, bool verify, cf_filter **out);

/* Takes the lock of the filter file at `path` for a load-change-save, so that two
 * commands changing one file never lose each other's keys: an exclusive flock on the file
 * (the one a symbolic link names), taken again on the new file if another command
 * replaced it while this one waited. wait: block until it is free; otherwise fail at once.
 * Returns CLI_EXIT_OK with *fd to close when done (that unlocks), or CLI_EXIT_FILE after
 * a one-line message. */
int cli_lock_file(const char *path, bool wait, int *fd);

/* ------------------------------------------------------------------------------------ */
/* Adding keys (common.c)                                                               */
/* ------------------------------------------------------------------------------------ */

/* What happened to the keys of an add or a build. */
typedef struct progress progress; /* the progress line, below */

typedef struct add_counts {
    uint64_t added;
    uint64_t present; /* already there: --unique adds, and repeated keys of build */
    uint64_t full;    /* not added: CF_FULL */
} add_counts;

/* Counts the outcome of one add. Returns false for a status that stops the command
 * (CF_ENOMEM or anything unexpected); CF_FULL is counted and the command goes on. */
bool cli_count_add(add_counts *c, cf_status st);

/* Hashes per cf_add_many call: enough to overlap the memory reads of their buckets, few
 * enough that a batch's hashes and statuses stay on the stack (3 KiB). */
#define CLI_ADD_BATCH 256
/* --jobs: at most this many threads (far more than the cores it pays to use). */
#define CLI_JOBS_MAX  256u

/* Adds hashes[0 .. n) to f through cf_add_many, CLI_ADD_BATCH at a time (flags 0 or
 * CF_ADD_UNIQUE: what one cf_add_hash or cf_add_unique per key would do), counting each
 * status into *c and ticking *pr with *done, the keys done so far. Returns CF_OK; or the
 * first status that stops the command (cli_count_add), with *done counting the keys
 * before that key. */
cf_status cli_add_hashes(cf_filter *f, const uint64_t *hashes, size_t n, unsigned flags,
                         add_counts *c, progress *pr, uint64_t *done);

/* After the filter was saved: the summary line on stderr (unless quiet) and, if some
 * keys did not fit, the error line. Returns CLI_EXIT_OK or CLI_EXIT_FULL. */
int cli_report_adds(const char *path, const add_counts *c, bool show_present, bool quiet);

/* ------------------------------------------------------------------------------------ */
/* Options (common.c)                                                                   */
/* ------------------------------------------------------------------------------------ */

/* Option identifiers, shared by every subcommand's table. */
enum cli_opt_id {
    OPT_HELP = 1,
    OPT_NULL,
    OPT_QUIET,
    OPT_PROGRESS,
    OPT_CAPACITY,
    OPT_FPR,
    OPT_FINGERPRINT_BITS,
    OPT_BUCKET_SIZE,
    OPT_MAX_KICKS,
    OPT_EXPANSION,
    OPT_MAX_SUB_FILTERS,
    OPT_FPR_BOUND,
    OPT_SAME_WIDTH,
    OPT_SEMI_SORT,
    OPT_MAPPING,
    OPT_REDISBLOOM,
    OPT_SEED,
    OPT_FORCE,
    OPT_UNIQUE,
    OPT_PRESENT,
    OPT_ABSENT,
    OPT_JSON,
    OPT_NO_VERIFY,
    OPT_NO_WAIT,
    OPT_THREADS,
    OPT_JOBS,
    OPT_WINDOW,
    OPT_GENERATIONS,
    OPT_AT,
    OPT_NOW,
    OPT_SAVE_EVERY,
};

typedef struct cli_opt {
    const char *name; /* long name, without the leading "--" */
    char short_name;  /* one-letter alias ("-0"), or 0 */
    bool has_value;   /* takes a value: "--name VALUE" or "--name=VALUE" */
    int id;           /* an enum cli_opt_id */
} cli_opt;

/* Walks a subcommand's arguments as getopt_long does. Options and operands may come in any
 * order; "--" ends the options (for keys that begin with '-'), and "-" alone is an
 * operand. Short options bundle ("-0q"; one that takes a value takes the rest of the
 * word or the next argument: "-ofile"), and a long option may be cut to any prefix that
 * names only one ("--cap" for --capacity). Operands are moved to the front of argv as
 * they are met, so when cli_next_option returns CLI_OPT_DONE, argv[0 .. operands) are
 * the operands in their order. */
typedef struct cli_parser {
    const char *sub;     /* the subcommand, for messages */
    const char *help;    /* its --help text */
    int status;          /* the exit status once cli_next_option returned CLI_OPT_STOP */
    const cli_opt *opts; /* its options */
    size_t nopts;
    char **argv; /* the arguments after the subcommand's name */
    int argc;
    int next;           /* index of the next argument to look at */
    int operands;       /* operands found so far, at argv[0 .. operands) */
    bool no_options;    /* "--" was seen */
    const char *bundle; /* the short options of the current word not yet taken, or NULL */
} cli_parser;

#define CLI_OPT_DONE (-1) /* no arguments left */
#define CLI_OPT_STOP (-2) /* --help was answered or a usage error reported: exit p->status */

void cli_parser_init(cli_parser *p, const char *sub, const char *help, const cli_opt *opts,
                     size_t nopts, int argc, char **argv);

/* The id of the next option, with its value in *value (NULL if it takes none), or
 * CLI_OPT_DONE, or CLI_OPT_STOP. OPT_HELP is handled here: it prints the help text. */
int cli_next_option(cli_parser *p, const char **value);

/* Strict unsigned parsing for option `opt` of subcommand `sub`, within [min, max]: decimal
 * digits only (no sign, no spaces); with `counts`, also a count as people write one:
 * "2.5M", "1e6", "1.5e3k" (k, M, G multiply by 10^3, 10^6, 10^9; the value must be whole).
 * On a bad value, reports a usage error and returns false. */
bool cli_parse_uint(const char *sub, const char *opt, const char *text, uint64_t min, uint64_t max,
                    bool counts, uint64_t *out);

/* As cli_parse_uint, for a 64-bit seed: decimal, or hexadecimal with a 0x prefix. */
bool cli_parse_seed(const char *sub, const char *opt, const char *text, uint64_t *out);

/* A probability strictly between 0 and 1, such as 0.001 or 1e-4. */
bool cli_parse_probability(const char *sub, const char *opt, const char *text, double *out);

/* ------------------------------------------------------------------------------------ */
/* Keys (input.c)                                                                       */
/* ------------------------------------------------------------------------------------ */

/* Reads keys from a descriptor (lines or NUL-separated records) or from a list of
 * command-line arguments, without copying them: a key stays valid until the next call.
 * A line's trailing "\n" or "\r\n" is not part of the key; an empty line is the empty key;
 * a last line without "\n" is a key; nothing follows a final "\n". */
/* The signals key_reader_catch catches: SIGINT, SIGTERM, SIGHUP and SIGALRM. */
#define KEY_READER_SIGNALS 4

typedef struct key_reader {
    const char *name; /* for messages: the input file's name or "stdin" */
    int fd;           /* -1 when reading `args` */
    char sep;         /* '\n' (lines) or '\0' (-0) */
    char *buf;
    size_t cap;     /* bytes allocated at buf */
    size_t pos;     /* start of the first key not yet returned */
    size_t scanned; /* bytes from pos known to hold no separator */
    size_t end;     /* bytes of data at buf */
    bool eof;
    char **args; /* keys from the command line, when fd is -1 */
    size_t nargs;
    size_t next_arg;
    /* key_reader_catch: the signals it catches are blocked but while a read waits, and
     * unblocked is the mask that waits with them open; prev, their former handlers. */
    bool catching;
    sigset_t unblocked;
    struct sigaction prev[KEY_READER_SIGNALS];
} key_reader;

/* Keys from `fd` (not closed by the reader). Returns false with errno ENOMEM. */
bool key_reader_open(key_reader *r, int fd, const char *name, bool nul_separated);

/* Keys from args[0 .. n), each taken as-is. */
void key_reader_args(key_reader *r, char **args, size_t n);

/* 1 and the next key in *key, *len; 0 at the end; -1 on a read error or when a key does
 * not fit in memory (errno says which); KEY_READER_CAUGHT when a signal that
 * key_reader_catch catches came (key_reader_caught says which), before the read that
 * would wait for more. */
int key_reader_next(key_reader *r, const char **key, size_t *len);
#define KEY_READER_CAUGHT (-2)

/* Catch SIGINT, SIGTERM and SIGHUP while reading from a descriptor (stdin fed by `tail
 * -f` never ends: a command stopped so must still save what it added), and with
 * save_every_ms > 0 raise SIGALRM that often, for periodic saves. Every later read waits
 * with them open and returns KEY_READER_CAUGHT once one came; they are blocked otherwise,
 * so a save is never cut short. Nothing for keys from the command line. False with errno
 * if the signals could not be set up. */
bool key_reader_catch(key_reader *r, uint64_t save_every_ms);

/* The signal caught since the last call (SIGALRM: a save is due; another: stop), 0 if
 * none; a stop signal is never hidden by a later SIGALRM. */
int key_reader_caught(void);

/* Frees the buffer and puts back the signals' handlers and mask as they were. */
void key_reader_close(key_reader *r);

/* ------------------------------------------------------------------------------------ */
/* Progress line (input.c)                                                              */
/* ------------------------------------------------------------------------------------ */

/* A progress line on stderr for long key streams: shown after about a second when stderr
 * is a terminal (rewritten in place with '\r'), from the start with --progress (as
 * ordinary lines on a non-terminal), never with --quiet. */
struct progress {
    const char *label;   /* "build x.cf" */
    uint64_t total;      /* keys expected, 0 if unknown */
    uint64_t next_check; /* the count at which to look at the clock again */
    double start;        /* seconds, monotonic */
    double next_print;   /* when the next line may be printed */
    bool enabled;        /* may print at all */
    bool forced;         /* --progress */
    bool tty;            /* stderr is a terminal: rewrite one line */
    bool shown;          /* something was printed */
    int width;           /* characters of the last line printed on the terminal */
};

/* writes_stdout: the command prints results on stdout; if that is the same terminal, an
 * automatic progress line would garble them, so it stays off (unless forced). */
void progress_start(progress *p, const char *label, bool quiet, bool forced, bool writes_stdout,
                    uint64_t total);

/* Looks at the clock (rarely) and prints when it is time. */
void progress_update(progress *p, uint64_t done);

static inline void progress_tick(progress *p, uint64_t done)
{
    if (done >= p->next_check)
        progress_update(p, done);
}

/* Prints the final count if anything was shown (or --progress) and ends the line. */
void progress_finish(progress *p, uint64_t done);

/* ------------------------------------------------------------------------------------ */
/* New filters (create.c), for create and build                                         */
/* ------------------------------------------------------------------------------------ */

/* The options that shape a new filter, for a subcommand's option table. */
/* clang-format off */
#define SHAPE_OPTIONS                                                                       \
    {"fpr", 0, true, OPT_FPR},                                                              \
    {"fingerprint-bits", 0, true, OPT_FINGERPRINT_BITS},                                    \
    {"bucket-size", 0, true, OPT_BUCKET_SIZE},                                              \
    {"max-kicks", 0, true, OPT_MAX_KICKS},                                                  \
    {"expansion", 0, true, OPT_EXPANSION},                                                  \
    {"max-sub-filters", 0, true, OPT_MAX_SUB_FILTERS},                                      \
    {"fpr-bound", 0, true, OPT_FPR_BOUND},                                                  \
    {"same-width", 0, false, OPT_SAME_WIDTH},                                               \
    {"semi-sort", 0, false, OPT_SEMI_SORT},                                                 \
    {"mapping", 0, true, OPT_MAPPING},                                                      \
    {"redisbloom", 0, false, OPT_REDISBLOOM},                                               \
    {"seed", 0, true, OPT_SEED},                                                            \
    {"window", 0, true, OPT_WINDOW},                                                        \
    {"generations", 0, true, OPT_GENERATIONS},                                              \
    {"at", 0, true, OPT_AT},                                                                \
    {"now", 0, false, OPT_NOW},                                                             \
    {"force", 0, false, OPT_FORCE},                                                         \
    {"quiet", 'q', false, OPT_QUIET},                                                       \
    {"help", 'h', false, OPT_HELP}
/* clang-format on */

/* Where a help text lists SHAPE_OPTIONS: the lines are printed there with the limits and
 * defaults of the library's header (cli_next_option does it). */
#define SHAPE_HELP "@SHAPE_OPTIONS@\n"

/* ------------------------------------------------------------------------------------ */
/* Windowed filters (window.c)                                                          */
/* ------------------------------------------------------------------------------------ */

/* Generations of a window given without --generations: keys go within W * 8 / 7 (14 %
 * past the window) for 8 probes a lookup. */
#define CLI_DEFAULT_GENERATIONS 8u

/* The time a command runs at: the system clock, or --at. */
typedef struct cli_clock {
    bool fixed;  /* --at given */
    uint64_t ms; /* then its time, in ms since the Unix epoch */
} cli_clock;

/* A duration such as 90s, 15m, 24h, 7d or 1500ms (a bare number is seconds) into *ms,
 * from 1 ms to 100 years; a usage error otherwise. */
bool cli_parse_duration(const char *sub, const char *opt, const char *text, uint64_t *ms);
/* Takes --at SECONDS (a Unix time, fractions allowed) or --now (the clock) into *c. */
bool cli_clock_option(const char *sub, int id, const char *value, cli_clock *c);
/* The command's time in ms since the Unix epoch. */
uint64_t cli_clock_now(const cli_clock *c);
/* "24h", "90m", "1500ms": the largest unit that divides ms. */
void cli_format_duration(uint64_t ms, char *buf, size_t n);
/* "2026-11-27 18:00:00 UTC". */
void cli_format_time(uint64_t ms, char *buf, size_t n);
/* The first millisecond of a windowed filter's newest generation (s: its stats). */
uint64_t cli_generation_start(const cf_stats *s);
/* Before a write: brings f (from path) to the generation due at the command's time,
 * dropping the generations that fell out of the window; nothing for other filters. A time
 * before the newest generation is an error (nothing is written). Returns an exit status.
 * (Reads answer as at that generation instead: cf_contains_at.) */
int cli_window_due(const char *path, cf_filter *f, const cli_clock *c);

typedef struct shape_opts {
    cf_config cfg;   /* what the command line set (--fpr is target_fpr); zero fields take the
                        library's defaults */
    cli_clock clock; /* a windowed filter's first generation is the one due then */
    bool generations_given;
    bool force;
    bool quiet;
} shape_opts;

enum shape_result { SHAPE_TAKEN, SHAPE_NOT_MINE, SHAPE_BAD };

/* Takes option `id` into *o if it is one of SHAPE_OPTIONS but --help (reporting a bad
 * value as a usage error). */
enum shape_result cli_shape_option(const char *sub, int id, const char *value, shape_opts *o);

/* Checks that the options make a shape (the library turns --fpr, cf_config.target_fpr,
 * into a fingerprint width): a usage error if --fingerprint-bits was given with --fpr, or
 * if no width reaches --fpr. */
int cli_check_shape(const char *sub, const shape_opts *o);

/* Refuses an existing `path` (a symbolic link too, even a dangling one) unless force. */
int cli_check_new_file(const char *path, bool force);

/* cf_new, telling a shape that cannot hold the capacity (a usage error) from a lack of
 * memory. */
int cli_new_filter(const char *sub, const char *path, const cf_config *cfg, cf_filter **out);

/* cf_save, atomic, with the error reported. */
int cli_save_filter(const cf_filter *f, const char *path);

/* "FILE: WHAT: capacity ..., 12-bit fingerprints, ..." on stderr. */
void cli_describe(const char *path, const char *what, const cf_filter *f);

/* ------------------------------------------------------------------------------------ */
/* Subcommands                                                                          */
/* ------------------------------------------------------------------------------------ */
/* Each takes the arguments after its own name and returns an exit status. */

int cmd_create(int argc, char **argv); /* create.c */
int cmd_build(int argc, char **argv);  /* build.c */
int cmd_add(int argc, char **argv);    /* keys.c */
int cmd_delete(int argc, char **argv); /* keys.c */
int cmd_query(int argc, char **argv);  /* keys.c */
int cmd_count(int argc, char **argv);  /* keys.c */
int cmd_info(int argc, char **argv);   /* inspect.c */
int cmd_verify(int argc, char **argv); /* inspect.c */
int cmd_merge(int argc, char **argv);  /* merge.c */

#endif /* CUCKOO_CLI_H */
