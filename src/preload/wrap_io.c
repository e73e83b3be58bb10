/* SPDX-License-Identifier: MIT */
/*
 * The data path: read/readv/write/writev, send/sendto/sendmsg/sendmmsg,
 * recv/recvfrom/recvmsg/recvmmsg, sendfile, splice, and glibc's _FORTIFY_SOURCE
 * variants (__read_chk, __recv_chk, __recvfrom_chk).
 *
 * Every wrapper has the same shape, and this is the whole cost the
 * library adds to plain TCP: the ready flag (one load, predicted), one
 * acquire load of the fd's slot (plus the entry's mode for a tracked
 * socket), a branch that is almost never taken, and a tail call into libc.
 * No lock, no allocation, no system call: about 20 instructions per call
 * (callgrind, recv on a tracked TCP socket).
 *
 * The taken branch funnels every call into divert_recvmsg() or
 * divert_sendmsg(), where the engine's SMC data path plugs in (smc_data.c): an
 * SMC socket's data goes to the engine, a candidate is classified first,
 * anything else reaches the kernel socket with recvmsg/sendmsg, which is
 * what read/write/send/recv mean on a stream socket
 * (tests/preload/test_divert.c checks that).
 */
#include <fcntl.h> /* splice */
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "preload/handoff.h"
#include "preload/preload.h"
#include "smcr/decline.h"

/* glibc's fortify entry points; declared only under _FORTIFY_SOURCE. */
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *addrlen);
void __chk_fail(void) __attribute__((noreturn));

/*
 * The engine's receive entry point (see above).  MSG_ERRQUEUE reads the
 * socket's error queue (timestamps, zero-copy completions, ICMP errors) and
 * MSG_OOB the urgent byte, never the stream: both are the kernel socket's,
 * whatever carries the data (urgent data only ever travels on TCP: see
 * send_urgent()).
 */
static ssize_t recv_discard(int fd, struct msghdr *msg, int flags);

static SMCR_COLD __attribute__((noinline)) ssize_t divert_recvmsg(int fd, struct msghdr *msg,
								   int flags)
{
	if (flags & (MSG_ERRQUEUE | MSG_OOB))
		return smcr_real.recvmsg(fd, msg, flags);
	if (flags & MSG_TRUNC)
		return recv_discard(fd, msg, flags);
	return smcr_smc_recvmsg(fd, msg, flags);
}

/*
 * MSG_TRUNC on a TCP socket discards the bytes instead of copying them (the
 * buffer may be NULL): as many as the buffers would have held, the way a
 * read would have returned them, through a scratch buffer here.
 */
static SMCR_COLD __attribute__((noinline)) ssize_t recv_discard(int fd, struct msghdr *msg,
								int flags)
{
	char scratch[16384];
	struct iovec iov = { scratch, 0 };
	struct msghdr one = { .msg_iov = &iov, .msg_iovlen = 1 };
	size_t want = 0, done = 0;

	for (size_t i = 0; i < msg->msg_iovlen; i++)
		want += msg->msg_iov[i].iov_len;
	flags &= ~MSG_TRUNC;
	do {
		ssize_t n;

		iov.iov_len = want - done < sizeof(scratch) ? want - done : sizeof(scratch);
		n = smcr_smc_recvmsg(fd, &one, flags);
		if (n <= 0)
			return done > 0 ? (ssize_t)done : n;
		done += (size_t)n;
		/* a peek sees the same bytes again: one look is its answer */
		if (flags & MSG_PEEK)
			break;
		if (!(flags & MSG_WAITALL))
			flags |= MSG_DONTWAIT;
	} while (done < want);
	msg->msg_flags = 0;
	return (ssize_t)done;
}

static ssize_t send_urgent(int fd, const struct msghdr *msg, int flags);

/* The engine's send entry point (see above). */
static SMCR_COLD __attribute__((noinline)) ssize_t divert_sendmsg(int fd, const struct msghdr *msg,
								   int flags)
{
	if (flags & MSG_OOB)
		return send_urgent(fd, msg, flags);
	return smcr_smc_sendmsg(fd, msg, flags);
}

/*
 * Urgent data has no place in an SMC ring (docs/protocol.md §6.7), and sent
 * in band its byte would land in the peer's stream.  So the connection goes
 * on over TCP first (both ends, from where the stream had got to; against
 * the kernel's SMC, which cannot, it ends as a reset both ends see), and the
 * kernel sends the urgent byte as it does on TCP.  Settled first as any
 * write would be: a connection still undecided may turn out SMC.
 */
static SMCR_COLD __attribute__((noinline)) ssize_t send_urgent(int fd, const struct msghdr *msg,
								int flags)
{
	struct smcr_fd_entry *e;
	bool nonblock;
	size_t room;
	int rc = smcr_smc_send_room(fd, &room, &nonblock);

	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	e = rc > 0 ? smcr_fdtab_get(fd) : NULL;
	if (e) {
		smcr_smc_continue_on_tcp(fd, e, SMCR_CLC_DECL_OOB, "urgent data (MSG_OOB)");
		smcr_fdtab_put(e);
	}
	return smcr_real.sendmsg(fd, msg, flags);
}

