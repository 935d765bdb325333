#!/usr/bin/env python3
"""The CF.* commands of redis/module.c, end to end, on real redis-server processes.

Usage: test_commands.py [SECTION...]     (ctest runs it as `redis_commands`, all sections)

What it checks, section by section (the contract is docs/COMMANDS.md, which follows
RedisBloom's observable behaviour except where it says otherwise):

  reply_types     every command under RESP2 and RESP3 through a raw client: exact reply
                  types (simple string, integer, boolean, bulk, array, map, null)
  command_table   COMMAND INFO flags and COMMAND GETKEYS for all 14 commands
  redis_py        every command through redis-py's r.cf() helper (CF.COMPACT and CF.DEBUG,
                  which it lacks, through execute_command), errors as ResponseError
  growth_delete   25,000 items into CF.RESERVE k 1000 with EXPANSION 1 and 2: no false
                  negatives; delete half, the other half stays; delete the rest; compact
  semantics       duplicates, ADDNX/INSERTNX, NOCREATE, CAPACITY, MAXFILTERS, EXPANSION 0,
                  the hot-key rule, FPBITS, missing and wrong-type keys, MEMORY USAGE,
                  auto-created filters, accepted boundary values, dump and reload
  insert_batches  CF.INSERT / CF.INSERTNX of up to 1000 items against CF.ADD / CF.ADDNX
                  one by one on a COPY of the same filter: same replies, same SCANDUMP
  module_args     servers started with module arguments (ours and RedisBloom's names), and
                  bad arguments that must stop the server from starting
  bad_input       ~90 kinds of bad input (120 with the next three sections), each with its
                  exact error text (RESP2 and RESP3), a live server
                  afterwards and no key left behind
  loadchunk       damaged, truncated, foreign, repeated, reordered and misplaced chunks;
                  every byte of a header and of a data chunk flipped
  incomplete      the item commands on a filter that CF.LOADCHUNK has not finished
  memory          a server with maxmemory 64mb: absurd reservations, a forged big header,
                  growth that does not fit, deny-oom
  fuzz            a few thousand random argument lists on all 14 commands; every reply is
                  a well-formed reply or a known error; a canary filter is untouched

Environment: CF_REDIS_MODULE (the module; default build/redis-cuckoofilter.so),
CF_REDIS_SERVER (default: redis-server on PATH), CF_TEST_SEED (an integer: the random
choices of the fuzz section and of the test data; printed on failure),
CF_FUZZ_ITERATIONS (default 5000).

Exit status: 0 passed, 1 failed (every failure is listed; a missing server or redis-py is a
failure too: run it with Debian's /usr/bin/python3, which has python3-redis).
"""

import os
import random
import re
import shutil
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from harness import RespError, RespMap, Server, Simple  # noqa: E402
import cf_state  # noqa: E402  (the chunk walk and batched lookups shared with the others)

SEED = harness.test_seed(20240622)
FUZZ_ITERATIONS = int(os.environ.get("CF_FUZZ_ITERATIONS", "5000"))

COMMANDS = ["CF.RESERVE", "CF.ADD", "CF.ADDNX", "CF.INSERT", "CF.INSERTNX", "CF.EXISTS",
            "CF.MEXISTS", "CF.COUNT", "CF.DEL", "CF.COMPACT", "CF.INFO", "CF.DEBUG",
            "CF.SCANDUMP", "CF.LOADCHUNK"]

# Exactly RedisBloom's fields, in its order (go-redis refuses any other); the fingerprint
# width is in CF.DEBUG.
INFO_FIELDS = ["Size", "Number of buckets", "Number of filters", "Number of items inserted",
               "Number of items deleted", "Bucket size", "Expansion rate", "Max iterations"]

# The error texts of redis/module.c (docs/COMMANDS.md), exactly.
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
LOADING = "ERR the filter is incomplete: CF.LOADCHUNK has not received all of its chunks"
CHUNK_ERR = ("Couldn't load chunk! (the incomplete filter was removed: load it again from "
             "its first chunk)")
HDR_ERR = "Couldn't create filter!"
LIMIT_ERR = "Maximum expansions reached"
HOT_ERR = ("Filter is full for this item: its copies fill both of its buckets "
           "(CF.ADDNX adds an item once)")
INS_CAP_RANGE = "Capacity must be in the range [cf-bucket-size * 2, 1073741824]"
RES_CAP_RANGE = "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"
KNOWN_ERRORS = {
    WRONGTYPE, LOADING, CHUNK_ERR, HDR_ERR, INS_CAP_RANGE, RES_CAP_RANGE,
    "Bad capacity", "Unknown argument received", "ERR item exists", "ERR not found",
    "Not found", "Cuckoo filter was not found", "Filter is full", "Maximum expansions reached",
    HOT_ERR,
    "ERR Insufficient memory", "ERR Insufficient memory to create filter",
    "ERR Could not create filter", "Invalid position", "Invalid header",
    "Couldn't parse BUCKETSIZE", "BUCKETSIZE: value must be in the range [1, 255]",
    "Couldn't parse MAXITERATIONS", "MAXITERATIONS: value must be in the range [1, 65535]",
    "Couldn't parse EXPANSION", "EXPANSION: value must be in the range [0, 32768]",
    "Couldn't parse FPBITS", "FPBITS: value must be in the range [4, 32]",
    "Couldn't parse MAXFILTERS", "MAXFILTERS: value must be in the range [1, 65536]",
}
OOM_PREFIX = "OOM command not allowed when used memory > 'maxmemory'"


def arity(cmd):
    return f"ERR wrong number of arguments for '{cmd.lower()}' command"


# ---------------------------------------------------------------------------------------
# Checking
# ---------------------------------------------------------------------------------------

class Failure(AssertionError):
    pass


def norm(x):
    """A reply as (type, value), recursively, so that 1, True, b"1" and "1" all differ."""
    if isinstance(x, RespError):
        return ("error", str(x))
    if isinstance(x, RespMap):
        return ("map", [(norm(k), norm(v)) for k, v in x.pairs])
    if isinstance(x, Simple):
        return ("simple", str(x))
    if isinstance(x, list):
        return ("array", [norm(v) for v in x])
    return (type(x).__name__, x)


def short(x, limit=300):
    text = repr(x)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def expect(actual, expected, what):
    """Exact reply: same value and same RESP type at every level."""
    if norm(actual) != norm(expected):
        raise Failure(f"{what}: expected {short(expected)} ({short(norm(expected))}), "
                      f"got {short(actual)} ({short(norm(actual))})")


def expect_error(reply, text, what, mode="exact"):
    if not isinstance(reply, RespError):
        raise Failure(f"{what}: expected the error {text!r}, got {short(reply)}")
    got = str(reply)
    matched = {"exact": got == text, "prefix": got.startswith(text),
               "contains": text in got}[mode]
    if not matched:
        raise Failure(f"{what}: expected the error {text!r} ({mode}), got {got!r}")


def ok(reply, what):
    expect(reply, Simple("OK"), what)


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------

def info(c, key):
    """CF.INFO as a dict (through RESP2), checking its shape on the way, and "fpbits", the
    fingerprint width, from CF.DEBUG."""
    r = c.call_raw("CF.INFO", key)
    check(isinstance(r, list) and len(r) == 2 * len(INFO_FIELDS),
          f"CF.INFO {key}: expected a flat array of {2 * len(INFO_FIELDS)}, got {short(r)}")
    out = {str(r[i]): r[i + 1] for i in range(0, len(r), 2)}
    d = c.call("CF.DEBUG", key)
    m = re.search(rb" fpbits:(\d+) fpr:(\S+) fpr_bound:(\S+) layout:(\w+)$", d)
    check(m is not None, f"CF.DEBUG {key}: no fpbits, fpr, fpr_bound and layout at the end: {d!r}")
    out["fpbits"] = int(m.group(1))
    out["layout"] = m.group(4).decode()
    fpr, bound = float(m.group(2)), float(m.group(3))
    check(0 <= fpr <= bound <= 1, f"CF.DEBUG {key}: fpr {fpr}, fpr_bound {bound}")
    return out


def batches(seq, n=5000):
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def add_all(c, key, items, cmd="CF.ADD"):
    out = []
    for part in batches(items):
        out += c.pipeline([(cmd, key, x) for x in part])
    return out


mexists = cf_state.mexists


def missing_of(c, key, items):
    """The items that CF.MEXISTS says are absent (must be none for added items)."""
    return [x for x, r in zip(items, mexists(c, key, items)) if r != 1]


dump = cf_state.scandump


def load(c, key, chunks):
    return c.pipeline([("CF.LOADCHUNK", key, it, data) for it, data in chunks])


def key_absent(c, key, what):
    expect(c.call_raw("EXISTS", key), 0, f"{what}: EXISTS {key!r} (no key may be left)")
    expect(c.call_raw("TYPE", key), Simple("none"), f"{what}: TYPE {key!r}")


def alive(c, what):
    expect(c.call_raw("PING"), Simple("PONG"), f"{what}: PING afterwards")


def fill_until_error(c, key, prefix, limit, batch=2000):
    """CF.ADD distinct items, a batch at a time, until a batch has an error: (every item
    added, the first error). Items after the first error may still find room."""
    added = []
    n = 0
    while n < limit:
        items = [f"{prefix}{n + i}" for i in range(batch)]
        replies = c.pipeline([("CF.ADD", key, x) for x in items])
        first = None
        for x, r in zip(items, replies):
            if isinstance(r, RespError):
                first = first or r
            else:
                expect(r, 1, f"CF.ADD {key} {x}")
                added.append(x)
        if first is not None:
            return added, first
        n += batch
    raise Failure(f"CF.ADD {key}: no error after {limit} distinct items")


# ---------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------

class Ctx:
    """The main server (module defaults) and its clients."""

    def __init__(self, server, redis_module):
        self.server = server
        self.c2 = server.client(2)
        self.c3 = server.client(3)
        self.redis = redis_module
        self.r = redis_module.Redis(port=server.port)
        self.bad_kinds = []

    def close(self):
        for c in (self.c2, self.c3):
            try:
                c.close()
            except OSError:
                pass
        try:
            self.r.close()
        except Exception:
            pass


SECTIONS = []


def section(fn):
    SECTIONS.append(fn)
    return fn


@section
def reply_types(ctx):
    for proto, c in ((2, ctx.c2), (3, ctx.c3)):
        def b(v):  # a boolean reply: an integer in RESP2, a boolean in RESP3
            return bool(v) if proto == 3 else int(v)
        k = f"types{proto}"
        w = f"RESP{proto}"
        # FPBITS 32: the exact answers below (0 for absent items) hold with certainty
        # for all practical purposes.
        ok(c.call_raw("CF.RESERVE", k, 1000, "FPBITS", 32), f"{w} CF.RESERVE")
        expect(c.call_raw("CF.ADD", k, "a"), b(1), f"{w} CF.ADD new")
        expect(c.call_raw("CF.ADD", k, "a"), b(1), f"{w} CF.ADD duplicate")
        expect(c.call_raw("CF.ADDNX", k, "a"), b(0), f"{w} CF.ADDNX present")
        expect(c.call_raw("CF.ADDNX", k, "b"), b(1), f"{w} CF.ADDNX new")
        expect(c.call_raw("CF.INSERT", k, "ITEMS", "c", "d"), [b(1), b(1)], f"{w} CF.INSERT")
        expect(c.call_raw("CF.INSERTNX", k, "ITEMS", "a", "e", "e"), [0, 1, 0],
               f"{w} CF.INSERTNX")
        expect(c.call_raw("CF.EXISTS", k, "a"), b(1), f"{w} CF.EXISTS present")
        expect(c.call_raw("CF.EXISTS", k, "zz"), b(0), f"{w} CF.EXISTS absent")
        expect(c.call_raw("CF.MEXISTS", k, "a", "zz", "e"), [b(1), b(0), b(1)],
               f"{w} CF.MEXISTS")
        expect(c.call_raw("CF.COUNT", k, "a"), 2, f"{w} CF.COUNT")
        expect(c.call_raw("CF.COUNT", k, "zz"), 0, f"{w} CF.COUNT absent")
        expect(c.call_raw("CF.DEL", k, "b"), b(1), f"{w} CF.DEL present")
        expect(c.call_raw("CF.DEL", k, "b"), b(0), f"{w} CF.DEL absent")
        ok(c.call_raw("CF.COMPACT", k), f"{w} CF.COMPACT")

        r = c.call_raw("CF.INFO", k)
        if proto == 2:
            check(type(r) is list and len(r) == 16, f"{w} CF.INFO: {short(r)}")
            names, vals = r[0::2], r[1::2]
        else:
            check(isinstance(r, RespMap), f"{w} CF.INFO: expected a map, got {short(r)}")
            names, vals = [p[0] for p in r.pairs], [p[1] for p in r.pairs]
        expect(names, [Simple(n) for n in INFO_FIELDS], f"{w} CF.INFO names (simple strings)")
        check(all(type(v) is int for v in vals), f"{w} CF.INFO values are integers: {vals}")
        check(vals[0] > 0 and vals[1] > 0, f"{w} CF.INFO Size and buckets: {vals}")
        # filters, items (a a c d e; b deleted), deletes (reset by COMPACT), bucket size,
        # expansion, max iterations; the fingerprint width is in CF.DEBUG
        expect(vals[2:], [1, 5, 0, 2, 1, 20], f"{w} CF.INFO filters..max iterations")

        r = c.call_raw("CF.DEBUG", k)
        check(type(r) is bytes, f"{w} CF.DEBUG: expected a bulk string, got {short(r)}")
        m = re.fullmatch(rb"bktsize:(\d+) buckets:(\d+) items:(\d+) deletes:(\d+) filters:(\d+) "
                         rb"max_iterations:(\d+) expansion:(\d+) fpbits:(\d+) "
                         rb"fpr:([0-9.e+-]+) fpr_bound:([0-9.e+-]+) layout:native", r)
        check(m is not None, f"{w} CF.DEBUG format: {r!r}")
        expect([int(g) for g in m.groups()[:8]], [2, vals[1], 5, 0, 1, 20, 1, 32],
               f"{w} CF.DEBUG fields")

        r = c.call_raw("CF.SCANDUMP", k, 0)
        check(type(r) is list and len(r) == 2 and type(r[0]) is int and type(r[1]) is bytes
              and r[0] > 0, f"{w} CF.SCANDUMP 0: expected [int, bulk], got {short(r)}")
        chunks = dump(c, k)
        expect(chunks[0], (r[0], r[1]), f"{w} the header chunk is the same on every call")
        end = chunks[-1][0]
        expect(c.call_raw("CF.SCANDUMP", k, end), [0, None], f"{w} CF.SCANDUMP at the end")
        for it, data in chunks:
            ok(c.call_raw("CF.LOADCHUNK", k + "copy", it, data), f"{w} CF.LOADCHUNK {it}")
        expect(c.call_raw("CF.MEXISTS", k + "copy", "a", "c", "d", "e", "zz"),
               [b(1), b(1), b(1), b(1), b(0)], f"{w} the reloaded filter")

        # -1 / false for items that find no room (a small fixed filter).
        kf = k + "full"
        ok(c.call_raw("CF.RESERVE", kf, 4, "EXPANSION", 0, "FPBITS", 32), f"{w} fixed filter")
        r = c.call_raw("CF.INSERT", kf, "ITEMS", *[f"x{i}" for i in range(60)])
        check(type(r) is list and len(r) == 60, f"{w} CF.INSERT into a fixed filter: {short(r)}")
        check(all(norm(v) in (norm(b(1)), norm(-1 if proto == 2 else False)) for v in r),
              f"{w} CF.INSERT replies are 1/-1 (true/false): {short(r)}")
        expect(r[0], b(1), f"{w} CF.INSERT first item")
        check(norm(r[-1]) == norm(-1 if proto == 2 else False),
              f"{w} CF.INSERT: 60 items in a 4-item fixed filter, the last must fail: {r}")
        r = c.call_raw("CF.INSERTNX", kf, "ITEMS", "x0", "new-item")
        expect(r, [0, -1], f"{w} CF.INSERTNX on a full fixed filter (present, no room)")
        expect_error(c.call_raw("CF.ADD", kf, "new-item"), "Filter is full", f"{w} CF.ADD full")
        expect_error(c.call_raw("CF.ADDNX", kf, "new-item"), "Filter is full",
                     f"{w} CF.ADDNX full")


