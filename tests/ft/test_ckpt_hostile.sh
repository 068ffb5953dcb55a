#!/usr/bin/env bash
# Checkpoint directories as an attacker or a careless user leaves them
# (docs/FAULTS.md, "The checkpoint directory"), each as `loom train` meets it:
#   - a link planted as ckpt-<clock> to a directory of the user's: cleanup
#     leaves what it points to alone;
#   - links planted where a part is about to be written (the temporary name,
#     the final name): the files they point to keep their bytes;
#   - a directory another user prepared in a world-writable parent, one that
#     is a link, one every user may write: refused, naming the reason;
#   - two jobs in one directory: the second is refused, naming the holder,
#     and the first's checkpoints stay whole;
#   - a checkpoint every clock of a job killed mid-run: the directory holds
#     committed checkpoints and at most the one being written, never a pile
#     of partial ones, nor a committed one whose parts a removal cut short;
#   - a removal a killed job left half done: finished by the next job;
#   - --checkpoint-every in epochs and seconds, and spellings it refuses.
#
# Usage: test_ckpt_hostile.sh LOOM
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 LOOM}
work_setup ckpt-hostile
cd "$WORK" || exit 1
chmod 755 "$WORK"

run gen lr --out data --rows 2000 --features 300 --nnz 8 --quiet
[[ $RC == 0 ]] || fail "gen: exit status $RC"
run gen lr --out big --rows 20000 --features 300 --nnz 8 --quiet
[[ $RC == 0 ]] || fail "gen big: exit status $RC"
LR=(train lr --train data --updater adagrad --epochs 3 --minibatch 100 --workers 2 --servers 2
    --consistency ssp:1 --quiet --insecure --no-status)

# committed DIR: the clocks of DIR's committed checkpoints that verify.
committed() { "$LOOM" checkpoint ls "$1" 2>/dev/null | awk '$2 == "ok" { print $1 }'; }

# ---- a link planted as a checkpoint directory ----
mkdir victim ck1
echo "the user's own file" >victim/keep.txt
ln -s "$WORK/victim" ck1/ckpt-000000000001
run "${LR[@]}" --checkpoint-dir ck1 --checkpoint-every 5
[[ $RC == 0 ]] || fail "job with a planted ckpt link: exit status $RC"
[[ -e victim/keep.txt ]] && grep -q "own file" victim/keep.txt ||
    fail "cleanup removed what a planted link points to"
[[ -L ck1/ckpt-000000000001 ]] || fail "the planted link itself went"
[[ -n $(committed ck1) ]] || fail "no checkpoint committed next to a planted link"

# ---- links planted where parts are written ----
echo "precious" >target.txt
mkdir -p ck2/ckpt-000000000005 ck2/ckpt-000000000010
for c in 000000000005 000000000010; do
    for f in server-0.part.tmp server-1.part worker-0.part.tmp worker-1.part MANIFEST.tmp; do
        ln -s "$WORK/target.txt" "ck2/ckpt-$c/$f"
    done
done
run "${LR[@]}" --checkpoint-dir ck2 --checkpoint-every 5
[[ $RC == 0 ]] || fail "job with planted part links: exit status $RC"
[[ $(cat target.txt) == precious ]] || fail "a checkpoint write went through a planted link"
[[ -n $(committed ck2) ]] || fail "no checkpoint committed with planted part links"

# ---- directories this job must not trust ----
mkdir -m 1777 shared
setpriv --reuid=65534 --regid=65534 --clear-groups mkdir -m 755 shared/ck ||
    fail "cannot make a directory as user 65534"
expect 1 "belongs to user 65534" "${LR[@]}" --checkpoint-dir shared/ck
[[ -z $(ls shared/ck) ]] || fail "the job wrote into another user's directory"
mkdir elsewhere
ln -s "$WORK/elsewhere" shared/link
expect 1 "not a directory (a link or a file)" "${LR[@]}" --checkpoint-dir shared/link
[[ -z $(ls elsewhere) ]] || fail "the job wrote through a linked checkpoint directory"
mkdir -m 777 open
chmod 777 open
expect 1 "writable by every user" "${LR[@]}" --checkpoint-dir open

# ---- two jobs, one directory ----
setsid "$LOOM" train lr --train big --updater adagrad --epochs 1000 --minibatch 100 --workers 1 \
    --servers 1 --quiet --insecure --no-status --checkpoint-dir ck3 --checkpoint-every 20 \
    >first.out 2>&1 &
