/* SPDX-License-Identifier: MIT */
/*
 * The EIDs of SMC-Rv2 (RFC 7609 v2 / the kernel's smc_clc.c): the user EIDs
 * (UEIDs) a client lists in its Proposal; the server takes the first of them
 * that it has too, as Linux's smc_clc_match_eid() does, and names it in its
 * Accept; no EID in common, no SMC-Rv2.
 *
 * Our list, offered as a client and matched as a server, in this order:
 *   1. SMCR_UEID's entries, the explicit setting;
 *   2. the kernel's own UEID table, the one smc-tools' `smcr ueid add` (or
 *      `smcd ueid add`) fills and the kernel's AF_SMC programs use, less the
 *      entries 1 has: read once per process over generic netlink
 *      (SMC_GEN_NETLINK, SMC_NETLINK_DUMP_UEID, a dump for any user), so
 *      that a Linux peer and we agree with no setting on our side;
 *      SMCR_KERNEL_UEID=0 leaves it out;
 *   3. our own "SMCR-USERSPACE-VERBS", which two smcr ends always share;
 * at most SMCR_CLC_MAX_EIDS (8) in all: the first 7 of 1 and 2, then 3.
 * Explicit entries come first because a server picks the first EID of the
 * client's list that it knows: SMCR_UEID decides which EID two peers that
 * share several settle on.
 *
 * System EIDs are not part of this: the kernel uses its SEID only for SMC-D
 * (a Proposal carries it in the SMC-D v2 extension, with the seid flag, and
 * only smc_find_ism_v2_device_serv() matches it; the SMC-R server's match,
 * smc_find_rdma_v2_device_serv(), passes no SEID, and a Linux client proposes
 * SMC-Rv2 only with at least one UEID: smc_find_proposal_devices()).  So a
 * Linux host whose UEID table is empty does not speak SMC-Rv2 at all.
 */
#ifndef SMCR_EID_H
#define SMCR_EID_H

#include <stdint.h>

#include "smcr/clc.h"

/*
 * The rule above, over given lists (pure): `first`'s entries, then `then`'s,
 * each once and not `own`, up to SMCR_CLC_MAX_EIDS - 1 of them, then `own`.
 * Returns the count (at least 1).
 */
unsigned smcr_eid_merge(const uint8_t (*first)[SMCR_CLC_EID_LEN], unsigned n_first,
			const uint8_t (*then)[SMCR_CLC_EID_LEN], unsigned n_then,
			const uint8_t own[SMCR_CLC_EID_LEN],
			uint8_t out[SMCR_CLC_MAX_EIDS][SMCR_CLC_EID_LEN]);

/*
 * Our list with `own` last: SMCR_UEID's and the kernel's table.  The first
 * call reads the kernel's table (two dumps: tens of microseconds on a host,
 * 14-40 ms in the rxe VM under TCG; each receive gives up after 1 s; no smc
 * module, no such family or any error: no entries, said once in the debug
 * log); later calls copy it.
 */
unsigned smcr_eid_list(const uint8_t own[SMCR_CLC_EID_LEN],
		       uint8_t out[SMCR_CLC_MAX_EIDS][SMCR_CLC_EID_LEN]);

/* An EID's length without its blank padding (for logs: "%.*s"). */
int smcr_eid_len(const uint8_t eid[SMCR_CLC_EID_LEN]);

/* Read the kernel's table now if nobody has (the verbs loader thread, ib.c). */
void smcr_eid_prefetch(void);

/* fork, called only by engine.c: the lock of the kernel's UEID table. */
void smcr_eid_fork_prepare(void);
void smcr_eid_fork_done(void);

#endif /* SMCR_EID_H */
