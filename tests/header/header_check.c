/*
 * header_check.c - the public header, compiled on its own.
 *
 * Built as C99 and C11, and as C++11 and C++17 through header_check.cpp, always with
 * -pedantic -Wall -Wextra -Werror (see tests/CMakeLists.txt). It includes nothing but
 * <cuckoofilter.h>, so the header must bring in everything its declarations use.
 *
 * Every function is stored in a pointer of its exact documented type, so a changed
 * signature fails to compile; the table has external linkage, so every function is
 * referenced at link time against the shared library, and one that is not exported (or
 * lacks C linkage under C++) fails to link. main() then makes a few calls through the
 * table. The exit status says which check failed: no stdio, on purpose.
 */
#include <cuckoofilter.h>

#if !defined(CF_VERSION_MAJOR) || !defined(CF_VERSION_MINOR) || !defined(CF_VERSION_PATCH) ||      \
    !defined(CF_VERSION_NUMBER)
#error "cuckoofilter.h: a CF_VERSION_* macro is missing"
#endif
#if CF_VERSION_NUMBER != CF_VERSION_MAJOR * 10000 + CF_VERSION_MINOR * 100 + CF_VERSION_PATCH
#error "cuckoofilter.h: CF_VERSION_NUMBER disagrees with its parts"
#endif
#if !defined(CF_API)
#error "cuckoofilter.h: CF_API is missing"
#endif
#if !(CF_MIN_FINGERPRINT_BITS <= CF_DEFAULT_FINGERPRINT_BITS &&                                    \
      CF_DEFAULT_FINGERPRINT_BITS <= CF_MAX_FINGERPRINT_BITS)
#error "cuckoofilter.h: fingerprint limits out of order"
#endif
#if !(CF_DEFAULT_BUCKET_SIZE <= CF_MAX_BUCKET_SIZE && CF_DEFAULT_MAX_KICKS <= CF_MAX_MAX_KICKS &&  \
      CF_DEFAULT_MAX_SUB_FILTERS <= CF_MAX_SUB_FILTERS)
#error "cuckoofilter.h: a default exceeds its limit"
#endif

