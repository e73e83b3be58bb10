// SPDX-License-Identifier: MIT
/*
 * Close and abort (protocol.md §7): the sticky connection-state flags
 * peer_done_writing, conn_closed and abort in CDC byte 25, the states Linux
 * walks through, and what happens to the TCP socket: FIN after our CDC on an
 * orderly close, RST on an abort.
 *
 * There is no background progress in this engine, so close() does not linger
 * in PEERCLOSEWAIT: it sends its CDC and releases everything at once.  Our
 * ring is pooled for reuse only if the peer had already closed (it will never
 * write into it again); otherwise it is discarded.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/fork_tail.h"
#include "smcr/stats.h"
#include "smcr/sys.h"

#define CLOSE_EXIT_PEER_FIN_MS 500 /* the longest an exit waits for peers' FINs, all together */
#define CLOSE_TAIL_FLUSH_MS 2000   /* the longest a close waits to send again what the peer
				    * never read, once the peer went on over TCP */

bool smcr_conn_peer_done(const struct smcr_sock *s)
{
	return (s->peer_conn_flags &
		(SMCR_CDC_CONN_DONE_WRITING | SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_ABORT)) != 0;
}

int smcr_conn_reset_answer(struct smcr_sock *s, int otherwise)
{
	int err = s->so_error;

	if (!err)
		return otherwise;
	s->so_error = 0;
	return -err;
}

