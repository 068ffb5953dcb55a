"""python.metrics: loom.read_metrics reads what `loom train lr --metrics` writes (one JSON
object per epoch, the keys docs/LR.md lists, null as None), and names the file and line of
a malformed line."""

import os
import subprocess

import harness

import loom

work = harness.workdir()
cli = os.environ["LOOM_CLI"]
data, metrics = os.path.join(work, "gen.svm"), os.path.join(work, "metrics.json")
for argv in ([cli, "gen", "lr", "--rows", "2000", "--features", "500", "--nnz", "8", "--quiet",
              "--out", data],
             [cli, "train", "lr", "--train", data, "--epochs", "3", "--workers", "2",
              "--quiet", "--metrics", metrics]):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode:
        harness.fail(f"{argv} failed:\n{done.stderr}")

rows = loom.read_metrics(metrics)
keys = {"epoch", "time_s", "objective", "train_logloss", "test_logloss", "test_accuracy",
        "test_auc", "nnz_weights", "examples_per_s", "bytes_sent", "bytes_received", "messages",
        "bytes_raw", "bytes_wire"}
if [r.get("epoch") for r in rows] != [1, 2, 3]:
    harness.fail(f"epochs {[r.get('epoch') for r in rows]}, not [1, 2, 3]")
for r in rows:
    if set(r) != keys or r["test_accuracy"] is not None or not r["objective"] > 0:
        harness.fail(f"metrics line {r}: keys {sorted(set(r) ^ keys)} differ, or the test "
                     "metrics are not null without --test")
if not rows[2]["objective"] < rows[0]["objective"]:
    harness.fail(f"the objective did not fall: {[r['objective'] for r in rows]}")
print(f"{len(rows)} epochs read; objective {rows[0]['objective']:.4f} -> {rows[2]['objective']:.4f}")

bad = os.path.join(work, "bad.json")
for text, message in (('{"epoch": 1}\n{"epoch": 2\n', f"{bad}:2: not JSON"),
                      ('{"epoch": 1}\n\n[1, 2]\n', f"{bad}:3: a metrics line must be a JSON object")):
    with open(bad, "w") as f:
        f.write(text)
    try:
        loom.read_metrics(bad)
        harness.fail(f"{text!r} was read without an error")
    except ValueError as e:
        if not str(e).startswith(message):
            harness.fail(f"error {e!r}, expected {message!r}")
print("malformed lines: the file and line named")
