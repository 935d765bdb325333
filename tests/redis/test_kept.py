#!/usr/bin/env python3
"""RedisBloom's other data types (Bloom filters MBbloom--, count-min sketches CMSk-TYPE,
top-k TopK-TYPE, t-digests TDIS-TYPE) kept byte for byte.

The values are made here by a writer of RedisBloom's RDB layouts (docs/COMMANDS.md,
"RedisBloom's other types"), as DUMP payloads, and restored on a primary with a replica
that joins by a full sync afterwards:
- each restores; TYPE is RedisBloom's name; DUMP is the payload restored, byte for byte
  (a double's bits, -0.0 and a NaN's payload too); older Bloom filter encodings (0 and 2)
  come back as RedisBloom saves them (encoding 4, its defaults filled in);
- the replica (full sync) holds the same DUMP and DEBUG DIGEST-VALUE; so do a COPY,
  DEBUG RELOAD, an AOF rewritten without an RDB preamble and loaded again, and a restart;
- TYPE, RENAME, EXPIRE, SCAN TYPE, MEMORY USAGE and DEL work; BF.ADD and the others are
  unknown commands (the module registers none of them); the log names each kept type once;
- forged values (a Bloom filter of no sub-filter or a bit array too short, a sketch of
  width 0, a top-k heap of the wrong length or an item without its NUL, a t-digest with
  more merged nodes than room, a newer encoding, a field missing) are refused with the
  server's "Bad data format" and leave no key.

Environment: CF_REDIS_MODULE, CF_REDIS_SERVER, CF_TEST_SEED. Exit 0 = pass.
"""

import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import RespError, Server, wait_for  # noqa: E402
import cf_state as S  # noqa: E402
from cf_state import check, ok  # noqa: E402
import test_persistence as P  # noqa: E402
from test_persistence import aof_files, enc_len, split_payload, wait_rewrite, wrap  # noqa: E402
from test_redisbloom import module_id  # noqa: E402

# (a signed field is the unsigned of its bits under UINT's opcode, as SaveSigned writes it)
SINT, UINT, DOUBLE, STRING = P.OP_UINT, P.OP_UINT, P.OP_DOUBLE, P.OP_STRING


def serialize(name, encver, fields):
    """A module value's RDB body: its type byte and id, then each field, then EOF."""
    prefix = bytes([7]) + enc_len(module_id(name, encver))  # RDB_TYPE_MODULE_2
    return P.serialize(prefix, list(fields) + [(P.OP_EOF, None)])


