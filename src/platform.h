/*
 * platform.h - what the library asks of the operating system besides files (platform.c):
 * memory, and read-only mappings of filter files.
 */
#ifndef CF_PLATFORM_H
#define CF_PLATFORM_H

#include "bits.h"
#include "cuckoofilter.h"

/* malloc and free, with huge pages asked for on large blocks: for filters made without
 * an allocator (platform.c). */
CF__HIDDEN extern const cf_allocator cf__default_allocator;

/* Map `len` > 0 bytes of the open file fd, read-only and shared; NULL on failure (errno
 * says why). */
CF__HIDDEN void *cf__map_file(int fd, size_t len);

/* Release a mapping made by cf__map_file. */
CF__HIDDEN void cf__unmap(void *map, size_t len);

#endif /* CF_PLATFORM_H */
