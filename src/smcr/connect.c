// SPDX-License-Identifier: MIT
/*
 * The client's CLC handshake (handshake_int.h): whether the peer is on this
 * host, the policy's transport, our Proposal, the server's answer and our
 * Confirm or Decline, blocking (smcr_sock_connect) or in steps
 * (smcr_sock_connect_start, then smcr_handshake_step).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/config.h"
#include "common/log.h"
#include "smcr/conn.h"
#include "smcr/handshake_int.h"
#include "smcr/libc.h"
#include "smcr/policy.h"
#include "smcr/registry.h"
#include "smcr/rundir.h"
#include "smcr/stats.h"
#include "smcr/sys.h"

#define CLC_FIRST_REPLY_MS 10000  /* the server answers at its first I/O, maybe later */

static bool sockaddr_is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)ss;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)ss;

		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return true;
		return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
	}
	return false;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)(const void *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
			      sizeof(struct in6_addr)) == 0;
	return false;
}

/*
 * Is the peer of `fd` on this host, and where: loopback, or one of our own
 * addresses (the kernel then makes it the source too).  A peer that bound
 * another of our addresses counts as elsewhere: it loses SMC, never safety.
 * The client asks it before it proposes, the server of a same-host Proposal.
 */
static bool local_peer_at(int fd, const struct sockaddr_storage *peer)
{
	struct sockaddr_storage self;
	socklen_t slen = sizeof(self);

	if (sockaddr_is_loopback(peer))
		return true;
	return smcr_libc.getsockname(fd, (struct sockaddr *)&self, &slen) == 0 &&
	       same_addr(peer, &self);
}

static bool local_peer(int fd, struct sockaddr_storage *peer)
{
	socklen_t plen = sizeof(*peer);

	return smcr_libc.getpeername(fd, (struct sockaddr *)peer, &plen) == 0 &&
	       local_peer_at(fd, peer);
}

bool smcr_peer_is_local(int tcp_fd)
{
	struct sockaddr_storage peer;

	return local_peer(tcp_fd, &peer);
}

/*
 * A local address: the registry of our network namespace.  Any other may be
 * a container of this host, in another namespace: the shared runtime
 * directory's entry for it, if SMCR_RUNDIR is set (rundir.h).
 */
bool smcr_peer_is_registered_at(int tcp_fd, const struct sockaddr_storage *peer)
{
	if (local_peer_at(tcp_fd, peer))
		return smcr_registry_vouches(tcp_fd, peer);
	return smcr_rundir_enabled() && smcr_rundir_vouches(tcp_fd, peer);
}

bool smcr_peer_is_registered(int tcp_fd)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);

	return smcr_libc.getpeername(tcp_fd, (struct sockaddr *)&peer, &plen) == 0 &&
	       smcr_peer_is_registered_at(tcp_fd, &peer);
}

/*
 * The server's first bytes must be CLC.  If they are not (a server that spoke
 * first, before it saw our Proposal), leave them unread for the application
 * and fail: the server will decline the Proposal later, somewhere in its data.
 */
static int client_peek_reply(int fd, const struct smcr_transport_ops *ops, struct smcr_xconn *xc,
			     int64_t deadline)
{
	uint8_t buf[SMCR_CLC_HDR_LEN];
	enum smcr_clc_err err;
	size_t len;
	ssize_t n;

	for (;;) {
		int w = ops->clc_wait && xc ? ops->clc_wait(xc, deadline)
					    : smcr_sys_wait_fd(fd, POLLIN, deadline);

		if (w <= 0)
			return w == 0 ? -ETIMEDOUT : w;
		n = smcr_libc.recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				continue;
			return -errno;
		}
		if (smcr_clc_frame(buf, (size_t)n, &len, &err) == SMCR_WIRE_INVALID) {
			char name[SMCR_CONN_NAME_MAX];

			smcr_warn("fd %d: server sent data before answering our CLC Proposal; %s",
				  smcr_fd_label(fd), smcr_conn_name(fd, name, sizeof(name)));
			return -EPROTO;
		}
		return 0; /* a valid prefix: smcr_clc_sock_recv() waits for the rest */
	}
}

