// SPDX-License-Identifier: MIT
/*
 * LLC flows on a link group's links (protocol.md §5, kernel
 * net/smc/smc_llc.c), every function with the group mutex held.
 *
 *   CONFIRM LINK  first contact: the server sends the request once its QP is
 *                 in RTS, the client answers it (and sends nothing over the
 *                 QP before it saw it); the group is ACTIVE from then on.
 *   TEST LINK     requests are answered by echoing them (flag 0x80); the
 *                 worker (lgr_worker.c) sends one when nothing arrived for
 *                 SMCR_LGR_KEEPALIVE_MS, as the kernel does.
 *   DELETE LINK   from the peer: the group ends (every connection resets);
 *                 like the kernel, we then send our own "delete all" (no
 *                 response).  We send one (all, orderly) when an idle group
 *                 is torn down and when the process exits.
 *   ADD LINK      server role, SMC-Rv2, max_links 2, a device reserved at
 *                 first contact (lgr.h): sent over the first link once the
 *                 group is ACTIVE, as the kernel's smc_llc_srv_add_link():
 *                 the new QP's MAC/GID/QPN/PSN/MTU, link number 2, the v2
 *                 extension and {rkey on link 1, rkey and address on link 2}
 *                 of every RMB; the answer (a positive one: its rkey list
 *                 kept for failover, the new QP connected, then CONFIRM
 *                 LINK goes out on it and its answer makes the link UP; a
 *                 reject or none within 2 s, or no CONFIRM LINK answer
 *                 within 5 s, drops it: one link).  A positive answer too
 *                 long to keep is taken by its head (no rkey list).  The
 *                 same again when a group left with one link adds a
 *                 second (lgr_readd.c).
 *                 Client role, SMC-Rv2, max_links 2: if the route to the
 *                 server's new GID leaves from another RDMA device of ours
 *                 (smcr_ib_port_open_alt), answered as
 *                 the kernel's smc_llc_cli_add_link(): a QP on that device
 *                 towards the server's new one, every buffer registered on
 *                 its PD, a response with our MAC/GID/QPN/PSN of the new
 *                 link and the v2 rkey list {rkey on link 1, rkey and address
 *                 on link 2} of every RMB (no ADD LINK CONT in v2), then the
 *                 server's CONFIRM LINK on the new QP is answered there.
 *                 Otherwise (no device, a second one already, server role,
 *                 a message too long to keep) rejected at once (flags 0xC0),
 *                 as a Linux client with no alternate path.
 *   DELETE LINK   of the second link only (no "all" flag): its connections
 *                 move to the first link (failover, lgr.h) and it is
 *                 dropped; a client answers it first (reason 0) on the link
 *                 it came on, a server sends it back to the client after
 *                 (the kernel's smc_llc_process_srv_delete_link), whose
 *                 answer it drops.  Of a link we dropped already: a client
 *                 answers "no such link" (the server's echo of its own
 *                 DELETE LINK), as the kernel's client does; a server
 *                 ignores it (a client's, of a link the server gave up
 *                 first), as the kernel's server does.
 *                 We send one (that link, orderly, "lost path") in either
 *                 role when we detect the second link's failure ourselves.
 *   CONFIRM RKEY, DELETE RKEY
 *                 remembered (the peer's rkey of each RMB on each link: a
 *                 connection that moves needs its twin) and answered
 *                 positively (a Linux peer sends them around every
 *                 reused RMB and waits 2 s for the answer: lgr_link.c takes LLC
 *                 work during handshakes and from the worker).  We send
 *                 CONFIRM RKEY for an RMB registered on a group that is up
 *                 already, and DELETE RKEY for one deregistered while the
 *                 group lives, without waiting for the answer: with a single
 *                 link the rkey and address in CLC are all a peer needs
 *                 (af_smc.c takes the rtoken from the Accept/Confirm).  With
 *                 two links CONFIRM RKEY's answer is awaited before our CLC
 *                 Confirm, as the kernel's client does (lgr_buf.c says why).
 * Everything is sent in the v2 form (the group was set up by CLC v2).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "smcr/lgr.h"
#include "smcr/llc.h"
#include "smcr/lgr_int.h"
#include "smcr/sys.h"

static int send_llc_on(struct smcr_lgr *g, unsigned link, const struct smcr_llc_msg *m,
		       int timeout_ms)
{
	uint8_t buf[SMCR_LLC_MSG_LEN];
	enum smcr_llc_err err;

	memset(buf, 0, sizeof(buf));
	if (smcr_llc_encode(m, buf, sizeof(buf), &err) != SMCR_LLC_MSG_LEN)
		return -EINVAL;
	return smcr_wr_send_msg(smcr_lgr_wr(g, link), buf, timeout_ms);
}

static int send_llc(struct smcr_lgr *g, const struct smcr_llc_msg *m, int timeout_ms)
{
	return send_llc_on(g, 0, m, timeout_ms);
}

/* CONFIRM LINK on link `link` (its own QP, GID, MAC, id). */
static int send_confirm_link_on(struct smcr_lgr *g, unsigned link, bool response, int timeout_ms)
{
	struct smcr_llc_msg m;
	struct smcr_ib_qp_info own;

	memset(&m, 0, sizeof(m));
	smcr_wr_link_info(smcr_lgr_wr(g, link), &own);
	m.hdr.type = SMCR_LLC_CONFIRM_LINK;
	m.hdr.version = 2;
	m.hdr.flags = SMCR_LLC_FLAG_NO_RMBE_EYEC | (response ? SMCR_LLC_FLAG_RESP : 0);
	memcpy(m.confirm_link.mac, own.mac, SMCR_LLC_MAC_LEN);
	memcpy(m.confirm_link.gid, own.gid, SMCR_LLC_GID_LEN);
	m.confirm_link.qpn = own.qpn;
	m.confirm_link.link_num = link == 1 ? g->alt.link_num : g->link_num;
	m.confirm_link.link_uid = link == 1 ? g->id + m.confirm_link.link_num : g->id;
	m.confirm_link.max_links = g->max_links;
	m.confirm_link.max_conns = g->max_conns;
	return send_llc_on(g, link, &m, timeout_ms);
}

