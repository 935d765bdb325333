/*
 * input.c - reading keys fast (large read() calls, memchr, no copies) and the progress
 * line that long key streams show.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Large enough that the read() calls cost nothing next to hashing the keys in them;
 * small enough to stay in the L2 cache. A longer key grows the buffer. */
#define READ_BUFFER_BYTES ((size_t)1 << 20)

/* ------------------------------------------------------------------------------------ */
/* Key reader                                                                           */
/* ------------------------------------------------------------------------------------ */

bool key_reader_open(key_reader *r, int fd, const char *name, bool nul_separated)
{
    *r = (key_reader){.name = name, .fd = fd, .sep = nul_separated ? '\0' : '\n'};
    r->buf = malloc(READ_BUFFER_BYTES);
    if (!r->buf) {
        errno = ENOMEM;
        return false;
    }
    r->cap = READ_BUFFER_BYTES;
    return true;
}

void key_reader_args(key_reader *r, char **args, size_t n)
{
    *r = (key_reader){.name = "arguments", .fd = -1, .args = args, .nargs = n};
}

/* The signals key_reader_catch catches, in the order of key_reader.prev. */
static const int caught_signals[KEY_READER_SIGNALS] = {SIGINT, SIGTERM, SIGHUP, SIGALRM};

/* The last signal caught (a handler can reach nothing else): written by on_signal only,
 * read and cleared by key_reader_caught. */
static volatile sig_atomic_t caught;

static void on_signal(int sig)
{
    if (sig != SIGALRM || caught == 0)
        caught = sig;
}

bool key_reader_catch(key_reader *r, uint64_t save_every_ms)
{
    if (r->fd < 0)
        return true;
    sigset_t block;
    sigemptyset(&block);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: the wait in read_some returns */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof caught_signals / sizeof caught_signals[0]; i++) {
        sigaddset(&block, caught_signals[i]);
        sigaddset(&sa.sa_mask, caught_signals[i]);
    }
    /* Every former handler first, so that key_reader_close puts back each one whatever
     * fails below. */
    for (size_t i = 0; i < sizeof caught_signals / sizeof caught_signals[0]; i++)
        if (sigaction(caught_signals[i], NULL, &r->prev[i]) != 0)
            return false;
    if (sigprocmask(SIG_BLOCK, &block, &r->unblocked) != 0)
        return false;
    caught = 0;
    r->catching = true;
    for (size_t i = 0; i < sizeof caught_signals / sizeof caught_signals[0]; i++)
        if (sigaction(caught_signals[i], &sa, NULL) != 0)
            return false;
    for (size_t i = 0; i < sizeof caught_signals / sizeof caught_signals[0]; i++)
        sigdelset(&r->unblocked, caught_signals[i]);
    if (save_every_ms == 0)
        return true;
    struct itimerval every = {
        .it_interval = {(time_t)(save_every_ms / 1000), (suseconds_t)(save_every_ms % 1000 * 1000)},
    };
    every.it_value = every.it_interval;
    return setitimer(ITIMER_REAL, &every, NULL) == 0;
}

int key_reader_caught(void)
{
    int sig = caught;
    caught = 0;
    return sig;
}

void key_reader_close(key_reader *r)
{
    free(r->buf);
    r->buf = NULL;
    if (!r->catching)
        return;
    static const struct itimerval off;
    setitimer(ITIMER_REAL, &off, NULL);
    for (size_t i = 0; i < sizeof caught_signals / sizeof caught_signals[0]; i++)
        sigaction(caught_signals[i], &r->prev[i], NULL);
    sigset_t all;
    sigemptyset(&all);
    for (size_t i = 0; i < sizeof caught_signals / sizeof caught_signals[0]; i++)
        sigaddset(&all, caught_signals[i]);
    sigprocmask(SIG_UNBLOCK, &all, NULL); /* what was pending then acts as before */
    r->catching = false;
}

/* read() that retries when a signal interrupts it; with key_reader_catch, one that waits
 * for data with the caught signals open (pselect: none can come between the check and
 * the wait) and fails with EINTR once one came. */
static ssize_t read_some(key_reader *r, char *buf, size_t len)
{
    for (;;) {
        if (r->catching) {
            if (caught) {
                errno = EINTR;
                return -1;
            }
            fd_set in;
            FD_ZERO(&in);
            FD_SET(r->fd, &in);
            if (pselect(r->fd + 1, &in, NULL, NULL, NULL, &r->unblocked) < 0) {
                if (errno == EINTR)
                    continue; /* the check above says whether to stop */
                return -1;
            }
        }
        ssize_t got = read(r->fd, buf, len);
        if (got >= 0 || errno != EINTR)
            return got;
    }
}

/* Makes room after the data for another read(): drops the keys already returned and,
 * when a single key fills the whole buffer, doubles it. */
