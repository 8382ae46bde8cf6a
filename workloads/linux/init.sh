#!/bin/busybox sh
# /init of the linux-make and kernel-make guests (lockscale guest build …).
# Runs `make -j N` (N from jobs= on the kernel command line) in /proj, times it with the guest's
# own clock, and prints one line:
#   LINUX-MAKE-RESULT cpus=C jobs=N workload=W units=U size=S elapsed_ns=T checksum=<SHA-256> [compiles=K]
# where the checksum is the SHA-256 of the list of SHA-256s of the build outputs (/proj/outputs
# names them), then powers off. Any failure prints `LINUX-MAKE-ERROR reason` and powers off.
# /proj/params (written by the image builder) sets WORKLOAD, UNITS, SIZE and MAKEFLAGS_EXTRA,
# and may set PREPARE (a command run before the timed make, e.g. the kernel's configuration)
# and COMPILE_LINES (a pattern of make's log lines that are compiles, counted as compiles=K).
# With EXPORT_PREPARED=1 (the image that configures the kernel tree once, harness/src/guest/) it runs
# PREPARE alone and prints what PREPARE wrote under /proj: a gzip'd newc archive as hex lines
# `LINUX-MAKE-PREPARED <hex>`, then the result line with the archive's SHA-256 as checksum and
# PREPARE's time as elapsed_ns; the image builder adds those files to the real image.
# With `trace=1` on the command line it also counts, over the make alone, every hypercall by
# opcode and return code and every hash fault by trap (tracefs hist triggers), and prints them
# as `LINUX-MAKE-TRACE` lines: the same counts on every emulator, for calibration.
/bin/busybox mkdir -p /proc /sys /dev /tmp /bbin
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
/bin/busybox --install -s /bbin
export PATH=/usr/bin:/usr/sbin:/bbin HOME=/tmp LC_ALL=C TZ=UTC

fail() {
    echo "LINUX-MAKE-ERROR $*"
    poweroff -f
    exit 1
}

# /proc/uptime counts in hundredths of a second: "12.34 …" → 1234.
centis() {
    read -r up _ </proc/uptime
    echo "${up%.*}${up#*.}" | sed 's/^0*//;s/^$/0/'
}

[ -r /proj/params ] || fail "no /proj/params in the image"
. /proj/params
jobs=
trace=0
for arg in $(cat /proc/cmdline); do
    case "$arg" in
    jobs=*) jobs=${arg#jobs=} ;;
    trace=1) trace=1 ;;
    esac
done
tr=/sys/kernel/tracing
hists="powerpc/hcall_exit:opcode,retval powerpc/hash_fault:trap"
trace_on() {
    mount -t tracefs tracefs $tr 2>/dev/null || fail "trace=1 needs tracefs"
    for h in $hists; do
        echo "hist:keys=${h#*:}:size=256" >"$tr/events/${h%%:*}/trigger" || fail "no hist trigger on ${h%%:*}"
    done
}
trace_off() {
    for h in $hists; do
        echo "hist:keys=${h#*:}:size=256:pause" >>"$tr/events/${h%%:*}/trigger"
    done
    for h in $hists; do
        grep -v '^#' "$tr/events/${h%%:*}/hist" | grep . | tr -s ' ' | sed "s|^|LINUX-MAKE-TRACE ${h%%:*} |"
    done
}
case "$jobs" in '' | *[!0-9]* | 0) fail "kernel command line needs jobs=N (N >= 1), got '$jobs'" ;; esac
cpus=$(grep -c '^processor' /proc/cpuinfo)
echo "linux-make: $WORKLOAD, $cpus cpus, make -j$jobs, kernel $(uname -r), up $(cut -d' ' -f1 /proc/uptime) s"

cd /proj || fail "no /proj"
t0=$(centis)
if [ -n "${PREPARE:-}" ]; then
    if ! eval "$PREPARE" >/tmp/prepare.log 2>&1; then
        tail -n 20 /tmp/prepare.log
        fail "preparing the build failed: $PREPARE"
    fi
    echo "linux-make: prepared, up $(cut -d' ' -f1 /proc/uptime) s"
fi
if [ "${EXPORT_PREPARED:-0}" = 1 ]; then
    t1=$(centis)
    # Kernel messages must not land inside the hex lines.
    dmesg -n 1
    # The image's files have mtime 0 (harness/src/guest/archive.rs), so what PREPARE wrote is what is newer.
    cd / || fail "no /"
    # Their nanosecond mtimes go along (tmp/prepared.times): the archive keeps seconds only.
    # GNU find by path: this busybox shell runs its own applets first, and busybox's find has
    # no -printf.
    /usr/bin/find proj -newer proj/params -printf '%T@ %p\n' >/tmp/prepared.times || fail "listing what PREPARE wrote failed"
    { cut -d' ' -f2- /tmp/prepared.times && echo tmp/prepared.times; } >/tmp/prepared.list
    cpio -o -H newc </tmp/prepared.list >/tmp/prepared.cpio 2>/tmp/cpio.log || fail "cpio of what PREPARE wrote failed: $(cat /tmp/cpio.log)"
    gzip -9n /tmp/prepared.cpio || fail "gzip of what PREPARE wrote failed"
    xxd -p /tmp/prepared.cpio.gz | sed 's/^/LINUX-MAKE-PREPARED /'
    sum=$(sha256sum </tmp/prepared.cpio.gz | cut -d' ' -f1)
    echo "LINUX-MAKE-RESULT cpus=$cpus jobs=$jobs workload=$WORKLOAD units=$UNITS size=$SIZE elapsed_ns=$(((t1 - t0) * 10000000)) checksum=$sum files=$(wc -l </tmp/prepared.times)"
    poweroff -f
fi
[ $trace = 1 ] && trace_on
t0=$(centis)
# shellcheck disable=SC2086
make -j"$jobs" $MAKEFLAGS_EXTRA >/tmp/make.log 2>&1
rc=$?
t1=$(centis)
[ $trace = 1 ] && trace_off
if [ $rc -ne 0 ]; then
    tail -n 20 /tmp/make.log
    fail "make -j$jobs failed with status $rc"
fi
list=$(sha256sum $(cat /proj/outputs)) || fail "a build output is missing"
sum=$(echo "$list" | sha256sum | cut -d' ' -f1)
compiles=
[ -n "${COMPILE_LINES:-}" ] && compiles=" compiles=$(grep -cE "$COMPILE_LINES" /tmp/make.log)"
echo "LINUX-MAKE-RESULT cpus=$cpus jobs=$jobs workload=$WORKLOAD units=$UNITS size=$SIZE elapsed_ns=$(((t1 - t0) * 10000000)) checksum=$sum$compiles"
poweroff -f
