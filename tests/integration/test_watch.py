# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""memtrail watch: real OOM kills in cgroups shaped like the kubelet's, a fake
kubelet pod log directory, real senders, a full disk; snapshots and verdicts
checked against the workloads' arithmetic and the cgroup files."""

import ctypes
import glob
import json
import os
import signal
import stat
import subprocess
import sys
import time

from harness import (ROOT, MiB, Background, check, check_eq, in_cgroup, kubelet_memcg,
                     new_pod_ids, no_programs_left, remove_tree, run, MEMTRAIL,
                     one_line_error, tmpdir, workload)

LIMIT = 64 * MiB


def pods_dir(uid, namespace="serving", pod="llama-7b", container="model-server"):
    """The kubelet's log layout: <namespace>_<pod>_<uid>/<container>/0.log."""
    root = os.path.join(tmpdir(), "pods")
    d = os.path.join(root, f"{namespace}_{pod}_{uid}", container)
    os.makedirs(d)
    open(os.path.join(d, "0.log"), "w").close()
    return root


def wait_files(d, pattern, n, timeout=20):
    deadline = time.time() + timeout
    while True:
        files = sorted(glob.glob(os.path.join(d, pattern)))
        if len(files) >= n or time.time() > deadline:
            return files
        time.sleep(0.05)


def load(path):
    with open(path) as f:
        return json.load(f)


def rss_kib_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Watch(Background):
    def __init__(self, args=(), out=None):
        self.dir = out or os.path.join(tmpdir(), "snapshots")
        super().__init__(["watch", "-o", self.dir, *args])


def check_oom_snapshot(cmd, comm_prefix):
    """CMD pushed past LIMIT in a kubelet-shaped cgroup under one watch: the OOM
    snapshot, then the verdict, with the pod's names from the fake log
    directory, all against the cgroup's own files."""
    ids = new_pod_ids()
    w = Watch(["--pods-dir", pods_dir(ids[0])])
    path, rel, limit, uid, cid = kubelet_memcg(LIMIT, ids)
    try:
        p = subprocess.run(in_cgroup(path, cmd), capture_output=True, timeout=60)
        check_eq(p.returncode, -signal.SIGKILL, "the workload's end")
        with open(os.path.join(path, "memory.max_usage_in_bytes")) as f:
            max_usage = int(f.read())
        with open(os.path.join(path, "memory.oom_control")) as f:
            oom_kills = int(f.read().split("oom_kill ")[1].split()[0])
        verdicts = wait_files(w.dir, "verdict-*.json", 1)
    finally:
        rc, out, err = w.stop()
        remove_tree(path)
    check_eq(rc, 0, f"watch's status ({err!r})")
    check("lost" not in err, f"nothing lost: {err!r}")
    check_eq(oom_kills, 1, "the cgroup's oom_kill count")
    check_eq(len(verdicts), 1, "verdict files")
    v = load(verdicts[0])
    pid = v["pid"]
    check(v["comm"].startswith(comm_prefix), f"victim comm {v['comm']}")
    check_eq(v["exit"], {"signal": 9}, "exit")
    check_eq(v["verdict"]["cause"], "oom_cgroup", "cause")
    check_eq(v["verdict"]["cgroup"], rel, "the cgroup at its limit")
    check_eq(v["verdict"]["limit"], limit, "limit vs memory.limit_in_bytes")
    check(limit - 4 * MiB <= v["verdict"]["usage"] <= limit, "usage at the limit")
    check_eq(v["pod"]["uid"], uid, "pod uid")
    check_eq(v["pod"]["namespace"], "serving", "pod namespace")
    check_eq(v["pod"]["name"], "llama-7b", "pod name")
    check_eq(v["pod"]["qos"], "burstable", "QoS class")
    check_eq(v["container"]["name"], "model-server", "container name")
    check_eq(v["container"]["id"], cid, "container id")
    check_eq(v["container"]["runtime"], "containerd", "runtime")
    check_eq(v["phase"], "grow", "the workload's last phase")
    check(stat.S_IMODE(os.stat(verdicts[0]).st_mode) == 0o600, "verdict file mode")
    check(f"verdict: {pid} (" in out and "pod serving/llama-7b container model-server: "
          f"oom_cgroup: the kernel OOM killer, cgroup {rel}" in out,
          f"verdict line on stdout: {out!r}")

    snaps = glob.glob(os.path.join(w.dir, f"oom-{pid}-*.json"))
    check_eq(len(snaps), 1, "OOM snapshots")
    check_eq(v["snapshot"], os.path.basename(snaps[0]), "the verdict names its snapshot")
    check(stat.S_IMODE(os.stat(snaps[0]).st_mode) == 0o600, "snapshot file mode")
    d = load(snaps[0])
    s = d["snapshot"]
    check_eq(s["trigger"], "oom_kill", "trigger")
    check_eq(s["phase"], "grow", "phase at the kill")
    check_eq(s["oom"]["cgroup"], rel, "OOM cgroup")
    check_eq(s["cgroup"]["limit"], limit, "snapshot's cgroup limit")
    check_eq(s["pod"]["name"], "llama-7b", "snapshot's pod")
    check_eq(s["container"]["name"], "model-server", "snapshot's container")
    # taken at the OOM killer's choice, before the exit the verdict records
    check(s["t_ms"] <= v["t_ms"], f"snapshot at {s['t_ms']} ms, exit at {v['t_ms']} ms")
    # the memory picture before the kernel freed it: what the cgroup held, and
    # nearly all of it grown in the open last phase "grow"
    t = d["targets"][0]
    last = t["phases"][-1]
    check_eq((last["name"], last.get("open")), ("grow", True), "the open phase")
    grown = last["kinds"]["rss_anon"]["segment_change"]
    check(limit - 16 * MiB <= grown <= max_usage,
          f"rss_anon grew {grown} in 'grow'; cgroup limit {limit}, max usage {max_usage}")
    victim = s["oom"]["victim_rss"]["anon"]
    check(limit - 16 * MiB <= victim <= max_usage, f"victim rss_anon {victim} at the choice")
    check_eq(t["kinds"]["rss_anon"]["current"], last["kinds"]["rss_anon"]["cumulative_current"],
             "levels and the phase table agree")
    check(t["timeline"], "a timeline")
    # memtrail report reads a snapshot as a trail
    r = run([MEMTRAIL, "report", snaps[0]])
    check_eq(r.returncode, 0, f"report of a snapshot ({r.stderr!r})")
    check("grow" in r.stdout, "report shows the phase")
    no_programs_left()


def test_oom_c_workload():
    check_oom_snapshot([workload("hog")], "hog")


PY_HOG = """
import sys
sys.path.insert(0, sys.argv[1])
import memtrail_marker
memtrail_marker.phase("grow")
hold = []
while True:
    hold.append(b"x" * (4 << 20))
"""


def test_oom_python_workload():
    check_oom_snapshot([os.path.realpath(sys.executable), "-c", PY_HOG,
                        os.path.join(ROOT, "include")], "python")
