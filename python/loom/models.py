"""Models in a few lines: scikit-learn-style estimators that train with `loom train`.

    from loom.models import LogisticRegression
    clf = LogisticRegression(epochs=10, workers=4).fit(X, y)     # X: numpy, scipy.sparse, or a path
    clf.predict(X_test), clf.predict_proba(X_test), clf.score(X_test, y_test)

Each estimator's constructor parameters are the flags of `loom train MODEL` (docs/LR.md,
docs/MF.md, ...) with dashes as underscores; None leaves a flag at Loom's default. The job's
size is `workers`, `servers` and `threads`; `extra_flags` passes any other flag as it is.
`fit` writes the data where the job can read it (LIBSVM, ratings or LDA-C in a temporary
directory; a path is used as it is), starts the job with the local launcher (`loom train`
forks a scheduler, servers and workers on this machine), streams each epoch's metrics to
`callback(dict)` and, with `verbose`, prints a progress line per epoch (in a terminal or a
notebook), and loads the trained model from the job's model file. A job that fails raises
loom.JobError with the job's own last lines (the node's message).

In a program started by mpirun or srun (every rank runs it: `mpirun -np 6 python3 prog.py`),
fit joins that job instead: each rank's fit runs `loom train` as that rank (the scheduler,
a server or a worker; `servers` says how many ranks serve), and on the rank of worker 0,
which saves the model, the estimator is fitted (`fitted_` is True); on the others fit
returns with `fitted_` False.

The classes follow scikit-learn's conventions (get_params/set_params, fit returning self,
attributes ending in "_" set by fit), and inherit from its BaseEstimator and mixins when
scikit-learn is installed, so clone(), pipelines and model selection work; without it the
same methods come from a small base class here. docs/PYTHON.md, "Models".
"""

import inspect
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from ._launch import JobError, loom_command
from ._node import launched

try:  # scikit-learn's base classes when present: clone(), repr, pipelines
    from sklearn.base import BaseEstimator as _Base
    from sklearn.base import ClassifierMixin as _Classifier
    from sklearn.base import RegressorMixin as _Regressor
except ImportError:  # pragma: no cover - exercised where scikit-learn is absent

    class _Base:
        """get_params/set_params as scikit-learn's BaseEstimator has them."""

        @classmethod
        def _get_param_names(cls):
            sig = inspect.signature(cls.__init__)
            return sorted(p.name for p in sig.parameters.values()
                          if p.name != "self" and p.kind == p.KEYWORD_ONLY)

        def get_params(self, deep=True):
            return {name: getattr(self, name) for name in self._get_param_names()}

        def set_params(self, **params):
            valid = self._get_param_names()
            for name, value in params.items():
                if name not in valid:
                    raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}")
                setattr(self, name, value)
            return self

    class _Classifier:
        def score(self, X, y):
            return float(np.mean(self.predict(X) == np.asarray(y)))

    class _Regressor:
        def score(self, X, y):
            y = np.asarray(y, dtype=float)
            residual = ((y - self.predict(X)) ** 2).sum()
            total = ((y - y.mean()) ** 2).sum()
            return 1.0 - residual / total if total > 0 else 0.0


def _is_sparse(X):
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def _rows(X):
    """X as a CSR matrix's (indptr, indices, data, shape), or a dense 2-D float array."""
    if _is_sparse(X):
        X = X.tocsr()
        return X
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (rows x features), not of shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X holds NaN or infinite values")
    return X


def _write_libsvm(path, X, labels, label_format):
    """LIBSVM rows: label, then 1-based feature:value for every non-zero value."""
    X = _rows(X)
    with open(path, "w", encoding="ascii") as f:
        for i in range(X.shape[0]):
            if _is_sparse(X):
                lo, hi = X.indptr[i], X.indptr[i + 1]
                cols, vals = X.indices[lo:hi], X.data[lo:hi]
                order = np.argsort(cols, kind="stable")
                cols, vals = cols[order], vals[order]
            else:
                cols = np.flatnonzero(X[i])
                vals = X[i, cols]
            if not np.all(np.isfinite(vals)):
                raise ValueError(f"row {i} of X holds NaN or infinite values")
            feats = " ".join(f"{c + 1}:{v:.17g}" for c, v in zip(cols, vals) if v != 0)
            f.write(label_format(labels[i]) + (" " + feats if feats else "") + "\n")


