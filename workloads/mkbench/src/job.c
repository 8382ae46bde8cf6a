/*
 * job.c - the programs that mkbench's processes run: a toy compiler and a
 * toy linker.  This code runs in problem state, in the job's own address
 * space: it may touch only its stack, its heap, its argument page and the
 * read-only image (text, rodata, TOC).  It has no global variables.
 *
 * compile: generate a deterministic pseudo-C source for the unit (in
 *   "file buffer" chunks that are munmapped once read), tokenize it, intern
 *   identifiers in a hash table, parse expressions into trees on the heap,
 *   fold constants, number values, emit stack-machine "object" bytes and
 *   checksum them.  The object checksum is computed while emitting and again
 *   by reading the object back; all trees are re-walked at the end and their
 *   hashes compared with those taken at parse time.
 *   Each batch of functions is handed to the unit's assembler through a
 *   pipe (a message with the running checksums), the result last.
 * assemble: read the compile's messages as they come (blocking on the pipe),
 *   build symbols for each, sort them, resolve references among them and
 *   combine the checksum of the layout with the compile's result.
 * link: build a symbol table from the checksums of the inputs, sort it,
 *   resolve references and checksum the resulting layout.
 */
#include "mkbench.h"

long job_syscall(long nr, long a, long b, long c);

static void __attribute__((noreturn)) job_exit(u64 v)
{
	job_syscall(SYS_EXIT, (long)v, 0, 0);
	for (;;)
		;
}

static void __attribute__((noreturn)) job_fail(u64 code, u64 a, u64 b)
{
	job_syscall(SYS_FAIL, (long)code, (long)a, (long)b);
	for (;;)
		;
}

/* ---- random numbers, memory ------------------------------------------- */

struct rng {
	u64 s;
};

static u64 rnd(struct rng *r)
{
	r->s += 0x9e3779b97f4a7c15UL;
	return mix64(r->s);
}

static u32 rndn(struct rng *r, u32 n)
{
	return (u32)(rnd(r) % n);
}

struct heap {
	u64 brk, end;		/* bump heap: never freed (like GCC's obstacks) */
	u64 mm_next, mm_end;	/* mmap area: page-aligned chunks, munmapped */
};

static void *halloc(struct heap *h, u64 n)
{
	u64 p = h->brk;

	h->brk = ALIGN_UP(h->brk + n, 16);
	if (h->brk > h->end)
		job_fail(10, h->brk, n);
	return (void *)p;
}

static void *halloc_pages(struct heap *h, u64 n)
{
	h->brk = ALIGN_UP(h->brk, PAGE_SIZE);
	return halloc(h, ALIGN_UP(n, PAGE_SIZE));
}

static u64 mmap_chunk(struct heap *h, u64 n)
{
	u64 p = h->mm_next;

	h->mm_next += ALIGN_UP(n, PAGE_SIZE);
	if (h->mm_next > h->mm_end)
		job_fail(11, h->mm_next, n);
	return p;
}

static void heap_init(struct heap *h)
{
	h->brk = JOB_HEAP_BASE;
	h->end = JOB_HEAP_BASE + JOB_HEAP_MAX;
	h->mm_next = JOB_MMAP_BASE;
	h->mm_end = JOB_MMAP_BASE + JOB_MMAP_MAX;
}

/* ---- the source generator --------------------------------------------- */

#define SRC_CHUNK	(32 << 10)	/* "file buffer" the source is read into */
#define SRC_REFILLS	2		/* refills of one buffer before it is munmapped */
#define FUNC_MAX_TEXT	(6 << 10)

struct out {
	char *p;
	u64 len, cap;
};

static void emit_c(struct out *o, char c)
{
	if (o->len < o->cap)
		o->p[o->len] = c;
	o->len++;
}

static void emit_s(struct out *o, const char *s)
{
	while (*s)
		emit_c(o, *s++);
}

static void emit_u(struct out *o, u64 v)
{
	char t[24];
	int n = 0;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		emit_c(o, t[--n]);
}

static const char *const var_stems[] = {
	"count", "len", "idx", "tmp", "acc", "val", "key", "off", "mask", "flag",
	"lo", "hi", "sum", "prev", "next", "size", "pos", "cnt", "base", "limit",
};

static const char *const bin_ops[] = {
	"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "<", ">", "==", "!=",
	"<=", ">=", "&&", "||", "+", "-", "*", "&",
};

struct gen {
	struct rng r;
	u32 fn;		/* function being generated */
	u32 nvars;	/* locals declared so far */
	u32 depth;
};

static void gen_ident(struct gen *g, struct out *o, u32 which)
{
	emit_s(o, var_stems[which % ARRAY_SIZE(var_stems)]);
	emit_c(o, '_');
	emit_u(o, which / ARRAY_SIZE(var_stems));
}

