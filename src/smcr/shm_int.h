/* SPDX-License-Identifier: MIT */
/*
 * Between the same-host transport's files only (shm.h and transport.h are
 * what the rest of the engine sees).  One concern a file, as the kernel's
 * net/smc splits them:
 *
 *   shm.c         the transport's ops (smcr_shm_ops): a connection's state,
 *                 its creation and end, a fork child's copy of it
 *   shm_region.c  one region: the sealed memfd (control page + ring), its
 *                 mapping behind a guard page, zeroing before reuse
 *   shm_pool.c    the per-process pool of regions by size class, the cache
 *                 of the peers' mappings, fork
 *   shm_peer.c    the peer processes proven to have sent a proof
 *   shm_rv.c      the rendezvous: abstract UNIX sockets, the proof with its
 *                 memfd and its sender's credentials, the peer's ring mapped
 *                 and ours handed out
 *   shm_clc.c     the CLC hooks: what Proposal, Accept and Confirm carry, and
 *                 the two orders of the rendezvous (knocked, classic)
 *   shm_data.c    the data path: rings, the CDC mailbox, doorbells and the
 *                 readiness fd, the rest of the stream on TCP, spin hints
 *   shm_bell.c    the pipe that replaces a chatty connection's socket doorbell
 *
 * Locks: one.  smcr_shm_pool_lock (shm_pool.c) protects the pool's lists
 * and what a pooled region holds, the list of peer records with each one's
 * `next` and `refs`, and the peer-mapping cache.  Nothing is taken under it;
 * its place in the engine-wide order is in engine.c.  Functions named
 * _locked want it held.  A connection's struct smcr_xconn needs none of
 * ours: the engine serialises the calls on one xconn (transport.h).
 */
#ifndef SMCR_SHM_INT_H
#define SMCR_SHM_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "smcr/rendezvous.h"
#include "smcr/share.h"
#include "smcr/shm.h"
#include "smcr/transport.h"

#define SHM_CTRL_LEN 4096u
#define SHM_CDC_WORDS (SMCR_CDC_MSG_LEN / 4)
#define SHM_MAX_CLASS 15u      /* 512 MiB */
#define SHM_ACCEPT_ATTEMPTS 4  /* strangers that may knock before we give up */
#define SHM_SECRET_LEN SMCR_RV_SECRET_LEN
/* The owner reads `tcp_tail` and takes the rest of the stream from TCP. */
#define SHM_FEAT_TCP_TAIL 1u
/* The owner takes a pipe its peer offers as its doorbell (shm_bell.c). */
#define SHM_FEAT_PIPE_BELL 2u

_Static_assert(SMCR_CDC_MSG_LEN % 4 == 0, "CDC mailbox copies 32-bit words");

/*
 * The page the peer writes into (a region's first, shm_region.c); every
 * field here is untrusted input.
 */
struct shm_ctrl {
	uint32_t magic;     /* set by the owner, informational */
	uint32_t ring_size; /* set by the owner, informational */
	_Atomic uint32_t sleeping; /* owner: blocked in a wait (peer: do not spin) */
	_Atomic uint32_t cpu;      /* owner: the CPU it last ran on, + 1 (0: unknown) */
	_Atomic uint32_t features; /* owner: SHM_FEAT_* it understands (0 in older versions) */
	_Atomic uint32_t tcp_tail; /* peer: 1 = the rest of its stream is on TCP (tcp_tail.c) */
	_Atomic uint32_t bell_pipe; /* owner: 1 = ring me on the pipe you offered (shm_bell.c) */
	uint8_t pad0[36];
	_Atomic uint32_t armed; /* owner: 1 = ring me; peer: swaps to 0, then rings */
	uint8_t pad1[60];
	_Atomic uint32_t seq;   /* mailbox seqlock: odd while the peer writes */
	_Atomic uint32_t cdc[SHM_CDC_WORDS];
};
_Static_assert(sizeof(struct shm_ctrl) <= SHM_CTRL_LEN, "control area fits its page");
_Static_assert(offsetof(struct shm_ctrl, armed) == 64, "armed has its own cache line");
_Static_assert(offsetof(struct shm_ctrl, features) == 16 && offsetof(struct shm_ctrl, bell_pipe) == 24,
	       "the words a peer reads stay where older versions put them");

