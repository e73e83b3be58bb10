/* SPDX-License-Identifier: MIT */
/*
 * SMC-R link groups in user space (protocol.md §3.1, §3.2, §7.5).
 *
 * A link group is what one process shares with one peer process: a device
 * context and protection domain, one CQ pair (the receive CQ on the
 * completion channel everyone sleeps on, the send CQ on one only wr.c's own
 * waits poll), one RC QP (its first link), the LLC state of that link and a pool of
 * registered buffers, and maybe a second link (see "Second link" below).  The first connection between the two processes
 * creates it (CLC first contact, then LLC CONFIRM LINK); later ones reuse it:
 * no second QP, no second registration of a buffer already in the pool.
 *
 * Identity, as the kernel's smcr_lgr_match(): the peer's CLC peer id (a
 * per-process instance number + MAC; a forked child draws a new instance),
 * the peer's GID, our GID, and our role (client and server groups are kept
 * apart, as in the kernel).  The server decides first contact; a client told
 * "reuse" must find the group by the server's QP number, else it declines
 * with SYNCERR.
 *
 * Those fields are only what the peer claims: anyone who learnt them could
 * be put on a group built with someone else, and one bogus rkey or SYNCERR
 * on it would end every connection the group carries.  So a group is also
 * bound to what the peer proved: the TCP peer address of the connection
 * that built it (the three-way handshake shows the peer receives there),
 * and a first contact's peer GID must be that address (verbs.c declines
 * GIDNOTPEER otherwise).  A later connection joins only if its own TCP peer
 * address is one the group's peer proved: that first address, or the GID
 * of the group's second link, which the peer announced over the group's own
 * link (smcr_lgr_match).  A connection from anywhere else gets a group of
 * its own, or, as a client told "reuse", declines with SYNCERR.
 *
 * Demultiplexing: every received message is copied out of its receive slot
 * the moment its completion is taken (wr.c's rx handler) and the slot is
 * re-posted.  A CDC goes into the queue of the connection whose alert token
 * it carries, and that connection's doorbell (an eventfd in its own epoll
 * set, its kernel-visible readiness) is rung; LLC messages are handled for
 * the group.  Any thread that takes completions, for whichever connection,
 * dispatches for all of them, so no wake-up is lost or stolen: the channel
 * fd is in every connection's epoll set, and whoever it wakes hands each
 * message to its owner.  A connection's queue is bounded; when full, a new
 * CDC is merged into the last one (cursors are cumulative, flags ORed), so a
 * connection nobody reads never holds the link's receive slots.
 *
 * Locking: one mutex per group (smcr_lgr.mu) around every wr.c call and
 * all group state, and one for the list of groups; lgr_int.h says what each
 * protects, engine.c gives the order.  Blocking waits (CONFIRM LINK,
 * send-queue room) run with the group mutex held only inside wr.c's bounded
 * waits, which keep re-posting receive slots as they poll.
 *
 * Lifetime: a group with no connection left is kept for reuse for an idle
 * time (SMCR_LGR_IDLE_MS, 5 s; smcr_lgr_set_idle_ms() for tests), then LLC
 * DELETE LINK (all, orderly) goes to the peer and the QP, CQs, buffers and
 * device context are freed.  A failed group (QP error, device event, the
 * peer's DELETE LINK, a protocol violation) resets every connection on it
 * and is never matched again.  See lgr_worker.c for the worker thread.
 *
 * Second link (SMC-Rv2, lgr_llc.c), both roles as the kernel's
 * smc_llc_srv_add_link() / smc_llc_cli_add_link():
 *   server  at first contact, if another RDMA device of ours has an address in
 *           the subnet of the group's own (and the kernel's PNET table, if it
 *           names our device, gives it the same PNET id: smcr_ib_port_open_
 *           subnet) and the client offered max_links 2, the device is reserved
 *           and the Accept offers max_links 2 (else 1, as a Linux client told 2
 *           waits 2 s for an ADD LINK).  Once the first link is confirmed: a
 *           QP on it, every buffer of the group registered on its PD, ADD LINK
 *           (the new link's MAC/GID/QPN/PSN/MTU, its link number, the v2
 *           extension and our rkey list) over the first link; the client's
 *           answer (its rkeys on the new link kept for failover, as the
 *           kernel's smc_llc_save_add_link_rkeys(); one too long to keep,
 *           more than 11 RMBs, is taken by its head, and those RMBs'
 *           connections cannot move) brings the QP to RTS, CONFIRM LINK goes
 *           out on the new QP and its answer makes the link UP.  A reject, or no
 *           answer within SMCR_LGR_LLC_WAIT_MS (CONFIRM LINK: _FIRST_WAIT_MS,
 *           then DELETE LINK of that link), leaves the group single-link.
 *           Later connections go on the link with fewer connections.
 *   client  a Linux (or smcr) server sends ADD LINK after the first CONFIRM
 *           LINK.  If routing reaches its new GID from an address on another
 *           RDMA device of ours (smcr_ib_port_open_alt) we open it, create a
 *           QP towards the server's new one, register every RMB (remote write
 *           only) and send buffer of the group on its PD, answer with our
 *           rkeys for it, and answer the CONFIRM LINK that follows on the new
 *           QP; otherwise we reject it (no second device of ours reaches it).
 * Completions of both links are taken together (the group's channel fd is
 * an epoll fd holding both completion channels) and LLC requests are
 * answered on the link they came on.  A connection uses the link the server
 * named in CLC (a reused group's Accept may name the second link's QP), with
 * the rkeys that CLC exchange carried, so both ends always write with an
 * rkey valid on that link.
 *
 * Failover (both roles, either link failing; the kernel's smcr_link_down(),
 * smc_switch_conns() and, as a server, smc_llc_process_srv_delete_link()):
 * its device removed, its QP in error (a failed completion or post, an
 * async event), or the peer's DELETE LINK naming it.  The second link
 * failing: every connection on it moves to the first
 * (smcr_lgr_alt_down_locked).  The first link failing while the second is
 * up: the second becomes the group's first (lgr_failover.c swaps them in
 * everything that names a link by index: the group's device, QP, link id
 * and identity GIDs, every buffer's registration, the peer's rkeys, each
 * connection's link), and the old first link then goes down as a second
 * link would (smcr_lgr_first_down_locked); without a second link up the
 * group ends.  A moved connection remembers its last CDC whose completion
 * came in (the CDCs of each connection are kept by work request number,
 * smcr_lgr_conn.sent), its doorbell rings, and in its next engine call the
 * engine resends (conn.c: a validation CDC naming that CDC's seqno, the ring
 * bytes written since, still in place in the mirror, WRITten again through
 * the peer's rkey for the same RMB on the link left, then a CDC with the
 * current cursors).  A validation that comes in while both links are polled
 * waits until both are (the CDCs the peer completed on the link it left
 * come first).  The peer's rkeys per link (smcr_lgr.rtok) come from
 * CLC, the ADD LINK rkey list (the server's request, the client's answer)
 * and CONFIRM RKEY, and go with DELETE RKEY; a connection whose twin on the
 * link left is unknown resets.  Then the link is dropped and the peer told.
 * Found by us: DELETE LINK of that link (orderly, "lost path") on the other
 * link, in either role (the client's smcr_link_down(), the server's
 * smc_llc_srv_delete_link_local() make the same message).  Asked by the
 * peer: a client answers (reason 0); a server sends the request back to
 * the client, which answers it (we drop DELETE LINK answers).  A client
 * answers the server's echo of its own DELETE LINK with "no such link", as
 * the kernel's client does; a server ignores a client's DELETE LINK of a
 * link it dropped already, as the kernel's server does.  The group goes on
 * with one link, and later connections go on it; the peer still finds the
 * group by its peer id (one per process, whichever device) and the GIDs of
 * the link left.  A server's group then adds a second link again
 * (lgr_readd.c), as the kernel's: at once, and again when an RDMA device
 * appears (`rdma link add`), a few attempts each; a client answers that ADD
 * LINK as the first one (it does not ask for one itself: the kernel's
 * REQ ADD LINK is not sent).  Not built: a second link on the same device
 * (the kernel's SMC_LGR_ASYMMETRIC_LOCAL).  SMC-Rv1 is not spoken
 * by the verbs transport at all; a v2.0 peer (no max_links in CLC) gets one
 * link.
 */
