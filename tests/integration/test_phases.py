# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Per-phase tables against the workloads' arithmetic and /proc."""

import json
import os
import signal
import subprocess
import sys

from harness import (FOREIGN, MEMTRAIL, MiB, PAGE, ROOT, Background, check, check_eq, free_pid,
                     load_trail, one_line_error, record, record_runs, run, target, tmpdir,
                     workload, no_programs_left)

FIELDS = ("allocations", "deallocations", "segment_change", "segment_peak",
          "cumulative_current", "cumulative_peak")

# phases.c's arithmetic, MiB: allocations, deallocations, segment_peak, segment_change
PHASES = {
    "load": (48, 0, 48, 48),
    "warmup": (72, 64, 64, 8),
    "serve": (12, 12, 4, 0),
    "shrink": (2, 48, 0, -46),
}


def check_identities(t):
    """The identities hold for every row of every kind; the first phase
    begins at the target's baseline (what it held when first seen)."""
    phases = t["phases"]
    for kind in t["kinds"]:
        prev_cur = prev_peak = t["kinds"][kind]["baseline"]
        for i, p in enumerate(phases):
            f = p["kinds"][kind]
            where = f"phase {i} '{p['name']}' {kind}"
            check_eq(f["segment_change"], f["allocations"] - f["deallocations"],
                     f"{where}: segment_change = allocations - deallocations")
            check_eq(f["cumulative_current"], prev_cur + f["segment_change"],
                     f"{where}: cumulative_current")
            check_eq(f["cumulative_peak"], max(prev_peak, prev_cur + f["segment_peak"]),
                     f"{where}: cumulative_peak")
            check(f["segment_peak"] >= max(0, f["segment_change"]), f"{where}: segment_peak")
            prev_cur, prev_peak = f["cumulative_current"], f["cumulative_peak"]
        if phases and t["exit"]:
            check_eq(prev_cur, t["kinds"][kind]["current"], f"{kind}: last phase vs final level")
            check_eq(prev_peak, t["kinds"][kind]["peak"], f"{kind}: last phase vs peak")


def close(got, want, what, pct=2, slack=256 * 1024):
    check(abs(got - want) <= max(abs(want) * pct / 100, slack),
          f"{what}: got {got}, want {want} within {pct}%")


def check_phases_workload(t, data):
    names = [p["name"] for p in t["phases"]]
    check_eq(names, ["start", "load", "warmup", "serve", "shrink"], "phase names in order")
    check_identities(t)
    by = {p["name"]: p for p in t["phases"]}
    entries = data["entry"] + [data["final"]]
    running_peak = 0
    for i, name in enumerate(("load", "warmup", "serve", "shrink")):
        alloc, dealloc, peak, change = (x * MiB for x in PHASES[name])
        m = by[name]["kinds"]["mapped"]
        check_eq([m[f] for f in FIELDS[:4]], [alloc, dealloc, change, peak],
                 f"{name}: mapped allocations, deallocations, segment change, segment peak")
        check_eq(m["cumulative_current"], entries[i + 1], f"{name}: mapped cumulative_current "
                 "vs VmData at the phase's end")
        running_peak = max(running_peak, entries[i] + peak)
        check_eq(m["cumulative_peak"], running_peak, f"{name}: mapped cumulative_peak")
        a = by[name]["kinds"]["rss_anon"]
        for field, want in zip(FIELDS[:4], (alloc, dealloc, change, peak)):
            close(a[field], want, f"{name}: rss_anon {field}")


def rules(binary, names=("load", "warmup", "serve", "shrink")):
    args = []
    for n in names:
        args += ["--phase", f"{n}={binary}:phase_{n}"]
    return args


def test_rules_exact_per_phase():
    p, trail, data = record([workload("phases")], rules(workload("phases")))
    check_eq(p.returncode, 0, f"status ({p.stderr!r})")
    check_phases_workload(trail["targets"][0], data)
    no_programs_left()


SEGMENT_FIELDS = ("allocations", "deallocations", "segment_change", "segment_peak")


