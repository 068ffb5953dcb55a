#!/usr/bin/env bash
# Elastic workers (docs/ELASTIC.md): workers join a running job in its free
# worker slots (`loom join`, `loom run --max-workers`) and leave it again
# (SIGTERM: loom_leave), checked by the scheduler's data parts accounting
# (LOOM_VERBOSE=1, as in test_parts.sh).
#
#   grow   lr on a9a (../shared/data, decompressed here), 16 data parts, 8
#          epochs, SSP(1): the job starts with 2 of 4 worker slots; once epoch
#          0 is over two workers join (`loom join`); once each has finished a
#          part both get SIGTERM and leave after their part. Every part of
#          every epoch is finished exactly once, by whichever workers; both
#          joins and both leaves are logged by the scheduler, the joiners
#          said how many parts they trained (as many as the scheduler counted
#          finished by them), the job ends with status 0 and a test accuracy
#          of at least 0.84 (exit 77 without the data).
#   refuse malformed joins: no address, a bad address, a bad role, no
#          program, and malformed leaves: status 2 and a message naming what
#          is wrong; a worker joining a job with no free slot is refused by the
#          scheduler, naming it, and exits non-zero, and so is a server; `loom
#          leave` of a worker of that job (fixed shares: no data parts) and of
#          its server (no replicas) is refused, naming why; the job is not
#          disturbed. A job with a free server slot and no replicas fails at
#          its start, saying it needs LOOM_REPLICAS.
#
#   sum_MODE  tests/sched/elastic_sum.c under BSP, SSP(1) or ASP, 2 servers,
#          12 parts, 16 epochs (ASP 30), paced 1 ms a clock, 40 clocks per part each pushing +1 to
#          key 0 and to the part's key of an int64 sum table: 2 of 4 workers
#          start, two join after epoch 0 and leave after a part each
#          (SIGTERM); the sum ends exact (every acknowledged increment counted
#          once: 12 * epochs * 40 on key 0, epochs * 40 on each part's key)
#          and every part of every epoch is finished once; no node dropped a
#          malformed message; every server entered each joiner at the clock
#          the scheduler started it at.
#
#   servers_MODE  the same program and table, BSP, SSP(1) or ASP, growing from
#          1 to 3 servers and 2 to 4 workers and shrinking back: the job starts
#          with 1 of 3 server slots (LOOM_REPLICAS=2: the one live server
#          holds every range) and 2 of 4 worker slots; once epoch 0 is over a
#          server joins (`loom join --role server`) and takes its ranges back
#          (the scheduler's handback), then a second; then two workers join;
#          once each finished a part, both workers and both joined servers
#          get SIGTERM and leave (each server hands its ranges over to their
#          next holders: fence, last replication round, commit). The job ends on 1 server and 2 workers with the
#          sum exact and every part once per epoch; every process exits 0.
#
#   leave_MODE  the same program and table, BSP, SSP(1) or ASP, 2 servers
#          (LOOM_REPLICAS=1) and 3 workers started by `loom run` with a
#          secret; once epoch 0 is over `loom leave` asks: without the secret
#          (no answer), for a worker the job does not have, with another token
#          and another size (refused); worker 1 (it leaves after its part, and
#          the command says so), worker 1 again (gone), server 1 (it leaves at
#          once), server 0 (refused: its ranges would have no holder),
#          worker 2 with --no-wait, worker 0 (refused: the last worker). The
#          status page counts 3 leaves; the job ends with status 0 on worker
#          0 and server 0, the sum exact, every part once per epoch, and the
#          three that left exit 0.
#   deadslot  the same program, BSP, 2 servers (LOOM_REPLICAS=1), 3 workers,
#          --on-worker-failure continue: worker 1 is killed after epoch 0,
#          and a worker that joins takes its slot and finishes parts; the sum
#          is exact but for what the dead worker pushed for the part it did
#          not finish (ELASTIC_SUM_LOST=1), every part once per epoch.
#   free_slot  the same program, BSP, 1 of 2 server slots (LOOM_REPLICAS=1),
#          2 of 4 workers; two workers join after epoch 0 and leave after a
#          part each: each is told that server 1 is a free slot, the sum is
#          exact, every part once per epoch, every read exact (a joiner's
#          first one may hold the pushes of its own clock too).
#   join_both  the same program, BSP, 1 of 2 server slots, 2 of 3 workers:
#          a worker joins while the live server is stopped (its join waits
#          for that server's answer) and a server asks to join meanwhile: it
#          is asked to ask again until the worker's join is done; no message
#          is dropped as malformed, the sum and the reads are exact.
#   servers_fallback  the same program, SSP(1), 1 of 3 server slots, 2
#          workers, LOOM_REPLICAS=2, an 8 s heartbeat timeout: two servers join
#          and take their ranges back; then server 2 is stopped (SIGSTOP) and
#          server 1 asked to leave (SIGTERM): its handover waits for server 2's
#          fence, server 2 is declared dead, and server 1 leaves by failover
#          instead, as the scheduler says; server 2 is killed. The sum ends
#          exact, every part once per epoch, the job and server 1 exit 0.
#
# Usage: test_elastic.sh LOOM CASE [DATA_DIR [ELASTIC_SUM]]
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 LOOM CASE [DATA_DIR [ELASTIC_SUM]]}
CASE=${2:?usage: $0 LOOM CASE [DATA_DIR [ELASTIC_SUM]]}
DATA=${3:-}
work_setup elastic
cd "$WORK" || exit 1
joiners=()
trap 'for p in "${joiners[@]}"; do kill -KILL "$p" 2>/dev/null; done; work_cleanup' EXIT

