// SPDX-License-Identifier: MIT
/* Transport selection (see policy.h). */
#include "smcr/policy.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/learn.h"
#include "smcr/shm.h"
#include "smcr/sys.h"
#ifdef SMCR_HAVE_VERBS
#include "smcr/verbs.h"
#endif

const struct smcr_transport_ops *smcr_policy_verbs_ops(void)
{
#ifdef SMCR_HAVE_VERBS
	return &smcr_verbs_ops;
#else
	return NULL;
#endif
}

/* An address as the lists hold it: family, 16 bytes (IPv4 in the first 4), port. */
struct dest {
	unsigned char family;
	unsigned char addr[16];
	unsigned short port;
};

static bool dest_of(const struct sockaddr *sa, struct dest *d)
{
	static const unsigned char v4mapped[12] = { [10] = 0xff, [11] = 0xff };

	memset(d, 0, sizeof(*d));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

		d->family = AF_INET;
		memcpy(d->addr, &in->sin_addr, 4);
		d->port = ntohs(in->sin_port);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;

		d->port = ntohs(in6->sin6_port);
		if (memcmp(in6->sin6_addr.s6_addr, v4mapped, sizeof(v4mapped)) == 0) {
			d->family = AF_INET;
			memcpy(d->addr, in6->sin6_addr.s6_addr + 12, 4);
		} else {
			d->family = AF_INET6;
			memcpy(d->addr, in6->sin6_addr.s6_addr, 16);
		}
		return true;
	}
	return false;
}

static bool cidr_match(const struct smcr_config_cidr *c, const struct dest *d)
{
	unsigned full = c->prefix / 8, rest = c->prefix % 8;

	if (c->family != d->family || (c->port && c->port != d->port))
		return false;
	if (memcmp(c->addr, d->addr, full) != 0)
		return false;
	return rest == 0 || ((c->addr[full] ^ d->addr[full]) & (0xff00u >> rest)) == 0;
}

bool smcr_policy_match(const struct smcr_config_cidr *list, unsigned n,
		       const struct sockaddr *addr)
{
	struct dest d;

	if (!dest_of(addr, &d))
		return false;
	for (unsigned i = 0; i < n; i++)
		if (cidr_match(&list[i], &d))
			return true;
	return false;
}

/* ---- rules (common/rules.h) ------------------------------------------------------- */

static bool rule_names(const struct smcr_rule *r, const char *program, const char *comm)
{
	return !r->program[0] || strcmp(r->program, program) == 0 ||
	       strncmp(r->program, comm, 15) == 0;
}

static bool rule_matches(const struct smcr_rule *r, bool server, const struct dest *d,
			 const char *program, const char *comm)
{
	if (r->role && r->role != (server ? SMCR_RULE_SERVER : SMCR_RULE_CLIENT))
		return false;
	if (r->port && r->port != d->port)
		return false;
	if (r->has_addr && !cidr_match(&r->addr, d))
		return false;
	return rule_names(r, program, comm);
}

/* The environment setting that decides instead of the rules, or NULL. */
static const char *env_decides(const struct smcr_config *cfg, bool server,
			       const struct sockaddr *addr)
{
	if (cfg->transport_set)
		return "SMCR_TRANSPORT";
	if (cfg->samehost_set)
		return "SMCR_SAMEHOST";
	if (server)
		return NULL;
	if (smcr_policy_match(cfg->deny, cfg->n_deny, addr))
		return "SMCR_PEERS_DENY";
	if (smcr_policy_match(cfg->peers, cfg->n_peers, addr))
		return "SMCR_PEERS";
	return NULL;
}

void smcr_policy_rule(const struct smcr_config *cfg, bool server, const struct sockaddr *addr,
		      const char *program, const char *comm, struct smcr_policy_verdict *v)
{
	const struct smcr_rules *rules = cfg->rules;
	struct dest d;

	memset(v, 0, sizeof(*v));
	v->action = SMCR_RULE_SMC;
	if (!rules)
		return;
	if (rules->broken) {
		v->broken = true;
		v->action = SMCR_RULE_TCP;
		return;
	}
	v->env = env_decides(cfg, server, addr);
	if (v->env || !dest_of(addr, &d))
		return;
	if (!program)
		program = rules->program;
	if (!comm)
		comm = program == rules->program ? rules->comm : "";
	for (unsigned i = 0; i < rules->n; i++) {
		if (rule_matches(&rules->rule[i], server, &d, program, comm)) {
			v->rule = &rules->rule[i];
			v->action = v->rule->action;
			return;
		}
	}
}

