#!/usr/bin/env python3
"""The cuckoo filter module in a real 3-node Redis Cluster on loopback.

Three redis-server processes (cluster-enabled, module loaded, free ports for clients and
the cluster bus), joined with `redis-cli --cluster create`. Through redis-py's
RedisCluster: 200 filters spread over every node (checked with CLUSTER KEYSLOT and each
node's keys), created by CF.RESERVE with options and by auto-creating CF.ADD / CF.INSERT,
filled through execute_command, the .cf() helper and a cluster pipeline; every item must
be found (CF.EXISTS, CF.MEXISTS, CF.COUNT) and CF.INFO must count them exactly.
The server routes CF commands by their key: COMMAND GETKEYS returns it, and a node that
does not own the slot answers MOVED. A filter is copied with CF.SCANDUMP / CF.LOADCHUNK
between keys on different nodes, CF.MERGE merges keys of one slot and is refused across
slots (CROSSSLOT), and one slot holding filters is migrated to another node
(CLUSTER SETSLOT + MIGRATE, i.e. DUMP / RESTORE): same digest and answers afterwards.

Environment: CF_REDIS_MODULE, CF_REDIS_SERVER, CF_REDIS_CLI, CF_TEST_SEED. Exit 0 pass, else
failure (a missing server, CLI or redis-py too).
"""

import logging
import os
import random
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import Client, RespError, Server, wait_for  # noqa: E402
import cf_state as S  # noqa: E402
from cf_state import check, ok  # noqa: E402

NKEYS = 200


def cluster_info(port):
    with Client(port) as c:
        text = c.call("CLUSTER", "INFO").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def slot_owners(port):
    """slot -> client port of the node that serves it."""
    owners = {}
    with Client(port) as c:
        for start, end, master, *_ in c.call("CLUSTER", "SLOTS"):
            for s in range(start, end + 1):
                owners[s] = master[1]
    return owners