static void gen_expr(struct gen *g, struct out *o, u32 depth)
{
	u32 k = rndn(&g->r, 16);

	if (depth >= 4 || k < 4) {
		if (k & 1 || !g->nvars) {
			emit_u(o, rndn(&g->r, k < 2 ? 10 : 5000));
		} else {
			gen_ident(g, o, rndn(&g->r, g->nvars));
		}
		return;
	}
	if (k < 13) {
		if (k > 10)
			emit_c(o, '(');
		gen_expr(g, o, depth + 1);
		emit_c(o, ' ');
		emit_s(o, bin_ops[rndn(&g->r, ARRAY_SIZE(bin_ops))]);
		emit_c(o, ' ');
		gen_expr(g, o, depth + 1);
		if (k > 10)
			emit_c(o, ')');
	} else if (k == 13) {
		emit_c(o, "-~!"[rndn(&g->r, 3)]);
		emit_c(o, '(');
		gen_expr(g, o, depth + 1);
		emit_c(o, ')');
	} else if (g->fn > 0) {
		emit_s(o, "fn_");
		emit_u(o, rndn(&g->r, g->fn));
		emit_c(o, '(');
		gen_expr(g, o, depth + 2);
		emit_s(o, ", ");
		gen_expr(g, o, depth + 2);
		emit_c(o, ')');
	} else {
		emit_u(o, rndn(&g->r, 100));
	}
}

static void gen_stmts(struct gen *g, struct out *o, u32 n, u32 indent)
{
	for (u32 i = 0; i < n; i++) {
		u32 k = rndn(&g->r, 12);

		for (u32 t = 0; t < indent; t++)
			emit_c(o, '\t');
		if (k < 5 || g->nvars < 2) {
			emit_s(o, "int ");
			gen_ident(g, o, g->nvars);
			emit_s(o, " = ");
			gen_expr(g, o, 0);
			emit_s(o, ";\n");
			g->nvars++;
		} else if (k < 9 || indent > 2) {
			gen_ident(g, o, rndn(&g->r, g->nvars));
			emit_s(o, " = ");
			gen_expr(g, o, 0);
			emit_s(o, ";\n");
		} else if (k < 11) {
			emit_s(o, "if (");
			gen_expr(g, o, 1);
			emit_s(o, ") {\n");
			gen_stmts(g, o, 1 + rndn(&g->r, 3), indent + 1);
			for (u32 t = 0; t < indent; t++)
				emit_c(o, '\t');
			emit_s(o, "} else {\n");
			gen_stmts(g, o, 1 + rndn(&g->r, 2), indent + 1);
			for (u32 t = 0; t < indent; t++)
				emit_c(o, '\t');
			emit_s(o, "}\n");
		} else {
			emit_s(o, "while (");
			gen_expr(g, o, 2);
			emit_s(o, ") {\n");
			gen_stmts(g, o, 1 + rndn(&g->r, 2), indent + 1);
			for (u32 t = 0; t < indent; t++)
				emit_c(o, '\t');
			emit_s(o, "}\n");
		}
	}
}

/* one function: "int fn_N(int a_0, int b_0) { ... return e; }" */
static void gen_function(struct gen *g, struct out *o, u32 fn)
{
	g->fn = fn;
	g->nvars = 0;
	emit_s(o, "int fn_");
	emit_u(o, fn);
	emit_s(o, "(int ");
	gen_ident(g, o, g->nvars++);
	emit_s(o, ", int ");
	gen_ident(g, o, g->nvars++);
	emit_s(o, ")\n{\n");
	gen_stmts(g, o, 6 + rndn(&g->r, 14), 1);
	emit_s(o, "\treturn ");
	gen_expr(g, o, 0);
	emit_s(o, ";\n}\n\n");
}

/* ---- tokens ------------------------------------------------------------ */

enum {
	T_EOF, T_NUM, T_IDENT, T_INT, T_IF, T_ELSE, T_WHILE, T_RETURN,
	T_LP, T_RP, T_LB, T_RB, T_SEMI, T_COMMA, T_ASSIGN, T_OP,
};

enum {
	OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_AND, OP_OR, OP_XOR, OP_SHL,
	OP_SHR, OP_LT, OP_GT, OP_EQ, OP_NE, OP_LE, OP_GE, OP_LAND, OP_LOR,
	OP_NEG, OP_NOT, OP_LNOT, NOPS
};

struct token {
	u16 kind, op;
	u32 sym;	/* identifier: symbol number; number: value */
};

/* identifiers, interned */
struct sym {
	struct sym *next;
	u64 hash;
	u32 id, len;
	u32 uses;
	char name[];
};

#define SYMTAB_BUCKETS 1024

struct symtab {
	struct sym **bucket;
	u32 n;
};

static u64 str_hash(const char *s, u32 len)
{
	u64 h = 0xcbf29ce484222325UL;

	for (u32 i = 0; i < len; i++) {
		h ^= (u8)s[i];
		h *= 0x100000001b3UL;
	}
	return h;
}

static struct sym *intern(struct heap *hp, struct symtab *t, const char *s, u32 len)
{
	u64 h = str_hash(s, len);
	struct sym **b = &t->bucket[h % SYMTAB_BUCKETS], *e;

	for (e = *b; e; e = e->next)
		if (e->hash == h && e->len == len && !memcmp(e->name, s, len)) {
			e->uses++;
			return e;
		}
	e = halloc(hp, sizeof(*e) + len + 1);
	e->next = *b;
	e->hash = h;
	e->id = t->n++;
	e->len = len;
	e->uses = 1;
	memcpy(e->name, s, len);
	e->name[len] = 0;
	*b = e;
	return e;
}

static int is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static u32 tokenize(struct heap *hp, struct symtab *st, const char *s, u64 len,
		    struct token **out)
{
	/* room for the worst case (a token per character), trimmed afterwards */
	struct token *t = halloc(hp, (len + 1) * sizeof(*t));
	u32 n = 0;
	u64 i = 0;

