/* SPDX-License-Identifier: MIT */
/*
 * A client connection, from connect() to its mode: the learned policy
 * before connect() (which may keep the destination on TCP there and then),
 * the RFC 7609 mark of its SYN, and the decision once connected: propose
 * SMC, or stay TCP with a reason.  Apart from the server's side
 * (smc_server.c) because the two have nothing in common but their outcomes
 * (smc.c): the client speaks first, the server waits for the first bytes.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

/* ---- connect() ------------------------------------------------------------- */

/*
 * A destination the learned policy keeps on TCP (engine.h
 * smcr_sock_connect_learned): decided now, so that connect() and the
 * socket's I/O pass through without one more system call.
 */
static void keep_tcp(int fd, struct smcr_fd_entry *e, const struct sockaddr *addr, int reason)
{
	smcr_note_fallback(reason);
	e->fallback_reason = (uint32_t)reason;
	e->owner = smcr_smc_pid;
	e->tcp_record = smcr_stats_tcp_open_dest(fd, addr, reason);
	atomic_store_explicit(&e->mode, SMCR_FD_FALLBACK, memory_order_release);
	smcr_info("fd %d: tcp-fallback (client): reason 0x%08x %s, decided before connect", fd,
		  (uint32_t)reason, smcr_fallback_reason_str(reason));
}

void smcr_smc_before_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct smcr_fd_entry *e;
	int reason;

	if (!smcr_smc_enabled || !smcr_preload_table_writable())
		return;
	e = smcr_fdtab_peek(fd);
	if (!e || (smcr_fd_entry_flags(e) & (SMCR_FD_F_CONNECTING | SMCR_FD_F_LISTENING)) ||
	    smcr_fd_entry_mode(e) != SMCR_FD_CANDIDATE)
		return;
	smcr_guard_enter();
	/*
	 * A program that asked for SMC itself (AF_SMC, IPPROTO_SMC) gets it tried
	 * on every connection, as the kernel's SMC tries it: the learned policy
	 * guesses for programs that did not ask.
	 */
	reason = smcr_smc_option_keeps_tcp(e, NULL);
	if (smcr_smc_confined_now())
		reason = smcr_smc_aside_reason(NULL);
	else if (!reason && !(smcr_fd_entry_flags(e) & SMCR_FD_F_ASKED_SMC))
		reason = smcr_sock_connect_learned(addr, len);
	if (reason) {
		keep_tcp(fd, e, addr, reason);
	} else {
		smcr_tcpopt_mark_connect(fd, addr);
		smcr_sock_connect_prepare(addr);
	}
	smcr_guard_leave();
}

int smcr_smc_after_connect(int fd, int ret)
{
	int saved = errno, rc;
	struct smcr_fd_entry *e;

	if (ret != 0 || !smcr_smc_enabled)
		return ret;
	e = smcr_fdtab_get(fd);
	if (!e)
		return ret;
	smcr_smc_add_flags(e, SMCR_FD_F_CONNECTED);
	/* connect() returned connected: a blocking one may wait for the handshake too */
	rc = smcr_smc_settle(fd, e, SMCR_IO_POLL,
			     !(smcr_fd_entry_flags(e) & SMCR_FD_F_NONBLOCK));
	smcr_fdtab_put(e);
	if (rc < 0) {
		errno = ECONNREFUSED;
		return -1;
	}
	errno = saved;
	return 0;
}

/* ---- the decision ---------------------------------------------------------- */

/* How long a client that must not block waits for the server's answer before going on. */
#define CLIENT_INLINE_REPLY_MS 2

/*
 * Settings that keep a connection on TCP whatever its peer: the process
 * confined itself after connect (no Proposal, and none of the calls below,
 * which its filter may deny) or set up io_uring, or a socket option only the
 * kernel's TCP serves (smcr_smc_option_keeps_tcp).  True if it stays TCP.
 */
static bool client_kept_on_tcp(int fd, struct smcr_fd_entry *e)
{
	uint32_t reason;
	const char *why;

	if (smcr_smc_confined_now())
		reason = smcr_smc_aside_reason(&why);
	else
		reason = smcr_smc_option_keeps_tcp(e, &why);
	if (!reason)
		return false;
	smcr_smc_fallback(fd, e, reason, true, "client", why);
	return true;
}

/*
 * The peer's address once the connection is up: 1 (*have_peer says whether
 * it could be read), 0 still connecting (the kernel answers EAGAIN), -1 the
 * connect failed (the kernel reports why; the connection is TCP's).
 */
static int client_connected_peer(int fd, struct smcr_fd_entry *e, struct sockaddr_storage *peer,
				 bool *have_peer)
{
	socklen_t len = sizeof(*peer);

	*have_peer = false;
	if (!(smcr_fd_entry_flags(e) & SMCR_FD_F_CONNECTED)) {
		if (smcr_smc_wait_fd(fd, POLLOUT, 0) <= 0)
			return 0;
		if (smcr_real.getpeername(fd, (struct sockaddr *)peer, &len) < 0) {
			atomic_store_explicit(&e->mode, SMCR_FD_FALLBACK, memory_order_release);
			return -1;
		}
		*have_peer = true;
		smcr_smc_add_flags(e, SMCR_FD_F_CONNECTED);
		return 1;
	}
	*have_peer = smcr_real.getpeername(fd, (struct sockaddr *)peer, &len) == 0;
	return 1;
}

