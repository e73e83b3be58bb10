/* SPDX-License-Identifier: MIT */
/*
 * The bounded spin's governor, shared by the engine's blocking waits and the
 * preload's poll/select/epoll (design §5: "at most a short bounded spin").
 *
 * Spinning pays only when the peer really is on another CPU: its answer is
 * then microseconds away, while a sleep and wake-up pair costs ~20 us per
 * direction on a VM whose idle vCPUs halt (benchmarks.md §2).  "The peer is
 * not blocked in a wait" (the shm transport's `sleeping` word) is necessary
 * but not sufficient: a runnable peer may be waiting for a CPU that a third
 * process holds, or for ours.  Then every spin burns its whole budget while
 * it delays the very peer it waits for (measured with a QEMU guest using both
 * vCPUs: a fixed 50 us spin made the 14 B round trip 3.5x slower than TCP and
 * 65000 B throughput 0.44x).
 *
 * So the governor learns from outcomes.  A spin that ends with the awaited
 * event is a win; one that runs out of budget or sees the peer go to sleep is
 * a loss.  Each loss doubles the number of following waits that skip the
 * spin (1, 3, 7, ... up to 255); each win halves the penalty again.  With a
 * loaded or starved peer the spin fades to 1 wait in 256 (< 0.4% of the
 * budget per wait); a ping-pong between two running processes keeps it.
 * Not thread-safe by itself: races between threads only blur the counters.
 */
#ifndef SMCR_COMMON_SPIN_H
#define SMCR_COMMON_SPIN_H

#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h" /* smcr_now_ns(): how long a spin ran */

#define SMCR_SPIN_GOV_MAX_SHIFT 8u

struct smcr_spin_gov {
	uint16_t skip;  /* waits left that do not spin */
	uint8_t losses; /* the penalty: 2^losses - 1 waits skipped after a loss */
};

/* Spin before this wait? */
static inline bool smcr_spin_gov_allow(struct smcr_spin_gov *g)
{
	if (g->skip == 0)
		return true;
	g->skip--;
	return false;
}

static inline void smcr_spin_gov_result(struct smcr_spin_gov *g, bool won)
{
	if (won) {
		g->losses = (uint8_t)(g->losses / 2);
		return;
	}
	if (g->losses < SMCR_SPIN_GOV_MAX_SHIFT)
		g->losses++;
	g->skip = (uint16_t)((1u << g->losses) - 1);
}

static inline void smcr_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif
