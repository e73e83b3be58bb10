// SPDX-License-Identifier: MIT
/*
 * The data path.  We write into the peer's ring and its control page; the
 * peer into ours (shm_region.c).
 *
 * CDC delivery: a one-slot mailbox in the receiver's control page.  Every CDC
 * field is either cumulative (cursors, sticky close flags) or describes the
 * present moment (write blocked, update requested), so the newest CDC
 * supersedes every older one and a slot that is simply overwritten loses
 * nothing; the sender never waits for the receiver to drain a queue.
 *
 * Doorbell: the UNIX socket the rendezvous left connected between the two
 * ends.  The receiver sets `armed` in its control page when it may go to
 * sleep; the sender rings (a one-byte send) only if it swapped `armed` from
 * 1 to 0, so a busy stream pays no system call per CDC (benchmarks.md §2,
 * "Doorbells").  Every send and receive on it says MSG_DONTWAIT: whether a
 * call of ours may block is decided per call, never by a file's O_NONBLOCK,
 * which a peer holding the same open file description could clear (an
 * eventfd shared through SCM_RIGHTS let a peer fill its counter, clear the
 * flag and block our write forever).  The socket is O_NONBLOCK from birth
 * all the same (it is never handed to anyone), for the plain read and write
 * a seccomp filter may leave us instead (confine.h, ring_peer, drain_rings).
 * Nothing but our memfd is ever handed to the peer.  The engine's readiness
 * fd is an epoll instance holding that socket and a private eventfd (our own
 * "still ready" signal, never shared): it turns readable on a ring and also
 * when the peer process dies (hang-up).
 */
#include "smcr/shm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "smcr/cdc.h"
#include "smcr/confine.h"
#include "smcr/libc.h"
#include "smcr/sys.h"
#include "smcr/rendezvous.h"
#include "smcr/wire.h"

#define SHM_MAILBOX_TRIES 64

void smcr_shm_ring(struct smcr_xconn *xc, uint8_t **ring, uint32_t *size)
{
	*ring = xc->own->base + SHM_CTRL_LEN;
	*size = xc->own->ring_size;
}

/* One token for both directions, from the rendezvous token both ends know. */
void smcr_shm_tokens(const struct smcr_xconn *xc, uint32_t *local, uint32_t *peer)
{
	uint32_t t = (uint32_t)(xc->token ^ (xc->token >> 32)) | 1u;

	*local = t;
	*peer = t;
}

int smcr_shm_write_peer(struct smcr_xconn *xc, uint32_t offset, const void *src, uint32_t len)
{
	if (offset > xc->peer_ring_size || len > xc->peer_ring_size - offset)
		return -EINVAL;
	memcpy(xc->peer_base + SHM_CTRL_LEN + offset, src, len);
	return 0;
}

int smcr_shm_read_peer(const struct smcr_xconn *xc, uint32_t offset, void *dst, uint32_t len)
{
	if (offset > xc->peer_ring_size || len > xc->peer_ring_size - offset)
		return -EINVAL;
	memcpy(dst, xc->peer_base + SHM_CTRL_LEN + offset, len);
	return 0;
}

/* Our own "still ready" signal: an eventfd nobody else holds. */
static void signal_self(struct smcr_xconn *xc)
{
	uint64_t one = 1;

	(void)!smcr_libc.write(xc->own_efd, &one, sizeof(one));
}

/*
 * Wake the peer: one byte on the rendezvous socket.  Blocking is decided
 * here, per call: EAGAIN means its queue is full, so it has rings to wake
 * it already.
 */