@section
def command_table(ctx):
    c = ctx.c2
    flags = {
        "cf.reserve": {"write", "denyoom"}, "cf.add": {"write", "denyoom"},
        "cf.addnx": {"write", "denyoom"}, "cf.insert": {"write", "denyoom"},
        "cf.insertnx": {"write", "denyoom"}, "cf.exists": {"readonly", "fast"},
        "cf.mexists": {"readonly", "fast"}, "cf.count": {"readonly", "fast"},
        "cf.del": {"write", "fast"}, "cf.compact": {"write"},
        "cf.info": {"readonly", "fast"}, "cf.debug": {"readonly", "fast"},
        "cf.scandump": {"readonly"}, "cf.loadchunk": {"write", "denyoom"},
        "cf.advance": {"write", "fast"},
    }
    arity = {"cf.reserve": -3, "cf.add": 3, "cf.addnx": 3, "cf.insert": -4, "cf.insertnx": -4,
             "cf.exists": 3, "cf.mexists": -3, "cf.count": 3, "cf.del": 3, "cf.compact": 2,
             "cf.info": 2, "cf.debug": 2, "cf.scandump": 3, "cf.loadchunk": 4,
             "cf.advance": 3}
    key_flags = {"cf.reserve": {"RW", "insert"}, "cf.add": {"RW", "insert"},
                 "cf.addnx": {"RW", "access", "insert"}, "cf.insert": {"RW", "insert"},
                 "cf.insertnx": {"RW", "access", "insert"}, "cf.exists": {"RO", "access"},
                 "cf.mexists": {"RO", "access"}, "cf.count": {"RO", "access"},
                 "cf.del": {"RW", "delete"}, "cf.compact": {"RW", "update"}, "cf.info": {"RO"},
                 "cf.debug": {"RO"}, "cf.scandump": {"RO", "access"},
                 "cf.loadchunk": {"RW", "insert"}, "cf.advance": {"RW", "delete"}}
    categories = module_acl_categories(c)
    r = c.call("COMMAND", "INFO", *flags)
    check(len(r) == len(flags), f"COMMAND INFO: {short(r)}")
    for entry in r:
        check(entry is not None, f"COMMAND INFO: a CF command is missing: {short(r)}")
        name = entry[0].decode()
        expect(entry[1], arity[name], f"COMMAND INFO {name} arity")
        got = set(str(f) for f in entry[2]) - {"module"}
        expect(sorted(got), sorted(flags[name]), f"COMMAND INFO {name} flags")
        expect(entry[3:6], [1, 1, 1], f"COMMAND INFO {name} first/last/step key")
        acl = sorted(str(x) for x in entry[6])
        if categories:
            want = ["@cuckoo", "@write" if "write" in flags[name] else "@read",
                    "@fast" if "fast" in flags[name] else "@slow"]
            expect(acl, sorted(want), f"COMMAND INFO {name} ACL categories")
        else:
            expect(acl, [], f"COMMAND INFO {name} ACL categories (none on this server)")
        specs = entry[8]
        check(len(specs) == 1, f"COMMAND INFO {name}: key specs {short(specs)}")
        spec = pairs(specs[0])
        expect(sorted(map(str, spec["flags"])), sorted(key_flags[name]),
               f"COMMAND INFO {name} key spec flags")
        bs = pairs(spec["begin_search"])
        expect([bs["type"], bs["spec"]], [b"index", [b"index", 1]],
               f"COMMAND INFO {name} key spec begin_search")
        # Tips: CF.INFO's and CF.DEBUG's figures change with every write (RedisBloom's
        # say so too).
        expect(sorted(t.decode() if isinstance(t, bytes) else str(t) for t in entry[7]),
               ["nondeterministic_output"] if name in ("cf.info", "cf.debug") else [],
               f"COMMAND INFO {name} tips")

    # COMMAND DOCS: a summary, the complexity, the version and the arguments of each.
    args = {"cf.reserve": ["key", "capacity", "bucketsize", "maxiterations", "expansion",
                           "fpbits", "maxfilters", "semisort", "layout", "window", "generations"],
            "cf.insert": ["key", "capacity", "window", "generations", "nocreate", "items",
                          "item"],
            "cf.insertnx": ["key", "capacity", "window", "generations", "nocreate", "items",
                            "item"],
            "cf.advance": ["key", "generation"],
            "cf.mexists": ["key", "item"], "cf.scandump": ["key", "iterator"],
            "cf.loadchunk": ["key", "iterator", "data"], "cf.compact": ["key"],
            "cf.info": ["key"], "cf.debug": ["key"]}
    raw = c.call("COMMAND", "DOCS", *flags)
    docs = {raw[i].decode(): raw[i + 1] for i in range(0, len(raw), 2)}
    expect(sorted(docs), sorted(flags), "COMMAND DOCS names every command")
    for name, d in docs.items():
        d = pairs(d)
        check(isinstance(d.get("summary"), bytes) and len(d["summary"]) > 20,
              f"COMMAND DOCS {name}: summary {d.get('summary')!r}")
        check(isinstance(d.get("complexity"), bytes) and d["complexity"].startswith(b"O("),
              f"COMMAND DOCS {name}: complexity {d.get('complexity')!r}")
        expect([d.get("since"), d.get("group"), d.get("module")], [b"0.1.0", b"module",
                                                                  b"cuckoo"],
               f"COMMAND DOCS {name}: since, group, module")
        got = [pairs(a) for a in d.get("arguments", [])]
        expect([a["name"].decode() for a in got], args.get(name, ["key", "item"]),
               f"COMMAND DOCS {name}: argument names")

    def doc_args(name):
        return [(a["name"].decode(), a.get("token"), sorted(map(str, a.get("flags", []))))
                for a in map(pairs, pairs(docs[name])["arguments"])]

    option = [(n, n.upper().encode(), ["optional"])
              for n in ("bucketsize", "maxiterations", "expansion", "fpbits", "maxfilters",
                        "semisort")]
    option.append(("layout", b"LAYOUT", ["optional"]))
    window = [("window", b"WINDOW", ["optional"]), ("generations", b"GENERATIONS", ["optional"])]
    expect(doc_args("cf.reserve"), [("key", None, []), ("capacity", None, [])] + option + window,
           "COMMAND DOCS cf.reserve arguments")
    layout = pairs(pairs(docs["cf.reserve"])["arguments"][-3])
    expect([layout["type"]] + [(pairs(a)["name"], pairs(a)["type"])
                               for a in layout.get("arguments", [])],
           [b"oneof", (b"native", b"pure-token"), (b"redisbloom", b"pure-token")],
           "COMMAND DOCS cf.reserve LAYOUT native | redisbloom")
    for name in ("cf.insert", "cf.insertnx"):
        expect(doc_args(name),
               [("key", None, []), ("capacity", b"CAPACITY", ["optional"])] + window +
               [("nocreate", b"NOCREATE", ["optional"]), ("items", b"ITEMS", []),
                ("item", None, ["multiple"])],
               f"COMMAND DOCS {name} arguments")
    expect(doc_args("cf.mexists"), [("key", None, []), ("item", None, ["multiple"])],
           "COMMAND DOCS cf.mexists arguments")

    # ACL: +@cuckoo where the server lets modules add categories; there, @read / @write
    # hold the commands too.
    users = {"cf_cat": "+@cuckoo", "cf_read": "+@read", "cf_write": "+@write"}
    try:
        for user, rule in users.items():
            r = c.call_raw("ACL", "SETUSER", user, "on", "nopass", "~*", rule)
            if categories or user != "cf_cat":
                ok(r, f"ACL SETUSER {user} {rule}")
            else:
                expect_error(r, "ERR Error in ACL SETUSER modifier '+@cuckoo'",
                             "+@cuckoo on a server without module categories", "prefix")
        if categories:
            allowed = {("cf_cat", "CF.ADD"): True, ("cf_cat", "CF.EXISTS"): True,
                       ("cf_cat", "GET"): False, ("cf_read", "CF.EXISTS"): True,
                       ("cf_read", "CF.ADD"): False, ("cf_write", "CF.ADD"): True,
                       ("cf_write", "CF.EXISTS"): False}
            for (user, cmd), want in allowed.items():
                r = c.call_raw("ACL", "DRYRUN", user, cmd, "k", "x")
                check((r == Simple("OK")) == want, f"ACL DRYRUN {user} {cmd}: {short(r)}")
    finally:
        c.call_raw("ACL", "DELUSER", *users)
    samples = {
        "CF.RESERVE": ["k", 100], "CF.ADD": ["k", "x"], "CF.ADDNX": ["k", "x"],
        "CF.INSERT": ["k", "ITEMS", "x"], "CF.INSERTNX": ["k", "ITEMS", "x"],
        "CF.EXISTS": ["k", "x"], "CF.MEXISTS": ["k", "x", "y"], "CF.COUNT": ["k", "x"],
        "CF.DEL": ["k", "x"], "CF.COMPACT": ["k"], "CF.INFO": ["k"], "CF.DEBUG": ["k"],
        "CF.SCANDUMP": ["k", 0], "CF.LOADCHUNK": ["k", 1, "x"],
    }
    check(sorted(samples) == sorted(COMMANDS), "every command has a sample")
    for cmd, args in samples.items():
        expect(c.call_raw("COMMAND", "GETKEYS", cmd, *args), [b"k"], f"COMMAND GETKEYS {cmd}")


def pairs(flat):
    """A flat RESP2 list of names and values as a dict with str names."""
    return {(k.decode() if isinstance(k, bytes) else str(k)): v
            for k, v in zip(flat[0::2], flat[1::2])}


def module_acl_categories(c):
    """Does this server let modules add ACL categories (Valkey 8, Redis 7.4 and later)?"""
    fields = dict(line.split(":", 1) for line in c.call("INFO", "server").decode().splitlines()
                  if ":" in line)
    if fields.get("server_name") == "valkey":
        return True
    return tuple(int(x) for x in fields["redis_version"].split(".")[:2]) >= (7, 4)


@section
def redis_py(ctx):
    redis = ctx.redis
    r = ctx.r
    cf = r.cf()
    k = "py:filter"
    expect(cf.create(k, 1000, expansion=2, bucket_size=4, max_iterations=50), True,
           "cf.create (CF.RESERVE)")
    i = cf.info(k)
    expect([i.bucketSize, i.expansionRate, i.maxIteration, i.filterNum, i.insertedNum,
            i.deletedNum], [4, 2, 50, 1, 0, 0], "cf.info fields")
    check(type(i.size) is int and i.size > 0 and type(i.bucketNum) is int and i.bucketNum > 0,
          f"cf.info size/bucketNum: {i.size} {i.bucketNum}")
    expect(cf.add(k, "a"), 1, "cf.add")
    expect(cf.addnx(k, "a"), 0, "cf.addnx present")
    expect(cf.addnx(k, "b"), 1, "cf.addnx new")
    expect(cf.insert(k, ["c", "d"]), [1, 1], "cf.insert")
    expect(cf.insertnx(k, ["a", "e", "e"]), [0, 1, 0], "cf.insertnx")
    expect(cf.exists(k, "a"), 1, "cf.exists")
    expect(cf.mexists(k, "a", "b", "e"), [1, 1, 1], "cf.mexists")
    expect(cf.count(k, "a"), 1, "cf.count")
    expect(cf.delete(k, "a"), 1, "cf.delete")
    expect(cf.insert("py:created", ["x"], capacity=5000), [1], "cf.insert with capacity")
    expect(cf.info("py:created").bucketNum, info(ctx.c2, "py:created")["Number of buckets"],
           "cf.info on an INSERT-created filter")
    expect(cf.insertnx("py:created2", ["x", "x"], capacity=100), [1, 0],
           "cf.insertnx with capacity")
    expect(r.execute_command("CF.COMPACT", k), b"OK", "CF.COMPACT through execute_command")
    d = r.execute_command("CF.DEBUG", k)
    check(type(d) is bytes and d.startswith(b"bktsize:4 "), f"CF.DEBUG: {d!r}")
    expect(cf.info(k).deletedNum, 0, "cf.info after compact")

    # scandump / loadchunk round trip
    it, chunks = 0, []
    while True:
        it, data = cf.scandump(k, it)
        if data is None:
            expect(it, 0, "cf.scandump end iterator")
            break
        check(type(it) is int and type(data) is bytes, f"cf.scandump: {it!r} {short(data)}")
        chunks.append((it, data))
    check(len(chunks) >= 2, f"cf.scandump: a header and a data chunk, got {len(chunks)}")
    for it, data in chunks:
        expect(cf.loadchunk("py:copy", it, data), b"OK", f"cf.loadchunk {it}")
    expect(cf.mexists("py:copy", "b", "c", "d", "e"), [1, 1, 1, 1], "cf.mexists on the copy")
    expect(cf.count("py:copy", "a"), cf.count(k, "a"), "cf.count on the copy")
    expect(cf.info("py:copy").__dict__, cf.info(k).__dict__, "cf.info of the copy")

    # errors
    def raises(fn, text, what, prefix=False):
        try:
            got = fn()
        except redis.ResponseError as e:
            s = str(e)
            check(s.startswith(text) if prefix else s == text,
                  f"{what}: expected ResponseError {text!r}, got {s!r}")
            return
        raise Failure(f"{what}: expected ResponseError {text!r}, got {short(got)}")

    raises(lambda: cf.insert("py:missing", ["a"], nocreate=True), "not found",
           "cf.insert nocreate on a missing key")
    raises(lambda: cf.insertnx("py:missing", ["a"], nocreate=True), "not found",
           "cf.insertnx nocreate on a missing key")
    expect(r.exists("py:missing"), 0, "no key after NOCREATE")
    raises(lambda: cf.create(k, 1000), "item exists", "cf.create on an existing filter")
    raises(lambda: cf.create("py:bad", 1000, bucket_size=0),
           "BUCKETSIZE: value must be in the range [1, 255]", "cf.create bucket_size=0")
    raises(lambda: cf.create("py:bad", "abc"), "Bad capacity", "cf.create capacity abc")
    raises(lambda: cf.info("py:missing"), "not found", "cf.info on a missing key")
    r.set("py:string", "v")
    raises(lambda: cf.add("py:string", "a"), "WRONGTYPE", "cf.add on a string", prefix=True)
    raises(lambda: cf.info("py:string"), "WRONGTYPE", "cf.info on a string", prefix=True)
    raises(lambda: cf.delete("py:missing", "a"), "Not found", "cf.delete on a missing key")
    raises(lambda: cf.scandump(k, -1), "Invalid position", "cf.scandump -1")
    raises(lambda: cf.loadchunk("py:bad", 0, b"x"), "Invalid position", "cf.loadchunk 0")
    expect(cf.exists("py:missing", "a"), 0, "cf.exists on a missing key")
    expect(cf.count("py:string", "a"), 0, "cf.count on a string")
    for key in ("py:bad", "py:missing"):
        expect(r.exists(key), 0, f"no key {key} after errors")

    # full / limit errors through redis-py
    r.execute_command("CF.RESERVE", "py:fixed", 10, "EXPANSION", 0)
    try:
        for n in range(1000):
            cf.add("py:fixed", f"i{n}")
        raise Failure("cf.add into a 10-item fixed filter never failed")
    except redis.ResponseError as e:
        expect(str(e), "Filter is full", "cf.add into a full fixed filter")


