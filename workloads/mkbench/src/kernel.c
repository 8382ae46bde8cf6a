/*
 * kernel.c - boot, console, hypercalls, interrupts, SMP and the "make"
 * jobserver of the mkbench guest.
 *
 * The kernel runs in real mode (MSR[IR] = MSR[DR] = 0) with external
 * interrupts off, except while idle in H_CEDE.  Jobs run in problem state
 * with translation on, in their own address spaces (mm.c), with interrupts
 * on: decrementer ticks at 250 Hz, XICS IPIs, page faults and system calls
 * enter the kernel through the vectors of head.S and land in trap().
 */
#include "kernel.h"

#define TICK_HZ		250
#define IDLE_TICK_HZ	10	/* tick period while a CPU waits in H_CEDE */
#define UNITS_PER_DIR	4
#define VERIFY_EVERY	8	/* about one unit in 8 is compiled twice */
#define MAKE_CPU	0	/* where "make" reaps its children */

struct config cfg;
struct percpu percpu[MAX_CPUS];
u32 inject;

/* the assembly uses these offsets */
_Static_assert(__builtin_offsetof(struct percpu, r1) == PC_R1, "PC_R1");
_Static_assert(__builtin_offsetof(struct percpu, r3) == PC_R3, "PC_R3");
_Static_assert(__builtin_offsetof(struct percpu, r4) == PC_R4, "PC_R4");
_Static_assert(__builtin_offsetof(struct percpu, ksp) == PC_KSP, "PC_KSP");
_Static_assert(__builtin_offsetof(struct percpu, toc) == PC_TOC, "PC_TOC");
_Static_assert(__builtin_offsetof(struct percpu, sched) == PC_SCHED, "PC_SCHED");
_Static_assert(__builtin_offsetof(struct percpu, cr_save) == PC_CR, "PC_CR");
_Static_assert(__builtin_offsetof(struct frame, gpr[31]) == F_GPR(31), "F_GPR");
_Static_assert(__builtin_offsetof(struct frame, vec) == F_VEC, "F_VEC");
_Static_assert(sizeof(struct frame) == FRAME_SIZE, "FRAME_SIZE");
_Static_assert(sizeof(struct job_args) <= PAGE_SIZE, "job_args");

/* ---- hypercalls ------------------------------------------------------- */

long hcall(struct percpu *pc, u64 *io)
{
	int c;

	switch (io[0]) {
	case H_ENTER: c = C_HC_ENTER; break;
	case H_REMOVE: c = C_HC_REMOVE; break;
	case H_BULK_REMOVE: c = C_HC_BULK; break;
	case H_PROTECT: c = C_HC_PROTECT; break;
	case H_CEDE: c = C_HC_CEDE; break;
	case H_IPI: c = C_HC_IPI; break;
	case H_XIRR: c = C_HC_XIRR; break;
	case H_EOI: c = C_HC_EOI; break;
	case H_CPPR: c = C_HC_CPPR; break;
	case H_PUT_TERM_CHAR: c = C_HC_TERM; break;
	case H_RTAS: c = C_HC_RTAS; break;
	default: c = C_HC_OTHER; break;
	}
	if (pc)
		pc->cnt[c]++;
	return hcall_raw(io);
}

static long hcall4(u64 op, u64 a, u64 b, u64 c, u64 d)
{
	u64 io[10] = { op, a, b, c, d };

	return hcall(this_cpu(), io);
}

/* ---- console ---------------------------------------------------------- */

static spinlock_t console_lock;

static void console_write(const char *s, size_t n)
{
	while (n) {
		u64 io[10] = { 0 };
		size_t k = n < 16 ? n : 16;
		u64 w[2] = { 0, 0 };

		for (size_t i = 0; i < k; i++)
			w[i / 8] |= (u64)(u8)s[i] << (56 - 8 * (i % 8));
		io[0] = H_PUT_TERM_CHAR;
		io[1] = cfg.termno;
		io[2] = k;
		io[3] = w[0];
		io[4] = w[1];
		if (hcall(this_cpu(), io) == H_BUSY)
			continue;
		s += k;
		n -= k;
	}
}

static int vprintk(const char *fmt, __builtin_va_list ap)
{
	char buf[512];
	int n = vsnformat(buf, sizeof(buf), fmt, ap);

	if (n > (int)sizeof(buf) - 1)
		n = sizeof(buf) - 1;
	spin_lock(&console_lock);
	console_write(buf, (size_t)n);
	spin_unlock(&console_lock);
	return n;
}

int printk(const char *fmt, ...)
{
	__builtin_va_list ap;
	int n;

	__builtin_va_start(ap, fmt);
	n = vprintk(fmt, ap);
	__builtin_va_end(ap);
	return n;
}

/* ---- RTAS (through the H_RTAS hypercall, big-endian argument buffer) -- */

static spinlock_t rtas_lock;
static u32 rtas_buf[16] __attribute__((aligned(16)));

static u32 bswap32(u32 v) { return __builtin_bswap32(v); }