static void ring_peer(struct smcr_xconn *xc)
{
	static const char bell = 0;
	struct pollfd p = { .fd = xc->unix_fd, .events = POLLOUT };

	if (smcr_shm_bell_ring(xc) || smcr_shm_bell_offer(xc))
		return;
	if (smcr_call_allowed(SMCR_CALL_SEND)) {
		(void)!smcr_libc.send(xc->unix_fd, &bell, sizeof(bell),
				      MSG_DONTWAIT | MSG_NOSIGNAL);
		return;
	}
	/*
	 * A seccomp filter that denies sendto (confine.h): a plain write, which
	 * cannot block (the socket is O_NONBLOCK from birth) but, without
	 * MSG_NOSIGNAL, would raise SIGPIPE on a peer gone: so only when poll
	 * sees the socket writable and not hung up.  A peer that dies between
	 * the two calls leaves that window open, for a process that does not
	 * ignore SIGPIPE: as the next write to its TCP socket would.
	 */
	if (smcr_libc.poll(&p, 1, 0) == 1 && p.revents == POLLOUT)
		(void)!smcr_libc.write(xc->unix_fd, &bell, sizeof(bell));
}

#define SHM_RINGS_PER_DRAIN 8

/*
 * drain_rings() under a seccomp filter that denies recvmmsg (confine.h): a
 * read per ring; the socket is O_NONBLOCK from birth, so none blocks.
 */
static int drain_rings_by_read(struct smcr_xconn *xc)
{
	for (int i = 0; i < SHM_RINGS_PER_DRAIN; i++) {
		char buf[8];
		ssize_t n = smcr_libc.read(xc->unix_fd, buf, sizeof(buf));

		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? i : -1;
	}
	return SHM_RINGS_PER_DRAIN;
}

/*
 * Take the peer's rings off the socket, several in one call: a ring per
 * re-arm may have piled up while we stayed ready.  What a hostile peer
 * sends beyond that only wakes us again (then smcr_shm_peer_gone sees it).
 * Returns how many were taken (0 if none were there), -1 if the peer hung up.
 */
