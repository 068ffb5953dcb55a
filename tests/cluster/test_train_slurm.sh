#!/usr/bin/env bash
# The same `loom train lr` command line as one srun step (srun's variables,
# no LOOM_ROLE) and under the local launcher: both train, to the same
# accuracy within 0.01 (BSP: the same supersteps; the order in which servers
# add up floating-point updates differs from run to run, which moves the
# accuracy by about 0.002). Also: --interface under both, and --workers that
# contradicts the number of tasks.
# shellcheck source-path=SCRIPTDIR source=../lib/cluster.sh
source "$(dirname "$0")/../lib/cluster.sh"

"$LOOM" gen lr --rows 6000 --features 500 --nnz 12 --seed 5 --out "$WORK/data.svm" --quiet ||
    fail "loom gen lr failed"
args=(train lr --train "$WORK/data.svm" --test "$WORK/data.svm" --servers 2 --consistency bsp
      --epochs 3 --seed 9 --quiet)

timeout -k 5 120 "$LOOM" "${args[@]}" --workers 3 --interface lo --model-out "$WORK/local.model" \
    >"$WORK/local.out" 2>&1 || fail "the local job failed"

job=$((300000 + RANDOM))
names=()
for rank in 0 1 2 3 4 5; do
    # shellcheck disable=SC2046
    spawn "r$rank" $(srun_vars $rank 6 1 $job) -- "$LOOM" "${args[@]}" --interface lo \
        --model-out "$WORK/srun.model"
    names+=("r$rank")
done
finish 120 "${names[@]}"
expect_ok "${names[@]}"

accuracy() {
    "$LOOM" predict lr --model "$1" --data "$WORK/data.svm" | sed -n 's/.*accuracy \([0-9.]*\).*/\1/p'
}
local_acc=$(accuracy "$WORK/local.model") srun_acc=$(accuracy "$WORK/srun.model")
echo "local launcher: accuracy $local_acc; srun variables: accuracy $srun_acc"
numeric_check 'a > 0.7 && a - b < 0.01 && a - b > -0.01' a="$local_acc" b="$srun_acc" ||
    fail "accuracies differ: local $local_acc, srun $srun_acc"

# --workers 4 with 6 tasks and --servers 2 cannot be: every task says so.
job=$((job + 1))
for rank in 0 1 2 3 4 5; do
    # shellcheck disable=SC2046
    spawn "x$rank" $(srun_vars $rank 6 1 $job) -- "$LOOM" "${args[@]}" --workers 4
done
finish 30 x0 x1 x2 x3 x4 x5
for rank in 0 1 2 3 4 5; do
    [[ ${STATUS[x$rank]} -ne 0 ]] || fail "task $rank ran with --workers 4 in a 6-task step"
    grep -q "LOOM_NUM_WORKERS=4, but srun (Slurm) started 6 processes" "$WORK/x$rank.out" ||
        fail "task $rank did not explain the contradiction"
done
echo PASS
