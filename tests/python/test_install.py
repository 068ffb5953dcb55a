"""python.install: `cmake --install` into a fresh prefix gives what a Debian user expects:
the package where Debian's python3 finds it under that prefix, loading the installed
libloom.so and launching jobs with the installed `loom` (no LOOM_LIBRARY, LOOM_CLI or
build tree in sight), and a shared library a C program links with -lloom.

Usage: test_install.py CMAKE BUILD_DIR C_COMPILER"""

import glob
import os
import subprocess
import sys

import harness

cmake, build, cc = sys.argv[1:4]
prefix = os.path.join(harness.workdir(), "prefix")
done = subprocess.run([cmake, "--install", build, "--prefix", prefix], capture_output=True,
                      text=True, timeout=120)
if done.returncode:
    harness.fail(f"cmake --install failed:\n{done.stdout}\n{done.stderr}")
site = glob.glob(os.path.join(prefix, "lib", "python3*", "dist-packages"))
if len(site) != 1 or not os.path.exists(os.path.join(site[0], "loom", "__init__.py")):
    harness.fail(f"no package in {prefix}/lib/python3*/dist-packages: {site}")
lib = os.path.join(prefix, "lib", "libloom.so.0")
for path in (lib, os.path.join(prefix, "lib", "libloom.so"), os.path.join(prefix, "bin", "loom"),
             os.path.join(prefix, "include", "loom", "loom.h")):
    if not os.path.exists(path):
        harness.fail(f"not installed: {path}")

# The installed package, as a user runs it: from elsewhere, with only its site directory.
check = f"""
import loom, sys
assert loom.library_path == {lib!r}, loom.library_path
assert loom.__file__.startswith({site[0]!r}), loom.__file__
done = loom.run({os.path.join(harness.HERE, "tiny_job.py")!r}, workers=3, capture_output=True)
assert sorted(l for l in done.stdout.splitlines() if "sum" in l) == \\
    [f"[worker {{r}}] sum 6 of 3 workers" for r in range(3)], done.stdout
print("installed package:", loom.library_path, "exact sums")
"""
env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": site[0], "PYTHONDONTWRITEBYTECODE": "1"}
for preload in ("LD_PRELOAD", "ASAN_OPTIONS"):  # an AddressSanitizer build needs these
    if preload in os.environ:
        env[preload] = os.environ[preload]
done = subprocess.run([sys.executable, "-c", check], env=env, cwd=prefix, capture_output=True,
                      text=True, timeout=120)
if done.returncode:
    harness.fail(f"the installed package failed:\n{done.stdout}\n{done.stderr}")
print(done.stdout.strip())

# A C program against the installed headers and shared library.
src, exe = os.path.join(prefix, "prog.c"), os.path.join(prefix, "prog")
with open(src, "w") as f:
    f.write('#include <loom/loom.h>\n#include <stdio.h>\n'
            'int main(void) { puts(loom_strerror(LOOM_EKEYRANGE)); return 0; }\n')
done = subprocess.run([cc, "-I", os.path.join(prefix, "include"), src, "-L",
                       os.path.join(prefix, "lib"), "-lloom", "-o", exe], capture_output=True,
                      text=True, timeout=120)
if done.returncode:
    harness.fail(f"cannot link a C program with -lloom:\n{done.stderr}")
done = subprocess.run([exe], env={**env, "LD_LIBRARY_PATH": os.path.join(prefix, "lib")},
                      capture_output=True, text=True, timeout=60)
if done.stdout != "key outside the table's key range\n":
    harness.fail(f"the C program linked with -lloom printed {done.stdout!r} {done.stderr!r}")
needed = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True).stdout
if "libloom.so.0" not in needed:
    harness.fail(f"the program does not load libloom.so.0:\n{needed}")
print("a C program links with -lloom and loads libloom.so.0")