static int drain_socket(struct smcr_xconn *xc)
{
	char buf[SHM_RINGS_PER_DRAIN][8];
	union {
		char buf[SMCR_RV_ANC_SPACE];
		struct cmsghdr align;
	} anc[SHM_RINGS_PER_DRAIN];
	struct mmsghdr mm[SHM_RINGS_PER_DRAIN];
	struct iovec iov[SHM_RINGS_PER_DRAIN];
	/* Only while the peer may still offer a pipe: its fds need room to come. */
	bool offer = smcr_shm_bell_expected(xc);
	int n;

	if (!smcr_call_allowed(SMCR_CALL_RECVMMSG))
		return drain_rings_by_read(xc);
	memset(mm, 0, sizeof(mm));
	for (int i = 0; i < SHM_RINGS_PER_DRAIN; i++) {
		iov[i] = (struct iovec){ .iov_base = buf[i], .iov_len = sizeof(buf[i]) };
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
		if (offer) {
			mm[i].msg_hdr.msg_control = anc[i].buf;
			mm[i].msg_hdr.msg_controllen = sizeof(anc[i].buf);
		}
	}
	/* (The engine's own socket: no wrapper to bypass, so the system call itself.) */
	n = (int)smcr_libc.syscall(SYS_recvmmsg, xc->unix_fd, mm, SHM_RINGS_PER_DRAIN,
				   MSG_DONTWAIT | (offer ? MSG_CMSG_CLOEXEC : 0), NULL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	for (int i = 0; offer && i < n; i++)
		smcr_shm_bell_take(xc, anc[i].buf, mm[i].msg_hdr.msg_controllen);
	/* A ring is one byte: an empty message is the end of the stream. */
	for (int i = 0; i < n; i++)
		if (mm[i].msg_len == 0)
			return -1;
	return n;
}

/*
 * Once the peer rings on a pipe (shm_bell.c), rings come there; a ring it
 * sent over the socket just before is taken when the socket is seen readable.
 */
static int drain_rings(struct smcr_xconn *xc)
{
	int n;

	if (xc->bell_rd < 0)
		return drain_socket(xc);
	n = smcr_shm_bell_drain(xc);
	if (n >= 0 && xc->socket_stray) {
		xc->socket_stray = false;
		if (drain_socket(xc) < 0)
			return -1;
	}
	return n;
}

#define SHM_DRAIN_BATCHES 4

/*
 * Take what the socket holds; then nothing is due but the ring of a swap we
 * have not seen yet (`armed` still 0).  That ring may be among those just
 * taken or still to come, and counting it as due when it was taken would
 * leave the ready fd silent while the connection is ready (a lost wake-up):
 * so it counts as taken (-1: its swap, once seen, brings the count to 0).
 * If it comes after all, it costs a spurious wake-up, never a lost one.
 * Only a peer that rings without swapping can keep the socket from
 * emptying; it keeps our ready fd readable itself, and the count says to
 * drain again.
 */
static void take_rings(struct smcr_xconn *xc)
{
	for (int batch = 0; batch < SHM_DRAIN_BATCHES; batch++) {
		int n = drain_rings(xc);

		if (n < 0) {
			xc->peer_gone = true;
			xc->rings_due = 0;
			return;
		}
		if (n < SHM_RINGS_PER_DRAIN) {
			xc->rings_due =
				atomic_load_explicit(&xc->own_ctrl->armed, memory_order_seq_cst) == 0
					? -1
					: 0;
			return;
		}
	}
	xc->rings_due = 1;
}

/* Our CPU, + 1, for the peer's spin decision (rseq makes sched_getcpu() cheap). */
static void publish_cpu(struct smcr_xconn *xc)
{
	int cpu = sched_getcpu();

	atomic_store_explicit(&xc->own_ctrl->cpu, cpu >= 0 ? (uint32_t)cpu + 1 : 0,
			      memory_order_relaxed);
}

int smcr_shm_send_ctrl(struct smcr_xconn *xc, const uint8_t msg[SMCR_CDC_MSG_LEN])
{
	struct shm_ctrl *pc = xc->peer_ctrl;
	uint32_t w[SHM_CDC_WORDS];

	memcpy(w, msg, sizeof(w));
	/* seqlock writer: odd, words, even (release orders the words before it). */
	xc->tx_seq += 2;
	atomic_store_explicit(&pc->seq, xc->tx_seq - 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (unsigned i = 0; i < SHM_CDC_WORDS; i++)
		atomic_store_explicit(&pc->cdc[i], w[i], memory_order_relaxed);
	atomic_store_explicit(&pc->seq, xc->tx_seq, memory_order_release);
	publish_cpu(xc);
	/* Pairs with smcr_shm_settle(): ring only if the peer said it may sleep. */
	if (atomic_exchange_explicit(&pc->armed, 0, memory_order_seq_cst))
		ring_peer(xc);
	return 0;
}

/*
 * Has the peer hung up?  A ring not counted in `rings_due` (the peer sent
 * without swapping `armed`, or we have not looked at `armed` yet) makes one
 * due, so the next settle takes it off and it cannot keep our ready fd
 * readable for ever; a waiter that relies on it is not robbed of it here (a
 * drain here would take the ring of a message nobody has looked at).  Seen
 * later, that swap counts its ring a second time: the socket is not empty
 * until the next drain, which counts what is really there.
 */
bool smcr_shm_peer_gone(struct smcr_xconn *xc)
{
	struct pollfd p[2] = {
		{ .fd = xc->unix_fd, .events = POLLIN | POLLRDHUP },
		{ .fd = xc->bell_rd, .events = POLLIN },
	};

	if (xc->peer_gone)
		return true;
	if (smcr_libc.poll(p, xc->bell_rd < 0 ? 1 : 2, 0) > 0) {
		bool ring = (p[0].revents | p[1].revents) & POLLIN;

		if ((p[0].revents | p[1].revents) & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
			xc->peer_gone = true;
		else if (ring && xc->rings_due < 1)
			xc->rings_due = 1;
		if (xc->bell_rd >= 0 && (p[0].revents & POLLIN))
			xc->socket_stray = true;
	}
	return xc->peer_gone;
}

/*
 * How far into our ring the peer's producer cursor has ever reached
 * (smcr_shm_region_zero).
 */
static void note_dirty(struct smcr_xconn *xc, const uint8_t msg[SMCR_CDC_MSG_LEN])
{
	uint32_t count = smcr_get_be32(msg + SMCR_CDC_OFF_PROD + 4);

	if (smcr_get_be16(msg + SMCR_CDC_OFF_PROD + 2) != 0 || count > xc->own->ring_size)
		xc->rx_dirty = xc->own->ring_size;
	else if (count > xc->rx_dirty)
		xc->rx_dirty = count;
}

int smcr_shm_recv_ctrl(struct smcr_xconn *xc, uint8_t msg[SMCR_CDC_MSG_LEN])
{
	struct shm_ctrl *oc = xc->own_ctrl;
	uint32_t w[SHM_CDC_WORDS];

	for (int tries = 0; tries < SHM_MAILBOX_TRIES; tries++) {
		uint32_t s1 = atomic_load_explicit(&oc->seq, memory_order_acquire), s2;

		if (s1 == xc->rx_seq)
			return xc->peer_gone ? -ECONNRESET : 0;
		if (s1 & 1)
			continue; /* the peer is writing right now */
		for (unsigned i = 0; i < SHM_CDC_WORDS; i++)
			w[i] = atomic_load_explicit(&oc->cdc[i], memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&oc->seq, memory_order_relaxed);
		if (s1 != s2)
			continue;
		__atomic_store_n(&xc->rx_seq, s1, __ATOMIC_RELAXED);
		memcpy(msg, w, sizeof(w));
		note_dirty(xc, msg);
		return 1;
	}
	/* Mid-write for long: the writer rings after it finishes (we are armed). */
	return 0;
}

int smcr_shm_ready_fd(const struct smcr_xconn *xc)
{
	return xc->ep_fd;
}

/*
 * Doorbell state: `own_efd` has a count if we signalled it (`signalled`),
 * the socket holds `rings_due` rings.  Draining costs a system call per
 * source, signalling one; each happens only when the wanted state changes.
 */
static bool rearm(struct smcr_xconn *xc)
{
	_Atomic uint32_t *armed = &xc->own_ctrl->armed;

	if (atomic_load_explicit(armed, memory_order_acquire) != 0)
		return false;
	/* The peer rang, or is about to (it swaps first, then sends). */
	xc->rings_due++;
	atomic_store_explicit(armed, 1, memory_order_seq_cst);
	return true; /* a message may have beaten the store */
}

bool smcr_shm_settle(struct smcr_xconn *xc, bool ready)
{
	bool look_again = rearm(xc);
	uint64_t v;

	/*
	 * Ready for long (a writer, or settle_lazy() calls) while the peer
	 * keeps ringing: take them now and then, one system call for a batch,
	 * before its socket fills and every ring of its costs a failed send.
	 */
	if (ready && xc->rings_due >= SHM_RINGS_PER_DRAIN) {
		take_rings(xc);
		look_again = true;
	}
	if (ready) {
		if (!xc->signalled && xc->rings_due <= 0) {
			signal_self(xc);
			xc->signalled = true;
		}
		return look_again;
	}
	if (xc->rings_due > 0) {
		take_rings(xc);
		look_again = true; /* the drain may have eaten a ring that just came */
	}
	if (xc->signalled) {
		(void)!smcr_libc.read(xc->own_efd, &v, sizeof(v));
		xc->signalled = false;
		look_again = true;
	}
	return look_again;
}

bool smcr_shm_settle_lazy(struct smcr_xconn *xc)
{
	bool look_again = rearm(xc);

	if (xc->rings_due >= SHM_RINGS_PER_DRAIN) {
		take_rings(xc);
		look_again = true;
	}
	return look_again;
}

/* ---- the rest of the stream on TCP (tcp_tail.c) ---- */

/*
 * The TCP socket joins the readiness fd: its data and hang-up wake our
 * waiters.  The peer link leaves it: once either side is on TCP, the peer's
 * last rings and its hang-up are news for nobody (and a hang-up would keep
 * the fd readable for ever).
 */
int smcr_shm_watch_tcp(struct smcr_xconn *xc, int tcp_fd, bool out)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0) };

	(void)smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_DEL, xc->unix_fd, &ev);
	if (xc->bell_rd >= 0)
		(void)smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_DEL, xc->bell_rd, &ev);
	ev.data.fd = tcp_fd;
	return smcr_sys_epoll_set(xc->ep_fd, tcp_fd, &ev);
}

