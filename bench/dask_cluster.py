"""What the Dask benchmarks share: a LocalCluster of worker processes with cuckoofilter
imported before any clock starts, and the workers' peak memory."""

import resource


def local_client(workers):
    """A Client of `workers` single-threaded worker processes, cuckoofilter imported."""
    from distributed import Client, LocalCluster

    client = Client(LocalCluster(n_workers=workers, threads_per_worker=1,
                                 dashboard_address=None))
    client.run(lambda: __import__("cuckoofilter"))
    return client


def peak_rss_mb(client):
    """The largest resident set any worker has had so far, in MB."""
    rss = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return max(rss.values()) / 1024
