/* SPDX-License-Identifier: MIT */
/*
 * Work requests on one SMC-R link (one RC QP): RDMA WRITEs into the peer's
 * RMB and 44-byte SENDs (CDC and LLC messages), with their completions taken
 * through a completion channel whose fd the caller can poll, so readiness
 * stays kernel-visible and an idle link costs no CPU.
 *
 * The layout follows the kernel's SMC-R (protocol.md §4.1, §4.3):
 *  - 16 message slots of 48 bytes for outgoing SENDs, each SIGNALED and
 *    SOLICITED (a Linux peer arms its CQ for solicited events only);
 *  - WRITEs unsignaled, posted right before the SEND that announces them:
 *    RC ordering makes the data visible before the message, and that SEND's
 *    completion retires them;
 *  - 48 receive slots of 48 bytes, all posted from the start, each re-posted
 *    as soon as its message has been copied out.  As in the kernel's SMC-Rv2
 *    link, each receive has a second SGE: one overflow buffer of
 *    SMCR_WR_RX_MAX_LEN - 48 bytes shared by all slots, so an LLC message of
 *    up to 8192 bytes (a Linux server's ADD LINK v2 is 88) lands instead of
 *    putting the QP in error.  Two long messages in one poll batch would
 *    share the overflow; a Linux peer runs one LLC flow at a time.
 * The receive CQ's completion channel is the one callers sleep on
 * (smcr_wr_fd); the send CQ has its own, which only this layer's own waits
 * poll, so our send completions wake nobody (they are taken by the next
 * call; a failure wakes the receive side too: wr.c).  A failed completion
 * puts the link into a sticky error state (every later call returns
 * -ECONNRESET).
 *
 * Not thread-safe: the caller serialises calls on one link.
 */
#ifndef SMCR_WR_H
#define SMCR_WR_H

#include <stdbool.h>
#include <stdint.h>

#include "smcr/ib.h"

#define SMCR_WR_MSG_LEN	   44u
#define SMCR_WR_SLOT_LEN   48u
#define SMCR_WR_SEND_SLOTS 16u
#define SMCR_WR_RECV_SLOTS 48u
#define SMCR_WR_RX_MAX_LEN 8192u /* kernel SMC_WR_BUF_V2_SIZE: longest message received */
/* every message may come with up to two WRITEs (destination wrap) */
#define SMCR_WR_MAX_SEND_WR (SMCR_WR_SEND_SLOTS * 3u)

struct smcr_wr_link;

/* The peer's RMB as CLC describes it. */
struct smcr_wr_remote_rmb {
	uint64_t addr;
	uint32_t rkey;
	uint32_t size;
};

/* Counters for tests and stats. */
struct smcr_wr_stats {
	uint64_t writes;       /* RDMA WRITE work requests */
	uint64_t wrapped;      /* ring writes split in two at the end of the RMB */
	uint64_t bytes_written;
	uint64_t msgs_sent;
	uint64_t msgs_received;
	uint64_t send_waits;   /* times a SEND waited for a free slot */
};

/*
 * CQ + completion channel + RC QP (in INIT, receives posted) on `port`.
 * 0 or -errno.
 */
int smcr_wr_link_create(struct smcr_ib_port *port, struct smcr_wr_link **out);
/* What the peer needs to reach this link (goes into CLC). */
void smcr_wr_link_info(const struct smcr_wr_link *link, struct smcr_ib_qp_info *out);
/*
 * Shared links (lgr_link.c): hand every received message to `fn` the moment its
 * completion is taken, from inside whichever wr call polled the CQ, and
 * re-post its slot at once, as the kernel's receive tasklet does.  A link
 * carrying many connections must never hold receive slots hostage to one
 * connection's reader (the peer would meet receiver-not-ready on all of
 * them).  `fn` must not call back into this link.  With a handler set,
 * smcr_wr_recv_msg() finds nothing.
 */
/* msg holds `len` bytes (SMCR_WR_MSG_LEN <= len <= SMCR_WR_RX_MAX_LEN). */
typedef void (*smcr_wr_rx_fn)(void *arg, const uint8_t *msg, uint32_t len);
void smcr_wr_set_rx_handler(struct smcr_wr_link *link, smcr_wr_rx_fn fn, void *arg);
/* Take every completion now (the handler sees the messages).  True if the link failed. */
bool smcr_wr_poll(struct smcr_wr_link *link);
/* Move the QP to RTS towards `peer`.  0 or -errno. */
int smcr_wr_link_connect(struct smcr_wr_link *link, const struct smcr_ib_qp_info *peer);
/*
 * Move the QP to ERR (nothing more is received or sent) and take every
 * completion that came before: the handler sees each message the NIC
 * accepted (the peer counts it delivered), and smcr_wr_last_retired() says
 * what of ours got through.  The link is failed from then on.
 */
