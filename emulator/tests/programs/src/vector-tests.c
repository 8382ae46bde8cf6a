/* Vector instruction exercise: auto-vectorized loops (gcc -O3 -mcpu=power8), AltiVec/VSX
 * intrinsics and glibc's POWER8 string routines. Prints one checksum line per test. */
#include <altivec.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1031

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t fnv(const void *p, size_t n, uint32_t h)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 16777619u;
    return h;
}

static void fill(void *p, size_t n)
{
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++) c[i] = (unsigned char)rnd();
}

#define REPORT(name, buf) printf("%-14s %08x\n", name, fnv(buf, sizeof buf, 2166136261u))

/* Element-wise kernels over every integer type: the vectorizer picks vadd/vsub/vmul/vmin/
 * vmax/shifts/compares/selects of the matching element size. */
#define KERNELS(T, tag)                                                              \
    static T a_##tag[N], b_##tag[N], r_##tag[N];                                     \
    static __attribute__((noinline)) void k_##tag(void)                              \
    {                                                                                \
        for (int i = 0; i < N; i++) {                                                \
            T x = a_##tag[i], y = b_##tag[i];                                        \
            T s = (T)(x + y), d = (T)(x - y), m = (T)(x * y);                        \
            T mn = x < y ? x : y, mx = x > y ? x : y;                                \
            T sh = (T)(x << (y & (sizeof(T) * 8 - 1)));                              \
            T sr = (T)(x >> (y & (sizeof(T) * 8 - 1)));                              \
            r_##tag[i] = (T)(s ^ d ^ m ^ (T)(mn + mx) ^ sh ^ sr ^ (x == y ? (T)~x : y)); \
        }                                                                            \
    }
KERNELS(int8_t, s8)
KERNELS(uint8_t, u8)
KERNELS(int16_t, s16)
KERNELS(uint16_t, u16)
KERNELS(int32_t, s32)
KERNELS(uint32_t, u32)
KERNELS(int64_t, s64)
KERNELS(uint64_t, u64)

static int8_t w8[N];
static int16_t w16[N];
static int32_t w32[N];
static int64_t w64[N];
static float fa[N], fb[N], fr[N];
static double da[N], db[N], dr[N];

static __attribute__((noinline)) void widen_narrow(void)
{
    for (int i = 0; i < N; i++) w16[i] = (int16_t)w8[i] * 3;
    for (int i = 0; i < N; i++) w32[i] = w16[i] + (int32_t)w8[i];
    for (int i = 0; i < N; i++) w64[i] = (int64_t)w32[i] * w32[i];
    for (int i = 0; i < N; i++) w8[i] = (int8_t)(w16[i] >> 2) ^ (int8_t)w64[i];
}

static __attribute__((noinline)) int64_t reductions(void)
{
    int64_t s = 0;
    int32_t mx = -2147483647 - 1;
    uint8_t bx = 0;
    for (int i = 0; i < N; i++) s += a_s32[i];
    for (int i = 0; i < N; i++) mx = a_s32[i] > mx ? a_s32[i] : mx;
    for (int i = 0; i < N; i++) bx |= a_u8[i] & b_u8[i];
    int64_t dot = 0;
    for (int i = 0; i < N; i++) dot += (int32_t)a_s16[i] * b_s16[i];
    return s ^ mx ^ bx ^ dot;
}

static __attribute__((noinline)) void floats(void)
{
    for (int i = 0; i < N; i++) fr[i] = fa[i] * fb[i] + fa[i] - (fb[i] < fa[i] ? fb[i] : fa[i]);
    for (int i = 0; i < N; i++) dr[i] = da[i] * db[i] + (da[i] > db[i] ? da[i] : db[i]);
    for (int i = 0; i < N; i++) w32[i] = (int32_t)(fa[i] * 1000.0f);
    for (int i = 0; i < N; i++) fb[i] = (float)w32[i] * 0.5f;
    for (int i = 0; i < N; i++) db[i] = (double)fa[i];
}

static __attribute__((noinline)) void reverse_bytes(void)
{
    for (int i = 0; i < N; i++) r_u8[i] = a_u8[N - 1 - i];
    for (int i = 0; i < N; i++) r_u32[i] = __builtin_bswap32(a_u32[i]);
    for (int i = 0; i < N; i++) r_u64[i] = (uint64_t)__builtin_popcountll(a_u64[i]) + __builtin_clzll(a_u64[i] | 1);
}