int smcr_lgr_llc_send_confirm_link(struct smcr_lgr *g, bool response, int timeout_ms)
{
	return send_confirm_link_on(g, 0, response, timeout_ms);
}

int smcr_lgr_llc_send_test_link(struct smcr_lgr *g)
{
	struct smcr_llc_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_LLC_TEST_LINK;
	m.hdr.version = 2;
	if (send_llc(g, &m, SMCR_LGR_LLC_WAIT_MS))
		return -ECONNRESET;
	g->probes_sent++;
	return 0;
}

void smcr_lgr_llc_send_delete_link(struct smcr_lgr *g, uint32_t reason, bool orderly)
{
	struct smcr_llc_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_LLC_DELETE_LINK;
	m.hdr.version = 2;
	m.hdr.flags = SMCR_LLC_FLAG_DEL_LINK_ALL | (orderly ? SMCR_LLC_FLAG_DEL_LINK_ORDERLY : 0);
	m.delete_link.link_num = 1;
	m.delete_link.reason = reason;
	(void)send_llc(g, &m, SMCR_LGR_LLC_WAIT_MS);
}

void smcr_lgr_llc_send_delete_link_one(struct smcr_lgr *g, uint8_t link_num, uint32_t reason)
{
	struct smcr_llc_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_LLC_DELETE_LINK;
	m.hdr.version = 2;
	m.hdr.flags = SMCR_LLC_FLAG_DEL_LINK_ORDERLY;
	m.delete_link.link_num = link_num;
	m.delete_link.reason = reason;
	(void)send_llc(g, &m, SMCR_LGR_LLC_WAIT_MS);
}

