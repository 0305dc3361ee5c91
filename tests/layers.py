#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""The layering of user/, checked from the sources (make test runs it):

- the folders' floors are the Makefile's SEES_<folder> lists (what each
  folder's sources may include): they form no circle, and each folder sees
  itself;
- every #include "X" of a source or header in user/FOLDER names a header of
  a folder FOLDER sees, of include/, or one the build makes: from a lower
  floor into a higher one is a failure, named with both folders;
- a family's private header (NAME_int.h: what NAME.c's parts share) is
  included only by that family's files (NAME*.c, NAME*.h in its folder).

Prints each failure on a line of its own, then "layers: N passed, M failed"."""

import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
USER = os.path.join(ROOT, "user")
GENERATED = {"memtrail.skel.h", "memtrail_compat.skel.h", "profile.pb-c.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sees():
    """{folder: [folders it sees]} from the Makefile."""
    with open(os.path.join(ROOT, "Makefile")) as f:
        text = f.read()
    return {m.group(1): m.group(2).split() for m in re.finditer(r"^SEES_(\w+) := (.*)$", text, re.M)}


def circles(graph):
    """A circle of folders in GRAPH (self-edges aside), or None."""
    state = {}

    def visit(n, path):
        state[n] = "open"
        for m in graph.get(n, []):
            if m == n:
                continue
            if state.get(m) == "open":
                return path[path.index(m):] + [m] if m in path else [n, m]
            if m not in state:
                found = visit(m, path + [m])
                if found:
                    return found
        state[n] = "done"
        return None

    for n in graph:
        if n not in state:
            found = visit(n, [n])
            if found:
                return found
    return None


def main():
    graph = sees()
    failures = []
    checks = 0
    folders = sorted(d for d in os.listdir(USER) if os.path.isdir(os.path.join(USER, d)))
    headers = {d: {f for f in os.listdir(os.path.join(USER, d)) if f.endswith(".h")}
               for d in folders}
    owner = {}
    for d, hs in headers.items():
        for h in hs:
            owner.setdefault(h, []).append(d)
    public = set(os.listdir(os.path.join(ROOT, "include")))
    checks += 1
    for d in folders:
        if d not in graph:
            failures.append(f"user/{d}: no SEES_{d} in the Makefile (what may it include?)")
        elif d not in graph[d]:
            failures.append(f"user/{d}: SEES_{d} leaves out its own folder")
    loop = circles(graph)
    checks += 1
    if loop:
        failures.append("the Makefile's floors make a circle: " + " -> ".join(loop))
    for h, ds in sorted(owner.items()):
        checks += 1
        if len(ds) > 1:
            failures.append(f"{h} is in {', '.join(ds)}: a header name belongs to one folder")
    for d in folders:
        for name in sorted(os.listdir(os.path.join(USER, d))):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(USER, d, name)
            with open(path, errors="replace") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                checks += 1
                rel = f"user/{d}/{name}"
                if inc in GENERATED or (inc in public and inc not in owner):
                    continue
                where = owner.get(inc)
                if not where:
                    failures.append(f"{rel}: includes {inc}, which is in no folder of user/")
                    continue
                if where[0] not in graph.get(d, []):
                    failures.append(f"{rel}: includes {inc} of user/{where[0]}, a floor above "
                                    f"user/{d} (SEES_{d}: {' '.join(graph.get(d, []))})")
                    continue
                m = re.match(r"(\w+)_int\.h$", inc)
                if m and not (where[0] == d and name.startswith(m.group(1))):
                    failures.append(f"{rel}: includes {inc}, the {m.group(1)} family's private "
                                    f"header (its door is {m.group(1)}.h)")
    for x in failures:
        print(f"FAIL {x}")
    print(f"layers: {checks - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
