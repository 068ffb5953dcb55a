#!/usr/bin/env bash
# j) The command line of every `loom` command, as one table: each command ×
# {an unknown flag as the last argument, a stray argument, a flag missing its
# value, --name=value, a bad number} gives the expected message and exit
# status (2 for a usage error, before anything starts), and the checks that
# cross flags: --one-based with --zero-based, a --heartbeat-timeout shorter
# than 4 heartbeats. The help of `loom train MODEL` (= `loom help train
# MODEL`, and all of them in `loom help train`) lists every flag with its
# default, and every flag it lists is one the parser knows; every flag the
# docs of the apps mention is in a help.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
DOCS="$HERE/../../docs"

cd "$WORK" || exit 1
printf '+1 1:1\n-1 2:1\n' >ok.svm
printf '1\t1\t4\n2\t1\t3\n' >ok.tsv
printf '1 0:1\n1 1:2\n' >ok.ldac

# loom_cmd ARGS...: as run_loom, but without its guards for commands that
# start no process (all but loom run): most of this test's hundreds of calls.
loom_cmd() {
    if [[ $1 == run ]]; then
        run_loom "$@"
    else
        "$LOOM" "$@" >"$WORK/out" 2>"$WORK/err" </dev/null
        RC=$?
    fi
}

# check RC PATTERN ARGS...: `loom ARGS...` exits RC with PATTERN on stderr;
# exit 0 writes nothing to stderr.
check() {
    local want_rc=$1 pattern=$2
    shift 2
    loom_cmd "$@"
    [[ $RC == "$want_rc" ]] || fail "loom $*: exit status $RC, expected $want_rc"
    if [[ -n $pattern ]]; then
        grep -qF -- "$pattern" "$WORK/err" || fail "loom $*: stderr does not say '$pattern'"
    fi
    [[ $want_rc != 0 || ! -s $WORK/err ]] || fail "loom $*: succeeded but wrote to stderr"
    return 0
}

# usage PATTERN ARGS...: a usage error (exit 2) saying PATTERN and where the help is.
usage() {
    check 2 "$@"
    grep -qE -- "^Try 'loom [^']*help[^']*'\.$" "$WORK/err" || fail "loom ${*:2}: no pointer to the help"
}

# The leading arguments that make each command complete but for the case.
declare -A BASE=(
    [run]="run --servers 1"
    [train lr]="train lr --train ok.svm"
    [train mf]="train mf --train ok.tsv"
    [train lda]="train lda --train ok.ldac"
    [train lasso]="train lasso --sequential --train ok.svm"
    [gen lr]="gen lr --out g.svm"
    [gen mf]="gen mf --out g.tsv"
    [gen lda]="gen lda --out g.ldac"
    [gen lasso]="gen lasso --out g.svm"
    [predict lr]="predict lr --model m --data ok.svm"
    [predict mf]="predict mf --model m --data ok.tsv"
    [predict lasso]="predict lasso --model m --data ok.svm"
    [keygen]="keygen k.key"
)
# A flag that takes a number, for "missing value" and "bad number".
declare -A NUMBER=(
    [run]=--workers [train lr]=--epochs [train mf]=--rank [train lda]=--topics
    [gen lr]=--rows [gen mf]=--users [gen lda]=--docs [train lasso]=--iterations [gen lasso]=--rows
)
# A flag that takes a file name, for the commands without a number.
declare -A TEXT=([predict lr]=--out [predict mf]=--out [predict lasso]=--out)

for cmd in "${!BASE[@]}"; do
    read -r -a base <<<"${BASE[$cmd]}"
    # What completes loom run's command line (PROGRAM); nothing for the others.
    tail=()
    [[ $cmd == run ]] && tail=(-- bash "$NODE" env)
    # An unknown flag is unknown, even as the last argument (no value to take).
    usage "unknown flag '--bogus'" "${base[@]}" --bogus
    usage "unknown flag '--bogus'" "${base[@]}" --bogus=1 "${tail[@]}"
    # A stray argument (for loom run, the first is PROGRAM: there, none at all).
    if [[ $cmd == run ]]; then
        usage "missing PROGRAM to run" "${base[@]}"
    else
        usage "unexpected argument 'stray'" "${base[@]}" stray
    fi
    # A flag with a value (loom keygen has none: a switch takes no value).
    flag=${NUMBER[$cmd]:-${TEXT[$cmd]:-}}
    if [[ -z $flag ]]; then
        usage "--force takes no value" "${base[@]}" --force=1
        continue
    fi
    usage "$flag needs a value" "${base[@]}" "$flag"
    usage "$flag given twice" "${base[@]}" "$flag=1" "$flag" 1 "${tail[@]}"
    if [[ -n ${NUMBER[$cmd]:-} ]]; then
        # A bad number, in both spellings: the = form is read as flag and value.
        usage "$flag takes a whole number from 1 to" "${base[@]}" "$flag" 1x "${tail[@]}"
        usage "$flag takes a whole number from 1 to" "${base[@]}" "$flag=" "${tail[@]}"
        usage "$flag takes a whole number from 1 to" "${base[@]}" "$flag=0x10" "${tail[@]}"
    fi
done

# --name=value reaches every command's parser: each of these is complete and
# gets past it (a job, a file written, or the file named by = is opened).
check 0 "" run --workers=1 --servers=1 --on-failure=wait --timeout=30 -- bash "$NODE" env
expect_line "$WORK/out" "[worker 0] address_fd=unset args=env"
for model in lr mf lda; do
    check 2 "cannot read missing: No such file or directory" train "$model" --train=missing --workers=1