#ifndef SMCR_LGR_H
#define SMCR_LGR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smcr/clc.h"
#include "smcr/ib.h"
#include "smcr/wr.h"

#define SMCR_LGR_CONN_QLEN   32u
#define SMCR_LGR_LLC_QLEN    16u
/*
 * LLC messages are kept up to this length (an ADD LINK v2 with 11 rkey
 * triples); the rest of a longer one is cut: its flow needs only the header.
 */
#define SMCR_LGR_LLC_MSG_MAX 256u
#define SMCR_LGR_VQ_LEN      8u
#define SMCR_LGR_IDLE_MS     5000
#define SMCR_LGR_KEEPALIVE_MS 30000 /* kernel: net.smc.smcr_testlink_time */
#define SMCR_LGR_LLC_WAIT_MS 2000   /* kernel: SMC_LLC_WAIT_TIME */
#define SMCR_LGR_LLC_FIRST_WAIT_MS 5000 /* kernel: SMC_LLC_WAIT_FIRST_TIME (CONFIRM LINK) */
/*
 * A group no application thread took completions from for this long is
 * watched by the worker thread (lgr_worker.c): it sleeps on the group's channel fd
 * and answers LLC requests as they come (a Linux peer's TEST LINK or CONFIRM
 * RKEY wants its answer within SMC_LLC_WAIT_TIME, else it takes the link
 * down).  Shorter, and the worker would wake with the application's threads
 * for data completions; the longest an LLC request waits while an
 * application thread is busy elsewhere.
 */
