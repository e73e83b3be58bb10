/* SPDX-License-Identifier: MIT */
/*
 * Which transport a connection uses (design §4: never guess).
 *
 * Client: SMCR_TRANSPORT (auto|rdma|shm), the same-host registry, the
 * SMCR_PEERS allow list and SMCR_PEERS_DENY deny list, and a negative cache:
 *   shm   to a registered same-host listener (loopback or our own address,
 *         the kernel vouching for the owner), unless SMCR_TRANSPORT=rdma or
 *         SMCR_SAMEHOST=0;
 *   any   to a server whose SYN-ACK announced SMC (RFC 7609 option mode,
 *         tcpopt.c): rdma unless denied, cached or SMCR_TRANSPORT=shm, else a
 *         Proposal the peer will decline (our SYN promised one);
 *   rdma  to a destination in SMCR_PEERS and not in SMCR_PEERS_DENY, unless
 *         SMCR_TRANSPORT=shm; with SMCR_TRANSPORT=rdma also to a registered
 *         same-host listener (the VM's two "hosts" share one kernel);
 *   else  TCP (PEERNOSMC), nothing sent.
 * After an SMC-R attempt to a destination (address and port) failed or was
 * declined, connections to it stay TCP for SMCR_POLICY_NEG_TTL_MS, falling
 * back with the reason that attempt ended with; the cache holds the
 * SMCR_POLICY_NEG_SLOTS most recent destinations.
 *
 * Server: the Proposal's form picks the transport: SMC-Rv2 (typev2 R) ->
 * verbs, anything else -> shm (which declines what is not its own form).
 *
 * Rules (common/rules.h) narrow these choices per connection, looked up with
 * the destination (client) or the local address (server); the first match
 * wins, and the environment wins over every rule: SMCR_TRANSPORT or
 * SMCR_SAMEHOST set, or (client) a destination in SMCR_PEERS or
 * SMCR_PEERS_DENY, is decided as without rules.  What each action does:
 *   tcp   client: TCP before connect(), reason RULE, no option in its SYN;
 *         server: the listener is neither registered nor announced, and a
 *         Proposal is declined NOSMCDEV on the wire, RULE in its stats;
 *   shm   as SMCR_TRANSPORT=shm for that connection;
 *   rdma  client: as SMCR_TRANSPORT=rdma, the destination as in SMCR_PEERS;
 *         server: as SMCR_SAMEHOST=0 (SMC-R Proposals only);
 *   smc   as without rules.
 * A rules file not understood keeps every connection TCP (reason RULE).
 */
#ifndef SMCR_POLICY_H
#define SMCR_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/config.h"
#include "common/rules.h"
#include "smcr/clc.h"
#include "smcr/transport.h"

#define SMCR_POLICY_NEG_TTL_MS 60000
#define SMCR_POLICY_NEG_SLOTS 64

/* The verbs transport, or NULL when built without rdma-core's headers. */
const struct smcr_transport_ops *smcr_policy_verbs_ops(void);

/* Does `addr` (its port too) match an entry of the list?  IPv4-mapped IPv6 counts as IPv4. */
bool smcr_policy_match(const struct smcr_config_cidr *list, unsigned n,
		       const struct sockaddr *addr);

/*
 * May a client propose SMC-R to `peer` (allowed by SMCR_PEERS, or `vouched`
 * for otherwise): 0, or the reason it may not (PEERNOSMC: not allowed, or
 * denied; a cached destination: the reason its last attempt ended with).
 */
int smcr_policy_rdma_peer(const struct smcr_config *cfg, const struct sockaddr *peer,
			  bool vouched, int64_t now_ms);

/* An SMC-R attempt to `peer` ended: reason > 0 declined, < 0 -errno, 0 success. */
void smcr_policy_rdma_result(const struct sockaddr *peer, int rc, int64_t now_ms);

/*
 * A connection ended: a client's feeds the learned policy (learn.h) with its
 * bytes and lifetime. Costs no system call.
 */
struct smcr_sock;
void smcr_policy_conn_ended(const struct smcr_sock *s);

/*
 * A same-host client's Proposal to `peer` ended on TCP (`reason`, > 0): the
 * peer declined, or did not answer in time. It cost SMC's handshake and
 * bought nothing, so the learned policy counts it as a short connection: a
 * destination that declines every Proposal (a server that hands its accepted
 * sockets to workers over SCM_RIGHTS, as node's cluster does) turns TCP after
 * a few, with the policy's probes. Costs no system call.
 */
void smcr_policy_proposal_failed(const struct sockaddr *peer, int reason);

/* Forget every cached destination (tests). */
void smcr_policy_reset(void);

/*
 * RFC 7609 option mode: may a client announce SMC in its SYN to `dst`?  Only
 * when it would propose to a server that answers (not SMCR_TRANSPORT=shm, not
 * in SMCR_PEERS_DENY, not in the negative cache): the option is a promise.
 */
bool smcr_policy_announce(const struct smcr_config *cfg, const struct sockaddr *dst);

/*
 * The client's choice for connected `tcp_fd` under `cfg`: 0 and *ops, or the
 * fallback reason (nothing has been sent).
 */
int smcr_policy_client(const struct smcr_config *cfg, int tcp_fd,
		       const struct smcr_transport_ops **ops);
/*
 * The same with the socket's peer address already known (getpeername() of
 * `tcp_fd`, read by the caller): it is not asked for again.  NULL: asked.
 */
int smcr_policy_client_to(const struct smcr_config *cfg, int tcp_fd,
			  const struct sockaddr_storage *known_peer,
			  const struct smcr_transport_ops **ops);

/* The server's choice for a received Proposal: 0 and *ops, or a decline reason. */
int smcr_policy_server(const struct smcr_config *cfg, const struct smcr_clc_msg *prop,
		       const struct smcr_transport_ops **ops);
/* The same for a connection to `local` (NULL: unknown, no rule looked up). */
int smcr_policy_server_at(const struct smcr_config *cfg, const struct smcr_clc_msg *prop,
			  const struct sockaddr *local, const struct smcr_transport_ops **ops);

/* What decides a connection under the rules, and how. */
struct smcr_policy_verdict {
	int action;                   /* enum smcr_rule_action */
	const struct smcr_rule *rule; /* the rule that matched, or NULL */
	const char *env;              /* the environment setting that decided, or NULL */
	bool broken;                  /* the rules file is not understood */
};

/*
 * The verdict for a client's destination or a server's local address
 * `addr`, for a process that `program` (and `comm`) names; NULL names take
 * this process's own.  No rules: action smc, nothing else set.
 */
void smcr_policy_rule(const struct smcr_config *cfg, bool server, const struct sockaddr *addr,
		      const char *program, const char *comm, struct smcr_policy_verdict *v);

/*
 * Does a rule keep the listener `listen_fd` out of SMC (not registered, not
 * announced)?  One getsockname, and only when there are rules.  If so and
 * `why` is not NULL, it names the cause for smcr-stat -l: "rule
 * /etc/smcr.conf:3: tcp port=5432", or the rules file not understood.
 */
bool smcr_policy_listener_excluded(int listen_fd, char *why, size_t len);

#endif /* SMCR_POLICY_H */
