# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""memtrail watch: real OOM kills in cgroups shaped like the kubelet's, a fake
kubelet pod log directory, real senders, a full disk; snapshots and verdicts
checked against the workloads' arithmetic and the cgroup files."""

import fcntl
import glob
import gzip
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

from harness import (pprof_strings, py_hog, MiB, PAGE, Background, check, check_eq, in_cgroup,
                     kubelet_memcg, new_pod_ids, no_programs_left, pyenv, remove_tree, run,
                     MEMTRAIL, one_line_error, tmpdir, vendor, workload)

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


def lost_lines(err):
    """watch's lines that say something was lost, but "maps": a read of a
    process's code mappings that met a busy mmap lock, done again at its
    next hook (sites on, a loaded machine makes a few)."""
    return [x for x in err.splitlines() if "lost" in x and "lost maps: " not in x]


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
    check(not lost_lines(err), f"nothing lost: {err!r}")
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
    # memtrail report reads a snapshot as a trail, and says what it is
    r = run([MEMTRAIL, "report", snaps[0]])
    check_eq(r.returncode, 0, f"report of a snapshot ({r.stderr!r})")
    check("grow" in r.stdout, "report shows the phase")
    head = r.stdout.splitlines()[:3]
    check(head[0].startswith(f"snapshot {snaps[0]}: "), f"first line {head[0]!r}")
    check(head[1].startswith(f"snapshot: the kernel OOM killer chose {pid} (") and
          head[1].endswith(", pod serving/llama-7b container model-server"),
          f"why, who and where: {head[1]!r}")
    check(head[2].startswith(f"oom: cgroup {rel}, limit "), f"the cgroup at its limit: {head[2]!r}")
    r = run([MEMTRAIL, "report", verdicts[0]])
    check_eq(r.returncode, 0, f"report of a verdict file ({r.stderr!r})")
    check(r.stdout.startswith(f"verdict file {verdicts[0]}: written ") and
          ", pod serving/llama-7b container model-server\n" in r.stdout.split("\n", 1)[0] + "\n",
          f"a verdict file, named so: {r.stdout[:300]!r}")
    no_programs_left()


def full_pipe():
    """A pipe of one page, filled: its reader has stopped reading."""
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 512)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    return r, w


def drain(fd):
    os.set_blocking(fd, False)
    data = b""
    try:
        while chunk := os.read(fd, 65536):
            data += chunk
    except BlockingIOError:
        pass
    return data.decode(errors="replace")


def test_unread_output_does_not_stop_watch():
    """A supervisor that stopped reading watch's stdout and stderr (both
    pipes full): two OOM kills still get their snapshots and verdicts; the
    lines nothing read are dropped, and counted once output flows again."""
    ids = new_pod_ids()
    d = os.path.join(tmpdir(), "snapshots")
    path, rel, limit, uid, cid = kubelet_memcg(LIMIT, ids)
    (out_r, out_w), (err_r, err_w) = full_pipe(), full_pipe()
    w = None
    try:
        w = subprocess.Popen([MEMTRAIL, "watch", "-o", d, "--pods-dir", pods_dir(ids[0])],
                             stdout=out_w, stderr=err_w)
        os.close(out_w)
        os.close(err_w)
        # its start-up lines wait for room: make some, then fill the pipe again
        started = ""
        while "tracing" not in started:
            check(w.poll() is None, "watch runs")
            started += drain(err_r)
            time.sleep(0.05)
        fd = os.open(f"/proc/{w.pid}/fd/2", os.O_WRONLY | os.O_NONBLOCK)
        try:
            while True:
                os.write(fd, b"x" * 512)
        except BlockingIOError:
            pass
        os.close(fd)
        for _ in range(2):
            p = subprocess.run(in_cgroup(path, [workload("hog")]), capture_output=True,
                               timeout=60)
            check_eq(p.returncode, -signal.SIGKILL, "the workload's end")
        verdicts = wait_files(d, "verdict-*.json", 2)
        snapshots = glob.glob(os.path.join(d, "oom-*.json"))
        check(w.poll() is None, "watch runs")
        out, err = drain(out_r), drain(err_r)
        w.send_signal(signal.SIGINT)
        w.wait(timeout=30)
        err += drain(err_r)
    finally:
        if w and w.poll() is None:
            w.kill()
            w.wait()
        remove_tree(path)
        os.close(out_r)
        os.close(err_r)
    check_eq(len(verdicts), 2, "verdict files while nothing read watch's output")
    check_eq(len(snapshots), 2, "OOM snapshots while nothing read watch's output")
    check_eq(w.returncode, 0, f"watch's status ({err[-500:]!r})")
    check("verdict:" not in out.replace("x", ""), f"no verdict line got through: {out[-300:]!r}")
    check("memtrail: warning: 2 lines dropped from stdout: nothing read it" in err,
          f"the dropped verdict lines counted: {err[-800:]!r}")
    check(re.search(r"memtrail: warning: \d+ lines? dropped from stderr: nothing read it", err),
          f"the dropped messages counted: {err[-800:]!r}")
    check(", 2 verdicts; 0 not written, 0 dropped" in err, f"watch's last line: {err[-500:]!r}")
    no_programs_left()


