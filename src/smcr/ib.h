/* SPDX-License-Identifier: MIT */
/*
 * Device side of the verbs transport: which RDMA port and RoCE v2 GID belong
 * to a TCP connection's local address, its protection domain, memory regions
 * and the RC queue pair's state machine (RESET -> INIT -> RTR -> RTS) driven
 * by the peer's QP number, GID and PSN as the CLC messages carry them.
 *
 * SMC-R exchanges the QP parameters inside CLC, so there is no rdma_cm here:
 * the kernel's SMC-R does the same, and it keeps the data QP independent of
 * rdma_cm's own connection state.
 *
 * Only ib.c, wr.c and verbs.c (and tests of them) include this header: they
 * are the only code that sees <infiniband/verbs.h> (through ibv.h, which
 * loads libibverbs at run time).
 */
#ifndef SMCR_IB_H
#define SMCR_IB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "smcr/ibsys.h"
#include "smcr/ibv.h" /* <infiniband/verbs.h>, its entry points loaded at run time */

#define SMCR_IB_GID_LEN 16
#define SMCR_IB_MAC_LEN 6

/* One opened RDMA port with the RoCE v2 GID of one local IP address. */
struct smcr_ib_port {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t port_num;
	uint8_t gid_index;
	uint8_t gid[SMCR_IB_GID_LEN];
	uint8_t mac[SMCR_IB_MAC_LEN]; /* of the netdev the GID belongs to */
	enum ibv_mtu active_mtu;
	unsigned int ifindex;
	char name[IBV_SYSFS_NAME_MAX];
	char dev_name[IBV_SYSFS_NAME_MAX]; /* its uverbs node in /dev/infiniband */
	int removal_fd;                    /* inotify on /dev/infiniband, or -1 */
	bool removed;                      /* the device is being unregistered */
};

/* What each side of a link tells the other (CLC Accept/Confirm fields). */
struct smcr_ib_qp_info {
	uint8_t gid[SMCR_IB_GID_LEN];
	uint8_t mac[SMCR_IB_MAC_LEN];
	uint32_t qpn; /* 24 bits */
	uint32_t psn; /* 24 bits: the first PSN this side sends */
	uint8_t mtu;  /* enum ibv_mtu, 1 (256) .. 5 (4096), as CLC's qp_mtu */
};

/*
 * The peer's side of a link from the fields a CLC Accept/Confirm or an LLC
 * ADD LINK carries (the same in both), with the MTU to use towards it.
 */
static inline struct smcr_ib_qp_info smcr_ib_peer_qp(const uint8_t gid[SMCR_IB_GID_LEN],
						     const uint8_t mac[SMCR_IB_MAC_LEN],
						     uint32_t qpn, uint32_t psn, uint8_t mtu)
{
	struct smcr_ib_qp_info peer;

	memset(&peer, 0, sizeof(peer));
	memcpy(peer.gid, gid, SMCR_IB_GID_LEN);
	memcpy(peer.mac, mac, SMCR_IB_MAC_LEN);
	peer.qpn = qpn;
	peer.psn = psn;
	peer.mtu = mtu;
	return peer;
}

/*
 * The 16-byte GID that stands for an IP address: IPv4 as ::ffff:a.b.c.d (how
 * RoCE v2 GID tables hold it), IPv6 as is.  0 or -EAFNOSUPPORT.
 */
int smcr_ib_addr_gid(const struct sockaddr *addr, uint8_t gid[SMCR_IB_GID_LEN]);

/*
 * Find the RDMA port holding a RoCE v2 GID for `local` (the TCP connection's
 * own address) and open it with a fresh protection domain.  -ENODEV when no
 * device has such a GID, other -errno on failure.
 */
int smcr_ib_port_open(const struct sockaddr *local, struct smcr_ib_port **out);
/*
 * Open the port sysfs named for `gid` (smcr_ibsys_find_gid(): what a client's
 * Proposal already told the peer, before libibverbs was loaded), checking
 * that verbs sees the same: a RoCE v2 entry equal to `gid` at that device,
 * port and index, on an ACTIVE Ethernet port, its netdev with `at`'s MAC.
 * -ESTALE if it does not (the table changed since, or sysfs and verbs
 * disagree: the caller declines rather than confirm a wrong GID), -ENODEV
 * without libibverbs, other -errno on failure.
 */
int smcr_ib_port_open_at(const struct smcr_ibsys_gid *at, const uint8_t gid[SMCR_IB_GID_LEN],
			 struct smcr_ib_port **out);
