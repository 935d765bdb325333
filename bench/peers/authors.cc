// The paper authors' filter (github.com/efficient/cuckoofilter): 12-bit fingerprints,
// 4-slot buckets, power-of-two tables, its own multiply-shift hashes of the 8-byte key.
#include "cuckoofilter.h"
#include "peer.h"

using Filter = cuckoofilter::CuckooFilter<uint64_t, 12>;

static void *make(size_t n)
{
    return new Filter(n);
}
static int add(void *f, uint64_t k)
{
    return static_cast<Filter *>(f)->Add(k) == cuckoofilter::Ok;
}
static int contains(void *f, uint64_t k)
{
    return static_cast<Filter *>(f)->Contain(k) == cuckoofilter::Ok;
}
static int del(void *f, uint64_t k)
{
    return static_cast<Filter *>(f)->Delete(k) == cuckoofilter::Ok;
}
static size_t bytes(void *f)
{
    return static_cast<Filter *>(f)->SizeInBytes();
}

extern "C" const peer peer_authors = {"authors", make, add, contains, del, bytes};
