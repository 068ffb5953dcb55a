#!/usr/bin/env python3
"""fm_reference: DiFacto's factorization machine (thesis chapter 10) written
from the thesis in NumPy, independent of Loom's C code, to check a one-worker
`loom train fm` under BSP against.

    fm_reference.py TRAIN MODEL --dim K --threshold T --lr A --beta B --l1 L1
                    --l2 L2 --lr-v E --l2-v MU --init I --epochs N --seed S
                    --minibatch M [--threads T]

Runs the algorithm of docs/FM.md sequentially:
  - rows in the order one Loom worker visits them (lr's seeded Fisher-Yates
    shuffle, tests/lr/ftrl_reference.py), cut into ceil(rows / M) equal runs;
  - with --threads T the worker's rows are cut into T lanes (Loom's
    app_team_split), each with its own order (seeded by the lane) and
    ceil(ceil(rows / T) / M) runs; per step every lane computes its run's
    gradient from the model as the step found it, and the lanes' gradients
    are summed per key and applied once (the update buffer's sum under BSP);
    each lane keeps its own view of which features are frequent;
  - in the first epoch, per minibatch, the features' row counts are added to
    exact counters (Loom's Count-Min sketch, wide enough here to have no
    collisions); a feature is frequent once its count passes T, and after the
    first epoch once its count of rows in the data does; V_i takes part while
    feature i is frequent (always with T = 0) and w_i != 0 at the start of
    the minibatch;
  - a new V_i is uniform in [-I, I), from (seed, feature, column) as Loom's
    sparse tables draw it (src/ps/storage.c, re-derived below);
  - gradients: the batch's mean logistic-loss gradient, e x_i for w_i and
    e (x_i s_f - V_if x_i^2) for V_if (s = V^T x), plus MU V_i;
  - w and the bias by FTRL-proximal (alpha A, beta B, l1 L1, l2 L2), V by
    AdaGrad (rate E, eps 1e-8).
Compares every value of MODEL (w, the allocated V rows, the bias) and prints

    fm_reference: values N, V rows R, largest difference D

exit 0 when D <= 1e-9 and Loom's model holds the same V rows; 1 otherwise.
Why 1e-9: both sides do the same per-coordinate recurrences in IEEE double and
differ only by the order of sums (~1e-16 a step); any difference in the
algorithm (which V_i are on, the initial V, the gradient, the updaters) moves
values by far more.
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lr"))
from ftrl_reference import MASK, GOLDEN, epoch_order, mix64, read_libsvm  # noqa: E402


def initial(seed, key, col, a):
    """Loom's uniform initial value of (key, col) in [-a, a)."""
    h = mix64((seed + GOLDEN) & MASK)
    h = mix64(((h ^ key) + GOLDEN) & MASK)
    h = mix64(((h ^ (col << 1)) + GOLDEN) & MASK)
    u = (h >> 11) * 2.0 ** -53
    v = -a + 2 * a * u
    return v if v < a else -a


def sigmoid(m):
    return 1 / (1 + math.exp(-m)) if m >= 0 else math.exp(m) / (1 + math.exp(m))


