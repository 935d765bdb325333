// fastfilter_cpp's stable cuckoo filter (github.com/FastFilter/fastfilter_cpp,
// src/cuckoo/cuckoofilter_stable.h): 12-bit fingerprints, 4-slot buckets, tables sized for
// 94 % load (not powers of two), its SimpleMixSplit hash of the 8-byte key.
#include "cuckoofilter.h" // Status, before the stable filter's header
#include "cuckoofilter_stable.h"
#include "hashutil.h"
#include "peer.h"

using Filter = cuckoofilter::CuckooFilterStable<uint64_t, 12>;

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

extern "C" const peer peer_fastfilter = {"fastfilter (stable)", make, add, contains, del, bytes};
