#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""PyTorch inference on the CPU, as a model server does it:

    torch_linear.py [LAYERS [SIZE [INFERENCES]]]

imports torch, builds LAYERS (4) Linear(SIZE, SIZE) layers (SIZE 4096:
64 MiB of float32 weights each), runs INFERENCES (10) forward passes on one
input row without gradients, then drops the model (the teardown), marking
each step as a phase (import, init, infer, teardown) with memtrail's Python
marker (include/memtrail_marker.py). Prints its own arithmetic on one line:
{"layers": N, "weight_bytes": W, "bias_bytes": B, "each_weight": W / N}
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include"))
import memtrail_marker  # noqa: E402

memtrail_marker.phase("import")
import torch  # noqa: E402


def main():
    layers, size, inferences = 4, 4096, 10
    args = [int(a) for a in sys.argv[1:]]
    if args:
        layers = args[0]
    if len(args) > 1:
        size = args[1]
    if len(args) > 2:
        inferences = args[2]
    torch.manual_seed(0)
    memtrail_marker.phase("init")
    model = torch.nn.Sequential(*[torch.nn.Linear(size, size) for _ in range(layers)])
    x = torch.ones(1, size)
    memtrail_marker.phase("infer")
    with torch.no_grad():
        for _ in range(inferences):
            y = model(x)
    weights = [m.weight for m in model]
    out = {
        "layers": layers,
        "weight_bytes": sum(w.numel() * w.element_size() for w in weights),
        "bias_bytes": sum(m.bias.numel() * m.bias.element_size() for m in model),
        "each_weight": size * size * weights[0].element_size(),
        "checksum": float(y.sum()),
    }
    memtrail_marker.phase("teardown")
    del weights, model, y
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