def lanes_of(n, lanes):
    """Loom's app_team_split: contiguous runs, the first n % lanes one longer."""
    size, extra = divmod(n, lanes)
    out, lo = [], 0
    for t in range(lanes):
        hi = lo + size + (1 if t < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def ftrl(z, n, w, i, g, o):
    sigma = (math.sqrt(n[i] + g * g) - math.sqrt(n[i])) / o.lr
    z[i] += g - sigma * w[i]
    n[i] += g * g
    if abs(z[i]) <= o.l1:
        w[i] = 0.0
    else:
        w[i] = -(z[i] - math.copysign(o.l1, z[i])) / ((o.beta + math.sqrt(n[i])) / o.lr + o.l2)


def train(rows, dim, o):
    k = o.dim
    z = np.zeros(dim + 1)  # FTRL of w; key dim is the bias
    n = np.zeros(dim + 1)
    w = np.zeros(dim + 1)
    v = {}  # allocated V rows
    nv = {}  # their AdaGrad accumulators
    count = np.zeros(dim, dtype=np.int64)
    lanes = [rows[lo:hi] for lo, hi in lanes_of(len(rows), o.lanes)]
    frequent = [np.zeros(dim, dtype=bool) for _ in lanes]  # each lane's own view
    max_lane = -(-len(rows) // o.lanes)
    batches = -(-max_lane // o.minibatch)
    for epoch in range(o.epochs):
        orders = [epoch_order(o.seed, t, epoch, len(lane)) for t, lane in enumerate(lanes)]
        if epoch == 1:
            frequent = [count > o.threshold for _ in lanes]
        for b in range(batches):
            # Keys and counting in lane order, then every lane's gradient from
            # the model as the clock found it, summed per key and applied once.
            work = []
            for t, lane in enumerate(lanes):
                per = -(-len(lane) // batches)
                batch = [lane[r] for r in orders[t][b * per:(b + 1) * per]]
                if not batch:
                    continue
                feats = {i for _, x in batch for i, _ in x}
                if epoch == 0:
                    for _, x in batch:
                        for i, _ in x:
                            count[i] += 1
                    for i in feats:
                        frequent[t][i] = frequent[t][i] or count[i] > o.threshold
                work.append((t, batch, feats))
            vb = {}
            gw, gv = {}, {}
            for t, batch, feats in work:
                on = {i for i in feats if (o.threshold == 0 or frequent[t][i]) and w[i] != 0}
                for i in on:
                    if i not in vb:
                        vb[i] = v[i] if i in v else np.array(
                            [initial(o.seed, i, c, o.init) for c in range(k)])
                lw = dict.fromkeys(list(feats) + [dim], 0.0)
                lv = {i: np.zeros(k) for i in on}
                for y, x in batch:
                    s = np.zeros(k)
                    sq = 0.0
                    m = w[dim] + sum(w[i] * xi for i, xi in x)
                    for i, xi in x:
                        if i in on:
                            s += vb[i] * xi
                            sq += float(np.dot(vb[i], vb[i])) * xi * xi
                    m += 0.5 * (float(np.dot(s, s)) - sq)
                    e = sigmoid(m) - (1.0 if y > 0 else 0.0)
                    lw[dim] += e
                    for i, xi in x:
                        lw[i] += e * xi
                        if i in on:
                            lv[i] += e * (xi * s - vb[i] * xi * xi)
                for i, g in lw.items():
                    gw[i] = gw.get(i, 0.0) + g / len(batch)
                for i, g in lv.items():
                    g = g / len(batch) + o.l2_v * vb[i]
                    gv[i] = gv[i] + g if i in gv else g
            for i, g in gw.items():
                ftrl(z, n, w, i, g, o)
            for i, g in gv.items():
                acc = nv.get(i, np.zeros(k)) + g * g
                nv[i] = acc
                v[i] = vb[i] - o.lr_v * g / (np.sqrt(acc) + 1e-8)
    return w, v


def read_model(path):
    with open(path) as f:
        head = f.readline().split()
        fields = dict(h.split("=") for h in head[2:])
        x = np.zeros(int(fields["dim"]))
        for line in f:
            i, val = line.split()
            x[int(i)] = float(val)
    return x, int(fields["factors"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("model")
    for name in ("lr", "beta", "l1", "l2", "lr-v", "l2-v", "init"):
        ap.add_argument("--" + name, type=float, required=True)
    for name in ("dim", "threshold", "epochs", "seed", "minibatch"):
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--threads", dest="lanes", type=int, default=1)
    o = ap.parse_args()
    rows = read_libsvm(o.train)
    dim = 1 + max(i for _, x in rows for i, _ in x)
    w, v = train(rows, dim, o)
    got, k = read_model(o.model)
    if k != o.dim or len(got) != dim * (k + 1) + 1:
        print(f"fm_reference: the model has {len(got)} values and {k} factors, "
              f"expected {dim * (o.dim + 1) + 1} and {o.dim}")
        return 1
    want = np.zeros(len(got))
    for i in range(dim):
        want[i * (k + 1)] = w[i]
        if i in v:
            want[i * (k + 1) + 1:(i + 1) * (k + 1)] = v[i]
    want[-1] = w[dim]
    loom_rows = {i for i in range(dim) if np.any(got[i * (k + 1) + 1:(i + 1) * (k + 1)] != 0)}
    diff = float(np.max(np.abs(got - want)))
    print(f"fm_reference: values {len(got)}, V rows {len(v)} (loom {len(loom_rows)}), "
          f"largest difference {diff:.3g}")
    return 0 if diff <= 1e-9 and loom_rows == set(v) else 1


if __name__ == "__main__":
    sys.exit(main())
