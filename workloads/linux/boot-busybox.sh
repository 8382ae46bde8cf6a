#!/usr/bin/env bash
# Boots Debian's ppc64el kernel on ppc64emu with a busybox initramfs whose /init prints the CPU
# count and the SHA-256 of its own busybox, then powers off; checks the hash against the host's.
# A smoke test of the full system (MMU, interrupts, XICS, SMP start, console), not part of
# `cargo test`: it downloads the kernel and busybox (fetch-kernel.sh, fetch-busybox.sh) and
# takes a few minutes on the interpreter.
#   workloads/linux/boot-busybox.sh [SMP] [EMULATOR]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
smp=${1:-2}
emu=${2:-$top/target/release/ppc64emu}
[ -x "$emu" ] || { echo "boot-busybox: build the emulator first (cargo build --release -p ppc64emu)" >&2; exit 1; }
command -v cpio >/dev/null || { echo "boot-busybox: needs cpio" >&2; exit 1; }
kernel=$("$top/workloads/linux/fetch-kernel.sh")
busybox=$top/target/guest-cache/busybox
[ -x "$busybox" ] || "$top/emulator/tests/programs/fetch-busybox.sh" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/bin" "$work/root/proc"
cp "$busybox" "$work/root/bin/busybox"
cat > "$work/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
echo "boot-busybox: userland up, $(nproc) cpus"
echo "boot-busybox: sha256 $(sha256sum /bin/busybox)"
poweroff -f
INIT
chmod +x "$work/root/init"
(cd "$work/root" && find . | cpio -o -H newc --quiet > "$work/initrd.cpio")
"$emu" -smp "$smp" -m 1G -kernel "$kernel" -initrd "$work/initrd.cpio" -append "console=hvc0 quiet" \
    --accel interp --timeout 900 | tee "$work/console.log"
want=$(sha256sum "$busybox" | cut -d' ' -f1)
grep -q "boot-busybox: userland up, $smp cpus" "$work/console.log" || { echo "boot-busybox: FAILED (no userland)"; exit 1; }
grep -q "boot-busybox: sha256 $want" "$work/console.log" || { echo "boot-busybox: FAILED (hash differs)"; exit 1; }
echo "boot-busybox: ok ($smp vCPUs, hash matches the host's)"