# grow_and_shrink SERVERS PROGRAM ARGS...: once epoch 0 of the job $launcher
# runs (its output in job.out) is over, two workers join it (PROGRAM ARGS,
# output in join1.out, join2.out); once each finished a part both get
# SIGTERM; they must leave and exit with status 0, and the job too.
grow_and_shrink() {
    local servers=$1 addr j r rc
    shift
    wait_log job.out '^loom run: scheduler is at ' "the scheduler's address"
    addr=$(sed -n 's/^loom run: scheduler is at //p' job.out)
    wait_log job.out '^\[scheduler\] info: parts: epoch 0 over' "the end of epoch 0"
    for j in 1 2; do
        "$LOOM" join "$addr" --role worker --servers "$servers" --workers 4 -- "$@" >join$j.out 2>&1 &
        joiners+=($!)
    done
    for r in 2 3; do
        wait_log job.out "^\[scheduler\] warning: worker $r joined the running job from " "worker $r's join"
        wait_log job.out "^\[scheduler\] info: parts: epoch [0-9]*: part [0-9]* finished by worker $r\$" "a part finished by worker $r"
    done
    kill -TERM "${joiners[@]}"
    for r in 2 3; do
        wait_log job.out "^\[scheduler\] warning: worker $r left the running job" "worker $r's leave"
    done
    for j in 1 2; do
        wait "${joiners[j - 1]}" || { rc=$?; cp join$j.out err; fail "joiner $j: exit status $rc"; }
    done
    joiners=()
    wait "$launcher"
    rc=$?
    launcher=
    cp job.out err
    ((rc == 0)) || { show_tails 40 job.out; fail "the job: exit status $rc"; }
}

# exactly_once PARTS EPOCHS: the scheduler's "finished" lines in job.out name
# every part of every epoch once and nothing else, and every epoch ended.
exactly_once() {
    local want got
    want=$(for ((e = 0; e < $2; e++)); do for ((p = 0; p < $1; p++)); do echo "$e $p"; done; done)
    got=$(sed -n 's/^\[scheduler\] info: parts: epoch \([0-9]*\): part \([0-9]*\) finished by worker [0-9]*$/\1 \2/p' job.out | sort -n -k1,1 -k2,2)
    [[ $got == "$want" ]] || fail "the parts finished are not every part of every epoch once"
    grep -q "not counted" job.out && fail "a finish was not counted"
    [[ $(grep -c "^\[scheduler\] info: parts: epoch [0-9]* over: $1 parts finished" job.out) == "$2" ]] ||
        fail "not $2 epoch ends of $1 parts"
}

# joins_at_start [SERVER_LOGS...]: every server entered each joined worker at
# the clock the scheduler started it at (job.out and the joined servers'
# logs): a server that had ended that clock before it heard of the worker
# would apply the worker's pushes of it after answering reads that should
# have held them (a BSP read short by one).
joins_at_start() {
    local want got
    want=$(sed -n 's/^\[scheduler\] info: worker \([0-9]*\) joins at clock \([0-9]*\) .*/\1 \2/p' job.out | sort -u)
    got=$(cat job.out "$@" | sed -n 's/^.*\[server [0-9]*\] info: worker \([0-9]*\) joined at clock \([0-9]*\)$/\1 \2/p' | sort -u)
    [[ -n $want && $got == "$want" ]] ||
        { printf 'started at (worker clock): %s\nentered at: %s\n' "$want" "$got" >err; fail "a server entered a joined worker at another clock than the scheduler started it at"; }
}

# sum_job_checks LOGS...: after an elastic_sum job with joiners of 12 parts of
# 40 clocks over $epochs epochs: every part once per epoch, no malformed
# message in LOGS, worker 0 found the sum exact, and every server entered
# each joiner at the clock the scheduler started it at.
sum_job_checks() {
    exactly_once 12 "$epochs"
    grep -q "malformed" "$@" && fail "a node dropped a malformed message"
    grep -q "^\[worker 0\] exact: $((12 * epochs * 40)) increments\$" job.out ||
        fail "worker 0 did not find the sum exact"
    joins_at_start
}

