"""Tests of the Python package `cuckoofilter` (ctest runs them with pytest: python_package).

The environment gives PYTHONPATH (build/python), CUCKOO (the command-line tool, for files
passed both ways) and CF_TEST_SEED (the seed of every random choice; printed on failure).
numpy is required: a missing numpy fails the run, it does not skip.
"""

import copy
import gc
import os
import pickle
import random
import subprocess
import sys
import threading

import numpy as np
import pytest

import cuckoofilter as cf

SEED = int(os.environ.get("CF_TEST_SEED") or 20261126)  # conftest.py prints it
TOOL = os.environ.get("CUCKOO")


@pytest.fixture
def rng(request):
    return random.Random(f"{SEED}/{request.node.name}")


def keys(n, prefix=b"k"):
    return [prefix + b"%015d" % i for i in range(n)]  # 16 bytes each


# --- keys and basic calls ---------------------------------------------------------------

def test_key_types_are_their_bytes():
    f = cf.CuckooFilter(capacity=1000, fingerprint_bits=32, seed=1)
    assert f.add(b"alice") is True
    assert f.add("bob") is True
    assert f.add(42) is True
    assert b"bob" in f  # str keys are their UTF-8 bytes
    assert (42).to_bytes(8, "little") in f  # an int is its 8 bytes, little-endian
    assert "alice" in f and bytearray(b"alice") in f and memoryview(b"alice") in f
    assert "é" not in f
    f.add("é")
    assert "é".encode() in f
    assert len(f) == 4
    for bad in (-1, 2**64):
        with pytest.raises(ValueError):
            f.add(bad)
        with pytest.raises(ValueError):
            bad in f  # noqa: B015
    for bad in (1.5, None, object(), ["a"]):
        with pytest.raises(TypeError):
            f.add(bad)
        with pytest.raises(TypeError):
            bad in f  # noqa: B015
    with pytest.raises(UnicodeEncodeError):
        f.add("\udc80")  # a lone surrogate has no UTF-8
    assert len(f) == 4  # nothing added by the failed calls


def test_add_unique_discard_count():
    f = cf.CuckooFilter(capacity=1000, fingerprint_bits=32, seed=2)
    assert f.add_unique("x") is True
    assert f.add_unique("x") is False
    assert f.count("x") == 1
    f.add("x")
    assert f.count("x") == 2
    assert f.discard("x") is True
    assert "x" in f
    assert f.discard("x") is True
    assert "x" not in f
    assert f.discard("x") is False
    assert f.count("x") == 0
    assert len(f) == 0


def test_constructor_arguments():
    f = cf.CuckooFilter(1000)
    s = f.stats
    assert s["capacity"] == 1000 and s["fingerprint_bits"] == 12 and s["bucket_size"] == 4
    assert s["expansion"] == 0 and s["concurrent"] is True and s["read_only"] is False
    g = cf.CuckooFilter(capacity=1000, fpr=0.0001)
    assert g.stats["fpr_bound"] <= 0.0001
    assert cf.CuckooFilter(1000, fingerprint_bits=16, bucket_size=2).stats["bucket_size"] == 2
    assert cf.CuckooFilter(1000, semi_sort=True).stats["semi_sort"] is True
    for kw in ({"capacity": 0}, {"capacity": -1}, {"capacity": 10, "fpr": 0},
               {"capacity": 10, "fpr": 1.5}, {"capacity": 10, "fingerprint_bits": 33},
               {"capacity": 10, "fingerprint_bits": 3}, {"capacity": 10, "bucket_size": 256},
               {"capacity": 10, "fpr": 0.01, "fingerprint_bits": 8},
               {"capacity": 10, "bucket_size": 2, "semi_sort": True}):
        with pytest.raises(ValueError):
            cf.CuckooFilter(**kw)
    # The library's own words for its rules.
    for kw, text in (({"fingerprint_bits": 3}, "4 to 32 bits"),
                     ({"bucket_size": 2, "semi_sort": True}, "4 slots")):
        with pytest.raises(ValueError, match=text):
            cf.CuckooFilter(10, **kw)
    for kw in ({"capacity": "10"}, {"capacity": 10, "seed": "x"}, {"capacity": 1.5}):
        with pytest.raises(TypeError):
            cf.CuckooFilter(**kw)
    with pytest.raises(TypeError):
        cf.CuckooFilter(10, 0.01)  # everything after capacity is by keyword


def test_seed_makes_filters_reproducible():
    a = cf.CuckooFilter(1000, seed=7)
    b = cf.CuckooFilter(1000, seed=7)
    c = cf.CuckooFilter(1000)  # a secret seed each
    d = cf.CuckooFilter(1000)
    for f in (a, b, c, d):
        f.add_many(keys(500))
    assert a.to_bytes() == b.to_bytes()
    assert c.to_bytes() != d.to_bytes()


def test_full_fixed_filter_raises_and_is_unchanged():
    f = cf.CuckooFilter(capacity=100, fingerprint_bits=16, seed=3)
    added = []
    with pytest.raises(cf.FilterFull):
        for k in keys(10000):
            f.add(k)
            added.append(k)
    before = f.to_bytes()
    with pytest.raises(cf.FilterFull):
        f.add(b"one more that does not fit" * 3)
    assert f.to_bytes() == before
    assert all(k in f for k in added)
    assert isinstance(cf.FilterFull(), cf.Error)
    with pytest.raises(cf.FilterFull) as e:
        f.add_many(keys(50, b"m"))
    assert 0 <= e.value.added < 50
    assert len(f) == len(added) + e.value.added


def test_growing_filter_grows():
    f = cf.CuckooFilter(capacity=1000, expansion=2, seed=4)
    ks = keys(20000)
    assert f.add_many(ks) == 20000
    assert f.stats["sub_filters"] > 1
    assert all(f.contains_many(ks))