def scopes_run(env=None):
    """scopes.c under --scope rules on its four functions: (trail target, ledger)."""
    w = workload("scopes")
    scopes = []
    for n in ("load", "layer", "forward", "nest", "escape"):
        scopes += ["--scope", f"{n}={w}:scope_{n}"]
    p, trail, data = record([w], scopes, env=env)
    check_eq(p.returncode, 0, f"status ({p.stderr!r})")
    return trail["targets"][0], data


def check_scopes(t, data):
    """Each entry and return a row: the names in order (a return resumes the
    phase its entry interrupted), mapped fields exact per row."""
    want = data["segments"]
    check_eq([p["name"] for p in t["phases"]], ["start"] + [x["name"] for x in want],
             "phase rows in order")
    check_identities(t)
    for i, (got, w) in enumerate(zip(t["phases"][1:], want)):
        m = got["kinds"]["mapped"]
        check_eq([m[f] for f in SEGMENT_FIELDS], [w[f] for f in SEGMENT_FIELDS],
                 f"row {i + 1} '{w['name']}': mapped allocations, deallocations, change, peak")


def test_scopes_nested_and_recursive_exact():
    """--scope rules: a phase from a function's entry to its return, nested
    (layer inside load) and recursive (nest three deep); a scope left by
    longjmp ends at the next return that leaves its frame behind (the
    phase before it resumes, not the escape's); the teardown after the last
    return lands in 'start' again, not in the last scope."""
    check_scopes(*scopes_run())
    no_programs_left()


def test_scopes_without_cookie():
    """The same on kernels without bpf_cookie (before 5.15), forced: a
    program per rule, the return program shared."""
    t, data = scopes_run(env=dict(os.environ, MEMTRAIL_NO_COOKIE="1"))
    check_scopes(t, data)
    no_programs_left()


def test_scope_argument_errors():
    """A malformed --scope is one line naming the option; a function that is
    not there leaves the others working and says which."""
    p = run([MEMTRAIL, "record", "--scope", "nobinary", "--", "/bin/true"])
    one_line_error(p, "invalid --scope 'nobinary'", "NAME=BINARY:SYMBOL")
    p = run([MEMTRAIL, "record", "--scope", "x" * 64 + "=/bin/true:main", "--", "/bin/true"])
    one_line_error(p, "invalid --scope name 'xxx", "the most is 63")
    out = os.path.join(tmpdir(), "t.json")
    w = workload("scopes")
    p = run([MEMTRAIL, "record", "-q", "-o", out, "--scope", f"x={w}:no_such_function",
             "--scope", f"forward={w}:scope_forward", "--", w])
    check_eq(p.returncode, 0, f"status ({p.stderr!r})")
    check("phase rule 'x' not set" in p.stderr, f"the missing function said: {p.stderr!r}")
    names = [x["name"] for x in load_trail(out)["targets"][0]["phases"]]
    check_eq(names, ["start", "forward"] * 4 + ["start"], "the other scope's rows")


def test_c_marker_exact_per_phase():
    p, trail, data = record([workload("phases"), "--marker"])
    check_eq(p.returncode, 0, f"status ({p.stderr!r})")
    check_phases_workload(trail["targets"][0], data)


def test_threads_in_one_phase_exact_20_runs():
    """20 runs in a row under one record, each a child of its shell: its
    phases are the shell's fork ('start'), its exec, then its own."""
    p, trail, runs = record_runs([workload("threads")], 20)
    check_eq(p.returncode, 0, f"status ({p.stderr!r})")
    for run_no, (t, data) in enumerate(runs):
        check_eq([x["name"] for x in t["phases"]], ["start", "exec:threads", "work", "done"],
                 f"run {run_no}: phases")
        check_identities(t)
        m = t["phases"][2]["kinds"]["mapped"]
        moved = data["churn"] + data["peak_extra"]
        check_eq([m[f] for f in FIELDS], [moved, moved, 0, data["peak_extra"], data["base_data"],
                                          data["base_data"] + data["peak_extra"]],
                 f"run {run_no}: phase 'work' mapped fields")


