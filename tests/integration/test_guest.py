# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""memtrail is a guest on the node: it never stops, blocks or signals a
process it did not start, and however it ends (SIGKILL of its process group,
cgroup.kill, a SIGSTOP) the node's processes run on. Ground truth from /proc
(state letters) and from the processes' own progress (a beat per program
they ran); the first calls into a runtime that was in place before a process
mapped it are all seen, no one stopped for it."""

import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time

from harness import (MEMTRAIL, Background, check, check_eq, in_cgroup, cgroup_v2_root,
                     load_trail, no_programs_left, proc_state, remove_cgroup, run, target,
                     tmpdir, workload, wait_stopped)
from test_devices import (LIBCUDA, check_ledger, events, final_levels, mount_overlay,
                          unmount_overlay, vendor)

# kills at random moments: 20 here; MEMTRAIL_KILL_TRIES in the emulated kernels (guest.sh)
TRIES = int(os.environ.get("MEMTRAIL_KILL_TRIES", "20"))


def stopped_pids():
    """Every process of the node in a stopped state (T: a stop signal; t: a tracer's stop)."""
    pids = set()
    for d in os.listdir("/proc"):
        if d.isdigit() and proc_state(d) in ("T", "t"):
            pids.add(int(d))
    return pids


def stream_script(d, beats):
    """A shell loop: each program dlopen()s a new copy of the CUDA stand-in
    written in D the moment before and calls it at once; a beat (the time)
    is appended to BEATS after each."""
    return (f'i=0; while :; do i=$((i+1)); lib="{d}/libcuda-$i.so.1"; '
            f'cp "{LIBCUDA}" "$lib" && "{workload("dlopen_late")}" "$lib" >/dev/null; '
            f'rm -f "$lib"; date +%s.%N >> "{beats}"; done')


def wchan(pid):
    """Where in the kernel process PID sleeps ("" when running or gone)."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            w = f.read().strip()
        return "" if w == "0" else w
    except OSError:
        return ""


class Stream:
    """Programs, one after another, each dlopen()ing a runtime file written the
    moment before (a copy of the CUDA stand-in) and calling it at once, in a
    session of their own: a beat (the time) is written after each."""

    def __init__(self, d):
        self.beats = os.path.join(d, "beats")
        self.proc = subprocess.Popen(["sh", "-c", stream_script(d, self.beats)],
                                     start_new_session=True)

    def beats_so_far(self):
        try:
            with open(self.beats) as f:
                return [float(x) for x in f.read().split()]
        except FileNotFoundError:
            return []

    def wait_beats(self, n, timeout=10):
        """Until N more programs ran: the stream goes on (not a sleep: its own progress)."""
        start = len(self.beats_so_far())
        deadline = time.time() + timeout
        while time.time() < deadline and len(self.beats_so_far()) < start + n:
            time.sleep(0.01)
        check(len(self.beats_so_far()) >= start + n,
              f"the stream ran {len(self.beats_so_far()) - start} programs in {timeout} s, "
              f"not {n}: its processes are in states {self.states()}")

    def states(self):
        out = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                if os.getsid(int(d)) == self.proc.pid:
                    out[int(d)] = proc_state(d) + ":" + wchan(d)
            except OSError:
                pass
        return out

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


def kill_tree(pid):
    """PID and every process below it, killed (not memtrail, its parent)."""
    kids = {}
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    todo = [pid]
    while todo:
        p = todo.pop()
        todo.extend(kids.get(p, []))
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def usual_gap(times):
    """The median time between two beats: a program of the stream as long as
    it takes here (milliseconds; a second and more in an emulated kernel)."""
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    return gaps[len(gaps) // 2] if gaps else 0.0


def check_none_stopped(before, what):
    now = stopped_pids() - before
    check(not now, f"{what}: processes left stopped: "
          f"{[(p, proc_state(p)) for p in sorted(now)]}")


def wait_gone(pids, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline and any(proc_state(p) not in ("", "Z") for p in pids):
        time.sleep(0.01)
    check(all(proc_state(p) in ("", "Z") for p in pids), f"memtrail {pids} did not end")


def kill_tries(start, kill, what):
    """TRIES times: memtrail started by START (a Popen in a session of its own,
    tracing every process) beside the stream, then KILL(proc) at a random
    moment: nothing on the node left stopped, the stream goes on."""
    before = stopped_pids()
    d = tmpdir()
    s = Stream(d)
    try:
        for i in range(TRIES):
            m = start(d, i)
            try:
                s.wait_beats(2, timeout=60)
                time.sleep(random.uniform(0, 0.5))  # a random moment in the stream
                kill(m)
                wait_gone([m.pid])
            finally:
                if m.poll() is None:
                    m.kill()
                m.communicate()
            check_none_stopped(before, f"{what}, try {i + 1}")
            # under emulation (TCG) the kernel's teardown of the killed
            # memtrail's uprobes takes seconds; the stream must go on, not be quick
            s.wait_beats(3, timeout=60)
            check_none_stopped(before, f"{what}, try {i + 1}, after the stream ran on")
    finally:
        s.stop()
    no_programs_left()


def started(args):
    """memtrail ARGS in a session of its own, once it traces."""
    m = subprocess.Popen([MEMTRAIL, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    for line in m.stderr:
        if "tracing" in line:
            return m
    m.kill()
    raise AssertionError(f"memtrail did not start: {m.communicate()[1]!r}")


def test_group_sigkill_leaves_nothing_stopped():
    """watch (node-wide, as the DaemonSet runs it) killed with its whole
    process group at random moments of a stream of fresh libraries, 20
    times: no process of the node is stopped, then or after."""
    kill_tries(lambda d, i: started(["watch", "-o", os.path.join(d, f"w{i}")]),
               lambda m: os.killpg(m.pid, signal.SIGKILL), "group SIGKILL")


def test_cgroup_kill_leaves_nothing_stopped():
    """The same with memtrail in a cgroup killed whole (cgroup.kill, 5.14, as
    runc and containerd do; each process of it killed before that, as they
    did): 20 times, nothing left stopped."""
    root = cgroup_v2_root()
    check(root, "no cgroup v2 hierarchy")
    cg = os.path.join(root, f"memtrail-test-kill-{os.getpid()}")
    os.makedirs(cg, exist_ok=True)

    def start(d, i):
        m = subprocess.Popen(in_cgroup(cg, [MEMTRAIL, "watch", "-o", os.path.join(d, f"w{i}")]),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        for line in m.stderr:
            if "tracing" in line:
                return m
        raise AssertionError(f"memtrail did not start: {m.communicate()[1]!r}")

    def kill(m):
        if os.path.exists(os.path.join(cg, "cgroup.kill")):
            with open(os.path.join(cg, "cgroup.kill"), "w") as f:
                f.write("1")
            return
        with open(os.path.join(cg, "cgroup.procs")) as f:
            for pid in f.read().split():
                os.kill(int(pid), signal.SIGKILL)

    try:
        kill_tries(start, kill, "cgroup.kill")
    finally:
        remove_cgroup(cg)


def test_sigkill_of_record_lets_its_command_run_on():
    """record's own command (the stream) waits at the gate for memtrail while
    it opens new files; memtrail alone killed with SIGKILL at random moments
    (the OOM killer's choice of it, say), 20 times: the kernel lets the
    waiting opens go, the command runs on, nothing is stopped."""
    before = stopped_pids()
    for i in range(TRIES):
        d = tmpdir()
        beats = os.path.join(d, "beats")
        script = stream_script(d, beats)
        m = started(["record", "-q", "-o", os.path.join(d, "t.json"), "--", "sh", "-c", script])
        with open(f"/proc/{m.pid}/task/{m.pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
        sh = [k for k in kids if open(f"/proc/{k}/comm").read().strip() == "sh"][0]
        try:
            count = lambda: len(open(beats).read().split()) if os.path.exists(beats) else 0
            deadline = time.time() + 10
            while time.time() < deadline and count() < 2:
                time.sleep(0.01)
            time.sleep(random.uniform(0, 0.5))
            m.kill()
            wait_gone([m.pid])
            at = count()
            deadline = time.time() + 10
            while time.time() < deadline and count() < at + 3:
                time.sleep(0.01)
            check(count() >= at + 3, f"try {i + 1}: the command stopped running when memtrail "
                  f"was killed (states {proc_state(sh)})")
            check_none_stopped(before, f"record's command, try {i + 1}")
        finally:
            kill_tree(sh)
            m.communicate()
    no_programs_left()


def test_stopped_memtrail_blocks_no_one():
    """watch stopped (SIGSTOP: a frozen cgroup, a debugger, a hung disk) for
    10 s while the stream writes and maps new runtime files: no program of
    the stream waits (no gap between two beats longer than 1 s beyond three
    of its usual ones, measured before the stop), none is stopped; watch
    then goes on and ends cleanly."""
    before = stopped_pids()
    d = tmpdir()
    s = Stream(d)
    bg = Background(["watch", "-o", os.path.join(d, "w")])
    try:
        s.wait_beats(5, timeout=60)
        usual = usual_gap(s.beats_so_far())
        bg.proc.send_signal(signal.SIGSTOP)
        wait_stopped(bg.proc.pid)
        t0 = time.time()
        at = len(s.beats_so_far())
        try:
            while time.time() < t0 + 10:
                check_none_stopped(before | {bg.proc.pid}, "while watch is stopped")
                time.sleep(0.1)
        finally:
            bg.proc.send_signal(signal.SIGCONT)
        beats = [b for b in s.beats_so_far()[at:] if b <= t0 + 10]
        check(len(beats) >= 2, f"the stream ran {len(beats)} programs in 10 s")
        gaps = [b - a for a, b in zip([t0] + beats, beats + [t0 + 10])]
        check(max(gaps) < 1.0 + 3 * usual, f"a program of the stream waited: "
              f"{max(gaps):.2f} s between two beats, {usual:.3f} s usually")
    finally:
        s.stop()
        rc, _, err = bg.stop()
    check_eq(rc, 0, f"watch's status after the stop ({err[-500:]!r})")
    no_programs_left()


def fresh_lib(d, name):
    """A new copy of the CUDA stand-in that any user may read."""
    os.chmod(d, 0o755)
    lib = os.path.join(d, name)
    shutil.copy(LIBCUDA, lib)
    os.chmod(lib, 0o644)
    return lib


WRAPPERS = {
    # both wait for their child with WUNTRACED and stop themselves when it stops
    "runuser": lambda cmd: ["runuser", "-u", "nobody", "--", *cmd],
    "su": lambda cmd: ["su", "-s", "/bin/sh", "nobody", "-c", " ".join(cmd)],
}


def test_runuser_and_su_see_nothing():
    """runuser and su (container entrypoints) wrapping a program that maps a
    runtime new to memtrail, 10 times each under node-wide watch: each ends
    with its program's status, none is stopped; under record (the wrapper
    is its command, at the gate) the program's calls are exact."""
    before = stopped_pids()
    d = tmpdir()
    bg = Background(["watch", "-o", os.path.join(d, "w")])
    try:
        for name, wrap in WRAPPERS.items():
            for i in range(10):
                lib = fresh_lib(d, f"libcuda-{name}-{i}.so.1")
                p = run(wrap([workload("dlopen_late"), lib]), timeout=30)
                check_eq(p.returncode, 0, f"{name} run {i} ({p.stderr!r})")
                json.loads(p.stdout.strip().splitlines()[-1])
                check_none_stopped(before, f"{name} run {i}")
    finally:
        rc, _, err = bg.stop()
    check_eq(rc, 0, f"watch's status ({err[-500:]!r})")
    for name, wrap in WRAPPERS.items():
        lib = fresh_lib(d, f"libcuda-{name}-record.so.1")
        out = os.path.join(d, f"{name}.json")
        p = run([MEMTRAIL, "record", "-q", "-o", out, "--", *wrap([workload("dlopen_late"), lib])],
                timeout=60)
        check_eq(p.returncode, 0, f"record -- {name} ({p.stderr[-500:]!r})")
        data = json.loads([x for x in p.stdout.splitlines() if x.startswith("{")][-1])
        trail = load_trail(out)
        if trail["kernel"]["features"]["cmd_gate"]["state"] != "yes":
            continue
        t = target(trail, data["pid"])
        check_ledger(t, data, strict_names=False)
        for k, v in final_levels(data).items():
            check_eq(t["kinds"][k]["current"], v, f"record -- {name}: final {k}")
    no_programs_left()


def test_gdb_sees_no_signal():
    """A program run under gdb maps a runtime new to memtrail, under
    node-wide watch: gdb reports no signal, the program exits normally."""
    d = tmpdir()
    lib = fresh_lib(d, "libcuda-gdb.so.1")
    bg = Background(["watch", "-o", os.path.join(d, "w")])
    try:
        p = run(["gdb", "-nx", "-batch", "-ex", "run", "--args", workload("dlopen_late"), lib],
                timeout=120)
    finally:
        rc, _, err = bg.stop()
    check_eq(p.returncode, 0, f"gdb's status ({p.stderr[-500:]!r})")
    check("received signal" not in p.stdout + p.stderr, f"gdb saw a signal: {p.stdout[-800:]!r}")
    check("exited normally" in p.stdout, f"the program under gdb: {p.stdout[-800:]!r}")
    check_eq(rc, 0, f"watch's status ({err[-500:]!r})")
    no_programs_left()


def copy_with_libs(root, path, dest):
    """PATH copied to ROOT/DEST with the libraries ldd names, at their own paths."""
    os.makedirs(os.path.dirname(root + dest), exist_ok=True)
    shutil.copy(path, root + dest)
    for line in run(["ldd", path]).stdout.splitlines():
        f = line.split()
        lib = f[2] if len(f) > 2 and f[1] == "=>" else f[0] if f and f[0].startswith("/") else None
        if lib and lib.startswith("/") and not os.path.exists(root + lib):
            os.makedirs(os.path.dirname(root + lib), exist_ok=True)
            shutil.copy(lib, root + lib)


def runtime_root(runs, overlaid=False):
    """A container's root: /bin/sh, the workload cudart_now, Debian's real
    libcudart.so.12 and libcuda.so.1 under /opt/cuda/lib, and the root's own
    loader cache naming them; OVERLAID: the lower layer of an overlayfs, as
    containerd runs an image. Its 'pod' (a shell in it, started now, before
    memtrail) runs RUNS programs once it reads a line; each dlopen()s
    libcudart.so.12 by its name (the root's cache) and calls it at once.
    (root, pod); remove_root(root) after."""
    v = vendor()
    base = tmpdir()
    root = os.path.join(base, "lower") if overlaid else base
    copy_with_libs(root, "/bin/sh", "/bin/sh")
    copy_with_libs(root, workload("cudart_now"), "/app/cudart_now")
    os.makedirs(root + "/opt/cuda/lib")
    for lib in (v["cudart"]["12"], v["libcuda"]):
        shutil.copy(os.path.realpath(lib), root + "/opt/cuda/lib/" + os.path.basename(lib))
        copy_with_libs(root, os.path.realpath(lib), "/opt/cuda/lib/" + os.path.basename(lib))
    os.makedirs(root + "/etc", exist_ok=True)
    with open(root + "/etc/ld.so.conf", "w") as f:
        f.write("/opt/cuda/lib\n")
    p = run(["ldconfig", "-r", root])
    check_eq(p.returncode, 0, f"ldconfig -r ({p.stderr!r})")
    if overlaid:
        _, root, _ = mount_overlay(base)
    script = (f'read go; i=0; while [ $i -lt {runs} ]; do i=$((i+1)); '
              f'/app/cudart_now libcudart.so.12; done')
    pod = subprocess.Popen(["chroot", root, "/bin/sh", "-c", script], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    # running in the root before memtrail starts (chroot is slow to get there under TCG)
    want = os.stat(root)
    deadline = time.time() + 60
    while time.time() < deadline:
        st = os.stat(f"/proc/{pod.pid}/root")
        if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
            break
        time.sleep(0.01)
    return root, pod


def remove_root(root):
    """A root of runtime_root() gone, its overlay unmounted."""
    base = os.path.dirname(root)
    if os.path.basename(root) == "merged" and os.path.ismount(root):
        unmount_overlay(root, os.path.join(base, "rw"))
        root = base
    shutil.rmtree(root, ignore_errors=True)


def run_pod(pod, runs):
    out, _ = pod.communicate("go\n", timeout=60 + 2 * runs)
    check_eq(pod.returncode, 0, "the pod's status")
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    check_eq(len(lines), runs, "programs that ran in the pod")
    return lines


def failed_calls(data):
    return [(c["function"], c["rc"]) for c in data["calls"] if c["rc"] != 0]


def test_first_calls_of_a_runtime_in_place_watch():
    """Debian's real libcudart, in place in a container's root (its loader
    cache names it) before its processes start: under node-wide watch, 200
    programs each dlopen() it and call it at once, and watch tells every
    failed call of every one with its code (the runtime fails each without a
    GPU): 200 of 200, no one stopped, nothing late."""
    first_calls_watch(200, overlaid=False)


def test_first_calls_of_a_runtime_on_overlayfs_watch():
    """The same, 50 programs, the root an overlayfs (a container's image):
    the files its loader cache names are known as the kernel maps them, not
    as fstat shows them (a device per layer)."""
    first_calls_watch(50, overlaid=True)


def first_calls_watch(runs, overlaid):
    before = stopped_pids()
    root, pod = runtime_root(runs, overlaid)
    bg = Background(["watch", "-o", os.path.join(tmpdir(), "w")])
    # read as it comes: a reader that lags makes memtrail drop lines (and count them)
    said = []
    reader = threading.Thread(target=lambda: said.extend(bg.proc.stderr), daemon=True)
    reader.start()
    try:
        lines = run_pod(pod, runs)
    finally:
        bg.proc.send_signal(signal.SIGINT)
        rc = bg.proc.wait(timeout=60)
        reader.join(timeout=60)
        remove_root(root)
    err = "".join(said)
    check_eq(rc, 0, f"watch's status ({err[-500:]!r})")
    check("before its probes were live" not in err and "ended before memtrail" not in err,
          f"late: {[x for x in err.splitlines() if 'memtrail could' in x or 'late' in x][:3]}")
    missed = []
    for data in lines:
        want = failed_calls(data)
        check(want, f"the runtime failed nothing without a GPU: {data}")
        got = [(x.split(" returned ")[0].split()[-1], int(x.split(" returned ")[1].split()[0]))
               for x in err.splitlines()
               if f"device call failed: {data['pid']} (" in x]
        if got != want:
            missed.append((data["pid"], want, got))
    check(not missed, f"{len(missed)} of {runs} programs not seen exactly; the first: "
          f"{missed[:1]}")
    check_none_stopped(before, "the pod's programs")
    no_programs_left()


def test_first_calls_of_a_runtime_in_place_record_pid():
    """The same under record -p of the pod's shell (a running process and the
    children it forks): every failed call of its 200 programs in the trail,
    with its code."""
    runs = 200
    root, pod = runtime_root(runs)
    out = os.path.join(tmpdir(), "t.json")
    bg = Background(["record", "-o", out, "-p", str(pod.pid)])
    try:
        lines = run_pod(pod, runs)
    finally:
        rc, _, err = bg.stop()
        remove_root(root)
    check_eq(rc, 0, f"record's status ({err[-500:]!r})")
    trail = load_trail(out)
    check(not events(trail, "probes_late"), f"late: {events(trail, 'probes_late')[:3]}")
    by_pid = {}
    for e in trail["events"]:
        if e["type"] in ("device_error", "device_oom"):
            by_pid.setdefault(e["pid"], []).append((e["function"], e["code"]))
    missed = [(d["pid"], failed_calls(d), by_pid.get(d["pid"])) for d in lines
              if by_pid.get(d["pid"]) != failed_calls(d)]
    check(not missed, f"{len(missed)} of {runs} programs not recorded exactly; the first: "
          f"{missed[:1]}")
    no_programs_left()


def test_stopped_record_holds_its_command_at_most_a_second():
    """record stopped (SIGSTOP) for 10 s (or four of the stream's programs'
    usual time, where that is longer: an emulated kernel) while its command (the stream)
    writes and maps new runtime files at its gate: the gate's keeper lets
    an open go after at most 1 s and the next ones at once, so no program of
    the command takes a second more than its usual time; nothing is stopped
    but memtrail; a process that reads the command's files through /proc/PID/root meanwhile does not
    wait; record then goes on and writes its trail."""
    before = stopped_pids()
    d = tmpdir()
    beats = os.path.join(d, "beats")
    script = stream_script(d, beats)
    out = os.path.join(d, "t.json")
    bg = Background(["record", "-q", "-o", out, "--", "sh", "-c", script])
    with open(f"/proc/{bg.proc.pid}/task/{bg.proc.pid}/children") as f:
        kids = [int(x) for x in f.read().split()]
    sh = [k for k in kids if open(f"/proc/{k}/comm").read().strip() == "sh"][0]
    count = lambda: len(open(beats).read().split()) if os.path.exists(beats) else 0
    try:
        deadline = time.time() + 60
        while time.time() < deadline and count() < 5:
            time.sleep(0.01)
        with open(beats) as f:
            usual = usual_gap([float(x) for x in f.read().split()])
        # long enough for two programs at their usual pace and the keeper's second
        window = max(10.0, 4 * usual)
        bg.proc.send_signal(signal.SIGSTOP)
        wait_stopped(bg.proc.pid)
        t0 = time.time()
        at = count()
        try:
            t1 = time.time()
            with open(f"/proc/{sh}/root{workload('dlopen_late')}", "rb") as f:
                check_eq(f.read(4), b"\x7fELF", "the command's program read through its root")
            check(time.time() - t1 < 1.0, f"a read through the command's root waited "
                  f"{time.time() - t1:.2f} s")
            while time.time() < t0 + window:
                check_none_stopped(before | {bg.proc.pid}, "while record is stopped")
                time.sleep(0.1)
        finally:
            bg.proc.send_signal(signal.SIGCONT)
        with open(beats) as f:
            times = [float(x) for x in f.read().split()[at:]]
        times = [b for b in times if b <= t0 + window]
        check(len(times) >= 2, f"the command ran {len(times)} programs in {window:.0f} s "
              f"({usual:.2f} s each usually)")
        gaps = [b - a for a, b in zip([t0] + times, times + [t0 + window])]
        # the keeper's second, then opens at once: one gap of a second beyond the usual
        check(max(gaps) < 1.0 + 3 * usual, f"a program of the command waited: "
              f"{max(gaps):.2f} s between two beats, {usual:.3f} s usually")
    finally:
        kill_tree(sh)
        rc, _, err = bg.stop(timeout=60)
    check(os.path.exists(out), f"record wrote its trail ({err[-500:]!r})")
    no_programs_left()
