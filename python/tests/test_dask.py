"""cuckoofilter.dask.build on a distributed.LocalCluster of 2 worker processes (loopback
only), from a bag, an array and a dataframe column: every key is found, and the rate of
false positives is that of a filter built in this process from the same keys. Also the
local scheduler without a cluster, the progress bar, and the refusals. cuckoofilter.dask.merge
of filter files, range by range on the workers: the bytes of CuckooFilter.merge of the same
files in the same order, stashes and a merge that does not fit included. Dask is required:
a missing dask or distributed fails the run, it does not skip.
"""

import io
import os
import contextlib
import subprocess

import numpy as np
import pytest

import dask
import dask.array as da
import dask.bag as db
import dask.dataframe as dd
import pandas as pd
from distributed import Client, LocalCluster

import cuckoofilter as cf
import cuckoofilter.dask as cfd

SEED = int(os.environ.get("CF_TEST_SEED") or 20261126)
TOOL = os.environ.get("CUCKOO")
PROBES = 200_000


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address=None)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def str_keys(n, prefix="u"):
    return [f"{prefix}{SEED}-{i}" for i in range(n)]


def check_like_one_process(f, keys, capacity, seed, fpr=0.001):
    """Every key found; the false-positive rate that of one filter of the same keys."""
    assert sum(f.contains_many(keys)) == len(keys)
    assert len(f) == len(keys)
    one = cf.CuckooFilter(capacity, fpr=fpr, seed=seed)
    one.add_many(keys)
    assert f.stats["fingerprint_bits"] == one.stats["fingerprint_bits"]
    probes = str_keys(PROBES, prefix="absent")
    got, want = sum(f.contains_many(probes)), sum(one.contains_many(probes))
    # Both are binomial with the same rate: their difference stays within a few sigma.
    assert abs(got - want) <= 5 * (want ** 0.5) + 10, (got, want)


def test_bag_array_and_column_on_a_cluster(client):
    keys = str_keys(120_000)
    f = cfd.build(db.from_sequence(keys, npartitions=12), capacity=150_000, fpr=0.001,
                  seed=77)
    assert isinstance(f, cf.CuckooFilter) and f.stats["concurrent"]
    check_like_one_process(f, keys, 150_000, 77)

    ints = np.random.default_rng(SEED).choice(2 ** 62, size=100_000, replace=False)
    arr = da.from_array(ints.astype(np.uint64), chunks=7_000)
    g = cfd.build(arr, capacity=150_000, fpr=0.001, seed=78, split_every=3)
    assert all(g.contains_many(ints.astype(np.uint64)))
    assert len(g) == 100_000

    frame = dd.from_pandas(pd.DataFrame({"url": keys, "n": range(len(keys))}), npartitions=9)
    h = cfd.build(frame["url"], capacity=150_000, fpr=0.001, seed=77)
    check_like_one_process(h, keys, 150_000, 77)
    k = cfd.build(frame["n"], capacity=150_000, fpr=0.001, seed=79)
    assert all(k.contains_many(np.arange(len(keys), dtype=np.uint64)))

    # Without a seed, one secret seed for all partitions: still every key.
    s = cfd.build(db.from_sequence(keys, npartitions=5), capacity=150_000)
    assert sum(s.contains_many(keys)) == len(keys)


def tool_build(tmp_path, keys, capacity, seed, *options):
    """The bytes `cuckoo build --seed S --capacity N` writes for the keys."""
    assert TOOL and os.access(TOOL, os.X_OK), "CUCKOO must name the cuckoo tool"
    src, out = tmp_path / "keys.txt", tmp_path / "tool.cf"
    src.write_text("".join(k + "\n" for k in keys))
    subprocess.run([TOOL, "build", str(out), "--force", "-q", "--seed", str(seed),
                    "--capacity", str(capacity), *options, str(src)], check=True)
    return out.read_bytes()


def repeated_key(i, n=90_000):
    return f"t-{i % n}"


