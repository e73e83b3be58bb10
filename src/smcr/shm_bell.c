// SPDX-License-Identifier: MIT
/*
 * Pipe doorbells.  A ring on the UNIX socket (shm_data.c) costs the sender
 * an skb and the receiver a recvmmsg: ~4 us per ring and drain here, where
 * a one-byte pipe write and read cost ~1.5 us (benchmarks.md §3.5).  A
 * request/response connection rings once per message each way, so once a
 * connection has rung its peer SHM_BELL_AFTER_RINGS times over the socket
 * (a short connection never does), the sender offers a pipe instead: the
 * offer is itself a ring, one byte carrying the pipe's read end.
 *
 *  - The sender keeps the write end, whose open file description nobody else
 *    holds (O_NONBLOCK is a flag of the description: a peer holding ours
 *    could make our ring block), and a read end of its own, so that a ring
 *    after the peer is gone fills the pipe instead of raising SIGPIPE.
 *  - The receiver reopens the read end through /proc/self/fd, a description
 *    of its own (the sender could clear O_NONBLOCK on the one it sent, or
 *    read from it), checks it is the pipe that came, adds it to the
 *    readiness fd and only then says so in its control page (`bell_pipe`).
 *  - The sender rings on the pipe only once `bell_pipe` says so.  A ring sent
 *    over the socket just before (it read `bell_pipe` a moment too early) is
 *    still a ring: the socket stays in the readiness fd, and a drain takes it
 *    (socket_stray, set where shm_data.c finds the socket readable).
 *
 * Fd numbers live in the connection's fork-shared state, valid in every
 * holder's fd table only if they were made before the fork: a connection
 * older than this process's last fork (smcr_shm_fork_gen) neither offers nor
 * takes a pipe.  Reopening needs the peer's pipe to be openable by us (the
 * same user, or root) and /proc; without either, rings stay on the socket.
 */
#include "smcr/shm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/confine.h"
#include "smcr/libc.h"
#include "smcr/rendezvous.h"
#include "smcr/sys.h"

#define SHM_BELL_AFTER_RINGS 8
#define SHM_BELL_OFFER 'P'

unsigned smcr_shm_fork_gen;

static bool bell_possible(const struct smcr_xconn *xc)
{
	return xc->peer_ctrl && xc->bell_gen == smcr_shm_fork_gen && !smcr_confined() &&
	       (atomic_load_explicit(&xc->peer_ctrl->features, memory_order_relaxed) &
		SHM_FEAT_PIPE_BELL);
}

bool smcr_shm_bell_ring(struct smcr_xconn *xc)
{
	static const char bell = 0;

	if (xc->bell_wr < 0 || !xc->peer_ctrl ||
	    !atomic_load_explicit(&xc->peer_ctrl->bell_pipe, memory_order_seq_cst) ||
	    !smcr_call_allowed(SMCR_CALL_WRITE))
		return false;
	/* EAGAIN: the pipe is full, the peer has rings enough to wake it. */
	(void)!smcr_libc.write(xc->bell_wr, &bell, sizeof(bell));
	return true;
}

static int send_offer(int sock, int fd)
{
	static const char offer = SHM_BELL_OFFER;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)&offer, .iov_len = sizeof(offer) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	memset(u.buf, 0, sizeof(u.buf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return smcr_libc.sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 ? 0 : -1;
}

bool smcr_shm_bell_offer(struct smcr_xconn *xc)
{
	int p[2];

	if (xc->bell_offered || ++xc->socket_rings < SHM_BELL_AFTER_RINGS || !bell_possible(xc))
		return false;
	xc->bell_offered = true;
	if (!smcr_libc.pipe2 || smcr_libc.pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
		return false;
	p[0] = smcr_sys_fd_high(p[0]);
	p[1] = smcr_sys_fd_high(p[1]);
	if (p[0] < 0 || p[1] < 0 || send_offer(xc->unix_fd, p[0]) < 0) {
		smcr_sys_close(p[0]);
		smcr_sys_close(p[1]);
		return false;
	}
	xc->bell_keep = p[0];
	xc->bell_wr = p[1];
	return true;
}

bool smcr_shm_bell_expected(const struct smcr_xconn *xc)
{
	return xc->bell_rd < 0 && bell_possible(xc);
}

/* The pipe behind `fd`, in a description of our own: the fd, or -1. */
static int reopen_pipe(int fd)
{
	struct stat got, mine;
	char path[32];
	int own;

	if (fstat(fd, &got) < 0 || !S_ISFIFO(got.st_mode))
		return -1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	own = smcr_libc.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (own < 0)
		return -1;
	if (fstat(own, &mine) < 0 || mine.st_dev != got.st_dev || mine.st_ino != got.st_ino) {
		smcr_sys_close(own);
		return -1;
	}
	return smcr_sys_fd_high(own);
}

static void adopt(struct smcr_xconn *xc, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int own = reopen_pipe(fd);

	if (own < 0)
		return;
	ev.data.fd = own;
	if (smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, own, &ev) < 0) {
		smcr_sys_close(own);
		return;
	}
	xc->bell_rd = own;
	/* After the pipe joined the readiness fd: a ring on it wakes us from now on. */
	atomic_store_explicit(&xc->own_ctrl->bell_pipe, 1, memory_order_seq_cst);
	smcr_dbg("shm: the peer rings on a pipe now");
}

void smcr_shm_bell_take(struct smcr_xconn *xc, const void *control, size_t len)
{
	struct smcr_rv_anc anc;

	smcr_rv_anc_parse(control, len, &anc);
	if (anc.nfds == 1 && !anc.extra && xc->bell_rd < 0 && bell_possible(xc))
		adopt(xc, anc.fds[0]);
	for (unsigned i = 0; i < anc.nfds; i++)
		smcr_sys_close(anc.fds[i]);
}

int smcr_shm_bell_drain(struct smcr_xconn *xc)
{
	char buf[8];
	ssize_t n = smcr_libc.read(xc->bell_rd, buf, sizeof(buf));

	if (n == 0)
		return -1;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	return (int)n;
}

void smcr_shm_bell_close(struct smcr_xconn *xc)
{
	smcr_sys_close(xc->bell_wr);
	smcr_sys_close(xc->bell_keep);
	smcr_sys_close(xc->bell_rd);
}
