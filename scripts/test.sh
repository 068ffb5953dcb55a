#!/usr/bin/env bash
# Build Loom and run its whole test suite: the README's second command.
#
#   scripts/test.sh                 Release build in build/, every test
#   LOOM_SANITIZE=address,undefined LOOM_BUILD_DIR=build-asan scripts/test.sh
#   LOOM_SANITIZE=thread LOOM_BUILD_DIR=build-tsan LOOM_TEST_LABEL=threads scripts/test.sh
#
# A test that cannot run here (no ../shared/data, no root for netns, ...) exits
# 77 and CTest counts it as skipped. Every run ends with the list of skipped
# tests and why; with CI=true a skip fails the run unless tests/skip-allowed.txt
# allows that test (docs/TESTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."

sh scripts/install-deps.sh

build=${LOOM_BUILD_DIR:-build}
sanitize=${LOOM_SANITIZE:-}
jobs=$(nproc 2>/dev/null || echo 2)
args=(-S . -B "$build" -DLOOM_SANITIZE="$sanitize")
if [ -n "$sanitize" ]; then
    # Sanitizers want symbols and no aggressive inlining to report usefully.
    args+=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
    if [ "$sanitize" = thread ]; then args+=(-DCMAKE_C_COMPILER=clang); fi
fi
if [ "${LOOM_FUZZ:-0}" = 1 ]; then args+=(-DLOOM_FUZZ=ON -DCMAKE_C_COMPILER=clang); fi
cmake "${args[@]}" >/dev/null
cmake --build "$build" -j "$jobs"

# Tests run two more at a time than there are cores: most of the multi-process
# tests spend half their time waiting (for a heartbeat timeout, a paced clock,
# a replacement), so cores would stand idle at one test a core.
# LOOM_TEST_JOBS overrides.
ctest_args=(--test-dir "$build" --output-on-failure -j "${LOOM_TEST_JOBS:-$((jobs + 2))}")
if [ -n "${LOOM_TEST_LABEL:-}" ]; then ctest_args+=(-L "$LOOM_TEST_LABEL"); fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp}
status=0
rm -f "$build/junit.xml" # never report the skips of an earlier run
ctest "${ctest_args[@]}" --output-junit junit.xml || status=$?

# skipped_tests JUNIT: "NAME<tab>REASON" for each test CTest counted as skipped;
# the reason is the last line of its output starting with "skipped", else
# its last line. (CTest's own summary names them but hides their output.)
skipped_tests() {
    awk '
        function unescape(s) {
            gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&quot;/, "\"", s)
            gsub(/&apos;/, "\047", s); gsub(/&amp;/, "\\&", s)
            return s
        }
        /^[ \t]*<testcase / {
            match($0, /name="[^"]*"/)
            name = substr($0, RSTART + 6, RLENGTH - 7); skipped = 0; reason = ""; last = ""
            next
        }
        /^[ \t]*<skipped/ { skipped = 1; next }
        /^[ \t]*<\/testcase>/ { if (skipped) print name "\t" unescape(reason != "" ? reason : last); next }
        {
            line = $0; sub(/^[ \t]*<system-out>/, "", line); sub(/<\/system-out>$/, "", line)
            if (line != "") last = line
            if (line ~ /^skipped/) reason = line
        }' "$1"
}

skips=""
if [ -f "$build/junit.xml" ]; then skips=$(skipped_tests "$build/junit.xml"); fi
allowed=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' tests/skip-allowed.txt)
unexpected=0
if [ -n "$skips" ]; then
    echo "== skipped tests (not run; each says why):"
    while IFS=$'\t' read -r name reason; do
        if grep -qxF -- "$name" <<<"$allowed"; then
            echo "  $name: $reason (allowed by tests/skip-allowed.txt)"
        else
            echo "  $name: $reason"
            unexpected=$((unexpected + 1))
        fi
    done <<<"$skips"
fi
if [ "${CI:-}" = true ] && ((unexpected > 0)); then
    echo "CI: $unexpected test(s) skipped that tests/skip-allowed.txt does not allow (listed above):" \
        "a skipped test proves nothing. Give CI what they need (docs/TESTING.md)," \
        "or allow them in tests/skip-allowed.txt with the reason." >&2
    ((status != 0)) || status=1
fi
exit "$status"
