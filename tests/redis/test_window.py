#!/usr/bin/env python3
"""Filters that forget in the module: CF.RESERVE / CF.INSERT ... WINDOW ms [GENERATIONS g],
on a primary with appendonly and a replica linked from the start.

- The window in time: items are found for the whole window after their add, and gone
  within window * G / (G - 1) even when nothing writes to the key (the sweep), with the
  primary's advances reaching the replica as CF.ADVANCE: both hold the same bytes.
- Errors: GENERATIONS without WINDOW, WINDOW with EXPANSION or LAYOUT redisbloom, values
  out of range, CF.ADVANCE on a filter without a window or to an earlier generation.
- An AOF reload (DEBUG LOADAOF) gives back the same bytes, advances included.
- COMMAND DOCS lists the new arguments; CF.DEBUG shows the window.

Environment: CF_REDIS_MODULE, CF_REDIS_SERVER. Exit 0 pass, else failure (a missing server
too).
"""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import RespError, wait_for  # noqa: E402
import cf_state as S  # noqa: E402
from cf_state import check, ok  # noqa: E402

WINDOW_MS = 600  # 3 generations of 300 ms: items go within 900 ms
ITEMS = [f"a{i}" for i in range(200)]


def debug_window(c, key):
    m = re.search(rb" window:(\d+) generations:(\d+) generation:(\d+) fpbits:",
                  c.call("CF.DEBUG", key))
    check(m is not None, f"CF.DEBUG {key} shows no window: {c.call('CF.DEBUG', key)!r}")
    return tuple(int(x) for x in m.groups())


def error_of(reply):
    return str(reply) if isinstance(reply, RespError) else None


def found(c, key, items):
    return sum(c.call("CF.MEXISTS", key, *items))


