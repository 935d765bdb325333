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

/* Longest message: room for a long path (PATH_MAX is 4096 on Linux) and what follows it;
 * anything longer is cut. */
#define MESSAGE_MAX 8192

/* Appends to line[0 .. MESSAGE_MAX), of which *n bytes are used, cutting what does not
 * fit. */
static void vappend(char *line, size_t *n, const char *fmt, va_list ap) CLI_PRINTF(3, 0);
static void vappend(char *line, size_t *n, const char *fmt, va_list ap)
{
    int len = vsnprintf(line + *n, MESSAGE_MAX - *n, fmt, ap);
    if (len > 0)
        *n = *n + (size_t)len < MESSAGE_MAX ? *n + (size_t)len : MESSAGE_MAX - 1;
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
    char line[MESSAGE_MAX];
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

int cli_fail_reason(const char *path, const char *what, cf_status st, int err, const char *reason)
{
    const char *sep = what ? ": " : "";
    what = what ? what : "";
    if (!reason)
        reason = cf_strerror(st);
    if (st == CF_EIO)
        cli_error("%s: %s%s%s", path, what, sep, strerror(err));
    else if (st == CF_ECORRUPT)
        cli_error("%s: %s%scorrupt filter file: %s", path, what, sep, reason);
    else if (st == CF_EVERSION)
        cli_error("%s: %s%sunsupported filter file: %s (this cuckoo reads format %u and older: "
                  "upgrade it)",
                  path, what, sep, reason, CF_FORMAT_VERSION);
    else
        cli_error("%s: %s%s%s", path, what, sep, cf_strerror(st));
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

static const cli_opt *find_long(const cli_parser *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->nopts; i++)
        if (strlen(p->opts[i].name) == len && memcmp(p->opts[i].name, name, len) == 0)
            return &p->opts[i];
    return NULL;
}

static const cli_opt *find_short(const cli_parser *p, char c)
{
    for (size_t i = 0; i < p->nopts; i++)
        if (p->opts[i].short_name == c)
            return &p->opts[i];
    return NULL;
}

int cli_next_option(cli_parser *p, const char **value)
{
    *value = NULL;
    while (p->next < p->argc) {
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

        const cli_opt *o;
        const char *inline_value = NULL;
        if (arg[1] == '-') {
            const char *name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(p, name, len);
            if (!o) {
                cli_usage(p->sub, "unknown option '--%.*s'", (int)len, name);
                return stop_usage(p);
            }
            if (eq)
                inline_value = eq + 1;
        } else {
            o = arg[2] == '\0' ? find_short(p, arg[1]) : NULL;
            if (!o) {
                cli_usage(p->sub, "unknown option '%s'", arg);
                return stop_usage(p);
            }
        }

        if (o->has_value) {
            if (inline_value) {
                *value = inline_value;
            } else if (p->next < p->argc) {
                *value = p->argv[p->next++];
            } else {
                cli_usage(p->sub, "option '--%s' needs a value", o->name);
                return stop_usage(p);
            }
        } else if (inline_value) {
            cli_usage(p->sub, "option '--%s' takes no value", o->name);
            return stop_usage(p);
        }
        if (o->id == OPT_HELP) {
            fputs(p->help, stdout);
            p->status = cli_finish_stdout(CLI_EXIT_OK);
            return CLI_OPT_STOP;
        }
        return o->id;
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

bool cli_parse_uint(const char *sub, const char *opt, const char *text, uint64_t min, uint64_t max,
                    bool suffixes, uint64_t *out)
{
    uint64_t v;
    char *end;
    bool ok = parse_digits(text, 10, &v, &end);
    if (ok && suffixes && *end) {
        /* Decimal multiples: these count keys, not bytes. */
        uint64_t mult = *end == 'k'   ? UINT64_C(1000)
                        : *end == 'M' ? UINT64_C(1000000)
                        : *end == 'G' ? UINT64_C(1000000000)
                                      : 0;
        ok = mult != 0 && v <= UINT64_MAX / mult;
        v = ok ? v * mult : 0;
        end++;
    }
    if (!ok || *end != '\0') {
        cli_usage(sub, "--%s: '%s' is not a whole number%s", opt, text,
                  suffixes ? " (digits, then optionally k, M or G)" : "");
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