#define SMCR_LGR_LLC_WATCH_MS 250
#define SMCR_LGR_MAX_CONNS   255

enum smcr_lgr_role { SMCR_LGR_CLIENT = 0, SMCR_LGR_SERVER = 1 };

struct smcr_lgr_key {
	uint8_t peer_id[SMCR_CLC_PEER_ID_LEN];
	uint8_t peer_gid[SMCR_IB_GID_LEN];
	uint8_t local_gid[SMCR_IB_GID_LEN];
	enum smcr_lgr_role role;
	/*
	 * The TCP connection's peer address in GID form (IPv6; IPv4 mapped, so
	 * both socket families give the same bytes, smcr_ib_addr_gid): proven,
	 * unlike the fields above.  A group's is its first contact's.
	 */
	uint8_t peer_addr[SMCR_IB_GID_LEN];
};

/* A registered buffer of the group's pool: an RMB or a send buffer. */
struct smcr_lgr_buf {
	struct smcr_lgr_buf *next;
	struct smcr_lgr_buf *all_next; /* every buffer of the group, whatever its state */
	uint8_t *mem;
	uint32_t size;
	bool rmb;          /* LOCAL_WRITE|REMOTE_WRITE; else a local-only WRITE source */
	bool fresh;        /* registered by this get: the peer has not seen its rkey yet */
	struct ibv_mr *mr;
	uint64_t iova;     /* RMB: how the peer addresses it */
	uint32_t retire_token; /* retiring: the token its connection had */
	struct ibv_mr *mr_alt; /* the same memory on the second link's PD, or NULL */
	uint64_t iova_alt;     /* RMB: how the peer addresses it over the second link */
};

