// SPDX-License-Identifier: MIT
/*
 * splice() between a pipe and an SMC socket (haproxy's `option splice-*`,
 * proxies that forward with pipes).  The kernel would move the bytes of the
 * TCP socket, which carries nothing while the stream runs in the rings: a
 * read would wait forever, a write would put data on TCP that the peer never
 * looks at.  So the bytes go through a buffer here, and none is ever held
 * anywhere but in the pipe or in a ring:
 *   - socket to pipe: what the pipe takes is peeked from the ring first and
 *     consumed only once the pipe has it (a pipe cannot give back what it
 *     refused);
 *   - pipe to socket: no more is read from the pipe than the ring has room
 *     for when the socket must not block.
 * The socket's own O_NONBLOCK decides whether its side may wait, and
 * SPLICE_F_NONBLOCK (or the pipe's O_NONBLOCK) the pipe's, as in the kernel
 * (fs/splice.c).  Sockets that are not SMC, or turn out not to be when their
 * first bytes decide it, get the kernel's splice.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "preload/preload.h"
#include "preload/smc.h"

/* One pass moves at most this much: splice may always return less than asked. */
#define SPLICE_CHUNK (64 * 1024)

static bool is_pipe(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

static ssize_t fail_with(int err)
{
	errno = err;
	return -1;
}

/*
 * Writes what the pipe takes of buf now, waiting (unless `nowait`) only while
 * it takes nothing: splice into a pipe returns what fit, where a write()
 * would wait until all of it fit.  RWF_NOWAIT where the kernel honours it for
 * pipes, else what one free slot surely takes (poll's POLLOUT on a pipe
 * promises PIPE_BUF bytes).
 */
static ssize_t pipe_write(int pipe_fd, const void *buf, size_t len, bool nowait)
{
	struct iovec iov = { (void *)buf, len };
	struct pollfd p = { .fd = pipe_fd, .events = POLLOUT };
	bool nowait_known = true;

	for (;;) {
		ssize_t n = nowait_known ? pwritev2(pipe_fd, &iov, 1, -1, RWF_NOWAIT) : -1;
		int rc;

		if (n >= 0 || (nowait_known && errno != EAGAIN && errno != EOPNOTSUPP &&
			       errno != EINVAL))
			return n;
		if (nowait_known && errno != EAGAIN)
			nowait_known = false;
		else if (nowait)
			return n; /* EAGAIN */
		rc = smcr_real.poll(&p, 1, nowait ? 0 : -1);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return fail_with(EAGAIN);
		if (!nowait_known)
			return smcr_real.write(pipe_fd, buf, len < PIPE_BUF ? len : PIPE_BUF);
	}
}

/* Reads from the pipe without waiting when `nowait` (what is there, or EAGAIN). */
static ssize_t pipe_read(int pipe_fd, void *buf, size_t len, bool nowait)
{
	struct iovec iov = { buf, len };
	struct pollfd p = { .fd = pipe_fd, .events = POLLIN };
	ssize_t n;

	if (!nowait)
		return smcr_real.read(pipe_fd, buf, len);
	n = preadv2(pipe_fd, &iov, 1, -1, RWF_NOWAIT);
	if (n >= 0 || (errno != EOPNOTSUPP && errno != EINVAL))
		return n;
	/* a pipe's read returns what it holds: only an empty one would wait */
	if (smcr_real.poll(&p, 1, 0) == 0)
		return fail_with(EAGAIN);
	return smcr_real.read(pipe_fd, buf, len);
}

static ssize_t sock_recv(int fd, void *buf, size_t len, int flags)
{
	struct iovec iov = { buf, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	return smcr_smc_recvmsg(fd, &msg, flags);
}

static ssize_t sock_send(int fd, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	return smcr_smc_sendmsg(fd, &msg, 0);
}

/* SMC socket (or a socket whose first bytes decide it) to pipe. */
static ssize_t splice_from_socket(int sock, int pipe_fd, size_t len, unsigned int flags,
				  bool *handled)
{
	char buf[SPLICE_CHUNK];
	ssize_t peeked, taken, consumed;

	if (len > sizeof(buf))
		len = sizeof(buf);
	peeked = sock_recv(sock, buf, len, MSG_PEEK);
	if (peeked <= 0 || !smcr_preload_divert_rx(sock)) {
		/* an error, the end, or the socket is TCP now: then its bytes are still in it */
		*handled = peeked <= 0;
		return peeked;
	}
	*handled = true;
	taken = pipe_write(pipe_fd, buf, (size_t)peeked, flags & SPLICE_F_NONBLOCK);
	if (taken <= 0)
		return taken;
	consumed = sock_recv(sock, buf, (size_t)taken, MSG_DONTWAIT);
	/* what was peeked stays until this reader takes it: only a reset takes it away */
	return consumed < 0 ? consumed : taken;
}

/* Pipe to SMC socket. */
static ssize_t splice_to_socket(int pipe_fd, int sock, size_t len, unsigned int flags,
				bool *handled)
{
	char buf[SPLICE_CHUNK];
	size_t room, sent = 0;
	bool nonblock;
	ssize_t got;
	int rc = smcr_smc_send_room(sock, &room, &nonblock);

	*handled = rc != 0;
	if (rc <= 0)
		return rc < 0 ? fail_with(-rc) : 0;
	if (!nonblock || room > sizeof(buf))
		room = sizeof(buf);
	if (room == 0)
		return fail_with(EAGAIN);
	got = pipe_read(pipe_fd, buf, len < room ? len : room, flags & SPLICE_F_NONBLOCK);
	if (got <= 0)
		return got;
	while (sent < (size_t)got) {
		ssize_t n = sock_send(sock, buf + sent, (size_t)got - sent);
		struct pollfd p = { .fd = sock, .events = POLLOUT };

		if (n > 0) {
			sent += (size_t)n;
			continue;
		}
		if (n == 0 || errno != EAGAIN)
			return sent > 0 ? (ssize_t)sent : n;
		/*
		 * The room was measured, so this is only a race with another
		 * writer of the socket: the bytes already left the pipe and
		 * have nowhere else to go.
		 */
		(void)smcr_smc_ppoll(&p, 1, NULL, NULL);
	}
	return (ssize_t)sent;
}

ssize_t smcr_smc_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
			unsigned int flags, bool *handled)
{
	*handled = false;
	if (len == 0)
		return 0;
	/* A socket has no offset, and the other end must be a pipe: the kernel says why not. */
	if (smcr_preload_divert_rx(fd_in) && !off_in && !off_out && is_pipe(fd_out))
		return splice_from_socket(fd_in, fd_out, len, flags, handled);
	if (smcr_preload_divert(fd_out) && !off_in && !off_out && is_pipe(fd_in))
		return splice_to_socket(fd_in, fd_out, len, flags, handled);
	return 0;
}
