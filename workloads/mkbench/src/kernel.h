/*
 * kernel.h - definitions private to the mkbench kernel (real mode side).
 */
#ifndef KERNEL_H
#define KERNEL_H

#include "mkbench.h"

/* hypercall opcodes (PAPR) */
#define H_REMOVE		0x04
#define H_ENTER			0x08
#define H_READ			0x0c
#define H_PROTECT		0x18
#define H_GET_TERM_CHAR		0x54
#define H_PUT_TERM_CHAR		0x58
#define H_EOI			0x64
#define H_CPPR			0x68
#define H_IPI			0x6c
#define H_XIRR			0x74
#define H_PAGE_INIT		0x2c
#define H_CEDE			0xe0
#define H_PROD			0xe8
#define H_BULK_REMOVE		0x124
#define H_SET_MODE		0x31c
#define H_RTAS			0xf000
#define H_LOGICAL_MEMOP		0xf001

/* hypercall return codes */
#define H_SUCCESS		0
#define H_BUSY			1
#define H_FUNCTION		(-2)
#define H_PARAMETER		(-4)
#define H_PTEG_FULL		(-6)
#define H_NOT_FOUND		(-7)

/* hypercall flags */
/* H_PAGE_INIT flags */
#define H_ZERO_PAGE		(1UL << (63 - 48))
#define H_COPY_PAGE		(1UL << (63 - 49))

#define H_AVPN			(1UL << (63 - 32))
#define H_BULK_REQUEST		0x4000000000000000UL
#define H_BULK_RESPONSE		0x8000000000000000UL
#define H_BULK_END		0xc000000000000000UL
#define H_BULK_TYPE		0xc000000000000000UL
#define H_BULK_CODE		0x3000000000000000UL
#define H_BULK_AVPN		0x0200000000000000UL

/* hashed page table entry bits (ISA 2.07, 256 MB segments, 4 KB pages) */
#define HPTE_V_VALID		0x1UL
#define HPTE_V_SECONDARY	0x2UL
#define HPTE_R_RPN		0x0ffffffffffff000UL
#define HPTE_R_R		0x100UL
#define HPTE_R_C		0x80UL
#define HPTE_R_M		0x10UL
#define HPTE_R_N		0x4UL
#define HPTE_R_PP_RW		0x2UL	/* read/write for key 0 and key 1 */
#define HPTE_R_PP_RO		0x3UL	/* read-only for key 0 and key 1 */

/* SLB */
#define SLB_ESID_V		0x08000000UL
#define SLB_VSID_KP		0x400UL
#define SLB_VSID_N		0x200UL

/* DSISR / SRR1 fault bits */
#define DSISR_NOPTE		0x40000000UL
#define DSISR_PROT		0x08000000UL
#define DSISR_STORE		0x02000000UL
#define SRR1_ISI_NOPTE		0x40000000UL
#define SRR1_ISI_NOEXEC		0x10000000UL
#define SRR1_ISI_PROT		0x08000000UL

#define XICS_IPI		2
#define IPI_PRIORITY		4

/* per-CPU event counters */
enum {
	C_DSI, C_ISI, C_TICK, C_IDLE_TICK, C_IPI_SENT, C_IPI_RECV, C_EXT,
	C_SYSCALL, C_PROCS, C_MUNMAP, C_PAGES_IN, C_PAGES_OUT,
	C_HC_ENTER, C_HC_REMOVE, C_HC_BULK, C_HC_PROTECT, C_HC_CEDE, C_HC_IPI,
	C_HC_XIRR, C_HC_EOI, C_HC_CPPR, C_HC_TERM, C_HC_RTAS, C_HC_OTHER,
	C_LOCK_SPINS, C_PIPE_WAIT,
	NCOUNT
};

/* one mapping of a job address space */
struct pte {
	u32 pfn;	/* 0: not mapped */
	u32 slot;	/* HPT index (PTEG * 8 + slot) of its HPTE */
};

#define R_WRITE		1
#define R_EXEC		2
#define R_SHARED	4	/* maps the image itself (no frame to free) */

struct region {
	u64 base;		/* first EA */
	u32 npages;
	u32 flags;
	u32 lo, hi;		/* range of indices that may be mapped */
	struct pte *pte;
};

enum { RG_TEXT, RG_HEAP, RG_ARGS, RG_STACK, NREGION };

