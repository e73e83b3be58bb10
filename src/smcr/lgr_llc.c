// SPDX-License-Identifier: MIT
/*
 * LLC flows on a link group's single link (smc-r-protocol.md §5, kernel
 * net/smc/smc_llc.c), every function with the group mutex held.
 *
 *   CONFIRM LINK  first contact: the server sends the request once its QP is
 *                 in RTS, the client answers it (and sends nothing over the
 *                 QP before it saw it); the group is ACTIVE from then on.
 *   TEST LINK     requests are answered by echoing them (flag 0x80); the
 *                 reaper (lgr.c) sends one when nothing arrived for
 *                 SMCR_LGR_KEEPALIVE_MS, as the kernel does.
 *   DELETE LINK   from the peer: the group ends (every connection resets);
 *                 like the kernel, we then send our own "delete all" (no
 *                 response).  We send one (all, orderly) when an idle group
 *                 is torn down and when the process exits.
 *   ADD LINK      we run one link (max_links 1): a request is rejected at
 *                 once (flags 0xC0), as a Linux client with no alternate path.
 *   CONFIRM RKEY, DELETE RKEY
 *                 answered positively (a Linux peer sends them around every
 *                 reused RMB and waits 2 s for the answer: lgr.c takes LLC
 *                 work during handshakes and from the reaper).  We send
 *                 CONFIRM RKEY for an RMB registered on a group that is up
 *                 already, and DELETE RKEY for one deregistered while the
 *                 group lives, without waiting for the answer: with a single
 *                 link the rkey and address in CLC are all a peer needs
 *                 (af_smc.c takes the rtoken from the Accept/Confirm).
 * Everything is sent in the v2 form (the group was set up by CLC v2).
 */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "smcr/lgr.h"
#include "smcr/llc.h"

static int send_llc(struct smcr_lgr *g, const struct smcr_llc_msg *m, int timeout_ms)
{
	uint8_t buf[SMCR_LLC_MSG_LEN];
	enum smcr_llc_err err;

	memset(buf, 0, sizeof(buf));
	if (smcr_llc_encode(m, buf, sizeof(buf), &err) != SMCR_LLC_MSG_LEN)
		return -EINVAL;
	return smcr_wr_send_msg(g->link, buf, timeout_ms);
}

int smcr_lgr_llc_send_confirm_link(struct smcr_lgr *g, bool response, int timeout_ms)
{
	struct smcr_llc_msg m;
	struct smcr_ib_qp_info own;

	memset(&m, 0, sizeof(m));
	smcr_wr_link_info(g->link, &own);
	m.hdr.type = SMCR_LLC_CONFIRM_LINK;
	m.hdr.version = 2;
	m.hdr.flags = SMCR_LLC_FLAG_NO_RMBE_EYEC | (response ? SMCR_LLC_FLAG_RESP : 0);
	memcpy(m.confirm_link.mac, own.mac, SMCR_LLC_MAC_LEN);
	memcpy(m.confirm_link.gid, own.gid, SMCR_LLC_GID_LEN);
	m.confirm_link.qpn = own.qpn;
	m.confirm_link.link_num = 1;
	m.confirm_link.link_uid = g->id;
	m.confirm_link.max_links = g->max_links;
	m.confirm_link.max_conns = g->max_conns;
	return send_llc(g, &m, timeout_ms);
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

int smcr_lgr_llc_send_rkey(struct smcr_lgr *g, bool confirm, uint32_t rkey, uint64_t vaddr)
{
	struct smcr_llc_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.version = 2;
	if (confirm) {
		m.hdr.type = SMCR_LLC_CONFIRM_RKEY;
		m.confirm_rkey.rkey = rkey;   /* on this (the only) link; no further rtokens */
		m.confirm_rkey.vaddr = vaddr;
	} else {
		m.hdr.type = SMCR_LLC_DELETE_RKEY;
		m.delete_rkey.num_rkeys = 1;
		m.delete_rkey.rkeys[0] = rkey;
	}
	return send_llc(g, &m, SMCR_LGR_LLC_WAIT_MS);
}

/* Answer a request as Linux does (llc.c: smcr_llc_answer). */
static void answer(struct smcr_lgr *g, const uint8_t *raw, uint32_t len, uint8_t extra)
{
	uint8_t out[SMCR_LLC_MSG_LEN];

	smcr_llc_answer(raw, len, extra, out);
	if (smcr_wr_send_msg(g->link, out, SMCR_LGR_LLC_WAIT_MS))
		smcr_lgr_fail_locked(g, "cannot answer an LLC request");
}

void smcr_lgr_llc_handle(struct smcr_lgr *g, const uint8_t *raw, uint32_t len)
{
	uint32_t kept = len < SMCR_LGR_LLC_MSG_MAX ? len : SMCR_LGR_LLC_MSG_MAX;
	bool server = g->key.role == SMCR_LGR_SERVER;
	struct smcr_llc_msg m;
	enum smcr_llc_err err;
	bool resp;

	if (smcr_llc_decode(raw, kept, &m, &err) != SMCR_WIRE_OK) {
		/* an ADD LINK too long to keep: its header is all the reject needs */
		if (kept < len && raw[0] == (0x20 | SMCR_LLC_ADD_LINK) &&
		    !(raw[3] & SMCR_LLC_FLAG_RESP))
			answer(g, raw, len, SMCR_LLC_FLAG_ADD_LINK_REJ);
		return; /* unknown types are dropped, as Linux does */
	}
	resp = m.hdr.flags & SMCR_LLC_FLAG_RESP;
	switch (m.hdr.type) {
	case SMCR_LLC_CONFIRM_LINK:
		/* the server asks, the client answers, once */
		if (resp != server || g->state != SMCR_LGR_PENDING) {
			smcr_lgr_fail_locked(g, "unexpected CONFIRM LINK");
			return;
		}
		if (!resp && smcr_lgr_llc_send_confirm_link(g, true, SMCR_LGR_LLC_WAIT_MS)) {
			smcr_lgr_fail_locked(g, "cannot answer CONFIRM LINK");
			return;
		}
		g->state = SMCR_LGR_ACTIVE;
		return;
	case SMCR_LLC_TEST_LINK:
		if (!resp)
			answer(g, raw, len, 0);
		else if (g->probes_answered < g->probes_sent)
			smcr_lgr_probe_answered_locked(g);
		return;
	case SMCR_LLC_DELETE_LINK:
		if (resp)
			return;
		g->peer_deleted = true;
		smcr_lgr_llc_send_delete_link(g, m.delete_link.reason, false);
		smcr_lgr_end_locked(g, "the peer deleted the link (DELETE LINK)",
				    !(m.hdr.flags & SMCR_LLC_FLAG_DEL_LINK_ORDERLY));
		return;
	case SMCR_LLC_ADD_LINK:
		if (resp)
			return;
		/* we run one link: no alternate path (a v2 receiver keys on 0x40) */
		answer(g, raw, len, SMCR_LLC_FLAG_ADD_LINK_REJ);
		return;
	case SMCR_LLC_CONFIRM_RKEY:
	case SMCR_LLC_DELETE_RKEY: /* every rkey known */
		if (!resp)
			answer(g, raw, len, 0);
		return;
	default:
		return;
	}
}
