/* SPDX-License-Identifier: MIT */
/*
 * The calls on an SMC socket (smc.h "data"): recvmsg, sendmsg, sendfile,
 * the room a splice may fill (smc_splice.c), shutdown and the socket
 * options and ioctls whose answer is the engine's rather than the kernel's.  Each first settles a candidate (smc.c
 * smcr_smc_settle), then either hands the call to the engine or tells the
 * wrapper to make the kernel's.  Kept apart from the decision because this
 * is the path every byte of an SMC connection takes: once decided, a call
 * costs one fd table lookup before the engine.
 *
 * errno belongs to the application: engine calls return -errno, which
 * fail() turns into the wrapper's -1 and errno.
 */
#include <errno.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

/* fcntl(F_SETFL) and ioctl(FIONBIO) (wrap_fd.c): the O_NONBLOCK that wants_nonblock() reads. */
void smcr_smc_set_nonblock(int fd, bool on)
{
	struct smcr_fd_entry *e = smcr_fdtab_peek(fd);

	if (!e || !smcr_preload_table_writable())
		return;
	if (on)
		atomic_fetch_or_explicit(&e->flags, SMCR_FD_F_NONBLOCK, memory_order_relaxed);
	else
		atomic_fetch_and_explicit(&e->flags, ~SMCR_FD_F_NONBLOCK, memory_order_relaxed);
}

static bool wants_nonblock(const struct smcr_fd_entry *e, int flags)
{
	return (flags & MSG_DONTWAIT) || (smcr_fd_entry_flags(e) & SMCR_FD_F_NONBLOCK);
}

/*
 * The connection went on over TCP (engine tcp_tail.c) and nothing of its
 * rings is left: from now on the socket is the application's TCP socket
 * again, its epoll registrations on it; the engine's part stays attached
 * until the close (smcr_smc_release_entry), which says nothing more to the peer.
 */
static SMCR_COLD __attribute__((noinline)) void smc_now_tcp(int fd, struct smcr_fd_entry *e,
							    struct smcr_sock *s)
{
	if (!smcr_smc_decision_lock(e))
		return;
	if (smcr_fd_entry_mode(e) == SMCR_FD_SMC && atomic_load(&e->sock) == s) {
		smcr_smc_epoll_leave_doorbell(e, s);
		if (e->peek_off >= 0) {
			/* the kernel's peeks go on from where the engine's got to */
			e->peek_off = smcr_sock_peek_off(s);
			(void)smcr_real.setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &e->peek_off,
						   sizeof(e->peek_off));
		}
		e->fallback_reason = SMCR_CLC_DECL_HANDOFF;
		atomic_store_explicit(&e->mode, SMCR_FD_FALLBACK, memory_order_release);
		smcr_dbg("fd %d: SMC connection goes on as plain TCP", fd);
	}
	smcr_smc_decision_unlock(e);
}

/*
 * The entry of an SMC socket (reference taken) after settling a candidate, or
 * NULL: then *ret says what to do: 0 = the kernel's call, < 0 = fail with it.
 */
static struct smcr_fd_entry *acquire(int fd, enum smcr_io_kind kind, int flags,
				     struct smcr_sock **sock, int *ret)
{
	struct smcr_fd_entry *e = smcr_fdtab_get(fd);

	*ret = 0;
	*sock = NULL;
	if (!e)
		return NULL;
	if (smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE) {
		*ret = smcr_smc_settle(fd, e, kind, !wants_nonblock(e, flags));
		if (*ret < 0) {
			smcr_fdtab_put(e);
			return NULL;
		}
	}
	if (smcr_smc_inherited(e)) {
		/* Inherited across fork, not held here (SMC-R), and it could not go on over TCP. */
		*ret = -ECONNRESET;
		smcr_fdtab_put(e);
		return NULL;
	}
	*sock = smcr_smc_sock_of(e);
	if (*sock && smcr_sock_tcp_only(*sock)) {
		smc_now_tcp(fd, e, *sock);
		*sock = NULL;
	}
	if (!*sock) {
		smcr_fdtab_put(e);
		return NULL;
	}
	return e;
}

