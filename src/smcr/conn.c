// SPDX-License-Identifier: MIT
/*
 * Connection life: the CLC handshake over the TCP socket (client and server),
 * creation and release of struct smcr_sock, progress (taking control
 * messages), readiness and blocking waits.
 *
 * Handshake (protocol.md §3, SMC-Dv2 form as loopback-ism uses):
 *   client: Proposal ->            server: classify (peek), consume Proposal
 *           <- Accept | Decline            transport attaches (shm: rendezvous)
 *           Confirm | Decline ->           active | fallback
 * A Decline at any step leaves both sides on TCP with nothing of CLC left in
 * the stream; a malformed CLC message leaves the stream in an unknown state
 * and is a hard error.  A side that waited in vain for the peer's next
 * message gives SMC up, but not the connection (give_up() below).
 */
#include "smcr/conn.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/sockaddr.h"
#include "smcr/libc.h"
#include "smcr/clc.h"
#include "smcr/confine.h"
#include "smcr/policy.h"
#include "smcr/registry.h"
#include "smcr/share.h"
#include "smcr/shm.h"
#include "smcr/sys.h"
#include "smcr/stats.h"
#include "smcr/engine.h"

#define CLC_WAIT_MS 6000          /* Linux CLC_WAIT_TIME (6 s): a TCG guest's kernel needs >2 s */
#define CLC_FIRST_REPLY_MS 10000  /* the server answers at its first I/O, maybe later */
#define DEFAULT_RMB_SIZE (256u * 1024)
/*
 * Same host: a larger ring halves the sleep/wake-up round trips of a bulk
 * stream (sockperf 65000 B under load: +35-55%, CPU per message -30%) and
 * costs a short connection nothing more (shm.c faults pages in as they are
 * written, pools them, zeroes only what was written).
 */
#define SHM_DEFAULT_RMB_SIZE (1024u * 1024)
#define MAX_RMB_SIZE (512u * 1024 * 1024)

/* ---- CLC over the TCP socket -------------------------------------------------- */

static int clc_send(int fd, const struct smcr_clc_msg *msg, int64_t deadline)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t len = smcr_clc_encode(msg, buf, sizeof(buf), &err), off = 0;

	if (len == 0) {
		smcr_err("cannot encode CLC %s: %s", smcr_clc_type_str(msg->hdr.type),
			 smcr_clc_err_str(err));
		return -EINVAL;
	}
	while (off < len) {
		ssize_t n = smcr_libc.send(fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			off += (size_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int w = smcr_sys_wait_fd(fd, POLLOUT, deadline);

			if (w <= 0)
				return w == 0 ? -ETIMEDOUT : w;
		} else if (n < 0 && errno != EINTR) {
			return -errno;
		}
	}
	return 0;
}

/* Read exactly `len` bytes (never more: what follows belongs to someone else). */
static int read_exact(int fd, uint8_t *buf, size_t len, int64_t deadline)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = smcr_libc.recv(fd, buf + got, len - got, MSG_DONTWAIT);

		if (n > 0) {
			got += (size_t)n;
		} else if (n == 0) {
			return -ECONNRESET;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int w = smcr_sys_wait_fd(fd, POLLIN, deadline);

			if (w <= 0)
				return w == 0 ? -ETIMEDOUT : w;
		} else if (errno != EINTR) {
			return -errno;
		}
	}
	return 0;
}

/* Receive one complete CLC message; anything malformed is a hard error. */
static int clc_recv(int fd, struct smcr_clc_msg *msg, int64_t deadline)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t len = 0;
	int rc;

	rc = read_exact(fd, buf, SMCR_CLC_HDR_LEN, deadline);
	if (rc)
		return rc;
	if (smcr_clc_frame(buf, SMCR_CLC_HDR_LEN, &len, &err) == SMCR_WIRE_INVALID ||
	    len > sizeof(buf) || len < SMCR_CLC_HDR_LEN) {
		smcr_warn("peer sent no valid CLC header: %s", smcr_clc_err_str(err));
		return -EPROTO;
	}
	rc = read_exact(fd, buf + SMCR_CLC_HDR_LEN, len - SMCR_CLC_HDR_LEN, deadline);
	if (rc)
		return rc;
	if (smcr_clc_decode(buf, len, msg, &len, &err) != SMCR_WIRE_OK) {
		smcr_warn("invalid CLC message: %s", smcr_clc_err_str(err));
		return -EPROTO;
	}
	return 0;
}

static int clc_send_decline(int fd, uint32_t reason, int64_t deadline)
{
	struct smcr_clc_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_DECLINE;
	m.hdr.version = SMCR_CLC_V2;
	m.decline.diag = reason;
	m.decline.os_type = SMCR_CLC_OS_LINUX;
	/* "out of sync": the Accept named a link group we do not have (the kernel ends it) */
	m.hdr.flag = reason == SMCR_CLC_DECL_SYNCERR;
	return clc_send(fd, &m, deadline);
}

/* A Decline from the peer: its reason, or "peer declined" if it gave none usable. */
static int decline_reason(const struct smcr_clc_msg *m)
{
	uint32_t d = m->decline.diag;

	return d > 0 && d <= INT32_MAX ? (int)d : SMCR_CLC_DECL_PEERDECL;
}

/* ---- connection objects ---------------------------------------------------------- */

struct smcr_sock *smcr_conn_new(int tcp_fd, bool server, const struct smcr_transport_ops *ops,
				struct smcr_xconn *xc, uint32_t peer_size, int spin_us)
{
	/* Shared only with transport state that is shared too (shm); else private. */
	bool shared = ops->shared && ops->shared(xc);
	struct smcr_sock *s = shared ? smcr_share_alloc(sizeof(*s)) : NULL;