# wait_log FILE PATTERN WHAT: wait (120 s at most) for an extended-regex line
# in FILE; if none comes, fail showing the ends of the job's and joiners' logs.
# fenced_leaves (servers_MODE, after the job): the servers left by fenced
# handovers (docs/ELASTIC.md): no worker sent a push again after a failover
# (its "died: N pushes" lines, the free slots' at the start among them, sum
# to 0), and each worker's pushes_resent counter holds only what the
# handbacks of the joins moved (their "took its ranges back: N pushes"
# lines), nothing for the leaves; the leaves' "N pushes it had not applied"
# are counted as redirected. Under BSP no read (elastic_sum's "read C V"
# lines: key 0 at clock C) misses a push of the clocks before C (one per
# read line of any worker), and from the clock after the joins' last
# handback and the workers' joins on, the reads in the clocks of the leaves
# among them, each holds exactly those. (The first read after a handback's
# commit may hold a push of its own clock too, and a joined worker's first
# read those of the clock it joined at, which this test does not assert
# on.) Sets $redirected and $reads.
fenced_leaves() {
    local out w lines resent moved died redir left exact_from=0 c
    redirected=0 reads=
    for w in 0 1 2 3; do
        if ((w < 2)); then
            lines=$(sed -n "s/^\[worker $w\] //p" job.out)
        else
            lines=$(grep -l "^worker $w: resent " join1.out join2.out | head -1 | xargs cat)
        fi
        grep -q "^worker $w: resent " <<<"$lines" || { cp job.out err; fail "worker $w printed no counters"; }
        resent=$(sed -n "s/^worker $w: resent \([0-9]*\), redirected.*/\1/p" <<<"$lines")
        redir=$(sed -n "s/^worker $w: resent [0-9]*, redirected \([0-9]*\) pushes$/\1/p" <<<"$lines")
        moved=$(sed -n 's/.*took its ranges back: \([0-9]*\) pushes and.*/\1/p' <<<"$lines" | awk '{s += $1} END {print s + 0}')
        left=$(sed -n 's/.*left after handing its ranges over: \([0-9]*\) pushes it had not applied.*/\1/p' <<<"$lines" | awk '{s += $1} END {print s + 0}')
        died=$(sed -n 's/.* died: \([0-9]*\) pushes and.*/\1/p' <<<"$lines" | awk '{s += $1} END {print s + 0}')
        ((resent == moved && died == 0)) || { cp job.out err; fail "worker $w sent $resent pushes again, the handbacks $moved, failovers $died: the leaves sent some again"; }
        # A joined worker prints its counters when it leaves, maybe before a server's leave.
        ((w >= 2 || redir >= left)) || { cp job.out err; fail "worker $w redirected $redir pushes, fewer than its leaves' $left"; }
        redirected=$((redirected + left))
        out+=$(grep '^read ' <<<"$lines")$'\n'
        # After a handback's commit, and a joined worker's first clock (J,
        # the clock the others completed, whose pushes its first read holds).
        c=$(exact_reads_from $((w >= 2)) "$lines")
        ((c > exact_from)) && exact_from=$c
    done
    [[ $mode == bsp ]] || return 0
    bsp_reads_exact "$exact_from" "$out"
}

# exact_reads_from JOINED LINES: the clock after a worker's first read (its
# LINES' "read C V") that follows its last "took its ranges back" and, with
# JOINED 1 (a worker that joined), its first read at all: such a read may
# hold a push of its own clock too; the later ones hold exactly the pushes
# of the clocks before theirs.
exact_reads_from() {
    awk -v joined="$1" '/took its ranges back/ { hb = 1; next }
        (hb || joined) && /^read / { c = $2; hb = joined = 0 } END { print c + 1 }' <<<"$2"
}

# bsp_reads_exact FROM READS: every worker's "read C V" lines (READS) hold
# exactly the pushes of the clocks before C (one per read at those clocks:
# each read is followed by its push) from clock FROM on, and never fewer
# before it. Sets $reads to their number.
bsp_reads_exact() {
    reads=$(grep -c '^read ' <<<"$2")
    ((reads > 0)) || fail "no BSP reads printed"
    grep '^read ' <<<"$2" | sort -k2,2n | awk -v from="$1" '
        $2 != clock { before = seen; clock = $2 }
        { seen++ }
        $3 < before || ($3 != before && $2 >= from) { print "clock " $2 ": read " $3 ", pushed before it " before; bad = 1; exit }
        END { exit bad }' >reads.bad || { cp reads.bad err; fail "a BSP read is not exact (exact from clock $1 on): $(cat reads.bad)"; }
}

wait_log() {
    local deadline=$(($(now_ms) + 120000))
    until grep -Eq "$2" "$1"; do
        [[ -n $launcher ]] && ! kill -0 "$launcher" 2>/dev/null &&
            { show_tails 40 job.out join1.out join2.out srv1.out srv2.out; fail "the job ended before $3"; }
        (($(now_ms) < deadline)) || { show_tails 40 job.out join1.out join2.out srv1.out srv2.out; fail "no $3 within 120 s"; }
        poll_pause 0.05
    done
}

