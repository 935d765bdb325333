/*
 * common.c - error messages, option parsing and number parsing for the cuckoo tool.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------ */
/* Messages                                                                             */
/* ------------------------------------------------------------------------------------ */

/* Appends to line[0 .. CLI_MESSAGE_MAX), of which *n bytes are used, cutting what does not
 * fit. */
static void vappend(char *line, size_t *n, const char *fmt, va_list ap) CLI_PRINTF(3, 0);
static void vappend(char *line, size_t *n, const char *fmt, va_list ap)
{
    int len = vsnprintf(line + *n, CLI_MESSAGE_MAX - *n, fmt, ap);
    if (len > 0)
        *n = *n + (size_t)len < CLI_MESSAGE_MAX ? *n + (size_t)len : CLI_MESSAGE_MAX - 1;
}

static void append(char *line, size_t *n, const char *fmt, ...) CLI_PRINTF(3, 4);
static void append(char *line, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vappend(line, n, fmt, ap);
    va_end(ap);
}

/* Formats the whole message first and writes it with one call: stderr is unbuffered, and
 * a line written piecemeal could interleave with another process's output.
 * usage: a usage error of subcommand `sub` (NULL at the top level), with its hint on the
 * same line: every error is one line. */
static void print_message(bool usage, const char *sub, const char *fmt, va_list ap)
    CLI_PRINTF(3, 0);
static void print_message(bool usage, const char *sub, const char *fmt, va_list ap)
{
    char line[CLI_MESSAGE_MAX];
    size_t n = 0;
    append(line, &n, "cuckoo: ");
    if (sub)
        append(line, &n, "%s: ", sub);
    vappend(line, &n, fmt, ap);
    if (usage)
        append(line, &n, " (see 'cuckoo %s%s--help')", sub ? sub : "", sub ? " " : "");
    fprintf(stderr, "%.*s\n", (int)n, line);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_message(false, NULL, fmt, ap);
    va_end(ap);
}

int cli_usage(const char *sub, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_message(true, sub, fmt, ap);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_fail(const char *path, const char *what, cf_status st, int err)
{
    const char *reason = NULL;
    if (st == CF_ECORRUPT || st == CF_EVERSION) {
        /* The status alone does not say what is wrong; validating the file again does
         * (it maps the file and allocates nothing, so it is cheap even for big files). */
        (void)cf_validate_file(path, &reason);
    }
    return cli_fail_reason(path, what, st, err, reason);
}

void cli_fail_text(char line[CLI_MESSAGE_MAX], const char *path, const char *what, cf_status st,
                   int err, const char *reason)
{
    size_t n = 0;
    line[0] = '\0';
    if (path)
        append(line, &n, "%s: ", path);
    if (what)
        append(line, &n, "%s: ", what);
    if (st == CF_EIO)
        append(line, &n, "%s", strerror(err));
    else if (st == CF_ECORRUPT)
        append(line, &n, "corrupt filter file: %s", reason ? reason : cf_strerror(st));
    else if (st == CF_EVERSION)
        append(line, &n,
               "unsupported filter file: %s (this cuckoo reads format %u and older: upgrade it)",
               reason ? reason : cf_strerror(st), CF_FORMAT_VERSION);
    else
        append(line, &n, "%s", cf_strerror(st));
}

int cli_fail_reason(const char *path, const char *what, cf_status st, int err, const char *reason)
{
    char line[CLI_MESSAGE_MAX];
    cli_fail_text(line, path, what, st, err, reason);
    cli_error("%s", line);
    return CLI_EXIT_FILE;
}

int cli_finish_stdout(int status)
{
    /* A write error may have happened in any earlier fwrite; fflush reports one that is
     * still pending, ferror one that is not. */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("stdout: write error%s%s", errno ? ": " : "", errno ? strerror(errno) : "");
        return CLI_EXIT_FILE;
    }
    return status;
}

