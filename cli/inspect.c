/*
 * inspect.c - `cuckoo info` (every parameter and figure of a filter file) and
 * `cuckoo verify` (a complete check of the file).
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------------------ */
/* cuckoo info                                                                          */
/* ------------------------------------------------------------------------------------ */

static const char info_help[] =
    "Usage: cuckoo info FILE [--json]\n"
    "Print the parameters and figures of the filter in FILE.\n"
    "\n"
    "  --json          one JSON object with snake_case keys, for programs\n"
    "  -h, --help      show this help\n"
    "\n"
    "The whole file is checked first; a damaged one is refused (see cuckoo verify).\n"
    "The expected false-positive rate is given at the current load, at full load (every\n"
    "current sub-filter full) and as its bound (every sub-filter the filter may grow to,\n"
    "full). Bits per item is table bits / items (\"-\" when empty).\n"
    "A windowed filter also shows its window, its generations and their items, as the file\n"
    "holds them (generations that fell out of the window since are dropped by the next write,\n"
    "and are not seen by query and count).\n";

/* Everything info prints, gathered once for both formats. */
typedef struct filter_facts {
    cf_config cfg;
    cf_stats s;
    size_t file_bytes;
    uint64_t gen_items[CF_MAX_GENERATIONS]; /* a window's, oldest first */
    uint64_t first_buckets; /* the first sub-filter's (each generation's, for a window) */
} filter_facts;

/* The format version of the filter's tables: 3 for segmented ones (a window's own header
 * stays version 2 around them). */
static unsigned format_version(const filter_facts *x)
{
    return (x->cfg.flags & CF_SEGMENTED) ? 3u : 2u;
}

/* Segments in the first sub-filter (each generation's, for a window); 0 for the any-size
 * mapping. */
static uint64_t segments_of(const filter_facts *x)
{
    return (x->cfg.flags & CF_SEGMENTED) ? x->first_buckets >> CF_SEGMENT_BITS : 0u;
}

/* A windowed filter's span of one generation, W / (G - 1), to the millisecond. */
static void format_span(const cf_stats *s, char *buf, size_t n)
{
    cli_format_duration(s->window / (s->generations - 1u), buf, n);
}

static void print_window_text(const filter_facts *x, int w)
{
    const cf_stats *s = &x->s;
    char window[32], span[32], most[32], began[64];
    cli_format_duration(s->window, window, sizeof window);
    format_span(s, span, sizeof span);
    /* W * G / (G - 1) = W + one span */
    cli_format_duration(s->window + s->window / (s->generations - 1u), most, sizeof most);
    cli_format_time(cli_generation_start(s), began, sizeof began);
    printf("%-*s %s in %u generations of %s\n", w, "window", window, s->generations, span);
    printf("%-*s at least %s after its last add, gone within %s\n", w, "a key stays", window, most);
    printf("%-*s %" PRIu64 " (the newest, begun %s)\n", w, "generation", s->generation, began);
    printf("%-*s", w, "generation items");
    for (unsigned i = 0; i < s->generations; i++)
        printf(" %" PRIu64, x->gen_items[i]);
    printf(" (oldest first)\n");
}

/* Table bits per key stop meaning what a key costs below this load: a filter of 10M
 * slots holding 2 keys would report 63 million bits per key. Below it, bits per slot
 * (which the width and the bucket size fix) is the figure to read. */
#define CLI_BITS_PER_ITEM_LOAD 0.5

static double bits_per_slot(const cf_stats *s)
{
    return s->slots ? (double)s->bytes * 8.0 / (double)s->slots : 0.0;
}

static bool bits_per_item_means(const cf_stats *s)
{
    return s->items > 0 && s->load_factor >= CLI_BITS_PER_ITEM_LOAD;
}