launcher=$!
for ((i = 0; i < 600; i++)); do # up to 60 s for its first commit
    [[ -n $(committed ck3) ]] && break
    kill -0 "$launcher" 2>/dev/null || fail "the first job ended: $(tail -3 first.out)"
    poll_pause 0.1
done
[[ -n $(committed ck3) ]] || fail "the first job committed nothing in 60 s"
expect 1 "is in use by another job (pid" "${LR[@]}" --checkpoint-dir ck3
kill -0 "$launcher" 2>/dev/null || fail "the first job did not survive the second"
kill -KILL -- -"$launcher" 2>/dev/null
wait "$launcher" 2>/dev/null
launcher=
newest=$(committed ck3 | tail -n 1)
run checkpoint verify ck3
[[ $RC == 0 ]] || fail "the first job's newest checkpoint ($newest) does not verify"

# ---- a checkpoint every clock, killed mid-run ----
setsid "$LOOM" train lr --train big --updater adagrad --epochs 1000 --minibatch 50 --workers 2 \
    --servers 2 --quiet --insecure --no-status --checkpoint-dir ck4 --checkpoint-every 1 \
    >busy.out 2>&1 &
launcher=$!
# Each listing runs while the job commits a checkpoint and removes the one
# before every clock: once one was committed, every listing must show one
# (loom_checkpoint_list scans again when a checkpoint vanished under it).
seen=
for ((i = 0; i < 600; i++)); do # until a checkpoint past clock 200 is committed, up to 60 s
    newest=$(committed ck4 | tail -n 1)
    [[ -z $seen || -n $newest ]] || fail "a listing during checkpoints found none committed (after $seen)"
    seen=${newest:-$seen}
    [[ -n $newest ]] && ((newest > 200)) && break
    kill -0 "$launcher" 2>/dev/null || fail "the busy job ended: $(tail -3 busy.out)"
    poll_pause 0.1
done
kill -KILL -- -"$launcher" 2>/dev/null
wait "$launcher" 2>/dev/null
launcher=
"$LOOM" checkpoint ls ck4 >ls.out 2>&1
partial=$(grep -c INVALID ls.out)
((partial <= 1)) || fail "$partial uncommitted checkpoints left behind (at most 1, the one being written): $(head -5 ls.out)"
[[ -n $(committed ck4) ]] || fail "no checkpoint committed every clock: $(head -5 ls.out)"
run checkpoint verify ck4
[[ $RC == 0 ]] || fail "the newest checkpoint of the busy job does not verify"

# ---- a removal a killed job left half done ----
# A checkpoint directory is renamed .gone-ckpt-<clock> before its files go;
# the next job in the directory finishes what a killed one left so.
mkdir -m 750 ck8 ck8/.gone-ckpt-000000000007
echo x >ck8/.gone-ckpt-000000000007/server-0.part
run "${LR[@]}" --checkpoint-dir ck8
[[ $RC == 0 ]] || fail "a job in a directory with a half-removed checkpoint: exit status $RC"
[[ -e ck8/.gone-ckpt-000000000007 ]] && fail "the half-removed checkpoint was left in place"

# ---- intervals ----
# Epochs: 1 worker, 20000 rows in minibatches of 100: 200 clocks an epoch;
# every checkpoint at the end of an epoch.
run train lr --train big --updater adagrad --epochs 6 --minibatch 100 --workers 1 --servers 1 \
    --quiet --insecure --no-status --checkpoint-dir ck5 --checkpoint-every 2e
[[ $RC == 0 ]] || fail "--checkpoint-every 2e: exit status $RC"
clocks=$(committed ck5)
[[ -n $clocks ]] || fail "--checkpoint-every 2e committed nothing"
for c in $clocks; do
    ((c % 200 == 0)) || fail "--checkpoint-every 2e: a checkpoint at clock $c, not at an epoch's end"
done
# Seconds: the first checkpoint a second into a job of several.
run train lr --train big --updater adagrad --epochs 40 --minibatch 100 --workers 1 --servers 1 \
    --quiet --insecure --no-status --checkpoint-dir ck6 --checkpoint-every 1s
[[ $RC == 0 ]] || fail "--checkpoint-every 1s: exit status $RC"
[[ -n $(committed ck6) ]] || fail "--checkpoint-every 1s committed nothing"
for bad in 0 5x 1.5s -3 e 10000000000; do
    expect 2 "--checkpoint-every" "${LR[@]}" --checkpoint-dir ck7 --checkpoint-every "$bad"
done
echo "ok"
