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
"""

import secrets

from . import CuckooFilter, FilterFull

__all__ = ["build"]

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
