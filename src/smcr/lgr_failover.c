// SPDX-License-Identifier: MIT
/*
 * A link group's second link and failover (see lgr.h, "Second link" and
 * "Failover"): the peer's RMBs per link, a link's set-up (its device, QP
 * and every buffer on its PD) and drop, and moving the connections of a
 * link that goes down to the other (the second link first made the first
 * when the first goes down).  Group mutex held where _locked.
 */
#include "smcr/lgr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/llc.h"
#include "smcr/lgr_int.h"

/* ---- the peer's RMBs per link, a link going down ---------------------------------- */

#define LGR_RTOK_MAX 512u /* the peer's RMBs we keep (Linux: 255 per group) */

static struct smcr_lgr_rtoken *rtok_find(struct smcr_lgr *g, unsigned link, uint32_t rkey)
{
	for (unsigned i = 0; i < g->nrtok; i++)
		if ((g->rtok[i].has_rkey & (1u << link)) && g->rtok[i].rkey[link] == rkey)
			return &g->rtok[i];
	return NULL;
}

struct smcr_lgr_rtoken *smcr_lgr_rtoken_get_locked(struct smcr_lgr *g, unsigned link,
						   uint32_t rkey)
{
	struct smcr_lgr_rtoken *t = rtok_find(g, link, rkey);

	if (t)
		return t;
	if (g->nrtok == g->rtok_cap) {
		unsigned cap = g->rtok_cap ? 2 * g->rtok_cap : 16;
		struct smcr_lgr_rtoken *n;

		if (cap > LGR_RTOK_MAX)
			return NULL;
		n = realloc(g->rtok, cap * sizeof(*n));
		if (!n)
			return NULL;
		g->rtok = n;
		g->rtok_cap = cap;
	}
	t = &g->rtok[g->nrtok++];
	memset(t, 0, sizeof(*t));
	t->rkey[link] = rkey;
	t->has_rkey = (uint8_t)(1u << link);
	return t;
}

void smcr_lgr_rtoken_del_locked(struct smcr_lgr *g, unsigned link, uint32_t rkey)
{
	struct smcr_lgr_rtoken *t = rtok_find(g, link, rkey);

	if (t)
		*t = g->rtok[--g->nrtok];
}

void smcr_lgr_peer_rmb(struct smcr_lgr *g, struct smcr_lgr_conn *c, uint32_t rkey,
		       uint64_t addr)
{
	struct smcr_lgr_rtoken *t;

	pthread_mutex_lock(&g->mu);
	c->peer_rkey = rkey;
	c->peer_addr = addr;
	t = smcr_lgr_rtoken_get_locked(g, c->link, rkey);
	if (t) {
		t->vaddr[c->link] = addr;
		t->has_vaddr |= (uint8_t)(1u << c->link);
	}
	pthread_mutex_unlock(&g->mu);
}

/*
 * c's last CDC the peer has for sure: the newest kept one whose completion
 * is in (`retired`, RC completes in order).  Kept are more than the send
 * queue holds, so the newest completed one is among them; none completed:
 * c->fin stays as it was (none yet: seqno 0, cursor 0).
 */
static void conn_fin_locked(struct smcr_lgr_conn *c, uint64_t retired)
{
	uint32_t n = c->nsent < SMCR_LGR_CONN_SENT ? c->nsent : SMCR_LGR_CONN_SENT;

	for (uint32_t i = 0; i < n; i++) {
		const struct smcr_lgr_cdc_sent *e = &c->sent[(c->nsent - 1 - i) % SMCR_LGR_CONN_SENT];

		if (e->wr <= retired) {
			c->fin = *e;
			return;
		}
	}
}

/*
 * Link index 1 goes down: its connections move to link 0.  `first`: link 1
 * is what was the group's first link until link_swap_locked() made the
 * second one the first (the log says so).
 */
