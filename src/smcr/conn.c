// SPDX-License-Identifier: MIT
/*
 * Connection life after the handshake (connect.c, accept.c): creation and
 * release of struct smcr_sock, progress (taking control messages, SMC-R
 * failover), readiness and blocking waits, and the CDC that carries our
 * cursors.
 */
#include "smcr/conn.h"
#include "smcr/libc.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>

#include "common/log.h"
#include "smcr/fork_tail.h"
#include "smcr/handshake_int.h"
#include "smcr/policy.h"
#include "smcr/share.h"
#include "smcr/stats.h"
#include "smcr/sys.h"

/* ---- connection objects ---------------------------------------------------------- */

struct smcr_sock *smcr_conn_new(int tcp_fd, bool server, const struct smcr_transport_ops *ops,
				struct smcr_xconn *xc, uint32_t peer_size, int spin_us)
{
	/* Shared only with transport state that is shared too (shm); else private. */
	bool shared = ops->shared && ops->shared(xc);
	struct smcr_sock *s = shared ? smcr_share_alloc(sizeof(*s)) : NULL;

	if (s)
		s->shared = true;
	else
		s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	smcr_hold_init(s);
	s->tcp_fd = tcp_fd;
	s->server = server;
	s->ops = ops;
	s->xc = xc;
	s->peer_size = peer_size;
	ops->ring(xc, &s->rmb, &s->rmb_size);
	ops->tokens(xc, &s->local_token, &s->peer_token);
	s->state = SMCR_CONN_ACTIVE;
	s->peek_off = -1;
	s->spin_us = spin_us;
	s->stats = smcr_stats_conn_open(s);
	s->opened_ms = smcr_now_ms();
	smcr_fork_track(s);
	return s;
}

void smcr_conn_free(struct smcr_sock *s, bool clean)
{
	smcr_fork_untrack(s);
	smcr_policy_conn_ended(s);
	smcr_stats_conn_close(s, s->state == SMCR_CONN_ABORTED);
	s->ops->destroy(s->xc, clean);
	smcr_rxhold_free(&s->held);
	smcr_hold_forget(s);
	pthread_mutex_destroy(&s->lock);
	if (s->shared)
		smcr_share_free(s);
	else
		free(s);
}

/* ---- progress and readiness ------------------------------------------------------------ */

/*
 * Writable, as TCP (sk_stream_is_writeable), once the free room is at least
 * half what is queued, a third of the peer's ring, not at the first byte its
 * reader frees: a program that writes whenever it is told it may (Java's NIO
 * copies everything it has left on every write) then writes in large pieces
 * instead of one per consumer-cursor update.  A blocking send still writes
 * into whatever room there is.
 */
static bool tx_writable(const struct smcr_sock *s)
{
	uint32_t third = s->peer_size / 3;

	return smcr_tx_space(s) >= (third ? third : 1);
}

unsigned smcr_conn_mask(const struct smcr_sock *s)
{
	unsigned mask = 0;
	bool reset = s->state == SMCR_CONN_ABORTED;
	bool peer_done = smcr_conn_peer_done(s);

	/* On TCP: only what is left in the ring; the readiness fd follows the socket. */
	if (s->went_tcp || s->tcp_tail)
		return !s->went_tcp && smcr_rx_unread(s) > 0 ? POLLIN : 0;
	if (smcr_rx_lowat_met(s) || peer_done || reset || s->shut_rd)
		mask |= POLLIN;
	if (reset || s->shut_wr || (s->peer_conn_flags & SMCR_CDC_CONN_CLOSED) ||
	    tx_writable(s))
		mask |= POLLOUT;
	if (peer_done || s->shut_rd)
		mask |= POLLRDHUP;
	if (reset || (peer_done && s->shut_wr))
		mask |= POLLHUP;
	if (s->so_error) /* until a call reports it, as Linux's sk_err */
		mask |= POLLERR;
	return mask;
}

/*
 * A server that cannot attach after our Confirm (it could not map our ring)
 * declines on the TCP stream, as Linux's does after a CONFIRM it cannot
 * serve, and lets go of the rings: it never read or wrote them.  What we
 * wrote into its ring since is still there, so the stream goes on over TCP
 * from its start, everything we wrote sent again there (tcp_tail.c), rather
 * than end in a reset.  Only for a client that has heard nothing over SMC
 * yet, on a complete Decline at the head of the TCP stream.  Lock held.
 */
static bool server_declined_late(struct smcr_sock *s)
{
	struct smcr_clc_msg msg;
	char name[SMCR_CONN_NAME_MAX];
	int need;

	if (s->server || s->cdc_received || !s->ops->peer_on_tcp || !smcr_tail_possible(s))
		return false;
	if (smcr_clc_sock_peek(s->tcp_fd, &msg, &need) != 1 || msg.hdr.type != SMCR_CLC_DECLINE ||
	    smcr_clc_sock_recv(s->tcp_fd, &msg, smcr_now_ms()) != 0)
		return false;
	smcr_warn("fd %d: the server declined after our Confirm (%s): the stream goes on over TCP"
		  " from its start; %s",
		  smcr_fd_label(s->tcp_fd), smcr_fallback_reason_str(smcr_clc_decline_reason(&msg)),
		  smcr_conn_name(s->tcp_fd, name, sizeof(name)));
	smcr_tail_begin(s);
	return true;
}

