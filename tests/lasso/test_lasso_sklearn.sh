#!/usr/bin/env bash
# The objective `loom train lasso --sequential` reaches against scikit-learn's
# Lasso (alpha = lambda: the same 1/(2n) ||y - b - X beta||^2 + lambda ||beta||_1,
# with an intercept by default, fit_intercept=False against --no-intercept) on the
# same generated data with correlated groups: both objectives, evaluated by
# lasso_sklearn.py on the same X and y, agree within 1e-6 relative. The "wide100k"
# case is the scale of a text model: 100,000 features. Exit 77 (skipped) when no
# python3 with sklearn is found.
set -u
LOOM=${1:?usage: $0 PATH_TO_LOOM_BINARY PATH_TO_lasso_sklearn.py}
SCRIPT=${2:?usage: $0 PATH_TO_LOOM_BINARY PATH_TO_lasso_sklearn.py}

# Debian's python3-sklearn lives in /usr/bin/python3, which a python3 earlier
# on PATH (pyenv, a venv) may not see: try that one too. LOOM_PYTHON overrides.
PY=
for candidate in ${LOOM_PYTHON:-} python3 /usr/bin/python3; do
    if "$candidate" -c 'import sklearn, numpy' 2>/dev/null; then
        PY=$candidate
        break
    fi
done
if [[ -z $PY ]]; then
    echo "SKIPPED: no python3 with scikit-learn and numpy (install python3-sklearn, scripts/install-deps.sh)"
    exit 77
fi

# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
work_dir lasso-sklearn
trap remove_work EXIT
cd "$WORK" || exit 1

# check NAME LAMBDA_RATIO TRAIN_FLAG GEN_FLAGS...: generate, train to --tol 1e-12 (with
# TRAIN_FLAG unless it is "-"), compare with scikit-learn.
check() {
    local name=$1 ratio=$2 flag=$3
    shift 3
    local train_flags=() check_flags=()
    [[ $flag == - ]] || { train_flags=("$flag"); check_flags=("$flag"); }
    "$LOOM" gen lasso --out "$name.svm" "$@" || { echo "FAIL: gen $name"; exit 1; }
    "$LOOM" train lasso --train "$name.svm" --sequential --lambda-ratio "$ratio" --tol 1e-12 \
        --iterations 100000 --model-out "$name.model" --metrics "$name.jsonl" --quiet \
        "${train_flags[@]}" || { echo "FAIL: train $name"; exit 1; }
    "$PY" "$SCRIPT" "$name.svm" "$name.model" "$name.jsonl" "${check_flags[@]}" ||
        { echo "FAIL: $name"; exit 1; }
}

check correlated 0.05 - --rows 500 --features 400 --group 20 --corr 0.9 --nonzeros 25 --noise 0.5 --seed 5 --intercept 3
check sparse 0.01 - --rows 800 --features 1000 --group 10 --corr 0.7 --density 0.1 --nonzeros 40 --seed 6 --intercept -1
check wide 0.1 - --rows 100 --features 2000 --group 50 --corr 0.95 --nonzeros 10 --noise 1 --seed 7
check correlated-origin 0.05 --no-intercept --rows 500 --features 400 --group 20 --corr 0.9 --nonzeros 25 --noise 0.5 --seed 5
check sparse-origin 0.01 --no-intercept --rows 800 --features 1000 --group 10 --corr 0.7 --density 0.1 --nonzeros 40 --seed 6
check wide100k 0.2 - --rows 400 --features 100000 --group 10 --corr 0.8 --density 0.001 --nonzeros 20 --noise 0.5 --seed 8 --intercept 2
echo "lasso sklearn: all checks passed"
