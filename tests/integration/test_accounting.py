# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Levels against ground truth: the workloads' own arithmetic and /proc."""

import subprocess

from harness import (MiB, Background, check, check_eq, check_within, level, record,
                     record_runs, target, workload, no_programs_left, tmpdir)
import os
import json
import time


def check_mapper(t, data):
    # the workload's arithmetic agrees with /proc, and memtrail with both
    check_eq(data["final_data"], data["base_data"] + data["final_steps"],
             "workload: VmData at the end vs its own arithmetic")
    check_eq(level(t, "mapped", "peak"), data["base_data"] + data["peak_steps"],
             "mapped peak vs baseline VmData + largest sum of steps")
    check_eq(level(t, "mapped", "current"), data["final_data"],
             "mapped final vs VmData at the end")
    check_within(level(t, "rss_anon", "peak"), data["peak_touched"], 2,
                 "rss_anon peak vs bytes touched")
    check_within(level(t, "rss_anon", "peak"), data["anon_at_peak"], 2,
                 "rss_anon peak vs RssAnon at the peak")
    check_within(level(t, "rss_anon", "peak") + level(t, "rss_file", "peak"),
                 data["vmhwm"], 2, "rss_anon + rss_file peaks vs VmHWM")


def test_mapped_exact_rss_within_2pct():
    p, trail, data = record([workload("mapper")])
    check_eq(p.returncode, 0, f"memtrail status (stderr {p.stderr!r})")
    check(data, "the workload printed no report")
    check_eq(len(trail["targets"]), 1, "targets")
    t = trail["targets"][0]
    check_eq(t["comm"], "mapper", "comm")
    check_eq(t["exit"], {"code": 0, "signal": 0}, "exit")
    check_mapper(t, data)
    tl = t["timeline"]
    check(len(tl) >= 3, f"timeline has {len(tl)} samples")
    check(all(a["t_ms"] <= b["t_ms"] for a, b in zip(tl, tl[1:])), "timeline out of order")
    check(max(s["mapped"] for s in tl) <= level(t, "mapped", "peak"),
          "a sample above the peak")
    check_eq(tl[-1]["mapped"], level(t, "mapped", "current"), "last sample vs final")
    # device kinds where this kernel can run the device probes ('memtrail features')
    kinds = {"mapped", "rss_anon", "rss_file", "rss_shmem"}
    if trail["kernel"]["features"]["device"]["state"] != "no":
        kinds |= {"cuda_device", "cuda_host", "cuda_managed", "neuron_device", "neuron_host"}
    check_eq(set(t["kinds"]), kinds, "kinds")
    no_programs_left()


def test_mapped_exact_without_sites_or_devices():
    """No mapping sites and no runtimes' files tracked (--no-sites
    --no-devices): each write section of the mmap lock still keeps its
    window, the one way memtrail syncs a section's end (a munmap's
    downgraded read section too). The same ground truth, and the peak of 8
    threads mapping at once."""
    extra = ["--no-sites", "--no-devices"]
    p, trail, data = record([workload("mapper")], extra=extra)
    check_eq(p.returncode, 0, f"memtrail status (stderr {p.stderr!r})")
    check(data, "the workload printed no report")
    check_mapper(trail["targets"][0], data)
    p, trail, runs = record_runs([workload("threads")], 10, extra=extra)
    check_eq(p.returncode, 0, f"memtrail status (stderr {p.stderr!r})")
    for run, (t, data) in enumerate(runs):
        check_eq(level(t, "mapped", "peak"), data["base_data"] + data["peak_extra"],
                 f"run {run}: mapped peak of 8 concurrent threads")
        work = [x for x in t["phases"] if x["name"] == "work"]
        check_eq(len(work), 1, f"run {run}: phase 'work'")
        m, moved = work[0]["kinds"]["mapped"], data["churn"] + data["peak_extra"]
        if trail["kernel"]["features"]["mapped"]["state"] == "degraded":
            # no mmap_lock tracepoints (5.10): synced as each call returns, so
            # threads mapping at once net out (README, Kernels): the net only
            check_eq(m["allocations"] - m["deallocations"], 0,
                     f"run {run}: phase 'work' mapped net change")
        else:
            check_eq((m["allocations"], m["deallocations"]), (moved, moved),
                     f"run {run}: phase 'work' mapped allocations and deallocations")
    no_programs_left()


def test_levels_exact_after_memtrail_own_children_10_runs():
    """--heap times its probes on a child of memtrail's own, traced while it
    runs and forgotten when done: a new process's address space may then
    take the address of that child's. Each run's levels start from the new
    process's own, never from what the old one left."""
    for run in range(10):
        p, trail, data = record([workload("mapper")], extra=["--heap"])
        check_eq(p.returncode, 0, f"run {run}: memtrail status (stderr {p.stderr!r})")
        check(data, f"run {run}: the workload printed no report")
        t = trail["targets"][0]
        check_mapper(t, data)
        for k in ("mapped", "rss_anon", "rss_file"):
            check(level(t, k, "baseline") >= 0 and level(t, k, "current") >= 0,
                  f"run {run}: {k} {t['kinds'][k]}")
    no_programs_left()


