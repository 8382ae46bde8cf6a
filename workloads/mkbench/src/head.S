/*
 * head.S - entry points, interrupt vectors and the few routines of the
 * mkbench kernel that must be written in assembly.
 *
 * The image is linked at 0x400000 (where both QEMU's pseries machine and
 * ppc64emu place a -kernel ELF) and is entered at its first byte, either
 * big-endian (QEMU's ROM path: 32-bit BE real mode; ppc64emu: 64-bit BE) or
 * little-endian.  The first word is chosen so that it is harmless when read
 * little-endian and a branch over the next word when read big-endian; the
 * big-endian path then switches the CPU to 64-bit little-endian with rfid.
 */
#include "mkbench.h"

/* a big-endian instruction word stored so that a BE fetch sees it */
#define BE_INSN(x) .long ((((x) >> 24) & 0xff) | (((x) >> 8) & 0xff00) | \
			  (((x) << 8) & 0xff0000) | (((x) << 24) & 0xff000000))

/*
 * Endian-neutral prologue: 11 words.  LE: word 0 is "tdi 0,0,0x48" (never
 * traps), word 1 branches to the LE label.  BE: word 0 reads as "b .+8"; the
 * following BE words compute the address of word 11 (= label) and rfid there
 * with MSR = SF | ME | RI | LE, real mode.
 */
#define ENDIAN_ENTRY(label)						\
	tdi	0, 0, 0x48;						\
	b	label;							\
	BE_INSN(0x48000005);	/* bl .+4                        */	\
	BE_INSN(0x7d6802a6);	/* mflr r11   (r11 = word 3)     */	\
	BE_INSN(0x396b0020);	/* addi r11,r11,32 (-> word 11)  */	\
	BE_INSN(0x7d7a03a6);	/* mtsrr0 r11                    */	\
	BE_INSN(0x39800001);	/* li r12,1                      */	\
	BE_INSN(0x798cf806);	/* sldi r12,r12,63               */	\
	BE_INSN(0x618c1003);	/* ori r12,r12,ME|RI|LE          */	\
	BE_INSN(0x7d9b03a6);	/* mtsrr1 r12                    */	\
	BE_INSN(0x4c000024);	/* rfid                          */	\
label:

#define LOAD_ADDR(reg, sym)			\
	lis	reg, (sym)@ha;			\
	addi	reg, reg, (sym)@l

	.section .text.head, "ax"
	.globl	_start
_start:
	ENDIAN_ENTRY(boot_le)
	/* boot CPU: r3 = device tree, 64-bit LE real mode from here on */
	bl	set_sf
	LOAD_ADDR(r2, .TOC.)
	/*
	 * clear .bss (the loader normally did, but do not rely on it), unless
	 * the device tree was placed inside it
	 */
	LOAD_ADDR(r4, __bss_start)
	LOAD_ADDR(r5, __bss_end)
	cmpld	r3, r4
	blt	0f
	cmpld	r3, r5
	blt	2f
0:	li	r0, 0
1:	cmpld	r4, r5
	bge	2f
	std	r0, 0(r4)
	addi	r4, r4, 8
	b	1b
2:	LOAD_ADDR(r1, boot_stack_top)
	li	r0, 0
	stdu	r0, -64(r1)
	bl	kmain_boot
	b	.

/* make sure MSR[SF] is set (an LE entry might not have it) */
set_sf:
	mfmsr	r11
	li	r12, 1
	sldi	r12, r12, 63
	or	r11, r11, r12
	ori	r11, r11, MSR_RI
	mtmsrd	r11
	isync
	blr

	/* secondary CPUs are started here by RTAS start-cpu, r3 = CPU index */
	.org	0x100
	.globl	secondary_entry
secondary_entry:
	ENDIAN_ENTRY(secondary_le)
	bl	set_sf
	LOAD_ADDR(r2, .TOC.)
	LOAD_ADDR(r1, cpu_stacks)
	addi	r4, r3, 1
	sldi	r4, r4, 15		/* KSTACK_SIZE == 1 << 15 */
	add	r1, r1, r4
	li	r0, 0
	stdu	r0, -64(r1)
	bl	kmain_secondary
	b	.

