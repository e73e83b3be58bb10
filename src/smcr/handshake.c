// SPDX-License-Identifier: MIT
/*
 * The handshake in steps, for either side (handshake_int.h): its wait fd and
 * bound, SO_RCVLOWAT while the peer's message is partial, giving SMC up when
 * the peer is late, and each step; and the names and counts of the reasons a
 * connection stays on TCP.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

#include "common/log.h"
#include "smcr/handshake_int.h"
#include "smcr/libc.h"
#include "smcr/stats.h"
#include "smcr/sys.h"

#define DEFAULT_RMB_SIZE (256u * 1024)
/*
 * Same host: a larger ring halves the sleep/wake-up round trips of a bulk
 * stream (sockperf 65000 B under load: +35-55%, CPU per message -30%) and
 * costs a short connection nothing more (shm.c faults pages in as they are
 * written, pools them, zeroes only what was written).
 */
#define SHM_DEFAULT_RMB_SIZE (1024u * 1024)
#define MAX_RMB_SIZE (512u * 1024 * 1024)

uint32_t smcr_hs_rmb_size(const struct smcr_transport_ops *ops, const struct smcr_sock_opts *opts)
{
	uint32_t want = opts && opts->rcvbuf ? opts->rcvbuf
			: ops->same_host ? SHM_DEFAULT_RMB_SIZE : DEFAULT_RMB_SIZE;

	return want > MAX_RMB_SIZE ? MAX_RMB_SIZE : want;
}

int smcr_hs_wait_ms(const struct smcr_sock_opts *opts)
{
	return opts && opts->handshake_ms > 0 ? opts->handshake_ms : CLC_WAIT_MS;
}

/*
 * A handshake whose peer did not send its next message within the bound
 * need not cost the connection: a server answers a Proposal only at its
 * first I/O on the socket, which a busy program may do much later, and a
 * client may be stopped or swapped out between the Accept and its Confirm.
 * Plain TCP would have carried on, so we give SMC up and carry on too.  The
 * peer still owes exactly one CLC message (an smcr server answers a Proposal
 * with one Accept or Decline before any data of its own, a client an Accept
 * with one Confirm or Decline), so we send nothing until it has come: it is
 * taken whenever it comes, answered with a Decline if it offers SMC, and
 * both ends go on over TCP with nothing of CLC in the stream.  Sending our
 * Decline at once would not be sound: a peer that answered meanwhile with a
 * Decline of its own goes on with data, and our Decline would reach its
 * application.  Meanwhile the connection holds nothing of the transport,
 * and the application's calls wait as in the handshake (design §4).
 */
void smcr_hs_log_give_up(int fd, uint32_t reason, int waited_ms)
{
	char name[SMCR_CONN_NAME_MAX];
	bool client = reason == SMCR_CLC_DECL_TIMEOUT_CL;

	smcr_warn("fd %d: no %s within %d ms: SMC given up (%s), the connection goes on over"
		  " TCP once the %s's late answer is taken; %s",
		  smcr_fd_label(fd), client ? "answer to our Proposal" : "Confirm after our Accept",
		  waited_ms,
		  smcr_fallback_reason_str((int)reason), client ? "server" : "client",
		  smcr_conn_name(fd, name, sizeof(name)));
}

/*
 * A message arrives in pieces: until it is whole, the socket polls readable
 * only once `need` bytes are in (SO_RCVLOWAT), so a client that sends half a
 * message and stops does not make every wait return at once.  The mark the
 * application set (on the socket, or on the listener it inherits from) is
 * read before the first change and put back after: the socket is its own.
 */
void smcr_hs_set_lowat(struct smcr_handshake *hs, int need)
{
	socklen_t len = sizeof(hs->app_lowat);

	if (need == 0 || need == hs->lowat)
		return;
	if (!hs->lowat && smcr_libc.getsockopt(hs->tcp_fd, SOL_SOCKET, SO_RCVLOWAT, &hs->app_lowat,
					       &len) < 0)
		return;
	if (smcr_libc.setsockopt(hs->tcp_fd, SOL_SOCKET, SO_RCVLOWAT, &need, sizeof(need)) == 0)
		hs->lowat = need;
}

void smcr_hs_clear_lowat(struct smcr_handshake *hs)
{
	if (hs->lowat)
		(void)smcr_libc.setsockopt(hs->tcp_fd, SOL_SOCKET, SO_RCVLOWAT, &hs->app_lowat,
					   sizeof(hs->app_lowat));
	hs->lowat = 0;
}

static int hs_xfd(const struct smcr_handshake *hs)
{
	return hs->ops->server_wait_fd && hs->attach_rc == -EAGAIN
		       ? hs->ops->server_wait_fd(hs->xc)
		       : -1;
}

/* Keep the transport's fd in wait_fd current. */
static void hs_sync_wait_fd(struct smcr_handshake *hs)
{
	int xfd = hs_xfd(hs);
	struct epoll_event ev = { .events = EPOLLIN };

	if (hs->wait_fd < 0 || xfd == hs->watched_xfd)
		return;
	if (hs->watched_xfd >= 0)
		(void)smcr_libc.epoll_ctl(hs->wait_fd, EPOLL_CTL_DEL, hs->watched_xfd, &ev);
	hs->watched_xfd = -1;
	if (xfd >= 0 && smcr_libc.epoll_ctl(hs->wait_fd, EPOLL_CTL_ADD, xfd, &ev) == 0)
		hs->watched_xfd = xfd;
}

