/*
 * mm.c - memory management of the mkbench kernel.
 *
 * Frames: physical 4 KB pages above the kernel.  A freed frame is filled
 * with a poison pattern that names it; when it is handed out again the
 * pattern is checked, so a write through a stale translation (a missed TLB
 * flush) after the frame was freed is reported instead of going unnoticed.
 *
 * Address spaces: every job is a process with its own VSIDs.  Its pages are
 * demand-faulted (DSI/ISI) and entered into the hypervisor's hashed page
 * table with H_ENTER (plus a small fault-around, as Linux pre-inserts
 * neighbouring pages), unmapped with H_REMOVE (munmap) and changed with
 * H_PROTECT (mprotect), and torn down at exit with H_BULK_REMOVE in batches
 * of four.
 */
#include "kernel.h"

#define FAULT_AROUND	3	/* pages entered per heap/text fault */
#define FREE_CAP	2048	/* per-CPU free frame cache */
#define POISON_BASE	0xdead4b1d00000000UL

u64 hpt_mask;			/* number of PTEGs - 1 */

static u64 kmem_next;		/* boot-time allocator for kernel tables */
static u64 pool_lo, pool_hi;	/* frame pool, physical */

static spinlock_t frame_lock;
static u64 virgin_next;		/* frames never handed out yet */
static u32 *global_free;
static u64 nglobal_free;

static spinlock_t ctx_lock;
#define MAX_CTX (4 * MAX_CPUS)
static u32 ctx_free[MAX_CTX];
static u32 nctx_free;
static volatile u32 proc_serial;

static u64 text_lo, text_hi;	/* job-visible part of the image */

static void *kmem_alloc(u64 size)
{
	void *p = (void *)kmem_next;

	kmem_next = ALIGN_UP(kmem_next + size, 128);
	memset(p, 0, size);
	return p;
}

void mm_init(void)
{
	u64 top;

	hpt_mask = (1UL << (cfg.pft_shift - 7)) - 1;
	text_lo = (u64)_start & ~(PAGE_SIZE - 1);
	text_hi = (u64)__job_ro_end;

	kmem_next = ALIGN_UP((u64)_end, 1UL << 20);
	top = cfg.mem_size;
	if (top > (4UL << 30))
		top = 4UL << 30;
	/* the global free list can hold every frame of the pool */
	global_free = kmem_alloc((top >> PAGE_SHIFT) * sizeof(u32));
	for (u32 i = 0; i < cfg.ncpus; i++) {
		struct percpu *pc = &percpu[i];
		struct proc *p = &pc->proc;

		pc->free = kmem_alloc(FREE_CAP * sizeof(u32));
		p->rg[RG_TEXT].base = text_lo;
		p->rg[RG_TEXT].npages = (u32)((text_hi - text_lo) >> PAGE_SHIFT);
		p->rg[RG_TEXT].flags = R_EXEC | R_SHARED;
		p->rg[RG_HEAP].base = JOB_HEAP_BASE;
		p->rg[RG_HEAP].npages = (JOB_HEAP_MAX + JOB_MMAP_MAX) >> PAGE_SHIFT;
		p->rg[RG_HEAP].flags = R_WRITE;
		p->rg[RG_ARGS].base = JOB_ARGS_BASE;
		p->rg[RG_ARGS].npages = 1;
		p->rg[RG_ARGS].flags = 0;
		p->rg[RG_STACK].base = JOB_STACK_TOP - JOB_STACK_MAX;
		p->rg[RG_STACK].npages = JOB_STACK_MAX >> PAGE_SHIFT;
		p->rg[RG_STACK].flags = R_WRITE;
		for (int r = 0; r < NREGION; r++) {
			p->rg[r].pte = kmem_alloc(p->rg[r].npages * sizeof(struct pte));
			p->rg[r].lo = p->rg[r].npages;
			p->rg[r].hi = 0;
		}
	}
	pool_lo = ALIGN_UP(kmem_next, 1UL << 20);
	pool_hi = top & ~(PAGE_SIZE - 1);
	if (pool_lo + (64UL << 20) > pool_hi)
		panic("not enough memory: pool 0x%lx..0x%lx", pool_lo, pool_hi);
	virgin_next = pool_lo;
	for (u32 i = 0; i < MAX_CTX; i++)
		ctx_free[i] = MAX_CTX - i;	/* context 0 is never used */
	nctx_free = MAX_CTX;
	printk("mkbench: memory %lu MB, frame pool 0x%lx-0x%lx, HPT 2^%u bytes, text 0x%lx-0x%lx\n",
	       cfg.mem_size >> 20, pool_lo, pool_hi, cfg.pft_shift, text_lo, text_hi);
}