/*
 * One of our regions.  While it is pooled, smcr_shm_pool_lock protects it;
 * while a connection uses it, it is that connection's.
 */
struct shm_region {
	struct shm_region *next; /* the pool's list of its size class */
	int fd;
	uint8_t *base;     /* ctrl page + ring; a guard page follows */
	size_t map_len;    /* including the guard page */
	uint32_t ring_size;
	struct shm_peer *owner; /* NULL: never shared; else the one peer that may have it */
	bool draining;     /* the peer may still write: not zeroed yet */
	uint32_t dirty;    /* ring bytes from offset 0 the peer may have written */
};

/*
 * A peer process, proven (design §7): the process that sent a peer's proof
 * is the one holding `pidfd`.  A pid alone proves nothing: SO_PEERCRED and
 * SCM_CREDENTIALS report the number a process had when it connected or
 * sent, and that number may belong to another process by the time we look.
 * So we open a pidfd for the number and read that process's start time: if
 * it started before our end of the rendezvous socket existed (so before the
 * proof could be sent) and is still alive after we read it, it held the
 * number all along and is the sender.  While its pidfd says it lives, no
 * other process can have its number: a later proof from that number is then
 * from it too.  `next` and `refs` are under smcr_shm_pool_lock; `pid`,
 * `uid`, `pidfd` and `started_by_ns` never change; `dead` only ever turns
 * true, set by whoever polls the pidfd readable (shm_peer.c peer_alive).
 */
struct shm_peer {
	struct shm_peer *next;
	pid_t pid;
	uid_t uid;
	int pidfd;
	int64_t started_by_ns; /* CLOCK_BOOTTIME: it had started by then */
	unsigned refs;         /* regions it owns + connections that proved it */
	bool dead;
};

/* One connection's transport state; in fork-shared memory if it could be (shm.c). */
struct smcr_xconn {
	int timeout_ms;
	uint32_t want_size;
	struct shm_region *own;
	struct shm_ctrl *own_ctrl;
	/* the peer's region, mapped */
	uint8_t *peer_base;
	size_t peer_map_len;
	uint32_t peer_ring_size;
	struct shm_ctrl *peer_ctrl;
	int own_efd; /* private: "still ready" while nothing new came (never shared) */
	int ep_fd;   /* readiness: own_efd + unix_fd */
	int unix_fd; /* connected to the peer for the connection's life; its doorbell */
	/* The pipe doorbells (shm_bell.c); -1 while a ring goes over unix_fd. */
	int bell_wr;   /* ours: rings the peer once it took the pipe's read end */
	int bell_keep; /* ours: that pipe's read end, so a write never raises SIGPIPE */
	int bell_rd;   /* the peer's pipe, reopened: rings for us */
	unsigned bell_gen;     /* smcr_shm_fork_gen when the connection was made */
	unsigned socket_rings; /* rings sent over unix_fd: a chatty connection offers a pipe */
	bool bell_offered;     /* we offered ours (once) */
	bool socket_stray;     /* unix_fd holds a ring sent before the peer saw our pipe */
	int rv_fd;   /* rendezvous listener during the handshake (client or server) */
	int knock_fd; /* server, classic order: a knock whose proof has not come yet */
	int spare_fd; /* server, knocked order: a free slot kept for the client's memfd */
	unsigned knocks; /* ... and how many there were */
	uint8_t own_secret[SHM_SECRET_LEN];
	uint8_t peer_secret[SHM_SECRET_LEN];
	pid_t peer_pid;      /* announced (server) or from SO_PEERCRED (client) */
	struct shm_peer *peer; /* the process proven to have sent the peer's proof */
	int64_t rv_since_ns; /* CLOCK_BOOTTIME before our rendezvous socket existed */
	uint64_t token;      /* the server's token (its rendezvous name in the classic order) */
	uint64_t rv_token;   /* client: our own rendezvous name, offered in the Proposal */
	uint64_t rv_bound;   /* the name rv_fd is bound to */
	bool rv_in_dir;      /* rendezvous names are in SMCR_RUNDIR (smcr_rundir_for_peer) */
	uint32_t tx_seq;     /* our mailbox writes into the peer's page */
	uint32_t rx_seq;     /* last mailbox seq we consumed */
	uint32_t rx_dirty;   /* our ring: bytes from 0 the peer's cursors covered */
	dev_t peer_dev;      /* the peer's memfd, for the mapping cache */
	ino_t peer_ino;
	bool peer_gone;
	bool signalled;      /* own_efd has a count (we wrote it) */
	/*
	 * Rings unix_fd holds or is about to get: one per swap of `armed` we
	 * saw since the last drain (take_rings).  -1: the drain may have taken
	 * the ring of a swap we had not seen yet.  While it is above 0 the
	 * socket keeps the ready fd readable; at 0 or below only own_efd can.
	 */
	int rings_due;
	bool in_share;       /* allocated from a share arena (follows fork) */
};
_Static_assert(sizeof(struct smcr_xconn) <= SMCR_SHARE_SLOT_SIZE, "fits a share slot");

