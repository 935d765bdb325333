#!/usr/bin/python3
"""redis_bench.py - the Redis module against a plain Redis set, on one local server.

  1. Throughput with redis-benchmark on loopback: CF.ADD vs SADD, CF.EXISTS vs
     SISMEMBER and CF.MEXISTS vs SMISMEMBER (16 keys each), random keys (-r and
     __rand_int__), 50 clients, without pipelining (-P 1) and with -P 16. Each pair
     runs interleaved (CF, set, CF, set, CF, set); medians.
  2. Memory per item for N distinct items in a filter CF.RESERVEd at N (default 12-bit
     fingerprints, and FPBITS 8), in a Redis set, and in RedisBloom's layout as its
     sizing rules give it (computed, not measured), with measured false-positive rates.

One redis-server (tests/redis/harness.py) is started with the module and stopped at the
end. The markdown report goes to stdout (and to --out FILE); progress goes to stderr.

Usage: /usr/bin/python3 bench/redis_bench.py [--quick | --sizes] [--module PATH] [--out FILE]
Needs: make (build/redis-cuckoofilter.so), redis-server, redis-benchmark, python3-redis.
"""

import argparse
import csv
import ctypes
import io
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE_PATH = None  # the module under test; set by main(). libcuckoofilter.so sits next to it.
sys.path.insert(0, os.path.join(ROOT, "tests", "redis"))

import harness  # noqa: E402
from machine import cpu_model  # noqa: E402

try:
    import redis  # noqa: E402
except ImportError:
    sys.exit("redis_bench: the Python package 'redis' is missing (apt-get install python3-redis)")

CF_KEY, SET_KEY = "cfkey", "setkey"
RESERVE = 2_000_000  # CF.RESERVE cfkey 2000000: no growth during any run
CLIENTS = 50
BATCH = 10_000  # items per CF.INSERT / SADD / CF.MEXISTS when loading and probing
MEXISTS_ITEMS = 16  # keys per CF.MEXISTS / SMISMEMBER in the throughput runs

# The full run keeps to about two minutes on a 2-core VM; --quick to well under 20 s.
PROFILES = {
    "full": dict(reps=3, n_p1=250_000, n_p16=1_200_000, preload=1_000_000,
                 mem_ns=(10_000, 100_000, 1_000_000), probes=100_000),
    "quick": dict(reps=3, n_p1=15_000, n_p16=60_000, preload=100_000,
                  mem_ns=(10_000, 100_000), probes=20_000),
}

# Key range for the ADD runs. Our module caps the copies of one item at 2 x bucket size (4
# at the default b = 2) and answers "Filter is full" for a 5th CF.ADD of the same item (a
# documented difference from RedisBloom, docs/COMMANDS.md); redis-benchmark exits at the
# first error reply. With -r 1000000 some random item reaches 5 copies after ~130k-180k
# adds, so the ADD runs draw from 10^8 keys, where a 5th copy is practically impossible.
ADD_RANGE = 100_000_000


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def median(xs):
    return statistics.median(xs)


def next_pow2(x):
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def fmt_int(x):
    return f"{x:,.0f}"


def fmt_pct(x):
    return f"{100 * x:.3f} %"


def redisbloom_expected_fpr(match_p, bucket_size, loads):
    """Chance that a probe matches one of the 2 b slots of its two buckets in any
    sub-filter of RedisBloom's layout, each slot occupied with its sub-filter's load
    (loads = sum of loads)."""
    return -math.expm1(2.0 * bucket_size * loads * math.log1p(-match_p))


