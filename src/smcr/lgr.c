// SPDX-License-Identifier: MIT
/*
 * Link groups (see lgr.h): the process's list of them, matching a peer to
 * one, creation and end, the connections a group carries, fork and exit.
 * The data path is in lgr_link.c, the thread that looks after idle groups
 * in lgr_worker.c (lgr_int.h lists the files and the locks).
 *
 * fork: the child keeps nothing: the list is emptied in the fork child
 * handler (the parent's verbs objects are not the child's), the instance
 * part of our peer id is drawn anew, no worker runs until the child makes
 * its own group.
 */
#include "smcr/lgr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/llc.h"
#include "smcr/lgr_int.h"
#include "smcr/stats.h"
#include "smcr/sys.h"
#include "smcr/wr.h"

struct smcr_lgr_list smcr_lgrs = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.idle_ms = SMCR_LGR_IDLE_MS,
	.worker_kick_fd = -1,
	.devwatch_fd = -1,
};
static uint32_t next_id;       /* the last group's id; list mutex */
static uint8_t instance[2];    /* our peer id's per-process part; list mutex */
static bool instance_set;
/*
 * and its device part: the MAC of the first device it was asked with, kept
 * for the process's life (the kernel's smc_ib_define_local_systemid(): one
 * id per host), so that a group whose first link failed over to another
 * device is still found by its peer's id.  List mutex.
 */
static uint8_t id_mac[SMCR_IB_MAC_LEN];
static bool id_mac_set;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* ---- process: instance id, fork, exit ------------------------------------------ */

static void new_instance(void)
{
	uint16_t r = 0;

	if (smcr_sys_random(&r, sizeof(r)) < 0)
		r = (uint16_t)getpid();
	instance[0] = (uint8_t)(r >> 8);
	instance[1] = (uint8_t)r;
	instance_set = true;
}

void smcr_lgr_fork_prepare(void)
{
	pthread_mutex_lock(&smcr_lgrs.mu);
}

void smcr_lgr_fork_parent(void)
{
	pthread_mutex_unlock(&smcr_lgrs.mu);
}

/* The parent's groups are not ours: forget them (no verbs call, no free). */
void smcr_lgr_fork_child(void)
{
	smcr_lgrs.head = NULL;
	smcr_lgrs.num = 0;
	smcr_lgrs.worker_running = false;
	instance_set = false;
	if (smcr_lgrs.worker_kick_fd >= 0) /* the parent's worker reads it */
		smcr_sys_close(smcr_lgrs.worker_kick_fd);
	smcr_lgrs.worker_kick_fd = -1;
	if (smcr_lgrs.devwatch_fd >= 0) /* (its events are the parent worker's) */
		smcr_sys_close(smcr_lgrs.devwatch_fd);
	smcr_lgrs.devwatch_fd = -1;
	pthread_mutex_unlock(&smcr_lgrs.mu);
}

/*
 * Clean exit: every live group tells its peer (DELETE LINK all), so the
 * peer's connections end now rather than when its NIC gives up.  Best
 * effort: a group another thread holds is skipped.
 */
void smcr_lgr_exit(void)
{
	if (pthread_mutex_trylock(&smcr_lgrs.mu))
		return;
	for (struct smcr_lgr *g = smcr_lgrs.head; g; g = g->next_lgr) {
		if (pthread_mutex_trylock(&g->mu))
			continue;
		if (g->state != SMCR_LGR_DEAD && g->connected) {
			smcr_lgr_llc_send_delete_link(g, SMCR_LLC_DEL_PROG_INIT_TERM, true);
			(void)smcr_wr_flush(g->link, LGR_EXIT_FLUSH_MS);
			g->state = SMCR_LGR_DEAD;
		}
		pthread_mutex_unlock(&g->mu);
	}
	pthread_mutex_unlock(&smcr_lgrs.mu);
}

static void init_once(void)
{
	if (smcr_sys_random(&next_id, sizeof(next_id)) < 0)
		next_id = (uint32_t)getpid() << 8;
	next_id &= 0xffffffu; /* small ids, as the kernel's; never 0 */
}

