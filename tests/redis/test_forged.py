#!/usr/bin/env python3
"""Forged filter headers against the module: what memory and time they can cost a server.

A header chunk (the first CF.LOADCHUNK, or the first chunk inside a RESTORE payload or an
RDB) describes the sub-filters that the chunks after it will fill. A forged one describes
a huge filter in a few bytes. The module must check the whole filter a header describes
against maxmemory and the machine's free memory before it allocates anything, hold no
table memory for chunks that have not arrived, and let an incomplete filter expire
(cf-load-timeout) instead of holding memory for good.

Every payload here is at most 64 KiB. The test checks what the server holds after each
(used_memory, with nothing held for a refused one) and prints the figures the issue asks
for: the most memory a forged payload made the server hold, and the longest a forged
command held the event loop (the server's own measure, SLOWLOG; the client's round trip
is printed beside it; printed, never asserted).

Environment: CF_REDIS_MODULE (the .so; libcuckoofilter.so is found beside it for XXH3),
CF_REDIS_SERVER, CF_TEST_SEED. Exit 0 = pass, anything else = failure (a missing server too).
"""

import ctypes
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import RespError, Server  # noqa: E402
import cf_state as S  # noqa: E402
from cf_state import check, ok  # noqa: E402
from test_persistence import (OP_EOF, OP_STRING, OP_UINT, parse_module_value,  # noqa: E402
                              serialize, split_payload, wrap)

MiB = 1 << 20
PAYLOAD_MAX = 64 * 1024  # the largest forged payload the issue considers
ITERATIONS = 20          # MAXITERATIONS in the module's prefix

_LIB = ctypes.CDLL(os.path.join(os.path.dirname(harness.MODULE), "libcuckoofilter.so"))
_LIB.cf_hash_seeded.restype = ctypes.c_uint64
_LIB.cf_hash_seeded.argtypes = (ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t)


def xxh3(data, seed=0):
    """XXH3-64 (with seed 0 it is XXH3_64bits), through the library's cf_hash_seeded."""
    return _LIB.cf_hash_seeded(seed, data, len(data))


def le(n, width):
    return n.to_bytes(width, "little")


def align64(x):
    return (x + 63) & ~63


class Forged:
    """A header chunk (docs/FORMAT.md) of `tables` sub-filters of `buckets` buckets each
    (expansion 1), f-bit fingerprints in b-slot buckets, with every checksum right."""

    def __init__(self, tables, buckets, f=8, b=4, seed=0x5EED):
        self.seed = seed
        self.table_len = (buckets * b * f + 7) // 8
        meta_len = 64 + 32 * tables + 8
        self.cursor = align64(meta_len)
        offsets, pos = [], self.cursor
        for _ in range(tables):
            offsets.append(pos)
            pos = align64(pos + self.table_len)
        self.tables_bytes = tables * (self.table_len + 8)  # each with 8 bytes of padding
        header = (b"\x89CUCKOO\n" + le(2, 2) + le(64, 2) + le(0, 4) + le(pos + 8, 8) +
                  le(seed, 8) + le(tables * buckets * b, 8) + bytes([f, b, 1, 0]) +
                  le(500, 2) + le(0, 2) + le(1, 4) + le(tables, 4) + le(tables, 4) + le(0, 4))
        descs = b"".join(le(buckets, 8) + le(0, 8) + le(o, 8) + le(self.table_len, 8)
                         for o in offsets)
        meta = header + descs
        self.chunk = meta + le(xxh3(meta), 8) + le(0, 8)  # the file sum: never reached
        self.header_sum = xxh3(header)
        self.first_table = offsets[0]

    def prefixed(self):
        """The chunk as CF.LOADCHUNK takes it: the module's 24 bytes in front."""
        fields = le(0, 8) + le(ITERATIONS, 8)
        return fields + le(xxh3(fields, self.seed), 8) + self.chunk

    def data_chunk(self):
        """The first data chunk of table 0, zeros, with its tag (a small table: one chunk)."""
        body = bytes(self.table_len)
        return body + le(xxh3(body, self.header_sum ^ self.first_table), 8)

    def restore_body(self, prefix, loading):
        """A DUMP body of a module value holding this header (and no data chunk)."""
        fields = le(0, 8) + le(ITERATIONS, 8)
        return serialize(prefix, [(OP_UINT, 0), (OP_UINT, ITERATIONS), (OP_UINT, loading),
                                  (OP_UINT, self.cursor), (OP_STRING, self.chunk),
                                  (OP_UINT, 0), (OP_UINT, xxh3(fields, self.seed)),
                                  (OP_EOF, None)])