/*
 * The bound passed without the peer's next message (smcr_hs_log_give_up()
 * says why that is no reason to end the connection): let go of the
 * transport's part (the rendezvous, rings, a knock in progress) and of the
 * bound, and wait for that message as a read waits for data.
 */
void smcr_hs_give_up(struct smcr_handshake *hs, uint32_t reason, int waited_ms)
{
	struct itimerspec off = { { 0, 0 }, { 0, 0 } };

	smcr_hs_log_give_up(hs->tcp_fd, reason, waited_ms);
	hs->gave_up = reason;
	hs->attach_rc = (int)reason; /* nothing attaches any more: accept.c declines */
	hs_sync_wait_fd(hs);         /* the transport's fd leaves the wait fd first */
	if (hs->xc)
		hs->ops->destroy(hs->xc, false);
	hs->xc = NULL;
	hs->deadline = INT64_MAX;
	if (hs->timer_fd >= 0)
		(void)timerfd_settime(hs->timer_fd, 0, &off, NULL);
}

int smcr_handshake_fd(struct smcr_handshake *hs)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct itimerspec at = { .it_value = { .tv_sec = hs->deadline / 1000,
					       .tv_nsec = (hs->deadline % 1000) * 1000000 } };

	if (hs->wait_fd >= 0)
		return hs->wait_fd;
	/*
	 * Both live only for the handshake (the application never sees their
	 * numbers): they stay in the low fd range rather than pay two more
	 * system calls each to move up.
	 */
	hs->wait_fd = smcr_libc.epoll_create1(EPOLL_CLOEXEC);
	if (hs->wait_fd < 0)
		return -EMFILE;
	hs->timer_fd = smcr_libc.timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (smcr_libc.epoll_ctl(hs->wait_fd, EPOLL_CTL_ADD, hs->tcp_fd, &ev) < 0 ||
	    hs->timer_fd < 0 ||
	    (!hs->gave_up && timerfd_settime(hs->timer_fd, TFD_TIMER_ABSTIME, &at, NULL) < 0))
		goto fail;
	ev.events = EPOLLIN;
	if (smcr_libc.epoll_ctl(hs->wait_fd, EPOLL_CTL_ADD, hs->timer_fd, &ev) < 0)
		goto fail;
	hs_sync_wait_fd(hs);
	return hs->wait_fd;
fail:
	smcr_sys_close(hs->timer_fd);
	smcr_sys_close(hs->wait_fd);
	hs->timer_fd = hs->wait_fd = -1;
	return -EMFILE;
}

/* Wait until a step may make progress or `deadline` passes. */
static void hs_wait(struct smcr_handshake *hs, int64_t deadline)
{
	struct pollfd p[2] = { { .fd = hs->tcp_fd, .events = POLLIN | POLLRDHUP },
			       { .fd = hs_xfd(hs), .events = POLLIN } };

	if (deadline > hs->deadline)
		deadline = hs->deadline;
	(void)smcr_sys_wait_fds(p, p[1].fd >= 0 ? 2 : 1, deadline);
}

int smcr_handshake_step(struct smcr_handshake *hs, int64_t deadline, struct smcr_sock **out)
{
	int rc;

	*out = NULL;
	for (;;) {
		rc = hs->client ? smcr_hs_client_advance(hs) : smcr_hs_server_advance(hs);
		if (rc != SMCR_HANDSHAKE_PENDING || smcr_now_ms() >= deadline)
			break;
		hs_wait(hs, deadline);
	}
	if (rc == SMCR_HANDSHAKE_PENDING) {
		hs_sync_wait_fd(hs);
		return rc;
	}
	smcr_hs_clear_lowat(hs);
	return hs->client ? smcr_hs_client_end(hs, rc, out) : smcr_hs_server_end(hs, rc, out);
}

void smcr_handshake_free(struct smcr_handshake *hs)
{
	if (!hs)
		return;
	if (hs->xc)
		hs->ops->destroy(hs->xc, false);
	smcr_sys_close(hs->timer_fd);
	smcr_sys_close(hs->wait_fd);
	free(hs);
}

void smcr_handshake_forget_inherited(struct smcr_handshake *hs)
{
	if (!hs)
		return;
	if (hs->xc)
		hs->ops->forget(hs->xc);
	smcr_sys_close(hs->timer_fd);
	smcr_sys_close(hs->wait_fd);
	free(hs);
}

void smcr_note_fallback(int reason)
{
	if (reason > 0)
		smcr_stats_fallback(reason);
}

void smcr_note_handshake_failed(int reason)
{
	smcr_stats_handshake_failed(reason);
}

const char *smcr_fallback_reason_str(int reason)
{
	const char *n = reason > 0 ? smcr_clc_decl_name((uint32_t)reason) : NULL;

	return n ? n : "unknown";
}
