"""Launching a job from Python: loom.run(...) and `python3 -m loom run ...`.

Both go through the `loom run` command (tools/run.c, docs/LAUNCHING.md), which starts the
scheduler, the servers and the workers as processes of one program with their roles in
LOOM_* variables. A program ending in .py runs under the interpreter that called
loom.run (sys.executable), so the job's processes see the same numpy and the same loom.
"""

import ctypes
import os
import shutil
import subprocess
import sys

from . import _capi
from ._errors import LoomError, call

# The switches of `loom run` (flags without a value); every other flag takes one.
_RUN_SWITCHES = {"--insecure", "--verbose", "-h", "--help"}
_EXIT_MEANINGS = {1: "a process of the job failed", 2: "usage error",
                  124: "--timeout expired"}


class JobError(LoomError):
    """A job started by loom.run() or a loom.models estimator ended with a non-zero status.

    A LoomError, so `except loom.LoomError` catches what fails in a job too; it has no
    LOOM_E* code (code is None): returncode is the launcher's exit status, detail the
    job's last lines (the node's message), call the command that ran."""

    def __init__(self, returncode, argv, stdout=None, stderr=None):
        self.returncode = returncode
        self.argv = argv
        self.stdout = stdout
        self.stderr = stderr
        meaning = _EXIT_MEANINGS.get(returncode, "")
        words = [os.path.basename(str(argv[0]))] + [str(a) for a in argv[1:2]]
        if words[1:] == ["train"] and len(argv) > 2:
            words.append(str(argv[2]))  # `loom train lr`
        command = " ".join(words)
        text = f"{command} exited with status {returncode}" + (f" ({meaning})" if meaning else "")
        tail = ""
        if stderr:
            tail = stderr if isinstance(stderr, str) else stderr.decode(errors="replace")
            tail = "\n".join(tail.rstrip("\n").splitlines()[-10:])
            text += ":\n" + tail
        self.code, self.name, self.strerror = None, "job failed", text
        self.detail, self.call = tail, command
        Exception.__init__(self, text)


def loom_command():
    """The `loom` executable: $LOOM_CLI, the one installed with this package, or PATH's."""
    path = os.environ.get("LOOM_CLI")
    if path:
        return path
    try:
        from . import _installed

        if os.access(_installed.CLI, os.X_OK):
            return _installed.CLI
    except ImportError:
        pass
    path = shutil.which("loom")
    if not path:
        raise FileNotFoundError("loom: cannot find the `loom` command; set LOOM_CLI=BUILD/bin/loom "
                                "or install Loom (docs/PYTHON.md)")
    return path


def secret_generate(path, overwrite=False):
    """Write a new job secret into a new file (mode 0600), as `loom keygen` does; every
    process of a cluster job then reads it (LOOM_SECRET_FILE, loom.run(secret=...);
    docs/SECURITY.md). An existing file raises LoomError unless overwrite."""
    err = ctypes.create_string_buffer(512)
    rc = _capi.lib.loom_secret_generate(os.fsencode(path), int(bool(overwrite)), err, len(err))
    if rc:
        raise LoomError(rc, err.value.decode(errors="replace"), "loom_secret_generate")


def interface_address(name):
    """The IPv4 address of network interface `name`: what LOOM_INTERFACE=name binds."""
    addr = ctypes.create_string_buffer(64)
    call(_capi.lib.loom_interface_address, name.encode(), addr, len(addr),
         detail=lambda rc: f"no IPv4 address on interface {name!r}")
    return addr.value.decode()


def _program(argv):
    """PROGRAM ARGS with the interpreter put before a Python script."""
    argv = [os.fspath(a) for a in argv]
    if argv and argv[0].endswith(".py"):
        return [sys.executable] + argv
    return argv


def run_argv(program, servers=1, workers=2, *, bind=None, interface=None,
             heartbeat_timeout=None, timeout=None, on_failure=None, secret=None,
             insecure=False, verbose=False):
    """The `loom run` command line that loom.run() executes."""
    if isinstance(program, (str, os.PathLike)):
        program = [program]
    argv = [loom_command(), "run", "--servers", str(servers), "--workers", str(workers)]
    for flag, value in (("--bind", bind), ("--interface", interface),
                        ("--heartbeat-timeout", heartbeat_timeout), ("--timeout", timeout),
                        ("--on-failure", on_failure), ("--secret", secret)):
        if value is not None:
            argv += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    if insecure:
        argv.append("--insecure")
    if verbose:
        argv.append("--verbose")
    return argv + ["--"] + _program(program)


def run(program, servers=1, workers=2, *, bind=None, interface=None, heartbeat_timeout=None,
        timeout=None, on_failure=None, secret=None, insecure=False, verbose=False, env=None,
        capture_output=False, text=True, check=True):
    """Run a whole job on this machine and wait for it: one scheduler, `servers` servers and
    `workers` workers, each running `program` (a script path, or a list: the program and its
    arguments; a .py program runs under this interpreter).

    The flags are those of `loom run` (docs/LAUNCHING.md): bind/interface (the address to
    bind), heartbeat_timeout (ms), timeout (s), on_failure ("stop" or "wait"), secret (a
    file; default: a throw-away secret), insecure, verbose. Output goes to this process's
    stdout/stderr, each line prefixed with its node ("[worker 0] "), unless capture_output.
    Returns a subprocess.CompletedProcess; a non-zero status raises JobError if check."""
    argv = run_argv(program, servers, workers, bind=bind, interface=interface,
                    heartbeat_timeout=heartbeat_timeout, timeout=timeout,
                    on_failure=on_failure, secret=secret, insecure=insecure, verbose=verbose)
    done = subprocess.run(argv, env=env, capture_output=capture_output, text=text)
    if check and done.returncode:
        raise JobError(done.returncode, argv, done.stdout, done.stderr)
    return done


def _program_index(args):
    """Index in `loom run`'s arguments of PROGRAM (len(args) if there is none)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return i + 1
        if not a.startswith("-"):
            return i
        i += 1 if a in _RUN_SWITCHES or "=" in a else 2
    return len(args)


USAGE = """usage: python3 -m loom run [LOOM RUN OPTIONS] [--] PROGRAM [ARGS...]

Runs `loom run` (docs/LAUNCHING.md; `python3 -m loom run --help` lists its options); a
PROGRAM ending in .py runs under this Python interpreter.
"""


def main(argv=None):
    """`python3 -m loom run ...`: replace this process by `loom run` with the same options."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "run":
        sys.stderr.write(USAGE)
        return 2
    args = args[1:]
    i = _program_index(args)
    args = args[:i] + _program(args[i:])
    try:
        cli = loom_command()
    except FileNotFoundError as e:
        sys.stderr.write(f"{e}\n")
        return 1
    os.execv(cli, [cli, "run"] + args)
