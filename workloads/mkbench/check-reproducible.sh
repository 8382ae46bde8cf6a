#!/bin/sh
# Rebuild mkbench.elf and boot-rom.bin from source, in a copy of this folder
# at another path, and check that the results equal the committed files byte
# for byte.  Needs Debian's gcc-powerpc64le-linux-gnu; exits 0 with a notice
# (and does nothing) when the cross compiler is not installed, unless
# REQUIRE_CROSS=1 is set.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
CROSS=${CROSS:-powerpc64le-linux-gnu-}
if ! command -v "${CROSS}gcc" >/dev/null 2>&1; then
	echo "check-reproducible: ${CROSS}gcc not installed, skipping"
	[ "${REQUIRE_CROSS:-0}" = 1 ] && exit 1
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/elsewhere/mkbench"
cp -R "$here/src" "$here/build.sh" "$tmp/elsewhere/mkbench/"
(cd "$tmp/elsewhere/mkbench" && ./build.sh "$tmp/out" >/dev/null 2>&1) || {
	echo "check-reproducible: build failed"; exit 1; }
status=0
for f in mkbench.elf boot-rom.bin; do
	if cmp -s "$here/$f" "$tmp/out/$f"; then
		echo "check-reproducible: $f OK ($(wc -c < "$here/$f") bytes)"
	else
		echo "check-reproducible: $f differs from a rebuild of the sources"
		status=1
	fi
done
exit $status
