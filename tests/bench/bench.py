#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""make bench: memtrail's overhead on two workloads, measured in one run
against the same workloads untraced, as ratios of the workloads' own
elapsed time (median of interleaved runs); heap probes per malloc/free pair
against the bare counting uprobe (the floor) and under an overhead budget;
watch and record --all during a process storm (BENCH_STORM=RATE,SECONDS,IDLE:
2,000 execs a second for 60 s beside 10,000 idle processes by default), and
the floor of any tracer of every process during the same storm (counting
programs on the same kernel hooks);
then memtrail watch's own CPU use with 2,000 and 10,000 idle processes on the node;
report --html of a one-hour, 200-target trail (--report: that alone; --storm,
--stop, --deep: those alone). Not a test: it asserts nothing, it
prints the figures and the targets they are held to, and writes the overhead
table of tests/README.md's Benchmarks (build/overhead.md) with the machine and
kernel named; README.md's Overhead condenses it."""

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MEMTRAIL = os.path.join(ROOT, "memtrail")
WL = os.path.join(ROOT, "build", "workloads")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
# a heap profiler of another kind (LD_PRELOAD: the program must be started
# under it), measured beside memtrail where the machine has it
HEAPTRACK = shutil.which("heaptrack")
TABLE = os.path.join(ROOT, "build", "overhead.md")

WORKLOADS = [
    ("malloc/free loop", "bench_malloc", 1.03),
    ("page-touch loop", "bench_touch", 1.15),
]


def elapsed(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)["ns"] / 1e9


def start(args):
    m = subprocess.Popen([MEMTRAIL, *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    while "tracing" not in (m.stderr.readline() or "tracing"):
        pass
    return m


def with_all(fn):
    """Run fn() while 'memtrail record --all' traces the whole node."""
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")
    m = start(["record", "-q", "-o", out, "--all"])
    try:
        return fn()
    finally:
        m.send_signal(2)
        m.communicate()
        if os.path.exists(out):
            os.unlink(out)


def with_watch(fn):
    """Run fn() under 'memtrail watch', node-wide, at its defaults."""
    d = tempfile.mkdtemp(prefix="memtrail-bench-")
    m = start(["watch", "-o", d])
    try:
        return fn()
    finally:
        m.send_signal(2)
        m.communicate()
        subprocess.run(["rm", "-rf", d])


@contextlib.contextmanager
def bpf_stats():
    """The kernel's bpf_stats on while the block runs (BPF programs' run
    time and count kept), then as it was."""
    stats = "/proc/sys/kernel/bpf_stats_enabled"
    with open(stats) as f:
        was = f.read().strip()
    with open(stats, "w") as f:
        f.write("1")
    try:
        yield
    finally:
        with open(stats, "w") as f:
            f.write(was)


def prog_costs(rounds=40, heap=False):
    """ns per run of each memtrail BPF program (the kernel's bpf_stats:
    run_time_ns / run_cnt) while 'record --comm bench_touch' traces the
    page-touch loop (an rss_stat event per page), or with HEAP while
    'record --heap' traces the malloc/free loop (the heap probes)."""
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")
    try:
        with bpf_stats():
            if heap:
                # the program table is read while the traced loop's shell still lives
                p = subprocess.run([MEMTRAIL, "record", "-q", "-o", out, "--heap", "--", "sh",
                                    "-c", f"{os.path.join(WL, 'bench_malloc')} 300000 > /dev/null"
                                    " && bpftool prog show -j"],
                                   capture_output=True, text=True, check=True)
                progs = json.loads([l for l in p.stdout.splitlines() if l.startswith("[")][-1])
            else:
                m = start(["record", "-q", "-o", out, "--comm", "bench_touch"])
                try:
                    subprocess.run([os.path.join(WL, "bench_touch"), str(rounds)], check=True,
                                   capture_output=True)
                    progs = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"],
                                                      capture_output=True, text=True,
                                                      check=True).stdout)
                finally:
                    m.send_signal(2)
                    m.communicate()
    finally:
        if os.path.exists(out):
            os.unlink(out)
    return {p["name"]: (p["run_time_ns"] / p["run_cnt"], p["run_cnt"]) for p in progs
            if p.get("name", "").startswith("mt_") and p.get("run_cnt")}


def print_prog_costs(costs, what="a page-touch loop"):
    print(f"BPF programs while {what} runs ({os.cpu_count()} CPUs; kernel "
          f"{os.uname().release}): ns per run, runs", flush=True)
    for name, (ns, n) in sorted(costs.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:18} {ns:9.0f} ns {n:10d}", flush=True)


