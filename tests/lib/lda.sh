# shellcheck shell=bash
# lda.sh: what the LDA job tests share (source after common.sh).

# worst_sequential_ll LDA_CHECK CORPUS TOPICS ITERATIONS: the lowest
# log-likelihood after ITERATIONS of three sequential chains (seeds 1-3) on
# CORPUS, printed. Chains on a small corpus land several percent apart, so a
# distributed run is compared with the worst of them (the tests' margin).
worst_sequential_ll() {
    local check=$1 corpus=$2 topics=$3 iters=$4 seed ll worst=0 ref
    ref=$(mktemp "${TMPDIR:-/tmp}/loom-ll.XXXXXX")
    for seed in 1 2 3; do
        "$check" --ll-out "$ref" -- --train "$corpus" --topics "$topics" --iterations "$iters" \
            --eval-every 10 --seed "$seed" >/dev/null || { rm -f "$ref"; fail "lda_check failed"; }
        ll=$(awk -v it="$iters" '$1 == it { print $2 }' "$ref")
        worst=$(awk -v a="$ll" -v b="$worst" 'BEGIN { print (b == 0 || a < b) ? a : b }')
    done
    rm -f "$ref"
    echo "$worst"
}
