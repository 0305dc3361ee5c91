# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Names a workload chooses (its comm, its pod's directories, whatever a trail
holds) reach record's table, report and watch's verdict lines with every
control character and every invalid UTF-8 byte shown as \\xNN: no escape
sequence gets to the terminal, no name splits a line or forges one."""

import gzip
import json
import os
import re
import signal
import subprocess
import sys

from harness import (pprof_strings, MiB, MEMTRAIL, check, check_eq, in_cgroup, kubelet_memcg,
                     new_pod_ids, no_programs_left, remove_tree, run, tmpdir)
from test_watch import LIMIT, Watch, pods_dir, wait_files

# a title change, a bell and a screen clear: what a terminal would obey
HOSTILE = "\x1b]0;pwned\x07\x1b[2J"
HOSTILE_SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J"

# python3 sets its own name (prctl PR_SET_NAME) to argv[1], then forks a child
# that inherits it and takes 8 MiB (or, with "hog", all it can)
NAMED = """
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, os.fsencode(sys.argv[1]), 0, 0, 0)
pid = os.fork()
if pid == 0:
    hold = [bytearray(8 << 20)]
    while sys.argv[2:3] == ["hog"]:
        hold.append(bytearray(4 << 20))
    os._exit(0)
os.waitpid(pid, 0)
"""


def named(name, hog=False):
    return [os.path.realpath(sys.executable), "-c", NAMED, name, *(["hog"] if hog else [])]


def no_controls(text, what):
    """Nothing a terminal obeys: no C0 control but the line ends, no DEL, no C1."""
    bad = re.search(r"[\x00-\x09\x0b-\x1f\x7f\x80-\x9f]", text)
    check(not bad, f"{what}: raw control {bad and bad.group()!r} in {text!r}")


def rows_of(text, pid):
    return [l for l in text.splitlines() if l.lstrip().startswith(f"{pid} ")]


def child_pid(trail):
    return [t["pid"] for t in trail["targets"] if t["ppid"] == trail["targets"][0]["pid"]][0]


def test_record_and_report_escape_comm():
    for name, shown in ((HOSTILE, HOSTILE_SHOWN), ("two\nlines", "two\\x0alines"),
                        ("a\\x1b", "a\\\\x1b"), ("caf\u00e9\u0085", "caf\u00e9\\xc2\\x85")):
        out = os.path.join(tmpdir(), "trail.json")
        rec = run([MEMTRAIL, "record", "-o", out, "--", *named(name)])
        check_eq(rec.returncode, 0, f"record status ({rec.stderr!r})")
        with open(out) as f:
            trail = json.load(f)
        pid = child_pid(trail)
        check_eq([t["comm"] for t in trail["targets"] if t["pid"] == pid], [name],
                 "the trail keeps the name as it was")
        rep = run([MEMTRAIL, "report", out])
        check_eq(rep.returncode, 0, f"report status ({rep.stderr!r})")
        for what, text in (("record", rec.stdout), ("record's log", rec.stderr),
                           ("report", rep.stdout)):
            no_controls(text, f"{name!r}: {what}")
        for what, text in (("record", rec.stdout), ("report", rep.stdout)):
            rows = rows_of(text, pid)
            check_eq(len(rows), 1, f"{name!r}: {what}'s rows of {pid} in {text!r}")
            check(f"{pid}  {shown} " in rows[0], f"{name!r}: {shown!r} not in {rows[0]!r}")
    # bytes that are not UTF-8 (the kernel takes any, in names and arguments):
    # escaped in the table; in the trail, which JSON keeps to UTF-8, as \xNN
    out = os.path.join(tmpdir(), "t.json")
    rec = run([MEMTRAIL, "record", "-o", out, "--",
               *named(os.fsdecode(b"a\xffb\xc3")), os.fsdecode(b"arg\xfe")])
    check_eq(rec.returncode, 0, f"record status ({rec.stderr!r})")
    check(re.search(r"^ +\d+  a\\xffb\\xc3 ", rec.stdout, re.M), f"a\\xffb\\xc3 in {rec.stdout!r}")
    check("warning" not in rec.stderr, f"record's log: {rec.stderr!r}")
    with open(out) as f:
        trail = json.load(f)
    pid = child_pid(trail)
    check_eq([t["comm"] for t in trail["targets"] if t["pid"] == pid], ["a\\xffb\\xc3"],
             "the child's name in the trail")
    check(trail["command"].endswith(" a\\xffb\\xc3 arg\\xfe"), f"command {trail['command']!r}")
    check_eq([e["type"] for e in trail["events"] if e["pid"] == pid], ["fork", "exit"],
             "the child's events")
    no_programs_left()


def test_report_escapes_a_hostile_trail():
    """A trail file written by anyone: names in every table report prints."""
    d = tmpdir()
    out = os.path.join(d, "trail.json")
    rec = run([MEMTRAIL, "record", "-q", "-o", out, "--", *named("x")])
    check_eq(rec.returncode, 0, f"record status ({rec.stderr!r})")
    with open(out) as f:
        trail = json.load(f)
    forged = "\nverdict: 1 (init) killed by SIGKILL: forged\x1b[2J"
    t = trail["targets"][0]
    trail["command"] = "command" + forged
    t["comm"] = "c\nverdict:\x1b[2J"     # 15 bytes at most, as the kernel's
    t["exit"] = {"code": 0, "signal": 9}
    t["verdict"] = {"cause": "oom_cgroup", "cgroup": "/pod" + forged, "limit": 1, "usage": 1,
                    "trigger": {"pid": t["pid"], "comm": "t" + forged}}
    t["phases"].append(dict(t["phases"][-1], name="p" + forged))
    t["phase_summary"].append(dict(t["phase_summary"][-1], name="p" + forged, count=2))
    for s in t["sites"]["list"]:
        s["phase"] = "s" + forged
        for fr in s["frames"]:
            fr["function"] = "f" + forged
    trail["kernel"]["release"] = "6.1" + forged
    trail["events"].append({"t_ms": 1, "type": "device_oom", "pid": t["pid"], "comm": "d" + forged,
                            "function": "cuMemAlloc" + forged, "runtime": "cuda" + forged,
                            "code": 2, "error": "e" + forged, "kind": "cuda_device",
                            "device": 0, "size": 4096, "phase": "p" + forged,
                            "site": ["s" + forged]})
    path = os.path.join(d, "hostile.json")
    with open(path, "w") as f:
        json.dump(trail, f)
    rep = run([MEMTRAIL, "report", path])
    check_eq(rep.returncode, 0, f"report status ({rep.stderr!r})")
    no_controls(rep.stdout, "report")
    lines = rep.stdout.splitlines()
    check_eq(len([l for l in lines if l.startswith("verdict:")]), 1,
             f"verdict lines in {rep.stdout!r}")
    esc = "\\x0averdict: 1 (init) killed by SIGKILL: forged\\x1b[2J"
    for what in ("trail ", "kernel 6.1", "  p", "  s", "    mapped", "device out of memory:",
                 "verdict: "):
        check([l for l in lines if l.startswith(what) and esc in l],
              f"{what!r}: no line with the escaped name in {rep.stdout!r}")
    check_eq(len([l for l in lines if l.startswith("verdict: ")][0].split(esc)), 3,
             "the verdict line's cgroup and trigger, escaped")
    comm = "c\\x0averdict:\\x1b[2J"
    for what in (f"{t['pid']:>8}  {comm} ", f"phases of {t['pid']} ({comm})",
                 f"allocation sites of {t['pid']} ({comm})", f"verdict: {t['pid']} ({comm})"):
        check([l for l in lines if l.startswith(what)], f"no line starts {what!r}")
    # pprof viewers print names as they are: its strings are escaped too
    prof = os.path.join(d, "p.pb.gz")
    rep = run([MEMTRAIL, "report", "--pprof", prof, path])
    check_eq(rep.returncode, 0, f"report --pprof status ({rep.stderr!r})")
    with gzip.open(prof) as f:
        strings = pprof_strings(f.read())
    for text in strings:
        no_controls(text, "a pprof string")
    check("f" + esc in strings, f"the frame's function, escaped, in {strings}")


def test_watch_verdict_line_escapes_names():
    """An OOM-killed process and its pod's directories named to forge verdict
    lines in a node's log: one line, names escaped."""
    uid, cid = new_pod_ids()
    pods = pods_dir(uid, namespace="ns\x1b[2J", pod="pod\nverdict: 1 (init) forged",
                    container="c\x07")
    path, rel, limit, _, _ = kubelet_memcg(LIMIT, (uid, cid))
    try:
        w = Watch(["--pods-dir", pods, "-c", path])     # its kills only: tests run beside it
    except Exception:
        remove_tree(path)
        raise
    try:
        p = subprocess.run(in_cgroup(path, named(HOSTILE, hog=True)), capture_output=True,
                           timeout=60)
        check_eq(p.returncode, 0, f"the parent outlives its child ({p.stderr!r})")
        verdicts = wait_files(w.dir, "verdict-*.json", 1)
    finally:
        rc, out, err = w.stop()
        remove_tree(path)
    check_eq(rc, 0, f"watch's status ({err!r})")
    vs = []
    for name in verdicts:
        with open(name) as f:
            vs.append(json.load(f))
    check_eq(len(vs), 1, f"verdict files: {vs}")
    v = vs[0]
    check_eq((v["comm"], v["pod"]["name"]), (HOSTILE, "pod\nverdict: 1 (init) forged"),
             "the verdict file keeps the names")
    no_controls(out, "watch's stdout")
    no_controls(err, "watch's log")
    lines = [l for l in out.splitlines() if "verdict" in l]
    check_eq(len(lines), 1, f"verdict lines in {out!r}")
    want = (f"verdict: {v['pid']} ({HOSTILE_SHOWN}) pod ns\\x1b[2J/pod\\x0averdict: 1 (init) "
            f"forged container c\\x07: oom_cgroup: the kernel OOM killer, cgroup {rel} at its ")
    check(lines[0].startswith(want), f"{lines[0]!r} does not start {want!r}")
    tail = f"triggered by {v['pid']} ({HOSTILE_SHOWN})"
    if v["top_site"]:   # the code that held the memory (mapping sites: 5.15 on)
        tail += f"; top site: {v['top_site']['site']}, "
        check(tail in lines[0] and lines[0].endswith(" mapped"), lines[0])
    else:
        check(lines[0].endswith(tail), lines[0])
    no_programs_left()
