"""Table: a shared table of the job, read and written with numpy arrays, without copies.

Keys are a uint64 array (a list or another integer array is converted: that is a copy, of
the keys only). Values are arrays of the table's dtype holding n * width values, shaped
(n,) or (n, width), C-contiguous; their buffer is what C reads or writes, so an array of
another dtype or layout is refused rather than silently copied. Pulling into `out` writes
the caller's array in place, views of a larger array included.
"""

import ctypes

import numpy as np

from . import _capi
from ._errors import CODE_NAMES, call

DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64))
CONSISTENCY = ("asp", "ssp", "bsp")
STORAGE = ("dense", "sparse")
INIT = ("zero", "uniform", "normal")
UPDATERS = ("sum", "assign", "sgd", "adagrad", "ftrl")
PRIORITY = ("none", "random", "roundrobin", "abs", "rel")
_EKEYRANGE = CODE_NAMES.index("LOOM_EKEYRANGE")


def _choice(what, value, names):
    if value not in names:
        raise ValueError(f"{what} must be one of {', '.join(names)}, not {value!r}")
    return names.index(value)


def _keys(keys):
    """keys as a contiguous uint64 array: the same array if it already is one."""
    a = np.asarray(keys)
    if a.ndim != 1:
        raise ValueError(f"keys must be one-dimensional, not of shape {a.shape}")
    if a.dtype != np.uint64:
        if a.size and a.dtype.kind not in "iu":
            raise TypeError(f"keys must be integers, not {a.dtype}")
        if a.size and a.dtype.kind == "i" and a.min() < 0:
            raise ValueError(f"keys must not be negative (key {a.min()})")
        a = a.astype(np.uint64)
    return np.ascontiguousarray(a)


def _address(a):
    return a.ctypes.data if a.size else None


def table_opts(*, dtype=np.float32, width=1, storage="sparse", key_range=None, consistency="ssp",
               staleness=0, updater="sum", lr=0.1, beta=1.0, l1=0.0, l2=0.0, eps=1e-8,
               params=(), init="zero", init_a=0.0, init_b=0.0, init_seed=0, cache=True,
               flush_rows=0, filter_push=None, filter_pull=None, bandwidth=0.0, priority="none",
               queue_rows=0):
    """The loom_table_opts of Table's options; the defaults are LOOM_TABLE_OPTS_DEFAULT's.
    An integer option outside its C field's range raises ValueError naming it."""
    dtype = np.dtype(dtype)
    if dtype not in DTYPES:
        raise TypeError(f"dtype must be one of {', '.join(map(str, DTYPES))}, not {dtype}")
    if len(params) > _capi.LOOM_MAX_PARAMS:
        raise ValueError(f"at most {_capi.LOOM_MAX_PARAMS} params, not {len(params)}")
    o = _capi.TableOpts()
    o.type = DTYPES.index(dtype)
    o.width = _capi.integer("width", width, 1, _capi.U32_MAX)
    o.storage = _choice("storage", storage, STORAGE)
    begin, end = key_range if key_range is not None else (0, 0)
    o.key_begin = _capi.integer("key_range[0]", begin, 0, _capi.U64_MAX)
    o.key_end = _capi.integer("key_range[1]", end, 0, _capi.U64_MAX)
    o.consistency = _choice("consistency", consistency, CONSISTENCY)
    o.staleness = _capi.integer("staleness", staleness, 0, _capi.INT_MAX)
    o.updater = updater.encode()  # ctypes keeps the bytes alive with o; C copies the name
    o.lr, o.beta, o.l1, o.l2, o.eps = lr, beta, l1, l2, eps
    o.params[: len(params)] = params
    o.init = _choice("init", init, INIT)
    o.init_a, o.init_b = init_a, init_b
    o.init_seed = _capi.integer("init_seed", init_seed, 0, _capi.U64_MAX)
    o.cache = int(bool(cache))
    o.flush_rows = _capi.integer("flush_rows", flush_rows, 0, _capi.U32_MAX)
    # ctypes keeps these bytes alive with o; C copies the specs into the table's definition
    o.filter_push = filter_push.encode() if filter_push else None
    o.filter_pull = filter_pull.encode() if filter_pull else None
    o.bandwidth_mbits = bandwidth
    o.priority = _choice("priority", priority, PRIORITY)
    o.queue_rows = _capi.integer("queue_rows", queue_rows, 0, _capi.U32_MAX)
    return o


