#!/usr/bin/env python3
"""CF.MERGE destkey srckey [srckey ...], on a primary with appendonly and a replica linked
from the start.

- Filters copied from one empty filter (COPY) merge: every item of each source is found
  in the destination, counts add up (the merge's count of an item is the sum of the
  sources' counts, at least 2 for an item of two sources), CF.INFO's item
  count is the sum; a missing destination starts as an empty filter like the first
  source; a merge into an existing destination keeps its items.
- The replica holds the same bytes (CF.SCANDUMP) as the primary after each merge, and
  an AOF reload (DEBUG LOADAOF) gives them back.
- Refusals change nothing (the destination's bytes are compared): filters made apart
  (their secret seeds differ), a missing source, a source of another type, a key merged
  with itself, a fixed destination without room, and a list of sources whose last one
  does not merge (all or nothing: the earlier sources are not merged either).
- COMMAND INFO: arity -3, keys from 1 to the last, two key specs; COMMAND GETKEYS; the
  ACL categories where the server has module categories.

Environment: CF_REDIS_MODULE, CF_REDIS_SERVER. Exit 0 pass, else failure (a missing server
too).
"""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import RespError, wait_for  # noqa: E402
import cf_state as S  # noqa: E402
from cf_state import check, ok  # noqa: E402


def error_of(reply):
    return str(reply) if isinstance(reply, RespError) else None


def refused(c, args, want):
    dest = args[0]
    before = c.call("DUMP", dest)
    e = error_of(c.call_raw("CF.MERGE", *args))
    check(e is not None and want in e, f"CF.MERGE {args}: {e!r}, want {want!r}")
    after = c.call("DUMP", dest)
    check(before == after, f"a refused CF.MERGE {args} changed {dest}")


def main():
    S.require_tools()
    servers = []

    def body(seed):
        rng = random.Random(seed)
        primary, replica = S.primary_and_replica(servers)
        c = primary.client()

        # Parts copied from one empty filter share its seed and shape.
        ok(c.call_raw("CF.RESERVE", "{m}tmpl", 20000), "CF.RESERVE the template")
        items = {}
        for name in ("{m}a", "{m}b", "{m}c"):
            check(c.call("COPY", "{m}tmpl", name) == 1, f"COPY the template to {name}")
            items[name] = [f"{name}-{rng.getrandbits(40):x}" for _ in range(2000)]
            r = c.call("CF.INSERT", name, "ITEMS", *items[name])
            check(r == [1] * 2000, f"CF.INSERT {name}: {r!r:.80}")
        shared = items["{m}a"][:50]
        check(c.call("CF.INSERT", "{m}b", "ITEMS", *shared) == [1] * 50, "CF.INSERT shared")

        # A missing destination: an empty filter like the first source, then the sources.
        ok(c.call_raw("CF.MERGE", "{m}all", "{m}a", "{m}b"), "CF.MERGE into a new key")
        every = items["{m}a"] + items["{m}b"]
        check(sum(S.mexists(c, "{m}all", every)) == len(every),
              "an item of a source is not found in the merge")
        # CF.COUNT counts the matching fingerprints of an item's two buckets, so another
        # item of the same fingerprint and buckets adds to it (the filter's seed is random).
        # Those entries come from the sources whatever bucket the merge put them in: the
        # merge's count is exactly the sum of the sources' counts, and at least the truth.
        counted = shared + items["{m}a"][50:60]
        counts = S.counts(c, "{m}all", counted)
        sums = [a + b for a, b in zip(S.counts(c, "{m}a", counted),
                                      S.counts(c, "{m}b", counted))]
        check(counts == sums, f"counts after the merge: {counts}, the sources': {sums}")
        check(all(n >= want for n, want in zip(counts, [2] * 50 + [1] * 10)),
              f"counts after the merge below the items added: {counts}")
        info = S.info_dict(c, "{m}all")
        a_info = S.info_dict(c, "{m}a")
        check(info["Number of items inserted"] == 4050,
              f"CF.INFO items of the merge: {info['Number of items inserted']}")
        check(info["Number of buckets"] == a_info["Number of buckets"],
              "the new destination is not shaped like the first source")
        # Into an existing destination: it keeps its own items.
        ok(c.call_raw("CF.MERGE", "{m}all", "{m}c"), "CF.MERGE into an existing key")
        every += items["{m}c"]
        check(sum(S.mexists(c, "{m}all", every)) == len(every), "an item is lost by a merge")
        check(S.info_dict(c, "{m}all")["Number of items inserted"] == 6050,
              "CF.INFO items after the second merge")

        # Refusals.
        ok(c.call_raw("CF.RESERVE", "{m}apart", 20000), "CF.RESERVE a filter made apart")
        c.call("CF.ADD", "{m}apart", "x")
        refused(c, ["{m}all", "{m}apart"], "ERR seeds differ")
        refused(c, ["{m}all", "{m}nothing"], "ERR source key not found")
        c.call("SET", "{m}string", "v")
        refused(c, ["{m}all", "{m}string"], "WRONGTYPE")
        refused(c, ["{m}string", "{m}a"], "WRONGTYPE")
        refused(c, ["{m}all", "{m}all"], "itself")
        refused(c, ["{m}all", "{m}a", "{m}b", "{m}apart"], "ERR seeds differ")
        ok(c.call_raw("CF.RESERVE", "{m}small", 1000, "EXPANSION", 0), "CF.RESERVE fixed")
        check(c.call("COPY", "{m}small", "{m}small2") == 1, "COPY fixed")
        for name in ("{m}small", "{m}small2"):
            c.call("CF.INSERT", name, "ITEMS", *[f"{name}{i}" for i in range(700)])
        refused(c, ["{m}small", "{m}small2"], "do not fit")
        check(c.call("EXISTS", "{m}nowhere") == 0, "nothing made")
        refused(c, ["{m}nowhere", "{m}apart", "{m}a"], "ERR seeds differ")
        check(c.call("EXISTS", "{m}nowhere") == 0, "a refused merge made its destination")

        # The replica and the AOF hold the same bytes.
        def replica_has_it():
            try:  # the replica may not have had the key's writes yet
                return S.scandump(replica.client(), "{m}all") == S.scandump(c, "{m}all")
            except RespError:
                return False
        wait_for(replica_has_it, 10, "the replica's copy of the merge")
        before = S.scandump(c, "{m}all")
        ok(c.call_raw("DEBUG", "LOADAOF"), "DEBUG LOADAOF")
        check(S.scandump(c, "{m}all") == before, "the AOF reload changed the merged filter")

        # COMMAND INFO and GETKEYS.
        entry = c.call("COMMAND", "INFO", "CF.MERGE")[0]
        check(entry[1] == -3 and entry[3:6] == [1, -1, 1],
              f"COMMAND INFO CF.MERGE arity/keys: {entry[1]} {entry[3:6]}")
        check(len(entry[8]) == 2, f"COMMAND INFO CF.MERGE key specs: {entry[8]!r:.200}")
        keys = c.call("COMMAND", "GETKEYS", "CF.MERGE", "d", "s1", "s2")
        check(keys == [b"d", b"s1", b"s2"], f"COMMAND GETKEYS CF.MERGE: {keys}")
        acl = sorted(str(x) for x in entry[6])
        check(acl in ([], ["@cuckoo", "@slow", "@write"]), f"CF.MERGE ACL categories: {acl}")
        check(c.call("COMMAND", "DOCS", "CF.MERGE") != [], "no COMMAND DOCS for CF.MERGE")
        c.close()

    S.run("test_merge", body, servers)


if __name__ == "__main__":
    main()