static void take_ctrl_msgs(struct smcr_sock *s)
{
	uint8_t msg[SMCR_CDC_MSG_LEN];

	/* Bounded: a hostile peer must not keep us here. */
	for (unsigned tries = 0; tries < 64 && s->state != SMCR_CONN_ABORTED; tries++) {
		int rc = s->ops->recv_ctrl(s->xc, msg);

		if (rc == 0)
			break;
		if (rc < 0) {
			/*
			 * The peer vanished; after its "closed" that is just the end,
			 * and after it went on over TCP the ring is all that is left.
			 */
			if (s->tcp_tail || (s->ops->peer_on_tcp && s->ops->peer_on_tcp(s->xc)) ||
			    server_declined_late(s))
				break;
			if (!(s->peer_conn_flags & (SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_ABORT)))
				smcr_close_abort_locked(s, ECONNRESET);
			break;
		}
		s->cdc_received++;
		smcr_rx_ctrl(s, msg);
	}
}

/*
 * SMC-R failover (the kernel's smc_switch_cursor): the transport moved the
 * connection to another link of its group.  Messages that came first are
 * taken already (the peer's consumer cursor only helps).  The peer surely
 * has what our last delivered CDC announced and what it consumed; what we
 * wrote after that is still in place in our copy of its ring (we never
 * write over what it has not consumed), so it is written again over the
 * new link, after a validation CDC naming that last delivered CDC, and one
 * CDC then carries our current cursors and flags.  Bytes the peer got
 * already are rewritten with the same values where it does not read any
 * more or has not read yet: nothing is lost, nothing delivered twice.
 */
static void conn_failover(struct smcr_sock *s)
{
	struct smcr_curs fin = { 0, 0 }, start;
	uint16_t fin_seq = 0;
	uint8_t wire[SMCR_CDC_MSG_LEN];
	uint32_t len = 0;
	int rc;

	if (!s->ops->failover || s->state == SMCR_CONN_ABORTED)
		return;
	rc = s->ops->failover(s->xc, &fin, &fin_seq);
	if (rc == 0)
		return;
	if (rc < 0) {
		smcr_close_abort_locked(s, ECONNRESET);
		return;
	}
	start = smcr_cdc_failover_start(fin, s->tx_cons, s->tx_prod, s->peer_size, &len);
	smcr_cdc_encode_validation(fin_seq, s->peer_token, wire);
	rc = s->ops->send_ctrl(s->xc, wire);
	if (rc == 0 && len)
		rc = s->ops->rewrite(s->xc, start.count, len);
	if (rc == 0)
		rc = smcr_conn_send_cdc(s, 0);
	s->link_switches++;
	s->bytes_resent += len;
	smcr_info("fd %d: moved to another link: %u bytes written again (last delivered CDC %u)",
		  smcr_fd_label(s->tcp_fd), len, fin_seq);
	smcr_stats_conn_relink(s, len);
	if (rc)
		smcr_close_abort_locked(s, ECONNRESET);
}

/*
 * A blocking peek that waits for bytes beyond those it sees (SO_PEEK_OFF,
 * MSG_WAITALL) finds the connection readable all along: it waits for the
 * peer's next write, not for readiness.
 */
static bool peek_waits_on(const struct smcr_sock *s)
{
	return s->peek_need && smcr_rx_unread(s) < s->peek_need && !smcr_conn_peer_done(s) &&
	       s->state != SMCR_CONN_ABORTED && !s->shut_rd;
}

static void conn_progress(struct smcr_sock *s, bool clear)
{
	for (int round = 0; round < 4; round++) {
		unsigned want = s->interest | POLLERR | POLLHUP;
		bool ready;

		if (s->went_tcp) {
			/* The rings are done with: nothing the peer says matters now. */
			s->ops->settle(s->xc, false);
			break;
		}
		take_ctrl_msgs(s);
		if (!s->tcp_tail && s->ops->peer_on_tcp && s->ops->peer_on_tcp(s->xc)) {
			take_ctrl_msgs(s); /* its last CDC came before the word */
			smcr_tail_begin(s);
		}
		conn_failover(s);
		/* Level semantics for outside waiters and engine threads. */
		if (s->waiters_rd && !peek_waits_on(s))
			want |= POLLIN;
		if (s->waiters_wr)
			want |= POLLOUT;
		ready = (smcr_conn_mask(s) & want) != 0;
		if (!ready && !clear && s->ops->settle_lazy) {
			if (!s->ops->settle_lazy(s->xc))
				break;
		} else if (!s->ops->settle(s->xc, ready)) {
			break;
		}
	}
}

void smcr_conn_progress(struct smcr_sock *s)
{
	conn_progress(s, true);
}

