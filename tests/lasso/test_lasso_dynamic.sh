#!/usr/bin/env bash
# `loom train lasso` on the dynamic engine (src/sched, docs/SCHED.md) as jobs
# of one to three workers on loopback (the local launcher starts and stops
# every process; each command is bounded by timeout):
#   - one worker: the job's model equals --in-process's byte for byte, and its
#     objective (recomputed from the data by lasso_check) is the sequential
#     reference's within 1e-9 relative; KKT holds to 1e-6;
#   - two workers, 2 rounds in flight, --rho 0.3: KKT holds to 1e-6, the
#     objective is the reference's, and no round of the schedule log pairs two
#     columns correlated above 0.3 (lasso_check computes the correlations);
#   - three workers with random and rotation schedules, and bad schedules and
#     flags: clear errors (exit 1 from the job, 2 for usage); a rotation that
#     diverges on correlated columns says so and exits 1.
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 PATH_TO_LOOM_BINARY PATH_TO_LASSO_CHECK}
CHECK=${2:?usage: $0 PATH_TO_LOOM_BINARY PATH_TO_LASSO_CHECK}
work_dir lasso-dynamic
trap remove_work EXIT
cd "$WORK" || exit 1

# job ARGS...: `loom train lasso` as a job, bounded; output in ./out, ./err.
job() {
    timeout 120 "$LOOM" train lasso --insecure --no-status --quiet "$@" >out 2>err
    RC=$?
}
# value KEY: the number lasso_check printed after KEY.
value() { awk -v k="$1" '$1 == k {print $2}' check; }

run gen lasso --rows 300 --features 200 --group 10 --corr 0.8 --nonzeros 12 --seed 5 --out d.svm
[[ $RC == 0 ]] || fail "gen: exit status $RC"
TRAIN=(--train d.svm --lambda-ratio 0.05 --tol 1e-12 --iterations 3000)

run train lasso "${TRAIN[@]}" --sequential --quiet --model-out seq.model
[[ $RC == 0 ]] || fail "sequential: exit status $RC"
"$CHECK" d.svm seq.model >check || fail "lasso_check seq.model"
ref=$(value objective)

# One worker: the job is the in-process rounds, and reaches the reference.
job "${TRAIN[@]}" --workers 1 --parallel 8 --metrics m1.jsonl --model-out job1.model
[[ $RC == 0 ]] || fail "1 worker: exit status $RC"
run train lasso "${TRAIN[@]}" --in-process --parallel 8 --quiet --model-out local.model
[[ $RC == 0 ]] || fail "--in-process: exit status $RC"
cmp -s job1.model local.model || fail "the 1-worker job and --in-process differ"
"$CHECK" d.svm job1.model >check || fail "lasso_check job1.model"
obj=$(value objective) kkt=$(value kkt)
numeric_check 'o <= r * (1 + 1e-9) && o >= r * (1 - 1e-9)' o="$obj" r="$ref" ||
    fail "1 worker: objective $obj, the sequential reference $ref"
numeric_check 'k <= 1e-6' k="$kkt" || fail "1 worker: KKT violated by $kkt lambda"
grep -q '"objective": .*"train_rmse": .*"nnz": ' m1.jsonl || fail "metrics lack objective/train_rmse/nnz"
last=$(tail -n 1 m1.jsonl | sed 's/.*"objective": \([^,]*\),.*/\1/')
numeric_check 'o <= r * (1 + 1e-6)' o="$last" r="$ref" || fail "last metrics objective $last"

# Two workers, pipelined, a schedule log checked against rho.
job "${TRAIN[@]}" --workers 2 --depth 2 --rho 0.3 --schedule-log plans.log --model-out job2.model
[[ $RC == 0 ]] || fail "2 workers: exit status $RC"
"$CHECK" d.svm job2.model --log plans.log --rho 0.3 >check || fail "2 workers: $(cat check)"
obj=$(value objective) kkt=$(value kkt)
numeric_check 'o <= r * (1 + 1e-9)' o="$obj" r="$ref" || fail "2 workers: objective $obj vs $ref"
numeric_check 'k <= 1e-6' k="$kkt" || fail "2 workers: KKT violated by $kkt lambda"
rounds=$(awk '$1 == "rounds" {print $2}' check)
numeric_check 'n > 100' n="$rounds" || fail "schedule log has $rounds rounds"
# The check is not vacuous: the data has pairs above 0.3 that random plans hit.
job --train d.svm --lambda-ratio 0.05 --workers 2 --schedule random --iterations 5 \
    --schedule-log random.log
[[ $RC == 0 ]] || fail "random, 5 iterations: exit status $RC"
"$CHECK" d.svm job2.model --log random.log --rho 0.3 >check 2>/dev/null
status=$?
[[ $status == 1 ]] || fail "random plans: lasso_check exit $status, expected pairs above 0.3"

# Three workers, random schedule (Shotgun with 8 of 200): reaches the reference.
job "${TRAIN[@]}" --workers 3 --schedule random --model-out job3.model
[[ $RC == 0 ]] || fail "3 workers random: exit status $RC"
"$CHECK" d.svm job3.model >check || fail "lasso_check job3.model"
numeric_check 'o <= r * (1 + 1e-9)' o="$(value objective)" r="$ref" || fail "3 workers random"

# Rotation: 8 consecutive columns of a group of 10 correlated at 0.8 updated
# together overshoot; the run must say it diverged, not write a model.
job "${TRAIN[@]}" --workers 2 --schedule rotation --model-out rot.model
[[ $RC == 1 ]] && grep -q "diverged after" err || fail "rotation: exit $RC, expected a divergence"
[[ -e rot.model ]] && fail "a diverged run wrote a model"

# Bad schedules: more parallel updates than parameters or than a shard has.
job "${TRAIN[@]}" --workers 1 --parallel 500
[[ $RC == 1 ]] && grep -q "500 parallel updates exceed the 200 parameters" err ||
    fail "--parallel 500: exit $RC"
job "${TRAIN[@]}" --workers 3 --parallel 70
[[ $RC == 1 ]] && grep -q "70 parallel updates exceed the 66 parameters of the smallest of 3 shards" err ||
    fail "--parallel 70 on 3 workers: exit $RC"
job "${TRAIN[@]}" --workers 1 --parallel 20 --depth 11
[[ $RC == 1 ]] && grep -q "11 rounds in flight of 20 updates exceed the 200 parameters" err ||
    fail "--depth 11: exit $RC"
expect 2 "--candidates 4 is below --parallel 8" train lasso --train d.svm --candidates 4
expect 2 "--in-process starts none" train lasso --train d.svm --in-process --workers 2
expect 2 "--depth" train lasso --train d.svm --depth 0
expect 2 "--rho" train lasso --train d.svm --rho 2
expect 2 "--schedule" train lasso --train d.svm --schedule sideways
expect 2 "--threads" train lasso --train d.svm --threads 2
expect 2 "--servers 0" train lasso --train d.svm --servers 0
exit 0
