/*
 * Golden-vector harness: a freestanding ppc64le Linux program run under qemu-ppc64le-static.
 *
 * It reads test cases from stdin. Each case is a list of blobs (address, bytes) to copy into
 * two fixed memory regions, an entry address and a value for r31. The harness copies the
 * blobs, then enters the case through a signal return, which is the only way a user program
 * can choose MSR[LE] (so big-endian cases run too). The case code (written by gen.py: a
 * loader that sets every register from a state block addressed by r31, the instructions
 * under test, and a final `trap`) ends in a signal: the trap, or whatever the instructions
 * raised. The handler writes the registers from the signal frame, VSCR and the data buffer
 * to stdout, and returns into the next case.
 *
 * Build: powerpc64le-linux-gnu-gcc -O2 -ffreestanding -fno-builtin -nostdlib -static
 *        -mcpu=power8 -msoft-float -mno-altivec -mno-vsx -Wa,-mpower8 (see gen.py); with
 *        -mbig-endian -mabi=elfv2 it is a big-endian process for qemu-ppc64-static, which
 *        `gen.py crosscheck-be` uses to confirm the big-endian cases. Header fields of the
 *        input and the result records are in the process's byte order.
 */

#ifdef __LITTLE_ENDIAN__
#define HARNESS_LE 1
#else
#define HARNESS_LE 0
#endif

typedef unsigned long u64;
typedef unsigned int u32;
typedef unsigned char u8;

/* Fixed regions, mirrored by gen.py and tests/golden.rs. */
#define CODE_REGION 0x40000000ul
#define CODE_REGION_SIZE 0x10000ul
#define DATA_REGION 0x40020000ul
#define DATA_REGION_SIZE 0x2000ul

#define CASE_MAGIC 0x53414347u   /* "GCAS" */
#define RESULT_MAGIC 0x53455247u /* "GRES" */
#define END_MAGIC 0x444e4547u    /* "GEND" */

enum { SYS_exit = 1, SYS_read = 3, SYS_write = 4, SYS_mmap = 90, SYS_rt_sigaction = 173, SYS_sigaltstack = 185 };
enum { SIGILL = 4, SIGTRAP = 5, SIGBUS = 7, SIGFPE = 8, SIGSEGV = 11 };

static long sys3(long n, long a, long b, long c) {
    register long r0 __asm__("r0") = n;
    register long r3 __asm__("r3") = a;
    register long r4 __asm__("r4") = b;
    register long r5 __asm__("r5") = c;
    __asm__ volatile("sc\n\tbns+ 1f\n\tneg %1,%1\n1:"
                     : "+r"(r0), "+r"(r3), "+r"(r4), "+r"(r5)
                     :
                     : "r6", "r7", "r8", "r9", "r10", "r11", "r12", "cr0", "ctr", "xer", "memory");
    return r3;
}

static long sys6(long n, long a, long b, long c, long d, long e, long f) {
    register long r0 __asm__("r0") = n;
    register long r3 __asm__("r3") = a;
    register long r4 __asm__("r4") = b;
    register long r5 __asm__("r5") = c;
    register long r6 __asm__("r6") = d;
    register long r7 __asm__("r7") = e;
    register long r8 __asm__("r8") = f;
    __asm__ volatile("sc\n\tbns+ 1f\n\tneg %1,%1\n1:"
                     : "+r"(r0), "+r"(r3), "+r"(r4), "+r"(r5), "+r"(r6), "+r"(r7), "+r"(r8)
                     :
                     : "r9", "r10", "r11", "r12", "cr0", "ctr", "xer", "memory");
    return r3;
}

static void die(int code) {
    for (;;) sys3(SYS_exit, code, 0, 0);
}

static void copy(void *dst, const void *src, u64 n) {
    volatile u8 *d = dst;
    const u8 *s = src;
    for (u64 i = 0; i < n; i++) d[i] = s[i];
}

