#!/usr/bin/env bash
# The man pages the build writes (scripts/manpages.sh, into BUILD/man) agree
# with `loom help`: there is a page for every subcommand and for every model
# of train, gen and predict; each page's options are exactly the options its
# help lists (spec lines "  --name ARG  text"); and where man is installed,
# each page renders without a warning.
# Usage: test_manpages.sh LOOM
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
LOOM=${1:?usage: $0 LOOM}
MAN=$(dirname "$LOOM")/../man
work_dir manpages
trap remove_work EXIT

# models CMD: the models `loom help CMD` lists.
models() {
    "$LOOM" help "$1" 2>&1 | awk '/^(models:|.*MODEL is one of:)$/ { on = 1; next }
        on && /^  [a-z]+  / { print $1; next } on { exit }'
}
# help_flags CMD...: the long options of a help text's spec lines, sorted.
help_flags() {
    "$@" 2>&1 | grep -E '^  -' | sed -E 's/^  //; s/  .*//' | grep -oE -- '--[a-z][a-z0-9-]*' |
        sort -u
}
# page_flags PAGE: the long options of the page's .TP entries, sorted.
page_flags() {
    awk 'prev == ".TP" && /^\.B / { print } { prev = $0 }' "$1" |
        grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}

declare -A cmd=([loom]="help" [loom-train]="help train")
for sub in run leave checkpoint keygen status plot; do cmd[loom-$sub]="help $sub"; done
for m in $(models train); do cmd[loom-train-$m]="train $m --help"; done
for c in gen predict; do
    for m in $(models "$c"); do cmd[loom-$c-$m]="$c $m --help"; done
done
((${#cmd[@]} >= 20)) || fail "only ${#cmd[@]} pages expected: the model lists were not read"

for page in "${!cmd[@]}"; do
    file=$MAN/$page.1
    [[ -s $file ]] || fail "no man page $file for 'loom ${cmd[$page]}'"
    # shellcheck disable=SC2086 # the command's words
    help_flags "$LOOM" ${cmd[$page]} >"$WORK/help"
    page_flags "$file" >"$WORK/page"
    diff "$WORK/help" "$WORK/page" >"$WORK/diff" ||
        fail "$page.1 and 'loom ${cmd[$page]}' list other options:$(echo; cat "$WORK/diff")"
    if command -v man >/dev/null; then
        warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$file" 2>&1 >/dev/null)
        [[ -z $warnings ]] || fail "$page.1 renders with warnings: $warnings"
    fi
done
extra=$(find "$MAN" -name '*.1' | wc -l)
((extra == ${#cmd[@]})) || fail "$extra pages in $MAN, ${#cmd[@]} expected"
[[ $(grep -c '^\.B --train ' "$MAN/loom-train-lr.1") == 1 ]] ||
    fail "loom-train-lr.1 has no single '--train FILE' entry"
echo "ok: ${#cmd[@]} man pages, each with the options of its help"