static ssize_t fail(ssize_t rc)
{
	errno = (int)-rc;
	return -1;
}

/*
 * TCP_INQ: the bytes left after this read, in a TCP_CM_INQ message, as the
 * kernel's put_cmsg() writes it (truncated, with MSG_CTRUNC, where the room
 * is short); msg_controllen becomes the room used.
 */
static SMCR_COLD __attribute__((noinline)) void put_inq(struct msghdr *msg, struct smcr_sock *s)
{
	struct cmsghdr cm = { .cmsg_len = CMSG_LEN(sizeof(int)), .cmsg_level = SOL_TCP,
			      .cmsg_type = TCP_CM_INQ };
	size_t room = msg->msg_controllen;
	int inq;

	msg->msg_controllen = 0;
	if (!msg->msg_control || room < sizeof(cm)) {
		msg->msg_flags |= MSG_CTRUNC;
		return;
	}
	smcr_guard_enter();
	inq = smcr_sock_inq(s);
	smcr_guard_leave();
	if (room < cm.cmsg_len) {
		msg->msg_flags |= MSG_CTRUNC;
		cm.cmsg_len = room;
	}
	memcpy(msg->msg_control, &cm, sizeof(cm));
	memcpy(CMSG_DATA((struct cmsghdr *)msg->msg_control), &inq,
	       cm.cmsg_len - CMSG_LEN(0) < sizeof(inq) ? cm.cmsg_len - CMSG_LEN(0) : sizeof(inq));
	msg->msg_controllen = room < CMSG_SPACE(sizeof(int)) ? room : CMSG_SPACE(sizeof(int));
}

/*
 * An accepted connection's first read, when it can be the server's look at
 * the client's first bytes (smc_server.c): a connection that stays TCP then
 * costs the server no system call more than plain TCP's read.
 */
static ssize_t first_read(int fd, struct msghdr *msg, int flags, bool *taken)
{
	struct smcr_fd_entry *e = smcr_fdtab_get(fd);
	ssize_t n;

	*taken = false;
	if (!e)
		return 0;
	if (wants_nonblock(e, flags))
		flags |= MSG_DONTWAIT;
	n = smcr_smc_server_first_read(fd, e, msg, flags, taken);
	smcr_fdtab_put(e);
	return n;
}

ssize_t smcr_smc_recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct smcr_sock *s;
	struct smcr_fd_entry *e;
	ssize_t n;
	int ret;

	e = smcr_fdtab_peek(fd);
	if (e && smcr_fd_entry_mode(e) == SMCR_FD_SCREEN)
		return smcr_smc_screen_recvmsg(fd, msg, flags);
	if (e && smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE &&
	    (smcr_fd_entry_flags(e) & SMCR_FD_F_ACCEPTED)) {
		bool taken;

		n = first_read(fd, msg, flags, &taken);
		if (taken)
			return n < 0 ? fail(n) : n;
	}
	e = acquire(fd, SMCR_IO_READ, flags, &s, &ret);
	if (!e)
		return ret < 0 ? fail(ret) : smcr_real.recvmsg(fd, msg, flags);
	if (wants_nonblock(e, flags))
		flags |= MSG_DONTWAIT;
	smcr_guard_enter();
	n = smcr_sock_recvv(s, msg->msg_iov, (int)msg->msg_iovlen,
			    flags & (MSG_PEEK | MSG_WAITALL | MSG_DONTWAIT | MSG_OOB));
	smcr_guard_leave();
	/* A stream socket has no sender address; its only control data is TCP_INQ's. */
	if (n >= 0) {
		msg->msg_namelen = 0;
		msg->msg_flags = 0;
		if (unlikely(smcr_fd_entry_flags(e) & SMCR_FD_F_INQ))
			put_inq(msg, s);
		else
			msg->msg_controllen = 0;
	}
	smcr_fdtab_put(e);
	smcr_smc_note_io(fd);
	return n < 0 ? fail(n) : n;
}

