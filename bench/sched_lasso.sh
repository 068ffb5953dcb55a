#!/usr/bin/env bash
# sched_lasso.sh: Lasso on the dynamic engine (issue 13, docs/SCHED.md,
# docs/LASSO.md) against the sequential reference, in coordinate updates
# (machine-independent: the thesis's "objective vs data processed").
#
#   bench/sched_lasso.sh [BUILD_DIR] [OUT_DIR]
#
# The problem: `loom gen lasso` with 100k features in correlated groups of 10
# (correlation CORR), ROWS rows, 1% of the groups present per row, 100 planted
# non-zeros; lambda = 0.1 lambda_max. The reference is `--sequential --tol
# 1e-8`; its final objective F* sets the target F* (1 + 1e-4). Every schedule
# runs P = 8 updates per round, with --in-process (the rounds of a one-worker
# job, bit for bit, without the messages: tests/lasso checks the equality):
#   dynamic            priority sampling (L = 32) + dependency check (rho 0.1)
#   dynamic-nopri      uniform candidates + dependency check
#   dynamic-nocheck    priority sampling, no check (rho 1)
#   random             8 uniform coordinates, no check (Shotgun)
#   rotation           consecutive blocks of 8 in turn (fixed round robin on the
#                      dynamic engine, not the static engine of run_sched.sh)
#   dynamic-depth3     dynamic with 3 rounds in flight
# and one real job (dynamic, 2 workers, --insecure) for updates/s next to the
# in-process run's. Prints a Markdown table (updates to the target, and their
# ratio to the sequential count; share of coefficients within 1e-3 of the
# reference after 5, 10 and 20 iterations, among all and among the reference's
# non-zeros) and writes plots with loom plot (gap.png: log10 of the relative
# gap to F*; converged.png, converged_support.png; in OUT_DIR).
#
# Environment: ROWS [2000], CORR [0.8], ITERATIONS [80], TIMEOUT [900] s per run.
set -euo pipefail

build=${1:-build}
out=${2:-sched_lasso_out}
ROWS=${ROWS:-2000}
CORR=${CORR:-0.8}
ITERATIONS=${ITERATIONS:-80}
TIMEOUT=${TIMEOUT:-900}
LOOM=$build/bin/loom
[[ -x $LOOM ]] || { echo "sched_lasso.sh: $LOOM not found (build first)" >&2; exit 2; }
mkdir -p "$out"
data=$out/lasso.svm

echo "generating $data" >&2
"$LOOM" gen lasso --rows "$ROWS" --features 100000 --group 10 --corr "$CORR" --density 0.01 \
    --nonzeros 100 --seed 7 --out "$data"
common=(--train "$data" --lambda-ratio 0.1 --quiet)

echo "sequential reference" >&2
timeout "$TIMEOUT" "$LOOM" train lasso "${common[@]}" --sequential --tol 1e-8 \
    --metrics "$out/sequential.jsonl" --model-out "$out/reference.model"

run() { # NAME FLAGS...
    local name=$1
    shift
    echo "$name" >&2
    timeout "$TIMEOUT" "$LOOM" train lasso "${common[@]}" --in-process --parallel 8 \
        --iterations "$ITERATIONS" --tol 1e-8 --reference "$out/reference.model" \
        --metrics "$out/$name.jsonl" "$@" || echo "$name: exit $?" >&2
}
run dynamic --candidates 32 --rho 0.1
run dynamic-nopri --no-priority --candidates 32 --rho 0.1
run dynamic-nocheck --candidates 32 --rho 1
run random --schedule random
run rotation --schedule rotation
run dynamic-depth3 --candidates 32 --rho 0.1 --depth 3

echo "job: dynamic, 2 workers" >&2
timeout "$TIMEOUT" "$LOOM" train lasso "${common[@]}" --workers 2 --insecure --no-status \
    --parallel 8 --candidates 32 --rho 0.1 --iterations 3 --tol 0 \
    --metrics "$out/job2.jsonl" || echo "job: exit $?" >&2