def test_oom_c_workload():
    check_oom_snapshot([workload("hog")], "hog")


def small_process_oom(extra, binary=None, stopped=False):
    """hog (or BINARY, a copy of it) mapping 256 KiB at a time (under
    --deep-from) killed at an 8 MiB limit under a watch with EXTRA, STOPPED
    (SIGSTOP, by this test) from before the workload starts until it is
    gone: (snapshot, verdict), or None where the kernel has no mapping sites
    (the support claim says so)."""
    ids = new_pod_ids()
    w = Watch(["--pods-dir", pods_dir(ids[0]), *extra])
    path, rel, _, uid, cid = kubelet_memcg(8 * MiB, ids)
    try:
        if stopped:
            w.proc.send_signal(signal.SIGSTOP)
        try:
            p = subprocess.run(in_cgroup(path, [binary or workload("hog"), "256"]),
                               capture_output=True, timeout=60)
        finally:
            if stopped:
                w.proc.send_signal(signal.SIGCONT)
        check_eq(p.returncode, -signal.SIGKILL, f"{extra}: the workload's end")
        verdicts = wait_files(w.dir, "verdict-*.json", 1)
    finally:
        rc, out, err = w.stop()
        remove_tree(path)
    check_eq(rc, 0, f"{extra}: watch's status ({err!r})")
    check(not lost_lines(err), f"{extra}: nothing lost: {err!r}")
    v = load(verdicts[0])
    snap = load(os.path.join(w.dir, v["snapshot"]))
    no_programs_left()
    if snap["kernel"]["features"]["map_sites"]["state"] != "yes":
        return None
    held = snap["targets"][0]["kinds"]["mapped"]["current"]
    check(held < 16 * MiB, f"{extra}: the process never reached 16 MiB mapped: {held}")
    check_eq(v["top_site"], snap["snapshot"]["top_site"], f"{extra}: the verdict's top site")
    return snap, v


def test_small_process_sections_walk_no_stack():
    """watch's --sites-from (16 MiB): a process killed at an 8 MiB limit,
    mapping 256 KiB at a time, never gets there, so its sections cost no
    stack walk: the snapshot's top site is its '[before --sites-from]' site,
    holding the bulk of what the cgroup held, and no other site of it holds
    more than a section."""
    got = small_process_oom([])
    if not got:
        return
    snap, _ = got
    top = snap["snapshot"]["top_site"]
    check(top["kind"] == "mapped" and top["site"] == "[before --sites-from]" and
          top["inuse_bytes"] >= 4 * MiB, f"the top site: {top}")
    others = [s for s in snap["targets"][0]["sites"]["list"] if s["kind"] == "mapped" and
              s["frames"][0].get("function") != "[before --sites-from]" and
              s["inuse_bytes"] > 256 * 1024]
    check_eq(others, [], "no other mapped site holds more than a section")
    check_eq(snap["snapshot"]["sites"]["sites_from"], 16 * MiB, "the snapshot says it")


def test_sites_from_zero_walks_every_section():
    """The same process under watch --sites-from 0: every section walked,
    its top site the code that maps (map_touch, inlined in main). Before
    Linux 6.7 (no task_vma iterator) the support claim says a process that
    exits within moments of mapping its code can have [unknown] frames: a
    kernel guest's victim can, there and only there."""
    got = small_process_oom(["--sites-from", "0"])
    if not got:
        return
    top = got[0]["snapshot"]["top_site"]
    told = got[0]["kernel"]["features"]["site_maps"]
    if told["state"] != "yes" and top["site"].startswith("[unknown]"):
        check("[unknown] frames" in told["note"], f"the support claim: {told}")
        return
    check(top["kind"] == "mapped" and top["site"].startswith("main (common.h:") and
          top["inuse_bytes"] >= 4 * MiB, f"the top site: {top}")


