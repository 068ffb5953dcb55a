#!/usr/bin/env bash
# d) Signals to the launcher: SIGINT/SIGTERM/SIGHUP stop the whole job and the
# launcher exits 128+N; a second signal kills at once, without the grace.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

for case in INT:130 TERM:143 HUP:129; do
    sig=${case%:*}
    clean_pid_dir
    start_loom run --servers 2 --workers 2 -- bash "$NODE" hang
    wait_for_pid_files 5
    start=$(now_ms)
    kill -"$sig" "$LAUNCHER_PID"
    wait_loom
    elapsed_since "$start"
    expect_rc "${case#*:}"
    expect_line "$WORK/err" "loom run: received SIG$sig; stopping the job"
    expect_faster_than 2500 # hang mode obeys SIGTERM: no need for the grace period
    expect_no_survivors 5
done

# Ctrl-C in a terminal signals the whole foreground process group: only the
# launcher may get it (each child has a group of its own); the children only
# get the launcher's SIGTERM.
clean_pid_dir
start_loom_in_own_group run --servers 1 --workers 2 -- bash "$NODE" hang
wait_for_pid_files 4
[[ $(ps -o pgid= -p "$LAUNCHER_PID") -eq $LAUNCHER_PID ]] || fail "setsid did not give the launcher its own group"
kill -INT -- "-$LAUNCHER_PID"
wait_loom
expect_rc 130
for f in "$FAKE_DIR"/*.sigint; do
    [[ -e $f ]] && fail "$(basename "$f" .sigint) got the terminal's SIGINT"
done
expect_no_survivors 4

# Every process ignores SIGTERM: the second SIGINT must not wait out the grace.
clean_pid_dir
start_loom run --servers 1 --workers 1 -- bash "$NODE" stubborn
wait_for_pid_files 3
start=$(now_ms)
kill -INT "$LAUNCHER_PID"
# The second signal only once the launcher has handled the first (and sent
# the SIGTERMs the processes ignore), so the two are not taken for one.
wait_for_line "$WORK/err" "loom run: received SIGINT; stopping the job"
kill -INT "$LAUNCHER_PID"
wait_loom
elapsed_since "$start"
expect_rc 130
expect_line "$WORK/err" "loom run: received SIGINT again; killing the job now"
expect_faster_than 2500
expect_no_survivors 3

# A launcher that is SIGKILLed cannot stop anything: its children must die
# with it all the same (PR_SET_PDEATHSIG). Their helpers do not: cleanup.
clean_pid_dir
start_loom run --servers 1 --workers 2 -- bash "$NODE" hang
wait_for_pid_files 4
kill -KILL "$LAUNCHER_PID"
wait_loom
for f in "$FAKE_DIR"/*.pid; do
    pid=$(<"$f")
    for ((i = 0; i < 40; i++)); do
        alive "$pid" || continue 2
        poll_pause 0.05
    done
    fail "$(basename "$f" .pid) outlived the SIGKILLed launcher"
done
echo PASS
