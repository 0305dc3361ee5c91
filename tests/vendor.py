#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Fetch what the tests run that this machine's Debian does not have: NVIDIA's
real CUDA libraries from Debian's non-free section, the driver's libcuda.so.1
(libcuda1, bookworm) and the runtimes libcudart.so.11.0 (libcudart11.0,
bookworm) and libcudart.so.12 (libcudart12, trixie); trixie's CPython 3.13
and sid's CPython 3.14, each with its own C library, unpacked as a root
directory that chroot runs (a container's, in effect). Downloaded once into a cache with a private
apt state (the machine's own apt sources are not touched), unpacked with
dpkg-deb into build/vendor/, and named in build/vendor/manifest.json:
  {"libcuda": PATH, "cudart": {"11": PATH, "12": PATH},
   "python313": {"root": DIR, "python": "/usr/bin/python3.13"},
   "python314": {"root": DIR, "python": "/usr/bin/python3.14"}, "versions": {...}}
PATH and DIR are relative to the manifest's folder (the arm64 guests see
build-arm64 as build). No GPU is needed: without one every call fails, and
that is what is tested. --arch arm64: the same packages for arm64 (Debian
builds NVIDIA's for arm64 too), into build-arm64/vendor, for the kernel
matrix's arm64 rows.

    vendor.py [--arch amd64|arm64] [--cache DIR]
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from archive import BOTH_ARCHS, apt_opts, archive_uri  # noqa: E402
CACHE = os.environ.get("MEMTRAIL_VENDOR_CACHE", "/var/cache/memtrail/nvidia")
# (package, suite, the root it is unpacked into, or None: a folder of its own)
PACKAGES = [
    ("libcuda1", "bookworm", None),
    ("libcudart11.0", "bookworm", None),
    ("libcudart12", "trixie", None),
]
# CPython and what it loads, unpacked into one root per version: trixie's
# 3.13 and sid's 3.14 (a stripped executable, its own C library: 2.42 on)
PYTHON_ROOTS = {
    "python313": ("trixie", "3.13", ["libc6", "python3.13-minimal", "libpython3.13-minimal",
                                     "libpython3.13-stdlib", "libexpat1", "zlib1g", "libffi8"]),
    "python314": ("sid", "3.14", ["libc6", "python3.14-minimal", "libpython3.14-minimal",
                                  "libpython3.14-stdlib", "libexpat1", "zlib1g", "libffi8"]),
}
PACKAGES += [(p, suite, root) for root, (suite, _, pkgs) in PYTHON_ROOTS.items() for p in pkgs]


def fail(msg):
    sys.exit(f"vendor: {msg}")


def download(cache, arch):
    """The .deb of each (package, suite) for ARCH, downloaded once into CACHE/SUITE."""
    def found(p, suite):
        d = os.path.join(cache, suite)
        return next((os.path.join(d, f) for f in sorted(os.listdir(d)) if f.startswith(p + "_")
                     and f.endswith((f"_{arch}.deb", "_all.deb"))), None)
    for suite in {s for _, s, _ in PACKAGES}:
        os.makedirs(os.path.join(cache, suite), exist_ok=True)
    have = {(p, suite): found(p, suite) for p, suite, _ in PACKAGES}
    if all(have.values()):
        return have
    state = os.path.join(cache, "apt")
    for d in ("lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(state, d), exist_ok=True)
    uri = archive_uri()
    if not uri:
        fail("no Debian archive found in this machine's apt sources")
    with open(os.path.join(state, "sources.list"), "w") as f:
        for suite in sorted({s for _, s, _ in PACKAGES}):
            f.write(f"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {uri} "
                    f"{suite} main contrib non-free\n")
    p = subprocess.run(["apt-get", *apt_opts(state), *BOTH_ARCHS, "update"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        fail(f"apt-get update failed: {p.stderr.strip()[-300:]}")
    for pkg, suite, _ in PACKAGES:
        if have[(pkg, suite)]:
            continue
        p = subprocess.run(["apt-get", *apt_opts(state), *BOTH_ARCHS, "download", f"{pkg}:{arch}/{suite}"],
                           cwd=os.path.join(cache, suite), capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"cannot download {pkg} from {suite}: {p.stderr.strip()[-300:]}")
    return download(cache, arch)


def find(tree, pattern):
    """The one regular file under TREE whose name matches PATTERN."""
    for d, _, files in os.walk(tree):
        for f in sorted(files):
            path = os.path.join(d, f)
            if re.fullmatch(pattern, f) and os.path.isfile(path) and not os.path.islink(path):
                return path
    fail(f"no file {pattern} in {tree}")


def main(argv):
    cache, arch = CACHE, "amd64"
    while argv:
        if len(argv) >= 2 and argv[0] == "--cache":
            cache = argv[1]
        elif len(argv) >= 2 and argv[0] == "--arch" and argv[1] in ("amd64", "arm64"):
            arch = argv[1]
        else:
            fail("usage: vendor.py [--arch amd64|arm64] [--cache DIR]")
        argv = argv[2:]
    out = os.path.join(ROOT, "build-arm64" if arch == "arm64" else "build", "vendor")
    os.makedirs(cache, exist_ok=True)
    debs = download(cache, arch)
    manifest = os.path.join(out, "manifest.json")
    if os.path.exists(manifest) and all(os.path.getmtime(manifest) > os.path.getmtime(d)
                                        for d in debs.values()):
        with open(manifest) as f:
            if all(name in json.load(f) for name in PYTHON_ROOTS):
                return
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    versions = {}
    roots = {name: os.path.join(out, "python" + v) for name, (_, v, _) in PYTHON_ROOTS.items()}
    for (pkg, suite, root), deb in zip(PACKAGES, (debs[(p, s)] for p, s, _ in PACKAGES)):
        subprocess.run(["dpkg-deb", "-x", deb, roots[root] if root else os.path.join(out, pkg)],
                       check=True)
        versions[f"{pkg} ({suite})" if root else pkg] = subprocess.run(
            ["dpkg-deb", "-f", deb, "Version"], check=True, capture_output=True,
            text=True).stdout.strip()
    for pyroot in roots.values():
        # a merged-/usr root, as Debian's: the loader is /lib64/ld-linux-*.so.2
        for link in ("bin", "sbin", "lib", "lib64"):
            if os.path.isdir(os.path.join(pyroot, "usr", link)):
                os.symlink(os.path.join("usr", link), os.path.join(pyroot, link))
        for d in ("tmp", "proc", "dev"):
            os.makedirs(os.path.join(pyroot, d))
        os.chmod(os.path.join(pyroot, "tmp"), 0o1777)
    # the driver under its soname, alone in a directory: LD_LIBRARY_PATH finds it there
    libdir = os.path.join(out, "driver")
    os.makedirs(libdir)
    shutil.copy(find(os.path.join(out, "libcuda1"), r"libcuda\.so\.\d+\.\d+\.\d+"),
                os.path.join(libdir, "libcuda.so.1"))
    def rel(path):
        return os.path.relpath(path, out)
    data = {
        "libcuda": rel(os.path.join(libdir, "libcuda.so.1")),
        "cudart": {
            "11": rel(find(os.path.join(out, "libcudart11.0"), r"libcudart\.so\.11\.\d+\.\d+")),
            "12": rel(find(os.path.join(out, "libcudart12"), r"libcudart\.so\.12\.\d+\.\d+")),
        },
        **{name: {"root": rel(roots[name]), "python": f"/usr/bin/python{v}"}
           for name, (_, v, _) in PYTHON_ROOTS.items()},
        "versions": versions,
        "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with open(manifest + ".tmp", "w") as f:
        json.dump(data, f, indent=1)
    os.rename(manifest + ".tmp", manifest)
    print(f"vendor: NVIDIA libraries and Python 3.13 and 3.14 roots ({arch}) in {out}: "
          + ", ".join(f"{p} {v}" for p, v in sorted(versions.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
