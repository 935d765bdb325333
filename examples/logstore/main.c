/*
 * main.c - cuckoo-kv, the command-line tool over a store (see README.md for the
 * commands, the escaping and the exit statuses).
 */
#define _GNU_SOURCE /* getline */

#include "kvstore.h"

#include <cuckoofilter.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Exit statuses (README.md). */
#define EXIT_DONE    0
#define EXIT_USAGE   1 /* bad command line: nothing read or written */
#define EXIT_ERROR   2 /* no store, damaged log, store in use, file or memory trouble */
#define EXIT_PARTIAL 3 /* no such key; some records missing; some batch command failed */

static const char usage_text[] =
    "usage: cuckoo-kv [--sync] DIR COMMAND [ARGS]\n"
    "\n"
    "A key/value store in directory DIR: an append-only log on disk, indexed in memory by\n"
    "a cuckoo hash table of (tag, offset) slots.\n"
    "\n"
    "commands:\n"
    "  put KEY VALUE          set KEY (VALUE '-': read it from standard input)\n"
    "  get KEY                write the value of KEY to standard output, as it is\n"
    "  del KEY                delete KEY\n"
    "  list                   every key, one per line, escaped, in log order\n"
    "  stats                  records, live keys, dead bytes, index load, bytes per key\n"
    "  import FILE [--name N] store FILE ('-': standard input) as records, one per line,\n"
    "                         keyed by content hash, in manifest N (default: default)\n"
    "  export FILE [--name N] write the records of manifest N back to FILE, in order\n"
    "  compact                rewrite the log without dead records, atomically\n"
    "  batch                  run put/get/del/has commands read from standard input\n"
    "  recover                move a torn tail (what a crash mid-write leaves after the\n"
    "                         last record) out of the log, into cuckoo-kv.log.torn-OFFSET\n"
    "\n"
    "options:\n"
    "  --sync                 sync the log after every record (survives power loss)\n"
    "  --help, --version\n"
    "\n"
    "put, import and batch create the store. Reading commands never change the log: a\n"
    "torn tail stays in it, left out of the store, until a write or 'recover' moves its\n"
    "bytes to a file of their own and cuts the log. Exit status: 0 done, 1 bad command\n"
    "line, 2 error, 3 no such key / records missing from an export / a batch command\n"
    "failed.\n";

/* One line on stderr: "cuckoo-kv: MESSAGE" and `tail`. */
static void message(const char *tail, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void message(const char *tail, const char *fmt, va_list ap)
{
    fputs("cuckoo-kv: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(tail, stderr);
}

static void error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    message("\n", fmt, ap);
    va_end(ap);
}

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    message(" (see 'cuckoo-kv --help')\n", fmt, ap);
    va_end(ap);
    return EXIT_USAGE;
}

/* The exit status of a failed store call, after its message. */
static int store_failed(kv_store *s, kv_status st)
{
    const char *msg = kv_error(s);
    error("%s", msg[0] ? msg : kv_strerror(st));
    return EXIT_ERROR;
}

static int no_such_key(const char *key)
{
    error("%s: no such key", key);
    return EXIT_PARTIAL;
}

/* Flushes stdout: a full disk or a closed pipe is an error too. */
static int finish_stdout(int status)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        error("cannot write to standard output: %s", strerror(errno));
        return EXIT_ERROR;
    }
    return status;
}

/* ------------------------------------------------------------------------------------ */
/* Escaping (README.md): bytes '!'..'~' but '\' as they are, '\\', every other as \xNN */
/* ------------------------------------------------------------------------------------ */

static void put_escaped(FILE *out, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\\') {
            fputs("\\\\", out);
        } else if (p[i] > ' ' && p[i] < 0x7f) {
            fputc(p[i], out);
        } else {
            char e[4] = {'\\', 'x', hex[p[i] >> 4], hex[p[i] & 15u]};
            fwrite(e, 1, sizeof e, out);
        }
    }
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes p[0..n) in place; its new length, or -1 for a bad escape or a byte that should
 * have been escaped. */
