// SPDX-License-Identifier: MIT
/*
 * Work requests on one SMC-R link (see wr.h).
 *
 * Send-queue accounting: every posted send-queue WR gets the next number of
 * `wr_posted`; only message SENDs are signaled, and their wr_id is that
 * number, so the completion of message N retires every WR up to N (RC
 * completes in order).  WRITEs may use all slots but one, so a message can
 * always be posted to retire them; writes with no message outstanding and
 * no room fail with -ENOBUFS instead of waiting for ever.
 *
 * Receive wr_ids carry RECV_TAG plus the slot index; a received message
 * stays in its slot until the caller took it, then the slot is re-posted.
 * 48 slots and one message per CDC: a peer that runs further ahead than
 * that meets receiver-not-ready and retries (rnr_retry 7 = for ever), as
 * with the kernel.
 */
#include "smcr/wr.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smcr/libc.h"
#include "smcr/sys.h"

#define RECV_TAG     (1ull << 63)
#define SLOT_PAGE    4096u
_Static_assert(SMCR_WR_SEND_SLOTS * SMCR_WR_SLOT_LEN <= SLOT_PAGE, "send slots fit a page");
_Static_assert(SMCR_WR_RECV_SLOTS * SMCR_WR_SLOT_LEN <= 2 * SLOT_PAGE, "receive slots fit 2 pages");
/* the receive region: 2 pages of slots, then the overflow of a long message */
#define RECV_OVER_OFF (2 * SLOT_PAGE)
#define RECV_REGION_LEN (RECV_OVER_OFF + SMCR_WR_RX_MAX_LEN)
#define POLL_BATCH   16
#define ERRTEXT_LEN  96

struct smcr_wr_link {
	struct smcr_ib_port *port;
	struct ibv_comp_channel *channel;      /* the receive CQ's: smcr_wr_fd() */
	struct ibv_comp_channel *send_channel; /* the send CQ's: only our own waits poll it */
	struct ibv_cq *send_cq; /* armed only while a wait here needs a send completion */
	struct ibv_cq *recv_cq; /* armed for every completion: messages, and flushes */
	struct ibv_qp *qp;
	uint8_t *send_slots; /* SMCR_WR_SEND_SLOTS x SMCR_WR_SLOT_LEN */
	uint8_t *recv_slots; /* SMCR_WR_RECV_SLOTS x SMCR_WR_SLOT_LEN, then the overflow */
	uint8_t *recv_over;  /* bytes 48.. of a long message, shared by every slot */
	uint8_t *rx_long;    /* a long message reassembled for the handler */
	struct ibv_mr *send_mr;
	struct ibv_mr *recv_mr; /* slots and overflow: one region */
	uint8_t *long_buf;      /* a message longer than 44 bytes (v2 ADD LINK), lazily */
	struct ibv_mr *long_mr;
	uint32_t psn;
	uint64_t wr_posted;  /* send-queue WRs posted so far */
	uint64_t wr_retired; /* ... of which known complete */
	uint64_t msgs_posted;
	uint64_t msgs_done;
	/*
	 * Armed: notification requested on the receive CQ, and since then
	 * neither its event read nor a completion taken from it.  Then no
	 * event can be waiting for us, so arming again (a system call on rxe)
	 * and reading the channel are skipped.  Never true while it is not
	 * armed.
	 */
	bool recv_armed;
	/*
	 * Events due: completions taken from the receive CQ while it was armed
	 * fired its event, which sits in the channel or is still on its way:
	 * rxe makes a completion visible to ibv_poll_cq a moment before it
	 * queues the event (another CPU; under QEMU a descheduled vCPU makes
	 * the moment long), so a read right after the completion can miss it.
	 * While an event is due, every arm reads the channel: an event nobody
	 * reads keeps the channel fd (in every connection's ready fd) readable,
	 * and every wait returns at once until the next message.  Reading an
	 * event pays one back.  A count too high (a completion that raised no
	 * event, e.g. one that came between an arm's look at the CQ and its
	 * request) costs a read (EAGAIN) per arm, and for good: each event
	 * pays one back, each completion counts one more (rxe VM,
	 * redis-benchmark -c 1: 2 too many after 2000 requests, 5 reads of
	 * about 2 us per request); too low would be a busy loop, so every
	 * doubt counts one more.
	 */
	unsigned recv_due;
	/* received, not yet taken: slot indexes in arrival order */
	uint32_t rx_slot[SMCR_WR_RECV_SLOTS];
	uint32_t rx_head;
	uint32_t rx_count;
	smcr_wr_rx_fn rx_fn; /* set: messages go there at once (shared links) */
	void *rx_arg;
	int error; /* sticky: 0 or -errno */
	char errtext[ERRTEXT_LEN];
	struct smcr_wr_stats stats;
};