struct cf_header_check_api {
    cf_status (*new_filter)(const cf_config *, cf_filter **);
    cf_status (*bytes_needed)(const cf_config *, size_t *);
    void (*free_filter)(cf_filter *);
    cf_status (*add)(cf_filter *, const void *, size_t);
    cf_status (*add_unique)(cf_filter *, const void *, size_t);
    bool (*contains)(const cf_filter *, const void *, size_t);
    cf_status (*delete_key)(cf_filter *, const void *, size_t);
    uint64_t (*count)(const cf_filter *, const void *, size_t);
    void (*clear)(cf_filter *);
    cf_status (*compact)(cf_filter *);
    cf_status (*config_check)(const cf_config *, const char **);
    cf_status (*new_like)(const cf_filter *, const cf_allocator *, cf_filter **);
    cf_status (*merge)(cf_filter *, const cf_filter *, const char **);
    cf_status (*merge_threads)(cf_filter *, const cf_filter *, unsigned, const char **);
    cf_status (*merge_check)(const cf_filter *, const cf_filter *, const char **);
    void (*get_stats)(const cf_filter *, cf_stats *);
    const char *(*describe)(cf_status);
    const char *(*version)(void);
    uint64_t (*hash)(const cf_filter *, const void *, size_t);
    cf_status (*add_hash)(cf_filter *, uint64_t);
    bool (*contains_hash)(const cf_filter *, uint64_t);
    cf_status (*delete_hash)(cf_filter *, uint64_t);
    uint64_t (*count_hash)(const cf_filter *, uint64_t);
    void (*contains_many)(const cf_filter *, const uint64_t *, size_t, bool *);
    void (*get_config)(const cf_filter *, cf_config *);
    size_t (*serialized_size)(const cf_filter *);
    cf_status (*serialize)(const cf_filter *, void *, size_t, size_t *);
    cf_status (*deserialize)(const void *, size_t, const cf_allocator *, cf_filter **);
    cf_status (*validate)(const void *, size_t, const char **);
    cf_status (*save)(const cf_filter *, const char *);
    cf_status (*load)(const char *, const cf_allocator *, cf_filter **);
    cf_status (*validate_file)(const char *, const char **);
    cf_status (*open_mapped)(const char *, unsigned, const cf_allocator *, cf_filter **);
    size_t (*dump_chunk_max)(const cf_filter *);
    cf_status (*dump_chunk)(const cf_filter *, uint64_t *, void *, size_t, size_t *);
    cf_status (*load_chunk)(cf_filter **, uint64_t, const void *, size_t, const cf_allocator *);
    bool (*is_loading)(const cf_filter *);
    double (*expected_fpr)(unsigned, unsigned, double);
    void (*contains_keys)(const cf_filter *, const void *const *, const size_t *, size_t, bool *);
    size_t (*add_many)(cf_filter *, const uint64_t *, size_t, unsigned, cf_status *);
    uint64_t (*hash_seeded)(uint64_t, const void *, size_t);
    cf_status (*place_hash)(uint64_t, uint64_t, unsigned, cf_place *);
    uint64_t (*alt_bucket)(uint64_t, uint32_t, uint64_t);
    cf_status (*chunk_bytes_needed)(const void *, size_t, size_t *);
    const char *(*cpu_variant)(void);
    cf_status (*load_flags)(const char *, unsigned, const cf_allocator *, cf_filter **);
    cf_status (*deserialize_flags)(const void *, size_t, unsigned, const cf_allocator *,
                                   cf_filter **);
    uint64_t (*table_size)(const cf_filter *, unsigned);
    cf_status (*table_read)(const cf_filter *, unsigned, uint64_t, void *, size_t);
    cf_status (*table_write)(cf_filter *, unsigned, uint64_t, const void *, size_t);
    cf_status (*append_sub_filter)(cf_filter *);
    cf_status (*advance)(cf_filter *);
    cf_status (*advance_to)(cf_filter *, uint64_t);
    uint64_t (*generation_at)(const cf_filter *, uint64_t);
    cf_status (*get_generation_stats)(const cf_filter *, unsigned, cf_stats *);
    bool (*contains_at)(const cf_filter *, const void *, size_t, uint64_t);
    uint64_t (*count_at)(const cf_filter *, const void *, size_t, uint64_t);
    void (*contains_keys_at)(const cf_filter *, const void *const *, const size_t *, size_t,
                             uint64_t, bool *);
    cf_status (*get_mapping)(const cf_filter *, cf_mapping *);
    cf_status (*place_in)(const cf_mapping *, uint64_t, cf_place *);
    uint64_t (*alt_in)(const cf_mapping *, uint64_t, uint32_t);
    cf_status (*sort_hashes)(uint64_t *, size_t, unsigned, unsigned, size_t *);
    cf_status (*build_hashes)(cf_filter *, const uint64_t *, size_t, unsigned, cf_build_report *);
    cf_status (*config_mapping)(const cf_config *, cf_mapping *);
    cf_status (*segments_size)(const cf_config *, uint64_t, uint64_t, size_t *);
    cf_status (*build_segments)(const cf_config *, uint64_t, uint64_t, const uint64_t *, size_t,
                                void *, size_t, cf_segments_report *);
    cf_status (*put_segments)(cf_filter *, uint64_t, uint64_t, const void *, size_t);
    cf_status (*stash_unplaced)(cf_filter *, const uint64_t *, size_t, uint64_t *);
    cf_status (*get_segments)(const cf_filter *, uint64_t, uint64_t, void *, size_t);
    cf_status (*stash_hashes)(const cf_filter *, uint64_t *, size_t, size_t *);
    cf_status (*merge_segments)(const cf_config *, uint64_t, uint64_t, void *, size_t, const void *,
                                const uint64_t *, size_t, cf_segments_report *);
    cf_status (*segments_file_head)(const cf_config *, uint64_t, const uint64_t *, size_t, void *,
                                    size_t, cf_segments_file *);
    cf_status (*file_begin)(const char *, const void *, size_t, uint64_t, char *, size_t);
    cf_status (*file_commit)(const char *, const char *, const char **);
};