static void print_text(const char *path, const filter_facts *x)
{
    const cf_config *c = &x->cfg;
    const cf_stats *s = &x->s;
    /* Label column wide enough for the longest label. */
    const int w = 18;
    printf("%-*s %s\n", w, "file", path);
    printf("%-*s %u\n", w, "format version", format_version(x));
    printf("%-*s %s\n", w, "layout",
           (c->flags & CF_REDISBLOOM)
               ? "RedisBloom's (MurmurHash64A, 8-bit fingerprints h % 255 + 1)"
           : (c->flags & CF_FAST_HASH)
               ? "cuckoofilter's (8-byte keys: multiply-shift from the seed, hash id 3; others "
                 "XXH3 with the seed)"
               : "cuckoofilter's (XXH3 with the seed)");
    printf("%-*s %" PRIu64 "\n", w, "capacity", c->capacity);
    if (s->newest_fingerprint_bits == c->fingerprint_bits)
        printf("%-*s %u\n", w, "fingerprint bits", c->fingerprint_bits);
    else
        printf("%-*s %u (the first sub-filter) to %u (the newest)\n", w, "fingerprint bits",
               c->fingerprint_bits, s->newest_fingerprint_bits);
    printf("%-*s %u%s\n", w, "bucket size", c->bucket_size,
           (c->flags & CF_SEMI_SORT) ? " (semi-sorted: f - 1 bits per slot)" : "");
    if (segments_of(x))
        printf("%-*s segmented: %" PRIu64 " segment%s of %llu buckets%s\n", w, "mapping",
               segments_of(x), segments_of(x) == 1 ? "" : "s", 1ull << CF_SEGMENT_BITS,
               s->generations ? " per generation" : "");
    else
        printf("%-*s any-size%s\n", w, "mapping",
               (c->flags & CF_REDISBLOOM) ? " (RedisBloom's: powers of two)" : "");
    printf("%-*s %u\n", w, "max kicks", c->max_kicks);
    if (c->expansion == 0)
        printf("%-*s 0 (fixed size)\n", w, "expansion");
    else
        printf("%-*s %u (growing: each new sub-filter %u times the last, %s)\n", w, "expansion",
               c->expansion, c->expansion,
               (c->flags & CF_GROW_SAME_WIDTH) ? "of the same fingerprint width"
                                               : "with wider fingerprints");
    printf("%-*s %u\n", w, "max sub-filters", c->max_sub_filters);
    printf("%-*s 0x%016" PRIx64 "\n", w, "seed", c->seed);
    printf("%-*s %u\n", w, "sub-filters", s->sub_filters);
    printf("%-*s %" PRIu64 "\n", w, "buckets", s->buckets);
    printf("%-*s %" PRIu64 "\n", w, "slots", s->slots);
    printf("%-*s %" PRIu64 "\n", w, "items", s->items);
    printf("%-*s %" PRIu64 "\n", w, "stashed", s->stashed);
    printf("%-*s %.4f\n", w, "load factor", s->load_factor);
    printf("%-*s %" PRIu64 "\n", w, "table bytes", s->bytes);
    printf("%-*s %zu\n", w, "file bytes", x->file_bytes);
    printf("%-*s %.2f\n", w, "bits per slot", bits_per_slot(s));
    if (!bits_per_item_means(s))
        printf("%-*s - (below %.0f%% load)\n", w, "bits per item", CLI_BITS_PER_ITEM_LOAD * 100.0);
    else
        printf("%-*s %.2f\n", w, "bits per item", (double)s->bytes * 8.0 / (double)s->items);
    printf("%-*s %.6f%%\n", w, "fpr now", s->fpr * 100.0);
    printf("%-*s %.6f%%\n", w, "fpr at full load", s->fpr_full * 100.0);
    printf("%-*s %.6f%%\n", w, "fpr bound", s->fpr_bound * 100.0);
    if (s->generations)
        print_window_text(x, w);
}