void smcr_lgr_peer_id(const uint8_t mac[SMCR_IB_MAC_LEN], uint8_t out[SMCR_CLC_PEER_ID_LEN])
{
	pthread_once(&once, init_once);
	pthread_mutex_lock(&smcr_lgrs.mu);
	if (!instance_set)
		new_instance();
	if (!id_mac_set) {
		memcpy(id_mac, mac, SMCR_IB_MAC_LEN);
		id_mac_set = true;
	}
	out[0] = instance[0];
	out[1] = instance[1];
	memcpy(out + 2, id_mac, SMCR_IB_MAC_LEN);
	pthread_mutex_unlock(&smcr_lgrs.mu);
}

void smcr_lgr_set_idle_ms(int ms)
{
	pthread_once(&once, init_once);
	pthread_mutex_lock(&smcr_lgrs.mu);
	smcr_lgrs.idle_ms = ms > 0 ? ms : SMCR_LGR_IDLE_MS;
	smcr_lgr_worker_wake();
	pthread_mutex_unlock(&smcr_lgrs.mu);
}

unsigned smcr_lgr_count(void)
{
	unsigned n;

	pthread_mutex_lock(&smcr_lgrs.mu);
	n = smcr_lgrs.num;
	pthread_mutex_unlock(&smcr_lgrs.mu);
	return n;
}

static bool key_equal(const struct smcr_lgr_key *a, const struct smcr_lgr_key *b)
{
	return a->role == b->role && !memcmp(a->peer_id, b->peer_id, sizeof(a->peer_id)) &&
	       !memcmp(a->peer_gid, b->peer_gid, sizeof(a->peer_gid)) &&
	       !memcmp(a->local_gid, b->local_gid, sizeof(a->local_gid));
}

/*
 * The peer proved that it receives at `addr`: the group was built over a
 * TCP connection from there, or the peer announced the group's second link
 * at that GID over the group's first (an RC link only the peer that built
 * it can speak on).
 */
static bool addr_proven(const struct smcr_lgr *g, const uint8_t addr[SMCR_IB_GID_LEN])
{
	if (!memcmp(g->key.peer_addr, addr, SMCR_IB_GID_LEN))
		return true;
	/* (a first contact's peer GID is its address; after a failover, the second link's) */
	if (!memcmp(g->key.peer_gid, addr, SMCR_IB_GID_LEN))
		return true;
	return g->alt.state == SMCR_LGR_LINK_UP && !memcmp(g->alt.peer_gid, addr, SMCR_IB_GID_LEN);
}

/*
 * Server (peer_qpn 0): the key.  Client: the key, where the peer GID is that
 * of the link reaching peer_qpn (a reused group's Accept names the link the
 * server chose, with its GID, as the kernel's smcr_lgr_match() compares).
 * Either: from an address the group's peer proved.
 */
bool smcr_lgr_match(const struct smcr_lgr *g, const struct smcr_lgr_key *key, uint32_t peer_qpn)
{
	if (!addr_proven(g, key->peer_addr))
		return false;
	if (peer_qpn == 0)
		return key_equal(&g->key, key);
	if (g->key.role != key->role || memcmp(g->key.peer_id, key->peer_id, sizeof(key->peer_id)) ||
	    memcmp(g->key.local_gid, key->local_gid, sizeof(key->local_gid)))
		return false;
	if (g->connected && g->peer_qpn == peer_qpn &&
	    !memcmp(g->key.peer_gid, key->peer_gid, sizeof(key->peer_gid)))
		return true;
	return g->alt.state == SMCR_LGR_LINK_UP && g->alt.peer_qpn == peer_qpn &&
	       !memcmp(g->alt.peer_gid, key->peer_gid, sizeof(key->peer_gid));
}

struct smcr_lgr *smcr_lgr_find(const struct smcr_lgr_key *key, uint32_t peer_qpn)
{
	struct smcr_lgr *found = NULL;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&smcr_lgrs.mu);
	for (struct smcr_lgr *g = smcr_lgrs.head; g && !found; g = g->next_lgr) {
		pthread_mutex_lock(&g->mu);
		/*
		 * What the peer sent meanwhile first: an idle group's DELETE LINK waits
		 * in its completion queue until someone takes it, and a group the peer
		 * has deleted must not be offered to it again (its client would
		 * decline SYNCERR, and the connection fall back).
		 */
		smcr_lgr_drain_locked(g);
		/*
		 * Server (peer_qpn 0): also a group whose first contact is still in
		 * progress (the caller waits for it to turn ACTIVE, as the kernel
		 * serialises first contacts): a second connection racing the first
		 * must not make a second group.  Client: the server named its QP.
		 */
		if (g->state != SMCR_LGR_DEAD && smcr_lgr_match(g, key, peer_qpn) &&
		    g->refs < g->max_conns) {
			g->refs++;
			g->idle_since_ms = 0;
			found = g;
		}
		pthread_mutex_unlock(&g->mu);
	}
	pthread_mutex_unlock(&smcr_lgrs.mu);
	return found;
}

