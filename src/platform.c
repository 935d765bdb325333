/*
 * platform.c - what the library asks of the operating system besides files: memory (with
 * the huge-page hint), random bytes for seeds, and read-only mappings of filter files.
 * The file format's reads and atomic saves are persist.c's.
 */
#define _DEFAULT_SOURCE /* madvise and MADV_HUGEPAGE */
#include "platform.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/random.h>
#endif

/* Transparent huge pages: a table spread over 4 KiB pages costs a TLB miss, and in a VM a
 * two-level page walk, on nearly every lookup once it outgrows the TLB's reach (a few
 * MiB); 2 MiB pages remove most of them (build/cf-bench-speed at 50M keys; docs/PERFORMANCE.md,
 * "Tuned constants"). The
 * default allocator asks for them on blocks of at least this size, before they are first
 * touched. It is a hint: kernels without THP, or set to "never", ignore it. */
#define CF__HUGE_PAGE     ((size_t)2 << 20)
#define CF__HUGE_MIN_SIZE ((size_t)4 << 20)

static void *cf__sys_malloc(void *ctx, size_t size)
{
    (void)ctx;
    void *p = malloc(size);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p && size >= CF__HUGE_MIN_SIZE) {
        uintptr_t start = ((uintptr_t)p + CF__HUGE_PAGE - 1) & ~(uintptr_t)(CF__HUGE_PAGE - 1);
        uintptr_t end = ((uintptr_t)p + size) & ~(uintptr_t)(CF__HUGE_PAGE - 1);
        if (end > start)
            (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
    }
#endif
    return p;
}

static void cf__libc_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

const cf_allocator cf__default_allocator = {cf__sys_malloc, cf__libc_free, NULL};

/* Fill *seed with bytes from the system's random source (getrandom, else /dev/urandom),
 * never 0 (0 means "draw one"). CF_EIO if the system has none to give. */
cf_status cf_random_seed(uint64_t *seed)
{
    if (!seed)
        return CF_EINVAL;
    uint64_t x = 0;
    while (x == 0) {
        uint8_t *p = (uint8_t *)&x;
        size_t got = 0;
#if defined(__linux__)
        while (got < sizeof x) {
            ssize_t r = getrandom(p + got, sizeof x - got, 0);
            if (r < 0 && errno != EINTR)
                break;
            got += r > 0 ? (size_t)r : 0;
        }
#endif
        if (got < sizeof x) {
            int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                return CF_EIO;
            for (got = 0; got < sizeof x;) {
                ssize_t r = read(fd, p + got, sizeof x - got);
                if (r <= 0 && !(r < 0 && errno == EINTR))
                    break;
                got += r > 0 ? (size_t)r : 0;
            }
            close(fd);
            if (got < sizeof x)
                return CF_EIO;
        }
    }
    *seed = x;
    return CF_OK;
}

void *cf__map_file(int fd, size_t len)
{
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    return map == MAP_FAILED ? NULL : map;
}

void cf__unmap(void *map, size_t len)
{
    munmap(map, len);
}
