// SPDX-License-Identifier: MIT
/*
 * Receive path: take CDC messages from the peer (the only place a peer's
 * cursor enters the connection, after validation), copy data out of our RMB,
 * and return consumer-cursor updates by the kernel's thresholds
 * (protocol.md §6.5).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "smcr/conn.h"
#include "smcr/libc.h"
#include "smcr/engine.h"
#include "smcr/stats.h"
#include "smcr/sys.h"

/* Linux's SOCK_MIN_SNDBUF / 2 on Debian 6.12 x86-64 (protocol.md §6.5). */
#define SMCR_CONS_UPDATE_MIN 2304u

uint32_t smcr_rx_readable(const struct smcr_sock *s)
{
	uint32_t n = 0;

	/* Both cursors are validated; a failure here would be our own bug. */
	if (!smcr_curs_diff(s->rx_cons, s->rx_prod, s->rmb_size, &n))
		return 0;
	return n;
}

uint32_t smcr_rx_unread(const struct smcr_sock *s)
{
	return smcr_rxhold_len(&s->held) + smcr_rx_readable(s);
}

/*
 * SO_RCVLOWAT as the ring can honour it: at most half the ring, as Linux
 * caps it at half a locked receive buffer.  A peer that cannot write the
 * rest until we read would otherwise never make it readable: our consumer
 * cursor goes out lazily (up to a tenth of the ring unconfirmed), so the
 * peer sees the ring full once nine tenths of it are unread.
 */
static uint32_t rx_lowat(const struct smcr_sock *s)
{
	uint32_t cap = s->rmb_size / 2 ? s->rmb_size / 2 : 1;

	if (s->rcv_lowat <= 1)
		return 1;
	return s->rcv_lowat < cap ? s->rcv_lowat : cap;
}

bool smcr_rx_lowat_met(const struct smcr_sock *s)
{
	return smcr_rx_unread(s) >= rx_lowat(s);
}

static void rx_violation(struct smcr_sock *s, const char *what, const char *why)
{
	char name[SMCR_CONN_NAME_MAX];

	smcr_warn("fd %d: peer sent %s (%s): aborting the connection; %s",
		  smcr_fd_label(s->tcp_fd), what, why,
		  smcr_conn_name(s->tcp_fd, name, sizeof(name)));
	smcr_close_abort_locked(s, ECONNRESET);
}

/*
 * A producer cursor behind ours by no more than the ring: a peer that moved the
 * connection to another link starts over from its last CDC it saw complete and
 * writes those bytes again (Linux, smc_switch_cursor; protocol.md §6.6).  It
 * does so before it tells us of the move (its DELETE LINK follows), so this
 * cannot wait for a sign of failover.  Such a cursor changes nothing: ours
 * stays, the rewritten bytes are the ones already counted, and none is
 * delivered twice.  Further back than a ring, no peer has those bytes to send.
 */
static bool rx_prod_rewound(const struct smcr_sock *s, struct smcr_curs prod)
{
	uint32_t behind;

	return smcr_curs_cmp(prod, s->rx_prod) < 0 &&
	       smcr_curs_diff(prod, s->rx_prod, s->rmb_size, &behind);
}

/*
 * Validate both cursors before either is stored; *take_prod says whether the
 * producer cursor moves ours (false for a rewound one).
 */
static bool rx_cursors_ok(struct smcr_sock *s, const struct smcr_cdc_msg *m, bool *take_prod)
{
	enum smcr_cdc_err err;

	*take_prod = !rx_prod_rewound(s, m->prod);
	/* Producer cursor into our RMB: at most one ring ahead of what we consumed. */
	err = smcr_cdc_curs_check_ring(s->rx_prod, *take_prod ? m->prod : s->rx_prod,
				       s->rmb_size);
	if (err == SMCR_CDC_ERR_NONE && *take_prod)
		err = smcr_cdc_curs_check(s->rx_prod, m->prod,
					  smcr_curs_advance(s->rx_cons, s->rmb_size, s->rmb_size),
					  s->rmb_size);
	if (err != SMCR_CDC_ERR_NONE) {
		rx_violation(s, "an impossible producer cursor", smcr_cdc_err_str(err));
		return false;
	}
	/* Consumer cursor of its RMB: never beyond what we produced there. */
	err = smcr_cdc_curs_check_ring(s->tx_cons, m->cons, s->peer_size);
	if (err == SMCR_CDC_ERR_NONE)
		err = smcr_cdc_curs_check(s->tx_cons, m->cons, s->tx_prod, s->peer_size);
	if (err != SMCR_CDC_ERR_NONE) {
		rx_violation(s, "an impossible consumer cursor", smcr_cdc_err_str(err));
		return false;
	}
	return true;
}

