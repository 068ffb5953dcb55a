# shellcheck shell=bash
# numeric_check EXPR NAME=VALUE...: whether the awk expression EXPR holds for
# the named values. Each value must be a number as the programs print them
# (nan and inf are not): a missing or garbled value fails the check, naming it,
# where awk alone would compare an empty string as text and could pass.
#   numeric_check 'acc >= 0.848' acc="$acc" || fail "test accuracy $acc < 0.848"
# Sourced by the test scripts that compare measured values with thresholds.
numeric_check() {
    local expr=$1 arg vars=()
    shift
    for arg in "$@"; do
        if [[ ! ${arg#*=} =~ ^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]]; then
            echo "${arg%%=*} is '${arg#*=}', not a number (missing from the output?)" >&2
            return 1
        fi
        vars+=(-v "$arg")
    done
    awk "${vars[@]}" "BEGIN { exit !($expr) }"
}
