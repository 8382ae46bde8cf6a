/* Freestanding runner self-test: raw Linux system calls, no libc, integer only.
 * Checks what the user-mode runner provides (stack, argv/envp/auxv, brk, mmap family,
 * files, pipes, errors) with output that must equal QEMU's byte for byte. */

typedef unsigned long u64;
typedef long i64;
typedef unsigned int u32;

static i64 sc(i64 n, i64 a, i64 b, i64 c, i64 d, i64 e, i64 f)
{
    register i64 r0 __asm__("r0") = n;
    register i64 r3 __asm__("r3") = a;
    register i64 r4 __asm__("r4") = b;
    register i64 r5 __asm__("r5") = c;
    register i64 r6 __asm__("r6") = d;
    register i64 r7 __asm__("r7") = e;
    register i64 r8 __asm__("r8") = f;
    /* On failure the kernel sets CR0[SO] and returns the positive errno. */
    __asm__ volatile("sc\n\tbns+ 1f\n\tneg %1,%1\n1:"
                     : "+r"(r0), "+r"(r3), "+r"(r4), "+r"(r5), "+r"(r6), "+r"(r7), "+r"(r8)
                     :
                     : "memory", "cr0", "r9", "r10", "r11", "r12", "ctr", "xer");
    return r3;
}

enum {
    SYS_exit = 1, SYS_read = 3, SYS_write = 4, SYS_close = 6, SYS_lseek = 19, SYS_brk = 45,
    SYS_ioctl = 54, SYS_mmap = 90, SYS_munmap = 91, SYS_fstat = 108, SYS_uname = 122,
    SYS_mprotect = 125, SYS_mremap = 163, SYS_clock_gettime = 246, SYS_exit_group = 234,
    SYS_openat = 286, SYS_pipe2 = 317, SYS_getrandom = 359, SYS_prctl = 171,
};

static void out(const char *s, u64 n) { sc(SYS_write, 1, (i64)s, n, 0, 0, 0); }
static u64 slen(const char *s) { u64 n = 0; while (s[n]) n++; return n; }
static void puts_(const char *s) { out(s, slen(s)); }
static void put_dec(i64 v)
{
    char b[24]; int k = 23; int neg = v < 0; u64 u = neg ? -(u64)v : (u64)v;
    b[k] = 0;
    do { b[--k] = '0' + u % 10; u /= 10; } while (u);
    if (neg) b[--k] = '-';
    puts_(b + k);
}
static void put_hex(u64 v)
{
    char b[19]; int k = 18; b[k] = 0;
    do { b[--k] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    b[--k] = 'x'; b[--k] = '0';
    puts_(b + k);
}
static void kv(const char *k, i64 v) { puts_(k); puts_("="); put_dec(v); puts_("\n"); }
static void kx(const char *k, u64 v) { puts_(k); puts_("="); put_hex(v); puts_("\n"); }
static int seq(const char *a, const char *b) { while (*a && *a == *b) a++, b++; return *a == *b; }
static int starts(const char *s, const char *p) { while (*p && *s == *p) s++, p++; return !*p; }

/* Integer kernels whose results depend on many instruction forms. */
static u32 crc32(const unsigned char *p, u64 n)
{
    u32 c = 0xffffffff;
    for (u64 i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320 & -(c & 1));
    }
    return ~c;
}

static u64 mix(u64 seed, int rounds)
{
    u64 x = seed, acc = 0;
    for (int i = 0; i < rounds; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        acc += (x * 0x9e3779b97f4a7c15ull) ^ (u64)((unsigned __int128)x * acc >> 64);
        acc ^= (u64)__builtin_popcountll(x) << (i & 31);
        acc += (u64)__builtin_clzll(x | 1) + (u64)__builtin_ctzll(x | (1ull << 63));
        if (x % 7 == 3) acc -= (i64)x / -5;
        acc = (acc << 11) | (acc >> 53);
        acc += (u32)x / ((u32)(x >> 40) | 1);
    }
    return acc;
}

extern char _start[];

static void segv(void)
{
    /* A store to the read-only text: the process dies of SIGSEGV. */
    volatile u32 *p = (volatile u32 *)(void *)_start;
    *p = 0;
}

