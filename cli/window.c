/*
 * window.c - windowed filter files for every subcommand: durations on the command line,
 * the clock (or --at), and bringing a filter to the generation that is due.
 *
 * The tool's time unit is the millisecond since the Unix epoch; the file keeps the window
 * in milliseconds, so generation g spans [g * W / (G - 1), (g + 1) * W / (G - 1)) ms of
 * Unix time and the generations' start times need nothing else in the file.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The longest window taken: 100 years, far past any use and well inside the library's
 * arithmetic (a time in ms times G - 1 < 4096 fits 128 bits with room). */
#define CLI_MAX_WINDOW_MS (UINT64_C(100) * 365 * 24 * 3600 * 1000)

static const struct {
    const char *suffix;
    uint64_t ms;
} units[] = {{"ms", 1},      {"s", 1000},     {"m", 60000},
             {"h", 3600000}, {"d", 86400000}, {"w", 604800000}};

bool cli_parse_duration(const char *sub, const char *opt, const char *text, uint64_t *ms)
{
    char *end = NULL;
    errno = 0;
    double v = text[0] == '-' ? -1.0 : strtod(text, &end);
    uint64_t unit = 0;
    if (end && end != text) {
        if (*end == '\0')
            unit = 1000; /* a bare number: seconds */
        for (size_t i = 0; i < sizeof units / sizeof units[0] && !unit; i++)
            if (strcmp(end, units[i].suffix) == 0)
                unit = units[i].ms;
    }
    double total = v * (double)unit;
    if (!unit || errno || !(total >= 1.0) || total > (double)CLI_MAX_WINDOW_MS) {
        cli_usage(sub,
                  "--%s takes a duration from 1ms to 100 years, such as 90s, 15m, 24h or 7d "
                  "(a bare number is seconds), not '%s'",
                  opt, text);
        return false;
    }
    *ms = (uint64_t)llround(total);
    return true;
}

bool cli_clock_option(const char *sub, int id, const char *value, cli_clock *c)
{
    if (id == OPT_NOW) {
        c->fixed = false;
        return true;
    }
    char *end = NULL;
    errno = 0;
    double s = value[0] == '-' ? -1.0 : strtod(value, &end);
    if (!end || end == value || *end != '\0' || errno || !(s >= 0.0) ||
        s * 1000.0 >= 9.2e18) { /* llround's range: a long long of ms (292 million years) */
        cli_usage(sub, "--at takes a Unix time in seconds (fractions allowed), not '%s'", value);
        return false;
    }
    c->fixed = true;
    c->ms = (uint64_t)llround(s * 1000.0);
    return true;
}

uint64_t cli_clock_now(const cli_clock *c)
{
    if (c->fixed)
        return c->ms;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void cli_format_duration(uint64_t ms, char *buf, size_t n)
{
    /* Compound, largest unit first ("25h2m36.521s"); days only from two days on, so that
     * a day reads as people say it, 24h. */
    static const struct {
        const char *suffix;
        uint64_t ms;
    } parts[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}};
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof parts / sizeof parts[0] && used < n; i++) {
        if (ms < parts[i].ms || (i == 0 && ms < 2 * parts[i].ms))
            continue;
        int w = snprintf(buf + used, n - used, "%" PRIu64 "%s", ms / parts[i].ms, parts[i].suffix);
        used += w > 0 ? (size_t)w : 0;
        ms %= parts[i].ms;
    }
    if (used >= n || (ms == 0 && used > 0))
        return;
    if (ms < 1000 && used == 0)
        snprintf(buf + used, n - used, "%" PRIu64 "ms", ms);
    else if (ms % 1000 == 0)
        snprintf(buf + used, n - used, "%" PRIu64 "s", ms / 1000);
    else { /* the milliseconds without trailing zeros: 1.5s, 12.857s */
        uint64_t frac = ms % 1000, digits = 3;
        for (; frac % 10 == 0; frac /= 10)
            digits--;
        snprintf(buf + used, n - used, "%" PRIu64 ".%0*" PRIu64 "s", ms / 1000, (int)digits, frac);
    }
}

void cli_format_time(uint64_t ms, char *buf, size_t n)
{
    time_t t = (time_t)(ms / 1000u);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
        snprintf(buf, n, "%" PRIu64 " ms", ms);
}

uint64_t cli_generation_start(const cf_stats *s)
{
    /* ceil(g * W / (G - 1)): the first millisecond whose generation is g */
    __extension__ typedef unsigned __int128 u128;
    u128 p = (u128)s->generation * s->window;
    return (uint64_t)((p + s->generations - 2u) / (s->generations - 1u));
}

int cli_window_due(const char *path, cf_filter *f, const cli_clock *c)
{
    cf_stats s;
    cf_get_stats(f, &s);
    if (s.generations == 0 || s.window == 0)
        return CLI_EXIT_OK;
    uint64_t now = cli_clock_now(c), due = cf_generation_at(f, now);
    if (due > s.generation) {
        cf_status st = cf_advance_to(f, due);
        if (st != CF_OK)
            return cli_fail(path, "cannot advance the window", st, 0);
        return CLI_EXIT_OK;
    }
    if (due < s.generation) {
        char at[64], began[64];
        cli_format_time(now, at, sizeof at);
        cli_format_time(cli_generation_start(&s), began, sizeof began);
        cli_error("%s: the time (%s) is before the filter's newest generation, which began "
                  "%s: nothing written (did the clock go back? --at sets the time)",
                  path, at, began);
        return CLI_EXIT_FILE;
    }
    return CLI_EXIT_OK;
}