bool smcr_lgr_local_mac(const uint8_t local_gid[SMCR_IB_GID_LEN], uint8_t mac[SMCR_IB_MAC_LEN])
{
	bool known = false;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&smcr_lgrs.mu);
	for (struct smcr_lgr *g = smcr_lgrs.head; g && !known; g = g->next_lgr) {
		/* state is not looked at: a group that just died still knows its MAC */
		pthread_mutex_lock(&g->mu); /* (failover changes local_gid and port) */
		known = !memcmp(g->key.local_gid, local_gid, SMCR_IB_GID_LEN);
		if (known)
			memcpy(mac, g->port->mac, SMCR_IB_MAC_LEN);
		pthread_mutex_unlock(&g->mu);
	}
	pthread_mutex_unlock(&smcr_lgrs.mu);
	return known;
}

/* ---- what smcr-stat shows (include/smcr/stats_abi.h) --------------------------------- */

static uint8_t stats_link_state(const struct smcr_lgr *g, enum smcr_lgr_link_state alt)
{
	if (g->state == SMCR_LGR_DEAD)
		return SMCR_STATS_LINK_DOWN;
	switch (alt) {
	case SMCR_LGR_LINK_NONE:
		return SMCR_STATS_LINK_NONE;
	case SMCR_LGR_LINK_ADDING:
		return SMCR_STATS_LINK_ADDING;
	case SMCR_LGR_LINK_PENDING:
		return SMCR_STATS_LINK_PENDING;
	case SMCR_LGR_LINK_UP:
		return SMCR_STATS_LINK_UP;
	}
	return SMCR_STATS_LINK_NONE;
}

static void stats_link(struct smcr_stats_link *out, const struct smcr_ib_port *port,
		       const struct smcr_wr_link *link, uint32_t peer_qpn,
		       const uint8_t peer_gid[SMCR_IB_GID_LEN], uint8_t link_id)
{
	struct smcr_ib_qp_info own = { .qpn = 0 };

	if (link)
		smcr_wr_link_info(link, &own);
	if (port) {
		snprintf(out->device, sizeof(out->device), "%.15s", port->name);
		out->port = port->port_num;
		memcpy(out->gid, port->gid, sizeof(out->gid));
	}
	out->qpn = own.qpn;
	out->peer_qpn = peer_qpn;
	out->link_id = link_id;
	memcpy(out->peer_gid, peer_gid, sizeof(out->peer_gid));
}

void smcr_lgr_publish_locked(struct smcr_lgr *g)
{
	struct smcr_stats_lgr now;

	if (!g->stats)
		return;
	memset(&now, 0, sizeof(now));
	now.id = g->id;
	now.role = g->key.role == SMCR_LGR_SERVER;
	now.lgr_state = g->state == SMCR_LGR_ACTIVE  ? SMCR_STATS_LGR_ACTIVE
			: g->state == SMCR_LGR_DEAD  ? SMCR_STATS_LGR_DEAD
						     : SMCR_STATS_LGR_PENDING;
	now.max_links = g->max_links;
	now.conns = g->nconns;
	memcpy(now.peer_addr, g->key.peer_addr, sizeof(now.peer_addr));
	memcpy(now.peer_id, g->key.peer_id, sizeof(now.peer_id));
	now.rmb_rescues = g->stat_rmb_rescues;
	stats_link(&now.links[0], g->port, g->link, g->peer_qpn, g->key.peer_gid, g->link_num);
	now.links[0].state = stats_link_state(g, g->state == SMCR_LGR_ACTIVE ? SMCR_LGR_LINK_UP
									  : SMCR_LGR_LINK_PENDING);
	if (g->alt.state != SMCR_LGR_LINK_NONE) {
		stats_link(&now.links[1], g->alt.port, g->alt.link, g->alt.peer_qpn,
			   g->alt.peer_gid, g->alt.link_num);
		now.links[1].state = stats_link_state(g, g->alt.state);
	}
	for (const struct smcr_lgr_conn *c = g->conns; c; c = c->next)
		now.links[c->link == 1].conns++;
	smcr_stats_lgr_update(g->stats, &now);
}

