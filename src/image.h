/*
 * image.h - one filter's image: the bytes of one filter of one table set (every kind but
 * the composite ones, whose parts are filters of their own), as docs/FORMAT.md specifies
 * them, and the codec that turns a kind's filters into files and back.
 *
 * A composite kind's file holds its parts' images: its codec (the window's, window.c)
 * writes its own meta section and then calls this one per part. persist.c reaches every
 * codec through cf__codec, never a kind's format directly.
 */
#ifndef CF_IMAGE_H
#define CF_IMAGE_H

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "plain.h"

/* "\x89CUCKOO\n": the high byte catches 7-bit transfers, the newline catches text-mode
 * conversions, and the letters make `head -c 8` readable. */
#define CF__MAGIC       "\211CUCKOO\n" /* \211 is 0x89 (octal: a hex escape would eat the C) */
#define CF__MAGIC_BYTES 8u

#define CF__HEADER_BYTES 64u /* fixed header; a multiple of 8 so fields stay aligned */
#define CF__SUM_BYTES    8u  /* an XXH3-64 checksum */
#define CF__ALIGN        64u /* table alignment in the file: a cache line, for mmap */
#define CF__HASH_XXH3    1u  /* hash id: XXH3-64 of the key with the seed, split as in v1 */
#define CF__FLAG_WINDOW  4u  /* header flag: a windowed file, its generations' images after it */

/* The loading state's block: cf__loading and, after it, the running file sum, whose
 * XXH3 state asks for 64-byte alignment that an allocator need not give. */
#define CF__LOADING_BLOCK (sizeof(cf__loading) + sizeof(XXH3_state_t) + 63u)

/* Header field offsets (docs/FORMAT.md, "Header"): the first 24 bytes are every file's,
 * a windowed file's own fields follow them (window.c). */
enum {
    CF__H_MAGIC = 0,
    CF__H_VERSION = 8,
    CF__H_HEADER_BYTES = 10,
    CF__H_FLAGS = 12,
    CF__H_TOTAL = 16,
    CF__H_SEED = 24,
    CF__H_CAPACITY = 32,
    CF__H_FP_BITS = 40,
    CF__H_BUCKET = 41,
    CF__H_HASH = 42,
    CF__H_STASH = 43,
    CF__H_KICKS = 44,
    CF__H_WIDEN = 46,
    CF__H_EXPANSION = 48,
    CF__H_MAX_TABLES = 52,
    CF__H_TABLES = 56,
    CF__H_SEGMENT = 60,   /* version 3: segment bits; version 2: reserved */
    CF__H_RESERVED2 = 61, /* 3 bytes, 0 */
};

/* Format versions: 2 for the any-size mapping (and every windowed file's own header), 3
 * for the segmented one (mapping.h); 1 is the retired mapping. */
#define CF__VERSION_ANY 2u
#define CF__VERSION_SEG CF_FORMAT_VERSION

static inline uint64_t cf__align_up(uint64_t x)
{
    return (x + CF__ALIGN - 1) & ~(uint64_t)(CF__ALIGN - 1);
}

static inline cf_status cf__corrupt(const char **why, const char *text)
{
    *why = text;
    return CF_ECORRUPT;
}

/* Where bytes go as a file is written: a buffer, a file, or only its checksums. One
 * routine per format emits the bytes, whatever the sink. */
typedef struct cf__sink {
    uint8_t *out;   /* buffer mode: write here */
    int fd;         /* file mode (out NULL, fd >= 0); neither: checksums only */
    uint8_t *stage; /* file mode: CF__STAGE_BYTES of buffer */
    size_t staged;
    int err;            /* errno of the first failed write, 0 if none */
    bool in_meta;       /* still in the meta section, which has its own checksum */
    XXH3_state_t meta;  /* of the meta section so far */
    XXH3_state_t whole; /* of the file so far */
} cf__sink;

/* Writes to a file go through a buffer of this size, so that a filter of many small
 * sub-filters does not cost a system call per descriptor. */
#define CF__STAGE_BYTES 16384u

CF__HIDDEN void cf__sink_init(cf__sink *k, uint8_t *out, int fd, uint8_t *stage);
CF__HIDDEN void cf__emit(cf__sink *k, const void *p, size_t n);
CF__HIDDEN void cf__emit_zeros(cf__sink *k, uint64_t n);
/* The meta section's sum, emitted: the meta section ends here. Returns it. */
CF__HIDDEN uint64_t cf__emit_meta_sum(cf__sink *k);
/* A new image in the same sink: its own meta and file sums start over. */
CF__HIDDEN void cf__sink_restart(cf__sink *k);
/* A file sink's staged bytes, written; k->err says whether every write succeeded. */
CF__HIDDEN void cf__flush(cf__sink *k);