def our_expected_fpr(fpbits, bucket_size, loads):
    """The library's own formula, cf_expected_fpr, from build/libcuckoofilter.so (next to
    the module) rather than a copy of it."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(MODULE_PATH), "libcuckoofilter.so"))
    lib.cf_expected_fpr.restype = ctypes.c_double
    lib.cf_expected_fpr.argtypes = (ctypes.c_uint, ctypes.c_uint, ctypes.c_double)
    return lib.cf_expected_fpr(fpbits, bucket_size, loads)


# ------------------------------------------------------------------------------------
# Machine and server facts
# ------------------------------------------------------------------------------------

def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def tool_version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "unknown"


def info_of(r, key):
    """CF.INFO as a dict of str -> int, with "fpbits" (the fingerprint width) from CF.DEBUG."""
    raw = r.execute_command("CF.INFO", key)
    if isinstance(raw, dict):
        items = raw.items()
    else:
        items = zip(raw[0::2], raw[1::2])
    out = {(k.decode() if isinstance(k, bytes) else k): v for k, v in items}
    debug = r.execute_command("CF.DEBUG", key).decode()
    out["fpbits"] = int(debug.split("fpbits:", 1)[1].split()[0])
    return out


def used_memory(r):
    return int(r.info("memory")["used_memory"])


# ------------------------------------------------------------------------------------
# Part 1: redis-benchmark
# ------------------------------------------------------------------------------------

class Bench:
    def __init__(self, port, r):
        self.port = port
        self.r = r
        self.commands = []  # every redis-benchmark command line, in order

    def argv(self, n, keyrange, pipeline, args):
        return ["redis-benchmark", "-h", "127.0.0.1", "-p", str(self.port), "-n", str(n),
                "-r", str(keyrange), "-c", str(CLIENTS), "-P", str(pipeline), "--csv"] + args

    def run(self, n, keyrange, pipeline, args):
        argv = self.argv(n, keyrange, pipeline, args)
        line = " ".join(shlex.quote(a) for a in argv)
        if line not in self.commands:
            self.commands.append(line)
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if p.returncode != 0 or "Error" in p.stderr:
            raise RuntimeError(f"redis-benchmark failed ({p.returncode}): {line}\n"
                               f"{p.stderr.strip()[-2000:]}")
        for row in csv.DictReader(io.StringIO(p.stdout)):
            return {"rps": float(row["rps"]), "p50": float(row["p50_latency_ms"]),
                    "p99": float(row["p99_latency_ms"])}
        raise RuntimeError(f"no CSV row from: {line}\n{p.stdout!r}\n{p.stderr!r}")


def reset_cf(r):
    r.delete(CF_KEY)
    r.execute_command("CF.RESERVE", CF_KEY, RESERVE)


def reset_set(r):
    r.delete(SET_KEY)  # synchronous DEL: nothing is freed in the background during a run


def load(r, key, items, cf):
    """Load items into a filter (CF.INSERT) or a set (SADD), BATCH at a time."""
    for i in range(0, len(items), BATCH):
        chunk = items[i:i + BATCH]
        if cf:
            res = r.execute_command("CF.INSERT", key, "NOCREATE", "ITEMS", *chunk)
            bad = sum(1 for x in res if x != 1)
            if bad:
                raise RuntimeError(f"CF.INSERT {key}: {bad} of {len(chunk)} items not inserted")
        else:
            r.execute_command("SADD", key, *chunk)


def throughput(bench, prof):
    r = bench.r
    reps = prof["reps"]
    pipelines = ((1, prof["n_p1"]), (16, prof["n_p16"]))
    rows = []

    # CF.ADD vs SADD: both keys start empty before every run (the filter CF.RESERVEd).
    for pipe, n in pipelines:
        res = {"cf": [], "set": []}
        for rep in range(reps):
            log(f"  CF.ADD  -P {pipe:<2} n={n} run {rep + 1}/{reps}")
            reset_cf(r)
            res["cf"].append(bench.run(n, ADD_RANGE, pipe, ["CF.ADD", CF_KEY, "item:__rand_int__"]))
            info = info_of(r, CF_KEY)
            if info["Number of filters"] != 1 or info["Number of items inserted"] != n:
                raise RuntimeError(f"after {n} CF.ADDs: CF.INFO {info}")
            log(f"  SADD    -P {pipe:<2} n={n} run {rep + 1}/{reps}")
            reset_set(r)
            res["set"].append(bench.run(n, ADD_RANGE, pipe, ["SADD", SET_KEY, "item:__rand_int__"]))
        rows.append(("CF.ADD vs SADD", pipe, n, res))
    r.delete(CF_KEY, SET_KEY)

    # CF.EXISTS vs SISMEMBER on the same preloaded items; -r twice the preload: ~50 % hits.
    pre = prof["preload"]
    log(f"  preloading {pre} items into {CF_KEY} and {SET_KEY}")
    items = ["item:%012d" % i for i in range(pre)]  # the form redis-benchmark gives
    reset_cf(r)
    load(r, CF_KEY, items, cf=True)
    reset_set(r)
    load(r, SET_KEY, items, cf=False)
    del items
    for pipe, n in pipelines:
        res = {"cf": [], "set": []}
        for rep in range(reps):
            log(f"  CF.EXISTS -P {pipe:<2} n={n} run {rep + 1}/{reps}")
            res["cf"].append(bench.run(n, 2 * pre, pipe, ["CF.EXISTS", CF_KEY, "item:__rand_int__"]))
            log(f"  SISMEMBER -P {pipe:<2} n={n} run {rep + 1}/{reps}")
            res["set"].append(bench.run(n, 2 * pre, pipe, ["SISMEMBER", SET_KEY, "item:__rand_int__"]))
        rows.append(("CF.EXISTS vs SISMEMBER", pipe, n, res))
    # The same keys, MEXISTS_ITEMS random ones per command (each __rand_int__ is drawn anew).
    many = ["item:__rand_int__"] * MEXISTS_ITEMS
    for pipe, n in pipelines:
        res = {"cf": [], "set": []}
        n //= MEXISTS_ITEMS // 4  # about as long a run as the single-key ones
        for rep in range(reps):
            log(f"  CF.MEXISTS -P {pipe:<2} n={n} run {rep + 1}/{reps}")
            res["cf"].append(bench.run(n, 2 * pre, pipe, ["CF.MEXISTS", CF_KEY] + many))
            log(f"  SMISMEMBER -P {pipe:<2} n={n} run {rep + 1}/{reps}")
            res["set"].append(bench.run(n, 2 * pre, pipe, ["SMISMEMBER", SET_KEY] + many))
        rows.append((f"CF.MEXISTS vs SMISMEMBER, {MEXISTS_ITEMS} keys each", pipe, n, res))
    exists_info = info_of(r, CF_KEY)
    r.delete(CF_KEY, SET_KEY)
    return rows, exists_info


# ------------------------------------------------------------------------------------
# Part 2: memory per item and false positives
# ------------------------------------------------------------------------------------

def probe_fpr(r, key, absent):
    hits = 0
    for i in range(0, len(absent), BATCH):
        hits += sum(r.execute_command("CF.MEXISTS", key, *absent[i:i + BATCH]))
    return hits


def check_no_false_negatives(r, key, items):
    for i in range(0, len(items), BATCH):
        got = r.execute_command("CF.MEXISTS", key, *items[i:i + BATCH])
        if not all(got):
            raise RuntimeError(f"{key}: false negative among items {i}..{i + BATCH - 1}")


def redisbloom_layout(n, bucket_size=2, max_load=0.84):
    """RedisBloom's filter for CF.RESERVE k n (bucket size 2, expansion 1) holding n
    items, from its sizing rules (semantics §2-3): sub-filters of nextPow2(n / 2) buckets
    of 2 one-byte slots, and as many of them as n items need when each takes them up to
    max_load before the next one (of the same size) is added."""
    buckets = next_pow2(n // bucket_size)
    slots = buckets * bucket_size
    filters = max(1, math.ceil(n / (max_load * slots)))
    size = 40 + 16 * filters + filters * slots  # CF.INFO Size (sizeof(CuckooFilter) = 40)
    fpr = redisbloom_expected_fpr(1 / 255, bucket_size, n / slots)
    fpr_bound = 2 * bucket_size / 255 * filters
    return dict(buckets=buckets, slots=slots, filters=filters, size=size, fpr=fpr,
                fpr_bound=fpr_bound)


def memory(r, prof):
    absent = ["user:%d" % i for i in range(10_000_000, 10_000_000 + prof["probes"])]
    rows = []
    for n in prof["mem_ns"]:
        r.flushall()
        items = ["user:%d" % i for i in range(n)]
        row = {"n": n}
        for name, fpbits in (("cf12", None), ("cf8", 8)):
            key = f"{name}:{n}"
            before = used_memory(r)
            args = ["CF.RESERVE", key, n] + (["FPBITS", fpbits] if fpbits else [])
            r.execute_command(*args)
            log(f"  {' '.join(map(str, args))}; CF.INSERT {n} items")
            load(r, key, items, cf=True)
            after = used_memory(r)
            info = info_of(r, key)
            usage = int(r.memory_usage(key))
            check_no_false_negatives(r, key, items)
            hits = probe_fpr(r, key, absent)
            bits, b = info["fpbits"], info["Bucket size"]
            slots = info["Number of buckets"] * b * info["Number of filters"]
            row[name] = dict(command=" ".join(map(str, args)), info=info, usage=usage,
                             delta=after - before, hits=hits, fpr=hits / len(absent),
                             slots=slots, load=n / slots,
                             expected=our_expected_fpr(bits, b, n / slots))
        key = f"set:{n}"
        log(f"  SADD {key}: {n} items")
        before = used_memory(r)
        load(r, key, items, cf=False)
        time.sleep(0.2)  # let active rehashing finish
        after = used_memory(r)
        usage = int(r.execute_command("MEMORY", "USAGE", key, "SAMPLES", 0))
        row["set"] = dict(usage=usage, delta=after - before, card=r.scard(key),
                          encoding=r.object("encoding", key).decode())
        if row["set"]["card"] != n:
            raise RuntimeError(f"SCARD {key} = {row['set']['card']}, expected {n}")
        # The key's own overhead in MEMORY USAGE (name + dict entry), as for any key.
        key_overhead = row["cf12"]["usage"] - row["cf12"]["info"]["Size"]
        rb = redisbloom_layout(n)
        rb["usage"] = rb["size"] + key_overhead
        row["rb"] = rb
        rows.append(row)
        del items
    return rows, len(absent)


# From the least CF.RESERVE takes (2 x BUCKETSIZE, as RedisBloom's) to a million.
SIZE_CAPACITIES = (4, 10, 100, 1_000, 10_000, 100_000, 1_000_000)


def filter_sizes(r):
    """CF.INFO Size (the module's bytes for the filter: its value, every allocation with
    its header, the tables) of an empty filter per capacity, at 12 and 8-bit fingerprints,
    beside RedisBloom's layout for the same CF.RESERVE (computed), and the auto-created
    filter of CF.ADD on a missing key."""
    r.flushall()
    rows = []
    cases = [(cap, ["CF.RESERVE", f"k:{cap}", cap]) for cap in SIZE_CAPACITIES]
    cases.insert(4, (1024, ["CF.ADD", "k:auto", "x"]))
    for cap, args in cases:
        row = dict(cap=cap, command=" ".join(map(str, args)))
        for name, extra in (("cf12", []), ("cf8", ["FPBITS", 8])):
            key = f"{args[1]}:{name}"
            if args[0] == "CF.ADD" and extra:  # the auto-created filter takes the defaults
                continue
            r.execute_command(args[0], key, *args[2:], *extra)
            info = info_of(r, key)
            table = info["Number of buckets"] * info["Bucket size"] * info["fpbits"] // 8
            row[name] = dict(size=info["Size"], table=table, fixed=info["Size"] - table)
        # RedisBloom: sizeof(CuckooFilter) = 40, one 16-byte SubCF, nextPow2(cap / 2)
        # buckets (at least 1) of two one-byte slots.
        rb_table = max(1, next_pow2(cap // 2)) * 2
        row["rb"] = dict(size=40 + 16 + rb_table, table=rb_table, fixed=56)
        rows.append(row)
    r.flushall()
    return rows


def sizes_report(rows):
    out = []
    w = out.append
    w("| filter | ours, 12-bit (default): Size | of which table | ours, FPBITS 8: Size | "
      "of which table | RedisBloom layout: Size | of which table |")
    w("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        c12, c8, rb = row["cf12"], row.get("cf8"), row["rb"]
        eight = f"{fmt_int(c8['size'])} | {fmt_int(c8['table'])}" if c8 else "- | -"
        w(f"| `{row['command']}` | {fmt_int(c12['size'])} | {fmt_int(c12['table'])} | {eight} | "
          f"{fmt_int(rb['size'])} | {fmt_int(rb['table'])} |")
    w("")
    w("Size is `CF.INFO`'s. Ours: the module's value struct (48 bytes) and every "
      "allocation of the filter as the server's allocator holds it (MallocSize: jemalloc's "
      "size classes included), the filter's head (96 bytes, 120 with its copy of the "
      "allocator) and its table with 8 bytes of padding. RedisBloom's layout: "
      "sizeof(CuckooFilter) = 40, 16 per sub-filter and one byte per slot, as its CF.INFO "
      "counts it (without the allocator's rounding). \"Of which table\": the slots' bytes "
      "(buckets x b x f / 8). RedisBloom rounds the buckets up to a power of two and its "
      "8-bit fingerprints give 2b/255 = 1.6 % false positives per full sub-filter; ours "
      "are sized for the capacity at a 0.84 load (b = 2), at 0.10 % (12 bits) or 1.6 % "
      "(8 bits).")
    return "\n".join(out) + "\n"



# ------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------

def report(ctx, tp_rows, exists_info, mem_rows, probes, sizes, elapsed):
    out = []
    w = out.append
    prof = ctx["prof"]
    w(f"# CF.* module vs Redis sets ({ctx['profile']} run)")
    w("")
    w(f"- machine: {ctx['cpu']}, {ctx['nproc']} CPUs (nproc), {platform.system()} "
      f"{platform.release()}")
    w(f"- server: `{ctx['server_version']}` (INFO: redis_version {ctx['redis_version']}, "
      f"mem_allocator {ctx['malloc']}); `{ctx['bench_version']}`")
    w(f"- module: `{ctx['module']}` (MODULE LIST: {ctx['modules']})")
    w(f"- server config: tests/redis/harness.py Server(): 127.0.0.1:{ctx['port']}, "
      f"save '', appendonly no")
    w(f"- python {platform.python_version()}, redis-py {redis.__version__}; "
      f"date {ctx['date']}; total time {elapsed:.0f} s")
    w(f"- **the server and redis-benchmark share the same {ctx['nproc']} cores** "
      f"(redis-benchmark is one thread, the server's command loop one more): absolute "
      f"ops/s are those of this VM with a loaded client on it; the CF/set ratio is the "
      f"figure to read")
    w(f"- load average (1, 5, 15 min) at the start: {ctx['load_start']}; after part 1: "
      f"{ctx['load_end_tp']} (anything else running on the machine lowers the absolute "
      f"figures and widens the min-max ranges)")
    w("")
    w("## 1. Throughput (redis-benchmark, loopback)")
    w("")
    w(f"{CLIENTS} clients; {prof['reps']} runs of each command, interleaved CF, set, CF, "
      f"set, ...; the median of the runs (min-max in brackets).")
    w("")
    w(f"- ADD runs: before every CF.ADD run `DEL {CF_KEY}` + `CF.RESERVE {CF_KEY} {RESERVE}` "
      f"(bucket size 2, 12-bit fingerprints, so it never grows; checked after each run: 1 "
      f"sub-filter, items = requests); before every SADD run `DEL {SET_KEY}`. Keys drawn "
      f"from `-r {ADD_RANGE}`, not 1000000: the module refuses a 5th copy of one item at "
      f"bucket size 2 (`Filter is full`, a documented difference from RedisBloom) and "
      f"redis-benchmark stops at the first error reply; with `-r 1000000` a random item "
      f"gets its 5th CF.ADD after about 130k-180k requests.")
    w(f"- EXISTS runs: both keys preloaded with the same {fmt_int(prof['preload'])} items "
      f"`item:000000000000` ... (the form `__rand_int__` takes) through CF.INSERT / SADD "
      f"batches of {BATCH}; keys drawn from `-r {2 * prof['preload']}`, so about half the "
      f"lookups hit. Filter: {fmt_int(exists_info['Number of items inserted'])} items, "
      f"{exists_info['Number of filters']} sub-filter, "
      f"{fmt_int(exists_info['Number of buckets'])} buckets of {exists_info['Bucket size']}.")
    w(f"- MEXISTS runs: the same keys, {MEXISTS_ITEMS} random ones per command; ops/s "
      f"counts commands (keys/s = {MEXISTS_ITEMS} x ops/s).")
    w("")
    w("| commands | -P | requests/run | CF ops/s | set ops/s | CF/set | CF p50 ms | set p50 ms |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|")
    for title, pipe, n, res in tp_rows:
        cf = [x["rps"] for x in res["cf"]]
        st = [x["rps"] for x in res["set"]]
        w(f"| {title} | {pipe} | {fmt_int(n)} | {fmt_int(median(cf))} "
          f"[{fmt_int(min(cf))}-{fmt_int(max(cf))}] | {fmt_int(median(st))} "
          f"[{fmt_int(min(st))}-{fmt_int(max(st))}] | {median(cf) / median(st):.2f} | "
          f"{median([x['p50'] for x in res['cf']]):.3f} | "
          f"{median([x['p50'] for x in res['set']]):.3f} |")
    w("")
    w("Commands (CSV output parsed):")
    w("")
    w("```")
    for line in ctx["bench_commands"]:
        w(line)
    w("```")
    w("")
    w("## 2. Memory per item")
    w("")
    w("Items `user:0` ... `user:<N-1>`; filters made with `CF.RESERVE k N` "
      "(bucket size 2, 12-bit fingerprints) and `CF.RESERVE k N FPBITS 8`, loaded with "
      f"`CF.INSERT k NOCREATE ITEMS ...` ({BATCH} per command); the set with `SADD` "
      f"({BATCH} per command). Bytes = `MEMORY USAGE key` (`SAMPLES 0` for the set: every "
      "member counted), which includes the key's name and dict entry. `used_memory` delta "
      "= INFO used_memory after minus before loading that key (allocator size classes "
      "included; indicative only, it can also hold leftovers of the loading client's "
      "buffers). All N items were checked present afterwards (no false negatives).")
    w("")
    w("| N | structure | MEMORY USAGE bytes | bytes/item | used_memory delta | "
      "delta/item | sub-filters | load |")
    w("|---:|---|---:|---:|---:|---:|---:|---:|")
    for row in mem_rows:
        n = row["n"]
        for name, label in (("cf12", "CF, 12-bit fp (default)"), ("cf8", "CF, FPBITS 8")):
            c = row[name]
            w(f"| {fmt_int(n)} | {label} | {fmt_int(c['usage'])} | {c['usage'] / n:.2f} | "
              f"{fmt_int(c['delta'])} | {c['delta'] / n:.2f} | "
              f"{c['info']['Number of filters']} | {100 * c['load']:.1f} % |")
        s = row["set"]
        w(f"| {fmt_int(n)} | Redis set ({s['encoding']}) | {fmt_int(s['usage'])} | "
          f"{s['usage'] / n:.2f} | {fmt_int(s['delta'])} | {s['delta'] / n:.2f} | - | - |")
        rb = row["rb"]
        w(f"| {fmt_int(n)} | RedisBloom layout (computed) | {fmt_int(rb['usage'])} | "
          f"{rb['usage'] / n:.2f} | - | - | {rb['filters']} | "
          f"{100 * n / (rb['slots'] * rb['filters']):.1f} % |")
    w("")
    w("RedisBloom layout, computed from its sizing rules (semantics §2-3), not measured: "
      "`CF.RESERVE k N` gives sub-filters of nextPow2(floor(N/2)) buckets of 2 one-byte "
      "slots; CF.INFO Size = 40 + 16 x sub-filters + slots; MEMORY USAGE = Size + the same "
      "key overhead as measured for our filter. **Assumption**: a sub-filter takes items "
      "up to 84 % load (bucket size 2) before a second one of the same size is added "
      "(expansion 1), so sub-filters = ceil(N / (0.84 x slots per sub-filter)). "
      "Allocator rounding is not included (nor is it in MEMORY USAGE of ours).")
    w("")
    w("| N | RedisBloom buckets | slots per sub-filter | sub-filters | CF.INFO Size |")
    w("|---:|---:|---:|---:|---:|")
    for row in mem_rows:
        rb = row["rb"]
        w(f"| {fmt_int(row['n'])} | {fmt_int(rb['buckets'])} | {fmt_int(rb['slots'])} | "
          f"{rb['filters']} | {fmt_int(rb['size'])} |")
    w("")
    w("Bytes per filter, by capacity (empty filters; the eviction search runs on the "
      "stack at the default MAXITERATIONS):")
    w("")
    w(sizes_report(sizes))
    w(f"## 3. False positives ({fmt_int(probes)} absent items `user:10000000` ..., "
      f"CF.MEXISTS, {BATCH} per command)")
    w("")
    w("Expected: a probe compares with the 2 x b slots of its two buckets in every "
      "sub-filter; 1 - (1 - p)^(2 b x sum of sub-filter loads), with p the chance that one "
      "slot matches: for ours, the library's cf_expected_fpr computes it (called from "
      "libcuckoofilter.so), and p = 1/255 for RedisBloom (fingerprints 1..255). "
      "RedisBloom's bound is 2b/255 = 1.57 % per full sub-filter, adding up over "
      "sub-filters.")
    w("")
    w("| N | structure | false positives | measured rate | expected rate |")
    w("|---:|---|---:|---:|---:|")
    for row in mem_rows:
        n = row["n"]
        for name, label in (("cf12", "CF, 12-bit fp (default)"), ("cf8", "CF, FPBITS 8")):
            c = row[name]
            w(f"| {fmt_int(n)} | {label} | {fmt_int(c['hits'])} | {fmt_pct(c['fpr'])} | "
              f"{fmt_pct(c['expected'])} |")
        rb = row["rb"]
        w(f"| {fmt_int(n)} | RedisBloom layout (computed) | - | - | {fmt_pct(rb['fpr'])} "
          f"(bound {fmt_pct(rb['fpr_bound'])}) |")
    w("")
    w("Commands for parts 2-3, per N: " + "; ".join(
        f"`{mem_rows[0][k]['command'].replace(str(mem_rows[0]['n']), 'N')}`"
        for k in ("cf12", "cf8")) + "; `CF.INSERT k NOCREATE ITEMS user:0 ...`; "
      "`SADD set:N user:0 ...`; `MEMORY USAGE k` (`SAMPLES 0` for the set); `CF.INFO k`; "
      "`CF.MEXISTS k user:10000000 ...`.")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smaller N and fewer requests: a smoke run in well under 20 s")
    ap.add_argument("--module", default=harness.MODULE,
                    help="the module to load (default: %(default)s)")
    ap.add_argument("--out", help="also write the report to this file")
    ap.add_argument("--sizes", action="store_true",
                    help="only the table of bytes per filter by capacity (a few seconds)")
    args = ap.parse_args()

    module = os.path.abspath(args.module)
    global MODULE_PATH
    MODULE_PATH = module
    if not os.path.isfile(module):
        sys.exit(f"redis_bench: {module} not found (run make first)")
    for tool in ("redis-server",) + (() if args.sizes else ("redis-benchmark",)):
        if not shutil.which(tool):
            sys.exit(f"redis_bench: {tool} not found (scripts/install-deps)")
    harness.MODULE = module  # what Server() puts on its loadmodule line

    profile = "quick" if args.quick else "full"
    prof = PROFILES[profile]
    start = time.time()
    server = harness.Server()
    try:
        server.start()
        r = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=300)
        info = r.info()
        mods = r.execute_command("MODULE", "LIST")
        ctx = dict(
            profile=profile, prof=prof, cpu=cpu_model(), nproc=os.cpu_count(),
            server_version=tool_version(["redis-server", "--version"]),
            bench_version=tool_version(["redis-benchmark", "--version"]),
            redis_version=info["redis_version"], malloc=info.get("mem_allocator", "?"),
            module=module, port=server.port,
            modules=", ".join(
                "{} v{}".format(*(m[b"name"].decode(), m[b"ver"]) if isinstance(m, dict) else
                                (m[1].decode(), m[3])) for m in mods),
            date=time.strftime("%Y-%m-%d %H:%M:%S %Z"), load_start=loadavg())
        if args.sizes:
            text = sizes_report(filter_sizes(r))
        else:
            bench = Bench(server.port, r)
            log(f"redis_bench ({profile}): server on port {server.port}; part 1: redis-benchmark")
            tp_rows, exists_info = throughput(bench, prof)
            ctx["bench_commands"] = bench.commands
            ctx["load_end_tp"] = loadavg()
            log("part 2: memory and false positives")
            mem_rows, probes = memory(r, prof)
            sizes = filter_sizes(r)
            text = report(ctx, tp_rows, exists_info, mem_rows, probes, sizes, time.time() - start)
    except Exception:
        if server.proc is not None:
            log("server log (tail):\n" + server.log())
        raise
    finally:
        server.stop()
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    log(f"done in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
