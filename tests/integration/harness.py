# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Helpers for the integration tests: run memtrail and workloads for real,
read trails, make cgroups, and check that no BPF object is left behind."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MEMTRAIL = os.path.join(ROOT, "memtrail")
WORKLOADS = os.path.join(ROOT, "build", "workloads")
MiB = 1024 * 1024
# the running kernel's page size (16 or 64 KiB on some arm64 kernels): what mmap rounds to
PAGE = os.sysconf("SC_PAGESIZE")


class TestFailure(AssertionError):
    pass


def check(cond, what):
    if not cond:
        raise TestFailure(what)


def check_eq(got, want, what):
    if got != want:
        raise TestFailure(f"{what}: got {got}, want {want}")


def check_within(got, want, pct, what):
    if want == 0 or abs(got - want) > abs(want) * pct / 100.0:
        raise TestFailure(f"{what}: got {got}, want {want} within {pct}%")


def workload(name):
    return os.path.join(WORKLOADS, name)


VENDOR = os.path.join(ROOT, "build", "vendor", "manifest.json")


def vendor():
    """What tests/vendor.py fetched (make test runs it): NVIDIA's real
    libraries from Debian and Python 3.13 and 3.14 roots, their paths made whole."""
    check(os.path.exists(VENDOR), f"{VENDOR} is missing: python3 tests/vendor.py fetches "
          "Debian's libcuda1, libcudart and Pythons 3.13 and 3.14 (make test runs it)")
    with open(VENDOR) as f:
        data = json.load(f)
    here = os.path.dirname(VENDOR)
    data["libcuda"] = os.path.join(here, data["libcuda"])
    data["cudart"] = {k: os.path.join(here, v) for k, v in data["cudart"].items()}
    for name in ("python313", "python314"):
        check(name in data, f"{VENDOR} names no {name}: run python3 tests/vendor.py again")
        data[name]["root"] = os.path.join(here, data[name]["root"])
    return data


PYENV = "/root/.pyenv/versions"


def pyenv(version):
    """pyenv's build of CPython VERSION (a shared libpython), which the tests need."""
    path = os.path.join(PYENV, version, "bin", "python" + version.rsplit(".", 1)[0])
    check(os.access(path, os.X_OK), f"{path} is missing: the tests need pyenv's CPython "
          f"{version} (in {PYENV}, as on the development machines)")
    return path


def tmpdir():
    return tempfile.mkdtemp(prefix="memtrail-test-")


def run(args, timeout=120, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)


def record(cmd, extra=(), timeout=120, env=None):
    """memtrail record -q -o TRAIL [extra] -- cmd (in ENV, else this one);
    returns (proc, trail, workload JSON)."""
    out = os.path.join(tmpdir(), "trail.json")
    p = run([MEMTRAIL, "record", "-q", "-o", out, *extra, "--", *cmd], timeout=timeout, env=env)
    trail = load_trail(out) if os.path.exists(out) else None
    data = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            data = json.loads(line)
    return p, trail, data


def record_runs(cmd, runs, extra=(), timeout=240):
    """CMD run RUNS times in a row under one memtrail record (a shell loop:
    memtrail loads once, each run its own target); CMD prints its JSON with
    its "pid". Returns (proc, trail, [(target, JSON)] in the order run)."""
    out = os.path.join(tmpdir(), "trail.json")
    loop = f'for i in $(seq {runs}); do "$@" || exit $?; done'
    p = run([MEMTRAIL, "record", "-q", "-o", out, *extra, "--", "sh", "-c", loop, "sh", *cmd],
            timeout=timeout)
    trail = load_trail(out) if os.path.exists(out) else None
    datas = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    check_eq(len(datas), runs, f"runs that printed their report (stderr {p.stderr!r})")
    check(trail is not None, f"no trail (stderr {p.stderr!r})")
    return p, trail, [(target(trail, data["pid"]), data) for data in datas]


def load_trail(path):
    with open(path) as f:
        return json.load(f)


def target(trail, pid):
    for t in trail["targets"]:
        if t["pid"] == pid:
            return t
    raise TestFailure(f"pid {pid} is not among the trail's targets "
                      f"{[t['pid'] for t in trail['targets']]}")


def level(t, kind, field):
    return t["kinds"][kind][field]


