"""python.models: loom.models' estimators against scikit-learn and the C commands.

- LogisticRegression on a9a (scipy.sparse from sklearn's LIBSVM reader), 1 worker: its test
  accuracy equals `loom predict lr` on the model `loom train lr` saves with the same flags,
  within 0.005 (the same job), and scikit-learn's LogisticRegression(C=1) within 0.005;
  the callback gets every epoch's metrics line, in order; a path as X gives the same model
  as the arrays; 2 workers also within 0.005 of scikit-learn; the serverless SVM within 0.01.
- get_params/set_params/clone and scikit-learn's check_parameters_default_constructible and
  check_get_params_invariance.
- Lasso on abalone: sequential=True and a 2-worker job, both to a tight tolerance, reach
  scikit-learn's Lasso(alpha=lambda) objective within 1e-6 relative.
- MatrixFactorization on `loom gen mf` ratings (numpy rows), 2 workers (the rotation): the
  held-out RMSE of its predictions is within 0.05 of the planted model's (`loom predict mf`).
- MultinomialLR on a generated 5-class set: accuracy within 0.02 of scikit-learn's
  multinomial LogisticRegression.
- LDA on a generated corpus (count matrix): the counts sum to the corpus's tokens, every
  topic's components_ row and every transform row sum to 1.
- A job that fails raises loom.JobError, a loom.LoomError, carrying the job's message.
Skipped without scikit-learn or ../shared/data."""

import os
import subprocess

import harness
import numpy as np

try:
    import sklearn  # noqa: F401
    from sklearn.base import clone
    from sklearn.datasets import load_svmlight_file
    from sklearn.linear_model import Lasso as SkLasso
    from sklearn.linear_model import LogisticRegression as SkLR
    from sklearn.utils.estimator_checks import (check_get_params_invariance,
                                                check_parameters_default_constructible)
except ImportError:
    harness.skip("scikit-learn is missing (Debian: apt-get install python3-sklearn)")

import loom
from loom.models import SVM, LDA, Lasso, LogisticRegression, MatrixFactorization, MultinomialLR

CLI = os.environ["LOOM_CLI"]
data = harness.shared_data()
a9a, a9a_t = os.path.join(data, "a9a", "a9a"), os.path.join(data, "a9a", "a9a.t")
abalone = os.path.join(data, "abalone", "abalone_scale")
if not all(os.path.exists(p) for p in (a9a, a9a_t, abalone)):
    harness.skip(f"a9a or abalone not found in {data} (the shared datasets are not in a clone)")
work = harness.workdir()


