"""A filter moved between a real redis-server (with the module) and Python, both ways, through
CF.SCANDUMP / CF.LOADCHUNK, answering exactly as the server does (false positives included:
the bits are the same). The server comes from tests/redis/harness.py on a free loopback
port; CF_REDIS_MODULE and CF_REDIS_SERVER name the module and the server (ctest sets them).
A missing server, module or redis-py fails the test."""

import os
import sys

import redis  # Debian's python3-redis

import cuckoofilter as cf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tests", "redis"))
import harness  # noqa: E402

SEED = int(os.environ.get("CF_TEST_SEED") or 20261126)


def scandump(r, key):
    pairs, cursor = [], 0
    while True:
        cursor, data = r.execute_command("CF.SCANDUMP", key, cursor)
        if not data:
            assert cursor == 0
            return pairs
        pairs.append((cursor, data))


def mexists(r, key, items):
    out = []
    for i in range(0, len(items), 5000):
        out += [bool(x) for x in r.execute_command("CF.MEXISTS", key, *items[i:i + 5000])]
    return out


def test_filters_move_between_redis_and_python():
    assert os.path.exists(harness.MODULE), f"no module at {harness.MODULE} (CF_REDIS_MODULE)"
    items = [b"item-%d-%d" % (SEED, i) for i in range(60000)]
    absent = [b"absent-%d-%d" % (SEED, i) for i in range(60000)]
    with harness.Server() as server:
        r = redis.Redis(port=server.port)
        # a growing filter, so that the dump has several sub-filters
        assert r.execute_command("CF.RESERVE", "k", 20000, "EXPANSION", 2)
        for i in range(0, len(items), 5000):
            r.execute_command("CF.INSERT", "k", "ITEMS", *items[i:i + 5000])
        server_answers = mexists(r, "k", items + absent)
        assert all(server_answers[:len(items)])

        # Redis -> Python: the same answers, false positives included
        f = cf.CuckooFilter.from_chunks(scandump(r, "k"))
        assert len(f) == r.execute_command("CF.INFO", "k")[r.execute_command(
            "CF.INFO", "k").index(b"Number of items inserted") + 1]
        assert f.contains_many(items + absent) == server_answers
        assert [f.count(x) for x in items[:200]] == [
            r.execute_command("CF.COUNT", "k", x) for x in items[:200]]

        # Python -> Redis: changed in Python, loaded into a new key, answering alike
        for x in items[:1000]:
            assert f.discard(x)
        f.add_many(absent[:1000])
        for cursor, data in f.chunks():
            assert r.execute_command("CF.LOADCHUNK", "p", cursor, data)
        probe = items[:2000] + absent[:2000] + absent[-5000:]
        assert mexists(r, "p", probe) == f.contains_many(probe)
        assert all(mexists(r, "p", items[1000:] + absent[:1000]))
        # and a damaged chunk from Python is refused by the server, as by Python
        pairs = list(f.chunks())
        cursor, data = pairs[-1]
        bad = pairs[:-1] + [(cursor, data[:-1] + bytes([data[-1] ^ 1]))]
        try:
            cf.CuckooFilter.from_chunks(bad)
            raise AssertionError("a damaged chunk was accepted")
        except cf.CorruptFilter:
            pass
