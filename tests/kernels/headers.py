#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""The BPF objects build against other kernels' headers: vmlinux.h made from
the BTF of Debian's 5.10 (x86) and 6.1 (arm64) kernels, taken out of their
kernel images, and both objects and skeletons (the compat one's layout check
included) built with it, for x86 and arm64. memtrail is built against the
build machine's kernel; a build machine with an older kernel, or an arm64
one, must still build it (CO-RE makes the objects run anywhere: types the
running kernel has are read from its BTF, not from the headers).

    headers.py
    headers.py --btf arm64 FILE   (that kernel's BTF, for make arm64)

Prints "headers: N passed, M failed". Packages are cached with the kernel
matrix's (MEMTRAIL_KERNEL_CACHE, /var/cache/memtrail/kernels).
"""

import lzma
import os
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.dirname(HERE))
from archive import apt_opts, archive_uri  # noqa: E402
sys.path.insert(0, HERE)
from run import newest  # noqa: E402

CACHE = os.environ.get("MEMTRAIL_KERNEL_CACHE", "/var/cache/memtrail/kernels")

# (name, suite, Debian architecture, package, BPF target architecture)
BUILDS = [
    ("5.10 x86", "bullseye", "amd64", "linux-image-5.10.0-", "-amd64-unsigned", "x86"),
    ("6.1 arm64", "bookworm", "arm64", "linux-image-6.1.0-", "-arm64-unsigned", "arm64"),
]

BTF_MAGIC = b"\x9f\xeb\x01\x00\x18\x00\x00\x00"  # magic, version 1, flags 0, header 24 bytes


def payloads(image):
    """IMAGE itself, then each compressed stream found in it (a bzImage's kernel)."""
    yield image
    for magic, unpack in ((b"\x1f\x8b\x08", lambda b: zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(b)),
                          (b"\xfd7zXZ\x00", lambda b: lzma.LZMADecompressor().decompress(b)),
                          (b"\x28\xb5\x2f\xfd", _unzstd)):
        at = image.find(magic)
        while at >= 0:
            try:
                out = unpack(image[at:])
                if out and len(out) > 1 << 20:
                    yield out
            except (zlib.error, lzma.LZMAError):
                pass
            at = image.find(magic, at + 1)


def _unzstd(b):
    return subprocess.run(["zstd", "-qdc"], input=b, capture_output=True, check=False).stdout


def btf_of(image):
    """The kernel's BTF (the .BTF section's bytes) found in a kernel image, or None."""
    for data in payloads(image):
        best = None
        at = data.find(BTF_MAGIC)
        while at >= 0:
            hdr_len, _, _, str_off, str_len = struct.unpack_from("<IIIII", data, at + 4)
            size = hdr_len + str_off + str_len
            if at + size <= len(data) and (not best or size > best[1]):
                best = (at, size)
            at = data.find(BTF_MAGIC, at + 1)
        if best and best[1] > 1 << 20:
            return data[best[0]:best[0] + best[1]]
    return None


def fetch(suite, arch, prefix, suffix):
    state = os.path.join(CACHE, f"apt-{arch}")
    os.makedirs(os.path.join(state, "lists", "partial"), exist_ok=True)
    os.makedirs(os.path.join(state, "cache", "archives", "partial"), exist_ok=True)
    uri = archive_uri()
    if not uri:
        raise SystemExit("headers: no Debian archive found in this machine's apt sources")
    with open(os.path.join(state, "sources.list"), "w") as f:
        f.write(f"deb [arch={arch} signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                f"{uri} {suite} main\n")
    arch_opt = ["-o", f"APT::Architectures={arch}"]
    opts = [*apt_opts(state), *arch_opt]
    have = [f for f in os.listdir(CACHE) if f.startswith(prefix) and f.endswith(f"_{arch}.deb")
            and suffix in f]
    if have:
        return os.path.join(CACHE, sorted(have)[-1])
    p = subprocess.run(["apt-get", *opts, "update"], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"headers: apt-get update failed: {p.stderr.strip()[-300:]}")
    pkg = newest(state, prefix, suffix, arch_opt)
    if not pkg:
        raise SystemExit(f"headers: no package {prefix}*{suffix} for {arch}")
    p = subprocess.run(["apt-get", *opts, "download", f"{pkg}:{arch}"], cwd=CACHE,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"headers: cannot download {pkg}: {p.stderr.strip()[-300:]}")
    return os.path.join(CACHE, next(f for f in sorted(os.listdir(CACHE))
                                    if f.startswith(pkg + "_")))


def deb_btf(deb, work):
    """The BTF of DEB's kernel image (unpacked under WORK) and None, or None and why not."""
    k = os.path.join(work, "k")
    subprocess.run(["dpkg-deb", "-x", deb, k], check=True)
    images = [os.path.join(d, f) for d, _, fs in os.walk(k) for f in fs if f.startswith("vmlinuz")]
    if not images:
        return None, "no kernel image in the package"
    with open(images[0], "rb") as f:
        btf = btf_of(f.read())
    if not btf:
        return None, f"no BTF found in {os.path.basename(images[0])}"
    return btf, None


def build(name, deb, bpf_arch, work):
    """Build both objects and skeletons for BPF_ARCH with DEB's BTF; None or why not."""
    btf, why = deb_btf(deb, work)
    if why:
        return why
    path = os.path.join(work, "vmlinux.btf")
    with open(path, "wb") as f:
        f.write(btf)
    out = os.path.join(work, "out")
    p = subprocess.run(["make", "--no-print-directory", f"OUT={out}", f"ARCH={bpf_arch}",
                        f"VMLINUX_BTF={path}", f"{out}/memtrail.skel.h",
                        f"{out}/memtrail_compat.skel.h"],
                       cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        return (p.stdout + p.stderr).strip()[-1500:]
    return None


def write_btf(bpf_arch, path):
    """Write the BTF of BUILDS' kernel for BPF_ARCH to PATH: a cross build's headers."""
    os.makedirs(CACHE, exist_ok=True)
    for name, suite, arch, prefix, suffix, b in BUILDS:
        if b == bpf_arch:
            with tempfile.TemporaryDirectory(prefix="memtrail-headers-") as work:
                btf, why = deb_btf(fetch(suite, arch, prefix, suffix), work)
            if why:
                raise SystemExit(f"headers: {name}: {why}")
            with open(path + ".tmp", "wb") as f:
                f.write(btf)
            os.replace(path + ".tmp", path)
            return 0
    raise SystemExit(f"headers: no kernel for {bpf_arch} (one of {', '.join(b[-1] for b in BUILDS)})")


def main(argv):
    if argv[:1] == ["--btf"]:
        if len(argv) != 3:
            raise SystemExit("usage: headers.py --btf ARCH FILE")
        return write_btf(argv[1], argv[2])
    passed = failed = 0
    os.makedirs(CACHE, exist_ok=True)
    for name, suite, arch, prefix, suffix, bpf_arch in BUILDS:
        with tempfile.TemporaryDirectory(prefix="memtrail-headers-") as work:
            deb = fetch(suite, arch, prefix, suffix)
            why = build(name, deb, bpf_arch, work)
        if why:
            failed += 1
            print(f"FAIL {name} headers ({os.path.basename(deb)}): {why}", flush=True)
        else:
            passed += 1
            print(f"ok   {name} headers ({os.path.basename(deb)}): both objects and skeletons built",
                  flush=True)
    print(f"headers: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
