/* SPDX-License-Identifier: MIT */
/*
 * Shared by the wrappers: lazy initialisation and the one-branch test
 * "does this fd go to the engine?".
 */
#ifndef SMCR_PRELOAD_PRELOAD_H
#define SMCR_PRELOAD_PRELOAD_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/compiler.h"
#include "common/guard.h"
#include "common/real.h"
#include "preload/fdtab.h"
#include "preload/smc.h"

/* Set (release) once init.c has bound libc, read the config, mapped the table. */
extern atomic_bool smcr_preload_ready;
/* Written before ready: false in secure-execution processes or with SMCR_DISABLE. */
extern bool smcr_preload_active;

/* Slow path of smcr_preload_enter(): initialises the library (once). */
void smcr_preload_init(void);

/*
 * First statement of every wrapper. Wrappers can run before our
 * constructor (other libraries' constructors call socket or read), so the
 * library initialises on first use.
 */
static inline void smcr_preload_enter(void)
{
	if (unlikely(!atomic_load_explicit(&smcr_preload_ready, memory_order_acquire)))
		smcr_preload_init();
}

/* Should a new socket be tracked? Not when inactive or called from inside. */
static inline bool smcr_preload_tracking(void)
{
	return smcr_preload_active && !smcr_guard_inside();
}

/*
 * The hot-path test: one slot load, almost always NULL or not SMC. A
 * CANDIDATE also takes the branch while same-host SMC is on: its first I/O
 * decides its mode (smc.c). Calls from inside the library (depth > 0)
 * always reach the kernel socket.
 */
static inline bool smcr_preload_divert(int fd)
{
	struct smcr_fd_entry *entry = smcr_fdtab_peek(fd);
	unsigned char mode;

	if (likely(entry == NULL))
		return false;
	mode = atomic_load_explicit(&entry->mode, memory_order_relaxed);
	return (mode == SMCR_FD_SMC || (mode == SMCR_FD_CANDIDATE && smcr_smc_enabled)) &&
	       !smcr_guard_inside();
}

/*
 * The receive calls' test: as smcr_preload_divert, and a SCREEN socket's
 * reads too, until the start of its stream is known not to be a Proposal
 * (its writes, and every other call, reach the kernel as the program made them).
 */
static inline bool smcr_preload_divert_rx(int fd)
{
	struct smcr_fd_entry *entry = smcr_fdtab_peek(fd);
	unsigned char mode;

	if (likely(entry == NULL))
		return false;
	mode = atomic_load_explicit(&entry->mode, memory_order_relaxed);
	return (mode == SMCR_FD_SMC || mode == SMCR_FD_SCREEN ||
		(mode == SMCR_FD_CANDIDATE && smcr_smc_enabled)) &&
	       !smcr_guard_inside();
}

/*
 * vfork: the child runs in the parent's memory, on the vforking thread's
 * TLS, until it calls exec or _exit. What it closes or dup2s (python's
 * subprocess does, between vfork and exec) concerns only its own fd
 * table, so it must not touch ours, which is the parent's. The vfork
 * wrapper (vfork.S) stores the parent's pid in smcr_vfork_parent on the
 * calling thread; while it is set, a process with another pid is the
 * child and leaves the table alone, and the parent clears it on its next
 * bookkeeping call.
 */
extern __thread pid_t smcr_vfork_parent __attribute__((tls_model("initial-exec")));
bool smcr_preload_in_vfork_child(void);

/*
 * vfork.S calls smcr_vfork_prepare, then jumps to the function it returns
 * (libc's vfork) with the program's return address kept in smcr_vfork_ret;
 * the parent, once the child has exec'd or exited, calls
 * smcr_vfork_parent_resume(child's pid) before it returns to the program.
 */
typedef pid_t smcr_vfork_fn(void);
smcr_vfork_fn *smcr_vfork_prepare(void);
extern __thread void *smcr_vfork_ret __attribute__((tls_model("initial-exec")));
void smcr_vfork_parent_resume(pid_t child);

/*
 * fork (init.c's handlers): a filter call in another thread holds its lock
 * (wrap_seccomp.c) while it works; the child must not inherit it held.
 */
void smcr_seccomp_fork_prepare(void);
void smcr_seccomp_fork_parent(void);
void smcr_seccomp_fork_child(void);

/* May this call change the fd table? Yes, except inside a vfork child. */
static inline bool smcr_preload_table_writable(void)
{
	return likely(smcr_vfork_parent == 0) || !smcr_preload_in_vfork_child();
}

/* The fd table mutators, as wrappers must call them. */
static inline struct smcr_fd_entry *smcr_preload_track(int fd, int domain, unsigned flags)
{
	if (!smcr_preload_table_writable())
		return NULL;
	return smcr_fdtab_track(fd, domain, SMCR_FD_CANDIDATE, flags);
}

static inline void smcr_preload_forget(int fd)
{
	if (smcr_preload_table_writable())
		smcr_fdtab_forget(fd);
}

static inline void smcr_preload_forget_range(unsigned first, unsigned last)
{
	if (smcr_preload_table_writable())
		smcr_fdtab_forget_range(first, last);
}

static inline void smcr_preload_dup(int oldfd, int newfd)
{
	if (smcr_preload_table_writable())
		smcr_fdtab_dup(oldfd, newfd);
}

/* For optional libc functions (glibc extensions). */
#define SMCR_REAL_OR_ENOSYS(name)        \
	do {                             \
		if (!smcr_real.name) {   \
			errno = ENOSYS;  \
			return -1;       \
		}                        \
	} while (0)

#endif /* SMCR_PRELOAD_PRELOAD_H */