	if (s)
		s->shared = true;
	else
		s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	smcr_hold_init(s);
	s->tcp_fd = tcp_fd;
	s->server = server;
	s->ops = ops;
	s->xc = xc;
	s->peer_size = peer_size;
	ops->ring(xc, &s->rmb, &s->rmb_size);
	ops->tokens(xc, &s->local_token, &s->peer_token);
	s->state = SMCR_CONN_ACTIVE;
	s->spin_us = spin_us;
	s->stats = smcr_stats_conn_open(s);
	s->opened_ms = smcr_now_ms();
	return s;
}

void smcr_conn_free(struct smcr_sock *s, bool clean)
{
	smcr_policy_conn_ended(s);
	smcr_stats_conn_close(s, s->state == SMCR_CONN_ABORTED);
	s->ops->destroy(s->xc, clean);
	smcr_hold_forget(s);
	pthread_mutex_destroy(&s->lock);
	if (s->shared)
		smcr_share_free(s);
	else
		free(s);
}

static uint32_t rmb_size_wish(const struct smcr_transport_ops *ops,
			      const struct smcr_sock_opts *opts)
{
	uint32_t want = opts && opts->rcvbuf ? opts->rcvbuf
			: ops->same_host ? SHM_DEFAULT_RMB_SIZE : DEFAULT_RMB_SIZE;

	return want > MAX_RMB_SIZE ? MAX_RMB_SIZE : want;
}

static int clc_wait_ms(const struct smcr_sock_opts *opts)
{
	return opts && opts->handshake_ms > 0 ? opts->handshake_ms : CLC_WAIT_MS;
}

/* ---- client ------------------------------------------------------------------------ */

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

bool smcr_peer_is_registered(int tcp_fd)
{
	struct sockaddr_storage peer;

	return local_peer(tcp_fd, &peer) && smcr_registry_vouches(tcp_fd, &peer);
}

