/*
 * kvfile.c - import a file into a store as content-addressed records, and export it back
 * (see kvstore.h). Built on the store's public calls only.
 */
#define _GNU_SOURCE /* fdatasync, O_CLOEXEC */

#include "kvstore.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define KV_DIGEST_BYTES 16u /* XXH3-128, big-endian (canonical form) */
#define KV_HEX_KEY      (2 * KV_DIGEST_BYTES)
#define KV_NAME_MAX     4096u      /* manifest names: file-name-like */
#define KV_IO_BUFFER    (1u << 20) /* bytes per read or write of the file */

/* Room for a manifest key: the prefix, a name, the NUL. */
#define KV_MANIFEST_KEY_CAP (sizeof KV_MANIFEST_PREFIX + KV_NAME_MAX)

/* The manifest key of `name` (NULL: KV_DEFAULT_NAME) into buf; its length, or 0 with *why
 * set if the name is empty or too long. */
static size_t manifest_key(const char *name, char buf[KV_MANIFEST_KEY_CAP], const char **why)
{
    if (!name)
        name = KV_DEFAULT_NAME;
    size_t n = strlen(name);
    if (n == 0 || n > KV_NAME_MAX) {
        *why = "the name must be 1 to 4096 bytes";
        return 0;
    }
    snprintf(buf, KV_MANIFEST_KEY_CAP, "%s%s", KV_MANIFEST_PREFIX, name);
    return sizeof KV_MANIFEST_PREFIX - 1 + n;
}

static void hex_key(const uint8_t digest[KV_DIGEST_BYTES], char out[KV_HEX_KEY])
{
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < KV_DIGEST_BYTES; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15u];
    }
}

typedef struct importer {
    kv_store *s;
    uint8_t *manifest; /* digests so far */
    size_t manifest_len;
    size_t manifest_cap;
    kv_import_result *r;
} importer;

static kv_status put_record(importer *im, const uint8_t *rec, size_t len)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(rec, len));
    char key[KV_HEX_KEY];
    hex_key(c.digest, key);

    if (im->manifest_len + KV_DIGEST_BYTES > KV_MAX_VALUE) {
        im->r->why = "more records than one manifest can list";
        return KV_EINVAL;
    }
    if (im->manifest_len + KV_DIGEST_BYTES > im->manifest_cap) {
        size_t cap = im->manifest_cap ? im->manifest_cap * 2 : (size_t)KV_IO_BUFFER;
        uint8_t *m = realloc(im->manifest, cap);
        if (!m) {
            im->r->why = "out of memory for the manifest";
            return KV_ENOMEM;
        }
        im->manifest = m;
        im->manifest_cap = cap;
    }
    memcpy(im->manifest + im->manifest_len, c.digest, KV_DIGEST_BYTES);
    im->manifest_len += KV_DIGEST_BYTES;
    im->r->records++;

    void *old;
    size_t old_len;
    kv_status st = kv_get(im->s, key, KV_HEX_KEY, &old, &old_len);
    if (st == KV_OK) {
        bool same = old_len == len && memcmp(old, rec, len) == 0;
        free(old);
        if (!same)
            im->r->why = "two different records have the same content hash";
        return same ? KV_OK : KV_ECORRUPT;
    }
    if (st != KV_NOT_FOUND)
        return st;
    st = kv_put(im->s, key, KV_HEX_KEY, rec, len);
    if (st == KV_OK)
        im->r->stored++;
    return st;
}

kv_status kv_import(kv_store *s, const char *path, const char *name, kv_import_result *r)
{
    kv_import_result local;
    if (!r)
        r = &local;
    memset(r, 0, sizeof *r);
    if (!s || !path)
        return KV_EINVAL;
    char mkey[KV_MANIFEST_KEY_CAP];
    size_t mlen = manifest_key(name, mkey, &r->why);
    if (!mlen)
        return KV_EINVAL;
    bool from_stdin = strcmp(path, "-") == 0;
    int fd = from_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        r->why = "cannot open";
        return KV_EIO;
    }
    /* rec holds the record being gathered: at most KV_IMPORT_MAX_RECORD bytes. */
    uint8_t *buf = malloc(KV_IO_BUFFER), *rec = malloc(KV_IMPORT_MAX_RECORD);
    importer im = {s, NULL, 0, 0, r};
    kv_status st = buf && rec ? KV_OK : KV_ENOMEM;
    if (st != KV_OK)
        r->why = "out of memory";
    size_t used = 0;
    while (st == KV_OK) {
        ssize_t got = read(fd, buf, KV_IO_BUFFER);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            r->why = "cannot read";
            st = KV_EIO;
            break;
        }
        if (got == 0)
            break;
        r->bytes += (uint64_t)got;
        for (size_t i = 0; i < (size_t)got && st == KV_OK; i++) {
            rec[used++] = buf[i];
            if (buf[i] == '\n' || used == KV_IMPORT_MAX_RECORD) {
                st = put_record(&im, rec, used);
                used = 0;
            }
        }
    }
    int err = errno;
    if (st == KV_OK && used)
        st = put_record(&im, rec, used);
    if (st == KV_OK)
        st = kv_put(s, mkey, mlen, im.manifest, im.manifest_len);
    if (!from_stdin)
        close(fd);
    free(buf);
    free(rec);
    free(im.manifest);
    errno = err;
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* Export                                                                               */
/* ------------------------------------------------------------------------------------ */

