#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Run the integration tests: real BPF programs in this kernel, real
workloads, real cgroups. Needs root. Under CI=true a test that cannot load
BPF fails; elsewhere the whole suite is skipped, loudly, when not root.

    run.py [NAME_SUBSTRING ...]
"""

import importlib
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402


def collect(filters):
    tests = []
    for fname in sorted(os.listdir(HERE)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        mod = importlib.import_module(fname[:-3])
        for name in sorted(dir(mod)):
            fn = getattr(mod, name)
            if name.startswith("test_") and callable(fn):
                full = f"{fname[:-3]}.{name}"
                if not filters or any(f in full for f in filters):
                    tests.append((full, fn))
    return tests


def main():
    ci = os.environ.get("CI") == "true"
    if os.geteuid() != 0:
        msg = "integration tests need root (BPF, cgroups)"
        if ci:
            print(f"FAIL: {msg}; CI=true, so this is a failure")
            print("integration: 0 passed, 1 failed")
            return 1
        print(f"SKIPPED: {msg}; run 'sudo make test'")
        print("integration: 0 passed, 0 failed, 1 skipped")
        return 0
    for path in (harness.MEMTRAIL, harness.WORKLOADS):
        if not os.path.exists(path):
            print(f"FAIL: {path} is missing: run 'make' first")
            return 1
    tests = collect(sys.argv[1:])
    passed = failed = 0
    for name, fn in tests:
        t0 = time.time()
        try:
            harness.test_begins()
            fn()
        except Exception as e:  # a test's failure, reported and counted
            failed += 1
            detail = str(e) if isinstance(e, harness.TestFailure) else traceback.format_exc()
            print(f"FAIL {name} ({time.time() - t0:.1f}s): {detail}", flush=True)
            continue
        passed += 1
        print(f"ok   {name} ({time.time() - t0:.1f}s)", flush=True)
    print(f"integration: {passed} passed, {failed} failed")
    return 1 if failed or not tests else 0


if __name__ == "__main__":
    sys.exit(main())
