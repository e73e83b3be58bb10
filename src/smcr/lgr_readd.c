// SPDX-License-Identifier: MIT
/*
 * A server's link group left with one link adds a second one again (SMC-Rv2,
 * max_links 2 negotiated), as the kernel's server does: at once after a
 * link is lost (smc_llc_srv_delete_link() ends in smc_llc_add_link_local())
 * and again when a device appears (smcr_port_add()).  Each of those grants
 * READD_TRIES attempts, made by the worker (lgr_worker.c) with the gap
 * between them doubling from READD_GAP_MS: a device that just appeared gets
 * its GIDs and its PNET id a moment later, and a client that rejects our
 * ADD LINK (no device of its own reaches the new GID yet) may have one by
 * the next attempt.  An attempt is what first contact does (lgr_llc.c):
 * another device in the group's subnet reserved (smcr_lgr_alt_reserve),
 * ADD LINK, the client's answer, CONFIRM LINK on the new link; its failure
 * leaves the group as it was, with one link.  Then nothing until the next
 * trigger: no periodic wake-up.  A client waits for the server's ADD LINK,
 * as a kernel client of SMC-Rv2 does for a device of the server's.
 * Group mutex held throughout.
 */
#include "smcr/lgr.h"

#include <string.h>

#include "common/log.h"
#include "smcr/lgr_int.h"
#include "smcr/sys.h"

#define READD_TRIES 4
#define READD_GAP_MS 2000 /* between the first two attempts; doubles after each */

/* A server's group that may carry two links and has one. */
static bool single_link(const struct smcr_lgr *g)
{
	return g->key.role == SMCR_LGR_SERVER && g->max_links >= 2 && g->state == SMCR_LGR_ACTIVE &&
	       g->alt.state == SMCR_LGR_LINK_NONE && !g->alt.port;
}

void smcr_lgr_readd_arm_locked(struct smcr_lgr *g, int64_t delay_ms, const char *why)
{
	int64_t now = smcr_now_ms();

	/* (a trigger whose first attempt is still to come: one more changes nothing) */
	if (!single_link(g) || (g->readd_left == READD_TRIES && g->readd_at_ms > now))
		return;
	smcr_info("verbs: link group %u: %s: trying a second link again", g->id, why);
	g->readd_left = READD_TRIES;
	g->readd_gap_ms = READD_GAP_MS;
	g->readd_at_ms = now + delay_ms;
	smcr_lgr_worker_wake();
}

void smcr_lgr_readd_tick_locked(struct smcr_lgr *g, int64_t now, int64_t *next)
{
	unsigned attempt;
	int rc;

	if (!g->readd_left)
		return;
	if (!single_link(g) || now < g->readd_at_ms) {
		/* (an ADD LINK in flight: its reject may come before then) */
		if (g->readd_at_ms > now && g->readd_at_ms < *next)
			*next = g->readd_at_ms;
		if (g->state == SMCR_LGR_DEAD || g->max_links < 2)
			g->readd_left = 0;
		return;
	}
	attempt = READD_TRIES - --g->readd_left;
	g->readd_at_ms = now + g->readd_gap_ms;
	g->readd_gap_ms *= 2;
	if (g->readd_left && g->readd_at_ms < *next)
		*next = g->readd_at_ms;
	rc = smcr_lgr_alt_reserve_locked(g);
	if (rc) {
		smcr_info("verbs: link group %u: no device for a second link (%s), attempt %u of %u",
			  g->id, strerror(-rc), attempt, READD_TRIES);
		return;
	}
	smcr_info("verbs: link group %u: adding a second link on %s, attempt %u of %u", g->id,
		  g->alt.port->name, attempt, READD_TRIES);
	smcr_lgr_llc_srv_add_link(g);
	smcr_lgr_publish_locked(g);
}
