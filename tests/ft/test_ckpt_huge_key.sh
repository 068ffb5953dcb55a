#!/usr/bin/env bash
# A checkpoint whose server part was rewritten with a huge key, its CRC-32C,
# size and the manifest's checksum recomputed (tests/ft/ckpt_rewrite.py), so
# that it still verifies: `loom checkpoint export` fails at once naming the
# file and the key, and neither allocates nor writes by the key's value (it
# used to ask for 8 TiB, aborting under AddressSanitizer, or write a model of
# 2^28 weights). A resume from it is refused by the server the same way.
# Also with the table's key range widened to take the key in every part:
# export refuses a key beyond the rows the checkpoint holds.
#
# Usage: test_ckpt_huge_key.sh LOOM
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 LOOM}
REWRITE="$(cd "$(dirname "$0")" && pwd)/ckpt_rewrite.py"
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
work_setup ckpt-huge-key
cd "$WORK" || exit 1

run gen lr --out data --rows 600 --features 100 --nnz 5 --quiet
[[ $RC == 0 ]] || fail "gen: exit status $RC"
LR=(train lr --train data --epochs 1 --minibatch 100 --workers 1 --servers 1 --consistency bsp
    --quiet --insecure --no-status)
run "${LR[@]}" --checkpoint-dir good --checkpoint-every 3 --checkpoint-full-every 1
[[ $RC == 0 ]] || fail "checkpointed run: exit status $RC"
run checkpoint export good --out ref.model
[[ $RC == 0 ]] || fail "export of the intact checkpoint: exit status $RC"

# export_refused PATTERN...: export exits 1 within 20 s saying every PATTERN,
# writing no model; the file size limit (100 MiB) stops a writer that follows
# the key instead of filling the disk.
export_refused() {
    local p
    (ulimit -f 102400 && exec timeout 20 "$LOOM" checkpoint export ck --out hostile.model) \
        >out 2>err
    RC=$?
    [[ $RC == 1 ]] || fail "export of a hostile part: expected exit status 1, got $RC"
    for p in "$@"; do grep -qF -- "$p" err || fail "export does not say '$p'"; done
    [[ -e hostile.model ]] && fail "export wrote a model of a hostile part"
    return 0
}

for key in $((1 << 28)) $((1 << 40)) 18446744073709551615; do
    rm -rf ck && cp -r good ck
    python3 "$REWRITE" ck lr.w "$key" || fail "cannot rewrite the checkpoint"
    run checkpoint verify ck
    [[ $RC == 0 ]] || fail "the rewritten checkpoint does not verify: the rewrite is wrong"
    export_refused "/server-0.part: malformed section of table \"lr.w\"" \
        "key $key is outside the table's keys 0 to "
done

# The server of a job resuming from it refuses it too, naming the file.
run "${LR[@]}" --resume ck --model-out resumed.model
[[ $RC != 0 ]] && grep -qF "server-0.part" err && grep -qF "key 18446744073709551615 is outside" err ||
    fail "a resume from a part with a key outside its table was not refused naming the file"
[[ -e resumed.model ]] && fail "a resume from a hostile part trained"

# The key range widened in every part to hold the key: the reader takes the
# key, export refuses it as beyond the rows of lr.w.
rm -rf ck && cp -r good ck
python3 "$REWRITE" ck lr.w $((1 << 40)) $((1 << 41)) || fail "cannot rewrite the checkpoint"
export_refused "table lr.w of the checkpoint at clock" "has a row at key $((1 << 40)) but only "
echo PASS