/* A CDC posted on a link: its send-queue work request, seqno, producer cursor. */
struct smcr_lgr_cdc_sent {
	uint64_t wr;
	uint16_t seqno;
	uint16_t prod_wrap;
	uint32_t prod_count;
};
/* more than the send queue's message slots: the newest completed one is always kept */
#define SMCR_LGR_CONN_SENT (2u * SMCR_WR_SEND_SLOTS)

/* One connection's endpoint on a group (inside verbs.c's xconn). */
struct smcr_lgr_conn {
	struct smcr_lgr_conn *next;
	uint32_t token;    /* our alert token, unique in the group */
	uint8_t link;      /* 0: the first link, 1: the second (the peer named its QP in CLC) */
	int efd;           /* doorbell: readable iff ready, messages queued or group dead */
	bool efd_set;
	bool ready;        /* what the engine last settled */
	uint32_t qhead, qcount;
	uint64_t merged;   /* CDCs merged into their predecessor (queue full) */
	uint64_t delivered; /* CDCs queued for it so far (smcr_lgr_dead_check) */
	uint64_t last_wr;  /* our last send-queue work request (smcr_wr_last_posted) */
	uint64_t hup_probe; /* TCP hung up: the TEST LINK sent after it (0 = none) */
	uint8_t q[SMCR_LGR_CONN_QLEN][SMCR_WR_MSG_LEN];
	/*
	 * Failover (see "Failover" above): the CDCs posted on c's link whose
	 * completion may not be in yet (seqno and producer cursor by work request),
	 * and, once its link went down, what the last completed one said.
	 */
	struct smcr_lgr_cdc_sent sent[SMCR_LGR_CONN_SENT];
	uint32_t nsent;    /* entries, newest at (nsent - 1) % SMCR_LGR_CONN_SENT */
	bool switched;     /* moved: the engine must resend (stored atomically, read lock-free) */
	struct smcr_lgr_cdc_sent fin; /* the last CDC known delivered (wr 0: none yet) */
	uint32_t peer_rkey; /* the peer's RMB on c's link (CLC; after a move, its twin; 0: none) */
	uint64_t peer_addr;
};

enum smcr_lgr_link_state {
	SMCR_LGR_LINK_NONE = 0,
	SMCR_LGR_LINK_ADDING,  /* server: device reserved; ADD LINK sent (since_ms), no answer yet */
	SMCR_LGR_LINK_PENDING, /* ADD LINK answered, CONFIRM LINK not yet */
	SMCR_LGR_LINK_UP,
};

/* The second link: its own device context and PD, QP, CQs and channel. */
struct smcr_lgr_alt {
	enum smcr_lgr_link_state state;
	struct smcr_ib_port *port;
	struct smcr_wr_link *link;
	uint32_t peer_qpn;
	uint8_t peer_gid[SMCR_IB_GID_LEN]; /* the server's new GID (a reused group's Accept names it) */
	uint8_t link_num;  /* the server's link id */
	int64_t since_ms;  /* server: ADD LINK / CONFIRM LINK sent then (their answer's deadline) */
};

enum smcr_lgr_state {
	SMCR_LGR_PENDING = 0, /* first contact: QP set up, CONFIRM LINK not done */
	SMCR_LGR_ACTIVE,
	SMCR_LGR_DEAD,        /* failed or deleted: resets its connections, never matched */
};

