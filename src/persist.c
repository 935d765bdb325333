/*
 * persist.c - filters as files and buffers: serializing, validating and deserializing,
 * atomic saves, loads, read-only memory-mapped filters, and the chunked dump and load that
 * the Redis module's SCANDUMP and LOADCHUNK use. The bytes are a codec's (image.h): one
 * image for every kind (image.c) but the window, whose file holds one per generation
 * (window.c). This file never reads a format's fields beyond the first 24 bytes every
 * file shares; docs/FORMAT.md specifies them all.
 */
#define _DEFAULT_SOURCE /* realpath with PATH_MAX, DT_ types */
#include "image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CF__LOAD_FLAGS CF_CONCURRENT /* what a loader may add: not a property of the file */

/* Attempts at a fresh temporary name before cf_save gives up (each collision means
 * another process picked the same name in the same nanosecond). */
#define CF__TMP_ATTEMPTS 64u

/* ------------------------------------------------------------------------------------ */
/* Which codec: the one place that tells formats apart                                  */
/* ------------------------------------------------------------------------------------ */

/* A filter's codec: its kind's, or one image. */
static const cf__codec *cf__codec_of(const cf_filter *f)
{
    const cf__codec *c = cf__kind_of(f)->codec;
    return c ? c : &cf__image_codec;
}

/* The codec of bytes that begin a file (at least the 64-byte header; shorter ones go to
 * the image codec, whose checks say what is wrong with them). The header's flags name the
 * format: a window's, or an image, whose own checks refuse the flags it does not know
 * (CF_EVERSION: a kind of a newer writer). */
static const cf__codec *cf__codec_of_bytes(const uint8_t *b, size_t len)
{
    bool window = len >= CF__HEADER_BYTES && memcmp(b, CF__MAGIC, CF__MAGIC_BYTES) == 0 &&
                  (cf__load_le32(b + CF__H_FLAGS) & CF__FLAG_WINDOW) != 0;
    return window ? &cf__window_codec : &cf__image_codec;
}

/* ------------------------------------------------------------------------------------ */
/* Buffers                                                                              */
/* ------------------------------------------------------------------------------------ */

static size_t cf__serialized_size(const cf_filter *f)
{
    const cf__codec *c = cf__codec_of(f);
    if (c->loading(f))
        return 0;
    uint64_t n = c->len(f);
    return n > SIZE_MAX ? 0 : (size_t)n;
}

size_t cf_serialized_size(const cf_filter *f)
{
    if (!f)
        return 0;
    cf__hold(f);
    size_t n = cf__serialized_size(f);
    cf__unhold(f);
    return n;
}

static cf_status cf__serialize(const cf_filter *f, void *buf, size_t cap, size_t *written)
{
    size_t n = buf ? cf__serialized_size(f) : 0;
    if (n == 0 || cap < n)
        return CF_EINVAL;
    cf__sink k;
    cf__sink_init(&k, buf, -1, NULL);
    cf__codec_of(f)->emit(&k, f);
    if (written)
        *written = n;
    return CF_OK;
}

cf_status cf__copy_plain(const cf_filter *f, cf_filter **out)
{
    size_t n = cf__serialized_size(f);
    uint8_t *buf = n ? cf__malloc(f, n) : NULL;
    if (!buf)
        return n ? CF_ENOMEM : CF_EINVAL;
    cf_status st = cf__serialize(f, buf, n, NULL);
    if (st == CF_OK)
        st = cf_deserialize(buf, n, (f->bits & CF__B_OWN_ALLOC) ? cf__alloc_of(f) : NULL, out);
    cf__mfree(f, buf);
    return st;
}

cf_status cf_serialize(const cf_filter *f, void *buf, size_t cap, size_t *written)
{
    if (!f)
        return CF_EINVAL;
    cf__hold(f);
    cf_status st = cf__serialize(f, buf, cap, written);
    cf__unhold(f);
    return st;
}

/* Every check of a whole file. */
static cf_status cf__validate(const uint8_t *b, size_t len, const char **why)
{
    return cf__codec_of_bytes(b, len)->validate(b, len, why);
}

cf_status cf_validate(const void *buf, size_t len, const char **reason)
{
    const char *why = NULL;
    cf_status st = !buf && len ? CF_EINVAL : cf__validate(buf, len, &why);
    if (st == CF_EINVAL)
        why = "invalid argument";
    if (reason)
        *reason = why;
    return st;
}

