#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""make bench: memtrail's overhead on two workloads, measured in one run
against the same workloads untraced, as ratios of the workloads' own
elapsed time (median of interleaved runs). Not a test: it asserts nothing,
it prints the figures and the targets they are held to."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MEMTRAIL = os.path.join(ROOT, "memtrail")
WL = os.path.join(ROOT, "build", "workloads")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))

WORKLOADS = [
    ("malloc/free loop", "bench_malloc", 1.03),
    ("page-touch loop", "bench_touch", 1.15),
]


def elapsed(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)["ns"] / 1e9


def with_all(fn):
    """Run fn() while 'memtrail record --all' traces the whole node."""
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")
    m = subprocess.Popen([MEMTRAIL, "record", "-q", "-o", out, "--all"],
                         stderr=subprocess.PIPE, text=True)
    while "tracing" not in (m.stderr.readline() or "tracing"):
        pass
    try:
        return fn()
    finally:
        m.send_signal(2)
        m.communicate()
        if os.path.exists(out):
            os.unlink(out)


def main():
    if os.geteuid() != 0:
        print("make bench needs root (it loads BPF)")
        return 1
    out = tempfile.mktemp(prefix="memtrail-bench-", suffix=".json")
    print(f"memtrail overhead: median of {RUNS} interleaved runs each, workload time only")
    print(f"{'workload':18} {'untraced':>10} {'--all':>10} {'ratio':>7} "
          f"{'-- CMD':>10} {'ratio':>7} {'target':>8}")
    for label, name, target in WORKLOADS:
        cmd = [os.path.join(WL, name)]
        base, all_, rec = [], [], []
        for _ in range(RUNS):
            base.append(elapsed(cmd))
            all_.append(with_all(lambda: elapsed(cmd)))
            rec.append(elapsed([MEMTRAIL, "record", "-q", "-o", out, "--", *cmd]))
        b, a, r = (statistics.median(x) for x in (base, all_, rec))
        print(f"{label:18} {b:9.3f}s {a:9.3f}s {a / b:6.3f}x {r:9.3f}s {r / b:6.3f}x "
              f"{'<=' + format(target, '.2f') + 'x':>8}", flush=True)
    if os.path.exists(out):
        os.unlink(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
