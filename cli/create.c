/*
 * create.c - `cuckoo create` (an empty filter file), and what it shares with
 * `cuckoo build`: the options that shape a new filter, the seed, making and saving it.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------ */
/* New filters, for create and build (declared in cli.h)                                */
/* ------------------------------------------------------------------------------------ */

enum shape_result cli_shape_option(const char *sub, int id, const char *value, shape_opts *o)
{
    uint64_t v = 0;
    bool ok = true;
    switch (id) {
    case OPT_FPR:
        ok = cli_parse_probability(sub, "fpr", value, &o->cfg.target_fpr);
        break;
    case OPT_FINGERPRINT_BITS:
        ok = cli_parse_uint(sub, "fingerprint-bits", value, CF_MIN_FINGERPRINT_BITS,
                            CF_MAX_FINGERPRINT_BITS, false, &v);
        o->cfg.fingerprint_bits = (unsigned)v;
        break;
    case OPT_BUCKET_SIZE:
        ok = cli_parse_uint(sub, "bucket-size", value, 1, CF_MAX_BUCKET_SIZE, false, &v);
        o->cfg.bucket_size = (unsigned)v;
        break;
    case OPT_MAX_KICKS:
        ok = cli_parse_uint(sub, "max-kicks", value, 1, CF_MAX_MAX_KICKS, false, &v);
        o->cfg.max_kicks = (unsigned)v;
        break;
    case OPT_EXPANSION:
        ok = cli_parse_uint(sub, "expansion", value, 0, CF_MAX_EXPANSION, false, &v);
        o->cfg.expansion = (unsigned)v;
        break;
    case OPT_MAX_SUB_FILTERS:
        ok = cli_parse_uint(sub, "max-sub-filters", value, 1, CF_MAX_SUB_FILTERS, false, &v);
        o->cfg.max_sub_filters = (unsigned)v;
        break;
    case OPT_FPR_BOUND:
        ok = cli_parse_probability(sub, "fpr-bound", value, &o->cfg.fpr_bound);
        break;
    case OPT_SAME_WIDTH:
        o->cfg.flags |= CF_GROW_SAME_WIDTH;
        break;
    case OPT_SEMI_SORT:
        o->cfg.flags |= CF_SEMI_SORT;
        break;
    case OPT_MAPPING:
        o->cfg.flags &= ~(unsigned)(CF_SEGMENTED | CF_UNSEGMENTED);
        if (strcmp(value, "segmented") == 0)
            o->cfg.flags |= CF_SEGMENTED;
        else if (strcmp(value, "any-size") == 0)
            o->cfg.flags |= CF_UNSEGMENTED;
        else if (strcmp(value, "auto") != 0) {
            cli_usage(sub, "--mapping is auto, segmented or any-size, not '%s'", value);
            ok = false;
        }
        break;
    case OPT_REDISBLOOM:
        o->cfg.flags |= CF_REDISBLOOM;
        break;
    case OPT_SEED: /* as given, 0 too; without --seed the library draws a secret one */
        ok = cli_parse_seed(sub, "seed", value, &o->cfg.seed);
        o->cfg.flags |= CF_FIXED_SEED;
        break;
    case OPT_WINDOW:
        ok = cli_parse_duration(sub, "window", value, &o->cfg.window);
        if (o->cfg.generations == 0)
            o->cfg.generations = CLI_DEFAULT_GENERATIONS;
        break;
    case OPT_GENERATIONS:
        ok = cli_parse_uint(sub, "generations", value, 2, CF_MAX_GENERATIONS, false, &v);
        o->cfg.generations = (unsigned)v;
        o->generations_given = true;
        break;
    case OPT_AT:
    case OPT_NOW:
        ok = cli_clock_option(sub, id, value, &o->clock);
        break;
    case OPT_FORCE:
        o->force = true;
        break;
    case OPT_QUIET:
        o->quiet = true;
        break;
    default:
        return SHAPE_NOT_MINE;
    }
    return ok ? SHAPE_TAKEN : SHAPE_BAD;
}

/* The shape cfg resolves to whatever its capacity (cf_config_resolve), with the
 * library's defaults; false if the shape itself is refused. */
static bool resolve_shape(const cf_config *cfg, cf_config *out)
{
    cf_config c = *cfg;
    c.capacity = 1;
    return cf_config_resolve(&c, out) == CF_OK;
}

int cli_check_shape(const char *sub, const shape_opts *o)
{
    /* The tool's own rules: options that mean nothing without another. */
    if (o->generations_given && !o->cfg.window)
        return cli_usage(sub, "--generations is for windowed filters: give --window too");
    if ((o->cfg.flags & CF_GROW_SAME_WIDTH) && o->cfg.expansion == 0)
        return cli_usage(sub, "--same-width is for growing filters: give --expansion too");
    /* The library's, in its own words; the shape does not depend on the capacity. */
    cf_config c = o->cfg;
    c.capacity = 1;
    const char *why = NULL;
    if (cf_config_check(&c, &why) != CF_OK)
        return cli_usage(sub, "%s", why);
    return CLI_EXIT_OK;
}