struct smcr_lgr {
	struct smcr_lgr *next_lgr; /* the process's list (protected by smcr_lgrs.mu, lgr_int.h) */
	pthread_mutex_t mu;         /* protects all below and every wr.c call on its links */
	uint32_t id;
	struct smcr_lgr_key key;
	enum smcr_lgr_state state;
	unsigned refs;             /* connections (and handshakes) holding it */
	int64_t idle_since_ms;     /* refs dropped to 0 then; 0 = in use */
	struct smcr_ib_port *port; /* own device context + PD */
	/*
	 * port's async event fd and removal fd (-1: none): the engine's
	 * connections poll them without the mutex (smcr_lgr_device_fds), and
	 * failover may change port under them.
	 */
	int dev_fd[2];
	struct smcr_wr_link *link;
	uint32_t peer_qpn;
	uint8_t max_conns;         /* negotiated in CLC (v2.1; SMCR_LGR_MAX_CONNS otherwise) */
	uint8_t max_links;         /* negotiated in CLC, for CONFIRM LINK */
	bool connected;            /* QP in RTS */
	bool confirm_seen;         /* CONFIRM LINK received (maybe not yet handled) */
	struct smcr_lgr_conn *conns;
	unsigned nconns;
	struct smcr_lgr_alt alt;   /* second link, if any */
	int epfd;                  /* the links' completion channels (smcr_lgr_channel_fd) */
	uint8_t link_num;          /* first link's id (the server's CONFIRM LINK) */
	struct smcr_lgr_buf *all_bufs;
	struct smcr_lgr_buf *free_bufs;
	struct smcr_lgr_buf *retiring; /* RMBs whose peer has not said "closed" yet */
	unsigned nbufs;            /* registered, in use or free */
	/* LLC */
	uint8_t llc_q[SMCR_LGR_LLC_QLEN][SMCR_LGR_LLC_MSG_MAX];
	uint32_t llc_len[SMCR_LGR_LLC_QLEN]; /* as received (may exceed what is kept) */
	uint8_t llc_link[SMCR_LGR_LLC_QLEN]; /* the link it came on */
	uint32_t llc_qhead, llc_qcount;
	/*
	 * Failover validations taken while smcr_lgr_poll_locked polls both
	 * links: handed to their connections once both are polled, after the
	 * CDCs the peer completed on the link it left (see lgr_link.c).
	 */
	bool polling;
	uint8_t vq[SMCR_LGR_VQ_LEN][SMCR_WR_MSG_LEN];
	unsigned nvq;
	int64_t last_rx_ms;        /* any message received (keepalive) */
	int64_t last_drain_ms;     /* completions last taken by an application thread */
	bool watched;              /* the worker sleeps on its channel (lgr_worker.c): kick it for LLC */
	int64_t testlink_sent_ms;  /* our TEST LINK request outstanding since; 0 = none */
	bool peer_deleted;         /* the peer sent DELETE LINK */
	uint64_t probes_sent;      /* TEST LINK requests; responses come in order */
	uint64_t probes_answered;
	char why[96];              /* why it died */
	uint64_t stat_cdc_dropped; /* CDCs for no known token */
	/* the peer's RMBs on each link (failover: a connection's twin on the other link) */
	struct smcr_lgr_rtoken *rtok;
	unsigned nrtok, rtok_cap;
	uint64_t stat_link_switches; /* connections moved by failover */
	uint64_t stat_rmb_rescues;   /* unread bytes held aside for a silent peer (rx.c) */
	uint64_t rkey_confirms_sent, rkey_confirms_answered; /* our CONFIRM RKEY requests */
	/* server: adding a second link again (lgr_readd.c): attempts left, the next one's time */
	uint8_t readd_left;
	int64_t readd_at_ms, readd_gap_ms;
	unsigned devs_seen;        /* smcr_lgrs.devs_added when it last looked (list mutex) */
	struct smcr_stats_lgr *stats; /* its record for smcr-stat linkgroup, or NULL */
};

/* One RMB of the peer: its rkey and address on link 0 and link 1 (bit per link: known). */
struct smcr_lgr_rtoken {
	uint32_t rkey[2];
	uint64_t vaddr[2];
	uint8_t has_rkey, has_vaddr;
};

/*
 * Our CLC peer id: this process's instance (fresh after fork) + the MAC of the
 * first device it was called with (`mac` then; the same for every device).
 */
void smcr_lgr_peer_id(const uint8_t mac[SMCR_IB_MAC_LEN], uint8_t out[SMCR_CLC_PEER_ID_LEN]);