python3 - "$out" <<'PY'
import json, math, sys
out = sys.argv[1]
def lines(name):
    try:
        return [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    except OSError:
        return []
seq = lines("sequential")
target = seq[-1]["objective"] * (1 + 1e-4)
def reach(rows):
    for r in rows:
        if r["objective"] is not None and r["objective"] <= target:
            return r["updates"]
    return None
seq_updates = reach(seq)
print(f"target objective {target:.10g} (sequential final {seq[-1]['objective']:.10g} after "
      f"{seq[-1]['iteration']} passes)\n")
print("| schedule | updates to target (of updates run) | x sequential | final objective | "
      "converged @5 / @10 / @20 | of the support @5 / @10 / @20 |")
print("|---|---|---|---|---|---|")
print(f"| sequential | {seq_updates} | 1.00 | {seq[-1]['objective']:.10g} | | |")
for name in ["dynamic", "dynamic-nopri", "dynamic-nocheck", "random", "rotation",
             "dynamic-depth3"]:
    rows = lines(name)
    if not rows:
        print(f"| {name} | (no metrics) | | | | |")
        continue
    u = reach(rows)
    ratio = f"{u / seq_updates:.2f}" if u else "not reached"
    obj = rows[-1]["objective"]
    def at(key):
        v = {r["iteration"]: r.get(key) for r in rows}
        return " / ".join(f"{v[i]:.3f}" if v.get(i) is not None else "-" for i in (5, 10, 20))
    fin = f"{obj:.10g}" if obj is not None else f"diverged (iteration {rows[-1]['iteration']})"
    print(f"| {name} | {u if u else '-'} ({rows[-1]['updates']}) | {ratio} | {fin} | "
          f"{at('converged')} | {at('converged_support')} |")
def rate(rows):
    if len(rows) < 2:
        return None
    return (rows[-1]["updates"] - rows[0]["updates"]) / (rows[-1]["time_s"] - rows[0]["time_s"])
# The relative gap to F*, log10, per iteration: what the objective plot shows
# (a diverged run's values would flatten every other line).
for name in ["sequential", "dynamic", "dynamic-nopri", "dynamic-nocheck", "random",
             "dynamic-depth3"]:
    rows = lines(name)
    if rows:
        with open(f"{out}/{name}.gap.jsonl", "w") as f:
            for r in rows:
                gap = (r["objective"] - seq[-1]["objective"]) / seq[-1]["objective"]
                f.write(json.dumps({"iteration": r["iteration"],
                                    "log10_gap": math.log10(max(gap, 1e-12))}) + "\n")
dyn, job = rate(lines("dynamic")[:4]), rate(lines("job2"))
if dyn and job:
    print(f"\nupdates/s (iterations 1-3, same run, loaded machine): in-process {dyn:.0f}, "
          f"2-worker job {job:.0f} ({job / dyn:.2f}x)")
PY

series=("$out/sequential.jsonl") gaps=("$out/sequential.gap.jsonl")
for n in dynamic dynamic-nopri dynamic-nocheck random dynamic-depth3; do
    [[ -s $out/$n.jsonl ]] && series+=("$out/$n.jsonl") gaps+=("$out/$n.gap.jsonl")
done
"$LOOM" plot "${gaps[@]}" --y log10_gap --out "$out/gap.png" \
    --title "Lasso, 100k features: log10 (F - F*) / F* per iteration (dim updates)" >&2 || true
"$LOOM" plot "${series[@]:1}" --y converged --out "$out/converged.png" \
    --title "share of coefficients within 1e-3 of the reference" >&2 || true
"$LOOM" plot "${series[@]:1}" --y converged_support --out "$out/converged_support.png" \
    --title "share of the reference's non-zeros within 1e-3 of it" >&2 || true