@section
def growth_delete(ctx):
    c = ctx.c2
    n = 25000
    items = [f"grow:{i}" for i in range(n)]
    for expansion in (1, 2):
        k = f"grow{expansion}"
        ok(c.call_raw("CF.RESERVE", k, 1000, "EXPANSION", expansion), f"CF.RESERVE {k}")
        fresh = info(c, k)
        replies = add_all(c, k, items)
        bad = [(x, r) for x, r in zip(items, replies) if norm(r) != norm(1)]
        check(not bad, f"{k}: CF.ADD failures: {short(bad)}")
        st = info(c, k)
        check(st["Number of filters"] > 1, f"{k}: 25,000 items in a 1000 filter grew: {st}")
        expect(st["Number of items inserted"], n, f"{k} items")
        expect(st["Number of buckets"], fresh["Number of buckets"],
               f"{k}: Number of buckets stays the first sub-filter's")
        expect(st["Expansion rate"], expansion, f"{k} expansion")
        lost = missing_of(c, k, items)
        check(not lost, f"{k}: false negatives after growth: {len(lost)}, e.g. {lost[:5]}")

        evens, odds = items[0::2], items[1::2]
        replies = add_all(c, k, evens, cmd="CF.DEL")
        check(all(norm(r) == norm(1) for r in replies),
              f"{k}: deleting added items must succeed: {short(set(map(repr, replies)))}")
        expect(info(c, k)["Number of items inserted"], n - len(evens), f"{k} items after half")
        lost = missing_of(c, k, odds)
        check(not lost, f"{k}: false negatives after deleting half: {len(lost)}: {lost[:5]}")
        replies = add_all(c, k, odds, cmd="CF.DEL")
        check(all(norm(r) == norm(1) for r in replies),
              f"{k}: deleting the rest must succeed: {short(set(map(repr, replies)))}")
        st = info(c, k)
        expect(st["Number of items inserted"], 0, f"{k} items after deleting all")
        expect(c.call_raw("CF.DEL", k, items[0]), 0, f"{k}: CF.DEL on an empty filter")
        ok(c.call_raw("CF.COMPACT", k), f"CF.COMPACT {k}")
        st = info(c, k)
        expect(st["Number of filters"], 1, f"{k}: sub-filters after CF.COMPACT of an empty filter")
        expect(st["Number of items deleted"], 0, f"{k}: CF.COMPACT resets the deletes")
        # The tables are freed; the filter keeps its (grown) sub-filter descriptor array.
        check(fresh["Size"] <= st["Size"] <= fresh["Size"] + 4096,
              f"{k}: Size after emptying and compacting {st['Size']}, fresh {fresh['Size']}")
        present = [x for x, r in zip(items, mexists(c, k, items)) if r != 0]
        check(not present, f"{k}: an empty filter answers 1 for {len(present)} items")


@section
def semantics(ctx):
    c, c3 = ctx.c2, ctx.c3

    # Duplicates: three copies, three deletes; a filter holding nothing else.
    ok(c.call_raw("CF.RESERVE", "dup", 1000), "CF.RESERVE dup")
    for i in range(3):
        expect(c.call_raw("CF.ADD", "dup", "x"), 1, f"CF.ADD dup x #{i + 1}")
    expect(c.call_raw("CF.COUNT", "dup", "x"), 3, "CF.COUNT of 3 copies (nothing else stored)")
    for i in range(3):
        expect(c.call_raw("CF.DEL", "dup", "x"), 1, f"CF.DEL dup x #{i + 1}")
    expect(c.call_raw("CF.COUNT", "dup", "x"), 0, "CF.COUNT after deleting the 3 copies")
    expect(c.call_raw("CF.DEL", "dup", "x"), 0, "a 4th CF.DEL on an empty filter")
    expect(c.call_raw("CF.EXISTS", "dup", "x"), 0, "CF.EXISTS after deleting every copy")
    # ... and among other items: COUNT is at least the copies.
    add_all(c, "dup", [f"other{i}" for i in range(500)])
    for i in range(3):
        c.call("CF.ADD", "dup", "y")
    check(c.call("CF.COUNT", "dup", "y") >= 3, "CF.COUNT >= copies among other items")
    for i in range(3):
        expect(c.call_raw("CF.DEL", "dup", "y"), 1, f"CF.DEL dup y #{i + 1} among others")
    lost = missing_of(c, "dup", [f"other{i}" for i in range(500)])
    check(not lost, f"deleting y's copies lost other items: {lost[:5]}")

    # ADDNX / INSERTNX: later items see earlier ones.
    ok(c.call_raw("CF.RESERVE", "nx", 1000, "FPBITS", 32), "CF.RESERVE nx")
    expect(c.call_raw("CF.ADD", "nx", "a"), 1, "CF.ADD nx a")
    expect(c.call_raw("CF.INSERTNX", "nx", "ITEMS", "a", "c", "c", "d", "c"), [0, 1, 0, 1, 0],
           "CF.INSERTNX nx ITEMS a c c d c")
    expect(c.call_raw("CF.ADDNX", "nx", "d"), 0, "CF.ADDNX of a present item")
    expect(c.call_raw("CF.COUNT", "nx", "c"), 1, "INSERTNX stored c once")
    expect(c.call_raw("CF.INSERTNX", "nxnew", "ITEMS", "p", "p"), [1, 0],
           "CF.INSERTNX on a missing key creates it")
    expect(c3.call_raw("CF.INSERTNX", "nx", "ITEMS", "a", "q"), [0, 1], "RESP3 CF.INSERTNX ints")

    # NOCREATE
    for cmd in ("CF.INSERT", "CF.INSERTNX"):
        expect_error(c.call_raw(cmd, "nocreate", "NOCREATE", "ITEMS", "a"), "ERR not found",
                     f"{cmd} NOCREATE on a missing key")
        expect_error(c.call_raw(cmd, "nocreate", "CAPACITY", 100, "NOCREATE", "ITEMS", "a"),
                     "ERR not found", f"{cmd} CAPACITY NOCREATE on a missing key")
        key_absent(c, "nocreate", f"{cmd} NOCREATE")
    expect(c.call_raw("CF.INSERT", "nx", "NOCREATE", "ITEMS", "r"), [1],
           "CF.INSERT NOCREATE on an existing filter")
    expect(c.call_raw("cf.insert", "nx", "nocreate", "items", "s"), [1],
           "lower-case keywords")
    expect(c.call_raw("CF.INSERT", "afteritems", "ITEMS", "NOCREATE", "CAPACITY", "ITEMS"),
           [1, 1, 1], "everything after ITEMS is an item (and the key is created)")
    expect(c.call_raw("CF.MEXISTS", "afteritems", "NOCREATE", "CAPACITY", "ITEMS"), [1, 1, 1],
           "the keywords were stored as items")

    # CAPACITY: used for a created filter, ignored for an existing one.
    buckets = []
    for cap in (100, 1000, 100000):
        k = f"cap{cap}"
        expect(c.call_raw("CF.INSERT", k, "CAPACITY", cap, "ITEMS", "a"), [1],
               f"CF.INSERT {k} CAPACITY {cap}")
        ok(c.call_raw("CF.RESERVE", k + "ref", cap), f"CF.RESERVE {k}ref")
        b = info(c, k)["Number of buckets"]
        expect(b, info(c, k + "ref")["Number of buckets"],
               f"CF.INSERT CAPACITY {cap} sizes like CF.RESERVE {cap}")
        buckets.append(b)
    check(buckets[0] < buckets[1] < buckets[2], f"buckets grow with CAPACITY: {buckets}")
    expect(c.call_raw("CF.INSERT", "cap100", "CAPACITY", 100000, "ITEMS", "b"), [1],
           "CF.INSERT CAPACITY on an existing filter")
    expect(info(c, "cap100")["Number of buckets"], buckets[0],
           "CAPACITY is ignored for an existing filter")
    expect(c.call_raw("CF.INSERT", "cap4", "CAPACITY", 4, "ITEMS", "a"), [1],
           "CAPACITY 4 (= 2 * cf-bucket-size) is accepted")

    # MAXFILTERS (extension): the limit of sub-filters.
    ok(c.call_raw("CF.RESERVE", "mf", 100, "BUCKETSIZE", 2, "MAXFILTERS", 3), "MAXFILTERS 3")
    added, err = fill_until_error(c, "mf", "mf:", 100000)
    mf_added = added
    expect_error(err, "Maximum expansions reached", "CF.ADD past MAXFILTERS 3")
    st = info(c, "mf")
    expect(st["Number of filters"], 3, "sub-filters at the MAXFILTERS limit")
    expect(st["Number of items inserted"], len(added), "items at the MAXFILTERS limit")
    check(len(added) >= 250, f"MAXFILTERS 3 of 100 took only {len(added)} items")
    lost = missing_of(c, "mf", added)
    check(not lost, f"false negatives at the MAXFILTERS limit: {lost[:5]}")
    # CF.INSERT at the limit answers RedisBloom's error; the items that found room are in,
    # as one CF.ADD each would have left them (on a COPY: the same filter, byte for byte).
    expect(c.call_raw("COPY", "mf", "mf:single"), 1, "COPY mf")
    more = [f"mfi:{i}" for i in range(100)]
    expect_error(c.call_raw("CF.INSERT", "mf", "ITEMS", *more), LIMIT_ERR,
                 "CF.INSERT at the MAXFILTERS limit")
    singles = c.pipeline([("CF.ADD", "mf:single", x) for x in more])
    check(any(str(r) == LIMIT_ERR for r in singles if isinstance(r, RespError)),
          f"CF.ADD of the same items met no limit: {short(singles)}")
    check(dump(c, "mf") == dump(c, "mf:single"),
          "CF.INSERT at the limit left another filter than CF.ADD of each item")
    expect(info(c, "mf")["Number of filters"], 3, "CF.INSERT does not overshoot MAXFILTERS")
    expect_error(c.call_raw("CF.INSERTNX", "mf", "ITEMS", *[f"mfx:{i}" for i in range(100)]),
                 LIMIT_ERR, "CF.INSERTNX at the MAXFILTERS limit")

    # EXPANSION 0: a fixed filter; "Filter is full", nothing lost, never grows.
    ok(c.call_raw("CF.RESERVE", "fixed", 500, "EXPANSION", 0), "EXPANSION 0")
    added, err = fill_until_error(c, "fixed", "fx:", 100000)
    expect_error(err, "Filter is full", "CF.ADD into a full EXPANSION 0 filter")
    check(len(added) >= 500, f"EXPANSION 0 filter of capacity 500 took {len(added)} items")
    expect(info(c, "fixed")["Number of filters"], 1, "an EXPANSION 0 filter never grows")
    lost = missing_of(c, "fixed", added)
    check(not lost, f"false negatives in a full fixed filter: {lost[:5]}")
    expect_error(c.call_raw("CF.ADDNX", "fixed", "fx:new"), "Filter is full", "CF.ADDNX full")
    # Deleting one makes room again.
    expect(c.call_raw("CF.DEL", "fixed", added[0]), 1, "CF.DEL in a full fixed filter")
    expect(c.call_raw("CF.ADD", "fixed", added[0]), 1, "CF.ADD after a delete made room")

    # The hot-key rule: one item added over and over does not grow the filter.
    for expansion in (1, 2):
        k = f"hot{expansion}"
        ok(c.call_raw("CF.RESERVE", k, 1000, "EXPANSION", expansion), f"CF.RESERVE {k}")
        replies = c.pipeline([("CF.ADD", k, "hot")] * 200)
        good = [r for r in replies if norm(r) == norm(1)]
        errs = [r for r in replies if isinstance(r, RespError)]
        check(len(good) + len(errs) == 200, f"{k}: replies {short(set(map(repr, replies)))}")
        check(errs, f"{k}: 200 adds of one item never answered an error")
        expect_error(errs[0], HOT_ERR, f"{k}: adding one item over and over")
        check(all(str(e) == HOT_ERR for e in errs), f"{k}: errors {set(map(str, errs))}")
        first_err = next(i for i, r in enumerate(replies) if isinstance(r, RespError))
        check(all(isinstance(r, RespError) for r in replies[first_err:]),
              f"{k}: an add succeeded after the first 'Filter is full'")
        st = info(c, k)
        check(st["Number of filters"] <= 2, f"{k}: a hot key grew the filter to {st}")
        check(4 <= len(good) <= 2 * 2 * st["Number of filters"],
              f"{k}: {len(good)} copies of one item with bucket size 2")
        expect(c.call_raw("CF.COUNT", k, "hot"), len(good), f"{k}: CF.COUNT of the hot item")
        expect(c.call_raw("CF.ADD", k, "cold"), 1, f"{k}: another item still goes in")

    # FPBITS (extension)
    ok(c.call_raw("CF.RESERVE", "fp16", 1000, "FPBITS", 16), "CF.RESERVE FPBITS 16")
    expect(info(c, "fp16")["fpbits"], 16, "CF.DEBUG fpbits")
    ok(c.call_raw("CF.RESERVE", "fpdefault", 1000), "CF.RESERVE default FPBITS")
    expect(info(c, "fpdefault")["fpbits"], 12, "default Fingerprint bits")
    check(info(c, "fp16")["Size"] > info(c, "fpdefault")["Size"], "16-bit slots take more room")
    rates = {}
    absent = [f"absent:{i}" for i in range(20000)]
    for bits in (8, 16):
        k = f"fpr{bits}"
        ok(c.call_raw("CF.RESERVE", k, 1000, "FPBITS", bits, "EXPANSION", 0), f"CF.RESERVE {k}")
        replies = add_all(c, k, [f"in:{i}" for i in range(1000)])
        check(all(norm(r) == norm(1) for r in replies),
              f"{k}: a fixed filter must take its capacity: {short(set(map(repr, replies)))}")
        rates[bits] = sum(mexists(c, k, absent)) / len(absent)
    # Expected about 2 * b * load / 2^f: 1.3 % at 8 bits, 0.005 % at 16 bits.
    check(0.004 < rates[8] < 0.04, f"false-positive rate of a full FPBITS 8 filter: {rates[8]}")
    check(rates[16] < 0.001, f"false-positive rate of a full FPBITS 16 filter: {rates[16]}")
    check(rates[8] > rates[16], f"FPBITS 8 must give more false positives than 16: {rates}")

    # SEMISORT (extension): FPBITS 13 semi-sorted in the room of 12 bits, half the rate.
    ok(c.call_raw("CF.RESERVE", "semi", 1000, "BUCKETSIZE", 4, "FPBITS", 13, "SEMISORT", 1,
                  "EXPANSION", 0), "CF.RESERVE SEMISORT 1")
    ok(c.call_raw("CF.RESERVE", "plain12", 1000, "BUCKETSIZE", 4, "FPBITS", 12, "EXPANSION", 0),
       "CF.RESERVE plain 12 bits, 4-slot buckets")
    expect(info(c, "semi")["Number of buckets"], info(c, "plain12")["Number of buckets"],
           "SEMISORT: as many buckets as the plain filter")
    check(info(c, "semi")["Size"] <= info(c, "plain12")["Size"],
          "SEMISORT 13 bits: no more room than plain 12 bits")
    replies = add_all(c, "semi", [f"in:{i}" for i in range(1000)])
    check(all(norm(r) == norm(1) for r in replies), "SEMISORT: the filter takes its capacity")
    check(all(mexists(c, "semi", [f"in:{i}" for i in range(1000)])),
          "SEMISORT: every item added is found")
    expect(c.call_raw("CF.DEL", "semi", "in:5"), 1, "SEMISORT: CF.DEL")
    expect(c.call_raw("CF.COUNT", "semi", "in:5"), 0, "SEMISORT: deleted")
    check(sum(mexists(c, "semi", absent)) / len(absent) < 0.004,
          "SEMISORT 13 bits: false positives of 13-bit fingerprints")
    expect_error(c.call_raw("CF.RESERVE", "semi2", 1000, "SEMISORT", 1),
                 "ERR SEMISORT 1 needs BUCKETSIZE 4",
                 "SEMISORT with the default 2-slot buckets")
    expect_error(c.call_raw("CF.RESERVE", "semi3", 1000, "BUCKETSIZE", 4, "SEMISORT", 2),
                 "SEMISORT: value must be in the range [0, 1]", "SEMISORT 2")

    # Missing keys
    for proto, cl in ((2, c), (3, c3)):
        f = (lambda v: bool(v)) if proto == 3 else int
        expect(cl.call_raw("CF.EXISTS", "nokey", "a"), f(0), f"RESP{proto} EXISTS missing key")
        expect(cl.call_raw("CF.MEXISTS", "nokey", "a", "b"), [f(0), f(0)],
               f"RESP{proto} MEXISTS missing key")
        expect(cl.call_raw("CF.COUNT", "nokey", "a"), 0, f"RESP{proto} COUNT missing key")
        expect_error(cl.call_raw("CF.DEL", "nokey", "a"), "Not found", "DEL missing key")
        expect_error(cl.call_raw("CF.COMPACT", "nokey"), "Cuckoo filter was not found",
                     "COMPACT missing key")
        for cmd in ("CF.INFO", "CF.DEBUG"):
            expect_error(cl.call_raw(cmd, "nokey"), "ERR not found", f"{cmd} missing key")
        expect_error(cl.call_raw("CF.SCANDUMP", "nokey", 0), "ERR not found",
                     "SCANDUMP missing key")
        key_absent(cl, "nokey", "read commands on a missing key")

    # Wrong type: a string, a list, a hash.
    c.call("SET", "str", "value")
    c.call("RPUSH", "list", "a")
    c.call("HSET", "hash", "f", "v")
    for wk in ("str", "list", "hash"):
        for proto, cl in ((2, c), (3, c3)):
            f = (lambda v: bool(v)) if proto == 3 else int
            w = f"RESP{proto} {wk}"
            expect(cl.call_raw("CF.EXISTS", wk, "a"), f(0), f"{w}: CF.EXISTS")
            expect(cl.call_raw("CF.MEXISTS", wk, "a", "b"), [f(0), f(0)], f"{w}: CF.MEXISTS")
            expect(cl.call_raw("CF.COUNT", wk, "a"), 0, f"{w}: CF.COUNT")
            for args in (("CF.ADD", wk, "a"), ("CF.ADDNX", wk, "a"),
                         ("CF.INSERT", wk, "ITEMS", "a"), ("CF.INSERTNX", wk, "ITEMS", "a"),
                         ("CF.INSERT", wk, "NOCREATE", "ITEMS", "a"),
                         ("CF.RESERVE", wk, 100), ("CF.INFO", wk), ("CF.DEBUG", wk),
                         ("CF.SCANDUMP", wk, 0), ("CF.LOADCHUNK", wk, 1, b"x" * 200)):
                expect_error(cl.call_raw(*args), WRONGTYPE, f"{w}: {args[0]}")
            expect_error(cl.call_raw("CF.DEL", wk, "a"), "Not found", f"{w}: CF.DEL")
            expect_error(cl.call_raw("CF.COMPACT", wk), "Cuckoo filter was not found",
                         f"{w}: CF.COMPACT")
    expect(c.call_raw("GET", "str"), b"value", "the string is untouched")
    expect(c.call_raw("LRANGE", "list", 0, -1), [b"a"], "the list is untouched")

    # CF.RESERVE on an existing filter
    expect_error(c.call_raw("CF.RESERVE", "dup", 1000), "ERR item exists", "RESERVE existing")
    expect_error(c.call_raw("CF.RESERVE", "dup", 50, "BUCKETSIZE", 4), "ERR item exists",
                 "RESERVE existing, other parameters")

    # MEMORY USAGE = Size + the key's own overhead, before and after growth.
    ok(c.call_raw("CF.RESERVE", "mem", 1000), "CF.RESERVE mem")
    size0 = info(c, "mem")["Size"]
    over = c.call("MEMORY", "USAGE", "mem") - size0
    check(0 <= over <= 100, f"MEMORY USAGE - CF.INFO Size = {over} for a short key name")
    add_all(c, "mem", [f"m{i}" for i in range(5000)])
    st = info(c, "mem")
    check(st["Number of filters"] > 1 and st["Size"] > size0, f"mem grew: {st} from {size0}")
    expect(c.call("MEMORY", "USAGE", "mem") - st["Size"], over,
           "MEMORY USAGE - Size is the same constant after growth")
    # Size counts what the filter takes from the server's allocator.
    used0 = int(re.search(rb"used_memory:(\d+)", c.call("INFO", "memory")).group(1))
    ok(c.call_raw("CF.RESERVE", "membig", 4000000), "CF.RESERVE membig")
    used1 = int(re.search(rb"used_memory:(\d+)", c.call("INFO", "memory")).group(1))
    size = info(c, "membig")["Size"]
    check(0.9 * size <= used1 - used0 <= 1.3 * size + 65536,
          f"used_memory grew by {used1 - used0} for a filter of Size {size}")
    c.call("DEL", "membig")

    # Auto-created filters take the module defaults (capacity 1024, b 2, 20, 1, 12 bits).
    expect(c.call_raw("CF.ADD", "auto", "a"), 1, "CF.ADD creates")
    ok(c.call_raw("CF.RESERVE", "autoref", 1024), "CF.RESERVE autoref 1024")
    for k in ("auto", "autoins"):
        if k == "autoins":
            expect(c.call_raw("CF.INSERT", k, "ITEMS", "a"), [1], "CF.INSERT creates")
        st = info(c, k)
        ref = info(c, "autoref")
        expect([st[f] for f in INFO_FIELDS[1:] + ["fpbits"]],
               [ref["Number of buckets"], 1, 1, 0, 2, 1, 20, 12],
               f"{k}: an auto-created filter has the defaults")
    expect(c.call_raw("CF.ADDNX", "autonx", "a"), 1, "CF.ADDNX creates")
    expect(info(c, "autonx")["Number of buckets"], info(c, "autoref")["Number of buckets"],
           "CF.ADDNX-created filter size")

    # Accepted boundary values of every option.
    accepted = [
        ("b1", 2, "BUCKETSIZE", 1), ("b255", 510, "BUCKETSIZE", 255),
        ("i1", 100, "MAXITERATIONS", 1), ("i65535", 100, "MAXITERATIONS", 65535),
        ("e0", 100, "EXPANSION", 0), ("e32768", 100, "EXPANSION", 32768),
        ("e3", 100, "EXPANSION", 3), ("f4", 100, "FPBITS", 4), ("f32", 100, "FPBITS", 32),
        ("m1", 100, "MAXFILTERS", 1), ("m65536", 100, "MAXFILTERS", 65536),
    ]
    for k, cap, opt, val in accepted:
        ok(c.call_raw("CF.RESERVE", "ok:" + k, cap, opt, val), f"CF.RESERVE {cap} {opt} {val}")
        st = info(c, "ok:" + k)
        field = {"BUCKETSIZE": "Bucket size", "MAXITERATIONS": "Max iterations",
                 "EXPANSION": "Expansion rate", "FPBITS": "fpbits"}.get(opt)
        if field:
            expect(st[field], val, f"CF.RESERVE {opt} {val} is used as given")
        expect(c.call_raw("CF.ADD", "ok:" + k, "a"), 1, f"CF.ADD into {opt} {val}")
    ok(c.call_raw("CF.RESERVE", "ok:all", 1000, "fpbits", 10, "Expansion", 2, "MAXITERATIONS",
                  30, "bucketsize", 4, "maxfilters", 7), "options in any order and case")
    st = info(c, "ok:all")
    expect([st["fpbits"], st["Expansion rate"], st["Max iterations"],
            st["Bucket size"]], [10, 2, 30, 4], "options in any order and case")
    ok(c.call_raw("CF.RESERVE", "bucketsize", 100), "a key named like an option is a key")
    expect(info(c, "bucketsize")["Bucket size"], 2, "key 'bucketsize' takes no option")
    # EXPANSION 3: not rounded; Number of buckets stays the first sub-filter's.
    b0 = info(c, "ok:e3")["Number of buckets"]
    add_all(c, "ok:e3", [f"e3:{i}" for i in range(1500)])
    st = info(c, "ok:e3")
    check(st["Number of filters"] >= 2, f"EXPANSION 3 grew: {st}")
    expect(st["Number of buckets"], b0, "EXPANSION 3: Number of buckets after growth")
    # MAXFILTERS 1 with growth allowed: the second sub-filter is refused.
    added, err = fill_until_error(c, "ok:m1", "m1:", 10000)
    expect_error(err, "Maximum expansions reached", "MAXFILTERS 1")

    # Binary and empty items and keys.
    for item in (b"", b"\x00", b"\x00\x01\xff" * 50, "é".encode(), b"x" * 100000):
        expect(c.call_raw("CF.ADD", b"bin\x00key", item), 1, f"CF.ADD item {short(item, 40)}")
        expect(c.call_raw("CF.EXISTS", b"bin\x00key", item), 1, f"CF.EXISTS {short(item, 40)}")
    expect(c.call_raw("CF.ADD", "", "empty-key"), 1, "CF.ADD on the empty key name")
    expect(c.call_raw("CF.EXISTS", "", "empty-key"), 1, "CF.EXISTS on the empty key name")

    # MEXISTS with many items (batched lookups) agrees with EXISTS.
    ok(c.call_raw("CF.RESERVE", "many", 5000), "CF.RESERVE many")
    add_all(c, "many", [f"mx:{i}" for i in range(0, 3000, 2)])
    probe = [f"mx:{i}" for i in range(3000)]
    m = mexists(c, "many", probe)
    e = c.pipeline([("CF.EXISTS", "many", x) for x in probe])
    expect(m, e, "CF.MEXISTS (batched) agrees with CF.EXISTS")
    check(all(m[i] == 1 for i in range(0, 3000, 2)), "MEXISTS: added items present")

    # Dump and reload: a grown filter and an empty one, bit for bit.
    for k in ("grow2", "mf", "fixed", "fpdefault"):
        chunks = dump(c, k)
        replies = load(c, k + ":copy", chunks)
        check(all(norm(r) == norm(Simple("OK")) for r in replies),
              f"reload {k}: {short(replies)}")
        # Size may differ: a filter that grew and was compacted keeps a larger array of
        # sub-filter descriptors than its reloaded copy needs.
        a, b = info(c, k + ":copy"), info(c, k)
        check(a["Size"] <= b["Size"], f"Size of the reloaded {k}: {a['Size']} > {b['Size']}")
        del a["Size"], b["Size"]
        expect(a, b, f"CF.INFO of the reloaded {k}")
        expect(dump(c, k + ":copy"), chunks, f"CF.SCANDUMP of the reloaded {k}")
    lost = missing_of(c, "mf:copy", mf_added)
    check(not lost, f"the reloaded mf misses {len(lost)} items: {lost[:5]}")


