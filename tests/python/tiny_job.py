"""A small job for tests/python/test_launch.py: each worker pushes rank + 1 into key 0 of a
sum table, and after a barrier prints the sum. With "fail", worker 0 instead pulls a key
outside the table's range and lets the LoomError end it."""

import sys

import numpy as np

import loom

node = loom.init()
if not node.is_worker:
    node.serve()
    sys.exit(0)
t = node.table("t", dtype=np.float64, key_range=(0, 10))
if sys.argv[1:] == ["fail"] and node.rank == 0:
    t.pull([99])
t.push([0], np.array([node.rank + 1.0]))
node.barrier()
print(f"sum {t.pull([0])[0]:g} of {node.num_workers} workers", flush=True)
node.finalize()
