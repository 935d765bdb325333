/*
 * cuckoo.c - the `cuckoo` command-line tool: create, fill, query and inspect cuckoo
 * filter files. This file dispatches to the subcommands; cuckoo(1) is the manual.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char usage_text[] =
    "Usage: cuckoo COMMAND FILE [OPTION...] [ARG...]\n"
    "Create, fill and query cuckoo filter files: set membership with no false negatives,\n"
    "a false-positive rate you choose, and deletion.\n"
    "\n"
    "Commands:\n"
    "  create FILE --capacity N   create an empty filter for N keys\n"
    "  build FILE [INPUT]         create a filter sized to the keys of INPUT and add them\n"
    "  add FILE [KEY...]          add keys (from stdin when none are given)\n"
    "  query FILE [KEY...]        print KEY<TAB>yes or KEY<TAB>no for each key\n"
    "  delete FILE [KEY...]       delete keys that were added\n"
    "  count FILE [KEY...]        print KEY<TAB>N, the copies of each key\n"
    "  merge OUT IN...            write to OUT a filter holding every key of the IN filters\n"
    "  info FILE [--json]         print the filter's parameters and figures\n"
    "  verify FILE...             check files completely\n"
    "\n"
    "  -h, --help                 show this help ('cuckoo COMMAND --help' for a command)\n"
    "  --version                  show the version\n"
    "\n"
    "Keys are lines (without \"\\n\" or \"\\r\\n\"), or NUL-terminated with -0.\n"
    "Exit status: 0 success, 1 usage error, 2 file error (missing, corrupt, unwritable)\n"
    "or out of memory, 3 some keys did not fit (the others were saved).\n"
    "See cuckoo(1) for the whole manual.\n";

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
} subcommand;

static const subcommand subcommands[] = {
    {"create", cmd_create}, {"build", cmd_build},   {"add", cmd_add},
    {"query", cmd_query},   {"delete", cmd_delete}, {"count", cmd_count},
    {"merge", cmd_merge},   {"info", cmd_info},     {"verify", cmd_verify},
};

int main(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage(NULL, "missing command");
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        fputs(usage_text, stdout);
        return cli_finish_stdout(CLI_EXIT_OK);
    }
    if (strcmp(name, "--version") == 0) {
        printf("cuckoo %s\n", cf_version());
        return cli_finish_stdout(CLI_EXIT_OK);
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(name, subcommands[i].name) == 0)
            return subcommands[i].run(argc - 2, argv + 2);
    if (name[0] == '-')
        return cli_usage(NULL, "unknown option '%s'", name);
    return cli_usage(NULL, "unknown command '%s'", name);
}
