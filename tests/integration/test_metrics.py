# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""memtrail watch --metrics: a real Prometheus server (Debian's) scrapes it on
loopback while a workload holds memory in a kubelet-shaped cgroup and another
is OOM-killed; PromQL through Prometheus' HTTP API against the workload's own
ledger and the cgroup's files. The page itself against the text format's
rules; series of an ended process expire; bad addresses fail on one line."""

import ctypes
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
import urllib.parse
import urllib.request

from harness import (MiB, check, check_eq, check_within, in_cgroup, kubelet_memcg, new_pod_ids,
                     no_programs_left, one_line_error, remove_tree, run, tmpdir, workload,
                     MEMTRAIL)
from test_devices import LIBCUDA, mapping
from test_watch import LIMIT, Watch, pods_dir, wait_files

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


class Prometheus:
    """A Prometheus server of its own (temporary storage), scraping TARGET every second."""

    def __init__(self, target):
        check(os.path.exists(PROMETHEUS), f"{PROMETHEUS} is missing (Debian's prometheus)")
        d = tmpdir()
        cfg = os.path.join(d, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: memtrail\n"
                    f"    static_configs:\n      - targets: ['{target}']\n")
        self.port = free_port()
        self.log = open(os.path.join(d, "prometheus.log"), "w")
        self.proc = subprocess.Popen([PROMETHEUS, f"--config.file={cfg}",
                                      f"--storage.tsdb.path={os.path.join(d, 'data')}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            check(self.proc.poll() is None, f"prometheus exited: see {self.log.name}")
            try:
                if get(f"http://127.0.0.1:{self.port}/-/ready")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise AssertionError("prometheus did not become ready in 60 s")

    def query(self, promql):
        """The value of an instant query with one result, or None when it has none."""
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?" +
               urllib.parse.urlencode({"query": promql}))
        body = json.loads(get(url)[2])
        check_eq(body["status"], "success", f"query {promql}")
        res = body["data"]["result"]
        check(len(res) <= 1, f"query {promql}: one series at most, got {res}")
        return float(res[0]["value"][1]) if res else None

    def wait_value(self, promql, want, timeout=20):
        deadline, got = time.time() + timeout, None
        while time.time() < deadline:
            got = self.query(promql)
            if got == want:
                return got
            time.sleep(0.5)
        raise AssertionError(f"{promql}: got {got}, want {want} within {timeout} s")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def start_holder(path, phase, mib):
    """holder in cgroup PATH: enters PHASE, maps and touches MIB MiB, prints its ledger."""
    h = subprocess.Popen(in_cgroup(path, [workload("holder"), phase, str(mib)]),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    h.stdin.write("g")
    h.stdin.flush()
    return h, json.loads(h.stdout.readline())


def test_prometheus_scrapes_peaks_and_oom_verdicts():
    """Prometheus scrapes watch: the holder's peak bytes by pod and container
    label equal its own ledger (mapped: VmData; rss_anon within 2%), its phase
    is named, and an OOM kill in the same pod moves the verdict counter for
    cause oom_cgroup from 0 to 1, as the cgroup's oom_kill count does."""
    ids = new_pod_ids()
    path, rel, limit, uid, cid = kubelet_memcg(LIMIT, ids)
    port = free_port()
    # the test's own cgroup only: OOM kills elsewhere on the node do not count
    w = Watch(["--pods-dir", pods_dir(ids[0]), "--metrics", f"127.0.0.1:{port}", "-c", path])
    prom = holder = None
    try:
        prom = Prometheus(f"127.0.0.1:{port}")
        holder, data = start_holder(path, "serve", 24)
        who = f'pod="serving/llama-7b",container="model-server",pid="{data["pid"]}"'
        prom.wait_value(f'memtrail_target_phase{{{who},phase="serve"}}', 1)
        mapped = prom.query(f'memtrail_peak_bytes{{{who},kind="mapped"}}')
        check(mapped is not None, "the holder's mapped peak is scraped")
        check_within(mapped, data["vm_data"], 2, "peak mapped bytes against VmData")
        check(mapped >= data["held"], f"peak mapped {mapped} holds the {data['held']} bytes")
        anon = prom.query(f'memtrail_peak_bytes{{{who},kind="rss_anon"}}')
        check_within(anon, data["rss_anon"], 2, "peak rss_anon against RssAnon")
        prom.wait_value('memtrail_verdicts_total{cause="oom_cgroup"}', 0)
        holder.stdin.close()	# its 24 MiB go: the hog gets the whole limit
        holder.wait(timeout=30)
        p = subprocess.run(in_cgroup(path, [workload("hog")]), capture_output=True, timeout=60)
        check_eq(p.returncode, -signal.SIGKILL, "the hog's end")
        with open(os.path.join(path, "memory.oom_control")) as f:
            kills = int(f.read().split("oom_kill ")[1].split()[0])
        check_eq(kills, 1, "the cgroup's oom_kill count")
        files = wait_files(w.dir, "verdict-*.json", 1)
        check_eq(len(files), 1, "one verdict file")
        with open(files[0]) as f:
            verdict = json.load(f)
        check_eq(verdict["verdict"]["cause"], "oom_cgroup", "the verdict file's cause")
        prom.wait_value('memtrail_verdicts_total{cause="oom_cgroup"}', kills)
        prom.wait_value("memtrail_oom_kills_total", kills)
        prom.wait_value('memtrail_snapshots_total{trigger="oom"}', kills)
        check_eq(prom.query('up{job="memtrail"}'), 1, "the scrape target is up")
    finally:
        if holder and holder.poll() is None:
            holder.kill()
            holder.wait()
        if prom:
            prom.stop()
        rc, out, err = w.stop()
        remove_tree(path)
    check_eq(rc, 0, f"watch's status ({err!r})")
    no_programs_left()


