// SPDX-License-Identifier: MIT
/*
 * The server's CLC handshake (handshake_int.h): what the first bytes on an
 * accepted socket are (peeked at, or in the interposer's screen's buffer),
 * the policy's answer to a Proposal, our Accept or Decline, then in steps
 * (smcr_handshake_step) the transport's attach and the client's Confirm or
 * Decline; and a Proposal that comes after the server gave SMC up, declined.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/config.h"
#include "common/log.h"
#include "smcr/conn.h"
#include "smcr/handshake_int.h"
#include "smcr/libc.h"
#include "smcr/policy.h"
#include "smcr/rundir.h"
#include "smcr/shm.h"
#include "smcr/stats.h"
#include "smcr/sys.h"

int smcr_sock_classify(int tcp_fd)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	size_t need;
	ssize_t n;

	n = smcr_libc.recv(tcp_fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? SMCR_CLASSIFY_NOTHING : -errno;
	if (n == 0)
		return SMCR_CLASSIFY_EOF;
	return smcr_clc_screen(buf, (size_t)n, &need);
}

_Static_assert(SMCR_CLC_SCREEN_MAX == SMCR_CLC_MAX_LEN, "the screen's buffer holds any Proposal");

int smcr_clc_screen(const void *buf, size_t avail, size_t *need)
{
	struct smcr_clc_msg msg;
	enum smcr_clc_err err;
	size_t len = SMCR_CLC_HDR_LEN;

	switch (smcr_clc_decode(buf, avail, &msg, &len, &err)) {
	case SMCR_WIRE_NEED_MORE:
		/* a sound prefix so far: of a Proposal, or of another message (TCP) */
		if (avail > 4 && ((const uint8_t *)buf)[4] != SMCR_CLC_PROPOSAL)
			return SMCR_CLASSIFY_TCP;
		if (len <= avail || len > SMCR_CLC_MAX_LEN)
			return SMCR_CLASSIFY_TCP;
		*need = len;
		return SMCR_CLASSIFY_NEED_MORE;
	case SMCR_WIRE_OK:
		*need = len;
		return msg.hdr.type == SMCR_CLC_PROPOSAL ? SMCR_CLASSIFY_PROPOSAL : SMCR_CLASSIFY_TCP;
	default:
		return SMCR_CLASSIFY_TCP;
	}
}

/* The client's last word is all there: consume it and decide. */
static int hs_finish(struct smcr_handshake *hs, const struct smcr_clc_msg *peeked)
{
	struct smcr_clc_msg reply;
	int wait = CLC_WAIT_MS, rc;

	rc = smcr_clc_sock_recv(hs->tcp_fd, &reply, smcr_now_ms()); /* all there: never waits */
	if (rc)
		return rc;
	if (reply.hdr.type != peeked->hdr.type)
		return -EPROTO;
	if (reply.hdr.type == SMCR_CLC_DECLINE)
		return hs->attach_rc > 0 ? hs->attach_rc : smcr_clc_decline_reason(&reply);
	if (reply.hdr.type != SMCR_CLC_CONFIRM)
		return -EPROTO;
	if (hs->attach_rc > 0) {
		/*
		 * The client believes in SMC but we could not attach: decline after
		 * its Confirm, as Linux's server does (smc_listen_decline); a Linux
		 * client that sees no CONFIRM LINK looks for this Decline and falls
		 * back to TCP.
		 */
		int drc = smcr_clc_sock_decline(hs->tcp_fd, (uint32_t)hs->attach_rc,
						smcr_sys_deadline(wait));

		return drc < 0 ? drc : hs->attach_rc;
	}
	rc = hs->ops->server_confirm(hs->xc, &reply);
	return rc > 0 ? -EPROTO : rc; /* after Confirm there is no way back to TCP */
}

