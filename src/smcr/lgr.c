// SPDX-License-Identifier: MIT
/*
 * Link groups (see lgr.h): the list, matching, the shared link's data path
 * and demultiplexing, the buffer pool, failure, idle teardown.
 *
 * The one helper thread ("reaper"), and why: a group nobody uses has no
 * connection, so no application call and no readiness wake-up ever comes
 * through it, yet it must be torn down after its idle time (LLC DELETE LINK
 * to the peer, QP and memory freed), and an idle link must send TEST LINK
 * (the kernel's keepalive, which also makes the NIC notice a vanished peer
 * host) and answer the peer's.  So while at least one group exists, one
 * detached thread sleeps until the next of those deadlines, does that work
 * and exits with the last group.  It runs with every signal blocked and
 * never touches a connection, only groups.
 *
 * LLC requests (TEST LINK, CONFIRM/DELETE RKEY, DELETE LINK) want their
 * answer within 2 s whether or not an application thread looks, and are
 * answered when they arrive: the helper sleeps in poll() on the channel fd
 * (g->epfd, every link's completion channel) of each group that no
 * application thread drained for SMCR_LGR_LLC_WATCH_MS, beside its own
 * eventfd (kicks) and the device's event and removal fds.  An idle process
 * thus sleeps until a message, a device event or a deadline (keepalive,
 * teardown): no periodic wake-up.  While application threads take a
 * group's completions, the helper leaves its channel alone (no herd: they
 * would all wake for every data completion) and only looks again when they
 * have been quiet for SMCR_LGR_LLC_WATCH_MS; a request that comes while an
 * application thread is busy elsewhere waits at most that long.
 *
 * The invariant that makes this safe, with application threads and the
 * helper taking completions from the same channel (a channel event nobody
 * reads is a lost wake-up; wr.c's due-event counting prevents it):
 * while the helper sleeps on a watched group, for each link either its
 * receive CQ is armed (the next message or failure raises an event and
 * g->epfd turns readable) or an event sits in the channel already (g->epfd
 * readable), and the group's LLC queue is empty.  (Our own send completions
 * are on a channel of their own that only wr.c's waits sleep on, with the
 * group mutex held: they wake neither the helper nor any connection's
 * waiter, and are taken by whichever call comes next; wr.c.)
 *  - Whoever takes completions dispatches all of them: CDCs to their
 *    connection's queue and doorbell (level-triggered eventfd: its owner
 *    sees it whoever took the event), LLC messages to the group's queue.
 *  - Only smcr_wr_arm() reads the receive channel's events, and it leaves
 *    the CQ armed again; a thread that takes completions without arming
 *    leaves the event the spent arm raised in the channel (or due, wr.c),
 *    so the first half holds after any thread's call.  The helper arms and
 *    drains twice before it sleeps (the second arm re-arms what the first
 *    drain spent).
 *  - drain_locked() empties the LLC queue.  The paths that take completions
 *    and return without it (wr.c's waits for send-queue room or for a
 *    flush) may leave a message queued: on_message() then kicks the helper
 *    if it watches the group.
 * An event one thread reads is therefore never lost to another: a waiter
 * the channel woke finds its CDC behind its doorbell, and an LLC request is
 * handled by the first thread to come (the helper or an application thread
 * that drains).  Nobody takes a group mutex in the helper's poll(): it
 * tries each group's mutex and counts a held one as in use (looked at again
 * SMCR_LGR_LLC_WATCH_MS later), so it never waits on a sender blocked in
 * wr.c with the mutex held while it holds the list mutex.
 *
 * Lock order: list mutex, then a group's mutex.  The reaper holds the list
 * mutex while it walks; everyone else takes a group mutex alone or after
 * the engine's connection lock.
 *
 * fork: the child keeps nothing: the list is emptied in the atfork child
 * handler (the parent's verbs objects are not the child's), the instance
 * part of our peer id is drawn anew, no reaper runs until the child makes
 * its own group.
 */
#include "smcr/lgr.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/engine.h"
#include "smcr/cdc.h"
#include "smcr/llc.h"
#include "smcr/sys.h"
#include "smcr/wire.h"

#define LGR_POOL_MAX	 32  /* free buffers kept per group */
#define LGR_WAIT_SLICE_MS 20 /* another thread may take the channel event we wait for */
#define LGR_EXIT_FLUSH_MS 200
#define LGR_CLIENT_IDLE_EXTRA_MS 2000 /* see tick_locked() */

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static int reaper_kick_fd = -1; /* eventfd: wakes the helper's poll(); list mutex to create */
static struct smcr_lgr *lgr_list;
static unsigned lgr_num;
static uint32_t next_id;
static bool reaper_running;
static int idle_ms = SMCR_LGR_IDLE_MS;
static uint8_t instance[2];
static bool instance_set;
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

/* Wake the helper (any thread; a write to an eventfd never blocks). */
static void reaper_wake(void)
{
	uint64_t one = 1;
	int fd = __atomic_load_n(&reaper_kick_fd, __ATOMIC_ACQUIRE);

	if (fd >= 0)
		(void)!smcr_libc.write(fd, &one, sizeof(one));
}

void smcr_lgr_fork_prepare(void)
{
	pthread_mutex_lock(&list_mu);
}

void smcr_lgr_fork_parent(void)
{
	pthread_mutex_unlock(&list_mu);
}

/* The parent's groups are not ours: forget them (no verbs call, no free). */
void smcr_lgr_fork_child(void)
{
	lgr_list = NULL;
	lgr_num = 0;
	reaper_running = false;
	instance_set = false;
	if (reaper_kick_fd >= 0) /* the parent's helper reads it */
		smcr_sys_close(reaper_kick_fd);
	reaper_kick_fd = -1;
	pthread_mutex_unlock(&list_mu);
}

/*
 * Clean exit: every live group tells its peer (DELETE LINK all), so the
 * peer's connections end now rather than when its NIC gives up.  Best
 * effort: a group another thread holds is skipped.
 */
void smcr_lgr_exit(void)
{
	if (pthread_mutex_trylock(&list_mu))
		return;
	for (struct smcr_lgr *g = lgr_list; g; g = g->next_lgr) {
		if (pthread_mutex_trylock(&g->mu))
			continue;
		if (g->state != SMCR_LGR_DEAD && g->connected) {
			smcr_lgr_llc_send_delete_link(g, SMCR_LLC_DEL_PROG_INIT_TERM, true);
			(void)smcr_wr_flush(g->link, LGR_EXIT_FLUSH_MS);
			g->state = SMCR_LGR_DEAD;
		}
		pthread_mutex_unlock(&g->mu);
	}
	pthread_mutex_unlock(&list_mu);
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
	pthread_mutex_lock(&list_mu);
	if (!instance_set)
		new_instance();
	out[0] = instance[0];
	out[1] = instance[1];
	pthread_mutex_unlock(&list_mu);
	memcpy(out + 2, mac, SMCR_IB_MAC_LEN);
}

