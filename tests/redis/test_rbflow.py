#!/usr/bin/env python3
"""The module with `cf-layout redisbloom` behaves as RedisBloom does, reply for reply: the
behaviours RedisBloom's own cuckoo filter flow tests check, written here anew.

- CF.DEBUG is RedisBloom's line, nothing appended; CF.INFO is its eight fields with its
  Size (its count of a filter's bytes), in RESP2 and RESP3 (a map, booleans where
  RedisBloom gives them).
- Growth: filters of bucket sizes 1, 2 and 4 and expansions 1, 2 and 4 filled with 1000
  items end with RedisBloom's number of sub-filters; a filter reserved at 4 takes 124
  items, then every add is refused with "Maximum expansions reached"; EXPANSION 0 fills
  and answers -1 per item.
- CF.SCANDUMP: an empty filter gives [0, nil] at once; a walk and its CF.LOADCHUNKs copy
  a filter whole; any iterator gives RedisBloom's answer (a sub-filter of at most 16 MiB
  whole, a bigger one's bytes from there, [0, nil] past the end); negative ones are
  refused.
- CF.LOADCHUNK: chunks that do not fit get exactly "Couldn't load chunk!", a chunk a
  client decoded as text too, with the reason in the server's log; a damaged header gets
  "Couldn't create filter!" in either layout (a server of the native layout as well), the
  reason logged.
- Limits and arguments as RedisBloom's: BUCKETSIZE up to 255, MAXITERATIONS up to 65535,
  EXPANSION up to 32768; deletes and counts survive DEBUG RELOAD.
- Memory: a filter reserved for 1M items holds its 1 MiB table and at most 1 KiB more.

Environment: CF_REDIS_MODULE, CF_REDIS_SERVER, CF_TEST_SEED. Exit 0 = pass.
"""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import RespError, RespMap, Server  # noqa: E402
import cf_state as S  # noqa: E402
from cf_state import check, ok  # noqa: E402

SLICE = 16 << 20  # RedisBloom's largest data chunk
RB_ARGS = ("cf-layout", "redisbloom")


def debug(c, key):
    return c.call("CF.DEBUG", key).decode()


def error(c, *args):
    r = c.call_raw(*args)
    check(isinstance(r, RespError), f"{args!r:.120}: expected an error, got {r!r:.120}")
    return str(r)


def info_of(c, key):
    r = c.call("CF.INFO", key)
    return {str(r[i]): r[i + 1] for i in range(0, len(r), 2)}


def fill_until_limit(c, key, batches, per_batch, prefix):
    """CF.INSERT batches until RedisBloom's limit answers; the number of batches taken."""
    for i in range(batches):
        r = c.call_raw("CF.INSERT", key, "ITEMS",
                       *[f"{prefix}{i}-{j}" for j in range(per_batch)])
        if isinstance(r, RespError):
            check(str(r) == "Maximum expansions reached", f"CF.INSERT {key}: {r}")
            return i
    return batches


def walk(c, key):
    """Every chunk of key, walking from iterator 0 until [0, nil]."""
    return S.scandump(c, key)