def cli(*args):
    done = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=240)
    if done.returncode:
        harness.fail(f"loom {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout + done.stderr


# ---- LogisticRegression on a9a ----
X, y = load_svmlight_file(a9a, n_features=123)
Xt, yt = load_svmlight_file(a9a_t, n_features=123)
seen = []
clf = LogisticRegression(epochs=8, seed=3).fit(X, y, callback=seen.append)
acc = clf.score(Xt, yt)
if [row["epoch"] for row in seen] != list(range(1, 9)) or seen != clf.history_:
    harness.fail(f"the callback saw epochs {[row.get('epoch') for row in seen]}, not 1..8")
cli("train", "lr", "--train", a9a, "--epochs", "8", "--seed", "3", "--workers", "1",
    "--model-out", os.path.join(work, "lr.model"), "--quiet")
out = cli("predict", "lr", "--model", os.path.join(work, "lr.model"), "--data", a9a_t)
c_acc = float(out.split("accuracy")[1].split()[0])
sk_acc = SkLR(C=1.0, max_iter=2000).fit(X, y).score(Xt, yt)
print(f"a9a: loom.models {acc:.4f}, loom train lr {c_acc:.4f}, scikit-learn {sk_acc:.4f}")
if abs(acc - c_acc) > 0.005 or abs(acc - sk_acc) > 0.005:
    harness.fail(f"accuracy {acc} is not within 0.005 of loom train lr's {c_acc} and "
                 f"scikit-learn's {sk_acc}")
by_path = LogisticRegression(epochs=8, seed=3).fit(a9a)
if not np.array_equal(by_path.predict(Xt), clf.predict(Xt)):
    harness.fail("fit on the file's path and on its arrays gave different predictions")
proba = clf.predict_proba(Xt[:5])
if proba.shape != (5, 2) or not np.allclose(proba.sum(axis=1), 1):
    harness.fail(f"predict_proba rows do not sum to 1: {proba}")
two = LogisticRegression(epochs=8, workers=2, servers=2).fit(X, y)
if abs(two.score(Xt, yt) - sk_acc) > 0.005:
    harness.fail(f"2 workers: accuracy {two.score(Xt, yt)} not within 0.005 of {sk_acc}")

svm = SVM(epochs=3).fit(X, y)  # serverless, 2 workers
if abs(svm.score(Xt, yt) - sk_acc) > 0.01:
    harness.fail(f"SVM: accuracy {svm.score(Xt, yt)} not within 0.01 of {sk_acc}")

# ---- scikit-learn's conventions ----
copy = clone(LogisticRegression(epochs=3, l1=0.5, workers=2))
if copy.get_params()["l1"] != 0.5 or copy.get_params()["workers"] != 2:
    harness.fail(f"clone lost parameters: {copy.get_params()}")
if copy.set_params(epochs=5).epochs != 5:
    harness.fail("set_params did not set epochs")
for Estimator in (LogisticRegression, SVM, Lasso, MatrixFactorization, MultinomialLR, LDA):
    check_parameters_default_constructible(Estimator.__name__, Estimator())
    check_get_params_invariance(Estimator.__name__, Estimator())


# ---- Lasso on abalone against scikit-learn ----
def objective(A, b, coef, intercept, lam):
    r = b - A @ coef - intercept
    return 0.5 * np.mean(r ** 2) + lam * np.abs(coef).sum()


A, b = load_svmlight_file(abalone)
A = A.toarray().astype(np.float32).astype(float)  # Loom reads values as float32
lam = 0.1  # where the distributed job converges in a few hundred rounds (0.01: 40,000)
sk = SkLasso(alpha=lam, tol=1e-12, max_iter=100000).fit(A, b)
best = objective(A, b, sk.coef_, sk.intercept_, lam)
seq = Lasso(lambda_=lam, tol=1e-12, iterations=100000, sequential=True).fit(A, b)
dist = Lasso(lambda_=lam, tol=1e-10, iterations=20000).fit(A, b)
for name, model, bound in (("sequential", seq, 1e-6), ("2 workers", dist, 1e-6)):
    got = objective(A, b, model.coef_[:A.shape[1]], model.intercept_, lam)
    print(f"abalone lasso, {name}: objective {got:.9f}, scikit-learn {best:.9f}")
    if got > best * (1 + bound):
        harness.fail(f"lasso {name}: objective {got} not within {bound} of scikit-learn's {best}")

# ---- MatrixFactorization on generated ratings ----
ratings, planted = os.path.join(work, "r.tsv"), os.path.join(work, "planted")
cli("gen", "mf", "--out", ratings, "--users", "1000", "--items", "1500", "--ratings", "150000",
    "--rank", "4", "--noise", "0.5", "--seed", "2", "--planted-out", planted, "--quiet")
R = np.loadtxt(ratings, usecols=(0, 1, 2))
train, held = R[np.arange(len(R)) % 10 != 0], R[np.arange(len(R)) % 10 == 0]
mf = MatrixFactorization(rank=4, epochs=20, reg=0.05, init_std=0.5, workers=2).fit(train)
rmse = -mf.score(held)
np.savetxt(os.path.join(work, "held.tsv"), held, fmt="%d\t%d\t%.1f")
best = float(cli("predict", "mf", "--model", planted, "--data",
                 os.path.join(work, "held.tsv")).split("rmse")[1].split()[0])
print(f"generated ratings: held-out rmse {rmse:.4f}, planted model {best:.4f}")
if not rmse <= best + 0.05:
    harness.fail(f"mf: held-out rmse {rmse} not within 0.05 of the planted model's {best}")

# ---- MultinomialLR on a generated 5-class set ----
rng = np.random.default_rng(5)
W = rng.normal(size=(20, 5)) * 2
F = (rng.random((3000, 20)) < 0.3).astype(float)
labels = np.argmax(F @ W + rng.gumbel(size=(3000, 5)), axis=1)
mlr = MultinomialLR(epochs=20).fit(F[:2500], labels[:2500])
ours, ref = mlr.score(F[2500:], labels[2500:]), SkLR(max_iter=2000).fit(
    F[:2500], labels[:2500]).score(F[2500:], labels[2500:])
print(f"5 classes: loom.models {ours:.4f}, scikit-learn {ref:.4f}")
if ours < ref - 0.02:
    harness.fail(f"mlr accuracy {ours} below scikit-learn's {ref} by more than 0.02")

# ---- LDA on a generated corpus ----
corpus = os.path.join(work, "c.dat")
cli("gen", "lda", "--out", corpus, "--docs", "300", "--vocab-size", "200", "--topics", "5",
    "--doc-length", "40", "--seed", "4")
C = np.zeros((300, 200))
for d, line in enumerate(open(corpus)):
    for pair in line.split()[1:]:
        w, c = pair.split(":")
        C[d, int(w)] += int(c)
lda = LDA(topics=5, iterations=30).fit(C)
theta = lda.transform(C[:10])
if lda.n_topic_word_.sum() != C.sum():
    harness.fail(f"lda: counts sum to {lda.n_topic_word_.sum()}, the corpus has {C.sum()} tokens")
if not (np.allclose(lda.components_.sum(axis=1), 1) and np.allclose(theta.sum(axis=1), 1)):
    harness.fail("lda: components_ or transform rows do not sum to 1")

# ---- a failing job ----
try:
    LogisticRegression(extra_flags=["--minibatch", "0"]).fit(X[:100], y[:100])
    harness.fail("a job with --minibatch 0 did not fail")
except loom.LoomError as e:
    if not isinstance(e, loom.JobError) or "--minibatch" not in e.detail:
        harness.fail(f"the JobError does not carry the job's message: {e}")
print("ok")
