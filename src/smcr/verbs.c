// SPDX-License-Identifier: MIT
/*
 * The verbs transport (transport.h) over ib.c and wr.c: one RC QP and one
 * RMB per connection for now, CLC in the SMC-Rv2 form with our own UEID.
 *
 * Handshake (smc-r-protocol.md §3.1, minus LLC for now):
 *   create          device and GID from the TCP socket's local address.
 *   client_propose  device + link (QP in INIT, receives posted) + RMB from
 *                   the TCP socket's local address; Proposal: SMC-Rv2 with
 *                   our RoCE v2 GID and MAC, UEID "SMCR-USERSPACE-VERBS".
 *   server_accept   same on its side; Accept: QPN, PSN, MTU, GID, MAC,
 *                   RMB address/rkey/size, alert token (first contact).
 *   client_attach   QP to RTS towards the server; Confirm: the same fields.
 *   server_attach   peeks (does not consume) the Confirm on the TCP socket,
 *                   brings its QP to RTS and learns the client's ring size;
 *                   a Decline there ends the wait.
 *   server_confirm  checks that the Confirm read by the engine is the one
 *                   peeked.
 * Then the server sends LLC CONFIRM LINK over the QP; the client sends nothing
 * over it before that request arrived (so never into a QP still in INIT) and
 * answers it.  TEST LINK requests are answered; other LLC messages dropped.
 *
 * Data: write_peer copies into a send buffer that mirrors the peer's RMB and
 * posts an RDMA WRITE from there (the bytes for ring offset X live at X, so
 * they are not overwritten before the peer consumed them, which implies the
 * WRITE executed); send_ctrl posts the 44-byte CDC SIGNALED|SOLICITED.
 *
 * Readiness: an epoll fd holding the completion channel (a message arrived
 * or the link failed), an eventfd for "ready" as the engine settles it, the
 * TCP socket for hang-up only (the peer process died) and the device's async
 * event fd (device removed or failed).  peer_gone() latches any of these;
 * recv_ctrl() then resets after the last message that did arrive.
 *
 * The RMB is registered LOCAL_WRITE|REMOTE_WRITE only, advertised by a
 * random IOVA rather than its address in our process.  On destroy it is
 * deregistered first, so a peer that still writes gets a remote access
 * error at the NIC; no pooling yet.
 *
 * Not yet (issue 6, in this order): the engine selects this transport
 * (SMCR_TRANSPORT=rdma, SMCR_PEERS); link groups (one device context, PD, CQ pair and QP
 * per peer pair, CDCs demultiplexed by alert token into per-connection queues
 * and doorbells, CONFIRM RKEY for later connections, DELETE LINK after an
 * idle time); an RMB pool per link group, zeroed and rkey-withdrawn on reuse;
 * libibverbs loaded with dlopen so libsmcr.so starts where rdma-core is absent.
 */
#include "smcr/verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/real.h"
#include "smcr/ib.h"
#include "smcr/llc.h"
#include "smcr/stats_abi.h"
#include "smcr/sys.h"
#include "smcr/wire.h"
#include "smcr/wr.h"

#define VERBS_MAX_CLASS 9u /* 8 MiB */
#define VERBS_FLUSH_MS	1000

/* The UEID both ends put in their CLC messages: identifies this transport. */
static const char verbs_ueid[SMCR_CLC_EID_LEN + 1] = "SMCR-USERSPACE-VERBS            ";

struct smcr_xconn {
	int timeout_ms;
	uint32_t want_size;
	int tcp_fd;
	struct smcr_ib_port *port;
	struct smcr_wr_link *link;
	uint8_t *rmb;
	uint32_t rmb_size;
	struct ibv_mr *rmb_mr;
	uint64_t rmb_iova; /* how the peer addresses the RMB */
	uint8_t *sndbuf; /* mirrors the peer's RMB */
	struct ibv_mr *snd_mr;
	struct smcr_wr_remote_rmb peer_rmb;
	struct smcr_clc_accept peer_conf; /* server: the Confirm it peeked */
	uint32_t local_token;
	uint32_t peer_token;
	int ready_efd;
	int ep_fd;
	bool signalled; /* ready_efd has a count */
	bool connected; /* QP in RTS */
	bool gone;      /* peer or device lost: recv_ctrl resets after the last message */
	bool server;
	bool link_confirmed; /* LLC CONFIRM LINK: request seen (client), response (server) */
	bool peer_closing;   /* a CDC with done-writing, closed or abort arrived */
	int64_t fin_since_ms; /* the TCP FIN came before any such CDC: since when */
};

