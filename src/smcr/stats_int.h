// SPDX-License-Identifier: MIT
/*
 * Inside the stats writer: stats_area.c publishes the area (the file, fork,
 * exit), stats.c writes the records and counters in it.
 */
#ifndef SMCR_STATS_INT_H
#define SMCR_STATS_INT_H

#include <pthread.h>
#include <stdbool.h>

#include "smcr/stats_abi.h"

#define ADD(field, v) __atomic_fetch_add(&(field), (v), __ATOMIC_RELAXED)
#define LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)
#define SUB(field, v) __atomic_fetch_sub(&(field), (v), __ATOMIC_RELAXED)
#define SET(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)

/*
 * Protects publishing the area (and the switch to a private one) and a
 * forked child's adoption of an INHERITED record.  Its place in the lock
 * order at fork: engine.c.
 */
extern pthread_mutex_t smcr_stats_lock;

/* A forked child that could not get its own area: every stats call is a no-op. */
extern bool smcr_stats_off;

/* The area, published (or made private) at first use; NULL without one. */
struct smcr_stats_file *smcr_stats_area_get(void);

/*
 * The area, for a writer that does not go through smcr_stats_area_get(): in
 * a forked child, no thread may write into the area while another remaps it
 * (its stores would land in the private pages being replaced).
 */
struct smcr_stats_file *smcr_stats_area_settled(void);

/* The area if there is one, never creating it. */
const struct smcr_stats_file *smcr_stats_area_peek(void);

#endif /* SMCR_STATS_INT_H */