/* Writes all of buf to fd; false with errno set on failure. */
static bool write_fd(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return false;
        }
        p += w;
        len -= (size_t)w;
    }
    return true;
}

static kv_status write_failed(kv_export_result *r)
{
    r->why = "cannot write";
    return KV_EIO;
}

/* Names an export tries for its temporary file before it gives up: each is new to the
 * directory (O_EXCL), and a clash means another export of the same path is running. */
#define KV_TEMP_ATTEMPTS 100u
/* Room the temporary name adds to the path: ".tmp-", a pid, "-", an attempt number. */
#define KV_TEMP_SUFFIX   48u

/* The temporary file an export writes before renaming it over `path`, in the same
 * directory so that the rename is atomic. Made as any new file is (0666 less the umask),
 * then given the mode of the file it replaces, if any: an export leaves the permissions
 * a plain `> path` would, as cf_save does. */
static int open_temp(const char *path, char **tmp)
{
    size_t n = strlen(path) + KV_TEMP_SUFFIX;
    *tmp = malloc(n);
    if (!*tmp)
        return -1;
    for (unsigned attempt = 0; attempt < KV_TEMP_ATTEMPTS; attempt++) {
        snprintf(*tmp, n, "%s.tmp-%ld-%u", path, (long)getpid(), attempt);
        int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            struct stat old;
            if (stat(path, &old) == 0 && S_ISREG(old.st_mode) &&
                fchmod(fd, old.st_mode & 07777) != 0) {
                int err = errno;
                close(fd);
                unlink(*tmp);
                errno = err;
                break;
            }
            return fd;
        }
        if (errno != EEXIST)
            break;
    }
    free(*tmp);
    *tmp = NULL;
    return -1;
}

/* Syncs the directory holding `path`, so that a rename into it survives a crash. */
static void sync_parent(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

kv_status kv_export(kv_store *s, const char *path, const char *name, kv_export_result *r)
{
    kv_export_result local;
    if (!r)
        r = &local;
    memset(r, 0, sizeof *r);
    if (!s || !path)
        return KV_EINVAL;
    char mkey[KV_MANIFEST_KEY_CAP];
    size_t mlen = manifest_key(name, mkey, &r->why);
    if (!mlen)
        return KV_EINVAL;
    void *mv;
    size_t mvlen;
    kv_status st = kv_get(s, mkey, mlen, &mv, &mvlen);
    if (st != KV_OK)
        return st;
    if (mvlen % KV_DIGEST_BYTES) {
        free(mv);
        r->why = "the manifest is not a list of 16-byte hashes";
        return KV_ECORRUPT;
    }
    bool to_stdout = strcmp(path, "-") == 0;
    char *tmp = NULL;
    int fd = to_stdout ? STDOUT_FILENO : open_temp(path, &tmp);
    uint8_t *out = malloc(KV_IO_BUFFER);
    if (fd < 0 || !out) {
        st = fd < 0 ? KV_EIO : KV_ENOMEM;
        r->why = fd < 0 ? "cannot create" : "out of memory";
        goto done;
    }
    size_t used = 0;
    const uint8_t *m = mv;
    r->records = mvlen / KV_DIGEST_BYTES;
    for (uint64_t i = 0; i < r->records && st == KV_OK; i++) {
        char key[KV_HEX_KEY];
        hex_key(m + i * KV_DIGEST_BYTES, key);
        void *v;
        size_t vlen;
        st = kv_get(s, key, KV_HEX_KEY, &v, &vlen);
        if (st == KV_NOT_FOUND) {
            r->missing++;
            st = KV_OK;
            continue;
        }
        if (st != KV_OK)
            break;
        if (used + vlen > KV_IO_BUFFER) {
            if (!write_fd(fd, out, used))
                st = write_failed(r);
            used = 0;
        }
        if (st == KV_OK && vlen > KV_IO_BUFFER) {
            if (!write_fd(fd, v, vlen))
                st = write_failed(r);
        } else if (st == KV_OK) {
            memcpy(out + used, v, vlen);
            used += vlen;
        }
        free(v);
        if (st == KV_OK) {
            r->written++;
            r->bytes += vlen;
        }
    }
    if (st == KV_OK && !write_fd(fd, out, used))
        st = write_failed(r);
    if (st == KV_OK && !to_stdout && fsync(fd) != 0)
        st = write_failed(r);
done:;
    int err = errno;
    if (!to_stdout && fd >= 0) {
        if (close(fd) != 0 && st == KV_OK) {
            st = write_failed(r);
            err = errno;
        }
        if (st == KV_OK && rename(tmp, path) != 0) {
            st = KV_EIO;
            r->why = "cannot rename the temporary file over";
            err = errno;
        }
        if (st != KV_OK)
            unlink(tmp);
        else
            sync_parent(path);
    }
    free(tmp);
    free(out);
    free(mv);
    errno = err;
    return st;
}
