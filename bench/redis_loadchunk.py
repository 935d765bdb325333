#!/usr/bin/env python3
"""How long each CF.LOADCHUNK holds the server's event loop while a large filter is loaded.

A filter of --capacity items (4-slot buckets, 12-bit fingerprints: about 1.6 bytes an
item) is made on a private redis-server, dumped with CF.SCANDUMP and loaded into another
key with CF.LOADCHUNK. The server measures every command (SLOWLOG with a threshold of 0),
so the figures are the event loop's own, not the client's round trips. Printed: the header
chunk, the first data chunk, the median, the slowest and the last. Nothing is asserted.

Usage: redis_loadchunk.py [--module build/redis-cuckoofilter.so] [--capacity 500000000]
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "redis"))

import harness  # noqa: E402

DEFAULT_CAPACITY = 500_000_000  # about 750 MiB of table: 47 chunks of 16 MiB


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", default=harness.MODULE)
    ap.add_argument("--capacity", type=int, default=DEFAULT_CAPACITY)
    a = ap.parse_args()
    harness.MODULE = os.path.abspath(a.module)
    extra = [("slowlog-log-slower-than", "0"), ("slowlog-max-len", "100000")]
    with harness.Server(extra=extra) as s, s.client() as c:
        c.call("CF.RESERVE", "src", a.capacity, "BUCKETSIZE", 4, "FPBITS", 12)
        chunks, it = [], 0
        while True:
            it, data = c.call("CF.SCANDUMP", "src", it)
            if data is None:
                break
            chunks.append((it, data))
        c.call("SLOWLOG", "RESET")
        for it, data in chunks:
            c.call("CF.LOADCHUNK", "copy", it, data)
        us = [e[2] for e in c.call("SLOWLOG", "GET", 100000)
              if e[3][0].upper() == b"CF.LOADCHUNK"][::-1]
        mib = sum(len(d) for _, d in chunks) / 2**20
        print(f"module {harness.MODULE}")
        print(f"{len(chunks)} chunks, {mib:.0f} MiB (capacity {a.capacity})")
        print(f"server time of CF.LOADCHUNK, us: header {us[0]}, first data chunk {us[1]}, "
              f"median {sorted(us)[len(us) // 2]}, slowest {max(us)}, last {us[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