/* Explicit AltiVec/VSX operations, including saturating ones, predicates and crypto. */
static vector unsigned char vv[64];
static __attribute__((noinline)) void intrinsics(void)
{
    vector unsigned char a = vv[0], b = vv[1], c = vv[2];
    vector signed short sa = (vector signed short)vv[3], sb = (vector signed short)vv[4];
    vector signed int ia = (vector signed int)vv[5], ib = (vector signed int)vv[6];
    vector unsigned int ua = (vector unsigned int)vv[7];
    vector float f = vec_ctf((vector signed int)vv[8], 7), g = vec_ctf((vector unsigned int)vv[9], 3);
    int k = 10;
    vv[k++] = vec_adds(a, b);
    vv[k++] = vec_subs(a, b);
    vv[k++] = (vector unsigned char)vec_adds(sa, sb);
    vv[k++] = (vector unsigned char)vec_subs(ia, ib);
    vv[k++] = vec_perm(a, b, c);
    vv[k++] = vec_sel(a, b, c);
    vv[k++] = vec_sld(a, b, 5);
    vv[k++] = vec_mergeh(a, b);
    vv[k++] = vec_mergel(a, b);
    vv[k++] = (vector unsigned char)vec_packs(sa, sb);
    vv[k++] = (vector unsigned char)vec_packsu(ia, ib);
    vv[k++] = (vector unsigned char)vec_unpackh((vector signed char)a);
    vv[k++] = (vector unsigned char)vec_unpackl(sa);
    vv[k++] = vec_avg(a, b);
    vv[k++] = (vector unsigned char)vec_msum(a, b, ua);
    vv[k++] = (vector unsigned char)vec_msums(sa, sb, ia);
    vv[k++] = (vector unsigned char)vec_sum4s((vector signed char)a, ia);
    vv[k++] = (vector unsigned char)vec_sums(ia, ib);
    vv[k++] = (vector unsigned char)vec_mladd(sa, sb, sa);
    vv[k++] = (vector unsigned char)vec_madds(sa, sb, sa);
    vv[k++] = vec_splat(a, 3);
    vv[k++] = (vector unsigned char)vec_splat_s16(-7);
    vv[k++] = (vector unsigned char)vec_madd(f, g, f);
    vv[k++] = (vector unsigned char)vec_nmsub(f, g, f);
    vv[k++] = (vector unsigned char)vec_re(g);
    vv[k++] = (vector unsigned char)vec_rsqrte(g);
    vv[k++] = (vector unsigned char)vec_expte(f);
    vv[k++] = (vector unsigned char)vec_loge(g);
    vv[k++] = (vector unsigned char)vec_cts(f, 4);
    vv[k++] = (vector unsigned char)vec_ctu(g, 1);
    vv[k++] = (vector unsigned char)vec_round(f);
    vv[k++] = (vector unsigned char)vec_floor(f);
    vv[k++] = (vector unsigned char)vec_cmpb(f, g);
    vv[k++] = (vector unsigned char)vec_max(f, g);
    vv[k++] = vec_sl(a, b);
    vv[k++] = vec_sra(a, b);
    vv[k++] = vec_rl(a, b);
    vv[k++] = vec_slo(a, b);
    vv[k++] = vec_sll(a, vec_splat(b, 15));
    vv[k++] = (vector unsigned char)vec_cntlz((vector unsigned long long)a);
    vv[k++] = (vector unsigned char)vec_popcnt(a);
    vv[k++] = (vector unsigned char)vec_gb(a);
    vv[k++] = (vector unsigned char)vec_bperm((vector unsigned __int128)a, b);
    vv[k++] = (vector unsigned char)__builtin_crypto_vcipher((vector unsigned long long)a, (vector unsigned long long)b);
    vv[k++] = (vector unsigned char)__builtin_crypto_vncipherlast((vector unsigned long long)a, (vector unsigned long long)b);
    vv[k++] = (vector unsigned char)__builtin_crypto_vshasigmaw(ua, 1, 0xa);
    vv[k++] = (vector unsigned char)__builtin_crypto_vpmsumd((vector unsigned long long)a, (vector unsigned long long)b);
    vv[k++] = (vector unsigned char)vec_mule(a, b);
    vv[k++] = (vector unsigned char)vec_mulo(sa, sb);
    vv[k++] = (vector unsigned char)vec_vaddcuq((vector unsigned __int128)a, (vector unsigned __int128)b);
    vv[k++] = (vector unsigned char)vec_xxpermdi((vector unsigned long long)a, (vector unsigned long long)b, 1);
    vv[k++] = (vector unsigned char)vec_mergee((vector unsigned int)a, (vector unsigned int)b);
    unsigned int flags = vec_all_eq(a, a) | vec_any_gt(a, b) << 1 | vec_all_ge(sa, sb) << 2 |
                         vec_any_nan(f) << 3 | vec_all_in(f, g) << 4 | vec_any_lt(ia, ib) << 5;
    vv[k++] = (vector unsigned char)vec_splats(flags);
    vector unsigned int sat = (vector unsigned int)vec_mfvscr();
    vv[k++] = (vector unsigned char)sat;
}