static long unescape(char *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\\') {
            if ((unsigned char)p[i] <= ' ' || (unsigned char)p[i] >= 0x7f)
                return -1; /* must be escaped */
            p[o++] = p[i];
        } else if (i + 1 < n && p[i + 1] == '\\') {
            p[o++] = '\\';
            i++;
        } else if (i + 3 < n && p[i + 1] == 'x' && hex_digit(p[i + 2]) >= 0 &&
                   hex_digit(p[i + 3]) >= 0) {
            p[o++] = (char)(hex_digit(p[i + 2]) << 4 | hex_digit(p[i + 3]));
            i += 3;
        } else {
            return -1;
        }
    }
    return (long)o;
}

/* ------------------------------------------------------------------------------------ */
/* Commands                                                                             */
/* ------------------------------------------------------------------------------------ */

/* A command's words after its name: positional arguments and the --name value. */
typedef struct args {
    const char *dir; /* the store's, for messages */
    const char *pos[2];
    const char *name;
} args;

/* All of standard input, for `put KEY -`. */
static int read_stdin(char **out, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            /* Room for one byte more than a value may hold: reading it means too long. */
            if (cap > KV_MAX_VALUE) {
                free(buf);
                error("standard input: longer than a value can be (%zu bytes)", KV_MAX_VALUE);
                return EXIT_ERROR;
            }
            size_t grown = cap * 2 > KV_MAX_VALUE ? KV_MAX_VALUE + 1 : cap * 2;
            char *b = realloc(buf, grown);
            if (!b)
                break;
            buf = b;
            cap = grown;
        }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) {
            if (ferror(stdin)) {
                free(buf);
                error("cannot read standard input: %s", strerror(errno));
                return EXIT_ERROR;
            }
            *out = buf;
            *len = n;
            return EXIT_DONE;
        }
    }
    free(buf);
    error("out of memory reading standard input");
    return EXIT_ERROR;
}

static int cmd_put(kv_store *s, const args *a)
{
    const char *key = a->pos[0], *value = a->pos[1];
    char *buf = NULL;
    size_t vlen = strlen(value);
    if (strcmp(value, "-") == 0) {
        int rc = read_stdin(&buf, &vlen);
        if (rc != EXIT_DONE)
            return rc;
        value = buf;
    }
    kv_status st = kv_put(s, key, strlen(key), value, vlen);
    free(buf);
    return st == KV_OK ? EXIT_DONE : store_failed(s, st);
}

static int cmd_get(kv_store *s, const args *a)
{
    const char *key = a->pos[0];
    void *v;
    size_t n;
    kv_status st = kv_get(s, key, strlen(key), &v, &n);
    if (st == KV_NOT_FOUND)
        return no_such_key(key);
    if (st != KV_OK)
        return store_failed(s, st);
    fwrite(v, 1, n, stdout);
    free(v);
    return finish_stdout(EXIT_DONE);
}

static int cmd_del(kv_store *s, const args *a)
{
    const char *key = a->pos[0];
    kv_status st = kv_del(s, key, strlen(key));
    if (st == KV_NOT_FOUND)
        return no_such_key(key);
    return st == KV_OK ? EXIT_DONE : store_failed(s, st);
}

static int print_key(void *ctx, const void *key, size_t klen, const void *value, size_t vlen)
{
    (void)ctx;
    (void)value;
    (void)vlen;
    put_escaped(stdout, key, klen);
    return putchar('\n') == EOF;
}

static int cmd_list(kv_store *s, const args *a)
{
    (void)a;
    kv_status st = kv_foreach(s, print_key, NULL);
    return st == KV_OK ? finish_stdout(EXIT_DONE) : store_failed(s, st);
}