/* Everything that can be done now: SMCR_HANDSHAKE_PENDING, or the result. */
int smcr_hs_server_advance(struct smcr_handshake *hs)
{
	struct smcr_clc_msg msg;
	int need, rc;

	if (hs->attach_rc == -EAGAIN) {
		hs->attach_rc = hs->ops->server_attach(hs->xc, hs->tcp_fd, &hs->peer_size);
		if (hs->attach_rc < 0 && hs->attach_rc != -EAGAIN)
			return hs->attach_rc;
	}
	rc = smcr_clc_sock_peek(hs->tcp_fd, &msg, &need);
	if (rc == -ESHUTDOWN) {
		/* It left without a word: nothing of CLC remains, the stream just ends. */
		smcr_dbg("fd %d: the client closed instead of confirming",
			 smcr_fd_label(hs->tcp_fd));
		return hs->gave_up ? (int)hs->gave_up : SMCR_CLC_DECL_PEERDECL;
	}
	if (rc < 0)
		return rc;
	if (rc == 1) {
		if (hs->attach_rc == -EAGAIN)
			/* the transport's part may have come just before the message */
			hs->attach_rc = hs->ops->server_attach(hs->xc, hs->tcp_fd, &hs->peer_size);
		if (hs->attach_rc < 0 && hs->attach_rc != -EAGAIN)
			return hs->attach_rc;
		if (hs->attach_rc != -EAGAIN || msg.hdr.type != SMCR_CLC_CONFIRM)
			return hs_finish(hs, &msg);
		/*
		 * A Confirm before what the client sends ahead of it (seen when
		 * a step ran between the two): wait for that, and for the
		 * Confirm no more (the socket polls readable again on more).
		 */
		need++;
	}
	if (smcr_now_ms() >= hs->deadline)
		smcr_hs_give_up(hs, SMCR_CLC_DECL_TIMEOUT_AL,
				(int)(hs->deadline - hs->accept_ns / 1000000));
	smcr_hs_set_lowat(hs, need);
	return SMCR_HANDSHAKE_PENDING;
}


/* The server's handshake ended with `rc`: the connection, or the fallback counted. */
int smcr_hs_server_end(struct smcr_handshake *hs, int rc, struct smcr_sock **out)
{
	if (rc == 0) {
		smcr_dbg("fd %d: Confirm taken %lld us after our Accept", smcr_fd_label(hs->tcp_fd),
			 (long long)((smcr_now_ns() - hs->accept_ns) / 1000));
		*out = smcr_conn_new(hs->tcp_fd, true, hs->ops, hs->xc, hs->peer_size, hs->spin_us);
		if (*out) {
			hs->xc = NULL; /* the connection's now */
			return 0;
		}
		rc = -ENOMEM;
	}
	if (rc > 0)
		smcr_stats_fallback(rc);
	else
		smcr_stats_handshake_failed(rc == -ETIMEDOUT ? SMCR_CLC_DECL_TIMEOUT_CL
							     : SMCR_CLC_DECL_INTERR);
	smcr_dbg("server handshake on fd %d (%s): %d", hs->tcp_fd, hs->ops->name, rc);
	return rc;
}

/*
 * Once the Accept is out, a transport that waits on an fd of its own
 * (server_wait_fd) may hold the client until that fd turns readable: the
 * client sends nothing on the TCP stream meanwhile, so only the handshake's
 * wait fd can wake a non-blocking server that polls.  That fd is made before
 * the Accept; when it cannot be (no fd left), the answer is a Decline (MEM)
 * and both ends go on over TCP, where after the Accept the client would wait
 * for the full CLC bound.
 */
static int hs_wake_ready(struct smcr_handshake *hs)
{
	if (!hs->ops->server_wait_fd || hs->ops->server_wait_fd(hs->xc) < 0)
		return 0;
	return smcr_handshake_fd(hs) < 0 ? (int)SMCR_CLC_DECL_MEM : 0;
}

/*
 * Answer the Proposal `prop` (consumed): Decline (`decline` > 0 or refused) or
 * Accept, for the handshake `hs` (NULL when declining).
 */
