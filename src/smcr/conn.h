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
 *
 * fork (design §8): a connection whose transport state lives in shared
 * memory (shm) is itself carved from a shared arena (share.h), its lock is
 * process-shared and robust, and `holders` names every process that may use
 * it.  Whatever one process's calls need apart from the others' (its
 * waiters, the events its own poll/epoll wait for, the bytes it moved) is
 * kept in its holder slot; the connection-wide sums are what the data path
 * reads.  The last holder to close (or exit) ends the connection as close()
 * did before fork; the others only let go of their copies (hold.c).
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
#include "smcr/rxhold.h"
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

/* One process that holds a shared connection (hold.c). */
#define SMCR_HOLDERS_MAX 16

struct smcr_holder {
	int32_t pid;              /* 0 free; > 0 a holder; < 0 -pid of a parent whose
				   * forked child has not taken the slot yet */
	uint64_t start;           /* its start time (share.h); 0 unknown */
	unsigned waiters_rd;      /* its share of the connection's waiters */
	unsigned waiters_wr;
	unsigned interest;        /* POLLIN/POLLOUT its outside waiters want */
	uint64_t bytes_sent;      /* what this process moved */
	uint64_t bytes_received;
};

struct smcr_sock {
	pthread_mutex_t lock;
	bool shared;                   /* in a share arena: follows fork (hold.c) */
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
	/*
	 * Unread bytes moved out of the RMB to give a silent peer room
	 * (smcr_rx_rescue(), protocol.md §6.6): the oldest of the stream,
	 * read before the RMB's.  Private connections (verbs) only.
	 */
	struct smcr_rxhold held;
	bool peer_relinked_quiet;      /* the peer moved links (its validation CDC), no CDC since */

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
	uint32_t rcv_lowat;            /* the application's SO_RCVLOWAT; 0 = 1 */
	int peek_off;                  /* SO_PEEK_OFF: where the next peek starts; < 0 = off */
	uint32_t peek_need;            /* a blocking peek waits for this many unread; 0 = none */
	int snd_timeout_ms;

	/* readiness: sums over the holders */
	unsigned interest;             /* POLLIN/POLLOUT wanted by outside waiters */
	unsigned waiters_rd;           /* engine threads blocked in recv */
	unsigned waiters_wr;           /* engine threads blocked in send */
	struct smcr_holder holders[SMCR_HOLDERS_MAX];

	/* counters, mirrored into the published record */
	struct smcr_stats_conn *stats;
	uint64_t bytes_sent;           /* by every holder */
	uint64_t bytes_received;
	uint64_t cdc_sent;
	uint64_t cdc_received;
	uint64_t link_switches;        /* SMC-R failover: moved to another link */
	uint64_t bytes_resent;         /* ... and written again over it */
	uint64_t rmb_rescues;          /* unread bytes held aside for a silent peer (rx.c) */
	int64_t opened_ms;             /* when the handshake ended (the learned policy) */

	/* the rest of the stream on TCP (tcp_tail.c) */
	bool went_tcp;                 /* we go on over TCP: the rings are done with */
	bool tcp_tail;                 /* the peer goes on over TCP after rx_prod's data */
	bool tail_watch_out;           /* the readiness fd follows TCP output too */
	bool tail_fin_sent;            /* shut down for writing: TCP's FIN went after the resend */
	uint32_t tail_reason;          /* why the stream went on over TCP (SMCR_CLC_DECL_*), 0 = it did not */
	struct smcr_curs tail_resend;  /* our first byte the peer never consumed (to tx_prod) */

	/* a private (SMC-R) connection across fork (fork_tail.c) */
	struct smcr_fork_cell *fork_cell; /* fork-shared: a forked copy's request, its answer */
	struct smcr_sock *fork_next;   /* this process's list of them */
	bool fork_refused;             /* (a forked copy) it cannot go on over TCP: reset */
};

/* hold.c */
/* Lock and unlock the connection; a holder that died holding it is let go of. */
void smcr_conn_lock(struct smcr_sock *s);
void smcr_conn_unlock(struct smcr_sock *s);
/* false: another thread holds the lock (nothing taken). */
bool smcr_conn_trylock(struct smcr_sock *s);
/* The new connection's lock and first holder (this process). */
void smcr_hold_init(struct smcr_sock *s);
/* This process's holder slot (a private dummy if it holds none).  Lock held. */
struct smcr_holder *smcr_hold_self(struct smcr_sock *s);
/* Recompute `interest` from the holders'.  Lock held. */
void smcr_hold_sum_interest(struct smcr_sock *s);
/* Does another live process hold the connection (dead holders let go of first)?  Lock held. */
bool smcr_hold_others_live(struct smcr_sock *s);
/* This process's slot goes (its waiters and interest with it).  Lock held. */
void smcr_hold_drop(struct smcr_sock *s);
/* Is this process a holder?  No lock: only this process changes its own slot. */
bool smcr_hold_is_holder(struct smcr_sock *s);
/* After a hold was dropped: this process's copies go (no lock, no message). */
void smcr_hold_forget_copies(struct smcr_sock *s);
/* fn on each shared connection this process holds, under its lock (held_lock first). */
void smcr_hold_each(void (*fn)(const struct smcr_sock *s));
/* The connection is gone: out of this process's list of held connections. */
void smcr_hold_forget(struct smcr_sock *s);
/* fork (engine.c's order: before every other engine lock; child after share.c's). */
void smcr_hold_fork_prepare(void);
void smcr_hold_fork_parent(void);
void smcr_hold_fork_child(void);

