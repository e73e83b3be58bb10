// SPDX-License-Identifier: MIT
/*
 * A process that confines its own system calls (seccomp) keeps its SMC
 * connections only if every call the engine still makes for them passes
 * the filter (design §8).  The kernel offers no way to ask a filter what it
 * allows, and a filter's answer to a call it does not allow may be to kill
 * the process (OpenSSH's privilege-separated child does): so the engine
 * runs the classic BPF program itself, before the kernel applies it, over
 * each call it may make (confine.h), with this architecture's AUDIT_ARCH and
 * the arguments the engine uses.  Where an argument is not known in advance
 * (fds, addresses), the call is asked with several values and counts as
 * allowed only if every one passes.
 *
 * Filters stack (each one the process installs applies on top of the
 * earlier ones), so the denials add up.  After the first filter the engine
 * makes no new connection (the embedder passes new sockets through), its
 * data path takes the allowed route of those it has (shm_data.c ring_peer,
 * drain_rings), and work that needs a denied call is skipped (stats
 * addresses, the stats file's removal at exit, log lines).
 */
#include "smcr/confine.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "common/log.h"
#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/stats.h"

_Atomic uint32_t smcr_confine_denied;
atomic_bool smcr_confine_on;

#if defined(__x86_64__) && defined(__ILP32__)
#define CONFINE_ARCH 0u /* x32: syscall numbers carry a flag; not evaluated */
#elif defined(__x86_64__)
#define CONFINE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define CONFINE_ARCH AUDIT_ARCH_AARCH64
#elif defined(__i386__)
#define CONFINE_ARCH AUDIT_ARCH_I386
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define CONFINE_ARCH AUDIT_ARCH_PPC64LE
#elif defined(__s390x__)
#define CONFINE_ARCH AUDIT_ARCH_S390X
#elif defined(__riscv) && __riscv_xlen == 64
#define CONFINE_ARCH AUDIT_ARCH_RISCV64
#else
#define CONFINE_ARCH 0u /* unknown: every call counts as denied */
#endif

/* libc's poll() is the poll system call where there is one, else ppoll. */
#ifdef SYS_poll
#define CONFINE_NR_POLL SYS_poll
#else
#define CONFINE_NR_POLL SYS_ppoll
#endif

/* fds and addresses are not known in advance: each is asked with these. */
#define ANY_FD_A 3
#define ANY_FD_B (SMCR_ENGINE_FD_FLOOR + 7)
#define ANY_ADDR 0x7f0000001000ull

struct probe {
	enum smcr_call call;
	long nr;
	uint64_t args[6];
};

#define FD_PROBES(call, nr, ...)                                   \
	{ call, nr, { ANY_FD_A, __VA_ARGS__ } }, { call, nr, { ANY_FD_B, __VA_ARGS__ } }

static const struct probe probes[] = {
	FD_PROBES(SMCR_CALL_READ, SYS_read, ANY_ADDR, 1),
	FD_PROBES(SMCR_CALL_READ, SYS_read, ANY_ADDR, 8),
	FD_PROBES(SMCR_CALL_WRITE, SYS_write, ANY_ADDR, 1),
	FD_PROBES(SMCR_CALL_WRITE, SYS_write, ANY_ADDR, 8),
	{ SMCR_CALL_POLL, CONFINE_NR_POLL, { ANY_ADDR, 1, 0 } },
	FD_PROBES(SMCR_CALL_SEND, SYS_sendto, ANY_ADDR, 1, MSG_DONTWAIT | MSG_NOSIGNAL, 0, 0),
	FD_PROBES(SMCR_CALL_RECVMMSG, SYS_recvmmsg, ANY_ADDR, 8, MSG_DONTWAIT, 0),
	FD_PROBES(SMCR_CALL_GETSOCKNAME, SYS_getsockname, ANY_ADDR, ANY_ADDR),
	FD_PROBES(SMCR_CALL_GETPEERNAME, SYS_getpeername, ANY_ADDR, ANY_ADDR),
	{ SMCR_CALL_GETPID, SYS_getpid, { 0 } },
	/* glibc's locks: private ones, and the process-shared robust ones of shared connections */
	{ SMCR_CALL_FUTEX, SYS_futex, { ANY_ADDR, FUTEX_WAIT_PRIVATE, 2, 0 } },
	{ SMCR_CALL_FUTEX, SYS_futex, { ANY_ADDR, FUTEX_WAKE_PRIVATE, 1 } },
	{ SMCR_CALL_FUTEX, SYS_futex, { ANY_ADDR, FUTEX_WAIT, 2, 0 } },
	{ SMCR_CALL_FUTEX, SYS_futex, { ANY_ADDR, FUTEX_WAKE, 1 } },
	FD_PROBES(SMCR_CALL_CLOSE, SYS_close, 0),
	{ SMCR_CALL_MUNMAP, SYS_munmap, { ANY_ADDR, 4096 } },
};