def test_repeated_phases_aggregate_with_flat_memory():
    def traced(n):
        out = os.path.join(tmpdir(), "trail.json")
        # mapping sites on (the default): those of folded phases fold by name too
        m = subprocess.Popen([MEMTRAIL, "record", "-q", "-o", out,
                              *rules(workload("phase_loop"), ("a", "b")),
                              "--", workload("phase_loop"), str(n)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(m.pid, 0)
        m.communicate()
        check_eq(os.waitstatus_to_exitcode(status), 0, f"status with n={n}")
        return load_trail(out)["targets"][0], usage.ru_maxrss * 1024

    small, rss_small = traced(10000)
    t, rss_big = traced(100000)
    n = 100000
    check_eq(len(t["phases"]), 200, "phases listed (default --phase-history 200)")
    check_eq(t["phases_folded"], 2 * n + 1 - 200, "phases folded")
    check_eq(t["phases"][0]["name"], "start", "first listed phase")
    check_eq(t["phases"][-1]["name"], "b", "last listed phase")
    summary = {s["name"]: s for s in t["phase_summary"]}
    for name, size in (("a", 2 * PAGE), ("b", PAGE)):
        s = summary[name]
        check_eq(s["count"], n, f"'{name}' invocations")
        m = s["kinds"]["mapped"]
        check_eq(m["allocations"], {"total": n * size, "mean": size, "max": size},
                 f"'{name}' mapped allocations")
        check_eq(m["deallocations"], {"total": n * size, "mean": size, "max": size},
                 f"'{name}' mapped deallocations")
        check_eq(m["segment_peak"], {"total": n * size, "mean": size, "max": size},
                 f"'{name}' mapped segment_peak")
        check_eq(m["segment_change"], {"total": 0, "mean": 0, "max": 0},
                 f"'{name}' mapped segment_change")
    check_eq(t["lost"] if "lost" in t else 0, 0, "lost")
    sites = t["sites"]["list"]
    for name, size in (("a", 2 * PAGE), ("b", PAGE)):
        rows = [x for x in sites if x["kind"] == "mapped" and x["phase"] == name]
        check_eq(sum(x["alloc_bytes"] for x in rows), n * size, f"'{name}' mapping sites' bytes")
        check_eq(sum(x["inuse_bytes"] for x in rows), 0, f"'{name}' mapping sites in use")
        check_eq(len([x for x in rows if x.get("folded")]), 1, f"'{name}' folded sites")
    check(len(sites) < 1000, f"sites stay bounded: {len(sites)}")
    check(rss_big - rss_small < 4 * MiB,
          f"memtrail grew by {rss_big - rss_small} bytes from 20k to 200k phases")


def test_phases_exact_while_deep_samples_fill_the_ring():
    """memtrail stopped (SIGSTOP, by this test) while phase_loop runs 2,000
    pairs of phases by rules, each phase mapping a section: every section is
    a deep sample of 16 KiB and more (record's default), 4,000 of them, four
    times what the ring buffer holds. Deep samples take only what leaves
    exact records their room: once memtrail runs again every phase boundary
    and the exit are there, the deep samples that found no room are counted
    and their sections still named by their frame-pointer stacks."""
    n = 2000
    binary = workload("phase_loop")
    fifo = os.path.join(tmpdir(), "go")
    os.mkfifo(fifo)
    out = os.path.join(tmpdir(), "trail.json")
    bg = Background(["record", "-q", "-o", out, *rules(binary, ("a", "b")), "--",
                     binary, str(n), "--wait", fifo])
    with open(fifo, "w") as go:	# returns once the workload opened it, traced
        bg.proc.send_signal(signal.SIGSTOP)
        go.write("g")
    report = bg.proc.stdout.readline()	# the workload's, its loop done while memtrail stopped
    bg.proc.send_signal(signal.SIGCONT)
    rc, _, err = bg.stop(sig=None)
    check_eq(rc, 0, f"status (stderr {err!r})")
    check_eq(json.loads(report), {"n": n}, "the workload's report")
    trail = load_trail(out)
    t = trail["targets"][0]
    summary = {s["name"]: s for s in t["phase_summary"]}
    check_eq((summary["a"]["count"], summary["b"]["count"]), (n, n), "'a' and 'b' invocations")
    check_eq(t["exit"], {"code": 0, "signal": 0}, "the exit")
    lost = trail["lost"]
    check_eq({k: v for k, v in lost.items() if v and k != "deep"}, {},
             "lost counters besides deep samples")
    check(lost.get("deep", 0) > 0, f"deep samples past the ring's room counted: {lost}")
    for name, size in (("a", 2 * PAGE), ("b", PAGE)):
        m = summary[name]["kinds"]["mapped"]
        check_eq(m["allocations"]["total"], n * size, f"'{name}' mapped allocations")
        rows = [x for x in t["sites"]["list"] if x["kind"] == "mapped" and x["phase"] == name]
        check_eq(sum(x["alloc_bytes"] for x in rows), n * size, f"'{name}' mapping sites' bytes")
    no_programs_left()


def test_phase_burst_loses_no_event():
    """200,000 phase markers in a tight loop, in well under a second: many
    times what the ring buffer holds between two of memtrail's polls. Its
    records do not wake memtrail one by one, but the buffer an eighth full
    does: every phase is counted, and no event is lost."""
    n = 100000
    p, trail, data = record([workload("phase_loop"), str(n), "--marker"])
    check_eq(p.returncode, 0, f"status (stderr {p.stderr!r})")
    check_eq(data, {"n": n}, "the workload's report")
    lost = {k: v for k, v in trail["lost"].items() if v}
    check_eq(lost, {}, "lost counters")
    t = trail["targets"][0]
    check_eq(len(t["phases"]) + t["phases_folded"], 2 * n + 1, "phases, listed and folded")
    summary = {s["name"]: s["count"] for s in t["phase_summary"]}
    check_eq((summary.get("a"), summary.get("b")), (n, n), "'a' and 'b' invocations")


def test_mark_running_process():
    """mark reaches every memtrail that traces the process: two records of
    it (as a user's record beside a node's watch) both switch."""
    w = subprocess.Popen([workload("stepper"), "+8", "-8", "+4"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=0)
    outs = [os.path.join(tmpdir(), "trail.json"), os.path.join(tmpdir(), "trail2.json")]
    bgs = [Background(["record", "-q", "-o", out, "--pid", str(w.pid)]) for out in outs]
    try:
        for name, steps in (("alpha", 1), ("beta", 2)):
            p = run([MEMTRAIL, "mark", str(w.pid), name])
            check_eq(p.returncode, 0, f"mark {name}: {p.stderr!r}")
            check(f"entered phase '{name}' in the " in p.stderr, p.stderr)
            for _ in range(steps):
                w.stdin.write("g")
                check_eq(w.stdout.readline(), "ok\n", "stepper step")
    finally:
        # a failure leaves neither the workload nor memtrail behind
        w.stdin.close()
        w.wait()
        results = [bg.stop(sig=None) for bg in bgs]
    for (rc, _, err), out in zip(results, outs):
        check_eq(rc, 0, f"memtrail status ({err!r})")
        t = target(load_trail(out), w.pid)
        check_eq([p["name"] for p in t["phases"]], ["start", "alpha", "beta"], "phases")
        check_identities(t)
        alpha, beta = (p["kinds"]["mapped"] for p in t["phases"][1:])
        check_eq([alpha[f] for f in FIELDS[:4]], [8 * MiB, 0, 8 * MiB, 8 * MiB], "alpha mapped")
        check_eq([beta[f] for f in FIELDS[:4]], [4 * MiB, 8 * MiB, -4 * MiB, 0], "beta mapped")
    no_programs_left()


PY_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import memtrail_marker
memtrail_marker.phase("tokenize")
tok = b"t" * (8 << 20)
memtrail_marker.phase("load")
weights = b"w" * (32 << 20)
memtrail_marker.phase("infer")
del weights
try:
    memtrail_marker.phase("bad\\x01name")
except ValueError:
    print("rejected")
"""


def test_python_marker_three_phases():
    p, trail, _ = record([os.path.realpath(sys.executable), "-c", PY_SCRIPT,
                          os.path.join(ROOT, "include")])
    check_eq(p.returncode, 0, f"status ({p.stderr!r})")
    check("rejected" in p.stdout, "the marker accepted a bad name")
    t = trail["targets"][0]
    names = [x["name"] for x in t["phases"]]
    check_eq(names[-3:], ["tokenize", "load", "infer"], "the marker's phases, in order")
    check_identities(t)
    by = {x["name"]: x["kinds"] for x in t["phases"]}
    check(by["tokenize"]["rss_anon"]["segment_peak"] >= 8 * MiB, "8 MiB in 'tokenize'")
    check(32 * MiB <= by["load"]["mapped"]["segment_change"] <= 33 * MiB,
          f"32 MiB mapped in 'load': {by['load']['mapped']}")
    check(32 * MiB <= by["load"]["rss_anon"]["segment_change"] <= 33 * MiB,
          f"32 MiB resident in 'load': {by['load']['rss_anon']}")
    check(by["infer"]["mapped"]["deallocations"] >= 32 * MiB, "'infer' frees the 32 MiB")


def test_marker_bad_name_counted():
    script = ("import ctypes; ctypes.CDLL(None).prctl(0x4D545048, b'bad\\x07', 0, 0, 0);"
              "ctypes.CDLL(None).prctl(0x4D545048, b'x' * 64, 0, 0, 0)")
    p, trail, _ = record([os.path.realpath(sys.executable), "-c", script])
    check_eq(p.returncode, 0, f"status ({p.stderr!r})")
    check_eq(trail["lost"]["phase_names"], 2, "invalid marker names counted")
    check_eq([x["name"] for x in trail["targets"][0]["phases"]], ["start"], "phases")


def test_rejected_names_and_unknown_pids():
    d = tmpdir()
    for arg, needle in (("bad\x01=/bin/true:main", "non-printable byte 0x01"),
                        ("x" * 64 + "=/bin/true:main", "64 bytes long, the most is 63"),
                        ("=/bin/true:main", "cannot be empty"),
                        ("name", "give NAME=BINARY:SYMBOL"),
                        ("name=/bin/true:", "give NAME=BINARY:SYMBOL"),
                        ("name=lib.so::f", "give NAME=BINARY:SYMBOL")):
        p = run([MEMTRAIL, "record", "-o", os.path.join(d, "t.json"), "--phase", arg,
                 "--", "true"])
        check_eq(p.returncode, 2, f"status for --phase {arg!r}")
        check(needle in p.stderr, f"{needle!r} not in {p.stderr!r}")
    p = run([MEMTRAIL, "mark", str(os.getpid()), "tab\there"])
    check_eq(p.returncode, 2, "mark with a bad name")
    check("non-printable byte 0x09" in p.stderr, p.stderr)
    pid = free_pid()
    p = run([MEMTRAIL, "mark", str(pid), "x"])
    one_line_error(p, f"no process with PID {pid}")
    p = run([MEMTRAIL, "mark", str(os.getpid()), "x"])
    if FOREIGN:     # a node-wide memtrail beside the suite traces every process
        check_eq(p.returncode, 0, f"mark reaches the node's memtrail: {p.stderr!r}")
    else:
        one_line_error(p, f"no running memtrail traces PID {os.getpid()}")


def test_missing_symbol_rule_keeps_the_others():
    p, trail, data = record([workload("phases")],
                            rules(workload("phases")) +
                            ["--phase", f"ghost={workload('phases')}:no_such_function"])
    check_eq(p.returncode, 0, f"status ({p.stderr!r})")
    check("phase rule 'ghost' not set: cannot attach to 'no_such_function'" in p.stderr,
          p.stderr)
    check_phases_workload(trail["targets"][0], data)
    no_programs_left()


def test_report_prints_phase_tables():
    p, trail, _ = record([workload("phases"), "--marker"])
    out = [a for a in p.args if a.endswith(".json")][0]
    r = run([MEMTRAIL, "report", out])
    check_eq(r.returncode, 0, r.stderr)
    for name in ("load", "warmup", "serve", "shrink"):
        check(f"  {name} " in r.stdout, f"phase {name} missing from the report")
    check("SEG_PEAK" in r.stdout and "CUM_PEAK" in r.stdout, "phase table header")
    j = json.loads(run([MEMTRAIL, "report", "--json", out]).stdout)
    check_eq(j["targets"][0]["phases"], trail["targets"][0]["phases"], "report --json phases")
