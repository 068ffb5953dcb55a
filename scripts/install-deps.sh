#!/bin/sh
# Install everything Loom needs to build and test, from Debian 12 packages.
# Safe to run again: it installs only what is missing. Run as root (or with sudo).
set -eu

# libzmq3-dev: Debian's libzmq has CURVE (job secrets, docs/SECURITY.md); CMake checks
# zmq_has("curve") when configuring and stops with a message if a libzmq lacks it.
# iptables and libnetfilter-queue-dev: the multi-host test's link impairment where
# the kernel has no netem (tests/netns/netimpair.c).
# libjson-c-dev: `loom status` reads the status page's JSON. chromium and python3: the
# status page's end-to-end test (tests/status) loads it in headless Chromium and checks
# the screenshot.
# liblz4-dev, libzstd-dev: the compression filters (docs/FILTERS.md); gnuplot-nox:
# `loom plot` (docs/USAGE.md). python3 also runs the FTRL reference of lr.a9a_ftrl
# (tests/lr/ftrl_reference.py, standard library only).
# python3-numpy: the Python package (python/, docs/PYTHON.md) and its tests, under Debian's
# /usr/bin/python3. python3-sklearn: the reference Lasso the lasso.sklearn test
# compares `loom train lasso` with (tests/lasso; skipped without it). liblinear-tools:
# the reference mlr.letter compares `loom train mlr` with (else scikit-learn's liblinear).
packages="build-essential cmake pkg-config libzmq3-dev libcmocka-dev clang libclang-rt-14-dev iproute2 procps openmpi-bin iptables libnetfilter-queue-dev liblz4-dev libzstd-dev gnuplot-nox libjson-c-dev chromium python3 python3-numpy python3-sklearn liblinear-tools"

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: everything is already installed"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
        echo "install-deps: need root to install:$missing" >&2
        exit 1
    fi
else
    SUDO=""
fi

echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
