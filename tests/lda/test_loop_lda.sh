#!/usr/bin/env bash
# bench/loop_lda (LDA written as a loop over tokens with its accesses
# declared, loom/loop.h) on a generated corpus, 2 workers, 1 server, 8
# topics, 30 passes:
#   - the plan is 2D with the documents as the space index (doc-topic rows
#     local, word-topic rows rotating);
#   - at the end the doc-topic, word-topic and topic-total counts equal the
#     counts recomputed from the tokens' topics, exactly (loop_lda --check);
#   - the log-likelihood after 30 passes is within 5% of the worst of three
#     sequential chains of lda_check (seeds 1-3, the same 30 iterations), as
#     lda.rotation checks the app's rotation: a loop that does not sample
#     stays near its start, about 90% below.
# Usage: test_loop_lda.sh LOOM LOOP_LDA LDA_CHECK
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/lda.sh
source "$(dirname "$0")/../lib/lda.sh"
LOOM=$1 LOOP_LDA=$2 LDA_CHECK=$3
work_dir loop-lda
trap remove_work EXIT
clear_env
fail_show() { tail -n 30 "$WORK/out" 2>/dev/null; }

"$LOOM" gen lda --out "$WORK/g.ldac" --docs 300 --vocab-size 500 --topics 8 --doc-length 60 \
    --seed 4 || fail "gen lda failed"
"$LOOM" run --servers 1 --workers 2 -- "$LOOP_LDA" --train "$WORK/g.ldac" --topics 8 \
    --passes 30 --seed 1 --delay 100 --eval-every 10 --check >"$WORK/out" 2>&1 || fail "loop_lda failed"
grep -q "2D: space index 0 (as asked), time index 1" "$WORK/out" ||
    fail "the loop was not planned 2D over documents and words"
grep -q "counts consistent: doc-topic, word-topic and totals equal the tokens' topics" \
    "$WORK/out" || fail "the counts differ from the tokens' topics"
got=$(sed -n 's/.*pass  30  log-likelihood \([^ ]*\) .*/\1/p' "$WORK/out")
[[ -n $got ]] || fail "no log-likelihood after pass 30"
worst=$(worst_sequential_ll "$LDA_CHECK" "$WORK/g.ldac" 8 30)
echo "log-likelihood after 30 passes: loop $got, worst of 3 sequential chains $worst"
numeric_check 'g >= w * 1.05' g="$got" w="$worst" ||
    fail "the loop's log-likelihood $got is more than 5% below the sequential chains' $worst"
echo PASS