def case_debug_and_info(c, server):
    ok(c.call("CF.RESERVE", "a", 10, "MAXITERATIONS", 10), "CF.RESERVE a")
    check(debug(c, "a") == "bktsize:2 buckets:8 items:0 deletes:0 filters:1 max_iterations:10 "
          "expansion:1", f"CF.DEBUG a: {debug(c, 'a')}")
    ok(c.call("CF.RESERVE", "b", 10), "CF.RESERVE b")
    check(debug(c, "b").endswith("max_iterations:20 expansion:1"), debug(c, "b"))
    check(c.call("CF.INSERT", "f3", "CAPACITY", 10000, "ITEMS", "foo") == [1], "CF.INSERT f3")
    check(debug(c, "f3") == "bktsize:2 buckets:8192 items:1 deletes:0 filters:1 "
          "max_iterations:20 expansion:1", f"CF.DEBUG f3: {debug(c, 'f3')}")
    check(c.call("CF.ADD", "f1", "foo") == 1 and c.call("CF.INSERT", "f2", "ITEMS", "foo") == [1],
          "CF.ADD f1, CF.INSERT f2")
    check(debug(c, "f1") == debug(c, "f2"), "the default filter of CF.ADD and CF.INSERT differ")
    error(c, "CF.DEBUG", "noexist")

    ok(c.call("CF.RESERVE", "i", 1000), "CF.RESERVE i 1000")
    want = ["Size", 1080, "Number of buckets", 512, "Number of filters", 1,
            "Number of items inserted", 0, "Number of items deleted", 0, "Bucket size", 2,
            "Expansion rate", 1, "Max iterations", 20]
    got = c.call("CF.INFO", "i")
    check([str(x) if not isinstance(x, int) else x for x in got] == want, f"CF.INFO i: {got}")

    # RESP3: booleans for adds, deletes and lookups; CF.INSERTNX integers; CF.INFO a map.
    with server.client(protocol=3) as c3:
        ok(c3.call("CF.RESERVE", "r", 9, "EXPANSION", 0), "CF.RESERVE r")
        steps = [(("CF.ADD", "r", 3), True), (("CF.ADD", "r", 4), True),
                 (("CF.ADDNX", "r", 4), False), (("CF.ADDNX", "r", 9), True),
                 (("CF.INSERT", "r", "ITEMS", 4, 5), [True, True]),
                 (("CF.INSERTNX", "r", "ITEMS", 4, 6), [0, 1]),
                 (("CF.DEL", "r", 3), True), (("CF.DEL", "r", 3), False),
                 (("CF.EXISTS", "r", 3), False), (("CF.EXISTS", "r", 4), True),
                 (("CF.MEXISTS", "r", 4, 3), [True, False]),
                 (("CF.COUNT", "r", 3), 0), (("CF.COUNT", "r", 4), 2)]
        for args, want3 in steps:
            got3 = c3.call(*args)
            same = got3 == want3 and type(got3) is type(want3)
            if isinstance(want3, list):
                same = same and all(type(x) is type(y) for x, y in zip(got3, want3))
            check(same, f"RESP3 {args}: {got3!r}, want {want3!r}")
        m = c3.call("CF.INFO", "r")
        check(isinstance(m, RespMap), f"RESP3 CF.INFO: not a map: {m!r}")
        check({str(k): v for k, v in m.items()} == {
            "Size": 64, "Number of buckets": 4, "Number of filters": 1,
            "Number of items inserted": 5, "Number of items deleted": 1, "Bucket size": 2,
            "Expansion rate": 0, "Max iterations": 20}, f"RESP3 CF.INFO r: {m!r}")


def case_growth(c, server):
    for name, args, want in [
            ("a", ("BUCKETSIZE", 1), "bktsize:1 buckets:64 items:1000 deletes:0 filters:18 "
             "max_iterations:20 expansion:1"),
            ("b", ("BUCKETSIZE", 2), "bktsize:2 buckets:32 items:1000 deletes:0 filters:17 "
             "max_iterations:20 expansion:1"),
            ("c", ("BUCKETSIZE", 4, "MAXITERATIONS", 500), "bktsize:4 buckets:64 items:1000 "
             "deletes:0 filters:4 max_iterations:500 expansion:1"),
            ("e2", ("EXPANSION", 2), "bktsize:2 buckets:32 items:1000 deletes:0 filters:5 "
             "max_iterations:20 expansion:2"),
            ("e4", ("EXPANSION", 4, "MAXITERATIONS", 500), "bktsize:2 buckets:32 items:1000 "
             "deletes:0 filters:3 max_iterations:500 expansion:4")]:
        capacity = 256 if name == "c" else 64
        ok(c.call("CF.RESERVE", name, capacity, *args), f"CF.RESERVE {name}")
        for i in range(1000):
            check(c.call("CF.ADD", name, str(i)) == 1, f"CF.ADD {name} {i}")
        found = c.call("CF.MEXISTS", name, *[str(i) for i in range(1000)])
        check(all(x == 1 for x in found), f"{name}: an added item is not found")
        check(debug(c, name) == want, f"CF.DEBUG {name}: {debug(c, name)}, want {want}")

    ok(c.call("CF.RESERVE", "small", 4), "CF.RESERVE small 4")
    for i in range(124):
        check(c.call("CF.ADD", "small", str(i)) == 1, f"CF.ADD small {i}")
    for item in ("2048", "0"):
        e = error(c, "CF.ADD", "small", item)
        check(e == "Maximum expansions reached", f"the 125th add: {e!r}")
    check(error(c, "CF.INSERT", "small", "ITEMS", "x") == "Maximum expansions reached",
          "CF.INSERT at the limit")

    ok(c.call("CF.RESERVE", "fixed", 4, "EXPANSION", 0), "CF.RESERVE fixed 4 EXPANSION 0")
    for i in range(1, 5):
        check(c.call("CF.ADD", "fixed", i) == 1, f"CF.ADD fixed {i}")
    check(c.call("CF.INSERT", "fixed", "ITEMS", 5, 6) == [-1, -1], "a full fixed filter")
    check(error(c, "CF.ADD", "fixed", 7) == "Filter is full", "CF.ADD to a full fixed filter")