/* shm_region.c */
/* Map ctrl+ring of `fd` shared, behind which a guard page stays unmapped. */
uint8_t *smcr_shm_map_with_guard(int fd, uint32_t ring_size, size_t *map_len);
/* A new region with a ring of `ring_size` bytes, or NULL. */
struct shm_region *smcr_shm_region_create(uint32_t ring_size);
/* Unmap, close, and drop the owner's reference (smcr_shm_pool_lock held). */
void smcr_shm_region_free_locked(struct shm_region *r);
void smcr_shm_region_free(struct shm_region *r);
/* Has the peer that shared `r` finished with it (its last CDC said so)? */
bool smcr_shm_region_peer_finished(struct shm_region *r);
/* Zero the control page and what the peer may have written of the ring. */
void smcr_shm_region_zero(struct shm_region *r);

/* shm_pool.c */
extern pthread_mutex_t smcr_shm_pool_lock;
/* The size class of a ring of `size` bytes. */
unsigned smcr_shm_size_class(uint32_t size);
/* A region for `peer` (NULL: a process not proven) from the pool, else a new one. */
struct shm_region *smcr_shm_region_get(uint32_t ring_size, struct shm_peer *peer);
/* Back to the pool, owned by `peer`, or destroyed. */
void smcr_shm_region_put(struct shm_region *r, bool peer_done, struct shm_peer *peer);
/* The cached mapping of the peer's memfd (dev, ino), taken out of the cache, or NULL. */
uint8_t *smcr_shm_peer_map_get(dev_t dev, ino_t ino, uint32_t ring_size, size_t *len);
/* xc's mapping of the peer's ring into the cache (or unmapped). */
void smcr_shm_peer_map_put(struct smcr_xconn *xc);

/* shm_peer.c */
/* CLOCK_BOOTTIME in ns: the clock of shm_peer.started_by_ns and rv_since_ns. */
int64_t smcr_shm_boottime_ns(void);
void smcr_shm_peer_unref_locked(struct shm_peer *p);
void smcr_shm_peer_unref(struct shm_peer *p);
/* The live record we have for (pid, uid), a reference, or NULL. */
struct shm_peer *smcr_shm_peer_known_alive(pid_t pid, uid_t uid);
/* The process that sent a proof as (pid, uid) after `since_ns` (a reference), or NULL. */
struct shm_peer *smcr_shm_peer_prove(pid_t pid, uid_t uid, int64_t since_ns);
/*
 * Is the process behind a rendezvous socket (its SO_PEERCRED `cred`) the one
 * whose Proposal announced `announced`, its pid in its own pid namespace?
 */
struct ucred;
bool smcr_shm_cred_is_proposer(const struct ucred *cred, pid_t announced);

/* shm_bell.c */
/* Incremented in both processes at every fork: a connection older than it may be shared. */
extern unsigned smcr_shm_fork_gen;
/* Ring the peer through the pipe it took from us: true if rung. */
bool smcr_shm_bell_ring(struct smcr_xconn *xc);
/* Offer the peer a pipe as its doorbell, in place of a ring on unix_fd: true if sent. */
bool smcr_shm_bell_offer(struct smcr_xconn *xc);
/* Should drains look for the peer's offer (control buffers needed)? */
bool smcr_shm_bell_expected(const struct smcr_xconn *xc);
/* The fds that came with one ring on unix_fd: the peer's offer, or closed. */
void smcr_shm_bell_take(struct smcr_xconn *xc, const void *control, size_t len);
/* Take the rings off our pipe: how many (0 none), -1 the peer hung up. */
int smcr_shm_bell_drain(struct smcr_xconn *xc);
/* Close this process's copies of the pipe fds. */
void smcr_shm_bell_close(struct smcr_xconn *xc);

