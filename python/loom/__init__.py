"""Loom from Python: a parameter server with numpy arrays passed to C without copies.

    import loom, numpy as np
    node = loom.init()                         # role and job from `loom run`'s environment
    if not node.is_worker:
        node.serve()                           # scheduler and servers
        raise SystemExit
    w = node.table("weights", dtype=np.float32, consistency="ssp", staleness=2,
                   updater="adagrad", lr=0.1)
    keys = np.array([3, 17, 42], dtype=np.uint64)
    vals = w.pull(keys)                        # a float32 array filled by C in place
    w.push(keys, grad)                         # grad: float32, len(keys) * width values
    node.clock()
    node.finalize()

Run it with `loom run --workers 4 -- python3 prog.py`, `python3 -m loom run --workers 4
prog.py` or loom.run("prog.py", workers=4). docs/PYTHON.md has the whole API.
"""

from ._capi import library_path
from ._errors import CODE_NAMES, LoomError
from ._launch import JobError, interface_address, run, secret_generate
from ._node import Node, Request, init, launched
from ._table import UPDATERS, Table
from .data import Dataset, Ratings, read_libsvm, read_ratings
from .metrics import read_metrics

# The error codes, as loom.EKEYRANGE etc.
for _code, _name in enumerate(CODE_NAMES):
    globals()[_name[len("LOOM_"):]] = _code
del _code, _name

__all__ = ["init", "launched", "Node", "Table", "Request", "LoomError", "JobError", "run",
           "secret_generate", "interface_address",
           "read_metrics", "read_libsvm", "Dataset",
           "read_ratings", "Ratings", "UPDATERS", "library_path"] + [n[len("LOOM_"):] for n in CODE_NAMES]