int rtas_call(u32 token, int nargs, int nret, u32 *ret, ...)
{
	__builtin_va_list ap;
	u64 io[10] = { 0 };
	int status;

	spin_lock(&rtas_lock);
	rtas_buf[0] = bswap32(token);
	rtas_buf[1] = bswap32((u32)nargs);
	rtas_buf[2] = bswap32((u32)nret);
	__builtin_va_start(ap, ret);
	for (int i = 0; i < nargs; i++)
		rtas_buf[3 + i] = bswap32(__builtin_va_arg(ap, u32));
	__builtin_va_end(ap);
	for (int i = 0; i < nret; i++)
		rtas_buf[3 + nargs + i] = 0;
	io[0] = H_RTAS;
	io[1] = (u64)rtas_buf;
	hcall(this_cpu(), io);
	status = (int)bswap32(rtas_buf[3 + nargs]);
	for (int i = 1; ret && i < nret; i++)
		ret[i - 1] = bswap32(rtas_buf[3 + nargs + i]);
	spin_unlock(&rtas_lock);
	return status;
}

void power_off(void)
{
	if (cfg.tok_power_off)
		rtas_call(cfg.tok_power_off, 2, 1, NULL, 0xffffffffu, 0xffffffffu);
	for (;;)
		hcall4(H_CEDE, 0, 0, 0, 0);
}

static volatile u32 panicking;

