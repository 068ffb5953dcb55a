#!/usr/bin/env bash
# Jobs that cannot run end with a clear message and a non-zero status, and
# jobs that can run do not disturb each other (srun's variables throughout):
#   too few    2 tasks leave no worker: every task says so at once;
#   missing    a worker never comes: the scheduler names it after
#              LOOM_CONNECT_TIMEOUT_MS; rank 0 never comes: the others name
#              the rendezvous file they waited for;
#   no launch  no launcher variables (or an sbatch script's, which has no job
#              step) and no LOOM_ROLE;
#   two jobs   started interleaved on this host with different job ids, each
#              assembles its own processes only.
# shellcheck source-path=SCRIPTDIR source=../lib/cluster.sh
source "$(dirname "$0")/../lib/cluster.sh"
job=$((200000 + RANDOM))

# shellcheck disable=SC2046
spawn t0 $(srun_vars 0 2 1 $job) -- "$CHECK"
# shellcheck disable=SC2046
spawn t1 $(srun_vars 1 2 1 $job) -- "$CHECK"
finish 10 t0 t1
for t in t0 t1; do
    [[ ${STATUS[$t]} -ne 0 ]] || fail "$t ran a job without workers"
    grep -q "srun (Slurm) started 2 processes, but a job needs a scheduler, 1 server" \
        "$WORK/$t.out" || fail "$t did not say that the job is too small"
done

job=$((job + 1))
for rank in 0 1 2; do # rank 3 = worker 1 never comes
    # shellcheck disable=SC2046
    spawn "w$rank" $(srun_vars $rank 4 1 $job) LOOM_CONNECT_TIMEOUT_MS=3000 -- "$CHECK"
done
finish 30 w0 w1 w2
for t in w0 w1 w2; do [[ ${STATUS[$t]} -ne 0 ]] || fail "$t ended well without worker 1"; done
grep -q "missing: worker 1" "$WORK/w0.out" || fail "the scheduler did not name the missing worker"

job=$((job + 1))
for rank in 1 2 3; do # rank 0 = the scheduler never comes
    # shellcheck disable=SC2046
    spawn "s$rank" $(srun_vars $rank 4 1 $job) LOOM_CONNECT_TIMEOUT_MS=2000 -- "$CHECK"
done
finish 30 s1 s2 s3
for t in s1 s2 s3; do
    [[ ${STATUS[$t]} -ne 0 ]] || fail "$t ended well without a scheduler"
    grep -q "rank 0 (the scheduler) did not publish its address in $RDV/loom-slurm-$job.0.addr within 2000 ms" \
        "$WORK/$t.out" || fail "$t did not name the rendezvous it waited for"
done

spawn n0 -- "$CHECK"
spawn n1 SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_JOB_ID=$job SLURM_NNODES=1 \
    SLURM_JOB_NODELIST=localhost -- "$CHECK" # an sbatch script: no SLURM_STEP_ID
finish 10 n0 n1
for t in n0 n1; do
    [[ ${STATUS[$t]} -ne 0 ]] || fail "$t started without a launcher or LOOM_ROLE"
    grep -q "LOOM_ROLE is not set, and no launcher (mpirun, mpiexec, srun) started this process" \
        "$WORK/$t.out" || fail "$t did not explain how to start it"
done

# Two jobs at once on one host: A has 3 workers, B has 2; interleaved start.
ja=$((job + 1)) jb=$((job + 2))
names=()
for rank in 0 1 2 3 4; do
    # shellcheck disable=SC2046
    spawn "a$rank" $(srun_vars $rank 5 1 $ja) LOOM_CONNECT_TIMEOUT_MS=20000 -- "$CHECK"
    names+=("a$rank")
    if ((rank < 4)); then
        # shellcheck disable=SC2046
        spawn "b$rank" $(srun_vars $((3 - rank)) 4 1 $jb) LOOM_CONNECT_TIMEOUT_MS=20000 -- "$CHECK"
        names+=("b$rank")
    fi
done
finish 60 "${names[@]}"
expect_ok "${names[@]}"
expect_line a2 "sum: 5 clocks of 3 workers exact"
expect_line b1 "sum: 5 clocks of 2 workers exact" # b1 has rank 2: worker 0 of job B
echo PASS