static int cmd_stats(kv_store *s, const args *a)
{
    (void)a;
    kv_stats t;
    kv_get_stats(s, &t);
    printf("records: %llu\n", (unsigned long long)t.records);
    printf("live_keys: %llu\n", (unsigned long long)t.live_keys);
    printf("log_bytes: %llu\n", (unsigned long long)t.log_bytes);
    printf("live_bytes: %llu\n", (unsigned long long)t.live_bytes);
    printf("dead_bytes: %llu\n", (unsigned long long)t.dead_bytes);
    printf("index_slots: %llu\n", (unsigned long long)t.index_slots);
    printf("index_bytes: %llu\n", (unsigned long long)t.index_bytes);
    printf("index_load: %.4f\n", t.index_load);
    printf("bytes_per_key: %.2f\n", t.bytes_per_key);
    printf("rehashes: %llu\n", (unsigned long long)t.rehashes);
    printf("truncated: %llu\n", (unsigned long long)t.truncated);
    printf("torn_offset: %llu\n", (unsigned long long)t.torn_offset);
    printf("torn_records: %llu\n", (unsigned long long)t.torn_records);
    return finish_stdout(EXIT_DONE);
}

static int cmd_import(kv_store *s, const args *a)
{
    const char *file = a->pos[0], *name = a->name;
    kv_import_result r;
    kv_status st = kv_import(s, file, name, &r);
    if (st != KV_OK) {
        if (!r.why)
            return store_failed(s, st);
        if (st == KV_EIO)
            error("%s: %s: %s", file, r.why, strerror(errno));
        else
            error("%s: %s", file, r.why);
        return st == KV_EINVAL && r.records == 0 ? EXIT_USAGE : EXIT_ERROR;
    }
    printf("imported %llu records (%llu new, %llu bytes) from %s as '%s'\n",
           (unsigned long long)r.records, (unsigned long long)r.stored, (unsigned long long)r.bytes,
           file, name ? name : KV_DEFAULT_NAME);
    return finish_stdout(EXIT_DONE);
}

static int cmd_export(kv_store *s, const args *a)
{
    const char *file = a->pos[0], *name = a->name;
    kv_export_result r;
    const char *shown = name ? name : KV_DEFAULT_NAME;
    kv_status st = kv_export(s, file, name, &r);
    if (st == KV_NOT_FOUND && !r.why) {
        error("%s: no import named '%s' in this store", a->dir, shown);
        return EXIT_ERROR;
    }
    if (st != KV_OK) {
        if (!r.why)
            return store_failed(s, st);
        if (st == KV_EIO)
            error("%s: %s: %s", file, r.why, strerror(errno));
        else
            error("%s: %s", file, r.why);
        return st == KV_EINVAL ? EXIT_USAGE : EXIT_ERROR;
    }
    FILE *out = strcmp(file, "-") == 0 ? stderr : stdout;
    fprintf(out, "exported %llu records (%llu bytes) of '%s' to %s", (unsigned long long)r.written,
            (unsigned long long)r.bytes, shown, file);
    if (r.missing)
        fprintf(out, "; %llu records were deleted since the import and are left out",
                (unsigned long long)r.missing);
    fputc('\n', out);
    return finish_stdout(r.missing ? EXIT_PARTIAL : EXIT_DONE);
}

static int cmd_recover(kv_store *s, const args *a)
{
    (void)a;
    kv_status st = kv_recover(s);
    if (st != KV_OK)
        return store_failed(s, st);
    kv_stats t;
    kv_get_stats(s, &t);
    if (!t.truncated)
        printf("nothing to recover: the log ends with a whole record\n");
    return finish_stdout(EXIT_DONE); /* the torn tail, if any, is reported by main */
}

/* One line on stderr about a torn tail kv_open found: moved out of the log (by a write
 * or recover) with where its bytes are, or still in the log after a reading command. */
static void report_torn(const char *dir, const kv_store *s)
{
    kv_stats t;
    kv_get_stats(s, &t);
    if (!t.truncated)
        return;
    if (t.torn_kept)
        fprintf(stderr,
                "cuckoo-kv: %s/%s: cut a torn tail of %llu bytes (%llu records begin in it) at "
                "offset %llu; its bytes are kept in %s/%s\n",
                dir, KV_LOG_NAME, (unsigned long long)t.truncated,
                (unsigned long long)t.torn_records, (unsigned long long)t.torn_offset, dir,
                t.torn_name);
    else
        fprintf(stderr,
                "cuckoo-kv: %s/%s: a torn tail of %llu bytes (%llu records begin in it) at offset "
                "%llu is left out, and left in the log until a write or 'recover'\n",
                dir, KV_LOG_NAME, (unsigned long long)t.truncated,
                (unsigned long long)t.torn_records, (unsigned long long)t.torn_offset);
}

