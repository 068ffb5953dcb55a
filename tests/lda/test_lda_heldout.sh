#!/usr/bin/env bash
# loom train lda --test: held-out perplexity by document completion on a
# planted corpus (no shared data). The perplexity falls over the iterations,
# ends far below a uniform model's (the vocabulary size) and within 5% of an
# oracle that knows the planted topics, computed here; the same --seed gives
# the same numbers; words outside the vocabulary are skipped and counted; a
# test file with nothing to score is refused; one worker under BSP equals the
# sequential reference (lda_check) bit for bit.
# Usage: test_lda_heldout.sh LOOM LDA_CHECK
set -u
LOOM=$1 LDA_CHECK=$2
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
work_dir lda-heldout
trap remove_work EXIT
clear_env
fail_show() { cat "$WORK/out" 2>/dev/null; }

# 1200 documents from one planted model: 1000 to train on, 200 held out.
K=10 V=1000 GEN_ALPHA=0.1 GEN_BETA=0.1
"$LOOM" gen lda --out "$WORK/all.dat" --vocab-out "$WORK/vocab" --docs 1200 --vocab-size $V --topics $K --doc-length 80 \
    --alpha $GEN_ALPHA --beta $GEN_BETA --seed 7 || fail "gen lda failed"
head -n 1000 "$WORK/all.dat" >"$WORK/train.dat"
tail -n 200 "$WORK/all.dat" >"$WORK/test.dat"

# --vocab makes the vocabulary all V words (without it, 1 + the largest id in
# the training file).
# perplexities FILE: the test_perplexity of each metrics line, one a line.
perplexities() { sed -n 's/.*"test_perplexity": \([^,]*\),.*/\1/p' "$1"; }

args=(--train "$WORK/train.dat" --test "$WORK/test.dat" --vocab "$WORK/vocab" --topics "$K" --iterations 30 --eval-every 5
    --workers 2 --servers 1 --consistency bsp --top-words 0 --seed 3)
for run in 1 2; do
    "$LOOM" train lda "${args[@]}" --metrics "$WORK/m$run.json" >"$WORK/out" 2>&1 ||
        fail "training with --test failed (run $run)"
    perplexities "$WORK/m$run.json" >"$WORK/p$run"
done
[[ $(wc -l <"$WORK/p1") -eq 6 ]] || fail "expected 6 test_perplexity values: $(cat "$WORK/m1.json")"
grep -q "test perplexity" "$WORK/out" || fail "no test perplexity in the progress lines"
cmp -s "$WORK/p1" "$WORK/p2" || fail "the same --seed gave different perplexities: $(paste "$WORK/p1" "$WORK/p2")"

# One worker under BSP scores exactly what the sequential reference's final
# counts score.
one=(--train "$WORK/train.dat" --test "$WORK/test.dat" --vocab "$WORK/vocab" --topics "$K"
    --iterations 7 --eval-every 0 --consistency bsp --top-words 0 --seed 3)
"$LOOM" train lda "${one[@]}" --workers 1 --servers 1 --metrics "$WORK/one.json" >"$WORK/out" 2>&1 ||
    fail "one-worker training with --test failed"
"$LDA_CHECK" -- "${one[@]}" >"$WORK/ref" || fail "lda_check failed"
want=$(sed -n 's/^lda_check: test perplexity //p' "$WORK/ref")
got=$(perplexities "$WORK/one.json")
[[ -n $want && $got == "$want" ]] || fail "one worker: test perplexity $got, reference $want"

# The oracle: the planted topics' blocks of words (apps/lda/gen.c), each
# word's probability in its block from the training counts (+ beta), and a
# test document's mix of blocks from the same estimation half as the trainer
# (even token positions, + alpha), scoring the odd positions.
oracle=$(awk -v K=$K -v V=$V -v A=$GEN_ALPHA -v B=$GEN_BETA '
    function blk(w,   t) {
        t = int(w * K / V)
        while (t > 0 && int(V * t / K) > w) t--
        while (t + 1 < K && int(V * (t + 1) / K) <= w) t++
        return t
    }
    FNR == NR { for (i = 2; i <= NF; i++) { split($i, a, ":"); c[a[1]] += a[2]; C[blk(a[1])] += a[2] }
                next }
    {   n = 0; delete tok; delete nt; nobs = 0
        for (i = 2; i <= NF; i++) { split($i, a, ":"); for (r = 0; r < a[2]; r++) tok[n++] = a[1] }
        for (j = 0; j < n; j += 2) { nt[blk(tok[j])]++; nobs++ }
        for (j = 1; j < n; j += 2) {
            w = tok[j]; t = blk(w); size = int(V * (t + 1) / K) - int(V * t / K)
            ll += log((nt[t] + A) / (nobs + K * A) * (c[w] + B) / (C[t] + size * B)); m++
        } }
    END { printf "%.6f\n", exp(-ll / m) }' "$WORK/train.dat" "$WORK/test.dat")
awk -v V=$V -v oracle="$oracle" '
    { p[NR] = $1 }
    END { printf "held-out perplexity %s ... %s, oracle %s, uniform %d\n", p[1], p[NR], oracle, V
          ok = p[NR] < p[1] && p[NR] <= 1.05 * oracle && p[NR] < V / 10
          for (i = 2; i <= NR; i++) if (p[i] > p[i - 1] * 1.01) ok = 0
          exit !(NR == 6 && ok) }' "$WORK/p1" ||
    fail "held-out perplexity did not fall to the oracle's: $(tr '\n' ' ' <"$WORK/p1")"

# Words outside the training vocabulary are skipped and counted: two test
# documents gain 3 and 2 tokens of unknown ids, and nothing else changes.
awk 'NR == 1 { $1 += 1; $0 = $0 " 5000:3" } NR == 2 { $1 += 1; $0 = $0 " 1000:2" } { print }' \
    "$WORK/test.dat" >"$WORK/oov.dat"
"$LOOM" train lda "${args[@]/$WORK\/test.dat/$WORK/oov.dat}" --metrics "$WORK/oov.json" \
    >"$WORK/out" 2>&1 || fail "training with unknown test words failed"
grep -qF "oov.dat: skipped 5 token(s) of words outside the vocabulary of $V words" "$WORK/out" ||
    fail "the skipped test words were not reported"
grep -c '"test_skipped_tokens": 5,' "$WORK/oov.json" | grep -qx 6 || fail "test_skipped_tokens is not 5"
perplexities "$WORK/oov.json" | cmp -s - "$WORK/p1" ||
    fail "unknown test words changed the perplexity"

# Nothing to score (every document has fewer than 2 known tokens): refused.
printf '1 3:1\n2 4000:1 5:1\n' >"$WORK/none.dat"
"$LOOM" train lda "${args[@]/$WORK\/test.dat/$WORK/none.dat}" >"$WORK/out" 2>&1
rc=$?
((rc == 1)) || fail "a test file with nothing to score exited $rc, expected 1"
grep -qF "none.dat has no words to score" "$WORK/out" || fail "no message for nothing to score"
echo PASS