void panic(const char *fmt, ...)
{
	__builtin_va_list ap;
	char buf[400];
	int n;

	irq_disable();
	if (atomic_inc32(&panicking) != 1)
		for (;;)
			;	/* another CPU is reporting */
	n = snformat(buf, sizeof(buf), "\nMKBENCH-ERROR cpu%u: ", this_cpu()->index);
	__builtin_va_start(ap, fmt);
	n += vsnformat(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	__builtin_va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	/* wait a little for a line being printed, then take the console anyway */
	for (u64 t0 = mftb(); console_lock.v && mftb() - t0 < cfg.tb_hz / 20;)
		;
	console_lock.v = 1;
	console_write(buf, (size_t)n);
	if (cfg.tok_os_term) {
		static char msg[] __attribute__((aligned(8))) = "mkbench self-check failed";

		rtas_call(cfg.tok_os_term, 1, 1, NULL, (u32)(u64)msg);
	}
	power_off();
}

/* ---- time ------------------------------------------------------------- */

static u64 tick_period, idle_period;

static void set_dec(u64 ticks)
{
	if (ticks > 0x7fffffffUL)
		ticks = 0x7fffffffUL;
	if (ticks < 1000)
		ticks = 1000;
	mtspr(SPRN_DEC, ticks);
}

static void tick_start(struct percpu *pc)
{
	u64 now = mftb();

	pc->in_idle = 0;
	pc->next_tick = now + tick_period;
	set_dec(tick_period);
}

static void tick(struct percpu *pc)
{
	u64 now = mftb();

	if (pc->in_idle) {
		pc->cnt[C_IDLE_TICK]++;
		set_dec(idle_period);
		return;
	}
	pc->cnt[C_TICK]++;
	pc->next_tick += tick_period;
	if ((s64)(pc->next_tick - now) <= 0)
		pc->next_tick = now + tick_period;
	set_dec(pc->next_tick - now);
}

/* ---- XICS ------------------------------------------------------------- */

static void send_ipi(struct percpu *from, u32 cpu)
{
	from->cnt[C_IPI_SENT]++;
	hcall4(H_IPI, percpu[cpu].server, IPI_PRIORITY, 0, 0);
}

static void make_reap(struct percpu *pc);

static void external(struct percpu *pc)
{
	u64 io[10] = { H_XIRR, 0xff };
	u32 xirr, src;

	pc->cnt[C_EXT]++;
	hcall(pc, io);
	xirr = (u32)io[1];
	src = xirr & 0xffffff;
	if (!src)
		return;		/* spurious */
	if (src == XICS_IPI) {
		pc->cnt[C_IPI_RECV]++;
		hcall4(H_IPI, pc->server, 0xff, 0, 0);
	}
	hcall4(H_EOI, xirr, 0, 0, 0);
	if (pc->index == MAKE_CPU)
		make_reap(pc);
}

/* ---- the make: jobs, dependencies and the jobserver ------------------- */

struct job {
	u32 kind;
	u32 unit;		/* compile: unit; link: directory */
	u32 deps;		/* unfinished prerequisites */
	u32 parent;		/* job that depends on this one */
	u32 verify_of;		/* verification compile (and its assembler): the unit it repeats */
	u32 cpu;
	volatile u32 done;
	u64 result;
	u64 t0, t1;
};

#define NO_PARENT	(~1u)	/* a compile: its assembler carries the result on */

/* compile -> assembler: messages in order; the reader waits for the next */
struct pipe {
	u64 msg[PIPE_MAX];
	volatile u32 n;		/* messages written */
	volatile u32 waiter;	/* 1 + CPU of the assembler waiting for message n */
};

static struct {
	spinlock_t lock;
	u32 njobs, nunits, ndirs, nverify;
	u32 first_link, final;
	u32 asm_base;		/* assembler of compile job c: asm_base + c */
	struct pipe *pipes;	/* one per compile job */
	u32 *queue;
	u32 qhead, qtail;
	u32 *exited;		/* make's inbox: jobs that exited, not yet reaped */
	u32 ehead, etail;
	u32 tokens;
	volatile u32 finished;
	struct job *jobs;
} js;

static u64 opt_jobs, opt_units = 6, opt_size = 400, opt_seed = 1;
/* closed=K: the closed-form loop instead of make (see closed_loop) */
static u64 opt_closed;
/* hold=KB: each of its hypercalls copies KB KiB with H_LOGICAL_MEMOP instead */
#define CLOSED_HOLD_MAX_KB	32
static u64 opt_hold;
static u64 t_start, t_end;
static u64 base_cnt[NCOUNT];
static volatile u32 go;

static const char *kind_name(u32 k)
{
	return k == JOB_COMPILE ? "cc" : k == JOB_ASM ? "as" : k == JOB_LINK ? "ld" : "ld-final";
}

static int is_sampled(u32 unit)
{
	/* deterministic sample, independent of N; unit 0 always checked */
	return unit == 0 || mix64(opt_seed * 0x9e3779b97f4a7c15UL + unit) % VERIFY_EVERY == 0;
}

static u8 boot_pool[768 << 10] __attribute__((aligned(128)));

static void *boot_alloc(u64 size)
{
	static u64 next;
	void *p;

	if (!next)
		next = (u64)boot_pool;
	p = (void *)next;
	next = ALIGN_UP(next + size, 16);
	if (next > (u64)boot_pool + sizeof(boot_pool))
		panic("boot pool exhausted");
	memset(p, 0, size);
	return p;
}

static void enqueue(u32 id)
{
	js.queue[js.qtail++ % js.njobs] = id;
}

/*
 * The ready queue: compiles in unit order, each verification right after its
 * unit, and each assembler L compiles after its own, L = (job slots usable at
 * once) - 1.  So the first jobs to start are as many compiles as can run at
 * once, and later an assembler starts when a CPU frees up, often while its
 * compile still runs (then it waits on the pipe).  An assembler queued right
 * after its compile (L = 0 at any N) would hold its CPU waiting for a compile
 * it keeps pace with: two job slots for one pipeline's work, and at N = 2 one
 * CPU mostly idle.  FIFO order still starts every compile before its
 * assembler, so an assembler waits only for a running compile and a compile
 * never waits: no deadlock at any N or jobs=.
 */
static void order_queue(u32 U, u32 V)
{
	u32 slots = (u32)opt_jobs < cfg.ncpus ? (u32)opt_jobs : cfg.ncpus;
	u32 lag = slots ? slots - 1 : 0;
	u32 *comp = boot_alloc((U + V) * sizeof(u32));
	u32 n = 0;

	for (u32 u = 0, v = U; u < U; u++) {
		comp[n++] = u;
		if (is_sampled(u))
			comp[n++] = v++;
	}
	for (u32 k = 0; k < n; k++) {
		enqueue(comp[k]);
		if (k >= lag)
			enqueue(js.asm_base + comp[k - lag]);
	}
	for (u32 k = n > lag ? n - lag : 0; k < n; k++)
		enqueue(js.asm_base + comp[k]);
}

static void build_dag(void)
{
	u32 U = (u32)opt_units, D = (U + UNITS_PER_DIR - 1) / UNITS_PER_DIR, V = 0;
	u32 id;

	for (u32 u = 0; u < U; u++)
		V += (u32)is_sampled(u);
	if (D > MAX_INPUTS)
		panic("too many directories (%u > %u)", D, MAX_INPUTS);
	js.nunits = U;
	js.ndirs = D;
	js.nverify = V;
	js.njobs = 2 * (U + V) + D + 1;
	js.first_link = U + V;
	js.final = U + V + D;
	js.asm_base = U + V + D + 1;
	js.jobs = boot_alloc(js.njobs * sizeof(struct job));
	js.pipes = boot_alloc((U + V) * sizeof(struct pipe));
	js.queue = boot_alloc(js.njobs * sizeof(u32));
	js.exited = boot_alloc(js.njobs * sizeof(u32));
	for (u32 d = 0; d < D; d++) {
		struct job *l = &js.jobs[js.first_link + d];

		l->kind = JOB_LINK;
		l->unit = d;
		l->parent = js.final;
		l->verify_of = ~0u;
	}
	js.jobs[js.final].kind = JOB_FINAL;
	js.jobs[js.final].deps = D;
	js.jobs[js.final].parent = ~0u;
	js.jobs[js.final].verify_of = ~0u;
	id = U;
	for (u32 u = 0; u < U; u++) {
		struct job *c = &js.jobs[u];

		c->kind = JOB_COMPILE;
		c->unit = u;
		c->parent = js.first_link + u / UNITS_PER_DIR;
		c->verify_of = ~0u;
		js.jobs[c->parent].deps++;
		if (is_sampled(u)) {
			struct job *v = &js.jobs[id++];

			*v = *c;
			v->verify_of = u;
			js.jobs[c->parent].deps++;
		}
	}
	/*
	 * each compile pipes its output to an assembler (a job of its own, like
	 * cc1 | as); the assembler finishes the unit, so it is the one the
	 * directory's link waits for
	 */
	for (u32 c = 0; c < U + V; c++) {
		struct job *a = &js.jobs[js.asm_base + c];

		*a = js.jobs[c];
		a->kind = JOB_ASM;
		js.jobs[c].parent = NO_PARENT;
	}
	order_queue(U, V);
	js.tokens = (u32)opt_jobs;
}

static void fill_args(struct job_args *a, u32 id)
{
	struct job *j = &js.jobs[id];

	memset(a, 0, sizeof(*a));
	a->kind = j->kind;
	a->seed = opt_seed;
	a->unit = j->unit;
	a->size = opt_size;
	if (j->kind == JOB_LINK) {
		u32 d = j->unit;

		for (u32 u = d * UNITS_PER_DIR; u < js.nunits && u < (d + 1) * UNITS_PER_DIR; u++)
			a->input[a->ninputs++] = js.jobs[js.asm_base + u].result;
	} else if (j->kind == JOB_FINAL) {
		for (u32 d = 0; d < js.ndirs; d++)
			a->input[a->ninputs++] = js.jobs[js.first_link + d].result;
	}
}

static void sum_counters(u64 *out)
{
	memset(out, 0, NCOUNT * sizeof(u64));
	for (u32 i = 0; i < cfg.ncpus; i++)
		for (u32 c = 0; c < NCOUNT; c++)
			out[c] += ((volatile u64 *)percpu[i].cnt)[c];
}

static void report(void)
{
	u64 c[NCOUNT];
	u64 hcalls = 0, el = t_end - t_start;
	u64 ms = el / (cfg.tb_hz / 1000);

	sum_counters(c);
	for (u32 i = 0; i < NCOUNT; i++)
		c[i] -= base_cnt[i];
	for (u32 i = C_HC_ENTER; i <= C_HC_OTHER; i++)
		hcalls += c[i];
	printk("mkbench: done in %lu.%03lu s guest time\n", ms / 1000, ms % 1000);
	printk("MKBENCH-STATS h_enter=%lu h_remove=%lu h_bulk_remove=%lu h_protect=%lu "
	       "h_cede=%lu h_ipi=%lu procs=%lu h_xirr=%lu h_eoi=%lu h_put_term_char=%lu "
	       "h_other=%lu dsi=%lu isi=%lu syscalls=%lu munmaps=%lu pages_in=%lu "
	       "idle_ticks=%lu lock_spins=%lu pipe_waits=%lu\n",
	       c[C_HC_ENTER], c[C_HC_REMOVE], c[C_HC_BULK], c[C_HC_PROTECT], c[C_HC_CEDE],
	       c[C_HC_IPI], c[C_PROCS], c[C_HC_XIRR], c[C_HC_EOI], c[C_HC_TERM],
	       c[C_HC_CPPR] + c[C_HC_RTAS] + c[C_HC_OTHER], c[C_DSI], c[C_ISI], c[C_SYSCALL],
	       c[C_MUNMAP], c[C_PAGES_IN], c[C_IDLE_TICK], c[C_LOCK_SPINS], c[C_PIPE_WAIT]);
	printk("MKBENCH-RESULT cpus=%u jobs=%lu units=%lu size=%lu checksum=0x%016lx "
	       "elapsed_tb=%lu tb_hz=%lu faults=%lu hcalls=%lu flush_hcalls=%lu ipis=%lu "
	       "ticks=%lu\n",
	       cfg.ncpus, opt_jobs, opt_units, opt_size, js.jobs[js.final].result, el,
	       cfg.tb_hz, c[C_DSI] + c[C_ISI], hcalls,
	       c[C_HC_REMOVE] + c[C_HC_BULK] + c[C_HC_PROTECT], c[C_IPI_SENT], c[C_TICK]);
}

/*
 * "make" lives on the boot CPU.  A job that exits posts itself to make's
 * inbox and, like a SIGCHLD waking a parent on another CPU, sends make's CPU
 * an IPI.  make reaps exited jobs there (in the IPI handler, or directly when
 * the job ran on its own CPU): it releases the dependants whose
 * prerequisites are all done and wakes idle CPUs to run them.
 */
static void make_reap(struct percpu *pc)
{
	u32 wake[MAX_CPUS], nwake = 0, last = 0, want;

	spin_lock(&js.lock);
	while (js.ehead != js.etail) {
		struct job *j = &js.jobs[js.exited[js.ehead++ % js.njobs]];
		struct job *p;

		/* as in GNU make, the job slot comes back when the child is reaped */
		js.tokens++;
		if (j->parent == NO_PARENT)
			continue;
		if (j->parent == ~0u) {
			js.finished = 1;
			last = 1;
			continue;
		}
		p = &js.jobs[j->parent];
		if (--p->deps == 0)
			enqueue(j->parent);
	}
	/* wake as many idle CPUs as there are runnable jobs with a free slot */
	want = js.qtail - js.qhead;
	if (want > js.tokens)
		want = js.tokens;
	if (pc->idle && want) {
		/* reaping in the idle loop: this CPU takes one itself */
		pc->idle = 0;
		want--;
	}
	for (u32 i = 0; i < cfg.ncpus && nwake < want; i++)
		if (percpu[i].idle && i != pc->index) {
			percpu[i].idle = 0;
			wake[nwake++] = i;
		}
	spin_unlock(&js.lock);
	for (u32 i = 0; i < nwake; i++)
		send_ipi(pc, wake[i]);
	if (last) {
		t_end = js.jobs[js.final].t1;
		report();
		power_off();
	}
}

/* a job exited: record its result, give back its token, tell make */
static void complete_job(struct percpu *pc, u32 id, u64 result)
{
	struct job *j = &js.jobs[id];
	u64 ms = (j->t1 - j->t0) / (cfg.tb_hz / 1000);

	if (j->kind == JOB_COMPILE || j->kind == JOB_ASM)
		printk("mkbench: cpu%u %s unit %u%s -> %016lx (%lu ms)\n", pc->index,
		       kind_name(j->kind), j->unit, j->verify_of != ~0u ? " (again)" : "",
		       result, ms);
	else
		printk("mkbench: cpu%u %s dir %u -> %016lx (%lu ms)\n", pc->index,
		       kind_name(j->kind), j->unit, result, ms);

	spin_lock(&js.lock);
	j->result = result;
	j->done = 1;
	js.exited[js.etail++ % js.njobs] = id;
	spin_unlock(&js.lock);
	if (pc->index == MAKE_CPU)
		make_reap(pc);
	else
		send_ipi(pc, MAKE_CPU);
}

/* before a link runs: the repeated compiles must agree with the originals */
static void verify_inputs(u32 id)
{
	for (u32 v = js.nunits; v < js.first_link; v++) {
		struct job *a = &js.jobs[js.asm_base + v];
		struct job *b = &js.jobs[js.asm_base + a->verify_of];

		if (a->parent != id)
			continue;
		if (a->result != b->result)
			panic("unit %u compiled twice gave different checksums: 0x%016lx on cpu%u, "
			      "0x%016lx on cpu%u", b->unit, b->result, b->cpu, a->result, a->cpu);
	}
}

static void run_one(struct percpu *pc, u32 id)
{
	struct job *j = &js.jobs[id];
	struct job_args args;
	struct frame jf;
	u64 result;

	if (j->kind == JOB_LINK)
		verify_inputs(id);
	fill_args(&args, id);
	j->cpu = pc->index;
	j->t0 = mftb();
	pc->cur_job = id;
	proc_create(pc, &args);

	memset(&jf, 0, sizeof(jf));
	jf.srr0 = (u64)job_main;
	jf.srr1 = MSR_JOB;
	jf.gpr[1] = JOB_STACK_TOP - 128;
	jf.gpr[2] = pc->toc;
	jf.gpr[3] = JOB_ARGS_BASE;
	jf.gpr[12] = (u64)job_main;
	result = run_job(&jf, pc);

	proc_exit(pc);
	j->t1 = mftb();
	if ((inject & INJECT_POISON) && pc->nfree) {
		/* as if a stale translation let the job write after the free */
		inject &= ~INJECT_POISON;
		((volatile u64 *)((u64)pc->free[pc->nfree - 1] << PAGE_SHIFT))[7] = 0x1234;
	}
	if ((inject & INJECT_RESULT) && j->kind == JOB_ASM && j->verify_of != ~0u) {
		inject &= ~INJECT_RESULT;
		result ^= 1;
	}
	complete_job(pc, id, result);
}

static void idle_wait(struct percpu *pc)
{
	/* interrupts are off: an IPI sent after we set idle is still pending */
	pc->in_idle = 1;
	set_dec(idle_period);
	hcall4(H_CEDE, 0, 0, 0, 0);	/* enables EE; interrupts are taken on return */
	irq_disable();
	tick_start(pc);
}

static void scheduler(struct percpu *pc) __attribute__((noreturn));
static void scheduler(struct percpu *pc)
{
	while (!go)
		idle_wait(pc);
	for (;;) {
		spin_lock(&js.lock);
		if (js.finished) {
			spin_unlock(&js.lock);
			for (;;)
				idle_wait(pc);
		}
		if (js.qhead != js.qtail && js.tokens) {
			u32 id = js.queue[js.qhead++ % js.njobs];

			js.tokens--;
			spin_unlock(&js.lock);
			run_one(pc, id);
			continue;
		}
		pc->idle = 1;
		spin_unlock(&js.lock);
		idle_wait(pc);
		pc->idle = 0;
	}
}

/* ---- interrupts ------------------------------------------------------- */

/*
 * A job reported a failed self-check with an address of its heap in the
 * third argument: show how the kernel maps that page and what the frame
 * holds, to tell a corrupted translation from corrupted data.
 */
static void show_mapping(struct percpu *pc, u64 ea)
{
	struct region *r = &pc->proc.rg[RG_HEAP];
	u64 idx = (ea - r->base) >> PAGE_SHIFT;

	if (ea < r->base || idx >= r->npages)
		return;
	printk("mkbench: ea 0x%lx: page %lu, frame 0x%lx, ptex 0x%x\n", ea, idx,
	       (u64)r->pte[idx].pfn << PAGE_SHIFT, r->pte[idx].slot);
	if (r->pte[idx].pfn) {
		u64 *q = (u64 *)(((u64)r->pte[idx].pfn << PAGE_SHIFT) + (ea & 0xff8));

		printk("mkbench: frame data at 0x%lx: %016lx %016lx\n", (u64)q, q[0], q[1]);
	}
}

/* the compile running on this CPU sends its assembler the next message */
static void pipe_write(struct percpu *pc, u64 v)
{
	struct job *j = &js.jobs[pc->cur_job];
	struct pipe *p = &js.pipes[pc->cur_job];
	u32 w;

	if (j->kind != JOB_COMPILE)
		panic("job %u (%s): pipe write", pc->cur_job, kind_name(j->kind));
	spin_lock(&js.lock);
	if (p->n >= PIPE_MAX)
		panic("job %u: pipe overflow", pc->cur_job);
	p->msg[p->n] = v;
	lwsync();
	p->n++;
	w = p->waiter;
	p->waiter = 0;
	spin_unlock(&js.lock);
	/* the reader waits on another CPU (in H_CEDE): wake it like a pipe write */
	if (w && w - 1 != pc->index)
		send_ipi(pc, w - 1);
}

/*
 * The assembler on this CPU wants message i of its compile.  Jobs are not
 * preempted, so a reader that must wait keeps its CPU and cedes it to the
 * hypervisor until the writer's IPI (or the idle timeout) ends the cede.
 * The compile started before its assembler (queue order) and never waits,
 * so the message comes.
 */
static u64 pipe_read(struct percpu *pc, u64 i)
{
	struct job *j = &js.jobs[pc->cur_job];
	struct pipe *p;
	u64 v;

	if (j->kind != JOB_ASM || i >= PIPE_MAX)
		panic("job %u (%s): pipe read %lu", pc->cur_job, kind_name(j->kind), i);
	p = &js.pipes[pc->cur_job - js.asm_base];
	for (;;) {
		spin_lock(&js.lock);
		if (p->n > i) {
			v = p->msg[i];
			spin_unlock(&js.lock);
			return v;
		}
		p->waiter = pc->index + 1;
		spin_unlock(&js.lock);
		pc->cnt[C_PIPE_WAIT]++;
		idle_wait(pc);
	}
}

static void do_syscall(struct percpu *pc, struct frame *f)
{
	u64 nr = f->gpr[3];

	pc->cnt[C_SYSCALL]++;
	switch (nr) {
	case SYS_EXIT:
		resume_sched(pc, f->gpr[4]);
	case SYS_MUNMAP:
		f->gpr[3] = (u64)sys_munmap(pc, f->gpr[4], f->gpr[5]);
		break;
	case SYS_MPROTECT:
		f->gpr[3] = (u64)sys_mprotect(pc, f->gpr[4], f->gpr[5]);
		break;
	case SYS_PIPE_WRITE:
		pipe_write(pc, f->gpr[4]);
		f->gpr[3] = 0;
		break;
	case SYS_PIPE_READ:
		f->gpr[3] = pipe_read(pc, f->gpr[4]);
		break;
	case SYS_FAIL:
		show_mapping(pc, f->gpr[6]);
		panic("job %u (%s %u) self-check failed: code %lu, 0x%016lx 0x%016lx",
		      pc->cur_job, kind_name(js.jobs[pc->cur_job].kind),
		      js.jobs[pc->cur_job].unit, f->gpr[4], f->gpr[5], f->gpr[6]);
	default:
		panic("job %u: bad system call %lu", pc->cur_job, nr);
	}
}

void trap(struct frame *f);
void trap(struct frame *f)
{
	struct percpu *pc = this_cpu();
	int user = !!(f->srr1 & MSR_PR);

	switch (f->vec) {
	case 0x900:
		tick(pc);
		return;
	case 0x500:
		external(pc);
		return;
	case 0x300:
		if (user) {
			page_fault(pc, f, f->dar, f->dsisr, 0);
			return;
		}
		break;
	case 0x400:
		if (user) {
			page_fault(pc, f, f->srr0, f->srr1, 1);
			return;
		}
		break;
	case 0xc00:
		if (user) {
			do_syscall(pc, f);
			return;
		}
		break;
	}
	panic("unexpected interrupt 0x%lx in %s mode: srr0 0x%lx srr1 0x%lx dar 0x%lx "
	      "dsisr 0x%lx lr 0x%lx", f->vec, user ? "job" : "kernel", f->srr0, f->srr1,
	      f->dar, f->dsisr, f->lr);
}

/* ---- boot ------------------------------------------------------------- */

static u64 parse_num(const char *s)
{
	u64 v = 0;
	int base = 10;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	for (;; s++) {
		int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		v = v * (u64)base + (u64)d;
	}
	return v;
}

static void parse_bootargs(void)
{
	char *s = cfg.bootargs;

	while (*s) {
		char *w = s, *eq;

		while (*s && *s != ' ')
			s++;
		if (*s)
			*s++ = 0;
		eq = w;
		while (*eq && *eq != '=')
			eq++;
		if (!*eq)
			continue;
		*eq++ = 0;
		if (!strcmp(w, "jobs"))
			opt_jobs = parse_num(eq);
		else if (!strcmp(w, "units"))
			opt_units = parse_num(eq);
		else if (!strcmp(w, "size"))
			opt_size = parse_num(eq);
		else if (!strcmp(w, "seed"))
			opt_seed = parse_num(eq);
		else if (!strcmp(w, "closed"))
			opt_closed = parse_num(eq);
		else if (!strcmp(w, "hold"))
			opt_hold = parse_num(eq);
		else if (!strcmp(w, "bulk"))
			cfg.have_bulk = cfg.have_bulk && parse_num(eq);
		else if (!strcmp(w, "inject"))
			inject = !strcmp(eq, "poison") ? INJECT_POISON :
				 !strcmp(eq, "result") ? INJECT_RESULT :
				 !strcmp(eq, "hpte") ? INJECT_HPTE : 0;
		else
			printk("mkbench: ignoring unknown parameter %s=%s\n", w, eq);
		eq[-1] = '=';
		if (s > w && !s[-1] && *s)
			s[-1] = ' ';
	}
	if (!opt_jobs)
		opt_jobs = cfg.ncpus;
	if (!opt_units)
		opt_units = 1;
	if (!opt_size)
		opt_size = 1;
	if (opt_units > 2000 && !opt_closed)
		opt_units = 2000;
	if (opt_hold > CLOSED_HOLD_MAX_KB)
		opt_hold = CLOSED_HOLD_MAX_KB;
}

static void cpu_setup(struct percpu *pc)
{
	u64 toc;

	__asm__ __volatile__("mr %0, 2" : "=r"(toc));
	pc->toc = toc;
	mtspr(SPRN_SPRG0, pc);
	irq_disable();
	hcall4(H_CPPR, 0xff, 0, 0, 0);
	tick_start(pc);
}

/*
 * closed=K: a workload whose speedup has a closed form.  The units rounds are
 * dealt out to the CPUs (round r to CPU r mod N); a round computes for size
 * thousand steps without touching memory (time C), then makes K hypercalls,
 * each done by the hypervisor under its global lock (time S in all): an
 * H_PAGE_INIT that copies a 4 KB page, or with hold=KB an H_LOGICAL_MEMOP that
 * copies KB KiB from a source every CPU reads into this CPU's own buffer.  A
 * longer hold makes S large against the fixed cost of taking the lock and
 * entering the hypervisor, which grows when CPUs share the lock's cache lines
 * (with one page S is under a microsecond).  With only the lock
 * shared, N CPUs finish in max(T1/N, rounds*S): the speedup is
 * min(N, (C+S)/S).  The checksum sums each round's result, so it does not
 * depend on which CPU ran the round.
 */
static u8 closed_page[MAX_CPUS][2][PAGE_SIZE] __attribute__((aligned(PAGE_SIZE)));
/*
 * hold=: one source for every CPU, read only, so that it stays in every cache,
 * and a destination per CPU.
 */
static u8 closed_src[CLOSED_HOLD_MAX_KB * 1024] __attribute__((aligned(PAGE_SIZE)));
static u8 closed_dst[MAX_CPUS][CLOSED_HOLD_MAX_KB * 1024] __attribute__((aligned(PAGE_SIZE)));
static volatile u64 closed_sum[MAX_CPUS];
static volatile u32 closed_done;

static void closed_loop(struct percpu *pc) __attribute__((noreturn));
static void closed_loop(struct percpu *pc)
{
	u64 sum = 0;

	while (!go)
		idle_wait(pc);
	for (u64 r = pc->index; r < opt_units; r += cfg.ncpus) {
		u64 x = mix64(opt_seed + r);

		for (u64 i = 0; i < opt_size * 1000; i++)
			x = x * 6364136223846793005UL + (x >> 29) + i;
		for (u64 k = 0; k < opt_closed; k++) {
			/* H_PAGE_INIT(copy, dst, src) between this CPU's two pages */
			u64 io[10] = { H_PAGE_INIT, H_COPY_PAGE,
				       (u64)closed_page[pc->index][(k + 1) & 1],
				       (u64)closed_page[pc->index][k & 1] };

			if (opt_hold) {
				/* H_LOGICAL_MEMOP(dst, src, 8-byte elements, count, copy) */
				io[0] = H_LOGICAL_MEMOP;
				io[1] = (u64)closed_dst[pc->index];
				io[2] = (u64)closed_src;
				io[3] = 3;
				io[4] = opt_hold * 128;
				io[5] = 0;
			}
			hcall(pc, io);
			if (io[0] != H_SUCCESS)
				panic("closed-form hypercall failed: %ld", (long)io[0]);
		}
		sum += x;
	}
	closed_sum[pc->index] = sum;
	lwsync();
	if (atomic_inc32(&closed_done) == cfg.ncpus) {
		u64 c[NCOUNT], hcalls = 0, checksum = 0;

		t_end = mftb();
		sync();
		for (u32 i = 0; i < cfg.ncpus; i++)
			checksum += closed_sum[i];
		sum_counters(c);
		for (u32 i = C_HC_ENTER; i <= C_HC_OTHER; i++)
			hcalls += c[i] - base_cnt[i];
		printk("MKBENCH-RESULT cpus=%u jobs=%lu units=%lu size=%lu checksum=0x%016lx "
		       "elapsed_tb=%lu tb_hz=%lu faults=0 hcalls=%lu flush_hcalls=0 ipis=0 "
		       "ticks=0 closed=%lu\n",
		       cfg.ncpus, opt_jobs, opt_units, opt_size, checksum, t_end - t_start,
		       cfg.tb_hz, hcalls, opt_closed);
		power_off();
	}
	for (;;)
		idle_wait(pc);
}

void kmain_secondary(u64 index);
void kmain_secondary(u64 index)
{
	struct percpu *pc = &percpu[index];

	cpu_setup(pc);
	sync();
	pc->online = 1;
	if (opt_closed)
		closed_loop(pc);
	scheduler(pc);
}

static void start_secondaries(void)
{
	for (u32 i = 1; i < cfg.ncpus; i++) {
		int st = rtas_call(cfg.tok_start_cpu, 3, 1, NULL, cfg.server[i],
				   (u32)(u64)secondary_entry, i);
		u64 t0 = mftb();

		if (st)
			panic("start-cpu of server %u failed: %d", cfg.server[i], st);
		while (!percpu[i].online)
			if (mftb() - t0 > 5 * cfg.tb_hz)
				panic("cpu%u (server %u) did not come up", i, cfg.server[i]);
	}
}

void kmain_boot(const void *fdt);
void kmain_boot(const void *fdt)
{
	struct percpu *pc = &percpu[0];
	u64 io[10] = { 0 };
	int rc;

	/* SPRG0 first: locks and hcall counters use it */
	mtspr(SPRN_SPRG0, pc);

	/* interrupt vectors at physical 0, then little-endian interrupts */
	memcpy((void *)0, vectors_start, (u64)(vectors_end - vectors_start));
	for (u64 a = 0; a < (u64)(vectors_end - vectors_start); a += 32)
		__asm__ __volatile__("dcbst 0, %0; sync; icbi 0, %0" : : "r"(a) : "memory");
	sync();
	isync();
	io[0] = H_SET_MODE;
	io[1] = 1;	/* mflags: little-endian interrupts */
	io[2] = 4;	/* resource: H_SET_MODE_RESOURCE_LE */
	hcall(pc, io);

	cfg.termno = 0;
	rc = fdt_parse(fdt);
	if (!cfg.termno)
		cfg.termno = 0x71000000;	/* QEMU's first vty */
	if (io[0] != H_SUCCESS)
		panic("H_SET_MODE(LE) failed: %ld", (long)io[0]);

	printk("\nmkbench: make -j N in a bottle\n");
	if (rc)
		panic("bad device tree at %p (%d)", fdt, rc);
	/* order the CPUs with the boot CPU first */
	for (u32 i = 0; i < cfg.ncpus; i++)
		if (cfg.server[i] == cfg.boot_server && i) {
			u32 t = cfg.server[0];

			cfg.server[0] = cfg.server[i];
			cfg.server[i] = t;
		}
	if (!cfg.ncpus || !cfg.tb_hz || !cfg.pft_shift || !cfg.mem_size || !cfg.tok_start_cpu)
		panic("device tree lacks cpus (%u), timebase (%lu), ibm,pft-size (%u), "
		      "memory (%lu) or start-cpu (%u)", cfg.ncpus, cfg.tb_hz, cfg.pft_shift,
		      cfg.mem_size, cfg.tok_start_cpu);
	if (!cfg.dcbz_size)
		cfg.dcbz_size = 128;
	for (u32 i = 0; i < cfg.ncpus; i++) {
		percpu[i].index = i;
		percpu[i].server = cfg.server[i];
	}
	tick_period = cfg.tb_hz / TICK_HZ;
	idle_period = cfg.tb_hz / IDLE_TICK_HZ;
	printk("mkbench: %u cpus, timebase %lu Hz, bootargs \"%s\"%s\n", cfg.ncpus, cfg.tb_hz,
	       cfg.bootargs, cfg.have_bulk ? "" : ", no H_BULK_REMOVE");
	parse_bootargs();
	cpu_setup(pc);
	mm_init();
	if (opt_closed) {
		printk("mkbench: closed form: %lu rounds of %lu k steps and %lu %s\n",
		       opt_units, opt_size, opt_closed,
		       opt_hold ? "H_LOGICAL_MEMOP" : "H_PAGE_INIT");
	} else {
		build_dag();
		printk("mkbench: jobs=%lu units=%lu size=%lu seed=%lu: %u compiles (%u repeated), "
		       "%u directory links, 1 final link\n", opt_jobs, opt_units, opt_size,
		       opt_seed, js.nunits, js.nverify, js.ndirs);
	}
	start_secondaries();

	sum_counters(base_cnt);
	t_start = mftb();
	sync();
	go = 1;
	for (u32 i = 1; i < cfg.ncpus; i++)
		send_ipi(pc, i);
	if (opt_closed)
		closed_loop(pc);
	scheduler(pc);
}
