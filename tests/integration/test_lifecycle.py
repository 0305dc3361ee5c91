# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Processes followed across fork and exec; exit codes and signals."""

import os
import shutil
import signal
import subprocess
import sys
import time

from harness import (MEMTRAIL, MiB, Background, cgroup_v2_root, check, check_eq, in_cgroup, level,
                     load_trail, memcg_v1, record, remove_cgroup, run, target, workload,
                     no_programs_left, tmpdir)


def test_exec_after_a_cgroup_move_names_the_new_cgroup():
    """A container runtime's way: a child forked in cgroup A moves itself into
    B, then execs. Its exec names B (the kernel's id of its memory cgroup
    moved, so the path is read again), and a sibling that stays names A (the
    fork's path, kept without a read). The memory hierarchy is v1's where this
    node mounts one, else v2."""
    tag = f"memtrail-test-move-{os.getpid()}"
    v1 = os.path.isdir("/sys/fs/cgroup/memory")
    base = "/sys/fs/cgroup/memory" if v1 else cgroup_v2_root()
    a, b = os.path.join(base, tag + "-a"), os.path.join(base, tag + "-b")
    if v1:
        memcg_v1(tag + "-a"), memcg_v1(tag + "-b")
    else:
        os.makedirs(a, exist_ok=True), os.makedirs(b, exist_ok=True)
    try:
        script = (f'sh -c \'echo $$ > "{b}/cgroup.procs" && exec /bin/sleep 0.2\' & '
                  'sh -c \'exec /bin/sleep 0.2\' & wait')
        p, trail, _ = record(in_cgroup(a, ["sh", "-c", script]))
        check_eq(p.returncode, 0, f"memtrail status (stderr {p.stderr!r})")
        sleeps = [t for t in trail["targets"] if t["comm"] == "sleep"]
        check_eq(len(sleeps), 2, f"two sleeps: {[t['comm'] for t in trail['targets']]}")
        got = sorted(t["cgroup"] for t in sleeps)
        rel = "/" + tag
        check_eq(got, [rel + "-a", rel + "-b"], "each sleep's cgroup")
    finally:
        remove_cgroup(a)
        remove_cgroup(b)
    no_programs_left()


def test_children_followed_with_exit_status():
    p, trail, pids = record([workload("forker")])
    check_eq(p.returncode, 0, f"memtrail status (stderr {p.stderr!r})")
    parent, a, b, g = (target(trail, pids[k]) for k in ("parent", "a", "b", "grandchild"))
    check_eq(parent["exit"], {"code": 0, "signal": 0}, "parent exit")
    check_eq(a["exit"], {"code": 3, "signal": 0}, "child a exit")
    check_eq(b["exit"], {"code": 0, "signal": 9}, "child b exit (SIGKILL)")
    check_eq(g["exit"], {"code": 5, "signal": 0}, "grandchild exit")
    check_eq(a["ppid"], pids["parent"], "child a's parent")
    check_eq(g["ppid"], pids["b"], "grandchild's parent")
    # a touched 8 MiB of its own on top of what it shares with its parent
    extra = level(a, "rss_anon", "peak") - level(parent, "rss_anon", "current")
    check(8 * MiB <= extra <= 8 * MiB + MiB // 2,
          f"child a's rss_anon peak is {extra} bytes above its parent's, want 8 MiB")
    types = {(e["type"], e["pid"]) for e in trail["events"]}
    for k in ("a", "b", "grandchild"):
        check(("fork", pids[k]) in types, f"no fork event for {k}")
    check(("exec", pids["parent"]) in types, "no exec event for the command")


def test_killed_command_exits_137():
    p, trail, pids = record([workload("forker"), "--die"])
    check_eq(p.returncode, 137, "memtrail's status when its command dies by SIGKILL")
    check_eq(target(trail, pids["parent"])["exit"], {"code": 0, "signal": 9}, "command exit")


def test_exit_status_passed_through():
    p, trail, _ = record(["sh", "-c", "exit 42"])
    check_eq(p.returncode, 42, "memtrail's status")
    check_eq(trail["targets"][0]["exit"], {"code": 42, "signal": 0}, "exit")


