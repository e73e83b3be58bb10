// SPDX-License-Identifier: MIT
/*
 * The verbs transport (transport.h) over link groups (lgr.c): every
 * connection between this process and one peer process shares that pair's
 * RC QP, CQs and device context; each has its own RMB and send buffer from
 * the group's pool and its own doorbell.  CLC in the SMC-Rv2 form with our
 * own UEID.
 *
 * Handshake (protocol.md §3.1, §3.2):
 *   create          the TCP socket's local address -> GID; if no group of
 *                   ours uses that GID yet, sysfs names its device, port,
 *                   index and MAC (ibsys.h): no libibverbs, nothing opened.
 *   client_propose  Proposal: SMC-Rv2 release 1 with our peer id (per-process
 *                   instance + MAC), RoCE v2 GID and MAC, the user EIDs of
 *                   SMCR_UEID and of the kernel's UEID table and then our
 *                   own "SMCR-USERSPACE-VERBS" (eid.h); max_conns 255,
 *                   max_links 2 as a Linux client (a server's ADD LINK is
 *                   taken if we have a second device towards its new GID,
 *                   else rejected as a Linux client with no alternate path
 *                   does: lgr.h); no resources yet (the server decides
 *                   first contact, as in the kernel).  Once it is sent, the
 *                   client opens that port and makes a QP while the Accept
 *                   is on its way (open_ahead); verbs must see the GID where
 *                   sysfs did, else the Accept is declined NOSMCRDEV, never
 *                   confirmed.
 * EIDs, as the kernel (smc_clc_match_eid): the server takes the first of
 * the client's EIDs that is in its table and names it in the Accept; the
 * client and the Confirm repeat it.  Release, max_conns and max_links are
 * the minimum of both offers (ours as a server: max_links 2 if another
 * device of ours has an address in the group's subnet, which we then add as
 * the second link, else 1: lgr.h); the first-contact extension carries them, our host name, OS type
 * Linux and v2_direct (same IP subnet: no gateway), and the client's Confirm
 * lists its GID.  Linux checks that the Confirm repeats the Accept's values
 * (RELEASEERR, MAXCONNERR, MAXLINKERR).
 *   server_accept   a Proposal whose RoCE GID is not the TCP peer's address
 *                   is declined GIDNOTPEER (lgr.h, "Identity"); a live group
 *                   for (peer id, peer GID, our GID) built over a connection
 *                   from the same TCP peer address is reused
 *                   (Accept without the first-contact flag, the QPN of its
 *                   link with fewer connections: the second once it is up),
 *                   otherwise a new one is made (flag set, QP in INIT);
 *                   RMB from the group's pool; a fresh alert token.
 *   client_attach   first contact: the Accept's GID must be the TCP peer's
 *                   address (else GIDNOTPEER), a new group, its QP to RTS;
 *                   reuse: the group must exist with a link to the QPN and
 *                   GID the server named (its first or second link) and a
 *                   peer that proved this connection's TCP peer address,
 *                   else Decline SYNCERR (the kernel's rule); the connection
 *                   then uses that link.  Confirm likewise.
 *   server_attach   peeks (does not consume) the Confirm; first contact: QP
 *                   to RTS, LLC CONFIRM LINK request (the client answers when
 *                   it first takes completions; the group turns ACTIVE when
 *                   the answer is in, and only ACTIVE groups are reused).
 *   server_confirm  checks that the Confirm read by the engine is the one
 *                   peeked.
 * The client sends nothing over a new group's QP before the server's
 * CONFIRM LINK arrived (so never into a QP still in INIT).
 *
 * Data: write_peer copies into a send buffer that mirrors the peer's RMB (the
 * bytes for ring offset X live at X, so they are not overwritten before the
 * peer consumed them, which implies the WRITE executed) and remembers the
 * range; send_ctrl posts the RDMA WRITE(s) for it and the 44-byte CDC
 * SIGNALED|SOLICITED in one ibv_post_send (one doorbell: on rxe a system
 * call each).  Nothing waits for a completion unless the send queue is full,
 * so a blocking sender keeps up to 16 CDCs and their WRITEs in flight.
 *
 * Readiness: per connection an epoll fd holding its doorbell (an eventfd
 * rung by whoever dispatches a CDC for it, or by a group failure, and kept
 * set while the engine says "ready"), the group's receive completion
 * channels (somebody must take completions; whoever does dispatches for
 * everyone; they turn readable for the peer's messages and a link's failure,
 * never for our own send completions, which the next call takes: wr.c), the
 * group's device event fd and the TCP socket for hang-up only.
 * peer_gone() latches a dead group, a TCP reset, or a FIN whose TEST LINK
 * probe is not answered within 2 s (an answer proves the peer alive, so the
 * FIN was an orderly shutdown or half-close); recv_ctrl() then resets after
 * the last message that did arrive.
 *
 * The rest of a stream on TCP (tcp_tail.c), between two smcr ends only: a
 * client lists our own UEID in its Proposal, which a Linux client never
 * does; to such a client a server says in its Accept that it takes the tail
 * (clc.h's smcr word, in bytes Linux reserves and never reads), and the
 * client's Confirm says the same back, so each end knows the other acts on
 * it.  The side that leaves sends its last CDC again with
 * SMCR_CDC_SMCR_TCP_TAIL (same cursors, same sequence number: a receiver
 * that took the first finds nothing new in the second) and waits for its
 * completion, so the peer has it before this process's QP can go (exec);
 * the peer resends what we never consumed from our copy of its RMB, the
 * send buffer (we never write over bytes the peer has not consumed).
 * Against a Linux peer continue_on_tcp() says -ENOTSUP.
 *
 * Buffers (lgr_buf.c's pool): the RMB is registered LOCAL_WRITE|REMOTE_WRITE
 * only, advertised by a random IOVA rather than its address; the send buffer
 * with no access flags at all (the NIC reads it locally for RDMA WRITE).
 * Both go back to their group's pool zeroed when the connection ends
 * cleanly; after an abort the RMB is deregistered instead (the peer may
 * still be writing), so only a peer that finished with a ring ever sees it
 * again, and only the same peer.
 */
#include "smcr/verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/eid.h"
#include "smcr/ib.h"
#include "smcr/lgr.h"
#include "smcr/llc.h"
#include "smcr/stats_abi.h"
#include "smcr/sys.h"
#include "smcr/wire.h"
#include "smcr/wr.h"

#define VERBS_MAX_CLASS 9u /* 8 MiB */
#define VERBS_FLUSH_MS	1000
#define VERBS_FIN_GRACE_MS 2000 /* a FIN and no closing CDC, no probe answer: dead */
#define VERBS_GONE_POLL_MS 50   /* peer_gone's poll() at least this often while CDCs flow */

/* Our own EID, offered after SMCR_UEID's and the kernel's: two smcr ends always share it. */
static const char verbs_ueid[SMCR_CLC_EID_LEN + 1] = "SMCR-USERSPACE-VERBS            ";
#define VERBS_RELEASE 1          /* SMC-Rv2.1: max_conns/max_links negotiated */
#define VERBS_CLIENT_MAX_LINKS 2 /* as a Linux client: invites ADD LINK (lgr_llc.c) */
/*
 * As a server we offer max_links 2 only where we have a second device for the
 * group (smcr_lgr_alt_reserve), else 1: a Linux client told 2 waits 2 s for
 * our ADD LINK after its first link's CONFIRM LINK.
 */
