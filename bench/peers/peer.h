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
#endif

#endif /* CF_BENCH_PEER_H */
