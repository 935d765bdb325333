#!/usr/bin/env python3
"""CF.SCANDUMP / CF.LOADCHUNK, COPY / RENAME / MOVE, RDB (DEBUG RELOAD, SAVE + restart,
DUMP / RESTORE, damaged and truncated DUMP payloads) and AOF (plain, and rewritten into
CF.LOADCHUNK commands) of the cuckoo filter module, on real redis-server processes.

Every check compares what a client observes: CF.INFO (all fields), DEBUG DIGEST-VALUE,
the CF.SCANDUMP chunks byte for byte, and membership answers (every added item, plus 20k
items never added).

Environment: CF_REDIS_MODULE (the .so), CF_REDIS_SERVER, CF_TEST_SEED (random choices),
CF_TEST_SCALE (how many random bytes of each data chunk are damaged, random truncations,
writes replayed from the AOF: 2 is twice as many).
Exit 0 = pass, anything else = failure (a missing server too).
"""

import glob
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import RespError, Server, scaled, wait_for  # noqa: E402
import cf_state as S  # noqa: E402
from cf_state import check, ok  # noqa: E402

MiB = 1 << 20


# ------------------------------------------------------------------------------------------
# Redis DUMP payloads: body || RDB version (2 bytes) || CRC-64/Jones (8 bytes, LE)
# ------------------------------------------------------------------------------------------

def _reflect64(x):
    return int(f"{x:064b}"[::-1], 2)


_CRC_POLY = _reflect64(0xAD93D23594C935A9)  # Redis' crc64: reflected in and out, init 0
_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _CRC_POLY if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc64(data, crc=0):
    t = _CRC_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def split_payload(payload):
    check(len(payload) > 10, f"DUMP payload of {len(payload)} bytes")
    body, version, crc = payload[:-10], payload[-10:-8], payload[-8:]
    check(crc64(payload[:-8]) == int.from_bytes(crc, "little"),
          "our CRC-64 does not match the one Redis put in the DUMP payload")
    return body, version


def wrap(body, version):
    data = body + version
    return data + crc64(data).to_bytes(8, "little")


def rdb_len(buf, pos):
    check(pos < len(buf), f"RDB length past the end at {pos}")
    b = buf[pos]
    t = b >> 6
    if t == 0:
        return b & 0x3F, pos + 1
    if t == 1:
        return ((b & 0x3F) << 8) | buf[pos + 1], pos + 2
    if b == 0x80:
        return int.from_bytes(buf[pos + 1:pos + 5], "big"), pos + 5
    if b == 0x81:
        return int.from_bytes(buf[pos + 1:pos + 9], "big"), pos + 9
    raise S.TestFailure(f"RDB length encoding {b:#04x} at {pos} (string compression on?)")


def enc_len(n):
    if n < 64:
        return bytes([n])
    if n < 16384:
        return bytes([0x40 | (n >> 8), n & 0xFF])
    if n < 1 << 32:
        return b"\x80" + n.to_bytes(4, "big")
    return b"\x81" + n.to_bytes(8, "big")


OP_EOF, OP_UINT, OP_DOUBLE, OP_STRING = 0, 2, 4, 5


def parse_module_value(body):
    """A DUMP body of a module value (RDB_TYPE_MODULE_2): (prefix bytes, [(op, value)]).
    value: int for UINT, bytes for STRING, None for EOF."""
    check(body[0] == 7, f"DUMP body starts with type {body[0]}, not 7 (module, v2)")
    _, pos = rdb_len(body, 1)
    prefix = body[:pos]
    elems = []
    while True:
        op, pos = rdb_len(body, pos)
        if op == OP_EOF:
            elems.append((OP_EOF, None))
            break
        if op == OP_UINT:
            v, pos = rdb_len(body, pos)
            elems.append((OP_UINT, v))
        elif op == OP_STRING:
            n, pos = rdb_len(body, pos)
            elems.append((OP_STRING, body[pos:pos + n]))
            pos += n
        else:
            raise S.TestFailure(f"unexpected module opcode {op} at {pos}")
    check(pos == len(body), f"{len(body) - pos} bytes after the module EOF marker")
    check(serialize(prefix, elems) == body, "the module value does not re-serialize")
    return prefix, elems


def serialize(prefix, elems):
    """A module value's body: prefix, then each (op, value): UINT an int (a negative one as
    the server's SaveSigned writes it, the unsigned of its bits), DOUBLE a float or its 8
    bytes, STRING bytes, EOF None."""
    out = [prefix]
    for op, v in elems:
        out.append(enc_len(op))
        if op == OP_UINT:
            out.append(enc_len(v & ((1 << 64) - 1)))
        elif op == OP_DOUBLE:
            out.append(v if isinstance(v, bytes) else struct.pack("<d", v))
        elif op == OP_STRING:
            out.append(enc_len(len(v)) + v)
    return b"".join(out)


