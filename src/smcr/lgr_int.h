/* SPDX-License-Identifier: MIT */
/*
 * Between the link-group files only (lgr.h is what the rest of the engine
 * sees).  One concern a file, as the kernel's net/smc splits them:
 *
 *   lgr.c           the list of groups, matching, creation and end, the
 *                   connections a group carries, fork and exit
 *   lgr_link.c      the links' data path: taking completions, handing each
 *                   CDC to its connection and each LLC message to the
 *                   group, posting WRITEs and CDCs, waiting
 *   lgr_worker.c    the one thread: idle teardown, keepalive, LLC requests
 *                   nobody else takes
 *   lgr_buf.c       the pool of registered buffers (RMBs, send buffers)
 *   lgr_failover.c  the second link: its set-up and drop, the peer's RMBs
 *                   per link, moving connections off a link that fails
 *                   (either: the second takes the first's place)
 *   lgr_llc.c       LLC flows: what we send, one handler a message type
 *   lgr_readd.c     a server's group left with one link adds a second again
 *
 * Locks (the engine-wide order is in engine.c):
 *   smcr_lgrs.mu   protects the list and its fields below; taken before a
 *                  group's mutex, never after
 *   smcr_lgr.mu    protects all of one group's state and every wr.c call on
 *                  its links; taken after the engine's connection lock,
 *                  never before
 * Functions named _locked want the group mutex held.
 */
#ifndef SMCR_LGR_INT_H
#define SMCR_LGR_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "smcr/lgr.h"

#define LGR_WAIT_SLICE_MS 20  /* another thread may take the channel event we wait for */
#define LGR_EXIT_FLUSH_MS 200 /* a DELETE LINK we send as the group ends: its completion */

/* The process's link groups (lgr.c), walked by the worker (lgr_worker.c). */
struct smcr_lgr_list {
	pthread_mutex_t mu;      /* protects every field below and each group's next_lgr */
	struct smcr_lgr *head;
	unsigned num;
	int idle_ms;             /* how long an unused group is kept */
	bool worker_running;
	int worker_kick_fd;      /* eventfd waking the worker: made under mu, read atomically */
	int devwatch_fd;         /* devices appearing (the worker's); -1 not made, -2 none */
	unsigned devs_added;     /* times the worker saw one appear (each group's devs_seen) */
};
extern struct smcr_lgr_list smcr_lgrs;

/* lgr.c */
/* Its stats record (smcr-stat linkgroup) says what the group is now. */
void smcr_lgr_publish_locked(struct smcr_lgr *lgr);
/* Free a group nobody references any more (out of the list already). */
void smcr_lgr_free(struct smcr_lgr *lgr);
/* The group fails, every connection resets. */
void smcr_lgr_fail_locked(struct smcr_lgr *lgr, const char *why);
/* The same, logged as a failure or (an orderly end) as information. */
void smcr_lgr_end_locked(struct smcr_lgr *lgr, const char *why, bool failure);

/* lgr_link.c */
/* The wr link a connection's traffic (or link index `i`'s LLC) goes on. */
struct smcr_wr_link *smcr_lgr_wr(struct smcr_lgr *lgr, unsigned i);
/* A TEST LINK response came in. */
void smcr_lgr_probe_answered_locked(struct smcr_lgr *lgr);
/* Ring c's doorbell (once; its reader unrings it). */
void smcr_lgr_conn_ring(struct smcr_lgr_conn *c);
/* wr.c's receive handlers of the first and the second link (arg: the group). */
void smcr_lgr_rx_link0(void *arg, const uint8_t *msg, uint32_t len);
void smcr_lgr_rx_link1(void *arg, const uint8_t *msg, uint32_t len);
/*
 * Take completions (messages are dispatched), then the LLC work they
 * brought.  _poll_locked is the worker's; _drain_locked an application
 * thread's, which also tells the worker that the group is looked after.
 */
void smcr_lgr_poll_locked(struct smcr_lgr *lgr);
void smcr_lgr_drain_locked(struct smcr_lgr *lgr);
/* Arm every link's receive CQ (messages and failures, wr.c).  0 or -errno. */
int smcr_lgr_arm_locked(struct smcr_lgr *lgr);
/* Device events and removal: the group or its second link ends. */
void smcr_lgr_device_events_locked(struct smcr_lgr *lgr);
/* Until the group is ACTIVE, dead or `deadline` passed.  0 or -errno. */
int smcr_lgr_wait_active_locked(struct smcr_lgr *lgr, int64_t deadline);
/* Re-arm and take what came (handshakes waiting for CLC, smcr_lgr_service). */
void smcr_lgr_service_locked(struct smcr_lgr *lgr);

