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

#endif /* SMCR_VERBS_H */