def test_sites_of_a_new_program_dead_before_memtrail_looks():
    """A program memtrail has never seen (a fresh copy of hog: a file no
    process mapped before) killed at its limit while watch is stopped: by the
    time watch reads its events the process is gone, with its maps. Its
    stacks are named all the same (--sites-from 0: every section walked),
    from the file BPF named when it told the mapping, opened through a mount
    of its filesystem (a kernel guest's root is an overlay: its layers are
    mounted in sight too, as a node's container layers are)."""
    binary = os.path.join(tmpdir(), "hog-copy")
    shutil.copy(workload("hog"), binary)
    got = small_process_oom(["--sites-from", "0"], binary=binary, stopped=True)
    if not got:
        return
    snap, v = got
    top = snap["snapshot"]["top_site"]
    told = snap["kernel"]["features"]["site_maps"]
    if told["state"] != "yes":
        # before Linux 6.7 the maps are read from /proc, and this process was gone
        check("[unknown] frames" in told["note"], f"the support claim: {told}")
        return
    check(top["kind"] == "mapped" and top["site"].startswith("main (common.h:") and
          top["inuse_bytes"] >= 4 * MiB, f"the top site: {top}")
    mods = {f.get("module") for s in snap["targets"][0]["sites"]["list"] for f in s["frames"]}
    # named by the path it was opened by: its layer's in a kernel guest, whose root is an overlay
    check(any(m and m.endswith(os.path.realpath(binary)) for m in mods),
          f"the program's frames name its file: {sorted(map(str, mods))}")


def test_oom_python_workload():
    check_oom_snapshot(py_hog(), "python")


KILLER = """
import ctypes, os, signal, sys, time
ctypes.CDLL(None).prctl(15, b"containerd-shim", 0, 0, 0)   # PR_SET_NAME
pid = int(sys.argv[1])
os.kill(pid, signal.SIGTERM)
time.sleep(0.4)
os.kill(pid, signal.SIGKILL)
"""


def test_signal_verdict_names_runtime_sender():
    """SIGTERM, a grace period, SIGKILL, from a process named like a runtime."""
    ids = new_pod_ids()
    w = Watch(["--pods-dir", pods_dir(ids[0])])
    path, rel, _, uid, cid = kubelet_memcg(LIMIT, ids)
    try:
        victim = subprocess.Popen(in_cgroup(path, ["sh", "-c", "trap '' TERM; exec sleep 60"]))
        time.sleep(0.5)
        killer = subprocess.Popen([os.path.realpath(sys.executable), "-c", KILLER,
                                   str(victim.pid)])
        killer.wait(timeout=30)
        check_eq(victim.wait(timeout=30), -signal.SIGKILL, "the victim's end")
        verdicts = wait_files(w.dir, "verdict-*.json", 1)
    finally:
        rc, out, err = w.stop()
        remove_tree(path)
    check_eq(rc, 0, f"watch's status ({err!r})")
    check_eq(len(verdicts), 1, "verdict files")
    v = load(verdicts[0])
    check_eq(v["pid"], victim.pid, "the victim")
    vd = v["verdict"]
    check_eq(vd["cause"], "signal", "cause")
    check_eq(vd["sender"]["pid"], killer.pid, "the sender")
    check_eq(vd["sender"]["comm"], "containerd-shim", "the sender's name")
    check_eq(vd["sigterm_first"], True, "SIGTERM came first")
    check(350 <= vd["sigterm_before_ms"] <= 3000,
          f"grace period {vd['sigterm_before_ms']} ms, the sender slept 400")
    check_eq(v["pod"]["name"], "llama-7b", "the victim's pod")
    check_eq(v["snapshot"], None, "no OOM snapshot for a signal")
    check(f"verdict: {victim.pid} (sleep) pod serving/llama-7b container model-server: "
          f"signal: SIGKILL sent by {killer.pid} (containerd-shim" in out,
          f"verdict line: {out!r}")
    no_programs_left()


