#!/usr/bin/env bash
# h) loom run leaves its standard input alone: run in a `while read` loop it
# does not eat the loop's remaining lines (a job started once per line runs
# once per line), it never echoes them as a child's output ("[(null)] ..."),
# and its processes read /dev/null.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

runs=0
while read -r line; do
    clean_pid_dir
    run_loom run --workers 1 -- bash "$NODE" env "$line"
    expect_rc 0
    expect_line "$WORK/out" "[worker 0] address_fd=unset args=env $line"
    grep -F "(null)" "$WORK/out" "$WORK/err" && fail "input echoed as a child's output"
    [[ $(grep -c '^\[.*\] stdin=/dev/null$' "$WORK/out") == 3 ]] || fail "a process's stdin is not /dev/null"
    expect_no_survivors 3
    runs=$((runs + 1))
done < <(printf '%s\n' one two three)
[[ $runs == 3 ]] || fail "the loop ran $runs times instead of 3: loom run read its standard input"
echo PASS
