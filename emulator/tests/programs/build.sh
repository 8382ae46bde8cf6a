#!/bin/bash
# Rebuilds the guest test programs (bin/) and records QEMU's stdout and exit status for every
# case in `cases` (expected/), so that `cargo test` needs neither the cross compiler nor QEMU.
#   build.sh           build, then record
#   build.sh bins      build only (scripts/bench-speed uses this when bin/ is missing)
#   build.sh record    record only
# Needs gcc-powerpc64le-linux-gnu (or ${CROSS}gcc for another prefix), libc6-dev-ppc64el-cross,
# qemu-user-static; busybox cases need fetch-busybox.sh first. Output is reproducible: no -g,
# no build id, prefix-mapped paths.
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
CACHE=$(cd ../../.. && pwd)/target/guest-cache

MODE=${1:-build}
if [ "$MODE" = build ] || [ "$MODE" = bins ]; then
  CC=${CROSS:-powerpc64le-linux-gnu-}gcc
  FLAGS="-O2 -mcpu=power8 -static -ffile-prefix-map=$HERE=. -Wl,--build-id=none -s"
  # The runner self-test: raw system calls, no libc, integer only.
  $CC $FLAGS -mno-vsx -mno-altivec -ffreestanding -fno-builtin -fno-tree-loop-distribute-patterns \
    -nostdlib -fno-pie -no-pie -o bin/sys src/sys.c
  $CC $FLAGS -o bin/libc-tests src/libc-tests.c -lm
  # VMX/VSX: auto-vectorized loops, AltiVec/crypto intrinsics, glibc's POWER8 string routines.
  $CC ${FLAGS/-O2/-O3} -o bin/vector-tests src/vector-tests.c
fi
[ "$MODE" = bins ] && exit 0

QEMU="qemu-ppc64le-static -cpu power8"
grep -v '^\s*\(#\|$\)' cases | while read -r name bin input rest; do
  if [ "$bin" = busybox ]; then exe=$CACHE/busybox; else exe=bin/$bin; fi
  if [ ! -x "$exe" ]; then echo "skip $name: no $exe"; continue; fi
  [ "$input" = - ] && input=/dev/null
  eval "args=($rest)"
  status=0
  env -i SYS_TEST=1 $QEMU "$exe" "${args[@]}" < "$input" > "expected/$name.out" 2>/dev/null || status=$?
  echo "$status" > "expected/$name.status"
  echo "$name: status $status, $(wc -c < "expected/$name.out") bytes"
done