/* Record the first failure: "where: what". */
static void link_fail(struct smcr_wr_link *link, int err, const char *where, const char *what)
{
	if (link->error)
		return;
	link->error = err;
	snprintf(link->errtext, sizeof(link->errtext), "%s: %s", where, what);
}

#define OVER_LEN (SMCR_WR_RX_MAX_LEN - SMCR_WR_SLOT_LEN)

static int post_recv_slot(struct smcr_wr_link *link, uint32_t slot)
{
	struct ibv_sge sge[2] = {
		{ .addr = (uintptr_t)(link->recv_slots + (size_t)slot * SMCR_WR_SLOT_LEN),
		  .length = SMCR_WR_SLOT_LEN,
		  .lkey = link->recv_mr->lkey },
		{ .addr = (uintptr_t)link->recv_over, .length = OVER_LEN, .lkey = link->recv_mr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = RECV_TAG | slot, .sg_list = sge, .num_sge = 2 };
	struct ibv_recv_wr *bad;
	int rc = ibv_post_recv(link->qp, &wr, &bad);

	if (rc) {
		link_fail(link, -ECONNRESET, "ibv_post_recv", strerror(rc));
		return -rc;
	}
	return 0;
}

static void take_completion(struct smcr_wr_link *link, const struct ibv_wc *wc)
{
	bool is_recv = wc->wr_id & RECV_TAG;

	if (wc->status != IBV_WC_SUCCESS) {
		link_fail(link, -ECONNRESET, is_recv ? "receive" : "send",
			  ibv_wc_status_str(wc->status));
		return;
	}
	if (!is_recv) {
		link->wr_retired = wc->wr_id;
		link->msgs_done++;
		return;
	}
	if (wc->byte_len < SMCR_WR_MSG_LEN) {
		/* the kernel drops short messages too; keep the slot in use */
		post_recv_slot(link, (uint32_t)(wc->wr_id & ~RECV_TAG));
		return;
	}
	link->stats.msgs_received++;
	if (link->rx_fn) {
		uint32_t slot = (uint32_t)(wc->wr_id & ~RECV_TAG), len = wc->byte_len;
		uint8_t msg[SMCR_WR_MSG_LEN];
		uint8_t *m = msg;

		/* copy out first: the slot is ours only until it is re-posted */
		if (len > SMCR_WR_SLOT_LEN) {
			m = link->rx_long;
			memcpy(m + SMCR_WR_SLOT_LEN, link->recv_over, len - SMCR_WR_SLOT_LEN);
		} else {
			len = SMCR_WR_MSG_LEN; /* CDC and v1 LLC: 44 bytes */
		}
		memcpy(m, link->recv_slots + (size_t)slot * SMCR_WR_SLOT_LEN,
		       len > SMCR_WR_SLOT_LEN ? SMCR_WR_SLOT_LEN : len);
		post_recv_slot(link, slot);
		link->rx_fn(link->rx_arg, m, len);
		return;
	}
	link->rx_slot[(link->rx_head + link->rx_count) % SMCR_WR_RECV_SLOTS] =
		(uint32_t)(wc->wr_id & ~RECV_TAG);
	link->rx_count++;
}

/* Take every completion `cq` holds: true if there was any. */
static bool poll_one_cq(struct smcr_wr_link *link, struct ibv_cq *cq)
{
	struct ibv_wc wc[POLL_BATCH];
	bool took = false;
	int n;

	do {
		n = ibv_poll_cq(cq, POLL_BATCH, wc);
		if (n < 0) {
			link_fail(link, -ECONNRESET, "ibv_poll_cq", "failed");
			return took;
		}
		took |= n > 0;
		for (int i = 0; i < n; i++)
			take_completion(link, &wc[i]);
	} while (n == POLL_BATCH);
	return took;
}

/*
 * Take every completion both CQs hold.  Our own send completions are reaped
 * here, by whichever call comes next (every engine call of the link's
 * connections polls), never by a wake-up of their own (see smcr_wr_arm).
 */
static void poll_cq(struct smcr_wr_link *link)
{
	poll_one_cq(link, link->send_cq);
	if (poll_one_cq(link, link->recv_cq) && link->recv_armed) {
		link->recv_armed = false; /* its event fired: arm again, and read it */
		link->recv_due++;
	}
}

void smcr_wr_set_rx_handler(struct smcr_wr_link *link, smcr_wr_rx_fn fn, void *arg)
{
	link->rx_fn = fn;
	link->rx_arg = arg;
}

bool smcr_wr_poll(struct smcr_wr_link *link)
{
	poll_cq(link);
	return link->error != 0;
}

int smcr_wr_fd(const struct smcr_wr_link *link)
{
	return link->channel->fd;
}

/*
 * Two CQs on two completion channels.  The receive CQ's channel is the one
 * callers sleep on (smcr_wr_fd: in every connection's ready fd and the
 * link-group helper's poll); it is armed for every completion: each is a
 * message for us (we and the kernel send every message SOLICITED) or a flush
 * error.  The send CQ's channel is polled only by this file's own waits (a
 * full send queue, smcr_wr_flush, smcr_wr_wait_done), which arm it for as
 * long as they wait; otherwise its completions are taken by whichever call
 * polls next (every engine call of the link's connections does) and wake
 * nobody.
 *
 * Why not one channel: every message SEND is SIGNALED (its completion
 * retires it and the WRITEs before it; failover's "last completed CDC" is
 * read from those completions), and with the send CQ on the channel in the
 * ready fds, armed while WRs were out, a request/response server woke for
 * its own reply's completion, found nothing and slept again (rxe VM, the
 * engine ping-pong: 0.7-0.85 of 1.6-1.8 wake-ups per round trip).  Signaling
 * fewer SENDs (one per half send queue) would still wake it for those, and
 * would make the retired mark, the send-queue room and failover's delivered
 * CDC coarser; a channel nobody sleeps on keeps all three exact.
 *
 * A failure still wakes the sleepers: a failed work request moves the QP to
 * the error state, which flushes the posted receives (a shared link keeps
 * all 48 posted) into the receive CQ with an error status, and so does
 * smcr_wr_link_stop().  Hence "every completion" on the receive CQ: armed
 * "solicited only", rxe raises no event for a flushed receive (it posts them
 * unsolicited), as it raised none for a failed send completion (a WRITE
 * refused by the peer's NIC sat in the CQ while the waiter slept).  On mlx5
 * an error completion counts as solicited anyway.
 */
int smcr_wr_arm(struct smcr_wr_link *link)
{
	struct ibv_cq *cq;
	void *ctx;
	unsigned int events = 0;

	/*
	 * Still armed since the last time, nothing taken, no event due: no
	 * event fired (an event needs a completion, and a completion not taken
	 * yet leaves the channel readable, so a waiter comes back and takes
	 * it).  This is every call of a busy connection between two messages;
	 * on rxe, each arm and each look at the channel is a system call.
	 */
	if (link->recv_armed && !link->recv_due)
		return 0;
	/*
	 * Completions first, so that what is taken after the events are read
	 * below is what completed after them (and spent the arm made here).
	 */
	poll_cq(link);
	/* the fd is non-blocking: this takes only events already there */
	while (ibv_get_cq_event(link->channel, &cq, &ctx) == 0)
		events++;
	/*
	 * An event read: the arm that raised it is spent (if the completion
	 * is not taken yet), or it pays back a due one; which, we cannot tell,
	 * so both: arming an armed CQ again is harmless.
	 */
	if (events) {
		ibv_ack_cq_events(link->recv_cq, events);
		link->recv_armed = false;
		link->recv_due -= events < link->recv_due ? events : link->recv_due;
	}
	if (!link->recv_armed) {
		if (ibv_req_notify_cq(link->recv_cq, 0))
			return -errno;
		link->recv_armed = true;
	}
	return 0;
}

/*
 * Arm the send CQ for a wait on it: the events its last arm raised (nobody
 * else reads this channel) are read and acknowledged first.  0 or -errno.
 */
static int arm_send(struct smcr_wr_link *link)
{
	struct ibv_cq *cq;
	void *ctx;
	unsigned int events = 0;

	while (ibv_get_cq_event(link->send_channel, &cq, &ctx) == 0)
		events++;
	if (events)
		ibv_ack_cq_events(link->send_cq, events);
	return ibv_req_notify_cq(link->send_cq, 0) ? -errno : 0;
}

/* Something the waiter may care about: a message, a retired SEND, a failure. */
static uint64_t progress(const struct smcr_wr_link *link)
{
	return link->stats.msgs_received + link->msgs_done + (link->error != 0);
}

/*
 * Wait for a completion event, then take the completions: 1 something
 * happened, 0 deadline passed, -errno.  A completion that slipped in before
 * the arm raised no event: the look at the CQ right after arming catches it,
 * and then we must not sleep (the event will not come).  `sends`: also for
 * our own send completions.  A wait for those sleeps on the receive channel
 * too: the caller holds the link (the group mutex), so nobody else takes
 * the messages that come meanwhile and re-posts their receive slots, and a
 * peer that sends while waiting for room itself would wait for us for ever.
 */
static int wait_completions(struct smcr_wr_link *link, bool sends, int64_t deadline)
{
	uint64_t before = progress(link);
	struct pollfd fds[2] = {
		{ .fd = link->channel->fd, .events = POLLIN },
		{ .fd = link->send_channel->fd, .events = POLLIN },
	};
	int rc = smcr_wr_arm(link);

	if (!rc && sends)
		rc = arm_send(link);
	if (rc)
		return rc;
	poll_cq(link);
	if (progress(link) != before)
		return 1;
	rc = smcr_sys_wait_fds(fds, sends ? 2 : 1, deadline);
	if (rc < 0)
		return rc;
	poll_cq(link); /* also after a timeout: report what is there, event or not */
	return rc > 0 || progress(link) != before;
}

static bool has_send_room(const struct smcr_wr_link *link, uint32_t wrs, bool is_msg)
{
	uint64_t in_flight = link->wr_posted - link->wr_retired;
	uint64_t limit = is_msg ? SMCR_WR_MAX_SEND_WR : SMCR_WR_MAX_SEND_WR - 1;

	if (is_msg && link->msgs_posted - link->msgs_done >= SMCR_WR_SEND_SLOTS)
		return false;
	return in_flight + wrs <= limit;
}

/* Until `wrs` send-queue slots are free: 0, or -errno (-ETIMEDOUT, -ENOBUFS). */
static int wait_send_room(struct smcr_wr_link *link, uint32_t wrs, bool is_msg, int timeout_ms)
{
	int64_t deadline = smcr_sys_deadline(timeout_ms);
	bool waited = false;

	for (;;) {
		int rc;

		if (link->error)
			return link->error;
		if (has_send_room(link, wrs, is_msg))
			break;
		poll_cq(link);
		if (has_send_room(link, wrs, is_msg))
			break;
		/* only message completions retire WRs: none outstanding, none coming */
		if (link->msgs_posted == link->msgs_done)
			return -ENOBUFS;
		waited = true;
		rc = wait_completions(link, true, deadline);
		if (rc == 0)
			return -ETIMEDOUT;
		if (rc < 0)
			return rc;
	}
	if (waited)
		link->stats.send_waits++;
	return 0;
}

/* The message's SEND as work request number `wr_id`, its bytes copied into the next slot. */
static void fill_msg(struct smcr_wr_link *link, const uint8_t msg[SMCR_WR_MSG_LEN],
		     uint64_t wr_id, struct ibv_sge *sge, struct ibv_send_wr *wr)
{
	uint8_t *slot = link->send_slots +
			(link->msgs_posted % SMCR_WR_SEND_SLOTS) * SMCR_WR_SLOT_LEN;

	memcpy(slot, msg, SMCR_WR_MSG_LEN);
	*sge = (struct ibv_sge){ .addr = (uintptr_t)slot,
				 .length = SMCR_WR_MSG_LEN,
				 .lkey = link->send_mr->lkey };
	*wr = (struct ibv_send_wr){
		.wr_id = wr_id,
		.sg_list = sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
	};
}

int smcr_wr_send_msg(struct smcr_wr_link *link, const uint8_t msg[SMCR_WR_MSG_LEN],
		     int timeout_ms)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int rc = wait_send_room(link, 1, true, timeout_ms);

	if (rc)
		return rc;
	fill_msg(link, msg, link->wr_posted + 1, &sge, &wr);
	rc = ibv_post_send(link->qp, &wr, &bad);
	if (rc) {
		link_fail(link, -ECONNRESET, "ibv_post_send (message)", strerror(rc));
		return -ECONNRESET;
	}
	link->wr_posted++;
	link->msgs_posted++;
	link->stats.msgs_sent++;
	return 0;
}