/* How much of a file a buffer holds: all of it; only the meta section followed by the
 * file sum (the header chunk of a dump; a windowed file's header chunk is its meta section
 * alone); or its beginning, the meta section at least (a stream being read). */
typedef enum { CF__WHOLE, CF__HEADER_CHUNK, CF__PREFIX } cf__extent;

/* The checks every file's first 64 bytes get: magic, version, header length. */
CF__HIDDEN cf_status cf__parse_start(const uint8_t *b, size_t len, unsigned *version,
                                     const char **why);

/* A file format. persist.c takes a filter's from its kind (cf__kind.codec; NULL: one
 * image, cf__image_codec) and a file's from its header (cf__codec_of_bytes). */
typedef struct cf__codec {
    /* A filter's file: its length, its bytes into a sink. */
    uint64_t (*len)(const cf_filter *f);
    void (*emit)(cf__sink *k, const cf_filter *f);
    /* Whether f is still loading by chunks (and so has no file yet). */
    bool (*loading)(const cf_filter *f);
    /* The largest chunk of f's dump, and the chunk at *cursor (cf_dump_chunk). */
    size_t (*dump_max)(const cf_filter *f);
    cf_status (*dump)(const cf_filter *f, uint64_t *cursor, void *buf, size_t cap, size_t *len);
    /* The next chunk of a dump, into a filter its header chunk made (cf_load_chunk). */
    cf_status (*load)(cf_filter *f, uint64_t cursor, const uint8_t *d, size_t len);
    /* From bytes whose first 64 are the format's: every check of a whole file; a filter
     * from a whole file (validated first), or over its bytes, which stay mapped (its meta
     * checked, its body too with CF_MAP_VERIFY; the filter borrows the bytes); how many
     * bytes of a stream to read, given its first len (at least the header; 0: stop);
     * the memory a dump whose header chunk this is will hold; the filter such a header
     * chunk makes. */
    cf_status (*validate)(const uint8_t *b, size_t len, const char **why);
    cf_status (*build)(const uint8_t *b, size_t len, unsigned flags, const cf_allocator *a,
                       cf_filter **out);
    cf_status (*map)(const uint8_t *b, size_t len, unsigned flags, const cf_allocator *a,
                     cf_filter **out);
    uint64_t (*want)(const uint8_t *b, size_t len);
    cf_status (*bytes_needed)(const uint8_t *d, size_t len, size_t *bytes);
    cf_status (*load_header)(cf_filter **out, uint64_t cursor, const uint8_t *d, size_t len,
                             const cf_allocator *a);
} cf__codec;

/* One filter's image (image.c): the codec of every kind but the window. */
CF__HIDDEN extern const cf__codec cf__image_codec;

/* For a composite's codec, which holds its parts' images: an image's header (64 bytes:
 * what a part's header chunk is checked against), and whether two images' headers have
 * the same settings (all but the lengths, the stash and the sub-filter counts). */
CF__HIDDEN void cf__image_header(const cf_filter *f, uint8_t h[CF__HEADER_BYTES]);
CF__HIDDEN bool cf__image_same_settings(const uint8_t *a, const uint8_t *b);

/* Check the meta section of an image of exactly len bytes (its body too with `body`), and
 * give the settings it says: whether it grows, its layout, its seed and shape. */
CF__HIDDEN cf_status cf__image_parse(const uint8_t *b, size_t len, bool body, cf__params *p,
                                     const char **why);

/* A file written by parts (cf_segments_file_head, cf_file_commit): the bytes of f's file
 * before its first table (its meta section and the padding after it) into out, which has
 * room for CF_SEGMENTS_HEAD_MAX bytes when f has one table; their count, and the file's
 * length in *total. f's tables are not read (a filter made without them will do). */
CF__HIDDEN uint64_t cf__image_head(const cf_filter *f, uint8_t *out, uint64_t *total);

/* Every check of a whole image of len bytes but its file sum, which *sum receives (for
 * the file's last 8 bytes). */
CF__HIDDEN cf_status cf__image_unsummed(const uint8_t *b, size_t len, uint64_t *sum,
                                        const char **why);

#endif
