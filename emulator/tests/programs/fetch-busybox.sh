#!/bin/bash
# Fetches Debian's ppc64el busybox-static into target/guest-cache/busybox (never committed),
# for the busybox applet tests of tests/user_programs.rs. Uses mmdebstrap --variant=extract,
# which leaves the host's apt configuration alone.
#   emulator/tests/programs/fetch-busybox.sh [SUITE]      (default: bookworm)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
DEST="$ROOT/target/guest-cache"
SUITE=${1:-bookworm}
MIRROR=$({ sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null
           awk '/^deb /{print $2}' /etc/apt/sources.list 2>/dev/null; } | tr ' ' '\n' | grep -v -- '-security' | head -1 || true)
[ -n "$MIRROR" ] || { echo "fetch-busybox: no Debian archive configured for apt" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mmdebstrap --quiet --mode=auto --arch=ppc64el --variant=extract --include=busybox-static \
  --dpkgopt='path-exclude=/usr/share/*' "$SUITE" "$WORK/root" "$MIRROR"
mkdir -p "$DEST"
cp "$WORK/root/bin/busybox" "$DEST/busybox"
echo "$DEST/busybox"