def test_threads_peak_exact_20_runs():
    """20 runs of 8 threads mapping at once, one after the other under one
    record (memtrail loads once: under TCG a load is most of a run): each
    run's mapped peak is its own arithmetic's."""
    p, trail, runs = record_runs([workload("threads")], 20)
    check_eq(p.returncode, 0, f"memtrail status (stderr {p.stderr!r})")
    for run, (t, data) in enumerate(runs):
        check_eq(level(t, "mapped", "peak"), data["base_data"] + data["peak_extra"],
                 f"run {run}: mapped peak of 8 concurrent threads")
    no_programs_left()


def test_attach_by_pid():
    w = subprocess.Popen([workload("mapper"), "--wait"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    out = os.path.join(tmpdir(), "trail.json")
    bg = Background(["record", "-o", out, "--pid", str(w.pid)])
    # attached; the mapper waits on stdin: what the kernel says it holds now is its baseline
    with open(f"/proc/{w.pid}/status") as f:
        held = {l.split(":")[0]: int(l.split()[1]) * 1024 for l in f if l.startswith("VmData")}
    w.stdin.write("g")
    w.stdin.close()
    data = json.loads(w.stdout.readline())
    w.wait()
    rc, out_text, err = bg.stop(sig=None)
    check_eq(rc, 0, f"memtrail status (stderr {err!r})")
    with open(out) as f:
        trail = json.load(f)
    t = target(trail, w.pid)
    check_eq(t["exit"], {"code": 0, "signal": 0}, "exit")
    check_mapper(t, data)
    # held before attach: a baseline, not allocations of the first phase
    check_eq(t["kinds"]["mapped"]["baseline"], held["VmData"], "mapped baseline vs VmData at attach")
    start = next(p for p in t["phases"] if p["name"] == "start")["kinds"]["mapped"]
    grew = data["base_data"] - held["VmData"]	# between attach and its first step (stdio)
    check_eq(start["allocations"], (16 + 32 + 64 + 8 + 4) * MiB + grew, "allocations after attach")
    check_eq(start["deallocations"], (16 + 64 + 32) * MiB, "deallocations")
    check_eq(start["segment_change"], data["final_data"] - held["VmData"],
             "segment change: from the baseline to the end")
    check_eq(start["cumulative_current"], data["final_data"], "the level stays absolute")
    lines = out_text.splitlines()
    head = next(i for i, l in enumerate(lines) if "BASELINE" in l)
    row = [l.split() for l in lines[head + 1:] if " mapped " in l]
    units = {"B": 1, "KiB": 1024, "MiB": MiB, "GiB": 1024 * MiB}
    base = row[0][row[0].index("mapped") + 1:][:2] if row else None
    check(base and base[1] in units and
          abs(float(base[0]) * units[base[1]] - held["VmData"]) <= held["VmData"] / 100,
          f"the summary's BASELINE column says {base}, VmData was {held['VmData']}: {out_text!r}")
    no_programs_left()


def test_change_after_idle_samples_is_sampled():
    """A sample reads only the targets the kernel names as changed since the
    last one: a target idle for many samples still has its next change in the
    next sample. The stepper holds each level for 25 intervals (its own idle
    time, not a wait for memtrail); each is in the timeline, equal to VmData
    then."""
    # the fifth step only ends it: the stepper exits after its last step
    w = subprocess.Popen([workload("stepper"), "+8", "+16", "-8", "+4", "-4"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=0)
    out = os.path.join(tmpdir(), "trail.json")
    bg = Background(["record", "-q", "-o", out, "--interval", "20", "--pid", str(w.pid)])
    held = []
    try:
        for _ in range(4):
            time.sleep(0.5)
            w.stdin.write("g")
            check_eq(w.stdout.readline(), "ok\n", "stepper step")
            with open(f"/proc/{w.pid}/status") as f:
                held.append(next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmData")))
        time.sleep(0.5)
        w.stdin.write("g")
        check_eq(w.stdout.readline(), "ok\n", "stepper's last step")
    finally:
        w.stdin.close()
        w.wait()
        rc, _, err = bg.stop(sig=None)
    check_eq(rc, 0, f"memtrail status (stderr {err!r})")
    with open(out) as f:
        t = target(json.load(f), w.pid)
    seen = [s["mapped"] for s in t["timeline"]]
    for i, v in enumerate(held):
        check(v in seen, f"step {i + 1}: VmData {v} held for 25 samples, not in the timeline {seen}")
    no_programs_left()


def test_shmem_counted():
    # a shell whose 'head' fills 16 MiB of /dev/shm: rss_shmem sees it
    path = f"/dev/shm/memtrail-test-{os.getpid()}"
    try:
        p, trail, _ = record(["sh", "-c",
                              f"head -c {16 * MiB} /dev/zero > {path} && "
                              f"exec python3 -c \"import mmap,os;f=open('{path}','r+b');"
                              f"m=mmap.mmap(f.fileno(),0);s=sum(m[i] for i in range(0,len(m),4096))\""])
        check_eq(p.returncode, 0, f"status ({p.stderr!r})")
        t = [x for x in trail["targets"] if x["comm"].startswith("python")][0]
        check_within(level(t, "rss_shmem", "peak"), 16 * MiB, 2, "rss_shmem peak")
    finally:
        if os.path.exists(path):
            os.unlink(path)
