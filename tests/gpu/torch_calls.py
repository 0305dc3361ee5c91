#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""PyTorch on a real GPU: in phase "tensors", tensors of 1 GiB, 300 MiB,
then 100 MiB after the first is freed; in phase "too_big", one of 4 TiB that
must fail (torch.OutOfMemoryError). Prints, as JSON, PyTorch's own account
of what it took from CUDA: the caching allocator's largest reserve
(torch.cuda.max_memory_reserved) before and after the failure, its reserve
at the end, and the failure. With PYTORCH_CUDA_ALLOC_CONF=
expandable_segments:True the same memory comes from cuMemCreate/cuMemMap.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "include"))
import memtrail_marker  # noqa: E402

MiB = 1 << 20
torch.cuda.init()
memtrail_marker.phase("tensors")
x1 = torch.empty(1024 * MiB, dtype=torch.uint8, device="cuda")
x2 = torch.empty(300 * MiB, dtype=torch.uint8, device="cuda")
del x1
x3 = torch.empty(100 * MiB, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
peak_before_oom = torch.cuda.max_memory_reserved()
oom = None
memtrail_marker.phase("too_big")
try:
    torch.empty(4 << 40, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    oom = str(e).splitlines()[0][:200]
torch.cuda.synchronize()
print(json.dumps({
    "pid": os.getpid(), "torch": torch.__version__, "cuda": torch.version.cuda,
    "device": torch.cuda.get_device_name(0),
    "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    "max_reserved": torch.cuda.max_memory_reserved(), "peak_before_oom": peak_before_oom,
    "reserved_end": torch.cuda.memory_reserved(), "oom": oom,
}), flush=True)