def libc_of(path):
    """The C library PATH loads, as the loader resolves it."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    return next(l.split("=>")[1].split()[0] for l in out.splitlines() if "libc.so" in l)


def heap_pairs(pairs=300000, budget_pairs=300000000):
    """Heap probes per malloc/free pair: untraced, the floor (counting uprobes
    on malloc entry and return and free entry, nothing else: the traps alone),
    memtrail --heap --unwind fp at full coverage (a frame-pointer stack for
    every allocation) and --heap (its default: deep stacks, one per 256 KiB
    allocated); then a 3-second loop untraced and under
    --heap --overhead-budget 2. Medians of interleaved runs."""
    wl = os.path.join(WL, "bench_malloc")
    floor = os.path.join(ROOT, "build", "bench", "floor")
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")

    def per_pair(cmd, n):
        return elapsed([*cmd, wl, str(n)]) / n * 1e9
    peer = HEAPTRACK and [HEAPTRACK, "-o", out[:-len(".json")]]
    base, bare, full, ubase, budget, ht, deep = [], [], [], [], [], [], []
    for _ in range(RUNS):
        base.append(per_pair([], budget_pairs // 10))
        bare.append(per_pair([floor, libc_of(wl), "--"], pairs))
        full.append(per_pair([MEMTRAIL, "record", "-q", "-o", out, "--heap", "--unwind", "fp",
                              "--"], pairs))
        deep.append(per_pair([MEMTRAIL, "record", "-q", "-o", out, "--heap", "--"], pairs))
        if peer:
            ht.append(per_pair(peer, pairs))
        ubase.append(elapsed([wl, str(budget_pairs)]))
        budget.append(elapsed([MEMTRAIL, "record", "-q", "-o", out, "--heap",
                               "--overhead-budget", "2", "--", wl, str(budget_pairs)]))
    for f in (out, out[:-len(".json")] + ".zst"):
        if os.path.exists(f):
            os.unlink(f)
    return [statistics.median(x) if x else None
            for x in (base, bare, full, ubase, budget, ht, deep)]


def heap_return_ns(out, extra, cmd):
    """record --heap EXTRA -o OUT of CMD: memtrail's malloc return program's
    ns a run (bpf_stats, read while the command's shell still lives), and
    the deep samples record says it unwound."""
    with bpf_stats():
        p = subprocess.Popen([MEMTRAIL, "record", "-q", "-o", out, "--heap", *extra, "--",
                              "sh", "-c", f"{' '.join(cmd)} > /dev/null && "
                              "bpftool prog show -j"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        stdout, stderr = p.communicate()
    progs = json.loads([l for l in stdout.splitlines() if l.startswith("[")][-1])
    ret = [x for x in progs if x.get("name", "").startswith("mt_heap_return") and x.get("run_cnt")]
    ns = sum(x["run_time_ns"] for x in ret) / max(1, sum(x["run_cnt"] for x in ret))
    said = [l for l in stderr.splitlines() if "deep stacks:" in l]
    samples = int(said[0].split("deep stacks: ")[1].split()[0]) if said else 0
    return ns, samples


def deep_costs(pairs=20000):
    """What a deep stack costs (record --heap's default, --unwind dwarf): the
    malloc/free loop with every allocation sampled (--heap-sample 0), against
    the same loop under --unwind fp (every allocation's frame-pointer stack).
    BPF: ns per run of the malloc return program (bpf_stats), whose every
    run copies a sample; user space: memtrail's own CPU time per sample, less
    the fp run's. Then Debian's PyTorch script wall time: untraced, --heap
    --unwind fp, --heap. Medians of interleaved runs."""
    wl = os.path.join(WL, "bench_malloc")
    torch = os.path.join(ROOT, "tests", "workloads", "torch_linear.py")
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")

    def cpu_of(extra, cmd):
        before = os.times()
        ns, samples = heap_return_ns(out, extra, cmd)
        after = os.times()
        return (after.children_user + after.children_system -
                before.children_user - before.children_system), ns, samples

    fp_cpu, deep_cpu, fp_ns, deep_ns, samples = [], [], [], [], []
    for _ in range(RUNS):
        c, n, _ = cpu_of(["--unwind", "fp"], [wl, str(pairs)])
        fp_cpu.append(c)
        fp_ns.append(n)
        c, n, k = cpu_of(["--heap-sample", "0"], [wl, str(pairs)])
        deep_cpu.append(c)
        deep_ns.append(n)
        samples.append(k)
    base, fp, deep = [], [], []
    args = [torch, "2", "2048", "2"]
    for _ in range(min(RUNS, 3)):
        t0 = time.monotonic()
        subprocess.run(args, capture_output=True, check=True)
        base.append(time.monotonic() - t0)
        for runs, extra in ((fp, ["--unwind", "fp"]), (deep, [])):
            t0 = time.monotonic()
            subprocess.run([MEMTRAIL, "record", "-q", "-o", out, "--heap", *extra, "--", *args],
                           capture_output=True, check=True)
            runs.append(time.monotonic() - t0)
    if os.path.exists(out):
        os.unlink(out)
    med = statistics.median
    k = med(samples)
    # the children's CPU includes the workload's and bpftool's: the same in both runs
    user_us = (med(deep_cpu) - med(fp_cpu)) / k * 1e6 if k else None
    return {"samples": k, "bpf_fp_ns": med(fp_ns), "bpf_deep_ns": med(deep_ns),
            "user_us": user_us, "torch": (med(base), med(fp), med(deep))}


# a Python function 12 frames deep that makes and drops 1,000-byte bytearrays
# (past pymalloc's 512 bytes: one malloc and free each)
PY_DEEP = """
import sys
def f(d, n):
    if d:
        return f(d - 1, n)
    for _ in range(n):
        bytearray(1000)
f(12, int(sys.argv[1]))
"""


def python_deep_costs(allocs=20000):
    """BPF time per deep sample with Python frames, per CPython version:
    record --heap --heap-sample 0 (every malloc a deep sample, its thread's
    Python frames read) of a loop 12 Python frames deep, against the same
    loop under --unwind fp (no Python frames): the malloc return program's
    ns a run (bpf_stats), medians of interleaved runs. {version: (deep, fp)}."""
    vendor = os.path.join(ROOT, "build", "vendor", "manifest.json")
    pythons = [(v, os.path.join("/root/.pyenv/versions", full, "bin", "python" + v), None)
               for v, full in (("3.10", "3.10.13"), ("3.11", "3.11.7"), ("3.12", "3.12.1"),
                               ("3.13", "3.13.0"))]
    if os.path.exists(vendor):
        with open(vendor) as f:
            root = os.path.join(os.path.dirname(vendor), json.load(f)["python314"]["root"])
        pythons.append(("3.14", "/usr/bin/python3.14", root))
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")
    got = {}
    for version, python, root in pythons:
        if not os.path.exists((root or "") + python):
            continue
        script = os.path.join(root or "/", "tmp", "memtrail-bench-py.py")
        with open(script, "w") as f:
            f.write(PY_DEEP)
        cmd = ([python] if not root else ["chroot", root, python]) + \
            ["/tmp/memtrail-bench-py.py", str(allocs)]
        deep, fp = [], []
        for _ in range(RUNS):
            for runs, extra in ((deep, ["--heap-sample", "0"]), (fp, ["--unwind", "fp"])):
                runs.append(heap_return_ns(out, extra, cmd)[0])
        os.unlink(script)
        got[version] = (statistics.median(deep), statistics.median(fp))
    if os.path.exists(out):
        os.unlink(out)
    return got


def print_python_deep_costs(got):
    print("deep samples with Python frames (a loop 12 Python frames deep, every malloc "
          "sampled): the malloc return program's ns a run", flush=True)
    base = got.get("3.11", (None, None))[0]
    for version, (deep, fp) in sorted(got.items(), key=lambda x: [int(n) for n in x[0].split(".")]):
        print(f"  CPython {version}: {deep:.0f} ns (--unwind fp {fp:.0f} ns)"
              + (f", {deep / base:.2f}x 3.11's (target <= 1.20x)" if base else ""), flush=True)


def print_deep_costs(d):
    print(f"deep stacks, malloc/free loop with every allocation sampled ({d['samples']} "
          f"samples): the malloc return program {d['bpf_deep_ns']:.0f} ns a run against "
          f"{d['bpf_fp_ns']:.0f} ns under --unwind fp (+{d['bpf_deep_ns'] - d['bpf_fp_ns']:.0f} "
          f"ns a deep sample in BPF); memtrail's CPU "
          + (f"{d['user_us']:.1f} us a sample more than under --unwind fp"
             if d["user_us"] is not None else "not measured (no samples said)"), flush=True)
    b, fp, deep = d["torch"]
    print(f"PyTorch script (2 layers of 2048x2048, 2 inferences), wall: untraced {b:.2f} s, "
          f"--heap --unwind fp {fp:.2f} s ({fp / b:.1f}x), --heap {deep:.2f} s "
          f"({deep / b:.1f}x)", flush=True)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def idle_processes(n):
    """N sleeping processes on the node while the block runs."""
    idle = [subprocess.Popen(["sleep", "3600"]) for _ in range(n)]
    try:
        yield idle
    finally:
        for p in idle:
            p.kill()
        for p in idle:
            p.wait()


def watch_idle_cpu(n=2000, seconds=30, extra=()):
    """memtrail watch's CPU use with N idle processes on the node."""
    with idle_processes(n):
        d = tempfile.mkdtemp(prefix="memtrail-bench-")
        try:
            m = start(["watch", "-o", d, *extra])
            time.sleep(3)	# past the start-up scan
            c0, t0 = cpu_seconds(m.pid), time.monotonic()
            time.sleep(seconds)
            c1, t1 = cpu_seconds(m.pid), time.monotonic()
            with open(f"/proc/{m.pid}/status") as f:
                rss = [l.split()[1] for l in f if l.startswith("VmRSS:")][0]
            m.send_signal(2)
            m.communicate()
            return (c1 - c0) / (t1 - t0), int(rss)
        finally:
            subprocess.run(["rm", "-rf", d])


def bpf_prog_stats():
    """{name: [run_time_ns, run_cnt]} of memtrail's BPF programs so far (bpf_stats on)."""
    progs = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True,
                                      text=True, check=True).stdout)
    out = {}
    for p in progs:
        if p.get("name", "").startswith("mt_"):
            s = out.setdefault(p["name"], [0, 0])
            s[0] += p.get("run_time_ns", 0)
            s[1] += p.get("run_cnt", 0)
    return out


def bpf_run_ns():
    """Total run time of memtrail's BPF programs so far (bpf_stats on)."""
    return sum(v[0] for v in bpf_prog_stats().values())


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int([l.split()[1] for l in f if l.startswith("VmRSS:")][0])


def storm_floor(rate, seconds, idle):
    """The floor of tracing every process, during the same storm: programs
    that only count hits on the kernel hooks watch takes for each process
    (fork, exec, exit, rss_stat, mmap_lock taken and released,
    signal_generate; tests/bench/floor.c --hooks), and no memtrail. Their run
    time (bpf_stats) and hits, with the storm's own count."""
    with bpf_stats(), idle_processes(idle):
        time.sleep(2)  # as before storm(): the idle processes settled
        p = subprocess.run([os.path.join(ROOT, "build", "bench", "floor"), "--hooks", "--",
                            os.path.join(WL, "storm"), str(rate), str(seconds)],
                           capture_output=True, text=True, check=True)
    got, floor = json.loads(p.stdout.splitlines()[-1]), json.loads(p.stderr.splitlines()[-1])
    return {"started": got["started"], "seconds": got["seconds"], "hits": floor["floor_hits"],
            "bpf": floor["floor_run_ns"] / 1e9 / got["seconds"], "runs": floor.get("runs", {})}


def storm(mode, rate, seconds, idle, extra=()):
    """memtrail (watch, or record --all) while the storm workload starts RATE
    short-lived processes a second for SECONDS beside IDLE sleeping ones:
    memtrail's CPU (its own user+sys and its BPF programs' run time) over the
    storm, its VmRSS before and after, what it said it lost, and what it
    wrote. The storm's rate reached is its own count over its own time."""
    d = tempfile.mkdtemp(prefix="memtrail-bench-")
    out = os.path.join(d, "trail.json") if mode == "record" else d
    args = ["record", "-q", "-o", out, "--all"] if mode == "record" else ["watch", "-o", d]
    args += extra
    try:
        with bpf_stats(), idle_processes(idle):
            m = start(args)
            time.sleep(2)  # past the start-up scan
            rss0 = vm_rss_kib(m.pid)
            c0, b0, p0 = cpu_seconds(m.pid), bpf_run_ns(), bpf_prog_stats()
            # VmRSS every tenth of the storm: a leak climbs, a working set levels off
            p = subprocess.Popen([os.path.join(WL, "storm"), str(rate), str(seconds)],
                                 stdout=subprocess.PIPE, text=True)
            along, step = [], max(seconds / 10, 1)
            while True:
                try:
                    stdout = p.communicate(timeout=step)[0]
                    break
                except subprocess.TimeoutExpired:
                    along.append(vm_rss_kib(m.pid))
            if p.returncode:
                raise RuntimeError(f"the storm failed: {p.returncode}")
            c1, b1, p1 = cpu_seconds(m.pid), bpf_run_ns(), bpf_prog_stats()
            rss1 = vm_rss_kib(m.pid)
            time.sleep(3)  # its last processes retired (250 ms) and their files closed
            rest = vm_rss_kib(m.pid)
            m.send_signal(2)
            err = m.communicate()[1]
        got = json.loads(stdout.splitlines()[-1])
        lost = [l.split("lost ", 1)[1] for l in err.splitlines() if "lost " in l]
        if mode == "record":
            with open(out) as f:
                lost = [f"{k}: {v}" for k, v in json.load(f)["lost"].items() if v]
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        return {"started": got["started"], "seconds": got["seconds"],
                "user_sys": (c1 - c0) / got["seconds"], "bpf": (b1 - b0) / 1e9 / got["seconds"],
                "progs": {k: [v[0] - p0.get(k, [0, 0])[0], v[1] - p0.get(k, [0, 0])[1]]
                          for k, v in p1.items()},
                "rss0": rss0, "rss1": rss1, "along": along, "rest": rest, "lost": lost,
                "bytes": size}
    finally:
        subprocess.run(["rm", "-rf", d])


def print_storm(mode, rate, seconds, idle, floor, extra=()):
    r = storm(mode, rate, seconds, idle, extra)
    cpu = r["user_sys"] + r["bpf"]
    each = cpu * r["seconds"] / r["started"]
    floor_each = floor["bpf"] * floor["seconds"] / floor["started"]
    print(f"{' '.join((mode, *extra))} during a storm of {r['started'] / r['seconds']:.0f} "
          f"execs/s for {r['seconds']:.0f} s beside {idle} idle processes: "
          f"{cpu * 100:.2f}% of one core "
          f"(memtrail {r['user_sys'] * 100:.2f}% + BPF {r['bpf'] * 100:.2f}%; target <= 5%; "
          f"a process: {r['user_sys'] * r['seconds'] / r['started'] * 1e6:.0f} us + "
          f"{r['bpf'] * r['seconds'] / r['started'] * 1e6:.0f} us, {each / floor_each:.1f}x "
          f"the floor's {floor_each * 1e6:.0f} us), "
          f"VmRSS {r['rss0'] / 1024:.1f} -> {r['rss1'] / 1024:.1f} MiB (along the storm: "
          f"{', '.join(f'{x / 1024:.1f}' for x in r['along'])}; 3 s after: "
          f"{r['rest'] / 1024:.1f}), "
          f"lost {', '.join(r['lost']) or 'nothing'}, wrote {r['bytes'] / 1024:.0f} KiB",
          flush=True)
    # where the BPF time goes: the programs that took most, per process
    top = sorted(r["progs"].items(), key=lambda kv: -kv[1][0])[:6]
    print("  BPF a process, by program: " + ", ".join(
        f"{k} {v[0] / r['started'] / 1000:.1f} us ({v[1] / r['started']:.0f} runs)"
        for k, v in top), flush=True)


def print_storm_floor(rate, seconds, idle):
    f = storm_floor(rate, seconds, idle)
    print(f"floor during a storm of {f['started'] / f['seconds']:.0f} execs/s for "
          f"{f['seconds']:.0f} s beside {idle} idle processes, no memtrail: programs that only "
          f"count on the hooks watch takes used {f['bpf'] * 100:.2f}% of one core, "
          f"{f['bpf'] * f['seconds'] / f['started'] * 1e6:.1f} us and "
          f"{f['hits'] / f['started']:.0f} hooks a process ("
          + ", ".join(f"{k} {v / f['started']:.1f}" for k, v in
                      sorted(f["runs"].items(), key=lambda kv: -kv[1])) + ")", flush=True)
    return f


def print_storms():
    """The storm (BENCH_STORM: rate, seconds, idle processes) under its floor,
    watch with its sites and without, record --all; then watch beside idle
    processes, with sites and without."""
    rate, secs, idle = (int(x) for x in os.environ.get("BENCH_STORM", "2000,60,10000").split(","))
    floor = print_storm_floor(rate, secs, idle)
    for mode, extra in (("watch", ()), ("watch", ("--no-sites",)), ("record", ())):
        print_storm(mode, rate, secs, idle, floor, extra)
    for n, target in ((2000, "target < 2%"), (10000, "target <= 0.5%, 64 MiB")):
        for extra in ((), ("--no-sites",)):
            cpu, rss = watch_idle_cpu(n, extra=extra)
            print(f"memtrail {' '.join(('watch', *extra))} with {n} idle processes: "
                  f"{cpu * 100:.2f}% of one core, VmRSS {rss / 1024:.1f} MiB ({target})",
                  flush=True)


def metrics_scrape(n=2000, scrapes=20):
    """GET /metrics of 'memtrail watch --metrics' with N idle processes on the
    node: the median and slowest answer of SCRAPES, the page's size, and
    watch's CPU use meanwhile."""
    import socket
    import urllib.request
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with idle_processes(n):
        d = tempfile.mkdtemp(prefix="memtrail-bench-")
        try:
            m = start(["watch", "-o", d, "--metrics", f"127.0.0.1:{port}"])
            time.sleep(3)	# past the start-up scan and a first page
            c0, t0 = cpu_seconds(m.pid), time.monotonic()
            times, size = [], 0
            for _ in range(scrapes):
                a = time.monotonic()
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    size = len(r.read())
                times.append(time.monotonic() - a)
                time.sleep(0.5)
            c1, t1 = cpu_seconds(m.pid), time.monotonic()
            m.send_signal(2)
            m.communicate()
            return statistics.median(times), max(times), size, (c1 - c0) / (t1 - t0)
        finally:
            subprocess.run(["rm", "-rf", d])


def children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def top_idle_cpu(n=2000, seconds=20):
    """memtrail top's CPU use and VmRSS with N idle processes on the node: on a
    terminal (a pseudo-terminal from script(1), 80x24, so 22 rows drawn) and
    into a pipe (every row printed), each at the default interval."""
    figures = []
    with idle_processes(n):
        for label, cmd in (("terminal", ["script", "-q", "-e", "-c", f"{MEMTRAIL} top",
                                         "/dev/null"]),
                           ("pipe", [MEMTRAIL, "top"])):
            m = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(3)  # past the start-up scan
            pid = m.pid
            while os.readlink(f"/proc/{pid}/exe") != MEMTRAIL:
                pid = children(pid)[0]
            c0, t0 = cpu_seconds(pid), time.monotonic()
            time.sleep(seconds)
            c1, t1 = cpu_seconds(pid), time.monotonic()
            with open(f"/proc/{pid}/status") as f:
                rss = [l.split()[1] for l in f if l.startswith("VmRSS:")][0]
            os.kill(pid, 15)
            m.wait()
            figures.append((label, (c1 - c0) / (t1 - t0), int(rss)))
    return figures


def device_pairs(n=100000):
    """Cost of one device allocation/free pair through the CUDA stand-in,
    untraced and under memtrail, median of interleaved runs."""
    cmd = [os.path.join(WL, "device_bench"), "pairs", str(n)]
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")

    def ns(args):
        p = subprocess.run(args, capture_output=True, text=True, check=True)
        return json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])["ns_per_pair"]
    base, traced = [], []
    for _ in range(RUNS):
        base.append(ns(cmd))
        traced.append(ns([MEMTRAIL, "record", "-q", "-o", out, "--", *cmd]))
    if os.path.exists(out):
        os.unlink(out)
    return statistics.median(base), statistics.median(traced)


