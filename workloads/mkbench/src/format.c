/*
 * format.c - a small printf-style formatter for the kernel console.
 * Supports %d %i %u %x %X %p %s %c %% with optional '-', '0', a width and the
 * length modifiers l / ll / z (all integers are handled as 64-bit).
 */
#include "kernel.h"

struct out {
	char *buf;
	size_t size, len;
};

static void put(struct out *o, char c)
{
	if (o->len + 1 < o->size)
		o->buf[o->len] = c;
	o->len++;
}

static void put_num(struct out *o, u64 v, int base, int upper, int neg,
		    int width, int zero, int left)
{
	char tmp[24];
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	int n = 0, pad;

	do {
		tmp[n++] = digits[v % base];
		v /= base;
	} while (v);
	pad = width - n - (neg ? 1 : 0);
	if (!left && !zero)
		for (; pad > 0; pad--)
			put(o, ' ');
	if (neg)
		put(o, '-');
	if (!left && zero)
		for (; pad > 0; pad--)
			put(o, '0');
	while (n)
		put(o, tmp[--n]);
	if (left)
		for (; pad > 0; pad--)
			put(o, ' ');
}

int vsnformat(char *buf, size_t size, const char *fmt, __builtin_va_list ap)
{
	struct out o = { buf, size, 0 };

	for (; *fmt; fmt++) {
		int width = 0, zero = 0, left = 0, lng = 0;

		if (*fmt != '%') {
			put(&o, *fmt);
			continue;
		}
		fmt++;
		if (*fmt == '-') {
			left = 1;
			fmt++;
		}
		if (*fmt == '0') {
			zero = 1;
			fmt++;
		}
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		while (*fmt == 'l' || *fmt == 'z') {
			lng = 1;
			fmt++;
		}
		switch (*fmt) {
		case 'd':
		case 'i': {
			s64 v = lng ? __builtin_va_arg(ap, s64) : __builtin_va_arg(ap, int);
			put_num(&o, v < 0 ? -(u64)v : (u64)v, 10, 0, v < 0, width, zero, left);
			break;
		}
		case 'u': {
			u64 v = lng ? __builtin_va_arg(ap, u64) : __builtin_va_arg(ap, unsigned int);
			put_num(&o, v, 10, 0, 0, width, zero, left);
			break;
		}
		case 'x':
		case 'X': {
			u64 v = lng ? __builtin_va_arg(ap, u64) : __builtin_va_arg(ap, unsigned int);
			put_num(&o, v, 16, *fmt == 'X', 0, width, zero, left);
			break;
		}
		case 'p':
			put(&o, '0');
			put(&o, 'x');
			put_num(&o, (u64)__builtin_va_arg(ap, void *), 16, 0, 0, width, zero, left);
			break;
		case 'c':
			put(&o, (char)__builtin_va_arg(ap, int));
			break;
		case 's': {
			const char *s = __builtin_va_arg(ap, const char *);
			int n;

			if (!s)
				s = "(null)";
			n = (int)strlen(s);
			if (!left)
				for (; width > n; width--)
					put(&o, ' ');
			while (*s)
				put(&o, *s++);
			if (left)
				for (; width > n; width--)
					put(&o, ' ');
			break;
		}
		case '%':
			put(&o, '%');
			break;
		case 0:
			fmt--;
			break;
		default:
			put(&o, '%');
			put(&o, *fmt);
			break;
		}
	}
	if (o.size)
		o.buf[o.len < o.size ? o.len : o.size - 1] = 0;
	return (int)o.len;
}

int snformat(char *buf, size_t size, const char *fmt, ...)
{
	__builtin_va_list ap;
	int n;

	__builtin_va_start(ap, fmt);
	n = vsnformat(buf, size, fmt, ap);
	__builtin_va_end(ap);
	return n;
}
