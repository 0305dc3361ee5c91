#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Copy ./memtrail and every library it loads (its C library and loader too)
# into build/gpu, for a machine that has none of them (the GPU machine):
# there it runs as build/gpu/ld-linux-x86-64.so.2 --library-path build/gpu
# build/gpu/memtrail, and what it starts uses that machine's own libraries.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf build/gpu
mkdir -p build/gpu
cp memtrail build/gpu/
ldd ./memtrail | awk '/=> \//{print $3} /^\t\/lib/{print $1}' | while read -r lib; do
	cp -L "$lib" build/gpu/
done
du -sh build/gpu
