// SPDX-License-Identifier: MIT
/*
 * The rest of a same-host stream on TCP (design §8).
 *
 * An SMC connection's TCP socket can reach a program image or a process
 * that has no part of the connection's rings: exec of a program that gets
 * the socket as its stdin (a CGI script, an inetd-style child), or the
 * socket passed over SCM_RIGHTS. The bytes that program writes go into the
 * TCP socket, and it reads from it; a peer still on the rings would never
 * see the one and never feed the other. So the side that lets go ("we",
 * smcr_sock_continue_on_tcp) goes on over TCP from an exact point in both
 * directions, and the peer follows:
 *
 *  - our data: everything we wrote is in the peer's ring, announced by our
 *    last CDC; the peer delivers it first, then reads TCP;
 *  - the peer's data: what we never consumed (its producer cursor past our
 *    consumer cursor in that last CDC) is still in our ring, which the peer
 *    maps: it sends those bytes again over TCP, before anything newer.
 *
 * Nothing is lost or delivered twice, whatever either side was doing, and
 * neither side waits for the other. Only peers that say they understand it
 * are asked: same-host (shm) ones by a feature word in their page, SMC-R
 * (verbs) ones in the CLC handshake, which a Linux peer never does; for any
 * other the connection is reset instead, visibly.
 *
 * On the peer's side the connection then runs "on the tail": reads take the
 * ring first, then TCP; sends flush the resend first, then go to TCP; the
 * readiness fd follows the TCP socket too. Once the ring is read and the
 * resend flushed, the connection is plain TCP (smcr_sock_tcp_only), and the
 * interposer turns it into an ordinary TCP socket.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/stats.h"
#include "smcr/sys.h"

#define TAIL_CHUNK 16384u

bool smcr_tail_possible(const struct smcr_sock *s)
{
	return s->ops->continue_on_tcp &&
	       (!s->ops->peer_takes_tail || s->ops->peer_takes_tail(s->xc));
}

/* ---- the side that lets go ----------------------------------------------------------- */

int smcr_tail_continue_locked(struct smcr_sock *s, uint32_t reason, const char *why)
{
	int rc;

	smcr_conn_progress(s);
	if (s->went_tcp)
		return 0;
	if (s->state == SMCR_CONN_ABORTED || s->tcp_tail)
		return -ENOTSUP;
	/* Our final cursors first: what we consumed, how far we wrote. */
	s->rx_cons_sent = s->rx_cons;
	rc = smcr_conn_send_cdc(s, 0);
	if (rc == 0)
		rc = s->ops->continue_on_tcp(s->xc, s->tcp_fd);
	if (rc == 0) {
		s->went_tcp = true;
		s->tail_reason = reason;
		smcr_stats_conn_update(s);
		/* Shut down for writing over SMC: TCP's FIN was left for now (close.c). */
		if (s->shut_wr)
			smcr_libc.shutdown(s->tcp_fd, SHUT_WR);
		/* Waiters of every holder: their next look finds TCP. */
		s->ops->settle(s->xc, true);
		smcr_info("fd %d: this end goes on over TCP (%s); %llu bytes sent, %llu received"
			  " over SMC",
			  smcr_fd_label(s->tcp_fd), why, (unsigned long long)s->bytes_sent,
			  (unsigned long long)s->bytes_received);
	}
	return rc;
}

int smcr_sock_continue_on_tcp_why(struct smcr_sock *s, uint32_t reason, const char *why)
{
	int rc;

	if (!smcr_tail_possible(s))
		return -ENOTSUP;
	smcr_conn_lock(s);
	rc = smcr_tail_continue_locked(s, reason, why);
	smcr_conn_unlock(s);
	return rc;
}

int smcr_sock_continue_on_tcp(struct smcr_sock *s, uint32_t reason)
{
	return smcr_sock_continue_on_tcp_why(s, reason, "the socket leaves for a program outside"
					     " the connection");
}

/* ---- the peer's side ------------------------------------------------------------------- */

static uint32_t tail_resend_len(const struct smcr_sock *s)
{
	uint32_t n = 0;

	if (!s->tcp_tail || !smcr_curs_diff(s->tail_resend, s->tx_prod, s->peer_size, &n))
		return 0;
	return n;
}