def used_memory(c):
    return int(re.search(rb"used_memory:(\d+)", c.call("INFO", "memory")).group(1))


class Meter:
    """The most memory and time any forged command cost."""

    def __init__(self):
        self.worst_bytes, self.worst_bytes_what = 0, ""
        self.worst_ms, self.worst_ms_what = 0.0, ""
        self.worst_server_us, self.worst_server_what = 0, ""

    def run(self, c, what, *args):
        payload = max((len(a) for a in args if isinstance(a, bytes)), default=0)
        check(payload <= PAYLOAD_MAX, f"{what}: a payload of {payload} bytes")
        before = used_memory(c)
        c.call("CONFIG", "SET", "slowlog-log-slower-than", 0)
        c.call("SLOWLOG", "RESET")
        t0 = time.perf_counter()
        reply = c.call_raw(*args)
        ms = (time.perf_counter() - t0) * 1000
        entries = [e for e in c.call("SLOWLOG", "GET", 10) if e[3][0].upper() == args[0].encode()]
        server_us = entries[0][2] if entries else 0
        if server_us > self.worst_server_us:
            self.worst_server_us, self.worst_server_what = server_us, what
        held = max(0, used_memory(c) - before)
        if held > self.worst_bytes:
            self.worst_bytes, self.worst_bytes_what = held, what
        if ms > self.worst_ms:
            self.worst_ms, self.worst_ms_what = ms, what
        print(f"    {what}: {payload} bytes -> {reply if isinstance(reply, RespError) else 'OK'};"
              f" holds {held} bytes, {server_us} us in the server ({ms:.2f} ms round trip)")
        return reply, held


def refused(reply, what):
    check(isinstance(reply, RespError), f"{what} was accepted: {reply!r}")


def scenario_maxmemory(m):
    """maxmemory 100mb: headers beyond it are refused, holding nothing; one within it
    holds only what arrived, and expires."""
    with Server(extra=[("maxmemory", "100mb"), ("rdbcompression", "no")]) as s, \
            s.client() as c:
        ok(c.call_raw("CF.RESERVE", "real", 100), "CF.RESERVE real")
        body, version = split_payload(c.call("DUMP", "real"))
        prefix, _ = parse_module_value(body)
        # The RESTORE: 64 tables of 16,000,000 bytes (1 GB) in about 2 KB.
        big = Forged(tables=64, buckets=4_000_000)
        check(big.table_len == 16_000_000, "the forged tables are 16,000,000 bytes")
        for loading in (0, 1):
            r, held = m.run(c, f"RESTORE of 64 x 16 MB tables (loading flag {loading})",
                            "RESTORE", f"r{loading}", 0, wrap(big.restore_body(prefix, loading),
                                                             version))
            refused(r, "RESTORE of a 1 GB filter under maxmemory 100mb")
            check(held < MiB, f"a refused RESTORE left {held} bytes held")
            check(c.call("EXISTS", f"r{loading}") == 0, "a refused RESTORE left a key")
        r, held = m.run(c, "CF.LOADCHUNK header of 64 x 16 MB tables", "CF.LOADCHUNK", "l",
                        big.cursor, big.prefixed())
        check(isinstance(r, RespError) and str(r) == "Couldn't create filter!",
              f"the 1 GB header under maxmemory 100mb: {r!r}")
        check(held < MiB and c.call("EXISTS", "l") == 0, f"the refused header held {held}")
        # Many headers that each fit (4 x 16 MB = 64 MB): each is accepted and holds no table
        # until its chunks come; all of them together would be far past maxmemory.
        fits = Forged(tables=4, buckets=4_000_000)
        total = 0
        for i in range(8):
            r, held = m.run(c, f"CF.LOADCHUNK header of 4 x 16 MB tables, key {i}",
                            "CF.LOADCHUNK", f"fit{i}", fits.cursor, fits.prefixed())
            ok(r, f"header {i} within maxmemory")
            total += held
        check(total < MiB, f"8 headers of 64 MB each hold {total} bytes before any chunk")
        ttl = c.call("TTL", "fit0")
        check(0 < ttl <= 600, f"an incomplete filter expires after cf-load-timeout: TTL {ttl}")
        # RESTORE of an incomplete filter that fits: accepted, holds no table either.
        r, held = m.run(c, "RESTORE of an incomplete filter of 4 x 16 MB tables", "RESTORE",
                        "rfit", 0, wrap(fits.restore_body(prefix, 1), version))
        ok(r, "RESTORE of an incomplete filter within maxmemory")
        check(held < MiB, f"the restored incomplete filter holds {held} bytes")
        check(s.alive(), "the server is up")


