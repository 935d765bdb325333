#!/usr/bin/env python3
"""RedisBloom's cuckoo filters moved to the module: its RDB values (type MBbloomCF) in,
through RESTORE, and back out through DUMP, SAVE and a restart.

The filters are made here by RedisBloom's rules, with a model of its algorithms written
from docs/FORMAT.md ("Hash id 2"): MurmurHash64A, fingerprints h % 255 + 1, buckets
h mod m and (h XOR fp * 0x5bd1e995) mod m, inserts into the first free slot newest
sub-filter first, its eviction walk, growth by the expansion. A record is what
RedisBloom's rdb_save writes (encoding 4: every field and each sub-filter's size;
encoding 3: before growth by a factor).

Checks, on each server:
- The payload restores; TYPE says MBbloomCF; CF.INFO gives the record's shape; every item
  is found, and items never added get exactly the model's answers (the same false
  positives, since the same fingerprints sit in the same buckets).
- The key's DUMP is the restored payload, byte for byte: RedisBloom's own format, which
  RedisBloom loads again.
- Adds after the move (inserts, evictions, growth) and deletes: the server's answers and
  its DUMP equal the model's after the same commands.
- SAVE and a restart: the filter comes back, of the same type, every item found.
- Forged records (a wrong length, sizes that are no power of two, an expansion of 3, no
  sub-filter, a newer encoding) get ERR Bad data format and leave no key.

Environment: CF_REDIS_MODULE, CF_REDIS_SERVER, CF_TEST_SEED. Exit 0 = pass.
"""

import glob
import os
import shutil
import struct
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import harness  # noqa: E402
from harness import RespError, Server  # noqa: E402
import cf_state as S  # noqa: E402
from rb_reference import murmur64a  # noqa: E402
from cf_state import check, ok  # noqa: E402
from test_persistence import (OP_EOF, OP_STRING, OP_UINT, enc_len, serialize,  # noqa: E402
                              split_payload, wait_rewrite, wrap)

MASK = (1 << 64) - 1
SLICE = 16 << 20  # RedisBloom's largest data chunk
ALT_MULT = 0x5bd1e995
TYPE_NAME = "MBbloomCF"
CHARSET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"



def module_id(name, encver):
    """A module type's id in an RDB: 9 characters of 6 bits each, then 10 bits of
    encoding version."""
    v = 0
    for ch in name:
        v = (v << 6) | CHARSET.index(ch)
    return (v << 10) | encver


def pow2_up(x):
    p = 1
    while p < x:
        p *= 2
    return p