/* ---- frames ---------------------------------------------------------- */

static void frame_zero(u64 pa)
{
	u64 step = cfg.dcbz_size;

	for (u64 off = 0; off < PAGE_SIZE; off += step)
		__asm__ __volatile__("dcbz 0, %0" : : "r"(pa + off) : "memory");
}

static void frame_poison(u64 pfn)
{
	volatile u64 *p = (u64 *)(pfn << PAGE_SHIFT);
	u64 v = POISON_BASE | (pfn << PAGE_SHIFT);

	for (u32 i = 0; i < PAGE_SIZE / 8; i++)
		p[i] = v | (i << 3);
}

static void frame_check(u64 pfn)
{
	volatile u64 *p = (u64 *)(pfn << PAGE_SHIFT);
	u64 v = POISON_BASE | (pfn << PAGE_SHIFT);

	for (u32 i = 0; i < PAGE_SIZE / 8; i++)
		if (p[i] != (v | (i << 3)))
			panic("poison check: frame 0x%lx offset 0x%x holds 0x%016lx, "
			      "expected 0x%016lx (write after free: stale translation?)",
			      pfn << PAGE_SHIFT, i * 8, p[i], v | (i << 3));
}

static u64 frame_alloc(struct percpu *pc)
{
	u64 pfn = 0;
	int checked = 1;

	if (pc->nfree) {
		pfn = pc->free[--pc->nfree];
	} else {
		spin_lock(&frame_lock);
		if (nglobal_free) {
			/* refill half of the local cache */
			u32 n = nglobal_free < FREE_CAP / 2 ? (u32)nglobal_free : FREE_CAP / 2;

			for (u32 i = 0; i < n; i++)
				pc->free[pc->nfree++] = global_free[--nglobal_free];
			pfn = pc->free[--pc->nfree];
		} else if (virgin_next < pool_hi) {
			pfn = virgin_next >> PAGE_SHIFT;
			virgin_next += PAGE_SIZE;
			checked = 0;
		}
		spin_unlock(&frame_lock);
		if (!pfn)
			panic("out of memory (frame pool exhausted)");
	}
	if (checked)
		frame_check(pfn);
	frame_zero(pfn << PAGE_SHIFT);
	return pfn;
}

static void frame_free(struct percpu *pc, u64 pfn)
{
	frame_poison(pfn);
	if (pc->nfree == FREE_CAP) {
		spin_lock(&frame_lock);
		for (u32 i = 0; i < FREE_CAP / 2; i++)
			global_free[nglobal_free++] = pc->free[--pc->nfree];
		spin_unlock(&frame_lock);
	}
	pc->free[pc->nfree++] = (u32)pfn;
}

/* ---- hashed page table ------------------------------------------------ */

static u64 vsid_of(u32 ctx, u32 esid)
{
	/* odd multiplier: a bijection on 36 bits, spreads contexts over the HPT */
	return (((u64)ctx * 8 + esid + 1) * 0x5bd1e995UL) & 0xfffffffffUL;
}

static u64 hpte_v(u64 vsid, u64 ea)
{
	return (vsid << 12) | (((ea >> 23) & 0x1f) << 7) | HPTE_V_VALID;
}

static u64 hpte_avpn(u64 vsid, u64 ea)
{
	return hpte_v(vsid, ea) & ~0x7fUL;
}

