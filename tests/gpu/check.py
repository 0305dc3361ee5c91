#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""memtrail against NVIDIA's real driver on a real GPU (the device machine):
driver_calls.py and torch_calls.py (twice: cudaMalloc segments, then
expandable segments on cuMemCreate/cuMemMap) each under 'memtrail record';
memtrail's figures against each program's own account. One line per check
(ok/FAIL), everything kept under OUT.

    MEMTRAIL='memtrail command words' check.py OUT
"""

import json
import os
import shlex
import subprocess
import sys
import time

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
MEMTRAIL = shlex.split(os.environ.get("MEMTRAIL", "./memtrail"))
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
results = []


def check(cond, what):
    results.append((bool(cond), what))
    print(("ok   " if cond else "FAIL ") + what, flush=True)


def run(name, args, env=None, timeout=240):
    t0 = time.monotonic()
    try:
        p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        p = subprocess.CompletedProcess(args, -1, "", f"{e}\n")
    with open(os.path.join(OUT, "runs.log"), "a") as f:
        f.write(f"$ {shlex.join(args)}\nrc {p.returncode}, {time.monotonic() - t0:.1f} s\n"
                f"--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}\n")
    return p


def record(name, prog, env=None):
    """PROG under memtrail record: (memtrail's status, trail, the program's JSON)."""
    trail_path = os.path.join(OUT, name + ".json")
    p = run(name, [*MEMTRAIL, "record", "-o", trail_path, "--", sys.executable, prog], env=env)
    data = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    trail = None
    if os.path.exists(trail_path):
        with open(trail_path) as f:
            trail = json.load(f)
        r = run(name + "-report", [*MEMTRAIL, "report", trail_path])
        with open(os.path.join(OUT, "reports.txt"), "a") as f:
            f.write(r.stdout + r.stderr)
    check(p.returncode == 0 and trail and data,
          f"{name}: memtrail record ran (status {p.returncode}, trail "
          f"{'written' if trail else 'missing'}; stderr tail {p.stderr[-300:]!r})")
    return trail, (data[-1] if data else None)


def target(trail, pid):
    return next((t for t in trail["targets"] if t["pid"] == pid), None)


def kind(t, k, field):
    return t["kinds"].get(k, {}).get(field) if t else None


def ooms(trail, pid):
    return [e for e in trail.get("events", []) if e.get("type") == "device_oom" and
            e.get("pid") == pid]


def watch_device_oom():
    """memtrail watch on the node while driver_calls.py fails its 4 TiB
    allocation: a device-oom snapshot with the call and what was live."""
    snaps = os.path.join(OUT, "snapshots")
    w = subprocess.Popen([*MEMTRAIL, "watch", "-o", snaps], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    err = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = w.stderr.readline()
        err.append(line)
        if not line or "tracing" in line:
            break
    p = run("watch-driver", [sys.executable, os.path.join(HERE, "driver_calls.py")])
    w.send_signal(2)
    out, rest = w.communicate(timeout=60)
    with open(os.path.join(OUT, "runs.log"), "a") as f:
        f.write("--- watch\n" + "".join(err) + rest + out)
    d = json.loads([x for x in p.stdout.splitlines() if x.startswith("{")][-1]) \
        if p.returncode == 0 else None
    files = sorted(os.listdir(snaps)) if os.path.isdir(snaps) else []
    dev = [f for f in files if f.startswith("device-oom-")]
    check(d and w.returncode == 0 and len(dev) == 1,
          f"watch: one device-oom snapshot ({files}; watch status {w.returncode})")
    if not (d and len(dev) == 1):
        return
    with open(os.path.join(snaps, dev[0])) as f:
        snap = json.load(f)["snapshot"]
    ev = snap.get("device_oom", {})
    check(snap.get("trigger") == "device_oom" and ev.get("pid") == d["pid"] and
          ev.get("size") == d["oom"]["size"] and ev.get("function") == "cuMemAlloc_v2" and
          ev.get("live_allocations", {}).get("bytes") ==
          d["oom"]["live_device"] + d["host_peak"] + d["managed_peak"],
          f"watch: the snapshot's event {json.dumps(ev)[:500]}")


def bench_pairs(n=20000):
    """The time a cuMemAlloc_v2 + cuMemFree_v2 pair takes on the real driver,
    untraced and under memtrail record, interleaved (a benchmark line, not a check)."""
    prog = [sys.executable, os.path.join(HERE, "driver_calls.py"), "--bench", str(n)]
    times = {"untraced": [], "record": []}
    for _ in range(3):
        for mode in times:
            args = prog if mode == "untraced" else \
                [*MEMTRAIL, "record", "-q", "-o", os.path.join(OUT, "bench.json"), "--", *prog]
            p = run("bench-" + mode, args)
            got = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
            if got:
                times[mode].append(got[-1]["us_a_pair"])
    if os.path.exists(os.path.join(OUT, "bench.json")):
        os.unlink(os.path.join(OUT, "bench.json"))
    print(f"bench: {n} cuMemAlloc_v2 (2 MiB) + cuMemFree_v2 pairs, us a pair, 3 interleaved "
          f"runs: untraced {['%.2f' % x for x in times['untraced']]}, under record "
          f"{['%.2f' % x for x in times['record']]}", flush=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    p = run("features", [*MEMTRAIL, "features"])
    check(p.returncode == 0, f"memtrail features: {p.stdout.strip()[:2000]}")
    run("nvidia-smi", ["nvidia-smi"])

    trail, d = record("driver", os.path.join(HERE, "driver_calls.py"))
    if trail and d:
        t = target(trail, d["pid"])
        check(t, "driver: the program is a target")
        for k, want in (("cuda_device", d["device_peak"]), ("cuda_host", d["host_peak"]),
                        ("cuda_managed", d["managed_peak"])):
            check(kind(t, k, "peak") == want, f"driver: {k} peak {kind(t, k, 'peak')} == {want}")
            check(kind(t, k, "current") == 0, f"driver: {k} current {kind(t, k, 'current')} == 0")
        check(d["oom"]["rc"] == 2, f"driver: the 4 TiB cuMemAlloc_v2 failed with {d['oom']['rc']} (2)")
        ev = ooms(trail, d["pid"])
        check(len(ev) == 1 and ev[0].get("size") == d["oom"]["size"] and
              ev[0].get("error") == "CUDA_ERROR_OUT_OF_MEMORY" and
              ev[0].get("function") == "cuMemAlloc_v2",
              f"driver: one device_oom event for it: {json.dumps(ev)[:600]}")
        check(d["driver_free_drop"] >= d["device_peak"],
              f"driver: cuMemGetInfo's free memory fell by {d['driver_free_drop']} >= "
              f"{d['device_peak']} asked")

    for name, conf in (("torch", None), ("torch-expandable", "expandable_segments:True")):
        env = dict(os.environ)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        # the driver's own count of used memory, every 10 ms, beside the run
        try:
            smi = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used,memory.total",
                                    "--format=csv,noheader,nounits", "-lms", "10"],
                                   stdout=subprocess.PIPE, text=True)
        except OSError:
            smi = None
        trail, d = record(name, os.path.join(HERE, "torch_calls.py"), env)
        used = []
        if smi:
            smi.terminate()
            used = [[int(x) for x in line.split(",")]
                    for line in smi.communicate()[0].splitlines() if line.strip()]
        smi_max = max((u for u, _ in used), default=0) * MiB
        smi_total = used[0][1] * MiB if used else 0
        if not (trail and d):
            continue
        t = target(trail, d["pid"])
        check(t, f"{name}: the program is a target ({d['torch']}, CUDA {d['cuda']}, {d['device']})")
        ph = {p_["name"]: p_["kinds"].get("cuda_device", {}) for p_ in t["phases"]}
        check(ph.get("tensors", {}).get("cumulative_peak") == d["peak_before_oom"],
              f"{name}: cuda_device peak up to the failure "
              f"{ph.get('tensors', {}).get('cumulative_peak')} == PyTorch's "
              f"max_memory_reserved then {d['peak_before_oom']}")
        check(kind(t, "cuda_device", "current") == d["reserved_end"],
              f"{name}: cuda_device at exit {kind(t, 'cuda_device', 'current')} == PyTorch's "
              f"memory_reserved at the end {d['reserved_end']}")
        peak = kind(t, "cuda_device", "peak")
        # above PyTorch's own count only where the driver saw it too (a transient)
        check(peak <= smi_total and (peak == d["max_reserved"] or peak >= smi_max - 1024 * MiB),
              f"{name}: cuda_device peak {peak}: PyTorch's max_memory_reserved "
              f"{d['max_reserved']}, nvidia-smi's most used in {len(used)} samples {smi_max} "
              f"of {smi_total} (the whole GPU's, this process's context included)")
        check(d["oom"], f"{name}: the 4 TiB tensor failed: {d['oom']!r}")
        ev = ooms(trail, d["pid"])
        check(ev and all(e.get("error") in ("CUDA_ERROR_OUT_OF_MEMORY",
                                             "cudaErrorMemoryAllocation") for e in ev),
              f"{name}: device_oom events: {json.dumps(ev)[:800]}")
        # the failures come at the top: what each lists as live is what was live then
        live = [e.get("live_allocations", {}).get("bytes") for e in ev]
        check(ev and max(live) == peak,
              f"{name}: the most any device_oom lists as live, of {live}, == the peak {peak}")
    watch_device_oom()
    bench_pairs()
    # the trails and snapshots in one file (a few files come back from the machine)
    keep = [f for f in os.listdir(OUT) if f.endswith(".json") or f == "snapshots"]
    if keep and not subprocess.run(["tar", "czf", os.path.join(OUT, "artifacts.tar.gz"), "-C",
                                    OUT, *keep]).returncode:
        subprocess.run(["rm", "-rf", *(os.path.join(OUT, f) for f in keep)])
    bad = [w for ok_, w in results if not ok_]
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump({"passed": len(results) - len(bad), "failed": bad}, f, indent=1)
    print(f"gpu: {len(results) - len(bad)} passed, {len(bad)} failed", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