def case_scandump(c, rng):
    for name, args in (("s1", ()), ("s2", ("EXPANSION", 2))):
        ok(c.call("CF.RESERVE", name, 62, *args), f"CF.RESERVE {name}")
        check(c.call("CF.SCANDUMP", name, 0) == [0, None], f"an empty {name}'s CF.SCANDUMP")
        items = [str(x) for x in range(500)]
        for x in items:
            c.call("CF.ADD", name, x)
        chunks = walk(c, name)
        check(chunks and chunks[0][0] == 1 and len(chunks[0][1]) == 38,
              f"{name}: the walk does not start with RedisBloom's header")
        copy = name + "-copy"
        S.loadchunks(c, copy, chunks)
        check(all(x == 1 for x in c.call("CF.MEXISTS", copy, *items)),
              f"{copy}: an item of {name} is not found")
        check(debug(c, copy) == debug(c, name), f"{copy}: {debug(c, copy)} != {debug(c, name)}")
    # deleted down to nothing: empty again
    ok(c.call("CF.RESERVE", "gone", 100), "CF.RESERVE gone")
    c.call("CF.ADD", "gone", "x")
    c.call("CF.DEL", "gone", "x")
    check(c.call("CF.SCANDUMP", "gone", 0) == [0, None], "an emptied filter's CF.SCANDUMP")

    error(c, "CF.SCANDUMP", "s1")
    check(error(c, "CF.SCANDUMP", "s1", "str") == "Invalid position", "CF.SCANDUMP s1 str")
    check(error(c, "CF.SCANDUMP", "s1", -1) == "Invalid position", "CF.SCANDUMP s1 -1")
    check(error(c, "CF.SCANDUMP", "noexist", 0) == "ERR not found", "CF.SCANDUMP noexist")

    # Any iterator: small sub-filters come whole, with the iterator moved by their size.
    ok(c.call("CF.RESERVE", "r", 50), "CF.RESERVE r 50")
    fill_until_limit(c, "r", 10000, 1, "x")
    chunks = walk(c, "r")
    subs, start = [], 0
    for it, data in chunks[1:]:
        subs.append((start, data))
        start += len(data)
    size = info_of(c, "r")["Size"]
    for it in range(0, size + 1024):
        r = c.call("CF.SCANDUMP", "r", it)
        if it == 0:
            want = chunks[0]
        else:
            want = [0, None]
            for begin, data in subs:
                if begin <= it - 1 < begin + len(data):
                    want = [it + len(data), data]
        check(list(r) == list(want), f"CF.SCANDUMP r {it}: {r!r:.100}, want {want!r:.100}")

    # A sub-filter bigger than a chunk: its bytes from the iterator, to the slice's end.
    ok(c.call("CF.RESERVE", "big", 1024, "EXPANSION", 30000), "CF.RESERVE big")
    for i in range(3):
        c.call("CF.INSERT", "big", "ITEMS", *[f"b{i}-{j}" for j in range(1000)])
    check(info_of(c, "big")["Number of filters"] == 2, "big: no second sub-filter")
    chunks = walk(c, "big")
    first = len(chunks[1][1])
    second = b"".join(data for _, data in chunks[2:])
    check(first == 1024 and len(second) == 512 * 32768 * 2,
          f"big: sub-filters of {first} and {len(second)} bytes")
    total = first + len(second)
    for it in [first + 1, first + 2, first + 1 + SLICE - 1, total, total + 1, 2 * total] + \
            [rng.randint(first + 1, total) for _ in range(6)]:
        r = c.call("CF.SCANDUMP", "big", it)
        if it - 1 >= total:
            want = [0, None]
        else:
            off = it - 1 - first
            data = second[off:off + min(SLICE, len(second) - off)]
            want = [it + len(data), data]
        check(list(r) == want, f"CF.SCANDUMP big {it}: [{r[0]}, {len(r[1] or b'')} bytes], "
              f"want [{want[0]}, {len(want[1] or b'')} bytes]")
    c.call("DEL", "big")