/* ---- set-up -------------------------------------------------------------------- */

/* The TCP connection's local address selects the RDMA device and GID. */
static int bind_tcp(struct smcr_xconn *xc, int tcp_fd)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	int rc;

	if (smcr_real.getsockname(tcp_fd, (struct sockaddr *)&local, &len) < 0)
		return -errno;
	rc = smcr_ib_port_open((struct sockaddr *)&local, &xc->port);
	if (rc)
		return rc;
	xc->tcp_fd = tcp_fd;
	return 0;
}

static int verbs_create(int tcp_fd, uint32_t size, int timeout_ms, struct smcr_xconn **out)
{
	struct smcr_xconn *xc = calloc(1, sizeof(*xc));
	int rc;

	if (!xc)
		return -ENOMEM;
	xc->timeout_ms = timeout_ms;
	xc->want_size = size;
	xc->tcp_fd = xc->ready_efd = xc->ep_fd = -1;
	do {
		if (smcr_sys_random(&xc->local_token, sizeof(xc->local_token)) < 0) {
			free(xc);
			return -EIO;
		}
	} while (xc->local_token == 0);
	rc = bind_tcp(xc, tcp_fd);
	if (rc) {
		smcr_verbs_ops.destroy(xc, false);
		return rc;
	}
	*out = xc;
	return 0;
}

