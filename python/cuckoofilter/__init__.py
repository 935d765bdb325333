"""Cuckoo filters: set membership with no false negatives, deletion, and a small,
tunable false-positive rate, in a few bytes per key.

    import cuckoofilter as cf
    f = cf.CuckooFilter(capacity=1_000_000, fpr=0.001)
    f.add(b"alice"); "alice" in f          # True
    f.save("seen.cf")                       # the `cuckoo` tool's file format

See help(cuckoofilter.CuckooFilter).
"""

from ._cuckoofilter import (
    CorruptFilter,
    CuckooFilter,
    Error,
    FileError,
    FilterFull,
    ReadOnlyFilter,
    library_version,
)

__all__ = [
    "CuckooFilter",
    "Error",
    "FilterFull",
    "ReadOnlyFilter",
    "CorruptFilter",
    "FileError",
    "library_version",
]
__version__ = library_version
