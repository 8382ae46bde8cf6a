#!/bin/sh
# Smoke test on qemu-system-ppc64: small runs at N = 1, 2, 4 must print a
# MKBENCH-RESULT line with the same checksum and no MKBENCH-ERROR; the three
# fault injections must each be caught.  Skips (exit 0) when QEMU is missing,
# unless REQUIRE_QEMU=1.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
QEMU=${QEMU:-qemu-system-ppc64}
if ! command -v "$QEMU" >/dev/null 2>&1; then
	echo "check-qemu: $QEMU not installed, skipping"
	[ "${REQUIRE_QEMU:-0}" = 1 ] && exit 1
	exit 0
fi
args=${ARGS:-units=5 size=20}
export TIMEOUT=${TIMEOUT:-120}
ref=
for n in 1 2 4; do
	out=$("$here/run-qemu.sh" "$n" $args 2>&1 || true)
	line=$(echo "$out" | grep -m1 'MKBENCH-RESULT' || true)
	if [ -z "$line" ] || echo "$out" | grep -q 'MKBENCH-ERROR'; then
		echo "check-qemu: N=$n failed"; echo "$out" | tail -5; exit 1
	fi
	sum=$(echo "$line" | sed 's/.*checksum=\(0x[0-9a-f]*\).*/\1/')
	echo "check-qemu: N=$n checksum $sum"
	[ -z "$ref" ] && ref=$sum
	[ "$sum" = "$ref" ] || { echo "check-qemu: checksum differs from N=1"; exit 1; }
done
for inj in poison result hpte; do
	out=$("$here/run-qemu.sh" 2 $args inject=$inj 2>&1 || true)
	if echo "$out" | grep -q 'MKBENCH-ERROR'; then
		echo "check-qemu: inject=$inj caught: $(echo "$out" | grep -m1 MKBENCH-ERROR | cut -c1-90)"
	else
		echo "check-qemu: inject=$inj NOT caught"; exit 1
	fi
done
echo "check-qemu: OK"
