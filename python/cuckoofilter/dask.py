"""Build one cuckoo filter from a Dask collection, on whatever cluster Dask runs on.

    import dask.bag as db
    from distributed import Client, LocalCluster
    import cuckoofilter.dask

    client = Client(LocalCluster(n_workers=4))
    urls = db.read_text("logs/*.txt").map(str.strip)
    f = cuckoofilter.dask.build(urls, capacity=100_000_000, fpr=0.001, progress=True)
    f.save("urls.cf")

The filter holds the distinct keys of the collection, and its bytes are those that
`cuckoo build --seed S --capacity N` writes for the same keys and options (a key in two
partitions is stored once).

A segmented filter (the default from 2^22 buckets, about 16M keys; segmented=True at any
size) is built without merges: each partition's keys are hashed where they are, and the
8-byte hashes travel to the task of the range of segments they fall in (a shuffle of the
hashes, never of filters); each range task fills the table of its segments alone, and the
ranges are put together. No fingerprint is inserted twice, and a worker holds its ranges'
tables and hashes, not the filter. Any other filter is filled by one task from the hashes
of every partition.

Keys are what CuckooFilter.add takes: bytes, str (UTF-8) and ints in [0, 2**64) (their
8 bytes, little-endian); numpy integer arrays and integer columns are taken as such ints.

Filter files made alike merge range by range of segments, on the workers:

    f = cuckoofilter.dask.merge(["monday.cf", "tuesday.cf", "wednesday.cf"])

Each task reads the same range of segments of every file (memory-mapped: a worker holds
its ranges, not the filters) and adds the other files' fingerprints of that range to the
first's; the ranges are put together. The bytes are those CuckooFilter.merge gives
merging the files in order into a copy of the first (`cuckoo merge` likewise).
"""

import os
import secrets

from . import CuckooFilter, FilterFull

__all__ = ["build", "merge"]

# Pieces of hashes joined by one task on the way to the task that fills an unsegmented
# filter: few enough that a worker holds them at once.
DEFAULT_SPLIT_EVERY = 8


def _keys_of(part):
    """A partition's keys in a form the filter's batch calls take: a uint64 buffer for
    integers (numpy arrays, integer columns), else a list."""
    import numpy as np

    values = getattr(part, "values", part)  # a pandas Series: its values
    if isinstance(values, np.ndarray):
        if values.dtype.kind in "iu":
            if values.dtype.kind == "i" and values.size and values.min() < 0:
                raise ValueError("integer keys must be in [0, 2**64)")
            return np.ascontiguousarray(values, dtype=np.uint64).ravel()
        return values.ravel().tolist()
    return list(values)


def _hashes(part, settings):
    """A partition's hashes (8 bytes each), as the filter of `settings` makes them."""
    probe = CuckooFilter(1, **{**settings, "segmented": False, "concurrent": False})
    return probe.hashes(_keys_of(part))


def _split(part, ranges, capacity, settings):
    """A partition's hashes, one piece per range of segments."""
    return tuple(CuckooFilter._split_hashes(_keys_of(part), ranges, capacity, **settings))


def _join(*pieces):
    return b"".join(pieces)


def _fill_range(first, end, tag_bits, capacity, settings, *pieces):
    """The table of segments [first, end) holding the distinct hashes of the pieces, and
    those that found no room there (their count, the first of them)."""
    hashes = CuckooFilter._sort_hashes(b"".join(pieces), tag_bits, 1)
    table, unplaced, first_unplaced = CuckooFilter._build_segments(first, end, hashes, capacity,
                                                                   **settings)
    return first, end, table, unplaced, first_unplaced


def _fill_whole(capacity, tag_bits, settings, hashes):
    f = CuckooFilter(capacity, **{**settings, "concurrent": False})
    _, full = f._build_hashes(CuckooFilter._sort_hashes(hashes, tag_bits, 0), 0)
    if full:
        raise FilterFull(f"{full} keys did not fit in a filter of capacity {capacity}")
    return f


def _assemble(capacity, settings, *parts):
    """The ranges put together; the keys that found no room in their segments to the
    stash, the first ones in key order (as one add after another stashes them), and
    FilterFull if more did than it holds."""
    f = CuckooFilter(capacity, **{**settings, "concurrent": False})
    for first, end, table, _, _ in parts:
        f._put_segments(first, end, table)
    unplaced = sum(part[3] for part in parts)
    stashed = f._stash_unplaced(b"".join(part[4] for part in parts))
    if unplaced > stashed:
        raise FilterFull(f"{unplaced - stashed} keys did not fit in a filter of capacity "
                         f"{capacity}")
    return f


def _verify(path):
    """Raises what CuckooFilter.open raises for a file that fails its checksums."""
    CuckooFilter.open(path)