void smcr_conn_progress_io(struct smcr_sock *s)
{
	conn_progress(s, false);
}

void smcr_conn_check_peer(struct smcr_sock *s)
{
	if (s->state != SMCR_CONN_ABORTED && s->ops->peer_gone(s->xc))
		smcr_conn_progress(s); /* takes the last messages, then sees the reset */
}

/*
 * Bounded spin: while the peer runs on another CPU its next CDC is
 * microseconds away, far less than a sleep/wake-up pair on this kind of VM
 * (benchmarks.md §2); common/spin.h's governor stops spinning where it does
 * not pay.  Lock dropped by the caller.  True if something came.
 */
static bool spin_for_ctrl(struct smcr_sock *s)
{
	int64_t end = smcr_now_ns() + (int64_t)s->spin_us * 1000;
	unsigned i = 0;

	while (s->ops->peer_running(s->xc)) {
		if (s->ops->ctrl_pending(s->xc))
			return true;
		smcr_cpu_relax();
		if ((++i & 63) == 0 && smcr_now_ns() > end)
			break;
	}
	return false;
}

int smcr_conn_wait(struct smcr_sock *s, unsigned events, int64_t deadline)
{
	int fd = s->ops->ready_fd(s->xc), rc;
	/*
	 * A peer that is asleep will not answer within a spin.  Not spinning
	 * then tells the governor nothing: it learns only from spins it paid for.
	 */
	bool spin = s->spin_us > 0 && s->ops->peer_running(s->xc) &&
		    smcr_spin_gov_allow(&s->spin_gov),
	     won = false;
	struct smcr_holder *me = smcr_hold_self(s);

	if (events & POLLIN) {
		s->waiters_rd++;
		me->waiters_rd++;
	} else {
		s->waiters_wr++;
		me->waiters_wr++;
	}
	/* The fd must not stay readable for what was consumed: we sleep on it. */
	smcr_conn_progress(s);
	smcr_conn_unlock(s);
	if (spin)
		won = spin_for_ctrl(s);
	if (won) {
		rc = 1;
	} else {
		smcr_stats_slept();
		s->ops->set_sleeping(s->xc, true);
		rc = smcr_sys_wait_fd_app(fd, POLLIN, deadline);
		s->ops->set_sleeping(s->xc, false);
	}
	smcr_conn_lock(s);
	if (spin) {
		smcr_spin_gov_result(&s->spin_gov, won);
		smcr_stats_spin(won);
	}
	/* Our slot again: it may have moved while the lock was dropped (never for a live holder). */
	me = smcr_hold_self(s);
	if (events & POLLIN) {
		s->waiters_rd -= s->waiters_rd > 0;
		me->waiters_rd -= me->waiters_rd > 0;
	} else {
		s->waiters_wr -= s->waiters_wr > 0;
		me->waiters_wr -= me->waiters_wr > 0;
	}
	smcr_conn_check_peer(s);
	if (rc == 0)
		return -EAGAIN;
	return rc < 0 ? rc : 0;
}

int smcr_conn_send_cdc(struct smcr_sock *s, uint8_t prod_flags)
{
	struct smcr_cdc_msg m = {
		.seqno = ++s->tx_seqno,
		.token = s->peer_token,
		.prod = s->tx_prod,
		.cons = s->rx_cons,
		.prod_flags = prod_flags,
		.conn_flags = s->conn_flags_sent,
	};
	uint8_t wire[SMCR_CDC_MSG_LEN];
	int rc;

	/* While a sender waits for room, every CDC says so (the flag is not sticky). */
	if (s->waiters_wr)
		m.prod_flags |= SMCR_CDC_PROD_WRITE_BLOCKED;
	smcr_cdc_encode(&m, wire);
	rc = s->ops->send_ctrl(s->xc, wire);
	if (rc == -EAGAIN && s->ops->failover) {
		/* moved to another link first: the failover's own CDC says all this one would */
		conn_failover(s);
		return s->state == SMCR_CONN_ABORTED ? -ECONNRESET : 0;
	}
	if (rc == 0) {
		s->rx_cons_sent = s->rx_cons; /* every CDC carries our consumer cursor */
		s->peer_cons_upd_req = false;
		s->cdc_sent++;
	}
	return rc;
}

/* Linux never maps below mmap_min_addr, at least one page. */
#define SMCR_FIRST_PAGE_END 4096u

ssize_t smcr_iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;

	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	if (iovcnt > 0 && !iov)
		return -EFAULT;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - t)
			return -EINVAL;
		/*
		 * A buffer in the never-mapped first page (NULL and near it, the
		 * usual bad pointer): EFAULT, as the kernel's copy would say,
		 * rather than a crash in ours.  Other bad pointers are not sought.
		 */
		if (iov[i].iov_len && (uintptr_t)iov[i].iov_base < SMCR_FIRST_PAGE_END)
			return -EFAULT;
		t += iov[i].iov_len;
	}
	return (ssize_t)t;
}
