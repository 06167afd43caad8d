// SPDX-License-Identifier: GPL-2.0
/*
 * insncount: a QEMU TCG plugin that counts the guest instructions executed in an address range
 * (tools/bench-insns: the kernel's text and module area), per translation block, between marks.
 *
 * Arguments: out=FILE (where the counts go), lo=ADDR, hi=ADDR (the range counted, hex), and
 * mark=ADDR (hex): the entry of a kernel function the guest calls only to mark the end of a
 * window (tools/guest/insns.sh uses sethostname(2)). Each time a block starting at `mark`
 * runs, every block of the range that ran since the previous mark is written to FILE as
 * "VADDR INSNS EXECS" (hex address, instructions in the block, times it ran) after a line
 * "mark N", and the counts start again from zero. The guest's /proc/kallsyms tells which
 * module and symbol each address belongs to (tools/insns-report).
 *
 * A block is counted whole each time it starts (an exception or interrupt in its middle is
 * rare against the millions of blocks counted). The counts are plain increments: exact under
 * -icount, where one host thread runs every vCPU in turn (tools/bench-insns always uses it).
 *
 * Built against the plugin ABI of the QEMU that runs the guests (Debian trixie, QEMU 10.0,
 * plugin API version 4): its development header is not packaged, so the few declarations used
 * are written out below, from QEMU's documentation of that API (docs/devel/tcg-plugins.rst).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* The plugin API (QEMU 10.0, version 4): only what this plugin uses. */
typedef uint64_t qemu_plugin_id_t;
struct qemu_info_t;
struct qemu_plugin_tb;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  void (*cb)(unsigned int vcpu, void *udata),
					  enum qemu_plugin_cb_flags flags, void *udata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
				    void (*cb)(qemu_plugin_id_t, void *udata), void *udata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);

EXPORT int qemu_plugin_version = 4;

/* One translation of a block of the range (a block translated again gets a record more). */
struct block {
	uint64_t vaddr;
	uint64_t insns;
	uint64_t execs;
};

static struct block **blocks;
static size_t nblocks, cap;
static uint64_t lo, hi, mark;
static unsigned long marks;
static FILE *out;

static void on_block(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	((struct block *)udata)->execs++;
}

static void dump(const char *what)
{
	fprintf(out, "%s %lu\n", what, marks++);
	for (size_t i = 0; i < nblocks; i++) {
		struct block *b = blocks[i];

		if (!b->execs)
			continue;
		fprintf(out, "%llx %llu %llu\n", (unsigned long long)b->vaddr,
			(unsigned long long)b->insns, (unsigned long long)b->execs);
		b->execs = 0;
	}
	fflush(out);
}

static void on_mark(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	(void)udata;
	dump("mark");
}

static void on_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	struct block *b;

	(void)id;
	if (va == mark) {
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
		return;
	}
	if (va < lo || va >= hi)
		return;
	if (nblocks == cap) {
		size_t ncap = cap ? 2 * cap : 65536;
		struct block **n = realloc(blocks, ncap * sizeof(*n));

		if (!n)
			return; /* not counted: the report's totals would show it */
		blocks = n;
		cap = ncap;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return;
	b->vaddr = va;
	b->insns = qemu_plugin_tb_n_insns(tb);
	blocks[nblocks++] = b;
	qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, b);
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
	(void)id;
	(void)udata;
	dump("exit");
	fclose(out);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info, int argc,
			       char **argv)
{
	const char *path = NULL;

	(void)info;
	for (int i = 0; i < argc; i++) {
		char *v = strchr(argv[i], '=');

		if (!v)
			return -1;
		v++;
		if (!strncmp(argv[i], "out=", 4))
			path = v;
		else if (!strncmp(argv[i], "lo=", 3))
			lo = strtoull(v, NULL, 16);
		else if (!strncmp(argv[i], "hi=", 3))
			hi = strtoull(v, NULL, 16);
		else if (!strncmp(argv[i], "mark=", 5))
			mark = strtoull(v, NULL, 16);
		else
			return -1;
	}
	if (!path || !mark || lo >= hi)
		return -1;
	out = fopen(path, "w");
	if (!out)
		return -1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