#define VERBS_SERVER_MAX_LINKS 2

struct smcr_xconn {
	int timeout_ms;
	uint32_t want_size;
	int tcp_fd;
	struct sockaddr_storage local;
	uint8_t gid[SMCR_IB_GID_LEN];  /* ours: the TCP connection's local address */
	uint8_t peer_addr[SMCR_IB_GID_LEN]; /* the TCP peer's address, GID form (peer_address) */
	uint8_t mac[SMCR_IB_MAC_LEN];
	struct smcr_ib_port *port;     /* opened for a new group, until it takes it */
	struct smcr_wr_link *link;     /* client: its QP, made ahead, until the group takes it */
	struct smcr_ibsys_gid at;      /* where sysfs found our GID (at_known) */
	bool at_known;
	bool ahead_done;               /* client: open_ahead() ran */
	struct smcr_lgr *lgr;          /* referenced */
	struct smcr_lgr_conn lc;       /* our place in it: token, queue, doorbell */
	bool joined;
	struct smcr_lgr_buf *rmb;
	struct smcr_lgr_buf *snd;      /* mirrors the peer's RMB */
	struct smcr_wr_remote_rmb peer_rmb;
	uint32_t wr_off, wr_len;       /* copied into snd, WRITE not posted yet: goes with the CDC */
	struct smcr_clc_accept peer_conf; /* server: the Confirm it peeked */
	uint32_t peer_token;
	int ep_fd;
	bool first_contact;
	bool server;
	uint8_t eid[SMCR_CLC_EID_LEN]; /* negotiated */
	uint8_t release, max_conns, max_links; /* negotiated (first contact) */
	bool gone;      /* group dead or TCP hung up: recv_ctrl resets after the last message */
	int64_t fin_since_ms; /* the TCP FIN came then (probe sent) */
	int fin_tfd;          /* timerfd in ep_fd: wakes us when the FIN's grace is over */
	bool peer_dead;       /* gone by a reset or the FIN's grace: it acknowledges nothing */
	bool fin_orderly;     /* the probe after the FIN was answered: the peer lives */
	/* peer_gone's poll(): when it last ran, lc.delivered then and at the last call */
	int64_t gone_polled_ms;
	uint64_t gone_polled_rx, gone_call_rx;
	unsigned gone_quiet; /* calls with no new CDC since the last poll() */
	int64_t open_ns;      /* time spent opening the device port (debug log) */
	/* the rest of a stream on TCP (tcp_tail.c) */
	bool client_smcr;     /* server: the Proposal listed our UEID (the client is smcr) */
	bool tail_ok;         /* both ends said in CLC that they take the tail */
	bool peer_tail;       /* the peer's CDC said the rest of its stream is on TCP */
	bool tcp_watched;     /* the ready fd follows the TCP socket, not the group */
	bool cdc_kept;        /* last_cdc holds our last CDC */
	uint8_t last_cdc[SMCR_CDC_MSG_LEN];
};

/* ---- set-up -------------------------------------------------------------------- */

/*
 * The device port for a new group: the one sysfs named in create (verbs must
 * see our GID there, with the MAC we sent: -ESTALE otherwise), or, if a group
 * of ours knew the MAC then, verbs' own choice.
 */
static int open_port(struct smcr_xconn *xc)
{
	int64_t t0;
	int rc;

	if (xc->port)
		return 0;
	t0 = smcr_now_ns();
	if (xc->at_known)
		rc = smcr_ib_port_open_at(&xc->at, xc->gid, &xc->port);
	else
		rc = smcr_ib_port_open((struct sockaddr *)&xc->local, &xc->port);
	xc->open_ns += smcr_now_ns() - t0;
	if (rc == 0)
		memcpy(xc->mac, xc->port->mac, SMCR_IB_MAC_LEN);
	return rc;
}

/*
 * Client, after its Proposal: what a first contact needs of the device
 * (libibverbs loaded, the port opened, the group's QP made), done while the
 * Proposal travels and the server answers, so that the round trip hides it.
 * A reused group's Accept leaves them unused (destroy).  Once.
 */
static void open_ahead(struct smcr_xconn *xc)
{
	int64_t t0 = smcr_now_ns(), t1;
	int rc;

	if (xc->server || xc->ahead_done || !xc->at_known)
		return;
	xc->ahead_done = true;
	rc = open_port(xc);
	t1 = smcr_now_ns();
	if (rc == 0)
		rc = smcr_wr_link_create(xc->port, &xc->link);
	smcr_dbg("verbs: after the Proposal, device %s port %u GID index %u: opened in %lld us, "
		 "QP made in %lld us: %s",
		 xc->at.dev, xc->at.port_num, xc->at.gid_index, (long long)((t1 - t0) / 1000),
		 (long long)((smcr_now_ns() - t1) / 1000), rc ? strerror(-rc) : "ok");
}

static int verbs_create(int tcp_fd, uint32_t size, int timeout_ms, struct smcr_xconn **out)
{
	struct smcr_xconn *xc = calloc(1, sizeof(*xc));
	socklen_t len = sizeof(xc->local);
	int rc;

	if (!xc)
		return -ENOMEM;
	xc->timeout_ms = timeout_ms;
	xc->want_size = size;
	xc->tcp_fd = tcp_fd;
	xc->ep_fd = xc->lc.efd = xc->fin_tfd = -1;
	if (smcr_libc.getsockname(tcp_fd, (struct sockaddr *)&xc->local, &len) < 0) {
		rc = -errno;
		goto fail;
	}
	rc = smcr_ib_addr_gid((struct sockaddr *)&xc->local, xc->gid);
	if (rc)
		goto fail;
	/*
	 * A group of ours on this GID knows the device and MAC.  Else sysfs
	 * names them (libibverbs is not needed for the Proposal: the device is
	 * opened once it is sent, open_ahead(), or for a server's Accept).
	 */
	if (!smcr_lgr_local_mac(xc->gid, xc->mac)) {
		int64_t t0 = smcr_now_ns();

		rc = smcr_ibsys_find_gid(SMCR_IBSYS_ROOT, xc->gid, &xc->at);
		smcr_dbg("verbs: sysfs: RoCE v2 GID %s on %s port %u index %u (%s) in %lld us",
			 rc ? "not found" : "found", xc->at.dev, xc->at.port_num,
			 xc->at.gid_index, xc->at.ndev,
			 (long long)((smcr_now_ns() - t0) / 1000));
		if (rc)
			goto fail;
		xc->at_known = true;
		memcpy(xc->mac, xc->at.mac, SMCR_IB_MAC_LEN);
	}
	*out = xc;
	return 0;
fail:
	free(xc);
	return rc;
}