def test_twenty_oom_kills_in_a_row():
    """20 kills under one watch: 20 snapshots, 20 verdicts, nothing lost,
    memtrail alive and its memory flat."""
    w = Watch()
    path, rel, limit, _, _ = kubelet_memcg(LIMIT)
    rss = []
    try:
        for i in range(20):
            p = subprocess.run(in_cgroup(path, [workload("hog")]), timeout=60)
            check_eq(p.returncode, -signal.SIGKILL, f"kill {i + 1}")
            check(w.proc.poll() is None, f"memtrail died after kill {i + 1}")
            wait_files(w.dir, "verdict-*.json", i + 1)
            if i in (4, 19):
                rss.append(rss_kib_of(w.proc.pid))
        snaps = wait_files(w.dir, "oom-*.json", 20)
        verdicts = wait_files(w.dir, "verdict-*.json", 20)
    finally:
        rc, out, err = w.stop()
        remove_tree(path)
    check_eq(rc, 0, f"watch's status ({err!r})")
    check_eq(len(snaps), 20, "OOM snapshots")
    check_eq(len(verdicts), 20, "verdict files")
    check_eq(out.count(": oom_cgroup: "), 20, "verdict lines")
    pids = set()
    for f in verdicts:
        v = load(f)
        check_eq(v["verdict"]["cause"], "oom_cgroup", f"cause in {f}")
        check(v["snapshot"] and os.path.exists(os.path.join(w.dir, v["snapshot"])),
              f"{f} names its snapshot")
        pids.add(v["pid"])
    check_eq(len(pids), 20, "20 distinct victims")
    for f in snaps:
        # "maps": a read of code mappings that met a busy mmap lock, done again
        # at the next hook (as lost_lines says), not a loss
        lost = {k: v for k, v in load(f)["lost"].items() if k != "maps"}
        check_eq(lost, {k: 0 for k in lost}, f"nothing lost in {f}")
    check(not lost_lines(err), f"nothing lost: {err!r}")
    check(rss[1] - rss[0] < 1024, f"memtrail's VmRSS grew from {rss[0]} to {rss[1]} KiB "
          "between kill 5 and kill 20")
    no_programs_left()


def test_pressure_snapshot_before_oom():
    """A workload growing 1 MiB per 40 ms towards the limit: a pressure snapshot
    first (usage over 90% of the limit, or reclaim), then the OOM snapshot."""
    w = Watch(["-i", "100"])
    path, rel, limit, _, _ = kubelet_memcg(LIMIT)
    try:
        p = subprocess.run(in_cgroup(path, [workload("slowhog"), "40"]), timeout=60)
        check_eq(p.returncode, -signal.SIGKILL, "the workload's end")
        verdicts = wait_files(w.dir, "verdict-*.json", 1)
    finally:
        rc, out, err = w.stop()
        remove_tree(path)
    check_eq(rc, 0, f"watch's status ({err!r})")
    pid = load(verdicts[0])["pid"]
    pressure = glob.glob(os.path.join(w.dir, f"pressure-{pid}-*.json"))
    oom = glob.glob(os.path.join(w.dir, f"oom-{pid}-*.json"))
    check_eq((len(pressure), len(oom)), (1, 1), "one pressure and one OOM snapshot")
    ps, os_ = load(pressure[0])["snapshot"], load(oom[0])["snapshot"]
    check_eq(ps["trigger"], "pressure", "trigger")
    check(ps["pressure"]["reason"] in ("usage", "reclaim", "memory_events"),
          f"reason {ps['pressure']['reason']}")
    check_eq(ps["pressure"]["cgroup"], rel, "the limited cgroup")
    check_eq(ps["pressure"]["limit"], limit, "its limit")
    check(ps["pressure"]["usage"] >= limit * 0.9 or ps["pressure"]["reason"] != "usage",
          f"usage {ps['pressure']['usage']} vs 90% of {limit}")
    check(ps["t_ms"] < os_["t_ms"], f"pressure at {ps['t_ms']} ms, OOM at {os_['t_ms']} ms")
    check(os.path.getmtime(pressure[0]) <= os.path.getmtime(oom[0]), "written first")
    check_eq(ps["phase"], "grow", "phase")
    grown = load(pressure[0])["targets"][0]["phases"][-1]["kinds"]["rss_anon"]["segment_change"]
    check(limit * 0.8 <= grown <= limit, f"grown {grown} when the pressure snapshot was taken")
    top = ps["top_processes"]
    check(top and top[0]["pid"] == pid, f"the workload is the cgroup's largest: {top}")
    no_programs_left()


