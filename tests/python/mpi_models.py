"""Run by every rank of `mpirun -np 4` in python.models_mpirun: fit joins the job as this
rank; the rank of worker 0 prints its test accuracy, the others that they hold no model."""
import sys

import numpy as np

from loom.models import LogisticRegression

rng = np.random.default_rng(7)
w = rng.normal(size=50)
X = (rng.random((4000, 50)) < 0.2).astype(float)
y = np.where(X @ w + rng.logistic(size=4000) > 0, 1, -1)
clf = LogisticRegression(epochs=5, servers=1).fit(X[:3000], y[:3000])
if clf.fitted_:
    print(f"fitted: accuracy {clf.score(X[3000:], y[3000:]):.4f}")
else:
    print("not fitted on this rank")
sys.stdout.flush()
