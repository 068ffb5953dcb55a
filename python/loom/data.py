"""Reading training data with Loom's C readers (loom_libsvm_read, loom_ratings_read;
docs/DATA.md): worker `shard` of `shards` takes the lines that start in its byte range of
one shared file, as `loom train` does, so no one splits the data beforehand. The C arrays
are copied into numpy arrays and freed."""

import collections
import ctypes
import os

import numpy as np

from . import _capi
from ._errors import LoomError

IDS = ("auto", "one_based", "zero_based")
LABELS = ("class", "real")

Dataset = collections.namedtuple(
    "Dataset", "label row idx val max_feature skipped first_line bytes")
Dataset.__doc__ = """A share of a LIBSVM file in compressed sparse rows: example i has features
idx[row[i]:row[i + 1]] (0-based, ascending) with values val[...] and label label[i] (+1/-1
for classification). max_feature is 1 + the largest feature id in the share; skipped counts
the malformed lines skipped (skip_bad); first_line is the share's first line (1-based);
bytes the bytes of the file it covered."""


def _array(pointer, n, dtype):
    """A numpy copy of n values at a C pointer (the C arrays are freed after reading)."""
    if n == 0:
        return np.empty(0, dtype=dtype)
    return np.ctypeslib.as_array(pointer, shape=(n,)).astype(dtype, copy=True)


def _shard(shard, shards):
    """shard and shards as C ints (the C reader checks that shard < shards)."""
    return (_capi.integer("shard", shard, 0, _capi.INT_MAX),
            _capi.integer("shards", shards, 1, _capi.INT_MAX))


def read_libsvm(path, shard=0, shards=1, *, ids="auto", labels="class", max_features=0,
                skip_bad=False):
    """Share `shard` of `shards` of the LIBSVM file at path, as a Dataset of numpy arrays.
    A malformed file raises LoomError whose detail names the file and line
    ("train.svm:17: bad feature value 'x'")."""
    if ids not in IDS or labels not in LABELS:
        raise ValueError(f"ids must be one of {IDS} and labels one of {LABELS}")
    max_features = _capi.integer("max_features", max_features, 0, _capi.U64_MAX)
    shard, shards = _shard(shard, shards)
    opts = _capi.LibsvmOpts(IDS.index(ids), LABELS.index(labels), max_features, int(skip_bad))
    out = ctypes.POINTER(_capi.Dataset)()
    err = ctypes.create_string_buffer(1024)
    rc = _capi.lib.loom_libsvm_read(os.fsencode(path), shard, shards, ctypes.byref(opts),
                                    ctypes.byref(out), err, len(err))
    if rc:
        raise LoomError(rc, err.value.decode(errors="replace"), "loom_libsvm_read")
    try:
        d = out.contents
        return Dataset(_array(d.label, d.rows, np.float64), _array(d.row, d.rows + 1, np.int64),
                       _array(d.idx, d.nnz, np.uint64), _array(d.val, d.nnz, np.float32),
                       d.max_feature, d.skipped, d.first_line, d.bytes)
    finally:
        _capi.lib.loom_dataset_free(out)


Ratings = collections.namedtuple(
    "Ratings", "user item rating line users items user_id item_id skipped first_line bytes")
Ratings.__doc__ = """A share of a ratings file: rating i is user[i] (a dense index) rating
item[i] with rating[i], from line line[i] of the file. users and items count the distinct
ids of the whole file; user_id[u] is the file's id of dense index u (item_id alike), so
every worker maps ids the same way."""


def read_ratings(path, shard=0, shards=1, *, separator=None, skip_bad=False):
    """Share `shard` of `shards` of a ratings file ("user item rating [timestamp]", tabs,
    commas or spaces; a header line is skipped), as Ratings of numpy arrays. separator:
    None to detect it, or one of "\\t", ",", " ". A malformed file raises LoomError whose
    detail names the file and line."""
    if separator not in (None, "\t", ",", " "):
        raise ValueError(f"separator must be None, '\\t', ',' or ' ', not {separator!r}")
    shard, shards = _shard(shard, shards)
    opts = _capi.RatingsOpts(separator.encode() if separator else b"\0", int(bool(skip_bad)))
    out = ctypes.POINTER(_capi.Ratings)()
    err = ctypes.create_string_buffer(1024)
    rc = _capi.lib.loom_ratings_read(os.fsencode(path), shard, shards, ctypes.byref(opts),
                                     ctypes.byref(out), err, len(err))
    if rc:
        raise LoomError(rc, err.value.decode(errors="replace"), "loom_ratings_read")
    try:
        r = out.contents
        return Ratings(_array(r.user, r.n, np.uint32), _array(r.item, r.n, np.uint32),
                       _array(r.rating, r.n, np.float32), _array(r.line, r.n, np.uint64),
                       r.users, r.items, _array(r.user_id, r.users, np.int64),
                       _array(r.item_id, r.items, np.int64), r.skipped, r.first_line, r.bytes)
    finally:
        _capi.lib.loom_ratings_free(out)
