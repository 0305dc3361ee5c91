# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""report's exporters checked by the clients their users open them with: the
Perfetto/Chrome trace against the Trace Event format's rules and the trail's
own samples; the HTML page in headless Chromium driven over the DevTools
protocol (no console error, no request, drawn series and phase bands equal
to the trail's)."""

import base64
import fcntl
import glob
import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import time

from harness import (MEMTRAIL, ROOT, Background, TestFailure, check, check_eq, in_cgroup, kubelet_memcg, load_trail,
                     one_line_error, record, remove_tree, run, tmpdir, workload)
from test_unwind import torch_deep_heap

MiB = 1024 * 1024
_recorded = {}


def phases_trail():
    """A real recording of the phases workload (four marked phases, an exit)."""
    if "phases" not in _recorded:
        out = os.path.join(tmpdir(), "trail.json")
        p = run([MEMTRAIL, "record", "-q", "-o", out, "--", workload("phases"), "--marker"])
        check_eq(p.returncode, 0, f"record status ({p.stderr!r})")
        _recorded["phases"] = out
    return _recorded["phases"]


def oom_trail():
    """hog killed by the kernel OOM killer in a 64 MiB memory cgroup."""
    if "oom" not in _recorded:
        path, _, limit, _, _ = kubelet_memcg(64 * MiB)
        try:
            p, trail, _ = record(in_cgroup(path, [workload("hog")]))
        finally:
            remove_tree(path)
        check_eq(p.returncode, 137, f"record status ({p.stderr!r})")
        out = os.path.join(tmpdir(), "oom.json")
        with open(out, "w") as f:
            json.dump(trail, f)
        _recorded["oom"] = (out, limit)
    return _recorded["oom"]


# ---- Perfetto / Chrome Trace Event format ----

def perfetto(trail_path):
    out = os.path.join(tmpdir(), "trace.json")
    p = run([MEMTRAIL, "report", trail_path, "--perfetto", out])
    check_eq(p.returncode, 0, f"report --perfetto status ({p.stderr!r})")
    check(f"perfetto trace written to '{out}'" in p.stderr, f"no log line: {p.stderr!r}")
    with open(out) as f:
        return json.load(f)


def check_trace_rules(doc):
    """The Trace Event format's rules for the phase letters memtrail writes."""
    check(isinstance(doc, dict), "the trace is not a JSON object")
    check(doc.get("displayTimeUnit") in ("ms", "ns"), "displayTimeUnit")
    events = doc["traceEvents"]
    check(isinstance(events, list) and events, "traceEvents is an empty list")
    named = set()
    for e in events:
        ph = e.get("ph")
        check(ph in ("M", "C", "X", "i"), f"phase letter {ph!r} in {e}")
        check(isinstance(e.get("name"), str) and e["name"], f"no name: {e}")
        check(isinstance(e.get("pid"), int), f"no integer pid: {e}")
        if ph != "M":
            check(isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, f"no ts: {e}")
        if ph == "M":
            check(e["name"] in ("process_name", "thread_name"), f"metadata {e['name']}")
            check(isinstance(e["args"].get("name"), str), f"metadata without args.name: {e}")
            if e["name"] == "process_name":
                named.add(e["pid"])
        elif ph == "C":
            check(e["args"] and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                    for v in e["args"].values()), f"counter args: {e}")
        elif ph == "X":
            check(isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, f"X dur: {e}")
        elif ph == "i":
            check(e.get("s") in ("g", "p", "t"), f"instant scope: {e}")
    used = {e["pid"] for e in events if e["ph"] != "M" and not (e["ph"] == "i" and e["s"] == "g")}
    check(used <= named, f"pids without a process_name: {used - named}")
    return events


