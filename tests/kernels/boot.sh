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
ir="$work/ir"; mkdir -p "$ir"/{bin,proc,sys,dev,mods}
cp "$(command -v busybox)" "$ir/bin/busybox"
MODS="virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p overlay"
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
mount --move /proc /newroot/proc; mount --move /sys /newroot/sys; mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh -c 'mount -t tmpfs tmpfs /run; sh $script; echo GUEST_DONE rc=\$?; poweroff -f'
INIT
chmod +x "$ir/init"
(cd "$ir" && find . | cpio -o -H newc 2>/dev/null | gzip > "$work/ir.gz")
# MEMTRAIL_TCG=single: one host thread for every vCPU (slower): newer kernels
# patching their own text (a tracepoint's static key) die now and then of an
# int3 oops under multi-threaded TCG
accel="-accel tcg,thread=${MEMTRAIL_TCG:-multi}"
if [ "${MEMTRAIL_KVM:-0}" = 1 ] && [ -w /dev/kvm ]; then accel="-accel kvm"; fi
timeout "${MEMTRAIL_VM_TIMEOUT:-3000}" qemu-system-x86_64 $accel -cpu max -smp "$smp" -machine q35 -m "$mem" \
	-kernel "$vmlinuz" -initrd "$work/ir.gz" \
	-append "console=ttyS0 quiet panic=-1 loglevel=3 ${KARGS:-}" \
	-fsdev local,id=r,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=r,mount_tag=hostroot -nographic -no-reboot 2>&1 |
	sed -u -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g' -e 's/\r$//'
