/* SPDX-License-Identifier: MIT */
/*
 * Listeners (smc.h "life cycle"): a listening socket's registration, which
 * is what lets clients propose SMC to it, from listen() to the last of its
 * accepted connections that still needs it; what an accepted connection
 * takes from its listener; and the ports this process listens on, so that
 * a client of its own listener stays TCP.  Apart because the registration
 * outlives the listening socket (a reference counted record shared with
 * unclassified accepted sockets) and has its own lock and state, which
 * nothing else in the glue touches.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/sockaddr.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "preload/smc_internal.h"
#include "smcr/engine.h"

/* ---- listeners of this process (a peer in the same process: no SMC) ----- */

#define OWN_LISTENERS 64
static struct {
	uint16_t port;
	pid_t pid;
} own_listeners[OWN_LISTENERS];
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;

static bool is_wildcard(const struct sockaddr_storage *ss)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)ss;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)ss;

	if (ss->ss_family == AF_INET)
		return in->sin_addr.s_addr == htonl(INADDR_ANY);
	return ss->ss_family != AF_INET6 || IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
}

/* The listener's address and port; the address kept only where it is one address. */
static uint16_t listener_addr(int fd, struct sockaddr_storage *out)
{
	socklen_t len = sizeof(*out);

	if (smcr_real.getsockname(fd, (struct sockaddr *)out, &len) < 0) {
		out->ss_family = AF_UNSPEC;
		return 0;
	}
	if (is_wildcard(out)) {
		uint16_t port = smcr_sockaddr_port(out);

		out->ss_family = AF_UNSPEC;
		return port;
	}
	return smcr_sockaddr_port(out);
}


static void own_listener_set(uint16_t port, pid_t pid, bool add)
{
	pthread_mutex_lock(&own_lock);
	for (unsigned i = 0; i < OWN_LISTENERS; i++) {
		if (add && own_listeners[i].port == 0) {
			own_listeners[i].port = port;
			own_listeners[i].pid = pid;
			break;
		}
		if (!add && own_listeners[i].port == port && own_listeners[i].pid == pid) {
			own_listeners[i].port = 0;
			break;
		}
	}
	pthread_mutex_unlock(&own_lock);
}

/*
 * A client and a server in one process (often one thread: connect, then
 * accept) would wait for each other in the handshake: the server answers a
 * Proposal only at its first I/O. Such a pair stays TCP.
 */
bool smcr_smc_peer_in_this_process(const struct sockaddr_storage *peer)
{
	uint16_t port = smcr_sockaddr_port(peer);
	bool found = false;

	pthread_mutex_lock(&own_lock);
	for (unsigned i = 0; i < OWN_LISTENERS; i++)
		if (own_listeners[i].port == port && own_listeners[i].pid == smcr_smc_pid)
			found = true;
	pthread_mutex_unlock(&own_lock);
	return found;
}

/*
 * A listener's registration, shared by the listening socket and the
 * connections accepted from it that are not classified yet: a server that
 * accepts one connection and closes its listener (socat, iperf3 -1) must
 * still be registered when its client, connected a moment earlier, checks
 * the registry. Per-process counts (a forked child has its own copy, and its
 * own duplicate of the registration's fd).
 */
struct listener_reg {
	struct smcr_listener *l;
	atomic_uint refs;
	uint16_t port;
	pid_t pid;
	/* bound to one address: its accepted connections' local address (else AF_UNSPEC) */
	struct sockaddr_storage addr;
};

const struct sockaddr_storage *smcr_smc_accepted_local(const struct smcr_fd_entry *e)
{
	const struct listener_reg *r = e->listener;

	if (!r || !(smcr_fd_entry_flags(e) & SMCR_FD_F_ACCEPTED) || r->addr.ss_family == AF_UNSPEC)
		return NULL;
	return &r->addr;
}

static struct listener_reg *reg_get(struct listener_reg *r)
{
	atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
	return r;
}

void smcr_smc_listener_put(struct listener_reg *r)
{
	if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (r->pid == smcr_smc_pid)
		own_listener_set(r->port, r->pid, false);
	smcr_listener_unregister(r->l);
	free(r);
}