void smcr_rx_ctrl(struct smcr_sock *s, const uint8_t wire[SMCR_CDC_MSG_LEN])
{
	struct smcr_cdc_msg m;
	enum smcr_cdc_err err;
	uint8_t before = s->peer_conn_flags;
	bool take_prod;

	if (smcr_cdc_decode(wire, SMCR_CDC_MSG_LEN, &m, &err) != SMCR_WIRE_OK) {
		rx_violation(s, "a malformed CDC", smcr_cdc_err_str(err));
		return;
	}
	if (m.token != s->local_token) {
		rx_violation(s, "a CDC for another connection", "wrong alert token");
		return;
	}
	/*
	 * The peer moved the connection to another link of the group and names
	 * its last CDC it knows we got: if we never took that one, something it
	 * sent is lost, and the connection cannot go on (as Linux,
	 * smc_cdc_msg_validate).  Otherwise nothing changes: it carries no
	 * cursor, and what the peer resends comes with its next CDC.
	 */
	if (m.prod_flags & SMCR_CDC_PROD_FAILOVER) {
		if (!smcr_cdc_validation_ok(s->rx_seqno_valid ? s->rx_seqno : 0, m.seqno))
			rx_violation(s, "a failover validation naming a CDC we never got",
				     "data lost on the failed link");
		else if (!s->peer_relinked_quiet) {
			s->peer_relinked_quiet = true; /* its cursor update may be lost: below */
			smcr_info("fd %d: the peer moved the connection to another link (its last CDC"
				  " we got: %u)",
				  smcr_fd_label(s->tcp_fd), (unsigned)m.seqno);
		}
		return;
	}
	/* Older than one already applied: a late duplicate, drop it (as Linux). */
	if (s->rx_seqno_valid && smcr_cdc_seq_before(m.seqno, s->rx_seqno))
		return;
	s->rx_seqno = m.seqno;
	s->rx_seqno_valid = true;
	s->peer_relinked_quiet = false; /* its current consumer cursor, sent on the live link */

	if (!rx_cursors_ok(s, &m, &take_prod))
		return;
	if (take_prod)
		s->rx_prod = m.prod;
	else
		smcr_dbg("fd %d: the peer's producer cursor is behind ours (it writes again what"
			   " it sent before a link moved): ours stays",
			   smcr_fd_label(s->tcp_fd));
	if (smcr_curs_cmp(m.cons, s->tx_cons) != 0)
		s->tx_blocked_sent = false; /* space freed: a new episode may block */
	s->tx_cons = m.cons;
	s->peer_write_blocked = (m.prod_flags & SMCR_CDC_PROD_WRITE_BLOCKED) != 0;
	if (m.prod_flags & SMCR_CDC_PROD_CONS_UPD_REQ)
		s->peer_cons_upd_req = true;
	s->peer_conn_flags |= m.conn_flags &
			      (SMCR_CDC_CONN_DONE_WRITING | SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_ABORT);
	if (s->peer_conn_flags != before)
		smcr_close_peer_flags(s);
	/* The peer waits for room we may already have: tell it now. */
	if (s->state != SMCR_CONN_ABORTED && (s->peer_write_blocked || s->peer_cons_upd_req))
		smcr_rx_maybe_update_cons(s);
}

