/*
 * mkbench.h - shared definitions of the mkbench guest (kernel, jobs, assembly).
 *
 * mkbench is a small bare-metal ppc64le (POWER8, pseries) guest: a kernel
 * that runs in real mode and "compile" / "link" jobs that run as processes,
 * each in its own hash-MMU address space.  See ../README.md.
 */
#ifndef MKBENCH_H
#define MKBENCH_H

#define MAX_CPUS	64
#define KSTACK_SIZE	0x8000		/* per-CPU kernel stack */

#define PAGE_SHIFT	12
#define PAGE_SIZE	(1UL << PAGE_SHIFT)

/* MSR bits */
#define MSR_SF		0x8000000000000000UL
#define MSR_EE		0x8000UL
#define MSR_PR		0x4000UL
#define MSR_ME		0x1000UL
#define MSR_IR		0x20UL
#define MSR_DR		0x10UL
#define MSR_RI		0x2UL
#define MSR_LE		0x1UL

#define MSR_KERNEL	(MSR_SF | MSR_ME | MSR_RI | MSR_LE)
#define MSR_JOB		(MSR_KERNEL | MSR_EE | MSR_PR | MSR_IR | MSR_DR)

/* SPR numbers */
#define SPRN_DSISR	18
#define SPRN_DAR	19
#define SPRN_DEC	22
#define SPRN_SRR0	26
#define SPRN_SRR1	27
#define SPRN_TBRL	268
#define SPRN_SPRG0	272
#define SPRN_SPRG1	273
#define SPRN_PIR	1023

/* per-CPU area: offsets used by the assembly entry code */
#define PC_R1		0
#define PC_R3		8
#define PC_R4		16
#define PC_KSP		24
#define PC_TOC		32
#define PC_SCHED	40	/* r1, r2, lr, cr, r14..r31: 22 doublewords */
#define PC_SCHED_SIZE	(22 * 8)
#define PC_CR		(PC_SCHED + PC_SCHED_SIZE)	/* interrupted CR */

/* exception frame (from r1 upwards); the first 32 bytes are the ELFv2 header */
#define F_GPR(n)	(32 + 8 * (n))
#define F_CR		288
#define F_LR		296
#define F_CTR		304
#define F_XER		312
#define F_SRR0		320
#define F_SRR1		328
#define F_DAR		336
#define F_DSISR		344
#define F_VEC		352
#define FRAME_SIZE	368

/* job address space (effective addresses, 256 MB segments) */
#define JOB_TEXT_ESID	0		/* image text/rodata, EA == PA, read-only */
#define JOB_HEAP_BASE	0x10000000UL	/* segment 1: demand-zero heap */
#define JOB_HEAP_MAX	(64UL << 20)
#define JOB_MMAP_BASE	(JOB_HEAP_BASE + JOB_HEAP_MAX)	/* munmap-able chunks */
#define JOB_MMAP_MAX	(32UL << 20)
#define JOB_ARGS_BASE	0x20000000UL	/* segment 2: argument page */
#define JOB_STACK_TOP	0x30000000UL	/* segment 2: stack grows down */
#define JOB_STACK_MAX	(1UL << 20)

/* job system calls (sc 0): r3 = number, r4.. = arguments, r3 = result */
#define SYS_EXIT	1
#define SYS_MUNMAP	2
#define SYS_MPROTECT	3
#define SYS_FAIL	4
#define SYS_PIPE_WRITE	5	/* compile -> its assembler: one message */
#define SYS_PIPE_READ	6	/* assembler: message a (blocks until written) */

#ifndef __ASSEMBLER__

typedef unsigned long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef long s64;
typedef int s32;
typedef unsigned long size_t;

#define NULL ((void *)0)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ALIGN_UP(x, a) (((x) + (a) - 1) & ~((u64)(a) - 1))

struct frame {
	u64 hdr[4];
	u64 gpr[32];
	u64 cr, lr, ctr, xer, srr0, srr1, dar, dsisr, vec, pad;
};

/* arguments handed to a job in its argument page */
#define JOB_COMPILE	1
#define JOB_LINK	2
#define JOB_FINAL	3
#define JOB_ASM		4	/* the assembler reading a compile's output */
#define MAX_INPUTS	500

struct job_args {
	u64 kind;
	u64 seed;
	u64 unit;		/* unit (compile) or directory (link) */
	u64 size;
	u64 ninputs;
	u64 input[MAX_INPUTS];	/* link: checksums of the inputs, in order */
};

/*
 * The compile -> assembler pipe: a compile sends PIPE_BATCHES - 1 messages
 * (one per batch of functions) and then its result; pipe_msgs() is how many.
 */
#define PIPE_BATCHES	4
#define PIPE_MAX	(PIPE_BATCHES + 1)

static inline u64 pipe_step(u64 nfuncs)
{
	return (nfuncs + PIPE_BATCHES - 1) / PIPE_BATCHES;
}

static inline u64 pipe_msgs(u64 nfuncs)
{
	return (nfuncs - 1) / pipe_step(nfuncs) + 1;
}

/* job side: job.c, runs in problem state in its own address space */
void job_main(struct job_args *a);

/* kernel-side library (lib.c); also safe for jobs (pure functions) */
void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
u64 mix64(u64 x);

/* assembly (head.S) */
struct percpu;
long hcall_raw(u64 *io);
u64 run_job(struct frame *jf, struct percpu *pc);
void resume_sched(struct percpu *pc, u64 value) __attribute__((noreturn));
extern char _start[], secondary_entry[], vectors_start[], vectors_end[];
extern char __job_ro_end[], __bss_start[], __bss_end[], _end[];

static inline u64 mftb(void)
{
	u64 t;
	__asm__ __volatile__("mfspr %0, 268" : "=r"(t));
	return t;
}

static inline u64 mfmsr(void)
{
	u64 m;
	__asm__ __volatile__("mfmsr %0" : "=r"(m));
	return m;
}

#define mfspr(n) ({ u64 __v; __asm__ __volatile__("mfspr %0, %1" : "=r"(__v) : "i"(n)); __v; })
#define mtspr(n, v) __asm__ __volatile__("mtspr %0, %1" : : "i"(n), "r"((u64)(v)) : "memory")

static inline void barrier(void) { __asm__ __volatile__("" ::: "memory"); }
static inline void sync(void) { __asm__ __volatile__("sync" ::: "memory"); }
static inline void lwsync(void) { __asm__ __volatile__("lwsync" ::: "memory"); }
static inline void isync(void) { __asm__ __volatile__("isync" ::: "memory"); }

#endif /* __ASSEMBLER__ */
#endif /* MKBENCH_H */