/*
 * Interrupt vectors, copied to physical 0 at boot.  Each stub saves r1, r3
 * and r13 (r13 in SPRG1), loads the per-CPU area from SPRG0, puts the
 * vector number in r3 and jumps (absolute) to the common entry.
 */
	.section .text.vectors, "ax"
	.balign	4096
	.globl	vectors_start
vectors_start:
#define VECTOR(v)					\
	. = vectors_start + v;				\
	mtspr	SPRN_SPRG1, r13;			\
	mfspr	r13, SPRN_SPRG0;			\
	std	r1, PC_R1(r13);				\
	std	r3, PC_R3(r13);				\
	li	r3, v;					\
	ba	exc_common

	VECTOR(0x100)
	VECTOR(0x200)
	VECTOR(0x300)
	VECTOR(0x380)
	VECTOR(0x400)
	VECTOR(0x480)
	VECTOR(0x500)
	VECTOR(0x600)
	VECTOR(0x700)
	VECTOR(0x800)
	VECTOR(0x900)
	VECTOR(0x980)
	VECTOR(0xa00)
	VECTOR(0xb00)
	VECTOR(0xc00)
	VECTOR(0xd00)
	VECTOR(0xe00)
	VECTOR(0xe20)
	VECTOR(0xe40)
	VECTOR(0xe60)
	VECTOR(0xe80)
	VECTOR(0xea0)
	VECTOR(0xf00)
	VECTOR(0xf20)
	VECTOR(0xf40)
	VECTOR(0xf60)
	. = vectors_start + 0x1000
	.globl	vectors_end
vectors_end:

	.text
/*
 * Common interrupt entry, real mode.  Builds a struct frame on the kernel
 * stack: the per-CPU job stack base when the interrupt came from a job
 * (MSR[PR] = 1), else below the interrupted kernel code's red zone.
 */
	.globl	exc_common
exc_common:
	std	r4, PC_R4(r13)
	mfcr	r4			/* before anything touches CR0 */
	std	r4, PC_CR(r13)
	mfsrr1	r4
	andi.	r4, r4, MSR_PR
	beq	1f
	ld	r4, PC_KSP(r13)
	b	2f
1:	ld	r4, PC_R1(r13)
	subi	r4, r4, 288
2:	subi	r4, r4, FRAME_SIZE
	clrrdi	r4, r4, 4
	std	r0, F_GPR(0)(r4)
	ld	r0, PC_R1(r13)
	std	r0, F_GPR(1)(r4)
	std	r0, 0(r4)
	mr	r1, r4
	std	r2, F_GPR(2)(r1)
	ld	r0, PC_R3(r13)
	std	r0, F_GPR(3)(r1)
	ld	r0, PC_R4(r13)
	std	r0, F_GPR(4)(r1)
	std	r5, F_GPR(5)(r1)
	std	r6, F_GPR(6)(r1)
	std	r7, F_GPR(7)(r1)
	std	r8, F_GPR(8)(r1)
	std	r9, F_GPR(9)(r1)
	std	r10, F_GPR(10)(r1)
	std	r11, F_GPR(11)(r1)
	std	r12, F_GPR(12)(r1)
	mfspr	r0, SPRN_SPRG1
	std	r0, F_GPR(13)(r1)
	std	r14, F_GPR(14)(r1)
	std	r15, F_GPR(15)(r1)
	std	r16, F_GPR(16)(r1)
	std	r17, F_GPR(17)(r1)
	std	r18, F_GPR(18)(r1)
	std	r19, F_GPR(19)(r1)
	std	r20, F_GPR(20)(r1)
	std	r21, F_GPR(21)(r1)
	std	r22, F_GPR(22)(r1)
	std	r23, F_GPR(23)(r1)
	std	r24, F_GPR(24)(r1)
	std	r25, F_GPR(25)(r1)
	std	r26, F_GPR(26)(r1)
	std	r27, F_GPR(27)(r1)
	std	r28, F_GPR(28)(r1)
	std	r29, F_GPR(29)(r1)
	std	r30, F_GPR(30)(r1)
	std	r31, F_GPR(31)(r1)
	ld	r0, PC_CR(r13)
	std	r0, F_CR(r1)
	mflr	r0
	std	r0, F_LR(r1)
	mfctr	r0
	std	r0, F_CTR(r1)
	mfxer	r0
	std	r0, F_XER(r1)
	mfsrr0	r0
	std	r0, F_SRR0(r1)
	mfsrr1	r0
	std	r0, F_SRR1(r1)
	mfspr	r0, SPRN_DAR
	std	r0, F_DAR(r1)
	mfspr	r0, SPRN_DSISR
	std	r0, F_DSISR(r1)
	std	r3, F_VEC(r1)
	ld	r2, PC_TOC(r13)
	mr	r3, r1
	bl	trap
	/* fall through */

