/*
 * peer.h - a peer's cuckoo filter behind a C interface, one C++ translation unit per peer
 * (authors.cc, fastfilter.cc), so that bench/peers/side.c measures them beside this library
 * in one process. Their sources are not in this repository: bench/peers/run.sh builds
 * against copies you fetched.
 */
#ifndef CF_BENCH_PEER_H
#define CF_BENCH_PEER_H

#include <stddef.h>
#include <stdint.h>

typedef struct peer {
    const char *name;
    void *(*make)(size_t capacity); /* the peer's own sizing for `capacity` keys */
    int (*add)(void *f, uint64_t key);
    int (*contains)(void *f, uint64_t key);
    int (*del)(void *f, uint64_t key);
    size_t (*bytes)(void *f);
} peer;

#ifdef __cplusplus
extern "C" {
#endif
extern const peer peer_authors, peer_fastfilter;
#ifdef __cplusplus
}

/* The C interface of a peer's filter class FILTER (whose Add, Contain and Delete answer
 * cuckoofilter::Ok on success), defined as the peer VAR named NAME. */
#define PEER_DEFINE(VAR, NAME, FILTER)                                                             \
    static void *VAR##_make(size_t n)                                                              \
    {                                                                                              \
        return new FILTER(n);                                                                      \
    }                                                                                              \
    static int VAR##_add(void *f, uint64_t k)                                                      \
    {                                                                                              \
        return static_cast<FILTER *>(f)->Add(k) == cuckoofilter::Ok;                               \
    }                                                                                              \
    static int VAR##_contains(void *f, uint64_t k)                                                 \
    {                                                                                              \
        return static_cast<FILTER *>(f)->Contain(k) == cuckoofilter::Ok;                           \
    }                                                                                              \
    static int VAR##_del(void *f, uint64_t k)                                                      \
    {                                                                                              \
        return static_cast<FILTER *>(f)->Delete(k) == cuckoofilter::Ok;                            \
    }                                                                                              \
    static size_t VAR##_bytes(void *f)                                                             \
    {                                                                                              \
        return static_cast<FILTER *>(f)->SizeInBytes();                                            \
    }                                                                                              \
    extern "C" const peer VAR = {NAME,           VAR##_make, VAR##_add,                            \
                                 VAR##_contains, VAR##_del,  VAR##_bytes};
#endif

#endif /* CF_BENCH_PEER_H */