def library_gate(programs=50):
    """PROGRAMS programs, each dlopen()ing a new copy of the CUDA stand-in and
    calling it at once (each copy a file memtrail has not seen, so each
    program waits at record's gate as it opens it, until it is probed): wall
    time of the whole loop, untraced and as `record`'s command, median of
    interleaved runs."""
    d = tempfile.mkdtemp(prefix="memtrail-bench-")
    lib = os.path.join(ROOT, "build", "standins", "libcuda.so.1")
    script = (f'i=0; while [ $i -lt {programs} ]; do i=$((i+1)); l="{d}/libcuda-$i.so.1"; '
              f'cp "{lib}" "$l" && "{os.path.join(WL, "dlopen_late")}" "$l" >/dev/null; '
              f'rm -f "$l"; done')

    def loop():
        t0 = time.monotonic()
        subprocess.run(["sh", "-c", script], check=True)
        return time.monotonic() - t0
    base, traced = [], []
    try:
        for _ in range(RUNS):
            base.append(loop())
            t0 = time.monotonic()
            subprocess.run([MEMTRAIL, "record", "-q", "-o", os.path.join(d, "t.json"), "--",
                            "sh", "-c", script], check=True, stdout=subprocess.DEVNULL)
            traced.append(time.monotonic() - t0)
    finally:
        subprocess.run(["rm", "-rf", d])
    return statistics.median(base), statistics.median(traced)


