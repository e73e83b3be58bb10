/* SPDX-License-Identifier: MIT */
/*
 * Transport ops: what the connection engine needs from whatever moves bytes
 * into the peer's ring.  Two transports implement it: shm (shm*.c, same host)
 * and verbs (verbs.c: RDMA WRITE + 44-byte SENDs), so conn/tx/rx/close are
 * one engine above both.
 *
 * One struct smcr_xconn per SMC connection.  The engine serialises all calls
 * on one xconn under the connection lock, except ready_fd (constant).
 *
 * CLC: each transport fills and reads its own fields of the CLC messages
 * (SMC-R: QPN, rkey, GID; shm: the SMC-D/loopback-ism form) through the four
 * handshake hooks, so the engine's CLC flow is transport-neutral.  A hook's
 * positive return is a decline reason (SMCR_CLC_DECL_*), negative is -errno.
 */
#ifndef SMCR_TRANSPORT_H
#define SMCR_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "smcr/cdc.h"
#include "smcr/clc.h"

struct smcr_xconn;

/* What monitoring shows of a connection's transport (stats, smcr-stat). */
struct smcr_xconn_info {
	uint32_t mode;       /* enum smcr_stats_mode: SMC_SHM or SMC_R */
	uint32_t link_group; /* SMC-R link group id; 0 = none */
	uint32_t qp_num;     /* SMC-R: local QP number; 0 = none */
	char device[16];     /* SMC-R: RDMA device name ("rxe0"); "" = none */
};

struct smcr_transport_ops {
	const char *name;

	/*
	 * The transport reaches only peers on this host (shm), so the engine
	 * declines a Proposal for it from anywhere else (NOTLOCAL); it needs no
	 * device, so a create() that fails is a handshake error rather than a
	 * missing device to fall back from; what the policy learns per peer
	 * address (RDMA reachability) says nothing about it; and its connections
	 * show as "smc-shm".  False (verbs): a device-backed path to any peer.
	 */
	bool same_host;

	/*
	 * Per-connection transport state for the TCP connection `tcp_fd` (its
	 * addresses select the device; its hang-up may wake the readiness fd; it
	 * is borrowed, never closed).  The local RMB of at least `size` bytes
	 * (16 KiB << n) is registered during the handshake, once the peer is
	 * known (buffers are reused per peer); `timeout_ms` bounds each wait.
	 * -ENODEV: this transport cannot serve that connection.
	 */
	int (*create)(int tcp_fd, uint32_t size, int timeout_ms, struct smcr_xconn **out);

	/* Client: put the transport's offer into the Proposal. */
	int (*client_propose)(struct smcr_xconn *xc, struct smcr_clc_msg *prop);
	/* Server: judge the Proposal, fill the Accept (own ring, where to attach). */
	int (*server_accept)(struct smcr_xconn *xc, const struct smcr_clc_msg *prop,
			     struct smcr_clc_msg *acc);
	/*
	 * Client: attach the peer's ring described by the Accept (proving who we
	 * are), fill the Confirm.  *peer_ring_size is the ring we write into.
	 */
	int (*client_attach)(struct smcr_xconn *xc, const struct smcr_clc_msg *acc,
			     struct smcr_clc_msg *conf, uint32_t *peer_ring_size);
	/*
	 * Server, after the Accept went out: complete the attachment the client
	 * started, without waiting for the client (the engine waits, on
	 * `tcp_fd` and server_wait_fd(), and calls again): -EAGAIN not yet,
	 * 0 attached, > 0 refused (a Decline the client may have sent first on
	 * `tcp_fd` is left there for the engine to read).
	 */
	int (*server_attach)(struct smcr_xconn *xc, int tcp_fd, uint32_t *peer_ring_size);
	/*
	 * Optional (NULL: none): while server_attach() says -EAGAIN, an fd of
	 * the transport's that turns readable when calling it again may make
	 * progress (a rendezvous, a completion channel), else -1.  It may
	 * change from one call to the next.
	 */
	int (*server_wait_fd)(const struct smcr_xconn *xc);
	/* Server: the Confirm arrived; last chance to refuse. */
	int (*server_confirm)(struct smcr_xconn *xc, const struct smcr_clc_msg *conf);
	/*
	 * Optional (NULL: a plain wait): the client waits until `deadline` for
	 * the TCP socket to turn readable (the Accept), serving the transport
	 * meanwhile (verbs: a Linux server runs CONFIRM RKEY over a group of ours
	 * before its Accept).  1 readable, 0 deadline passed, -errno.
	 */
	int (*clc_wait)(struct smcr_xconn *xc, int64_t deadline);

	/*
	 * After the handshake: the alert tokens, ours (the peer puts it in every
	 * CDC it sends us) and the peer's (we put it in ours).  Never 0.
	 */
	void (*tokens)(const struct smcr_xconn *xc, uint32_t *local, uint32_t *peer);

	/* After the handshake: what monitoring shows (constant from then on). */
	void (*info)(const struct smcr_xconn *xc, struct smcr_xconn_info *out);

	/* After the handshake: the local RMB data area the peer writes into. */
	void (*ring)(struct smcr_xconn *xc, uint8_t **ring, uint32_t *size);

	/*
	 * Copy `len` bytes into the peer's ring at `offset` (offset + len <= peer
	 * ring size; the engine splits at the wrap).  Visible to the peer no later
	 * than the next send_ctrl.  0 or -errno.
	 */
	int (*write_peer)(struct smcr_xconn *xc, uint32_t offset, const void *src, uint32_t len);

