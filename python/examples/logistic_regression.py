"""Sparse logistic regression on Loom, written in Python: the worker loop of `loom train lr`
(apps/lr/train.c, minibatch SGD) with numpy.

Every process of the job runs this file; loom.init() gives it its role. Worker r of W reads
share r of a LIBSVM training file with Loom's reader (loom.read_libsvm: the lines starting
in the r-th of W byte ranges). The model is one dense float64 table over keys [0, dim]: the
feature weights and, at key dim, the bias (dim agreed through a small table); the servers
apply the workers' gradients with a built-in updater (adagrad by default). Per minibatch a
worker pulls the weights of the features its rows contain, pushes the batch's mean gradient
and calls clock(), so the table's SSP(s) bounds how stale the weights it reads are. After each epoch
worker 0 pulls the whole model and scores the test file.

    python3 -m loom run --servers 2 --workers 4 python/examples/logistic_regression.py \\
        --train ../shared/data/a9a/a9a --test ../shared/data/a9a/a9a.t --epochs 6

(test accuracy about 0.85 on a9a, as `loom train lr` with the same flags; docs/PYTHON.md.)
"""

import argparse
import json
import math
import sys
import time

import numpy as np

import loom


def margins(weights, bias, row, idx, val):
    """w.x + b of every row; features beyond the model's weights count as 0."""
    known = idx < len(weights)
    contrib = np.where(known, weights[np.minimum(idx, len(weights) - 1)] * val, 0.0)
    rows = np.repeat(np.arange(len(row) - 1), np.diff(row))
    return np.bincount(rows, weights=contrib, minlength=len(row) - 1) + bias


def evaluate(model, dim, test):
    m = margins(model[:dim], model[dim], test.row, test.idx.astype(np.int64), test.val)
    positive = test.label > 0
    accuracy = float(np.mean((m > 0) == positive))
    z = np.where(positive, m, -m)
    logloss = float(np.mean(np.log1p(np.exp(-np.abs(z))) + np.maximum(-z, 0)))
    return accuracy, logloss


def train(node, args):
    rank, workers = node.rank, node.num_workers
    share = loom.read_libsvm(args.train, rank, workers)
    y = (share.label > 0).astype(np.float64)
    row, idx, val = share.row, share.idx.astype(np.int64), share.val.astype(np.float64)
    # Agree on the model's size and the largest share: each worker pushes its own into a
    # row of its rank, and after a barrier everyone reads them all.
    sizes = node.table("lr_sizes", dtype=np.int64, width=2, storage="dense",
                       key_range=(0, workers), consistency="asp")
    sizes.push([rank], np.array([share.max_feature, len(y)], dtype=np.int64))
    node.barrier()
    all_sizes = sizes.pull(np.arange(workers, dtype=np.uint64))
    dim, largest_share = int(all_sizes[:, 0].max()), int(all_sizes[:, 1].max())
    w = node.table("lr_weights", dtype=np.float64, storage="dense", key_range=(0, dim + 1),
                   consistency="ssp", staleness=args.staleness, updater=args.updater, lr=args.lr)
    # The same number of minibatches on every worker (set by the largest share), so clocks
    # stay aligned.
    batches = max(1, math.ceil(largest_share / args.minibatch))
    per = math.ceil(len(y) / batches)
    test = loom.read_libsvm(args.test) if args.test and rank == 0 else None
    metrics = open(args.metrics, "w") if args.metrics and rank == 0 else None
    rng = np.random.default_rng([args.seed, rank])
    start = time.time()
    for epoch in range(args.epochs):
        order = rng.permutation(len(y))
        for b in range(batches):
            batch = order[b * per : (b + 1) * per]
            if len(batch):
                sgd_step(w, dim, y, row, idx, val, batch)
            node.clock()
        if rank == 0:
            model = w.pull_range(0, dim + 1)
            line = {"epoch": epoch + 1, "time_s": round(time.time() - start, 3)}
            if test:
                line["test_accuracy"], line["test_logloss"] = evaluate(model, dim, test)
                print(f"epoch {epoch + 1:3d}  test acc {line['test_accuracy']:.4f}  "
                      f"test logloss {line['test_logloss']:.5f}", file=sys.stderr, flush=True)
            if metrics:
                metrics.write(json.dumps(line) + "\n")
                metrics.flush()
    if metrics:
        metrics.close()


def sgd_step(w, dim, y, row, idx, val, batch):
    """Pull the batch's weights, push its mean gradient of the log loss."""
    lengths = row[batch + 1] - row[batch]
    starts = np.repeat(row[batch] - np.cumsum(lengths) + lengths, lengths)
    nz = starts + np.arange(lengths.sum())  # positions in idx/val of the batch's entries
    feats, slot = np.unique(idx[nz], return_inverse=True)
    keys = np.append(feats, dim).astype(np.uint64)  # the bias last
    weights = w.pull(keys)  # float64, filled by C in place
    rows = np.repeat(np.arange(len(batch)), lengths)
    m = np.bincount(rows, weights=weights[slot] * val[nz], minlength=len(batch)) + weights[-1]
    err = 1.0 / (1.0 + np.exp(-m)) - y[batch]
    grad = np.empty(len(keys))
    grad[:-1] = np.bincount(slot, weights=err[rows] * val[nz], minlength=len(feats))
    grad[-1] = err.sum()
    w.push(keys, grad / len(batch))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", required=True, help="LIBSVM training file")
    p.add_argument("--test", help="LIBSVM test file, scored by worker 0 after each epoch")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--minibatch", type=int, default=100, help="rows per minibatch per worker")
    p.add_argument("--updater", default="adagrad", choices=("sgd", "adagrad", "ftrl"))
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--staleness", type=int, default=2, help="SSP staleness, in minibatches")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--metrics", help="write one JSON line per epoch (worker 0)")
    args = p.parse_args()

    node = loom.init()
    if not node.is_worker:
        node.serve()
        return
    train(node, args)
    node.finalize()


if __name__ == "__main__":
    main()
