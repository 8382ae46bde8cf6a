/*
 * boot-rom.S - the tiny firmware image given to qemu-system-ppc64 with -bios.
 *
 * QEMU's pseries machine loads this file at physical address 0 and starts the
 * boot CPU at 0x100 in big-endian 32-bit real mode, with r3 = the flattened
 * device tree it built, r4 = r5 = 0.  All we do is jump to the kernel image,
 * which QEMU placed at 0x400000, leaving r3..r5 untouched.  This file is
 * assembled big-endian (as -mbig).
 */
	.text
	.globl	rom_start
rom_start:
	b	.		/* 0x000: nothing should ever enter here */

	.org	0x100
rom_entry:
	ba	0x400000	/* the kernel's first instruction */

	.org	0x200