def scenario_free_memory(m):
    """No maxmemory: a header beyond the machine's free memory is refused at once."""
    with Server() as s, s.client() as c:
        # The most a 64 KiB header can describe: about 2,000 tables of 2^43 bytes.
        n = (PAYLOAD_MAX - 64 - 24 - 16) // 32
        huge = Forged(tables=n, buckets=1 << 41)
        r, held = m.run(c, f"CF.LOADCHUNK header of {n} x {huge.table_len >> 40} TiB tables",
                        "CF.LOADCHUNK", "h", huge.cursor, huge.prefixed())
        check(isinstance(r, RespError) and str(r) == "Couldn't create filter!",
              f"a header of {n * huge.table_len / 2**40:.0f} TiB: {r!r}")
        check(held < MiB, f"the refused header held {held} bytes")
        # 0.95 TiB in one table.
        one = Forged(tables=1, buckets=260_000_000_000)
        r, held = m.run(c, "CF.LOADCHUNK header of one 0.95 TiB table", "CF.LOADCHUNK", "h",
                        one.cursor, one.prefixed())
        refused(r, "a 0.95 TiB header without maxmemory")
        check(held < MiB and c.call("EXISTS", "h") == 0, f"the refused header held {held}")
        # The most sub-filters a 64 KiB header holds, each small: accepted, and what it
        # holds is its own bookkeeping only.
        many = Forged(tables=n, buckets=2)
        r, held = m.run(c, f"CF.LOADCHUNK header of {n} tiny tables", "CF.LOADCHUNK", "many",
                        many.cursor, many.prefixed())
        ok(r, "a header of many tiny tables")
        check(held < 2 * PAYLOAD_MAX + 256 * 1024, f"{n} tiny tables' header holds {held}")
        check(s.alive(), "the server is up")


def scenario_timeout_and_arrival():
    """Tables get memory with their first chunk; cf-load-timeout expires an incomplete
    filter; the last chunk makes it persistent."""
    with Server() as s, s.client() as c:
        ok(c.call_raw("CONFIG", "SET", "cuckoo.cf-load-timeout", "1"), "cf-load-timeout 1")
        two = Forged(tables=2, buckets=1_000_000)  # 2 x 4 MB
        ok(c.call_raw("CF.LOADCHUNK", "t", two.cursor, two.prefixed()), "header of t")
        before = c.call("MEMORY", "USAGE", "t")
        check(before < 64 * 1024, f"the header alone holds {before} bytes (MEMORY USAGE)")
        ok(c.call_raw("CF.LOADCHUNK", "t", align64(two.first_table + two.table_len),
                      two.data_chunk()), "the first table of t")
        grown = c.call("MEMORY", "USAGE", "t") - before
        # What the allocator holds for it: the table rounded up to one of its size
        # classes (jemalloc's are at most 1/4 apart above 16 KiB), no more.
        check(two.table_len <= grown < two.table_len * 5 // 4 + 1024,
              f"the first chunk of a {two.table_len}-byte table made the filter hold {grown}")
        pttl = c.call("PTTL", "t")
        check(0 < pttl <= 1000, f"PTTL of the incomplete filter, cf-load-timeout 1: {pttl}")
        deadline = time.time() + 10
        while c.call("EXISTS", "t") and time.time() < deadline:
            time.sleep(0.1)
        check(c.call("EXISTS", "t") == 0, "the incomplete filter did not expire")
        # A real filter, loaded whole: no expiry once its last chunk is in.
        ok(c.call_raw("CF.RESERVE", "src", 1000), "CF.RESERVE src")
        c.call("CF.ADD", "src", "x")
        chunks = S.scandump(c, "src")
        S.loadchunks(c, "copy", chunks[:1])
        check(c.call("PTTL", "copy") > 0, "an incomplete copy has an expiry")
        S.loadchunks(c, "copy", chunks[1:])
        check(c.call("PTTL", "copy") == -1, "the completed copy still has an expiry")
        time.sleep(1.5)
        check(c.call("CF.EXISTS", "copy", "x") == 1, "the completed copy lost its item")
        check(s.alive(), "the server is up")


