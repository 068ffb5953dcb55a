# shellcheck shell=bash
# tests/lib/ft.sh: what the fault-tolerance tests (tests/ft) share, sourced
# after cli.sh or mp.sh: the jobs of the tests that checkpoint, kill and resume
# (test_ft_resume.sh, test_ft_restart.sh; in the test's work directory),
# `newest`, which every checkpointing test uses, what the tests of `loom train
# lr` with a replacement server share (test_rejoin*_lr.sh), and, at the end,
# what the tests of failover_check jobs under `loom run` share. `kill_gone` is
# in common.sh.

# shellcheck disable=SC2034 # read by the scripts that source this file
EVERY=5 # clocks between checkpoints

# ft_model_job MODEL: generate MODEL's data into ./data and set ARGS to a
# one-worker, two-server BSP `loom train MODEL` of hundreds of clocks (long
# enough for several checkpoints to commit before it ends; LR_EPOCHS makes
# lr's and lr_parts's longer).
ft_model_job() {
    case $1 in
    lr)
        run gen lr --out data --rows 20000 --features 5000 --nnz 10 --quiet
        # --bandwidth: paced pushes and pulls cut and resume like unpaced ones.
        ARGS=(train lr --train data --updater adagrad --epochs "${LR_EPOCHS:-3}" --minibatch 100
            --bandwidth 200)
        ;;
    fm)
        run gen fm --out data --rows 20000 --features 2000 --nnz 10 --quiet
        # --threads 2: every lane's state goes into the checkpoint; the
        # sketch counts through the first epoch's checkpoints.
        ARGS=(train fm --train data --epochs 2 --minibatch 100 --threads 2 --threshold 20)
        ;;
    lr_parts)
        # Data parts on demand (loom/parts.h): a cut falls inside a part or
        # between two, and the resumed worker goes on from the part's next
        # minibatch (--threads 2: two lanes a part). --l2: every part's
        # bookkeeping goes into the checkpoint. 609 clocks (29 a part), paced
        # as lr's.
        run gen lr --out data --rows 20000 --features 5000 --nnz 10 --quiet
        ARGS=(train lr --train data --updater adagrad --epochs "${LR_EPOCHS:-3}" --minibatch 50
            --data-parts 7 --threads 2 --l2 0.001 --bandwidth 200)
        ;;
    fm_parts)
        # As fm, over 6 parts handed out on demand (the sketch counts
        # through the first epoch's parts and checkpoints): 204 clocks, 17 a
        # part. (A sketch of 2^16 columns makes its checkpoints 4 times
        # cheaper, but then the job outran its commits and ended before the
        # test's kill.)
        run gen fm --out data --rows 20000 --features 2000 --nnz 10 --quiet
        ARGS=(train fm --train data --epochs 2 --minibatch 100 --threads 2
            --threshold 20 --data-parts 6)
        ;;
    mf)
        run gen mf --out data --users 1000 --items 2000 --ratings 100000 --quiet
        # --steps 2: a checkpoint is cut after a clock's last step.
        ARGS=(train mf --train data --epochs 20 --syncs 20 --steps 2 --eval-every 5)
        ;;
    lda)
        run gen lda --out data --docs 2000 --vocab-size 1000 --topics 10 --doc-length 80 --quiet
        ARGS=(train lda --train data --topics 10 --iterations 60 --syncs 10 --eval-every 12)
        ;;
    *) fail "unknown model $1" ;;
    esac
    [[ $RC == 0 ]] || fail "gen $1: exit status $RC"
    ARGS+=(--workers 1 --servers 2 --consistency bsp --quiet --insecure --no-status)
}