/*
 * We go on over TCP: the peer is told after our last CDC (it takes that
 * first, so it knows our final cursors), and woken whether or not it is
 * armed: the flag is news its next wake-up must see.
 */
int smcr_shm_continue_on_tcp(struct smcr_xconn *xc, int tcp_fd)
{
	int rc;

	if (!(atomic_load_explicit(&xc->peer_ctrl->features, memory_order_relaxed) &
	      SHM_FEAT_TCP_TAIL))
		return -ENOTSUP;
	/*
	 * Our fds first: a forked child may have closed them (a mass close
	 * before exec), and then it cannot wake the peer either: the caller
	 * resets the connection instead of leaving the peer asleep on a flag.
	 */
	rc = smcr_shm_watch_tcp(xc, tcp_fd, false);
	if (rc < 0)
		return rc;
	if (smcr_libc.fcntl(xc->unix_fd, F_GETFD) < 0 ||
	    (xc->bell_wr >= 0 && smcr_libc.fcntl(xc->bell_wr, F_GETFD) < 0))
		return -errno;
	atomic_store_explicit(&xc->peer_ctrl->tcp_tail, 1, memory_order_seq_cst);
	atomic_store_explicit(&xc->peer_ctrl->armed, 0, memory_order_seq_cst);
	ring_peer(xc);
	return 0;
}