/*
 * Whether to propose, with the plan the handshake follows: the policy (the
 * registry's probe for a same-host peer, its sock_diag check for a
 * registered one) before the engine takes a duplicate of the socket, so a
 * peer that does not run smcr costs no fd, no socket option read and no
 * connection state.  Then the peek, after the policy, so that a peer that
 * does not run smcr is reported as such however soon it greets (a plain
 * rsync daemon does at once), and costs no peek.  False: the connection
 * stays TCP, recorded with its reason.
 */
static bool client_may_propose(int fd, struct smcr_fd_entry *e,
			       const struct sockaddr_storage *peer, struct smcr_client_plan *plan)
{
	int rc, saved_errno = errno;
	bool short_of_fds;
	char byte;

	if (peer && smcr_smc_peer_in_this_process(peer)) {
		smcr_smc_fallback_peer(fd, e, SMCR_CLC_DECL_PEERNOSMC, true, "client",
				       "peer is this process", peer);
		return false;
	}
	errno = 0;
	rc = smcr_sock_connect_plan(fd, peer, plan);
	/* Out of fds, the registry could not be asked: say which limit bit. */
	short_of_fds = errno == EMFILE || errno == ENFILE;
	errno = saved_errno;
	if (rc == SMCR_CLC_DECL_PEERNOSMC && short_of_fds) {
		smcr_smc_fallback_peer(fd, e, SMCR_CLC_DECL_MEM, true, "client",
				       "no fd to ask the registry", peer);
		return false;
	}
	if (rc) {
		smcr_smc_fallback_peer(fd, e, (uint32_t)rc, true, "client", NULL, peer);
		return false;
	}
	if (smcr_real.recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) >= 0) {
		/* The server spoke (or closed) before we proposed: its bytes are data. */
		smcr_smc_fallback_peer(fd, e, SMCR_CLC_DECL_SYNCERR, true, "client",
				       "server spoke first", peer);
		return false;
	}
	return true;
}

/* The handshake on the engine's duplicate `efd`, to its end or handed to the waits. */
static int client_handshake(int fd, struct smcr_fd_entry *e, int efd,
			    const struct smcr_client_plan *plan, enum smcr_io_kind kind,
			    bool may_block)
{
	struct smcr_sock_opts o = smcr_smc_conn_opts(efd);
	struct smcr_handshake *hs = NULL;
	struct smcr_sock *s = NULL;
	int rc;

	o.plan = plan;
	if (may_block) {
		rc = smcr_sock_connect(efd, &o, &s);
		return smcr_smc_take_handshake(fd, e, efd, rc, s, "client");
	}
	rc = smcr_sock_connect_start(efd, &o, &hs);
	if (rc != SMCR_HANDSHAKE_PENDING)
		return smcr_smc_take_handshake(fd, e, efd, rc, NULL, "client");
	/*
	 * A server that runs answers within a wake-up or two: that short wait
	 * is cheaper than handing the socket's readiness to the handshake.
	 */
	rc = smcr_handshake_step(hs, smcr_now_ms() + CLIENT_INLINE_REPLY_MS, &s);
	if (rc != SMCR_HANDSHAKE_PENDING) {
		smcr_handshake_free(hs);
		return smcr_smc_take_handshake(fd, e, efd, rc, s, "client");
	}
	return smcr_smc_handshake_wait(fd, e, efd, hs, kind, may_block);
}

/*
 * A connected client's first I/O or readiness wait: propose, or stay TCP.
 * A caller that may block runs the whole handshake now (a blocking socket's
 * connect(), send() or recv(): they wait as long anyway); one that may not
 * (a non-blocking socket, poll, epoll) only sends the Proposal, and the
 * server's answer is taken when it has come, so an event loop never waits
 * for a server that answers late.
 */
int smcr_smc_client_decide(int fd, struct smcr_fd_entry *e, enum smcr_io_kind kind, bool may_block)
{
	struct smcr_client_plan plan;
	struct sockaddr_storage peer;
	bool have_peer;
	int efd;

	if (atomic_load_explicit(&e->handshake, memory_order_acquire))
		return smcr_smc_handshake_step(fd, e, kind, may_block);
	if (client_kept_on_tcp(fd, e) || client_connected_peer(fd, e, &peer, &have_peer) <= 0 ||
	    !client_may_propose(fd, e, have_peer ? &peer : NULL, &plan))
		return 0;
	efd = smcr_smc_engine_dup(fd);
	if (efd < 0) {
		smcr_smc_fallback_peer(fd, e, SMCR_CLC_DECL_MEM, true, "client",
				       "no fd for the engine", have_peer ? &peer : NULL);
		return 0;
	}
	return client_handshake(fd, e, efd, &plan, kind, may_block);
}