static int make_ready_fd(struct smcr_xconn *xc)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int dev_fd[2];

	xc->ep_fd = smcr_sys_fd_high(smcr_libc.epoll_create1(EPOLL_CLOEXEC));
	if (xc->ep_fd < 0)
		return -errno;
	ev.data.fd = xc->lc.efd;
	if (smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
		return -errno;
	ev.data.fd = smcr_lgr_channel_fd(xc->lgr);
	if (smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
		return -errno;
	/*
	 * Device events (fatal error, port down, device being removed): `rdma link
	 * delete` waits until every process closed the device, so we must notice.
	 */
	smcr_lgr_device_fds(xc->lgr, &dev_fd[0], &dev_fd[1]);
	ev.data.fd = dev_fd[0];
	if (smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
		return -errno;
	/* ... and the device's removal, which rxe reports by no event (ib.h) */
	ev.data.fd = dev_fd[1];
	if (ev.data.fd >= 0 && smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
		return -errno;
	/* hang-up only: in SMC mode the TCP socket carries nothing else */
	ev.events = EPOLLRDHUP;
	ev.data.fd = xc->tcp_fd;
	if (smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, xc->tcp_fd, &ev) < 0)
		return -errno;
	return 0;
}

/*
 * The TCP peer's address into xc->peer_addr, in GID form: what the peer
 * proved by completing the handshake, which binds link groups (lgr.h,
 * "Identity").  A decline reason or 0.
 */
static int peer_address(struct smcr_xconn *xc)
{
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);

	if (smcr_libc.getpeername(xc->tcp_fd, (struct sockaddr *)&peer, &len) < 0 ||
	    smcr_ib_addr_gid((struct sockaddr *)&peer, xc->peer_addr))
		return SMCR_CLC_DECL_INTERR;
	return 0;
}

/*
 * A first contact's peer GID must be the TCP peer's address: our QP would
 * otherwise send to a host that proved nothing, and the group be keyed on a
 * GID its peer merely claims.  Every RoCE v2 peer we know offers the GID of
 * its TCP connection's own address (ours: verbs_create; the kernel's:
 * smc_ib_determine_gid() on the socket's source address); one that does
 * not (multi-homed across devices, behind NAT) stays on TCP.  A decline
 * reason or 0.
 */
static int gid_names_peer(const struct smcr_xconn *xc, const uint8_t gid[SMCR_CLC_GID_LEN])
{
	char g[INET6_ADDRSTRLEN], a[INET6_ADDRSTRLEN];

	if (!memcmp(gid, xc->peer_addr, SMCR_IB_GID_LEN))
		return 0;
	smcr_info("verbs: the peer's RoCE GID %s is not its TCP address %s: declined",
		  inet_ntop(AF_INET6, gid, g, sizeof(g)) ? g : "?",
		  inet_ntop(AF_INET6, xc->peer_addr, a, sizeof(a)) ? a : "?");
	return SMCR_CLC_DECL_GIDNOTPEER;
}

static void lgr_key(const struct smcr_xconn *xc, const uint8_t peer_id[SMCR_CLC_PEER_ID_LEN],
		    const uint8_t peer_gid[SMCR_CLC_GID_LEN], struct smcr_lgr_key *k)
{
	memset(k, 0, sizeof(*k));
	memcpy(k->peer_id, peer_id, SMCR_CLC_PEER_ID_LEN);
	memcpy(k->peer_gid, peer_gid, SMCR_IB_GID_LEN);
	memcpy(k->local_gid, xc->gid, SMCR_IB_GID_LEN);
	k->role = xc->server ? SMCR_LGR_SERVER : SMCR_LGR_CLIENT;
	memcpy(k->peer_addr, xc->peer_addr, SMCR_IB_GID_LEN);
}

/* A new group (first contact) on our port.  A decline reason or 0. */
static int new_group(struct smcr_xconn *xc, const struct smcr_lgr_key *k)
{
	/* (again, if open_ahead() failed) not the device the Proposal named: no Confirm */
	if (open_port(xc))
		return SMCR_CLC_DECL_NOSMCRDEV;
	if (smcr_lgr_create(k, &xc->port, &xc->link, &xc->lgr))
		return SMCR_CLC_DECL_ERR_RDYLNK;
	xc->first_contact = true;
	return 0;
}

/* Our place in the group: token, doorbell, RMB, readiness.  A decline reason or 0. */
static int join_group(struct smcr_xconn *xc)
{
	uint8_t c = smcr_clc_rmbe_compress(xc->want_size, VERBS_MAX_CLASS);

	if (smcr_lgr_conn_add(xc->lgr, &xc->lc))
		return SMCR_CLC_DECL_INTERR;
	xc->joined = true;
	xc->rmb = smcr_lgr_buf_get(xc->lgr, smcr_clc_rmbe_size(c), true);
	if (!xc->rmb)
		return SMCR_CLC_DECL_ERR_REGBUF;
	/* a group that is up already: announce a new RMB's rkey as Linux does */
	if (!xc->first_contact)
		smcr_lgr_rkey_confirm(xc->lgr, xc->rmb);
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
	xc->snd = smcr_lgr_buf_get(xc->lgr, xc->peer_rmb.size, false);
	return xc->snd ? 0 : SMCR_CLC_DECL_ERR_REGBUF;
}

/* First contact: the group's QP to RTS towards the peer of an Accept/Confirm. */
static int connect_qp(struct smcr_xconn *xc, const struct smcr_clc_accept *a)
{
	struct smcr_ib_qp_info peer = smcr_ib_peer_qp(a->gid, a->mac, a->qpn, a->psn, a->qp_mtu);

	return smcr_lgr_connect(xc->lgr, &peer) ? SMCR_CLC_DECL_ERR_RDYLNK : 0;
}

/* Our EIDs (eid.h): SMCR_UEID's, the kernel's UEID table's, then our own. */
static unsigned own_eids(uint8_t out[SMCR_CLC_MAX_EIDS][SMCR_CLC_EID_LEN])
{
	return smcr_eid_list((const uint8_t *)verbs_ueid, out);
}

static bool eid_known(const uint8_t eid[SMCR_CLC_EID_LEN])
{
	uint8_t own[SMCR_CLC_MAX_EIDS][SMCR_CLC_EID_LEN];
	unsigned n = own_eids(own);

	for (unsigned i = 0; i < n; i++)
		if (!memcmp(own[i], eid, SMCR_CLC_EID_LEN))
			return true;
	return false;
}

/* Our host name as Linux sends it: utsname nodename, blank padded, no NUL. */
static void host_name(uint8_t out[SMCR_CLC_HOSTNAME_LEN])
{
	char name[256] = "";

	memset(out, ' ', SMCR_CLC_HOSTNAME_LEN);
	if (gethostname(name, sizeof(name) - 1) < 0)
		return;
	for (size_t i = 0; i < SMCR_CLC_HOSTNAME_LEN && name[i]; i++)
		out[i] = (uint8_t)(name[i] & 0x7f);
}

static uint8_t min_u8(uint8_t a, uint8_t b)
{
	return a < b ? a : b;
}

/* Our side of an Accept or Confirm (SMC-Rv2). */
static void fill_accept(struct smcr_xconn *xc, struct smcr_clc_msg *m, uint8_t type)
{
	struct smcr_clc_accept *a = &m->accept;
	struct smcr_ib_qp_info own;
	uint32_t rkey;
	uint64_t addr;

	/* the link the connection uses: a reused group's Accept may name the second */
	smcr_lgr_conn_info(xc->lgr, &xc->lc, xc->rmb, &own, &rkey, &addr);
	m->hdr.type = type;
	m->hdr.version = SMCR_CLC_V2;
	m->hdr.typev1 = SMCR_CLC_PATH_R;
	m->hdr.flag = xc->first_contact;
	/* the peer id is the process's, with its first device's MAC, whichever link c uses */
	smcr_lgr_peer_id(xc->mac, a->peer_id);
	memcpy(a->gid, own.gid, SMCR_CLC_GID_LEN);
	memcpy(a->mac, own.mac, SMCR_CLC_MAC_LEN);
	a->qpn = own.qpn;
	a->psn = own.psn;
	a->qp_mtu = own.mtu;
	a->rmb_rkey = rkey;
	a->rmbe_idx = 1;
	a->rmbe_alert_token = xc->lc.token;
	a->rmbe_size = smcr_clc_rmbe_compress(xc->rmb->size, VERBS_MAX_CLASS);
	a->rmb_dma_addr = addr; /* never our virtual address */
	memcpy(a->eid, xc->eid, SMCR_CLC_EID_LEN);
	/* only to an smcr end: our Accept to a client that listed our UEID, our Confirm to
	 * a server whose Accept had the word */
	if (type == SMCR_CLC_ACCEPT ? xc->client_smcr : xc->tail_ok)
		a->smcr_features = SMCR_CLC_SMCR_TCP_TAIL;
	if (xc->first_contact) {
		a->fce.v2_direct = true; /* the peer's GID is on our subnet (no gateway) */
		a->fce.os_type = SMCR_CLC_OS_LINUX;
		a->fce.release = xc->release;
		host_name(a->fce.hostname);
		if (xc->release >= 1) {
			a->fce.max_conns = xc->max_conns;
			a->fce.max_links = xc->max_links;
		}
		if (type == SMCR_CLC_CONFIRM) {
			/* the GIDs we could add links from: just this one */
			a->gid_cnt = 1;
			memcpy(a->gid_list[0], own.gid, SMCR_CLC_GID_LEN);
		}
	}
}

/* An SMC-Rv2 Accept/Confirm naming an EID we have. */
static bool is_ours(const struct smcr_clc_msg *m)
{
	return m->hdr.version >= SMCR_CLC_V2 && m->hdr.typev1 == SMCR_CLC_PATH_R &&
	       eid_known(m->accept.eid);
}

/* Client: before its first SEND or WRITE on a new group, the server's CONFIRM LINK. */
static int await_confirm_link(struct smcr_xconn *xc)
{
	return smcr_lgr_await_active(xc->lgr, xc->timeout_ms) ? -ECONNRESET : 0;
}

/* ---- CLC hooks ------------------------------------------------------------------ */

static int verbs_client_propose(struct smcr_xconn *xc, struct smcr_clc_msg *prop)
{
	struct smcr_clc_proposal *p = &prop->proposal;

	prop->hdr.type = SMCR_CLC_PROPOSAL;
	prop->hdr.version = SMCR_CLC_V2;
	prop->hdr.typev1 = SMCR_CLC_PATH_NONE;
	prop->hdr.typev2 = SMCR_CLC_PATH_R;
	/* who we are: the server matches its link groups on it (and our GID) */
	smcr_lgr_peer_id(xc->mac, p->peer_id);
	memcpy(p->gid, xc->gid, SMCR_CLC_GID_LEN);
	memcpy(p->mac, xc->mac, SMCR_CLC_MAC_LEN);
	memcpy(p->roce_gid, xc->gid, SMCR_CLC_GID_LEN);
	p->release = VERBS_RELEASE;
	p->max_conns = SMCR_LGR_MAX_CONNS;
	p->max_links = VERBS_CLIENT_MAX_LINKS;
	p->eid_cnt = (uint8_t)own_eids(p->eid);
	return 0;
}

/* Does the Proposal list our own UEID?  Only an smcr client does. */
static bool lists_own_ueid(const struct smcr_clc_proposal *p)
{
	for (unsigned i = 0; i < p->eid_cnt && i < SMCR_CLC_MAX_EIDS; i++)
		if (!memcmp(p->eid[i], verbs_ueid, SMCR_CLC_EID_LEN))
			return true;
	return false;
}

/* Server: the first of the client's EIDs in our table.  False if none. */
static bool negotiate_eid(struct smcr_xconn *xc, const struct smcr_clc_proposal *p)
{
	for (unsigned i = 0; i < p->eid_cnt && i < SMCR_CLC_MAX_EIDS; i++) {
		if (eid_known(p->eid[i])) {
			memcpy(xc->eid, p->eid[i], SMCR_CLC_EID_LEN);
			return true;
		}
	}
	return false;
}

static int verbs_server_accept(struct smcr_xconn *xc, const struct smcr_clc_msg *prop,
			       struct smcr_clc_msg *acc)
{
	const struct smcr_clc_proposal *p = &prop->proposal;
	struct smcr_lgr_key k;
	int64_t t0, t1, t2;
	int rc;

	if (prop->hdr.version < SMCR_CLC_V2 ||
	    (prop->hdr.typev2 != SMCR_CLC_PATH_R && prop->hdr.typev2 != SMCR_CLC_PATH_BOTH))
		return SMCR_CLC_DECL_NOSMCRDEV;
	/* as Linux: no EID at all is NOUEID; none in common finds no device */
	if (p->eid_cnt < 1)
		return SMCR_CLC_DECL_NOUEID;
	if (!negotiate_eid(xc, p))
		return SMCR_CLC_DECL_NOSMCRDEV;
	xc->client_smcr = lists_own_ueid(p);
	/* v2.1 limits as Linux's smc_clc_srv_v2x_features_validate */
	xc->release = min_u8(p->release, VERBS_RELEASE);
	xc->max_conns = SMCR_LGR_MAX_CONNS;
	xc->max_links = 1; /* v2.0: no max_links negotiated, no second link */
	if (xc->release >= 1) {
		xc->max_conns = min_u8(p->max_conns, SMCR_LGR_MAX_CONNS);
		if (xc->max_conns < 16)
			return SMCR_CLC_DECL_MAXCONNERR;
		xc->max_links = min_u8(p->max_links, VERBS_SERVER_MAX_LINKS);
		if (xc->max_links < 1)
			return SMCR_CLC_DECL_MAXLINKERR;
	}
	xc->server = true;
	rc = peer_address(xc);
	if (!rc)
		rc = gid_names_peer(xc, p->roce_gid);
	if (rc)
		return rc;
	t0 = smcr_now_ns();
	lgr_key(xc, p->peer_id, p->roce_gid, &k);
	xc->lgr = smcr_lgr_find(&k, 0);
	/* a group still confirming its link: the kernel waits for it too */
	if (xc->lgr && smcr_lgr_await_active(xc->lgr, SMCR_LGR_LLC_WAIT_MS)) {
		smcr_lgr_put(xc->lgr);
		xc->lgr = NULL;
	}
	if (!xc->lgr) {
		rc = new_group(xc, &k);
		if (rc)
			return rc;
		/* a second link needs a second device of ours in the group's subnet */
		if (xc->max_links >= 2 && smcr_lgr_alt_reserve(xc->lgr))
			xc->max_links = 1;
		xc->lgr->max_conns = xc->max_conns;
		xc->lgr->max_links = xc->max_links;
	}
	t1 = smcr_now_ns();
	rc = join_group(xc);
	if (rc)
		return rc;
	if (!xc->first_contact) /* the link with fewer connections (the Accept names it) */
		smcr_lgr_conn_assign(xc->lgr, &xc->lc);
	fill_accept(xc, acc, SMCR_CLC_ACCEPT);
	t2 = smcr_now_ns();
	/* a Linux client waits 6 s for the Accept: these times show where a slow one went */
	smcr_dbg("verbs: Accept (%s, EID %.*s) ready: device open %lld us, group %lld us, "
		 "buffers %lld us",
		 xc->first_contact ? "first contact" : "group reused", smcr_eid_len(xc->eid),
		 (const char *)xc->eid,
		 (long long)(xc->open_ns / 1000), (long long)((t1 - t0) / 1000),
		 (long long)((t2 - t1) / 1000));
	return 0;
}

/*
 * Client, first contact: the Accept's v2.1 values, checked as Linux's
 * smc_clc_clnt_v2x_features_validate does.  A decline reason or 0.
 */
static int client_limits(struct smcr_xconn *xc, const struct smcr_clc_msg *acc)
{
	const struct smcr_clc_fce *f = &acc->accept.fce;

	xc->release = f->release;
	xc->max_conns = SMCR_LGR_MAX_CONNS;
	xc->max_links = 1;
	if (f->release > VERBS_RELEASE)
		return SMCR_CLC_DECL_RELEASEERR;
	if (f->release < 1)
		return 0;
	if (f->max_links < 1 || f->max_links > VERBS_CLIENT_MAX_LINKS)
		return SMCR_CLC_DECL_MAXLINKERR;
	if (f->max_conns < 16)
		return SMCR_CLC_DECL_MAXCONNERR;
	xc->max_conns = f->max_conns;
	xc->max_links = f->max_links;
	return 0;
}

static int verbs_client_attach(struct smcr_xconn *xc, const struct smcr_clc_msg *acc,
			       struct smcr_clc_msg *conf, uint32_t *peer_ring_size)
{
	const struct smcr_clc_accept *a = &acc->accept;
	int64_t t0 = smcr_now_ns();
	struct smcr_lgr_key k;
	int rc;

	if (!is_ours(acc))
		return SMCR_CLC_DECL_MODEUNSUPP;
	memcpy(xc->eid, a->eid, SMCR_CLC_EID_LEN);
	xc->tail_ok = (a->smcr_features & SMCR_CLC_SMCR_TCP_TAIL) != 0;
	rc = peer_address(xc);
	if (rc)
		return rc;
	lgr_key(xc, a->peer_id, a->gid, &k);
	if (acc->hdr.flag) {
		/* first contact: always a new group, even if we have one (kernel rule) */
		rc = gid_names_peer(xc, a->gid);
		if (!rc)
			rc = client_limits(xc, acc);
		if (!rc)
			rc = new_group(xc, &k);
		if (!rc) {
			xc->lgr->max_conns = xc->max_conns;
			xc->lgr->max_links = xc->max_links;
			rc = connect_qp(xc, a);
		}
	} else {
		xc->lgr = smcr_lgr_find(&k, a->qpn);
		rc = xc->lgr ? 0 : SMCR_CLC_DECL_SYNCERR; /* we have no such group */
		if (rc) {
			char addr[INET6_ADDRSTRLEN];

			smcr_info("verbs: the Accept from %s reuses a link group (peer QP %u) we "
				  "have with no peer at that address: declined SYNCERR",
				  inet_ntop(AF_INET6, xc->peer_addr, addr, sizeof(addr)) ? addr : "?",
				  a->qpn);
		}
	}
	if (!rc)
		rc = join_group(xc);
	if (!rc && !acc->hdr.flag)
		smcr_lgr_conn_bind(xc->lgr, &xc->lc, a->qpn, a->gid);
	if (!rc)
		rc = peer_resources(xc, a);
	if (rc)
		return rc;
	smcr_lgr_peer_rmb(xc->lgr, &xc->lc, xc->peer_rmb.rkey, xc->peer_rmb.addr);
	fill_accept(xc, conf, SMCR_CLC_CONFIRM);
	*peer_ring_size = xc->peer_rmb.size;
	smcr_dbg("verbs: Confirm (%s, EID %.*s) ready in %lld us",
		 acc->hdr.flag ? "first contact" : "group reused", smcr_eid_len(xc->eid),
		 (const char *)xc->eid,
		 (long long)((smcr_now_ns() - t0) / 1000));
	return 0;
}

#define VERBS_CLC_SLICE_MS 20

/*
 * Until the TCP socket is readable (1), the deadline passed (0) or -errno,
 * answering LLC requests meanwhile on our groups that a Linux peer may be
 * reusing: xc's group once known, else every group on our GID in our role.
 * A Linux peer runs CONFIRM RKEY (and DELETE RKEY) before its Accept or
 * Confirm and waits 2 s for our answer; nobody else may be taking that
 * group's completions now.
 */
static int verbs_clc_wait(struct smcr_xconn *xc, int64_t deadline)
{
	open_ahead(xc);
	for (;;) {
		int64_t slice = smcr_now_ms() + VERBS_CLC_SLICE_MS;
		int w;

		smcr_lgr_service(xc->lgr, xc->gid, xc->server ? SMCR_LGR_SERVER : SMCR_LGR_CLIENT);
		if (deadline >= 0 && deadline < slice)
			slice = deadline;
		w = smcr_sys_wait_fd(xc->tcp_fd, POLLIN, slice);
		if (w != 0)
			return w;
		if (deadline >= 0 && smcr_now_ms() >= deadline)
			return 0;
	}
}

/*
 * Peek at the next CLC message on the TCP socket without consuming it (the
 * engine reads it afterwards), answering LLC requests first: 0 and *msg,
 * -EAGAIN not all there yet (the engine waits, on server_wait_fd too), or a
 * decline reason.
 */
static int peek_clc(struct smcr_xconn *xc, struct smcr_clc_msg *msg)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t len;
	ssize_t n;

	if (verbs_clc_wait(xc, smcr_now_ms()) <= 0)
		return -EAGAIN;
	n = smcr_libc.recv(xc->tcp_fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return -EAGAIN;
	if (n <= 0)
		return SMCR_CLC_DECL_PEERDECL;
	switch (smcr_clc_decode(buf, (size_t)n, msg, &len, &err)) {
	case SMCR_WIRE_OK:
		return 0;
	case SMCR_WIRE_NEED_MORE:
		return -EAGAIN;
	default:
		return SMCR_CLC_DECL_PEERDECL; /* the engine reports the garbage */
	}
}

/* The group's receive completions: a Linux client's CONFIRM RKEY before its Confirm. */
static int verbs_server_wait_fd(const struct smcr_xconn *xc)
{
	return xc->lgr ? smcr_lgr_channel_fd(xc->lgr) : -1;
}

static int verbs_server_attach(struct smcr_xconn *xc, int tcp_fd, uint32_t *peer_ring_size)
{
	struct smcr_clc_msg conf;
	int rc;

	(void)tcp_fd; /* bound already: verbs_create */
	rc = peek_clc(xc, &conf);
	if (rc)
		return rc;
	if (conf.hdr.type == SMCR_CLC_DECLINE) {
		/* out of sync: the client has no such group; the kernel ends it */
		if (conf.decline.diag == SMCR_CLC_DECL_SYNCERR && !xc->first_contact)
			smcr_lgr_fail(xc->lgr, "the client declined with SYNCERR");
		return SMCR_CLC_DECL_PEERDECL;
	}
	if (conf.hdr.type != SMCR_CLC_CONFIRM || !is_ours(&conf) ||
	    conf.hdr.flag != xc->first_contact ||
	    (!xc->first_contact && conf.accept.qpn != smcr_lgr_conn_peer_qpn(xc->lgr, &xc->lc)))
		rc = SMCR_CLC_DECL_CNFERR;
	/* the Confirm repeats the negotiated values (Linux: smc_clc_v2x_features_confirm_check) */
	else if (xc->first_contact && conf.accept.fce.release != xc->release)
		rc = SMCR_CLC_DECL_RELEASEERR;
	else if (xc->first_contact && xc->release >= 1 &&
		 conf.accept.fce.max_conns != xc->max_conns)
		rc = SMCR_CLC_DECL_MAXCONNERR;
	else if (xc->first_contact && xc->release >= 1 &&
		 conf.accept.fce.max_links != xc->max_links)
		rc = SMCR_CLC_DECL_MAXLINKERR;
	else
		rc = peer_resources(xc, &conf.accept);
	if (!rc && xc->first_contact) {
		rc = connect_qp(xc, &conf.accept);
		if (!rc && smcr_lgr_confirm_link_send(xc->lgr, xc->timeout_ms))
			rc = SMCR_CLC_DECL_ERR_RDYLNK;
	}
	if (rc) {
		smcr_dbg("verbs: the client's Confirm is refused: %s",
			 smcr_clc_decl_name((uint32_t)rc) ? smcr_clc_decl_name((uint32_t)rc) : "?");
		return rc;
	}
	xc->peer_conf = conf.accept;
	xc->tail_ok = xc->client_smcr && (conf.accept.smcr_features & SMCR_CLC_SMCR_TCP_TAIL);
	smcr_lgr_peer_rmb(xc->lgr, &xc->lc, xc->peer_rmb.rkey, xc->peer_rmb.addr);
	*peer_ring_size = xc->peer_rmb.size;
	return 0;
}

static int verbs_server_confirm(struct smcr_xconn *xc, const struct smcr_clc_msg *conf)
{
	const struct smcr_clc_accept *c = &conf->accept;

	if (!xc->lgr || c->qpn != xc->peer_conf.qpn || c->rmb_rkey != xc->peer_conf.rmb_rkey ||
	    c->rmb_dma_addr != xc->peer_conf.rmb_dma_addr ||
	    memcmp(c->gid, xc->peer_conf.gid, SMCR_CLC_GID_LEN) != 0)
		return SMCR_CLC_DECL_CNFERR;
	return 0;
}

/* ---- after the handshake -------------------------------------------------------- */

static void verbs_tokens(const struct smcr_xconn *xc, uint32_t *local, uint32_t *peer)
{
	*local = xc->lc.token;
	*peer = xc->peer_token;
}

static void verbs_ring(struct smcr_xconn *xc, uint8_t **ring, uint32_t *size)
{
	*ring = xc->rmb->mem;
	*size = xc->rmb->size;
}

/* Client on a new group: nothing goes over the QP before CONFIRM LINK. */
static bool may_send(struct smcr_xconn *xc)
{
	return xc->server || !xc->first_contact || await_confirm_link(xc) == 0;
}

/* Post the WRITE(s) of the staged range alone (it cannot grow any more). */
static int flush_writes(struct smcr_xconn *xc)
{
	int rc;

	if (!xc->wr_len)
		return 0;
	rc = smcr_lgr_write(xc->lgr, &xc->lc, xc->snd, &xc->peer_rmb, xc->wr_off, xc->wr_len,
			    xc->timeout_ms);
	xc->wr_len = 0;
	return rc;
}

/*
 * Copy into the mirror and stage the range; the next send_ctrl posts its
 * WRITEs right before the CDC (the engine always announces its writes with a
 * CDC; until then the peer does not look at those bytes).  A range that does
 * not continue the staged one (the engine retried after a failure) sends the
 * staged one first.
 */
static int verbs_write_peer(struct smcr_xconn *xc, uint32_t offset, const void *src,
			    uint32_t len)
{
	uint32_t size = xc->peer_rmb.size;
	int rc;

	if (len == 0)
		return 0;
	if (offset >= size || len > size - offset)
		return -EINVAL;
	if (!may_send(xc))
		return -ECONNRESET;
	if (xc->wr_len && (offset != (uint32_t)(((uint64_t)xc->wr_off + xc->wr_len) % size) ||
			   len > size - xc->wr_len)) {
		rc = flush_writes(xc);
		if (rc)
			return rc;
	}
	memcpy(xc->snd->mem + offset, src, len);
	if (!xc->wr_len)
		xc->wr_off = offset;
	xc->wr_len += len;
	return 0;
}

static int verbs_send_ctrl(struct smcr_xconn *xc, const uint8_t msg[SMCR_CDC_MSG_LEN])
{
	uint32_t len = xc->wr_len;

	_Static_assert(SMCR_CDC_MSG_LEN == SMCR_WR_MSG_LEN, "CDC is one 44-byte SEND");

	if (!may_send(xc))
		return -ECONNRESET;
	if (xc->tail_ok) {
		/* continue_on_tcp() sends it again (44 bytes copied, only between smcr ends) */
		memcpy(xc->last_cdc, msg, SMCR_CDC_MSG_LEN);
		xc->cdc_kept = true;
	}
	if (!len)
		return smcr_lgr_send(xc->lgr, &xc->lc, msg, xc->timeout_ms);
	xc->wr_len = 0;
	return smcr_lgr_write_send(xc->lgr, &xc->lc, xc->snd, &xc->peer_rmb, xc->wr_off, len,
				   msg, xc->timeout_ms);
}

/*
 * Failover: the group moved us to its other link.  From now on we write
 * into the same RMB of the peer through that link's rkey and address
 * (CONFIRM RKEY or ADD LINK told them); the engine resends from *fin_prod.
 * 1 moved, 0 not, -ECONNRESET: the peer's RMB is unknown on that link.
 */
static int verbs_failover(struct smcr_xconn *xc, struct smcr_curs *fin_prod, uint16_t *fin_seq)
{
	struct smcr_lgr_cdc_sent fin;
	uint32_t rkey = 0;
	uint64_t addr = 0;
	int rc;

	if (!xc->lgr)
		return 0;
	rc = smcr_lgr_conn_switched(xc->lgr, &xc->lc, &fin, &rkey, &addr);
	if (rc == 0)
		return 0;
	if (rc < 0) {
		smcr_warn("verbs: link group %u: connection %08x cannot move to link %u: the peer's "
			  "RMB (rkey %08x) is unknown there",
			  xc->lgr->id, xc->lc.token, xc->lc.link, xc->peer_rmb.rkey);
		return -ECONNRESET;
	}
	xc->peer_rmb.rkey = rkey;
	xc->peer_rmb.addr = addr;
	xc->wr_len = 0; /* the engine stages what to resend */
	fin_prod->wrap = fin.prod_wrap;
	fin_prod->count = fin.prod_count;
	*fin_seq = fin.seqno;
	return 1;
}

/* Failover: the mirror's bytes at [offset, offset + len) go with the next CDC again. */
static int verbs_rewrite(struct smcr_xconn *xc, uint32_t offset, uint32_t len)
{
	if (offset >= xc->peer_rmb.size || len > xc->peer_rmb.size)
		return -EINVAL;
	xc->wr_off = offset;
	xc->wr_len = len;
	return 0;
}

static void verbs_rmb_rescued(struct smcr_xconn *xc)
{
	if (xc->lgr)
		smcr_lgr_count_rescue(xc->lgr);
}

static int verbs_recv_ctrl(struct smcr_xconn *xc, uint8_t msg[SMCR_CDC_MSG_LEN])
{
	int rc = smcr_lgr_recv(xc->lgr, &xc->lc, msg);

	if (rc == 1 && xc->tail_ok && (msg[SMCR_CDC_OFF_SMCR_FLAGS] & SMCR_CDC_SMCR_TCP_TAIL))
		xc->peer_tail = true;
	return rc == 0 && xc->gone ? -ECONNRESET : rc;
}

/* ---- the rest of the stream on TCP (tcp_tail.c) ---- */

/* What we wrote into the peer's RMB, from our copy of it (the send buffer). */
static int verbs_read_peer(const struct smcr_xconn *xc, uint32_t offset, void *dst, uint32_t len)
{
	if (!xc->snd || offset > xc->peer_rmb.size || len > xc->peer_rmb.size - offset)
		return -EINVAL;
	memcpy(dst, xc->snd->mem + offset, len);
	return 0;
}

/*
 * The ready fd follows the TCP socket's data, hang-up (and room, `out`)
 * instead of the group: once either end is on TCP, the group's completions,
 * its device events and the peer's hang-up probe are news for nobody (a
 * dead group would keep the fd readable for ever).  Our doorbell stays: the
 * engine's settle() keeps it set while the ring has bytes to read.
 */
static int verbs_watch_tcp(struct smcr_xconn *xc, int tcp_fd, bool out)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0) };

	if (!xc->tcp_watched) {
		(void)smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_DEL, smcr_lgr_channel_fd(xc->lgr),
					  NULL);
		int dev_fd[2];

		smcr_lgr_device_fds(xc->lgr, &dev_fd[0], &dev_fd[1]);
		(void)smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_DEL, dev_fd[0], NULL);
		if (dev_fd[1] >= 0)
			(void)smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_DEL, dev_fd[1], NULL);
		if (xc->fin_tfd >= 0)
			(void)smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_DEL, xc->fin_tfd, NULL);
		xc->tcp_watched = true;
	}
	ev.data.fd = tcp_fd;
	return smcr_sys_epoll_set(xc->ep_fd, tcp_fd, &ev);
}