int smcr_wr_send_long(struct smcr_wr_link *link, const uint8_t *msg, uint32_t len,
		      int timeout_ms)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int rc;

	if (len < SMCR_WR_MSG_LEN || len > SMCR_WR_RX_MAX_LEN)
		return -EINVAL;
	if (!link->long_mr) {
		link->long_buf = aligned_alloc(SLOT_PAGE, SMCR_WR_RX_MAX_LEN);
		if (link->long_buf)
			link->long_mr = smcr_ib_reg_source(link->port, link->long_buf,
							   SMCR_WR_RX_MAX_LEN);
		if (!link->long_mr) {
			free(link->long_buf);
			link->long_buf = NULL;
			return -ENOMEM;
		}
	}
	rc = wait_send_room(link, 1, true, timeout_ms);
	if (rc)
		return rc;
	memcpy(link->long_buf, msg, len);
	sge = (struct ibv_sge){ .addr = (uintptr_t)link->long_buf,
				.length = len,
				.lkey = link->long_mr->lkey };
	wr = (struct ibv_send_wr){
		.wr_id = link->wr_posted + 1,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
	};
	rc = ibv_post_send(link->qp, &wr, &bad);
	if (rc) {
		link_fail(link, -ECONNRESET, "ibv_post_send (long message)", strerror(rc));
		return -ECONNRESET;
	}
	link->wr_posted++;
	link->msgs_posted++; /* its slot stays unused: the bytes are in long_buf */
	link->stats.msgs_sent++;
	/* one buffer: the next long message waits until the NIC is done with this one */
	return smcr_wr_wait_done(link, link->wr_posted, timeout_ms);
}

