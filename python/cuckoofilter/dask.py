"""Build one cuckoo filter from a Dask collection, on whatever cluster Dask runs on.

    import dask.bag as db
    from distributed import Client, LocalCluster
    import cuckoofilter.dask

    client = Client(LocalCluster(n_workers=4))
    urls = db.read_text("logs/*.txt").map(str.strip)
    f = cuckoofilter.dask.build(urls, capacity=100_000_000, fpr=0.001, progress=True)
    f.save("urls.cf")

Every partition builds a filter of the whole capacity with the same seed and settings (so
that they merge exactly), holding that partition's keys; a tree reduction merges them,
`split_every` at a time, into the one filter returned. The keys never leave their
workers: only filters travel, each the size of the finished filter (a partition's filter
is mostly empty, and its memory on its worker is the whole filter's).

A merge re-inserts every fingerprint of the filters it takes (as many inserts as their
keys, at the high load where inserts cost the most), so fewer, larger partitions build
faster: with as many partitions as workers there is one merge per worker.

Keys are what CuckooFilter.add takes: bytes, str (UTF-8) and ints in [0, 2**64) (their
8 bytes, little-endian); numpy integer arrays and integer columns are taken as such ints.
A key that is in two partitions is stored twice (counts add up, as add() twice would);
drop duplicates first (`bag.distinct()`, `series.drop_duplicates()`) for a set.
"""

import secrets

from . import CuckooFilter

__all__ = ["build"]

# Filters merged by one reduction task: few enough that a worker holds them at once.
DEFAULT_SPLIT_EVERY = 8


def _keys_of(part):
    """A partition's keys in a form add_many takes: a uint64 buffer for integers (numpy
    arrays, integer columns), else a list."""
    import numpy as np

    values = getattr(part, "values", part)  # a pandas Series: its values
    if isinstance(values, np.ndarray):
        if values.dtype.kind in "iu":
            if values.dtype.kind == "i" and values.size and values.min() < 0:
                raise ValueError("integer keys must be in [0, 2**64)")
            return np.ascontiguousarray(values, dtype=np.uint64).ravel()
        return values.ravel().tolist()
    return list(values)


def _partition_filter(part, settings):
    f = CuckooFilter(**settings)
    f.add_many(_keys_of(part))
    return f


def _merge(*filters):
    # Each input is a partial result that only this task uses, so the first one takes
    # the others in place instead of being copied.
    out = filters[0]
    for f in filters[1:]:
        out.merge(f)
    return out


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


def build(
    collection,
    capacity,
    fpr=None,
    *,
    fingerprint_bits=None,
    bucket_size=None,
    seed=None,
    concurrent=True,
    split_every=DEFAULT_SPLIT_EVERY,
    progress=False,
):
    """One CuckooFilter holding every key of `collection`: a dask bag, a one-dimensional
    dask array, or a dask dataframe column (a Series).

    capacity: the keys of the whole collection (each partition's filter has it).
    fpr, fingerprint_bits, bucket_size: as for CuckooFilter. The filter is fixed-size: a
    collection with more keys than the capacity raises FilterFull.
    seed: the hash seed every partition shares; None draws a secret one here (it travels
    to the workers in the task graph).
    concurrent: whether the returned filter is concurrent (as CuckooFilter's argument).
    split_every: filters merged by one task of the tree reduction (2 or more).
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
    settings = {"capacity": capacity, "seed": seed, "concurrent": False}
    for name, value in (("fpr", fpr), ("fingerprint_bits", fingerprint_bits),
                        ("bucket_size", bucket_size)):
        if value is not None:
            settings[name] = value
    CuckooFilter(**{**settings, "capacity": 1})  # the settings' errors, here and now

    level = [dask.delayed(_partition_filter)(p, settings) for p in _partitions(collection)]
    if not level:
        level = [dask.delayed(CuckooFilter)(**settings)]
    while len(level) > 1:
        level = [dask.delayed(_merge)(*level[i:i + split_every])
                 for i in range(0, len(level), split_every)]
    result = _compute(level[0], progress)
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