/* The action for this process's connection to or at `addr`: SMCR_RULE_SMC without rules. */
static int rule_action(const struct smcr_config *cfg, bool server, const struct sockaddr *addr)
{
	struct smcr_policy_verdict v;

	if (!cfg->rules)
		return SMCR_RULE_SMC;
	smcr_policy_rule(cfg, server, addr, NULL, NULL, &v);
	return v.action;
}

bool smcr_policy_listener_excluded(int listen_fd, char *why, size_t len)
{
	const struct smcr_config *cfg = smcr_config_get();
	struct smcr_policy_verdict v = { .action = SMCR_RULE_SMC };
	struct sockaddr_storage local;
	socklen_t slen = sizeof(local);
	int saved = errno;

	if (!cfg->rules)
		return false;
	if (cfg->rules->broken) {
		if (why && len)
			snprintf(why, len, "rules file not understood: %s", cfg->rules->problem);
		return true;
	}
	if (smcr_libc.getsockname(listen_fd, (struct sockaddr *)&local, &slen) == 0)
		smcr_policy_rule(cfg, true, (struct sockaddr *)&local, NULL, NULL, &v);
	errno = saved;
	if (v.action != SMCR_RULE_TCP)
		return false;
	if (why && len && v.rule) {
		char text[SMCR_RULES_LINE_MAX];

		smcr_rule_text(v.rule, text, sizeof(text));
		snprintf(why, len, "rule %s:%u: %s", cfg->rules->files[v.rule->file], v.rule->line,
			 text);
	}
	return true;
}

/* ---- learned policy (learn.h) ----------------------------------------------------- */

static uint64_t dest_key(const struct dest *d)
{
	return smcr_learn_key(d->family, d->addr, d->port);
}

static bool dest_is_loopback(const struct dest *d)
{
	static const unsigned char v6_loopback[16] = { [15] = 1 };

	return d->family == AF_INET ? d->addr[0] == 127
				    : memcmp(d->addr, v6_loopback, sizeof(v6_loopback)) == 0;
}

int smcr_sock_connect_learned(const struct sockaddr *dst, socklen_t len)
{
	const struct smcr_config *cfg = smcr_config_get();
	struct dest d;

	if (!dst || len < (dst->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						      : sizeof(struct sockaddr_in)) ||
	    !dest_of(dst, &d))
		return 0;
	if (rule_action(cfg, false, dst) == SMCR_RULE_TCP)
		return SMCR_CLC_DECL_RULE;
	if (!cfg->learn)
		return 0;
	/* Only where SMC could be proposed at all: nothing to learn elsewhere. */
	if (!dest_is_loopback(&d) && !smcr_policy_match(cfg->peers, cfg->n_peers, dst))
		return 0;
	return smcr_learn_keep_tcp(dest_key(&d), smcr_now_ms()) ? SMCR_CLC_DECL_SHORTFLOWS : 0;
}

void smcr_policy_conn_ended(const struct smcr_sock *s)
{
	struct sockaddr_in6 peer = { .sin6_family = AF_INET6 };
	int64_t now = smcr_now_ms();
	struct dest d;

	/* The client decides, so the client learns; the record says where to. */
	if (s->server || !s->stats || !smcr_config_get()->learn)
		return;
	memcpy(&peer.sin6_addr, s->stats->peer_addr, sizeof(peer.sin6_addr));
	peer.sin6_port = htons(s->stats->peer_port);
	if (!peer.sin6_port || !dest_of((const struct sockaddr *)&peer, &d))
		return;
	smcr_learn_result(dest_key(&d), s->bytes_sent + s->bytes_received,
			  s->cdc_sent + s->cdc_received, now - s->opened_ms, now);
}