void smcr_lgr_set_idle_ms(int ms)
{
	pthread_once(&once, init_once);
	pthread_mutex_lock(&list_mu);
	idle_ms = ms > 0 ? ms : SMCR_LGR_IDLE_MS;
	reaper_wake();
	pthread_mutex_unlock(&list_mu);
}

unsigned smcr_lgr_count(void)
{
	unsigned n;

	pthread_mutex_lock(&list_mu);
	n = lgr_num;
	pthread_mutex_unlock(&list_mu);
	return n;
}

/* ---- receive side: demultiplexing ------------------------------------------------- */

static void ring(struct smcr_lgr_conn *c)
{
	uint64_t one = 1;

	if (c->efd_set || c->efd < 0)
		return;
	(void)!smcr_libc.write(c->efd, &one, sizeof(one));
	c->efd_set = true;
}

static void unring(struct smcr_lgr_conn *c)
{
	uint64_t v;

	if (!c->efd_set)
		return;
	(void)!smcr_libc.read(c->efd, &v, sizeof(v));
	c->efd_set = false;
}

/*
 * The queue is full: fold `next` into the last queued CDC.  Cursors are
 * cumulative and the connection flags sticky, so the newer message carries
 * everything but the one-shot producer flags of the older one.
 */
static void merge_cdc(uint8_t last[SMCR_WR_MSG_LEN], const uint8_t next[SMCR_WR_MSG_LEN])
{
	struct smcr_cdc_msg a, b;
	enum smcr_cdc_err err;

	if (smcr_cdc_decode(last, SMCR_WR_MSG_LEN, &a, &err) != SMCR_WIRE_OK ||
	    smcr_cdc_decode(next, SMCR_WR_MSG_LEN, &b, &err) != SMCR_WIRE_OK) {
		memcpy(last, next, SMCR_WR_MSG_LEN); /* the engine judges the bad one */
		return;
	}
	b.prod_flags |= a.prod_flags & (SMCR_CDC_PROD_CONS_UPD_REQ | SMCR_CDC_PROD_URG_PENDING |
					SMCR_CDC_PROD_URG_PRESENT);
	b.conn_flags |= a.conn_flags;
	smcr_cdc_encode(&b, last);
}

static void pool_add_locked(struct smcr_lgr *g, struct smcr_lgr_buf *b)
{
	memset(b->mem, 0, b->size);
	b->next = g->free_bufs;
	g->free_bufs = b;
}

/* The peer closed the connection that had `token`: its RMB may be reused. */
static void retired_locked(struct smcr_lgr *g, uint32_t token)
{
	for (struct smcr_lgr_buf **p = &g->retiring; *p; p = &(*p)->next) {
		struct smcr_lgr_buf *b = *p;

		if (b->retire_token == token) {
			*p = b->next;
			pool_add_locked(g, b);
			return;
		}
	}
}

static void deliver_cdc(struct smcr_lgr *g, const uint8_t msg[SMCR_WR_MSG_LEN])
{
	uint32_t token = smcr_get_be32(msg + 4);
	struct smcr_lgr_conn *c;

	for (c = g->conns; c && c->token != token; c = c->next)
		;
	if (!c) {
		g->stat_cdc_dropped++; /* a connection already gone: Linux drops these too */
		if (msg[SMCR_CDC_OFF_CONN_FLAGS] & (SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_ABORT))
			retired_locked(g, token);
		return;
	}
	if (c->qcount == SMCR_LGR_CONN_QLEN) {
		merge_cdc(c->q[(c->qhead + c->qcount - 1) % SMCR_LGR_CONN_QLEN], msg);
		c->merged++;
	} else {
		memcpy(c->q[(c->qhead + c->qcount) % SMCR_LGR_CONN_QLEN], msg, SMCR_WR_MSG_LEN);
		c->qcount++;
	}
	c->delivered++;
	ring(c);
}

/* wr.c's rx handler: called while a wr call polls a CQ of link `link`, group mutex held. */
static void on_message(struct smcr_lgr *g, unsigned link, const uint8_t *msg, uint32_t len)
{
	uint32_t slot;

	g->last_rx_ms = smcr_sys_now_ms();
	if (g->state == SMCR_LGR_DEAD)
		return;
	if (msg[0] == SMCR_CDC_MSG_TYPE) {
		/*
		 * No CDC before the link is confirmed: RC keeps order, so CONFIRM LINK
		 * came first (maybe in this very batch, its handling still queued).
		 */
		if (g->state != SMCR_LGR_ACTIVE && !g->confirm_seen) {
			smcr_lgr_fail_locked(g, "CDC before CONFIRM LINK");
			return;
		}
		deliver_cdc(g, msg);
		return;
	}
	if ((msg[0] & 0x0f) == SMCR_LLC_CONFIRM_LINK) /* v1 0x01, v2 0x21 */
		g->confirm_seen = true;
	if (g->llc_qcount == SMCR_LGR_LLC_QLEN)
		return; /* a flood of LLC requests: the kernel serialises its own flows */
	slot = (g->llc_qhead + g->llc_qcount) % SMCR_LGR_LLC_QLEN;
	memcpy(g->llc_q[slot], msg, len < SMCR_LGR_LLC_MSG_MAX ? len : SMCR_LGR_LLC_MSG_MAX);
	g->llc_len[slot] = len;
	g->llc_link[slot] = (uint8_t)link;
	g->llc_qcount++;
	/* the helper sleeps on this group: whoever took it may not handle the queue */
	if (g->watched)
		reaper_wake();
}

static void on_message0(void *arg, const uint8_t *msg, uint32_t len)
{
	on_message(arg, 0, msg, len);
}

static void on_message1(void *arg, const uint8_t *msg, uint32_t len)
{
	on_message(arg, 1, msg, len);
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
		ring(c);
}

/*
 * Take completions (messages are dispatched), then the LLC work they brought.
 * helper_drain_locked() is the helper's; drain_locked() an application
 * thread's, which tells the helper that this group is being looked after.
 */