static void test_mem(void)
{
    u64 b = sc(SYS_brk, 0, 0, 0, 0, 0, 0);
    kv("brk grow", sc(SYS_brk, b + 100000, 0, 0, 0, 0, 0) == (i64)(b + 100000));
    volatile char *h = (char *)b;
    h[0] = 1; h[99999] = 2;
    kv("brk rw", h[0] + h[99999]);
    kv("brk shrink", sc(SYS_brk, b + 4096, 0, 0, 0, 0, 0) == (i64)(b + 4096));

    i64 m = sc(SYS_mmap, 0, 3 * 4096, 3, 0x22, -1, 0);
    kv("mmap ok", m > 0 && (m & 4095) == 0);
    char *p = (char *)m;
    for (int i = 0; i < 3 * 4096; i++) p[i] = (char)(i * 7);
    u32 c = crc32((unsigned char *)p, 3 * 4096);
    kx("mmap crc", c);
    kv("mprotect", sc(SYS_mprotect, m + 4096, 4096, 1, 0, 0, 0));
    kv("write from ro", sc(SYS_write, 1, m + 4096, 0, 0, 0, 0));
    int fds[2];
    kv("pipe2", sc(SYS_pipe2, (i64)fds, 0, 0, 0, 0, 0));
    kv("pipe write", sc(SYS_write, fds[1], (i64)"xyz", 3, 0, 0, 0));
    kv("read into ro", sc(SYS_read, fds[0], m + 4096, 3, 0, 0, 0));
    kv("read into rw", sc(SYS_read, fds[0], m, 3, 0, 0, 0));
    out(p, 3); puts_("\n");
    sc(SYS_close, fds[0], 0, 0, 0, 0, 0);
    sc(SYS_close, fds[1], 0, 0, 0, 0, 0);

    kv("mprotect back", sc(SYS_mprotect, m + 4096, 4096, 3, 0, 0, 0));
    i64 m2 = sc(SYS_mremap, m, 3 * 4096, 64 * 4096, 1, 0, 0);
    kv("mremap ok", m2 > 0);
    p = (char *)m2;
    p[64 * 4096 - 1] = 5;
    kv("mremap keeps", p[4095] == (char)(4095 * 7) && p[2 * 4096] == (char)(2 * 4096 * 7));
    kv("munmap", sc(SYS_munmap, m2, 64 * 4096, 0, 0, 0, 0));
    kv("write from unmapped", sc(SYS_write, 1, m2, 1, 0, 0, 0));
    kv("munmap unaligned", sc(SYS_munmap, m2 + 1, 4096, 0, 0, 0, 0));
    kv("mmap len 0", sc(SYS_mmap, 0, 0, 3, 0x22, -1, 0));
}

static void test_files(void)
{
    i64 fd = sc(SYS_openat, -100, (i64)"/proc/self/exe", 0, 0, 0, 0);
    kv("open exe", fd >= 0);
    char hdr[5] = {0};
    kv("read", sc(SYS_read, fd, (i64)hdr, 4, 0, 0, 0));
    kv("elf magic", hdr[0] == 0x7f && hdr[1] == 'E' && hdr[2] == 'L' && hdr[3] == 'F');
    u64 st[18];
    kv("fstat", sc(SYS_fstat, fd, (i64)st, 0, 0, 0, 0));
    u32 mode = *(u32 *)((char *)st + 24);
    kv("regular", (mode & 0170000) == 0100000);
    kv("size matches", sc(SYS_lseek, fd, 0, 2, 0, 0, 0) == (i64)st[6]);
    kv("close", sc(SYS_close, fd, 0, 0, 0, 0, 0));
    kv("close again", sc(SYS_close, fd, 0, 0, 0, 0, 0));
    kv("open missing", sc(SYS_openat, -100, (i64)"/nonexistent/file", 0, 0, 0, 0));
    kv("bad path pointer", sc(SYS_openat, -100, 16, 0, 0, 0, 0));
    kv("tcgets on pipe", sc(SYS_ioctl, 1, 0x402c7413, (i64)st, 0, 0, 0) == -25 || 1);
}

static void test_misc(void)
{
    char u[6 * 65];
    kv("uname", sc(SYS_uname, (i64)u, 0, 0, 0, 0, 0));
    puts_(u); puts_(" "); puts_(u + 4 * 65); puts_("\n");
    unsigned char r[16];
    kv("getrandom", sc(SYS_getrandom, (i64)r, 16, 0, 0, 0, 0));
    i64 t0[2], t1[2];
    sc(SYS_clock_gettime, 1, (i64)t0, 0, 0, 0, 0);
    sc(SYS_clock_gettime, 1, (i64)t1, 0, 0, 0, 0);
    kv("monotonic", t1[0] > t0[0] || (t1[0] == t0[0] && t1[1] >= t0[1]));
    kv("unknown syscall", sc(9999, 0, 0, 0, 0, 0, 0));
    char name[16];
    kv("prctl set name", sc(SYS_prctl, 15, (i64)"guest-thread-name", 0, 0, 0, 0));
    kv("prctl get name", sc(SYS_prctl, 16, (i64)name, 0, 0, 0, 0));
    puts_(name); puts_("\n");
    kx("mix", mix(0x123456789abcdefull, 5000));
}

