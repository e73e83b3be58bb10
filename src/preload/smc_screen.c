/* SPDX-License-Identifier: MIT */
/*
 * The screen: an accepted connection of a process that confines its system
 * calls (wrap_seccomp.c, or a filter inherited across exec) is TCP from the
 * start (reason CONFINED), yet a local smcr client may still propose to it:
 * the listener it came from may be registered by another process (the parent
 * that listened before it forked), and clients on this host propose to every
 * registered listener.  Such a Proposal must never reach the program as data
 * (design §8: do no harm), and the peek the classification of a candidate
 * makes (recv with MSG_PEEK) is a call the filter was never asked about.
 *
 * So the socket's first reads are made for the program with the calls it
 * makes itself (read(2), or recvfrom(2) where it passed flags or its filter
 * denies read), straight into its buffer: bytes that cannot begin a
 * Proposal are its data, and the screen is over at the first read of a plain
 * client, at the cost of one decode.  Bytes that may begin one are kept here
 * until they are a complete Proposal, which is taken off the stream and
 * answered with a Decline (CONFINED: the client goes on over TCP, and its
 * stats name the reason), or until they turn out not to be one, when they are
 * the program's data after all.  The Decline goes out with sendto(2) or
 * write(2), whichever the filter allows (confine.c asked it); if it allows
 * neither, the connection reads as reset from then on (counted as a failed
 * handshake), never as the Proposal.
 *
 * Only the socket's receive calls come here (preload.h smcr_preload_divert_rx):
 * its writes, polls and the rest reach the kernel as the program made them,
 * and since each screen step reads until the kernel has nothing more (or the
 * Proposal is complete), the socket's readiness is the kernel's.  The one
 * exception: bytes that looked like a Proposal's start, turned out to be data,
 * and did not fit the program's buffer are handed out by its next reads,
 * which a program that first polls finds ready only once more data comes.
 *
 * The screen also takes over the start of a Proposal that a server's first
 * read (smc_server.c) took off the stream before its rest came: the bytes
 * are no longer in the socket to be answered there, so the Proposal is
 * declined once whole, for the reason the reader gave (SYNCERR), or handed
 * out if it turns out not to be one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

struct screen {
	size_t have;       /* bytes in buf */
	size_t off;        /* of them, handed to the program already (data) */
	bool data;         /* buf holds data for the program, not a Proposal's start */
	bool dead;         /* could not decline: the connection reads as reset */
	uint32_t reason;   /* of the Decline; 0 = CONFINED */
	uint8_t buf[SMCR_CLC_SCREEN_MAX];
};

/* The program's own read: read(2) unless it passed flags or its filter denies read. */
static ssize_t screen_read(int fd, void *buf, size_t len, int flags)
{
	flags &= MSG_DONTWAIT | MSG_WAITALL | MSG_PEEK;
	if (!flags && smcr_engine_io_allowed(SMCR_ENGINE_IO_READ))
		return smcr_real.read(fd, buf, len);
	return smcr_real.recvfrom(fd, buf, len, flags, NULL, NULL);
}

/* The program's first non-empty buffer, or NULL. */
static struct iovec *first_buffer(const struct msghdr *msg)
{
	for (size_t i = 0; i < msg->msg_iovlen; i++)
		if (msg->msg_iov[i].iov_len)
			return &msg->msg_iov[i];
	return NULL;
}

/* A read for the program, straight into its first buffer: bytes, or -errno. */
static ssize_t read_for_program(int fd, const struct msghdr *msg, int flags)
{
	struct iovec *v = first_buffer(msg);
	ssize_t n;

	if (!v)
		return 0;
	n = screen_read(fd, v->iov_base, v->iov_len, flags);
	return n < 0 ? -errno : n;
}