int cli_open_mapped(const char *path, bool verify, cf_filter **out)
{
    cf_status st = cf_open_mapped(path, verify ? CF_MAP_VERIFY : 0u, NULL, out);
    if (st != CF_OK)
        return cli_fail(path, NULL, st, errno);
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Adding keys                                                                          */
/* ------------------------------------------------------------------------------------ */

bool cli_count_add(add_counts *c, cf_status st)
{
    switch (st) {
    case CF_OK:
        c->added++;
        return true;
    case CF_EXISTS:
        c->present++;
        return true;
    case CF_FULL:
        /* The filter is unchanged; a later key may still find room (another key's
         * buckets, or a key that is not the hot one), so the command goes on. */
        c->full++;
        return true;
    default:
        return false;
    }
}

cf_status cli_add_hashes(cf_filter *f, const uint64_t *hashes, size_t n, unsigned flags,
                         add_counts *c, progress *pr, uint64_t *done)
{
    cf_status status[CLI_ADD_BATCH];
    for (size_t start = 0; start < n; start += CLI_ADD_BATCH) {
        size_t k = n - start < CLI_ADD_BATCH ? n - start : CLI_ADD_BATCH;
        cf_add_many(f, hashes + start, k, flags, status);
        for (size_t i = 0; i < k; i++) {
            if (!cli_count_add(c, status[i]))
                return status[i];
            ++*done;
        }
        progress_tick(pr, *done);
    }
    return CF_OK;
}

int cli_lock_file(const char *path, bool wait, int *fd)
{
    for (;;) {
        int d = open(path, O_RDONLY | O_CLOEXEC);
        if (d < 0) {
            cli_error("%s: %s", path, strerror(errno));
            return CLI_EXIT_FILE;
        }
        if (flock(d, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
            int err = errno;
            close(d);
            if (err == EINTR)
                continue;
            if (err == EWOULDBLOCK)
                cli_error("%s: another command is changing this file (--no-wait: not waiting "
                          "for it)",
                          path);
            else
                cli_error("%s: cannot lock: %s", path, strerror(err));
            return CLI_EXIT_FILE;
        }
        /* Locked: still the file at `path`? A command that held the lock before may have
         * saved, which renames a new file over the path: then lock that one. */
        struct stat locked, now;
        if (fstat(d, &locked) == 0 && stat(path, &now) == 0 && locked.st_dev == now.st_dev &&
            locked.st_ino == now.st_ino) {
            *fd = d;
            return CLI_EXIT_OK;
        }
        close(d);
    }
}

int cli_report_adds(const char *path, const add_counts *c, bool show_present, bool quiet)
{
    if (!quiet) {
        fprintf(stderr, "%s: added %" PRIu64, path, c->added);
        if (show_present)
            fprintf(stderr, ", already present %" PRIu64, c->present);
        if (c->full > 0)
            fprintf(stderr, ", not added (filter full) %" PRIu64, c->full);
        fputc('\n', stderr);
    }
    if (c->full == 0)
        return CLI_EXIT_OK;
    cli_error("%s: %" PRIu64 " key%s not added: filter full (the %" PRIu64 " added were saved)",
              path, c->full, c->full == 1 ? "" : "s", c->added);
    return CLI_EXIT_FULL;
}

/* ------------------------------------------------------------------------------------ */
/* Options                                                                              */
/* ------------------------------------------------------------------------------------ */

void cli_parser_init(cli_parser *p, const char *sub, const char *help, const cli_opt *opts,
                     size_t nopts, int argc, char **argv)
{
    *p = (cli_parser){
        .sub = sub, .help = help, .opts = opts, .nopts = nopts, .argv = argv, .argc = argc};
}

static int stop_usage(cli_parser *p)
{
    p->status = CLI_EXIT_USAGE;
    return CLI_OPT_STOP;
}

/* The option `name` (len bytes) names: its own, or the only one it is a prefix of. Reports
 * an unknown or ambiguous name. */
static const cli_opt *find_long(cli_parser *p, const char *name, size_t len)
{
    const cli_opt *found = NULL;
    size_t matches = 0;
    for (size_t i = 0; i < p->nopts; i++) {
        if (len == 0 || strncmp(p->opts[i].name, name, len) != 0)
            continue;
        if (p->opts[i].name[len] == '\0')
            return &p->opts[i];
        found = &p->opts[i];
        matches++;
    }
    if (matches == 1)
        return found;
    if (matches == 0) {
        cli_usage(p->sub, "unknown option '--%.*s'", (int)len, name);
        return NULL;
    }
    char list[CLI_MESSAGE_MAX];
    size_t n = 0;
    list[0] = '\0';
    for (size_t i = 0; i < p->nopts; i++)
        if (strncmp(p->opts[i].name, name, len) == 0)
            append(list, &n, "%s--%s", n ? ", " : "", p->opts[i].name);
    cli_usage(p->sub, "option '--%.*s' is ambiguous (%s)", (int)len, name, list);
    return NULL;
}

static const cli_opt *find_short(const cli_parser *p, char c)
{
    for (size_t i = 0; i < p->nopts; i++)
        if (p->opts[i].short_name == c)
            return &p->opts[i];
    return NULL;
}

/* The next short option of the current bundle ("-0q"), with its value if it takes one. */
static const cli_opt *next_short(cli_parser *p, const char **value)
{
    char c = *p->bundle++;
    const cli_opt *o = find_short(p, c);
    if (!o) {
        p->bundle = NULL;
        cli_usage(p->sub, "unknown option '-%c'", c);
        return NULL;
    }
    if (o->has_value) {
        if (*p->bundle) {
            *value = p->bundle;
        } else if (p->next < p->argc) {
            *value = p->argv[p->next++];
        } else {
            cli_usage(p->sub, "option '-%c' needs a value", c);
            o = NULL;
        }
        p->bundle = NULL;
    } else if (*p->bundle == '\0') {
        p->bundle = NULL;
    }
    return o;
}

/* The lines of SHAPE_OPTIONS in a help text, with the header's limits and defaults. */
static void print_shape_help(void)
{
    printf("  --fpr P                 false-positive rate wanted at full load, such as 0.001 or\n"
           "                          1e-4: picks the narrowest fingerprint that meets it\n"
           "  --fingerprint-bits F    fingerprint width, %u to %u (default %u: about %.3g%%)\n"
           "  --bucket-size B         slots per bucket, 1 to %u (default %u)\n"
           "  --max-kicks K           eviction budget per insert, 1 to %u (default %u, %u if\n"
           "                          segmented)\n"
           "  --expansion X           0 (default): fixed size, adds fail when full; X from 1 to\n"
           "                          %u: when full, append a sub-filter X times larger\n"
           "  --max-sub-filters M     growing filters stop at M sub-filters, 1 to %u (default %u)\n"
           "  --fpr-bound P           growing filters: the most their false-positive rate may\n"
           "                          reach, however far they grow (default: twice the first\n"
           "                          sub-filter's rate at full load); each new sub-filter gets\n"
           "                          fingerprints just wide enough for it\n"
           "  --same-width            growing filters: every sub-filter keeps the first's\n"
           "                          fingerprint width (as RedisBloom): less memory, but each\n"
           "                          adds its own false-positive rate\n"
           "  --semi-sort             semi-sorted buckets (4 slots): each slot takes one bit\n"
           "                          less at the same false-positive rate; lookups slower\n"
           "  --mapping M             auto (default): segmented from %llu buckets on (about\n"
           "                          16M keys of 4-slot buckets); segmented: segments of\n"
           "                          %llu buckets at any size, which builds fill in\n"
           "                          parallel (the table rounded up to whole segments);\n"
           "                          any-size: format version 2's mapping, at any size\n"
           "  --redisbloom            RedisBloom's layout (its hash, 8-bit fingerprints,\n"
           "                          power-of-two sub-filters; bucket size 2 and 20 kicks\n"
           "                          by default):\n"
           "                          the answers RedisBloom's CF.* commands would give\n"
           "  --seed S                hash seed, decimal or 0x-hexadecimal (default: random)\n"
           "  --window W              forget keys: a key is found for at least W after its\n"
           "                          last add (90s, 15m, 24h, 7d; a bare number is seconds)\n"
           "                          and gone within W * G / (G - 1); --capacity is then the\n"
           "                          keys of one generation, W / (G - 1) long\n"
           "  --generations G         windowed filters: generations, 2 to %u (default %u)\n"
           "  --at T, --now           windowed filters: the time (Unix seconds) the first\n"
           "                          generation starts at (default: now)\n",
           CF_MIN_FINGERPRINT_BITS, CF_MAX_FINGERPRINT_BITS, CF_DEFAULT_FINGERPRINT_BITS,
           100.0 * cf_expected_fpr(CF_DEFAULT_FINGERPRINT_BITS, CF_DEFAULT_BUCKET_SIZE, 1.0),
           CF_MAX_BUCKET_SIZE, CF_DEFAULT_BUCKET_SIZE, CF_MAX_MAX_KICKS, CF_DEFAULT_MAX_KICKS,
           CF_DEFAULT_MAX_KICKS_SEGMENTED, CF_MAX_EXPANSION, CF_MAX_SUB_FILTERS,
           CF_DEFAULT_MAX_SUB_FILTERS, (unsigned long long)CF_SEGMENTED_MIN_BUCKETS,
           1ull << CF_SEGMENT_BITS, CF_MAX_GENERATIONS, CLI_DEFAULT_GENERATIONS);
}

/* What cli_next_option returns for option o: its id, or CLI_OPT_STOP once --help is
 * answered. */
static int option_found(cli_parser *p, const cli_opt *o)
{
    if (o->id != OPT_HELP)
        return o->id;
    const char *shape = strstr(p->help, SHAPE_HELP);
    if (shape) {
        fwrite(p->help, 1, (size_t)(shape - p->help), stdout);
        print_shape_help();
        fputs(shape + strlen(SHAPE_HELP), stdout);
    } else {
        fputs(p->help, stdout);
    }
    p->status = cli_finish_stdout(CLI_EXIT_OK);
    return CLI_OPT_STOP;
}

int cli_next_option(cli_parser *p, const char **value)
{
    *value = NULL;
    while (p->bundle || p->next < p->argc) {
        if (p->bundle) {
            const cli_opt *o = next_short(p, value);
            return o ? option_found(p, o) : stop_usage(p);
        }
        char *arg = p->argv[p->next++];
        if (p->no_options || arg[0] != '-' || arg[1] == '\0') {
            /* Never overwrites an argument not yet looked at: operands <= next - 1. */
            p->argv[p->operands++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            p->no_options = true;
            continue;
        }

        if (arg[1] != '-') {
            p->bundle = arg + 1;
            continue;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const cli_opt *o = find_long(p, name, len);
        if (!o)
            return stop_usage(p);
        if (o->has_value) {
            if (eq) {
                *value = eq + 1;
            } else if (p->next < p->argc) {
                *value = p->argv[p->next++];
            } else {
                cli_usage(p->sub, "option '--%s' needs a value", o->name);
                return stop_usage(p);
            }
        } else if (eq) {
            cli_usage(p->sub, "option '--%s' takes no value", o->name);
            return stop_usage(p);
        }
        return option_found(p, o);
    }
    return CLI_OPT_DONE;
}

/* ------------------------------------------------------------------------------------ */
/* Numbers                                                                              */
/* ------------------------------------------------------------------------------------ */

/* Parses digits in `base` (10 or 16) at text into *out, leaving *end after them; false
 * if there is no digit, or on overflow. Unlike strtoull alone, refuses leading spaces and
 * signs (strtoull would read "-1" as 2^64 - 1). */
static bool parse_digits(const char *text, int base, uint64_t *out, char **end)
{
    unsigned char c = (unsigned char)text[0];
    if (!(base == 16 ? (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
                     : (c >= '0' && c <= '9')))
        return false;
    errno = 0;
    unsigned long long v = strtoull(text, end, base);
    if (errno == ERANGE)
        return false;
#if ULLONG_MAX > UINT64_MAX
    if (v > UINT64_MAX)
        return false;
#endif
    *out = (uint64_t)v;
    return true;
}

/* v * 10 + digit into *v; false on overflow. */
static bool push_digit(uint64_t *v, unsigned digit)
{
    if (*v > (UINT64_MAX - digit) / 10)
        return false;
    *v = *v * 10 + digit;
    return true;
}

/* A count written as people write counts: "2500000", "2.5M", "1e6", "1.5e3k". Digits, an
 * optional fraction, an optional exponent (e or E and digits) and an optional k, M or G
 * (times 10^3, 10^6, 10^9: these count keys, not bytes), whose value must be a whole
 * number. False if the text is not such a count or its value overflows. */
static bool parse_count(const char *text, uint64_t *out)
{
    const char *p = text, *frac = NULL;
    size_t nint = 0, nfrac = 0;
    while (*p >= '0' && *p <= '9')
        p++, nint++;
    if (*p == '.') {
        frac = ++p;
        while (*p >= '0' && *p <= '9')
            p++, nfrac++;
    }
    if (nint + nfrac == 0)
        return false;
    uint64_t exp = 0;
    if (*p == 'e' || *p == 'E') {
        if (!(*++p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            if (!push_digit(&exp, (unsigned)(*p++ - '0')) || exp > 1000)
                return false;
    }
    static const char suffixes[] = "kMG"; /* 10^3, 10^6, 10^9 */
    const char *suffix = *p ? strchr(suffixes, *p) : NULL;
    if (suffix) {
        exp += 3u * (uint64_t)(suffix - suffixes + 1);
        p++;
    }
    if (*p != '\0')
        return false;
    /* The digits, the fraction's shifted left by the exponent: those that would fall
     * right of the point must be 0. */
    uint64_t v = 0;
    for (size_t i = 0; i < nint; i++)
        if (!push_digit(&v, (unsigned)(text[i] - '0')))
            return false;
    for (size_t i = 0; i < nfrac; i++) {
        unsigned d = (unsigned)(frac[i] - '0');
        if (i < exp) {
            if (!push_digit(&v, d))
                return false;
        } else if (d != 0) {
            return false;
        }
    }
    for (uint64_t i = nfrac; i < exp; i++)
        if (v != 0 && !push_digit(&v, 0))
            return false;
    *out = v;
    return true;
}

bool cli_parse_uint(const char *sub, const char *opt, const char *text, uint64_t min, uint64_t max,
                    bool counts, uint64_t *out)
{
    uint64_t v = 0;
    char *end = NULL;
    bool ok = counts ? parse_count(text, &v) : parse_digits(text, 10, &v, &end) && *end == '\0';
    if (!ok) {
        cli_usage(sub, "--%s: '%s' is not a whole number%s", opt, text,
                  counts ? " (such as 2500000, 2.5M or 1e6)" : "");
        return false;
    }
    if (v < min || v > max) {
        cli_usage(sub, "--%s: %s is out of range (%" PRIu64 " to %" PRIu64 ")", opt, text, min,
                  max);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_seed(const char *sub, const char *opt, const char *text, uint64_t *out)
{
    bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    uint64_t v;
    char *end;
    if (!parse_digits(hex ? text + 2 : text, hex ? 16 : 10, &v, &end) || *end != '\0') {
        cli_usage(sub, "--%s: '%s' is not a 64-bit number (decimal, or hexadecimal with 0x)", opt,
                  text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_probability(const char *sub, const char *opt, const char *text, double *out)
{
    char *end;
    unsigned char c = (unsigned char)text[0];
    double v = 0.0;
    bool ok = (c >= '0' && c <= '9') || c == '.';
    if (ok) {
        errno = 0;
        v = strtod(text, &end);
        ok = *end == '\0' && errno == 0 && isfinite(v) && v > 0.0 && v < 1.0;
    }
    if (!ok) {
        cli_usage(sub, "--%s: '%s' is not a probability between 0 and 1 (such as 0.001 or 1e-4)",
                  opt, text);
        return false;
    }
    *out = v;
    return true;
}
