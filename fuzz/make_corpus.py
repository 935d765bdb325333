#!/usr/bin/env python3
"""Write the seed corpus of fuzz_ops (fuzz/corpus/ops/seed-*) from readable descriptions.

Usage: fuzz/make_corpus.py [OUTPUT_DIR]     (default: the corpus/ops next to this script)

Each seed is a config header followed by operations, encoded as fuzz_ops.c's comment
describes. Only files named seed-* are rewritten; inputs the fuzzer found (named by their
SHA-1) are left alone. Python 3, standard library only; the output is deterministic.
"""

import os
import struct
import sys

# Flags of header byte 10.
TRACKING = 1 << 0
PERSIST = 1 << 1
KICKS_BIG = 1 << 2
SUB_BIG = 1 << 3
EXP_BIG = 1 << 4
BROKEN_ALLOC = 1 << 5
BROKEN_FREE = 1 << 6

# Opcodes (the low 4 bits of an operation's first byte).
ADD, ADD_UNIQUE, ADD_HASH, DELETE, DELETE_ABSENT, CONTAINS, COUNT, CLEAR = range(8)
CONTAINS_MANY, STATS, BURST, MANY, DELETE_MANY, REARM, VERIFY, ADD_RAW = range(8, 16)


def header(cap=1000, f=0, b=0, kicks=0, exp=0, subs=0, tracking=False, persist=False,
           fail_at=0, broken=None, seed=1):
    """The 16-byte header that decodes to exactly these values."""
    flags = (TRACKING if tracking else 0) | (PERSIST if persist else 0)
    assert 0 <= cap <= 5000
    if f == 0 or 4 <= f <= 32:
        fbyte = 0 if f == 0 else f - 3
    else:
        assert f <= 40
        fbyte = 0x80 | f
    b4 = 0
    if b <= 8:
        b3 = b
    elif b <= 255:
        b3, b4 = 0xC0, b - 9
    else:
        assert b <= 260
        b3 = 0xF8 + (b - 256)
    if kicks >= 65535:
        flags |= KICKS_BIG
        kv = kicks - 65535
    elif kicks < 600 or kicks >= 0x8000:
        kv = kicks
    else:
        raise ValueError("max_kicks %d cannot be encoded" % kicks)
    if exp >= 32766:
        flags |= EXP_BIG
        ev = exp - 32766
    else:
        assert exp <= 5
        ev = exp
    if subs >= 65535:
        flags |= SUB_BIG
        sv = subs - 65535
    elif subs < 10:
        sv = subs
    else:
        assert subs <= 0x7FFF
        sv = 0x8000 | subs
    if broken == "alloc":
        flags |= BROKEN_ALLOC
    elif broken == "free":
        flags |= BROKEN_ALLOC | BROKEN_FREE
    return struct.pack("<HBBBHBHBBI", cap, fbyte, b3, b4, kv, ev, sv, flags, fail_at, seed)


def op(code, arg=0):
    return bytes([code | (arg << 4)])


def kid(i):
    """A small key id: the 1-byte key i (0..127)."""
    assert 0 <= i < 128
    return bytes([i])


def kid2(hi, lo):
    """A 2-byte key (hi & 63, lo)."""
    return bytes([0x80 | (hi & 63), lo])


def raw(data):
    """A raw key of 0..63 bytes."""
    assert len(data) < 64
    return bytes([0xC0 | len(data)]) + data


def add(key, via=ADD):
    return op(via) + key


def many(n):
    """n (1..256) new distinct keys."""
    return op(MANY) + bytes([n - 1])


def burst(key, n, by_hash=False):
    """The same key n (1..64) times."""
    return op(BURST, 1 if by_hash else 0) + key + bytes([n - 1])


def delete(i, by_hash=False):
    return op(DELETE, 1 if by_hash else 0) + bytes([i])


def delete_many(n, start=0):
    return op(DELETE_MANY) + bytes([n - 1, start])


def delete_absent(key, by_hash=False):
    return op(DELETE_ABSENT, 1 if by_hash else 0) + key


