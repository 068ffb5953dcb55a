"""One process of the job tests/python/test_job.py launches with loom.run().

Scheduler and servers serve. Each worker checks, asserting against values computed here:
  - BSP: a pull at clock c holds exactly every worker's pushes of clocks < c (int64 table);
  - zero copy: pull, push and pull_async hand C the address of the caller's array, a view
    into a bigger array included, and pulls write into it in place;
  - asynchronous pulls return the right rows, and their arrays stay alive until they
    complete even when the caller drops every reference (weakref);
  - each built-in updater, by name, gives its formula (docs/USAGE.md) on this worker's keys;
  - errors raise LoomError with the code and the node's message;
then writes OUT_DIR/worker<rank>.json with the final sums, for the test to check.
"""

import gc
import json
import math
import os
import sys
import weakref

import numpy as np

import loom
from loom import _capi

out_dir = sys.argv[1]
clocks = int(sys.argv[2])
KEYS = 50

node = loom.init()
if not node.is_worker:
    node.serve()
    sys.exit(0)

W, rank = node.num_workers, node.rank
checks = []


def delta(r, c, k):
    """What worker r pushes to key k at clock c: distinct for every (r, c, k)."""
    return (r + 1) * 1000003 + (c + 1) * 1009 * k + 7


# ---- BSP: exact sums, clock by clock ----
sums = node.table("sums", dtype=np.int64, width=2, storage="dense", key_range=(0, KEYS),
                  consistency="bsp")
keys = np.arange(KEYS, dtype=np.uint64)
for c in range(clocks):
    got = sums.pull(keys)
    want = sum(delta(r, cc, np.arange(KEYS, dtype=np.int64)) for r in range(W) for cc in range(c))
    want = np.zeros(KEYS, np.int64) + want
    assert got.shape == (KEYS, 2), got.shape
    assert (got[:, 0] == want).all() and (got[:, 1] == 2 * want).all(), \
        f"clock {c}: pulled {got[:3, 0]}..., want {want[:3]}..."
    vals = np.empty((KEYS, 2), np.int64)
    vals[:, 0] = delta(rank, c, np.arange(KEYS, dtype=np.int64))
    vals[:, 1] = 2 * vals[:, 0]
    sums.push(keys, vals)
    node.clock()
checks.append("bsp")

# ---- zero copy: the address C receives is the array's own ----
seen = {}


def spy(name):
    real = getattr(_capi.lib, name)

    def wrapper(*args):
        seen[name] = args
        return real(*args)

    wrapper.__name__ = name
    setattr(_capi.lib, name, wrapper)
    return real


big = np.full((KEYS + 20, 2), -1, dtype=np.int64)
view = big[10 : 10 + KEYS]  # a view into big: C must write into big's buffer
real_pull = spy("loom_pull")
returned = sums.pull(keys, out=view)
setattr(_capi.lib, "loom_pull", real_pull)
assert returned is view
assert seen["loom_pull"][1] == keys.ctypes.data, "keys were copied before reaching C"
assert seen["loom_pull"][3] == view.ctypes.data == big.ctypes.data + 10 * 2 * 8, \
    "out was not passed as the view's own buffer"
final = sum(delta(r, c, np.arange(KEYS, dtype=np.int64)) for r in range(W) for c in range(clocks))
assert (big[10 : 10 + KEYS, 0] == final).all(), "the pull did not land in the caller's array"
assert (big[:10] == -1).all() and (big[10 + KEYS :] == -1).all(), "the pull wrote outside the view"

real_push = spy("loom_push_async")
grad = np.ones((4, 2), dtype=np.int64)
req = sums.push_async(keys[:4], grad)
setattr(_capi.lib, "loom_push_async", real_push)
assert seen["loom_push_async"][1] == keys.ctypes.data and seen["loom_push_async"][3] == grad.ctypes.data
req.wait()
checks.append("zero_copy")