/*
 * We go on over TCP: our last CDC (the engine sent it just now) goes again
 * with the flag, and must be delivered before we return: an exec ends this
 * process's QP, and with it whatever the NIC has not sent yet.
 */
static int verbs_continue_on_tcp(struct smcr_xconn *xc, int tcp_fd)
{
	uint8_t msg[SMCR_CDC_MSG_LEN];
	int rc;

	if (!xc->tail_ok)
		return -ENOTSUP;
	if (!xc->cdc_kept || !xc->lgr || smcr_lgr_dead(xc->lgr))
		return -ECONNRESET;
	memcpy(msg, xc->last_cdc, sizeof(msg));
	msg[SMCR_CDC_OFF_SMCR_FLAGS] |= SMCR_CDC_SMCR_TCP_TAIL;
	rc = smcr_lgr_send(xc->lgr, &xc->lc, msg, xc->timeout_ms);
	if (rc == 0)
		rc = smcr_lgr_conn_flush(xc->lgr, &xc->lc, VERBS_FLUSH_MS);
	if (rc)
		return rc < 0 ? rc : -ECONNRESET;
	return verbs_watch_tcp(xc, tcp_fd, false);
}

static bool verbs_peer_on_tcp(const struct smcr_xconn *xc)
{
	return xc->peer_tail;
}

