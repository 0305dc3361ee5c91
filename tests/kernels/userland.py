#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""An arm64 userland for the kernel matrix's arm64 guests, made from Debian's
own arm64 packages: apt (a private state, this machine's sources, an empty
dpkg status) resolves PACKAGES and their dependencies for arm64 and downloads
them; each package's files are unpacked into one folder. No maintainer
script runs (arm64 scripts here would need binfmt): the few files and links
the tests need from them are made here. The same file and the same archive
make the same folder; it is cached under the kernel cache
(MEMTRAIL_KERNEL_CACHE, keyed by this file: the list and how it is made)
and made again, beside the old one (a guest may be running on that), when
this file changes.

    userland.py [ARCH]       prints the folder (arm64 by default)

The guest (boot.sh with MEMTRAIL_USERLAND) boots with that folder as its root
and this machine's checkout mounted at the same path, its build outputs
those of 'make arm64' (build-arm64).
"""

import hashlib
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from archive import apt_opts  # noqa: E402

CACHE = os.environ.get("MEMTRAIL_KERNEL_CACHE", "/var/cache/memtrail/kernels")
TRIPLET = {"arm64": "aarch64-linux-gnu", "amd64": "x86_64-linux-gnu"}

# what the guest runs: a shell and the tools guest.sh and the tests call, the
# Python the tests are written in, and the libraries memtrail links; as on
# the x86 rows (make deps), python3-dbg and libc6-dbg: the debug files that
# name the functions their stripped libraries leave out (clone3, in arm64's libc)
PACKAGES = """busybox-static dash bash coreutils util-linux mount procps grep sed findutils
gawk diffutils login passwd base-passwd base-files libc-bin python3 python3-minimal
libbpf1 libdw1 libelf1 zlib1g libjansson4 libyajl2 libprotobuf-c1 libmicrohttpd12 libcurl4 libyaml-0-2
libstdc++6 libgcc-s1 iproute2 kmod bpftool binutils dpkg gdb python3-dbg libc6-dbg
libpam-modules libpam-runtime python3-numpy""".split()


PAM_COMMON = {
    "common-auth": "auth [success=1 default=ignore] pam_unix.so nullok\n"
                   "auth requisite pam_deny.so\nauth required pam_permit.so\n",
    "common-account": "account [success=1 new_authtok_reqd=done default=ignore] pam_unix.so\n"
                      "account requisite pam_deny.so\naccount required pam_permit.so\n",
    "common-password": "password [success=1 default=ignore] pam_unix.so obscure yescrypt\n"
                       "password requisite pam_deny.so\npassword required pam_permit.so\n",
    "common-session": "session [default=1] pam_permit.so\nsession requisite pam_deny.so\n"
                      "session required pam_permit.so\nsession required pam_unix.so\n",
}
PAM_COMMON["common-session-noninteractive"] = PAM_COMMON["common-session"]


def sources(state):
    """This machine's apt sources, copied into STATE (deb822 files and the list)."""
    parts = os.path.join(state, "sources.list.d")
    os.makedirs(parts, exist_ok=True)
    for name in os.listdir(parts):
        os.unlink(os.path.join(parts, name))
    d = "/etc/apt/sources.list.d"
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if name.endswith((".list", ".sources")):
            shutil.copy(os.path.join(d, name), parts)
    lst = os.path.join(state, "sources.list")
    if os.path.exists("/etc/apt/sources.list"):
        shutil.copy("/etc/apt/sources.list", lst)
    else:
        open(lst, "w").close()


def apt(state, arch, *args, cwd=None):
    opts = apt_opts(state)
    opts[opts.index("Dir::Etc::sourceparts=-")] = f"Dir::Etc::sourceparts={state}/sources.list.d"
    status = os.path.join(state, "status")
    if not os.path.exists(status):
        open(status, "w").close()
    cmd = ["apt-get", *opts, "-o", f"Dir::State::status={status}",
           "-o", f"APT::Architecture={arch}", "-o", f"APT::Architectures::={arch}",
           "-o", "APT::Install-Recommends=false", "-o", "Debug::NoLocking=true", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if p.returncode != 0:
        raise SystemExit(f"userland: apt-get {' '.join(args[:2])} failed: {p.stderr.strip()[-400:]}")
    return p.stdout


def build(arch="arm64"):
    """The folder of ARCH's userland, made (once) from the archive."""
    with open(os.path.abspath(__file__), "rb") as f:  # the list and how it is made
        key = hashlib.sha256(arch.encode() + f.read()).hexdigest()[:12]
    root = os.path.join(CACHE, f"userland-{arch}-{key}")
    if os.path.exists(os.path.join(root, ".complete")):
        return root
    state = os.path.join(CACHE, f"apt-userland-{arch}")
    for sub in ("lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(state, sub), exist_ok=True)
    sources(state)
    apt(state, arch, "update")
    debs = os.path.join(state, "cache", "archives")
    for name in os.listdir(debs):  # only what this list resolves to is unpacked
        if name.endswith(".deb"):
            os.unlink(os.path.join(debs, name))
    apt(state, arch, "install", "--download-only", "-y", *PACKAGES)
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "usr"))
    # merged /usr, as Debian 12 installs it: bookworm's packages still put
    # files in /bin and /lib, which land in /usr through these links
    for d in ("bin", "sbin", "lib"):
        os.makedirs(os.path.join(tmp, "usr", d), exist_ok=True)
        os.symlink(f"usr/{d}", os.path.join(tmp, d))
    for name in sorted(os.listdir(debs)):
        if not name.endswith(f"_{arch}.deb") and not name.endswith("_all.deb"):
            continue
        deb = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", os.path.join(debs, name)],
                               stdout=subprocess.PIPE)
        tar = subprocess.run(["tar", "-x", "--keep-directory-symlink", "-C", tmp],
                             stdin=deb.stdout, capture_output=True, text=True)
        deb.stdout.close()
        if deb.wait() != 0 or tar.returncode != 0:
            raise SystemExit(f"userland: cannot unpack {name}: {tar.stderr.strip()[-300:]}")
    # what maintainer scripts would have made: accounts, /bin/sh, and the
    # alternatives' links (awk, numpy's BLAS and LAPACK)
    for f in ("passwd", "group"):
        shutil.copy(os.path.join(tmp, "usr/share/base-passwd", f + ".master"),
                    os.path.join(tmp, "etc", f))
    # PAM's common files (pam-auth-update writes them; runuser and su include them)
    for name, text in PAM_COMMON.items():
        with open(os.path.join(tmp, "etc", "pam.d", name), "w") as f:
            f.write(text)
    lib = f"usr/lib/{TRIPLET[arch]}"
    links = {"bin/sh": "dash", "usr/bin/awk": "gawk",
             f"{lib}/libblas.so.3": "blas/libblas.so.3",
             f"{lib}/liblapack.so.3": "lapack/liblapack.so.3"}
    for path, target in links.items():
        full = os.path.join(tmp, path)
        if not os.path.lexists(full):
            os.symlink(target, full)
    for d in ("proc", "sys", "dev", "run", "tmp", "root", "mnt", "var/tmp"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    os.chmod(os.path.join(tmp, "tmp"), 0o1777)
    open(os.path.join(tmp, ".complete"), "w").close()
    shutil.rmtree(root, ignore_errors=True)
    os.rename(tmp, root)
    return root


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else "arm64"))