class Table:
    """A table of the job (loom_table_open); made by node.table(name, **options).

    Options, with the C defaults (docs/USAGE.md explains each):
      dtype=np.float32 (float32, float64, int32, int64)  width=1 (values per row)
      storage="sparse" | "dense"    key_range=None (all of uint64) or (begin, end)
      consistency="ssp" | "bsp" | "asp"    staleness=0
      updater="sum" | "assign" | "sgd" | "adagrad" | "ftrl"
      lr=0.1  beta=1.0  l1=0.0  l2=0.0  eps=1e-8  params=() (up to 8, for user updaters)
      init="zero" | "uniform" | "normal"  init_a=0.0  init_b=0.0  init_seed=0
      cache=True  flush_rows=0
      filter_push=None  filter_pull=None   filter specs "NAME[:ARG],..." (docs/FILTERS.md)
      bandwidth=0.0 (Mbit/s per process; 0: no budget)
      priority="none" | "random" | "roundrobin" | "abs" | "rel"  queue_rows=0 (0: 100)
        (managed communication, SSP and ASP tables: docs/USAGE.md#managed-communication)
    Every worker must open a table with the same options (else LoomError EMISMATCH)."""

    def __init__(self, node, name, **options):
        o = table_opts(**options)
        ptr = ctypes.c_void_p()
        call(_capi.lib.loom_table_open, node._handle(), name.encode(), ctypes.byref(o),
             ctypes.byref(ptr))
        self._ptr = ptr.value
        self.node = node
        self.name = name
        self.dtype = DTYPES[o.type]
        self.width = o.width
        self.key_range = (o.key_begin, o.key_end)

    def __repr__(self):
        return f"<loom.Table {self.name!r} {self.dtype} width {self.width}>"

    def _handle(self):
        self.node._handle()  # raises once the node has ended, and the table with it
        return self._ptr

    @property
    def options(self):
        """The table's options as C holds them (loom_table_options), as a dict."""
        o = _capi.lib.loom_table_options(self._handle()).contents
        return {
            "dtype": DTYPES[o.type],
            "width": o.width,
            "storage": STORAGE[o.storage],
            "key_range": (o.key_begin, o.key_end),
            "consistency": CONSISTENCY[o.consistency],
            "staleness": o.staleness,
            "updater": o.updater.decode(),
            "lr": o.lr, "beta": o.beta, "l1": o.l1, "l2": o.l2, "eps": o.eps,
            "params": tuple(o.params),
            "init": INIT[o.init],
            "init_a": o.init_a, "init_b": o.init_b, "init_seed": o.init_seed,
            "cache": bool(o.cache),
            "flush_rows": o.flush_rows,
            "filter_push": o.filter_push.decode() if o.filter_push else None,
            "filter_pull": o.filter_pull.decode() if o.filter_pull else None,
            "bandwidth": o.bandwidth_mbits,
            "priority": PRIORITY[o.priority],
            "queue_rows": o.queue_rows,
        }

    # ---- arrays ----

    def _rows_array(self, rows, what, out):
        """Check that `out` (writable) or the values to push hold rows * width values of the
        table's dtype, contiguously; return it as C will see it."""
        if not isinstance(out, np.ndarray):
            if what == "out":
                raise TypeError(f"out must be a numpy array, not {type(out).__name__}")
            out = np.asarray(out, dtype=self.dtype)  # a list: converting it is the copy
        if out.dtype != self.dtype:
            raise TypeError(f"{what} has dtype {out.dtype}; table {self.name!r} holds "
                            f"{self.dtype} (convert with .astype(np.{self.dtype}))")
        if out.size != rows * self.width:
            raise ValueError(f"{what} holds {out.size} values; {rows} row(s) of width "
                             f"{self.width} need {rows * self.width}")
        if not out.flags.c_contiguous:
            raise ValueError(f"{what} is not C-contiguous (pass np.ascontiguousarray(...)): "
                             "Loom reads and writes the array's own buffer")
        if what == "out" and not out.flags.writeable:
            raise ValueError("out is read-only")
        return out

    def _new_out(self, rows):
        shape = (rows,) if self.width == 1 else (rows, self.width)
        return np.empty(shape, dtype=self.dtype)

    def _range(self, begin, end):
        if not 0 <= begin <= end < 2**64:
            raise ValueError(f"bad key range [{begin}, {end})")
        return end - begin

    def _key_detail(self, keys):
        """Explain LOOM_EKEYRANGE: the first key outside the table's range."""
        begin, end = self.key_range

        def detail(rc):
            if rc != _EKEYRANGE:
                return ""
            inside = keys >= np.uint64(begin)
            if end:
                inside &= keys < np.uint64(end)
            bad = np.flatnonzero(~inside)
            where = f"key {keys[bad[0]]} (index {bad[0]}) is" if bad.size else "a key is"
            return f"{where} outside the range [{begin}, {end or 2**64}) of table {self.name!r}"

        return detail

    # ---- reading ----

    def pull(self, keys, out=None):
        """The rows of keys, into out (made if not given); returns out."""
        keys = _keys(keys)
        out = self._new_out(keys.size) if out is None else self._rows_array(keys.size, "out", out)
        call(_capi.lib.loom_pull, self._handle(), _address(keys), keys.size, _address(out),
             detail=self._key_detail(keys))
        return out

    def pull_async(self, keys, out=None):
        """Start a pull; Request.wait() returns out once it is filled."""
        keys = _keys(keys)
        out = self._new_out(keys.size) if out is None else self._rows_array(keys.size, "out", out)
        return self.node._start(_capi.lib.loom_pull_async,
                                (self._handle(), _address(keys), keys.size, _address(out)),
                                out, (keys, out), detail=self._key_detail(keys))

    def pull_range(self, begin, end, out=None):
        """Every row of keys [begin, end), into out; returns out."""
        n = self._range(begin, end)
        out = self._new_out(n) if out is None else self._rows_array(n, "out", out)
        call(_capi.lib.loom_pull_range, self._handle(), begin, end, _address(out))
        return out

    def pull_range_async(self, begin, end, out=None):
        n = self._range(begin, end)
        out = self._new_out(n) if out is None else self._rows_array(n, "out", out)
        return self.node._start(_capi.lib.loom_pull_range_async,
                                (self._handle(), begin, end, _address(out)), out, (out,))

    # ---- writing ----

    def push(self, keys, values):
        """Add deltas to the update buffer (sent at clock, flush, barrier or flush_rows)."""
        keys = _keys(keys)
        values = self._rows_array(keys.size, "values", values)
        call(_capi.lib.loom_push, self._handle(), _address(keys), keys.size, _address(values),
             detail=self._key_detail(keys))

    def push_async(self, keys, values):
        """Send deltas now; Request.wait() returns once the servers have them."""
        keys = _keys(keys)
        values = self._rows_array(keys.size, "values", values)
        return self.node._start(_capi.lib.loom_push_async,
                                (self._handle(), _address(keys), keys.size, _address(values)),
                                None, (keys, values), detail=self._key_detail(keys))

    def push_range_async(self, begin, end, values):
        n = self._range(begin, end)
        values = self._rows_array(n, "values", values)
        return self.node._start(_capi.lib.loom_push_range_async,
                                (self._handle(), begin, end, _address(values)), None, (values,))

    def flush(self):
        """Send the update buffer now; the Request completes when the servers have it."""
        return self.node._start(_capi.lib.loom_flush, (self._handle(),), None, ())