static bool verbs_peer_takes_tail(const struct smcr_xconn *xc)
{
	return xc->tail_ok;
}

/* The TCP socket's poll events: 0 no, 1 FIN (hang-up), 2 reset (the peer is gone). */
static int tcp_hung_up(short revents)
{
	if (revents & POLLERR)
		return 2;
	return (revents & (POLLRDHUP | POLLHUP)) ? 1 : 0;
}

/*
 * The TCP connection hung up.  A peer that closed normally posted its last
 * CDC (closed) before its FIN, but the two travel different paths and the
 * FIN may win (protocol.md §7.4), so a hang-up alone is no reset.  We
 * send a TEST LINK: RC keeps order, so once its response is in, every CDC
 * the peer posted before the hang-up has arrived; if the peer process died
 * its QP is gone and the request fails at the NIC, which ends the group.
 * The socket leaves our epoll set (it would stay readable for ever).
 */
static void tcp_hang_up(struct smcr_xconn *xc)
{
	struct itimerspec grace = { .it_value = { .tv_sec = VERBS_FIN_GRACE_MS / 1000,
						  .tv_nsec = (VERBS_FIN_GRACE_MS % 1000) * 1000000L } };
	struct epoll_event ev = { .events = EPOLLIN };

	(void)smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_DEL, xc->tcp_fd, NULL);
	xc->fin_since_ms = smcr_now_ms();
	if (!smcr_lgr_probe(xc->lgr, &xc->lc)) {
		xc->gone = true;
		return;
	}
	/*
	 * A peer that died leaves the probe unanswered, and rxe was seen not to
	 * fail it within 10 s: the grace is then the bound, and something must
	 * wake the waiter when it is over.
	 */
	xc->fin_tfd = smcr_libc.timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	ev.data.fd = xc->fin_tfd;
	if (xc->fin_tfd < 0 || timerfd_settime(xc->fin_tfd, 0, &grace, NULL) < 0 ||
	    smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, xc->fin_tfd, &ev) < 0)
		xc->gone = xc->peer_dead = true; /* cannot wait for the grace: a FIN is death */
}

