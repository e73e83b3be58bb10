// SPDX-License-Identifier: MIT
/*
 * What the interposer asks of and sets on an SMC connection for the
 * application's poll, ioctl, getsockopt and setsockopt (engine.h): the
 * readiness fd and mask, the pending error, queued bytes, buffer sizes,
 * timeouts, the interest of outside waiters.
 */
#include <poll.h>
#include <sys/ioctl.h>

#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/libc.h"

int smcr_sock_ready_fd(const struct smcr_sock *s)
{
	return s->ops->ready_fd(s->xc);
}

void smcr_sock_set_timeouts(struct smcr_sock *s, int rcv_ms, int snd_ms)
{
	smcr_conn_lock(s);
	s->rcv_timeout_ms = rcv_ms > 0 ? rcv_ms : 0;
	s->snd_timeout_ms = snd_ms > 0 ? snd_ms : 0;
	smcr_conn_unlock(s);
}

void smcr_sock_set_rcvlowat(struct smcr_sock *s, int lowat)
{
	smcr_conn_lock(s);
	s->rcv_lowat = lowat > 0 ? (uint32_t)lowat : 1;
	/* Readiness follows at once, as Linux wakes readers when it lowers the mark. */
	smcr_conn_progress_io(s);
	smcr_conn_unlock(s);
}

void smcr_sock_set_peek_off(struct smcr_sock *s, int off)
{
	smcr_conn_lock(s);
	s->peek_off = off;
	smcr_conn_unlock(s);
}

int smcr_sock_peek_off(struct smcr_sock *s)
{
	int off;

	smcr_conn_lock(s);
	off = s->peek_off;
	smcr_conn_unlock(s);
	return off;
}

void smcr_sock_set_interest(struct smcr_sock *s, unsigned events)
{
	smcr_conn_lock(s);
	smcr_hold_self(s)->interest = events & (POLLIN | POLLOUT);
	smcr_hold_sum_interest(s);
	/*
	 * Raised if the new interest stands, but not cleared if it does not:
	 * an event loop moves between reading and writing with a call or two,
	 * and the doorbell left readable may stand for the next interest.  A
	 * wait clears it first (smcr_sock_settle(), smcr_sock_poll()).
	 */
	smcr_conn_progress_io(s);
	smcr_conn_unlock(s);
}

void smcr_sock_settle(struct smcr_sock *s)
{
	smcr_conn_lock(s);
	smcr_conn_progress(s);
	smcr_conn_unlock(s);
}

bool smcr_sock_peer_running(const struct smcr_sock *s)
{
	return s->ops->peer_running(s->xc);
}

void smcr_sock_set_sleeping(struct smcr_sock *s, bool sleeping)
{
	s->ops->set_sleeping(s->xc, sleeping);
}

/* Is everything the connection's waiters wait for (POLLIN, POLLOUT) in `mask`? */
static bool waited_for_stands(const struct smcr_sock *s, unsigned mask)
{
	unsigned want = s->interest & (POLLIN | POLLOUT);

	if (s->waiters_rd)
		want |= POLLIN;
	if (s->waiters_wr)
		want |= POLLOUT;
	return want != 0 && (mask & want) == want;
}

unsigned smcr_sock_poll(struct smcr_sock *s)
{
	unsigned mask;

	smcr_conn_lock(s);
	smcr_conn_progress(s);
	mask = smcr_conn_mask(s);
	if (s->went_tcp || s->tcp_tail) {
		mask |= smcr_tail_mask(s);
		smcr_conn_unlock(s);
		return mask;
	}
	/*
	 * Whether the peer still lives costs a system call; ask only when the
	 * answer could change what a waiter does: not while POLLIN stands
	 * anyway (the read that follows asks itself, and a dead peer's hang-up
	 * keeps the ready fd readable, so a waiter comes back here), nor while
	 * every event waited for stands (a writer that waits for POLLOUT alone
	 * writes, and a send that finds no room asks; once it waits for POLLIN
	 * too, we ask here).
	 */
	if (!(mask & POLLIN) && !waited_for_stands(s, mask)) {
		smcr_conn_check_peer(s);
		mask = smcr_conn_mask(s);
	}
	smcr_conn_unlock(s);
	return mask;
}

int smcr_sock_take_error(struct smcr_sock *s)
{
	int err;

	smcr_conn_lock(s);
	smcr_conn_progress(s);
	err = s->so_error;
	s->so_error = 0;
	smcr_conn_unlock(s);
	return err;
}

size_t smcr_sock_readable_bytes(struct smcr_sock *s)
{
	size_t n;

	smcr_conn_lock(s);
	smcr_conn_progress(s);
	n = s->went_tcp ? 0 : smcr_rx_unread(s);
	if (s->went_tcp || s->tcp_tail) {
		int q = 0;

		if (smcr_libc.ioctl(s->tcp_fd, FIONREAD, &q) == 0 && q > 0)
			n += (size_t)q;
	}
	smcr_conn_unlock(s);
	return n;
}

int smcr_sock_inq(struct smcr_sock *s)
{
	size_t n = smcr_sock_readable_bytes(s);
	bool done;

	if (n > INT32_MAX)
		return INT32_MAX;
	if (n)
		return (int)n;
	smcr_conn_lock(s);
	done = s->state == SMCR_CONN_ABORTED || (!s->went_tcp && smcr_conn_peer_done(s));
	smcr_conn_unlock(s);
	/* Linux's tcp_inq_hint(): 1 after the end, so the reader reads on and sees it. */
	return done ? 1 : 0;
}

size_t smcr_sock_unacked_bytes(struct smcr_sock *s)
{
	uint32_t n32 = 0;
	size_t n;

	smcr_conn_lock(s);
	smcr_conn_progress(s);
	if (s->went_tcp || s->tcp_tail) {
		int q = 0;

		n = 0;
		if (s->tcp_tail && !s->went_tcp)
			(void)smcr_curs_diff(s->tail_resend, s->tx_prod, s->peer_size, &n32);
		n = n32;
		if (smcr_libc.ioctl(s->tcp_fd, TIOCOUTQ, &q) == 0 && q > 0)
			n += (size_t)q;
	} else {
		n = s->peer_size - smcr_tx_space(s);
	}
	smcr_conn_unlock(s);
	return n;
}

bool smcr_sock_same_host(const struct smcr_sock *s)
{
	return s->ops->same_host;
}

const char *smcr_sock_mode_name(const struct smcr_sock *s)
{
	return smcr_sock_same_host(s) ? "smc-shm" : "smc-r";
}

uint32_t smcr_sock_rcvbuf(const struct smcr_sock *s)
{
	return s->rmb_size;
}

uint32_t smcr_sock_sndbuf(const struct smcr_sock *s)
{
	return s->peer_size;
}