/* Is the entry a listener that this process registered (not one that followed fork)? */
bool smcr_smc_registered_here(const struct smcr_fd_entry *e)
{
	return e->listener && ((struct listener_reg *)e->listener)->pid == smcr_smc_pid;
}

/* Fork: the table of own listeners is consistent in the child (pthread_atfork). */
void smcr_smc_listeners_lock(void)
{
	pthread_mutex_lock(&own_lock);
}

void smcr_smc_listeners_unlock(void)
{
	pthread_mutex_unlock(&own_lock);
}

/* A decided connection no longer keeps its listener registered. */
void smcr_smc_drop_listener_ref(struct smcr_fd_entry *e)
{
	if ((smcr_fd_entry_flags(e) & SMCR_FD_F_ACCEPTED) && e->listener &&
	    smcr_fd_entry_mode(e) != SMCR_FD_CANDIDATE) {
		smcr_smc_listener_put(e->listener);
		e->listener = NULL;
	}
}

/* ---- listen() and accept() --------------------------------------------------- */

/*
 * RFC 7609 option mode (design §4): the sock_ops program, when attached,
 * announces SMC in the SYN-ACKs of a marked listener's port and in a marked
 * client's SYN.  Only candidate TCP sockets are marked, and only before the
 * first listen() / connect(); a marked client proposes whenever the peer
 * answers (smcr_smc_client_decide(), smcr_sock_connect()).
 */
void smcr_smc_before_listen(int fd)
{
	struct smcr_fd_entry *e;

	if (!smcr_smc_enabled || !smcr_preload_table_writable())
		return;
	e = smcr_fdtab_peek(fd);
	if (!e || (smcr_fd_entry_flags(e) & SMCR_FD_F_LISTENING) ||
	    smcr_fd_entry_mode(e) != SMCR_FD_CANDIDATE)
		return;
	smcr_guard_enter();
	/* (confined: not a call plain TCP would not make, bpf() among them) */
	if (!smcr_smc_confined_now())
		smcr_tcpopt_mark_listen(fd);
	smcr_guard_leave();
}

/*
 * Register the listener `fd` for SMC.  One that a rule keeps on TCP, or that
 * a confined process opens, is only recorded, as not served, for smcr-stat
 * -l: its record goes when the socket does (smcr_smc_release_entry()).
 */
static void register_listener(int fd, struct smcr_fd_entry *e)
{
	struct smcr_listener *l = NULL;
	bool confined;
	int rc;

	if (e->listener || e->unserved)
		return;
	confined = smcr_smc_confined_now();
	if (!smcr_smc_decision_lock(e))
		return;
	smcr_guard_enter();
	if (e->listener || e->unserved) {
		/* another thread's listen() came first */
	} else if (confined) {
		/* A confined process registers no listener (registry.c's calls may be denied). */
		const char *why;

		(void)smcr_smc_aside_reason(&why);
		e->unserved = smcr_listener_unserved(fd, why);
	} else {
		struct listener_reg *r = calloc(1, sizeof(*r));

		rc = r ? smcr_listener_register(fd, &l) : -ENOMEM;
		if (rc == 0) {
			uint16_t port = listener_addr(fd, &r->addr);

			r->l = l;
			r->port = port;
			r->pid = smcr_smc_pid;
			atomic_store(&r->refs, 1);
			e->listener = r;
			e->listen_port = port;
			e->owner = smcr_smc_pid;
			own_listener_set(port, smcr_smc_pid, true);
			if (smcr_listener_needs_claim(l))
				smcr_dbg("fd %d: listener on port %u registered for SMC; the "
					 "registry name is taken later", fd, port);
			else
				smcr_dbg("fd %d: listener on port %u registered for SMC", fd, port);
			smcr_sock_listen_prepare();
		} else if (rc == -ECANCELED) {
			struct sockaddr_storage ss;

			free(r);
			e->unserved = l;
			smcr_info("fd %d: listener on port %u kept TCP by a rule (reason RULE)", fd,
				  listener_addr(fd, &ss));
		} else {
			free(r);
			smcr_warn("fd %d: cannot register the listener for SMC: %s", fd,
				  strerror(-rc));
		}
	}
	smcr_guard_leave();
	smcr_smc_decision_unlock(e);
}

