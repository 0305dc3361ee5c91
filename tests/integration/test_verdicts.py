# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Exit-137 verdicts for record's targets: real OOM kills, real senders."""

import json
import os
import subprocess
import time

from harness import (py_hog, MEMTRAIL, MiB, Background, check, check_eq, in_cgroup, kubelet_memcg,
                     load_trail, new_pod_ids, record, remove_tree, run, target, tmpdir, workload,
                     no_programs_left)
from test_watch import pods_dir

LIMIT = 64 * MiB


def check_oom_verdict(cmd, comm_prefix, driver="cgroupfs"):
    ids = new_pod_ids()
    path, rel, limit, uid, cid = kubelet_memcg(LIMIT, ids, driver=driver)
    try:
        p, trail, _ = record(in_cgroup(path, cmd), ["--pods-dir", pods_dir(uid)])
    finally:
        remove_tree(path)
    check_eq(p.returncode, 137, f"memtrail's status (stderr {p.stderr!r})")
    t = [x for x in trail["targets"] if x["comm"].startswith(comm_prefix)][0]
    check_eq(t["exit"], {"code": 0, "signal": 9}, "exit")
    v = t["verdict"]
    check_eq(v["cause"], "oom_cgroup", f"cause ({v})")
    check_eq(v["cgroup"], rel, "the cgroup at its limit")
    # the pod and the container, as the kubelet named their cgroups
    check_eq((v["pod"]["uid"], v["pod"]["cgroup_driver"], v["container"]["id"]),
             (uid, driver, cid), "pod uid, cgroup driver, container id")
    check_eq(v["limit"], limit, "limit vs memory.limit_in_bytes")
    check(limit - 4 * MiB <= v["usage"] <= limit, f"usage {v['usage']} vs limit {limit}")
    check_eq(v["trigger"]["pid"], t["pid"], "the allocating task")
    check_eq(t["cgroup"], rel, "the target's cgroup after it moved in")
    # the target named as watch names it: the kubelet's log directory
    check_eq((t["pod"]["namespace"], t["pod"]["name"], t["pod"]["uid"]),
             ("serving", "llama-7b", uid), "the target's pod")
    check_eq((t["container"]["name"], t["container"]["id"]), ("model-server", cid),
             "the target's container")
    check_eq(v["container"]["name"], "model-server", "the verdict's container, named")
    saved = os.path.join(tmpdir(), "trail.json")
    with open(saved, "w") as f:
        json.dump(trail, f)
    r = run([MEMTRAIL, "report", saved])
    check("pod serving/llama-7b container model-server" in r.stdout,
          f"the report names the container: {r.stdout!r}")
    # the memory picture before the kill: most of the limit, in the last phase
    last = t["phases"][-1]
    check_eq(last["name"], "grow", "the workload's last phase")
    grown = last["kinds"]["rss_anon"]["segment_peak"]
    check(limit // 2 <= grown <= limit, f"rss_anon grew {grown} in 'grow', limit {limit}")
    check(t["kinds"]["rss_anon"]["peak"] <= limit, "rss_anon peak above the limit")
    check(f"killed by SIGKILL: oom_cgroup: the kernel OOM killer, cgroup {rel}" in p.stdout,
          f"no verdict line in {p.stdout!r}")
    no_programs_left()


def test_oom_cgroup_c_workload():
    check_oom_verdict([workload("hog")], "hog")


def test_oom_cgroup_systemd_driver():
    # the kubelet's systemd driver names slices and scopes (v2 nodes mostly)
    check_oom_verdict([workload("hog")], "hog", driver="systemd")


def test_oom_cgroup_python_workload():
    check_oom_verdict(py_hog(), "python")


def test_sigkill_sender_after_sigterm():
    d = tmpdir()
    pidfile = os.path.join(d, "pid")
    out = os.path.join(d, "trail.json")
    bg = Background(["record", "-q", "-o", out, "--", "sh", "-c",
                     f"echo $$ > {pidfile}; trap '' TERM; exec sleep 30"])
    deadline = time.time() + 10
    while not (os.path.exists(pidfile) and open(pidfile).read().strip()):
        check(time.time() < deadline, "the target never started")
        time.sleep(0.05)
    pid = int(open(pidfile).read())
    time.sleep(0.2)
    subprocess.run(["/bin/kill", "-TERM", str(pid)], check=True)
    time.sleep(0.3)
    killer = subprocess.run(["/bin/kill", "-KILL", str(pid)], check=True)
    rc, _, err = bg.stop(sig=None)
    check_eq(rc, 137, f"memtrail status ({err!r})")
    t = target(load_trail(out), pid)
    v = t["verdict"]
    check_eq(v["cause"], "signal", f"cause ({v})")
    check_eq(v["sender"]["comm"], "kill", "sender comm")
    check_eq(v["sender"]["ppid"], os.getpid(), "sender's parent: this test")
    check_eq(v["sigterm_first"], True, "SIGTERM came first")
    check(250 <= v["sigterm_before_ms"] <= 3000,
          f"SIGTERM {v['sigterm_before_ms']} ms before SIGKILL, want about 300")
    check(killer.returncode == 0, "kill failed")
    no_programs_left()


def test_self_kill_names_itself():
    p, trail, pids = record([workload("forker"), "--die"])
    check_eq(p.returncode, 137, "status")
    v = target(trail, pids["parent"])["verdict"]
    check_eq(v["cause"], "signal", "cause")
    check_eq(v["sender"]["pid"], pids["parent"], "a process that killed itself")
    check_eq(v["sigterm_first"], False, "no SIGTERM")
    check_eq(target(trail, pids["a"])["verdict"], None, "no verdict for an exit(3)")
