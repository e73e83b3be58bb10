/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport: SMC-R between hosts over an RDMA device (RoCE v2),
 * implementing transport.h with src/smcr/ib.c and wr.c.  This header does not
 * include <infiniband/verbs.h>: the engine may include it.
 */
#ifndef SMCR_VERBS_H
#define SMCR_VERBS_H

#include "smcr/transport.h"

extern const struct smcr_transport_ops smcr_verbs_ops;

/*
 * Link groups (lgr.h): how long one with no connection is kept for reuse
 * (ms; default 5000), and how many this process has (each holds one QP).
 */
void smcr_verbs_set_lgr_idle_ms(int ms);
unsigned smcr_verbs_lgr_count(void);

/* A listener may soon be offered SMC-R: get the slow one-time set-up done (ib.h). */
void smcr_verbs_prepare(void);

/*
 * For tests that play a misbehaving peer (tests/rxe): the link group behind
 * a connection (struct smcr_lgr, lgr.h) and the peer's RMB as CLC described it.
 */
struct smcr_lgr;
struct smcr_lgr *smcr_verbs_lgr(struct smcr_xconn *xc);
void smcr_verbs_peer_rmb(const struct smcr_xconn *xc, uint64_t *addr, uint32_t *rkey,
			 uint32_t *size);

#endif /* SMCR_VERBS_H */