static int server_answer(int fd, struct smcr_handshake *hs, const struct smcr_clc_msg *prop,
			 int decline)
{
	struct smcr_clc_msg acc;
	int rc;

	memset(&acc, 0, sizeof(acc));
	rc = decline > 0 ? decline : hs->ops->server_accept(hs->xc, prop, &acc);
	if (rc == 0)
		rc = hs_wake_ready(hs);
	if (rc > 0) {
		/*
		 * a few dozen bytes into an idle socket's empty send buffer: never
		 * waits.  A rule's refusal is smcr's own reason, which the wire
		 * never carries: the peer hears what a server without SMC says.
		 */
		int drc = smcr_clc_sock_decline(fd,
						rc == SMCR_CLC_DECL_RULE ? SMCR_CLC_DECL_NOSMCDEV
									 : (uint32_t)rc,
						smcr_now_ms());

		return drc < 0 ? drc : rc;
	}
	if (rc < 0)
		return rc;
	return smcr_clc_sock_send(fd, &acc, smcr_now_ms());
}

/* The policy's answer to a Proposal; the local address only when rules may ask for it. */
static int server_policy(int tcp_fd, const struct smcr_clc_msg *prop,
			 const struct smcr_transport_ops **ops)
{
	const struct smcr_config *cfg = smcr_config_get();
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);

	if (cfg->rules && smcr_libc.getsockname(tcp_fd, (struct sockaddr *)&local, &len) == 0)
		return smcr_policy_server_at(cfg, prop, (struct sockaddr *)&local, ops);
	if (cfg->rules && cfg->rules->broken)
		return SMCR_CLC_DECL_RULE;
	return smcr_policy_server(cfg, prop, ops);
}

/* The server's side of a handshake, its transport state still to come; NULL: no memory. */
static struct smcr_handshake *server_hs_new(int tcp_fd, const struct smcr_transport_ops *ops,
					    const struct smcr_sock_opts *opts)
{
	struct smcr_handshake *hs = calloc(1, sizeof(*hs));

	if (hs) {
		hs->tcp_fd = tcp_fd;
		hs->ops = ops;
		hs->spin_us = opts ? opts->spin_us : 0;
		hs->deadline = smcr_sys_deadline(smcr_hs_wait_ms(opts));
		hs->attach_rc = -EAGAIN;
		hs->wait_fd = hs->timer_fd = hs->watched_xfd = -1;
	}
	return hs;
}

/*
 * Whether to take up the Proposal `prop`: 0 with *hs and its transport state
 * *xc, or the reason to decline it.  A decline may leave *hs made (the
 * transport had no room): it goes when the handshake ends.
 */
static int server_decide(int tcp_fd, const struct smcr_sock_opts *opts,
			 const struct smcr_clc_msg *prop, const struct smcr_transport_ops **ops,
			 struct smcr_handshake **hs, struct smcr_xconn **xc)
{
	int decline = server_policy(tcp_fd, prop, ops), rc;

	/*
	 * A peer that is not local by address may still be a container of this
	 * host when we share a runtime directory with others: its rendezvous
	 * then proves it (rundir.h), or it stays TCP.
	 */
	if (decline == 0 && (*ops)->same_host && !smcr_peer_is_local(tcp_fd) &&
	    !smcr_rundir_enabled())
		decline = SMCR_CLC_DECL_NOTLOCAL;
	*hs = decline == 0 ? server_hs_new(tcp_fd, *ops, opts) : NULL;
	/* Out of memory here still answers the Proposal (Decline MEM). */
	if (decline == 0 && !*hs)
		decline = SMCR_CLC_DECL_MEM;
	if (decline)
		return decline;
	rc = (*ops)->create(tcp_fd, smcr_hs_rmb_size(*ops, opts), smcr_hs_wait_ms(opts), xc);
	if (rc < 0) {
		*xc = NULL;
		return rc == -ENODEV && !(*ops)->same_host ? SMCR_CLC_DECL_NOSMCRDEV
							   : SMCR_CLC_DECL_MEM;
	}
	(*hs)->xc = *xc;
	return 0;
}

