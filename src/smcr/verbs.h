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

#endif /* SMCR_VERBS_H */