def bloom_fields(rng, encver, links):
    """A scalable Bloom filter of `links` sub-filters in encoding `encver`, and what
    RedisBloom saves for it (encoding 4)."""
    written = [(UINT, 100), (UINT, len(links))]
    saved = list(written)
    options = 8 if encver >= 2 else 0
    if encver >= 2:
        written.append((UINT, options))
    saved.append((UINT, options))
    if encver >= 4:
        written.append((UINT, 4))
    saved.append((UINT, 4 if encver >= 4 else 2))
    for entries, bpe in links:
        bits = int(entries * bpe)
        bf = bytes(rng.getrandbits(8) for _ in range((bits + 7) // 8))
        head = [(UINT, entries), (DOUBLE, 0.01), (UINT, 7), (DOUBLE, bpe)]
        tail = [(STRING, bf), (UINT, entries // 3)]
        written += head + ([] if encver == 0 else [(UINT, bits), (UINT, 5)]) + tail
        saved += head + [(UINT, bits), (UINT, 0 if encver == 0 else 5)] + tail
    return written, saved


def values(rng):
    """(key, type name, encoding written, fields written, fields RedisBloom saves)."""
    out = []
    for encver in (4, 2, 0):
        w, s = bloom_fields(rng, encver, [(1000, 9.585), (2000, 10.3)])
        out.append((f"bf{encver}", "MBbloom--", encver, w, s))
    cms = [(UINT, 7), (UINT, 3), (UINT, 42),
           (STRING, bytes(rng.getrandbits(8) for _ in range(4 * 7 * 3)))]
    out.append(("cms", "CMSk-TYPE", 0, cms, cms))
    heap = bytes(rng.getrandbits(8) for _ in range(3 * 24))
    topk = [(UINT, 3), (UINT, 5), (UINT, 2), (DOUBLE, 0.9),
            (STRING, bytes(rng.getrandbits(8) for _ in range(5 * 2 * 8))), (STRING, heap)]
    out.append(("topk", "TopK-TYPE", 0, topk + [(STRING, b"alpha\0"), (STRING, b"\0"),
                                                 (STRING, b"beta\0")],
                topk + [(STRING, b"alpha\0"), (STRING, b"\0"), (STRING, b"beta\0")]))
    # RedisBloom keeps an item as far as its first NUL, and a 1-byte one as empty.
    out.append(("topk-cut", "TopK-TYPE", 0,
                topk + [(STRING, b"ab\0cd"), (STRING, b"x"), (STRING, b"q\0")],
                topk + [(STRING, b"ab\0"), (STRING, b"\0"), (STRING, b"q\0")]))
    nan = struct.pack("<Q", 0x7FF8_0000_DEAD_BEEF)
    td = [(DOUBLE, 100.0), (DOUBLE, -0.0), (DOUBLE, nan), (SINT, 610), (SINT, 3), (SINT, 0),
          (SINT, -2), (DOUBLE, 3.0), (DOUBLE, 0.0),
          (DOUBLE, 1.0), (DOUBLE, 5.5), (DOUBLE, 9.0), (DOUBLE, 1.0), (DOUBLE, 1.0),
          (DOUBLE, 1.0)]
    out.append(("td", "TDIS-TYPE", 0, td, td))
    return out


def forged(rng):
    """(what, type name, encver, fields): values RedisBloom refuses, or that are cut."""
    w, _ = bloom_fields(rng, 4, [(1000, 9.585)])
    no_links = [(UINT, 100), (UINT, 0), (UINT, 8), (UINT, 4)]
    short = [x if x[0] != STRING else (STRING, x[1][:-1]) for x in w]
    heap = bytes(72)
    topk = [(UINT, 3), (UINT, 5), (UINT, 2), (DOUBLE, 0.9), (STRING, bytes(80))]
    td = [(DOUBLE, 100.0), (DOUBLE, 0.0), (DOUBLE, 1.0), (SINT, 2), (SINT, 3), (SINT, 0),
          (SINT, 0), (DOUBLE, 3.0), (DOUBLE, 0.0)] + [(DOUBLE, 1.0)] * 6
    return [
        ("a Bloom filter of no sub-filter", "MBbloom--", 4, no_links),
        ("a Bloom filter's bit array one byte short", "MBbloom--", 4, short),
        ("a Bloom filter of encoding 5", "MBbloom--", 5, w),
        ("a Bloom filter without its last field", "MBbloom--", 4, w[:-1]),
        ("a sketch of width 0", "CMSk-TYPE", 0, [(UINT, 0), (UINT, 3), (UINT, 1),
                                                 (STRING, b"")]),
        ("a sketch whose counters are short", "CMSk-TYPE", 0, [(UINT, 7), (UINT, 3),
                                                               (UINT, 1), (STRING, bytes(83))]),
        ("a top-k heap of the wrong length", "TopK-TYPE", 0,
         topk + [(STRING, heap[:-1])] + [(STRING, b"\0")] * 3),
        ("a top-k item without its NUL", "TopK-TYPE", 0,
         topk + [(STRING, heap), (STRING, b"ab"), (STRING, b"\0"), (STRING, b"\0")]),
        ("a t-digest of 3 merged nodes in room for 2", "TDIS-TYPE", 0, td),
        ("a sketch with a double where its count is", "CMSk-TYPE", 0,
         [(UINT, 7), (UINT, 3), (DOUBLE, 1.0), (STRING, bytes(84))]),
    ]


def dump(c, key):
    return c.call("DUMP", key)


def main():
    S.require_tools()
    servers = []

    def body(seed):
        rng = random.Random(seed)
        primary = Server(extra=[("rdbcompression", "no"), ("appendonly", "yes"),
                                ("aof-use-rdb-preamble", "no")])
        servers.append(primary)
        primary.start()
        c = primary.client()
        ok(c.call("CF.RESERVE", "cf", 100), "CF.RESERVE cf")
        _, version = split_payload(dump(c, "cf"))
        want = {}
        for key, name, encver, written, saved in values(rng):
            payload = wrap(serialize(name, encver, written), version)
            ok(c.call_raw("RESTORE", key, 0, payload), f"RESTORE {key} ({name}, encoding {encver})")
            check(c.call("TYPE", key) == name, f"TYPE {key}: {c.call('TYPE', key)}")
            want[key] = wrap(serialize(name, 4 if name == "MBbloom--" else 0, saved), version)
            check(dump(c, key) == want[key],
                  f"DUMP {key} is not what RedisBloom saves ({len(dump(c, key))} bytes, "
                  f"want {len(want[key])})")
            check(c.call("MEMORY", "USAGE", key) >= len(want[key]) - 40,
                  f"MEMORY USAGE {key}: {c.call('MEMORY', 'USAGE', key)}")
        for name in ("MBbloom--", "CMSk-TYPE", "TopK-TYPE", "TDIS-TYPE"):
            check(primary.log().count(f"(type {name}) as it is") == 1,
                  f"the log does not name the kept type {name} once")

        def all_same(cc, what):
            for key, payload in want.items():
                check(dump(cc, key) == payload, f"{what}: DUMP {key} differs")

        # Generic commands.
        for cmd in (("BF.ADD", "bf4", "x"), ("CMS.QUERY", "cms", "x"), ("TOPK.LIST", "topk"),
                    ("TDIGEST.MIN", "td")):
            r = c.call_raw(*cmd)
            check(isinstance(r, RespError) and "unknown command" in str(r).lower(),
                  f"{cmd[0]}: {r!r}, want the server's unknown command")
        check(c.call("COPY", "topk", "topk2") == 1, "COPY topk")
        check(dump(c, "topk2") == want["topk"], "the COPY's DUMP differs")
        ok(c.call("RENAME", "topk2", "topk3"), "RENAME")
        check(c.call("EXPIRE", "topk3", 1000) == 1 and 0 < c.call("TTL", "topk3") <= 1000,
              "EXPIRE on a kept key")
        found = c.call("SCAN", 0, "COUNT", 1000, "TYPE", "TDIS-TYPE")[1]
        check(found == [b"td"], f"SCAN TYPE TDIS-TYPE: {found}")
        check(c.call("DEL", "topk3") == 1, "DEL")
        check(c.call("DEBUG", "DIGEST-VALUE", "bf4") != c.call("DEBUG", "DIGEST-VALUE", "bf2"),
              "different values have one digest")
        digests = {k: c.call("DEBUG", "DIGEST-VALUE", k) for k in want}

        # A replica that joins now: a full sync.
        replica = Server(extra=[("replicaof", "127.0.0.1", primary.port)])
        servers.append(replica)
        replica.start()
        wait_for(lambda: S.link_up(replica), 20, "the replica's full sync")
        with replica.client() as r:
            all_same(r, "the replica")
            for k, d in digests.items():
                check(r.call("DEBUG", "DIGEST-VALUE", k) == d, f"the replica's digest of {k}")

        ok(c.call("DEBUG", "RELOAD"), "DEBUG RELOAD")
        all_same(c, "after DEBUG RELOAD")
        c.call("BGREWRITEAOF")
        wait_rewrite(c)
        base = aof_files(primary, "base")
        check(base and open(base[-1], "rb").read().count(b"RESTORE") == len(want),
              "the rewritten AOF does not hold a RESTORE per kept key")
        ok(c.call("DEBUG", "LOADAOF"), "DEBUG LOADAOF")
        all_same(c, "after an AOF rewrite (no RDB preamble) and its load")
        ok(c.call("SAVE"), "SAVE")
        c.close()
        primary.restart()
        c = primary.client()
        all_same(c, "after a restart (its AOF loaded)")

        for what, name, encver, fields in forged(rng):
            r = c.call_raw("RESTORE", "forged", 0, wrap(serialize(name, encver, fields), version))
            check(isinstance(r, RespError) and "Bad data format" in str(r),
                  f"RESTORE of {what}: {r!r}")
            check(c.call("EXISTS", "forged") == 0, f"{what}: a key was left")
        check(primary.alive(), "the server is up")
        c.close()
        print(f"    {len(want)} values of 4 types kept byte for byte")

    S.run("test_kept", body, servers)


if __name__ == "__main__":
    main()
