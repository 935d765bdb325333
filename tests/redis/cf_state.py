"""What the module's persistence/replication/cluster tests compare, and how they run.

A filter's observable state is: CF.INFO (every field), DEBUG DIGEST-VALUE, its CF.SCANDUMP
chunks (iterators and bytes), and the answers to membership queries. snapshot() captures
all of it; assert_same() compares two captures field by field with a readable message.
"""

import os
import re
import shutil
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import RespError  # noqa: E402



class TestFailure(AssertionError):
    pass


# CF.INFO comparisons where nothing but Size differed (see assert_same).
SIZE_MISMATCHES = []


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def ok(reply, what):
    """A command that must answer +OK."""
    check(reply == "OK", f"{what}: expected +OK, got {reply!r}")


def scandump(c, key):
    """Every chunk of key as (iterator, bytes), walking from 0 until [0, nil]."""
    chunks = []
    it = 0
    while True:
        r = c.call("CF.SCANDUMP", key, it)
        check(isinstance(r, list) and len(r) == 2 and isinstance(r[0], int),
              f"CF.SCANDUMP {key} {it}: malformed reply {r!r:.200}")
        nxt, data = r
        if data is None:
            check(nxt == 0, f"CF.SCANDUMP {key} {it}: end of dump with iterator {nxt}, not 0")
            return chunks
        check(isinstance(data, bytes) and len(data) > 0,
              f"CF.SCANDUMP {key} {it}: chunk is {type(data).__name__} of length "
              f"{len(data) if data else 0}")
        check(nxt > 0, f"CF.SCANDUMP {key} {it}: a chunk came with iterator {nxt}")
        check(len(chunks) < 100000, f"CF.SCANDUMP {key}: the walk does not end")
        chunks.append((nxt, data))
        it = nxt


def loadchunks(c, key, chunks):
    for it, data in chunks:
        ok(c.call_raw("CF.LOADCHUNK", key, it, data), f"CF.LOADCHUNK {key} {it} <{len(data)} B>")


def info(c, key):
    r = c.call("CF.INFO", key)
    check(isinstance(r, list) and len(r) % 2 == 0, f"CF.INFO {key}: malformed reply {r!r}")
    return list(r)


def info_dict(c, key):
    """CF.INFO's fields, and "fpbits" (the fingerprint width) and "layout" from CF.DEBUG;
    a filter of RedisBloom's layout (its type) has RedisBloom's line alone, and 8 bits."""
    r = info(c, key)
    out = {str(r[i]): r[i + 1] for i in range(0, len(r), 2)}
    line = c.call("CF.DEBUG", key)
    if c.call("TYPE", key) == "MBbloomCF":
        check(re.fullmatch(rb"bktsize:\d+ buckets:\d+ items:\d+ deletes:\d+ filters:\d+ "
                           rb"max_iterations:\d+ expansion:\d+", line) is not None,
              f"CF.DEBUG {key}: not RedisBloom's line: {line!r}")
        out["fpbits"], out["layout"] = 8, "redisbloom"
        return out
    m = re.search(rb" fpbits:(\d+) fpr:(\S+) fpr_bound:(\S+) layout:(\w+)$", line)
    check(m is not None, f"CF.DEBUG {key}: no fpbits or layout field")
    out["fpbits"] = int(m.group(1))
    out["layout"] = m.group(4).decode()
    return out


def digest(c, key):
    r = c.call("DEBUG", "DIGEST-VALUE", key)
    check(isinstance(r, list) and len(r) == 1, f"DEBUG DIGEST-VALUE {key}: {r!r}")
    return r[0]


def mexists(c, key, items, batch=5000):
    """CF.MEXISTS answers for items (0/1 list), a batch per command. (One pipeline of every
    batch is slower: with a million items the replies back up behind the requests.)"""
    out = []
    for i in range(0, len(items), batch):
        part = list(items[i:i + batch])
        r = c.call_raw("CF.MEXISTS", key, *part)
        if isinstance(r, RespError):
            raise TestFailure(f"CF.MEXISTS {key} ({len(part)} items): error {r}")
        check(isinstance(r, list) and len(r) == len(part),
              f"CF.MEXISTS {key}: {len(r) if isinstance(r, list) else r!r} answers for "
              f"{len(part)} items")
        out.extend(r)
    return out