/* The probe after the FIN was answered: stop the grace timer, watch no more. */
static void fin_was_orderly(struct smcr_xconn *xc)
{
	xc->fin_orderly = true;
	if (xc->fin_tfd >= 0) {
		(void)smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_DEL, xc->fin_tfd, NULL);
		smcr_sys_close(xc->fin_tfd);
		xc->fin_tfd = -1;
	}
}

/*
 * Whether peer_gone may skip its poll(): the device's and the TCP socket's
 * fds are in the ready fd, and they stay readable until looked at, so a
 * waiter they wake comes back here.  While CDCs for us keep coming, a call
 * is explained by them (the wake-up that brought one, the look before the
 * next wait) and the poll runs only every VERBS_GONE_POLL_MS; a second call
 * in a row with no new CDC means something else woke the waiter, and it
 * runs now.  So a ping-pong pays no system call here per round trip, and a
 * hang-up or a device removal is seen within VERBS_GONE_POLL_MS under
 * traffic, at the next call when idle.
 */
static bool gone_poll_due(struct smcr_xconn *xc, uint64_t delivered, int64_t now)
{
	if (delivered != xc->gone_call_rx)
		xc->gone_quiet = 0;
	else
		xc->gone_quiet++;
	xc->gone_call_rx = delivered;
	if (delivered != xc->gone_polled_rx && xc->gone_quiet <= 1 &&
	    now - xc->gone_polled_ms < VERBS_GONE_POLL_MS)
		return false;
	xc->gone_polled_rx = delivered;
	xc->gone_polled_ms = now;
	xc->gone_quiet = 0;
	return true;
}