class Model:
    """A RedisBloom cuckoo filter: byte arrays and its rules."""

    def __init__(self, capacity, b=2, kicks=20, expansion=1, max_tables=32):
        self.b, self.kicks, self.max_tables = b, kicks, max_tables
        self.e = pow2_up(expansion) if expansion else 0
        self.m = [pow2_up(max(capacity // b, 1))]
        self.t = [bytearray(self.m[0] * b)]
        self.deletes = 0

    def key(self, item):
        h = murmur64a(item)
        return h, h % 255 + 1

    def pair(self, k, h, fp):
        m = self.m[k]
        return h % m, (h ^ (fp * ALT_MULT & MASK)) % m

    def slot_free(self, k, i):
        b, t = self.b, self.t[k]
        for j in range(b):
            if t[i * b + j] == 0:
                return i * b + j
        return -1

    def put(self, k, i, fp):
        at = self.slot_free(k, i)
        if at >= 0:
            self.t[k][at] = fp
        return at >= 0

    def bucket(self, k, i):
        return self.t[k][i * self.b:(i + 1) * self.b]

    def add(self, item):
        h, fp = self.key(item)
        for k in reversed(range(len(self.t))):
            i1, i2 = self.pair(k, h, fp)
            if self.put(k, i1, fp) or self.put(k, i2, fp):
                return True
        top = len(self.t) - 1
        i1, i2 = self.pair(top, h, fp)
        if all(x == fp for x in self.bucket(top, i1)) and all(x == fp for x in self.bucket(top, i2)):
            return False  # the module's hot-key rule: full rather than a new sub-filter
        t, m, b, i, victim, carry = self.t[top], self.m[top], self.b, i1, 0, fp
        for _ in range(self.kicks):
            t[i * b + victim], carry = carry, t[i * b + victim]
            i = (i ^ (carry * ALT_MULT & MASK)) % m
            if self.put(top, i, carry):
                return True
            victim = (victim + 1) % b
        for _ in range(self.kicks):
            victim = (victim + b - 1) % b
            i = (i ^ (carry * ALT_MULT & MASK)) % m
            t[i * b + victim], carry = carry, t[i * b + victim]
        if self.e == 0 or len(self.t) >= self.max_tables:
            return False
        self.m.append(self.m[-1] * self.e)
        self.t.append(bytearray(self.m[-1] * b))
        self.put(len(self.t) - 1, self.pair(len(self.t) - 1, h, fp)[0], fp)
        return True

    def delete(self, item):
        h, fp = self.key(item)
        for k in reversed(range(len(self.t))):
            for i in self.pair(k, h, fp):
                for j in range(self.b):
                    if self.t[k][i * self.b + j] == fp:
                        self.t[k][i * self.b + j] = 0
                        return True
        return False

    def exists(self, item):
        h, fp = self.key(item)
        return any(fp in self.bucket(k, i) for k in range(len(self.t)) for i in self.pair(k, h, fp))

    def items(self):
        return sum(sum(1 for x in t if x) for t in self.t)

    def record(self, encver=4):
        """RedisBloom's rdb_save of this filter: the module value's elements."""
        e = [(OP_UINT, len(self.t)), (OP_UINT, self.m[0]), (OP_UINT, self.items())]
        if encver >= 4:
            e += [(OP_UINT, self.deletes), (OP_UINT, self.b), (OP_UINT, self.kicks),
                  (OP_UINT, self.e)]
        for m, t in zip(self.m, self.t):
            if encver >= 4:
                e.append((OP_UINT, m))
            e.append((OP_STRING, bytes(t)))
        return e + [(OP_EOF, None)]


def chunks(md):
    """RedisBloom's CF.SCANDUMP of the model: (iterator that comes with it, bytes)."""
    out = [(1, struct.pack("<QQQQHHH", md.items(), md.m[0], md.deletes, len(md.t), md.b,
                           md.kicks, md.e))]
    pos = 0
    for t in md.t:
        for off in range(0, len(t), SLICE):
            piece = bytes(t[off:off + SLICE])
            pos += len(piece)
            out.append((pos + 1, piece))
    return out


def payload(elems, version, encver=4):
    prefix = bytes([7]) + enc_len(module_id(TYPE_NAME, encver))  # RDB_TYPE_MODULE_2
    return wrap(serialize(prefix, elems), version)


def refused(c, data, what):
    r = c.call_raw("RESTORE", "forged", 0, data)
    check(isinstance(r, RespError) and str(r) == "ERR Bad data format",
          f"RESTORE of {what}: {r!r} (want ERR Bad data format)")
    check(c.call("EXISTS", "forged") == 0, f"{what}: a key was left")


def same_as_model(c, key, md, items, absent, what):
    got = S.mexists(c, key, items)
    check(all(got), f"{what}: {got.count(0)} of {len(items)} items not found")
    want = [int(md.exists(x)) for x in absent]
    got = S.mexists(c, key, absent)
    diff = sum(1 for a, b in zip(got, want) if a != b)
    check(diff == 0, f"{what}: {diff} of {len(absent)} items never added answered otherwise "
          f"than RedisBloom's filter would ({sum(want)} false positives expected)")
    return sum(want)


def body(seed):
    with Server(extra=[("rdbcompression", "no")]) as s:
        c = s.client()
        ok(c.call_raw("CF.RESERVE", "ours", 100), "CF.RESERVE ours")
        _, version = split_payload(c.call("DUMP", "ours"))  # this server's RDB version
        absent = [b"never-%d" % i for i in range(harness.scaled(20000))]

        # A grown filter (expansion 2, 3 sub-filters), made by RedisBloom's rules.
        md = Model(capacity=1000, b=2, kicks=20, expansion=2)
        items = []
        while len(md.t) < 3:
            x = b"rb-%d-%d" % (seed % 1000, len(items))
            check(md.add(x), "the model refused an item")
            items.append(x)
        md.deletes = 7
        p = payload(md.record(), version)
        ok(c.call_raw("RESTORE", "moved", 0, p), "RESTORE of a RedisBloom filter")
        check(c.call("TYPE", "moved") == TYPE_NAME, f"TYPE moved: {c.call('TYPE', 'moved')!r}")
        info = S.info_dict(c, "moved")
        want = {"Number of buckets": md.m[0], "Number of filters": 3,
                "Number of items inserted": md.items(), "Number of items deleted": 7,
                "Bucket size": 2, "Expansion rate": 2, "Max iterations": 20}
        check(all(info[k] == v for k, v in want.items()), f"CF.INFO moved: {info}")
        fps = same_as_model(c, "moved", md, items, absent, "restored")
        check(c.call("DUMP", "moved") == p, "DUMP of the moved filter is not the payload restored")

        # RedisBloom's chunks: CF.SCANDUMP gives them, CF.LOADCHUNK takes them.
        want = chunks(md)
        got = S.scandump(c, "moved")
        check(got == want, f"CF.SCANDUMP moved: {[(i, len(d)) for i, d in got]}, RedisBloom's "
              f"{[(i, len(d)) for i, d in want]}" + ("" if [d for _, d in got] != [d for _, d in want]
                                                    else " (bytes equal)"))
        S.loadchunks(c, "fromchunks", want)
        check(c.call("TYPE", "fromchunks") == TYPE_NAME, "CF.LOADCHUNK of RedisBloom's chunks")
        check(c.call("DUMP", "fromchunks") == p, "the filter RedisBloom's chunks made is another")
        header = want[0][1]
        # A client that decodes the bytes as text (node-redis, ioredis by default) sends
        # U+FFFD for every byte that is not UTF-8: the log says so.
        S.loadchunks(c, "mangled", want[:1])
        mangled = want[1][1].decode("utf-8", "replace").encode("utf-8")
        r = c.call_raw("CF.LOADCHUNK", "mangled", want[1][0], mangled)
        check(isinstance(r, RespError) and str(r) == "Couldn't load chunk!",
              f"CF.LOADCHUNK of a chunk decoded as text: {r!r}")
        check("U+FFFD" in s.log() and "Buffer" in s.log(),
              "the log does not say that the chunk was decoded as text")
        c.call("DEL", "mangled")

        def forged_header(what, want_err, **fields):
            v = dict(zip(("items", "m", "deletes", "n", "b", "kicks", "e"),
                         struct.unpack("<QQQQHHH", header)))
            v.update(fields)
            h = struct.pack("<QQQQHHH", *v.values())
            r = c.call_raw("CF.LOADCHUNK", "forged", 1, h)
            check(isinstance(r, RespError) and str(r).startswith(want_err),
                  f"CF.LOADCHUNK of a header with {what}: {r!r}")
            check(c.call("EXISTS", "forged") == 0, f"{what}: a key was left")
        forged_header("3 buckets", "Couldn't create filter!", m=3)
        forged_header("expansion 3", "Couldn't create filter!", e=3)
        forged_header("bucket size 0", "Couldn't create filter!", b=0)
        forged_header("no sub-filter", "Couldn't create filter!", n=0)
        forged_header("expansion 0 and 3 sub-filters", "Couldn't create filter!", e=0)
        r = c.call_raw("CF.LOADCHUNK", "forged", 1, header + b"\0")
        # (this server's layout is the native one: RedisBloom's "Invalid header" is for its)
        check(isinstance(r, RespError) and str(r) == "Couldn't create filter!",
              f"39-byte header: {r!r}")
        ok(c.call_raw("CONFIG", "SET", "maxmemory", str(64 << 20)), "maxmemory 64 MiB")
        forged_header("2^40 buckets", "Couldn't create filter!", m=1 << 40)
        ok(c.call_raw("CONFIG", "SET", "maxmemory", "0"), "maxmemory 0")
        S.loadchunks(c, "partial", want[:1])
        r = c.call_raw("CF.LOADCHUNK", "partial", want[1][0] + 1, want[1][1] + b"x")
        check(isinstance(r, RespError) and str(r) == "Couldn't load chunk!",
              f"a chunk past its sub-filter: {r!r}")
        r = c.call_raw("CF.LOADCHUNK", "partial", 1, header)
        check(isinstance(r, RespError) and str(r) == "ERR item exists", f"a second header: {r!r}")
        print(f"    restored a 3-sub-filter filter of {len(items)} items; "
              f"{fps} false positives of {len(absent)}, all as RedisBloom's")
        c.call("DEL", "partial")
        header_loads(c, header, want)

        # Adds after the move: inserts, evictions and growth as RedisBloom does them.
        more = [b"after-%d" % i for i in range(harness.scaled(6000))]
        for x in more:
            want_ok = md.add(x)
            r = c.call_raw("CF.ADD", "moved", x)
            check(r == 1 if want_ok else isinstance(r, RespError),
                  f"CF.ADD {x!r}: {r!r}, RedisBloom's filter {'took' if want_ok else 'refused'} it")
        items += more
        print(f"    {len(more)} adds after the move: {len(md.t)} sub-filters now")
        check(len(md.t) > 3, "the adds after the move did not make the filter grow")
        same_as_model(c, "moved", md, items, absent, "after adds")
        check(c.call("DUMP", "moved") == payload(md.record(), version),
              "after adds, the filter is not the one RedisBloom would hold")

        # Deletes, in a filter of one sub-filter (a grown one compacts after deletes).
        one = Model(capacity=4096, b=4, kicks=50, expansion=1)
        keep = [b"one-%d" % i for i in range(3000)]
        for x in keep:
            one.add(x)
        ok(c.call_raw("RESTORE", "one", 0, payload(one.record(), version)), "RESTORE one")
        gone = keep[:1000]
        for x in gone:
            check(c.call("CF.DEL", "one", x) == 1 and one.delete(x), f"CF.DEL one {x!r}")
        one.deletes = 1000
        same_as_model(c, "one", one, keep[1000:], absent, "after deletes")
        check(c.call("DUMP", "one") == payload(one.record(), version),
              "after deletes, the filter is not the one RedisBloom would hold")

        # An old record (encoding 3: every sub-filter of one size, the server's settings).
        old = Model(capacity=200, b=2, kicks=20, expansion=1)
        olds = []
        while len(old.t) < 2:
            olds.append(b"old-%d" % len(olds))
            old.add(olds[-1])
        ok(c.call_raw("RESTORE", "old", 0, payload(old.record(3), version, 3)),
           "RESTORE of an encoding-3 record")
        same_as_model(c, "old", old, olds, absent[:2000], "encoding 3")
        with open(os.path.join(s.dir, "server.log")) as f:
            log = f.read()
        check("RedisBloom cuckoo filter 'old' of RDB encoding 3, made by RedisBloom 2.0" in log,
              "the log does not warn of the encoding-3 filter's old hash")
        # Under cf-layout native: the way back to RedisBloom, said once whatever loads.
        check(log.count("To keep the way back to RedisBloom open, set cuckoo.cf-layout "
                            "redisbloom") == 1, "the way back is not logged exactly once")

        # Forged records.
        good = md.record()
        refused(c, payload(good, version, 5), "a newer encoding (5)")
        tables = [i for i, (op, _) in enumerate(good) if op == OP_STRING]
        e = list(good)
        e[tables[1]] = (OP_STRING, good[tables[1]][1][:-1])
        refused(c, payload(e, version), "a sub-filter one byte short")
        e = list(good)
        e[1] = (OP_UINT, md.m[0] + 2)
        refused(c, payload(e, version), "a first size that is no power of two")
        e = list(good)
        e[6] = (OP_UINT, 3)
        refused(c, payload(e, version), "an expansion of 3")
        e = list(good)
        e[0] = (OP_UINT, 0)
        refused(c, payload(e, version), "no sub-filter")
        e = list(good)
        e[tables[2] - 1] = (OP_UINT, md.m[2] * 2)
        refused(c, payload(e, version), "a sub-filter size that disagrees with its place")
        e = list(good)
        e[4] = (OP_UINT, 0)
        refused(c, payload(e, version), "bucket size 0")

        # SAVE and a restart: RedisBloom's format in the RDB file, loaded again.
        c.call("DEL", "partial", "fromchunks")
        before = c.call("DUMP", "moved")
        ok(c.call_raw("SAVE"), "SAVE")
        c.close()
        s.restart()
        c = s.client()
        check(c.call("TYPE", "moved") == TYPE_NAME, "after a restart, moved is not MBbloomCF")
        check(c.call("DUMP", "moved") == before, "after a restart, moved is another filter")
        same_as_model(c, "moved", md, items, absent, "after a restart")
        c.close()
    aof_rewrite(seed)


def used_memory(c):
    return int(re.search(rb"used_memory:(\d+)", c.call("INFO", "memory")).group(1))


def header_loads(c, header, want):
    """A RedisBloom header takes no table memory: the filter is incomplete (it expires
    unless its chunks come, its reads are refused) and each sub-filter takes its memory
    with its first chunk, in order; the last one completes it. Headers of more sub-filters
    than cf-max-expansions, and the deletes counter at its bound, are held to the rules
    every other path holds them to."""
    fields = dict(zip(("items", "m", "deletes", "n", "b", "kicks", "e"),
                      struct.unpack("<QQQQHHH", header)))

    def forged(**kw):
        v = dict(fields)
        v.update(kw)
        return struct.pack("<QQQQHHH", *v.values())
    # A header of 1 GiB (2^28 buckets of 4): no memory taken, an expiry, reads refused.
    before = used_memory(c)
    ok(c.call_raw("CF.LOADCHUNK", "big", 1, forged(m=1 << 28, b=4, n=1, e=1)), "a 1 GiB header")
    grew = used_memory(c) - before
    check(grew < (1 << 20), f"a 38-byte header took {grew} bytes")
    check(0 < c.call("TTL", "big") <= 600, f"the incomplete filter has no expiry: "
                                           f"{c.call('TTL', 'big')}")
    r = c.call_raw("CF.EXISTS", "big", "x")
    check(isinstance(r, RespError) and "incomplete" in str(r), f"CF.EXISTS of a header: {r!r}")
    c.call("DEL", "big")
    # In order only, each chunk once; the last removes the expiry; an incomplete one dumps
    # what it has.
    if len(want) > 2:
        ok(c.call_raw("CF.LOADCHUNK", "inorder", *want[0]), "the header")
        r = c.call_raw("CF.LOADCHUNK", "inorder", *want[2])
        check(isinstance(r, RespError) and str(r) == "Couldn't load chunk!",
              f"a chunk before its turn: {r!r}")
        ok(c.call_raw("CF.LOADCHUNK", "inorder", *want[1]), "the first data chunk")
        got = S.scandump(c, "inorder")  # its header counts the items so far
        check(got[1:] == want[1:2] and got[0][1][8:] == want[0][1][8:],
              "an incomplete filter dumps what it has")
        for it, data in want[2:]:
            ok(c.call_raw("CF.LOADCHUNK", "inorder", it, data), f"chunk {it}")
        check(c.call("TTL", "inorder") == -1, "the complete filter still expires")
        check(S.scandump(c, "inorder") == want, "the chunks loaded in order differ")
        c.call("DEL", "inorder")
    # More sub-filters than the server allows: refused (each would cost a probe per lookup).
    limit = int(c.call("CONFIG", "GET", "cuckoo.cf-max-expansions")[1])
    r = c.call_raw("CF.LOADCHUNK", "many", 1, forged(n=limit + 1, e=1, m=2, b=1))
    check(isinstance(r, RespError) and str(r) == "Couldn't create filter!",
          f"a header of {limit + 1} sub-filters: {r!r}")
    check(c.call("EXISTS", "many") == 0, "a header past the limit left a key")
    # The deletes counter at its bound stays there: the key's DUMP and chunks still load.
    top = (1 << 63) - 1
    ok(c.call_raw("CF.LOADCHUNK", "deletes", 1, forged(deletes=top, n=1, m=2, b=1, e=1,
                                                      items=0)), "deletes 2^63-1")
    ok(c.call_raw("CF.LOADCHUNK", "deletes", 3, b"\0\0"), "its one chunk")
    check(c.call("CF.ADD", "deletes", "x") == 1 and c.call("CF.DEL", "deletes", "x") == 1,
          "CF.ADD and CF.DEL at the bound of deletes")
    check(S.info_dict(c, "deletes")["Number of items deleted"] == top,
          "the deletes counter went past its bound")
    # (an item, so that its chunks carry it: an empty filter's walk is [0, nil] at once)
    check(c.call("CF.ADD", "deletes", "y") == 1, "CF.ADD y")
    dump = c.call("DUMP", "deletes")
    ok(c.call_raw("RESTORE", "deletes2", 0, dump), "RESTORE of the key at the bound")
    chunks_top = S.scandump(c, "deletes")
    S.loadchunks(c, "deletes3", chunks_top)
    check(S.scandump(c, "deletes3") == chunks_top, "its chunks load back")
    c.call("DEL", "deletes", "deletes2", "deletes3")
    # Its walk keeps no search memory: MAXITERATIONS 65535 costs what 20 does.
    ok(c.call_raw("CF.RESERVE", "walk", 1000, "MAXITERATIONS", 65535, "LAYOUT", "redisbloom"),
       "MAXITERATIONS 65535")
    ok(c.call_raw("CF.RESERVE", "walk20", 1000, "LAYOUT", "redisbloom"), "MAXITERATIONS 20")
    check(c.call("MEMORY", "USAGE", "walk") == c.call("MEMORY", "USAGE", "walk20"),
          f"MAXITERATIONS 65535 holds {c.call('MEMORY', 'USAGE', 'walk')} bytes, 20 holds "
          f"{c.call('MEMORY', 'USAGE', 'walk20')}")
    c.call("DEL", "walk", "walk20")


def limits(seed):
    """A filter of RedisBloom's layout has no sub-filter limit of its own (RedisBloom's
    formats have no room for one): the server's cf-max-expansions refuses a whole add
    command once the filter has that many, as RedisBloom does, so a restart, a RESTORE and
    a replica's full sync keep it. MAXFILTERS is refused in this layout."""
    del seed
    servers = []
    try:
        primary, replica = S.primary_and_replica(servers)
        c = primary.client()
        r = c.call_raw("CF.RESERVE", "rb", 4, "LAYOUT", "redisbloom", "MAXFILTERS", 2)
        check(isinstance(r, RespError) and "cf-max-expansions" in str(r),
              f"CF.RESERVE ... LAYOUT redisbloom MAXFILTERS 2: {r!r}")
        for s in (primary, replica):
            with s.client() as cs:
                ok(cs.call_raw("CONFIG", "SET", "cuckoo.cf-max-expansions", 2), "limit 2")
        ok(c.call_raw("CF.RESERVE", "rb", 4, "BUCKETSIZE", 1, "LAYOUT", "redisbloom"),
           "CF.RESERVE rb")
        added = 0
        while True:
            r = c.call_raw("CF.ADD", "rb", f"item{added}")
            if isinstance(r, RespError):
                check(str(r) == "Maximum expansions reached", f"CF.ADD at the limit: {r!r}")
                break
            added += 1
            check(added < 100, "the filter never reached its limit")
        check(S.info_dict(c, "rb")["Number of filters"] >= 2, "stopped before the limit")
        # A full sync of a new replica, a RESTORE and a restart: the same filter, the same
        # refusal.
        with servers[1].client() as cr:
            ok(cr.call_raw("REPLICAOF", "NO", "ONE"), "REPLICAOF NO ONE")
            ok(cr.call_raw("FLUSHALL"), "FLUSHALL")
            ok(cr.call_raw("REPLICAOF", "127.0.0.1", primary.port), "REPLICAOF again")
        harness.wait_for(lambda: S.link_up(replica), 20, "the replica's full sync")
        harness.wait_for(lambda: replica.client().call("EXISTS", "rb") == 1, 10, "rb")
        ok(c.call_raw("RESTORE", "rb2", 0, c.call("DUMP", "rb")), "RESTORE rb2")
        ok(c.call_raw("DEBUG", "RELOAD"), "DEBUG RELOAD")
        for key in ("rb", "rb2"):
            r = c.call_raw("CF.INSERT", key, "ITEMS", "more1", "more2")
            check(isinstance(r, RespError) and str(r) == "Maximum expansions reached",
                  f"CF.INSERT {key} after a reload: {r!r}")
        c.call("CF.DEL", "rb", "item0")  # replicated, so that both hold the same
        harness.wait_for(lambda: S.scandump(replica.client(), "rb") == S.scandump(c, "rb"),
                         10, "the replica to hold rb as the primary does")
        print(f"    RedisBloom's limit: {added} items in 2 sub-filters, kept by a reload, a "
              "RESTORE and a full sync")
        c.close()
    finally:
        for s in servers:
            s.stop()


def aof_rewrite(seed):
    """BGREWRITEAOF without the RDB preamble writes a filter of RedisBloom's type as
    RedisBloom's CF.LOADCHUNK commands (header, then its chunks); the restart replays them
    into the same filter, of the same type."""
    with Server(extra=[("appendonly", "yes"), ("aof-use-rdb-preamble", "no"),
                       ("rdbcompression", "no")]) as s:
        c = s.client()
        ok(c.call_raw("CF.RESERVE", "ours", 100), "CF.RESERVE ours")
        _, version = split_payload(c.call("DUMP", "ours"))
        c.call("DEL", "ours")  # the rewritten AOF then holds the moved filter alone
        md = Model(capacity=300, b=4, kicks=20, expansion=1)
        for i in range(1500):
            md.add(b"aof-%d-%d" % (seed % 97, i))
        check(len(md.t) > 1, "the model did not grow")
        p = payload(md.record(), version)
        ok(c.call_raw("RESTORE", "moved", 0, p), "RESTORE")
        c.call("BGREWRITEAOF")
        wait_rewrite(c)
        base = b"".join(open(f, "rb").read()
                        for f in glob.glob(os.path.join(s.dir, "appendonlydir", "*.base.aof")))
        check(base.count(b"CF.LOADCHUNK") == 1 + len(md.t) and chunks(md)[0][1] in base,
              "the rewritten AOF is not RedisBloom's chunks")
        c.close()
        s.restart()
        c = s.client()
        check(c.call("TYPE", "moved") == TYPE_NAME and c.call("DUMP", "moved") == p,
              "after an AOF replay, moved is another filter")
        c.close()
        print(f"    AOF rewrite: {1 + len(md.t)} CF.LOADCHUNK commands, the same filter replayed")


def new_filters(seed):
    """New filters in RedisBloom's layout (cf-layout redisbloom, CF.RESERVE ... LAYOUT
    redisbloom) are the ones RedisBloom itself makes from the same commands: the same
    DUMP and chunks, of its type. Its settings answer to their unprefixed names where the
    server has them."""
    with Server(module_args=["cf-layout", "redisbloom"],
                extra=[("rdbcompression", "no")]) as s, s.client() as c:
        check(c.call("CONFIG", "GET", "cuckoo.cf-layout") == [b"cuckoo.cf-layout",
                                                             b"redisbloom"],
              "cf-layout redisbloom on the loadmodule line")
        ok(c.call_raw("CF.RESERVE", "ours", 100, "LAYOUT", "native"), "CF.RESERVE LAYOUT native")
        check(c.call("TYPE", "ours") == "cuckoo-cf", "LAYOUT native under cf-layout redisbloom")
        _, version = split_payload(c.call("DUMP", "ours"))

        # Auto-created by CF.ADD: RedisBloom's defaults (capacity 1024, 2 slots, 20
        # iterations, expansion 1).
        md = Model(capacity=1024)
        items = [b"auto-%d-%d" % (seed % 1000, i) for i in range(harness.scaled(3000))]
        for x in items:
            want_ok = md.add(x)
            r = c.call_raw("CF.ADD", "auto", x)
            check(r == 1 if want_ok else isinstance(r, RespError),
                  f"CF.ADD auto {x!r}: {r!r}, RedisBloom's filter "
                  f"{'took' if want_ok else 'refused'} it")
        check(c.call("TYPE", "auto") == TYPE_NAME, f"TYPE auto: {c.call('TYPE', 'auto')!r}")
        check(len(md.t) > 1, "the auto-created filter did not grow")
        check(c.call("DUMP", "auto") == payload(md.record(), version),
              "the auto-created filter is not the one RedisBloom would hold")
        check(S.scandump(c, "auto") == chunks(md), "CF.SCANDUMP auto: not RedisBloom's chunks")
        check(S.info_dict(c, "auto")["layout"] == "redisbloom", "CF.DEBUG auto: layout")

        # CF.RESERVE with every RedisBloom option, then adds, growth and deletes.
        ok(c.call_raw("CONFIG", "SET", "cuckoo.cf-layout", "native"), "cf-layout native")
        ok(c.call_raw("CF.RESERVE", "rb", 1000, "BUCKETSIZE", 4, "MAXITERATIONS", 50,
                      "EXPANSION", 3, "LAYOUT", "RedisBloom"), "CF.RESERVE ... LAYOUT RedisBloom")
        md = Model(capacity=1000, b=4, kicks=50, expansion=3)
        items = [b"rb-%d-%d" % (seed % 1000, i) for i in range(harness.scaled(8000))]
        for x in items:
            want_ok = md.add(x)
            r = c.call_raw("CF.ADD", "rb", x)
            check(r == 1 if want_ok else isinstance(r, RespError),
                  f"CF.ADD rb {x!r}: {r!r}")
        check(len(md.t) > 2, "rb did not grow twice")
        for x in items[:500]:
            check(c.call("CF.DEL", "rb", x) == 1 and md.delete(x), f"CF.DEL rb {x!r}")
        md.deletes = 500
        check(c.call("DUMP", "rb") == payload(md.record(), version),
              "CF.RESERVE ... LAYOUT redisbloom: not the filter RedisBloom would hold")
        check(c.call("CF.ADD", "plain", "x") == 1, "CF.ADD after cf-layout native")
        check(c.call("TYPE", "plain") == "cuckoo-cf", "cf-layout native: TYPE plain")

        for args, want in ((["LAYOUT", "bogus"], "ERR LAYOUT must be native or redisbloom"),
                           (["LAYOUT", "redisbloom", "FPBITS", 12], "ERR the redisbloom layout"),
                           (["BUCKETSIZE", 4, "SEMISORT", 1, "LAYOUT", "redisbloom"],
                            "ERR the redisbloom layout")):
            r = c.call_raw("CF.RESERVE", "bad", 1000, *args)
            check(isinstance(r, RespError) and str(r).startswith(want),
                  f"CF.RESERVE bad 1000 {args}: {r!r}")
        check(c.call("EXISTS", "bad") == 0, "a refused CF.RESERVE left a key")
        r = c.call_raw("CONFIG", "SET", "cuckoo.cf-layout", "bogus")
        check(isinstance(r, RespError), f"CONFIG SET cuckoo.cf-layout bogus: {r!r}")

        def words(r):
            return [w for x in r for w in words(x)] if isinstance(r, list) else [r]
        docs = words(c.call("COMMAND", "DOCS", "CF.RESERVE"))
        check(all(w in docs for w in (b"layout", b"LAYOUT", b"oneof", b"native", b"redisbloom")),
              f"COMMAND DOCS CF.RESERVE: no LAYOUT native|redisbloom in {docs}")

        # RedisBloom's unprefixed names: on a server with unprefixed module configurations
        # (Redis >= 8) they are the same settings; elsewhere the log says why not.
        bare = c.call("CONFIG", "GET", "cf-bucket-size")
        if bare:
            ok(c.call_raw("CONFIG", "SET", "cf-bucket-size", 4), "CONFIG SET cf-bucket-size")
            check(c.call("CONFIG", "GET", "cuckoo.cf-bucket-size")[1] == b"4",
                  "cf-bucket-size and cuckoo.cf-bucket-size are not one setting")
            print("    unprefixed configurations: cf-bucket-size is cuckoo.cf-bucket-size")
        else:
            check("no unprefixed module configurations" in s.log(),
                  "no cf-bucket-size and no word in the log why")
            print("    this server has no unprefixed module configurations (logged)")
        print(f"    new filters of RedisBloom's layout: {len(md.t)} sub-filters, "
              f"DUMP equal to RedisBloom's")


def beside_redisbloom(seed):
    """Loaded after a module with RedisBloom's cuckoo filter type (a stand-in built by the
    tests, CF_REDIS_OTHER_MODULE), the module refuses to load and the log says why."""
    other = os.environ.get("CF_REDIS_OTHER_MODULE", "")
    check(os.path.exists(other), f"CF_REDIS_OTHER_MODULE={other!r}: the stand-in is not built")
    s = Server(module=False, extra=[("loadmodule", other), ("loadmodule", harness.MODULE)])
    try:
        try:
            s.start(timeout=5)
            started = True
        except RuntimeError:
            started = False
        check(not started, "the server started with the module beside RedisBloom's type")
        check("RedisBloom's cuckoo filter type MBbloomCF is registered already" in s.log(),
              f"the log does not say why the module did not load:\n{s.log()[-600:]}")
    finally:
        s.stop()
        shutil.rmtree(s.dir, ignore_errors=True)
    print("    beside RedisBloom's type: refused to load, and the log says why")


def foreign_aof(seed):
    """An AOF whose tail RedisBloom wrote (CF.RESERVE without SEED, CF.ADD on a missing key:
    never how this module writes a creation) loads under cf-layout native, and the log says
    once that those filters are of this module's layout and how to avoid it; the module's
    own AOF says nothing."""
    s = Server(extra=[("appendonly", "yes"), ("appendfsync", "always")])
    warning = "the AOF being loaded creates cuckoo filters as RedisBloom writes them"
    try:
        s.start()
        with s.client() as c:
            check(c.call("CF.ADD", "own", "x") == 1, "CF.ADD own")
            ok(c.call("CF.RESERVE", "own2", 100), "CF.RESERVE own2")
        s.restart()

        def log():
            with open(os.path.join(s.dir, "server.log")) as f:
                return f.read()
        check(warning not in log(), "the module's own AOF was taken for RedisBloom's")
        s.stop(remove=False)
        incr = sorted(glob.glob(os.path.join(s.dir, "appendonlydir", "*.incr.aof")))[-1]
        with open(incr, "ab") as f:
            for cmd in (("CF.RESERVE", "rb1", "1000"), ("CF.ADD", "rb2", "x"),
                        ("CF.ADD", "rb2", "y"), ("CF.INSERT", "rb3", "ITEMS", "z")):
                f.write(harness.Client.encode(cmd))
        s.start()
        with s.client() as c:
            check(c.call("CF.EXISTS", "rb2", "x") == 1 and c.call("TYPE", "rb1") == "cuckoo-cf",
                  "the filters of RedisBloom's AOF tail")
        check(log().count(warning) == 1, "RedisBloom's AOF tail is not said exactly once")
    finally:
        s.stop()
    print("    an AOF tail RedisBloom wrote: loaded, and said once in the log")


def main():
    S.require_tools()
    S.run("test_redisbloom", lambda seed: (body(seed), new_filters(seed), limits(seed),
                                           beside_redisbloom(seed), foreign_aof(seed)), [])


if __name__ == "__main__":
    main()
