#!/usr/bin/env bash
# `loom train svm` and `loom predict svm` refusing what they cannot use, before any process
# starts, with the documented messages and exit status 2 (usage) or 1 (a file).
# Usage: test_svm_cli.sh LOOM
set -u
LOOM=${1:?loom}
# shellcheck source-path=SCRIPTDIR source=../cli_lib.sh
source "$(dirname "$0")/../cli_lib.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-svm-cli.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
printf '+1 1:1\n-1 2:1\n' >ok.svm
printf '0 1\n1 7\n' >bad.graph
printf '0 1\n1 0\n2 3\n3 2\n' >split.graph
expect 2 "--train FILE is required" train svm --workers 2
expect 2 "--graph bad.graph: bad.graph:2: node 7 is not one of the job's 3 workers" \
    train svm --train ok.svm --workers 3 --servers 0 --graph bad.graph
expect 2 "--graph split.graph: graph split.graph on 4 workers is not connected" \
    train svm --train ok.svm --workers 4 --servers 0 --graph split.graph
expect 2 "--graph missing.graph: graph missing.graph: cannot open" \
    train svm --train ok.svm --workers 2 --servers 0 --graph missing.graph
expect 2 "--sync takes bsp, async or notify-ack" train svm --train ok.svm --sync barrier
expect 2 "--slow 4: there are only 4 workers" train svm --train ok.svm --workers 4 --slow 4
expect 2 "--window takes a whole number from 1 to 64, not '0'" train svm --train ok.svm --window 0
expect 2 "--straggle takes a number from 0 to 1, not '1.5'" train svm --train ok.svm --straggle 1.5
expect 2 "svm trains with --threads 1 only" train svm --train ok.svm --threads 2
expect 2 "--model M is required" predict svm --data ok.svm
expect 1 "missing.model: cannot open" predict svm --model missing.model --data ok.svm
echo PASS