/* Symbols gcc may call on its own. */
void *memcpy(void *d, const void *s, u64 n) { copy(d, s, n); return d; }
void *memset(void *d, int c, u64 n) {
    volatile u8 *p = d;
    for (u64 i = 0; i < n; i++) p[i] = (u8)c;
    return d;
}

static void read_full(void *buf, u64 n) {
    u8 *p = buf;
    while (n) {
        long r = sys3(SYS_read, 0, (long)p, (long)n);
        if (r <= 0) die(3);
        p += r;
        n -= (u64)r;
    }
}

static void write_full(const void *buf, u64 n) {
    const u8 *p = buf;
    while (n) {
        long r = sys3(SYS_write, 1, (long)p, (long)n);
        if (r <= 0) die(4);
        p += r;
        n -= (u64)r;
    }
}

/* Linux ppc64 signal frame (arch/powerpc/include/uapi/asm/{ucontext,sigcontext}.h). */
struct sigcontext64 {
    u64 unused[4];
    int signal;
    int pad0;
    u64 handler;
    u64 oldmask;
    u64 regs;
    u64 gp_regs[48];
    u64 fp_regs[33];
    u64 v_regs;
    u64 vmx_reserve[101];
};
struct ucontext64 {
    u64 uc_flags;
    u64 uc_link;
    u64 ss_sp;
    int ss_flags;
    int ss_pad;
    u64 ss_size;
    u64 uc_sigmask;
    u64 unused[15];
    struct sigcontext64 mc;
};
struct siginfo64 {
    int si_signo;
    int si_errno;
    int si_code;
    int pad;
    u64 si_addr;
};

enum { PT_NIP = 32, PT_MSR = 33, PT_CTR = 35, PT_LNK = 36, PT_XER = 37, PT_CCR = 38 };

struct case_header {
    u32 magic;
    u32 little_endian;
    u32 nblobs;
    u32 dump_len;
    u64 entry;
    u64 r31;
    u64 dump_addr;
};

struct blob_header {
    u64 addr;
    u32 len;
    u32 pad;
};

/* One result record; gen.py parses the same layout. */
struct result {
    u32 magic;
    int signo;
    int si_code;
    u32 vscr;
    u64 nip, msr, si_addr;
    u64 gpr[32];
    u64 cr, xer, lr, ctr, fpscr, vrsave;
    u64 vsr[64][2]; /* high doubleword, low doubleword */
};

static struct case_header cur;
static volatile int running;
static u8 scratch[1 << 16];
static u8 altstack[1 << 16] __attribute__((aligned(16)));
static u8 mainstack[1 << 16] __attribute__((aligned(16)));
static struct result res;

void next_case(void);

static void handler(int sig, struct siginfo64 *info, struct ucontext64 *uc) {
    u64 *g = uc->mc.gp_regs;
    if (!running) {
        /* The launch trap of next_case: enter the case's loader. */
        if (sig != SIGTRAP) die(5);
        g[PT_NIP] = cur.entry;
        g[31] = cur.r31;
        g[PT_MSR] = (g[PT_MSR] & ~1ul) | (cur.little_endian ? 1ul : 0ul);
        running = 1;
        return;
    }
    running = 0;
    u8 vs[16] __attribute__((aligned(16)));
    __asm__ volatile("mfvscr 0\n\tstvx 0,0,%0" : : "r"(vs) : "v0", "memory");
    res.magic = RESULT_MAGIC;
    res.signo = sig;
    res.si_code = info->si_code;
    res.si_addr = info->si_addr;
    /* VSCR is the low-order word of the vector: first in memory when little-endian. */
    res.vscr = *(const u32 *)(vs + (HARNESS_LE ? 0 : 12));
    res.nip = g[PT_NIP];
    res.msr = g[PT_MSR];
    for (int i = 0; i < 32; i++) res.gpr[i] = g[i];
    res.cr = g[PT_CCR];
    res.xer = g[PT_XER];
    res.lr = g[PT_LNK];
    res.ctr = g[PT_CTR];
    res.fpscr = uc->mc.fp_regs[32];
    const u64 *vr = (const u64 *)uc->mc.v_regs;
    res.vrsave = *(const u32 *)(vr + 2 * 33);
    for (int i = 0; i < 32; i++) {
        res.vsr[i][0] = uc->mc.fp_regs[i];
        res.vsr[i][1] = vr[2 * 34 + i];
        /* Frame vector images are 128-bit values in the process's byte order. */
        res.vsr[32 + i][0] = vr[2 * i + HARNESS_LE];
        res.vsr[32 + i][1] = vr[2 * i + 1 - HARNESS_LE];
    }
    write_full(&res, sizeof res);
    write_full((const void *)cur.dump_addr, cur.dump_len);
    /* Return into next_case on the harness stack, in the harness's byte order. */
    u64 entry = (u64)&next_case;
    g[PT_NIP] = entry;
    g[12] = entry;
    g[1] = (u64)(mainstack + sizeof mainstack - 256);
    g[PT_LNK] = 0;
    g[PT_MSR] = (g[PT_MSR] & ~1ul) | HARNESS_LE;
}