def one_line_error(p, *needles):
    """A failed run: non-zero status, one line on stderr that names the problem."""
    check(p.returncode != 0, f"exit status is 0 (stderr: {p.stderr!r})")
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(len(lines) == 1, f"want one line on stderr, got {lines!r}")
    for n in needles:
        check(n in lines[0], f"{n!r} not in {lines[0]!r}")


def memtrail_pids():
    """Processes of memtrail's running now."""
    pids = set()
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/comm") as f:
                if f.read().strip() == "memtrail":
                    pids.add(int(d))
        except (OSError, ValueError):
            pass
    return pids


# memtrails the suite found running (a DaemonSet's watch on a real node):
# their programs are theirs, not leftovers of a test
FOREIGN = memtrail_pids()


def proc_starts():
    """{pid: start time in ticks} of every process now (a pid reused since differs)."""
    starts = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                starts[int(d)] = int(f.read().rsplit(")", 1)[1].split()[19])
        except (OSError, ValueError, IndexError):
            pass        # ended as it was read
    return starts


# the node's own processes, running before the suite (a DaemonSet's memtrail,
# under whatever name, another BPF tool): what they hold is theirs
NODE_PROCS = proc_starts()
# the programs loaded as the current test began (test_begins)
PROGS_AT_START = set()


def node_programs():
    """IDs of the programs the node's own processes hold, directly or by a
    link: the prog_id lines of their descriptors' fdinfo."""
    ids, now = set(), proc_starts()
    for pid, start in NODE_PROCS.items():
        if now.get(pid) != start:
            continue        # ended since (its pid maybe another's now)
        try:
            fds = os.listdir(f"/proc/{pid}/fdinfo")
        except OSError:
            continue
        for fd in fds:
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    ids.update(int(l.split()[1]) for l in f if l.startswith("prog_id:"))
            except (OSError, ValueError, IndexError):
                pass
    return ids


def all_programs():
    p = run(["bpftool", "-j", "prog", "show"])
    if p.returncode != 0:
        raise TestFailure(f"bpftool prog show failed: {p.stderr.strip()}")
    return json.loads(p.stdout or "[]")


def test_begins():
    """run.py, before each test: the programs loaded by then are not its own."""
    global PROGS_AT_START
    PROGS_AT_START = {x.get("id") for x in all_programs()}


def loaded_programs():
    """Programs of memtrail's names (mt_...) loaded since the test began that no
    process of the node's own holds: the test's, or left behind by it."""
    new = [x for x in all_programs() if x.get("name", "").startswith("mt_") and
           x.get("id") not in PROGS_AT_START]
    theirs = node_programs() if new else set()
    return [x for x in new if x.get("id") not in theirs]


def no_programs_left():
    """Programs are freed after their last fd closes, a moment after exit."""
    deadline = time.time() + 5
    while time.time() < deadline:
        if not loaded_programs():
            return
        time.sleep(0.1)
    left = [(x["id"], x["name"]) for x in loaded_programs()]
    raise TestFailure(f"BPF programs left behind: {left}")


def proc_state(pid):
    """PID's state letter (ps's), "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return ""	# gone, or going as it is read


def wait_stopped(pid, timeout=10):
    """Until process PID is stopped (state T), as a SIGSTOP leaves it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = proc_state(pid)
        check(st, f"process {pid} is gone")
        if st in ("T", "t"):
            return
        time.sleep(0.01)
    raise TestFailure(f"process {pid} did not stop")


class Background:
    """memtrail running in the background until it prints 'tracing' (run by
    PREFIX, a command line that execs it: unshare, podman)."""

    def __init__(self, args, prefix=(), **kw):
        self.proc = subprocess.Popen([*prefix, MEMTRAIL, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, **kw)
        self.err_lines = []
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.err_lines.append(line)
            if "tracing" in line:
                return
        self.proc.kill()
        out, err = self.proc.communicate()
        raise TestFailure(f"memtrail did not start: {''.join(self.err_lines) + err!r}")

    def stop(self, sig=signal.SIGINT, timeout=60):
        if sig is not None:
            self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=timeout)
        self.err_lines.append(err)
        return self.proc.returncode, out, "".join(self.err_lines)


def memcg_v1(name):
    base = "/sys/fs/cgroup/memory"
    check(os.path.isdir(base), "no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory")
    path = os.path.join(base, name)
    os.makedirs(path, exist_ok=True)
    return path


