#!/usr/bin/env python3
"""Merging F filter files made alike, N keys in all (a segmented filter of capacity N, fpr
0.001): one process loading them and calling CuckooFilter.merge with one thread and with
every core, against cuckoofilter.dask.merge on a distributed.LocalCluster of W worker
processes.

Usage: bench/dask_merge.py [--keys N] [--files F] [--workers W] [--dir DIR] [--runs R]
The files (DIR/partNN.cf, N / F integer keys each, made with CuckooFilter.build) are
written first if they are missing. Prints each run's seconds (loading the files
included) and the workers' peak memory (their largest resident set so far), and checks
that the three filters have the same bytes and hold every key of the first file. Needs
PYTHONPATH to find cuckoofilter (build/python).
"""

import argparse
import os
import time

import numpy as np

import cuckoofilter as cf
from dask_cluster import local_client, peak_rss_mb

SEED = 3


def keys_of(j, n, files):
    return np.arange(j, n, files, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)


def make_files(directory, n, files):
    os.makedirs(directory, exist_ok=True)
    paths = [os.path.join(directory, f"part{j:02d}.cf") for j in range(files)]
    for j, p in enumerate(paths):
        if not os.path.exists(p):
            f = cf.CuckooFilter.build(keys_of(j, n, files), capacity=n, fpr=0.001, seed=SEED,
                                      segmented=True, concurrent=False)
            f.save(p)
    return paths


def in_one_process(paths, threads):
    t = time.perf_counter()
    f = cf.CuckooFilter.load(paths[0], concurrent=False)
    for p in paths[1:]:
        f.merge(cf.CuckooFilter.load(p, concurrent=False), threads=threads)
    return time.perf_counter() - t, f


def on_dask(paths):
    import cuckoofilter.dask as cfd

    t = time.perf_counter()
    f = cfd.merge(paths, concurrent=False)
    return time.perf_counter() - t, f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=float, default=50e6)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", default="/tmp/cf-dask-merge-bench")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    n = int(a.keys)
    paths = make_files(a.dir, n, a.files)
    client = local_client(a.workers)
    first = keys_of(0, n, a.files)
    for run in range(a.runs):
        t1, f1 = in_one_process(paths, 1)
        tn, fn = in_one_process(paths, 0)
        td, fd = on_dask(paths)
        assert f1.to_bytes() == fn.to_bytes() == fd.to_bytes(), "the merges differ"
        assert all(fd.contains_many(first)) and len(fd) == n
        print(f"run {run + 1}: {n} keys in {a.files} files ({fd.stats['buckets'] >> 16} "
              f"segments): one process, 1 thread {t1:.2f} s, every core {tn:.2f} s "
              f"({t1 / tn:.2f}x); dask ({a.workers} workers) {td:.2f} s ({t1 / td:.2f}x); "
              f"worker peak {peak_rss_mb(client):.0f} MB", flush=True)
    client.close()


if __name__ == "__main__":
    main()
