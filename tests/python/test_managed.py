"""python.managed: the table options of managed communication and filters (filter_push,
filter_pull, bandwidth, priority, queue_rows) reach C as keyword arguments of node.table(),
and a job using them (2 workers, 2 servers, SSP(1), relative-magnitude priority under a
budget, zstd both ways) ends with exactly the sums of the pushes, computed again here.

Run without arguments it launches the job (loom.run) with itself as every process."""

import json
import os
import sys

import harness
import numpy as np

import loom

SERVERS, WORKERS, CLOCKS, KEYS, WIDTH = 2, 2, 6, 300, 4
OPTIONS = dict(dtype=np.float64, width=WIDTH, storage="dense", key_range=(0, KEYS),
               consistency="ssp", staleness=1, filter_push="zstd", filter_pull="zstd:3",
               bandwidth=40.0, priority="rel", queue_rows=16)


def delta(rank, clock):
    """Worker rank's push at clock: integers, so float64 sums are exact in any order."""
    k = np.arange(KEYS * WIDTH, dtype=np.float64).reshape(KEYS, WIDTH)
    return (rank + 1) * 1000 + (clock + 1) * 7 + k % 13


def worker(out_dir):
    node = loom.init()
    if not node.is_worker:
        node.serve()
        return
    t = node.table("managed", **OPTIONS)
    keys = np.arange(KEYS, dtype=np.uint64)
    for c in range(CLOCKS):
        t.pull(keys)  # rows in the cache: the servers push them as they change
        t.push(keys, delta(node.rank, c))
        node.clock()
    node.barrier()
    final = t.pull(keys)
    opts = {k: v for k, v in t.options.items() if k in
            ("filter_push", "filter_pull", "bandwidth", "priority", "queue_rows")}
    try:
        node.table("bad", priority="largest")
        bad = "accepted"
    except ValueError as e:
        bad = str(e)
    with open(os.path.join(out_dir, f"worker{node.rank}.json"), "w") as f:
        json.dump({"options": opts, "final": final.tolist(), "bad": bad}, f)
    node.finalize()


if len(sys.argv) == 3 and sys.argv[1] == "worker":
    worker(sys.argv[2])
    sys.exit(0)

out = harness.workdir()
try:
    loom.run([os.path.abspath(__file__), "worker", out], servers=SERVERS, workers=WORKERS,
             timeout=120, capture_output=True)
except loom.JobError as e:
    harness.fail(f"the job failed: {e}\n{e.stdout}\n{e.stderr}")
want = sum(delta(r, c) for r in range(WORKERS) for c in range(CLOCKS))
expected = {"filter_push": "zstd", "filter_pull": "zstd:3", "bandwidth": 40.0, "priority": "rel",
            "queue_rows": 16}
for rank in range(WORKERS):
    path = os.path.join(out, f"worker{rank}.json")
    if not os.path.exists(path):
        harness.fail(f"worker {rank} wrote no results")
    with open(path) as f:
        res = json.load(f)
    if res["options"] != expected:
        harness.fail(f"worker {rank}: C holds the options {res['options']}, want {expected}")
    if not np.array_equal(np.array(res["final"]), want):
        harness.fail(f"worker {rank}: final sums {res['final'][0]}..., want {want[0].tolist()}...")
    if "priority must be one of" not in res["bad"]:
        harness.fail(f"worker {rank}: an unknown priority gave {res['bad']!r}")
print(f"{WORKERS} workers, {SERVERS} servers, priority rel under 40 Mbit/s with zstd: "
      "options in C as given, sums exact")
