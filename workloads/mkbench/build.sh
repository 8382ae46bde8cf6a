#!/bin/sh
# Build the mkbench guest (mkbench.elf) and its QEMU boot ROM (boot-rom.bin)
# with Debian's powerpc64le-linux-gnu cross toolchain.  The build is
# reproducible: same compiler, same flags, same order, paths made relative.
#
#   ./build.sh            build into this folder (mkbench.elf, boot-rom.bin)
#   ./build.sh OUTDIR     build into OUTDIR instead
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
out=${1:-$here}
mkdir -p "$out"
out=$(cd "$out" && pwd)
CROSS=${CROSS:-powerpc64le-linux-gnu-}
obj=$(mktemp -d)
trap 'rm -rf "$obj"' EXIT

CFLAGS="-O2 -std=gnu11 -ffreestanding -nostdlib -fno-builtin -fno-pie -fno-pic
 -mcpu=power8 -mlittle-endian -mabi=elfv2 -mcmodel=medium -msoft-float
 -mno-altivec -mno-vsx -fno-stack-protector -fno-asynchronous-unwind-tables
 -fno-tree-loop-distribute-patterns -fno-delete-null-pointer-checks -fno-common -Wall -Wextra -Wno-unused-parameter
 -ffile-prefix-map=$here=. -Isrc"
ASFLAGS="-mcpu=power8 -mlittle-endian -Wa,-mregnames -fno-pie -Isrc"
export LC_ALL=C SOURCE_DATE_EPOCH=0

# kernel image: fixed source and link order
for f in head.S; do
	${CROSS}gcc $ASFLAGS -c src/$f -o "$obj/${f%.S}.o"
done
for f in kernel.c mm.c fdt.c format.c lib.c job.c; do
	${CROSS}gcc $CFLAGS -c src/$f -o "$obj/${f%.c}.o"
done
${CROSS}ld -N -static -nostdlib --no-dynamic-linker --build-id=none -z noexecstack --no-warn-rwx-segments \
	-T src/mkbench.ld -o "$out/mkbench.elf" \
	"$obj/head.o" "$obj/kernel.o" "$obj/mm.o" "$obj/fdt.o" "$obj/format.o" \
	"$obj/lib.o" "$obj/job.o"

# boot ROM: big-endian, raw binary, loaded at 0 by QEMU
${CROSS}as -mbig -a64 -o "$obj/boot-rom.o" src/boot-rom.S
${CROSS}objcopy -O binary -j .text "$obj/boot-rom.o" "$out/boot-rom.bin"

size=$(wc -c < "$out/mkbench.elf")
echo "mkbench.elf: $size bytes, boot-rom.bin: $(wc -c < "$out/boot-rom.bin") bytes"
