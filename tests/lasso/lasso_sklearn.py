"""Compare a model of `loom train lasso` with scikit-learn's Lasso on the same data.

Usage: lasso_sklearn.py DATA.svm MODEL METRICS.jsonl [--no-intercept]

Loom reads feature values as 32-bit floats (loom_dataset.val), so X is cast
to float32 and back before scikit-learn sees it: both then minimise the very
same function, 1/(2n) ||y - b - X beta||^2 + lambda ||beta||_1 with an
unpenalised intercept b (scikit-learn's Lasso with alpha = lambda), or with
b = 0 for a model trained with --no-intercept (fit_intercept=False). Both
objectives are evaluated here, in one way, and must agree within 1e-6
relative; the last metrics line's objective must be Loom's objective
recomputed here, within 1e-9 relative. Exit 1 with the numbers if not.
"""
import json
import sys

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.linear_model import Lasso


def load_model(path):
    """beta, lambda and the intercept (0 in a version 1 file) of a Loom Lasso model."""
    with open(path) as f:
        head = f.readline().split()
        assert head[0] == "loom-lasso" and head[1] in ("1", "2"), head
        fields = dict(kv.split("=") for kv in head[2:])
        beta = np.zeros(int(fields["dim"]))
        for line in f:
            j, b = line.split()
            beta[int(j)] = float(b)
    return beta, float(fields["lambda"]), float(fields.get("intercept", 0))


def main():
    data, model, metrics = sys.argv[1:4]
    intercept = "--no-intercept" not in sys.argv[4:]
    X, y = load_svmlight_file(data)
    X = X.astype(np.float32).astype(np.float64)
    beta, lam, b = load_model(model)
    X = X[:, : len(beta)] if X.shape[1] > len(beta) else X
    n = X.shape[0]

    def objective(coef, icpt):
        r = y - icpt - X @ coef
        return r @ r / (2 * n) + lam * np.abs(coef).sum()

    fit = Lasso(alpha=lam, fit_intercept=intercept, tol=1e-12, max_iter=1000000,
                selection="cyclic")
    fit.fit(X, y)
    ours, theirs = objective(beta, b), objective(fit.coef_, fit.intercept_)
    with open(metrics) as f:
        reported = json.loads(f.readlines()[-1])["objective"]
    nnz_ours, nnz_theirs = int((beta != 0).sum()), int((fit.coef_ != 0).sum())
    print(f"{data}: n={n} p={X.shape[1]} lambda={lam:.6g}  loom {ours:.12g} (nnz {nnz_ours}, "
          f"intercept {b:.9g})  sklearn {theirs:.12g} (nnz {nnz_theirs}, intercept "
          f"{float(fit.intercept_):.9g})  rel diff {(ours - theirs) / theirs:.3g}")
    ok = True
    if abs(ours - theirs) > 1e-6 * abs(theirs):
        print("FAIL: the objectives differ by more than 1e-6 relative")
        ok = False
    if abs(reported - ours) > 1e-9 * abs(ours):
        print(f"FAIL: the metrics file says objective {reported!r}, recomputed {ours!r}")
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