case $CASE in
grow)
    [[ -n $DATA && -f $DATA/a9a/a9a ]] || skip "$DATA/a9a not found (the shared datasets are not part of a clone)"
    train=(train lr --train "$DATA/a9a/a9a" --epochs 8 --minibatch 10 --data-parts 16
        --consistency ssp:1)
    export LOOM_JOB_TOKEN=elastic-$$ LOOM_VERBOSE=1 LOOM_HEARTBEAT_TIMEOUT_MS=20000
    "$LOOM" run --servers 1 --workers 2 --max-workers 4 --insecure --no-status -- \
        "$LOOM" "${train[@]}" --test "$DATA/a9a/a9a.t" --metrics m >job.out 2>&1 &
    launcher=$!
    grow_and_shrink 1 "$LOOM" "${train[@]}"
    exactly_once 16 8
    by_joiners=$(grep -Ec '^\[scheduler\] info: parts: epoch [0-9]*: part [0-9]* finished by worker [23]$' job.out)
    said=0
    for j in 1 2; do
        n=$(sed -n 's/^left the job after training \([0-9]*\) parts of 16$/\1/p' join$j.out)
        [[ -n $n ]] || { cp join$j.out err; fail "joiner $j did not say it left"; }
        said=$((said + n))
    done
    ((said == by_joiners)) || fail "the joiners say they trained $said parts, the scheduler counted $by_joiners"
    acc=$(last_value m test_accuracy)
    [[ -n $acc ]] || fail "no test accuracy in the metrics"
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.84) }' || fail "test accuracy $acc below 0.84"
    echo "2 workers joined epoch $(sed -n 's/^\[scheduler\] info: parts: epoch \([0-9]*\): worker 2 joined$/\1/p' job.out) and left after $by_joiners parts; every part once per epoch; test accuracy $acc"
    ;;
sum_bsp | sum_ssp | sum_asp)
    SUM=${4:?usage: $0 LOOM sum_MODE DATA_DIR ELASTIC_SUM}
    mode=${CASE#sum_}
    # Paced (1 ms a clock, pacing only: nothing waits on it), so that the
    # joins and leaves happen while the job runs; ASP's clocks wait for
    # nobody, and its job runs longer.
    epochs=16 pace=1000
    [[ $mode == asp ]] && epochs=30
    export LOOM_JOB_TOKEN=elastic-$$ LOOM_VERBOSE=1 LOOM_HEARTBEAT_TIMEOUT_MS=20000
    "$LOOM" run --servers 2 --workers 2 --max-workers 4 --insecure --no-status -- \
        "$SUM" "$mode" 12 $epochs 40 $pace >job.out 2>&1 &
    launcher=$!
    grow_and_shrink 2 "$SUM" "$mode" 12 $epochs 40 $pace
    sum_job_checks job.out
    for j in 1 2; do
        grep -q '^worker [23] left after [1-9][0-9]* parts$' join$j.out ||
            { cp join$j.out err; fail "joiner $j did not say it left after its parts"; }
    done
    echo "$mode: 2 workers joined and left; the int64 sum is exact ($((12 * epochs * 40)) increments); every part once per epoch"
    ;;
free_slot)
    SUM=${4:?usage: $0 LOOM free_slot DATA_DIR ELASTIC_SUM}
    # BSP, 1 of 2 server slots (LOOM_REPLICAS=1: the live server holds every
    # range): the workers that join must route around the free slot as the
    # others do, and their reads be exact.
    epochs=16 pace=1000
    prog=("$SUM" bsp 12 "$epochs" 40 "$pace")
    export LOOM_JOB_TOKEN=elastic-$$ LOOM_VERBOSE=1 LOOM_HEARTBEAT_TIMEOUT_MS=20000 LOOM_REPLICAS=1
    export ELASTIC_SUM_READS=1
    "$LOOM" run --servers 1 --max-servers 2 --workers 2 --max-workers 4 --insecure --no-status -- \
        "${prog[@]}" >job.out 2>&1 &
    launcher=$!
    grow_and_shrink 2 "${prog[@]}"
    sum_job_checks job.out join1.out join2.out
    for j in 1 2; do
        grep -q "server 1 (node 2) is a free slot" join$j.out ||
            { cp join$j.out err; fail "joiner $j was not told that server 1 is a free slot"; }
    done
    # A joined worker's first read holds the pushes of the clock it joined
    # at too (test_elastic.sh's note above): exact after it.
    from=$(awk '/^read / && !first[FILENAME]++ { if ($2 + 1 > c) c = $2 + 1 } END { print c + 0 }' join1.out join2.out)
    bsp_reads_exact "$from" "$(sed -n 's/^\[worker [01]\] //p' job.out; cat join1.out join2.out)"
    echo "2 workers joined a job with a free server slot and left; the int64 sum is exact ($((12 * epochs * 40)) increments); $reads BSP reads exact"
    ;;