void smcr_smc_after_listen(int fd)
{
	struct smcr_fd_entry *e;

	if (!smcr_smc_enabled || !smcr_preload_table_writable())
		return;
	e = smcr_fdtab_get(fd);
	if (!e)
		return;
	register_listener(fd, e);
	smcr_fdtab_put(e);
}

/*
 * A listener registered while another process held the name (a new nginx
 * master adopts its listeners while the old master's registration stands),
 * or while the process was out of fds, tries to take the name when it
 * accepts, at most once a second per process: once the other registrant has
 * left, clients propose SMC again.
 */
static _Atomic int64_t listen_retry_due_ms;

static bool listen_retry_due(void)
{
	int64_t now = smcr_now_ms();
	int64_t due = atomic_load_explicit(&listen_retry_due_ms, memory_order_relaxed);

	return now >= due && atomic_compare_exchange_strong(&listen_retry_due_ms, &due, now + 1000);
}

void smcr_smc_after_accept(int listen_fd, int fd)
{
	struct smcr_fd_entry *listener, *e;
	struct listener_reg *reg;

	if (!smcr_smc_enabled || !smcr_preload_table_writable())
		return;
	e = smcr_fdtab_peek(fd);
	if (e && smcr_smc_confined_now()) {
		/* No handshake once the process confines its system calls or set up io_uring. */
		const char *why;
		uint32_t reason = smcr_smc_aside_reason(&why);

		smcr_guard_enter();
		smcr_smc_fallback(fd, e, reason, true, "server", why);
		/* A local client may still propose (to another process's registration). */
		smcr_smc_screen_start(e);
		smcr_guard_leave();
		return;
	}
	listener = smcr_fdtab_get(listen_fd);
	reg = listener ? listener->listener : NULL;
	/* (a listener holding its name, the usual case, reads no clock here) */
	if (reg && smcr_listener_needs_claim(reg->l) && listen_retry_due()) {
		smcr_guard_enter();
		if (smcr_listener_claim(reg->l))
			smcr_dbg("fd %d: listener on port %u took the registry name", listen_fd,
				 (unsigned)reg->port);
		smcr_guard_leave();
	}
	/*
	 * the kernel's accepted socket has its listener's SO_ZEROCOPY, SO_LINGER,
	 * TCP_INQ, timestamps, SO_RCVLOWAT and SO_PEEK_OFF
	 */
	if (e && listener) {
		smcr_smc_add_flags(e, smcr_fd_entry_flags(listener) &
					      (SMCR_FD_F_ZEROCOPY | SMCR_FD_F_LINGER_ZERO |
					       SMCR_FD_F_INQ | SMCR_FD_F_TIMESTAMP));
		e->rcvlowat = listener->rcvlowat;
		e->peek_off = listener->peek_off;
	}
	if (e && smcr_tcpopt_peer(fd) == SMCR_TCPOPT_YES) {
		smcr_smc_add_flags(e, SMCR_FD_F_PEER_SMC);
		smcr_dbg("fd %d: the client's SYN announced SMC (RFC 7609 option)", fd);
	}
	if (listener && e && listener->listener && smcr_smc_decision_lock(listener)) {
		/* Read under the listener's lock: a concurrent listen() may set it. */
		if (listener->listener)
			e->listener = reg_get(listener->listener);
		smcr_smc_decision_unlock(listener);
	}
	smcr_fdtab_put(listener);
}

void smcr_smc_listener_shared(int fd)
{
	struct smcr_fd_entry *e = smcr_fdtab_get(fd);

	if (!e)
		return;
	if (e->listener && smcr_smc_decision_lock(e)) {
		/* Read under the entry's lock, as a concurrent listen() may set it. */
		struct listener_reg *r = e->listener;

		if (r) {
			smcr_guard_enter();
			smcr_listener_share(r->l);
			smcr_guard_leave();
		}
		smcr_smc_decision_unlock(e);
	}
	smcr_fdtab_put(e);
}

void smcr_smc_revoke_listener(int fd, struct smcr_fd_entry *e, const char *why)
{
	struct listener_reg *r = e->listener;

	if (!r)
		return;
	smcr_guard_enter();
	smcr_listener_revoke(r->l, fd, why);
	smcr_guard_leave();
	smcr_info("fd %d: listener on port %u no longer served by smcr: %s", fd,
		  (unsigned)r->port, why);
}