int smcr_lgr_llc_send_rkey(struct smcr_lgr *g, bool confirm, uint32_t rkey, uint64_t vaddr)
{
	struct smcr_llc_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.version = 2;
	if (confirm) {
		m.hdr.type = SMCR_LLC_CONFIRM_RKEY;
		m.confirm_rkey.rkey = rkey;   /* on the link carrying the message (the first) */
		m.confirm_rkey.vaddr = vaddr;
		/* the same RMB over the second link: the peer may write there for a connection on it */
		for (const struct smcr_lgr_buf *b = g->all_bufs; b; b = b->all_next) {
			if (g->alt.state == SMCR_LGR_LINK_UP && b->mr->rkey == rkey && b->mr_alt) {
				m.confirm_rkey.num_rkeys = 1;
				m.confirm_rkey.rt[0].link_id = g->alt.link_num;
				m.confirm_rkey.rt[0].rkey = b->mr_alt->rkey;
				m.confirm_rkey.rt[0].vaddr = b->iova_alt;
				break;
			}
		}
	} else {
		m.hdr.type = SMCR_LLC_DELETE_RKEY;
		m.delete_rkey.num_rkeys = 1;
		m.delete_rkey.rkeys[0] = rkey;
	}
	return send_llc(g, &m, SMCR_LGR_LLC_WAIT_MS);
}

/* Answer a request as Linux does (llc.c: smcr_llc_answer), on the link it came on. */
static void answer(struct smcr_lgr *g, unsigned link, const uint8_t *raw, uint32_t len,
		   uint8_t extra)
{
	uint8_t out[SMCR_LLC_MSG_LEN];

	smcr_llc_answer(raw, len, extra, out);
	if (smcr_wr_send_msg(smcr_lgr_wr(g, link), out, SMCR_LGR_LLC_WAIT_MS))
		smcr_lgr_fail_locked(g, "cannot answer an LLC request");
}

/* Every RMB's rkey triple {on the first link, on the second and its address there}. */
static void add_rkeys(const struct smcr_lgr *g, struct smcr_llc_msg *m)
{
	struct smcr_llc_add_link *a = &m->add_link;

	for (const struct smcr_lgr_buf *b = g->all_bufs; b; b = b->all_next) {
		if (!b->rmb || !b->mr_alt || a->num_rkeys == SMCR_LLC_MAX_ADD_LINK_RKEYS)
			continue;
		a->rkeys[a->num_rkeys].rkey = b->mr->rkey;
		a->rkeys[a->num_rkeys].rkey_new = b->mr_alt->rkey;
		a->rkeys[a->num_rkeys].vaddr_new = b->iova_alt;
		a->num_rkeys++;
	}
}

/* DELETE LINK of the second link alone (not orderly: its path is lost), on the first. */
static void send_delete_alt(struct smcr_lgr *g)
{
	struct smcr_llc_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = SMCR_LLC_DELETE_LINK;
	m.hdr.version = 2;
	m.delete_link.link_num = g->alt.link_num;
	m.delete_link.reason = SMCR_LLC_DEL_LOST_PATH;
	(void)send_llc(g, &m, SMCR_LGR_LLC_WAIT_MS);
}

/* A request sent back as it came, on the link it came on (the kernel's server does so). */
static void send_back(struct smcr_lgr *g, unsigned link, const uint8_t *raw, uint32_t len)
{
	uint8_t out[SMCR_LLC_MSG_LEN];

	memset(out, 0, sizeof(out));
	memcpy(out, raw, len < sizeof(out) ? len : sizeof(out));
	if (smcr_wr_send_msg(smcr_lgr_wr(g, link), out, SMCR_LGR_LLC_WAIT_MS))
		smcr_lgr_fail_locked(g, "cannot send an LLC request back");
}

/*
 * The peer's RMBs on the second link from an ADD LINK's rkey list (a
 * server's request, or a client's positive answer: the kernel's
 * smc_llc_save_add_link_rkeys), each {its rkey on `link`, the one carrying
 * the message; its rkey and address on the new link}: a connection that
 * moves from one link to the other writes into the same RMB through its twin.
 */
static void note_add_link_rkeys(struct smcr_lgr *g, unsigned link,
				const struct smcr_llc_add_link *r)
{
	for (unsigned i = 0; i < r->num_rkeys; i++) {
		struct smcr_lgr_rtoken *t = smcr_lgr_rtoken_get_locked(g, link, r->rkeys[i].rkey);

		if (!t)
			continue;
		t->rkey[1] = r->rkeys[i].rkey_new;
		t->vaddr[1] = r->rkeys[i].vaddr_new;
		t->has_rkey |= 2u;
		t->has_vaddr |= 2u;
	}
}

