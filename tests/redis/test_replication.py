#!/usr/bin/env python3
"""Replication of the cuckoo filter module between real redis-server processes.

A primary and a replica linked from the start (the replica gets every write through the
replication stream), then a second replica, with other module arguments, that joins
mid-stream (a full sync: the RDB, with an incomplete CF.LOADCHUNK filter in it, then the
stream). A seeded random stream of a few thousand writes over ~10 keys: CF.RESERVE with
every option, CF.ADD / CF.ADDNX on new keys (auto-creation, whose secret seed must travel)
and existing ones, CF.INSERT / CF.INSERTNX with CAPACITY / NOCREATE, CF.DEL of added and
never-added items, CF.COMPACT, CF.LOADCHUNK sessions copying a key (some with a refused
chunk, after which the module deletes the key and replicates a DEL), DEL, scripts and
MULTI/EXEC. Afterwards every key must be identical on all three servers: DEBUG
DIGEST-VALUE, CF.SCANDUMP bytes, CF.INFO, membership answers, and DEBUG DIGEST of the
whole dataset. Writes on a replica, CF.COMPACT included, are refused with READONLY.

The filters' secret seeds are random, so false positives (and with them a few choices of
the stream) differ from run to run: CF_TEST_SEED repeats the stream closely, not exactly.

Environment: CF_REDIS_MODULE, CF_REDIS_SERVER, CF_TEST_SEED. Exit 0 pass, else failure (a
missing server too).
"""

import collections
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import RespError, Server, wait_for  # noqa: E402
import cf_state as S  # noqa: E402
from cf_state import check, ok  # noqa: E402

KEYS = [f"k{i}" for i in range(10)]
OTHER_MODULE_ARGS = ["cf-bucket-size", 4, "cf-fingerprint-bits", 16, "cf-initial-size", 500,
                     "cf-max-iterations", 7, "cf-expansion-factor", 2, "cf-max-expansions", 5,
                     "cf-layout", "redisbloom"]
ALLOWED_ERRORS = (
    "ERR item exists",
    "WRONGTYPE Operation against a key holding the wrong kind of value",
    "Not found",
    "Cuckoo filter was not found",
    "Filter is full",
    "Filter is full for this item: its copies fill both of its buckets "
    "(CF.ADDNX adds an item once)",
    "Maximum expansions reached",
    "ERR not found",
    "ERR the filter is incomplete: CF.LOADCHUNK has not received all of its chunks",
    # FPBITS other than 8 once the primary's cf-layout is redisbloom
    "ERR the redisbloom layout takes FPBITS 8 only, no SEMISORT and no SEED (LAYOUT native does)",
    # ... and MAXFILTERS (RedisBloom's limit is the server's cf-max-expansions)
    "ERR the redisbloom layout takes its sub-filter limit from cf-max-expansions, as "
    "RedisBloom does: no MAXFILTERS (LAYOUT native has it)",
)