/* lgr_llc.c, group mutex held. */
/*
 * A received LLC message, queued by the rx handler: handled by the handler
 * of its type (may send).  `raw` holds min(len, SMCR_LGR_LLC_MSG_MAX) bytes
 * of a `len`-byte message.
 */
void smcr_lgr_llc_handle(struct smcr_lgr *lgr, unsigned link, const uint8_t *raw, uint32_t len);
int smcr_lgr_llc_send_confirm_link(struct smcr_lgr *lgr, bool response, int timeout_ms);
int smcr_lgr_llc_send_test_link(struct smcr_lgr *lgr);
void smcr_lgr_llc_send_delete_link(struct smcr_lgr *lgr, uint32_t reason, bool orderly);
/* DELETE LINK of one link (`link_num`, orderly: the group goes on), no response awaited. */
void smcr_lgr_llc_send_delete_link_one(struct smcr_lgr *lgr, uint8_t link_num, uint32_t reason);
/* CONFIRM RKEY (confirm) or DELETE RKEY of one RMB, v2, no response awaited. */
int smcr_lgr_llc_send_rkey(struct smcr_lgr *lgr, bool confirm, uint32_t rkey, uint64_t vaddr);
/* Server: a device was reserved (ADDING, since_ms 0): its QP, buffers and ADD LINK. */
void smcr_lgr_llc_srv_add_link(struct smcr_lgr *lgr);
/* Server: the ADD LINK or CONFIRM LINK of the second link went unanswered: give it up. */
void smcr_lgr_llc_alt_timeout(struct smcr_lgr *lgr);

/* lgr_failover.c, group mutex held: the second link, for lgr_llc.c's ADD LINK. */
/* Open it towards the peer's QP `peer` on another device; register every buffer on it. */
int smcr_lgr_alt_open(struct smcr_lgr *lgr, const struct smcr_ib_qp_info *peer,
		      uint8_t link_num);
/* smcr_lgr_alt_reserve (lgr.h), the group mutex held. */
int smcr_lgr_alt_reserve_locked(struct smcr_lgr *lgr);
/* Server: the reserved device's QP (INIT) and every buffer on its PD.  0 or -errno (closed). */
int smcr_lgr_alt_start(struct smcr_lgr *lgr);
/* The second link's QP to RTS towards the peer's new QP.  0 or -errno. */
int smcr_lgr_alt_connect(struct smcr_lgr *lgr, const struct smcr_ib_qp_info *peer);
/* Drop it (QP to error, MRs deregistered, device closed). */
void smcr_lgr_alt_close(struct smcr_lgr *lgr);
/*
 * The second link goes down (failover, lgr.h); peer_asked: the peer's
 * DELETE LINK says so (we answered it already).
 */
void smcr_lgr_alt_down_locked(struct smcr_lgr *lgr, const char *why, bool peer_asked);
/*
 * The first link goes down (failover, lgr.h): with the second one up, that
 * one becomes the group's first and only link and the connections move to
 * it (true); false: nothing done, the group cannot go on (the caller fails
 * it).  peer_asked as above.
 */
bool smcr_lgr_first_down_locked(struct smcr_lgr *g, const char *why, bool peer_asked);
/* The peer's RMB with `rkey` on link `link` (new: made), or NULL. */
struct smcr_lgr_rtoken *smcr_lgr_rtoken_get_locked(struct smcr_lgr *lgr, unsigned link,
						   uint32_t rkey);
void smcr_lgr_rtoken_del_locked(struct smcr_lgr *lgr, unsigned link, uint32_t rkey);

/*
 * lgr_readd.c, group mutex held: a server's group left with one link adds a
 * second again.  _arm: a link was lost or a device appeared (`why`, logged);
 * up to a few attempts, the first `delay_ms` from now.  _tick (the worker): the attempt
 * due, if any; *next: when to look again.
 */
void smcr_lgr_readd_arm_locked(struct smcr_lgr *lgr, int64_t delay_ms, const char *why);
void smcr_lgr_readd_tick_locked(struct smcr_lgr *lgr, int64_t now, int64_t *next);

/* lgr_buf.c */
/* Register b on the second link's PD too.  0 or -errno. */
int smcr_lgr_buf_alt_reg_locked(struct smcr_lgr *lgr, struct smcr_lgr_buf *b);
/* The peer closed the connection that had `token`: its retired RMB joins the pool. */
void smcr_lgr_buf_retired_locked(struct smcr_lgr *lgr, uint32_t token);

/* lgr_worker.c, list mutex held: make sure the worker runs (it exits with the last group). */
void smcr_lgr_worker_start_locked(void);
/* Wake the worker (any thread, any lock: a write to an eventfd never blocks). */
void smcr_lgr_worker_wake(void);

#endif /* SMCR_LGR_INT_H */
