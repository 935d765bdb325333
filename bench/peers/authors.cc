// The paper authors' filter (github.com/efficient/cuckoofilter): 12-bit fingerprints,
// 4-slot buckets, power-of-two tables, its own multiply-shift hashes of the 8-byte key.
#include "cuckoofilter.h"
#include "peer.h"

using Filter = cuckoofilter::CuckooFilter<uint64_t, 12>;
PEER_DEFINE(peer_authors, "authors", Filter)