/* restore the frame at r1 and return from the interrupt */
	.globl	exc_return
exc_return:
	ld	r0, F_SRR0(r1)
	mtsrr0	r0
	ld	r0, F_SRR1(r1)
	mtsrr1	r0
	ld	r0, F_CR(r1)
	mtcr	r0
	ld	r0, F_LR(r1)
	mtlr	r0
	ld	r0, F_CTR(r1)
	mtctr	r0
	ld	r0, F_XER(r1)
	mtxer	r0
	ld	r0, F_GPR(0)(r1)
	ld	r2, F_GPR(2)(r1)
	ld	r3, F_GPR(3)(r1)
	ld	r4, F_GPR(4)(r1)
	ld	r5, F_GPR(5)(r1)
	ld	r6, F_GPR(6)(r1)
	ld	r7, F_GPR(7)(r1)
	ld	r8, F_GPR(8)(r1)
	ld	r9, F_GPR(9)(r1)
	ld	r10, F_GPR(10)(r1)
	ld	r11, F_GPR(11)(r1)
	ld	r12, F_GPR(12)(r1)
	ld	r14, F_GPR(14)(r1)
	ld	r15, F_GPR(15)(r1)
	ld	r16, F_GPR(16)(r1)
	ld	r17, F_GPR(17)(r1)
	ld	r18, F_GPR(18)(r1)
	ld	r19, F_GPR(19)(r1)
	ld	r20, F_GPR(20)(r1)
	ld	r21, F_GPR(21)(r1)
	ld	r22, F_GPR(22)(r1)
	ld	r23, F_GPR(23)(r1)
	ld	r24, F_GPR(24)(r1)
	ld	r25, F_GPR(25)(r1)
	ld	r26, F_GPR(26)(r1)
	ld	r27, F_GPR(27)(r1)
	ld	r28, F_GPR(28)(r1)
	ld	r29, F_GPR(29)(r1)
	ld	r30, F_GPR(30)(r1)
	ld	r31, F_GPR(31)(r1)
	ld	r13, F_GPR(13)(r1)
	ld	r1, F_GPR(1)(r1)
	rfid

/*
 * u64 run_job(struct frame *jf, struct percpu *pc)
 * Save the scheduler's context in pc, then "return from interrupt" into the
 * job described by jf.  Comes back (as if returning from this call) when the
 * job ends and the kernel calls resume_sched(pc, value).
 */
	.globl	run_job
