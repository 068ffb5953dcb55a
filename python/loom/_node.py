"""Node and Request: one process of a Loom job, and an asynchronous operation in flight.

A Node wraps a loom_node*. Once it is finalized (or has served its job) the C node is gone,
and every later use raises LoomError(ESTATE) instead of touching freed memory.

Asynchronous pulls and pushes hand C the addresses of numpy arrays, which C reads or writes
until the operation completes. So that no Python code can free such an array early, the
node keeps a reference to the arrays of every operation in flight (Node._inflight, by
timestamp) until C says it completed (loom_test/loom_wait), whatever happens to the Request
or to the caller's own references. Finalizing drops them only after the C node is destroyed,
when nothing can write any more.
"""

import ctypes

from . import _capi
from ._errors import CODE_NAMES, LoomError, call

ROLES = ("scheduler", "server", "worker")
_ESTATE = CODE_NAMES.index("LOOM_ESTATE")


class Request:
    """An asynchronous pull, push or flush. wait() blocks until it completed and returns the
    pulled array (for pulls) or None; test() says whether it has, without blocking."""

    __slots__ = ("_node", "_ts", "_value", "_status", "_detail", "_what")

    def __init__(self, node, ts, value, what):
        self._node = node
        self._ts = ts
        self._value = value
        self._status = None  # the C result once known
        self._detail = ""  # and what the node said about a failure
        self._what = what

    @property
    def timestamp(self):
        return self._ts

    def test(self):
        if self._status is None:
            ptr = self._node._handle()
            if not _capi.lib.loom_test(ptr, self._ts):
                return False
            self._finish(_capi.lib.loom_wait(ptr, self._ts))
        return True

    def wait(self):
        if self._status is None:
            _capi.lib.loom_clear_last_error()
            self._finish(_capi.lib.loom_wait(self._node._handle(), self._ts))
        if self._status:
            raise LoomError(self._status, self._detail, self._what)
        return self._value

    def _finish(self, status):
        self._status = status
        if status:
            self._detail = _capi.lib.loom_last_error().decode(errors="replace")
        self._node._inflight.pop(self._ts, None)

    def __repr__(self):
        state = "pending" if self._status is None else f"done ({self._status})"
        return f"<loom.Request {self._what} ts={self._ts} {state}>"


class Node:
    """One process of a job: its role, rank and the job's size; clock, barrier, tables.

    Made by loom.init(). Workers open tables and end with finalize(); the scheduler and the
    servers call serve(), which returns when every worker has finalized."""

    def __init__(self, ptr):
        self._ptr = ptr
        self._inflight = {}  # timestamp -> the arrays C may still use
        self._sweep_at = 64
        self.role = ROLES[_capi.lib.loom_node_role(ptr)]
        self.rank = _capi.lib.loom_rank(ptr)
        self.num_workers = _capi.lib.loom_num_workers(ptr)
        self.num_servers = _capi.lib.loom_num_servers(ptr)
        self.address = _capi.lib.loom_node_address(ptr).decode()

    @property
    def is_worker(self):
        return self.role == "worker"

    def _handle(self):
        if self._ptr is None:
            raise LoomError(_ESTATE, "this node was finalized (or has served its job)")
        return self._ptr

    def __repr__(self):
        state = "" if self._ptr else " (ended)"
        return f"<loom.Node {self.role} {self.rank} of a job with {self.num_servers} " \
               f"server(s) and {self.num_workers} worker(s){state}>"

    # ---- the job's lifecycle ----

    def serve(self):
        """Scheduler and servers: serve the job until every worker has finished."""
        ptr = self._handle()
        self._ptr = None
        call(_capi.lib.loom_serve, ptr)

    def finalize(self):
        """Workers: flush pending updates, wait for the servers, leave the job."""
        ptr = self._handle()
        self._ptr = None
        try:
            call(_capi.lib.loom_finalize, ptr)
        finally:
            # The C node is destroyed (also on failure): nothing writes into our arrays now.
            self._inflight.clear()

    # ---- clocks ----

    def clock(self):
        """End of this worker's iteration; blocks as the tables' consistency requires."""
        call(_capi.lib.loom_clock, self._handle())

    @property
    def current_clock(self):
        return _capi.lib.loom_current_clock(self._handle())

    def barrier(self):
        """Flush every table, wait for every worker; later pulls see every earlier push."""
        call(_capi.lib.loom_barrier, self._handle())

    def wait(self, request):
        return request.wait()

    def test(self, request):
        return request.test()

    def stats(self):
        """Traffic and cache counters of this node (loom_stats) as a dict."""
        s = _capi.Stats()
        _capi.lib.loom_node_stats(self._handle(), ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in _capi.Stats._fields_}

    def table(self, name, **options):
        """Open (creating on first use) the table `name`; see loom.Table for the options."""
        from ._table import Table

        return Table(self, name, **options)

    # ---- asynchronous operations (used by Table) ----

    def _start(self, fn, args, value, buffers, detail=None):
        """Call an asynchronous C function whose last argument is loom_ts*; keep buffers alive
        until it completes and return its Request."""
        ts = ctypes.c_uint64(0)
        call(fn, *args, ctypes.byref(ts), detail=detail)
        if len(self._inflight) >= self._sweep_at:
            self._sweep()
        self._inflight[ts.value] = buffers
        return Request(self, ts.value, value, fn.__name__)

    def _sweep(self):
        """Forget the arrays of completed operations (their Requests, if any, keep their own)."""
        for ts in [ts for ts in list(self._inflight) if _capi.lib.loom_test(self._ptr, ts)]:
            self._inflight.pop(ts, None)  # another thread's wait() may have taken it
        self._sweep_at = max(64, 2 * len(self._inflight))


def init():
    """Start this process's node from the launch environment (loom_init): `loom run`,
    loom.run(), mpirun or srun set it (docs/LAUNCHING.md). Returns once the whole job has
    registered."""
    ptr = ctypes.c_void_p()
    call(_capi.lib.loom_init, ctypes.byref(ptr), None, None)
    return Node(ptr.value)


def launched():
    """True if this process was started as one node of a job (loom_launched)."""
    return bool(_capi.lib.loom_launched())