bool smcr_shm_peer_on_tcp(const struct smcr_xconn *xc)
{
	return atomic_load_explicit(&xc->own_ctrl->tcp_tail, memory_order_acquire) != 0;
}

/* ---- optional bounded spin (benchmarks.md §2: only while the peer runs) ---- */

bool smcr_shm_ctrl_pending(const struct smcr_xconn *xc)
{
	/* rx_seq may be updated by another thread under the connection lock. */
	return atomic_load_explicit(&xc->own_ctrl->seq, memory_order_acquire) !=
	       __atomic_load_n(&xc->rx_seq, __ATOMIC_RELAXED);
}

/*
 * Worth spinning for: the peer is not blocked in a wait, and it did not last
 * run on our CPU (where it would be waiting for us to stop spinning: on a
 * 2-vCPU VM the scheduler often packs both ends onto one, benchmarks.md
 * §2).  A peer still marked asleep that we rang (it has not re-armed since:
 * `armed` is 0) is on its way to answer, so it counts as running; otherwise a
 * request/response pair in which each side sends and then waits would always
 * find the other still marked asleep, and neither would ever spin.  Its last
 * CPU is stale then and not compared.  The peer's own words in its page; a
 * liar only wastes our spin budget.
 */
bool smcr_shm_peer_running(const struct smcr_xconn *xc)
{
	uint32_t cpu;

	if (atomic_load_explicit(&xc->peer_ctrl->sleeping, memory_order_relaxed) != 0)
		return atomic_load_explicit(&xc->peer_ctrl->armed, memory_order_relaxed) == 0;
	cpu = atomic_load_explicit(&xc->peer_ctrl->cpu, memory_order_relaxed);
	return cpu == 0 || (int)cpu - 1 != sched_getcpu();
}

void smcr_shm_set_sleeping(struct smcr_xconn *xc, bool sleeping)
{
	if (!sleeping)
		publish_cpu(xc);
	atomic_store_explicit(&xc->own_ctrl->sleeping, sleeping ? 1u : 0u, memory_order_relaxed);
}