/*
 * Server: the first link is confirmed and a second device was reserved for
 * the group (smcr_lgr_alt_reserve): its QP, every buffer on its PD, and ADD
 * LINK to the client over the first link, as the kernel's
 * smc_llc_srv_add_link(); the answer is awaited for SMCR_LGR_LLC_WAIT_MS
 * (the worker gives it up then).
 */
void smcr_lgr_llc_srv_add_link(struct smcr_lgr *g)
{
	struct smcr_ib_qp_info own;
	struct smcr_llc_msg *m;
	enum smcr_llc_err err;
	uint8_t *buf;
	size_t len;
	int rc = smcr_lgr_alt_start(g);

	if (rc) {
		smcr_info("verbs: link group %u: no second link (%s)", g->id, strerror(-rc));
		return;
	}
	m = calloc(1, sizeof(*m));
	buf = calloc(1, SMCR_LLC_V2_MAX_LEN);
	rc = -ENOMEM;
	if (m && buf) {
		smcr_wr_link_info(g->alt.link, &own);
		smcr_llc_add_link_v2(m, false, false, own.mac, own.gid, own.qpn, own.psn,
				     g->alt.link_num, own.mtu, true);
		add_rkeys(g, m);
		len = smcr_llc_encode(m, buf, SMCR_LLC_V2_MAX_LEN, &err);
		rc = len ? smcr_wr_send_long(g->link, buf, (uint32_t)len, SMCR_LGR_LLC_WAIT_MS)
			 : -EINVAL;
		if (rc)
			smcr_lgr_fail_locked(g, "cannot send ADD LINK");
		else
			smcr_info("verbs: link group %u: ADD LINK %u sent: second link on %s (QP %u), "
				  "%u rkeys", g->id, g->alt.link_num, g->alt.port->name, own.qpn,
				  m->add_link.num_rkeys);
	}
	free(m);
	free(buf);
	if (rc)
		smcr_lgr_alt_close(g);
	else
		g->alt.since_ms = smcr_now_ms();
}

/*
 * Server: the client's answer to our ADD LINK (a response, maybe with its
 * rkeys cut: lgr.h), which came on `link`.
 */
static void srv_add_link_answer(struct smcr_lgr *g, unsigned link, const struct smcr_llc_msg *resp)
{
	const struct smcr_llc_add_link *r = &resp->add_link;
	struct smcr_ib_qp_info peer, own;

	if (g->alt.state != SMCR_LGR_LINK_ADDING || !g->alt.since_ms)
		return; /* late, or never asked: dropped, as the kernel drops out-of-flow answers */
	if (resp->hdr.flags & SMCR_LLC_FLAG_ADD_LINK_REJ) {
		smcr_info("verbs: link group %u: the client rejected the second link", g->id);
		smcr_lgr_alt_close(g);
		return;
	}
	if (r->link_num != g->alt.link_num || r->qp_mtu < 1 || r->qp_mtu > 5) {
		smcr_info("verbs: link group %u: a bad ADD LINK answer (link %u, MTU %u): one link",
			  g->id, r->link_num, r->qp_mtu);
		send_delete_alt(g);
		smcr_lgr_alt_close(g);
		return;
	}
	/* the client's RMBs on the new link: a connection on it may have to move back */
	note_add_link_rkeys(g, link, r);
	smcr_wr_link_info(g->alt.link, &own);
	peer = smcr_ib_peer_qp(r->gid, r->mac, r->qpn, r->psn,
			       r->qp_mtu < own.mtu ? r->qp_mtu : own.mtu);
	if (smcr_lgr_alt_connect(g, &peer) || send_confirm_link_on(g, 1, false, SMCR_LGR_LLC_WAIT_MS)) {
		smcr_info("verbs: link group %u: the second link does not connect: one link", g->id);
		send_delete_alt(g);
		smcr_lgr_alt_close(g);
		return;
	}
	g->alt.state = SMCR_LGR_LINK_PENDING;
	g->alt.since_ms = smcr_now_ms();
}

