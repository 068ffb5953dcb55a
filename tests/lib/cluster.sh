# shellcheck shell=bash
# tests/lib/cluster.sh: shared by the cluster tests (builds on common.sh);
# sourced with the paths of the `loom` binary and of cluster_check as $1 and $2. Processes are started the way a launcher
# starts them: with the launcher's variables only (every LOOM_, OMPI_, PMI_,
# PMIX_ and SLURM variable inherited from the caller is removed first). Each
# test gets a scratch directory $WORK, which is also TMPDIR, so the private
# rendezvous directory of one-host jobs is the test's own. Whatever way the
# test ends, every process it started is killed (with its process group).
set -u
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# shellcheck disable=SC2034 # LOOM, CHECK and RDV are for the tests that source this
LOOM=${1:?usage: $0 LOOM_BINARY CLUSTER_CHECK_BINARY ...}
# shellcheck disable=SC2034
CHECK=${2:?usage: $0 LOOM_BINARY CLUSTER_CHECK_BINARY ...}
work_dir cluster
export TMPDIR=$WORK
# shellcheck disable=SC2034
RDV="$WORK/loom-$(id -u)" # where one-host jobs rendezvous
declare -A PID STATUS
GROUPS_TO_KILL=()

clear_env_matching '^(LOOM_|OMPI_|PMI_|PMIX_|SLURM|MPI_LOCAL)'

cleanup() {
    local p
    for p in "${PID[@]}"; do kill -KILL "$p" 2>/dev/null; done
    for p in "${GROUPS_TO_KILL[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
    wait 2>/dev/null
    remove_work
}
trap cleanup EXIT

# fail_show: what fail (common.sh) shows: the end of every process's output.
fail_show() { show_tails 20 "$WORK"/*.out; }

# spawn NAME VAR=VALUE... -- COMMAND...: start one process in the background
# with those variables added; its output goes to $WORK/NAME.out. Started
# directly by this shell, so all of a job's processes share a parent (as under
# a launcher's per-host daemon).
spawn() {
    local name=$1
    shift
    local vars=()
    while [[ $1 != -- ]]; do vars+=("$1"); shift; done
    shift
    env "${vars[@]}" "$@" >"$WORK/$name.out" 2>&1 &
    PID[$name]=$!
}

# finish SECONDS NAME...: wait for the named processes, at most SECONDS in all;
# their exit statuses go to STATUS[NAME].
finish() {
    local deadline=$(($(date +%s) + $1)) name
    shift
    for name in "$@"; do
        while kill -0 "${PID[$name]}" 2>/dev/null; do
            (($(date +%s) < deadline)) || fail "$name still running after the time allowed"
            poll_pause 0.05
        done
        wait "${PID[$name]}"
        STATUS[$name]=$?
        unset "PID[$name]"
    done
}

# expect_ok NAME...: each exited 0.
expect_ok() {
    local name
    for name in "$@"; do
        [[ ${STATUS[$name]} -eq 0 ]] || fail "$name exited with status ${STATUS[$name]}"
    done
}

# expect_line NAME TEXT: a line of NAME's output starts with TEXT.
expect_line() {
    awk -v t="$2" 'index($0, t) == 1 { found = 1 } END { exit !found }' "$WORK/$1.out" ||
        fail "$1 did not print a line starting with '$2'"
}

# wait_for_line NAME TEXT SECONDS: until NAME's output has a line containing
# TEXT (the process got that far), failing if NAME exits first or after SECONDS.
wait_for_line() {
    local deadline=$(($(date +%s) + $3))
    until grep -qF -- "$2" "$WORK/$1.out"; do
        kill -0 "${PID[$1]}" 2>/dev/null || fail "$1 exited before printing '$2'"
        (($(date +%s) < deadline)) || fail "$1 did not print '$2' within $3 s"
        poll_pause 0.05
    done
}

# srun_vars RANK SIZE NODES JOB [NODELIST]: the variables srun gives task RANK
# of a SIZE-task step 0 of job JOB on NODES hosts (this host is "localhost").
srun_vars() {
    local list=${5:-localhost}
    echo "SLURM_PROCID=$1 SLURM_LOCALID=$1 SLURM_NODEID=0 SLURM_NTASKS=$2 SLURM_NPROCS=$2" \
        "SLURM_STEP_NUM_TASKS=$2 SLURM_NNODES=$3 SLURM_JOB_NUM_NODES=$3 SLURM_STEP_NUM_NODES=$3" \
        "SLURM_JOB_ID=$4 SLURM_JOBID=$4 SLURM_STEP_ID=0 SLURM_STEPID=0 SLURM_JOB_NODELIST=$list" \
        "SLURM_NODELIST=$list SLURM_STEP_NODELIST=$list SLURMD_NODENAME=localhost"
}