/* Ask the transport for our Proposal and send it.  0, > 0 reason or -errno. */
static int client_propose(int fd, const struct smcr_transport_ops *ops, struct smcr_xconn *xc,
			  int wait, int64_t t0)
{
	struct smcr_clc_msg prop;
	int rc;

	memset(&prop, 0, sizeof(prop));
	rc = ops->client_propose(xc, &prop);
	if (rc)
		return rc;
	rc = smcr_clc_sock_send(fd, &prop, smcr_sys_deadline(wait));
	if (rc)
		return rc;
	smcr_dbg("fd %d: Proposal sent %lld us after the handshake began", smcr_fd_label(fd),
		 (long long)((smcr_now_ns() - t0) / 1000));
	return 0;
}

/*
 * The server's reply is all there: consume it; on an Accept attach and
 * confirm.  Returns 0, > 0 reason or -errno.
 */
static int client_take_reply(int fd, const struct smcr_transport_ops *ops, struct smcr_xconn *xc,
			     int wait, uint32_t *peer_size, int64_t t0)
{
	struct smcr_clc_msg reply, conf;
	int rc = smcr_clc_sock_recv(fd, &reply, smcr_sys_deadline(wait));

	if (rc)
		return rc;
	if (reply.hdr.type == SMCR_CLC_DECLINE)
		return smcr_clc_decline_reason(&reply);
	if (reply.hdr.type != SMCR_CLC_ACCEPT)
		return -EPROTO;
	smcr_dbg("fd %d: Accept read %lld us after the handshake began", smcr_fd_label(fd),
		 (long long)((smcr_now_ns() - t0) / 1000));
	memset(&conf, 0, sizeof(conf));
	rc = ops->client_attach(xc, &reply, &conf, peer_size);
	if (rc > 0) {
		int drc = smcr_clc_sock_decline(fd, (uint32_t)rc, smcr_sys_deadline(wait));

		return drc < 0 ? drc : rc;
	}
	if (rc < 0)
		return rc;
	rc = smcr_clc_sock_send(fd, &conf, smcr_sys_deadline(wait));
	smcr_dbg("fd %d: Confirm sent %lld us after the handshake began", smcr_fd_label(fd),
		 (long long)((smcr_now_ns() - t0) / 1000));
	return rc;
}

/* How long the server may take to answer our Proposal. */
static int first_reply_ms(int wait)
{
	return wait > CLC_FIRST_REPLY_MS ? wait : CLC_FIRST_REPLY_MS;
}

/*
 * The server's answer after we gave SMC up (smcr_hs_give_up()), all there: consume
 * it, and answer an Accept with a Decline, as a client that cannot attach
 * does.  Nothing of CLC is left in the stream then: TCP with `reason`.
 */
static int client_take_late_reply(int fd, int wait, uint32_t reason)
{
	struct smcr_clc_msg reply;
	int rc = smcr_clc_sock_recv(fd, &reply, smcr_sys_deadline(wait));

	if (rc)
		return rc;
	if (reply.hdr.type == SMCR_CLC_ACCEPT)
		rc = smcr_clc_sock_decline(fd, reason, smcr_sys_deadline(wait));
	else if (reply.hdr.type != SMCR_CLC_DECLINE)
		rc = -EPROTO;
	return rc ? rc : (int)reason;
}

/* Proposal sent; the reply decides.  Returns 0, > 0 reason or -errno. */
static int client_handshake(int fd, const struct smcr_transport_ops *ops, struct smcr_xconn **xc,
			    const struct smcr_sock_opts *opts, uint32_t *peer_size, int64_t t0)
{
	int wait = smcr_hs_wait_ms(opts);
	int rc = client_propose(fd, ops, *xc, wait, t0);

	if (rc == 0)
		rc = client_peek_reply(fd, ops, *xc, smcr_sys_deadline(first_reply_ms(wait)));
	if (rc == -ETIMEDOUT) {
		/*
		 * the blocking form of smcr_hs_give_up(): the answer is awaited
		 * as data would be
		 */
		smcr_hs_log_give_up(fd, SMCR_CLC_DECL_TIMEOUT_CL, first_reply_ms(wait));
		ops->destroy(*xc, false);
		*xc = NULL;
		rc = client_peek_reply(fd, ops, NULL, -1);
		return rc ? rc : client_take_late_reply(fd, wait, SMCR_CLC_DECL_TIMEOUT_CL);
	}
	if (rc == 0)
		rc = client_take_reply(fd, ops, *xc, wait, peer_size, t0);
	return rc;
}

