// SPDX-License-Identifier: MIT
/*
 * A link group's pool of registered buffers (see lgr.h): RMBs the peer may
 * write into and send buffers our WRITEs read from, each registered once on
 * every link's PD and reused by the group's later connections (zeroed
 * first), and the RMBs of connections that left before the peer said
 * "closed", which wait until it does.
 */
#include "smcr/lgr.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "smcr/cdc.h"
#include "smcr/lgr_int.h"
#include "smcr/sys.h"

#define LGR_POOL_MAX 32 /* free buffers kept per group, and retired RMBs waiting */


/* Register b on the second link's PD too.  Group mutex held.  0 or -errno. */
int smcr_lgr_buf_alt_reg_locked(struct smcr_lgr *g, struct smcr_lgr_buf *b)
{
	if (b->mr_alt)
		return 0;
	b->mr_alt = b->rmb ? smcr_ib_reg_rmb(g->alt.port, b->mem, b->size, &b->iova_alt)
			   : smcr_ib_reg_source(g->alt.port, b->mem, b->size);
	return b->mr_alt ? 0 : -ENOMEM;
}

static void pool_add_locked(struct smcr_lgr *g, struct smcr_lgr_buf *b)
{
	memset(b->mem, 0, b->size);
	b->next = g->free_bufs;
	g->free_bufs = b;
}

/* The peer closed the connection that had `token`: its RMB may be reused. */
void smcr_lgr_buf_retired_locked(struct smcr_lgr *g, uint32_t token)
{
	for (struct smcr_lgr_buf **p = &g->retiring; *p; p = &(*p)->next) {
		struct smcr_lgr_buf *b = *p;

		if (b->retire_token == token) {
			*p = b->next;
			pool_add_locked(g, b);
			return;
		}
	}
}

struct smcr_lgr_buf *smcr_lgr_buf_get(struct smcr_lgr *g, uint32_t size, bool rmb)
{
	struct smcr_lgr_buf *b = NULL;