static bool inside_mr(const struct ibv_mr *mr, const void *p, uint32_t len)
{
	uintptr_t start = (uintptr_t)mr->addr, at = (uintptr_t)p;

	return at >= start && at - start <= mr->length && len <= mr->length - (at - start);
}

/* One or two WRITEs: [src0, +len0) -> remote0 and [src1, +len1) -> remote1. */
static int post_writes(struct smcr_wr_link *link, struct ibv_mr *mr, const uint8_t *src0,
		       uint32_t len0, uint64_t remote0, const uint8_t *src1, uint32_t len1,
		       uint64_t remote1, uint32_t rkey, int timeout_ms)
{
	struct ibv_sge sge[2] = {
		{ .addr = (uintptr_t)src0, .length = len0, .lkey = mr->lkey },
		{ .addr = (uintptr_t)src1, .length = len1, .lkey = mr->lkey },
	};
	struct ibv_send_wr wr[2], *bad;
	uint32_t n = len1 ? 2 : 1;
	int rc;

	if (!inside_mr(mr, src0, len0) || (len1 && !inside_mr(mr, src1, len1)))
		return -EINVAL;
	rc = wait_send_room(link, n, false, timeout_ms);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		wr[i] = (struct ibv_send_wr){
			.wr_id = link->wr_posted + 1 + i,
			.next = i + 1 < n ? &wr[i + 1] : NULL,
			.sg_list = &sge[i],
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.wr.rdma = { .remote_addr = i ? remote1 : remote0, .rkey = rkey },
		};
	}
	rc = ibv_post_send(link->qp, wr, &bad);
	if (rc) {
		link_fail(link, -ECONNRESET, "ibv_post_send (write)", strerror(rc));
		return -ECONNRESET;
	}
	link->wr_posted += n;
	link->stats.writes += n;
	link->stats.bytes_written += (uint64_t)len0 + len1;
	if (n == 2)
		link->stats.wrapped++;
	return 0;
}