/* shm_rv.c */
int smcr_shm_rv_passcred(int fd);
/* Our rendezvous listener, abstract or in SMCR_RUNDIR (xc->rv_in_dir): 0 or -errno. */
int smcr_shm_rv_listen(struct smcr_xconn *xc, uint64_t *token);
/* Connect `sock` to the rendezvous `token` where xc's are: 0 or -1 with errno. */
int smcr_shm_rv_connect(const struct smcr_xconn *xc, int sock, uint64_t token);
/* Close our rendezvous listener; its name in SMCR_RUNDIR goes with it. */
void smcr_shm_rv_close(struct smcr_xconn *xc);
/* The decline reason for a system call that failed with `err`. */
int smcr_shm_shortage_reason(int err);
int smcr_shm_send_proof(int sock, const uint8_t secret[SHM_SECRET_LEN], uint32_t ring_size,
			int memfd);
bool smcr_shm_secret_equal(const uint8_t *a, const uint8_t *b);
int smcr_shm_take_proof(struct smcr_xconn *xc, int sock, int64_t deadline, uint32_t size);
int smcr_shm_make_ready_fd(struct smcr_xconn *xc);
int smcr_shm_own_region(struct smcr_xconn *xc, struct shm_peer *peer);

/* shm_clc.c: the handshake hooks of smcr_shm_ops (transport.h says what each does). */
int smcr_shm_client_propose(struct smcr_xconn *xc, struct smcr_clc_msg *prop);
int smcr_shm_server_accept(struct smcr_xconn *xc, const struct smcr_clc_msg *prop,
			   struct smcr_clc_msg *acc);
int smcr_shm_client_attach(struct smcr_xconn *xc, const struct smcr_clc_msg *acc,
			   struct smcr_clc_msg *conf, uint32_t *peer_ring_size);
int smcr_shm_server_attach(struct smcr_xconn *xc, int tcp_fd, uint32_t *peer_ring_size);
int smcr_shm_server_wait_fd(const struct smcr_xconn *xc);
int smcr_shm_server_confirm(struct smcr_xconn *xc, const struct smcr_clc_msg *conf);

/* shm_data.c: the data path's ops of smcr_shm_ops (transport.h). */
void smcr_shm_tokens(const struct smcr_xconn *xc, uint32_t *local, uint32_t *peer);
void smcr_shm_ring(struct smcr_xconn *xc, uint8_t **ring, uint32_t *size);
int smcr_shm_write_peer(struct smcr_xconn *xc, uint32_t offset, const void *src, uint32_t len);
int smcr_shm_read_peer(const struct smcr_xconn *xc, uint32_t offset, void *dst, uint32_t len);
int smcr_shm_continue_on_tcp(struct smcr_xconn *xc, int tcp_fd);
bool smcr_shm_peer_on_tcp(const struct smcr_xconn *xc);
int smcr_shm_watch_tcp(struct smcr_xconn *xc, int tcp_fd, bool out);
int smcr_shm_send_ctrl(struct smcr_xconn *xc, const uint8_t msg[SMCR_CDC_MSG_LEN]);
int smcr_shm_recv_ctrl(struct smcr_xconn *xc, uint8_t msg[SMCR_CDC_MSG_LEN]);
bool smcr_shm_peer_gone(struct smcr_xconn *xc);
int smcr_shm_ready_fd(const struct smcr_xconn *xc);
bool smcr_shm_settle(struct smcr_xconn *xc, bool ready);
bool smcr_shm_settle_lazy(struct smcr_xconn *xc);
bool smcr_shm_ctrl_pending(const struct smcr_xconn *xc);
bool smcr_shm_peer_running(const struct smcr_xconn *xc);
void smcr_shm_set_sleeping(struct smcr_xconn *xc, bool sleeping);

#endif /* SMCR_SHM_INT_H */
