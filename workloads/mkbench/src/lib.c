/*
 * lib.c - the small freestanding C library shared by the kernel and the jobs.
 * Everything here is a pure function of its arguments (no global state), so
 * jobs may call it from their own address spaces.
 */
#include "mkbench.h"

void *memset(void *d, int c, size_t n)
{
	u8 *p = d;
	u64 v = (u8)c;

	v |= v << 8;
	v |= v << 16;
	v |= v << 32;
	while (n && ((u64)p & 7)) {
		*p++ = (u8)c;
		n--;
	}
	while (n >= 8) {
		*(volatile u64 *)p = v;
		p += 8;
		n -= 8;
	}
	while (n--)
		*p++ = (u8)c;
	return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
	u8 *dp = d;
	const u8 *sp = s;

	if ((((u64)dp | (u64)sp) & 7) == 0) {
		while (n >= 8) {
			*(volatile u64 *)dp = *(const u64 *)sp;
			dp += 8;
			sp += 8;
			n -= 8;
		}
	}
	while (n--)
		*(volatile u8 *)dp++ = *sp++;
	return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const u8 *x = a, *y = b;

	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x < *y ? -1 : 1;
	return 0;
}

size_t strlen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

int strcmp(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return (u8)*a - (u8)*b;
}

int strncmp(const char *a, const char *b, size_t n)
{
	for (; n; n--, a++, b++) {
		if (*a != *b)
			return (u8)*a - (u8)*b;
		if (!*a)
			return 0;
	}
	return 0;
}

/* a 64-bit finaliser (xor-shift-multiply), used for hashing and checksums */
u64 mix64(u64 x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185UL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dUL;
	x ^= x >> 33;
	return x;
}