def _scores(X, weights, bias):
    """X (dense or sparse) times a weight vector or matrix of dim rows; features at or
    beyond dim weigh 0, as in `loom predict`."""
    X = _rows(X)
    dim = weights.shape[0]
    if X.shape[1] > dim:
        X = X[:, :dim]
    elif X.shape[1] < dim:
        weights = weights[: X.shape[1]]
    return np.asarray(X @ weights) + bias


def _read_header(path, kind):
    with open(path, encoding="ascii") as f:
        first = f.readline().split()
        if len(first) < 2 or first[0] != kind:
            raise ValueError(f"{path}: not a {kind} model file")
        header = dict(field.split("=", 1) for field in first[2:])
        return header, f.read().split("\n")


def _sparse_vector(path, kind):
    """A lr/lasso/svm/mlr model file: its header's fields and its weights (dense)."""
    header, lines = _read_header(path, kind)
    w = np.zeros(int(header["dim"]))
    for line in lines:
        if line:
            key, value = line.split()
            w[int(key)] = float(value)
    return header, w


class _LoomModel(_Base):
    """What every estimator shares: the job's flags, running it, streaming its metrics."""

    _model = None  # "lr", ...
    _job_params = ("workers", "servers", "threads", "extra_flags", "verbose")

    def _flags(self):
        flags = []
        for name in self._get_param_names():
            value = getattr(self, name)
            if name in self._job_params or value is None or value is False:
                continue
            flag = "--" + name.rstrip("_").replace("_", "-")  # lambda_: --lambda
            flags += [flag] if value is True else [flag, str(value)]
        return flags + self._job_flags() + [str(f) for f in (self.extra_flags or ())]

    def _job_flags(self):
        # Under mpirun or srun the job's size is the launcher's: every rank's fit runs
        # `loom train`, which takes its role from the rank (docs/CLUSTER.md).
        flags = [] if launched() else ["--workers", str(self.workers)]
        flags += ["--servers", str(self.servers)]
        return flags + (["--threads", str(self.threads)] if self.threads and self.threads > 1 else [])

    def _run(self, train_path, tmp, callback, extra=()):
        """Run `loom train MODEL` on train_path; self.history_ gets its metrics lines."""
        model_path = os.path.join(tmp, "model")
        metrics_path = os.path.join(tmp, "metrics.jsonl")
        argv = [loom_command(), "train", self._model, "--train", train_path, *extra,
                *self._flags(), "--metrics", metrics_path, "--model-out", model_path,
                "--quiet"]
        log_path = os.path.join(tmp, "job.log")
        self.history_ = []
        with open(log_path, "w+b") as log:
            job = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
            try:
                seen = 0
                while True:
                    done = job.poll() is not None
                    seen = self._stream(metrics_path, seen, callback)
                    if done:
                        break
                    time.sleep(0.1)
            except BaseException:
                job.kill()
                job.wait()
                raise
            log.seek(0)
            output = log.read().decode(errors="replace")
        if self.verbose and self.history_ and sys.stderr.isatty():
            sys.stderr.write("\n")
        if job.returncode:
            raise JobError(job.returncode, argv, stderr=output)
        # Under mpirun or srun only the rank of worker 0 saves the model.
        self.fitted_ = os.path.exists(model_path)
        return model_path if self.fitted_ else None

    def _stream(self, path, seen, callback):
        """Hand every complete metrics line after the first `seen` to callback."""
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")[:-1]  # the last may be half written
        except FileNotFoundError:
            return seen
        for line in lines[seen:]:
            row = json.loads(line)
            self.history_.append(row)
            if callback:
                callback(row)
            if self.verbose:
                self._progress(row)
        return len(lines)

    def _progress(self, row):
        step = row.get("epoch", row.get("iteration", row.get("round")))
        shown = ", ".join(f"{k} {v:.6g}" for k, v in row.items()
                          if isinstance(v, float) and k.startswith(("test_", "train_", "objective",
                                                                     "log_likelihood")))
        text = f"loom {self._model}: {'epoch' if 'epoch' in row else 'step'} {step}: {shown}"
        if sys.stderr.isatty():
            sys.stderr.write("\r" + text[:160].ljust(80))
        else:  # a notebook or a log: a line an epoch
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def _fit_libsvm(self, X, y, labels, label_format, callback):
        with tempfile.TemporaryDirectory(prefix="loom-fit-") as tmp:
            if isinstance(X, (str, os.PathLike)):
                if y is not None:
                    raise ValueError("with a file X, the labels come from the file: give y=None")
                path = os.fspath(X)
            else:
                if y is None or len(y) != _rows(X).shape[0]:
                    raise ValueError("y needs one label per row of X")
                path = os.path.join(tmp, "train.svm")
                _write_libsvm(path, X, labels, label_format)
            model = self._run(path, tmp, callback)
            if model:
                self._load(model)
        return self