void smcr_policy_proposal_failed(const struct sockaddr *peer, int reason)
{
	const struct smcr_config *cfg = smcr_config_get();
	struct dest d;

	/* Our own shortage says nothing of the destination. */
	if (!cfg->learn || reason == (int)SMCR_CLC_DECL_MEM || !dest_of(peer, &d))
		return;
	/* Only where the policy is asked (smcr_sock_connect_learned). */
	if (!dest_is_loopback(&d) && !smcr_policy_match(cfg->peers, cfg->n_peers, peer))
		return;
	smcr_learn_result(dest_key(&d), 0, 0, 0, smcr_now_ms());
}

/* ---- negative cache ------------------------------------------------------------- */

static struct neg_entry {
	struct dest dest;
	int64_t until_ms; /* 0 = free */
	int reason;
} neg_cache[SMCR_POLICY_NEG_SLOTS];
static pthread_mutex_t neg_lock = PTHREAD_MUTEX_INITIALIZER;

static bool dest_eq(const struct dest *a, const struct dest *b)
{
	return a->family == b->family && a->port == b->port &&
	       memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

/* The live entry for d, or NULL.  neg_lock held. */
static struct neg_entry *neg_find(const struct dest *d, int64_t now_ms)
{
	for (unsigned i = 0; i < SMCR_POLICY_NEG_SLOTS; i++) {
		struct neg_entry *e = &neg_cache[i];

		if (e->until_ms > now_ms && dest_eq(&e->dest, d))
			return e;
	}
	return NULL;
}

void smcr_policy_rdma_result(const struct sockaddr *peer, int rc, int64_t now_ms)
{
	struct neg_entry *e, *victim = NULL;
	struct dest d;

	if (!dest_of(peer, &d))
		return;
	pthread_mutex_lock(&neg_lock);
	e = neg_find(&d, now_ms);
	if (rc == 0) {
		if (e)
			e->until_ms = 0;
		pthread_mutex_unlock(&neg_lock);
		return;
	}
	if (!e) {
		/* a free or expired slot, else the one that expires first */
		for (unsigned i = 0; i < SMCR_POLICY_NEG_SLOTS; i++) {
			if (!victim || neg_cache[i].until_ms < victim->until_ms)
				victim = &neg_cache[i];
		}
		e = victim;
		e->dest = d;
	}
	e->until_ms = now_ms + SMCR_POLICY_NEG_TTL_MS;
	/* A hard error (the peer answered garbage or nothing) counts as "no SMC there". */
	e->reason = rc > 0 ? rc : (int)SMCR_CLC_DECL_PEERNOSMC;
	pthread_mutex_unlock(&neg_lock);
}

void smcr_policy_reset(void)
{
	pthread_mutex_lock(&neg_lock);
	memset(neg_cache, 0, sizeof(neg_cache));
	pthread_mutex_unlock(&neg_lock);
}

int smcr_policy_rdma_peer(const struct smcr_config *cfg, const struct sockaddr *peer,
			  bool vouched, int64_t now_ms)
{
	struct neg_entry *e;
	struct dest d;
	int reason = 0;

	if (!dest_of(peer, &d) || !(vouched || smcr_policy_match(cfg->peers, cfg->n_peers, peer)) ||
	    smcr_policy_match(cfg->deny, cfg->n_deny, peer))
		return SMCR_CLC_DECL_PEERNOSMC;
	pthread_mutex_lock(&neg_lock);
	e = neg_find(&d, now_ms);
	if (e)
		reason = e->reason;
	pthread_mutex_unlock(&neg_lock);
	return reason;
}

/* ---- the choices ------------------------------------------------------------------ */

bool smcr_policy_announce(const struct smcr_config *cfg, const struct sockaddr *dst)
{
	struct neg_entry *e;
	struct dest d;

	if (cfg->transport == SMCR_CONFIG_TRANSPORT_SHM || !dest_of(dst, &d) ||
	    smcr_policy_match(cfg->deny, cfg->n_deny, dst))
		return false;
	switch (rule_action(cfg, false, dst)) {
	case SMCR_RULE_TCP:
	case SMCR_RULE_SHM:
		return false;
	default:
		break;
	}
	pthread_mutex_lock(&neg_lock);
	e = neg_find(&d, smcr_now_ms());
	pthread_mutex_unlock(&neg_lock);
	return !e;
}

/*
 * The server's SYN-ACK answered our SYN's SMC option (RFC 7609 option mode):
 * it speaks SMC, and a Linux SMC server now waits for our Proposal (any other
 * first bytes make it reset the connection).  SMC-R when the policy allows it;
 * otherwise still a Proposal, shm's, which any SMC peer but a same-host smcr
 * one declines cleanly: our SYN promised one.
 */
static int announced_peer(const struct smcr_config *cfg, int tcp_fd, int transport,
			  const struct smcr_transport_ops **ops)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);

	smcr_dbg("fd %d: the server announced SMC in its SYN-ACK (RFC 7609 option): proposing",
		 smcr_fd_label(tcp_fd));
	*ops = NULL;
	if (transport != SMCR_CONFIG_TRANSPORT_SHM &&
	    smcr_libc.getpeername(tcp_fd, (struct sockaddr *)&peer, &plen) == 0 &&
	    smcr_policy_rdma_peer(cfg, (struct sockaddr *)&peer, true, smcr_now_ms()) == 0)
		*ops = smcr_policy_verbs_ops();
	if (!*ops)
		*ops = &smcr_shm_ops;
	return 0;
}

