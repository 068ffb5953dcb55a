# shellcheck shell=bash
# The jobs of the tests that checkpoint, kill and resume (test_ft_resume.sh,
# test_ft_restart.sh; sourced after cli_lib.sh, in the test's work directory),
# `newest`, which every checkpointing test uses, `kill_gone`, and what the tests of
# `loom train lr` with a replacement server share (test_rejoin*_lr.sh).

# shellcheck disable=SC2034 # read by the scripts that source this file
EVERY=5 # clocks between checkpoints

# ft_model_job MODEL: generate MODEL's data into ./data and set ARGS to a
# one-worker, two-server BSP `loom train MODEL` of hundreds of clocks (long
# enough for several checkpoints to commit before it ends; LR_EPOCHS makes
# lr's longer).
ft_model_job() {
    case $1 in
    lr)
        run gen lr --out data --rows 20000 --features 5000 --nnz 10 --quiet
        # --bandwidth: paced pushes and pulls cut and resume like unpaced ones.
        ARGS=(train lr --train data --updater adagrad --epochs "${LR_EPOCHS:-3}" --minibatch 100
            --bandwidth 200)
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
        sleep 0.05 # a poll, not a synchronisation: the condition is the log
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

# live_since PID: the start time (clock ticks since boot) of the process PID
# if it is alive and not a zombie; nothing otherwise (no program run).
live_since() {
    local stat fields
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 0
    read -ra fields <<<"${stat##*) }" # state ppid pgrp ... (field 22, starttime, is [19])
    [[ ${fields[0]} == Z ]] || echo "${fields[19]}"
}

# kill_gone PID...: SIGKILL each process and wait until every one is gone:
# exited, a zombie, or its pid taken by a later process. SIGKILL is
# delivered asynchronously, and a process inside a sync (a checkpoint's
# fsync) on a loaded disk dies only once that returns: 60 s bound.
kill_gone() {
    local pid deadline
    local -A start=()
    for pid; do start[$pid]=$(live_since "$pid"); done
    kill -KILL "$@" 2>/dev/null
    for pid; do
        [[ -n ${start[$pid]} ]] || continue
        deadline=$((SECONDS + 60))
        while [[ $(live_since "$pid") == "${start[$pid]}" ]]; do
            ((SECONDS < deadline)) ||
                fail "process $pid of the killed job survived SIGKILL for 60 s ($(cat "/proc/$pid/stat" 2>/dev/null), in $(cat "/proc/$pid/wchan" 2>/dev/null))"
            sleep 0.01
        done
    done
}
