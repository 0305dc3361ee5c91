# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Device memory (CUDA, Neuron) against the workloads' own ledgers: stand-in
runtimes with the real ABI, the real libcudart.so.13, a runtime linked
statically, a container-like root and a library opened late."""

import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

from harness import (MEMTRAIL, ROOT, Background, proc_state, wait_stopped, MiB, check, check_eq,
                     level, load_trail, no_programs_left, record, run, target, tmpdir, vendor, workload)

STANDINS = os.path.join(ROOT, "build", "standins")
LIBCUDA = os.path.join(STANDINS, "libcuda.so.1")
CUDART = "/usr/local/cuda/lib64/libcudart.so.13"
DEVICE_KINDS = ("cuda_device", "cuda_host", "cuda_managed", "neuron_device", "neuron_host")
FIELDS = ("allocations", "deallocations", "segment_change", "segment_peak")


def check_ledger(t, data, strict_names=True):
    """Every device kind's four phase fields equal the workload's ledger."""
    got = [p["name"] for p in t["phases"]]
    want = [p["name"] for p in data["phases"]]
    if strict_names:
        check_eq(got, want, "phase names in order")
    else:
        check(got[-len(want) + 1:] == want[1:], f"phases {got} end with {want[1:]}")
    mine = {p["name"]: p for p in t["phases"]}
    for p in data["phases"]:
        for kind in DEVICE_KINDS:
            want_f = p["kinds"].get(kind, {f: 0 for f in FIELDS})
            got_f = mine[p["name"]]["kinds"][kind]
            check_eq({f: got_f[f] for f in FIELDS}, {f: want_f[f] for f in FIELDS},
                     f"phase '{p['name']}' {kind}")


def final_levels(data):
    """A kind's level at the end, from the ledger: the sum of its changes."""
    out = {k: 0 for k in DEVICE_KINDS}
    for p in data["phases"]:
        for k, f in p["kinds"].items():
            out[k] += f["segment_change"]
    return out


def events(trail, kind):
    return [e for e in trail["events"] if e["type"] == kind]


def check_device_limits(t, data, kind):
    """The device sizes the runtime told the workload, as the trail keeps them."""
    want = sorted((kind, d["device"], d["bytes"]) for d in data["device_totals"])
    got = sorted((d["kind"], d["device"], d["bytes"]) for d in t["device_limits"])
    check_eq(got, want, "device limits (kind, device, bytes) vs what the runtime returned")


def check_oom(ev, data):
    oom = data["oom"]
    for k in ("function", "size", "device", "phase", "kind"):
        check_eq(ev[k], oom[k], f"device OOM event {k}")
    check_eq(ev["code"], oom["rc"], "device OOM event code")
    # the call site: the workload's main, which made the failing call
    check(ev["site"] and ev["site"][0].startswith("main+"), f"call site {ev['site']}")
    live = ev["live_allocations"]
    want = sorted(((a["size"], a["kind"], a["phase"]) for a in data["live_at_oom"]), reverse=True)
    got = sorted(((a["size"], a["kind"], a["phase"]) for a in live["largest"]), reverse=True)
    check_eq(got, want, "live allocations at the OOM (size, kind, phase)")
    check_eq(live["bytes"], sum(a["size"] for a in data["live_at_oom"]), "live bytes")
    by = {}
    for a in data["live_at_oom"]:
        by[(a["phase"], a["kind"])] = by.get((a["phase"], a["kind"]), 0) + a["size"]
    check_eq({(r["phase"], r["kind"]): r["bytes"] for r in live["by_phase"]}, by,
             "live bytes by phase and kind")


def check_phases_run(p, trail, data, kind, error):
    """A phases workload's recording: its ledger per phase and kind, the device
    sizes it was told, and its one device OOM event."""
    check_eq(p.returncode, 0, f"workload status (stderr {p.stderr!r})")
    t = target(trail, data["pid"])
    check_ledger(t, data)
    check_device_limits(t, data, kind)
    ooms = events(trail, "device_oom")
    check_eq(len(ooms), 1, "one device OOM event")
    check_oom(ooms[0], data)
    check_eq(ooms[0]["error"], error, "error name")


def test_cuda_phases_exact():
    """Automatic phases, every CUDA kind per phase, and the device OOM event."""
    p, trail, data = record([workload("cuda_phases")])
    check_phases_run(p, trail, data, "cuda_device", "CUDA_ERROR_OUT_OF_MEMORY")
    check("device out of memory" in p.stderr and "cuMemAlloc_v2" in p.stderr,
          f"a line says so: {p.stderr!r}")
    no_programs_left()


def test_report_lists_device_failures():
    """memtrail report prints the device OOM: process, call, size, device,
    error, phase, call site and what was live, against the workload's own."""
    out = os.path.join(tmpdir(), "trail.json")
    p = run([MEMTRAIL, "record", "-q", "-o", out, "--", workload("cuda_phases")])
    check_eq(p.returncode, 0, f"workload status (stderr {p.stderr!r})")
    data = json.loads([x for x in p.stdout.splitlines() if x.startswith("{")][-1])
    r = run([MEMTRAIL, "report", out])
    check_eq(r.returncode, 0, f"report status ({r.stderr!r})")
    lines = [x for x in r.stdout.splitlines() if x.startswith("device out of memory: ")]
    check_eq(len(lines), 1, f"one device OOM line in {r.stdout!r}")
    oom = data["oom"]
    want = (f"device out of memory: {data['pid']} (cuda_phases) {oom['function']} of 1.00 GiB "
            f"on cuda device {oom['device']}: CUDA_ERROR_OUT_OF_MEMORY ({oom['rc']}) in phase "
            f"'{oom['phase']}' at main+")
    check(lines[0].startswith(want), f"{lines[0]!r} starts with {want!r}")
    check(lines[0].endswith(f" in {len(data['live_at_oom'])} allocations"),
          f"live allocations counted: {lines[0]!r}")
    check_eq(oom["size"], 1 << 30, "the workload's OOM size (printed as 1.00 GiB)")


def test_cuda_phases_one_link_per_probe():
    """The fallback for kernels without uprobe_multi links (before Linux 6.6),
    forced: a perf-event uprobe per function gives the same exact figures."""
    p, trail, data = record([workload("cuda_phases")], extra=["-v"],
                            env=dict(os.environ, MEMTRAIL_NO_UPROBE_MULTI="1"))
    check("one link per function" in p.stderr, f"the fallback taken: {p.stderr!r}")
    check_phases_run(p, trail, data, "cuda_device", "CUDA_ERROR_OUT_OF_MEMORY")
    no_programs_left()