static SMCR_COLD __attribute__((noinline)) ssize_t
divert_recv(int fd, const struct iovec *iov, int iovcnt, int flags, struct sockaddr *addr,
	    socklen_t *addrlen)
{
	struct msghdr msg = {
		.msg_name = addr,
		.msg_namelen = addrlen ? *addrlen : 0,
		.msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)iovcnt,
	};
	ssize_t ret = divert_recvmsg(fd, &msg, flags);

	if (ret >= 0 && addrlen)
		*addrlen = msg.msg_namelen;
	return ret;
}

static SMCR_COLD __attribute__((noinline)) ssize_t
divert_send(int fd, const struct iovec *iov, int iovcnt, int flags,
	    const struct sockaddr *addr, socklen_t addrlen)
{
	struct msghdr msg = {
		.msg_name = (struct sockaddr *)addr,
		.msg_namelen = addrlen,
		.msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)iovcnt,
	};

	return divert_sendmsg(fd, &msg, flags);
}

/*
 * Single-buffer forms. They build the iovec themselves so that the
 * wrappers keep no locals: no stack frame, no stack-protector check, just
 * a tail call on the hot path.
 */
static SMCR_COLD __attribute__((noinline)) ssize_t
divert_recv_buf(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
		socklen_t *addrlen)
{
	struct iovec iov = { buf, len };

	return divert_recv(fd, &iov, 1, flags, addr, addrlen);
}

static SMCR_COLD __attribute__((noinline)) ssize_t
divert_send_buf(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr,
		socklen_t addrlen)
{
	struct iovec iov = { (void *)buf, len };

	return divert_send(fd, &iov, 1, flags, addr, addrlen);
}

/* ---- receive ---------------------------------------------------------- */

SMCR_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	smcr_preload_enter();
	if (smcr_preload_divert_rx(fd))
		return divert_recv_buf(fd, buf, len, 0, NULL, NULL);
	return smcr_real.read(fd, buf, len);
}

SMCR_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	smcr_preload_enter();
	if (smcr_preload_divert_rx(fd)) {
		if (len > buflen)
			__chk_fail();
		return divert_recv_buf(fd, buf, len, 0, NULL, NULL);
	}
	SMCR_REAL_OR_ENOSYS(__read_chk);
	return smcr_real.__read_chk(fd, buf, len, buflen);
}

SMCR_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	smcr_preload_enter();
	if (smcr_preload_divert_rx(fd))
		return divert_recv(fd, iov, iovcnt, 0, NULL, NULL);
	return smcr_real.readv(fd, iov, iovcnt);
}

SMCR_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	smcr_preload_enter();
	if (smcr_preload_divert_rx(fd))
		return divert_recv_buf(fd, buf, len, flags, NULL, NULL);
	return smcr_real.recv(fd, buf, len, flags);
}

SMCR_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	smcr_preload_enter();
	if (smcr_preload_divert_rx(fd)) {
		if (len > buflen)
			__chk_fail();
		return divert_recv_buf(fd, buf, len, flags, NULL, NULL);
	}
	SMCR_REAL_OR_ENOSYS(__recv_chk);
	return smcr_real.__recv_chk(fd, buf, len, buflen, flags);
}

SMCR_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
			     socklen_t *addrlen)
{
	smcr_preload_enter();
	if (smcr_preload_divert_rx(fd))
		return divert_recv_buf(fd, buf, len, flags, addr, addrlen);
	return smcr_real.recvfrom(fd, buf, len, flags, addr, addrlen);
}

SMCR_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
				   struct sockaddr *addr, socklen_t *addrlen)
{
	smcr_preload_enter();
	if (smcr_preload_divert_rx(fd)) {
		if (len > buflen)
			__chk_fail();
		return divert_recv_buf(fd, buf, len, flags, addr, addrlen);
	}
	SMCR_REAL_OR_ENOSYS(__recvfrom_chk);
	return smcr_real.__recvfrom_chk(fd, buf, len, buflen, flags, addr, addrlen);
}

SMCR_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	smcr_preload_enter();
	if (smcr_preload_divert_rx(fd))
		return divert_recvmsg(fd, msg, flags);
	return smcr_real.recvmsg(fd, msg, flags);
}

/*
 * The mmsg forms on an SMC socket: one message after the other, as a stream
 * socket fills them (the first blocks unless MSG_DONTWAIT, the rest do not;
 * the timeout is not applied).
 */