static void helper_drain_locked(struct smcr_lgr *g)
{
	/*
	 * The second link first: a peer that moved a connection off it sends its
	 * failover validation on the first only after what it sent on the second
	 * completed, so those CDCs, in its CQ already, must be queued first.  One
	 * that fails: its connections move to the first (failover).
	 */
	if (g->alt.link && smcr_wr_poll(g->alt.link)) {
		char why[96];

		snprintf(why, sizeof(why), "%s", smcr_wr_link_error(g->alt.link));
		smcr_lgr_alt_down_locked(g, why, false);
	}
	if (smcr_wr_poll(g->link))
		smcr_lgr_fail_locked(g, smcr_wr_link_error(g->link));
	for (unsigned i = 0; i < 4 * SMCR_LGR_LLC_QLEN && g->llc_qcount; i++) {
		uint8_t raw[SMCR_LGR_LLC_MSG_MAX];
		uint32_t len = g->llc_len[g->llc_qhead];
		unsigned link = g->llc_link[g->llc_qhead];

		memcpy(raw, g->llc_q[g->llc_qhead], sizeof(raw));
		g->llc_qhead = (g->llc_qhead + 1) % SMCR_LGR_LLC_QLEN;
		g->llc_qcount--;
		if (g->state != SMCR_LGR_DEAD)
			smcr_lgr_llc_handle(g, link, raw, len);
	}
}

static void drain_locked(struct smcr_lgr *g)
{
	g->last_drain_ms = smcr_sys_now_ms();
	helper_drain_locked(g);
}

/* Arm every link's receive CQ (messages and failures, wr.c).  0 or -errno. */
static int arm_locked(struct smcr_lgr *g)
{
	int rc = smcr_wr_arm(g->link);

	if (!rc && g->alt.link)
		rc = smcr_wr_arm(g->alt.link);
	return rc;
}

/*
 * Device events (fatal error, port down): the link cannot carry on.  And
 * the device's removal, which rxe never reports as an event: its QPs go on
 * working until every process closed the device, and `rdma link delete`
 * waits for that.  The group then tells the peer (DELETE LINK, operator
 * initiated, while the QP still carries it: the peer's connections end now,
 * not when its NIC gives up) and fails, so its connections reset, and the
 * reaper closes the device once they are gone.
 */
static void device_events_locked(struct smcr_lgr *g)
{
	struct ibv_async_event ev;

	if (g->state != SMCR_LGR_DEAD && smcr_ib_port_removed(g->port)) {
		if (g->connected) {
			smcr_lgr_llc_send_delete_link(g, SMCR_LLC_DEL_OP_INIT_TERM, false);
			(void)smcr_wr_flush(g->link, LGR_EXIT_FLUSH_MS);
		}
		smcr_lgr_fail_locked(g, "the RDMA device is being removed");
	}
	/* the second device: its link goes down, its connections move (failover) */
	if (g->state != SMCR_LGR_DEAD && g->alt.port && smcr_ib_port_removed(g->alt.port))
		smcr_lgr_alt_down_locked(g, "its RDMA device is being removed", false);
	while (g->state != SMCR_LGR_DEAD && g->alt.port &&
	       ibv_get_async_event(g->alt.port->ctx, &ev) == 0) {
		bool down = ev.event_type == IBV_EVENT_DEVICE_FATAL ||
			    ev.event_type == IBV_EVENT_PORT_ERR ||
			    ev.event_type == IBV_EVENT_QP_FATAL ||
			    ev.event_type == IBV_EVENT_QP_REQ_ERR ||
			    ev.event_type == IBV_EVENT_QP_ACCESS_ERR ||
			    ev.event_type == IBV_EVENT_CQ_ERR;
		const char *name = ibv_event_type_str(ev.event_type);

		ibv_ack_async_event(&ev);
		if (down)
			smcr_lgr_alt_down_locked(g, name, false);
	}

	while (ibv_get_async_event(g->port->ctx, &ev) == 0) {
		switch (ev.event_type) {
		case IBV_EVENT_DEVICE_FATAL:
		case IBV_EVENT_PORT_ERR:
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_CQ_ERR:
			smcr_lgr_fail_locked(g, ibv_event_type_str(ev.event_type));
			break;
		default:
			break;
		}
		ibv_ack_async_event(&ev);
	}
}

/*
 * Until the group is ACTIVE (or dead, or the deadline passed), taking
 * completions.  Mutex held, dropped while sleeping.  Sleeps in slices: a
 * thread working on another connection of the group may take the channel
 * event meant for us (it then dispatches what it found, so nothing is lost,
 * but our poll() would not see it).
 */
static int wait_active_locked(struct smcr_lgr *g, int64_t deadline)
{
	for (;;) {
		int64_t left;
		int rc;

		drain_locked(g);
		if (g->state == SMCR_LGR_ACTIVE)
			return 0;
		if (g->state == SMCR_LGR_DEAD)
			return -ECONNRESET;
		left = deadline - smcr_sys_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (smcr_wr_arm(g->link) < 0)
			return -ECONNRESET;
		drain_locked(g); /* what completed before the arm raised no event */
		if (g->state != SMCR_LGR_PENDING)
			continue;
		pthread_mutex_unlock(&g->mu);
		rc = smcr_sys_wait_fd(smcr_wr_fd(g->link), POLLIN,
				      smcr_sys_now_ms() +
					      (left < LGR_WAIT_SLICE_MS ? left : LGR_WAIT_SLICE_MS));
		pthread_mutex_lock(&g->mu);
		if (rc < 0)
			return rc;
	}
}

/* ---- matching, creation, lifetime ---------------------------------------------- */

static bool key_equal(const struct smcr_lgr_key *a, const struct smcr_lgr_key *b)
{
	return a->role == b->role && !memcmp(a->peer_id, b->peer_id, sizeof(a->peer_id)) &&
	       !memcmp(a->peer_gid, b->peer_gid, sizeof(a->peer_gid)) &&
	       !memcmp(a->local_gid, b->local_gid, sizeof(a->local_gid));
}

/*
 * Server (peer_qpn 0): the key.  Client: the key, where the peer GID is that
 * of the link reaching peer_qpn (a reused group's Accept names the link the
 * server chose, with its GID, as the kernel's smcr_lgr_match() compares).
 */