def test_behaves_like_a_python_container(tmp_path):
    f = cf.CuckooFilter(1000, seed=4)
    g = cf.CuckooFilter(1000, seed=4, concurrent=False)
    assert f == g and not (f != g)  # the same settings, seed and keys (none)
    f.add("x")
    assert f != g and f != cf.CuckooFilter(1000, seed=5)
    g.add("x")
    assert f == g  # concurrency is not content
    assert (f == "x") is False and f != 3
    path = tmp_path / "f.cf"
    f.save(path)
    assert cf.CuckooFilter.open(path) == f == cf.CuckooFilter.load(path)
    with pytest.raises(TypeError, match="unhashable"):
        hash(f)
    with pytest.raises(TypeError):
        {f}
    assert bytes(f) == f.to_bytes() and cf.CuckooFilter.from_bytes(bytes(f)) == f
    # Read-only properties.
    h = cf.CuckooFilter(5000, fingerprint_bits=16, bucket_size=2, concurrent=False)
    h.add_many(keys(1000))
    s = h.stats
    assert (h.capacity, h.fingerprint_bits, h.bucket_size, h.concurrent) == (5000, 16, 2, False)
    assert h.fpr == s["fpr"] and h.load_factor == s["load_factor"] > 0
    assert f.concurrent is True
    for name in ("capacity", "fingerprint_bits", "bucket_size", "fpr", "load_factor",
                 "concurrent"):
        with pytest.raises(AttributeError):
            setattr(h, name, 1)
    # remove: KeyError when no copy is there; discard says False.
    assert h.remove(keys(1)[0]) is None
    with pytest.raises(KeyError):
        h.remove(b"never added")
    assert h.discard(b"never added") is False
    assert len(h) == 999


def test_errors_say_what_was_wrong():
    for capacity in (0, -1):
        with pytest.raises(ValueError, match=r"capacity must be in \[1, 18446744073709551615\]"):
            cf.CuckooFilter(capacity)
    with pytest.raises(ValueError, match="bucket size must be 1 to 255"):
        cf.CuckooFilter(10, bucket_size=300)
    # Too large for memory (a 2**44-key table: about 28 TB): how many bytes it needed.
    with pytest.raises(MemoryError, match=r"needs \d+ bytes"):
        cf.CuckooFilter(2 ** 44)


def test_to_bytes_beside_a_growing_writer():
    f = cf.CuckooFilter(1000, expansion=2, max_sub_filters=16)
    stop, grown = threading.Event(), threading.Event()
    # The writer grows the filter to GROWN batches, then keeps writing at that size (a
    # batch's keys out and back in): a writer that only grew could fill all 16
    # sub-filters (65M keys) while the copies waited for the processor, and each copy
    # then took that much longer.
    GROWN = 100

    def write():
        i = 0
        while not stop.is_set():
            batch = keys(2000, b"w%d-" % (i % GROWN))
            if i >= GROWN:
                for k in batch:
                    f.remove(k)
            f.add_many(batch)
            grown.set()  # the first batch outgrows the first sub-filter
            i += 1

    t = threading.Thread(target=write)
    t.start()
    try:
        # The copies must overlap the writer, not finish before its thread is scheduled.
        assert grown.wait(60)
        copies = [cf.CuckooFilter.from_bytes(f.to_bytes()) for _ in range(200)]
    finally:
        stop.set()
        t.join()
    assert len(copies) == 200 and f.stats["sub_filters"] > 1


# --- batches ----------------------------------------------------------------------------

def test_batches_match_single_calls(rng):
    f = cf.CuckooFilter(capacity=50000, seed=5)
    ks = keys(20000)
    assert f.add_many(ks) == 20000
    probes = ks[:5000] + keys(5000, b"absent")
    rng.shuffle(probes)
    assert f.contains_many(probes) == [p in f for p in probes]
    assert f.contains_many(iter(probes[:10])) == [p in f for p in probes[:10]]  # any iterable
    assert f.contains_many([]) == []
    mixed = ["s", 7, b"b", bytearray(b"ba"), memoryview(b"mv")]
    g = cf.CuckooFilter(capacity=100, fingerprint_bits=32, seed=6)
    assert g.add_many(mixed) == 5
    assert g.contains_many(mixed) == [True] * 5
    with pytest.raises(TypeError):
        g.contains_many(b"not a batch")
    with pytest.raises(TypeError):
        g.contains_many("not a batch")
    with pytest.raises(TypeError):
        g.add_many([b"ok", 1.5])
    with pytest.raises(ValueError):
        g.add_many([b"ok", -1])


