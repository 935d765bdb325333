#!/usr/bin/env python3
"""A filter of N URL-like keys from text files: one process reading the files and calling
add_many, one process reading them and calling CuckooFilter.build (its threads fill a
segmented filter), against cuckoofilter.dask.build on a distributed.LocalCluster of W
worker processes reading the same files (a partition per file group), all at fpr 0.001.

Usage: bench/dask_build.py [--keys N] [--files F] [--partitions P] [--workers W]
                           [--dir DIR] [--runs R] [--path FILE]
With --path, the Dask build writes the filter into FILE (the workers write their ranges
there; its time includes the file's commit) and the file is compared instead.
The files (DIR/urlsNN.txt, N keys in all) are written first if they are missing. Prints
each run's seconds and the workers' peak memory (their largest resident set so far), and
checks that the filters hold every key of one file, that the Dask filter has the bytes of
CuckooFilter.build's, and that add_many's has the same false-positive rate within noise. Needs PYTHONPATH to find cuckoofilter
(build/python).
"""

import argparse
import glob
import os
import time

import cuckoofilter as cf
from dask_cluster import local_client, peak_rss_mb


def read_lines(paths):
    out = []
    for p in paths:
        with open(p) as fh:
            out.extend(fh.read().splitlines())
    return out


def make_files(directory, n, files):
    os.makedirs(directory, exist_ok=True)
    paths = [os.path.join(directory, f"urls{j:02d}.txt") for j in range(files)]
    if all(os.path.exists(p) for p in paths):
        return paths
    for j, p in enumerate(paths):
        with open(p + ".tmp", "w") as f:
            f.write("".join(f"https://example.com/{j}/{i}\n" for i in range(j, n, files)))
        os.replace(p + ".tmp", p)
    return paths


def single(paths, n):
    t = time.perf_counter()
    f = cf.CuckooFilter(n, fpr=0.001, seed=3)
    for p in paths:
        f.add_many(read_lines([p]))
    return time.perf_counter() - t, f


def single_build(paths, n):
    t = time.perf_counter()
    f = cf.CuckooFilter.build(read_lines(paths), capacity=n, fpr=0.001, seed=3)
    return time.perf_counter() - t, f


def on_dask(paths, n, partitions, client, out=None):
    import dask.bag as db
    import cuckoofilter.dask as cfd

    t = time.perf_counter()
    bag = db.from_sequence(paths, npartitions=partitions).map_partitions(read_lines)
    f = cfd.build(bag, capacity=n, fpr=0.001, seed=3, path=out)
    return time.perf_counter() - t, f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=float, default=10e6)
    ap.add_argument("--files", type=int, default=32)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", default="/tmp/cf-dask-bench")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--path", default=None)
    a = ap.parse_args()
    n = int(a.keys)
    paths = make_files(a.dir, n, a.files)
    client = local_client(a.workers)
    probes = [f"absent-{i}" for i in range(1_000_000)]
    first = read_lines(paths[:1])
    for run in range(a.runs):
        ts, fs = single(paths, n)
        tb, fb = single_build(paths, n)
        td, fd = on_dask(paths, n, a.partitions, client, a.path)
        assert all(fs.contains_many(first)) and all(fd.contains_many(first))
        assert len(fs) == len(fd) == len(fb) == n
        assert fd.to_bytes() == fb.to_bytes(), "the Dask filter is not CuckooFilter.build's"
        ps, pd = sum(fs.contains_many(probes)), sum(fd.contains_many(probes))
        assert abs(ps - pd) <= 5 * max(ps, 1) ** 0.5 + 10, (ps, pd)
        print(f"run {run + 1}: {n} keys ({'segmented' if fd.stats['segmented'] else 'any-size'}),"
              f" one process: add_many {ts:.1f} s, build {tb:.1f} s; dask ({a.workers} workers,"
              f" {a.partitions} partitions{', to a file' if a.path else ''}) {td:.1f} s: {ts / td:.2f}x add_many, "
              f"{tb / td:.2f}x build; worker peak {peak_rss_mb(client):.0f} MB; false "
              f"positives in 1M absent keys {ps} and {pd}", flush=True)
    client.close()


if __name__ == "__main__":
    main()
