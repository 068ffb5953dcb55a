"""What the Python tests share: skip without numpy, the build's paths, a private directory.

CTest runs every tests/python/test_*.py with Debian's /usr/bin/python3 (CMake finds it),
PYTHONPATH=python/, LOOM_LIBRARY (the build's libloom.so) and LOOM_CLI (the build's `loom`).
A test that cannot run prints "skipped: REASON" and exits 77 (docs/TESTING.md).
"""

import os
import shutil
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def skip(reason):
    print(f"skipped: {reason}")
    sys.exit(SKIP)


try:
    import numpy  # noqa: F401
except ImportError:
    skip(f"numpy is missing for {sys.executable} (Debian: apt-get install python3-numpy; "
         "scripts/install-deps.sh)")


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def workdir():
    """A private directory, removed when the test's process exits."""
    path = tempfile.mkdtemp(prefix="loom-python-")
    import atexit

    atexit.register(shutil.rmtree, path, True)
    return path


def shared_data():
    return os.environ.get("LOOM_SHARED_DATA", os.path.join(HERE, "..", "..", "..", "shared", "data"))