static bool ring_range_ok(const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len)
{
	return rmb->size > 0 && offset < rmb->size && len > 0 && len <= rmb->size;
}

int smcr_wr_write_ring(struct smcr_wr_link *link, struct ibv_mr *src_mr, const void *src,
		       const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
		       int timeout_ms)
{
	uint32_t first;

	if (!ring_range_ok(rmb, offset, len))
		return -EINVAL;
	first = len < rmb->size - offset ? len : rmb->size - offset;
	return post_writes(link, src_mr, src, first, rmb->addr + offset,
			   (const uint8_t *)src + first, len - first, rmb->addr, rmb->rkey,
			   timeout_ms);
}

/*
 * The WRITE(s) of [offset, +len) of the peer's ring from the send buffer that
 * mirrors it (two at the wrap), unsignaled, and, if `msg`, the message whose
 * signaled SEND retires them, all in one ibv_post_send (one doorbell).
 */
static int post_mirrored(struct smcr_wr_link *link, struct ibv_mr *src_mr,
			 const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
			 const uint8_t *msg, int timeout_ms)
{
	const uint8_t *base = src_mr->addr;
	struct ibv_sge sge[3];
	struct ibv_send_wr wr[3], *bad;
	uint32_t first, n, posts;
	int rc;

	if (!ring_range_ok(rmb, offset, len) || src_mr->length < rmb->size)
		return -EINVAL;
	first = len < rmb->size - offset ? len : rmb->size - offset;
	n = len > first ? 2 : 1;
	posts = msg ? n + 1 : n;
	rc = wait_send_room(link, posts, msg != NULL, timeout_ms);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)(base + (i ? 0 : offset)),
					   .length = i ? len - first : first,
					   .lkey = src_mr->lkey };
		wr[i] = (struct ibv_send_wr){
			.wr_id = link->wr_posted + 1 + i,
			.next = i + 1 < posts ? &wr[i + 1] : NULL,
			.sg_list = &sge[i],
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.wr.rdma = { .remote_addr = rmb->addr + (i ? 0 : offset), .rkey = rmb->rkey },
		};
	}
	if (msg)
		fill_msg(link, msg, link->wr_posted + n + 1, &sge[n], &wr[n]);
	rc = ibv_post_send(link->qp, wr, &bad);
	if (rc) {
		link_fail(link, -ECONNRESET, "ibv_post_send (write)", strerror(rc));
		return -ECONNRESET;
	}
	link->wr_posted += posts;
	if (msg) {
		link->msgs_posted++;
		link->stats.msgs_sent++;
	}
	link->stats.writes += n;
	link->stats.bytes_written += len;
	if (n == 2)
		link->stats.wrapped++;
	return 0;
}

