#!/usr/bin/env bash
# The scheduler dies mid-run (docs/FAULTS.md, docs/CLUSTER.md): an LR job of
# 2 servers and 2 workers, started by `loom run --on-failure wait` (so the
# launcher kills nobody itself: every process must end on its own), writes a
# checkpoint every few clocks. Once one is committed the test SIGKILLs the
# scheduler. Every other process must say that it lost the scheduler and exit
# with status 3 (LOOM_EXIT_PEER_FAILED) within the heartbeat timeout plus
# slack, and no process may survive. Then the same job with `--resume`
# starts from that checkpoint (its scheduler says so) and completes.
# With "restart" as a second argument the job runs with LOOM_REPLICAS=1 and
# `loom run --on-server-failure restart`, which replaces dead servers but
# never the scheduler: its death ends the job all the same.
#
# Usage: test_ft_scheduler_kill.sh LOOM [restart]
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 LOOM}
RESTART=()
[[ ${2:-} == restart ]] && RESTART=(--on-server-failure restart)
work_setup ft-schedkill
cd "$WORK" || exit 1
TIMEOUT_MS=2000 INTERVAL_MS=250 LINGER_MS=1000 SLACK_MS=3000
BOUND_MS=$((TIMEOUT_MS + INTERVAL_MS + LINGER_MS + SLACK_MS))

run gen lr --out data --rows 20000 --features 5000 --nnz 10 --quiet
[[ $RC == 0 ]] || fail "gen lr: exit status $RC"
# Long enough (thousands of clocks) that the kill comes well before the end.
TRAIN=(train lr --train data --updater adagrad --epochs 30 --minibatch 100 --consistency bsp
    --checkpoint-dir ck --checkpoint-every 20)

LOOM_HEARTBEAT_MS=$INTERVAL_MS LOOM_REPLICAS=$((${#RESTART[@]} ? 1 : 0)) "$LOOM" run --servers 2 \
    --workers 2 --on-failure wait "${RESTART[@]}" --heartbeat-timeout $TIMEOUT_MS --timeout 120 \
    -- "$LOOM" "${TRAIN[@]}" >job.out 2>&1 &
launcher=$!
deadline=$(($(now_ms) + 60000))
# Wait for the condition (a committed checkpoint), bounded; the poll interval is not a synchronisation.
until compgen -G "ck/ckpt-*/MANIFEST" >/dev/null; do
    kill -0 "$launcher" 2>/dev/null || { cp job.out err; fail "the job ended before its first checkpoint"; }
    (($(now_ms) < deadline)) || { cp job.out err; fail "no checkpoint within 60 s"; }
    poll_pause 0.01
done
victim='' survivors=()
for pid in $(pgrep -P "$launcher"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "LOOM_ROLE=scheduler"; then
        victim=$pid
    else
        survivors+=("$pid")
    fi
done
[[ -n $victim ]] || { cp job.out err; fail "cannot find the scheduler's process"; }
((${#survivors[@]} == 4)) || { cp job.out err; fail "expected 4 other processes, found ${#survivors[@]}"; }
start=$(now_ms)
kill -KILL "$victim"
wait "$launcher"
status=$?
launcher=
elapsed=$(($(now_ms) - start))
cp job.out err
echo "the job ended with status $status ${elapsed} ms after the scheduler was killed"
((status != 0)) || fail "the job exited 0 although its scheduler was killed"
((elapsed <= BOUND_MS)) || fail "took ${elapsed} ms, the bound is $BOUND_MS ms"
grep -q "scheduler exited with status 0" job.out && fail "the killed scheduler exited 0"
grep -q "scheduler .*starting a replacement" job.out && fail "loom run started a replacement scheduler"
for who in "server 0" "server 1" "worker 0" "worker 1"; do
    grep -q "^\[$who\] .*lost the scheduler" job.out || fail "$who did not say it lost the scheduler"
    grep -q "$who exited with status 3" job.out || fail "$who did not exit with status 3"
done
for pid in "${survivors[@]}"; do
    kill -0 "$pid" 2>/dev/null && fail "process $pid outlived the launcher"
done
[[ -e model ]] && fail "a model was written although the job died"

# Resume: from the newest committed checkpoint, to the end.
newest=$(find ck -path 'ck/ckpt-*/MANIFEST' | sort | tail -1)
clock=${newest#ck/ckpt-}
clock=$((10#${clock%%/*}))
LOOM_VERBOSE=1 run "${TRAIN[@]}" --workers 2 --servers 2 --resume ck --model-out model --quiet \
    --insecure --no-status
[[ $RC == 0 && -s model ]] || fail "the resumed job: exit status $RC"
grep -q "resuming from ck at clock $clock" err ||
    fail "the resumed job did not start from the newest checkpoint (clock $clock)"
echo PASS