void smcr_lgr_free(struct smcr_lgr *g)
{
	/* First: the slot may be another group's as soon as it is closed. */
	smcr_stats_lgr_close(g->stats);
	g->stats = NULL;
	while (g->free_bufs || g->retiring) {
		struct smcr_lgr_buf **head = g->free_bufs ? &g->free_bufs : &g->retiring;
		struct smcr_lgr_buf *b = *head;

		*head = b->next;
		smcr_lgr_buf_put(g, b, false);
	}
	smcr_lgr_alt_close(g);
	smcr_wr_link_destroy(g->link);
	smcr_ib_port_close(g->port);
	smcr_sys_close(g->epfd);
	pthread_mutex_destroy(&g->mu);
	free(g->rtok);
	free(g);
}

int smcr_lgr_create(const struct smcr_lgr_key *key, struct smcr_ib_port **port,
		    struct smcr_wr_link **link, struct smcr_lgr **out)
{
	struct smcr_lgr *g = calloc(1, sizeof(*g));
	int rc;

	pthread_once(&once, init_once);
	if (!g)
		return -ENOMEM;
	g->key = *key;
	g->refs = 1;
	g->max_conns = SMCR_LGR_MAX_CONNS;
	g->max_links = 1;
	g->link_num = 1;
	g->epfd = -1;
	g->port = *port;
	*port = NULL;
	g->dev_fd[0] = g->port->ctx->async_fd;
	g->dev_fd[1] = g->port->removal_fd;
	g->link = *link; /* made on that port ahead, or NULL */
	*link = NULL;
	pthread_mutex_init(&g->mu, NULL);
	/* (its async fd is non-blocking: ib.c opens every port so) */
	if (!g->link) {
		rc = smcr_wr_link_create(g->port, &g->link);
		if (rc) {
			smcr_lgr_free(g);
			return rc;
		}
	}
	smcr_wr_set_rx_handler(g->link, smcr_lgr_rx_link0, g);
	/* the links' completion channels: one fd for every connection's wait set */
	g->epfd = smcr_libc.epoll_create1(EPOLL_CLOEXEC);
	if (g->epfd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = smcr_wr_fd(g->link) };

		g->epfd = smcr_sys_fd_high(g->epfd);
		if (smcr_libc.epoll_ctl(g->epfd, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0) {
			smcr_sys_close(g->epfd);
			g->epfd = -1;
		}
	}
	if (g->epfd < 0) {
		rc = -errno;
		smcr_lgr_free(g);
		return rc;
	}
	g->last_rx_ms = smcr_now_ms();
	pthread_mutex_lock(&smcr_lgrs.mu);
	g->id = next_id = (next_id + 1) & 0xffffffu ? (next_id + 1) & 0xffffffu : 1;
	g->next_lgr = smcr_lgrs.head;
	g->devs_seen = smcr_lgrs.devs_added; /* (devices that appeared before it: not news) */
	smcr_lgrs.head = g;
	smcr_lgrs.num++;
	smcr_lgr_worker_start_locked();
	pthread_mutex_unlock(&smcr_lgrs.mu);
	g->stats = smcr_stats_lgr_open();
	pthread_mutex_lock(&g->mu);
	smcr_lgr_publish_locked(g);
	pthread_mutex_unlock(&g->mu);
	*out = g;
	return 0;
}

void smcr_lgr_put(struct smcr_lgr *g)
{
	bool idle;

	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	idle = --g->refs == 0;
	if (idle)
		g->idle_since_ms = smcr_now_ms();
	pthread_mutex_unlock(&g->mu);
	if (idle) {
		pthread_mutex_lock(&smcr_lgrs.mu);
		smcr_lgr_worker_start_locked();
		pthread_mutex_unlock(&smcr_lgrs.mu);
	}
}