/*
 * An ACTIVE group for `key` (and, if peer_qpn != 0, one of whose links
 * reaches that peer QP) with room for one more connection, referenced; NULL
 * if none.
 */
struct smcr_lgr *smcr_lgr_find(const struct smcr_lgr_key *key, uint32_t peer_qpn);
/*
 * Would a connection with `key` (a client's: whose Accept named `peer_qpn`;
 * a server's: 0) go on group g?  The claimed fields as the kernel compares
 * them, and its TCP peer address one that g's peer proved (see "Identity"
 * above).  g's state and room are not looked at.  Group mutex held.
 */
bool smcr_lgr_match(const struct smcr_lgr *g, const struct smcr_lgr_key *key, uint32_t peer_qpn);
/* A live group on `local_gid` knows its device: its MAC, and true (no device scan needed). */
bool smcr_lgr_local_mac(const uint8_t local_gid[SMCR_IB_GID_LEN], uint8_t mac[SMCR_IB_MAC_LEN]);
/*
 * A new PENDING group on `*port` (taken over: *port becomes NULL), its QP in
 * INIT with receives posted, referenced.  `*link`, if not NULL, is that QP
 * made ahead on the same port (a client makes it while the Accept is on its
 * way: verbs.c), taken over likewise; else one is made now.  0 or -errno.
 */
int smcr_lgr_create(const struct smcr_lgr_key *key, struct smcr_ib_port **port,
		    struct smcr_wr_link **link, struct smcr_lgr **out);
/* Drop a reference; the last one starts the idle timer. */
void smcr_lgr_put(struct smcr_lgr *lgr);

/* First contact: the QP to RTS towards the peer.  0 or -errno. */
int smcr_lgr_connect(struct smcr_lgr *lgr, const struct smcr_ib_qp_info *peer);
/*
 * Server, first contact: send CONFIRM LINK.  The group turns ACTIVE when the
 * response has been taken (by whichever call takes completions).  0 or -errno.
 */
int smcr_lgr_confirm_link_send(struct smcr_lgr *lgr, int timeout_ms);
/* Client, first contact: wait for the server's CONFIRM LINK (answered).  0 or -errno. */
int smcr_lgr_await_active(struct smcr_lgr *lgr, int timeout_ms);

/* Join / leave: a unique alert token and a doorbell.  0 or -errno. */
int smcr_lgr_conn_add(struct smcr_lgr *lgr, struct smcr_lgr_conn *c);
/* Reuse as a client: c uses the link that reaches the peer QP and GID the Accept named. */
void smcr_lgr_conn_bind(struct smcr_lgr *lgr, struct smcr_lgr_conn *c, uint32_t peer_qpn,
			const uint8_t peer_gid[SMCR_IB_GID_LEN]);
/*
 * What CLC tells the peer for c: its link's QP, GID, MAC, PSN, MTU, and
 * rmb's rkey and address on that link.
 */
void smcr_lgr_conn_info(struct smcr_lgr *lgr, const struct smcr_lgr_conn *c,
			const struct smcr_lgr_buf *rmb, struct smcr_ib_qp_info *own,
			uint32_t *rkey, uint64_t *addr);
/*
 * Server, reused group: c goes on the link with fewer connections (the
 * second only once it is up), as the kernel balances in smc_conn_create();
 * the Accept then names that link's QP.
 */
void smcr_lgr_conn_assign(struct smcr_lgr *lgr, struct smcr_lgr_conn *c);
/* The peer's QP number on c's link (its Confirm must name it). */
uint32_t smcr_lgr_conn_peer_qpn(struct smcr_lgr *lgr, const struct smcr_lgr_conn *c);
/*
 * Server, first contact: reserve a second device for the group if one has an
 * address in the subnet of the first link's (smcr_ib_port_open_subnet); the
 * Accept then offers max_links 2 and, once the first link is confirmed, ADD
 * LINK goes out (lgr_llc.c).  0, or -errno: no second link.
 */