def counts(c, key, items):
    rs = c.pipeline([["CF.COUNT", key, x] for x in items])
    for x, r in zip(items, rs):
        check(isinstance(r, int), f"CF.COUNT {key} {x!r}: {r!r}")
    return rs


def snapshot(c, key, present=(), absent=(), counted=()):
    """Everything observable about one filter key."""
    s = {
        "info": info(c, key),
        "digest": digest(c, key),
        "chunks": scandump(c, key),
    }
    complete = True
    try:
        c.call("CF.EXISTS", key, "probe")
    except RespError as e:
        check("incomplete" in str(e), f"CF.EXISTS {key}: unexpected error {e}")
        complete = False
    s["complete"] = complete
    if complete:
        s["present"] = mexists(c, key, list(present))
        s["absent"] = mexists(c, key, list(absent))
        s["count"] = counts(c, key, list(counted))
        missing = [x for x, a in zip(present, s["present"]) if a != 1]
        check(not missing, f"{key}: {len(missing)} added items not found (false negatives), "
                           f"e.g. {missing[:3]}")
    return s


def describe_chunks(chunks):
    return [(it, len(d)) for it, d in chunks]


def assert_same(a, b, what):
    """Two snapshots of what must be the same filter."""
    if a["info"] != b["info"]:
        if a["info"][:1] == ["Size"] and a["info"][2:] == b["info"][2:]:
            # Only Size: a failure too, reported at the end so that the other checks run.
            SIZE_MISMATCHES.append(f"{what}: Size {a['info'][1]} vs {b['info'][1]}")
        else:
            raise TestFailure(f"{what}: CF.INFO differs:\n  {a['info']}\n  {b['info']}")
    if a["chunks"] != b["chunks"]:
        ca, cb = a["chunks"], b["chunks"]
        detail = f"{describe_chunks(ca)} vs {describe_chunks(cb)}"
        for i, (x, y) in enumerate(zip(ca, cb)):
            if x != y:
                first = next((j for j in range(min(len(x[1]), len(y[1])))
                              if x[1][j] != y[1][j]), None)
                detail += f"; first difference in chunk {i} (iterators {x[0]}/{y[0]}), byte {first}"
                break
        raise TestFailure(f"{what}: CF.SCANDUMP chunks differ: {detail}")
    check(a["digest"] == b["digest"],
          f"{what}: DEBUG DIGEST-VALUE differs: {a['digest']!r} vs {b['digest']!r}")
    check(a["complete"] == b["complete"],
          f"{what}: complete {a['complete']} vs {b['complete']}")
    if a["complete"]:
        for field in ("present", "absent", "count"):
            if a[field] != b[field]:
                diff = sum(1 for x, y in zip(a[field], b[field]) if x != y)
                raise TestFailure(f"{what}: answers differ on {diff} of {len(a[field])} "
                                  f"{field} items")


def keys_of(c):
    return sorted(c.call("KEYS", "*"))


def dataset_snapshot(c, extra=None, default=((), ())):
    """Every key: its type, a full snapshot for the filters (extra: key -> (present,
    absent) item lists to query; default for the keys not in extra) and its expiry time
    (ms, or -1)."""
    out = {}
    extra = extra or {}
    for k in keys_of(c):
        t = c.call("TYPE", k)
        if t == "cuckoo-cf":
            present, absent = extra.get(k, default)
            out[k] = ("cuckoo-cf", snapshot(c, k, present, absent), c.call("PEXPIRETIME", k))
        else:
            out[k] = (t, c.call("DUMP", k), c.call("PEXPIRETIME", k))
    return out, c.call("DEBUG", "DIGEST")


# An incomplete filter (CF.LOADCHUNK) expires cf-load-timeout after its latest chunk, by
# the clock of each server that runs the chunk (a replica's own rule, which the primary's
# DEL overrides): two servers' expiry times of it differ by the moments between them.
EXPIRY_SLACK_MS = 5000


