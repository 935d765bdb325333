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

With a path, the workers write their ranges into that one file, and no process ever
holds the whole filter (this one writes the file's head and commits it):

    f = cuckoofilter.dask.build(urls, capacity=1_000_000_000, fpr=0.001, path="urls.cf")

Keys are what CuckooFilter.add takes: bytes, str (UTF-8) and ints in [0, 2**64) (their
8 bytes, little-endian); numpy integer arrays and integer columns are taken as such ints.

Filter files made alike merge range by range of segments, on the workers:

    f = cuckoofilter.dask.merge(["monday.cf", "tuesday.cf", "wednesday.cf"])

Each task reads the same range of segments of every file (memory-mapped: a worker holds
its ranges, not the filters) and adds the other files' fingerprints of that range to the
first's; the ranges are put together. The bytes are those CuckooFilter.merge gives
merging the files in order into a copy of the first (`cuckoo merge` likewise).
"""

import functools
import os
import secrets

from . import CuckooFilter, FilterFull

__all__ = ["build", "merge"]

# Pieces of hashes joined by one task on the way to the task that fills an unsegmented
# filter: few enough that a worker holds them at once.
DEFAULT_SPLIT_EVERY = 8


def _task(func, **options):
    """func with its options bound, for a task whose other arguments are data: a task
    given a dict (or a list) is evaluated as a nested task, and its data with it, element
    by element (a partition of 12.5M keys cost 2 s so)."""
    return functools.partial(func, **options)


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


def _hashes(part, *, settings):
    """A partition's hashes (8 bytes each), as the filter of `settings` makes them."""
    probe = CuckooFilter(1, **{**settings, "segmented": False, "concurrent": False})
    return probe.hashes(_keys_of(part))


def _split(part, *, ranges, capacity, settings):
    """A partition's hashes, one piece per range of segments."""
    return tuple(CuckooFilter._split_hashes(_keys_of(part), ranges, capacity, **settings))


def _join(*pieces):
    return b"".join(pieces)


def _fill_range(first, end, *pieces, tag_bits, capacity, settings):
    """The table of segments [first, end) holding the distinct hashes of the pieces, those
    that found no room there (their count, the first of them) and the table's item count."""
    hashes = CuckooFilter._sort_hashes(b"".join(pieces), tag_bits, 1)
    table, unplaced, first_unplaced, items = CuckooFilter._build_segments(
        first, end, hashes, capacity, **settings)
    return first, end, table, unplaced, first_unplaced, items


def _fill_whole(hashes, *, capacity, tag_bits, settings):
    f = CuckooFilter(capacity, **{**settings, "concurrent": False})
    _, full = f._build_hashes(CuckooFilter._sort_hashes(hashes, tag_bits, 0), 0)
    if full:
        raise FilterFull(f"{full} keys did not fit in a filter of capacity {capacity}")
    return f


def _not_fitting(capacity, unplaced, stashed):
    if unplaced > stashed:
        raise FilterFull(f"{unplaced - stashed} keys did not fit in a filter of capacity "
                         f"{capacity}")


def _assemble(*parts, capacity, settings):
    """The ranges put together; the keys that found no room in their segments to the
    stash, the first ones in key order (as one add after another stashes them), and
    FilterFull if more did than it holds."""
    f = CuckooFilter(capacity, **{**settings, "concurrent": False})
    for first, end, table, _, _, _ in parts:
        f._put_segments(first, end, table)
    _not_fitting(capacity, sum(part[3] for part in parts),
                 f._stash_unplaced(b"".join(part[4] for part in parts)))
    return f


def _build_head(capacity, settings, summaries):
    """The head of the file of the filled ranges (their summaries, in range order), and
    FilterFull if their unplaced keys do not fit the stash."""
    items = sum(s[4] for s in summaries)
    head, segment_bytes, total, stashed = CuckooFilter._segments_file_head(
        capacity, items, b"".join(s[3] for s in summaries), **settings)
    _not_fitting(capacity, sum(s[2] for s in summaries), stashed)
    return head, segment_bytes, total


def _save_whole(path, f):
    f.save(path)


def _summary(part):
    """A filled range without its table: what the client needs to write a file's head."""
    return part[:2] + part[3:]


def _write_range(tmp, offset, part):
    """A range's table bytes written into the file `tmp` at `offset`, and made durable
    (seen by the process that commits the file, on a network file system too)."""
    fd = os.open(tmp, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        view, at = memoryview(part[2]), offset
        while view:
            n = os.pwrite(fd, view, at)
            view, at = view[n:], at + n
        os.fsync(fd)
    finally:
        os.close(fd)


def _to_file(path, parts, head_of, progress):
    """The filled ranges `parts` (delayed (first, end, table, ...), in range order) written
    into one file at path by the workers that hold them: the client writes its head
    (head_of(summaries) -> head, segment_bytes, total) into a temporary file, each range
    goes to its offset there, and the client commits it (checked, summed, renamed). No
    process holds more than its ranges."""
    import dask

    parts = _persist(parts, progress)
    summaries = _compute(dask.delayed(list)([dask.delayed(_summary)(p) for p in parts]), False)
    head, segment_bytes, total = head_of(summaries)
    tmp = CuckooFilter._file_begin(path, head, total)
    try:
        writes = [dask.delayed(_write_range)(tmp, len(head) + s[0] * segment_bytes, p)
                  for s, p in zip(summaries, parts)]
        _compute(dask.delayed(list)(writes), progress)
        CuckooFilter._file_commit(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
    items = None
    for f in filters[1:]:
        count, firsts, items = filters[0]._merge_segments(first, end, dst,
                                                          f._get_segments(first, end), b"")
        stash = [(i, h) for i, (h, segment) in enumerate(f._stash_hashes())
                 if first <= segment < end]
        if not stash:
            lost.append((count, firsts, 0, []))
            continue
        hashes = b"".join(h.to_bytes(8, "little") for _, h in stash)
        n, out, items = filters[0]._merge_segments(first, end, dst, None, hashes)
        # which stash entries found no room: the reported hashes, in their order
        positions, at = [], 0
        for k in range(min(n, len(out) // 8)):
            h = int.from_bytes(out[8 * k:8 * k + 8], "little")
            while stash[at][1] != h:
                at += 1
            positions.append(stash[at][0])
            at += 1
        lost.append((count, firsts, n, positions))
    if items is None:  # one file: its range, checked and counted
        _, _, items = filters[0]._merge_segments(first, end, dst, None, b"")
    return first, end, bytes(dst), lost, items


def _merge_stash(filters, losts):
    """The merged filter's stash, as cf_merge would have made it, from each range's
    account of what found no room (in range order): the first filter's entries, then
    filter by filter what found no room (its table's in range order, then its stash
    entries' in stash order), as hashes; and how many fingerprints that is in all."""
    order = [h for h, _ in filters[0]._stash_hashes()]
    needed = len(order)
    for i, src in enumerate(filters[1:]):
        lost_positions = set()
        for lost in losts:
            count, firsts, n, positions = lost[i]
            needed += count + n
            order += [int.from_bytes(firsts[k:k + 8], "little") for k in range(0, len(firsts), 8)]
            lost_positions.update(positions)
        stash = src._stash_hashes()
        order += [stash[k][0] for k in sorted(lost_positions)]
    return b"".join(h.to_bytes(8, "little") for h in order), needed


def _merge_full(needed, stashed):
    if needed > stashed:
        raise FilterFull(f"{needed - stashed} fingerprints did not fit: the merged filters "
                         "hold more than the first one's capacity")


def _assemble_merge(filters, parts):
    """The ranges put together, then the stash (_merge_stash); FilterFull if it does not
    hold what found no room."""
    f = CuckooFilter.empty_like(filters[0], concurrent=False)
    for first, end, table, _, _ in parts:
        f._put_segments(first, end, table)
    order, needed = _merge_stash(filters, [part[3] for part in parts])
    _merge_full(needed, f._stash_unplaced(order))
    return f


def _merge_head(filters, summaries):
    """The head of the merged file, from the ranges' summaries (in range order)."""
    order, needed = _merge_stash(filters, [s[2] for s in summaries])
    head, segment_bytes, total, stashed = filters[0]._file_head(sum(s[3] for s in summaries),
                                                                order)
    _merge_full(needed, stashed)
    return head, segment_bytes, total


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
    client = _client()
    return 1 if client is None else max(1, len(client.scheduler_info()["workers"]))


def build(
    collection,
    capacity,
    fpr=None,
    *,
    fingerprint_bits=None,
    bucket_size=None,
    seed=None,
    segmented=None,
    concurrent=None,
    path=None,
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
    concurrent: whether the returned filter is concurrent (as CuckooFilter's argument;
    default True, or False with a path).
    path: write the filter to this file instead, on storage the workers share, and return
    it opened read-only from there (CuckooFilter.open: memory-mapped; load it with
    CuckooFilter.load to change it). A segmented filter's ranges are written into the file
    by the workers that filled them, at their offsets, and no process ever holds the whole
    filter: this process writes the file's head into a temporary file beside `path`,
    checks the finished file and renames it over `path` (atomically, as save does). Any
    other filter is saved by the task that fills it.
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
    path = _out_path(path, concurrent)
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
        split = _task(_split, ranges=ranges, capacity=capacity, settings=settings)
        pieces = [dask.delayed(split, nout=ranges)(p) for p in parts]
        fill = _task(_fill_range, tag_bits=tag_bits, capacity=capacity, settings=settings)
        filled = []
        for r in range(ranges):
            first, end = segments * r // ranges, segments * (r + 1) // ranges
            filled.append(dask.delayed(fill)(first, end, *[piece[r] for piece in pieces]))
        if path is not None:
            _to_file(path, filled, lambda summaries: _build_head(capacity, settings, summaries),
                     progress)
            return CuckooFilter.open(path, verify=False)
        task = dask.delayed(_task(_assemble, capacity=capacity, settings=settings))(*filled)
    else:
        hashes = _task(_hashes, settings=settings)
        level = [dask.delayed(hashes)(p) for p in parts] or [b""]
        while len(level) > 1:
            level = [dask.delayed(_join)(*level[i:i + split_every])
                     for i in range(0, len(level), split_every)]
        task = dask.delayed(_task(_fill_whole, capacity=capacity, tag_bits=tag_bits,
                                  settings=settings))(level[0])
        if path is not None:
            _compute(dask.delayed(_save_whole)(path, task), progress)
            return CuckooFilter.open(path, verify=False)
    result = _compute(task, progress)
    return result if concurrent is False else CuckooFilter.from_bytes(result.to_bytes())


def _out_path(path, concurrent):
    """path as a str (or None), and ValueError for a concurrent filter asked of a file."""
    if path is None:
        return None
    if concurrent:
        raise ValueError("a filter written to a path comes back memory-mapped and read-only: "
                         "CuckooFilter.load(path, concurrent=True) makes a concurrent one")
    return os.fspath(path)


def merge(paths, *, ranges=None, concurrent=None, path=None, progress=False):
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
    back here and are put together in this process, which then holds the filter; with
    path, as for build(), the workers write them into that file instead (it may be one of
    `paths`: it is replaced once every range is merged), and no process holds the filter.

    Raises ValueError for files that do not merge (saying why), FilterFull if the merged
    fingerprints do not fit the first file's capacity, and what CuckooFilter.open raises
    for a file it cannot read.
    """
    import dask

    out = _out_path(path, concurrent)
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("merge() takes at least one filter file")
    # Their headers here (checked, mapped); their checksums on the workers, once each.
    filters = [CuckooFilter.open(p, verify=False) for p in paths]
    model = filters[0]
    for name, f in zip(paths[1:], filters[1:]):
        try:
            model._merge_check(f)
        except ValueError as e:
            raise ValueError(f"{name} does not merge into {paths[0]}: {e}") from None
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
    if out is not None:
        _to_file(out, merged, lambda summaries: _merge_head(filters, summaries), progress)
        return CuckooFilter.open(out, verify=False)
    result = _assemble_merge(filters, _compute(dask.delayed(list)(merged), progress))
    return result if concurrent is False else CuckooFilter.from_bytes(result.to_bytes())


def _client():
    """The active distributed Client, or None."""
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):  # no distributed, or no Client active
        return None


def _compute(task, progress):
    """task's value, computed on the active scheduler, with a progress bar if asked."""
    client = _client()
    if client is not None:
        future = client.compute(task)
        if progress:
            from distributed import progress as distributed_progress

            distributed_progress(future)
        return future.result()
    if progress:
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            return task.compute()
    return task.compute()


def _persist(tasks, progress):
    """The tasks computed and their values left where they were computed (a Client's
    workers), as delayed objects for further tasks."""
    import dask

    client = _client()
    if client is not None:
        tasks = client.persist(tasks)
        if progress:
            from distributed import progress as distributed_progress

            distributed_progress(tasks)
        return tasks
    if progress:
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            return list(dask.persist(*tasks))
    return list(dask.persist(*tasks))
