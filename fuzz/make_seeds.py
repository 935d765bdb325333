#!/usr/bin/env python3
"""Writes the seed inputs of fuzz_module, fuzz_kvlog, fuzz_keys and fuzz_segments
(fuzz/corpus/<target>/),
in the byte formats described at the top of each target.

Usage: make_seeds.py LIBCUCKOOFILTER_SO [CORPUS_DIR]

The module's seeds are real dumps: filters made and dumped by the library (through ctypes),
wrapped as the module wraps them (its 24-byte prefix before the header chunk) and laid
out as CF.LOADCHUNK records or as an RDB value. Each seed is named by the SHA-1 of its
bytes, as libFuzzer names what it adds, so running this again adds nothing new.
"""
import ctypes
import hashlib
import os
import struct
import sys


def u64(x):
    return struct.pack("<Q", x)


def u16(x):
    return struct.pack("<H", x)


class Lib:
    def __init__(self, path):
        lib = ctypes.CDLL(path)
        lib.cf_new.argtypes = (ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
        lib.cf_add.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)
        lib.cf_delete.argtypes = lib.cf_add.argtypes
        lib.cf_dump_chunk_max.restype = ctypes.c_size_t
        lib.cf_dump_chunk_max.argtypes = (ctypes.c_void_p,)
        lib.cf_dump_chunk.argtypes = (ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                                      ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.POINTER(ctypes.c_size_t))
        lib.cf_hash_seeded.restype = ctypes.c_uint64
        lib.cf_hash_seeded.argtypes = (ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t)
        lib.cf_free.argtypes = (ctypes.c_void_p,)
        self.lib = lib

    def dump(self, capacity, fbits, bsize, expansion, seed, keys, deletes=()):
        """The chunks [(cursor that comes with it, bytes)] of a filter made from keys."""

        class Config(ctypes.Structure):
            _fields_ = [("capacity", ctypes.c_uint64), ("fingerprint_bits", ctypes.c_uint),
                        ("bucket_size", ctypes.c_uint), ("max_kicks", ctypes.c_uint),
                        ("expansion", ctypes.c_uint), ("seed", ctypes.c_uint64),
                        ("allocator", ctypes.c_void_p), ("max_sub_filters", ctypes.c_uint),
                        ("flags", ctypes.c_uint)]

        cfg = Config(capacity, fbits, bsize, 0, expansion, seed, None, 0, 1)
        f = ctypes.c_void_p()
        assert self.lib.cf_new(ctypes.byref(cfg), ctypes.byref(f)) == 0
        for k in keys:
            self.lib.cf_add(f, k, len(k))
        for k in deletes:
            self.lib.cf_delete(f, k, len(k))
        cap = self.lib.cf_dump_chunk_max(f)
        buf = ctypes.create_string_buffer(cap)
        cursor, n, chunks = ctypes.c_uint64(0), ctypes.c_size_t(0), []
        while True:
            assert self.lib.cf_dump_chunk(f, ctypes.byref(cursor), buf, cap,
                                          ctypes.byref(n)) == 0
            if n.value == 0:
                break
            chunks.append((cursor.value, buf.raw[:n.value]))
        self.lib.cf_free(f)
        return chunks


def save(directory, data):
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(directory, name), "wb") as out:
        out.write(data)


def module_seeds(lib, d):
    iterations = 20
    fields = u64(0) + u64(iterations)
    shapes = [(500, 12, 2, 0, 3), (300, 8, 4, 1, 5), (200, 16, 4, 2, 7), (100, 32, 1, 0, 9)]
    for cap, f, b, e, seed in shapes:
        keys = [b"k%d" % i for i in range(cap * (3 if e else 1))]
        chunks = lib.dump(cap, f, b, e, seed, keys, deletes=keys[:5])
        if any(len(c) > 0xFFFF for _, c in chunks):
            continue
        check = lib.lib.cf_hash_seeded(seed, fields, len(fields))
        prefixed = [(chunks[0][0], fields + u64(check) + chunks[0][1])] + chunks[1:]
        for forge in (0, 4):
            # CF.LOADCHUNK: every chunk; the header alone; the chunks out of order.
            for recs in (prefixed, prefixed[:1], prefixed[:1] + prefixed[2:]):
                save(d, bytes([forge]) + b"".join(u64(c) + u16(len(x)) + x for c, x in recs))
            # RDB: deletes, MAXITERATIONS, loading flag, (cursor, chunk)..., 0, the check.
            for loading, recs in ((0, chunks), (1, chunks[:1])):
                body = u64(0) + u64(iterations) + u64(loading)
                body += b"".join(u64(c) + u16(len(x)) + x for c, x in recs)
                body += u64(0) + u64(check)
                save(d, bytes([1 | forge]) + body)
                save(d, bytes([3 | forge]) + body)


def kvlog_seeds(d):
    def op(put, key, value=b""):
        return bytes([(0 if put else 1) | (len(key) - 1) << 1, len(value)]) + key + value

    ops = (op(True, b"alpha", b"one") + op(True, b"beta", b"two") + op(False, b"alpha")
           + op(True, b"gamma", b"x" * 40) + op(True, b"beta", b""))
    for mode in range(8):
        for param in (0, 5, 37, 300):
            save(d, bytes([mode]) + u64(0x5EED) + u16(param) + (ops if mode % 2 == 0 else ops))


def keys_seeds(d):
    bodies = [b"", b"a\nb\n", b"a\r\nb\r\n\r\n", b"last-without-newline", b"\n\n\n",
              b"x\x00y\x00", b"cr\r", b"\r\n", b"mixed\r\nline\nend\r"]
    for flags in range(8):
        for body in bodies:
            save(d, bytes([flags, 3]) + body)


def segments_seeds(d):
    def record(offset, value, to_src=False, hashed=False):
        return struct.pack("<IBB", offset | (1 << 31 if to_src else 0), value, int(hashed))

    for shape in range(4):
        for mode in (0o00, 0o31, 0o77, 0o107, 0o166):  # keys in each, the last segment
            save(d, bytes([shape, mode]) + u64(0x5E65 + shape))
        save(d, bytes([shape, 0o44]) + u64(7) + record(100, 0xFF) + record(4000, 0x10, True))
        save(d, bytes([shape, 0o33]) + u64(9) + record(77, 0, hashed=True)
             + record(12345, 0, hashed=True))


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    lib = Lib(sys.argv[1])
    root = sys.argv[2] if len(sys.argv) == 3 else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "corpus")
    for name in ("module", "kvlog", "keys", "segments"):
        os.makedirs(os.path.join(root, name), exist_ok=True)
    module_seeds(lib, os.path.join(root, "module"))
    kvlog_seeds(os.path.join(root, "kvlog"))
    keys_seeds(os.path.join(root, "keys"))
    segments_seeds(os.path.join(root, "segments"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