static bool make_room(key_reader *r)
{
    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->end - r->pos);
        r->end -= r->pos;
        r->pos = 0;
    }
    if (r->end < r->cap)
        return true;
    if (r->cap > SIZE_MAX / 2) {
        errno = ENOMEM;
        return false;
    }
    char *bigger = realloc(r->buf, r->cap * 2);
    if (!bigger) {
        errno = ENOMEM;
        return false;
    }
    r->buf = bigger;
    r->cap *= 2;
    return true;
}

int key_reader_next(key_reader *r, const char **key, size_t *len)
{
    if (r->fd < 0) {
        if (r->next_arg == r->nargs)
            return 0;
        const char *arg = r->args[r->next_arg++];
        *key = arg;
        *len = strlen(arg);
        return 1;
    }

    for (;;) {
        char *start = r->buf + r->pos;
        size_t avail = r->end - r->pos;
        char *hit = memchr(start + r->scanned, r->sep, avail - r->scanned);
        if (hit) {
            size_t n = (size_t)(hit - start);
            r->pos += n + 1;
            r->scanned = 0;
            if (r->sep == '\n' && n > 0 && start[n - 1] == '\r')
                n--;
            *key = start;
            *len = n;
            return 1;
        }
        if (r->eof) {
            if (avail == 0)
                return 0;
            /* A last line without a separator is still a key, taken as it is. */
            r->pos = r->end;
            r->scanned = 0;
            *key = start;
            *len = avail;
            return 1;
        }
        r->scanned = avail;
        if (!make_room(r))
            return -1;
        ssize_t got = read_some(r, r->buf + r->end, r->cap - r->end);
        if (got < 0)
            return r->catching && errno == EINTR ? KEY_READER_CAUGHT : -1;
        if (got == 0)
            r->eof = true;
        r->end += (size_t)got;
    }
}

/* ------------------------------------------------------------------------------------ */
/* Progress line                                                                        */
/* ------------------------------------------------------------------------------------ */

/* Keys between two looks at the clock: a few milliseconds of work at the usual rates, so
 * the clock costs nothing and the line still updates on time. */
#define PROGRESS_CHECK_KEYS      16384u
/* An automatic progress line appears only once a stream has taken this long. */
#define PROGRESS_DELAY_S         1.0
/* Rewriting the terminal line more often than this would just flicker. */
#define PROGRESS_TTY_INTERVAL_S  0.25
/* On a non-terminal each update is a new line, so fewer of them. */
#define PROGRESS_LINE_INTERVAL_S 1.0
/* Longest progress line, with room to spare for a long file name. */
#define PROGRESS_LINE_MAX        512

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_start(progress *p, const char *label, bool quiet, bool forced, bool writes_stdout,
                    uint64_t total)
{
    bool tty = isatty(STDERR_FILENO) == 1;
    bool shared_tty = writes_stdout && isatty(STDOUT_FILENO) == 1;
    *p = (progress){.label = label, .total = total, .forced = forced, .tty = tty};
    p->enabled = !quiet && (forced || (tty && !shared_tty));
    p->start = now_seconds();
    p->next_print = p->start + (forced ? (tty ? PROGRESS_TTY_INTERVAL_S : PROGRESS_LINE_INTERVAL_S)
                                       : PROGRESS_DELAY_S);
    p->next_check = p->enabled ? PROGRESS_CHECK_KEYS : UINT64_MAX;
}

static void print_progress(progress *p, uint64_t done, double now, bool final)
{
    char line[PROGRESS_LINE_MAX];
    double elapsed = now - p->start;
    double mrate = elapsed > 0.0 ? (double)done / elapsed / 1e6 : 0.0;
    int len;
    if (final)
        len = snprintf(line, sizeof line, "%s: %" PRIu64 " keys in %.2f s, %.2fM keys/s", p->label,
                       done, elapsed, mrate);
    else if (p->total > 0)
        len = snprintf(line, sizeof line,
                       "%s: %" PRIu64 " of %" PRIu64 " keys (%.0f%%), %.2fM keys/s", p->label, done,
                       p->total, 100.0 * (double)done / (double)p->total, mrate);
    else
        len = snprintf(line, sizeof line, "%s: %" PRIu64 " keys, %.2fM keys/s", p->label, done,
                       mrate);
    if (len < 0)
        return;
    if ((size_t)len >= sizeof line)
        len = (int)sizeof line - 1; /* snprintf cut it there */
    if (p->tty) {
        /* Blanks over what is left of a longer previous line. */
        int pad = p->width > len ? p->width - len : 0;
        fprintf(stderr, "\r%s%*s", line, pad, "");
        p->width = len;
        if (final)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
    p->shown = true;
}

void progress_update(progress *p, uint64_t done)
{
    p->next_check = done + PROGRESS_CHECK_KEYS;
    double now = now_seconds();
    if (now < p->next_print)
        return;
    print_progress(p, done, now, false);
    p->next_print = now + (p->tty ? PROGRESS_TTY_INTERVAL_S : PROGRESS_LINE_INTERVAL_S);
}

void progress_finish(progress *p, uint64_t done)
{
    if (p->enabled && (p->shown || p->forced))
        print_progress(p, done, now_seconds(), true);
}
