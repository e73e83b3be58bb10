// SPDX-License-Identifier: MIT
/*
 * Stats records and counters (see stats.h and include/smcr/stats_abi.h):
 * what goes in the area stats_area.c publishes.  Counters are relaxed
 * atomics; records are written under their seqlock (stats_abi.h): a slot is
 * claimed by taking its seq and finding it FREE inside the write section.
 * A forked child's records of inherited connections are INHERITED (hidden
 * from readers) until it makes one its own (record_adopt) or frees it.
 */
#include "smcr/stats.h"
#include "stats_int.h"

#include <netinet/in.h>
#include <sched.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/compiler.h"
#include "smcr/libc.h"
#include "smcr/confine.h"
#include "smcr/decline.h"
#include "smcr/conn.h"

static void addr_of(const struct sockaddr_storage *ss, uint8_t out[16], uint16_t *port)
{
	memset(out, 0, 16);
	*port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)ss;

		out[10] = out[11] = 0xff;
		memcpy(out + 12, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)ss;

		memcpy(out, &in6->sin6_addr, 16);
		*port = ntohs(in6->sin6_port);
	}
}

/* ---- the writer side of the per-record seqlock (include/smcr/stats_abi.h) ---------- */

/* Make seq odd if it is even now; false if another writer holds the record. */
static bool seq_try_begin(uint32_t *seqp)
{
	uint32_t seq = __atomic_load_n(seqp, __ATOMIC_RELAXED);

	if ((seq & 1u) || !__atomic_compare_exchange_n(seqp, &seq, seq + 1, false,
						       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	/* The odd seq is visible before any field store that follows. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return true;
}

/*
 * Wait for the record: its writers are a few stores long, but one may be
 * preempted, hence the yield rather than a pure spin.
 */
static void seq_begin(uint32_t *seqp)
{
	for (unsigned spins = 0; !seq_try_begin(seqp); spins++)
		if (spins >= 64)
			sched_yield();
}

static void seq_end(uint32_t *seqp)
{
	__atomic_store_n(seqp, __atomic_load_n(seqp, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

static bool record_try_begin(struct smcr_stats_conn *c)
{
	return seq_try_begin(&c->seq);
}

static void record_begin(struct smcr_stats_conn *c)
{
	seq_begin(&c->seq);
}

static void record_end(struct smcr_stats_conn *c)
{
	seq_end(&c->seq);
}

static uint32_t phase_of(enum smcr_conn_state st)
{
	switch (st) {
	case SMCR_CONN_ACTIVE:
		return SMCR_STATS_PHASE_ACTIVE;
	case SMCR_CONN_PEERCLOSEWAIT1:
		return SMCR_STATS_PHASE_PEER_CLOSE_WAIT1;
	case SMCR_CONN_PEERCLOSEWAIT2:
		return SMCR_STATS_PHASE_PEER_CLOSE_WAIT2;
	case SMCR_CONN_APPCLOSEWAIT1:
		return SMCR_STATS_PHASE_APP_CLOSE_WAIT1;
	case SMCR_CONN_APPCLOSEWAIT2:
		return SMCR_STATS_PHASE_APP_CLOSE_WAIT2;
	case SMCR_CONN_CLOSED:
		return SMCR_STATS_PHASE_CLOSED;
	case SMCR_CONN_ABORTED:
		return SMCR_STATS_PHASE_ABORTED;
	}
	return SMCR_STATS_PHASE_NONE;
}

/* What a record says about its TCP connection, gathered before claiming a slot. */
struct record_init {
	uint32_t mode, role, reason, rmb_size, peer_rmb_size, phase, link_group;
	int tcp_fd;
	uint8_t local_addr[16], peer_addr[16];
	uint16_t local_port, peer_port;
	char device[16];
};

static void record_init_at(struct record_init *ri, int tcp_fd, uint32_t mode, uint32_t role,
			   uint32_t reason, const struct sockaddr_storage *local,
			   const struct sockaddr_storage *peer)
{
	struct sockaddr_storage ss;
	socklen_t len;

	memset(ri, 0, sizeof(*ri));
	ri->mode = mode;
	ri->role = role;
	ri->reason = reason;
	ri->tcp_fd = smcr_fd_label(tcp_fd); /* the number the application knows */
	/* Confined (confine.h): a record without addresses rather than a killed process. */
	len = sizeof(ss);
	if (local)
		addr_of(local, ri->local_addr, &ri->local_port);
	else if (smcr_call_allowed(SMCR_CALL_GETSOCKNAME) &&
		 smcr_libc.getsockname(tcp_fd, (struct sockaddr *)&ss, &len) == 0)
		addr_of(&ss, ri->local_addr, &ri->local_port);
	len = sizeof(ss);
	if (peer)
		addr_of(peer, ri->peer_addr, &ri->peer_port);
	else if (smcr_call_allowed(SMCR_CALL_GETPEERNAME) &&
		 smcr_libc.getpeername(tcp_fd, (struct sockaddr *)&ss, &len) == 0)
		addr_of(&ss, ri->peer_addr, &ri->peer_port);
}

static void record_init_of(struct record_init *ri, int tcp_fd, uint32_t mode, uint32_t role,
			   uint32_t reason)
{
	record_init_at(ri, tcp_fd, mode, role, reason, NULL, NULL);
}

/*
 * Claim a free record and fill it, all inside one write section: a reader
 * never sees a LIVE record with its previous occupant's fields.
 */
static struct smcr_stats_conn *claim_record(struct smcr_stats_file *f, const struct record_init *ri)
{
	for (unsigned i = 0; i < SMCR_STATS_MAX_CONNS; i++) {
		struct smcr_stats_conn *c = &f->conns[i];

		if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE ||
		    !record_try_begin(c))
			continue;
		if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE) {
			record_end(c); /* taken meanwhile */
			continue;
		}
		SET(c->state, (uint32_t)SMCR_STATS_CONN_LIVE);
		SET(c->generation, c->generation + 1);
		SET(c->mode, ri->mode);
		SET(c->role, ri->role);
		SET(c->tcp_fd, (int32_t)ri->tcp_fd);
		SET(c->fallback_reason, ri->reason);
		SET(c->rmb_size, ri->rmb_size);
		SET(c->peer_rmb_size, ri->peer_rmb_size);
		SET(c->bytes_sent, (uint64_t)0);
		SET(c->bytes_received, (uint64_t)0);
		SET(c->cdc_sent, (uint64_t)0);
		SET(c->cdc_received, (uint64_t)0);
		for (unsigned b = 0; b < 16; b++) {
			SET(c->local_addr[b], ri->local_addr[b]);
			SET(c->peer_addr[b], ri->peer_addr[b]);
		}
		SET(c->local_port, ri->local_port);
		SET(c->peer_port, ri->peer_port);
		SET(c->conn_phase, ri->phase);
		SET(c->link_group, ri->link_group);
		for (unsigned b = 0; b < sizeof(c->device); b++)
			SET(c->device[b], ri->device[b]);
		record_end(c);
		return c;
	}
	return NULL;
}

static void record_free(struct smcr_stats_conn *c)
{
	record_begin(c);
	SET(c->state, (uint32_t)SMCR_STATS_CONN_FREE);
	record_end(c);
}

struct smcr_stats_conn *smcr_stats_conn_open(const struct smcr_sock *s)
{
	struct smcr_stats_file *f = smcr_stats_area_get();
	struct smcr_xconn_info xi;
	struct record_init ri;

	if (!f)
		return NULL;
	ADD(f->handshakes_smc, 1);
	ADD(f->conns_open, 1);
	s->ops->info(s->xc, &xi);
	record_init_of(&ri, s->tcp_fd, xi.mode, s->server ? 1u : 0u, 0);
	ri.link_group = xi.link_group;
	memcpy(ri.device, xi.device, sizeof(ri.device));
	ri.rmb_size = s->rmb_size;
	ri.peer_rmb_size = s->peer_size;
	ri.phase = phase_of(s->state);
	return claim_record(f, &ri);
}

struct smcr_tcp_record *smcr_stats_tcp_open(int tcp_fd, bool server, int reason)
{
	return smcr_stats_tcp_open_peer(tcp_fd, server, reason, NULL, NULL);
}

struct smcr_tcp_record *smcr_stats_tcp_open_peer(int tcp_fd, bool server, int reason,
						 const struct sockaddr_storage *local,
						 const struct sockaddr_storage *peer)
{
	struct smcr_stats_file *f = smcr_stats_area_get();
	struct record_init ri;

	if (!f)
		return NULL;
	record_init_at(&ri, tcp_fd, SMCR_STATS_MODE_TCP, server ? 1u : 0u,
		       reason > 0 ? (uint32_t)reason : 0u, local, peer);
	return (struct smcr_tcp_record *)claim_record(f, &ri);
}

struct smcr_tcp_record *smcr_stats_tcp_open_dest(int tcp_fd, const struct sockaddr *dst,
						 int reason)
{
	struct smcr_stats_file *f = smcr_stats_area_get();
	struct sockaddr_storage ss;
	struct record_init ri;

	if (!f)
		return NULL;
	memset(&ri, 0, sizeof(ri));
	ri.mode = SMCR_STATS_MODE_TCP;
	ri.reason = reason > 0 ? (uint32_t)reason : 0u;
	ri.tcp_fd = tcp_fd;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, dst, dst->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						    : sizeof(struct sockaddr_in));
	addr_of(&ss, ri.peer_addr, &ri.peer_port);
	return (struct smcr_tcp_record *)claim_record(f, &ri);
}

void smcr_stats_tcp_close(struct smcr_tcp_record *rec)
{
	struct smcr_stats_conn *c = (struct smcr_stats_conn *)rec;

	if (c && !smcr_stats_off && smcr_stats_area_settled())
		record_free(c);
}

/*
 * Counters and phase: the state is read unlocked, as of this update.  Bytes
 * are this process's (its holder slot): a connection that followed fork
 * shows in each holder's file with what that process moved, so the sum over
 * the files counts every byte once.  CDC counts are the connection's.
 */
static void own_bytes(const struct smcr_sock *s, uint64_t *sent, uint64_t *received)
{
	const struct smcr_holder *h;

	if (s->fork_refused) { /* a forked copy that reads as reset moved nothing */
		*sent = *received = 0;
		return;
	}
	if (!s->shared) {
		*sent = s->bytes_sent;
		*received = s->bytes_received;
		return;
	}
	h = smcr_hold_self((struct smcr_sock *)(uintptr_t)s);
	*sent = h->bytes_sent;
	*received = h->bytes_received;
}

static void record_counters(struct smcr_stats_conn *c, const struct smcr_sock *s)
{
	uint64_t sent, received;

	own_bytes(s, &sent, &received);
	if (s->fork_refused) {
		SET(c->conn_phase, (uint32_t)SMCR_STATS_PHASE_ABORTED);
		SET(c->fallback_reason, (uint32_t)SMCR_CLC_DECL_FORKRESET);
	} else {
		SET(c->conn_phase, s->tail_reason && s->state != SMCR_CONN_CLOSED &&
					   s->state != SMCR_CONN_ABORTED
				   ? (uint32_t)SMCR_STATS_PHASE_ON_TCP
				   : phase_of(s->state));
		SET(c->fallback_reason, s->tail_reason);
	}
	SET(c->bytes_sent, sent);
	SET(c->bytes_received, received);
	SET(c->cdc_sent, s->cdc_sent);
	SET(c->cdc_received, s->cdc_received);
}

/*
 * A forked child's first stats event on a connection it holds: the slot its
 * parent's record had (INHERITED in the child's area since the fork) becomes
 * the child's own record of the connection.  Under smcr_stats_lock, so that it
 * happens once; smcr_stats_area_get() published the child's file first.
 */
static void record_adopt(struct smcr_stats_conn *c, const struct smcr_sock *s,
			 const struct smcr_xconn_info *xi)
{
	struct smcr_stats_file *f = smcr_stats_area_get();
	struct record_init ri;

	if (!f || smcr_stats_off)
		return;
	record_init_of(&ri, s->tcp_fd, xi->mode, s->server ? 1u : 0u, 0);
	pthread_mutex_lock(&smcr_stats_lock);
	if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) == SMCR_STATS_CONN_INHERITED) {
		record_begin(c);
		SET(c->state, (uint32_t)SMCR_STATS_CONN_LIVE);
		SET(c->generation, c->generation + 1);
		SET(c->mode, ri.mode);
		SET(c->role, ri.role);
		SET(c->tcp_fd, (int32_t)ri.tcp_fd);
		SET(c->fallback_reason, 0u);
		SET(c->rmb_size, s->rmb_size);
		SET(c->peer_rmb_size, s->peer_size);
		for (unsigned b = 0; b < 16; b++) {
			SET(c->local_addr[b], ri.local_addr[b]);
			SET(c->peer_addr[b], ri.peer_addr[b]);
		}
		SET(c->local_port, ri.local_port);
		SET(c->peer_port, ri.peer_port);
		SET(c->link_group, xi->link_group);
		for (unsigned b = 0; b < sizeof(c->device); b++)
			SET(c->device[b], xi->device[b]);
		record_counters(c, s);
		record_end(c);
		ADD(f->conns_open, 1);
	}
	pthread_mutex_unlock(&smcr_stats_lock);
}

void smcr_stats_conn_update(const struct smcr_sock *s)
{
	struct smcr_stats_conn *c = s->stats;

	if (!c || smcr_stats_off || !smcr_stats_area_settled())
		return;
	if (unlikely(__atomic_load_n(&c->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_LIVE)) {
		if (s->shared && smcr_hold_is_holder((struct smcr_sock *)(uintptr_t)s)) {
			struct smcr_xconn_info xi;

			s->ops->info(s->xc, &xi);
			record_adopt(c, s, &xi);
		}
		return;
	}
	record_begin(c);
	record_counters(c, s);
	record_end(c);
}

/* One more of `reason` in the reasons table (full: not counted by reason). */
static void count_reason(struct smcr_stats_file *f, int reason)
{
	for (unsigned i = 0; i < SMCR_STATS_MAX_REASONS; i++) {
		struct smcr_stats_reason *r = &f->fallback_reasons[i];
		uint32_t expected = 0;

		if (__atomic_load_n(&r->reason, __ATOMIC_ACQUIRE) == (uint32_t)reason ||
		    __atomic_compare_exchange_n(&r->reason, &expected, (uint32_t)reason, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
		    expected == (uint32_t)reason) {
			ADD(r->count, 1);
			return;
		}
	}
}

/*
 * A forked process's copy of an SMC-R connection that reads as reset here
 * (fork_tail.c): the slot its parent's record had (INHERITED since the fork)
 * becomes this process's record of it, aborted with why (record_counters),
 * and the reset is counted once.  The transport is not asked for its link
 * group or device: the group's locks belong to the process that runs it.
 */
void smcr_stats_conn_refused(const struct smcr_sock *s)
{
	struct smcr_stats_file *f = smcr_stats_area_get();
	struct smcr_xconn_info xi;

	if (!f || smcr_stats_off)
		return;
	ADD(f->aborts, 1);
	count_reason(f, SMCR_CLC_DECL_FORKRESET);
	if (!s->stats)
		return;
	memset(&xi, 0, sizeof(xi));
	xi.mode = s->ops->same_host ? SMCR_STATS_MODE_SMC_SHM : SMCR_STATS_MODE_SMC_R;
	record_adopt(s->stats, s, &xi);
}

void smcr_stats_conn_close(const struct smcr_sock *s, int aborted)
{
	struct smcr_stats_file *f = smcr_stats_area_settled();
	struct smcr_stats_conn *c = s->stats;
	uint64_t sent, received;

	if (!f || smcr_stats_off)
		return;
	if (c && __atomic_load_n(&c->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_LIVE) {
		/* A forked child's that it never used: the slot is free for its own. */
		if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) == SMCR_STATS_CONN_INHERITED)
			record_free(c);
		return;
	}
	own_bytes(s, &sent, &received);
	SUB(f->conns_open, 1);
	ADD(f->bytes_sent, sent);
	ADD(f->bytes_received, received);
	if (aborted && !s->fork_refused) /* counted when it was refused */
		ADD(f->aborts, 1);
	if (c) {
		record_begin(c);
		record_counters(c, s);
		if (aborted)
			SET(c->conn_phase, (uint32_t)SMCR_STATS_PHASE_ABORTED);
		SET(c->state, (uint32_t)SMCR_STATS_CONN_FREE);
		record_end(c);
	}
}

void smcr_stats_fallback(int reason)
{
	struct smcr_stats_file *f = smcr_stats_area_get();

	if (!f)
		return;
	ADD(f->fallbacks, 1);
	count_reason(f, reason);
}

static size_t report_put(char *out, size_t size, size_t at, const char *fmt, ...)
	SMCR_PRINTF(4, 5);

/* snprintf at `at`, clamped: the report never runs past `size`. */
static size_t report_put(char *out, size_t size, size_t at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (at >= size)
		return at;
	va_start(ap, fmt);
	n = vsnprintf(out + at, size - at, fmt, ap);
	va_end(ap);
	if (n < 0)
		return at;
	return at + (size_t)n < size ? at + (size_t)n : size - 1;
}

/*
 * Read without creating the area: a process that never had a connection
 * reports zeros and makes no file on its way out.
 */
void smcr_stats_report(char *out, size_t size)
{
	const struct smcr_stats_file *f = smcr_stats_area_peek();
	bool first = true;
	size_t at;

	if (!size)
		return;
	out[0] = '\0';
	if (!f) {
		(void)report_put(out, size, 0, "0 SMC, 0 TCP");
		return;
	}
	at = report_put(out, size, 0, "%llu SMC, %llu TCP",
			(unsigned long long)LOAD(f->handshakes_smc),
			(unsigned long long)LOAD(f->fallbacks));
	for (unsigned i = 0; i < SMCR_STATS_MAX_REASONS; i++) {
		const struct smcr_stats_reason *r = &f->fallback_reasons[i];
		uint32_t reason = __atomic_load_n(&r->reason, __ATOMIC_ACQUIRE);

		if (!reason)
			continue;
		at = report_put(out, size, at, "%s%s %llu", first ? " (" : ", ",
				smcr_clc_decl_name(reason), (unsigned long long)LOAD(r->count));
		first = false;
	}
	at = report_put(out, size, at, "%s, %llu handshake errors, %llu resets, "
			"%llu bytes sent and %llu received over SMC", first ? "" : ")",
			(unsigned long long)LOAD(f->handshake_errors),
			(unsigned long long)LOAD(f->aborts),
			(unsigned long long)LOAD(f->bytes_sent),
			(unsigned long long)LOAD(f->bytes_received));
}

void smcr_stats_handshake_error(void)
{
	struct smcr_stats_file *f = smcr_stats_area_get();

	if (f)
		ADD(f->handshake_errors, 1);
}

void smcr_stats_handshake_failed(int reason)
{
	struct smcr_stats_file *f = smcr_stats_area_get();

	if (!f)
		return;
	ADD(f->handshake_errors, 1);
	count_reason(f, reason);
}

void smcr_stats_spin(bool won)
{
	struct smcr_stats_file *f = smcr_stats_area_get();

	if (!f)
		return;
	if (won)
		ADD(f->spins_won, 1);
	else
		ADD(f->spins_lost, 1);
}

void smcr_stats_wakeup_empty(void)
{
	struct smcr_stats_file *f = smcr_stats_area_get();

	if (f)
		ADD(f->wakeups_empty, 1);
}

void smcr_stats_slept(void)
{
	struct smcr_stats_file *f = smcr_stats_area_get();

	if (f)
		ADD(f->waits_slept, 1);
}

void smcr_stats_conn_relink(const struct smcr_sock *s, uint32_t bytes_resent)
{
	struct smcr_stats_file *f = smcr_stats_area_get();
	struct smcr_stats_conn *c = s->stats;
	struct smcr_xconn_info xi;

	if (!f)
		return;
	ADD(f->link_switches, 1);
	ADD(f->bytes_resent, bytes_resent);
	if (!c || smcr_stats_off)
		return;
	s->ops->info(s->xc, &xi); /* the device of the link it uses now */
	record_begin(c);
	for (unsigned b = 0; b < sizeof(c->device); b++)
		SET(c->device[b], xi.device[b]);
	record_end(c);
}

/* ---- listeners ---------------------------------------------------------------------- */

static void listener_fields(struct smcr_stats_listener *l, uint32_t status, const char *why)
{
	size_t n = why ? strlen(why) : 0;

	if (n >= sizeof(l->why))
		n = sizeof(l->why) - 1;
	SET(l->status, (uint16_t)status);
	for (size_t b = 0; b < sizeof(l->why); b++)
		SET(l->why[b], b < n ? why[b] : '\0');
}

struct smcr_stats_listener *smcr_stats_listener_open(int listen_fd, uint32_t status,
						     uint32_t flags, const char *why)
{
	struct smcr_stats_file *f = smcr_stats_area_get();
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint8_t addr[16] = {0};
	uint16_t port = 0;

	if (!f)
		return NULL;
	/* Confined (confine.h): a record without its address rather than a killed process. */
	if (smcr_call_allowed(SMCR_CALL_GETSOCKNAME) &&
	    smcr_libc.getsockname(listen_fd, (struct sockaddr *)&ss, &len) == 0)
		addr_of(&ss, addr, &port);
	for (unsigned i = 0; i < SMCR_STATS_MAX_LISTENERS; i++) {
		struct smcr_stats_listener *l = &f->listeners[i];

		if (__atomic_load_n(&l->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE ||
		    !seq_try_begin(&l->seq))
			continue;
		if (__atomic_load_n(&l->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE) {
			seq_end(&l->seq); /* taken meanwhile */
			continue;
		}
		SET(l->state, (uint32_t)SMCR_STATS_CONN_LIVE);
		SET(l->generation, l->generation + 1);
		SET(l->fd, (int32_t)listen_fd);
		for (unsigned b = 0; b < 16; b++)
			SET(l->addr[b], addr[b]);
		SET(l->port, port);
		SET(l->flags, flags);
		listener_fields(l, status, why);
		seq_end(&l->seq);
		return l;
	}
	return NULL;
}

void smcr_stats_listener_status(struct smcr_stats_listener *l, uint32_t status, const char *why)
{
	if (!l || smcr_stats_off || !smcr_stats_area_settled())
		return;
	seq_begin(&l->seq);
	listener_fields(l, status, why);
	seq_end(&l->seq);
}

void smcr_stats_listener_close(struct smcr_stats_listener *l)
{
	if (!l || smcr_stats_off || !smcr_stats_area_settled())
		return;
	seq_begin(&l->seq);
	SET(l->state, (uint32_t)SMCR_STATS_CONN_FREE);
	seq_end(&l->seq);
}

/* ---- link groups ----------------------------------------------------------------- */

struct smcr_stats_lgr *smcr_stats_lgr_open(void)
{
	struct smcr_stats_file *f = smcr_stats_area_get();

	if (!f)
		return NULL;
	for (unsigned i = 0; i < SMCR_STATS_MAX_LGRS; i++) {
		struct smcr_stats_lgr *g = &f->lgrs[i];

		if (__atomic_load_n(&g->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE ||
		    !seq_try_begin(&g->seq))
			continue;
		if (__atomic_load_n(&g->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE) {
			seq_end(&g->seq);
			continue;
		}
		SET(g->state, (uint32_t)SMCR_STATS_CONN_LIVE);
		SET(g->generation, g->generation + 1);
		seq_end(&g->seq);
		return g;
	}
	return NULL;
}

/* Everything after the seqlock words, byte by byte as readers copy it. */
#define LGR_BODY_AT offsetof(struct smcr_stats_lgr, id)

void smcr_stats_lgr_update(struct smcr_stats_lgr *g, const struct smcr_stats_lgr *now)
{
	const uint8_t *from = (const uint8_t *)now + LGR_BODY_AT;
	uint8_t *to = (uint8_t *)g + LGR_BODY_AT;

	/* (a forked child's copy of its parent's group is INHERITED: nothing to publish) */
	if (!g || smcr_stats_off || __atomic_load_n(&g->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_LIVE ||
	    !smcr_stats_area_settled())
		return;
	seq_begin(&g->seq);
	for (size_t i = 0; i < sizeof(*g) - LGR_BODY_AT; i++)
		SET(to[i], from[i]);
	seq_end(&g->seq);
}

void smcr_stats_lgr_close(struct smcr_stats_lgr *g)
{
	if (!g || smcr_stats_off || __atomic_load_n(&g->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_LIVE ||
	    !smcr_stats_area_settled())
		return;
	seq_begin(&g->seq);
	SET(g->state, (uint32_t)SMCR_STATS_CONN_FREE);
	seq_end(&g->seq);
}