def test_cuda_phases_without_cookie():
    """Kernels without bpf_cookie (before 5.15), forced: an entry program per
    function (the cookie program is not even loaded, so a ledger that matches
    is the copies' work) gives the same exact figures."""
    p, trail, data = record([workload("cuda_phases")], extra=["-v"],
                            env=dict(os.environ, MEMTRAIL_NO_COOKIE="1"))
    check("an entry program per function" in p.stderr, f"the fallback taken: {p.stderr!r}")
    check_phases_run(p, trail, data, "cuda_device", "CUDA_ERROR_OUT_OF_MEMORY")
    check_eq(trail["kernel"]["features"]["device"]["state"], "fallback",
             "the trail's record of the device source")
    no_programs_left()


def test_neuron_phases_exact():
    p, trail, data = record([workload("nrt_phases")])
    check_phases_run(p, trail, data, "neuron_device", "NRT_RESOURCE")
    no_programs_left()


def wait_stderr(proc, needle, timeout):
    """Read PROC's stderr until a line holds NEEDLE (then stop reading); True if one did."""
    found = threading.Event()

    def pump():
        for line in proc.stderr:
            if needle in line:
                found.set()
                return

    threading.Thread(target=pump, daemon=True).start()
    return found.wait(timeout)


def elf_symbol_file_range(path, name):
    """[start, end) of symbol NAME as offsets in the file PATH, from binutils."""
    syms = run(["nm", "-S", "--defined-only", path]).stdout.split()
    i = syms.index(name)
    vaddr, size = int(syms[i - 3], 16), int(syms[i - 2], 16)
    for line in run(["readelf", "-lW", path]).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, va, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if va <= vaddr < va + filesz:
                return vaddr - va + off, vaddr - va + off + size
    raise AssertionError(f"{name} in no LOAD segment of {path}")


