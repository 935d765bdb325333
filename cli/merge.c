/*
 * merge.c - `cuckoo merge OUT IN...`: one filter holding every key of several (cf_merge).
 *
 * OUT starts as a copy of the first input and takes the others in order (cf_merge_threads:
 * --jobs threads for segmented filters, the same file for any number); it is saved
 * atomically at the end, or not at all. When OUT exists (--force), it is locked from
 * before the inputs are read until it is replaced, so that a command adding to it
 * meanwhile waits instead of losing its keys; name OUT among the inputs to keep its keys.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char merge_help[] =
    "Usage: cuckoo merge OUT IN... [OPTION...]\n"
    "Write to OUT a filter that holds every key of the filters IN...: each key is found,\n"
    "counts add up (a key in two inputs counts twice), and the false-positive rate is the\n"
    "formula's at the merged load.\n"
    "\n"
    "  --force                 replace OUT if it exists (name it among the inputs too to\n"
    "                          keep its keys)\n"
    "  -j, --jobs N            merge segmented filters (--mapping, in create and build)\n"
    "                          with N threads, each its own segments (default 1; at most\n"
    "                          256): the file is the same for every N\n"
    "  -q, --quiet             no summary\n"
    "  -h, --help              show this help\n"
    "\n"
    "Filters merge when they were made alike: the same seed, fingerprint width, bucket\n"
    "size and encoding, and capacity (cuckoo create --seed S with the same options, or\n"
    "cuckoo build --seed S with --capacity...). A fingerprint keeps its place only in the\n"
    "first sub-filter or one of its size, so give filters meant to be merged the capacity\n"
    "of all their keys together: a merge that does not fit fails and saves nothing.\n"
    "Windowed, concurrent and RedisBloom-layout filters do not merge.\n"
    "Exit status 2 if an input cannot be read or the filters do not merge (nothing saved).\n";

int cmd_merge(int argc, char **argv)
{
    static const cli_opt opts[] = {{"force", 0, false, OPT_FORCE},
                                   {"jobs", 'j', true, OPT_JOBS},
                                   {"quiet", 'q', false, OPT_QUIET},
                                   {"help", 'h', false, OPT_HELP}};
    bool force = false, quiet = false;
    uint64_t jobs = 1;
    cli_parser p;
    cli_parser_init(&p, "merge", merge_help, opts, sizeof opts / sizeof opts[0], argc, argv);
    const char *value;
    int id;
    while ((id = cli_next_option(&p, &value)) >= 0) {
        if (id == OPT_FORCE)
            force = true;
        else if (id == OPT_QUIET)
            quiet = true;
        else if (id == OPT_JOBS &&
                 !cli_parse_uint("merge", "jobs", value, 1, CLI_JOBS_MAX, false, &jobs))
            return CLI_EXIT_USAGE;
    }
    if (id == CLI_OPT_STOP)
        return p.status;
    if (p.operands < 2)
        return cli_usage("merge", p.operands == 0 ? "missing OUT" : "missing IN");
    const char *out = argv[0];
    int status = cli_check_new_file(out, force);
    if (status != CLI_EXIT_OK)
        return status;
    int lock = -1;
    struct stat st_out;
    if (stat(out, &st_out) == 0 && (status = cli_lock_file(out, true, &lock)) != CLI_EXIT_OK)
        return status;

    cf_filter *merged = NULL;
    for (int i = 1; i < p.operands && status == CLI_EXIT_OK; i++) {
        cf_filter *in = NULL;
        cf_status st = cf_load(argv[i], NULL, i == 1 ? &merged : &in);
        if (st != CF_OK) {
            status = cli_fail(argv[i], "cannot read", st, errno);
            break;
        }
        const char *why = NULL;
        if (in && (st = cf_merge_threads(merged, in, (unsigned)jobs, &why)) != CF_OK) {
            cli_error("%s: does not merge into %s: %s (nothing saved)", argv[i], out,
                      why ? why : cf_strerror(st));
            status = CLI_EXIT_FILE;
        }
        cf_free(in);
    }
    if (status == CLI_EXIT_OK)
        status = cli_save_filter(merged, out);
    if (status == CLI_EXIT_OK && !quiet)
        cli_describe(out, "merged", merged);
    cf_free(merged);
    if (lock >= 0)
        close(lock);
    return status;
}