class Stream:
    """The random writes, and what each key must contain (an oracle for false negatives)."""

    def __init__(self, c, rng):
        self.c = c
        self.rng = rng
        self.pool = [f"item{i}" for i in range(4000)]
        self.never = [f"never{i}" for i in range(2000)]  # never added anywhere
        self.items = {}      # key -> Counter of items added (copies)
        self.tainted = set()  # keys where a delete or ADDNX may have hit another item
        self.sessions = []   # open CF.LOADCHUNK sessions: [dst, remaining chunks, refuse]
        self.copies = 0
        self.refused = 0
        self.writes = 0
        self.created_by_add = 0

    # --- the oracle --------------------------------------------------------------------
    def forget(self, key):
        self.items.pop(key, None)
        self.tainted.discard(key)

    def record(self, cmd, r):
        name, key = cmd[0].upper(), cmd[1] if len(cmd) > 1 else None
        if isinstance(r, RespError):
            text = str(r)
            # (an error raised in a script has the script's position appended)
            check(text in ALLOWED_ERRORS or any(text.startswith(e + " script:")
                                                for e in ALLOWED_ERRORS),
                  f"{' '.join(map(str, cmd))[:200]}: unexpected error {r}")
            return
        self.writes += 1
        if name == "CF.RESERVE":
            ok(r, "CF.RESERVE")
            self.items[key] = collections.Counter()
        elif name in ("CF.ADD", "CF.ADDNX"):
            if key not in self.items:
                self.created_by_add += 1
            self.note_add(key, cmd[2], r, name == "CF.ADDNX")
        elif name in ("CF.INSERT", "CF.INSERTNX"):
            if key not in self.items:
                self.created_by_add += 1
            first = cmd.index("ITEMS") + 1
            check(isinstance(r, list) and len(r) == len(cmd) - first, f"{cmd}: {r!r}")
            for x, a in zip(cmd[first:], r):
                check(a in (1, 0, -1) and (a != 0 or name == "CF.INSERTNX"), f"{cmd}: {r!r}")
                if a != -1:
                    self.note_add(key, x, a, name == "CF.INSERTNX")
                else:
                    self.items.setdefault(key, collections.Counter())
        elif name == "CF.DEL":
            check(r in (0, 1), f"{cmd}: {r!r}")
            bag = self.items.setdefault(key, collections.Counter())
            x = cmd[2]
            if bag[x] > 0:
                if r == 1:
                    bag[x] -= 1
                else:
                    check(key in self.tainted,
                          f"CF.DEL {key} {x}: 0 for an item added {bag[x]} time(s)")
            elif r == 1:
                self.tainted.add(key)  # it removed some other item's fingerprint
        elif name == "CF.COMPACT":
            ok(r, "CF.COMPACT")
        elif name == "DEL":
            self.forget(key)
        elif name == "CF.LOADCHUNK":
            ok(r, "CF.LOADCHUNK")

    def note_add(self, key, x, r, nx):
        bag = self.items.setdefault(key, collections.Counter())
        if r == 1:
            bag[x] += 1
        elif nx and r == 0:
            if bag[x] == 0:
                self.tainted.add(key)  # a false positive: x rests on another's fingerprint
        else:
            raise S.TestFailure(f"add {key} {x}: {r!r}")

    # --- the writes --------------------------------------------------------------------
    def item(self, key):
        bag = self.items.get(key)
        if bag and self.rng.random() < 0.7:
            live = [x for x, n in bag.items() if n > 0]
            if live:
                return self.rng.choice(live)
        if self.rng.random() < 0.2:
            return self.rng.choice(self.never)
        return self.rng.choice(self.pool)

    def reserve(self, key):
        rng = self.rng
        cmd = ["CF.RESERVE", key]
        opts = []
        bucket = rng.choice([1, 2, 3, 4, 6, 8])
        if rng.random() < 0.7:
            opts += ["BUCKETSIZE", bucket]
        else:
            bucket = 2
        if rng.random() < 0.5:
            opts += ["MAXITERATIONS", rng.choice([1, 3, 20, 100, 500])]
        if rng.random() < 0.6:
            opts += ["EXPANSION", rng.choice([0, 1, 1, 2, 3, 4])]
        if rng.random() < 0.6:
            opts += ["FPBITS", rng.choice([4, 6, 8, 12, 16, 20, 32])]
        if rng.random() < 0.4:
            opts += ["MAXFILTERS", rng.choice([1, 2, 5, 32])]
        if rng.random() < 0.2:  # RedisBloom's layout: 8-bit fingerprints only, and the
            # server's cf-max-expansions, no MAXFILTERS
            opts = [x for i, x in enumerate(opts)
                    if (opts[i - i % 2] != "FPBITS" or opts[i - i % 2 + 1] == 8) and
                    opts[i - i % 2] != "MAXFILTERS"]
            opts += ["LAYOUT", "redisbloom"]
        pairs = [opts[i:i + 2] for i in range(0, len(opts), 2)]
        rng.shuffle(pairs)
        cmd.append(rng.randrange(2 * bucket, 1500))
        for p in pairs:
            cmd += p
        return cmd

    def insert(self, key, nx):
        rng = self.rng
        cmd = ["CF.INSERTNX" if nx else "CF.INSERT", key]
        if rng.random() < 0.3:
            # 4 to 7: valid under the primary's cf-bucket-size 2, not the second replica's 4
            cmd += ["CAPACITY", rng.choice([4, 5, 7, 50, rng.randrange(4, 3000)])]
        if rng.random() < 0.2:
            cmd += ["NOCREATE"]
        cmd += ["ITEMS"] + [self.item(key) for _ in range(rng.randrange(1, 6))]
        return cmd

    def one(self):
        rng = self.rng
        key = rng.choice(KEYS)
        p = rng.random()
        if p < 0.30:
            return ["CF.ADD", key, self.item(key)]
        if p < 0.40:
            return ["CF.ADDNX", key, self.item(key)]
        if p < 0.52:
            return self.insert(key, False)
        if p < 0.58:
            return self.insert(key, True)
        if p < 0.80:
            return ["CF.DEL", key, self.item(key)]
        if p < 0.86:
            return self.reserve(key)
        if p < 0.90:
            return ["CF.COMPACT", key]
        if p < 0.92:
            return ["DEL", key]
        return ["CF.ADD", rng.choice(KEYS), self.item(key)]

    def batch(self, n):
        cmds = [self.one() for _ in range(n)]
        for cmd, r in zip(cmds, self.c.pipeline(cmds)):
            self.record(cmd, r)

    def start_copy(self, refuse=None, largest=False):
        """Begin copying a filter key into a new key, chunk by chunk."""
        srcs = [k for k in KEYS if k in self.items and self.c.call("TYPE", k) == "cuckoo-cf"]
        srcs = [k for k in srcs if self.is_complete(k)]
        if not srcs:
            return
        if largest:
            src = max(srcs, key=lambda k: (len(S.scandump(self.c, k)), k))
        else:
            src = self.rng.choice(srcs)
        dst = f"copy{self.copies}"
        self.copies += 1
        chunks = S.scandump(self.c, src)
        if refuse is None:
            refuse = self.rng.random() < 0.3
        self.sessions.append([dst, chunks, refuse, src, collections.Counter(self.items[src]),
                              src in self.tainted])
        return dst

    def is_complete(self, key):
        r = self.c.call_raw("CF.EXISTS", key, "x")
        return not isinstance(r, RespError)

    def step_copies(self):
        """Send the next chunk of each open session."""
        for s in list(self.sessions):
            dst, chunks, refuse, src, bag, tainted = s
            it, data = chunks.pop(0)
            if refuse and len(chunks) == 0 and it > 0:
                bad = bytearray(data)
                bad[len(bad) // 2] ^= 0x04
                r = self.c.call_raw("CF.LOADCHUNK", dst, it, bytes(bad))
                check(isinstance(r, RespError) and str(r).startswith("Couldn't load chunk!"),
                      f"CF.LOADCHUNK {dst} with a damaged last chunk: {r!r}")
                check(self.c.call("EXISTS", dst) == 0, f"{dst} survived its refused chunk")
                self.refused += 1
                self.sessions.remove(s)
                continue
            r = self.c.call_raw("CF.LOADCHUNK", dst, it, data)
            ok(r, f"CF.LOADCHUNK {dst} {it}")
            self.writes += 1
            if not chunks:
                self.sessions.remove(s)
                self.items[dst] = bag
                if tainted:
                    self.tainted.add(dst)

    def scripted(self):
        """Creations and writes from a script and from MULTI/EXEC."""
        key = self.rng.choice(KEYS)
        x = self.item(key)
        r = self.c.call_raw("EVAL", "return redis.call('CF.ADD', KEYS[1], ARGV[1])", 1, key, x)
        self.record(["CF.ADD", key, x], r)
        key2 = self.rng.choice(KEYS)
        cmds = [["CF.ADD", key2, self.item(key2)], self.insert(key2, False),
                ["CF.DEL", key2, self.item(key2)]]
        ok(self.c.call("MULTI"), "MULTI")
        for cmd in cmds:
            q = self.c.call_raw(*cmd)
            check(q == "QUEUED", f"{cmd} in MULTI: {q!r}")
        rs = self.c.call("EXEC")
        check(isinstance(rs, list) and len(rs) == len(cmds), f"EXEC: {rs!r}")
        for cmd, r in zip(cmds, rs):
            self.record(cmd, r)

    def run(self, rounds, batch=40):
        for i in range(rounds):
            self.batch(batch)
            # One filter that surely grows to many sub-filters (the random keys may not).
            cmds = [["CF.ADD", "grower", f"g{self.rng.getrandbits(40)}"] for _ in range(6)]
            if "grower" not in self.items:
                cmds.insert(0, ["CF.RESERVE", "grower", 40, "EXPANSION", 1, "BUCKETSIZE", 4])
            # And one segmented (format 3: 17M items are past the default's switch).
            cmds += [["CF.ADD", "segmented", f"s{self.rng.getrandbits(40)}"] for _ in range(4)]
            if "segmented" not in self.items:
                cmds.insert(len(cmds) - 4, ["CF.RESERVE", "segmented", 17000000,
                                            "BUCKETSIZE", 4, "FPBITS", 12])
            for cmd, r in zip(cmds, self.c.pipeline(cmds)):
                self.record(cmd, r)
            if i % 10 == 3:
                self.scripted()
            if i % 15 == 7 and len(self.sessions) < 3:
                self.start_copy()
            self.step_copies()
        self.c.call("SET", "plain", f"string {self.writes}")

    def finish_copies(self):
        while self.sessions:
            self.step_copies()

    def extras(self, keys):
        out = {}
        absent = self.never[:1000] + [f"absent{i}" for i in range(4000)]
        for k in keys:
            bag = self.items.get(k, collections.Counter())
            live = sorted(x for x, n in bag.items() if n > 0)
            if k in self.tainted:
                out[k] = ((), live + absent)
            else:
                out[k] = (live, absent)
        return out


def repl_offset(server, field):
    with server.client() as c:
        for line in c.call("INFO", "replication").decode().splitlines():
            if line.startswith(field + ":"):
                return int(line.split(":")[1])
    raise S.TestFailure(f"no {field} in INFO replication of port {server.port}")


def compare_all(primary, replicas, stream, what):
    # WAIT on the connection that wrote (WAIT waits for that client's last write).
    n = stream.c.call("WAIT", len(replicas), 20000)
    check(n == len(replicas), f"{what}: WAIT: {n} of {len(replicas)} replicas acknowledged")
    target = repl_offset(primary, "master_repl_offset")
    for r in replicas:
        wait_for(lambda: repl_offset(r, "slave_repl_offset") >= target, 20,
                 f"{what}: the replica on port {r.port} to reach offset {target}")
    with primary.client() as cp:
        offset = repl_offset(primary, "master_repl_offset")
        check(offset == target, f"{what}: the primary's offset moved ({target} -> {offset})")
        keys = S.keys_of(cp)
        base = S.dataset_snapshot(cp, stream.extras(keys))
    for r in replicas:
        with r.client() as cr:
            S.assert_same_dataset(base, S.dataset_snapshot(cr, stream.extras(keys)),
                                  f"{what}: primary vs replica on port {r.port}")
    return keys, offset


def check_readonly(replica):
    with replica.client() as c:
        for cmd in (["CF.ADD", "k0", "x"], ["CF.ADD", "fresh", "x"], ["CF.ADDNX", "k0", "x"],
                    ["CF.RESERVE", "fresh", 100], ["CF.INSERT", "k0", "ITEMS", "x"],
                    ["CF.INSERTNX", "k0", "ITEMS", "x"], ["CF.DEL", "k0", "x"],
                    ["CF.COMPACT", "k0"], ["CF.COMPACT", "fresh"],
                    ["CF.LOADCHUNK", "fresh", 1, "x"]):
            r = c.call_raw(*cmd)
            check(isinstance(r, RespError) and str(r).startswith("READONLY"),
                  f"{' '.join(map(str, cmd))} on a replica: {r!r}")
        check(c.call("EXISTS", "fresh") == 0, "a write on the replica made a key")
        # Reads work on a replica.
        c.call("CF.EXISTS", "k0", "x")
        c.call("CF.MEXISTS", "k0", "x", "y")
        c.call("CF.COUNT", "k0", "x")


def check_maxmemory_replica(primary, servers):
    """A replica whose maxmemory is below its primary's data still takes every filter, by
    full sync and from the stream: the server does not hold loading or the primary's
    writes to maxmemory, and neither may the module (it did: the replica refused the RDB
    and stopped)."""
    cp = primary.client()
    big = ["CF.RESERVE", "mm:big", 15000000, "FPBITS", 16, "BUCKETSIZE", 4]  # ~32 MB
    ok(cp.call_raw(*big), "CF.RESERVE mm:big")
    cp.pipeline([("CF.ADD", "mm:big", f"m{i}") for i in range(2000)])
    r = Server(extra=[("replicaof", "127.0.0.1", primary.port), ("maxmemory", "20mb")])
    servers.append(r)
    r.start()
    wait_for(lambda: S.link_up(r), 30, "the small replica's link (full sync)")
    ok(cp.call_raw("CF.RESERVE", "mm:big2", *big[2:]), "CF.RESERVE mm:big2")
    cp.pipeline([("CF.ADD", "mm:big2", f"m{i}") for i in range(2000)])
    cp.call("WAIT", 1, 10000)
    with r.client() as cr:
        wait_for(lambda: cr.call("EXISTS", "mm:big2") == 1, 20, "mm:big2 on the small replica")
        for key in ("mm:big", "mm:big2"):
            check(S.digest(cr, key) == S.digest(cp, key),
                  f"{key}: differs on the replica with maxmemory 20mb")
    r.stop()
    cp.call("DEL", "mm:big", "mm:big2")
    cp.close()


def main():
    S.require_tools()
    servers = []

    def body(seed):
        rng = random.Random(seed)
        t0 = time.time()
        primary = Server(extra=[("repl-diskless-sync", "yes"),
                                ("repl-diskless-sync-delay", "0")])
        servers.append(primary)
        primary.start()
        r1 = Server(extra=[("replicaof", "127.0.0.1", primary.port)])
        servers.append(r1)
        r1.start()
        wait_for(lambda: S.link_up(r1), 20, "the first replica's link")

        cp = primary.client()
        stream = Stream(cp, rng)
        stream.run(50)
        # A filter grown to many sub-filters, then emptied and compacted back to a few,
        # right before the full sync.
        items = [f"s{i}" for i in range(400)]
        cmds = [["CF.RESERVE", "shrunk", 40, "EXPANSION", 1]]
        cmds += [["CF.ADD", "shrunk", x] for x in items]
        cmds += [["CF.DEL", "shrunk", x] for x in items[:380]] + [["CF.COMPACT", "shrunk"]]
        for cmd, r in zip(cmds, cp.pipeline(cmds)):
            stream.record(cmd, r)
        n = S.info_dict(cp, "shrunk")["Number of filters"]
        check(n <= 2, f"shrunk has {n} sub-filters after the compaction")
        # An incomplete chunked copy at the moment the second replica syncs.
        dst = stream.start_copy(refuse=False, largest=True)
        check(dst is not None, "no filter to copy")
        stream.step_copies()  # the header
        if len(stream.sessions[-1][1]) > 1:
            stream.step_copies()  # and a data chunk, when that leaves one to send
        check(S.info(cp, dst) is not None and not stream.is_complete(dst),
              f"{dst} should be incomplete")
        # The second replica runs with other module arguments: every filter the primary
        # makes, auto-created ones included, must carry its own parameters.
        r2 = Server(extra=[("replicaof", "127.0.0.1", primary.port),
                           ("repl-diskless-load", "swapdb")],
                    module_args=OTHER_MODULE_ARGS)
        servers.append(r2)
        r2.start()
        wait_for(lambda: S.link_up(r2), 20, "the second replica's link (full sync)")
        with r2.client() as c2:
            check(c2.call("TYPE", dst) == "cuckoo-cf", f"{dst} did not reach the new replica")
            check(S.scandump(c2, dst) == S.scandump(cp, dst),
                  f"{dst}: the incomplete filter differs on the new replica")
        compare_all(primary, [r1, r2], stream, "after the full sync")
        stream.run(60)
        stream.finish_copies()
        check(S.scandump(cp, dst) is not None and stream.is_complete(dst), f"{dst} completed")
        # A refused chunk: the module removes the key and replicates a DEL.
        lost = stream.start_copy(refuse=True)
        stream.finish_copies()
        keys, _ = compare_all(primary, [r1, r2], stream, "after the stream")
        check(lost not in keys, f"{lost} survived its refused chunk")
        with r1.client() as c1:
            check(c1.call("EXISTS", lost) == 0, f"{lost} survived on the replica")
        # Auto-created filters in RedisBloom's layout from here on, on the primary's say.
        ok(cp.call_raw("CONFIG", "SET", "cuckoo.cf-layout", "redisbloom"), "cf-layout")
        stream.run(30)
        keys, _ = compare_all(primary, [r1, r2], stream, "with cf-layout redisbloom")
        ok(cp.call_raw("CONFIG", "SET", "cuckoo.cf-layout", "native"), "cf-layout native")

        cf_keys = [k for k in keys if cp.call("TYPE", k) == "cuckoo-cf"]
        rb_keys = [k for k in keys if cp.call("TYPE", k) == "MBbloomCF"]
        check(len(rb_keys) >= 2, f"only {len(rb_keys)} filters of RedisBloom's layout")
        grown = [k for k in cf_keys if S.info_dict(cp, k)["Number of filters"] > 1]
        check(S.info_dict(cp, "grower")["Number of filters"] >= 8, "grower did not grow")
        check(stream.writes > 2000, f"only {stream.writes} successful writes")
        check(len(cf_keys) >= 8, f"only {len(cf_keys)} filters at the end: {keys}")
        check(stream.created_by_add > 5, f"only {stream.created_by_add} auto-creations")
        check(stream.copies >= 4 and stream.refused >= 1,
              f"{stream.copies} chunked copies, {stream.refused} refused")
        check(grown, "no filter grew")
        check_readonly(r1)
        check_readonly(r2)
        check_maxmemory_replica(primary, servers)
        cp.close()
        print(f"{stream.writes} writes, {len(cf_keys)} filters ({len(grown)} grown), "
              f"{len(rb_keys)} of RedisBloom's layout, "
              f"{stream.created_by_add} auto-created, {stream.copies} chunked copies "
              f"({stream.refused} refused), {len(stream.tainted)} tainted, "
              f"{time.time() - t0:.1f}s")

    S.run("test_replication", body, servers)


if __name__ == "__main__":
    main()
