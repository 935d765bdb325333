/*
 * fuzz_keys.c - the cuckoo tool's key reader (cli/input.c) against a plain splitter.
 *
 * Input: a flags byte, a repeat byte, then the body.
 *   flags bit 0   NUL-separated records (-0) instead of lines
 *   flags bit 1   the stream is the body repeated (repeat byte + 1) * 256 times, so that
 *                 keys longer than the reader's 1 MiB buffer and reads that end inside
 *                 a key or between "\r" and "\n" come up
 *   flags bit 2   also through a pipe (short reads; a pipe cannot seek)
 *
 * What it checks, for a memfd and, with bit 2, a pipe:
 * - key_reader_next returns exactly the keys of the reference: the stream split at each
 *   separator, a line's trailing "\r" dropped, a last key without a separator kept,
 *   nothing after a final separator; then 0, and 0 again.
 * The reader never reads out of bounds (the sanitizers' business) and never fails.
 */
#define _GNU_SOURCE /* memfd_create */
#include "fuzz_common.h"
#include "fuzz_target.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

/* The repeat factor's unit: 255 * 256 copies of a 64-byte body reach 4 MiB. */
#define FZ_REPEAT_UNIT 256u
/* Pipes take the stream only while it fits their buffer (written before reading). */
#define FZ_PIPE_MAX    65536u

typedef struct fz_key {
    size_t off, len;
} fz_key;

/* The reference: where each key of data[0 .. n) is, as cli.h describes them. */
static size_t fz_split(const uint8_t *data, size_t n, char sep, fz_key *keys)
{
    size_t count = 0, start = 0;
    for (size_t i = 0; i < n; i++) {
        if (data[i] != (uint8_t)sep)
            continue;
        size_t len = i - start;
        if (sep == '\n' && len > 0 && data[i - 1] == '\r')
            len--;
        keys[count++] = (fz_key){start, len};
        start = i + 1;
    }
    if (start < n)
        keys[count++] = (fz_key){start, n - start};
    return count;
}

/* Every key of fd, through a key reader, is the reference's, in order; then the end. */
static void fz_check_fd(int fd, const uint8_t *data, const fz_key *keys, size_t nkeys, bool nul)
{
    key_reader r;
    FZ_REQUIRE(key_reader_open(&r, fd, "fuzz", nul));
    const char *key;
    size_t len, i = 0;
    int got;
    while ((got = key_reader_next(&r, &key, &len)) == 1) {
        FZ_REQUIRE(i < nkeys);
        FZ_REQUIRE(len == keys[i].len && memcmp(key, data + keys[i].off, len) == 0);
        i++;
    }
    FZ_REQUIRE(got == 0 && i == nkeys);
    FZ_REQUIRE(key_reader_next(&r, &key, &len) == 0);
    key_reader_close(&r);
}

static bool fz_write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    if (size < 2)
        return 0;
    unsigned flags = in[0];
    size_t repeat = flags & 2u ? ((size_t)in[1] + 1) * FZ_REPEAT_UNIT : 1;
    const uint8_t *body = in + 2;
    size_t body_len = size - 2;
    if (body_len == 0)
        repeat = 1;
    size_t n = body_len * repeat;
    uint8_t *data = malloc(n ? n : 1);
    fz_key *keys = malloc((n + 1) * sizeof *keys);
    FZ_REQUIRE(data != NULL && keys != NULL);
    for (size_t i = 0; i < repeat; i++)
        memcpy(data + i * body_len, body, body_len);
    bool nul = flags & 1u;
    size_t nkeys = fz_split(data, n, nul ? '\0' : '\n', keys);

    int fd = memfd_create("fuzz_keys", MFD_CLOEXEC);
    FZ_REQUIRE(fd >= 0 && fz_write_all(fd, data, n) && lseek(fd, 0, SEEK_SET) == 0);
    fz_check_fd(fd, data, keys, nkeys, nul);
    close(fd);

    if ((flags & 4u) && n <= FZ_PIPE_MAX) {
        int p[2];
        FZ_REQUIRE(pipe(p) == 0);
        FZ_REQUIRE(fz_write_all(p[1], data, n));
        close(p[1]);
        fz_check_fd(p[0], data, keys, nkeys, nul);
        close(p[0]);
    }
    free(keys);
    free(data);
    return 0;
}
