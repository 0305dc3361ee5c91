#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Python allocations at known lines, for --unwind dwarf:

    py_lines.py [wait]

Five bytearrays, each of its own size (3 MiB and up: every one is a deep
sample), kept, made at the lines marked "# alloc: WHERE" below: in a plain
function, in a method, in a generator's body, in a threading.Thread, and in
a key function that sorted() (C) calls back; then a sixth block of the C
library's malloc called through ctypes, which lets the GIL go for the call
(as PyTorch's operators do): no thread holds it while it allocates. With "wait", it first waits
for a line of input (memtrail attaches meanwhile). Prints its own account:
{"pid": P, "allocs": [{"where": W, "size": N, "line": L, "function": Q}]}
then waits for a line (or the end) of its input and exits.
"""
import ctypes
import json
import os
import sys
import threading

MIB = 1 << 20
keep = []
libc = ctypes.CDLL(None)  # a foreign call: the GIL released around it
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]


def plain(size):
    keep.append(bytearray(size))  # alloc: plain


class Model:
    def build(self, size):
        keep.append(bytearray(size))  # alloc: method


def chunks(size):
    yield bytearray(size)  # alloc: generator


def in_thread(size):
    keep.append(bytearray(size))  # alloc: thread


def by_size(size):
    def key(i):
        if i == 1:
            keep.append(bytearray(size))  # alloc: reentry
        return -i
    return sorted(range(3), key=key)


def released(size):
    keep.append(libc.malloc(size))  # alloc: released


def lines():
    """Each marked line's number, from this file itself."""
    found = {}
    with open(os.path.abspath(__file__)) as f:
        for n, text in enumerate(f, 1):
            if "# alloc: " in text and "found" not in text:
                found[text.split("# alloc: ")[1].strip()] = n
    return found


def main():
    if sys.argv[1:] == ["wait"]:
        sys.stdin.readline()
    plain(3 * MIB + 1000)
    Model().build(3 * MIB + 2000)
    for c in chunks(3 * MIB + 3000):
        keep.append(c)
    t = threading.Thread(target=in_thread, args=(3 * MIB + 4000,))
    t.start()
    t.join()
    by_size(3 * MIB + 5000)
    released(3 * MIB + 6000)
    where = lines()
    names = {"plain": "plain", "method": "Model.build", "generator": "chunks",
             "thread": "in_thread", "reentry": "by_size.<locals>.key", "released": "released"}
    allocs = [{"where": w, "size": 3 * MIB + 1000 * (i + 1), "line": where[w],
               "function": names[w]}
              for i, w in enumerate(["plain", "method", "generator", "thread", "reentry",
                                     "released"])]
    print(json.dumps({"pid": os.getpid(), "allocs": allocs}), flush=True)
    sys.stdin.readline()


if __name__ == "__main__":
    main()
