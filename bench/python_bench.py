"""The Python package's speed against what a Python programmer would compare it with
(`make bench-python`), each pair timed in the same run, interleaved, medians of ROUNDS:

  1. `k in f` against `k in s` for a frozenset s of the same 1M keys of 16 bytes (half of
     the lookups present keys, half absent). Goal: at most 1.2 times the set's time. The
     queries run twice: in the order their key objects were made, where each object is
     next in memory to the last (the cache helps both, the set most), and shuffled, as a
     program's lookups usually come, where reading each key object misses the cache.
  2. f.contains_many(a) over a numpy array of 10M uint64 keys, against the C library's
     batched lookup (cf_contains_keys, 4096 keys a call) of the same keys in the same kind
     of filter (build/cf-bench-batch). Goal: at most 1.5 times the C time per key.
  3. f.contains_many(keys) over a list of 1M bytes keys, against a loop of `k in f`.
     Goal: at least 5 times faster per key. Beside it, contains_many over a numpy array
     of as many uint64 keys in a filter of the same size: the same batch with no key
     objects to read, which a list cannot beat.

Filters are sized by fpr=0.001, as made by CuckooFilter(...) (concurrent). Rows for the
same filter made with concurrent=False show what the concurrent lookups cost.

Usage: python_bench.py --baseline build/cf-bench-batch [--keys N] [--batch-keys N]
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import cuckoofilter as cf
from machine import cpu_model

ROUNDS = 5
FPR = 0.001
SEED = 20261126


def per_key(fn, arg, n):
    t0 = time.perf_counter()
    fn(arg)
    return (time.perf_counter() - t0) * 1e9 / n


def loop_in(container):
    def run(keys):
        for k in keys:
            k in container  # noqa: B015 - the lookup is what is timed
    return run


def interleaved(cases, rounds=ROUNDS):
    """cases: name -> (fn, arg, n). Medians of ns per key, the cases run in turn."""
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (fn, arg, n) in cases.items():
            times[name].append(per_key(fn, arg, n))
    return {name: statistics.median(v) for name, v in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="build/cf-bench-batch")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batch-keys", type=int, default=10_000_000)
    args = ap.parse_args()
    rng = np.random.default_rng(SEED)
    print("# cuckoofilter for Python against the usual alternatives\n")
    print(f"- command: {' '.join(sys.argv)}")
    print(f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"- machine: {cpu_model()}, {os.cpu_count()} CPUs; Python {platform.python_version()}, "
          f"numpy {np.__version__}, library {cf.library_version}")
    print(f"- medians of {ROUNDS} interleaved rounds, ns per key\n")
    goals = []

    # 1. `in` against a frozenset, 16-byte keys.
    n = args.keys
    raw = rng.bytes(16 * 2 * n)
    present = [raw[16 * i:16 * i + 16] for i in range(n)]
    absent = [raw[16 * i:16 * i + 16] for i in range(n, 2 * n)]
    queries = [k for pair in zip(present, absent) for k in pair]
    s = frozenset(present)
    f = cf.CuckooFilter(capacity=n, fpr=FPR, seed=SEED)
    f.add_many(present)
    g = cf.CuckooFilter.from_bytes(f.to_bytes(), concurrent=False)
    u = rng.integers(0, 2**64 - 1, size=2 * n, dtype=np.uint64, endpoint=True)
    fu = cf.CuckooFilter(capacity=n, fpr=FPR, seed=SEED)
    fu.add_many(u[:n])
    gu = cf.CuckooFilter.from_bytes(fu.to_bytes(), concurrent=False)
    uq = np.ravel(np.column_stack((u[:n], u[n:])))  # present and absent in turn, as queries
    shuffled = [queries[i] for i in rng.permutation(len(queries))]
    r = interleaved({
        "set": (loop_in(s), queries, len(queries)),
        "filter": (loop_in(f), queries, len(queries)),
        "set, shuffled": (loop_in(s), shuffled, len(shuffled)),
        "filter, shuffled": (loop_in(f), shuffled, len(shuffled)),
        "filter, plain": (loop_in(g), queries, len(queries)),
        "many": (f.contains_many, queries, len(queries)),
        "many, plain": (g.contains_many, queries, len(queries)),
        "array": (fu.contains_many, uq, len(uq)),
        "array, plain": (gu.contains_many, uq, len(uq)),
    })
    print(f"## `k in f` and contains_many, {n:,} keys of 16 bytes (half the lookups absent)\n")
    print("| | ns per key | against |")
    print("|---|---:|---:|")
    print(f"| `k in s`, frozenset | {r['set']:.1f} | 1.00 |")
    print(f"| `k in f`, CuckooFilter(...) | {r['filter']:.1f} | {r['filter'] / r['set']:.2f} of the set |")
    print(f"| `k in s`, frozenset, queries shuffled | {r['set, shuffled']:.1f} | 1.00 |")
    print(f"| `k in f`, CuckooFilter(...), queries shuffled | {r['filter, shuffled']:.1f} | "
          f"{r['filter, shuffled'] / r['set, shuffled']:.2f} of the set |")
    print(f"| `k in f`, concurrent=False | {r['filter, plain']:.1f} | "
          f"{r['filter, plain'] / r['set']:.2f} of the set |")
    print(f"| f.contains_many(list), CuckooFilter(...) | {r['many']:.1f} | "
          f"{r['filter'] / r['many']:.1f}x faster than the loop of `in` |")
    print(f"| f.contains_many(list), concurrent=False | {r['many, plain']:.1f} | "
          f"{r['filter, plain'] / r['many, plain']:.1f}x faster than its loop |")
    print(f"| f.contains_many(array), as many uint64 keys, CuckooFilter(...) | {r['array']:.1f} | "
          f"{r['filter'] / r['array']:.1f}x faster than the loop of `in` |")
    print(f"| f.contains_many(array), as many uint64 keys, concurrent=False | "
          f"{r['array, plain']:.1f} | "
          f"{r['filter, plain'] / r['array, plain']:.1f}x faster than its loop |\n")
    goals.append(("`k in f` at most 1.2 times `k in s`", r["filter"] / r["set"] <= 1.2))
    goals.append(("`k in f` at most 1.2 times `k in s`, queries shuffled",
                  r["filter, shuffled"] / r["set, shuffled"] <= 1.2))
    goals.append(("contains_many(list) at least 5 times faster than a loop of `in`",
                  r["filter"] / r["many"] >= 5.0))

    # 2. numpy against the C library, 10M uint64 keys.
    m = args.batch_keys
    a = rng.integers(0, 2**64 - 1, size=m, dtype=np.uint64, endpoint=True)
    h = cf.CuckooFilter(capacity=m, fpr=FPR, seed=SEED)
    h.add_many(a)
    hb = cf.CuckooFilter.from_bytes(h.to_bytes(), concurrent=False)
    with tempfile.TemporaryDirectory(prefix="cf-bench-python-") as d:
        path = os.path.join(d, "keys.u64")
        a.astype("<u8").tofile(path)
        c_times = {}
        py = {"CuckooFilter(...)": [], "concurrent=False": []}
        for _ in range(3):  # C and Python in turn; each C run takes its own median
            for kind, extra in (("CuckooFilter(...)", ["--concurrent"]), ("concurrent=False", [])):
                out = subprocess.run([args.baseline, path, repr(FPR), str(SEED)] + extra,
                                     stdout=subprocess.PIPE, check=True, text=True).stdout
                c_times.setdefault(kind, []).append(float(out.split()[0]))
            py["CuckooFilter(...)"].append(per_key(h.contains_many, a, m))
            py["concurrent=False"].append(per_key(hb.contains_many, a, m))
    found = np.frombuffer(h.contains_many(a), dtype=bool)
    assert found.all(), "a key of the batch was not found"
    print(f"## contains_many over a numpy array of {m:,} uint64 keys\n")
    print("| filter | Python ns per key | C (cf_contains_keys) ns per key | Python / C |")
    print("|---|---:|---:|---:|")
    ratio = {}
    for kind in py:
        p_ns, c_ns = statistics.median(py[kind]), statistics.median(c_times[kind])
        ratio[kind] = p_ns / c_ns
        print(f"| {kind} | {p_ns:.1f} | {c_ns:.1f} | {ratio[kind]:.2f} |")
    print()
    goals.append(("contains_many(numpy) at most 1.5 times the C batched lookup",
                  ratio["CuckooFilter(...)"] <= 1.5))

    for what, met in goals:
        print(f"Goal: {what}: {'met' if met else 'not met'}.")


if __name__ == "__main__":
    main()
