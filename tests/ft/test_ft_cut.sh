#!/usr/bin/env bash
# Consistent cuts (docs/FAULTS.md): a job of 3 workers (one slower) and 2
# servers pushes known integers every clock under BSP, SSP(3) and ASP with a
# checkpoint every 5 clocks; every committed checkpoint must hold, for every
# key, exactly the sum of the clocks before its clock, and the job's final
# totals must be exact (a push held back at a cut is applied once, not lost).
# Again with pushes encoded by a filter chain (sparse rows, key cache, zstd):
# the server holds them decoded and applies them the same way.
#
# Usage: test_ft_cut.sh LOOM FT_CUT
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
LOOM=${1:?usage: $0 LOOM FT_CUT}
FT_CUT=${2:?usage: $0 LOOM FT_CUT}
work_setup ft-cut
cd "$WORK" || exit 1
FILTER=sparse,keycache,zstd
for c in bsp ssp asp bsp+filter ssp+filter asp+filter; do
    filter=()
    [[ $c == *+filter ]] && filter=("$FILTER")
    LOOM_CHECKPOINT_DIR=ck_$c LOOM_CHECKPOINT_EVERY=5 LOOM_CHECKPOINT_FULL_EVERY=2 \
        run run --workers 3 --servers 2 --insecure --no-status -- "$FT_CUT" job "${c%+filter}" 47 \
        "${filter[@]}"
    [[ $RC == 0 ]] || fail "$c: the job failed (exit status $RC)"
    "$FT_CUT" check "ck_$c" 3 >out 2>err || fail "$c: a checkpoint is not its cut"
    echo "$c: $(cat out)"
done
echo PASS