@section
def insert_batches(ctx):
    """CF.INSERT / CF.INSERTNX of many items at once (the module adds them 128 at a time
    through cf_add_many) against CF.ADD / CF.ADDNX one item at a time on a COPY of the same
    empty filter (same secret seed): the same reply for every item (or, where an item met
    the sub-filter limit, the error RedisBloom answers, `Maximum expansions reached`, as
    one of the single adds did) and, at the end, the same filter byte for byte. Fresh
    items, repeats and a hot item, in commands of 1, 127, 128, 129, 257, 300 and 1000
    items; a growing filter, a fixed one filled past its capacity, one at MAXFILTERS, and
    4-slot buckets with 8-bit fingerprints."""
    c = ctx.c2
    rng = random.Random(SEED ^ 0x1B5E27)
    configs = [
        ("grow", [1000, "EXPANSION", 2]),
        ("fixed", [300, "EXPANSION", 0]),
        ("limit", [200, "EXPANSION", 1, "MAXFILTERS", 2]),
        ("b4f8", [500, "BUCKETSIZE", 4, "FPBITS", 8, "EXPANSION", 1]),
    ]
    for name, args in configs:
        for nx in (False, True):
            cmd, single = ("CF.INSERTNX", "CF.ADDNX") if nx else ("CF.INSERT", "CF.ADD")
            a, b = f"ib:{name}:{cmd}", f"ib:{name}:{cmd}:single"
            ok(c.call_raw("CF.RESERVE", a, *args), f"CF.RESERVE {a}")
            expect(c.call_raw("COPY", a, b), 1, f"COPY {a} {b}")
            fresh, replies, limit_errors = [], [], 0
            for size in (1, 127, 128, 129, 300, 1000, 257):
                part = []
                for _ in range(size):
                    r = rng.random()
                    if r < 0.1 and fresh:
                        part.append(rng.choice(fresh))
                    elif r < 0.15:
                        part.append("hot")
                    else:
                        fresh.append(f"{name}-{len(fresh)}")
                        part.append(fresh[-1])
                got = c.call_raw(cmd, a, "ITEMS", *part)
                one = c.pipeline([(single, b, x) for x in part])
                if any(str(r) == LIMIT_ERR for r in one if isinstance(r, RespError)):
                    expect_error(got, LIMIT_ERR, f"{cmd} {a} of {size} items, one at the limit")
                    limit_errors += 1
                    continue
                want = [-1 if isinstance(r, RespError) else r for r in one]
                expect(got, want, f"{cmd} {a} of {size} items against {single} one by one")
                replies += got
            check(dump(c, a) == dump(c, b),
                  f"{cmd} {a}: the filter differs from the one {single} made")
            if not nx:
                check(-1 in replies or limit_errors,
                      f"{cmd} {a}: no item was refused (no full or hot case)")
            else:
                check(0 in replies, f"{cmd} {a}: no item was found present")
            check((limit_errors > 0) == (name == "limit"),
                  f"{cmd} {a}: {limit_errors} commands met the sub-filter limit")