# newest DIR: the clock of the newest committed checkpoint in DIR (0: none yet).
newest() {
    local dir=$1 m c=0
    for m in "$dir"/ckpt-*/MANIFEST; do
        [[ -e $m ]] || continue
        m=${m#"$dir"/ckpt-}
        m=${m%%/*}
        ((10#$m > c)) && c=$((10#$m))
    done
    echo "$c"
}

# wait_for LOG PATTERN WHAT: until LOG (the job $launcher's stderr) matches
# PATTERN; fails naming WHAT if the job ends first or after 120 s.
wait_for() {
    local deadline=$((SECONDS + 120))
    until grep -qE "$2" "$1"; do
        ((SECONDS < deadline)) || fail "no $3 within 120 s"
        kill -0 "$launcher" 2>/dev/null || fail "the job ended before $3: $(tail -5 "$1")"
        poll_pause 0.05 # a poll, not a synchronisation: the condition is the log
    done
}

# within_1pct REF GOT: fail unless objective GOT is within 1% of REF.
within_1pct() {
    awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * a) }' ||
        fail "objective $2 is not within 1% of $1"
}

# replacement_part_after BACK: the newest checkpoint in ck is newer than clock
# BACK (when server 1's replacement was back), has a part written by that
# replacement, and verifies; sets LAST to its clock.
replacement_part_after() {
    LAST=$(newest ck)
    ((LAST > $1)) || fail "no checkpoint committed after the replacement was back (newest: clock $LAST)"
    grep -q "^part server 1 full ckpt-$(printf %012d "$LAST")/server-1.part " \
        "ck/ckpt-$(printf %012d "$LAST")/MANIFEST" ||
        fail "the checkpoint at clock $LAST has no part written by server 1's replacement"
    run checkpoint verify ck
    [[ $RC == 0 ]] || fail "loom checkpoint verify refused the newest checkpoint: $(cat err)"
}

# ---- failover_check jobs under `loom run` with replacement servers
# (test_rejoin.sh, test_handback*.sh; after mp.sh, with the job's output in
# $WORK/job.out and its launcher's pid in $launcher) ----

# last_clock W: the last clock worker W printed (every 10th), or nothing.
last_clock() {
    grep -oE "^\[worker $1\] worker $1 clock [0-9]+$" "$WORK/job.out" | tail -n 1 | grep -oE '[0-9]+$'
}

# wait_past W C: until worker W has printed a clock of at least C (bounded).
wait_past() {
    local w=$1 want=$2 deadline=$(($(now_ms) + 120000)) c
    while :; do
        c=$(last_clock "$w")
        ((${c:-0} >= want)) && return 0
        kill -0 "$launcher" 2>/dev/null || fail "the job ended before worker $w reached clock $want"
        (($(now_ms) > deadline)) && fail "worker $w did not reach clock $want within 120 s"
        poll_pause 0.05 # a poll, not a synchronisation: the condition is the log
    done
}

# advance N: until every worker has printed N more clocks.
advance() {
    local w
    for w in 0 1 2; do wait_past "$w" $(($(last_clock "$w") + $1)); done
}

# end_job_after N: end the job N clocks after the furthest worker's last
# printed clock (the job runs failover_check --end-file "$WORK/end"), so that
# it lasts as long as its faults took on this machine and no longer. N covers
# the clocks a worker ends between two printed ones and while this runs.
end_job_after() {
    local w c end=0
    for w in 0 1 2; do
        c=$(last_clock "$w")
        ((${c:-0} > end)) && end=$c
    done
    echo $((end + $1)) >"$WORK/end.tmp" && mv "$WORK/end.tmp" "$WORK/end"
}

# fault_timeline: the job's faults and what each node did about them, in the
# order they were logged, with worker 0's clocks every 10 between them: what
# an inexact key needs to be traced to the fault that lost (or doubled) it.
fault_timeline() {
    echo "--- the faults, with worker 0's clocks:" >&2
    grep -E "died|rejoined|took its ranges back|fenced|ranges open|aborted|killed|sent again|parked|handing|handed|left|^\[worker 0\] worker 0 clock|failed:" \
        "$WORK/job.out" | grep -v "refused this node" | cut -c1-200 | tail -n 400 >&2
}

# job_ended_exact CLOCKS WORKERS KILLED: wait for the job; every worker in
# WORKERS (e.g. "0 1 2") must have ended CLOCKS clocks (a regex) with every
# key exact, `loom run` exit 0, and no process have failed but those matching
# the regex KILLED.
job_ended_exact() {
    local w status=0 others
    wait "$launcher" || status=$?
    echo "launcher exited with status $status"
    for w in $2; do
        grep -qE "^\[worker $w\] worker $w: $1 clocks, all 1000 keys exact" "$WORK/job.out" ||
            { fault_timeline; fail "worker $w did not end with every key exact"; }
    done
    ((status == 0)) || fail "loom run exited with status $status"
    others=$(grep -E "^loom run: .*(exited with status [1-9]|killed by)" "$WORK/job.out" |
        grep -vE "$3")
    [[ -z $others ]] || fail "other processes failed: $others"
}
