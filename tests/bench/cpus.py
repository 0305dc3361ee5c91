#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""make bench-cpus: the cost per event of memtrail's BPF programs as the CPU
count grows. Boots one kernel (KERNEL, default 6.17: rss counters are
percpu_counters from 6.2) under QEMU twice, with 2 and with 64 CPUs, runs
'bench.py --prog-costs' inside each (the kernel's bpf_stats while the
page-touch loop runs), and in the 64-CPU guest the exactness tests too.
Prints ns per run of each program at both sizes and their ratio; the target
for mt_rss_stat is <= 1.2x. Not a test: it prints the figures.

    cpus.py [SMP ...]      (default: 2 64)
"""

import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "kernels"))

import run as kernels  # noqa: E402

# rss exact against the workload's own page count, inside the big guest
EXACT = ["test_accounting.test_mapped_exact_rss_within_2pct",
         "test_accounting.test_shmem_counted"]


def guest(deb, smp, exact):
    gdir = os.path.join(ROOT, "build", "kernels")
    os.makedirs(gdir, exist_ok=True)
    script = os.path.join(gdir, f"bench-cpus-{smp}.sh")
    with open(script, "w") as f:
        f.write("export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n")
        f.write(f"export HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1\ncd '{ROOT}'\n")
        f.write("mount -t cgroup2 cgroup2 /sys/fs/cgroup\n")
        f.write("mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm\n")
        f.write("python3 tests/bench/bench.py --prog-costs\n")
        if exact:
            f.write("python3 tests/integration/run.py " + " ".join(exact) + "\n")
    console = os.path.join(gdir, f"console-bench-cpus-{smp}.log")
    # memory grows with the CPUs (per-CPU areas); TCG's time with them too
    mem = str(2048 + 32 * smp)
    with open(console, "w") as f:
        subprocess.run(["bash", os.path.join(ROOT, "tests", "kernels", "boot.sh"), deb, script,
                        str(smp), mem], stdout=f, stderr=subprocess.STDOUT)
    with open(console, errors="replace") as f:
        log = f.read()
    m = re.search(r"PROG_COSTS (\{.*\})", log)
    if not m:
        raise SystemExit(f"bench-cpus: no figures from the {smp}-CPU guest; see {console}")
    results = re.findall(r"(?:^|\W)(ok  |FAIL) (test_\S+) \(", log, re.M)
    return json.loads(m.group(1)), results


def main(argv):
    sizes = [int(a) for a in argv if a.isdigit()] or [2, 64]
    name = os.environ.get("KERNEL", "6.17")
    debs = kernels.fetch([name])
    runs = {}
    for smp in sizes:
        print(f"booting {name} with {smp} CPUs (TCG: minutes)...", flush=True)
        runs[smp], results = guest(debs[name], smp, EXACT if smp == max(sizes) else [])
        for status, test in results:
            print(f"  {smp} CPUs: {status.strip().lower()} {test}", flush=True)
    lo, hi = min(sizes), max(sizes)
    a, b = runs[lo], runs[hi]
    print(f"\nBPF programs, ns per run (kernel {a['release']}, QEMU TCG; page-touch loop)")
    print(f"{'program':18} {str(lo) + ' CPUs':>10} {str(hi) + ' CPUs':>10} {'ratio':>7} "
          f"{'target':>7}")
    for prog in sorted(set(a["costs"]) & set(b["costs"]), key=lambda p: -a["costs"][p][1]):
        x, y = a["costs"][prog][0], b["costs"][prog][0]
        target = "<=1.2x" if prog == "mt_rss_stat" else ""
        print(f"{prog:18} {x:9.0f}  {y:9.0f}  {y / x:6.2f}x {target:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
