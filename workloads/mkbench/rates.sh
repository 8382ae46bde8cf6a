#!/bin/sh
# Run mkbench on QEMU for each N given (default: 1 2 4) and print the event
# rates per busy vCPU and second of guest time next to the Linux reference
# (../../../shared/reference/linux-make-rates.md, POWER8 hash, quiet host).
#   ./rates.sh [N...]              defaults (jobs=N)
#   ARGS="units=4 size=100" ./rates.sh 1 2
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 0 ] && set -- 1 2 4
printf '%-4s %8s %-20s %9s %9s %9s %9s %9s %7s %7s %7s %7s\n' N elapsed_s checksum \
	h_enter faults bulk remove protect procs ticks ipis cedes
for n in "$@"; do
	out=$("$here/run-qemu.sh" "$n" ${ARGS:-} 2>&1 || true)
	echo "$out" | grep -q MKBENCH-RESULT || { echo "N=$n: no result"; echo "$out" | tail -5; continue; }
	echo "$out" | grep -E 'MKBENCH-(STATS|RESULT)' | tr ' ' '\n' | grep = | awk -F= -v n="$n" '
		{ v[$1] = $2 }
		END {
			el = v["elapsed_tb"] / v["tb_hz"]; d = el * n
			printf "%-4d %8.3f %-20s %9.0f %9.0f %9.0f %9.1f %9.2f %7.2f %7.0f %7.2f %7.2f\n", n, el,
				v["checksum"], v["h_enter"] / d, v["faults"] / d, v["h_bulk_remove"] / d,
				v["h_remove"] / d, v["h_protect"] / d, v["procs"] / d, v["ticks"] / d,
				v["ipis"] / d, v["h_cede"] / d
		}'
done
echo "Linux make -j N, POWER8 hash (per busy vCPU and second): h_enter 3480-3724," \
	"hash faults 1240-1329, bulk 863-923, remove 67-71, protect 1, procs 1.0-1.1," \
	"ticks 246-250, IPIs ~5 at smp2, cedes ~4 at smp2"
