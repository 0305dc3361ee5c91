# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""--unwind dwarf: heap sites' chains unwound by the binaries' call-frame
information, through code built without frame pointers. Expected chains
come from the programs themselves (glibc's backtrace(), which unwinds by
.eh_frame too) and expected bytes from their own arithmetic."""

import json
import os
import subprocess

from harness import MEMTRAIL, WORKLOADS, check, check_eq, no_programs_left, run, tmpdir, workload
from test_sites import TORCH


def test_deep_chains_equal_backtrace():
    """A C program built -O2 -fomit-frame-pointer allocates at the end of
    chains 12 calls deep in its main thread, in a second thread, in a signal
    handler raised inside a chain, and through a dlopen()ed library (also
    without frame pointers), and prints what backtrace() says above its
    allocating function; a fifth such allocation is freed. Each of those
    sites' chain, past its first frame, is exactly backtrace()'s, named down
    to _start or the thread's clone, and not marked cut; their bytes and
    bytes in use are the workload's."""
    out = os.path.join(tmpdir(), "deep.json")
    p = subprocess.Popen([MEMTRAIL, "record", "-q", "--unwind", "dwarf", "--heap-sample", "0",
                          "-o", out, "--", workload("deep"), os.path.join(WORKLOADS, "lib")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    # the workload runs on (a server) until it has said its chains
    line = p.stdout.readline()
    stdout, stderr = p.communicate("\n", timeout=120)
    check_eq(p.returncode, 0, f"record exit status ({stderr.strip()})")
    data = json.loads(line)
    with open(out) as f:
        trail = json.load(f)
    check(not any(trail["lost"].values()), f"nothing lost: {trail['lost']}")
    t = next(x for x in trail["targets"] if x["comm"] == "deep")
    check_eq(t["sites"]["heap"]["sample_bytes"], 0, "every allocation has its chain")
    heap = [s for s in t["sites"]["list"] if s["kind"] == "heap"]
    check_eq(len(data["allocs"]), 5, "the workload made its five allocations")
    for a in data["allocs"]:
        rows = [s for s in heap if s["alloc_bytes"] == a["size"]]
        check_eq(len(rows), 1, f"one site of {a['where']}'s {a['size']} bytes")
        # its free told back: the freed one holds nothing, the others all they got
        check_eq(rows[0]["inuse_bytes"], 0 if a["where"] == "freed" else a["size"],
                 f"{a['where']}: bytes in use")
        frames = rows[0]["frames"]
        names = [f.get("function") for f in frames]
        got = [hex(f["address"]) if isinstance(f.get("address"), int) else f.get("address")
               for f in frames]
        check_eq(names[0], "deep_alloc", f"{a['where']}: the allocating function first")
        check_eq(got[1:], a["frames"], f"{a['where']}: the chain is backtrace()'s ({names})")
        check(not rows[0].get("frames_truncated"), f"{a['where']}: the chain is whole")
        check(names[-1] in ("_start", "__clone3", "clone3", "clone"),
              f"{a['where']}: it ends at the thread's first frame: {names[-1]}")
        check(names.count("chain") >= (3 if a["where"] == "in_handler" else 12) or
              a["where"] == "dlopen", f"{a['where']}: every call of the chain: {names}")
    lib = next(s for s in heap if s["alloc_bytes"] == 400000)["frames"]
    check_eq([f.get("function") for f in lib[1:5]], ["lib3", "lib2", "lib1", "deeplib_entry"],
             "the dlopen()ed library's own frames")
    check("deep stacks:" in stderr and "100.0% to the thread's first frame" in stderr,
          f"what the unwinding gave is said: {stderr.strip()[-500:]}")
    no_programs_left()


def test_deep_pytorch_reaches_the_interpreter():
    """Debian's PyTorch and Python 3.11 are built without frame pointers:
    with --unwind dwarf (sampled, its default) the weights' sites go from
    c10::alloc_cpu through libtorch_cpu and libtorch_python into python3.11
    and on to its main; at least 95% of the weights' bytes are under such
    chains."""
    out = os.path.join(tmpdir(), "torch.json")
    p = subprocess.run([MEMTRAIL, "record", "-q", "--unwind", "dwarf", "-o", out, "--", TORCH,
                        "2", "2048", "2"], capture_output=True, text=True, timeout=600)
    check_eq(p.returncode, 0, f"record exit status ({p.stderr.strip()[-2000:]})")
    data = next(json.loads(line) for line in p.stdout.splitlines() if line.startswith("{"))
    with open(out) as f:
        trail = json.load(f)
    t = next(x for x in trail["targets"] if "torch_linear.py" in (x["cmdline"] or ""))
    check_eq(t["sites"]["heap"]["mode"], "sampled", "sampled by default under --unwind dwarf")
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
    r = run([MEMTRAIL, "report", "--top", "3", out])
    check_eq(r.returncode, 0, f"report ({r.stderr.strip()})")
    no_programs_left()
