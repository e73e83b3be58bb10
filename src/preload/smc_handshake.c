/* SPDX-License-Identifier: MIT */
/*
 * The handshake in steps (engine.h smcr_sock_accept_start/step,
 * smcr_sock_connect_start): an entry keeps a handshake under way, the
 * peer's answer is taken at the next call on the socket or the next report
 * of its readiness, and its end sets the connection's mode for good.  Apart
 * from the decision (smc.c, smc_client.c, smc_server.c) because it is the
 * one state that lives across calls, with its own fd for poll/epoll and its
 * own ways to end: taken, given up at close, finished before the socket
 * leaves the process.
 */
#include <errno.h>
#include <stdint.h>

#include "common/clock.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

/*
 * The server handshake in steps (engine.h smcr_sock_accept_start/step): the
 * Proposal is answered at once, the client's answer taken whenever it comes,
 * at the next call on the socket or the next report of its readiness.  A
 * non-blocking socket meanwhile reads EAGAIN and polls not ready; a blocking
 * one waits for the answer as a blocking read or write would (SO_RCVTIMEO,
 * SO_SNDTIMEO), and the engine's wait bound ends the handshake in any case.
 */
static int handshake_fd_locked(struct smcr_fd_entry *e)
{
	struct smcr_handshake *hs = atomic_load_explicit(&e->handshake, memory_order_acquire);
	int hfd = atomic_load_explicit(&e->handshake_fd, memory_order_acquire);

	if (!hs || hfd >= 0)
		return hfd;
	hfd = smcr_handshake_fd(hs);
	if (hfd < 0)
		return -1; /* the TCP fd stands for it: the client's answer still wakes us */
	atomic_store_explicit(&e->handshake_fd, hfd, memory_order_release);
	smcr_smc_epoll_watch_handshake(e, hfd);
	return hfd;
}

int smcr_smc_handshake_fd(struct smcr_fd_entry *e)
{
	int hfd;

	if (!atomic_load_explicit(&e->handshake, memory_order_acquire) ||
	    e->owner != smcr_smc_pid)
		return -1;
	hfd = atomic_load_explicit(&e->handshake_fd, memory_order_acquire);
	if (hfd >= 0 || atomic_flag_test_and_set_explicit(&e->busy, memory_order_acquire))
		return hfd; /* (another thread is deciding: it will tell) */
	smcr_guard_enter();
	hfd = handshake_fd_locked(e);
	smcr_guard_leave();
	smcr_smc_decision_unlock(e);
	return hfd;
}

/* The handshake ended with `rc` (and `s` if SMC): the connection's mode, for good. */
static int handshake_end(int fd, struct smcr_fd_entry *e, int rc, struct smcr_sock *s)
{
	struct smcr_handshake *hs = atomic_load_explicit(&e->handshake, memory_order_acquire);
	int efd = e->engine_fd;

	atomic_store_explicit(&e->handshake_fd, -1, memory_order_release);
	e->engine_fd = -1;
	const char *role = smcr_fd_entry_flags(e) & SMCR_FD_F_ACCEPTED ? "server" : "client";

	if (rc == 0) {
		smcr_smc_go_smc(fd, e, efd, s, role); /* registrations move to its doorbell */
	} else {
		smcr_smc_epoll_watch_tcp(e);
		smcr_smc_engine_close(efd);
		if (rc > 0) {
			smcr_smc_fallback(fd, e, (uint32_t)rc, false, role, NULL);
		} else {
			smcr_smc_fail_connection(fd, e, -rc, role);
			rc = -ECONNRESET;
		}
	}
	atomic_store_explicit(&e->handshake, NULL, memory_order_release);
	smcr_handshake_free(hs);
	return rc < 0 ? rc : SMCR_SMC_DECIDED;
}

static int64_t io_deadline(int fd, const struct smcr_fd_entry *e, enum smcr_io_kind kind,
			   bool may_block)
{
	int ms;

	if (kind == SMCR_IO_POLL || !may_block)
		return 0;
	ms = smcr_smc_timeval_ms(fd, e, kind == SMCR_IO_WRITE ? SO_SNDTIMEO : SO_RCVTIMEO);
	return ms > 0 ? smcr_now_ms() + ms : INT64_MAX; /* as long as a read waits for data */
}

