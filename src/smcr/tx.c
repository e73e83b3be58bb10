// SPDX-License-Identifier: MIT
/*
 * Send path (protocol.md §6.4): copy straight into the peer's RMB at our
 * producer cursor (two writes when the free area wraps), then one CDC with the
 * new producer cursor.  Free space is the peer's ring minus what it has not
 * consumed yet, so we never write over unread data.  A blocking send completes
 * fully (a short blocking send broke netperf on the kernel's SMC).
 */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/stats.h"
#include "smcr/sys.h"

uint32_t smcr_tx_space(const struct smcr_sock *s)
{
	uint32_t used = 0;

	if (!smcr_curs_diff(s->tx_cons, s->tx_prod, s->peer_size, &used))
		return 0;
	return s->peer_size - used;
}

/* Gather n bytes from the iovec (starting `done` bytes into it) into the peer ring. */
static int tx_copy_in(struct smcr_sock *s, const struct iovec *iov, int iovcnt, size_t done,
		      uint32_t n)
{
	uint32_t pos = s->tx_prod.count;
	int i = 0;

	while (i < iovcnt && done >= iov[i].iov_len)
		done -= iov[i++].iov_len;
	while (n > 0 && i < iovcnt) {
		uint32_t first, second, seg = n;
		size_t room = iov[i].iov_len - done;
		const uint8_t *src = (const uint8_t *)iov[i].iov_base + done;
		int rc;

		if (seg > room)
			seg = (uint32_t)room;
		/* The free area may wrap: first up to the end, then from offset 0. */
		smcr_ring_split(pos, seg, s->peer_size, &first, &second);
		rc = s->ops->write_peer(s->xc, pos, src, first);
		if (rc == 0 && second)
			rc = s->ops->write_peer(s->xc, 0, src + first, second);
		if (rc)
			return rc;
		pos = (uint32_t)(((uint64_t)pos + seg) % s->peer_size);
		n -= seg;
		done += seg;
		if (done == iov[i].iov_len) {
			i++;
			done = 0;
		}
	}
	return 0;
}

/*
 * Why nothing more can be sent, or 0 if sending is allowed.  A reset is
 * reported once, then EPIPE (and SIGPIPE), as Linux's TCP; a call that sent
 * some bytes first leaves it for the next (`report` false).
 */
static int tx_refusal(struct smcr_sock *s, bool report)
{
	if (s->state == SMCR_CONN_ABORTED)
		return report ? smcr_conn_reset_answer(s, -EPIPE) : -EPIPE;
	if (s->shut_wr)
		return -EPIPE;
	/* The peer closed entirely: TCP would answer with a reset. */
	if (s->peer_conn_flags & SMCR_CDC_CONN_CLOSED)
		return -EPIPE;
	return 0;
}

/* What a send waits by: its timeout, and when a silent peer gets room (rx.c). */
struct tx_wait {
	int64_t deadline;  /* -2: not computed yet (at the first wait) */
	int64_t rescue_at; /* -1: none */
};

/*
 * No room in the peer's RMB: ask for an update once per episode, then wait
 * for room (or make room for a silent peer).  true: look again; false: the
 * call ends, *ret says with what.
 */
static bool tx_wait_room(struct smcr_sock *s, int flags, size_t sent, struct tx_wait *w,
			 ssize_t *ret)
{
	int64_t wait_until;
	int rc;

	smcr_conn_check_peer(s);
	if (s->state == SMCR_CONN_ABORTED)
		return true;
	if (!s->tx_blocked_sent) {
		s->tx_blocked_sent = true;
		smcr_conn_send_cdc(s, SMCR_CDC_PROD_WRITE_BLOCKED);
	}
	if (flags & MSG_DONTWAIT) {
		*ret = sent ? (ssize_t)sent : -EAGAIN;
		return false;
	}
	if (w->deadline == -2)
		w->deadline = s->snd_timeout_ms ? smcr_sys_deadline(s->snd_timeout_ms) : -1;
	wait_until = w->deadline;
	if (smcr_rx_rescue_due(s, &w->rescue_at)) {
		if (smcr_now_ms() >= w->rescue_at) {
			/* The peer stayed silent after a link move: room for it (rx.c). */
			smcr_rx_rescue(s);
			w->rescue_at = -1;
			return true;
		}
		if (w->deadline < 0 || w->rescue_at < w->deadline)
			wait_until = w->rescue_at;
	}
	rc = smcr_conn_wait(s, POLLOUT, wait_until);
	if (rc == -EAGAIN && wait_until != w->deadline)
		return true; /* the rescue's time, looked at above */
	if (rc < 0) {
		*ret = sent ? (ssize_t)sent : rc;
		return false;
	}
	return true;
}

/* n bytes of iov from offset sent into the peer's RMB, and the peer told. */
static int tx_put(struct smcr_sock *s, const struct iovec *iov, int iovcnt, size_t sent,
		  uint32_t n, size_t want)
{
	int rc = tx_copy_in(s, iov, iovcnt, sent, n);

	if (rc)
		return rc;
	s->tx_prod = smcr_curs_advance(s->tx_prod, n, s->peer_size);
	sent += n;
	s->bytes_sent += n;
	smcr_hold_self(s)->bytes_sent += n;
	if (want - sent > 0)
		s->tx_blocked_sent = true;
	smcr_conn_send_cdc(s, want - sent > 0 ? SMCR_CDC_PROD_WRITE_BLOCKED : 0);
	return 0;
}

ssize_t smcr_sock_sendv(struct smcr_sock *s, const struct iovec *iov, int iovcnt, int flags)
{
	ssize_t total = smcr_iov_total(iov, iovcnt);
	size_t want = (size_t)total, sent = 0;
	struct tx_wait w = { .deadline = -2, .rescue_at = -1 };
	ssize_t ret = 0;

	if (total < 0)
		return total;
	smcr_conn_lock(s);
	for (;;) {
		uint32_t space, n;
		int rc;

		smcr_conn_progress_io(s);
		if ((s->tcp_tail || s->went_tcp) && !s->shut_wr) {
			ret = smcr_tail_send(s, iov, iovcnt, sent, flags);
			break;
		}
		rc = tx_refusal(s, sent == 0);
		if (rc) {
			ret = sent ? (ssize_t)sent : rc;
			break;
		}
		if (sent == want) {
			ret = (ssize_t)sent;
			break;
		}
		space = smcr_tx_space(s);
		if (space == 0) {
			if (!tx_wait_room(s, flags, sent, &w, &ret))
				break;
			continue;
		}
		n = want - sent < space ? (uint32_t)(want - sent) : space;
		rc = tx_put(s, iov, iovcnt, sent, n, want);
		if (rc) {
			ret = sent ? (ssize_t)sent : rc;
			break;
		}
		sent += n;
	}
	smcr_conn_progress_io(s);
	smcr_stats_conn_update(s);
	smcr_conn_unlock(s);
	return ret;
}

ssize_t smcr_sock_send(struct smcr_sock *s, const void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };

	return smcr_sock_sendv(s, &iov, 1, flags);
}
