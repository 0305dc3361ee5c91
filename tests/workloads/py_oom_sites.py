#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Memory held at known lines, one of them growing until the kernel kills it:

    py_oom_sites.py LEDGER

Holds 8 MiB in a bytearray ("weights") and 4 MiB in a numpy array
("cache"; an array.array where the interpreter has no numpy), then appends 8 MiB bytearrays ("grow") until it is killed. After
each step it rewrites LEDGER with its own account:
{"pid": P, "lines": {WHERE: LINE}, "held": {WHERE: BYTES}}
(BYTES: what that line's objects hold, by their sizes), so a test knows
what each line holds up to the allocation the kill interrupted.
"""
import array
import json
import os
import sys

try:
    import numpy
except ImportError:  # pyenv's and the roots' interpreters
    numpy = None

MIB = 1 << 20
CHUNK = 8 * MIB


def lines():
    """Each marked line's number, from this file itself."""
    found = {}
    with open(os.path.abspath(__file__)) as f:
        for n, text in enumerate(f, 1):
            if "# at: " in text and "found" not in text:
                found[text.split("# at: ")[1].strip()] = n
    return found


def write(path, held, where):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "lines": where, "held": held}, f)
    os.rename(tmp, path)


def load_weights():
    return bytearray(8 * MIB)  # at: weights


def make_cache():
    return numpy.ones(MIB // 2) if numpy else array.array("d", [1.0]) * (MIB // 2)  # at: cache


def main():
    ledger, where = sys.argv[1], lines()
    held = {"weights": 0, "cache": 0, "grow": 0}
    weights = load_weights()
    held["weights"] = len(weights)
    cache = make_cache()
    held["cache"] = len(cache) * cache.itemsize
    write(ledger, held, where)
    keep = []
    while True:
        keep.append(bytearray(CHUNK))  # at: grow
        held["grow"] += CHUNK
        write(ledger, held, where)


if __name__ == "__main__":
    main()
