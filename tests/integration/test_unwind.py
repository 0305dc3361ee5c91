# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Deep stacks (record --heap's default, --unwind dwarf): heap sites'
chains unwound by the binaries' call-frame information, through code built without frame pointers. Expected chains
come from the programs themselves (glibc's backtrace(), which unwinds by
.eh_frame too) and expected bytes from their own arithmetic."""

import json
import os
import shutil
import signal
import subprocess

from harness import (MEMTRAIL, WORKLOADS, check, check_eq, no_programs_left, pyenv, run,
                     tmpdir, vendor, workload)
from test_sites import TORCH


def record_alive(cmd, out, extra=()):
    """record --heap (deep stacks) of CMD, which prints one line and then runs on (a
    server) until it reads one: stopped with Ctrl-C while CMD still runs, so
    that the trail is written while everything naming its samples (its
    mappings, its code objects) can be read, then CMD let go. Its line, and
    record's stderr."""
    with open(os.path.join(tmpdir(), "record.err"), "w+") as err:
        p = subprocess.Popen([MEMTRAIL, "record", "-q", "--heap", *extra, "-o", out,
                              "--", *cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=err, text=True)
        try:
            line = p.stdout.readline()
            p.send_signal(signal.SIGINT)
            p.wait(timeout=120)
        finally:
            try:
                p.stdin.write("\n")  # the command, still running, ends
                p.stdin.close()
            except OSError:
                pass
            p.kill()
        err.seek(0)
        stderr = err.read()
    check_eq(p.returncode, 128 + signal.SIGINT, f"record stopped by Ctrl-C ({stderr.strip()})")
    check("trail written" in stderr, f"the trail is written: {stderr.strip()[-500:]}")
    return line, stderr


def deep_record(cmd, comm):
    """record --heap --heap-sample 0 (deep stacks) of every allocation of CMD (record_alive): its
    output, its target and the trail."""
    out = os.path.join(tmpdir(), comm + ".json")
    line, stderr = record_alive(cmd, out, ["--heap-sample", "0"])
    with open(out) as f:
        trail = json.load(f)
    check(not any(trail["lost"].values()), f"nothing lost: {trail['lost']}")
    t = next(x for x in trail["targets"] if x["comm"] == comm)
    check_eq(t["sites"]["heap"]["sample_bytes"], 0, "every allocation has its chain")
    return json.loads(line), t, stderr


def check_chains(data, t, allocator, n, expect=None):
    """Each of the N allocations the workload printed is one heap site of its
    size whose chain past ALLOCATOR (the workload's allocating function) is
    exactly backtrace()'s (or EXPECT's, by where), not cut, ending at the
    thread's first frame."""
    heap = [s for s in t["sites"]["list"] if s["kind"] == "heap"]
    check_eq(len(data["allocs"]), n, f"the workload made its {n} allocations")
    for a in data["allocs"]:
        rows = [s for s in heap if s["alloc_bytes"] == a["size"]]
        check_eq(len(rows), 1, f"one site of {a['where']}'s {a['size']} bytes: "
                 f"{[(s['alloc_bytes'], [f.get('function') for f in s['frames'][:3]]) for s in heap]}")
        # its free told back: the freed one holds nothing, the others all they got
        check_eq(rows[0]["inuse_bytes"], 0 if a["where"] == "freed" else a["size"],
                 f"{a['where']}: bytes in use")
        frames = rows[0]["frames"]
        names = [f.get("function") or "" for f in frames]
        at = [i for i, x in enumerate(names) if x.startswith(allocator)]
        check(at and at[0] <= 1, f"{a['where']}: {allocator} allocates: {names[:3]}")
        got = [f.get("address") for f in frames[at[0] + 1:]]
        want = expect[a["where"]] if expect else a["frames"]
        check_eq(got, want, f"{a['where']}: the chain is backtrace()'s ({names})")
        check(not rows[0].get("frames_truncated"), f"{a['where']}: the chain is whole")
        # a thread's: x86-64's glibc starts it inside clone3, arm64's in thread_start
        check(names[-1] in ("_start", "__clone3", "clone3", "clone", "thread_start"),
              f"{a['where']}: it ends at the thread's first frame: {names[-1]}")
    return heap


def test_deep_chains_equal_backtrace():
    """A C program built -O2 -fomit-frame-pointer allocates at the end of
    chains 12 calls deep in its main thread, in a second thread, in a signal
    handler raised inside a chain, and through a dlopen()ed library (also
    without frame pointers), and prints what backtrace() says above its
    allocating function; a fifth such allocation is freed. Each of those
    sites' chain, past its first frame, is exactly backtrace()'s, named down
    to _start or the thread's clone, and not marked cut; their bytes and
    bytes in use are the workload's."""
    data, t, stderr = deep_record([workload("deep"), os.path.join(WORKLOADS, "lib")], "deep")
    heap = check_chains(data, t, "deep_alloc", 5)
    for a in data["allocs"]:
        names = [f.get("function") for f in
                 next(s for s in heap if s["alloc_bytes"] == a["size"])["frames"]]
        check(names.count("chain") >= (3 if a["where"] == "in_handler" else 12) or
              a["where"] == "dlopen", f"{a['where']}: every call of the chain: {names}")
    lib = next(s for s in heap if s["alloc_bytes"] == 400000)["frames"]
    check_eq([f.get("function") for f in lib[1:5]], ["lib3", "lib2", "lib1", "deeplib_entry"],
             "the dlopen()ed library's own frames")
    check("deep stacks:" in stderr and " to the thread's first frame" in stderr,
          f"what the unwinding gave is said: {stderr.strip()[-500:]}")
    no_programs_left()


def test_deep_chains_through_uretprobes():
    """The same C program with a --scope rule on its chain function: every
    call of it is probed at its return, so while it runs its frames' return
    addresses on the stack are the kernel's uretprobe trampoline (glibc's
    backtrace() reads the first and stops there). Run twice without address
    space randomization (setarch -R), unprobed then probed: each probed
    chain past deep_alloc is the unprobed run's backtrace() exactly, the
    real return addresses in place of the trampoline, whole to the thread's
    first frame; the probed run's own backtrace() agrees up to the
    trampoline it read."""
    binary, lib = workload("deep"), os.path.join(WORKLOADS, "lib")
    line, _ = record_alive(["setarch", "-R", binary, lib], os.path.join(tmpdir(), "plain.json"),
                           ["--heap-sample", "0"])
    plain = {a["where"]: a["frames"] for a in json.loads(line)["allocs"]}
    out = os.path.join(tmpdir(), "scoped.json")
    line, _ = record_alive(["setarch", "-R", binary, lib], out,
                           ["--heap-sample", "0", "--scope", f"scoped={binary}:chain"])
    data = json.loads(line)
    check(data.get("uprobes"), f"the workload has a uretprobe trampoline mapped: {data}")
    lo, hi = (int(x, 16) for x in data["uprobes"])
    with open(out) as f:
        trail = json.load(f)
    check(not any(trail["lost"].values()), f"nothing lost: {trail['lost']}")
    t = next(x for x in trail["targets"] if x["comm"] == "deep")
    data["allocs"] = [a for a in data["allocs"] if a["where"] != "dlopen"]	# no chain() there
    for a in data["allocs"]:
        read = a["frames"]
        check(read and lo <= int(read[-1], 16) < hi and
              read[:-1] == plain[a["where"]][:len(read) - 1],
              f"{a['where']}: the probed run's backtrace() ends at the trampoline, the same "
              f"before it: {read} / {plain[a['where']]}")
    check_chains(data, t, "deep_alloc", 4, expect=plain)
    no_programs_left()


def test_deep_cxx_chains_equal_backtrace():
    """The C++ twin (-O2 -fomit-frame-pointer): operator new at the end of
    12-deep chains of a class template's member functions, in main, in a
    std::thread and in a catch block after an exception: each chain past the
    allocating function is backtrace()'s, demangled."""
    data, t, _ = deep_record([workload("deepxx")], "deepxx")
    heap = check_chains(data, t, "deep::alloc_here(", 3)
    rows = next(s for s in heap if s["alloc_bytes"] == 310000)["frames"]
    names = [f.get("function") or "" for f in rows]
    check(sum(n.startswith("deep::Layer<long>::down(int,") for n in names) == 12 and
          "deep::after_throw(unsigned long)" in names,
          f"the catch block's chain, demangled: {names}")
    no_programs_left()


_torch = {}


def torch_deep_heap():
    """The PyTorch example under record --heap (deep stacks, sampled: the
    default), recorded once a run for the tests that read it: (the trail's
    path, record's stderr, the script's own account, the script's line that
    builds the layers)."""
    if not _torch:
        out = os.path.join(tmpdir(), "torch.json")
        p = subprocess.run([MEMTRAIL, "record", "-q", "--heap", "-o", out, "--", TORCH,
                            "2", "2048", "2"], capture_output=True, text=True, timeout=600)
        check_eq(p.returncode, 0, f"record exit status ({p.stderr.strip()[-2000:]})")
        data = next(json.loads(x) for x in p.stdout.splitlines() if x.startswith("{"))
        with open(TORCH) as f:
            line = next(n for n, text in enumerate(f, 1)
                        if "torch.nn.Linear(size, size)" in text)
        _torch.update(out=out, stderr=p.stderr, data=data, line=line)
    return _torch["out"], _torch["stderr"], _torch["data"], _torch["line"]


def test_deep_pytorch_reaches_the_interpreter():
    """Debian's PyTorch and Python 3.11 are built without frame pointers:
    under record --heap (deep stacks, sampled: the default) the weights' sites go from
    c10::alloc_cpu through libtorch_cpu and libtorch_python into python3.11
    and on to its main; at least 95% of the weights' bytes are under such
    chains, and under sites naming the script's line that builds the layers
    and torch's Linear.__init__ (Python frames in place of the eval loop);
    with python3.11's debug file (python3-dbg), no site whose first frame is
    unnamed holds 1% of the heap bytes."""
    out, stderr, data, line = torch_deep_heap()
    with open(out) as f:
        trail = json.load(f)
    t = next(x for x in trail["targets"] if "torch_linear.py" in (x["cmdline"] or ""))
    check_eq(t["sites"]["heap"]["mode"], "sampled", "sampled by default")
    whole = 0
    for s in t["sites"]["list"]:
        names = [f.get("function") or "" for f in s["frames"]]
        mods = [os.path.basename(f.get("module") or "") for f in s["frames"]]
        if (s["kind"] == "heap" and names[0].startswith("c10::alloc_cpu(")
                and any(m.startswith("libtorch_cpu.so") for m in mods)
                and any(m.startswith("libtorch_python.so") for m in mods)
                and "Py_BytesMain" in names and not s.get("frames_truncated")):
            whole += s["alloc_bytes"]
    want = data["weight_bytes"]
    check(whole >= 0.95 * want, f"{whole} of the weights' {want} bytes under whole chains")
    # the script's own line that builds the layers, and Linear's line that makes a weight
    named = sum(s["alloc_bytes"] for s in t["sites"]["list"]
                if s["kind"] == "heap" and f"torch_linear.py:{line}" in
                [(x.get("source") or "").rsplit("/", 1)[-1] for x in s["frames"]] and
                any(x.get("function") == "Linear.__init__" for x in s["frames"]))
    check(named >= 0.95 * want, f"{named} of the weights' {want} bytes at sites naming "
          f"torch_linear.py:{line} and Linear.__init__")
    # python3.11's debug file installed (python3-dbg): no unnamed site holds 1% of the heap
    heap = [s for s in t["sites"]["list"] if s["kind"] == "heap"]
    total = sum(s["alloc_bytes"] for s in heap)
    unnamed = [(s["alloc_bytes"], s["frames"][0]) for s in heap
               if s["frames"][0].get("function") in ("[unknown]", "[no stack]")
               and s["alloc_bytes"] > total / 100]
    check(not unnamed, f"no '[unknown]' or '[no stack]' site over 1% of {total}: {unnamed}")
    said = [x for x in stderr.splitlines()
            if x.startswith("memtrail: heap: ") and " at sites no symbol names" in x]
    check(not said, f"no unnamed share said for the heap: {said}")
    r = run([MEMTRAIL, "report", "--top", "3", out])
    check_eq(r.returncode, 0, f"report ({r.stderr.strip()})")
    no_programs_left()


PY_LINES = os.path.join(WORKLOADS, "..", "..", "tests", "workloads", "py_lines.py")


def first_py(s):
    """A site's first Python frame, or None."""
    return next((f for f in s["frames"] if (f.get("source") or "").endswith(".py")
                 or ".py:" in (f.get("source") or "")), None)


def deep_maps(trail):
    """Whether mapping sites are deep stacks here: where the kernel has them
    at all (map_sites; not in the object for kernels without atomics)."""
    return (trail["kernel"]["features"]["map_sites"]["state"] == "yes"
            and not os.environ.get("MEMTRAIL_COMPAT"))


def check_python_lines(data, t, mapped=False, qualname=True):
    """Each allocation py_lines.py made is a heap site whose first Python
    frame is the function and line it says, holding its bytes (a bytearray
    asks one more for its terminating NUL; the one made with the GIL
    released, through ctypes, is named as the others); the re-entry's chain has the
    key function, then sorted()'s own C frames, then by_size. MAPPED: the
    memory glibc mapped for each (mmap, or brk growing its heap) is at
    mapping sites naming the same line: its bytes, rounded up to pages, and
    at most the heap's top pad more. QUALNAME false (3.10, whose code
    objects have no co_qualname): functions are named by co_name."""
    heap = [s for s in t["sites"]["list"] if s["kind"] == "heap"]
    if not qualname:
        for a in data["allocs"]:
            a["function"] = a["function"].rsplit(".", 1)[-1]
    for a in data["allocs"]:
        rows = [s for s in heap if a["size"] <= s["alloc_bytes"] <= a["size"] + 64]
        check_eq(len(rows), 1, f"one site of {a['where']}'s {a['size']} bytes: "
                 f"{sorted(s['alloc_bytes'] for s in heap)[-8:]}")
        f = first_py(rows[0])
        check(f is not None, f"{a['where']}: a Python frame: {rows[0]['frames']}")
        check_eq((f["function"], f["source"].rsplit("/", 1)[-1]),
                 (a["function"], f"py_lines.py:{a['line']}"), f"{a['where']}: its line")
        check("address" not in f, f"{a['where']}: a Python frame has no native address")
        names = [x.get("function") for x in rows[0]["frames"]]
        check("_PyEval_EvalFrameDefault" not in names[:names.index(a["function"]) + 1],
              f"{a['where']}: Python frames stand in place of the eval loop: {names}")
        if mapped:
            maps = [s for s in t["sites"]["list"] if s["kind"] == "mapped" and first_py(s) and
                    (first_py(s)["function"], first_py(s)["source"].rsplit("/", 1)[-1]) ==
                    (a["function"], f"py_lines.py:{a['line']}")]
            got = sum(s["alloc_bytes"] for s in maps)
            check(a["size"] <= got <= a["size"] + 2**20,
                  f"{a['where']}: its {a['size']} bytes mapped at sites naming its line: {got}")
    key = next(s for s in heap if s["alloc_bytes"] > data["allocs"][4]["size"] - 1 and
               s["alloc_bytes"] <= data["allocs"][4]["size"] + 64)["frames"]
    names = [x.get("function") for x in key]
    at, up = names.index(data["allocs"][4]["function"]), names.index("by_size")
    check(up > at + 1 and all(x.get("address") for x in key[at + 1:up]),
          f"C frames of sorted() between the key function and its caller: {names}")


def test_python_lines():
    """Debian's python3.11 (no frame pointers) under record --heap: five
    bytearrays made in a function, a method, a generator, a thread and a
    key function sorted() calls back are at sites naming the function and
    line that made them (the workload's own account of its lines)."""
    python_lines_of(["/usr/bin/python3", PY_LINES], 11)


def test_python_lines_attached():
    """The same on a python3.11 process started before memtrail and
    attached with -p: its interpreter is found in its mappings and its
    threads' frames are read from then on."""
    attached_lines_of(["/usr/bin/python3", PY_LINES], 11)


def test_python313_lines():
    """Debian trixie's CPython 3.13 (tests/vendor.py: with its own C library,
    in a root directory chroot runs, as a container's) under record --heap:
    its structures are found by the _Py_DebugOffsets at the head of its
    _PyRuntime, each frame's owner marks where an eval loop call's frames
    end, and the same five allocations name the same functions and lines."""
    py = vendor()["python313"]
    shutil.copy(PY_LINES, os.path.join(py["root"], "tmp", "py_lines.py"))
    python_lines_of(["chroot", py["root"], py["python"], "/tmp/py_lines.py"], 13)


def python_lines_of(cmd, minor, qualname=True):
    """record --heap of py_lines.py run by CMD: the interpreter is said to be
    read and the five allocations name their functions and lines."""
    out = os.path.join(tmpdir(), f"py3{minor}.json")
    line, stderr = record_alive(cmd, out, ["-v"])
    data = json.loads(line)
    check(f"pid {data['pid']} runs Python 3.{minor}" in stderr and "its frames are read" in stderr,
          f"the 3.{minor} interpreter is known: {stderr[-1500:]}")
    check("its Python frames are not read" not in stderr, f"no word of frames not read: {stderr[-800:]}")
    with open(out) as f:
        trail = json.load(f)
    check_python_lines(data, next(x for x in trail["targets"] if x["pid"] == data["pid"]),
                       deep_maps(trail), qualname)
    no_programs_left()


def test_python310_lines():
    """pyenv's CPython 3.10 (libpython3.10.so): a PyFrameObject per eval loop
    call, f_lasti in code units, 3.10's own line table, thread states that
    hold pthread_self() (matched by the kernel's id in glibc's descriptor),
    no Py_Version (the file's name says 3.10) and no co_qualname (functions
    by co_name)."""
    python_lines_of([pyenv("3.10.13"), PY_LINES], 10, qualname=False)


def test_python312_lines():
    """pyenv's CPython 3.12 (libpython3.12.so): _PyInterpreterFrame through
    the thread state's cframe, prev_instr, and the C stack's shim frame
    below each eval loop call's frames."""
    python_lines_of([pyenv("3.12.1"), PY_LINES], 12)


def test_python314_lines():
    """Debian sid's CPython 3.14 (tests/vendor.py: a stripped executable,
    most of its eval loop in a .cold part no symbol names, with its own C
    library in a root chroot runs, as a container's): its structures from
    3.14's _Py_DebugOffsets, its tagged f_executable, and each eval loop
    call's frames placed by the address of the shim frame it keeps on its
    C stack."""
    py = vendor()["python314"]
    shutil.copy(PY_LINES, os.path.join(py["root"], "tmp", "py_lines.py"))
    python_lines_of(["chroot", py["root"], py["python"], "/tmp/py_lines.py"], 14)


def attached_lines_of(cmd, minor, qualname=True):
    """record -p of py_lines.py run by CMD, started before memtrail and
    waiting: its interpreter is found in its mappings and the five
    allocations made after memtrail attached name their lines."""
    py = subprocess.Popen([*cmd, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True)
    out = os.path.join(tmpdir(), f"pyp3{minor}.json")
    rec = subprocess.Popen([MEMTRAIL, "record", "-v", "--unwind", "dwarf", "-o", out, "-p",
                            str(py.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    said = []
    try:
        # memtrail says it traces once its probes are on
        for err in rec.stderr:
            said.append(err)
            if "Ctrl-C to stop" in err:
                break
        py.stdin.write("\n")
        py.stdin.flush()
        data = json.loads(py.stdout.readline())
        # stopped while the process runs on: its code objects can be read
        rec.send_signal(signal.SIGINT)
        rest = rec.communicate(timeout=120)[1]
        py.communicate("\n", timeout=60)
    finally:
        py.kill()
        rec.kill()
    stderr = "".join(said) + rest
    check_eq(rec.returncode, 0, f"record exit status ({rest.strip()[-800:]})")
    check(f"runs Python 3.{minor}" in stderr and "its frames are read" in stderr,
          f"the 3.{minor} interpreter is known: {stderr[-1500:]}")
    with open(out) as f:
        trail = json.load(f)
    check_python_lines(data, next(x for x in trail["targets"] if x["pid"] == data["pid"]),
                       deep_maps(trail), qualname)
    no_programs_left()


def test_python_attached_each_version():
    """record -p of a process started before memtrail, on 3.10, 3.12 and
    3.14 (in its root)."""
    attached_lines_of([pyenv("3.10.13"), PY_LINES], 10, qualname=False)
    attached_lines_of([pyenv("3.12.1"), PY_LINES], 12)
    py = vendor()["python314"]
    shutil.copy(PY_LINES, os.path.join(py["root"], "tmp", "py_lines.py"))
    attached_lines_of(["chroot", py["root"], py["python"], "/tmp/py_lines.py"], 14)


def test_python_pid_namespace_lines():
    """A Python in a pid namespace of its own (a container's): its thread
    states hold the ids that namespace gives its threads, not the kernel's
    memtrail sees; each is matched all the same, on 3.12 (native ids) and
    3.10 (glibc's descriptors), and the lines are named."""
    for version, minor, qualname in (("3.12.1", 12, True), ("3.10.13", 10, False)):
        out = os.path.join(tmpdir(), f"pyns3{minor}.json")
        line, stderr = record_alive(["unshare", "--pid", "--fork", pyenv(version), PY_LINES],
                                    out, ["-v"])
        data = json.loads(line)
        check(data["pid"] < 10, f"the workload sees its own namespace's pid: {data['pid']}")
        with open(out) as f:
            trail = json.load(f)
        t = [x for x in trail["targets"] if x["comm"] == f"python3.{minor}"]
        check_eq(len(t), 1, f"one python3.{minor} target")
        check(f"pid {t[0]['pid']} runs Python 3.{minor}" in stderr, f"3.{minor} is read: "
              f"{stderr[-800:]}")
        check_python_lines(data, t[0], deep_maps(trail), qualname)
    no_programs_left()


def test_python_child_of_another_version():
    """A CPython 3.12 program that starts py_lines.py under 3.10 (fork, then
    exec): after the exec the child's copy of its parent's mappings, 3.12's
    interpreter among them, is not its own; its lines are read by 3.10's
    layout (before the exec it may be read as 3.12: it runs 3.12 then)."""
    out = os.path.join(tmpdir(), "pychild.json")
    line, stderr = record_alive([pyenv("3.12.1"), "-c", "import subprocess, sys; "
                                 "subprocess.run(sys.argv[1:])", pyenv("3.10.13"), PY_LINES],
                                out, ["-v"])
    data = json.loads(line)
    # between its fork and its exec the child does run its parent's 3.12
    said = [x.split(" runs Python ")[1][:4] for x in stderr.splitlines()
            if f"pid {data['pid']} runs Python " in x]
    check(said and said[-1] == "3.10",
          f"the child is read as 3.10 once it runs it: {said} {stderr[-1500:]!r}")
    with open(out) as f:
        trail = json.load(f)
    check_python_lines(data, next(x for x in trail["targets"] if x["pid"] == data["pid"]),
                       deep_maps(trail), qualname=False)
    no_programs_left()


def file_offset(path, symbol):
    """The offset in ELF file PATH of the data of its dynamic symbol SYMBOL."""
    syms = run(["readelf", "--dyn-syms", "-W", path]).stdout
    addr = next(int(l.split()[1], 16) for l in syms.splitlines()
                if l.split()[-1:] == [symbol])
    for line in run(["readelf", "-S", "-W", path]).stdout.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 5 and f[0].startswith("[") and f[2] == "PROGBITS":
            start, off, size = int(f[3], 16), int(f[4], 16), int(f[5], 16)
            if start <= addr < start + size:
                return addr - start + off
    raise AssertionError(f"{symbol} in no section of {path}")


def test_python_free_threaded_said():
    """A free-threaded CPython, as its _Py_DebugOffsets say (free_threaded,
    the third field): a copy of sid's 3.14 whose field says so (Debian
    ships no free-threaded build; the interpreter itself never reads it).
    record says its frames are not read, and why, and its allocations keep
    their native chains."""
    py = vendor()["python314"]
    shutil.copy(PY_LINES, os.path.join(py["root"], "tmp", "py_lines.py"))
    copy = os.path.join(py["root"], "tmp", "python3.14t")
    shutil.copy(os.path.join(py["root"], py["python"].lstrip("/")), copy)
    with open(copy, "r+b") as f:
        f.seek(file_offset(copy, "_PyRuntime"))
        check_eq(f.read(8), b"xdebugpy", "the head of _PyRuntime")
        f.seek(8, os.SEEK_CUR)
        f.write((1).to_bytes(8, "little"))
    out = os.path.join(tmpdir(), "py314t.json")
    line, stderr = record_alive(["chroot", py["root"], "/tmp/python3.14t", "/tmp/py_lines.py"],
                                out)
    data = json.loads(line)
    said = [x for x in stderr.splitlines() if "its Python frames are not read" in x]
    check(len(said) == 1 and f"python: {data['pid']} (python3.14t) runs CPython 3.14." in said[0]
          and "free-threaded" in said[0], f"the word for a free-threaded build: {stderr[-1200:]}")
    with open(out) as f:
        trail = json.load(f)
    t = next(x for x in trail["targets"] if x["pid"] == data["pid"])
    check(not any(first_py(s) for s in t["sites"]["list"]), "no Python frames")
    os.unlink(copy)
    no_programs_left()


def test_python_unread_said():
    """pyenv's CPython 3.9, whose frames memtrail does not read: record says
    so once, naming the process and the version, and its allocations keep
    their native chains (the interpreter's own functions)."""
    out = os.path.join(tmpdir(), "py39.json")
    line, stderr = record_alive([pyenv("3.9.18"), PY_LINES], out)
    data = json.loads(line)
    said = [x for x in stderr.splitlines() if "its Python frames are not read" in x]
    check_eq(len(said), 1, f"one word of the frames not read: {stderr[-1500:]}")
    check(f"python: {data['pid']} (python3.9) runs CPython 3.9: " in said[0] and
          "3.10 to 3.14" in said[0], f"the word names the process and the version: {said}")
    with open(out) as f:
        trail = json.load(f)
    unread = [(e["pid"], e["version"]) for e in trail["events"] if e["type"] == "python_unread"]
    check_eq(unread, [(data["pid"], "3.9")], "the trail's events of Pythons not read")
    r = run([MEMTRAIL, "report", out])
    check(r.returncode == 0 and "its Python frames were not read: CPython 3.9, " in r.stdout,
          f"report says so above the sites: {r.stdout[:1200]}")
    t = next(x for x in trail["targets"] if x["pid"] == data["pid"])
    heap = [s for s in t["sites"]["list"] if s["kind"] == "heap"]
    for a in data["allocs"]:
        rows = [s for s in heap if a["size"] <= s["alloc_bytes"] <= a["size"] + 64]
        check_eq(len(rows), 1, f"one site of {a['where']}'s {a['size']} bytes")
        names = [f.get("function") for f in rows[0]["frames"]]
        check(first_py(rows[0]) is None and "_PyEval_EvalFrameDefault" in names,
              f"{a['where']}: its native chain, through the eval loop: {names}")
    no_programs_left()
