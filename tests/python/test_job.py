"""python.job: a multi-process job launched from Python (loom.run) whose workers check
BSP sums, zero copy, asynchronous pulls, the updaters and errors (tests/python/job_worker.py);
here, every worker's final sums must equal the pushes, computed again in this test."""

import json
import os

import harness
import numpy as np

import loom

SERVERS, WORKERS, CLOCKS, KEYS = 2, 3, 4, 50
out = harness.workdir()
try:
    loom.run([os.path.join(harness.HERE, "job_worker.py"), out, str(CLOCKS)], servers=SERVERS,
             workers=WORKERS, timeout=120, capture_output=True)
except loom.JobError as e:
    harness.fail(f"the job failed: {e}\n{e.stdout}\n{e.stderr}")

k = np.arange(KEYS, dtype=np.int64)
want = sum((r + 1) * 1000003 + (c + 1) * 1009 * k + 7 for r in range(WORKERS) for c in range(CLOCKS))
want[:4] += WORKERS  # the push_async of ones of every worker
for rank in range(WORKERS):
    path = os.path.join(out, f"worker{rank}.json")
    if not os.path.exists(path):
        harness.fail(f"worker {rank} wrote no results")
    with open(path) as f:
        res = json.load(f)
    if res["checks"] != ["bsp", "zero_copy", "async", "updaters", "errors"]:
        harness.fail(f"worker {rank} ran checks {res['checks']}")
    if res["workers"] != WORKERS or res["final"] != want.tolist():
        harness.fail(f"worker {rank}: final sums {res['final'][:4]}..., want {want[:4]}...")
print(f"{WORKERS} workers, {SERVERS} servers: every check passed, sums exact")