ssize_t smcr_smc_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct smcr_sock *s;
	struct smcr_fd_entry *e;
	ssize_t n;
	int ret;

	e = acquire(fd, SMCR_IO_WRITE, flags, &s, &ret);
	if (!e)
		return ret < 0 ? fail(ret) : smcr_real.sendmsg(fd, msg, flags);
	if (wants_nonblock(e, flags))
		flags |= MSG_DONTWAIT;
	smcr_guard_enter();
	n = smcr_sock_sendv(s, msg->msg_iov, (int)msg->msg_iovlen,
			    flags & (MSG_DONTWAIT | MSG_NOSIGNAL));
	smcr_guard_leave();
	smcr_fdtab_put(e);
	smcr_smc_note_io(fd);
	if (n == -EPIPE && !(flags & MSG_NOSIGNAL))
		raise(SIGPIPE); /* as the kernel does for a stream socket */
	return n < 0 ? fail(n) : n;
}

ssize_t smcr_smc_sendfile(int out_fd, int in_fd, off_t *offset, size_t count, bool *handled)
{
	char buf[64 * 1024];
	struct smcr_sock *s;
	struct smcr_fd_entry *e;
	off_t pos;
	size_t done = 0;
	int ret, flags = MSG_NOSIGNAL;

	*handled = false;
	e = acquire(out_fd, SMCR_IO_WRITE, 0, &s, &ret);
	if (!e) {
		if (ret < 0) {
			*handled = true;
			return fail(ret);
		}
		return 0;
	}
	*handled = true;
	if (wants_nonblock(e, 0))
		flags |= MSG_DONTWAIT;
	pos = offset ? *offset : lseek(in_fd, 0, SEEK_CUR);
	if (pos < 0) {
		ret = -errno;
		smcr_fdtab_put(e);
		return fail(ret);
	}
	while (done < count) {
		size_t want = count - done < sizeof(buf) ? count - done : sizeof(buf);
		ssize_t got = pread(in_fd, buf, want, pos), sent;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			ret = got < 0 ? -errno : 0;
			break;
		}
		smcr_guard_enter();
		sent = smcr_sock_send(s, buf, (size_t)got, flags);
		smcr_guard_leave();
		if (sent < 0) {
			ret = (int)sent;
			break;
		}
		pos += sent;
		done += (size_t)sent;
		if (sent < got)
			break; /* non-blocking and the ring is full */
	}
	smcr_fdtab_put(e);
	if (offset)
		*offset = pos;
	else
		lseek(in_fd, pos, SEEK_SET);
	if (done > 0)
		return (ssize_t)done;
	if (ret == -EPIPE)
		raise(SIGPIPE);
	return ret < 0 ? fail(ret) : 0;
}

int smcr_smc_send_room(int fd, size_t *room, bool *nonblock)
{
	struct smcr_sock *s;
	struct smcr_fd_entry *e;
	size_t size, unacked;
	int ret;

	e = acquire(fd, SMCR_IO_WRITE, 0, &s, &ret);
	if (!e)
		return ret;
	*nonblock = wants_nonblock(e, 0);
	smcr_guard_enter();
	size = smcr_sock_sndbuf(s);
	unacked = smcr_sock_unacked_bytes(s);
	smcr_guard_leave();
	smcr_fdtab_put(e);
	*room = unacked < size ? size - unacked : 0;
	return 1;
}

/* ---- socket calls on SMC sockets ------------------------------------------ */

int smcr_smc_shutdown(int fd, int how, bool *handled)
{
	struct smcr_sock *s;
	struct smcr_fd_entry *e;
	int rc, ret;

	*handled = false;
	/* Shutting down writing before any I/O counts as the server's first word. */
	e = acquire(fd, SMCR_IO_WRITE, MSG_DONTWAIT, &s, &ret);
	if (!e)
		return 0;
	*handled = true;
	smcr_guard_enter();
	rc = smcr_sock_shutdown(s, how);
	smcr_guard_leave();
	smcr_fdtab_put(e);
	return rc < 0 ? (int)fail(rc) : 0;
}