def main():
    S.require_tools()
    servers = []

    def body(seed):
        del seed  # nothing random here: the clock is the variable
        primary, replica = S.primary_and_replica(servers)
        c = primary.client()

        # Errors, and nothing made.
        for args, want in (
                (["GENERATIONS", 3], "ERR GENERATIONS is for a window: give WINDOW too"),
                (["WINDOW", 600, "EXPANSION", 2],
                 "ERR a window's generations keep one size: no EXPANSION"),
                (["WINDOW", 600, "LAYOUT", "redisbloom"],
                 "ERR the redisbloom layout has no WINDOW (LAYOUT native does)"),
                (["WINDOW", 0], "WINDOW: value must be in the range"),
                (["WINDOW", 600, "GENERATIONS", 1], "GENERATIONS: value must be in the range")):
            e = error_of(c.call_raw("CF.RESERVE", "bad", 1000, *args))
            check(e is not None and e.startswith(want), f"CF.RESERVE {args}: {e!r}")
        # A window too big for the memory left (4096 generations of 2^30 items, ~6.6 TB):
        # refused before any of it is taken.
        used = int(re.search(rb"used_memory:(\d+)", c.call("INFO", "memory")).group(1))
        e = error_of(c.call_raw("CF.RESERVE", "bad", 1 << 30, "WINDOW", 1000, "GENERATIONS",
                                4096, "BUCKETSIZE", 4))
        check(e == "ERR Insufficient memory to create filter", f"a huge window: {e!r}")
        peak = int(re.search(rb"used_memory_peak:(\d+)", c.call("INFO", "memory")).group(1))
        check(peak < used + (64 << 20), f"a refused window took memory: peak {peak}, was {used}")
        check(c.call("EXISTS", "bad") == 0, "a refused CF.RESERVE made a key")
        e = error_of(c.call_raw("CF.INSERT", "bad", "GENERATIONS", 3, "ITEMS", "x"))
        check(e is not None and "WINDOW" in e, f"CF.INSERT GENERATIONS alone: {e!r}")
        ok(c.call_raw("CF.RESERVE", "plain", 1000), "CF.RESERVE plain")
        e = error_of(c.call_raw("CF.ADVANCE", "plain", 5))
        check(e is not None and "window" in e, f"CF.ADVANCE on a plain filter: {e!r}")

        # The window in time.
        ok(c.call_raw("CF.RESERVE", "w", 1000, "WINDOW", WINDOW_MS, "GENERATIONS", 3),
           "CF.RESERVE WINDOW")
        window, generations, generation = debug_window(c, "w")
        check((window, generations) == (WINDOW_MS, 3), f"CF.DEBUG window: {window}, {generations}")
        now_ms = int(time.time() * 1000)
        check(abs(generation - now_ms * 2 // WINDOW_MS) <= 1,
              f"the first generation is {generation}, not the one due now")
        added = time.time()
        r = c.call("CF.INSERT", "w", "ITEMS", *ITEMS)
        check(r == [1] * len(ITEMS), f"CF.INSERT into the window: {r!r:.100}")
        writes = 0
        while time.time() - added < WINDOW_MS / 1000 * 0.8:  # found all through the window
            n = found(c, "w", ITEMS)
            # (the server ran the lookup before the reply came: inside the window if that
            # was before the window's end counted from before the add)
            if time.time() - added < WINDOW_MS / 1000:
                check(n == len(ITEMS), "an item missed inside the window")
            c.call("CF.ADD", "w", f"writer{writes}")  # writes advance it meanwhile
            writes += 1
            time.sleep(0.02)
        info = S.info_dict(c, "w")
        check(info["Number of filters"] == 3 and info["Expansion rate"] == 0,
              f"CF.INFO of a window: {info}")
        # Gone for reads within 900 ms of the add (they answer as at the generation due),
        # with nothing writing to the key.
        _, _, stored = debug_window(c, "w")
        bound = added + WINDOW_MS / 1000 * 1.5
        while time.time() < bound + 0.01:
            time.sleep(0.01)
        n = found(c, "w", ITEMS)
        check(n <= 2, f"{n} items still found {time.time() - added:.2f} s after their add")
        gone = time.time() - added
        # ... and the sweep drops the expired generations from the stored filter too.
        wait_for(lambda: debug_window(c, "w")[2] > stored, 5, "the sweep to move the window")
        # The replica got every advance: the same bytes, and its own clock moved nothing.
        wait_for(lambda: S.scandump(replica.client(), "w") == S.scandump(c, "w"), 5,
                 "the replica's copy of the window")
        check(debug_window(replica.client(), "w")[2] == debug_window(c, "w")[2],
              "the replica's generation differs")

        # CF.INSERT creates a window; CF.ADVANCE moves one ahead of the clock.
        r = c.call("CF.INSERT", "long", "CAPACITY", 500, "WINDOW", 3_600_000, "ITEMS", "x", "y")
        check(r == [1, 1], f"CF.INSERT WINDOW: {r!r}")
        _, _, g0 = debug_window(c, "long")
        ok(c.call_raw("CF.ADVANCE", "long", g0 + 2), "CF.ADVANCE ahead")
        check(c.call("CF.EXISTS", "long", "x") == 1, "two advances of 8 generations dropped x")
        e = error_of(c.call_raw("CF.ADVANCE", "long", g0))
        check(e is not None and "later generation" in e, f"CF.ADVANCE back: {e!r}")
        ok(c.call_raw("CF.ADVANCE", "long", g0 + 8), "CF.ADVANCE past the window")
        check(c.call("CF.EXISTS", "long", "x") == 0, "x outlived its window")
        c.call("CF.ADD", "long", "z")
        # No further ahead of the clock than a jump that drops every generation: a window
        # sent to the last generation would never forget again.
        for far in (g0 + 8 + 9, (1 << 63) - 1):
            e = error_of(c.call_raw("CF.ADVANCE", "long", far))
            check(e is not None and "ahead of the clock" in e, f"CF.ADVANCE to {far}: {e!r}")
        check(c.call("CF.EXISTS", "long", "z") == 1, "a refused CF.ADVANCE moved the window")

        # Every window's chunks load back, at every width with code of its own and
        # semi-sorted: the same chunks and the same answers (once refused at the first
        # chunk, so that an AOF rewritten without an RDB preamble lost every window).
        shapes = ([], ["FPBITS", 8], ["FPBITS", 16], ["FPBITS", 13], ["FPBITS", 32],
                  ["BUCKETSIZE", 2, "FPBITS", 12], ["SEMISORT", 1, "BUCKETSIZE", 4, "FPBITS", 13],
                  ["BUCKETSIZE", 8, "FPBITS", 8])
        for i, shape in enumerate(shapes):
            key = f"chunks{i}"
            ok(c.call_raw("CF.RESERVE", key, 300, "WINDOW", 3_600_000, "GENERATIONS", 3,
                          *shape), f"CF.RESERVE {key} {shape}")
            c.call("CF.INSERT", key, "ITEMS", *ITEMS)
            _, _, g = debug_window(c, key)
            ok(c.call_raw("CF.ADVANCE", key, g + 1), f"CF.ADVANCE {key}")
            c.call("CF.INSERT", key, "ITEMS", *ITEMS[:50])
            check(c.call("CF.DEL", key, ITEMS[0]) == 1, f"CF.DEL {key}")
            chunks = S.scandump(c, key)
            S.loadchunks(c, key + ":copy", chunks)
            check(S.scandump(c, key + ":copy") == chunks, f"{key}: the loaded chunks differ")
            check(S.info(c, key + ":copy") == S.info(c, key), f"{key}: CF.INFO differs")
            check(found(c, key + ":copy", ITEMS) == len(ITEMS), f"{key}: the copy lost items")
            check(c.call("TTL", key + ":copy") == -1, f"{key}: the complete copy expires")
        # Its module fields changed (deletes + 1, the check kept): refused when the window
        # is complete, and the incomplete key removed.
        it0, head = chunks[0]
        forged = [(it0, bytes([head[0] ^ 1]) + head[1:])] + chunks[1:]
        for it, data in forged[:-1]:
            ok(c.call_raw("CF.LOADCHUNK", "forged", it, data), "a forged window's chunk")
        e = error_of(c.call_raw("CF.LOADCHUNK", "forged", *forged[-1]))
        check(e is not None and e.startswith("Couldn't load chunk!"), f"forged fields: {e!r}")
        check(c.call("EXISTS", "forged") == 0, "the forged window was kept")

        # An AOF rewritten without an RDB preamble (CF.LOADCHUNK commands), reloaded: every
        # window is back, the same bytes.
        keys = ["long"] + [f"chunks{i}" for i in range(len(shapes))]
        before = {k: S.scandump(c, k) for k in keys}
        ok(c.call_raw("CONFIG", "SET", "aof-use-rdb-preamble", "no"), "no preamble")
        c.call("BGREWRITEAOF")
        wait_for(lambda: b"aof_rewrite_in_progress:0" in c.call("INFO", "persistence")
                 and b"aof_rewrite_scheduled:0" in c.call("INFO", "persistence"), 20,
                 "the AOF rewrite")
        ok(c.call_raw("DEBUG", "LOADAOF"), "DEBUG LOADAOF of the rewritten AOF")
        for k in keys:
            check(S.scandump(c, k) == before[k], f"{k}: lost or changed by the AOF rewrite")
        ok(c.call_raw("CONFIG", "SET", "aof-use-rdb-preamble", "yes"), "the preamble again")
        # A replica that joins now gets every window by a full sync: the same bytes.
        late = harness.Server(extra=[("replicaof", "127.0.0.1", primary.port)])
        servers.append(late)
        late.start()
        wait_for(lambda: S.link_up(late), 20, "the late replica's full sync")
        with late.client() as cl:
            for k in keys:
                check(S.scandump(cl, k) == before[k], f"{k}: differs after a full sync")

        # An AOF reload gives the same bytes (the long window: the clock moves nothing).
        before = S.scandump(c, "long")
        ok(c.call_raw("DEBUG", "LOADAOF"), "DEBUG LOADAOF")
        check(S.scandump(c, "long") == before, "the AOF reload changed the window")
        check(c.call("CF.EXISTS", "long", "z") == 1 and c.call("CF.EXISTS", "long", "x") == 0,
              "the reloaded window answers differently")

        # COMMAND DOCS
        docs = c.call("COMMAND", "DOCS", "CF.RESERVE")
        check(b"window" in repr(docs).encode() and b"generations" in repr(docs).encode(),
              "COMMAND DOCS CF.RESERVE lacks WINDOW or GENERATIONS")
        check(c.call("COMMAND", "DOCS", "CF.ADVANCE") != [], "no COMMAND DOCS for CF.ADVANCE")
        print(f"window: items not found {gone:.2f} s after their add (bound "
              f"{WINDOW_MS * 1.5 / 1000:.2f} s)")
        c.close()

    S.run("test_window", body, servers)


if __name__ == "__main__":
    main()