run_job:
	std	r1, PC_SCHED + 0(r4)
	std	r2, PC_SCHED + 8(r4)
	mflr	r0
	std	r0, PC_SCHED + 16(r4)
	mfcr	r0
	std	r0, PC_SCHED + 24(r4)
	std	r14, PC_SCHED + 32(r4)
	std	r15, PC_SCHED + 40(r4)
	std	r16, PC_SCHED + 48(r4)
	std	r17, PC_SCHED + 56(r4)
	std	r18, PC_SCHED + 64(r4)
	std	r19, PC_SCHED + 72(r4)
	std	r20, PC_SCHED + 80(r4)
	std	r21, PC_SCHED + 88(r4)
	std	r22, PC_SCHED + 96(r4)
	std	r23, PC_SCHED + 104(r4)
	std	r24, PC_SCHED + 112(r4)
	std	r25, PC_SCHED + 120(r4)
	std	r26, PC_SCHED + 128(r4)
	std	r27, PC_SCHED + 136(r4)
	std	r28, PC_SCHED + 144(r4)
	std	r29, PC_SCHED + 152(r4)
	std	r30, PC_SCHED + 160(r4)
	std	r31, PC_SCHED + 168(r4)
	/* interrupts taken while the job runs build their frames below here */
	std	r1, PC_KSP(r4)
	mr	r1, r3
	b	exc_return

/* void resume_sched(struct percpu *pc, u64 value): back into run_job's caller */
	.globl	resume_sched
resume_sched:
	ld	r1, PC_SCHED + 0(r3)
	ld	r2, PC_SCHED + 8(r3)
	ld	r0, PC_SCHED + 16(r3)
	mtlr	r0
	ld	r0, PC_SCHED + 24(r3)
	mtcr	r0
	ld	r14, PC_SCHED + 32(r3)
	ld	r15, PC_SCHED + 40(r3)
	ld	r16, PC_SCHED + 48(r3)
	ld	r17, PC_SCHED + 56(r3)
	ld	r18, PC_SCHED + 64(r3)
	ld	r19, PC_SCHED + 72(r3)
	ld	r20, PC_SCHED + 80(r3)
	ld	r21, PC_SCHED + 88(r3)
	ld	r22, PC_SCHED + 96(r3)
	ld	r23, PC_SCHED + 104(r3)
	ld	r24, PC_SCHED + 112(r3)
	ld	r25, PC_SCHED + 120(r3)
	ld	r26, PC_SCHED + 128(r3)
	ld	r27, PC_SCHED + 136(r3)
	ld	r28, PC_SCHED + 144(r3)
	ld	r29, PC_SCHED + 152(r3)
	ld	r30, PC_SCHED + 160(r3)
	ld	r31, PC_SCHED + 168(r3)
	mr	r3, r4
	blr

/*
 * long hcall_raw(u64 *io): io[0] = opcode, io[1..9] = r4..r12.
 * Makes the hypercall (sc 1) and stores r3..r12 back into io[0..9].
 * Returns r3.
 */
	.globl	hcall_raw
hcall_raw:
	std	r31, -8(r1)
	mr	r31, r3
	ld	r3, 0(r31)
	ld	r4, 8(r31)
	ld	r5, 16(r31)
	ld	r6, 24(r31)
	ld	r7, 32(r31)
	ld	r8, 40(r31)
	ld	r9, 48(r31)
	ld	r10, 56(r31)
	ld	r11, 64(r31)
	ld	r12, 72(r31)
	sc	1
	std	r3, 0(r31)
	std	r4, 8(r31)
	std	r5, 16(r31)
	std	r6, 24(r31)
	std	r7, 32(r31)
	std	r8, 40(r31)
	std	r9, 48(r31)
	std	r10, 56(r31)
	std	r11, 64(r31)
	std	r12, 72(r31)
	ld	r31, -8(r1)
	blr

/*
 * Job-side system call: long job_syscall(long nr, long a, long b, long c).
 * sc 0 enters the kernel at 0x c00 with the registers as they are.
 */
	.globl	job_syscall
job_syscall:
	sc
	blr

	.section .bss
	.balign	16
	.globl	boot_stack
boot_stack:
	.space	KSTACK_SIZE
	.globl	boot_stack_top
boot_stack_top:
	.balign	4096
	.globl	cpu_stacks
cpu_stacks:
	.space	KSTACK_SIZE * MAX_CPUS