void next_case(void) {
    read_full(&cur, 4);
    if (cur.magic == END_MAGIC) {
        u32 m = END_MAGIC;
        write_full(&m, 4);
        die(0);
    }
    if (cur.magic != CASE_MAGIC) die(6);
    read_full((u8 *)&cur + 4, sizeof cur - 4);
    for (u32 k = 0; k < cur.nblobs; k++) {
        struct blob_header b;
        read_full(&b, sizeof b);
        u64 padded = (b.len + 7) & ~7ul;
        if (padded > sizeof scratch) die(7);
        read_full(scratch, padded);
        int in_code = b.addr >= CODE_REGION && b.addr + b.len <= CODE_REGION + CODE_REGION_SIZE;
        int in_data = b.addr >= DATA_REGION && b.addr + b.len <= DATA_REGION + DATA_REGION_SIZE;
        if (!in_code && !in_data) die(8);
        copy((void *)b.addr, scratch, b.len);
    }
    __asm__ volatile("sync\n\ticbi 0,%0\n\tisync" : : "r"(CODE_REGION) : "memory");
    running = 0;
    __asm__ volatile("trap" ::: "memory");
    die(9); /* not reached: the handler enters the case */
}

struct kernel_sigaction {
    u64 handler;
    u64 flags;
    u64 restorer;
    u64 mask;
};

#define SA_SIGINFO 4ul
#define SA_ONSTACK 0x08000000ul
#define SA_NODEFER 0x40000000ul

void hmain(void) {
    if (sys6(SYS_mmap, (long)CODE_REGION, CODE_REGION_SIZE, 7, 0x32, -1, 0) != (long)CODE_REGION) die(10);
    if (sys6(SYS_mmap, (long)DATA_REGION, DATA_REGION_SIZE, 3, 0x32, -1, 0) != (long)DATA_REGION) die(11);
    u64 ss[3] = {(u64)altstack, 0, sizeof altstack};
    if (sys3(SYS_sigaltstack, (long)ss, 0, 0) != 0) die(12);
    static const int sigs[] = {SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV};
    for (unsigned k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        struct kernel_sigaction sa = {(u64)&handler, SA_SIGINFO | SA_ONSTACK | SA_NODEFER, 0, 0};
        if (sys6(SYS_rt_sigaction, sigs[k], (long)&sa, 0, 8, 0, 0) != 0) die(13);
    }
    next_case();
}

__asm__(".globl _start\n"
        "_start:\n"
        "  lis 12, hmain@ha\n"
        "  addi 12, 12, hmain@l\n"
        "  lis 1, mainstack@ha\n"
        "  addi 1, 1, mainstack@l\n"
        "  addis 1, 1, 1\n"
        "  li 0, 0\n"
        "  stdu 0, -256(1)\n"
        "  mtctr 12\n"
        "  bctrl\n");