void smcr_rx_maybe_update_cons(struct smcr_sock *s)
{
	uint32_t to_confirm = 0, outstanding = 0, limit, sender_free;

	if (s->state == SMCR_CONN_ABORTED || (s->conn_flags_sent & SMCR_CDC_CONN_CLOSED))
		return;
	smcr_curs_diff(s->rx_cons_sent, s->rx_cons, s->rmb_size, &to_confirm);
	smcr_curs_diff(s->rx_cons_sent, s->rx_prod, s->rmb_size, &outstanding);
	limit = s->rmb_size / 10 > SMCR_CONS_UPDATE_MIN ? s->rmb_size / 10 : SMCR_CONS_UPDATE_MIN;
	sender_free = s->rmb_size - outstanding;
	if (s->peer_cons_upd_req ||
	    (to_confirm > limit && (sender_free <= s->rmb_size / 2 || s->peer_write_blocked)) ||
	    /* A blocked writer facing an empty ring must hear of every byte freed. */
	    (to_confirm > 0 && s->peer_write_blocked && outstanding == to_confirm))
		smcr_conn_send_cdc(s, 0);
}

/* Copy n bytes at cursor `at` of our RMB (two pieces across the wrap). */
static void rx_copy_out(const struct smcr_sock *s, struct smcr_curs at, const struct iovec *iov,
			int iovcnt, size_t done, uint32_t n)
{
	uint32_t first, second;

	smcr_ring_split(at.count, n, s->rmb_size, &first, &second);
	smcr_iov_put(iov, iovcnt, done, s->rmb + at.count, first);
	if (second)
		smcr_iov_put(iov, iovcnt, done + first, s->rmb, second);
}

/*
 * Copy n unread bytes from `skip` past the oldest: the held ones first,
 * then the RMB's.  Nothing is consumed.
 */
static void rx_copy_unread(const struct smcr_sock *s, uint32_t skip, const struct iovec *iov,
			   int iovcnt, size_t done, uint32_t n)
{
	uint32_t held = smcr_rxhold_len(&s->held), from_held, ring_skip;

	from_held = (uint32_t)smcr_rxhold_peek_from(&s->held, skip, iov, iovcnt, done, n);
	ring_skip = skip > held ? skip - held : 0;
	if (n > from_held)
		rx_copy_out(s, smcr_curs_advance(s->rx_cons, ring_skip, s->rmb_size), iov, iovcnt,
			    done + from_held, n - from_held);
}

/*
 * Giving a silent peer room (protocol.md §6.6).  A Linux peer that moves a
 * connection to another link does not repeat a consumer-cursor update it
 * posted on the lost link: it counted it confirmed when it posted it.  Its
 * next CDC, which would carry its real cursor, comes only when it reads
 * more or has data to write into room in our RMB.  So when our writer waits
 * for room in its RMB and its own unread data fills ours, neither side
 * would ever send again.  Any CDC from it ends that, since every one
 * carries its consumer cursor: so we make room for it to write.  The
 * oldest unread bytes move out of the RMB into the connection's holding
 * buffer (read first, rxhold.h), our consumer cursor advances, and a CDC
 * tells the peer (asking for its cursor too, which a peer with nothing to
 * write answers at once; Linux does not, and writes instead).
 *
 * Only once the peer moved the connection (its failover validation CDC)
 * and sent no CDC since: an update is lost only on the link it left, and
 * its first CDC on the new one carries its real cursor.  Not sooner: while
 * it still sends on the failing link, the room we give it may go to an
 * update lost there too, and the holding buffer would be full for nothing.
 * Only while our RMB is full (any room at all and a Linux peer with data
 * would have written it, with a CDC), and only after RESCUE_QUIET_MS of
 * waiting: far longer than a CDC's round trip, even under emulation, while
 * the alternative is waiting for ever.  The held bytes never exceed one
 * RMB: what the peer could have in flight anyway.
 */
#define RESCUE_QUIET_MS 500