int cli_check_new_file(const char *path, bool force)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return CLI_EXIT_OK;
    if (!force) {
        cli_error("%s: exists (use --force to overwrite)", path);
        return CLI_EXIT_FILE;
    }
    /* --force replaces a file (the one a symbolic link names), never a device, a FIFO, a
     * socket or a directory. */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        cli_error("%s: not a regular file (--force replaces only files)", path);
        return CLI_EXIT_FILE;
    }
    return CLI_EXIT_OK;
}

int cli_new_filter(const char *sub, const char *path, const cf_config *cfg, cf_filter **out)
{
    size_t bytes;
    if (cf_bytes_needed(cfg, &bytes) != CF_OK) {
        cf_config r = {0};
        (void)resolve_shape(cfg, &r); /* the shape is good: cli_check_shape came first */
        return cli_usage(sub,
                         "%" PRIu64 " keys are too many for %u-bit fingerprints in %u-slot buckets",
                         cfg->capacity, r.fingerprint_bits, r.bucket_size);
    }
    cf_status st = cf_new(cfg, out);
    if (st == CF_ENOMEM) {
        cli_error("%s: out of memory (the filter needs %zu bytes)", path, bytes);
        return CLI_EXIT_FILE;
    }
    if (st == CF_EIO) { /* a secret seed was to be drawn */
        cli_error("%s: the system gave no random seed (give --seed)", path);
        return CLI_EXIT_FILE;
    }
    if (st != CF_OK)
        return cli_fail(path, NULL, st, 0);
    return CLI_EXIT_OK;
}

int cli_save_filter(const cf_filter *f, const char *path)
{
    cf_status st = cf_save(f, path);
    if (st != CF_OK)
        return cli_fail(path, "cannot save", st, errno);
    return CLI_EXIT_OK;
}

void cli_describe(const char *path, const char *what, const cf_filter *f)
{
    cf_config cfg;
    cf_stats s;
    cf_get_config(f, &cfg);
    cf_get_stats(f, &s);
    fprintf(stderr,
            "%s: %s: capacity %" PRIu64 ", %u-bit fingerprints, %u-slot%s buckets, %s, %" PRIu64
            " table bytes, false-positive rate %.4g%% at full load\n",
            path, what, cfg.capacity, s.fingerprint_bits, s.bucket_size,
            (cfg.flags & CF_SEMI_SORT)    ? " semi-sorted"
            : (cfg.flags & CF_REDISBLOOM) ? " RedisBloom-layout"
                                          : "",
            cfg.expansion ? "growing" : "fixed size", s.bytes,
            100.0 * cf_expected_fpr(s.fingerprint_bits, s.bucket_size, s.sub_filters));
    if (s.generations) {
        char window[32];
        cli_format_duration(s.window, window, sizeof window);
        fprintf(stderr,
                "%s: windowed: %s in %u generations (the capacity and table bytes are all of"
                " them; the rate is theirs together)\n",
                path, window, s.generations);
    }
}

/* ------------------------------------------------------------------------------------ */
/* cuckoo create                                                                        */
/* ------------------------------------------------------------------------------------ */

static const char create_help[] =
    "Usage: cuckoo create FILE --capacity N [OPTION...]\n"
    "Create an empty filter file that holds N keys.\n"
    "\n"
    "  --capacity N            keys to hold (required), such as 2500000, 2.5M or 1e6\n" SHAPE_HELP
    "  --force                 overwrite FILE if it exists\n"
    "  -q, --quiet             no summary on stderr\n"
    "  -h, --help              show this help\n"
    "\n"
    "Without --seed the seed is secret and random, so nobody can compute keys that collide\n"
    "in the filter; give --seed for files that must come out the same every time.\n"
    "The file is written atomically: an existing FILE is replaced whole or not at all.\n";

int cmd_create(int argc, char **argv)
{
    static const cli_opt opts[] = {{"capacity", 0, true, OPT_CAPACITY}, SHAPE_OPTIONS};
    shape_opts o = {0};
    bool have_capacity = false;
    cli_parser p;
    cli_parser_init(&p, "create", create_help, opts, sizeof opts / sizeof opts[0], argc, argv);
    const char *value;
    int id;
    while ((id = cli_next_option(&p, &value)) >= 0) {
        if (id == OPT_CAPACITY) {
            if (!cli_parse_uint("create", "capacity", value, 1, UINT64_MAX, true, &o.cfg.capacity))
                return CLI_EXIT_USAGE;
            have_capacity = true;
        } else if (cli_shape_option("create", id, value, &o) == SHAPE_BAD) {
            return CLI_EXIT_USAGE;
        }
    }
    if (id == CLI_OPT_STOP)
        return p.status;
    if (p.operands != 1)
        return cli_usage("create", p.operands == 0 ? "missing FILE" : "one FILE only");
    if (!have_capacity)
        return cli_usage("create", "--capacity is required");
    int status = cli_check_shape("create", &o);
    if (status != CLI_EXIT_OK)
        return status;

    const char *path = argv[0];
    status = cli_check_new_file(path, o.force);
    cf_filter *f = NULL;
    if (status == CLI_EXIT_OK)
        status = cli_new_filter("create", path, &o.cfg, &f);
    if (status == CLI_EXIT_OK)
        status = cli_window_due(path, f, &o.clock);
    if (status == CLI_EXIT_OK)
        status = cli_save_filter(f, path);
    if (status == CLI_EXIT_OK && !o.quiet)
        cli_describe(path, "created", f);
    cf_free(f);
    return status;
}