def contains(key):
    return op(CONTAINS) + key


def count(key):
    return op(COUNT) + key


def contains_many(selectors, salt=7):
    return op(CONTAINS_MANY) + bytes([len(selectors), salt]) + bytes(selectors)


def rearm(n, persist=False):
    return op(REARM, 1 if persist else 0) + bytes([n])


def add_raw(x):
    return op(ADD_RAW) + struct.pack("<Q", x)


CLEAR_OP = op(CLEAR)
STATS_OP = op(STATS)
VERIFY_OP = op(VERIFY)

# A mixed workload every shape gets: distinct keys, duplicates, every kind of lookup,
# deletes of present and absent keys, a NULL 0-byte key.
MIXED = (
    many(120)
    + b"".join(add(kid(i)) for i in range(10))
    + add(kid(3), ADD_UNIQUE) + add(kid(100), ADD_UNIQUE) + add(kid2(5, 9), ADD_HASH)
    + add(raw(b"alice")) + add(raw(b"")) + op(ADD, 8) + bytes([0xC0])
    + contains(raw(b"alice")) + contains(raw(b"bob")) + count(kid(3)) + count(kid(99))
    + contains_many([1, 3, 5, 0, 2, 4, 7, 9, 11, 6])
    + delete(0) + delete(5, by_hash=True) + delete_absent(raw(b"never added"))
    + delete_absent(kid(120), by_hash=True)
    + add_raw(0x0123456789ABCDEF) + add_raw(42)
    + STATS_OP + VERIFY_OP + delete_many(20, 3) + many(60) + STATS_OP + VERIFY_OP
)