# ---- asynchronous pulls: right rows, arrays alive until complete ----
node.clock()  # a BSP table applies the push_async above when the clock ends everywhere
shuffled = np.array([3, 0, 49, 3, 17], dtype=np.uint64)
out = np.empty((5, 2), dtype=np.int64)
alive = weakref.ref(out)
real_async = spy("loom_pull_async")
req = sums.pull_async(shuffled, out=out)
setattr(_capi.lib, "loom_pull_async", real_async)
assert seen["loom_pull_async"][3] == out.ctypes.data
del out
gc.collect()
assert alive() is not None, "the pull's array was freed while C may still write it"
result = req.wait()
assert result is alive()
plus = np.array([W if k < 4 else 0 for k in shuffled])  # each worker added 1 to keys 0..3
expect = np.stack([final[shuffled.astype(int)] + plus, 2 * final[shuffled.astype(int)] + plus], 1)
assert (result == expect).all(), (result, expect)
assert req.test() and req.wait() is result  # a second wait returns the same, at once
del result, req
gc.collect()
assert alive() is None, "the pull's array was kept after it completed and was waited"

# A request the caller drops at once: the node keeps its arrays until C is done with them.
out = np.empty((KEYS, 2), dtype=np.int64)
alive = weakref.ref(out)
sums.pull_async(keys, out=out)
del out
gc.collect()
assert alive() is not None, "a dropped request's array was freed"
many = [sums.pull_range_async(0, KEYS) for _ in range(100)]  # > 64 in flight: sweeps run
for r in many:
    got = r.wait()
    assert (got[:4, 0] == final[:4] + W).all() and (got[4:, 0] == final[4:]).all()
checks.append("async")

# ---- the built-in updaters, by name, on keys only this worker writes ----
g = np.array([0.5, -2.0, 3.0], dtype=np.float32)
mine = np.arange(3, dtype=np.uint64) + 10 * rank
lr, beta, l1, l2, eps = 0.3, 1.0, 0.6, 0.2, 1e-8


def ftrl(gi):
    sigma = math.sqrt(gi * gi) / lr
    z = gi - sigma * 0.0
    n = gi * gi
    return 0.0 if abs(z) <= l1 else -(z - math.copysign(l1, z)) / ((beta + math.sqrt(n)) / lr + l2)


formulas = {
    "sum": lambda gi: gi,
    "assign": lambda gi: gi,
    "sgd": lambda gi: -lr * gi,
    "adagrad": lambda gi: -lr * gi / (math.sqrt(gi * gi) + eps),
    "ftrl": ftrl,
}
tables = {}
for name in loom.UPDATERS:
    t = node.table("upd_" + name, dtype=np.float32, updater=name, lr=lr, beta=beta, l1=l1,
                   l2=l2, eps=eps, key_range=(0, 10 * W), consistency="asp")
    assert t.options["updater"] == name and t.options["lr"] == lr
    t.push(mine, g)
    tables[name] = t
node.barrier()
for name, t in tables.items():
    got = t.pull(mine)
    want = np.array([formulas[name](float(x)) for x in g])
    assert np.allclose(got, want, rtol=1e-6, atol=1e-7), f"{name}: {got} != {want}"
checks.append("updaters")

# ---- errors carry the code and the node's message ----
def raises(code, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except loom.LoomError as e:
        assert e.code == code, f"{e.name}, not {loom.CODE_NAMES[code]}: {e}"
        return e
    raise AssertionError(f"no LoomError {loom.CODE_NAMES[code]}")


e = raises(loom.ENOTFOUND, node.table, "nope", updater="no_such_updater")
assert 'no updater named "no_such_updater"' in e.detail and e.call == "loom_table_open", str(e)
assert "no such updater or table" in str(e) and "LOOM_ENOTFOUND" in str(e), str(e)
e = raises(loom.EINVAL, node.table, "bad_lr", updater="sgd", lr=0)
assert 'updater "sgd" needs a learning rate lr > 0' in str(e), str(e)
e = raises(loom.EKEYRANGE, sums.pull, np.array([1, 2, KEYS + 5], dtype=np.uint64))
assert f"key {KEYS + 5} (index 2) is outside the range [0, {KEYS}) of table 'sums'" in e.detail, \
    str(e)
try:
    sums.push(keys[:2], np.zeros((2, 2), dtype=np.float64))
    raise AssertionError("a float64 push into an int64 table was accepted")
except TypeError as te:
    assert "table 'sums' holds int64" in str(te), str(te)
checks.append("errors")

with open(os.path.join(out_dir, f"worker{rank}.json"), "w") as f:
    json.dump({"rank": rank, "workers": W, "checks": checks,
               "final": sums.pull(keys)[:, 0].tolist()}, f)
node.finalize()
raises(loom.ESTATE, node.clock)
raises(loom.ESTATE, sums.pull, keys)