def case_loadchunk(c, server, rng):
    ok(c.call("CF.RESERVE", "cf", 4), "CF.RESERVE cf 4")
    for args in (("-9223372036854775808", "1"), ("922337203685477588", "1"),
                 (4, "kdoasdksaodsadsadsadsadsadadsadadsdad"), (4, "abcd")):
        error(c, "CF.LOADCHUNK", "cf", *args)
    c.call("CF.ADD", "cf", "x")
    error(c, "CF.LOADCHUNK", "cf")
    check(error(c, "CF.LOADCHUNK", "cf", 0, "x") == "Invalid position", "CF.LOADCHUNK at 0")

    ok(c.call("CF.RESERVE", "g", 1024, "EXPANSION", 2), "CF.RESERVE g")
    c.call("CF.INSERT", "g", "ITEMS", *[f"g{j}" for j in range(1500)])
    sizes = [len(d) for _, d in walk(c, "g")[1:]]
    check(sizes == [1024, 2048], f"g: sub-filters of {sizes} bytes")
    before = c.call("DUMP", "g")
    # Each ends where no chunk of its length fits: longer than what precedes its end,
    # across the boundary of the sub-filters, or past the last.
    for it, n in [(2, 5), (1000, 1500), (1024 + 1 + 10, 20), (3072 + 1 + 1, 2), (3072 + 50, 100)]:
        data = bytes(rng.getrandbits(8) for _ in range(n))
        e = error(c, "CF.LOADCHUNK", "g", it, data)
        check(e == "Couldn't load chunk!", f"CF.LOADCHUNK g {it} <{n} B>: {e!r}")
    decoded = b"\xef\xbf\xbd" * 700
    e = error(c, "CF.LOADCHUNK", "g", 1024 + 1 + 10, decoded)
    check(e == "Couldn't load chunk!", f"a chunk decoded as text: {e!r}")
    check(c.call("DUMP", "g") == before, "a refused chunk changed the filter")
    check("U+FFFD" in server.log(), "the log does not say the chunk was decoded as text")