static SMCR_COLD __attribute__((noinline)) int divert_mmsg(int fd, struct mmsghdr *vec,
							    unsigned int vlen, int flags, bool send)
{
	unsigned int i;

	for (i = 0; i < vlen; i++) {
		int f = i ? flags | MSG_DONTWAIT : flags;
		ssize_t n = send ? divert_sendmsg(fd, &vec[i].msg_hdr, f)
				 : divert_recvmsg(fd, &vec[i].msg_hdr, f);

		if (n < 0) {
			if (i == 0)
				return -1;
			break;
		}
		vec[i].msg_len = (unsigned int)n;
		if (n == 0)
			break;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
	}
	return (int)i;
}

SMCR_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
			 struct timespec *timeout)
{
	smcr_preload_enter();
	if (smcr_preload_divert_rx(fd))
		return divert_mmsg(fd, vec, vlen, flags, false);
	SMCR_REAL_OR_ENOSYS(recvmmsg);
	return smcr_real.recvmmsg(fd, vec, vlen, flags, timeout);
}

/* ---- send ------------------------------------------------------------- */

SMCR_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	smcr_preload_enter();
	if (smcr_preload_divert(fd))
		return divert_send_buf(fd, buf, len, 0, NULL, 0);
	return smcr_real.write(fd, buf, len);
}

SMCR_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	smcr_preload_enter();
	if (smcr_preload_divert(fd))
		return divert_send(fd, iov, iovcnt, 0, NULL, 0);
	return smcr_real.writev(fd, iov, iovcnt);
}

SMCR_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	smcr_preload_enter();
	if (smcr_preload_divert(fd))
		return divert_send_buf(fd, buf, len, flags, NULL, 0);
	return smcr_real.send(fd, buf, len, flags);
}

SMCR_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			   const struct sockaddr *addr, socklen_t addrlen)
{
	smcr_preload_enter();
	if (smcr_preload_divert(fd))
		return divert_send_buf(fd, buf, len, flags, addr,
				   addrlen);
	return smcr_real.sendto(fd, buf, len, flags, addr, addrlen);
}

/* fds passed over a UNIX socket: what their new owner cannot know is settled first. */
static SMCR_COLD __attribute__((noinline)) void before_passing(const struct msghdr *msg)
{
	if (smcr_preload_tracking())
		smcr_handoff_before_send_fds(msg);
}

SMCR_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	smcr_preload_enter();
	if (unlikely(msg && msg->msg_controllen))
		before_passing(msg);
	if (smcr_preload_divert(fd))
		return divert_sendmsg(fd, msg, flags);
	return smcr_real.sendmsg(fd, msg, flags);
}

SMCR_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	smcr_preload_enter();
	for (unsigned int i = 0; vec && i < vlen; i++)
		if (unlikely(vec[i].msg_hdr.msg_controllen))
			before_passing(&vec[i].msg_hdr);
	if (smcr_preload_divert(fd))
		return divert_mmsg(fd, vec, vlen, flags, true);
	SMCR_REAL_OR_ENOSYS(sendmmsg);
	return smcr_real.sendmmsg(fd, vec, vlen, flags);
}

/*
 * sendfile into an SMC socket is a copy loop (the kernel cannot splice into
 * our ring); off_t is 64 bits here, so sendfile64 is the same call.
 */
static SMCR_COLD __attribute__((noinline)) ssize_t
divert_sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	bool handled;
	ssize_t n = smcr_smc_sendfile(out_fd, in_fd, offset, count, &handled);

	return handled ? n : smcr_real.sendfile(out_fd, in_fd, offset, count);
}

SMCR_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	smcr_preload_enter();
	if (smcr_preload_divert(out_fd))
		return divert_sendfile(out_fd, in_fd, offset, count);
	return smcr_real.sendfile(out_fd, in_fd, offset, count);
}

/* splice with an SMC socket on one side goes through a buffer (smc_splice.c). */
static SMCR_COLD __attribute__((noinline)) ssize_t
divert_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
	      unsigned int flags)
{
	bool handled;
	ssize_t n = smcr_smc_splice(fd_in, off_in, fd_out, off_out, len, flags, &handled);

	if (handled)
		return n;
	SMCR_REAL_OR_ENOSYS(splice);
	return smcr_real.splice(fd_in, off_in, fd_out, off_out, len, flags);
}

SMCR_EXPORT ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
			   unsigned int flags)
{
	smcr_preload_enter();
	if (smcr_preload_divert_rx(fd_in) || smcr_preload_divert(fd_out))
		return divert_splice(fd_in, off_in, fd_out, off_out, len, flags);
	SMCR_REAL_OR_ENOSYS(splice);
	return smcr_real.splice(fd_in, off_in, fd_out, off_out, len, flags);
}

_Static_assert(sizeof(off_t) == sizeof(off64_t), "sendfile64 shares sendfile's SMC path");

SMCR_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	smcr_preload_enter();
	if (smcr_preload_divert(out_fd))
		return divert_sendfile(out_fd, in_fd, (off_t *)offset, count);
	SMCR_REAL_OR_ENOSYS(sendfile64);
	return smcr_real.sendfile64(out_fd, in_fd, offset, count);
}
