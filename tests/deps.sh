#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Install the Debian packages that memtrail's build and tests need, when missing.
#   deps.sh          the build and the tests
#   deps.sh image    make image: mmdebstrap and podman
#   deps.sh arm64    make arm64: Debian's cross gcc and the libraries for arm64
#                    (multiarch; apt may upgrade their amd64 twins to the same version)
set -e

# libclang-rt-dev: clang's runtime, with libFuzzer (libclang_rt.fuzzer-*.a) for make fuzz
# python3-torch: the PyTorch example and its test (Debian's 1.13, CPU only)
# python3-dbg: the interpreter's debug file (its stripped functions named in deep stacks)
# debuginfod, libdebuginfod1: a local debuginfod server, and libdw's client of it
# libcurl4-openssl-dev, libyaml-dev: watch --kube-events (HTTPS, kubeconfig files);
# openssl: the tests' certificate authority for their API server; firefox-esr: the
# HTML report drawn by a second browser
PKGS="make gcc g++ clang llvm libbpf-dev bpftool libelf-dev libdw-dev libiberty-dev zlib1g-dev libjansson-dev libyajl-dev
libprotobuf-c-dev protobuf-c-compiler libcmocka-dev pkg-config python3 util-linux mount procps gdb
golang-go libjemalloc2 libtcmalloc-minimal4 binutils tmux chromium libmicrohttpd-dev prometheus
python3-yaml qemu-system-x86 busybox-static cpio xz-utils zstd libclang-rt-dev python3-torch
python3-dbg debuginfod libdebuginfod1 libcurl4-openssl-dev libyaml-dev openssl firefox-esr"
if [ "${1:-}" = image ]; then
	# make image: a root of Debian's packages (mmdebstrap), imported by podman;
	# runc: crun refuses a host whose cgroups are v1 and v2 at once
	PKGS="mmdebstrap podman runc"
fi
if [ "${1:-}" = arm64 ]; then
	# qemu-user-static: the arm64 binary's smoke run (tests/kernels/arm64.py);
	# qemu-system-arm: the kernel matrix's arm64 rows; g++: a C++ workload
	PKGS="gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user-static qemu-system-arm libbpf-dev:arm64 libdw-dev:arm64 libelf-dev:arm64
zlib1g-dev:arm64 libjansson-dev:arm64 libyajl-dev:arm64 libprotobuf-c-dev:arm64 libmicrohttpd-dev:arm64
libiberty-dev:arm64 libcurl4-openssl-dev:arm64 libyaml-dev:arm64"
	# on an arm64 machine the build is native (make deps has its libraries; gcc
	# answers to aarch64-linux-gnu-gcc): only the emulators
	if command -v dpkg >/dev/null 2>&1 && [ "$(dpkg --print-architecture)" = arm64 ]; then
		PKGS="qemu-user-static qemu-system-arm"
	fi
fi

if [ ! -r /etc/debian_version ] || ! command -v dpkg-query >/dev/null 2>&1; then
	echo "memtrail: 'make deps' knows Debian and its derivatives only; install by hand:" \
	     "make, gcc, g++ (a test workload), clang, llvm, libbpf >= 1.1 headers, bpftool, libelf, libdw, libiberty (the demangler), zlib," \
	     "jansson, yajl, protobuf-c (and protoc-c), libcurl, libyaml, cmocka, python3; for the tests: go (pprof)," \
	     "jemalloc, tcmalloc, tmux, chromium, PyTorch for /usr/bin/python3 and its debug symbols, debuginfod; for the kernel matrix: qemu-system-x86, busybox," \
	     "cpio, xz, zstd; for make fuzz: clang's libFuzzer (compiler-rt)" >&2
	exit 1
fi

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "memtrail: installing$missing needs root" >&2; exit 1; }
	SUDO=sudo
fi
if [ "${1:-}" = arm64 ] && [ "$(dpkg --print-architecture)" != arm64 ] &&
	! dpkg --print-foreign-architectures | grep -qx arm64; then
	$SUDO dpkg --add-architecture arm64
fi
echo "memtrail: installing$missing (waiting up to 10 minutes for another package manager's lock)"
# another apt run (unattended upgrades on a fresh node) holds the lock: wait for it
LOCK="-o DPkg::Lock::Timeout=600"
$SUDO apt-get $LOCK update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get $LOCK install -y -qq --no-install-recommends $missing