static bool rx_rescue_wanted(const struct smcr_sock *s)
{
	return s->peer_relinked_quiet && !s->shared && s->state != SMCR_CONN_ABORTED && !s->shut_rd &&
	       !s->went_tcp && !s->tcp_tail &&
	       !(s->peer_conn_flags &
		 (SMCR_CDC_CONN_DONE_WRITING | SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_ABORT)) &&
	       smcr_rx_readable(s) == s->rmb_size && smcr_rxhold_room(&s->held, s->rmb_size) > 0;
}

bool smcr_rx_rescue_due(struct smcr_sock *s, int64_t *at)
{
	if (!rx_rescue_wanted(s)) {
		*at = -1;
		return false;
	}
	if (*at < 0)
		*at = smcr_now_ms() + RESCUE_QUIET_MS;
	return true;
}

bool smcr_rx_rescue(struct smcr_sock *s)
{
	uint32_t n, room, first, second;

	if (!rx_rescue_wanted(s))
		return false;
	n = smcr_rx_readable(s);
	room = smcr_rxhold_room(&s->held, s->rmb_size);
	if (n > room)
		n = room;
	smcr_ring_split(s->rx_cons.count, n, s->rmb_size, &first, &second);
	if (smcr_rxhold_put(&s->held, s->rmb_size, s->rmb + s->rx_cons.count, first,
			    second ? s->rmb : NULL, second) != 0)
		return false;
	s->rx_cons = smcr_curs_advance(s->rx_cons, n, s->rmb_size);
	s->rmb_rescues++;
	if (s->ops->rmb_rescued)
		s->ops->rmb_rescued(s->xc);
	smcr_info("fd %d: the peer is silent since it moved the connection to another link, our send waits"
		  " for room in its RMB and its data fills ours: %u unread bytes held aside"
		  " (%u in all), our consumer cursor sent (rescue %llu)",
		  smcr_fd_label(s->tcp_fd), n, smcr_rxhold_len(&s->held),
		  (unsigned long long)s->rmb_rescues);
	smcr_conn_send_cdc(s, SMCR_CDC_PROD_CONS_UPD_REQ);
	return true;
}

/*
 * Bytes a blocking read waits for, as Linux's sock_rcvlowat(): all of them
 * with MSG_WAITALL, else SO_RCVLOWAT, at most what the caller asked for.
 */
static size_t rx_target(const struct smcr_sock *s, size_t want, int flags)
{
	size_t lowat = rx_lowat(s);

	if (flags & MSG_WAITALL)
		return want;
	return lowat < want ? lowat : want;
}

/* Fewer than `target` bytes in: true to wait, else *ret is the answer. */
static bool rx_must_wait(struct smcr_sock *s, size_t got, size_t target, int flags,
			 ssize_t *ret)
{
	*ret = (ssize_t)got;
	if (s->state == SMCR_CONN_ABORTED) {
		/* The reset once, then an end of stream, as Linux's TCP. */
		if (!got)
			*ret = smcr_conn_reset_answer(s, 0);
		return false;
	}
	if (s->shut_rd || smcr_conn_peer_done(s))
		return false; /* EOF after the buffered data */
	if (got >= target)
		return false;
	if (flags & MSG_DONTWAIT) {
		if (!got)
			*ret = -EAGAIN;
		return false;
	}
	return true;
}

/* What a call takes of what is there: all it still wants, or all there is. */
static uint32_t rx_span(size_t wanted, uint32_t there)
{
	return wanted < there ? (uint32_t)wanted : there;
}

/*
 * Take n unread bytes into iov at offset got: the held bytes are the
 * oldest, so first them, then the RMB's.
 */
static void rx_take(struct smcr_sock *s, const struct iovec *iov, int iovcnt, size_t got,
		    uint32_t n)
{
	uint32_t held = (uint32_t)smcr_rxhold_peek(&s->held, iov, iovcnt, got, n);
	uint32_t ring = n - held;

	if (ring)
		rx_copy_out(s, s->rx_cons, iov, iovcnt, got + held, ring);
	smcr_rxhold_drop(&s->held, held);
	s->rx_cons = smcr_curs_advance(s->rx_cons, ring, s->rmb_size);
	s->bytes_received += n;
	smcr_hold_self(s)->bytes_received += n;
	if (s->peek_off >= 0)
		s->peek_off = s->peek_off > (int)n ? s->peek_off - (int)n : 0;
	if (ring)
		smcr_rx_maybe_update_cons(s);
}