static void print_json(const filter_facts *x)
{
    const cf_config *c = &x->cfg;
    const cf_stats *s = &x->s;
    /* %.9g: enough digits to tell any two rates apart that a filter can have, and always
     * a valid JSON number (the values are finite). */
    printf("{\n");
    printf("  \"format_version\": %u,\n", format_version(x));
    printf("  \"layout\": \"%s\",\n", (c->flags & CF_REDISBLOOM) ? "redisbloom" : "cuckoofilter");
    printf("  \"hash_id\": %u,\n", (c->flags & CF_REDISBLOOM)  ? 2u
                                   : (c->flags & CF_FAST_HASH) ? 3u
                                                               : 1u);
    printf("  \"capacity\": %" PRIu64 ",\n", c->capacity);
    printf("  \"fingerprint_bits\": %u,\n", c->fingerprint_bits);
    printf("  \"newest_fingerprint_bits\": %u,\n", s->newest_fingerprint_bits);
    printf("  \"bucket_size\": %u,\n", c->bucket_size);
    printf("  \"max_kicks\": %u,\n", c->max_kicks);
    printf("  \"expansion\": %u,\n", c->expansion);
    printf("  \"same_width\": %s,\n", (c->flags & CF_GROW_SAME_WIDTH) ? "true" : "false");
    printf("  \"semi_sorted\": %s,\n", (c->flags & CF_SEMI_SORT) ? "true" : "false");
    printf("  \"mapping\": \"%s\",\n", segments_of(x) ? "segmented" : "any-size");
    printf("  \"segment_bits\": %u,\n", segments_of(x) ? CF_SEGMENT_BITS : 0u);
    printf("  \"segments\": %" PRIu64 ",\n", segments_of(x));
    printf("  \"max_sub_filters\": %u,\n", c->max_sub_filters);
    /* A string: JSON numbers lose precision beyond 2^53 in most parsers. */
    printf("  \"seed\": \"0x%016" PRIx64 "\",\n", c->seed);
    printf("  \"sub_filters\": %u,\n", s->sub_filters);
    printf("  \"buckets\": %" PRIu64 ",\n", s->buckets);
    printf("  \"slots\": %" PRIu64 ",\n", s->slots);
    printf("  \"items\": %" PRIu64 ",\n", s->items);
    printf("  \"stashed\": %" PRIu64 ",\n", s->stashed);
    printf("  \"load_factor\": %.9g,\n", s->load_factor);
    printf("  \"table_bytes\": %" PRIu64 ",\n", s->bytes);
    printf("  \"file_bytes\": %zu,\n", x->file_bytes);
    printf("  \"bits_per_slot\": %.9g,\n", bits_per_slot(s));
    if (!bits_per_item_means(s))
        printf("  \"bits_per_item\": null,\n");
    else
        printf("  \"bits_per_item\": %.9g,\n", (double)s->bytes * 8.0 / (double)s->items);
    printf("  \"fpr\": %.9g,\n", s->fpr);
    printf("  \"fpr_at_full_load\": %.9g,\n", s->fpr_full);
    printf("  \"fpr_bound\": %.9g", s->fpr_bound);
    if (s->generations) {
        printf(",\n  \"window_ms\": %" PRIu64 ",\n", s->window);
        printf("  \"generations\": %u,\n", s->generations);
        printf("  \"generation\": %" PRIu64 ",\n", s->generation);
        printf("  \"generation_started_ms\": %" PRIu64 ",\n", cli_generation_start(s));
        printf("  \"generation_items\": [");
        for (unsigned i = 0; i < s->generations; i++)
            printf("%s%" PRIu64, i ? ", " : "", x->gen_items[i]);
        printf("]");
    }
    printf("\n}\n");
}

/* The options info and verify share (--json, --help): INSPECT_GO_ON with *json set, else
 * the command's exit status (--help, a usage error). The operands are argv[0 .. *n). */
#define INSPECT_GO_ON (-1)
static int parse_inspect(const char *name, const char *help, int argc, char **argv, bool *json,
                         int *n)
{
    static const cli_opt opts[] = {{"json", 0, false, OPT_JSON}, {"help", 'h', false, OPT_HELP}};
    cli_parser p;
    cli_parser_init(&p, name, help, opts, sizeof opts / sizeof opts[0], argc, argv);
    const char *value;
    int id;
    *json = false;
    while ((id = cli_next_option(&p, &value)) >= 0)
        *json = *json || id == OPT_JSON;
    if (id == CLI_OPT_STOP)
        return p.status;
    *n = p.operands;
    return INSPECT_GO_ON;
}

int cmd_info(int argc, char **argv)
{
    bool json;
    int n = 0, status = parse_inspect("info", info_help, argc, argv, &json, &n);
    if (status != INSPECT_GO_ON)
        return status;
    if (n != 1)
        return cli_usage("info", n == 0 ? "missing FILE" : "one FILE only");

    const char *path = argv[0];
    cf_filter *f;
    /* With the tables' checksum too: the figures of a damaged file would mislead, and one
     * read of the file costs far less than loading it. */
    status = cli_open_mapped(path, true, &f);
    if (status != CLI_EXIT_OK)
        return status;
    filter_facts *x = malloc(sizeof *x);
    if (!x) {
        cf_free(f);
        cli_error("out of memory");
        return CLI_EXIT_FILE;
    }
    cf_get_config(f, &x->cfg);
    cf_get_stats(f, &x->s);
    cf_mapping m; /* a window maps keys in each generation: its buckets, G of them */
    x->first_buckets = cf_get_mapping(f, &m) == CF_OK ? m.buckets
                       : x->s.generations             ? x->s.buckets / x->s.generations
                                                      : 0u;
    x->file_bytes = cf_serialized_size(f);
    for (unsigned i = 0; i < x->s.generations; i++) {
        cf_stats g;
        cf_get_generation_stats(f, x->s.generations - 1u - i, &g);
        x->gen_items[i] = g.items;
    }
    cf_free(f);
    if (json)
        print_json(x);
    else
        print_text(path, x);
    free(x);
    return cli_finish_stdout(CLI_EXIT_OK);
}