/* A filter built from a whole file's bytes, validated completely first; flags as
 * cf_load_flags. */
static cf_status cf__build(const uint8_t *b, size_t len, unsigned flags, const cf_allocator *a,
                           cf_filter **out)
{
    const char *why;
    const cf__codec *c = cf__codec_of_bytes(b, len);
    cf_status st = c->validate(b, len, &why);
    return st == CF_OK ? c->build(b, len, flags, a, out) : st;
}

cf_status cf_deserialize(const void *buf, size_t len, const cf_allocator *allocator,
                         cf_filter **out)
{
    return cf_deserialize_flags(buf, len, 0, allocator, out);
}

cf_status cf_deserialize_flags(const void *buf, size_t len, unsigned flags,
                               const cf_allocator *allocator, cf_filter **out)
{
    if (!out || (!buf && len) || (flags & ~CF__LOAD_FLAGS) != 0)
        return CF_EINVAL;
    return cf__build(buf, len, flags, allocator, out);
}

/* ------------------------------------------------------------------------------------ */
/* Files                                                                                */
/* ------------------------------------------------------------------------------------ */

/* A whole file in memory: mapped when it is a regular file, read otherwise (a pipe). */
typedef struct cf__view {
    const uint8_t *data;
    size_t len;
    void *map;      /* the mapping to release, or NULL */
    uint8_t *owned; /* the buffer to release, or NULL */
    const cf_allocator *alloc;
} cf__view;

static void cf__view_release(cf__view *v)
{
    if (v->map)
        cf__unmap(v->map, v->len);
    if (v->owned)
        v->alloc->free(v->alloc->ctx, v->owned);
}

/* How many bytes of a stream to read, given its first len bytes: enough for the header,
 * then what its codec asks for. 0: stop now, these bytes already cannot begin a filter
 * (validation then says why). */
static uint64_t cf__stream_want(const uint8_t *b, size_t len)
{
    size_t magic = len < CF__MAGIC_BYTES ? len : CF__MAGIC_BYTES;
    if (memcmp(b, CF__MAGIC, magic) != 0)
        return 0;
    if (len < CF__HEADER_BYTES)
        return CF__HEADER_BYTES;
    return cf__codec_of_bytes(b, len)->want(b, len);
}

/* Read a stream (a pipe, a device) into a buffer, checking as it comes: the header first,
 * refused at once if it cannot be one (so /dev/zero costs 8 bytes), then no more than the
 * length the checked meta section gives. The buffer doubles as data arrives, so memory
 * follows what was sent, up to the size of the filter the header describes. */
static cf_status cf__slurp(int fd, cf__view *v)
{
    size_t cap = 0, len = 0;
    uint8_t *buf = NULL;
    for (;;) {
        uint64_t want = len ? cf__stream_want(buf, len) : CF__HEADER_BYTES;
        if (want <= len)
            break;
        if (want > SIZE_MAX) {
            errno = EFBIG;
            if (buf)
                v->alloc->free(v->alloc->ctx, buf);
            return CF_EIO;
        }
        if (len == cap) {
            size_t bigger = cap ? cap * 2 : CF__STAGE_BYTES;
            if (bigger <= cap || bigger > want)
                bigger = (size_t)want;
            uint8_t *nb = v->alloc->alloc(v->alloc->ctx, bigger);
            if (!nb) {
                if (buf)
                    v->alloc->free(v->alloc->ctx, buf);
                return CF_ENOMEM;
            }
            if (buf) {
                memcpy(nb, buf, len);
                v->alloc->free(v->alloc->ctx, buf);
            }
            buf = nb;
            cap = bigger;
        }
        size_t room = cap - len < want - len ? cap - len : (size_t)(want - len);
        ssize_t r = read(fd, buf + len, room);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            v->alloc->free(v->alloc->ctx, buf);
            errno = e;
            return CF_EIO;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    v->data = v->owned = buf;
    v->len = len;
    return CF_OK;
}

/* map_only: refuse what cannot be mapped (ENODEV) rather than read it. */
static cf_status cf__view_open(const char *path, const cf_allocator *a, bool map_only, cf__view *v)
{
    struct stat st;
    memset(v, 0, sizeof *v);
    v->alloc = a ? a : &cf__default_allocator;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return CF_EIO;
    cf_status status = CF_OK;
    if (fstat(fd, &st) != 0) {
        status = CF_EIO;
    } else if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        status = CF_EIO;
    } else if (!S_ISREG(st.st_mode)) {
        if (map_only) {
            errno = ENODEV;
            status = CF_EIO;
        } else {
            status = cf__slurp(fd, v);
        }
    } else if ((uint64_t)st.st_size > SIZE_MAX) {
        errno = EFBIG;
        status = CF_EIO;
    } else if (st.st_size > 0) {
        void *map = cf__map_file(fd, (size_t)st.st_size);
        if (!map) {
            status = CF_EIO;
        } else {
            v->map = map;
            v->data = map;
            v->len = (size_t)st.st_size;
        }
    }
    int e = errno;
    close(fd);
    errno = e;
    return status;
}