def test_call_site_after_exit():
    """The call site of a device OOM when memtrail reads the event only after
    the process has exited (its /proc maps gone, never scanned): named from
    the file the kernel had mapped there. memtrail is stopped (SIGSTOP) while
    the workload runs, so the lag is certain rather than a race."""
    d = tmpdir()
    out = os.path.join(d, "trail.json")
    # a file memtrail has never seen; its runpath finds the stand-in at ../standins
    os.mkdir(os.path.join(d, "bin"))
    os.symlink(STANDINS, os.path.join(d, "standins"))
    copy = os.path.join(d, "bin", "nrt_copy")
    shutil.copy(workload("nrt_phases"), copy)
    bg = Background(["record", "-o", out, "--all"])
    try:
        # a first run: memtrail probes the runtime library and learns the
        # executable; it goes on once memtrail says the library is probed
        first = subprocess.Popen([workload("nrt_phases"), "--wait"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        seen = wait_stderr(bg.proc, "libnrt.so.1", 30)
        first.communicate("g", timeout=60)
        check_eq(first.returncode, 0, "first run")
        check(seen, "memtrail never said it probed libnrt.so.1")
        bg.proc.send_signal(signal.SIGSTOP)
        try:
            # no process waits for memtrail (README, "Libraries loaded later")
            wait_stopped(bg.proc.pid)
            runs = [subprocess.run([path], capture_output=True, text=True, timeout=60)
                    for path in (workload("nrt_phases"), copy)]
            for r in runs:
                check_eq(r.returncode, 0, f"workload status (stderr {r.stderr!r})")
        finally:
            bg.proc.send_signal(signal.SIGCONT)
    finally:
        rc, _, err = bg.stop()
    check_eq(rc, 0, f"record status: {err!r}")
    trail = load_trail(out)
    pids = [json.loads(r.stdout.strip().splitlines()[-1])["pid"] for r in runs]
    sites = {}
    for ev in events(trail, "device_oom"):
        sites[ev["pid"]] = ev["site"]
    check(pids[0] in sites and pids[1] in sites, f"device OOM events of {pids}: {sites}")
    # a file seen before: symbolized through its path
    check(sites[pids[0]][0].startswith("main+"), f"known file: call site {sites[pids[0]]}")
    # a file never seen: its name and the offset of the call, inside main's bytes
    name, _, off = sites[pids[1]][0].partition("+0x")
    check_eq(name, "nrt_copy", f"unknown file: call site {sites[pids[1]]}")
    lo, hi = elf_symbol_file_range(copy, "main")
    check(lo < int(off, 16) <= hi, f"call site offset {off} within main [{lo:#x}, {hi:#x})")
    no_programs_left()


def mount_overlay(d):
    """An overlayfs mounted at D/merged over D/lower (a container's root, as
    containerd's snapshotter makes it), its writable layer on a tmpfs of its
    own, as on a node: the overlay then shows inode numbers and devices of
    its own, not the layers'. (lower, merged, rw); unmount_overlay after."""
    lower, rw, merged = (os.path.join(d, x) for x in ("lower", "rw", "merged"))
    for x in (lower, rw, merged):
        os.makedirs(x, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", rw], check=True)
    upper, work = os.path.join(rw, "upper"), os.path.join(rw, "work")
    os.mkdir(upper)
    os.mkdir(work)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={lower},upperdir={upper},workdir={work}", merged], check=True)
    return lower, merged, rw


def unmount_overlay(merged, rw):
    subprocess.run(["umount", merged], check=False)
    subprocess.run(["umount", rw], check=False)


def overlay_copy(d, program):
    """PROGRAM copied into the lower layer of an overlayfs mounted under D
    (mount_overlay), its runpath's stand-ins beside it: (the program's path
    there, the mount point, the writable layer's). Its mappings show the
    layer's inode (the overlay's from Linux 6.9); its path, the overlay's."""
    lower = os.path.join(d, "lower")
    os.makedirs(os.path.join(lower, "bin"))
    shutil.copy(program, os.path.join(lower, "bin"))
    os.symlink(STANDINS, os.path.join(lower, "standins"))
    _, merged, rw = mount_overlay(d)
    return os.path.join(merged, "bin", os.path.basename(program)), merged, rw


def holds_mapped(holder, pid, path):
    """Whether process HOLDER has open the file process PID maps as PATH
    (the file itself, by device and inode, as /proc/PID/map_files opens it)."""
    want = set()
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6 and fields[5].strip() == os.path.realpath(path):
                    st = os.stat(f"/proc/{pid}/map_files/{fields[0]}")
                    want.add((st.st_dev, st.st_ino))
    for fd in glob.glob(f"/proc/{holder}/fd/*"):
        with contextlib.suppress(OSError):
            st = os.stat(fd)
            if (st.st_dev, st.st_ino) in want:
                return True
    return False


def record_while_stopped(command, env=None, held=False):
    """record's COMMAND (a workload taking --wait) runs from its start to its
    exit while memtrail is stopped (SIGSTOP): what memtrail reads of it, it
    reads after the exit for certain. HELD: memtrail is stopped only once it
    holds the program's file open (its scan of the running command; it comes
    at a tick after the exec). (memtrail's status, its stdout, stderr, the
    trail's path)"""
    d = tmpdir()
    out = os.path.join(d, "trail.json")
    comm = os.path.basename(command[0])[:15]
    bg = Background(["record", "-o", out, "--", command[0], "--wait", *command[1:]],
                    stdin=subprocess.PIPE, env=env)
    try:
        with open(f"/proc/{bg.proc.pid}/task/{bg.proc.pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
        wl = [k for k in kids if proc_state(k) and open(f"/proc/{k}/comm").read().strip()
              == comm]
        check_eq(len(wl), 1, f"record's command among its children {kids}")
        # let go once probed: then it waits for its stdin
        deadline = time.time() + 30
        while time.time() < deadline and proc_state(wl[0]) != "S":
            time.sleep(0.02)
        check_eq(proc_state(wl[0]), "S", "the command waiting for its stdin")
        while held and time.time() < deadline and not holds_mapped(bg.proc.pid, wl[0], command[0]):
            time.sleep(0.02)
        check(not held or holds_mapped(bg.proc.pid, wl[0], command[0]),
              "memtrail holds the running command's program open")
        bg.proc.send_signal(signal.SIGSTOP)
        try:
            wait_stopped(bg.proc.pid)
            bg.proc.stdin.write("g")
            bg.proc.stdin.flush()
            deadline = time.time() + 60
            while time.time() < deadline and proc_state(wl[0]) not in ("", "Z"):
                time.sleep(0.02)
            check(proc_state(wl[0]) in ("", "Z"), "the command ended while memtrail was stopped")
        finally:
            bg.proc.send_signal(signal.SIGCONT)
        bg.proc.stdin.close()
        rc, stdout, err = bg.proc.wait(timeout=60), bg.proc.stdout.read(), bg.proc.stderr.read()
    finally:
        if bg.proc.poll() is None:
            bg.proc.kill()
    return rc, stdout, err, out


def check_command_site_after_exit(program, env):
    """record's command (cuda_phases --wait) reaches its device OOM and exits
    while memtrail is stopped (SIGSTOP), so the OOM is read after the exit
    for certain: its call site must still name main."""
    rc, stdout, err, out = record_while_stopped([program], env, held=True)
    check_eq(rc, 0, f"record status: {err!r}")
    data = json.loads([x for x in stdout.splitlines() if x.startswith("{")][-1])
    ooms = events(load_trail(out), "device_oom")
    check_eq(len(ooms), 1, "one device OOM event")
    check_oom(ooms[0], data)
    no_programs_left()
    return load_trail(out)


def test_vmm_oom_lists_handles_given_back_after_it():
    """An allocator that gives back the handles it made for a request as soon
    as the request fails (PyTorch's expandable segments: on a real H100 a
    4 TiB tensor made and released 78 GiB of 20 MiB handles): the device OOM
    event lists what was live at the failure, though memtrail reads it only
    after every handle is gone (stopped while the workload runs)."""
    rc, stdout, err, out = record_while_stopped([workload("vmm"), "--oom"])
    check_eq(rc, 0, f"record status: {err!r}")
    data = json.loads([x for x in stdout.splitlines() if x.startswith("{")][-1])
    trail = load_trail(out)
    ooms = events(trail, "device_oom")
    check_eq(len(ooms), 1, "one device OOM event")
    live = ooms[0]["live_allocations"]
    check_eq((live["count"], live["bytes"]), (data["live_at_oom"]["count"],
             data["live_at_oom"]["bytes"]), f"live at the failure: {live}")
    check(all(a["function"] == "cuMemCreate" for a in live["largest"]), f"{live['largest']}")
    t = target(trail, data["pid"])
    check_eq(level(t, "cuda_device", "peak"), data["live_at_oom"]["bytes"], "cuda_device peak")
    check_eq(level(t, "cuda_device", "current"), 0, "cuda_device at the end")
    no_programs_left()


def test_command_call_site_after_exit_without_find_vma():
    """Kernels without bpf_find_vma (before 5.17), forced: a device OOM of
    record's own command read after it exited is named from the mappings
    memtrail kept at its scan (main+...), not lost."""
    trail = check_command_site_after_exit(workload("cuda_phases"),
                                          dict(os.environ, MEMTRAIL_NO_FIND_VMA="1"))
    check("bpf_find_vma" in trail["kernel"]["features"]["device_sites"]["note"],
          "the forced kernel said so")


def test_call_site_after_exit_on_overlayfs():
    """The same for a program on overlayfs (every container's root): its
    mappings show the layer's inode, its path the overlay's, so it cannot be
    opened again by name once gone; memtrail holds the file it mapped open
    while it lives. With bpf_find_vma and without (forced)."""
    d = tmpdir()
    program, merged, rw = overlay_copy(d, workload("cuda_phases"))
    try:
        st, real = os.stat(program), os.stat(os.path.join(d, "lower", "bin", "cuda_phases"))
        check((st.st_dev, st.st_ino) != (real.st_dev, real.st_ino),
              "the overlay shows the program as another inode than its layer's")
        for env in (dict(os.environ), dict(os.environ, MEMTRAIL_NO_FIND_VMA="1")):
            check_command_site_after_exit(program, env)
    finally:
        unmount_overlay(merged, rw)


def test_vmm_every_order():
    """cuMemCreate/Map/Unmap/Release in every order: counted at create, gone
    with the last of release and unmap."""
    p, trail, data = record([workload("vmm")])
    check_eq(p.returncode, 0, f"workload status (stderr {p.stderr!r})")
    check_ledger(target(trail, data["pid"]), data)


def test_static_runtime_symbols_counted_once():
    """cudaMalloc as a local .symtab symbol of an executable, calling the
    driver: counted once, its site the caller of cudaMalloc; cudaMallocHost
    without the driver: still seen."""
    nm = run(["nm", "-D", workload("static_cudart")])
    check("cudaMalloc" not in nm.stdout, "cudaMalloc is not exported")
    p, trail, data = record([workload("static_cudart")])
    check_eq(p.returncode, 0, f"workload status (stderr {p.stderr!r})")
    t = target(trail, data["pid"])
    check_ledger(t, data)
    # and once in its sites: at the outermost probed call, main's cudaMalloc
    # lines, not the runtime's call into its driver; all freed
    src = os.path.join(ROOT, "tests", "workloads", "static_cudart.c")
    want = {(f"main static_cudart.c:{source_line(src, f'cudaMalloc(&{v}, {n} * MiB)')}"):
            n * MiB for v, n in (("a", 10), ("b", 6))}
    got = {}
    for x in t["sites"]["list"]:
        if x["kind"] == "cuda_device":
            fr = x["frames"][0]
            key = f"{fr['function']} {os.path.basename(fr.get('source') or '?')}"
            got[key] = got.get(key, 0) + x["alloc_bytes"]
            check_eq(x["inuse_bytes"], 0, f"site {key} in use at the end")
    check_eq(got, want, "device sites")


def test_real_libcudart_failing_call():
    """The toolkit's libcudart.so.13 with no driver: the real cudaMalloc call
    and the code it returns."""
    check(os.path.exists(CUDART), f"{CUDART} is missing (the CUDA toolkit)")
    p, trail, data = record([workload("cudart_real"), CUDART])
    check(data and "rc" in data, f"workload output {p.stdout!r} {p.stderr!r}")
    check(data["rc"] != 0, "cudaMalloc fails without a driver")
    errs = [e for e in events(trail, "device_error") if e["function"] == "cudaMalloc"]
    check_eq(len(errs), 1, f"one failed cudaMalloc event in {trail['events']}")
    check_eq(errs[0]["code"], data["rc"], "its return code")
    check_eq(errs[0]["error"], data["error"], "its name")
    check_eq(errs[0]["size"], data["size"], "the size asked for")
    check_eq(errs[0]["pid"], data["pid"], "pid")


def test_cache_library_probed_before_use():
    """A runtime the loader cache names (the toolkit's libcudart.so.13 here,
    the driver's libcuda.so.1 on a GPU node) is probed when memtrail starts:
    a cudaMalloc in the same instant as the dlopen is seen."""
    check(os.path.exists(CUDART), f"{CUDART} is missing (the CUDA toolkit)")
    conf = None
    if "libcudart.so.13 " not in run(["ldconfig", "-p"]).stdout:
        # a toolkit installed without its /etc/ld.so.conf.d entry: add one for the test
        conf = "/etc/ld.so.conf.d/zz-memtrail-test-cuda.conf"
        with open(conf, "w") as f:
            f.write(os.path.dirname(os.path.realpath(CUDART)) + "\n")
        run(["ldconfig"])
    try:
        check("libcudart.so.13 " in run(["ldconfig", "-p"]).stdout,
              "libcudart.so.13 is not in the loader cache")
        p, trail, data = record([workload("cudart_real"), CUDART])
    finally:
        if conf:
            os.unlink(conf)
            run(["ldconfig"])
    check(data and "rc" in data, f"workload output {p.stdout!r} {p.stderr!r}")
    check(data["rc"] != 0, "cudaMalloc fails without a driver")
    errs = [e for e in events(trail, "device_error") if e["function"] == "cudaMalloc"]
    check_eq(len(errs), 1, f"one failed cudaMalloc event in {trail['events']}")
    check_eq((errs[0]["pid"], errs[0]["code"], errs[0]["size"]),
             (data["pid"], data["rc"], data["size"]), "pid, code and size")


def test_exec_gives_device_memory_back():
    """A CUDA process execs without freeing (device, pinned host and a mapped
    VMM handle): the old address space takes that memory with it, so the
    levels drop to 0, in the new program's first phase."""
    p, trail, data = record([workload("cuda_exec")])
    check_eq(p.returncode, 0, f"workload status (stderr {p.stderr!r})")
    t = target(trail, data["pid"])
    device = data["device"] + data["vmm"]
    check_eq(t["kinds"]["cuda_device"]["peak"], device, "cuda_device peak before the exec")
    check_eq(t["kinds"]["cuda_host"]["peak"], data["host"], "cuda_host peak before the exec")
    note = trail["kernel"]["features"]["device"]["note"]
    if "bpf_for_each_map_elem" in note:
        # before 5.13: what the feature table says, warned on stderr, is what happens
        check(f"device: {note}" in p.stderr, f"the warning said: {p.stderr!r}")
        check_eq(t["kinds"]["cuda_device"]["current"], device, "cuda_device kept after the exec")
        no_programs_left()
        return
    check_eq(t["kinds"]["cuda_device"]["current"], 0, "cuda_device after the exec")
    check_eq(t["kinds"]["cuda_host"]["current"], 0, "cuda_host after the exec")
    last = t["phases"][-1]
    check_eq(last["name"], "exec:true", "the new program's phase")
    check_eq(last["kinds"]["cuda_device"]["segment_change"], -device, "given back in it")
    check_eq(last["kinds"]["cuda_host"]["segment_change"], -data["host"], "given back in it")
    no_programs_left()


def test_dlopen_after_start():
    """A runtime opened after memtrail started is probed from then on."""
    p, trail, data = record([workload("dlopen_late"), LIBCUDA])
    check_eq(p.returncode, 0, f"workload status (stderr {p.stderr!r})")
    t = target(trail, data["pid"])
    check_ledger(t, data)
    for k, v in final_levels(data).items():
        check_eq(t["kinds"][k]["current"], v, f"final {k}")


def make_root():
    """A container-like root: the host's /usr read-only; the workload, and a
    copy of the stand-in under a path and name the host does not have."""
    root = tmpdir()
    for d in ("usr", "app", "opt", "proc", "tmp"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for link in ("lib", "lib64", "bin", "sbin"):
        if os.path.islink("/" + link):
            os.symlink(os.readlink("/" + link), os.path.join(root, link))
    shutil.copy(workload("dlopen_late"), os.path.join(root, "app", "dlopen_late"))
    return root, "/opt/vendor/lib/libcuda-7f3a9c.so.1"


def test_container_root():
    """A process in its own mount namespace and root (unshare, chroot), its
    library on a tmpfs only that namespace has: opened as the process maps it
    (map_files), probed once, named by the path the kernel shows. A mount
    namespace of its own leaves record's gate (its mounts are new, unmarked):
    a library it writes and maps at once is exact where memtrail probed it
    before the calls, and where not, the trail says so (never silently)."""
    root, lib = make_root()
    check(not os.path.exists(lib), f"{lib} exists on the host")
    script = (f'mount --bind -o ro /usr "{root}/usr" && mount -t tmpfs none "{root}/opt" && '
              f'mkdir -p "{root}{os.path.dirname(lib)}" && cp "{LIBCUDA}" "{root}{lib}" && '
              f'exec chroot "{root}" /app/dlopen_late {lib}')
    try:
        p, trail, data = record(["unshare", "-m", "--propagation", "private", "sh", "-c", script])
        check_eq(p.returncode, 0, f"workload status (stdout {p.stdout!r} stderr {p.stderr!r})")
        t = target(trail, data["pid"])
        late = [e for e in events(trail, "probes_late") if e["pid"] == data["pid"]]
        # the path as the kernel shows it to memtrail (from the namespace's
        # root: the tmpfs is mounted under ROOT there), or its own name
        check(all(e["file"] in (root + lib, os.path.basename(lib)) for e in late),
              f"the late mapping names the library: {late}")
        if not late:
            check_ledger(t, data, strict_names=False)
        probed = [x for x in p.stderr.splitlines()
                  if "probing CUDA runtime" in x and "libcudart" not in x]
        # gone before memtrail read its maps: never probed, and said so
        check((len(probed) == 1 and f"{lib}' (" in probed[0]) or
              (not probed and late and late[0]["exited"]),
              f"probed once, by its name: {probed}")
        check(not os.listdir(os.path.join(root, "opt")), "the library was in the namespace only")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_shared_library_probed_once():
    """Two processes, one library under two names (a hard link): one set of
    probes, each process counted exactly."""
    d = tmpdir()
    alias = os.path.join(d, "libcuda-hardlink.so.1")
    os.link(LIBCUDA, alias)
    out = os.path.join(d, "trail.json")
    script = (f'"{workload("dlopen_late")}" "{alias}" & '
              f'"{workload("dlopen_late")}" "{LIBCUDA}" & wait')
    p = run([MEMTRAIL, "record", "-o", out, "--", "sh", "-c", script])
    check_eq(p.returncode, 0, f"status (stderr {p.stderr!r})")
    trail = load_trail(out)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    check_eq(len(lines), 2, "two workloads")
    for data in lines:
        t = target(trail, data["pid"])
        for k, v in final_levels(data).items():
            check_eq(t["kinds"][k]["current"], v, f"pid {data['pid']} final {k}")
    # (the toolkit's libcudart, probed from the loader cache at start, aside)
    probes = [x for x in p.stderr.splitlines()
              if "probing CUDA runtime" in x and "libcudart" not in x]
    check_eq(len(probes), 1, f"one library probed once: {probes}")


def device_oom_snapshot(out, proc):
    """Let PROC (cuda_phases --wait, under a watch writing to OUT) go on to its
    device OOM: (its ledger, the snapshot files written of it)."""
    stdout, _ = proc.communicate("g", timeout=60)
    data = json.loads(stdout.strip().splitlines()[-1])
    deadline = time.time() + 10
    files = []
    while time.time() < deadline and not files:
        files = glob.glob(os.path.join(out, f"device-oom-{data['pid']}-*.json"))
        time.sleep(0.1)
    return data, files


def mapping(pid, path):
    """PROC's process (PID) once it maps PATH, as a model server that loaded
    its runtime does (its maps read until it does; the dynamic linker maps a
    program's libraries after exec returns)."""
    real = os.path.realpath(path)
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(f"/proc/{pid}/maps") as f:
            if any(line.rstrip().endswith(real) for line in f):
                return
        time.sleep(0.01)
    raise AssertionError(f"{pid} never mapped {real}")


def test_watch_device_oom_snapshot():
    """watch writes a device OOM snapshot: the call, its phase, the live
    device allocations by size and phase and their sites (the top one the
    largest's call line), the levels beside host memory. The
    model server maps its runtime before watch starts, as on a node where
    the DaemonSet comes after the pods: probed at watch's start, nothing of
    it late."""
    out = tmpdir()
    proc = subprocess.Popen([workload("cuda_phases"), "--wait"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    mapping(proc.pid, LIBCUDA)
    bg = Background(["watch", "-o", out])
    data, files = device_oom_snapshot(out, proc)
    rc, _, err = bg.stop()
    check_eq(rc, 0, f"watch status: {err!r}")
    check_eq(len(files), 1, f"one device OOM snapshot in {os.listdir(out)}")
    check_eq(os.stat(files[0]).st_mode & 0o777, 0o600, "snapshot mode")
    doc = load_trail(files[0])
    snap = doc["snapshot"]
    check_eq(snap["trigger"], "device_oom", "trigger")
    check_eq(snap["pid"], data["pid"], "pid")
    check_eq(snap["phase"], "execute", "phase at the failure")
    check_oom(snap["device_oom"], data)
    t = doc["targets"][0]
    phases = {p["name"]: p for p in t["phases"]}
    check_eq(phases["model_load"]["kinds"]["cuda_device"]["allocations"],
             [p for p in data["phases"] if p["name"] == "model_load"][0]
             ["kinds"]["cuda_device"]["allocations"], "model_load device allocations")
    check(t["kinds"]["rss_anon"]["peak"] > 0, "host memory beside device memory")
    # the live device allocations' sites as they were at the failure (the
    # workload frees them all after it): one per call line, the largest on top
    device = [x for x in t["sites"]["list"] if x["kind"].startswith("cuda_")]
    by = {}
    for a in data["live_at_oom"]:
        by[(a["phase"], a["kind"])] = by.get((a["phase"], a["kind"]), 0) + a["size"]
    got = {}
    for x in device:
        got[(x["phase"], x["kind"])] = got.get((x["phase"], x["kind"]), 0) + x["inuse_bytes"]
    check_eq(got, by, "device sites' live bytes by phase and kind at the failure")
    check_eq(len(device), len(data["live_at_oom"]), "a site per live allocation's call")
    line = source_line(os.path.join(ROOT, "tests", "workloads", "cuda_phases.c"),
                       "cuMemAlloc_v2(&d2, 16 * MiB)")
    check_eq(snap["top_site"], {"kind": "cuda_device", "inuse_bytes": 16 * MiB,
                                "site": f"main (cuda_phases.c:{line})"}, "the top site")
    no_programs_left()


def source_line(path, text):
    """The number of the line of PATH that holds TEXT."""
    with open(path) as f:
        return [n for n, x in enumerate(f, 1) if text in x][0]


def check_immediate_runs(lib, runs):
    """RUNS programs under one record, each dlopen()ing a fresh copy of the real
    runtime LIB (a file memtrail has never seen) and calling it at once: every
    failed call is in the trail with its code, in phase runtime_init, its
    site in main and no frame outside the code the program mapped."""
    d = tmpdir()
    script = (f'i=0; while [ $i -lt {runs} ]; do i=$((i+1)); lib="{d}/libcudart-$i.so"; '
              f'cp "{lib}" "$lib" && "{workload("cudart_now")}" "$lib"; rm -f "$lib"; done')
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(vendor()["libcuda"]))
    trail, lines = record_runs(script, runs, env=env)
    strict, late = gated(trail), late_pids(trail)
    check(not strict or not late, f"late at the gate: {events(trail, 'probes_late')}")
    lines = [x for x in lines if x["pid"] not in late]
    by_pid = {}
    for e in trail["events"]:
        if e["type"] in ("device_error", "device_oom"):
            by_pid.setdefault(e["pid"], []).append(e)
    missed = []
    for data in lines:
        got = [(e["function"], e["code"], e["error"], e["size"], e["phase"])
               for e in by_pid.get(data["pid"], [])]
        want = [(c["function"], c["rc"], c["error"], c["size"], "runtime_init")
                for c in data["calls"] if c["rc"] != 0]
        check(want, f"the runtime failed nothing without a GPU: {data}")
        if got != want:
            missed.append((data["pid"], want, got))
            continue
        for e in by_pid[data["pid"]]:
            check(e["site"] and e["site"][0].startswith("main+0x") and
                  e["site"][0].endswith(f'({workload("cudart_now")})'),
                  f"the call site is main: {e['site']}")
            for frame in e["site"]:
                m = re.search(r"\((/[^)]*)\)$", frame) or re.match(r"(/\S+)\+0x", frame)
                check(m and m.group(1) in data["code"],
                      f"frame {frame!r} names code the program mapped ({data['code']})")
    check(not missed, f"{len(missed)} of {runs} programs not recorded exactly; the first: "
          f"{missed[:1]}")
    no_programs_left()


def test_real_cudart11_called_at_once_1000_runs():
    """Debian's libcudart.so.11.0 and libcuda.so.1 (535), each program a new
    copy of the runtime called the instant dlopen returns, 1,000 times: not
    one call missed (record's command waits at the gate as it opens the new
    file, until it is probed)."""
    check_immediate_runs(vendor()["cudart"]["11"], 1000)


def test_real_cudart12_called_at_once():
    """The same with the newest runtime Debian ships (libcudart.so.12)."""
    check_immediate_runs(vendor()["cudart"]["12"], 200)


def kernel_feature(name):
    """The state of feature NAME on this kernel (memtrail features --json)."""
    p = run([MEMTRAIL, "features", "--json"])
    check_eq(p.returncode, 0, f"memtrail features ({p.stderr.strip()})")
    return json.loads(p.stdout)["features"][name]["state"]


def record_runs(script, runs, env=None, per_run=5):
    """memtrail record -- sh -c SCRIPT, which runs RUNS workloads printing a
    ledger each: (trail, [workload JSON, ...]). PER_RUN: seconds a program
    may take before the run counts as hung."""
    out = os.path.join(tmpdir(), "trail.json")
    # a program each: milliseconds here, seconds in an emulated (TCG) guest
    p = run([MEMTRAIL, "record", "-q", "-o", out, "--", "sh", "-c", script], env=env,
            timeout=60 + per_run * runs)
    check_eq(p.returncode, 0, f"status (stderr {p.stderr[-2000:]!r})")
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    check_eq(len(lines), runs, "workloads that ran")
    return load_trail(out), lines


def gated(trail):
    """Whether record's command waited at its opens of ELF files until memtrail
    had probed them (the gate); where not, 'features' says why, and what a
    process maps before its probes are live is said (probes_late events)."""
    f = trail["kernel"]["features"]["cmd_gate"]
    check(f["state"] == "yes" or "late calls counted" in f["note"], f"cmd_gate says why: {f}")
    return f["state"] == "yes"


def late_pids(trail):
    """The processes the trail says mapped a runtime before its probes were live."""
    return {e["pid"] for e in events(trail, "probes_late")}


def check_ledgers(trail, lines, final=False):
    """Each workload's ledger (and with FINAL its final levels) exact in TRAIL
    where record's command passes the gate (none is late); elsewhere exact
    unless the trail says it mapped its runtime before the probes were live."""
    strict, late = gated(trail), late_pids(trail)
    for data in lines:
        check(not strict or data["pid"] not in late,
              f"pid {data['pid']} late at the gate: {events(trail, 'probes_late')}")
        if data["pid"] in late:
            continue
        t = target(trail, data["pid"])
        check_ledger(t, data, strict_names=False)	# the shell's exec names a phase too
        for k, v in (final_levels(data).items() if final else ()):
            check_eq(t["kinds"][k]["current"], v, f"pid {data['pid']} final {k}")


def test_dlopen_then_call_at_once_200_runs():
    """200 programs, each dlopen()ing a new copy of the CUDA stand-in and
    calling it at once: every ledger exact, none missing its first calls.
    (50 before uprobe_multi, 6.6, where a program takes seconds in the
    emulated guests: there each copy's probes are some 110 perf event
    descriptors, and the guests allow 4096. They are released when the
    copy's program exits: before that, 35 copies ran out on 6.1.)"""
    d = tmpdir()
    multi = kernel_feature("device_multi") == "yes"
    runs = 200 if multi else 50
    script = (f'i=0; while [ $i -lt {runs} ]; do i=$((i+1)); lib="{d}/libcuda-$i.so.1"; '
              f'cp "{LIBCUDA}" "$lib" && "{workload("dlopen_late")}" "$lib"; rm -f "$lib"; done')
    # a link per function to make and to remove for each copy without uprobe_multi:
    # 6 s a program in a 6.1 guest under TCG
    check_ledgers(*record_runs(script, runs, per_run=5 if multi else 15), final=True)
    no_programs_left()


def test_dlopen_then_call_at_once_on_overlayfs():
    """The same, 50 copies written into an overlayfs (a container's root):
    there fstat, maps and the kernel's mapping hook each name the file
    otherwise (a device per layer; the layer's inode before Linux 6.9), and
    every copy is still probed at the gate before it is mapped: ledgers
    exact, none late."""
    _, merged, rw = mount_overlay(tmpdir())
    runs = 50
    try:
        script = (f'i=0; while [ $i -lt {runs} ]; do i=$((i+1)); lib="{merged}/libcuda-$i.so.1"; '
                  f'cp "{LIBCUDA}" "$lib" && "{workload("dlopen_late")}" "$lib"; rm -f "$lib"; '
                  'done')
        trail, lines = record_runs(script, runs)
    finally:
        unmount_overlay(merged, rw)
    check_ledgers(trail, lines, final=True)
    check(not gated(trail) or not late_pids(trail),
          f"late at the gate: {events(trail, 'probes_late')[:3]}")
    no_programs_left()


def probe_fds(pid):
    """memtrail's descriptors that hold probes (BPF links, perf events), and
    the paths of the files it has open."""
    probes, files = 0, []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target_ = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target_ in ("anon_inode:bpf_link", "anon_inode:[perf_event]"):
            probes += 1
        elif target_.startswith("/"):
            files.append(target_)
    return probes, files


GATE_DRIVER = """
import subprocess, sys
dl, lib, other = sys.argv[1:4]
# B opens the copy at the gate and holds it unmapped
b = subprocess.Popen([dl, "--open-first", lib], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
assert b.stdout.readline() == b"opened\\n"
# A maps it and exits: B, which has not mapped it yet, is its only user left
a = subprocess.run([dl, lib], stdout=subprocess.PIPE, check=True)
# another copy's last user exits after A: its release comes after A's copy's was due
c = subprocess.run([dl, other], stdout=subprocess.PIPE, check=True)
sys.stdout.write("released?\\n")
sys.stdout.flush()
sys.stdin.readline()
b.stdin.write(b"g")
b.stdin.close()
out = b.stdout.read()
sys.stdout.buffer.write(a.stdout + c.stdout + out)
sys.exit(b.wait())
"""


def test_gate_opener_keeps_a_released_copy():
    """A process opens a runtime copy at record's gate and maps it later
    (as the dynamic linker does, microseconds later): the copy's last
    mapper exits in between, and its release falls between the open and
    memtrail's scan of the mapping. The opener keeps the copy probed: its
    mapping is never late (memtrail released the probes under it and said
    'mapped before its probes were live', 1 run in 1,000 of the real
    runtime test), and its calls are exact."""
    d = tmpdir()
    lib, other = os.path.join(d, "libcuda-a.so.1"), os.path.join(d, "libcuda-b.so.1")
    shutil.copy(LIBCUDA, lib)
    shutil.copy(LIBCUDA, other)
    out = os.path.join(d, "trail.json")
    m = subprocess.Popen([MEMTRAIL, "record", "-v", "-o", out, "--", "python3", "-c",
                          GATE_DRIVER, workload("dlopen_late"), lib, other],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    err, released = [], threading.Event()

    def read_err():
        for line in m.stderr:
            err.append(line)
            if f"no process maps '{other}' any more" in line:
                released.set()

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    try:
        check_eq(m.stdout.readline(), "released?\n", "the driver ran A and C")
        # the other copy's release is read in memtrail's own words: bounded, not a sleep
        check(released.wait(30), f"the other copy released: {''.join(err)[-1500:]!r}")
        out_text, _ = m.communicate("go\n", timeout=60)
    finally:
        if m.poll() is None:
            m.kill()
            m.wait()
        reader.join(10)
    check_eq(m.returncode, 0, f"record's status ({''.join(err)[-1500:]!r})")
    datas = [json.loads(x) for x in out_text.splitlines() if x.startswith("{")]
    check_eq(len(datas), 3, "A, C and B printed their ledgers")
    trail = load_trail(out)
    check(not gated(trail) or not late_pids(trail),
          f"late at the gate: {events(trail, 'probes_late')}")
    check_ledgers(trail, datas, final=True)
    no_programs_left()


def test_runtime_released_when_its_last_user_exits():
    """A node runs containers that bring their own runtime copies, day after
    day: once the last process that mapped a copy has exited, its probes and
    its descriptor go (a deleted image layer is not kept on disk), and a
    process that maps it later is probed again, its calls exact; so is one
    that maps it the moment the last user exits."""
    d = tmpdir()
    lib = os.path.join(d, "libcuda-layer.so.1")
    shutil.copy(LIBCUDA, lib)
    out = os.path.join(d, "trail.json")
    m = Background(["record", "-o", out, "--all"])
    try:
        base, _ = probe_fds(m.proc.pid)
        datas = []
        for i in range(3):
            p = run([workload("dlopen_late"), lib])
            check_eq(p.returncode, 0, f"workload {i} ({p.stderr!r})")
            datas.append(json.loads(p.stdout.strip().splitlines()[-1]))
            if i == 1:
                # the next user at once, before memtrail has read this one's exit: its
                # mapping of the still probed copy is not held, and must not lose the probes
                continue
            # released once memtrail has read the exit: bounded, not a sleep
            deadline = time.time() + 10
            while time.time() < deadline:
                probes, files = probe_fds(m.proc.pid)
                if probes == base and lib not in files:
                    break
                time.sleep(0.05)
            check_eq(probes, base, f"probe descriptors after run {i} exited")
            check(lib not in files, f"{lib} still open after run {i}: {files}")
    finally:
        rc, _, err = m.stop()
    check_eq(rc, 0, f"record's status ({err[-500:]!r})")
    trail = load_trail(out)
    late = late_pids(trail)
    # each run is new to memtrail (--all has no gate): probed while it lives, or said late
    probed = len([x for x in err.splitlines() if "probing CUDA runtime" in x and lib in x])
    check(probed + len(late) >= 3 and probed <= 3, f"probed again after the release: {err[-1500:]!r}")
    for data in datas:
        if data["pid"] in late:
            continue
        t = target(trail, data["pid"])
        check_ledger(t, data, strict_names=False)   # --all saw its exec too
        for k, v in final_levels(data).items():
            check_eq(t["kinds"][k]["current"], v, f"pid {data['pid']} final {k}")
    no_programs_left()


def test_neuron_linked_new_copy_100_runs():
    """100 programs linked against a new copy of the Neuron stand-in each (the
    dynamic linker maps it at start, before main): every ledger exact."""
    d = tmpdir()
    runs = 100
    lib = os.path.join(STANDINS, "libnrt.so.1")
    script = (f'i=0; while [ $i -lt {runs} ]; do i=$((i+1)); r="{d}/$i"; '
              f'mkdir -p "$r/bin" "$r/standins" && cp "{workload("nrt_phases")}" "$r/bin/" && '
              f'cp "{lib}" "$r/standins/" && "$r/bin/nrt_phases"; rm -rf "$r"; done')
    check_ledgers(*record_runs(script, runs))
    no_programs_left()


def holders_of(dev, ino):
    """The processes ('PID (COMM)') with the file (DEV, INO) open or mapped."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for where in ("fd", "map_files"):
            try:
                names = os.listdir(f"/proc/{pid}/{where}")
            except OSError:
                continue
            for n in names:
                try:
                    st = os.stat(f"/proc/{pid}/{where}/{n}")
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == (dev, ino):
                    try:
                        with open(f"/proc/{pid}/comm") as f:
                            found.add(f"{pid} ({f.read().strip()})")
                    except OSError:
                        found.add(pid)
    return sorted(found)


def test_runtime_made_on_a_freed_inode_probed():
    """A program's file deleted and a runtime copied in its place: ext4 gives
    the freed inode number to the copy, the (device, inode) memtrail saw the
    program at. The copy is a new file, probed, its calls exact (memtrail
    took it for the program, not a runtime, and counted nothing). No mapping
    sites: their symbolizer keeps the program mapped, and its inode in use,
    until record ends; watch keeps none. Where another process holds the
    program's file (another memtrail beside the tests: a DaemonSet's watch
    keeps the files of what it saw run), ext4 cannot give its inode again:
    the failure names the holders."""
    d = tmpdir()
    f = os.path.join(d, "layer-file")
    script = (f'cp /bin/true "{f}" && "{f}" && stat -c "inode %i" "{f}" && rm -f "{f}" && '
              f'cp "{LIBCUDA}" "{f}" && stat -c "inode %i" "{f}" && '
              f'"{workload("dlopen_late")}" "{f}"')
    out = os.path.join(d, "trail.json")
    p = run([MEMTRAIL, "record", "-q", "--no-sites", "-o", out, "--", "sh", "-c", script])
    check_eq(p.returncode, 0, f"status (stderr {p.stderr[-2000:]!r})")
    inodes = [x for x in p.stdout.splitlines() if x.startswith("inode ")]
    if len(inodes) == 2 and inodes[0] != inodes[1]:
        holders = holders_of(os.stat(d).st_dev, int(inodes[0].split()[1]))
        check(not holders, f"the premise cannot be made here: the program's inode is not "
              f"freed for reuse while other processes hold its file open: {holders} (another "
              "memtrail beside the tests keeps the files of what it saw run)")
    check(len(inodes) == 2 and inodes[0] == inodes[1],
          f"the copy made on the program's freed inode, as ext4 does: {inodes}")
    data = json.loads([x for x in p.stdout.splitlines() if x.startswith("{")][-1])
    check_ledgers(load_trail(out), [data], final=True)
    no_programs_left()


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M)[1])


def test_watch_memory_follows_the_files_in_use():
    """A node runs ever new programs (each image brings its own copies):
    watch's memory follows the files in use, not every file ever run. Six
    batches of 1,500 new programs: the first bring its file tables to their
    bounds (the device probes' 1,024 files kept, forgotten down to that at
    2,048; the sites' files of retired processes closed 16 at a time, some
    40 KiB each) and the heap to where it settles; its resident size after
    the last three is within 3 MiB of the most after the first three (each
    file kept for ever cost some 700 bytes, 1 MiB a batch, 3 MiB over three;
    with sites on the figures at rest move by up to 2 MiB from batch to
    batch, the heap's, so a smaller leak passes). Measured at rest, a
    second and a half after each batch: while a batch runs, the files of
    processes that ended in the last turn (at most 250 ms ago; retired at
    watch's next turn, at least one a second) are open too, a few MiB here,
    and that is not what this bounds. A CUDA process that lived through them all has its runtime still
    probed, its device OOM snapshot exact."""
    d, out = tmpdir(), tmpdir()
    batches = []
    for b in range(6):
        os.mkdir(os.path.join(d, str(b)))
        for i in range(1500):
            shutil.copy("/bin/true", os.path.join(d, str(b), str(i)))
        batches.append(os.path.join(d, str(b)))
    bg = Background(["watch", "-o", out])
    try:
        proc = subprocess.Popen([workload("cuda_phases"), "--wait"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        rss = []
        for b in batches:
            # each process is held at its exec until watch has read its new file
            p = run(["sh", "-c", f'for f in "{b}"/*; do "$f" || exit 1; done'], timeout=600)
            check_eq(p.returncode, 0, f"batch {b} ({p.stderr[-500:]!r})")
            time.sleep(1.5)     # at rest: see above
            rss.append(vm_rss_kib(bg.proc.pid))
        data, files = device_oom_snapshot(out, proc)
    finally:
        rc, _, err = bg.stop()
    check_eq(rc, 0, f"watch status: {err[-1000:]!r}")
    # the file tables reach their bounds in the first three batches (when
    # the devices' doubles depends on how many files a tick finds): none
    # grows after them
    check(max(rss[3:]) - max(rss[:3]) <= 3072, f"watch's VmRSS after each batch (KiB): {rss}")
    check_eq(len(files), 1, f"one device OOM snapshot in {os.listdir(out)}")
    check_oom(load_trail(files[0])["snapshot"]["device_oom"], data)
    no_programs_left()


def test_descriptors_run_out():
    """memtrail's open file limit too small for the probes (a perf event a
    function, as before uprobe_multi, forced): what it cannot afford is
    refused with a warning that says what to do, every open of the command
    at the gate succeeds (the gate keeps descriptors to read them), each of
    its programs runs, and the trail is written."""
    d = tmpdir()
    runs = 6
    script = (f'for i in $(seq {runs}); do cp "{LIBCUDA}" "{d}/l$i.so.1" && '
              f'"{workload("dlopen_late")}" "{d}/l$i.so.1" || exit 1; done')
    out = os.path.join(d, "t.json")
    p = run(["prlimit", "--nofile=400:400", MEMTRAIL, "record", "-q", "-o", out, "--", "sh", "-c",
             script], env=dict(os.environ, MEMTRAIL_NO_UPROBE_MULTI="1"), timeout=120)
    check_eq(p.returncode, 0, f"the command's status ({p.stderr[-1000:]!r})")
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    check_eq(len(lines), runs, "programs that ran")
    check("Too many open files (memtrail keeps some descriptors free" in p.stderr,
          f"says why a file is not probed: {p.stderr[-1000:]!r}")
    check("failed at the gate" not in p.stderr, f"opens failed at the gate: {p.stderr[-600:]!r}")
    check_eq(len(load_trail(out)["targets"]) >= runs, True, "the trail has the programs")
    no_programs_left()