int smcr_lgr_alt_reserve(struct smcr_lgr *lgr);
/* Stats: the QP number and device name (into dev[len]) of c's link. */
uint32_t smcr_lgr_conn_qpn(struct smcr_lgr *lgr, const struct smcr_lgr_conn *c, char *dev,
			   size_t len);
void smcr_lgr_conn_del(struct smcr_lgr *lgr, struct smcr_lgr_conn *c);
/* The peer's RMB for c as CLC named it (rkey and address on c's link). */
void smcr_lgr_peer_rmb(struct smcr_lgr *lgr, struct smcr_lgr_conn *c, uint32_t rkey,
		       uint64_t addr);
/*
 * Failover: has c moved to another link since the last call?  1: yes, *fin
 * is its last CDC known delivered on the old one (wr 0: none), *rkey and
 * *addr the peer's RMB on the new one; 0: no; -ENOENT: moved, but the peer
 * never told us that RMB's rkey on the new link (it cannot go on).
 */
int smcr_lgr_conn_switched(struct smcr_lgr *lgr, struct smcr_lgr_conn *c,
			   struct smcr_lgr_cdc_sent *fin, uint32_t *rkey, uint64_t *addr);
/* The engine held unread bytes aside for a peer silent after a failover: count it. */
void smcr_lgr_count_rescue(struct smcr_lgr *lgr);

/* Pool: a zeroed registered buffer of exactly `size` bytes, or NULL. */
struct smcr_lgr_buf *smcr_lgr_buf_get(struct smcr_lgr *lgr, uint32_t size, bool rmb);
/*
 * A fresh RMB on a group whose link is up already (not first contact): tell
 * the peer its rkey with LLC CONFIRM RKEY, as Linux does before its Accept or
 * Confirm on a reused group (the CLC message names it too, which is all a
 * single-link peer needs; the answer is waited for only with two links, lgr_buf.c).  An RMB deregistered
 * while the group lives is withdrawn with DELETE RKEY (smcr_lgr_buf_put): a
 * Linux peer keeps every rkey it was told in a table of 255 per group.
 */
void smcr_lgr_rkey_confirm(struct smcr_lgr *lgr, const struct smcr_lgr_buf *b);
/* Back to the pool (reuse) or deregistered and freed. */
void smcr_lgr_buf_put(struct smcr_lgr *lgr, struct smcr_lgr_buf *b, bool reuse);
/*
 * Connection c leaves (as smcr_lgr_conn_del) before the peer's closing CDC
 * came, so the peer may still write into its RMB `b`.  The RMB waits in the
 * group until that CDC (closed or abort: the peer's writes came before it, RC
 * order) arrives for c's token, then joins the pool zeroed; c's queue is
 * looked at first.  Deregistered if the group dies or too many wait.
 */
void smcr_lgr_buf_retire(struct smcr_lgr *lgr, struct smcr_lgr_buf *b, struct smcr_lgr_conn *c);

/*
 * Data path (each takes the group mutex). 0 or -errno (-ECONNRESET: group dead;
 * -EAGAIN: c moved to another link and nothing was posted, the engine resends
 * first, see smcr_lgr_conn_switched; a WRITE alone is then dropped with 0).
 */
int smcr_lgr_send(struct smcr_lgr *lgr, struct smcr_lgr_conn *c,
		  const uint8_t msg[SMCR_WR_MSG_LEN], int timeout_ms);
int smcr_lgr_write(struct smcr_lgr *lgr, struct smcr_lgr_conn *c, const struct smcr_lgr_buf *src,
		   const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
		   int timeout_ms);
/*
 * (src: the send buffer the WRITEs read, registered on every link: its
 * registration on c's link is taken under the mutex, failover may change it.)
 */
/* WRITEs as smcr_lgr_write, then a CDC, in one post (0 or -ECONNRESET, -EINVAL). */
int smcr_lgr_write_send(struct smcr_lgr *lgr, struct smcr_lgr_conn *c, const struct smcr_lgr_buf *src,
			const struct smcr_wr_remote_rmb *rmb, uint32_t offset, uint32_t len,
			const uint8_t msg[SMCR_WR_MSG_LEN], int timeout_ms);