def test_output_dir_errors():
    # missing: made, 0700
    d = os.path.join(tmpdir(), "new", "snapshots")
    p = run([MEMTRAIL, "watch", "-o", d, "--bogus"])
    check_eq(p.returncode, 2, "a wrong option")
    one_line_error(subprocess.run([MEMTRAIL, "watch", "-o", "/proc/memtrail/x"],
                                  capture_output=True, text=True, timeout=30),
                   "cannot create snapshot directory '/proc/memtrail/x'")
    f = os.path.join(tmpdir(), "file")
    open(f, "w").close()
    one_line_error(subprocess.run([MEMTRAIL, "watch", "-o", f], capture_output=True,
                                  text=True, timeout=30), "is not a directory")
    ro = tmpdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", ro], check=True)
    try:
        one_line_error(subprocess.run([MEMTRAIL, "watch", "-o", ro], capture_output=True,
                                      text=True, timeout=30),
                       f"cannot write to snapshot directory '{ro}'", "Read-only")
    finally:
        subprocess.run(["umount", ro], check=True)
    os.makedirs(os.path.dirname(d))
    w = Watch(out=d)
    rc, _, err = w.stop()
    check_eq(rc, 0, f"status ({err!r})")
    check_eq(stat.S_IMODE(os.stat(d).st_mode), 0o700, "a new directory's mode")
    no_programs_left()


def fill(d):
    """Fill the filesystem of D; returns the filler's path."""
    filler = os.path.join(d, f"filler{len(os.listdir(d))}")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_full_disk_keeps_snapshots_until_space():
    """A tiny tmpfs, full: the snapshot and verdict wait in memory, an error
    says so, and they are written once space is freed."""
    d = tmpdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k,mode=0700", "tmpfs", d], check=True)
    path, rel, limit, _, _ = kubelet_memcg(LIMIT)
    w = None
    try:
        w = Watch(out=d)
        filler = fill(d)
        p = subprocess.run(in_cgroup(path, [workload("hog")]), timeout=60)
        check_eq(p.returncode, -signal.SIGKILL, "the workload's end")
        time.sleep(1.5)
        check_eq(glob.glob(os.path.join(d, "*.json")), [], "nothing written on a full disk")
        check(w.proc.poll() is None, "memtrail still runs")
        os.unlink(filler)
        wait_files(d, "verdict-*.json", 1, timeout=10)
        written = glob.glob(os.path.join(d, "*.json"))
        rc, out, err = w.stop()
        w = None
        check_eq(rc, 0, f"status once all was written ({err!r})")
        check("No space left on device; kept in memory" in err, f"the error: {err!r}")
        kinds = sorted(os.path.basename(f).split("-")[0] for f in written)
        check(kinds in (["oom", "verdict"], ["oom", "pressure", "verdict"]),
              f"the kept files, written: {kinds}")
        v = [f for f in written if os.path.basename(f).startswith("verdict-")][0]
        check_eq(load(v)["verdict"]["cause"], "oom_cgroup", "the kept verdict")

        # full until the end, with room for one file in memory: dropped, counted, status 1
        w = Watch(["--pending", "1"], out=d)
        for f in written:
            os.unlink(f)
        fill(d)
        p = subprocess.run(in_cgroup(path, [workload("hog")]), timeout=60)
        check_eq(p.returncode, -signal.SIGKILL, "the workload's end")
        time.sleep(1)
        rc, out, err = w.stop()
        w = None
        check_eq(rc, 1, f"status with files unwritten ({err!r})")
        check("too many files waiting to be written" in err, f"drop reported: {err!r}")
        m = re.search(r"(\d+) snapshot or verdict files could not be written", err)
        check(m and int(m.group(1)) >= 2, f"the unwritten ones counted: {err!r}")
    finally:
        if w:
            w.stop()
        remove_tree(path)
        subprocess.run(["umount", d], check=True)
    no_programs_left()


def test_cgroup_filter():
    """--cgroup twice: kills inside either are judged, a kill outside is not seen."""
    a = kubelet_memcg(LIMIT)
    b = kubelet_memcg(LIMIT)
    c = kubelet_memcg(LIMIT)
    w = Watch(["-c", a[1], "-c", b[0]])	# a cgroup path, and a directory
    try:
        for path in (a[0], c[0], b[0]):
            p = subprocess.run(in_cgroup(path, [workload("hog")]), timeout=60)
            check_eq(p.returncode, -signal.SIGKILL, "the workload's end")
        verdicts = wait_files(w.dir, "verdict-*.json", 2)
        time.sleep(0.5)
        verdicts = glob.glob(os.path.join(w.dir, "verdict-*.json"))
    finally:
        w.stop()
        remove_tree(a[0])
    got = sorted(load(f)["verdict"]["cgroup"] for f in verdicts)
    check_eq(got, sorted([a[1], b[1]]), "verdicts for the two watched cgroups only")
    no_programs_left()