done
check 0 "" gen lr --out=g.svm --rows=5 --features=10 --nnz=2 --quiet
check 0 "" gen mf --out=g.tsv --users=5 --items=6 --ratings=10 --quiet
check 0 "" gen lda --out=g.ldac --docs=5 --vocab-size=20 --topics=2 --format=uci
check 1 "m" predict lr --model=m --data=ok.svm
check 1 "m" predict mf --model=m --data=ok.tsv
# A switch takes no value.
usage "--quiet takes no value" train lr --train ok.svm --quiet=1

# Flags that exclude each other.
usage "--zero-based and --one-based exclude each other" train lr --train ok.svm --one-based --zero-based
usage "--test and --test-fraction exclude each other" train mf --train ok.tsv --test ok.tsv --test-fraction 0.1
usage "--bind and --interface exclude each other" run --bind 127.0.0.1 --interface lo -- bash "$NODE" env

# A heartbeat timeout shorter than 4 heartbeats would kill healthy nodes.
usage "the minimum is 2000 ms with heartbeats every 500 ms" run --heartbeat-timeout 2 -- bash "$NODE" env
usage "the minimum is 2000 ms" run --heartbeat-timeout=1999 -- bash "$NODE" env
check 0 "" run --workers 1 --heartbeat-timeout 2000 -- bash "$NODE" env
export LOOM_HEARTBEAT_MS=100
usage "the minimum is 400 ms with heartbeats every 100 ms" run --heartbeat-timeout 399 -- bash "$NODE" env
check 0 "" run --workers 1 --heartbeat-timeout 400 -- bash "$NODE" env
unset LOOM_HEARTBEAT_MS

# The help of each model: every flag with its default, generated from the
# parser's table, so every flag it lists is one the parser knows.
# MODEL;FLAG VALUE;DEFAULT: lines the help must have.
DEFAULTS=(
    "lr;--epochs N;(default 10)" "lr;--minibatch N;(default 100)" "lr;--workers W;(default 2)"
    "lr;--updater sgd|adagrad|ftrl;(default adagrad)" "lr;--lr X;(default sgd 0.1, dbpg 1)"
    "mf;--rank K;(default 16)" "mf;--epochs N;(default 40)" "mf;--lr X;(default 0.03)"
    "mf;--servers S;(default 1)" "lda;--topics K;(default 50)" "lda;--iterations N;(default 100)"
    "lda;--alpha A;(default 0.1)" "lda;--consistency bsp|ssp:S|asp;(default ssp:1)"
)
check 0 "" help train
cp "$WORK/out" all_help
for model in lr mf lda; do
    check 0 "" train "$model" --help
    cp "$WORK/out" "help_$model"
    check 0 "" help train "$model"
    cmp -s "$WORK/out" "help_$model" || fail "'loom help train $model' differs from 'loom train $model --help'"
    for entry in "${DEFAULTS[@]}"; do
        IFS=';' read -r m head default <<<"$entry"
        [[ $m == "$model" ]] || continue
        line=$(grep -F -- "  $head " "help_$model") || fail "help of $model lacks $head"
        [[ $line == *"$default" ]] || fail "help of $model: '$line' does not end in $default"
        grep -qxF -- "$line" all_help || fail "'loom help train' lacks the line '$line'"
    done
    mapfile -t listed < <(sed -n 's/^  \(--[a-z0-9-]*\).*/\1/p' "help_$model")
    ((${#listed[@]} >= 15)) || fail "help of $model lists only ${#listed[@]} flags"
    for flag in "${listed[@]}"; do
        loom_cmd train "$model" "$flag"
        [[ $RC == 2 ]] || fail "loom train $model $flag: exit status $RC, expected 2"
        grep -qF "unknown flag" "$WORK/err" && fail "help of $model lists $flag, which the parser does not know"
    done
done
# Every model `loom gen`, `loom predict` and `loom train` take (the list they
# print without one) is in `loom help COMMAND` and has a help of its own; and
# the README's Layout names every directory of src/ and apps/.
for cmd in gen predict train; do
    loom_cmd "$cmd"
    mapfile -t models < <(sed -n 's/^  \([a-z][a-z0-9]*\)  *[A-Za-z].*/\1/p' "$WORK/err")
    ((${#models[@]} >= 5)) || fail "loom $cmd lists only ${#models[@]} models"
    "$LOOM" help "$cmd" >"help_$cmd" || fail "loom help $cmd failed"
    for m in "${models[@]}"; do
        grep -qE "^  $m +[A-Za-z]" "help_$cmd" || fail "'loom help $cmd' does not list $m"
        loom_cmd "$cmd" "$m" --help
        [[ $RC == 0 ]] || fail "loom $cmd $m --help: exit status $RC"
    done
done
for dir in "$HERE"/../../src/*/ "$HERE"/../../apps/*/; do
    rel=$(basename "$(dirname "$dir")")/$(basename "$dir")/
    grep -qE "^$rel " "$HERE/../../README.md" || fail "README.md's Layout lacks $rel"
done
# Every flag the apps' docs and the usage guide mention is in some help.
for cmd in "run" "leave" "keygen" "status" "plot" "train" "gen" "gen lr" "gen mf" "gen lda" "gen lasso" "predict" \
    "predict lr" "predict mf" "predict lasso"; do
    read -r -a words <<<"$cmd"
    "$LOOM" help "${words[@]}" >>helps || fail "loom help $cmd failed"
done
for doc in LR MF LDA LASSO USAGE LAUNCHING; do
    mapfile -t mentioned < <(grep -oE -- '--[a-z][a-z0-9-]+' "$DOCS/$doc.md" | sort -u)
    for flag in "${mentioned[@]}"; do
        grep -qE -- "$flag([^a-z0-9-]|$)" helps || fail "docs/$doc.md mentions $flag, no help lists it"
    done
done
echo PASS