@section
def module_args(ctx):
    c_main = ctx.c2
    args = ["cf-max-expansions", "4", "cf-bucket-size", "4", "cf-fingerprint-bits", "16",
            "cf-initial-size", "2000"]
    with Server(module_args=args) as s, s.client() as c:
        expect(c.call_raw("CF.ADD", "auto", "a"), 1, "CF.ADD on a server with module args")
        st = info(c, "auto")
        ok(c_main.call_raw("CF.RESERVE", "argsref", 2000, "BUCKETSIZE", 4, "FPBITS", 16),
           "reference filter on the main server")
        ref = info(c_main, "argsref")
        expect([st[f] for f in INFO_FIELDS[1:] + ["fpbits"]],
               [ref["Number of buckets"], 1, 1, 0, 4, 1, 20, 16],
               "auto-created filter with cf-initial-size 2000, bucket size 4, 16 bits")
        added, err = fill_until_error(c, "auto", "a:", 200000)
        expect_error(err, "Maximum expansions reached", "cf-max-expansions 4")
        expect(info(c, "auto")["Number of filters"], 4, "cf-max-expansions 4: sub-filters")
        lost = missing_of(c, "auto", added)
        check(not lost, f"false negatives at the limit: {lost[:5]}")
        ok(c.call_raw("CF.RESERVE", "res", 1000), "CF.RESERVE with module defaults")
        st = info(c, "res")
        expect([st["Bucket size"], st["fpbits"]], [4, 16], "RESERVE takes the "
               "module's bucket size and fingerprint bits as defaults")
        expect_error(c.call_raw("CF.INSERT", "ins7", "CAPACITY", 7, "ITEMS", "a"),
                     INS_CAP_RANGE, "CAPACITY 7 < 2 * cf-bucket-size 4")
        key_absent(c, "ins7", "CAPACITY 7")
        expect(c.call_raw("CF.INSERT", "ins8", "CAPACITY", 8, "ITEMS", "a"), [1], "CAPACITY 8")
        expect(c.call_raw("CF.INSERT", "ins1", "ITEMS", "a"), [1], "CF.INSERT default capacity")
        expect(info(c, "ins1")["Number of buckets"], ref["Number of buckets"],
               "CF.INSERT without CAPACITY uses cf-initial-size")

    rb = ["CF_MAX_EXPANSIONS", "5", "ERROR_RATE", "0.01", "INITIAL_SIZE", "100"]
    with Server(module_args=rb) as s, s.client() as c:
        expect(c.call_raw("CF.ADD", "auto", "a"), 1, "CF.ADD with RedisBloom's load args")
        st = info(c, "auto")
        ok(c_main.call_raw("CF.RESERVE", "rbref", 1024), "reference filter")
        expect(st["Number of buckets"], info(c_main, "rbref")["Number of buckets"],
               "INITIAL_SIZE (a Bloom filter setting) does not change CF's capacity")
        added, err = fill_until_error(c, "auto", "a:", 200000)
        expect_error(err, "Maximum expansions reached", "CF_MAX_EXPANSIONS 5")
        expect(info(c, "auto")["Number of filters"], 5, "CF_MAX_EXPANSIONS 5: sub-filters")
        log = s.log()
        check("<cuckoo> 'bf-error-rate' is a Bloom filter setting; ignored" in log and
              "cuckoo: " not in log, f"the log line of a Bloom setting:\n{log[-1500:]}")

    ok_args = [["cf-max-iterations", "7", "cf-expansion-factor", "0"],
               ["Cf-Bucket-Size", "1", "bf-error-rate", "0.5", "bf-initial-size", "9"]]
    expected = [{"Max iterations": 7, "Expansion rate": 0}, {"Bucket size": 1}]
    for a, want in zip(ok_args, expected):
        with Server(module_args=a) as s, s.client() as c:
            expect(c.call_raw("CF.ADD", "auto", "a"), 1, f"module args {a}")
            st = info(c, "auto")
            for f, v in want.items():
                expect(st[f], v, f"module args {a}: {f}")

    bad_args = [
        (["bogus", "1"], "Unrecognized option 'bogus'"),
        (["cf-bucket-size", "0"], "cf-bucket-size must be an integer in [1, 255]"),
        (["cf-bucket-size"], "module arguments come in pairs"),
        (["cf-bucket-size", "2", "cf-max-expansions"], "module arguments come in pairs"),
        (["cf-bucket-size", "abc"], "cf-bucket-size must be an integer"),
        (["cf-bucket-size", "256"], "cf-bucket-size must be an integer in [1, 255]"),
        (["cf-max-expansions", "0"], "cf-max-expansions must be an integer in [1, 65536]"),
        (["CF_MAX_EXPANSIONS", "65537"], "cf-max-expansions must be an integer"),
        (["cf-fingerprint-bits", "3"], "cf-fingerprint-bits must be an integer in [4, 32]"),
        (["cf-fingerprint-bits", "33"], "cf-fingerprint-bits must be an integer in [4, 32]"),
        (["cf-initial-size", "3"], "cf-initial-size must be an integer"),
        (["cf-initial-size", "1073741825"], "cf-initial-size must be an integer"),
        (["cf-max-iterations", "65536"], "cf-max-iterations must be an integer"),
        (["cf-expansion-factor", "-1"], "cf-expansion-factor must be an integer"),
        (["cf-initial-size", "4", "cf-bucket-size", "4"],
         "cf-initial-size must be at least 2 * cf-bucket-size"),
        (["cf-layout", "bogus"], "cf-layout must be native or redisbloom"),
        (["cf-layout", "1"], "cf-layout must be native or redisbloom"),
    ]
    for a, why in bad_args:
        s = Server(module_args=a)
        try:
            try:
                s.start()
            except RuntimeError as e:
                # The server prefixes the module's name; the module's text does not repeat it.
                check(f"<cuckoo> {why}" in str(e) and "initialization failed" in str(e) and
                      "cuckoo: " not in str(e),
                      f"module args {a}: the server failed without the module's reason "
                      f"{why!r}:\n{str(e)[-1500:]}")
            else:
                raise Failure(f"module args {a}: the server started")
        finally:
            s.stop()


@section
def configs(ctx):
    """The settings as configurations: cuckoo.<name> for CONFIG GET / SET and in the
    server's config file, starting from the load arguments."""
    names = ["cf-max-expansions", "cf-initial-size", "cf-bucket-size", "cf-max-iterations",
             "cf-expansion-factor", "cf-fingerprint-bits", "cf-semi-sort", "cf-load-timeout",
             "cf-layout"]
    with Server(module_args=["cf-bucket-size", "4"],
                extra=[("cuckoo.cf-fingerprint-bits", "20")]) as s, s.client() as c:
        got = c.call("CONFIG", "GET", "cuckoo.*")
        got = {got[i].decode(): got[i + 1].decode() for i in range(0, len(got), 2)}
        expect(got, {"cuckoo." + n: v for n, v in zip(names, ["32", "1024", "4", "20", "1",
                                                                "20", "0", "600",
                                                                "native"])},
               "CONFIG GET cuckoo.* (a load argument and a config-file line applied)")
        expect(c.call_raw("CF.ADD", "a1", "x"), 1, "CF.ADD")
        expect([info(c, "a1")[f] for f in ("Bucket size", "fpbits")], [4, 20],
               "an auto-created filter takes the configured defaults")
        for name, value, field in (("cf-bucket-size", 8, "Bucket size"),
                                   ("cf-max-iterations", 7, "Max iterations"),
                                   ("cf-expansion-factor", 0, "Expansion rate"),
                                   ("cf-fingerprint-bits", 16, "fpbits")):
            ok(c.call_raw("CONFIG", "SET", "cuckoo." + name, value), f"CONFIG SET {name}")
            expect(c.call_raw("CF.ADD", "k:" + name, "x"), 1, f"CF.ADD after {name}")
            expect(info(c, "k:" + name)[field], value, f"{name} {value} takes effect")
        expect(info(c, "a1")["Bucket size"], 4, "an existing filter keeps its settings")
        for name, value, why in (("cf-bucket-size", 256, "must be between 1 and 255"),
                                 ("cf-bucket-size", 600, "must be between 1 and 255"),
                                 ("cf-fingerprint-bits", 3, "must be between 4 and 32"),
                                 ("cf-initial-size", 15,
                                  "cf-initial-size must be at least 2 * cf-bucket-size"),
                                 ("cf-max-expansions", 0, "must be between 1 and 65536"),
                                 ("cf-load-timeout", 0, "must be between 1 and 2592000")):
            r = c.call_raw("CONFIG", "SET", "cuckoo." + name, value)
            check(isinstance(r, RespError) and why in str(r),
                  f"CONFIG SET {name} {value}: expected an error with {why!r}, got {r!r}")
        # cf-semi-sort: with 4-slot buckets only, both ways round.
        r = c.call_raw("CONFIG", "SET", "cuckoo.cf-semi-sort", 1)
        check(isinstance(r, RespError) and "needs cf-bucket-size 4" in str(r),
              f"CONFIG SET cf-semi-sort 1 with cf-bucket-size 8: {r!r}")
        ok(c.call_raw("CONFIG", "SET", "cuckoo.cf-bucket-size", 4), "cf-bucket-size 4")
        ok(c.call_raw("CONFIG", "SET", "cuckoo.cf-semi-sort", 1), "cf-semi-sort 1")
        expect(c.call_raw("CF.ADD", "semi:auto", "x"), 1, "CF.ADD with cf-semi-sort 1")
        before = info(c, "semi:auto")["Size"]
        ok(c.call_raw("CONFIG", "SET", "cuckoo.cf-semi-sort", 0), "cf-semi-sort 0")
        expect(c.call_raw("CF.ADD", "plain:auto", "x"), 1, "CF.ADD with cf-semi-sort 0")
        check(before < info(c, "plain:auto")["Size"],
              "an auto-created semi-sorted filter is smaller than a plain one")
        ok(c.call_raw("CONFIG", "SET", "cuckoo.cf-semi-sort", 1), "cf-semi-sort 1 again")
        r = c.call_raw("CONFIG", "SET", "cuckoo.cf-bucket-size", 2)
        check(isinstance(r, RespError) and "needs cf-bucket-size 4" in str(r),
              f"CONFIG SET cf-bucket-size 2 with cf-semi-sort 1: {r!r}")
        ok(c.call_raw("CONFIG", "SET", "cuckoo.cf-semi-sort", 0), "cf-semi-sort 0 again")
        ok(c.call_raw("CONFIG", "SET", "cuckoo.cf-bucket-size", 8), "cf-bucket-size 8 again")
        ok(c.call_raw("CONFIG", "SET", "cuckoo.cf-initial-size", 16), "cf-initial-size 16")
        r = c.call_raw("CONFIG", "SET", "cuckoo.cf-bucket-size", 9)
        check(isinstance(r, RespError) and "at most cf-initial-size / 2" in str(r),
              f"CONFIG SET cf-bucket-size 9 with cf-initial-size 16: {r!r}")
        expect(c.call("CONFIG", "GET", "cuckoo.cf-bucket-size")[1], b"8",
               "a refused CONFIG SET changes nothing")
        alive(c, "after CONFIG SET")