void smcr_lgr_llc_alt_timeout(struct smcr_lgr *g)
{
	if (g->alt.state == SMCR_LGR_LINK_PENDING) {
		smcr_info("verbs: link group %u: no CONFIRM LINK answer on the second link: one link",
			  g->id);
		send_delete_alt(g); /* as the kernel: the client drops its half */
	} else {
		smcr_info("verbs: link group %u: the client did not answer ADD LINK: one link", g->id);
	}
	smcr_lgr_alt_close(g);
}

/* A DELETE LINK answered as the kernel's client does: the request, RESP, `reason`. */
static void answer_delete_link(struct smcr_lgr *g, unsigned link, const uint8_t *raw, uint32_t len,
			       uint32_t reason)
{
	uint8_t out[SMCR_LLC_MSG_LEN];

	smcr_llc_answer(raw, len, 0, out);
	smcr_put_be32(out + 5, reason); /* link_num at 4, reason at 5 (v1 and v2) */
	if (smcr_wr_send_msg(smcr_lgr_wr(g, link), out, SMCR_LGR_LLC_WAIT_MS))
		smcr_lgr_fail_locked(g, "cannot answer DELETE LINK");
}

/* The link index (0, 1) of the peer's link id, or -1. */
static int link_index(const struct smcr_lgr *g, uint8_t link_id)
{
	if (link_id == g->link_num)
		return 0;
	if (g->alt.state != SMCR_LGR_LINK_NONE && link_id == g->alt.link_num)
		return 1;
	return -1;
}

/*
 * The peer's rtokens of one RMB (failover needs its twin on the other link):
 * CONFIRM RKEY names it on the link that carried the message and on others
 * by link id.
 */
static void note_confirm_rkey(struct smcr_lgr *g, unsigned link,
			      const struct smcr_llc_confirm_rkey *r)
{
	struct smcr_lgr_rtoken *t = smcr_lgr_rtoken_get_locked(g, link, r->rkey);

	if (!t)
		return;
	t->vaddr[link] = r->vaddr;
	t->has_vaddr |= (uint8_t)(1u << link);
	for (unsigned i = 0; i < r->num_rkeys && i < 2; i++) {
		int o = link_index(g, r->rt[i].link_id);

		if (o < 0 || (unsigned)o == link)
			continue;
		t->rkey[o] = r->rt[i].rkey;
		t->vaddr[o] = r->rt[i].vaddr;
		t->has_rkey |= (uint8_t)(1u << o);
		t->has_vaddr |= (uint8_t)(1u << o);
	}
}

/*
 * The server's ADD LINK (client role): the second link, answered with its
 * parameters and our rkeys on it.  0, or -errno: reject.
 */