/* Next CDC for `c`: 1, 0 none, -ECONNRESET (group dead, queue empty). */
int smcr_lgr_recv(struct smcr_lgr *lgr, struct smcr_lgr_conn *c, uint8_t msg[SMCR_WR_MSG_LEN]);
/* transport.h's settle for `c`: true = look again. */
bool smcr_lgr_settle(struct smcr_lgr *lgr, struct smcr_lgr_conn *c, bool ready);
/* The group fails: every connection on it resets; never matched again. */
void smcr_lgr_fail(struct smcr_lgr *lgr, const char *why);
/* Has the link been confirmed (and not failed)? */
bool smcr_lgr_active(struct smcr_lgr *lgr);
/* Take completions and device events: is the group dead? */
bool smcr_lgr_dead(struct smcr_lgr *lgr);
/*
 * The same, reading the device's events only if asked (its fd polled
 * readable); with `c`, *delivered is c's count of CDCs queued after the
 * completions were taken.
 */
bool smcr_lgr_dead_check(struct smcr_lgr *lgr, bool device_events, struct smcr_lgr_conn *c,
			 uint64_t *delivered);
/*
 * c's TCP connection hung up: send a TEST LINK whose response proves that
 * every message the peer posted before now has arrived (RC order); c's
 * doorbell rings when it is in.  False if the group is dead already.
 */
bool smcr_lgr_probe(struct smcr_lgr *lgr, struct smcr_lgr_conn *c);
/* Is c's probe answered (or the group dead)? */
bool smcr_lgr_probe_done(struct smcr_lgr *lgr, struct smcr_lgr_conn *c);
/*
 * Wait (bounded) until c's last WRITE/CDC completed: its send buffer is
 * then no longer read by the NIC.  0 or -errno.
 */
int smcr_lgr_conn_flush(struct smcr_lgr *lgr, struct smcr_lgr_conn *c, int timeout_ms);

/*
 * A handshake is waiting for the peer's next CLC message.  A Linux peer that
 * reuses one of our groups first runs CONFIRM RKEY (and DELETE RKEY of the
 * connection before) over it and gives our answer 2 s; no connection of the
 * group need be reading then.  Take completions and LLC work of every live
 * group on `local_gid` in `role` (lgr NULL), or of `lgr` alone.
 */
void smcr_lgr_service(struct smcr_lgr *lgr, const uint8_t local_gid[SMCR_IB_GID_LEN],
		      enum smcr_lgr_role role);

int smcr_lgr_channel_fd(const struct smcr_lgr *lgr);
/*
 * The first link's device: its async event fd and removal fd (-1: none),
 * for a connection's wait set.  Without the group mutex: failover may close
 * that device meanwhile, then a poll of them wakes the caller for nothing
 * and smcr_lgr_dead_check() reads the right device.
 */
void smcr_lgr_device_fds(const struct smcr_lgr *lgr, int *async_fd, int *removal_fd);
uint32_t smcr_lgr_qpn(const struct smcr_lgr *lgr);

/* Tests: how long an unused group is kept (ms, > 0). */
void smcr_lgr_set_idle_ms(int ms);
/* Tests and stats: groups alive in this process, QPs among them. */
unsigned smcr_lgr_count(void);

/* Process life cycle, called only by engine.c (its lock order, its exit order). */
void smcr_lgr_fork_prepare(void);
void smcr_lgr_fork_parent(void);
void smcr_lgr_fork_child(void);
/*
 * Clean exit: every live group tells its peer (DELETE LINK all), so the
 * peer's connections end now rather than when its NIC gives up.  Best
 * effort: a group another thread holds is skipped.
 */
void smcr_lgr_exit(void);

#endif /* SMCR_LGR_H */