int smcr_policy_client(const struct smcr_config *cfg, int tcp_fd,
		       const struct smcr_transport_ops **ops)
{
	return smcr_policy_client_to(cfg, tcp_fd, NULL, ops);
}

int smcr_policy_client_to(const struct smcr_config *cfg, int tcp_fd,
			  const struct sockaddr_storage *known_peer,
			  const struct smcr_transport_ops **ops)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	int transport = cfg->transport, action = SMCR_RULE_SMC;
	bool rdma_only, have_peer = known_peer != NULL;
	int rc;

	*ops = NULL;
	if (known_peer)
		peer = *known_peer;
	if (cfg->rules) {
		if (!have_peer)
			have_peer = smcr_libc.getpeername(tcp_fd, (struct sockaddr *)&peer, &plen) == 0;
		action = have_peer ? rule_action(cfg, false, (struct sockaddr *)&peer)
				   : cfg->rules->broken ? SMCR_RULE_TCP : SMCR_RULE_SMC;
		if (action == SMCR_RULE_TCP)
			return SMCR_CLC_DECL_RULE;
		if (action == SMCR_RULE_SHM)
			transport = SMCR_CONFIG_TRANSPORT_SHM;
		else if (action == SMCR_RULE_RDMA)
			transport = SMCR_CONFIG_TRANSPORT_RDMA;
	}
	rdma_only = transport == SMCR_CONFIG_TRANSPORT_RDMA;
	if (!rdma_only && cfg->samehost &&
	    (have_peer ? smcr_peer_is_registered_at(tcp_fd, &peer)
		       : smcr_peer_is_registered(tcp_fd))) {
		*ops = &smcr_shm_ops;
		return 0;
	}
	if (smcr_tcpopt_peer(tcp_fd) == SMCR_TCPOPT_YES)
		return announced_peer(cfg, tcp_fd, transport, ops);
	if (transport == SMCR_CONFIG_TRANSPORT_SHM)
		return SMCR_CLC_DECL_PEERNOSMC;
	if (!have_peer && smcr_libc.getpeername(tcp_fd, (struct sockaddr *)&peer, &plen) < 0)
		return SMCR_CLC_DECL_PEERNOSMC;
	/*
	 * rdma only: a registered listener on this host runs smcr too (asked
	 * only when the allow list does not name the peer: a sock_diag dump);
	 * an rdma rule names peers that run SMC, as the allow list does.
	 */
	rc = smcr_policy_rdma_peer(cfg, (struct sockaddr *)&peer,
				   action == SMCR_RULE_RDMA ||
					   (rdma_only &&
					    !smcr_policy_match(cfg->peers, cfg->n_peers,
							       (struct sockaddr *)&peer) &&
					    smcr_peer_is_registered_at(tcp_fd, &peer)),
				   smcr_now_ms());
	if (rc)
		return rc;
	*ops = smcr_policy_verbs_ops();
	return *ops ? 0 : SMCR_CLC_DECL_NOSMCRDEV;
}

