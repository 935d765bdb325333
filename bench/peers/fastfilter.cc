// fastfilter_cpp's stable cuckoo filter (github.com/FastFilter/fastfilter_cpp,
// src/cuckoo/cuckoofilter_stable.h): 12-bit fingerprints, 4-slot buckets, tables sized for
// 94 % load (not powers of two), its SimpleMixSplit hash of the 8-byte key.
#include "cuckoofilter.h" // Status, before the stable filter's header
#include "cuckoofilter_stable.h"
#include "hashutil.h"
#include "peer.h"

using Filter = cuckoofilter::CuckooFilterStable<uint64_t, 12>;
PEER_DEFINE(peer_fastfilter, "fastfilter (stable)", Filter)
