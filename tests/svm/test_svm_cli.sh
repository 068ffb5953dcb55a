#!/usr/bin/env bash
# `loom train svm` and `loom predict svm` refusing what they cannot use, before any process
# starts, with the documented messages and exit status 2 (usage) or 1 (a file); data with
# features beyond the model's counted in one warning.
# Usage: test_svm_cli.sh LOOM
set -u
LOOM=${1:?loom}
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
work_dir svm-cli
trap remove_work EXIT
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

# Features the model does not have (ids 5, 7 and 9 against a model of 2 features) weigh 0,
# and both `loom predict svm` and the training job's --test say so once, with the count;
# a file within the model's features gets no warning.
printf '+1 1:1 5:2 7:1\n-1 2:1\n+1 9:1\n' >wide.svm
beyond="wide.svm: 3 values in 2 rows (the first in row 1) are of features beyond the model's 2; they weigh 0"
run train svm --train ok.svm --test wide.svm --workers 2 --epochs 1 --model-out ok.model --quiet
[[ $RC == 0 ]] || fail "train svm --test wide.svm: exit status $RC"
[[ $(grep -cF -- "loom train svm: warning: $beyond" err) == 1 ]] ||
    fail "train svm --test wide.svm: not one warning about the features beyond the model"
run predict svm --model ok.model --data wide.svm
[[ $RC == 0 ]] || fail "predict svm --data wide.svm: exit status $RC"
[[ $(grep -cF -- "loom predict svm: warning: $beyond" err) == 1 ]] ||
    fail "predict svm --data wide.svm: not one warning about the features beyond the model"
run predict svm --model ok.model --data ok.svm
[[ $RC == 0 && ! -s err ]] || fail "predict svm --data ok.svm: exit status $RC, or a message"
echo PASS
