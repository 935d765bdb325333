/*
 * lib_query.c - the library's own answers about a filter file, for the end-to-end tests of
 * the cuckoo tool (tests/cli/test_cli.py compares the tool's output with these).
 *
 *   cli_lib_query query FILE    keys on stdin, one per line (a trailing "\n" or "\r\n" is
 *                               not part of the key; a last line without "\n" is a key);
 *                               prints one character per key: '1' present, '0' absent
 *   cli_lib_query query0 FILE   the same with NUL-terminated keys
 *   cli_lib_query stats FILE    one JSON object: cf_get_config and cf_get_stats, with the
 *                               names `cuckoo info --json` uses
 *
 * The file is loaded with cf_load. Exit status 0, or 2 with a message on stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuckoofilter.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what)
{
    fprintf(stderr, "cli_lib_query: %s\n", what);
    return 2;
}

/* All of stdin in one buffer (the tests feed at most a few tens of MB). */
static char *read_stdin(size_t *len)
{
    size_t cap = (size_t)1 << 20, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        return NULL;
    for (;;) {
        if (n == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(stdin)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int query(const cf_filter *f, char sep)
{
    size_t len;
    char *buf = read_stdin(&len);
    if (!buf)
        return fail("cannot read stdin");
    size_t pos = 0;
    while (pos < len) {
        const char *start = buf + pos;
        const char *hit = memchr(start, sep, len - pos);
        size_t n = hit ? (size_t)(hit - start) : len - pos;
        pos += n + (hit ? 1u : 0u);
        if (sep == '\n' && hit && n > 0 && start[n - 1] == '\r')
            n--;
        putchar(cf_contains(f, start, n) ? '1' : '0');
    }
    putchar('\n');
    free(buf);
    return fflush(stdout) == 0 ? 0 : fail("cannot write stdout");
}

static int stats(const cf_filter *f)
{
    cf_config c;
    cf_stats s;
    cf_get_config(f, &c);
    cf_get_stats(f, &s);
    printf("{\"capacity\": %" PRIu64 ", \"fingerprint_bits\": %u, \"bucket_size\": %u, "
           "\"max_kicks\": %u, \"expansion\": %u, \"max_sub_filters\": %u, "
           "\"seed\": \"0x%016" PRIx64 "\", \"sub_filters\": %u, \"buckets\": %" PRIu64
           ", \"slots\": %" PRIu64 ", \"items\": %" PRIu64 ", \"stashed\": %" PRIu64
           ", \"load_factor\": %.17g, \"table_bytes\": %" PRIu64 ", \"file_bytes\": %zu, "
           "\"fpr\": %.17g}\n",
           c.capacity, c.fingerprint_bits, c.bucket_size, c.max_kicks, c.expansion,
           c.max_sub_filters, c.seed, s.sub_filters, s.buckets, s.slots, s.items, s.stashed,
           s.load_factor, s.bytes, cf_serialized_size(f), s.fpr);
    return fflush(stdout) == 0 ? 0 : fail("cannot write stdout");
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return fail("usage: cli_lib_query query|query0|stats FILE");
    const char *mode = argv[1];
    bool is_query = strcmp(mode, "query") == 0, is_query0 = strcmp(mode, "query0") == 0;
    if (!is_query && !is_query0 && strcmp(mode, "stats") != 0)
        return fail("unknown mode (query, query0 or stats)");
    cf_filter *f;
    cf_status st = cf_load(argv[2], NULL, &f);
    if (st != CF_OK) {
        fprintf(stderr, "cli_lib_query: %s: %s\n", argv[2], cf_strerror(st));
        return 2;
    }
    int status = is_query ? query(f, '\n') : is_query0 ? query(f, '\0') : stats(f);
    cf_free(f);
    return status;
}