int smcr_wr_write_mirrored(struct smcr_wr_link *link, struct ibv_mr *src_mr,
			   const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
			   int timeout_ms)
{
	return post_mirrored(link, src_mr, rmb, offset, len, NULL, timeout_ms);
}

int smcr_wr_write_mirrored_msg(struct smcr_wr_link *link, struct ibv_mr *src_mr,
			       const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
			       const uint8_t msg[SMCR_WR_MSG_LEN], int timeout_ms)
{
	return post_mirrored(link, src_mr, rmb, offset, len, msg, timeout_ms);
}

int smcr_wr_flush(struct smcr_wr_link *link, int timeout_ms)
{
	int64_t deadline = smcr_sys_deadline(timeout_ms);

	for (;;) {
		int rc;

		poll_cq(link);
		if (link->error)
			return link->error;
		if (link->msgs_done == link->msgs_posted)
			return 0;
		rc = wait_completions(link, true, deadline);
		if (rc == 0)
			return -ETIMEDOUT;
		if (rc < 0)
			return rc;
	}
}

uint64_t smcr_wr_last_posted(const struct smcr_wr_link *link)
{
	return link->wr_posted;
}

uint64_t smcr_wr_last_retired(const struct smcr_wr_link *link)
{
	return link->wr_retired;
}