static const char *const call_names[SMCR_CALL_COUNT] = {
	[SMCR_CALL_READ] = "read",
	[SMCR_CALL_WRITE] = "write",
	[SMCR_CALL_POLL] = "poll",
	[SMCR_CALL_SEND] = "sendto",
	[SMCR_CALL_RECVMMSG] = "recvmmsg",
	[SMCR_CALL_GETSOCKNAME] = "getsockname",
	[SMCR_CALL_GETPEERNAME] = "getpeername",
	[SMCR_CALL_GETPID] = "getpid",
	[SMCR_CALL_FUTEX] = "futex",
	[SMCR_CALL_CLOSE] = "close",
	[SMCR_CALL_MUNMAP] = "munmap",
};

/* The 32-bit word of `d` at byte offset k, as the kernel's BPF_LD|BPF_ABS loads it. */
static bool load_word(const struct seccomp_data *d, uint32_t k, uint32_t *out)
{
	if (k % 4 || k > sizeof(*d) - 4)
		return false;
	memcpy(out, (const uint8_t *)d + k, 4);
	return true;
}

static bool alu(uint16_t op, uint32_t *a, uint32_t operand)
{
	switch (op) {
	case BPF_ADD: *a += operand; return true;
	case BPF_SUB: *a -= operand; return true;
	case BPF_MUL: *a *= operand; return true;
	case BPF_DIV: if (!operand) return false; *a /= operand; return true;
	case BPF_MOD: if (!operand) return false; *a %= operand; return true;
	case BPF_AND: *a &= operand; return true;
	case BPF_OR: *a |= operand; return true;
	case BPF_XOR: *a ^= operand; return true;
	case BPF_LSH: *a = operand < 32 ? *a << operand : 0; return true;
	case BPF_RSH: *a = operand < 32 ? *a >> operand : 0; return true;
	case BPF_NEG: *a = -*a; return true;
	default: return false;
	}
}

static bool jump_taken(uint16_t op, uint32_t a, uint32_t operand, bool *ok)
{
	switch (op) {
	case BPF_JEQ: return a == operand;
	case BPF_JGT: return a > operand;
	case BPF_JGE: return a >= operand;
	case BPF_JSET: return (a & operand) != 0;
	default: *ok = false; return false;
	}
}

/*
 * The program's return value for `d`, as the kernel's seccomp BPF would
 * compute it (the instructions seccomp_check_filter accepts); false if the
 * program does anything else (the caller then counts a denial).
 */
static bool run_filter(const struct sock_filter *prog, unsigned len, const struct seccomp_data *d,
		       uint32_t *ret)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };

	/* Jumps only go forward: at most `len` steps. */
	for (unsigned pc = 0; pc < len; pc++) {
		const struct sock_filter *f = &prog[pc];
		uint32_t operand = BPF_SRC(f->code) == BPF_X ? x : f->k;
		bool ok = true;

		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (!load_word(d, f->k, &a))
				return false;
			continue;
		case BPF_LD | BPF_W | BPF_LEN: a = sizeof(*d); continue;
		case BPF_LDX | BPF_W | BPF_LEN: x = sizeof(*d); continue;
		case BPF_LD | BPF_IMM: a = f->k; continue;
		case BPF_LDX | BPF_IMM: x = f->k; continue;
		case BPF_LD | BPF_MEM:
			if (f->k >= BPF_MEMWORDS)
				return false;
			a = mem[f->k];
			continue;
		case BPF_LDX | BPF_MEM:
			if (f->k >= BPF_MEMWORDS)
				return false;
			x = mem[f->k];
			continue;
		case BPF_ST:
		case BPF_STX:
			if (f->k >= BPF_MEMWORDS)
				return false;
			mem[f->k] = f->code == BPF_ST ? a : x;
			continue;
		case BPF_MISC | BPF_TAX: x = a; continue;
		case BPF_MISC | BPF_TXA: a = x; continue;
		case BPF_RET | BPF_K: *ret = f->k; return true;
		case BPF_RET | BPF_A: *ret = a; return true;
		case BPF_JMP | BPF_JA:
			if ((uint64_t)pc + 1 + f->k >= len)
				return false;
			pc += f->k;
			continue;
		default:
			break;
		}
		if (BPF_CLASS(f->code) == BPF_ALU) {
			if (!alu(BPF_OP(f->code), &a, operand))
				return false;
			continue;
		}
		if (BPF_CLASS(f->code) != BPF_JMP)
			return false;
		{
			bool taken = jump_taken(BPF_OP(f->code), a, operand, &ok);
			unsigned off = taken ? f->jt : f->jf;

			if (!ok || pc + 1 + off >= len)
				return false;
			pc += off;
		}
	}
	return false; /* ran off the end */
}