def cgroup_v2_root():
    for d in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        if os.path.exists(os.path.join(d, "cgroup.procs")) and \
                os.path.exists(os.path.join(d, "cgroup.subtree_control")):
            return d
    return None


def remove_cgroup(path):
    deadline = time.time() + 5
    while os.path.isdir(path):
        try:
            os.rmdir(path)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def new_pod_ids():
    """A pod UID and a container ID as Kubernetes and the runtimes make them."""
    return str(uuid.uuid4()), uuid.uuid4().hex + uuid.uuid4().hex


def memory_v2_root():
    """The cgroup v2 root when it has the memory controller (a v2 node), else None."""
    root = cgroup_v2_root()
    if not root:
        return None
    with open(os.path.join(root, "cgroup.controllers")) as f:
        return root if "memory" in f.read().split() else None


def kubelet_memcg(limit, ids=None, runtime="cri-containerd", driver="cgroupfs"):
    """A memory cgroup shaped like the kubelet's with LIMIT on the container,
    on cgroup v1 where the machine has it, else on the v2 node's unified
    hierarchy: kubepods/burstable/pod<uid>/<runtime>-<id> (the cgroupfs
    driver) or kubepods.slice/kubepods-burstable.slice/
    kubepods-burstable-pod<uid>.slice/<runtime>-<id>.scope (systemd). Returns (directory, cgroup path, limit as the kernel
    set it, pod uid, container id)."""
    uid, cid = ids or new_pod_ids()
    top = f"memtrail-test-{os.getpid()}"
    if driver == "systemd":
        puid = uid.replace("-", "_")
        parts = [top, "kubepods.slice", "kubepods-burstable.slice",
                 f"kubepods-burstable-pod{puid}.slice", f"{runtime}-{cid}.scope"]
    else:
        parts = [top, "kubepods", "burstable", f"pod{uid}", f"{runtime}-{cid}"]
    rel = "/".join(parts)
    v2 = memory_v2_root() if not os.path.isdir("/sys/fs/cgroup/memory") else None
    if not v2:
        path = memcg_v1(rel)
        limit_file = "memory.limit_in_bytes"
    else:
        path = v2
        for part in parts:
            # a v2 parent hands the controller down before its child can use it
            with open(os.path.join(path, "cgroup.subtree_control"), "w") as f:
                f.write("+memory")
            path = os.path.join(path, part)
            os.makedirs(path, exist_ok=True)
        limit_file = "memory.max"
    with open(os.path.join(path, limit_file), "w") as f:
        f.write(str(limit))
    with open(os.path.join(path, limit_file)) as f:
        real = int(f.read())
    return path, "/" + rel, real, uid, cid


def remove_tree(path):
    """Remove a test's cgroup tree from its top (the child of the hierarchy's root)."""
    top = path
    while not os.path.basename(top).startswith("memtrail-test-"):
        top = os.path.dirname(top)
    for d in sorted((os.path.join(r, x) for r, ds, _ in os.walk(top) for x in ds),
                    key=len, reverse=True):
        remove_cgroup(d)
    remove_cgroup(top)


PY_HOG = """
import sys
sys.path.insert(0, sys.argv[1])
import memtrail_marker
memtrail_marker.phase("grow")
hold = []
while True:
    hold.append(b"x" * (4 << 20))
"""


def py_hog():
    """A python3 command that enters phase "grow" (the Python marker) and takes
    4 MiB at a time until the kernel stops it."""
    return [os.path.realpath(sys.executable), "-c", PY_HOG, os.path.join(ROOT, "include")]


def in_cgroup(path, cmd):
    """cmd run by a shell that first moves itself into the cgroup."""
    return ["sh", "-c", f'echo $$ > "{path}/cgroup.procs" && exec "$@"', "sh", *cmd]


def free_pid():
    """A PID that no process can have: one past the kernel's pid_max (one
    just reaped is the next fork's on a busy node)."""
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read()) + 1


def varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            return n, i


def pprof_strings(buf):
    """A pprof Profile's string_table (field 6), read from its protobuf by hand."""
    out, i = [], 0
    while i < len(buf):
        tag, i = varint(buf, i)
        kind = tag & 7
        if kind == 0:
            _, i = varint(buf, i)
        elif kind == 2:
            n, i = varint(buf, i)
            if tag >> 3 == 6:
                out.append(buf[i:i + n].decode())
            i += n
        else:
            check(False, f"pprof: wire type {kind} not expected at {i}")
    return out