	while (i < len) {
		char c = s[i];
		struct token *k = &t[n];

		if (c == ' ' || c == '\t' || c == '\n') {
			i++;
			continue;
		}
		k->op = 0;
		k->sym = 0;
		if (is_alpha(c)) {
			u64 j = i;

			while (j < len && (is_alpha(s[j]) || is_digit(s[j])))
				j++;
			if (j - i == 3 && !memcmp(s + i, "int", 3))
				k->kind = T_INT;
			else if (j - i == 2 && !memcmp(s + i, "if", 2))
				k->kind = T_IF;
			else if (j - i == 4 && !memcmp(s + i, "else", 4))
				k->kind = T_ELSE;
			else if (j - i == 5 && !memcmp(s + i, "while", 5))
				k->kind = T_WHILE;
			else if (j - i == 6 && !memcmp(s + i, "return", 6))
				k->kind = T_RETURN;
			else {
				/* interned below, once the token array is trimmed */
				k->kind = T_IDENT;
				k->sym = (u32)i;
				k->op = (u16)(j - i);
			}
			i = j;
		} else if (is_digit(c)) {
			u32 v = 0;

			while (i < len && is_digit(s[i]))
				v = v * 10 + (u32)(s[i++] - '0');
			k->kind = T_NUM;
			k->sym = v;
		} else {
			char d = i + 1 < len ? s[i + 1] : 0;
			int two = 0;

			k->kind = T_OP;
			switch (c) {
			case '(': k->kind = T_LP; break;
			case ')': k->kind = T_RP; break;
			case '{': k->kind = T_LB; break;
			case '}': k->kind = T_RB; break;
			case ';': k->kind = T_SEMI; break;
			case ',': k->kind = T_COMMA; break;
			case '+': k->op = OP_ADD; break;
			case '-': k->op = OP_SUB; break;
			case '*': k->op = OP_MUL; break;
			case '/': k->op = OP_DIV; break;
			case '%': k->op = OP_MOD; break;
			case '^': k->op = OP_XOR; break;
			case '~': k->op = OP_NOT; break;
			case '&':
				two = d == '&';
				k->op = two ? OP_LAND : OP_AND;
				break;
			case '|':
				two = d == '|';
				k->op = two ? OP_LOR : OP_OR;
				break;
			case '<':
				two = d == '<' || d == '=';
				k->op = d == '<' ? OP_SHL : d == '=' ? OP_LE : OP_LT;
				break;
			case '>':
				two = d == '>' || d == '=';
				k->op = d == '>' ? OP_SHR : d == '=' ? OP_GE : OP_GT;
				break;
			case '=':
				two = d == '=';
				if (two)
					k->op = OP_EQ;
				else
					k->kind = T_ASSIGN;
				break;
			case '!':
				two = d == '=';
				k->op = two ? OP_NE : OP_LNOT;
				break;
			default:
				job_fail(20, (u64)(u8)c, i);
			}
			i += two ? 2 : 1;
		}
		n++;
	}
	t[n].kind = T_EOF;
	t[n].op = 0;
	t[n].sym = 0;
	hp->brk = ALIGN_UP((u64)&t[n + 1], 16);
	for (u32 k = 0; k < n; k++)
		if (t[k].kind == T_IDENT) {
			t[k].sym = intern(hp, st, s + t[k].sym, t[k].op)->id;
			t[k].op = 0;
		}
	*out = t;
	return n;
}

/* ---- syntax trees -------------------------------------------------------- */

enum { N_NUM, N_VAR, N_BIN, N_UN, N_CALL, N_DECL, N_ASSIGN, N_IF, N_WHILE, N_RETURN };

struct node {
	u16 kind, op;
	u32 sym;
	s32 value;
	u16 regs;	/* Sethi-Ullman number */
	u16 is_const;
	struct node *a, *b, *c;	/* operands; statements: a = expr, b/c = bodies */
	struct node *next;	/* next statement */
	u64 hash;		/* structural hash (value numbering) */
};

struct parser {
	struct heap *hp;
	struct token *t;
	u32 pos;
	u64 nodes;
};

static struct node *new_node(struct parser *p, u16 kind)
{
	struct node *n = halloc(p->hp, sizeof(*n));

	memset(n, 0, sizeof(*n));
	n->kind = kind;
	p->nodes++;
	return n;
}

static struct token *peek(struct parser *p)
{
	return &p->t[p->pos];
}

static struct token *expect(struct parser *p, u16 kind)
{
	struct token *t = &p->t[p->pos];

	if (t->kind != kind)
		job_fail(30, kind, (u64)t);
	p->pos++;
	return t;
}

static int prec(u16 op)
{
	switch (op) {
	case OP_MUL: case OP_DIV: case OP_MOD: return 10;
	case OP_ADD: case OP_SUB: return 9;
	case OP_SHL: case OP_SHR: return 8;
	case OP_LT: case OP_GT: case OP_LE: case OP_GE: return 7;
	case OP_EQ: case OP_NE: return 6;
	case OP_AND: return 5;
	case OP_XOR: return 4;
	case OP_OR: return 3;
	case OP_LAND: return 2;
	case OP_LOR: return 1;
	}
	return 0;
}

