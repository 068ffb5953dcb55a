#!/usr/bin/env bash
# `loom train lasso` with its defaults on the project's own data (../shared/data/abalone,
# 8 features): 2 workers' shards hold 4 features each, fewer than the default --parallel 8,
# so the default shrinks to 4 with one info line, the job exits 0 and its objective is the
# sequential reference's within 1e-3 relative (and the reference is scikit-learn's Lasso
# within 1e-6, by lasso_sklearn.py, where python3-sklearn is installed). A --parallel the
# user gives that exceeds a shard is still refused with the engine's sentence. Exit 77
# (skipped) without the data, or, after every other check passed, without scikit-learn.
# Usage: test_lasso_abalone.sh LOOM lasso_sklearn.py SHARED_DATA_DIR
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
LOOM=${1:?usage: $0 LOOM lasso_sklearn.py SHARED_DATA_DIR}
SCRIPT=${2:?usage: $0 LOOM lasso_sklearn.py SHARED_DATA_DIR}
DATA=${3:?usage: $0 LOOM lasso_sklearn.py SHARED_DATA_DIR}/abalone
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
work_setup lasso-abalone
cd "$WORK" || exit 1

# The file, or its .bz2 decompressed here (SOURCES.md); never written next to the data.
if [[ -f $DATA/abalone_scale ]]; then
    train=$DATA/abalone_scale
elif [[ -f $DATA/abalone_scale.bz2 ]]; then
    bzip2 -dc "$DATA/abalone_scale.bz2" >abalone_scale || fail "cannot decompress abalone_scale.bz2"
    train=$WORK/abalone_scale
else
    echo "SKIPPED: no $DATA/abalone_scale (../shared/data, docs/TESTING.md)"
    exit 77
fi

objective() { tail -n 1 "$1" | sed -n 's/.*"objective": \([^,}]*\).*/\1/p'; }

run train lasso --train "$train" --model-out dist.model --metrics dist.jsonl
[[ $RC == 0 ]] || fail "loom train lasso with the defaults: exit status $RC"
grep -qF -- "--parallel 4: the default 8 exceeds the 4 features a shard has" err ||
    fail "no line saying the default --parallel became 4"
grep -qF "2 workers, 4 parallel updates" err || fail "the job did not run 4 parallel updates"

run train lasso --train "$train" --sequential --tol 1e-12 --iterations 100000 \
    --model-out seq.model --metrics seq.jsonl --quiet
[[ $RC == 0 ]] || fail "loom train lasso --sequential: exit status $RC"
dist=$(objective dist.jsonl) seq=$(objective seq.jsonl)
numeric_check 'd <= s * (1 + 1e-3)' d="$dist" s="$seq" ||
    fail "the job's objective $dist is not the sequential $seq within 1e-3 relative"
echo "abalone: job objective $dist, sequential $seq"

# Given, an impossible --parallel is the user's choice: refused, not shrunk.
expect 1 "8 parallel updates exceed the 4 parameters of the smallest of 2 shards" \
    train lasso --train "$train" --parallel 8 --quiet

PY=
for candidate in ${LOOM_PYTHON:-} python3 /usr/bin/python3; do
    if "$candidate" -c 'import sklearn, numpy' 2>/dev/null; then
        PY=$candidate
        break
    fi
done
if [[ -z $PY ]]; then
    echo "SKIPPED (after every other check passed): no python3 with scikit-learn and numpy" \
        "for the comparison with sklearn's Lasso (install python3-sklearn, scripts/install-deps.sh)"
    exit 77
fi
"$PY" "$SCRIPT" "$train" seq.model seq.jsonl || fail "the sequential model is not sklearn's"
echo "lasso abalone: all checks passed"