def assert_same_dataset(a, b, what):
    (ka, da), (kb, db) = a, b
    check(sorted(ka) == sorted(kb), f"{what}: keys differ: only in first "
                                    f"{sorted(set(ka) - set(kb))[:10]}, only in second "
                                    f"{sorted(set(kb) - set(ka))[:10]}")
    for k in sorted(ka):
        check(ka[k][0] == kb[k][0], f"{what}: key {k!r} has type {ka[k][0]} vs {kb[k][0]}")
        if ka[k][0] == "cuckoo-cf":
            assert_same(ka[k][1], kb[k][1], f"{what}, key {k!r}")
        else:
            check(ka[k][1] == kb[k][1], f"{what}: key {k!r} ({ka[k][0]}) differs")
        ea, eb = ka[k][2], kb[k][2]
        incomplete = ka[k][0] == "cuckoo-cf" and not ka[k][1]["complete"]
        if incomplete and ea >= 0 and eb >= 0:
            check(abs(ea - eb) <= EXPIRY_SLACK_MS, f"{what}: key {k!r} expires at {ea} vs {eb}")
        else:
            check(ea == eb, f"{what}: key {k!r} expires at {ea} vs {eb}")
    check(da == db, f"{what}: DEBUG DIGEST of the whole dataset differs: {da!r} vs {db!r}")


def link_up(server):
    """Has the replica `server` finished its sync with its primary (the link up, no sync
    in progress)?"""
    with server.client() as c:
        text = c.call("INFO", "replication").decode()
    return "master_link_status:up" in text and "master_sync_in_progress:0" in text


def primary_and_replica(servers):
    """A primary that writes every command to its AOF (fsync each) and a replica linked to
    it, both started and appended to `servers` (so that run() stops them); the replica's
    sync is done when this returns."""
    primary = harness.Server(extra=[("appendonly", "yes"), ("appendfsync", "always")])
    servers.append(primary)
    primary.start()
    replica = harness.Server(extra=[("replicaof", "127.0.0.1", primary.port)])
    servers.append(replica)
    replica.start()
    harness.wait_for(lambda: link_up(replica), 20, "the replica's link")
    return primary, replica


def require_tools(*tools, python_redis=False):
    """Fail (exit 1, one line saying what to install) when something the test needs is not
    there: a missing tool must not pass for a passing test (scripts/install-deps installs
    them all)."""
    for t in (harness.SERVER,) + tools:
        if not os.path.exists(t) and not shutil.which(t):
            print(f"FAIL: {t} not found (scripts/install-deps installs it)")
            sys.exit(1)
    if python_redis:
        try:
            import redis.cluster  # noqa: F401  (only whether it imports)
        except ImportError:
            print(f"FAIL: the redis Python package is not installed for {sys.executable} "
                  "(python3-redis; run the test with /usr/bin/python3)")
            sys.exit(1)
    if not os.path.exists(harness.MODULE):
        print(f"FAIL: the module {harness.MODULE} does not exist (set CF_REDIS_MODULE)")
        sys.exit(1)


def run(name, body, servers):
    """Run body(); print the seed on failure; always stop every server in `servers`
    (a list the body appends to). Exits the process."""
    seed = harness.test_seed()
    code = 0
    try:
        body(seed)
        if SIZE_MISMATCHES:
            raise TestFailure(
                f"CF.INFO Size differs between copies of the same filter (identical digest, "
                f"chunks and every other field) in {len(SIZE_MISMATCHES)} comparisons; the "
                f"same filter must report the same Size whatever its history (growth, "
                f"compaction, load). First ones:\n  " + "\n  ".join(SIZE_MISMATCHES[:8]))
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        code = 1
        traceback.print_exc()
        print(f"\nFAIL {name}: {e}\n(CF_TEST_SEED={seed:#x} reproduces the random parts)")
        for s in servers:
            if s.proc is not None and s.proc.poll() is not None:
                print(f"server on port {s.port} died ({s.proc.returncode}); log tail:\n{s.log()}")
            elif s.proc is not None:
                tail = "\n".join(s.log().splitlines()[-12:])
                print(f"--- server on port {s.port}, log tail:\n{tail}")
    finally:
        for s in servers:
            try:
                s.stop()
            except Exception:  # noqa: BLE001
                pass
    if code == 0:
        print(f"PASS {name} (CF_TEST_SEED={seed:#x})")
    sys.exit(code)