/* The server's handshake ended before it was under way: let go of it, count `rc`. */
static int server_abandon(int tcp_fd, const struct smcr_transport_ops *ops,
			  struct smcr_handshake *hs, struct smcr_xconn *xc, int rc)
{
	if (hs) {
		hs->xc = NULL; /* destroyed below */
		smcr_handshake_free(hs);
	}
	if (xc)
		ops->destroy(xc, false);
	if (rc > 0)
		smcr_stats_fallback(rc);
	else
		smcr_stats_handshake_failed(SMCR_CLC_DECL_INTERR);
	smcr_dbg("server handshake on fd %d (%s): %d%s", tcp_fd, ops->name, rc,
		 rc == SMCR_CLC_DECL_NOTLOCAL ? " (same-host offer from another host)" : "");
	return rc;
}

/* The Proposal: the caller's, or read from the socket (classified already: never waits). */
static int proposal_of(int tcp_fd, const struct smcr_sock_opts *opts, struct smcr_clc_msg *prop)
{
	size_t len = opts ? opts->proposal_len : 0;
	enum smcr_clc_err err;

	if (!opts || !opts->proposal)
		return smcr_clc_sock_recv(tcp_fd, prop, smcr_now_ms());
	if (smcr_clc_decode(opts->proposal, len, prop, &len, &err) != SMCR_WIRE_OK) {
		smcr_warn("invalid CLC message: %s", smcr_clc_err_str(err));
		return -EPROTO;
	}
	return 0;
}

int smcr_sock_accept_start(int tcp_fd, const struct smcr_sock_opts *opts,
			   struct smcr_handshake **out)
{
	const struct smcr_transport_ops *ops = &smcr_shm_ops;
	struct smcr_handshake *hs = NULL;
	struct smcr_xconn *xc = NULL;
	struct smcr_clc_msg prop;
	int64_t prop_ns;
	int rc;

	*out = NULL;
	rc = proposal_of(tcp_fd, opts, &prop);
	prop_ns = smcr_now_ns();
	if (rc == 0 && prop.hdr.type != SMCR_CLC_PROPOSAL)
		rc = -EPROTO;
	if (rc == 0) {
		int decline = server_decide(tcp_fd, opts, &prop, &ops, &hs, &xc);

		rc = server_answer(tcp_fd, hs, &prop, decline);
	}
	if (rc != 0)
		return server_abandon(tcp_fd, ops, hs, xc, rc);
	hs->accept_ns = smcr_now_ns();
	smcr_dbg("fd %d: Accept sent %lld us after the Proposal was read", smcr_fd_label(tcp_fd),
		 (long long)((hs->accept_ns - prop_ns) / 1000));
	*out = hs;
	return SMCR_HANDSHAKE_PENDING;
}

int smcr_sock_accept(int tcp_fd, const struct smcr_sock_opts *opts, struct smcr_sock **out)
{
	struct smcr_handshake *hs;
	int rc = smcr_sock_accept_start(tcp_fd, opts, &hs);

	*out = NULL;
	if (rc != SMCR_HANDSHAKE_PENDING)
		return rc;
	do /* the step after the deadline ends it */
		rc = smcr_handshake_step(hs, hs->deadline, out);
	while (rc == SMCR_HANDSHAKE_PENDING);
	smcr_handshake_free(hs);
	return rc;
}

int smcr_sock_decline_late_proposal(int tcp_fd, uint32_t reason)
{
	struct smcr_clc_msg msg;
	int c = smcr_sock_classify(tcp_fd), rc;

	if (c < 0)
		return c;
	if (c != SMCR_CLASSIFY_PROPOSAL)
		return 0;
	rc = smcr_clc_sock_recv(tcp_fd, &msg, smcr_sys_deadline(CLC_WAIT_MS));
	if (rc)
		return rc;
	rc = smcr_sock_decline_taken_proposal(tcp_fd, reason);
	return rc ? rc : 1;
}

int smcr_sock_decline_taken_proposal(int tcp_fd, uint32_t reason)
{
	int rc = smcr_clc_sock_decline(tcp_fd, reason, smcr_sys_deadline(CLC_WAIT_MS));

	if (rc)
		return rc;
	smcr_stats_fallback((int)reason);
	return 0;
}