int smcr_policy_server(const struct smcr_config *cfg, const struct smcr_clc_msg *prop,
		       const struct smcr_transport_ops **ops)
{
	return smcr_policy_server_at(cfg, prop, NULL, ops);
}

int smcr_policy_server_at(const struct smcr_config *cfg, const struct smcr_clc_msg *prop,
			  const struct sockaddr *local, const struct smcr_transport_ops **ops)
{
	int action = local ? rule_action(cfg, true, local) : SMCR_RULE_SMC;
	int transport = action == SMCR_RULE_SHM ? SMCR_CONFIG_TRANSPORT_SHM : cfg->transport;
	bool samehost = action == SMCR_RULE_RDMA ? false : cfg->samehost;

	*ops = &smcr_shm_ops;
	if (action == SMCR_RULE_TCP)
		return SMCR_CLC_DECL_RULE;
	/*
	 * SMCv1 only: we have neither a v1 RoCE device nor a v1 ISM one, and
	 * say so as a Linux server without them does (smc_listen_find_device:
	 * the first failure, ISM's, wins when both are offered).
	 */
	if (prop->hdr.version < SMCR_CLC_V2)
		return prop->hdr.typev1 == SMCR_CLC_PATH_R ? SMCR_CLC_DECL_NOSMCRDEV
							   : SMCR_CLC_DECL_NOSMCDDEV;
	/*
	 * SMC-Rv2, alone or beside an SMC-Dv2 offer that is not a same-host
	 * smcr client's (a Linux host with ISM, as IBM Z has, offers both: its
	 * server tries ISM, then RoCE; we have no ISM, so RoCE).
	 */
	if (prop->hdr.typev2 == SMCR_CLC_PATH_R ||
	    (prop->hdr.typev2 == SMCR_CLC_PATH_BOTH && !smcr_shm_offer_is_ours(prop))) {
		*ops = smcr_policy_verbs_ops();
		if (!*ops || transport == SMCR_CONFIG_TRANSPORT_SHM)
			return SMCR_CLC_DECL_NOSMCRDEV;
		return 0;
	}
	/* shm judges every other form itself (and declines what is not its own) */
	return samehost ? 0 : SMCR_CLC_DECL_NOSMCD2DEV;
}

void smcr_sock_listen_prepare(void)
{
	if (smcr_config_get()->transport == SMCR_CONFIG_TRANSPORT_SHM || !smcr_policy_verbs_ops())
		return;
#ifdef SMCR_HAVE_VERBS
	smcr_verbs_prepare();
#endif
}

void smcr_sock_connect_prepare(const struct sockaddr *dst)
{
	static _Atomic bool started;
	const struct smcr_config *cfg = smcr_config_get();
	int action;

	if (atomic_load_explicit(&started, memory_order_relaxed) || !dst ||
	    cfg->transport == SMCR_CONFIG_TRANSPORT_SHM || !smcr_policy_verbs_ops() ||
	    smcr_policy_match(cfg->deny, cfg->n_deny, dst))
		return;
	action = rule_action(cfg, false, dst);
	if (action == SMCR_RULE_TCP || action == SMCR_RULE_SHM)
		return;
	/* an allowed peer, or a SYN that carries SMC's option (smcr_tcpopt_mark_connect) */
	if (action != SMCR_RULE_RDMA && !smcr_policy_match(cfg->peers, cfg->n_peers, dst) &&
	    !(smcr_tcpopt_enabled() && smcr_policy_announce(cfg, dst)))
		return;
	atomic_store_explicit(&started, true, memory_order_relaxed);
#ifdef SMCR_HAVE_VERBS
	smcr_verbs_prepare();
#endif
}

bool smcr_peer_may_propose(int tcp_fd)
{
	const struct smcr_config *cfg = smcr_config_get();
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);

	if (cfg->transport == SMCR_CONFIG_TRANSPORT_SHM || !smcr_policy_verbs_ops() ||
	    smcr_libc.getpeername(tcp_fd, (struct sockaddr *)&peer, &plen) < 0)
		return false;
	return smcr_policy_match(cfg->peers, cfg->n_peers, (struct sockaddr *)&peer) &&
	       !smcr_policy_match(cfg->deny, cfg->n_deny, (struct sockaddr *)&peer);
}