extern const struct cf_header_check_api cf_header_check_table;
const struct cf_header_check_api cf_header_check_table = {
    cf_new,
    cf_bytes_needed,
    cf_free,
    cf_add,
    cf_add_unique,
    cf_contains,
    cf_delete,
    cf_count,
    cf_clear,
    cf_compact,
    cf_config_check,
    cf_new_like,
    cf_merge,
    cf_merge_threads,
    cf_merge_check,
    cf_get_stats,
    cf_strerror,
    cf_version,
    cf_hash,
    cf_add_hash,
    cf_contains_hash,
    cf_delete_hash,
    cf_count_hash,
    cf_contains_many,
    cf_get_config,
    cf_serialized_size,
    cf_serialize,
    cf_deserialize,
    cf_validate,
    cf_save,
    cf_load,
    cf_validate_file,
    cf_open_mapped,
    cf_dump_chunk_max,
    cf_dump_chunk,
    cf_load_chunk,
    cf_is_loading,
    cf_expected_fpr,
    cf_contains_keys,
    cf_add_many,
    cf_hash_seeded,
    cf_place_hash,
    cf_alt_bucket,
    cf_chunk_bytes_needed,
    cf_cpu_variant,
    cf_load_flags,
    cf_deserialize_flags,
    cf_table_size,
    cf_table_read,
    cf_table_write,
    cf_append_sub_filter,
    cf_advance,
    cf_advance_to,
    cf_generation_at,
    cf_get_generation_stats,
    cf_contains_at,
    cf_count_at,
    cf_contains_keys_at,
    cf_get_mapping,
    cf_place_in,
    cf_alt_in,
    cf_sort_hashes,
    cf_build_hashes,
    cf_config_mapping,
    cf_segments_size,
    cf_build_segments,
    cf_put_segments,
    cf_stash_unplaced,
    cf_get_segments,
    cf_stash_hashes,
    cf_merge_segments,
    cf_segments_file_head,
    cf_file_begin,
    cf_file_commit,
};

/* Zero-initialised by static storage, then fields are set by name: this works in C and
 * C++ alike and keeps working when the header appends fields to a struct. */
static cf_config zero_config;
static cf_stats zero_stats;

static void *check_alloc(void *ctx, size_t size)
{
    (void)ctx;
    (void)size;
    return NULL;
}

static void check_free(void *ctx, void *ptr)
{
    (void)ctx;
    (void)ptr;
}

/* Reads the decimal number at *s and moves past it; -1 if there is none. */
static long read_number(const char **s)
{
    long n = -1;
    while (**s >= '0' && **s <= '9') {
        n = (n < 0 ? 0 : n * 10) + (**s - '0');
        (*s)++;
    }
    return n;
}

/* Does cf_version() say what the header says? */
static bool version_matches(const char *v)
{
    if (v == NULL || read_number(&v) != CF_VERSION_MAJOR || *v++ != '.')
        return false;
    if (read_number(&v) != CF_VERSION_MINOR || *v++ != '.')
        return false;
    return read_number(&v) == CF_VERSION_PATCH && *v == '\0';
}