static bool link_match(const struct smcr_lgr *g, const struct smcr_lgr_key *key,
		       uint32_t peer_qpn)
{
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
	pthread_mutex_lock(&list_mu);
	for (struct smcr_lgr *g = lgr_list; g && !found; g = g->next_lgr) {
		pthread_mutex_lock(&g->mu);
		/*
		 * What the peer sent meanwhile first: an idle group's DELETE LINK waits
		 * in its completion queue until someone takes it, and a group the peer
		 * has deleted must not be offered to it again (its client would
		 * decline SYNCERR, and the connection fall back).
		 */
		drain_locked(g);
		/*
		 * Server (peer_qpn 0): also a group whose first contact is still in
		 * progress (the caller waits for it to turn ACTIVE, as the kernel
		 * serialises first contacts): a second connection racing the first
		 * must not make a second group.  Client: the server named its QP.
		 */
		if (g->state != SMCR_LGR_DEAD && link_match(g, key, peer_qpn) &&
		    g->refs < g->max_conns) {
			g->refs++;
			g->idle_since_ms = 0;
			found = g;
		}
		pthread_mutex_unlock(&g->mu);
	}
	pthread_mutex_unlock(&list_mu);
	return found;
}

bool smcr_lgr_local_mac(const uint8_t local_gid[SMCR_IB_GID_LEN], uint8_t mac[SMCR_IB_MAC_LEN])
{
	bool known = false;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&list_mu);
	for (struct smcr_lgr *g = lgr_list; g && !known; g = g->next_lgr) {
		/* state is read racily: a group that just died still knows its MAC */
		known = !memcmp(g->key.local_gid, local_gid, SMCR_IB_GID_LEN);
		if (known)
			memcpy(mac, g->port->mac, SMCR_IB_MAC_LEN);
	}
	pthread_mutex_unlock(&list_mu);
	return known;
}

static void lgr_free(struct smcr_lgr *g)
{
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

static void *reaper(void *arg);

/* List mutex held: make sure the reaper runs (it exits with the last group). */
static void reaper_kick_locked(void)
{
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;

	if (reaper_running) {
		reaper_wake();
		return;
	}
	if (reaper_kick_fd < 0) {
		int fd = smcr_sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

		if (fd >= 0)
			__atomic_store_n(&reaper_kick_fd, smcr_sys_fd_high(fd), __ATOMIC_RELEASE);
		else
			smcr_warn("verbs: no eventfd for the link-group thread; it wakes on timers only");
	}
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, &attr, reaper, NULL) == 0)
		reaper_running = true;
	else
		smcr_warn("verbs: no link-group timer thread; idle groups stay until exit");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
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
	g->link = *link; /* made on that port ahead, or NULL */
	*link = NULL;
	pthread_mutex_init(&g->mu, NULL);
	/* (its async fd is non-blocking: ib.c opens every port so) */
	if (!g->link) {
		rc = smcr_wr_link_create(g->port, &g->link);
		if (rc) {
			lgr_free(g);
			return rc;
		}
	}
	smcr_wr_set_rx_handler(g->link, on_message0, g);
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
		lgr_free(g);
		return rc;
	}
	g->last_rx_ms = smcr_sys_now_ms();
	pthread_mutex_lock(&list_mu);
	g->id = next_id = (next_id + 1) & 0xffffffu ? (next_id + 1) & 0xffffffu : 1;
	g->next_lgr = lgr_list;
	lgr_list = g;
	lgr_num++;
	reaper_kick_locked();
	pthread_mutex_unlock(&list_mu);
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
		g->idle_since_ms = smcr_sys_now_ms();
	pthread_mutex_unlock(&g->mu);
	if (idle) {
		pthread_mutex_lock(&list_mu);
		reaper_kick_locked();
		pthread_mutex_unlock(&list_mu);
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
	}
	pthread_mutex_unlock(&g->mu);
	if (rc == 0) { /* the helper starts looking after it (LLC while nobody drains) */
		pthread_mutex_lock(&list_mu);
		reaper_kick_locked();
		pthread_mutex_unlock(&list_mu);
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

int smcr_lgr_await_active(struct smcr_lgr *g, int timeout_ms)
{
	int rc;

	pthread_mutex_lock(&g->mu);
	rc = g->state == SMCR_LGR_ACTIVE ? 0 : wait_active_locked(g, smcr_sys_deadline(timeout_ms));
	pthread_mutex_unlock(&g->mu);
	return rc;
}

/* ---- connections on the group --------------------------------------------------- */

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
	pthread_mutex_unlock(&g->mu);
	smcr_sys_close(c->efd);
	c->efd = -1;
}

/* ---- buffer pool ------------------------------------------------------------------ */

/* Register b on the second link's PD too.  Group mutex held.  0 or -errno. */
static int alt_reg_locked(struct smcr_lgr *g, struct smcr_lgr_buf *b)
{
	if (b->mr_alt)
		return 0;
	b->mr_alt = b->rmb ? smcr_ib_reg_rmb(g->alt.port, b->mem, b->size, &b->iova_alt)
			   : smcr_ib_reg_source(g->alt.port, b->mem, b->size);
	return b->mr_alt ? 0 : -ENOMEM;
}

struct smcr_lgr_buf *smcr_lgr_buf_get(struct smcr_lgr *g, uint32_t size, bool rmb)
{
	struct smcr_lgr_buf *b = NULL;