	pthread_mutex_lock(&g->mu);
	for (struct smcr_lgr_buf **p = &g->free_bufs; *p; p = &(*p)->next) {
		if ((*p)->size == size && (*p)->rmb == rmb) {
			b = *p;
			*p = b->next;
			break;
		}
	}
	pthread_mutex_unlock(&g->mu);
	if (b) {
		b->fresh = false;
		return b; /* zeroed when it came back */
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->size = size;
	b->rmb = rmb;
	b->fresh = true;
	b->mem = aligned_alloc(4096, size);
	if (!b->mem) {
		free(b);
		return NULL;
	}
	memset(b->mem, 0, size);
	/* RMB: the peer may write into it and nothing else; a send buffer: local reads only */
	b->mr = rmb ? smcr_ib_reg_rmb(g->port, b->mem, size, &b->iova)
		    : smcr_ib_reg_source(g->port, b->mem, size);
	if (!b->mr) {
		free(b->mem);
		free(b);
		return NULL;
	}
	pthread_mutex_lock(&g->mu);
	/* a second link (up or being added) knows every buffer: ADD LINK lists the RMBs */
	if (g->alt.port && smcr_lgr_buf_alt_reg_locked(g, b)) {
		pthread_mutex_unlock(&g->mu);
		ibv_dereg_mr(b->mr);
		free(b->mem);
		free(b);
		return NULL;
	}
	b->all_next = g->all_bufs;
	g->all_bufs = b;
	g->nbufs++;
	pthread_mutex_unlock(&g->mu);
	return b;
}

void smcr_lgr_buf_put(struct smcr_lgr *g, struct smcr_lgr_buf *b, bool reuse)
{
	unsigned nfree = 0;

	if (!b)
		return;
	if (reuse) {
		/* zeroed before anyone sees it again: RMBs and send buffers alike */
		memset(b->mem, 0, b->size);
		pthread_mutex_lock(&g->mu);
		for (struct smcr_lgr_buf *f = g->free_bufs; f; f = f->next)
			nfree++;
		if (g->state != SMCR_LGR_DEAD && nfree < LGR_POOL_MAX) {
			b->next = g->free_bufs;
			g->free_bufs = b;
			b = NULL;
		}
		pthread_mutex_unlock(&g->mu);
		if (!b)
			return;
	}
	pthread_mutex_lock(&g->mu);
	if (b->rmb && g->state == SMCR_LGR_ACTIVE)
		(void)smcr_lgr_llc_send_rkey(g, false, b->mr->rkey, b->iova);
	for (struct smcr_lgr_buf **p = &g->all_bufs; *p; p = &(*p)->all_next) {
		if (*p == b) {
			*p = b->all_next;
			break;
		}
	}
	if (b->mr_alt)
		ibv_dereg_mr(b->mr_alt);
	g->nbufs--;
	pthread_mutex_unlock(&g->mu);
	ibv_dereg_mr(b->mr);
	free(b->mem);
	free(b);
}

/*
 * With two links the answer is awaited (bounded), as the kernel's client
 * does (smc_llc_do_confirm_rkey before its CLC Confirm): a Linux server that
 * takes our Confirm's rtoken (on the second link) before this message makes
 * two rtoken entries of one RMB, and the connection's has no rkey on the
 * first link, so after a failover to it the server writes with rkey 0 (seen:
 * remote access error, both QPs in error, the group gone).
 */
void smcr_lgr_rkey_confirm(struct smcr_lgr *g, const struct smcr_lgr_buf *b)
{
	int64_t deadline = smcr_now_ms() + SMCR_LGR_LLC_WAIT_MS;
	uint64_t mine = 0;

	pthread_mutex_lock(&g->mu);
	if (g->state == SMCR_LGR_ACTIVE && b->rmb && b->fresh) {
		if (smcr_lgr_llc_send_rkey(g, true, b->mr->rkey, b->iova))
			smcr_lgr_fail_locked(g, "cannot send CONFIRM RKEY");
		else
			mine = ++g->rkey_confirms_sent;
	}
	while (mine && g->state == SMCR_LGR_ACTIVE && g->alt.state == SMCR_LGR_LINK_UP &&
	       g->rkey_confirms_answered < mine && smcr_now_ms() < deadline) {
		if (smcr_lgr_arm_locked(g) < 0) {
			smcr_lgr_fail_locked(g, "cannot arm the completion queue");
			break;
		}
		smcr_lgr_drain_locked(g);
		if (g->rkey_confirms_answered >= mine)
			break;
		pthread_mutex_unlock(&g->mu);
		(void)smcr_sys_wait_fd(g->epfd, POLLIN, smcr_now_ms() + LGR_WAIT_SLICE_MS);
		pthread_mutex_lock(&g->mu);
	}
	pthread_mutex_unlock(&g->mu);
}

void smcr_lgr_buf_retire(struct smcr_lgr *g, struct smcr_lgr_buf *b, struct smcr_lgr_conn *c)
{
	unsigned waiting = 0;
	bool closed = false;

	pthread_mutex_lock(&g->mu);
	smcr_lgr_drain_locked(g); /* the closing CDC may be in the completion queue */
	/* c leaves in the same breath: a CDC for its token now finds the RMB */
	for (struct smcr_lgr_conn **p = &g->conns; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			g->nconns--;
			break;
		}
	}
	for (uint32_t i = 0; i < c->qcount; i++)
		closed |= (c->q[(c->qhead + i) % SMCR_LGR_CONN_QLEN][SMCR_CDC_OFF_CONN_FLAGS] &
			   (SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_ABORT)) != 0;
	for (struct smcr_lgr_buf *r = g->retiring; r; r = r->next)
		waiting++;
	if (g->state != SMCR_LGR_DEAD && (closed || waiting < LGR_POOL_MAX)) {
		if (closed) {
			pool_add_locked(g, b);
		} else {
			b->retire_token = c->token;
			b->next = g->retiring;
			g->retiring = b;
		}
		b = NULL;
	}
	pthread_mutex_unlock(&g->mu);
	smcr_sys_close(c->efd);
	c->efd = -1;
	if (b)
		smcr_lgr_buf_put(g, b, false);
}