static u32 hpte_insert(struct percpu *pc, u64 vsid, u64 ea, u64 pa, u64 prot)
{
	u64 hash = (vsid & 0x7fffffffffUL) ^ ((ea & 0x0fffffffUL) >> PAGE_SHIFT);
	u64 io[10];

	for (int sec = 0; sec < 2; sec++) {
		u64 pteg = (sec ? ~hash : hash) & hpt_mask;
		long rc;

		memset(io, 0, sizeof(io));
		io[0] = H_ENTER;
		io[1] = 0;
		io[2] = pteg * 8;
		io[3] = hpte_v(vsid, ea) | (sec ? HPTE_V_SECONDARY : 0);
		io[4] = pa | HPTE_R_R | HPTE_R_C | HPTE_R_M | prot;
		rc = hcall(pc, io);
		if (rc == H_SUCCESS) {
			if ((io[1] & ~7UL) != pteg * 8)
				panic("H_ENTER returned slot 0x%lx outside PTEG 0x%lx", io[1], pteg);
			pc->cnt[C_PAGES_IN]++;
			return (u32)io[1];
		}
		if (rc != H_PTEG_FULL)
			panic("H_ENTER failed: %ld (ea 0x%lx pa 0x%lx)", rc, ea, pa);
	}
	panic("H_ENTER: primary and secondary PTEG full (ea 0x%lx)", ea);
}

/* ---- processes -------------------------------------------------------- */

static u32 ctx_alloc(void)
{
	u32 c;

	spin_lock(&ctx_lock);
	if (!nctx_free)
		panic("out of contexts");
	c = ctx_free[--nctx_free];
	spin_unlock(&ctx_lock);
	return c;
}

static void ctx_release(u32 c)
{
	spin_lock(&ctx_lock);
	/* FIFO-ish reuse would hide stale translations; LIFO reuses at once */
	ctx_free[nctx_free++] = c;
	spin_unlock(&ctx_lock);
}

static u64 region_ea(const struct region *r, u32 idx)
{
	return r->base + ((u64)idx << PAGE_SHIFT);
}

static u64 region_vsid(const struct proc *p, const struct region *r)
{
	return p->vsid[(r->base >> 28) & 3];
}

static void map_page(struct percpu *pc, struct region *r, u32 idx, u64 pfn)
{
	struct proc *p = &pc->proc;
	u64 prot = (r->flags & R_WRITE) ? HPTE_R_PP_RW : HPTE_R_PP_RO;
	u64 ea = region_ea(r, idx);

	if (!(r->flags & R_EXEC))
		prot |= HPTE_R_N;
	if (!pfn)
		pfn = (r->flags & R_SHARED) ? ea >> PAGE_SHIFT : frame_alloc(pc);
	r->pte[idx].slot = hpte_insert(pc, region_vsid(p, r), ea, pfn << PAGE_SHIFT, prot);
	r->pte[idx].pfn = (u32)pfn;
	if (idx < r->lo)
		r->lo = idx;
	if (idx + 1 > r->hi)
		r->hi = idx + 1;
	p->mapped++;
}

static void slb_load(const struct proc *p)
{
	__asm__ __volatile__("slbia" ::: "memory");
	for (u32 esid = 0; esid < 3; esid++) {
		u64 rs = (p->vsid[esid] << 12) | SLB_VSID_KP | (esid ? SLB_VSID_N : 0);
		u64 rb = ((u64)esid << 28) | SLB_ESID_V | (esid + 1);

		__asm__ __volatile__("slbmte %0, %1" : : "r"(rs), "r"(rb) : "memory");
	}
	isync();
}

void proc_create(struct percpu *pc, const struct job_args *args)
{
	struct proc *p = &pc->proc;
	u64 pfn;

	p->ctx = ctx_alloc();
	for (u32 esid = 0; esid < 3; esid++)
		p->vsid[esid] = vsid_of(p->ctx, esid);
	p->serial = atomic_inc32(&proc_serial);
	p->mapped = 0;
	pc->cnt[C_PROCS]++;

	/* the argument page, like exec copying argv: filled, then mapped */
	pfn = frame_alloc(pc);
	memcpy((void *)(pfn << PAGE_SHIFT), args, sizeof(*args));
	map_page(pc, &p->rg[RG_ARGS], 0, pfn);
	slb_load(p);
}

/* tear the whole address space down with H_BULK_REMOVE, four at a time */
struct bulk {
	u32 n;
	u64 tsh[4], tsl[4], pfn[4];
	u32 shared[4];
};

