#!/usr/bin/env bash
# Started the way Open MPI's mpirun starts ranks, with only its variables.
# Usage: test_env_ompi.sh LOOM CLUSTER_CHECK CASE, CASE one of
#   launch     one host (OMPI_COMM_WORLD_LOCAL_SIZE = SIZE): rendezvous in the
#              private directory, named by mpirun's job id;
#              shared dir: ranks "on two hosts" (LOCAL_SIZE < SIZE) meet through
#              LOOM_RENDEZVOUS_DIR, and with LOOM_INTERFACE=lo everyone binds
#              127.0.0.1;
#              no dir: ranks on several hosts with neither a shared directory
#              nor LOOM_SCHEDULER stop at once, saying what to set;
#   published  ranks on two hosts meeting through LOOM_RENDEZVOUS_DIR without
#              LOOM_INTERFACE: the scheduler publishes an address of this host
#              that other hosts reach, not a loopback one. Needs an IPv4
#              interface other than lo: exits 77 (skipped) on a machine without;
#   rotation   `loom train mf --schedule rotation` (src/sched's static engine) as
#              5 ranks of one host (scheduler, server, 3 workers): the model is
#              the one the local launcher's --workers 3 saves, byte for byte
#              (the rotation gives each item block one writer at a time, in a
#              fixed order, so the result does not depend on timing).
# shellcheck source-path=SCRIPTDIR source=../lib/cluster.sh
source "$(dirname "$0")/../lib/cluster.sh"
CASE=${3:?usage: $0 LOOM CLUSTER_CHECK launch|published}

# ompi_vars RANK SIZE LOCAL_SIZE JOBID: what mpirun sets for one rank.
ompi_vars() {
    echo "OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_SIZE=$2 OMPI_COMM_WORLD_LOCAL_SIZE=$3" \
        "OMPI_COMM_WORLD_LOCAL_RANK=$(($1 % $3)) OMPI_UNIVERSE_SIZE=$2 OMPI_MCA_ess_base_jobid=$4" \
        "OMPI_MCA_orte_hnp_uri=$4.0;tcp://127.0.0.1:$$ PMIX_RANK=$1 PMIX_NAMESPACE=$4"
}

# run_job PREFIX SIZE LOCAL_SIZE JOBID [VAR=VALUE...]: start and finish one job.
run_job() {
    local prefix=$1 size=$2 local_size=$3 jobid=$4 rank names=()
    shift 4
    for ((rank = 0; rank < size; rank++)); do
        # shellcheck disable=SC2046
        spawn "$prefix$rank" $(ompi_vars $rank "$size" "$local_size" "$jobid") "$@" -- "$CHECK"
        names+=("$prefix$rank")
    done
    finish 60 "${names[@]}"
}

case $CASE in
launch)
    run_job a 4 4 $((RANDOM * 2))
    expect_ok a0 a1 a2 a3
    expect_line a0 "node: scheduler 0 of 1 (servers 1) at 127.0.0.1:"
    expect_line a1 "node: server 0 of 1 (servers 1) at 127.0.0.1:"
    expect_line a3 "node: worker 1 of 2 (servers 1) at 127.0.0.1:"
    expect_line a2 "sum: 5 clocks of 2 workers exact"

    mkdir "$WORK/shared"
    run_job b 5 3 $((RANDOM * 2 + 1)) LOOM_RENDEZVOUS_DIR="$WORK/shared" LOOM_INTERFACE=lo
    expect_ok b0 b1 b2 b3 b4
    expect_line b0 "node: scheduler 0 of 1 (servers 1) at 127.0.0.1:"
    expect_line b4 "node: worker 2 of 3 (servers 1) at 127.0.0.1:"
    expect_line b2 "sum: 5 clocks of 3 workers exact"
    [[ -z $(ls -A "$WORK/shared") ]] || fail "the rendezvous file was left in the shared directory"
    [[ ! -e $RDV || -z $(ls -A "$RDV") ]] || fail "a shared-directory job used the private directory"

    run_job d 4 2 77
    for r in 0 1 2 3; do
        [[ ${STATUS[d$r]} -ne 0 ]] || fail "rank $r ran without any way to find the scheduler"
        grep -q "set LOOM_RENDEZVOUS_DIR to a directory every host shares, or LOOM_SCHEDULER" \
            "$WORK/d$r.out" || fail "rank $r did not say what to set"
    done
    ;;
published)
    if ! ip -4 -o addr show up 2>/dev/null | awk '$2 != "lo"' | grep -q inet; then
        echo "skipped: no IPv4 interface other than lo is up, so there is no address other hosts reach to publish"
        exit 77
    fi
    mkdir "$WORK/shared"
    run_job c 4 2 $((RANDOM * 2)) LOOM_RENDEZVOUS_DIR="$WORK/shared"
    expect_ok c0 c1 c2 c3
    addr=$(sed -n 's/^node: scheduler 0 of 1 (servers 1) at \(.*\):[0-9]*$/\1/p' "$WORK/c0.out")
    [[ -n $addr && $addr != 127.* && $addr != 0.0.0.0 ]] ||
        fail "the scheduler published '$addr', not an address other hosts reach"
    expect_line c3 "node: worker 1 of 2 (servers 1) at $addr:" # the route to it
    ;;
rotation)
    "$LOOM" gen mf --users 300 --items 500 --ratings 20000 --rank 4 --seed 5 --quiet \
        --out "$WORK/r.tsv" || fail "loom gen mf failed"
    args=(train mf --train "$WORK/r.tsv" --schedule rotation --servers 1 --epochs 3 --quiet)
    timeout -k 5 120 "$LOOM" "${args[@]}" --workers 3 --model-out "$WORK/local.model" \
        >"$WORK/local.out" 2>&1 || fail "the local job failed"
    jobid=$((RANDOM * 2)) names=()
    for rank in 0 1 2 3 4; do
        # shellcheck disable=SC2046
        spawn "r$rank" $(ompi_vars $rank 5 5 $jobid) -- "$LOOM" "${args[@]}" \
            --model-out "$WORK/ompi.model"
        names+=("r$rank")
    done
    finish 120 "${names[@]}"
    expect_ok "${names[@]}"
    cmp "$WORK/local.model" "$WORK/ompi.model" ||
        fail "the model trained under mpirun's variables differs from the local launcher's"
    ;;
*) echo "unknown case $CASE" >&2; exit 2 ;;
esac
echo PASS
