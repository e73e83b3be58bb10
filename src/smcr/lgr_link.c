// SPDX-License-Identifier: MIT
/*
 * A link group's data path (see lgr.h, "Demultiplexing"): taking the links'
 * completions, handing each CDC to its connection's queue and doorbell and
 * each LLC message to the group's queue, the LLC work they bring, device
 * events, and the posts and waits of the engine's connections.  Every
 * function takes the group mutex, or wants it held (_locked).
 */
#include "smcr/lgr.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "smcr/cdc.h"
#include "smcr/libc.h"
#include "smcr/llc.h"
#include "smcr/lgr_int.h"
#include "smcr/sys.h"
#include "smcr/wire.h"

/* ---- receive side: demultiplexing ------------------------------------------------- */

void smcr_lgr_conn_ring(struct smcr_lgr_conn *c)
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
	b.smcr_flags |= a.smcr_flags;
	smcr_cdc_encode(&b, last);
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
			smcr_lgr_buf_retired_locked(g, token);
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
	smcr_lgr_conn_ring(c);
}

/* wr.c's rx handler: called while a wr call polls a CQ of link `link`, group mutex held. */
static void on_message(struct smcr_lgr *g, unsigned link, const uint8_t *msg, uint32_t len)
{
	uint32_t slot;

	g->last_rx_ms = smcr_now_ms();
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
		/*
		 * A failover validation names the last CDC the peer had completed on
		 * the link it left; those may wait in that link's receive queue, not
		 * polled yet (either link may be the one left): kept until both are.
		 */
		if (g->polling && (msg[SMCR_CDC_OFF_PROD_FLAGS] & SMCR_CDC_PROD_FAILOVER) &&
		    g->nvq < SMCR_LGR_VQ_LEN) {
			memcpy(g->vq[g->nvq++], msg, SMCR_WR_MSG_LEN);
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
	/* the worker sleeps on this group: whoever took it may not handle the queue */
	if (g->watched)
		smcr_lgr_worker_wake();
}

void smcr_lgr_rx_link0(void *arg, const uint8_t *msg, uint32_t len)
{
	on_message(arg, 0, msg, len);
}

void smcr_lgr_rx_link1(void *arg, const uint8_t *msg, uint32_t len)
{
	on_message(arg, 1, msg, len);
}

/*
 * Take completions (messages are dispatched), then the LLC work they brought.
 * smcr_lgr_poll_locked() is the worker's; smcr_lgr_drain_locked() an application
 * thread's, which tells the worker that this group is being looked after.
 */
void smcr_lgr_poll_locked(struct smcr_lgr *g)
{
	/*
	 * The second link first: a peer that moved a connection off it sends its
	 * failover validation on the first only after what it sent on the second
	 * completed, so those CDCs, in its CQ already, must be queued first.  One
	 * that fails: its connections move to the first (failover).
	 */
	g->polling = true;
	if (g->alt.link && smcr_wr_poll(g->alt.link)) {
		char why[96];

		snprintf(why, sizeof(why), "%s", smcr_wr_link_error(g->alt.link));
		smcr_lgr_alt_down_locked(g, why, false);
	}
	if (g->state != SMCR_LGR_DEAD && smcr_wr_poll(g->link)) {
		char why[96];

		/* with the second link up, it takes over (failover); else the group ends */
		snprintf(why, sizeof(why), "%s", smcr_wr_link_error(g->link));
		if (!smcr_lgr_first_down_locked(g, why, false))
			smcr_lgr_fail_locked(g, why);
	}
	g->polling = false;
	for (unsigned i = 0; i < g->nvq; i++)
		if (g->state != SMCR_LGR_DEAD)
			deliver_cdc(g, g->vq[i]);
	g->nvq = 0;
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

void smcr_lgr_drain_locked(struct smcr_lgr *g)
{
	g->last_drain_ms = smcr_now_ms();
	smcr_lgr_poll_locked(g);
}

/* Arm every link's receive CQ (messages and failures, wr.c).  0 or -errno. */
int smcr_lgr_arm_locked(struct smcr_lgr *g)
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
 * worker closes the device once they are gone.
 */
void smcr_lgr_device_events_locked(struct smcr_lgr *g)
{
	struct ibv_async_event ev;

	if (g->state != SMCR_LGR_DEAD && smcr_ib_port_removed(g->port) &&
	    !smcr_lgr_first_down_locked(g, "its RDMA device is being removed", false)) {
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
		enum ibv_event_type type = ev.event_type;

		/* acknowledged first: a failover closes this device */
		ibv_ack_async_event(&ev);
		switch (type) {
		case IBV_EVENT_DEVICE_FATAL:
		case IBV_EVENT_PORT_ERR:
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_CQ_ERR:
			if (!smcr_lgr_first_down_locked(g, ibv_event_type_str(type), false))
				smcr_lgr_fail_locked(g, ibv_event_type_str(type));
			break;
		default:
			break;
		}
	}
}

/*
 * Until the group is ACTIVE (or dead, or the deadline passed), taking
 * completions.  Mutex held, dropped while sleeping.  Sleeps in slices: a
 * thread working on another connection of the group may take the channel
 * event meant for us (it then dispatches what it found, so nothing is lost,
 * but our poll() would not see it).
 */
int smcr_lgr_wait_active_locked(struct smcr_lgr *g, int64_t deadline)
{
	for (;;) {
		int64_t left;
		int rc;

		smcr_lgr_drain_locked(g);
		if (g->state == SMCR_LGR_ACTIVE)
			return 0;
		if (g->state == SMCR_LGR_DEAD)
			return -ECONNRESET;
		left = deadline - smcr_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (smcr_wr_arm(g->link) < 0)
			return -ECONNRESET;
		smcr_lgr_drain_locked(g); /* what completed before the arm raised no event */
		if (g->state != SMCR_LGR_PENDING)
			continue;
		pthread_mutex_unlock(&g->mu);
		rc = smcr_sys_wait_fd(smcr_wr_fd(g->link), POLLIN,
				      smcr_now_ms() +
					      (left < LGR_WAIT_SLICE_MS ? left : LGR_WAIT_SLICE_MS));
		pthread_mutex_lock(&g->mu);
		if (rc < 0)
			return rc;
	}
}

struct smcr_wr_link *smcr_lgr_wr(struct smcr_lgr *g, unsigned i)
{
	return i == 1 && g->alt.link ? g->alt.link : g->link;
}

/* c's link, and src's registration on it (*src_mr; NULL src: none). */
static struct smcr_wr_link *conn_wr(struct smcr_lgr *g, const struct smcr_lgr_conn *c,
				    const struct smcr_lgr_buf *src, struct ibv_mr **src_mr)
{
	bool alt = c->link == 1 && g->alt.link;

	if (src_mr)
		*src_mr = src ? (alt ? src->mr_alt : src->mr) : NULL;
	return alt ? g->alt.link : g->link;
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
	} else if (rc && rc != -EINVAL && wr == g->link && smcr_wr_link_error(wr)[0]) {
		char why[96];

		/* the first link: the second one, if up, takes over */
		snprintf(why, sizeof(why), "%s", smcr_wr_link_error(wr));
		if (smcr_lgr_first_down_locked(g, why, false) && g->state != SMCR_LGR_DEAD &&
		    c->switched)
			rc = -EAGAIN;
	}
	return rc;
}

/*
 * The message `msg` on c's link, after the WRITE(s) of [offset, +len) of the
 * peer's ring from `src` when len > 0 (all in one post).  -EINVAL (a
 * range outside the rings) is the caller's error, not the link's.
 */
static int post_msg(struct smcr_lgr *g, struct smcr_lgr_conn *c, const struct smcr_lgr_buf *src,
		    const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
		    const uint8_t msg[SMCR_WR_MSG_LEN], int timeout_ms)
{
	int rc = -ECONNRESET;

	pthread_mutex_lock(&g->mu);
	if (g->state != SMCR_LGR_DEAD && c->switched) {
		rc = -EAGAIN; /* moved: the engine resends first (failover) */
	} else if (g->state != SMCR_LGR_DEAD) {
		struct ibv_mr *src_mr;
		struct smcr_wr_link *wr = conn_wr(g, c, src, &src_mr);

		if (len)
			rc = smcr_wr_write_mirrored_msg(wr, src_mr, rmb, offset, len, msg,
							timeout_ms);
		else
			rc = smcr_wr_send_msg(wr, msg, timeout_ms);
		c->last_wr = smcr_wr_last_posted(wr);
		rc = sent_locked(g, c, wr, msg, rc);
		if (rc == -ETIMEDOUT || rc == -ENOBUFS)
			smcr_lgr_fail_locked(g, "send queue stuck");
		if (rc && rc != -EINVAL && rc != -EAGAIN)
			rc = -ECONNRESET;
		smcr_lgr_drain_locked(g); /* LLC that came in while we waited for room */
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

int smcr_lgr_send(struct smcr_lgr *g, struct smcr_lgr_conn *c,
		  const uint8_t msg[SMCR_WR_MSG_LEN], int timeout_ms)
{
	return post_msg(g, c, NULL, NULL, 0, 0, msg, timeout_ms);
}

int smcr_lgr_write(struct smcr_lgr *g, struct smcr_lgr_conn *c, const struct smcr_lgr_buf *src,
		   const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
		   int timeout_ms)
{
	int rc = -ECONNRESET;

	pthread_mutex_lock(&g->mu);
	if (g->state != SMCR_LGR_DEAD && c->switched) {
		rc = 0; /* moved: the engine's resend covers these bytes (failover) */
	} else if (g->state != SMCR_LGR_DEAD) {
		struct ibv_mr *src_mr;
		struct smcr_wr_link *wr = conn_wr(g, c, src, &src_mr);

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

int smcr_lgr_write_send(struct smcr_lgr *g, struct smcr_lgr_conn *c, const struct smcr_lgr_buf *src,
			const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
			const uint8_t msg[SMCR_WR_MSG_LEN], int timeout_ms)
{
	return post_msg(g, c, src, rmb, offset, len, msg, timeout_ms);
}

int smcr_lgr_recv(struct smcr_lgr *g, struct smcr_lgr_conn *c, uint8_t msg[SMCR_WR_MSG_LEN])
{
	int rc = 0;

	pthread_mutex_lock(&g->mu);
	smcr_lgr_drain_locked(g);
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
	if (g->state != SMCR_LGR_DEAD && smcr_lgr_arm_locked(g) < 0)
		smcr_lgr_fail_locked(g, "cannot arm the completion queue");
	smcr_lgr_drain_locked(g); /* a message that completed before the arm raised no event */
	/*
	 * A move to the other link (failover) that came after the caller last
	 * looked is work for it too: its ring must survive this settle, or the
	 * resend and the CDC the peer waits for wait for the next message, which
	 * a peer blocked on our cursors never sends.
	 */
	look_again = c->qcount > 0 || __atomic_load_n(&c->switched, __ATOMIC_ACQUIRE);
	if (ready || look_again || g->state == SMCR_LGR_DEAD)
		smcr_lgr_conn_ring(c);
	else
		unring(c);
	pthread_mutex_unlock(&g->mu);
	return look_again;
}

bool smcr_lgr_active(struct smcr_lgr *g)
{
	bool active;

	pthread_mutex_lock(&g->mu);
	smcr_lgr_drain_locked(g);
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
	smcr_lgr_drain_locked(g);
	if (device_events)
		smcr_lgr_device_events_locked(g);
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
			if (smcr_lgr_arm_locked(g) < 0)
				smcr_lgr_fail_locked(g, "cannot arm the completion queue");
			smcr_lgr_drain_locked(g);
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
	smcr_lgr_drain_locked(g);
	done = g->state == SMCR_LGR_DEAD || g->probes_answered >= c->hup_probe;
	pthread_mutex_unlock(&g->mu);
	return done;
}

void smcr_lgr_probe_answered_locked(struct smcr_lgr *g)
{
	g->probes_answered++;
	for (struct smcr_lgr_conn *c = g->conns; c; c = c->next)
		if (c->hup_probe && g->probes_answered >= c->hup_probe)
			smcr_lgr_conn_ring(c);
}

int smcr_lgr_conn_flush(struct smcr_lgr *g, struct smcr_lgr_conn *c, int timeout_ms)
{
	int rc;

	pthread_mutex_lock(&g->mu);
	rc = g->state == SMCR_LGR_DEAD ? -ECONNRESET
				       : smcr_wr_wait_done(conn_wr(g, c, NULL, NULL), c->last_wr, timeout_ms);
	pthread_mutex_unlock(&g->mu);
	return rc;
}

/* Re-arm (takes pending channel events: no busy wake-ups), then take what came. */
void smcr_lgr_service_locked(struct smcr_lgr *g)
{
	if (g->state != SMCR_LGR_DEAD && smcr_lgr_arm_locked(g) < 0)
		smcr_lgr_fail_locked(g, "cannot arm the completion queue");
	smcr_lgr_drain_locked(g);
	/* CDCs it dispatched rang their doorbells; a waiter needs the channel no more */
}