	pthread_mutex_lock(&g->mu);
	for (struct smcr_lgr_buf **p = &g->free_bufs; *p; p = &(*p)->next) {
		if ((*p)->size == size && (*p)->rmb == rmb) {
			b = *p;
			*p = b->next;
			break;
		}
	}
	pthread_mutex_unlock(&g->mu);
	if (b) {
		b->fresh = false;
		return b; /* zeroed when it came back */
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->size = size;
	b->rmb = rmb;
	b->fresh = true;
	b->mem = aligned_alloc(4096, size);
	if (!b->mem) {
		free(b);
		return NULL;
	}
	memset(b->mem, 0, size);
	/* RMB: the peer may write into it and nothing else; a send buffer: local reads only */
	b->mr = rmb ? smcr_ib_reg_rmb(g->port, b->mem, size, &b->iova)
		    : smcr_ib_reg_source(g->port, b->mem, size);
	if (!b->mr) {
		free(b->mem);
		free(b);
		return NULL;
	}
	pthread_mutex_lock(&g->mu);
	/* a second link (up or being added) knows every buffer: ADD LINK lists the RMBs */
	if (g->alt.port && alt_reg_locked(g, b)) {
		pthread_mutex_unlock(&g->mu);
		ibv_dereg_mr(b->mr);
		free(b->mem);
		free(b);
		return NULL;
	}
	b->all_next = g->all_bufs;
	g->all_bufs = b;
	g->nbufs++;
	pthread_mutex_unlock(&g->mu);
	return b;
}

void smcr_lgr_buf_put(struct smcr_lgr *g, struct smcr_lgr_buf *b, bool reuse)
{
	unsigned nfree = 0;

	if (!b)
		return;
	if (reuse) {
		/* zeroed before anyone sees it again: RMBs and send buffers alike */
		memset(b->mem, 0, b->size);
		pthread_mutex_lock(&g->mu);
		for (struct smcr_lgr_buf *f = g->free_bufs; f; f = f->next)
			nfree++;
		if (g->state != SMCR_LGR_DEAD && nfree < LGR_POOL_MAX) {
			b->next = g->free_bufs;
			g->free_bufs = b;
			b = NULL;
		}
		pthread_mutex_unlock(&g->mu);
		if (!b)
			return;
	}
	pthread_mutex_lock(&g->mu);
	if (b->rmb && g->state == SMCR_LGR_ACTIVE)
		(void)smcr_lgr_llc_send_rkey(g, false, b->mr->rkey, b->iova);
	for (struct smcr_lgr_buf **p = &g->all_bufs; *p; p = &(*p)->all_next) {
		if (*p == b) {
			*p = b->all_next;
			break;
		}
	}
	if (b->mr_alt)
		ibv_dereg_mr(b->mr_alt);
	g->nbufs--;
	pthread_mutex_unlock(&g->mu);
	ibv_dereg_mr(b->mr);
	free(b->mem);
	free(b);
}

/*
 * With two links the answer is awaited (bounded), as the kernel's client
 * does (smc_llc_do_confirm_rkey before its CLC Confirm): a Linux server that
 * takes our Confirm's rtoken (on the second link) before this message makes
 * two rtoken entries of one RMB, and the connection's has no rkey on the
 * first link, so after a failover to it the server writes with rkey 0 (seen:
 * remote access error, both QPs in error, the group gone).
 */
void smcr_lgr_rkey_confirm(struct smcr_lgr *g, const struct smcr_lgr_buf *b)
{
	int64_t deadline = smcr_sys_now_ms() + SMCR_LGR_LLC_WAIT_MS;
	uint64_t mine = 0;

	pthread_mutex_lock(&g->mu);
	if (g->state == SMCR_LGR_ACTIVE && b->rmb && b->fresh) {
		if (smcr_lgr_llc_send_rkey(g, true, b->mr->rkey, b->iova))
			smcr_lgr_fail_locked(g, "cannot send CONFIRM RKEY");
		else
			mine = ++g->rkey_confirms_sent;
	}
	while (mine && g->state == SMCR_LGR_ACTIVE && g->alt.state == SMCR_LGR_LINK_UP &&
	       g->rkey_confirms_answered < mine && smcr_sys_now_ms() < deadline) {
		if (arm_locked(g) < 0) {
			smcr_lgr_fail_locked(g, "cannot arm the completion queue");
			break;
		}
		drain_locked(g);
		if (g->rkey_confirms_answered >= mine)
			break;
		pthread_mutex_unlock(&g->mu);
		(void)smcr_sys_wait_fd(g->epfd, POLLIN, smcr_sys_now_ms() + LGR_WAIT_SLICE_MS);
		pthread_mutex_lock(&g->mu);
	}
	pthread_mutex_unlock(&g->mu);
}

void smcr_lgr_buf_retire(struct smcr_lgr *g, struct smcr_lgr_buf *b, struct smcr_lgr_conn *c)
{
	unsigned waiting = 0;
	bool closed = false;

	pthread_mutex_lock(&g->mu);
	drain_locked(g); /* the closing CDC may be in the completion queue */
	/* c leaves in the same breath: a CDC for its token now finds the RMB */
	for (struct smcr_lgr_conn **p = &g->conns; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			g->nconns--;
			break;
		}
	}
	for (uint32_t i = 0; i < c->qcount; i++)
		closed |= (c->q[(c->qhead + i) % SMCR_LGR_CONN_QLEN][SMCR_CDC_OFF_CONN_FLAGS] &
			   (SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_ABORT)) != 0;
	for (struct smcr_lgr_buf *r = g->retiring; r; r = r->next)
		waiting++;
	if (g->state != SMCR_LGR_DEAD && (closed || waiting < LGR_POOL_MAX)) {
		if (closed) {
			pool_add_locked(g, b);
		} else {
			b->retire_token = c->token;
			b->next = g->retiring;
			g->retiring = b;
		}
		b = NULL;
	}
	pthread_mutex_unlock(&g->mu);
	smcr_sys_close(c->efd);
	c->efd = -1;
	if (b)
		smcr_lgr_buf_put(g, b, false);
}

/* ---- failover: the peer's RMBs per link, CDCs in flight, a link going down ----------- */

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
 * After a post on c's link `wr`: a CDC posted is remembered (its seqno and
 * producer cursor by work request: which of them completed says what the
 * peer has), a failover validation CDC is not (it carries no cursor).  A
 * post that failed because the second link went down is no failure: the
 * connection moves, and the engine resends from what the peer has
 * (-EAGAIN).
 */