static void link_down_locked(struct smcr_lgr *g, const char *why, bool peer_asked, bool first)
{
	uint64_t retired;
	unsigned moved = 0;

	if (!g->alt.link || g->state == SMCR_LGR_DEAD)
		return;
	if (g->state != SMCR_LGR_ACTIVE || smcr_wr_link_error(g->link)[0]) {
		char buf[128];

		/* (the first link is gone too, or was never confirmed: nowhere to move to) */
		snprintf(buf, sizeof(buf), "second link: %s (no failover here)", why);
		smcr_lgr_fail_locked(g, buf);
		return;
	}
	/*
	 * Stopped first, then drained: every message its NIC accepted (the peer
	 * counts it delivered, and names it in its validation) is queued before
	 * anything the peer sends on the first link after moving.
	 */
	smcr_wr_link_stop(g->alt.link);
	retired = smcr_wr_last_retired(g->alt.link);
	for (struct smcr_lgr_conn *c = g->conns; c; c = c->next) {
		const struct smcr_lgr_rtoken *t = rtok_find(g, 1, c->peer_rkey);

		if (c->link != 1)
			continue;
		conn_fin_locked(c, retired);
		/* the same RMB of the peer on the first link (0 0: unknown, it cannot move) */
		c->peer_rkey = t && (t->has_rkey & t->has_vaddr & 1u) ? t->rkey[0] : 0;
		c->peer_addr = c->peer_rkey ? t->vaddr[0] : 0;
		c->link = 0;
		c->nsent = 0;   /* work request numbers are per link */
		c->last_wr = 0; /* nothing of it is queued on the first link yet */
		/* last, after what its reader takes (smcr_lgr_conn_switched's fast path) */
		__atomic_store_n(&c->switched, true, __ATOMIC_RELEASE);
		moved++;
		smcr_lgr_conn_ring(c); /* the engine resends in its next call */
	}
	g->stat_link_switches += moved;
	if (first)
		smcr_info("verbs: link group %u: first link %u down (%s): %u connection(s) move to "
			  "link %u on %s, now the group's only link",
			  g->id, g->alt.link_num, why, moved, g->link_num, g->port->name);
	else
		smcr_info("verbs: link group %u: second link %u down (%s): %u connection(s) move to "
			  "the first link",
			  g->id, g->alt.link_num, why, moved);
	/*
	 * As the kernel (smcr_link_down): DELETE LINK of it, orderly, "lost
	 * path", on the other; the client sends it, the server the one its
	 * smc_llc_srv_delete_link_local() makes (the same message), whose
	 * answer it drops (we drop every DELETE LINK answer).
	 */
	if (!peer_asked && g->alt.state == SMCR_LGR_LINK_UP)
		smcr_lgr_llc_send_delete_link_one(g, g->alt.link_num, SMCR_LLC_DEL_LOST_PATH);
	smcr_lgr_alt_close(g);
	smcr_lgr_publish_locked(g);
	/* as the kernel's server: another path, at once */
	smcr_lgr_readd_arm_locked(g, 0, "a link was lost");
}

void smcr_lgr_alt_down_locked(struct smcr_lgr *g, const char *why, bool peer_asked)
{
	link_down_locked(g, why, peer_asked, false);
}

static void swap_u32(uint32_t *a, uint32_t *b)
{
	uint32_t t = *a;

	*a = *b;
	*b = t;
}

/* Bits 0 and 1 of a per-link mask exchanged. */
static uint8_t swap_bits(uint8_t m)
{
	return (uint8_t)((m & ~3u) | ((m & 1u) << 1) | ((m >> 1) & 1u));
}

/*
 * The second link becomes link index 0 and the first index 1, in everything
 * that names a link by index: the group's own fields (its identity's GIDs
 * follow the link that carries it now), every buffer's registrations, the
 * peer's rkeys, each connection's link, the LLC messages queued and the
 * receive handlers.  Work request numbers stay with their link object.
 */