def device_teardown():
    """Wall time of `record -- cuda_phases` (a 1 ms program): memtrail's start
    and its exit with one CUDA library probed, as uprobe_multi links and as
    one perf-event link per function (MEMTRAIL_NO_UPROBE_MULTI=1)."""
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")
    cmd = [MEMTRAIL, "record", "-q", "-o", out, "--", os.path.join(WL, "cuda_phases")]
    multi, each = [], []
    for _ in range(RUNS):
        for env, into in ((os.environ, multi),
                          (dict(os.environ, MEMTRAIL_NO_UPROBE_MULTI="1"), each)):
            t0 = time.monotonic()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=env, check=True)
            into.append(time.monotonic() - t0)
    if os.path.exists(out):
        os.unlink(out)
    return statistics.median(multi), statistics.median(each)


def device_live_memory(n=1000000):
    """memtrail's own memory with N live device allocations of one process:
    its VmRSS and the kernel memory of its live-allocation map."""
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")
    m = subprocess.Popen([MEMTRAIL, "record", "-q", "-o", out, "--",
                          os.path.join(WL, "device_bench"), "live", str(n)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        while '"ready"' not in (m.stdout.readline() or '"ready"'):
            pass
        time.sleep(1)
        with open(f"/proc/{m.pid}/status") as f:
            rss = int([l.split()[1] for l in f if l.startswith("VmRSS:")][0])
        maps = json.loads(subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True,
                                         text=True).stdout or "[]")
        kmem = sum(x.get("bytes_memlock", 0) for x in maps if x.get("name") == "dev_allocs")
        m.stdin.write("g")
        m.stdin.flush()
        m.communicate(timeout=600)
        return rss, kmem
    finally:
        if m.poll() is None:
            m.kill()
        if os.path.exists(out):
            os.unlink(out)


def big_trail(path, targets=200, seconds=3600, interval_ms=100,
              kinds=("mapped", "rss_anon", "rss_file"), phases=("load", "warmup", "serve")):
    """A one-hour trail of TARGETS processes sampled every INTERVAL_MS (record's
    default) whose levels change at every sample: the worst case, as record
    keeps only the samples where a level moved. Written as a stream."""
    n = seconds * 1000 // interval_ms
    zero = {f: 0 for f in ("allocations", "deallocations", "segment_change", "segment_peak",
                           "cumulative_current", "cumulative_peak")}
    with open(path, "w") as f:
        f.write('{"memtrail": 1, "started": "2026-01-01T00:00:00Z", "duration_ms": %d, '
                '"interval_ms": %d, "command": "bench", "kinds": %s, "targets": ['
                % (seconds * 1000, interval_ms, json.dumps(list(kinds))))
        for i in range(targets):
            span = seconds * 1000 // len(phases)
            ph = [{"name": p, "start": j * span, "end": (j + 1) * span,
                   "kinds": {k: dict(zero, segment_peak=j << 20, cumulative_peak=j << 21)
                             for k in kinds}} for j, p in enumerate(phases)]
            head = {"pid": 1000 + i, "ppid": 1, "comm": f"server{i}", "cmdline": None,
                    "cgroup": None, "start_ms": 0, "end_ms": seconds * 1000, "exit": None,
                    "kinds": {k: {"current": 1 << 20, "peak": 64 << 20} for k in kinds},
                    "verdict": None, "phases": ph, "phases_folded": 0, "phase_summary": []}
            f.write(("," if i else "") + json.dumps(head)[:-1] + ', "timeline": [')
            base = (i % 50 + 1) << 20
            rows = []
            for s in range(n):
                w = (s * 7919 + i) % 1000
                rows.append('{"t_ms":%d,"mapped":%d,"rss_anon":%d,"rss_file":%d}'
                            % (s * interval_ms, base + w * 4096, base + w * 2048, 1 << 20))
            f.write(",".join(rows) + "]}")
        f.write('], "events": [], "lost": {}}\n')
    return targets * n


def html_render():
    """report --html of a one-hour, 200-target trail: time, file size, and the
    page's load in headless Chromium when it is installed."""
    d = tempfile.mkdtemp(prefix="memtrail-bench-")
    trail, page = os.path.join(d, "trail.json"), os.path.join(d, "report.html")
    samples = big_trail(trail)
    os.sync()	# the file on disk, as a trail to report is: no writeback during the timing
    t0 = time.monotonic()
    subprocess.run([MEMTRAIL, "report", trail, "--html", page], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    render = time.monotonic() - t0
    # report --json: the trail read, its samples checked and not kept (no timeline printed)
    t0 = time.monotonic()
    subprocess.run([MEMTRAIL, "report", "--json", trail], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    read = time.monotonic() - t0
    sizes = os.path.getsize(trail), os.path.getsize(page)
    load = None
    if os.path.exists("/usr/bin/chromium"):
        # the integration tests' DevTools driver: the page's own clock from
        # navigation to the end of its drawing, the browser's start not counted
        sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
        from test_viz import Browser
        b = Browser()
        try:
            b.open(page)
            load = b.eval("performance.now()") / 1000
        finally:
            b.close()
    subprocess.run(["rm", "-rf", d])
    return samples, sizes, render, read, load


def stop_latency(seconds=10, rate=200, second_after=0.2):
    """record --heap --all while processes come and go (the storm, RATE execs
    a second) and a malloc loop runs, stopped with SIGINT after SECONDS: from
    the signal to record's 'writing trail' line (tracing over) and to its
    exit, and the trail's size; then the same with a second SIGINT
    SECOND_AFTER s after the first (leave without the trail): to exit."""
    import threading
    res = []
    for again in (False, True):
        d = tempfile.mkdtemp(prefix="memtrail-bench-")
        m = subprocess.Popen([MEMTRAIL, "record", "-q", "-o", os.path.join(d, "t.json"),
                              "--heap", "--all"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        while "tracing" not in (m.stderr.readline() or "tracing"):
            pass
        seen = {}

        def read_err():
            for line in m.stderr:
                if "writing trail" in line and "writing" not in seen:
                    seen["writing"] = time.monotonic()
        reader = threading.Thread(target=read_err, daemon=True)
        reader.start()
        storm_p = subprocess.Popen([os.path.join(WL, "storm"), str(rate), str(seconds + 30)],
                                   stdout=subprocess.DEVNULL)
        loop = subprocess.Popen(["sh", "-c", f"while :; do {os.path.join(WL, 'bench_malloc')}; "
                                 "done"], stdout=subprocess.DEVNULL)
        try:
            time.sleep(seconds)
            t0 = time.monotonic()
            m.send_signal(2)
            if again:
                time.sleep(second_after)
                t1 = time.monotonic()
                m.send_signal(2)
            m.wait()
            t_exit = time.monotonic()
            reader.join(5)
        finally:
            for p in (storm_p, loop):
                p.kill()
                p.wait()
        size = os.path.getsize(os.path.join(d, "t.json")) if os.path.exists(
            os.path.join(d, "t.json")) else 0
        subprocess.run(["rm", "-rf", d])
        if again:
            res.append(("second SIGINT", t_exit - t1, None, size, m.returncode))
        else:
            res.append(("first SIGINT", t_exit - t0, seen.get("writing", t_exit) - t0, size,
                        m.returncode))
    return res


def print_stop_latency():
    for label, to_exit, to_writing, size, rc in stop_latency():
        if to_writing is not None:
            print(f"record --heap --all, {label}: tracing over in {to_writing:.2f} s, exit in "
                  f"{to_exit:.2f} s after writing a {size / 2**20:.1f} MiB trail (status {rc}; "
                  f"target: tracing over < 1 s)", flush=True)
        else:
            print(f"record --heap --all, {label} 0.2 s after the first: exit in {to_exit:.2f} s, "
                  f"no trail ({size} bytes; status {rc}; target < 0.2 s)", flush=True)


def machine():
    """This machine in words: CPUs, their model, the kernel."""
    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    return f"{os.cpu_count()} CPUs ({model}), kernel {os.uname().release}"


def write_table(rows, touch, heap):
    """build/overhead.md: the figures of this run as tests/README.md's
    Benchmarks show them (pasted from here, never typed)."""
    lines = [f"`make bench` on {time.strftime('%Y-%m-%d')}: {machine()}; median of "
             f"{RUNS} interleaved runs, the workloads' own elapsed time.", "",
             "| workload | traced by | time | ratio to untraced | ratio to the floor | target |",
             "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", "BPF programs, ns a run (the kernel's bpf_stats):", "",
              "| program | runs | ns a run | while |", "|---|---|---|---|"]
    heap = {k: v for k, v in heap.items() if k.startswith("mt_heap")}
    for costs, what in ((touch, "the page-touch loop"), (heap, "`record --heap`, malloc/free")):
        for name, (ns, n) in sorted(costs.items(), key=lambda kv: -kv[1][1])[:3]:
            lines.append(f"| `{name}` | {n} | {ns:.0f} | {what} |")
    os.makedirs(os.path.dirname(TABLE), exist_ok=True)
    with open(TABLE, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"table for tests/README.md: {os.path.relpath(TABLE, ROOT)}", flush=True)


def print_report_times():
    samples, (tsize, hsize), render, read, load = html_render()
    print(f"report --html of a 1-hour trail, 200 targets, {samples} samples "
          f"({tsize / 2**20:.0f} MiB): {render:.2f} s (target <= 2 s; report --json, the "
          f"trail read and its samples checked, not kept: {read:.2f} s, target <= 1.5 s), page "
          f"{hsize / 2**20:.1f} MiB, loaded and drawn in headless Chromium in "
          + (f"{load:.2f} s" if load is not None else "(not measured: no chromium)"),
          flush=True)


def main():
    if os.geteuid() != 0:
        print("make bench needs root (it loads BPF)")
        return 1
    if "--prog-costs" in sys.argv:
        # one line for tests/bench/cpus.py, which runs this inside guests
        costs = prog_costs(int(os.environ.get("BENCH_TOUCH_ROUNDS", "4")))
        print("PROG_COSTS " + json.dumps({"cpus": os.cpu_count(), "release": os.uname().release,
                                          "costs": costs}), flush=True)
        return 0
    if "--stop" in sys.argv:
        print_stop_latency()
        return 0
    if "--deep" in sys.argv:
        print_deep_costs(deep_costs())
        print_python_deep_costs(python_deep_costs())
        return 0
    if "--storm" in sys.argv:
        print_storms()
        return 0
    if "--report" in sys.argv:
        print_report_times()
        return 0
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")
    print(f"memtrail overhead: median of {RUNS} interleaved runs each, workload time only")
    print(f"{'workload':18} {'untraced':>10} {'--all':>10} {'ratio':>7} "
          f"{'-- CMD':>10} {'ratio':>7} {'target':>8} {'watch':>10} {'ratio':>7} "
          f"{'/--all':>7} {'target':>8}")
    rows = []
    for label, name, target in WORKLOADS:
        cmd = [os.path.join(WL, name)]
        base, all_, rec, wat = [], [], [], []
        for _ in range(RUNS):
            base.append(elapsed(cmd))
            all_.append(with_all(lambda: elapsed(cmd)))
            rec.append(elapsed([MEMTRAIL, "record", "-q", "-o", out, "--", *cmd]))
            wat.append(with_watch(lambda: elapsed(cmd)))
        b, a, r, w = (statistics.median(x) for x in (base, all_, rec, wat))
        print(f"{label:18} {b:9.3f}s {a:9.3f}s {a / b:6.3f}x {r:9.3f}s {r / b:6.3f}x "
              f"{'<=' + format(target, '.2f') + 'x':>8} {w:9.3f}s {w / b:6.3f}x "
              f"{w / a:6.3f}x {'<=1.03x':>8}", flush=True)
        rows += [(label, "untraced", f"{b:.3f} s", "", "", ""),
                 ("", "`record --all`", f"{a:.3f} s", f"{a / b:.2f}x", "", f"<= {target:.2f}x"),
                 ("", "`record -- CMD`", f"{r:.3f} s", f"{r / b:.2f}x", "", f"<= {target:.2f}x"),
                 ("", "`watch`", f"{w:.3f} s", f"{w / b:.2f}x", "", f"<= 1.03x `--all`")]
    touch = prog_costs()
    print_prog_costs(touch)
    base, bare, full, ubase, budget, ht, deep = heap_pairs()
    print(f"heap probes per malloc/free pair: untraced {base:.0f} ns, floor (3 counting "
          f"uprobes) {bare / 1000:.2f} us, memtrail --heap --unwind fp {full / 1000:.2f} us "
          f"({full / bare:.3f}x the floor, target <= 1.10x), --heap {deep / 1000:.2f} us "
          f"({deep / bare:.3f}x)", flush=True)
    if ht:
        print(f"  heaptrack (LD_PRELOAD; the program started under it) {ht / 1000:.2f} us a pair "
              f"({ht / base:.0f}x untraced)", flush=True)
    print_deep_costs(deep_costs())
    print_python_deep_costs(python_deep_costs())
    heap = prog_costs(heap=True)
    print_prog_costs(heap, "'record --heap' on the malloc/free loop")
    print(f"malloc/free loop, 3 s: untraced {ubase:.3f}s, --heap --overhead-budget 2 "
          f"{budget:.3f}s ({budget / ubase:.3f}x, target <= 1.02x + noise)", flush=True)
    rows += [("malloc/free pairs (300,000)", "untraced", f"{base:.0f} ns a pair", "", "", ""),
             ("", "floor: 3 counting uprobes", f"{bare / 1000:.2f} us", f"{bare / base:.0f}x",
              "1.00x", ""),
             ("", "`record --heap --unwind fp`", f"{full / 1000:.2f} us",
              f"{full / base:.0f}x", f"{full / bare:.2f}x", "<= 1.10x the floor"),
             ("", "`record --heap`", f"{deep / 1000:.2f} us", f"{deep / base:.0f}x",
              f"{deep / bare:.2f}x", "<= 1.10x the floor")]
    if ht:
        rows.append(("", "heaptrack (LD_PRELOAD)", f"{ht / 1000:.2f} us", f"{ht / base:.0f}x",
                     f"{ht / bare:.2f}x", ""))
    rows.append(("malloc/free loop (3 s)", "`record --heap --overhead-budget 2`",
                 f"{budget:.3f} s", f"{budget / ubase:.2f}x", "", "<= 1.02x"))
    write_table(rows, touch, heap)
    b, t = device_pairs()
    print(f"device alloc/free pairs (CUDA stand-in, 100k): untraced {b:.0f} ns/pair, "
          f"memtrail {t:.0f} ns/pair, +{t - b:.0f} ns ({t / b:.1f}x; two uprobe traps "
          f"and two uretprobes per pair)", flush=True)
    b, t = library_gate()
    print(f"50 programs each loading a new copy of a CUDA library and calling it at once "
          f"(each waiting at record's gate until probed): untraced {b:.2f} s, as record's "
          f"command {t:.2f} s (memtrail's start and end included), "
          f"+{(t - b) / 50 * 1000:.1f} ms a program", flush=True)
    multi, each = device_teardown()
    print(f"record -- cuda_phases (one CUDA library probed), start to exit: uprobe_multi "
          f"links {multi:.2f} s, one link per function {each:.2f} s", flush=True)
    rss, kmem = device_live_memory()
    print(f"1M live device allocations: memtrail VmRSS {rss / 1024:.1f} MiB, kernel map "
          f"dev_allocs {kmem / 2**20:.1f} MiB (bounded: 1M entries at most)", flush=True)
    print_storms()
    med, worst, size, cpu = metrics_scrape()
    print(f"GET /metrics with 2000 idle processes: median {med * 1000:.1f} ms, slowest "
          f"{worst * 1000:.1f} ms (target < 100 ms), page {size / 1024:.0f} KiB; watch with "
          f"--metrics used {cpu * 100:.2f}% of one core", flush=True)
    for label, cpu, rss in top_idle_cpu():
        print(f"memtrail top with 2000 idle processes, {label}: {cpu * 100:.2f}% of one "
              f"core, VmRSS {rss / 1024:.1f} MiB", flush=True)
    print_stop_latency()
    print_report_times()
    if os.path.exists(out):
        os.unlink(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
