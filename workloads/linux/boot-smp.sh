#!/usr/bin/env bash
# Boots Debian's kernel to a busybox /init and powers off, at each N of the list, under each
# locking strategy, and checks that /init saw N CPUs. Prints one line per run: strategy, N, the
# guest's uptime at /init (its own clock) and the host wall time of the whole run.
# Not part of `cargo test` (it needs the Debian packages and minutes per run); run it after
#   cargo run -p lockscale -- build                    (the three strategies' binaries)
#   cargo run -p lockscale -- guest build linux-make --quick   (unpacks the packages)
# Usage: workloads/linux/boot-smp.sh [N …]        (default: 4 8 16 28)
#   VARIANTS="baseline per-cpu-lock cputlb-no-bql" MEM=2G TIMEOUT=900 EMU_ARGS=… to change.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
root=$top/target/guest-cache/debian-ppc64el/rootfs
ns=${*:-4 8 16 28}
variants=${VARIANTS:-baseline per-cpu-lock cputlb-no-bql}
kernel=$(ls "$root"/boot/vmlinux-* 2>/dev/null | head -1 || true)
[ -n "$kernel" ] || { echo "boot-smp: no kernel in $root: run 'lockscale guest build linux-make --quick' first" >&2; exit 2; }
command -v cpio >/dev/null || { echo "boot-smp: needs cpio (apt-get install cpio)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/bin" "$work/root/proc" "$work/root/dev"
cp "$root/usr/bin/busybox" "$work/root/bin/busybox"
cat > "$work/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
echo "boot-smp: /init cpus=$(/bin/busybox grep -c ^processor /proc/cpuinfo) uptime=$(/bin/busybox cut -d' ' -f1 /proc/uptime)"
/bin/busybox poweroff -f
INIT
chmod +x "$work/root/init"
(cd "$work/root" && find . | cpio -o -H newc -R 0:0 --quiet > "$work/initrd.cpio")
status=0
for v in $variants; do
    emu=$top/target/lockscale/bin/ppc64emu-$v
    [ -x "$emu" ] || { echo "boot-smp: $emu missing: run 'lockscale build' first" >&2; exit 2; }
    for n in $ns; do
        log=$work/$v-$n.log
        t0=$(date +%s.%N)
        rc=0
        # shellcheck disable=SC2086
        "$emu" -smp "$n" -m "${MEM:-2G}" -nographic -kernel "$kernel" -initrd "$work/initrd.cpio" \
            -append "console=hvc0 quiet" --timeout "${TIMEOUT:-900}" ${EMU_ARGS:-} </dev/null >"$log" 2>&1 || rc=$?
        wall=$(echo "$(date +%s.%N) - $t0" | bc)
        line=$(grep -a -o 'boot-smp: /init cpus=[0-9]* uptime=[0-9.]*' "$log" || true)
        if [ "$rc" -eq 0 ] && [ "${line#*cpus=}" != "$line" ] && [ "$(echo "$line" | sed 's/.*cpus=\([0-9]*\).*/\1/')" = "$n" ]; then
            printf '%-14s N=%-3s ok   /init at %6s s guest, %7.1f s wall\n' "$v" "$n" "${line##*uptime=}" "$wall"
        else
            printf '%-14s N=%-3s FAIL (exit %s, %s); last lines:\n' "$v" "$n" "$rc" "${line:-no /init line}"
            tail -5 "$log"
            status=1
        fi
    done
done
exit $status