@pytest.mark.parametrize("workers", [1, 2])
def test_same_bytes_as_the_tool(client, tmp_path, workers):
    """Segmented (4 segments, built range by range on the workers) and any-size (one
    task): for 1, 3 and 8 partitions, with keys repeated across partitions (made on the
    workers: the graph stays small), the bytes of `cuckoo build` of the same keys."""
    keys = [repeated_key(i) for i in range(90_000)]
    cluster = None
    if workers == 1:
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None)
        c = Client(cluster)
    else:
        c = client
    try:
        with c.as_current():
            for segmented, options in ((True, ["--mapping", "segmented", "--bucket-size", "1"]),
                                       (None, [])):
                extra = {"segmented": True, "bucket_size": 1} if segmented else {}
                want = tool_build(tmp_path, keys, 100_000, 5, *options)
                for partitions in (1, 3, 8):
                    bag = db.range(100_000, npartitions=partitions).map(repeated_key)
                    f = cfd.build(bag, capacity=100_000, seed=5, concurrent=False, **extra)
                    assert f.to_bytes() == want, (segmented, partitions, workers)
                    assert f.stats["segmented"] == bool(segmented)
                    # Written into a file by the workers: the same bytes.
                    out = tmp_path / f"dask-{partitions}.cf"
                    g = cfd.build(bag, capacity=100_000, seed=5, path=out, **extra)
                    assert out.read_bytes() == want, (segmented, partitions, workers)
                    assert g.stats["read_only"] and repeated_key(7) in g
                    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]
    finally:
        if cluster is not None:
            c.close()
            cluster.close()


def merge_files(tmp_path, fill):
    """Filter files made alike (4 segments of 2^16 buckets of 4, fixed), filter i holding
    fill[i] keys of its own (None: until its stash holds two)."""
    paths = []
    model = cf.CuckooFilter(4 * 249_036, seed=SEED % 2**32 or 1, segmented=True,
                            concurrent=False)
    for i, n in enumerate(fill):
        f = cf.CuckooFilter.empty_like(model)
        if n is None:  # in batches while they fit, then key by key
            j = 0
            while f.stats["load_factor"] < 0.95:
                f.add_many(str_keys(10_000, prefix=f"s{i}-{j}-"))
                j += 1
            while f.stats["stashed"] < 2:
                f.add(f"s{i}-{j}")
                j += 1
        else:
            f.add_many(str_keys(n, prefix=f"m{i}-"))
        paths.append(str(tmp_path / f"in{len(paths)}.cf"))
        f.save(paths[-1])
    return paths


def merged_here(paths):
    """CuckooFilter.merge of the files, in order, into a copy of the first."""
    out = cf.CuckooFilter.load(paths[0], concurrent=False)
    for p in paths[1:]:
        out.merge(cf.CuckooFilter.load(p))
    return out


@pytest.mark.parametrize("fill", [(250_000, 250_000, 250_000), (None, 30), (40, None)],
                         ids=["room", "first-stashed", "source-stashed"])
def test_merge_same_bytes(client, tmp_path, fill):
    paths = merge_files(tmp_path, fill)
    want = merged_here(paths).to_bytes()
    with client.as_current():
        for ranges in (1, 3, 4):
            f = cfd.merge(paths, ranges=ranges, concurrent=False)
            assert f.to_bytes() == want, ranges
        # Written into a file by the workers, a new one and then over the first input.
        out = tmp_path / "merged.cf"
        for target in (out, paths[0]):
            g = cfd.merge(paths, ranges=3, path=target)
            assert open(target, "rb").read() == want
            assert g.stats["read_only"] and not g.stats["concurrent"]
            assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]
        # One file: its copy.
        cfd.merge([out], path=tmp_path / "copy.cf")
        assert (tmp_path / "copy.cf").read_bytes() == want
    f = cfd.merge([out])  # the default ranges, a concurrent filter, one file
    assert f.stats["concurrent"] and f.to_bytes() == want


