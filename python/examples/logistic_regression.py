"""Sparse logistic regression on Loom, written in Python: the worker loop of `loom train lr`
(apps/lr/train.c, minibatch SGD) with numpy.

Every process of the job runs this file; loom.init() gives it its role. Worker r of W takes
the lines r, r + W, ... of a LIBSVM training file. The model is one dense float64 table over
keys [0, dim]: the feature weights and, at key dim, the bias; the servers apply the workers'
gradients with a built-in updater (adagrad by default). Per minibatch a worker pulls the
weights of the features its rows contain, pushes the batch's mean gradient and calls
clock(), so the table's SSP(s) bounds how stale the weights it reads are. After each epoch
worker 0 pulls the whole model and scores the test file.

    python3 -m loom run --servers 2 --workers 4 python/examples/logistic_regression.py \\
        --train ../shared/data/a9a/a9a --test ../shared/data/a9a/a9a.t --epochs 6

(test accuracy about 0.85 on a9a, as `loom train lr` with the same flags; docs/PYTHON.md.)
"""

import argparse
import bz2
import json
import math
import sys
import time

import numpy as np

import loom


def read_libsvm(path, share=0, shares=1):
    """Lines share, share + shares, ... of a LIBSVM file (.bz2 too), as CSR arrays; labels
    as 0/1 and 1-based feature ids as 0-based. Returns (labels, row, idx, val, dim, rows):
    dim is 1 + the largest feature id and rows the number of examples of the whole file, so
    every worker agrees on them."""
    opener = bz2.open if path.endswith(".bz2") else open
    labels, idx, val, row, dim, number = [], [], [], [0], 0, -1
    with opener(path, "rt") as f:
        for line in f:
            fields = line.split()
            if not fields:
                continue
            number += 1
            pairs = [p.split(":") for p in fields[1:]]
            ids = [int(i) - 1 for i, _ in pairs]
            if ids:
                dim = max(dim, max(ids) + 1)
            if number % shares != share:
                continue
            labels.append(1.0 if float(fields[0]) > 0 else 0.0)
            idx += ids
            val += [float(v) for _, v in pairs]
            row.append(len(idx))
    return (np.array(labels), np.array(row), np.array(idx, dtype=np.int64), np.array(val), dim,
            number + 1)


def margins(weights, bias, row, idx, val):
    """w.x + b of every row; features beyond the model's weights count as 0."""
    known = idx < len(weights)
    contrib = np.where(known, weights[np.minimum(idx, len(weights) - 1)] * val, 0.0)
    rows = np.repeat(np.arange(len(row) - 1), np.diff(row))
    return np.bincount(rows, weights=contrib, minlength=len(row) - 1) + bias


def evaluate(model, dim, test):
    y, row, idx, val, _, _ = test
    m = margins(model[:dim], model[dim], row, idx, val)
    accuracy = float(np.mean((m > 0) == (y > 0.5)))
    z = np.where(y > 0.5, m, -m)
    logloss = float(np.mean(np.log1p(np.exp(-np.abs(z))) + np.maximum(-z, 0)))
    return accuracy, logloss


def train(node, args):
    rank, workers = node.rank, node.num_workers
    y, row, idx, val, dim, rows = read_libsvm(args.train, rank, workers)
    w = node.table("lr_weights", dtype=np.float64, storage="dense", key_range=(0, dim + 1),
                   consistency="ssp", staleness=args.staleness, updater=args.updater, lr=args.lr)
    # The same number of minibatches on every worker (set by the largest share), so clocks
    # stay aligned.
    largest_share = math.ceil(rows / workers)
    batches = max(1, math.ceil(largest_share / args.minibatch))
    per = math.ceil(len(y) / batches)
    test = read_libsvm(args.test) if args.test and rank == 0 else None
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
    p.add_argument("--train", required=True, help="LIBSVM training file (.bz2 too)")
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
