/*
 * fdt.c - read what mkbench needs from the flattened device tree that the
 * platform passed in r3: CPUs (interrupt server numbers, timebase frequency,
 * HPT size, cache block size), memory size, bootargs, the hvterm number and
 * the RTAS tokens.  The tree is big-endian; it is not used after boot.
 */
#include "kernel.h"

#define FDT_MAGIC	0xd00dfeed
#define FDT_BEGIN_NODE	1
#define FDT_END_NODE	2
#define FDT_PROP	3
#define FDT_NOP		4
#define FDT_END		9

static u32 be32(const void *p)
{
	const u8 *b = p;

	return ((u32)b[0] << 24) | ((u32)b[1] << 16) | ((u32)b[2] << 8) | b[3];
}

static u64 be_cells(const void *p, int cells)
{
	u64 v = 0;

	for (int i = 0; i < cells; i++)
		v = (v << 32) | be32((const u8 *)p + 4 * i);
	return v;
}

/* does a NUL-separated string list contain s? */
static int strlist_has(const char *list, u32 len, const char *s)
{
	u32 i = 0;

	while (i < len) {
		if (!strcmp(list + i, s))
			return 1;
		i += (u32)strlen(list + i) + 1;
	}
	return 0;
}

#define MAX_DEPTH 16

/* properties gathered for the node being walked */
struct node {
	const char *name;
	int is_cpu, is_memory, is_hvterm;
	const u8 *reg;
	u32 reg_len;
	const u8 *servers;
	u32 servers_len;
};

int fdt_parse(const void *fdt)
{
	const u8 *base = fdt;
	const u8 *p, *strings;
	struct node nodes[MAX_DEPTH];
	int depth = -1;
	int mem_seen = 0;

	if (be32(base) != FDT_MAGIC)
		return -1;
	p = base + be32(base + 8);
	strings = base + be32(base + 12);
	cfg.boot_server = be32(base + 28);

	for (;;) {
		u32 tok = be32(p);

		p += 4;
		if (tok == FDT_BEGIN_NODE) {
			const char *name = (const char *)p;

			p += ALIGN_UP(strlen(name) + 1, 4);
			if (++depth >= MAX_DEPTH)
				return -2;
			memset(&nodes[depth], 0, sizeof(nodes[depth]));
			nodes[depth].name = name;
			if (depth == 1 && !strncmp(name, "memory", 6))
				nodes[depth].is_memory = 1;
		} else if (tok == FDT_END_NODE) {
			struct node *n;

			if (depth < 0)
				return -3;
			n = &nodes[depth];
			if (n->is_cpu && depth == 2 && !strcmp(nodes[1].name, "cpus")) {
				if (n->servers_len) {
					for (u32 i = 0; i + 4 <= n->servers_len; i += 4)
						if (cfg.ncpus < MAX_CPUS)
							cfg.server[cfg.ncpus++] = be32(n->servers + i);
				} else if (n->reg_len >= 4 && cfg.ncpus < MAX_CPUS) {
					cfg.server[cfg.ncpus++] = be32(n->reg);
				}
			}
			if (n->is_memory && n->reg_len >= 16 && !mem_seen) {
				/* #address-cells = #size-cells = 2 at the root */
				if (be_cells(n->reg, 2) == 0) {
					cfg.mem_size = be_cells(n->reg + 8, 2);
					mem_seen = 1;
				}
			}
			if (n->is_hvterm && n->reg_len >= 4 && !cfg.termno)
				cfg.termno = be32(n->reg);
			depth--;
		} else if (tok == FDT_PROP) {
			u32 len = be32(p);
			const char *pname = (const char *)(strings + be32(p + 4));
			const u8 *val = p + 8;
			struct node *n = depth >= 0 ? &nodes[depth] : NULL;

			p += 8 + ALIGN_UP(len, 4);
			if (!n)
				continue;
			if (!strcmp(pname, "reg")) {
				n->reg = val;
				n->reg_len = len;
			} else if (!strcmp(pname, "device_type")) {
				if (!strcmp((const char *)val, "cpu"))
					n->is_cpu = 1;
				if (!strcmp((const char *)val, "memory"))
					n->is_memory = 1;
			} else if (!strcmp(pname, "compatible")) {
				if (strlist_has((const char *)val, len, "hvterm1"))
					n->is_hvterm = 1;
			} else if (!strcmp(pname, "ibm,ppc-interrupt-server#s")) {
				n->servers = val;
				n->servers_len = len;
			} else if (!strcmp(pname, "timebase-frequency") && len >= 4) {
				cfg.tb_hz = be_cells(val, len >= 8 ? 2 : 1);
			} else if (!strcmp(pname, "ibm,pft-size") && len >= 8) {
				cfg.pft_shift = be32(val + 4);
			} else if (!strcmp(pname, "d-cache-block-size") && len >= 4) {
				cfg.dcbz_size = be32(val);
			} else if (depth == 1 && !strcmp(n->name, "chosen") &&
				   !strcmp(pname, "bootargs")) {
				u32 l = len < sizeof(cfg.bootargs) - 1 ? len : sizeof(cfg.bootargs) - 1;

				memcpy(cfg.bootargs, val, l);
				cfg.bootargs[l] = 0;
			} else if (depth == 1 && (!strcmp(n->name, "rtas") || !strncmp(n->name, "rtas@", 5))) {
				if (!strcmp(pname, "start-cpu"))
					cfg.tok_start_cpu = be32(val);
				else if (!strcmp(pname, "power-off"))
					cfg.tok_power_off = be32(val);
				else if (!strcmp(pname, "ibm,os-term"))
					cfg.tok_os_term = be32(val);
				else if (!strcmp(pname, "query-cpu-stopped-state"))
					cfg.tok_stopped_state = be32(val);
				else if (!strcmp(pname, "ibm,hypertas-functions"))
					cfg.have_bulk = strlist_has((const char *)val, len, "hcall-bulk");
			}
		} else if (tok == FDT_NOP) {
			continue;
		} else if (tok == FDT_END) {
			break;
		} else {
			return -4;
		}
	}
	return 0;
}