/* Follow TCP output in the readiness fd only while something waits for it. */
static void tail_watch(struct smcr_sock *s)
{
	bool out = tail_resend_len(s) > 0 || s->waiters_wr || (s->interest & POLLOUT);

	if (out != s->tail_watch_out && s->ops->watch_tcp(s->xc, s->tcp_fd, out) == 0)
		s->tail_watch_out = out;
}

void smcr_tail_begin(struct smcr_sock *s)
{
	uint32_t unread = 0;

	s->tcp_tail = true;
	s->tail_reason = SMCR_CLC_DECL_PEERTCP;
	/* The peer's last CDC said how much of ours it consumed: the rest goes again. */
	s->tail_resend = s->tx_cons;
	(void)smcr_curs_diff(s->tx_cons, s->tx_prod, s->peer_size, &unread);
	s->tail_watch_out = true; /* forces the first registration */
	s->ops->watch_tcp(s->xc, s->tcp_fd, true);
	tail_watch(s);
	smcr_info("fd %d: the peer goes on over TCP (its socket left for a program outside the"
		  " connection): %u bytes left to read here, %u of ours it never read go again"
		  " over TCP",
		  smcr_fd_label(s->tcp_fd), smcr_rx_readable(s), unread);
	smcr_stats_conn_update(s);
}

/*
 * Send the resend over TCP, without blocking: 0 all of it went, -EAGAIN the
 * socket is full, -errno.  Then TCP's FIN if we had shut down for writing
 * (close.c left it for now).  Lock held.
 */
static int tail_flush(struct smcr_sock *s)
{
	uint8_t buf[TAIL_CHUNK];

	if (s->went_tcp)
		return 0;
	for (;;) {
		uint32_t left = tail_resend_len(s), n, first, second;
		ssize_t sent;

		if (left == 0) {
			if (s->shut_wr && !s->tail_fin_sent) {
				smcr_libc.shutdown(s->tcp_fd, SHUT_WR);
				s->tail_fin_sent = true;
			}
			return 0;
		}
		n = left < TAIL_CHUNK ? left : TAIL_CHUNK;
		smcr_ring_split(s->tail_resend.count, n, s->peer_size, &first, &second);
		if (s->ops->read_peer(s->xc, s->tail_resend.count, buf, first) ||
		    (second && s->ops->read_peer(s->xc, 0, buf + first, second)))
			return -EIO;
		sent = smcr_libc.send(s->tcp_fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent < 0)
			return errno == EINTR ? -EAGAIN : -errno;
		s->tail_resend = smcr_curs_advance(s->tail_resend, (uint32_t)sent, s->peer_size);
		s->bytes_resent += (uint64_t)sent;
	}
}

/* Wait (lock dropped) for the TCP socket: 1 ready, 0 timed out (-EAGAIN), -errno. */
static int tail_wait(struct smcr_sock *s, short events, int64_t deadline)
{
	int rc;

	if (events == POLLOUT)
		s->waiters_wr++;
	tail_watch(s);
	smcr_conn_unlock(s);
	rc = smcr_sys_wait_fd_app(s->tcp_fd, events, deadline);
	smcr_conn_lock(s);
	if (events == POLLOUT)
		s->waiters_wr -= s->waiters_wr > 0;
	return rc == 0 ? -EAGAIN : rc;
}

int smcr_tail_flush_wait(struct smcr_sock *s, int64_t deadline)
{
	for (;;) {
		int rc = tail_flush(s);

		if (rc != -EAGAIN)
			return rc;
		rc = tail_wait(s, POLLOUT, deadline);
		if (rc < 0)
			return rc;
	}
}