join_both)
    SUM=${4:?usage: $0 LOOM join_both DATA_DIR ELASTIC_SUM}
    # BSP, 1 of 2 server slots (LOOM_REPLICAS=1), 2 of 3 worker slots. A
    # worker joins while the live server is stopped (SIGSTOP), so its join
    # waits for that server's answer; meanwhile a server asks to join the
    # free slot. It must wait (asked to ask again) until the worker's join
    # is done: taken in then, it never heard of the worker, dropped its
    # clocks as a free slot's, and the worker took it for up, not joining
    # (it dropped its REJOIN_READY and HANDBACK as malformed).
    epochs=20 pace=1000
    prog=("$SUM" bsp 12 "$epochs" 40 "$pace")
    export LOOM_JOB_TOKEN=elastic-$$ LOOM_VERBOSE=1 LOOM_HEARTBEAT_TIMEOUT_MS=20000 LOOM_REPLICAS=1
    export ELASTIC_SUM_READS=1
    "$LOOM" run --servers 1 --max-servers 2 --workers 2 --max-workers 3 --insecure --no-status -- \
        "${prog[@]}" >job.out 2>&1 &
    launcher=$!
    wait_log job.out '^loom run: scheduler is at ' "the scheduler's address"
    addr=$(sed -n 's/^loom run: scheduler is at //p' job.out)
    wait_log job.out '^\[scheduler\] info: parts: epoch 0 over' "the end of epoch 0"
    server0=$(role_pid server 0) || fail "server 0 of the job not found"
    kill -STOP "$server0"
    "$LOOM" join "$addr" --role worker --servers 2 --workers 3 -- "${prog[@]}" >join1.out 2>&1 &
    joiners+=($!)
    wait_log job.out "^\[scheduler\] warning: worker 2 joined the running job from " "worker 2's join"
    "$LOOM" join "$addr" --role server --servers 2 --workers 3 -- "${prog[@]}" >srv1.out 2>&1 &
    joiners+=($!)
    wait_log job.out "^\[scheduler\] info: a server asked to take slot 2 while a worker joins: it asks again\$" "the server's join held back"
    kill -CONT "$server0"
    wait_log job.out "^\[scheduler\] warning: server 1 took its ranges back\$" "server 1's handback"
    for k in 0 1; do
        wait "${joiners[k]}" || { rc=$?; show_tails 40 join1.out srv1.out; fail "joiner $((k + 1)): exit status $rc"; }
    done
    joiners=()
    wait "$launcher"
    rc=$?
    launcher=
    cp job.out err
    ((rc == 0)) || { show_tails 40 job.out; fail "the job: exit status $rc"; }
    sum_job_checks job.out join1.out srv1.out
    grep -q "server 1 took its ranges back: [0-9]* pushes" join1.out ||
        { cp join1.out err; fail "worker 2 did not hear that server 1 took its ranges back"; }
    # Exact from each worker's first read after the handback's commit and the
    # joiner's first read on (either may hold a push of its own clock too).
    out= from=0
    for w in 0 1 2; do
        if ((w < 2)); then lines=$(sed -n "s/^\[worker $w\] //p" job.out); else lines=$(cat join1.out); fi
        out+=$(grep '^read ' <<<"$lines")$'\n'
        c=$(exact_reads_from $((w == 2)) "$lines")
        ((c > from)) && from=$c
    done
    bsp_reads_exact "$from" "$out"
    echo "a server's join waited for a worker's; the int64 sum is exact ($((12 * epochs * 40)) increments); $reads BSP reads exact"
    ;;