/*
 * Sleep until the connection may have data; a peek says how much it waits
 * for (skip + target).  The deadline is computed at the first wait.
 */
static int rx_wait(struct smcr_sock *s, int flags, uint32_t skip, size_t target,
		   int64_t *deadline)
{
	int rc;

	if (*deadline == -2)
		*deadline = s->rcv_timeout_ms ? smcr_sys_deadline(s->rcv_timeout_ms) : -1;
	if (flags & MSG_PEEK)
		s->peek_need = skip + target > UINT32_MAX ? UINT32_MAX : (uint32_t)(skip + target);
	rc = smcr_conn_wait(s, POLLIN, *deadline);
	s->peek_need = 0;
	return rc;
}

ssize_t smcr_sock_recvv(struct smcr_sock *s, const struct iovec *iov, int iovcnt, int flags)
{
	ssize_t total = smcr_iov_total(iov, iovcnt);
	size_t want = (size_t)total, got = 0, peeked = 0, target;
	uint32_t skip;
	bool peer_checked = false;
	int64_t deadline = -2; /* computed when the first wait comes */
	ssize_t ret;

	if (flags & MSG_OOB)
		return -EINVAL;
	if (total < 0)
		return total;
	smcr_conn_lock(s);
	/*
	 * Linux's target is never 0 (sock_rcvlowat's "?: 1"): an empty read
	 * waits as a one-byte read would, then takes nothing.  A program that
	 * waits for data that way must not see an EOF (0) at once.
	 */
	target = want ? rx_target(s, want, flags) : 1;
	/* SO_PEEK_OFF: a peek starts that far into the unread bytes */
	skip = (flags & MSG_PEEK) && s->peek_off > 0 ? (uint32_t)s->peek_off : 0;
	for (;;) {
		uint32_t avail, n;
		int rc;

		smcr_conn_progress_io(s);
		/* After SHUT_RD what came stays readable, as Linux's TCP keeps it. */
		avail = s->went_tcp ? 0 : smcr_rx_unread(s);
		if (!want && avail > skip) {
			ret = 0; /* an empty read of a readable socket */
			break;
		}
		n = avail <= skip ? 0 : rx_span(want - got, avail - skip);
		if (avail > skip && !(flags & MSG_PEEK)) {
			rx_take(s, iov, iovcnt, got, n);
			got += n;
			if (got >= target) {
				ret = (ssize_t)got;
				break;
			}
			continue;
		}
		if (avail > skip) {
			rx_copy_unread(s, skip, iov, iovcnt, 0, n);
			/* Nothing taken: a peek that waits for more looks again. */
			peeked = n;
			if (!rx_must_wait(s, n, target, flags, &ret))
				break;
		} else if ((s->tcp_tail || s->went_tcp) && !s->shut_rd) {
			/* The ring is read: the rest of the stream is on TCP. */
			ret = smcr_tail_recv(s, iov, iovcnt, got, flags);
			break;
		} else if (!peer_checked) {
			/* Before "nothing yet" or sleeping: is the peer still there? */
			peer_checked = true;
			smcr_conn_check_peer(s);
			continue;
		} else if (!rx_must_wait(s, got, target, flags, &ret)) {
			break;
		}
		rc = rx_wait(s, flags, skip, target, &deadline);
		if (rc < 0) {
			/* A timeout or a signal returns what is in, as Linux does. */
			ret = got || peeked ? (ssize_t)(got ? got : peeked) : rc;
			break;
		}
	}
	if ((flags & MSG_PEEK) && ret > 0 && s->peek_off >= 0)
		s->peek_off += (int)ret;
	/* Readiness reflects what is left for other waiters. */
	smcr_conn_progress_io(s);
	smcr_stats_conn_update(s);
	smcr_conn_unlock(s);
	return ret;
}
