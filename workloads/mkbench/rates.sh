#!/bin/sh
# Run mkbench on QEMU for each N given (default: 1 2 4) and print its event
# rates next to the Linux reference (the "Linux" rows of README.md, Calibration:
# make -j N on a POWER8 hash guest, QEMU 7.2, quiet 2-core host).
#
# Two rows per N:
#   guest  per vCPU and second of guest time (the reference's unit; under
#          TCG guest time is host time, so a busy host lowers these)
#   cpu    per second of CPU time used by the QEMU process (all threads):
#          what the guest rates are on a host with a free core per busy vCPU
#
#   ./rates.sh [N...]              defaults (jobs=N)
#   ARGS="units=4 size=100" ./rates.sh 1 2
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 0 ] && set -- 1 2 4
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf '%-3s %-5s %7s %-18s %7s %7s %6s %6s %7s %5s %5s %5s %5s\n' N per seconds checksum \
	h_enter faults bulk remove protect procs ticks ipis cedes
for n in "$@"; do
	out=$(/usr/bin/time -f 'CPUTIME %U %S' -o "$tmp" "$here/run-qemu.sh" "$n" ${ARGS:-} 2>&1 || true)
	echo "$out" | grep -q MKBENCH-RESULT || { echo "N=$n: no result"; echo "$out" | tail -5; continue; }
	{ echo "$out" | grep -E 'MKBENCH-(STATS|RESULT)' | tr ' ' '\n' | grep =; \
	  awk '/CPUTIME/ { print "cputime=" $2 + $3 }' "$tmp"; } | awk -F= -v n="$n" '
		{ v[$1] = $2 }
		function row(tag, secs, d) {
			printf "%-3d %-5s %7.2f %-18s %7.0f %7.0f %6.0f %6.1f %7.2f %5.2f %5.0f %5.2f %5.2f\n",
				n, tag, secs, v["checksum"], v["h_enter"] / d, v["faults"] / d,
				v["h_bulk_remove"] / d, v["h_remove"] / d, v["h_protect"] / d,
				v["procs"] / d, v["ticks"] / d, v["ipis"] / d, v["h_cede"] / d
		}
		END {
			el = v["elapsed_tb"] / v["tb_hz"]
			row("guest", el, el * n)
			row("cpu", v["cputime"], v["cputime"])
		}'
done
echo "Linux reference per busy vCPU and second: h_enter 3480-3724, hash faults 1240-1329," \
	"bulk 863-923, remove 67-71, protect 1, procs 1.0-1.1, ticks 246-250, IPIs ~5 and cedes ~4 at smp2"