@section
def bad_input(ctx):
    c = ctx.c2
    kinds = ctx.bad_kinds
    c.call("SET", "bi:str", "v")
    ok(c.call_raw("CF.RESERVE", "bi:cf", 1000), "CF.RESERVE bi:cf")
    c.call("CF.ADD", "bi:cf", "a")
    hdr = dump(c, "bi:cf")[0]
    counter = [0]

    def case(kind, args, error, mode="exact", creates=True):
        """args[1], if any, is replaced by a fresh key unless it starts with 'bi:'."""
        if kind not in kinds:
            kinds.append(kind)
        args = list(args)
        fresh = None
        if len(args) > 1 and not (isinstance(args[1], str) and args[1].startswith("bi:")):
            counter[0] += 1
            fresh = f"bad:{counter[0]}"
            args[1] = fresh
        for proto, cl in ((2, c), (3, ctx.c3)):
            what = f"{kind}: RESP{proto} {short(args, 160)}"
            expect_error(cl.call_raw(*args), error, what, mode)
            alive(cl, what)
            if fresh and creates:
                key_absent(cl, fresh, what)

    # Wrong arity, every command (a key argument, where there is one, is fresh).
    arities = {
        "CF.RESERVE": [[], ["k"]], "CF.ADD": [[], ["k"], ["k", "a", "b"]],
        "CF.ADDNX": [[], ["k"], ["k", "a", "b"]],
        "CF.INSERT": [[], ["k"], ["k", "ITEMS"]], "CF.INSERTNX": [[], ["k"], ["k", "ITEMS"]],
        "CF.EXISTS": [[], ["k"], ["k", "a", "b"]], "CF.MEXISTS": [[], ["k"]],
        "CF.COUNT": [[], ["k"], ["k", "a", "b"]], "CF.DEL": [[], ["k"], ["k", "a", "b"]],
        "CF.COMPACT": [[], ["k", "x"]], "CF.INFO": [[], ["k", "x"]],
        "CF.DEBUG": [[], ["k", "x"]], "CF.SCANDUMP": [[], ["k"], ["k", 0, "x"]],
        "CF.LOADCHUNK": [[], ["k"], ["k", 1], ["k", 1, hdr[1], "x"]],
    }
    for cmd, lists in arities.items():
        for a in lists:
            case(f"wrong arity: {cmd}", [cmd] + a, arity(cmd))
    case("wrong arity: mixed-case command name", ["cF.aDd", "k"], arity("cf.add"))
    case("wrong arity: on an existing filter", ["CF.ADD", "bi:cf"], arity("CF.ADD"))

    R = "CF.RESERVE"
    case("RESERVE option keyword without value", [R, "k", 100, "BUCKETSIZE"], arity(R))
    case("RESERVE option keyword without value (second option)",
         [R, "k", 100, "BUCKETSIZE", 2, "EXPANSION"], arity(R))
    for cap in ("abc", "", "1.5", "+100", " 100", "100 ", "-0", "0x10", "1e3",
                "9223372036854775808", "-9223372036854775809"):
        case("RESERVE capacity not an integer", [R, "k", cap], "Bad capacity")
    for cap in (-1, 0, 3, 2 ** 30 + 1, 2 ** 63 - 1, -2 ** 63):
        case("RESERVE capacity out of range", [R, "k", cap], RES_CAP_RANGE)
    case("RESERVE capacity < 2 * the given BUCKETSIZE", [R, "k", 7, "BUCKETSIZE", 4],
         RES_CAP_RANGE)
    for opt, lo, hi in (("BUCKETSIZE", 0, 256), ("MAXITERATIONS", 0, 65536),
                        ("EXPANSION", -1, 32769), ("FPBITS", 3, 33), ("MAXFILTERS", 0, 65537)):
        rng = {"BUCKETSIZE": "[1, 255]", "MAXITERATIONS": "[1, 65535]",
               "EXPANSION": "[0, 32768]", "FPBITS": "[4, 32]", "MAXFILTERS": "[1, 65536]"}[opt]
        for v in (lo, hi, 2 ** 63 - 1, -2 ** 63):
            case(f"RESERVE {opt} out of range", [R, "k", 1000, opt, v],
                 f"{opt}: value must be in the range {rng}")
        for v in ("abc", "", "2.0", "9223372036854775808"):
            case(f"RESERVE {opt} not an integer", [R, "k", 1000, opt, v], f"Couldn't parse {opt}")
    case("RESERVE unknown option", [R, "k", 100, "FOO", 1], "Unknown argument received")
    case("RESERVE unknown option (an INSERT keyword)", [R, "k", 100, "CAPACITY", 100],
         "Unknown argument received")
    case("RESERVE SEED from a normal client", [R, "k", 100, "SEED", 5],
         "Unknown argument received")
    case("RESERVE SEED from a normal client (not an integer)", [R, "k", 100, "SEED", "x"],
         "Unknown argument received")
    case("RESERVE error order: capacity parse first", [R, "k", "abc", "BUCKETSIZE", 0],
         "Bad capacity")
    case("RESERVE error order: options before the capacity range", [R, "k", 1, "BUCKETSIZE", 0],
         "BUCKETSIZE: value must be in the range [1, 255]")
    case("RESERVE error order: unknown option before the capacity range", [R, "k", 1, "X", 1],
         "Unknown argument received")
    case("RESERVE error order: arguments before the key type", [R, "bi:str", "abc"],
         "Bad capacity")
    case("RESERVE error order: arguments before an existing key", [R, "bi:cf", 1],
         RES_CAP_RANGE)
    case("RESERVE on an existing filter", [R, "bi:cf", 100], "ERR item exists")
    case("RESERVE a shape that cannot hold its capacity",
         [R, "k", 1000000000, "FPBITS", 4, "BUCKETSIZE", 1], "ERR Could not create filter")
    # SEED in a script and in a transaction is still a normal client's.
    for key in ("bad:lua",):
        r = c.call_raw("EVAL", "return redis.call('CF.RESERVE', KEYS[1], 100, 'SEED', 5)", 1,
                       key)
        expect_error(r, "Unknown argument received", "SEED in a Lua script", "prefix")
        key_absent(c, key, "SEED in a Lua script")
    kinds.append("RESERVE SEED inside a script")
    c.call("MULTI")
    c.call("CF.RESERVE", "bad:multi", 100, "SEED", 1)
    r = c.call("EXEC")
    check(len(r) == 1, f"EXEC: {short(r)}")
    expect_error(r[0], "Unknown argument received", "SEED inside MULTI")
    key_absent(c, "bad:multi", "SEED inside MULTI")
    kinds.append("RESERVE SEED inside MULTI/EXEC")

    for I in ("CF.INSERT", "CF.INSERTNX"):
        case(f"{I} unknown option", [I, "k", "FOO", "ITEMS", "a"], "Unknown argument received")
        case(f"{I} option by first letter only (CATS)", [I, "k", "CATS", 100, "ITEMS", "a"],
             "Unknown argument received")
        case(f"{I} option by first letter only (I)", [I, "k", "I", "a"],
             "Unknown argument received")
        case(f"{I} CAPACITY without value", [I, "k", "NOCREATE", "CAPACITY"], arity(I))
        case(f"{I} CAPACITY without value", [I, "k", "CAPACITY"], arity(I))
        for v in ("abc", "", "1.5", "9223372036854775808"):
            case(f"{I} CAPACITY not an integer", [I, "k", "CAPACITY", v, "ITEMS", "a"],
                 "Bad capacity")
        for v in (0, 3, -5, 2 ** 30 + 1, 2 ** 63 - 1):
            case(f"{I} CAPACITY out of range", [I, "k", "CAPACITY", v, "ITEMS", "a"],
                 INS_CAP_RANGE)
        case(f"{I} CAPACITY out of range on an existing filter",
             [I, "bi:cf", "CAPACITY", 0, "ITEMS", "a"], INS_CAP_RANGE)
        case(f"{I} without ITEMS", [I, "k", "CAPACITY", 100], arity(I))
        case(f"{I} without ITEMS", [I, "k", "NOCREATE", "NOCREATE"], arity(I))
        case(f"{I} nothing after ITEMS", [I, "k", "CAPACITY", 100, "ITEMS"], arity(I))
        case(f"{I} nothing after ITEMS", [I, "k", "NOCREATE", "ITEMS"], arity(I))
        case(f"{I} NOCREATE on a missing key", [I, "k", "NOCREATE", "ITEMS", "a"],
             "ERR not found")
        case(f"{I} on a string key", [I, "bi:str", "ITEMS", "a"], WRONGTYPE)

    case("ADD on a string key", ["CF.ADD", "bi:str", "a"], WRONGTYPE)
    case("ADDNX on a string key", ["CF.ADDNX", "bi:str", "a"], WRONGTYPE)
    case("RESERVE on a string key", [R, "bi:str", 100], WRONGTYPE)
    case("INFO on a missing key", ["CF.INFO", "k"], "ERR not found")
    case("INFO on a string key", ["CF.INFO", "bi:str"], WRONGTYPE)
    case("DEBUG on a missing key", ["CF.DEBUG", "k"], "ERR not found")
    case("DEL on a missing key", ["CF.DEL", "k", "a"], "Not found")
    case("DEL on a string key", ["CF.DEL", "bi:str", "a"], "Not found")
    case("COMPACT on a missing key", ["CF.COMPACT", "k"], "Cuckoo filter was not found")
    case("COMPACT on a string key", ["CF.COMPACT", "bi:str"], "Cuckoo filter was not found")
    case("SCANDUMP on a missing key", ["CF.SCANDUMP", "k", 0], "ERR not found")
    case("SCANDUMP on a string key", ["CF.SCANDUMP", "bi:str", 0], WRONGTYPE)

    end = dump(c, "bi:cf")[-1][0]
    for it in ("abc", "", "1.5", -1, "-0", "9223372036854775808", -2 ** 63):
        case("SCANDUMP iterator not a non-negative integer", ["CF.SCANDUMP", "bi:cf", it],
             "Invalid position")
    case("SCANDUMP bad iterator checked before the key", ["CF.SCANDUMP", "k", -1],
         "Invalid position")
    for it in (1, 5, hdr[0] - 1, hdr[0] + 1, end - 1):
        case("SCANDUMP iterator that is not a chunk position", ["CF.SCANDUMP", "bi:cf", it],
             "Invalid position")
    # Past the end: "no more", [0, nil], as RedisBloom answers and client dump loops expect.
    for it in (end, end + 1, end + 4096, 10 ** 12, 2 ** 63 - 1):
        for proto, cc in ((2, c), (3, ctx.c3)):
            expect(cc.call_raw("CF.SCANDUMP", "bi:cf", it), [0, None],
                   f"RESP{proto} CF.SCANDUMP past the end ({it})")

    L = "CF.LOADCHUNK"
    for it in (0, -3, "abc", "", "1.5", -2 ** 63, "9223372036854775808"):
        case("LOADCHUNK iterator 0 or not a positive integer", [L, "k", it, hdr[1]],
             "Invalid position")
    case("LOADCHUNK bad iterator on an existing filter", [L, "bi:cf", 0, hdr[1]],
         "Invalid position")
    case("LOADCHUNK header chunk onto a complete filter", [L, "bi:cf", hdr[0], hdr[1]],
         "ERR item exists")
    case("LOADCHUNK onto a string key", [L, "bi:str", hdr[0], hdr[1]], WRONGTYPE)
    # Every refused header answers RedisBloom's text; the reason goes to the log.
    case("LOADCHUNK empty header", [L, "k", hdr[0], b""], HDR_ERR)
    case("LOADCHUNK header shorter than the module's fields", [L, "k", hdr[0], hdr[1][:23]],
         HDR_ERR)
    for n in (24, 25, 40, len(hdr[1]) // 2, len(hdr[1]) - 8, len(hdr[1]) - 1):
        case("LOADCHUNK header chunk truncated", [L, "k", hdr[0], hdr[1][:n]], HDR_ERR)
    case("LOADCHUNK header chunk with extra bytes", [L, "k", hdr[0], hdr[1] + b"\x00"],
         HDR_ERR)
    # The module's fields in front: MAXITERATIONS (bytes 8-15) in 1..65535, and the
    # deletes counter (bytes 0-7) below 2^63 (CF.INFO sends it as a signed integer).
    for i, v in ((8, 0), (8, 65536), (8, 2 ** 64 - 1), (0, 2 ** 63), (0, 2 ** 64 - 1)):
        forged = hdr[1][:i] + v.to_bytes(8, "little") + hdr[1][i + 8:]
        case("LOADCHUNK header with a module field out of range", [L, "k", hdr[0], forged],
             HDR_ERR)
    rnd = random.Random(SEED)
    for n in (38, 46, 128, len(hdr[1]), 4096):
        case("LOADCHUNK header of another filter type (random bytes)",
             [L, "k", hdr[0], bytes(rnd.randrange(256) for _ in range(n))], HDR_ERR)
    # A RedisBloom header (38 bytes: items, buckets, deletes, filters, b, iters, expansion)
    # at iterator 1 makes a filter of its type (test_redisbloom.py): one of 3 buckets, no
    # power of two, does not; this module's header there is of the wrong length for it.
    rb = (b"\x01" + b"\x00" * 7 + b"\x03" + b"\x00" * 7 + b"\x00" * 8 + b"\x01" + b"\x00" * 7
          + b"\x02\x00\x14\x00\x01\x00")
    case("LOADCHUNK a RedisBloom header chunk of 3 buckets", [L, "k", 1, rb], HDR_ERR)
    case("LOADCHUNK header chunk at another iterator", [L, "k", 1, hdr[1]], HDR_ERR)
    case("LOADCHUNK header chunk at another iterator", [L, "k", hdr[0] + 64, hdr[1]], HDR_ERR)
    data = dump(c, "bi:cf")[1]
    case("LOADCHUNK a data chunk onto a missing key", [L, "k", data[0], data[1]], HDR_ERR)
    case("LOADCHUNK a data chunk onto a complete filter", [L, "bi:cf", data[0], data[1]],
         "ERR item exists")
    expect(c.call_raw("CF.EXISTS", "bi:cf", "a"), 1, "bi:cf survived every bad input")
    expect(c.call_raw("GET", "bi:str"), b"v", "bi:str survived every bad input")


def flip(data, pos, mask):
    return data[:pos] + bytes([data[pos] ^ mask]) + data[pos + 1:]


def u64(b):
    return int.from_bytes(b, "little")


@section
def loadchunk(ctx):
    c = ctx.c2
    kinds = ctx.bad_kinds
    src_items = [f"lc:{i}" for i in range(600)]
    ok(c.call_raw("CF.RESERVE", "lc:src", 100, "EXPANSION", 2), "CF.RESERVE lc:src")
    add_all(c, "lc:src", src_items)
    c.call("CF.DEL", "lc:src", src_items[-1])  # a non-zero deletes counter in the header
    src_items.pop()
    src = dump(c, "lc:src")
    check(len(src) >= 4, f"lc:src: a header and 3+ data chunks, got {len(src)} chunks")
    ok(c.call_raw("CF.RESERVE", "lc:other", 100, "EXPANSION", 2), "CF.RESERVE lc:other")
    add_all(c, "lc:other", src_items)
    other = dump(c, "lc:other")
    expect([it for it, _ in other], [it for it, _ in src], "same shape, same iterators")
    hdr, datas = src[0], src[1:]

    def refused_chunk(seq, what, kind, error=CHUNK_ERR):
        """Load seq (header first); the last one must be refused and no key left."""
        if kind not in kinds:
            kinds.append(kind)
        replies = load(c, "lc:dst", seq)
        for i, r in enumerate(replies[:-1]):
            ok(r, f"{what}: chunk {i} before the bad one")
        expect_error(replies[-1], error, what)
        alive(c, what)
        key_absent(c, "lc:dst", what)
        # The load can start over from the first chunk.
        replies = load(c, "lc:dst", src)
        check(all(norm(r) == norm(Simple("OK")) for r in replies),
              f"{what}: reloading afterwards: {short(replies)}")
        lost = missing_of(c, "lc:dst", src_items)
        check(not lost, f"{what}: reloaded filter misses {lost[:5]}")
        c.call("DEL", "lc:dst")

    d0, d1 = datas[0], datas[1]
    refused_chunk([hdr, (d0[0], d0[1][:-1])], "data chunk truncated by 1", "data chunk truncated")
    refused_chunk([hdr, (d0[0], d0[1][:10])], "data chunk truncated to 10", "data chunk truncated")
    refused_chunk([hdr, (d0[0], d0[1][8:])], "data chunk missing its start",
                  "data chunk truncated")
    refused_chunk([hdr, (d0[0], d0[1] + b"\x00")], "data chunk with an extra byte",
                  "data chunk too long")
    refused_chunk([hdr, (d0[0], b"")], "empty data chunk", "data chunk empty")
    refused_chunk([hdr, other[1]], "data chunk of another filter (same shape)",
                  "data chunk from a different filter")
    refused_chunk([hdr, d0, other[2]], "second data chunk of another filter",
                  "data chunk from a different filter")
    refused_chunk([hdr, d1], "data chunks out of order (first skipped)",
                  "data chunks out of order")
    refused_chunk([hdr, d0, datas[2]], "data chunks out of order (second skipped)",
                  "data chunks out of order")
    refused_chunk([hdr, d0, d0], "repeated data chunk", "data chunk repeated")
    refused_chunk([hdr, hdr], "header chunk sent again to an incomplete filter",
                  "header chunk repeated")
    refused_chunk([hdr, (d0[0] + 1, d0[1])], "data chunk with iterator + 1",
                  "data chunk at a wrong iterator")
    refused_chunk([hdr, (d0[0] - 1, d0[1])], "data chunk with iterator - 1",
                  "data chunk at a wrong iterator")
    refused_chunk([hdr, (d1[0], d0[1])], "first data chunk with the second's iterator",
                  "data chunk at a wrong iterator")
    refused_chunk([hdr, (hdr[0], d0[1])], "data chunk with the header's iterator",
                  "data chunk at a wrong iterator")
    refused_chunk([hdr, d0, d1, datas[2], d0] if len(datas) > 3 else [hdr, d0, d1, d0],
                  "an old chunk near the end", "data chunk repeated")
    rnd = random.Random(SEED + 1)
    refused_chunk([hdr, (d0[0], bytes(rnd.randrange(256) for _ in range(len(d0[1]))))],
                  "random bytes as a data chunk", "data chunk from a different filter")
    # Bytes of the right length from another filter whose header differs (other size).
    ok(c.call_raw("CF.RESERVE", "lc:far", 100, "EXPANSION", 2, "FPBITS", 16), "lc:far")
    c.call("CF.ADD", "lc:far", "x")
    far = dump(c, "lc:far")
    refused_chunk([hdr, (d0[0], far[1][1][:len(d0[1])])], "a chunk of a filter of another shape",
                  "data chunk from a different filter")
    # An extra chunk after the last: the filter is complete by then.
    replies = load(c, "lc:dst", src + [datas[-1]])
    expect_error(replies[-1], "ERR item exists", "a chunk after the last")
    check(all(norm(r) == norm(Simple("OK")) for r in replies[:-1]), "load before the extra")
    c.call("DEL", "lc:dst")
    kinds.append("data chunk after the filter is complete")

    # Every byte of a data chunk flipped (two masks): refused, key removed.
    kinds.append("data chunk with a flipped byte (every position)")
    for mask in (0x01, 0x80):
        cmds = []
        for pos in range(len(d1[1])):
            cmds += [("CF.LOADCHUNK", "lc:dst", *hdr), ("CF.LOADCHUNK", "lc:dst", *d0),
                     ("CF.LOADCHUNK", "lc:dst", d1[0], flip(d1[1], pos, mask)),
                     ("EXISTS", "lc:dst")]
        replies = c.pipeline(cmds)
        for pos in range(len(d1[1])):
            r = replies[4 * pos: 4 * pos + 4]
            what = f"data chunk byte {pos} ^ {mask:#x}"
            ok(r[0], what + ": header")
            ok(r[1], what + ": first data chunk")
            expect_error(r[2], CHUNK_ERR, what)
            expect(r[3], 0, what + ": EXISTS afterwards")
    alive(c, "flipped data chunks")

    # Every byte of the header chunk flipped. The module's 16 bytes in front carry
    # "Number of items deleted" (any value is valid) and MAXITERATIONS (1..65535); the
    # rest is the library's header, covered by checksums: a flip there is refused by the
    # header chunk or, at the latest, by the last data chunk, and no key is left.
    kinds.append("header chunk with a flipped byte (every position)")
    base_info = info(c, "lc:src")
    for mask in (0x01, 0x80, 0xFF):
        cmds = []
        for pos in range(len(hdr[1])):
            cmds.append(("CF.LOADCHUNK", "lc:dst", hdr[0], flip(hdr[1], pos, mask)))
            cmds += [("CF.LOADCHUNK", "lc:dst", *d) for d in datas]
            cmds += [("EXISTS", "lc:dst"), ("CF.INFO", "lc:dst"),
                     ("CF.MEXISTS", "lc:dst", *src_items), ("DEL", "lc:dst")]
        replies = c.pipeline(cmds)
        step = 1 + len(datas) + 4
        for pos in range(len(hdr[1])):
            r = replies[step * pos: step * (pos + 1)]
            loads, exists, inf, mex = r[:1 + len(datas)], r[-4], r[-3], r[-2]
            mutated = flip(hdr[1], pos, mask)
            what = f"header byte {pos} ^ {mask:#x}"
            if pos < 24:  # the module's fields and their check
                expect_error(loads[0], HDR_ERR, what + " (the module's fields are checked)")
                expect(exists, 0, what + ": no key")
            else:
                expect(exists, 0, f"{what}: a damaged header must never give a filter")
                if isinstance(loads[0], RespError):
                    expect_error(loads[0], HDR_ERR, what)
                else:
                    first = next((x for x in loads[1:] if isinstance(x, RespError)), None)
                    check(first is not None, f"{what}: every chunk was accepted")
                    expect_error(first, CHUNK_ERR, f"{what}: the data chunk that refused it")
    alive(c, "flipped headers")


@section
def incomplete(ctx):
    c, c3 = ctx.c2, ctx.c3
    kinds = ctx.bad_kinds
    ok(c.call_raw("CF.RESERVE", "inc:src", 1000), "CF.RESERVE inc:src")
    items = [f"inc:{i}" for i in range(800)]
    add_all(c, "inc:src", items)
    chunks = dump(c, "inc:src")
    ok(c.call_raw("CF.LOADCHUNK", "inc:k", *chunks[0]), "header of inc:k")
    for proto, cl in ((2, c), (3, c3)):
        for args in (("CF.EXISTS", "inc:k", "a"), ("CF.MEXISTS", "inc:k", "a", "b"),
                     ("CF.COUNT", "inc:k", "a"), ("CF.ADD", "inc:k", "a"),
                     ("CF.ADDNX", "inc:k", "a"), ("CF.INSERT", "inc:k", "ITEMS", "a"),
                     ("CF.INSERTNX", "inc:k", "ITEMS", "a"),
                     ("CF.INSERT", "inc:k", "NOCREATE", "ITEMS", "a"),
                     ("CF.DEL", "inc:k", "a"), ("CF.COMPACT", "inc:k")):
            kind = f"{args[0]} on an incomplete filter"
            if kind not in kinds:
                kinds.append(kind)
            expect_error(cl.call_raw(*args), LOADING, f"RESP{proto} {kind}")
            check("incomplete" in LOADING, "the error names the reason")
        expect_error(cl.call_raw("CF.RESERVE", "inc:k", 100), "ERR item exists",
                     "RESERVE on an incomplete filter")
    expect(c.call_raw("TYPE", "inc:k"), Simple("cuckoo-cf"), "TYPE of an incomplete filter")
    # Only the header is in: CF.INFO describes the filter that is coming, but no table
    # holds memory yet.
    inc, src = info(c, "inc:k"), info(c, "inc:src")
    check(inc["Size"] < src["Size"] - 1000,
          f"an incomplete filter with no table yet holds {inc['Size']} (complete: {src['Size']})")
    del inc["Size"], src["Size"]
    expect(inc, src, "CF.INFO of an incomplete filter, Size aside")
    check(type(c.call_raw("CF.DEBUG", "inc:k")) is bytes, "CF.DEBUG of an incomplete filter")
    expect(dump(c, "inc:k"), chunks[:1], "CF.SCANDUMP of an incomplete filter: what it has")
    for it, data in chunks[1:]:
        ok(c.call_raw("CF.LOADCHUNK", "inc:k", it, data), f"CF.LOADCHUNK inc:k {it}")
    lost = missing_of(c, "inc:k", items)
    check(not lost, f"the completed filter misses {lost[:5]}")
    expect(info(c, "inc:k"), info(c, "inc:src"), "CF.INFO of the completed filter")
    expect(c.call_raw("CF.ADD", "inc:k", "new"), 1, "CF.ADD once complete")
    # A filter that stopped half way can be finished from its own dump (two chunks here).
    ok(c.call_raw("CF.RESERVE", "inc:src2", 100, "EXPANSION", 1), "inc:src2")
    add_all(c, "inc:src2", items[:300])
    chunks2 = dump(c, "inc:src2")
    check(len(chunks2) >= 3, f"inc:src2 has 2+ data chunks: {len(chunks2)}")
    replies = load(c, "inc:half", chunks2[:2])
    check(all(norm(r) == norm(Simple("OK")) for r in replies), f"half load: {replies}")
    expect(dump(c, "inc:half"), chunks2[:2], "dump of a half-loaded filter")
    replies = load(c, "inc:half", chunks2[2:])
    check(all(norm(r) == norm(Simple("OK")) for r in replies), f"rest of the load: {replies}")
    expect(dump(c, "inc:half"), chunks2, "the finished filter dumps like its source")


@section
def memory(ctx):
    kinds = ctx.bad_kinds
    with Server(extra=[("maxmemory", "64mb")]) as s, s.client() as c:
        def refused(args, error, key, kind):
            kinds.append(kind)
            expect_error(c.call_raw(*args), error, kind)
            alive(c, kind)
            key_absent(c, key, kind)

        refused(("CF.RESERVE", "big", 1073741824, "BUCKETSIZE", 4, "FPBITS", 16),
                "ERR Insufficient memory to create filter", "big",
                "absurd CF.RESERVE under maxmemory")
        # 2^30 keys at 32 bits in 4-slot buckets need more buckets than 32-bit fingerprints
        # leave index bits for (the library caps a table at 2^(58-f) buckets): the
        # library refuses the shape before any allocation.
        refused(("CF.RESERVE", "big", 1073741824, "BUCKETSIZE", 4, "FPBITS", 32),
                "ERR Could not create filter", "big",
                "CF.RESERVE with more buckets than the fingerprint leaves index bits for")
        refused(("CF.INSERT", "big", "CAPACITY", 1073741824, "ITEMS", "a"),
                "ERR Insufficient memory to create filter", "big",
                "absurd CF.INSERT CAPACITY under maxmemory")
        # A real header whose filter does not fit twice: made here, loaded again.
        ok(c.call_raw("CF.RESERVE", "m", 25000000), "CF.RESERVE m (about 45 MB)")
        hdr = c.call("CF.SCANDUMP", "m", 0)
        refused(("CF.LOADCHUNK", "m2", hdr[0], hdr[1]), "Couldn't create filter!",
                "m2", "CF.LOADCHUNK header of a filter that does not fit")
        c.call("DEL", "m")

        # Growth beyond memory: EXPANSION 32768 after a million items.
        ok(c.call_raw("CF.RESERVE", "g", 1000000, "EXPANSION", 32768), "CF.RESERVE g")
        added, errors, n = [], [], 0
        while len(errors) < 20:
            check(n < 2000000, f"no growth failure after {n} items: {info(c, 'g')}")
            batch = [f"g:{n + i}" for i in range(5000)]
            n += len(batch)
            for x, r in zip(batch, c.pipeline([("CF.ADD", "g", x) for x in batch])):
                if isinstance(r, RespError):
                    errors.append(r)
                else:
                    expect(r, 1, f"CF.ADD g {x}")
                    added.append(x)
        kinds.append("growth that does not fit in memory")
        for e in errors:
            expect_error(e, "ERR Insufficient memory", "CF.ADD that needs a 32768x sub-filter")
        st = info(c, "g")
        expect(st["Number of filters"], 1, "the failed growth left one sub-filter")
        expect(st["Number of items inserted"], len(added), "items after failed growth")
        check(len(added) >= 1000000, f"g took only {len(added)} items")
        alive(c, "growth beyond memory")
        lost = missing_of(c, "g", added)
        check(not lost, f"false negatives after failed growth: {len(lost)}: {lost[:5]}")
        # CF.INSERT answers -1 for an item whose growth does not fit, and goes on.
        for n in range(100):
            r = c.call_raw("CF.INSERT", "g", "ITEMS", *[f"gi:{n}:{i}" for i in range(2000)])
            check(isinstance(r, list) and all(norm(v) in (norm(1), norm(-1)) for v in r),
                  f"CF.INSERT when growth does not fit: {short(r)}")
            if -1 in r:
                break
        else:
            raise Failure("CF.INSERT into g: 200,000 more items and never a -1")
        expect(info(c, "g")["Number of filters"], 1, "CF.INSERT did not grow g either")

        # deny-oom: over maxmemory, adds are refused, reads and deletes still work.
        c.call("SETRANGE", "ballast", 80 * 1024 * 1024, "x")
        kinds.append("CF.ADD / CF.RESERVE / CF.LOADCHUNK over maxmemory (deny-oom)")
        for args in (("CF.ADD", "g", "x"), ("CF.RESERVE", "oom", 100),
                     ("CF.INSERT", "g", "ITEMS", "x"), ("CF.LOADCHUNK", "oom", 1, "x")):
            expect_error(c.call_raw(*args), OOM_PREFIX, f"{args[0]} over maxmemory", "prefix")
        key_absent(c, "oom", "deny-oom")
        expect(c.call_raw("CF.EXISTS", "g", added[0]), 1, "CF.EXISTS over maxmemory")
        expect(c.call_raw("CF.DEL", "g", added[0]), 1, "CF.DEL over maxmemory (not deny-oom)")
        c.call("DEL", "ballast")
        expect(c.call_raw("CF.ADD", "g", added[0]), 1, "CF.ADD once memory is back")
        check(s.alive(), "the maxmemory server is still running")


@section
def fuzz(ctx):
    rng = random.Random(SEED)
    with Server(extra=[("maxmemory", "256mb")]) as s, s.client() as c, s.client(3) as c3:
        # The canary: never passed to a write command; its dump must not change.
        ok(c.call_raw("CF.RESERVE", "fz:canary", 2000, "EXPANSION", 2), "canary")
        canary_items = [f"canary:{i}" for i in range(5000)]
        add_all(c, "fz:canary", canary_items)
        canary_dump = dump(c, "fz:canary")
        # Key kinds.
        c.call("SET", "fz:str", "string value")
        c.call("RPUSH", "fz:list", "a", "b")
        ok(c.call_raw("CF.RESERVE", "fz:src", 100, "EXPANSION", 2), "fz:src")
        add_all(c, "fz:src", [f"s{i}" for i in range(400)])
        src = dump(c, "fz:src")

        def reset_cf():
            c.call("DEL", "fz:cf")
            load(c, "fz:cf", src)

        def reset_incomplete():
            c.call("DEL", "fz:inc")
            ok(c.call_raw("CF.LOADCHUNK", "fz:inc", *src[0]), "fz:inc header")

        reset_cf()
        reset_incomplete()
        keys = ["fz:missing", "fz:cf", "fz:str", "fz:inc", "fz:list"]
        read_only = {"CF.EXISTS", "CF.MEXISTS", "CF.COUNT", "CF.INFO", "CF.DEBUG", "CF.SCANDUMP"}
        numbers = ["-1", "0", "1", "2", "4", "255", "256", "65535", "65536", str(2 ** 30),
                   str(2 ** 31), str(2 ** 63 - 1), str(-2 ** 63), "1e9", "abc", "", "3", "7",
                   "32768", "32769", "9223372036854775808", "-0", "100", "1000"]
        numbers += [str(it) for it, _ in src] + [str(src[-1][0] + 1)]
        words = ["BUCKETSIZE", "MAXITERATIONS", "EXPANSION", "FPBITS", "MAXFILTERS", "SEED",
                 "CAPACITY", "NOCREATE", "ITEMS", "bucketsize", "items", "Capacity", "FOO"]
        items = ["a", "b", "s1", "s2", "x" * 300, "\x00", "canary:1"]

        def value():
            p = rng.random()
            if p < 0.35:
                return rng.choice(numbers)
            if p < 0.55:
                return rng.choice(words)
            if p < 0.70:
                return rng.choice(items)
            if p < 0.80:
                return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
            if p < 0.92:
                return rng.choice(src)[1]
            return rng.choice(keys)

        ranges = {"BUCKETSIZE": (1, 255), "MAXITERATIONS": (1, 65535), "EXPANSION": (0, 32768),
                  "FPBITS": (4, 32), "MAXFILTERS": (1, 65536), "SEED": (0, 2 ** 63 - 1),
                  "CAPACITY": (4, 100000)}

        def number_for(option):
            """Half the time a value in the option's range (often an end of it)."""
            if rng.random() < 0.5:
                return rng.choice(numbers)
            lo, hi = ranges[option]
            return str(rng.choice([lo, hi, rng.randint(lo, min(hi, 1000)), rng.randint(lo, hi)]))

        def structured(cmd, key):
            if rng.random() < 0.5:  # the key on which the command can succeed
                key = {"CF.RESERVE": "fz:missing", "CF.LOADCHUNK": "fz:inc"}.get(cmd, "fz:cf")
            if cmd == "CF.RESERVE":
                a = [key, number_for("CAPACITY")]
                for _ in range(rng.randrange(0, 4)):
                    option = rng.choice(words[:6])
                    a += [option, number_for(option)]
                return a
            if cmd in ("CF.INSERT", "CF.INSERTNX"):
                a = [key]
                if rng.random() < 0.5:
                    a += ["CAPACITY", number_for("CAPACITY")]
                if rng.random() < 0.3:
                    a += ["NOCREATE"]
                return a + ["ITEMS"] + [rng.choice(items) for _ in range(rng.randrange(0, 5))]
            if cmd == "CF.LOADCHUNK":
                it, data = rng.choice(src[:2] if key == "fz:inc" else src)
                if rng.random() < 0.3:
                    it = rng.choice(numbers)
                if rng.random() < 0.3:
                    data = flip(data, rng.randrange(len(data)), 1 << rng.randrange(8))
                return [key, it, data]
            if cmd == "CF.SCANDUMP":
                return [key, rng.choice([0, rng.choice(src)[0], rng.choice(numbers)])]
            if cmd in ("CF.COMPACT", "CF.INFO", "CF.DEBUG"):
                return [key]
            return [key] + [rng.choice(items) for _ in range(1 if cmd != "CF.MEXISTS"
                                                            else rng.randrange(1, 6))]

        def arity_ok(cmd, argc):
            """argc counts the command name. None: depends on the options."""
            fixed = {"CF.ADD": 3, "CF.ADDNX": 3, "CF.EXISTS": 3, "CF.COUNT": 3, "CF.DEL": 3,
                     "CF.COMPACT": 2, "CF.INFO": 2, "CF.DEBUG": 2, "CF.SCANDUMP": 3,
                     "CF.LOADCHUNK": 4}
            if cmd in fixed:
                return argc == fixed[cmd]
            if cmd == "CF.MEXISTS":
                return argc >= 3
            if cmd == "CF.RESERVE":
                return argc >= 3 and argc % 2 == 1
            return None if argc >= 4 else False

        def valid_reply(cmd, r, proto):
            booleans = [True, False] if proto == 3 else [1, 0]
            if cmd in ("CF.RESERVE", "CF.COMPACT", "CF.LOADCHUNK"):
                return norm(r) == norm(Simple("OK"))
            if cmd in ("CF.ADD",):
                return norm(r) == norm(booleans[0])
            if cmd in ("CF.ADDNX", "CF.EXISTS", "CF.DEL"):
                return norm(r) in [norm(v) for v in booleans]
            if cmd == "CF.COUNT":
                return type(r) is int and r >= 0
            if cmd == "CF.MEXISTS":
                return type(r) is list and all(norm(v) in [norm(b) for b in booleans] for v in r)
            if cmd == "CF.INSERT":
                good = [norm(booleans[0]), norm(-1 if proto == 2 else False)]
                return type(r) is list and all(norm(v) in good for v in r)
            if cmd == "CF.INSERTNX":
                return type(r) is list and all(type(v) is int and v in (1, 0, -1) for v in r)
            if cmd == "CF.INFO":
                pairs = r.pairs if proto == 3 and isinstance(r, RespMap) else (
                    list(zip(r[0::2], r[1::2])) if proto == 2 and type(r) is list else None)
                return (pairs is not None and len(pairs) == len(INFO_FIELDS) and
                        [norm(k) for k, _ in pairs] == [norm(Simple(f)) for f in INFO_FIELDS]
                        and all(type(v) is int and v >= 0 for _, v in pairs))
            if cmd == "CF.DEBUG":
                return type(r) is bytes and r.startswith(b"bktsize:")
            if cmd == "CF.SCANDUMP":
                return (type(r) is list and len(r) == 2 and type(r[0]) is int and
                        (norm(r) == norm([0, None]) or (type(r[1]) is bytes and r[0] > 0)))
            return False

        stats = {"ok": 0, "error": 0, "arity": 0}
        errors_seen = {}
        t0 = time.time()
        for n in range(FUZZ_ITERATIONS):
            cmd = rng.choice(COMMANDS)
            name = rng.choice([cmd, cmd.lower(), cmd.capitalize()])
            if rng.random() < 0.85:
                key = rng.choice(keys + (["fz:canary"] if cmd in read_only else []))
            else:
                key = value()
            if rng.random() < 0.65:
                args = structured(cmd, key)
            else:
                args = [key] + [value() for _ in range(rng.randrange(0, 8))]
                args = args[:rng.randrange(0, 9)]
            if cmd not in read_only and "fz:canary" in args[:1]:
                args[0] = "fz:cf"
            proto = rng.choice((2, 3))
            what = f"fuzz #{n} (RESP{proto}): {short([name] + args, 400)}"
            try:
                r = (c3 if proto == 3 else c).call_raw(name, *args)
            except (OSError, ConnectionError) as e:
                raise Failure(f"{what}: the connection broke ({e}); server alive: "
                              f"{s.alive()}\n{s.log()[-2000:]}")
            want_arity = arity_ok(cmd, 1 + len(args))
            if isinstance(r, RespError):
                text = str(r)
                is_arity = text == arity(cmd)
                check(text in KNOWN_ERRORS or is_arity or text.startswith(OOM_PREFIX),
                      f"{what}: unknown error {text!r}")
                if want_arity is not None:
                    check(is_arity == (not want_arity),
                          f"{what}: arity error {is_arity}, expected {not want_arity}")
                stats["arity" if is_arity else "error"] += 1
                errors_seen[text] = errors_seen.get(text, 0) + 1
            else:
                check(want_arity is not False, f"{what}: accepted with a wrong arity: {short(r)}")
                check(valid_reply(cmd, r, proto), f"{what}: malformed reply {short(r)}")
                stats["ok"] += 1
            if args and args[0] == "fz:missing":
                c.call("DEL", "fz:missing")
            if args and args[0] == "fz:inc":
                reset_incomplete()
            if n % 250 == 249:  # fz:cf back to its original contents
                reset_cf()
        elapsed = time.time() - t0
        alive(c, "after the fuzz loop")
        check(s.alive(), "the fuzz server is still running")
        lost = missing_of(c, "fz:canary", canary_items)
        check(not lost, f"the canary lost items: {lost[:5]}")
        expect(dump(c, "fz:canary"), canary_dump, "the canary's dump is unchanged")
        expect(c.call_raw("GET", "fz:str"), b"string value", "fz:str unchanged")
        expect(c.call_raw("LRANGE", "fz:list", 0, -1), [b"a", b"b"], "fz:list unchanged")
        check(stats["ok"] > FUZZ_ITERATIONS // 10 and stats["error"] > FUZZ_ITERATIONS // 10,
              f"the fuzz loop should mix successes and errors: {stats}")
        print(f"    fuzz: {FUZZ_ITERATIONS} commands in {elapsed:.1f}s: {stats}; "
              f"{len(errors_seen)} distinct errors")


@section
def keyspace_events(ctx):
    """Keyspace notifications (class d, module events): every command that changes a filter
    publishes its own name, a command that changes nothing publishes nothing, and a
    CF.LOADCHUNK that removes an incomplete filter publishes del (class g)."""
    c = ctx.c2
    old = c.call("CONFIG", "GET", "notify-keyspace-events")[1]
    ok(c.call_raw("CONFIG", "SET", "notify-keyspace-events", "Edg"), "notify-keyspace-events Edg")
    sub = ctx.server.client(2)
    try:
        sub.send("PSUBSCRIBE", "__keyevent@0__:cf.*", "__keyevent@0__:del")
        for _ in range(2):
            check(sub.read()[0] == b"psubscribe", "PSUBSCRIBE confirmed")
        chunks = None
        ok(c.call_raw("CF.RESERVE", "ke:src", 100), "CF.RESERVE ke:src")
        c.call("CF.ADD", "ke:src", "x")
        chunks = dump(c, "ke:src")
        c.call("DEL", "ke:src")  # publishes del: DEL is a server command
        commands = [
            (("CF.RESERVE", "ke:a", 100), ("cf.reserve", "ke:a")),
            (("CF.ADD", "ke:a", "x"), ("cf.add", "ke:a")),
            (("CF.ADDNX", "ke:a", "x"), None),  # present: nothing changes
            (("CF.ADDNX", "ke:a", "y"), ("cf.addnx", "ke:a")),
            (("CF.INSERT", "ke:a", "ITEMS", "p", "q"), ("cf.insert", "ke:a")),
            (("CF.INSERTNX", "ke:a", "ITEMS", "p"), None),
            (("CF.INSERTNX", "ke:a", "ITEMS", "p", "r"), ("cf.insertnx", "ke:a")),
            (("CF.DEL", "ke:a", "x"), ("cf.del", "ke:a")),
            (("CF.DEL", "ke:a", "never"), None),
            (("CF.COMPACT", "ke:a"), ("cf.compact", "ke:a")),
            (("CF.EXISTS", "ke:a", "p"), None),
            (("CF.MEXISTS", "ke:a", "p", "q"), None),
            (("CF.COUNT", "ke:a", "p"), None),
            (("CF.INFO", "ke:a"), None),
            (("CF.SCANDUMP", "ke:a", 0), None),
            (("CF.ADD", "ke:auto", "z"), ("cf.add", "ke:auto")),  # creates the key
            (("CF.RESERVE", "ke:a", 100), None),  # refused: the key exists
        ]
        commands += [(("CF.LOADCHUNK", "ke:copy", it, data), ("cf.loadchunk", "ke:copy"))
                     for it, data in chunks]
        bad = bytearray(chunks[1][1])
        bad[0] ^= 1
        commands += [(("CF.LOADCHUNK", "ke:bad", *chunks[0]), ("cf.loadchunk", "ke:bad")),
                     (("CF.LOADCHUNK", "ke:bad", chunks[1][0], bytes(bad)), ("del", "ke:bad"))]
        want = [("cf.reserve", "ke:src"), ("cf.add", "ke:src"), ("del", "ke:src")]
        for cmd, event in commands:
            c.call_raw(*cmd)
            if event:
                want.append(event)
        ok(c.call_raw("CF.RESERVE", "ke:end", 10), "the last event's command")
        want.append(("cf.reserve", "ke:end"))
        got = []
        while len(got) < len(want):
            m = sub.read()
            check(m[0] == b"pmessage", f"a pmessage, got {short(m)}")
            got.append((m[2].decode().split(":", 1)[1], m[3].decode()))
            if got[-1] == ("cf.reserve", "ke:end"):
                break
        expect(got, want, "keyspace events of the CF commands")
    finally:
        sub.close()
        c.call("CONFIG", "SET", "notify-keyspace-events", old)
        c.call("DEL", "ke:a", "ke:auto", "ke:copy", "ke:end")


def info_cuckoo(c):
    text = c.call("INFO", "cuckoo").decode()
    check(text.startswith("# cuckoo\r\n"), f"INFO cuckoo: {text!r}")
    return {k: int(v) for k, v in (line.split(":") for line in text.split("\r\n")[1:] if line)}


@section
def info_section(ctx):
    """INFO cuckoo on a server of its own: the totals equal the sums over the filters (CF.INFO)
    after creation, growth, deletes, COPY, CF.LOADCHUNK, a restart from the RDB and
    FLUSHALL, and the refused adds are counted by kind."""
    fields = ["cuckoo_filters", "cuckoo_sub_filters", "cuckoo_items", "cuckoo_bytes",
              "cuckoo_adds_refused_full", "cuckoo_adds_refused_hot_item"]
    with Server() as s, s.client() as c:
        def sums():
            keys = [k.decode() for k in c.call("KEYS", "*")]
            infos = [info(c, k) for k in keys]
            return [len(keys), sum(i["Number of filters"] for i in infos),
                    sum(i["Number of items inserted"] for i in infos),
                    sum(i["Size"] for i in infos)]

        def totals(what, full, hot):
            got = info_cuckoo(c)
            expect(sorted(got), sorted(fields), f"INFO cuckoo fields ({what})")
            expect([got[f] for f in fields], sums() + [full, hot], f"INFO cuckoo ({what})")

        totals("empty server", 0, 0)
        ok(c.call_raw("CF.RESERVE", "g", 100, "EXPANSION", 2), "CF.RESERVE g")
        add_all(c, "g", [f"g:{i}" for i in range(1000)])
        check(info(c, "g")["Number of filters"] > 1, "g grew")
        totals("a grown filter", 0, 0)
        ok(c.call_raw("CF.RESERVE", "fixed", 100, "EXPANSION", 0), "CF.RESERVE fixed")
        replies = c.pipeline([("CF.ADD", "fixed", f"f:{i}") for i in range(1000)])
        refused = [r for r in replies if isinstance(r, RespError)]
        check(all(str(r) == "Filter is full" for r in refused), f"refusals: {set(refused)}")
        full = len(refused)
        check(500 < full < 900, f"{full} of 1000 adds refused by a fixed filter of 100")
        hot = sum(1 for r in c.pipeline([("CF.ADD", "g", "hot")] * 20)
                  if isinstance(r, RespError))
        check(hot > 0, "a hot item was refused")
        totals("refused adds", full, hot)
        for i in range(0, 1000, 3):
            c.call("CF.DEL", "g", f"g:{i}")
        c.call("CF.COMPACT", "g")
        expect(c.call_raw("COPY", "g", "g2"), 1, "COPY g g2")
        for it, data in dump(c, "fixed"):
            ok(c.call_raw("CF.LOADCHUNK", "fixed2", it, data), "CF.LOADCHUNK fixed2")
        expect(c.call_raw("CF.INSERT", "auto", "ITEMS", "a", "b"), [1, 1], "CF.INSERT auto")
        totals("deletes, COPY, LOADCHUNK, auto-created", full, hot)
        ok(c.call_raw("DEBUG", "RELOAD"), "DEBUG RELOAD (save, then load the RDB)")
        totals("after DEBUG RELOAD", full, hot)
        expect(c.call_raw("DEL", "g2"), 1, "DEL g2")
        totals("after DEL", full, hot)
        # SYNC: Valkey 8 flushes asynchronously by default (lazyfree-lazy-user-flush).
        ok(c.call_raw("FLUSHALL", "SYNC"), "FLUSHALL SYNC")
        totals("after FLUSHALL SYNC", full, hot)


def lazyfreed(c):
    return int(dict(line.split(":", 1) for line in c.call("INFO", "memory").decode().split("\r\n")
                    if ":" in line)["lazyfreed_objects"])


@section
def lazy_free(ctx):
    """free_effort: UNLINK and FLUSHALL ASYNC hand a large filter (1 GB here) to the server's
    lazy-free thread, and free a small one at once; the server time of the UNLINK is
    printed (measured, not asserted)."""
    with Server() as s, s.client() as c:
        ok(c.call_raw("CF.RESERVE", "small", 1000), "CF.RESERVE small")
        base = lazyfreed(c)
        expect(c.call_raw("UNLINK", "small"), 1, "UNLINK small")
        expect(lazyfreed(c), base, "a small filter is freed at once, not lazily")
        ok(c.call_raw("CF.RESERVE", "big", 650_000_000), "CF.RESERVE big")
        size = info(c, "big")["Size"]
        check(size > 1_000_000_000, f"the big filter holds {size} bytes")
        c.call("CONFIG", "RESETSTAT")
        expect(c.call_raw("UNLINK", "big"), 1, "UNLINK big")
        stats = c.call("INFO", "commandstats").decode()
        usec = re.search(r"cmdstat_unlink:calls=1,usec=(\d+)", stats)
        wait_for = harness.wait_for
        wait_for(lambda: lazyfreed(c) == base + 1, what="the lazy-free thread to free the filter")
        ok(c.call_raw("CF.RESERVE", "big2", 100_000_000), "CF.RESERVE big2")
        ok(c.call_raw("FLUSHALL", "ASYNC"), "FLUSHALL ASYNC")
        wait_for(lambda: lazyfreed(c) == base + 2, what="FLUSHALL ASYNC to free the filter")
        expect(info_cuckoo(c)["cuckoo_bytes"], 0, "INFO cuckoo after the lazy frees")
        print(f"    UNLINK of a {size / 1e9:.2f} GB filter: "
              f"{usec.group(1) if usec else '?'} us of server time")


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------

def main():
    server_bin = shutil.which(harness.SERVER)
    if not server_bin:
        print(f"FAIL: {harness.SERVER} not found (scripts/install-deps installs it; "
              "CF_REDIS_SERVER names another)")
        return 1
    try:
        import redis
    except ImportError:
        print(f"FAIL: the redis Python package is missing for {sys.executable}; install "
              "python3-redis and run this with /usr/bin/python3")
        return 1
    if not os.path.isfile(harness.MODULE):
        print(f"FAIL: the module {harness.MODULE} does not exist (build it with make, or set "
              f"CF_REDIS_MODULE); CF_TEST_SEED={SEED}")
        return 1

    only = set(sys.argv[1:])
    unknown = only - {fn.__name__ for fn in SECTIONS}
    if unknown:
        print(f"unknown section(s): {', '.join(sorted(unknown))}; sections: "
              f"{', '.join(fn.__name__ for fn in SECTIONS)}")
        return 2
    failures = []
    t_start = time.time()
    server = Server()
    ctx = None
    try:
        try:
            server.start()
            ctx = Ctx(server, redis)
        except Exception as e:  # noqa: BLE001
            print(f"FAIL: the main server did not start: {e}\nCF_TEST_SEED={SEED}")
            return 1
        for fn in SECTIONS:
            if only and fn.__name__ not in only:
                continue
            t0 = time.time()
            try:
                fn(ctx)
                print(f"ok    {fn.__name__} ({time.time() - t0:.1f}s)")
            except Exception as e:  # noqa: BLE001 - every failure is reported
                detail = (str(e) if isinstance(e, Failure)
                          else "".join(traceback.format_exception(type(e), e, e.__traceback__)))
                failures.append((fn.__name__, detail))
                print(f"FAIL  {fn.__name__} ({time.time() - t0:.1f}s): {detail}")
                if not server.alive():
                    print(f"the main server died; its log:\n{server.log()}")
                    break
        if ctx.bad_kinds:
            print(f"    bad-input kinds checked: {len(ctx.bad_kinds)}")
    finally:
        if ctx:
            ctx.close()
        server.stop()
    elapsed = time.time() - t_start
    if failures:
        print(f"\n{len(failures)} section(s) failed: {', '.join(n for n, _ in failures)} "
              f"({elapsed:.1f}s). Repeat with CF_TEST_SEED={SEED}")
        return 1
    print(f"all passed in {elapsed:.1f}s (CF_TEST_SEED={SEED})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