static bool verbs_peer_gone(struct smcr_xconn *xc)
{
	/*
	 * One system call for all three: the device's events, its removal
	 * (the inotify fd: rxe reports a removal by no event, ib.h) and the TCP
	 * socket's hang-up (not while a probe after its FIN runs).
	 */
	struct pollfd p[3] = {
		{ .fd = -1, .events = POLLIN },
		{ .fd = -1, .events = POLLIN }, /* < 0: ignored */
		{ .fd = xc->tcp_fd, .events = POLLRDHUP },
	};
	uint64_t delivered = 0;
	int n;

	/* on TCP: the group and the TCP socket's hang-up say nothing about the stream */
	if (xc->gone || xc->tcp_watched)
		return xc->gone;
	smcr_lgr_device_fds(xc->lgr, &p[0].fd, &p[1].fd);
	/* completions first: what they bring for us explains the wake-up */
	if (smcr_lgr_dead_check(xc->lgr, false, &xc->lc, &delivered)) {
		xc->gone = true;
		return true;
	}
	if (gone_poll_due(xc, delivered, smcr_now_ms())) {
		n = smcr_libc.poll(p, xc->lc.hup_probe ? 2 : 3, 0);
		if ((n < 0 || p[0].revents || p[1].revents) &&
		    smcr_lgr_dead_check(xc->lgr, true, NULL, NULL)) {
			xc->gone = true;
			return true;
		}
		if (!xc->lc.hup_probe) {
			int hup = n > 0 ? tcp_hung_up(p[2].revents) : 0;

			if (hup == 2) {
				xc->gone = xc->peer_dead = true; /* a reset: no orderly close follows */
				return true;
			}
			if (hup)
				tcp_hang_up(xc);
		}
	}
	if (!xc->lc.hup_probe || xc->fin_orderly)
		return false;
	/*
	 * Answered: the peer's library is alive and everything it sent before
	 * its FIN is here, so the FIN was an orderly shutdown (a half-close
	 * after "done writing" keeps the connection open for the other way;
	 * a full close has its closing CDC in already).  A dead group or the
	 * grace since the FIN over (fin_tfd woke us) with no answer: a dead
	 * peer, which acknowledges nothing.
	 */
	if (smcr_lgr_probe_done(xc->lgr, &xc->lc)) {
		if (smcr_lgr_dead(xc->lgr))
			xc->gone = true;
		else
			fin_was_orderly(xc);
	} else if (smcr_now_ms() - xc->fin_since_ms >= VERBS_FIN_GRACE_MS) {
		xc->gone = xc->peer_dead = true;
	}
	return xc->gone;
}

