#!/usr/bin/env python3
"""ftrl_reference: per-coordinate FTRL-proximal (McMahan et al., "Ad Click
Prediction: a View from the Trenches", KDD 2013, Algorithm 1) on a LIBSVM
file, written from the paper and independent of Loom's C code, to check
`loom train lr --updater ftrl` (one worker, BSP) against.

    ftrl_reference.py TRAIN MODEL --alpha A --l1 L1 --epochs E --seed S
                      [--minibatch M] [--test TEST] [--beta B] [--objective O]

Visits the rows in the order one Loom worker does (docs/LR.md: a seeded
Fisher-Yates shuffle per epoch, splitmix64 mixing, reproduced below), the
bias as a feature present in every row, lambda2 = 0. With --minibatch 1 (the
default) a step is one row, as in the paper; with M > 1 a step is one of
Loom's minibatches (the rows split into ceil(rows / M) equal runs), its
gradient the mean over the minibatch's rows, for the coordinates it holds.
Compares with MODEL (a Loom model file) and prints one line:

    ftrl_reference: weights N, largest difference D, ref logloss X, loom logloss Y, objective F

with X, Y the mean log loss on TEST (or TRAIN) of each model and F the
objective FTRL minimises, on the mean's scale: mean training log loss +
(l1 / steps) (||w||_1 + |bias|) (docs/LR.md). Exit 0 when D <= 1e-9,
|X - Y| <= 1e-9 and, with --objective O (the last objective Loom reported),
|F - O| <= 1e-7 (Loom prints 9 significant digits); 1 otherwise. Why 1e-9: both
sides run the same per-coordinate recurrences in IEEE double, so they differ
only by rounding (a different but equally correct sigmoid, the order of the
margin's sum). FTRL's weight is a Lipschitz function of (z, n), z a sum of
gradients bounded by |x| <= 1, so rounding errors of ~1e-16 per step add up
to at most ~1e-11 over the ~65,000 steps of two a9a epochs (measured: ~1e-14),
while any difference in the algorithm (sigma, the lazy weight, the l1
threshold, the order of the rows) moves weights by more than 1e-4.
"""
import argparse
import math
import sys

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def epoch_order(seed, rank, epoch, rows):
    """The row order of worker `rank` in `epoch` (apps/lr/train.c lr_epoch_order)."""
    state = mix64((seed * GOLDEN + rank * 1000003 + epoch) & MASK)
    order = list(range(rows))
    for i in range(rows, 1, -1):
        state = (state + GOLDEN) & MASK
        j = mix64(state) % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def read_libsvm(path):
    """Rows as (label +1/-1, [(0-based feature, value)]); LIBSVM ids are 1-based."""
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            label = 1.0 if float(parts[0]) > 0 else -1.0
            feats = []
            for p in parts[1:]:
                k, v = p.split(":")
                feats.append((int(k) - 1, float(v)))
            rows.append((label, feats))
    return rows


def read_model(path):
    with open(path) as f:
        head = f.readline().split()
        fields = dict(h.split("=") for h in head[2:])
        w = [0.0] * int(fields["dim"])
        for line in f:
            k, v = line.split()
            w[int(k)] = float(v)
    return w, float(fields["bias"])


def sigmoid(m):
    return 1 / (1 + math.exp(-m)) if m >= 0 else math.exp(m) / (1 + math.exp(m))


def logloss(rows, w, bias):
    total = 0.0
    for y, feats in rows:
        m = bias + sum(w[j] * v for j, v in feats if j < len(w))
        z = y * m  # log(1 + exp(-z)), stably
        total += math.log1p(math.exp(-abs(z))) + max(-z, 0.0)
    return total / len(rows)


def ftrl(rows, dim, alpha, beta, l1, epochs, seed, minibatch):
    """Algorithm 1 of McMahan et al. with lambda2 = 0; key dim is the bias.
    Returns the weights, the bias and the number of steps."""
    z = [0.0] * (dim + 1)
    n = [0.0] * (dim + 1)

    def weight(i):
        if abs(z[i]) <= l1:
            return 0.0
        return -(z[i] - math.copysign(l1, z[i])) / ((beta + math.sqrt(n[i])) / alpha)

    batches = -(-len(rows) // minibatch)
    per = -(-len(rows) // batches)
    steps = 0
    for epoch in range(epochs):
        order = epoch_order(seed, 0, epoch, len(rows))
        for b in range(0, len(rows), per):
            batch = [rows[r] for r in order[b:b + per]]
            keys = {i for _, feats in batch for i, _ in feats} | {dim}
            w = {i: weight(i) for i in keys}  # what the step reads
            grad = dict.fromkeys(keys, 0.0)
            for y, feats in batch:
                x = feats + [(dim, 1.0)]
                p = sigmoid(sum(w[i] * v for i, v in x))
                for i, v in x:
                    grad[i] += (p - (1.0 if y > 0 else 0.0)) * v
            for i in keys:
                g = grad[i] / len(batch)
                sigma = (math.sqrt(n[i] + g * g) - math.sqrt(n[i])) / alpha
                z[i] += g - sigma * w[i]
                n[i] += g * g
            steps += 1
    w = [weight(i) for i in range(dim + 1)]
    return w[:dim], w[dim], steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("model")
    ap.add_argument("--test")
    ap.add_argument("--alpha", type=float, required=True)
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--l1", type=float, default=0.0)
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--minibatch", type=int, default=1)
    ap.add_argument("--objective", type=float)
    a = ap.parse_args()
    train = read_libsvm(a.train)
    got_w, got_b = read_model(a.model)
    dim = len(got_w)
    ref_w, ref_b, steps = ftrl(train, dim, a.alpha, a.beta, a.l1, a.epochs, a.seed, a.minibatch)
    diff = max(abs(g - r) for g, r in zip(got_w + [got_b], ref_w + [ref_b]))
    evalset = read_libsvm(a.test) if a.test else train
    ll_ref, ll_got = logloss(evalset, ref_w, ref_b), logloss(evalset, got_w, got_b)
    objective = logloss(train, ref_w, ref_b) + a.l1 / steps * (sum(map(abs, ref_w)) + abs(ref_b))
    nnz = sum(1 for v in ref_w if v != 0)
    print(f"ftrl_reference: weights {dim}+bias ({nnz} non-zero), largest difference {diff:.3g}, "
          f"ref logloss {ll_ref:.12f}, loom logloss {ll_got:.12f}, objective {objective:.9f}")
    ok = diff <= 1e-9 and abs(ll_ref - ll_got) <= 1e-9
    if a.objective is not None and abs(objective - a.objective) > 1e-7:
        print(f"ftrl_reference: Loom reported objective {a.objective}, not {objective:.9f}")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
