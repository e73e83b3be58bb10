/* SPDX-License-Identifier: MIT */
/*
 * Between the CLC handshake's files only (engine.h is what the interposer
 * sees).  One concern a file, as the kernel's net/smc splits them:
 *
 *   clc_sock.c   CLC messages over the TCP socket: send, receive exactly one,
 *                peek at the next, Decline (also encoded for the interposer's
 *                screen)
 *   handshake.c  the handshake in steps (struct smcr_handshake): its wait fd
 *                and bound, SO_RCVLOWAT while a message is partial, giving
 *                SMC up when the peer is late; the fallback reasons
 *   connect.c    the client: whether the peer is on this host, Proposal,
 *                the server's answer, Confirm, blocking or in steps
 *   accept.c     the server: classifying the first bytes (on the socket or
 *                in the interposer's screen's buffer), the policy's
 *                answer to a Proposal, Accept or Decline, the client's
 *                Confirm
 *
 * Handshake (protocol.md §3, SMC-Dv2 form as loopback-ism uses):
 *   client: Proposal ->            server: classify (peek), consume Proposal
 *           <- Accept | Decline            transport attaches (shm: rendezvous)
 *           Confirm | Decline ->           active | fallback
 * A Decline at any step leaves both sides on TCP with nothing of CLC left in
 * the stream; a malformed CLC message leaves the stream in an unknown state
 * and is a hard error.  A side that waited in vain for the peer's next
 * message gives SMC up, but not the connection (smcr_hs_give_up()).
 */
#ifndef SMCR_HANDSHAKE_INT_H
#define SMCR_HANDSHAKE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "smcr/clc.h"
#include "smcr/engine.h"
#include "smcr/transport.h"

#define CLC_WAIT_MS 6000          /* Linux CLC_WAIT_TIME (6 s): a TCG guest's kernel needs >2 s */

/*
 * One handshake in steps: the server's between the Accept and the client's
 * last word (engine.h smcr_sock_accept_start/step), the client's between
 * its Proposal and the server's answer (smcr_sock_connect_start).  Nothing
 * here waits for the peer unless the caller asked to: the peer's bytes, the
 * transport's rendezvous and the wait bound drive it (design §4).
 */
struct smcr_handshake {
	bool client;        /* ours is the Proposal: its answer is awaited */
	int tcp_fd;
	const struct smcr_transport_ops *ops;
	struct smcr_xconn *xc;
	int spin_us;
	int64_t deadline;   /* the peer's next message must have come by then (ms) */
	int64_t accept_ns;  /* server: when the Accept went out (debug timing) */
	int64_t t0_ns;      /* client: when the handshake began (debug timing) */
	int wait_ms;        /* client: the CLC wait bound per message */
	int attach_rc;      /* server_attach(): -EAGAIN until it attached or refused */
	uint32_t gave_up;   /* why we gave SMC up at the bound (smcr_hs_give_up()); 0 = not */
	uint32_t peer_size;
	int lowat;          /* SO_RCVLOWAT we set while a message is partial; 0 = none */
	int app_lowat;      /* ... and the one it replaced, put back after */
	int wait_fd;        /* smcr_handshake_fd(): epoll of the three below; -1 = not made */
	int timer_fd;       /* fires at `deadline` */
	int watched_xfd;    /* the transport's server_wait_fd() in wait_fd; -1 = none */
};

/* clc_sock.c */
int smcr_clc_sock_send(int fd, const struct smcr_clc_msg *msg, int64_t deadline);
/* Receive one complete CLC message; anything malformed is a hard error. */
int smcr_clc_sock_recv(int fd, struct smcr_clc_msg *msg, int64_t deadline);
int smcr_clc_sock_decline(int fd, uint32_t reason, int64_t deadline);
/* A Decline from the peer: its reason, or "peer declined" if it gave none usable. */
int smcr_clc_decline_reason(const struct smcr_clc_msg *m);
/*
 * The next CLC message on the stream if it is all there (peeked, not
 * consumed): 1 and *msg, 0 not complete yet (*need: bytes it takes; 0 none in), or
 * -errno (-ESHUTDOWN: the client closed; -EPROTO: not CLC).
 */
int smcr_clc_sock_peek(int fd, struct smcr_clc_msg *msg, int *need);

/* handshake.c */
/* Our ring's size as the options ask, within what a ring may be. */
uint32_t smcr_hs_rmb_size(const struct smcr_transport_ops *ops, const struct smcr_sock_opts *opts);
/* The bound on each CLC message the peer owes (ms). */
int smcr_hs_wait_ms(const struct smcr_sock_opts *opts);
/* Warns that SMC was given up; why the connection goes on is said where it is defined. */
void smcr_hs_log_give_up(int fd, uint32_t reason, int waited_ms);
void smcr_hs_give_up(struct smcr_handshake *hs, uint32_t reason, int waited_ms);
void smcr_hs_set_lowat(struct smcr_handshake *hs, int need);
void smcr_hs_clear_lowat(struct smcr_handshake *hs);

/* connect.c: the client's step and end (smcr_handshake_step()) */
int smcr_hs_client_advance(struct smcr_handshake *hs);
int smcr_hs_client_end(struct smcr_handshake *hs, int rc, struct smcr_sock **out);

/* accept.c: the server's step and end (smcr_handshake_step()) */
int smcr_hs_server_advance(struct smcr_handshake *hs);
int smcr_hs_server_end(struct smcr_handshake *hs, int rc, struct smcr_sock **out);

#endif /* SMCR_HANDSHAKE_INT_H */