/* As Linux's getsockopt: a shorter room takes the first bytes of the int. */
static int put_int(void *value, socklen_t *len, int v)
{
	socklen_t n;

	if (!len) {
		errno = EFAULT;
		return -1;
	}
	if ((int)*len < 0) {
		errno = EINVAL;
		return -1;
	}
	n = *len < (socklen_t)sizeof(int) ? *len : (socklen_t)sizeof(int);
	if (n && !value) {
		errno = EFAULT;
		return -1;
	}
	if (n)
		memcpy(value, &v, n);
	*len = n;
	return 0;
}

int smcr_smc_getsockopt(int fd, int level, int name, void *value, socklen_t *len,
			bool *handled)
{
	struct smcr_fd_entry *e;
	struct smcr_sock *s;
	int v, rc;

	*handled = false;
	if (level != SOL_SOCKET || (name != SO_ERROR && name != SO_RCVBUF && name != SO_SNDBUF &&
				    name != SO_RCVLOWAT && name != SO_PEEK_OFF))
		return 0;
	e = smcr_fdtab_get(fd);
	if (!e)
		return 0;
	if (name == SO_RCVLOWAT) {
		/* The program's, even while a handshake has its own on the socket. */
		*handled = true;
		rc = put_int(value, len, e->rcvlowat ? e->rcvlowat : 1);
		smcr_fdtab_put(e);
		return rc;
	}
	s = smcr_smc_sock_of(e);
	if (s) {
		smcr_guard_enter();
		if (name == SO_ERROR)
			v = smcr_sock_take_error(s);
		else if (name == SO_RCVBUF)
			v = (int)smcr_sock_rcvbuf(s);
		else if (name == SO_PEEK_OFF)
			v = smcr_sock_peek_off(s);
		else
			v = (int)smcr_sock_sndbuf(s);
		smcr_guard_leave();
		*handled = true;
		rc = put_int(value, len, v);
		smcr_fdtab_put(e);
		return rc;
	}
	smcr_fdtab_put(e);
	return 0;
}

/*
 * SO_ZEROCOPY: the program will send with MSG_ZEROCOPY and wait on the error
 * queue for the kernel to say each send's pages are free again.  Only the
 * kernel's TCP says so, so the connection stays TCP (decided later: its flag;
 * a listener's accepted sockets inherit it, as the kernel's option).  An SMC
 * connection already running on one host goes on over TCP from here; over
 * SMC-R it stays SMC (a Linux peer could not follow onto TCP), its sends
 * copied at once and no completion ever reported.
 */
static void zerocopy_on(int fd, struct smcr_fd_entry *e)
{
	struct smcr_sock *s = smcr_smc_sock_of(e);

	smcr_smc_add_flags(e, SMCR_FD_F_ZEROCOPY);
	if (!s)
		return;
	if (smcr_sock_same_host(s))
		smcr_smc_continue_on_tcp(fd, e, SMCR_CLC_DECL_ZEROCOPY,
					 "SO_ZEROCOPY: MSG_ZEROCOPY completions are TCP's");
	else
		smcr_info("fd %d: SO_ZEROCOPY on an SMC-R connection: its MSG_ZEROCOPY sends are"
			  " copied, and no completion is reported", fd);
}

/*
 * Timestamps: the kernel's TCP stamps each segment as it arrives
 * (SO_TIMESTAMP, SO_TIMESTAMPNS, SO_TIMESTAMPING's receive flags, one
 * control message a read) and reports its sends' on the error queue
 * (SO_TIMESTAMPING's send flags).  Data in a ring has no segment, and a
 * time taken when the library copies it out would hide exactly the wait in
 * the queue these stamps measure.  So the connection stays TCP (decided
 * later: its flag, inherited by accepted sockets as the kernel's flags
 * are); a same-host SMC connection already running goes on over TCP from
 * here; over SMC-R it stays SMC (a Linux peer could not follow onto TCP)
 * and its reads carry no stamp.
 * The kernel says whether any stamp is still on: turning one off may turn
 * off another.
 */
