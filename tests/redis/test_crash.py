#!/usr/bin/env python3
"""kill -9 loops: no acknowledged item is ever lost, for every kind of key.

A server writes every command to its AOF and syncs it before it answers (appendfsync
always), in each AOF form: with an RDB preamble, and without one (every filter rewritten as
CF.LOADCHUNK commands). Writers add to a windowed filter, a filter of RedisBloom's layout
(which grows) and one of this library's layout; AOF rewrites start now and then; the server
is killed with SIGKILL at a random moment, mid-write and at times mid-rewrite, and
restarted from its AOF. Every item whose add was acknowledged must then be found, in a key
that kept its kind (its window, its layout), and the writes go on.

Environment: CF_REDIS_MODULE, CF_REDIS_SERVER, CF_TEST_SEED, CF_TEST_SCALE (rounds). Exit 0
pass, else failure (a missing server too).
"""

import os
import random
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import RespError  # noqa: E402
import cf_state as S  # noqa: E402
from cf_state import check, ok  # noqa: E402

# The keys, how each is made: a window of an hour (nothing leaves it during the test), a
# growing filter of RedisBloom's layout, a growing one of this library's.
KEYS = {
    "win": ["CF.RESERVE", "win", 4000, "WINDOW", 3_600_000, "GENERATIONS", 4],
    "rb": ["CF.RESERVE", "rb", 500, "EXPANSION", 2, "LAYOUT", "redisbloom"],
    "nat": ["CF.RESERVE", "nat", 500, "EXPANSION", 2],
}
BATCH = 20  # items a CF.INSERT carries
REWRITE_KEY_DELAY_US = 100_000  # a rewrite's pause per key: 0.3 s for the three


class Writer(threading.Thread):
    """Adds items to every key until the server goes away; `acked` holds, per key, the
    items whose add the server acknowledged."""

    def __init__(self, port, acked, tag):
        super().__init__(daemon=True)
        self.port, self.acked, self.tag = port, acked, tag
        self.error = None

    def run(self):
        n = 0
        try:
            with harness.Client(self.port, timeout=10) as c:
                while True:
                    for key in KEYS:
                        items = [f"{self.tag}:{key}:{n + i}" for i in range(BATCH)]
                        r = c.call_raw("CF.INSERT", key, "NOCREATE", "ITEMS", *items)
                        if isinstance(r, RespError):
                            self.error = f"CF.INSERT {key}: {r}"
                            return
                        self.acked[key].extend(x for x, a in zip(items, r) if a == 1)
                    n += BATCH
        except (OSError, ConnectionError):
            return  # the server was killed


def rewrite_in_progress(c):
    return b"aof_rewrite_in_progress:1" in c.call("INFO", "persistence")


def round_trip(server, rng, acked, rnd):
    """One round: writers, maybe a rewrite, a kill -9 at a random moment, a restart, and
    the check that every acknowledged item is there."""
    w = Writer(server.port, acked, f"r{rnd}")
    w.start()
    time.sleep(rng.uniform(0.05, 0.4))
    rewriting = False
    if rng.random() < 0.6:
        with server.client() as c:
            c.call("BGREWRITEAOF")
            time.sleep(rng.uniform(0.0, 0.5))
            rewriting = rewrite_in_progress(c)
    server.proc.kill()  # SIGKILL: no shutdown, no last save
    server.proc.wait()
    w.join(10)
    check(w.error is None, f"round {rnd}: {w.error}")
    server.start(timeout=60)
    with server.client() as c:
        for key, items in acked.items():
            t = c.call("TYPE", key)
            want = "MBbloomCF" if key == "rb" else "cuckoo-cf"
            check(t == want, f"round {rnd}: after the restart {key} is of type {t!r}")
            if key == "win":
                check(re.search(rb" window:3600000 generations:4 ", c.call("CF.DEBUG", key)),
                      f"round {rnd}: after the restart {key} lost its window")
            lost = []
            for i in range(0, len(items), 500):
                part = items[i:i + 500]
                lost += [x for x, a in zip(part, c.call("CF.MEXISTS", key, *part)) if a != 1]
            check(not lost, f"round {rnd}: {len(lost)} of {len(items)} acknowledged items of "
                            f"{key} lost by a kill -9{' mid-rewrite' if rewriting else ''}: "
                            f"{lost[:5]}")
    return rewriting


def run_form(preamble, rng, rounds):
    server = harness.Server(extra=[("appendonly", "yes"), ("appendfsync", "always"),
                                   ("aof-use-rdb-preamble", "yes" if preamble else "no"),
                                   ("auto-aof-rewrite-percentage", "0"),
                                   # a rewrite that takes a while (per key), to be killed in
                                   ("rdb-key-save-delay", REWRITE_KEY_DELAY_US)])
    try:
        server.start()
        with server.client() as c:
            for cmd in KEYS.values():
                ok(c.call_raw(*cmd), " ".join(map(str, cmd)))
        acked = {k: [] for k in KEYS}
        mid = sum(round_trip(server, rng, acked, r) for r in range(rounds))
        total = sum(len(v) for v in acked.values())
        with server.client() as c:
            grown = {k: S.info_dict(c, k)["Number of filters"] for k in ("rb", "nat")}
        print(f"AOF {'with' if preamble else 'without'} an RDB preamble: {rounds} kill -9s "
              f"({mid} mid-rewrite), {total} acknowledged items, none lost; sub-filters "
              f"{grown}")
    finally:
        server.stop()


def main():
    S.require_tools()

    def body(seed):
        rng = random.Random(seed)
        rounds = harness.scaled(6, least=2)
        for preamble in (False, True):
            run_form(preamble, rng, rounds)

    S.run("test_crash", body, [])


if __name__ == "__main__":
    main()