/* The Decline: 0, or -errno if no allowed call could send all of it. */
static int screen_decline(int fd, uint32_t reason)
{
	uint8_t msg[64];
	size_t len = smcr_clc_decline_encode(reason, msg, sizeof(msg)), off = 0;
	bool send = smcr_engine_io_allowed(SMCR_ENGINE_IO_SEND);

	if (len == 0)
		return -EINVAL;
	if (!send && !smcr_engine_io_allowed(SMCR_ENGINE_IO_WRITE))
		return -EPERM;
	while (off < len) {
		/* (a fresh connection's send buffer takes a Decline at once) */
		ssize_t n = send ? smcr_real.sendto(fd, msg + off, len - off,
						    MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0)
				 : smcr_real.write(fd, msg + off, len - off);

		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

/*
 * A complete Proposal is off the stream: answer it.  0, or -ECONNRESET if
 * the filter lets no Decline out (the connection reads as reset from now on).
 */
static int answer_proposal(int fd, struct smcr_fd_entry *e, struct screen *s)
{
	char name[SMCR_CONN_NAME_MAX] = "";
	uint32_t reason = s && s->reason ? s->reason : SMCR_CLC_DECL_CONFINED;

	if (screen_decline(fd, reason) == 0) {
		if (reason == SMCR_CLC_DECL_CONFINED)
			smcr_info("fd %d: declined a CLC Proposal (CONFINED): the process confines"
				  " its system calls", fd);
		else
			smcr_info("fd %d: declined a CLC Proposal that came in pieces (%s)", fd,
				  smcr_clc_decl_name(reason));
		return 0;
	}
	if (!s)
		s = e->screen = calloc(1, sizeof(*s));
	if (s)
		s->dead = true;
	smcr_note_handshake_failed(reason);
	if (smcr_log_enabled(SMCR_LOG_WARN))
		smcr_conn_name(fd, name, sizeof(name));
	smcr_warn("fd %d: a CLC Proposal came, and the process's filter lets no Decline out;"
		  " the connection reads as reset; %s", fd, name);
	return -ECONNRESET;
}

/* Copy s's data not handed out yet into the program's buffers: how much. */
static size_t screen_hand_out(struct screen *s, const struct msghdr *msg, bool peek)
{
	size_t done = 0;

	for (size_t i = 0; i < msg->msg_iovlen && s->off + done < s->have; i++) {
		size_t n = s->have - s->off - done;

		if (n > msg->msg_iov[i].iov_len)
			n = msg->msg_iov[i].iov_len;
		memcpy(msg->msg_iov[i].iov_base, s->buf + s->off + done, n);
		done += n;
	}
	if (!peek)
		s->off += done;
	return done;
}

/* The start of the stream is known: from now on the socket is plain TCP. */
static void screen_end(struct smcr_fd_entry *e)
{
	atomic_store_explicit(&e->mode, SMCR_FD_FALLBACK, memory_order_release);
}

/* s's data (what was not a Proposal, or came after one) to the program. */
static ssize_t hand_out(struct smcr_fd_entry *e, struct screen *s, const struct msghdr *msg,
			bool peek)
{
	ssize_t n = (ssize_t)screen_hand_out(s, msg, peek);

	if (s->off == s->have)
		screen_end(e);
	return n;
}

/*
 * The first read: straight into the program's first buffer.  Bytes that
 * cannot begin a Proposal end the screen there; a complete Proposal is
 * answered and taken out of the buffer; the start of one moves to *sp.
 * Returns bytes for the program, -errno, or 1 with *more set: go on
 * reading the Proposal into *sp.
 */
static ssize_t first_read(int fd, struct smcr_fd_entry *e, struct msghdr *msg, int flags,
			  struct screen **sp, bool *more)
{
	struct iovec *v = first_buffer(msg);
	size_t need = 0;
	ssize_t n;
	int c, rc;

	*more = false;
	if (!v)
		return 0;
	/* (never MSG_WAITALL here: a client that proposed waits for the answer) */
	n = screen_read(fd, v->iov_base, v->iov_len, flags & ~MSG_WAITALL);
	if (n < 0)
		return -errno; /* EAGAIN, EINTR: the screen goes on at the next read */
	c = n ? smcr_clc_screen(v->iov_base, (size_t)n, &need) : SMCR_CLASSIFY_TCP;
	if (c == SMCR_CLASSIFY_TCP) {
		screen_end(e);
		if ((flags & MSG_WAITALL) && n > 0 && (size_t)n < v->iov_len) {
			ssize_t more_n = screen_read(fd, (uint8_t *)v->iov_base + n,
						     v->iov_len - (size_t)n, flags);

			if (more_n > 0)
				n += more_n;
		}
		return n;
	}
	if (c == SMCR_CLASSIFY_PROPOSAL) {
		rc = answer_proposal(fd, e, *sp);
		if (rc < 0)
			return rc;
		screen_end(e);
		if ((size_t)n > need) {
			/* (a client that did not wait for the answer: its data follows) */
			memmove(v->iov_base, (uint8_t *)v->iov_base + need, (size_t)n - need);
			return n - (ssize_t)need;
		}
		/* The client's data comes next, over TCP: this read waits for it as the program's would. */
		return read_for_program(fd, msg, flags);
	}
	/* NEEDS_MORE: fewer bytes than the Proposal's length, which fits the buffer. */
	if (!*sp) {
		*sp = e->screen = calloc(1, sizeof(**sp));
		if (!*sp)
			return -ENOMEM;
	}
	memcpy((*sp)->buf, v->iov_base, (size_t)n);
	(*sp)->have = (size_t)n;
	*more = true;
	return 1;
}

/* One receive call of the program on a SCREEN socket, e->busy held: bytes, or -errno. */
static ssize_t screen_step(int fd, struct smcr_fd_entry *e, struct msghdr *msg, int flags)
{
	struct screen *s = e->screen;
	bool peek = flags & MSG_PEEK, more;
	size_t need = 0;
	ssize_t n;
	int c;

	if (s && s->dead)
		return -ECONNRESET;
	if (s && s->data)
		return hand_out(e, s, msg, peek);
	if ((!s || s->have == 0) && !peek) {
		n = first_read(fd, e, msg, flags, &s, &more);
		if (!more)
			return n;
	} else if (!s) {
		s = e->screen = calloc(1, sizeof(*s));
		if (!s)
			return -ENOMEM;
	}
	/* The start of a Proposal so far: read exactly the rest of it, never past it. */
	for (;;) {
		c = smcr_clc_screen(s->buf, s->have, &need);
		if (c != SMCR_CLASSIFY_NEED_MORE)
			break;
		n = screen_read(fd, s->buf + s->have, need - s->have, flags & MSG_DONTWAIT);
		if (n < 0)
			return -errno; /* kept: the rest of it comes with the next reads */
		if (n == 0) {
			c = SMCR_CLASSIFY_TCP; /* the client's whole stream: data */
			break;
		}
		s->have += (size_t)n;
	}
	s->data = true;
	if (c == SMCR_CLASSIFY_TCP)
		return hand_out(e, s, msg, peek);
	n = answer_proposal(fd, e, s);
	if (n < 0)
		return n;
	s->have = 0;
	screen_end(e);
	return read_for_program(fd, msg, flags);
}

bool smcr_smc_screen_take(struct smcr_fd_entry *e, const void *start, size_t n, uint32_t reason)
{
	struct screen *s = n <= SMCR_CLC_SCREEN_MAX ? calloc(1, sizeof(*s)) : NULL;

	if (!s)
		return false;
	memcpy(s->buf, start, n);
	s->have = n;
	s->reason = reason;
	free(e->screen);
	e->screen = s;
	smcr_smc_screen_start(e);
	return true;
}

void smcr_smc_screen_start(struct smcr_fd_entry *e)
{
	atomic_store_explicit(&e->mode, SMCR_FD_SCREEN, memory_order_release);
}

ssize_t smcr_smc_screen_recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct smcr_fd_entry *e = smcr_fdtab_get(fd);
	ssize_t n;
	int saved = errno;

	if (!e) {
		n = read_for_program(fd, msg, flags);
		if (n < 0) {
			errno = (int)-n;
			return -1;
		}
		return n;
	}
	/* Another thread's screen step: the stream's start is its to take off. */
	while (atomic_flag_test_and_set_explicit(&e->busy, memory_order_acquire))
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 }, NULL);
	smcr_guard_enter();
	if (smcr_fd_entry_mode(e) == SMCR_FD_SCREEN) {
		n = screen_step(fd, e, msg, flags);
	} else {
		n = read_for_program(fd, msg, flags); /* screened meanwhile */
	}
	smcr_guard_leave();
	atomic_flag_clear_explicit(&e->busy, memory_order_release);
	smcr_fdtab_put(e);
	if (n < 0) {
		errno = (int)-n;
		return -1;
	}
	errno = saved;
	msg->msg_namelen = 0;
	msg->msg_controllen = 0;
	msg->msg_flags = 0;
	return n;
}

void smcr_smc_screen_release(struct smcr_fd_entry *e)
{
	free(e->screen);
	e->screen = NULL;
}