static struct node *parse_expr(struct parser *p, int min_prec);

static struct node *parse_primary(struct parser *p)
{
	struct token *t = peek(p);
	struct node *n;

	if (t->kind == T_NUM) {
		p->pos++;
		n = new_node(p, N_NUM);
		n->value = (s32)t->sym;
		return n;
	}
	if (t->kind == T_IDENT) {
		p->pos++;
		if (peek(p)->kind == T_LP) {
			p->pos++;
			n = new_node(p, N_CALL);
			n->sym = t->sym;
			n->a = parse_expr(p, 1);
			expect(p, T_COMMA);
			n->b = parse_expr(p, 1);
			expect(p, T_RP);
			return n;
		}
		n = new_node(p, N_VAR);
		n->sym = t->sym;
		return n;
	}
	if (t->kind == T_LP) {
		p->pos++;
		n = parse_expr(p, 1);
		expect(p, T_RP);
		return n;
	}
	if (t->kind == T_OP && (t->op == OP_SUB || t->op == OP_NOT || t->op == OP_LNOT)) {
		p->pos++;
		n = new_node(p, N_UN);
		n->op = t->op == OP_SUB ? OP_NEG : t->op;
		n->a = parse_primary(p);
		return n;
	}
	job_fail(31, t->kind, (u64)t);
}

static struct node *parse_expr(struct parser *p, int min_prec)
{
	struct node *lhs = parse_primary(p);

	for (;;) {
		struct token *t = peek(p);
		struct node *n;
		int pr;

		if (t->kind != T_OP || (pr = prec(t->op)) < min_prec)
			return lhs;
		p->pos++;
		n = new_node(p, N_BIN);
		n->op = t->op;
		n->a = lhs;
		n->b = parse_expr(p, pr + 1);
		lhs = n;
	}
}

static struct node *parse_block(struct parser *p);

static struct node *parse_stmt(struct parser *p)
{
	struct token *t = peek(p);
	struct node *n;

	switch (t->kind) {
	case T_INT:
		p->pos++;
		n = new_node(p, N_DECL);
		n->sym = expect(p, T_IDENT)->sym;
		expect(p, T_ASSIGN);
		n->a = parse_expr(p, 1);
		expect(p, T_SEMI);
		return n;
	case T_IDENT:
		p->pos++;
		n = new_node(p, N_ASSIGN);
		n->sym = t->sym;
		expect(p, T_ASSIGN);
		n->a = parse_expr(p, 1);
		expect(p, T_SEMI);
		return n;
	case T_IF:
		p->pos++;
		n = new_node(p, N_IF);
		expect(p, T_LP);
		n->a = parse_expr(p, 1);
		expect(p, T_RP);
		n->b = parse_block(p);
		if (peek(p)->kind == T_ELSE) {
			p->pos++;
			n->c = parse_block(p);
		}
		return n;
	case T_WHILE:
		p->pos++;
		n = new_node(p, N_WHILE);
		expect(p, T_LP);
		n->a = parse_expr(p, 1);
		expect(p, T_RP);
		n->b = parse_block(p);
		return n;
	case T_RETURN:
		p->pos++;
		n = new_node(p, N_RETURN);
		n->a = parse_expr(p, 1);
		expect(p, T_SEMI);
		return n;
	}
	job_fail(32, t->kind, (u64)t);
}

static struct node *parse_block(struct parser *p)
{
	struct node *head = NULL, **tail = &head;

	expect(p, T_LB);
	while (peek(p)->kind != T_RB) {
		*tail = parse_stmt(p);
		tail = &(*tail)->next;
	}
	p->pos++;
	return head;
}

struct function {
	struct function *next;
	u32 name, params[2];
	struct node *body;
	u64 hash;	/* tree hash taken right after parsing */
};

static struct function *parse_function(struct parser *p)
{
	struct function *f = halloc(p->hp, sizeof(*f));

	expect(p, T_INT);
	f->name = expect(p, T_IDENT)->sym;
	expect(p, T_LP);
	expect(p, T_INT);
	f->params[0] = expect(p, T_IDENT)->sym;
	expect(p, T_COMMA);
	expect(p, T_INT);
	f->params[1] = expect(p, T_IDENT)->sym;
	expect(p, T_RP);
	f->body = parse_block(p);
	f->next = NULL;
	return f;
}

/* ---- passes --------------------------------------------------------------- */

static s32 eval_op(u16 op, s32 x, s32 y)
{
	u32 ux = (u32)x, uy = (u32)y;

	switch (op) {
	case OP_ADD: return (s32)(ux + uy);
	case OP_SUB: return (s32)(ux - uy);
	case OP_MUL: return (s32)(ux * uy);
	case OP_DIV: return y == 0 || (x == (s32)0x80000000 && y == -1) ? 0 : x / y;
	case OP_MOD: return y == 0 || (x == (s32)0x80000000 && y == -1) ? 0 : x % y;
	case OP_AND: return x & y;
	case OP_OR: return x | y;
	case OP_XOR: return x ^ y;
	case OP_SHL: return (s32)(ux << (uy & 31));
	case OP_SHR: return x >> (uy & 31);
	case OP_LT: return x < y;
	case OP_GT: return x > y;
	case OP_EQ: return x == y;
	case OP_NE: return x != y;
	case OP_LE: return x <= y;
	case OP_GE: return x >= y;
	case OP_LAND: return x && y;
	case OP_LOR: return x || y;
	case OP_NEG: return (s32)(0u - ux);
	case OP_NOT: return ~x;
	case OP_LNOT: return !x;
	}
	return 0;
}

