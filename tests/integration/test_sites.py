# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Allocation sites against the workload's own arithmetic: mapping sites (on by
default), heap sites in full and sampled mode, the pprof export read by Go's
pprof, jemalloc and tcmalloc preloaded, a stripped binary, and the overhead
budget's own accounting."""

import json
import math
import os
import re
import shutil
import subprocess
import time

from harness import (MEMTRAIL, ROOT, WORKLOADS, check, check_eq, check_within, no_programs_left, record,
                     run, target, tmpdir, workload)
from test_devices import overlay_copy, unmount_overlay

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def sites_of(t, fn, kind, phase):
    """The sites of KIND in PHASE whose stack names FN among its first frames."""
    return [s for s in t["sites"]["list"] if s["kind"] == kind and s["phase"] == phase and
            fn in [f.get("function") for f in s["frames"][:3]]]


def site_total(t, fn, want, field):
    return sum(s[field] for s in sites_of(t, fn, want["kind"], want["phase"]))


def phase(t, name):
    return next(p for p in t["phases"] if p["name"] == name)


def recorded(extra, cmd=None, env=None):
    out = os.path.join(tmpdir(), "trail.json")
    p = subprocess.run([MEMTRAIL, "record", "-q", "-o", out, *extra, "--",
                        *(cmd or [workload("sites")])],
                       capture_output=True, text=True, timeout=120, env=env)
    check_eq(p.returncode, 0, f"record exit status ({p.stderr.strip()})")
    import json
    data = next(json.loads(line) for line in p.stdout.splitlines() if line.startswith("{"))
    with open(out) as f:
        trail = json.load(f)
    return p, trail, data, out


def check_exact(t, data, names):
    for fn in names:
        want = data[fn]
        for field in ("alloc_bytes", "inuse_bytes", "alloc_objects"):
            check_eq(site_total(t, fn, want, field), want[field], f"{fn} {field}")


def test_mapping_sites_by_default():
    p, trail, data, _ = recorded([])
    t = trail["targets"][0]
    check("heap" not in t["sites"], "no heap probes unless asked")
    check_exact(t, data, ["map_cache"])
    s = sites_of(t, "map_cache", "mapped", "load")[0]
    check(s["frames"][1].get("source", "").endswith("sites.c:50"),
          f"map_cache's frame names its line: {s['frames'][1]}")


MAPPER_STEPS_MAPPED = (16 + 32 + 64 + 8 + 4) << 20     # mapper.c: the steps that map


def mappers_named(out):
    """The trail OUT has three mapper targets, each one's mappings named in its main."""
    with open(out) as f:
        trail = json.load(f)
    mappers = [t for t in trail["targets"] if t.get("comm") == "mapper"]
    check_eq(len(mappers), 3, "three mapper targets")
    for n, t in enumerate(sorted(mappers, key=lambda t: t["pid"])):
        mapped = [s for s in t["sites"]["list"] if s["kind"] == "mapped"]
        named = sum(s["alloc_bytes"] for s in mapped
                    if "main" in [f.get("function") for f in s["frames"][:3]])
        others = [(s["alloc_bytes"], [f.get("function") or f.get("module") or f.get("address")
                                      for f in s["frames"][:3]])
                  for s in mapped if "main" not in [f.get("function") for f in s["frames"][:3]]]
        check_eq(named, MAPPER_STEPS_MAPPED,
                 f"mapper {n + 1} of 3 (pid {t['pid']}): bytes mapped by main "
                 f"(other sites: {others[:4]})")


def test_short_children_sites_named_without_devices():
    """Children of the command that live under a second (three mappers of
    0.2 s under sh), recorded with --no-devices: every mapper's mappings are
    named in its own main. No device probe is loaded then, but the dynamic
    linker's hook still is: it says when a child's libraries are mapped, and
    memtrail reads where they are while the child lives."""
    out = os.path.join(tmpdir(), "trail.json")
    mapper = workload("mapper")
    p = subprocess.run([MEMTRAIL, "record", "-q", "--no-devices", "-o", out, "--",
                        "sh", "-c", f"{mapper}; {mapper}; {mapper}"],
                       capture_output=True, text=True, timeout=120)
    check_eq(p.returncode, 0, f"record exit status ({p.stderr.strip()})")
    mappers_named(out)
    no_programs_left()


PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH, WALL = 0x4206, 0x4207, 17, 0x40000000


def hold_thread(tid):
    """Stops thread TID alone (ptrace's group-stop of one thread): the
    others run on. Returns the function that lets it go."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    check_eq(libc.ptrace(PTRACE_SEIZE, tid, None, None), 0,
             f"ptrace seize of memtrail's loop (errno {ctypes.get_errno()})")
    check_eq(libc.ptrace(PTRACE_INTERRUPT, tid, None, None), 0, "ptrace interrupt")
    os.waitpid(tid, WALL)
    return lambda: libc.ptrace(PTRACE_DETACH, tid, None, None)


def test_short_children_named_while_the_loop_is_held():
    """Where BPF cannot tell code mappings (MEMTRAIL_NO_VMA_ITER=1: from
    /proc/PID/maps, as before 6.7), three mappers of 0.2 s each run start to
    end while memtrail's event loop is held (its main thread stopped; its
    other threads run on), as a second of naming a large library's lines
    holds it. The mapper runs from overlayfs (a container's root), a file
    new to memtrail. Each mapper's mappings are named in its own main: its
    maps were read while it lived, by the maps reader's thread as BPF asked,
    the new file opened by that thread through the mapping (by the time the
    loop is free the process is gone, and the overlay's path is not the file
    maps names before 6.9), and taken by the loop once free. Without that
    thread all three are [unknown] (seen on arm64 6.1 under emulation, where
    naming libc's lines took 1.8 s)."""
    d = tmpdir()
    out, go, done = (os.path.join(d, n) for n in ("trail.json", "go", "done"))
    os.mkfifo(go)
    mapper, merged, rw = overlay_copy(d, workload("mapper"))
    env = dict(os.environ, MEMTRAIL_NO_VMA_ITER="1")
    p = subprocess.Popen([MEMTRAIL, "record", "-q", "--no-devices", "-o", out, "--", "sh", "-c",
                          f"read x < {go}; {mapper}; {mapper}; {mapper}; : > {done}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    release = None
    try:
        # the command waits at its fifo: memtrail has started it, tracing
        deadline = time.monotonic() + 60
        while True:
            try:
                fd = os.open(go, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:
                check(p.poll() is None and time.monotonic() < deadline,
                      "the command opened its fifo under memtrail")
                time.sleep(0.05)
        release = hold_thread(p.pid)
        os.write(fd, b"go\n")
        os.close(fd)
        deadline = time.monotonic() + 120
        while not os.path.exists(done):
            check(time.monotonic() < deadline, "the three mappers ran while the loop was held")
            time.sleep(0.05)
    finally:
        if release:
            release()
        stdout, stderr = p.communicate(timeout=120)
        unmount_overlay(merged, rw)
    check_eq(p.returncode, 0, f"record exit status ({stderr.strip()})")
    check_eq(len([l for l in stdout.splitlines() if l.startswith("{")]), 3, "three mappers ran")
    mappers_named(out)
    no_programs_left()


BLINK_BYTES = 64 << 20      # blink.c


def test_blinking_children_named_under_load():
    """Eight children that map 64 MiB and exit within microseconds of their
    dynamic linker, run from overlayfs (a container's root) under sh, then
    eight forked children of one more that do so, while every CPU is kept
    busy. Where BPF reads a process's code mappings as it maps code
    ('site_maps': the task_vma iterator, 6.7), each exec'd child's 64 MiB is
    named in its blink() however soon it exits (BPF names the layer's file,
    the maps the overlay's: memtrail learns one from the other); memtrail
    used to read /proc/PID/maps after such a child had gone, and named none.
    Elsewhere each stack is named or an honest [unknown], and the feature's
    note says so; a forked child's code lies where its parent's does, read
    from the parent's maps, which under this load can be gone too (seen once
    on 6.1 under emulation): named, or an honest [unknown], there as well."""
    out = os.path.join(tmpdir(), "trail.json")
    blink, merged, rw = overlay_copy(tmpdir(), workload("blink"))
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"])
            for _ in range(2 * (os.cpu_count() or 1))]
    try:
        p = subprocess.run([MEMTRAIL, "record", "-q", "-o", out, "--",
                            "sh", "-c", "; ".join([blink] * 8 + [f"{blink} --fork 8"])],
                           capture_output=True, text=True, timeout=300)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        unmount_overlay(merged, rw)
    check_eq(p.returncode, 0, f"record exit status ({p.stderr.strip()})")
    runs = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    check_eq(len(runs), 9, "nine blinks ran")
    execd = [r["pid"] for r in runs if not r["children"]]
    forked = [c for r in runs for c in r["children"]]
    check_eq((len(execd), len(forked)), (8, 8), "eight exec'd blinks, eight forked")
    with open(out) as f:
        trail = json.load(f)
    feature = trail["kernel"]["features"]["site_maps"]
    for pid in execd + forked:
        rows = [s for s in target(trail, pid)["sites"]["list"]
                if s["kind"] == "mapped" and s["alloc_bytes"] == BLINK_BYTES]
        check_eq(len(rows), 1, f"blink {pid}: one site of its 64 MiB")
        frames = rows[0]["frames"]
        names = [f.get("function") for f in frames]
        if feature["state"] == "yes":
            check("blink" in names[:3], f"blink {pid}: its 64 MiB named in blink(): {frames}")
        else:
            # a frame in no mapping memtrail read ends the stack: none is invented
            check("blink" in names[:3] or names[0] == "[unknown]",
                  f"blink {pid}: named, or an honest [unknown]: {frames}")
    if feature["state"] != "yes":
        check("[unknown]" in feature["note"], f"the feature says what is lost: {feature}")
    no_programs_left()


def test_heap_allocator_probed_once():
    """record --heap -- CMD: the command's C library, found from its ELF
    before it runs and again in its maps once it does, is probed once. On
    overlayfs (a container's root; the QEMU guests' root) stat() and maps
    name the file by different (device, inode): keyed by stat's, it was
    probed twice, each allocation hitting two breakpoints."""
    out = os.path.join(tmpdir(), "trail.json")
    p = subprocess.run([MEMTRAIL, "record", "-v", "-o", out, "--heap", "--unwind", "fp", "--",
                        workload("sites")], capture_output=True, text=True, timeout=120)
    check_eq(p.returncode, 0, f"record exit status ({p.stderr[-500:]})")
    probed = re.findall(r"heap: probing '([^']*)' for (\d+)", p.stderr)
    libc = [x for x in probed if os.path.basename(x[0]).startswith("libc.so")]
    check_eq(len(libc), 1, f"the C library probed once: {probed}")
    no_programs_left()


def test_heap_sites_exact():
    p, trail, data, _ = recorded(["--heap", "--unwind", "fp"])
    t = trail["targets"][0]
    check_eq(t["sites"]["heap"]["mode"], "full", "heap mode")
    # map_cache's mapping where the kernel has mapping sites ('memtrail features')
    mapping = trail["kernel"]["features"]["map_sites"]["state"] != "no"
    check_exact(t, data, ["load_weights", *(["map_cache"] if mapping else []),
                          "serve_requests", "grow_buffer", "aligned_blocks"])
    # the heap kind in the phases: the same arithmetic, realloc as free + alloc
    load, serve = phase(t, "load")["kinds"]["heap"], phase(t, "serve")["kinds"]["heap"]
    check_eq(load["allocations"], 4000000, "heap allocated in 'load'")
    check_eq(serve["allocations"], 2000000 + 55000 + 50000, "heap allocated in 'serve'")
    check_eq(serve["deallocations"], 2000000 + 45000, "heap freed in 'serve'")
    top = [s for s in t["sites"]["list"] if s["phase"] == "load" and s["kind"] == "heap"][0]
    check_eq(top["frames"][0]["function"], "load_weights", "top heap site of 'load'")
    r = run([MEMTRAIL, "report", "--top", "3", _])
    check(re.search(r"heap\s+3\.81 MiB\s+3\.81 MiB\s+load_weights \(sites\.c:40\) < main",
                    r.stdout), f"report lists load_weights: {r.stdout[-1500:]}")


def test_heap_sites_sampled():
    p, trail, data, _ = recorded(["--heap", "--unwind", "fp", "--heap-sample", "8192"])
    t = trail["targets"][0]
    check_eq(t["sites"]["heap"]["sample_bytes"], 8192, "sampling rate in the trail")
    want = data["load_weights"]
    got = site_total(t, "load_weights", want, "alloc_bytes")
    check_within(got, want["alloc_bytes"], 10, "load_weights re-weighted bytes")
    s = sum(x["samples"] for x in sites_of(t, "load_weights", "heap", "load"))
    check(100 < s < 1000, f"load_weights sampled, not every call: {s} samples")
    # levels stay exact under sampling: every allocation is still tracked
    check_eq(phase(t, "load")["kinds"]["heap"]["allocations"], 4000000, "heap level exact")


def pprof_top(path, index=None):
    """go tool pprof -top of sample type INDEX (None: the profile's default):
    {function: (flat, cum)} and the total it shows."""
    p = run(["go", "tool", "pprof", "-top", "-unit=B", "-nodefraction=0",
             *([f"-sample_index={index}"] if index else []), path], timeout=300,
            env=dict(os.environ, HOME=tmpdir(), GOCACHE=tmpdir(), GOFLAGS="-mod=mod"))
    check_eq(p.returncode, 0, f"go tool pprof ({p.stderr.strip()[-300:]})")
    rows, total = {}, None
    for line in p.stdout.splitlines():
        m = re.match(r"\s*(\d+)B?\s+\S+%\s+\S+%\s+(\d+)B?\s+\S+%\s+(\S+)", line)
        if m:
            rows[m.group(3)] = (int(m.group(1)), int(m.group(2)))
        m = re.search(r"of (\d+)B total", line)
        if m:
            total = int(m.group(1))
    check(total is not None, f"a total in pprof's output: {p.stdout[:500]!r}")
    return rows, total


def test_pprof_read_by_go_pprof():
    """Each kind has its own sample types: pprof's default view is heap in
    use, never heap and mapped added together, and each kind's total is the
    trail's bytes of that kind."""
    check(shutil.which("go"), "go (golang-go) is installed")
    p, trail, data, out = recorded(["--heap", "--unwind", "fp"])
    prof = os.path.join(tmpdir(), "sites.pb.gz")
    r = run([MEMTRAIL, "report", "--pprof", prof, out])
    check_eq(r.returncode, 0, f"report --pprof ({r.stderr.strip()})")
    with open(prof, "rb") as f:
        check_eq(f.read(2), b"\x1f\x8b", "gzip magic")
    sites = trail["targets"][0]["sites"]["list"]
    for kind in ("heap", "mapped"):
        for field in ("alloc", "inuse"):
            _, total = pprof_top(prof, f"{kind}_{field}_space")
            check_eq(total, sum(s[f"{field}_bytes"] for s in sites if s["kind"] == kind),
                     f"pprof total of {kind}_{field}_space")
    _, total = pprof_top(prof)
    check_eq(total, sum(s["inuse_bytes"] for s in sites if s["kind"] == "heap"),
             "pprof's default view: heap in use")
    (alloc, _), (inuse, _) = (pprof_top(prof, "heap_alloc_space"),
                              pprof_top(prof, "heap_inuse_space"))
    for fn in ("load_weights", "serve_requests", "grow_buffer", "aligned_blocks"):
        check_eq(alloc[fn][0], data[fn]["alloc_bytes"], f"pprof alloc_space flat {fn}")
        check_eq(inuse.get(fn, (0, 0))[0], data[fn]["inuse_bytes"], f"pprof inuse_space {fn}")
    (alloc, _), (inuse, _) = (pprof_top(prof, "mapped_alloc_space"),
                              pprof_top(prof, "mapped_inuse_space"))
    check_eq(alloc["map_cache"][1], data["map_cache"]["alloc_bytes"], "pprof map_cache cum")
    check_eq(inuse["map_cache"][1], data["map_cache"]["inuse_bytes"], "pprof map_cache in use")
    (alloc, _) = pprof_top(prof, "heap_alloc_space")
    check("map_cache" not in alloc, "no mapped bytes among heap's")


def test_cxx_and_rust_names_read_as_written():
    """Sites name C++ and Rust functions demangled (the file's symbol beside
    it), and --phase takes those names: with or without parameters, and an
    overloaded name is refused with the candidates."""
    binary = workload("mangled")
    p, trail, data, out = recorded(["--heap", "--unwind", "fp",
                                    "-P", f"forward={binary}:model::forward()",
                                    "-P", f"stepped={binary}:model::step",
                                    "-P", f"long={binary}:model::step(long)",
                                    "-P", f"handled={binary}:serve::handle"], cmd=[binary])
    t = trail["targets"][0]
    check("'model::step' names 2 functions" in p.stderr and "model::step(int)" in p.stderr
          and "model::step(long)" in p.stderr, f"the overload named: {p.stderr}")
    names = [ph["name"] for ph in t["phases"]]
    check_eq(names, ["start", "long", "forward", "handled"], "phases opened by the rules")
    check_eq(phase(t, "forward")["kinds"]["heap"]["allocations"],
             data["model::forward()"]["alloc_bytes"], "heap allocated in 'forward'")
    check_eq(phase(t, "handled")["kinds"]["heap"]["allocations"],
             data["serve::handle"]["alloc_bytes"], "heap allocated in 'handled'")
    for fn, ph, sym in (("weights::load(unsigned long)", "start", "_ZN7weights4loadEm"),
                        ("model::forward()", "forward", "_ZN5model7forwardEv"),
                        ("serve::handle", "handled", "_ZN5serve6handle17h0123456789abcdefE")):
        want = dict(data[fn], phase=ph)
        for field in ("alloc_bytes", "inuse_bytes", "alloc_objects"):
            check_eq(site_total(t, fn, want, field), want[field], f"{fn} {field}")
        frames = [f for s in sites_of(t, fn, "heap", ph) for f in s["frames"]
                  if f.get("function") == fn]
        check(frames and all(f.get("symbol") == sym for f in frames), f"{fn}'s symbol: {frames}")
    r = run([MEMTRAIL, "report", "--top", "3", out])
    check(re.search(r"heap\s+3\.81 MiB\s+3\.81 MiB\s+"
                    r"weights::load\(unsigned long\) \(mangled\.c:\d+\)", r.stdout),
          f"report names weights::load: {r.stdout[-1500:]}")


def test_stacks_lost_said_and_sized():
    """4,096 distinct allocation stacks: a table of 1,024 fills (every slot
    used: stacks are keyed by all their frames, none shares a slot) and
    loses the rest, and record says how many and which option makes room,
    under -q; the bytes stay exact (a lost stack's bytes are a '[no stack]'
    site's). The default table with --heap (131,072) keeps every one. The
    same for deep stacks (every allocation sampled): their chains, kept in
    user space, are held to the same number."""
    for unwind, stacks in ((["--unwind", "fp"], ["--stacks", "1024"]), (["--unwind", "fp"], []),
                           (["--heap-sample", "0"], ["--stacks", "1024"])):
        p, trail, data, _ = recorded(["--heap", *unwind, *stacks],
                                     cmd=[workload("stacks"), "4096"])
        t = trail["targets"][0]
        heap = [s for s in t["sites"]["list"] if s["kind"] == "heap"]
        check_eq(sum(s["alloc_bytes"] for s in heap), data["heap_bytes"], "heap bytes in sites")
        check_eq(phase(t, "start")["kinds"]["heap"]["allocations"], data["heap_bytes"],
                 "heap allocated")
        lost = trail["lost"].get("stacks", 0)
        leaves = [s for s in heap if s["frames"][0].get("function") == "leaf"]
        # each path allocates once: a kept stack is a site, a lost one a count (main's calloc too)
        # deep: the runtime's later allocations have chains of their own, lost too
        check(len(leaves) + lost in (4096, 4097) or
              (unwind[0] != "--unwind" and 4096 <= len(leaves) + lost <= 4096 + 64),
              f"{len(leaves)} leaf sites, {lost} lost")
        warned = [l for l in p.stderr.splitlines() if " lost (listed as '[no stack]'" in l]
        if stacks:
            # the table's other stacks: main's calloc, and what the runtime allocated before
            # (deep: every allocation of the process has its chain, its start's too)
            check((1000 if unwind[0] != "--unwind" else 1016) <= len(leaves) < 1024,
                  f"1,024 slots for 4,096 stacks: all used, {len(leaves)} leaves kept, "
                  f"{lost} lost")
            check(len(warned) == 1 and f"{lost} stacks lost" in warned[0] and
                  "--stacks 4096 makes room" in warned[0], f"the loss said under -q: {p.stderr!r}")
        else:
            check_eq(lost, 0, f"the default table keeps every stack ({trail['lost']})")
            check_eq(len(leaves), 4096, "a site per path")
            check_eq(len(warned), 0, f"nothing said without a loss: {p.stderr!r}")


def preloaded(lib):
    check(os.path.exists(lib), f"{lib} is installed")
    env = dict(os.environ, LD_PRELOAD=lib)
    p, trail, data, _ = recorded(["--heap", "--unwind", "fp"], env=env)
    t = trail["targets"][0]
    check(any(os.path.basename(lib) in line for line in p.stderr.splitlines()
              if "heap: probing" in line), f"{lib} probed: {p.stderr}")
    check_exact(t, data, ["load_weights", "serve_requests", "aligned_blocks"])
    # both allocators are probed (libc's malloc too): each call counted once
    check_eq(phase(t, "load")["kinds"]["heap"]["allocations"], 4000000, "heap in 'load'")


def test_jemalloc_preloaded():
    preloaded(JEMALLOC)


def test_tcmalloc_preloaded():
    preloaded(TCMALLOC)


def test_unloaded_library_unknown_frames():
    """A library that mapped 8 MiB is unloaded before memtrail resolves the
    stack: its frame is honest (named while it was mapped, else [unknown]
    with its address), the frames around it keep their names, and the
    report and the pprof export take it."""
    plugin = os.path.join(WORKLOADS, "lib", "libplugin.so")
    p, trail, data, out = recorded(["--heap", "--unwind", "fp"], cmd=[workload("unload"), plugin])
    check(data["unmapped"], "the workload saw its plugin unmapped")
    t = target(trail, data["pid"])
    rows = [s for s in t["sites"]["list"] if s["kind"] == "mapped" and s["phase"] == "start"
            and s["alloc_bytes"] == data["plugin_bytes"]]
    check_eq(len(rows), 1, f"one site of the plugin's {data['plugin_bytes']} bytes")
    frames = rows[0]["frames"]
    names = [f.get("function") for f in frames]
    check("main" in names, f"the workload's main stays named: {names}")
    f = frames[names.index("main") - 1]
    check((f.get("function") == "plugin_map" and f.get("module", "").endswith("libplugin.so"))
          or (f["function"] == "[unknown]" and "module" not in f
              and int(f["address"], 16) > 0),
          f"the plugin's frame is plugin_map or an honest [unknown]: {f}")
    check_eq(rows[0]["inuse_bytes"], data["plugin_bytes"], "its memory outlives the plugin")
    r = run([MEMTRAIL, "report", out])
    check_eq(r.returncode, 0, f"report ({r.stderr.strip()})")
    prof = os.path.join(tmpdir(), "unload.pb.gz")
    r = run([MEMTRAIL, "report", "--pprof", prof, out])
    check_eq(r.returncode, 0, f"report --pprof ({r.stderr.strip()})")
    check(os.path.getsize(prof) > 0, "the profile is written")
    no_programs_left()


def closing_cost_ms():
    """What removing the heap probes costs a busy allocator on this machine,
    in ms of probe time, as memtrail measures it at start (-v)."""
    p = run([MEMTRAIL, "record", "-v", "--overhead-budget", "2", "-o",
             os.path.join(tmpdir(), "t.json"), "--", "true"])
    m = re.search(r"removing the probes takes \d+ ms, ([\d.]+) ms of probe time", p.stderr)
    check(m, f"the calibration is said: {p.stderr!r}")
    return float(m.group(1))


def test_overhead_budget_cycles():
    """A malloc-heavy loop (5 to 9 s of CPU) under an overhead budget: the
    controller's own accounting, probe hits x the cost per hit it measured,
    stays within the budget's share of the target's CPU time (from
    /proc/PID/stat, as the controller reads it), and the windows it opened
    are reported. A window opens only once the target's CPU time has earned
    its closing too (removing probes costs 1 to 500 ms of probe time, by
    machine): the budget is 2%, or where closing costs more, what affords a
    window after about 2.5 s of CPU."""
    budget = min(50, max(2, math.ceil(closing_cost_ms() / 8)))
    p, trail, data, _ = recorded(["--overhead-budget", str(budget)],
                                 cmd=[workload("bench_malloc"), "500000000"])
    t = trail["targets"][0]
    h = t["sites"]["heap"]
    check_eq((h["mode"], h["inuse"]), ("budget", False), "budget mode, in-use not claimed")
    check("heap" not in trail["kinds"], "no heap levels under a budget")
    check(h["probe_hits"] > 0 and h["cycles"] >= 1, f"probes ran: {h}")
    check(0 < h["coverage"] < 1, f"coverage reported and partial: {h['coverage']}")
    check(h["cycles_spent"] >= 1, f"the budget ran out and the probes went: {h}")
    check(h["target_cpu_ms"] > 1000, f"the target's CPU time is reported: {h}")
    cost = h["probe_hits"] * h["cost_per_hit_ns"] / 1e6
    check(abs(cost - h["probe_cost_ms"]) < 0.01, f"probe cost = hits x cost per hit: {h}")
    check(cost <= h["budget_pct"] / 100 * h["target_cpu_ms"],
          f"probe cost {cost:.1f} ms within {budget}% of {h['target_cpu_ms']} ms of CPU: {h}")
    r = run([MEMTRAIL, "report", _])
    check("in use not measured" in r.stdout, "the report says in-use was not measured")


def test_overhead_budget_short_process_said():
    """A process that ends before it has run a second of CPU time never earns
    a window under --overhead-budget: the trail says no window opened, and
    the summary says why instead of showing nothing."""
    p, trail, data, out = recorded(["--overhead-budget", "2"],
                                   cmd=[workload("bench_malloc"), "100000"])
    check(data["ns"] < 1e9, f"the workload ran under a second: {data}")
    h = trail["targets"][0]["sites"]["heap"]
    check_eq((h["mode"], h["cycles"], h["probe_hits"]), ("budget", 0, 0), f"no window: {h}")
    r = run([MEMTRAIL, "report", out])
    check("no probe window opened" in r.stdout and "--overhead-budget 2" in r.stdout,
          f"the summary says why there are no heap sites: {r.stdout!r}")


TORCH = os.path.join(ROOT, "tests", "workloads", "torch_linear.py")


def test_pytorch_weights_named():
    """Debian's PyTorch, as a user runs it: import torch, four 4096x4096
    Linear layers, ten inferences, teardown, under record --heap --unwind fp
    (frame pointers: every allocation, exact). Every
    stack is kept (import torch alone has tens of thousands), and the
    weights' bytes (the script's own arithmetic) are at sites naming the
    function that allocated them, c10::alloc_cpu, demangled; no '[no stack]'
    site holds over 1% of the heap bytes."""
    check(subprocess.run(["/usr/bin/python3", "-c", "import torch"]).returncode == 0,
          "Debian's python3-torch is installed ('make deps')")
    out = os.path.join(tmpdir(), "torch.json")
    p = subprocess.run([MEMTRAIL, "record", "-q", "--heap", "--unwind", "fp", "-o", out,
                        "--", TORCH],
                       capture_output=True, text=True, timeout=600)
    check_eq(p.returncode, 0, f"record exit status ({p.stderr.strip()[-2000:]})")
    data = next(json.loads(line) for line in p.stdout.splitlines() if line.startswith("{"))
    with open(out) as f:
        trail = json.load(f)
    check(not any(trail["lost"].values()), f"nothing lost: {trail['lost']}")
    check(" lost" not in p.stderr, f"no loss said: {p.stderr[-2000:]}")
    t = next(x for x in trail["targets"] if "torch_linear.py" in (x["cmdline"] or ""))
    heap = [s for s in t["sites"]["list"] if s["kind"] == "heap"]
    total = sum(s["alloc_bytes"] for s in heap)
    nostack = [s for s in heap if s["frames"][0].get("function") == "[no stack]"]
    check(all(s["alloc_bytes"] <= total / 100 for s in nostack),
          f"no '[no stack]' site above 1% of {total} heap bytes: "
          f"{[s['alloc_bytes'] for s in nostack]}")
    alloc_cpu = [s for s in heap
                 if any(f.get("function", "").startswith("c10::alloc_cpu(") for f in s["frames"])]
    weights = sum(s["alloc_bytes"] for s in alloc_cpu)
    check(weights >= data["weight_bytes"] + data["bias_bytes"],
          f"the weights' {data['weight_bytes']} bytes at c10::alloc_cpu sites: {weights}")
    big = [s for s in alloc_cpu if s["alloc_bytes"] >= data["each_weight"]]
    check(big, f"a site with a whole weight ({data['each_weight']} bytes) names c10::alloc_cpu")
    # the script's phases (its marker): the weights come in 'init' and go in 'teardown'
    want = data["weight_bytes"] + data["bias_bytes"]
    init, teardown = (phase(t, n)["kinds"]["heap"] for n in ("init", "teardown"))
    check(want <= init["allocations"] < want + 16 * 2**20, f"init allocates the weights: {init}")
    check(teardown["deallocations"] >= want, f"teardown frees them: {teardown}")
    r = run([MEMTRAIL, "report", "--top", "5", out])
    check(re.search(r"heap\s+\d+\.\d+ MiB .*c10::alloc_cpu\(unsigned long\)", r.stdout),
          f"the text report names c10::alloc_cpu: {r.stdout[-2000:]}")
    no_programs_left()


# record's command for test_pid_reuse_keeps_sites_apart: runs the sites
# workload (argv[1]) twice per try, the second given the first's pid through
# ns_last_pid, at once or (gap) a moment after the first ended; one JSON line
# per try with both pids and both ledgers
REUSE = r'''
import json, subprocess, sys, time
wl, tries = sys.argv[1], int(sys.argv[2])
for i in range(tries):
    first = subprocess.Popen([wl], stdout=subprocess.PIPE, text=True)
    out_a = first.communicate()[0]
    gap = 0.3 if i % 2 else 0.0
    time.sleep(gap)
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(first.pid - 1))
    second = subprocess.Popen([wl], stdout=subprocess.PIPE, text=True)
    out_b = second.communicate()[0]
    print(json.dumps({"a": first.pid, "b": second.pid, "gap": gap,
                      "data_a": json.loads(out_a), "data_b": json.loads(out_b)}), flush=True)
'''


def test_pid_reuse_keeps_sites_apart():
    """A pid given to a new process after another ended with it (forced with
    ns_last_pid): each process's sites are its own, exact by its arithmetic,
    never the two merged. Given at once, before memtrail read the first's end,
    the second is not traced and the trail counts it lost; a moment later
    (as on a node whose pids wrapped) it is traced from its start."""
    d = tmpdir()
    script = os.path.join(d, "reuse.py")
    with open(script, "w") as f:
        f.write(REUSE)
    tries = 6
    p, trail, _, _ = recorded(["--heap", "--unwind", "fp"],
                              cmd=["python3", script, workload("sites"), str(tries)])
    runs = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    check_eq(len(runs), tries, "tries that ran")
    names = ["load_weights", "serve_requests", "grow_buffer", "aligned_blocks"]
    reused = untraced = 0
    for r in runs:
        mine = [t for t in trail["targets"] if t["pid"] == r["a"]]
        check(mine, f"the first process {r['a']} is a target")
        check_exact(mine[0], r["data_a"], names)
        if r["b"] != r["a"]:
            continue	# another process on the machine took the pid first
        reused += 1
        check(len(mine) <= 2, f"one target per process: {[t['pid'] for t in mine]}")
        if len(mine) == 1:
            untraced += 1	# given at once: refused, and counted
            continue
        check_exact(mine[1], r["data_b"], names)
    check(reused >= tries // 2, f"the pid was reused in {reused} of {tries} tries: {runs}")
    check(trail["lost"]["targets"] >= untraced,
          f"{untraced} processes not traced, counted: {trail['lost']}")
    check(untraced < reused, f"a process given a pid a moment after traced: {runs}")