void smcr_wr_link_stop(struct smcr_wr_link *link);
/* Move the QP to ERR (the peer sees its writes fail), drop everything. */
void smcr_wr_link_destroy(struct smcr_wr_link *link);

/*
 * Queue RDMA WRITEs of `len` bytes from `src` (inside the registered `src_mr`)
 * into the peer's RMB at `offset`, split in two where it wraps; the data
 * becomes visible to the peer no later than the next message.  Waits (at
 * most `timeout_ms`) for send-queue room.  0 or -errno.
 */
int smcr_wr_write_ring(struct smcr_wr_link *link, struct ibv_mr *src_mr, const void *src,
		       const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
		       int timeout_ms);
/*
 * Same, where the source mirrors the peer's RMB (the kernel's send buffer
 * layout): the bytes for ring offset X live at src_mr->addr + X, so a wrapped
 * write also wraps in the source.
 */
int smcr_wr_write_mirrored(struct smcr_wr_link *link, struct ibv_mr *src_mr,
			   const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
			   int timeout_ms);

/*
 * smcr_wr_write_mirrored() and then a message, posted together (one doorbell,
 * which on rxe is one system call less per CDC).  0 or -errno.
 */
int smcr_wr_write_mirrored_msg(struct smcr_wr_link *link, struct ibv_mr *src_mr,
			       const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
			       const uint8_t msg[SMCR_WR_MSG_LEN], int timeout_ms);

/* Post one 44-byte message (SIGNALED | SOLICITED).  0 or -errno. */
int smcr_wr_send_msg(struct smcr_wr_link *link, const uint8_t msg[SMCR_WR_MSG_LEN],
		     int timeout_ms);

/*
 * Post one message of `len` bytes (44 <= len <= SMCR_WR_RX_MAX_LEN: a v2 ADD
 * LINK with its rkey list) as one SEND from a buffer of its own, and wait (at
 * most timeout_ms) until it completed.  0 or -errno.
 */
int smcr_wr_send_long(struct smcr_wr_link *link, const uint8_t *msg, uint32_t len,
		      int timeout_ms);

/*
 * Until every posted message has completed (the peer has it), at most
 * timeout_ms: call before destroying a link whose last message matters, as
 * destroy moves the QP to ERR and flushes what is still queued.  0 or -errno.
 */
int smcr_wr_flush(struct smcr_wr_link *link, int timeout_ms);

/*
 * Shared links: the number of the last send-queue work request posted so
 * far, and a bounded wait until it completed (everything up to it did: RC
 * completes in order).  A connection leaving a shared link waits for its own
 * last WRITE and CDC this way before its send buffer is reused.  0 or -errno.
 */
uint64_t smcr_wr_last_posted(const struct smcr_wr_link *link);
/*
 * The last one known complete (successful completions taken so far; after a
 * failure, what completed before it): failover's "delivered" mark.
 */
uint64_t smcr_wr_last_retired(const struct smcr_wr_link *link);
int smcr_wr_wait_done(struct smcr_wr_link *link, uint64_t mark, int timeout_ms);

/*
 * Take completions and the next received message: 1 one copied into msg, 0
 * none pending, -ECONNRESET the link failed (after every message that
 * arrived before the failure was taken).
 */
int smcr_wr_recv_msg(struct smcr_wr_link *link, uint8_t msg[SMCR_WR_MSG_LEN]);

/*
 * The receive completion channel's fd (non-blocking): readable once the
 * armed receive CQ produced an event, for an incoming message or a failure
 * of the link (our own send completions never make it readable).
 * smcr_wr_arm() acknowledges past events and arms it again; afterwards the
 * caller must look for messages once more (one may have arrived before the
 * arm).  0 or -errno.
 */
int smcr_wr_fd(const struct smcr_wr_link *link);
int smcr_wr_arm(struct smcr_wr_link *link);

/*
 * Block until a message is pending or the link failed, at most timeout_ms:
 * 1 ready (call smcr_wr_recv_msg), 0 timed out, -errno.
 */
int smcr_wr_wait_msg(struct smcr_wr_link *link, int timeout_ms);

/* The QP itself: for tests that post what we never post (a rogue peer). */
struct ibv_qp *smcr_wr_qp(const struct smcr_wr_link *link);

/* The failure that stopped the link, as text ("" while it works). */
const char *smcr_wr_link_error(const struct smcr_wr_link *link);
void smcr_wr_link_stats(const struct smcr_wr_link *link, struct smcr_wr_stats *out);

#endif /* SMCR_WR_H */