/* constant folding, bottom-up; returns the number of folds */
static u32 fold(struct node *n)
{
	u32 k = 0;

	if (!n)
		return 0;
	k += fold(n->a);
	k += fold(n->b);
	if (n->kind == N_NUM) {
		n->is_const = 1;
	} else if (n->kind == N_BIN && n->a->is_const && n->b->is_const) {
		n->value = eval_op(n->op, n->a->value, n->b->value);
		n->kind = N_NUM;
		n->is_const = 1;
		k++;
	} else if (n->kind == N_UN && n->a->is_const) {
		n->value = eval_op(n->op, n->a->value, 0);
		n->kind = N_NUM;
		n->is_const = 1;
		k++;
	}
	return k;
}

static u32 fold_stmts(struct node *s)
{
	u32 k = 0;

	for (; s; s = s->next) {
		k += fold(s->a);
		k += fold_stmts(s->b);
		k += fold_stmts(s->c);
	}
	return k;
}

/* structural hash of an expression tree (value numbering key) */
static u64 tree_hash(struct node *n)
{
	u64 h;

	if (!n)
		return 0x51ed27UL;
	h = ((u64)n->kind << 48) ^ ((u64)n->op << 32) ^ (u32)n->value ^ ((u64)n->sym << 20);
	if (n->kind != N_NUM) {
		h ^= mix64(tree_hash(n->a) + 0x1234567UL);
		h = mix64(h + tree_hash(n->b));
	}
	return mix64(h);
}

static u64 stmts_hash(struct node *s)
{
	u64 h = 0x6a09e667f3bcc909UL;

	for (; s; s = s->next) {
		h = mix64(h ^ ((u64)s->kind << 40) ^ s->sym);
		h += tree_hash(s->a);
		h = mix64(h ^ stmts_hash(s->b));
		h = mix64(h + stmts_hash(s->c));
	}
	return h;
}

/* value numbering: count repeated subexpressions with a per-function table */
#define VN_BUCKETS 512

struct vn {
	struct vn *next;
	u64 hash;
	struct node *n;
};

static u32 number_values(struct heap *hp, struct vn **tab, struct node *n)
{
	u32 dup = 0;
	struct vn **b, *e;

	if (!n || n->kind == N_NUM || n->kind == N_VAR)
		return 0;
	dup += number_values(hp, tab, n->a);
	dup += number_values(hp, tab, n->b);
	n->hash = tree_hash(n);
	b = &tab[n->hash % VN_BUCKETS];
	for (e = *b; e; e = e->next)
		if (e->hash == n->hash)
			return dup + 1;
	e = halloc(hp, sizeof(*e));
	e->hash = n->hash;
	e->n = n;
	e->next = *b;
	*b = e;
	return dup;
}

static u32 number_stmts(struct heap *hp, struct vn **tab, struct node *s)
{
	u32 d = 0;

	for (; s; s = s->next) {
		d += number_values(hp, tab, s->a);
		d += number_stmts(hp, tab, s->b);
		d += number_stmts(hp, tab, s->c);
	}
	return d;
}

/* Sethi-Ullman register need */
static u16 label(struct node *n)
{
	u16 l, r;

	if (!n)
		return 0;
	if (n->kind == N_NUM || n->kind == N_VAR)
		return n->regs = 1;
	l = label(n->a);
	r = label(n->b);
	n->regs = l == r ? (u16)(l + 1) : (l > r ? l : r);
	return n->regs;
}

/* ---- interpretation: run each function on a few inputs ------------------- */

#define ENV_SIZE	8192
#define RUNS		4	/* test inputs per function */
#define RUN_BUDGET	3000	/* tree nodes visited per run */

struct interp {
	s32 *env;			/* variables, by symbol number */
	struct function **fn;		/* functions, by symbol number */
	u64 steps, budget;
	u32 depth;
};

static s32 run_stmts(struct interp *in, struct node *s, int *returned);

static s32 run_expr(struct interp *in, struct node *n)
{
	s32 x, y;

	if (in->steps++ >= in->budget)
		return 0;
	switch (n->kind) {
	case N_NUM:
		return n->value;
	case N_VAR:
		return in->env[n->sym % ENV_SIZE];
	case N_UN:
		return eval_op(n->op, run_expr(in, n->a), 0);
	case N_BIN:
		x = run_expr(in, n->a);
		if (n->op == OP_LAND && !x)
			return 0;
		if (n->op == OP_LOR && x)
			return 1;
		y = run_expr(in, n->b);
		return eval_op(n->op, x, y);
	case N_CALL: {
		struct function *f = in->fn[n->sym % ENV_SIZE];
		int ret = 0;
		s32 r;

		x = run_expr(in, n->a);
		y = run_expr(in, n->b);
		if (!f || in->depth >= 3)
			return (s32)mix64(((u64)(u32)x << 32) | (u32)y);
		in->env[f->params[0] % ENV_SIZE] = x;
		in->env[f->params[1] % ENV_SIZE] = y;
		in->depth++;
		r = run_stmts(in, f->body, &ret);
		in->depth--;
		return r;
	}
	}
	return 0;
}