static void bulk_flush(struct percpu *pc, struct bulk *b)
{
	u64 io[10];
	long rc;

	if (!b->n)
		return;
	memset(io, 0, sizeof(io));
	io[0] = H_BULK_REMOVE;
	for (u32 i = 0; i < 4; i++) {
		io[1 + 2 * i] = i < b->n ? b->tsh[i] : H_BULK_END;
		io[2 + 2 * i] = i < b->n ? b->tsl[i] : 0;
	}
	rc = hcall(pc, io);
	if (rc != H_SUCCESS)
		panic("H_BULK_REMOVE failed: %ld", rc);
	for (u32 i = 0; i < b->n; i++) {
		u64 resp = io[1 + 2 * i];

		if ((resp & H_BULK_TYPE) != H_BULK_RESPONSE || (resp & H_BULK_CODE))
			panic("H_BULK_REMOVE entry %u (ptex 0x%lx): response 0x%016lx "
			      "(HPTE lost or changed)", i, b->tsh[i] & 0xffffffffffffUL, resp);
	}
	for (u32 i = 0; i < b->n; i++)
		if (!b->shared[i])
			frame_free(pc, b->pfn[i]);
	pc->cnt[C_PAGES_OUT] += b->n;
	b->n = 0;
}

static void unmap_single(struct percpu *pc, struct region *r, u32 idx)
{
	struct proc *p = &pc->proc;
	struct pte *e = &r->pte[idx];
	u64 ea = region_ea(r, idx);
	u64 io[10];
	long rc;

	memset(io, 0, sizeof(io));
	io[0] = H_REMOVE;
	io[1] = H_AVPN;
	io[2] = e->slot;
	io[3] = hpte_avpn(region_vsid(p, r), ea);
	rc = hcall(pc, io);
	if (rc != H_SUCCESS)
		panic("H_REMOVE of ea 0x%lx (ptex 0x%x) failed: %ld (HPTE lost?)", ea, e->slot, rc);
	if ((io[2] & HPTE_R_RPN) != ((u64)e->pfn << PAGE_SHIFT))
		panic("H_REMOVE of ea 0x%lx: HPTE mapped 0x%lx, expected 0x%lx",
		      ea, io[2] & HPTE_R_RPN, (u64)e->pfn << PAGE_SHIFT);
	if (!(r->flags & R_SHARED))
		frame_free(pc, e->pfn);
	e->pfn = 0;
	p->mapped--;
	pc->cnt[C_PAGES_OUT]++;
}

void proc_exit(struct percpu *pc)
{
	struct proc *p = &pc->proc;
	struct bulk b;

	b.n = 0;
	for (int ri = 0; ri < NREGION; ri++) {
		struct region *r = &p->rg[ri];

		for (u32 idx = r->lo; idx < r->hi; idx++) {
			struct pte *e = &r->pte[idx];
			u64 ea;

			if (!e->pfn)
				continue;
			ea = region_ea(r, idx);
			if (cfg.have_bulk) {
				b.tsh[b.n] = H_BULK_REQUEST | H_BULK_AVPN | e->slot;
				b.tsl[b.n] = hpte_avpn(region_vsid(p, r), ea);
				b.pfn[b.n] = e->pfn;
				b.shared[b.n] = !!(r->flags & R_SHARED);
				b.n++;
				if (b.n == 4)
					bulk_flush(pc, &b);
				e->pfn = 0;
				p->mapped--;
			} else {
				unmap_single(pc, r, idx);
			}
		}
		r->lo = r->npages;
		r->hi = 0;
	}
	bulk_flush(pc, &b);
	if (p->mapped)
		panic("process teardown left %lu pages", p->mapped);
	ctx_release(p->ctx);
}

static struct region *lookup(struct proc *p, u64 ea, u32 *idx)
{
	for (int ri = 0; ri < NREGION; ri++) {
		struct region *r = &p->rg[ri];

		if (ea >= r->base && ea < r->base + ((u64)r->npages << PAGE_SHIFT)) {
			*idx = (u32)((ea - r->base) >> PAGE_SHIFT);
			return r;
		}
	}
	return NULL;
}