def low_bits_zero(header, pos, data):
    """The data chunk at file position `pos` of a widening filter (header: the header
    chunk, 64-byte file header first), its first stored fingerprint given low f bits of 0
    (bit f set if the rest is 0 too): a slot no writer makes (docs/FORMAT.md, Tables).
    None if the chunk is not of a wider sub-filter or holds no fingerprint."""
    f, b, widen = header[40], header[41], int.from_bytes(header[46:48], "little")
    ntables = int.from_bytes(header[56:60], "little")
    k = next((k for k in range(ntables)
              if int.from_bytes(header[64 + 32 * k + 16:64 + 32 * k + 24], "little") == pos),
             None)
    if k is None or k == 0:
        return None
    width = min(32, f + (k * widen + 255) // 256)
    buckets = int.from_bytes(header[64 + 32 * k:64 + 32 * k + 8], "little")
    if width == f:
        return None
    table = int.from_bytes(data[:-8], "little")
    mask = (1 << width) - 1
    for j in range(buckets * b):
        v = (table >> (j * width)) & mask
        if v:
            v &= ~((1 << f) - 1)
            v = v or 1 << f
            table = (table & ~(mask << (j * width))) | v << (j * width)
            return table.to_bytes(len(data) - 8, "little")
    return None


def reforged(header, chunks, change):
    """(cursor, bytes) chunks of a filter (header: the header chunk, without the module's
    fields) with every data chunk passed through change(pos, bytes) and every checksum
    made right again: the tags, and the file sum the header chunk carries."""
    total = int.from_bytes(header[16:24], "little")
    meta = len(header) - 8
    key = xxh3(header[:64])
    file = bytearray(total)
    file[:meta] = header[:meta]
    out, pos = [], align64(meta)
    for cursor, data in chunks:
        body = change(pos, data) or data[:-8]
        file[pos:pos + len(body)] = body
        out.append((cursor, body + le(xxh3(body, key ^ pos), 8)))
        pos = cursor
    return header[:meta] + le(xxh3(bytes(file[:total - 8])), 8), out


class _Config(ctypes.Structure):
    """The leading fields of the library's cf_config (include/cuckoofilter.h), for
    cf_new_sized: what a filter made outside the module needs."""
    _fields_ = [("capacity", ctypes.c_uint64), ("fingerprint_bits", ctypes.c_uint),
                ("bucket_size", ctypes.c_uint), ("max_kicks", ctypes.c_uint),
                ("expansion", ctypes.c_uint), ("seed", ctypes.c_uint64),
                ("allocator", ctypes.c_void_p), ("max_sub_filters", ctypes.c_uint),
                ("flags", ctypes.c_uint)]


def widening_file(seed):
    """The file of a filter made by the library's defaults, whose sub-filters widen (the
    module's never do: only a forged payload brings one), grown to 3 sub-filters and then
    half emptied, so that compaction has room in sub-filter 0."""
    lib = _LIB
    lib.cf_new_sized.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    lib.cf_add.argtypes = lib.cf_delete.argtypes = (ctypes.c_void_p, ctypes.c_char_p,
                                                    ctypes.c_size_t)
    lib.cf_serialized_size.argtypes = (ctypes.c_void_p,)
    lib.cf_serialized_size.restype = ctypes.c_size_t
    lib.cf_serialize.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                 ctypes.c_void_p)
    lib.cf_free.argtypes = (ctypes.c_void_p,)
    cfg = _Config(capacity=64, expansion=2, seed=seed)
    f = ctypes.c_void_p()
    check(lib.cf_new_sized(ctypes.byref(cfg), ctypes.sizeof(cfg), ctypes.byref(f)) == 0,
          "cf_new_sized")
    keys = [f"k{i}".encode() for i in range(300)]
    for k in keys:
        check(lib.cf_add(f, k, len(k)) == 0, "cf_add")
    for k in keys[:150]:
        check(lib.cf_delete(f, k, len(k)) == 0, "cf_delete of an added key")
    n = lib.cf_serialized_size(f)
    buf = ctypes.create_string_buffer(n)
    check(lib.cf_serialize(f, buf, n, None) == 0, "cf_serialize")
    lib.cf_free(f)
    file = buf.raw
    check(int.from_bytes(file[56:60], "little") >= 2 and file[12] & 1,
          "the library's filter did not grow with wider fingerprints")
    return file