def seeds():
    s = {}
    # Every shape family: bucket sizes 1, 2, 4, 8 times fingerprints 4, 8, 12, 16, 32,
    # fixed size, filled to capacity (the sizing promise) and worked on.
    # Each ends past its capacity (distinct keys): nothing may be refused before that.
    for b in (1, 2, 4, 8):
        for f in (4, 8, 12, 16, 32):
            s["shape-b%d-f%d" % (b, f)] = (header(cap=250, f=f, b=b, seed=b * 100 + f) + MIXED
                                           + many(200) + VERIFY_OP)
    s["shape-defaults"] = header(cap=500) + MIXED + many(256) * 2
    s["shape-b3-f7"] = header(cap=400, f=7, b=3, seed=3) + MIXED + many(256)
    s["shape-b255-f32"] = header(cap=600, f=32, b=255, seed=4) + MIXED + many(256) * 2
    s["shape-b16-f5"] = header(cap=250, f=5, b=16, seed=5) + MIXED + many(200)
    s["fill-b1-f8-overfull"] = (header(cap=100, f=8, b=1, seed=12) + many(150) + STATS_OP
                                + delete_many(30) + many(40) + VERIFY_OP)
    s["fill-b2-f4-cap5000"] = header(cap=5000, f=4, b=2, seed=13) + many(256) * 6 + VERIFY_OP

    # Invalid configs (each field out of range), and the valid edges next to them.
    s["invalid-capacity-0"] = header(cap=0) + MIXED
    for f in (1, 33, 40):
        s["invalid-f%d" % f] = header(f=f) + MIXED
    s["invalid-b256"] = header(b=256) + MIXED
    s["invalid-b260"] = header(b=260) + MIXED
    s["invalid-kicks-65536"] = header(kicks=65536) + MIXED
    s["invalid-subs-65537"] = header(subs=65537, exp=2) + MIXED
    s["invalid-expansion-32769"] = header(exp=32769) + MIXED
    s["invalid-allocator-alloc"] = header(broken="alloc", tracking=True) + MIXED
    s["invalid-allocator-free"] = header(broken="free") + MIXED
    s["edge-kicks-65535"] = header(cap=2000, kicks=65535, b=2, f=8) + many(256) * 8 + VERIFY_OP
    s["edge-kicks-1"] = header(cap=500, kicks=1, b=1, f=12) + many(256) * 2 + STATS_OP
    s["edge-subs-65536"] = header(cap=1, subs=65536, exp=1, b=1, kicks=1) + many(256) * 4
    s["edge-expansion-32768"] = header(cap=50, exp=32768, b=2) + many(200) + VERIFY_OP
    # One step of 32768x would pass the table size limit (2^26 buckets at f = 32): CF_FULL.
    s["edge-expansion-32768-limit"] = (header(cap=1000, f=32, b=1, kicks=1, exp=32768)
                                       + many(256) * 6 + VERIFY_OP)
    s["edge-capacity-1"] = header(cap=1) + MIXED

    # Growth: small first table, many adds, every expansion.
    for e in (1, 2, 5):
        s["grow-e%d" % e] = (header(cap=10, exp=e, seed=20 + e) + many(256) * 3 + STATS_OP
                             + delete_many(64, 1) + VERIFY_OP + many(100))
    s["grow-b1-kicks1-e1"] = header(cap=2, b=1, f=6, kicks=1, exp=1, subs=3000) + many(256) * 6
    s["grow-max-subs-3"] = header(cap=20, exp=1, subs=3, seed=30) + many(256) * 2 + VERIFY_OP
    s["grow-then-delete-all"] = (header(cap=16, exp=2, b=2, f=8, seed=31) + many(200)
                                 + delete_many(64) * 4 + STATS_OP + VERIFY_OP)

    # Hot key: the same key over and over, fixed and growing.
    s["hot-fixed"] = header(cap=100, seed=40) + burst(kid(7), 64) + burst(kid(7), 20, True)
    s["hot-growing"] = (header(cap=100, exp=2, seed=41) + burst(kid(7), 64)
                        + burst(raw(b"hot"), 30, True) + many(50) + VERIFY_OP)
    s["hot-b1"] = header(cap=10, b=1, exp=1, seed=42) + burst(kid(1), 10) + many(30)

    # Deletes and clear.
    s["delete-dups"] = (header(cap=300, seed=50) + burst(kid(2), 5) + many(100)
                        + b"".join(delete(i) for i in range(40)) + delete_many(64, 9) + VERIFY_OP)
    s["clear"] = (header(cap=200, exp=1, seed=51) + many(256) + CLEAR_OP + contains(kid(1))
                  + STATS_OP + many(100) + CLEAR_OP + CLEAR_OP + add(kid(1)) + VERIFY_OP)

    # The failing allocator: cf_new fails (1st, 2nd, 3rd call; once or for good); growth
    # fails now and then; a re-armed failure in the middle.
    for n in (1, 3):
        s["alloc-fail-new-%d" % n] = header(cap=100, tracking=True, fail_at=n) + MIXED
    s["alloc-fail-new-persist"] = header(cap=100, tracking=True, fail_at=2, persist=True) + MIXED
    s["alloc-fail-growth"] = (header(cap=10, exp=2, tracking=True, fail_at=4, seed=60)
                              + many(256) * 2 + VERIFY_OP)
    s["alloc-fail-growth-persist"] = (header(cap=10, exp=1, tracking=True, fail_at=5,
                                             persist=True, seed=61) + many(256) + STATS_OP)
    s["alloc-rearm"] = (header(cap=10, exp=2, tracking=True, seed=62) + many(50) + rearm(1)
                        + many(100) + rearm(2, True) + many(200) + rearm(0) + many(200)
                        + VERIFY_OP)

    # Short inputs: an empty one, a header only.
    s["empty"] = b""
    s["header-only"] = header(cap=1000)
    return s


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "ops")
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        if name.startswith("seed-"):
            os.remove(os.path.join(out, name))
    all_seeds = seeds()
    for name, data in sorted(all_seeds.items()):
        with open(os.path.join(out, "seed-" + name), "wb") as fh:
            fh.write(data)
    print("make_corpus: wrote %d seeds to %s" % (len(all_seeds), out))


if __name__ == "__main__":
    main()
