#!/usr/bin/env python3
"""The scheduler's status page end to end: a real job under `loom run`, read three ways.

    test_status_page.py LOOM PS_CHECK

The job (1 server, 2 workers) runs `ps_check status`: CLOCKS BSP clocks, then each worker
reports objective = 0.25 * (rank + 1) and accuracy = 0.5 + 0.125 * rank, writes its pid and
address files and waits for the test's go-file. Meanwhile:

  - the JSON endpoint must say exactly that: roles, the addresses the nodes wrote, every
    worker's clock and the min clock, staleness 0, the metrics, live heartbeats;
  - /metrics must follow Prometheus's text format (parse_prometheus checks its rules)
    and say the same (job size, min clock, each node's state and traffic, each worker's
    clock, staleness and metrics), and answer only with the token;
  - `loom status ADDRESS` must print one line per node that agrees with the JSON, and fail
    with a clear message for an address nobody listens on, for an answer that is not HTTP
    and for an HTTP answer that is not the page's JSON;
  - headless Chromium must render the page: its DOM (--dump-dom) holds the same facts, and
    its screenshot (--screenshot) is not blank and shows the title bar in its colour
    (#1f5fa8) across the top, with no failure banner (#c0262d).

Then the job must end with status 0 once let go, and a job run with --no-status must print
no status page line. Without a chromium binary the test skips (exit 77) with a message; CI
installs Debian's chromium (scripts/install-deps.sh), so it runs there.
"""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib

CLOCKS = 4
WAIT_S = 60  # upper bound of anything that should happen promptly
BAR = (0x1F, 0x5F, 0xA8)
FAILURE = (0xC0, 0x26, 0x2D)


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def wait_for(what, predicate, timeout=WAIT_S):
    """Poll predicate (bounded) until it returns something true; fail with `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            fail("%s within %d s" % (what, timeout))
        time.sleep(0.05)


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read()


def read_png(path):
    """Width, height and rows of RGB(A) pixel tuples of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG" % path)
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour not in (2, 6):
                fail("screenshot PNG has depth %d colour type %d" % (depth, colour))
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return width, height, rows


class Job:
    """`loom run` in its own process group, its output collected in a file."""

    def __init__(self, args, work, name):
        self.out_path = os.path.join(work, name + ".out")
        self.out = open(self.out_path, "w")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    def output(self):
        with open(self.out_path) as f:
            return f.read()

    def wait(self):
        try:
            return self.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            fail("the job did not end within %d s:\n%s" % (WAIT_S, self.output()))

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def check_json(doc, addrs):
    job, nodes = doc["job"], doc["nodes"]
    if job["state"] != "running" or job["servers"] != 1 or job["workers"] != 2:
        fail("job summary: %r" % job)
    if job["min_clock"] != CLOCKS:
        fail("min clock %r, want %d" % (job["min_clock"], CLOCKS))
    want = [("scheduler", 0), ("server", 0), ("worker", 0), ("worker", 1)]
    if [(n["role"], n["rank"]) for n in nodes] != want:
        fail("nodes: %r" % nodes)
    for n in nodes:
        role, rank = n["role"], n["rank"]
        if n["address"] != addrs["%s-%d" % (role, rank)]:
            fail("%s %d at %s, but it listens on %s" % (role, rank, n["address"],
                                                          addrs["%s-%d" % (role, rank)]))
        if n["state"] != "running":
            fail("%s %d is %s" % (role, rank, n["state"]))
        if role == "scheduler":
            continue
        if not 0 < n["dead_in_ms"] <= job["heartbeat_timeout_ms"]:
            fail("%s %d: dead in %r ms" % (role, rank, n["dead_in_ms"]))
        if n["bytes_sent"] <= 0 or n["bytes_received"] <= 0:
            fail("%s %d reported no traffic: %r" % (role, rank, n))
        if role == "worker":
            if n["clock"] != CLOCKS or n["staleness"] != 0:
                fail("worker %d: clock %r staleness %r" % (rank, n["clock"], n["staleness"]))
            if n["metrics"] != {"objective": 0.25 * (rank + 1), "accuracy": 0.5 + 0.125 * rank}:
                fail("worker %d metrics %r" % (rank, n["metrics"]))
    if doc["failures"]["failed_node"] is not None or doc["failures"]["malformed_dropped"]:
        fail("failures: %r" % doc["failures"])