int smcr_lgr_connect(struct smcr_lgr *g, const struct smcr_ib_qp_info *peer)
{
	int rc;

	pthread_mutex_lock(&g->mu);
	rc = smcr_wr_link_connect(g->link, peer);
	if (rc == 0) {
		g->peer_qpn = peer->qpn;
		g->connected = true;
		smcr_lgr_publish_locked(g);
	}
	pthread_mutex_unlock(&g->mu);
	if (rc == 0) { /* the worker starts looking after it (LLC while nobody drains) */
		pthread_mutex_lock(&smcr_lgrs.mu);
		smcr_lgr_worker_start_locked();
		pthread_mutex_unlock(&smcr_lgrs.mu);
	}
	return rc;
}

int smcr_lgr_confirm_link_send(struct smcr_lgr *g, int timeout_ms)
{
	int rc;

	pthread_mutex_lock(&g->mu);
	rc = smcr_lgr_llc_send_confirm_link(g, false, timeout_ms);
	if (rc)
		smcr_lgr_fail_locked(g, "cannot send CONFIRM LINK");
	pthread_mutex_unlock(&g->mu);
	return rc;
}

void smcr_lgr_fail(struct smcr_lgr *g, const char *why)
{
	pthread_mutex_lock(&g->mu);
	smcr_lgr_fail_locked(g, why);
	pthread_mutex_unlock(&g->mu);
}

void smcr_lgr_fail_locked(struct smcr_lgr *g, const char *why)
{
	smcr_lgr_end_locked(g, why, true);
}

void smcr_lgr_end_locked(struct smcr_lgr *g, const char *why, bool failure)
{
	if (g->state == SMCR_LGR_DEAD)
		return;
	g->state = SMCR_LGR_DEAD;
	snprintf(g->why, sizeof(g->why), "%s", why);
	if (failure)
		smcr_warn("verbs: link group %u (QP %u) ends: %s", g->id, smcr_lgr_qpn(g), why);
	else
		smcr_info("verbs: link group %u (QP %u) ends: %s", g->id, smcr_lgr_qpn(g), why);
	for (struct smcr_lgr_conn *c = g->conns; c; c = c->next)
		smcr_lgr_conn_ring(c);
	smcr_lgr_publish_locked(g);
}

int smcr_lgr_await_active(struct smcr_lgr *g, int timeout_ms)
{
	int rc;

	pthread_mutex_lock(&g->mu);
	rc = g->state == SMCR_LGR_ACTIVE ? 0 : smcr_lgr_wait_active_locked(g, smcr_sys_deadline(timeout_ms));
	pthread_mutex_unlock(&g->mu);
	return rc;
}

int smcr_lgr_conn_add(struct smcr_lgr *g, struct smcr_lgr_conn *c)
{
	int rc = 0;

	memset(c, 0, sizeof(*c));
	c->efd = smcr_sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->efd < 0)
		return -errno;
	c->efd = smcr_sys_fd_high(c->efd);
	pthread_mutex_lock(&g->mu);
	for (bool unique = false; !unique;) {
		if (smcr_sys_random(&c->token, sizeof(c->token)) < 0) {
			rc = -EIO;
			break;
		}
		unique = c->token != 0;
		for (struct smcr_lgr_conn *o = g->conns; o && unique; o = o->next)
			unique = o->token != c->token;
	}
	if (rc == 0) {
		c->next = g->conns;
		g->conns = c;
		g->nconns++;
		smcr_lgr_publish_locked(g);
	}
	pthread_mutex_unlock(&g->mu);
	if (rc) {
		smcr_sys_close(c->efd);
		c->efd = -1;
	}
	return rc;
}

void smcr_lgr_conn_del(struct smcr_lgr *g, struct smcr_lgr_conn *c)
{
	pthread_mutex_lock(&g->mu);
	for (struct smcr_lgr_conn **p = &g->conns; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			g->nconns--;
			break;
		}
	}
	smcr_lgr_publish_locked(g);
	pthread_mutex_unlock(&g->mu);
	smcr_sys_close(c->efd);
	c->efd = -1;
}

void smcr_lgr_conn_bind(struct smcr_lgr *g, struct smcr_lgr_conn *c, uint32_t peer_qpn,
			const uint8_t peer_gid[SMCR_IB_GID_LEN])
{
	pthread_mutex_lock(&g->mu);
	/* QP numbers alone are ambiguous: each device counts its own (both links had 17) */
	c->link = g->alt.state == SMCR_LGR_LINK_UP && g->alt.peer_qpn == peer_qpn &&
			  !memcmp(g->alt.peer_gid, peer_gid, SMCR_IB_GID_LEN)
		  ? 1
		  : 0;
	smcr_dbg("verbs: link group %u: connection %08x on link %u (peer QP %u)", g->id, c->token,
		 c->link, peer_qpn);
	smcr_lgr_publish_locked(g);
	pthread_mutex_unlock(&g->mu);
}

