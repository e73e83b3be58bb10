/* SPDX-License-Identifier: MIT */
/*
 * The monotonic clock, read the same way by the engine and the interposer:
 * deadlines, keepalives and spins are measured on CLOCK_MONOTONIC, which
 * wall-clock changes do not move.
 */
#ifndef SMCR_COMMON_CLOCK_H
#define SMCR_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t smcr_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t smcr_now_ms(void)
{
	return smcr_now_ns() / 1000000;
}

#endif /* SMCR_COMMON_CLOCK_H */