static s32 run_stmts(struct interp *in, struct node *s, int *returned)
{
	s32 v = 0;

	for (; s && !*returned && in->steps < in->budget; s = s->next) {
		switch (s->kind) {
		case N_DECL:
		case N_ASSIGN:
			in->env[s->sym % ENV_SIZE] = run_expr(in, s->a);
			break;
		case N_IF:
			if (run_expr(in, s->a))
				v = run_stmts(in, s->b, returned);
			else
				v = run_stmts(in, s->c, returned);
			break;
		case N_WHILE:
			for (int i = 0; i < 4 && !*returned && run_expr(in, s->a); i++)
				v = run_stmts(in, s->b, returned);
			break;
		case N_RETURN:
			v = run_expr(in, s->a);
			*returned = 1;
			break;
		}
	}
	return v;
}

static u64 run_function(struct interp *in, struct function *f, u64 seed)
{
	u64 h = 0;

	for (u32 r = 0; r < RUNS; r++) {
		u64 x = mix64(seed + r);
		int ret = 0;

		in->env[f->params[0] % ENV_SIZE] = (s32)x;
		in->env[f->params[1] % ENV_SIZE] = (s32)(x >> 32);
		in->steps = 0;
		in->budget = RUN_BUDGET;
		in->depth = 0;
		h = mix64(h + (u32)run_stmts(in, f->body, &ret) + in->steps);
	}
	return h;
}

/* ---- code emission ---------------------------------------------------------- */

struct obj {
	u8 *p;
	u64 len, cap;
	u64 sum;	/* running checksum of the bytes emitted */
};

static void ob(struct obj *o, u8 b)
{
	if (o->len >= o->cap)
		job_fail(40, o->len, o->cap);
	o->p[o->len++] = b;
	o->sum = (o->sum ^ b) * 0x100000001b3UL;
}

static void ob32(struct obj *o, u32 v)
{
	for (int i = 0; i < 4; i++)
		ob(o, (u8)(v >> (8 * i)));
}

enum { I_PUSH = 0x10, I_LOAD, I_STORE, I_OP, I_CALL, I_JZ, I_JMP, I_RET };

static void emit_expr(struct obj *o, struct node *n)
{
	switch (n->kind) {
	case N_NUM:
		ob(o, I_PUSH);
		ob32(o, (u32)n->value);
		break;
	case N_VAR:
		ob(o, I_LOAD);
		ob32(o, n->sym);
		break;
	case N_UN:
		emit_expr(o, n->a);
		ob(o, I_OP);
		ob(o, (u8)n->op);
		break;
	case N_BIN:
		/* evaluate the operand needing more registers first */
		if (n->b->regs > n->a->regs) {
			emit_expr(o, n->b);
			emit_expr(o, n->a);
			ob(o, I_OP);
			ob(o, (u8)(n->op | 0x80));
		} else {
			emit_expr(o, n->a);
			emit_expr(o, n->b);
			ob(o, I_OP);
			ob(o, (u8)n->op);
		}
		break;
	case N_CALL:
		emit_expr(o, n->a);
		emit_expr(o, n->b);
		ob(o, I_CALL);
		ob32(o, n->sym);	/* relocation: symbol number */
		break;
	}
}

static void emit_stmts(struct obj *o, struct node *s)
{
	for (; s; s = s->next) {
		u64 at;

		switch (s->kind) {
		case N_DECL:
		case N_ASSIGN:
			emit_expr(o, s->a);
			ob(o, I_STORE);
			ob32(o, s->sym);
			break;
		case N_RETURN:
			emit_expr(o, s->a);
			ob(o, I_RET);
			break;
		case N_IF:
		case N_WHILE:
			at = o->len;
			emit_expr(o, s->a);
			ob(o, I_JZ);
			ob32(o, (u32)(o->len - at));
			emit_stmts(o, s->b);
			if (s->kind == N_WHILE) {
				ob(o, I_JMP);
				ob32(o, (u32)(o->len - at));
			} else if (s->c) {
				ob(o, I_JMP);
				ob32(o, 0);
				emit_stmts(o, s->c);
			}
			break;
		}
	}
}

/* ---- compile ---------------------------------------------------------------- */

#define OBJ_MAX (8UL << 20)

