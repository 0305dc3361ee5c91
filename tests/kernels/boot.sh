#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# boot.sh KERNEL_DEB GUEST_SCRIPT [SMP] [MEM_MB]
#
# Boot a Debian kernel package under QEMU with this machine's / as the
# guest's root (read-only 9p under a tmpfs overlay: the guest sees every
# file here, a checkout under /tmp too, and writes into memory), so the
# guest runs the memtrail and workloads built here, run GUEST_SCRIPT and
# power off. Prints the console.
# TCG (software); MEMTRAIL_KVM=1 tries KVM, which hangs nested on some VMs.
# MEMTRAIL_ARCH=arm64 boots an arm64 kernel under qemu-system-aarch64 (virt,
# -cpu max) with MEMTRAIL_USERLAND (tests/kernels/userland.py) as its root
# and the checkout MEMTRAIL_CHECKOUT at its own path, the outputs of make
# arm64 (build-arm64) in place of build/ and ./memtrail.
# From 7.x Debian splits a kernel into linux-binary-* and linux-modules-*:
# give the binary package; the modules package is taken from its folder.
set -euo pipefail
deb=$(readlink -f "$1"); script=$(readlink -f "$2"); smp=${3:-2}; mem=${4:-2048}
work=$(mktemp -d /tmp/memtrail-vm-XXXXXX); trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work/k"
case $(basename "$deb") in
linux-binary-*)
	mods_deb=$(ls "$(dirname "$deb")"/linux-modules-"$(basename "$deb" | sed 's/^linux-binary-//; s/_.*//')"_*.deb | head -1)
	dpkg-deb -x "$mods_deb" "$work/k" ;;
esac
mods="$work/k/lib/modules"; [ -d "$mods" ] || mods="$work/k/usr/lib/modules"
kver=$(ls "$mods")
vmlinuz="$work/k/boot/vmlinuz-$kver"; [ -f "$vmlinuz" ] || vmlinuz="$mods/$kver/vmlinuz"
arch=${MEMTRAIL_ARCH:-x86}
ir="$work/ir"; mkdir -p "$ir"/{bin,proc,sys,dev,mods}
if [ "$arch" = arm64 ]; then
	userland=$(readlink -f "${MEMTRAIL_USERLAND:?MEMTRAIL_USERLAND: the arm64 userland}")
	checkout=$(readlink -f "${MEMTRAIL_CHECKOUT:?MEMTRAIL_CHECKOUT: the checkout}")
	cp "$userland/bin/busybox" "$ir/bin/busybox"
	share=$userland
	# the checkout at its own path, build/ and ./memtrail those of make arm64
	setup="mkdir -p /newroot/mnt/host /upper/cu /upper/cw /upper/bu /upper/bw
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 host /newroot/mnt/host || { echo 'GUEST_DONE rc=98 (9p mount of the host failed)'; poweroff -f; }
mkdir -p /newroot$checkout
mount -t overlay overlay -o lowerdir=/newroot/mnt/host$checkout,upperdir=/upper/cu,workdir=/upper/cw /newroot$checkout || { echo 'GUEST_DONE rc=98 (checkout overlay failed)'; poweroff -f; }
mount -t overlay overlay -o lowerdir=/newroot/mnt/host$checkout/build-arm64,upperdir=/upper/bu,workdir=/upper/bw /newroot$checkout/build || { echo 'GUEST_DONE rc=98 (build overlay failed)'; poweroff -f; }
mount --bind /newroot$checkout/build/memtrail /newroot$checkout/memtrail"
else
	cp "$(command -v busybox)" "$ir/bin/busybox"
	share=/
	setup=:
fi
cp "$script" "$ir/guest.sh"
MODS="virtio_mmio virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p overlay"
for m in $MODS; do
	f=$(find "$mods/$kver" \( -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" \) | head -1)
	[ -n "$f" ] || continue
	case "$f" in
	*.xz) xz -dc "$f" > "$ir/mods/$m.ko" ;;
	*.zst) zstd -qdc "$f" > "$ir/mods/$m.ko" ;;
	*) cp "$f" "$ir/mods/$m.ko" ;;
	esac
done
cat > "$ir/init" <<INIT
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $MODS; do
	[ -f /mods/\$m.ko ] && insmod /mods/\$m.ko 2>/dev/null
done
mkdir -p /lower /upper /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /lower || { echo "GUEST_DONE rc=98 (9p mount failed)"; poweroff -f; }
mount -t tmpfs tmpfs /upper; mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot || { echo "GUEST_DONE rc=98 (overlay failed)"; poweroff -f; }
# the root's layers in sight, as a node's container layers are: memtrail opens
# the file of a process gone before its maps were read where BPF says it is
mkdir -p /newroot/mnt/guest-lower /newroot/mnt/guest-upper
mount --bind /lower /newroot/mnt/guest-lower; mount --bind /upper /newroot/mnt/guest-upper
$setup
cp /guest.sh /newroot/guest.sh
mount --move /proc /newroot/proc; mount --move /sys /newroot/sys; mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh -c 'mount -t tmpfs tmpfs /run; sh /guest.sh; echo GUEST_DONE rc=\$?; poweroff -f 2>/dev/null || busybox poweroff -f'
INIT
chmod +x "$ir/init"
(cd "$ir" && find . | cpio -o -H newc 2>/dev/null | gzip > "$work/ir.gz")
# MEMTRAIL_TCG=single: one host thread for every vCPU (slower): newer kernels
# patching their own text (a tracepoint's static key) die now and then of an
# int3 oops under multi-threaded TCG
accel="-accel tcg,thread=${MEMTRAIL_TCG:-multi}"
if [ "${MEMTRAIL_KVM:-0}" = 1 ] && [ -w /dev/kvm ] && [ "$arch" = x86 ]; then accel="-accel kvm"; fi
if [ "$arch" = arm64 ]; then
	# pauth-impdef: QEMU's own pointer-authentication hash, far faster under TCG
	qemu="qemu-system-aarch64 -machine virt -cpu max,pauth-impdef=on" console=ttyAMA0
	host="-fsdev local,id=h,path=/,security_model=none,readonly=on,multidevs=remap
		-device virtio-9p-pci,fsdev=h,mount_tag=host"
else
	qemu="qemu-system-x86_64 -machine q35 -cpu max" console=ttyS0 host=
fi
# shellcheck disable=SC2086
timeout "${MEMTRAIL_VM_TIMEOUT:-3000}" $qemu $accel -smp "$smp" -m "$mem" \
	-kernel "$vmlinuz" -initrd "$work/ir.gz" \
	-append "console=$console quiet panic=-1 loglevel=3 ${KARGS:-}" \
	-fsdev local,id=r,path="$share",security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=r,mount_tag=hostroot $host -nographic -no-reboot 2>&1 |
	sed -u -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g' -e 's/\r$//'