def flip(data, pos, mask):
    return data[:pos] + bytes([data[pos] ^ mask]) + data[pos + 1:]


# ------------------------------------------------------------------------------------------
# Building filters
# ------------------------------------------------------------------------------------------

class Filters:
    """The filters made on one server and what was added to them."""

    def __init__(self, c, rng):
        self.c = c
        self.rng = rng
        self.present = {}  # key -> items that must be found
        self.absent = [f"absent/{rng.getrandbits(64):016x}" for _ in range(20000)]

    def items(self, key, n):
        return [f"{key}/{self.rng.getrandbits(64):016x}" for _ in range(n)]

    def add(self, key, n, cmd="CF.ADD"):
        items = self.items(key, n)
        rs = self.c.pipeline([[cmd, key, x] for x in items])
        # CF.ADDNX answers 0 for a new item that is a false positive: it is found anyway.
        bad = [(x, r) for x, r in zip(items, rs) if r != 1 and (cmd != "CF.ADDNX" or r != 0)]
        check(not bad, f"{cmd} {key}: {len(bad)} adds did not answer 1, e.g. {bad[:2]}")
        self.present.setdefault(key, []).extend(items)
        return items

    def delete(self, key, n):
        victims = self.present[key][:n]
        rs = self.c.pipeline([["CF.DEL", key, x] for x in victims])
        check(all(r == 1 for r in rs), f"CF.DEL {key}: not every delete answered 1: {rs[:10]}")
        self.present[key] = self.present[key][n:]

    def snap(self, c, key, source=None):
        present = self.present.get(source or key, [])
        return S.snapshot(c, key, present, self.absent,
                          present[:150] + self.absent[:100])


def build_filters(c, rng):
    F = Filters(c, rng)
    ok(c.call("CF.RESERVE", "small", 1000), "CF.RESERVE small")
    F.add("small", 600)
    F.delete("small", 60)
    check(S.info_dict(c, "small")["Number of items deleted"] == 60, "small: 60 deletes counted")

    ok(c.call("CF.RESERVE", "g1", 100, "EXPANSION", 1, "MAXITERATIONS", 5), "CF.RESERVE g1")
    F.add("g1", 1200)
    F.delete("g1", 20)
    ok(c.call("CF.RESERVE", "g2", 64, "EXPANSION", 2, "BUCKETSIZE", 4, "FPBITS", 20),
       "CF.RESERVE g2")
    F.add("g2", 2000, "CF.ADDNX")
    for k in ("g1", "g2"):
        n = S.info_dict(c, k)["Number of filters"]
        check(n >= 3, f"{k} should have grown to several sub-filters, has {n}")

    ok(c.call("CF.RESERVE", "big", 20000000, "FPBITS", 16, "BUCKETSIZE", 4), "CF.RESERVE big")
    # Past the default's switch: a segmented table, format version 3 (its header chunk
    # after the module's 24-byte prefix), which every part below moves.
    header = c.call("CF.SCANDUMP", "big", 0)[1]
    check(header[24 + 8] == 3 and header[24 + 60] == 16, "big: not a segmented filter")
    items = F.items("big", 20000)
    for i in range(0, len(items), 1000):
        r = c.call("CF.INSERT", "big", "ITEMS", *items[i:i + 1000])
        check(r == [1] * 1000, f"CF.INSERT big: {r[:5]}...")
    F.present["big"] = items

    ok(c.call("CF.RESERVE", "empty", 500, "BUCKETSIZE", 3, "MAXITERATIONS", 7, "FPBITS", 9,
              "EXPANSION", 0), "CF.RESERVE empty")
    F.present["empty"] = []

    # Grown to many sub-filters, then emptied and compacted back to a few.
    ok(c.call("CF.RESERVE", "shrunk", 50, "EXPANSION", 1), "CF.RESERVE shrunk")
    F.add("shrunk", 500)
    grown = S.info_dict(c, "shrunk")["Number of filters"]
    F.delete("shrunk", 470)
    ok(c.call("CF.COMPACT", "shrunk"), "CF.COMPACT shrunk")
    left = S.info_dict(c, "shrunk")["Number of filters"]
    check(grown >= 9 and left <= 2, f"shrunk: {grown} sub-filters, {left} after compaction")

    check(c.call("CF.ADD", "auto", "first") == 1, "CF.ADD auto-creates")
    F.present["auto"] = ["first"]
    F.add("auto", 300, "CF.ADDNX")

    # A fixed-size filter filled until it refuses (its last fingerprints may sit in the
    # stash, which travels in the header chunk).
    ok(c.call("CF.RESERVE", "fixed", 64, "EXPANSION", 0, "BUCKETSIZE", 2), "CF.RESERVE fixed")
    added = []
    for x in F.items("fixed", 400):
        r = c.call_raw("CF.ADD", "fixed", x)
        if isinstance(r, RespError):
            check(str(r) == "Filter is full", f"CF.ADD fixed: {r}")
            break
        check(r == 1, f"CF.ADD fixed: {r!r}")
        added.append(x)
    else:
        raise S.TestFailure("a 64-item fixed filter took 400 items")
    F.present["fixed"] = added
    return F