static int sent_locked(struct smcr_lgr *g, struct smcr_lgr_conn *c, struct smcr_wr_link *wr,
		       const uint8_t *msg, int rc)
{
	if (rc == 0 && msg && !(msg[SMCR_CDC_OFF_PROD_FLAGS] & SMCR_CDC_PROD_FAILOVER)) {
		struct smcr_lgr_cdc_sent *e = &c->sent[c->nsent % SMCR_LGR_CONN_SENT];

		e->wr = smcr_wr_last_posted(wr);
		e->seqno = smcr_get_be16(msg + SMCR_CDC_OFF_SEQNO);
		e->prod_wrap = smcr_get_be16(msg + SMCR_CDC_OFF_PROD + 2);
		e->prod_count = smcr_get_be32(msg + SMCR_CDC_OFF_PROD + 4);
		c->nsent++;
	}
	if (rc && rc != -EINVAL && wr == g->alt.link && smcr_wr_link_error(wr)[0]) {
		char why[96];

		snprintf(why, sizeof(why), "%s", smcr_wr_link_error(wr));
		smcr_lgr_alt_down_locked(g, why, false);
		if (g->state != SMCR_LGR_DEAD && c->switched)
			rc = -EAGAIN;
	}
	return rc;
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

void smcr_lgr_alt_down_locked(struct smcr_lgr *g, const char *why, bool peer_asked)
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
		ring(c); /* the engine resends in its next call */
	}
	g->stat_link_switches += moved;
	smcr_info("verbs: link group %u: second link %u down (%s): %u connection(s) move to the "
		  "first link",
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

/* ---- data path -------------------------------------------------------------------- */

struct smcr_wr_link *smcr_lgr_wr(struct smcr_lgr *g, unsigned i)
{
	return i == 1 && g->alt.link ? g->alt.link : g->link;
}

/* c's link, and src_mr's twin on it (the same buffer registered on its PD). */
static struct smcr_wr_link *conn_wr(struct smcr_lgr *g, const struct smcr_lgr_conn *c,
				    struct ibv_mr **src_mr)
{
	if (c->link != 1 || !g->alt.link)
		return g->link;
	if (src_mr && *src_mr) {
		for (struct smcr_lgr_buf *b = g->all_bufs; b; b = b->all_next) {
			if (b->mr == *src_mr) {
				*src_mr = b->mr_alt;
				break;
			}
		}
	}
	return g->alt.link;
}

int smcr_lgr_send(struct smcr_lgr *g, struct smcr_lgr_conn *c,
		  const uint8_t msg[SMCR_WR_MSG_LEN], int timeout_ms)
{
	int rc = -ECONNRESET;

	pthread_mutex_lock(&g->mu);
	if (g->state != SMCR_LGR_DEAD && c->switched) {
		rc = -EAGAIN; /* moved: the engine resends first (failover) */
	} else if (g->state != SMCR_LGR_DEAD) {
		struct smcr_wr_link *wr = conn_wr(g, c, NULL);

		rc = smcr_wr_send_msg(wr, msg, timeout_ms);
		c->last_wr = smcr_wr_last_posted(wr);
		rc = sent_locked(g, c, wr, msg, rc);
		if (rc == -ETIMEDOUT || rc == -ENOBUFS)
			smcr_lgr_fail_locked(g, "send queue stuck");
		if (rc && rc != -EAGAIN)
			rc = -ECONNRESET;
		drain_locked(g); /* LLC that came in while we waited for room */
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

int smcr_lgr_write(struct smcr_lgr *g, struct smcr_lgr_conn *c, struct ibv_mr *src_mr,
		   const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
		   int timeout_ms)
{
	int rc = -ECONNRESET;

	pthread_mutex_lock(&g->mu);
	if (g->state != SMCR_LGR_DEAD && c->switched) {
		rc = 0; /* moved: the engine's resend covers these bytes (failover) */
	} else if (g->state != SMCR_LGR_DEAD) {
		struct smcr_wr_link *wr = conn_wr(g, c, &src_mr);

		rc = smcr_wr_write_mirrored(wr, src_mr, rmb, offset, len, timeout_ms);
		c->last_wr = smcr_wr_last_posted(wr);
		rc = sent_locked(g, c, wr, NULL, rc);
		if (rc == -EAGAIN)
			rc = 0;
		if (rc == -ETIMEDOUT)
			smcr_lgr_fail_locked(g, "send queue stuck");
		if (rc && rc != -EINVAL)
			rc = -ECONNRESET;
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

int smcr_lgr_write_send(struct smcr_lgr *g, struct smcr_lgr_conn *c, struct ibv_mr *src_mr,
			const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
			const uint8_t msg[SMCR_WR_MSG_LEN], int timeout_ms)
{
	int rc = -ECONNRESET;

	pthread_mutex_lock(&g->mu);
	if (g->state != SMCR_LGR_DEAD && c->switched) {
		rc = -EAGAIN; /* moved: the engine resends first (failover) */
	} else if (g->state != SMCR_LGR_DEAD) {
		struct smcr_wr_link *wr = conn_wr(g, c, &src_mr);

		rc = smcr_wr_write_mirrored_msg(wr, src_mr, rmb, offset, len, msg, timeout_ms);
		c->last_wr = smcr_wr_last_posted(wr);
		rc = sent_locked(g, c, wr, msg, rc);
		if (rc == -ETIMEDOUT || rc == -ENOBUFS)
			smcr_lgr_fail_locked(g, "send queue stuck");
		if (rc && rc != -EINVAL && rc != -EAGAIN)
			rc = -ECONNRESET;
		drain_locked(g); /* LLC that came in while we waited for room */
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

int smcr_lgr_recv(struct smcr_lgr *g, struct smcr_lgr_conn *c, uint8_t msg[SMCR_WR_MSG_LEN])
{
	int rc = 0;

	pthread_mutex_lock(&g->mu);
	drain_locked(g);
	if (c->qcount) {
		memcpy(msg, c->q[c->qhead], SMCR_WR_MSG_LEN);
		c->qhead = (c->qhead + 1) % SMCR_LGR_CONN_QLEN;
		c->qcount--;
		rc = 1;
	} else if (g->state == SMCR_LGR_DEAD) {
		rc = -ECONNRESET;
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

bool smcr_lgr_settle(struct smcr_lgr *g, struct smcr_lgr_conn *c, bool ready)
{
	bool look_again;

	pthread_mutex_lock(&g->mu);
	c->ready = ready;
	if (g->state != SMCR_LGR_DEAD && arm_locked(g) < 0)
		smcr_lgr_fail_locked(g, "cannot arm the completion queue");
	drain_locked(g); /* a message that completed before the arm raised no event */
	look_again = c->qcount > 0;
	if (ready || c->qcount || g->state == SMCR_LGR_DEAD)
		ring(c);
	else
		unring(c);
	pthread_mutex_unlock(&g->mu);
	return look_again;
}

bool smcr_lgr_active(struct smcr_lgr *g)
{
	bool active;

	pthread_mutex_lock(&g->mu);
	drain_locked(g);
	active = g->state == SMCR_LGR_ACTIVE;
	pthread_mutex_unlock(&g->mu);
	return active;
}

bool smcr_lgr_dead(struct smcr_lgr *g)
{
	return smcr_lgr_dead_check(g, true, NULL, NULL);
}

bool smcr_lgr_dead_check(struct smcr_lgr *g, bool device_events, struct smcr_lgr_conn *c,
			 uint64_t *delivered)
{
	bool dead;

	pthread_mutex_lock(&g->mu);
	drain_locked(g);
	if (device_events)
		device_events_locked(g);
	if (c)
		*delivered = c->delivered;
	dead = g->state == SMCR_LGR_DEAD;
	pthread_mutex_unlock(&g->mu);
	return dead;
}

bool smcr_lgr_probe(struct smcr_lgr *g, struct smcr_lgr_conn *c)
{
	bool ok = false;

	pthread_mutex_lock(&g->mu);
	if (g->state != SMCR_LGR_DEAD) {
		if (smcr_lgr_llc_send_test_link(g) == 0) {
			c->hup_probe = g->probes_sent;
			ok = true;
			/*
			 * Its answer wakes the waiters, and so does its failure (a dead
			 * peer's QP: retries exhausted): the QP in error flushes our
			 * receives into the armed receive CQ (wr.c).
			 */
			if (arm_locked(g) < 0)
				smcr_lgr_fail_locked(g, "cannot arm the completion queue");
			drain_locked(g);
		} else {
			smcr_lgr_fail_locked(g, "cannot send TEST LINK");
		}
	}
	pthread_mutex_unlock(&g->mu);
	return ok;
}

bool smcr_lgr_probe_done(struct smcr_lgr *g, struct smcr_lgr_conn *c)
{
	bool done;

	pthread_mutex_lock(&g->mu);
	drain_locked(g);
	done = g->state == SMCR_LGR_DEAD || g->probes_answered >= c->hup_probe;
	pthread_mutex_unlock(&g->mu);
	return done;
}

void smcr_lgr_probe_answered_locked(struct smcr_lgr *g)
{
	g->probes_answered++;
	for (struct smcr_lgr_conn *c = g->conns; c; c = c->next)
		if (c->hup_probe && g->probes_answered >= c->hup_probe)
			ring(c);
}

int smcr_lgr_conn_flush(struct smcr_lgr *g, struct smcr_lgr_conn *c, int timeout_ms)
{
	int rc;

	pthread_mutex_lock(&g->mu);
	rc = g->state == SMCR_LGR_DEAD ? -ECONNRESET
				       : smcr_wr_wait_done(conn_wr(g, c, NULL), c->last_wr, timeout_ms);
	pthread_mutex_unlock(&g->mu);
	return rc;
}

/* Re-arm (takes pending channel events: no busy wake-ups), then take what came. */
static void service_locked(struct smcr_lgr *g)
{
	if (g->state != SMCR_LGR_DEAD && arm_locked(g) < 0)
		smcr_lgr_fail_locked(g, "cannot arm the completion queue");
	drain_locked(g);
	/* CDCs it dispatched rang their doorbells; a waiter needs the channel no more */
}

void smcr_lgr_service(struct smcr_lgr *lgr, const uint8_t local_gid[SMCR_IB_GID_LEN],
		      enum smcr_lgr_role role)
{
	if (lgr) {
		pthread_mutex_lock(&lgr->mu);
		service_locked(lgr);
		pthread_mutex_unlock(&lgr->mu);
		return;
	}
	pthread_once(&once, init_once);
	pthread_mutex_lock(&list_mu);
	for (struct smcr_lgr *g = lgr_list; g; g = g->next_lgr) {
		if (g->key.role != role || memcmp(g->key.local_gid, local_gid, SMCR_IB_GID_LEN))
			continue;
		pthread_mutex_lock(&g->mu);
		if (g->state != SMCR_LGR_DEAD && g->connected)
			service_locked(g);
		pthread_mutex_unlock(&g->mu);
	}
	pthread_mutex_unlock(&list_mu);
}

int smcr_lgr_channel_fd(const struct smcr_lgr *g)
{
	return g->epfd;
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

/* The second link's QP on g->alt.port (INIT, receives posted), every buffer on its PD. */
static int alt_link_locked(struct smcr_lgr *g)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int rc;

	rc = smcr_wr_link_create(g->alt.port, &g->alt.link);
	if (rc)
		return rc;
	smcr_wr_set_rx_handler(g->alt.link, on_message1, g);
	for (struct smcr_lgr_buf *b = g->all_bufs; b; b = b->all_next) {
		rc = alt_reg_locked(g, b);
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

int smcr_lgr_alt_reserve(struct smcr_lgr *g)
{
	int rc;

	pthread_mutex_lock(&g->mu);
	rc = g->alt.port ? -EBUSY : smcr_ib_port_open_subnet(g->port, g->key.peer_gid, &g->alt.port);
	if (rc == 0) {
		g->alt.state = SMCR_LGR_LINK_ADDING; /* since_ms 0: ADD LINK not sent yet */
		g->alt.link_num = g->link_num + 1;
	} else if (rc != -EBUSY) {
		g->alt.port = NULL;
	}
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

uint32_t smcr_lgr_qpn(const struct smcr_lgr *g)
{
	struct smcr_ib_qp_info own;

	smcr_wr_link_info(g->link, &own);
	return own.qpn;
}

/* ---- the reaper: idle teardown, keepalive, LLC nobody else takes ---------------- */

/* SMCR_TESTLINK_TIME, else SMCR_LGR_KEEPALIVE_MS (the kernel's default) */
static int64_t keepalive_ms(void)
{
	unsigned s = smcr_config_get()->testlink_s;

	return s ? (int64_t)s * 1000 : SMCR_LGR_KEEPALIVE_MS;
}

/* CDCs handed to g's connections so far (did the helper's drain bring any?) */
static uint64_t delivered_locked(const struct smcr_lgr *g)
{
	uint64_t n = 0;

	for (const struct smcr_lgr_conn *c = g->conns; c; c = c->next)
		n += c->delivered;
	return n;
}

/*
 * One group's timers, both mutexes held.  True if the group must go now
 * (unused and idle long enough, or dead and unused).  *watch: no application
 * thread took its completions for SMCR_LGR_LLC_WATCH_MS, so the helper
 * sleeps on its channel.
 */
static bool tick_locked(struct smcr_lgr *g, int64_t now, int64_t *next, bool *watch)
{
	int64_t due, keepalive;

	*watch = false;
	helper_drain_locked(g); /* what others left: completions, LLC work */
	device_events_locked(g);
	if (g->connected && g->state != SMCR_LGR_DEAD) {
		due = g->last_drain_ms + SMCR_LGR_LLC_WATCH_MS;
		if (now >= due)
			*watch = true;
		else if (due < *next)
			*next = due;
	}
	if (g->refs == 0) {
		/*
		 * The client keeps an unused group longer than the server, as the
		 * kernel does (SMC_LGR_FREE_DELAY_CLNT = _SERV + 10 s): the server
		 * ends it first, so it never offers a group the client has just
		 * deleted (its DELETE LINK still on the wire or in the server's
		 * completion queue; rxe VM: IPv4 fell back SYNCERR after 5 s of IPv6).
		 */
		int64_t keep = idle_ms + (g->key.role == SMCR_LGR_CLIENT ? LGR_CLIENT_IDLE_EXTRA_MS : 0);

		if (g->state == SMCR_LGR_DEAD || now - g->idle_since_ms >= keep)
			return true;
		due = g->idle_since_ms + keep;
		if (due < *next)
			*next = due;
	}
	if (g->state != SMCR_LGR_ACTIVE)
		return false;
	/* the server's second link: its ADD LINK or CONFIRM LINK unanswered in time */
	if ((g->alt.state == SMCR_LGR_LINK_ADDING || g->alt.state == SMCR_LGR_LINK_PENDING) &&
	    g->alt.since_ms && g->key.role == SMCR_LGR_SERVER) {
		due = g->alt.since_ms + (g->alt.state == SMCR_LGR_LINK_ADDING ? SMCR_LGR_LLC_WAIT_MS
									  : SMCR_LGR_LLC_FIRST_WAIT_MS);
		if (now >= due)
			smcr_lgr_llc_alt_timeout(g);
		else if (due < *next)
			*next = due;
	}
	keepalive = keepalive_ms();
	if (g->testlink_sent_ms) {
		if (g->last_rx_ms > g->testlink_sent_ms) {
			g->testlink_sent_ms = 0;
		} else if (now - g->testlink_sent_ms >= keepalive) {
			smcr_lgr_fail_locked(g, "TEST LINK not answered");
			return g->refs == 0;
		}
	}
	if (!g->testlink_sent_ms && now - g->last_rx_ms >= keepalive) {
		if (smcr_lgr_llc_send_test_link(g) == 0)
			g->testlink_sent_ms = now;
	}
	due = (g->testlink_sent_ms ? g->testlink_sent_ms : g->last_rx_ms) + keepalive;
	if (due < *next)
		*next = due;
	return false;
}

/*
 * Before the helper sleeps on g (see the invariant at the top): arm and
 * drain, twice.  The drain after an arm takes what completed before it (that
 * raised no event); the second arm re-arms a receive CQ whose arm the first
 * drain spent (a message that came meanwhile, or the failure of an answer
 * it sent: the QP in error flushes our receives, wr.c).  An answer's own
 * completion needs no event.  False if the group died meanwhile.  Group mutex held throughout: nobody else takes
 * completions until the helper sleeps.
 */
static bool watch_locked(struct smcr_lgr *g)
{
	for (int i = 0; i < 2 && g->state != SMCR_LGR_DEAD; i++) {
		if (arm_locked(g) < 0)
			smcr_lgr_fail_locked(g, "cannot arm the completion queue");
		else
			helper_drain_locked(g);
	}
	/* from here on others' takes of an LLC message kick us (we hold the mutex till then) */
	g->watched = g->state != SMCR_LGR_DEAD;
	return g->watched;
}

/* The fds whose readiness needs the helper for watched group g: poll entries. */
static size_t watch_fds_locked(const struct smcr_lgr *g, struct pollfd *p)
{
	size_t n = 0;

	p[n++] = (struct pollfd){ .fd = g->epfd, .events = POLLIN };
	p[n++] = (struct pollfd){ .fd = g->port->ctx->async_fd, .events = POLLIN };
	if (g->port->removal_fd >= 0)
		p[n++] = (struct pollfd){ .fd = g->port->removal_fd, .events = POLLIN };
	if (g->alt.port && g->alt.port->removal_fd >= 0)
		p[n++] = (struct pollfd){ .fd = g->alt.port->removal_fd, .events = POLLIN };
	return n;
}
#define LGR_WATCH_FDS 4 /* at most, per group */

static void *reaper(void *arg)
{
	struct pollfd *pfd = NULL;
	size_t cap = 0;

	(void)arg;
	(void)pthread_setname_np(pthread_self(), "smcr-lgr");
	pthread_mutex_lock(&list_mu);
	while (lgr_list) {
		/* no deadline anywhere: a day; a wake-up is an event, a kick or a deadline */
		int64_t now = smcr_sys_now_ms(), next = now + 86400000;
		size_t n = 0, want = 1 + LGR_WATCH_FDS * (size_t)lgr_num;
		int timeout;

		if (want > cap) {
			struct pollfd *bigger = realloc(pfd, want * sizeof(*pfd));

			if (bigger) {
				pfd = bigger;
				cap = want;
			}
		}
		if (cap)
			pfd[n++] = (struct pollfd){ .fd = reaper_kick_fd, .events = POLLIN };
		for (struct smcr_lgr **p = &lgr_list; *p;) {
			struct smcr_lgr *g = *p;
			uint64_t seen;
			bool go, watch;

			if (pthread_mutex_trylock(&g->mu)) {
				/* an application thread is in it: in use, looked at again later */
				if (now + SMCR_LGR_LLC_WATCH_MS < next)
					next = now + SMCR_LGR_LLC_WATCH_MS;
				p = &g->next_lgr;
				continue;
			}
			seen = delivered_locked(g);
			go = tick_locked(g, now, &next, &watch);
			if (go && g->state != SMCR_LGR_DEAD && g->connected) {
				/* idle: tell the peer, as the kernel (all links, orderly) */
				smcr_lgr_llc_send_delete_link(g, SMCR_LLC_DEL_PROG_INIT_TERM, true);
				(void)smcr_wr_flush(g->link, LGR_EXIT_FLUSH_MS);
				g->state = SMCR_LGR_DEAD;
			}
			if (watch && delivered_locked(g) != seen) {
				/* we took CDCs: their readers come for them (and for the rest) */
				g->last_drain_ms = now;
				watch = false;
				if (now + SMCR_LGR_LLC_WATCH_MS < next)
					next = now + SMCR_LGR_LLC_WATCH_MS;
			}
			g->watched = false;
			if (!go && watch && g->state != SMCR_LGR_DEAD && watch_locked(g)) {
				if (n + LGR_WATCH_FDS <= cap)
					n += watch_fds_locked(g, pfd + n);
				else if (now + SMCR_LGR_LLC_WATCH_MS < next) /* no memory: a timer */
					next = now + SMCR_LGR_LLC_WATCH_MS;
			}
			pthread_mutex_unlock(&g->mu);
			if (!go) {
				p = &g->next_lgr;
				continue;
			}
			*p = g->next_lgr;
			lgr_num--;
			smcr_dbg("verbs: link group %u freed", g->id);
			lgr_free(g);
		}
		if (!lgr_list)
			break;
		if (n == 0 || pfd[0].fd < 0) { /* no kick can reach us: look every so often */
			if (now + SMCR_LGR_LLC_WATCH_MS < next)
				next = now + SMCR_LGR_LLC_WATCH_MS;
		}
		pthread_mutex_unlock(&list_mu);
		now = smcr_sys_now_ms();
		timeout = next <= now ? 0 : next - now > 86400000 ? 86400000 : (int)(next - now);
		/* n == 0 (no memory): a plain sleep */
		if (smcr_libc.poll(pfd, n, timeout) > 0 && (pfd[0].revents & POLLIN)) {
			uint64_t v;

			(void)!smcr_libc.read(pfd[0].fd, &v, sizeof(v));
		}
		pthread_mutex_lock(&list_mu);
	}
	reaper_running = false;
	pthread_mutex_unlock(&list_mu);
	free(pfd);
	return NULL;
}