static int cmd_compact(kv_store *s, const args *a)
{
    (void)a;
    kv_stats before, after;
    kv_get_stats(s, &before);
    kv_status st = kv_compact(s);
    if (st != KV_OK)
        return store_failed(s, st);
    kv_get_stats(s, &after);
    printf("compacted: %llu -> %llu bytes (%llu records -> %llu)\n",
           (unsigned long long)before.log_bytes, (unsigned long long)after.log_bytes,
           (unsigned long long)before.records, (unsigned long long)after.records);
    return finish_stdout(EXIT_DONE);
}

/* One line of a batch. Returns EXIT_DONE, EXIT_PARTIAL (it printed NOT_FOUND or ERR) or
 * EXIT_ERROR (stop: the store cannot go on). */
static int batch_line(kv_store *s, char *line, size_t n)
{
    char *sp = memchr(line, ' ', n);
    if (!sp) {
        puts("ERR expected 'put KEY VALUE', 'get KEY', 'del KEY' or 'has KEY'");
        return EXIT_PARTIAL;
    }
    size_t cmd_len = (size_t)(sp - line);
    char *key = sp + 1, *value = NULL;
    size_t key_len = n - cmd_len - 1, value_len = 0;
    bool is_put = cmd_len == 3 && memcmp(line, "put", 3) == 0;
    char *sp2 = memchr(key, ' ', key_len);
    if (is_put) {
        if (!sp2) {
            puts("ERR put needs a KEY and a VALUE");
            return EXIT_PARTIAL;
        }
        value = sp2 + 1;
        value_len = key_len - (size_t)(sp2 - key) - 1;
        key_len = (size_t)(sp2 - key);
    } else if (sp2) {
        puts("ERR a KEY cannot hold a space: escape it as \\x20");
        return EXIT_PARTIAL;
    }
    long k = unescape(key, key_len), v = value ? unescape(value, value_len) : 0;
    if (k < 0 || v < 0) {
        puts("ERR bad escape: write '\\' as \\\\, and space, control and non-ASCII bytes as \\xNN");
        return EXIT_PARTIAL;
    }
    kv_status st;
    void *got = NULL;
    size_t got_len = 0;
    if (is_put)
        st = kv_put(s, key, (size_t)k, value, (size_t)v);
    else if (cmd_len == 3 && memcmp(line, "get", 3) == 0)
        st = kv_get(s, key, (size_t)k, &got, &got_len);
    else if (cmd_len == 3 && memcmp(line, "del", 3) == 0)
        st = kv_del(s, key, (size_t)k);
    else if (cmd_len == 3 && memcmp(line, "has", 3) == 0)
        st = kv_has(s, key, (size_t)k);
    else {
        puts("ERR unknown command: expected put, get, del or has");
        return EXIT_PARTIAL;
    }
    if (st == KV_OK && got) {
        fputs("VALUE ", stdout);
        put_escaped(stdout, got, got_len);
        putchar('\n');
        free(got);
        return EXIT_DONE;
    }
    if (st == KV_OK) {
        puts("OK");
        return EXIT_DONE;
    }
    if (st == KV_NOT_FOUND) {
        puts("NOT_FOUND");
        return EXIT_PARTIAL;
    }
    printf("ERR %s\n", kv_error(s)[0] ? kv_error(s) : kv_strerror(st));
    return st == KV_EINVAL ? EXIT_PARTIAL : EXIT_ERROR;
}

static int cmd_batch(kv_store *s, const args *a)
{
    (void)a;
    /* A program on the other end of a pipe may wait for each answer before it sends the
     * next line; from a file, full buffering is faster. */
    struct stat sb;
    if (fstat(STDIN_FILENO, &sb) != 0 || !S_ISREG(sb.st_mode))
        setvbuf(stdout, NULL, _IOLBF, 0);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int status = EXIT_DONE;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        size_t len = (size_t)n;
        if (line[len - 1] == '\n')
            len--;
        int rc = batch_line(s, line, len);
        if (rc == EXIT_ERROR) {
            status = rc;
            break;
        }
        if (rc == EXIT_PARTIAL)
            status = rc;
    }
    if (status != EXIT_ERROR && ferror(stdin)) {
        error("cannot read standard input: %s", strerror(errno));
        status = EXIT_ERROR;
    }
    free(line);
    if (status == EXIT_ERROR) {
        fflush(stdout);
        const char *msg = kv_error(s);
        error("batch stopped: %s", msg[0] ? msg : "error");
        return EXIT_ERROR;
    }
    return finish_stdout(status);
}

