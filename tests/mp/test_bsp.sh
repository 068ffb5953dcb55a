#!/usr/bin/env bash
# BSP across real processes: every pull equals the sequential computation exactly.
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh"
"$LOOM" run --servers 2 --workers 3 --timeout 60 -- "$PS_CHECK" bsp --clocks 15 >"$WORK/job.out" 2>&1 ||
    fail "the BSP job failed"
[[ $(grep -c 'every pull exact' "$WORK/job.out") -eq 3 ]] || fail "not every worker reported its checks"
echo "PASS"