def test_merge_refusals(client, tmp_path):
    paths = merge_files(tmp_path, (520_000, 520_000))
    with pytest.raises(cf.FilterFull):
        merged_here(paths)
    with client.as_current(), pytest.raises(cf.FilterFull):
        cfd.merge(paths)
    with client.as_current(), pytest.raises(cf.FilterFull):  # no file, no temporary file
        cfd.merge(paths, path=tmp_path / "full.cf")
    assert sorted(os.listdir(tmp_path)) == ["in0.cf", "in1.cf"]
    with pytest.raises(ValueError, match="read-only"):
        cfd.merge(paths, path=tmp_path / "cc.cf", concurrent=True)
    other = cf.CuckooFilter(4 * 249_036, seed=7, segmented=True)
    other.save(tmp_path / "other.cf")
    with pytest.raises(ValueError, match="seeds differ"):
        cfd.merge([paths[0], tmp_path / "other.cf"])
    small = cf.CuckooFilter(1000, seed=7)
    small.save(tmp_path / "small.cf")
    with pytest.raises(ValueError, match="segmented"):
        cfd.merge([tmp_path / "small.cf"])
    with pytest.raises(ValueError, match="at least one"):
        cfd.merge([])
    (tmp_path / "bad.cf").write_bytes(b"not a filter")
    with pytest.raises(cf.CorruptFilter):
        cfd.merge([paths[0], tmp_path / "bad.cf"])
    # a flipped table byte: the header reads, the checksum (checked on a worker) does not
    data = bytearray(open(paths[1], "rb").read())
    data[len(data) // 2] ^= 0x40
    (tmp_path / "flipped.cf").write_bytes(bytes(data))
    with client.as_current(), pytest.raises(cf.CorruptFilter):
        cfd.merge([paths[0], tmp_path / "flipped.cf"])


def test_progress_bar(client):
    keys = str_keys(20_000, prefix="p")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        f = cfd.build(db.from_sequence(keys, npartitions=4), capacity=30_000, progress=True)
    assert sum(f.contains_many(keys)) == len(keys)


def test_local_scheduler_without_a_cluster():
    keys = str_keys(30_000, prefix="l")
    with dask.config.set(scheduler="threads"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            f = cfd.build(db.from_sequence(keys, npartitions=6), capacity=40_000, seed=5,
                          concurrent=False, progress=True)
    assert "100%" in out.getvalue()
    assert not f.stats["concurrent"]
    assert sum(f.contains_many(keys)) == len(keys)


def test_refusals(tmp_path):
    keys = str_keys(1_000, prefix="r")
    frame = dd.from_pandas(pd.DataFrame({"k": keys}), npartitions=2)
    with pytest.raises(TypeError, match="one column"):
        cfd.build(frame, capacity=2_000)
    with pytest.raises(TypeError, match="dask bag"):
        cfd.build(keys, capacity=2_000)
    with pytest.raises(ValueError, match="one-dimensional"):
        cfd.build(da.zeros((4, 4), dtype=np.uint64, chunks=2), capacity=100)
    with pytest.raises(ValueError, match="split_every"):
        cfd.build(db.from_sequence(keys), capacity=2_000, split_every=1)
    with pytest.raises(ValueError):
        cfd.build(db.from_sequence(keys), capacity=2_000, fingerprint_bits=3)
    with pytest.raises(cf.FilterFull):
        with dask.config.set(scheduler="sync"):
            cfd.build(db.from_sequence(str_keys(5_000), npartitions=4), capacity=1_000)
    for path in (None, tmp_path / "full.cf"):
        with pytest.raises(cf.FilterFull):  # segmented: the ranges' keys that found no room
            with dask.config.set(scheduler="sync"):
                cfd.build(db.range(200_000, npartitions=3).map(repeated_key, 200_000),
                          capacity=50_000, segmented=True, bucket_size=1, path=path)
    assert os.listdir(tmp_path) == []  # neither the file nor a temporary one
    with pytest.raises(ValueError, match="read-only"):
        cfd.build(db.from_sequence(keys), capacity=2_000, path=tmp_path / "x.cf",
                  concurrent=True)
    with pytest.raises(IsADirectoryError):
        with dask.config.set(scheduler="sync"):
            cfd.build(db.from_sequence(keys), capacity=2_000, segmented=True, path=tmp_path)


def test_file_by_parts_refused(tmp_path):
    """A file whose parts were not all written is refused at the commit, with the reason;
    the file it would replace stays, and so does the temporary file (for the caller)."""
    head, segment_bytes, total, stashed = cf.CuckooFilter._segments_file_head(
        300_000, 5, b"", seed=3, segmented=True)
    assert stashed == 0 and len(head) == 128 and total > len(head) + segment_bytes
    target = tmp_path / "f.cf"
    target.write_bytes(b"before")
    tmp = cf.CuckooFilter._file_begin(target, head, total)
    assert os.path.getsize(tmp) == total and os.path.dirname(tmp) == str(tmp_path)
    with pytest.raises(cf.CorruptFilter, match="table contents disagree"):
        cf.CuckooFilter._file_commit(tmp, target)
    assert target.read_bytes() == b"before" and os.path.exists(tmp)
    with pytest.raises(ValueError, match="more than it has slots"):
        cf.CuckooFilter._segments_file_head(300_000, 10**9, b"", seed=3, segmented=True)
