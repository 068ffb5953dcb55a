#!/usr/bin/env bash
# b) Output: every line on the right stream with the right prefix, none mixed
# with another, none lost; a long line split into pieces; a last line
# without newline kept.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

run_loom run --servers 2 --workers 2 -- bash "$NODE" output
expect_rc 0

# check_stream FILE KIND: every line is "[label] KIND i from role-rank" with
# i = 0..199 in order per process, or that process's last words, or (stdout
# only) a piece of worker 0's 10000-character line of x.
check_stream() {
    awk -v kind="$2" '
    function fail(msg) { print "bad line " NR " (" msg "): " $0; bad = 1; exit 1 }
    {
        if (!match($0, /^\[(scheduler|server [0-9]+|worker [0-9]+)\] /)) fail("no prefix")
        label = substr($0, 2, RLENGTH - 3)
        body = substr($0, RLENGTH + 1)
        me = label; sub(/ /, "-", me); if (me == "scheduler") me = "scheduler-0"
        if (body == kind " " (n[me] + 0) " from " me) { n[me]++; next }
        if (kind == "out" && body == "last words of " me) { last[me]++; next }
        if (kind == "out" && me == "worker-0" && body ~ /^x+$/) { xs += length(body); pieces++; next }
        fail("unexpected")
    }
    END {
        if (bad) exit 1
        split("scheduler-0 server-0 server-1 worker-0 worker-1", all, " ")
        for (i = 1; i <= 5; i++) {
            if (n[all[i]] != 200) { print all[i] ": " n[all[i]] + 0 " " kind " lines, expected 200"; exit 1 }
            if (kind == "out" && last[all[i]] != 1) { print all[i] ": last line without newline lost"; exit 1 }
        }
        if (kind == "out" && (xs != 10000 || pieces < 3)) {
            print "long line: " xs " characters in " pieces " pieces, expected 10000 in 3 or more"; exit 1
        }
    }' "$1" || fail "$(basename "$1") is wrong"
}
check_stream "$WORK/out" out
check_stream "$WORK/err" err
expect_no_survivors 5
echo PASS
