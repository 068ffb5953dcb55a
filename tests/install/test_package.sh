#!/usr/bin/env bash
# install.package: Loom as C users and cluster admins get it.
#   1. `cmake --install --prefix P`; a C program built against P with
#      `pkg-config --cflags --libs loom`, and a CMake project with
#      find_package(Loom) linking Loom::loom (libloom.so) and
#      Loom::loom_static (libloom.a): each prints a message of the library.
#   2. `cpack -G DEB`: the .deb depends only on Debian packages this machine
#      has installed (dpkg-shlibdeps names them), installs with dpkg into a
#      scratch root (its own dpkg database), and the `loom` it installed
#      generates data and trains logistic regression on it with 2 workers;
#      the pkg-config build works against that root too.
# Usage: test_package.sh BUILD_DIR CMAKE CPACK CC
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
BUILD=${1:?usage} CMAKE=${2:?usage} CPACK=${3:?usage} CC=${4:?usage}
work_dir package
trap remove_work EXIT
clear_env
cd "$WORK" || exit 1
fail_show() { show_tails 30 "$WORK/out"; }
want="key outside the table's key range"
cat >prog.c <<'C'
#include <loom/loom.h>
#include <stdio.h>
int main(void)
{
    puts(loom_strerror(LOOM_EKEYRANGE));
    return 0;
}
C

# pkg_build PREFIX LIBDIR: prog.c built with pkg-config against PREFIX runs.
pkg_build() {
    local pc flags
    pc=$(find "$1" -name loom.pc -path '*/pkgconfig/*' | head -n 1)
    [[ -n $pc ]] || fail "no loom.pc under $1"
    flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs loom) ||
        fail "pkg-config --cflags --libs loom failed against $1"
    [[ $flags == *"-I$1/"*"include"* ]] || fail "pkg-config's flags '$flags' do not point into $1"
    # shellcheck disable=SC2086 # pkg-config's words
    "$CC" prog.c $flags -o prog_pc >out 2>&1 || fail "cc prog.c $flags failed"
    [[ $(LD_LIBRARY_PATH=$2 ./prog_pc) == "$want" ]] || fail "the pkg-config build printed no '$want'"
    readelf -d prog_pc | grep -q 'libloom.so.0' || fail "the pkg-config build does not load libloom.so.0"
}

# ---- 1. an installed prefix ----
P=$WORK/prefix
"$CMAKE" --install "$BUILD" --prefix "$P" >out 2>&1 || fail "cmake --install failed"
lib=$(dirname "$(find "$P" -name 'libloom.so.0' | head -n 1)")
pkg_build "$P" "$lib"
mkdir cmk
cat >cmk/CMakeLists.txt <<'C'
cmake_minimum_required(VERSION 3.22)
project(uses_loom C)
find_package(Loom 0.1 REQUIRED)
add_executable(prog_shared ../prog.c)
target_link_libraries(prog_shared PRIVATE Loom::loom)
add_executable(prog_static ../prog.c)
target_link_libraries(prog_static PRIVATE Loom::loom_static)
C
"$CMAKE" -S cmk -B cmk/build -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC" >out 2>&1 ||
    fail "find_package(Loom) failed"
"$CMAKE" --build cmk/build >out 2>&1 || fail "building against Loom::loom failed"
[[ $(LD_LIBRARY_PATH=$lib cmk/build/prog_shared) == "$want" ]] || fail "Loom::loom's program failed"
readelf -d cmk/build/prog_shared | grep -q 'libloom.so.0' || fail "Loom::loom is not libloom.so"
[[ $(cmk/build/prog_static) == "$want" ]] || fail "Loom::loom_static's program failed"
! readelf -d cmk/build/prog_static | grep -q 'libloom' || fail "Loom::loom_static loads libloom.so"
echo "installed prefix: pkg-config and find_package(Loom) builds run"

# ---- 2. the Debian package ----
(cd "$BUILD" && "$CPACK" -G DEB -B "$WORK/deb") >out 2>&1 || fail "cpack -G DEB failed"
deb=$(find "$WORK/deb" -maxdepth 1 -name 'loom_*.deb' | head -n 1)
[[ -n $deb ]] || fail "cpack wrote no loom_*.deb"
depends=$(dpkg-deb -f "$deb" Depends)
[[ $depends == *libzmq5* ]] || fail "the package does not depend on libzmq5: '$depends'"
for dep in $(echo "$depends" | tr ',' '\n' | sed -E 's/\(.*\)//; s/\|.*//'); do
    dpkg-query -W -f='${Status}' "$dep" 2>/dev/null | grep -q "install ok installed" ||
        fail "the package depends on $dep, which is no installed Debian package"
done
R=$WORK/root
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" "$R/var/lib/dpkg/triggers"
touch "$R/var/lib/dpkg/status"
# The scratch root has no libc6 and friends in its database: this machine's are used.
dpkg --root="$R" --force-depends --force-script-chrootless --force-not-root --log=/dev/null \
    -i "$deb" >out 2>&1 || fail "dpkg -i into the scratch root failed"
[[ $(dpkg --root="$R" -s loom 2>/dev/null | sed -n 's/^Status: //p') == "install ok installed" ]] ||
    fail "dpkg does not list loom as installed in the scratch root"
for f in usr/bin/loom usr/include/loom/loom.h usr/share/man/man1/loom.1 \
    usr/lib/python3/dist-packages/loom/__init__.py; do
    [[ -e $R/$f ]] || fail "the package installed no /$f"
done
grep -qF 'LIBRARY = "/usr/' "$R"/usr/lib/python3/dist-packages/loom/_installed.py ||
    fail "the Python package of the .deb does not name /usr's library"
"$R/usr/bin/loom" gen lr --out data --rows 4000 --features 200 --nnz 10 --quiet >out 2>&1 ||
    fail "the installed loom gen lr failed"
"$R/usr/bin/loom" train lr --train data --epochs 3 --workers 2 --quiet --model-out model >out 2>&1 ||
    fail "the installed loom train lr failed"
"$R/usr/bin/loom" predict lr --model model --data data >out 2>&1 || fail "loom predict lr failed"
acc=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' out)
numeric_check 'a > 0.7' a="${acc:-0}" || fail "the installed loom trained to accuracy '${acc}'"
pkg_build "$R/usr" "$R/usr/lib"
echo "the .deb: Debian dependencies ($depends), installed, trained lr (accuracy $acc)"