PY_OOM_SITES = os.path.join(os.path.dirname(__file__), "..", "workloads", "py_oom_sites.py")


def line_bytes(sites, lines):
    """Live mapped bytes per marked line of py_oom_sites.py: each site goes to
    the first frame of its chain that is one of the file's marked lines."""
    held = {where: 0 for where in lines}
    by_line = {f"py_oom_sites.py:{n}": where for where, n in lines.items()}
    for site in sites:
        if site["kind"] != "mapped":
            continue
        for fr in site["frames"]:
            where = by_line.get(os.path.basename(fr.get("source") or ""))
            if where:
                held[where] += site["inuse_bytes"]
                break
    return held


def test_oom_snapshot_names_the_growing_line():
    """watch with its defaults; a Python program holds memory at known lines
    (a bytearray, a numpy array) and grows at a third until the OOM kill in a
    kubelet-shaped cgroup. The OOM snapshot lists each line's site with what
    the program's own ledger says that line holds; the growing line holds at
    least 90% of what the cgroup peaked at; the verdict (file and line) names
    it; report lists it. Kernels without mapping sites say so instead."""
    check_growing_line()


def test_stacks_outlive_a_process_storm():
    """The same after a storm of /bin/true (2,000 a second asked for 4 s, 4,000
    run at least): their stacks, some 6 a process, more than the kernel's
    table of 16,384 holds, leave it as they are retired (before, the table
    filled for good and every later site was '[no stack]'): nothing lost."""
    check_growing_line(storm=True)


def test_oom_snapshot_names_the_growing_line_each_python():
    """The same on pyenv's CPython 3.10 and 3.12 and on sid's 3.14 in a root
    (chroot, as a container's): the verdict's top site names the growing
    line, which holds at least 90% of the cgroup's peak."""
    check_growing_line(python=pyenv("3.10.13"))
    check_growing_line(python=pyenv("3.12.1"))
    check_growing_line(python=vendor()["python314"])