void page_fault(struct percpu *pc, struct frame *f, u64 ea, u64 why, int exec)
{
	struct proc *p = &pc->proc;
	struct region *r;
	u32 idx;

	pc->cnt[exec ? C_ISI : C_DSI]++;
	r = lookup(p, ea, &idx);
	if (!r)
		panic("job %u: %s fault at unmapped address 0x%lx (pc 0x%lx)",
		      pc->cur_job, exec ? "instruction" : "data", ea, f->srr0);
	if (exec) {
		if (!(r->flags & R_EXEC) || (why & (SRR1_ISI_NOEXEC | SRR1_ISI_PROT)))
			panic("job %u: execute from non-executable 0x%lx", pc->cur_job, ea);
	} else {
		if (why & DSISR_PROT)
			panic("job %u: protection fault at 0x%lx (pc 0x%lx, %s)", pc->cur_job,
			      ea, f->srr0, (why & DSISR_STORE) ? "store" : "load");
		if ((why & DSISR_STORE) && !(r->flags & R_WRITE))
			panic("job %u: store to read-only 0x%lx", pc->cur_job, ea);
	}
	if (!(why & DSISR_NOPTE))
		panic("job %u: unexpected fault 0x%lx at 0x%lx", pc->cur_job, why, ea);
	if (r->pte[idx].pfn)
		panic("job %u: fault at 0x%lx, which is mapped (ptex 0x%x): HPTE lost",
		      pc->cur_job, ea, r->pte[idx].slot);
	map_page(pc, r, idx, 0);
	/* fault-around: enter the next pages of the region as well */
	if (r == &p->rg[RG_HEAP] || r == &p->rg[RG_TEXT])
		for (u32 k = 1; k < FAULT_AROUND && idx + k < r->npages; k++)
			if (!r->pte[idx + k].pfn)
				map_page(pc, r, idx + k, 0);
}

long sys_munmap(struct percpu *pc, u64 ea, u64 len)
{
	struct proc *p = &pc->proc;
	struct region *r;
	u32 idx;
	u64 end = ea + len;

	if ((ea | len) & (PAGE_SIZE - 1))
		return -1;
	r = lookup(p, ea, &idx);
	if (!r || r != &p->rg[RG_HEAP] || !lookup(p, end - 1, &idx))
		return -1;
	pc->cnt[C_MUNMAP]++;
	for (u64 a = ea; a < end; a += PAGE_SIZE) {
		idx = (u32)((a - r->base) >> PAGE_SHIFT);
		if (r->pte[idx].pfn)
			unmap_single(pc, r, idx);
	}
	if ((inject & INJECT_HPTE) && r->pte[r->lo].pfn) {
		/* drop the HPTE of the first heap page but keep it in the table */
		u64 io[10] = { H_REMOVE, H_AVPN, r->pte[r->lo].slot,
			       hpte_avpn(region_vsid(p, r), region_ea(r, r->lo)) };

		inject &= ~INJECT_HPTE;
		hcall(pc, io);
	}
	return 0;
}

long sys_mprotect(struct percpu *pc, u64 ea, u64 len)
{
	struct proc *p = &pc->proc;
	struct region *r;
	u32 idx;

	if ((ea | len) & (PAGE_SIZE - 1))
		return -1;
	r = lookup(p, ea, &idx);
	if (!r || r != &p->rg[RG_HEAP])
		return -1;
	for (u64 a = ea; a < ea + len; a += PAGE_SIZE) {
		struct pte *e;
		u64 io[10];
		long rc;

		idx = (u32)((a - r->base) >> PAGE_SHIFT);
		e = &r->pte[idx];
		if (!e->pfn)
			continue;
		memset(io, 0, sizeof(io));
		io[0] = H_PROTECT;
		io[1] = H_AVPN | HPTE_R_N | HPTE_R_PP_RO;
		io[2] = e->slot;
		io[3] = hpte_avpn(region_vsid(p, r), a);
		rc = hcall(pc, io);
		if (rc != H_SUCCESS)
			panic("H_PROTECT of ea 0x%lx failed: %ld (HPTE lost?)", a, rc);
	}
	return 0;
}
