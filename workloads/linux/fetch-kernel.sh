#!/usr/bin/env bash
# Fetches Debian's ppc64el kernel (the linux-image-powerpc64le package of Debian bookworm, the
# suite of the Linux workloads' lock; SUITE=… for another codename) into target/guest-cache/linux/
# and prints the path of its vmlinux. Nothing is committed: the kernel is Debian's binary and is
# downloaded at set-up time. This one is resolved, not locked: the Linux workloads' locked kernel
# lies beside their image after `lockscale guest build linux-make --quick`
# (target/guest-cache/linux-make/u2-s2/vmlinux-*).
# Needs: mmdebstrap (Debian package). Uses the Debian archive this machine's apt uses.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
dest=${DEST:-$top/target/guest-cache/linux}
suite=${SUITE:-bookworm}
mirror=$({ sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null; awk '/^deb /{print $2}' /etc/apt/sources.list 2>/dev/null; } | tr ' ' '\n' | grep -v -- "-security" | head -1 || true)
[ -n "$mirror" ] || { echo "fetch-kernel: no Debian archive configured for apt" >&2; exit 1; }
if ! ls "$dest"/boot/vmlinux-* >/dev/null 2>&1; then
    rm -rf "$dest.tmp"; mkdir -p "$(dirname "$dest")"
    # The metapackage pulls the versioned image package; extract both without running anything.
    mmdebstrap --mode=root --arch=ppc64el --variant=extract \
        --include=linux-image-powerpc64le \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/lib/modules/*' \
        "$suite" "$dest.tmp" "$mirror" >&2
    rm -rf "$dest" && mv "$dest.tmp" "$dest"
fi
ls "$dest"/boot/vmlinux-* | head -1
