#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# On the GPU machine, from the repository root, with build/gpu carried
# (tests/gpu/bundle.sh): the real-driver checks of tests/gpu/check.py,
# their files under $OUT.
OUT=${OUT:-/tmp/memtrail-gpu}
B=build/gpu
export MEMTRAIL="$B/ld-linux-x86-64.so.2 --library-path $B $B/memtrail"
mkdir -p "$OUT"
{ uname -a; ls -la /sys/kernel/btf/vmlinux; nvidia-smi -L; python3 --version; } 2>&1 | tee "$OUT/machine.txt"
timeout 480 python3 tests/gpu/check.py "$OUT" 2>&1 | tee "$OUT/check.txt"