void smcr_lgr_conn_assign(struct smcr_lgr *g, struct smcr_lgr_conn *c)
{
	unsigned on[2] = { 0, 0 };

	pthread_mutex_lock(&g->mu);
	for (const struct smcr_lgr_conn *o = g->conns; o; o = o->next)
		if (o != c)
			on[o->link == 1]++;
	c->link = g->alt.state == SMCR_LGR_LINK_UP && on[1] < on[0] ? 1 : 0;
	smcr_dbg("verbs: link group %u: connection %08x on link %u (%u and %u there)", g->id,
		 c->token, c->link, on[0], on[1]);
	smcr_lgr_publish_locked(g);
	pthread_mutex_unlock(&g->mu);
}

uint32_t smcr_lgr_conn_peer_qpn(struct smcr_lgr *g, const struct smcr_lgr_conn *c)
{
	uint32_t qpn;

	pthread_mutex_lock(&g->mu);
	qpn = c->link == 1 && g->alt.link ? g->alt.peer_qpn : g->peer_qpn;
	pthread_mutex_unlock(&g->mu);
	return qpn;
}

void smcr_lgr_conn_info(struct smcr_lgr *g, const struct smcr_lgr_conn *c,
			const struct smcr_lgr_buf *rmb, struct smcr_ib_qp_info *own,
			uint32_t *rkey, uint64_t *addr)
{
	pthread_mutex_lock(&g->mu);
	if (c->link == 1 && g->alt.link && rmb->mr_alt) {
		smcr_wr_link_info(g->alt.link, own);
		*rkey = rmb->mr_alt->rkey;
		*addr = rmb->iova_alt;
	} else {
		smcr_wr_link_info(g->link, own);
		*rkey = rmb->mr->rkey;
		*addr = rmb->iova;
	}
	pthread_mutex_unlock(&g->mu);
}

uint32_t smcr_lgr_conn_qpn(struct smcr_lgr *g, const struct smcr_lgr_conn *c, char *dev,
			   size_t len)
{
	struct smcr_ib_qp_info own;
	bool alt;

	pthread_mutex_lock(&g->mu);
	alt = c->link == 1 && g->alt.link;
	smcr_wr_link_info(alt ? g->alt.link : g->link, &own);
	snprintf(dev, len, "%.15s", alt ? g->alt.port->name : g->port->name);
	pthread_mutex_unlock(&g->mu);
	return own.qpn;
}

void smcr_lgr_service(struct smcr_lgr *lgr, const uint8_t local_gid[SMCR_IB_GID_LEN],
		      enum smcr_lgr_role role)
{
	if (lgr) {
		pthread_mutex_lock(&lgr->mu);
		smcr_lgr_service_locked(lgr);
		pthread_mutex_unlock(&lgr->mu);
		return;
	}
	pthread_once(&once, init_once);
	pthread_mutex_lock(&smcr_lgrs.mu);
	for (struct smcr_lgr *g = smcr_lgrs.head; g; g = g->next_lgr) {
		pthread_mutex_lock(&g->mu); /* (failover changes local_gid) */
		if (g->key.role == role && !memcmp(g->key.local_gid, local_gid, SMCR_IB_GID_LEN) &&
		    g->state != SMCR_LGR_DEAD && g->connected)
			smcr_lgr_service_locked(g);
		pthread_mutex_unlock(&g->mu);
	}
	pthread_mutex_unlock(&smcr_lgrs.mu);
}

int smcr_lgr_channel_fd(const struct smcr_lgr *g)
{
	return g->epfd;
}

void smcr_lgr_device_fds(const struct smcr_lgr *g, int *async_fd, int *removal_fd)
{
	*async_fd = __atomic_load_n(&g->dev_fd[0], __ATOMIC_RELAXED);
	*removal_fd = __atomic_load_n(&g->dev_fd[1], __ATOMIC_RELAXED);
}

uint32_t smcr_lgr_qpn(const struct smcr_lgr *g)
{
	struct smcr_ib_qp_info own;

	smcr_wr_link_info(g->link, &own);
	return own.qpn;
}