def _merge_range(paths, first, end, *verified):
    """Segments [first, end) of the first filter of `paths` with those of the others added:
    the table, and for each other filter the fingerprints that found no room (the count
    and first hashes of its table's, the stash positions of its stash entries')."""
    del verified  # (the files' checks, which this task waits for)
    filters = [CuckooFilter.open(p, verify=False) for p in paths]
    dst = bytearray(filters[0]._get_segments(first, end))
    lost = []
    for f in filters[1:]:
        count, firsts = filters[0]._merge_segments(first, end, dst, f._get_segments(first, end),
                                                   b"")
        stash = [(i, h) for i, (h, segment) in enumerate(f._stash_hashes())
                 if first <= segment < end]
        if not stash:
            lost.append((count, firsts, 0, []))
            continue
        hashes = b"".join(h.to_bytes(8, "little") for _, h in stash)
        n, out = filters[0]._merge_segments(first, end, dst, None, hashes)
        # which stash entries found no room: the reported hashes, in their order
        positions, at = [], 0
        for k in range(min(n, len(out) // 8)):
            h = int.from_bytes(out[8 * k:8 * k + 8], "little")
            while stash[at][1] != h:
                at += 1
            positions.append(stash[at][0])
            at += 1
        lost.append((count, firsts, n, positions))
    return first, end, bytes(dst), lost


def _assemble_merge(filters, parts):
    """The ranges put together, then the stash: the first filter's entries, then filter by
    filter what found no room (its table's in range order, then its stash entries' in
    stash order), as cf_merge would have stashed them; FilterFull if they do not fit."""
    f = CuckooFilter.empty_like(filters[0], concurrent=False)
    for first, end, table, _ in parts:
        f._put_segments(first, end, table)
    order = [h for h, _ in filters[0]._stash_hashes()]
    needed = len(order)
    for i, src in enumerate(filters[1:]):
        lost_positions = set()
        for part in parts:  # in range order
            count, firsts, n, positions = part[3][i]
            needed += count + n
            order += [int.from_bytes(firsts[k:k + 8], "little") for k in range(0, len(firsts), 8)]
            lost_positions.update(positions)
        stash = src._stash_hashes()
        order += [stash[k][0] for k in sorted(lost_positions)]
    stashed = f._stash_unplaced(b"".join(h.to_bytes(8, "little") for h in order))
    if needed > stashed:
        raise FilterFull(f"{needed - stashed} fingerprints did not fit: the merged filters "
                         "hold more than the first one's capacity")
    return f


def _partitions(collection):
    """The collection's partitions as dask.delayed objects."""
    import dask.array as da
    import dask.bag as db
    import dask.dataframe as dd

    if isinstance(collection, db.Bag):
        return list(collection.to_delayed())
    if isinstance(collection, da.Array):
        if collection.ndim != 1:
            raise ValueError("build() takes a one-dimensional array (ravel it first)")
        return list(collection.to_delayed().ravel())
    if isinstance(collection, dd.Series):
        return list(collection.to_delayed())
    if isinstance(collection, dd.DataFrame):
        raise TypeError("build() takes one column of a dataframe (df['key']), not the frame")
    raise TypeError(
        "build() takes a dask bag, array or dataframe column, not "
        f"{type(collection).__name__}"
    )


def _workers():
    """The workers of the active distributed Client, or 1."""
    try:
        from distributed import default_client
        return max(1, len(default_client().scheduler_info()["workers"]))
    except (ImportError, ValueError):
        return 1


def build(
    collection,
    capacity,
    fpr=None,
    *,
    fingerprint_bits=None,
    bucket_size=None,
    seed=None,
    segmented=None,
    concurrent=True,
    ranges=None,
    split_every=DEFAULT_SPLIT_EVERY,
    progress=False,
):
    """One CuckooFilter holding the distinct keys of `collection`: a dask bag, a
    one-dimensional dask array, or a dask dataframe column (a Series).

    capacity: the filter's, as `cuckoo build --capacity` (the distinct keys it is sized
    for). fpr, fingerprint_bits, bucket_size, segmented: as for CuckooFilter. The filter
    is fixed-size: a collection with more keys than fit raises FilterFull.
    seed: the hash seed; None draws a secret one here (it travels to the workers in the
    task graph).
    concurrent: whether the returned filter is concurrent (as CuckooFilter's argument).
    ranges: a segmented filter is filled by this many tasks, each a range of whole
    segments (default: twice the workers of the active Client, at least the partitions,
    at most the segments).
    split_every: an unsegmented filter's hash pieces joined by one task (2 or more).
    progress: show Dask's progress bar while it runs (distributed's when a Client is
    active, else dask.diagnostics.ProgressBar).

    Computes at once, on the active Dask scheduler (a distributed Client if one is
    active), and returns the filter.
    """
    import dask

    if not isinstance(split_every, int) or split_every < 2:
        raise ValueError("split_every must be an integer from 2")
    if seed is None:
        seed = secrets.randbits(64) or 1
    settings = {"seed": seed}
    for name, value in (("fpr", fpr), ("fingerprint_bits", fingerprint_bits),
                        ("bucket_size", bucket_size), ("segmented", segmented)):
        if value is not None:
            settings[name] = value
    CuckooFilter(1, **settings, concurrent=False)  # the settings' errors, here and now
    segment_bits, segments, tag_bits = CuckooFilter._segment_plan(capacity, **settings)
    parts = _partitions(collection)

    if segment_bits:
        if ranges is None:
            ranges = max(2 * _workers(), len(parts))
        if not isinstance(ranges, int) or ranges < 1:
            raise ValueError("ranges must be a positive integer")
        ranges = min(ranges, segments)
        pieces = [dask.delayed(_split, nout=ranges)(p, ranges, capacity, settings)
                  for p in parts]
        filled = []
        for r in range(ranges):
            first, end = segments * r // ranges, segments * (r + 1) // ranges
            filled.append(dask.delayed(_fill_range)(first, end, tag_bits, capacity, settings,
                                                    *[piece[r] for piece in pieces]))
        task = dask.delayed(_assemble)(capacity, settings, *filled)
    else:
        level = [dask.delayed(_hashes)(p, settings) for p in parts] or [b""]
        while len(level) > 1:
            level = [dask.delayed(_join)(*level[i:i + split_every])
                     for i in range(0, len(level), split_every)]
        task = dask.delayed(_fill_whole)(capacity, tag_bits, settings, level[0])
    result = _compute(task, progress)
    return result if not concurrent else CuckooFilter.from_bytes(result.to_bytes())


def merge(paths, *, ranges=None, concurrent=True, progress=False):
    """One CuckooFilter holding every key of the filter files `paths`, merged range by
    range of segments by Dask tasks: byte for byte what merging them in order into a copy
    of the first gives (CuckooFilter.merge, `cuckoo merge OUT IN...`). Counts add up: a key
    in two files counts twice.

    The files must be readable from the workers at those paths (shared storage), and made
    alike (CuckooFilter.empty_like of one model, or the same settings and seed; build()
    and `cuckoo build --seed S --capacity N` make them so), fixed-size and segmented
    (segmented=True, or the default from about 16M keys), each one sub-filter. Their
    checksums are verified here first, once; each task then maps its range of every file.
    ranges: tasks, each a range of whole segments (default: twice the workers of the active
    Client, at most the segments). concurrent, progress: as for build(). The ranges come
    back here and are put together in this process, which then holds the filter.

    Raises ValueError for files that do not merge (saying why), FilterFull if the merged
    fingerprints do not fit the first file's capacity, and what CuckooFilter.open raises
    for a file it cannot read.
    """
    import dask

    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("merge() takes at least one filter file")
    # Their headers here (checked, mapped); their checksums on the workers, once each.
    filters = [CuckooFilter.open(p, verify=False) for p in paths]
    model = filters[0]
    for path, f in zip(paths[1:], filters[1:]):
        try:
            model._merge_check(f)
        except ValueError as e:
            raise ValueError(f"{path} does not merge into {paths[0]}: {e}") from None
    stats = model.stats
    if not stats["segmented"] or stats["expansion"] or stats["sub_filters"] != 1:
        raise ValueError("merge() takes fixed-size segmented filters of one sub-filter "
                         "(merge others with CuckooFilter.merge)")
    buckets, _, segment_bits = model._mapping()
    segments = buckets >> segment_bits
    if ranges is None:
        ranges = 2 * _workers()
    if not isinstance(ranges, int) or ranges < 1:
        raise ValueError("ranges must be a positive integer")
    ranges = min(ranges, segments)
    verified = [dask.delayed(_verify)(p) for p in paths]
    merged = [dask.delayed(_merge_range)(paths, segments * r // ranges,
                                         segments * (r + 1) // ranges, *verified)
              for r in range(ranges)]
    result = _assemble_merge(filters, _compute(dask.delayed(list)(merged), progress))
    return result if not concurrent else CuckooFilter.from_bytes(result.to_bytes())


def _compute(task, progress):
    """task's value, computed on the active scheduler, with a progress bar if asked."""
    try:
        from distributed import default_client, progress as distributed_progress
        client = default_client()
    except (ImportError, ValueError):  # no distributed, or no Client active
        client = None
    if client is not None:
        future = client.compute(task)
        if progress:
            distributed_progress(future)
        return future.result()
    if progress:
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            return task.compute()
    return task.compute()
