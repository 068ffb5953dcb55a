#!/usr/bin/env bash
# loom train lda on the AP corpus (../shared/data/ap, never committed), 50 topics:
#   exact   one worker under BSP gives the sequential reference's model and
#           log-likelihoods bit for bit (lda_check computes them in-process),
#           with one and with several clocks per iteration;
#   ssp     2 workers under SSP(1), 8 clocks per iteration: the log-likelihood rises, the counts are
#           consistent after every iteration, and the end is within 1% of the
#           sequential reference after the same number of iterations.
# Usage: test_train_ap.sh LOOM LDA_CHECK DATA_DIR CASE. Exits 77 (skipped) with
# a message when the data is absent.
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
LOOM=$1 LDA_CHECK=$2 DATA=$3 CASE=$4
TRAIN=$DATA/ap/ap.dat VOCAB=$DATA/ap/vocab.txt
if [[ ! -r $TRAIN || ! -r $VOCAB ]]; then
    echo "skipped: $DATA/ap not found (the shared datasets are not part of a clone)"
    exit 77
fi
work_dir lda
trap remove_work EXIT
clear_env
fail_show() { tail -n 30 "$WORK/job.out" 2>/dev/null; }

# lls METRICS: "ITERATION LL" per line, LL as printed (%.17g).
lls() { sed -n 's/.*"iteration": \([0-9]*\),.*"log_likelihood": \([^,]*\),.*/\1 \2/p' "$1"; }

case $CASE in
exact)
    for flags in "--iterations 4 --seed 3" \
                 "--iterations 4 --syncs 3 --eval-every 2 --seed 5 --alpha 0.5 --vocab $VOCAB"; do
        # shellcheck disable=SC2206
        args=(--train "$TRAIN" --topics 50 --consistency bsp $flags)
        "$LOOM" train lda "${args[@]}" --workers 1 --servers 1 --quiet --top-words 0 \
            --metrics "$WORK/job.json" --model-out "$WORK/job.model" >"$WORK/job.out" 2>&1 ||
            fail "training with $flags failed"
        "$LDA_CHECK" --ll-out "$WORK/ref.ll" --model-out "$WORK/ref.model" -- "${args[@]}" \
            >/dev/null || fail "the reference failed ($flags)"
        cmp -s "$WORK/job.model" "$WORK/ref.model" || fail "topic counts differ from the reference ($flags)"
        lls "$WORK/job.json" >"$WORK/job.ll"
        [[ -s $WORK/job.ll ]] || fail "no log-likelihoods in the metrics"
        diff "$WORK/job.ll" "$WORK/ref.ll" >&2 || fail "log-likelihoods differ from the reference ($flags)"
        echo "exact ($flags): $(wc -l <"$WORK/job.ll") log-likelihoods and the model equal the reference"
    done
    ;;
ssp)
    args=(--train "$TRAIN" --topics 50 --iterations 40 --syncs 8 --seed 11)
    "$LOOM" train lda "${args[@]}" --workers 2 --servers 1 --consistency ssp:1 --top-words 5 \
        --vocab "$VOCAB" --metrics "$WORK/job.json" >"$WORK/job.out" 2>&1 || fail "training failed"
    "$LDA_CHECK" --ll-out "$WORK/ref.ll" -- "${args[@]}" --eval-every 0 >/dev/null ||
        fail "the reference failed"
    [[ $(grep -c '"counts_consistent": true' "$WORK/job.json") -eq 40 ]] ||
        fail "expected 40 evaluations with consistent counts"
    for key in iteration time_s log_likelihood tokens_per_s bytes_sent bytes_received; do
        grep -q "\"$key\": " "$WORK/job.json" || fail "metrics lack $key"
    done
    [[ $(grep -c '^\[worker 0\] topic ' "$WORK/job.out") -eq 50 ]] || fail "expected 50 topics' top words"
    lls "$WORK/job.json" >"$WORK/job.ll"
    # Rising: every 5th iteration above the one before.
    awk 'NR % 5 == 0 { if (seen && $2 <= prev) bad = 1; prev = $2; seen = 1 } END { exit bad }' \
        "$WORK/job.ll" || fail "the log-likelihood does not rise: $(tr '\n' ' ' <"$WORK/job.ll")"
    job=$(tail -1 "$WORK/job.ll" | cut -d' ' -f2) ref=$(tail -1 "$WORK/ref.ll" | cut -d' ' -f2)
    echo "2 workers SSP(1): log-likelihood $job after 40 iterations, sequential $ref"
    numeric_check '(r - j) / -r * 100 < 1' j="$job" r="$ref" ||
        fail "log-likelihood $job is not within 1% of the sequential reference's $ref"
    ;;
*) echo "unknown case $CASE" >&2; exit 2 ;;
esac
echo PASS