int main(void)
{
    const struct cf_header_check_api *api = &cf_header_check_table;
    const cf_status statuses[] = {CF_OK,     CF_NOT_FOUND, CF_FULL, CF_EXISTS,   CF_EINVAL,
                                  CF_ENOMEM, CF_ECORRUPT,  CF_EIO,  CF_EVERSION, CF_EREADONLY};
    const cf_allocator allocator = {check_alloc, check_free, NULL};
    cf_config config = zero_config;
    cf_stats stats = zero_stats;
    cf_filter *filter = NULL;
    uint64_t hashes[2];
    bool found[2] = {false, false};
    size_t bytes = 0;
    size_t i;

    if (CF_OK != 0)
        return 2;
    for (i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        const char *text = api->describe(statuses[i]);
        if (text == NULL || text[0] == '\0')
            return 3;
    }
    if (!version_matches(api->version()))
        return 4;

    /* An allocator that always fails: cf_new must report it, not crash. */
    config.capacity = 1000;
    config.allocator = &allocator;
    if (api->new_filter(&config, &filter) != CF_ENOMEM || filter != NULL)
        return 5;

    config.allocator = NULL;
    config.fingerprint_bits = CF_DEFAULT_FINGERPRINT_BITS;
    config.bucket_size = CF_DEFAULT_BUCKET_SIZE;
    config.max_kicks = CF_DEFAULT_MAX_KICKS;
    config.expansion = 0;
    config.seed = 42;
    config.max_sub_filters = CF_DEFAULT_MAX_SUB_FILTERS;
    if (api->bytes_needed(&config, &bytes) != CF_OK || bytes == 0)
        return 6;
    if (api->new_filter(&config, &filter) != CF_OK || filter == NULL)
        return 7;
    if (api->add(filter, "alice", 5) != CF_OK || !api->contains(filter, "alice", 5))
        return 8;
    if (api->add_unique(filter, "alice", 5) != CF_EXISTS || api->count(filter, "alice", 5) < 1)
        return 9;
    hashes[0] = api->hash(filter, "alice", 5);
    hashes[1] = api->hash(filter, "bob", 3);
    if (api->add_hash(filter, hashes[1]) != CF_OK || !api->contains_hash(filter, hashes[1]) ||
        api->count_hash(filter, hashes[1]) < 1)
        return 10;
    api->contains_many(filter, hashes, 2, found);
    if (!found[0] || !found[1])
        return 11;
    if (api->delete_hash(filter, hashes[1]) != CF_OK ||
        api->delete_key(filter, "alice", 5) != CF_OK)
        return 12;
    api->get_stats(filter, &stats);
    if (stats.items != 0 || stats.slots == 0)
        return 13;
    if (api->compact(filter) != CF_OK || api->compact(NULL) != CF_EINVAL)
        return 14;
    /* The batched forms, and the mapping a filter shares with tables of other programs. */
    {
        const void *keys[2] = {"carol", "dave"};
        const size_t lens[2] = {5, 4};
        cf_status added[2] = {CF_EINVAL, CF_EINVAL};
        cf_place place;
        hashes[0] = api->hash(filter, keys[0], lens[0]);
        hashes[1] = api->hash(filter, keys[1], lens[1]);
        if (api->add_many(filter, hashes, 2, CF_ADD_UNIQUE, added) != 2 || added[1] != CF_OK)
            return 15;
        found[0] = found[1] = false;
        api->contains_keys(filter, keys, lens, 2, found);
        if (!found[0] || !found[1] || api->hash_seeded(42, "carol", 5) != hashes[0])
            return 16;
        if (api->place_hash(hashes[0], 1000, 16, &place) != CF_OK || place.tag == 0 ||
            place.bucket[0] == place.bucket[1] ||
            api->alt_bucket(place.bucket[0], place.tag, 1000) != place.bucket[1] ||
            api->place_hash(hashes[0], 999, 16, &place) != CF_EINVAL ||
            api->alt_bucket(1000, place.tag, 1000) != UINT64_MAX || CF_PLACE_MAX_BUCKETS < 2)
            return 17;
    }
    api->clear(filter);
    api->free_filter(filter);
    api->free_filter(NULL);
    return 0;
}