def _job_init(self, workers, servers, threads, extra_flags, verbose):
    self.workers, self.servers, self.threads = workers, servers, threads
    self.extra_flags, self.verbose = extra_flags, verbose


def _binary_labels(y):
    y = np.asarray(y)
    classes = np.unique(y)
    if len(classes) != 2:
        raise ValueError(f"binary classification needs two classes in y, not {len(classes)}")
    return classes, np.where(y == classes[1], 1, -1)


class _BinaryLinear(_Classifier, _LoomModel):
    """A linear model of two classes whose model file is a weight vector and a bias
    (lr's and svm's): fit, decision_function, predict."""

    def fit(self, X, y=None, *, callback=None):
        if isinstance(X, (str, os.PathLike)):
            self.classes_ = np.array([-1, 1])
            return self._fit_libsvm(X, None, None, None, callback)
        self.classes_, labels = _binary_labels(y)
        return self._fit_libsvm(X, y, labels, lambda v: "+1" if v > 0 else "-1", callback)

    def _load(self, path):
        header, self.coef_ = _sparse_vector(path, "loom-" + self._model)
        self.intercept_ = float(header["bias"])

    def decision_function(self, X):
        return _scores(X, self.coef_, self.intercept_)

    def predict(self, X):
        return self.classes_[(self.decision_function(X) > 0).astype(int)]


class LogisticRegression(_BinaryLinear):
    """Sparse logistic regression (`loom train lr`, docs/LR.md). Two classes; fit sets
    classes_, coef_ (the weights) and intercept_."""

    _model = "lr"

    def __init__(self, *, epochs=None, lr=None, l1=None, l2=None, updater=None, minibatch=None,
                 algo=None, consistency=None, seed=None, workers=1, servers=1, threads=1,
                 extra_flags=(), verbose=False):
        self.epochs, self.lr, self.l1, self.l2, self.updater = epochs, lr, l1, l2, updater
        self.minibatch, self.algo, self.consistency, self.seed = minibatch, algo, consistency, seed
        _job_init(self, workers, servers, threads, extra_flags, verbose)

    def predict_proba(self, X):
        p = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return np.column_stack([1.0 - p, p])


class SVM(_BinaryLinear):
    """Linear SVM trained serverless by stochastic reduce (`loom train svm`, docs/SVM.md)."""

    _model = "svm"

    def __init__(self, *, epochs=None, lr=None, l2=None, batch=None, graph=None, sync=None,
                 seed=None, workers=2, servers=0, threads=1, extra_flags=(), verbose=False):
        self.epochs, self.lr, self.l2, self.batch = epochs, lr, l2, batch
        self.graph, self.sync, self.seed = graph, sync, seed
        _job_init(self, workers, servers, threads, extra_flags, verbose)


class MultinomialLR(_Classifier, _LoomModel):
    """Softmax regression over K classes (`loom train mlr`, docs/MLR.md); `mode` is ps, svb
    or reduce. coef_ is features x classes, intercept_ one per class."""

    _model = "mlr"

    def __init__(self, *, mode=None, epochs=None, updater=None, lr=None, l2=None,
                 minibatch=None, seed=None, workers=1, servers=1, threads=1, extra_flags=(),
                 verbose=False):
        self.mode, self.epochs, self.updater, self.lr, self.l2 = mode, epochs, updater, lr, l2
        self.minibatch, self.seed = minibatch, seed
        _job_init(self, workers, servers, threads, extra_flags, verbose)

    def fit(self, X, y=None, *, callback=None):
        if isinstance(X, (str, os.PathLike)):
            self.classes_ = None  # the file's class ids, known once loaded
            return self._fit_libsvm(X, None, None, None, callback)
        self.classes_, ids = np.unique(np.asarray(y), return_inverse=True)
        return self._fit_libsvm(X, y, ids, str, callback)

    def _load(self, path):
        header, w = _sparse_vector(path, "loom-mlr")
        K = int(header["classes"])
        W = w.reshape(-1, K)  # feature j's weights are row j; the bias row is the last
        self.coef_, self.intercept_ = W[:-1], W[-1]
        if self.classes_ is None:
            self.classes_ = np.arange(K)

    def decision_function(self, X):
        return _scores(X, self.coef_, self.intercept_)

    def predict_proba(self, X):
        s = self.decision_function(X)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X):
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]