def test_exec_refreshes_comm_and_cmdline():
    p, trail, _ = record(["sh", "-c", "exec sleep 0.1"])
    check_eq(p.returncode, 0, "status")
    t = trail["targets"][0]
    check_eq(t["comm"], "sleep", "comm after exec")
    check_eq(t["cmdline"], "sleep 0.1", "cmdline after exec")


def test_ctrl_c_stops_and_leaves_nothing():
    out = os.path.join(tmpdir(), "trail.json")
    # a terminal's Ctrl-C signals the whole process group: memtrail and its command.
    # As a shell starts a foreground job: SIGINT at its default (a test runner
    # started in the background has it ignored, and the command would keep it so)
    bg = Background(["record", "-o", out, "--", "sleep", "30"], start_new_session=True,
                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    m = bg.proc
    os.killpg(m.pid, signal.SIGINT)
    _, err = m.communicate(timeout=30)
    check_eq(m.returncode, 130, f"status after Ctrl-C (stderr {err!r})")
    trail = load_trail(out)
    check_eq(trail["targets"][0]["exit"], {"code": 0, "signal": 2}, "sleep's exit")
    no_programs_left()


def test_sigterm_in_all_mode_writes_trail():
    out = os.path.join(tmpdir(), "trail.json")
    m = subprocess.Popen([MEMTRAIL, "record", "-q", "-o", out, "--all"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    m.send_signal(signal.SIGTERM)
    _, err = m.communicate(timeout=30)
    check_eq(m.returncode, 0, f"status after SIGTERM (stderr {err!r})")
    trail = load_trail(out)
    check(len(trail["targets"]) > 1, "--all traced no processes")
    check(all(t["pid"] != m.pid for t in trail["targets"]), "memtrail traced itself")
    no_programs_left()


def test_second_stop_signal_leaves_without_the_trail():
    """A stop signal while the trail is still to be written, then another
    (SIGINT and SIGTERM, so that neither merges into the other): memtrail
    leaves without writing it, says so, and leaves no file and no program."""
    d = tmpdir()
    out = os.path.join(d, "trail.json")
    m = subprocess.Popen([MEMTRAIL, "record", "-o", out, "--all"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while "tracing" not in (m.stderr.readline() or "tracing"):
        pass
    m.send_signal(signal.SIGINT)
    m.send_signal(signal.SIGTERM)
    _, err = m.communicate(timeout=30)
    # memtrail's threads may take the two in either order: 128 + the second
    check(m.returncode in (128 + signal.SIGINT, 128 + signal.SIGTERM),
          f"status after two signals: {m.returncode} ({err!r})")
    check("not written: stopped again" in err, f"says the trail is not written: {err!r}")
    check_eq(os.listdir(d), [], "no trail, no temporary file")
    no_programs_left()


def test_suite_beside_another_memtrail():
    """A node that runs memtrail already (a DaemonSet's watch, its binary
    under another name): a suite started beside it counts as left behind
    only what its own tests loaded, and top's rows of the node's memtrail
    are no rows of its own, so its tests pass there."""
    d = tmpdir()
    other = os.path.join(d, "nodewatch")
    shutil.copy(MEMTRAIL, other)
    log = open(os.path.join(d, "watch.log"), "w+")
    w = subprocess.Popen([other, "watch", "-o", os.path.join(d, "snapshots")],
                         stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 60
    while time.time() < deadline and "tracing" not in open(log.name).read() and w.poll() is None:
        time.sleep(0.05)
    check("tracing" in open(log.name).read(), f"the node's watch started: {open(log.name).read()!r}")
    try:
        # record's command passes its own gate (each new copy probed as it is
        # opened), whatever the watch beside it sees late
        p = run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py"),
                 "test_lifecycle.test_ctrl_c_stops_and_leaves_nothing",
                 "test_devices.test_dlopen_then_call_at_once_200_runs",
                 "test_top.test_top_plain_tables_into_a_pipe"],
                env=dict(os.environ, CI="true"), timeout=300)
    finally:
        w.send_signal(signal.SIGINT)
        rc = w.wait(timeout=60)
        log.close()
        err = open(log.name).read()
    check_eq(p.returncode, 0, f"the suite beside watch ({p.stdout[-800:]!r})")
    check("integration: 3 passed, 0 failed" in p.stdout, f"three tests ran: {p.stdout[-800:]!r}")
    check_eq(rc, 0, f"watch's status ({err[-500:]!r})")
    no_programs_left()