static bool probe_allowed(const struct sock_filter *prog, unsigned len, const struct probe *p)
{
	struct seccomp_data d = { .nr = (int)p->nr, .arch = CONFINE_ARCH };
	uint32_t ret;

	if (CONFINE_ARCH == 0)
		return false;
	memcpy(d.args, p->args, sizeof(d.args));
	if (!run_filter(prog, len, &d, &ret))
		return false;
	/* LOG lets the call through (and has the kernel log it). */
	return (ret & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ALLOW ||
	       (ret & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_LOG;
}

uint32_t smcr_confine_eval(const struct sock_filter *prog, unsigned len)
{
	uint32_t denied = 0;

	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		if (!prog || !probe_allowed(prog, len, &probes[i]))
			denied |= 1u << probes[i].call;
	return denied;
}

unsigned smcr_confine_probe_count(void)
{
	return sizeof(probes) / sizeof(probes[0]);
}

void smcr_confine_probe(unsigned i, enum smcr_call *call, long *nr, uint64_t args[6])
{
	*call = probes[i].call;
	*nr = probes[i].nr;
	memcpy(args, probes[i].args, sizeof(probes[i].args));
}

/* ---- the engine's side of confinement (engine.h) ------------------------------ */

static pthread_mutex_t confine_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t denied_before;
static bool on_before;
static int log_threshold_before;

/* SECCOMP_MODE_STRICT: read, write, exit and sigreturn only. */
static uint32_t strict_denied(void)
{
	uint32_t denied = 0;

	for (unsigned c = 0; c < SMCR_CALL_COUNT; c++)
		if (c != SMCR_CALL_READ && c != SMCR_CALL_WRITE)
			denied |= 1u << c;
	return denied;
}

static void log_denied(uint32_t denied)
{
	char list[256] = "";
	size_t n = 0;

	for (unsigned c = 0; c < SMCR_CALL_COUNT; c++)
		if (denied & (1u << c) && n < sizeof(list))
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", n ? " " : "",
					      call_names[c]);
	smcr_info("the process confines its system calls (seccomp): new connections stay TCP;"
		  " denied to the engine: %s", n ? list : "nothing it uses");
}

/* Confined from now on, `denied` added to what earlier filters deny.  confine_lock held. */
static void confine_locked(uint32_t denied)
{
	atomic_store(&smcr_confine_denied, atomic_load(&smcr_confine_denied) | denied);
	atomic_store(&smcr_confine_on, true);
	/* A log line is a getpid and a write (and an open, to a log file). */
	if (!smcr_call_allowed(SMCR_CALL_GETPID) || !smcr_call_allowed(SMCR_CALL_WRITE) ||
	    smcr_log_opens_file())
		smcr_log_quiet();
}

void smcr_engine_confine(enum smcr_confine_kind kind, const struct sock_filter *prog,
			 unsigned len)
{
	uint32_t denied;

	switch (kind) {
	case SMCR_CONFINE_FILTER: denied = smcr_confine_eval(prog, len); break;
	case SMCR_CONFINE_STRICT: denied = strict_denied(); break;
	default: denied = ~0u >> (32 - SMCR_CALL_COUNT); break;
	}
	pthread_mutex_lock(&confine_lock);
	denied_before = atomic_load(&smcr_confine_denied);
	on_before = atomic_load(&smcr_confine_on);
	log_threshold_before = smcr_log_threshold;
	/*
	 * While every call is still allowed: this process's stats file and its
	 * records of the connections it holds since fork are published now
	 * (open, getsockname), the filter may deny both later.
	 */
	smcr_stats_confine_prepare();
	smcr_hold_each(smcr_stats_conn_update);
	log_denied(denied);
	confine_locked(denied);
	pthread_mutex_unlock(&confine_lock);
}

void smcr_engine_confine_applied(const struct sock_filter *prog, unsigned len)
{
	uint32_t denied = smcr_confine_eval(prog, len);

	pthread_mutex_lock(&confine_lock);
	atomic_store(&smcr_confine_denied, denied_before);
	smcr_log_threshold = log_threshold_before;
	confine_locked(denied);
	/* confine_locked() silenced the log if a line would make a denied call */
	log_denied(denied);
	pthread_mutex_unlock(&confine_lock);
}

void smcr_confine_inherited(uint32_t calls)
{
	pthread_mutex_lock(&confine_lock);
	confine_locked(calls);
	pthread_mutex_unlock(&confine_lock);
}

void smcr_engine_confine_undo(void)
{
	pthread_mutex_lock(&confine_lock);
	atomic_store(&smcr_confine_denied, denied_before);
	atomic_store(&smcr_confine_on, on_before);
	smcr_log_threshold = log_threshold_before;
	pthread_mutex_unlock(&confine_lock);
}

bool smcr_engine_confined(void)
{
	smcr_confine_check_inherited();
	return smcr_confined();
}

bool smcr_engine_confined_known(void)
{
	return smcr_confined();
}

bool smcr_engine_io_allowed(enum smcr_engine_io io)
{
	switch (io) {
	case SMCR_ENGINE_IO_READ: return smcr_call_allowed(SMCR_CALL_READ);
	case SMCR_ENGINE_IO_WRITE: return smcr_call_allowed(SMCR_CALL_WRITE);
	case SMCR_ENGINE_IO_SEND: return smcr_call_allowed(SMCR_CALL_SEND);
	default: return false;
	}
}