servers_bsp | servers_ssp | servers_asp)
    SUM=${4:?usage: $0 LOOM servers_MODE DATA_DIR ELASTIC_SUM}
    mode=${CASE#servers_}
    # Paced as sum_MODE, and longer: two servers join one after the other,
    # each copying and taking back its ranges, before the workers do.
    epochs=40 pace=1000
    [[ $mode == asp ]] && epochs=80
    prog=("$SUM" "$mode" 12 "$epochs" 40 "$pace")
    export LOOM_JOB_TOKEN=elastic-$$ LOOM_VERBOSE=1 LOOM_HEARTBEAT_TIMEOUT_MS=20000 LOOM_REPLICAS=2
    export ELASTIC_SUM_READS=1 # BSP: every worker's reads, checked below
    "$LOOM" run --servers 1 --max-servers 3 --workers 2 --max-workers 4 --insecure --no-status -- \
        "${prog[@]}" >job.out 2>&1 &
    launcher=$!
    wait_log job.out '^loom run: scheduler is at ' "the scheduler's address"
    addr=$(sed -n 's/^loom run: scheduler is at //p' job.out)
  wait_log job.out '^\[scheduler\] info: job assembled: 1 server\(s\), 2 worker\(s\), 2 free server slot\(s\) and 2 free worker slot\(s\)' "the job's start with free slots"
    wait_log job.out '^\[scheduler\] info: parts: epoch 0 over' "the end of epoch 0"
    for s in 1 2; do
        "$LOOM" join "$addr" --role server --servers 3 --workers 4 -- "${prog[@]}" >srv$s.out 2>&1 &
        joiners+=($!)
        wait_log job.out "^\[scheduler\] warning: server $s \(node [0-9]*\) joined the running job from " "server $s's join"
        wait_log job.out "^\[scheduler\] warning: server $s took its ranges back\$" "server $s's handback"
    done
    for j in 1 2; do
        "$LOOM" join "$addr" --role worker --servers 3 --workers 4 -- "${prog[@]}" >join$j.out 2>&1 &
        joiners+=($!)
    done
    for r in 2 3; do
        wait_log job.out "^\[scheduler\] warning: worker $r joined the running job from " "worker $r's join"
        wait_log job.out "^\[scheduler\] info: parts: epoch [0-9]*: part [0-9]* finished by worker $r\$" "a part finished by worker $r"
    done
    kill -TERM "${joiners[@]}"
    for r in 2 3; do
        wait_log job.out "^\[scheduler\] warning: worker $r left the running job" "worker $r's leave"
    done
    for s in 1 2; do
        wait_log job.out "^\[scheduler\] warning: server $s handed its ranges over to their next holders\$" "server $s's handover"
        wait_log job.out "^\[scheduler\] warning: server $s left the running job; the job goes on without it" "server $s's leave"
    done
    for k in 0 1 2 3; do
        wait "${joiners[k]}" || { rc=$?; show_tails 40 srv1.out srv2.out join1.out join2.out; fail "joiner $((k + 1)) of 4: exit status $rc"; }
    done
    joiners=()
    wait "$launcher"
    rc=$?
    launcher=
    cp job.out err
    ((rc == 0)) || { show_tails 40 job.out; fail "the job: exit status $rc"; }
    exactly_once 12 $epochs
    grep -q "malformed" job.out srv1.out srv2.out && fail "a node dropped a malformed message"
    joins_at_start srv1.out srv2.out
    grep -q "^\[worker 0\] exact: $((12 * epochs * 40)) increments\$" job.out ||
        fail "worker 0 did not find the sum exact"
    for s in 1 2; do
        grep -q "^server $s joined\$" srv$s.out || { cp srv$s.out err; fail "joined server $s did not say so"; }
        grep -q "left the running job: its ranges are served by the other servers" srv$s.out ||
            { cp srv$s.out err; fail "server $s did not say it left"; }
    done
    fenced_leaves
    echo "$mode: 2 servers and 2 workers joined and left (1 -> 3 -> 1 servers, 2 -> 4 -> 2 workers); the int64 sum is exact ($((12 * epochs * 40)) increments); every part once per epoch; the servers' leaves were fenced handovers: no push sent again, $redirected redirected${reads:+, $reads BSP reads exact}"
    ;;
servers_fallback)
    SUM=${4:?usage: $0 LOOM servers_fallback DATA_DIR ELASTIC_SUM}
    epochs=30
    prog=("$SUM" ssp 12 "$epochs" 40 1000)
    export LOOM_JOB_TOKEN=elastic-$$ LOOM_VERBOSE=1 LOOM_HEARTBEAT_TIMEOUT_MS=8000 LOOM_REPLICAS=2
    "$LOOM" run --servers 1 --max-servers 3 --workers 2 --insecure --no-status -- \
        "${prog[@]}" >job.out 2>&1 &
    launcher=$!
    wait_log job.out '^loom run: scheduler is at ' "the scheduler's address"
    addr=$(sed -n 's/^loom run: scheduler is at //p' job.out)
    wait_log job.out '^\[scheduler\] info: parts: epoch 0 over' "the end of epoch 0"
    for s in 1 2; do
        "$LOOM" join "$addr" --role server --servers 3 --workers 2 -- "${prog[@]}" >srv$s.out 2>&1 &
        joiners+=($!)
        wait_log job.out "^\[scheduler\] warning: server $s took its ranges back\$" "server $s's handback"
    done
    kill -STOP "${joiners[1]}"
    kill -TERM "${joiners[0]}"
    wait_log job.out "^\[scheduler\] warning: server 1: its ranges cannot be handed over \(server 2 died\): it leaves by failover" "server 1's failover leave"
    wait_log job.out "^\[scheduler\] warning: server 1 left the running job; the job goes on without it" "server 1's leave"
    kill -KILL "${joiners[1]}"
    wait "${joiners[0]}" || { rc=$?; show_tails 40 srv1.out; fail "server 1: exit status $rc"; }
    joiners=()
    wait "$launcher"
    rc=$?
    launcher=
    cp job.out err
    ((rc == 0)) || { show_tails 30 job.out; fail "the job: exit status $rc"; }
    exactly_once 12 $epochs
    grep -q "^\[worker 0\] exact: $((12 * epochs * 40)) increments\$" job.out ||
        fail "worker 0 did not find the sum exact"
    grep -q "left the running job: its ranges are served by the other servers" srv1.out ||
        { cp srv1.out err; fail "server 1 did not say it left"; }
    echo "server 2 died during server 1's handover: server 1 left by failover; the sum is exact ($((12 * epochs * 40)) increments); every part once per epoch"
    ;;