int smcr_wr_wait_done(struct smcr_wr_link *link, uint64_t mark, int timeout_ms)
{
	int64_t deadline = smcr_sys_deadline(timeout_ms);

	for (;;) {
		int rc;

		poll_cq(link);
		if (link->error)
			return link->error;
		if (link->wr_retired >= mark)
			return 0;
		rc = wait_completions(link, true, deadline);
		if (rc == 0)
			return -ETIMEDOUT;
		if (rc < 0)
			return rc;
	}
}

int smcr_wr_recv_msg(struct smcr_wr_link *link, uint8_t msg[SMCR_WR_MSG_LEN])
{
	uint32_t slot;

	if (!link->rx_count)
		poll_cq(link);
	if (!link->rx_count)
		return link->error ? -ECONNRESET : 0;
	slot = link->rx_slot[link->rx_head];
	link->rx_head = (link->rx_head + 1) % SMCR_WR_RECV_SLOTS;
	link->rx_count--;
	/* copy out first: the slot is ours only until it is re-posted */
	memcpy(msg, link->recv_slots + (size_t)slot * SMCR_WR_SLOT_LEN, SMCR_WR_MSG_LEN);
	if (!link->error)
		post_recv_slot(link, slot);
	return 1;
}

int smcr_wr_wait_msg(struct smcr_wr_link *link, int timeout_ms)
{
	int64_t deadline = smcr_sys_deadline(timeout_ms);

	for (;;) {
		int rc;

		poll_cq(link);
		if (link->rx_count || link->error)
			return 1;
		rc = wait_completions(link, false, deadline);
		if (rc < 0)
			return rc;
		if (link->rx_count || link->error)
			return 1;
		if (rc == 0)
			return 0;
	}
}

/* ---- life cycle ---------------------------------------------------------------- */

