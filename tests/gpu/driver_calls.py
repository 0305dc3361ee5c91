#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""CUDA driver calls on a real GPU, through the system's libcuda.so.1 (ctypes):
device 256 MiB (a), 1 GiB (b), 64 MiB + 4 KiB (c); a freed; pinned host
32 MiB (h); managed 16 MiB (m); then a device allocation of 4 TiB, which
must fail with CUDA_ERROR_OUT_OF_MEMORY (2); then everything is freed.
Prints its ledger as JSON: what memtrail must report, from the program's
own arithmetic, and the driver's free memory before and after (cuMemGetInfo).
With --bench N: N pairs of a 2 MiB cuMemAlloc_v2 and its cuMemFree_v2, and
the time a pair took.
"""

import ctypes
import json
import os
import sys
import time

MiB = 1 << 20
cu = ctypes.CDLL("libcuda.so.1")
ptr_t = ctypes.c_ulonglong


def ok(rc, what):
    if rc:
        raise SystemExit(f"{what} failed: CUDA error {rc}")


def mem_info():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    ok(cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo_v2")
    return free.value, total.value


def dev_alloc(size):
    p = ptr_t()
    rc = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size))
    return rc, p.value


bench = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--bench" else 0
ok(cu.cuInit(0), "cuInit")
dev = ctypes.c_int()
ok(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p()
ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
ok(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
if bench:
    # N pairs of cuMemAlloc_v2 (2 MiB) and cuMemFree_v2: the time a pair takes
    t0 = time.perf_counter()
    for _ in range(bench):
        rc, p = dev_alloc(2 * MiB)
        ok(rc or cu.cuMemFree_v2(ptr_t(p)), "alloc/free pair")
    print(json.dumps({"pairs": bench, "us_a_pair": (time.perf_counter() - t0) / bench * 1e6}))
    sys.exit(0)
free0, total = mem_info()
sizes = {"a": 256 * MiB, "b": 1024 * MiB, "c": 64 * MiB + 4096}
ptrs = {}
for k, n in sizes.items():
    rc, ptrs[k] = dev_alloc(n)
    ok(rc, f"cuMemAlloc_v2 {k}")
free1, _ = mem_info()
ok(cu.cuMemFree_v2(ptr_t(ptrs.pop("a"))), "cuMemFree_v2 a")
host = ctypes.c_void_p()
ok(cu.cuMemAllocHost_v2(ctypes.byref(host), ctypes.c_size_t(32 * MiB)), "cuMemAllocHost_v2")
managed = ptr_t()
ok(cu.cuMemAllocManaged(ctypes.byref(managed), ctypes.c_size_t(16 * MiB), 1), "cuMemAllocManaged")
oom_size = 4 << 40
oom_rc, _ = dev_alloc(oom_size)
live_at_oom = sizes["b"] + sizes["c"]
for k in list(ptrs):
    ok(cu.cuMemFree_v2(ptr_t(ptrs.pop(k))), f"cuMemFree_v2 {k}")
ok(cu.cuMemFreeHost(host), "cuMemFreeHost")
ok(cu.cuMemFree_v2(managed), "cuMemFree_v2 managed")
print(json.dumps({
    "pid": os.getpid(),
    "device_peak": sum(sizes.values()), "host_peak": 32 * MiB, "managed_peak": 16 * MiB,
    "oom": {"size": oom_size, "rc": oom_rc, "live_device": live_at_oom},
    "total": total, "driver_free_drop": free0 - free1,
}), flush=True)
