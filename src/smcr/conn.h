/* SPDX-License-Identifier: MIT */
/*
 * One SMC connection (struct smcr_sock of include/smcr/engine.h): handshake
 * result, cursors of both rings, close flags, readiness bookkeeping.
 *
 * Rings and cursors (protocol.md §6):
 *   own RMB (we read):   rx_cons (ours) .. rx_prod (the peer's, from CDCs)
 *   peer RMB (we write): tx_cons (the peer's, from CDCs) .. tx_prod (ours)
 * Every cursor from the peer passes smcr_cdc_curs_check*() in rx.c before it
 * is stored here, so every offset derived from these fields lies in its ring.
 *
 * Locking: `lock` protects everything below it.  Blocking waits drop it.
 */
#ifndef SMCR_CONN_H
#define SMCR_CONN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/spin.h"
#include "smcr/cdc.h"
#include "smcr/ring.h"
#include "smcr/stats_abi.h"
#include "smcr/transport.h"

/* Linux's connection states (protocol.md §7.2), as far as we keep them. */
enum smcr_conn_state {
	SMCR_CONN_ACTIVE = 0,
	SMCR_CONN_PEERCLOSEWAIT1, /* we shut down writing, the peer has not */
	SMCR_CONN_PEERCLOSEWAIT2, /* both shut down writing, the peer has not closed */
	SMCR_CONN_APPCLOSEWAIT1,  /* the peer shut down writing / closed, we have not */
	SMCR_CONN_APPCLOSEWAIT2,  /* ... and we shut down writing too */
	SMCR_CONN_CLOSED,         /* both sides sent closed */
	SMCR_CONN_ABORTED,        /* reset: by the peer, by peer death, or by us */
};

struct smcr_sock {
	pthread_mutex_t lock;
	int tcp_fd;
	bool server;
	const struct smcr_transport_ops *ops;
	struct smcr_xconn *xc;
	uint32_t local_token;
	uint32_t peer_token;

	enum smcr_conn_state state;

	/* receive side: our RMB */
	uint8_t *rmb;
	uint32_t rmb_size;
	struct smcr_curs rx_prod;      /* peer's producer cursor, validated */
	struct smcr_curs rx_cons;      /* how far the application consumed */
	struct smcr_curs rx_cons_sent; /* consumer cursor last told to the peer */
	bool peer_write_blocked;       /* peer's last CDC: it has more than fits */
	bool peer_cons_upd_req;
	uint16_t rx_seqno;
	bool rx_seqno_valid;

	/* send side: the peer's RMB */
	uint32_t peer_size;
	struct smcr_curs tx_prod;      /* how far we wrote */
	struct smcr_curs tx_cons;      /* peer's consumer cursor, validated */
	uint16_t tx_seqno;
	bool tx_blocked_sent;          /* told the peer we wait for space */

	/* close and error flags */
	uint8_t conn_flags_sent;       /* SMCR_CDC_CONN_* we sent (sticky) */
	uint8_t peer_conn_flags;       /* SMCR_CDC_CONN_* received (sticky) */
	bool shut_rd;
	bool shut_wr;
	int so_error;                  /* pending SO_ERROR (positive errno) */

	int spin_us;                   /* bounded spin before sleeping; 0 = never */
	struct smcr_spin_gov spin_gov; /* skips the spin after fruitless ones (lock held) */
	int rcv_timeout_ms;            /* 0 = block forever */
	int snd_timeout_ms;

	/* readiness */
	unsigned interest;             /* POLLIN/POLLOUT wanted by outside waiters */
	unsigned waiters_rd;           /* engine threads blocked in recv */
	unsigned waiters_wr;           /* engine threads blocked in send */

	/* counters, mirrored into the published record */
	struct smcr_stats_conn *stats;
	uint64_t bytes_sent;
	uint64_t bytes_received;
	uint64_t cdc_sent;
	uint64_t cdc_received;
	uint64_t link_switches;        /* SMC-R failover: moved to another link */
	uint64_t bytes_resent;         /* ... and written again over it */
	int64_t opened_ms;             /* when the handshake ended (the learned policy) */
};

/* conn.c */
struct smcr_sock *smcr_conn_new(int tcp_fd, bool server, const struct smcr_transport_ops *ops,
				struct smcr_xconn *xc, uint32_t peer_size, int spin_us);
void smcr_conn_free(struct smcr_sock *s, bool clean);
/* Take pending control messages, then re-arm readiness.  Lock held. */
void smcr_conn_progress(struct smcr_sock *s);
/* Current poll mask.  Lock held. */
unsigned smcr_conn_mask(const struct smcr_sock *s);
/* Ask the transport whether the peer vanished (a system call); abort if so.  Lock held. */
void smcr_conn_check_peer(struct smcr_sock *s);
/*
 * Block until the doorbell rings (waiter counted for `events`) or `deadline`
 * (CLOCK_MONOTONIC ms, < 0 = none) passes: 0, -EAGAIN on timeout (as
 * SO_RCVTIMEO/SO_SNDTIMEO), -errno.  Lock held, dropped while waiting.
 */
int smcr_conn_wait(struct smcr_sock *s, unsigned events, int64_t deadline);
/* Send one CDC carrying the current cursors and sticky flags.  Lock held. */
int smcr_conn_send_cdc(struct smcr_sock *s, uint8_t prod_flags);

/* Bytes an iovec describes, or -EINVAL (bad count, sum above SSIZE_MAX). */
ssize_t smcr_iov_total(const struct iovec *iov, int iovcnt);

/* rx.c */
/* Apply one received control message; invalid -> connection aborted.  Lock held. */
void smcr_rx_ctrl(struct smcr_sock *s, const uint8_t msg[SMCR_CDC_MSG_LEN]);
uint32_t smcr_rx_readable(const struct smcr_sock *s);
/* After consuming: protocol.md §6.5's thresholds decide whether the peer hears of it. */
void smcr_rx_maybe_update_cons(struct smcr_sock *s);

/* tx.c */
uint32_t smcr_tx_space(const struct smcr_sock *s);

/* close.c */
/* Local abort: CDC abort to the peer, RST on the TCP socket.  Lock held. */
void smcr_close_abort_locked(struct smcr_sock *s, int err);
/* The peer's sticky flags changed: move the close state machine.  Lock held. */
void smcr_close_peer_flags(struct smcr_sock *s);
bool smcr_conn_peer_done(const struct smcr_sock *s);

#endif /* SMCR_CONN_H */
