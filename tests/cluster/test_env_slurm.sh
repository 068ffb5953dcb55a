#!/usr/bin/env bash
# Started the way srun starts a job step, with nothing but Slurm's variables:
#   one host   ranks become scheduler, server, workers; they meet through a
#              rendezvous file in the private directory (removed afterwards),
#              whatever order they start in;
#   two hosts  (a node list, no shared directory) the others find the
#              scheduler on the list's first host, at LOOM_PORT; the scheduler
#              listens on every interface, the others on their route to it.
# shellcheck source-path=SCRIPTDIR source=../lib/cluster.sh
source "$(dirname "$0")/../lib/cluster.sh"

# One host, default servers (1): 5 tasks = scheduler, server 0, workers 0-2.
# Workers first; the scheduler only once each of them has said (LOOM_VERBOSE=1)
# that it waits for the scheduler's address.
job=$((100000 + RANDOM))
for rank in 4 3 2 1; do
    # shellcheck disable=SC2046
    spawn "r$rank" $(srun_vars $rank 5 1 $job) LOOM_VERBOSE=1 -- "$CHECK"
done
for rank in 4 3 2 1; do
    wait_for_line "r$rank" "waiting up to 60000 ms for rank 0 (the scheduler) to publish its address" 30
done
# shellcheck disable=SC2046
spawn r0 $(srun_vars 0 5 1 $job) -- "$CHECK"
finish 60 r0 r1 r2 r3 r4
expect_ok r0 r1 r2 r3 r4
expect_line r0 "node: scheduler 0 of 1 (servers 1) at 127.0.0.1:"
expect_line r1 "node: server 0 of 1 (servers 1) at 127.0.0.1:"
expect_line r2 "node: worker 0 of 3 (servers 1) at 127.0.0.1:"
expect_line r3 "node: worker 1 of 3 (servers 1) at 127.0.0.1:"
expect_line r4 "node: worker 2 of 3 (servers 1) at 127.0.0.1:"
expect_line r2 "sum: 5 clocks of 3 workers exact"
[[ -d $RDV ]] || fail "no private rendezvous directory $RDV"
[[ $(stat -c %a "$RDV") == 700 ]] || fail "$RDV is not private (mode $(stat -c %a "$RDV"))"
[[ -z $(ls -A "$RDV") ]] || fail "the rendezvous file was left behind: $(ls -A "$RDV")"

# Two hosts (as far as the variables say), LOOM_NUM_SERVERS=2: 6 tasks.
port=$("$CHECK" free-port) || fail "no free port"
job=$((job + 1))
for rank in 0 1 2 3 4 5; do
    # shellcheck disable=SC2046
    spawn "m$rank" $(srun_vars $rank 6 2 $job "localhost,cn[02-03]") LOOM_NUM_SERVERS=2 \
        LOOM_PORT="$port" -- "$CHECK"
done
finish 60 m0 m1 m2 m3 m4 m5
expect_ok m0 m1 m2 m3 m4 m5
expect_line m0 "node: scheduler 0 of 1 (servers 2) at 0.0.0.0:$port"
expect_line m1 "node: server 0 of 2 (servers 2) at 127.0.0.1:"
expect_line m2 "node: server 1 of 2 (servers 2) at 127.0.0.1:"
expect_line m5 "node: worker 2 of 3 (servers 2) at 127.0.0.1:"
expect_line m3 "sum: 5 clocks of 3 workers exact"
[[ -z $(ls -A "$RDV") ]] || fail "a two-host job used the one-host rendezvous directory"
echo PASS