/* The TCP peer of `fd`, for the negative cache; false if unknown. */
static bool peer_addr(int fd, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);

	return smcr_libc.getpeername(fd, (struct sockaddr *)ss, &len) == 0;
}
/*
 * SMC-R was asked for by configuration (SMCR_TRANSPORT=rdma, SMCR_PEERS) but
 * no RDMA device serves the connection's address: every such connection
 * stays TCP, which whoever configured it must hear at the default log level,
 * once per session (and asked of warn_once's marker once per process).
 */
static void warn_no_rdma_device(void)
{
	static atomic_bool warned;
	const struct smcr_config *cfg = smcr_config_get();

	if ((cfg->transport == SMCR_CONFIG_TRANSPORT_RDMA || cfg->n_peers > 0) &&
	    !atomic_exchange(&warned, true))
		smcr_warn_once_per_session(
			"SMC-R is configured (SMCR_TRANSPORT=rdma or SMCR_PEERS), but no RDMA"
			" device serves this host's address for it: those connections stay plain"
			" TCP (reason NOSMCRDEV); `rdma link` lists the devices");
}


/*
 * The policy's transport for a client, and its per-connection state: 0, or
 * the reason to stay TCP (nothing sent), counted.
 */
static int client_begin(int tcp_fd, const struct smcr_sock_opts *opts,
			const struct smcr_transport_ops **ops, struct smcr_xconn **xc)
{
	int rc = 0;

	if (opts && opts->plan && opts->plan->ops)
		*ops = opts->plan->ops;
	else
		rc = smcr_policy_client(smcr_config_get(), tcp_fd, ops);
	*xc = NULL;
	if (rc) {
		smcr_stats_fallback(rc);
		return rc;
	}
	rc = (*ops)->create(tcp_fd, smcr_hs_rmb_size(*ops, opts), smcr_hs_wait_ms(opts), xc);
	if (rc < 0) {
		/*
		 * Nothing sent yet: no RDMA device for our address, or no fd or
		 * memory for the connection's state, is a plain fallback.
		 */
		*xc = NULL;
		if (rc == -ENODEV && !(*ops)->same_host) {
			rc = SMCR_CLC_DECL_NOSMCRDEV;
			warn_no_rdma_device();
		} else if (rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM)
			rc = SMCR_CLC_DECL_MEM;
		else
			rc = SMCR_CLC_DECL_INTERR;
		smcr_dbg("fd %d: no SMC over %s: %s", smcr_fd_label(tcp_fd), (*ops)->name,
			 smcr_fallback_reason_str(rc));
		smcr_stats_fallback(rc);
	}
	return rc;
}

int smcr_sock_connect_plan(int tcp_fd, const struct sockaddr_storage *peer,
			   struct smcr_client_plan *plan)
{
	plan->ops = NULL;
	return smcr_policy_client_to(smcr_config_get(), tcp_fd, peer, &plan->ops);
}

/* The client handshake ended with `rc`: the connection, or its state let go. */
static int client_end(int tcp_fd, const struct smcr_transport_ops *ops, struct smcr_xconn *xc,
		      uint32_t peer_size, int spin_us, int rc, struct smcr_sock **out)
{
	struct sockaddr_storage peer;

	if (rc == 0) {
		*out = smcr_conn_new(tcp_fd, false, ops, xc, peer_size, spin_us);
		if (!*out)
			rc = -ENOMEM; /* after Confirm: too late to decline */
	}
	if (!ops->same_host && peer_addr(tcp_fd, &peer))
		smcr_policy_rdma_result((struct sockaddr *)&peer, rc, smcr_now_ms());
	else if (ops->same_host && rc > 0 && peer_addr(tcp_fd, &peer))
		smcr_policy_proposal_failed((struct sockaddr *)&peer, rc);
	if (rc == 0)
		return 0;
	if (xc)
		ops->destroy(xc, false);
	if (rc > 0)
		smcr_stats_fallback(rc);
	else
		smcr_stats_handshake_error();
	smcr_dbg("client handshake on fd %d (%s): %d", tcp_fd, ops->name, rc);
	return rc;
}

