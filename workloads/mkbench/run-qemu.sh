#!/bin/sh
# Run mkbench on qemu-system-ppc64 (pseries, POWER8, MTTCG) with our boot ROM.
#   ./run-qemu.sh N [bootargs...]     e.g. ./run-qemu.sh 2 units=4 size=5
# Environment: QEMU (default qemu-system-ppc64), MEM (default 1G),
# TIMEOUT (seconds, default 300), NICE (run QEMU at this nice level, e.g.
# -10 to measure on a busy shared host).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
n=${1:-1}
[ $# -gt 0 ] && shift
exec nice -n "${NICE:-0}" timeout "${TIMEOUT:-300}" "${QEMU:-qemu-system-ppc64}" -M pseries -cpu power8 \
	-accel tcg,thread=multi -smp "$n" -m "${MEM:-1G}" -nographic -no-reboot \
	-bios "$here/boot-rom.bin" -kernel "$here/mkbench.elf" -append "$*"
