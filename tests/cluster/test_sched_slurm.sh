#!/usr/bin/env bash
# Scheduled jobs (src/sched, docs/SCHED.md) started the way srun starts a job
# step, with nothing but Slurm's variables, against the local launcher:
#   rotation  `loom train mf --schedule rotation` (the static engine) as 5
#             tasks (scheduler, server, 3 workers): the model is the one the
#             local launcher's --workers 3 saves, byte for byte (each item
#             block has one writer at a time, in a fixed order, so the result
#             does not depend on timing);
#   dynamic   `loom train lasso` (the dynamic engine) as 3 tasks (scheduler,
#             server, 1 worker): the model is --in-process's byte for byte
#             (the rounds of a one-worker job; tests/lasso checks the local
#             launcher's the same way).
# shellcheck source-path=SCRIPTDIR source=../lib/cluster.sh
source "$(dirname "$0")/../lib/cluster.sh"

# srun_job PREFIX TASKS ARGS...: one srun step of `loom ARGS...`, finished;
# the last task says it joined the step's one job as its last worker.
srun_job() {
    local prefix=$1 tasks=$2 rank names=()
    shift 2
    local job=$((400000 + RANDOM))
    for ((rank = 0; rank < tasks; rank++)); do
        # shellcheck disable=SC2046
        spawn "$prefix$rank" $(srun_vars $rank "$tasks" 1 $job) LOOM_VERBOSE=1 -- "$LOOM" "$@"
        names+=("$prefix$rank")
    done
    finish 120 "${names[@]}"
    expect_ok "${names[@]}"
    expect_line "$prefix$((tasks - 1))" "loom[worker $((tasks - 3))] info: joined the job as node"
    expect_line "$prefix$((tasks - 1))" \
        "loom[worker $((tasks - 3))] info: srun (Slurm) started $tasks processes; rank $((tasks - 1)) is a worker"
}

"$LOOM" gen mf --users 300 --items 500 --ratings 20000 --rank 4 --seed 5 --quiet \
    --out "$WORK/r.tsv" || fail "loom gen mf failed"
mf=(train mf --train "$WORK/r.tsv" --schedule rotation --servers 1 --epochs 3 --quiet)
timeout -k 5 120 "$LOOM" "${mf[@]}" --workers 3 --model-out "$WORK/local-mf.model" \
    >"$WORK/local-mf.out" 2>&1 || fail "the local rotation job failed"
srun_job r 5 "${mf[@]}" --model-out "$WORK/srun-mf.model"
cmp "$WORK/local-mf.model" "$WORK/srun-mf.model" ||
    fail "the rotation model trained under srun's variables differs from the local launcher's"

"$LOOM" gen lasso --rows 300 --features 200 --group 10 --corr 0.8 --nonzeros 12 --seed 5 \
    --out "$WORK/l.svm" >"$WORK/gen-lasso.out" 2>&1 || fail "loom gen lasso failed"
lasso=(train lasso --train "$WORK/l.svm" --lambda-ratio 0.05 --tol 1e-9 --iterations 300
       --parallel 8 --quiet)
timeout -k 5 120 "$LOOM" "${lasso[@]}" --in-process --model-out "$WORK/local-lasso.model" \
    >"$WORK/local-lasso.out" 2>&1 || fail "the in-process lasso run failed"
srun_job d 3 "${lasso[@]}" --servers 1 --model-out "$WORK/srun-lasso.model"
cmp "$WORK/local-lasso.model" "$WORK/srun-lasso.model" ||
    fail "the dynamic lasso model trained under srun's variables differs from --in-process's"
echo PASS