static char s1[4200], s2[4200];

static uint32_t strings(uint32_t h)
{
    for (int i = 0; i < 4199; i++) {
        s1[i] = (char)('a' + rnd() % 26);
        s2[i] = s1[i];
    }
    for (size_t off = 0; off < 17; off++) {
        for (size_t len = 0; len < 300; len += 1 + len / 8) {
            char save = s1[off + len];
            s1[off + len] = 0;
            h = h * 31 + (uint32_t)strlen(s1 + off);
            h = h * 31 + (uint32_t)(strchr(s1 + off, 'q') ? strchr(s1 + off, 'q') - s1 : -1);
            h = h * 31 + (uint32_t)(strrchr(s1 + off, 'e') ? strrchr(s1 + off, 'e') - s1 : -1);
            h = h * 31 + (uint32_t)(memchr(s1 + off, 'z', len) ? (char *)memchr(s1 + off, 'z', len) - s1 : -1);
            s2[(off * 7 + len / 2) % 4199] ^= 1;
            h = h * 31 + (uint32_t)strcmp(s1 + off, s2 + off);
            h = h * 31 + (uint32_t)strncmp(s1 + off, s2 + off, len / 2 + 1);
            h = h * 31 + (uint32_t)memcmp(s1 + off, s2 + (off ^ 3), len);
            s2[(off * 7 + len / 2) % 4199] ^= 1;
            memcpy(s2 + (off ^ 5), s1 + off, len);
            memmove(s2 + off + 3, s2 + off, len);
            memset(s2 + (off ^ 9), 'A' + (int)(len % 26), len / 3);
            strcpy(s2 + 2000 + off, s1 + off);
            h = fnv(s2, sizeof s2, h);
            s1[off + len] = save;
        }
    }
    return h;
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
#define INIT(tag) fill(a_##tag, sizeof a_##tag), fill(b_##tag, sizeof b_##tag)
    INIT(s8); INIT(u8); INIT(s16); INIT(u16); INIT(s32); INIT(u32); INIT(s64); INIT(u64);
    k_s8(); REPORT("int8", r_s8);
    k_u8(); REPORT("uint8", r_u8);
    k_s16(); REPORT("int16", r_s16);
    k_u16(); REPORT("uint16", r_u16);
    k_s32(); REPORT("int32", r_s32);
    k_u32(); REPORT("uint32", r_u32);
    k_s64(); REPORT("int64", r_s64);
    k_u64(); REPORT("uint64", r_u64);
    fill(w8, sizeof w8);
    widen_narrow();
    REPORT("widen16", w16); REPORT("widen32", w32); REPORT("widen64", w64); REPORT("narrow8", w8);
    printf("%-14s %016llx\n", "reductions", (unsigned long long)reductions());
    for (int i = 0; i < N; i++) {
        fa[i] = (float)((int64_t)(rnd() % 200001) - 100000) / 997.0f;
        fb[i] = (float)((int64_t)(rnd() % 200001) - 100000) / 991.0f;
        da[i] = (double)(int64_t)rnd() / 3.0e15;
        db[i] = (double)(int64_t)rnd() / 7.0e15;
    }
    floats();
    REPORT("float", fr); REPORT("double", dr); REPORT("f2i", w32); REPORT("i2f", fb); REPORT("f2d", db);
    reverse_bytes();
    REPORT("reverse", r_u8); REPORT("bswap", r_u32); REPORT("popclz", r_u64);
    fill(vv, sizeof vv);
    intrinsics();
    for (int i = 10; i < 64; i++) printf("v%-13d %08x\n", i, fnv(&vv[i], 16, 2166136261u));
    printf("%-14s %08x\n", "strings", strings(2166136261u));
    return 0;
}
