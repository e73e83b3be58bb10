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
 * Tell a fresh xconn which TCP connection it serves, before client_propose
 * or server_accept: its local address selects the RDMA device and GID, and
 * its hang-up wakes the readiness fd.  0 or -errno (-ENODEV: no RDMA device
 * holds a RoCE v2 GID for the local address).
 *
 * (transport.h's create() has no fd yet; folding this into create() is the
 * proposed contract change, see docs in verbs.c.)
 */
int smcr_verbs_bind_tcp(struct smcr_xconn *xc, int tcp_fd);

#endif /* SMCR_VERBS_H */