cf_status cf_validate_file(const char *path, const char **reason)
{
    cf__view v;
    const char *why = NULL;
    if (!path)
        return CF_EINVAL;
    cf_status st = cf__view_open(path, NULL, false, &v);
    if (st == CF_OK) {
        st = cf__validate(v.data, v.len, &why);
        cf__view_release(&v);
    }
    if (reason)
        *reason = why;
    return st;
}

cf_status cf_load(const char *path, const cf_allocator *allocator, cf_filter **out)
{
    return cf_load_flags(path, 0, allocator, out);
}

cf_status cf_load_flags(const char *path, unsigned flags, const cf_allocator *allocator,
                        cf_filter **out)
{
    cf__view v;
    if (!path || !out || !cf__allocator_ok(allocator) || (flags & ~CF__LOAD_FLAGS) != 0)
        return CF_EINVAL;
    cf_status st = cf__view_open(path, allocator, false, &v);
    if (st != CF_OK)
        return st;
    st = cf__build(v.data, v.len, flags, allocator, out);
    cf__view_release(&v);
    return st;
}

cf_status cf_open_mapped(const char *path, unsigned flags, const cf_allocator *allocator,
                         cf_filter **out)
{
    cf__view v;
    if (!path || !out || (flags & ~CF_MAP_VERIFY) != 0 || !cf__allocator_ok(allocator))
        return CF_EINVAL;
    cf_status st = cf__view_open(path, allocator, true, &v);
    if (st != CF_OK)
        return st;
    cf_filter *f = NULL;
    st = cf__codec_of_bytes(v.data, v.len)->map(v.data, v.len, flags, allocator, &f);
    cf__more *more = st == CF_OK ? cf__more_of(f) : NULL;
    if (st == CF_OK && !more) {
        cf__release(f);
        st = CF_ENOMEM;
    }
    if (st != CF_OK) {
        cf__view_release(&v);
        return st;
    }
    more->map = v.map;
    more->map_len = v.len;
    f->bits |= CF__B_READ_ONLY;
    *out = f;
    return CF_OK;
}

