#!/usr/bin/env bash
# Under the real mpirun (Open MPI; scripts/install-deps.sh installs Debian's
# openmpi-bin), with no Loom variable but LOOM_NUM_SERVERS where said:
#   mpirun -np 4 ps_check bsp      a user program linked with the library
#                                  (1 scheduler, 1 server, 2 workers);
#   mpirun -np 6 -x LOOM_NUM_SERVERS=2 cluster_check   ranks become roles;
#   mpirun -np 5 loom train mf --schedule rotation ... (src/sched's static
#                                  engine, generated data): byte for byte the
#                                  model of the local launcher's --workers 3;
#   mpirun -np 6 loom train lr ... --servers 2 on a9a: test accuracy >= 0.848,
#                                  within 0.005 of the same command under the
#                                  local launcher (--workers 3).
# Usage: test_mpirun.sh LOOM CLUSTER_CHECK PS_CHECK DATA_DIR. Exits 77
# (skipped) with a message when mpirun is not Open MPI's or the a9a data is
# absent (after the other parts passed). Every mpirun runs under `timeout` in
# a process group of its own, which is killed when the test ends.
# shellcheck source-path=SCRIPTDIR source=../lib/cluster.sh
source "$(dirname "$0")/../lib/cluster.sh"
PS_CHECK=${3:?} DATA=${4:?}

if ! mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    echo "skipped: no Open MPI mpirun in PATH (install openmpi-bin: scripts/install-deps.sh)"
    exit 77
fi
MPIRUN=(mpirun --oversubscribe)
[[ $(id -u) -eq 0 ]] && MPIRUN+=(--allow-run-as-root)

# mpi NAME SECONDS MPIRUN_ARGS...: run mpirun, bounded, output in $WORK/NAME.out.
mpi() {
    local name=$1 seconds=$2
    shift 2
    timeout -k 5 "$seconds" "${MPIRUN[@]}" "$@" </dev/null >"$WORK/$name.out" 2>&1 &
    local pid=$!
    GROUPS_TO_KILL+=("$pid") # timeout leads a process group: mpirun and its ranks
    wait "$pid" || fail "mpirun $* exited with status $? (124: timed out)"
}

count() { grep -c -- "$2" "$WORK/$1.out"; }

mpi ps 60 -np 4 "$PS_CHECK" bsp
[[ $(count ps "^bsp: 10 clocks, every pull exact") -eq 2 ]] || fail "expected both workers' BSP line"

# --tag-output prefixes each line with "[jobid,rank]<stdout>:".
mpi roles 60 -np 6 --tag-output -x LOOM_NUM_SERVERS=2 "$CHECK"
want=("scheduler 0 of 1" "server 0 of 2" "server 1 of 2" "worker 0 of 3" "worker 1 of 3" "worker 2 of 3")
for rank in 0 1 2 3 4 5; do
    grep -q "^\[[0-9]*,$rank\]<stdout>:node: ${want[rank]} (servers 2)" "$WORK/roles.out" ||
        fail "rank $rank is not the ${want[rank]}"
done
grep -q "^\[[0-9]*,3\]<stdout>:sum: 5 clocks of 3 workers exact" "$WORK/roles.out" ||
    fail "no exact sums from worker 0"
[[ -z $(ls -A "$RDV") ]] || fail "the rendezvous file was left behind"

# The rotation gives each item block one writer at a time in a fixed order, so
# the model does not depend on timing, nor on the launcher.
"$LOOM" gen mf --users 300 --items 500 --ratings 20000 --rank 4 --seed 5 --quiet \
    --out "$WORK/r.tsv" || fail "loom gen mf failed"
args=(train mf --train "$WORK/r.tsv" --schedule rotation --servers 1 --epochs 3 --quiet)
timeout -k 5 120 "$LOOM" "${args[@]}" --workers 3 --model-out "$WORK/rot-local.model" \
    >"$WORK/rot-local.out" 2>&1 || fail "the local rotation job failed"
mpi rotation 120 -np 5 "$LOOM" "${args[@]}" --model-out "$WORK/rot-mpi.model"
cmp "$WORK/rot-local.model" "$WORK/rot-mpi.model" ||
    fail "the rotation model trained under mpirun differs from the local launcher's"

TRAIN=$DATA/a9a/a9a TEST=$DATA/a9a/a9a.t
if [[ ! -r $TRAIN || ! -r $TEST ]]; then
    echo "skipped (a9a part): $DATA/a9a not found (the shared datasets are not part of a clone)"
    exit 77
fi
args=(train lr --train "$TRAIN" --test "$TEST" --servers 2 --consistency ssp:2 --updater adagrad
      --lr 0.1 --epochs 6 --quiet)
timeout -k 5 300 "$LOOM" "${args[@]}" --workers 3 --model-out "$WORK/local.model" \
    >"$WORK/local.out" 2>&1 || fail "the local job failed"
mpi train 300 -np 6 "$LOOM" "${args[@]}" --model-out "$WORK/mpi.model"

accuracy() {
    "$LOOM" predict lr --model "$1" --data "$TEST" | sed -n 's/.*accuracy \([0-9.]*\).*/\1/p'
}
local_acc=$(accuracy "$WORK/local.model") mpi_acc=$(accuracy "$WORK/mpi.model")
echo "a9a, 3 workers, 2 servers, SSP(2): test accuracy $mpi_acc under mpirun, $local_acc locally"
numeric_check 'a >= 0.848 && a - b <= 0.005 && a - b >= -0.005' a="$mpi_acc" b="$local_acc" ||
    fail "under mpirun accuracy $mpi_acc (local: $local_acc); want >= 0.848 and within 0.005"
echo PASS
