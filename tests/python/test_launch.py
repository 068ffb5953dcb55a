"""python.launch: the three ways to start a Python program as a job -- `python3 -m loom run`,
`loom run -- python3 PROG`, loom.run() -- each job computing an exact sum (tests/python/
tiny_job.py), and a worker's LoomError reaching the caller as a JobError with its message."""

import os
import subprocess
import sys

import harness

import loom

prog = os.path.join(harness.HERE, "tiny_job.py")
cli = os.environ["LOOM_CLI"]


def sums(output, workers):
    """Check that every worker printed the exact sum 1 + 2 + ... + workers."""
    want = f"sum {workers * (workers + 1) // 2} of {workers} workers"
    got = sorted(line for line in output.splitlines() if line.startswith("[worker"))
    expect = [f"[worker {r}] {want}" for r in range(workers)]
    if got != expect:
        harness.fail(f"expected {expect}, got {got}:\n{output}")


def command(argv, status=0):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != status:
        harness.fail(f"{argv} exited {done.returncode}, not {status}:\n{done.stdout}\n{done.stderr}")
    return done


# python3 -m loom run: options before the program, no "--", the .py run by this interpreter.
sums(command([sys.executable, "-m", "loom", "run", "--workers", "3", "--timeout=60", prog]).stdout, 3)
# loom run around a Python program.
sums(command([cli, "run", "--servers", "2", "--workers", "2", "--", sys.executable, prog]).stdout, 2)
# loom.run from Python.
done = loom.run(prog, servers=2, workers=4, timeout=60, capture_output=True)
sums(done.stdout, 4)
print("python3 -m loom run, loom run -- python3, loom.run: exact sums")

# A job with a secret made from Python: exact sums; the file is private and not overwritten.
secret = os.path.join(harness.workdir(), "job.secret")
loom.secret_generate(secret)
if os.stat(secret).st_mode & 0o777 != 0o600:
    harness.fail(f"secret file mode {oct(os.stat(secret).st_mode)}")
sums(loom.run(prog, workers=2, secret=secret, timeout=60, capture_output=True).stdout, 2)
try:
    loom.secret_generate(secret)
    harness.fail("an existing secret file was overwritten")
except loom.LoomError as e:
    if e.code != loom.ECONFIG or e.detail != f"{secret} already exists; it was left alone":
        harness.fail(f"secret_generate over an existing file: {e}")
if loom.interface_address("lo") != "127.0.0.1":
    harness.fail(f"interface lo has address {loom.interface_address('lo')}")
try:
    loom.interface_address("no-such-if0")
    harness.fail("an unknown interface has an address")
except loom.LoomError as e:
    if e.code != loom.ECONFIG:
        harness.fail(f"unknown interface: {e}")
print("secret_generate: a job with that secret, exact sums; interface_address('lo')")

# A worker failing with a LoomError: the job fails, and the caller sees why.
try:
    loom.run([prog, "fail"], workers=2, timeout=60, capture_output=True)
    harness.fail("a job whose worker failed did not raise JobError")
except loom.JobError as e:
    text = str(e)
    if e.returncode != 1 or "(a process of the job failed)" not in text:
        harness.fail(f"JobError: {text}")
    want = "[worker 0] loom.LoomError: loom_pull: key outside the table's key range " \
           "(LOOM_EKEYRANGE): key 99 (index 0) is outside the range [0, 10) of table 't'"
    if want not in e.stderr:
        harness.fail(f"the worker's error is not reported as\n{want}\nbut:\n{e.stderr}")
print("a worker's LoomError fails the job with its message")

# Usage errors.
done = command([sys.executable, "-m", "loom"], status=2)
if "usage: python3 -m loom run" not in done.stderr:
    harness.fail(f"no usage message: {done.stderr}")
done = command([sys.executable, "-m", "loom", "run", "--workers", "0", prog], status=2)
if "--workers" not in done.stderr:
    harness.fail(f"loom run's own usage error is not shown: {done.stderr}")
print("usage errors: status 2 with a message")