static void link_swap_locked(struct smcr_lgr *g)
{
	struct smcr_ib_port *port = g->port;
	struct smcr_wr_link *link = g->link;
	struct smcr_ib_qp_info own;
	uint8_t gid[SMCR_IB_GID_LEN];
	uint8_t num = g->link_num;

	g->port = g->alt.port;
	g->alt.port = port;
	g->link = g->alt.link;
	g->alt.link = link;
	swap_u32(&g->peer_qpn, &g->alt.peer_qpn);
	g->link_num = g->alt.link_num;
	g->alt.link_num = num;
	memcpy(gid, g->key.peer_gid, SMCR_IB_GID_LEN);
	memcpy(g->key.peer_gid, g->alt.peer_gid, SMCR_IB_GID_LEN);
	memcpy(g->alt.peer_gid, gid, SMCR_IB_GID_LEN);
	smcr_wr_link_info(g->link, &own);
	memcpy(g->key.local_gid, own.gid, SMCR_IB_GID_LEN);
	__atomic_store_n(&g->dev_fd[0], g->port->ctx->async_fd, __ATOMIC_RELAXED);
	__atomic_store_n(&g->dev_fd[1], g->port->removal_fd, __ATOMIC_RELAXED);
	g->alt.state = SMCR_LGR_LINK_UP;
	g->alt.since_ms = 0;
	smcr_wr_set_rx_handler(g->link, smcr_lgr_rx_link0, g);
	smcr_wr_set_rx_handler(g->alt.link, smcr_lgr_rx_link1, g);
	for (struct smcr_lgr_buf *b = g->all_bufs; b; b = b->all_next) {
		struct ibv_mr *mr = b->mr;
		uint64_t iova = b->iova;

		b->mr = b->mr_alt;
		b->iova = b->iova_alt;
		b->mr_alt = mr;
		b->iova_alt = iova;
	}
	for (unsigned i = 0; i < g->nrtok; i++) {
		struct smcr_lgr_rtoken *t = &g->rtok[i];
		uint64_t v = t->vaddr[0];

		swap_u32(&t->rkey[0], &t->rkey[1]);
		t->vaddr[0] = t->vaddr[1];
		t->vaddr[1] = v;
		t->has_rkey = swap_bits(t->has_rkey);
		t->has_vaddr = swap_bits(t->has_vaddr);
	}
	for (struct smcr_lgr_conn *c = g->conns; c; c = c->next)
		c->link = c->link == 1 ? 0 : 1;
	for (unsigned i = 0; i < g->llc_qcount; i++) {
		unsigned slot = (g->llc_qhead + i) % SMCR_LGR_LLC_QLEN;

		g->llc_link[slot] = g->llc_link[slot] == 1 ? 0 : 1;
	}
}

bool smcr_lgr_first_down_locked(struct smcr_lgr *g, const char *why, bool peer_asked)
{
	uint64_t lost;

	if (g->state != SMCR_LGR_ACTIVE || g->alt.state != SMCR_LGR_LINK_UP || !g->alt.link ||
	    smcr_wr_link_error(g->alt.link)[0])
		return false;
	/* the pool on the second link's PD: each buffer must be there to be used on it */
	for (struct smcr_lgr_buf *b = g->all_bufs; b; b = b->all_next)
		if (!b->mr_alt)
			return false;
	link_swap_locked(g);
	link_down_locked(g, why, peer_asked, true);
	if (g->state == SMCR_LGR_DEAD)
		return true;
	/*
	 * TEST LINKs still unanswered went on the lost link (a hung-up
	 * connection waits for one, smcr_lgr_probe): the same number again on
	 * this one, whose answers prove the same for the messages that moved.
	 */
	lost = g->probes_sent - g->probes_answered;
	g->probes_sent = g->probes_answered;
	while (lost-- && g->state != SMCR_LGR_DEAD)
		if (smcr_lgr_llc_send_test_link(g))
			smcr_lgr_fail_locked(g, "cannot send TEST LINK");
	return true;
}

void smcr_lgr_count_rescue(struct smcr_lgr *g)
{
	pthread_mutex_lock(&g->mu);
	g->stat_rmb_rescues++;
	smcr_lgr_publish_locked(g);
	pthread_mutex_unlock(&g->mu);
}

int smcr_lgr_conn_switched(struct smcr_lgr *g, struct smcr_lgr_conn *c,
			   struct smcr_lgr_cdc_sent *fin, uint32_t *rkey, uint64_t *addr)
{
	int rc = 0;

