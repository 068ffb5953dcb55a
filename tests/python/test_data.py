"""python.data: loom.read_libsvm and loom.read_ratings return Loom's C readers' shares as
numpy arrays: three shares of a file hold every row exactly once, in order, equal to the
file parsed here in Python (ratings: ids mapped to dense indices in ascending order of id);
a malformed line raises LoomError naming the file and line."""

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

ratings = os.path.join(work, "ratings.csv")
rng = np.random.default_rng(5)
table = [(int(rng.integers(-50, 500)), int(rng.integers(0, 40)) * 7, float(rng.integers(1, 11)) / 2)
         for _ in range(900)]
with open(ratings, "w") as f:
    f.write("userId,movieId,rating,timestamp\n")
    for u, i, r in table:
        f.write(f"{u},{i},{r},1234\n")
users, items = sorted({u for u, _, _ in table}), sorted({i for _, i, _ in table})
shares = [loom.read_ratings(ratings, s, 3) for s in range(3)]
got = [(int(s.user_id[s.user[k]]), int(s.item_id[s.item[k]]), float(s.rating[k]))
       for s in shares for k in range(len(s.user))]
if got != table or any(s.user_id.tolist() != users or s.item_id.tolist() != items
                       for s in shares):
    harness.fail("the ratings shares differ from the file")
if np.concatenate([s.line for s in shares]).tolist() != list(range(2, 902)):
    harness.fail("the ratings' line numbers are not 2..901")
print(f"3 shares of {len(table)} ratings, {len(users)} users, {len(items)} items: as parsed here")
with open(bad, "w") as f:
    f.write("1,2,3.5\n4,x,1\n")
try:
    loom.read_ratings(bad)
    harness.fail("a malformed ratings file was read without an error")
except loom.LoomError as e:
    if not e.detail.startswith(f"{bad}:2: "):
        harness.fail(f"error {e} does not name {bad}:2")