def start_cluster(servers):
    nodes = []
    for _ in range(3):
        port = harness.free_port()
        nodes.append(Server(port=port, extra=[
            ("cluster-enabled", "yes"),
            ("cluster-config-file", f"nodes-{port}.conf"),
            ("cluster-node-timeout", 5000),
            ("cluster-port", harness.free_port()),  # port + 10000 may not exist
        ]))
    servers.extend(nodes)
    for n in nodes:
        n.start()
    cmd = [shutil.which(harness.CLI) or harness.CLI, "--cluster", "create"]
    cmd += [f"127.0.0.1:{n.port}" for n in nodes] + ["--cluster-replicas", "0", "--cluster-yes"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode(errors="replace")
    check(p.returncode == 0 and "All 16384 slots covered" in out,
          f"redis-cli --cluster create failed ({p.returncode}):\n{out[-3000:]}")

    def ready():
        for n in nodes:
            i = cluster_info(n.port)
            if i.get("cluster_state") != "ok" or i.get("cluster_known_nodes") != "3" or \
                    i.get("cluster_slots_ok") != "16384":
                return False
        return True
    wait_for(ready, 30, "cluster_state:ok on every node")
    return nodes


def check_getkeys(nodes):
    cases = [
        ["CF.RESERVE", "kk", 100], ["CF.RESERVE", "kk", 100, "BUCKETSIZE", 4],
        ["CF.ADD", "kk", "x"], ["CF.ADDNX", "kk", "x"],
        ["CF.INSERT", "kk", "ITEMS", "a", "b"], ["CF.INSERTNX", "kk", "CAPACITY", 10, "ITEMS", "a"],
        ["CF.EXISTS", "kk", "x"], ["CF.MEXISTS", "kk", "a", "b", "c"], ["CF.COUNT", "kk", "x"],
        ["CF.DEL", "kk", "x"], ["CF.COMPACT", "kk"], ["CF.INFO", "kk"], ["CF.DEBUG", "kk"],
        ["CF.SCANDUMP", "kk", 0], ["CF.LOADCHUNK", "kk", 1, "data"],
    ]
    with Client(nodes[0].port) as c:
        r = c.call_raw("COMMAND", "GETKEYS", "CF.MERGE", "kk", "k1", "k2")
        check(r == [b"kk", b"k1", b"k2"], f"COMMAND GETKEYS CF.MERGE: {r!r}")
    with Client(nodes[0].port) as c:
        for cmd in cases:
            r = c.call_raw("COMMAND", "GETKEYS", *cmd)
            check(r == [b"kk"], f"COMMAND GETKEYS {' '.join(map(str, cmd))}: {r!r}")


def check_moved(nodes, owners, keys):
    """A node that does not serve a key's slot redirects every CF command on it."""
    by_port = {n.port: n for n in nodes}
    for key in keys[:20]:
        with Client(by_port[owners[key]].port) as c:
            slot = c.call("CLUSTER", "KEYSLOT", key)
        wrong = next(n for n in nodes if n.port != owners[key])
        with wrong.client() as c:
            for cmd in (["CF.ADD", key, "x"], ["CF.EXISTS", key, "x"], ["CF.INFO", key],
                        ["CF.RESERVE", key, 100], ["CF.SCANDUMP", key, 0]):
                r = c.call_raw(*cmd)
                want = f"MOVED {slot} 127.0.0.1:{owners[key]}"
                check(isinstance(r, RespError) and str(r) == want,
                      f"{' '.join(map(str, cmd))} on a node without slot {slot}: {r!r}")


def main():
    S.require_tools(harness.CLI, python_redis=True)
    from redis.cluster import RedisCluster
    servers = []

    def body(seed):
        rng = random.Random(seed)
        t0 = time.time()
        nodes = start_cluster(servers)
        t1 = time.time()
        check_getkeys(nodes)
        rc = RedisCluster(host="127.0.0.1", port=nodes[0].port)
        try:
            run_cluster(rc, nodes, rng)
        finally:
            rc.close()
        print(f"cluster up in {t1 - t0:.1f}s, checks {time.time() - t1:.1f}s")

    S.run("test_cluster", body, servers)


def run_cluster(rc, nodes, rng):
    keys = [f"filter:{i}" for i in range(NKEYS)]
    with nodes[0].client() as c:
        slots = {k: c.call("CLUSTER", "KEYSLOT", k) for k in keys}
    owners_by_slot = slot_owners(nodes[0].port)
    owners = {k: owners_by_slot[slots[k]] for k in keys}
    check(len(set(owners.values())) == 3, f"the keys' slots are not on all 3 nodes: {owners}")

    # Creation: a third by CF.RESERVE with options, a third by CF.ADD, a third by CF.INSERT.
    added = {k: [] for k in keys}   # items that must be found
    stored = {k: 0 for k in keys}   # how many of them CF.INFO must count
    cf = rc.cf()
    for i, k in enumerate(keys):
        mode = i % 3
        if mode == 0:
            opts = []
            if rng.random() < 0.5:
                opts += ["BUCKETSIZE", rng.choice([1, 2, 4, 8])]
            if rng.random() < 0.5:
                opts += ["EXPANSION", rng.choice([1, 2])]
            if rng.random() < 0.5:
                opts += ["FPBITS", rng.choice([8, 12, 16, 24])]
            r = rc.execute_command("CF.RESERVE", k, rng.randrange(50, 5000), *opts)
            check(r in (b"OK", "OK", True), f"CF.RESERVE {k}: {r!r}")
        elif mode == 1:
            x = f"{k}/first"
            check(rc.execute_command("CF.ADD", k, x) == 1, f"CF.ADD {k} (auto-create)")
            added[k].append(x)
            stored[k] += 1
        else:
            xs = [f"{k}/first{j}" for j in range(3)]
            r = rc.execute_command("CF.INSERT", k, "CAPACITY", 300, "ITEMS", *xs)
            check(list(r) == [1, 1, 1], f"CF.INSERT {k} (auto-create): {r!r}")
            added[k].extend(xs)
            stored[k] += 3

    # Where the keys are: each node holds exactly the keys of its slots.
    by_port = {n.port: n for n in nodes}
    total = 0
    for n in nodes:
        with n.client() as c:
            mine = sorted(k.decode() for k in c.call("KEYS", "*"))
            total += c.call("DBSIZE")
        want = sorted(k for k in keys if owners[k] == n.port)
        check(mine == want, f"node {n.port} holds {len(mine)} keys, its slots {len(want)}")
        check(len(mine) > 20, f"node {n.port} holds only {len(mine)} filters")
    check(total == NKEYS, f"DBSIZE adds up to {total}, not {NKEYS}")

    # Items through every client path: execute_command, the .cf() helper, a pipeline.
    for i, k in enumerate(keys):
        xs = [f"{k}/{rng.getrandbits(48):012x}" for _ in range(rng.randrange(20, 60))]
        path = i % 4
        if path == 0:
            rs = [rc.execute_command("CF.ADD", k, x) for x in xs]
        elif path == 1:
            rs = [cf.add(k, x) for x in xs]
        elif path == 2:
            rs = list(rc.execute_command("CF.INSERT", k, "ITEMS", *xs))
        else:
            pipe = rc.pipeline()
            for x in xs:
                pipe.execute_command("CF.ADDNX", k, x)
            rs = pipe.execute()
        # (CF.ADDNX answers 0 for a new item that is a false positive: found, not stored)
        check(all(r in (1, True) or (path == 3 and r == 0) for r in rs),
              f"adds to {k} (path {path}): {rs}")
        added[k].extend(xs)
        stored[k] += sum(1 for r in rs if r in (1, True))

    # Every item is found, and CF.INFO counts them.
    absent = [f"absent/{i}" for i in range(300)]
    fp = 0
    for i, k in enumerate(keys):
        xs = added[k]
        r = rc.execute_command("CF.MEXISTS", k, *xs)
        check(list(r) == [1] * len(xs), f"CF.MEXISTS {k}: {sum(1 for a in r if a != 1)} missing")
        if i % 10 == 0:
            for x in xs[:5]:
                check(rc.execute_command("CF.EXISTS", k, x) == 1, f"CF.EXISTS {k} {x}")
                check(cf.exists(k, x) in (1, True), f".cf().exists {k} {x}")
                check(rc.execute_command("CF.COUNT", k, x) >= 1, f"CF.COUNT {k} {x}")
        fp += sum(rc.execute_command("CF.MEXISTS", k, *absent[:30]))
        # (.cf() installs redis-py's CF.INFO reply parser on the client: CFInfo objects)
        n = cf.info(k).insertedNum
        check(n == stored[k], f"CF.INFO {k} through the cluster: {n} items, stored {stored[k]}")
        with by_port[owners[k]].client() as c:
            n = S.info_dict(c, k)["Number of items inserted"]
        check(n == stored[k], f"CF.INFO {k} on its node: {n} items, stored {stored[k]}")
    check(fp < NKEYS * 30 // 20, f"{fp} of {NKEYS * 30} absent items answered 1")

    check_moved(nodes, owners, keys)

    # A chunked copy between keys on different nodes, through the cluster client.
    src = keys[0]
    dst = next(f"copy:{i}" for i in range(1000)
               if owners_by_slot[rc.keyslot(f"copy:{i}")] != owners[src])
    it = 0
    while True:
        nxt, data = rc.execute_command("CF.SCANDUMP", src, it)
        if data is None:
            break
        r = rc.execute_command("CF.LOADCHUNK", dst, nxt, data)
        check(r in (b"OK", "OK", True), f"CF.LOADCHUNK {dst} {nxt}: {r!r}")
        it = nxt
    r = rc.execute_command("CF.MEXISTS", dst, *added[src])
    check(list(r) == [1] * len(added[src]), f"the chunked copy {dst} misses items")
    with by_port[owners[src]].client() as a, \
            by_port[owners_by_slot[rc.keyslot(dst)]].client() as b:
        S.assert_same(S.snapshot(a, src, added[src], absent),
                      S.snapshot(b, dst, added[src], absent),
                      f"{src} copied to {dst} on another node")

    # CF.MERGE: keys of one slot (a hash tag) merge on their node; keys of two slots are
    # refused by the server (CROSSSLOT) before the module runs.
    rc.execute_command("CF.RESERVE", "{wk}:tmpl", 5000)
    for day in ("mon", "tue"):
        rc.execute_command("COPY", "{wk}:tmpl", f"{{wk}}:{day}")
        rc.execute_command("CF.INSERT", f"{{wk}}:{day}", "ITEMS",
                           *[f"{day}{i}" for i in range(100)])
    r = rc.execute_command("CF.MERGE", "{wk}:all", "{wk}:mon", "{wk}:tue")
    check(r in (b"OK", "OK", True), f"CF.MERGE in a slot: {r!r}")
    r = rc.execute_command("CF.MEXISTS", "{wk}:all", *[f"{d}{i}" for d in ("mon", "tue")
                                                        for i in range(100)])
    check(list(r) == [1] * 200, "CF.MERGE in a cluster lost an item")
    with Client(nodes[0].port) as c:
        r = c.call_raw("CF.MERGE", "{wk}:all", "{other}:x")
    check(isinstance(r, RespError) and str(r).startswith("CROSSSLOT"),
          f"CF.MERGE across slots: {r!r}")

    migrate_slot(rc, nodes, keys, owners, slots, added, absent)


def migrate_slot(rc, nodes, keys, owners, slots, added, absent):
    """Move the slot of one filter to another node with MIGRATE (DUMP / RESTORE)."""
    key = keys[1]
    slot = slots[key]
    moving = [k for k in keys if slots[k] == slot]
    src = next(n for n in nodes if n.port == owners[key])
    dst = next(n for n in nodes if n.port != owners[key])
    ids = {}
    for n in nodes:
        with n.client() as c:
            ids[n.port] = c.call("CLUSTER", "MYID").decode()
    with src.client() as c:
        before = {k: S.snapshot(c, k, added[k], absent) for k in moving}
    with dst.client() as c:
        ok(c.call("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[src.port]), "SETSLOT IMPORTING")
    with src.client() as c:
        ok(c.call("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dst.port]), "SETSLOT MIGRATING")
        in_slot = sorted(k.decode() for k in c.call("CLUSTER", "GETKEYSINSLOT", slot, 100))
        check(in_slot == sorted(moving), f"slot {slot} holds {in_slot}, want {moving}")
        ok(c.call("MIGRATE", "127.0.0.1", dst.port, "", 0, 10000, "KEYS", *moving), "MIGRATE")
        check(c.call("CLUSTER", "COUNTKEYSINSLOT", slot) == 0, "MIGRATE left keys behind")
    for n in [dst, src] + [n for n in nodes if n not in (src, dst)]:
        with n.client() as c:
            ok(c.call("CLUSTER", "SETSLOT", slot, "NODE", ids[dst.port]), "SETSLOT NODE")
    with dst.client() as c:
        for k in moving:
            S.assert_same(before[k], S.snapshot(c, k, added[k], absent),
                          f"{k} migrated from node {src.port} to {dst.port}")
    # The cluster client follows the MOVED redirection and finds everything there. (redis-py
    # logs each redirection it follows with a traceback: expected here, so not shown.)
    logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)
    for k in moving:
        r = rc.execute_command("CF.MEXISTS", k, *added[k])
        check(list(r) == [1] * len(added[k]), f"{k} after the migration: items missing")
        check(rc.execute_command("CF.ADD", k, "after-migration") == 1, f"CF.ADD {k} after")
    with dst.client() as c:
        check(c.call("CF.EXISTS", key, "after-migration") == 1, "the add went to the new node")


if __name__ == "__main__":
    main()