	/*
	 * Every engine call of every connection comes here (each progress
	 * round): without the mutex while nothing moved.  A move that lands
	 * just after this load is not lost: its writer rings c's doorbell
	 * after the store (the next call sees it), and the data path checks
	 * `switched` under the mutex before it posts (-EAGAIN).
	 */
	if (!__atomic_load_n(&c->switched, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&g->mu);
	if (c->switched) {
		__atomic_store_n(&c->switched, false, __ATOMIC_RELAXED);
		*fin = c->fin;
		*rkey = c->peer_rkey;
		*addr = c->peer_addr;
		rc = c->peer_rkey ? 1 : -ENOENT;
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

/* The second link's QP on g->alt.port (INIT, receives posted), every buffer on its PD. */
static int alt_link_locked(struct smcr_lgr *g)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int rc;

	rc = smcr_wr_link_create(g->alt.port, &g->alt.link);
	if (rc)
		return rc;
	smcr_wr_set_rx_handler(g->alt.link, smcr_lgr_rx_link1, g);
	for (struct smcr_lgr_buf *b = g->all_bufs; b; b = b->all_next) {
		rc = smcr_lgr_buf_alt_reg_locked(g, b);
		if (rc)
			return rc;
	}
	ev.data.fd = smcr_wr_fd(g->alt.link);
	if (smcr_libc.epoll_ctl(g->epfd, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
		return -errno;
	return smcr_wr_arm(g->alt.link);
}

int smcr_lgr_alt_connect(struct smcr_lgr *g, const struct smcr_ib_qp_info *peer)
{
	int rc = smcr_wr_link_connect(g->alt.link, peer);

	if (rc)
		return rc;
	g->alt.peer_qpn = peer->qpn;
	memcpy(g->alt.peer_gid, peer->gid, SMCR_IB_GID_LEN);
	return 0;
}

int smcr_lgr_alt_open(struct smcr_lgr *g, const struct smcr_ib_qp_info *peer, uint8_t link_num)
{
	int rc;

	if (g->alt.port)
		return -EBUSY;
	rc = smcr_ib_port_open_alt(g->port, peer->gid, &g->alt.port);
	if (rc) {
		g->alt.port = NULL;
		return rc;
	}
	rc = alt_link_locked(g);
	if (!rc)
		rc = smcr_lgr_alt_connect(g, peer);
	if (rc) {
		smcr_lgr_alt_close(g);
		return rc;
	}
	g->alt.link_num = link_num;
	g->alt.state = SMCR_LGR_LINK_PENDING;
	return 0;
}

int smcr_lgr_alt_reserve_locked(struct smcr_lgr *g)
{
	int rc = g->alt.port ? -EBUSY
			     : smcr_ib_port_open_subnet(g->port, g->key.peer_gid, &g->alt.port);

	if (rc == 0) {
		g->alt.state = SMCR_LGR_LINK_ADDING; /* since_ms 0: ADD LINK not sent yet */
		/* a link id of its own (1..255; after a failover the first link's may be 2) */
		g->alt.link_num = (uint8_t)(g->link_num % 255 + 1);
	} else if (rc != -EBUSY) {
		g->alt.port = NULL;
	}
	return rc;
}

int smcr_lgr_alt_reserve(struct smcr_lgr *g)
{
	int rc;

	pthread_mutex_lock(&g->mu);
	rc = smcr_lgr_alt_reserve_locked(g);
	pthread_mutex_unlock(&g->mu);
	return rc;
}

int smcr_lgr_alt_start(struct smcr_lgr *g)
{
	int rc = g->alt.port && !g->alt.link ? alt_link_locked(g) : -EINVAL;

	if (rc)
		smcr_lgr_alt_close(g);
	return rc;
}

void smcr_lgr_alt_close(struct smcr_lgr *g)
{
	if (!g->alt.port)
		return;
	if (g->alt.link && g->epfd >= 0)
		(void)smcr_libc.epoll_ctl(g->epfd, EPOLL_CTL_DEL, smcr_wr_fd(g->alt.link), NULL);
	smcr_wr_link_destroy(g->alt.link); /* QP to error first: no more writes into our RMBs */
	for (struct smcr_lgr_buf *b = g->all_bufs; b; b = b->all_next) {
		if (b->mr_alt)
			ibv_dereg_mr(b->mr_alt);
		b->mr_alt = NULL;
		b->iova_alt = 0;
	}
	smcr_ib_port_close(g->alt.port);
	memset(&g->alt, 0, sizeof(g->alt));
	for (unsigned i = 0; i < g->nrtok;) { /* a new second link brings its own */
		g->rtok[i].has_rkey &= 1u;
		g->rtok[i].has_vaddr &= 1u;
		if (g->rtok[i].has_rkey)
			i++;
		else /* known on the second link alone: nothing to move to any more */
			g->rtok[i] = g->rtok[--g->nrtok];
	}
}