class DirOpens:
    """Opens of directory PATH itself from now on, as inotify counts them
    (IN_OPEN, no name): how often a program read it, whatever it took."""
    IN_OPEN, IN_NONBLOCK = 0x20, 0o4000

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(self.IN_NONBLOCK)
        check(self.fd >= 0, f"inotify_init1: errno {ctypes.get_errno()}")
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), self.IN_OPEN)
        check(wd >= 0, f"inotify_add_watch: errno {ctypes.get_errno()}")
        self.count = 0

    def read(self):
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.count
            off = 0
            while off < len(buf):
                _, mask, _, n = struct.unpack_from("iIII", buf, off)
                self.count += n == 0 and bool(mask & self.IN_OPEN)
                off += 16 + n

    def close(self):
        os.close(self.fd)


def test_metrics_read_pods_dir_once_per_pod():
    """Processes born, exec'ing and ending in one pod are labelled with its
    names, read from --pods-dir once for the pod, not once per process (a
    node's log directory can hold 100k entries): inotify counts the
    directory's opens."""
    ids = new_pod_ids()
    path, rel, limit, uid, cid = kubelet_memcg(LIMIT, ids)
    pods = pods_dir(ids[0])
    for i in range(2000):      # other pods of the node
        os.mkdir(os.path.join(pods, f"ns{i}_pod{i}_{new_pod_ids()[0]}"))
    port = free_port()
    w = Watch(["--pods-dir", pods, "--metrics", f"127.0.0.1:{port}", "--metrics-expire", "120",
               "-c", path, "-i", "200"])
    opens = None
    try:
        opens = DirOpens(pods)
        p = subprocess.run(in_cgroup(path, ["sh", "-c", "for i in $(seq 40); do /bin/true; done;"
                                            " echo $$"]), capture_output=True, text=True,
                           timeout=60)
        check_eq(p.returncode, 0, f"the workload's status ({p.stderr!r})")
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.time() + 20
        while True:
            series = parse_page(get(url)[2])
            pids = {dict(ls).get("pid"): dict(ls) for (n, ls) in series
                    if n == "memtrail_peak_bytes"}
            if len(pids) >= 41 or time.time() > deadline:
                break
            time.sleep(0.2)
        check(len(pids) >= 41, f"the shell and its 40 children exported: {sorted(pids)}")
        check(p.stdout.strip() in pids, f"the shell {p.stdout.strip()} among {sorted(pids)}")
        for pid, ls in pids.items():
            check_eq((ls.get("pod"), ls.get("container")), ("serving/llama-7b", "model-server"),
                     f"pid {pid}'s pod and container ({ls})")
        n = opens.read()
        check(1 <= n <= 2, f"--pods-dir read {n} times for 41 processes of one pod")
    finally:
        if opens:
            opens.close()
        rc, out, err = w.stop()
        remove_tree(path)
    check_eq(rc, 0, f"watch's status ({err!r})")
    no_programs_left()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (-?[0-9.e+]+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"(,|$)')


def parse_page(text):
    """The exposition format's rules, checked line by line: every sample's
    family has HELP and TYPE before it, label values are escaped, no series
    appears twice. {(name, frozenset(labels)): value}."""
    typed, helped, series = {}, set(), {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            check(kind in ("gauge", "counter"), f"type of {name}: {kind}")
            check(name not in typed, f"{name} typed twice")
            typed[name] = kind
            continue
        m = SAMPLE.match(line)
        check(m, f"not a sample line: {line!r}")
        name, labels = m.group(1), {}
        check(name in typed and name in helped, f"{name} has no TYPE or HELP before it")
        rest = m.group(3) or ""
        while rest:
            lm = LABEL.match(rest)
            check(lm, f"bad labels in {line!r}")
            labels[lm.group(1)] = lm.group(2)
            rest = rest[lm.end():]
        key = (name, frozenset(labels.items()))
        check(key not in series, f"series twice: {line!r}")
        series[key] = float(m.group(4))
        if typed[name] == "counter":
            check(name.endswith("_total"), f"counter {name} ends in _total")
    return series


def value(series, name, **labels):
    got = [v for (n, ls), v in series.items() if n == name and
           all((k, str(x)) in ls for k, x in labels.items())]
    return got[0] if len(got) == 1 else None


def test_metrics_device_memory():
    """The size of each device the CUDA runtime reported to a live process
    (the stand-in's cuMemGetInfo_v2 and cuDeviceTotalMem_v2 answers, as the
    workload printed them), by kind and device. The process maps its runtime
    before watch starts (a pod older than the DaemonSet's watch): probed at
    watch's start, before the calls."""
    port = free_port()
    h = subprocess.Popen([workload("cuda_phases"), "--wait", "--hold"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    w = None
    try:
        mapping(h.pid, LIBCUDA)
        w = Watch(["--metrics", f"127.0.0.1:{port}", "-i", "200"])
        h.stdin.write("g")
        h.stdin.flush()
        data = json.loads(h.stdout.readline())
        want = {str(d["device"]): d["bytes"] for d in data["device_totals"]}
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.time() + 10
        while True:
            series = parse_page(get(url)[2])
            got = {d: value(series, "memtrail_device_memory_bytes", pid=data["pid"],
                            kind="cuda_device", device=d) for d in want}
            if got == want or time.time() > deadline:
                break
            time.sleep(0.3)
        check_eq(got, want, "device memory by device vs what the runtime returned")
    finally:
        if h.poll() is None:
            h.stdin.close()
            h.wait(timeout=30)
        rc, out, err = w.stop() if w else (0, "", "")
    check_eq(rc, 0, f"watch's status ({err!r})")
    no_programs_left()


def test_metrics_page_format_and_expiry():
    """GET /metrics follows the text format; a process whose comm holds a
    quote, a backslash, an escape and a byte that is not UTF-8 is labelled
    escaped (the last two as the text \\xNN); its series outlive it by
    --metrics-expire and are gone after; other paths are 404."""
    port = free_port()
    w = Watch(["--metrics", f"127.0.0.1:{port}", "--metrics-expire", "3", "-i", "200"])
    d = tmpdir()
    odd = os.path.join(d, os.fsdecode(b'ho"l\\der\x1b\xff'))
    os.symlink(workload("holder"), odd)
    h = None
    try:
        h = subprocess.Popen([odd, "keep", "8"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        h.stdin.write("g")
        h.stdin.flush()
        data = json.loads(h.stdout.readline())
        pid = data["pid"]
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.time() + 10
        while True:
            status, ctype, text = get(url)
            series = parse_page(text)
            # the page is a sample's (every 200 ms): the phase begins before
            # the holder's memory is touched, so a page may show it first
            rss = value(series, "memtrail_bytes", pid=pid, kind="rss_anon") or 0
            if (value(series, "memtrail_target_phase", pid=pid, phase="keep") == 1 and
                    rss >= data["rss_anon"] * 0.98) or time.time() > deadline:
                break
            time.sleep(0.3)
        check_eq(status, 200, "status")
        check(ctype.startswith("text/plain; version=0.0.4"), f"content type {ctype}")
        check_eq(value(series, "memtrail_target_phase", pid=pid, phase="keep"), 1,
                 "the holder's phase")
        check('comm="ho\\"l\\\\der\\\\x1b\\\\xff"' in text,
              "comm escaped as the format wants, no control or invalid byte in the page")
        check(not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text), "no control in the page")
        check_within(value(series, "memtrail_bytes", pid=pid, kind="rss_anon"),
                     data["rss_anon"], 2, "rss_anon now against RssAnon")
        check_eq(value(series, "memtrail_targets") >= 1, True, "targets counted")
        check(value(series, "process_resident_memory_bytes") > 0, "memtrail's own memory")
        h.stdin.close()
        h.wait(timeout=30)
        ended = time.time()
        time.sleep(1)
        series = parse_page(get(url)[2])
        check(value(series, "memtrail_peak_bytes", pid=pid, kind="rss_anon") is not None,
              "an ended process's series stay a while")
        check(value(series, "memtrail_target_phase", pid=pid, phase="keep") is None,
              "but it is no longer a live target")
        time.sleep(max(0, ended + 3 + 1.5 - time.time()))
        series = parse_page(get(url)[2])
        check(value(series, "memtrail_peak_bytes", pid=pid, kind="rss_anon") is None,
              "its series expired after --metrics-expire")
        try:
            get(f"http://127.0.0.1:{port}/other")
            check(False, "another path answered")
        except urllib.error.HTTPError as e:
            check_eq(e.code, 404, "another path")
    finally:
        if h and h.poll() is None:
            h.kill()
            h.wait()
        rc, out, err = w.stop()
    check_eq(rc, 0, f"watch's status ({err!r})")
    no_programs_left()


def test_metrics_bad_address_and_port_in_use():
    d = tmpdir()
    for bad in ("foo:bar", "70000", "127.0.0.1:", "[::1"):
        one_line_error(run([MEMTRAIL, "watch", "-o", d, "--metrics", bad]), "--metrics", bad)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        one_line_error(run([MEMTRAIL, "watch", "-o", d, "--metrics", str(port)]),
                       "cannot listen", "Address already in use")
    no_programs_left()