struct proc {
	u32 ctx;		/* context number: picks the VSIDs */
	u64 serial;
	u64 vsid[3];		/* ESID 0, 1, 2 */
	u64 mapped;
	struct region rg[NREGION];
};

struct percpu {
	/* the first fields are used by head.S (PC_* offsets) */
	u64 r1, r3, r4, ksp, toc;
	u64 sched[22];
	u64 cr_save;
	/* C only */
	u32 index, server;
	volatile u32 online;
	volatile u32 idle;	/* waiting in H_CEDE for work (set under js lock) */
	u32 in_idle;		/* idle tick period in force */
	u32 cur_job;
	u64 next_tick;
	u64 cnt[NCOUNT];
	struct proc proc;
	u32 *free;		/* this CPU's free frames (poisoned) */
	u32 nfree;
	u8 pad[128];
} __attribute__((aligned(128)));

typedef struct { volatile u32 v; } spinlock_t;

static inline struct percpu *this_cpu(void)
{
	return (struct percpu *)mfspr(SPRN_SPRG0);
}

static inline void spin_lock(spinlock_t *l)
{
	u32 tmp, spins = 0;

	__asm__ __volatile__(
	"1:	lwarx	%0, 0, %2\n"
	"	cmpwi	%0, 0\n"
	"	bne-	2f\n"
	"	stwcx.	%3, 0, %2\n"
	"	bne-	1b\n"
	"	isync\n"
	"	b	3f\n"
	"2:	addi	%1, %1, 1\n"
	"	lwz	%0, 0(%2)\n"
	"	cmpwi	%0, 0\n"
	"	bne+	2b\n"
	"	b	1b\n"
	"3:\n"
	: "=&r"(tmp), "+r"(spins)
	: "r"(&l->v), "r"(1)
	: "cr0", "memory");
	if (spins)
		this_cpu()->cnt[C_LOCK_SPINS] += spins;
}

static inline void spin_unlock(spinlock_t *l)
{
	lwsync();
	l->v = 0;
}

static inline u32 atomic_inc32(volatile u32 *p)
{
	u32 t;

	__asm__ __volatile__(
	"1:	lwarx	%0, 0, %1\n"
	"	addi	%0, %0, 1\n"
	"	stwcx.	%0, 0, %1\n"
	"	bne-	1b\n"
	: "=&r"(t) : "r"(p) : "cr0", "memory");
	return t;
}

static inline void irq_disable(void)
{
	__asm__ __volatile__("mtmsrd %0, 1" : : "r"(MSR_RI) : "memory");
}

/* machine configuration, from the device tree */
struct config {
	u32 ncpus;
	u32 server[MAX_CPUS];
	u32 boot_server;
	u64 tb_hz;
	u32 pft_shift;		/* log2 of the HPT size in bytes */
	u32 dcbz_size;
	u64 mem_size;
	u32 termno;
	u32 tok_start_cpu, tok_power_off, tok_os_term, tok_stopped_state;
	u32 have_bulk;
	char bootargs[256];
};

/* inject= : deliberate faults, to test that the self-checks catch them */
#define INJECT_POISON	1	/* write into a freed frame */
#define INJECT_RESULT	2	/* corrupt the result of a repeated compile */
#define INJECT_HPTE	4	/* remove an HPTE behind a process's back */

extern struct config cfg;
extern u32 inject;
extern struct percpu percpu[MAX_CPUS];
extern u64 hpt_mask;

/* kernel.c */
long hcall(struct percpu *pc, u64 *io);
void panic(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
int printk(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int rtas_call(u32 token, int nargs, int nret, u32 *ret, ...);
void power_off(void) __attribute__((noreturn));

/* fdt.c */
int fdt_parse(const void *fdt);

/* mm.c */
void mm_init(void);
void mm_init_cpu(struct percpu *pc);
void proc_create(struct percpu *pc, const struct job_args *args);
void proc_exit(struct percpu *pc);
void page_fault(struct percpu *pc, struct frame *f, u64 ea, u64 why, int exec);
long sys_munmap(struct percpu *pc, u64 ea, u64 len);
long sys_mprotect(struct percpu *pc, u64 ea, u64 len);

/* format.c */
int vsnformat(char *buf, size_t size, const char *fmt, __builtin_va_list ap);
int snformat(char *buf, size_t size, const char *fmt, ...);

#endif /* KERNEL_H */
