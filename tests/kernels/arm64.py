#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""The arm64 build (make arm64: build-arm64/memtrail, cross-built with
Debian's gcc-aarch64-linux-gnu and :arm64 libraries, its BPF objects against
Debian 12's 6.1 arm64 kernel BTF), checked without an arm64 kernel: the
binary is an aarch64 executable, its BPF objects read arm64's pt_regs, and
under qemu-user (qemu-aarch64-static) its user space says what the x86 build
says: --help of each command, and 'report' of every trail in the fuzzer's
corpus as a table and as JSON, byte for byte with the same exit status.
Loading its BPF programs needs an arm64 kernel: the arm64 rows of the kernel
matrix.

    arm64.py

Prints "arm64: N passed, M failed".
"""

import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
ARM64 = os.path.join(ROOT, "build-arm64", "memtrail")
X86 = os.path.join(ROOT, "memtrail")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
EM_AARCH64 = 183


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def checks():
    """(name, None or why it failed) for each check."""
    with open(ARM64, "rb") as f:
        head = f.read(20)
    machine = struct.unpack_from("<H", head, 18)[0] if head[:4] == b"\x7fELF" else None
    yield "an aarch64 executable", None if machine == EM_AARCH64 else f"e_machine {machine}"
    btf = run(["bpftool", "btf", "dump", "file",
               os.path.join(ROOT, "build-arm64", "memtrail.bpf.o")])
    yield "BPF objects for arm64", (None if b"'orig_x0'" in btf[1] else
                                    f"no arm64 pt_regs in its BTF ({btf[2][-200:]!r})")
    qemu = ["qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu", ARM64]
    for cmd in ("record", "watch", "top", "report", "daemonset", "features", "mark"):
        a, b = run(qemu + [cmd, "--help"]), run([X86, cmd, "--help"])
        yield f"{cmd} --help", None if a == b else f"arm64 {a[0]} {a[2][-200:]!r}, x86 {b[0]}"
    for name in sorted(os.listdir(CORPUS)):
        path = os.path.join(CORPUS, name)
        for extra in ([], ["--json"]):
            a, b = run(qemu + ["report", *extra, path]), run([X86, "report", *extra, path])
            yield (f"report {' '.join(extra + [name])}",
                   None if a == b else f"arm64 {a[0]} {a[2][-200:]!r}, x86 {b[0]} {b[2][-200:]!r}")


def main():
    passed = failed = 0
    if not os.path.exists(ARM64):
        print(f"arm64: no {ARM64} (make arm64)")
        print("arm64: 0 passed, 1 failed")
        return 1
    for name, why in checks():
        if why:
            failed += 1
            print(f"FAIL arm64 {name}: {why}", flush=True)
        else:
            passed += 1
    print(f"arm64: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
