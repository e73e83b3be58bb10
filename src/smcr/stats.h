/* SPDX-License-Identifier: MIT */
/*
 * Per-process SMC counters (handshakes, fallbacks by reason, bytes).  For now
 * process-local; publishing them in a shared-memory file readable by the same
 * user (include/smcr/stats_abi.h) is the next step.
 */
#ifndef SMCR_STATS_H
#define SMCR_STATS_H

#include <stdint.h>

struct smcr_sock;

struct smcr_stats_snapshot {
	uint64_t conns_smc;       /* connections that reached SMC mode */
	uint64_t conns_open;      /* SMC connections alive now */
	uint64_t fallbacks;       /* handshakes that ended on TCP (any reason) */
	uint64_t fallback_peernosmc;
	uint64_t bytes_sent;      /* of closed connections */
	uint64_t bytes_received;
	uint32_t last_fallback_reason;
};

void smcr_stats_conn_open(const struct smcr_sock *s);
void smcr_stats_conn_close(const struct smcr_sock *s);
void smcr_stats_fallback(int reason);
void smcr_stats_get(struct smcr_stats_snapshot *out);

#endif /* SMCR_STATS_H */