def check_against_trail(events, trail):
    """Counters equal the trail's timeline samples; phases and events all there."""
    for t in trail["targets"]:
        pid = t["pid"]
        for kind in trail["kinds"]:
            got = [(e["ts"], e["args"]["bytes"]) for e in events
                   if e["ph"] == "C" and e["pid"] == pid and e["name"] == kind]
            want = [(s["t_ms"] * 1000, s[kind]) for s in t.get("timeline", [])]
            check_eq(got, want, f"counter track {pid}/{kind}")
        got = [(e["name"], e["ts"], e["dur"]) for e in events if e["ph"] == "X" and e["pid"] == pid]
        want = [(p["name"], p["start"] * 1000, max(p["end"] - p["start"], 0) * 1000)
                for p in t["phases"]]
        check_eq(got, want, f"phase slices of {pid}")
        names = [e["args"]["name"] for e in events
                 if e["ph"] == "M" and e["pid"] == pid and e["name"] == "process_name"]
        check_eq(names, [f"{t['comm']} ({pid})"], "process name")
        if t.get("verdict"):
            v = [e for e in events if e["ph"] == "i" and e["pid"] == pid and e["cat"] == "verdict"]
            check_eq([e["args"] for e in v], [t["verdict"]], "verdict instant")
    got = [e["args"] for e in events if e["ph"] == "i" and e["cat"] == "event"]
    check_eq(got, trail.get("events", []), "events as instants")


def test_perfetto_phases():
    path = phases_trail()
    trail = load_trail(path)
    events = check_trace_rules(perfetto(path))
    check_against_trail(events, trail)
    t = trail["targets"][0]
    check([p["name"] for p in t["phases"]][-4:] == ["load", "warmup", "serve", "shrink"],
          f"the workload's phases: {t['phases']}")
    check(sum(1 for e in events if e["ph"] == "C") > 0, "no counter samples")


def test_perfetto_oom():
    path, limit = oom_trail()
    trail = load_trail(path)
    events = check_trace_rules(perfetto(path))
    check_against_trail(events, trail)
    v = [e for e in events if e["ph"] == "i" and e.get("cat") == "verdict"]
    check_eq(len(v), 1, "one verdict instant")
    check_eq(v[0]["args"]["limit"], limit, "the verdict's limit vs memory.limit_in_bytes")
    check(any(e["ph"] == "i" and e["name"] == "exit" for e in events), "no exit instant")


# ---- bad input ----

def test_report_exporters_bad_input():
    d = tmpdir()
    good = phases_trail()
    for opt in ("--perfetto", "--html"):
        out = os.path.join(d, "out")
        p = run([MEMTRAIL, "report", os.path.join(d, "missing.json"), opt, out])
        one_line_error(p, "missing.json", "No such file")
        check(not os.path.exists(out), "output written for a missing trail")
        bad = os.path.join(d, "bad.json")
        with open(bad, "w") as f:
            f.write('{"memtrail": 1, "targets": [{"pid": 1, "exit": null, "kinds": {"nope"')
        one_line_error(run([MEMTRAIL, "report", bad, opt, out]), "malformed JSON")
        with open(bad, "w") as f:
            f.write('{"memtrail": 1, "targets": "none"}')
        one_line_error(run([MEMTRAIL, "report", bad, opt, out]), "targets: not an array")
        # root passes directory permissions: a path under a regular file fails for everyone
        p = run([MEMTRAIL, "report", good, opt, os.path.join(good, "out")])
        check(p.returncode != 0, f"{opt} to an unwritable path succeeded")
        errs = [l for l in p.stderr.splitlines() if "error" in l]
        check_eq(len(errs), 1, f"one error line for {opt}: {p.stderr!r}")
        check("Not a directory" in errs[0], f"the reason spelled out: {errs[0]!r}")
        # a usage error: one line, with the pointer to report's --help
        p = run([MEMTRAIL, "report", good, opt])
        check_eq(p.returncode, 2, f"status of {opt} without a value")
        check_eq(p.stderr, f"memtrail: error: option '{opt}' needs a value "
                 "(see 'memtrail report --help')\n", "the error line")


# ---- HTML in headless Chromium, over the DevTools protocol on a pipe ----

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts")


