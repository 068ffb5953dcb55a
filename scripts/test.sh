#!/usr/bin/env bash
# Build Loom and run its whole test suite: the README's second command.
#
#   scripts/test.sh                 Release build in build/, every test
#   LOOM_SANITIZE=address,undefined LOOM_BUILD_DIR=build-asan scripts/test.sh
#   LOOM_SANITIZE=thread LOOM_BUILD_DIR=build-tsan LOOM_TEST_LABEL=threads scripts/test.sh
#
# Tests that need ../shared/data say so and are skipped when it is absent.
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

ctest_args=(--test-dir "$build" --output-on-failure -j "$jobs")
if [ -n "${LOOM_TEST_LABEL:-}" ]; then ctest_args+=(-L "$LOOM_TEST_LABEL"); fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp}
ctest "${ctest_args[@]}"