#define TSTAMP_ON_FLAGS                                                                        \
	(SOF_TIMESTAMPING_TX_HARDWARE | SOF_TIMESTAMPING_TX_SOFTWARE |                         \
	 SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RX_SOFTWARE |                         \
	 SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_RAW_HARDWARE |                           \
	 SOF_TIMESTAMPING_TX_SCHED | SOF_TIMESTAMPING_TX_ACK)

static bool is_timestamp_option(int name)
{
	return name == SO_TIMESTAMP_OLD || name == SO_TIMESTAMPNS_OLD ||
	       name == SO_TIMESTAMPING_OLD || name == SO_TIMESTAMP_NEW ||
	       name == SO_TIMESTAMPNS_NEW || name == SO_TIMESTAMPING_NEW;
}

static int kernel_int_option(int fd, int name)
{
	int v = 0;
	socklen_t len = sizeof(v);

	return smcr_real.getsockopt(fd, SOL_SOCKET, name, &v, &len) == 0 ? v : 0;
}

static bool timestamps_on(int fd)
{
	return kernel_int_option(fd, SO_TIMESTAMP_OLD) ||
	       kernel_int_option(fd, SO_TIMESTAMPNS_OLD) ||
	       (kernel_int_option(fd, SO_TIMESTAMPING_OLD) & TSTAMP_ON_FLAGS);
}

static void timestamps_set(int fd, struct smcr_fd_entry *e)
{
	struct smcr_sock *s;

	if (!timestamps_on(fd)) {
		smcr_smc_clear_flags(e, SMCR_FD_F_TIMESTAMP);
		return;
	}
	smcr_smc_add_flags(e, SMCR_FD_F_TIMESTAMP);
	s = smcr_smc_sock_of(e);
	if (!s)
		return;
	if (smcr_sock_same_host(s))
		smcr_smc_continue_on_tcp(fd, e, SMCR_CLC_DECL_TIMESTAMP,
					 "timestamps: only TCP's segments carry them");
	else
		smcr_info("fd %d: timestamps on an SMC-R connection: its reads carry none", fd);
}

uint32_t smcr_smc_option_keeps_tcp(const struct smcr_fd_entry *e, const char **why)
{
	unsigned flags = smcr_fd_entry_flags(e);
	const char *text = NULL;
	uint32_t reason = 0;

	if (flags & SMCR_FD_F_ZEROCOPY) {
		reason = SMCR_CLC_DECL_ZEROCOPY;
		text = "SO_ZEROCOPY is on";
	} else if (flags & SMCR_FD_F_TIMESTAMP) {
		reason = SMCR_CLC_DECL_TIMESTAMP;
		text = "timestamps are on";
	}
	if (why)
		*why = text;
	return reason;
}

/*
 * SO_RCVLOWAT: what the kernel took (it caps the value) is the program's,
 * remembered apart from the kernel's socket, which a handshake borrows.
 */
static void rcvlowat_set(int fd, struct smcr_fd_entry *e)
{
	struct smcr_sock *s;
	int v = kernel_int_option(fd, SO_RCVLOWAT);

	e->rcvlowat = v > 0 ? v : 1;
	if (smcr_fd_entry_flags(e) & SMCR_FD_F_LOWAT_LENT)
		smcr_smc_read_options_lend(fd, e); /* a decision under way reads on with 1 */
	s = smcr_smc_sock_of(e);
	if (s) {
		smcr_guard_enter();
		smcr_sock_set_rcvlowat(s, e->rcvlowat);
		smcr_guard_leave();
	}
}