class Lasso(_Regressor, _LoomModel):
    """L1-regularised least squares by coordinate descent on the dynamic engine (`loom
    train lasso`, docs/LASSO.md): min 1/(2n)|y - b - X beta|^2 + lambda_ |beta|_1, as
    scikit-learn's Lasso(alpha=lambda_). fit sets coef_ and intercept_. sequential=True
    runs the cyclic reference in the calling process instead of a job."""

    _model = "lasso"

    def __init__(self, *, lambda_=None, iterations=None, tol=None, no_intercept=False,
                 parallel=None, sequential=False, seed=None, workers=2, servers=1, threads=1,
                 extra_flags=(), verbose=False):
        self.lambda_, self.iterations, self.tol = lambda_, iterations, tol
        self.sequential = sequential
        self.no_intercept, self.parallel, self.seed = no_intercept, parallel, seed
        _job_init(self, workers, servers, threads, extra_flags, verbose)

    def _job_flags(self):
        return [] if self.sequential else super()._job_flags()

    def fit(self, X, y=None, *, callback=None):
        y = None if y is None else np.asarray(y, dtype=float)
        return self._fit_libsvm(X, y, y, lambda v: f"{v:.17g}", callback)

    def _load(self, path):
        header, self.coef_ = _sparse_vector(path, "loom-lasso")
        self.intercept_ = float(header.get("intercept", 0.0))

    def predict(self, X):
        return _scores(X, self.coef_, self.intercept_)


class MatrixFactorization(_Regressor, _LoomModel):
    """Biased matrix factorisation by SGD (`loom train mf`, docs/MF.md): rating = mean +
    b_u + b_i + p_u . q_i. fit takes a ratings file, an array of (user, item, rating)
    rows, or a pandas DataFrame with user, item and rating columns (the first three
    columns otherwise); predict takes (user, item) pairs the same ways. Users or items the
    model has not seen get zero factors and bias."""

    _model = "mf"

    def __init__(self, *, rank=None, epochs=None, lr=None, lr_decay=None, reg=None,
                 init_std=None, schedule=None, syncs=None, seed=None, workers=1, servers=1,
                 threads=1, extra_flags=(), verbose=False):
        self.rank, self.epochs, self.lr, self.lr_decay, self.reg = rank, epochs, lr, lr_decay, reg
        self.init_std, self.schedule, self.syncs, self.seed = init_std, schedule, syncs, seed
        _job_init(self, workers, servers, threads, extra_flags, verbose)

    @staticmethod
    def _triples(X, columns):
        if hasattr(X, "columns") and hasattr(X, "to_numpy"):  # a pandas DataFrame
            names = [c for c in ("user", "item", "rating")[:columns] if c in X.columns]
            X = X[names].to_numpy() if len(names) == columns else X.iloc[:, :columns].to_numpy()
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] < columns:
            raise ValueError(f"expected rows of {columns} columns (user, item"
                             f"{', rating' if columns == 3 else ''}), not shape {X.shape}")
        return X[:, :columns]

    def fit(self, X, y=None, *, callback=None):
        with tempfile.TemporaryDirectory(prefix="loom-fit-") as tmp:
            if isinstance(X, (str, os.PathLike)):
                path = os.fspath(X)
            else:
                R = self._triples(X, 3)
                path = os.path.join(tmp, "ratings.tsv")
                with open(path, "w", encoding="ascii") as f:
                    for u, i, r in R:
                        f.write(f"{int(u)}\t{int(i)}\t{float(r):.9g}\n")
            model = self._run(path, tmp, callback)
            if model:
                self._load(model)
        return self

    def _load(self, path):
        header, lines = _read_header(path, "loom-mf")
        self.rank_ = int(header["rank"])
        self.mean_, self.min_, self.max_ = (float(header[k]) for k in ("mean", "min", "max"))
        users, items = {}, {}
        for line in lines:
            if line:
                parts = line.split()
                (users if parts[0] == "u" else items)[int(parts[1])] = np.array(parts[2:], float)
        self.user_ids_ = np.array(sorted(users))
        self.item_ids_ = np.array(sorted(items))
        self.user_rows_ = np.array([users[u] for u in self.user_ids_]).reshape(-1, self.rank_ + 1)
        self.item_rows_ = np.array([items[i] for i in self.item_ids_]).reshape(-1, self.rank_ + 1)

    def _lookup(self, ids, known, rows):
        pos = np.searchsorted(known, ids)
        pos = np.clip(pos, 0, max(len(known) - 1, 0))
        found = (known[pos] == ids) if len(known) else np.zeros(len(ids), bool)
        out = np.zeros((len(ids), self.rank_ + 1))
        out[found] = rows[pos[found]]
        return out

    def predict(self, X):
        P = self._triples(X, 2).astype(np.int64)
        u = self._lookup(P[:, 0], self.user_ids_, self.user_rows_)
        i = self._lookup(P[:, 1], self.item_ids_, self.item_rows_)
        r = self.mean_ + u[:, 0] + i[:, 0] + np.einsum("ij,ij->i", u[:, 1:], i[:, 1:])
        return np.clip(r, self.min_, self.max_)

    def score(self, X, y=None):
        """Minus the RMSE of the predictions of X's ratings (higher is better, as
        scikit-learn's scorers want); y: the ratings, else X's third column."""
        truth = self._triples(X, 3)[:, 2] if y is None else np.asarray(y)
        return -float(np.sqrt(np.mean((self.predict(X) - truth.astype(float)) ** 2)))