PROM_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
PROM_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?[0-9]+)?$")
PROM_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse_prometheus(text):
    """Prometheus's text exposition format (0.0.4), checked by its rules: every line a
    HELP or TYPE comment or a sample; a family's HELP and TYPE at most once each, before
    its samples, its samples together; valid metric and label names, label values with
    only \\, \" and \n escaped, no label twice in a sample and no sample twice, a float
    value; counters' names end in _total. Returns {(name, frozenset(labels)): value}."""
    if not text.endswith("\n"):
        fail("/metrics does not end with a newline")
    types, helps, samples, done, current = {}, set(), {}, set(), None
    for number, line in enumerate(text[:-1].split("\n"), 1):
        where = "/metrics line %d %r" % (number, line)
        if line.startswith("# "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or parts[1] not in ("HELP", "TYPE") or \
                    not PROM_NAME.match(parts[2]):
                fail(where + ": not a HELP or TYPE line")
            name = parts[2]
            if name in done or (parts[1] == "HELP" and name in helps) or \
                    (parts[1] == "TYPE" and name in types):
                fail(where + ": family %s described again or after its samples" % name)
            if parts[1] == "TYPE":
                if parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                    fail(where + ": unknown type")
                if parts[3] == "counter" and not name.endswith("_total"):
                    fail(where + ": a counter's name must end in _total")
                types[name] = parts[3]
            else:
                helps.add(name)
            if current and current != name:
                done.add(current)
            current = name
            continue
        m = PROM_SAMPLE.match(line)
        if not m:
            fail(where + ": not a sample")
        name, labels_text, value = m.group(1), m.group(3), m.group(4)
        if name not in types:
            fail(where + ": a sample before its family's TYPE")
        if name in done or (current and current != name):
            fail(where + ": family %s's samples are not together" % name)
        current = name
        labels = {}
        rest = labels_text or ""
        while rest:
            lm = PROM_LABEL.match(rest)
            if not lm or lm.group(1) in labels:
                fail(where + ": bad or repeated label at %r" % rest)
            labels[lm.group(1)] = lm.group(2).replace("\\n", "\n").replace('\\"', '"') \
                .replace("\\\\", "\\")
            rest = rest[lm.end():]
        try:
            number_value = float(value)
        except ValueError:
            fail(where + ": value %r is not a float" % value)
        key = (name, frozenset(labels.items()))
        if key in samples:
            fail(where + ": the same sample twice")
        samples[key] = number_value
    return samples


def check_prometheus(address, token, doc):
    """GET /metrics: the format's rules, and the facts of the JSON document."""
    status, ctype, body = get("http://%s/metrics?token=%s" % (address, token))
    if status != 200 or not ctype.startswith("text/plain; version=0.0.4"):
        fail("GET /metrics: %d %s" % (status, ctype))
    samples = parse_prometheus(body.decode("utf-8"))

    def value(name, **labels):
        key = (name, frozenset((k, str(v)) for k, v in labels.items()))
        if key not in samples:
            fail("/metrics has no %s%r" % (name, labels))
        return samples[key]

    job = doc["job"]
    for name, want in (("loom_job_servers", 1), ("loom_job_workers", 2),
                       ("loom_job_min_clock", CLOCKS), ("loom_job_failed", 0)):
        if value(name) != want:
            fail("/metrics %s = %r, the job has %r" % (name, value(name), want))
    value("loom_job_info", state=job["state"], scheduler=job["scheduler"])
    for n in doc["nodes"]:
        who = dict(node=n["id"], role=n["role"], rank=n["rank"])
        value("loom_node_state", state=n["state"], **who)
        if value("loom_node_sent_bytes_total", **who) < (n["bytes_sent"] if n["id"] else 0):
            fail("/metrics: node %d sent fewer bytes than the JSON said before" % n["id"])
        if n["role"] == "worker":
            if value("loom_worker_clock", **who) != CLOCKS or \
                    value("loom_worker_staleness", **who) != 0:
                fail("/metrics: worker %d clock or staleness" % n["rank"])
            for metric, v in n["metrics"].items():
                if value("loom_worker_metric", metric=metric, **who) != v:
                    fail("/metrics: worker %d %s" % (n["rank"], metric))
    if raw_get(address, "/metrics", address) != 403:
        fail("/metrics answered without the token")


def check_loom_status(loom, address, doc):
    r = subprocess.run([loom, "status", address], capture_output=True, text=True, timeout=WAIT_S)
    if r.returncode != 0:
        fail("loom status exited %d: %s" % (r.returncode, r.stderr))
    lines = r.stdout.splitlines()
    if not lines[0].startswith("job running  scheduler %s  1 server(s)  2 worker(s), 0 done  "
                               "min clock %d" % (doc["job"]["scheduler"], CLOCKS)):
        fail("loom status summary: %r" % lines[0])
    for n in doc["nodes"]:
        mine = [l for l in lines if re.match(r"\s*%d %s %d\s" % (n["id"], n["role"], n["rank"]), l)]
        if len(mine) != 1:
            fail("loom status has no line for node %d:\n%s" % (n["id"], r.stdout))
        f = mine[0].split()
        if f[3] != n["address"] or f[4] != n["state"]:
            fail("loom status line %r disagrees with %r" % (mine[0], n))
        if n["role"] == "worker":
            if f[5] != str(n["clock"]) or f[6] != str(n["staleness"]):
                fail("loom status clock/staleness %r disagree with %r" % (mine[0], n))
            for name, value in n["metrics"].items():
                if " %s %s" % (name, repr(value)) not in mine[0]:
                    fail("loom status line %r lacks %s %r" % (mine[0], name, value))
    if "no node failed" not in r.stdout:
        fail("loom status failures: %r" % r.stdout)
    r = subprocess.run([loom, "status", "--json", address], capture_output=True,
                       text=True, timeout=WAIT_S)
    if r.returncode != 0 or [n["address"] for n in json.loads(r.stdout)["nodes"]] != \
            [n["address"] for n in doc["nodes"]]:
        fail("loom status --json: %d %r" % (r.returncode, r.stdout[:200]))


def raw_get(address, target, host):
    """GET target with this Host header; the status code."""
    h, p = address.rsplit(":", 1)
    with socket.create_connection((h, int(p)), timeout=WAIT_S) as c:
        c.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" %
                   (target, host)).encode())
        data = b""
        while True:
            got = c.recv(65536)
            if not got:
                break
            data += got
    return int(data.split(b" ", 2)[1])