leave_bsp | leave_ssp | leave_asp)
    SUM=${4:?usage: $0 LOOM leave_MODE DATA_DIR ELASTIC_SUM}
    mode=${CASE#leave_}
    # Paced as sum_MODE, and longer: the job must outlast a dozen requests,
    # one of which waits 2 s for an answer that does not come.
    epochs=40 pace=1000
    [[ $mode == asp ]] && epochs=80
    run keygen secret
    [[ $RC == 0 ]] || fail "loom keygen: exit status $RC"
    export LOOM_JOB_TOKEN=elastic-$$ LOOM_VERBOSE=1 LOOM_HEARTBEAT_TIMEOUT_MS=20000 LOOM_REPLICAS=1
    "$LOOM" run --servers 2 --workers 3 --secret secret --verbose -- \
        "$SUM" "$mode" 12 $epochs 40 $pace >job.out 2>&1 &
    launcher=$!
    wait_log job.out '^loom run: scheduler is at ' "the scheduler's address"
    addr=$(sed -n 's/^loom run: scheduler is at //p' job.out)
    # The scheduler's own line, which may come after loom run's.
    wait_log job.out 'status page at http' "the status page's address"
    url=$(sed -n 's/.*status page at \(http[^ ]*\) .*/\1/p' job.out)
    wait_log job.out '^\[scheduler\] info: parts: epoch 0 over' "the end of epoch 0"
    # Without the secret nobody gets past the handshake: no answer.
    expect 1 "no answer from the scheduler at $addr within 2000 ms" leave "$addr" --worker 1 --timeout 2
    expect 1 "refused: the job has no worker 9: its worker ranks are 0 to 2" leave "$addr" --worker 9 --secret secret
    LOOM_JOB_TOKEN=another expect 1 "refused: a leave request of another job" leave "$addr" --worker 1 --secret secret
    expect 1 "refused: a leave request names a job for 2 servers and 4 workers, but this job has 2 and 3" \
        leave "$addr" --worker 1 --workers 4 --secret secret
    # loom run's own worker 1 leaves after its part, and its server 1 at once.
    run leave "$addr" --worker 1 --secret secret
    [[ $RC == 0 ]] || fail "loom leave --worker 1: exit status $RC"
    grep -qx "loom leave: worker 1 left the running job" out || fail "loom leave --worker 1 does not say the worker left"
    expect 1 "refused: worker 1 left the job already" leave "$addr" --worker 1 --secret secret
    run leave "$addr" --server 1 --secret secret
    [[ $RC == 0 ]] || fail "loom leave --server 1: exit status $RC"
    grep -q "^loom leave: server 1 left the running job: its ranges are served by the other servers" out ||
        fail "loom leave --server 1 does not say the server left"
    expect 1 "refused: server 0 cannot leave: its ranges would have no live holder without it" \
        leave "$addr" --server 0 --secret secret
    expect 1 "refused: server 1 left the job already" leave "$addr" --server 1 --secret secret
    run leave "$addr" --worker 2 --secret secret --no-wait
    [[ $RC == 0 ]] || fail "loom leave --worker 2 --no-wait: exit status $RC"
    grep -qx "loom leave: worker 2 was asked to leave: it leaves after the part it trains on" out ||
        fail "loom leave --no-wait does not say the worker was asked"
    expect 1 "refused: worker 0 is the job's last worker" leave "$addr" --worker 0 --secret secret
    wait_log job.out "^\[scheduler\] warning: worker 2 left the running job" "worker 2's leave"
    # The status page counts the three leaves.
    run status --json "$url"
    [[ $RC == 0 ]] || fail "loom status: exit status $RC"
    grep -q '"leaves": 3' out || fail "the status page does not count 3 leaves"
    wait "$launcher"
    rc=$?
    launcher=
    cp job.out err
    ((rc == 0)) || { show_tails 40 job.out; fail "the job: exit status $rc"; }
    exactly_once 12 $epochs
    grep -q "malformed" job.out && fail "a node dropped a malformed message"
    grep -q "^\[worker 0\] exact: $((12 * epochs * 40)) increments\$" job.out ||
        fail "worker 0 did not find the sum exact"
    for r in 1 2; do
        grep -q "^\[worker $r\] worker $r left after [0-9]* parts\$" job.out || fail "worker $r did not say it left"
        grep -q "^loom run: worker $r exited with status 0\$" job.out || fail "worker $r did not exit 0"
    done
    grep -q "^\[server 1\] info: left the running job: its ranges are served by the other servers" job.out ||
        fail "server 1 did not say it left"
    grep -q "^loom run: server 1 exited with status 0\$" job.out || fail "server 1 did not exit 0"
    echo "$mode: loom leave made workers 1 and 2 and server 1 leave (refusals named); the int64 sum is exact ($((12 * epochs * 40)) increments); every part once per epoch"
    ;;
deadslot)
    SUM=${4:?usage: $0 LOOM deadslot DATA_DIR ELASTIC_SUM}
    epochs=30 pace=1000
    prog=("$SUM" bsp 12 "$epochs" 40 "$pace")
    # Replicas: the newcomer's pushes must not pass for the dead worker's
    # (sequence numbers), which a server would drop as applied already.
    export LOOM_JOB_TOKEN=elastic-$$ LOOM_VERBOSE=1 LOOM_HEARTBEAT_TIMEOUT_MS=5000 LOOM_REPLICAS=1 \
        LOOM_ON_WORKER_FAILURE=continue ELASTIC_SUM_LOST=1
    "$LOOM" run --servers 2 --workers 3 --insecure --no-status --verbose -- "${prog[@]}" >job.out 2>&1 &
    launcher=$!
    wait_log job.out '^loom run: scheduler is at ' "the scheduler's address"
    addr=$(sed -n 's/^loom run: scheduler is at //p' job.out)
    wait_log job.out '^\[scheduler\] info: parts: epoch 0 over' "the end of epoch 0"
    pid=$(role_pid worker 1) || fail "worker 1 of the job not found"
    kill -KILL "$pid"
    wait_log job.out '^\[scheduler\] warning: worker 1 \(node [0-9]*\) died: .*going on without it' "worker 1's death"
    "$LOOM" join "$addr" --role worker --servers 2 --workers 3 -- "${prog[@]}" >join1.out 2>&1 &
    joiners+=($!)
    wait_log job.out "^\[scheduler\] info: worker 1's slot was a dead worker's" "the join into the dead worker's slot"
    wait_log job.out "^\[scheduler\] warning: worker 1 joined the running job from " "worker 1's join"
    wait "${joiners[0]}" || { rc=$?; cp join1.out err; fail "the joiner: exit status $rc"; }
    joiners=()
    wait "$launcher"
    rc=$?
    launcher=
    cp job.out err
    ((rc == 0)) || { show_tails 40 job.out; fail "the job: exit status $rc"; }
    after=$(sed -n "/worker 1 joined the running job from /,\$ p" job.out | grep -c "^\[scheduler\] info: parts: epoch [0-9]*: part [0-9]* finished by worker 1\$")
    ((after > 0)) || fail "the worker in the dead worker's slot finished no part"
    exactly_once 12 $epochs
    grep -q "malformed" job.out && fail "a node dropped a malformed message"
    grep -q "^\[worker 0\] exact but for 1 lost worker(s): " job.out ||
        fail "worker 0 did not find the sum exact (but for the dead worker's unfinished part)"
    echo "a worker joined in a dead worker's slot and finished $after parts; the int64 sum is exact but for the dead worker's unfinished part; every part once per epoch"
    ;;
