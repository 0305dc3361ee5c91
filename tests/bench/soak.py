#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""make soak: memtrail watch, node-wide at its defaults, for SOAK_SECONDS
(3600) beside a kubelet-shaped container whose process is OOM-killed every
SOAK_OOM_EVERY seconds (30) and a process storm of SOAK_STORM execs a second
(200). Every kill, counted by the cgroup's own oom_kill, must get watch's
OOM snapshot and an oom_cgroup verdict naming the pod; watch's memory, its
descriptors and the node's BPF programs, maps and links must stay flat from
the first kill to the last. One line per kill, then the verdict; exit
status 1 when a kill went without its files or something grew."""

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import MEMTRAIL, in_cgroup, kubelet_memcg, new_pod_ids, remove_tree, workload  # noqa: E402
from test_watch import LIMIT, pods_dir  # noqa: E402

SECONDS = int(os.environ.get("SOAK_SECONDS", "3600"))
OOM_EVERY = int(os.environ.get("SOAK_OOM_EVERY", "30"))
STORM = int(os.environ.get("SOAK_STORM", "200"))
# growth allowed from the first kill to the last: allocator slack, not a leak
RSS_SLACK_KIB = 4096


def oom_kills(path):
    """The cgroup's own count of OOM kills (v2 memory.events, v1 memory.oom_control)."""
    for name, key in (("memory.events", "oom_kill "), ("memory.oom_control", "oom_kill ")):
        p = os.path.join(path, name)
        if os.path.exists(p):
            with open(p) as f:
                for line in f:
                    if line.startswith(key):
                        return int(line.split()[1])
    return 0


def bpf_objects():
    """BPF programs, maps and links on the node (bpftool's own count)."""
    counts = []
    for what in ("prog", "map", "link"):
        out = subprocess.run(["bpftool", what, "show", "-j"], capture_output=True, text=True,
                             check=True).stdout
        counts.append(len(json.loads(out or "[]")))
    return tuple(counts)


def held_fds(pid, looks=3):
    """watch's descriptors held across LOOKS looks 0.1 s apart: under the
    storm it opens /proc files for a moment all the time, and one caught
    open is not a leak."""
    held = None
    for i in range(looks):
        now = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                now.add((fd, os.readlink(f"/proc/{pid}/fd/{fd}")))
            except OSError:
                pass        # closed while listed
        held = now if held is None else held & now
        if i + 1 < looks:
            time.sleep(0.1)
    return len(held)


def sample(pid):
    with open(f"/proc/{pid}/status") as f:
        rss = int([l.split()[1] for l in f if l.startswith("VmRSS:")][0])
    return {"rss_kib": rss, "fds": held_fds(pid), "bpf": bpf_objects()}


def main():
    # stopped early (SIGTERM, or Ctrl-C where a background start ignored it):
    # the storm, watch and the cgroup still go
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    ids = new_pod_ids()
    path, rel, limit, uid, cid = kubelet_memcg(LIMIT, ids)
    pods = pods_dir(ids[0])
    out = tempfile.mkdtemp(prefix="memtrail-soak-")
    # its output to files, as a DaemonSet's goes to the node's log: read at the end
    logs = tempfile.mkdtemp(prefix="memtrail-soak-log-")
    out_log, err_log = (open(os.path.join(logs, name), "w+") for name in ("stdout", "stderr"))
    watch = subprocess.Popen([MEMTRAIL, "watch", "-o", out, "--pods-dir", pods],
                             stdout=out_log, stderr=err_log)
    deadline = time.monotonic() + 60
    while watch.poll() is None and time.monotonic() < deadline:
        err_log.seek(0)
        if "tracing" in err_log.read():
            break
        time.sleep(0.1)
    # a group of its own: the storm's spawning loops go with it
    storm = subprocess.Popen([workload("storm"), str(STORM), str(SECONDS + 60)],
                             stdout=subprocess.DEVNULL, start_new_session=True)
    first = last = None
    kills = 0
    failures = []
    t_end = time.monotonic() + SECONDS
    try:
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            p = subprocess.run(in_cgroup(path, [workload("hog")]), capture_output=True,
                               timeout=120)
            if p.returncode != -9:
                failures.append(f"the hog ended with {p.returncode}, not SIGKILL")
            kills = oom_kills(path)
            # watch writes a kill's files once the victim is gone: wait for them, bounded
            deadline = time.monotonic() + 20
            while (len(glob.glob(os.path.join(out, "verdict-*.json"))) < kills and
                   time.monotonic() < deadline):
                time.sleep(0.1)
            last = sample(watch.pid)
            first = first or last
            print(f"{time.monotonic() - t_end + SECONDS:7.0f} s  kills {kills}  "
                  f"verdicts {len(glob.glob(os.path.join(out, 'verdict-*.json')))}  "
                  f"VmRSS {last['rss_kib'] / 1024:.1f} MiB  fds {last['fds']}  "
                  f"BPF progs/maps/links {'/'.join(map(str, last['bpf']))}", flush=True)
            time.sleep(max(0.0, OOM_EVERY - (time.monotonic() - t0)))
    finally:
        os.killpg(storm.pid, signal.SIGKILL)
        storm.wait()
        watch.send_signal(2)
        watch.wait(timeout=60)
        err_log.seek(0)
        err = err_log.read()
        out_log.close()
        err_log.close()
        subprocess.run(["rm", "-rf", logs])
        remove_tree(path)
    verdicts = []
    for name in sorted(glob.glob(os.path.join(out, "verdict-*.json"))):
        with open(name) as f:
            verdicts.append(json.load(f))
    ours = [v for v in verdicts if (v.get("verdict") or {}).get("cause") == "oom_cgroup" and
            (v.get("pod") or {}).get("uid") == uid]
    snapshots = glob.glob(os.path.join(out, "oom-*.json"))
    subprocess.run(["rm", "-rf", out])
    if len(ours) != kills:
        failures.append(f"{kills} kills, {len(ours)} oom_cgroup verdicts naming the pod")
    if len(snapshots) < kills:
        failures.append(f"{kills} kills, {len(snapshots)} OOM snapshots")
    if watch.returncode != 0:
        failures.append(f"watch ended with status {watch.returncode}: {err.strip()[-300:]}")
    if not first:
        failures.append("no kill in the time given")
        first = last = {"rss_kib": 0, "fds": 0, "bpf": ()}
    else:
        if last["rss_kib"] > first["rss_kib"] + RSS_SLACK_KIB:
            failures.append(f"VmRSS grew {first['rss_kib']} -> {last['rss_kib']} KiB")
        if last["fds"] > first["fds"]:
            failures.append(f"descriptors grew {first['fds']} -> {last['fds']}")
        if last["bpf"] != first["bpf"]:
            failures.append(f"BPF objects {first['bpf']} -> {last['bpf']}")
    print(f"soak: {SECONDS} s, {kills} OOM kills (one every {OOM_EVERY} s) beside a storm of "
          f"{STORM} execs/s: {len(ours)} verdicts, {len(snapshots)} snapshots; VmRSS "
          f"{first['rss_kib'] / 1024:.1f} -> {last['rss_kib'] / 1024:.1f} MiB, "
          f"fds {first['fds']} -> {last['fds']}: "
          f"{'; '.join(failures) or 'flat, nothing missed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