static u64 compile(struct job_args *a)
{
	struct heap hp;
	struct symtab st;
	struct rng r;
	struct gen g;
	struct obj o;
	struct function *funcs = NULL, **ftail = &funcs;
	u64 nfuncs = a->size, folds = 0, dups = 0, tree_sum = 0, nodes = 0;
	u64 chunk = 0, chunk_used = SRC_CHUNK, refills = 0, check, h, runs = 0;
	struct interp in;
	struct vn **vtab;

	heap_init(&hp);
	st.bucket = halloc(&hp, SYMTAB_BUCKETS * sizeof(*st.bucket));
	memset(st.bucket, 0, SYMTAB_BUCKETS * sizeof(*st.bucket));
	st.n = 0;
	o.p = halloc_pages(&hp, OBJ_MAX);
	o.len = 0;
	o.cap = OBJ_MAX;
	o.sum = 0xcbf29ce484222325UL;
	r.s = mix64(a->seed * 0x2545f4914f6cdd1dUL + a->unit);
	g.r = r;
	in.env = halloc(&hp, ENV_SIZE * sizeof(*in.env));
	memset(in.env, 0, ENV_SIZE * sizeof(*in.env));
	in.fn = halloc(&hp, ENV_SIZE * sizeof(*in.fn));
	memset(in.fn, 0, ENV_SIZE * sizeof(*in.fn));

	for (u64 fn = 0; fn < nfuncs; fn++) {
		struct out src;
		struct token *toks;
		struct parser p;
		struct function *f;

		/*
		 * "read" the next part of the file into the buffer; a buffer is
		 * refilled a few times, then munmapped and a fresh one mapped
		 */
		if (chunk_used + FUNC_MAX_TEXT > SRC_CHUNK) {
			if (!chunk || ++refills % SRC_REFILLS == 0) {
				if (chunk)
					job_syscall(SYS_MUNMAP, (long)chunk, SRC_CHUNK, 0);
				chunk = mmap_chunk(&hp, SRC_CHUNK);
			}
			chunk_used = 0;
		}
		src.p = (char *)(chunk + chunk_used);
		src.len = 0;
		src.cap = FUNC_MAX_TEXT;
		gen_function(&g, &src, (u32)fn);
		if (src.len > src.cap)
			src.len = src.cap;	/* truncated: the parser will say so */
		chunk_used += ALIGN_UP(src.len, 8);

		tokenize(&hp, &st, src.p, src.len, &toks);
		p.hp = &hp;
		p.t = toks;
		p.pos = 0;
		p.nodes = 0;
		f = parse_function(&p);
		if (peek(&p)->kind != T_EOF)
			job_fail(33, fn, p.pos);
		nodes += p.nodes;
		f->hash = stmts_hash(f->body);
		*ftail = f;
		ftail = &f->next;

		in.fn[f->name % ENV_SIZE] = f;
		folds += fold_stmts(f->body);
		runs = mix64(runs ^ run_function(&in, f, r.s + fn));
		vtab = halloc(&hp, VN_BUCKETS * sizeof(*vtab));
		memset(vtab, 0, VN_BUCKETS * sizeof(*vtab));
		dups += number_stmts(&hp, vtab, f->body);
		for (struct node *s = f->body; s; s = s->next)
			label(s->a);
		ob(&o, 0xf0);
		ob32(&o, f->name);
		emit_stmts(&o, f->body);
		/* hash again after the passes: folded trees hash differently */
		tree_sum += mix64(f->hash) ^ stmts_hash(f->body);
		/* a batch of functions is done: hand it to the assembler */
		if ((fn + 1) % pipe_step(nfuncs) == 0 && fn + 1 < nfuncs)
			job_syscall(SYS_PIPE_WRITE, (long)mix64(o.sum ^ tree_sum ^ (fn << 32)), 0, 0);
	}
	if (chunk)
		job_syscall(SYS_MUNMAP, (long)chunk, SRC_CHUNK, 0);

	/* the first page of the object is final: make it read-only */
	if (o.len >= PAGE_SIZE)
		job_syscall(SYS_MPROTECT, (long)o.p, PAGE_SIZE, 0);

	/* self-checks: object bytes read back, trees re-walked */
	check = 0xcbf29ce484222325UL;
	for (u64 i = 0; i < o.len; i++)
		check = (check ^ o.p[i]) * 0x100000001b3UL;
	if (check != o.sum)
		job_fail(1, check, o.sum);
	h = 0;
	for (struct function *f = funcs; f; f = f->next)
		h += mix64(f->hash) ^ stmts_hash(f->body);
	if (h != tree_sum)
		job_fail(2, h, tree_sum);

	/* symbol table contents */
	for (u32 b = 0; b < SYMTAB_BUCKETS; b++)
		for (struct sym *s = st.bucket[b]; s; s = s->next)
			h ^= mix64(s->hash + s->uses * 0x9e3779b97f4a7c15UL + s->id);
	return mix64(o.sum ^ mix64(h + o.len) ^ (folds << 40) ^ (dups << 20) ^ nodes) + runs;
}

/* ---- link ------------------------------------------------------------------- */

struct lsym {
	struct lsym *next;
	u64 hash, value, addr;
	char name[24];
};

#define LINK_BUCKETS 4096

static void sym_name(char *out, u64 v)
{
	static const char hex[] = "0123456789abcdef";

	out[0] = 's';
	out[1] = '_';
	for (int i = 0; i < 16; i++)
		out[2 + i] = hex[(v >> (60 - 4 * i)) & 15];
	out[18] = 0;
}

static struct lsym *lookup_sym(struct lsym **tab, const char *name)
{
	u64 h = str_hash(name, 18);

	for (struct lsym *s = tab[h % LINK_BUCKETS]; s; s = s->next)
		if (s->hash == h && !strcmp(s->name, name))
			return s;
	return NULL;
}

static void merge_sort(struct lsym **v, struct lsym **tmp, u64 n)
{
	u64 m;

	if (n < 2)
		return;
	m = n / 2;
	merge_sort(v, tmp, m);
	merge_sort(v + m, tmp, n - m);
	for (u64 i = 0, j = m, k = 0; k < n; k++) {
		if (j >= n || (i < m && strcmp(v[i]->name, v[j]->name) <= 0))
			tmp[k] = v[i++];
		else
			tmp[k] = v[j++];
	}
	memcpy(v, tmp, n * sizeof(*v));
}