def scenario_narrowed_fingerprint():
    """The forged filter of issue 32: in a sub-filter wider than the first, a fingerprint
    whose low f bits are 0. Compaction would narrow it to an empty slot that is still
    counted, and the filter's own DUMP and RDB would no longer load: one RESTORE by any
    client, and the server refused its RDB at the next restart. Refused at the door,
    through RESTORE and CF.LOADCHUNK; the sound twin loads, takes deletes and compaction,
    saves, and the server restarts with it."""
    with Server(extra=[("rdbcompression", "no")]) as s:  # DUMP strings as they are
        c = s.client()
        ok(c.call_raw("CF.RESERVE", "any", 100), "CF.RESERVE any")
        body, version = split_payload(c.call("DUMP", "any"))
        prefix, _ = parse_module_value(body)  # the module type's id: the record follows it
        seed = 0x5EED
        file = widening_file(seed)
        meta = 64 + 32 * int.from_bytes(file[56:60], "little") + 16 * file[43] + 8
        header = file[:meta] + file[-8:]
        chunks = []
        for k in range(int.from_bytes(file[56:60], "little")):
            d = 64 + 32 * k
            pos, length = (int.from_bytes(file[d + 16:d + 24], "little"),
                           int.from_bytes(file[d + 24:d + 32], "little"))
            chunks.append((align64(pos + length), file[pos:pos + length] + bytes(8)))
        fields = le(0, 8) + le(ITERATIONS, 8)  # deletes, MAXITERATIONS
        check_field = xxh3(fields, seed)
        forged_at = []

        def forge(pos, data):
            x = low_bits_zero(header, pos, data)
            if x is not None and not forged_at:
                forged_at.append(pos)
                return x
            return None

        def record(change):
            h, cs = reforged(header, chunks, change)
            e = [(OP_UINT, 0), (OP_UINT, ITERATIONS), (OP_UINT, 0),
                 (OP_UINT, align64(meta)), (OP_STRING, h)]
            for cursor, data in cs:
                e += [(OP_UINT, cursor), (OP_STRING, data)]
            e += [(OP_UINT, 0), (OP_UINT, check_field), (OP_EOF, None)]
            return wrap(serialize(prefix, e), version), h, cs

        sound, _, _ = record(lambda pos, data: None)
        ok(c.call_raw("RESTORE", "sound", 0, sound), "RESTORE of the library's widening filter")
        forged, h, cs = record(forge)
        check(forged_at, "no fingerprint of a wider sub-filter to forge")
        r = c.call_raw("RESTORE", "forged", 0, forged)
        check(isinstance(r, RespError) and str(r) == "ERR Bad data format",
              f"RESTORE of a fingerprint whose low f bits are 0: {r!r}")
        check(c.call("EXISTS", "forged") == 0, "the refused RESTORE left a key")
        ok(c.call_raw("CF.LOADCHUNK", "lc", align64(meta), fields + le(check_field, 8) + h),
           "CF.LOADCHUNK of the forged filter's header chunk (sound)")
        replies = [c.call_raw("CF.LOADCHUNK", "lc", cursor, data) for cursor, data in cs]
        check(any(isinstance(x, RespError) and str(x).startswith("Couldn't load chunk!")
                  for x in replies), f"CF.LOADCHUNK of the forged table: {replies!r}")
        # The sound twin through the writes that compact, then a restart from its RDB.
        for i in range(150, 300):
            check(c.call("CF.EXISTS", "sound", f"k{i}") == 1, f"k{i} lost by the restore")
        for i in range(150, 250):
            check(c.call("CF.DEL", "sound", f"k{i}") == 1, f"CF.DEL sound k{i}")
        ok(c.call_raw("CF.COMPACT", "sound"), "CF.COMPACT sound")
        ok(c.call_raw("SAVE"), "SAVE")
        c.close()
        s.restart()
        c = s.client()
        for i in range(250, 300):
            check(c.call("CF.EXISTS", "sound", f"k{i}") == 1, f"k{i} lost by the restart")
        c.close()
        print("    a widened fingerprint with its low bits 0: RESTORE and CF.LOADCHUNK refuse it;"
              " its sound twin compacts, saves and loads after a restart")


def main():
    S.require_tools()
    servers = []

    def body(seed):
        del seed  # nothing random here
        m = Meter()
        scenario_maxmemory(m)
        scenario_free_memory(m)
        scenario_timeout_and_arrival()
        scenario_narrowed_fingerprint()
        print(f"most memory a forged payload of at most {PAYLOAD_MAX} bytes made the server "
              f"hold: {m.worst_bytes} bytes ({m.worst_bytes_what})")
        print(f"longest a forged command held the event loop (SLOWLOG): {m.worst_server_us} us "
              f"({m.worst_server_what}); longest round trip {m.worst_ms:.2f} ms "
              f"({m.worst_ms_what})")

    S.run("test_forged", body, servers)


if __name__ == "__main__":
    main()