int smcr_smc_handshake_step(int fd, struct smcr_fd_entry *e, enum smcr_io_kind kind, bool may_block)
{
	struct smcr_handshake *hs = atomic_load_explicit(&e->handshake, memory_order_acquire);
	struct smcr_sock *s = NULL;
	int rc;

	if (e->owner != smcr_smc_pid) /* the parent's: it answers that client */
		return kind == SMCR_IO_POLL ? SMCR_SMC_DECIDED : -ECONNRESET;
	rc = smcr_handshake_step(hs, io_deadline(fd, e, kind, may_block), &s);
	if (rc != SMCR_HANDSHAKE_PENDING)
		return handshake_end(fd, e, rc, s);
	return kind == SMCR_IO_POLL ? SMCR_SMC_DECIDED : -EAGAIN;
}

/*
 * How long a handshake finished for a handoff may wait for the peer: past
 * both CLC bounds (a client's 10 s for the first answer, then 6 s).  The
 * late answer of a peer still silent then would reach the new owner, which
 * cannot take it off the stream, as data: the connection is reset instead.
 */
#define FINISH_HANDSHAKE_MS 16000

void smcr_smc_finish_handshake(int fd, struct smcr_fd_entry *e)
{
	struct smcr_sock *s = NULL;
	struct smcr_handshake *hs;

	if (!atomic_load_explicit(&e->handshake, memory_order_acquire) ||
	    e->owner != smcr_smc_pid || !smcr_smc_decision_lock(e))
		return;
	smcr_guard_enter();
	hs = atomic_load_explicit(&e->handshake, memory_order_acquire);
	if (hs) {
		int64_t bound = smcr_now_ms() + FINISH_HANDSHAKE_MS;
		int rc;

		do
			rc = smcr_handshake_step(hs, bound, &s);
		while (rc == SMCR_HANDSHAKE_PENDING && smcr_now_ms() < bound);
		handshake_end(fd, e, rc == SMCR_HANDSHAKE_PENDING ? -ETIMEDOUT : rc, s);
	}
	smcr_guard_leave();
	smcr_smc_decision_unlock(e);
}

int smcr_smc_handshake_start(int fd, struct smcr_fd_entry *e, int efd, const void *prop,
			     size_t prop_len, enum smcr_io_kind kind, bool may_block)
{
	struct smcr_sock_opts o = smcr_smc_conn_opts(efd);
	struct smcr_handshake *hs = NULL;
	int rc;

	o.proposal = prop;
	o.proposal_len = prop_len;
	rc = smcr_sock_accept_start(efd, &o, &hs);

	/* (never 0 here: a Decline's reason, PENDING or -errno, engine.h) */
	if (rc != SMCR_HANDSHAKE_PENDING)
		return smcr_smc_take_handshake(fd, e, efd, rc, NULL, "server");
	smcr_smc_handshake_wait(fd, e, efd, hs, kind, may_block);
	return SMCR_HANDSHAKE_PENDING;
}

/*
 * A handshake is under way on `efd`: the entry keeps it, and whoever waits
 * for this socket's readiness now waits for the peer's answer.  What the
 * caller returns now: nothing for a readiness wait, EAGAIN for I/O.
 */
int smcr_smc_handshake_wait(int fd, struct smcr_fd_entry *e, int efd, struct smcr_handshake *hs,
			    enum smcr_io_kind kind, bool may_block)
{
	(void)fd;
	e->engine_fd = efd;
	e->owner = smcr_smc_pid;
	atomic_store_explicit(&e->handshake, hs, memory_order_release);
	if (e->epoll_regs || kind == SMCR_IO_POLL || !may_block)
		handshake_fd_locked(e);
	return kind == SMCR_IO_POLL ? SMCR_SMC_DECIDED : -EAGAIN;
}

/*
 * The release of an entry whose handshake is in progress: give it up (the
 * engine's duplicate of the socket closes with the entry: the client sees
 * the end of the TCP connection, as with any other closed socket).
 */
void smcr_smc_handshake_release(struct smcr_fd_entry *e)
{
	struct smcr_handshake *hs = atomic_exchange(&e->handshake, NULL);

	atomic_store_explicit(&e->handshake_fd, -1, memory_order_relaxed);
	if (!hs)
		return;
	if (e->owner == smcr_smc_pid)
		smcr_handshake_free(hs);
	else
		smcr_handshake_forget_inherited(hs);
}