/* ------------------------------------------------------------------------------------ */
/* The command line                                                                     */
/* ------------------------------------------------------------------------------------ */

typedef struct command {
    const char *name;
    int (*run)(kv_store *s, const args *a);
    int args;    /* positional arguments */
    bool keyed;  /* the first argument is a key */
    bool create; /* makes the store if there is none */
    bool named;  /* takes --name */
} command;

static const command commands[] = {
    {"put", cmd_put, 2, true, true, false},        {"get", cmd_get, 1, true, false, false},
    {"del", cmd_del, 1, true, false, false},       {"list", cmd_list, 0, false, false, false},
    {"stats", cmd_stats, 0, false, false, false},  {"import", cmd_import, 1, false, true, true},
    {"export", cmd_export, 1, false, false, true}, {"compact", cmd_compact, 0, false, false, false},
    {"batch", cmd_batch, 0, false, true, false},   {"recover", cmd_recover, 0, false, false, false},
};

int main(int argc, char **argv)
{
    bool sync_each = false;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            fputs(usage_text, stdout);
            return finish_stdout(EXIT_DONE);
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("cuckoo-kv (cuckoofilter %s)\n", cf_version());
            return finish_stdout(EXIT_DONE);
        }
        if (strcmp(argv[i], "--sync") == 0)
            sync_each = true;
        else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else
            return usage("unknown option '%s'", argv[i]);
    }
    if (argc - i < 2)
        return usage(argc - i < 1 ? "no store directory given" : "no command given");
    const char *dir = argv[i], *name_arg = argv[i + 1];
    const command *cmd = NULL;
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++)
        if (strcmp(name_arg, commands[c].name) == 0)
            cmd = &commands[c];
    if (!cmd)
        return usage("unknown command '%s'", name_arg);

    args in = {dir, {NULL, NULL}, NULL};
    int npos = 0;
    for (int a = i + 2; a < argc; a++) {
        if (cmd->named && strcmp(argv[a], "--name") == 0) {
            if (a + 1 == argc)
                return usage("%s: --name needs a value", cmd->name);
            in.name = argv[++a];
        } else if (cmd->named && strncmp(argv[a], "--name=", 7) == 0) {
            in.name = argv[a] + 7;
        } else if (npos < cmd->args) {
            in.pos[npos++] = argv[a];
        } else {
            return usage("%s: unexpected argument '%s'", cmd->name, argv[a]);
        }
    }
    if (npos < cmd->args)
        return usage("%s: expected %d argument%s", cmd->name, cmd->args, cmd->args == 1 ? "" : "s");
    if (in.name && (!*in.name || strlen(in.name) > 4096))
        return usage("%s: the name must be 1 to 4096 bytes", cmd->name);
    if (cmd->keyed && (!*in.pos[0] || strlen(in.pos[0]) > KV_MAX_KEY))
        return usage("%s: the key must be 1 to %u bytes", cmd->name, KV_MAX_KEY);

    kv_options o = {.create = cmd->create, .sync_each = sync_each};
    kv_store *s;
    char why[KV_ERROR_MAX];
    kv_status st = kv_open(dir, &o, &s, why);
    if (st != KV_OK) {
        error("%s", why[0] ? why : kv_strerror(st));
        return EXIT_ERROR;
    }
    int rc = cmd->run(s, &in);
    if (cmd->run != cmd_stats) /* stats says it in its own lines */
        report_torn(dir, s);
    /* Synced before closing, so that a failure can still be told with its message. */
    if (kv_sync(s) != KV_OK && rc != EXIT_ERROR) {
        error("%s", kv_error(s));
        rc = EXIT_ERROR;
    }
    kv_close(s);
    return rc;
}