static int make_ready_fd(struct smcr_xconn *xc)
{
	struct epoll_event ev = { .events = EPOLLIN };

	xc->ready_efd = smcr_sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	xc->ep_fd = smcr_sys_fd_high(smcr_real.epoll_create1(EPOLL_CLOEXEC));
	if (xc->ready_efd < 0 || xc->ep_fd < 0)
		return -errno;
	ev.data.fd = xc->ready_efd;
	if (smcr_real.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, xc->ready_efd, &ev) < 0)
		return -errno;
	ev.data.fd = smcr_wr_fd(xc->link);
	if (smcr_real.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
		return -errno;
	/* hang-up only: in SMC mode the TCP socket carries nothing else */
	ev.events = EPOLLRDHUP;
	ev.data.fd = xc->tcp_fd;
	if (smcr_real.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, xc->tcp_fd, &ev) < 0)
		return -errno;
	/*
	 * Device events (fatal error, port down, device being removed): `rdma link
	 * delete` waits until every process closed the device, so we must notice.
	 */
	ev.events = EPOLLIN;
	ev.data.fd = xc->port->ctx->async_fd;
	if (smcr_real.fcntl(ev.data.fd, F_SETFL,
			    smcr_real.fcntl(ev.data.fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    smcr_real.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
		return -errno;
	return 0;
}

/* Take pending device events: true if one means the link cannot carry on. */
static bool device_failed(struct smcr_xconn *xc)
{
	struct ibv_async_event ev;
	bool failed = false;

	while (ibv_get_async_event(xc->port->ctx, &ev) == 0) {
		switch (ev.event_type) {
		case IBV_EVENT_DEVICE_FATAL:
		case IBV_EVENT_PORT_ERR:
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_CQ_ERR:
			smcr_warn("verbs: %s on %s", ibv_event_type_str(ev.event_type),
				  xc->port->name);
			failed = true;
			break;
		default:
			break;
		}
		ibv_ack_async_event(&ev);
	}
	return failed;
}

/* Link (QP in INIT) and the registered RMB: a decline reason or 0. */
static int own_resources(struct smcr_xconn *xc)
{
	uint8_t c = smcr_clc_rmbe_compress(xc->want_size, VERBS_MAX_CLASS);

	if (!xc->port)
		return SMCR_CLC_DECL_NOSMCRDEV;
	if (smcr_wr_link_create(xc->port, &xc->link))
		return SMCR_CLC_DECL_NOSMCRDEV;
	xc->rmb_size = smcr_clc_rmbe_size(c);
	xc->rmb = aligned_alloc(4096, xc->rmb_size);
	if (!xc->rmb)
		return SMCR_CLC_DECL_MEM;
	memset(xc->rmb, 0, xc->rmb_size);
	xc->rmb_mr = smcr_ib_reg_rmb(xc->port, xc->rmb, xc->rmb_size, &xc->rmb_iova);
	if (!xc->rmb_mr)
		return SMCR_CLC_DECL_MEM;
	if (make_ready_fd(xc))
		return SMCR_CLC_DECL_INTERR;
	return 0;
}

/* The peer's RMB: our mirrored send buffer for it.  A decline reason or 0. */
static int peer_resources(struct smcr_xconn *xc, const struct smcr_clc_accept *a)
{
	if (a->rmbe_size > VERBS_MAX_CLASS || a->rmb_rkey == 0 || a->rmbe_alert_token == 0)
		return SMCR_CLC_DECL_CNFERR;
	xc->peer_rmb.addr = a->rmb_dma_addr;
	xc->peer_rmb.rkey = a->rmb_rkey;
	xc->peer_rmb.size = smcr_clc_rmbe_size(a->rmbe_size);
	xc->peer_token = a->rmbe_alert_token;
	xc->sndbuf = aligned_alloc(4096, xc->peer_rmb.size);
	if (!xc->sndbuf)
		return SMCR_CLC_DECL_MEM;
	xc->snd_mr = smcr_ib_reg_source(xc->port, xc->sndbuf, xc->peer_rmb.size);
	return xc->snd_mr ? 0 : SMCR_CLC_DECL_MEM;
}

/* QP to RTS towards the peer described by an Accept/Confirm.  A decline reason or 0. */
static int connect_qp(struct smcr_xconn *xc, const struct smcr_clc_accept *a)
{
	struct smcr_ib_qp_info peer;

	memset(&peer, 0, sizeof(peer));
	memcpy(peer.gid, a->gid, SMCR_IB_GID_LEN);
	memcpy(peer.mac, a->mac, SMCR_IB_MAC_LEN);
	peer.qpn = a->qpn;
	peer.psn = a->psn;
	peer.mtu = a->qp_mtu;
	if (smcr_wr_link_connect(xc->link, &peer))
		return SMCR_CLC_DECL_INTERR;
	xc->connected = true;
	return 0;
}

/* Our side of an Accept or Confirm (SMC-Rv2, first contact). */
static void fill_accept(struct smcr_xconn *xc, struct smcr_clc_msg *m, uint8_t type)
{
	struct smcr_clc_accept *a = &m->accept;
	struct smcr_ib_qp_info own;

	smcr_wr_link_info(xc->link, &own);
	m->hdr.type = type;
	m->hdr.version = SMCR_CLC_V2;
	m->hdr.typev1 = SMCR_CLC_PATH_R;
	m->hdr.flag = true; /* first contact: a new link for every connection, for now */
	memcpy(a->gid, own.gid, SMCR_CLC_GID_LEN);
	memcpy(a->mac, own.mac, SMCR_CLC_MAC_LEN);
	a->qpn = own.qpn;
	a->psn = own.psn;
	a->qp_mtu = own.mtu;
	a->rmb_rkey = xc->rmb_mr->rkey;
	a->rmbe_idx = 1;
	a->rmbe_alert_token = xc->local_token;
	a->rmbe_size = smcr_clc_rmbe_compress(xc->rmb_size, VERBS_MAX_CLASS);
	a->rmb_dma_addr = xc->rmb_iova; /* never our virtual address */
	memcpy(a->eid, verbs_ueid, SMCR_CLC_EID_LEN);
	a->fce.os_type = SMCR_CLC_OS_LINUX;
	a->fce.release = 1;
	a->fce.max_conns = 1;
	a->fce.max_links = 1;
	memset(a->fce.hostname, ' ', sizeof(a->fce.hostname));
}

static bool is_ours(const struct smcr_clc_msg *m)
{
	return m->hdr.version >= SMCR_CLC_V2 && m->hdr.typev1 == SMCR_CLC_PATH_R &&
	       memcmp(m->accept.eid, verbs_ueid, SMCR_CLC_EID_LEN) == 0;
}

/* ---- LLC: CONFIRM LINK, TEST LINK ---------------------------------------------- */

/*
 * CONFIRM LINK orders the start: the server sends the request once its QP is
 * in RTS, and the client sends nothing over the QP before it has seen it, so
 * its first packets never hit a QP still in INIT (smc-r-protocol.md §3.1).
 */
static int send_llc(struct smcr_xconn *xc, const struct smcr_llc_msg *m)
{
	uint8_t buf[SMCR_LLC_MSG_LEN];
	enum smcr_llc_err err;

	memset(buf, 0, sizeof(buf));
	if (smcr_llc_encode(m, buf, sizeof(buf), &err) != SMCR_LLC_MSG_LEN)
		return -EINVAL;
	return smcr_wr_send_msg(xc->link, buf, xc->timeout_ms);
}

static int send_confirm_link(struct smcr_xconn *xc, bool response)
{
	struct smcr_llc_msg m;
	struct smcr_ib_qp_info own;

	memset(&m, 0, sizeof(m));
	smcr_wr_link_info(xc->link, &own);
	m.hdr.type = SMCR_LLC_CONFIRM_LINK;
	m.hdr.version = 2;
	m.hdr.flags = SMCR_LLC_FLAG_NO_RMBE_EYEC | (response ? SMCR_LLC_FLAG_RESP : 0);
	memcpy(m.confirm_link.mac, own.mac, SMCR_LLC_MAC_LEN);
	memcpy(m.confirm_link.gid, own.gid, SMCR_LLC_GID_LEN);
	m.confirm_link.qpn = own.qpn;
	m.confirm_link.link_num = 1;
	m.confirm_link.max_links = 1;
	m.confirm_link.max_conns = 1;
	return send_llc(xc, &m);
}

/* An LLC message arrived: answer or note it.  0, or -ECONNRESET (violation). */
static int handle_llc(struct smcr_xconn *xc, const uint8_t raw[SMCR_WR_MSG_LEN])
{
	struct smcr_llc_msg m;
	enum smcr_llc_err err;
	bool resp;

	if (smcr_llc_decode(raw, SMCR_WR_MSG_LEN, &m, &err) != SMCR_WIRE_OK)
		return 0; /* unknown types are dropped, as Linux does */
	resp = m.hdr.flags & SMCR_LLC_FLAG_RESP;
	switch (m.hdr.type) {
	case SMCR_LLC_CONFIRM_LINK:
		if (resp != xc->server || xc->link_confirmed)
			return -ECONNRESET;
		xc->link_confirmed = true;
		return resp ? 0 : (send_confirm_link(xc, true) ? -ECONNRESET : 0);
	case SMCR_LLC_TEST_LINK:
		if (resp)
			return 0;
		m.hdr.flags |= SMCR_LLC_FLAG_RESP;
		return send_llc(xc, &m) ? -ECONNRESET : 0;
	default:
		return 0;
	}
}

/* Next CDC (LLC messages handled on the way): 1, 0 none, -ECONNRESET. */
static int next_cdc(struct smcr_xconn *xc, uint8_t msg[SMCR_CDC_MSG_LEN])
{
	for (unsigned i = 0; i < SMCR_WR_RECV_SLOTS; i++) {
		int rc = smcr_wr_recv_msg(xc->link, msg);

		if (rc <= 0)
			return rc;
		if (msg[0] == SMCR_CDC_MSG_TYPE) {
			if (msg[SMCR_CDC_OFF_CONN_FLAGS] & (SMCR_CDC_CONN_DONE_WRITING |
							    SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_ABORT))
				xc->peer_closing = true;
			return xc->link_confirmed ? 1 : -ECONNRESET;
		}
		if (handle_llc(xc, msg))
			return -ECONNRESET;
	}
	return 0;
}

/* Client: before its first SEND or WRITE, the server's CONFIRM LINK. */
static int await_confirm_link(struct smcr_xconn *xc)
{
	int64_t deadline = smcr_sys_deadline(xc->timeout_ms);
	uint8_t msg[SMCR_WR_MSG_LEN];

	while (!xc->link_confirmed) {
		int rc = next_cdc(xc, msg), left;

		if (rc != 0)
			return -ECONNRESET; /* a CDC before CONFIRM LINK, or a failure */
		if (xc->link_confirmed)
			break;
		left = (int)(deadline - smcr_sys_now_ms());
		if (left <= 0 || smcr_wr_wait_msg(xc->link, left) <= 0)
			return -ECONNRESET;
	}
	return 0;
}

/* ---- CLC hooks ------------------------------------------------------------------ */

static int verbs_client_propose(struct smcr_xconn *xc, struct smcr_clc_msg *prop)
{
	struct smcr_clc_proposal *p = &prop->proposal;
	int rc = own_resources(xc);

	if (rc)
		return rc;
	prop->hdr.type = SMCR_CLC_PROPOSAL;
	prop->hdr.version = SMCR_CLC_V2;
	prop->hdr.typev1 = SMCR_CLC_PATH_NONE;
	prop->hdr.typev2 = SMCR_CLC_PATH_R;
	if (smcr_sys_random(p->peer_id, sizeof(p->peer_id)) < 0)
		return SMCR_CLC_DECL_INTERR;
	memcpy(p->gid, xc->port->gid, SMCR_CLC_GID_LEN);
	memcpy(p->mac, xc->port->mac, SMCR_CLC_MAC_LEN);
	memcpy(p->roce_gid, xc->port->gid, SMCR_CLC_GID_LEN);
	p->release = 1;
	p->max_conns = 1;
	p->max_links = 1;
	p->eid_cnt = 1;
	memcpy(p->eid[0], verbs_ueid, SMCR_CLC_EID_LEN);
	return 0;
}

static int verbs_server_accept(struct smcr_xconn *xc, const struct smcr_clc_msg *prop,
			       struct smcr_clc_msg *acc)
{
	const struct smcr_clc_proposal *p = &prop->proposal;
	int rc;

	if (prop->hdr.version < SMCR_CLC_V2 ||
	    (prop->hdr.typev2 != SMCR_CLC_PATH_R && prop->hdr.typev2 != SMCR_CLC_PATH_BOTH) ||
	    p->eid_cnt < 1 || memcmp(p->eid[0], verbs_ueid, SMCR_CLC_EID_LEN) != 0)
		return SMCR_CLC_DECL_NOSMCRDEV;
	rc = own_resources(xc);
	if (rc)
		return rc;
	fill_accept(xc, acc, SMCR_CLC_ACCEPT);
	return 0;
}

static int verbs_client_attach(struct smcr_xconn *xc, const struct smcr_clc_msg *acc,
			       struct smcr_clc_msg *conf, uint32_t *peer_ring_size)
{
	int rc;

	if (!is_ours(acc))
		return SMCR_CLC_DECL_MODEUNSUPP;
	rc = peer_resources(xc, &acc->accept);
	if (!rc)
		rc = connect_qp(xc, &acc->accept);
	if (rc)
		return rc;
	fill_accept(xc, conf, SMCR_CLC_CONFIRM);
	*peer_ring_size = xc->peer_rmb.size;
	return 0;
}

/*
 * Peek at the next CLC message on the TCP socket without consuming it (the
 * engine reads it afterwards): 0 and *msg, or a decline reason.
 */
static int peek_clc(struct smcr_xconn *xc, struct smcr_clc_msg *msg)
{
	int64_t deadline = smcr_sys_deadline(xc->timeout_ms);
	uint8_t buf[SMCR_CLC_MAX_LEN];

	for (;;) {
		enum smcr_clc_err err;
		size_t len;
		ssize_t n;
		int w = smcr_sys_wait_fd(xc->tcp_fd, POLLIN, deadline);

		if (w <= 0)
			return SMCR_CLC_DECL_TIMEOUT_CL;
		n = smcr_real.recv(xc->tcp_fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
		if (n <= 0)
			return SMCR_CLC_DECL_PEERDECL;
		switch (smcr_clc_decode(buf, (size_t)n, msg, &len, &err)) {
		case SMCR_WIRE_OK:
			return 0;
		case SMCR_WIRE_NEED_MORE: {
			/* the rest is in flight: poll() would return at once again */
			struct pollfd none = { .fd = -1 };

			smcr_real.poll(&none, 0, 1);
			break;
		}
		default:
			return SMCR_CLC_DECL_PEERDECL; /* the engine reports the garbage */
		}
	}
}

static int verbs_server_attach(struct smcr_xconn *xc, int tcp_fd, uint32_t *peer_ring_size)
{
	struct smcr_clc_msg conf;
	int rc;

	(void)tcp_fd; /* bound already: verbs_create */
	rc = peek_clc(xc, &conf);
	if (rc)
		return rc;
	if (conf.hdr.type == SMCR_CLC_DECLINE)
		return SMCR_CLC_DECL_PEERDECL;
	if (conf.hdr.type != SMCR_CLC_CONFIRM || !is_ours(&conf))
		return SMCR_CLC_DECL_CNFERR;
	rc = peer_resources(xc, &conf.accept);
	if (!rc)
		rc = connect_qp(xc, &conf.accept);
	if (rc)
		return rc;
	xc->server = true;
	if (send_confirm_link(xc, false))
		return SMCR_CLC_DECL_INTERR;
	xc->peer_conf = conf.accept;
	*peer_ring_size = xc->peer_rmb.size;
	return 0;
}

static int verbs_server_confirm(struct smcr_xconn *xc, const struct smcr_clc_msg *conf)
{
	const struct smcr_clc_accept *c = &conf->accept;

	if (!xc->connected || c->qpn != xc->peer_conf.qpn || c->rmb_rkey != xc->peer_conf.rmb_rkey ||
	    c->rmb_dma_addr != xc->peer_conf.rmb_dma_addr ||
	    memcmp(c->gid, xc->peer_conf.gid, SMCR_CLC_GID_LEN) != 0)
		return SMCR_CLC_DECL_CNFERR;
	return 0;
}

/* ---- after the handshake -------------------------------------------------------- */

static void verbs_tokens(const struct smcr_xconn *xc, uint32_t *local, uint32_t *peer)
{
	*local = xc->local_token;
	*peer = xc->peer_token;
}

static void verbs_ring(struct smcr_xconn *xc, uint8_t **ring, uint32_t *size)
{
	*ring = xc->rmb;
	*size = xc->rmb_size;
}

static int verbs_write_peer(struct smcr_xconn *xc, uint32_t offset, const void *src,
			    uint32_t len)
{
	if (len == 0)
		return 0;
	if (offset >= xc->peer_rmb.size || len > xc->peer_rmb.size - offset)
		return -EINVAL;
	if (!xc->link_confirmed && await_confirm_link(xc))
		return -ECONNRESET;
	memcpy(xc->sndbuf + offset, src, len);
	return smcr_wr_write_mirrored(xc->link, xc->snd_mr, &xc->peer_rmb, offset, len,
				      xc->timeout_ms);
}

static int verbs_send_ctrl(struct smcr_xconn *xc, const uint8_t msg[SMCR_CDC_MSG_LEN])
{
	_Static_assert(SMCR_CDC_MSG_LEN == SMCR_WR_MSG_LEN, "CDC is one 44-byte SEND");
	int rc;

	if (!xc->server && !xc->link_confirmed && await_confirm_link(xc))
		return -ECONNRESET;
	rc = smcr_wr_send_msg(xc->link, msg, xc->timeout_ms);

	return rc == -ETIMEDOUT || rc == -ENOBUFS ? -ECONNRESET : rc;
}

static int verbs_recv_ctrl(struct smcr_xconn *xc, uint8_t msg[SMCR_CDC_MSG_LEN])
{
	int rc = next_cdc(xc, msg);

	return rc == 0 && xc->gone ? -ECONNRESET : rc;
}

/*
 * The peer's engine half-closes TCP after its done-writing CDC (close.c), and
 * a dead peer's kernel closes it too: a FIN alone does not tell them apart,
 * and it may overtake the CDC posted before it.  So: a reset is death; a FIN
 * after the peer's closing CDC is an orderly close (stop watching the TCP
 * socket, which would keep the doorbell readable); a FIN with no such CDC
 * within the CLC timeout is death.
 */
static bool tcp_hung_up(struct smcr_xconn *xc)
{
	struct pollfd p = { .fd = xc->tcp_fd, .events = POLLRDHUP };
	struct epoll_event ev = { .events = 0, .data.fd = xc->tcp_fd };
	int64_t now;

	if (smcr_real.poll(&p, 1, 0) != 1)
		return false;
	if (p.revents & POLLERR)
		return true;
	if (!(p.revents & (POLLRDHUP | POLLHUP)))
		return false;
	if (xc->peer_closing) {
		(void)smcr_real.epoll_ctl(xc->ep_fd, EPOLL_CTL_MOD, xc->tcp_fd, &ev);
		return false;
	}
	now = smcr_sys_now_ms();
	if (xc->fin_since_ms == 0)
		xc->fin_since_ms = now;
	return now - xc->fin_since_ms > xc->timeout_ms;
}

static bool verbs_peer_gone(struct smcr_xconn *xc)
{
	if (xc->gone)
		return true;
	(void)smcr_wr_msg_pending(xc->link); /* takes completions: failures show */
	xc->gone = smcr_wr_link_error(xc->link)[0] || device_failed(xc) || tcp_hung_up(xc);
	return xc->gone;
}

static int verbs_ready_fd(const struct smcr_xconn *xc)
{
	return xc->ep_fd;
}

/*
 * Re-arm the CQ (that takes the channel's events, so the channel fd stops
 * being readable) and look once more: a message that completed before the
 * arm raised no event.  Then the eventfd says `ready`, written only on a
 * change.
 */
static bool verbs_settle(struct smcr_xconn *xc, bool ready)
{
	bool look_again = false;
	uint64_t v;

	if (smcr_wr_arm(xc->link, false) < 0 || smcr_wr_msg_pending(xc->link))
		look_again = true;
	if (ready && !xc->signalled) {
		v = 1;
		(void)!smcr_real.write(xc->ready_efd, &v, sizeof(v));
		xc->signalled = true;
	} else if (!ready && xc->signalled) {
		(void)!smcr_real.read(xc->ready_efd, &v, sizeof(v));
		xc->signalled = false;
	}
	return look_again;
}

/* No bounded spin over verbs yet: the peer's CPU state is not visible. */
static bool verbs_ctrl_pending(const struct smcr_xconn *xc)
{
	(void)xc;
	return false;
}

static bool verbs_peer_running(const struct smcr_xconn *xc)
{
	(void)xc;
	return false;
}

static void verbs_set_sleeping(struct smcr_xconn *xc, bool sleeping)
{
	(void)xc;
	(void)sleeping;
}

static void verbs_destroy(struct smcr_xconn *xc, bool clean)
{
	(void)clean; /* nothing is pooled: deregistering revokes the peer's access */
	if (!xc)
		return;
	/* our last CDC must reach the peer before the QP goes to ERR */
	if (xc->link && xc->connected)
		(void)smcr_wr_flush(xc->link, VERBS_FLUSH_MS);
	if (xc->rmb_mr)
		ibv_dereg_mr(xc->rmb_mr);
	smcr_wr_link_destroy(xc->link);
	if (xc->snd_mr)
		ibv_dereg_mr(xc->snd_mr);
	smcr_ib_port_close(xc->port);
	smcr_sys_close(xc->ep_fd);
	smcr_sys_close(xc->ready_efd);
	free(xc->rmb);
	free(xc->sndbuf);
	free(xc);
}

/*
 * Forked child: the RDMA resources belong to the parent (verbs objects do
 * not survive fork); drop our fds and memory, call nothing on the device.
 */
static void verbs_forget(struct smcr_xconn *xc)
{
	if (!xc)
		return;
	smcr_sys_close(xc->ep_fd);
	smcr_sys_close(xc->ready_efd);
	free(xc);
}

static void verbs_info(const struct smcr_xconn *xc, struct smcr_xconn_info *out)
{
	struct smcr_ib_qp_info qp;

	memset(out, 0, sizeof(*out));
	out->mode = SMCR_STATS_MODE_SMC_R;
	smcr_wr_link_info(xc->link, &qp);
	out->qp_num = qp.qpn;
	snprintf(out->device, sizeof(out->device), "%.15s", xc->port->name);
}

const struct smcr_transport_ops smcr_verbs_ops = {
	.name = "verbs",
	.create = verbs_create,
	.info = verbs_info,
	.client_propose = verbs_client_propose,
	.server_accept = verbs_server_accept,
	.client_attach = verbs_client_attach,
	.server_attach = verbs_server_attach,
	.server_confirm = verbs_server_confirm,
	.tokens = verbs_tokens,
	.ring = verbs_ring,
	.write_peer = verbs_write_peer,
	.send_ctrl = verbs_send_ctrl,
	.recv_ctrl = verbs_recv_ctrl,
	.peer_gone = verbs_peer_gone,
	.ready_fd = verbs_ready_fd,
	.settle = verbs_settle,
	.ctrl_pending = verbs_ctrl_pending,
	.peer_running = verbs_peer_running,
	.set_sleeping = verbs_set_sleeping,
	.destroy = verbs_destroy,
	.forget = verbs_forget,
};