/* SO_LINGER {on, 0}: the caller's close() of the TCP fd sends an RST. */
static void tcp_reset_on_close(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	smcr_libc.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

void smcr_close_abort_locked(struct smcr_sock *s, int err)
{
	if (s->state == SMCR_CONN_ABORTED)
		return;
	if (!(s->peer_conn_flags & SMCR_CDC_CONN_ABORT) &&
	    !(s->conn_flags_sent & SMCR_CDC_CONN_ABORT)) {
		s->conn_flags_sent |= SMCR_CDC_CONN_ABORT;
		smcr_conn_send_cdc(s, 0);
	}
	s->state = SMCR_CONN_ABORTED;
	s->so_error = err;
	tcp_reset_on_close(s->tcp_fd);
}

void smcr_close_peer_flags(struct smcr_sock *s)
{
	uint8_t f = s->peer_conn_flags;

	if (f & SMCR_CDC_CONN_ABORT) {
		/* PROCESSABORT: the next call reports ECONNRESET, later ones the end (rx.c, tx.c). */
		if (s->state != SMCR_CONN_ABORTED) {
			s->state = SMCR_CONN_ABORTED;
			s->so_error = ECONNRESET;
		}
		return;
	}
	switch (s->state) {
	case SMCR_CONN_ACTIVE:
		s->state = SMCR_CONN_APPCLOSEWAIT1;
		break;
	case SMCR_CONN_PEERCLOSEWAIT1:
		s->state = SMCR_CONN_PEERCLOSEWAIT2;
		break;
	default:
		break;
	}
	if ((f & SMCR_CDC_CONN_CLOSED) && (s->conn_flags_sent & SMCR_CDC_CONN_CLOSED))
		s->state = SMCR_CONN_CLOSED;
}

static int shutdown_write_locked(struct smcr_sock *s)
{
	if (s->shut_wr)
		return 0;
	s->shut_wr = true;
	if (s->state == SMCR_CONN_ABORTED)
		return 0;
	if (s->went_tcp || s->tcp_tail) {
		/* On TCP now: what we owe the peer goes first, then TCP's FIN. */
		if (!s->went_tcp)
			(void)smcr_tail_flush_wait(s, smcr_sys_deadline(CLOSE_TAIL_FLUSH_MS));
		smcr_libc.shutdown(s->tcp_fd, SHUT_WR);
		return 0;
	}
	s->conn_flags_sent |= SMCR_CDC_CONN_DONE_WRITING;
	smcr_conn_send_cdc(s, 0);
	s->state = smcr_conn_peer_done(s) ? SMCR_CONN_APPCLOSEWAIT2 : SMCR_CONN_PEERCLOSEWAIT1;
	/*
	 * Linux half-closes the TCP connection too (protocol.md §7.2).  A
	 * peer that takes the rest of a stream on TCP is smcr, which learns it
	 * from the CDC: its TCP FIN waits for the close, since the stream may
	 * yet have to go on over TCP (tcp_tail.c), with what the peer never
	 * read sent there first.
	 */
	if (!smcr_tail_possible(s))
		smcr_libc.shutdown(s->tcp_fd, SHUT_WR);
	return 0;
}

/*
 * Both directions ended, or reset: Linux's TCP socket has left ESTABLISHED
 * for TIME_WAIT or CLOSE then, where shutdown() fails with ENOTCONN.  On TCP
 * already, the TCP socket answers for itself.
 */
static bool shutdown_too_late(const struct smcr_sock *s)
{
	if (s->went_tcp || s->tcp_tail)
		return false;
	return s->state == SMCR_CONN_ABORTED || (s->shut_wr && smcr_conn_peer_done(s));
}

int smcr_sock_shutdown(struct smcr_sock *s, int how)
{
	int rc = 0;

	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	smcr_conn_lock(s);
	smcr_conn_progress(s);
	if (shutdown_too_late(s)) {
		smcr_conn_unlock(s);
		return -ENOTCONN;
	}
	if (how == SHUT_RD || how == SHUT_RDWR)
		s->shut_rd = true;
	if (how == SHUT_WR || how == SHUT_RDWR)
		rc = shutdown_write_locked(s);
	smcr_conn_progress(s); /* wake our own waiters: they must see the shutdown */
	smcr_conn_unlock(s);
	return rc;
}

/*
 * At exit, a connection whose peer has closed already: before our FIN, and
 * before the engine's exit work sends LLC DELETE LINK, wait for the peer's
 * TCP FIN (bounded: one deadline for the whole exit).  A Linux peer that
 * closed after our shutdown(SHUT_WR) (PEERFINCLOSEWAIT) frees its
 * connection when our closing CDC arrives and only then releases its TCP
 * socket, with a FIN; a DELETE LINK its LLC work handles first finds the
 * connection still in the link group, kills it and aborts that TCP socket
 * (tcp_abort: a RST instead of the FIN, rxe-kernel (h), about one close in
 * six).  A peer that had closed with its TCP socket shut down already (the
 * kernel after an active close, smcr always) has sent its FIN: no wait.
 */
static void exit_wait_peer_fin(struct smcr_sock *s)
{
	static int64_t deadline; /* atexit runs once, in one thread */
	struct pollfd p = { .fd = s->tcp_fd, .events = POLLRDHUP };
	int64_t now = smcr_now_ms();

	if (!deadline)
		deadline = now + CLOSE_EXIT_PEER_FIN_MS;
	while (now < deadline) {
		int n = smcr_libc.poll(&p, 1, (int)(deadline - now));

		if (n > 0 || (n < 0 && errno != EINTR))
			break;
		now = smcr_now_ms();
	}
}

/*
 * Closing while the peer goes on over TCP (tcp_tail.c): unread ring data
 * means a reset, as TCP's close with unread data; else what we owe the peer
 * goes first (bounded).  The app's close of its fd ends the TCP socket.  The
 * closed CDC tells the peer's ring that we are done with it.
 */
static void close_tail_locked(struct smcr_sock *s)
{
	if (smcr_rx_unread(s) > 0) {
		tcp_reset_on_close(s->tcp_fd);
		return;
	}
	(void)smcr_tail_flush_wait(s, smcr_sys_deadline(CLOSE_TAIL_FLUSH_MS));
	s->conn_flags_sent |= SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_DONE_WRITING;
	smcr_conn_send_cdc(s, 0);
}

/* What closing says to the peer: closed (or abort with unread data), then FIN. */
static void close_tell_peer_locked(struct smcr_sock *s, bool at_exit)
{
	smcr_conn_progress(s);
	smcr_fork_close_locked(s);
	if (s->state == SMCR_CONN_ABORTED || s->went_tcp)
		return; /* (went on over TCP: the socket lives on elsewhere) */
	if (s->tcp_tail) {
		close_tail_locked(s);
		return;
	}
	if (smcr_rx_unread(s) > 0) {
		/* Unread data, SHUT_RD or not: Linux aborts (protocol.md §7.1), TCP resets. */
		smcr_close_abort_locked(s, ECONNRESET);
		return;
	}
	if (!(s->conn_flags_sent & SMCR_CDC_CONN_CLOSED)) {
		s->conn_flags_sent |= SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_DONE_WRITING;
		smcr_conn_send_cdc(s, 0);
	}
	if (at_exit && (s->peer_conn_flags & SMCR_CDC_CONN_CLOSED))
		exit_wait_peer_fin(s);
	/* CDC first, then FIN (protocol.md §7.4). */
	smcr_libc.shutdown(s->tcp_fd, SHUT_RDWR);
}

/*
 * Another live process holds the connection too (it followed fork): this one
 * only lets go, as a TCP socket's close() in one of the processes sharing it
 * does: its record closes with what it moved, its slot goes, nothing is said
 * to the peer.  Lock held.
 */
static bool close_let_go_locked(struct smcr_sock *s)
{
	if (!smcr_hold_others_live(s))
		return false;
	smcr_stats_conn_close(s, 0);
	smcr_hold_drop(s);
	return true;
}

bool smcr_sock_exit(struct smcr_sock *s)
{
	if (!smcr_conn_trylock(s))
		return false;
	if (!close_let_go_locked(s))
		close_tell_peer_locked(s, true);
	smcr_conn_unlock(s);
	return true;
}

void smcr_sock_close(struct smcr_sock *s)
{
	bool clean;

	smcr_conn_lock(s);
	if (close_let_go_locked(s)) {
		smcr_conn_unlock(s);
		smcr_hold_forget_copies(s);
		return;
	}
	close_tell_peer_locked(s, false);
	clean = s->state != SMCR_CONN_ABORTED && (s->peer_conn_flags & SMCR_CDC_CONN_CLOSED);
	smcr_conn_unlock(s);
	smcr_conn_free(s, clean);
}

bool smcr_sock_release_hold(struct smcr_sock *s)
{
	bool let_go;

	smcr_conn_lock(s);
	let_go = close_let_go_locked(s);
	smcr_conn_unlock(s);
	return let_go;
}

bool smcr_sock_held(struct smcr_sock *s)
{
	return smcr_hold_is_holder(s);
}

void smcr_sock_forget_inherited(struct smcr_sock *s)
{
	/*
	 * A private copy (SMC-R, or a child that got no holder slot): the lock
	 * may have been held by a parent thread at fork time, so it is not
	 * taken; the shared state, if any, is the holders' and stays.
	 */
	if (s->shared) {
		smcr_hold_forget_copies(s);
		return;
	}
	smcr_fork_forget_copy(s);
	s->ops->forget(s->xc);
	free(s);
}

void smcr_sock_copy_gone(struct smcr_sock *s)
{
	if (!s->shared) /* a same-host copy's holder slot is hold.c's */
		smcr_fork_forget_copy(s);
}

void smcr_sock_abort(struct smcr_sock *s, bool reset_now)
{
	smcr_conn_lock(s);
	smcr_close_abort_locked(s, ECONNRESET);
	if (reset_now) {
		struct sockaddr unspec = { .sa_family = AF_UNSPEC };

		/* With SO_LINGER 0 set, a TCP disconnect sends the RST now. */
		smcr_libc.connect(s->tcp_fd, &unspec, sizeof(unspec));
	}
	smcr_conn_unlock(s);
	smcr_conn_free(s, false);
}
