"""python.data: loom.read_libsvm returns Loom's C reader's shares as numpy arrays: three
shares of a generated file hold every row exactly once, in order, equal to the file parsed
here in Python; a malformed line raises LoomError naming the file and line."""

import os
import subprocess

import harness
import numpy as np

import loom

work = harness.workdir()
path = os.path.join(work, "gen.svm")
done = subprocess.run([os.environ["LOOM_CLI"], "gen", "lr", "--rows", "3000", "--features",
                       "400", "--nnz", "9", "--quiet", "--out", path], capture_output=True,
                      text=True, timeout=120)
if done.returncode:
    harness.fail(f"loom gen lr failed: {done.stderr}")

labels, rows = [], []
with open(path) as f:
    for line in f:
        fields = line.split()
        labels.append(1.0 if float(fields[0]) > 0 else -1.0)
        rows.append([(int(p.split(":")[0]) - 1, float(p.split(":")[1])) for p in fields[1:]])

shares = [loom.read_libsvm(path, s, 3) for s in range(3)]
got_labels = np.concatenate([s.label for s in shares])
got_rows = [list(zip(s.idx[s.row[i]:s.row[i + 1]].tolist(), s.val[s.row[i]:s.row[i + 1]].tolist()))
            for s in shares for i in range(len(s.label))]
if got_labels.tolist() != labels or got_rows != rows:
    harness.fail(f"the shares hold {len(got_labels)} rows that differ from the file's {len(labels)}")
if [s.first_line for s in shares] != [1, 1 + len(shares[0].label),
                                      1 + len(shares[0].label) + len(shares[1].label)]:
    harness.fail(f"first lines {[s.first_line for s in shares]}")
if sum(s.bytes for s in shares) != os.path.getsize(path) or not all(len(s.label) for s in shares):
    harness.fail(f"shares cover {[s.bytes for s in shares]} of {os.path.getsize(path)} bytes")
if max(s.max_feature for s in shares) != 1 + max(i for r in rows for i, _ in r):
    harness.fail("max_feature is not 1 + the largest feature id")
print(f"3 shares of {len(labels)} rows: every row once, as parsed here")

bad = os.path.join(work, "bad.svm")
with open(bad, "w") as f:
    f.write("+1 1:1 2:0.5\n-1 3:x\n")
try:
    loom.read_libsvm(bad)
    harness.fail("a malformed file was read without an error")
except loom.LoomError as e:
    if not e.detail.startswith(f"{bad}:2: ") or e.code != loom.EINVAL:
        harness.fail(f"error {e} does not name {bad}:2")
    print(f"malformed file: {e}")