def test_numpy_uint64_buffers():
    f = cf.CuckooFilter(capacity=200000, seed=8)
    a = np.arange(100000, dtype=np.uint64) * np.uint64(2654435761)
    assert f.add_many(a) == len(a)
    r = f.contains_many(a)
    assert isinstance(r, bytearray) and len(r) == len(a)
    assert np.frombuffer(r, dtype=bool).all()
    # each element is the key its int is
    assert int(a[123]) in f and all(f.contains_many([int(x) for x in a[:100]]))
    absent = np.arange(100000, 150000, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(1)
    hits = np.frombuffer(f.contains_many(absent), dtype=bool)
    assert hits.mean() < 0.01
    assert f.contains_many(absent[::-1].copy()) == bytearray(hits[::-1].astype(np.uint8))
    assert f.contains_many(np.zeros(0, dtype=np.uint64)) == bytearray()
    for bad in (np.arange(10, dtype=np.uint32), np.arange(10, dtype=np.float64),
                np.arange(20, dtype=np.uint64)[::2]):
        with pytest.raises((TypeError, BufferError, ValueError)):
            f.contains_many(bad)


# --- whole filters ----------------------------------------------------------------------

def test_bytes_pickle_copy_clear():
    f = cf.CuckooFilter(capacity=5000, seed=9)
    ks = keys(3000)
    f.add_many(ks)
    for g in (cf.CuckooFilter.from_bytes(f.to_bytes()), pickle.loads(pickle.dumps(f)),
              f.copy(), copy.copy(f)):
        assert g.to_bytes() == f.to_bytes()
        assert all(g.contains_many(ks))
        g.add(b"only in the copy")
        assert b"only in the copy" not in f or f.count(b"only in the copy") == 0
    f.clear()
    assert len(f) == 0 and f.stats["capacity"] == 5000
    assert not any(f.contains_many(ks[:100]))


def test_concurrent_or_not_on_every_path(tmp_path):
    """Filters are concurrent unless made with concurrent=False: from the constructor, a
    file, bytes or chunks; copies and pickles keep what they copy. Either kind answers
    the same, a loaded grown one included."""
    ks = keys(6000)
    for cc in (True, False):
        f = cf.CuckooFilter(capacity=1000, expansion=2, seed=22, concurrent=cc)
        f.add_many(ks)
        assert f.stats["concurrent"] is cc and f.stats["sub_filters"] > 1
        p = tmp_path / ("f%d.cf" % cc)
        f.save(p)
        made = [cf.CuckooFilter.load(p, concurrent=cc),
                cf.CuckooFilter.from_bytes(f.to_bytes(), concurrent=cc),
                cf.CuckooFilter.from_bytes(f.to_bytes(), cc),  # positional, as pickle calls it
                cf.CuckooFilter.from_chunks(f.chunks(), concurrent=cc),
                f.copy(), copy.copy(f), pickle.loads(pickle.dumps(f))]
        for g in made:
            assert g.stats["concurrent"] is cc
            assert g.to_bytes() == f.to_bytes()
            assert all(g.contains_many(ks)) and all(k in g for k in ks[::7])
            g.add_many(keys(3000, b"more"))  # grows on, as the original would
            assert all(g.contains_many(ks))
    # The defaults: concurrent everywhere; a copy of a read-only mapped filter is a
    # writable, concurrent one.
    g = cf.CuckooFilter.load(tmp_path / "f0.cf")
    assert g.stats["concurrent"] is True
    assert cf.CuckooFilter.from_bytes(g.to_bytes()).stats["concurrent"] is True
    assert cf.CuckooFilter.from_chunks(g.chunks()).stats["concurrent"] is True
    m = cf.CuckooFilter.open(tmp_path / "f0.cf")
    assert m.stats["concurrent"] is False and m.stats["read_only"] is True
    for c in (m.copy(), pickle.loads(pickle.dumps(m))):
        assert c.stats["concurrent"] is True and c.stats["read_only"] is False
        c.add(b"x")


def test_corrupt_bytes_raise(rng):
    f = cf.CuckooFilter(capacity=2000, seed=10)
    f.add_many(keys(1000))
    good = f.to_bytes()
    bad_inputs = [b"", b"junk", good[:-1], good + b"x", good[:64]]
    for _ in range(40):
        b = bytearray(good)
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
        bad_inputs.append(bytes(b))
    for b in bad_inputs:
        with pytest.raises(cf.CorruptFilter) as e:
            cf.CuckooFilter.from_bytes(b)
        assert isinstance(e.value, ValueError) and isinstance(e.value, cf.Error)


def test_files_save_load_open(tmp_path):
    f = cf.CuckooFilter(capacity=5000, seed=11)
    ks = keys(4000)
    f.add_many(ks)
    p = tmp_path / "f.cf"
    f.save(p)
    f.save(str(p))  # again, over it: atomic replace
    assert sorted(os.listdir(tmp_path)) == ["f.cf"]
    g = cf.CuckooFilter.load(p)
    assert g.to_bytes() == f.to_bytes() and all(g.contains_many(ks))
    m = cf.CuckooFilter.open(p)
    assert m.stats["read_only"] and all(m.contains_many(ks)) and len(m) == len(f)
    for change in (lambda: m.add(b"x"), lambda: m.discard(ks[0]), lambda: m.add_many([b"y"]),
                   m.clear, lambda: m.add_unique(b"z")):
        with pytest.raises(cf.ReadOnlyFilter):
            change()
    assert all(m.contains_many(ks))
    with pytest.raises(FileNotFoundError):
        cf.CuckooFilter.load(tmp_path / "missing.cf")
    with pytest.raises(FileNotFoundError):
        cf.CuckooFilter.open(tmp_path / "missing.cf")
    with pytest.raises(OSError):
        f.save(tmp_path / "no-such-dir" / "f.cf")
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x10
    (tmp_path / "bad.cf").write_bytes(bytes(data))
    with pytest.raises(cf.CorruptFilter):
        cf.CuckooFilter.load(tmp_path / "bad.cf")
    with pytest.raises(cf.CorruptFilter):
        cf.CuckooFilter.open(tmp_path / "bad.cf")
    (tmp_path / "short.cf").write_bytes(bytes(data[:100]))
    with pytest.raises(cf.CorruptFilter):
        cf.CuckooFilter.load(tmp_path / "short.cf")


def murmur64a(data):
    """MurmurHash64A, seed 0, as docs/FORMAT.md states it (hash id 2)."""
    m, mask = 0xc6a4a7935bd1e995, (1 << 64) - 1
    h = len(data) * m & mask
    whole = len(data) // 8 * 8
    for i in range(0, whole, 8):
        k = int.from_bytes(data[i:i + 8], "little") * m & mask
        h = (h ^ ((k ^ (k >> 47)) * m & mask)) * m & mask
    if len(data) > whole:
        h = (h ^ int.from_bytes(data[whole:], "little")) * m & mask
    h = (h ^ (h >> 47)) * m & mask
    return h ^ (h >> 47)


def test_redisbloom_layout(tmp_path):
    """redisbloom=True: RedisBloom's layout, through every path a filter takes here."""
    f = cf.CuckooFilter(1000, redisbloom=True, expansion=2)
    s = f.stats
    assert s["redisbloom"] is True and s["fingerprint_bits"] == 8 and s["bucket_size"] == 2
    assert s["buckets"] == 512 and s["concurrent"] is True
    assert cf.CuckooFilter(1000).stats["redisbloom"] is False
    # A key's fingerprint lands where RedisBloom puts it: h % 255 + 1, bucket h mod 512, in
    # the first table of the file (byte 128), first slot.
    g = cf.CuckooFilter(1000, redisbloom=True)
    g.add(b"alpha")
    h = murmur64a(b"alpha")
    data = g.to_bytes()
    assert data[42] == 2 and data[128 + (h % 512) * 2] == h % 255 + 1
    ks = keys(5000)
    assert f.add_many(ks) == 5000 and f.stats["sub_filters"] >= 2
    assert all(f.contains_many(ks)) and all(k in f for k in ks[:100])
    p = tmp_path / "rb.cf"
    f.save(p)
    for loaded in (cf.CuckooFilter.load(p), cf.CuckooFilter.open(p),
                   cf.CuckooFilter.load(p, concurrent=False),
                   cf.CuckooFilter.from_bytes(f.to_bytes()), f.copy(),
                   pickle.loads(pickle.dumps(f))):
        assert loaded.stats["redisbloom"] is True and all(loaded.contains_many(ks))
        assert loaded.to_bytes() == f.to_bytes()
    for kw in ({"seed": 5}, {"fingerprint_bits": 12}, {"semi_sort": True, "bucket_size": 4},
               {"fpr": 0.01}):
        with pytest.raises(ValueError):
            cf.CuckooFilter(100, redisbloom=True, **kw)


def test_fast_hash(tmp_path):
    """fast_hash=True: hash id 3 for int keys, through every path a filter takes here."""
    f = cf.CuckooFilter(3000, fast_hash=True, expansion=2, seed=SEED)
    assert f.stats["fast_hash"] is True and cf.CuckooFilter(10).stats["fast_hash"] is False
    ids = [i << 32 for i in range(6000)]  # ids with a stride: not random keys
    assert f.add_many(ids) == 6000 and f.stats["sub_filters"] >= 2
    assert all(f.contains_many(ids)) and all(i in f for i in ids[:200])
    assert all(f.contains_many(np.array(ids, dtype=np.uint64)))
    assert all(i.to_bytes(8, "little") in f for i in ids[:200])  # an int is its 8 bytes
    g = cf.CuckooFilter(3000, expansion=2, seed=SEED)  # XXH3: other hashes of 8-byte keys
    g.add_many(ids)
    assert f.to_bytes()[42] == 3 and g.to_bytes()[42] == 1
    assert f.to_bytes()[128:] != g.to_bytes()[128:]
    p = tmp_path / "fast.cf"
    f.save(p)
    for loaded in (cf.CuckooFilter.load(p), cf.CuckooFilter.open(p),
                   cf.CuckooFilter.from_bytes(f.to_bytes()), f.copy(),
                   pickle.loads(pickle.dumps(f))):
        assert loaded.stats["fast_hash"] is True and all(loaded.contains_many(ids))
    b = cf.CuckooFilter.build(ids, fast_hash=True, seed=SEED)
    assert b.stats["fast_hash"] is True and all(b.contains_many(ids))
    for kw in ({"redisbloom": True}, {"window": 60}):
        with pytest.raises(ValueError):
            cf.CuckooFilter(100, fast_hash=True, **kw)


def test_every_refusal_is_an_error(tmp_path):
    """One `except cf.Error` catches every refusal of a file or bytes; file errors stay the
    OSError subclass their errno selects, and corrupt ones carry the library's reason."""
    f = cf.CuckooFilter(capacity=100, seed=13)
    d = tmp_path / "dir"
    d.mkdir()
    cases = [
        (lambda: cf.CuckooFilter.load(tmp_path / "missing.cf"), FileNotFoundError),
        (lambda: cf.CuckooFilter.open(tmp_path / "missing.cf"), FileNotFoundError),
        (lambda: cf.CuckooFilter.load(d), IsADirectoryError),
        (lambda: cf.CuckooFilter.open(d), IsADirectoryError),
        (lambda: f.save(tmp_path / "no-such-dir" / "f.cf"), FileNotFoundError),
        (lambda: cf.CuckooFilter.open("/dev/null"), OSError),  # ENODEV: cannot be mapped
    ]
    for call, kind in cases:
        with pytest.raises(cf.Error) as e:
            call()
        assert isinstance(e.value, kind) and isinstance(e.value, cf.FileError), e.value
        assert e.value.errno is not None and e.value.filename is not None
    # A newer format version: the library's reason, not cf_strerror's generic text.
    newer = bytearray(f.to_bytes())
    newer[8] = 4
    (tmp_path / "v4.cf").write_bytes(bytes(newer))
    for call in (lambda: cf.CuckooFilter.from_bytes(bytes(newer)),
                 lambda: cf.CuckooFilter.load(tmp_path / "v4.cf"),
                 lambda: cf.CuckooFilter.open(tmp_path / "v4.cf")):
        with pytest.raises(cf.CorruptFilter) as e:
            call()
        assert "newer format version" in str(e.value) and "retired" not in str(e.value)
    damaged = bytearray(f.to_bytes())
    damaged[len(damaged) // 2] ^= 1
    with pytest.raises(cf.CorruptFilter, match="checksum mismatch"):
        cf.CuckooFilter.from_bytes(bytes(damaged))


def test_chunks_round_trip():
    f = cf.CuckooFilter(capacity=100000, expansion=2, seed=12)
    f.add_many(keys(150000))
    pairs = list(f.chunks())
    assert pairs[0][1] and all(isinstance(c, int) and isinstance(d, bytes) for c, d in pairs)
    g = cf.CuckooFilter.from_chunks(pairs)
    assert g.to_bytes() == f.to_bytes()
    with pytest.raises(cf.CorruptFilter):
        cf.CuckooFilter.from_chunks(pairs[:-1])  # one missing
    if len(pairs) > 2:
        with pytest.raises(cf.CorruptFilter):
            cf.CuckooFilter.from_chunks([pairs[0], pairs[2], pairs[1]] + pairs[3:])
    with pytest.raises(cf.CorruptFilter):
        cf.CuckooFilter.from_chunks([])
    # The header chunk carries the Redis module's 24 bytes (FORMAT.md); without them it is
    # the C library's bare chunk, which loads too; with fields that do not match their
    # check, or the check moved to another filter's header, it does not.
    (c0, h0), rest = pairs[0], pairs[1:]
    assert cf.CuckooFilter.from_chunks([(c0, h0[24:])] + rest).to_bytes() == f.to_bytes()
    forged = bytearray(h0)
    forged[0] ^= 1  # "deletes" changed, the check not
    with pytest.raises(cf.CorruptFilter):
        cf.CuckooFilter.from_chunks([(c0, bytes(forged))] + rest)
    other = cf.CuckooFilter(capacity=100000, expansion=2, seed=99)
    other.add_many(keys(150000))
    (_, h1), *_ = other.chunks()
    with pytest.raises(cf.CorruptFilter):
        cf.CuckooFilter.from_chunks([(c0, h1[:24] + h0[24:])] + rest)
    with pytest.raises(TypeError):
        cf.CuckooFilter.from_chunks([b"not a pair"])


def test_chunks_one_at_a_time():
    f = cf.CuckooFilter(capacity=100000, expansion=2, seed=21)
    f.add_many(keys(150000))
    it = f.chunks()
    assert iter(it) is it
    cursor, header = next(it)
    assert cursor != 0 and len(header) < 4096  # the header chunk: made alone, no table yet
    rest = list(it)
    assert all(c != 0 for c, _ in rest) and list(it) == []  # ended, and stays ended
    assert cf.CuckooFilter.from_chunks([(cursor, header)] + rest).to_bytes() == f.to_bytes()
    with pytest.raises(TypeError):
        type(it)()
    # A change between two steps: the dump does not load (as with CF.SCANDUMP); a growth
    # may end it at once, as a dict changed during iteration does.
    it = f.chunks()
    first = next(it)
    f.add(b"one more")
    with pytest.raises(cf.CorruptFilter):
        cf.CuckooFilter.from_chunks([first] + list(it))
    it = f.chunks()
    first, second = next(it), next(it)
    f.add_many(keys(400000, prefix=b"g"))  # grows
    assert f.stats["sub_filters"] > 2
    try:
        rest = list(it)
    except RuntimeError as e:
        assert "changed" in str(e)
    else:
        with pytest.raises(cf.CorruptFilter):
            cf.CuckooFilter.from_chunks([first, second] + rest)


def test_files_interchange_with_the_tool(tmp_path):
    assert TOOL and os.access(TOOL, os.X_OK), "CUCKOO must name the cuckoo tool"
    ks = [b"tool-%d" % i for i in range(3000)]
    src = tmp_path / "keys.txt"
    src.write_bytes(b"".join(k + b"\n" for k in ks))
    # the tool writes, Python reads
    t = tmp_path / "tool.cf"
    subprocess.run([TOOL, "build", str(t), str(src), "--seed", "5", "-q"], check=True)
    g = cf.CuckooFilter.load(t)
    assert all(g.contains_many(ks)) and len(g) == len(ks)
    # Python writes, the tool reads
    f = cf.CuckooFilter(capacity=5000, seed=13)
    f.add_many(ks)
    p = tmp_path / "py.cf"
    f.save(p)
    out = subprocess.run([TOOL, "query", str(p), "--absent"], input=src.read_bytes(),
                         stdout=subprocess.PIPE, check=True).stdout
    assert out == b""  # every key present
    subprocess.run([TOOL, "verify", str(p)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([TOOL, "add", str(p), "added-by-the-tool", "-q"], check=True)
    assert b"added-by-the-tool" in cf.CuckooFilter.load(p)
    # a file of hash id 3 (fast_hash): 8-byte lines are its 8-byte keys in the tool too
    eight = [b"id%06d" % i for i in range(3000)]
    h3 = cf.CuckooFilter(capacity=7000, seed=13, fast_hash=True)
    h3.add_many(eight + ks)
    p3 = tmp_path / "h3.cf"
    h3.save(p3)
    out = subprocess.run([TOOL, "query", str(p3), "--absent"],
                         input=b"".join(k + b"\n" for k in eight + ks),
                         stdout=subprocess.PIPE, check=True).stdout
    assert out == b""
    info = subprocess.run([TOOL, "info", str(p3), "--json"], stdout=subprocess.PIPE,
                          check=True).stdout
    assert b'"hash_id": 3' in info
    subprocess.run([TOOL, "add", str(p3), "id999999", "-q"], check=True)
    assert b"id999999" in cf.CuckooFilter.load(p3)


# --- merging -----------------------------------------------------------------------------

@pytest.mark.parametrize("concurrent", [True, False])
def test_merge_union_counts_and_operators(concurrent):
    a = cf.CuckooFilter(capacity=20000, seed=5, concurrent=concurrent)
    b = cf.CuckooFilter.empty_like(a)
    assert b.stats == a.stats and b.to_bytes() == a.to_bytes()
    assert b.stats["concurrent"] == concurrent
    ka, kb = keys(5000, b"a"), keys(5000, b"b")
    a.add_many(ka)
    b.add_many(kb + ka[:10])
    u = a | b  # a new filter; a and b unchanged
    assert len(u) == 10010 and len(a) == 5000 and len(b) == 5010
    assert all(u.contains_many(ka + kb))
    assert [u.count(k) for k in ka[:12]] == [2] * 10 + [1] * 2
    before = a.to_bytes()
    a |= b
    assert a.to_bytes() == u.to_bytes() != before
    c = cf.CuckooFilter.empty_like(a)
    c.merge(a)
    c.merge(b)
    assert len(c) == 15020 and all(c.contains_many(ka + kb))
    # The false-positive rate of the merge is a filter's given the same keys.
    direct = cf.CuckooFilter.empty_like(a)
    direct.add_many(ka + kb + ka[:10])
    probes = keys(200000, b"z")
    merged_fp = sum(u.contains_many(probes))
    direct_fp = sum(direct.contains_many(probes))
    assert abs(merged_fp - direct_fp) <= 5 * (direct_fp ** 0.5) + 10


def test_build_same_bytes_for_any_threads_and_the_tool(tmp_path):
    """build(): the distinct keys, sized by them; a segmented filter filled by threads gives
    the same bytes for any number of them, and the bytes `cuckoo build` writes."""
    ks = keys(300000, b"b")
    one = cf.CuckooFilter.build(ks + ks[:100], seed=11, segmented=True, bucket_size=1,
                                threads=1, concurrent=False)
    assert len(one) == 300000 and one.capacity == 300000 and one.stats["segmented"]
    assert all(one.contains_many(ks))
    for threads in (0, 2, 3, 4):
        other = cf.CuckooFilter.build(ks, seed=11, segmented=True, bucket_size=1, threads=threads)
        assert other.stats["concurrent"] and other.to_bytes() == one.to_bytes(), threads
    path = tmp_path / "keys.txt"
    path.write_bytes(b"".join(k + b"\n" for k in ks))
    out = tmp_path / "built.cf"
    subprocess.run([TOOL, "build", str(out), "--seed", "11", "--mapping", "segmented",
                    "--bucket-size", "1", "-q", "--jobs", "2", str(path)], check=True)
    assert out.read_bytes() == one.to_bytes()
    # numpy keys (each the 8 bytes of a uint64), the same keys as ints.
    ids = np.arange(50000, dtype=np.uint64)
    f = cf.CuckooFilter.build(ids, seed=4)
    assert len(f) == 50000 and all(f.contains_many(ids)) and 49999 in f
    assert f.to_bytes() == cf.CuckooFilter.build(list(range(50000)), seed=4).to_bytes()
    # Too many keys for the capacity: FilterFull, with the filter of those that fit.
    with pytest.raises(cf.FilterFull) as e:
        cf.CuckooFilter.build(ks[:5000], capacity=1000, seed=1)
    assert 0 < e.value.added == len(e.value.filter) < 5000
    with pytest.raises(TypeError):
        cf.CuckooFilter.build(ks, 100)
    with pytest.raises(ValueError):
        cf.CuckooFilter.build(ks, threads=-1)
    with pytest.raises(ValueError):
        cf.CuckooFilter.build(ks, capacity=0)


def test_merge_threads_same_bytes():
    # Segmented filters (4 segments) merge segment by segment: the same bytes for any
    # number of threads; a concurrent destination merges with one, to the same bytes too.
    a = cf.CuckooFilter(capacity=900000, seed=9, segmented=True, concurrent=False)
    b = cf.CuckooFilter.empty_like(a)
    ka, kb = keys(300000, b"a"), keys(300000, b"b")
    a.add_many(ka)
    b.add_many(kb)
    merged = []
    for threads in (1, 2, 4, 0):
        m = a.copy()
        m.merge(b, threads=threads)
        merged.append(m.to_bytes())
    assert all(x == merged[0] for x in merged)
    cc = cf.CuckooFilter.from_bytes(a.to_bytes(), concurrent=True)
    cc.merge(b, threads=2)
    assert cc.to_bytes() == merged[0]
    assert all(cf.CuckooFilter.from_bytes(merged[0]).contains_many(ka + kb))
    with pytest.raises(ValueError, match="threads"):
        a.merge(b, threads=257)
    with pytest.raises(TypeError):
        a.merge(b, 2)


def test_merge_refusals_change_nothing(tmp_path):
    a = cf.CuckooFilter(capacity=20000, seed=5)
    a.add_many(keys(3000))
    before = a.to_bytes()
    for other, text in ((cf.CuckooFilter(capacity=20000, seed=6), "seeds differ"),
                        (cf.CuckooFilter(capacity=20000, seed=5, fingerprint_bits=16),
                         "fingerprint widths differ"),
                        (cf.CuckooFilter(capacity=40000, seed=5), "first sub-filter sizes"),
                        (a, "itself")):
        with pytest.raises(ValueError, match=text):
            a.merge(other)
        with pytest.raises(ValueError, match=text):
            a |= other
        assert a.to_bytes() == before
    full = cf.CuckooFilter.empty_like(a)
    full.add_many(keys(19000, b"f"))
    with pytest.raises(cf.FilterFull, match="do not fit"):
        a.merge(full)
    assert a.to_bytes() == before
    with pytest.raises(TypeError):
        a.merge(b"not a filter")
    with pytest.raises(TypeError):
        a | {1, 2}
    with pytest.raises(TypeError):
        cf.CuckooFilter.empty_like("x")
    path = tmp_path / "a.cf"
    a.save(path)
    mapped = cf.CuckooFilter.open(path)
    with pytest.raises(cf.ReadOnlyFilter):
        mapped.merge(cf.CuckooFilter.empty_like(a))
    # open()'s filter merges into others, and | gives a writable one.
    m = mapped | cf.CuckooFilter.empty_like(a)
    assert len(m) == 3000
    m.add(b"new")


def test_merge_beside_lookups_in_threads():
    a = cf.CuckooFilter(capacity=200000, seed=9)
    a.add_many(keys(50000, b"a"))
    b = cf.CuckooFilter.empty_like(a)
    b.add_many(keys(100000, b"b"))
    stop, looking = threading.Event(), threading.Event()
    misses = []

    def look():
        ka = keys(50000, b"a")
        while not stop.is_set():
            misses.append(50000 - sum(a.contains_many(ka)))
            looking.set()

    t = threading.Thread(target=look)
    t.start()
    # The merge must start while the reader runs, not before its thread is scheduled.
    assert looking.wait(60)
    a.merge(b)
    stop.set()
    t.join()
    assert misses and sum(misses) == 0
    assert all(a.contains_many(keys(100000, b"b")))


# --- no false negatives, a model --------------------------------------------------------

def test_million_keys_no_false_negative():
    f = cf.CuckooFilter(capacity=1_000_000, fpr=0.001, seed=14)
    ks = keys(1_000_000)
    assert f.add_many(ks) == len(ks)
    assert all(f.contains_many(ks))
    missing = sum(1 for k in ks[::97] if k not in f)
    assert missing == 0
    absent = keys(200_000, b"a")
    rate = sum(f.contains_many(absent)) / len(absent)
    assert rate <= 3 * f.stats["fpr"] + 1e-4


def test_differential_against_a_model(rng):
    """Random adds, discards and lookups against a multiset: no false negative, counts
    never below the model's, len exact."""
    for shape in ({"fingerprint_bits": 12}, {"fingerprint_bits": 8, "bucket_size": 2},
                  {"semi_sort": True}, {"fingerprint_bits": 16, "expansion": 1}):
        f = cf.CuckooFilter(capacity=3000, seed=rng.randrange(2**63), **shape)
        model = {}
        universe = [b"u%d" % i for i in range(4000)]
        for step in range(20000):
            k = rng.choice(universe)
            op = rng.random()
            if op < 0.45:
                try:
                    f.add(k)
                    model[k] = model.get(k, 0) + 1
                except cf.FilterFull:
                    pass
            elif op < 0.7 and model.get(k):
                assert f.discard(k) is True
                model[k] -= 1
            else:
                if model.get(k):
                    assert k in f, (shape, step)
                    assert f.count(k) >= model[k], (shape, step)
            if step % 5000 == 4999:
                present = [x for x, c in model.items() if c]
                assert all(f.contains_many(present)), shape
                assert len(f) == sum(model.values()), shape


# --- threads and reference counts -------------------------------------------------------

@pytest.mark.parametrize("source", ["new", "loaded"])
def test_threads_share_one_filter(source):
    """Writers, readers and a dump on one filter at once, made here or loaded from bytes
    once grown: no crash, no false negative for keys added before, exact length after."""
    f = cf.CuckooFilter(capacity=200000 if source == "new" else 20000, expansion=2, seed=15)
    stable = keys(50000, b"s")
    f.add_many(stable)
    if source == "loaded":
        f = cf.CuckooFilter.from_bytes(f.to_bytes())
        assert f.stats["sub_filters"] > 1 and f.stats["concurrent"]
    errors = []

    def reader():
        for _ in range(20):
            if not all(f.contains_many(stable)):
                errors.append("a stable key was missed (batch)")
            if not all(k in f for k in stable[::50]):
                errors.append("a stable key was missed")

    def writer(i):
        mine = keys(20000, b"w%d-" % i)
        for _ in range(3):
            f.add_many(mine)
            for k in mine[:2000]:
                f.discard(k)
            for k in mine[2000:]:
                f.discard(k)

    def dumper():  # a dump beside the writers: each chunk whole, or RuntimeError on growth
        for _ in range(5):
            try:
                for _, data in f.chunks():
                    if not data:
                        errors.append("an empty chunk")
            except RuntimeError:
                pass

    threads = [threading.Thread(target=reader) for _ in range(2)]
    threads += [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    threads.append(threading.Thread(target=dumper))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert len(f) == len(stable)
    assert all(f.contains_many(stable))


def test_chunks_one_iterator_two_threads():
    """Two threads step one chunks() iterator of a concurrent filter, whose steps release
    the GIL: a step while the other's runs raises ValueError, as a generator's does, and
    every chunk comes out once and whole (racing steps would share one cursor and room)."""
    f = cf.CuckooFilter(capacity=40_000_000, seed=31)  # 4 chunks of 16 MiB
    f.add_many(keys(1000))
    it = f.chunks()
    got, busy = [], []

    def step():
        while True:
            try:
                got.append(next(it))
            except ValueError:
                busy.append(1)
            except StopIteration:
                return

    threads = [threading.Thread(target=step) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cursors = [c for c, _ in got]
    assert len(cursors) == 5 and len(set(cursors)) == 5  # the header and 4 table chunks
    # in dump order: each cursor is the offset of the chunk after it, so they rise
    pairs = sorted(got)
    assert cf.CuckooFilter.from_chunks(pairs).to_bytes() == f.to_bytes()


def test_batch_over_a_list_another_thread_changes():
    """A batch reads the list chunk by chunk, releasing the GIL in between; another
    thread that shortens and refills the list meanwhile causes no crash: the answers
    stop where the list ended."""
    f = cf.CuckooFilter(capacity=400000, seed=23)
    base = keys(200000, b"m")
    f.add_many(base)
    shared = list(base)
    stop = threading.Event()

    def mutate():
        while not stop.is_set():
            del shared[len(shared) // 3:]
            shared.extend(base[len(shared):])

    g = cf.CuckooFilter(capacity=1000, expansion=2, seed=24)
    t = threading.Thread(target=mutate)
    t.start()
    try:
        for _ in range(10):
            out = f.contains_many(shared)
            assert len(out) <= len(base) and all(out)  # every key there is base's: present
            assert g.add_many(shared) <= len(base)
    finally:
        stop.set()
        t.join()


def test_no_reference_leaks():
    """A million calls leave no objects behind."""
    f = cf.CuckooFilter(capacity=10000, seed=16)
    big, text = 2**40 + 5, "a str key"
    ks = keys(998) + [big, text]
    batch = np.arange(1000, dtype=np.uint64)

    def calls():
        for k in ks:
            f.add(k)
            _ = k in f
            f.count(k)
            f.add_unique(k)
            f.discard(k)
            f.discard(k)
        f.contains_many(ks)
        f.add_many(batch)
        f.contains_many(batch)
        for x in batch:
            f.discard(int(x))
        try:
            f.add(-1)
        except ValueError:
            pass
        _ = f.stats
        _ = list(f.chunks())
        _ = next(f.chunks())  # a dump left half-way

    calls()
    gc.collect()
    watched = (ks[0], big, text, f, batch, ks)
    refs = [sys.getrefcount(x) for x in watched]
    if hasattr(sys, "gettotalrefcount"):
        before = sys.gettotalrefcount()
    before_objects = len(gc.get_objects())
    blocks = sys.getallocatedblocks()
    for _ in range(170):  # 170 rounds of about 6000 calls: a million
        calls()
    gc.collect()
    assert [sys.getrefcount(x) for x in watched] == refs  # no reference kept or dropped
    assert len(gc.get_objects()) <= before_objects + 10
    assert sys.getallocatedblocks() <= blocks + 100
    if hasattr(sys, "gettotalrefcount"):
        assert sys.gettotalrefcount() - before < 100


def test_help_reads_as_a_manual():
    doc = cf.CuckooFilter.__doc__
    assert "capacity" in doc and "fpr" in doc and "Threads" in doc
    for name in ("add", "add_unique", "discard", "count", "add_many", "contains_many", "save",
                 "load", "open", "to_bytes", "from_bytes", "chunks", "from_chunks", "clear",
                 "copy"):
        assert getattr(cf.CuckooFilter, name).__doc__, name
    assert issubclass(cf.CorruptFilter, ValueError) and issubclass(cf.CorruptFilter, cf.Error)
    assert issubclass(cf.ReadOnlyFilter, cf.Error) and issubclass(cf.FilterFull, cf.Error)
    assert issubclass(cf.FileError, cf.Error) and issubclass(cf.FileError, OSError)
    assert cf.__version__ == cf.library_version


# --- windows: filters that forget --------------------------------------------------------

class FakeClock:
    """A clock a test moves by hand (seconds)."""

    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def test_window_forgets_on_its_clock(rng):
    clock = FakeClock(1_700_000_000.0)
    f = cf.CuckooFilter(1000, window=60, generations=4, clock=clock, fingerprint_bits=32,
                        seed=3)
    added = {}  # key -> time of its last add
    for step in range(3000):
        clock.now += rng.random() * 0.5
        k = b"w%d" % rng.randrange(400)
        if rng.random() < 0.4:
            f.add_unique(k)       # added, or refreshed: it stays a window from now
            added[k] = clock.now
        for key, at in added.items():
            if clock.now < at + 60:
                assert key in f, (key, at, clock.now)   # never missed inside the window
            elif clock.now >= at + 80:                     # W * G / (G - 1): gone
                assert key not in f, (key, at, clock.now)
    s = f.stats
    assert s["window"] == 60.0 and s["generations"] == 4
    assert s["generation"] == int(clock.now * 1000 * 3 // 60_000)


def test_window_manual_advance_and_files(tmp_path):
    f = cf.CuckooFilter(100, window=10, generations=3, clock=None, fingerprint_bits=32, seed=4)
    f.add(b"y")
    f.advance()
    f.advance()
    assert b"y" in f and f.count(b"y") == 1 and len(f) == 1
    f.advance()
    assert b"y" not in f and len(f) == 0
    f.add(b"z")
    g = copy.copy(f)
    assert g.to_bytes() == f.to_bytes()
    assert pickle.loads(pickle.dumps(f)).stats["generations"] == 3
    # A file keeps the window; loaded, it runs on time.time: generation 3 of a 10 s window
    # is long past, so everything is forgotten at once.
    path = tmp_path / "w.cf"
    f.save(path)
    assert b"z" not in cf.CuckooFilter.load(path)
    if TOOL:
        info = subprocess.run([TOOL, "info", str(path)], capture_output=True, check=True)
        assert b"10s in 3 generations" in info.stdout


def test_window_arguments():
    for kwargs, error in (({"generations": 3}, ValueError), ({"window": 0}, ValueError),
                          ({"window": 5, "generations": 1}, ValueError),
                          ({"window": 5, "expansion": 2}, ValueError),
                          ({"window": 5, "redisbloom": True}, ValueError),
                          ({"window": "5"}, TypeError), ({"window": 5, "clock": 3}, TypeError)):
        with pytest.raises(error):
            cf.CuckooFilter(10, **kwargs)

    def broken():
        raise RuntimeError("no time")
    with pytest.raises(RuntimeError):
        cf.CuckooFilter(10, window=5, clock=broken)
    backwards = FakeClock(100.0)
    f = cf.CuckooFilter(10, window=5, clock=backwards, fingerprint_bits=32)
    f.add(b"a")
    backwards.now = 50.0  # a clock that goes back advances nothing: the key stays
    f.add(b"b")
    assert b"a" in f and b"b" in f
    with pytest.raises(ValueError):
        cf.CuckooFilter(10, window=5, clock=lambda: -1.0)
    with pytest.raises(ValueError, match="window"):
        cf.CuckooFilter(10).advance()  # not windowed
    # Up to 100 years, as the tool and the module; past it, an error that says the range.
    century = 100 * 365 * 24 * 3600
    assert cf.CuckooFilter(10, window=century).stats["window"] == century
    for too_long in (century + 1, 1e12, 1e300):
        with pytest.raises(ValueError, match="100 years"):
            cf.CuckooFilter(10, window=too_long)


@pytest.mark.parametrize("bits,semi_sort", [(8, False), (12, False), (16, False), (13, False),
                                            (32, False), (12, True), (13, True)])
def test_window_round_trips(bits, semi_sort, tmp_path):
    """Whatever a windowed filter holds (concurrent, the default, or not) saves and loads
    back byte for byte by every path: bytes, files, copies, pickles and chunks. Once, a
    concurrent window at 8, 12 or 16 bits wrote bytes its loader refused."""
    # A loaded window runs on time.time: a window of ten years, advanced by hand ahead of
    # that clock, is where every copy's clock leaves it.
    for concurrent in (True, False):
        f = cf.CuckooFilter(300, window=10 * 365 * 24 * 3600, generations=3,
                            fingerprint_bits=bits, semi_sort=semi_sort, concurrent=concurrent)
        keys = [b"w%d" % i for i in range(600)]
        for step in range(3):
            for k in keys[step * 200:step * 200 + 200]:
                f.add(k)
            f.discard(keys[step * 200])
            f.advance()
        data = f.to_bytes()
        path = tmp_path / "w.cf"
        f.save(path)
        copies = [cf.CuckooFilter.from_bytes(data), cf.CuckooFilter.load(path), copy.copy(f),
                  pickle.loads(pickle.dumps(f)), cf.CuckooFilter.from_chunks(f.chunks()),
                  cf.CuckooFilter.from_chunks(list(f.chunks()), concurrent=False)]
        for g in copies:
            assert g.to_bytes() == data
            g.add(b"one more")  # and a copy that took a write saves what loads
            assert cf.CuckooFilter.from_bytes(g.to_bytes()).to_bytes() == g.to_bytes()
        # A file the tool could have made, loaded, written to and saved again, loads.
        g = cf.CuckooFilter.load(path)
        g.add(b"after")
        g.save(path)
        assert b"after" in cf.CuckooFilter.load(path)


def test_window_chunks_forged_fields():
    """A window's chunks with the module's fields changed: refused once the window is
    complete (its seed, which the fields' check needs, comes with its first generation)."""
    f = cf.CuckooFilter(300, window=3600, generations=3, clock=None)
    f.add(b"x")
    chunks = list(f.chunks())
    cursor, head = chunks[0]
    forged = bytes([head[0] ^ 1]) + head[1:]  # deletes + 1, the check unchanged
    with pytest.raises(cf.CorruptFilter):
        cf.CuckooFilter.from_chunks([(cursor, forged)] + chunks[1:])