/*
 * A link group's second device: the RDMA port holding the RoCE v2 GID of the
 * local address that routing picks towards the peer's new GID `peer_gid`
 * (the kernel's SMC-Rv2 client also checks that route, smc_ib_find_route()),
 * if that is another device than primary's.  -ENODEV if it is the same.
 */
int smcr_ib_port_open_alt(const struct smcr_ib_port *primary,
			  const uint8_t peer_gid[SMCR_IB_GID_LEN], struct smcr_ib_port **out);
/*
 * A link group's second device as its server picks it (the kernel's SMC-Rv2
 * rule, smc_ib_determine_gid_rcu()): another RDMA device with a RoCE v2 GID
 * for an address of ours in the subnet of `primary`'s own address (that
 * address with its interface's prefix; IPv4 as the kernel, IPv6 likewise)
 * and, if the kernel's PNET table (smc_nl pnet) names `primary`, the same
 * PNET id; never a GID the peer has (`peer_gid`: one kernel playing two
 * hosts, as in the rxe VM), opened with a fresh protection domain.  -ENODEV
 * if there is none.
 */
int smcr_ib_port_open_subnet(const struct smcr_ib_port *primary,
			     const uint8_t peer_gid[SMCR_IB_GID_LEN], struct smcr_ib_port **out);
/*
 * Is the device going away (`rdma link delete`, driver unbind)?  Its uverbs
 * node leaves /dev/infiniband as soon as unregistration starts; drivers that
 * cannot disassociate a user context (rxe) then wait for every process to
 * close the device, sending it no event and keeping its QPs working.
 * port->removal_fd turns readable then (an fd for the caller's epoll set);
 * this reads it and latches port->removed.
 */
bool smcr_ib_port_removed(struct smcr_ib_port *port);

/*
 * A device appearing (`rdma link add`, a driver bound: a node created in
 * /dev/infiniband): an inotify fd that turns readable then, for the caller's
 * poll set, or -1 (no inotify, no such directory).  smcr_ib_additions_read()
 * drains it: true if a node appeared.
 */
int smcr_ib_watch_additions(void);
bool smcr_ib_additions_read(int fd);

void smcr_ib_port_close(struct smcr_ib_port *port);

/*
 * Load libibverbs and its provider libraries now, in a background thread (once
 * per process, only if the machine has an RDMA device), rather than in the
 * first SMC-R handshake: under load that takes seconds, and a Linux client
 * gives up after 6 s without our Accept.  A fork waits until it is done.
 */
void smcr_ib_prepare(void);

/*
 * An RMB: the peer may write into it and nothing else (no remote read, no
 * atomics), exactly over [buf, buf + len).  The peer addresses it by a random
 * page-aligned *iova (what CLC advertises), never by our virtual address,
 * which would leak the process's layout (protocol.md §8.3).  `buf`
 * must be page-aligned.
 */
struct ibv_mr *smcr_ib_reg_rmb(struct smcr_ib_port *port, void *buf, size_t len,
			       uint64_t *iova);
/* A local buffer the device only reads from (RDMA WRITE and SEND sources). */
struct ibv_mr *smcr_ib_reg_source(struct smcr_ib_port *port, void *buf, size_t len);
/* A local buffer the device writes into (receive buffers). */
struct ibv_mr *smcr_ib_reg_sink(struct smcr_ib_port *port, void *buf, size_t len);

/*
 * RC QP on the two CQs, moved to INIT with remote-write access so
 * that receives can be posted before the peer is known.  NULL + errno.
 */
struct ibv_qp *smcr_ib_qp_create(struct smcr_ib_port *port, struct ibv_cq *send_cq,
				 struct ibv_cq *recv_cq, uint32_t max_send_wr,
				 uint32_t max_recv_wr);
/* INIT -> RTR towards `peer`, then RTR -> RTS sending from `own_psn`.  0 or -errno. */
int smcr_ib_qp_connect(struct smcr_ib_port *port, struct ibv_qp *qp,
		       const struct smcr_ib_qp_info *peer, uint32_t own_psn);
/* Any state -> ERR: outstanding work requests complete with flush errors. */
int smcr_ib_qp_error(struct ibv_qp *qp);

/* A random 24-bit start PSN. */
uint32_t smcr_ib_random_psn(void);

/* fork, called only by engine.c: the lock of the background verbs set-up. */
void smcr_ib_fork_prepare(void);
void smcr_ib_fork_done(void);

#endif /* SMCR_IB_H */
