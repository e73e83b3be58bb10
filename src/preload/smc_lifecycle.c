/* SPDX-License-Identifier: MIT */
/*
 * The process's life cycle as the SMC glue sees it: fork (the handlers
 * init.c installs: a child knows its pid and takes over the locks), exec
 * (no SMC connection crosses it) and exit (each closes as the kernel closes
 * TCP).  Apart because these run once per process, walk the whole fd table,
 * and decide for every connection at once what the per-socket paths decide
 * one at a time.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

/* ---- fork ------------------------------------------------------------------ */

void smcr_smc_lock(void)
{
	smcr_smc_listeners_lock();
	smcr_smc_epoll_lock();
}

void smcr_smc_unlock(void)
{
	smcr_smc_epoll_unlock();
	smcr_smc_listeners_unlock();
}

void smcr_smc_reinit_child(void)
{
	smcr_smc_pid = getpid();
	smcr_smc_listeners_unlock();
	smcr_smc_epoll_reinit_child();
}

/* ---- fork ---------------------------------------------------------------- */

/*
 * A forked child uses its copy of the parent's SMC-R connection (it cannot
 * run it: the verbs objects are the parent's).  The engine asks the parent
 * to go on over TCP; the child's socket is then the plain TCP socket both
 * share, as without smcr, and the copy is forgotten at its close.  Lazily,
 * at the first use, so a child that never touches the connection leaves it
 * on SMC-R.
 */
bool smcr_smc_fork_follow(struct smcr_fd_entry *e, struct smcr_sock *s)
{
	int saved = errno, rc;

	smcr_guard_enter();
	rc = smcr_sock_fork_follow(s);
	smcr_guard_leave();
	errno = saved;
	if (rc != 0 || !smcr_smc_decision_lock(e))
		return false;
	if (smcr_fd_entry_mode(e) == SMCR_FD_SMC && atomic_load(&e->sock) == s) {
		e->fallback_reason = SMCR_CLC_DECL_HANDOFF;
		atomic_store_explicit(&e->mode, SMCR_FD_FALLBACK, memory_order_release);
	}
	smcr_smc_decision_unlock(e);
	return true;
}

/* ---- exec and exit ------------------------------------------------------- */

/*
 * exec (wrap_exec.c): an SMC connection's rings cannot cross it.  One whose
 * socket the new image inherits (an fd that is not close-on-exec) goes on
 * over TCP (smcr_smc_continue_on_tcp): a CGI program writes its answer into
 * the socket it got as stdout, and the peer reads it there.  One the new
 * image does not inherit ends as the kernel's close at exec would end a TCP
 * socket: orderly (closed, then FIN; a reset with unread data), or, when
 * another process holds it too (it followed fork), this process only lets
 * go.  The engine state is left alone (another thread may still be inside
 * it; exec wipes it).  A vfork'ed child's exec is handoff.c's: the
 * connections are its parent's, found again by inode.
 */
void smcr_smc_before_exec(void)
{
	int saved = errno;

	if (!smcr_smc_enabled || getpid() != smcr_smc_pid)
		return;
	smcr_guard_enter();
	/* First every connection an fd of the new image's leads to... */
	for (unsigned fd = 0, high = smcr_fdtab_high(); fd < high; fd++) {
		struct smcr_fd_entry *e = smcr_fdtab_peek((int)fd);
		int fl;

		if (!e || smcr_fd_entry_mode(e) != SMCR_FD_SMC || e->engine_fd < 0)
			continue;
		fl = smcr_real.fcntl((int)fd, F_GETFD);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		if (smcr_smc_entry_owns(e, atomic_load(&e->sock)))
			smcr_smc_continue_on_tcp((int)fd, e, SMCR_CLC_DECL_HANDOFF,
						 "exec of a program that inherits it");
		else /* a forked child's copy: the new image's first read must find the stream */
			(void)smcr_smc_inherited(e);
	}
	/* ... then the ones it does not inherit. */
	for (unsigned fd = 0, high = smcr_fdtab_high(); fd < high; fd++) {
		struct smcr_fd_entry *e = smcr_fdtab_peek((int)fd);
		struct smcr_sock *s;

		if (!e || smcr_fd_entry_mode(e) != SMCR_FD_SMC || e->engine_fd < 0)
			continue;
		s = atomic_load(&e->sock);
		if (!s || smcr_sock_tcp_only(s))
			continue;
		if (!smcr_smc_entry_owns(e, s)) {
			/*
			 * A forked copy the new image does not get (one it gets
			 * was followed above): its owner need not keep it.
			 */
			smcr_sock_copy_gone(s);
			continue;
		}
		/* Others hold it too (it followed fork): only this process lets go. */
		if (smcr_sock_release_hold(s)) {
			smcr_dbg("fd %u: SMC connection left to its other holders before exec", fd);
			continue;
		}
		if (smcr_sock_exit(s))
			smcr_dbg("fd %u: SMC connection closed before exec", fd);
		else if (smcr_smc_tcp_reset(e->engine_fd))
			smcr_dbg("fd %u: SMC connection reset before exec (busy in another thread)",
				 fd);
	}
	smcr_guard_leave();
	errno = saved;
}

/*
 * exit() with SMC connections still open: for a TCP socket the kernel closes
 * it at exit, orderly (FIN; RST with unread data), so the peer reads EOF.
 * Without this the peer would see this process vanish (its rendezvous socket
 * hang up, or the link group's DELETE LINK) and read a reset instead.  So
 * each connection this process owns says what close() would say, before the
 * engine's exit work (SMC-R: flush, DELETE LINK; init.c calls both, in that
 * order, inside the guard).  _exit() and fatal signals run no handler: the
 * peer then sees a reset, as when the process is killed.  A forked child's
 * exit touches only what it owns, and tells the owner of an SMC-R connection
 * it has a copy of that the copy is gone.
 */
void smcr_smc_exit(void)
{
	if (!smcr_smc_enabled || getpid() != smcr_smc_pid)
		return;
	for (unsigned fd = 0, high = smcr_fdtab_high(); fd < high; fd++) {
		struct smcr_fd_entry *e;
		struct smcr_sock *s;

		if (!smcr_fdtab_is_smc((int)fd))
			continue;
		e = smcr_fdtab_get((int)fd);
		if (!e)
			continue;
		s = atomic_load(&e->sock);
		if (smcr_fd_entry_mode(e) != SMCR_FD_SMC || !s)
			;
		else if (!smcr_smc_entry_owns(e, s))
			smcr_sock_copy_gone(s); /* a forked copy: its owner need not keep it */
		else if (smcr_sock_exit(s))
			smcr_dbg("fd %u: SMC connection closed at exit", fd);
		smcr_fdtab_put(e);
	}
}