int smcr_sock_connect(int tcp_fd, const struct smcr_sock_opts *opts, struct smcr_sock **out)
{
	const struct smcr_transport_ops *ops;
	struct smcr_xconn *xc;
	uint32_t peer_size = 0;
	int64_t t0 = smcr_now_ns();
	int rc;

	*out = NULL;
	rc = client_begin(tcp_fd, opts, &ops, &xc);
	if (rc)
		return rc;
	rc = client_handshake(tcp_fd, ops, &xc, opts, &peer_size, t0);
	return client_end(tcp_fd, ops, xc, peer_size, opts ? opts->spin_us : 0, rc, out);
}

/* The client's side: the server's answer to our Proposal, once it is all there. */
int smcr_hs_client_advance(struct smcr_handshake *hs)
{
	struct smcr_clc_msg msg;
	int need, rc = smcr_clc_sock_peek(hs->tcp_fd, &msg, &need);

	if (rc == -ESHUTDOWN)
		return -ECONNRESET;
	if (rc < 0)
		return rc;
	if (rc == 1 && hs->gave_up) {
		smcr_hs_clear_lowat(hs);
		return client_take_late_reply(hs->tcp_fd, hs->wait_ms, hs->gave_up);
	}
	if (rc == 1)
		return client_take_reply(hs->tcp_fd, hs->ops, hs->xc, hs->wait_ms, &hs->peer_size,
					 hs->t0_ns);
	if (smcr_now_ms() >= hs->deadline)
		smcr_hs_give_up(hs, SMCR_CLC_DECL_TIMEOUT_CL, first_reply_ms(hs->wait_ms));
	smcr_hs_set_lowat(hs, need);
	return SMCR_HANDSHAKE_PENDING;
}

/* The client's handshake in steps ended with `rc`: the connection, or its state let go. */
int smcr_hs_client_end(struct smcr_handshake *hs, int rc, struct smcr_sock **out)
{
	struct smcr_xconn *xc = hs->xc;

	hs->xc = NULL; /* the connection's now, or let go by client_end() */
	return client_end(hs->tcp_fd, hs->ops, xc, hs->peer_size, hs->spin_us, rc, out);
}

int smcr_sock_connect_start(int tcp_fd, const struct smcr_sock_opts *opts,
			    struct smcr_handshake **out)
{
	const struct smcr_transport_ops *ops;
	struct smcr_handshake *hs;
	struct smcr_sock *none;
	struct smcr_xconn *xc;
	int64_t t0 = smcr_now_ns();
	int rc;

	*out = NULL;
	rc = client_begin(tcp_fd, opts, &ops, &xc);
	if (rc)
		return rc;
	hs = calloc(1, sizeof(*hs));
	if (!hs) /* nothing sent yet */
		return client_end(tcp_fd, ops, xc, 0, 0, SMCR_CLC_DECL_MEM, &none);
	hs->client = true;
	hs->tcp_fd = tcp_fd;
	hs->ops = ops;
	hs->spin_us = opts ? opts->spin_us : 0;
	hs->wait_ms = smcr_hs_wait_ms(opts);
	hs->t0_ns = t0;
	hs->wait_fd = hs->timer_fd = hs->watched_xfd = -1;
	rc = client_propose(tcp_fd, ops, xc, hs->wait_ms, t0);
	if (rc) {
		free(hs);
		return client_end(tcp_fd, ops, xc, 0, 0, rc, &none);
	}
	hs->xc = xc;
	hs->deadline = smcr_sys_deadline(first_reply_ms(hs->wait_ms));
	*out = hs;
	return SMCR_HANDSHAKE_PENDING;
}
