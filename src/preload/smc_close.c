/* SPDX-License-Identifier: MIT */
/*
 * How an entry's SMC state ends: the release when the application closes
 * the socket's last fd (the fd table's hook), and the SMC connection that
 * goes on over TCP because its socket leaves for a holder without its rings
 * (exec, SCM_RIGHTS, a mass close that takes the library's own fds).
 * Apart because each gives back what every other part set up (the
 * handshake, the listener reference, the screen, the engine's duplicate,
 * the stats record) and must do it once, in an order the peer can see.
 */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

/*
 * The last reference to an entry is gone (fdtab.h): the application closed
 * its last fd of the socket. Orderly SMC close (an abortive one under
 * SO_LINGER 0), then the engine's duplicate goes, which lets the kernel send
 * the FIN (or the RST). A forked child's copy of its
 * parent's connection is only forgotten: the parent still runs it.
 */
void smcr_smc_release_entry(struct smcr_fd_entry *e)
{
	struct smcr_sock *s = atomic_load_explicit(&e->sock, memory_order_acquire);
	bool owner;
	int saved;

	/* Most sockets never got any of it: their close costs no more than without us. */
	if (!s && !e->epoll_regs && !e->listener && !e->unserved && !e->tcp_record && !e->screen &&
	    e->engine_fd < 0 &&
	    !atomic_load_explicit(&e->handshake, memory_order_acquire)) {
		e->epoll_events = 0;
		return;
	}
	owner = smcr_smc_entry_owns(e, s);
	saved = errno;
	smcr_guard_enter();
	smcr_smc_epoll_forget(e, owner ? s : NULL);
	smcr_smc_handshake_release(e);
	if (e->listener) {
		smcr_smc_listener_put(e->listener);
		e->listener = NULL;
	}
	if (e->unserved) {
		smcr_listener_unregister(e->unserved);
		e->unserved = NULL;
	}
	smcr_smc_screen_release(e);
	if (s && owner && (smcr_fd_entry_flags(e) & SMCR_FD_F_LINGER_ZERO)) {
		/* SO_LINGER 0: an abortive close, a reset at the peer as over TCP */
		smcr_dbg("fd %d: SMC connection reset (SO_LINGER 0)", smcr_fdtab_label_of(e->engine_fd));
		smcr_sock_abort(s, false);
	} else if (s && owner) {
		/* The last holder's close ends it; an earlier one's only lets go. */
		smcr_dbg("fd %d: SMC connection closed", smcr_fdtab_label_of(e->engine_fd));
		smcr_sock_close(s);
	} else if (s) {
		/* Inherited and not held here: drop our copies, send nothing. */
		smcr_sock_forget_inherited(s);
	}
	if (e->tcp_record && owner)
		smcr_stats_tcp_close(e->tcp_record);
	e->tcp_record = NULL;
	atomic_store_explicit(&e->sock, NULL, memory_order_relaxed);
	if (e->engine_fd >= 0)
		smcr_smc_engine_close(e->engine_fd);
	e->engine_fd = -1;
	smcr_guard_leave();
	errno = saved;
}

/*
 * The socket of an SMC connection leaves for a program image or a process
 * that has neither its rings nor its doorbells (exec of a program that
 * inherits it, SCM_RIGHTS): the connection goes on over TCP from here, both
 * ends and every holder (engine tcp_tail.c), so whoever reads or writes the
 * socket next finds the stream exactly where it was.  Where it cannot (the
 * kernel's SMC as the peer, an smcr peer of an older version) it ends now as a reset both ends
 * see, never as a TCP socket that silently carries nothing.
 */
void smcr_smc_continue_on_tcp(int fd, struct smcr_fd_entry *e, uint32_t reason, const char *why)
{
	struct smcr_sock *s = smcr_smc_sock_of(e);
	char name[SMCR_CONN_NAME_MAX] = "";
	int saved = errno, rc;

	if (!s || e->engine_fd < 0)
		return;
	smcr_guard_enter();
	rc = smcr_sock_continue_on_tcp(s, reason);
	if (rc == 0) {
		smcr_dbg("fd %d: goes on over TCP: %s", fd, why);
	} else {
		/* named while it still has a peer */
		if (smcr_log_enabled(SMCR_LOG_WARN))
			smcr_conn_name(fd, name, sizeof(name));
		/* fd, not the engine's copy: a forked child may have closed that */
		if (smcr_smc_tcp_reset(fd))
			smcr_warn("fd %d: SMC connection reset: %s, and it cannot go on over TCP"
				  " (%s); %s", fd, why,
				  rc == -ENOTSUP ? "the transport or the peer cannot"
				  : rc == -EBADF ? "this process closed the library's own fds"
						 : strerror(-rc),
				  name);
	}
	smcr_guard_leave();
	errno = saved;
}

/*
 * A mass close (a forked child's before exec, a daemon's) takes the
 * library's own fds of an SMC connection along, while the process keeps the
 * connection through an fd outside the range (dup2'd onto 0 and 1): without
 * them the connection cannot run over SMC here, nor could its exec wake the
 * peer later.  So it goes on over TCP now, while the doorbell still rings.
 * The engine's fds sit together at SMCR_ENGINE_FD_FLOOR and above; the TCP
 * socket's copy among them stands for all.
 */
void smcr_smc_before_close_range(unsigned first, unsigned last)
{
	if (!smcr_smc_enabled || last < SMCR_ENGINE_FD_FLOOR)
		return;
	for (unsigned fd = 0, high = smcr_fdtab_high(); fd < high; fd++) {
		struct smcr_fd_entry *e;

		if (fd >= first && fd <= last)
			continue;
		e = smcr_fdtab_get((int)fd);
		if (!e)
			continue;
		if (e->engine_fd >= 0 && (unsigned)e->engine_fd >= first &&
		    (unsigned)e->engine_fd <= last && smcr_smc_entry_is_conn(e))
			smcr_smc_continue_on_tcp((int)fd, e, SMCR_CLC_DECL_HANDOFF,
						 "the process closes the library's fds");
		smcr_fdtab_put(e);
	}
}