/* SO_PEEK_OFF: the engine's peeks follow it on an SMC connection. */
static void peek_off_set(int fd, struct smcr_fd_entry *e, const void *value, socklen_t len)
{
	struct smcr_sock *s;
	int v = -1;

	memcpy(&v, value, len < (socklen_t)sizeof(v) ? len : sizeof(v));
	e->peek_off = v;
	if (smcr_fd_entry_flags(e) & SMCR_FD_F_LOWAT_LENT)
		smcr_smc_read_options_lend(fd, e); /* a decision under way peeks as before */
	s = smcr_smc_sock_of(e);
	if (s) {
		smcr_guard_enter();
		smcr_sock_set_peek_off(s, v);
		smcr_guard_leave();
	}
}

static void flag_set(struct smcr_fd_entry *e, unsigned flag, const void *value, socklen_t len)
{
	int v = 0;

	memcpy(&v, value, len < (socklen_t)sizeof(v) ? len : sizeof(v));
	if (v)
		smcr_smc_add_flags(e, flag);
	else
		smcr_smc_clear_flags(e, flag);
}

/* Options the library keeps for itself beside the kernel's: true if `name` was one. */
static bool remember_option(int fd, int level, int name, const void *value, socklen_t len)
{
	struct smcr_fd_entry *e;
	bool lowat = level == SOL_SOCKET && name == SO_RCVLOWAT,
	     tstamp = level == SOL_SOCKET && is_timestamp_option(name),
	     peek_off = level == SOL_SOCKET && name == SO_PEEK_OFF && value && len > 0,
	     inq = level == IPPROTO_TCP && name == TCP_INQ && value && len > 0;

	if (!lowat && !tstamp && !peek_off && !inq)
		return false;
	e = smcr_fdtab_get(fd);
	if (!e)
		return true;
	if (lowat)
		rcvlowat_set(fd, e);
	else if (tstamp)
		timestamps_set(fd, e);
	else if (peek_off)
		peek_off_set(fd, e, value, len);
	else
		flag_set(e, SMCR_FD_F_INQ, value, len);
	smcr_fdtab_put(e);
	return true;
}

/*
 * SO_LINGER with a zero timeout makes close() abortive: TCP sends an RST and
 * the peer reads ECONNRESET, which proxies and servers use to say "this
 * stream is cut short" (haproxy's nolinger, nginx's reset_timedout_connection).
 * An SMC connection's close must say the same (smc_close.c).
 */
static void linger_set(int fd, const struct linger *l)
{
	struct smcr_fd_entry *e = smcr_fdtab_get(fd);

	if (!e)
		return;
	if (l->l_onoff && l->l_linger == 0)
		smcr_smc_add_flags(e, SMCR_FD_F_LINGER_ZERO);
	else
		smcr_smc_clear_flags(e, SMCR_FD_F_LINGER_ZERO);
	smcr_fdtab_put(e);
}

/* Both layouts of both timeouts (the _NEW ones: 64-bit time on 32-bit programs). */
static bool is_timeout_option(int name)
{
	return name == SO_RCVTIMEO_OLD || name == SO_SNDTIMEO_OLD || name == SO_RCVTIMEO_NEW ||
	       name == SO_SNDTIMEO_NEW;
}

/*
 * Any tracked socket, whatever its mode (a listener's passes to the sockets
 * it accepts): once a timeout is set, it is asked of the kernel
 * (smcr_smc_timeval_ms).
 */
void smcr_smc_note_setsockopt(int fd, int level, int name)
{
	struct smcr_fd_entry *e;

	if (level != SOL_SOCKET || !is_timeout_option(name))
		return;
	e = smcr_fdtab_get(fd);
	if (e) {
		smcr_smc_clear_flags(e, SMCR_FD_F_NO_TIMEO);
		smcr_fdtab_put(e);
	}
}