def case_header(c, server, layout):
    c.call("FLUSHALL")
    ok(c.call("CF.RESERVE", "cf", 100), "CF.RESERVE cf 100")
    for x in range(50):
        c.call("CF.ADD", "cf", f"foo{x}")
    chunk = c.call("CF.SCANDUMP", "cf", 0)[1]
    c.call("DEL", "cf")
    for name in ("zeroed", "buckets"):
        arr = bytearray(chunk)
        if name == "zeroed":
            arr[0:9] = bytes(9)
        else:
            arr[8:13] = bytes(5)
            arr[14] = 1
        e = error(c, "CF.LOADCHUNK", "cf", 1, bytes(arr))
        check(e == "Couldn't create filter!", f"{layout}: a {name} header: {e!r}")
        check(c.call("EXISTS", "cf") == 0, f"{layout}: a refused header left a key")
    check("CF.LOADCHUNK: Couldn't create filter!" in server.log(),
          f"{layout}: the log does not say why the header was refused")
    if layout == "native":
        # this library's own header, damaged where it is checked
        ok(c.call("CF.RESERVE", "n", 100), "CF.RESERVE n")
        c.call("CF.ADD", "n", "x")
        it, data = c.call("CF.SCANDUMP", "n", 0)
        c.call("DEL", "n")
        arr = bytearray(data)
        arr[len(arr) // 2] ^= 0xFF
        e = error(c, "CF.LOADCHUNK", "n", it, bytes(arr))
        check(e == "Couldn't create filter!", f"a damaged native header: {e!r}")


def case_limits(c):
    for args in (("BUCKETSIZE", 33554432), ("MAXITERATIONS", 165536), ("EXPANSION", 327695),
                 ("BUCKETSIZE", 0), ("MAXITERATIONS", 0), ("EXPANSION", -1)):
        error(c, "CF.RESERVE", "lim", 100, *args)
    ok(c.call("CF.RESERVE", "lim", 67108864, "BUCKETSIZE", 255, "MAXITERATIONS", 65535,
              "EXPANSION", 32768), "CF.RESERVE at RedisBloom's limits")
    i = info_of(c, "lim")
    check((i["Bucket size"], i["Expansion rate"], i["Max iterations"]) == (255, 32768, 65535),
          f"CF.INFO lim: {i}")
    c.call("DEL", "lim")

    # A table of a power of two bytes takes that much memory (no padding pushes it into
    # the allocator's next size class): 1 MiB for 1M items, as in RedisBloom, with the
    # key's and the filter's own records on top.
    ok(c.call("CF.RESERVE", "mem", 1000000), "CF.RESERVE mem 1000000")
    check(info_of(c, "mem")["Size"] == 40 + 16 + (1 << 20), f"CF.INFO mem: {info_of(c, 'mem')}")
    used = c.call("MEMORY", "USAGE", "mem")
    check(used <= (1 << 20) + 1024, f"MEMORY USAGE of a 1 MiB table: {used} bytes")
    c.call("DEL", "mem")

    c.call("CF.ADD", "nums", "Redis")
    c.call("CF.DEL", "nums", "Redis")
    before = debug(c, "nums")
    ok(c.call("DEBUG", "RELOAD"), "DEBUG RELOAD")
    check(debug(c, "nums") == before, f"after DEBUG RELOAD: {debug(c, 'nums')} != {before}")

    check(c.call("CF.ADD", "k", "k1") == 1 and c.call("CF.ADD", "k", "k1") == 1, "CF.ADD k1 x2")
    check(c.call("CF.COUNT", "k", "k1") == 2, "CF.COUNT k1")
    check(c.call("CF.DEL", "k", "k1") == 1 and c.call("CF.COUNT", "k", "k1") == 1, "CF.DEL k1")
    check(c.call("CF.ADDNX", "k", "k1") == 0, "CF.ADDNX of a present item")

    ok(c.call("CF.RESERVE", "cmp", 8, "MAXITERATIONS", 50), "CF.RESERVE cmp")
    for x in range(100):
        c.call("CF.ADD", "cmp", str(x))
    ok(c.call("CF.COMPACT", "cmp"), "CF.COMPACT cmp")
    check(all(x == 1 for x in c.call("CF.MEXISTS", "cmp", *[str(x) for x in range(100)])),
          "an item lost to CF.COMPACT")
    error(c, "CF.COMPACT", "missing")


def main():
    S.require_tools()
    servers = []

    def body(seed):
        rng = random.Random(seed)
        rb = Server(module_args=RB_ARGS)
        servers.append(rb)
        rb.start()
        with rb.client() as c:
            for case in (case_debug_and_info, case_growth):
                c.call("FLUSHALL")
                case(c, rb)
            c.call("FLUSHALL")
            case_scandump(c, rng)
            c.call("FLUSHALL")
            case_loadchunk(c, rb, rng)
            c.call("FLUSHALL")
            case_limits(c)
            case_header(c, rb, "redisbloom")
        native = Server()
        servers.append(native)
        native.start()
        with native.client() as c:
            case_header(c, native, "native")

    S.run("rbflow", body, servers)


if __name__ == "__main__":
    main()