/* The directory holding `path`, written into dir (at least strlen(path) + 2 bytes). */
static void cf__dirname(const char *path, char *dir)
{
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (n == 0)
        memcpy(dir, ".", 2);
    else {
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
}

/* The longest file name Linux file systems take (NAME_MAX). */
#define CF__NAME_MAX 255u

/* What the temporary name adds to the file's name: ".tmp-", a pid of up to 10 digits,
 * "-" and 16 hex digits. */
#define CF__TMP_EXTRA 32u

/* Bytes the temporary name may need beyond the path: CF__TMP_EXTRA and the NUL. */
#define CF__TMP_SUFFIX (CF__TMP_EXTRA + 1u)

/* The temporary names of `path` begin with its file name, cut short if the name and the
 * suffix would exceed NAME_MAX (so that any name that can be saved to has temporary
 * names too): where that file name starts in path, and how much of it they use. */
static void cf__temp_base(const char *path, size_t *dir_len, size_t *base_len)
{
    const char *slash = strrchr(path, '/');
    *dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    *base_len = strlen(path) - *dir_len;
    if (*base_len > CF__NAME_MAX - CF__TMP_EXTRA)
        *base_len = CF__NAME_MAX - CF__TMP_EXTRA;
}

/* The pid in a temporary name of ours, `name` being what follows the base: ".tmp-",
 * decimal digits, "-" and 16 hex digits. 0 if the name is not of that form. */
static long cf__temp_pid(const char *name)
{
    static const char dot[] = ".tmp-";
    if (strncmp(name, dot, sizeof dot - 1) != 0)
        return 0;
    const char *p = name + sizeof dot - 1;
    long pid = 0;
    for (; *p >= '0' && *p <= '9' && pid < INT_MAX / 10; p++)
        pid = pid * 10 + (*p - '0');
    if (*p++ != '-')
        return 0;
    for (unsigned i = 0; i < 16; i++, p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return *p == '\0' ? pid : 0;
}

/* Remove the temporary files of `path` that saves left behind when their process died
 * (killed mid-write): those whose pid no longer runs. A live writer's are left alone, as
 * is anything that is not a regular file of exactly our naming. Best effort: a failure
 * here never fails the save. */
static void cf__remove_stale_temps(const char *path, char *dir)
{
    size_t dir_len, base_len;
    cf__temp_base(path, &dir_len, &base_len);
    cf__dirname(path, dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    const char *base = path + dir_len;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, base, base_len) != 0)
            continue;
        long pid = cf__temp_pid(e->d_name + base_len);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* Create a new temporary file next to `path`, named into tmp; its descriptor or -1. */
static int cf__create_temp(const char *path, char *tmp, size_t tmp_size)
{
    size_t dir_len, base_len;
    cf__temp_base(path, &dir_len, &base_len);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t nonce = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
    for (unsigned attempt = 0; attempt < CF__TMP_ATTEMPTS; attempt++) {
        nonce = nonce * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        snprintf(tmp, tmp_size, "%.*s.tmp-%ld-%016llx", (int)(dir_len + base_len), path,
                 (long)getpid(), (unsigned long long)nonce);
        /* 0666: the umask applies, as for any new file. */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

static cf_status cf__save(const cf_filter *f, const char *path);

cf_status cf_save(const cf_filter *f, const char *path)
{
    if (!f || !path || !*path || cf__codec_of(f)->loading(f))
        return CF_EINVAL;
    cf__hold(f);
    cf_status st = cf__save(f, path);
    cf__unhold(f);
    return st;
}

/* What a save to *path replaces: a symbolic link is followed (*path then points at
 * `resolved`, PATH_MAX bytes) and only a regular file is ever replaced (never a device, a
 * FIFO or a socket: CF_EINVAL). *exists and *old say what is there; an errno value in
 * *err, or 0. */
static cf_status cf__target(const char **path, char *resolved, struct stat *old, bool *exists,
                            int *err)
{
    *exists = false;
    *err = 0;
    if (lstat(*path, old) != 0) {
        if (errno != ENOENT)
            *err = errno;
    } else {
        *exists = true;
        if (S_ISLNK(old->st_mode)) {
            if (realpath(*path, resolved) && stat(resolved, old) == 0)
                *path = resolved;
            else
                *err = errno;
        }
        if (!*err && S_ISDIR(old->st_mode))
            *err = EISDIR;
        else if (!*err && !S_ISREG(old->st_mode))
            return CF_EINVAL;
    }
    if (!*err && strlen(*path) >= PATH_MAX)
        *err = ENAMETOOLONG;
    return CF_OK;
}

/* The new file fd replacing `old`: keep its owner and group where this process may (root
 * may; an ordinary user can give the group of a group of its own), then its permission
 * bits (a 0640 file stays 0640), set last because a change of owner clears the set-id
 * bits. An errno value, or 0. */
static int cf__adopt(int fd, const struct stat *old)
{
    if (fchown(fd, old->st_uid, old->st_gid) != 0 && fchown(fd, (uid_t)-1, old->st_gid) != 0 &&
        errno != EPERM)
        return errno;
    return fchmod(fd, old->st_mode & 07777) != 0 ? errno : 0;
}

/* fd, the temporary file tmp, made durable and closed, then renamed over path (*renamed
 * says whether it was), and the directory synced; `dir` (which may be tmp's own buffer)
 * receives path's directory name. An errno value, or 0. */
static int cf__replace(int fd, const char *tmp, const char *path, char *dir, bool *renamed)
{
    *renamed = false;
    int err = fsync(fd) != 0 ? errno : 0;
    if (close(fd) != 0 && !err)
        err = errno;
    if (err)
        return err;
    if (rename(tmp, path) != 0)
        return errno;
    *renamed = true;
    /* The rename is durable only once the directory is synced. Some file systems cannot
     * sync a directory (EINVAL); there is nothing more to do on those. */
    cf__dirname(path, dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || (fsync(dfd) != 0 && errno != EINVAL))
        err = errno;
    if (dfd >= 0)
        close(dfd);
    return err;
}

static cf_status cf__save(const cf_filter *f, const char *path)
{
    /* One block: the write buffer, the resolved path, then the temporary name (and, after
     * the rename, the directory's name). */
    const size_t block_bytes = CF__STAGE_BYTES + PATH_MAX + PATH_MAX + CF__TMP_SUFFIX;
    uint8_t *block = cf__malloc(f, block_bytes);
    if (!block)
        return CF_ENOMEM;
    char *resolved = (char *)(block + CF__STAGE_BYTES);
    char *tmp = resolved + PATH_MAX;
    int err;
    struct stat old;
    bool exists;
    cf_status status = cf__target(&path, resolved, &old, &exists, &err);
    if (!err && status == CF_OK) {
        cf__remove_stale_temps(path, tmp);
        int fd = cf__create_temp(path, tmp, strlen(path) + CF__TMP_SUFFIX);
        bool renamed = false;
        if (fd < 0)
            err = errno;
        if (fd >= 0 && exists)
            err = cf__adopt(fd, &old);
        if (fd >= 0 && !err) {
            cf__sink k;
            cf__sink_init(&k, NULL, fd, block);
            cf__codec_of(f)->emit(&k, f);
            cf__flush(&k);
            err = k.err;
        }
        if (fd >= 0 && !err)
            err = cf__replace(fd, tmp, path, tmp, &renamed);
        else if (fd >= 0)
            close(fd);
        if (fd >= 0 && !renamed)
            unlink(tmp);
    }
    cf__mfree(f, block);
    if (status != CF_OK)
        return status;
    errno = err;
    return err ? CF_EIO : CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Files written by parts                                                               */
/* ------------------------------------------------------------------------------------ */

_Static_assert(CF_FILE_TEMP_EXTRA == CF__TMP_SUFFIX, "the header's promise is the names' room");

/* Write p[0 .. n) at offset `at` of fd. An errno value, or 0. */
static int cf__pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t at)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        p += w;
        at += (uint64_t)w;
        n -= (size_t)w;
    }
    return 0;
}

cf_status cf_file_begin(const char *path, const void *head, size_t len, uint64_t total, char *tmp,
                        size_t tmp_size)
{
    if (!path || !*path || !head || !tmp || len > total || total > (uint64_t)INT64_MAX ||
        tmp_size < strlen(path) + CF__TMP_SUFFIX)
        return CF_EINVAL;
    /* Next to the file a symbolic link names, where cf_file_commit renames it to. */
    char resolved[PATH_MAX];
    struct stat old;
    bool exists;
    int err;
    cf_status st = cf__target(&path, resolved, &old, &exists, &err);
    if (st != CF_OK || (!err && strlen(path) + CF__TMP_SUFFIX > tmp_size))
        return CF_EINVAL;
    int fd = -1;
    if (!err) {
        cf__remove_stale_temps(path, tmp);
        fd = cf__create_temp(path, tmp, tmp_size);
        if (fd < 0)
            err = errno;
    }
    if (fd >= 0) {
        err = cf__pwrite_all(fd, head, len, 0);
        if (!err && ftruncate(fd, (off_t)total) != 0)
            err = errno;
        if (close(fd) != 0 && !err)
            err = errno;
        if (err)
            unlink(tmp);
    }
    errno = err;
    return err ? CF_EIO : CF_OK;
}

cf_status cf_file_commit(const char *tmp, const char *path, const char **reason)
{
    const char *why = NULL;
    if (reason)
        *reason = NULL;
    if (!tmp || !path || !*path)
        return CF_EINVAL;
    char resolved[PATH_MAX], dir[PATH_MAX];
    struct stat old, st_tmp;
    bool exists, renamed = false;
    int err;
    cf_status st = cf__target(&path, resolved, &old, &exists, &err);
    if (st != CF_OK || err) {
        errno = err;
        return st != CF_OK ? st : CF_EIO;
    }
    int fd = open(tmp, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return CF_EIO;
    if (fstat(fd, &st_tmp) != 0)
        err = errno;
    else if (!S_ISREG(st_tmp.st_mode))
        st = CF_EINVAL;
    else if ((uint64_t)st_tmp.st_size > SIZE_MAX)
        err = EFBIG;
    else if (st_tmp.st_size < CF__HEADER_BYTES)
        st = cf__corrupt(&why, "truncated: shorter than a header");
    if (!err && st == CF_OK) {
        size_t len = (size_t)st_tmp.st_size;
        uint8_t *map = cf__map_file(fd, len);
        uint64_t sum = 0;
        if (!map)
            err = errno;
        else {
            st = cf__image_unsummed(map, len, &sum, &why);
            cf__unmap(map, len);
        }
        uint8_t b[CF__SUM_BYTES];
        cf__store_le64(b, sum);
        if (!err && st == CF_OK)
            err = cf__pwrite_all(fd, b, sizeof b, len - CF__SUM_BYTES);
    }
    if (!err && st == CF_OK && exists)
        err = cf__adopt(fd, &old);
    if (!err && st == CF_OK)
        err = cf__replace(fd, tmp, path, dir, &renamed);
    else
        close(fd);
    if (reason)
        *reason = why;
    if (st != CF_OK)
        return st;
    errno = err;
    return err ? CF_EIO : CF_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Chunks                                                                               */
/* ------------------------------------------------------------------------------------ */

size_t cf_dump_chunk_max(const cf_filter *f)
{
    if (!f)
        return 0;
    cf__hold(f);
    size_t n = cf__codec_of(f)->dump_max(f);
    cf__unhold(f);
    return n;
}

cf_status cf_dump_chunk(const cf_filter *f, uint64_t *cursor, void *buf, size_t cap, size_t *len)
{
    if (!f || !cursor || !len)
        return CF_EINVAL;
    cf__hold(f);
    cf_status st = cf__codec_of(f)->dump(f, cursor, buf, cap, len);
    cf__unhold(f);
    return st;
}

cf_status cf_chunk_bytes_needed(const void *chunk, size_t len, size_t *bytes)
{
    if (!bytes || (!chunk && len))
        return CF_EINVAL;
    return cf__codec_of_bytes(chunk, len)->bytes_needed(chunk, len, bytes);
}

cf_status cf_load_chunk(cf_filter **fp, uint64_t cursor, const void *data, size_t len,
                        const cf_allocator *allocator)
{
    if (!fp || (!data && len))
        return CF_EINVAL;
    if (!*fp)
        return cf__codec_of_bytes(data, len)->load_header(fp, cursor, data, len, allocator);
    return cf__codec_of(*fp)->load(*fp, cursor, data, len);
}

bool cf_is_loading(const cf_filter *f)
{
    return f && cf__codec_of(f)->loading(f);
}

/* ------------------------------------------------------------------------------------ */
/* The Redis module's prefix (docs/FORMAT.md, "In the Redis module")                    */
/* ------------------------------------------------------------------------------------ */

#define CF__MODULE_FIELDS      16u       /* the two fields the check covers */
#define CF__MODULE_DELETES_MAX INT64_MAX /* the module replies with it as a signed integer */

static bool cf__module_fields_ok(uint64_t deletes, uint64_t max_iterations)
{
    return deletes <= CF__MODULE_DELETES_MAX && max_iterations >= 1 &&
           max_iterations <= CF_MAX_MAX_KICKS;
}

uint64_t cf_module_fields_check(const cf_filter *f, uint64_t deletes, uint64_t max_iterations)
{
    uint8_t b[CF__MODULE_FIELDS];
    cf__store_le64(b, deletes);
    cf__store_le64(b + 8, max_iterations);
    return f ? cf__hash(f, b, sizeof b) : 0;
}

cf_status cf_module_prefix_write(const cf_filter *f, uint64_t deletes, uint64_t max_iterations,
                                 void *out)
{
    if (!f || !out || !cf__module_fields_ok(deletes, max_iterations))
        return CF_EINVAL;
    uint8_t *p = out;
    cf__store_le64(p, deletes);
    cf__store_le64(p + 8, max_iterations);
    cf__store_le64(p + CF__MODULE_FIELDS, cf_module_fields_check(f, deletes, max_iterations));
    return CF_OK;
}

cf_status cf_module_prefix_read(const void *data, size_t len, uint64_t *deletes,
                                uint64_t *max_iterations, uint64_t *check)
{
    if ((!data && len) || !deletes || !max_iterations || !check)
        return CF_EINVAL;
    if (len < CF_MODULE_PREFIX_BYTES)
        return CF_ECORRUPT;
    const uint8_t *p = data;
    uint64_t d = cf__load_le64(p), m = cf__load_le64(p + 8);
    if (!cf__module_fields_ok(d, m))
        return CF_ECORRUPT;
    *deletes = d;
    *max_iterations = m;
    *check = cf__load_le64(p + CF__MODULE_FIELDS);
    return CF_OK;
}
