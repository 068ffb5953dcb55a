"""python.lr_a9a: the Python LR example (python/examples/logistic_regression.py) reaches the
C app's accuracy on a9a: `loom train lr` and the example, both on 2 servers and 4 workers,
SSP(2), adagrad with lr 0.1, 6 epochs of minibatches of 100, end within 0.005 of each other
in test accuracy (both are stochastic: the workers' interleaving changes the stale reads),
and each at least 0.845 (liblinear's L2 logistic regression: 0.8495). Reads both metrics
files with loom.read_metrics. Skipped without ../shared/data/a9a."""

import os
import subprocess

import harness

import loom

TOLERANCE, FLOOR = 0.005, 0.845
data = os.path.join(harness.shared_data(), "a9a")
train, test = os.path.join(data, "a9a"), os.path.join(data, "a9a.t")
if not (os.path.exists(train) and os.path.exists(test)):
    harness.skip(f"{data} not found (the shared datasets are not part of a clone)")
work = harness.workdir()
c_metrics, py_metrics = os.path.join(work, "c.json"), os.path.join(work, "py.json")
flags = ["--train", train, "--test", test, "--epochs", "6", "--minibatch", "100",
         "--updater", "adagrad", "--lr", "0.1"]

done = subprocess.run([os.environ["LOOM_CLI"], "train", "lr", *flags, "--workers", "4",
                       "--servers", "2", "--consistency", "ssp:2", "--metrics", c_metrics],
                      capture_output=True, text=True, timeout=240)
if done.returncode:
    harness.fail(f"loom train lr failed:\n{done.stderr}")
example = os.path.join(harness.HERE, "..", "..", "python", "examples", "logistic_regression.py")
try:
    loom.run([example, *flags, "--staleness", "2", "--metrics", py_metrics], servers=2,
             workers=4, timeout=240, capture_output=True)
except loom.JobError as e:
    harness.fail(f"the Python example failed: {e}")

c_rows, py_rows = loom.read_metrics(c_metrics), loom.read_metrics(py_metrics)
if [r["epoch"] for r in py_rows] != list(range(1, 7)) or len(c_rows) != 6:
    harness.fail(f"expected 6 epochs of metrics: C {len(c_rows)}, Python {py_rows}")
c_acc, py_acc = c_rows[-1]["test_accuracy"], py_rows[-1]["test_accuracy"]
print(f"test accuracy after 6 epochs: loom train lr {c_acc:.4f}, Python example {py_acc:.4f}")
if abs(c_acc - py_acc) > TOLERANCE or min(c_acc, py_acc) < FLOOR:
    harness.fail(f"accuracies {c_acc:.4f} (C) and {py_acc:.4f} (Python) differ by more than "
                 f"{TOLERANCE} or one is below {FLOOR}")