class Browser:
    """Headless Chromium driven with --remote-debugging-pipe: NUL-terminated
    JSON commands on its fd 3, replies and events from its fd 4."""

    def __init__(self):
        if not os.path.exists(CHROMIUM):
            # under CI=true a missing browser is a failure, never a skip
            raise TestFailure(f"{CHROMIUM} is missing: install Debian's chromium")
        self.profile = tmpdir()
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        # the browser's end of each pipe above fd 4, so that the child's dup2
        # onto 3 and 4 cannot overwrite one with the other
        hi_r = fcntl.fcntl(to_r, fcntl.F_DUPFD_CLOEXEC, 10)
        hi_w = fcntl.fcntl(from_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_r)
        os.close(from_w)
        to_r, from_w = hi_r, hi_w

        def child_fds():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)
        # close_fds stays off: subprocess would close 3 and 4 after preexec_fn;
        # every other fd of this process is close-on-exec (Python's default)
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=child_fds, start_new_session=True)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def send(self, method, params=None, session=True, timeout=20):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self.read(deadline, f"reply to {method}")
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise TestFailure(f"{method}: {m['error']}")
                return m["result"]

    def read(self, deadline, what):
        while b"\0" not in self.buf:
            left = deadline - time.time()
            check(left > 0, f"chromium: no {what} in time")
            r, _, _ = select.select([self.from_r], [], [], left)
            if r:
                chunk = os.read(self.from_r, 1 << 20)
                check(chunk, f"chromium closed its pipe waiting for {what}")
                self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        m = json.loads(raw)
        if "method" in m:
            self.events.append(m)
        return m

    def wait_event(self, method, timeout=20):
        deadline = time.time() + timeout
        for m in self.events:
            if m["method"] == method:
                return m
        while True:
            m = self.read(deadline, method)
            if m.get("method") == method:
                return m

    def open(self, path):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable")
        self.events.clear()
        self.url = "file://" + os.path.abspath(path)
        self.send("Page.navigate", {"url": self.url})
        self.wait_event("Page.loadEventFired")
        # the script marks the body once it drew everything
        deadline = time.time() + 20
        while self.eval("document.body && document.body.getAttribute('data-ready')") != "1":
            check(time.time() < deadline, "the page never finished drawing")
            time.sleep(0.05)

    def eval(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            raise TestFailure(f"evaluating {expr!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def problems(self):
        """Exceptions, console errors and warnings, and requests but the file's own."""
        out = []
        for m in self.events:
            p = m.get("params", {})
            if m["method"] == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails']}")
            elif m["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "warning"):
                out.append(f"console {p['type']}: {p['args']}")
            elif m["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(f"log error: {p['entry']}")
            elif m["method"] == "Network.requestWillBeSent":
                url = p["request"]["url"]
                if url != self.url and not url.startswith("data:"):
                    out.append(f"request: {url}")
        return out

    def screenshot(self, name):
        os.makedirs(ARTIFACTS, exist_ok=True)
        png = base64.b64decode(self.send("Page.captureScreenshot",
                                          {"format": "png", "captureBeyondViewport": True})["data"])
        path = os.path.join(ARTIFACTS, name)
        with open(path, "wb") as f:
            f.write(png)
        print(f"     screenshot: {path}")
        return path

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        os.close(self.to_w)
        os.close(self.from_r)
        shutil.rmtree(self.profile, ignore_errors=True)


def html(trail_path):
    out = os.path.join(tmpdir(), "report.html")
    p = run([MEMTRAIL, "report", trail_path, "--html", out])
    check_eq(p.returncode, 0, f"report --html status ({p.stderr!r})")
    check(f"html report written to '{out}'" in p.stderr, f"no log line: {p.stderr!r}")
    return out


# What the page drew, read back from the SVG's data- attributes.
DRAWN = """(() => {
        const all = (sel, f) => Array.from(document.querySelectorAll(sel)).map(f);
        return {
          series: all('path.series', e => [+e.dataset.pid, e.dataset.kind]),
          bands: all('g.band', e => [+e.dataset.pid, e.dataset.phase]),
          markers: all('g.marker', e => [+e.dataset.pid, e.dataset.event]),
          limits: all('svg.timeline line.limit', e => [+e.closest('svg').dataset.pid,
                                                       +e.dataset.limit]),
          bars: all('svg.bars rect', e => [+e.closest('svg').dataset.pid, e.dataset.phase,
                                            e.closest('svg').dataset.kind, e.dataset.bar,
                                            +e.dataset.value]),
          heads: all('section.target h2', e => e.textContent),
          ymax: all('svg.timeline', e => [+e.dataset.pid, +e.dataset.ymax]),
          peaks: all('svg.timeline line.peak', e => [+e.closest('svg').dataset.pid,
                                                     e.dataset.kind, +e.dataset.peak]),
        };
    })()"""


def read_page(path, shot, *exprs):
    """PATH opened in headless Chromium: each of EXPRS evaluated once the page
    drew, then a screenshot SHOT; no exception, console error or warning, and
    no request but the file itself. The values, in order."""
    b = Browser()
    try:
        b.open(path)
        got = [b.eval(e) for e in exprs]
        b.screenshot(shot)
        problems = b.problems()
    finally:
        b.close()
    check_eq(problems, [], "console errors, exceptions or network requests")
    return got


def want_drawn(trail):
    """The same sets from the trail file: every kind with a non-zero sample,
    every listed phase."""
    series, bands = [], []
    for t in trail["targets"]:
        for k in trail["kinds"]:
            if any(s.get(k, 0) for s in t.get("timeline", [])):
                series.append([t["pid"], k])
        bands += [[t["pid"], p["name"]] for p in t["phases"]] if t.get("timeline") else []
    return sorted(series), sorted(bands)


RESIDENT = ("rss_anon", "rss_file", "rss_shmem")


def check_page(path, trail, shot):
    d, = read_page(path, shot, DRAWN)
    series, bands = want_drawn(trail)
    check(series, "the trail has no non-zero series to draw")
    check_eq(sorted(d["series"]), series, "drawn series (pid, kind)")
    check_eq(sorted(d["bands"]), bands, "drawn phase bands (pid, phase)")
    check_eq(d["heads"], [f"{t['comm']} ({t['pid']})" for t in trail["targets"]], "targets")
    # the axis spans what is drawn: the resident parts stacked (their sum is
    # the resident size), every other kind a line of its own, the limit
    limits = dict((pid, v) for pid, v in d["limits"])
    for pid, ymax in d["ymax"]:
        t = [x for x in trail["targets"] if x["pid"] == pid][0]
        top = limits.get(pid, 0)
        drawn = [k for k in trail["kinds"] if any(s.get(k, 0) for s in t["timeline"])]
        for smp in t["timeline"]:
            top = max(top, sum(max(0, smp.get(k, 0)) for k in RESIDENT),
                      *(smp.get(k, 0) for k in trail["kinds"] if k not in RESIDENT))
        # and each drawn kind's peak, as the kernel kept it
        top = max([top] + [t["kinds"][k]["peak"] for k in drawn if k in t["kinds"]])
        check(abs(ymax - max(top, 1) * 1.05) <= 2,
              f"pid {pid}: the timeline's axis is {ymax}, want 1.05 x the highest drawn {top}")
        peaks = sorted((k, v) for p, k, v in d["peaks"] if p == pid)
        check_eq(peaks, sorted((k, t["kinds"][k]["peak"]) for k in drawn
                               if t["kinds"].get(k, {}).get("peak")),
                 f"pid {pid}: a peak line per drawn kind, at the trail's peak")
        if len(t["phases"]) < 2:
            check(pid not in [b[0] for b in d["bars"]], f"pid {pid}: one phase, no bar chart")
    # the bar chart: each phase's segment and cumulative peak of the kind shown
    for pid, phase, kind, bar, value in d["bars"]:
        t = [x for x in trail["targets"] if x["pid"] == pid][0]
        want = [p["kinds"][kind][bar] for p in t["phases"] if p["name"] == phase]
        check(value in want, f"bar {pid}/{phase}/{kind}/{bar} = {value}, trail says {want}")
    return d


def test_html_phases():
    path = phases_trail()
    trail = load_trail(path)
    d = check_page(html(path), trail, "viz-phases.png")
    names = [p for _, p in d["bands"]]
    check(["load", "warmup", "serve", "shrink"] == names[-4:], f"bands {names}")
    check(d["bars"], "no per-phase bars drawn")
    check(any(e == "exit" for _, e in d["markers"]), f"no exit marker: {d['markers']}")


def test_html_fifty_phases_labelled_apart():
    """50 phases (phase_loop, two rules, 25 rounds): every phase's bar pair
    named under it, no two names overlapping (slanted: they would not fit
    level); timeline bands named only where the name fits the band."""
    out = os.path.join(tmpdir(), "trail.json")
    w = workload("phase_loop")
    p = run([MEMTRAIL, "record", "-q", "-o", out, "--phase", f"layer_forward={w}:phase_a",
             "--phase", f"bias_init={w}:phase_b", "--", w, "25"])
    check_eq(p.returncode, 0, f"record status ({p.stderr!r})")
    trail = load_trail(out)
    check_page_drawn, got = read_page(html(out), "viz-fifty-phases.png", DRAWN, """(() => {
            const box = e => { const r = e.getBoundingClientRect();
                               return [r.left, r.top, r.right, r.bottom]; };
            const bars = document.querySelector('svg.bars');
            const bands = Array.from(document.querySelectorAll('svg.timeline g.band'));
            return {
              labels: Array.from(bars.querySelectorAll('text.xl')).map(e => {
                  const m = /rotate\\((-?[0-9.]+)/.exec(e.getAttribute('transform') || '');
                  const bb = e.getBBox();
                  return [e.dataset.phase, e.firstChild.nodeValue, box(e), +e.getAttribute('x'),
                          m ? +m[1] : 0, bb.height];
              }),
              bands: bands.map(g => [g.dataset.phase, box(g.querySelector('rect')),
                                     g.querySelector('text') ? box(g.querySelector('text'))
                                                             : null]),
            };
        })()""")
    names = [x["name"] for x in trail["targets"][0]["phases"]]
    check_eq(len(names), 51, f"start and 50 phases: {names}")
    check_eq([x[0] for x in got["labels"]], names, "a label under every phase's bars, in order")
    check_eq([x[1] for x in got["labels"]], names, "each label's text")

    def overlap(a, b):
        return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5

    labels = got["labels"]
    for i in range(1, len(labels)):
        (_, _, box0, x0, angle, height), (_, _, box1, x1, _, _) = labels[i - 1], labels[i]
        if angle:
            # parallel slanted lines of text: apart by their anchors' distance
            # across the slant, which must hold the text's height
            gap = (x1 - x0) * math.sin(math.radians(abs(angle)))
            check(gap >= height - 0.5, f"labels {names[i - 1]!r} and {names[i]!r} "
                  f"{gap:.1f} apart across the slant, {height:.1f} high")
        else:
            check(not overlap(box0, box1),
                  f"labels {names[i - 1]!r} and {names[i]!r} overlap: {box0} {box1}")
    named = [(ph, rect, txt) for ph, rect, txt in got["bands"] if txt]
    for ph, rect, txt in named:
        check(txt[0] >= rect[0] and txt[2] <= rect[2] + 1,
              f"band {ph!r}: its name {txt} within the band {rect}")
    check_eq(sorted(p for _, p in check_page_drawn["bands"]), sorted(names), "a band per phase")


def test_html_oom():
    path, limit = oom_trail()
    trail = load_trail(path)
    d = check_page(html(path), trail, "viz-oom.png")
    pid = [t for t in trail["targets"] if t.get("verdict")][0]["pid"]
    check_eq(d["limits"], [[pid, limit]], "the cgroup limit line vs memory.limit_in_bytes")
    events = {e for p, e in d["markers"] if p == pid}
    check({"verdict", "exit"} <= events, f"markers of the OOM victim: {events}")


def test_html_device_memory_line():
    """A device kind's per-phase bars are drawn against the memory of the
    devices its runtime reported (the stand-in's cuMemGetInfo_v2 and
    cuDeviceTotalMem_v2 answers, as the workload printed them)."""
    out = os.path.join(tmpdir(), "trail.json")
    p = run([MEMTRAIL, "record", "-q", "-o", out, "--", workload("cuda_phases")])
    check_eq(p.returncode, 0, f"record status ({p.stderr!r})")
    data = json.loads([x for x in p.stdout.splitlines() if x.startswith("{")][-1])
    trail = load_trail(out)
    got, = read_page(html(out), "viz-device.png", """(() => {
            const sel = document.querySelector('section.target select');
            sel.value = 'cuda_device';
            sel.dispatchEvent(new Event('change'));
            const svg = document.querySelector('svg.bars');
            const line = svg.querySelector('line.limit');
            return [svg.dataset.kind, line ? +line.dataset.limit : null,
                    Array.from(svg.querySelectorAll('text')).map(e => e.textContent)];
        })()""")
    want = sum(d["bytes"] for d in data["device_totals"])
    check_eq(got[0], "cuda_device", "the kind the bars show")
    check_eq(got[1], want, "the device memory line: the devices' sizes added up")
    check(any(x.startswith("device memory ") for x in got[2]), f"its label: {got[2]}")
    check_eq(len(trail["targets"]), 1, "one target")


HOSTILE_PHASE = "</script><b>\"'&<!--<script>"
HOSTILE_COMM = "<b>\"'&<i>"
PY_HOSTILE = """
import sys, time
sys.path.insert(0, sys.argv[1])
import memtrail_marker
memtrail_marker.phase(sys.argv[2])
hold = b"x" * (16 << 20)
time.sleep(1.5)   # a band wide enough for its label, however long start-up takes
"""


def test_html_hostile_strings():
    """A comm (the name a program was run by) and a phase name made of markup
    render as text: the page's text is the strings themselves, no element
    comes from them, the script still ran."""
    d = tmpdir()
    exe = os.path.join(d, HOSTILE_COMM)
    os.symlink(os.path.realpath(sys.executable), exe)
    out = os.path.join(d, "trail.json")
    p = run([MEMTRAIL, "record", "-q", "-o", out, "--", exe, "-c", PY_HOSTILE,
             os.path.join(ROOT, "include"), HOSTILE_PHASE])
    check_eq(p.returncode, 0, f"record status ({p.stderr!r})")
    trail = load_trail(out)
    t = [x for x in trail["targets"] if x["comm"] == HOSTILE_COMM]
    check_eq(len(t), 1, f"the target named {HOSTILE_COMM!r}: {[x['comm'] for x in trail['targets']]}")
    check(HOSTILE_PHASE in [ph["name"] for ph in t[0]["phases"]], f"phases {t[0]['phases']}")
    page = html(out)
    heads, labels, injected, scripts, title, d = read_page(
        page, "viz-hostile.png",
        "Array.from(document.querySelectorAll('h2')).map(e => e.textContent)",
        "Array.from(document.querySelectorAll('g.band text')).map(e => e.textContent)",
        "document.querySelectorAll('b:not(.verdict b), i').length",
        "document.scripts.length", "document.title", DRAWN)
    check(f"{HOSTILE_COMM} ({t[0]['pid']})" in heads, f"the comm as text: {heads}")
    check(HOSTILE_PHASE in labels, f"the phase name as text: {labels}")
    check_eq(injected, 0, "elements made from the strings")
    check_eq(scripts, 2, "script elements (the data and the page's own)")
    check(title.startswith("memtrail: trail: "), f"title {title!r}")
    series, bands = want_drawn(trail)
    check_eq(sorted(d["bands"]), bands, "phase bands")


def watch_files():
    """hog OOM-killed under memtrail watch: its OOM snapshot and verdict file."""
    if "watch" not in _recorded:
        snaps = os.path.join(tmpdir(), "snapshots")
        w = Background(["watch", "-o", snaps])

        def ours(pattern):
            """Files of this test's cgroup: watch sees the whole node."""
            found = []
            for f in glob.glob(os.path.join(snaps, pattern)):
                doc = load_trail(f)
                cg = doc["cgroup"] if "type" in doc else doc["targets"][0]["cgroup"]
                if cg == rel:
                    found.append(f)
            return found
        path, rel, limit, _, _ = kubelet_memcg(64 * MiB)
        try:
            p = subprocess.run(in_cgroup(path, [workload("hog")]), capture_output=True,
                               timeout=60)
            check_eq(p.returncode, -signal.SIGKILL, "the workload's end")
            deadline = time.time() + 20
            while not ours("verdict-*.json"):
                check(time.time() < deadline, "no verdict file written")
                time.sleep(0.05)
        finally:
            rc, _, err = w.stop()
            remove_tree(path)
        check_eq(rc, 0, f"watch status ({err!r})")
        snap, verdict = ours("oom-*.json"), ours("verdict-*.json")
        check_eq((len(snap), len(verdict)), (1, 1), "one OOM snapshot and one verdict file")
        _recorded["watch"] = (snap[0], verdict[0], limit)
    return _recorded["watch"]


def test_html_watch_snapshot():
    snap, _, limit = watch_files()
    doc = load_trail(snap)
    d = check_page(html(snap), doc, "viz-snapshot.png")
    pid = doc["snapshot"]["pid"]
    check_eq([t["pid"] for t in doc["targets"]], [pid], "the snapshot's one target")
    check_eq(d["limits"], [[pid, limit]], "the snapshot's cgroup limit line")
    check("oom" in {e for _, e in d["markers"]}, f"no OOM marker: {d['markers']}")
    check_eq([p for _, p in d["bands"]][-1], doc["snapshot"]["phase"], "the open phase")
    check_against_trail(check_trace_rules(perfetto(snap)), doc)


def test_html_watch_verdict_file():
    """A verdict file has no timeline: the page shows its target, verdict and peaks."""
    _, verdict, limit = watch_files()
    doc = load_trail(verdict)
    page = html(verdict)
    heads, text, meta = read_page(
        page, "viz-verdict.png",
        "Array.from(document.querySelectorAll('h2')).map(e => e.textContent)",
        "document.querySelector('.verdict').textContent",
        "document.querySelector('.meta').textContent")
    check_eq(heads, [f"{doc['comm']} ({doc['pid']})"], "the verdict's target")
    check(f"verdict: {doc['verdict']['cause']}" in text and f"limit: {limit}" in text,
          f"verdict shown: {text!r}")
    for kind, peak in doc["peaks"].items():
        if peak:
            check(kind in meta, f"peak of {kind} not shown: {meta!r}")
    p = run([MEMTRAIL, "report", verdict])
    check_eq(p.returncode, 0, f"report of a verdict file ({p.stderr!r})")
    check(str(doc["pid"]) in p.stdout, f"the table names the target: {p.stdout!r}")


TRANSIENT = """
import mmap, sys, time
time.sleep(0.3)
m = mmap.mmap(-1, int(sys.argv[1]), flags=mmap.MAP_PRIVATE)  # never touched: between two samples
m.close()
time.sleep(0.3)
"""


def test_html_timeline_reaches_the_kernels_peak():
    """1 GiB mapped for a moment between two samples (one a second): the
    timeline's axis reaches the mapped peak the kernel kept, and its dashed
    peak line stands at it, though no sample saw it."""
    out = os.path.join(tmpdir(), "trail.json")
    size = 1 << 30
    p = run([MEMTRAIL, "record", "-q", "-i", "1000", "-o", out, "--", sys.executable, "-c",
             TRANSIENT, str(size)])
    check_eq(p.returncode, 0, f"record status ({p.stderr!r})")
    trail = load_trail(out)
    t = [x for x in trail["targets"] if "mmap" in (x["cmdline"] or "")][0]
    peak = t["kinds"]["mapped"]["peak"]
    check(peak >= size, f"the trail's mapped peak {peak} holds the 1 GiB")
    check(max(s.get("mapped", 0) for s in t["timeline"]) < size,
          "no sample saw it (the premise)")
    d = check_page(html(out), trail, "viz-transient-peak.png")
    ymax = [y for pid, y in d["ymax"] if pid == t["pid"]][0]
    check(ymax >= peak, f"the axis {ymax} reaches the peak {peak}")
    check([t["pid"], "mapped", peak] in d["peaks"], f"the mapped peak's line: {d['peaks']}")


def test_html_flame_graph_has_every_frame_of_the_weights_chain():
    """The PyTorch example under record --heap, its page in headless
    Chromium: the flame graph of heap bytes allocated holds the weights'
    chain frame by frame, each frame an element of its own, the script's line
    that builds the layers above Linear.__init__ above c10::alloc_cpu, each
    holding the weights' bytes (the workload's own count); the search marks
    the frames holding its text; no request leaves the page."""
    out, _, data, line = torch_deep_heap()   # test_unwind's recording, made once a run
    trail = load_trail(out)
    t = next(x for x in trail["targets"] if "torch_linear.py" in (x["cmdline"] or ""))
    page = html(out)
    got, = read_page(page, "viz-flame-torch.png", """(() => {
        const g = document.querySelector('.flame[data-pid="%d"]');
        const sel = g.previousElementSibling.querySelectorAll('select');
        sel[0].value = 'heap';
        sel[1].value = 'a';
        sel[0].dispatchEvent(new Event('change'));
        const frames = () => Array.from(g.querySelectorAll('.fr')).map(e => [
            e.textContent, +e.dataset.depth, +e.dataset.bytes, e.classList.contains('py'),
            e.getBoundingClientRect().left, e.getBoundingClientRect().right,
            e.classList.contains('match'), e.children.length]);
        const all = frames();
        const q = g.previousElementSibling.querySelector('input');
        q.value = 'linear.__init__';
        q.dispatchEvent(new Event('input'));
        const rows = Array.from(document.querySelectorAll(
            'section.target[data-pid="%d"] table.sites tr.site'));
        const labels = rows.map(r => [r.children[0].textContent, r.children[3].textContent]);
        const w = rows.find(r => r.children[0].textContent === 'heap' &&
                            r.children[3].textContent.startsWith('Linear.__init__'));
        let chain = [];
        if (w) {
            w.click();
            chain = Array.from(w.nextSibling.querySelector('ol.chain').children)
                .map(li => li.textContent);
        }
        return { all: all, searched: frames(), said: g.previousElementSibling.textContent,
                 labels: labels, chain: chain };
    })()""" % (t["pid"], t["pid"]))
    want = data["weight_bytes"]

    def one(pred, what, within=None, deeper=-1):
        found = [f for f in got["all"] if pred(f[0]) and f[1] > deeper and f[2] >= 0.95 * want
                 and (within is None or (f[4] >= within[4] - 0.5 and f[5] <= within[5] + 0.5))]
        check(found, f"{what}: a frame holding {want} bytes, below the one above it: "
              f"{[f[:4] for f in got['all'] if pred(f[0])]}")
        return found[0]

    user = one(lambda s: s.endswith(f"(torch_linear.py:{line})"), "the script's line")
    check(user[3], "the script's line is a Python frame")
    init = one(lambda s: s.startswith("Linear.__init__ (linear.py:"), "Linear.__init__",
               within=user, deeper=user[1])
    alloc = one(lambda s: s.startswith("c10::alloc_cpu"), "c10::alloc_cpu", within=init,
                deeper=init[1])
    check(not alloc[3], "c10::alloc_cpu is a native frame")
    check(all(f[7] == 0 for f in got["all"]), "each frame an element of its own, text only")
    marked = [f[0] for f in got["searched"] if f[6]]
    check(marked and all("linear.__init__" in m.lower() for m in marked),
          f"the search marks the frames holding its text: {marked}")
    check(f"{len(marked)} frames hold" in got["said"], f"and says how many: {got['said']!r}")
    # the sites table: a row per label and kind; the weights' row opens its chain
    check_eq(len(got["labels"]), len(set(map(tuple, got["labels"]))),
             "rows of one label and kind merged")
    chain = got["chain"]
    check(len(chain) > 3 and chain[1].startswith("c10::alloc_cpu") and
          any(x.endswith(f"(torch_linear.py:{line})") for x in chain),
          f"the weights' row shows its chain, the allocator's end first: {chain[:6]}")
    # the same page in headless Firefox ESR: its screenshot shows the flame graph's frames
    shot = firefox_screenshot(page, "viz-flame-torch-firefox.png")
    seen = png_colors(shot, {"python frame": (0x9e, 0xca, 0xe1), "native frame": (0xfd, 0xd0, 0xa2)})
    check(all(n >= 2000 for n in seen.values()),
          f"Firefox drew the flame graph's frames (pixels of each color): {seen}")


FIREFOX = "/usr/bin/firefox-esr"


def firefox_screenshot(page, name):
    """PAGE drawn by headless Firefox ESR (a profile of its own), saved as
    build/test-artifacts/NAME: its path."""
    check(os.access(FIREFOX, os.X_OK), f"{FIREFOX} is missing: install Debian's firefox-esr")
    home = tmpdir()
    d = os.path.join(ROOT, "build", "test-artifacts")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name)
    if os.path.exists(path):
        os.unlink(path)
    p = run([FIREFOX, "--headless", "--no-remote", "-profile", home, "--screenshot", path,
             "--window-size=1200,3000", "file://" + page], env=dict(os.environ, HOME=home),
            timeout=120)
    check(p.returncode == 0 and os.path.exists(path), f"firefox --screenshot ({p.stderr[-500:]!r})")
    print(f"     screenshot: {path}")
    return path


def png_colors(path, colors):
    """How many pixels of the PNG at PATH have each of COLORS ({name: (r, g, b)}):
    8-bit RGB or RGBA, not interlaced, as browsers write screenshots."""
    import struct
    import zlib
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: a PNG")
    pos, idat, head = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = head
    check(depth == 8 and ctype in (2, 6) and not interlace, f"{path}: 8-bit RGB(A): {head}")
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    prev, counts, want = bytearray(stride), {k: 0 for k in colors}, {v: k for k, v in colors.items()}
    for y in range(h):
        ft, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp):
            k = want.get((line[x], line[x + 1], line[x + 2]))
            if k:
                counts[k] += 1
        prev = line
    return counts