	/*
	 * Optional (NULL: never), the rest of a stream on TCP (tcp_tail.c):
	 * read_peer() reads back what we wrote into the peer's ring;
	 * continue_on_tcp() tells the peer, after our last CDC, that we go on
	 * over TCP (-ENOTSUP: the peer would not understand), and makes the
	 * readiness fd follow the TCP socket; peer_on_tcp() says whether the
	 * peer told us so; watch_tcp() makes the readiness fd follow the TCP
	 * socket's input (and output, `out`).
	 */
	int (*read_peer)(const struct smcr_xconn *xc, uint32_t offset, void *dst, uint32_t len);
	int (*continue_on_tcp)(struct smcr_xconn *xc, int tcp_fd);
	bool (*peer_on_tcp)(const struct smcr_xconn *xc);
	int (*watch_tcp)(struct smcr_xconn *xc, int tcp_fd, bool out);
	/*
	 * Optional (NULL: whenever continue_on_tcp is there), after the
	 * handshake: does this peer take the rest of a stream on TCP?  (verbs:
	 * only an smcr peer that said so in CLC; a Linux peer does not.)
	 * Constant from then on.
	 */
	bool (*peer_takes_tail)(const struct smcr_xconn *xc);

	/*
	 * Post one 44-byte control message (CDC) to the peer and ring its
	 * doorbell.  0, -errno; -EAGAIN (verbs) nothing posted because the
	 * connection moved to another link: failover() says so, resend first.
	 */
	int (*send_ctrl)(struct smcr_xconn *xc, const uint8_t msg[SMCR_CDC_MSG_LEN]);

	/*
	 * Take the next control message from the peer into msg: 1 one taken, 0
	 * none pending, -ECONNRESET peer gone or control area corrupt.
	 */
	int (*recv_ctrl)(struct smcr_xconn *xc, uint8_t msg[SMCR_CDC_MSG_LEN]);

	/*
	 * Optional (NULL: never), SMC-R failover: has the connection moved to
	 * another link of its group (the one it used went down)?  1 yes: the
	 * peer may lack what we sent after our last CDC known delivered, whose
	 * producer cursor and seqno are *fin_prod and *fin_seq (both 0: none
	 * yet), and the engine resends; 0 no; -errno: it cannot move (abort).
	 * rewrite() then stages ring bytes written before (still in place: we
	 * never write over what the peer has not consumed) to go with the next
	 * send_ctrl again.
	 */
	int (*failover)(struct smcr_xconn *xc, struct smcr_curs *fin_prod, uint16_t *fin_seq);
	int (*rewrite)(struct smcr_xconn *xc, uint32_t offset, uint32_t len);
	/*
	 * Optional (NULL: not counted): the engine moved unread bytes out of
	 * the connection's RMB for a peer silent since a failover (rx.c), to be
	 * counted where monitoring shows the connection's link group.
	 */
	void (*rmb_rescued)(struct smcr_xconn *xc);

	/*
	 * Has the peer disappeared (process died, link lost)?  Costs a system
	 * call: the engine asks only before it blocks or reports "nothing yet",
	 * and when the readiness fd woke somebody.  Once true, recv_ctrl()
	 * returns -ECONNRESET after the last pending message.
	 */
	bool (*peer_gone)(struct smcr_xconn *xc);

	/*
	 * Doorbell: a pollable fd that turns readable when a control message
	 * arrives (the peer rings) or the peer disappears.
	 *
	 * settle(), after the engine took all pending messages, leaves the fd
	 * readable iff `ready` (something a waiter wants is true now), asks the
	 * peer to ring on its next message, and returns true if a message may
	 * have slipped in meanwhile (the engine then takes messages again).  It
	 * writes the fd only on a change, so an edge-triggered epoll sees a new
	 * edge for each new event, never a storm of edges for an old one.
	 */
	int (*ready_fd)(const struct smcr_xconn *xc);
	bool (*settle)(struct smcr_xconn *xc, bool ready);
	/*
	 * Optional (NULL: settle(false) instead).  Nothing a waiter wants is
	 * true, but nobody is about to wait: ask the peer to ring on its next
	 * message as settle() does (an edge-triggered waiter elsewhere needs
	 * that edge), yet leave the fd readable if it is, a spurious wake-up
	 * that the next settle() clears.  Returns what settle() returns.
	 */
	bool (*settle_lazy)(struct smcr_xconn *xc);

	/*
	 * Optional bounded spin (opt-in): is a control message waiting (no
	 * system call, callable without the connection lock), is the peer on a
	 * CPU right now (not blocked in its engine), and telling the peer the
	 * same about us.
	 */
	bool (*ctrl_pending)(const struct smcr_xconn *xc);
	bool (*peer_running)(const struct smcr_xconn *xc);
	void (*set_sleeping)(struct smcr_xconn *xc, bool sleeping);

	/*
	 * Release everything.  `clean`: the peer already finished with our ring
	 * (it sent closed).  Either way the transport decides whether the memory
	 * may be reused; it is always zeroed first and only ever handed to the
	 * same peer again.
	 */
	void (*destroy)(struct smcr_xconn *xc, bool clean);

	/*
	 * Optional (NULL: never).  Does `xc` live in fork-shared memory
	 * (share.h) and hold nothing a forked child could not use as its own
	 * (its fds and mappings are inherited; shm)?  Then the connection
	 * follows fork: every process that holds it may use it (design §8).
	 */
	bool (*shared)(const struct smcr_xconn *xc);

	/*
	 * In a process that lets go of a connection others still run (a forked
	 * child's private copy, or a holder that closed before the last one):
	 * release this process's copies (mappings, fds) without touching
	 * anything shared: no message, no zeroing, no pooling, and `xc` itself
	 * stays if it is shared.
	 */
	void (*forget)(struct smcr_xconn *xc);
};

extern const struct smcr_transport_ops smcr_shm_ops;

#endif /* SMCR_TRANSPORT_H */
