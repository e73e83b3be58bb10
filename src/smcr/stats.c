// SPDX-License-Identifier: MIT
/* Per-process SMC counters; see stats.h. */
#include "smcr/stats.h"

#include <stdatomic.h>

#include "smcr/clc.h"
#include "smcr/conn.h"

static _Atomic uint64_t conns_smc, conns_open, fallbacks, fallback_peernosmc;
static _Atomic uint64_t bytes_sent, bytes_received;
static _Atomic uint32_t last_reason;

void smcr_stats_conn_open(const struct smcr_sock *s)
{
	(void)s;
	atomic_fetch_add_explicit(&conns_smc, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&conns_open, 1, memory_order_relaxed);
}

void smcr_stats_conn_close(const struct smcr_sock *s)
{
	atomic_fetch_sub_explicit(&conns_open, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&bytes_sent, s->bytes_sent, memory_order_relaxed);
	atomic_fetch_add_explicit(&bytes_received, s->bytes_received, memory_order_relaxed);
}

void smcr_stats_fallback(int reason)
{
	atomic_fetch_add_explicit(&fallbacks, 1, memory_order_relaxed);
	if (reason == SMCR_CLC_DECL_PEERNOSMC)
		atomic_fetch_add_explicit(&fallback_peernosmc, 1, memory_order_relaxed);
	atomic_store_explicit(&last_reason, (uint32_t)reason, memory_order_relaxed);
}

void smcr_stats_get(struct smcr_stats_snapshot *out)
{
	out->conns_smc = atomic_load(&conns_smc);
	out->conns_open = atomic_load(&conns_open);
	out->fallbacks = atomic_load(&fallbacks);
	out->fallback_peernosmc = atomic_load(&fallback_peernosmc);
	out->bytes_sent = atomic_load(&bytes_sent);
	out->bytes_received = atomic_load(&bytes_received);
	out->last_fallback_reason = atomic_load(&last_reason);
}
