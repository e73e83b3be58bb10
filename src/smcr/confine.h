/* SPDX-License-Identifier: MIT */
/*
 * The system calls a seccomp-confined process still lets the engine make
 * (engine.h smcr_engine_confine, design §8).
 *
 * Each call the engine may make after confinement is named here, with the
 * arguments it makes it with; confine.c runs the process's filter programs
 * over them, in user space, before the kernel applies them.  Code on those
 * paths asks smcr_call_allowed() and takes another route, or skips its
 * work, when the answer is no.
 */
#ifndef SMCR_CONFINE_H
#define SMCR_CONFINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct sock_filter;

enum smcr_call {
	SMCR_CALL_READ,		/* read(fd, buf, 1 or 8): a doorbell, the own eventfd */
	SMCR_CALL_WRITE,	/* write(fd, buf, 1 or 8) */
	SMCR_CALL_POLL,		/* poll(fds, 1, 0) */
	SMCR_CALL_SEND,		/* sendto(fd, buf, 1, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0) */
	SMCR_CALL_RECVMMSG,	/* recvmmsg(fd, vec, 8, MSG_DONTWAIT, NULL) */
	SMCR_CALL_GETSOCKNAME,	/* getsockname(fd, addr, len) */
	SMCR_CALL_GETPEERNAME,	/* getpeername(fd, addr, len) */
	SMCR_CALL_GETPID,	/* getpid(): every log line names the process */
	SMCR_CALL_FUTEX,	/* futex(addr, WAIT/WAKE, private or shared): locks */
	SMCR_CALL_CLOSE,	/* close(fd) */
	SMCR_CALL_MUNMAP,	/* munmap(addr, len) */
	SMCR_CALL_COUNT
};

/* Bit (1 << call) set: denied.  0 while the process is not confined. */
extern _Atomic uint32_t smcr_confine_denied;
/* The process confines its system calls (whatever its filter allows). */
extern atomic_bool smcr_confine_on;

static inline bool smcr_confined(void)
{
	return atomic_load_explicit(&smcr_confine_on, memory_order_relaxed);
}

static inline bool smcr_call_allowed(enum smcr_call c)
{
	return !(atomic_load_explicit(&smcr_confine_denied, memory_order_relaxed) & (1u << c));
}

/*
 * The calls one classic BPF seccomp program denies (bit per enum smcr_call),
 * for this build's architecture.  Anything the program does that the
 * evaluator cannot follow counts as a denial.
 */
uint32_t smcr_confine_eval(const struct sock_filter *prog, unsigned len);

/* Tests: the calls smcr_confine_eval() asks the program about, one by one. */
unsigned smcr_confine_probe_count(void);
void smcr_confine_probe(unsigned i, enum smcr_call *call, long *nr, uint64_t args[6]);

/*
 * A filter inherited across exec (confine_probe.c): once per process image,
 * before the engine's first call that plain TCP would not make.  Where the
 * process runs under a filter, a child asks it about each such call; any
 * denial confines the engine (smcr_confine_inherited).  Cheap after the first.
 */
void smcr_confine_check_inherited(void);

/*
 * Confine the engine for a filter that is in force already: no new
 * connection, and `calls` (bit per enum smcr_call) denied on the data path.
 */
void smcr_confine_inherited(uint32_t calls);

#endif /* SMCR_CONFINE_H */
