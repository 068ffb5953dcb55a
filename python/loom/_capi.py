"""The C library libloom.so as ctypes sees it: where it is, and every function's signature.

The structures mirror include/loom/*.h field by field; tests/python/test_library.py
compares their offsets with the C compiler's (tests/python/layout.c), so a header change
that this file misses fails a test instead of corrupting memory.

The library is looked for, in this order: $LOOM_LIBRARY (a path; how the tests use the
build tree), the path recorded when the package was installed (_installed.py, written by
`cmake --install`), then the dynamic loader's own search for libloom.so.0.
"""

import ctypes
import operator
import os

LOOM_MAX_PARAMS = 8
LOOM_SECRET_LEN = 40

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
INT_MAX = 2**31 - 1


def integer(name, value, low, high):
    """value as an int in [low, high], or ValueError naming the option and the range.

    ctypes stores an integer into a C field or argument modulo its width without a word
    (width=2**32+1 would open a width-1 table), so every integer the package hands C goes
    through here first. operator.index takes ints and numpy integers, and refuses floats
    and strings with TypeError."""
    v = operator.index(value)
    if not low <= v <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, not {v}")
    return v


class TableOpts(ctypes.Structure):
    """loom_table_opts (include/loom/table.h)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("width", ctypes.c_uint32),
        ("storage", ctypes.c_int),
        ("key_begin", ctypes.c_uint64),
        ("key_end", ctypes.c_uint64),
        ("consistency", ctypes.c_int),
        ("staleness", ctypes.c_int),
        ("updater", ctypes.c_char_p),
        ("lr", ctypes.c_double),
        ("beta", ctypes.c_double),
        ("l1", ctypes.c_double),
        ("l2", ctypes.c_double),
        ("eps", ctypes.c_double),
        ("params", ctypes.c_double * LOOM_MAX_PARAMS),
        ("init", ctypes.c_int),
        ("init_a", ctypes.c_double),
        ("init_b", ctypes.c_double),
        ("init_seed", ctypes.c_uint64),
        ("cache", ctypes.c_int),
        ("flush_rows", ctypes.c_uint32),
        ("filter_push", ctypes.c_char_p),
        ("filter_pull", ctypes.c_char_p),
        ("bandwidth_mbits", ctypes.c_double),
        ("priority", ctypes.c_int),
        ("queue_rows", ctypes.c_uint32),
    ]


class Stats(ctypes.Structure):
    """loom_stats (include/loom/node.h)."""

    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "bytes_sent",
            "bytes_received",
            "messages_sent",
            "messages_received",
            "malformed_dropped",
            "connections_refused",
            "pulls_from_cache",
            "pulls_from_server",
            "table_messages",
            "table_bytes_raw",
            "table_bytes_wire",
            "managed_rows_sent",
            "pushed_rows_received",
            "replicated_bytes",
            "pushes_resent",
            "pushes_redirected",
        )
    ]


class Dataset(ctypes.Structure):
    """loom_dataset (include/loom/data.h)."""

    _fields_ = [
        ("rows", ctypes.c_size_t),
        ("nnz", ctypes.c_size_t),
        ("label", ctypes.POINTER(ctypes.c_double)),
        ("row", ctypes.POINTER(ctypes.c_size_t)),
        ("idx", ctypes.POINTER(ctypes.c_uint64)),
        ("val", ctypes.POINTER(ctypes.c_float)),
        ("max_feature", ctypes.c_uint64),
        ("skipped", ctypes.c_size_t),
        ("first_line", ctypes.c_size_t),
        ("bytes", ctypes.c_uint64),
    ]


class LibsvmOpts(ctypes.Structure):
    """loom_libsvm_opts (include/loom/data.h)."""

    _fields_ = [
        ("ids", ctypes.c_int),
        ("labels", ctypes.c_int),
        ("max_features", ctypes.c_uint64),
        ("skip_bad", ctypes.c_int),
    ]


class Ratings(ctypes.Structure):
    """loom_ratings (include/loom/data.h)."""

    _fields_ = [
        ("n", ctypes.c_size_t),
        ("user", ctypes.POINTER(ctypes.c_uint32)),
        ("item", ctypes.POINTER(ctypes.c_uint32)),
        ("rating", ctypes.POINTER(ctypes.c_float)),
        ("line", ctypes.POINTER(ctypes.c_uint64)),
        ("users", ctypes.c_size_t),
        ("items", ctypes.c_size_t),
        ("user_id", ctypes.POINTER(ctypes.c_int64)),
        ("item_id", ctypes.POINTER(ctypes.c_int64)),
        ("skipped", ctypes.c_size_t),
        ("first_line", ctypes.c_size_t),
        ("bytes", ctypes.c_uint64),
    ]


class RatingsOpts(ctypes.Structure):
    """loom_ratings_opts (include/loom/data.h)."""

    _fields_ = [("separator", ctypes.c_char), ("skip_bad", ctypes.c_int)]


def _find_library():
    path = os.environ.get("LOOM_LIBRARY")
    if path:
        return path
    try:
        from . import _installed
    except ImportError:
        return "libloom.so.0"
    return _installed.LIBRARY


def _load():
    path = _find_library()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"loom: cannot load the Loom library {path!r} ({e}); build Loom and set "
            "LOOM_LIBRARY=BUILD/libloom.so, or install it with `cmake --install BUILD` "
            "(docs/PYTHON.md)"
        ) from None
    return lib, path


lib, library_path = _load()

_p = ctypes.c_void_p
_int = ctypes.c_int
_size = ctypes.c_size_t
_u64 = ctypes.c_uint64
_ts_p = ctypes.POINTER(ctypes.c_uint64)

# name: (result type, argument types). ctypes.CDLL releases the GIL around every call, so a
# blocking pull, clock or barrier lets the process's other Python threads run.
_SIGNATURES = {
    "loom_strerror": (ctypes.c_char_p, [_int]),
    "loom_last_error": (ctypes.c_char_p, []),
    "loom_clear_last_error": (None, []),
    "loom_launched": (_int, []),
    "loom_init": (_int, [ctypes.POINTER(_p), _p, _p]),
    "loom_node_role": (_int, [_p]),
    "loom_is_worker": (_int, [_p]),
    "loom_rank": (_int, [_p]),
    "loom_num_workers": (_int, [_p]),
    "loom_num_servers": (_int, [_p]),
    "loom_node_address": (ctypes.c_char_p, [_p]),
    "loom_serve": (_int, [_p]),
    "loom_finalize": (_int, [_p]),
    "loom_clock": (_int, [_p]),
    "loom_current_clock": (ctypes.c_int64, [_p]),
    "loom_barrier": (_int, [_p]),
    "loom_wait": (_int, [_p, _u64]),
    "loom_test": (_int, [_p, _u64]),
    "loom_node_stats": (None, [_p, ctypes.POINTER(Stats)]),
    "loom_type_size": (_size, [_int]),
    "loom_table_open": (_int, [_p, ctypes.c_char_p, ctypes.POINTER(TableOpts), ctypes.POINTER(_p)]),
    "loom_table_name": (ctypes.c_char_p, [_p]),
    "loom_table_options": (ctypes.POINTER(TableOpts), [_p]),
    "loom_pull": (_int, [_p, _p, _size, _p]),
    "loom_pull_async": (_int, [_p, _p, _size, _p, _ts_p]),
    "loom_pull_range": (_int, [_p, _u64, _u64, _p]),
    "loom_pull_range_async": (_int, [_p, _u64, _u64, _p, _ts_p]),
    "loom_push": (_int, [_p, _p, _size, _p]),
    "loom_push_async": (_int, [_p, _p, _size, _p, _ts_p]),
    "loom_push_range_async": (_int, [_p, _u64, _u64, _p, _ts_p]),
    "loom_flush": (_int, [_p, _ts_p]),
    "loom_secret_generate": (_int, [ctypes.c_char_p, _int, ctypes.c_char_p, _size]),
    "loom_interface_address": (_int, [ctypes.c_char_p, ctypes.c_char_p, _size]),
    "loom_libsvm_read": (_int, [ctypes.c_char_p, _int, _int, ctypes.POINTER(LibsvmOpts),
                                ctypes.POINTER(ctypes.POINTER(Dataset)), ctypes.c_char_p, _size]),
    "loom_dataset_free": (None, [ctypes.POINTER(Dataset)]),
    "loom_ratings_read": (_int, [ctypes.c_char_p, _int, _int, ctypes.POINTER(RatingsOpts),
                                 ctypes.POINTER(ctypes.POINTER(Ratings)), ctypes.c_char_p, _size]),
    "loom_ratings_free": (None, [ctypes.POINTER(Ratings)]),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args