/* The iovec without its first `skip` bytes, into `out` (at most `max` entries). */
static int iov_skip(const struct iovec *iov, int iovcnt, size_t skip, struct iovec *out, int max)
{
	int n = 0;

	for (int i = 0; i < iovcnt && n < max; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		out[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
		out[n].iov_len = iov[i].iov_len - skip;
		skip = 0;
		n++;
	}
	return n;
}

#define TAIL_IOV_MAX 64

ssize_t smcr_tail_recv(struct smcr_sock *s, const struct iovec *iov, int iovcnt, size_t got,
		       int flags)
{
	struct iovec rest[TAIL_IOV_MAX];
	int64_t deadline = -2;
	size_t want = 0;

	for (int i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	if (want > 0 && got >= want)
		return (ssize_t)got; /* the ring filled it */
	for (;;) {
		struct msghdr m = { .msg_iov = rest };
		ssize_t n;
		int rc;

		m.msg_iovlen = (size_t)iov_skip(iov, iovcnt, got, rest, TAIL_IOV_MAX);
		n = smcr_libc.recvmsg(s->tcp_fd, &m,
				      (flags & (MSG_PEEK | MSG_WAITALL | MSG_TRUNC)) | MSG_DONTWAIT);
		if (n > 0) {
			if (!(flags & MSG_PEEK)) {
				s->bytes_received += (uint64_t)n;
				smcr_hold_self(s)->bytes_received += (uint64_t)n;
			}
			got += (size_t)n;
			/*
			 * Filled: done.  Asking again with nothing left to fill
			 * would not return 0 but EAGAIN (TCP answers an empty
			 * read with the queue's state), and the wait below would
			 * wait for bytes nobody asked for.
			 */
			if (got >= want || !(flags & MSG_WAITALL) || (flags & MSG_PEEK))
				return (ssize_t)got;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return got ? (ssize_t)got : (n == 0 ? 0 : -errno);
		if (got && !(flags & MSG_WAITALL))
			return (ssize_t)got;
		if (flags & MSG_DONTWAIT)
			return got ? (ssize_t)got : -EAGAIN;
		if (deadline == -2)
			deadline = s->rcv_timeout_ms ? smcr_sys_deadline(s->rcv_timeout_ms) : -1;
		/*
		 * What the peer never read must keep moving while we wait: the
		 * peer may be waiting for it before it answers (TCP's kernel
		 * would send it on its own).
		 */
		(void)tail_flush(s);
		rc = tail_wait(s, tail_resend_len(s) > 0 ? POLLIN | POLLOUT : POLLIN, deadline);
		if (rc < 0)
			return got ? (ssize_t)got : rc;
	}
}

ssize_t smcr_tail_send(struct smcr_sock *s, const struct iovec *iov, int iovcnt, size_t sent,
		       int flags)
{
	struct iovec rest[TAIL_IOV_MAX];
	int64_t deadline = -2;
	size_t want = 0;

	for (int i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	for (;;) {
		struct msghdr m = { .msg_iov = rest };
		ssize_t n;
		int rc = s->went_tcp ? 0 : tail_flush(s);

		if (rc == 0) {
			m.msg_iovlen = (size_t)iov_skip(iov, iovcnt, sent, rest, TAIL_IOV_MAX);
			if (m.msg_iovlen == 0)
				break;
			n = smcr_libc.sendmsg(s->tcp_fd, &m,
					      (flags & MSG_MORE) | MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n >= 0) {
				sent += (size_t)n;
				s->bytes_sent += (uint64_t)n;
				smcr_hold_self(s)->bytes_sent += (uint64_t)n;
				if (sent == want)
					break;
				continue;
			}
			rc = errno == EINTR ? -EAGAIN : -errno;
		}
		if (rc != -EAGAIN)
			return sent ? (ssize_t)sent : rc;
		if (flags & MSG_DONTWAIT)
			return sent ? (ssize_t)sent : -EAGAIN;
		if (deadline == -2)
			deadline = s->snd_timeout_ms ? smcr_sys_deadline(s->snd_timeout_ms) : -1;
		rc = tail_wait(s, POLLOUT, deadline);
		if (rc < 0)
			return sent ? (ssize_t)sent : rc;
	}
	tail_watch(s);
	return (ssize_t)sent;
}

/* What the TCP socket adds to the poll mask.  A system call: only in the tail. */
unsigned smcr_tail_mask(struct smcr_sock *s)
{
	struct pollfd p = { .fd = s->tcp_fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	unsigned mask;

	if (smcr_libc.poll(&p, 1, 0) <= 0)
		return 0;
	mask = (unsigned)p.revents;
	if (tail_flush(s) != 0)
		mask &= ~(unsigned)POLLOUT;
	tail_watch(s);
	return mask;
}

bool smcr_sock_tcp_only(struct smcr_sock *s)
{
	bool only;

	if (!s->went_tcp && !s->tcp_tail)
		return false;
	smcr_conn_lock(s);
	(void)tail_flush(s);
	only = s->went_tcp || (smcr_rx_unread(s) == 0 && tail_resend_len(s) == 0 &&
			       (!s->shut_wr || s->tail_fin_sent));
	smcr_conn_unlock(s);
	return only;
}