static int add_link(struct smcr_lgr *g, unsigned link, const struct smcr_llc_msg *req)
{
	const struct smcr_llc_add_link *r = &req->add_link;
	struct smcr_llc_msg *m;
	struct smcr_ib_qp_info peer, own;
	uint8_t *buf;
	enum smcr_llc_err err;
	size_t len;
	int rc;

	if (g->key.role != SMCR_LGR_CLIENT || req->hdr.version != 2 || !r->has_v2_ext ||
	    g->max_links < 2 || g->state != SMCR_LGR_ACTIVE || g->alt.state != SMCR_LGR_LINK_NONE ||
	    r->qp_mtu < 1 || r->qp_mtu > 5)
		return -EINVAL;
	peer = smcr_ib_peer_qp(r->gid, r->mac, r->qpn, r->psn, r->qp_mtu);
	rc = smcr_lgr_alt_open(g, &peer, r->link_num);
	if (rc) {
		smcr_info("verbs: link group %u: no second link (%s)", g->id,
			  rc == -ENODEV ? "its GID is reached through our first device" : strerror(-rc));
		return rc;
	}
	m = calloc(1, sizeof(*m));
	buf = calloc(1, SMCR_LLC_V2_MAX_LEN);
	if (!m || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	note_add_link_rkeys(g, link, r); /* the server's RMBs on the new link */
	smcr_wr_link_info(g->alt.link, &own);
	smcr_llc_add_link_v2(m, true, req->hdr.length_be, own.mac, own.gid, own.qpn, own.psn,
			     r->link_num, own.mtu < r->qp_mtu ? own.mtu : r->qp_mtu, r->v2_direct);
	add_rkeys(g, m);
	len = smcr_llc_encode(m, buf, SMCR_LLC_V2_MAX_LEN, &err);
	if (!len) {
		rc = -EINVAL;
		goto out;
	}
	rc = smcr_wr_send_long(g->link, buf, (uint32_t)len, SMCR_LGR_LLC_WAIT_MS);
	if (rc)
		smcr_lgr_fail_locked(g, "cannot answer ADD LINK");
	else
		smcr_info("verbs: link group %u: second link %u on %s (QP %u), %u rkeys", g->id,
			  r->link_num, g->alt.port->name, own.qpn, m->add_link.num_rkeys);
out:
	free(m);
	free(buf);
	if (rc)
		smcr_lgr_alt_close(g);
	return g->state == SMCR_LGR_DEAD ? 0 : rc; /* failed sending: no reject either */
}

/* Does a connection use the second link? */
static bool alt_in_use(const struct smcr_lgr *g)
{
	for (const struct smcr_lgr_conn *c = g->conns; c; c = c->next)
		if (c->link == 1)
			return true;
	return false;
}

/* A received LLC message, as each handler gets it. */
struct llc_rx {
	struct smcr_lgr *g;
	unsigned link;                 /* the link it came on (0, 1) */
	const uint8_t *raw;            /* min(len, SMCR_LGR_LLC_MSG_MAX) bytes of it */
	uint32_t len;                  /* as received */
	const struct smcr_llc_msg *m;  /* decoded */
	bool resp;                     /* a response (SMCR_LLC_FLAG_RESP) */
	bool server;                   /* our role in the group */
};

/* Server: the client confirmed our second link (on itself, as the kernel and we answer). */
static void second_link_confirmed(struct smcr_lgr *g)
{
	g->alt.state = SMCR_LGR_LINK_UP;
	g->readd_left = 0;
	smcr_info("verbs: link group %u: second link %u up on %s (peer QP %u)", g->id,
		  g->alt.link_num, g->alt.port->name, g->alt.peer_qpn);
}

/* Client: the server confirms the second link on its new QP, once. */
static void confirm_second_link(const struct llc_rx *rx)
{
	struct smcr_lgr *g = rx->g;

	if (rx->resp || rx->server || g->alt.state != SMCR_LGR_LINK_PENDING) {
		smcr_lgr_fail_locked(g, "unexpected CONFIRM LINK on the second link");
		return;
	}
	if (send_confirm_link_on(g, 1, true, SMCR_LGR_LLC_WAIT_MS)) {
		smcr_lgr_fail_locked(g, "cannot answer CONFIRM LINK on the second link");
		return;
	}
	g->alt.state = SMCR_LGR_LINK_UP;
	smcr_info("verbs: link group %u: second link %u up", g->id, g->alt.link_num);
}

/* First contact: the server asks, the client answers, once; the group is ACTIVE. */
static void confirm_first_link(const struct llc_rx *rx)
{
	struct smcr_lgr *g = rx->g;

	if (rx->resp != rx->server || g->state != SMCR_LGR_PENDING) {
		smcr_lgr_fail_locked(g, "unexpected CONFIRM LINK");
		return;
	}
	if (!rx->resp) /* the server's link id, adopted */
		g->link_num = rx->m->confirm_link.link_num;
	if (!rx->resp && smcr_lgr_llc_send_confirm_link(g, true, SMCR_LGR_LLC_WAIT_MS)) {
		smcr_lgr_fail_locked(g, "cannot answer CONFIRM LINK");
		return;
	}
	g->state = SMCR_LGR_ACTIVE;
	if (rx->server && g->alt.state == SMCR_LGR_LINK_ADDING && !g->alt.since_ms)
		smcr_lgr_llc_srv_add_link(g);
}

static void llc_rx_confirm_link(const struct llc_rx *rx)
{
	struct smcr_lgr *g = rx->g;

	if (rx->server && rx->resp && g->alt.state == SMCR_LGR_LINK_PENDING &&
	    rx->m->confirm_link.link_num == g->alt.link_num)
		second_link_confirmed(g);
	else if (rx->link == 1)
		confirm_second_link(rx);
	else
		confirm_first_link(rx);
}

static void llc_rx_test_link(const struct llc_rx *rx)
{
	struct smcr_lgr *g = rx->g;

	if (!rx->resp)
		answer(g, rx->link, rx->raw, rx->len, 0);
	else if (g->probes_answered < g->probes_sent)
		smcr_lgr_probe_answered_locked(g);
}

/*
 * The second link only, the kernel's smc_llc_process_cli_delete_link
 * (client: answered, reason 0, on the link it came on) and
 * smc_llc_process_srv_delete_link (server: its connections move first, then
 * the request goes back to the client, which answers it): dropped, its
 * connections on the first link, the group goes on with one link.
 */
static void delete_second_link(const struct llc_rx *rx)
{
	struct smcr_lgr *g = rx->g;

	if (!rx->server)
		answer_delete_link(g, rx->link, rx->raw, rx->len, 0);
	if (g->state == SMCR_LGR_DEAD)
		return;
	if (alt_in_use(g)) {
		smcr_lgr_alt_down_locked(g, "the peer deleted it (DELETE LINK)", true);
	} else {
		smcr_info("verbs: link group %u: the peer deleted the second link", g->id);
		smcr_lgr_alt_close(g);
	}
	if (rx->server && g->state != SMCR_LGR_DEAD)
		send_back(g, rx->link, rx->raw, rx->len);
}

/*
 * The first link, with the second up: the same flow, the second link
 * becoming the group's first and only one (smcr_lgr_first_down_locked).  A
 * server sends the request back on the link that is left.
 */
static bool delete_first_link(const struct llc_rx *rx)
{
	struct smcr_lgr *g = rx->g;

	if (g->state != SMCR_LGR_ACTIVE || g->alt.state != SMCR_LGR_LINK_UP)
		return false;
	if (!rx->server)
		answer_delete_link(g, rx->link, rx->raw, rx->len, 0);
	if (g->state == SMCR_LGR_DEAD)
		return true;
	if (!smcr_lgr_first_down_locked(g, "the peer deleted it (DELETE LINK)", true))
		return false;
	if (rx->server && g->state != SMCR_LGR_DEAD)
		send_back(g, 0, rx->raw, rx->len);
	return true;
}

static void llc_rx_delete_link(const struct llc_rx *rx)
{
	struct smcr_lgr *g = rx->g;
	const struct smcr_llc_msg *m = rx->m;
	bool all = m->hdr.flags & SMCR_LLC_FLAG_DEL_LINK_ALL;

	if (rx->resp)
		return;
	if (!all && link_index(g, m->delete_link.link_num) == 1) {
		delete_second_link(rx);
		return;
	}
	if (!all && link_index(g, m->delete_link.link_num) == 0 && delete_first_link(rx))
		return;
	if (!all && !rx->server && link_index(g, m->delete_link.link_num) < 0) {
		/* a link we dropped already (the server's echo of our own DELETE LINK) */
		answer_delete_link(g, rx->link, rx->raw, rx->len, SMCR_LLC_DEL_NOLNK);
		return;
	}
	if (!all && m->delete_link.link_num != g->link_num &&
	    (g->alt.state == SMCR_LGR_LINK_NONE || m->delete_link.link_num != g->alt.link_num)) {
		/* a link we do not have (a second link given up): nothing to do */
		smcr_dbg("verbs: link group %u: DELETE LINK %u ignored", g->id,
			 m->delete_link.link_num);
		return;
	}
	g->peer_deleted = true;
	smcr_lgr_llc_send_delete_link(g, m->delete_link.reason, false);
	smcr_lgr_end_locked(g, "the peer deleted the link (DELETE LINK)",
			    !(m->hdr.flags & SMCR_LLC_FLAG_DEL_LINK_ORDERLY));
}

static void llc_rx_add_link(const struct llc_rx *rx)
{
	if (rx->resp) {
		if (rx->server)
			srv_add_link_answer(rx->g, rx->link, rx->m);
		return;
	}
	/* no alternate path: rejected (a v2 receiver keys on 0x40) */
	if (add_link(rx->g, rx->link, rx->m))
		answer(rx->g, rx->link, rx->raw, rx->len, SMCR_LLC_FLAG_ADD_LINK_REJ);
}

static void llc_rx_confirm_rkey(const struct llc_rx *rx)
{
	struct smcr_lgr *g = rx->g;

	if (rx->resp) {
		if (g->rkey_confirms_answered < g->rkey_confirms_sent)
			g->rkey_confirms_answered++; /* smcr_lgr_rkey_confirm waits for it */
		return;
	}
	note_confirm_rkey(g, rx->link, &rx->m->confirm_rkey);
	answer(g, rx->link, rx->raw, rx->len, 0);
}

static void llc_rx_delete_rkey(const struct llc_rx *rx)
{
	const struct smcr_llc_delete_rkey *d = &rx->m->delete_rkey;

	if (rx->resp)
		return;
	for (unsigned i = 0; i < d->num_rkeys && i < SMCR_LLC_DEL_RKEY_V2_MAX; i++)
		smcr_lgr_rtoken_del_locked(rx->g, rx->link, d->rkeys[i]);
	answer(rx->g, rx->link, rx->raw, rx->len, 0); /* every rkey known */
}

/*
 * One handler a message type, as net/smc dispatches; other types are
 * dropped, as Linux does.
 */
static void (*const llc_rx_handlers[])(const struct llc_rx *rx) = {
	[SMCR_LLC_CONFIRM_LINK] = llc_rx_confirm_link,
	[SMCR_LLC_ADD_LINK] = llc_rx_add_link,
	[SMCR_LLC_DELETE_LINK] = llc_rx_delete_link,
	[SMCR_LLC_CONFIRM_RKEY] = llc_rx_confirm_rkey,
	[SMCR_LLC_TEST_LINK] = llc_rx_test_link,
	[SMCR_LLC_DELETE_RKEY] = llc_rx_delete_rkey,
};

static void llc_handle(struct smcr_lgr *g, unsigned link, const uint8_t *raw, uint32_t len)
{
	uint32_t kept = len < SMCR_LGR_LLC_MSG_MAX ? len : SMCR_LGR_LLC_MSG_MAX;
	bool server = g->key.role == SMCR_LGR_SERVER;
	struct smcr_llc_msg m;
	enum smcr_llc_err err;
	struct llc_rx rx = { .g = g, .link = link, .raw = raw, .len = len, .m = &m,
			     .server = server };

	/* an ADD LINK answer longer than we keep: its head has all a server needs */
	if (smcr_llc_decode(raw, kept, &m, &err) != SMCR_WIRE_OK &&
	    (!server || !(raw[3] & SMCR_LLC_FLAG_RESP) ||
	     smcr_llc_decode_add_link_head(raw, kept, len, &m, &err) != SMCR_WIRE_OK)) {
		/* an ADD LINK too long to keep: its header is all the reject needs */
		if (kept < len && raw[0] == (0x20 | SMCR_LLC_ADD_LINK) &&
		    !(raw[3] & SMCR_LLC_FLAG_RESP))
			answer(g, link, raw, len, SMCR_LLC_FLAG_ADD_LINK_REJ);
		return; /* unknown types are dropped, as Linux does */
	}
	rx.resp = m.hdr.flags & SMCR_LLC_FLAG_RESP;
	if (m.hdr.type < sizeof(llc_rx_handlers) / sizeof(llc_rx_handlers[0]) &&
	    llc_rx_handlers[m.hdr.type])
		llc_rx_handlers[m.hdr.type](&rx);
}

/* LLC is what changes a group's links and state: its record follows each message. */
void smcr_lgr_llc_handle(struct smcr_lgr *g, unsigned link, const uint8_t *raw, uint32_t len)
{
	llc_handle(g, link, raw, len);
	smcr_lgr_publish_locked(g);
}
