// SPDX-License-Identifier: MIT
/*
 * A listening socket under smcr: its name in the host's listener registry
 * (registry.c), by which same-host clients know it speaks SMC, and its
 * record for smcr-stat -l: served, not served and why, revoked.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "common/config.h"
#include "common/sockaddr.h"
#include "smcr/confine.h"
#include "smcr/engine.h"
#include "smcr/libc.h"
#include "smcr/policy.h"
#include "smcr/registry.h"
#include "smcr/stats.h"
#include "smcr/tcpopt.h"

struct smcr_listener {
	struct smcr_registration reg; /* no fds: another process held the name, or not served */
	uint16_t port;
	bool served;                  /* false: smcr_listener_unserved() */
	struct smcr_stats_listener *stats;
};

static bool registry_retry_later(int rc)
{
	return rc == -EADDRINUSE || rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM ||
	       rc == -ENOBUFS;
}

/* What this process's clients do with the registry does not change the listener's. */
static uint32_t listener_flags(void)
{
	return smcr_config_get()->samehost ? 0u : SMCR_STATS_LISTENER_F_SAMEHOST_OFF;
}

/* `rc`: what registering it returned. */
static uint32_t listener_status(const struct smcr_listener *l, int rc)
{
	/* A sibling's port name and this socket's own name: clients propose to it too. */
	if (l->reg.owner_fd >= 0 || (l->reg.sibling_holds_port && l->reg.socket_fd >= 0))
		return SMCR_STATS_LISTENER_SERVED;
	return rc == -EADDRINUSE ? SMCR_STATS_LISTENER_NAME_HELD : SMCR_STATS_LISTENER_NO_NAME;
}

struct smcr_listener *smcr_listener_unserved(int listen_fd, const char *why)
{
	struct sockaddr_storage ss = { .ss_family = AF_UNSPEC };
	socklen_t len = sizeof(ss);
	struct smcr_listener *l;
	int saved = errno;

	/*
	 * No registry call: a confined process may not make them; nor a
	 * getsockname its filter denies (the port is then unknown).
	 */
	if (smcr_call_allowed(SMCR_CALL_GETSOCKNAME) &&
	    (smcr_libc.getsockname(listen_fd, (struct sockaddr *)&ss, &len) < 0 ||
	     (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))) {
		errno = saved;
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (l) {
		l->reg.owner_fd = l->reg.probe_fd = l->reg.socket_fd = -1;
		l->port = ss.ss_family == AF_UNSPEC ? 0 : smcr_sockaddr_port(&ss);
		l->stats = smcr_stats_listener_open(listen_fd, SMCR_STATS_LISTENER_NOT_SERVED,
						    listener_flags(), why);
	}
	errno = saved;
	return l;
}

int smcr_listener_register(int listen_fd, struct smcr_listener **out)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct smcr_registration reg;
	struct smcr_listener *l;
	char why[sizeof(((struct smcr_stats_listener *)0)->why)] = "";
	int rc;

	*out = NULL;
	if (smcr_libc.getsockname(listen_fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	if (smcr_policy_listener_excluded(listen_fd, why, sizeof(why))) {
		*out = smcr_listener_unserved(listen_fd, why);
		return -ECANCELED;
	}
	rc = smcr_registry_add(listen_fd, smcr_sockaddr_port(&ss), &reg);
	/*
	 * Registered by another process already (prefork, SO_REUSEPORT): fine;
	 * by another user: warned, and clients will not believe it.  Out of fds
	 * or memory for the name's sockets: a listener lives for days, so it
	 * stays a listener without a name and takes it on a later accept
	 * (smcr_listener_claim()) once the shortage has passed.
	 */
	if (rc < 0 && !registry_retry_later(rc))
		return rc;
	l = calloc(1, sizeof(*l));
	if (!l) {
		smcr_registry_remove(&reg);
		return -ENOMEM;
	}
	l->reg = reg;
	l->port = smcr_sockaddr_port(&ss);
	l->served = true;
	l->stats = smcr_stats_listener_open(listen_fd, listener_status(l, rc), listener_flags(),
					    NULL);
	*out = l;
	return 0;
}

bool smcr_listener_needs_claim(const struct smcr_listener *l)
{
	return l && l->served && l->reg.owner_fd < 0;
}

bool smcr_listener_claim(struct smcr_listener *l)
{
	int saved = errno;
	bool claimed = false;

	if (smcr_listener_needs_claim(l))
		claimed = smcr_registry_claim(l->port, &l->reg) == 0;
	if (claimed)
		smcr_stats_listener_status(l->stats, SMCR_STATS_LISTENER_SERVED, NULL);
	errno = saved;
	return claimed;
}

void smcr_listener_revoke(struct smcr_listener *l, int listen_fd, const char *why)
{
	/* An unserved listener has nothing to withdraw: its record keeps its cause. */
	if (l && !l->served)
		return;
	if (l) {
		smcr_registry_revoke(&l->reg);
		smcr_stats_listener_status(l->stats, SMCR_STATS_LISTENER_REVOKED, why);
	}
	smcr_tcpopt_unserve(listen_fd);
}

void smcr_listener_share(struct smcr_listener *l)
{
	if (l && l->served)
		smcr_registry_share(&l->reg);
}

void smcr_listener_unregister(struct smcr_listener *l)
{
	if (!l)
		return;
	smcr_stats_listener_close(l->stats);
	if (l->served)
		smcr_registry_remove(&l->reg);
	free(l);
}