bool smcr_peer_is_registered_at(int tcp_fd, const struct sockaddr_storage *peer)
{
	return local_peer_at(tcp_fd, peer) && smcr_registry_vouches(tcp_fd, peer);
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
				  fd, smcr_conn_name(fd, name, sizeof(name)));
			return -EPROTO;
		}
		return 0; /* a valid prefix: clc_recv() waits for the rest */
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
	rc = clc_send(fd, &prop, smcr_sys_deadline(wait));
	if (rc)
		return rc;
	smcr_dbg("fd %d: Proposal sent %lld us after the handshake began", fd,
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
	int rc = clc_recv(fd, &reply, smcr_sys_deadline(wait));

	if (rc)
		return rc;
	if (reply.hdr.type == SMCR_CLC_DECLINE)
		return decline_reason(&reply);
	if (reply.hdr.type != SMCR_CLC_ACCEPT)
		return -EPROTO;
	smcr_dbg("fd %d: Accept read %lld us after the handshake began", fd,
		 (long long)((smcr_now_ns() - t0) / 1000));
	memset(&conf, 0, sizeof(conf));
	rc = ops->client_attach(xc, &reply, &conf, peer_size);
	if (rc > 0) {
		int drc = clc_send_decline(fd, (uint32_t)rc, smcr_sys_deadline(wait));

		return drc < 0 ? drc : rc;
	}
	if (rc < 0)
		return rc;
	rc = clc_send(fd, &conf, smcr_sys_deadline(wait));
	smcr_dbg("fd %d: Confirm sent %lld us after the handshake began", fd,
		 (long long)((smcr_now_ns() - t0) / 1000));
	return rc;
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
static void log_give_up(int fd, uint32_t reason, int waited_ms)
{
	char name[SMCR_CONN_NAME_MAX];
	bool client = reason == SMCR_CLC_DECL_TIMEOUT_CL;

	smcr_warn("fd %d: no %s within %d ms: SMC given up (%s), the connection goes on over"
		  " TCP once the %s's late answer is taken; %s",
		  fd, client ? "answer to our Proposal" : "Confirm after our Accept", waited_ms,
		  smcr_fallback_reason_str((int)reason), client ? "server" : "client",
		  smcr_conn_name(fd, name, sizeof(name)));
}

/* How long the server may take to answer our Proposal. */
static int first_reply_ms(int wait)
{
	return wait > CLC_FIRST_REPLY_MS ? wait : CLC_FIRST_REPLY_MS;
}

/*
 * The server's answer after we gave SMC up (give_up()), all there: consume
 * it, and answer an Accept with a Decline, as a client that cannot attach
 * does.  Nothing of CLC is left in the stream then: TCP with `reason`.
 */
static int client_take_late_reply(int fd, int wait, uint32_t reason)
{
	struct smcr_clc_msg reply;
	int rc = clc_recv(fd, &reply, smcr_sys_deadline(wait));

	if (rc)
		return rc;
	if (reply.hdr.type == SMCR_CLC_ACCEPT)
		rc = clc_send_decline(fd, reason, smcr_sys_deadline(wait));
	else if (reply.hdr.type != SMCR_CLC_DECLINE)
		rc = -EPROTO;
	return rc ? rc : (int)reason;
}

/* Proposal sent; the reply decides.  Returns 0, > 0 reason or -errno. */
static int client_handshake(int fd, const struct smcr_transport_ops *ops, struct smcr_xconn **xc,
			    const struct smcr_sock_opts *opts, uint32_t *peer_size, int64_t t0)
{
	int wait = clc_wait_ms(opts);
	int rc = client_propose(fd, ops, *xc, wait, t0);

	if (rc == 0)
		rc = client_peek_reply(fd, ops, *xc, smcr_sys_deadline(first_reply_ms(wait)));
	if (rc == -ETIMEDOUT) {
		/* the blocking form of give_up(): the answer is awaited as data would be */
		log_give_up(fd, SMCR_CLC_DECL_TIMEOUT_CL, first_reply_ms(wait));
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
	rc = (*ops)->create(tcp_fd, rmb_size_wish(*ops, opts), clc_wait_ms(opts), xc);
	if (rc < 0) {
		/*
		 * Nothing sent yet: no RDMA device for our address, or no fd or
		 * memory for the connection's state, is a plain fallback.
		 */
		*xc = NULL;
		if (rc == -ENODEV && !(*ops)->same_host)
			rc = SMCR_CLC_DECL_NOSMCRDEV;
		else if (rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM)
			rc = SMCR_CLC_DECL_MEM;
		else
			rc = SMCR_CLC_DECL_INTERR;
		smcr_dbg("fd %d: no SMC over %s: %s", tcp_fd, (*ops)->name,
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

/* ---- server ------------------------------------------------------------------------ */

int smcr_sock_classify(int tcp_fd)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	struct smcr_clc_msg msg;
	enum smcr_clc_err err;
	size_t len;
	ssize_t n;

	n = smcr_libc.recv(tcp_fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? SMCR_CLASSIFY_NOTHING : -errno;
	if (n == 0)
		return SMCR_CLASSIFY_EOF;
	switch (smcr_clc_decode(buf, (size_t)n, &msg, &len, &err)) {
	case SMCR_WIRE_NEED_MORE:
		return SMCR_CLASSIFY_NEED_MORE;
	case SMCR_WIRE_OK:
		return msg.hdr.type == SMCR_CLC_PROPOSAL ? SMCR_CLASSIFY_PROPOSAL
							 : SMCR_CLASSIFY_TCP;
	default:
		return SMCR_CLASSIFY_TCP;
	}
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

size_t smcr_clc_decline_encode(uint32_t reason, void *buf, size_t cap)
{
	struct smcr_clc_msg m;
	enum smcr_clc_err err;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_CLC_DECLINE;
	m.hdr.version = SMCR_CLC_V2;
	m.decline.diag = reason;
	m.decline.os_type = SMCR_CLC_OS_LINUX;
	return smcr_clc_encode(&m, buf, cap, &err);
}

/*
 * One server handshake between the Accept and the client's last word
 * (engine.h smcr_sock_accept_start/step).  Nothing here waits for the
 * client unless the caller asked to: the client's bytes, the transport's
 * rendezvous and the wait bound drive it (design §4).
 */
struct smcr_handshake {
	bool client;        /* ours is the Proposal: its answer is awaited */
	int tcp_fd;
	const struct smcr_transport_ops *ops;
	struct smcr_xconn *xc;
	int spin_us;
	int64_t deadline;   /* the client's last word must have come by then (ms) */
	int64_t accept_ns;  /* server: when the Accept went out (debug timing) */
	int64_t t0_ns;      /* client: when the handshake began (debug timing) */
	int wait_ms;        /* client: the CLC wait bound per message */
	int attach_rc;      /* server_attach(): -EAGAIN until it attached or refused */
	uint32_t gave_up;   /* the reason we gave SMC up at the bound (give_up()); 0 = not */
	uint32_t peer_size;
	int lowat;          /* SO_RCVLOWAT we set while a message is partial; 0 = none */
	int wait_fd;        /* smcr_handshake_fd(): epoll of the three below; -1 = not made */
	int timer_fd;       /* fires at `deadline` */
	int watched_xfd;    /* the transport's server_wait_fd() in wait_fd; -1 = none */
};

/*
 * The next CLC message on the stream if it is all there (peeked, not
 * consumed): 1 and *msg, 0 not complete yet (*need: bytes it takes; 0 none in), or
 * -errno (-ESHUTDOWN: the client closed; -EPROTO: not CLC).
 */
static int peek_clc_msg(int fd, struct smcr_clc_msg *msg, int *need)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t len = 0;
	ssize_t n = smcr_libc.recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);

	*need = 0; /* nothing in: any byte is news */
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
	*need = SMCR_CLC_HDR_LEN;
	if (n == 0)
		return -ESHUTDOWN;
	if (smcr_clc_frame(buf, (size_t)n, &len, &err) == SMCR_WIRE_INVALID ||
	    (len && (len > sizeof(buf) || len < SMCR_CLC_HDR_LEN))) {
		char name[SMCR_CONN_NAME_MAX];

		smcr_warn("fd %d: the peer sent no valid CLC message where one was due; %s", fd,
			  smcr_conn_name(fd, name, sizeof(name)));
		return -EPROTO;
	}
	if (len)
		*need = (int)len;
	if (len == 0 || (size_t)n < len)
		return 0;
	if (smcr_clc_decode(buf, len, msg, &len, &err) != SMCR_WIRE_OK) {
		char name[SMCR_CONN_NAME_MAX];

		smcr_warn("fd %d: invalid CLC message: %s; %s", fd, smcr_clc_err_str(err),
			  smcr_conn_name(fd, name, sizeof(name)));
		return -EPROTO;
	}
	return 1;
}

/*
 * A message arrives in pieces: until it is whole, the socket polls readable
 * only once `need` bytes are in (SO_RCVLOWAT), so a client that sends half a
 * message and stops does not make every wait return at once.
 */
static void hs_set_lowat(struct smcr_handshake *hs, int need)
{
	if (need == 0 || need == hs->lowat)
		return;
	if (smcr_libc.setsockopt(hs->tcp_fd, SOL_SOCKET, SO_RCVLOWAT, &need, sizeof(need)) == 0)
		hs->lowat = need;
}

static void hs_clear_lowat(struct smcr_handshake *hs)
{
	int one = 1;

	if (hs->lowat)
		(void)smcr_libc.setsockopt(hs->tcp_fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	hs->lowat = 0;
}

static void hs_sync_wait_fd(struct smcr_handshake *hs);

/*
 * The bound passed without the peer's next message (log_give_up() says why
 * that is no reason to end the connection): let go of the transport's part
 * (the rendezvous, rings, a knock in progress) and of the bound, and wait
 * for that message as a read waits for data.
 */
static void give_up(struct smcr_handshake *hs, uint32_t reason, int waited_ms)
{
	struct itimerspec off = { { 0, 0 }, { 0, 0 } };

	log_give_up(hs->tcp_fd, reason, waited_ms);
	hs->gave_up = reason;
	hs->attach_rc = (int)reason; /* nothing attaches any more: hs_finish() declines */
	hs_sync_wait_fd(hs);         /* the transport's fd leaves the wait fd first */
	if (hs->xc)
		hs->ops->destroy(hs->xc, false);
	hs->xc = NULL;
	hs->deadline = INT64_MAX;
	if (hs->timer_fd >= 0)
		(void)timerfd_settime(hs->timer_fd, 0, &off, NULL);
}

/* The client's last word is all there: consume it and decide. */
static int hs_finish(struct smcr_handshake *hs, const struct smcr_clc_msg *peeked)
{
	struct smcr_clc_msg reply;
	int wait = CLC_WAIT_MS, rc;

	rc = clc_recv(hs->tcp_fd, &reply, smcr_now_ms()); /* all there: never waits */
	if (rc)
		return rc;
	if (reply.hdr.type != peeked->hdr.type)
		return -EPROTO;
	if (reply.hdr.type == SMCR_CLC_DECLINE)
		return hs->attach_rc > 0 ? hs->attach_rc : decline_reason(&reply);
	if (reply.hdr.type != SMCR_CLC_CONFIRM)
		return -EPROTO;
	if (hs->attach_rc > 0) {
		/*
		 * The client believes in SMC but we could not attach: decline after
		 * its Confirm, as Linux's server does (smc_listen_decline); a Linux
		 * client that sees no CONFIRM LINK looks for this Decline and falls
		 * back to TCP.
		 */
		int drc = clc_send_decline(hs->tcp_fd, (uint32_t)hs->attach_rc,
					   smcr_sys_deadline(wait));

		return drc < 0 ? drc : hs->attach_rc;
	}
	rc = hs->ops->server_confirm(hs->xc, &reply);
	return rc > 0 ? -EPROTO : rc; /* after Confirm there is no way back to TCP */
}

/* Everything that can be done now: SMCR_HANDSHAKE_PENDING, or the result. */
static int hs_advance(struct smcr_handshake *hs)
{
	struct smcr_clc_msg msg;
	int need, rc;

	if (hs->attach_rc == -EAGAIN) {
		hs->attach_rc = hs->ops->server_attach(hs->xc, hs->tcp_fd, &hs->peer_size);
		if (hs->attach_rc < 0 && hs->attach_rc != -EAGAIN)
			return hs->attach_rc;
	}
	rc = peek_clc_msg(hs->tcp_fd, &msg, &need);
	if (rc == -ESHUTDOWN) {
		/* It left without a word: nothing of CLC remains, the stream just ends. */
		smcr_dbg("fd %d: the client closed instead of confirming", hs->tcp_fd);
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
		give_up(hs, SMCR_CLC_DECL_TIMEOUT_AL,
			(int)(hs->deadline - hs->accept_ns / 1000000));
	hs_set_lowat(hs, need);
	return SMCR_HANDSHAKE_PENDING;
}

/* The client's side: the server's answer to our Proposal, once it is all there. */
static int hs_client_advance(struct smcr_handshake *hs)
{
	struct smcr_clc_msg msg;
	int need, rc = peek_clc_msg(hs->tcp_fd, &msg, &need);

	if (rc == -ESHUTDOWN)
		return -ECONNRESET;
	if (rc < 0)
		return rc;
	if (rc == 1 && hs->gave_up) {
		hs_clear_lowat(hs);
		return client_take_late_reply(hs->tcp_fd, hs->wait_ms, hs->gave_up);
	}
	if (rc == 1)
		return client_take_reply(hs->tcp_fd, hs->ops, hs->xc, hs->wait_ms, &hs->peer_size,
					 hs->t0_ns);
	if (smcr_now_ms() >= hs->deadline)
		give_up(hs, SMCR_CLC_DECL_TIMEOUT_CL, first_reply_ms(hs->wait_ms));
	hs_set_lowat(hs, need);
	return SMCR_HANDSHAKE_PENDING;
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
	hs->wait_ms = clc_wait_ms(opts);
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

int smcr_handshake_step(struct smcr_handshake *hs, int64_t deadline, struct smcr_sock **out)
{
	int rc;

	*out = NULL;
	for (;;) {
		rc = hs->client ? hs_client_advance(hs) : hs_advance(hs);
		if (rc != SMCR_HANDSHAKE_PENDING || smcr_now_ms() >= deadline)
			break;
		hs_wait(hs, deadline);
	}
	if (rc == SMCR_HANDSHAKE_PENDING) {
		hs_sync_wait_fd(hs);
		return rc;
	}
	hs_clear_lowat(hs);
	if (hs->client) {
		struct smcr_xconn *xc = hs->xc;

		hs->xc = NULL; /* the connection's now, or let go by client_end() */
		return client_end(hs->tcp_fd, hs->ops, xc, hs->peer_size, hs->spin_us, rc, out);
	}
	if (rc == 0) {
		smcr_dbg("fd %d: Confirm taken %lld us after our Accept", hs->tcp_fd,
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
		int drc = clc_send_decline(fd, rc == SMCR_CLC_DECL_RULE ? SMCR_CLC_DECL_NOSMCDEV
									: (uint32_t)rc,
					   smcr_now_ms());

		return drc < 0 ? drc : rc;
	}
	if (rc < 0)
		return rc;
	return clc_send(fd, &acc, smcr_now_ms());
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

int smcr_sock_accept_start(int tcp_fd, const struct smcr_sock_opts *opts,
			   struct smcr_handshake **out)
{
	const struct smcr_transport_ops *ops = &smcr_shm_ops;
	struct smcr_handshake *hs = NULL;
	struct smcr_xconn *xc = NULL;
	struct smcr_clc_msg prop;
	int64_t prop_ns;
	int rc, decline = 0;

	*out = NULL;
	/* Classified already: the whole Proposal is in, reading it never waits. */
	rc = clc_recv(tcp_fd, &prop, smcr_now_ms());
	prop_ns = smcr_now_ns();
	if (rc == 0 && prop.hdr.type != SMCR_CLC_PROPOSAL)
		rc = -EPROTO;
	if (rc == 0) {
		decline = server_policy(tcp_fd, &prop, &ops);
		if (decline == 0 && ops->same_host && !smcr_peer_is_local(tcp_fd))
			decline = SMCR_CLC_DECL_NOTLOCAL;
		hs = decline == 0 ? calloc(1, sizeof(*hs)) : NULL;
		/* Out of memory here still answers the Proposal (Decline MEM). */
		if (decline == 0 && !hs)
			decline = SMCR_CLC_DECL_MEM;
		if (hs) {
			hs->tcp_fd = tcp_fd;
			hs->ops = ops;
			hs->spin_us = opts ? opts->spin_us : 0;
			hs->deadline = smcr_sys_deadline(clc_wait_ms(opts));
			hs->attach_rc = -EAGAIN;
			hs->wait_fd = hs->timer_fd = hs->watched_xfd = -1;
		}
		if (decline == 0) {
			rc = ops->create(tcp_fd, rmb_size_wish(ops, opts), clc_wait_ms(opts), &xc);
			if (rc < 0) {
				xc = NULL;
				decline = rc == -ENODEV && !ops->same_host
						  ? SMCR_CLC_DECL_NOSMCRDEV
						  : SMCR_CLC_DECL_MEM;
			}
		}
		if (decline == 0)
			hs->xc = xc;
		rc = server_answer(tcp_fd, hs, &prop, decline);
	}
	if (rc == 0) {
		hs->accept_ns = smcr_now_ns();
		smcr_dbg("fd %d: Accept sent %lld us after the Proposal was read", tcp_fd,
			 (long long)((hs->accept_ns - prop_ns) / 1000));
		*out = hs;
		return SMCR_HANDSHAKE_PENDING;
	}
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
	rc = clc_recv(tcp_fd, &msg, smcr_sys_deadline(CLC_WAIT_MS));
	if (rc)
		return rc;
	rc = clc_send_decline(tcp_fd, reason, smcr_sys_deadline(CLC_WAIT_MS));
	if (rc)
		return rc;
	smcr_stats_fallback((int)reason);
	return 1;
}

/* ---- listener registry --------------------------------------------------------------- */

struct smcr_listener {
	struct smcr_registration reg; /* no fds: another process held the name, or not served */
	uint16_t port;
	bool served;                  /* false: smcr_listener_unserved() */
	struct smcr_stats_listener *stats;
};

static bool registry_retry_later(int rc)
{
	return rc == -EADDRINUSE || rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM ||
	       rc == -ENOBUFS;
}

/* What this process's clients do with the registry does not change the listener's. */
static uint32_t listener_flags(void)
{
	return smcr_config_get()->samehost ? 0u : SMCR_STATS_LISTENER_F_SAMEHOST_OFF;
}

/* `rc`: what registering it returned. */
static uint32_t listener_status(const struct smcr_listener *l, int rc)
{
	if (l->reg.owner_fd >= 0)
		return SMCR_STATS_LISTENER_SERVED;
	return rc == -EADDRINUSE ? SMCR_STATS_LISTENER_NAME_HELD : SMCR_STATS_LISTENER_NO_NAME;
}

struct smcr_listener *smcr_listener_unserved(int listen_fd, const char *why)
{
	struct sockaddr_storage ss = { .ss_family = AF_UNSPEC };
	socklen_t len = sizeof(ss);
	struct smcr_listener *l;
	int saved = errno;

	/*
	 * No registry call: a confined process may not make them; nor a
	 * getsockname its filter denies (the port is then unknown).
	 */
	if (smcr_call_allowed(SMCR_CALL_GETSOCKNAME) &&
	    (smcr_libc.getsockname(listen_fd, (struct sockaddr *)&ss, &len) < 0 ||
	     (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))) {
		errno = saved;
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (l) {
		l->reg.owner_fd = l->reg.probe_fd = -1;
		l->port = ss.ss_family == AF_UNSPEC ? 0 : smcr_sockaddr_port(&ss);
		l->stats = smcr_stats_listener_open(listen_fd, SMCR_STATS_LISTENER_NOT_SERVED,
						    listener_flags(), why);
	}
	errno = saved;
	return l;
}

int smcr_listener_register(int listen_fd, struct smcr_listener **out)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct smcr_registration reg;
	struct smcr_listener *l;
	char why[sizeof(((struct smcr_stats_listener *)0)->why)] = "";
	int rc;

	*out = NULL;
	if (smcr_libc.getsockname(listen_fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	if (smcr_policy_listener_excluded(listen_fd, why, sizeof(why))) {
		*out = smcr_listener_unserved(listen_fd, why);
		return -ECANCELED;
	}
	rc = smcr_registry_add(listen_fd, smcr_sockaddr_port(&ss), &reg);
	/*
	 * Registered by another process already (prefork, SO_REUSEPORT): fine;
	 * by another user: warned, and clients will not believe it.  Out of fds
	 * or memory for the name's sockets: a listener lives for days, so it
	 * stays a listener without a name and takes it on a later accept
	 * (smcr_listener_claim()) once the shortage has passed.
	 */
	if (rc < 0 && !registry_retry_later(rc))
		return rc;
	l = calloc(1, sizeof(*l));
	if (!l) {
		smcr_registry_remove(&reg);
		return -ENOMEM;
	}
	l->reg = reg;
	l->port = smcr_sockaddr_port(&ss);
	l->served = true;
	l->stats = smcr_stats_listener_open(listen_fd, listener_status(l, rc), listener_flags(),
					    NULL);
	*out = l;
	return 0;
}

bool smcr_listener_needs_claim(const struct smcr_listener *l)
{
	return l && l->served && l->reg.owner_fd < 0;
}

bool smcr_listener_claim(struct smcr_listener *l)
{
	int saved = errno;
	bool claimed = false;

	if (smcr_listener_needs_claim(l))
		claimed = smcr_registry_claim(l->port, &l->reg) == 0;
	if (claimed)
		smcr_stats_listener_status(l->stats, SMCR_STATS_LISTENER_SERVED, NULL);
	errno = saved;
	return claimed;
}

void smcr_listener_revoke(struct smcr_listener *l, int listen_fd, const char *why)
{
	/* An unserved listener has nothing to withdraw: its record keeps its cause. */
	if (l && !l->served)
		return;
	if (l) {
		smcr_registry_revoke(&l->reg);
		smcr_stats_listener_status(l->stats, SMCR_STATS_LISTENER_REVOKED, why);
	}
	smcr_tcpopt_unserve(listen_fd);
}

void smcr_listener_unregister(struct smcr_listener *l)
{
	if (!l)
		return;
	smcr_stats_listener_close(l->stats);
	if (l->served)
		smcr_registry_remove(&l->reg);
	free(l);
}

/* ---- progress and readiness ------------------------------------------------------------ */

unsigned smcr_conn_mask(const struct smcr_sock *s)
{
	unsigned mask = 0;
	bool reset = s->state == SMCR_CONN_ABORTED;
	bool peer_done = smcr_conn_peer_done(s);

	/* On TCP: only what is left in the ring; the readiness fd follows the socket. */
	if (s->went_tcp || s->tcp_tail)
		return !s->went_tcp && smcr_rx_readable(s) > 0 ? POLLIN : 0;
	if (smcr_rx_readable(s) > 0 || peer_done || reset || s->shut_rd)
		mask |= POLLIN;
	if (reset || s->shut_wr || (s->peer_conn_flags & SMCR_CDC_CONN_CLOSED) ||
	    smcr_tx_space(s) > 0)
		mask |= POLLOUT;
	if (peer_done)
		mask |= POLLRDHUP;
	if (reset || (peer_done && s->shut_wr))
		mask |= POLLHUP;
	if (reset || s->so_error)
		mask |= POLLERR;
	return mask;
}

/*
 * A server that cannot attach after our Confirm (it could not map our ring)
 * declines on the TCP stream, as Linux's does after a CONFIRM it cannot
 * serve, and lets go of the rings: it never read or wrote them.  What we
 * wrote into its ring since is still there, so the stream goes on over TCP
 * from its start, everything we wrote sent again there (tcp_tail.c), rather
 * than end in a reset.  Only for a client that has heard nothing over SMC
 * yet, on a complete Decline at the head of the TCP stream.  Lock held.
 */
static bool server_declined_late(struct smcr_sock *s)
{
	struct smcr_clc_msg msg;
	char name[SMCR_CONN_NAME_MAX];
	int need;

	if (s->server || s->cdc_received || !s->ops->peer_on_tcp)
		return false;
	if (peek_clc_msg(s->tcp_fd, &msg, &need) != 1 || msg.hdr.type != SMCR_CLC_DECLINE ||
	    clc_recv(s->tcp_fd, &msg, smcr_now_ms()) != 0)
		return false;
	smcr_warn("fd %d: the server declined after our Confirm (%s): the stream goes on over TCP"
		  " from its start; %s",
		  s->tcp_fd, smcr_fallback_reason_str(decline_reason(&msg)),
		  smcr_conn_name(s->tcp_fd, name, sizeof(name)));
	smcr_tail_begin(s);
	return true;
}

static void take_ctrl_msgs(struct smcr_sock *s)
{
	uint8_t msg[SMCR_CDC_MSG_LEN];

	/* Bounded: a hostile peer must not keep us here. */
	for (unsigned tries = 0; tries < 64 && s->state != SMCR_CONN_ABORTED; tries++) {
		int rc = s->ops->recv_ctrl(s->xc, msg);

		if (rc == 0)
			break;
		if (rc < 0) {
			/*
			 * The peer vanished; after its "closed" that is just the end,
			 * and after it went on over TCP the ring is all that is left.
			 */
			if (s->tcp_tail || (s->ops->peer_on_tcp && s->ops->peer_on_tcp(s->xc)) ||
			    server_declined_late(s))
				break;
			if (!(s->peer_conn_flags & (SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_ABORT)))
				smcr_close_abort_locked(s, ECONNRESET);
			break;
		}
		s->cdc_received++;
		smcr_rx_ctrl(s, msg);
	}
}

/*
 * SMC-R failover (the kernel's smc_switch_cursor): the transport moved the
 * connection to another link of its group.  Messages that came first are
 * taken already (the peer's consumer cursor only helps).  The peer surely
 * has what our last delivered CDC announced and what it consumed; what we
 * wrote after that is still in place in our copy of its ring (we never
 * write over what it has not consumed), so it is written again over the
 * new link, after a validation CDC naming that last delivered CDC, and one
 * CDC then carries our current cursors and flags.  Bytes the peer got
 * already are rewritten with the same values where it does not read any
 * more or has not read yet: nothing is lost, nothing delivered twice.
 */
static void conn_failover(struct smcr_sock *s)
{
	struct smcr_curs fin = { 0, 0 }, start;
	uint16_t fin_seq = 0;
	uint8_t wire[SMCR_CDC_MSG_LEN];
	uint32_t len = 0;
	int rc;

	if (!s->ops->failover || s->state == SMCR_CONN_ABORTED)
		return;
	rc = s->ops->failover(s->xc, &fin, &fin_seq);
	if (rc == 0)
		return;
	if (rc < 0) {
		smcr_close_abort_locked(s, ECONNRESET);
		return;
	}
	start = smcr_cdc_failover_start(fin, s->tx_cons, s->tx_prod, s->peer_size, &len);
	smcr_cdc_encode_validation(fin_seq, s->peer_token, wire);
	rc = s->ops->send_ctrl(s->xc, wire);
	if (rc == 0 && len)
		rc = s->ops->rewrite(s->xc, start.count, len);
	if (rc == 0)
		rc = smcr_conn_send_cdc(s, 0);
	s->link_switches++;
	s->bytes_resent += len;
	smcr_info("fd %d: moved to another link: %u bytes written again (last delivered CDC %u)",
		  s->tcp_fd, len, fin_seq);
	smcr_stats_conn_relink(s, len);
	if (rc)
		smcr_close_abort_locked(s, ECONNRESET);
}

static void conn_progress(struct smcr_sock *s, bool clear)
{
	for (int round = 0; round < 4; round++) {
		unsigned want = s->interest | POLLERR | POLLHUP;
		bool ready;

		if (s->went_tcp) {
			/* The rings are done with: nothing the peer says matters now. */
			s->ops->settle(s->xc, false);
			break;
		}
		take_ctrl_msgs(s);
		if (!s->tcp_tail && s->ops->peer_on_tcp && s->ops->peer_on_tcp(s->xc)) {
			take_ctrl_msgs(s); /* its last CDC came before the word */
			smcr_tail_begin(s);
		}
		conn_failover(s);
		/* Level semantics for outside waiters and engine threads. */
		if (s->waiters_rd)
			want |= POLLIN;
		if (s->waiters_wr)
			want |= POLLOUT;
		ready = (smcr_conn_mask(s) & want) != 0;
		if (!ready && !clear && s->ops->settle_lazy) {
			if (!s->ops->settle_lazy(s->xc))
				break;
		} else if (!s->ops->settle(s->xc, ready)) {
			break;
		}
	}
}

void smcr_conn_progress(struct smcr_sock *s)
{
	conn_progress(s, true);
}

void smcr_conn_progress_io(struct smcr_sock *s)
{
	conn_progress(s, false);
}

void smcr_conn_check_peer(struct smcr_sock *s)
{
	if (s->state != SMCR_CONN_ABORTED && s->ops->peer_gone(s->xc))
		smcr_conn_progress(s); /* takes the last messages, then sees the reset */
}

/*
 * Bounded spin: while the peer runs on another CPU its next CDC is
 * microseconds away, far less than a sleep/wake-up pair on this kind of VM
 * (benchmarks.md §2); common/spin.h's governor stops spinning where it does
 * not pay.  Lock dropped by the caller.  True if something came.
 */
static bool spin_for_ctrl(struct smcr_sock *s)
{
	int64_t end = smcr_now_ns() + (int64_t)s->spin_us * 1000;
	unsigned i = 0;

	while (s->ops->peer_running(s->xc)) {
		if (s->ops->ctrl_pending(s->xc))
			return true;
		smcr_cpu_relax();
		if ((++i & 63) == 0 && smcr_now_ns() > end)
			break;
	}
	return false;
}

int smcr_conn_wait(struct smcr_sock *s, unsigned events, int64_t deadline)
{
	int fd = s->ops->ready_fd(s->xc), rc;
	/*
	 * A peer that is asleep will not answer within a spin.  Not spinning
	 * then tells the governor nothing: it learns only from spins it paid for.
	 */
	bool spin = s->spin_us > 0 && s->ops->peer_running(s->xc) &&
		    smcr_spin_gov_allow(&s->spin_gov),
	     won = false;
	struct smcr_holder *me = smcr_hold_self(s);

	if (events & POLLIN) {
		s->waiters_rd++;
		me->waiters_rd++;
	} else {
		s->waiters_wr++;
		me->waiters_wr++;
	}
	/* The fd must not stay readable for what was consumed: we sleep on it. */
	smcr_conn_progress(s);
	smcr_conn_unlock(s);
	if (spin)
		won = spin_for_ctrl(s);
	if (won) {
		rc = 1;
	} else {
		smcr_stats_slept();
		s->ops->set_sleeping(s->xc, true);
		rc = smcr_sys_wait_fd_app(fd, POLLIN, deadline);
		s->ops->set_sleeping(s->xc, false);
	}
	smcr_conn_lock(s);
	if (spin) {
		smcr_spin_gov_result(&s->spin_gov, won);
		smcr_stats_spin(won);
	}
	/* Our slot again: it may have moved while the lock was dropped (never for a live holder). */
	me = smcr_hold_self(s);
	if (events & POLLIN) {
		s->waiters_rd -= s->waiters_rd > 0;
		me->waiters_rd -= me->waiters_rd > 0;
	} else {
		s->waiters_wr -= s->waiters_wr > 0;
		me->waiters_wr -= me->waiters_wr > 0;
	}
	smcr_conn_check_peer(s);
	if (rc == 0)
		return -EAGAIN;
	return rc < 0 ? rc : 0;
}

int smcr_conn_send_cdc(struct smcr_sock *s, uint8_t prod_flags)
{
	struct smcr_cdc_msg m = {
		.seqno = ++s->tx_seqno,
		.token = s->peer_token,
		.prod = s->tx_prod,
		.cons = s->rx_cons,
		.prod_flags = prod_flags,
		.conn_flags = s->conn_flags_sent,
	};
	uint8_t wire[SMCR_CDC_MSG_LEN];
	int rc;

	/* While a sender waits for room, every CDC says so (the flag is not sticky). */
	if (s->waiters_wr)
		m.prod_flags |= SMCR_CDC_PROD_WRITE_BLOCKED;
	smcr_cdc_encode(&m, wire);
	rc = s->ops->send_ctrl(s->xc, wire);
	if (rc == -EAGAIN && s->ops->failover) {
		/* moved to another link first: the failover's own CDC says all this one would */
		conn_failover(s);
		return s->state == SMCR_CONN_ABORTED ? -ECONNRESET : 0;
	}
	if (rc == 0) {
		s->rx_cons_sent = s->rx_cons; /* every CDC carries our consumer cursor */
		s->peer_cons_upd_req = false;
		s->cdc_sent++;
	}
	return rc;
}

ssize_t smcr_iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;

	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt > 0 && !iov))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - t)
			return -EINVAL;
		t += iov[i].iov_len;
	}
	return (ssize_t)t;
}

/* ---- small accessors of engine.h ----------------------------------------------------------- */

int smcr_sock_ready_fd(const struct smcr_sock *s)
{
	return s->ops->ready_fd(s->xc);
}

void smcr_sock_set_timeouts(struct smcr_sock *s, int rcv_ms, int snd_ms)
{
	smcr_conn_lock(s);
	s->rcv_timeout_ms = rcv_ms > 0 ? rcv_ms : 0;
	s->snd_timeout_ms = snd_ms > 0 ? snd_ms : 0;
	smcr_conn_unlock(s);
}

void smcr_sock_set_interest(struct smcr_sock *s, unsigned events)
{
	smcr_conn_lock(s);
	smcr_hold_self(s)->interest = events & (POLLIN | POLLOUT);
	smcr_hold_sum_interest(s);
	/*
	 * Raised if the new interest stands, but not cleared if it does not:
	 * an event loop moves between reading and writing with a call or two,
	 * and the doorbell left readable may stand for the next interest.  A
	 * wait clears it first (smcr_sock_settle(), smcr_sock_poll()).
	 */
	smcr_conn_progress_io(s);
	smcr_conn_unlock(s);
}

void smcr_sock_settle(struct smcr_sock *s)
{
	smcr_conn_lock(s);
	smcr_conn_progress(s);
	smcr_conn_unlock(s);
}

bool smcr_sock_peer_running(const struct smcr_sock *s)
{
	return s->ops->peer_running(s->xc);
}

void smcr_sock_set_sleeping(struct smcr_sock *s, bool sleeping)
{
	s->ops->set_sleeping(s->xc, sleeping);
}

/* Is everything the connection's waiters wait for (POLLIN, POLLOUT) in `mask`? */
static bool waited_for_stands(const struct smcr_sock *s, unsigned mask)
{
	unsigned want = s->interest & (POLLIN | POLLOUT);

	if (s->waiters_rd)
		want |= POLLIN;
	if (s->waiters_wr)
		want |= POLLOUT;
	return want != 0 && (mask & want) == want;
}

unsigned smcr_sock_poll(struct smcr_sock *s)
{
	unsigned mask;

	smcr_conn_lock(s);
	smcr_conn_progress(s);
	mask = smcr_conn_mask(s);
	if (s->went_tcp || s->tcp_tail) {
		mask |= smcr_tail_mask(s);
		smcr_conn_unlock(s);
		return mask;
	}
	/*
	 * Whether the peer still lives costs a system call; ask only when the
	 * answer could change what a waiter does: not while POLLIN stands
	 * anyway (the read that follows asks itself, and a dead peer's hang-up
	 * keeps the ready fd readable, so a waiter comes back here), nor while
	 * every event waited for stands (a writer that waits for POLLOUT alone
	 * writes, and a send that finds no room asks; once it waits for POLLIN
	 * too, we ask here).
	 */
	if (!(mask & POLLIN) && !waited_for_stands(s, mask)) {
		smcr_conn_check_peer(s);
		mask = smcr_conn_mask(s);
	}
	smcr_conn_unlock(s);
	return mask;
}

int smcr_sock_take_error(struct smcr_sock *s)
{
	int err;

	smcr_conn_lock(s);
	smcr_conn_progress(s);
	err = s->so_error;
	s->so_error = 0;
	smcr_conn_unlock(s);
	return err;
}

size_t smcr_sock_readable_bytes(struct smcr_sock *s)
{
	size_t n;

	smcr_conn_lock(s);
	smcr_conn_progress(s);
	n = s->went_tcp ? 0 : smcr_rx_readable(s);
	if (s->went_tcp || s->tcp_tail) {
		int q = 0;

		if (smcr_libc.ioctl(s->tcp_fd, FIONREAD, &q) == 0 && q > 0)
			n += (size_t)q;
	}
	smcr_conn_unlock(s);
	return n;
}

size_t smcr_sock_unacked_bytes(struct smcr_sock *s)
{
	uint32_t n32 = 0;
	size_t n;

	smcr_conn_lock(s);
	smcr_conn_progress(s);
	if (s->went_tcp || s->tcp_tail) {
		int q = 0;

		n = 0;
		if (s->tcp_tail && !s->went_tcp)
			(void)smcr_curs_diff(s->tail_resend, s->tx_prod, s->peer_size, &n32);
		n = n32;
		if (smcr_libc.ioctl(s->tcp_fd, TIOCOUTQ, &q) == 0 && q > 0)
			n += (size_t)q;
	} else {
		n = s->peer_size - smcr_tx_space(s);
	}
	smcr_conn_unlock(s);
	return n;
}

const char *smcr_sock_mode_name(const struct smcr_sock *s)
{
	return s->ops->same_host ? "smc-shm" : "smc-r";
}

uint32_t smcr_sock_rcvbuf(const struct smcr_sock *s)
{
	return s->rmb_size;
}

uint32_t smcr_sock_sndbuf(const struct smcr_sock *s)
{
	return s->peer_size;
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
