#!/usr/bin/env bash
# Started the way MPICH's Hydra (mpiexec) starts ranks: PMI_RANK, PMI_SIZE and
# MPI_LOCALNRANKS, and no job id. On one host the ranks' common parent (Hydra's
# per-host proxy; here this script) tells jobs apart. On several hosts a shared
# directory needs LOOM_JOB_ID, and the error says so.
# shellcheck source-path=SCRIPTDIR source=../lib/cluster.sh
source "$(dirname "$0")/../lib/cluster.sh"

# run_job PREFIX SIZE LOCAL [VAR=VALUE...]
run_job() {
    local prefix=$1 size=$2 local_size=$3 rank names=()
    shift 3
    for ((rank = 0; rank < size; rank++)); do
        spawn "$prefix$rank" PMI_RANK=$rank PMI_SIZE="$size" MPI_LOCALNRANKS="$local_size" \
            MPI_LOCALRANKID=$rank PMI_FD=$((rank + 5)) "$@" -- "$CHECK"
        names+=("$prefix$rank")
    done
    finish 60 "${names[@]}"
}

run_job a 5 5 LOOM_NUM_SERVERS=2
expect_ok a0 a1 a2 a3 a4
expect_line a0 "node: scheduler 0 of 1 (servers 2) at 127.0.0.1:"
expect_line a2 "node: server 1 of 2 (servers 2) at 127.0.0.1:"
expect_line a4 "node: worker 1 of 2 (servers 2) at 127.0.0.1:"
expect_line a3 "sum: 5 clocks of 2 workers exact"

mkdir "$WORK/shared"
run_job b 3 1 LOOM_RENDEZVOUS_DIR="$WORK/shared"
for r in 0 1 2; do
    [[ ${STATUS[b$r]} -ne 0 ]] || fail "rank $r ran without a job id for the shared directory"
    grep -q "set LOOM_JOB_ID" "$WORK/b$r.out" || fail "rank $r did not ask for LOOM_JOB_ID"
done
run_job c 3 1 LOOM_RENDEZVOUS_DIR="$WORK/shared" LOOM_JOB_ID="pmi-test-$$" LOOM_INTERFACE=lo
expect_ok c0 c1 c2
expect_line c2 "sum: 5 clocks of 1 workers exact"
echo PASS