class LDA(_LoomModel):
    """Topic model by collapsed Gibbs sampling (`loom train lda`, docs/LDA.md). fit takes
    an LDA-C file or a documents x words count matrix (numpy or scipy.sparse); sets
    components_ (topics x words: the smoothed topic-word distributions phi) and
    n_topic_word_ (the counts). transform gives each document's topic proportions with phi
    held fixed (50 EM steps, as a fold-in)."""

    _model = "lda"

    def __init__(self, *, topics=None, alpha=None, beta=None, iterations=None, schedule=None,
                 seed=None, workers=1, servers=1, threads=1, extra_flags=(), verbose=False):
        self.topics, self.alpha, self.beta, self.iterations = topics, alpha, beta, iterations
        self.schedule, self.seed = schedule, seed
        _job_init(self, workers, servers, threads, extra_flags, verbose)

    def fit(self, X, y=None, *, callback=None):
        with tempfile.TemporaryDirectory(prefix="loom-fit-") as tmp:
            if isinstance(X, (str, os.PathLike)):
                path = os.fspath(X)
            else:
                C = X.tocsr() if _is_sparse(X) else np.asarray(X)
                path = os.path.join(tmp, "corpus.dat")
                with open(path, "w", encoding="ascii") as f:
                    for d in range(C.shape[0]):
                        row = C.getrow(d) if _is_sparse(C) else None
                        words = row.indices if row is not None else np.flatnonzero(C[d])
                        counts = row.data if row is not None else C[d, words]
                        pairs = [(int(w), int(c)) for w, c in zip(words, counts) if c > 0]
                        if any(c != int(c) or c < 0 for c in counts):
                            raise ValueError(f"document {d}: counts must be whole numbers")
                        f.write(f"{len(pairs)} " + " ".join(f"{w}:{c}" for w, c in sorted(pairs))
                                + "\n")
            model = self._run(path, tmp, callback)
            if model:
                self._load(model)
        return self

    def _load(self, path):
        header, lines = _read_header(path, "loom-lda")
        K, V = int(header["topics"]), int(header["vocab"])
        self.alpha_, self.beta_ = float(header["alpha"]), float(header["beta"])
        counts = np.zeros((K, V))
        for line in lines:
            if line:
                parts = line.split()
                w = int(parts[0])
                for pair in parts[1:]:
                    k, c = pair.split(":")
                    counts[int(k), w] = int(c)
        self.n_topic_word_ = counts
        self.components_ = (counts + self.beta_) / (counts.sum(axis=1, keepdims=True) + V * self.beta_)

    def transform(self, X):
        C = X.toarray() if _is_sparse(X) else np.asarray(X, dtype=float)
        V = self.components_.shape[1]
        C = C[:, :V] if C.shape[1] >= V else np.pad(C, ((0, 0), (0, V - C.shape[1])))
        phi = self.components_
        theta = np.full((C.shape[0], phi.shape[0]), 1.0 / phi.shape[0])
        for _ in range(50):
            mix = theta @ phi  # docs x words
            ratio = np.divide(C, mix, out=np.zeros_like(C), where=mix > 0)
            theta = theta * (ratio @ phi.T) + self.alpha_
            theta /= theta.sum(axis=1, keepdims=True)
        return theta

    def fit_transform(self, X, y=None, **fit_params):
        return self.fit(X, **fit_params).transform(X)


__all__ = ["LogisticRegression", "SVM", "MultinomialLR", "Lasso", "MatrixFactorization", "LDA"]