/* conn.c */
struct smcr_sock *smcr_conn_new(int tcp_fd, bool server, const struct smcr_transport_ops *ops,
				struct smcr_xconn *xc, uint32_t peer_size, int spin_us);
void smcr_conn_free(struct smcr_sock *s, bool clean);
/* Take pending control messages, then re-arm readiness.  Lock held. */
void smcr_conn_progress(struct smcr_sock *s);
/*
 * The same on the data path: readiness is raised when something became
 * ready, but a doorbell that rang for what the call just consumed is left
 * for the next wait to clear (smcr_sock_settle(), smcr_sock_poll(), a
 * blocking wait): an application that changes its interest next (a
 * request/response client: read the answer, then wait for writability)
 * pays no system call to clear and raise it again.  Lock held.
 */
void smcr_conn_progress_io(struct smcr_sock *s);
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

/* Bytes an iovec describes, or -EINVAL (bad count, sum above SSIZE_MAX), -EFAULT (NULL). */
ssize_t smcr_iov_total(const struct iovec *iov, int iovcnt);

/* rx.c */
/* Apply one received control message; invalid -> connection aborted.  Lock held. */
void smcr_rx_ctrl(struct smcr_sock *s, const uint8_t msg[SMCR_CDC_MSG_LEN]);
uint32_t smcr_rx_readable(const struct smcr_sock *s);
/* What the application may read: the held bytes and the RMB's. */
uint32_t smcr_rx_unread(const struct smcr_sock *s);
/*
 * Enough unread for a reader (POLLIN): SO_RCVLOWAT bytes, or fewer when the
 * ring cannot take more before they are read (the peer waits for room).
 */
bool smcr_rx_lowat_met(const struct smcr_sock *s);
/*
 * A writer blocked for room in the peer's RMB: should it stop waiting at
 * *at (CLOCK_MONOTONIC ms, computed on the first call: keep it between
 * calls, -1 to start) to give the peer room with smcr_rx_rescue()?  False:
 * no reason to (*at reset).  Lock held.
 */
bool smcr_rx_rescue_due(struct smcr_sock *s, int64_t *at);
/* Move unread bytes out of the RMB and tell the peer; true if any moved.  Lock held. */
bool smcr_rx_rescue(struct smcr_sock *s);
/* After consuming: protocol.md §6.5's thresholds decide whether the peer hears of it. */
void smcr_rx_maybe_update_cons(struct smcr_sock *s);

/* tx.c */
uint32_t smcr_tx_space(const struct smcr_sock *s);

/* tcp_tail.c: the rest of the stream on TCP (lock held) */
/* Can this connection's stream go on over TCP (transport and peer both)?  Constant. */
bool smcr_tail_possible(const struct smcr_sock *s);
/* smcr_sock_continue_on_tcp() with the lock held and `why` for the log; 0, -errno. */
int smcr_tail_continue_locked(struct smcr_sock *s, uint32_t reason, const char *why);
/* The same, taking the lock. */
int smcr_sock_continue_on_tcp_why(struct smcr_sock *s, uint32_t reason, const char *why);
/* The peer said it goes on over TCP (its last CDC taken). */
void smcr_tail_begin(struct smcr_sock *s);
/* Reads past the ring, `got` bytes into iov already: what recv returns. */
ssize_t smcr_tail_recv(struct smcr_sock *s, const struct iovec *iov, int iovcnt, size_t got,
		       int flags);
/* Sends past the ring, `sent` bytes of iov sent already: what send returns. */
ssize_t smcr_tail_send(struct smcr_sock *s, const struct iovec *iov, int iovcnt, size_t sent,
		       int flags);
/* What the TCP socket adds to the poll mask (a system call). */
unsigned smcr_tail_mask(struct smcr_sock *s);
/* Flush the resend, waiting for the socket up to `deadline` (ms, < 0 none): 0, -errno. */
int smcr_tail_flush_wait(struct smcr_sock *s, int64_t deadline);

/* close.c */
/* Local abort: CDC abort to the peer, RST on the TCP socket.  Lock held. */
void smcr_close_abort_locked(struct smcr_sock *s, int err);
/* The peer's sticky flags changed: move the close state machine.  Lock held. */
void smcr_close_peer_flags(struct smcr_sock *s);
bool smcr_conn_peer_done(const struct smcr_sock *s);

/*
 * The answer of a reset connection's call: its pending error, taken (a
 * negative errno, reported once, as Linux's sock_error()), else `otherwise`.
 * Connection lock held.
 */
int smcr_conn_reset_answer(struct smcr_sock *s, int otherwise);

#endif /* SMCR_CONN_H */
