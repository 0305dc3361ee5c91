#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""make test: the cmocka unit tests (sanitizers on), the fuzzer of report for
FUZZ_SECONDS (300; tests/fuzz/run.py, one check), user/'s layering
(tests/layers.py), the integration tests, the
BPF objects built with Linux 5.10's x86 and 6.1's arm64 headers
(tests/kernels/headers.py), the arm64 build under qemu-user
(tests/kernels/arm64.py), then the integration tests' core on Linux 5.10
and 6.1 (x86) and 6.1 (arm64) under QEMU (tests/kernels/run.py --ci; MEMTRAIL_NO_KERNELS=1 leaves
out all but the unit, fuzz and integration tests); one closing line counts them all."""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def counted(label, script):
    """Run tests/SCRIPT..., print its output; (passed, failed) from its "LABEL: N
    passed, M failed" line, one failure more when it failed without saying so."""
    p = subprocess.run([sys.executable, os.path.join(HERE, script[0], script[1]), *script[2:]],
                       capture_output=True, text=True)
    sys.stdout.write(p.stdout + p.stderr)
    m = re.search(label + r": (\d+) passed, (\d+) failed", p.stdout)
    ok, bad = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    if p.returncode != 0 and not bad:
        bad += 1
    return ok, bad


def main():
    passed = failed = 0
    for binary in sys.argv[1:]:
        p = subprocess.run([binary], capture_output=True, text=True)
        sys.stdout.write(p.stdout + p.stderr)
        ok = re.search(r"\[  PASSED  \] (\d+) test", p.stdout + p.stderr)
        bad = re.search(r"\[  FAILED  \] (\d+) test", p.stdout + p.stderr)
        n_ok = int(ok.group(1)) if ok else 0
        n_bad = int(bad.group(1)) if bad else 0
        if p.returncode != 0 and n_bad == 0:
            n_bad = 1  # crashed or a sanitizer stopped it
        passed += n_ok
        failed += n_bad
    print(f"unit: {passed} passed, {failed} failed", flush=True)
    # trails are untrusted input: any finding of the fuzzer fails the run
    p = subprocess.run([sys.executable, os.path.join(HERE, "fuzz", "run.py"),
                        "--seconds", os.environ.get("FUZZ_SECONDS", "300"),
                        os.path.join(HERE, "..", "build", "fuzz", "fuzz_report")],
                       capture_output=True, text=True)
    sys.stdout.write(p.stdout + p.stderr)
    if p.returncode == 0 and "fuzz: passed" in p.stdout:
        passed += 1
    else:
        failed += 1
    for label, script in (("layers", [".", "layers.py"]),  # user/'s floors and doors
                          ("integration", ["integration", "run.py"]),
                          # the BPF objects build with other kernels' headers (5.10 x86, 6.1 arm64)
                          ("headers", ["kernels", "headers.py"]),
                          # make arm64's binary says what this one says (qemu-user)
                          ("arm64", ["kernels", "arm64.py"]),
                          # the core on the oldest and the most common kernels, x86 and arm64, under QEMU
                          ("kernels", ["kernels", "run.py", "--ci"])):
        if label not in ("layers", "integration") and \
                os.environ.get("MEMTRAIL_NO_KERNELS") == "1":
            continue
        ok, bad = counted(label, script)
        passed += ok
        failed += bad
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