int smcr_wr_link_create(struct smcr_ib_port *port, struct smcr_wr_link **out)
{
	struct smcr_wr_link *link = calloc(1, sizeof(*link));
	int rc = -ENOMEM;

	if (!link)
		return -ENOMEM;
	link->port = port;
	/* whole pages: registered memory is MADV_DONTFORK (ib.c) */
	link->send_slots = aligned_alloc(SLOT_PAGE, SLOT_PAGE);
	link->recv_slots = aligned_alloc(SLOT_PAGE, RECV_REGION_LEN);
	link->rx_long = malloc(SMCR_WR_RX_MAX_LEN);
	if (!link->send_slots || !link->recv_slots || !link->rx_long)
		goto fail;
	link->recv_over = link->recv_slots + RECV_OVER_OFF;
	memset(link->send_slots, 0, SLOT_PAGE);
	memset(link->recv_slots, 0, RECV_REGION_LEN);
	link->send_mr = smcr_ib_reg_source(port, link->send_slots,
					   SMCR_WR_SEND_SLOTS * SMCR_WR_SLOT_LEN);
	link->recv_mr = smcr_ib_reg_sink(port, link->recv_slots, RECV_OVER_OFF + OVER_LEN);
	link->channel = ibv_create_comp_channel(port->ctx);
	link->send_channel = ibv_create_comp_channel(port->ctx);
	if (!link->send_mr || !link->recv_mr || !link->channel || !link->send_channel)
		goto fail_errno;
	if (smcr_libc.fcntl(link->channel->fd, F_SETFL,
			    smcr_libc.fcntl(link->channel->fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    smcr_libc.fcntl(link->send_channel->fd, F_SETFL,
			    smcr_libc.fcntl(link->send_channel->fd, F_GETFL) | O_NONBLOCK) < 0)
		goto fail_errno;
	link->send_cq = ibv_create_cq(port->ctx, (int)SMCR_WR_MAX_SEND_WR, link,
				      link->send_channel, 0);
	link->recv_cq = ibv_create_cq(port->ctx, (int)SMCR_WR_RECV_SLOTS, link, link->channel, 0);
	if (!link->send_cq || !link->recv_cq)
		goto fail_errno;
	link->qp = smcr_ib_qp_create(port, link->send_cq, link->recv_cq, SMCR_WR_MAX_SEND_WR,
				     SMCR_WR_RECV_SLOTS);
	if (!link->qp)
		goto fail_errno;
	for (uint32_t i = 0; i < SMCR_WR_RECV_SLOTS; i++) {
		rc = post_recv_slot(link, i);
		if (rc)
			goto fail;
	}
	rc = smcr_wr_arm(link);
	if (rc)
		goto fail;
	link->psn = smcr_ib_random_psn();
	*out = link;
	return 0;
fail_errno:
	rc = errno ? -errno : -EIO;
fail:
	smcr_wr_link_destroy(link);
	return rc;
}

void smcr_wr_link_info(const struct smcr_wr_link *link, struct smcr_ib_qp_info *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->gid, link->port->gid, SMCR_IB_GID_LEN);
	memcpy(out->mac, link->port->mac, SMCR_IB_MAC_LEN);
	out->qpn = link->qp->qp_num;
	out->psn = link->psn;
	out->mtu = (uint8_t)link->port->active_mtu;
}

int smcr_wr_link_connect(struct smcr_wr_link *link, const struct smcr_ib_qp_info *peer)
{
	return smcr_ib_qp_connect(link->port, link->qp, peer, link->psn);
}

void smcr_wr_link_stop(struct smcr_wr_link *link)
{
	if (link->qp)
		smcr_ib_qp_error(link->qp);
	link_fail(link, -ECONNRESET, "link", "stopped");
	poll_cq(link);
}

void smcr_wr_link_destroy(struct smcr_wr_link *link)
{
	if (!link)
		return;
	if (link->qp) {
		smcr_ib_qp_error(link->qp);
		ibv_destroy_qp(link->qp);
	}
	if (link->send_cq)
		ibv_destroy_cq(link->send_cq);
	if (link->recv_cq)
		ibv_destroy_cq(link->recv_cq);
	if (link->channel)
		ibv_destroy_comp_channel(link->channel);
	if (link->send_channel)
		ibv_destroy_comp_channel(link->send_channel);
	if (link->send_mr)
		ibv_dereg_mr(link->send_mr);
	if (link->recv_mr)
		ibv_dereg_mr(link->recv_mr);
	if (link->long_mr)
		ibv_dereg_mr(link->long_mr);
	free(link->long_buf);
	free(link->send_slots);
	free(link->recv_slots);
	free(link->rx_long);
	free(link);
}

struct ibv_qp *smcr_wr_qp(const struct smcr_wr_link *link)
{
	return link->qp;
}

const char *smcr_wr_link_error(const struct smcr_wr_link *link)
{
	return link->errtext;
}

void smcr_wr_link_stats(const struct smcr_wr_link *link, struct smcr_wr_stats *out)
{
	*out = link->stats;
}