static const unsigned char text[] = "The quick brown fox jumps over the lazy dog";

void cmain(u64 *sp)
{
    i64 argc = (i64)sp[0];
    char **argv = (char **)(sp + 1);
    char **envp = argv + argc + 1;
    u64 *auxv = (u64 *)envp;
    while (*auxv) auxv++;
    auxv++;

    if (argc > 1 && seq(argv[1], "segv")) segv();
    /* A page that was accessed (so the TLB caches it) and then unmapped or write-protected
     * must fault on the next access. */
    if (argc > 1 && (seq(argv[1], "munmap") || seq(argv[1], "mprotect"))) {
        volatile u64 *p = (volatile u64 *)sc(SYS_mmap, 0, 4096, 3, 0x22, -1, 0);
        *p = 1;
        kv("before", *p);
        if (seq(argv[1], "munmap")) {
            sc(SYS_munmap, (i64)p, 4096, 0, 0, 0, 0);
            kv("after", *p);
        } else {
            sc(SYS_mprotect, (i64)p, 4096, 1, 0, 0, 0);
            kv("read", *p);
            *p = 2;
        }
        kv("not reached", 0);
    }
    /* Code rewritten behind the CPU's back (by read() into it, or by unmapping and mapping
     * the page again) must run in its new form. */
    if (argc > 1 && seq(argv[1], "smc")) {
        u32 *code = (u32 *)sc(SYS_mmap, 0x60000000, 4096, 7, 0x22, -1, 0);
        i64 (*f)(void) = (i64 (*)(void))(void *)code;
        code[0] = 0x38600001; /* li r3, 1 */
        code[1] = 0x4e800020; /* blr */
        __asm__ volatile("dcbst 0,%0; sync; icbi 0,%0; isync" : : "r"(code) : "memory");
        kv("store", f());
        int fds[2];
        u32 two[2] = {0x38600002, 0x4e800020};
        sc(SYS_pipe2, (i64)fds, 0, 0, 0, 0, 0);
        sc(SYS_write, fds[1], (i64)two, 8, 0, 0, 0);
        sc(SYS_read, fds[0], (i64)code, 8, 0, 0, 0);
        kv("read into code", f());
        sc(SYS_munmap, (i64)code, 4096, 0, 0, 0, 0);
        kv("remapped at", sc(SYS_mmap, (i64)code, 4096, 7, 0x32, -1, 0) == (i64)code);
        u32 three[2] = {0x38600003, 0x4e800020};
        sc(SYS_write, fds[1], (i64)three, 8, 0, 0, 0);
        sc(SYS_read, fds[0], (i64)code, 8, 0, 0, 0);
        kv("after remap", f());
        code[0] = 0x38600004;
        __asm__ volatile("dcbst 0,%0; sync; icbi 0,%0; isync" : : "r"(code) : "memory");
        kv("store again", f());
        sc(SYS_exit_group, 0, 0, 0, 0, 0, 0);
    }
    /* Runs of accesses off one base whose later access faults on the host: two stores, the
     * second into a page of code that ran (the first, in the page before, happens once), and
     * two loads, the second from an unmapped page (the process dies of SIGSEGV there). */
    if (argc > 1 && seq(argv[1], "runfault")) {
        u32 *m = (u32 *)sc(SYS_mmap, 0x62000000, 8192, 7, 0x22, -1, 0);
        u32 *code = m + 1024;
        i64 (*f)(void) = (i64 (*)(void))(void *)code;
        code[0] = 0x38600001; /* li r3, 1 */
        code[1] = 0x4e800020; /* blr */
        __asm__ volatile("dcbst 0,%0; sync; icbi 0,%0; isync" : : "r"(code) : "memory");
        kv("code", f());
        volatile u32 *w = code - 1;
        u32 v = w[0];
        w[0] = v + 7;
        w[1] = 0x38600005; /* li r3, 5 */
        __asm__ volatile("dcbst 0,%0; sync; icbi 0,%0; isync" : : "r"(code) : "memory");
        kv("rewritten", f());
        kv("word before", m[1023]);
        volatile u64 *q = (volatile u64 *)(void *)(m + 1024 - 2);
        sc(SYS_munmap, (i64)code, 4096, 0, 0, 0, 0);
        q[0] = 3;
        u64 a = q[0], b = q[1];
        kv("not reached", a + b);
    }
    /* A load off a base register in a mapped page whose displacement reaches into an
     * unmapped one, right after a load from a mapped page: the load's miss path must take
     * the address from the base and the displacement (the process dies of SIGSEGV there),
     * neither the last address computed nor the base alone. The base is read again after
     * it (`mr`), so that translated code keeps it in a host register. */
    if (argc > 1 && seq(argv[1], "loadfault")) {
        u64 *m = (u64 *)sc(SYS_mmap, 0x63000000, 8192, 3, 0x22, -1, 0);
        m[1] = 11;
        u64 *gone = m + 512;
        sc(SYS_munmap, (i64)gone, 4096, 0, 0, 0, 0);
        u64 a, b, c;
        __asm__ volatile("ld %0, 8(%3)\n\tld %1, 16(%4)\n\tmr %2, %4"
                         : "=&r"(a), "=&r"(b), "=&r"(c)
                         : "b"(m), "b"(gone - 1)
                         : "memory");
        kv("not reached", a + b + c);
    }
    /* The same for a store at its base register (read before it too: a store addresses
     * the base's copy only when the base already has one). */
    if (argc > 1 && seq(argv[1], "storefault")) {
        u64 *m = (u64 *)sc(SYS_mmap, 0x64000000, 8192, 3, 0x22, -1, 0);
        u64 *gone = m + 512;
        sc(SYS_munmap, (i64)gone, 4096, 0, 0, 0, 0);
        u64 c, v = 5;
        __asm__ volatile("mr %0, %3\n\tstd %1, 8(%2)\n\tstd %1, 16(%3)\n\tadd %0, %0, %3"
                         : "=&r"(c)
                         : "r"(v), "b"(m), "b"(gone - 1)
                         : "memory");
        kv("not reached", (i64)(c + m[1]));
    }
    /* `sys bench`: a silent compute loop for the interpreter benchmark. */
    if (argc > 1 && seq(argv[1], "bench")) sc(SYS_exit_group, mix(1, 100000) & 1, 0, 0, 0, 0, 0);
    kv("argc", argc);
    for (int i = 1; i < argc; i++) { puts_("argv: "); puts_(argv[i]); puts_("\n"); }
    for (char **e = envp; *e; e++)
        if (starts(*e, "SYS_TEST=")) { puts_("env: "); puts_(*e); puts_("\n"); }
    u64 hw = 0, hw2 = 0, pagesz = 0, entry = 0, phdr = 0, phnum = 0, rnd = 0;
    for (u64 *a = auxv; a[0]; a += 2) {
        switch (a[0]) {
        case 3: phdr = a[1]; break;
        case 5: phnum = a[1]; break;
        case 6: pagesz = a[1]; break;
        case 9: entry = a[1]; break;
        case 16: hw = a[1]; break;
        case 25: rnd = a[1]; break;
        case 26: hw2 = a[1]; break;
        }
    }
    kv("pagesz", pagesz);
    kx("hwcap 64|altivec|fpu|vsx", hw & 0x58000080);
    kx("hwcap2 2.07", hw2 & 0x80000000);
    kv("entry", entry == (u64)_start);
    kv("phdr", phnum > 0 && (*(u32 *)phdr == 6 || *(u32 *)phdr == 1));
    kv("random", rnd != 0);
    kv("stack aligned", ((u64)sp & 15) == 0);
    kx("crc", crc32(text, sizeof text - 1));
    test_mem();
    test_files();
    test_misc();
    sc(SYS_exit_group, 42, 0, 0, 0, 0, 0);
}

__asm__(".text\n"
        ".globl _start\n"
        "_start:\n"
        "  addis 2,12,.TOC.-_start@ha\n"
        "  addi 2,2,.TOC.-_start@l\n"
        "  mr 3,1\n"
        "  clrrdi 1,1,4\n"
        "  li 0,0\n"
        "  stdu 0,-128(1)\n"
        "  bl cmain\n"
        "  nop\n"
        "  li 0,1\n"
        "  sc\n");
