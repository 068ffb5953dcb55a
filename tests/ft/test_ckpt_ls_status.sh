#!/usr/bin/env bash
# `loom checkpoint ls DIR` lists every checkpoint and exits 0 only if one of
# them is committed and verifies (one a job could resume from); with none
# (all damaged, all partial, an empty directory) it still lists them and
# exits 1 saying so on stderr (docs/FAULTS.md, "Inspecting checkpoints").
#
# Usage: test_ckpt_ls_status.sh LOOM
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 LOOM}
work_setup ckpt-ls-status
cd "$WORK" || exit 1

run gen lr --out data --rows 1000 --features 100 --nnz 5 --quiet
[[ $RC == 0 ]] || fail "gen: exit status $RC"
run train lr --train data --epochs 1 --minibatch 100 --workers 1 --servers 1 --consistency bsp \
    --checkpoint-dir good --checkpoint-every 3 --quiet --insecure --no-status
[[ $RC == 0 ]] || fail "checkpointed run: exit status $RC"
manifests=(good/ckpt-*/MANIFEST)
COMMITTED=${#manifests[@]}
((COMMITTED >= 2)) || fail "expected 2 or more committed checkpoints, got $COMMITTED"

run checkpoint ls good
[[ $RC == 0 ]] || fail "ls of intact checkpoints: exit status $RC"
[[ $(grep -c "  ok$" out) == "$COMMITTED" ]] || fail "ls does not list every checkpoint as ok"

# One damaged, the others whole: still 0.
rm -rf ck && cp -r good ck
dirs=(ck/ckpt-*) # in clock order: the clocks have 12 digits
NEWEST=${dirs[-1]#ck/}
head -n -1 "good/$NEWEST/MANIFEST" >"ck/$NEWEST/MANIFEST"
run checkpoint ls ck
[[ $RC == 0 ]] && grep -q "INVALID" out || fail "ls with one damaged checkpoint: exit status $RC"

# Every manifest damaged: listed, and status 1.
for m in ck/ckpt-*/MANIFEST; do head -n -1 "${m/ck/good}" >"$m"; done
run checkpoint ls ck
[[ $RC == 1 ]] || fail "ls with every checkpoint damaged: expected exit status 1, got $RC"
[[ $(grep -c "INVALID" out) == "$COMMITTED" ]] || fail "ls does not list every damaged checkpoint"
grep -qF "ck: no committed checkpoint that verifies" err || fail "ls does not say why it failed"

# Only partial checkpoints (no MANIFEST), and an empty directory: status 1.
rm ck/ckpt-*/MANIFEST
run checkpoint ls ck
[[ $RC == 1 ]] && grep -q "partial" out || fail "ls with only partial checkpoints: exit status $RC"
rm -rf ck && mkdir ck
run checkpoint ls ck
[[ $RC == 1 ]] && grep -qF "no checkpoints in ck" out || fail "ls of an empty directory: exit status $RC"
grep -qF "no committed checkpoint" err || fail "ls of an empty directory does not say why"
echo PASS