static u64 link(struct job_args *a)
{
	struct heap hp;
	struct lsym **tab, **vec, **tmp;
	/* about the same work for every link, whatever its number of inputs */
	u64 n = a->ninputs ? a->ninputs : 1;
	u64 per = 240 * a->size / n + 16, nrel = 2 * per;
	u64 total = n * per, k = 0, h = 0x243f6a8885a308d3UL, addr = 0x10000000UL;

	heap_init(&hp);
	tab = halloc(&hp, LINK_BUCKETS * sizeof(*tab));
	memset(tab, 0, LINK_BUCKETS * sizeof(*tab));
	vec = halloc(&hp, total * sizeof(*vec));
	tmp = halloc(&hp, total * sizeof(*tmp));
	for (u64 i = 0; i < n; i++)
		for (u64 j = 0; j < per; j++) {
			struct lsym *s = halloc(&hp, sizeof(*s));
			u64 v = mix64(a->input[i] + j);

			sym_name(s->name, v);
			s->hash = str_hash(s->name, 18);
			s->value = mix64(v ^ a->unit);
			s->next = tab[s->hash % LINK_BUCKETS];
			tab[s->hash % LINK_BUCKETS] = s;
			vec[k++] = s;
		}
	merge_sort(vec, tmp, total);
	for (u64 i = 0; i < total; i++) {
		vec[i]->addr = addr;
		addr += 16 + (vec[i]->value & 0xf0);
	}
	/* relocations: each input refers to symbols of the others */
	for (u64 i = 0; i < n; i++)
		for (u64 j = 0; j < nrel; j++) {
			u64 t = mix64(a->input[i] ^ (j * 0x9e3779b97f4a7c15UL));
			u64 src = (i + 1 + t % n) % n;
			char name[24];
			struct lsym *s;

			sym_name(name, mix64(a->input[src] + (t >> 32) % per));
			s = lookup_sym(tab, name);
			if (!s)
				job_fail(3, src, t);
			h = mix64(h ^ s->addr) + j;
		}
	for (u64 i = 0; i < total; i++)
		h = mix64(h + vec[i]->addr) ^ vec[i]->hash;
	return h;
}

/* ---- assemble ---------------------------------------------------------------- */

#define ASM_SYMS 200	/* symbols per function of the unit */

/*
 * The assembler of a compile: reads the compile's output from the pipe batch
 * by batch as it is written (blocking until it is), and for each batch
 * builds its symbols, sorts them, lays them out and resolves references to
 * them and to earlier batches.  The last message is the compile's result,
 * combined with the checksum of the layout.  Each batch is somewhat less
 * work than the compile spends on it, so the assembler keeps pace, waiting
 * a little for every batch (cc1 | as).
 */
static u64 assemble(struct job_args *a)
{
	struct heap hp;
	struct lsym **tab, **vec, **tmp;
	u64 nmsg = pipe_msgs(a->size), per = ASM_SYMS * a->size / PIPE_BATCHES + 8;
	u64 k = 0, h = 0x452821e638d01377UL, addr = 0x20000000UL, last;

	heap_init(&hp);
	tab = halloc(&hp, LINK_BUCKETS * sizeof(*tab));
	memset(tab, 0, LINK_BUCKETS * sizeof(*tab));
	vec = halloc(&hp, nmsg * per * sizeof(*vec));
	tmp = halloc(&hp, per * sizeof(*tmp));
	for (u64 m = 0; m + 1 < nmsg; m++) {
		u64 d = (u64)job_syscall(SYS_PIPE_READ, (long)m, 0, 0), k0 = k;

		for (u64 j = 0; j < per; j++) {
			struct lsym *s = halloc(&hp, sizeof(*s));
			u64 v = mix64(d + j);

			sym_name(s->name, v);
			s->hash = str_hash(s->name, 18);
			s->value = mix64(v ^ a->unit);
			s->next = tab[s->hash % LINK_BUCKETS];
			tab[s->hash % LINK_BUCKETS] = s;
			vec[k++] = s;
		}
		merge_sort(vec + k0, tmp, per);
		for (u64 i = k0; i < k; i++) {
			vec[i]->addr = addr;
			addr += 4 + (vec[i]->value & 0x3c);
		}
		/* references to this batch's symbols and to earlier ones */
		for (u64 j = 0; j < 2 * per; j++) {
			u64 t = mix64(d ^ (j * 0x9e3779b97f4a7c15UL));
			struct lsym *s, *w = vec[t % k];

			s = lookup_sym(tab, w->name);
			if (s != w)
				job_fail(4, m, t);
			h = mix64(h ^ s->addr) + j;
		}
	}
	last = (u64)job_syscall(SYS_PIPE_READ, (long)(nmsg - 1), 0, 0);
	for (u64 i = 0; i < k; i++)
		h = mix64(h + vec[i]->addr) ^ vec[i]->hash;
	/* the unit's result: the compile's and the assembler's */
	return mix64(last + h);
}

void job_main(struct job_args *a)
{
	u64 r;

	if (a->kind == JOB_COMPILE) {
		r = compile(a);
		job_syscall(SYS_PIPE_WRITE, (long)r, 0, 0);
	} else if (a->kind == JOB_ASM) {
		r = assemble(a);
	} else {
		r = link(a);
	}
	job_exit(r);
}
