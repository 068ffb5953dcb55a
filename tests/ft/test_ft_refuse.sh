#!/usr/bin/env bash
# Checkpoints that must not be loaded (docs/FAULTS.md): `loom train --resume`
# and `loom checkpoint verify` refuse a missing, partial, truncated, corrupted
# or mismatched checkpoint with a message that names the file and the
# problem, and load nothing; `loom checkpoint ls` says which checkpoint is
# whole; a resume from an intact copy still works after each damage.
#
# Usage: test_ft_refuse.sh LOOM
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 LOOM}
work_setup ft-refuse
cd "$WORK" || exit 1

run gen lr --out data --rows 1000 --features 300 --nnz 8 --quiet
[[ $RC == 0 ]] || fail "gen: exit status $RC"
LR1=(train lr --train data --updater adagrad --epochs 2 --minibatch 100 --workers 1
    --consistency bsp --quiet --insecure --no-status)
LR=("${LR1[@]}" --servers 2)
run "${LR[@]}" --checkpoint-dir good --checkpoint-every 4 --checkpoint-full-every 2 \
    --model-out ref.model
[[ $RC == 0 ]] || fail "checkpointed run: exit status $RC"
NEWEST=$(cd good && ls -d ckpt-* | sort | tail -n 1)
[[ -e good/$NEWEST/MANIFEST ]] || fail "no committed checkpoint in good/"
run checkpoint verify good
[[ $RC == 0 ]] && grep -q ": ok" out || fail "verify of an intact checkpoint"
run checkpoint ls good
[[ $RC == 0 ]] && grep -q "ok" out || fail "ls of an intact checkpoint"

# fresh: a copy of the intact checkpoint directory.
fresh() {
    rm -rf ck
    cp -r good ck
}

# refused PATTERN...: both verify and resume exit non-zero, and their messages
# contain every PATTERN.
refused() {
    local p
    run checkpoint verify ck
    [[ $RC == 1 ]] || fail "verify: expected exit status 1, got $RC ($*)"
    for p in "$@"; do grep -qF -- "$p" err || fail "verify does not say '$p'"; done
    run "${LR[@]}" --resume ck --model-out resumed.model
    [[ $RC == 2 ]] || fail "resume: expected exit status 2, got $RC ($*)"
    for p in "$@"; do grep -qF -- "$p" err || fail "resume does not say '$p'"; done
    [[ -e resumed.model ]] && fail "resume trained anyway ($*)"
    return 0
}

# A flipped byte in the middle of a server's part.
fresh
PART=ck/$NEWEST/server-1.part
[[ -e $PART ]] || PART=$(ls ck/*/server-1.part | tail -n 1)
python3 - "$PART" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x10
open(p, "wb").write(bytes(b))
EOF
refused "${PART#ck/}" "checksum mismatch"
run checkpoint ls ck
grep -q "INVALID" out || fail "ls does not flag the corrupted checkpoint"

# A truncated part, and a missing one.
fresh
truncate -s -7 "ck/$NEWEST/worker-0.part"
refused "$NEWEST/worker-0.part" "truncated"
fresh
rm "ck/$NEWEST/worker-0.part"
refused "$NEWEST/worker-0.part" "No such file"

# A damaged manifest: a changed size, and a missing end.
fresh
sed -i 's/^clock \(.*\)/clock 1\1/' "ck/$NEWEST/MANIFEST"
refused "$NEWEST/MANIFEST"
fresh
head -n -1 "good/$NEWEST/MANIFEST" >"ck/$NEWEST/MANIFEST"
refused "$NEWEST/MANIFEST" "truncated"

# No committed checkpoint at all: only a partial one (parts, no manifest).
rm -rf ck && mkdir -p ck/ckpt-000000000004
cp "good/$NEWEST/worker-0.part" ck/ckpt-000000000004/
run checkpoint ls ck
grep -q "partial" out || fail "ls does not call a checkpoint without MANIFEST partial"
refused "no committed checkpoint"
rm -rf ck
run checkpoint verify ck
[[ $RC == 1 ]] || fail "verify of a missing directory: exit status $RC"
run "${LR[@]}" --resume ck
[[ $RC == 2 ]] && grep -qF "ck" err || fail "resume from a missing directory"

# A newer partial checkpoint is skipped: the newest committed one is used.
fresh
mkdir ck/ckpt-999999999999
cp "good/$NEWEST/worker-0.part" ck/ckpt-999999999999/
run checkpoint verify ck
[[ $RC == 0 ]] && grep -qF "$((10#${NEWEST#ckpt-}))" out || fail "verify did not skip the partial"

# Mismatches: another model, other numbers of servers or workers, other table shapes.
fresh
run train mf --train data --resume ck --workers 1 --servers 2 --insecure --no-status
[[ $RC == 2 ]] && grep -qF "of model lr" err || fail "a checkpoint of lr resumed mf"
run "${LR1[@]}" --servers 3 --resume ck
[[ $RC == 2 ]] && grep -qF "2 servers" err || fail "resume with another number of servers"
# Another updater: the table lr.w differs; the server names the file and the table.
LR_SGD=("${LR[@]/adagrad/sgd}")
run "${LR_SGD[@]}" --resume ck --model-out resumed.model
[[ $RC != 0 ]] || fail "resume with another table definition succeeded"
grep -qF 'server-' err && grep -qF '"lr.w" differs' err || fail "the table mismatch is not named"
[[ -e resumed.model ]] && fail "resume with another table trained anyway"

# Flags: what has no checkpoints says so before anything runs.
expect 2 "--checkpoint-every needs --checkpoint-dir" train lr --train data --checkpoint-every 5
expect 2 "--algo dbpg has no checkpoints yet" train lr --train data --algo dbpg --checkpoint-dir x
expect 2 "--priority has no checkpoints yet: leave out --checkpoint-dir" \
    train lr --train data --priority abs --checkpoint-dir x
expect 2 "--priority has no checkpoints yet: leave out --resume" \
    train mf --train data --priority rel --resume x
expect 2 "--schedule rotation has no checkpoints yet: leave out --checkpoint-dir" \
    train mf --train data --schedule rotation --checkpoint-dir x
expect 2 "--schedule rotation has no checkpoints yet: leave out --resume" \
    train lda --train data --schedule rotation --resume x
[[ -e x ]] && fail "a refused command created its checkpoint directory"

# And the intact copy still resumes: the last checkpoint is the end of training.
fresh
run "${LR[@]}" --resume ck --model-out resumed.model
[[ $RC == 0 ]] || fail "resume from an intact copy: exit status $RC"
cmp -s ref.model resumed.model || fail "resume from the final checkpoint changed the model"
run checkpoint export ck --out exported.model
[[ $RC == 0 ]] && cmp -s ref.model exported.model || fail "export differs from the trained model"
echo PASS