void smcr_smc_after_setsockopt(int fd, int level, int name, const void *value, socklen_t len)
{
	struct smcr_fd_entry *e;
	struct smcr_sock *s;

	if (level == SOL_SOCKET && name == SO_LINGER && value &&
	    len >= (socklen_t)sizeof(struct linger)) {
		linger_set(fd, value);
		return;
	}
	if (remember_option(fd, level, name, value, len))
		return;
	if (level == SOL_SOCKET && name == SO_ZEROCOPY && value && len >= (socklen_t)sizeof(int) &&
	    *(const int *)value) {
		e = smcr_fdtab_get(fd);
		if (e) {
			zerocopy_on(fd, e);
			smcr_fdtab_put(e);
		}
		return;
	}
	if (level != SOL_SOCKET || !is_timeout_option(name))
		return;
	e = smcr_fdtab_get(fd);
	if (!e)
		return;
	s = smcr_smc_sock_of(e);
	if (s) {
		smcr_guard_enter();
		smcr_smc_apply_timeouts(fd, e, s);
		smcr_guard_leave();
	}
	smcr_fdtab_put(e);
}

void smcr_smc_refuse_ulp(int fd, const void *value, socklen_t len)
{
	char name[16] = "";

	if (value && len > 0)
		memcpy(name, value, len < sizeof(name) - 1 ? len : sizeof(name) - 1);
	smcr_info("fd %d: TCP_ULP \"%s\" refused on an SMC connection (EOPNOTSUPP): the kernel's"
		  " TCP socket carries none of its bytes", fd, name);
}

#ifndef SIOCOUTQ
#define SIOCOUTQ 0x5411 /* TIOCOUTQ */
#endif
#ifndef SIOCINQ
#define SIOCINQ FIONREAD
#endif

/*
 * SIOCINQ on a socket not decided yet: the kernel's count would include the
 * CLC messages at the head of the stream, which the program never reads.
 * Bytes there are news enough to decide now (without waiting); while a
 * handshake goes on nothing is the program's yet.  *decided: go on with
 * the engine's count.  Returns whether the answer is the kernel's.
 */
static SMCR_COLD __attribute__((noinline)) bool inq_undecided(int fd, struct smcr_fd_entry *e,
							     int *v, bool *decided)
{
	int q = 0;

	*decided = false;
	if ((smcr_fd_entry_flags(e) & SMCR_FD_F_LISTENING) ||
	    smcr_real.ioctl(fd, SIOCINQ, &q) < 0 || q == 0)
		return true;
	smcr_smc_settle(fd, e, SMCR_IO_POLL, false);
	if (smcr_smc_sock_of(e)) {
		*decided = true;
		return false;
	}
	if (smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE &&
	    atomic_load_explicit(&e->handshake, memory_order_acquire)) {
		*v = 0;
		return false;
	}
	return true;
}

int smcr_smc_ioctl(int fd, unsigned long request, void *arg, bool *handled)
{
	struct smcr_fd_entry *e;
	struct smcr_sock *s;
	bool decided;
	size_t n;
	int v;

	*handled = false;
	if (request != SIOCINQ && request != SIOCOUTQ)
		return 0;
	e = smcr_fdtab_get(fd);
	if (!e)
		return 0;
	if (request == SIOCINQ && unlikely(smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE)) {
		v = 0;
		if (inq_undecided(fd, e, &v, &decided)) {
			smcr_fdtab_put(e);
			return 0;
		}
		if (!decided) {
			smcr_fdtab_put(e);
			*handled = true;
			if (!arg) {
				errno = EFAULT;
				return -1;
			}
			memcpy(arg, &v, sizeof(v));
			return 0;
		}
	}
	s = smcr_smc_sock_of(e);
	if (!s) {
		smcr_fdtab_put(e);
		return 0;
	}
	smcr_guard_enter();
	n = request == SIOCINQ ? smcr_sock_readable_bytes(s) : smcr_sock_unacked_bytes(s);
	smcr_guard_leave();
	smcr_fdtab_put(e);
	*handled = true;
	if (!arg) {
		errno = EFAULT;
		return -1;
	}
	v = n > INT32_MAX ? INT32_MAX : (int)n;
	memcpy(arg, &v, sizeof(v));
	return 0;
}
