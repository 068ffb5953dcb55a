#!/usr/bin/env bash
# LR, MF and LDA survive a server's death with --replicas 1 (docs/FAULTS.md):
# the same `loom train MODEL` (3 servers, 2 workers, SSP(1)) runs once
# undisturbed and once with server 1 killed (SIGKILL) once its worker 0 has
# reported the first epochs; the second run must finish with exit status 0
# and end at the undisturbed run's quality, within a tolerance:
#   lr: the final training objective within 1%;
#   mf: the final training rmse within 1%;
#   lda: the count tables exactly consistent (every topic total equal to its
#        word-topic column, all of them summing to the corpus's tokens: no
#        count lost or applied twice), and the final log-likelihood within 10%.
# Why 1% (lr, mf): SSP runs differ a little from run to run anyway (which
# worker's update a read sees first; two undisturbed runs differed by less
# than 0.1%), and the failover costs only a stall; a range that lost, or
# applied twice, a clock's updates would leave its rows off by a clock's
# gradient and the quality measurably off. Why 10% (lda): Gibbs sampling under
# SSP is not reproducible, and undisturbed runs of this corpus end in one of
# a few local optima up to 4% apart (-943k and -911k over four runs); a run
# under ASan in CI that lost server 1 ended 6.9% below its undisturbed run
# (-973.6k against -910.8k), so the log-likelihood only shows that the run
# kept learning after the failover (it is 10% lower at iteration 10 than at
# 30, and 80% lower at iteration 3, when the kill comes); the counts are the
# exact check.
# Without the failover the job ends with a failure, which the test also checks
# (no replicas: status != 0).
# Heartbeats every 250 ms, dead after 2 s of silence.
# Usage: test_failover_app.sh LOOM MODEL
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
LOOM=${1:?usage: $0 LOOM MODEL}
MODEL=${2:?usage: $0 LOOM MODEL}
work_setup "ft-failover-$MODEL"
cd "$WORK" || exit 1
export LOOM_HEARTBEAT_MS=250 LOOM_HEARTBEAT_TIMEOUT_MS=2000

case $MODEL in
lr)
    run gen lr --out data --rows 20000 --features 5000 --nnz 10 --quiet
    ARGS=(train lr --train data --epochs 8 --minibatch 100)
    READY="epoch   1 " QUALITY=objective TOLERANCE=0.01
    ;;
mf)
    run gen mf --out data --users 1000 --items 2000 --ratings 100000 --quiet
    ARGS=(train mf --train data --epochs 40 --syncs 10)
    READY="epoch   3 " QUALITY=train_rmse TOLERANCE=0.01
    ;;
lda)
    run gen lda --out data --docs 3000 --vocab-size 1000 --topics 10 --doc-length 80 --quiet
    ARGS=(train lda --train data --topics 10 --iterations 30 --syncs 10 --eval-every 1)
    READY="iteration    3 " QUALITY=log_likelihood TOLERANCE=0.10
    ;;
*) fail "unknown model $MODEL" ;;
esac
[[ $RC == 0 ]] || fail "gen $MODEL: exit status $RC"
ARGS+=(--servers 3 --workers 2 --consistency ssp:1 --insecure --no-status)

# check_counts METRICS: lda's count tables are consistent at the end.
check_counts() {
    [[ $MODEL != lda || $(last_value "$1" counts_consistent) == true ]] ||
        fail "$1: lda's counts are not consistent"
}

run "${ARGS[@]}" --replicas 1 --metrics m.ref
[[ $RC == 0 ]] || fail "undisturbed run: exit status $RC"
ref=$(last_value m.ref "$QUALITY")
[[ -n $ref ]] || fail "undisturbed run: no $QUALITY in its metrics"
check_counts m.ref

# kill_server_1 LOG: once LOG (the job's stderr) shows READY, SIGKILL the job's server 1.
kill_server_1() {
    local deadline=$((SECONDS + 60))
    until grep -qs "$READY" "$1"; do
        ((SECONDS < deadline)) || fail "no '$READY' within 60 s"
        kill -0 "$launcher" 2>/dev/null || fail "the job ended before '$READY'"
        poll_pause 0.05
    done
    kill_server 1
}

"$LOOM" "${ARGS[@]}" --replicas 1 --metrics m.killed >killed.out 2>killed.err &
launcher=$!
kill_server_1 killed.err
wait "$launcher"
status=$?
launcher=
[[ $status == 0 ]] || fail "the run that lost server 1 exited with status $status: $(tail -5 killed.err)"
grep -q "the job goes on without it" killed.err || fail "nobody said the job went on without server 1"
grep -q "^loom run: lost: server 1 was killed by signal 9" killed.err ||
    fail "loom run did not name server 1 as lost"
grep -q "^loom run: \(also \)\?failed:" killed.err && fail "loom run said 'failed:' of a job that succeeded"
got=$(last_value m.killed "$QUALITY")
[[ -n $got ]] || fail "the run that lost server 1: no $QUALITY in its metrics"
check_counts m.killed
echo "final $QUALITY: undisturbed $ref, server 1 killed $got"
awk -v a="$ref" -v b="$got" -v t="$TOLERANCE" \
    'BEGIN { d = a - b; if (d < 0) d = -d; if (a < 0) a = -a; exit !(d <= t * a) }' ||
    fail "$QUALITY $got is not within $TOLERANCE (relative) of $ref"

# Without replicas the same kill ends the job (status 3), as before.
"$LOOM" "${ARGS[@]}" >plain.out 2>plain.err &
launcher=$!
kill_server_1 plain.err
wait "$launcher"
status=$?
launcher=
[[ $status != 0 ]] || fail "without replicas the job survived a dead server"
echo "without replicas: exit status $status"
echo "PASS"