/* ------------------------------------------------------------------------------------ */
/* cuckoo verify                                                                        */
/* ------------------------------------------------------------------------------------ */

static const char verify_help[] =
    "Usage: cuckoo verify [--json] FILE...\n"
    "Check each FILE completely: magic number, format version, every parameter, the\n"
    "layout, the exact length and the checksums of the header and of the tables.\n"
    "Prints \"FILE: ok\" and a few figures for a good file; for a bad one, one line\n"
    "naming the problem on stderr, and the exit status is 2.\n"
    "\n"
    "  --json          print a JSON array instead, an object per FILE in order:\n"
    "                  {\"file\", \"ok\": true, \"items\", \"slots\", \"sub_filters\",\n"
    "                  \"bytes\"} or {\"file\", \"ok\": false, \"error\"}, where error is the\n"
    "                  line stderr also gets, without \"cuckoo: FILE: \"\n"
    "  -h, --help      show this help\n";

/* `text` as a JSON string: quotes, backslashes and control characters escaped; other
 * bytes as they are (a path that is not UTF-8 stays what it is). */
static void print_json_string(const char *text)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if (*c < 0x20)
            printf("\\u%04x", *c);
        else
            putchar(*c);
    }
    putchar('"');
}

/* What verify found for one file: good (st CF_OK, with its figures) or why not. */
typedef struct verdict {
    cf_status st;
    int err;            /* errno, for CF_EIO */
    const char *reason; /* cf_validate_file's, or NULL */
    cf_stats s;
    size_t bytes;
} verdict;

static verdict check_file(const char *path)
{
    verdict v = {0};
    v.st = cf_validate_file(path, &v.reason);
    v.err = errno;
    if (v.st != CF_OK)
        return v;
    /* Already checked in full: open without checking the tables again. */
    cf_filter *f;
    v.st = cf_open_mapped(path, 0u, NULL, &f);
    v.err = errno;
    if (v.st != CF_OK)
        return v;
    cf_get_stats(f, &v.s);
    v.bytes = cf_serialized_size(f);
    cf_free(f);
    return v;
}

int cmd_verify(int argc, char **argv)
{
    bool json;
    int n = 0, status = parse_inspect("verify", verify_help, argc, argv, &json, &n);
    if (status != INSPECT_GO_ON)
        return status;
    if (n == 0)
        return cli_usage("verify", "missing FILE");
    status = CLI_EXIT_OK;
    if (json)
        printf("[");
    for (int i = 0; i < n; i++) {
        const char *path = argv[i];
        verdict v = check_file(path);
        if (v.st != CF_OK) {
            status = CLI_EXIT_FILE;
            char line[CLI_MESSAGE_MAX];
            cli_fail_reason(path, NULL, v.st, v.err, v.reason);
            cli_fail_text(line, NULL, NULL, v.st, v.err, v.reason);
            if (json) {
                printf("%s\n  {\"file\": ", i ? "," : "");
                print_json_string(path);
                printf(", \"ok\": false, \"error\": ");
                print_json_string(line);
                printf("}");
            }
        } else if (json) {
            printf("%s\n  {\"file\": ", i ? "," : "");
            print_json_string(path);
            printf(", \"ok\": true, \"items\": %" PRIu64 ", \"slots\": %" PRIu64
                   ", \"sub_filters\": %u, \"bytes\": %zu}",
                   v.s.items, v.s.slots, v.s.sub_filters, v.bytes);
        } else {
            printf("%s: ok (%" PRIu64 " items in %" PRIu64 " slots, %u sub-filter%s, %zu bytes)\n",
                   path, v.s.items, v.s.slots, v.s.sub_filters, v.s.sub_filters == 1 ? "" : "s",
                   v.bytes);
        }
    }
    if (json)
        printf("\n]\n");
    return cli_finish_stdout(status);
}