def check_access(loom, address, token):
    """The job has a secret (loom run's throw-away one): its page answers only with the
    token, and only to its own names (no DNS rebinding); `loom status` says what is
    missing."""
    cases = [("/status.json", address, 403), ("/?token=" + "0" * 32, address, 403),
             ("/status.json?token=" + token, "attacker.example:" + address.split(":")[1], 403),
             ("/status.json?token=" + token, "localhost:" + address.split(":")[1], 200),
             ("/?token=" + token, address, 200)]
    for target, host, want in cases:
        got = raw_get(address, target, host)
        if got != want:
            fail("GET %s with Host %s: %d, want %d" % (target, host, got, want))
    r = subprocess.run([loom, "status", address], capture_output=True, text=True,
                       timeout=WAIT_S)
    if r.returncode != 1 or "give the whole URL" not in r.stderr:
        fail("loom status without the token: exit %d, %r" % (r.returncode, r.stderr))


def serve_once(answer):
    """A one-shot TCP server on loopback answering any request with `answer`; its port."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)

    def run():
        c, _ = s.accept()
        c.recv(4096)
        c.sendall(answer)
        c.close()
        s.close()

    threading.Thread(target=run, daemon=True).start()
    return s.getsockname()[1]


def check_loom_status_errors(loom):
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    cases = [
        ("127.0.0.1:%d" % port, "cannot connect to 127.0.0.1:%d" % port),
        ("127.0.0.1:%d" % serve_once(b"SSH-2.0-OpenSSH\r\n"), "did not answer with HTTP"),
        ("127.0.0.1:%d" % serve_once(b"HTTP/1.1 200 OK\r\n\r\n{\"job\": 1}"),
         "is not a Loom status page"),
        ("127.0.0.1:%d" % serve_once(b"HTTP/1.1 503 Busy\r\n\r\n"), "answered HTTP 503"),
    ]
    for address, message in cases:
        r = subprocess.run([loom, "status", "--timeout", "10", address], capture_output=True,
                           text=True, timeout=WAIT_S)
        if r.returncode != 1 or message not in r.stderr or r.stdout:
            fail("loom status %s: exit %d, %r; want exit 1 and %r" % (address, r.returncode,
                                                                       r.stderr, message))
    r = subprocess.run([loom, "status", "nonsense"], capture_output=True, text=True)
    if r.returncode != 2 or "not host:port" not in r.stderr:
        fail("loom status nonsense: exit %d, %r" % (r.returncode, r.stderr))


def chromium(binary, work, *args):
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--user-data-dir=" + os.path.join(work, "chromium")] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return r.stdout


def check_browser(binary, work, url, doc):
    dom = chromium(binary, work, "--dump-dom", url)
    text = re.sub(r"<[^>]*>", " ", dom)
    for fact in ["Loom job: running", "min clock %d" % CLOCKS, "objective 0.25",
                 "accuracy 0.625", "worker 1", "server 0"] + [n["address"] for n in doc["nodes"]]:
        if fact not in text:
            fail("the page in Chromium lacks %r:\n%s" % (fact, text[:3000]))
    shot = os.path.join(work, "page.png")
    chromium(binary, work, "--hide-scrollbars", "--force-color-profile=srgb",
             "--window-size=1000,600", "--screenshot=" + shot, url)
    width, height, rows = read_png(shot)
    if (width, height) != (1000, 600):
        fail("screenshot is %dx%d" % (width, height))
    colours = set()
    for row in rows[::10]:
        colours.update(row[::10])
    if len(colours) < 5:
        fail("screenshot is blank: %d colours" % len(colours))
    # The title bar: its colour across the whole top rows, nowhere a failure banner.
    bar_rows = sum(1 for row in rows[:60] if row.count(BAR) > 0.9 * width)
    if bar_rows < 20:
        fail("screenshot: the title bar (#1f5fa8) fills only %d of the top rows" % bar_rows)
    if any(FAILURE in row for row in rows):
        fail("screenshot shows a failure banner")
    # Dark text (the table) below the bar.
    if sum(1 for row in rows[60:] for p in row if max(p) < 80) < 500:
        fail("screenshot shows no text below the title bar")


def main():
    if len(sys.argv) != 3:
        print("usage: test_status_page.py LOOM PS_CHECK", file=sys.stderr)
        return 2
    loom, ps_check = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="loom-status.")
    jobs = []
    try:
        pids = os.path.join(work, "pids")
        os.mkdir(pids)
        go = os.path.join(work, "go")
        job = Job([loom, "run", "--bind", "0.0.0.0", "--servers", "1", "--workers", "2", "--",
                   ps_check, "status",
                   "--clocks", str(CLOCKS), "--pid-dir", pids, "--hold", go], work, "job")
        jobs.append(job)
        line = wait_for("a status page line in the job's output",
                        lambda: re.search(r"status page at http://([0-9.]+:[0-9]+)/"
                                          r"\?token=([0-9a-f]{32}) ", job.output()))
        address, token = line.group(1), line.group(2)
        # `--bind 0.0.0.0` puts the job on every interface, but not its page.
        if not address.startswith("127.0.0.1:"):
            fail("the status page is not on loopback: %s" % address)
        first = job.output().splitlines()[0]
        if "status page at" not in first:
            fail("the status page line is not the first of the output: %r" % first)
        names = ["scheduler-0", "server-0", "worker-0", "worker-1"]
        wait_for("pid files of the whole job (workers write theirs after their metrics)",
                 lambda: all(os.path.exists(os.path.join(pids, n + ".pid")) for n in names))
        addrs = {n: open(os.path.join(pids, n + ".addr")).read().strip() for n in names}

        def metrics_arrived():
            status, ctype, body = get("http://%s/status.json?token=%s" % (address, token))
            if status != 200 or ctype != "application/json":
                fail("GET /status.json: %d %s" % (status, ctype))
            doc = json.loads(body)
            # Traffic counts come with each node's next heartbeat, metrics when a worker
            # reports them: the page has caught up once every node has both.
            caught_up = all(n["metrics"] for n in doc["nodes"][2:]) and \
                all(n["bytes_sent"] > 0 and n["bytes_received"] > 0 for n in doc["nodes"][1:])
            return doc if caught_up else None

        doc = wait_for("the workers' metrics and every node's traffic on the page",
                       metrics_arrived)
        check_json(doc, addrs)
        check_prometheus(address, token, doc)
        check_access(loom, address, token)
        check_loom_status(loom, "http://%s/?token=%s" % (address, token), doc)
        check_loom_status_errors(loom)

        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        if browser:
            check_browser(browser, work, "http://%s/?token=%s" % (address, token), doc)

        open(go, "w").close()
        rc = job.wait()
        if rc != 0:
            fail("the job ended with status %d:\n%s" % (rc, job.output()))

        quiet = Job([loom, "run", "--no-status", "--workers", "1", "--", ps_check, "bsp",
                     "--clocks", "2"], work, "no-status")
        jobs.append(quiet)
        if quiet.wait() != 0 or "status page" in quiet.output():
            fail("--no-status: %r" % quiet.output())
        if not browser:
            print("skipped: no chromium on PATH (scripts/install-deps.sh installs Debian's "
                  "chromium); every check but the browser's passed")
            return 77
        print("ok: JSON, loom status, Chromium DOM and screenshot agree; job ended cleanly")
        return 0
    finally:
        for j in jobs:
            j.kill()
        if os.environ.get("KEEP"):
            print("kept " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