FILTERS = ("small", "g1", "g2", "big", "empty", "auto", "fixed", "shrunk")


# ------------------------------------------------------------------------------------------
# 1. SCANDUMP -> LOADCHUNK, partial loads, COPY / RENAME / MOVE
# ------------------------------------------------------------------------------------------

def check_dump_shape(c, key, chunks):
    check(len(chunks) >= 2, f"{key}: {len(chunks)} chunks (want a header and data)")
    header = chunks[0][1]
    inf = S.info_dict(c, key)
    check(len(header) > 24 and header[24:32] == b"\x89CUCKOO\n",
          f"{key}: the header chunk does not hold the 24-byte prefix then the file magic")
    check(int.from_bytes(header[:8], "little") == inf["Number of items deleted"],
          f"{key}: the deletes in the header prefix differ from CF.INFO")
    check(int.from_bytes(header[8:16], "little") == inf["Max iterations"],
          f"{key}: MAXITERATIONS in the header prefix differs from CF.INFO")
    for it, data in chunks:
        check(len(data) <= 16 * MiB, f"{key}: a chunk of {len(data)} bytes (over 16 MiB)")
    its = [it for it, _ in chunks]
    check(its == sorted(set(its)), f"{key}: iterators not increasing: {its}")


def part1_dump_load(a, b, F):
    ca, cb = a.client(), b.client()
    originals = {}
    for key in FILTERS:
        chunks = S.scandump(ca, key)
        check_dump_shape(ca, key, chunks)
        if key == "big":
            check(len(chunks) >= 3, f"big: {len(chunks) - 1} data chunk(s), want several")
        snap = F.snap(ca, key)
        originals[key] = snap
        S.loadchunks(ca, "copy:" + key, chunks)
        S.loadchunks(cb, key, chunks)
        S.assert_same(snap, F.snap(ca, "copy:" + key, key), f"SCANDUMP/LOADCHUNK copy of {key}")
        S.assert_same(snap, F.snap(cb, key), f"SCANDUMP/LOADCHUNK of {key} into another server")
    e = S.info_dict(cb, "empty")
    check((e["Bucket size"], e["Max iterations"], e["fpbits"], e["Expansion rate"])
          == (3, 7, 9, 0), f"the empty filter's copy lost its parameters: {e}")
    fa = S.mexists(ca, "small", F.absent)
    check(sum(fa) < len(fa) // 20, f"small: {sum(fa)} of {len(fa)} absent items answer 1")

    # A complete key takes no header (and no CF.RESERVE).
    r = ca.call_raw("CF.LOADCHUNK", "copy:small", *originals["small"]["chunks"][0])
    check(isinstance(r, RespError) and str(r) == "ERR item exists",
          f"CF.LOADCHUNK header onto a complete filter: {r!r}")
    r = ca.call_raw("CF.RESERVE", "copy:small", 100)
    check(isinstance(r, RespError) and str(r) == "ERR item exists",
          f"CF.RESERVE onto a loaded filter: {r!r}")

    # Partial loads: the dump of an incomplete filter is exactly the chunks it received.
    for key in ("g1", "big"):
        chunks = originals[key]["chunks"]
        part = "part:" + key
        for i, (it, data) in enumerate(chunks):
            ok(ca.call("CF.LOADCHUNK", part, it, data), f"CF.LOADCHUNK {part} {it}")
            if i == len(chunks) - 1:
                break
            got = S.scandump(ca, part)
            check(got == chunks[:i + 1],
                  f"{part} after {i + 1} of {len(chunks)} chunks: SCANDUMP gives "
                  f"{S.describe_chunks(got)}, want {S.describe_chunks(chunks[:i + 1])}")
            for cmd in (["CF.EXISTS", part, "x"], ["CF.MEXISTS", part, "x", "y"],
                        ["CF.COUNT", part, "x"], ["CF.ADD", part, "x"], ["CF.DEL", part, "x"],
                        ["CF.INSERT", part, "ITEMS", "x"], ["CF.COMPACT", part]):
                r = ca.call_raw(*cmd)
                check(isinstance(r, RespError) and "incomplete" in str(r),
                      f"{' '.join(cmd)} on an incomplete filter: {r!r}")
            # The same figures but Size: an incomplete filter holds only the tables whose
            # chunks have begun to arrive, and the running checksum of what came (an XXH3
            # state, under 1 KiB).
            inc, whole = S.info_dict(ca, part), S.info_dict(ca, "copy:" + key)
            check(inc.pop("Size") <= whole.pop("Size") + 1024 and inc == whole,
                  f"CF.INFO of the incomplete {part} differs from the complete copy's: "
                  f"{S.info(ca, part)} vs {S.info(ca, 'copy:' + key)}")
            if key == "g1" and i == 2:
                # COPY of an incomplete filter is incomplete in the same way.
                check(ca.call("COPY", part, "partcopy:g1") == 1, "COPY of an incomplete filter")
                check(S.scandump(ca, "partcopy:g1") == chunks[:3], "COPY of an incomplete filter")
        S.assert_same(originals[key], F.snap(ca, part, key), f"{part} once complete")
        ca.call("DEL", part)
    # Keep one incomplete filter (header + 2 data chunks) for the persistence checks.
    S.loadchunks(ca, "part:g1", originals["g1"]["chunks"][:3])

    # Refused chunks remove the incomplete filter.
    g1 = originals["g1"]["chunks"]
    cases = {
        "a damaged data chunk": [g1[0], (g1[1][0], flip(g1[1][1], 100, 0x10))],
        "a data chunk out of order": [g1[0], g1[2]],
        "a repeated data chunk": [g1[0], g1[1], g1[1]],
        "a repeated header": [g1[0], g1[1], g1[0]],
        "another filter's data chunk": [g1[0], originals["g2"]["chunks"][1]],
        "a data chunk with the wrong iterator": [g1[0], (g1[1][0] + 64, g1[1][1])],
    }
    for what, seq in cases.items():
        S.loadchunks(ca, "refused", seq[:-1])
        r = ca.call_raw("CF.LOADCHUNK", "refused", *seq[-1])
        check(isinstance(r, RespError) and str(r).startswith("Couldn't load chunk!"),
              f"CF.LOADCHUNK of {what}: {r!r}")
        check(ca.call("EXISTS", "refused") == 0, f"the incomplete filter survived {what}")
    bad_header = flip(g1[0][1], 40, 0x01)
    r = ca.call_raw("CF.LOADCHUNK", "refused", g1[0][0], bad_header)
    check(isinstance(r, RespError) and str(r) == "Couldn't create filter!",
          f"CF.LOADCHUNK of a damaged header chunk: {r!r}")
    check(ca.call("EXISTS", "refused") == 0, "a damaged header made a key")

    # COPY, RENAME, MOVE.
    check(ca.call("COPY", "small", "small:copy") == 1, "COPY small small:copy")
    S.assert_same(originals["small"], F.snap(ca, "small:copy", "small"), "COPY")
    check(ca.call("COPY", "g1", "small:copy") == 0, "COPY onto an existing key without REPLACE")
    check(ca.call("COPY", "g2", "small:copy", "REPLACE") == 1, "COPY ... REPLACE")
    S.assert_same(originals["g2"], F.snap(ca, "small:copy", "g2"), "COPY REPLACE")
    check(ca.call("CF.ADD", "small:copy", "only-in-the-copy") == 1, "CF.ADD to the copy")
    S.assert_same(originals["g2"], F.snap(ca, "g2"), "the original after its COPY changed")
    check(S.digest(ca, "small:copy") != originals["g2"]["digest"], "the copy did not change")
    ca.call("DEL", "small:copy")

    check(ca.call("COPY", "small", "renamed") == 1, "COPY")
    ok(ca.call("RENAME", "renamed", "renamed2"), "RENAME")
    check(ca.call("EXISTS", "renamed") == 0, "RENAME left the old key")
    S.assert_same(originals["small"], F.snap(ca, "renamed2", "small"), "RENAME")
    check(ca.call("MOVE", "renamed2", 3) == 1, "MOVE renamed2 3")
    with a.client() as c3:
        ok(c3.call("SELECT", 3), "SELECT 3")
        S.assert_same(originals["small"], F.snap(c3, "renamed2", "small"), "MOVE to db 3")
        check(c3.call("COPY", "renamed2", "back", "DB", 0) == 1, "COPY ... DB 0")
        c3.call("FLUSHDB")
    S.assert_same(originals["small"], F.snap(ca, "back", "small"), "COPY ... DB")
    ca.call("DEL", "back")
    ca.close()
    cb.close()
    return originals


# ------------------------------------------------------------------------------------------
# 2. RDB, DUMP / RESTORE, AOF
# ------------------------------------------------------------------------------------------

def extras(F):
    """key -> (present, absent) for every filter key the tests made on server A."""
    out = {}
    for key in list(F.present):
        for name in (key, "copy:" + key, "restored:" + key):
            out[name] = (F.present[key], F.absent[:5000])
    return out


def part2_rdb(a, F, originals):
    c = a.client()
    before = S.dataset_snapshot(c, extras(F))
    check(len(before[0]) >= 2 * len(FILTERS) + 2, f"keys before DEBUG RELOAD: {list(before[0])}")
    ok(c.call("DEBUG", "RELOAD"), "DEBUG RELOAD")
    S.assert_same_dataset(before, S.dataset_snapshot(c, extras(F)), "DEBUG RELOAD")
    ok(c.call("SAVE"), "SAVE")
    c.close()
    a.restart()
    c = a.client()
    S.assert_same_dataset(before, S.dataset_snapshot(c, extras(F)), "SAVE + restart")
    # The incomplete filter came back incomplete and takes the rest of its chunks.
    check(S.scandump(c, "part:g1") == originals["g1"]["chunks"][:3],
          "part:g1 after the restart")
    check(S.scandump(c, "partcopy:g1") == originals["g1"]["chunks"][:3],
          "partcopy:g1 after the restart")

    # DUMP / RESTORE of every filter, the incomplete one included. The incomplete one has
    # an expiry (cf-load-timeout), which RESTORE is given as MIGRATE gives it.
    for key in FILTERS + ("part:g1",):
        payload = c.call("DUMP", key)
        check(isinstance(payload, bytes), f"DUMP {key}: {payload!r:.100}")
        ttl = max(c.call("PTTL", key), 0)
        check((ttl > 0) == (key == "part:g1"), f"PTTL {key}: {ttl}")
        ok(c.call("RESTORE", "restored:" + key, ttl, payload), f"RESTORE restored:{key}")
        source = "g1" if key == "part:g1" else key
        want = originals[source] if key != "part:g1" else S.snapshot(c, key)
        S.assert_same(want, F.snap(c, "restored:" + key, source), f"DUMP/RESTORE of {key}")
        r = c.call_raw("RESTORE", "restored:" + key, 0, payload)
        check(isinstance(r, RespError) and "BUSYKEY" in str(r), f"RESTORE onto a key: {r!r}")
        ok(c.call("RESTORE", "restored:" + key, ttl, payload, "REPLACE"), "RESTORE ... REPLACE")
        S.assert_same(want, F.snap(c, "restored:" + key, source), f"RESTORE REPLACE of {key}")
    S.loadchunks(c, "restored:part:g1", originals["g1"]["chunks"][3:])
    S.assert_same(originals["g1"], F.snap(c, "restored:part:g1", "g1"),
                  "the restored incomplete filter, completed")
    S.loadchunks(c, "part:g1", originals["g1"]["chunks"][3:])
    S.assert_same(originals["g1"], F.snap(c, "part:g1", "g1"),
                  "the incomplete filter completed after a restart")
    c.close()


def expect_refused(a, c, payload, what, rest=None):
    """RESTORE must refuse payload. rest: for an incomplete filter, the chunks that would
    complete it; it may then accept a damage that only its last chunk can reveal (the file
    checksum), as long as completing it fails and removes the key."""
    r = c.call_raw("RESTORE", "forged", 0, payload)
    if rest is not None and r == "OK":
        for it, data in rest:
            r = c.call_raw("CF.LOADCHUNK", "forged", it, data)
            if r != "OK":
                break
        check(isinstance(r, RespError) and str(r).startswith("Couldn't load chunk!"),
              f"RESTORE of {what} was accepted and the filter completed ({r!r})")
        check(c.call("EXISTS", "forged") == 0, f"{what}: the refused load left a key")
        return
    check(isinstance(r, RespError), f"RESTORE of {what} was accepted ({r!r})")
    check(str(r) == "ERR Bad data format",
          f"RESTORE of {what}: {r} (want the module to refuse it: ERR Bad data format)")
    check(c.call("EXISTS", "forged") == 0, f"RESTORE of {what} left a key")
    check(a.alive() and c.call("PING") == "PONG", f"the server is not up after {what}")


def part2_forged(a, F, rng):
    c = a.client()
    check(crc64(b"123456789") == 0xE9C6D914C4B8D9CA, "CRC-64/Jones check value")
    tested = 0
    S.loadchunks(c, "inc:g1", S.scandump(c, "g1")[:3])  # an incomplete filter
    for key in ("small", "g1", "fixed", "inc:g1"):
        payload = c.call("DUMP", key)
        body, version = split_payload(payload)
        prefix, elems = parse_module_value(body)
        # The record: deletes, MAXITERATIONS, loading flag, (cursor, chunk)..., 0, the
        # check of the two fields (the same as in the SCANDUMP header's prefix), EOF.
        chunks = S.scandump(c, key)
        rest = S.scandump(c, "g1")[len(chunks):] if key.startswith("inc:") else None
        inf = S.info_dict(c, key)
        want = [(OP_UINT, inf["Number of items deleted"]), (OP_UINT, inf["Max iterations"]),
                (OP_UINT, 1 if key.startswith("inc:") else 0)]
        for i, (it, data) in enumerate(chunks):
            want += [(OP_UINT, it), (OP_STRING, data[24:] if i == 0 else data)]
        want += [(OP_UINT, 0), (OP_UINT, int.from_bytes(chunks[0][1][16:24], "little")),
                 (OP_EOF, None)]
        check(elems == want, f"DUMP {key}: the module record is not the documented layout: "
              f"{[(o, v if isinstance(v, int) or v is None else len(v)) for o, v in elems]} vs "
              f"{[(o, v if isinstance(v, int) or v is None else len(v)) for o, v in want]}")
        # Our CRC and re-serialization are right: the unaltered body, re-wrapped, loads.
        ok(c.call("RESTORE", "control", max(c.call("PTTL", key), 0),
                  wrap(serialize(prefix, elems), version)),
           f"RESTORE of the re-wrapped DUMP of {key} (with its expiry, if incomplete)")
        check(S.digest(c, "control") == S.digest(c, key), f"control restore of {key}")
        c.call("DEL", "control")

        def forged(new_elems, what):
            nonlocal tested
            expect_refused(a, c, wrap(serialize(prefix, new_elems), version), f"{key}: {what}",
                           rest)
            tested += 1

        def with_elem(i, value):
            e = list(elems)
            e[i] = (e[i][0], value)
            return e

        # Module fields.
        # In range, but not what was saved: the check after the chunks refuses them.
        forged(with_elem(0, elems[0][1] + 1), "the deletes + 1")
        forged(with_elem(1, elems[1][1] % 65535 + 1), "another MAXITERATIONS in range")
        forged(with_elem(len(elems) - 2, elems[-2][1] ^ 1), "the fields' check altered")
        forged(with_elem(1, 0), "MAXITERATIONS 0")
        forged(with_elem(1, 65536), "MAXITERATIONS 65536")
        forged(with_elem(2, 1 - elems[2][1]), "the loading flag inverted")
        forged(with_elem(2, 2), "loading flag 2")
        e = list(elems)
        e[0] = (OP_STRING, b"\x00")
        forged(e, "a string where the deletes count belongs")
        forged(with_elem(3, elems[3][1] + 1), "the header chunk's cursor + 1")
        forged(with_elem(5, elems[5][1] - 64), "a data chunk's cursor - 64")
        # Every byte of the header chunk, two ways.
        header = elems[4][1]
        for pos in range(len(header)):
            for mask in (0x01, 0x80):
                forged(with_elem(4, flip(header, pos, mask)),
                       f"header chunk byte {pos} ^ {mask:#x}")
        forged(with_elem(4, header[:-1]), "a header chunk one byte short")
        forged(with_elem(4, header + b"\x00"), "a header chunk one byte long")
        # Data chunks: the first and last bytes, the tag, and random positions.
        data_idx = [i for i in range(6, len(elems) - 2) if elems[i][0] == OP_STRING]
        check(data_idx, f"{key}: no data chunk in the record")
        for i in data_idx[:3] + data_idx[-1:]:
            d = elems[i][1]
            positions = sorted(set(list(range(4)) + list(range(len(d) - 12, len(d)))
                                   + [rng.randrange(len(d)) for _ in range(scaled(24))]))
            for pos in positions:
                forged(with_elem(i, flip(d, pos, 1 << rng.randrange(8))),
                       f"data chunk {i} byte {pos}")
            forged(with_elem(i, d[:-1]), f"data chunk {i} one byte short")
        if len(data_idx) >= 2:
            e = list(elems)
            a1, a2 = data_idx[0], data_idx[1]
            e[a1 - 1:a1 + 1], e[a2 - 1:a2 + 1] = e[a2 - 1:a2 + 1], e[a1 - 1:a1 + 1]
            forged(e, "two data chunks swapped (with their cursors)")
            e = list(elems)
            del e[a1 - 1:a1 + 1]
            forged(e, "a data chunk missing")
            e = list(elems)
            e[a1 + 1:a1 + 1] = elems[a1 - 1:a1 + 1]
            forged(e, "a data chunk twice")
        if not key.startswith("inc:"):
            e = list(elems)
            del e[-4:-2]
            forged(e, "the last data chunk missing")
        # Truncated payloads (re-wrapped, so the CRC is right).
        body = serialize(prefix, elems)
        cuts = sorted(set([1, 5, len(prefix), len(prefix) + 2, len(prefix) + 5,
                           len(prefix) + 12, len(prefix) + 40, len(body) // 2,
                           len(body) - 3, len(body) - 2, len(body) - 1]
                          + [rng.randrange(1, len(body)) for _ in range(scaled(10))]))
        for cut in cuts:
            payload = wrap(body[:cut], version)
            # RESTORE reads its record from the whole payload, footer included: when the
            # bytes cut off happen to be the footer's first bytes (the RDB version, then
            # the CRC), the server reads the very record that was cut, and rightly loads it.
            if payload[cut:].startswith(body[cut:]):
                continue
            expect_refused(a, c, payload, f"{key}: truncated to {cut} bytes", rest)
            tested += 1

    # A header chunk of another filter made with the same parameters (another seed).
    ok(c.call("CF.RESERVE", "twin", 1000), "CF.RESERVE twin")
    payload = c.call("DUMP", "small")
    body, version = split_payload(payload)
    prefix, elems = parse_module_value(body)
    _, telems = parse_module_value(split_payload(c.call("DUMP", "twin"))[0])
    check(len(telems[4][1]) == len(elems[4][1]), "twin header of another length")
    e = list(elems)
    e[4] = telems[4]
    expect_refused(a, c, wrap(serialize(prefix, e), version), "small with twin's header chunk")
    e = list(elems)
    e[6] = telems[6]
    expect_refused(a, c, wrap(serialize(prefix, e), version), "small with twin's data chunk")
    c.call("DEL", "twin")
    check(tested > 300, f"only {tested} forged payloads tried")
    c.close()
    return tested


def aof_files(server, kind):
    return sorted(glob.glob(os.path.join(server.dir, "appendonlydir", f"*.{kind}.aof")))


def wait_rewrite(c):
    def done():
        text = c.call("INFO", "persistence").decode()
        return "aof_rewrite_in_progress:0" in text and "aof_rewrite_scheduled:0" in text
    wait_for(done, 30, "BGREWRITEAOF to finish")
    text = c.call("INFO", "persistence").decode()
    check("aof_last_bgrewrite_status:ok" in text, "BGREWRITEAOF failed")


def aof_workload(c, rng, tag):
    """Writes whose replay must give the same filters: creations of every kind (each
    draws a secret seed), adds, deletes, compaction, chunked copies, scripts, MULTI."""
    pool = [f"{tag}/{i}" for i in range(3000)]
    ok(c.call("CF.RESERVE", f"r:{tag}", 300, "BUCKETSIZE", 4, "MAXITERATIONS", 9,
              "EXPANSION", 2, "FPBITS", 14, "MAXFILTERS", 9), "CF.RESERVE")
    cmds = []
    for i in range(scaled(1500)):
        x = rng.choice(pool)
        k = rng.choice([f"r:{tag}", f"auto:{tag}", f"ins:{tag}"])
        op = rng.random()
        if op < 0.5:
            cmds.append(["CF.ADD", k, x])
        elif op < 0.6:
            cmds.append(["CF.ADDNX", k, x])
        elif op < 0.7:
            cmds.append(["CF.INSERT", k, "CAPACITY", rng.choice([4, 5, 7, 200]), "ITEMS", x,
                         rng.choice(pool)])
        elif op < 0.75:
            cmds.append(["CF.INSERTNX", k, "ITEMS", x])
        elif op < 0.97:
            cmds.append(["CF.DEL", k, x])
        else:
            cmds.append(["CF.COMPACT", k])
    for cmd, r in zip(cmds, c.pipeline(cmds)):
        if isinstance(r, RespError):
            check(str(r) in ("Not found", "Cuckoo filter was not found"), f"{cmd}: {r}")
    check(c.call("EVAL", "return redis.call('CF.ADD', KEYS[1], ARGV[1])", 1,
                 f"lua:{tag}", "x") == 1, "CF.ADD auto-create in a script")
    ok(c.call("MULTI"), "MULTI")
    c.call("CF.ADD", f"multi:{tag}", "a")
    c.call("CF.INSERT", f"multi2:{tag}", "CAPACITY", 50, "ITEMS", "a", "b")
    check(c.call("EXEC") == [1, [1, 1]], "CF.ADD / CF.INSERT auto-create in MULTI")
    S.loadchunks(c, f"copied:{tag}", S.scandump(c, f"r:{tag}"))
    chunks = S.scandump(c, f"auto:{tag}")
    S.loadchunks(c, f"partial:{tag}", chunks[:1])
    c.call("SET", f"str:{tag}", "plain")
    return chunks


# Membership answers compared before and after each AOF restart, on every filter.
AOF_ITEMS = ((), [f"{tag}/{i}" for tag in ("one", "two") for i in range(3000)]
             + [f"absent/{i}" for i in range(3000)])


def part2_aof(rng):
    c_servers = []
    aof = Server(extra=[("appendonly", "yes"), ("aof-use-rdb-preamble", "no"),
                        ("appendfsync", "always")])
    c_servers.append(aof)
    try:
        aof.start()
        c = aof.client()
        rest = aof_workload(c, rng, "one")
        before = S.dataset_snapshot(c, default=AOF_ITEMS)
        c.close()
        incr = b"".join(open(p, "rb").read() for p in aof_files(aof, "incr"))
        check(b"SEED" in incr and b"CF.RESERVE" in incr,
              "the AOF does not hold the replicated CF.RESERVE ... SEED")
        # Replayed under other module arguments: every filter carries its own parameters
        # (and CF.INSERT's CAPACITY, checked against cf-bucket-size, is not refused).
        aof.module_args = ["cf-bucket-size", 4, "cf-fingerprint-bits", 16,
                           "cf-initial-size", 500, "cf-max-iterations", 7,
                           "cf-expansion-factor", 2, "cf-max-expansions", 5]
        aof.restart()
        c = aof.client()
        S.assert_same_dataset(before, S.dataset_snapshot(c, default=AOF_ITEMS),
                              "plain AOF + restart with other module arguments")
        r = c.call_raw("CF.INSERT", "k4", "CAPACITY", 5, "ITEMS", "x")
        check(isinstance(r, RespError) and "Capacity must be in the range" in str(r),
              f"CF.INSERT ... CAPACITY 5 from a client under cf-bucket-size 4: {r!r}")
        aof.module_args = []
        # A normal client cannot pass SEED, not even from a script.
        r = c.call_raw("CF.RESERVE", "seeded", 100, "SEED", 42)
        check(isinstance(r, RespError) and str(r) == "Unknown argument received",
              f"CF.RESERVE ... SEED from a client: {r!r}")
        r = c.call_raw("EVAL", "return redis.call('CF.RESERVE', 'seeded', 100, 'SEED', 42)", 0)
        check(isinstance(r, RespError), f"CF.RESERVE ... SEED from a script: {r!r}")
        check(c.call("EXISTS", "seeded") == 0, "CF.RESERVE ... SEED made a key")

        r = str(c.call("BGREWRITEAOF"))
        check(r.startswith("Background append only file rewriting"), f"BGREWRITEAOF: {r}")
        wait_rewrite(c)
        base = b"".join(open(p, "rb").read() for p in aof_files(aof, "base"))
        check(not base.startswith(b"REDIS"), "the rewritten AOF has an RDB preamble")
        check(b"CF.LOADCHUNK" in base, "the rewritten AOF holds no CF.LOADCHUNK commands")
        check(b"CF.ADD" not in base, "the rewritten AOF still holds CF.ADD commands")
        c.close()
        aof.restart()
        c = aof.client()
        S.assert_same_dataset(before, S.dataset_snapshot(c, default=AOF_ITEMS),
                              "BGREWRITEAOF + restart")

        # More writes after the rewrite (base + incremental file), and the incomplete
        # filter rewritten as CF.LOADCHUNK commands takes the rest of its chunks.
        S.loadchunks(c, "partial:one", rest[1:])
        check(S.scandump(c, "partial:one") == S.scandump(c, "auto:one"), "partial:one completed")
        aof_workload(c, rng, "two")
        before = S.dataset_snapshot(c, default=AOF_ITEMS)
        c.close()
        aof.restart()
        c = aof.client()
        S.assert_same_dataset(before, S.dataset_snapshot(c, default=AOF_ITEMS),
                              "rewritten AOF + more + restart")
        c.close()
    finally:
        for s in c_servers:
            s.stop()


# ------------------------------------------------------------------------------------------

def main():
    S.require_tools()
    servers = []

    def body(seed):
        rng = random.Random(seed)
        t0 = time.time()
        a = Server(extra=[("rdbcompression", "no")])
        b = Server()
        servers.extend([a, b])
        a.start()
        b.start()
        F = build_filters(a.client(), rng)
        originals = part1_dump_load(a, b, F)
        b.stop()
        t1 = time.time()
        part2_rdb(a, F, originals)
        t2 = time.time()
        n = part2_forged(a, F, rng)
        t3 = time.time()
        a.stop()
        part2_aof(rng)
        t4 = time.time()
        print(f"scandump/loadchunk {t1 - t0:.1f}s, rdb {t2 - t1:.1f}s, "
              f"{n} forged payloads {t3 - t2:.1f}s, aof {t4 - t3:.1f}s")

    S.run("test_persistence", body, servers)


if __name__ == "__main__":
    main()
