# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Targets chosen in the kernel: by cgroup (v1 and v2), by comm, all."""

import json
import os
import signal
import subprocess

from harness import (MiB, Background, check, check_eq, cgroup_v2_root, in_cgroup, level,
                     load_trail, memcg_v1, remove_cgroup, tmpdir, workload,
                     no_programs_left)


def run_outside_and_inside(args_for, cg_path):
    """A mapper inside the cgroup and one outside, both while memtrail runs."""
    out = os.path.join(tmpdir(), "trail.json")
    bg = Background(["record", "-q", "-o", out, *args_for])
    inside = subprocess.run(in_cgroup(cg_path, [workload("mapper")]), capture_output=True,
                            text=True, timeout=60)
    outside = subprocess.Popen([workload("mapper")], stdout=subprocess.PIPE, text=True)
    outside.communicate(timeout=60)
    rc, _, err = bg.stop(signal.SIGINT)
    check_eq(rc, 0, f"memtrail status (stderr {err!r})")
    check_eq(inside.returncode, 0, f"workload in the cgroup failed: {inside.stderr!r}")
    return load_trail(out), json.loads(inside.stdout), outside.pid


def check_cgroup_trail(trail, data, outside_pid):
    mappers = [t for t in trail["targets"] if t["comm"] == "mapper"]
    check_eq(len(mappers), 1, "mapper targets (only the one inside the cgroup): " +
             str([(t["pid"], t["start_ms"], t["exit"], t["cgroup"]) for t in mappers]) +
             f", outside {outside_pid}")
    t = mappers[0]
    check(t["pid"] != outside_pid, "the mapper outside the cgroup was traced")
    check_eq(t["exit"], {"code": 0, "signal": 0}, "exit")
    check_eq(level(t, "mapped", "peak"), data["base_data"] + data["peak_steps"], "mapped peak")
    check_within_pct = abs(level(t, "rss_anon", "peak") - data["anon_at_peak"])
    check(check_within_pct <= data["anon_at_peak"] * 0.02, "rss_anon peak within 2%")


def test_cgroup_v1_memory():
    path = memcg_v1(f"memtrail-test-{os.getpid()}")
    child = os.path.join(path, "pod1")  # a process below the cgroup counts too
    os.makedirs(child, exist_ok=True)
    try:
        trail, data, outside = run_outside_and_inside(["--cgroup", path], child)
        check_cgroup_trail(trail, data, outside)
        check(any(t["cgroup"] and t["cgroup"].endswith("/pod1") for t in trail["targets"]),
              "the target's cgroup path is not recorded")
    finally:
        remove_cgroup(child)
        remove_cgroup(path)
    no_programs_left()


def test_cgroup_v1_by_hierarchy_path():
    name = f"memtrail-test-h{os.getpid()}"
    path = memcg_v1(name)
    try:
        trail, data, outside = run_outside_and_inside(["--cgroup", "/" + name], path)
        check_cgroup_trail(trail, data, outside)
    finally:
        remove_cgroup(path)


def test_cgroup_repeated():
    """record --cgroup A --cgroup B: a mapper in each is traced, exact by its
    own arithmetic; one outside both is not."""
    a, b = (memcg_v1(f"memtrail-test-{os.getpid()}-{x}") for x in "ab")
    out = os.path.join(tmpdir(), "trail.json")
    try:
        bg = Background(["record", "-q", "-o", out, "--cgroup", a, "-c",
                         "/" + os.path.basename(b)])
        inside = [subprocess.run(in_cgroup(c, [workload("mapper")]), capture_output=True,
                                 text=True, timeout=60) for c in (a, b)]
        outside = subprocess.Popen([workload("mapper")], stdout=subprocess.PIPE, text=True)
        outside.communicate(timeout=60)
        rc, _, err = bg.stop(signal.SIGINT)
        check_eq(rc, 0, f"memtrail status (stderr {err!r})")
        trail = load_trail(out)
        mappers = [t for t in trail["targets"] if t["comm"] == "mapper"]
        check_eq(len(mappers), 2, f"mapper targets, one per cgroup: "
                 f"{[(t['pid'], t['cgroup']) for t in mappers]}, outside {outside.pid}")
        check(outside.pid not in [t["pid"] for t in mappers], "the mapper outside was traced")
        for t, w in zip(sorted(mappers, key=lambda t: t["start_ms"]), inside):
            check_eq(w.returncode, 0, f"workload in a cgroup failed: {w.stderr!r}")
            data = json.loads(w.stdout)
            check_eq(level(t, "mapped", "peak"), data["base_data"] + data["peak_steps"],
                     f"mapped peak of {t['pid']} ({t['cgroup']})")
        check_eq(trail["command"], f"cgroup {a} /{os.path.basename(b)}", "the trail's command")
    finally:
        remove_cgroup(a)
        remove_cgroup(b)
    no_programs_left()


def test_cgroup_v2():
    root = cgroup_v2_root()
    check(root, "no cgroup v2 hierarchy mounted (want /sys/fs/cgroup/unified)")
    path = os.path.join(root, f"memtrail-test-{os.getpid()}")
    os.makedirs(path, exist_ok=True)
    try:
        trail, data, outside = run_outside_and_inside(["--cgroup", path], path)
        check_cgroup_trail(trail, data, outside)
    finally:
        remove_cgroup(path)


def test_comm_filter():
    out = os.path.join(tmpdir(), "trail.json")
    bg = Background(["record", "-q", "-o", out, "--comm", "mapper"])
    w = subprocess.run([workload("mapper")], capture_output=True, text=True, timeout=60)
    other = subprocess.run(["sh", "-c", f"head -c {4 * MiB} /dev/zero | cat > /dev/null"],
                           timeout=60)
    rc, _, err = bg.stop(signal.SIGINT)
    check_eq(rc, 0, f"status ({err!r})")
    trail = load_trail(out)
    check(trail["targets"], "no targets")
    check(all(t["comm"] == "mapper" for t in trail["targets"]),
          f"non-matching processes traced: {[t['comm'] for t in trail['targets']]}")
    data = json.loads(w.stdout)
    t = trail["targets"][-1]
    check_eq(level(t, "mapped", "peak"), data["base_data"] + data["peak_steps"], "mapped peak")
    check_eq(other.returncode, 0, "the other command")


def test_lost_targets_counted():
    # far more processes than --max-targets: the drop is counted and printed
    sleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(40)]
    out = os.path.join(tmpdir(), "trail.json")
    try:
        bg = Background(["record", "-o", out, "--all", "--max-targets", "16"])
        rc, stdout, err = bg.stop(signal.SIGINT)
    finally:
        for s in sleepers:
            s.kill()
            s.wait()
    check_eq(rc, 0, f"status ({err!r})")
    trail = load_trail(out)
    check_eq(len(trail["targets"]), 16, "targets traced with --max-targets 16")
    check(trail["lost"]["targets"] > 0, f"lost counters {trail['lost']}")
    check("lost: " in stdout and "targets=" in stdout, f"summary does not show the loss: {stdout!r}")
    no_programs_left()