refuse)
    expect 2 "give the scheduler's ADDRESS" join --role worker -- true
    expect 2 "'nohost' is not a scheduler address" join nohost --role worker -- true
    expect 2 "'h:99999' is not a scheduler address" join h:99999 --role worker -- true
    expect 2 "--role 'boss' is not a role that joins" join 127.0.0.1:5 --role boss -- true
    expect 2 "give --role worker or --role server" join 127.0.0.1:5 -- true
    expect 2 "give the worker's program after --" join 127.0.0.1:5 --role worker
    expect 2 "give the server's program after --" join 127.0.0.1:5 --role server
    run gen lr --out data --rows 20000 --features 2000 --nnz 10 --quiet
    [[ $RC == 0 ]] || fail "gen lr: exit status $RC"
    # Free server slots without replicas: the job fails at its start, saying why.
    export LOOM_JOB_TOKEN=elastic-$$
    "$LOOM" run --servers 1 --max-servers 2 --workers 1 --insecure --no-status -- \
        "$LOOM" train lr --train data --epochs 1 --data-parts 2 >norep.out 2>&1
    rc=$?
    ((rc != 0)) || { cp norep.out err; fail "a job with a free server slot and no replicas ran"; }
    grep -q "needs LOOM_REPLICAS (loom train --replicas) of at least 1" norep.out ||
        { cp norep.out err; fail "the job without replicas does not say it needs them"; }
    # Malformed leaves: status 2, naming what is wrong.
    expect 2 "give the scheduler's ADDRESS first" leave --worker 1
    expect 2 "'nohost' is not a scheduler address" leave nohost --worker 1
    expect 2 "give --worker R or --server R" leave 127.0.0.1:5
    expect 2 "--worker and --server" leave 127.0.0.1:5 --worker 1 --server 0
    # A job without free slots, on fixed shares (no --data-parts) and
    # without replicas: the joiner is refused, and so are leaves, saying
    # why; the job goes on.
    export LOOM_JOB_TOKEN=elastic-$$ LOOM_VERBOSE=1
    "$LOOM" run --servers 1 --workers 2 --insecure --no-status --verbose -- "$LOOM" train lr \
        --train data --epochs 6 --minibatch 10 >job.out 2>&1 &
    launcher=$!
    wait_log job.out '^loom run: scheduler is at ' "the scheduler's address"
    addr=$(sed -n 's/^loom run: scheduler is at //p' job.out)
    wait_log job.out '^\[scheduler\] info: job assembled' "the job's start"
    expect 1 "refused: worker 1 cannot leave: the job hands out no data parts" leave "$addr" --worker 1
    expect 1 "refused: server 0 cannot leave: its ranges would have no live holder without it (a job without replicas cannot lose a server" \
        leave "$addr" --server 0
    # A worker and a server at once, both while the job runs.
    for role in worker server; do
        LOOM_CONNECT_TIMEOUT_MS=20000 "$LOOM" join "$addr" --role $role --servers 1 --workers 2 -- \
            "$LOOM" train lr --train data --epochs 3 --minibatch 10 --data-parts 8 >join-$role.out 2>&1 &
        joiners+=($!)
    done
    for k in 0 1; do
        wait "${joiners[k]}" && { cp join-*.out err; fail "a join to a job without free slots succeeded"; }
    done
    joiners=()
    grep -q "every one of the job's 2 worker slots is taken" join-worker.out ||
        { cp join-worker.out err; fail "the refusal does not say the worker slots are taken"; }
    grep -q "every one of the job's 1 server slots is taken" join-server.out ||
        { cp join-server.out err; fail "the refusal does not say the server slots are taken"; }
    wait "$launcher"
    rc=$?
    launcher=
    cp job.out err
    ((rc == 0)) || { show_tails 40 job.out; fail "the job: exit status $rc after a refused join"; }
    echo "malformed joins and leaves refused (status 2); a worker's and a server's join to a full job refused by the scheduler, and their leaves from a job without data parts or replicas; the job ended well"
    ;;
*)
    fail "unknown case $CASE"
    ;;
esac