static int verbs_ready_fd(const struct smcr_xconn *xc)
{
	return xc->ep_fd;
}

/*
 * Re-arm the group's receive CQs (that takes the channels' events, so the
 * channel fds stop being readable), take what completed meanwhile
 * (dispatched to every connection), and leave our doorbell set iff `ready`
 * or a message waits.
 */
static bool verbs_settle(struct smcr_xconn *xc, bool ready)
{
	return smcr_lgr_settle(xc->lgr, &xc->lc, ready);
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
	bool dead;

	if (!xc)
		return;
	if (xc->lgr) {
		/*
		 * Our last WRITE and CDC must have left before the send buffer is
		 * zeroed for reuse (the NIC reads it when it executes the WRITE), and
		 * the peer must get our last CDC: wait for their completion, bounded.
		 * A group that cannot deliver them is dead.
		 */
		/* a peer already found gone acknowledges nothing: do not wait for it */
		dead = xc->peer_dead || smcr_lgr_dead(xc->lgr) ||
		       (xc->lc.last_wr &&
			smcr_lgr_conn_flush(xc->lgr, &xc->lc, VERBS_FLUSH_MS) != 0);
		/* a first contact that did not get its link confirmed: nobody may wait for it */
		if (xc->first_contact && !dead && !smcr_lgr_active(xc->lgr)) {
			smcr_lgr_fail(xc->lgr, "first contact abandoned");
			dead = true;
		}
		/*
		 * The peer finished with our RMB once its closing CDC came: then it goes
		 * back to the pool at once; before that (we closed first) it waits in
		 * the group for that CDC; after a failure it is deregistered (the NIC
		 * refuses later writes), never reused.  The send buffer is ours alone.
		 */
		if (xc->joined && xc->rmb && !dead && !clean) {
			smcr_lgr_buf_retire(xc->lgr, xc->rmb, &xc->lc); /* leaves the group too */
		} else {
			if (xc->joined)
				smcr_lgr_conn_del(xc->lgr, &xc->lc);
			smcr_lgr_buf_put(xc->lgr, xc->rmb, clean && !dead);
		}
		smcr_lgr_buf_put(xc->lgr, xc->snd, !dead);
		smcr_lgr_put(xc->lgr);
	}
	smcr_wr_link_destroy(xc->link); /* made ahead, a group never took it */
	smcr_ib_port_close(xc->port);
	smcr_sys_close(xc->ep_fd);
	smcr_sys_close(xc->fin_tfd);
	free(xc);
}

/*
 * Forked child: the RDMA resources belong to the parent (verbs objects do
 * not survive fork, lgr.c forgot the groups); drop our fds and memory.
 */
static void verbs_forget(struct smcr_xconn *xc)
{
	if (!xc)
		return;
	smcr_sys_close(xc->ep_fd);
	smcr_sys_close(xc->lc.efd);
	smcr_sys_close(xc->fin_tfd);
	free(xc);
}

static void verbs_info(const struct smcr_xconn *xc, struct smcr_xconn_info *out)
{
	memset(out, 0, sizeof(*out));
	out->mode = SMCR_STATS_MODE_SMC_R;
	if (!xc->lgr)
		return;
	out->link_group = xc->lgr->id;
	/* the link it uses: the second one's QP and device if the peer put it there */
	out->qp_num = smcr_lgr_conn_qpn(xc->lgr, &xc->lc, out->device, sizeof(out->device));
}

void smcr_verbs_prepare(void)
{
	smcr_ib_prepare();
}

void smcr_verbs_set_lgr_idle_ms(int ms)
{
	smcr_lgr_set_idle_ms(ms);
}

unsigned smcr_verbs_lgr_count(void)
{
	return smcr_lgr_count();
}

struct smcr_lgr *smcr_verbs_lgr(struct smcr_xconn *xc)
{
	return xc->lgr;
}

void smcr_verbs_peer_rmb(const struct smcr_xconn *xc, uint64_t *addr, uint32_t *rkey,
			 uint32_t *size)
{
	*addr = xc->peer_rmb.addr;
	*rkey = xc->peer_rmb.rkey;
	*size = xc->peer_rmb.size;
}

const struct smcr_transport_ops smcr_verbs_ops = {
	.name = "verbs",
	.create = verbs_create,
	.info = verbs_info,
	.client_propose = verbs_client_propose,
	.server_accept = verbs_server_accept,
	.client_attach = verbs_client_attach,
	.server_attach = verbs_server_attach,
	.server_wait_fd = verbs_server_wait_fd,
	.server_confirm = verbs_server_confirm,
	.clc_wait = verbs_clc_wait,
	.tokens = verbs_tokens,
	.ring = verbs_ring,
	.write_peer = verbs_write_peer,
	.send_ctrl = verbs_send_ctrl,
	.recv_ctrl = verbs_recv_ctrl,
	.failover = verbs_failover,
	.rewrite = verbs_rewrite,
	.rmb_rescued = verbs_rmb_rescued,
	.read_peer = verbs_read_peer,
	.continue_on_tcp = verbs_continue_on_tcp,
	.peer_on_tcp = verbs_peer_on_tcp,
	.peer_takes_tail = verbs_peer_takes_tail,
	.watch_tcp = verbs_watch_tcp,
	.peer_gone = verbs_peer_gone,
	.ready_fd = verbs_ready_fd,
	.settle = verbs_settle,
	.ctrl_pending = verbs_ctrl_pending,
	.peer_running = verbs_peer_running,
	.set_sleeping = verbs_set_sleeping,
	.destroy = verbs_destroy,
	.forget = verbs_forget,
};
