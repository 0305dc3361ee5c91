# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""report's exporters checked by the clients their users open them with: the
Perfetto/Chrome trace against the Trace Event format's rules and the trail's
own samples; the HTML page in headless Chromium driven over the DevTools
protocol (no console error, no request, drawn series and phase bands equal
to the trail's)."""

import json
import os

from harness import (MEMTRAIL, check, check_eq, in_cgroup, kubelet_memcg, load_trail,
                     one_line_error, record, remove_tree, run, tmpdir, workload)

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
        one_line_error(run([MEMTRAIL, "report", bad, opt, out]), "'targets'")
        # root passes directory permissions: a path under a regular file fails for everyone
        p = run([MEMTRAIL, "report", good, opt, os.path.join(good, "out")])
        check(p.returncode != 0, f"{opt} to an unwritable path succeeded")
        errs = [l for l in p.stderr.splitlines() if "error" in l]
        check_eq(len(errs), 1, f"one error line for {opt}: {p.stderr!r}")
        check("Not a directory" in errs[0], f"the reason spelled out: {errs[0]!r}")
        p = run([MEMTRAIL, "report", good, opt])
        one_line_error(p, opt, "needs a value")
