#!/usr/bin/env python3
"""`loom status` against hostile status pages: whatever answers at the address is untrusted.

    test_status_hostile.py LOOM

A one-shot HTTP server on loopback answers `loom status` (and `loom status --json`) with
pages that are JSON of the right outline but hold the wrong types where the page's members
go (a node that is not an object, metrics that are an array, strings where numbers go, NaN
and huge numbers) or strings with terminal escape sequences (clear screen, window title,
C1 controls, a bare carriage return). For every one, `loom status` must exit 0 (or 1 with a
one-line reason), never die of a signal, and print no control character but the newline, no
byte outside ASCII, and no line longer than a bound.
"""
import json
import socket
import subprocess
import sys
import threading

WAIT_S = 30
MAX_LINE = 4096

NODE = {"id": 1, "role": "worker", "rank": 0, "address": "127.0.0.1:1", "state": "running",
        "bytes_sent": 1, "bytes_received": 1, "send_bytes_per_s": 1000, "recv_bytes_per_s": 0,
        "heartbeat_age_ms": 3, "dead_in_ms": 4997, "clock": 5, "staleness": 0,
        "metrics": {"objective": 0.25}}
JOB = {"state": "running", "scheduler": "127.0.0.1:2", "servers": 1, "workers": 1,
       "registered": 3, "workers_done": 0, "uptime_ms": 1000, "heartbeat_interval_ms": 500,
       "heartbeat_timeout_ms": 5000, "min_clock": 5}
ESC = "\x1b[2J\x1b[H\x1b]0;owned\x07\x9b31m\r\x08\x00"


def page(job=None, nodes=None, **extra):
    doc = {"job": JOB if job is None else job, "nodes": [NODE] if nodes is None else nodes,
           "nodes_not_listed": 0,
           "failures": {"failed_node": None, "reason": "", "malformed_dropped": 0,
                        "registrations_refused": 0, "connections_refused": 0}}
    doc.update(extra)
    return json.dumps(doc).encode()


def node(**changes):
    n = dict(NODE)
    n.update(changes)
    return n


PAGES = {
    "nodes_not_objects": page(nodes=[1, "x", None, [], True, 2.5, node()]),
    "metrics_array": page(nodes=[node(metrics=[1, 2, 3])]),
    "metrics_string": page(nodes=[node(metrics="objective")]),
    "metrics_values": page(nodes=[node(metrics={"a": "x", "b": None, "c": [], "d": 1e308,
                                                "e": -1e308, ESC: 1})]),
    "wrong_types": page(job={k: [] for k in JOB},
                        nodes=[{k: {} for k in NODE}, {k: "7" for k in NODE}],
                        failures={"failed_node": "x", "reason": 5},
                        nodes_not_listed="many"),
    "failures_array": page(failures=[1, 2], nodes_not_listed=-3),
    "huge_numbers": page(nodes=[node(id=2**63 - 1, rank=-2**63, clock=2**64 - 1,
                                     send_bytes_per_s=1e308, recv_bytes_per_s=-1e308,
                                     heartbeat_age_ms=1e300)]),
    "escapes": page(job=dict(JOB, state=ESC, scheduler=ESC * 40),
                    nodes=[node(role=ESC, address=ESC, state="\x1b]2;title\x07")],
                    failures={"failed_node": 1, "reason": ESC, "malformed_dropped": 0,
                              "registrations_refused": 0, "connections_refused": 0}),
    "long_strings": page(nodes=[node(address="a" * 100000, role="r" * 5000,
                                     metrics={"m%d" % i: i for i in range(200)})]),
    "many_nodes": page(nodes=[node(id=i) for i in range(3000)]),
    # Raw bytes json.dumps would escape: a C1 CSI in UTF-8 and a raw escape in a string.
    "raw_utf8_c1": page(job=dict(JOB, state="\u009b2J")).replace(b"\\u009b", b"\xc2\x9b"),
    "raw_escape": page(job=dict(JOB, state="@@")).replace(b"@@", b"\x1b[2J"),
}


def serve_once(answer):
    """A one-shot HTTP server on loopback answering one request with `answer`; its port."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    s.settimeout(WAIT_S)

    def run():
        try:
            c, _ = s.accept()
            c.recv(4096)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Connection: close\r\n\r\n" + answer)
            c.close()
        finally:
            s.close()

    threading.Thread(target=run, daemon=True).start()
    return s.getsockname()[1]


def check(loom, name, body, flags):
    port = serve_once(body)
    r = subprocess.run([loom, "status"] + flags + ["127.0.0.1:%d" % port], capture_output=True,
                       timeout=WAIT_S)
    what = "loom status %s on page %s" % (" ".join(flags), name)
    if r.returncode < 0:
        return "%s: killed by signal %d" % (what, -r.returncode)
    if r.returncode not in (0, 1):
        return "%s: exit %d: %r" % (what, r.returncode, r.stderr[-300:])
    if r.returncode == 1 and (r.stdout or b"not a Loom status page" not in r.stderr):
        return "%s: exit 1 without the reason: %r" % (what, r.stderr[-300:])
    for stream, out in (("stdout", r.stdout), ("stderr", r.stderr)):
        bad = sorted({b for b in out if (b < 0x20 and b not in (0x0A,)) or b >= 0x7F})
        if bad:
            return "%s: control or non-ASCII bytes %s reach the terminal on %s: %r" % (
                what, [hex(b) for b in bad[:8]], stream, out[:300])
        longest = max((len(l) for l in out.split(b"\n")), default=0)
        # --json prints the body as it came (bytes replaced, not cut): no bound on lines.
        if longest > MAX_LINE and "--json" not in flags:
            return "%s: a line of %d bytes on %s" % (what, longest, stream)
    return None


def main():
    if len(sys.argv) != 2:
        print("usage: test_status_hostile.py LOOM", file=sys.stderr)
        return 2
    loom = sys.argv[1]
    failures = []
    for name, body in PAGES.items():
        for flags in ([], ["--json"]):
            problem = check(loom, name, body, flags)
            if problem:
                failures.append(problem)
    # A sane page is still printed whole.
    port = serve_once(page())
    r = subprocess.run([loom, "status", "127.0.0.1:%d" % port], capture_output=True, text=True,
                       timeout=WAIT_S)
    if r.returncode != 0 or "objective 0.25" not in r.stdout or "job running" not in r.stdout:
        failures.append("a sane page: exit %d, %r" % (r.returncode, r.stdout))
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    if not failures:
        print("ok: %d hostile pages, table and --json" % len(PAGES))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