def check_growing_line(storm=False, python="/usr/bin/python3"):
    """PYTHON: an interpreter's path, or a vendor() root's entry."""
    ids = new_pod_ids()
    w = Watch(["--pods-dir", pods_dir(ids[0])])
    path, rel, limit, uid, cid = kubelet_memcg(512 * MiB, ids)
    ledger = os.path.join(tmpdir(), "ledger.json")
    cmd = [python, PY_OOM_SITES, ledger]
    if isinstance(python, dict):
        shutil.copy(PY_OOM_SITES, os.path.join(python["root"], "tmp", "py_oom_sites.py"))
        ledger = os.path.join(python["root"], "tmp", "ledger.json")
        cmd = ["chroot", python["root"], python["python"], "/tmp/py_oom_sites.py",
               "/tmp/ledger.json"]
    try:
        if storm:
            p = run([workload("storm"), "2000", "4"], timeout=120)
            check_eq(p.returncode, 0, f"the storm ({p.stderr!r})")
            check(json.loads(p.stdout)["started"] >= 4000, f"the storm's processes: {p.stdout}")
        p = subprocess.run(in_cgroup(path, cmd), capture_output=True, timeout=120)
        check_eq(p.returncode, -signal.SIGKILL, f"the workload's end ({p.stderr[-300:]!r})")
        peak = None
        for name in ("memory.max_usage_in_bytes", "memory.peak"):
            if os.path.exists(os.path.join(path, name)):
                with open(os.path.join(path, name)) as f:
                    peak = int(f.read())
        verdicts = wait_files(w.dir, "verdict-*.json", 1)
    finally:
        rc, out, err = w.stop()
        remove_tree(path)
    check_eq(rc, 0, f"watch's status ({err!r})")
    check(not lost_lines(err), f"nothing lost: {err!r}")
    check_eq(len(verdicts), 1, "verdict files")
    with open(ledger) as f:
        book = json.load(f)
    v = load(verdicts[0])
    check_eq(v["pid"], book["pid"], "the victim")
    snap = load(os.path.join(w.dir, v["snapshot"]))
    if snap["kernel"]["features"]["map_sites"]["state"] != "yes":
        check("snapshots name no code that maps memory (only device allocations'): mapping "
              "sites need" in err,
              f"the missing feature said once: {err!r}")
        check_eq((v["top_site"], snap["snapshot"].get("top_site")), (None, None), "no top site")
        check("top site" not in out, f"no top site on the verdict line: {out!r}")
        return
    lines = book["lines"]
    held = line_bytes(snap["targets"][0]["sites"]["list"], lines)
    chunk, page = 8 * MiB, PAGE
    grown = book["held"]["grow"]
    # a bytearray is one mmap, its length and a header page; the kill may
    # come inside the next chunk's allocation, after its mapping
    check(grown <= held["grow"] <= grown + chunk + (grown // chunk + 1) * 2 * page,
          f"the growing line holds {held['grow']}; its ledger says {grown} (+ one chunk)")
    for where in ("weights", "cache"):
        want = book["held"][where]
        check(want <= held[where] <= want + 2 * page,
              f"line {where} holds {held[where]}; its ledger says {want}")
    check(held["grow"] >= 0.9 * peak,
          f"the growing line holds {held['grow']}, 90% of the cgroup's peak {peak}")
    top = snap["snapshot"]["top_site"]
    want_label = f"main (py_oom_sites.py:{lines['grow']})"
    check(top["kind"] == "mapped" and top["site"].startswith(want_label) and
          top["inuse_bytes"] == held["grow"], f"the snapshot's top site: {top}")
    check_eq(v["top_site"], top, "the verdict's top site")
    check(f"; top site: {want_label}" in out, f"the verdict line names it: {out!r}")
    r = run([MEMTRAIL, "report", os.path.join(w.dir, v["snapshot"])])
    check_eq(r.returncode, 0, f"report of the snapshot ({r.stderr!r})")
    check(re.search(r"mapped +[\d.]+ MiB +[\d.]+ MiB  " + re.escape(want_label), r.stdout),
          f"report lists the growing line: {r.stdout[-1500:]!r}")
    check(f"\ntop site: {want_label}" in r.stdout, f"report's head names it: {r.stdout[:800]!r}")
    # the snapshot's sites as a profile
    prof = os.path.join(tmpdir(), "oom.pb.gz")
    r = run([MEMTRAIL, "report", "--pprof", prof, os.path.join(w.dir, v["snapshot"])])
    check_eq(r.returncode, 0, f"report --pprof of the snapshot ({r.stderr!r})")
    with gzip.open(prof) as f:
        strings = pprof_strings(f.read())
    check("main" in strings and any(x.endswith("py_oom_sites.py") for x in strings),
          f"the profile has the growing line's frames: {strings[:40]}")
    no_programs_left()


def heap_site_of(sites, function):
    """The heap site whose chain names FUNCTION, or None."""
    for site in sites:
        if site["kind"] == "heap" and any(fr.get("function") == function
                                          for fr in site["frames"]):
            return site
    return None


def test_heap_budget_names_the_growing_malloc():
    """watch --heap-budget 2: a program grows its brk heap by malloc at one
    line (grow_cache, 16 KiB blocks) and churns malloc/free at another until
    the OOM kill in a kubelet-shaped cgroup. Its anonymous memory grows
    fastest, so heap windows open on it. Where mapping sites are, the top site
    is grow_cache's brk heap, unwound through malloc. The OOM snapshot lists both lines as
    heap sites, labelled node-budget with their windows, their bytes whole
    blocks and within what the program's own ledger says each line
    allocated, no more calls seen than it made; heap sites claim no live
    bytes; report lists them. The budget's books: probe hits times their
    measured cost within 2% of the time watch ran, plus the bank (5 s's
    share) and one window's closing (memtrail's own books: the rule as it
    keeps it)."""
    one_line_error(run([MEMTRAIL, "watch", "--heap-budget", "2", "--no-sites"]),
                   "--heap-budget", "--no-sites")
    ids = new_pod_ids()
    t0 = time.monotonic()  # the node's account is credited from watch's start on
    w = Watch(["--pods-dir", pods_dir(ids[0]), "--heap-budget", "2"])
    path, rel, limit, uid, cid = kubelet_memcg(384 * MiB, ids)
    ledger = os.path.join(tmpdir(), "ledger.json")
    try:
        p = subprocess.run(in_cgroup(path, [workload("heap_grow"), ledger, "20"]),
                           capture_output=True, timeout=120)
        check_eq(p.returncode, -signal.SIGKILL, f"the workload's end ({p.stderr[-300:]!r})")
        verdicts = wait_files(w.dir, "verdict-*.json", 1)
    finally:
        rc, out, err = w.stop()
        ran_ms = (time.monotonic() - t0) * 1000
        remove_tree(path)
    check_eq(rc, 0, f"watch's status ({err!r})")
    check(not lost_lines(err), f"nothing lost: {err!r}")
    check_eq(len(verdicts), 1, "verdict files")
    book = load(ledger)
    v = load(verdicts[0])
    check_eq(v["pid"], book["pid"], "the victim")
    snap = load(os.path.join(w.dir, v["snapshot"]))
    target = snap["targets"][0]
    heap = target["sites"]["heap"]
    check_eq(heap["mode"], "node-budget", f"the heap's mode: {heap}")
    check(heap["cycles"] >= 1 and heap["windows"], f"windows opened on the victim: {heap}")
    for win in heap["windows"]:
        check(target["start_ms"] <= win["start_ms"] and
              (win["end_ms"] is None or win["start_ms"] < win["end_ms"] <= snap["duration_ms"]),
              f"a window inside the victim's life: {win}, started {target['start_ms']}, "
              f"snapshot at {snap['duration_ms']}")
    calls = book["grow_calls"] + book["churn_calls"] + book["frees"]
    check(0 < heap["probe_hits"] <= calls + 64,
          f"hits {heap['probe_hits']}: no more than the calls it made, {calls} (and the loader's)")
    sites = target["sites"]["list"]
    grow, small = heap_site_of(sites, "grow_cache"), heap_site_of(sites, "churn")
    check(grow is not None, f"grow_cache's heap site: {[s['kind'] for s in sites]}")
    check(0 < grow["alloc_bytes"] <= book["grow_bytes"] and grow["alloc_bytes"] % (16 * 1024) == 0,
          f"grow_cache: {grow['alloc_bytes']} in whole blocks, of {book['grow_bytes']}")
    check(small is not None and 0 < small["alloc_bytes"] <= book["churn_bytes"] and
          small["alloc_bytes"] % 64 == 0, f"churn's site: {small}")
    check(all(s["inuse_bytes"] == 0 for s in sites if s["kind"] == "heap"),
          "heap sites claim no live bytes")
    top = snap["snapshot"]["top_site"]
    if snap["kernel"]["features"]["map_sites"]["state"] == "yes":
        # the brk heap past --deep-from (1 MiB) is unwound by CFI through
        # malloc: grow_cache's blocks, each with its 16-byte header, less the
        # first MiB (frame pointers end in libc there), plus a step in flight
        # and malloc's top pad
        g = book["grow_bytes"]
        check(top["kind"] == "mapped" and top["site"].startswith("grow_cache (heap_grow.c:") and
              g - MiB <= top["inuse_bytes"] <= g + g // 1024 + MiB + 256 * 1024,
              f"the top site: {top}; grow_cache allocated {g}")
    else:
        check(top is None or top["kind"] != "heap", f"the top site is live bytes: {top}")
    budget = heap["budget_pct"] / 100
    spent_ms = heap["probe_hits"] * heap["cost_per_hit_ns"] / 1e6
    # the node's account starts with one window's credit, is capped at 5 s's
    # share (or two windows' credit, if more) and ends at most one closing's
    # overshoot below zero
    check(heap["bank_ms"] >= budget * 5000, f"the account's cap: {heap['bank_ms']} ms")
    check(spent_ms <= budget * ran_ms + heap["bank_ms"] + heap["close_cost_ms"],
          f"probe time {spent_ms:.1f} ms within {budget:.0%} of {ran_ms:.0f} ms, the bank "
          f"({heap['bank_ms']:.1f} ms) and a closing ({heap['close_cost_ms']:.1f} ms)")
    r = run([MEMTRAIL, "report", os.path.join(w.dir, v["snapshot"])])
    check_eq(r.returncode, 0, f"report of the snapshot ({r.stderr!r})")
    check("heap node-budget" in r.stdout and
          re.search(r"heap +[\d.]+ [KMG]iB +-  grow_cache", r.stdout),
          f"report lists the heap windows' sites: {r.stdout[-1500:]!r}")
    no_programs_left()
